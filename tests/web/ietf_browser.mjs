// SPDX-License-Identifier: MIT
// ietf_browser.mjs: IETF moq-transport draft-20 over WebTransport from headless
// Chromium (Debian's, playwright-core) to moqdp-relay (kernel backend, UDP
// and TCP on loopback). The page (ietf_page.js, bundled by esbuild) opens two
// WebTransport sessions with protocol moqt-20 and @moq/net's IETF client:
// one publishes, the other reads that broadcast and a moq-lite-05 one a node
// publisher sends over WebSocket; a node moq-lite subscriber reads the
// browser's IETF broadcast. Every byte is checked. TAP on stdout.
// usage: node ietf_browser.mjs <moqdp-relay>
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { done, ok, publish, startRelay, subscribe } from "./relay.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const CHROMIUM = "/usr/bin/chromium";
if (!existsSync(CHROMIUM)) {
	console.log("1..0 # SKIP no browser on this machine (/usr/bin/chromium)");
	process.exit(0);
}
const { chromium } = await import("playwright-core");
const esbuild = await import("esbuild");
const bundle = await esbuild.build({
	entryPoints: [path.join(here, "ietf_page.js")], bundle: true, format: "esm", platform: "browser",
	target: "es2022", write: false, logLevel: "silent",
});
const js = bundle.outputFiles[0].text;
const page = `<!doctype html><meta charset=utf-8><title>moqdp ietf</title><script type=module src="/page.js"></script>`;
const webUrl = "http://127.0.0.1:9/";

const relay = await startRelay(process.argv[2]);
const url = new URL(`http://127.0.0.1:${relay.port}/`);
let browser;
const lite = await publish(url, "lite/web");
try {
	browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
		args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
	const ctx = await browser.newContext();
	await ctx.grantPermissions(["local-network-access"], { origin: webUrl.slice(0, -1) }).catch(() => {});
	const pg = await ctx.newPage();
	await pg.route(`${webUrl}**`, (route) => {
		const isJs = route.request().url().endsWith("/page.js");
		route.fulfill({ status: 200, contentType: isJs ? "text/javascript" : "text/html", body: isJs ? js : page });
	});
	const lines = [];
	pg.on("console", (m) => lines.push(m.text()));
	pg.on("pageerror", (e) => lines.push(`pageerror: ${e}`));
	await pg.goto(webUrl);
	await pg.waitForFunction(() => window.moqdpIetfReady === true, null, { timeout: 15000 });
	const cfg = { url: `https://127.0.0.1:${relay.port}/`, hash: relay.fingerprint, alpn: "moqt-20",
		pubPath: "browser/ietf", litePath: "lite/web", groups: 6, timeoutMs: 20000 };
	const run = pg.evaluate((c) => window.moqdpIetf(c), cfg);
	// the node side reads the browser's IETF broadcast over moq-lite
	const n = await subscribe(url, "browser/ietf", 4, 30000).catch((e) => ({ groups: 0, errors: [String(e)] }));
	const st = await run;
	ok(st.protocol === "moqt-20" && st.error === "", `Chromium: WebTransport with protocol ${st.protocol}, draft-20 SETUP`,
		`${st.error}\n${lines.slice(-8).join("\n")}`);
	ok(st.own >= 6 && st.bad.length === 0, `Chromium: IETF publisher -> IETF subscriber, ${st.own} groups verified`, st.bad.slice(0, 3).join("; "));
	ok(st.lite >= 6 && st.bad.length === 0, `Chromium: moq-lite-05 publisher (node) -> IETF subscriber, ${st.lite} groups verified`, st.bad.slice(0, 3).join("; "));
	ok(n.groups >= 4 && n.errors.length === 0, `node moq-lite-05 subscriber reads the browser's IETF broadcast: ${n.groups} groups verified`, n.errors.slice(0, 3).join("; "));
	n.conn?.close();
} catch (e) {
	ok(false, "no exception", e?.stack ?? String(e));
} finally {
	lite.stop();
	await browser?.close();
	await relay.stop();
}
process.exit(done() === 0 ? 0 : 1);
