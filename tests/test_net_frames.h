/* SPDX-License-Identifier: MIT */
/* test_net_frames.h: frames for the network stack's tests. */
#ifndef MOQ_TESTS_TEST_NET_FRAMES_H
#define MOQ_TESTS_TEST_NET_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "net.h"

/* The relay's interface in the tests: 02:00:00:00:00:01, 10.0.0.2/24,
 * 2001:db8::2/64, UDP 4443. */
extern const uint8_t tf_our_mac[6], tf_peer_mac[6];
extern const uint8_t tf_our_ip4[4], tf_peer_ip4[4], tf_our_ip6[16], tf_peer_ip6[16];

void tf_iface(struct moq_net_iface *ifc);
/* A valid UDP frame from the peer to us (sw checksums); returns its length. */
size_t tf_udp4(uint8_t *f, const uint8_t *payload, size_t plen);
size_t tf_udp6(uint8_t *f, const uint8_t *payload, size_t plen);
/* Recompute the IPv4 header / UDP checksums after a test changed a field. */
void tf_fix_ip4(uint8_t *f);
void tf_fix_udp4(uint8_t *f);
/* An ICMP echo request (IPv4) with @dlen data bytes. */
size_t tf_echo4(uint8_t *f, size_t dlen);
/* An ARP request from the peer for @tip. */
size_t tf_arp_req(uint8_t *f, const uint8_t tip[4]);
/* A Neighbour Solicitation from the peer for @target. */
size_t tf_ns(uint8_t *f, const uint8_t target[16]);
/* A Neighbour Advertisement from the peer for @target with a target
 * link-layer address option @tll and @flags (RFC 4861, 4.4: 0x80 Router,
 * 0x40 Solicited, 0x20 Override): to all-nodes when unsolicited (no 0x40),
 * to our address when solicited. */
size_t tf_na(uint8_t *f, const uint8_t target[16], const uint8_t tll[6], uint8_t flags);

#endif
