// SPDX-License-Identifier: MIT
// wt_page.js: the browser side of tests/web/wt_browser.mjs, bundled with
// @moq/net by esbuild at test time. window.moqdpRun(cfg) connects to the
// relay over WebTransport (serverCertificateHashes = the relay's pinned
// fingerprint, no WebSocket fallback), subscribes to moqdp-load's broadcast
// and verifies every frame (loadgen/media.h: magic, CRC-32C of bytes
// [8, len), track id, group sequence, length, index order in the group,
// frame numbers increasing across groups), and publishes a broadcast of
// frames in the same format that moqdp-load's subscribers verify.
import * as Moq from "@moq/net";

const MAGIC = 0x474c514d; // "MQLG" little-endian
const HDR = 48;

// CRC-32C (Castagnoli), reflected, as loadgen/media.c's moq_lg_crc32c.
const CRC_TABLE = (() => {
	const t = new Uint32Array(256);
	for (let i = 0; i < 256; i++) {
		let c = i;
		for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
		t[i] = c >>> 0;
	}
	return t;
})();

function crc32c(buf, from) {
	let c = 0xffffffff;
	for (let i = from; i < buf.length; i++) c = CRC_TABLE[(c ^ buf[i]) & 0xff] ^ (c >>> 8);
	return (c ^ 0xffffffff) >>> 0;
}

const st = {
	connected: false,
	protocol: "",
	framesOk: 0,
	bytesOk: 0,
	groups: 0,
	groupsDone: 0,
	groupsReset: 0,
	resetWhy: "",
	bad: [],
	published: 0,
	pubGroups: 0,
	error: "",
	done: false,
};
window.moqdpState = st;

function bad(msg) {
	if (st.bad.length < 20) st.bad.push(msg);
}

async function readGroup(g, trackId, ctx) {
	let index = 0;
	for (;;) {
		let f;
		try {
			f = await g.readFrame();
		} catch (e) {
			// the relay reset the group (e.g. DROPPED for latency): not a
			// corrupt frame; what arrived before was verified
			st.groupsReset++;
			st.resetWhy = String(e);
			return;
		}
		if (!f) break;
		const p = f.payload;
		const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
		if (p.length < HDR) {
			bad(`group ${g.sequence} frame ${index}: ${p.length} bytes`);
			index++;
			continue;
		}
		const magic = dv.getUint32(0, true);
		const crc = dv.getUint32(4, true);
		const tid = dv.getUint16(8, true);
		const fidx = dv.getUint32(12, true);
		const gseq = Number(dv.getBigUint64(16, true));
		const len = dv.getUint32(32, true);
		const fnum = dv.getBigUint64(40, true);
		if (magic !== MAGIC) bad(`group ${g.sequence}: magic ${magic.toString(16)}`);
		else if (tid !== trackId) bad(`group ${g.sequence}: track ${tid}`);
		else if (gseq !== g.sequence) bad(`group ${g.sequence}: header says group ${gseq}`);
		else if (len !== p.length) bad(`group ${g.sequence}: length ${len} != ${p.length}`);
		else if (crc32c(p, 8) !== crc) bad(`group ${g.sequence} frame ${fidx}: CRC`);
		else if (fidx !== index) bad(`group ${g.sequence}: frame ${fidx} where ${index} was due`);
		else if (ctx.lastFrame !== null && fnum <= ctx.lastFrame && g.sequence > ctx.lastGroup)
			bad(`group ${g.sequence}: frame number ${fnum} after ${ctx.lastFrame}`);
		else {
			st.framesOk++;
			st.bytesOk += p.length;
			if (g.sequence >= ctx.lastGroup) {
				ctx.lastGroup = g.sequence;
				ctx.lastFrame = fnum;
			}
		}
		index++;
	}
	st.groupsDone++;
}

async function subscribe(conn, cfg, until) {
	const bc = conn.consume(Moq.Path.from(cfg.subBroadcast));
	const sub = bc.subscribe(cfg.subTrack, {});
	const ctx = { lastGroup: -1, lastFrame: null };
	let prev = -1;
	const readers = [];
	while (performance.now() < until) {
		const g = await Promise.race([
			sub.recvGroup(),
			new Promise((r) => setTimeout(() => r(null), Math.max(1, until - performance.now()))),
		]);
		if (g === null) break;
		if (g === undefined) {
			let why = "";
			try {
				why = String(await Promise.race([sub.closed, new Promise((r) => setTimeout(() => r("?"), 500))]));
			} catch (e) {
				why = String(e);
			}
			bad(`subscription ended early after ${st.groups} groups: ${why}`);
			break;
		}
		if (g.sequence <= prev) bad(`group ${g.sequence} after ${prev}`);
		prev = g.sequence;
		st.groups++;
		readers.push(readGroup(g, cfg.subTrackId, ctx));
	}
	sub.close();
	await Promise.race([Promise.all(readers), new Promise((r) => setTimeout(r, 2000))]);
}

function makeFrame(trackId, group, index, fnum, size, nowNs) {
	const p = new Uint8Array(size);
	const dv = new DataView(p.buffer);
	dv.setUint32(0, MAGIC, true);
	dv.setUint16(8, trackId, true);
	dv.setUint16(10, index === 0 ? 1 : 0, true);
	dv.setUint32(12, index, true);
	dv.setBigUint64(16, BigInt(group), true);
	dv.setBigUint64(24, nowNs, true);
	dv.setUint32(32, size, true);
	dv.setUint32(36, 0, true);
	dv.setBigUint64(40, BigInt(fnum), true);
	let x = (group * 2654435761 + index * 40503 + 1) >>> 0;
	for (let i = HDR; i < size; i++) {
		x ^= x << 13;
		x ^= x >>> 17;
		x ^= x << 5;
		p[i] = x & 0xff;
	}
	dv.setUint32(4, crc32c(p, 8), true);
	return p;
}

async function publish(conn, cfg, until) {
	const bc = new Moq.Broadcast.Producer();
	const track = bc.createTrack(cfg.pubTrack);
	conn.publish(Moq.Path.from(cfg.pubBroadcast), bc);
	const frameMs = 1000 / cfg.fps;
	let fnum = 0;
	const t0 = performance.now();
	while (performance.now() < until) {
		const g = track.appendGroup();
		st.pubGroups++;
		for (let i = 0; i < cfg.groupFrames; i++) {
			const due = t0 + fnum * frameMs;
			const wait = due - performance.now();
			if (wait > 0) await new Promise((r) => setTimeout(r, wait));
			const nowNs = BigInt(cfg.monoBaseNs) + BigInt(Math.round((performance.now() - cfg.perfBase) * 1e6));
			const size = i === 0 ? cfg.frameSize * 4 : cfg.frameSize;
			g.writeFrame({ payload: makeFrame(cfg.pubTrackId, g.sequence, i, fnum, size, nowNs), timestamp: Moq.Time.Timestamp.now() });
			fnum++;
			st.published++;
		}
		g.close();
	}
	return bc;
}

// The datagram phase (issue 25): over a lossy path (udp_loss.mjs), the
// browser subscribes to moqdp-load's datagram publisher (video as streams,
// every frame verified; audio, single-frame groups that arrive as QUIC
// datagrams, each verified and the gaps counted as lost) and publishes an
// audio track of its own as datagrams (lite-05 6.4) for moqdp-load's
// subscribers to verify.
const dg = {
	connected: false,
	protocol: "",
	dgOk: 0,
	dgBad: [],
	dgFirst: -1,
	dgLast: -1,
	dgSeen: 0,
	dgDup: 0,
	audioGroups: 0,
	published: 0,
	error: "",
};
window.moqdpDgState = dg;

function verifyAudio(p, seq, trackId) {
	if (p.length < HDR) return `audio ${seq}: ${p.length} bytes`;
	const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
	if (dv.getUint32(0, true) !== MAGIC) return `audio ${seq}: magic`;
	if (dv.getUint16(8, true) !== trackId) return `audio ${seq}: track ${dv.getUint16(8, true)}`;
	if (dv.getUint32(12, true) !== 0) return `audio ${seq}: frame index ${dv.getUint32(12, true)}`;
	if (Number(dv.getBigUint64(16, true)) !== seq) return `audio ${seq}: header says group ${dv.getBigUint64(16, true)}`;
	if (dv.getUint32(32, true) !== p.length) return `audio ${seq}: length`;
	if (crc32c(p, 8) !== dv.getUint32(4, true)) return `audio ${seq}: CRC`;
	return "";
}

async function recvAudio(bc, cfg, until) {
	const sub = bc.subscribe(cfg.audioTrack, {});
	const seen = new Set();
	const note = (seq, p) => {
		const why = verifyAudio(p, seq, cfg.audioTrackId);
		if (why) {
			if (dg.dgBad.length < 20) dg.dgBad.push(why);
			return;
		}
		if (seen.has(seq)) {
			dg.dgDup++;
			return;
		}
		seen.add(seq);
		dg.dgOk++;
		if (dg.dgFirst < 0 || seq < dg.dgFirst) dg.dgFirst = seq;
		if (seq > dg.dgLast) dg.dgLast = seq;
	};
	const timeout = () => new Promise((r) => setTimeout(() => r(null), Math.max(1, until - performance.now())));
	// a single-frame group may also come as a stream (the relay's choice
	// per group): read that channel too, so "lost" is what came neither way
	const groups = (async () => {
		while (performance.now() < until) {
			const g = await Promise.race([sub.recvGroup(), timeout()]);
			if (!g) break;
			dg.audioGroups++;
			const f = await Promise.race([g.readFrame().catch(() => null), timeout()]);
			if (f) note(g.sequence, f.payload);
		}
	})();
	while (performance.now() < until) {
		const d = await Promise.race([sub.recvDatagram(), timeout()]);
		if (!d) break;
		dg.dgSeen++;
		note(d.sequence, d.payload);
	}
	await Promise.race([groups, new Promise((r) => setTimeout(r, 1000))]);
	sub.close();
}

window.moqdpDgram = async (cfg) => {
	// the video counters of this phase alone
	Object.assign(st, { framesOk: 0, bytesOk: 0, groups: 0, groupsDone: 0, groupsReset: 0, resetWhy: "", bad: [] });
	try {
		const conn = await Moq.Connection.connect(new URL(cfg.url), {
			websocket: { enabled: false },
			webtransport: { serverCertificateHashes: [{ algorithm: "sha-256", value: cfg.hash }] },
		});
		dg.connected = true;
		dg.protocol = conn.version;
		const until = performance.now() + cfg.durationMs;
		// publish: 50 datagrams a second on "audio", sequence = group field
		const pbc = new Moq.Broadcast.Producer();
		const track = pbc.createTrack(cfg.pubTrack);
		conn.publish(Moq.Path.from(cfg.pubBroadcast), pbc);
		const pub = (async () => {
			const t0 = performance.now();
			const end = until + cfg.pubExtraMs;
			for (let seq = 0; performance.now() < end; seq++) {
				const wait = t0 + seq * 20 - performance.now();
				if (wait > 0) await new Promise((r) => setTimeout(r, wait));
				const nowNs = BigInt(cfg.monoBaseNs) + BigInt(Math.round((performance.now() - cfg.perfBase) * 1e6));
				track.writeDatagram({ sequence: seq, timestamp: Moq.Time.Timestamp.now(), payload: makeFrame(cfg.pubTrackId, seq, 0, seq, cfg.audioSize, nowNs) });
				dg.published++;
			}
		})();
		// subscribe: video by streams through readGroup (st counts it), audio
		const bc = conn.consume(Moq.Path.from(cfg.subBroadcast));
		await Promise.all([subscribe(conn, cfg, until), recvAudio(bc, cfg, until)]);
		await pub;
		conn.close();
	} catch (e) {
		dg.error = String(e && e.stack ? e.stack : e);
	}
	return { dg, st };
};

// A session held open (the relay's SIGQUIT drain): resolves when it closes.
window.moqdpHold = async (cfg) => {
	const conn = await Moq.Connection.connect(new URL(cfg.url), {
		websocket: { enabled: false },
		webtransport: { serverCertificateHashes: [{ algorithm: "sha-256", value: cfg.hash }] },
	});
	window.moqdpHeld = conn.closed.then(
		() => "closed",
		(e) => `closed: ${e}`,
	);
	return conn.version;
};

window.moqdpRun = async (cfg) => {
	try {
		const conn = await Moq.Connection.connect(new URL(cfg.url), {
			websocket: { enabled: false },
			webtransport: { serverCertificateHashes: [{ algorithm: "sha-256", value: cfg.hash }] },
		});
		st.connected = true;
		st.protocol = conn.version;
		const until = performance.now() + cfg.durationMs;
		const pub = cfg.pubBroadcast ? publish(conn, cfg, until + cfg.pubExtraMs) : null;
		if (cfg.subBroadcast) await subscribe(conn, cfg, until);
		if (pub) await pub;
		conn.close();
	} catch (e) {
		st.error = String(e && e.stack ? e.stack : e);
	}
	st.done = true;
	return st;
};
