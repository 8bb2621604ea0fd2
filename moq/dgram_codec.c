/* SPDX-License-Identifier: MIT */
/*
 * dgram_codec.c: the header of a moq-lite-05 datagram (6.4; PROTOCOL.md,
 * "lite-05 datagrams"): { subscribe id (i), group sequence (i), timestamp
 * (i) } and the payload to the datagram's end (no length). The timestamp is
 * the frame's, absolute in the track's timescale (a single-frame group's
 * first and only frame: what its zigzag delta from 0 carries on a stream);
 * @moq/net 0.3.4 lite/datagram.js encodes it so. Its own functions so that
 * lite-06 reuses them if its datagram is the same.
 */
#include "codec.h"

#include "moq_err.h"

int moq_dgram_hdr_encode(uint8_t *buf, size_t cap, uint64_t sub_id, uint64_t seq,
                         uint64_t timestamp)
{
	size_t a = moq_varint_len(sub_id), b = moq_varint_len(seq), c = moq_varint_len(timestamp);

	if (a == 0 || b == 0 || c == 0)
		return MOQ_ERR_INVAL;
	if (a + b + c > cap)
		return MOQ_ERR_TOO_LARGE;
	moq_varint_put(buf, cap, sub_id);
	moq_varint_put(buf + a, cap - a, seq);
	moq_varint_put(buf + a + b, cap - a - b, timestamp);
	return (int)(a + b + c);
}

int moq_dgram_hdr_decode(const uint8_t *p, size_t len, uint64_t *sub_id, uint64_t *seq,
                         uint64_t *timestamp)
{
	size_t off = 0;
	uint64_t *out[3] = {sub_id, seq, timestamp};

	for (int i = 0; i < 3; i++) {
		int r = moq_varint_get(p + off, len - off, out[i]);
		if (r <= 0)
			return MOQ_ERR_DECODE;
		off += (size_t)r;
	}
	return (int)off;
}
