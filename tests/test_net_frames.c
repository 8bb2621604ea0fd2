/* SPDX-License-Identifier: MIT */
/*
 * test_net_frames.c: frames written field by field (independently of the
 * stack's builders where the test checks a builder).
 */
#include "test_net_frames.h"

#include <string.h>

const uint8_t tf_our_mac[6] = {0x02, 0, 0, 0, 0, 0x01};
const uint8_t tf_peer_mac[6] = {0x02, 0, 0, 0, 0, 0x99};
const uint8_t tf_our_ip4[4] = {10, 0, 0, 2};
const uint8_t tf_peer_ip4[4] = {10, 0, 0, 9};
const uint8_t tf_our_ip6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 2};
const uint8_t tf_peer_ip6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 9};

static void w16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint32_t sum(const uint8_t *p, size_t n, uint32_t s)
{
	for (size_t i = 0; i < n; i++)
		s += (i & 1) ? p[i] : (uint32_t)p[i] << 8;
	return s;
}

static uint16_t fin(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

void tf_iface(struct moq_net_iface *ifc)
{
	moq_net_iface_init(ifc, tf_our_mac, tf_our_ip4, 24, tf_our_ip6, 64, 4443);
}

void tf_fix_ip4(uint8_t *f)
{
	uint8_t *ip = f + 14;
	size_t hl = (size_t)(ip[0] & 0xf) * 4;

	w16(ip + 10, 0);
	w16(ip + 10, fin(sum(ip, hl, 0)));
}

void tf_fix_udp4(uint8_t *f)
{
	uint8_t *ip = f + 14, *u = ip + (ip[0] & 0xf) * 4;
	uint16_t ulen = (uint16_t)(u[4] << 8 | u[5]);
	uint32_t s = sum(ip + 12, 8, 0) + 17 + ulen;
	uint16_t c;

	w16(u + 6, 0);
	c = fin(sum(u, ulen, s));
	w16(u + 6, c == 0 ? 0xffff : c);
}

static void eth(uint8_t *f, uint16_t type)
{
	memcpy(f, tf_our_mac, 6);
	memcpy(f + 6, tf_peer_mac, 6);
	w16(f + 12, type);
}

size_t tf_udp4(uint8_t *f, const uint8_t *payload, size_t plen)
{
	uint8_t *ip = f + 14, *u = ip + 20;

	eth(f, 0x0800);
	memset(ip, 0, 20);
	ip[0] = 0x45;
	w16(ip + 2, (uint16_t)(28 + plen));
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, tf_peer_ip4, 4);
	memcpy(ip + 16, tf_our_ip4, 4);
	tf_fix_ip4(f);
	w16(u, 50000);
	w16(u + 2, 4443);
	w16(u + 4, (uint16_t)(8 + plen));
	memcpy(u + 8, payload, plen);
	tf_fix_udp4(f);
	return 42 + plen;
}

size_t tf_udp6(uint8_t *f, const uint8_t *payload, size_t plen)
{
	uint8_t *ip = f + 14, *u = ip + 40;
	uint32_t s;
	uint16_t c;

	eth(f, 0x86dd);
	memset(ip, 0, 40);
	ip[0] = 0x60;
	w16(ip + 4, (uint16_t)(8 + plen));
	ip[6] = 17;
	ip[7] = 64;
	memcpy(ip + 8, tf_peer_ip6, 16);
	memcpy(ip + 24, tf_our_ip6, 16);
	w16(u, 50000);
	w16(u + 2, 4443);
	w16(u + 4, (uint16_t)(8 + plen));
	w16(u + 6, 0);
	memcpy(u + 8, payload, plen);
	s = sum(ip + 8, 32, 0) + 17 + (uint32_t)(8 + plen);
	c = fin(sum(u, 8 + plen, s));
	w16(u + 6, c == 0 ? 0xffff : c);
	return 62 + plen;
}

size_t tf_echo4(uint8_t *f, size_t dlen)
{
	uint8_t *ip = f + 14, *ic = ip + 20;

	eth(f, 0x0800);
	memset(ip, 0, 20);
	ip[0] = 0x45;
	w16(ip + 2, (uint16_t)(28 + dlen));
	ip[8] = 64;
	ip[9] = 1;
	memcpy(ip + 12, tf_peer_ip4, 4);
	memcpy(ip + 16, tf_our_ip4, 4);
	tf_fix_ip4(f);
	ic[0] = 8;
	ic[1] = 0;
	w16(ic + 2, 0);
	w16(ic + 4, 0x1234); /* id */
	w16(ic + 6, 7);      /* sequence */
	for (size_t i = 0; i < dlen; i++)
		ic[8 + i] = (uint8_t)(i * 7);
	w16(ic + 2, fin(sum(ic, 8 + dlen, 0)));
	return 42 + dlen;
}

size_t tf_arp_req(uint8_t *f, const uint8_t tip[4])
{
	uint8_t *a = f + 14;

	eth(f, 0x0806);
	memset(f, 0xff, 6);
	w16(a, 1);
	w16(a + 2, 0x0800);
	a[4] = 6;
	a[5] = 4;
	w16(a + 6, 1);
	memcpy(a + 8, tf_peer_mac, 6);
	memcpy(a + 14, tf_peer_ip4, 4);
	memset(a + 18, 0, 6);
	memcpy(a + 24, tip, 4);
	return 42;
}

size_t tf_ns(uint8_t *f, const uint8_t target[16])
{
	uint8_t *ip = f + 14, *ic = ip + 40;
	uint8_t dst[16] = {0xff, 0x02, [11] = 0x01, [12] = 0xff};
	uint32_t s;

	memcpy(dst + 13, target + 13, 3);
	eth(f, 0x86dd);
	f[0] = 0x33;
	f[1] = 0x33;
	memcpy(f + 2, dst + 12, 4);
	memset(ip, 0, 40);
	ip[0] = 0x60;
	w16(ip + 4, 32);
	ip[6] = 58;
	ip[7] = 255;
	memcpy(ip + 8, tf_peer_ip6, 16);
	memcpy(ip + 24, dst, 16);
	memset(ic, 0, 32);
	ic[0] = 135;
	memcpy(ic + 8, target, 16);
	ic[24] = 1; /* source link-layer address */
	ic[25] = 1;
	memcpy(ic + 26, tf_peer_mac, 6);
	s = sum(ip + 8, 32, 0) + 58 + 32;
	w16(ic + 2, fin(sum(ic, 32, s)));
	return 14 + 40 + 32;
}

size_t tf_na(uint8_t *f, const uint8_t target[16], const uint8_t tll[6], uint8_t flags)
{
	static const uint8_t all_nodes[16] = {0xff, 0x02, [15] = 0x01};
	uint8_t *ip = f + 14, *ic = ip + 40;
	const uint8_t *dst = (flags & 0x40) ? tf_our_ip6 : all_nodes;
	uint32_t s;

	eth(f, 0x86dd);
	if (!(flags & 0x40)) {
		static const uint8_t mc[6] = {0x33, 0x33, 0, 0, 0, 1};

		memcpy(f, mc, 6);
	}
	memset(ip, 0, 40);
	ip[0] = 0x60;
	w16(ip + 4, 32);
	ip[6] = 58;
	ip[7] = 255;
	memcpy(ip + 8, tf_peer_ip6, 16);
	memcpy(ip + 24, dst, 16);
	memset(ic, 0, 32);
	ic[0] = 136;
	ic[4] = flags;
	memcpy(ic + 8, target, 16);
	ic[24] = 2; /* target link-layer address */
	ic[25] = 1;
	memcpy(ic + 26, tll, 6);
	s = sum(ip + 8, 32, 0) + 58 + 32;
	w16(ic + 2, fin(sum(ic, 32, s)));
	return 14 + 40 + 32;
}
