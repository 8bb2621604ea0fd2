// SPDX-License-Identifier: MIT
// ws_remote.mjs: @moq/net over WebSocket (qmux-01) against a relay someone
// else started (tests/test_dpdk_exc.py: the DPDK backend's exception port,
// run under `ip netns exec`): the http:// URL path (GET /certificate.sha256,
// then the WebSocket session; Node has no WebTransport), a publisher and a
// subscriber of 12 groups, every byte verified, in sequence, none reset.
// TAP on stdout. usage: node ws_remote.mjs http://HOST:PORT/
import { done, ok, publish, subscribe } from "./relay.mjs";

const url = new URL(process.argv[2]);
let pub;
try {
	const r = await fetch(new URL("/certificate.sha256", url));
	const hex = await r.text();
	ok(r.status === 200 && /^[0-9a-f]{64}$/.test(hex), "/certificate.sha256 is 64 lowercase hex", hex);
	pub = await publish(url, "remote/node");
	const s = await subscribe(url, "remote/node", 12);
	ok(s.groups >= 12 && s.errors.length === 0, `${s.conn.version}: ${s.groups} groups, ${s.frames} frames, ${s.bytes} bytes, every byte verified`, s.errors.slice(0, 3).join("; "));
	let consecutive = true;
	for (let i = 1; i < s.seqs.length; i++) consecutive &&= s.seqs[i] === s.seqs[i - 1] + 1;
	ok(consecutive && s.resets.length === 0, "groups in sequence, none lost or reset", `${s.seqs.join(",")} ${s.resets.join("; ")}`);
	s.conn.close();
} catch (e) {
	ok(false, "no exception", e?.stack ?? String(e));
} finally {
	pub?.stop();
}
process.exit(done() === 0 ? 0 : 1);
