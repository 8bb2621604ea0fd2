/* SPDX-License-Identifier: MIT */
/*
 * test_dpdk_workers.c: the relay's worker iterations with two workers on a
 * net_ring port the test builds from rings of its own (rte_eth_from_rings):
 * the test plays the link and what is on it (RSS included: it picks the RX
 * queue of every frame) and reads what each worker transmits on its own TX
 * queue. Workers are driven by hand (moq_relay_poll on this thread), so
 * every step is deterministic; no kernel interface, no traffic outside the
 * process.
 *   - a gateway's MAC learned by the worker that got the ARP reply (queue 0:
 *     an ARP frame has no IP header to hash) reaches the worker that owns
 *     an off-link client's connection (issue 12, defect 5);
 *   - near pool exhaustion a worker still sends with the mbufs there are;
 *   - the pool is sized for the redirect rings too (issue 12, defect 8).
 */
#include <arpa/inet.h>
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "moq_err.h"
#include "net.h"
#include "pmd_config.h"
#include "quic.h"
#include "relay.h"

/* Two worker lcores (1 and 2) besides the main one; 2 shares CPU 1. The
 * workers are never launched: this thread polls them. */
const char *moq_suite_lcores(void);

const char *moq_suite_lcores(void)
{
	return "0@0,1@1,2@1";
}

#define NQ      2    /* RX queues = TX queues = workers */
#define RING_SZ 1024 /* per direction and queue */

static struct moq_relay *relay;
static struct rte_ring *rxr[NQ], *txr[NQ];
static struct rte_mempool *tpool; /* the link's mbufs (what the test sends) */
static uint16_t port;
static uint8_t relay_mac[6];
static unsigned int seq;

/* The relay at 10.50.0.2/24, its gateway 10.50.0.1, a client off-link. */
static const uint8_t relay_ip[4] = {10, 50, 0, 2}, gw_ip[4] = {10, 50, 0, 1};
static const uint8_t onlink_ip[4] = {10, 50, 0, 9}, far_ip[4] = {10, 60, 0, 5};
static const uint8_t gw_mac[6] = {0x02, 0, 0, 0, 0x0a, 0x01};
static const uint8_t cli_mac[6] = {0x02, 0, 0, 0, 0x0a, 0x09};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A relay on a fresh two-queue ring port with @extra options (NULL-ended). */
static void relay_up(const char *const *extra)
{
	struct moq_pmd_config cfg;
	char err[MOQ_CFG_ERR_MAX], name[RTE_RING_NAMESIZE], mask[24], queues[64];
	char *argv[32];
	struct rte_ether_addr mac;
	int argc = 0, p;

	seq++;
	for (int q = 0; q < NQ; q++) {
		snprintf(name, sizeof(name), "tw_rx%d_%u_%d", q, seq, (int)getpid());
		rxr[q] = rte_ring_create(name, RING_SZ, SOCKET_ID_ANY, 0);
		snprintf(name, sizeof(name), "tw_tx%d_%u_%d", q, seq, (int)getpid());
		txr[q] = rte_ring_create(name, RING_SZ, SOCKET_ID_ANY, 0);
		ck_assert(rxr[q] != NULL && txr[q] != NULL);
	}
	snprintf(name, sizeof(name), "tw%u_%d", seq, (int)getpid());
	p = rte_eth_from_rings(name, rxr, NQ, txr, NQ, SOCKET_ID_ANY);
	ck_assert_int_ge(p, 0);
	port = (uint16_t)p;
	if (tpool == NULL)
		tpool = rte_pktmbuf_pool_create("tw_link", 4096, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
		                                SOCKET_ID_ANY);
	ck_assert_ptr_nonnull(tpool);

	snprintf(mask, sizeof(mask), "%llx", 1ull << port);
	snprintf(queues, sizeof(queues), "(%u,0,1),(%u,1,2)", port, port);
	argv[argc++] = "--listen";
	argv[argc++] = "10.50.0.2/24";
	argv[argc++] = "--gateway";
	argv[argc++] = "10.50.0.1";
	argv[argc++] = "--portmask";
	argv[argc++] = mask;
	argv[argc++] = "--queues";
	argv[argc++] = queues;
	argv[argc++] = "--mgmt";
	argv[argc++] = "";
	argv[argc++] = "--stats-interval";
	argv[argc++] = "0";
	for (; extra != NULL && *extra != NULL && argc < 30; extra++)
		argv[argc++] = (char *)*extra;
	ck_assert_int_eq(moq_pmd_config_parse(&cfg, argc, argv, (char *[]){NULL}, err, sizeof(err)),
	                 0);
	relay = moq_relay_create(&cfg, err, sizeof(err));
	ck_assert_msg(relay != NULL, "relay: %s", err);
	ck_assert_int_eq(rte_eth_macaddr_get(port, &mac), 0);
	memcpy(relay_mac, mac.addr_bytes, 6);
}

static void drain_ring(struct rte_ring *r)
{
	struct rte_mbuf *m;

	while (r != NULL && rte_ring_dequeue(r, (void **)&m) == 0)
		rte_pktmbuf_free(m);
}

static void teardown(void)
{
	if (relay == NULL && rte_eth_dev_is_valid_port(port))
		rte_eth_dev_close(port); /* the relay did not take it */
	moq_relay_destroy(relay);        /* stops and closes the port */
	relay = NULL;
	for (int q = 0; q < NQ; q++) {
		drain_ring(rxr[q]);
		drain_ring(txr[q]);
		rte_ring_free(rxr[q]);
		rte_ring_free(txr[q]);
		rxr[q] = txr[q] = NULL;
	}
}

/* The frame @len bytes of @f onto RX queue @q (what RSS would pick). */
static void link_put(unsigned int q, const uint8_t *f, size_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(tpool);

	ck_assert_ptr_nonnull(m);
	memcpy(rte_pktmbuf_append(m, (uint16_t)len), f, len);
	ck_assert_int_eq(rte_ring_enqueue(rxr[q], m), 0);
}

/* A QUIC client of the relay, @src:5000 behind MAC @src_mac. */
static int established;

static int on_established(struct moq_quic_conn *c, void *user, const char *alpn)
{
	(void)c;
	(void)user;
	established = strcmp(alpn, "moq-lite-05") == 0 ? 1 : -1;
	return 0;
}

struct client {
	struct moq_quic_endpoint *ep;
	struct moq_quic_addr local, remote;
	struct moq_net_iface ifc; /* builds its frames: source IP, source MAC */
};

static void client_open(struct client *c, const uint8_t src[4], const uint8_t src_mac[6])
{
	static const char *const alpn[] = {"moq-lite-05"};
	static const struct moq_quic_callbacks cb = {.established = on_established};
	struct moq_quic_config qc = {0};
	int err = 0;

	memset(c, 0, sizeof(*c));
	qc.role = MOQ_QUIC_CLIENT;
	qc.alpn = alpn;
	qc.alpn_count = 1;
	qc.cb = &cb;
	c->ep = moq_quic_endpoint_new(&qc, &err);
	ck_assert_msg(c->ep != NULL, "client endpoint: %s", moq_err_str(err));
	c->local.u.in4.sin_family = AF_INET;
	c->local.u.in4.sin_port = htons(5000);
	memcpy(&c->local.u.in4.sin_addr, src, 4);
	c->local.len = sizeof(c->local.u.in4);
	c->remote.u.in4.sin_family = AF_INET;
	c->remote.u.in4.sin_port = htons(4443);
	memcpy(&c->remote.u.in4.sin_addr, relay_ip, 4);
	c->remote.len = sizeof(c->remote.u.in4);
	moq_net_iface_init(&c->ifc, src_mac, src, 24, NULL, 0, 5000);
	established = 0;
	ck_assert_ptr_nonnull(moq_quic_connect(c->ep, &c->local, &c->remote, NULL, now_ns(), &err));
}

/* The client's packets as frames onto RX queue @q. */
static void client_send(struct client *c, unsigned int q)
{
	uint8_t pb[8][1500], f[1600];
	struct moq_quic_pkt pk[8];
	int n;

	for (int i = 0; i < 8; i++) {
		pk[i].data = pb[i];
		pk[i].cap = sizeof(pb[i]);
	}
	n = moq_quic_endpoint_send(c->ep, pk, 8, now_ns());
	for (int i = 0; i < n; i++) {
		int h = moq_net_udp_build(&c->ifc, f, 4, relay_mac, relay_ip, 5000, 4443, 0,
		                          pk[i].data, pk[i].len, 0);

		ck_assert_int_gt(h, 0);
		memcpy(f + h, pk[i].data, pk[i].len);
		link_put(q, f, (size_t)h + pk[i].len);
	}
	moq_quic_endpoint_timers(c->ep, now_ns());
}

/* What the workers sent: per TX queue, UDP datagrams to @c (checked to go
 * to MAC @next_hop), and ARP requests for the gateway (answered on RX queue
 * 0, as RSS delivers a frame without an IP header). */
struct seen {
	unsigned int udp[NQ], arp_gw[NQ];
};

static void link_take(struct client *c, const uint8_t next_hop[6], struct seen *s)
{
	for (unsigned int q = 0; q < NQ; q++) {
		struct rte_mbuf *m;

		while (rte_ring_dequeue(txr[q], (void **)&m) == 0) {
			uint8_t buf[2048];
			const uint8_t *f = rte_pktmbuf_read(m, 0, rte_pktmbuf_pkt_len(m), buf);
			size_t len = rte_pktmbuf_pkt_len(m);

			if (len >= 42 && f[12] == 0x08 && f[13] == 0x06 && f[14 + 7] == 1 &&
			    memcmp(f + 14 + 24, gw_ip, 4) == 0) {
				struct moq_net_iface gw;
				uint8_t rep[64];
				int rl;

				s->arp_gw[q]++;
				moq_net_iface_init(&gw, gw_mac, gw_ip, 24, NULL, 0, 0);
				rl = moq_net_arp_build(&gw, rep, sizeof(rep), 2, relay_mac,
				                       relay_ip);
				ck_assert_int_eq(rl, 42);
				link_put(0, rep, (size_t)rl);
			} else if (len > 42 && f[12] == 0x08 && f[13] == 0x00 && f[14 + 9] == 17 &&
			           memcmp(f + 14 + 16, &c->local.u.in4.sin_addr, 4) == 0) {
				ck_assert_int_eq(memcmp(f, next_hop, 6), 0);
				s->udp[q]++;
				moq_quic_endpoint_recv(c->ep, f + 42, len - 42, &c->local,
				                       &c->remote, now_ns());
			}
			rte_pktmbuf_free(m);
		}
	}
}

/* Defect 5: two workers, --gateway, a client outside the subnet. Its
 * connection lands on worker 1 (RSS puts its flow on queue 1); worker 1
 * asks for the gateway's MAC, and the reply, an ARP frame, arrives on queue
 * 0, at worker 0. The handshake completes only if what worker 0 learned
 * reaches worker 1. */
START_TEST(gateway_learned_by_any_worker)
{
	struct moq_relay_stats st;
	struct client c;
	struct seen s = {0};
	uint64_t end;

	relay_up(NULL);
	client_open(&c, far_ip, gw_mac); /* off-link: its frames come via the gateway */
	for (end = now_ns() + 5000000000ull; established == 0 && now_ns() < end;) {
		client_send(&c, 1);
		moq_relay_poll(relay, 0);
		moq_relay_poll(relay, 1);
		link_take(&c, gw_mac, &s);
		usleep(1000);
	}
	for (int i = 0; i < 200; i++) { /* the workers publish counters at 10 Hz */
		moq_relay_poll(relay, 0);
		moq_relay_poll(relay, 1);
		usleep(1000);
	}
	moq_relay_stats(relay, &st);
	fprintf(stderr,
	        "gateway_learned_by_any_worker: ARP requests for the gateway from worker 0: %u, "
	        "worker 1: %u; datagrams to the client from worker 0: %u, worker 1: %u; tx drops "
	        "%" PRIu64 "\n",
	        s.arp_gw[0], s.arp_gw[1], s.udp[0], s.udp[1], st.tx_drops);
	ck_assert_msg(s.arp_gw[1] >= 1, "worker 1 never asked for the gateway");
	ck_assert_msg(established == 1, "no handshake: worker 1 never learned the gateway's MAC");
	ck_assert_uint_eq(st.worker[1].conns_total, 1);
	ck_assert_uint_eq(st.worker[0].conns_total, 0);
	ck_assert_uint_gt(s.udp[1], 0);
	ck_assert_uint_eq(s.udp[0], 0);
	/* worker 1 did not have to ask again and again */
	ck_assert_uint_le(s.arp_gw[1], 2);
	moq_quic_endpoint_free(c.ep);
}
END_TEST

/* Defect 8: with fewer free mbufs than a burst of 32, a worker still sends
 * (rte_pktmbuf_alloc_bulk is all or nothing: it sent nothing). */
START_TEST(send_near_pool_exhaustion)
{
	static struct rte_mbuf *held[65536];
	struct rte_mempool *pool;
	struct moq_relay_stats st;
	struct client c;
	struct seen s = {0};
	unsigned int nheld = 0, sent_before;
	uint64_t end;

	relay_up(NULL);
	pool = moq_relay_pool(relay, 0);
	client_open(&c, onlink_ip, cli_mac);
	/* take every mbuf of the relay's pool, then give 8 back */
	while (nheld < 65536 && (held[nheld] = rte_pktmbuf_alloc(pool)) != NULL)
		nheld++;
	ck_assert_uint_gt(nheld, 8);
	ck_assert_uint_lt(nheld, 65536);
	rte_pktmbuf_free_bulk(&held[nheld - 8], 8);
	nheld -= 8;
	client_send(&c, 1); /* the client's Initial: the relay has a flight to send */
	for (int i = 0; i < 20; i++) {
		moq_relay_poll(relay, 1);
		link_take(&c, cli_mac, &s);
		usleep(1000);
	}
	sent_before = s.udp[1];
	/* everything back: the handshake completes */
	rte_pktmbuf_free_bulk(held, nheld);
	for (end = now_ns() + 5000000000ull; established == 0 && now_ns() < end;) {
		client_send(&c, 1);
		moq_relay_poll(relay, 1);
		link_take(&c, cli_mac, &s);
		usleep(1000);
	}
	moq_relay_stats(relay, &st);
	fprintf(stderr,
	        "send_near_pool_exhaustion: %u mbufs taken, 8 left: %u datagrams sent (tx drops "
	        "%" PRIu64 ")\n",
	        nheld + 8, sent_before, st.tx_drops);
	ck_assert_msg(sent_before > 0, "nothing sent with 8 mbufs free");
	ck_assert_int_eq(established, 1);
	moq_quic_endpoint_free(c.ep);
}
END_TEST

/* Defect 8: the pool holds what the redirect rings can hold besides the
 * descriptors: two workers x 8192 slots. */
START_TEST(pool_counts_redirect_rings)
{
	static const char *const extra[] = {"--redirect-ring", "8192", "--rx-desc", "512",
	                                    "--tx-desc",       "512",  NULL};
	struct moq_relay_stats st;

	relay_up(extra);
	moq_relay_stats(relay, &st);
	fprintf(stderr, "pool_counts_redirect_rings: %" PRIu64 " mbufs in the pool\n",
	        st.mbufs_total);
	/* 2 x 8191 in the rings + 2 x 512 RX + 2 x 512 TX descriptors */
	ck_assert_uint_ge(st.mbufs_total, 2 * 8191 + 2 * 512 + 2 * 512);
}
END_TEST

Suite *dpdk_workers_suite(void);

Suite *dpdk_workers_suite(void)
{
	Suite *s = suite_create("dpdk_workers");
	TCase *tc = tcase_create("ring");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, gateway_learned_by_any_worker);
	tcase_add_test(tc, send_near_pool_exhaustion);
	tcase_add_test(tc, pool_counts_redirect_rings);
	suite_add_tcase(s, tc);
	return s;
}
