/* SPDX-License-Identifier: MIT */
/*
 * test_net_mbuf.c: the network stack's mbuf layer under EAL: single and
 * multi-segment frames, hardware checksum flags, replies in new mbufs, UDP
 * encapsulation with and without offloads, and no mbuf left behind.
 */
#include <check.h>
#include <string.h>

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "moq_err.h"
#include "net.h"
#include "test_net_frames.h"

#define T0 (10 * 1000000000ull)

static struct rte_mempool *pool;
static struct moq_net_iface ifc;
static struct moq_net net;
static uint8_t frame[MOQ_NET_FRAME_MAX];

static void setup(void)
{
	if (pool == NULL)
		pool = rte_pktmbuf_pool_create("t_net", 255, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
	ck_assert_ptr_nonnull(pool);
	tf_iface(&ifc);
	moq_net_init(&net, &ifc);
}

static struct rte_mbuf *one_seg(const uint8_t *data, size_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);

	ck_assert_ptr_nonnull(m);
	memcpy(rte_pktmbuf_append(m, (uint16_t)len), data, len);
	return m;
}

/* @len bytes split into segments of at most @seg bytes. */
static struct rte_mbuf *chain(const uint8_t *data, size_t len, size_t seg)
{
	struct rte_mbuf *head = NULL;

	for (size_t off = 0; off < len; off += seg) {
		size_t n = len - off < seg ? len - off : seg;
		struct rte_mbuf *m = one_seg(data + off, n);

		if (head == NULL)
			head = m;
		else
			ck_assert_int_eq(rte_pktmbuf_chain(head, m), 0);
	}
	return head;
}

START_TEST(single_segment_udp)
{
	struct moq_net_udp u;
	struct rte_mbuf *m, *r;
	unsigned int idle = rte_mempool_in_use_count(pool);
	size_t len = tf_udp4(frame, (const uint8_t *)"hello", 5);

	m = one_seg(frame, len);
	ck_assert_int_eq(moq_net_rx_mbuf(&net, m, T0, &u, pool, &r), MOQ_NET_UDP);
	ck_assert_ptr_null(r);
	ck_assert_ptr_eq(u.payload, rte_pktmbuf_mtod(m, uint8_t *) + 42);
	ck_assert_uint_eq(u.len, 5);
	rte_pktmbuf_free(m);
	ck_assert_uint_eq(rte_mempool_in_use_count(pool), idle);
}
END_TEST

START_TEST(multi_segment_jumbo)
{
	static uint8_t pl[8000];
	struct moq_net_udp u;
	struct rte_mbuf *m, *r;
	size_t len;

	for (size_t i = 0; i < sizeof(pl); i++)
		pl[i] = (uint8_t)(i * 31);
	len = _i == 0 ? tf_udp4(frame, pl, sizeof(pl)) : tf_udp6(frame, pl, sizeof(pl));
	m = chain(frame, len, 1000 + 17 * (size_t)_i); /* odd split points */
	ck_assert_uint_gt(m->nb_segs, 1);
	ck_assert_int_eq(moq_net_rx_mbuf(&net, m, T0, &u, pool, &r), MOQ_NET_UDP);
	ck_assert_uint_eq(u.len, sizeof(pl));
	ck_assert_int_eq(memcmp(u.payload, pl, sizeof(pl)), 0);
	ck_assert_uint_eq(net.stats.rx_scattered, 1);
	/* a corrupted byte in a middle segment is caught by the UDP checksum */
	rte_pktmbuf_mtod(m->next->next, uint8_t *)[5] ^= 1;
	ck_assert_int_eq(moq_net_rx_mbuf(&net, m, T0, &u, pool, &r), MOQ_NET_DROPPED);
	ck_assert_uint_eq(net.stats.drop[MOQ_NET_DROP_UDP_CSUM], 1);
	rte_pktmbuf_free(m);
}
END_TEST

START_TEST(hardware_flags)
{
	struct moq_net_udp u;
	struct rte_mbuf *m, *r;
	size_t len = tf_udp4(frame, (const uint8_t *)"abcdef", 6);

	frame[44] ^= 0xff; /* payload corrupted, checksum stale */
	m = one_seg(frame, len);
	ck_assert_int_eq(moq_net_rx_mbuf(&net, m, T0, &u, pool, &r), MOQ_NET_DROPPED);
	m->ol_flags = RTE_MBUF_F_RX_L4_CKSUM_GOOD | RTE_MBUF_F_RX_IP_CKSUM_GOOD;
	ck_assert_int_eq(moq_net_rx_mbuf(&net, m, T0, &u, pool, &r), MOQ_NET_UDP);
	/* _NONE: checksum in the packet not final, data verified (virtio) */
	m->ol_flags = RTE_MBUF_F_RX_L4_CKSUM_NONE;
	ck_assert_int_eq(moq_net_rx_mbuf(&net, m, T0, &u, pool, &r), MOQ_NET_UDP);
	m->ol_flags = RTE_MBUF_F_RX_L4_CKSUM_BAD;
	ck_assert_int_eq(moq_net_rx_mbuf(&net, m, T0, &u, pool, &r), MOQ_NET_DROPPED);
	m->ol_flags = RTE_MBUF_F_RX_IP_CKSUM_BAD | RTE_MBUF_F_RX_L4_CKSUM_GOOD;
	ck_assert_int_eq(moq_net_rx_mbuf(&net, m, T0, &u, pool, &r), MOQ_NET_DROPPED);
	ck_assert_uint_eq(net.stats.drop[MOQ_NET_DROP_UDP_CSUM], 2);
	ck_assert_uint_eq(net.stats.drop[MOQ_NET_DROP_IP4_CSUM], 1);
	rte_pktmbuf_free(m);
}
END_TEST

START_TEST(reply_in_new_mbuf)
{
	struct moq_net_udp u;
	struct rte_mbuf *m, *r, *hold[256];
	unsigned int idle = rte_mempool_in_use_count(pool), held;
	size_t len = tf_echo4(frame, 100);

	m = one_seg(frame, len);
	ck_assert_int_eq(moq_net_rx_mbuf(&net, m, T0, &u, pool, &r), MOQ_NET_REPLY);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(rte_pktmbuf_pkt_len(r), len);
	ck_assert_uint_eq(rte_pktmbuf_mtod(r, uint8_t *)[34], 0); /* echo reply */
	rte_pktmbuf_free(r);
	/* no mbuf for the reply: dropped and counted, nothing leaks */
	for (held = 0; held < 256; held++) {
		hold[held] = rte_pktmbuf_alloc(pool);
		if (hold[held] == NULL)
			break;
	}
	ck_assert_int_eq(moq_net_rx_mbuf(&net, m, T0, &u, pool, &r), MOQ_NET_DROPPED);
	ck_assert_ptr_null(r);
	ck_assert_uint_eq(net.stats.drop[MOQ_NET_DROP_NO_ROOM], 1);
	ck_assert_uint_eq(net.stats.tx_replies, 1);
	for (unsigned int i = 0; i < held; i++)
		rte_pktmbuf_free(hold[i]);
	rte_pktmbuf_free(m);
	ck_assert_uint_eq(rte_mempool_in_use_count(pool), idle);
}
END_TEST

START_TEST(encap_resolve_then_send)
{
	struct rte_mbuf *m, *sol;
	struct moq_net_iface peer;
	struct moq_net pn;
	struct moq_net_udp u;
	uint8_t rbuf[256];
	size_t rlen;
	int off = _i; /* 0: software checksums, 1: offloads */

	ifc.tx_offloads = off ? MOQ_NET_TX_IP_CSUM | MOQ_NET_TX_UDP_CSUM : 0;
	m = one_seg((const uint8_t *)"quic bytes", 10);
	/* next hop unknown: an ARP request comes back, the payload is kept */
	ck_assert_int_eq(
	        moq_net_udp_encap_mbuf(&net, m, 4, tf_peer_ip4, 4443, 50000, 0, T0, pool, &sol),
	        MOQ_ERR_AGAIN);
	ck_assert_ptr_nonnull(sol);
	ck_assert_uint_eq(rte_pktmbuf_pkt_len(sol), 42);
	ck_assert_uint_eq(rte_pktmbuf_pkt_len(m), 10);
	rte_pktmbuf_free(sol);
	moq_net_neigh_learn(&net, 4, tf_peer_ip4, tf_peer_mac, T0);
	ck_assert_int_eq(
	        moq_net_udp_encap_mbuf(&net, m, 4, tf_peer_ip4, 4443, 50000, 0, T0, pool, &sol), 0);
	ck_assert_ptr_null(sol);
	ck_assert_uint_eq(rte_pktmbuf_pkt_len(m), 52);
	ck_assert_uint_eq(m->l2_len, 14);
	ck_assert_uint_eq(m->l3_len, 20);
	ck_assert(m->ol_flags & RTE_MBUF_F_TX_IPV4);
	if (off) {
		ck_assert(m->ol_flags & RTE_MBUF_F_TX_IP_CKSUM);
		ck_assert(m->ol_flags & RTE_MBUF_F_TX_UDP_CKSUM);
	} else {
		ck_assert(!(m->ol_flags & (RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM)));
		/* software checksums: the peer verifies them */
		moq_net_iface_init(&peer, tf_peer_mac, tf_peer_ip4, 24, NULL, 0, 50000);
		moq_net_init(&pn, &peer);
		ck_assert_int_eq(moq_net_rx(&pn, rte_pktmbuf_mtod(m, uint8_t *), 52, 0, T0, &u,
		                            rbuf, sizeof(rbuf), &rlen),
		                 MOQ_NET_UDP);
		ck_assert_int_eq(memcmp(u.payload, "quic bytes", 10), 0);
	}
	rte_pktmbuf_free(m);
}
END_TEST

Suite *net_mbuf_suite(void);

Suite *net_mbuf_suite(void)
{
	Suite *s = suite_create("net_mbuf");
	TCase *tc = tcase_create("mbuf");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, single_segment_udp);
	tcase_add_loop_test(tc, multi_segment_jumbo, 0, 2);
	tcase_add_test(tc, hardware_flags);
	tcase_add_test(tc, reply_in_new_mbuf);
	tcase_add_loop_test(tc, encap_resolve_then_send, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
