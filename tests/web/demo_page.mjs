// SPDX-License-Identifier: MIT
// demo_page.mjs: scripts/demo --browser's page: bundled from @moq/net by
// esbuild (demo/build.mjs) and served by moqdp-relay --web-root under /demo/
// (the files, their types; names outside the directory refused), and what it
// connects to answers: the same origin's WebSocket upgrade. TAP on stdout.
// usage: node demo_page.mjs <moqdp-relay>
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { done, ok, publish, startRelay, subscribe } from "./relay.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "moqdp-demo-"));
execFileSync(process.execPath, [join(here, "demo", "build.mjs"), dir]);
const bundle = readFileSync(join(dir, "app.js"));
ok(bundle.length > 10000, `esbuild bundled the page with @moq/net (${bundle.length} bytes)`);
const relay = await startRelay(process.argv[2], ["--web-root", dir]);
const base = `http://127.0.0.1:${relay.port}`;
let pub;
try {
	let r = await fetch(`${base}/demo/`);
	const html = await r.text();
	ok(r.status === 200 && r.headers.get("content-type").startsWith("text/html") && html.includes('src="app.js"'), "/demo/ serves index.html", r.status);
	r = await fetch(`${base}/demo/app.js`);
	const js = Buffer.from(await r.arrayBuffer());
	ok(r.status === 200 && r.headers.get("content-type").startsWith("text/javascript") && js.equals(bundle), "/demo/app.js is the bundle, byte for byte", r.status);
	r = await fetch(`${base}/demo/..%2Fetc%2Fpasswd`);
	ok(r.status === 404, "/demo/ refuses names outside its directory", r.status);
	r = await fetch(`${base}/demo/.hidden`);
	ok(r.status === 404, "/demo/ refuses dot files", r.status);
	// what the page does: @moq/net on the page's own origin, the demo's broadcast
	pub = await publish(new URL(`${base}/`), "moqdp/demo");
	const s = await subscribe(new URL(`${base}/`), "moqdp/demo", 5);
	ok(s.groups >= 5 && s.errors.length === 0, "the page's origin carries the broadcast over WebSocket", s.errors.join("; "));
	s.conn.close();
	// a real browser: Chromium opens the page forced onto the WebSocket
	// fallback (?ws=1: @moq/qmux's Session as the transport, no WebTransport)
	// and checks every byte of every frame
	if (existsSync("/usr/bin/chromium")) {
		const { chromium } = await import("playwright-core");
		const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
		try {
			const page = await browser.newPage();
			await page.goto(`${base}/demo/?broadcast=moqdp/demo&tracks=data&verify=1&ws=1`);
			let v = "";
			for (let i = 0; i < 100 && !/verified ([3-9]\d|\d{3,}) bad 0/.test(v); i++) {
				await new Promise((r) => setTimeout(r, 100));
				v = (await page.textContent("#verify")) ?? "";
			}
			const st = await page.textContent("#status");
			ok(/WebSocket/.test(st), "Chromium forced onto WebSocket: the page connected over qmux-01", st);
			ok(/verified ([3-9]\d|\d{3,}) bad 0/.test(v), `Chromium: frames arrive, every byte verified (${v})`, v);
		} finally {
			await browser.close();
		}
	} else {
		process.stdout.write("# no /usr/bin/chromium: the browser case skipped\n");
	}
} catch (e) {
	ok(false, "no exception", e?.stack ?? String(e));
} finally {
	pub?.stop();
	await relay.stop();
}
process.exit(done() === 0 ? 0 : 1);
