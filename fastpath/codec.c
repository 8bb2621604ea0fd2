/* SPDX-License-Identifier: MIT */
/*
 * codec.c: varints, packet numbers and ACK frames (RFC 9000, 16, 17.1,
 * 19.3, A.2, A.3).
 */
#include "fp_int.h"

unsigned fp_pn_len(uint64_t pn, uint64_t acked)
{
	/* RFC 9000, 17.1: at least twice the range of unacknowledged numbers */
	uint64_t num = acked == FP_PN_NONE ? pn + 1 : pn - acked;

	if (num < (1u << 7))
		return 1;
	if (num < (1u << 15))
		return 2;
	if (num < (1u << 23))
		return 3;
	return 4;
}

size_t fp_ack_write(uint8_t *p, size_t cap, const struct fp_range *r, uint32_t n,
                    uint64_t delay_enc)
{
	uint8_t *q = p, *end = p + cap;
	uint32_t i;

	if (n == 0 || cap < 1 + 8 + 8 + 8 + 8)
		return 0;
	*q++ = FT_ACK;
	q = fp_varint_put(q, r[0].hi);
	q = fp_varint_put(q, delay_enc);
	q = fp_varint_put(q, n - 1);
	q = fp_varint_put(q, r[0].hi - r[0].lo);
	for (i = 1; i < n; i++) {
		uint64_t gap = r[i - 1].lo - r[i].hi - 2, len = r[i].hi - r[i].lo;
		if ((size_t)(end - q) < fp_varint_len(gap) + fp_varint_len(len))
			break;
		q = fp_varint_put(q, gap);
		q = fp_varint_put(q, len);
	}
	if (i < n) {
		/* rewrite with the ranges that fit */
		return fp_ack_write(p, cap, r, i, delay_enc);
	}
	return (size_t)(q - p);
}

int fp_ack_parse(const uint8_t **p, const uint8_t *end, int ecn, struct fp_ack *a)
{
	uint64_t count, first, i, lo;

	if (fp_varint_get(p, end, &a->largest) < 0 || fp_varint_get(p, end, &a->delay) < 0 ||
	    fp_varint_get(p, end, &count) < 0 || fp_varint_get(p, end, &first) < 0)
		return -1;
	/* RFC 9000, 19.3.1: a range below zero is a FRAME_ENCODING_ERROR */
	if (first > a->largest)
		return -1;
	lo = a->largest - first;
	a->r[0].hi = a->largest;
	a->r[0].lo = lo;
	a->n = 1;
	for (i = 0; i < count; i++) {
		uint64_t gap, len, hi;
		if (fp_varint_get(p, end, &gap) < 0 || fp_varint_get(p, end, &len) < 0)
			return -1;
		if (lo < gap + 2)
			return -1;
		hi = lo - gap - 2;
		if (len > hi)
			return -1;
		lo = hi - len;
		if (a->n < sizeof(a->r) / sizeof(a->r[0])) {
			a->r[a->n].hi = hi;
			a->r[a->n].lo = lo;
			a->n++;
		}
	}
	a->has_ecn = ecn;
	if (ecn) {
		for (i = 0; i < 3; i++)
			if (fp_varint_get(p, end, &a->ecn[i]) < 0)
				return -1;
	}
	return 0;
}
