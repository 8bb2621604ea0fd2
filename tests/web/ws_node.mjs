// SPDX-License-Identifier: MIT
// ws_node.mjs: @moq/net 0.3.4 (Node 20, the `ws` package as the WebSocket)
// publishes and subscribes through moqdp-relay's WebSocket (qmux-01)
// binding, every byte verified: lite-05 (what @moq/net negotiates) and
// lite-04 (offered alone); and the http:// URL path: the certificate hash
// @moq/net pins comes from GET /certificate.sha256 (equal to the relay's
// certificate), then the http:// URL connects. TAP on stdout.
// usage: node ws_node.mjs <moqdp-relay>
import Session from "@moq/qmux";
import * as Moq from "@moq/net";
import { done, ok, publish, startRelay, subscribe } from "./relay.mjs";

const relay = await startRelay(process.argv[2]);
const url = new URL(`http://127.0.0.1:${relay.port}/`);
let pub;
let pub4;
try {
	// the http:// path: what @moq/net fetches before WebTransport
	const r = await fetch(new URL("/certificate.sha256", url));
	const hex = await r.text();
	ok(r.status === 200 && /^[0-9a-f]{64}$/.test(hex), "/certificate.sha256 is 64 lowercase hex", hex);
	ok(hex === relay.fingerprint, "... the relay's certificate (SHA-256 of its DER)", `${hex} vs ${relay.fingerprint}`);

	// lite-05: @moq/net's own offer, over the http:// URL
	pub = await publish(url, "node/five");
	ok(pub.conn.version.includes("05") || pub.conn.version === "moq-lite-05", "publisher negotiated lite-05", pub.conn.version);
	const s5 = await subscribe(url, "node/five", 12);
	ok(s5.conn.version === pub.conn.version, "subscriber negotiated the same", s5.conn.version);
	ok(s5.groups >= 12 && s5.errors.length === 0, `lite-05: ${s5.groups} groups, ${s5.frames} frames, ${s5.bytes} bytes, every byte verified`, s5.errors.slice(0, 3).join("; "));
	let consecutive = true;
	for (let i = 1; i < s5.seqs.length; i++) consecutive &&= s5.seqs[i] === s5.seqs[i - 1] + 1;
	ok(consecutive && s5.resets.length === 0, "lite-05: groups in sequence, none lost or reset", `${s5.seqs.join(",")} ${s5.resets.join("; ")}`);
	s5.conn.close();

	// lite-04: a client that offers only qmux-01.moq-lite-04
	// (@moq/net reads the transport's protocol at once: hand it a ready one)
	const only04 = async () => {
		const transport = new Session(`ws://127.0.0.1:${relay.port}/`, {
			protocols: ["moq-lite-04"],
			versions: { "moq-lite-04": "qmux-01" },
			requireProtocol: true,
		});
		await transport.ready;
		return { transport };
	};
	const t = (await only04()).transport;
	ok(t.protocol === "moq-lite-04", "lite-04 offered alone: the relay accepts qmux-01.moq-lite-04", t.protocol);
	t.close();
	pub4 = await publish(url, "node/four", 40, await only04());
	const s4 = await subscribe(url, "node/four", 10, 20000, await only04());
	ok(s4.groups >= 10 && s4.errors.length === 0, `lite-04: ${s4.groups} groups, ${s4.frames} frames, ${s4.bytes} bytes, every byte verified`, s4.errors.slice(0, 3).join("; "));
	s4.conn.close();

	// a lite-04 subscriber reads the lite-05 publisher (one relay, one cache)
	const x = await subscribe(url, "node/five", 5, 20000, await only04());
	ok(x.groups >= 5 && x.errors.length === 0, "lite-04 subscriber of a lite-05 publisher: every byte verified", x.errors.slice(0, 3).join("; "));
	x.conn.close();

	// /announced lists both (a snapshot of the origin table)
	const a = await (await fetch(new URL("/announced/node", url))).text();
	ok(a.split("\n").includes("five") && a.split("\n").includes("four"), "/announced/node lists five and four", JSON.stringify(a));
} catch (e) {
	ok(false, "no exception", e?.stack ?? String(e));
} finally {
	pub?.stop();
	pub4?.stop();
	await relay.stop();
}
process.exit(done() === 0 ? 0 : 1);
