/* SPDX-License-Identifier: MIT */
/*
 * bench_cache_backing: what a cache holds against what it bills
 * (DESIGN.md rule 1, issue 3 benchmark 1).
 *
 * Feeds 10 s of interleaved media through each storage strategy's write
 * path, chunked as QUIC delivers a group stream (frames packed back to back,
 * with their moq-lite frame headers, into 1150-byte chunks, so a frame can
 * span chunks): {1, 4} video + audio pairs; video {150, 1000, 4000} kbps at
 * 30 fps with 2 s groups and keyframes ~10x a delta frame; audio 64 kbps in
 * 20 ms frames, one frame per group. Then evicts video groups explicitly,
 * keeping {all, a quarter, none} (the newest ones) while every audio group
 * stays, and prints per case: bytes billed (payload + MOQ_CACHE_FRAME_OVERHEAD
 * per frame + MOQ_CACHE_GROUP_OVERHEAD per group, the same for every
 * strategy), bytes the allocator really holds (live blocks, each counted
 * once; the cache's own index included, its fixed per-track state not), the
 * ratio, and allocations per frame.
 *
 * Strategies: exact (one malloc per frame, the control), shared (every track
 * appended into shared 64 KiB blocks, a block freed when no live frame is in
 * it: the pathology) and cache (moq_cache through its real write path).
 *
 *   bench_cache_backing [--json]
 * Exit status 1 when the cache's ratio exceeds 1.10 in any case.
 *
 * Built a second time as bench_cache_pool (-DMOQ_BENCH_POOL, under EAL with
 * --no-huge): the cache strategy then runs on the relay's own allocator,
 * the per-lcore size-class pools of dpdk_app/pool.h, sized as the relay
 * sizes them, and held is what the pools hand to the cache (class sizes,
 * rte_malloc elements above the largest class); a second column, slabs,
 * counts every slab serving a class whole (free slots in partly used slabs
 * and the lcore's cached objects included).
 *
 *   bench_cache_pool --callgrind [--latency-ms N]
 *   bench_cache_pool --write-path rte_malloc|pool [--latency-ms N]
 * measure the cache's write path (bench_write_path below): by default every
 * group opens at time 0 with no max latency, so each track keeps a window of
 * 1,024 groups (an audio track's 20 ms groups fill it in 20 s) and groups
 * leave it lagged; with --latency-ms N the groups open at their media time
 * and the tracks' max latency is N ms (audio: N / 20 groups), so they expire
 * by age at the next group open as at a relay.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"

#ifdef MOQ_BENCH_POOL
#include <unistd.h>

#include <rte_common.h>
#include <rte_eal.h>
#include <rte_malloc.h>

#include "pool.h"

static struct moq_pool *bench_pool;

/* what the pools hold for the cache now: objects (class sizes) and slabs */
static uint64_t pool_allocs;

static void pool_held(uint64_t *obj, uint64_t *slab)
{
	struct moq_pool_stats st;

	moq_pool_stats(bench_pool, &st);
	*obj = st.obj_bytes + st.fallback_bytes;
	*slab = st.slab_bytes + st.fallback_bytes;
	pool_allocs = st.allocs;
}
#endif

#define SECONDS    10
#define CHUNK      1150u /* stream bytes per QUIC packet */
#define FPS        30
#define GOP        60 /* 2 s groups */
#define AUDIO_BPS  64000
#define AUDIO_MS   20
#define SHARED_BLK 65536u
#define TARGET     1.10

enum op_kind { OP_OPEN, OP_BEGIN, OP_CHUNK };

struct op {
	enum op_kind kind;
	uint16_t track;
	uint32_t a; /* OPEN: seq; BEGIN: size; CHUNK: len */
	int64_t ts;
};

struct ops {
	struct op *v;
	size_t n, cap;
	uint64_t frames, groups, payload;
	uint64_t video_groups; /* per video track */
};

static void push(struct ops *o, enum op_kind k, unsigned track, uint32_t a, int64_t ts)
{
	if (o->n == o->cap) {
		o->cap = o->cap ? o->cap * 2 : 4096;
		o->v = realloc(o->v, o->cap * sizeof(*o->v));
		if (o->v == NULL)
			abort();
	}
	o->v[o->n++] = (struct op){k, (uint16_t)track, a, ts};
}

static uint32_t rng_state = 12345;

static uint32_t rnd(void)
{
	rng_state = rng_state * 1103515245u + 12345u;
	return rng_state >> 8;
}

/* size of a varint (RFC 9000, 16) */
static uint32_t vlen(uint64_t v)
{
	return v < 64 ? 1 : v < 16384 ? 2 : v < (1u << 30) ? 4 : 8;
}

struct stream {
	uint64_t off; /* group stream offset */
	uint32_t seq;
	int open;
};

/* One frame of @size onto @track's current group stream, split at chunk
 * boundaries of the stream (moq-lite lite-05 frame header: timestamp delta,
 * size). */
static void frame(struct ops *o, struct stream *s, unsigned track, uint32_t size, int64_t ts)
{
	uint32_t left = size;

	s->off += 1 + vlen(size);
	push(o, OP_BEGIN, track, size, ts);
	while (left > 0) {
		uint32_t room = CHUNK - (uint32_t)(s->off % CHUNK);
		uint32_t n = left < room ? left : room;

		push(o, OP_CHUNK, track, n, ts);
		s->off += n;
		left -= n;
	}
	o->frames++;
	o->payload += size;
}

/* Tracks 2p (video) and 2p+1 (audio) for p < @pairs, in time order. */
static void gen(struct ops *o, unsigned pairs, unsigned kbps)
{
	struct stream st[8] = {0};
	uint64_t gop_bytes = (uint64_t)kbps * 1000 / 8 * GOP / FPS;
	uint32_t delta = (uint32_t)(gop_bytes / (GOP - 1 + 10));
	uint32_t vf = 0, af = 0;
	const uint32_t vstep = 1000000 / FPS, astep = AUDIO_MS * 1000; /* us */

	memset(o, 0, sizeof(*o));
	rng_state = 12345;
	/* events at t = vf * vstep and af * astep, video first on ties */
	while (vf * vstep < SECONDS * 1000000u || af * astep < SECONDS * 1000000u) {
		int video = vf * vstep <= af * astep && vf * vstep < SECONDS * 1000000u;
		unsigned p;

		for (p = 0; p < pairs; p++) {
			unsigned tr = video ? 2 * p : 2 * p + 1;
			struct stream *s = &st[tr];
			uint32_t size;

			if (video) {
				if (vf % GOP == 0) {
					push(o, OP_OPEN, tr, vf / GOP, (int64_t)vf * vstep);
					s->off = 1 + 1 + 1; /* type, GROUP length, ids */
					o->groups++;
				}
				size = vf % GOP == 0 ? 10 * delta : delta;
				size = size * (80 + rnd() % 41) / 100; /* +-20 % */
				frame(o, s, tr, size, (int64_t)vf * vstep);
			} else {
				push(o, OP_OPEN, tr, af, (int64_t)af * astep);
				s->off = 3;
				o->groups++;
				size = AUDIO_BPS / 8 * AUDIO_MS / 1000 - 4 + rnd() % 9;
				frame(o, s, tr, size, (int64_t)af * astep);
			}
		}
		if (video)
			vf++;
		else
			af++;
	}
	o->video_groups = (vf + GOP - 1) / GOP;
}

struct result {
	uint64_t billed, held, allocs;
	uint64_t held_slab; /* bench_cache_pool: slabs serving a class */
};

static uint64_t bill_of(uint64_t payload, uint64_t frames, uint64_t groups)
{
	return payload + frames * MOQ_CACHE_FRAME_OVERHEAD + groups * MOQ_CACHE_GROUP_OVERHEAD;
}

/* which video groups survive: the newest @keep of @n */
static int kept(uint32_t seq, uint64_t n, uint64_t keep)
{
	return seq + keep >= n;
}

static uint64_t keep_count(uint64_t n, int keep_mode)
{
	return keep_mode == 0 ? n : keep_mode == 1 ? (n + 3) / 4 : 0;
}

/* --- exact: one malloc per frame ------------------------------------------ */

struct xframe {
	uint8_t *p;
	uint32_t size, got;
	unsigned track;
	uint32_t seq;
};

static struct result run_exact(const struct ops *o, const uint8_t *src, unsigned tracks,
                               int keep_mode)
{
	struct moq_cache_counting cnt;
	struct moq_cache_alloc a;
	struct xframe *fr = calloc(o->frames, sizeof(*fr));
	uint32_t cur_seq[8] = {0}, cur[8] = {0};
	uint64_t nf = 0, i, keep = keep_count(o->video_groups, keep_mode);
	uint64_t payload = 0, frames = 0, groups = 0;
	struct result r = {0};

	moq_cache_counting_init(&cnt);
	a = moq_cache_counting_alloc(&cnt);
	for (i = 0; i < o->n; i++) {
		const struct op *op = &o->v[i];

		if (op->kind == OP_OPEN) {
			cur_seq[op->track] = op->a;
		} else if (op->kind == OP_BEGIN) {
			fr[nf] = (struct xframe){a.alloc(a.ctx, op->a ? op->a : 1, 1), op->a, 0,
			                         op->track, cur_seq[op->track]};
			cur[op->track] = (uint32_t)nf++;
		} else {
			struct xframe *f = &fr[cur[op->track]];

			memcpy(f->p + f->got, src, op->a);
			f->got += op->a;
		}
	}
	r.allocs = moq_cache_counting_stats(&cnt).total_allocs;
	/* evict video groups */
	for (i = 0; i < nf; i++) {
		if (fr[i].track % 2 == 0 && !kept(fr[i].seq, o->video_groups, keep)) {
			a.free(a.ctx, fr[i].p);
			fr[i].p = NULL;
		} else {
			payload += fr[i].size;
			frames++;
		}
	}
	groups = o->groups - (o->video_groups - keep) * (tracks / 2);
	r.billed = bill_of(payload, frames, groups);
	r.held = (uint64_t)moq_cache_counting_stats(&cnt).live_bytes;
	for (i = 0; i < nf; i++)
		a.free(a.ctx, fr[i].p);
	free(fr);
	return r;
}

/* --- shared: every track appends into shared 64 KiB blocks ------------------ */

struct sblock {
	uint8_t *p;
	uint32_t live; /* frames with bytes in it */
};

struct sframe {
	uint32_t first, last; /* blocks its bytes touch */
	uint32_t size;
	unsigned track;
	uint32_t seq;
};

static struct result run_shared(const struct ops *o, const uint8_t *src, unsigned tracks,
                                int keep_mode)
{
	struct moq_cache_counting cnt;
	struct moq_cache_alloc a;
	size_t nb_cap = o->payload / SHARED_BLK + 16;
	struct sblock *blk = calloc(nb_cap, sizeof(*blk));
	struct sframe *fr = calloc(o->frames, sizeof(*fr));
	uint32_t nb = 0, used = SHARED_BLK, cur_seq[8] = {0}, cur[8] = {0};
	uint64_t nf = 0, i, keep = keep_count(o->video_groups, keep_mode);
	uint64_t payload = 0, frames = 0, groups;
	struct result r = {0};

	moq_cache_counting_init(&cnt);
	a = moq_cache_counting_alloc(&cnt);
	for (i = 0; i < o->n; i++) {
		const struct op *op = &o->v[i];

		if (op->kind == OP_OPEN) {
			cur_seq[op->track] = op->a;
		} else if (op->kind == OP_BEGIN) {
			fr[nf] = (struct sframe){UINT32_MAX, 0, op->a, op->track,
			                         cur_seq[op->track]};
			cur[op->track] = (uint32_t)nf++;
		} else {
			struct sframe *f = &fr[cur[op->track]];
			uint32_t left = op->a;

			while (left > 0) {
				uint32_t n;

				if (used == SHARED_BLK) {
					blk[nb].p = a.alloc(a.ctx, SHARED_BLK, 64);
					nb++;
					used = 0;
				}
				n = SHARED_BLK - used < left ? SHARED_BLK - used : left;
				memcpy(blk[nb - 1].p + used, src, n);
				used += n;
				left -= n;
				if (f->first == UINT32_MAX)
					f->first = nb - 1;
				f->last = nb - 1;
			}
		}
	}
	/* a frame pins every block it touches */
	for (i = 0; i < nf; i++)
		for (uint32_t b = fr[i].first; fr[i].size && b <= fr[i].last; b++)
			blk[b].live++;
	r.allocs = moq_cache_counting_stats(&cnt).total_allocs;
	for (i = 0; i < nf; i++) {
		if (fr[i].track % 2 == 0 && !kept(fr[i].seq, o->video_groups, keep)) {
			for (uint32_t b = fr[i].first; fr[i].size && b <= fr[i].last; b++) {
				/* the block being filled stays with the writer */
				if (--blk[b].live == 0 && b != nb - 1) {
					a.free(a.ctx, blk[b].p);
					blk[b].p = NULL;
				}
			}
		} else {
			payload += fr[i].size;
			frames++;
		}
	}
	groups = o->groups - (o->video_groups - keep) * (tracks / 2);
	r.billed = bill_of(payload, frames, groups);
	r.held = (uint64_t)moq_cache_counting_stats(&cnt).live_bytes;
	for (i = 0; i < nb; i++)
		a.free(a.ctx, blk[i].p);
	free(blk);
	free(fr);
	return r;
}

/* --- cache: moq_cache's write path -------------------------------------------- */

static struct result run_cache(const struct ops *o, const uint8_t *src, unsigned tracks,
                               int keep_mode)
{
	struct moq_cache_counting cnt;
	struct moq_cache_cfg cfg = {0};
	struct moq_cache *c;
	struct moq_cache_track *t[8];
	struct moq_cache_group *g[8] = {0};
	struct moq_cache_track_cfg tc = {UINT64_MAX / 4, 1024}; /* keep 10 s */
	uint64_t i, keep = keep_count(o->video_groups, keep_mode), base, allocs0;
	unsigned k;
	struct result r = {0};
#ifdef MOQ_BENCH_POOL
	uint64_t pobj0, pslab0, pobj, pslab;
#endif

	moq_cache_counting_init(&cnt);
	cfg.alloc = moq_cache_counting_alloc(&cnt);
#ifdef MOQ_BENCH_POOL
	cfg.alloc = moq_pool_cache_alloc(bench_pool);
#endif
	c = moq_cache_create(&cfg);
	for (k = 0; k < tracks; k++) {
		char name[16];

		snprintf(name, sizeof(name), "%s%u", k % 2 ? "audio" : "video", k / 2);
		if (moq_cache_track_create(c, "bench", 5, name, strlen(name), &tc, &t[k]) != 0)
			abort();
	}
	base = (uint64_t)moq_cache_counting_stats(&cnt).live_bytes;
	allocs0 = moq_cache_counting_stats(&cnt).total_allocs;
#ifdef MOQ_BENCH_POOL
	pool_held(&pobj0, &pslab0);
	allocs0 = pool_allocs;
#endif
	for (i = 0; i < o->n; i++) {
		const struct op *op = &o->v[i];
		int64_t rc;

		if (op->kind == OP_OPEN) {
			if (g[op->track] != NULL) {
				moq_cache_group_finish(g[op->track]);
				moq_cache_group_unref(g[op->track]);
			}
			rc = moq_cache_group_open(t[op->track], op->a, (uint64_t)op->ts * 1000,
			                          &g[op->track]);
		} else if (op->kind == OP_BEGIN) {
			rc = moq_cache_frame_begin(g[op->track], op->ts, op->a);
		} else {
			rc = moq_cache_frame_append(g[op->track], src, op->a);
		}
		if (rc < 0) {
			fprintf(stderr, "cache write failed: %s\n", moq_err_str((int)rc));
			exit(2);
		}
	}
	for (k = 0; k < tracks; k++) {
		moq_cache_group_finish(g[k]);
		moq_cache_group_unref(g[k]);
	}
	r.allocs = moq_cache_counting_stats(&cnt).total_allocs - allocs0;
#ifdef MOQ_BENCH_POOL
	pool_held(&pobj, &pslab);
	r.allocs = pool_allocs - allocs0;
#endif
	/* explicit eviction of the video groups not kept */
	for (k = 0; k < tracks; k += 2) {
		for (uint32_t s = 0; s < o->video_groups; s++) {
			struct moq_cache_group *x;

			if (kept(s, o->video_groups, keep))
				continue;
			if (moq_cache_track_group(t[k], s, &x) == 0) {
				moq_cache_group_evict(x);
				moq_cache_group_unref(x);
			}
		}
	}
	moq_cache_reclaim(c);
	r.billed = moq_cache_used(c);
	r.held = (uint64_t)moq_cache_counting_stats(&cnt).live_bytes - base;
#ifdef MOQ_BENCH_POOL
	pool_held(&pobj, &pslab);
	r.held = pobj - pobj0;
	r.held_slab = pslab - pslab0;
#endif
	for (k = 0; k < tracks; k++) {
		moq_cache_track_drop(t[k]);
		moq_cache_track_unref(t[k]);
	}
	moq_cache_destroy(c);
#ifdef MOQ_BENCH_POOL
	moq_pool_flush(bench_pool);
	pool_held(&pobj, &pslab);
	if (pobj != 0 || pslab != 0) {
		fprintf(stderr, "cache leaked %llu bytes of the pools\n", (unsigned long long)pobj);
		exit(2);
	}
#endif
	if (moq_cache_counting_stats(&cnt).live_bytes != 0) {
		fprintf(stderr, "cache leaked %lld bytes\n",
		        (long long)moq_cache_counting_stats(&cnt).live_bytes);
		exit(2);
	}
	return r;
}

#ifdef MOQ_BENCH_POOL
/* Steady state: @rounds replays of @o (10 s each, sequences continued)
 * into a cache with byte budget @budget, as the relay runs at its
 * --cache-budget: what the pools hold then against what the cache bills
 * (objects, and whole slabs). */
static void run_steady(const struct ops *o, const uint8_t *src, unsigned tracks, uint64_t budget,
                       unsigned rounds, struct result *r)
{
	struct moq_cache_cfg cfg = {0};
	struct moq_cache *c;
	struct moq_cache_track *t[8];
	struct moq_cache_group *g[8] = {0};
	struct moq_cache_track_cfg tc = {UINT64_MAX / 4, 1024};
	uint64_t pobj0, pslab0, pobj, pslab;
	uint32_t per_round[8];
	unsigned k;

	cfg.alloc = moq_pool_cache_alloc(bench_pool);
	cfg.budget = budget;
	c = moq_cache_create(&cfg);
	for (k = 0; k < tracks; k++) {
		char name[16];

		snprintf(name, sizeof(name), "%s%u", k % 2 ? "audio" : "video", k / 2);
		if (moq_cache_track_create(c, "bench", 5, name, strlen(name), &tc, &t[k]) != 0)
			abort();
		per_round[k] = k % 2 ? SECONDS * 1000 / AUDIO_MS : (uint32_t)o->video_groups;
	}
	pool_held(&pobj0, &pslab0);
	for (unsigned round = 0; round < rounds; round++) {
		for (uint64_t i = 0; i < o->n; i++) {
			const struct op *op = &o->v[i];
			int64_t rc;

			if (op->kind == OP_OPEN) {
				if (g[op->track] != NULL) {
					moq_cache_group_finish(g[op->track]);
					moq_cache_group_unref(g[op->track]);
				}
				rc = moq_cache_group_open(t[op->track],
				                          op->a + (uint64_t)round *
				                                          per_round[op->track],
				                          0, &g[op->track]);
			} else if (op->kind == OP_BEGIN) {
				rc = moq_cache_frame_begin(g[op->track], op->ts, op->a);
			} else {
				rc = moq_cache_frame_append(g[op->track], src, op->a);
			}
			if (rc < 0) {
				fprintf(stderr, "cache write failed: %s\n", moq_err_str((int)rc));
				exit(2);
			}
		}
	}
	for (k = 0; k < tracks; k++) {
		moq_cache_group_finish(g[k]);
		moq_cache_group_unref(g[k]);
	}
	moq_cache_reclaim(c);
	r->billed = moq_cache_used(c);
	pool_held(&pobj, &pslab);
	r->held = pobj - pobj0;
	r->held_slab = pslab - pslab0;
	for (k = 0; k < tracks; k++) {
		moq_cache_track_drop(t[k]);
		moq_cache_track_unref(t[k]);
	}
	moq_cache_destroy(c);
	moq_pool_flush(bench_pool);
}

/* The relay's cache allocator before the pools: DPDK's heap per object. */
static void *bench_rte_alloc(void *ctx, size_t size, size_t align)
{
	(void)ctx;
	return rte_malloc_socket("moqdp_cache", size, (unsigned int)align, SOCKET_ID_ANY);
}

static void bench_rte_free(void *ctx, void *p)
{
	(void)ctx;
	rte_free(p);
}

/* --latency-ms: the tracks' max latency in ns; 0 = none, groups open at 0 */
static uint64_t wp_latency;

/* The measured write path: 4 video (1 Mbps) + audio pairs, 10 s replayed
 * @rounds times into a 32 MiB budget (evicting as the relay does) through
 * allocator @a; its name is what callgrind counts. */
__attribute__((noinline)) void bench_write_path(const struct ops *o, const uint8_t *src,
                                                struct moq_cache_alloc a, unsigned rounds);

__attribute__((noinline)) void bench_write_path(const struct ops *o, const uint8_t *src,
                                                struct moq_cache_alloc a, unsigned rounds)
{
	struct moq_cache_cfg cfg = {0};
	struct moq_cache *c;
	struct moq_cache_track *t[8];
	struct moq_cache_group *g[8] = {0};
	struct moq_cache_track_cfg tc = {wp_latency ? wp_latency : UINT64_MAX / 4, 1024};
	unsigned k;

	cfg.alloc = a;
	cfg.budget = 32ull << 20;
	c = moq_cache_create(&cfg);
	for (k = 0; k < 8; k++) {
		char name[16];

		snprintf(name, sizeof(name), "%s%u", k % 2 ? "audio" : "video", k / 2);
		if (moq_cache_track_create(c, "bench", 5, name, strlen(name), &tc, &t[k]) != 0)
			abort();
	}
	for (unsigned round = 0; round < rounds; round++) {
		for (uint64_t i = 0; i < o->n; i++) {
			const struct op *op = &o->v[i];
			uint32_t per = op->track % 2 ? SECONDS * 1000 / AUDIO_MS
			                             : (uint32_t)o->video_groups;
			int64_t rc;

			if (op->kind == OP_OPEN) {
				/* media time, rounds back to back (us -> ns) */
				uint64_t now =
				        ((uint64_t)round * SECONDS * 1000000u + (uint64_t)op->ts) *
				        1000u;

				if (g[op->track] != NULL) {
					moq_cache_group_finish(g[op->track]);
					moq_cache_group_unref(g[op->track]);
				}
				rc = moq_cache_group_open(t[op->track],
				                          op->a + (uint64_t)round * per,
				                          wp_latency ? now : 0, &g[op->track]);
			} else if (op->kind == OP_BEGIN) {
				rc = moq_cache_frame_begin(g[op->track], op->ts, op->a);
			} else {
				rc = moq_cache_frame_append(g[op->track], src, op->a);
			}
			if (rc < 0)
				abort();
		}
	}
	for (k = 0; k < 8; k++) {
		moq_cache_group_finish(g[k]);
		moq_cache_group_unref(g[k]);
		moq_cache_track_drop(t[k]);
		moq_cache_track_unref(t[k]);
	}
	moq_cache_destroy(c);
}

static struct moq_cache_alloc alloc_named(const char *name)
{
	struct moq_cache_alloc a = {bench_rte_alloc, bench_rte_free, NULL};

	if (strcmp(name, "pool") == 0)
		a = moq_pool_cache_alloc(bench_pool);
	return a;
}

#define WP_ROUNDS 3

/* --write-path ALLOC: a warm-up and a timed run of bench_write_path (what
 * --callgrind runs under valgrind); prints frames and ns per frame of the
 * second */
static int write_path_once(const char *alloc, const uint8_t *src)
{
	struct ops o;
	struct timespec t0, t1;
	double ns;

	gen(&o, 4, 1000);
	bench_write_path(&o, src, alloc_named(alloc), 1); /* warm: first-touch faults */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bench_write_path(&o, src, alloc_named(alloc), WP_ROUNDS);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
	printf("%s %llu %.1f\n", alloc, (unsigned long long)o.frames * WP_ROUNDS,
	       ns / (double)(o.frames * WP_ROUNDS));
	free(o.v);
	return 0;
}

/* --callgrind: instructions of the cache write path per frame, DPDK's heap
 * (the relay before issue 13) against the pools, side by side */
static double callgrind_ir(const char *self, const char *alloc, const char *toggles)
{
	char out[64], cmd[640], line[512];
	double ir = -1;
	FILE *f;

	snprintf(out, sizeof(out), "/tmp/bench_cache_pool.%d.cg", (int)getpid());
	snprintf(cmd, sizeof(cmd),
	         "valgrind --tool=callgrind --callgrind-out-file=%s %s %s --write-path %s "
	         "--latency-ms %llu >/dev/null 2>&1",
	         out, toggles, self, alloc, (unsigned long long)(wp_latency / 1000000u));
	if (system(cmd) != 0) {
		fprintf(stderr, "callgrind run failed: %s\n", cmd);
		return -1;
	}
	f = fopen(out, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "totals:", 7) == 0 || strncmp(line, "summary:", 8) == 0)
			ir = strtod(strchr(line, ':') + 1, NULL);
	fclose(f);
	unlink(out);
	return ir;
}

static int write_path_callgrind(const char *self)
{
	static const char *allocs[] = {"rte_malloc", "pool"};
	/* the allocator's entry points as the cache calls them */
	static const char *fns[] = {
	        "--toggle-collect=bench_rte_alloc --toggle-collect=bench_rte_free",
	        "--toggle-collect=cache_alloc --toggle-collect=cache_free"};
	double ir[2], air[2];
	uint64_t frames;
	struct ops o;

	for (int i = 0; i < 2; i++) {
		ir[i] = callgrind_ir(self, allocs[i], "--toggle-collect=bench_write_path");
		air[i] = callgrind_ir(self, allocs[i], fns[i]);
		if (ir[i] < 0 || air[i] < 0)
			return 2;
	}
	gen(&o, 4, 1000);
	frames = o.frames * (WP_ROUNDS + 1); /* the warm-up run counts too */
	free(o.v);
	printf("cache write path (4 x (1 Mbps video + audio), 40 s into a 32 MiB budget, %llu "
	       "frames, ",
	       (unsigned long long)frames);
	if (wp_latency)
		printf("max latency %llu ms", (unsigned long long)(wp_latency / 1000000u));
	else
		printf("1,024-group windows");
	printf("), callgrind Ir:\n%-12s %14s %12s %14s %12s\n", "allocator", "write path",
	       "per frame", "allocator", "per frame");
	for (int i = 0; i < 2; i++)
		printf("%-12s %14.0f %12.1f %14.0f %12.1f\n", allocs[i], ir[i],
		       ir[i] / (double)frames, air[i], air[i] / (double)frames);
	printf("pool / rte_malloc: write path %.3f, allocator %.3f\n", ir[1] / ir[0],
	       air[1] / air[0]);
	return 0;
}

static double steady_table(const uint8_t *src, int json)
{
	static const uint64_t budgets[] = {8ull << 20, 32ull << 20, 128ull << 20};
	static const unsigned kbps_v[] = {1000, 4000};
	double worst = 0;

	if (!json)
		printf("\nsteady state at the budget (4 video + audio pairs, 120 s of media; "
		       "held/billed, slabs/billed):\n%-10s %-6s %12s %12s %7s %12s %7s\n",
		       "budget", "kbps", "billed", "held", "ratio", "slab bytes", "slabs");
	for (unsigned ki = 0; ki < 2; ki++) {
		struct ops o;

		gen(&o, 4, kbps_v[ki]);
		for (unsigned bi = 0; bi < 3; bi++) {
			struct result r = {0};
			double ratio, sratio;

			run_steady(&o, src, 8, budgets[bi], 12, &r);
			ratio = (double)r.held / (double)r.billed;
			sratio = (double)r.held_slab / (double)r.billed;
			if (ratio > worst)
				worst = ratio;
			if (json)
				printf("{\"bench\":\"pool_steady\",\"budget\":%llu,"
				       "\"video_kbps\":%u,\"billed\":%llu,\"held\":%llu,"
				       "\"slab_bytes\":%llu,\"ratio\":%.4f,\"slab_ratio\":%.4f}\n",
				       (unsigned long long)budgets[bi], kbps_v[ki],
				       (unsigned long long)r.billed, (unsigned long long)r.held,
				       (unsigned long long)r.held_slab, ratio, sratio);
			else
				printf("%-10llu %-6u %12llu %12llu %7.3f %12llu %7.3f\n",
				       (unsigned long long)budgets[bi] >> 20, kbps_v[ki],
				       (unsigned long long)r.billed, (unsigned long long)r.held,
				       ratio, (unsigned long long)r.held_slab, sratio);
		}
		free(o.v);
	}
	return worst;
}
#endif

int main(int argc, char **argv)
{
	static const unsigned pairs_v[] = {1, 4}, kbps_v[] = {150, 1000, 4000};
	static const char *keep_names[] = {"all", "quarter", "none"};
	static const char *strat_names[] = {"exact", "shared", "cache"};
	int json = argc > 1 && strcmp(argv[1], "--json") == 0;
	uint8_t *src = malloc(CHUNK);
	double worst_cache = 0, min_shared_none = 1e9;
	int fail = 0;
	double worst_slab = 0;

#ifdef MOQ_BENCH_POOL
	{
		char prefix[64];
		char *eal[] = {argv[0], "--no-huge", "-m",
		               "1024",  "--no-pci",  "--no-telemetry",
		               "-l",    "0",         "--log-level=lib.eal:error",
		               prefix};
		int sock = 0;

		snprintf(prefix, sizeof(prefix), "--file-prefix=bench-pool-%d", (int)getpid());
		if (rte_eal_init((int)RTE_DIM(eal), eal) < 0) {
			fprintf(stderr, "bench_cache_pool: EAL did not initialise\n");
			return 2;
		}
		/* sized as the relay sizes it for a 256 MiB budget, one worker
		 * (relay.c, cache_pool_create) */
		bench_pool = moq_pool_create("bench",
		                             (256ull << 20) * 5 / 4 +
		                                     (uint64_t)MOQ_POOL_CLASSES * MOQ_POOL_SLAB +
		                                     MOQ_POOL_CHUNK,
		                             &sock, 1);
		if (bench_pool == NULL)
			return 2;
		for (unsigned i = 0; i < CHUNK; i++)
			src[i] = (uint8_t)i;
		if (argc > 3 && strcmp(argv[argc - 2], "--latency-ms") == 0)
			wp_latency = strtoull(argv[argc - 1], NULL, 10) * 1000000u;
		if (argc > 2 && strcmp(argv[1], "--write-path") == 0)
			return write_path_once(argv[2], src);
		if (argc > 1 && strcmp(argv[1], "--callgrind") == 0)
			return write_path_callgrind(argv[0]);
	}
#endif
	for (unsigned i = 0; i < CHUNK; i++)
		src[i] = (uint8_t)i;
	if (!json) {
		printf("backing: 10 s of media, 1150-byte chunks; billed = payload + %u/frame + "
		       "%u/group\n",
		       MOQ_CACHE_FRAME_OVERHEAD, MOQ_CACHE_GROUP_OVERHEAD);
#ifdef MOQ_BENCH_POOL
		printf("cache strategy on the relay's pools (dpdk_app/pool.h); slabs = slab "
		       "bytes serving a class / billed\n");
#endif
		printf("%-6s %-6s %-8s %-7s %8s %12s %12s %7s %12s %7s\n", "pairs", "kbps", "keep",
		       "strat", "frames", "billed", "held", "ratio", "allocs/frame", "slabs");
	}
	for (unsigned pi = 0; pi < 2; pi++) {
		for (unsigned ki = 0; ki < 3; ki++) {
			struct ops o;

			gen(&o, pairs_v[pi], kbps_v[ki]);
			for (int keep = 0; keep < 3; keep++) {
				for (int s = 0; s < 3; s++) {
					unsigned tracks = pairs_v[pi] * 2;
					struct result r =
					        s == 0   ? run_exact(&o, src, tracks, keep)
					        : s == 1 ? run_shared(&o, src, tracks, keep)
					                 : run_cache(&o, src, tracks, keep);
					double ratio = (double)r.held / (double)r.billed;
					double apf = (double)r.allocs / (double)o.frames;

					double sratio = (double)r.held_slab / (double)r.billed;

					if (s == 2 && ratio > worst_cache)
						worst_cache = ratio;
					if (s == 2 && sratio > worst_slab)
						worst_slab = sratio;
					if (s == 1 && keep == 2 && ratio < min_shared_none)
						min_shared_none = ratio;
					if (json)
						printf("{\"bench\":\"backing\",\"pairs\":%u,"
						       "\"video_kbps\":%u,"
						       "\"keep\":\"%s\",\"strategy\":\"%s\","
						       "\"frames\":%llu,"
						       "\"billed\":%llu,\"held\":%llu,\"ratio\":%."
						       "4f,"
						       "\"allocs_per_frame\":%.3f}\n",
						       pairs_v[pi], kbps_v[ki], keep_names[keep],
						       strat_names[s], (unsigned long long)o.frames,
						       (unsigned long long)r.billed,
						       (unsigned long long)r.held, ratio, apf);
					else {
						char sl[16] = "-";

						if (r.held_slab != 0)
							snprintf(sl, sizeof(sl), "%.3f", sratio);
						printf("%-6u %-6u %-8s %-7s %8llu %12llu %12llu "
						       "%7.3f %12.3f %7s\n",
						       pairs_v[pi], kbps_v[ki], keep_names[keep],
						       strat_names[s], (unsigned long long)o.frames,
						       (unsigned long long)r.billed,
						       (unsigned long long)r.held, ratio, apf, sl);
					}
				}
			}
			free(o.v);
		}
	}
	if (worst_cache > TARGET)
		fail = 1;
	if (!json)
		printf("cache worst held/billed %.3f (target <= %.2f): %s; shared at keep=none: "
		       "min %.2fx\n",
		       worst_cache, TARGET, worst_cache <= TARGET ? "PASS" : "FAIL",
		       min_shared_none);
#ifdef MOQ_BENCH_POOL
	if (!json)
		printf("pools: worst slab bytes/billed %.3f (small caches: a partly used slab per "
		       "class and the lcore's cached objects)\n",
		       worst_slab);
	{
		double w = steady_table(src, json);

		if (w > TARGET)
			fail = 1;
		if (!json)
			printf("steady state worst held/billed %.3f (target <= %.2f): %s\n", w,
			       TARGET, w <= TARGET ? "PASS" : "FAIL");
	}
	moq_pool_free(bench_pool);
	rte_eal_cleanup();
#else
	(void)worst_slab;
#endif
	free(src);
	return fail;
}
