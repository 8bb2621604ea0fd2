/* SPDX-License-Identifier: MIT */
/*
 * bench_cache_fanout: {1, 100, 1000} readers draining the same track on two
 * reader threads while a writer thread appends (issue 3 benchmark 3).
 *
 * The writer publishes GROUPS groups of GOP frames (a ~8 KB keyframe, then
 * 200..1500-byte deltas; frames over one 1150-byte chunk are written chunk
 * by chunk, the rest whole) as fast as it can. Each reader takes the groups
 * in order and reads them with moq_cache_read_frames (batch 8), and checks
 * every view: the frame index and byte position continue exactly where the
 * previous view ended, and the bytes equal the writer's source bytes
 * (memcmp). At the end every reader must have seen every frame and byte.
 * The writer's time is shown beside the total. Nothing is evicted (no budget, a window that holds every group), so any
 * gap is a bug. Reported: frames delivered per second over all readers (the
 * check included) and the same in bytes.
 *
 *   bench_cache_fanout [--json]
 * Exit status 1 when a reader missed or mis-ordered anything.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"

#define GROUPS   100
#define GOP      60
#define CHUNK    1150u
#define SRC_SIZE (1u << 20)
#define THREADS  2

static uint8_t *src;

static uint32_t fsize(uint32_t seq, uint32_t i)
{
	uint32_t x = (seq * 7919u + i * 104729u) % 1301u;

	return i == 0 ? 8000 + x : 200 + x;
}

static uint32_t fsrc(uint32_t seq, uint32_t i)
{
	return (seq * 7919u + i * 104729u * 3u) % (SRC_SIZE - 16384u);
}

struct reader {
	struct moq_cache_group *g;
	struct moq_cache_cursor cur;
	uint32_t seq, frame, pos;
	uint64_t frames, bytes;
	int done, bad;
};

struct shared {
	struct moq_cache *c;
	struct moq_cache_track *t;
	struct reader *r;
	unsigned nreaders;
};

struct targ {
	struct shared *s;
	unsigned id, first, last;
};

static void *writer(void *arg)
{
	struct shared *s = arg;
	uint32_t seq, i;

	for (seq = 0; seq < GROUPS; seq++) {
		struct moq_cache_group *g;

		if (moq_cache_group_open(s->t, seq, seq, &g) != 0)
			abort();
		for (i = 0; i < GOP; i++) {
			uint32_t sz = fsize(seq, i), off = 0;
			const uint8_t *p = src + fsrc(seq, i);

			if (sz <= CHUNK) {
				if (moq_cache_write_frame(g, i, p, sz) != 0)
					abort();
				continue;
			}
			if (moq_cache_frame_begin(g, i, sz) < 0)
				abort();
			while (off < sz) {
				uint32_t n = sz - off < CHUNK ? sz - off : CHUNK;

				if (moq_cache_frame_append(g, p + off, n) < 0)
					abort();
				off += n;
			}
		}
		moq_cache_group_finish(g);
		moq_cache_group_unref(g);
	}
	return NULL;
}

static int check(struct reader *r, struct moq_cache_group *g, const struct moq_cache_frame *f)
{
	const uint8_t *want;

	if (f->index != r->frame || f->start != r->pos || f->size != fsize(r->seq, f->index))
		return -1;
	want = src + fsrc(r->seq, f->index) + f->start;
	if (f->data != NULL) {
		if (memcmp(f->data, want, f->len) != 0)
			return -1;
	} else {
		struct iovec iov[16];
		int n = moq_cache_group_iov(g, f->offset, f->len, iov, 16), k;
		size_t o = 0;

		for (k = 0; k < n; k++) {
			if (memcmp(iov[k].iov_base, want + o, iov[k].iov_len) != 0)
				return -1;
			o += iov[k].iov_len;
		}
		if (o != f->len)
			return -1;
	}
	r->bytes += f->len;
	if (moq_cache_frame_complete(f)) {
		r->frame++;
		r->pos = 0;
		r->frames++;
	} else {
		r->pos += f->len;
	}
	return 0;
}

static void *reader_thread(void *arg)
{
	struct targ *a = arg;
	struct shared *s = a->s;
	unsigned left = a->last - a->first, i;

	if (moq_cache_reader_register(s->c, a->id) != 0)
		abort();
	while (left > 0) {
		for (i = a->first; i < a->last; i++) {
			struct reader *r = &s->r[i];
			struct moq_cache_frame f[MOQ_CACHE_BATCH];
			int n, k;

			if (r->done)
				continue;
			if (r->g == NULL) {
				if (moq_cache_track_group(s->t, r->seq, &r->g) != 0) {
					r->g = NULL;
					continue;
				}
				memset(&r->cur, 0, sizeof(r->cur));
				r->frame = 0;
				r->pos = 0;
			}
			n = moq_cache_read_frames(r->g, &r->cur, f, MOQ_CACHE_BATCH);
			for (k = 0; k < n; k++)
				if (check(r, r->g, &f[k]) != 0)
					r->bad++;
			if (n < 0) {
				if (n != MOQ_ERR_CLOSED || r->frame != GOP)
					r->bad++;
				moq_cache_group_unref(r->g);
				r->g = NULL;
				if (++r->seq == GROUPS) {
					r->done = 1;
					left--;
				}
			}
		}
		moq_cache_quiescent(s->c, a->id);
	}
	moq_cache_reader_unregister(s->c, a->id);
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	static const unsigned counts[] = {1, 100, 1000};
	int json = argc > 1 && strcmp(argv[1], "--json") == 0, fail = 0;
	uint64_t frames_total = (uint64_t)GROUPS * GOP, bytes_total = 0;

	src = malloc(SRC_SIZE);
	for (uint32_t i = 0; i < SRC_SIZE; i++)
		src[i] = (uint8_t)(i * 2654435761u >> 24);
	for (uint32_t s = 0; s < GROUPS; s++)
		for (uint32_t i = 0; i < GOP; i++)
			bytes_total += fsize(s, i);
	if (!json)
		printf("%-8s %-8s %10s %12s %9s %9s %14s %10s %s\n", "readers", "threads", "frames",
		       "delivered", "writer_s", "seconds", "frames/s", "MB/s",
		       "every byte in order");
	for (unsigned ci = 0; ci < 3; ci++) {
		struct moq_cache_counting cnt;
		struct moq_cache_cfg cfg = {0};
		struct moq_cache_track_cfg tc = {UINT64_MAX / 4, 128};
		struct shared s = {0};
		struct targ ta[THREADS];
		pthread_t w, th[THREADS];
		unsigned n = counts[ci], nth = n < THREADS ? n : THREADS, t, bad = 0;
		uint64_t frames = 0, bytes = 0;
		double t0, el, wel;

		moq_cache_counting_init(&cnt);
		cfg.alloc = moq_cache_counting_alloc(&cnt);
		cfg.max_readers = THREADS;
		s.c = moq_cache_create(&cfg);
		if (s.c == NULL ||
		    moq_cache_track_create(s.c, "live", 4, "video", 5, &tc, &s.t) != 0)
			abort();
		s.r = calloc(n, sizeof(*s.r));
		s.nreaders = n;
		t0 = now_s();
		for (t = 0; t < nth; t++) {
			ta[t] = (struct targ){&s, t, n * t / nth, n * (t + 1) / nth};
			pthread_create(&th[t], NULL, reader_thread, &ta[t]);
		}
		pthread_create(&w, NULL, writer, &s);
		pthread_join(w, NULL);
		wel = now_s() - t0;
		for (t = 0; t < nth; t++)
			pthread_join(th[t], NULL);
		el = now_s() - t0;
		for (unsigned i = 0; i < n; i++) {
			frames += s.r[i].frames;
			bytes += s.r[i].bytes;
			if (s.r[i].bad || s.r[i].frames != frames_total ||
			    s.r[i].bytes != bytes_total) {
				fprintf(stderr,
				        "reader %u: %d bad views, %llu frames, %llu bytes "
				        "(want %llu, %llu)\n",
				        i, s.r[i].bad, (unsigned long long)s.r[i].frames,
				        (unsigned long long)s.r[i].bytes,
				        (unsigned long long)frames_total,
				        (unsigned long long)bytes_total);
				bad++;
			}
		}
		if (bad)
			fail = 1;
		if (json)
			printf("{\"bench\":\"fanout\",\"readers\":%u,\"threads\":%u,\"frames\":%"
			       "llu,"
			       "\"delivered\":%llu,\"writer_seconds\":%.3f,\"seconds\":%.3f,"
			       "\"frames_per_s\":%.0f,"
			       "\"mb_per_s\":%.1f,\"in_order\":%s}\n",
			       n, nth, (unsigned long long)frames_total, (unsigned long long)frames,
			       wel, el, (double)frames / el, (double)bytes / el / 1e6,
			       bad ? "false" : "true");
		else
			printf("%-8u %-8u %10llu %12llu %9.3f %9.3f %14.0f %10.1f %s\n", n, nth,
			       (unsigned long long)frames_total, (unsigned long long)frames, wel,
			       el, (double)frames / el, (double)bytes / el / 1e6,
			       bad ? "NO" : "yes");
		moq_cache_track_drop(s.t);
		moq_cache_track_unref(s.t);
		moq_cache_destroy(s.c);
		if (moq_cache_counting_stats(&cnt).live_bytes != 0)
			fail = 1;
		free(s.r);
	}
	free(src);
	return fail;
}
