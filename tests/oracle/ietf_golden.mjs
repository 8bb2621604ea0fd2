// SPDX-License-Identifier: MIT
// ietf_golden.mjs: encode IETF moq-transport messages (drafts 14-20) with the
// reference JS implementation (@moq/net 0.3.4, its ietf/ folder) and print
// them as a C table of hex vectors.
//
//   node tests/oracle/ietf_golden.mjs > tests/oracle/ietf_golden_vectors.h
//
// It uses the copy of @moq/net that tests/web pins (package-lock.json there;
// `npm ci` in tests/web installs it). Every vector is rebuilt field by field
// in tests/test_ietf_codec.c, which encodes the same message with
// moq/ietf_codec.c and compares the bytes, and decodes the bytes back; the
// fields below must stay in sync with that file.
import { readFileSync } from "node:fs";
import * as Ietf from "../web/node_modules/@moq/net/ietf/index.js";
import { Writer } from "../web/node_modules/@moq/net/stream.js";

const V = Ietf.Version;
const DRAFTS = [[14, V.DRAFT_14], [15, V.DRAFT_15], [16, V.DRAFT_16], [17, V.DRAFT_17],
	[18, V.DRAFT_18], [19, V.DRAFT_19], [20, V.DRAFT_20]];

async function enc(version, fn) {
	const chunks = [];
	const w = new Writer(new WritableStream({ write(c) { chunks.push(Uint8Array.from(c)); } }), version);
	await fn(w);
	w.close();
	await w.closed;
	return Buffer.concat(chunks).toString("hex");
}

const out = [];
const add = async (name, version, fn) => {
	try {
		out.push([name, await enc(version, fn)]);
	} catch (e) {
		out.push([name, `!${e.message}`.replaceAll('"', "'")]);
	}
};
// A control message: type (version's varint), then the message's own framing.
const msg = (m) => async (w) => {
	await w.u53(m.constructor.id);
	await m.encode(w, w.version);
};

// Varints of both encodings.
for (const v of [0n, 63n, 64n, 127n, 128n, 16383n, 16384n, 2097151n, 2097152n, 268435456n,
	(1n << 35n), (1n << 42n), (1n << 49n), (1n << 56n), (1n << 62n) - 1n]) {
	await add(`varint16_${v}`, V.DRAFT_16, (w) => w.u62(v));
	await add(`varint20_${v}`, V.DRAFT_20, (w) => w.u62(v));
}

const te = new TextEncoder();
for (const [n, v] of DRAFTS) {
	const opts = new Ietf.SetupOptions();
	opts.setVarint(Ietf.SetupOption.MaxRequestId, 42069n);
	opts.setBytes(Ietf.SetupOption.Path, te.encode("/demo?jwt=abc"));
	opts.setBytes(Ietf.SetupOption.Implementation, te.encode("moq-lite-js"));
	if (n <= 16) {
		await add(`client_setup_d${n}`, v, msg(new Ietf.ClientSetup({
			versions: [0xff0dad02, 0xff0dad01, V.DRAFT_14], parameters: opts })));
		await add(`server_setup_d${n}`, v, msg(new Ietf.ServerSetup({ version: V.DRAFT_14,
			parameters: opts })));
		await add(`max_request_id_d${n}`, v, msg(new Ietf.MaxRequestId({ requestId: 300n })));
		await add(`requests_blocked_d${n}`, v, msg(new Ietf.RequestsBlocked({ requestId: 42n })));
		await add(`unsubscribe_d${n}`, v, msg(new Ietf.Unsubscribe({ requestId: 6n })));
		await add(`publish_namespace_done_d${n}`, v, msg(new Ietf.PublishNamespaceDone({
			trackNamespace: "demo/room", requestId: 3n })));
		await add(`publish_namespace_cancel_d${n}`, v, msg(new Ietf.PublishNamespaceCancel({
			trackNamespace: "demo/room", requestId: 3n, errorCode: 4, reasonPhrase: "gone" })));
	} else {
		await add(`setup_d${n}`, v, async (w) => {
			await w.u53(Ietf.Setup.id);
			await new Ietf.Setup({ parameters: opts }).encode(w, v);
		});
	}
	await add(`goaway_d${n}`, v, msg(new Ietf.GoAway({ newSessionUri: "https://relay.example/moq",
		timeout: 5000n })));
	await add(`goaway_empty_d${n}`, v, msg(new Ietf.GoAway({ newSessionUri: "" })));
	if (n >= 15) {
		await add(`request_ok_d${n}`, v, msg(new Ietf.RequestOk({ requestId: 9n })));
		await add(`request_error_d${n}`, v, msg(new Ietf.RequestError({ requestId: 9n,
			errorCode: 4, reasonPhrase: "not found", retryInterval: 250n })));
		await add(`namespace_d${n}`, v, msg(new Ietf.SubscribeNamespaceEntry({ suffix: "room" })));
		await add(`namespace_done_d${n}`, v, msg(new Ietf.SubscribeNamespaceEntryDone({ suffix: "room" })));
	} else {
		await add(`subscribe_error_d${n}`, v, msg(new Ietf.SubscribeError({ requestId: 9n,
			errorCode: 4, reasonPhrase: "not found" })));
		await add(`publish_namespace_ok_d${n}`, v, msg(new Ietf.PublishNamespaceOk({ requestId: 3n })));
		await add(`publish_namespace_error_d${n}`, v, msg(new Ietf.PublishNamespaceError({
			requestId: 3n, errorCode: 1, reasonPhrase: "unauthorized" })));
		await add(`subscribe_namespace_ok_d${n}`, v, msg(new Ietf.SubscribeNamespaceOk({ requestId: 5n })));
		await add(`subscribe_namespace_error_d${n}`, v, msg(new Ietf.SubscribeNamespaceError({
			requestId: 5n, errorCode: 4, reasonPhrase: "unknown" })));
		await add(`publish_error_d${n}`, v, msg(new Ietf.PublishError({ requestId: 7n,
			errorCode: 3, reasonPhrase: "no" })));
		await add(`track_status_d${n}`, v, msg(new Ietf.TrackStatus({ trackNamespace: "demo/room",
			trackName: "video", statusCode: 0, lastGroupId: 12n, lastObjectId: 3n })));
	}
	if (n <= 15)
		await add(`unsubscribe_namespace_d${n}`, v, msg(new Ietf.UnsubscribeNamespace({ requestId: 5n })));
	if (n >= 17)
		await add(`publish_blocked_d${n}`, v, msg(new Ietf.PublishBlocked({ suffix: "room", trackName: "video" })));
	if (n >= 18)
		await add(`subscribe_namespace_d${n}`, v, msg(new Ietf.SubscribeNamespace({ namespace: "demo",
			requestId: 4n })));
	else
		await add(`subscribe_namespace_d${n}`, v, msg(new Ietf.SubscribeNamespaceLegacy({
			namespace: "demo", requestId: 4n })));

	// SUBSCRIBE with each filter the draft can express.
	const filters = [["live", { kind: "nextObject" }], ["all", { kind: "unfiltered" }],
		["range", { kind: "absolute", startGroup: 10n, startObject: 0n, endGroup: 20n }],
		["next", { kind: "relative", groups: 0n }]];
	if (n === 20) filters.push(["rel2", { kind: "relative", groups: 2n }]);
	for (const [fname, filter] of filters)
		await add(`subscribe_${fname}_d${n}`, v, msg(new Ietf.Subscribe({ requestId: 2n,
			trackNamespace: "demo/room", trackName: "video", subscriberPriority: 7, filter })));
	await add(`subscribe_ok_d${n}`, v, msg(new Ietf.SubscribeOk({ requestId: 2n, trackAlias: 17n,
		properties: n === 15 ? { groupOrder: 2 } : {} })));
	if (n === 20)
		await add(`subscribe_ok_largest_d${n}`, v, msg(new Ietf.SubscribeOk({ requestId: 2n,
			trackAlias: 17n, largest: { groupId: 5n, objectId: 2n } })));
	if (n >= 17)
		await add(`subscribe_ok_props_d${n}`, v, msg(new Ietf.SubscribeOk({ requestId: 2n,
			trackAlias: 17n, properties: { timescale: 1000, groupOrder: 2 } })));
	await add(`subscribe_update_d${n}`, v, msg(new Ietf.SubscribeUpdate({ requestId: 2n })));
	await add(`publish_done_d${n}`, v, msg(new Ietf.PublishDone({ requestId: 2n, statusCode: 2,
		reasonPhrase: "ended" })));
	await add(`publish_namespace_d${n}`, v, msg(new Ietf.PublishNamespace({ requestId: 3n,
		trackNamespace: "demo/room" })));
	await add(`track_status_request_d${n}`, v, msg(new Ietf.TrackStatusRequest({ requestId: 8n,
		trackNamespace: "demo/room", trackName: "video" })));
	await add(`publish_d${n}`, v, msg(new Ietf.Publish({ requestId: 7n, trackNamespace: "demo/room",
		trackName: "video", trackAlias: 33n, groupOrder: 2, contentExists: true,
		largest: { groupId: 4n, objectId: 1n }, forward: true })));

	// Data plane: a subgroup header, its objects, a fetch stream.
	for (const [hname, flags, sub] of [
		["sg0", { hasExtensions: false, hasSubgroupObject: false, hasSubgroup: false, hasEnd: true,
			hasPriority: true, firstObject: true }, 0],
		["sgx", { hasExtensions: true, hasSubgroupObject: false, hasSubgroup: true, hasEnd: false,
			hasPriority: true, firstObject: false }, 3],
		["sgnp", { hasExtensions: false, hasSubgroupObject: true, hasSubgroup: false, hasEnd: false,
			hasPriority: false, firstObject: true }, 0]]) {
		if (n === 14 && !flags.hasPriority) continue;
		await add(`group_${hname}_d${n}`, v, (w) => new Ietf.Group({ trackAlias: 17n, groupId: 300,
			subGroupId: sub, publisherPriority: 5, flags }).encode(w, v));
	}
	const plain = { hasExtensions: false, hasEnd: false };
	await add(`objects_d${n}`, v, async (w) => {
		await new Ietf.Frame({ payload: te.encode("hello") }).encode(w, plain, undefined, v, 0);
		await new Ietf.Frame({ payload: new Uint8Array(0) }).encode(w, plain, undefined, v, 0);
		await new Ietf.Frame({ payload: te.encode("x".repeat(200)) }).encode(w, plain, undefined, v, 0);
		await new Ietf.Frame({}).encode(w, plain, undefined, v, 0);
	});
	await add(`objects_ext_d${n}`, v, async (w) => {
		const f = { hasExtensions: true, hasEnd: false };
		await new Ietf.Frame({ payload: te.encode("hi") }).encode(w, f, undefined, v, 4);
	});
	await add(`fetch_stream_d${n}`, v, async (w) => {
		await w.u53(Ietf.FetchHeader.type);
		await new Ietf.FetchHeader({ requestId: 10n }).encode(w, v);
		await new Ietf.FetchFrame({ payload: te.encode("ab") }).encode(w,
			{ first: true, group: 7, object: 0 }, undefined, v);
		await new Ietf.FetchFrame({ payload: te.encode("cd") }).encode(w,
			{ first: false, group: 7, object: 1 }, undefined, v);
	});
}

console.log("/* SPDX-License-Identifier: MIT */");
console.log("/* clang-format off */");
console.log("/* Generated by tests/oracle/ietf_golden.mjs from @moq/net " +
	JSON.parse(readFileSync(new URL("../web/node_modules/@moq/net/package.json", import.meta.url))).version +
	"; do not edit. A hex starting with '!' is a message @moq/net refuses to encode. */");
console.log("static const struct ietf_vec { const char *name; const char *hex; } ietf_vecs[] = {");
for (const [n, h] of out) console.log(`\t{ "${n}", "${h}" },`);
console.log("};");
