// SPDX-License-Identifier: MIT
// http_curl.mjs: curl against moqdp-relay's HTTP endpoints on the TCP port
// of its UDP port (BINDINGS.md, section 3), plain and TLS (one port: the
// first byte tells), while @moq/net publishes a broadcast over WebSocket and
// a subscriber keeps its track live in the cache: /certificate.sha256,
// /health, /announced, /fetch (latest, a live group by number, a missing
// group 404, bad paths 400; an unknown broadcast is waited for), the
// WebSocket upgrade's 400, and 401 with --auth-*.
// TAP on stdout. usage: node http_curl.mjs <moqdp-relay>
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FRAMES, checkFrame, done, ok, payload, publish, sleep, startRelay, subscribe } from "./relay.mjs";

// curl: [status, body (Buffer)]. Asynchronous: the publisher runs in this
// process and must keep writing while curl waits.
function curl(url, extra = []) {
	return new Promise((resolve, reject) => {
		execFile("curl", ["-sk", "--max-time", "40", "-o", "-", "-w", "\n%{http_code}", ...extra, url],
			{ encoding: "buffer", maxBuffer: 64 << 20 }, (err, out) => {
				if (err) {
					reject(err);
					return;
				}
				const nl = out.lastIndexOf(10);
				resolve([Number(out.subarray(nl + 1).toString()), out.subarray(0, nl)]);
			});
	});
}

// A group's frame payloads concatenated, checked against payload().
function checkGroup(body) {
	if (body.length < 8) return `body of ${body.length} bytes`;
	const g = body.readUInt32BE(0);
	let off = 0;
	for (let f = 0; f < FRAMES; f++) {
		const want = payload(g, f);
		const got = body.subarray(off, off + want.length);
		const e = checkFrame(new Uint8Array(got));
		if (e) return e;
		off += want.length;
	}
	return off === body.length ? null : `group ${g}: ${body.length} bytes, want ${off}`;
}

const relay = await startRelay(process.argv[2]);
const url = new URL(`http://127.0.0.1:${relay.port}/`);
let pub;
let sub;
try {
	pub = await publish(url, "curl/live");
	// a subscriber keeps the track in the relay's cache (fanout)
	sub = subscribe(url, "curl/live", 1000000, 60000).catch(() => null);
	await sleep(1500);
	for (const scheme of ["http", "https"]) {
		const base = `${scheme}://127.0.0.1:${relay.port}`;
		let [code, body] = await curl(`${base}/health`);
		ok(code === 200 && body.toString() === "ok\n", `${scheme}: /health 200 ok`, `${code} ${body}`);
		[code, body] = await curl(`${base}/certificate.sha256`);
		ok(code === 200 && body.toString() === relay.fingerprint, `${scheme}: /certificate.sha256 = the certificate's SHA-256, 64 hex, no newline`, body.toString());
		[code, body] = await curl(`${base}/announced/curl`);
		ok(code === 200 && body.toString().split("\n").includes("live"), `${scheme}: /announced/curl lists live`, JSON.stringify(body.toString()));
		[code, body] = await curl(`${base}/announced/`);
		ok(code === 200 && body.toString().split("\n").includes("curl/live"), `${scheme}: /announced/ lists curl/live`, JSON.stringify(body.toString()));
		// the newest group is usually still being written (a frame per tick):
		// its frames stream as they arrive, until it ends
		[code, body] = await curl(`${base}/fetch/curl/live/data?group=latest`);
		let e = code === 200 ? checkGroup(body) : `status ${code}`;
		ok(e === null, `${scheme}: /fetch latest (live) group: ${body.length} bytes, every byte verified`, e);
		const g = body.length >= 4 ? body.readUInt32BE(0) : 0;
		[code, body] = await curl(`${base}/fetch/curl/live/data?group=${g}`);
		e = code === 200 ? checkGroup(body) : `status ${code}`;
		ok(e === null && body.readUInt32BE(0) === g, `${scheme}: /fetch group ${g} by number`, e);
		[code] = await curl(`${base}/fetch/curl/live/data?group=99999999`);
		ok(code === 404, `${scheme}: /fetch missing group 404`, code);
		[code] = await curl(`${base}/fetch/justone`);
		ok(code === 400, `${scheme}: /fetch/<one segment> 400`, code);
		[code] = await curl(`${base}/fetch/curl/live/data?group=x1`);
		ok(code === 400, `${scheme}: /fetch group=x1 400`, code);
		[code] = await curl(`${base}/nothing-here`);
		ok(code === 404, `${scheme}: unknown path 404`, code);
		[code] = await curl(`${base}/health`, ["-X", "POST"]);
		ok(code === 405, `${scheme}: POST 405`, code);
		// a WebSocket upgrade whose offer matches nothing: 400
		[code] = await curl(`${base}/`, ["-H", "Upgrade: websocket", "-H", "Connection: Upgrade", "-H", "Sec-WebSocket-Version: 13",
			"-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "-H", "Sec-WebSocket-Protocol: qmux-00.moq-lite-05, webtransport"]);
		ok(code === 400, `${scheme}: WebSocket offer without qmux-01.moq-lite-0x: 400`, code);
	}
	// a broadcast that never comes: /fetch waits (30 s, then 504); curl gives up first
	let t0 = Date.now();
	let code;
	try {
		[code] = await curl(`http://127.0.0.1:${relay.port}/fetch/curl/never/data`, ["--max-time", "2"]);
	} catch (err) {
		code = err.code === 28 ? "curl timeout" : err.code; // 28: curl's timeout
	}
	ok(code === "curl timeout" && Date.now() - t0 >= 1900, "/fetch of an unknown broadcast waits for it", code);
} catch (e) {
	ok(false, "no exception", e?.stack ?? String(e));
} finally {
	pub?.stop();
	await relay.stop();
}

// 401 with auth on: a relay with --auth-key and no public prefix
{
	const dir = mkdtempSync(join(tmpdir(), "moqdp-web-"));
	const key = join(dir, "k.jwk");
	writeFileSync(key, JSON.stringify({ kty: "oct", alg: "HS256", k: "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA" }));
	const r2 = await startRelay(process.argv[2], ["--auth-key", key]);
	try {
		let [code] = await curl(`http://127.0.0.1:${r2.port}/announced/x`);
		ok(code === 401, "auth on: /announced without a token 401", code);
		[code] = await curl(`http://127.0.0.1:${r2.port}/announced/x?jwt=bad.token.here`);
		ok(code === 401, "auth on: /announced with a bad token 401", code);
		[code] = await curl(`http://127.0.0.1:${r2.port}/room`, ["-H", "Upgrade: websocket", "-H", "Connection: Upgrade", "-H", "Sec-WebSocket-Version: 13",
			"-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "-H", "Sec-WebSocket-Protocol: qmux-01.moq-lite-05"]);
		ok(code === 401, "auth on: WebSocket upgrade without a token 401 (before the upgrade)", code);
		[code] = await curl(`http://127.0.0.1:${r2.port}/health`);
		ok(code === 200, "auth on: /health still 200", code);
	} finally {
		await r2.stop();
	}
}
process.exit(done() === 0 ? 0 : 1);
