/* SPDX-License-Identifier: MIT */
/*
 * fuzz_moq_codec.c: libFuzzer target for moq/codec.c. The first byte picks
 * the version and the chunk size; the rest is decoded as every message type,
 * re-encoded and decoded again (the fields must survive), and fed to the
 * group stream parser in chunks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "moq_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static void roundtrip(enum moq_msg_type t, enum moq_version v, const uint8_t *p, size_t n)
{
	static uint8_t out[1 << 16];
	struct moq_msg m, m2;
	int rc = moq_msg_decode(t, v, p, n, 1 << 15, &m);
	int e, rc2;

	if (rc < 0) {
		check(rc == MOQ_ERR_SHORT || rc == MOQ_ERR_DECODE || rc == MOQ_ERR_PROTO ||
		      rc == MOQ_ERR_TOO_LARGE || rc == MOQ_ERR_INVAL);
		return;
	}
	check((size_t)rc <= n);
	e = moq_msg_encode(out, sizeof(out), v, &m);
	/* A decoded message re-encodes, unless it came with a restart status
	 * (encoded as given) or non-minimal varints (then it is shorter). */
	check(e > 0 && e <= rc);
	rc2 = moq_msg_decode(t, v, out, (size_t)e, 1 << 15, &m2);
	check(rc2 == e);
	check(m2.type == m.type);
	if (t == MOQ_MSG_SUBSCRIBE)
		check(m.u.subscribe.id == m2.u.subscribe.id &&
		      m.u.subscribe.start == m2.u.subscribe.start &&
		      m.u.subscribe.end == m2.u.subscribe.end &&
		      m.u.subscribe.track.len == m2.u.subscribe.track.len &&
		      memcmp(m.u.subscribe.track.p, m2.u.subscribe.track.p,
		             m.u.subscribe.track.len) == 0);
	if (t == MOQ_MSG_ANNOUNCE)
		check(m.u.announce.hop_count == m2.u.announce.hop_count ||
		      m.u.announce.status == MOQ_ANNOUNCE_ENDED);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum moq_version v;
	struct moq_group_rx rx;
	size_t chunk, off;

	if (size < 1)
		return 0;
	v = (enum moq_version)(3 + data[0] % 3);
	chunk = 1 + (data[0] >> 2);
	data++, size--;

	for (int t = MOQ_MSG_SETUP; t < MOQ_MSG_TYPE_MAX; t++)
		roundtrip((enum moq_msg_type)t, v, data, size);

	/* The group parser consumes everything in chunks without reading past them. */
	moq_group_rx_init(&rx, v, true);
	off = 0;
	while (off < size) {
		size_t n = size - off < chunk ? size - off : chunk;
		const uint8_t *p = data + off;
		int rc = 0;
		while (n) {
			struct moq_group_ev ev;
			rc = moq_group_rx_next(&rx, p, n, &ev);
			if (rc < 0)
				break;
			check(rc > 0 && (size_t)rc <= n);
			if (ev.type == MOQ_GEV_DATA)
				check(ev.data == p && ev.data_len == (size_t)rc);
			p += rc;
			n -= (size_t)rc;
		}
		if (rc < 0) {
			check(rc == MOQ_ERR_DECODE || rc == MOQ_ERR_TOO_LARGE);
			return 0;
		}
		off += chunk;
	}
	(void)moq_group_rx_fin(&rx);
	return 0;
}
