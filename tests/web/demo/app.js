// SPDX-License-Identifier: MIT
// The demo page (scripts/demo --browser): subscribe to the load generator's
// synthetic broadcast through the relay that serves this page and show what
// arrives, per track, once a second.
import * as Moq from "@moq/net";
import Session from "@moq/qmux";

const params = new URLSearchParams(location.search);
const broadcast = params.get("broadcast") ?? "moqdp/load";
const tracks = (params.get("tracks") ?? "video,audio").split(",");
const relay = new URL("/", location.href);
document.getElementById("relay").textContent = relay.href;
document.getElementById("bcast").textContent = broadcast;
const status = document.getElementById("status");
const rows = document.getElementById("rows");

// ?verify=1 (tests/web/demo_page.mjs): frames carry tests/web/relay.mjs's
// pattern (group, frame, then bytes derived from both): check every byte
const verify = params.get("verify") === "1";
const checked = { ok: 0, bad: 0 };
function check(p) {
	const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
	if (p.length < 8) return false;
	const g = dv.getUint32(0);
	const f = dv.getUint32(4);
	if (p.length !== (f === 1 ? 40000 : 300 + ((g * 7 + f * 13) % 1200))) return false;
	for (let i = 8; i < p.length; i++) if (p[i] !== ((i * 31 + g * 7 + f * 3) & 0xff)) return false;
	return true;
}

const stats = new Map();
for (const name of tracks) {
	const tr = document.createElement("tr");
	tr.innerHTML = `<td>${name}</td>` + "<td></td>".repeat(6);
	rows.append(tr);
	stats.set(name, { tr, groups: 0, frames: 0, bytes: 0, last: 0, newest: "-", resets: 0 });
}

async function run(conn, name) {
	const st = stats.get(name);
	const sub = conn.consume(Moq.Path.from(broadcast)).subscribe(name);
	for (;;) {
		const g = await sub.recvGroup();
		if (g === undefined) return;
		st.newest = g.sequence;
		try {
			for (;;) {
				const fr = await g.readFrame();
				if (fr === undefined) break;
				st.frames++;
				st.bytes += fr.payload.length;
				if (verify) {
					if (check(fr.payload)) checked.ok++;
					else checked.bad++;
				}
			}
			st.groups++;
		} catch {
			st.resets++; // reset by the relay (late, evicted, ...)
		}
	}
}

setInterval(() => {
	for (const st of stats.values()) {
		const td = st.tr.children;
		const kbps = ((st.bytes - st.last) * 8) / 1000;
		st.last = st.bytes;
		td[1].textContent = st.groups;
		td[2].textContent = st.frames;
		td[3].textContent = st.bytes.toLocaleString();
		td[4].textContent = kbps.toFixed(0);
		td[5].textContent = st.newest;
		td[6].textContent = st.resets;
	}
	if (verify) document.getElementById("verify").textContent = `verified ${checked.ok} bad ${checked.bad}`;
}, 1000);

try {
	// ?ws=1: force the WebSocket fallback (qmux-01 on the relay's TCP port);
	// otherwise @moq/net races WebTransport and WebSocket
	let props;
	if (params.get("ws") === "1") {
		const transport = new Session(relay, {
			protocols: ["moq-lite-05", "moq-lite-04"],
			versions: { "moq-lite-05": "qmux-01", "moq-lite-04": "qmux-01" },
			requireProtocol: true,
		});
		await transport.ready;
		props = { transport };
	}
	const conn = await Moq.Connection.connect(relay, props);
	const ws = conn.transport instanceof Session || props !== undefined;
	status.textContent = `connected (${conn.version}, ${ws ? "WebSocket" : "WebTransport"})`;
	await Promise.all(tracks.map((t) => run(conn, t)));
	status.textContent = "the broadcast ended";
} catch (e) {
	status.textContent = `error: ${e}`;
	status.className = "err";
}
