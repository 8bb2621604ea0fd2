/* SPDX-License-Identifier: MIT */
/*
 * test_loadgen.c: the load generator's synthetic media (loadgen/media.h):
 * track specs, frame sizes against the configured bitrate, the frame format,
 * streaming verification of frames delivered in chunks, every corruption the
 * verifier must catch, group accounting and the latency histogram.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "media.h"

START_TEST(crc32c_vectors)
{
	/* RFC 3720, B.4 / the common check value of CRC-32C. */
	ck_assert_uint_eq(moq_lg_crc32c(0, "123456789", 9), 0xe3069283u);
	uint8_t zeros[32] = {0};
	ck_assert_uint_eq(moq_lg_crc32c(0, zeros, 32), 0x8a9136aau);
	/* Streaming in pieces gives the same value. */
	uint8_t buf[1000];
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	uint32_t whole = moq_lg_crc32c(0, buf, sizeof(buf));
	uint32_t part = moq_lg_crc32c(0, buf, 13);
	part = moq_lg_crc32c(part, buf + 13, 500);
	part = moq_lg_crc32c(part, buf + 513, sizeof(buf) - 513);
	ck_assert_uint_eq(whole, part);
}
END_TEST

START_TEST(track_parse)
{
	struct moq_lg_track_cfg t;
	ck_assert_int_eq(moq_lg_track_parse("video:1M", 1, &t), 0);
	ck_assert_int_eq(t.kind, MOQ_LG_VIDEO);
	ck_assert_uint_eq(t.bitrate_bps, 1000000);
	ck_assert_uint_eq(t.group_frames, MOQ_LG_VIDEO_GOP);
	ck_assert_uint_eq(t.id, 1);
	ck_assert_str_eq(t.name, "video");
	ck_assert_int_eq(moq_lg_track_parse("video:4Mbps:fps=25:gop=50:key=4:name=hd", 2, &t), 0);
	ck_assert_uint_eq(t.bitrate_bps, 4000000);
	ck_assert_uint_eq(t.frame_ns, 40000000);
	ck_assert_uint_eq(t.group_frames, 50);
	ck_assert_uint_eq(t.key_ratio, 4);
	ck_assert_str_eq(t.name, "hd");
	ck_assert_int_eq(moq_lg_track_parse("audio", 3, &t), 0);
	ck_assert_int_eq(t.kind, MOQ_LG_AUDIO);
	ck_assert_uint_eq(t.bitrate_bps, 64000);
	ck_assert_uint_eq(t.frame_ns, 20000000);
	ck_assert_uint_eq(t.group_frames, 1);
	ck_assert_int_eq(moq_lg_track_parse("audio:128k:ms=10", 3, &t), 0);
	ck_assert_uint_eq(t.bitrate_bps, 128000);
	ck_assert_uint_eq(t.frame_ns, 10000000);
	ck_assert_uint_eq(t.silent, 0);
	/* a silent track (bench-fanout's fixed-cost case): never due */
	ck_assert_int_eq(moq_lg_track_parse("video:silent", 4, &t), 0);
	ck_assert_uint_eq(t.silent, 1);
	{
		struct moq_lg_gen g;

		moq_lg_gen_init(&g, &t, 1000, 0);
		ck_assert_uint_eq(moq_lg_gen_next(&g), UINT64_MAX);
	}
	ck_assert_int_eq(moq_lg_track_parse("video:silentx", 4, &t), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_lg_track_parse("audio:128k:ms=10", 3, &t), 0);

	/* Bad specs change nothing. */
	struct moq_lg_track_cfg before = t;
	const char *bad[] = {"",
	                     "vid",
	                     "video:",
	                     "video:1X",
	                     "video:-1M",
	                     "video:1M:fps=0",
	                     "video:1M:gop=x",
	                     "video:1M:bogus=1",
	                     "video:1M:2M",
	                     "audio:1k",
	                     "video:1k",
	                     "video:100G",
	                     "audio:64k:name=",
	                     "video:1M:ms=0"};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(moq_lg_track_parse(bad[i], 9, &t) == MOQ_ERR_INVAL, "accepted '%s'",
		              bad[i]);
		ck_assert(memcmp(&t, &before, sizeof(t)) == 0);
	}
	ck_assert_int_eq(moq_lg_track_parse(NULL, 1, &t), MOQ_ERR_INVAL);
}
END_TEST

START_TEST(frame_sizes_match_bitrate)
{
	uint64_t rates[] = {1000000, 4000000, 250000};
	for (unsigned r = 0; r < 3; r++) {
		struct moq_lg_track_cfg t = moq_lg_track_video(1, rates[r]);
		uint64_t sum = 0;
		for (uint32_t i = 0; i < t.group_frames; i++)
			sum += moq_lg_frame_size(&t, i);
		double want = (double)rates[r] * 2.0 / 8.0; /* 60 frames at 30 fps = 2 s */
		ck_assert_msg(sum >= want * 0.99 && sum <= want * 1.001, "rate %lu: %lu vs %.0f",
		              (unsigned long)rates[r], (unsigned long)sum, want);
		ck_assert_uint_eq(moq_lg_frame_size(&t, 0), moq_lg_frame_size(&t, 1) * t.key_ratio);
	}
	struct moq_lg_track_cfg a = moq_lg_track_audio(2);
	ck_assert_uint_eq(moq_lg_frame_size(&a, 0), 160); /* 64 kbps * 20 ms / 8 */
}
END_TEST

/* Generate @frames frames of @t into a buffer list. */
struct gframe {
	uint8_t *data;
	struct moq_lg_frame_info info;
};

static struct gframe *gen_frames(const struct moq_lg_track_cfg *t, unsigned frames,
                                 uint64_t first_group)
{
	struct moq_lg_gen g;
	struct gframe *out = calloc(frames, sizeof(*out));
	moq_lg_gen_init(&g, t, 1000000000ull, first_group);
	for (unsigned i = 0; i < frames; i++) {
		uint64_t due = moq_lg_gen_next(&g);
		ck_assert_uint_eq(due, 1000000000ull + i * t->frame_ns);
		out[i].data = malloc(MOQ_LG_FRAME_MAX);
		int n = moq_lg_gen_frame(&g, due, out[i].data, MOQ_LG_FRAME_MAX, &out[i].info);
		ck_assert_int_gt(n, 0);
		ck_assert_uint_eq((unsigned)n, out[i].info.len);
	}
	return out;
}

static void free_frames(struct gframe *f, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		free(f[i].data);
	free(f);
}

/* Feed frames to @r, each in pieces of @chunk bytes (0 = whole), received
 * @lat ns after their send time. Groups begin at index 0, end after last. */
static void feed(struct moq_lg_rx *r, struct gframe *f, unsigned n, size_t chunk, uint64_t lat)
{
	for (unsigned i = 0; i < n; i++) {
		const struct moq_lg_frame_info *in = &f[i].info;
		if (in->index == 0)
			ck_assert_int_eq(moq_lg_rx_group_begin(r, in->group), 0);
		ck_assert_int_eq(moq_lg_rx_frame(r, in->group, in->len), 0);
		uint64_t sent = 1000000000ull; /* read back from the header below */
		memcpy(&sent, f[i].data + 24, 8);
		size_t off = 0;
		while (off < in->len) {
			size_t k = chunk ? chunk : in->len;
			if (k > in->len - off)
				k = in->len - off;
			int rc = moq_lg_rx_data(r, in->group, f[i].data + off, k, sent + lat);
			off += k;
			ck_assert_int_eq(rc, off == in->len ? 1 : 0);
		}
		if (in->last)
			ck_assert_int_eq(moq_lg_rx_group_end(r, in->group, -1), 0);
	}
}

START_TEST(roundtrip_whole_and_chunked)
{
	struct moq_lg_track_cfg t = moq_lg_track_video(7, 1000000);
	t.group_frames = 10;
	unsigned n = 30;
	struct gframe *f = gen_frames(&t, n, 100);
	ck_assert_uint_eq(f[0].info.group, 100);
	ck_assert_uint_eq(f[29].info.group, 102);
	ck_assert_int_eq(f[9].info.last, 1);
	ck_assert_int_eq(f[8].info.last, 0);
	/* chunk sizes around the header and CRC boundaries */
	size_t chunks[] = {0, 1, 3, 7, 8, 9, 47, 48, 49, 1200};
	for (unsigned c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		struct moq_lg_hist h;
		struct moq_lg_rx r;
		moq_lg_hist_reset(&h);
		moq_lg_rx_init(&r, 7, &h);
		feed(&r, f, n, chunks[c], 250000);
		moq_lg_rx_finish(&r);
		ck_assert_uint_eq(r.c.frames_ok, n);
		ck_assert_uint_eq(r.c.groups_ok, 3);
		ck_assert_uint_eq(moq_lg_counts_errors(&r.c), 0);
		ck_assert_uint_eq(r.c.groups_missing, 0);
		ck_assert_uint_eq(r.c.frames_partial, 0);
		ck_assert_uint_eq(h.n, n);
		ck_assert_uint_eq(h.min, 250000);
		ck_assert_uint_eq(h.max, 250000);
	}
	free_frames(f, n);
}
END_TEST

START_TEST(corruption_detected)
{
	struct moq_lg_track_cfg t = moq_lg_track_video(3, 1000000);
	t.group_frames = 4;
	struct gframe *f = gen_frames(&t, 4, 0);
	struct moq_lg_rx r;

	/* one flipped body bit -> CRC */
	moq_lg_rx_init(&r, 3, NULL);
	ck_assert_int_eq(moq_lg_rx_group_begin(&r, 0), 0);
	f[1].data[f[1].info.len - 1] ^= 0x10;
	ck_assert_int_eq(moq_lg_rx_frame(&r, 0, f[0].info.len), 0);
	ck_assert_int_eq(moq_lg_rx_data(&r, 0, f[0].data, f[0].info.len, 1), 1);
	ck_assert_int_eq(moq_lg_rx_frame(&r, 0, f[1].info.len), 0);
	ck_assert_int_eq(moq_lg_rx_data(&r, 0, f[1].data, f[1].info.len, 1), MOQ_ERR_DECODE);
	ck_assert_uint_eq(r.c.frames_bad_crc, 1);
	ck_assert_uint_eq(r.c.frames_ok, 1);
	f[1].data[f[1].info.len - 1] ^= 0x10;

	/* a flipped header bit (the send timestamp) is covered by the CRC too */
	moq_lg_rx_init(&r, 3, NULL);
	moq_lg_rx_group_begin(&r, 0);
	f[0].data[25] ^= 1;
	moq_lg_rx_frame(&r, 0, f[0].info.len);
	ck_assert_int_eq(moq_lg_rx_data(&r, 0, f[0].data, f[0].info.len, 1), MOQ_ERR_DECODE);
	ck_assert_uint_eq(r.c.frames_bad_crc, 1);
	f[0].data[25] ^= 1;

	/* the wrong track */
	moq_lg_rx_init(&r, 4, NULL);
	moq_lg_rx_group_begin(&r, 0);
	moq_lg_rx_frame(&r, 0, f[0].info.len);
	ck_assert_int_eq(moq_lg_rx_data(&r, 0, f[0].data, f[0].info.len, 1), MOQ_ERR_DECODE);
	ck_assert_uint_eq(r.c.frames_bad_hdr, 1);

	/* delivered on the wrong group stream */
	moq_lg_rx_init(&r, 3, NULL);
	moq_lg_rx_group_begin(&r, 5);
	moq_lg_rx_frame(&r, 5, f[0].info.len);
	ck_assert_int_eq(moq_lg_rx_data(&r, 5, f[0].data, f[0].info.len, 1), MOQ_ERR_DECODE);
	ck_assert_uint_eq(r.c.frames_bad_hdr, 1);

	/* a frame header announcing the wrong size */
	moq_lg_rx_init(&r, 3, NULL);
	moq_lg_rx_group_begin(&r, 0);
	moq_lg_rx_frame(&r, 0, f[1].info.len); /* frame 0 is larger */
	ck_assert_int_eq(moq_lg_rx_data(&r, 0, f[0].data, f[1].info.len, 1), MOQ_ERR_DECODE);
	ck_assert_uint_eq(r.c.frames_bad_hdr, 1);

	/* frames out of order: 0, 2, 1 */
	moq_lg_rx_init(&r, 3, NULL);
	moq_lg_rx_group_begin(&r, 0);
	int order[] = {0, 2, 1};
	int want[] = {1, MOQ_ERR_DECODE, MOQ_ERR_DECODE};
	for (int i = 0; i < 3; i++) {
		const struct gframe *x = &f[order[i]];
		moq_lg_rx_frame(&r, 0, x->info.len);
		ck_assert_int_eq(moq_lg_rx_data(&r, 0, x->data, x->info.len, 1), want[i]);
	}
	ck_assert_uint_eq(r.c.frames_bad_order, 2);
	ck_assert_uint_eq(r.c.frames_ok, 1);

	/* more bytes than the frame holds */
	moq_lg_rx_init(&r, 3, NULL);
	moq_lg_rx_group_begin(&r, 0);
	moq_lg_rx_frame(&r, 0, 100);
	ck_assert_int_eq(moq_lg_rx_data(&r, 0, f[0].data, 101, 1), MOQ_ERR_INVAL);
	ck_assert_uint_eq(r.c.frames_bad_hdr, 1);
	/* data for a group that never began */
	ck_assert_int_eq(moq_lg_rx_data(&r, 9, f[0].data, 10, 1), MOQ_ERR_NOTFOUND);
	ck_assert_int_eq(moq_lg_rx_frame(&r, 9, 10), MOQ_ERR_NOTFOUND);
	/* a frame too small to be ours */
	moq_lg_rx_frame(&r, 0, 10);
	ck_assert_int_eq(moq_lg_rx_data(&r, 0, f[0].data, 10, 1), MOQ_ERR_DECODE);
	ck_assert_uint_eq(r.c.frames_bad_hdr, 3);
	ck_assert_uint_eq(r.c.frames_ok, 0);
	free_frames(f, 4);
}
END_TEST

START_TEST(group_accounting)
{
	struct moq_lg_track_cfg t = moq_lg_track_audio(2);
	struct gframe *f = gen_frames(&t, 10, 50); /* groups 50..59, one frame each */
	struct moq_lg_rx r;
	moq_lg_rx_init(&r, 2, NULL);
	/* 50, 51 complete; 52 reset mid-frame (code 31 evicted); 53 skipped;
	 * 55 before 54 (54 is late); 56 twice (dup); 57..59 complete. */
	feed(&r, f, 2, 0, 0);
	ck_assert_int_eq(moq_lg_rx_group_begin(&r, 52), 0);
	moq_lg_rx_frame(&r, 52, f[2].info.len);
	ck_assert_int_eq(moq_lg_rx_data(&r, 52, f[2].data, 20, 0), 0);
	ck_assert_int_eq(moq_lg_rx_group_end(&r, 52, 31), 0);
	feed(&r, f + 5, 1, 0, 0);
	feed(&r, f + 4, 1, 0, 0);
	feed(&r, f + 6, 1, 0, 0);
	ck_assert_int_eq(moq_lg_rx_group_begin(&r, 56), MOQ_ERR_EXISTS);
	feed(&r, f + 7, 3, 7, 0);
	ck_assert_int_eq(moq_lg_rx_group_end(&r, 99, -1), MOQ_ERR_NOTFOUND);
	moq_lg_rx_finish(&r);
	ck_assert_uint_eq(r.c.groups_ok, 8);
	ck_assert_uint_eq(r.c.groups_reset, 1);
	ck_assert_uint_eq(r.c.groups_reset_code[31], 1);
	ck_assert_uint_eq(r.c.frames_partial, 1);
	ck_assert_uint_eq(r.c.groups_missing, 1);
	ck_assert_uint_eq(r.c.groups_late, 1);
	ck_assert_uint_eq(r.c.groups_dup, 1);
	ck_assert_uint_eq(r.c.frames_ok, 8);
	ck_assert_uint_eq(moq_lg_counts_errors(&r.c), 1);

	/* more concurrent groups than tracked: refused and counted */
	moq_lg_rx_init(&r, 2, NULL);
	for (unsigned i = 0; i < MOQ_LG_RX_GROUPS; i++)
		ck_assert_int_eq(moq_lg_rx_group_begin(&r, i), 0);
	ck_assert_int_eq(moq_lg_rx_group_begin(&r, 100), MOQ_ERR_LIMIT);
	ck_assert_uint_eq(r.c.groups_untracked, 1);
	ck_assert_int_eq(moq_lg_rx_frame(&r, 100, 200), MOQ_ERR_NOTFOUND);
	ck_assert_uint_eq(r.c.frames_untracked, 1);
	ck_assert_uint_eq(r.c.frames_bad_hdr, 0);
	/* a frame for a group that never began is an error */
	ck_assert_int_eq(moq_lg_rx_frame(&r, 101, 200), MOQ_ERR_NOTFOUND);
	ck_assert_uint_eq(r.c.frames_bad_hdr, 1);

	/* counts add up */
	struct moq_lg_counts sum;
	memset(&sum, 0, sizeof(sum));
	moq_lg_counts_add(&sum, &r.c);
	moq_lg_counts_add(&sum, &r.c);
	ck_assert_uint_eq(sum.frames_bad_hdr, 2);
	ck_assert_uint_eq(sum.groups_untracked, 2);
	free_frames(f, 10);
}
END_TEST

START_TEST(histogram_percentiles)
{
	struct moq_lg_hist h, h2;
	moq_lg_hist_reset(&h);
	moq_lg_hist_reset(&h2);
	ck_assert_uint_eq(moq_lg_hist_pct(&h, 50), 0);
	/* 1..10000 us, uniform */
	for (uint64_t us = 1; us <= 10000; us++)
		moq_lg_hist_add(us <= 5000 ? &h : &h2, us * 1000);
	moq_lg_hist_merge(&h, &h2);
	ck_assert_uint_eq(h.n, 10000);
	ck_assert_uint_eq(h.min, 1000);
	ck_assert_uint_eq(h.max, 10000000);
	double p50 = (double)moq_lg_hist_pct(&h, 50), p99 = (double)moq_lg_hist_pct(&h, 99);
	ck_assert_msg(p50 >= 5.0e6 && p50 <= 5.0e6 * (1 + 1.0 / 16), "p50 %.0f", p50);
	ck_assert_msg(p99 >= 9.9e6 && p99 <= 9.9e6 * (1 + 1.0 / 16), "p99 %.0f", p99);
	ck_assert_uint_eq(moq_lg_hist_pct(&h, 100), 10000000);
	ck_assert_uint_eq(moq_lg_hist_pct(&h, 0), 1000);
	/* tiny and huge values land in the end slots */
	moq_lg_hist_reset(&h);
	moq_lg_hist_add(&h, 3);
	moq_lg_hist_add(&h, UINT64_MAX / 2);
	ck_assert_uint_eq(moq_lg_hist_pct(&h, 10), 3);
	ck_assert_uint_eq(moq_lg_hist_pct(&h, 99), UINT64_MAX / 2);
}
END_TEST

START_TEST(reports)
{
	struct moq_lg_hist h;
	moq_lg_hist_reset(&h);
	moq_lg_hist_add(&h, 2000000);
	struct moq_lg_report a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.t_s = 1;
	b.t_s = 2;
	b.subs_target = 100;
	b.subs_ready = 90;
	b.c.frames_ok = 500;
	b.c.bytes_ok = 125000; /* 1 Mbit in 1 s */
	b.c.frames_bad_crc = 2;
	b.hist = &h;
	char buf[2048];
	int n = moq_lg_report_json(&b, &a, buf, sizeof(buf));
	ck_assert_int_eq(n, (int)strlen(buf));
	ck_assert_msg(buf[0] == '{' && buf[n - 1] == '}', "%s", buf);
	ck_assert_ptr_nonnull(strstr(buf, "\"subs_ready\":90"));
	ck_assert_ptr_nonnull(strstr(buf, "\"goodput_mbps\":1.000"));
	ck_assert_ptr_nonnull(strstr(buf, "\"errors\":2"));
	ck_assert_ptr_nonnull(strstr(buf, "\"lat_p50_us\":2000.0"));
	n = moq_lg_report_line(&b, &a, buf, sizeof(buf));
	ck_assert_ptr_nonnull(strstr(buf, "subs=90/100"));
	ck_assert_ptr_nonnull(strstr(buf, "errors=2"));
	/* truncation keeps a terminated string */
	n = moq_lg_report_json(&b, NULL, buf, 10);
	ck_assert_int_eq(n, 9);
	ck_assert_uint_eq(strlen(buf), 9);
}
END_TEST

Suite *loadgen_suite(void);
Suite *loadgen_suite(void)
{
	Suite *s = suite_create("loadgen");
	TCase *tc = tcase_create("media");
	tcase_add_test(tc, crc32c_vectors);
	tcase_add_test(tc, track_parse);
	tcase_add_test(tc, frame_sizes_match_bitrate);
	tcase_add_test(tc, roundtrip_whole_and_chunked);
	tcase_add_test(tc, corruption_detected);
	tcase_add_test(tc, group_accounting);
	tcase_add_test(tc, histogram_percentiles);
	tcase_add_test(tc, reports);
	suite_add_tcase(s, tc);
	return s;
}
