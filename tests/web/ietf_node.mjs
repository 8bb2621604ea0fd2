// SPDX-License-Identifier: MIT
// ietf_node.mjs: @moq/net 0.3.4's IETF moq-transport client (ietf/, Node 20)
// through moqdp-relay's WebSocket (qmux-01) binding, for each draft 14-20:
// an IETF publisher read by an IETF subscriber and by a moq-lite subscriber,
// a moq-lite publisher read by an IETF subscriber (one cache), every byte
// verified; SUBSCRIBE_NAMESPACE seeing both; unsubscribe; and malformed
// control input closing only the offender. TAP on stdout.
// usage: node ietf_node.mjs <moqdp-relay> [draft ...]
import Session from "@moq/qmux";
import * as Moq from "@moq/net";
import * as Ietf from "./node_modules/@moq/net/ietf/index.js";
import { exchangeSetup } from "./node_modules/@moq/net/connection/handshake.js";
import { Stream } from "./node_modules/@moq/net/stream.js";
import { checkFrame, done, FRAMES, ok, payload, publish, sleep, startRelay, subscribe, waitAnnounced } from "./relay.mjs";

// Node 20 lacks the ES2025 Set methods @moq/net's ietf/publisher.js calls.
for (const [name, fn] of Object.entries({
	difference(o) { return new Set([...this].filter((x) => !o.has(x))); },
	union(o) { return new Set([...this, ...o]); },
	intersection(o) { return new Set([...this].filter((x) => o.has(x))); },
}))
	if (!Set.prototype[name]) Object.defineProperty(Set.prototype, name, { value: fn, configurable: true, writable: true });

// @moq/net logs on stdout; keep TAP clean
console.log = (...a) => process.stderr.write(`${a.join(" ")}\n`);
console.info = console.log;

const VERSIONS = {
	14: Ietf.Version.DRAFT_14, 15: Ietf.Version.DRAFT_15, 16: Ietf.Version.DRAFT_16,
	17: Ietf.Version.DRAFT_17, 18: Ietf.Version.DRAFT_18, 19: Ietf.Version.DRAFT_19,
	20: Ietf.Version.DRAFT_20,
};
const alpnOf = (d) => (d === 14 ? "moq-00" : `moqt-${d}`);

async function transport(port, d) {
	const alpn = alpnOf(d);
	const quic = new Session(`ws://127.0.0.1:${port}/`, {
		protocols: [alpn], versions: { [alpn]: "qmux-01" }, requireProtocol: true,
	});
	await quic.ready;
	return quic;
}

// What @moq/net's connect() does once the ALPN is known (connection/connect.js).
async function ietfConnect(port, d) {
	const quic = await transport(port, d);
	if (quic.protocol !== alpnOf(d)) throw new Error(`negotiated ${quic.protocol}`);
	const version = VERSIONS[d];
	const url = new URL(`http://127.0.0.1:${port}/`);
	if (d >= 17) {
		const { control, solicit, cluster } = await exchangeSetup(quic, version, "ietf-node");
		return new Ietf.Connection({ url, quic, control, solicit, cluster, maxRequestId: 0n, version, client: true });
	}
	const stream = await Stream.open(quic);
	await stream.writer.u53(0x20);
	const params = new Ietf.SetupOptions();
	params.setVarint(Ietf.SetupOption.MaxRequestId, 42069n);
	params.setBytes(Ietf.SetupOption.Implementation, new TextEncoder().encode("ietf-node"));
	await new Ietf.ClientSetup({ versions: [version], parameters: params }).encode(stream.writer, version);
	const t = await stream.reader.u53();
	if (t !== 0x21) throw new Error(`server sent 0x${t.toString(16)}`);
	const server = await Ietf.ServerSetup.decode(stream.reader, version);
	if (d === 14 && server.version !== version) throw new Error(`server chose ${server.version}`);
	const maxRequestId = server.parameters.getVarint(Ietf.SetupOption.MaxRequestId) ?? 0n;
	return new Ietf.Connection({ url, quic, control: stream, maxRequestId, version, client: true });
}

function publishOn(conn, path, everyMs = 40) {
	const broadcast = new Moq.Broadcast.Producer();
	const track = broadcast.createTrack("data");
	conn.publish(Moq.Path.from(path), broadcast);
	let g = null;
	let f = 0;
	let stopped = false;
	const timer = setInterval(() => {
		if (stopped) return;
		if (g === null) {
			g = track.appendGroup();
			f = 0;
		}
		g.writeFrame({ payload: payload(g.sequence, f), timestamp: Moq.Time.Timestamp.now() });
		if (++f === FRAMES) {
			g.close();
			g = null;
		}
	}, everyMs / FRAMES);
	return { stop: () => { stopped = true; clearInterval(timer); broadcast.close(); } };
}

async function subscribeOn(conn, path, want, timeoutMs = 20000) {
	const sub = conn.consume(Moq.Path.from(path)).subscribe("data");
	const res = { groups: 0, frames: 0, errors: [], seqs: [], sub };
	const run = (async () => {
		while (res.groups < want) {
			const g = await sub.recvGroup();
			if (g === undefined) break;
			let n = 0;
			for (;;) {
				let fr;
				try {
					fr = await g.readFrame();
				} catch {
					break;
				}
				if (fr === undefined) break;
				const e = checkFrame(fr.payload);
				if (e) res.errors.push(e);
				const dv = new DataView(fr.payload.buffer, fr.payload.byteOffset, 8);
				if (dv.getUint32(0) !== g.sequence || dv.getUint32(4) !== n)
					res.errors.push(`group ${g.sequence} frame ${n}: carries ${dv.getUint32(0)}/${dv.getUint32(4)}`);
				n++;
				res.frames++;
			}
			if (n === FRAMES) {
				res.groups++;
				res.seqs.push(g.sequence);
			}
		}
	})();
	const timeout = new Promise((_, rej) => setTimeout(() => rej(new Error("timeout")), timeoutMs));
	try {
		await Promise.race([run, timeout]);
	} catch (e) {
		res.errors.push(String(e));
	}
	return res;
}

const relay = await startRelay(process.argv[2]);
const url = new URL(`http://127.0.0.1:${relay.port}/`);
// a connection that dies under @moq/net's own promises must not end the run
process.on("uncaughtException", (e) => process.stdout.write(`# uncaught: ${e}\n`));
process.on("unhandledRejection", (e) => process.stdout.write(`# unhandled: ${e}\n`));
const drafts = process.argv.length > 3 ? process.argv.slice(3).map(Number) : [14, 15, 16, 17, 18, 19, 20];
let litePub = await publish(url, "lite/src");
try {
	// the moq-lite publisher every draft reads: announced before the drafts
	// run (one retry: a slow relay, e.g. under ASan, may miss the first)
	if (!(await waitAnnounced(url, "lite/src", 15000))) {
		litePub.stop();
		litePub = await publish(url, "lite/src");
	}
	ok(await waitAnnounced(url, "lite/src", 15000), "the moq-lite-05 publisher is announced");
	for (const d of drafts) {
		const tag = `draft-${d}`;
		let pubConn;
		let subConn;
		let pub;
		try {
			pubConn = await ietfConnect(relay.port, d);
			ok(pubConn.version === `moq-transport-${d}`, `${tag}: SETUP done (${alpnOf(d)})`, pubConn.version);
			pub = publishOn(pubConn, `ietf${d}/src`);
			ok(await waitAnnounced(url, `ietf${d}/src`), `${tag}: PUBLISH_NAMESPACE reaches the origin table`);

			subConn = await ietfConnect(relay.port, d);
			const a = await subscribeOn(subConn, `ietf${d}/src`, 6);
			ok(a.groups >= 6 && a.errors.length === 0,
				`${tag}: IETF publisher -> IETF subscriber, ${a.groups} groups ${a.frames} objects verified`,
				a.errors.slice(0, 3).join("; "));

			const b = await subscribe(url, `ietf${d}/src`, 4);
			ok(b.groups >= 4 && b.errors.length === 0,
				`${tag}: IETF publisher -> moq-lite-05 subscriber, ${b.groups} groups verified`,
				b.errors.slice(0, 3).join("; "));
			b.conn.close();

			const c = await subscribeOn(subConn, "lite/src", 4);
			ok(c.groups >= 4 && c.errors.length === 0,
				`${tag}: moq-lite publisher -> IETF subscriber, ${c.groups} groups verified`,
				c.errors.slice(0, 3).join("; "));

			// SUBSCRIBE_NAMESPACE sees broadcasts of both protocols
			const seen = new Set();
			const ann = subConn.announced(Moq.Path.from(""));
			const deadline = Date.now() + 8000;
			while (Date.now() < deadline && !(seen.has(`ietf${d}/src`) && seen.has("lite/src"))) {
				const next = await Promise.race([ann.next(), sleep(deadline - Date.now()).then(() => undefined)]);
				if (!next) break;
				if (next.active) seen.add(String(next.path));
			}
			ann.close?.();
			ok(seen.has(`ietf${d}/src`) && seen.has("lite/src"),
				`${tag}: SUBSCRIBE_NAMESPACE sees the IETF and the lite broadcast`, [...seen].join(","));

			// unsubscribe: the relay's subscription on the IETF publisher goes
			// (its upstream subscription closes once no one reads)
			a.sub.close();
			c.sub.close();
			const again = await subscribeOn(subConn, `ietf${d}/src`, 2);
			ok(again.groups >= 2 && again.errors.length === 0, `${tag}: subscribe again after unsubscribe`,
				again.errors.slice(0, 3).join("; "));
			again.sub.close();
		} catch (e) {
			ok(false, `${tag}: no exception`, e?.stack ?? String(e));
		} finally {
			pub?.stop();
			pubConn?.close();
			subConn?.close();
		}
	}

	// malformed input closes only the offender (each on its own session,
	// while the lite subscriber below goes on)
	const closedIn = (quic, ms = 5000) =>
		Promise.race([quic.closed.then((i) => i ?? "closed", (e) => String(e)), sleep(ms).then(() => null)]);
	const bystander = await ietfConnect(relay.port, 20);
	const watch = subscribeOn(bystander, "lite/src", 8, 30000);
	{
		// a control stream that opens with an unknown message (draft-16)
		const quic = await transport(relay.port, 16);
		const s = await Stream.open(quic);
		await s.writer.write(new Uint8Array([0x3f, 0x00, 0x01, 0x00]));
		const r = await closedIn(quic);
		ok(r !== null, "draft-16: an unknown first message closes that session", JSON.stringify(r));
	}
	for (const d of [14, 16]) {
		// a request id out of order (the first must be 0), after a good SETUP
		const quic = await transport(relay.port, d);
		const version = VERSIONS[d];
		const s = await Stream.open(quic);
		await s.writer.u53(0x20);
		await new Ietf.ClientSetup({ versions: [version], parameters: new Ietf.SetupOptions() }).encode(s.writer, version);
		const t = await s.reader.u53();
		const server = await Ietf.ServerSetup.decode(s.reader, version);
		const max = server.parameters.getVarint(Ietf.SetupOption.MaxRequestId);
		ok(t === 0x21 && max > 0n, `draft-${d}: SERVER_SETUP grants MAX_REQUEST_ID ${max}`);
		await s.writer.u53(Ietf.Subscribe.id);
		await new Ietf.Subscribe({ requestId: 4n, trackNamespace: "lite/src", trackName: "data", subscriberPriority: 1 })
			.encode(s.writer, version);
		const r = await closedIn(quic);
		ok(r !== null, `draft-${d}: request id 4 before 0 closes that session (INVALID_REQUEST_ID)`, JSON.stringify(r));
	}
	{
		// draft-20: a request stream with a message type the draft lacks
		const quic = await transport(relay.port, 20);
		const { control } = await exchangeSetup(quic, VERSIONS[20], "bad");
		const s = await Stream.open(quic, { version: VERSIONS[20] });
		await s.writer.write(new Uint8Array([0x15, 0x00, 0x01, 0x00])); // MAX_REQUEST_ID: gone in 17
		const r = await closedIn(quic);
		ok(r !== null && control, "draft-20: MAX_REQUEST_ID on a request stream closes that session", JSON.stringify(r));
	}
	{
		// a control message whose length runs past its stream's end (draft-14)
		const quic = await transport(relay.port, 14);
		const s = await Stream.open(quic);
		await s.writer.write(new Uint8Array([0x20, 0x00, 0x09, 0x01, 0xc0]));
		s.writer.close();
		const r = await closedIn(quic);
		ok(r !== null, "draft-14: a truncated CLIENT_SETUP and FIN closes that session", JSON.stringify(r));
	}
	const w = await watch;
	ok(w.groups >= 8 && w.errors.length === 0, `... an IETF subscriber on another session read ${w.groups} groups meanwhile, every byte verified`,
		w.errors.slice(0, 3).join("; "));
	const still = await subscribe(url, "lite/src", 2);
	ok(still.groups >= 2 && still.errors.length === 0, "... and a moq-lite subscriber still reads");
	still.conn.close();

	// PUBLISH_DONE: an IETF publisher ends its track; the IETF subscriber's
	// subscription ends (no more groups) rather than hanging
	{
		const pc = await ietfConnect(relay.port, 20);
		const p = publishOn(pc, "ietf/ending");
		await waitAnnounced(url, "ietf/ending");
		const sc = await ietfConnect(relay.port, 16);
		const sub = sc.consume(Moq.Path.from("ietf/ending")).subscribe("data");
		const first = await Promise.race([sub.recvGroup(), sleep(8000).then(() => null)]);
		p.stop();
		let ended = false;
		const deadline = Date.now() + 15000;
		while (Date.now() < deadline) {
			const g = await Promise.race([sub.recvGroup(), sleep(deadline - Date.now()).then(() => null)]);
			if (g === undefined) {
				ended = true;
				break;
			}
			if (g === null) break;
		}
		ok(first && ended, "draft-20 publisher ends its track: the draft-16 subscriber gets PUBLISH_DONE (its track ends)");
		pc.close();
		sc.close();
	}

	// GOAWAY on drain (SIGQUIT): every IETF session is told
	{
		const warned = [];
		const warn = console.warn;
		console.warn = (...a) => warned.push(a.join(" "));
		const c16 = await ietfConnect(relay.port, 16);
		const c20 = await ietfConnect(relay.port, 20);
		await sleep(300);
		process.kill(relay.proc.pid, "SIGQUIT");
		const deadline = Date.now() + 8000;
		while (Date.now() < deadline && warned.filter((l) => /GOAWAY/.test(l)).length < 2) await sleep(50);
		console.warn = warn;
		const got = warned.filter((l) => /GOAWAY/.test(l));
		ok(got.some((l) => /control stream/.test(l)) && got.some((l) => /redirect URI/.test(l)),
			"drain: GOAWAY reaches a draft-16 (control stream) and a draft-20 (SETUP stream) session", got.join(" | "));
		c16.close();
		c20.close();
	}
	bystander.close();
} catch (e) {
	ok(false, "no exception", e?.stack ?? String(e));
} finally {
	litePub.stop();
	await relay.stop();
	if (process.env.IETF_DEBUG) process.stderr.write(relay.stderr());
}
process.exit(done() === 0 ? 0 : 1);
