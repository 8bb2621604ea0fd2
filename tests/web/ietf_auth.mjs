// SPDX-License-Identifier: MIT
// ietf_auth.mjs: IETF moq-transport (draft-20 and draft-16, @moq/net's ietf/
// client over WebSocket) against moqdp-relay with --auth-key: the same token
// checks as moq-lite. The fixture token (tests/fixtures/auth/hs256.jwt: root
// "demo", put ["alice"], get [""]) in the URL: publishing "alice" and reading
// it back works, publishing "bob" is refused (no subscriber finds it), and a
// session without a token is refused at the upgrade. Then --auth-url
// (tests/auth_server.py): grants, a refusal, the requests' ALPN and transport.
// TAP on stdout.
// usage: node ietf_auth.mjs <moqdp-relay>
import { spawn } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import Session from "@moq/qmux";
import * as Moq from "@moq/net";
import * as Ietf from "./node_modules/@moq/net/ietf/index.js";
import { exchangeSetup } from "./node_modules/@moq/net/connection/handshake.js";
import { Stream } from "./node_modules/@moq/net/stream.js";
import { checkFrame, done, FRAMES, ok, payload, sleep, startRelay } from "./relay.mjs";

for (const [name, fn] of Object.entries({
	difference(o) { return new Set([...this].filter((x) => !o.has(x))); },
}))
	if (!Set.prototype[name]) Object.defineProperty(Set.prototype, name, { value: fn, configurable: true, writable: true });
console.log = (...a) => process.stderr.write(`${a.join(" ")}\n`);
console.info = console.log;
process.on("unhandledRejection", () => {});

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = path.join(here, "..", "fixtures", "auth");
const token = readFileSync(path.join(fixtures, "hs256.jwt"), "utf8").trim();
const V = { 16: Ietf.Version.DRAFT_16, 20: Ietf.Version.DRAFT_20 };

async function connect(port, d, query, maxReq = 42069n) {
	const alpn = `moqt-${d}`;
	const quic = new Session(`ws://127.0.0.1:${port}/demo${query}`, {
		protocols: [alpn], versions: { [alpn]: "qmux-01" }, requireProtocol: true,
	});
	await quic.ready;
	const version = V[d];
	const url = new URL(`http://127.0.0.1:${port}/demo`);
	if (d >= 17) {
		const { control, solicit, cluster } = await exchangeSetup(quic, version, "ietf-auth");
		return new Ietf.Connection({ url, quic, control, solicit, cluster, maxRequestId: 0n, version, client: true });
	}
	const stream = await Stream.open(quic);
	await stream.writer.u53(0x20);
	const params = new Ietf.SetupOptions();
	params.setVarint(Ietf.SetupOption.MaxRequestId, maxReq); // @moq/net's connect(): 42069
	await new Ietf.ClientSetup({ versions: [version], parameters: params }).encode(stream.writer, version);
	await stream.reader.u53();
	const server = await Ietf.ServerSetup.decode(stream.reader, version);
	const maxRequestId = server.parameters.getVarint(Ietf.SetupOption.MaxRequestId) ?? 0n;
	return new Ietf.Connection({ url, quic, control: stream, maxRequestId, version, client: true });
}

function publishOn(conn, p) {
	const broadcast = new Moq.Broadcast.Producer();
	const track = broadcast.createTrack("data");
	conn.publish(Moq.Path.from(p), broadcast);
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
	return () => { clearInterval(timer); broadcast.close(); };
}

// Read @want whole groups of @p (retrying a refused subscription until the
// deadline: the announce may still be on its way).
async function read(conn, p, want, ms) {
	const deadline = Date.now() + ms;
	const res = { groups: 0, errors: [], last: "" };
	while (Date.now() < deadline && res.groups < want) {
		const sub = conn.consume(Moq.Path.from(p)).subscribe("data");
		try {
			while (res.groups < want) {
				const g = await Promise.race([sub.recvGroup(), sleep(Math.max(1, deadline - Date.now())).then(() => null)]);
				if (!g) break;
				let n = 0;
				for (;;) {
					const fr = await g.readFrame().catch(() => undefined);
					if (!fr) break;
					const e = checkFrame(fr.payload);
					if (e) res.errors.push(e);
					n++;
				}
				if (n === FRAMES) res.groups++;
			}
		} catch (e) {
			res.last = String(e);
		}
		sub.close();
		if (res.groups < want) await sleep(200);
	}
	return res;
}

const relay = await startRelay(process.argv[2], ["--auth-key", path.join(fixtures, "hs256.jwk")]);
try {
	for (const d of (process.env.DRAFTS ?? "20,16").split(",").map(Number)) {
		const pub = await connect(relay.port, d, `?jwt=${token}`);
		const stopA = publishOn(pub, "alice");
		const stopB = publishOn(pub, "bob");
		const sub = await connect(relay.port, d, `?jwt=${token}`);
		const a = await read(sub, "alice", 3, 10000);
		ok(a.groups >= 3 && a.errors.length === 0, `draft-${d}: with the token, "alice" published and read back (${a.groups} groups verified)`,
			`${a.last} ${a.errors.slice(0, 2).join("; ")}`);
		const b = await read(sub, "bob", 1, 3000);
		ok(b.groups === 0, `draft-${d}: "bob" (no put grant) is not published`, `${b.groups} groups`);
		stopA();
		stopB();
		pub.close();
		sub.close();
	}
	// a draft-16 publisher that grants the relay no request id (MAX_REQUEST_ID
	// 0): the relay cannot subscribe to it, so a subscriber is refused at once
	// (and the publisher is told REQUESTS_BLOCKED) rather than left waiting
	{
		const pub = await connect(relay.port, 16, `?jwt=${token}`, 0n);
		const stop = publishOn(pub, "alice/blocked");
		await sleep(500);
		const sub = await connect(relay.port, 20, `?jwt=${token}`);
		const t0 = Date.now();
		const s = sub.consume(Moq.Path.from("alice/blocked")).subscribe("data");
		const r = await Promise.race([s.recvGroup().then(() => "group", (e) => `error ${e}`), sleep(8000).then(() => "timeout")]);
		ok(r.startsWith("error") && Date.now() - t0 < 5000, `MAX_REQUEST_ID 0: the subscription is refused promptly (${Date.now() - t0} ms)`, r);
		stop();
		pub.close();
		sub.close();
	}
	const refused = await connect(relay.port, 20, "").then(() => false, () => true);
	ok(refused, "no token: the session is refused");
} catch (e) {
	ok(false, "no exception", e?.stack ?? String(e));
} finally {
	await relay.stop();
	if (process.env.IETF_DEBUG) process.stderr.write(relay.stderr());
}

// --auth-url (moq-relay's contract) for IETF sessions: tests/auth_server.py
// picks its answer by the `mode=` query. An admitted publisher, a reader
// whose grant covers alice/** only, a refused session; the connect
// requests name the session's ALPN and path.
{
	const alog = path.join(os.tmpdir(), `moqdp-ietf-auth-${process.pid}.log`);
	const aport = 20000 + Math.floor(Math.random() * 20000);
	const srv = spawn("python3", [path.join(here, "..", "auth_server.py"), "--log", alog, "--port", String(aport)],
		{ stdio: ["ignore", "pipe", "inherit"] });
	await new Promise((res) => srv.stdout.once("data", res));
	const relay2 = await startRelay(process.argv[2], ["--auth-url", `http://127.0.0.1:${aport}/`]);
	try {
		for (const d of [20, 16]) {
			const pub = await connect(relay2.port, d, "?mode=admit");
			// (a broadcast of its own per draft: a draft-20 publisher of the
			// path a draft-16 one just left is read one group only, a defect
			// left open in issue 24's note)
			const stopA = publishOn(pub, `alice/d${d}`);
			const stopB = publishOn(pub, `bob/d${d}`);
			const sub = await connect(relay2.port, d, "?mode=httpalice");
			const a = await read(sub, `alice/d${d}`, 3, 10000);
			ok(a.groups >= 3 && a.errors.length === 0, `--auth-url draft-${d}: a grant of alice/** reads alice/d${d} (${a.groups} groups verified)`,
				`${a.last} ${a.errors.slice(0, 2).join("; ")}`);
			const b = await read(sub, `bob/d${d}`, 1, 3000);
			ok(b.groups === 0, `--auth-url draft-${d}: bob/d${d} is outside the reader's grant`, `${b.groups} groups`);
			stopA();
			stopB();
			pub.close();
			sub.close();
			// refused once the server answers (403): closed, at once or
			// right after its SETUP
			const t0 = Date.now();
			const refusedD = await connect(relay2.port, d, "?mode=refuse").then(
				(c) => Promise.race([c.closed.then(() => "closed"), sleep(5000).then(() => "open")]), () => "closed");
			ok(refusedD === "closed", `--auth-url draft-${d}: a session the server refuses (403) is closed (${Date.now() - t0} ms)`, refusedD);
		}
		const reqs = readFileSync(alog, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
		const conns = reqs.filter((r) => r.event === "connect");
		const alpns = new Set(conns.map((r) => r.alpn));
		ok(alpns.has("moqt-20") && alpns.has("moqt-16") && alpns.size === 2 && conns.every((r) => r.path === "/demo" && r.transport === "websocket" && /^127\.0\.0\.1:/.test(r.remote ?? "")),
			`--auth-url: the connect requests name the IETF ALPN and the path (${[...alpns].join(", ")}; ${conns.length} connects)`,
			JSON.stringify(conns.slice(0, 2)));
	} catch (e) {
		ok(false, "--auth-url: no exception", e?.stack ?? String(e));
	} finally {
		await relay2.stop();
		srv.kill("SIGTERM");
		rmSync(alog, { force: true });
		if (process.env.IETF_DEBUG) process.stderr.write(relay2.stderr());
	}
}
process.exit(done() === 0 ? 0 : 1);
