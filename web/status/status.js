// SPDX-License-Identifier: MIT
// status.js: /status's script (web/status.c serves it from the binary). Every
// second it reads /status/metrics (the relay's Prometheus text, the same as
// /metrics on --mgmt), every two seconds /announced (with the page's ?jwt=
// when it has one), and draws: the numbers, egress / ingress and the busy
// share of each worker on canvases, the broadcasts, the cluster links and a
// row per worker. Rates are differences of counters over the relay's own
// moqdp_uptime_seconds. Each number's element carries the raw value in
// data-value (tests/web/status_page.mjs compares them with /metrics).
"use strict";

const POLL_MS = 1000;
const ANNOUNCED_MS = 2000;
const KEEP = 120; // samples on the charts: two minutes
const COLORS = ["#4fc3f7", "#7bd88f", "#ffb454", "#ff6b6b", "#c792ea", "#f78c6c", "#89ddff", "#c3e88d"];
const LINK_STATE = ["down", "connecting", "up"];

const jwt = new URLSearchParams(location.search).get("jwt");
const hist = { egress: [], ingress: [], busy: new Map(), egressBps: [] };
let prev = null;
const status = { samples: 0, last: null, broadcasts: [], error: "", egressHistory: hist.egressBps };
window.moqdpStatus = status;

// Prometheus text exposition: Map name -> [{ labels, v }]
function parse(text) {
	const m = new Map();
	for (const line of text.split("\n")) {
		if (line === "" || line[0] === "#") continue;
		const r = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
		if (!r) continue;
		const labels = {};
		if (r[2]) for (const l of r[2].matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
		if (!m.has(r[1])) m.set(r[1], []);
		m.get(r[1]).push({ labels, v: Number(r[3]) });
	}
	return m;
}
const sum = (m, n) => (m.get(n) ?? []).reduce((a, x) => a + x.v, 0);
const byLabel = (m, n, label) => {
	const o = new Map();
	for (const x of m.get(n) ?? []) o.set(x.labels[label], x.v);
	return o;
};
const one = (m, n, label, value) => (m.get(n) ?? []).find((x) => x.labels[label] === value)?.v ?? NaN;

function show(id, value, text) {
	const el = document.getElementById(id);
	if (!el) return;
	el.dataset.value = String(value);
	el.textContent = text;
}
const fmt = (v, d) => (Number.isFinite(v) ? v.toFixed(d) : "-");
function duration(s) {
	if (!Number.isFinite(s)) return "-";
	const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
	return d > 0 ? `${d}d ${h}h` : h > 0 ? `${h}h ${m}m` : `${m}m ${Math.floor(s % 60)}s`;
}
function push(arr, v) {
	arr.push(v);
	if (arr.length > KEEP) arr.shift();
}

// A line chart of @series ([{ name, color, values }]) on @canvas; @ymax fixes
// the scale (else the data's maximum, rounded up).
function chart(canvas, series, ymax) {
	const dpr = window.devicePixelRatio || 1;
	const w = canvas.clientWidth, h = canvas.clientHeight;
	if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
		canvas.width = Math.round(w * dpr);
		canvas.height = Math.round(h * dpr);
	}
	const g = canvas.getContext("2d");
	g.setTransform(dpr, 0, 0, dpr, 0, 0);
	g.clearRect(0, 0, w, h);
	let top = ymax;
	if (top === undefined) {
		top = Math.max(1e-9, ...series.flatMap((s) => s.values.filter(Number.isFinite)));
		const p = 10 ** Math.floor(Math.log10(top));
		top = Math.ceil(top / p) * p;
	}
	const L = 44, R = 6, T = 6, B = 16;
	g.font = "11px system-ui, sans-serif";
	g.fillStyle = "#8a95a3";
	g.strokeStyle = "#2a323c";
	g.lineWidth = 1;
	for (let i = 0; i <= 4; i++) {
		const y = T + ((h - T - B) * i) / 4;
		g.beginPath();
		g.moveTo(L, y);
		g.lineTo(w - R, y);
		g.stroke();
		const v = top * (1 - i / 4);
		g.fillText(v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2), 2, y + 4);
	}
	g.fillText(`-${KEEP}s`, L, h - 3);
	g.fillText("now", w - R - 22, h - 3);
	for (const s of series) {
		g.strokeStyle = s.color;
		g.lineWidth = 1.5;
		g.beginPath();
		let started = false;
		s.values.forEach((v, i) => {
			if (!Number.isFinite(v)) return;
			const x = L + ((w - L - R) * (KEEP - s.values.length + i)) / (KEEP - 1);
			const y = T + (h - T - B) * (1 - Math.min(v, top) / top);
			if (started) g.lineTo(x, y);
			else g.moveTo(x, y);
			started = true;
		});
		g.stroke();
	}
}
function legend(id, series) {
	const el = document.getElementById(id);
	el.replaceChildren(
		...series.map((s) => {
			const span = document.createElement("span");
			const i = document.createElement("i");
			i.style.background = s.color;
			span.append(i, `${s.name} ${fmt(s.values.at(-1), 1)}`);
			return span;
		}),
	);
}
function rows(id, list, empty, cols) {
	const body = document.getElementById(id);
	if (list.length === 0) {
		const tr = document.createElement("tr");
		const td = document.createElement("td");
		td.className = "empty";
		td.colSpan = cols;
		td.textContent = empty;
		tr.append(td);
		body.replaceChildren(tr);
		return;
	}
	body.replaceChildren(
		...list.map((cells) => {
			const tr = document.createElement("tr");
			for (const c of cells) {
				const td = document.createElement("td");
				if (typeof c === "object") {
					td.textContent = c.text;
					if (c.cls) td.className = c.cls;
					if (c.value !== undefined) td.dataset.value = String(c.value);
				} else td.textContent = c;
				tr.append(td);
			}
			return tr;
		}),
	);
}

function update(m) {
	const up = sum(m, "moqdp_uptime_seconds");
	const cur = {
		up,
		tx: sum(m, "moqdp_tx_bytes_total"),
		rx: sum(m, "moqdp_rx_bytes_total"),
		busy: sum(m, "moqdp_busy_seconds_total"),
		idle: sum(m, "moqdp_idle_seconds_total"),
		drops: sum(m, "moqdp_net_dropped_total") + sum(m, "moqdp_tx_dropped_total") +
			sum(m, "moqdp_quic_dropped_total") + sum(m, "moqdp_redirect_dropped_total"),
		wbusy: byLabel(m, "moqdp_worker_busy_seconds_total", "worker"),
		widle: byLabel(m, "moqdp_worker_idle_seconds_total", "worker"),
		wframes: byLabel(m, "moqdp_worker_frames_out_total", "worker"),
		lsent: byLabel(m, "moqdp_cluster_link_sent_bytes_total", "peer"),
		lrecv: byLabel(m, "moqdp_cluster_link_received_bytes_total", "peer"),
	};
	const dt = prev ? cur.up - prev.up : 0;
	const rate = (a, b) => (dt > 0 ? (a - b) / dt : NaN);
	const share = (b1, i1, b0, i0) => (b1 - b0 + (i1 - i0) > 0 ? (b1 - b0) / (b1 - b0 + (i1 - i0)) : NaN);
	const egress = prev ? rate(cur.tx, prev.tx) * 8 : NaN;
	const ingress = prev ? rate(cur.rx, prev.rx) * 8 : NaN;
	const busy = prev ? share(cur.busy, cur.idle, prev.busy, prev.idle) : NaN;

	show("uptime", up, duration(up));
	show("workers", sum(m, "moqdp_workers"), String(sum(m, "moqdp_workers")));
	const cert = (m.get("moqdp_certificate_info") ?? [])[0]?.labels.sha256 ?? "";
	show("cert", cert, cert ? `${cert.slice(0, 16)}...` : "-");
	show("egress", egress, fmt(egress / 1e6, 2));
	show("ingress", ingress, fmt(ingress / 1e6, 2));
	for (const [id, n] of [["sessions", "moqdp_sessions"], ["connections", "moqdp_connections"],
		["subscribers", "moqdp_subscribers"], ["broadcasts", "moqdp_broadcasts"]])
		show(id, sum(m, n), String(sum(m, n)));
	show("busy", busy, fmt(busy * 100, 1));
	const used = sum(m, "moqdp_cache_used_bytes"), budget = sum(m, "moqdp_cache_budget_bytes");
	show("cache", used, `${fmt(used / 1048576, 1)} / ${fmt(budget / 1048576, 0)}`);
	const p50 = one(m, "moqdp_relay_latency_seconds", "quantile", "0.5");
	const p99 = one(m, "moqdp_relay_latency_seconds", "quantile", "0.99");
	show("latency", p99, `${fmt(p50 * 1e3, 2)} / ${fmt(p99 * 1e3, 2)}`);
	const drops = prev ? rate(cur.drops, prev.drops) : NaN;
	show("drops", drops, fmt(drops, 0));

	// charts
	push(hist.egress, egress / 1e6);
	push(hist.egressBps, egress);
	push(hist.ingress, ingress / 1e6);
	const eg = [
		{ name: "egress", color: COLORS[0], values: hist.egress },
		{ name: "ingress", color: COLORS[1], values: hist.ingress },
	];
	chart(document.getElementById("egress-chart"), eg);
	legend("egress-legend", eg);
	const workers = [...cur.wbusy.keys()].sort((a, b) => Number(a) - Number(b));
	const wrows = [];
	for (const w of workers) {
		if (!hist.busy.has(w)) hist.busy.set(w, []);
		const s = prev && prev.wbusy.has(w)
			? share(cur.wbusy.get(w), cur.widle.get(w), prev.wbusy.get(w), prev.widle.get(w))
			: NaN;
		push(hist.busy.get(w), s * 100);
		const fr = prev && prev.wframes.has(w) ? rate(cur.wframes.get(w), prev.wframes.get(w)) : NaN;
		wrows.push([w, { text: fmt(s * 100, 1), cls: "num", value: s },
			{ text: String(one(m, "moqdp_worker_connections", "worker", w)), cls: "num" },
			{ text: String(one(m, "moqdp_worker_sessions", "worker", w)), cls: "num",
				value: one(m, "moqdp_worker_sessions", "worker", w) },
			{ text: fmt(fr, 0), cls: "num" }]);
	}
	const bs = workers.map((w, i) => ({ name: `worker ${w}`, color: COLORS[i % COLORS.length], values: hist.busy.get(w) }));
	chart(document.getElementById("busy-chart"), bs, 100);
	legend("busy-legend", bs);
	rows("worker-table", wrows, "no workers", 5);

	// cluster links
	const links = [];
	for (const [peer, state] of byLabel(m, "moqdp_cluster_link_state", "peer")) {
		const sent = prev && prev.lsent.has(peer) ? rate(cur.lsent.get(peer), prev.lsent.get(peer)) * 8 : NaN;
		const recv = prev && prev.lrecv.has(peer) ? rate(cur.lrecv.get(peer), prev.lrecv.get(peer)) * 8 : NaN;
		links.push([peer, { text: LINK_STATE[state] ?? String(state), cls: `s${state}`, value: state },
			{ text: fmt(one(m, "moqdp_cluster_link_rtt_seconds", "peer", peer) * 1e3, 2), cls: "num" },
			{ text: fmt(sent / 1e6, 2), cls: "num" }, { text: fmt(recv / 1e6, 2), cls: "num" },
			{ text: String(one(m, "moqdp_cluster_link_upstream_subscriptions", "peer", peer)), cls: "num" },
			{ text: String(one(m, "moqdp_cluster_link_reconnects_total", "peer", peer)), cls: "num" }]);
	}
	rows("links", links, "no cluster links (--cluster-connect)", 7);

	prev = cur;
	status.samples++;
	status.last = { uptime: up, egress, ingress, busy, sessions: sum(m, "moqdp_sessions"),
		subscribers: sum(m, "moqdp_subscribers"), broadcasts: sum(m, "moqdp_broadcasts"),
		workers: workers.length, links: links.length };
}

async function poll() {
	const state = document.getElementById("state");
	try {
		const r = await fetch(`/status/metrics${jwt ? `?jwt=${encodeURIComponent(jwt)}` : ""}`, { cache: "no-store" });
		if (!r.ok) throw new Error(`/status/metrics: ${r.status}`);
		update(parse(await r.text()));
		state.textContent = `live, sample ${status.samples}`;
		state.className = "ok";
		status.error = "";
	} catch (e) {
		status.error = String(e);
		state.textContent = `no answer: ${e.message ?? e}`;
		state.className = "bad";
	}
	setTimeout(poll, POLL_MS);
}

async function announced() {
	try {
		const r = await fetch(`/announced${jwt ? `?jwt=${encodeURIComponent(jwt)}` : ""}`, { cache: "no-store" });
		if (r.status === 401) {
			rows("bcasts", [], "a token is needed to list them (/status?jwt=...)", 1);
		} else if (r.ok) {
			const list = (await r.text()).split("\n").filter((l) => l !== "").sort();
			status.broadcasts = list;
			rows("bcasts", list.map((b) => [b]), "none", 1);
		}
	} catch {
		// the next round tries again
	}
	setTimeout(announced, ANNOUNCED_MS);
}

poll();
announced();
