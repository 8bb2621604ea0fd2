/* SPDX-License-Identifier: MIT */
/*
 * test_cache.c: unit tests of cache/ (single thread): storage, partial and
 * batched reads, iovecs, billing, eviction, expiry, the window, QSBR
 * reclamation, references, and every bad input.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"

#define NS_MS 1000000ull

static struct moq_cache_counting cnt;
static struct moq_cache *cache;

static struct moq_cache *mk(uint64_t budget)
{
	struct moq_cache_cfg cfg = {0};

	moq_cache_counting_init(&cnt);
	cfg.alloc = moq_cache_counting_alloc(&cnt);
	cfg.budget = budget;
	cfg.max_readers = 4;
	cfg.buckets = 16;
	cache = moq_cache_create(&cfg);
	ck_assert_ptr_nonnull(cache);
	return cache;
}

static int64_t live(void)
{
	return moq_cache_counting_stats(&cnt).live_bytes;
}

static int64_t blocks(void)
{
	return moq_cache_counting_stats(&cnt).live_blocks;
}

static struct moq_cache_track *mktrack(const char *path, const char *name, uint64_t lat,
                                       uint32_t window)
{
	struct moq_cache_track_cfg tc = {lat, window};
	struct moq_cache_track *t = NULL;

	ck_assert_int_eq(
	        moq_cache_track_create(cache, path, strlen(path), name, strlen(name), &tc, &t), 0);
	return t;
}

static struct moq_cache_group *mkgroup(struct moq_cache_track *t, uint64_t seq, uint64_t now)
{
	struct moq_cache_group *g = NULL;

	ck_assert_int_eq(moq_cache_group_open(t, seq, now, &g), 0);
	return g;
}

/* open group @seq at @now and let it be (the track's index holds it) */
static void opengroup(struct moq_cache_track *t, uint64_t seq, uint64_t now)
{
	moq_cache_group_unref(mkgroup(t, seq, now));
}

/* a deterministic pattern: byte i of frame f */
static uint8_t pat(uint32_t f, uint32_t i)
{
	return (uint8_t)(f * 131u + i * 7u + (i >> 8));
}

static uint8_t *pattern(uint32_t f, size_t len)
{
	uint8_t *p = malloc(len ? len : 1);
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = pat(f, (uint32_t)i);
	return p;
}

/* Gather the bytes a view describes (direct or through iovecs). */
static void gather(struct moq_cache_group *g, const struct moq_cache_frame *f, uint8_t *out)
{
	struct iovec iov[64];
	int n, k;
	size_t o = 0;

	if (f->data != NULL) {
		memcpy(out, f->data, f->len);
		return;
	}
	n = moq_cache_group_iov(g, f->offset, f->len, iov, 64);
	ck_assert_int_gt(n, 0);
	for (k = 0; k < n; k++) {
		memcpy(out + o, iov[k].iov_base, iov[k].iov_len);
		o += iov[k].iov_len;
	}
	ck_assert_uint_eq(o, f->len);
}

static void teardown_all(void)
{
	moq_cache_destroy(cache);
	cache = NULL;
	ck_assert_int_eq(live(), 0);
	ck_assert_int_eq(blocks(), 0);
}

/* Extension headers beside the payload: frame i's own, none for frames
 * without, the array grown past its first 16 entries keeps earlier ones,
 * billed, a failed begin leaves nothing, all freed with the group. */
START_TEST(frame_extensions)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_cursor cur = {0};
	uint8_t big[MOQ_CACHE_EXT_MAX + 1] = {0};
	const uint8_t *xp;
	size_t xn;
	uint64_t used;
	int n = 0;

	mk(0);
	t = mktrack("live/x", "video", 0, 0);
	g = mkgroup(t, 0, 0);
	ck_assert(!moq_cache_track_has_ext(t));
	for (int i = 0; i < 40; i++) {
		uint8_t e[3] = {0x02, (uint8_t)i, 0};
		if (i % 3 == 1) {
			ck_assert_int_eq(moq_cache_frame_begin(g, i, 1), 1);
		} else {
			ck_assert_int_eq(moq_cache_frame_begin_ext(g, i, 1, e, 2 + (i % 2)), 1);
		}
		ck_assert_int_eq(moq_cache_frame_append(g, "p", 1), 0);
	}
	ck_assert(moq_cache_track_has_ext(t));
	for (uint32_t i = 0; i < 40; i++) {
		int rc = moq_cache_frame_ext(g, i, &xp, &xn);
		if (i % 3 == 1) {
			ck_assert_int_eq(rc, MOQ_ERR_NOTFOUND);
			continue;
		}
		ck_assert_int_eq(rc, 0);
		ck_assert_uint_eq(xn, 2 + (i % 2));
		ck_assert_int_eq(xp[0], 0x02);
		ck_assert_int_eq(xp[1], (int)i);
	}
	ck_assert_int_eq(moq_cache_frame_ext(g, 40, &xp, &xn), MOQ_ERR_NOTFOUND);
	/* payload readers see the payload only */
	for (;;) {
		struct moq_cache_frame f[8];
		int k = moq_cache_read_frames(g, &cur, f, 8);
		if (k <= 0)
			break;
		for (int i = 0; i < k; i++) {
			ck_assert_uint_eq(f[i].size, 1);
			ck_assert_int_eq(f[i].data[0], 'p');
			n++;
		}
	}
	ck_assert_int_eq(n, 40);
	used = moq_cache_used(cache);
	ck_assert_uint_gt(used,
	                  MOQ_CACHE_GROUP_OVERHEAD + 40 * (MOQ_CACHE_FRAME_OVERHEAD + 1) + 27 * 2);
	/* too large, and a begin that fails: nothing changes */
	ck_assert_int_eq(moq_cache_frame_begin_ext(g, 0, 1, big, sizeof(big)), MOQ_ERR_TOO_LARGE);
	ck_assert_int_eq(moq_cache_group_finish(g), 0);
	ck_assert_int_eq(moq_cache_frame_begin_ext(g, 0, 1, "\x02\x01", 2), MOQ_ERR_CLOSED);
	ck_assert_uint_eq(moq_cache_used(cache), used);
	ck_assert_int_eq(moq_cache_frame_ext(g, 40, &xp, &xn), MOQ_ERR_NOTFOUND);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

/* An IETF object's location beside the frame (moq_cache_frame_begin_meta):
 * kept for frames that have one, with or without extension headers;
 * frame_ext sees only the headers; a frame with neither has nothing; the
 * track is marked; payload readers see the frames in arrival order. */
START_TEST(frame_locations)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_meta m;
	const uint8_t *xp;
	size_t xn;
	int n = 0;

	mk(0);
	t = mktrack("live/x", "video", 0, 0);
	g = mkgroup(t, 0, 0);
	/* a frame with nothing beside it is frame_begin: the track is not marked */
	ck_assert_int_eq(moq_cache_frame_begin_meta(g, 0, 1, &(struct moq_cache_meta){0}), 1);
	ck_assert_int_eq(moq_cache_frame_append(g, "a", 1), 0);
	ck_assert(!moq_cache_track_has_ext(t));
	ck_assert_int_eq(moq_cache_frame_meta(g, 0, &m), MOQ_ERR_NOTFOUND);
	/* frame 1: subgroup 1, object 7, no headers; frame 2: headers and
	 * subgroup 0 object 9; 20 more past the array's first 16 */
	ck_assert_int_eq(
	        moq_cache_frame_begin_meta(
	                g, 1, 1,
	                &(struct moq_cache_meta){.has_loc = true, .subgroup = 1, .object = 7}),
	        1);
	ck_assert_int_eq(moq_cache_frame_append(g, "b", 1), 0);
	ck_assert(moq_cache_track_has_ext(t));
	ck_assert_int_eq(moq_cache_frame_begin_meta(
	                         g, 2, 1,
	                         &(struct moq_cache_meta){.ext = (const uint8_t *)"\x02\x05",
	                                                  .ext_len = 2,
	                                                  .has_loc = true,
	                                                  .object = 9}),
	                 1);
	ck_assert_int_eq(moq_cache_frame_append(g, "c", 1), 0);
	for (uint64_t i = 3; i < 23; i++) {
		struct moq_cache_meta w = {.has_loc = true, .subgroup = i % 2, .object = 10 + i};
		ck_assert_int_eq(moq_cache_frame_begin_meta(g, (int64_t)i, 1, &w), 1);
		ck_assert_int_eq(moq_cache_frame_append(g, "d", 1), 0);
	}
	ck_assert_int_eq(moq_cache_frame_meta(g, 1, &m), 0);
	ck_assert(m.has_loc);
	ck_assert_uint_eq(m.subgroup, 1);
	ck_assert_uint_eq(m.object, 7);
	ck_assert_uint_eq(m.ext_len, 0);
	ck_assert_int_eq(moq_cache_frame_ext(g, 1, &xp, &xn), MOQ_ERR_NOTFOUND);
	ck_assert_int_eq(moq_cache_frame_meta(g, 2, &m), 0);
	ck_assert(m.has_loc);
	ck_assert_uint_eq(m.subgroup, 0);
	ck_assert_uint_eq(m.object, 9);
	ck_assert_uint_eq(m.ext_len, 2);
	ck_assert_int_eq(memcmp(m.ext, "\x02\x05", 2), 0);
	ck_assert_int_eq(moq_cache_frame_ext(g, 2, &xp, &xn), 0);
	ck_assert_uint_eq(xn, 2);
	for (uint32_t i = 3; i < 23; i++) {
		ck_assert_int_eq(moq_cache_frame_meta(g, i, &m), 0);
		ck_assert_uint_eq(m.subgroup, i % 2);
		ck_assert_uint_eq(m.object, 10 + i);
	}
	ck_assert_int_eq(moq_cache_frame_meta(g, 23, &m), MOQ_ERR_NOTFOUND);
	for (;;) {
		struct moq_cache_frame f[8];
		int k = moq_cache_read_frames(g, &cur, f, 8);
		if (k <= 0)
			break;
		for (int i = 0; i < k; i++, n++)
			ck_assert_int_eq(f[i].data[0], n == 0   ? 'a'
			                               : n == 1 ? 'b'
			                               : n == 2 ? 'c'
			                                        : 'd');
	}
	ck_assert_int_eq(n, 23);
	ck_assert_int_eq(moq_cache_group_finish(g), 0);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(small_frames_exact_fit)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame f;
	int64_t before_bytes, before_blocks;
	uint8_t *p = pattern(1, 2048);
	uint64_t allocs;

	mk(0);
	t = mktrack("live/a", "audio", 0, 0);
	g = mkgroup(t, 0, 0);
	before_bytes = live();
	before_blocks = blocks();
	allocs = moq_cache_counting_stats(&cnt).total_allocs;
	ck_assert_int_eq(moq_cache_write_frame(g, 10, p, 160), 0);
	ck_assert_int_eq(moq_cache_write_frame(g, 30, p, 2048), 0);
	/* exactly one allocation of exactly the frame's size each */
	ck_assert_int_eq(live() - before_bytes, 160 + 2048);
	ck_assert_int_eq(blocks() - before_blocks, 2);
	ck_assert_uint_eq(moq_cache_counting_stats(&cnt).total_allocs - allocs, 2);
	ck_assert_int_eq(moq_cache_read_frame(g, &cur, &f), 1);
	ck_assert_int_eq(f.timestamp, 10);
	ck_assert_uint_eq(f.size, 160);
	ck_assert_uint_eq(f.len, 160);
	ck_assert_uint_eq(f.offset, 0);
	ck_assert_ptr_nonnull(f.data);
	ck_assert_ptr_ne(f.data, p);
	ck_assert_mem_eq(f.data, p, 160);
	ck_assert(moq_cache_frame_complete(&f));
	ck_assert_int_eq(moq_cache_read_frame(g, &cur, &f), 1);
	ck_assert_uint_eq(f.offset, 160);
	ck_assert_uint_eq(f.index, 1);
	ck_assert_mem_eq(f.data, p, 2048);
	ck_assert_int_eq(moq_cache_read_frame(g, &cur, &f), 0);
	ck_assert_int_eq(moq_cache_group_finish(g), 0);
	ck_assert_int_eq(moq_cache_read_frame(g, &cur, &f), MOQ_ERR_CLOSED);
	free(p);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(large_frame_in_group_blocks)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame f;
	size_t len = 100000;
	uint8_t *p = pattern(2, len), *out = malloc(len);
	int64_t before;

	mk(0);
	t = mktrack("live/a", "video", 0, 0);
	g = mkgroup(t, 0, 0);
	before = live();
	ck_assert_int_eq(moq_cache_write_frame(g, 1, p, len), 0);
	/* group blocks of 64 B .. 64 KiB, sized so the frame wastes < 64 B */
	ck_assert_int_ge(live() - before, (int64_t)len);
	ck_assert_int_lt(live() - before, (int64_t)len + 64 + 64 * 32);
	ck_assert_int_eq(moq_cache_read_frame(g, &cur, &f), 1);
	ck_assert_uint_eq(f.size, len);
	ck_assert_uint_eq(f.len, len);
	ck_assert_ptr_null(f.data); /* spans blocks */
	gather(g, &f, out);
	ck_assert_mem_eq(out, p, len);
	free(p);
	free(out);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(chunked_frame_read_chunk_by_chunk)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame f;
	size_t len = 5000, off = 0, got = 0;
	uint8_t *p = pattern(3, len), *out = calloc(1, len);
	int64_t rem;

	mk(0);
	t = mktrack("b", "v", 0, 0);
	g = mkgroup(t, 7, 0);
	ck_assert_int_eq(moq_cache_frame_begin(g, 99, len), (int64_t)len);
	/* visible at once, but nothing to read yet */
	ck_assert_int_eq(moq_cache_read_frame(g, &cur, &f), 0);
	/* a second frame cannot start while this one is open */
	ck_assert_int_eq(moq_cache_write_frame(g, 1, p, 10), MOQ_ERR_STATE);
	ck_assert_int_eq(moq_cache_frame_begin(g, 1, 10), MOQ_ERR_STATE);
	ck_assert_int_eq(moq_cache_group_finish(g), MOQ_ERR_STATE);
	while (off < len) {
		size_t c = len - off < 1150 ? len - off : 1150;

		rem = moq_cache_frame_append(g, p + off, c);
		off += c;
		ck_assert_int_eq(rem, (int64_t)(len - off));
		/* each chunk is readable as soon as it is appended */
		while (got < off) {
			int n = moq_cache_read_frame(g, &cur, &f);

			ck_assert_int_eq(n, 1);
			ck_assert_int_eq(f.timestamp, 99);
			ck_assert_uint_eq(f.size, len);
			ck_assert_uint_eq(f.start, got);
			ck_assert_ptr_nonnull(f.data);
			memcpy(out + got, f.data, f.len);
			got += f.len;
		}
		ck_assert_int_eq(moq_cache_read_frame(g, &cur, &f), 0);
	}
	ck_assert(moq_cache_frame_complete(&f));
	ck_assert_mem_eq(out, p, len);
	ck_assert_int_eq(moq_cache_frame_append(g, p, 1), MOQ_ERR_STATE);
	/* the frame after it reads from its start */
	ck_assert_int_eq(moq_cache_write_frame(g, 100, p, 10), 0);
	ck_assert_int_eq(moq_cache_read_frame(g, &cur, &f), 1);
	ck_assert_uint_eq(f.index, 1);
	ck_assert_uint_eq(f.start, 0);
	ck_assert_uint_eq(f.offset, len);
	ck_assert_mem_eq(f.data, p, 10);
	free(p);
	free(out);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(chunked_then_complete_reads_rest)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame f[8];
	uint8_t *p = pattern(4, 3000), *out = calloc(1, 3000);

	mk(0);
	t = mktrack("b", "v", 0, 0);
	g = mkgroup(t, 0, 0);
	ck_assert_int_eq(moq_cache_frame_begin(g, 5, 3000), 3000);
	ck_assert_int_eq(moq_cache_frame_append(g, p, 1000), 2000);
	ck_assert_int_eq(moq_cache_read_frames(g, &cur, f, 8), 1);
	ck_assert_uint_eq(f[0].len, 1000);
	memcpy(out, f[0].data, 1000);
	ck_assert_int_eq(moq_cache_frame_append(g, p + 1000, 2000), 0);
	ck_assert_int_eq(moq_cache_write_frame(g, 6, p, 50), 0);
	/* the rest of the first frame and the next, as one batch */
	ck_assert_int_eq(moq_cache_read_frames(g, &cur, f, 8), 2);
	ck_assert_uint_eq(f[0].start, 1000);
	ck_assert_uint_eq(f[0].len, 2000);
	ck_assert_uint_eq(f[0].offset, 1000);
	gather(g, &f[0], out + 1000);
	ck_assert_mem_eq(out, p, 3000);
	ck_assert_uint_eq(f[1].offset, 3000);
	ck_assert_mem_eq(f[1].data, p, 50);
	free(p);
	free(out);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(small_frame_whole_in_one_chunk_is_exact)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	int64_t before;
	uint8_t *p = pattern(5, 700);

	mk(0);
	t = mktrack("b", "v", 0, 0);
	g = mkgroup(t, 0, 0);
	before = live();
	ck_assert_int_eq(moq_cache_frame_begin(g, 0, 700), 700);
	ck_assert_int_eq(moq_cache_frame_append(g, p, 700), 0);
	ck_assert_int_eq(live() - before, 700);
	/* the same frame in two chunks goes to a group block */
	before = live();
	ck_assert_int_eq(moq_cache_frame_begin(g, 0, 700), 700);
	ck_assert_int_eq(moq_cache_frame_append(g, p, 300), 400);
	ck_assert_int_eq(moq_cache_frame_append(g, p + 300, 400), 0);
	ck_assert_int_ge(live() - before, 700);
	free(p);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(batch_read_and_write)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame f[MOQ_CACHE_BATCH];
	struct moq_cache_frame_in in[100];
	uint8_t *p[100];
	unsigned i, seen = 0;
	int n;

	mk(0);
	t = mktrack("b", "v", 0, 0);
	g = mkgroup(t, 0, 0);
	for (i = 0; i < 100; i++) {
		size_t len = (i * 37) % 3000; /* some exact, some in blocks, some empty */

		p[i] = pattern(i, len);
		in[i].timestamp = i;
		in[i].data = p[i];
		in[i].len = len;
	}
	ck_assert_int_eq(moq_cache_write_frames(g, in, 100), 100);
	ck_assert_int_eq(moq_cache_group_finish(g), 0);
	while ((n = moq_cache_read_frames(g, &cur, f, MOQ_CACHE_BATCH)) > 0) {
		int k;

		ck_assert_int_le(n, MOQ_CACHE_BATCH);
		if (seen + MOQ_CACHE_BATCH <= 100)
			ck_assert_int_eq(n, MOQ_CACHE_BATCH);
		for (k = 0; k < n; k++) {
			uint8_t *buf = malloc(in[seen].len + 1);

			ck_assert_uint_eq(f[k].index, seen);
			ck_assert_int_eq(f[k].timestamp, seen);
			ck_assert_uint_eq(f[k].size, in[seen].len);
			ck_assert(moq_cache_frame_complete(&f[k]));
			if (f[k].len) {
				gather(g, &f[k], buf);
				ck_assert_mem_eq(buf, p[seen], f[k].len);
			}
			free(buf);
			seen++;
		}
	}
	ck_assert_int_eq(n, MOQ_ERR_CLOSED);
	ck_assert_uint_eq(seen, 100);
	ck_assert_int_eq(moq_cache_read_frames(g, &cur, f, 0), MOQ_ERR_INVAL);
	for (i = 0; i < 100; i++)
		free(p[i]);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(iov_by_offset)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	uint8_t *ref = malloc(200000), *out = malloc(200000);
	size_t total = 0, lens[] = {100, 5000, 0, 2048, 2049, 70000, 1, 64, 65, 90000};
	unsigned i;
	struct iovec iov[256];

	mk(0);
	t = mktrack("b", "v", 0, 0);
	g = mkgroup(t, 0, 0);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint8_t *p = pattern(i, lens[i]);

		if (i % 2 == 0) {
			ck_assert_int_eq(moq_cache_write_frame(g, i, p, lens[i]), 0);
		} else {
			size_t o = 0;

			ck_assert_int_eq(moq_cache_frame_begin(g, i, lens[i]), (int64_t)lens[i]);
			while (o < lens[i]) {
				size_t c = lens[i] - o < 1150 ? lens[i] - o : 1150;

				ck_assert_int_ge(moq_cache_frame_append(g, p + o, c), 0);
				o += c;
			}
		}
		memcpy(ref + total, p, lens[i]);
		total += lens[i];
		free(p);
	}
	/* every (offset, length) over a grid reassembles the reference bytes */
	for (size_t off = 0; off < total; off += 997) {
		for (size_t len = 1; off + len <= total; len = len * 3 + 1) {
			int n = moq_cache_group_iov(g, off, len, iov, 256), k;
			size_t o = 0;

			ck_assert_int_gt(n, 0);
			for (k = 0; k < n; k++) {
				memcpy(out + o, iov[k].iov_base, iov[k].iov_len);
				o += iov[k].iov_len;
			}
			ck_assert_uint_eq(o, len);
			ck_assert_mem_eq(out, ref + off, len);
		}
	}
	ck_assert_int_eq(moq_cache_group_iov(g, total, 10, iov, 4), 0);
	ck_assert_int_eq(moq_cache_group_iov(g, 0, 10, iov, 0), MOQ_ERR_INVAL);
	/* a short iovec array stops early */
	ck_assert_int_eq(moq_cache_group_iov(g, 0, total, iov, 2), 2);
	free(ref);
	free(out);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(billing_formula)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g, *g2;
	uint8_t *p = pattern(0, 10000);

	mk(0);
	t = mktrack("b", "v", 0, 0);
	ck_assert_uint_eq(moq_cache_used(cache), 0);
	g = mkgroup(t, 0, 0);
	ck_assert_uint_eq(moq_cache_used(cache), MOQ_CACHE_GROUP_OVERHEAD);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, p, 100), 0);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, p, 10000), 0);
	ck_assert_int_eq(moq_cache_frame_begin(g, 0, 3000), 3000);
	ck_assert_int_eq(moq_cache_frame_append(g, p, 1000), 2000);
	ck_assert_uint_eq(moq_cache_used(cache),
	                  MOQ_CACHE_GROUP_OVERHEAD + 3 * MOQ_CACHE_FRAME_OVERHEAD + 11100);
	ck_assert_int_eq(moq_cache_frame_append(g, p, 2000), 0);
	g2 = mkgroup(t, 1, 0);
	ck_assert_uint_eq(moq_cache_used(cache),
	                  2 * MOQ_CACHE_GROUP_OVERHEAD + 3 * MOQ_CACHE_FRAME_OVERHEAD + 13100);
	ck_assert_int_eq(moq_cache_group_evict(g), 0);
	ck_assert_uint_eq(moq_cache_used(cache), MOQ_CACHE_GROUP_OVERHEAD);
	ck_assert_int_eq(moq_cache_group_evict(g), MOQ_ERR_NOTFOUND);
	free(p);
	moq_cache_group_unref(g);
	moq_cache_group_unref(g2);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(evicting_a_group_frees_all_its_memory)
{
	struct moq_cache_track *a, *v;
	struct moq_cache_group *ga, *gv, *gv2;
	uint8_t *p = pattern(0, 50000);
	int64_t base, with_audio;
	int i;

	mk(0);
	a = mktrack("b", "audio", 0, 0);
	v = mktrack("b", "video", 0, 0);
	base = live();
	ga = mkgroup(a, 0, 0);
	for (i = 0; i < 50; i++)
		ck_assert_int_eq(moq_cache_write_frame(ga, i, p, 160), 0);
	moq_cache_group_unref(ga);
	with_audio = live();
	/* interleave video, chunked */
	gv = mkgroup(v, 0, 0);
	for (i = 0; i < 30; i++) {
		ck_assert_int_eq(moq_cache_frame_begin(gv, i, 1500), 1500);
		ck_assert_int_eq(moq_cache_frame_append(gv, p, 700), 800);
		ck_assert_int_eq(moq_cache_frame_append(gv, p, 800), 0);
	}
	moq_cache_group_finish(gv);
	moq_cache_group_unref(gv);
	gv2 = mkgroup(v, 1, 0);
	ck_assert_int_eq(moq_cache_track_group(v, 0, &gv), 0);
	ck_assert_int_eq(moq_cache_group_evict(gv), 0);
	moq_cache_group_unref(gv);
	moq_cache_group_unref(gv2);
	ck_assert_int_eq(moq_cache_track_group(v, 1, &gv2), 0);
	ck_assert_int_eq(moq_cache_group_evict(gv2), 0);
	moq_cache_group_unref(gv2);
	/* only the audio group (and the tracks) remain */
	ck_assert_int_eq(live(), with_audio);
	ck_assert_int_gt(with_audio, base);
	ck_assert_int_eq(moq_cache_track_drop(a), 0);
	ck_assert_int_eq(moq_cache_track_drop(a), MOQ_ERR_CLOSED);
	ck_assert_int_eq(live(), base);
	free(p);
	moq_cache_track_unref(a);
	moq_cache_track_unref(v);
	teardown_all();
}
END_TEST

START_TEST(budget_evicts_oldest_never_newest)
{
	struct moq_cache_track *a, *b;
	struct moq_cache_group *g;
	uint8_t *p = pattern(0, 10000);
	uint64_t per = MOQ_CACHE_GROUP_OVERHEAD + MOQ_CACHE_FRAME_OVERHEAD + 10000;
	uint64_t s;

	mk(3 * per);
	a = mktrack("b", "a", 0, 0);
	b = mktrack("b", "b", 0, 0);
	/* a0 b0 a1: full budget */
	g = mkgroup(a, 0, 0);
	moq_cache_write_frame(g, 0, p, 10000);
	moq_cache_group_unref(g);
	g = mkgroup(b, 0, 0);
	moq_cache_write_frame(g, 0, p, 10000);
	moq_cache_group_unref(g);
	g = mkgroup(a, 1, 0);
	moq_cache_write_frame(g, 0, p, 10000);
	moq_cache_group_unref(g);
	ck_assert_uint_eq(moq_cache_used(cache), 3 * per);
	/* a2 pushes a0 (the oldest) out, not b0 (older than a1 but newest of b) */
	g = mkgroup(a, 2, 0);
	moq_cache_write_frame(g, 0, p, 10000);
	moq_cache_group_unref(g);
	ck_assert_int_eq(moq_cache_track_group(a, 0, &g), MOQ_ERR_EVICTED);
	ck_assert_int_eq(moq_cache_track_group(b, 0, &g), 0);
	moq_cache_group_unref(g);
	ck_assert_uint_le(moq_cache_used(cache), 3 * per);
	/* a3: a1 goes; b0 stays although it is now the oldest group */
	g = mkgroup(a, 3, 0);
	moq_cache_write_frame(g, 0, p, 10000);
	moq_cache_group_unref(g);
	ck_assert_int_eq(moq_cache_track_group(a, 1, &g), MOQ_ERR_EVICTED);
	ck_assert_int_eq(moq_cache_track_group(b, 0, &g), 0);
	moq_cache_group_unref(g);
	/* a newest group alone over budget is kept */
	moq_cache_budget_set(cache, 100);
	ck_assert_int_eq(moq_cache_track_latest(a, &s), 0);
	ck_assert_uint_eq(s, 3);
	ck_assert_int_eq(moq_cache_track_group(a, 3, &g), 0);
	moq_cache_group_unref(g);
	ck_assert_int_eq(moq_cache_track_group(a, 2, &g), MOQ_ERR_EVICTED);
	ck_assert_int_eq(moq_cache_track_group(b, 0, &g), 0);
	moq_cache_group_unref(g);
	ck_assert_uint_eq(moq_cache_used(cache), 2 * per);
	free(p);
	moq_cache_track_unref(a);
	moq_cache_track_unref(b);
	teardown_all();
}
END_TEST

START_TEST(eviction_never_frees_what_a_reader_holds)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g, *r;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame f[4];
	uint8_t *p = pattern(9, 100000);
	int64_t held;
	struct iovec iov[16];
	int n, n0;

	mk(0);
	t = mktrack("b", "v", 0, 0);
	g = mkgroup(t, 0, 0);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, p, 1000), 0);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, p, 100000), 0);
	moq_cache_group_unref(g);
	ck_assert_int_eq(moq_cache_track_group(t, 0, &r), 0); /* the reader's reference */
	ck_assert_int_eq(moq_cache_read_frames(r, &cur, f, 4), 2);
	n0 = moq_cache_group_iov(r, f[1].offset, f[1].len, iov, 16);
	ck_assert_int_ge(n0, 2);
	g = mkgroup(t, 1, 0);
	held = live();
	ck_assert_int_eq(moq_cache_group_evict(r), 0);
	ck_assert_uint_eq(moq_cache_used(cache), MOQ_CACHE_GROUP_OVERHEAD);
	/* removed: the reader is told, but its bytes stay put and readable */
	ck_assert_int_eq(moq_cache_read_frames(r, &cur, f, 4), MOQ_ERR_EVICTED);
	ck_assert_int_eq(moq_cache_group_status(r, NULL, NULL), MOQ_ERR_EVICTED);
	ck_assert_int_ge(live(), held);
	ck_assert_mem_eq(f[0].data, p, 1000);
	n = moq_cache_group_iov(r, f[1].offset, f[1].len, iov, 16);
	ck_assert_int_eq(n, n0);
	{
		size_t o = 0;
		int k;

		for (k = 0; k < n; k++) {
			ck_assert_mem_eq(iov[k].iov_base, p + o, iov[k].iov_len);
			o += iov[k].iov_len;
		}
		ck_assert_uint_eq(o, 100000);
	}
	ck_assert_int_eq(moq_cache_track_group(t, 0, &g), MOQ_ERR_EVICTED);
	held = live();
	moq_cache_group_unref(r); /* the last holder frees it */
	ck_assert_int_le(live(), held - 101000);
	moq_cache_group_unref(g);
	free(p);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(expiry_after_max_latency)
{
	struct moq_cache_track *t, *u;
	struct moq_cache_group *g0, *g1, *g2, *g;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame f;

	mk(0);
	t = mktrack("b", "v", 100 * NS_MS, 0);
	u = mktrack("b", "default", 0, 0);
	g0 = mkgroup(t, 0, 0);
	g1 = mkgroup(t, 1, 60 * NS_MS);
	moq_cache_write_frame(g0, 0, "x", 1);
	/* not yet expired at 100 ms */
	ck_assert_int_eq(moq_cache_expire(cache, 100 * NS_MS), 0);
	/* 150 ms: group 0 (created at 0) is older than 100 ms */
	ck_assert_int_eq(moq_cache_expire(cache, 150 * NS_MS), 1);
	ck_assert_int_eq(moq_cache_track_group(t, 0, &g), MOQ_ERR_OLD);
	ck_assert_int_eq(moq_cache_read_frame(g0, &cur, &f), MOQ_ERR_OLD);
	ck_assert_int_eq(moq_cache_write_frame(g0, 0, "x", 1), MOQ_ERR_OLD);
	/* the newest group never expires on its own */
	ck_assert_int_eq(moq_cache_expire(cache, 1000 * NS_MS), 0);
	ck_assert_int_eq(moq_cache_track_group(t, 1, &g), 0);
	moq_cache_group_unref(g);
	/* opening a newer group expires it */
	g2 = mkgroup(t, 5, 1000 * NS_MS);
	ck_assert_int_eq(moq_cache_track_group(t, 1, &g), MOQ_ERR_OLD);
	ck_assert_int_eq(moq_cache_track_group(t, 3, &g), MOQ_ERR_NOTFOUND);
	ck_assert_int_eq(moq_cache_track_group(t, 6, &g), MOQ_ERR_AGAIN);
	moq_cache_group_unref(g0);
	moq_cache_group_unref(g1);
	moq_cache_group_unref(g2);
	/* default 5 s */
	g0 = mkgroup(u, 0, 0);
	g1 = mkgroup(u, 1, 1);
	ck_assert_int_eq(moq_cache_expire(cache, 5000 * NS_MS), 0);
	ck_assert_int_eq(moq_cache_expire(cache, 5000 * NS_MS + 1), 1);
	moq_cache_group_unref(g0);
	moq_cache_group_unref(g1);
	moq_cache_track_unref(t);
	moq_cache_track_unref(u);
	teardown_all();
}
END_TEST

START_TEST(window_lagged)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g, *g0;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame f;
	uint64_t s;

	mk(0);
	t = mktrack("b", "v", 0, 4);
	ck_assert_int_eq(moq_cache_track_latest(t, &s), MOQ_ERR_AGAIN);
	ck_assert_int_eq(moq_cache_track_group(t, 0, &g), MOQ_ERR_AGAIN);
	g0 = mkgroup(t, 0, 0);
	for (s = 1; s < 4; s++) {
		g = mkgroup(t, s, 0);
		moq_cache_group_unref(g);
	}
	ck_assert_int_eq(moq_cache_track_group(t, 0, &g), 0);
	moq_cache_group_unref(g);
	g = mkgroup(t, 4, 0); /* window of 4: group 0 falls out */
	moq_cache_group_unref(g);
	ck_assert_int_eq(moq_cache_track_group(t, 0, &g), MOQ_ERR_LAGGED);
	ck_assert_int_eq(moq_cache_read_frame(g0, &cur, &f), MOQ_ERR_LAGGED);
	g = mkgroup(t, 100, 0);
	moq_cache_group_unref(g);
	ck_assert_int_eq(moq_cache_track_group(t, 3, &g), MOQ_ERR_LAGGED);
	ck_assert_int_eq(moq_cache_track_group(t, 50, &g), MOQ_ERR_LAGGED);
	ck_assert_int_eq(moq_cache_track_group(t, 98, &g), MOQ_ERR_NOTFOUND);
	ck_assert_int_eq(moq_cache_track_latest(t, &s), 0);
	ck_assert_uint_eq(s, 100);
	moq_cache_group_unref(g0);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(lookup_and_drop)
{
	struct moq_cache_track *t1, *t2, *t3, *x;
	struct moq_cache_group *g;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame f;
	struct moq_cache_track_cfg tc = {0, 0};
	uint64_t v;

	mk(0);
	t1 = mktrack("live/one", "video", 0, 0);
	t2 = mktrack("live/one", "audio", 0, 0);
	t3 = mktrack("live/two", "video", 0, 0);
	ck_assert_int_eq(moq_cache_track_create(cache, "live/one", 8, "video", 5, &tc, &x),
	                 MOQ_ERR_EXISTS);
	x = moq_cache_track_lookup(cache, "live/one", 8, "audio", 5);
	ck_assert_ptr_eq(x, t2);
	moq_cache_track_unref(x);
	ck_assert_ptr_null(moq_cache_track_lookup(cache, "live/one", 8, "audi", 4));
	ck_assert_ptr_null(moq_cache_track_lookup(cache, "live/on", 7, "evideo", 6));
	v = moq_cache_track_version(t1);
	g = mkgroup(t1, 0, 0);
	ck_assert_uint_ne(moq_cache_track_version(t1), v);
	v = moq_cache_track_version(t1);
	moq_cache_write_frame(g, 0, "abc", 3);
	ck_assert_uint_ne(moq_cache_track_version(t1), v);
	ck_assert_int_eq(moq_cache_broadcast_drop(cache, "live/one", 8), 2);
	ck_assert_ptr_null(moq_cache_track_lookup(cache, "live/one", 8, "video", 5));
	ck_assert_ptr_eq((x = moq_cache_track_lookup(cache, "live/two", 8, "video", 5)), t3);
	moq_cache_track_unref(x);
	/* the group's holders see the track is gone */
	ck_assert_int_eq(moq_cache_read_frame(g, &cur, &f), MOQ_ERR_CLOSED);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, "abc", 3), MOQ_ERR_CLOSED);
	ck_assert_int_eq(moq_cache_group_open(t1, 1, 0, &g), MOQ_ERR_CLOSED);
	moq_cache_group_unref(g);
	ck_assert_int_eq(moq_cache_track_latest(t1, &v), MOQ_ERR_CLOSED);
	/* the name can be used again */
	x = mktrack("live/one", "video", 0, 0);
	moq_cache_track_unref(x);
	moq_cache_track_unref(t1);
	moq_cache_track_unref(t2);
	moq_cache_track_unref(t3);
	teardown_all();
}
END_TEST

START_TEST(abort_gives_dropped)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame f;

	mk(0);
	t = mktrack("b", "v", 0, 0);
	g = mkgroup(t, 0, 0);
	moq_cache_write_frame(g, 0, "abc", 3);
	ck_assert_int_eq(moq_cache_frame_begin(g, 0, 100), 100);
	ck_assert_int_eq(moq_cache_group_abort(g), 0);
	ck_assert_int_eq(moq_cache_group_abort(g), MOQ_ERR_CLOSED);
	ck_assert_int_eq(moq_cache_read_frame(g, &cur, &f), MOQ_ERR_DROPPED);
	ck_assert_int_eq(moq_cache_group_status(g, NULL, NULL), MOQ_ERR_DROPPED);
	ck_assert_int_eq(moq_cache_group_finish(g), MOQ_ERR_CLOSED);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

/* moq_cache_group_reopen: only the track's newest group, and only when it
 * was aborted, is replaced; a reader holding the old one still sees it
 * dropped, a lookup gets the new one, and the memory of both is billed
 * once each and freed with the track. */
START_TEST(reopen_aborted_newest)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g, *old, *nw, *x = NULL;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame f;
	uint64_t latest = 0, used;

	mk(0);
	t = mktrack("b", "v", 0, 0);
	g = mkgroup(t, 0, 0);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, "abc", 3), 0);
	ck_assert_int_eq(moq_cache_group_finish(g), 0);
	/* finished: refused */
	ck_assert_int_eq(moq_cache_group_reopen(t, 0, 1, &x), MOQ_ERR_ORDER);
	moq_cache_group_unref(g);
	old = mkgroup(t, 1, 2);
	/* open (a writer is on it), or not the newest: refused */
	ck_assert_int_eq(moq_cache_group_reopen(t, 1, 3, &x), MOQ_ERR_ORDER);
	ck_assert_int_eq(moq_cache_group_reopen(t, 0, 3, &x), MOQ_ERR_ORDER);
	ck_assert_int_eq(moq_cache_group_reopen(t, 2, 3, &x), MOQ_ERR_ORDER);
	ck_assert_ptr_null(x);
	ck_assert_int_eq(moq_cache_write_frame(old, 0, "defg", 4), 0);
	ck_assert_int_eq(moq_cache_group_abort(old), 0);
	ck_assert_int_eq(moq_cache_group_reopen(t, 1, 4, NULL), MOQ_ERR_INVAL);
	used = moq_cache_used(cache);
	ck_assert_int_eq(moq_cache_group_reopen(t, 1, 4, &nw), 0);
	ck_assert_uint_eq(moq_cache_group_seq(nw), 1);
	/* the old group's bill (its frame, the same descriptor) went with it */
	ck_assert_uint_lt(moq_cache_used(cache), used);
	/* its holder: dropped as before */
	ck_assert_int_eq(moq_cache_read_frame(old, &cur, &f), MOQ_ERR_DROPPED);
	ck_assert_int_eq(moq_cache_group_status(old, NULL, NULL), MOQ_ERR_DROPPED);
	moq_cache_group_unref(old);
	/* a reader looking it up: the new one, open, the newest still 1 */
	ck_assert_int_eq(moq_cache_track_latest(t, &latest), 0);
	ck_assert_uint_eq(latest, 1);
	ck_assert_int_eq(moq_cache_track_group(t, 1, &x), 0);
	ck_assert_ptr_eq(x, nw);
	ck_assert_int_eq(moq_cache_group_status(x, NULL, NULL), 0);
	moq_cache_group_unref(x);
	ck_assert_int_eq(moq_cache_write_frame(nw, 5, "hijkl", 5), 0);
	ck_assert_int_eq(moq_cache_group_finish(nw), 0);
	memset(&cur, 0, sizeof(cur));
	ck_assert_int_eq(moq_cache_read_frame(nw, &cur, &f), 1);
	ck_assert_uint_eq(f.len, 5);
	ck_assert_int_eq(memcmp(f.data, "hijkl", 5), 0);
	/* finished now: not replaced again; the next group opens as usual */
	ck_assert_int_eq(moq_cache_group_reopen(t, 1, 5, &x), MOQ_ERR_ORDER);
	moq_cache_group_unref(nw);
	opengroup(t, 2, 6);
	ck_assert_int_eq(moq_cache_track_group(t, 1, &x), 0);
	moq_cache_group_unref(x);
	/* a dropped track: closed */
	ck_assert_int_eq(moq_cache_track_drop(t), 0);
	ck_assert_int_eq(moq_cache_group_reopen(t, 2, 7, &x), MOQ_ERR_CLOSED);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

/* moq_cache_group_ts: the first and the newest published frame's
 * timestamps (lite-06 Max Age reads them); none before the first frame; a
 * chunked frame counts from its begin; a rejected batch changes nothing. */
START_TEST(group_first_and_newest_ts)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_frame_in bad[2] = {{70, "x", 1}, {80, NULL, MOQ_CACHE_GROUP_CAP + 1}};
	int64_t ts = -1;

	mk(0);
	t = mktrack("b", "v", 0, 0);
	g = mkgroup(t, 0, 0);
	ck_assert_int_eq(moq_cache_group_ts(g, 0, &ts), MOQ_ERR_NOTFOUND);
	ck_assert_int_eq(moq_cache_group_ts(g, 1, &ts), MOQ_ERR_NOTFOUND);
	ck_assert_int_eq(ts, -1);
	ck_assert_int_eq(moq_cache_write_frame(g, 40, "abc", 3), 0);
	ck_assert_int_eq(moq_cache_group_ts(g, 0, &ts), 0);
	ck_assert_int_eq(ts, 40);
	ck_assert_int_eq(moq_cache_group_ts(g, 1, &ts), 0);
	ck_assert_int_eq(ts, 40);
	ck_assert_int_eq(moq_cache_frame_begin(g, 60, 4), 4);
	ck_assert_int_eq(moq_cache_group_ts(g, 1, &ts), 0);
	ck_assert_int_eq(ts, 60);
	ck_assert_int_eq(moq_cache_frame_append(g, "defg", 4), 0);
	ck_assert_int_lt(moq_cache_write_frames(g, bad, 2), 0);
	ck_assert_int_eq(moq_cache_group_ts(g, 1, &ts), 0);
	ck_assert_int_eq(ts, 60);
	ck_assert_int_eq(moq_cache_group_ts(g, 0, &ts), 0);
	ck_assert_int_eq(ts, 40);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

/* Snapshot of everything bad input must leave alone. */
struct snap {
	uint64_t used, version;
	int64_t live;
	uint64_t bytes;
	uint32_t frames;
	int status;
};

static struct snap snap(struct moq_cache_track *t, struct moq_cache_group *g)
{
	struct snap s;

	s.used = moq_cache_used(cache);
	s.version = moq_cache_track_version(t);
	s.live = live();
	s.status = moq_cache_group_status(g, &s.bytes, &s.frames);
	return s;
}

/* the parts of a snapshot that belong to one track */
static void same_track(struct snap a, struct snap b)
{
	ck_assert_uint_eq(a.version, b.version);
	ck_assert_uint_eq(a.bytes, b.bytes);
	ck_assert_uint_eq(a.frames, b.frames);
	ck_assert_int_eq(a.status, b.status);
}

static void same(struct snap a, struct snap b)
{
	ck_assert_uint_eq(a.used, b.used);
	ck_assert_uint_eq(a.version, b.version);
	ck_assert_int_eq(a.live, b.live);
	ck_assert_uint_eq(a.bytes, b.bytes);
	ck_assert_uint_eq(a.frames, b.frames);
	ck_assert_int_eq(a.status, b.status);
}

/* Issue 22 item 19: QUIC delivers group streams independently, so group 4's
 * header may arrive after group 5's. The skipped sequence is taken (it was
 * NOTFOUND to readers), readable, in sequence order for expiry; repeated,
 * removed, out-of-window and expired sequences are still refused. */
START_TEST(late_skipped_group)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g5, *g4, *r, *x;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame f;
	const uint64_t ms = 1000000ull;

	mk(0);
	/* max latency 100 ms, window 8 */
	t = mktrack("b", "late", 100 * ms, 8);
	g5 = mkgroup(t, 5, 10 * ms);
	moq_cache_write_frame(g5, 50, "five", 4);
	ck_assert_int_eq(moq_cache_track_group(t, 4, &r), MOQ_ERR_NOTFOUND);
	ck_assert_int_eq(moq_cache_group_open(t, 4, 12 * ms, &g4), 0);
	ck_assert_int_eq(moq_cache_write_frame(g4, 40, "four", 4), 0);
	ck_assert_int_eq(moq_cache_group_finish(g4), 0);
	/* readable, and the newest is still 5 */
	ck_assert_int_eq(moq_cache_track_group(t, 4, &r), 0);
	ck_assert_ptr_eq(r, g4);
	ck_assert_int_eq(moq_cache_read_frame(r, &cur, &f), 1);
	ck_assert_int_eq(f.timestamp, 40);
	ck_assert_mem_eq(f.data, "four", 4);
	ck_assert_int_eq(moq_cache_read_frame(r, &cur, &f), MOQ_ERR_CLOSED);
	moq_cache_group_unref(r);
	{
		uint64_t latest = 0;
		ck_assert_int_eq(moq_cache_track_latest(t, &latest), 0);
		ck_assert_uint_eq(latest, 5);
	}
	/* it takes its newer neighbour's (earlier) created time */
	ck_assert_uint_eq(moq_cache_group_created(g4), 10 * ms);
	/* repeated: refused */
	ck_assert_int_eq(moq_cache_group_open(t, 4, 12 * ms, &x), MOQ_ERR_ORDER);
	ck_assert_int_eq(moq_cache_group_open(t, 5, 12 * ms, &x), MOQ_ERR_ORDER);
	/* removed (evicted), then opened again: refused */
	ck_assert_int_eq(moq_cache_group_evict(g4), 0);
	moq_cache_group_unref(g4);
	ck_assert_int_eq(moq_cache_group_open(t, 4, 13 * ms, &x), MOQ_ERR_ORDER);
	ck_assert_int_eq(moq_cache_track_group(t, 4, &r), MOQ_ERR_EVICTED);
	/* 3 below 4 and 5, linked in sequence order: 6 then 3 */
	opengroup(t, 6, 20 * ms);
	ck_assert_int_eq(moq_cache_group_open(t, 3, 21 * ms, &x), 0);
	ck_assert_uint_eq(moq_cache_group_created(x), 10 * ms);
	moq_cache_group_unref(x);
	/* out of the window (newest 6, window 8: 0 and below are gone) */
	opengroup(t, 8, 30 * ms);
	ck_assert_int_eq(moq_cache_group_open(t, 0, 31 * ms, &x), MOQ_ERR_ORDER);
	ck_assert_int_eq(moq_cache_track_group(t, 0, &r), MOQ_ERR_LAGGED);
	/* 7's newer neighbour 8 is 85 ms old at 115 ms: taken; at 131 ms
	 * (8 older than the max latency), a skipped 7 would be expired */
	ck_assert_int_eq(moq_cache_group_open(t, 7, 115 * ms, &x), 0);
	ck_assert_uint_eq(moq_cache_group_created(x), 30 * ms);
	moq_cache_group_unref(x);
	opengroup(t, 10, 40 * ms);
	ck_assert_int_eq(moq_cache_group_open(t, 9, 141 * ms, &x), MOQ_ERR_ORDER);
	ck_assert_int_eq(moq_cache_track_group(t, 9, &r), MOQ_ERR_NOTFOUND);
	/* expiry walks them in order: at 115 ms 3 and 5 (10 ms) go, 6 (20) stays */
	ck_assert_int_ge(moq_cache_expire(cache, 115 * ms), 2);
	ck_assert_int_eq(moq_cache_track_group(t, 3, &r), MOQ_ERR_OLD);
	ck_assert_int_eq(moq_cache_track_group(t, 6, &r), 0);
	moq_cache_group_unref(r);
	moq_cache_group_unref(g5);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

/* moq_cache_track_gap: ranges of groups the writer says will not come
 * (issue 22 item 19): members are final, neighbours are not; touching
 * ranges merge; past TRACK_GAPS (4) ranges the one that ends lowest goes;
 * each call moves the track's version (waiting readers look again). */
START_TEST(track_gaps)
{
	struct moq_cache_track *t;
	uint64_t v;

	mk(0);
	t = mktrack("b", "gaps", 0, 64);
	ck_assert(!moq_cache_track_gap_final(t, 0)); /* none yet */
	v = moq_cache_track_version(t);
	moq_cache_track_gap(t, 3, 5);
	ck_assert_uint_gt(moq_cache_track_version(t), v);
	ck_assert(!moq_cache_track_gap_final(t, 2));
	ck_assert(moq_cache_track_gap_final(t, 3) && moq_cache_track_gap_final(t, 5));
	ck_assert(!moq_cache_track_gap_final(t, 6));
	moq_cache_track_gap(t, 6, 8); /* touches 3..5: one range 3..8 */
	moq_cache_track_gap(t, 9, 7); /* empty: nothing */
	ck_assert(moq_cache_track_gap_final(t, 6) && moq_cache_track_gap_final(t, 8));
	ck_assert(!moq_cache_track_gap_final(t, 9));
	moq_cache_track_gap(t, 20, 20);
	moq_cache_track_gap(t, 30, 31);
	moq_cache_track_gap(t, 40, 40);
	/* four ranges: 3..8, 20, 30..31, 40; a fifth replaces 3..8 */
	ck_assert(moq_cache_track_gap_final(t, 4));
	moq_cache_track_gap(t, 50, 52);
	ck_assert(!moq_cache_track_gap_final(t, 4));
	ck_assert(moq_cache_track_gap_final(t, 20) && moq_cache_track_gap_final(t, 31));
	ck_assert(moq_cache_track_gap_final(t, 40) && moq_cache_track_gap_final(t, 51));
	/* one covering several merges them; an unbounded end stops below 2^61 */
	moq_cache_track_gap(t, 0, UINT64_MAX);
	ck_assert(moq_cache_track_gap_final(t, 0) && moq_cache_track_gap_final(t, 45));
	ck_assert(moq_cache_track_gap_final(t, (UINT64_MAX >> 3) - 1));
	ck_assert(!moq_cache_track_gap_final(t, UINT64_MAX >> 3));
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(bad_input_changes_nothing)
{
	struct moq_cache_track *t, *o;
	struct moq_cache_group *g, *og, *x;
	struct moq_cache_frame_in in[3];
	uint8_t *big = calloc(1, MOQ_CACHE_GROUP_CAP + 1);
	struct snap s0, so;

	mk(0);
	t = mktrack("b", "v", 0, 0);
	o = mktrack("b", "other", 0, 0);
	og = mkgroup(o, 0, 0);
	moq_cache_write_frame(og, 0, "other", 5);
	so = snap(o, og);
	g = mkgroup(t, 5, 0);
	moq_cache_write_frame(g, 0, "abc", 3);
	s0 = snap(t, g);

	/* a frame over the cap */
	ck_assert_int_eq(moq_cache_write_frame(g, 0, big, MOQ_CACHE_GROUP_CAP + 1),
	                 MOQ_ERR_TOO_LARGE);
	same(s0, snap(t, g));
	ck_assert_int_eq(moq_cache_frame_begin(g, 0, MOQ_CACHE_GROUP_CAP + 1), MOQ_ERR_TOO_LARGE);
	same(s0, snap(t, g));
	/* a frame that would take the group over the cap */
	ck_assert_int_eq(moq_cache_write_frame(g, 0, big, MOQ_CACHE_GROUP_CAP - 2),
	                 MOQ_ERR_TOO_LARGE);
	same(s0, snap(t, g));
	in[0] = (struct moq_cache_frame_in){0, "a", 1};
	in[1] = (struct moq_cache_frame_in){0, big, MOQ_CACHE_GROUP_CAP};
	in[2] = (struct moq_cache_frame_in){0, "b", 1};
	ck_assert_int_eq(moq_cache_write_frames(g, in, 3), MOQ_ERR_TOO_LARGE);
	same(s0, snap(t, g));
	/* a repeated sequence (a skipped older one is taken: late_skipped_group) */
	ck_assert_int_eq(moq_cache_group_open(t, 5, 0, &x), MOQ_ERR_ORDER);
	same(s0, snap(t, g));
	/* a write while a frame is open */
	ck_assert_int_eq(moq_cache_frame_begin(g, 0, 10), 10);
	s0 = snap(t, g);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, "abc", 3), MOQ_ERR_STATE);
	same(s0, snap(t, g));
	ck_assert_int_eq(moq_cache_write_frames(g, in, 1), MOQ_ERR_STATE);
	same(s0, snap(t, g));
	ck_assert_int_eq(moq_cache_frame_begin(g, 0, 3), MOQ_ERR_STATE);
	same(s0, snap(t, g));
	ck_assert_int_eq(moq_cache_group_finish(g), MOQ_ERR_STATE);
	same(s0, snap(t, g));
	/* more bytes than the frame has */
	ck_assert_int_eq(moq_cache_frame_append(g, "0123456789a", 11), MOQ_ERR_INVAL);
	same(s0, snap(t, g));
	ck_assert_int_eq(moq_cache_frame_append(g, "0123456789", 10), 0);
	/* append with no frame open */
	s0 = snap(t, g);
	ck_assert_int_eq(moq_cache_frame_append(g, "0", 1), MOQ_ERR_STATE);
	same(s0, snap(t, g));
	/* a write after finish */
	ck_assert_int_eq(moq_cache_group_finish(g), 0);
	s0 = snap(t, g);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, "abc", 3), MOQ_ERR_CLOSED);
	same(s0, snap(t, g));
	ck_assert_int_eq(moq_cache_write_frames(g, in, 1), MOQ_ERR_CLOSED);
	same(s0, snap(t, g));
	ck_assert_int_eq(moq_cache_frame_begin(g, 0, 1), MOQ_ERR_CLOSED);
	same(s0, snap(t, g));
	ck_assert_int_eq(moq_cache_group_finish(g), MOQ_ERR_CLOSED);
	same(s0, snap(t, g));
	/* the other track never moved */
	same_track(so, snap(o, og));
	{
		struct moq_cache_cursor cur = {0};
		struct moq_cache_frame f;

		ck_assert_int_eq(moq_cache_read_frame(og, &cur, &f), 1);
		ck_assert_mem_eq(f.data, "other", 5);
	}
	/* bad arguments */
	{
		struct moq_cache_track *bad;

		ck_assert_int_eq(moq_cache_track_create(cache, "b", 1, "x", 1,
		                                        &(struct moq_cache_track_cfg){0, 3}, &bad),
		                 MOQ_ERR_INVAL);
	}
	ck_assert_int_eq(moq_cache_reader_register(cache, 4), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_cache_reader_register(cache, 1), 0);
	ck_assert_int_eq(moq_cache_reader_register(cache, 1), MOQ_ERR_EXISTS);
	moq_cache_reader_unregister(cache, 1);
	free(big);
	moq_cache_group_unref(g);
	moq_cache_group_unref(og);
	moq_cache_track_unref(t);
	moq_cache_track_unref(o);
	teardown_all();
}
END_TEST

START_TEST(nomem_changes_nothing)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	uint8_t *p = pattern(1, 300000);
	struct snap s0;
	uint64_t at;
	int rc, fails = 0;

	mk(0);
	t = mktrack("b", "v", 0, 0);
	g = mkgroup(t, 0, 0);
	for (int i = 0; i < 20; i++)
		moq_cache_write_frame(g, 0, p, 100);
	s0 = snap(t, g);
	/* fail every allocation step of a large write in turn */
	for (at = 1; at < 40; at++) {
		cnt.fail_after = __atomic_load_n(&cnt.attempts, __ATOMIC_RELAXED) + at;
		rc = moq_cache_write_frame(g, 0, p, 300000);
		cnt.fail_after = 0;
		if (rc == 0)
			break;
		ck_assert_int_eq(rc, MOQ_ERR_NOMEM);
		same(s0, snap(t, g));
		fails++;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_int_gt(fails, 3);
	/* and a chunk append */
	ck_assert_int_eq(moq_cache_frame_begin(g, 0, 200000), 200000);
	s0 = snap(t, g);
	cnt.fail_after = __atomic_load_n(&cnt.attempts, __ATOMIC_RELAXED) + 2;
	ck_assert_int_eq(moq_cache_frame_append(g, p, 150000), MOQ_ERR_NOMEM);
	cnt.fail_after = 0;
	same(s0, snap(t, g));
	ck_assert_int_eq(moq_cache_frame_append(g, p, 150000), 50000);
	ck_assert_int_eq(moq_cache_frame_append(g, p, 50000), 0);
	/* a group open */
	cnt.fail_after = __atomic_load_n(&cnt.attempts, __ATOMIC_RELAXED) + 1;
	{
		struct moq_cache_group *x;

		ck_assert_int_eq(moq_cache_group_open(t, 1, 0, &x), MOQ_ERR_NOMEM);
	}
	cnt.fail_after = 0;
	free(p);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(qsbr_defers_index_reclaim)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	uint8_t *p = pattern(1, 4000);
	int64_t before, after_evict;

	mk(0);
	t = mktrack("b", "v", 0, 0);
	ck_assert_int_eq(moq_cache_reader_register(cache, 0), 0);
	ck_assert_int_eq(moq_cache_reader_register(cache, 2), 0);
	g = mkgroup(t, 0, 0);
	moq_cache_write_frame(g, 0, p, 4000);
	moq_cache_group_unref(g);
	before = live();
	g = mkgroup(t, 1, 0);
	moq_cache_group_unref(g);
	ck_assert_int_eq(moq_cache_track_group(t, 0, &g), 0);
	moq_cache_group_unref(g);
	ck_assert_int_eq(moq_cache_group_evict(g), 0);
	/* readers 0 and 2 may still hold the pointer from the window */
	after_evict = live();
	ck_assert_int_gt(after_evict, before);
	ck_assert_uint_eq(moq_cache_reclaim(cache), 0);
	moq_cache_quiescent(cache, 0);
	ck_assert_uint_eq(moq_cache_reclaim(cache), 0);
	ck_assert_int_eq(live(), after_evict);
	moq_cache_quiescent(cache, 2);
	ck_assert_uint_eq(moq_cache_reclaim(cache), 1);
	ck_assert_int_lt(live(), before);
	/* an offline reader does not hold anything back */
	moq_cache_reader_unregister(cache, 0);
	moq_cache_reader_unregister(cache, 2);
	ck_assert_int_eq(moq_cache_track_drop(t), 0);
	moq_cache_track_unref(t);
	free(p);
	teardown_all();
}
END_TEST

START_TEST(all_memory_returns_after_drop)
{
	struct moq_cache_track *t[8];
	uint8_t *p = pattern(1, 70000);
	int64_t base;
	int i, s;

	mk(1 << 20);
	base = live();
	for (i = 0; i < 8; i++) {
		char name[8];

		snprintf(name, sizeof(name), "t%d", i);
		t[i] = mktrack("live", name, 0, 8);
	}
	for (s = 0; s < 12; s++) {
		for (i = 0; i < 8; i++) {
			struct moq_cache_group *g = mkgroup(t[i], (uint64_t)s, (uint64_t)s * NS_MS);
			struct moq_cache_cursor cur = {0};
			struct moq_cache_frame f[8];

			moq_cache_write_frame(g, 0, p, 100 + i * 1000);
			moq_cache_frame_begin(g, 0, 5000);
			moq_cache_frame_append(g, p, 2500);
			if (s % 3 == 0)
				moq_cache_frame_append(g, p, 2500);
			moq_cache_read_frames(g, &cur, f, 8);
			if (s % 2)
				moq_cache_group_finish(g);
			moq_cache_group_unref(g);
		}
	}
	ck_assert_uint_le(moq_cache_used(cache), 1 << 20);
	ck_assert_int_gt(live(), base);
	ck_assert_int_eq(moq_cache_broadcast_drop(cache, "live", 4), 8);
	for (i = 0; i < 8; i++)
		moq_cache_track_unref(t[i]);
	ck_assert_uint_eq(moq_cache_used(cache), 0);
	ck_assert_int_eq(live(), base);
	free(p);
	teardown_all(); /* and zero after destroy */
}
END_TEST

START_TEST(frame_limit_per_group)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_frame_in in[2] = {{0, NULL, 0}, {0, NULL, 0}};
	struct snap s0;
	uint32_t i;

	mk(0);
	t = mktrack("b", "v", 0, 0);
	g = mkgroup(t, 0, 0);
	for (i = 0; i < MOQ_CACHE_GROUP_MAX_FRAMES; i++)
		ck_assert_int_eq(moq_cache_write_frame(g, 0, NULL, 0), 0);
	s0 = snap(t, g);
	ck_assert_uint_eq(s0.frames, MOQ_CACHE_GROUP_MAX_FRAMES);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, "a", 1), MOQ_ERR_LIMIT);
	same(s0, snap(t, g));
	ck_assert_int_eq(moq_cache_frame_begin(g, 0, 0), MOQ_ERR_LIMIT);
	same(s0, snap(t, g));
	ck_assert_int_eq(moq_cache_write_frames(g, in, 2), MOQ_ERR_LIMIT);
	same(s0, snap(t, g));
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(two_groups_open_at_once)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g5, *g6;
	struct moq_cache_cursor c5 = {0}, c6 = {0};
	struct moq_cache_frame f;
	uint64_t s;

	mk(0);
	t = mktrack("b", "v", 0, 0);
	g5 = mkgroup(t, 5, 0);
	ck_assert_int_eq(moq_cache_frame_begin(g5, 1, 4), 4);
	ck_assert_int_eq(moq_cache_frame_append(g5, "ab", 2), 2);
	/* group 6's stream starts before group 5's ends */
	g6 = mkgroup(t, 6, 0);
	ck_assert_int_eq(moq_cache_write_frame(g6, 2, "xyz", 3), 0);
	ck_assert_int_eq(moq_cache_frame_append(g5, "cd", 2), 0);
	ck_assert_int_eq(moq_cache_group_finish(g5), 0);
	ck_assert_int_eq(moq_cache_track_latest(t, &s), 0);
	ck_assert_uint_eq(s, 6);
	ck_assert_int_eq(moq_cache_read_frame(g5, &c5, &f), 1);
	ck_assert_mem_eq(f.data, "abcd", 4);
	ck_assert_int_eq(moq_cache_read_frame(g5, &c5, &f), MOQ_ERR_CLOSED);
	ck_assert_int_eq(moq_cache_read_frame(g6, &c6, &f), 1);
	ck_assert_mem_eq(f.data, "xyz", 3);
	ck_assert_int_eq(moq_cache_read_frame(g6, &c6, &f), 0);
	moq_cache_group_unref(g5);
	moq_cache_group_unref(g6);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(stats_count_removals)
{
	struct moq_cache_track *t, *u;
	struct moq_cache_group *g;
	struct moq_cache_stats st;
	uint8_t *p = pattern(0, 5000);
	uint64_t per = MOQ_CACHE_GROUP_OVERHEAD + MOQ_CACHE_FRAME_OVERHEAD + 5000;
	int i;

	mk(0);
	t = mktrack("b", "v", 100, 4);
	u = mktrack("b", "u", 0, 0);
	for (i = 0; i < 6; i++) { /* 0, 1 lagged out of the window of 4 */
		g = mkgroup(t, (uint64_t)i, 0);
		moq_cache_write_frame(g, 0, p, 5000);
		moq_cache_group_unref(g);
	}
	g = mkgroup(t, 6, 1000); /* 2..5 expire */
	moq_cache_group_unref(g);
	g = mkgroup(u, 0, 0);
	moq_cache_write_frame(g, 0, p, 5000);
	moq_cache_group_unref(g);
	g = mkgroup(u, 1, 0);
	moq_cache_write_frame(g, 0, p, 5000);
	moq_cache_group_unref(g);
	moq_cache_budget_set(cache, per + MOQ_CACHE_GROUP_OVERHEAD); /* u/0 goes */
	moq_cache_stats(cache, &st);
	ck_assert_uint_eq(st.lagged, 2);
	ck_assert_uint_eq(st.expired, 4);
	ck_assert_uint_eq(st.evicted, 1);
	ck_assert_uint_eq(st.groups, 2);
	ck_assert_uint_eq(st.tracks, 2);
	ck_assert_uint_eq(st.used, per + MOQ_CACHE_GROUP_OVERHEAD);
	ck_assert_uint_eq(st.budget, per + MOQ_CACHE_GROUP_OVERHEAD);
	ck_assert_uint_eq(st.retired_pending, 0);
	/* over budget with only newest groups: writes go on, nothing evicted */
	moq_cache_budget_set(cache, 10);
	ck_assert_int_eq(moq_cache_track_group(u, 1, &g), 0);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, p, 5000), 0);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, p, 5000), 0);
	moq_cache_group_unref(g);
	moq_cache_stats(cache, &st);
	ck_assert_uint_eq(st.evicted, 1);
	ck_assert_int_eq(moq_cache_track_drop(t), 0);
	moq_cache_stats(cache, &st);
	ck_assert_uint_eq(st.closed, 1);
	ck_assert_uint_eq(st.tracks, 1);
	free(p);
	moq_cache_track_unref(t);
	moq_cache_track_unref(u);
	teardown_all();
}
END_TEST

/* An injected arrival clock: returns *ctx and counts its reads. */
static unsigned clock_reads;

static uint64_t test_clock(void *ctx)
{
	clock_reads++;
	return *(const uint64_t *)ctx;
}

START_TEST(arrival_stamps_from_clock)
{
	struct moq_cache_cfg cfg = {0};
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_cursor cur = {0}, cur2 = {0};
	struct moq_cache_frame fb[8], f;
	struct moq_cache_frame_in in[3];
	uint64_t clk = 0; /* a clock at 0 is a valid time too */
	uint8_t *p = pattern(4, 9000);
	unsigned reads;
	int i;

	moq_cache_counting_init(&cnt);
	cfg.alloc = moq_cache_counting_alloc(&cnt);
	cfg.max_readers = 4;
	cfg.buckets = 16;
	cfg.clock = test_clock;
	cfg.clock_ctx = &clk;
	cache = moq_cache_create(&cfg);
	ck_assert_ptr_nonnull(cache);
	t = mktrack("b", "v", 0, 0);
	/* the group's open time is the caller's; it stamps nothing */
	g = mkgroup(t, 0, 777);
	clock_reads = 0;
	/* 0: a small whole frame, stamped at its write (time 0) */
	ck_assert_int_eq(moq_cache_write_frame(g, 1, p, 100), 0);
	ck_assert_uint_eq(clock_reads, 1);
	/* 1: a large whole frame (group blocks) */
	clk = 1000;
	ck_assert_int_eq(moq_cache_write_frame(g, 2, p, 9000), 0);
	/* 2: chunked: begin and a first chunk read no clock; the chunk with
	 * the last byte stamps it */
	clk = 2000;
	reads = clock_reads;
	ck_assert_int_eq(moq_cache_frame_begin(g, 3, 5000), 5000);
	ck_assert_int_eq(moq_cache_frame_append(g, p, 3000), 2000);
	ck_assert_uint_eq(clock_reads, reads);
	/* a reader of the arriving frame gets a view with no arrival yet */
	ck_assert_int_eq(moq_cache_read_frames(g, &cur2, fb, 8), 2);
	ck_assert_uint_eq(fb[0].arrival, 0);
	ck_assert_uint_eq(fb[1].arrival, 1000);
	/* (the arrived bytes may be in more than one run: a view each) */
	for (i = 0; moq_cache_read_frames(g, &cur2, fb, 8) == 1; i++) {
		ck_assert(!moq_cache_frame_complete(&fb[0]));
		ck_assert_uint_eq(fb[0].arrival, 0);
	}
	ck_assert_int_gt(i, 0);
	clk = 2500;
	ck_assert_int_eq(moq_cache_frame_append(g, p + 3000, 2000), 0);
	ck_assert_uint_eq(clock_reads, reads + 1);
	/* the view that ends it carries the stamp */
	ck_assert_int_eq(moq_cache_read_frames(g, &cur2, fb, 8), 1);
	ck_assert(moq_cache_frame_complete(&fb[0]));
	ck_assert_uint_gt(fb[0].start, 0);
	ck_assert_uint_eq(fb[0].arrival, 2500);
	/* 3: an empty frame is complete at its begin */
	clk = 3000;
	ck_assert_int_eq(moq_cache_frame_begin(g, 4, 0), 0);
	/* 4: a small frame arriving whole in its first chunk (exact fit) */
	clk = 4000;
	ck_assert_int_eq(moq_cache_frame_begin(g, 5, 50), 50);
	clk = 4100;
	ck_assert_int_eq(moq_cache_frame_append(g, p, 50), 0);
	/* 5..7: a batch: one clock read, one stamp for all of it */
	clk = 5000;
	reads = clock_reads;
	for (i = 0; i < 3; i++) {
		in[i].timestamp = 10 + i;
		in[i].data = p;
		in[i].len = i == 1 ? 4000 : 10;
	}
	ck_assert_int_eq(moq_cache_write_frames(g, in, 3), 3);
	ck_assert_uint_eq(clock_reads, reads + 1);
	/* a failed write reads no clock into any record */
	clk = 6000;
	ck_assert_int_eq(moq_cache_frame_append(g, p, 1), MOQ_ERR_STATE);
	/* a batch read copies every stamp, per frame, in order */
	ck_assert_int_eq(moq_cache_read_frames(g, &cur, fb, 8), 8);
	{
		static const uint64_t want[8] = {0, 1000, 2500, 3000, 4100, 5000, 5000, 5000};

		for (i = 0; i < 8; i++) {
			ck_assert_uint_eq(fb[i].index, (unsigned)i);
			ck_assert_uint_eq(fb[i].arrival, want[i]);
			if (i > 0)
				ck_assert_uint_ge(fb[i].arrival, fb[i - 1].arrival);
		}
	}
	ck_assert_int_eq(moq_cache_read_frame(g, &cur, &f), 0);
	free(p);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

START_TEST(arrival_default_clock_is_monotonic)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame fb[8];
	struct timespec a, b;
	uint64_t t0, t1;
	uint8_t *p = pattern(5, 3000);
	int i;

	mk(0); /* no clock configured: CLOCK_MONOTONIC */
	t = mktrack("b", "v", 0, 0);
	g = mkgroup(t, 0, 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < 8; i++)
		ck_assert_int_eq(moq_cache_write_frame(g, i, p, i & 1 ? 3000 : 20), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	t0 = (uint64_t)a.tv_sec * 1000000000ull + (uint64_t)a.tv_nsec;
	t1 = (uint64_t)b.tv_sec * 1000000000ull + (uint64_t)b.tv_nsec;
	ck_assert_int_eq(moq_cache_read_frames(g, &cur, fb, 8), 8);
	for (i = 0; i < 8; i++) {
		ck_assert_uint_ge(fb[i].arrival, t0);
		ck_assert_uint_le(fb[i].arrival, t1);
		if (i > 0)
			ck_assert_uint_ge(fb[i].arrival, fb[i - 1].arrival);
	}
	free(p);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

/* Issue 12, defect 3: a track whose writer stopped (idle) expires its
 * newest group too, and once it holds no group and nobody references it,
 * moq_cache_expire_idle drops it: the cache returns to its empty size. A
 * live track keeps its newest group, and expire_idle leaves its old groups
 * to its next group open unless it opened none for its max latency. */
START_TEST(idle_track_expires_and_is_dropped)
{
	struct moq_cache_track *t, *u, *x;
	struct moq_cache_group *g;
	struct moq_cache_stats st;
	uint8_t *p = pattern(3, 5000);
	int64_t base;

	mk(0);
	base = live();
	t = mktrack("b", "idle", 100 * NS_MS, 0);
	u = mktrack("b", "live", 100 * NS_MS, 0);
	ck_assert(!moq_cache_track_idle(t));
	ck_assert_uint_eq(moq_cache_track_max_latency(t), 100 * NS_MS);
	for (uint64_t i = 0; i < 3; i++) {
		g = mkgroup(t, i, i * 40 * NS_MS);
		ck_assert_uint_eq(moq_cache_group_created(g), i * 40 * NS_MS);
		moq_cache_write_frame(g, 0, p, 5000);
		moq_cache_group_finish(g);
		moq_cache_group_unref(g);
		g = mkgroup(u, i, i * 40 * NS_MS);
		moq_cache_write_frame(g, 0, p, 5000);
		moq_cache_group_unref(g);
	}
	/* 130 ms: group 0 (0 ms) is old, but both tracks are live and opened
	 * a group 50 ms ago: the timer leaves them to their next open */
	ck_assert_int_eq(moq_cache_expire_idle(cache, 130 * NS_MS), 0);
	moq_cache_track_set_idle(t);
	ck_assert(moq_cache_track_idle(t));
	/* the idle one expires group 0 now */
	ck_assert_int_eq(moq_cache_expire_idle(cache, 130 * NS_MS), 1);
	/* 181 ms: the live one opened nothing for 100 ms: its old groups go,
	 * its newest stays; the idle one's newest (80 ms) goes too */
	ck_assert_int_eq(moq_cache_expire_idle(cache, 181 * NS_MS), 4);
	ck_assert_int_eq(moq_cache_track_group(u, 2, &g), 0);
	moq_cache_group_unref(g);
	ck_assert_int_eq(moq_cache_track_group(t, 2, &g), MOQ_ERR_OLD);
	/* t is empty but referenced: kept, and found */
	ck_assert_int_eq(moq_cache_expire_idle(cache, 200 * NS_MS), 0);
	x = moq_cache_track_lookup(cache, "b", 1, "idle", 4);
	ck_assert_ptr_eq(x, t);
	moq_cache_track_unref(x);
	/* a group opened makes it live again */
	g = mkgroup(t, 10, 200 * NS_MS);
	ck_assert(!moq_cache_track_idle(t));
	moq_cache_group_unref(g);
	moq_cache_track_set_idle(t);
	ck_assert_int_eq(moq_cache_expire_idle(cache, 301 * NS_MS), 1);
	/* the last outside reference goes: the next expiry drops it */
	moq_cache_track_unref(t);
	moq_cache_stats(cache, &st);
	ck_assert_uint_eq(st.tracks, 2);
	ck_assert_int_eq(moq_cache_expire_idle(cache, 302 * NS_MS), 0);
	moq_cache_stats(cache, &st);
	ck_assert_uint_eq(st.tracks, 1);
	ck_assert_ptr_null(moq_cache_track_lookup(cache, "b", 1, "idle", 4));
	/* and the live one, once idle and unreferenced */
	moq_cache_track_set_idle(u);
	moq_cache_track_unref(u);
	ck_assert_int_eq(moq_cache_expire_idle(cache, 400 * NS_MS), 1);
	/* its expired group held a reference until reclaimed: the next
	 * expiry drops the track */
	moq_cache_stats(cache, &st);
	ck_assert_uint_eq(st.tracks, 1);
	ck_assert_int_eq(moq_cache_expire_idle(cache, 401 * NS_MS), 0);
	moq_cache_stats(cache, &st);
	ck_assert_uint_eq(st.tracks, 0);
	ck_assert_uint_eq(st.groups, 0);
	ck_assert_uint_eq(st.used, 0);
	ck_assert_int_eq(live(), base);
	free(p);
	teardown_all();
}
END_TEST

/* Group opens and the expiry timers walk a track's groups from the oldest
 * and stop at the first one young enough: a clock that went back, a
 * removed newest group and all (moq_cache_expire) against idle
 * (moq_cache_expire_idle) must still expire exactly the old ones. */
START_TEST(expiry_walk_stops_only_past_the_old)
{
	struct moq_cache_track *t, *u;
	struct moq_cache_group *g, *x;
	uint64_t s;

	mk(0);
	t = mktrack("b", "back", 100 * NS_MS, 0);
	u = mktrack("b", "tail", 100 * NS_MS, 0);
	/* the caller's clock went back for group 1: at group 2's open
	 * (502 ms) it is old (50 ms) behind a young group 0 (500 ms) */
	opengroup(t, 0, 500 * NS_MS);
	opengroup(t, 1, 50 * NS_MS);
	opengroup(t, 2, 502 * NS_MS);
	ck_assert_int_eq(moq_cache_track_group(t, 1, &x), MOQ_ERR_OLD);
	ck_assert_int_eq(moq_cache_track_group(t, 0, &x), 0);
	moq_cache_group_unref(x);
	/* back again (3 at 10 ms), then ahead: 3 is old behind 0 and 2 */
	opengroup(t, 3, 10 * NS_MS);
	opengroup(t, 4, 590 * NS_MS);
	ck_assert_int_eq(moq_cache_track_group(t, 3, &x), MOQ_ERR_OLD);
	for (s = 0; s < 5; s += 2) {
		ck_assert_int_eq(moq_cache_track_group(t, s, &x), 0);
		moq_cache_group_unref(x);
	}
	/* the timer on a live track: 0 and 2 once old, the newest never */
	ck_assert_int_eq(moq_cache_expire(cache, 550 * NS_MS), 0);
	ck_assert_int_eq(moq_cache_expire(cache, 650 * NS_MS), 2);
	ck_assert_int_eq(moq_cache_expire(cache, 700 * NS_MS), 0);
	ck_assert_int_eq(moq_cache_track_group(t, 4, &x), 0);
	moq_cache_group_unref(x);

	/* in order, the newest removed: the group before it is no one's
	 * newest and expires with the others on the timer */
	for (s = 0; s < 4; s++) {
		g = mkgroup(u, s, s * 10 * NS_MS);
		moq_cache_group_unref(g);
	}
	ck_assert_int_eq(moq_cache_expire_idle(cache, 100 * NS_MS), 0);
	ck_assert_int_eq(moq_cache_track_group(u, 3, &x), 0);
	ck_assert_int_eq(moq_cache_group_evict(x), 0);
	moq_cache_group_unref(x);
	/* the last group (20 ms) is young at 115 ms: the timer waits */
	ck_assert_int_eq(moq_cache_expire_idle(cache, 115 * NS_MS), 0);
	ck_assert_int_eq(moq_cache_expire_idle(cache, 125 * NS_MS), 3);
	ck_assert_int_eq(moq_cache_track_group(u, 2, &x), MOQ_ERR_OLD);
	/* idle: the newest expires on the timer too */
	g = mkgroup(u, 4, 1000 * NS_MS);
	moq_cache_group_unref(g);
	ck_assert_int_eq(moq_cache_expire(cache, 1200 * NS_MS), 0);
	moq_cache_track_set_idle(u);
	ck_assert_int_eq(moq_cache_expire(cache, 1200 * NS_MS), 1);
	moq_cache_track_unref(t);
	moq_cache_track_unref(u);
	teardown_all();
}
END_TEST

/* A model of expiry as a walk over every group of the track (what the
 * cache did before it stopped early), driven by random opens with a clock
 * that jumps back and ahead, explicit evictions, idle marks and both
 * timers: the cache removes the same groups for the same reasons. */
#define MODEL_GROUPS 1500u
#define MODEL_WINDOW 64u

struct model_group {
	uint64_t seq, created;
	int why; /* 0 live, else the error a reader gets */
};

static struct model_group mg[MODEL_GROUPS];
static unsigned mn;
static uint32_t mrng;

static uint32_t mrand(void)
{
	mrng ^= mrng << 13;
	mrng ^= mrng >> 17;
	mrng ^= mrng << 5;
	return mrng;
}

static bool model_old(uint64_t created, uint64_t now, uint64_t lat)
{
	return now > created && now - created > lat;
}

/* every group but the newest (unless @all) older than @lat */
static int model_expire(uint64_t now, uint64_t lat, bool all, uint64_t newest)
{
	int n = 0;

	for (unsigned i = 0; i < mn; i++) {
		if (mg[i].why == 0 && (all || mg[i].seq + 1 != newest) &&
		    model_old(mg[i].created, now, lat)) {
			mg[i].why = MOQ_ERR_OLD;
			n++;
		}
	}
	return n;
}

START_TEST(expiry_matches_a_full_walk)
{
	const uint64_t lat = 200 * NS_MS;
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_stats st;
	uint64_t clk = 0, newest = 0, nold = 0, nlag = 0, nev = 0;
	bool idle = false;

	mk(0);
	t = mktrack("b", "m", lat, MODEL_WINDOW);
	mn = 0;
	mrng = 0x9e3779b9u + (uint32_t)_i;
	while (mn < MODEL_GROUPS) {
		uint32_t op = mrand() % 100;
		int n = 0, got = 0;

		clk += (mrand() % 40) * NS_MS;
		if (op < 60) {
			uint64_t seq = newest + mrand() % 3, now = clk;
			uint32_t r = mrand() % 10;

			if (r == 0)
				now = clk > 700 * NS_MS ? clk - (mrand() % 700) * NS_MS : 0;
			else if (r == 1)
				now = clk + (mrand() % 300) * NS_MS;
			n = model_expire(now, lat, true, newest);
			for (unsigned i = 0; i < mn; i++) {
				if (mg[i].why == 0 && mg[i].seq + MODEL_WINDOW <= seq) {
					mg[i].why = MOQ_ERR_LAGGED;
					nlag++;
				}
			}
			mg[mn++] = (struct model_group){seq, now, 0};
			newest = seq + 1;
			idle = false;
			g = mkgroup(t, seq, now);
			moq_cache_group_unref(g);
		} else if (op < 65 && mn > 0) {
			struct model_group *e = &mg[mrand() % mn];

			if (e->why == 0) {
				e->why = MOQ_ERR_EVICTED;
				nev++;
				ck_assert_int_eq(moq_cache_track_group(t, e->seq, &g), 0);
				ck_assert_int_eq(moq_cache_group_evict(g), 0);
				moq_cache_group_unref(g);
			}
		} else if (op < 70) {
			idle = true;
			moq_cache_track_set_idle(t);
		} else if (op < 85) {
			n = model_expire(clk, lat, idle, newest);
			got = moq_cache_expire(cache, clk);
		} else {
			int last = -1;

			for (unsigned i = 0; i < mn; i++)
				if (mg[i].why == 0)
					last = (int)i;
			if (idle)
				n = model_expire(clk, lat, true, newest);
			else if (last >= 0 && model_old(mg[last].created, clk, lat))
				n = model_expire(clk, lat, false, newest);
			got = moq_cache_expire_idle(cache, clk);
		}
		ck_assert_int_eq(got, op < 70 ? 0 : n);
		nold += (uint64_t)n;
		/* live, or removed for the model's reason (the window's slots
		 * remember the last MODEL_WINDOW sequences); asserts only on a
		 * mismatch (each check assertion writes to the runner) */
		for (unsigned i = 0; i < mn; i++) {
			int rc = moq_cache_track_group(t, mg[i].seq, &g);
			bool known = mg[i].why == 0 || mg[i].seq + MODEL_WINDOW >= newest;

			if (rc == 0)
				moq_cache_group_unref(g);
			if (known ? rc != mg[i].why : rc == 0)
				ck_abort_msg("group %llu: %d, model %d",
				             (unsigned long long)mg[i].seq, rc, mg[i].why);
		}
	}
	moq_cache_stats(cache, &st);
	ck_assert_uint_eq(st.expired, nold);
	ck_assert_uint_eq(st.lagged, nlag);
	ck_assert_uint_eq(st.evicted, nev);
	ck_assert_uint_eq(st.groups, MODEL_GROUPS - nold - nlag - nev);
	ck_assert_uint_gt(nold, MODEL_GROUPS / 4);
	moq_cache_track_unref(t);
	teardown_all();
}
END_TEST

Suite *cache_suite(void);

Suite *cache_suite(void)
{
	Suite *s = suite_create("cache");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, small_frames_exact_fit);
	tcase_add_test(tc, frame_extensions);
	tcase_add_test(tc, frame_locations);
	tcase_add_test(tc, late_skipped_group);
	tcase_add_test(tc, track_gaps);
	tcase_add_test(tc, large_frame_in_group_blocks);
	tcase_add_test(tc, chunked_frame_read_chunk_by_chunk);
	tcase_add_test(tc, chunked_then_complete_reads_rest);
	tcase_add_test(tc, small_frame_whole_in_one_chunk_is_exact);
	tcase_add_test(tc, batch_read_and_write);
	tcase_add_test(tc, iov_by_offset);
	tcase_add_test(tc, billing_formula);
	tcase_add_test(tc, evicting_a_group_frees_all_its_memory);
	tcase_add_test(tc, budget_evicts_oldest_never_newest);
	tcase_add_test(tc, eviction_never_frees_what_a_reader_holds);
	tcase_add_test(tc, expiry_after_max_latency);
	tcase_add_test(tc, window_lagged);
	tcase_add_test(tc, lookup_and_drop);
	tcase_add_test(tc, abort_gives_dropped);
	tcase_add_test(tc, reopen_aborted_newest);
	tcase_add_test(tc, group_first_and_newest_ts);
	tcase_add_test(tc, bad_input_changes_nothing);
	tcase_add_test(tc, nomem_changes_nothing);
	tcase_add_test(tc, qsbr_defers_index_reclaim);
	tcase_add_test(tc, all_memory_returns_after_drop);
	tcase_add_test(tc, frame_limit_per_group);
	tcase_add_test(tc, two_groups_open_at_once);
	tcase_add_test(tc, stats_count_removals);
	tcase_add_test(tc, arrival_stamps_from_clock);
	tcase_add_test(tc, arrival_default_clock_is_monotonic);
	tcase_add_test(tc, idle_track_expires_and_is_dropped);
	tcase_add_test(tc, expiry_walk_stops_only_past_the_old);
	tcase_add_loop_test(tc, expiry_matches_a_full_walk, 0, 4);
	suite_add_tcase(s, tc);
	return s;
}
