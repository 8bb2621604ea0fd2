// SPDX-License-Identifier: MIT
// golden.mjs: encode moq-lite messages with the reference JS client (@moq/net,
// its lite/ folder) and print them as a C table of hex vectors.
//
//   cd tests/oracle && npm ci && node golden.mjs > golden_vectors.h
//
// Every vector's name is rebuilt field by field in tests/test_moq_codec.c,
// which encodes the same message with moq/codec.c and compares the bytes.
// The fields below must stay in sync with that file.
import { readFileSync } from "node:fs";
import * as Lite from "./node_modules/@moq/net/lite/index.js";
import { Writer } from "./node_modules/@moq/net/stream.js";
import * as Path from "./node_modules/@moq/net/path.js";

const V3 = Lite.Version.DRAFT_03, V4 = Lite.Version.DRAFT_04, V5 = Lite.Version.DRAFT_05;
const VERS = [[3, V3], [4, V4], [5, V5]];

async function enc(fn) {
	const chunks = [];
	const w = new Writer(new WritableStream({ write(c) { chunks.push(Uint8Array.from(c)); } }));
	await fn(w);
	w.close();
	await w.closed;
	return Buffer.concat(chunks).toString("hex");
}
function zigzag(d) { return d >= 0n ? d << 1n : (-d << 1n) - 1n; }

const out = [];
const add = async (name, fn) => out.push([name, await enc(fn)]);

for (const v of [0n, 37n, 63n, 64n, 15293n, 16383n, 16384n, 494878333n, 1073741823n,
	1073741824n, 151288809941952652n, (1n << 62n) - 1n])
	await add(`varint_${v}`, (w) => w.u62(v));

await add("setup5_full", (w) => new Lite.Setup({ probe: Lite.ProbeLevel.Report,
	path: "live/room?jwt=abc", role: Lite.Role.Publisher, origin: 12345n }).encode(w, V5));
await add("setup5_empty", (w) => new Lite.Setup({}).encode(w, V5));
await add("setup5_sub", (w) => new Lite.Setup({ role: Lite.Role.Subscriber, origin: 7n }).encode(w, V5));

for (const [n, v] of VERS) {
	await add(`announce_req${n}`, (w) => new Lite.AnnounceRequest("demo", 7n).encode(w, v));
	await add(`announce_req${n}_root`, (w) => new Lite.AnnounceRequest("", 0n).encode(w, v));
	await add(`announce${n}_active`, (w) => Lite.encodeAnnounceBroadcast(w,
		{ status: "active", suffix: "room1", hops: [5n, 300n] }, v));
	await add(`announce${n}_ended`, (w) => Lite.encodeAnnounceBroadcast(w,
		{ status: "ended", suffix: "room1" }, v));
	await add(`subscribe${n}_live`, (w) => new Lite.Subscribe({ id: 1n, broadcast: "demo/room",
		track: "video", priority: 7, ordered: true, maxLatency: 5000 }).encode(w, v));
	await add(`subscribe${n}_range`, (w) => new Lite.Subscribe({ id: 300n, broadcast: "demo/room",
		track: "audio", priority: 255, ordered: false, maxLatency: 0, startGroup: 10,
		endGroup: 20 }).encode(w, v));
	await add(`subscribe_update${n}`, (w) => new Lite.SubscribeUpdate({ priority: 3,
		ordered: false, maxLatency: 250, startGroup: 4 }).encode(w, v));
	if (n < 5) {
		await add(`subscribe_ok${n}`, (w) => Lite.encodeSubscribeResponse(w, { ok: new Lite.SubscribeOk({
			priority: 7, ordered: true, maxLatency: 5000, startGroup: 0 }) }, v));
		await add(`subscribe_drop${n}`, (w) => Lite.encodeSubscribeResponse(w, { drop:
			new Lite.SubscribeDrop({ start: 3, end: 5, error: 31 }) }, v));
	}
	if (n >= 4) {
		await add(`goaway${n}`, (w) => new Lite.Goaway("https://relay.example/moq").encode(w, v));
		await add(`goaway${n}_empty`, (w) => new Lite.Goaway("").encode(w, v));
	}
	await add(`probe${n}`, (w) => new Lite.Probe({ bitrate: 2500000, rtt: 30 }).encode(w, v));
	await add(`fetch${n}`, (w) => new Lite.Fetch("demo/room", "video", 9, 17).encode(w, v));
}
await add("announce_ok5", (w) => new Lite.AnnounceOk(99n, 2).encode(w, V5));
await add("subscribe_start5", (w) => Lite.encodeSubscribeResponse(w, { start: new Lite.SubscribeStart(42) }, V5));
await add("subscribe_end5", (w) => Lite.encodeSubscribeResponse(w, { end: new Lite.SubscribeEnd(100) }, V5));
await add("subscribe_drop5", (w) => Lite.encodeSubscribeResponse(w, { drop:
	new Lite.SubscribeDrop({ start: 2, end: 3, error: 26 }) }, V5));
await add("track5", (w) => new Lite.Track("demo/room", "video").encode(w, V5));
await add("track_info5", (w) => new Lite.TrackInfo({ priority: 5, ordered: true,
	latencyMax: 5000, timescale: 1000 }).encode(w, V5));
await add("group_hdr", async (w) => { await w.u53(0); await new Lite.Group(1n, 42).encode(w); });
await add("group_hdr_big", async (w) => { await w.u53(0); await new Lite.Group(70000n, 20000).encode(w); });

// Frames, written exactly as lite/publisher.js #runGroup writes them.
const big = Uint8Array.from({ length: 200 }, (_, i) => i % 251);
const frames = [[1000n, Buffer.from("hello")], [1033n, Buffer.alloc(0)], [1020n, big]];
await add("frames5", async (w) => {
	let prev = 0n;
	for (const [ts, p] of frames) {
		await w.u62(zigzag(ts - prev)); prev = ts;
		await w.u53(p.byteLength); await w.write(p);
	}
});
await add("frames3", async (w) => {
	for (const [, p] of frames) { await w.u53(p.byteLength); await w.write(p); }
});

// Path normalisation: input -> normalised form (not bytes).
const paths = ["", "/", "a", "/a/", "//a///b//", "a/b/c", "/demo//room/"];

console.log("/* SPDX-License-Identifier: MIT */");
console.log("/* clang-format off */");
console.log("/* Generated by tests/oracle/golden.mjs from @moq/net " +
	JSON.parse(readFileSync(new URL("./node_modules/@moq/net/package.json", import.meta.url))).version +
	"; do not edit. */");
console.log("static const struct golden_vec { const char *name; const char *hex; } golden_vecs[] = {");
for (const [n, h] of out) console.log(`\t{ "${n}", "${h}" },`);
console.log("};");
console.log("static const struct golden_path { const char *in; const char *out; } golden_paths[] = {");
for (const p of paths) console.log(`\t{ "${p}", "${Path.from(p)}" },`);
console.log("};");
