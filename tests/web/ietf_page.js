// SPDX-License-Identifier: MIT
// ietf_page.js: the page ietf_browser.mjs bundles (esbuild) into headless
// Chromium: @moq/net's IETF client (draft-20) over WebTransport to
// moqdp-relay, one connection publishing, one subscribing; every byte checked.
import * as Moq from "@moq/net";
import * as Ietf from "./node_modules/@moq/net/ietf/index.js";
import { exchangeSetup } from "./node_modules/@moq/net/connection/handshake.js";

const FRAMES = 3;
function payload(group, frame) {
	const n = frame === 1 ? 40000 : 300 + ((group * 7 + frame * 13) % 1200);
	const p = new Uint8Array(n);
	const dv = new DataView(p.buffer);
	dv.setUint32(0, group);
	dv.setUint32(4, frame);
	for (let i = 8; i < n; i++) p[i] = (i * 31 + group * 7 + frame * 3) & 0xff;
	return p;
}
function check(p, g, f) {
	const want = payload(g, f);
	if (want.length !== p.length) return `group ${g} frame ${f}: ${p.length} bytes, want ${want.length}`;
	for (let i = 0; i < p.length; i++) if (want[i] !== p[i]) return `group ${g} frame ${f}: byte ${i}`;
	return null;
}

async function connect(cfg) {
	const hash = Uint8Array.from(cfg.hash.match(/../g).map((h) => parseInt(h, 16)));
	const quic = new WebTransport(cfg.url, { protocols: [cfg.alpn], serverCertificateHashes: [{ algorithm: "sha-256", value: hash }] });
	await quic.ready;
	const version = Ietf.Version.DRAFT_20;
	const { control, solicit, cluster } = await exchangeSetup(quic, version, "ietf-browser");
	return { protocol: quic.protocol, conn: new Ietf.Connection({ url: new URL(cfg.url), quic, control, solicit, cluster, maxRequestId: 0n, version, client: true }) };
}

async function read(conn, path, want, st, key) {
	const sub = conn.consume(Moq.Path.from(path)).subscribe("data");
	st[key] = 0;
	while (st[key] < want) {
		const g = await sub.recvGroup();
		if (!g) break;
		let n = 0;
		for (;;) {
			let fr;
			try {
				fr = await g.readFrame();
			} catch {
				break;
			}
			if (!fr) break;
			const e = check(fr.payload, g.sequence, n);
			if (e) st.bad.push(e);
			n++;
		}
		if (n === FRAMES) st[key]++;
	}
	sub.close();
}

window.moqdpIetf = async (cfg) => {
	const st = { protocol: "", bad: [], error: "", own: 0, lite: 0 };
	try {
		const a = await connect(cfg);
		const b = await connect(cfg);
		st.protocol = a.protocol;
		const broadcast = new Moq.Broadcast.Producer();
		const track = broadcast.createTrack("data");
		a.conn.publish(Moq.Path.from(cfg.pubPath), broadcast);
		let g = null;
		let f = 0;
		const timer = setInterval(() => {
			if (g === null) {
				g = track.appendGroup();
				f = 0;
			}
			g.writeFrame({ payload: payload(g.sequence, f), timestamp: Moq.Time.Timestamp.now() });
			if (++f === FRAMES) {
				g.close();
				g = null;
			}
		}, 15);
		await new Promise((r) => setTimeout(r, 500));
		await Promise.race([
			Promise.all([read(b.conn, cfg.pubPath, cfg.groups, st, "own"), read(b.conn, cfg.litePath, cfg.groups, st, "lite")]),
			new Promise((r) => setTimeout(r, cfg.timeoutMs)),
		]);
		window.moqdpIetfKeep = { a, b, timer, broadcast };
	} catch (e) {
		st.error = String(e?.stack ?? e);
	}
	return st;
};
window.moqdpIetfReady = true;
