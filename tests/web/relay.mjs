// SPDX-License-Identifier: MIT
// relay.mjs: what the node tests of the TCP side share (issue 15): start
// moqdp-relay on the kernel backend with --tcp 1 on loopback, a TAP writer,
// a publisher of a synthetic broadcast through @moq/net over WebSocket, and
// the frame payloads it sends (every byte derived from group and frame
// number, so a receiver checks every byte).
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import WebSocket from "ws";
import * as Moq from "@moq/net";

// Node 20 has no global WebSocket: @moq/qmux uses the `ws` package's.
globalThis.WebSocket = WebSocket;
// ... nor Promise.withResolvers (ES2024, Node 22), which @moq/net calls.
if (!Promise.withResolvers)
	Promise.withResolvers = function () {
		let resolve;
		let reject;
		const promise = new this((a, b) => {
			resolve = a;
			reject = b;
		});
		return { promise, resolve, reject };
	};
// @moq/net is chatty on the console (debug/warn); keep TAP clean.
console.debug = () => {};
console.warn = () => {};

let planned = 0;
let failed = 0;
export function ok(cond, name, extra) {
	planned++;
	if (cond) {
		process.stdout.write(`ok ${planned} - ${name}\n`);
	} else {
		failed++;
		process.stdout.write(`not ok ${planned} - ${name}${extra !== undefined ? `: ${extra}` : ""}\n`);
	}
	return cond;
}
export function done() {
	process.stdout.write(`1..${planned}\n`);
	return failed;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A frame's payload: its group and frame numbers, then a pattern from them.
export function payload(group, frame) {
	const n = frame === 1 ? 40000 : 300 + ((group * 7 + frame * 13) % 1200);
	const p = new Uint8Array(n);
	const dv = new DataView(p.buffer);
	dv.setUint32(0, group);
	dv.setUint32(4, frame);
	for (let i = 8; i < n; i++) p[i] = (i * 31 + group * 7 + frame * 3) & 0xff;
	return p;
}
export const FRAMES = 3; // frames per group

export function checkFrame(p) {
	if (p.length < 8) return "short frame";
	const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
	const g = dv.getUint32(0);
	const f = dv.getUint32(4);
	const want = payload(g, f);
	if (want.length !== p.length) return `group ${g} frame ${f}: ${p.length} bytes, want ${want.length}`;
	for (let i = 0; i < p.length; i++)
		if (want[i] !== p[i]) return `group ${g} frame ${f}: byte ${i} differs`;
	return null;
}

// Start the relay; resolves with { port, fingerprint (hex, lowercase), proc, stop }.
export async function startRelay(relayPath, extra = []) {
	for (let attempt = 0; attempt < 5; attempt++) {
		const port = 20000 + Math.floor(Math.random() * 20000);
		const prefix = `moqdp-web-${process.pid}-${attempt}`;
		const args = [
			`--file-prefix=${prefix}`, "--no-huge", "-m", "256", "--no-pci", "-l", "0-1", "--",
			"--backend", "kernel", "--listen", "127.0.0.1", "--port", String(port), "--tcp", "1",
			"--mgmt", "", "--stats-interval", "0", ...extra,
		];
		const proc = spawn(relayPath, args, { stdio: ["ignore", "ignore", "pipe"] });
		let err = "";
		proc.stderr.on("data", (d) => {
			err += d.toString();
		});
		let exited = false;
		proc.on("exit", () => {
			exited = true;
		});
		const stop = async () => {
			if (!exited) {
				proc.kill("SIGTERM");
				for (let i = 0; i < 100 && !exited; i++) await sleep(50);
				if (!exited) proc.kill("SIGKILL");
			}
			rmSync(`/var/run/dpdk/${prefix}`, { recursive: true, force: true });
		};
		for (let i = 0; i < 200 && !exited; i++) {
			try {
				const r = await fetch(`http://127.0.0.1:${port}/health`);
				if (r.status === 200 && (await r.text()) === "ok\n") {
					const m = err.match(/certificate sha-256 ([0-9A-F:]+)/);
					return {
						port,
						fingerprint: m ? m[1].replaceAll(":", "").toLowerCase() : "",
						proc,
						stop,
						stderr: () => err,
					};
				}
			} catch {
				// not up yet
			}
			await sleep(100);
		}
		await stop();
		if (!/cannot (bind|listen)/.test(err)) throw new Error(`relay did not start: ${err}`);
	}
	throw new Error("no free port");
}

// Publish broadcast @path with track "data": a group every @everyMs with
// FRAMES frames (payload()). Returns { conn, stop, groups() }.
export async function publish(url, path, everyMs = 40, props) {
	const conn = await Moq.Connection.connect(url, props);
	const broadcast = new Moq.Broadcast.Producer();
	const track = broadcast.createTrack("data");
	conn.publish(Moq.Path.from(path), broadcast);
	let seq = 0;
	let stopped = false;
	// one frame per tick: the newest group is usually still open (live), so
	// a reader of it gets the rest of its frames as they come
	let g = null;
	let f = 0;
	const timer = setInterval(() => {
		if (stopped) return;
		if (g === null) {
			g = track.appendGroup();
			f = 0;
		}
		g.writeFrame({ payload: payload(g.sequence, f), timestamp: Moq.Time.Timestamp.now() });
		if (++f === FRAMES) {
			g.close();
			seq = g.sequence + 1;
			g = null;
		}
	}, everyMs / FRAMES);
	return {
		conn,
		groups: () => seq,
		stop: () => {
			stopped = true;
			clearInterval(timer);
			broadcast.close();
			conn.close();
		},
	};
}

// Wait until the relay's /announced lists @path (its origin table has it).
export async function waitAnnounced(url, path, timeoutMs = 10000) {
	const deadline = Date.now() + timeoutMs;
	while (Date.now() < deadline) {
		const r = await fetch(new URL("/announced/", url));
		if ((await r.text()).split("\n").includes(path)) return true;
		await sleep(50);
	}
	return false;
}

// Subscribe to @path's "data" and check every frame; resolves once @want
// complete groups arrived (or rejects after @timeoutMs).
export async function subscribe(url, path, want, timeoutMs = 20000, props) {
	if (!(await waitAnnounced(url, path))) throw new Error(`${path} never announced`);
	const conn = await Moq.Connection.connect(url, props);
	const sub = conn.consume(Moq.Path.from(path)).subscribe("data");
	const res = { conn, groups: 0, frames: 0, bytes: 0, errors: [], resets: [], seqs: [] };
	const deadline = Date.now() + timeoutMs;
	const run = (async () => {
		while (res.groups < want) {
			const g = await sub.recvGroup();
			if (g === undefined) break;
			let n = 0;
			for (;;) {
				let fr;
				try {
					fr = await g.readFrame();
				} catch (e) {
					// a group reset (old, lagged, ...): allowed by moq-lite,
					// counted; its frames so far were checked
					res.resets.push(`group ${g.sequence}: ${e}`);
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
				res.bytes += fr.payload.length;
			}
			if (n === FRAMES) {
				res.groups++;
				res.seqs.push(g.sequence);
			}
		}
	})();
	const timeout = new Promise((_, rej) => setTimeout(() => rej(new Error("timeout")), Math.max(1, deadline - Date.now())));
	try {
		await Promise.race([run, timeout]);
	} finally {
		sub.close();
	}
	return res;
}
