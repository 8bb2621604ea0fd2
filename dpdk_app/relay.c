/* SPDX-License-Identifier: MIT */
/*
 * relay.c: ports, workers and the worker iteration of moqdp-relay.
 *
 * A worker owns: its RX queues (l3fwd-style --queues), TX queue `id` on every
 * port, one moq_net per port, one QUIC endpoint (worker id = its index, which
 * the endpoint encodes in every CID it chooses) and a multi-producer /
 * single-consumer rte_ring through which other workers hand it datagrams of
 * its connections (DESIGN.md, rule 2).
 */
#include "relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>

#include "auth.h"
#include "authurl.h"
#include "cluster.h"
#include "fastpath.h"
#include "ietf_codec.h"
#include "moq_err.h"
#include "pmd_port.h"
#include "quic.h"
#include "relay_int.h"

static int rfail(char *err, size_t errlen, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static int rfail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return MOQ_ERR_CONFIG;
}

uint64_t moq_relay_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ns since the relay's start at TSC @tsc */
static inline uint64_t tsc_ns(const struct moq_relay *r, uint64_t tsc)
{
	return (uint64_t)(((unsigned __int128)(tsc - r->tsc0) * r->tsc_mult) >> 32);
}

uint64_t moq_relay_clock_ns(const struct moq_relay *r)
{
	return tsc_ns(r, rte_rdtsc());
}

/* The cache's arrival clock (cache.h): the same as the workers' commits. */
static uint64_t cache_clock(void *ctx)
{
	return moq_relay_clock_ns(ctx);
}

/* Relay-added latency (moq.h): the deliveries this iteration handed to QUIC
 * and sent (after the TX burst) are measured now. */
static inline void lat_commit(struct moq_relay *r, struct relay_worker *w)
{
	if (w->node != NULL && moq_node_latency_pending(w->node) != 0)
		moq_node_latency_commit(w->node, moq_relay_clock_ns(r));
}

/* addresses ------------------------------------------------------------- */

void moq_relay_addr_from(struct moq_quic_addr *a, int family, const uint8_t *ip, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	if (family == 4) {
		a->u.in4.sin_family = AF_INET;
		a->u.in4.sin_port = htons(port);
		memcpy(&a->u.in4.sin_addr, ip, 4);
		a->len = sizeof(a->u.in4);
	} else {
		a->u.in6.sin6_family = AF_INET6;
		a->u.in6.sin6_port = htons(port);
		memcpy(&a->u.in6.sin6_addr, ip, 16);
		a->len = sizeof(a->u.in6);
	}
}

/* The family, address bytes and port of @a; returns 4, 6 or 0. */
static int addr_parts(const struct moq_quic_addr *a, const uint8_t **ip, uint16_t *port)
{
	if (a->u.sa.sa_family == AF_INET) {
		*ip = (const uint8_t *)&a->u.in4.sin_addr;
		*port = ntohs(a->u.in4.sin_port);
		return 4;
	}
	if (a->u.sa.sa_family == AF_INET6) {
		*ip = (const uint8_t *)&a->u.in6.sin6_addr;
		*port = ntohs(a->u.in6.sin6_port);
		return 6;
	}
	return 0;
}

/* The relay port whose interface has local address @ip. */
static unsigned int port_for(const struct moq_relay *r, int family, const uint8_t *ip)
{
	for (unsigned int i = 0; i < r->nb_ports; i++) {
		const struct moq_net_iface *f = &r->ports[i].ifc;

		if (family == 4 && f->has_ip4 && memcmp(f->ip4, ip, 4) == 0)
			return i;
		if (family == 6 &&
		    ((f->has_ip6 && memcmp(f->ip6, ip, 16) == 0) || memcmp(f->ip6_ll, ip, 16) == 0))
			return i;
	}
	return 0;
}

static void drain_step(struct moq_relay *r, struct relay_worker *w);
static void announce_pending(struct moq_relay *r, struct relay_worker *w);

/* TX -------------------------------------------------------------------- */

/* Hand the queued frames to the port. What the ring does not take stays
 * queued for the next iteration, and the worker makes no new QUIC packets
 * while any is left (dpdk_poll): dropping them cost a loss, a retransmission
 * and a congestion-window cut on the connection, all work the relay had
 * already paid for (a memif peer or a NIC slower than the relay's burst). */
static void tx_flush(struct moq_relay *r, struct relay_worker *w, unsigned int pi)
{
	uint16_t n = w->nb_tx[pi], sent;

	if (n == 0)
		return;
	/* a full ring is asked again only after ~2 us: polling its indexes
	 * as fast as the loop runs took the cache lines from the peer that
	 * empties it (a memif load generator received a third less) */
	if (w->tx_retry_tsc != 0 && n < MOQ_RELAY_TXBUF && w->poll_tsc < w->tx_retry_tsc)
		return;
	w->tx_retry_tsc = 0;
	sent = rte_eth_tx_burst(r->ports[pi].port_id, (uint16_t)w->id, w->tx[pi], n);
	for (uint16_t i = 0; i < sent; i++) {
		w->st.tx_pkts++;
		w->st.tx_bytes += rte_pktmbuf_pkt_len(w->tx[pi][i]);
	}
	if (sent < n) {
		w->st.tx_ring_full++;
		w->tx_retry_tsc = w->poll_tsc + rte_get_tsc_hz() / 500000;
		memmove(&w->tx[pi][0], &w->tx[pi][sent], (size_t)(n - sent) * sizeof(w->tx[pi][0]));
	}
	w->nb_tx[pi] = (uint16_t)(n - sent);
}

static void tx_add(struct moq_relay *r, struct relay_worker *w, unsigned int pi, struct rte_mbuf *m)
{
	if (w->nb_tx[pi] == MOQ_RELAY_TXBUF)
		tx_flush(r, w, pi);
	if (w->nb_tx[pi] == MOQ_RELAY_TXBUF) { /* the ring still takes nothing */
		rte_pktmbuf_free(m);
		w->st.tx_drops++;
		return;
	}
	w->tx[pi][w->nb_tx[pi]++] = m;
}

void moq_relay_tx_add(struct moq_relay *r, struct relay_worker *w, unsigned int pi,
                      struct rte_mbuf *m)
{
	tx_add(r, w, pi, m);
}

/* Frames left from an earlier flush on any port (the ring was full). */
static int tx_backlog(struct moq_relay *r, struct relay_worker *w)
{
	for (unsigned int pi = 0; pi < r->nb_ports; pi++) {
		if (w->nb_tx[pi] > 0)
			tx_flush(r, w, pi);
		if (w->nb_tx[pi] > 0)
			return 1;
	}
	return 0;
}

/* Up to @n mbufs from @pool into @mb; returns how many. A burst at once;
 * near exhaustion, where rte_pktmbuf_alloc_bulk is all or nothing, halving
 * bulks down to single mbufs (at most ~2 log2(n) tries, and only then). */
static unsigned int mbufs_upto(struct rte_mempool *pool, struct rte_mbuf **mb, unsigned int n)
{
	unsigned int got = 0, b = n / 2;

	if (rte_pktmbuf_alloc_bulk(pool, mb, n) == 0)
		return n;
	while (b > 0 && got < n) {
		if (got + b <= n && rte_pktmbuf_alloc_bulk(pool, mb + got, b) == 0)
			got += b;
		else
			b /= 2;
	}
	return got;
}

/* Fill a burst of @ep's QUIC packets into fresh mbufs, wrap and queue them
 * (@ep: the worker's, or worker 0's cluster links'). */
static int dpdk_send(struct moq_relay *r, struct relay_worker *w, struct moq_quic_endpoint *ep,
                     uint64_t now)
{
	struct rte_mbuf *mb[MOQ_PMD_BURST];
	struct moq_quic_pkt pk[MOQ_PMD_BURST];
	unsigned int nb = mbufs_upto(w->pool, mb, MOQ_PMD_BURST);
	int k;

	if (nb == 0) {
		w->st.tx_nombuf++;
		return 0;
	}
	for (unsigned int i = 0; i < nb; i++) {
		pk[i].data = rte_pktmbuf_mtod(mb[i], uint8_t *);
		pk[i].cap = rte_pktmbuf_tailroom(mb[i]);
		pk[i].user = mb[i];
	}
	k = moq_quic_endpoint_send(ep, pk, nb, now);
	if (k < 0)
		k = 0;
	for (int i = 0; i < k; i++) {
		struct rte_mbuf *m = mb[i], *sol = NULL;
		const uint8_t *lip, *rip;
		uint16_t lport, rport;
		int fam = addr_parts(&pk[i].local, &lip, &lport);
		unsigned int pi;

		if (fam == 0 || addr_parts(&pk[i].remote, &rip, &rport) != fam ||
		    rte_pktmbuf_append(m, (uint16_t)pk[i].len) == NULL) {
			rte_pktmbuf_free(m);
			w->st.tx_drops++;
			continue;
		}
		pi = port_for(r, fam, lip);
		if (moq_net_udp_encap_mbuf(w->net[pi], m, fam, rip, lport, rport, pk[i].ecn, now,
		                           w->pool, &sol) == 0) {
			tx_add(r, w, pi, m);
		} else {
			rte_pktmbuf_free(m); /* next hop unresolved: QUIC retransmits */
			w->st.tx_unresolved++;
		}
		if (sol != NULL)
			tx_add(r, w, pi, sol);
	}
	if ((unsigned int)k < nb)
		rte_pktmbuf_free_bulk(&mb[k], nb - (unsigned int)k);
	return k;
}

/* RX -------------------------------------------------------------------- */

/* Hand a datagram to the endpoint; on another worker's CID forward @m (which
 * then belongs to that worker). A new connection (client-chosen DCID, RFC
 * 9000 7.2) is accepted by the worker RSS delivered it to: the hub (moq.h)
 * lets its subscribers reach broadcasts published on any worker. Returns 1
 * when @m was forwarded. */
static int deliver(struct moq_relay *r, struct relay_worker *w, const struct moq_net_udp *u,
                   struct rte_mbuf *m, uint64_t now, int may_redirect)
{
	struct moq_quic_addr local, remote;
	int rc, t;

	moq_relay_addr_from(&local, u->family, u->dst, u->dport);
	moq_relay_addr_from(&remote, u->family, u->src, u->sport);
	rc = moq_quic_endpoint_recv(w->ep, u->payload, u->len, &local, &remote, now);
	if (rc != MOQ_ERR_NOTFOUND)
		return 0;
	t = moq_quic_pkt_worker(u->payload, u->len);
	if (!may_redirect || t < 0 || (unsigned int)t >= r->nb_workers ||
	    (unsigned int)t == w->id) {
		w->st.redirect_drops++;
		return 0;
	}
	if (rte_ring_mp_enqueue(r->w[t]->ring, m) != 0) {
		w->st.redirect_drops++;
		return 0;
	}
	w->st.redirected++;
	return 1;
}

/* A datagram to a cluster link's local port (cluster.h): worker 0's; from
 * another worker's RX queue @m goes over worker 0's ring. Returns 1 when @m
 * was forwarded. */
static int cluster_take(struct moq_relay *r, struct relay_worker *w, const struct moq_net_udp *u,
                        struct rte_mbuf *m, uint64_t now, int may_redirect)
{
	struct moq_quic_addr local, remote;

	if (w->id == 0) {
		moq_relay_addr_from(&local, u->family, u->dst, u->dport);
		moq_relay_addr_from(&remote, u->family, u->src, u->sport);
		moq_cluster_input(r->cluster, u->payload, u->len, &local, &remote, now);
		return 0;
	}
	if (!may_redirect || rte_ring_mp_enqueue(r->w[0]->ring, m) != 0) {
		w->st.redirect_drops++;
		return 0;
	}
	w->st.redirected++;
	return 1;
}

/* A frame's first half: the network layer (ARP, ICMP, ... answered here);
 * MOQ_NET_UDP fills @u (pointing into @m). */
static enum moq_net_verdict frame_parse(struct moq_relay *r, struct relay_worker *w,
                                        unsigned int pi, struct rte_mbuf *m, uint64_t now,
                                        struct moq_net_udp *u)
{
	struct rte_mbuf *reply = NULL;
	enum moq_net_verdict v;

	w->st.rx_pkts++;
	w->st.rx_bytes += rte_pktmbuf_pkt_len(m);
	v = moq_net_rx_mbuf(w->net[pi], m, now, u, w->pool, &reply);
	if (v == MOQ_NET_REPLY && reply != NULL)
		tx_add(r, w, pi, reply);
	return v;
}

/* Its second half: the datagram to its endpoint (or cluster link, or the
 * kernel's TCP). */
static void frame_take(struct moq_relay *r, struct relay_worker *w, struct rte_mbuf *m,
                       enum moq_net_verdict v, const struct moq_net_udp *u, uint64_t now,
                       int may_redirect)
{
	if (v == MOQ_NET_UDP) {
		if (unlikely(r->cluster_ports != 0) &&
		    moq_cluster_port(r->cluster_port_lo, r->cluster_ports, u->dport)) {
			if (cluster_take(r, w, u, m, now, may_redirect))
				return; /* now worker 0's */
		} else if (deliver(r, w, u, m, now, may_redirect))
			return; /* now the owner's */
	} else if (unlikely(r->exc_port >= 0) && moq_relay_exc_take(r, w, m, (int)v)) {
		return; /* --tcp: the kernel's (exc.c) */
	}
	rte_pktmbuf_free(m);
}

static void handle_frame(struct moq_relay *r, struct relay_worker *w, unsigned int pi,
                         struct rte_mbuf *m, uint64_t now, int may_redirect)
{
	struct moq_net_udp u;
	enum moq_net_verdict v = frame_parse(r, w, pi, m, now, &u);

	frame_take(r, w, m, v, &u, now, may_redirect);
}

/* Frames [0, n) of a burst, parsed: the endpoint prefetches what their
 * datagrams will read, stage by stage over them (quic.h,
 * moq_quic_endpoint_prefetch: the connections' misses overlap instead of
 * following one another), then each is taken. */
static void rx_take(struct moq_relay *r, struct relay_worker *w, struct rte_mbuf **mb,
                    const enum moq_net_verdict *v, const struct moq_net_udp *u, unsigned int n,
                    uint64_t now)
{
	const void *hint[MOQ_PMD_BURST];

	if (w->ep != NULL && n > 1) {
		/* (not an initialiser: the idle loop's empty bursts would
		 * zero all 32 with a rep stos each) */
		for (unsigned int i = 0; i < n; i++)
			hint[i] = NULL;
		for (int st = 0; st < MOQ_QUIC_PREFETCH_STAGES; st++)
			for (unsigned int i = 0; i < n; i++)
				if (v[i] == MOQ_NET_UDP)
					moq_quic_endpoint_prefetch(w->ep, u[i].payload, u[i].len,
					                           st, &hint[i]);
	}
	for (unsigned int i = 0; i < n; i++)
		frame_take(r, w, mb[i], v[i], &u[i], now, 1);
}

/* An RX burst: parsed, then taken (rx_take). A multi-segment frame is
 * linearised into the network context's one scratch buffer (net.h): it and
 * the frames before it are taken before the next is parsed. */
static void rx_burst(struct moq_relay *r, struct relay_worker *w, unsigned int pi,
                     struct rte_mbuf **mb, unsigned int n, uint64_t now)
{
	struct moq_net_udp u[MOQ_PMD_BURST];
	enum moq_net_verdict v[MOQ_PMD_BURST];
	unsigned int from = 0;

	for (unsigned int i = 0; i < n; i++) {
		v[i - from] = frame_parse(r, w, pi, mb[i], now, &u[i - from]);
		if (mb[i]->nb_segs > 1) {
			rx_take(r, w, mb + from, v, u, i + 1 - from, now);
			from = i + 1;
		}
	}
	rx_take(r, w, mb + from, v, u, n - from, now);
}

static int dpdk_poll(struct moq_relay *r, struct relay_worker *w, uint64_t now)
{
	struct rte_mbuf *mb[MOQ_PMD_BURST];
	int work = 0;
	unsigned int n;

	for (unsigned int q = 0; q < w->nb_rxq; q++) {
		unsigned int pi = w->rxq[q].pi;

		n = rte_eth_rx_burst(r->ports[pi].port_id, w->rxq[q].queue, mb, MOQ_PMD_BURST);
		rx_burst(r, w, pi, mb, n, now);
		work += (int)n;
	}
	n = rte_ring_sc_dequeue_burst(w->ring, (void **)mb, MOQ_PMD_BURST, NULL);
	for (unsigned int i = 0; i < n; i++) {
		uint16_t pid = mb[i]->port;
		unsigned int pi = pid < RTE_MAX_ETHPORTS ? r->port_index[pid] : 0;

		w->st.redirected_in++;
		handle_frame(r, w, pi, mb[i], now, 0);
	}
	work += (int)n;
	if (w->ep != NULL) {
		if (now >= w->next_expiry)
			work += moq_quic_endpoint_timers(w->ep, now);
		/* fanout: pending subscriber data, expiry resets (moq.h) */
		work += moq_node_poll(w->node, now);
		moq_wt_timers(now); /* CONNECTs held for SETTINGS (h3.h) */
		/* a few bursts per iteration, then poll RX again; none while
		 * the TX ring has not taken the last ones */
		for (int b = 0; b < 4 && moq_quic_endpoint_pending(w->ep) && !tx_backlog(r, w);
		     b++) {
			int k = dpdk_send(r, w, w->ep, now);

			work += k;
			if (k < MOQ_PMD_BURST)
				break;
		}
		w->next_expiry = moq_quic_endpoint_next_expiry(w->ep);
	}
	if (r->exc_port >= 0)
		work += moq_relay_exc_poll(r, w, now);
	if (w->id == 0)
		announce_pending(r, w);
	for (unsigned int pi = 0; pi < r->nb_ports; pi++)
		tx_flush(r, w, pi);
	lat_commit(r, w);
	return work;
}

/* The DPDK backend (io.h): its state is the worker's own (ports, TX
 * buffers, network contexts), set up by moq_relay_create. */
static int dpdk_io_poll(struct relay_io *io, uint64_t now)
{
	return dpdk_poll(io->relay, container_of(io, struct relay_worker, io), now);
}

/* --tcp: each worker's TCP listener on the exception port's address */
static int dpdk_io_open(struct relay_io *io, const struct moq_pmd_config *cfg, char *err,
                        size_t errlen)
{
	struct relay_worker *w = container_of(io, struct relay_worker, io);

	if (io->relay->exc_port < 0)
		return 0;
	io->web = &w->web;
	return moq_relay_web_open(io, &w->web, cfg, err, errlen);
}

static void dpdk_io_close(struct relay_io *io)
{
	io->web = NULL;
	moq_relay_web_close(&container_of(io, struct relay_worker, io)->web);
}

static const struct relay_io_ops dpdk_ops = {
        .name = "dpdk",
        .open = dpdk_io_open,
        .poll = dpdk_io_poll,
        .close = dpdk_io_close,
};

/* published figures ------------------------------------------------------ */

#define SNAP_WORDS (sizeof(struct relay_snap) / sizeof(uint64_t))
_Static_assert(sizeof(struct relay_snap) % sizeof(uint64_t) == 0,
               "struct relay_snap is uint64_t words only");

/* The worker: publish @src as its figures (a seqlock, Boehm's "Can seqlocks
 * get along with programming language memory models?", 2012: the count odd
 * while writing, the words relaxed atomics between release fences). */
static void snap_publish(struct relay_worker *w, const struct relay_snap *src)
{
	const uint64_t *s = (const uint64_t *)(const void *)src;
	uint64_t *d = (uint64_t *)(void *)&w->snap;
	uint32_t seq = __atomic_load_n(&w->snap_seq, __ATOMIC_RELAXED);

	__atomic_store_n(&w->snap_seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (size_t i = 0; i < SNAP_WORDS; i++)
		__atomic_store_n(&d[i], s[i], __ATOMIC_RELAXED);
	__atomic_store_n(&w->snap_seq, seq + 2, __ATOMIC_RELEASE);
}

/* Any thread: worker @w's last published figures into @out. */
static void snap_read(const struct relay_worker *w, struct relay_snap *out)
{
	const uint64_t *s = (const uint64_t *)(const void *)&w->snap;
	uint64_t *d = (uint64_t *)(void *)out;
	uint32_t a, b;

	do {
		while ((a = __atomic_load_n(&w->snap_seq, __ATOMIC_ACQUIRE)) & 1)
			rte_pause();
		for (size_t i = 0; i < SNAP_WORDS; i++)
			d[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		b = __atomic_load_n(&w->snap_seq, __ATOMIC_RELAXED);
	} while (a != b);
}

/* The worker: gather and publish its figures. */
static void publish_stats(struct moq_relay *r, struct relay_worker *w)
{
	struct relay_snap sn;

	memset(&sn, 0, sizeof(sn));
	sn.st = w->st;
	if (w->ep != NULL)
		moq_quic_endpoint_stats(w->ep, &sn.qs);
	if (w->node != NULL) {
		moq_node_stats(w->node, &sn.ns);
		moq_node_latency_hist(w->node, &sn.lat);
	}
	sn.wt = w->wt_stats;
	for (unsigned int pi = 0; pi < r->nb_ports; pi++) {
		const struct moq_net_stats *ns = &w->net[pi]->stats;

		sn.rx_udp += ns->rx_udp;
		sn.rx_l4_partial += ns->rx_l4_partial;
		for (int d = 0; d < MOQ_NET_DROP_MAX; d++)
			sn.net_drop[d] += ns->drop[d];
	}
	snap_publish(w, &sn);
}

/* SIGHUP, on the worker: its endpoint takes the context the main lcore
 * built (quic.h, moq_quic_endpoint_set_tls: a reference, no file read, no
 * parse) for new connections; existing connections keep theirs. Then the
 * worker says it has moved on (the main lcore frees @t's handle once every
 * worker has). */
static void tls_take(struct relay_worker *w, const struct relay_tls *t)
{
	moq_quic_endpoint_set_tls(w->ep, t->tls);
	w->io.tls = t->tls; /* the kernel backend's TCP listener follows */
	__atomic_store_n(&w->tls_gen, t->gen, __ATOMIC_RELEASE);
}

static void tls_drop(struct relay_tls *t)
{
	moq_quic_tls_free(t->tls); /* endpoints and connections keep theirs */
	free(t);
}

/* Admission (--admit-busy; issue 13, "no collapse past capacity"): every
 * ADMIT_WINDOW_NS the worker takes its busy share of the window just ended
 * (busy_tsc: iterations that did work, on either backend: the kernel
 * backend's sendmmsg / recvmmsg time counts as its busy time) and tells its
 * node how many new subscriptions it may accept in the next one
 * (moq_node_admit): none at or above the threshold; below it, the
 * subscriptions the remaining headroom carries at the window's cost per
 * subscription (busy / subscriptions: the fixed costs counted in make it
 * an overestimate, so the estimate errs on the side of refusing), at least
 * one; without ADMIT_LEARN subscriptions to estimate from, no limit but the
 * threshold. Below ADMIT_FLOOR subscriptions a worker admits up to the
 * floor even when busy: it has no estimate of what one costs yet, and a
 * worker that cannot carry a few viewers is misconfigured, not full.
 * Admitted sessions are never refused (moq.h). */
#define ADMIT_WINDOW_NS 100000000ull /* 100 ms: ~3 video frames, 5 audio groups */
#define ADMIT_LEARN     64u          /* subscriptions before the cost is estimated */
#define ADMIT_FLOOR     8u           /* subscriptions always admitted: 4 video + audio */

static void admit_window(struct moq_relay *r, struct relay_worker *w, uint64_t tsc)
{
	uint64_t span = tsc - w->admit_tsc0, busy = w->st.busy_tsc - w->admit_busy0;
	uint64_t thr = (uint64_t)r->cfg.admit_busy * 10, b, subs;
	struct moq_node_stats ns;
	int64_t credit;

	w->admit_tsc0 = tsc;
	w->admit_busy0 = w->st.busy_tsc;
	b = span ? busy * 1000 / span : 0;
	if (b > 1000)
		b = 1000;
	moq_node_stats(w->node, &ns);
	subs = ns.subscribers;
	if (b >= thr) {
		credit = subs < ADMIT_FLOOR ? (int64_t)(ADMIT_FLOOR - subs) : 0;
		if (credit == 0)
			w->st.admit_closed_windows++;
	} else if (subs < ADMIT_LEARN || b == 0) {
		credit = MOQ_ADMIT_OPEN;
	} else {
		credit = (int64_t)((thr - b) * subs / b);
		if (credit < 1)
			credit = 1;
	}
	w->st.admit_busy_permille = b;
	w->st.admit_credit = credit;
	moq_node_admit(w->node, credit);
}

int moq_relay_poll(struct moq_relay *r, unsigned int wi)
{
	struct relay_worker *w;
	uint64_t t0, t1, now;
	int work;

	if (wi >= r->nb_workers)
		return MOQ_ERR_INVAL;
	w = r->w[wi];
	t0 = rte_rdtsc();
	w->poll_tsc = t0;
	/* CLOCK_MONOTONIC from the TSC read the busy accounting takes anyway:
	 * the vDSO's clock_gettime was ~9% of an idle-heavy worker's samples
	 * under perf (kvm-clock), one call per iteration */
	now = r->t0_ns + tsc_ns(r, t0);
	work = r->io_ops->poll(&w->io, now);
	if (wi == 0 && r->cluster != NULL) /* links to peer relays (cluster.h) */
		work += moq_cluster_poll(r->cluster, now);
	if (__atomic_load_n(&r->drain, __ATOMIC_RELAXED) && w->conns != NULL)
		drain_step(r, w);
	if (w->ep != NULL) {
		const struct relay_tls *t = __atomic_load_n(&r->tls, __ATOMIC_ACQUIRE);

		if (t->gen != w->tls_gen)
			tls_take(w, t);
	}
	if (w->ep != NULL && now - w->stats_ns >= 100000000ull) { /* 10 Hz, for the others */
		publish_stats(r, w);
		w->stats_ns = now;
	}
	t1 = rte_rdtsc();
	if (work > 0) {
		w->st.busy_tsc += t1 - t0;
		w->st.busy_polls++;
	} else {
		w->st.idle_tsc += t1 - t0;
		w->st.idle_polls++;
	}
	if (r->cfg.admit_busy != 0 && w->node != NULL && t1 - w->admit_tsc0 >= r->admit_window_tsc)
		admit_window(r, w, t1);
	return work;
}

/* set-up ---------------------------------------------------------------- */

/* connections, for the drain ---------------------------------------------
 * moq/'s QUIC callbacks with conn_new / conn_closed wrapped: the worker keeps
 * the set of its open connections so SIGQUIT can send each session a GOAWAY
 * and close what is left at the end of the grace period. Touched only at
 * connection open / close, on the worker's thread. */

#define CONN_GONE ((struct moq_quic_conn *)(uintptr_t)1)

/* rte_telemetry-like: callbacks carry no relay pointer; one relay a process. */
static struct moq_relay *cb_relay;

static struct relay_worker *worker_of(struct moq_quic_conn *c)
{
	unsigned int id = moq_quic_endpoint_worker(moq_quic_conn_endpoint(c));

	return cb_relay != NULL && id < cb_relay->nb_workers ? cb_relay->w[id] : NULL;
}

static uint32_t conn_slot(const struct relay_worker *w, const struct moq_quic_conn *c)
{
	uint64_t h = (uint64_t)(uintptr_t)c * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 32) & (w->conn_cap - 1);
}

static void conn_track(struct relay_worker *w, struct moq_quic_conn *c)
{
	for (uint32_t i = conn_slot(w, c), n = 0; n < w->conn_cap;
	     i = (i + 1) & (w->conn_cap - 1), n++)
		if (w->conns[i] == NULL || w->conns[i] == CONN_GONE) {
			w->conns[i] = c;
			return;
		}
	w->st.conn_set_full++;
}

static void conn_untrack(struct relay_worker *w, struct moq_quic_conn *c)
{
	for (uint32_t i = conn_slot(w, c), n = 0; n < w->conn_cap && w->conns[i] != NULL;
	     i = (i + 1) & (w->conn_cap - 1), n++)
		if (w->conns[i] == c) {
			w->conns[i] = CONN_GONE;
			return;
		}
}

/* A new connection has no session until its handshake says which ALPN:
 * a moq-lite one gets moq/'s session (the endpoint's callbacks, direct);
 * "h3" is handed to the WebTransport layer (h3.h), which takes the
 * connection's callbacks over and starts the session at the CONNECT. */
static void wrap_conn_new(struct moq_quic_conn *c, void *user)
{
	struct relay_worker *w = worker_of(c);

	(void)user;
	moq_quic_conn_set_user(c, NULL);
	if (w != NULL && w->conns != NULL)
		conn_track(w, c);
}

static void wrap_wt_closed(struct moq_quic_conn *c, void *user,
                           const struct moq_quic_close_info *info)
{
	struct relay_worker *w = worker_of(c);

	if (w != NULL && w->conns != NULL)
		conn_untrack(w, c);
	moq_wt_quic_callbacks()->conn_closed(c, user, info);
}

/* h3.h's callbacks with conn_closed wrapped: the drain's set forgets it */
static const struct moq_quic_callbacks *relay_wt_callbacks(void)
{
	static struct moq_quic_callbacks cbs;

	if (cbs.conn_closed == NULL) {
		cbs = *moq_wt_quic_callbacks();
		cbs.conn_closed = wrap_wt_closed;
	}
	return &cbs;
}

static int wrap_established(struct moq_quic_conn *c, void *user, const char *alpn)
{
	struct relay_worker *w = worker_of(c);
	const struct moq_quic_callbacks *mc = moq_node_quic_callbacks();

	(void)user;
	if (w == NULL || w->node == NULL)
		return 0;
	if (alpn != NULL && strcmp(alpn, MOQ_H3_ALPN) == 0) {
		/* --allowed-origins: the relay's copy outlives its connections */
		struct moq_wt_cfg wc = {.allowed_origins = w->relay->cfg.allowed_origins};

		moq_wt_accept(c, w->node, &w->wt_stats, relay_wt_callbacks(), &wc);
		return 0;
	}
	mc->conn_new(c, w->node);
	return mc->established(c, moq_quic_conn_user(c), alpn);
}

static void wrap_conn_closed(struct moq_quic_conn *c, void *user,
                             const struct moq_quic_close_info *info)
{
	struct relay_worker *w = worker_of(c);

	if (w != NULL && w->conns != NULL)
		conn_untrack(w, c);
	moq_node_quic_callbacks()->conn_closed(c, user, info);
}

static const struct moq_quic_callbacks *relay_callbacks(void)
{
	static struct moq_quic_callbacks cbs;

	if (cbs.conn_new == NULL) {
		cbs = *moq_node_quic_callbacks();
		cbs.conn_new = wrap_conn_new;
		cbs.established = wrap_established;
		cbs.conn_closed = wrap_conn_closed;
		(void)relay_wt_callbacks(); /* built here, before the workers run */
	}
	return &cbs;
}

/* SIGQUIT on this worker: GOAWAY to every session of its node now
 * (moq-lite 04+: raw QUIC, WebTransport and WebSocket sessions, and on
 * worker 0 the cluster links' sessions), /health on the TCP side turns 503.
 * When the main lcore says so (drain_close: 3/4 of the grace period by its
 * clock, the one that also ends the drain) the connections still open are
 * closed, QUIC and WebSocket. Worker 0 closes the cluster links
 * (moq_cluster_drain: no more dials) once the main lcore sees no client
 * connection left (drain_links) or at that 3/4, and says so (links_done)
 * after the poll that sent their CONNECTION_CLOSEs. */
static void drain_step(struct moq_relay *r, struct relay_worker *w)
{
	if (!w->draining) {
		w->draining = 1;
		if (w->node != NULL)
			w->st.goaways += (uint64_t)moq_node_goaway(w->node, "", 0);
		if (w->io.web != NULL)
			moq_relay_web_drain(w->io.web, 0);
		return;
	}
	if (!w->drain_closed && __atomic_load_n(&r->drain_close, __ATOMIC_ACQUIRE)) {
		w->drain_closed = 1;
		for (uint32_t i = 0; i < w->conn_cap; i++) {
			struct moq_quic_conn *c = w->conns[i];

			if (c == NULL || c == CONN_GONE)
				continue;
			/* RFC 9000, 10.2: CONNECTION_CLOSE, application code 0 */
			if (moq_quic_conn_close(c, 0, "relay draining") == 0)
				w->st.drain_closes++;
		}
		if (w->io.web != NULL)
			w->st.drain_closes += (uint64_t)moq_relay_web_drain(w->io.web, 1);
	}
	if (w->id != 0 || w->links_state == LINKS_DONE)
		return;
	if (w->links_state == LINKS_CLOSING || r->cluster == NULL) {
		w->links_state = LINKS_DONE; /* moq_cluster_poll sent the closes */
		__atomic_store_n(&r->links_done, 1, __ATOMIC_RELEASE);
	} else if (w->drain_closed || __atomic_load_n(&r->drain_links, __ATOMIC_ACQUIRE)) {
		w->st.drain_closes += (uint64_t)moq_cluster_drain(r->cluster);
		w->links_state = LINKS_CLOSING;
	}
}

static struct moq_quic_endpoint *make_endpoint(const struct moq_pmd_config *cfg, unsigned int id,
                                               const uint8_t *secret, struct moq_node *node,
                                               struct moq_quic_tls *tls,
                                               struct moq_quic_addr_table *atab, int *err)
{
	struct moq_quic_config qc;
	size_t nalpn;

	memset(&qc, 0, sizeof(qc));
	qc.role = MOQ_QUIC_SERVER;
	qc.worker_id = (uint8_t)id;
	qc.tls = tls; /* the relay's, shared by every worker */
	/* the moq-lite ALPNs and, on the same port, HTTP/3 for WebTransport
	 * (BINDINGS.md 1), which needs max_datagram_frame_size > 0 */
	{
		const char *const *ma = moq_node_alpns_all(&nalpn);
		static const char *alpns[16];
		size_t k = 0;

		for (size_t i = 0; i < nalpn && i < 7; i++)
			alpns[k++] = ma[i];
		/* IETF moq-transport drafts 20 .. 14 after moq-lite (moq/ietf_session.c) */
		for (int d = MOQ_IETF_LAST; d >= MOQ_IETF_FIRST; d--)
			alpns[k++] = moq_ietf_alpn(d);
		alpns[k++] = MOQ_H3_ALPN;
		qc.alpn = alpns;
		qc.alpn_count = k;
	}
	qc.max_datagram_frame_size = 65535;
	/* moq.h wiring: the node's callbacks, the node as config.user */
	qc.cb = node != NULL ? relay_callbacks() : NULL;
	qc.user = node;
	qc.secret = secret;
	qc.max_conns = cfg->max_connections;
	/* --max-conns-per-addr 0 = unlimited; quic/ reads 0 as its default */
	qc.max_conns_per_addr = cfg->max_conns_per_addr != 0 ? cfg->max_conns_per_addr : UINT32_MAX;
	qc.addr_table = atab; /* every worker's: one count per source */
	qc.max_streams_uni = cfg->max_streams;
	qc.max_streams_bidi = cfg->max_streams;
	qc.idle_timeout_ns = cfg->idle_timeout_us * 1000;
	qc.fastpath = (int)cfg->fastpath; /* issue 23: quic/handoff.c */
	qc.fastpath_max_conns = cfg->fastpath_conns < cfg->max_connections ? cfg->fastpath_conns
	                                                                   : cfg->max_connections;
	qc.max_udp_payload = (size_t)cfg->mtu - 48 < MOQ_QUIC_MAX_UDP_PAYLOAD
	                             ? (size_t)cfg->mtu - 48 /* IPv6 + UDP headers */
	                             : MOQ_QUIC_MAX_UDP_PAYLOAD;
	return moq_quic_endpoint_new(&qc, err);
}

static int lcore_of_worker(const unsigned int *lcores, unsigned int n, unsigned int lcore)
{
	for (unsigned int i = 0; i < n; i++)
		if (lcores[i] == lcore)
			return (int)i;
	return -1;
}

/* Ports in use: the portmask, or every port. */
static int pick_ports(struct moq_relay *r, char *err, size_t errlen)
{
	uint16_t pid;

	RTE_ETH_FOREACH_DEV(pid)
	{
		if (r->cfg.portmask != 0 && (pid >= 64 || !(r->cfg.portmask & (1ull << pid))))
			continue;
		if (r->nb_ports == MOQ_RELAY_MAX_PORTS)
			return rfail(err, errlen, "--portmask: more than %d ports",
			             MOQ_RELAY_MAX_PORTS);
		r->port_index[pid] = (uint16_t)r->nb_ports;
		r->ports[r->nb_ports++].port_id = pid;
	}
	if (r->nb_ports == 0)
		return rfail(err, errlen,
		             "no DPDK port: give EAL a device (-a <pci> or --vdev=net_tap0) or "
		             "use --backend kernel");
	return 0;
}

/* Worker set: the lcores of --queues, or the first worker lcore. */
static int pick_workers(struct moq_relay *r, unsigned int *lcores, char *err, size_t errlen)
{
	unsigned int n = 0;

	if (r->cfg.nb_queues == 0) {
		unsigned int lc = rte_get_next_lcore(-1, 1, 0);

		if (lc >= RTE_MAX_LCORE)
			return rfail(err, errlen,
			             "EAL: no worker lcore (give at least two, e.g. -l 0-1)");
		lcores[n++] = lc;
		if (r->cfg.backend == MOQ_CFG_BACKEND_DPDK)
			for (unsigned int i = 0; i < r->nb_ports; i++) {
				r->cfg.queues[i].port = r->ports[i].port_id;
				r->cfg.queues[i].queue = 0;
				r->cfg.queues[i].lcore = (uint16_t)lc;
				r->cfg.nb_queues = i + 1;
			}
	} else {
		for (unsigned int i = 0; i < r->cfg.nb_queues; i++) {
			unsigned int lc = r->cfg.queues[i].lcore;

			if (lc >= RTE_MAX_LCORE || !rte_lcore_is_enabled(lc))
				return rfail(err, errlen,
				             "--queues: lcore %u is not in EAL's -l/-c set", lc);
			if (lc == rte_get_main_lcore())
				return rfail(err, errlen,
				             "--queues: lcore %u is the main lcore (control work "
				             "only)",
				             lc);
			if (lcore_of_worker(lcores, n, lc) < 0) {
				if (n == MOQ_RELAY_MAX_WORKERS)
					return rfail(err, errlen, "--queues: more than %d lcores",
					             MOQ_RELAY_MAX_WORKERS);
				lcores[n++] = lc;
			}
		}
	}
	r->nb_workers = n;
	return 0;
}

/* Addresses: port k gets the k-th IPv4 and the k-th IPv6 of --listen. */
static int assign_addresses(struct moq_relay *r, char *err, size_t errlen)
{
	unsigned int n4 = 0, n6 = 0;

	for (unsigned int i = 0; i < r->cfg.nb_listen; i++) {
		const struct moq_cfg_addr *a = &r->cfg.listen[i];
		static const uint8_t zero[16];

		if (memcmp(a->addr, zero, a->family == AF_INET ? 4 : 16) == 0)
			return rfail(err, errlen,
			             "--listen: the dpdk backend needs the port's own address "
			             "(e.g. --listen 10.0.0.2/24)");
		if (a->family == AF_INET) {
			if (n4 >= r->nb_ports)
				return rfail(err, errlen,
				             "--listen: more IPv4 addresses than ports");
			memcpy(r->ports[n4].ip4, a->addr, 4);
			r->ports[n4].ip4_prefix = a->prefixlen;
			r->ports[n4++].has_ip4 = 1;
		} else {
			if (n6 >= r->nb_ports)
				return rfail(err, errlen,
				             "--listen: more IPv6 addresses than ports");
			memcpy(r->ports[n6].ip6, a->addr, 16);
			r->ports[n6].ip6_prefix = a->prefixlen;
			r->ports[n6++].has_ip6 = 1;
		}
	}
	return 0;
}

static int setup_ports(struct moq_relay *r, char *err, size_t errlen)
{
	for (unsigned int q = 0; q < r->cfg.nb_queues; q++) {
		uint16_t port = r->cfg.queues[q].port;
		int known = 0;

		for (unsigned int i = 0; i < r->nb_ports; i++)
			known |= r->ports[i].port_id == port;
		if (!known)
			return rfail(
			        err, errlen,
			        "--queues: port %u is not a DPDK port in use (%u port(s): check "
			        "EAL's -a/--vdev and --portmask)",
			        port, r->nb_ports);
	}
	for (unsigned int i = 0; i < r->nb_ports; i++) {
		struct relay_port *p = &r->ports[i];
		uint16_t nb_rxq = 0;
		unsigned int n;
		int rc;

		for (unsigned int q = 0; q < r->cfg.nb_queues; q++)
			if (r->cfg.queues[q].port == p->port_id && r->cfg.queues[q].queue >= nb_rxq)
				nb_rxq = (uint16_t)(r->cfg.queues[q].queue + 1);
		for (uint16_t q = 0; q < nb_rxq; q++) {
			int found = 0;

			for (unsigned int k = 0; k < r->cfg.nb_queues; k++)
				found |= r->cfg.queues[k].port == p->port_id &&
				         r->cfg.queues[k].queue == q;
			if (!found)
				return rfail(
				        err, errlen,
				        "--queues: port %u queue %u has no lcore (queues 0..%u "
				        "must all be polled)",
				        p->port_id, q, nb_rxq - 1);
		}
		if (nb_rxq == 0)
			return rfail(err, errlen, "--queues: port %u has no queue", p->port_id);
		rc = moq_pmd_port_plan(p->port_id, &r->cfg, nb_rxq, (uint16_t)r->nb_workers,
		                       RTE_MBUF_DEFAULT_BUF_SIZE, &p->pp, err, errlen);
		if (rc != 0)
			return rc;
		if (r->pools[p->pp.socket] == NULL) {
			unsigned int rxd = 0, txd = 0;

			/* every port (later ones are not planned yet: assumed
			 * alike): RX queues x descriptors + TX queues x descriptors */
			rxd = r->nb_ports * (unsigned int)nb_rxq * p->pp.nb_rxd;
			txd = r->nb_ports * r->nb_workers * p->pp.nb_txd;
			/* + what QUIC holds between send and TX completion: a burst
			 * per worker per port in the TX buffers; + what the
			 * redirect rings hold (received mbufs on their way to the
			 * owner worker: --redirect-ring - 1 per worker) */
			n = moq_pmd_pool_size(rxd, txd, r->nb_workers + 1,
			                      r->nb_workers * r->nb_ports * MOQ_RELAY_TXBUF +
			                              r->nb_workers * (r->cfg.redirect_ring - 1));
			if (r->cfg.pool_mbufs != 0)
				n = r->cfg.pool_mbufs;
			r->pools[p->pp.socket] = moq_pmd_pool_create("relay", p->pp.socket, n,
			                                             RTE_MBUF_DEFAULT_BUF_SIZE);
			if (r->pools[p->pp.socket] == NULL)
				return rfail(err, errlen,
				             "socket %d: cannot create a pool of %u mbufs: %s "
				             "(more hugepages, or -m/--socket-mem)",
				             p->pp.socket, n, rte_strerror(rte_errno));
		}
		p->pool = r->pools[p->pp.socket];
		if (p->pp.nb_rxq > 1 && p->pp.rss_hf == 0)
			fprintf(stderr,
			        "moqdp-relay: warning: port %u (%s) offers no RSS hash for IP/UDP: "
			        "the NIC does not spread flows over its %u RX queues\n",
			        p->port_id, p->pp.driver, p->pp.nb_rxq);
		rc = moq_pmd_port_start(&p->pp, p->pool, err, errlen);
		if (rc != 0)
			return rc;
		moq_net_iface_init(&p->ifc, p->pp.mac.addr_bytes, p->has_ip4 ? p->ip4 : NULL,
		                   p->ip4_prefix, p->has_ip6 ? p->ip6 : NULL, p->ip6_prefix,
		                   r->cfg.udp_port);
		if (r->cfg.gateway4.family) {
			memcpy(p->ifc.gw4, r->cfg.gateway4.addr, 4);
			p->ifc.has_gw4 = 1;
		}
		if (r->cfg.gateway6.family) {
			memcpy(p->ifc.gw6, r->cfg.gateway6.addr, 16);
			p->ifc.has_gw6 = 1;
		}
		p->ifc.tx_offloads = (p->pp.tx_ip_csum ? MOQ_NET_TX_IP_CSUM : 0) |
		                     (p->pp.tx_udp_csum ? MOQ_NET_TX_UDP_CSUM : 0);
		p->ifc.l4_partial_ok = (p->pp.profile->flags & MOQ_PMD_F_L4_PARTIAL) != 0;
	}
	return 0;
}

/* RFC 5227 ARP announcement and an unsolicited NA on every port, so
 * neighbours learn (or update) our MAC at start. */
/* A gratuitous ARP (RFC 5227 announcement) and an unsolicited NA for port
 * @pi into @m (room for 2); returns how many were built. */
static uint16_t announce_build(struct moq_relay *r, unsigned int pi, struct rte_mbuf **m)
{
	struct relay_port *p = &r->ports[pi];
	uint16_t n = 0;
	uint8_t buf[128];
	int len;

	if (p->ifc.has_ip4 &&
	    (len = moq_net_arp_build(&p->ifc, buf, sizeof(buf), 1, NULL, p->ifc.ip4)) > 0 &&
	    (m[n] = rte_pktmbuf_alloc(p->pool)) != NULL)
		memcpy(rte_pktmbuf_append(m[n++], (uint16_t)len), buf, (size_t)len);
	if (p->ifc.has_ip6 && (len = moq_net_na_build(&p->ifc, buf, sizeof(buf))) > 0 &&
	    (m[n] = rte_pktmbuf_alloc(p->pool)) != NULL)
		memcpy(rte_pktmbuf_append(m[n++], (uint16_t)len), buf, (size_t)len);
	__atomic_add_fetch(&r->announcements, n, __ATOMIC_RELAXED);
	return n;
}

/* At start (no worker runs yet, TX queue 0 is free): announce on every
 * port, so neighbours learn (or update) our MAC. */
static void announce(struct moq_relay *r)
{
	for (unsigned int i = 0; i < r->nb_ports; i++) {
		struct rte_mbuf *m[2];
		uint16_t n = announce_build(r, i, m), sent;

		if (n == 0)
			continue;
		sent = rte_eth_tx_burst(r->ports[i].port_id, 0, m, n);
		if (sent < n)
			rte_pktmbuf_free_bulk(&m[sent], n - sent);
	}
}

/* Worker 0: announcements the main lcore asked for (a link came up). */
static void announce_pending(struct moq_relay *r, struct relay_worker *w)
{
	uint32_t pend;

	if (__atomic_load_n(&r->announce_pending, __ATOMIC_RELAXED) == 0)
		return;
	pend = __atomic_exchange_n(&r->announce_pending, 0, __ATOMIC_ACQ_REL);
	for (unsigned int i = 0; i < r->nb_ports; i++) {
		struct rte_mbuf *m[2];
		uint16_t n;

		if (!(pend & (1u << i)))
			continue;
		n = announce_build(r, i, m);
		for (uint16_t k = 0; k < n; k++)
			tx_add(r, w, i, m[k]);
	}
}

/* Main lcore, once a second: report link changes; a link that came up gets
 * announced again (by worker 0, which owns TX queue 0). */
static void link_check(struct moq_relay *r, int quiet)
{
	for (unsigned int i = 0; i < r->nb_ports; i++) {
		struct rte_eth_link link;
		struct relay_port *p = &r->ports[i];

		memset(&link, 0, sizeof(link));
		if (rte_eth_link_get_nowait(p->port_id, &link) != 0)
			continue;
		if ((int)link.link_status == p->link_up)
			continue;
		p->link_up = link.link_status;
		if (!quiet) {
			char speed[48] = "";

			if (link.link_status)
				snprintf(speed, sizeof(speed), " %u Mbps%s", link.link_speed,
				         link.link_duplex ? " full-duplex" : "");
			fprintf(stderr, "moqdp-relay: port %u link %s%s\n", p->port_id,
			        link.link_status ? "up" : "down", speed);
		}
		if (link.link_status && r->nb_workers > 0)
			__atomic_or_fetch(&r->announce_pending, 1u << i, __ATOMIC_RELEASE);
	}
}

/* Renew the generated certificate this long before it expires (it is
 * valid 14 days: quic.h, moq_quic_tls_validity). */
#define CERT_RENEW_BEFORE_S 86400
/* MOQDP_TEST_CERT_RENEW_S=N: renew the generated certificate every N s
 * (tests; the harness's MOQDP_TEST_* variables are not relay options). */
#define CERT_RENEW_TEST_ENV "MOQDP_TEST_CERT_RENEW_S"

/* The relay's fingerprint strings, and when a generated certificate is
 * renewed (main lcore). */
static void tls_note(struct moq_relay *r, const struct moq_quic_tls *tls)
{
	uint8_t fp[32];
	int64_t nb, na;
	const char *test = getenv(CERT_RENEW_TEST_ENV);

	moq_quic_tls_fingerprint(tls, fp);
	moq_quic_fingerprint_str(fp, r->fingerprint, sizeof(r->fingerprint));
	for (int i = 0; i < 32; i++)
		snprintf(r->fingerprint_hex + 2 * i, 3, "%02x", fp[i]);
	r->cert_renew_at = 0;
	if (r->cfg.cert[0] != '\0' || moq_quic_tls_validity(tls, &nb, &na) != 0)
		return;
	r->cert_not_after = na;
	if (test != NULL && atoi(test) > 0) {
		r->cert_renew_at = moq_relay_now_ns() + (uint64_t)atoi(test) * 1000000000ull;
	} else {
		int64_t left = na - (int64_t)time(NULL) - CERT_RENEW_BEFORE_S;
		r->cert_renew_at =
		        moq_relay_now_ns() + (uint64_t)(left > 60 ? left : 60) * 1000000000ull;
	}
}

static int setup_workers(struct moq_relay *r, const unsigned int *lcores, char *err, size_t errlen)
{
	uint8_t secret[MOQ_QUIC_SECRET_LEN];
	FILE *f = fopen("/dev/urandom", "r");

	/* one stateless-reset / Retry secret for all workers (quic.h) */
	if (f == NULL || fread(secret, 1, sizeof(secret), f) != sizeof(secret)) {
		if (f)
			fclose(f);
		return rfail(err, errlen, "cannot read /dev/urandom");
	}
	fclose(f);
	/* the certificate, read once for every worker (or one self-signed
	 * certificate they all serve, kept in --state-dir: devcert.c) */
	{
		struct relay_tls *t = calloc(1, sizeof(*t));
		int qerr = MOQ_ERR_NOMEM, made = 0;

		if (t == NULL)
			return rfail(err, errlen, "out of memory");
		if (r->cfg.cert[0] == '\0' && r->cfg.state_dir[0] != '\0') {
			if (moq_relay_state_dir_check(r->cfg.state_dir, err, errlen) != 0 ||
			    (t->tls =
			             moq_relay_dev_cert(r->cfg.state_dir, NULL, CERT_RENEW_BEFORE_S,
			                                &made, err, errlen)) == NULL) {
				free(t);
				return MOQ_ERR_CONFIG;
			}
			fprintf(stderr, "moqdp-relay: certificate: %s %s/dev-cert.pem\n",
			        made ? "generated, kept in" : "kept, from", r->cfg.state_dir);
		} else {
			t->tls = moq_quic_tls_new(r->cfg.cert[0] ? r->cfg.cert : NULL,
			                          r->cfg.key[0] ? r->cfg.key : NULL, &qerr);
		}
		if (t->tls == NULL) {
			free(t);
			return rfail(err, errlen, "%s: cannot set up TLS/QUIC (%s)",
			             r->cfg.cert[0] ? "--cert" : "worker", moq_err_str(qerr));
		}
		t->gen = 1;
		r->tls = t;
		r->tls_gen_now = 1;
		tls_note(r, t->tls);
	}
	for (unsigned int i = 0; i < r->nb_workers; i++) {
		int sock = (int)rte_lcore_to_socket_id(lcores[i]);
		struct relay_worker *w;
		char name[RTE_RING_NAMESIZE];
		int qerr = 0;

		w = rte_zmalloc_socket("moqdp_worker", sizeof(*w), RTE_CACHE_LINE_SIZE, sock);
		if (w == NULL)
			return rfail(err, errlen, "worker %u: out of memory", i);
		r->w[i] = w;
		w->id = i;
		w->lcore = lcores[i];
		snprintf(name, sizeof(name), "moqdp_rd_%u_%d", i, (int)getpid());
		w->ring = rte_ring_create(name, r->cfg.redirect_ring, sock, RING_F_SC_DEQ);
		if (w->ring == NULL)
			return rfail(err, errlen, "--redirect-ring: cannot create ring %s: %s",
			             name, rte_strerror(rte_errno));
		r->rings[i] = w->ring;
		for (unsigned int q = 0; q < r->cfg.nb_queues; q++) {
			if (r->cfg.queues[q].lcore != lcores[i])
				continue;
			if (w->nb_rxq == MOQ_RELAY_MAX_RXQ) /* moq_pmd_config_check refuses it */
				return rfail(err, errlen,
				             "--queues: lcore %u polls more than %d queues",
				             lcores[i], MOQ_RELAY_MAX_RXQ);
			w->rxq[w->nb_rxq].pi = r->port_index[r->cfg.queues[q].port];
			w->rxq[w->nb_rxq++].queue = r->cfg.queues[q].queue;
		}
		for (unsigned int pi = 0; pi < r->nb_ports; pi++) {
			struct relay_port *p = &r->ports[pi];

			w->net[pi] = rte_zmalloc_socket("moqdp_net", sizeof(struct moq_net),
			                                RTE_CACHE_LINE_SIZE, sock);
			if (p->neigh == NULL &&
			    (p->neigh = rte_malloc_socket("moqdp_neigh", sizeof(*p->neigh),
			                                  RTE_CACHE_LINE_SIZE, p->pp.socket)) !=
			            NULL)
				moq_net_neigh_table_init(p->neigh);
			if (w->net[pi] == NULL || p->neigh == NULL)
				return rfail(err, errlen, "worker %u: out of memory", i);
			moq_net_init(w->net[pi], &p->ifc);
			moq_net_share(w->net[pi], p->neigh);
		}
		w->pool = r->nb_ports > 0 ? r->ports[0].pool : r->kpool;
		for (unsigned int pi = 0; pi < r->nb_ports; pi++)
			if (r->ports[pi].pp.socket == sock)
				w->pool = r->ports[pi].pool;
		{
			struct moq_node_cfg nc;

			memset(&nc, 0, sizeof(nc));
			nc.cache = r->cache;
			nc.relay = 1;
			nc.max_sessions = r->cfg.max_connections;
			/* relay-wide bounds: the hub's counts join the workers */
			nc.max_subscribers = r->cfg.max_subscribers;
			nc.max_tracks = r->cfg.max_tracks;
			/* per-peer bounds */
			nc.max_broadcasts = r->cfg.max_broadcasts;
			nc.max_session_broadcasts = r->cfg.max_session_broadcasts;
			nc.max_announces = r->cfg.max_announce_requests;
			nc.max_subscriptions = r->cfg.max_session_subscriptions;
			nc.max_fetches = r->cfg.max_session_fetches;
			nc.link_max_subscriptions = r->cfg.link_max_subscriptions;
			nc.link_max_session_broadcasts = r->cfg.link_max_broadcasts;
			nc.max_broadcast_name = r->cfg.max_broadcast_name;
			nc.max_track_name = r->cfg.max_track_name;
			nc.max_msg = r->cfg.max_message;
			/* --route-cost: 1 is what an absent parameter means */
			nc.has_cost = r->cfg.route_cost != 1;
			nc.cost = r->cfg.route_cost;
			nc.cache_reader = i; /* the node registers and reports quiescence */
			nc.hub = r->hub;     /* NULL with one worker */
			nc.auth = r->auth;   /* NULL: no --auth-* */
			/* --upstream-hold (2 s by default on a relay that dials
			 * peers: an edge); worker 0 follows the peer links */
			nc.up_hold_ns = (r->cfg.upstream_hold_set ? r->cfg.upstream_hold_us
			                 : r->cluster != NULL     ? 2000000ull
			                                          : 0) *
			                1000;
			if (i == 0 && r->cluster != NULL) {
				nc.cb = moq_cluster_node_callbacks();
				nc.user = r->cluster;
			}
			/* --max-latency: expiry of the cache tracks the relay
			 * creates for its upstream subscriptions */
			nc.track.max_latency = r->cfg.max_latency_us * 1000;
			if (r->cfg.admit_goaway[0] != '\0') { /* --admit-refuse goaway=URL */
				nc.admit_goaway = r->cfg.admit_goaway;
				nc.admit_goaway_len = strlen(r->cfg.admit_goaway);
			}
			w->node = moq_node_create(&nc);
			if (w->node == NULL)
				return rfail(err, errlen, "worker %u: cannot create the moq node",
				             i);
		}
		w->conn_cap = 64;
		while (w->conn_cap < 2ull * r->cfg.max_connections && w->conn_cap < (1u << 30))
			w->conn_cap <<= 1;
		w->conns = rte_zmalloc_socket("moqdp_conns", w->conn_cap * sizeof(w->conns[0]),
		                              RTE_CACHE_LINE_SIZE, sock);
		if (w->conns == NULL)
			return rfail(err, errlen, "--max-connections: no memory for %u connections",
			             r->cfg.max_connections);
		w->ep = make_endpoint(&r->cfg, i, secret, w->node, r->tls->tls, r->addr_table,
		                      &qerr);
		if (w->ep == NULL)
			return rfail(err, errlen, "worker %u: cannot set up QUIC (%s)", i,
			             moq_err_str(qerr));
		w->tls_gen = r->tls->gen;
		w->io.relay = r;
		w->io.id = i;
		w->io.nb_workers = r->nb_workers;
		w->io.ep = w->ep;
		w->io.node = w->node;
		w->io.ring = w->ring;
		w->io.rings = r->rings;
		w->io.pool = r->kpool;
		w->io.st = &w->st;
		w->io.tls = r->tls->tls;
		w->io.cache = r->cache;
		w->io.auth = r->auth;
		if (r->io_ops->open != NULL && r->io_ops->open(&w->io, &r->cfg, err, errlen) != 0)
			return MOQ_ERR_CONFIG;
	}
	return 0;
}

/* The cache's memory: per-lcore size-class pools on hugepages (pool.h),
 * an arena on each socket that has a worker. The pool may reserve the
 * budget + 1/4 (the pool holds up to 1.10 x what the cache bills, and the
 * cache passes its budget by up to a group's writes before it evicts), plus
 * a slab per class (MOQ_POOL_CLASSES x 64 KiB: each class's partly used
 * slab) and 2 MiB per worker (its lcore caches: at most 64 KiB per class,
 * far less in practice). Reserved in 2 MiB chunks as the cache grows. */
static struct moq_pool *cache_pool_create(struct moq_relay *r, const unsigned int *lcores,
                                          char *err, size_t errlen)
{
	int sockets[MOQ_POOL_MAX_ARENAS];
	unsigned int ns = 0;
	uint64_t limit = r->cfg.cache_budget + r->cfg.cache_budget / 4 +
	                 (uint64_t)MOQ_POOL_CLASSES * MOQ_POOL_SLAB +
	                 (uint64_t)r->nb_workers * MOQ_POOL_CHUNK;
	struct moq_pool *p;

	for (unsigned int i = 0; i < r->nb_workers; i++) {
		int sock = (int)rte_lcore_to_socket_id(lcores[i]);
		unsigned int j;

		for (j = 0; j < ns && sockets[j] != sock; j++)
			;
		if (j == ns && ns < MOQ_POOL_MAX_ARENAS)
			sockets[ns++] = sock;
	}
	if (ns == 0)
		sockets[ns++] = (int)rte_socket_id();
	p = moq_pool_create("moqdp_cache", limit, sockets, ns);
	if (p == NULL)
		rfail(err, errlen, "--cache-budget: cannot create the cache's pools: %s",
		      rte_strerror(rte_errno));
	return p;
}

/* cluster links on the dpdk backend (cluster.h, moq_cluster_io) -------- */

/* our address for dialling @remote: a port's on the peer's subnet, else
 * the first port's of its family (the gateway, --gateway4/6, routes it) */
static int cluster_local_addr(void *ctx, const struct moq_quic_addr *remote,
                              struct moq_quic_addr *out)
{
	const struct moq_relay *r = ctx;
	const uint8_t *rip;
	uint16_t rport;
	int fam = addr_parts(remote, &rip, &rport), best = -1;

	for (unsigned int i = 0; fam != 0 && i < r->nb_ports; i++) {
		const struct relay_port *p = &r->ports[i];
		const uint8_t *ip = fam == 4 ? p->ip4 : p->ip6;
		unsigned int plen = fam == 4 ? p->ip4_prefix : p->ip6_prefix, b;
		int on_link = 1;

		if (!(fam == 4 ? p->has_ip4 : p->has_ip6))
			continue;
		for (b = 0; b < plen && on_link; b++)
			on_link = ((ip[b / 8] ^ rip[b / 8]) & (0x80 >> (b % 8))) == 0;
		if (best < 0 || on_link)
			best = (int)i;
		if (on_link)
			break;
	}
	if (best < 0)
		return MOQ_ERR_NOTFOUND;
	moq_relay_addr_from(out, fam, fam == 4 ? r->ports[best].ip4 : r->ports[best].ip6, 0);
	return 0;
}

/* worker 0 sends a link endpoint's packets as its own: a few bursts, none
 * while its TX buffers hold what the ring did not take */
static int cluster_send(void *ctx, struct moq_quic_endpoint *ep, uint64_t now)
{
	struct moq_relay *r = ctx;
	struct relay_worker *w = r->w[0];
	int work = 0;

	for (int b = 0; b < 4 && moq_quic_endpoint_pending(ep) && !tx_backlog(r, w); b++) {
		int k = dpdk_send(r, w, ep, now);

		work += k;
		if (k < MOQ_PMD_BURST)
			break;
	}
	return work;
}

/* The links' local UDP ports: a range in the dynamic ports (RFC 6335, 6)
 * clear of --port, taken as ours by every port's network layer. */
static void cluster_io_setup(struct moq_relay *r)
{
	unsigned int n = moq_cluster_links(r->cluster);
	uint16_t lo = (uint16_t)(49152 + rte_rdtsc() % (16384 - MOQ_CLUSTER_MAX_LINKS));
	struct moq_cluster_io io = {
	        .ctx = r,
	        .local_addr = cluster_local_addr,
	        .send = cluster_send,
	};

	if (moq_cluster_port(lo, n, r->cfg.udp_port))
		lo = (uint16_t)(lo > 49152 + 2 * MOQ_CLUSTER_MAX_LINKS ? lo - MOQ_CLUSTER_MAX_LINKS
		                                                        : lo + MOQ_CLUSTER_MAX_LINKS);
	io.port_lo = lo;
	for (unsigned int i = 0; i < r->nb_ports; i++) {
		r->ports[i].ifc.client_port_lo = lo;
		r->ports[i].ifc.client_ports = (uint16_t)n;
	}
	r->cluster_port_lo = lo;
	r->cluster_ports = n;
	moq_cluster_set_io(r->cluster, &io);
}

struct moq_relay *moq_relay_create(const struct moq_pmd_config *cfg, char *err, size_t errlen)
{
	unsigned int lcores[MOQ_RELAY_MAX_WORKERS];
	struct moq_relay *r = rte_zmalloc("moqdp_relay", sizeof(*r), RTE_CACHE_LINE_SIZE);

	if (r == NULL) {
		rfail(err, errlen, "out of memory");
		return NULL;
	}
	r->cfg = *cfg;
	fp_aead_select((int)cfg->fastpath_gcm); /* --fastpath-gcm: every engine's AEAD */
	r->io_ops = cfg->backend == MOQ_CFG_BACKEND_KERNEL ? &moq_relay_kernel_ops : &dpdk_ops;
	r->mgmt.http_fd = -1;
	r->exc_port = -1;
	r->t0_ns = moq_relay_now_ns();
	r->tsc0 = rte_rdtsc();
	r->tsc_mult = (uint64_t)((1000000000ull << 32) / rte_get_tsc_hz());
	r->admit_window_tsc = rte_get_tsc_hz() / (1000000000ull / ADMIT_WINDOW_NS);
	if (cfg->backend == MOQ_CFG_BACKEND_DPDK) {
		if (pick_ports(r, err, errlen) != 0 || pick_workers(r, lcores, err, errlen) != 0 ||
		    assign_addresses(r, err, errlen) != 0 || setup_ports(r, err, errlen) != 0 ||
		    moq_relay_exc_open(r, err, errlen) != 0)
			goto fail;
	} else {
		if (pick_workers(r, lcores, err, errlen) != 0)
			goto fail;
		/* redirect copies between workers */
		r->kpool = moq_pmd_pool_create("kern", (int)rte_socket_id(),
		                               r->nb_workers * r->cfg.redirect_ring + 1024,
		                               RTE_MBUF_DEFAULT_BUF_SIZE);
		if (r->kpool == NULL) {
			rfail(err, errlen, "cannot create the redirect pool: %s",
			      rte_strerror(rte_errno));
			goto fail;
		}
	}
	{
		struct moq_cache_cfg cc;

		memset(&cc, 0, sizeof(cc));
		r->cache_pool = cache_pool_create(r, lcores, err, errlen);
		if (r->cache_pool == NULL)
			goto fail;
		cc.alloc = moq_pool_cache_alloc(r->cache_pool);
		cc.budget = cfg->cache_budget;
		cc.max_readers = r->nb_workers;
		cc.clock = cache_clock; /* the workers' latency commits use it too */
		cc.clock_ctx = r;
		r->cache = moq_cache_create(&cc);
		if (r->cache == NULL) {
			rfail(err, errlen, "--cache-budget: cannot create the cache");
			goto fail;
		}
	}
	/* Several workers: one hub joins their nodes, so a subscriber on any
	 * worker reaches a broadcast published on another (moq.h). */
	if (r->nb_workers > 1) {
		r->hub = moq_hub_create(r->nb_workers, 0);
		if (r->hub == NULL) {
			rfail(err, errlen, "out of memory (moq hub for %u workers)", r->nb_workers);
			goto fail;
		}
	}
	/* --auth-key / --auth-key-dir / --auth-public: read the keys now; a bad
	 * one is one line naming the option */
	if (cfg->auth_key[0] || cfg->auth_key_dir[0] || cfg->auth_public_set ||
	    cfg->auth_public_publish[0] || cfg->auth_public_subscribe[0] || cfg->auth_url[0]) {
		/* --auth-public and its one-direction forms are moq-relay's
		 * patterns; --auth-url its auth server (auth/authurl.h) */
		struct moq_auth_cfg ac = {
		        .key = cfg->auth_key[0] ? cfg->auth_key : NULL,
		        .key_dir = cfg->auth_key_dir[0] ? cfg->auth_key_dir : NULL,
		        .public_both = cfg->auth_public_set ? cfg->auth_public : NULL,
		        .public_publish =
		                cfg->auth_public_publish[0] ? cfg->auth_public_publish : NULL,
		        .public_subscribe =
		                cfg->auth_public_subscribe[0] ? cfg->auth_public_subscribe : NULL,
		        .url = cfg->auth_url[0] ? cfg->auth_url : NULL,
		        .url_tls_root = cfg->auth_tls_root[0] ? cfg->auth_tls_root : NULL,
		        .url_node = NULL, /* the host name */
		};
		r->auth = moq_auth_create(&ac, err, errlen);
		if (r->auth == NULL)
			goto fail;
	}
	/* --cluster-connect: the peers are parsed (and resolved) first */
	r->cluster = moq_cluster_create(cfg, err, errlen);
	if (r->cluster == NULL && err[0] != '\0')
		goto fail;
	/* --max-conns-per-addr: counted per source (IPv4 address, IPv6 /64)
	 * across the workers, wherever RSS or the kernel put each connection */
	if (cfg->max_conns_per_addr != 0) {
		r->addr_table = moq_quic_addr_table_new(
		        (uint32_t)((uint64_t)cfg->max_connections * r->nb_workers < UINT32_MAX / 4
		                           ? (uint64_t)cfg->max_connections * r->nb_workers
		                           : UINT32_MAX / 4));
		if (r->addr_table == NULL) {
			rfail(err, errlen, "--max-conns-per-addr: out of memory");
			goto fail;
		}
	}
	cb_relay = r;
	if (setup_workers(r, lcores, err, errlen) != 0)
		goto fail;
	if (r->cluster != NULL && cfg->backend == MOQ_CFG_BACKEND_DPDK)
		cluster_io_setup(r);
	if (r->cluster != NULL &&
	    moq_cluster_attach(r->cluster, r->w[0]->node, cfg, err, errlen) != 0)
		goto fail;
	if (cfg->backend == MOQ_CFG_BACKEND_DPDK) {
		for (unsigned int i = 0; i < r->nb_ports; i++)
			r->ports[i].link_up = -1; /* unknown: the first check reports it */
		announce(r);
	}
	if (moq_relay_mgmt_open(&r->mgmt, r, r->cfg.mgmt, err, errlen) != 0)
		goto fail;
	moq_relay_exc_mgmt(r);
	moq_relay_telemetry_register(&r->mgmt);
	return r;

fail:
	moq_relay_destroy(r);
	return NULL;
}

void moq_relay_destroy(struct moq_relay *r)
{
	if (r == NULL)
		return;
	moq_relay_telemetry_unregister(&r->mgmt);
	moq_relay_mgmt_close(&r->mgmt);
	/* every endpoint first: closing a session may post to another
	 * worker's node through the hub (moq.h); the peer links' too */
	moq_cluster_close(r->cluster);
	for (unsigned int i = 0; i < MOQ_RELAY_MAX_WORKERS; i++)
		if (r->w[i] != NULL) {
			moq_quic_endpoint_free(r->w[i]->ep); /* closes sessions (moq.h) */
			r->w[i]->ep = NULL;
		}
	for (unsigned int i = 0; i < MOQ_RELAY_MAX_WORKERS; i++) {
		struct relay_worker *w = r->w[i];

		if (w == NULL)
			continue;
		/* the backend first: the kernel backend's TCP side ends the
		 * sessions of its connections (moq.h, moq_binding_closed) */
		if (r->io_ops != NULL && r->io_ops->close != NULL)
			r->io_ops->close(&w->io);
		moq_node_destroy(w->node);
		rte_free(w->conns);
		if (w->ring != NULL) {
			struct rte_mbuf *m;

			while (rte_ring_dequeue(w->ring, (void **)&m) == 0)
				rte_pktmbuf_free(m);
			rte_ring_free(w->ring);
		}
		for (unsigned int pi = 0; pi < MOQ_RELAY_MAX_PORTS; pi++) {
			if (w->nb_tx[pi] > 0)
				rte_pktmbuf_free_bulk(w->tx[pi], w->nb_tx[pi]);
			rte_free(w->net[pi]);
		}
		rte_free(w);
	}
	moq_relay_exc_close(r); /* after the TCP listeners on its address */
	for (unsigned int i = 0; i < r->nb_ports; i++) {
		moq_pmd_port_stop(&r->ports[i].pp);
		rte_free(r->ports[i].neigh);
	}
	for (unsigned int s = 0; s < RTE_MAX_NUMA_NODES; s++)
		rte_mempool_free(r->pools[s]);
	rte_mempool_free(r->kpool);
	while (r->tls_retired != NULL) {
		struct relay_tls *t = r->tls_retired;

		r->tls_retired = t->next;
		tls_drop(t);
	}
	if (r->tls != NULL)
		tls_drop(r->tls);
	moq_quic_addr_table_free(r->addr_table); /* after every endpoint */
	moq_hub_destroy(r->hub);                 /* after every node */
	moq_cluster_destroy(r->cluster);
	moq_auth_destroy(r->auth);
	moq_cache_destroy(r->cache);
	moq_pool_free(r->cache_pool); /* after the cache: it frees into it */
	if (cb_relay == r)
		cb_relay = NULL;
	rte_free(r);
}

/* lcores and the main loop ---------------------------------------------- */

static int worker_main(void *arg)
{
	struct relay_worker *w = arg;
	struct moq_relay *r = w->relay;

	while (!__atomic_load_n(&r->quit, __ATOMIC_RELAXED))
		moq_relay_poll(r, w->id);
	publish_stats(r, w); /* the final figures (the stopped line) */
	return 0;
}

void moq_relay_quit(struct moq_relay *r)
{
	__atomic_store_n(&r->quit, 1, __ATOMIC_RELAXED);
}

void moq_relay_drain(struct moq_relay *r)
{
	__atomic_store_n(&r->drain, 1, __ATOMIC_RELAXED);
}

void moq_relay_reload(struct moq_relay *r)
{
	__atomic_store_n(&r->reload, 1, __ATOMIC_RELAXED);
}

/* Main lcore: free the handles of replaced certificates that no worker can
 * still be taking: one is being taken only by a worker whose tls_gen is
 * older than it, and a worker that has taken it or a newer one never reads
 * it again (workers always take the newest). */
static void tls_reap(struct moq_relay *r)
{
	for (struct relay_tls **pp = &r->tls_retired; *pp != NULL;) {
		struct relay_tls *t = *pp;
		unsigned int i;

		for (i = 0; i < r->nb_workers; i++)
			if ((int32_t)(__atomic_load_n(&r->w[i]->tls_gen, __ATOMIC_ACQUIRE) -
			              t->gen) < 0)
				break;
		if (i < r->nb_workers) {
			pp = &t->next;
			continue;
		}
		*pp = t->next;
		tls_drop(t);
	}
}

/* Main lcore: @t is the certificate new connections get from now on (each
 * worker's endpoint takes it from its own loop, tls_take). */
static void tls_publish(struct moq_relay *r, struct relay_tls *t)
{
	struct relay_tls *old;

	tls_note(r, t->tls);
	t->gen = r->tls->gen + 1;
	old = __atomic_exchange_n(&r->tls, t, __ATOMIC_ACQ_REL);
	old->next = r->tls_retired;
	r->tls_retired = old;
	__atomic_store_n(&r->tls_gen_now, t->gen, __ATOMIC_RELAXED);
}

/* The generated development certificate is valid 14 days (what browsers
 * pin): a new one before it expires, the way SIGHUP swaps a --cert (open
 * connections keep theirs). On failure the old one stays; retried in a
 * minute. */
static void cert_renew(struct moq_relay *r)
{
	struct relay_tls *t = calloc(1, sizeof(*t));
	int qerr = MOQ_ERR_NOMEM, made = 0;
	char why[MOQ_CFG_ERR_MAX] = "";

	if (t != NULL && r->cfg.state_dir[0] != '\0') {
		/* a new pair in --state-dir (or the newer one another relay
		 * sharing it wrote): not the one we serve */
		uint8_t fp[32];

		moq_quic_tls_fingerprint(r->tls->tls, fp);
		t->tls = moq_relay_dev_cert(r->cfg.state_dir, fp, CERT_RENEW_BEFORE_S, &made, why,
		                            sizeof(why));
	} else if (t != NULL) {
		t->tls = moq_quic_tls_new(NULL, NULL, &qerr);
		snprintf(why, sizeof(why), "%s", moq_err_str(qerr));
	}
	if (t == NULL || t->tls == NULL) {
		free(t);
		fprintf(stderr, "moqdp-relay: certificate renewal failed (%s); retrying in 60 s\n",
		        why[0] ? why : moq_err_str(qerr));
		r->cert_renew_at = moq_relay_now_ns() + 60000000000ull;
		return;
	}
	tls_publish(r, t);
	r->cert_renewals++;
	fprintf(stderr,
	        "moqdp-relay: certificate renewed: sha-256 %s, certificate.sha256 %s (valid "
	        "until %" PRId64 ")\n",
	        r->fingerprint, r->fingerprint_hex, r->cert_not_after);
}

/* SIGHUP: build a TLS context from the configured files here, on the main
 * lcore, once (quic.h: ~1-2 ms); a bad one keeps the old. A good one is
 * published (the relay's tls pointer, a new generation): every worker's
 * endpoint takes it from its own loop for new connections (tls_take), so
 * all serve the same certificate and none reads a file; existing
 * connections keep theirs. */
static void do_reload(struct moq_relay *r)
{
	struct relay_tls *t;
	int qerr = MOQ_ERR_NOMEM;

	if (r->auth != NULL) {
		/* built here, on the main lcore; the workers' nodes see the new
		 * set at their next session set-up (auth.h) */
		char aerr[256];
		struct moq_auth_stats as;

		if (moq_auth_reload(r->auth, aerr, sizeof(aerr)) != 0) {
			fprintf(stderr, "moqdp-relay: reload: %s; keeping the old keys\n", aerr);
		} else {
			moq_auth_get_stats(r->auth, &as);
			fprintf(stderr, "moqdp-relay: reload: auth keys reloaded (%" PRIu64 ")\n",
			        as.keys);
		}
	}
	if (r->cfg.cert[0] == '\0') {
		if (r->auth == NULL)
			fprintf(stderr,
			        "moqdp-relay: reload: no --cert configured, nothing to reload\n");
		return;
	}
	t = calloc(1, sizeof(*t));
	if (t != NULL)
		t->tls = moq_quic_tls_new(r->cfg.cert, r->cfg.key, &qerr);
	if (t == NULL || t->tls == NULL) {
		free(t);
		fprintf(stderr, "moqdp-relay: reload: %s is not usable (%s); keeping the old one\n",
		        r->cfg.cert, moq_err_str(qerr));
		r->reload_failed++;
		return;
	}
	tls_publish(r, t);
	fprintf(stderr,
	        "moqdp-relay: reload: %s is valid; new connections get it (sha-256 %s), open "
	        "ones keep theirs\n",
	        r->cfg.cert, r->fingerprint);
	r->reloads++;
}

int moq_relay_run(struct moq_relay *r)
{
	struct moq_relay_stats prev, now;
	uint64_t last_line = moq_relay_now_ns(), drain_deadline = 0, last_link = 0,
	         drained_left = 0;
	uint64_t drain_close_at = 0;
	int drained = 0;
	char line[512];

	for (unsigned int i = 0; i < r->nb_workers; i++) {
		r->w[i]->relay = r;
		if (rte_eal_remote_launch(worker_main, r->w[i], r->w[i]->lcore) != 0) {
			fprintf(stderr, "moqdp-relay: cannot launch lcore %u\n", r->w[i]->lcore);
			moq_relay_quit(r);
		}
	}
	moq_relay_stats(r, &prev);
	while (!__atomic_load_n(&r->quit, __ATOMIC_RELAXED)) {
		uint64_t t = moq_relay_now_ns();

		if (t - last_link >= 1000000000ull) {
			link_check(r, 0);
			last_link = t;
		}
		moq_relay_mgmt_poll(&r->mgmt, 10);            /* waits up to 10 ms for a client */
		if (t - r->mbufs_sampled_ns >= 10000000ull) { /* peak mbufs: ~10 ms */
			moq_relay_mbufs_sample(r);
			r->mbufs_sampled_ns = t;
		}
		if (__atomic_exchange_n(&r->reload, 0, __ATOMIC_RELAXED))
			do_reload(r);
		if (r->cert_renew_at != 0 && t >= r->cert_renew_at)
			cert_renew(r);
		if (r->tls_retired != NULL)
			tls_reap(r);
		if (__atomic_load_n(&r->drain, __ATOMIC_RELAXED) && drain_deadline == 0) {
			drain_deadline = t + r->cfg.drain_timeout_us * 1000;
			drain_close_at = t + r->cfg.drain_timeout_us * 1000 / 4 * 3;
			fprintf(stderr, "moqdp-relay: draining (up to %" PRIu64 " ms)\n",
			        r->cfg.drain_timeout_us / 1000);
		}
		if (r->cfg.stats_interval_us && t - last_line >= r->cfg.stats_interval_us * 1000) {
			moq_relay_stats(r, &now);
			moq_relay_stats_line(&now, &prev, line, sizeof(line));
			fprintf(stderr, "%s\n", line);
			prev = now;
			last_line = t;
		}
		if (drain_deadline != 0) {
			uint64_t left;

			moq_relay_stats(r, &now);
			/* QUIC (raw, WebTransport) and TCP (WebSocket, HTTP):
			 * with none left the cluster links close, then the relay
			 * stops */
			left = now.conns + now.tcp_conns;
			if (t >= drain_close_at) /* the workers close what is left */
				__atomic_store_n(&r->drain_close, 1, __ATOMIC_RELEASE);
			if (left == 0)
				__atomic_store_n(&r->drain_links, 1, __ATOMIC_RELEASE);
			if ((left == 0 && __atomic_load_n(&r->links_done, __ATOMIC_ACQUIRE)) ||
			    t >= drain_deadline) {
				drained_left = left;
				drained = 1;
				moq_relay_quit(r);
			}
		}
	}
	rte_eal_mp_wait_lcore();
	moq_relay_stats(r, &now); /* the workers' last figures (worker_main) */
	if (drained)
		fprintf(stderr,
		        "moqdp-relay: drained (%" PRIu64 " connections left, %" PRIu64
		        " goaway sent, %" PRIu64 " closed)\n",
		        drained_left, now.goaways, now.drain_closes);
	moq_relay_stats_line(&now, NULL, line, sizeof(line));
	fprintf(stderr, "moqdp-relay: stopped: %s\n", line);
	return 0;
}

/* counters -------------------------------------------------------------- */

/* The relay's mbuf pools: one per socket with ports, the kernel backend's
 * redirect pool. */
static uint64_t mbufs_total(const struct moq_relay *r)
{
	uint64_t n = r->kpool != NULL ? r->kpool->size : 0;

	for (unsigned int i = 0; i < RTE_MAX_NUMA_NODES; i++)
		if (r->pools[i] != NULL)
			n += r->pools[i]->size;
	return n;
}

uint64_t moq_relay_mbufs_sample(struct moq_relay *r)
{
	uint64_t n = r->kpool != NULL ? rte_mempool_in_use_count(r->kpool) : 0;
	uint64_t peak = __atomic_load_n(&r->mbufs_peak, __ATOMIC_RELAXED);

	for (unsigned int i = 0; i < RTE_MAX_NUMA_NODES; i++)
		if (r->pools[i] != NULL)
			n += rte_mempool_in_use_count(r->pools[i]);
	__atomic_store_n(&r->mbufs_in_use, n, __ATOMIC_RELAXED);
	while (n > peak && !__atomic_compare_exchange_n(&r->mbufs_peak, &peak, n, 0,
	                                                __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return n;
}

void moq_relay_stats(struct moq_relay *r, struct moq_relay_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->mbufs_in_use = moq_relay_mbufs_sample(r);
	s->mbufs_peak = __atomic_load_n(&r->mbufs_peak, __ATOMIC_RELAXED);
	s->mbufs_total = mbufs_total(r);
	s->workers = r->nb_workers;
	s->ports = r->nb_ports;
	s->tsc_hz = rte_get_tsc_hz();
	s->cache_budget = r->cfg.cache_budget;
	s->uptime_ns = moq_relay_now_ns() - r->t0_ns;
	if (r->cache != NULL) {
		struct moq_cache_stats cs;

		moq_cache_stats(r->cache, &cs); /* the group lock, briefly */
		s->cache_used = cs.used;
		s->cache_tracks = cs.tracks;
		s->cache_groups = cs.groups;
		s->cache_evicted = cs.evicted;
		s->cache_expired = cs.expired;
		s->cache_lagged = cs.lagged;
	}
	if (r->cache_pool != NULL) {
		struct moq_pool_stats ps;

		moq_pool_stats(r->cache_pool, &ps);
		s->cache_pool_limit = ps.limit;
		s->cache_pool_reserved = ps.reserved;
		s->cache_pool_slab_bytes = ps.slab_bytes;
		s->cache_pool_obj_bytes = ps.obj_bytes + ps.fallback_bytes;
		s->cache_pool_exhausted = ps.exhausted;
		s->cache_pool_fallback = ps.fallback_allocs;
	}
	s->announcements = __atomic_load_n(&r->announcements, __ATOMIC_RELAXED);
	s->cert_generation = __atomic_load_n(&r->tls_gen_now, __ATOMIC_RELAXED);
	s->cert_pem_loads = moq_quic_tls_pem_loads();
	memcpy(s->cert_sha256, r->fingerprint_hex, sizeof(s->cert_sha256));
	s->cert_not_after = r->cert_not_after;
	s->cert_renewals = r->cert_renewals;
	if (r->auth != NULL) {
		struct moq_auth_stats as;

		moq_auth_get_stats(r->auth, &as);
		s->auth_reloads = as.reloads;
		s->auth_reload_errors = as.reload_failed;
		if (moq_auth_url_client(r->auth)) {
			struct moq_auth_url_stats us;
			moq_auth_url_get_stats(moq_auth_url_client(r->auth), &us);
			s->auth_url_requests = us.requests;
			s->auth_url_admitted = us.admitted;
			s->auth_url_refused = us.refused;
			s->auth_url_unavailable = us.unavailable;
		}
	}
	for (unsigned int i = 0; i < r->nb_workers; i++) {
		struct relay_snap sn;
		const struct relay_worker_stats *st = &sn.st;
		struct moq_relay_worker_counters *wc = &s->worker[i];

		snap_read(r->w[i], &sn);
		s->rx_pkts += st->rx_pkts;
		s->rx_bytes += st->rx_bytes;
		s->tx_pkts += st->tx_pkts;
		s->tx_bytes += st->tx_bytes;
		s->tx_drops += st->tx_drops + st->tx_nombuf + st->tx_unresolved;
		s->tx_ring_full += st->tx_ring_full;
		s->redirected += st->redirected;
		s->redirect_drops += st->redirect_drops;
		s->goaways += st->goaways;
		s->gso_msgs += st->gso_msgs;
		s->tcp_conns += st->tcp_conns;
		s->tcp_conns_total += st->tcp_conns_total;
		s->tcp_refused += st->tcp_refused;
		s->ws_sessions += st->ws_sessions;
		s->ws_protocol_closes += st->ws_protocol_closes;
		s->tcp_closes_slow += st->tcp_closes_slow;
		s->web_fetches += st->web_fetches;
		s->web_fetches_refused += st->web_fetches_refused;
		s->ws_refused_origin += st->ws_refused_origin;
		s->exc_in += st->exc_in;
		s->exc_out += st->exc_out;
		s->exc_drops += st->exc_drops;
		s->exc_refused += st->exc_refused;
		s->drain_closes += st->drain_closes;
		s->busy_tsc += st->busy_tsc;
		s->idle_tsc += st->idle_tsc;
		s->busy_polls += st->busy_polls;
		s->idle_polls += st->idle_polls;
		s->conns += sn.qs.conns_active;
		s->half_open += sn.qs.half_open;
		s->conns_total += sn.qs.conns_accepted;
		s->quic_dropped += sn.qs.pkts_dropped;
		s->conns_refused_max += sn.qs.refused_conns;
		s->conns_refused_half_open += sn.qs.refused_half_open;
		s->conns_refused_per_addr += sn.qs.refused_per_addr;
		s->cert_reloads += sn.qs.cert_reloads;
		s->cert_reload_errors += sn.qs.cert_reload_errors;
		s->conns_old_cert += sn.qs.conns_old_cert;
		s->wt_sessions += sn.wt.sessions;
		s->wt_refused += sn.wt.refused;
		s->wt_h3_errors += sn.wt.h3_errors;
		s->wt_streams_in += sn.wt.streams_in;
		s->wt_streams_rejected += sn.wt.streams_rejected;
		s->wt_capsules_close += sn.wt.capsules_close;
		s->wt_held += sn.wt.held;
		s->wt_refused_origin += sn.wt.refused_origin;
		s->quic_spare_bytes += sn.qs.spare_bytes;
		s->fastpath_conns += sn.qs.fastpath_conns;
		s->handoffs += sn.qs.handoffs;
		s->fastpath_key_updates += sn.qs.fastpath_key_updates;
		s->fastpath_pkts_lost += sn.qs.fastpath_pkts_lost;
		s->fastpath_paths_validated += sn.qs.fastpath_paths_validated;
		for (int k = 0; k < MOQ_QUIC_HANDOFF_REASONS; k++)
			s->handoff_refused[k] += sn.qs.handoff_refused[k];
		s->sessions += sn.ns.sessions;
		s->subscribers += sn.ns.subscribers;
		s->tracks += sn.ns.tracks;
		s->upstream_subs += sn.ns.upstream_subs;
		s->loops_refused += sn.ns.loops_refused;
		s->ann_hops_refused += sn.ns.ann_hops_refused;
		s->ann_chains_restarted += sn.ns.ann_chains_restarted;
		s->hub_dropped += sn.ns.hub_dropped;
		s->groups_end_lost += sn.ns.groups_end_lost;
		s->subs_refused_limit += sn.ns.subs_refused_limit;
		s->tracks_refused_limit += sn.ns.tracks_refused_limit;
		s->auth_refused += sn.ns.auth_refused;
		s->auth_expired += sn.ns.auth_expired;
		s->auth_denied += sn.ns.auth_denied;
		s->ann_refused_relay += sn.ns.ann_refused_relay;
		s->ann_refused_session += sn.ns.ann_refused_session;
		s->ann_req_refused += sn.ns.ann_req_refused;
		s->subs_refused_session += sn.ns.subs_refused_session;
		s->fetches_refused += sn.ns.fetches_refused;
		s->names_refused_broadcast += sn.ns.names_refused_broadcast;
		s->names_refused_track += sn.ns.names_refused_track;
		s->msgs_refused_size += sn.ns.msgs_refused_size;
		s->ctl_rx_bytes += sn.ns.ctl_rx_bytes;
		s->bcast_replaced += sn.ns.bcast_replaced;
		s->bcast_failovers += sn.ns.bcast_failovers;
		s->bcast_drained += sn.ns.bcast_drained;
		s->ups_reattached += sn.ns.ups_reattached;
		s->ann_duplicates += sn.ns.ann_duplicates;
		s->ann_restarts += sn.ns.ann_restarts;
		s->subs_refused_capacity += sn.ns.subs_refused_capacity;
		s->goaways_capacity += sn.ns.goaways_capacity;
		s->subs_admitted += sn.ns.subs_admitted;
		s->admit_closed_windows += st->admit_closed_windows;
		/* with a hub every worker's origin table holds every broadcast
		 * (mirrored): the largest table is the count, not the sum */
		if (sn.ns.broadcasts > s->broadcasts)
			s->broadcasts = sn.ns.broadcasts;
		s->groups_in += sn.ns.groups_in;
		s->frames_in += sn.ns.frames_in;
		s->media_bytes_in += sn.ns.bytes_in;
		s->groups_out += sn.ns.groups_out;
		s->fanout_visits += sn.ns.fanout_visits;
		s->fanout_visits_idle += sn.ns.fanout_visits_idle;
		s->frames_out += sn.ns.frames_out;
		s->media_bytes_out += sn.ns.bytes_out;
		s->group_resets += sn.ns.resets_old + sn.ns.resets_evicted + sn.ns.resets_lagged +
		                   sn.ns.resets_dropped + sn.ns.resets_cancel;
		s->resets_old += sn.ns.resets_old;
		s->resets_evicted += sn.ns.resets_evicted;
		s->resets_lagged += sn.ns.resets_lagged;
		s->resets_dropped += sn.ns.resets_dropped;
		s->resets_cancel += sn.ns.resets_cancel;
		s->groups_skipped += sn.ns.groups_skipped;
		s->groups_in_late += sn.ns.groups_in_late;
		s->groups_late_taken += sn.ns.groups_late_taken;
		for (int b = 0; b < MOQ_LATE_BUCKETS; b++)
			s->late_hist[b] += sn.ns.late_hist[b];
		if (sn.ns.late_max_ns > s->late_max_ns)
			s->late_max_ns = sn.ns.late_max_ns;
		s->late_sum_ns += sn.ns.late_sum_ns;
		s->groups_hole_timeouts += sn.ns.groups_hole_timeouts;
		s->quic_ack_pkts_in += sn.qs.ack_pkts_in;
		s->quic_streams_opened += sn.qs.streams_opened;
		s->quic_timer_expiries += sn.qs.timer_expiries;
		s->quic_timer_idle += sn.qs.timer_idle;
		s->quic_timer_inline += sn.qs.timer_inline;
		s->dgrams_in += sn.ns.dgrams_in;
		s->dgrams_out += sn.ns.dgrams_out;
		s->dgrams_too_large += sn.ns.dgrams_too_large;
		s->dgrams_in_bad += sn.ns.dgrams_in_bad;
		s->ietf_ext_kept += sn.ns.ietf_ext_kept;
		s->ietf_ext_dropped += sn.ns.ietf_ext_dropped;
		s->ietf_subgroups_refused += sn.ns.ietf_subgroups_refused;
		s->ietf_groups_paused += sn.ns.ietf_groups_paused;
		s->ietf_fills += sn.ns.ietf_fills;
		s->ietf_fill_objects += sn.ns.ietf_fill_objects;
		s->ietf_fills_refused += sn.ns.ietf_fills_refused;
		s->quic_dgrams_dropped += sn.qs.dgrams_dropped;
		s->fastpath_dgrams_lost += sn.qs.fastpath_dgrams_lost;
		s->fastpath_ivl_coarsened += sn.qs.fastpath_ivl_coarsened;
		s->quic_pkts_in += sn.qs.pkts_in;
		s->quic_pkts_out += sn.qs.pkts_out;
		s->rx_udp += sn.rx_udp;
		s->rx_l4_partial += sn.rx_l4_partial;
		for (int d = 0; d < MOQ_NET_DROP_MAX; d++) {
			s->net_drop[d] += sn.net_drop[d];
			s->net_drops += sn.net_drop[d];
		}
		if (r->cfg.backend == MOQ_CFG_BACKEND_KERNEL)
			s->rx_udp += st->rx_pkts;
		s->net_drop[MOQ_NET_DROP_RX_TRUNC] += st->rx_truncated;
		s->net_drops += st->rx_truncated;
		wc->conns = sn.qs.conns_active;
		wc->conns_total = sn.qs.conns_accepted;
		wc->sessions = sn.ns.sessions;
		wc->frames_in = sn.ns.frames_in;
		wc->frames_out = sn.ns.frames_out;
		wc->redirected_in = st->redirected_in;
		wc->cert_generation = __atomic_load_n(&r->w[i]->tls_gen, __ATOMIC_RELAXED);
		wc->busy_tsc = st->busy_tsc;
		wc->idle_tsc = st->idle_tsc;
		wc->admit_busy_permille = st->admit_busy_permille;
		moq_lat_hist_merge(&s->relay_lat, &sn.lat);
	}
	for (unsigned int pi = 0; pi < r->nb_ports; pi++) {
		struct rte_eth_stats es;

		if (rte_eth_stats_get(r->ports[pi].port_id, &es) == 0) {
			s->rx_nombuf += es.rx_nombuf;
			s->imissed += es.imissed;
		}
	}
}

/* for the management side (mgmt.h) --------------------------------------- */

struct relay_mgmt *moq_relay_mgmt_of(struct moq_relay *r)
{
	return &r->mgmt;
}

int moq_relay_draining(const struct moq_relay *r)
{
	return __atomic_load_n(&r->drain, __ATOMIC_RELAXED);
}

unsigned int moq_relay_mgmt_workers(const struct moq_relay *r, struct relay_mgmt_worker *out)
{
	for (unsigned int i = 0; i < r->nb_workers; i++) {
		struct relay_snap sn;

		snap_read(r->w[i], &sn);
		out[i].conns_active = sn.qs.conns_active;
		out[i].conns_accepted = sn.qs.conns_accepted;
		out[i].sessions = sn.ns.sessions;
	}
	return r->nb_workers;
}

void moq_relay_mgmt_cache(const struct moq_relay *r, struct relay_mgmt_cache *c)
{
	struct moq_cache_stats cs;

	c->budget = r->cfg.cache_budget;
	c->used = moq_cache_used(r->cache);
	c->max_latency_us = r->cfg.max_latency_us;
	moq_cache_stats(r->cache, &cs);
	c->tracks = cs.tracks;
	c->groups = cs.groups;
	c->evicted = cs.evicted;
	c->expired = cs.expired;
	c->lagged = cs.lagged;
	if (r->cache_pool != NULL) {
		struct moq_pool_stats ps;

		moq_pool_stats(r->cache_pool, &ps);
		c->pool_limit = ps.limit;
		c->pool_reserved = ps.reserved;
		c->pool_slab_bytes = ps.slab_bytes;
		c->pool_obj_bytes = ps.obj_bytes + ps.fallback_bytes;
		c->pool_objs = ps.objs;
		c->pool_cached = ps.cached;
		c->pool_exhausted = ps.exhausted;
		c->pool_fallback = ps.fallback_allocs;
		c->pool_remote_frees = ps.remote_frees;
	}
}

/* accessors ------------------------------------------------------------- */

int moq_relay_port_id(const struct moq_relay *r, unsigned int i)
{
	return i < r->nb_ports ? r->ports[i].port_id : MOQ_ERR_NOTFOUND;
}

struct moq_net *moq_relay_net(struct moq_relay *r, unsigned int w, unsigned int i)
{
	return w < r->nb_workers && i < r->nb_ports ? r->w[w]->net[i] : NULL;
}

struct rte_mempool *moq_relay_pool(struct moq_relay *r, unsigned int i)
{
	return i < r->nb_ports ? r->ports[i].pool : NULL;
}

unsigned int moq_relay_http_port(const struct moq_relay *r)
{
	return r->mgmt.http_port;
}

void moq_relay_fingerprint(const struct moq_relay *r, char *buf, size_t len)
{
	snprintf(buf, len, "%s", r->fingerprint);
}

struct moq_cluster *moq_relay_cluster(const struct moq_relay *r)
{
	return r->cluster;
}

void moq_relay_fingerprint_hex(const struct moq_relay *r, char *buf, size_t len)
{
	snprintf(buf, len, "%s", r->fingerprint_hex);
}
