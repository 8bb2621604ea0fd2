/* SPDX-License-Identifier: MIT */
/*
 * bench_client.c: the load generator's client side in isolation, in virtual
 * time: moq_lg_client (publisher + N subscribers, every frame verified)
 * against a real moq/ relay node, both on real QUIC endpoints in one
 * process, datagrams handed over directly (no link, no loss). The clock
 * advances by a fixed step per iteration (what moqdp-load's loop does per
 * pass), so the same arguments do the same work: instruction counts under
 * callgrind repeat.
 *
 * The client's calls in the steady-state window go through lg_steady_*()
 * wrappers, the relay's through relay_steady_*(), so callgrind counts either
 * side alone:
 *
 *   valgrind --tool=callgrind --toggle-collect='lg_steady_*' \
 *       build/loadgen/bench_loadgen_client --subs 200 --seconds 1
 *
 * Prints the figures of the window: bytes verified, keep-up (verified /
 * published x subscribers), the client's and the relay's CPU time per
 * verified byte (thread CPU clock, noisy on a shared machine).
 *
 *   bench_loadgen_client [--subs N] [--tracks SPEC] [--seconds S] [--warm S]
 *                        [--step-us U] [--ramp R] [--tx-burst N] [--thp 0|1]
 *                        [--relay-max-streams N]
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "client.h"
#include "moq.h"

/* packets per moq_quic_endpoint_send call of the relay; the client's is
 * --tx-burst (moqdp-load's TX_BATCH by default) */
#define BURST        32
#define MAX_TX_BURST 512
/* --thp 1: moq_lg_heap_hugepages as moqdp-load --thp does */
#define HEAP_RESERVE (1ull << 30)
#define START_NS     1000000000ull
/* relay: moq_cache_expire as often as dpdk_app's worker */
#define RELAY_EXPIRE_NS 10000000ull

struct relay {
	struct moq_cache_counting cnt;
	struct moq_cache *cache;
	struct moq_node *node;
	struct moq_quic_endpoint *ep;
	uint64_t next_expire;
};

struct pktbuf {
	uint8_t data[MOQ_QUIC_MAX_UDP_PAYLOAD];
};

struct bench {
	struct relay r;
	struct moq_lg_client *cl;
	struct pktbuf *bufs;
	struct moq_quic_pkt pkts[MAX_TX_BURST];
	uint32_t tx_burst;
	uint64_t client_ns, relay_ns; /* thread CPU time in the window */
	uint64_t c2r_pkts, r2c_pkts;
};

static struct moq_quic_addr addr4(const char *ip, uint16_t port)
{
	struct moq_quic_addr a;

	moq_quic_addr_ip4(ip, port, &a);
	return a;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int relay_init(struct relay *r, uint32_t max_conns, uint64_t max_streams)
{
	moq_cache_counting_init(&r->cnt);
	struct moq_cache_cfg cc = {.alloc = moq_cache_counting_alloc(&r->cnt),
	                           .budget = 256ull << 20};
	r->cache = moq_cache_create(&cc);
	if (!r->cache)
		return -1;
	struct moq_node_cfg nc = {.cache = r->cache, .relay = 1};
	r->node = moq_node_create(&nc);
	if (!r->node)
		return -1;
	size_t n;
	const char *const *alpn = moq_node_alpns(&n);
	struct moq_quic_config qc = {
	        .role = MOQ_QUIC_SERVER,
	        .alpn = alpn,
	        .alpn_count = n,
	        .max_conns = max_conns,
	        .max_half_open = max_conns,
	        .max_conns_per_addr = max_conns,
	        .max_streams_uni = max_streams,
	        .cb = moq_node_quic_callbacks(),
	        .user = r->node,
	        .retry = MOQ_QUIC_RETRY_NEVER,
	};
	int e = 0;
	r->ep = moq_quic_endpoint_new(&qc, &e);
	return r->ep ? 0 : -1;
}

static void relay_free(struct relay *r)
{
	moq_quic_endpoint_free(r->ep);
	moq_node_destroy(r->node);
	moq_cache_destroy(r->cache);
}

/* ---- one iteration, in either phase -------------------------------------- */

static void prep(struct bench *b)
{
	for (int j = 0; j < MAX_TX_BURST; j++) {
		b->pkts[j].data = b->bufs[j].data;
		b->pkts[j].cap = sizeof(b->bufs[j].data);
	}
}

/* Relay: poll, timers, then everything it may send, handed to the client. */
static void relay_iter(struct bench *b, uint64_t now,
                       int (*crecv)(struct moq_lg_client *, const uint8_t *, size_t,
                                    const struct moq_quic_addr *, const struct moq_quic_addr *,
                                    uint64_t))
{
	struct relay *r = &b->r;
	moq_node_poll(r->node, now);
	if (now >= r->next_expire) {
		moq_cache_expire(r->cache, now);
		r->next_expire = now + RELAY_EXPIRE_NS;
	}
	moq_quic_endpoint_timers(r->ep, now);
	for (;;) {
		prep(b);
		int n = moq_quic_endpoint_send(r->ep, b->pkts, BURST, now);
		for (int j = 0; j < n; j++)
			crecv(b->cl, b->pkts[j].data, b->pkts[j].len, &b->pkts[j].remote,
			      &b->pkts[j].local, now);
		b->r2c_pkts += n > 0 ? (uint64_t)n : 0;
		if (n < BURST)
			break;
	}
}

/* Client: poll, then everything it may send, handed to the relay. */
static void
client_iter(struct bench *b, uint64_t now, int (*cpoll)(struct moq_lg_client *, uint64_t),
            int (*csend)(struct moq_lg_client *, struct moq_quic_pkt *, size_t, uint64_t))
{
	cpoll(b->cl, now);
	for (;;) {
		/* as moqdp-load: no call when nothing is ready */
		if (!moq_quic_endpoint_pending(moq_lg_client_endpoint(b->cl)))
			break;
		prep(b);
		int n = csend(b->cl, b->pkts, b->tx_burst, now);
		for (int j = 0; j < n; j++)
			moq_quic_endpoint_recv(b->r.ep, b->pkts[j].data, b->pkts[j].len,
			                       &b->pkts[j].remote, &b->pkts[j].local, now);
		b->c2r_pkts += n > 0 ? (uint64_t)n : 0;
		if (n < (int)b->tx_burst)
			break;
	}
}

/* The window's wrappers: callgrind --toggle-collect='lg_steady_*' counts
 * the client alone. */
static __attribute__((noinline, noclone)) int lg_steady_poll(struct moq_lg_client *cl, uint64_t now)
{
	return moq_lg_client_poll(cl, now);
}

static __attribute__((noinline, noclone)) int
lg_steady_send(struct moq_lg_client *cl, struct moq_quic_pkt *p, size_t n, uint64_t now)
{
	return moq_lg_client_send(cl, p, n, now);
}

static __attribute__((noinline, noclone)) int
lg_steady_recv(struct moq_lg_client *cl, const uint8_t *d, size_t len,
               const struct moq_quic_addr *l, const struct moq_quic_addr *rm, uint64_t now)
{
	return moq_lg_client_recv(cl, d, len, l, rm, now);
}

static struct bench *g_bench;

static int timed_recv(struct moq_lg_client *cl, const uint8_t *d, size_t len,
                      const struct moq_quic_addr *l, const struct moq_quic_addr *rm, uint64_t now)
{
	uint64_t t = cpu_ns();
	int rc = lg_steady_recv(cl, d, len, l, rm, now);
	g_bench->client_ns += cpu_ns() - t;
	return rc;
}

static __attribute__((noinline, noclone)) void relay_steady_iter(struct bench *b, uint64_t now)
{
	relay_iter(b, now, timed_recv);
}

/* ---- main ---------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr, "usage: bench_loadgen_client [--subs N] [--tracks SPEC] [--seconds S] "
	                "[--warm S] [--step-us U] [--ramp R] [--tx-burst N] [--thp 0|1] "
	                "[--relay-max-streams N]\n");
}

int main(int argc, char **argv)
{
	int thp = 0; /* as moqdp-load (--thp there) */
	uint32_t subs = 100, tx_burst = 128;
	/* uni streams the relay grants each connection (0 = quic/'s 1000, as
	 * moqdp-relay's --max-streams): with ngtcp2 0.12.1 a received uni
	 * stream is never closed, so the publisher runs out after 1000 groups
	 * (~20 s of 50 audio groups/s) and every subscriber stalls */
	uint64_t relay_streams = 0; /* moqdp-load's TX_BATCH */
	double seconds = 1.0, warm = 0.5, ramp = 0;
	uint64_t step = 20000; /* 20 us */
	const char *tracks = "video:1M,audio";
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			usage();
			return 2;
		}
		if (!strcmp(argv[i], "--subs"))
			subs = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = strtod(v, NULL);
		else if (!strcmp(argv[i], "--warm"))
			warm = strtod(v, NULL);
		else if (!strcmp(argv[i], "--step-us"))
			step = (uint64_t)(strtod(v, NULL) * 1000);
		else if (!strcmp(argv[i], "--ramp"))
			ramp = strtod(v, NULL);
		else if (!strcmp(argv[i], "--relay-max-streams"))
			relay_streams = strtoull(v, NULL, 10);
		else if (!strcmp(argv[i], "--thp"))
			thp = atoi(v);
		else if (!strcmp(argv[i], "--tx-burst"))
			tx_burst = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(argv[i], "--tracks"))
			tracks = v;
		else {
			usage();
			return 2;
		}
		i++;
	}
	if (!subs || step == 0 || seconds <= 0 || !tx_burst || tx_burst > MAX_TX_BURST) {
		usage();
		return 2;
	}

	long marked = thp ? moq_lg_heap_hugepages(HEAP_RESERVE) : 0;
	static struct bench b;
	g_bench = &b;
	b.tx_burst = tx_burst;
	b.bufs = calloc(MAX_TX_BURST, sizeof(*b.bufs));
	if (!b.bufs || relay_init(&b.r, subs + 16, relay_streams) < 0) {
		fprintf(stderr, "bench_loadgen_client: relay set-up failed\n");
		return 1;
	}

	struct moq_lg_client_cfg cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.publish = 1;
	cfg.subscribers = subs;
	cfg.ramp_per_s = ramp;
	char spec[256];
	snprintf(spec, sizeof(spec), "%s", tracks);
	char *save = NULL;
	for (char *t = strtok_r(spec, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (cfg.ntracks == MOQ_LG_MAX_TRACKS ||
		    moq_lg_track_parse(t, (uint16_t)(cfg.ntracks + 1), &cfg.tracks[cfg.ntracks]) <
		            0) {
			fprintf(stderr, "bench_loadgen_client: bad track '%s'\n", t);
			return 2;
		}
		cfg.ntracks++;
	}
	snprintf(cfg.broadcast, sizeof(cfg.broadcast), "moqdp/load");
	cfg.relay = addr4("10.77.0.1", 4443);
	unsigned nlocals = 1 + (subs + MOQ_LG_CONNS_PER_ADDR - 1) / MOQ_LG_CONNS_PER_ADDR;
	struct moq_quic_addr *locals = calloc(nlocals, sizeof(*locals));
	for (unsigned i = 0; i < nlocals; i++) {
		locals[i] = addr4("10.77.0.2", 40000);
		locals[i].u.in4.sin_addr.s_addr = htonl(ntohl(locals[i].u.in4.sin_addr.s_addr) + i);
	}
	cfg.locals = locals;
	cfg.nlocals = nlocals;
	cfg.origin = 0x1234567;
	int e = 0;
	b.cl = moq_lg_client_create(&cfg, START_NS, &e);
	if (!b.cl) {
		fprintf(stderr, "bench_loadgen_client: client: %s\n", moq_err_str(e));
		return 1;
	}

	/* ramp: until every subscriber is ready (at most 60 s virtual), then
	 * the warm-up */
	uint64_t now = START_NS, ready_at = 0, deadline = START_NS + 60000000000ull;
	struct moq_lg_report rep;
	struct moq_lg_client_extra ex;
	uint64_t iters = 0;
	while (now < deadline) {
		client_iter(&b, now, moq_lg_client_poll, moq_lg_client_send);
		relay_iter(&b, now, moq_lg_client_recv);
		now += step;
		if (!ready_at && (++iters & 255) == 0) {
			moq_lg_client_report(b.cl, now, 0, &rep, NULL);
			if (rep.subs_ready == subs)
				ready_at = now;
		}
		if (ready_at && now >= ready_at + (uint64_t)(warm * 1e9))
			break;
	}
	if (!ready_at) {
		moq_lg_client_report(b.cl, now, 0, &rep, NULL);
		fprintf(stderr, "bench_loadgen_client: %" PRIu64 " of %u ready after 60 s\n",
		        rep.subs_ready, subs);
		return 1;
	}

	/* the window */
	struct moq_lg_report r0, r1;
	moq_lg_client_report(b.cl, now, 0, &r0, NULL);
	uint64_t w0 = now, wend = now + (uint64_t)(seconds * 1e9), relay_ns = 0;
	b.client_ns = 0;
	b.r2c_pkts = b.c2r_pkts = 0;
	while (now < wend) {
		uint64_t t = cpu_ns();
		client_iter(&b, now, lg_steady_poll, lg_steady_send);
		uint64_t t1 = cpu_ns();
		b.client_ns += t1 - t;
		uint64_t c0 = b.client_ns;
		relay_steady_iter(&b, now);
		/* relay time = the iteration's time minus the client's receives */
		relay_ns += (cpu_ns() - t1) - (b.client_ns - c0);
		now += step;
	}
	moq_lg_client_report(b.cl, now, 0, &r1, &ex);
	double dt = (double)(now - w0) / 1e9;
	uint64_t bytes = r1.c.bytes_ok - r0.c.bytes_ok;
	uint64_t frames = r1.c.frames_ok - r0.c.frames_ok;
	uint64_t pub = r1.pub_bytes - r0.pub_bytes;
	printf("subs=%u tx_burst=%u thp_mb=%ld ready_s=%.2f window_s=%.2f step_us=%.1f "
	       "frames=%" PRIu64 " bytes=%" PRIu64 " keep_up=%.3f errors=%" PRIu64 " reset=%" PRIu64
	       " stalled=%" PRIu64
	       " client_ns_per_B=%.2f relay_ns_per_B=%.2f client_cpu_s=%.3f relay_cpu_s=%.3f"
	       " pkts_r2c=%" PRIu64 " pkts_c2r=%" PRIu64 "\n",
	       subs, b.tx_burst, marked >> 20, (double)(ready_at - START_NS) / 1e9, dt,
	       (double)step / 1e3, frames, bytes, pub ? (double)bytes / ((double)pub * subs) : 0,
	       moq_lg_counts_errors(&r1.c), r1.c.groups_reset - r0.c.groups_reset, ex.subs_stalled,
	       bytes ? (double)b.client_ns / (double)bytes : 0,
	       bytes ? (double)relay_ns / (double)bytes : 0, (double)b.client_ns / 1e9,
	       (double)relay_ns / 1e9, b.r2c_pkts, b.c2r_pkts);
	int rc = moq_lg_counts_errors(&r1.c) ? 1 : 0;
	moq_lg_client_destroy(b.cl);
	relay_free(&b.r);
	free(locals);
	free(b.bufs);
	return rc;
}
