/* SPDX-License-Identifier: MIT */
/*
 * test_moq_dgram_codec.c: the lite-05 datagram header (6.4,
 * moq/dgram_codec.c) against golden bytes from @moq/net 0.3.4: each
 * expected string below is new Datagram(subscribe, sequence, timestamp,
 * payload).encode() of its lite/datagram.js (run once with node; the
 * payload bytes follow the header), and decode of garbage fails.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "codec.h"
#include "moq_err.h"

static size_t unhex(const char *h, uint8_t *out)
{
	size_t n = 0;

	for (; h[0] && h[1]; h += 2) {
		unsigned v;
		sscanf(h, "%2x", &v);
		out[n++] = (uint8_t)v;
	}
	return n;
}

START_TEST(golden_from_moq_net)
{
	static const struct {
		uint64_t sub, seq, ts;
		const char *hex; /* header + payload, as @moq/net encodes */
		size_t payload;
	} g[] = {
	        {0, 0, 0, "000000", 0},
	        {7, 300, 20000, "07412c80004e20010203", 3},
	        {70000, 1099511627776ull, 5, "80011170c00001000000000005ff", 1},
	};

	for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
		uint8_t want[64], buf[MOQ_DGRAM_HDR_MAX];
		size_t wl = unhex(g[i].hex, want);
		int hl = moq_dgram_hdr_encode(buf, sizeof(buf), g[i].sub, g[i].seq, g[i].ts);
		uint64_t s, q, t;

		ck_assert_int_eq(hl, (int)(wl - g[i].payload));
		ck_assert_mem_eq(buf, want, (size_t)hl);
		ck_assert_int_eq(moq_dgram_hdr_decode(want, wl, &s, &q, &t), hl);
		ck_assert_uint_eq(s, g[i].sub);
		ck_assert_uint_eq(q, g[i].seq);
		ck_assert_uint_eq(t, g[i].ts);
	}
}
END_TEST

START_TEST(bad_input)
{
	uint8_t b[MOQ_DGRAM_HDR_MAX];
	uint64_t s, q, t;
	const uint8_t cut[] = {0x07, 0x41}; /* the second varint is cut */

	ck_assert_int_eq(moq_dgram_hdr_decode(cut, sizeof(cut), &s, &q, &t), MOQ_ERR_DECODE);
	ck_assert_int_eq(moq_dgram_hdr_decode(cut, 0, &s, &q, &t), MOQ_ERR_DECODE);
	ck_assert_int_eq(moq_dgram_hdr_encode(b, 2, 1, 2, 3), MOQ_ERR_TOO_LARGE);
	ck_assert_int_eq(moq_dgram_hdr_encode(b, sizeof(b), MOQ_VARINT_MAX + 1, 0, 0),
	                 MOQ_ERR_INVAL);
	/* the largest: three 8-byte varints */
	ck_assert_int_eq(moq_dgram_hdr_encode(b, sizeof(b), MOQ_VARINT_MAX, MOQ_VARINT_MAX,
	                                      MOQ_VARINT_MAX),
	                 MOQ_DGRAM_HDR_MAX);
}
END_TEST

Suite *moq_dgram_codec_suite(void);
Suite *moq_dgram_codec_suite(void)
{
	Suite *s = suite_create("moq_dgram_codec");
	TCase *tc = tcase_create("header");

	tcase_add_test(tc, golden_from_moq_net);
	tcase_add_test(tc, bad_input);
	suite_add_tcase(s, tc);
	return s;
}
