/* SPDX-License-Identifier: MIT */
/*
 * bench_quic_share: what it costs to reach a connection (DESIGN.md, rule 2).
 * N server connections each open S uni streams per round and write W
 * 100-byte chunks to each (fin on the last); the server sends them, an
 * in-process client acknowledges. Three ways for the application to reach
 * its connections:
 *   direct - the owner calls the endpoint itself (context passing, the design)
 *   mutex  - every call on a connection (and on the endpoint) takes a lock
 *   queue  - the application posts each operation to an SPSC ring
 *            (rte_ring-like, acquire/release) and the driver that owns the
 *            connection dequeues and runs it
 * Measured on the server side only (application operations, the server's
 * _send, _recv of ACKs, _timers): instructions per stream (callgrind,
 * --callgrind re-runs this program under valgrind) and TSC cycles per stream.
 * The client's work is not counted. All three modes run the same workload on
 * the same connections, each after one unmeasured warm-up round.
 *
 *   bench_quic_share [--json] [--callgrind] [--quick]
 */
#include "quic.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <x86intrin.h>
#include <valgrind/callgrind.h>

#define MAX_CONNS   128
#define MAX_STREAMS 128
#define CHUNK_LEN   100
/* In-flight datagrams per direction of the in-process path. */
#define QCAP 65536
/* Handoff ring slots (a power of two, like rte_ring). */
#define RING_SIZE 16384
/* At least this many streams per measurement. */
#define MIN_STREAMS 256

enum mode { M_DIRECT, M_MUTEX, M_QUEUE, M_COUNT };
static const char *const mode_name[] = {"direct", "mutex", "queue"};

struct dgram {
	size_t len;
	struct moq_quic_addr from, to;
	uint8_t data[1500];
};

struct fifo {
	struct dgram *d;
	uint32_t head, n;
};

static struct fifo up, down;
static struct moq_quic_endpoint *srv, *cli;
static struct moq_quic_conn *sconn[MAX_CONNS];
static int nsconn, ncli_est;
static uint64_t closed_streams;
static uint64_t now = 1000000000ull;
static uint8_t payload[CHUNK_LEN];
static pthread_mutex_t conn_lock[MAX_CONNS];
static pthread_mutex_t ep_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t cycles;

/* The handoff ring: one producer (application), one consumer (driver). */
struct op {
	uint16_t conn;
	uint16_t handle; /* the application's stream handle in this round */
	uint8_t open, fin;
};

static struct {
	struct op slot[RING_SIZE];
	uint32_t head __attribute__((aligned(64)));
	uint32_t tail __attribute__((aligned(64)));
} ring;

static int64_t handle_sid[MAX_CONNS][MAX_STREAMS];

static int on_est(struct moq_quic_conn *c, void *user, const char *alpn)
{
	(void)alpn;
	if (user == (void *)1)
		sconn[nsconn++] = c;
	else
		ncli_est++;
	return 0;
}

static void on_closed_stream(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t err,
                             void *app)
{
	(void)app;
	(void)c;
	(void)sid;
	(void)err;
	if (user == (void *)1)
		closed_streams++;
}

static const struct moq_quic_callbacks cbs = {
        .established = on_est,
        .stream_closed = on_closed_stream,
};

static struct moq_quic_addr addr4(const char *ip, uint16_t port)
{
	struct moq_quic_addr a;

	moq_quic_addr_ip4(ip, port, &a);
	return a;
}

/* ----------------------------------------------- measured server side */

__attribute__((noinline)) static int srv_send(struct moq_quic_pkt *p, size_t n, int locked)
{
	int rv;

	if (locked)
		pthread_mutex_lock(&ep_lock);
	rv = moq_quic_endpoint_send(srv, p, n, now);
	if (locked)
		pthread_mutex_unlock(&ep_lock);
	return rv;
}

__attribute__((noinline)) static void srv_recv(const struct dgram *d, int locked)
{
	if (locked)
		pthread_mutex_lock(&ep_lock);
	moq_quic_endpoint_recv(srv, d->data, d->len, &d->to, &d->from, now);
	if (locked)
		pthread_mutex_unlock(&ep_lock);
}

__attribute__((noinline)) static void srv_timers(int locked)
{
	if (locked)
		pthread_mutex_lock(&ep_lock);
	moq_quic_endpoint_timers(srv, now);
	if (locked)
		pthread_mutex_unlock(&ep_lock);
}

/* One stream operation, executed by whoever owns the connection. */
static inline int do_op(int c, int h, int open, int fin)
{
	struct iovec iov = {.iov_base = payload, .iov_len = CHUNK_LEN};

	long rv;

	if (open && (rv = moq_quic_stream_open(sconn[c], 0, &handle_sid[c][h])) != 0) {
		fprintf(stderr, "bench_quic_share: stream open: %s\n", moq_err_str((int)rv));
		return -1;
	}
	rv = moq_quic_stream_write(sconn[c], handle_sid[c][h], &iov, 1, fin);
	if (rv < 0)
		fprintf(stderr, "bench_quic_share: stream write: %s\n", moq_err_str((int)rv));
	return rv < 0 ? -1 : 0;
}

static inline int ring_enqueue(const struct op *o)
{
	uint32_t head = ring.head, tail = __atomic_load_n(&ring.tail, __ATOMIC_ACQUIRE);

	if (head - tail == RING_SIZE)
		return -1;
	ring.slot[head & (RING_SIZE - 1)] = *o;
	__atomic_store_n(&ring.head, head + 1, __ATOMIC_RELEASE);
	return 0;
}

static inline int ring_dequeue(struct op *o)
{
	uint32_t tail = ring.tail, head = __atomic_load_n(&ring.head, __ATOMIC_ACQUIRE);

	if (head == tail)
		return -1;
	*o = ring.slot[tail & (RING_SIZE - 1)];
	__atomic_store_n(&ring.tail, tail + 1, __ATOMIC_RELEASE);
	return 0;
}

static int drain_ring(void)
{
	struct op o;

	while (ring_dequeue(&o) == 0)
		if (do_op(o.conn, o.handle, o.open, o.fin) != 0)
			return -1;
	return 0;
}

/* The application's round: every connection opens @ns streams and writes
 * @nw chunks to each, round robin over streams (the fanout shape). */
__attribute__((noinline)) static int app_round(enum mode m, int nc, int ns, int nw)
{
	int c, h, w;

	for (w = 0; w < nw; w++) {
		for (c = 0; c < nc; c++) {
			for (h = 0; h < ns; h++) {
				int open = w == 0, fin = w == nw - 1;

				switch (m) {
				case M_DIRECT:
					if (do_op(c, h, open, fin) != 0)
						return -1;
					break;
				case M_MUTEX:
					pthread_mutex_lock(&conn_lock[c]);
					if (do_op(c, h, open, fin) != 0) {
						pthread_mutex_unlock(&conn_lock[c]);
						return -1;
					}
					pthread_mutex_unlock(&conn_lock[c]);
					break;
				default: {
					struct op o = {.conn = (uint16_t)c,
					               .handle = (uint16_t)h,
					               .open = (uint8_t)open,
					               .fin = (uint8_t)fin};

					while (ring_enqueue(&o) != 0)
						if (drain_ring() != 0)
							return -1;
					break;
				}
				}
			}
		}
	}
	/* the driver's turn */
	return m == M_QUEUE ? drain_ring() : 0;
}

/* --------------------------------------------------- the in-process path */

static void pump(struct moq_quic_endpoint *ep, struct fifo *f, int server, int locked)
{
	struct moq_quic_pkt pk[MOQ_QUIC_BURST];
	int n, i;

	do {
		size_t room = QCAP - f->n;

		if (room > MOQ_QUIC_BURST)
			room = MOQ_QUIC_BURST;
		if (room == 0)
			return;
		for (i = 0; i < (int)room; i++) {
			pk[i].data = f->d[(f->head + f->n + (uint32_t)i) % QCAP].data;
			pk[i].cap = sizeof(f->d[0].data);
		}
		n = server ? srv_send(pk, room, locked) : moq_quic_endpoint_send(ep, pk, room, now);
		for (i = 0; i < n; i++) {
			struct dgram *d = &f->d[(f->head + f->n) % QCAP];

			d->len = pk[i].len;
			d->from = pk[i].local;
			d->to = pk[i].remote;
			f->n++;
		}
	} while (n == (int)MOQ_QUIC_BURST);
}

static void deliver(struct moq_quic_endpoint *ep, struct fifo *f, int server, int locked)
{
	while (f->n > 0) {
		struct dgram *d = &f->d[f->head];

		if (server)
			srv_recv(d, locked);
		else
			moq_quic_endpoint_recv(ep, d->data, d->len, &d->to, &d->from, now);
		f->head = (f->head + 1) % QCAP;
		f->n--;
	}
}

/* Toggle callgrind collection and the TSC account around server work. */
static uint64_t t0;
static int collecting;

static void on(void)
{
	if (!collecting) {
		CALLGRIND_TOGGLE_COLLECT;
		collecting = 1;
		t0 = __rdtsc();
	}
}

static void off(void)
{
	if (collecting) {
		cycles += __rdtsc() - t0;
		CALLGRIND_TOGGLE_COLLECT;
		collecting = 0;
	}
}

/* Run until @until(): the server's work measured when @measure. Zero delay:
 * every datagram is delivered in the next step; time jumps to the next
 * expiry when idle. */
static int drive(int (*until)(void), int measure, int locked)
{
	int idle = 0;

	while (!until()) {
		uint64_t e;
		int busy = moq_quic_endpoint_pending(srv) || moq_quic_endpoint_pending(cli) ||
		           up.n || down.n;

		if (measure)
			on();
		if (moq_quic_endpoint_next_expiry(srv) <= now)
			srv_timers(locked);
		pump(srv, &down, 1, locked);
		deliver(srv, &up, 1, locked);
		if (measure)
			off();
		if (moq_quic_endpoint_next_expiry(cli) <= now)
			moq_quic_endpoint_timers(cli, now);
		deliver(cli, &down, 0, 0);
		pump(cli, &up, 0, 0);
		if (busy) {
			idle = 0;
			continue;
		}
		e = moq_quic_endpoint_next_expiry(srv);
		if (moq_quic_endpoint_next_expiry(cli) < e)
			e = moq_quic_endpoint_next_expiry(cli);
		if (e == UINT64_MAX || ++idle > 100000) {
			fprintf(stderr, "bench_quic_share: stalled\n");
			return -1;
		}
		now = e > now ? e : now + 1;
	}
	return 0;
}

static int want_conns;
static uint64_t want_closed;

static int all_established(void)
{
	return nsconn >= want_conns && ncli_est >= want_conns;
}

static int round_done(void)
{
	return closed_streams >= want_closed;
}

static int round_once(enum mode m, int nc, int ns, int nw, int measure)
{
	want_closed = closed_streams + (uint64_t)nc * (uint64_t)ns;
	if (measure)
		on();
	if (app_round(m, nc, ns, nw) != 0) {
		off();
		return -1;
	}
	if (measure)
		off();
	return drive(round_done, measure, m == M_MUTEX);
}

struct result {
	int conns, streams, writes;
	double instr[M_COUNT];  /* per stream; < 0 unknown */
	double cycles[M_COUNT]; /* per stream */
	uint64_t nstreams;
};

/* ----------------------------------------------------------- main */

static int setup(void)
{
	static const char *const alpn[] = {"moq-lite-05"};
	struct moq_quic_config sc, cc;
	struct moq_quic_addr sa = addr4("10.0.0.2", 443);
	int i;

	memset(&sc, 0, sizeof(sc));
	sc.role = MOQ_QUIC_SERVER;
	sc.alpn = alpn;
	sc.alpn_count = 1;
	sc.retry = MOQ_QUIC_RETRY_NEVER;
	sc.max_conns_per_addr = 2 * MAX_CONNS;
	sc.max_half_open = 2 * MAX_CONNS;
	sc.cb = &cbs;
	sc.user = (void *)1;
	cc = sc;
	cc.role = MOQ_QUIC_CLIENT;
	cc.user = (void *)2;
	cc.max_streams_uni = 1u << 24; /* never the limit here */
	srv = moq_quic_endpoint_new(&sc, NULL);
	cli = moq_quic_endpoint_new(&cc, NULL);
	up.d = calloc(QCAP, sizeof(struct dgram));
	down.d = calloc(QCAP, sizeof(struct dgram));
	if (!srv || !cli || !up.d || !down.d)
		return -1;
	for (i = 0; i < MAX_CONNS; i++) {
		struct moq_quic_addr ca = addr4("10.0.0.1", (uint16_t)(2000 + i));

		pthread_mutex_init(&conn_lock[i], NULL);
		if (moq_quic_connect(cli, &ca, &sa, NULL, now, NULL) == NULL)
			return -1;
	}
	want_conns = MAX_CONNS;
	return drive(all_established, 0, 0);
}

/* Modes are interleaved in blocks of rounds (direct, mutex, queue, direct,
 * ...) so that drift in the connections' state (congestion window, timers)
 * falls on all three alike. */
#define BLOCKS 4

static int warming;

static int run_case(struct result *r, int nc, int ns, int nw)
{
	uint64_t per_round = (uint64_t)nc * (uint64_t)ns, cyc[M_COUNT] = {0};
	int rounds = (int)((MIN_STREAMS + per_round - 1) / per_round), m, k, blk;
	/* big rounds are long enough on their own: one block, no repeats */
	int blocks = per_round >= 1024 ? 1 : BLOCKS;
	int per_block = (rounds + blocks - 1) / blocks;

	rounds = per_block * blocks;
	r->conns = nc;
	r->streams = ns;
	r->writes = nw;
	r->nstreams = per_round * (uint64_t)rounds;
	if (round_once(M_DIRECT, nc, ns, nw, 0) != 0) /* warm-up */
		return -1;
	for (blk = 0; blk < blocks; blk++) {
		for (m = 0; m < M_COUNT; m++) {
			char label[64];

			CALLGRIND_ZERO_STATS;
			cycles = 0;
			for (k = 0; k < per_block; k++)
				if (round_once((enum mode)m, nc, ns, nw, 1) != 0)
					return -1;
			snprintf(label, sizeof(label), "case c%d s%d w%d %s", nc, ns, nw,
			         mode_name[m]);
			if (!warming)
				CALLGRIND_DUMP_STATS_AT(label);
			cyc[m] += cycles;
		}
	}
	for (m = 0; m < M_COUNT; m++) {
		r->cycles[m] = (double)cyc[m] / (double)r->nstreams;
		r->instr[m] = -1;
	}
	return 0;
}

/* Under callgrind, each case/mode is one dump file named by its label. */
static int read_dumps(const char *base, struct result *res, int nres)
{
	int part, found = 0;

	for (part = 1; part < 1000; part++) {
		char path[256], line[512], label[128] = "";
		FILE *f;
		double ir = -1;
		int i, m;

		snprintf(path, sizeof(path), "%s.%d", base, part);
		f = fopen(path, "r");
		if (f == NULL)
			break;
		while (fgets(line, sizeof(line), f)) {
			char *p = strstr(line, "Client Request: ");

			if (strncmp(line, "desc: Trigger:", 14) == 0 && p)
				snprintf(label, sizeof(label), "%s", p + 16);
			else if (strncmp(line, "summary:", 8) == 0 ||
			         strncmp(line, "totals:", 7) == 0)
				ir = strtod(strchr(line, ':') + 1, NULL);
		}
		fclose(f);
		unlink(path);
		label[strcspn(label, "\n")] = '\0';
		for (i = 0; i < nres; i++)
			for (m = 0; m < M_COUNT; m++) {
				char want[64];

				snprintf(want, sizeof(want), "case c%d s%d w%d %s", res[i].conns,
				         res[i].streams, res[i].writes, mode_name[m]);
				if (strcmp(want, label) == 0 && ir >= 0) {
					/* summed over the blocks of this case */
					if (res[i].instr[m] < 0)
						res[i].instr[m] = 0;
					res[i].instr[m] += ir / (double)res[i].nstreams;
					found++;
				}
			}
	}
	unlink(base);
	return found;
}

int main(int argc, char **argv)
{
	static const int conns[] = {1, 16, 128}, streams[] = {1, 16, 128}, writes[] = {1, 16};
	struct result res[18];
	int json = 0, cg = 0, quick = 0, child = 0, nres = 0, i, a, b, c;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--callgrind"))
			cg = 1;
		else if (!strcmp(argv[i], "--quick"))
			quick = 1;
		else if (!strcmp(argv[i], "--child"))
			child = 1;
		else {
			fprintf(stderr, "usage: %s [--json] [--callgrind] [--quick]\n", argv[0]);
			return 2;
		}
	}
	if (setup() != 0) {
		fprintf(stderr, "bench_quic_share: setup failed\n");
		return 1;
	}
	/* one unmeasured pass so the first case does not pay for start-up */
	warming = 1;
	if (run_case(&res[0], 16, 16, 16) != 0) {
		fprintf(stderr, "bench_quic_share: warm-up failed\n");
		return 1;
	}
	warming = 0;
	for (a = 0; a < 2; a++)
		for (b = 0; b < 3; b++)
			for (c = 0; c < 3; c++) {
				if (quick && (conns[b] == 128 || streams[c] == 128))
					continue;
				if (run_case(&res[nres], conns[b], streams[c], writes[a]) != 0) {
					fprintf(stderr, "bench_quic_share: case failed\n");
					return 1;
				}
				nres++;
			}
	if (child)
		return 0;
	if (cg) {
		char base[64];
		pid_t pid;
		int status;

		snprintf(base, sizeof(base), "/tmp/bench_quic_share.%d.cg", (int)getpid());
		pid = fork();
		if (pid == 0) {
			char out[96];

			snprintf(out, sizeof(out), "--callgrind-out-file=%s", base);
			if (freopen("/dev/null", "w", stderr) == NULL)
				_exit(126);
			execlp("valgrind", "valgrind", "--tool=callgrind", "--collect-atstart=no",
			       out, argv[0], "--child", quick ? "--quick" : "--child",
			       (char *)NULL);
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0 || read_dumps(base, res, nres) == 0)
			fprintf(stderr, "bench_quic_share: callgrind run failed\n");
	}
	if (!json) {
		printf("quic share: server-side cost per stream (%d-byte writes); + = vs direct\n",
		       CHUNK_LEN);
		printf("%5s %7s %6s | %10s %10s %8s %10s %8s | %9s %9s %9s\n", "conns", "streams",
		       "writes", "direct Ir", "mutex Ir", "mutex+", "queue Ir", "queue+",
		       "direct cy", "mutex cy", "queue cy");
	}
	for (i = 0; i < nres; i++) {
		struct result *r = &res[i];
		double d = r->instr[M_DIRECT];
		double mp = d > 0 ? 100.0 * (r->instr[M_MUTEX] - d) / d : 0;
		double qp = d > 0 ? 100.0 * (r->instr[M_QUEUE] - d) / d : 0;

		if (json) {
			printf("{\"bench\":\"quic_share\",\"conns\":%d,\"streams\":%d,\"writes\":%"
			       "d,"
			       "\"nstreams\":%llu,\"instr_direct\":%.1f,\"instr_mutex\":%.1f,"
			       "\"instr_queue\":%.1f,\"mutex_pct\":%.2f,\"queue_pct\":%.2f,"
			       "\"cycles_direct\":%.1f,\"cycles_mutex\":%.1f,\"cycles_queue\":%.1f}"
			       "\n",
			       r->conns, r->streams, r->writes, (unsigned long long)r->nstreams,
			       r->instr[M_DIRECT], r->instr[M_MUTEX], r->instr[M_QUEUE], mp, qp,
			       r->cycles[M_DIRECT], r->cycles[M_MUTEX], r->cycles[M_QUEUE]);
			continue;
		}
		if (d > 0)
			printf("%5d %7d %6d | %10.0f %10.0f %7.2f%% %10.0f %7.2f%% | %9.0f %9.0f "
			       "%9.0f\n",
			       r->conns, r->streams, r->writes, d, r->instr[M_MUTEX], mp,
			       r->instr[M_QUEUE], qp, r->cycles[M_DIRECT], r->cycles[M_MUTEX],
			       r->cycles[M_QUEUE]);
		else
			printf("%5d %7d %6d | %10s %10s %8s %10s %8s | %9.0f %9.0f %9.0f\n",
			       r->conns, r->streams, r->writes, "-", "-", "-", "-", "-",
			       r->cycles[M_DIRECT], r->cycles[M_MUTEX], r->cycles[M_QUEUE]);
	}
	if (!json)
		printf("(Ir: callgrind instructions per stream, with --callgrind; cy: TSC cycles "
		       "per stream, single thread, no contention)\n");
	return 0;
}
