// SPDX-License-Identifier: MIT
// ws_abuse.mjs: WebSocket clients that break qmux-01 get the right close
// (a qmux CONNECTION_CLOSE with the transport error, then a WebSocket Close)
// while an @moq/net subscriber on the same relay keeps receiving: an
// oversized message, a text frame, bad transport parameters, a stream flood
// over the stream limit, flow control overrun; and an upgrade with no
// matching subprotocol gets HTTP 400. TAP on stdout.
// usage: node ws_abuse.mjs <moqdp-relay>
import net from "node:net";
import WebSocket from "ws";
import { done, ok, publish, sleep, startRelay, subscribe } from "./relay.mjs";

function varint(v) {
	v = BigInt(v);
	if (v < 64n) return Buffer.from([Number(v)]);
	if (v < 16384n) return Buffer.from([0x40 | Number(v >> 8n), Number(v & 255n)]);
	if (v < 1n << 30n) {
		const b = Buffer.alloc(4);
		b.writeUInt32BE((Number(v) | 0x80000000) >>> 0);
		return b;
	}
	const b = Buffer.alloc(8);
	b.writeBigUInt64BE(v | (0xc0n << 56n));
	return b;
}
function readVarint(b, o) {
	const t = b[o] >> 6;
	const n = 1 << t;
	let v = BigInt(b[o] & 0x3f);
	for (let i = 1; i < n; i++) v = (v << 8n) | BigInt(b[o + i]);
	return [v, o + n];
}
const TP = 0x3f5153300d0a0d0an;
function param(id, v) {
	const val = varint(v);
	return Buffer.concat([varint(id), varint(val.length), val]);
}
function tpRecord(params) {
	const body = Buffer.concat(params);
	return Buffer.concat([varint(TP), varint(body.length), body]);
}
const goodTP = () =>
	tpRecord([param(1, 30000), param(4, 1 << 20), param(5, 262144), param(6, 262144), param(7, 262144), param(8, 100), param(9, 100)]);

// Find a CONNECTION_CLOSE (0x1c) in a server record after its parameters.
function closeIn(rec) {
	let o = 0;
	while (o < rec.length) {
		let t;
		[t, o] = readVarint(rec, o);
		if (t === TP) {
			let l;
			[l, o] = readVarint(rec, o);
			o += Number(l);
			continue;
		}
		if (t === 0x1cn || t === 0x1dn) {
			const [code] = readVarint(rec, o);
			return { type: Number(t), code: Number(code) };
		}
		return null; // some other frame first: look no further
	}
	return null;
}

// Open a raw client, run @act(ws) once the server's first record came,
// resolve with what the server did: { close (qmux), wsCode, http }.
function abuse(port, act, protocols = ["qmux-01.moq-lite-05"]) {
	return new Promise((resolve) => {
		const ws = new WebSocket(`ws://127.0.0.1:${port}/`, protocols);
		const res = { close: null, wsCode: null, http: null, records: 0 };
		let acted = false;
		const timer = setTimeout(() => {
			ws.terminate();
			resolve(res);
		}, 10000);
		ws.on("unexpected-response", (_req, resp) => {
			res.http = resp.statusCode;
			clearTimeout(timer);
			resolve(res);
		});
		ws.on("message", (data, isBinary) => {
			res.records++;
			const c = isBinary ? closeIn(Buffer.from(data)) : null;
			if (c) res.close = c;
			if (!acted) {
				acted = true;
				act(ws);
			}
		});
		ws.on("close", (code) => {
			res.wsCode = code;
			clearTimeout(timer);
			resolve(res);
		});
		ws.on("error", () => {});
	});
}

const mport = 20000 + Math.floor(Math.random() * 20000);
const relay = await startRelay(process.argv[2], ["--mgmt", `127.0.0.1:${mport}`]);
const metric = async (name) => {
	const t = await (await fetch(`http://127.0.0.1:${mport}/metrics`)).text();
	const m = t.match(new RegExp(`^moqdp_${name} (\\d+)`, "m"));
	return m ? Number(m[1]) : -1;
};
const url = new URL(`http://127.0.0.1:${relay.port}/`);
let pub;
try {
	pub = await publish(url, "abuse/live");
	// the bystander: a subscriber that must keep receiving throughout
	let running = true;
	const bystander = { groups: 0, errors: [], resets: 0 };
	const watch = (async () => {
		while (running) {
			const r = await subscribe(url, "abuse/live", 5, 20000).catch((e) => ({ groups: 0, errors: [String(e)] }));
			bystander.groups += r.groups;
			bystander.errors.push(...r.errors);
			bystander.resets += r.resets?.length ?? 0;
			r.conn?.close();
		}
	})();
	await sleep(1500);
	const before = bystander.groups;

	let r = await abuse(relay.port, (ws) => {
		ws.send(goodTP());
		ws.send(Buffer.alloc(20000)); // PADDING, over max_record_size 16382
	});
	ok(r.close?.type === 0x1c && r.close.code === 0x0a && r.wsCode === 1009, "oversized message: CONNECTION_CLOSE PROTOCOL_VIOLATION, WebSocket 1009", JSON.stringify(r));

	r = await abuse(relay.port, (ws) => {
		ws.send(goodTP());
		ws.send("hello, text");
	});
	ok(r.close?.type === 0x1c && r.wsCode === 1003, "text frame: CONNECTION_CLOSE, WebSocket 1003", JSON.stringify(r));

	r = await abuse(relay.port, (ws) => {
		ws.send(Buffer.concat([varint(0x0b), varint(0), varint(1), Buffer.from("x")])); // STREAM before parameters
	});
	ok(r.close?.type === 0x1c && r.close.code === 0x0a && r.wsCode === 1002, "STREAM before the parameters: PROTOCOL_VIOLATION, WebSocket 1002", JSON.stringify(r));

	r = await abuse(relay.port, (ws) => {
		ws.send(tpRecord([param(4, 5), param(4, 6)])); // a duplicate parameter
	});
	ok(r.close?.type === 0x1c && r.close.code === 0x08 && r.wsCode === 1002, "duplicate transport parameter: TRANSPORT_PARAMETER_ERROR", JSON.stringify(r));

	r = await abuse(relay.port, (ws) => {
		ws.send(tpRecord([param(0x0571c59429cd0845n, 100)])); // max_record_size under 16382
	});
	ok(r.close?.type === 0x1c && r.close.code === 0x08, "max_record_size below 16382: TRANSPORT_PARAMETER_ERROR", JSON.stringify(r));

	r = await abuse(relay.port, (ws) => {
		ws.send(goodTP());
		// 101 client bidi streams (the relay allows 100): stream index 100 is over
		const frames = [];
		for (let i = 0; i <= 100; i++) frames.push(Buffer.concat([varint(0x0a), varint(i * 4), varint(0)]));
		ws.send(Buffer.concat(frames));
	});
	ok(r.close?.type === 0x1c && r.close.code === 0x04 && r.wsCode === 1002, "stream flood over the limit: STREAM_LIMIT_ERROR, WebSocket 1002", JSON.stringify(r));

	r = await abuse(relay.port, (ws) => {
		ws.send(goodTP());
		// RESET_STREAM whose final size (300 KiB) is over the relay's 256 KiB
		// stream window: the bytes it declares were never allowed
		ws.send(Buffer.concat([varint(0x04), varint(2), varint(0), varint(300 * 1024)]));
	});
	ok(r.close?.type === 0x1c && r.close.code === 0x03 && r.wsCode === 1002, "flow control overrun (a final size over the window): FLOW_CONTROL_ERROR", JSON.stringify(r));

	r = await abuse(relay.port, () => {}, ["qmux-00.moq-lite-05", "webtransport"]);
	ok(r.http === 400, "no matching subprotocol: HTTP 400", JSON.stringify(r));

	await sleep(1500);
	running = false;
	await watch;
	ok(bystander.groups > before + 5 && bystander.errors.length === 0, `the bystander kept receiving (${before} groups before, ${bystander.groups} after, ${bystander.resets} resets), every byte verified`, bystander.errors.slice(0, 3).join("; "));
	ok(relay.proc.exitCode === null, "the relay still runs");
	await new Promise((r) => setTimeout(r, 300)); // the workers publish their figures at 10 Hz
	const closes = await metric("ws_protocol_closes_total");
	ok(closes >= 7, `/metrics: moqdp_ws_protocol_closes_total counts them (${closes})`);
	const sessions = await metric("ws_sessions_total");
	ok(sessions >= 8, `/metrics: moqdp_ws_sessions_total (${sessions})`);
} catch (e) {
	ok(false, "no exception", e?.stack ?? String(e));
} finally {
	pub?.stop();
	await relay.stop();
}

// --max-tcp-conns: beyond the bound a connection is closed at once, counted
{
	const mp = 20000 + Math.floor(Math.random() * 20000);
	const r2 = await startRelay(process.argv[2], ["--max-tcp-conns", "2", "--mgmt", `127.0.0.1:${mp}`]);
	const open = () =>
		new Promise((res) => {
			const c = net.connect(r2.port, "127.0.0.1", () => res(c));
			c.on("error", () => res(c));
		});
	try {
		const a = await open();
		const b = await open();
		await new Promise((r) => setTimeout(r, 200));
		const c = await open();
		const closed = await new Promise((res) => {
			const t = setTimeout(() => res(false), 3000);
			c.on("close", () => {
				clearTimeout(t);
				res(true);
			});
			c.resume();
		});
		ok(closed, "--max-tcp-conns 2: a third connection is closed at once");
		await new Promise((r) => setTimeout(r, 300));
		const t = await (await fetch(`http://127.0.0.1:${mp}/metrics`)).text();
		const m = t.match(/^moqdp_tcp_refused_total (\d+)/m);
		ok(m && Number(m[1]) >= 1, "/metrics: moqdp_tcp_refused_total counts it", m?.[0]);
		a.destroy();
		b.destroy();
	} finally {
		await r2.stop();
	}
}
process.exit(done() === 0 ? 0 : 1);
