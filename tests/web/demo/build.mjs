// SPDX-License-Identifier: MIT
// build.mjs: bundle the demo page (app.js + @moq/net) with esbuild into
// <outdir> beside index.html: what moqdp-relay --web-root serves under /demo/.
// usage: node build.mjs <outdir>
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2];
if (!out) {
	console.error("usage: node build.mjs <outdir>");
	process.exit(2);
}
mkdirSync(out, { recursive: true });
await build({
	entryPoints: [join(here, "app.js")],
	bundle: true,
	format: "esm",
	target: "es2022",
	minify: true,
	outfile: join(out, "app.js"),
	logLevel: "error",
});
copyFileSync(join(here, "index.html"), join(out, "index.html"));
