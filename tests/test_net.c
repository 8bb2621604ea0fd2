/* SPDX-License-Identifier: MIT */
/*
 * test_net.c: the network stack on byte buffers (no EAL): every parser and
 * builder, and every malformed case is dropped and counted under its reason.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "moq_err.h"
#include "net.h"
#include "test_net_frames.h"

#define TS_PER_S 1000000000ull
#define T0       (10 * TS_PER_S)

static struct moq_net_iface ifc;
static struct moq_net net;
static uint8_t frame[MOQ_NET_FRAME_MAX], reply[2048];
static size_t rlen;
static struct moq_net_udp u;

static void setup(void)
{
	tf_iface(&ifc);
	moq_net_init(&net, &ifc);
	memset(&u, 0, sizeof(u));
}

static enum moq_net_verdict rx(size_t len, uint32_t hints)
{
	return moq_net_rx(&net, frame, len, hints, T0, &u, reply, sizeof(reply), &rlen);
}

/* Run @len bytes of frame; expect a drop counted under @why and nothing else. */
static void expect_drop(size_t len, uint32_t hints, enum moq_net_drop why)
{
	struct moq_net_stats before = net.stats;

	ck_assert_int_eq(rx(len, hints), MOQ_NET_DROPPED);
	ck_assert_msg(net.stats.drop[why] == before.drop[why] + 1, "expected drop %s",
	              moq_net_drop_name((int)why));
	ck_assert_uint_eq(net.stats.rx_udp, before.rx_udp);
	ck_assert_uint_eq(net.stats.tx_replies, before.tx_replies);
	ck_assert_uint_eq(rlen, 0);
}

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void w16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

START_TEST(checksum_golden)
{
	/* the IPv4 header of Wikipedia's "Internet checksum" example: b861 */
	uint8_t h[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
	                 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};

	ck_assert_uint_eq(moq_net_cksum(h, 20, 0), 0xb861);
	w16(h + 10, 0xb861);
	ck_assert_uint_eq(moq_net_cksum(h, 20, 0), 0);
	/* odd length: the last byte is the high half of a word (RFC 1071) */
	ck_assert_uint_eq(moq_net_cksum((const uint8_t[]){0x01}, 1, 0), (uint16_t)~0x0100);
}
END_TEST

START_TEST(link_local_from_mac)
{
	/* RFC 4291 appendix A: 02:00:00:00:00:01 -> fe80::ff:fe00:1 */
	static const uint8_t want[16] = {0xfe, 0x80, [8] = 0x00, 0x00, 0x00,
	                                 0xff, 0xfe, 0x00,       0x00, 0x01};

	ck_assert_int_eq(memcmp(ifc.ip6_ll, want, 16), 0);
}
END_TEST

START_TEST(udp4_in)
{
	const uint8_t pl[] = "two coalesced QUIC packets, one datagram";
	size_t len = tf_udp4(frame, pl, sizeof(pl));

	ck_assert_int_eq(rx(len, 0), MOQ_NET_UDP);
	ck_assert_uint_eq(u.family, 4);
	ck_assert_uint_eq(u.sport, 50000);
	ck_assert_uint_eq(u.dport, 4443);
	ck_assert_uint_eq(u.len, sizeof(pl));
	ck_assert_int_eq(memcmp(u.payload, pl, sizeof(pl)), 0);
	ck_assert_ptr_eq(u.payload, frame + 42);
	ck_assert_int_eq(memcmp(u.src, tf_peer_ip4, 4), 0);
	ck_assert_int_eq(memcmp(u.dst, tf_our_ip4, 4), 0);
	ck_assert_int_eq(memcmp(u.src_mac, tf_peer_mac, 6), 0);
	ck_assert_uint_eq(net.stats.rx_udp, 1);
	ck_assert_uint_eq(net.stats.rx_udp_bytes, sizeof(pl));
	/* the sender was learned: replies need no ARP */
	{
		uint8_t mac[6], req[96];
		size_t req_len;

		ck_assert_int_eq(
		        moq_net_resolve(&net, 4, tf_peer_ip4, T0, mac, req, sizeof(req), &req_len),
		        0);
		ck_assert_int_eq(memcmp(mac, tf_peer_mac, 6), 0);
		ck_assert_uint_eq(req_len, 0);
	}
}
END_TEST

START_TEST(udp4_padding_and_ecn)
{
	size_t len = tf_udp4(frame, (const uint8_t *)"hi", 2);

	/* a 44-byte frame is padded to the Ethernet minimum of 60: accepted */
	memset(frame + len, 0xee, 60 - len);
	frame[15] = 0x02; /* ECT(0) */
	tf_fix_ip4(frame);
	ck_assert_int_eq(rx(60, 0), MOQ_NET_UDP);
	ck_assert_uint_eq(u.len, 2);
	ck_assert_uint_eq(u.ecn, 2);
}
END_TEST

START_TEST(udp6_in)
{
	const uint8_t pl[100] = {1, 2, 3};
	size_t len = tf_udp6(frame, pl, sizeof(pl));

	ck_assert_int_eq(rx(len, 0), MOQ_NET_UDP);
	ck_assert_uint_eq(u.family, 6);
	ck_assert_uint_eq(u.len, 100);
	ck_assert_int_eq(memcmp(u.src, tf_peer_ip6, 16), 0);
	ck_assert_int_eq(memcmp(u.dst, tf_our_ip6, 16), 0);
	ck_assert_int_eq(memcmp(u.payload, pl, 100), 0);
}
END_TEST

START_TEST(udp_build_roundtrip)
{
	uint8_t pl[300];
	int fam = _i == 0 ? 4 : 6;
	const uint8_t *dst = fam == 4 ? tf_peer_ip4 : tf_peer_ip6;
	struct moq_net_iface peer;
	struct moq_net pn;
	int hl;

	for (size_t i = 0; i < sizeof(pl); i++)
		pl[i] = (uint8_t)(i ^ 0x5a);
	hl = moq_net_udp_build(&ifc, frame, fam, tf_peer_mac, dst, 4443, 50001, 1, pl, sizeof(pl),
	                       0);
	ck_assert_int_eq(hl, fam == 4 ? MOQ_NET_UDP4_HDRS : MOQ_NET_UDP6_HDRS);
	memcpy(frame + hl, pl, sizeof(pl));
	/* the peer's stack (its own iface) parses what ours built */
	moq_net_iface_init(&peer, tf_peer_mac, tf_peer_ip4, 24, tf_peer_ip6, 64, 50001);
	moq_net_init(&pn, &peer);
	ck_assert_int_eq(moq_net_rx(&pn, frame, (size_t)hl + sizeof(pl), 0, T0, &u, reply,
	                            sizeof(reply), &rlen),
	                 MOQ_NET_UDP);
	ck_assert_uint_eq(u.family, fam);
	ck_assert_uint_eq(u.sport, 4443);
	ck_assert_uint_eq(u.dport, 50001);
	ck_assert_uint_eq(u.ecn, 1);
	ck_assert_uint_eq(u.len, sizeof(pl));
	ck_assert_int_eq(memcmp(u.payload, pl, sizeof(pl)), 0);
	ck_assert_int_eq(memcmp(frame + 6, tf_our_mac, 6), 0);
	if (fam == 4) {
		ck_assert_uint_eq(frame[14 + 8], 64);            /* TTL */
		ck_assert_uint_eq(rd16(frame + 14 + 6), 0x4000); /* DF */
	}
}
END_TEST

START_TEST(udp_build_offload)
{
	uint8_t pl[64] = {0};
	uint32_t ph;
	int hl = moq_net_udp_build(&ifc, frame, 4, tf_peer_mac, tf_peer_ip4, 4443, 50001, 0, pl,
	                           sizeof(pl), MOQ_NET_TX_IP_CSUM | MOQ_NET_TX_UDP_CSUM);

	ck_assert_int_eq(hl, 42);
	ck_assert_uint_eq(rd16(frame + 24), 0); /* IPv4 header checksum left to the NIC */
	/* UDP: the folded pseudo-header sum, as rte_ipv4_phdr_cksum gives */
	ph = (10 << 8 | 0) + (0 << 8 | 2) + (10 << 8 | 0) + (0 << 8 | 9) + 17 + 72;
	ck_assert_uint_eq(rd16(frame + 40), (uint16_t)ph);
	/* bad arguments */
	ck_assert_int_eq(
	        moq_net_udp_build(&ifc, frame, 5, tf_peer_mac, tf_peer_ip4, 1, 2, 0, pl, 1, 0),
	        MOQ_ERR_INVAL);
	ck_assert_int_eq(
	        moq_net_udp_build(&ifc, frame, 4, tf_peer_mac, tf_peer_ip4, 1, 2, 0, pl, 70000, 0),
	        MOQ_ERR_TOO_LARGE);
	ifc.has_ip4 = 0;
	ck_assert_int_eq(
	        moq_net_udp_build(&ifc, frame, 4, tf_peer_mac, tf_peer_ip4, 1, 2, 0, pl, 1, 0),
	        MOQ_ERR_INVAL);
}
END_TEST

START_TEST(arp_request_answered)
{
	size_t len = tf_arp_req(frame, tf_our_ip4);
	const uint8_t *a = reply + 14;

	ck_assert_int_eq(rx(len, 0), MOQ_NET_REPLY);
	ck_assert_uint_eq(rlen, 42);
	ck_assert_int_eq(memcmp(reply, tf_peer_mac, 6), 0);
	ck_assert_int_eq(memcmp(reply + 6, tf_our_mac, 6), 0);
	ck_assert_uint_eq(rd16(reply + 12), 0x0806);
	ck_assert_uint_eq(rd16(a + 6), 2);
	ck_assert_int_eq(memcmp(a + 8, tf_our_mac, 6), 0);
	ck_assert_int_eq(memcmp(a + 14, tf_our_ip4, 4), 0);
	ck_assert_int_eq(memcmp(a + 18, tf_peer_mac, 6), 0);
	ck_assert_int_eq(memcmp(a + 24, tf_peer_ip4, 4), 0);
	ck_assert_uint_eq(net.stats.neigh_learned, 1);
	ck_assert_uint_eq(net.stats.tx_replies, 1);
}
END_TEST

START_TEST(arp_reply_learned_and_others)
{
	static const uint8_t other[4] = {10, 0, 0, 77};
	uint8_t mac[6], req[96];
	size_t len, req_len;

	/* unresolved: an ARP request is produced, once per second */
	ck_assert_int_eq(moq_net_resolve(&net, 4, tf_peer_ip4, T0, mac, req, sizeof(req), &req_len),
	                 MOQ_ERR_AGAIN);
	ck_assert_uint_eq(req_len, 42);
	ck_assert_int_eq(memcmp(req, "\xff\xff\xff\xff\xff\xff", 6), 0);
	ck_assert_uint_eq(rd16(req + 14 + 6), 1);
	ck_assert_int_eq(memcmp(req + 14 + 24, tf_peer_ip4, 4), 0);
	ck_assert_int_eq(
	        moq_net_resolve(&net, 4, tf_peer_ip4, T0 + 1000, mac, req, sizeof(req), &req_len),
	        MOQ_ERR_AGAIN);
	ck_assert_uint_eq(req_len, 0);
	ck_assert_int_eq(moq_net_resolve(&net, 4, tf_peer_ip4, T0 + TS_PER_S, mac, req, sizeof(req),
	                                 &req_len),
	                 MOQ_ERR_AGAIN);
	ck_assert_uint_eq(req_len, 42);
	ck_assert_uint_eq(net.stats.tx_solicits, 2);

	/* the peer's reply resolves it */
	len = tf_arp_req(frame, tf_our_ip4);
	memcpy(frame, tf_our_mac, 6);
	w16(frame + 14 + 6, 2);
	memcpy(frame + 14 + 18, tf_our_mac, 6);
	ck_assert_int_eq(rx(len, 0), MOQ_NET_DONE);
	ck_assert_int_eq(moq_net_resolve(&net, 4, tf_peer_ip4, T0 + TS_PER_S, mac, req, sizeof(req),
	                                 &req_len),
	                 0);
	ck_assert_int_eq(memcmp(mac, tf_peer_mac, 6), 0);

	/* a request for another host: counted, not answered */
	len = tf_arp_req(frame, other);
	expect_drop(len, 0, MOQ_NET_DROP_ARP_OTHER);
}
END_TEST

START_TEST(arp_malformed)
{
	size_t len = tf_arp_req(frame, tf_our_ip4);

	expect_drop(len - 1, 0, MOQ_NET_DROP_ARP_SHORT);
	expect_drop(20, 0, MOQ_NET_DROP_ARP_SHORT);
	frame[14 + 4] = 8; /* hardware address length */
	expect_drop(len, 0, MOQ_NET_DROP_ARP_FORMAT);
	tf_arp_req(frame, tf_our_ip4);
	w16(frame + 14 + 2, 0x86dd); /* protocol type */
	expect_drop(len, 0, MOQ_NET_DROP_ARP_FORMAT);
	tf_arp_req(frame, tf_our_ip4);
	w16(frame + 14 + 6, 3); /* RARP */
	expect_drop(len, 0, MOQ_NET_DROP_ARP_OP);
}
END_TEST

START_TEST(gratuitous_arp_and_na)
{
	uint8_t out[128];
	int n = moq_net_arp_build(&ifc, out, sizeof(out), 1, NULL, ifc.ip4);

	/* RFC 5227, 3: an ARP announcement: sender and target are our address */
	ck_assert_int_eq(n, 42);
	ck_assert_int_eq(memcmp(out + 14 + 14, tf_our_ip4, 4), 0);
	ck_assert_int_eq(memcmp(out + 14 + 24, tf_our_ip4, 4), 0);
	ck_assert_int_eq(moq_net_arp_build(&ifc, out, 41, 1, NULL, ifc.ip4), MOQ_ERR_INVAL);

	n = moq_net_na_build(&ifc, out, sizeof(out));
	ck_assert_int_eq(n, 86);
	ck_assert_uint_eq(out[14 + 40], 136);
	ck_assert_uint_eq(out[14 + 7], 255);
	ck_assert_uint_eq(out[14 + 40 + 4], 0x20); /* Override, not Solicited */
	/* its ICMPv6 checksum verifies: a peer stack takes it */
	{
		struct moq_net_iface peer;
		struct moq_net pn;

		moq_net_iface_init(&peer, tf_peer_mac, tf_peer_ip4, 24, tf_peer_ip6, 64, 1);
		moq_net_init(&pn, &peer);
		ck_assert_int_eq(
		        moq_net_rx(&pn, out, (size_t)n, 0, T0, &u, reply, sizeof(reply), &rlen),
		        MOQ_NET_DONE);
		ck_assert_uint_eq(pn.stats.rx_nd, 1);
		/* RFC 4861, 7.2.5: no entry for us yet, so none is made; a
		 * peer that knows us updates its entry */
		ck_assert_uint_eq(pn.stats.neigh_learned, 0);
		moq_net_neigh_learn(&pn, 6, tf_our_ip6, tf_peer_mac, T0);
		ck_assert_int_eq(
		        moq_net_rx(&pn, out, (size_t)n, 0, T0, &u, reply, sizeof(reply), &rlen),
		        MOQ_NET_DONE);
		{
			uint8_t m[6], rq[128];
			size_t rql;

			ck_assert_int_eq(
			        moq_net_resolve(&pn, 6, tf_our_ip6, T0, m, rq, sizeof(rq), &rql),
			        0);
			ck_assert_int_eq(memcmp(m, tf_our_mac, 6), 0);
		}
	}
}
END_TEST

START_TEST(icmp_echo)
{
	size_t len = tf_echo4(frame, 56);
	const uint8_t *ic = reply + 34;

	ck_assert_int_eq(rx(len, 0), MOQ_NET_REPLY);
	ck_assert_uint_eq(rlen, len);
	ck_assert_int_eq(memcmp(reply, tf_peer_mac, 6), 0);
	ck_assert_int_eq(memcmp(reply + 14 + 12, tf_our_ip4, 4), 0);
	ck_assert_int_eq(memcmp(reply + 14 + 16, tf_peer_ip4, 4), 0);
	ck_assert_uint_eq(moq_net_cksum(reply + 14, 20, 0), 0);
	ck_assert_uint_eq(ic[0], 0);
	ck_assert_uint_eq(rd16(ic + 4), 0x1234);
	ck_assert_uint_eq(rd16(ic + 6), 7);
	ck_assert_int_eq(memcmp(ic + 8, frame + 42, 56), 0);
	ck_assert_uint_eq(moq_net_cksum(ic, 64, 0), 0);
	ck_assert_uint_eq(net.stats.rx_echo, 1);

	/* too big for the reply buffer: counted */
	ck_assert_int_eq(moq_net_rx(&net, frame, len, 0, T0, &u, reply, 60, &rlen),
	                 MOQ_NET_DROPPED);
	ck_assert_uint_eq(net.stats.drop[MOQ_NET_DROP_NO_ROOM], 1);
}
END_TEST

START_TEST(icmp_malformed)
{
	size_t len = tf_echo4(frame, 16);

	frame[42] ^= 1; /* data changed: checksum wrong */
	expect_drop(len, 0, MOQ_NET_DROP_ICMP_CSUM);
	len = tf_echo4(frame, 16);
	frame[34] = 13; /* timestamp request */
	w16(frame + 36, 0);
	w16(frame + 36, moq_net_cksum(frame + 34, 24, 0));
	expect_drop(len, 0, MOQ_NET_DROP_ICMP_TYPE);
	/* an ICMP message of 4 bytes */
	len = tf_echo4(frame, 0);
	w16(frame + 16, 24);
	tf_fix_ip4(frame);
	expect_drop(38, 0, MOQ_NET_DROP_ICMP_SHORT);
}
END_TEST

START_TEST(icmp6_echo)
{
	/* build an ICMPv6 echo request from the UDP6 frame's IPv6 header */
	uint8_t *ip = frame + 14, *ic = ip + 40;
	size_t len = tf_udp6(frame, (const uint8_t *)"12345678", 8);
	uint32_t s = 0;

	ip[6] = 58;
	w16(ip + 4, 16);
	memset(ic, 0, 16);
	ic[0] = 128;
	w16(ic + 4, 0x77);
	memcpy(ic + 8, "pingpong", 8);
	for (int i = 0; i < 32; i += 2)
		s += rd16(ip + 8 + i);
	s += 58 + 16;
	w16(ic + 2, moq_net_cksum(ic, 16, s));
	len = 14 + 40 + 16;
	ck_assert_int_eq(rx(len, 0), MOQ_NET_REPLY);
	ck_assert_uint_eq(rlen, len);
	ck_assert_uint_eq(reply[14 + 40], 129);
	ck_assert_int_eq(memcmp(reply + 14 + 8, tf_our_ip6, 16), 0);
	ck_assert_int_eq(memcmp(reply + 14 + 24, tf_peer_ip6, 16), 0);
	ck_assert_int_eq(memcmp(reply + 14 + 48, "pingpong", 8), 0);
	s = 0;
	for (int i = 0; i < 32; i += 2)
		s += rd16(reply + 14 + 8 + i);
	ck_assert_uint_eq(moq_net_cksum(reply + 54, 16, s + 58 + 16), 0);
}
END_TEST

START_TEST(nd_solicit_answered)
{
	size_t len = tf_ns(frame, tf_our_ip6);
	const uint8_t *ic = reply + 54;
	uint8_t mac[6], req[128];
	size_t req_len;

	ck_assert_int_eq(rx(len, 0), MOQ_NET_REPLY);
	ck_assert_uint_eq(rlen, 86);
	ck_assert_int_eq(memcmp(reply, tf_peer_mac, 6), 0);
	ck_assert_uint_eq(ic[0], 136);
	ck_assert_uint_eq(ic[4], 0x60); /* Solicited + Override */
	ck_assert_int_eq(memcmp(ic + 8, tf_our_ip6, 16), 0);
	ck_assert_uint_eq(ic[24], 2); /* target link-layer address */
	ck_assert_int_eq(memcmp(ic + 26, tf_our_mac, 6), 0);
	ck_assert_int_eq(memcmp(reply + 14 + 24, tf_peer_ip6, 16), 0);
	/* the solicitor's source link-layer option was learned */
	ck_assert_int_eq(moq_net_resolve(&net, 6, tf_peer_ip6, T0, mac, req, sizeof(req), &req_len),
	                 0);
	ck_assert_int_eq(memcmp(mac, tf_peer_mac, 6), 0);
	/* and the link-local address is answered too */
	len = tf_ns(frame, ifc.ip6_ll);
	ck_assert_int_eq(rx(len, 0), MOQ_NET_REPLY);
}
END_TEST

START_TEST(nd_resolve_and_malformed)
{
	static const uint8_t other[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x55};
	uint8_t mac[6], req[128];
	size_t req_len, len;

	ck_assert_int_eq(moq_net_resolve(&net, 6, tf_peer_ip6, T0, mac, req, sizeof(req), &req_len),
	                 MOQ_ERR_AGAIN);
	ck_assert_uint_eq(req_len, 86);
	/* to the solicited-node group ff02::1:ff00:9 and its 33:33 MAC */
	ck_assert_int_eq(memcmp(req, "\x33\x33\xff\x00\x00\x09", 6), 0);
	ck_assert_uint_eq(req[14 + 24], 0xff);
	ck_assert_uint_eq(req[14 + 40], 135);

	len = tf_ns(frame, tf_our_ip6);
	frame[14 + 7] = 64; /* hop limit must be 255 */
	expect_drop(len, 0, MOQ_NET_DROP_ND_FORMAT);
	len = tf_ns(frame, tf_our_ip6);
	frame[14 + 40 + 25] = 0; /* option length 0 */
	{
		uint8_t *ic = frame + 54;
		uint32_t s = 0;

		for (int i = 0; i < 32; i += 2)
			s += rd16(frame + 14 + 8 + i);
		w16(ic + 2, 0);
		w16(ic + 2, moq_net_cksum(ic, 32, s + 58 + 32));
	}
	expect_drop(len, 0, MOQ_NET_DROP_ND_FORMAT);
	len = tf_ns(frame, other);
	/* for another target: the frame reaches us (multicast) but is not ours */
	memcpy(frame + 14 + 24, (const uint8_t[]){0xff, 0x02, [11] = 1, 0xff, 0, 0, 2}, 16);
	frame[2] = 0xff;
	{
		uint8_t *ic = frame + 54;
		uint32_t s = 0;

		for (int i = 0; i < 32; i += 2)
			s += rd16(frame + 14 + 8 + i);
		w16(ic + 2, 0);
		w16(ic + 2, moq_net_cksum(ic, 32, s + 58 + 32));
	}
	expect_drop(len, 0, MOQ_NET_DROP_IP6_DST);
	len = tf_ns(frame, tf_our_ip6);
	frame[60] ^= 0xff; /* corrupt: checksum */
	expect_drop(len, 0, MOQ_NET_DROP_ICMP_CSUM);
}
END_TEST

/* RFC 4861, 7.2.5: a Neighbor Advertisement updates an entry that exists
 * (one we are resolving, or a resolved one); with no entry it is silently
 * discarded, so an unsolicited NA cannot fill the cache. */
START_TEST(na_updates_only_existing)
{
	static const uint8_t mac_a[6] = {0x02, 0, 0, 0, 0, 0xaa},
	                     mac_b[6] = {0x02, 0, 0, 0, 0, 0xbb};
	static const uint8_t stranger[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x77};
	uint8_t mac[6], req[128];
	size_t req_len, len;

	/* unsolicited (Override), no entry: handled, nothing learned */
	len = tf_na(frame, stranger, mac_a, 0x20);
	ck_assert_int_eq(rx(len, 0), MOQ_NET_DONE);
	ck_assert_uint_eq(net.stats.rx_nd, 1);
	ck_assert_uint_eq(net.stats.neigh_learned, 0);
	len = tf_na(frame, tf_peer_ip6, mac_a, 0x20);
	ck_assert_int_eq(rx(len, 0), MOQ_NET_DONE);
	ck_assert_uint_eq(net.stats.neigh_learned, 0);
	/* nothing to send to: the stranger is asked for (no entry made by the NA) */
	ck_assert_int_eq(moq_net_resolve(&net, 6, stranger, T0, mac, req, sizeof(req), &req_len),
	                 MOQ_ERR_AGAIN);
	ck_assert_uint_eq(req_len, 86);

	/* we solicit the peer: its solicited NA completes the entry */
	ck_assert_int_eq(moq_net_resolve(&net, 6, tf_peer_ip6, T0, mac, req, sizeof(req), &req_len),
	                 MOQ_ERR_AGAIN);
	len = tf_na(frame, tf_peer_ip6, mac_a, 0x60);
	ck_assert_int_eq(rx(len, 0), MOQ_NET_DONE);
	ck_assert_uint_eq(net.stats.neigh_learned, 1);
	ck_assert_int_eq(moq_net_resolve(&net, 6, tf_peer_ip6, T0, mac, req, sizeof(req), &req_len),
	                 0);
	ck_assert_int_eq(memcmp(mac, mac_a, 6), 0);
	/* now an unsolicited NA with Override updates it (a changed MAC) */
	len = tf_na(frame, tf_peer_ip6, mac_b, 0x20);
	ck_assert_int_eq(rx(len, 0), MOQ_NET_DONE);
	ck_assert_int_eq(moq_net_resolve(&net, 6, tf_peer_ip6, T0, mac, req, sizeof(req), &req_len),
	                 0);
	ck_assert_int_eq(memcmp(mac, mac_b, 6), 0);
	/* without Override it does not replace a known, different address */
	len = tf_na(frame, tf_peer_ip6, mac_a, 0x00);
	ck_assert_int_eq(rx(len, 0), MOQ_NET_DONE);
	ck_assert_int_eq(moq_net_resolve(&net, 6, tf_peer_ip6, T0, mac, req, sizeof(req), &req_len),
	                 0);
	ck_assert_int_eq(memcmp(mac, mac_b, 6), 0);
	ck_assert_uint_eq(net.stats.neigh_learned, 1);
}
END_TEST

START_TEST(eth_malformed)
{
	size_t len = tf_udp4(frame, (const uint8_t *)"x", 1);

	expect_drop(13, 0, MOQ_NET_DROP_ETH_SHORT);
	expect_drop(0, 0, MOQ_NET_DROP_ETH_SHORT);
	frame[0] = 0x04; /* another host's MAC */
	expect_drop(len, 0, MOQ_NET_DROP_ETH_DST);
	memcpy(frame, tf_our_mac, 6);
	w16(frame + 12, 0x8100); /* VLAN tag: not supported */
	expect_drop(len, 0, MOQ_NET_DROP_ETH_TYPE);
	w16(frame + 12, 0x88cc); /* LLDP */
	expect_drop(len, 0, MOQ_NET_DROP_ETH_TYPE);
}
END_TEST

START_TEST(ip4_malformed)
{
	const uint8_t pl[32] = {0};
	size_t len = tf_udp4(frame, pl, sizeof(pl));
	uint8_t *ip = frame + 14;

	expect_drop(14 + 19, 0, MOQ_NET_DROP_IP4_SHORT);
	ip[0] = 0x65;
	expect_drop(len, 0, MOQ_NET_DROP_IP4_VERSION);
	ip[0] = 0x44; /* IHL 4 */
	expect_drop(len, 0, MOQ_NET_DROP_IP4_HLEN);
	ip[0] = 0x4f; /* 60-byte header in a 33-byte IPv4 packet */
	expect_drop(14 + 33, 0, MOQ_NET_DROP_IP4_HLEN);
	tf_udp4(frame, pl, sizeof(pl));
	w16(ip + 2, (uint16_t)(len - 14 + 1)); /* longer than the frame */
	tf_fix_ip4(frame);
	expect_drop(len, 0, MOQ_NET_DROP_IP4_LEN);
	w16(ip + 2, 19); /* shorter than the header */
	tf_fix_ip4(frame);
	expect_drop(len, 0, MOQ_NET_DROP_IP4_LEN);
	tf_udp4(frame, pl, sizeof(pl));
	ip[8]--; /* TTL changed, checksum not */
	expect_drop(len, 0, MOQ_NET_DROP_IP4_CSUM);
	tf_udp4(frame, pl, sizeof(pl));
	expect_drop(len, MOQ_NET_RX_IP_CSUM_BAD, MOQ_NET_DROP_IP4_CSUM);
	w16(ip + 6, 0x2000); /* more fragments */
	tf_fix_ip4(frame);
	expect_drop(len, 0, MOQ_NET_DROP_IP4_FRAG);
	w16(ip + 6, 0x0010); /* a later fragment */
	tf_fix_ip4(frame);
	expect_drop(len, 0, MOQ_NET_DROP_IP4_FRAG);
	tf_udp4(frame, pl, sizeof(pl));
	ip[19] = 3; /* 10.0.0.3: not us */
	tf_fix_ip4(frame);
	expect_drop(len, 0, MOQ_NET_DROP_IP4_DST);
	tf_udp4(frame, pl, sizeof(pl));
	memset(ip + 12, 255, 4); /* broadcast source */
	tf_fix_ip4(frame);
	expect_drop(len, 0, MOQ_NET_DROP_IP4_SRC);
	memcpy(ip + 12, tf_our_ip4, 4); /* our own address */
	tf_fix_ip4(frame);
	expect_drop(len, 0, MOQ_NET_DROP_IP4_SRC);
	tf_udp4(frame, pl, sizeof(pl));
	ip[9] = 6; /* TCP */
	tf_fix_ip4(frame);
	expect_drop(len, 0, MOQ_NET_DROP_IP4_PROTO);
	/* options are skipped: IHL 6 with a NOP option */
	{
		uint8_t opt[200];
		size_t l2 = tf_udp4(opt, pl, sizeof(pl));

		memcpy(frame, opt, 34);
		memset(frame + 34, 1, 4); /* 4 NOPs */
		memcpy(frame + 38, opt + 34, l2 - 34);
		frame[14] = 0x46;
		w16(frame + 16, (uint16_t)(l2 - 14 + 4));
		tf_fix_ip4(frame);
		ck_assert_int_eq(rx(l2 + 4, 0), MOQ_NET_UDP);
		ck_assert_uint_eq(u.len, sizeof(pl));
	}
}
END_TEST

START_TEST(ip6_malformed)
{
	const uint8_t pl[16] = {0};
	size_t len = tf_udp6(frame, pl, sizeof(pl));
	uint8_t *ip = frame + 14;

	expect_drop(14 + 39, 0, MOQ_NET_DROP_IP6_SHORT);
	ip[0] = 0x40;
	expect_drop(len, 0, MOQ_NET_DROP_IP6_VERSION);
	tf_udp6(frame, pl, sizeof(pl));
	expect_drop(len - 1, 0, MOQ_NET_DROP_IP6_LEN);
	ip[39] = 3;
	expect_drop(len, 0, MOQ_NET_DROP_IP6_DST);
	tf_udp6(frame, pl, sizeof(pl));
	ip[8] = 0xff; /* multicast source */
	expect_drop(len, 0, MOQ_NET_DROP_IP6_SRC);
	tf_udp6(frame, pl, sizeof(pl));
	ip[6] = 44;
	expect_drop(len, 0, MOQ_NET_DROP_IP6_FRAG);
	ip[6] = 0; /* hop-by-hop options */
	expect_drop(len, 0, MOQ_NET_DROP_IP6_PROTO);
	ip[6] = 6;
	expect_drop(len, 0, MOQ_NET_DROP_IP6_PROTO);
}
END_TEST

START_TEST(udp_malformed)
{
	const uint8_t pl[40] = {9};
	size_t len = tf_udp4(frame, pl, sizeof(pl));
	uint8_t *ud = frame + 34;

	/* an IP packet with 4 bytes of UDP */
	w16(frame + 16, 24);
	tf_fix_ip4(frame);
	expect_drop(len, 0, MOQ_NET_DROP_UDP_SHORT);
	tf_udp4(frame, pl, sizeof(pl));
	w16(ud + 4, 7);
	expect_drop(len, 0, MOQ_NET_DROP_UDP_LEN);
	w16(ud + 4, (uint16_t)(8 + sizeof(pl) + 1)); /* beyond the IP payload */
	expect_drop(len, 0, MOQ_NET_DROP_UDP_LEN);
	w16(ud + 4, (uint16_t)(8 + sizeof(pl) - 1)); /* shorter than the IP payload */
	expect_drop(len, 0, MOQ_NET_DROP_UDP_LEN);
	tf_udp4(frame, pl, sizeof(pl));
	ud[8] ^= 0x40; /* payload corrupted */
	expect_drop(len, 0, MOQ_NET_DROP_UDP_CSUM);
	expect_drop(len, MOQ_NET_RX_L4_CSUM_BAD, MOQ_NET_DROP_UDP_CSUM);
	/* the NIC says good: software does not look again */
	ck_assert_int_eq(rx(len, MOQ_NET_RX_L4_CSUM_GOOD), MOQ_NET_UDP);
	tf_udp4(frame, pl, sizeof(pl));
	w16(ud + 2, 4444);
	tf_fix_udp4(frame);
	expect_drop(len, 0, MOQ_NET_DROP_UDP_PORT);
	/* IPv4: checksum 0 means none (RFC 768) */
	tf_udp4(frame, pl, sizeof(pl));
	w16(ud + 6, 0);
	ck_assert_int_eq(rx(len, 0), MOQ_NET_UDP);
	/* IPv6: checksum 0 is invalid (RFC 8200, 8.1) */
	len = tf_udp6(frame, pl, sizeof(pl));
	w16(frame + 54 + 6, 0);
	expect_drop(len, 0, MOQ_NET_DROP_UDP_CSUM);
}
END_TEST

START_TEST(udp_partial_checksum)
{
	const uint8_t pl[40] = {9};
	size_t len = tf_udp4(frame, pl, sizeof(pl));
	uint8_t *ud = frame + 34;
	/* what Linux leaves for CHECKSUM_PARTIAL: the folded pseudo-header sum */
	uint32_t ph = (10 << 8) + 9 + (10 << 8) + 2 + 17 + 48;

	w16(ud + 6, (uint16_t)ph);
	expect_drop(len, 0, MOQ_NET_DROP_UDP_CSUM);
	ifc.l4_partial_ok = 1;
	ck_assert_int_eq(rx(len, 0), MOQ_NET_UDP);
	ck_assert_uint_eq(net.stats.rx_l4_partial, 1);
	/* still a real corruption is caught */
	w16(ud + 6, (uint16_t)(ph + 1));
	expect_drop(len, 0, MOQ_NET_DROP_UDP_CSUM);
}
END_TEST

/* Issue 26: the local ports of the connections the relay dials (its
 * cluster links on the dpdk backend) are ours beside udp_port; the ports
 * around that range are not. */
START_TEST(udp_client_ports)
{
	const uint8_t pl[40] = {9};
	size_t len = tf_udp4(frame, pl, sizeof(pl));
	uint8_t *ud = frame + 34;
	static const uint16_t in[] = {50000, 50001, 50002}, out[] = {49999, 50003, 4444};

	ifc.client_port_lo = 50000;
	ifc.client_ports = 3;
	for (size_t i = 0; i < 3; i++) {
		tf_udp4(frame, pl, sizeof(pl));
		w16(ud + 2, in[i]);
		tf_fix_udp4(frame);
		ck_assert_int_eq(rx(len, 0), MOQ_NET_UDP);
		ck_assert_uint_eq(u.dport, in[i]);
		tf_udp4(frame, pl, sizeof(pl));
		w16(ud + 2, out[i]);
		tf_fix_udp4(frame);
		expect_drop(len, 0, MOQ_NET_DROP_UDP_PORT);
	}
}
END_TEST

/* Every truncation of a valid frame is dropped and counted, never handed up. */
START_TEST(every_truncation_dropped)
{
	const uint8_t pl[64] = {1, 2, 3};
	uint8_t full[256];
	size_t len = _i == 0   ? tf_udp4(full, pl, sizeof(pl))
	             : _i == 1 ? tf_udp6(full, pl, sizeof(pl))
	             : _i == 2 ? tf_echo4(full, 32)
	             : _i == 3 ? tf_arp_req(full, tf_our_ip4)
	                       : tf_ns(full, tf_our_ip6);

	for (size_t l = 0; l < len; l++) {
		uint64_t drops = 0;

		memcpy(frame, full, len);
		ck_assert_int_eq(rx(l, 0), MOQ_NET_DROPPED);
		for (int r = 0; r < MOQ_NET_DROP_MAX; r++)
			drops += net.stats.drop[r];
		ck_assert_uint_eq(drops, net.stats.rx_frames);
	}
	memcpy(frame, full, len);
	ck_assert_int_ne(rx(len, 0), MOQ_NET_DROPPED);
}
END_TEST

START_TEST(neighbour_cache_bounded)
{
	uint8_t a[4] = {10, 0, 1, 0}, mac[6] = {2, 0, 0, 0, 0, 0}, req[96];
	size_t req_len;
	unsigned int found = 0;

	for (unsigned int i = 0; i < 1000; i++) {
		a[2] = (uint8_t)(i >> 8);
		a[3] = (uint8_t)i;
		mac[5] = (uint8_t)i;
		moq_net_neigh_learn(&net, 4, a, mac, T0 + i);
	}
	ck_assert_uint_eq(net.stats.neigh_learned, 1000);
	ck_assert_uint_eq(net.stats.neigh_evicted, 1000 - MOQ_NET_NEIGH_SETS * MOQ_NET_NEIGH_WAYS);
	/* the most recent one is there, with its MAC */
	ck_assert_int_eq(moq_net_resolve(&net, 4, a, T0 + 1000, mac, req, sizeof(req), &req_len),
	                 0);
	ck_assert_uint_eq(mac[5], (uint8_t)999);
	for (unsigned int i = 0; i < 1000; i++) {
		a[2] = (uint8_t)(i >> 8);
		a[3] = (uint8_t)i;
		found += moq_net_resolve(&net, 4, a, T0 + 1000, mac, req, sizeof(req), &req_len) ==
		         0;
		if (found > 256)
			break;
	}
	ck_assert_uint_le(found, MOQ_NET_NEIGH_SETS * MOQ_NET_NEIGH_WAYS);
}
END_TEST

START_TEST(gateway_and_stale)
{
	static const uint8_t far[4] = {192, 0, 2, 7}, gw[4] = {10, 0, 0, 1};
	static const uint8_t gw_mac[6] = {2, 0, 0, 0, 0, 0x11};
	uint8_t mac[6], req[96];
	size_t req_len;

	memcpy(ifc.gw4, gw, 4);
	ifc.has_gw4 = 1;
	ck_assert_int_eq(moq_net_resolve(&net, 4, far, T0, mac, req, sizeof(req), &req_len),
	                 MOQ_ERR_AGAIN);
	ck_assert_int_eq(memcmp(req + 14 + 24, gw, 4), 0); /* asks for the gateway */
	moq_net_neigh_learn(&net, 4, gw, gw_mac, T0);
	ck_assert_int_eq(moq_net_resolve(&net, 4, far, T0, mac, req, sizeof(req), &req_len), 0);
	ck_assert_int_eq(memcmp(mac, gw_mac, 6), 0);
	/* on-link peers are asked for directly */
	ck_assert_int_eq(moq_net_resolve(&net, 4, tf_peer_ip4, T0, mac, req, sizeof(req), &req_len),
	                 MOQ_ERR_AGAIN);
	ck_assert_int_eq(memcmp(req + 14 + 24, tf_peer_ip4, 4), 0);
	/* stale after the TTL: still used, and asked again */
	ck_assert_int_eq(moq_net_resolve(&net, 4, far, T0 + MOQ_NET_NEIGH_TTL_NS + 1, mac, req,
	                                 sizeof(req), &req_len),
	                 0);
	ck_assert_uint_eq(req_len, 42);
	ck_assert_int_eq(moq_net_resolve(&net, 5, far, T0, mac, req, sizeof(req), &req_len),
	                 MOQ_ERR_INVAL);
}
END_TEST

/* Two workers' contexts on one link share a neighbour table: what one
 * learns from ARP / ND (RSS hands those frames to one queue) the other
 * resolves with; a UDP sender stays in the receiving context's own cache. */
START_TEST(shared_neighbour_table)
{
	static const uint8_t far[4] = {192, 0, 2, 7}, gw[4] = {10, 0, 0, 1};
	static const uint8_t gw_mac[6] = {2, 0, 0, 0, 0, 0x11}, mac_b[6] = {2, 0, 0, 0, 0, 0xbb};
	static struct moq_net_neigh_table t;
	static struct moq_net other;
	uint8_t mac[6], req[128], pl[8] = {0};
	size_t req_len, len;

	memcpy(ifc.gw4, gw, 4);
	ifc.has_gw4 = 1;
	moq_net_neigh_table_init(&t);
	moq_net_share(&net, &t);
	moq_net_init(&other, &ifc);
	moq_net_share(&other, &t);

	/* the other worker asks for the gateway; the reply reaches this one */
	ck_assert_int_eq(moq_net_resolve(&other, 4, far, T0, mac, req, sizeof(req), &req_len),
	                 MOQ_ERR_AGAIN);
	ck_assert_uint_eq(req_len, 42);
	len = tf_arp_req(frame, tf_our_ip4);
	memcpy(frame, tf_our_mac, 6);
	w16(frame + 14 + 6, 2);
	memcpy(frame + 14 + 8, gw_mac, 6);
	memcpy(frame + 14 + 14, gw, 4);
	memcpy(frame + 14 + 18, tf_our_mac, 6);
	ck_assert_int_eq(rx(len, 0), MOQ_NET_DONE);
	/* within the second: no new request, the shared answer is used */
	ck_assert_int_eq(
	        moq_net_resolve(&other, 4, far, T0 + 1000, mac, req, sizeof(req), &req_len), 0);
	ck_assert_uint_eq(req_len, 0);
	ck_assert_int_eq(memcmp(mac, gw_mac, 6), 0);
	ck_assert_uint_eq(other.stats.neigh_shared, 1);
	ck_assert_uint_eq(other.stats.tx_solicits, 1);

	/* stale on the other worker: a newer confirmation seen here refreshes
	 * it without a request of its own */
	len = tf_arp_req(frame, tf_our_ip4);
	memcpy(frame, tf_our_mac, 6);
	w16(frame + 14 + 6, 2);
	memcpy(frame + 14 + 8, gw_mac, 6);
	memcpy(frame + 14 + 14, gw, 4);
	memcpy(frame + 14 + 18, tf_our_mac, 6);
	ck_assert_int_eq(moq_net_rx(&net, frame, len, 0, T0 + MOQ_NET_NEIGH_TTL_NS, &u, reply,
	                            sizeof(reply), &rlen),
	                 MOQ_NET_DONE);
	ck_assert_int_eq(moq_net_resolve(&other, 4, far, T0 + MOQ_NET_NEIGH_TTL_NS + 10, mac, req,
	                                 sizeof(req), &req_len),
	                 0);
	ck_assert_uint_eq(req_len, 0);
	ck_assert_uint_eq(other.stats.neigh_shared, 2);

	/* a gratuitous ARP with a new MAC, for a sender only the table knows */
	len = tf_arp_req(frame, gw);
	memcpy(frame + 14 + 8, mac_b, 6);
	memcpy(frame + 14 + 14, gw, 4);
	moq_net_init(&net, &ifc);
	moq_net_share(&net, &t);
	ck_assert_int_eq(moq_net_rx(&net, frame, len, 0, T0 + MOQ_NET_NEIGH_TTL_NS + 15, &u, reply,
	                            sizeof(reply), &rlen),
	                 MOQ_NET_DROPPED);
	ck_assert_uint_eq(net.stats.drop[MOQ_NET_DROP_ARP_OTHER], 1);
	/* the other worker's entry is fresh, and still takes the new MAC */
	ck_assert_int_eq(moq_net_resolve(&other, 4, far, T0 + MOQ_NET_NEIGH_TTL_NS + 20, mac, req,
	                                 sizeof(req), &req_len),
	                 0);
	ck_assert_int_eq(memcmp(mac, mac_b, 6), 0);
	ck_assert_uint_eq(req_len, 0);

	/* IPv6: the other worker solicits, this one gets the solicited NA
	 * (no entry of its own: the table's unresolved mark lets it in) */
	ck_assert_int_eq(
	        moq_net_resolve(&other, 6, tf_peer_ip6, T0, mac, req, sizeof(req), &req_len),
	        MOQ_ERR_AGAIN);
	len = tf_na(frame, tf_peer_ip6, tf_peer_mac, 0x60);
	ck_assert_int_eq(rx(len, 0), MOQ_NET_DONE);
	ck_assert_int_eq(
	        moq_net_resolve(&other, 6, tf_peer_ip6, T0 + 1000, mac, req, sizeof(req), &req_len),
	        0);
	ck_assert_int_eq(memcmp(mac, tf_peer_mac, 6), 0);
	/* an unsolicited NA for an address nobody asked for fills nothing */
	{
		static const uint8_t stranger[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x77};

		len = tf_na(frame, stranger, tf_peer_mac, 0x20);
		ck_assert_int_eq(rx(len, 0), MOQ_NET_DONE);
		ck_assert_int_eq(
		        moq_net_resolve(&other, 6, stranger, T0, mac, req, sizeof(req), &req_len),
		        MOQ_ERR_AGAIN);
	}

	/* a UDP sender refreshes the receiving context only (per packet) */
	len = tf_udp4(frame, pl, sizeof(pl));
	ck_assert_int_eq(rx(len, 0), MOQ_NET_UDP);
	ck_assert_int_eq(moq_net_resolve(&net, 4, tf_peer_ip4, T0, mac, req, sizeof(req), &req_len),
	                 0);
	ck_assert_int_eq(
	        moq_net_resolve(&other, 4, tf_peer_ip4, T0, mac, req, sizeof(req), &req_len),
	        MOQ_ERR_AGAIN);
}
END_TEST

/* Kernel sockets on loopback: a datagram longer than the kbuf's buffers is
 * dropped and counted (MSG_TRUNC), never handed up cut; a kbuf sized for
 * jumbo datagrams takes it whole. */
START_TEST(krecv_truncation)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);
	struct moq_net_ksock ks;
	struct moq_net_kdgram d[MOQ_NET_KIO_BURST];
	struct moq_net_kbuf *small = calloc(1, moq_net_kbuf_size());
	struct moq_net_kbuf *big = malloc(moq_net_kbuf_size_for(9000));
	static uint8_t pl[5000];
	int fd = socket(AF_INET, SOCK_DGRAM, 0), n = 0;

	ck_assert(small != NULL && big != NULL && fd >= 0);
	moq_net_kbuf_init(big, 9000);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(moq_net_ksock_open(&ks, (struct sockaddr *)&a, sizeof(a), 0, 0,
	                                    (struct sockaddr *)&a, &alen),
	                 0);
	memset(pl, 0x5a, sizeof(pl));
	/* 5000 bytes then 100: the first is too long for 2048-byte buffers */
	ck_assert_int_eq(sendto(fd, pl, 5000, 0, (struct sockaddr *)&a, alen), 5000);
	ck_assert_int_eq(sendto(fd, pl, 100, 0, (struct sockaddr *)&a, alen), 100);
	for (int i = 0; i < 100 && n == 0; i++) {
		n = moq_net_krecv(small, ks.fd, d);
		if (n == 0)
			usleep(1000);
	}
	ck_assert_int_eq(n, 1);
	ck_assert_uint_eq(d[0].len, 100);
	ck_assert_uint_eq(moq_net_kbuf_truncated(small), 1);
	/* a kbuf for 9000-byte datagrams takes it whole */
	ck_assert_int_eq(sendto(fd, pl, 5000, 0, (struct sockaddr *)&a, alen), 5000);
	n = 0;
	for (int i = 0; i < 100 && n == 0; i++) {
		n = moq_net_krecv(big, ks.fd, d);
		if (n == 0)
			usleep(1000);
	}
	ck_assert_int_eq(n, 1);
	ck_assert_uint_eq(d[0].len, 5000);
	ck_assert_int_eq(memcmp(d[0].data, pl, 5000), 0);
	ck_assert_uint_eq(moq_net_kbuf_truncated(big), 0);
	moq_net_ksock_close(&ks);
	close(fd);
	free(small);
	free(big);
}
END_TEST

START_TEST(drop_names)
{
	for (int i = 0; i < MOQ_NET_DROP_MAX; i++) {
		ck_assert_ptr_nonnull(moq_net_drop_name(i));
		ck_assert_str_ne(moq_net_drop_name(i), "unknown");
		for (int j = 0; j < i; j++)
			ck_assert_str_ne(moq_net_drop_name(i), moq_net_drop_name(j));
	}
	ck_assert_str_eq(moq_net_drop_name(MOQ_NET_DROP_IP4_FRAG), "ip4_frag");
	ck_assert_str_eq(moq_net_drop_name(MOQ_NET_DROP_NO_ROOM), "no_room");
	ck_assert_str_eq(moq_net_drop_name(MOQ_NET_DROP_MAX), "unknown");
}
END_TEST

Suite *net_suite(void);

Suite *net_suite(void)
{
	Suite *s = suite_create("net");
	TCase *tc = tcase_create("bytes");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, checksum_golden);
	tcase_add_test(tc, link_local_from_mac);
	tcase_add_test(tc, udp4_in);
	tcase_add_test(tc, udp4_padding_and_ecn);
	tcase_add_test(tc, udp6_in);
	tcase_add_loop_test(tc, udp_build_roundtrip, 0, 2);
	tcase_add_test(tc, udp_build_offload);
	tcase_add_test(tc, arp_request_answered);
	tcase_add_test(tc, arp_reply_learned_and_others);
	tcase_add_test(tc, arp_malformed);
	tcase_add_test(tc, gratuitous_arp_and_na);
	tcase_add_test(tc, icmp_echo);
	tcase_add_test(tc, icmp_malformed);
	tcase_add_test(tc, icmp6_echo);
	tcase_add_test(tc, nd_solicit_answered);
	tcase_add_test(tc, nd_resolve_and_malformed);
	tcase_add_test(tc, na_updates_only_existing);
	tcase_add_test(tc, eth_malformed);
	tcase_add_test(tc, ip4_malformed);
	tcase_add_test(tc, ip6_malformed);
	tcase_add_test(tc, udp_malformed);
	tcase_add_test(tc, udp_partial_checksum);
	tcase_add_test(tc, udp_client_ports);
	tcase_add_loop_test(tc, every_truncation_dropped, 0, 5);
	tcase_add_test(tc, neighbour_cache_bounded);
	tcase_add_test(tc, gateway_and_stale);
	tcase_add_test(tc, shared_neighbour_table);
	tcase_add_test(tc, drop_names);
	tcase_add_test(tc, krecv_truncation);
	suite_add_tcase(s, tc);
	return s;
}
