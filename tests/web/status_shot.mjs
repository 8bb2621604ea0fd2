// SPDX-License-Identifier: MIT
// status_shot.mjs: a PNG of a running relay's /status page, taken in
// headless Chromium once the page has polled for a while (docs/status.png is
// one taken during `scripts/demo --browser`; docs/DEPLOY.md, "The /status
// page"). Exit status 1 when the page never went live.
// usage: node status_shot.mjs http://127.0.0.1:4443/status FILE.png [--wait S]
import { chromium } from "playwright-core";

const [url, file] = process.argv.slice(2);
const w = process.argv.indexOf("--wait");
const wait = w > 0 ? Number(process.argv[w + 1]) : 15;
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
let rc = 1;
try {
	const page = await browser.newPage({ viewport: { width: 1280, height: 760 } });
	await page.goto(url);
	for (let i = 0; i < wait * 10; i++) await new Promise((r) => setTimeout(r, 100));
	const samples = await page.evaluate(() => window.moqdpStatus?.samples ?? 0);
	await page.screenshot({ path: file, fullPage: true });
	process.stdout.write(`${file}: ${samples} samples\n`);
	rc = samples > 0 ? 0 : 1;
} finally {
	await browser.close();
}
process.exit(rc);
