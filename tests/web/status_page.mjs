// SPDX-License-Identifier: MIT
// status_page.mjs: the relay's /status page (web/status.c, web/status/) in
// headless Chromium against the numbers /metrics gives (issue 27). A relay
// on the kernel backend with --tcp 1, --mgmt and a cluster link to a peer
// that is not there; moqdp-load publishes and 4 subscribers take both
// tracks over QUIC. Checks: the page and its script come from the binary and
// name no other origin; /status/metrics is /metrics' text; in Chromium the
// page makes requests only to the relay, shows sessions, connections,
// subscribers and broadcasts equal to /metrics, egress within 35% of the
// rate of /metrics' moqdp_tx_bytes_total over the same seconds, a busy
// share in [0, 1] for each worker, the broadcast, the link and its state,
// and draws both charts. TAP on stdout.
// usage: node status_page.mjs <moqdp-relay> <moqdp-load> [--screenshot FILE]
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { done, ok, sleep, startRelay } from "./relay.mjs";

const [relayPath, loadPath] = process.argv.slice(2);
const shotAt = process.argv.indexOf("--screenshot");
const screenshot = shotAt > 0 ? process.argv[shotAt + 1] : "";
const SUBS = 4;

async function freePort() {
	return new Promise((resolve) => {
		const s = createServer();
		s.listen(0, "127.0.0.1", () => {
			const p = s.address().port;
			s.close(() => resolve(p));
		});
	});
}

// Prometheus text: Map name -> [{ labels, v }]
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
const val = (m, n) => (m.get(n) ?? []).reduce((a, x) => a + x.v, 0);

const mport = await freePort();
const dead = await freePort();
const peer = `moql://127.0.0.1:${dead}`;
const relay = await startRelay(relayPath, ["--mgmt", `127.0.0.1:${mport}`, "--cluster-connect", peer,
	"--cluster-ca", "insecure", "--stats-interval", "0"]);
const base = `http://127.0.0.1:${relay.port}`;
const metrics = async () => parse(await (await fetch(`http://127.0.0.1:${mport}/metrics`)).text());
let load;
let browser;
try {
	// the page's own files
	let r = await fetch(`${base}/status`);
	const html = await r.text();
	ok(r.status === 200 && r.headers.get("content-type").startsWith("text/html") &&
		html.includes('<canvas id="egress-chart"') && html.includes('<canvas id="busy-chart"') &&
		html.includes('src="/status/status.js"'), "/status: the page, with both canvases and its script", r.status);
	r = await fetch(`${base}/status/status.js`);
	const js = await r.text();
	ok(r.status === 200 && r.headers.get("content-type").startsWith("text/javascript") && js.includes("/status/metrics"),
		"/status/status.js: the script, from the binary", r.status);
	ok(!/(https?:)?\/\/[a-z0-9]/i.test(html.replace(/<!--[\s\S]*?-->/g, "")) && !/https?:\/\//i.test(js),
		"neither names another origin (no http://, https:// or //host)");
	r = await fetch(`${base}/status/nothing`);
	ok(r.status === 404, "/status/nothing: 404", r.status);
	r = await fetch(`${base}/status/metrics`);
	const sm = parse(await r.text());
	const mm = await metrics();
	const names = (m) => [...m.keys()].sort().join(",");
	ok(r.status === 200 && sm.size > 100 && names(sm) === names(mm),
		`/status/metrics carries what /metrics does (${sm.size} names)`, `${names(sm)}\n${names(mm)}`);

	// traffic: a publisher and subscribers for the rest of the test
	load = spawn(loadPath, ["--kernel", "--relay", `127.0.0.1:${relay.port}`, "--local", "127.0.0.1",
		"--publish", "--subscribers", String(SUBS), "--duration", "40", "--quiet"],
	{ stdio: ["ignore", "ignore", "pipe"] });
	let m = mm;
	for (let i = 0; i < 100 && !(val(m, "moqdp_subscribers") === 2 * SUBS && val(m, "moqdp_broadcasts") === 1); i++) {
		await sleep(100);
		m = await metrics();
	}
	ok(val(m, "moqdp_subscribers") === 2 * SUBS && val(m, "moqdp_broadcasts") === 1,
		`moqdp-load is up: ${val(m, "moqdp_subscribers")} subscriptions, ${val(m, "moqdp_broadcasts")} broadcast`);

	if (!existsSync("/usr/bin/chromium")) {
		process.stdout.write("# no /usr/bin/chromium: the browser cases skipped\n");
	} else {
		const { chromium } = await import("playwright-core");
		browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
		const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
		const elsewhere = [];
		const errors = [];
		page.on("request", (q) => {
			if (!q.url().startsWith(`${base}/`)) elsewhere.push(q.url());
		});
		page.on("pageerror", (e) => errors.push(String(e)));
		page.on("console", (msg) => {
			if (msg.type() === "error") errors.push(msg.text());
		});
		await page.goto(`${base}/status`);
		const samples = () => page.evaluate(() => window.moqdpStatus?.samples ?? 0);
		for (let i = 0; i < 150 && (await samples()) < 4; i++) await sleep(100);
		ok((await samples()) >= 4, `the page polled /status/metrics (${await samples()} samples)`);

		// the gauges: equal to /metrics (read both until they agree; the load is steady)
		const ids = { sessions: "moqdp_sessions", connections: "moqdp_connections",
			subscribers: "moqdp_subscribers", broadcasts: "moqdp_broadcasts" };
		const shown = async () => {
			const o = {};
			for (const id of Object.keys(ids)) o[id] = await page.getAttribute(`#${id}`, "data-value");
			return o;
		};
		let diff = "";
		for (let i = 0; i < 20; i++) {
			const s = await shown();
			m = await metrics();
			diff = Object.entries(ids).filter(([id, n]) => !s[id] || Number(s[id]) !== val(m, n))
				.map(([id, n]) => `${id}: page ${s[id]}, /metrics ${val(m, n)}`).join("; ");
			if (diff === "") break;
			await sleep(500);
		}
		ok(diff === "", "sessions, connections, subscribers, broadcasts: the page shows what /metrics gives", diff);
		const texts = await page.evaluate(() => ["sessions", "subscribers"].map((id) =>
			[document.getElementById(id).textContent, document.getElementById(id).dataset.value]));
		ok(texts.every(([t, v]) => t === v), "the numbers shown are the values", JSON.stringify(texts));

		// egress: the page's last seconds against /metrics' counter over the same span
		const m0 = await metrics();
		const s0 = await samples();
		await sleep(4000);
		const m1 = await metrics();
		const s1 = await samples();
		const want = ((val(m1, "moqdp_tx_bytes_total") - val(m0, "moqdp_tx_bytes_total")) * 8) /
			(val(m1, "moqdp_uptime_seconds") - val(m0, "moqdp_uptime_seconds"));
		const got = await page.evaluate((n) => {
			const h = window.moqdpStatus.egressHistory.slice(-n).filter(Number.isFinite);
			return h.reduce((a, x) => a + x, 0) / h.length;
		}, Math.max(1, s1 - s0));
		const shownEgress = Number(await page.getAttribute("#egress", "data-value"));
		ok(want > 1e6 && Math.abs(got - want) / want < 0.35 && shownEgress > 0,
			`egress: the page ${(got / 1e6).toFixed(2)} Mbit/s over its last ${s1 - s0} samples, ` +
			`/metrics ${(want / 1e6).toFixed(2)} Mbit/s over the same seconds`);

		// busy per worker: a row per worker of /metrics, a share in [0, 1]
		const workers = val(m1, "moqdp_workers");
		const busy = await page.$$eval("#worker-table tr td:nth-child(2)", (tds) => tds.map((td) => Number(td.dataset.value)));
		ok(busy.length === workers && workers >= 1 && busy.every((b) => b >= 0 && b <= 1),
			`busy share per worker: ${busy.length} row(s) for ${workers} worker(s), ${busy.map((b) => b.toFixed(3)).join(", ")}`);
		// both charts drawn (pixels that are not the background)
		const drawn = await page.evaluate(() => ["egress-chart", "busy-chart"].map((id) => {
			const c = document.getElementById(id);
			const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
			let n = 0;
			for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
			return n;
		}));
		ok(drawn.every((n) => n > 500), `both canvases are drawn (${drawn.join(", ")} pixels)`);

		// broadcasts and links
		for (let i = 0; i < 50 && !(await page.textContent("#bcasts")).includes("moqdp/load"); i++) await sleep(100);
		ok((await page.textContent("#bcasts")).includes("moqdp/load"), "the broadcast is listed (/announced)",
			await page.textContent("#bcasts"));
		const link = await page.$$eval("#links tr", (trs) => trs.map((tr) => [...tr.children].map((td) =>
			[td.textContent, td.dataset.value ?? ""])));
		const state = (await metrics()).get("moqdp_cluster_link_state")?.[0];
		ok(link.length === 1 && link[0][0][0] === peer && state?.labels.peer === peer &&
			Number(link[0][1][1]) <= 1 && ["down", "connecting"].includes(link[0][1][0]),
			`the cluster link: ${peer}, ${link[0]?.[1]?.[0]} (/metrics state ${state?.v})`, JSON.stringify(link));
		ok(elsewhere.length === 0, "the page requested nothing from another origin", elsewhere.join(" "));
		ok(errors.length === 0, "no script error", errors.join("; "));
		if (screenshot) {
			await page.screenshot({ path: screenshot, fullPage: true });
			process.stdout.write(`# screenshot: ${screenshot}\n`);
		}
	}
} catch (e) {
	ok(false, "no exception", e?.stack ?? String(e));
} finally {
	await browser?.close();
	load?.kill("SIGTERM");
	await relay.stop();
}
process.exit(done() === 0 ? 0 : 1);
