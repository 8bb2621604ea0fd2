/* SPDX-License-Identifier: MIT */
/*
 * fuzz_net.c: libFuzzer target for the network stack's receive path
 * (moq_net_rx): any bytes as an Ethernet frame, with the RX hints and the
 * interface quirks taken from the first byte. Checks the invariants the
 * workers rely on: a datagram handed up lies inside the frame, a reply fits
 * its buffer, and every drop is counted exactly once. With the first byte's
 * top bit the context shares a neighbour table that lives across inputs (as
 * the relay's workers on one link do), and resolves a neighbour from it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t mac[6] = {0x02, 0, 0, 0, 0, 1}, ip4[4] = {10, 0, 0, 2};
	static const uint8_t ip6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 2};
	static struct moq_net n;
	static struct moq_net_neigh_table shared; /* zeroed: empty */
	static const uint8_t peer4[4] = {10, 0, 0, 9};
	static const uint8_t peer6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 9};
	uint8_t mac_out[6], req[128];
	size_t req_len;
	struct moq_net_iface ifc;
	struct moq_net_udp u;
	uint8_t reply[256], *frame;
	size_t rlen = 0;
	uint64_t drops_before = 0, drops_after = 0;
	enum moq_net_verdict v;
	uint8_t ctl;

	if (size < 1)
		return 0;
	ctl = data[0];
	moq_net_iface_init(&ifc, mac, ip4, 24, ip6, 64, (ctl & 0x40) ? 0 : 4443);
	ifc.l4_partial_ok = (ctl >> 4) & 1;
	moq_net_init(&n, &ifc);
	if (ctl & 0x80)
		moq_net_share(&n, &shared);
	/* a copy of exactly @size - 1 bytes so ASan sees any overread */
	frame = malloc(size - 1 ? size - 1 : 1);
	memcpy(frame, data + 1, size - 1);
	for (int r = 0; r < MOQ_NET_DROP_MAX; r++)
		drops_before += n.stats.drop[r];
	/* reply buffers of 256 bytes: larger replies must be refused, not written */
	v = moq_net_rx(&n, frame, size - 1, ctl & 0x0f, 1000000000ull, &u, reply, sizeof(reply),
	               &rlen);
	for (int r = 0; r < MOQ_NET_DROP_MAX; r++)
		drops_after += n.stats.drop[r];
	if ((v == MOQ_NET_DROPPED) != (drops_after == drops_before + 1))
		abort();
	if (v == MOQ_NET_UDP && (u.payload < frame || u.payload + u.len > frame + (size - 1) ||
	                         (u.family != 4 && u.family != 6)))
		abort();
	if (v == MOQ_NET_REPLY && (rlen == 0 || rlen > sizeof(reply)))
		abort();
	if (v != MOQ_NET_REPLY && rlen != 0)
		abort();
	if (ctl & 0x80) { /* what any input left in the table resolves sanely */
		moq_net_resolve(&n, 4, peer4, 1000000001ull, mac_out, req, sizeof(req), &req_len);
		if (req_len > sizeof(req))
			abort();
		moq_net_resolve(&n, 6, peer6, 1000000001ull, mac_out, req, sizeof(req), &req_len);
		if (req_len > sizeof(req))
			abort();
	}
	free(frame);
	return 0;
}
