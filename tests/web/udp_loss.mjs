// SPDX-License-Identifier: MIT
// udp_loss.mjs: a UDP relay between a client and moqdp-relay that loses and
// reorders packets, for the loss cases of the browser tests (this machine has
// no netem: `tc qdisc add ... netem` is an unknown qdisc here).
//
//   node udp_loss.mjs --listen IP:PORT --upstream IP:PORT [--bind IP]
//                     [--loss 0.05] [--reorder 0.02] [--min-bytes 100]
//                     [--grace-ms 1500] [--seed N] [--seconds 120]
//
// Every client address gets its own upstream socket (bound to --bind), so
// the relay sees one stable address per client. After --grace-ms from a
// client's first packet (its handshake goes through whole), packets of more
// than --min-bytes are dropped with probability --loss in each direction
// and --reorder of the rest are held 3-10 ms (arriving after later ones);
// ACK-sized packets pass. The draws come from a PRNG seeded by --seed, so
// a run can be repeated. Prints one JSON line of counters every second and
// on SIGINT/SIGTERM (then exits); exits by itself after --seconds.
import dgram from "node:dgram";

const args = Object.fromEntries(
	process.argv.slice(2).reduce((acc, a, i, all) => {
		if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]]);
		return acc;
	}, []),
);
function hostPort(s, what) {
	const m = /^(.*):(\d+)$/.exec(s || "");
	if (!m) {
		console.error(`udp_loss: --${what} wants IP:PORT, got ${s}`);
		process.exit(2);
	}
	return [m[1], Number(m[2])];
}
const [lip, lport] = hostPort(args.listen, "listen");
const [uip, uport] = hostPort(args.upstream, "upstream");
const bindIp = args.bind || undefined;
const loss = Number(args.loss ?? 0.05);
const reorder = Number(args.reorder ?? 0.02);
const minBytes = Number(args["min-bytes"] ?? 100);
const graceMs = Number(args["grace-ms"] ?? 1500);
const seconds = Number(args.seconds ?? 120);
if (!(loss >= 0 && loss < 1) || !(reorder >= 0 && reorder < 1)) {
	console.error("udp_loss: --loss and --reorder are probabilities in [0, 1)");
	process.exit(2);
}

// xorshift32, seeded
let x = (Number(args.seed ?? 1) >>> 0) || 1;
function rand() {
	x ^= x << 13;
	x >>>= 0;
	x ^= x >>> 17;
	x ^= x << 5;
	x >>>= 0;
	return x / 4294967296;
}

const c = {
	clients: 0,
	up: { packets: 0, bytes: 0, dropped: 0, reordered: 0 },
	down: { packets: 0, bytes: 0, dropped: 0, reordered: 0 },
};
const flows = new Map(); // "ip:port" -> { sock, t0 }

// Forward one packet through `send` unless the draw drops it.
function pass(dir, flow, msg, send) {
	dir.packets++;
	dir.bytes += msg.length;
	if (Date.now() - flow.t0 >= graceMs && msg.length > minBytes) {
		if (rand() < loss) {
			dir.dropped++;
			return;
		}
		if (rand() < reorder) {
			dir.reordered++;
			setTimeout(send, 3 + Math.floor(rand() * 8));
			return;
		}
	}
	send();
}

const front = dgram.createSocket({ type: lip.includes(":") ? "udp6" : "udp4" });
front.on("message", (msg, rinfo) => {
	const key = `${rinfo.address}:${rinfo.port}`;
	let flow = flows.get(key);
	if (!flow) {
		const sock = dgram.createSocket({ type: uip.includes(":") ? "udp6" : "udp4" });
		flow = { sock, t0: Date.now() };
		flows.set(key, flow);
		c.clients++;
		sock.on("message", (m) => pass(c.down, flow, m, () => front.send(m, rinfo.port, rinfo.address)));
		sock.on("error", () => {});
		sock.bind({ address: bindIp, port: 0 });
	}
	pass(c.up, flow, msg, () => flow.sock.send(msg, uport, uip));
});
front.on("error", (e) => {
	console.error(`udp_loss: ${args.listen}: ${e.message}`);
	process.exit(1);
});
front.bind(lport, lip, () => console.log(JSON.stringify({ listening: `${lip}:${lport}` })));

const report = () => console.log(JSON.stringify(c));
const tick = setInterval(report, 1000);
function end() {
	clearInterval(tick);
	report();
	process.exit(0);
}
process.on("SIGINT", end);
process.on("SIGTERM", end);
setTimeout(end, seconds * 1000);
