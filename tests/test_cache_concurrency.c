/* SPDX-License-Identifier: MIT */
/*
 * test_cache_concurrency.c: one writer thread and one reader thread on the
 * same track. The writer publishes groups of frames of many sizes in all
 * three ways (exact-fit single writes, batches, chunked frames), under a
 * byte budget and a small window so groups are evicted and lagged while the
 * reader is on them. The reader checks every byte of every view it gets
 * against the pattern the writer wrote (a torn frame or a freed block shows
 * as a mismatch), looks the track up lock-free while the writer creates and
 * drops other tracks in the same hash chain, keeps references to groups it finished and re-checks them
 * after they were evicted, and calls the QSBR quiescent point between steps.
 * Also built with -fsanitize=thread (cache_concurrency_tsan).
 *
 * MOQ_STRESS_GROUPS sets the number of groups (default 1500).
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"

Suite *cache_concurrency_suite(void);

#define CHUNK 1150u /* a QUIC stream chunk */
#define KEEP  3     /* finished groups the reader keeps referenced */
#define LEAD  3     /* groups the writer may run ahead of the reader */

static uint8_t pat(uint64_t seq, uint32_t i, uint32_t b)
{
	return (uint8_t)(seq * 31u + i * 131u + b * 7u + (b >> 8));
}

static uint32_t nframes(uint64_t seq)
{
	return 8 + (uint32_t)(seq % 23);
}

static uint32_t fsize(uint64_t seq, uint32_t i)
{
	uint32_t x = (uint32_t)((seq * 7919u + i * 104729u) % 9973u);

	if (x % 17 == 0)
		return 0;
	if (x % 5 == 0)
		return x * 7; /* up to ~70 KB: spans blocks */
	return x % 3000;
}

struct shared {
	struct moq_cache *c;
	struct moq_cache_track *t;
	uint64_t groups;
	int done;           /* atomic */
	uint64_t reader_at; /* atomic: the group the reader is on */
	/* reader results */
	uint64_t frames_ok, bytes_ok, bad, groups_seen, removed_seen, rechecked;
};

static void *writer(void *arg)
{
	struct shared *s = arg;
	uint8_t *buf = malloc(80000);
	uint64_t seq;

	for (seq = 0; seq < s->groups; seq++) {
		struct moq_cache_group *g;
		uint32_t n = nframes(seq), i;

		/* let the reader fall behind by up to LEAD groups (far enough for
		 * evictions under it), not by all of them */
		while (seq > __atomic_load_n(&s->reader_at, __ATOMIC_ACQUIRE) + LEAD)
			sched_yield();
		/* gap ranges (moq_cache_track_gap) 10 seq .. 10 seq + 4, racing
		 * the reader's lock-free moq_cache_track_gap_final */
		moq_cache_track_gap(s->t, seq * 10, seq * 10 + 4);
		if (moq_cache_group_open(s->t, seq, seq * 1000, &g) != 0)
			abort();
		for (i = 0; i < n; i++) {
			uint32_t sz = fsize(seq, i), b;
			int mode = (int)((seq + i) % 3);

			for (b = 0; b < sz; b++)
				buf[b] = pat(seq, i, b);
			if (mode == 0) {
				moq_cache_write_frame(g, (int64_t)i, buf, sz);
			} else if (mode == 1 && i + 1 < n && fsize(seq, i + 1) < 70000) {
				/* a batch of two */
				struct moq_cache_frame_in in[2];
				uint8_t *b2 = malloc(fsize(seq, i + 1) + 1);
				uint32_t sz2 = fsize(seq, i + 1);

				for (b = 0; b < sz2; b++)
					b2[b] = pat(seq, i + 1, b);
				in[0] = (struct moq_cache_frame_in){(int64_t)i, buf, sz};
				in[1] = (struct moq_cache_frame_in){(int64_t)i + 1, b2, sz2};
				moq_cache_write_frames(g, in, 2);
				free(b2);
				i++;
			} else {
				uint32_t off = 0;

				if (moq_cache_frame_begin(g, (int64_t)i, sz) < 0)
					break; /* removed under us */
				while (off < sz) {
					uint32_t c = sz - off < CHUNK ? sz - off : CHUNK;

					if (moq_cache_frame_append(g, buf + off, c) < 0)
						break;
					off += c;
				}
			}
		}
		moq_cache_group_finish(g);
		moq_cache_group_unref(g);
		/* track churn in the reader's hash chain (one bucket): create,
		 * publish into and drop a track while the reader looks tracks up */
		if (seq % 4 == 0) {
			struct moq_cache_track *x;
			char name[32];

			snprintf(name, sizeof(name), "tmp%llu", (unsigned long long)seq);
			if (moq_cache_track_create(s->c, "live", 4, name, strlen(name), NULL, &x) !=
			    0)
				abort();
			if (moq_cache_group_open(x, 0, seq * 1000, &g) == 0) {
				moq_cache_write_frame(g, 0, buf, 100);
				moq_cache_group_unref(g);
			}
			moq_cache_track_drop(x);
			moq_cache_track_unref(x);
		}
	}
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
	free(buf);
	return NULL;
}

/* check a view against the pattern; returns 0 when every byte matches */
static int check_view(struct moq_cache_group *g, uint64_t seq, const struct moq_cache_frame *f)
{
	struct iovec iov[64];
	uint32_t b = f->start;
	int n, k;

	if (f->index >= nframes(seq) || f->size != fsize(seq, f->index) ||
	    f->timestamp != (int64_t)f->index || f->start + f->len > f->size)
		return -1;
	if (f->data != NULL) {
		for (uint32_t j = 0; j < f->len; j++)
			if (f->data[j] != pat(seq, f->index, f->start + j))
				return -1;
		return 0;
	}
	n = moq_cache_group_iov(g, f->offset, f->len, iov, 64);
	for (k = 0; k < n; k++) {
		const uint8_t *p = iov[k].iov_base;

		for (size_t j = 0; j < iov[k].iov_len; j++, b++)
			if (p[j] != pat(seq, f->index, b))
				return -1;
	}
	return b == f->start + f->len ? 0 : -1;
}

struct kept {
	struct moq_cache_group *g;
	struct moq_cache_frame f; /* one complete view to re-check */
	int have;
};

static void *reader(void *arg)
{
	struct shared *s = arg;
	struct kept kept[KEEP] = {0};
	int nk = 0;
	uint64_t next = 0;
	uint32_t want_frame = 0, want_pos = 0;

	if (moq_cache_reader_register(s->c, 0) != 0)
		abort();
	for (;;) {
		struct moq_cache_group *g;
		struct moq_cache_cursor cur = {0};
		struct moq_cache_frame f[MOQ_CACHE_BATCH];
		struct kept k = {0};
		uint64_t latest;
		int rc, done = __atomic_load_n(&s->done, __ATOMIC_ACQUIRE);

		moq_cache_quiescent(s->c, 0);
		{
			/* the lock-free lookup, racing the writer's track churn */
			struct moq_cache_track *lt =
			        moq_cache_track_lookup(s->c, "live", 4, "video", 5);

			if (lt != s->t)
				s->bad++;
			moq_cache_track_unref(lt);
			lt = moq_cache_track_lookup(s->c, "live", 4, "tmp0", 4);
			if (lt != NULL)
				moq_cache_track_unref(lt);
		}
		if (moq_cache_track_latest(s->t, &latest) != 0)
			continue;
		/* 10 k + 7 is in no range: a torn read of one (lo of one, end
		 * of another) would say it is */
		if (moq_cache_track_gap_final(s->t, latest * 10 + 7) ||
		    (latest && moq_cache_track_gap_final(s->t, (latest - 1) * 10 + 7)))
			s->bad++;
		if (next > latest) {
			if (done)
				break;
			continue;
		}
		rc = moq_cache_track_group(s->t, next, &g);
		if (rc != 0) {
			/* gone already: continue at the newest */
			if (rc != MOQ_ERR_EVICTED && rc != MOQ_ERR_LAGGED && rc != MOQ_ERR_OLD &&
			    rc != MOQ_ERR_NOTFOUND)
				s->bad++;
			next = latest;
			__atomic_store_n(&s->reader_at, next, __ATOMIC_RELEASE);
			s->removed_seen++;
			continue;
		}
		s->groups_seen++;
		want_frame = 0;
		want_pos = 0;
		for (;;) {
			int n = moq_cache_read_frames(g, &cur, f, MOQ_CACHE_BATCH), i;

			if (n < 0) {
				if (n != MOQ_ERR_CLOSED)
					s->removed_seen++;
				break;
			}
			for (i = 0; i < n; i++) {
				/* in order: each view continues where the last ended */
				if (f[i].index != want_frame || f[i].start != want_pos)
					s->bad++;
				if (moq_cache_frame_complete(&f[i])) {
					want_frame = f[i].index + 1;
					want_pos = 0;
				} else {
					want_pos = f[i].start + f[i].len;
				}
				if (check_view(g, next, &f[i]) != 0) {
					s->bad++;
					continue;
				}
				s->bytes_ok += f[i].len;
				if (moq_cache_frame_complete(&f[i]))
					s->frames_ok++;
				if (f[i].start == 0 && f[i].len > 0 &&
				    moq_cache_frame_complete(&f[i])) {
					k.f = f[i];
					k.have = 1;
				}
			}
			moq_cache_quiescent(s->c, 0);
		}
		/* keep this group referenced; re-check the oldest kept one, which
		 * is likely evicted by now, then let it go */
		k.g = g;
		if (nk == KEEP) {
			if (kept[0].have) {
				if (check_view(kept[0].g, moq_cache_group_seq(kept[0].g),
				               &kept[0].f) != 0)
					s->bad++;
				else
					s->rechecked++;
			}
			moq_cache_group_unref(kept[0].g);
			memmove(kept, kept + 1, sizeof(kept[0]) * (KEEP - 1));
			nk--;
		}
		kept[nk++] = k;
		next++;
		__atomic_store_n(&s->reader_at, next, __ATOMIC_RELEASE);
	}
	while (nk > 0)
		moq_cache_group_unref(kept[--nk].g);
	moq_cache_reader_unregister(s->c, 0);
	return NULL;
}

START_TEST(writer_and_reader_never_torn)
{
	struct moq_cache_counting cnt;
	struct moq_cache_cfg cfg = {0};
	struct moq_cache_track_cfg tc = {0, 8};
	struct shared s = {0};
	pthread_t w, r;
	const char *env = getenv("MOQ_STRESS_GROUPS");

	moq_cache_counting_init(&cnt);
	cfg.alloc = moq_cache_counting_alloc(&cnt);
	cfg.budget = 600 * 1024; /* a few groups: eviction happens all the time */
	cfg.max_readers = 2;
	cfg.buckets = 1;
	s.c = moq_cache_create(&cfg);
	ck_assert_ptr_nonnull(s.c);
	ck_assert_int_eq(moq_cache_track_create(s.c, "live", 4, "video", 5, &tc, &s.t), 0);
	s.groups = env ? strtoull(env, NULL, 10) : 1500;
	ck_assert_int_eq(pthread_create(&r, NULL, reader, &s), 0);
	ck_assert_int_eq(pthread_create(&w, NULL, writer, &s), 0);
	pthread_join(w, NULL);
	pthread_join(r, NULL);
	printf("# groups %llu seen %llu removed %llu frames %llu bytes %llu rechecked %llu bad "
	       "%llu\n",
	       (unsigned long long)s.groups, (unsigned long long)s.groups_seen,
	       (unsigned long long)s.removed_seen, (unsigned long long)s.frames_ok,
	       (unsigned long long)s.bytes_ok, (unsigned long long)s.rechecked,
	       (unsigned long long)s.bad);
	ck_assert_uint_eq(s.bad, 0);
	ck_assert_uint_gt(s.frames_ok, s.groups);
	ck_assert_uint_gt(s.groups_seen, s.groups / 4);
	ck_assert_uint_gt(s.rechecked, 0);
	ck_assert_int_eq(moq_cache_track_drop(s.t), 0);
	moq_cache_track_unref(s.t);
	moq_cache_reclaim(s.c);
	moq_cache_destroy(s.c);
	ck_assert_int_eq(moq_cache_counting_stats(&cnt).live_bytes, 0);
}
END_TEST

Suite *cache_concurrency_suite(void)
{
	Suite *s = suite_create("cache_concurrency");
	TCase *tc = tcase_create("stress");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, writer_and_reader_never_torn);
	suite_add_tcase(s, tc);
	return s;
}
