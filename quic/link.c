/* SPDX-License-Identifier: MIT */
/*
 * link.c: the in-memory, virtual-time link between two endpoints (link.h).
 */
#include "link.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Largest datagram carried (Ethernet MTU payload). */
#define LINK_MTU       1500
#define LINK_DEF_QUEUE 4096
#define LINK_DEF_START 1000000000ull
/* Extra hold-back of a reordered datagram when reorder_ns is 0. */
#define LINK_REORDER_EXTRA 1000000ull

struct link_pkt {
	uint64_t at;  /* delivery time */
	uint64_t seq; /* tie-break: FIFO among equal times */
	int dir;
	size_t len;
	struct moq_quic_addr from, to;
	uint8_t data[LINK_MTU];
};

struct moq_quic_link {
	struct moq_quic_link_config cfg;
	struct moq_quic_endpoint *ep[2];
	uint64_t now;
	uint64_t rng;
	uint64_t seq;
	uint64_t busy_until[2]; /* serialisation (rate_bps) */
	struct link_pkt **heap;
	uint32_t heap_n, heap_cap;
	uint32_t inflight[2];
	struct link_pkt *free_list[64];
	uint32_t nfree;
	struct moq_quic_link_stats st[2];
	moq_quic_link_filter_fn filter;
	void *filter_arg;
	/* moq_quic_link_set_nat */
	int nat;
	struct moq_quic_addr nat_in, nat_out;
	uint8_t bufs[MOQ_QUIC_BURST][LINK_MTU];
};

static uint64_t rnd(struct moq_quic_link *l)
{
	/* splitmix64: deterministic from the seed */
	uint64_t z = (l->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int chance(struct moq_quic_link *l, uint32_t ppm)
{
	return ppm > 0 && rnd(l) % 1000000 < ppm;
}

static int pkt_less(const struct link_pkt *a, const struct link_pkt *b)
{
	return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void hswap(struct moq_quic_link *l, uint32_t a, uint32_t b)
{
	struct link_pkt *t = l->heap[a];

	l->heap[a] = l->heap[b];
	l->heap[b] = t;
}

static void hpush(struct moq_quic_link *l, struct link_pkt *p)
{
	uint32_t i = l->heap_n++;

	l->heap[i] = p;
	while (i > 0 && pkt_less(l->heap[i], l->heap[(i - 1) / 2])) {
		hswap(l, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static struct link_pkt *hpop(struct moq_quic_link *l)
{
	struct link_pkt *top = l->heap[0];
	uint32_t i = 0;

	l->heap[0] = l->heap[--l->heap_n];
	for (;;) {
		uint32_t a = 2 * i + 1, b = a + 1, m = i;

		if (a < l->heap_n && pkt_less(l->heap[a], l->heap[m]))
			m = a;
		if (b < l->heap_n && pkt_less(l->heap[b], l->heap[m]))
			m = b;
		if (m == i)
			break;
		hswap(l, i, m);
		i = m;
	}
	return top;
}

static struct link_pkt *pkt_get(struct moq_quic_link *l)
{
	if (l->nfree > 0)
		return l->free_list[--l->nfree];
	return malloc(sizeof(struct link_pkt));
}

static void pkt_put(struct moq_quic_link *l, struct link_pkt *p)
{
	if (l->nfree < 64)
		l->free_list[l->nfree++] = p;
	else
		free(p);
}

struct moq_quic_link *moq_quic_link_new(const struct moq_quic_link_config *cfg,
                                        struct moq_quic_endpoint *a, struct moq_quic_endpoint *b)
{
	struct moq_quic_link *l;

	if (a == NULL || b == NULL)
		return NULL;
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return NULL;
	if (cfg)
		l->cfg = *cfg;
	if (l->cfg.max_queue == 0)
		l->cfg.max_queue = LINK_DEF_QUEUE;
	if (l->cfg.seed == 0)
		l->cfg.seed = 1;
	if (l->cfg.start_ns == 0)
		l->cfg.start_ns = LINK_DEF_START;
	l->rng = l->cfg.seed;
	l->now = l->cfg.start_ns;
	l->ep[0] = a;
	l->ep[1] = b;
	l->heap_cap = 2 * l->cfg.max_queue;
	l->heap = calloc(l->heap_cap, sizeof(*l->heap));
	if (l->heap == NULL) {
		free(l);
		return NULL;
	}
	return l;
}

void moq_quic_link_free(struct moq_quic_link *l)
{
	if (l == NULL)
		return;
	while (l->heap_n > 0)
		free(hpop(l));
	while (l->nfree > 0)
		free(l->free_list[--l->nfree]);
	free(l->heap);
	free(l);
}

void moq_quic_link_set_filter(struct moq_quic_link *l, moq_quic_link_filter_fn fn, void *arg)
{
	l->filter = fn;
	l->filter_arg = arg;
}

void moq_quic_link_set_nat(struct moq_quic_link *l, const struct moq_quic_addr *inside,
                           const struct moq_quic_addr *outside)
{
	l->nat = inside != NULL && outside != NULL;
	if (l->nat) {
		l->nat_in = *inside;
		l->nat_out = *outside;
	}
}

uint64_t moq_quic_link_now(const struct moq_quic_link *l)
{
	return l->now;
}

static int enqueue(struct moq_quic_link *l, int dir, const uint8_t *data, size_t len,
                   const struct moq_quic_addr *from, const struct moq_quic_addr *to, int lossy)
{
	const struct moq_quic_link_dir_config *d = &l->cfg.dir[dir];
	struct link_pkt *p;
	uint64_t at;

	if (l->inflight[dir] >= l->cfg.max_queue) {
		l->st[dir].pkts_queue_full++;
		return MOQ_ERR_LIMIT;
	}
	if (lossy && chance(l, d->loss_ppm)) {
		l->st[dir].pkts_lost++;
		return 0;
	}
	p = pkt_get(l);
	if (p == NULL)
		return MOQ_ERR_NOMEM;
	memcpy(p->data, data, len);
	p->len = len;
	p->from = *from;
	p->to = *to;
	if (l->nat && dir == 0 && from->len == l->nat_in.len &&
	    memcmp(&from->u, &l->nat_in.u, from->len) == 0)
		p->from = l->nat_out;
	else if (l->nat && dir == 1 && to->len == l->nat_out.len &&
	         memcmp(&to->u, &l->nat_out.u, to->len) == 0)
		p->to = l->nat_in;
	p->dir = dir;
	at = l->now;
	if (d->rate_bps > 0) {
		uint64_t ser = (uint64_t)len * 8 * 1000000000ull / d->rate_bps;

		if (l->busy_until[dir] < at)
			l->busy_until[dir] = at;
		l->busy_until[dir] += ser;
		at = l->busy_until[dir];
	}
	at += d->delay_ns;
	if (lossy && chance(l, d->reorder_ppm)) {
		at += d->reorder_ns ? d->reorder_ns : 2 * d->delay_ns + LINK_REORDER_EXTRA;
		l->st[dir].pkts_reordered++;
	}
	p->at = at;
	p->seq = l->seq++;
	l->inflight[dir]++;
	hpush(l, p);
	return 0;
}

int moq_quic_link_inject(struct moq_quic_link *l, int dir, const uint8_t *data, size_t len,
                         const struct moq_quic_addr *from, const struct moq_quic_addr *to)
{
	if (l == NULL || (dir != 0 && dir != 1) || data == NULL || len == 0 || len > LINK_MTU ||
	    from == NULL || to == NULL)
		return MOQ_ERR_INVAL;
	return enqueue(l, dir, data, len, from, to, 0);
}

static inline uint64_t link_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#else
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

/* Endpoint b's calls, out of line and named, so a profiler can collect one
 * side of the link (bench_moq_fanout --scope relay toggles callgrind on
 * them: the relay is endpoint b there). */
__attribute__((noinline)) int moq_quic_link_b_send(struct moq_quic_endpoint *ep,
                                                   struct moq_quic_pkt *pk, size_t n, uint64_t now);
__attribute__((noinline)) int moq_quic_link_b_send(struct moq_quic_endpoint *ep,
                                                   struct moq_quic_pkt *pk, size_t n, uint64_t now)
{
	return moq_quic_endpoint_send(ep, pk, n, now);
}

__attribute__((noinline)) int moq_quic_link_b_recv(struct moq_quic_endpoint *ep,
                                                   const uint8_t *data, size_t len,
                                                   const struct moq_quic_addr *local,
                                                   const struct moq_quic_addr *remote,
                                                   uint64_t now);
__attribute__((noinline)) int moq_quic_link_b_recv(struct moq_quic_endpoint *ep,
                                                   const uint8_t *data, size_t len,
                                                   const struct moq_quic_addr *local,
                                                   const struct moq_quic_addr *remote, uint64_t now)
{
	return moq_quic_endpoint_recv(ep, data, len, local, remote, now);
}

__attribute__((noinline)) int moq_quic_link_b_timers(struct moq_quic_endpoint *ep, uint64_t now);
__attribute__((noinline)) int moq_quic_link_b_timers(struct moq_quic_endpoint *ep, uint64_t now)
{
	return moq_quic_endpoint_timers(ep, now);
}

/* Pull everything endpoint @dir wants to send now onto the link. */
static int pump(struct moq_quic_link *l, int dir)
{
	struct moq_quic_pkt pk[MOQ_QUIC_BURST];
	int total = 0;

	for (;;) {
		int n, i;

		for (i = 0; i < MOQ_QUIC_BURST; i++) {
			pk[i].data = l->bufs[i];
			pk[i].cap = LINK_MTU;
			pk[i].user = NULL;
		}
		if (dir) {
			uint64_t t0 = link_tsc();

			n = moq_quic_link_b_send(l->ep[dir], pk, MOQ_QUIC_BURST, l->now);
			l->st[1].b_send_cycles += link_tsc() - t0;
		} else {
			n = moq_quic_endpoint_send(l->ep[dir], pk, MOQ_QUIC_BURST, l->now);
		}
		if (n <= 0)
			break;
		for (i = 0; i < n; i++) {
			size_t len = pk[i].len;

			l->st[dir].pkts_sent++;
			l->st[dir].bytes_sent += len;
			if (l->filter &&
			    l->filter(l->filter_arg, dir, pk[i].data, &len, l->now) != 0) {
				l->st[dir].pkts_lost++;
				continue;
			}
			if (len == 0 || len > LINK_MTU)
				continue;
			enqueue(l, dir, pk[i].data, len, &pk[i].local, &pk[i].remote, 1);
		}
		total += n;
		if (n < MOQ_QUIC_BURST)
			break;
	}
	return total;
}

/* One step; the clock never jumps past @limit (returns -1 when it would). */
static int step_limit(struct moq_quic_link *l, uint64_t limit)
{
	int acts = 0, i;
	uint64_t next = UINT64_MAX;

	/* deliver what is due, in bursts as a NIC's RX queue gives them: the
	 * receiving endpoints prefetch a burst's state first
	 * (moq_quic_endpoint_prefetch) */
	while (l->heap_n > 0 && l->heap[0]->at <= l->now) {
		struct link_pkt *due[MOQ_QUIC_BURST];
		const void *hint[MOQ_QUIC_BURST] = {0};
		int nd = 0, k, st;
		uint64_t t0;

		while (nd < MOQ_QUIC_BURST && l->heap_n > 0 && l->heap[0]->at <= l->now)
			due[nd++] = hpop(l);
		t0 = link_tsc(); /* counted as b's (a's share included) */
		for (st = 0; st < MOQ_QUIC_PREFETCH_STAGES; st++)
			for (k = 0; k < nd; k++)
				moq_quic_endpoint_prefetch(l->ep[due[k]->dir ^ 1], due[k]->data,
				                           due[k]->len, st, &hint[k]);
		l->st[1].b_recv_cycles += link_tsc() - t0;
		for (k = 0; k < nd; k++) {
			struct link_pkt *p = due[k];
			int to = p->dir ^ 1;

			l->inflight[p->dir]--;
			l->st[p->dir].pkts_delivered++;
			l->st[p->dir].bytes_delivered += p->len;
			/* the receiver's local address is the sender's remote */
			if (to) {
				t0 = link_tsc();
				(void)moq_quic_link_b_recv(l->ep[to], p->data, p->len, &p->to,
				                           &p->from, l->now);
				l->st[1].b_recv_cycles += link_tsc() - t0;
			} else {
				(void)moq_quic_endpoint_recv(l->ep[to], p->data, p->len, &p->to,
				                             &p->from, l->now);
			}
			pkt_put(l, p);
			acts++;
		}
	}
	for (i = 0; i < 2; i++) {
		if (moq_quic_endpoint_next_expiry(l->ep[i]) > l->now)
			continue;
		if (i) {
			uint64_t t0 = link_tsc();

			acts += moq_quic_link_b_timers(l->ep[i], l->now);
			l->st[1].b_timer_cycles += link_tsc() - t0;
		} else {
			acts += moq_quic_endpoint_timers(l->ep[i], l->now);
		}
	}
	for (i = 0; i < 2; i++)
		acts += pump(l, i);
	if (acts > 0)
		return acts;
	/* idle now: jump to the next event */
	if (l->heap_n > 0)
		next = l->heap[0]->at;
	for (i = 0; i < 2; i++) {
		uint64_t e = moq_quic_endpoint_next_expiry(l->ep[i]);

		if (e < next)
			next = e;
	}
	if (next == UINT64_MAX)
		return 0;
	if (next > limit) {
		if (limit > l->now)
			l->now = limit;
		return -1;
	}
	if (next > l->now)
		l->now = next;
	return 1;
}

int moq_quic_link_step(struct moq_quic_link *l)
{
	int rv = step_limit(l, UINT64_MAX);

	return rv < 0 ? 1 : rv;
}

int moq_quic_link_run(struct moq_quic_link *l, int (*done)(void *arg), void *arg, uint64_t max_ns)
{
	uint64_t end = l->now + max_ns;

	for (;;) {
		int rv;

		if (done && done(arg))
			return 0;
		rv = step_limit(l, end);
		if (rv < 0)
			return done && done(arg) ? 0 : MOQ_ERR_AGAIN;
		if (rv == 0)
			return done ? MOQ_ERR_STATE : 0;
	}
}

int moq_quic_link_set_endpoint(struct moq_quic_link *l, int idx, struct moq_quic_endpoint *ep)
{
	if (l == NULL || ep == NULL || (idx != 0 && idx != 1))
		return MOQ_ERR_INVAL;
	l->ep[idx] = ep;
	return 0;
}

void moq_quic_link_get_stats(const struct moq_quic_link *l, int dir,
                             struct moq_quic_link_stats *out)
{
	if (l && out && (dir == 0 || dir == 1))
		*out = l->st[dir];
}
