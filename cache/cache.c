/* SPDX-License-Identifier: MIT */
/*
 * cache.c: broadcast / track / group / frame storage (see cache.h).
 *
 * A group has two append-only tables, in chunks that double (4, 8, 16, ...
 * entries) so nothing ever moves under a reader:
 *  - frame records, one per frame, laid out as the public struct
 *    moq_cache_frame (timestamp, group byte offset, contiguous data pointer
 *    or NULL, size, index, arrival time): a batch read of complete frames
 *    copies them;
 *  - pieces: every payload byte of the group lives in exactly one piece, a
 *    contiguous run of memory, in group offset order: an exact-fit frame is
 *    one piece, block-stored bytes are runs inside the group's blocks.
 * The writer fills records, pieces and bytes, then release-stores the piece
 * count, the started-frame count, the byte count and last the complete-frame
 * count; readers acquire-load them in the opposite order.
 */
#include "cache.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

/* --- small atomics --------------------------------------------------------- */

#define LOAD_ACQ(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define LOAD_RLX(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define STORE_RLX(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* --- tables ---------------------------------------------------------------- */

#define P_OWNS 0x80000000u /* piece: ptr is an allocation it frees */
#define P_LEN  0x7fffffffu

struct piece {
	const uint8_t *ptr;
	uint32_t off; /* group byte offset of ptr[0] */
	uint32_t len; /* atomic: P_OWNS | length (the last piece grows) */
};

#define CHUNK0_SHIFT 1u /* chunk k holds 2 << k entries; chunk 0 is inline */
#define CHUNK0       (1u << CHUNK0_SHIFT)
#define FCHUNKS      15u /* frame records: MOQ_CACHE_GROUP_MAX_FRAMES */
#define PCHUNKS      17u /* pieces: 2 * (2^17 - 1) */
#define MAX_PIECES   (CHUNK0 * ((1u << PCHUNKS) - 1u))
#define NONE         UINT32_MAX

_Static_assert(MOQ_CACHE_GROUP_MAX_FRAMES == CHUNK0 * ((1u << FCHUNKS) - 1u),
               "frame limit matches the record chunks");
_Static_assert(MOQ_CACHE_GROUP_CAP <= P_LEN, "a length fits");
_Static_assert(sizeof(struct moq_cache_frame) == 48, "frame record layout");
_Static_assert(sizeof(struct moq_cache_frame) + sizeof(struct piece) <= MOQ_CACHE_FRAME_OVERHEAD,
               "frame overhead billed covers its record and a piece");

static inline uint32_t chunk_of(uint32_t i)
{
	return 31 - (uint32_t)__builtin_clz((i >> CHUNK0_SHIFT) + 1);
}

static inline uint32_t chunk_first(uint32_t k)
{
	return CHUNK0 * ((1u << k) - 1u);
}

/* --- objects ------------------------------------------------------------- */

enum retire_kind { RETIRE_GROUP, RETIRE_TRACK };

struct retire {
	struct retire *next;
	uint64_t token;
	int kind;
};

/* group state: writer bits, then the removal reason */
#define ST_OPEN   0u
#define ST_FIN    1u
#define ST_ABORT  2u
#define ST_WMASK  3u
#define ST_RSHIFT 4u
#define ST_RMASK  (7u << ST_RSHIFT)

/* R_REPLACED: an aborted newest group that moq_cache_group_reopen
 * replaced; its readers see what they saw before, a dropped group */
enum reason { R_NONE, R_EVICTED, R_OLD, R_LAGGED, R_CLOSED, R_REPLACED };

static const int reason_err[] = {
        0, MOQ_ERR_EVICTED, MOQ_ERR_OLD, MOQ_ERR_LAGGED, MOQ_ERR_CLOSED, MOQ_ERR_DROPPED};

/*
 * Extension headers (IETF moq-transport) of a group's frames, kept beside
 * the payload, so moq-lite readers never see them: entry i is frame i's.
 * The array only grows: a bigger one replaces it (release store, before the
 * frame is published) and the old one stays, chained, until the group is
 * freed, so a reader holding either has valid entries for every frame it
 * saw published. The blobs belong to the newest array.
 */
struct ext_ent {
	const uint8_t *p;
	uint32_t len;
	uint32_t has_loc; /* an IETF location other than (0, frame index) */
	uint64_t subgroup, object;
};

struct ext_arr {
	struct ext_arr *older;
	uint32_t cap;
	uint32_t pad;
	struct ext_ent e[];
};

struct moq_cache_group {
	struct moq_cache *cache;
	struct moq_cache_track *track; /* referenced */
	uint64_t seq;
	uint64_t created;
	uint32_t refs;      /* atomic */
	uint32_t state;     /* atomic */
	uint64_t bytes;     /* atomic: published payload bytes */
	uint32_t nstarted;  /* atomic: published frames (complete or arriving) */
	uint32_t ncomplete; /* atomic: published complete frames */
	uint32_t npieces;   /* atomic: published pieces */
	uint32_t blk_cap;   /* writer private (here: no padding) */
	uint64_t billed;    /* atomic */
	/* writer private */
	uint32_t w_bytes, w_nstarted, w_ncomplete, w_npieces;
	uint32_t open_missing; /* missing bytes of frame w_ncomplete when open */
	uint32_t open_piece;   /* piece of the open frame's first byte, or NONE */
	uint32_t w_piece;      /* piece that continues at blk + blk_used, or NONE */
	uint32_t blk_used;
	uint8_t *blk;
	bool open;
	/* under the cache lock */
	struct moq_cache_group *gprev, *gnext, *tprev, *tnext;
	struct retire rt;
	struct ext_arr *ext; /* atomic: NULL until a frame has extension headers */
	/* chunk directories, allocated with the second chunk (entry 0 unused) */
	struct moq_cache_frame **fdir;
	struct piece **pdir;
	struct moq_cache_frame f0[CHUNK0];
	struct piece p0[CHUNK0];
};

_Static_assert(sizeof(struct moq_cache_group) <= MOQ_CACHE_GROUP_OVERHEAD,
               "group overhead billed covers the descriptor");

/* Gap ranges a track remembers (moq_cache_track_gap): the start of the
 * writer's subscription and the last few upstream DROPs. */
#define TRACK_GAPS 4

struct slot {
	struct moq_cache_group *g; /* atomic */
	uint64_t tomb;             /* atomic: seq << 3 | reason of the last removal */
};

struct moq_cache_track {
	struct moq_cache *cache;
	struct moq_cache_track *hnext; /* atomic */
	uint32_t hash;
	uint32_t refs;    /* atomic */
	uint32_t dropped; /* atomic */
	uint32_t idle;    /* atomic: the writer stopped (moq_cache_track_set_idle) */
	uint32_t dying;   /* atomic: moq_cache_expire is dropping it (lookups skip it) */
	uint32_t has_ext; /* atomic: a frame had extension headers (frame_begin_ext) */
	uint32_t mask;    /* window - 1 */
	uint64_t max_latency;
	uint64_t newest;                       /* atomic: newest seq + 1; 0 = none */
	uint64_t version;                      /* atomic */
	struct moq_cache_group *ghead, *gtail; /* live groups, by sequence */
	/* under the lock, for expire_track_locked: the latest created of the
	 * groups opened so far, and the sequence of the last group opened at
	 * a time before it (the caller's clock went back; 0 = none): from that
	 * group on, none is older than a group before it */
	uint64_t max_created, disorder_seq;
	/* sequences the writer said will not come (moq_cache_track_gap):
	 * TRACK_GAPS inclusive ranges, written under the cache lock inside a
	 * sequence lock (gap_lock odd while they change); readers
	 * (moq_cache_track_gap_final) copy them and retry on a change */
	uint64_t gap_lock;
	uint64_t gap_lo[TRACK_GAPS], gap_end[TRACK_GAPS]; /* atomic: [lo, end); lo >= end: unused */
	struct retire rt;
	const char *path, *name;
	size_t path_len, name_len;
	struct slot ring[];
};

struct reader {
	uint64_t seen; /* atomic: gp seen at the last quiescent point; 0 = offline */
	uint8_t pad[56];
};

struct moq_cache {
	struct moq_cache_alloc a;
	uint64_t budget; /* atomic */
	uint64_t used;   /* atomic */
	uint64_t gp;     /* atomic: grace-period counter */
	bool lock;
	uint32_t nreaders;
	uint32_t bmask;
	struct reader *readers;
	struct moq_cache_track **buckets;      /* atomic heads */
	struct moq_cache_group *ghead, *gtail; /* live groups, by open order */
	struct retire *rhead, *rtail;
	uint32_t stuck;               /* atomic: over budget with nothing evictable */
	uint64_t (*clock)(void *ctx); /* frame arrival stamps (never NULL) */
	void *clock_ctx;
	/* counters (under the lock) */
	uint64_t ngroups, ntracks, removed[6], pending;
};

/* --- helpers ------------------------------------------------------------- */

static void *c_alloc(struct moq_cache *c, size_t size)
{
	return c->a.alloc(c->a.ctx, size, 8);
}

static void c_free(struct moq_cache *c, void *p)
{
	if (p != NULL)
		c->a.free(c->a.ctx, p);
}

static void lock(struct moq_cache *c)
{
	while (__atomic_test_and_set(&c->lock, __ATOMIC_ACQUIRE))
		while (LOAD_RLX(&c->lock))
			cpu_relax();
}

static bool trylock(struct moq_cache *c)
{
	return !__atomic_test_and_set(&c->lock, __ATOMIC_ACQUIRE);
}

static void unlock(struct moq_cache *c)
{
	__atomic_clear(&c->lock, __ATOMIC_RELEASE);
}

static inline struct moq_cache_frame *fchunk(const struct moq_cache_group *g, uint32_t k)
{
	return k == 0 ? (struct moq_cache_frame *)g->f0 : g->fdir[k];
}

static inline struct piece *pchunk(const struct moq_cache_group *g, uint32_t k)
{
	return k == 0 ? (struct piece *)g->p0 : g->pdir[k];
}

static inline struct moq_cache_frame *rec_at(const struct moq_cache_group *g, uint32_t i)
{
	uint32_t k = chunk_of(i);

	return &fchunk(g, k)[i - chunk_first(k)];
}

static inline struct piece *piece_at(const struct moq_cache_group *g, uint32_t i)
{
	uint32_t k = chunk_of(i);

	return &pchunk(g, k)[i - chunk_first(k)];
}

/* Writer: room for record / piece @i, allocating its chunk. NULL + *err. */
static struct moq_cache_frame *rec_new(struct moq_cache_group *g, uint32_t i, int *err)
{
	uint32_t k = chunk_of(i);

	if (i >= MOQ_CACHE_GROUP_MAX_FRAMES) {
		*err = MOQ_ERR_LIMIT;
		return NULL;
	}
	if (k > 0 && g->fdir == NULL) {
		g->fdir = c_alloc(g->cache, FCHUNKS * sizeof(*g->fdir));
		if (g->fdir == NULL) {
			*err = MOQ_ERR_NOMEM;
			return NULL;
		}
		memset(g->fdir, 0, FCHUNKS * sizeof(*g->fdir));
	}
	if (k > 0 && g->fdir[k] == NULL) {
		g->fdir[k] =
		        c_alloc(g->cache, (size_t)(CHUNK0 << k) * sizeof(struct moq_cache_frame));
		if (g->fdir[k] == NULL) {
			*err = MOQ_ERR_NOMEM;
			return NULL;
		}
	}
	return &fchunk(g, k)[i - chunk_first(k)];
}

static struct piece *piece_new(struct moq_cache_group *g, uint32_t i, int *err)
{
	uint32_t k = chunk_of(i);

	if (i >= MAX_PIECES) {
		*err = MOQ_ERR_LIMIT;
		return NULL;
	}
	if (k > 0 && g->pdir == NULL) {
		g->pdir = c_alloc(g->cache, PCHUNKS * sizeof(*g->pdir));
		if (g->pdir == NULL) {
			*err = MOQ_ERR_NOMEM;
			return NULL;
		}
		memset(g->pdir, 0, PCHUNKS * sizeof(*g->pdir));
	}
	if (k > 0 && g->pdir[k] == NULL) {
		g->pdir[k] = c_alloc(g->cache, (size_t)(CHUNK0 << k) * sizeof(struct piece));
		if (g->pdir[k] == NULL) {
			*err = MOQ_ERR_NOMEM;
			return NULL;
		}
	}
	return &pchunk(g, k)[i - chunk_first(k)];
}

static uint32_t hash_name(const char *p, size_t pl, const char *n, size_t nl)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	size_t i;

	for (i = 0; i < pl; i++)
		h = (h ^ (uint8_t)p[i]) * 16777619u;
	h = (h ^ 0xffu) * 16777619u;
	for (i = 0; i < nl; i++)
		h = (h ^ (uint8_t)n[i]) * 16777619u;
	return h;
}

static void track_bump(struct moq_cache_track *t)
{
	__atomic_fetch_add(&t->version, 1, __ATOMIC_RELEASE);
}

static void bill(struct moq_cache_group *g, uint64_t n)
{
	__atomic_fetch_add(&g->billed, n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&g->cache->used, n, __ATOMIC_RELAXED);
}

/* --- freeing ------------------------------------------------------------- */

static void track_free(struct moq_cache_track *t)
{
	c_free(t->cache, t);
}

static void group_free(struct moq_cache_group *g)
{
	struct moq_cache *c = g->cache;
	struct moq_cache_track *t = g->track;
	uint32_t i, k;
	uint64_t left;

	/* the writer's state is ours now: every holder is gone */
	for (i = 0; i < g->w_npieces; i++) {
		struct piece *p = piece_at(g, i);

		if (p->len & P_OWNS)
			c_free(c, (void *)(uintptr_t)p->ptr);
	}
	for (k = 1; g->fdir != NULL && k < FCHUNKS; k++)
		c_free(c, g->fdir[k]);
	for (k = 1; g->pdir != NULL && k < PCHUNKS; k++)
		c_free(c, g->pdir[k]);
	c_free(c, g->fdir);
	c_free(c, g->pdir);
	if (g->ext != NULL)
		for (i = 0; i < g->ext->cap; i++)
			c_free(c, (void *)(uintptr_t)g->ext->e[i].p);
	for (struct ext_arr *a = g->ext, *o; a != NULL; a = o) {
		o = a->older;
		c_free(c, a);
	}
	left = __atomic_exchange_n(&g->billed, 0, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&c->used, left, __ATOMIC_RELAXED);
	c_free(c, g);
	moq_cache_track_unref(t);
}

void moq_cache_group_ref(struct moq_cache_group *g)
{
	__atomic_fetch_add(&g->refs, 1, __ATOMIC_RELAXED);
}

void moq_cache_group_unref(struct moq_cache_group *g)
{
	if (g != NULL && __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) == 0)
		group_free(g);
}

void moq_cache_track_ref(struct moq_cache_track *t)
{
	__atomic_fetch_add(&t->refs, 1, __ATOMIC_RELAXED);
}

void moq_cache_track_unref(struct moq_cache_track *t)
{
	if (t != NULL && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0)
		track_free(t);
}

/* --- QSBR ---------------------------------------------------------------- */

/* Under the lock, after @r's object was unlinked from everything readers walk. */
static void retire(struct moq_cache *c, struct retire *r, int kind)
{
	r->kind = kind;
	r->next = NULL;
	r->token = __atomic_add_fetch(&c->gp, 1, __ATOMIC_SEQ_CST);
	if (c->rtail != NULL)
		c->rtail->next = r;
	else
		c->rhead = r;
	c->rtail = r;
	c->pending++;
}

static uint64_t readers_min(struct moq_cache *c)
{
	uint64_t min = UINT64_MAX;
	uint32_t i;

	for (i = 0; i < c->nreaders; i++) {
		uint64_t s = __atomic_load_n(&c->readers[i].seen, __ATOMIC_SEQ_CST);

		if (s != 0 && s < min)
			min = s;
	}
	return min;
}

/* Under the lock. @force: ignore readers (destroy). */
static unsigned reclaim_locked(struct moq_cache *c, bool force)
{
	uint64_t min;
	unsigned n = 0;

	if (c->rhead == NULL)
		return 0;
	min = force ? UINT64_MAX : readers_min(c);
	while (c->rhead != NULL && c->rhead->token <= min) {
		struct retire *r = c->rhead;

		c->rhead = r->next;
		if (c->rhead == NULL)
			c->rtail = NULL;
		c->pending--;
		/* drop the reference the index held */
		if (r->kind == RETIRE_GROUP)
			moq_cache_group_unref(
			        (struct moq_cache_group *)((uint8_t *)r -
			                                   offsetof(struct moq_cache_group, rt)));
		else
			moq_cache_track_unref(
			        (struct moq_cache_track *)((uint8_t *)r -
			                                   offsetof(struct moq_cache_track, rt)));
		n++;
	}
	return n;
}

int moq_cache_reader_register(struct moq_cache *c, unsigned id)
{
	uint64_t gp;

	if (id >= c->nreaders)
		return MOQ_ERR_INVAL;
	if (LOAD_RLX(&c->readers[id].seen) != 0)
		return MOQ_ERR_EXISTS;
	gp = __atomic_load_n(&c->gp, __ATOMIC_SEQ_CST);
	__atomic_store_n(&c->readers[id].seen, gp, __ATOMIC_SEQ_CST);
	return 0;
}

void moq_cache_reader_unregister(struct moq_cache *c, unsigned id)
{
	if (id < c->nreaders)
		__atomic_store_n(&c->readers[id].seen, 0, __ATOMIC_SEQ_CST);
}

void moq_cache_quiescent(struct moq_cache *c, unsigned id)
{
	uint64_t gp = __atomic_load_n(&c->gp, __ATOMIC_SEQ_CST);

	/* Nothing retired since this reader last said so: storing the same
	 * value again tells a reclaimer nothing (a retire takes ++gp, so
	 * every entry it frees has a token above that value), and the
	 * sequentially consistent store (a locked instruction) per worker
	 * iteration was a few percent of a relay worker under perf. */
	if (LOAD_RLX(&c->readers[id].seen) != gp)
		__atomic_store_n(&c->readers[id].seen, gp, __ATOMIC_SEQ_CST);
}

unsigned moq_cache_reclaim(struct moq_cache *c)
{
	unsigned n;

	lock(c);
	n = reclaim_locked(c, false);
	unlock(c);
	return n;
}

/* --- cache --------------------------------------------------------------- */

/* The default arrival clock: CLOCK_MONOTONIC in ns (vDSO, no system call on
 * the usual clock sources). */
static uint64_t mono_ns(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* frame_bytes: read the arrival clock only if the frame completes */
#define CLOCK_READ UINT64_MAX

static inline uint64_t arrival_now(const struct moq_cache *c)
{
	return c->clock(c->clock_ctx);
}

struct moq_cache *moq_cache_create(const struct moq_cache_cfg *cfg)
{
	struct moq_cache *c;
	uint32_t nb, nr;

	if (cfg == NULL || cfg->alloc.alloc == NULL || cfg->alloc.free == NULL)
		return NULL;
	nb = cfg->buckets ? cfg->buckets : MOQ_CACHE_DEFAULT_BUCKETS;
	nr = cfg->max_readers ? cfg->max_readers : MOQ_CACHE_DEFAULT_READERS;
	if ((nb & (nb - 1)) != 0 || nr > 4096)
		return NULL;
	c = cfg->alloc.alloc(cfg->alloc.ctx, sizeof(*c), 64);
	if (c == NULL)
		goto fail_cache;
	memset(c, 0, sizeof(*c));
	c->a = cfg->alloc;
	c->budget = cfg->budget;
	c->gp = 1;
	c->nreaders = nr;
	c->bmask = nb - 1;
	c->clock = cfg->clock != NULL ? cfg->clock : mono_ns;
	c->clock_ctx = cfg->clock_ctx;
	c->readers = c->a.alloc(c->a.ctx, sizeof(struct reader) * nr, 64);
	if (c->readers == NULL)
		goto fail_readers;
	memset(c->readers, 0, sizeof(struct reader) * nr);
	c->buckets = c_alloc(c, sizeof(*c->buckets) * nb);
	if (c->buckets == NULL)
		goto fail_buckets;
	memset(c->buckets, 0, sizeof(*c->buckets) * nb);
	return c;

fail_buckets:
	c_free(c, c->readers);
fail_readers:
	cfg->alloc.free(cfg->alloc.ctx, c);
fail_cache:
	return NULL;
}

uint64_t moq_cache_used(const struct moq_cache *c)
{
	return LOAD_RLX(&c->used);
}

void moq_cache_stats(struct moq_cache *c, struct moq_cache_stats *st)
{
	lock(c);
	st->used = LOAD_RLX(&c->used);
	st->budget = LOAD_RLX(&c->budget);
	st->groups = c->ngroups;
	st->tracks = c->ntracks;
	st->evicted = c->removed[R_EVICTED];
	st->expired = c->removed[R_OLD];
	st->lagged = c->removed[R_LAGGED];
	st->closed = c->removed[R_CLOSED];
	st->retired_pending = c->pending;
	unlock(c);
}

/* --- removal (under the lock) -------------------------------------------- */

static bool removed(uint32_t st)
{
	return (st & ST_RMASK) != 0;
}

static void group_remove(struct moq_cache_group *g, enum reason why)
{
	struct moq_cache *c = g->cache;
	struct moq_cache_track *t = g->track;
	struct slot *s = &t->ring[g->seq & t->mask];
	uint64_t b;

	__atomic_fetch_or(&g->state, (uint32_t)why << ST_RSHIFT, __ATOMIC_RELEASE);
	if (g->gprev != NULL)
		g->gprev->gnext = g->gnext;
	else
		c->ghead = g->gnext;
	if (g->gnext != NULL)
		g->gnext->gprev = g->gprev;
	else
		c->gtail = g->gprev;
	if (g->tprev != NULL)
		g->tprev->tnext = g->tnext;
	else
		t->ghead = g->tnext;
	if (g->tnext != NULL)
		g->tnext->tprev = g->tprev;
	else
		t->gtail = g->tprev;
	g->gprev = g->gnext = g->tprev = g->tnext = NULL;
	if (LOAD_RLX(&s->g) == g) {
		STORE_RLX(&s->tomb, g->seq << 3 | (uint64_t)why);
		STORE_REL(&s->g, NULL);
	}
	b = __atomic_exchange_n(&g->billed, 0, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&c->used, b, __ATOMIC_RELAXED);
	c->ngroups--;
	c->removed[why]++;
	track_bump(t);
	retire(c, &g->rt, RETIRE_GROUP);
}

static bool is_newest(const struct moq_cache_group *g)
{
	return LOAD_RLX(&g->track->newest) == g->seq + 1;
}

static int evict_locked(struct moq_cache *c)
{
	int n = 0;
	uint64_t budget = LOAD_RLX(&c->budget);

	while (budget != 0 && LOAD_RLX(&c->used) > budget) {
		struct moq_cache_group *g = c->ghead;

		while (g != NULL && is_newest(g))
			g = g->gnext;
		if (g == NULL) {
			/* until a group opens, every group is some track's newest */
			STORE_RLX(&c->stuck, 1);
			break;
		}
		group_remove(g, R_EVICTED);
		n++;
	}
	return n;
}

/* Expire @t's groups older than its max latency (its newest one too if
 * @all). The list is in open order, and from disorder_seq on no group is
 * older than one before it, so the walk ends at the first group there
 * young enough: O(expired groups + 1) while the caller's clock runs
 * forward, the same groups expire as in a walk over all of them. */
static int expire_track_locked(struct moq_cache_track *t, uint64_t now, bool all)
{
	struct moq_cache_group *g = t->ghead, *next;
	int n = 0;

	for (; g != NULL; g = next) {
		next = g->tnext;
		if (!(now > g->created && now - g->created > t->max_latency)) {
			if (g->seq >= t->disorder_seq)
				break;
			continue;
		}
		if (all || !is_newest(g)) {
			group_remove(g, R_OLD);
			n++;
		}
	}
	return n;
}

void moq_cache_budget_set(struct moq_cache *c, uint64_t budget)
{
	STORE_RLX(&c->budget, budget);
	lock(c);
	STORE_RLX(&c->stuck, 0);
	evict_locked(c);
	reclaim_locked(c, false);
	unlock(c);
}

static void track_drop_locked(struct moq_cache_track *t);

/* Under the lock: @t holds no group and nobody but the table references
 * it: drop it. A lookup that races (it takes its reference before it reads
 * dying, we set dying before we read the count) either is seen here, and the
 * track stays, or sees dying and lets the track go. */
static void track_reap_locked(struct moq_cache_track *t)
{
	if (t->ghead != NULL || LOAD_RLX(&t->dropped))
		return;
	__atomic_store_n(&t->dying, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&t->refs, __ATOMIC_SEQ_CST) == 1)
		track_drop_locked(t);
	else
		__atomic_store_n(&t->dying, 0, __ATOMIC_SEQ_CST);
}

/* @all: every live track's groups too; else only those of a track that
 * opened no group for its max latency (a live track's others expire at
 * its next group open). */
static int expire_all(struct moq_cache *c, uint64_t now, bool all)
{
	uint32_t b;
	int n = 0;

	lock(c);
	for (b = 0; b <= c->bmask; b++) {
		struct moq_cache_track *t, *next;

		for (t = c->buckets[b]; t != NULL; t = next) {
			const struct moq_cache_group *last = t->gtail;

			next = t->hnext;
			if (LOAD_RLX(&t->idle))
				/* an idle track's newest group expires too */
				n += expire_track_locked(t, now, true);
			else if (all || (last != NULL && now > last->created &&
			                 now - last->created > t->max_latency))
				n += expire_track_locked(t, now, false);
			track_reap_locked(t);
		}
	}
	n += evict_locked(c);
	reclaim_locked(c, false);
	unlock(c);
	return n;
}

int moq_cache_expire(struct moq_cache *c, uint64_t now)
{
	return expire_all(c, now, true);
}

int moq_cache_expire_idle(struct moq_cache *c, uint64_t now)
{
	return expire_all(c, now, false);
}

int moq_cache_group_evict(struct moq_cache_group *g)
{
	struct moq_cache *c = g->cache;
	int rc = 0;

	lock(c);
	if (removed(LOAD_RLX(&g->state)))
		rc = MOQ_ERR_NOTFOUND;
	else
		group_remove(g, R_EVICTED);
	reclaim_locked(c, false);
	unlock(c);
	return rc;
}

/* --- tracks -------------------------------------------------------------- */

#define NAME_MAX_LEN 1024u

int moq_cache_track_create(struct moq_cache *c, const char *path, size_t path_len, const char *name,
                           size_t name_len, const struct moq_cache_track_cfg *cfg,
                           struct moq_cache_track **out)
{
	uint32_t window = cfg && cfg->window ? cfg->window : MOQ_CACHE_DEFAULT_WINDOW;
	uint64_t lat = cfg && cfg->max_latency ? cfg->max_latency : MOQ_CACHE_DEFAULT_MAX_LATENCY;
	struct moq_cache_track *t, *o, **head;
	size_t size;
	char *p;

	if (c == NULL || out == NULL || (path == NULL && path_len) || (name == NULL && name_len) ||
	    path_len > NAME_MAX_LEN || name_len > NAME_MAX_LEN || (window & (window - 1)) != 0 ||
	    window > (1u << 20))
		return MOQ_ERR_INVAL;
	size = sizeof(*t) + sizeof(struct slot) * window + path_len + name_len;
	t = c_alloc(c, size);
	if (t == NULL)
		return MOQ_ERR_NOMEM;
	memset(t, 0, sizeof(*t) + sizeof(struct slot) * window);
	t->cache = c;
	t->hash = hash_name(path, path_len, name, name_len);
	t->refs = 2; /* the table's and the caller's */
	t->mask = window - 1;
	t->max_latency = lat;
	p = (char *)&t->ring[window];
	if (path_len)
		memcpy(p, path, path_len);
	if (name_len)
		memcpy(p + path_len, name, name_len);
	t->path = p;
	t->path_len = path_len;
	t->name = p + path_len;
	t->name_len = name_len;

	lock(c);
	head = &c->buckets[t->hash & c->bmask];
	for (o = *head; o != NULL; o = o->hnext) {
		if (o->hash == t->hash && o->path_len == path_len && o->name_len == name_len &&
		    memcmp(o->path, path, path_len) == 0 && memcmp(o->name, name, name_len) == 0) {
			unlock(c);
			c_free(c, t);
			return MOQ_ERR_EXISTS;
		}
	}
	t->hnext = *head;
	c->ntracks++;
	STORE_REL(head, t);
	unlock(c);
	*out = t;
	return 0;
}

struct moq_cache_track *moq_cache_track_lookup(struct moq_cache *c, const char *path,
                                               size_t path_len, const char *name, size_t name_len)
{
	uint32_t h = hash_name(path, path_len, name, name_len);
	struct moq_cache_track *t = LOAD_ACQ(&c->buckets[h & c->bmask]);

	for (; t != NULL; t = LOAD_ACQ(&t->hnext)) {
		if (t->hash == h && t->path_len == path_len && t->name_len == name_len &&
		    memcmp(t->path, path, path_len) == 0 && memcmp(t->name, name, name_len) == 0 &&
		    !LOAD_ACQ(&t->dropped)) {
			/* reference first, then dying (track_reap_locked) */
			__atomic_fetch_add(&t->refs, 1, __ATOMIC_SEQ_CST);
			if (__atomic_load_n(&t->dying, __ATOMIC_SEQ_CST)) {
				moq_cache_track_unref(t);
				return NULL;
			}
			return t;
		}
	}
	return NULL;
}

static void track_drop_locked(struct moq_cache_track *t)
{
	struct moq_cache *c = t->cache;
	struct moq_cache_track **pp;

	STORE_REL(&t->dropped, 1);
	while (t->ghead != NULL)
		group_remove(t->ghead, R_CLOSED);
	for (pp = &c->buckets[t->hash & c->bmask]; *pp != NULL; pp = &(*pp)->hnext) {
		if (*pp == t) {
			STORE_REL(pp, t->hnext);
			break;
		}
	}
	track_bump(t);
	c->ntracks--;
	retire(c, &t->rt, RETIRE_TRACK);
}

int moq_cache_track_drop(struct moq_cache_track *t)
{
	struct moq_cache *c = t->cache;

	lock(c);
	if (LOAD_RLX(&t->dropped)) {
		unlock(c);
		return MOQ_ERR_CLOSED;
	}
	track_drop_locked(t);
	reclaim_locked(c, false);
	unlock(c);
	return 0;
}

int moq_cache_broadcast_drop(struct moq_cache *c, const char *path, size_t path_len)
{
	uint32_t b;
	int n = 0;

	lock(c);
	for (b = 0; b <= c->bmask; b++) {
		struct moq_cache_track *t = c->buckets[b], *next;

		for (; t != NULL; t = next) {
			next = t->hnext;
			if (t->path_len == path_len && memcmp(t->path, path, path_len) == 0) {
				track_drop_locked(t);
				n++;
			}
		}
	}
	reclaim_locked(c, false);
	unlock(c);
	return n;
}

void moq_cache_track_set_idle(struct moq_cache_track *t)
{
	STORE_REL(&t->idle, 1);
}

bool moq_cache_track_idle(const struct moq_cache_track *t)
{
	return LOAD_ACQ(&t->idle) != 0;
}

void moq_cache_track_gap(struct moq_cache_track *t, uint64_t lo, uint64_t hi)
{
	struct moq_cache *c = t->cache;
	uint64_t nlo = lo, nend;
	unsigned int k, use = TRACK_GAPS, low = 0;

	if (hi >= UINT64_MAX >> 3)
		hi = (UINT64_MAX >> 3) - 1; /* (sequences are below 2^61) */
	if (lo > hi)
		return;
	nend = hi + 1;
	lock(c);
	/* one range for it and every range it overlaps or touches (they are
	 * replaced); else a free one, else the one that ends lowest (the
	 * oldest holes) */
	for (k = 0; k < TRACK_GAPS; k++) {
		uint64_t a = t->gap_lo[k], e = t->gap_end[k];
		if (a >= e) {
			use = k;
			continue;
		}
		if (a <= nend && e >= nlo) {
			nlo = a < nlo ? a : nlo;
			nend = e > nend ? e : nend;
		}
	}
	/* odd while they change; each store below is a release, so a reader
	 * that sees one of them sees the odd count after it */
	STORE_RLX(&t->gap_lock, t->gap_lock + 1);
	for (k = 0; k < TRACK_GAPS; k++) {
		uint64_t a = t->gap_lo[k], e = t->gap_end[k];
		if (a < e && a >= nlo && e <= nend) {
			STORE_REL(&t->gap_lo[k], 0);
			STORE_REL(&t->gap_end[k], 0);
			use = k;
		} else if (a < e && (t->gap_lo[low] >= t->gap_end[low] || e < t->gap_end[low])) {
			low = k;
		}
	}
	k = use < TRACK_GAPS ? use : low;
	STORE_REL(&t->gap_lo[k], nlo);
	STORE_REL(&t->gap_end[k], nend);
	STORE_REL(&t->gap_lock, t->gap_lock + 1); /* even: done */
	/* readers waiting at one of them look again */
	track_bump(t);
	unlock(c);
}

bool moq_cache_track_gap_final(const struct moq_cache_track *t, uint64_t seq)
{
	for (;;) {
		uint64_t v = LOAD_ACQ(&t->gap_lock);
		bool in = false;

		if (v & 1) {
			cpu_relax();
			continue;
		}
		/* acquire loads: the second count is read after them */
		for (unsigned int k = 0; k < TRACK_GAPS; k++)
			if (LOAD_ACQ(&t->gap_lo[k]) <= seq && seq < LOAD_ACQ(&t->gap_end[k]))
				in = true;
		if (LOAD_RLX(&t->gap_lock) == v)
			return in;
	}
}

uint64_t moq_cache_track_max_latency(const struct moq_cache_track *t)
{
	return t->max_latency;
}

int moq_cache_track_latest(const struct moq_cache_track *t, uint64_t *seq)
{
	uint64_t n;

	if (LOAD_ACQ(&t->dropped))
		return MOQ_ERR_CLOSED;
	n = LOAD_ACQ(&t->newest);
	if (n == 0)
		return MOQ_ERR_AGAIN;
	*seq = n - 1;
	return 0;
}

uint64_t moq_cache_track_version(const struct moq_cache_track *t)
{
	return LOAD_ACQ(&t->version);
}

int moq_cache_track_group(struct moq_cache_track *t, uint64_t seq, struct moq_cache_group **out)
{
	uint64_t newest = LOAD_ACQ(&t->newest);
	const struct slot *s = &t->ring[seq & t->mask];
	struct moq_cache_group *g;
	uint64_t tomb;

	if (LOAD_ACQ(&t->dropped))
		return MOQ_ERR_CLOSED;
	if (newest == 0 || seq >= newest)
		return MOQ_ERR_AGAIN;
	g = LOAD_ACQ(&s->g);
	if (g != NULL && g->seq == seq) {
		moq_cache_group_ref(g);
		*out = g;
		return 0;
	}
	tomb = LOAD_RLX(&s->tomb);
	if ((tomb & 7) != 0 && tomb >> 3 == seq)
		return reason_err[tomb & 7];
	if (seq + t->mask + 1 < newest)
		return MOQ_ERR_LAGGED;
	return MOQ_ERR_NOTFOUND;
}

/* --- groups: writer ------------------------------------------------------ */

/* Under the lock: open @g (its seq below @newest, the track's newest + 1)
 * into its empty ring slot: a sequence skipped so far (its stream's header
 * came after a newer group's: QUIC delivers group streams independently),
 * still in the window, never opened, not expired. It gets the created time
 * of the next newer live group when that is earlier than @now, so created
 * times stay in sequence order (expire_track_locked walks them so) and the
 * group expires with its neighbours. Returns 0 (linked, published, billed)
 * or -1 (refused). */
static int late_open_locked(struct moq_cache_track *t, struct moq_cache_group *g,
                            uint64_t newest, uint64_t now)
{
	struct moq_cache *c = t->cache;
	uint64_t seq = g->seq, tomb;
	struct slot *s = &t->ring[seq & t->mask];
	struct moq_cache_group *nx, *pv;

	if (seq + t->mask + 1 < newest)
		return -1; /* out of the window */
	if (LOAD_RLX(&s->g) != NULL)
		return -1; /* opened (the slot's older occupant lagged out before) */
	tomb = LOAD_RLX(&s->tomb);
	if ((tomb & 7) != 0 && tomb >> 3 == seq)
		return -1; /* opened and removed */
	for (nx = t->gtail; nx != NULL && nx->tprev != NULL && nx->tprev->seq > seq;
	     nx = nx->tprev)
		;
	if (nx != NULL && nx->seq < seq)
		nx = NULL; /* every live group is older: append */
	if (nx != NULL && nx->created < now)
		g->created = nx->created;
	if (now > g->created && now - g->created > t->max_latency)
		return -1; /* expired already */
	moq_cache_track_ref(t);
	g->gprev = c->gtail;
	if (c->gtail != NULL)
		c->gtail->gnext = g;
	else
		c->ghead = g;
	c->gtail = g;
	pv = nx != NULL ? nx->tprev : t->gtail;
	g->tprev = pv;
	g->tnext = nx;
	if (pv != NULL)
		pv->tnext = g;
	else
		t->ghead = g;
	if (nx != NULL)
		nx->tprev = g;
	else
		t->gtail = g;
	/* readers of @seq saw NOTFOUND until this release-store */
	STORE_REL(&s->g, g);
	c->ngroups++;
	bill(g, MOQ_CACHE_GROUP_OVERHEAD);
	track_bump(t);
	return 0;
}

/* A new, unlinked group @seq of @t: the window's and the writer's refs. */
static struct moq_cache_group *group_new(struct moq_cache_track *t, uint64_t seq, uint64_t now)
{
	struct moq_cache_group *g = c_alloc(t->cache, sizeof(*g));

	if (g == NULL)
		return NULL;
	memset(g, 0, offsetof(struct moq_cache_group, f0));
	g->cache = t->cache;
	g->track = t;
	g->seq = seq;
	g->created = now;
	g->refs = 2; /* the window's and the writer's */
	g->open_piece = NONE;
	g->w_piece = NONE;
	return g;
}

/* Under the lock: link @g, the track's newest group, at the tail of the
 * cache's open order and of its track's sequence order, publish it in its
 * slot and bill it. */
static void newest_link_locked(struct moq_cache_track *t, struct moq_cache_group *g, uint64_t now)
{
	struct moq_cache *c = t->cache;

	moq_cache_track_ref(t);
	STORE_REL(&t->idle, 0); /* a writer is here */
	if (now < t->max_created)
		t->disorder_seq = g->seq;
	else
		t->max_created = now;
	g->gprev = c->gtail;
	if (c->gtail != NULL)
		c->gtail->gnext = g;
	else
		c->ghead = g;
	c->gtail = g;
	g->tprev = t->gtail;
	if (t->gtail != NULL)
		t->gtail->tnext = g;
	else
		t->ghead = g;
	t->gtail = g;
	STORE_REL(&t->ring[g->seq & t->mask].g, g);
	c->ngroups++;
	bill(g, MOQ_CACHE_GROUP_OVERHEAD);
	track_bump(t);
}

/* The start of moq_cache_group_open and _reopen: @seq checked, the new
 * group in *@g, the cache locked (0), or an error with nothing held. */
static int group_new_locked(struct moq_cache_track *t, uint64_t seq, uint64_t now,
                            struct moq_cache_group **out, struct moq_cache_group **g)
{
	struct moq_cache *c = t->cache;

	if (out == NULL || seq >= UINT64_MAX >> 3)
		return MOQ_ERR_INVAL;
	*g = group_new(t, seq, now);
	if (*g == NULL)
		return MOQ_ERR_NOMEM;
	lock(c);
	reclaim_locked(c, false);
	if (LOAD_RLX(&t->dropped)) {
		unlock(c);
		c_free(c, *g);
		return MOQ_ERR_CLOSED;
	}
	return 0;
}

int moq_cache_group_open(struct moq_cache_track *t, uint64_t seq, uint64_t now,
                         struct moq_cache_group **out)
{
	struct moq_cache *c = t->cache;
	struct moq_cache_group *g;
	uint64_t newest;
	int rv = group_new_locked(t, seq, now, out, &g);

	if (rv < 0)
		return rv;
	newest = LOAD_RLX(&t->newest);
	if (newest != 0 && seq < newest) {
		if (late_open_locked(t, g, newest, now) < 0) {
			unlock(c);
			c_free(c, g);
			return MOQ_ERR_ORDER;
		}
		evict_locked(c);
		reclaim_locked(c, false);
		unlock(c);
		*out = g;
		return 0;
	}
	/* the new group becomes the newest: every older one may expire */
	expire_track_locked(t, now, true);
	/* the window keeps sequences (seq - window, seq]; the track's list is
	 * in sequence order, so the lagged ones lead it */
	while (t->ghead != NULL && t->ghead->seq + t->mask + 1 <= seq)
		group_remove(t->ghead, R_LAGGED);
	/* link: global open order, track sequence order */
	newest_link_locked(t, g, now);
	STORE_REL(&t->newest, seq + 1);
	STORE_RLX(&c->stuck, 0); /* the previous newest may be evicted now */
	evict_locked(c);
	reclaim_locked(c, false);
	unlock(c);
	*out = g;
	return 0;
}

int moq_cache_group_reopen(struct moq_cache_track *t, uint64_t seq, uint64_t now,
                           struct moq_cache_group **out)
{
	struct moq_cache *c = t->cache;
	struct moq_cache_group *g, *old;
	uint32_t st;
	int rv = group_new_locked(t, seq, now, out, &g);

	if (rv < 0)
		return rv;
	old = LOAD_RLX(&t->ring[seq & t->mask].g);
	st = old != NULL ? LOAD_RLX(&old->state) : 0;
	if (LOAD_RLX(&t->newest) != seq + 1 || old == NULL || old->seq != seq || st != ST_ABORT) {
		unlock(c);
		c_free(c, g);
		return MOQ_ERR_ORDER;
	}
	/* readers between the two stores see the tomb: dropped, as before */
	group_remove(old, R_REPLACED);
	newest_link_locked(t, g, now);
	evict_locked(c);
	reclaim_locked(c, false);
	unlock(c);
	*out = g;
	return 0;
}

/* 0 when the writer may write, else the error. */
static int wcheck(const struct moq_cache_group *g)
{
	uint32_t st = LOAD_RLX(&g->state);

	if (removed(st))
		return reason_err[(st & ST_RMASK) >> ST_RSHIFT];
	if ((st & ST_WMASK) != ST_OPEN)
		return MOQ_ERR_CLOSED;
	return 0;
}

static void publish(struct moq_cache_group *g)
{
	STORE_REL(&g->npieces, g->w_npieces);
	STORE_REL(&g->nstarted, g->w_nstarted);
	STORE_REL(&g->bytes, (uint64_t)g->w_bytes);
	STORE_REL(&g->ncomplete, g->w_ncomplete);
	track_bump(g->track);
}

static void maybe_evict(struct moq_cache *c)
{
	uint64_t budget = LOAD_RLX(&c->budget);

	if (budget != 0 && LOAD_RLX(&c->used) > budget && !LOAD_RLX(&c->stuck) && trylock(c)) {
		evict_locked(c);
		reclaim_locked(c, false);
		unlock(c);
	}
}

/* Writer state saved before a step, to undo it on failure. */
struct wsave {
	uint32_t bytes, nstarted, ncomplete, npieces, open_missing, open_piece, piece, piece_len;
	bool open, had_fdir, had_pdir;
	uint8_t *blk;
	uint32_t blk_used, blk_cap;
};

static void wsave(const struct moq_cache_group *g, struct wsave *s)
{
	s->bytes = g->w_bytes;
	s->nstarted = g->w_nstarted;
	s->ncomplete = g->w_ncomplete;
	s->npieces = g->w_npieces;
	s->open = g->open;
	s->open_missing = g->open_missing;
	s->open_piece = g->open_piece;
	s->piece = g->w_piece;
	s->piece_len = s->piece != NONE ? LOAD_RLX(&piece_at(g, s->piece)->len) : 0;
	s->blk = g->blk;
	s->blk_used = g->blk_used;
	s->blk_cap = g->blk_cap;
	s->had_fdir = g->fdir != NULL;
	s->had_pdir = g->pdir != NULL;
}

static void wrestore(struct moq_cache_group *g, const struct wsave *s)
{
	uint32_t i, k;

	for (i = s->npieces; i < g->w_npieces; i++) {
		struct piece *p = piece_at(g, i);

		if (p->len & P_OWNS)
			c_free(g->cache, (void *)(uintptr_t)p->ptr);
	}
	/* chunks that held nothing before go too */
	for (k = 1; g->fdir != NULL && k < FCHUNKS; k++) {
		if (g->fdir[k] != NULL && chunk_first(k) >= s->nstarted) {
			c_free(g->cache, g->fdir[k]);
			g->fdir[k] = NULL;
		}
	}
	for (k = 1; g->pdir != NULL && k < PCHUNKS; k++) {
		if (g->pdir[k] != NULL && chunk_first(k) >= s->npieces) {
			c_free(g->cache, g->pdir[k]);
			g->pdir[k] = NULL;
		}
	}
	if (!s->had_fdir && g->fdir != NULL) {
		c_free(g->cache, g->fdir);
		g->fdir = NULL;
	}
	if (!s->had_pdir && g->pdir != NULL) {
		c_free(g->cache, g->pdir);
		g->pdir = NULL;
	}
	g->w_bytes = s->bytes;
	g->w_nstarted = s->nstarted;
	g->w_ncomplete = s->ncomplete;
	g->w_npieces = s->npieces;
	g->open = s->open;
	g->open_missing = s->open_missing;
	g->open_piece = s->open_piece;
	g->w_piece = s->piece;
	if (s->piece != NONE)
		STORE_RLX(&piece_at(g, s->piece)->len, s->piece_len);
	g->blk = s->blk;
	g->blk_used = s->blk_used;
	g->blk_cap = s->blk_cap;
}

/* Size of the next block: a power of two between 64 B and 64 KiB. The bytes
 * the open frame still needs, rounded up when that wastes at most a quarter
 * of them, else down (the frame continues in a next, smaller block); at least
 * 1/32 of the group so far, so a large group grows in few steps and its last
 * block wastes at most ~3 % of it. */
static uint32_t block_size(const struct moq_cache_group *g, uint32_t need)
{
	uint32_t grow = g->w_bytes / 32, size;

	if (need >= MOQ_CACHE_BLOCK_MAX || grow >= MOQ_CACHE_BLOCK_MAX)
		return MOQ_CACHE_BLOCK_MAX;
	if (need <= MOQ_CACHE_BLOCK_MIN && grow <= MOQ_CACHE_BLOCK_MIN)
		return MOQ_CACHE_BLOCK_MIN;
	size = need <= 1 ? 1 : 1u << (32 - __builtin_clz(need - 1));
	if (size - need > need / 4)
		size >>= 1;
	if (size < grow)
		size = 1u << (31 - __builtin_clz(grow));
	if (size < MOQ_CACHE_BLOCK_MIN)
		size = MOQ_CACHE_BLOCK_MIN;
	return size;
}

/* Copy @len bytes of the open frame into the group's blocks. */
static int put_bytes(struct moq_cache_group *g, const uint8_t *data, uint32_t len)
{
	int err = 0;

	while (len > 0) {
		struct piece *p;
		uint32_t n;

		if (g->blk_used == g->blk_cap) {
			uint32_t size = block_size(g, g->open_missing);
			uint8_t *b;

			p = piece_new(g, g->w_npieces, &err);
			if (p == NULL)
				return err;
			b = g->cache->a.alloc(g->cache->a.ctx, size, 1);
			if (b == NULL)
				return MOQ_ERR_NOMEM;
			g->blk = b;
			g->blk_used = 0;
			g->blk_cap = size;
			p->ptr = b;
			p->off = g->w_bytes;
			STORE_RLX(&p->len, P_OWNS);
			g->w_piece = g->w_npieces++;
		} else if (g->w_piece == NONE) {
			p = piece_new(g, g->w_npieces, &err);
			if (p == NULL)
				return err;
			p->ptr = g->blk + g->blk_used;
			p->off = g->w_bytes;
			STORE_RLX(&p->len, 0);
			g->w_piece = g->w_npieces++;
		}
		if (g->open_piece == NONE)
			g->open_piece = g->w_piece;
		n = g->blk_cap - g->blk_used;
		if (n > len)
			n = len;
		memcpy(g->blk + g->blk_used, data, n);
		p = piece_at(g, g->w_piece);
		STORE_RLX(&p->len, LOAD_RLX(&p->len) + n);
		g->blk_used += n;
		g->w_bytes += n;
		g->open_missing -= n;
		data += n;
		len -= n;
	}
	return 0;
}

/* Start a frame (writer state only). */
static int frame_start(struct moq_cache_group *g, int64_t ts, uint32_t size)
{
	int err = 0;
	struct moq_cache_frame *r = rec_new(g, g->w_nstarted, &err);

	if (r == NULL)
		return err;
	r->timestamp = ts;
	r->offset = g->w_bytes;
	r->data = NULL;
	r->size = size;
	r->start = 0;
	r->len = size;
	r->index = g->w_nstarted++;
	r->arrival = 0;
	g->open = true;
	g->open_missing = size;
	g->open_piece = NONE;
	return 0;
}

/* The open frame has all of its bytes (at @now, the arrival clock): point its
 * record at them when they are one run, stamp it and count it complete. The
 * stamp is written before publish() release-stores the byte count, so a
 * reader that sees the frame's last byte sees its arrival. */
static void frame_end(struct moq_cache_group *g, uint64_t now)
{
	struct moq_cache_frame *r = rec_at(g, g->w_ncomplete);

	r->arrival = now;

	if (r->size > 0 && g->open_piece == g->w_npieces - 1) {
		const struct piece *p = piece_at(g, g->open_piece);

		r->data = p->ptr + (r->offset - p->off);
	}
	g->w_ncomplete++;
	g->open = false;
	g->open_piece = NONE;
}

/* Bytes of the open frame; exact-fit when they are all of it and small.
 * @now: the arrival clock, or CLOCK_READ = read it if the frame completes. */
static int frame_bytes(struct moq_cache_group *g, const uint8_t *data, uint32_t len, uint64_t now)
{
	const struct moq_cache_frame *r = rec_at(g, g->w_ncomplete);
	int rc;

	if (len == r->size && len <= MOQ_CACHE_COPY_WHOLE && len > 0) {
		struct piece *p = piece_new(g, g->w_npieces, &rc);
		uint8_t *b;

		if (p == NULL)
			return rc;
		b = g->cache->a.alloc(g->cache->a.ctx, len, 1);
		if (b == NULL)
			return MOQ_ERR_NOMEM;
		memcpy(b, data, len);
		p->ptr = b;
		p->off = g->w_bytes;
		STORE_RLX(&p->len, len | P_OWNS);
		g->open_piece = g->w_npieces++;
		g->w_piece = NONE; /* the block continues at another offset */
		g->w_bytes += len;
		g->open_missing = 0;
	} else if (len > 0) {
		rc = put_bytes(g, data, len);
		if (rc < 0)
			return rc;
	}
	if (g->open_missing == 0)
		frame_end(g, now != CLOCK_READ ? now : arrival_now(g->cache));
	return 0;
}

static int put_frame(struct moq_cache_group *g, int64_t ts, const void *data, uint32_t len,
                     uint64_t now)
{
	struct wsave s;
	int rc;

	wsave(g, &s);
	rc = frame_start(g, ts, len);
	if (rc == 0)
		rc = frame_bytes(g, data, len, now);
	if (rc < 0)
		wrestore(g, &s);
	return rc;
}

int moq_cache_write_frame(struct moq_cache_group *g, int64_t timestamp, const void *data,
                          size_t len)
{
	int rc = wcheck(g);

	if (rc < 0)
		return rc;
	if (g->open)
		return MOQ_ERR_STATE;
	if (len > MOQ_CACHE_GROUP_CAP - g->w_bytes)
		return MOQ_ERR_TOO_LARGE;
	if (data == NULL && len > 0)
		return MOQ_ERR_INVAL;
	rc = put_frame(g, timestamp, data, (uint32_t)len, arrival_now(g->cache));
	if (rc < 0)
		return rc;
	publish(g);
	bill(g, len + MOQ_CACHE_FRAME_OVERHEAD);
	maybe_evict(g->cache);
	return 0;
}

int moq_cache_write_frames(struct moq_cache_group *g, const struct moq_cache_frame_in *in,
                           unsigned n)
{
	uint64_t total = 0, now;
	unsigned i;
	int rc = wcheck(g);

	if (rc < 0)
		return rc;
	if (g->open)
		return MOQ_ERR_STATE;
	if (in == NULL && n > 0)
		return MOQ_ERR_INVAL;
	for (i = 0; i < n; i++) {
		if (in[i].data == NULL && in[i].len > 0)
			return MOQ_ERR_INVAL;
		total += in[i].len;
	}
	if (total > MOQ_CACHE_GROUP_CAP - g->w_bytes)
		return MOQ_ERR_TOO_LARGE;
	if ((uint64_t)g->w_nstarted + n > MOQ_CACHE_GROUP_MAX_FRAMES)
		return MOQ_ERR_LIMIT;
	total = 0;
	now = n > 0 ? arrival_now(g->cache) : 0; /* one stamp for the batch */
	for (i = 0; i < n; i++) {
		rc = put_frame(g, in[i].timestamp, in[i].data, (uint32_t)in[i].len, now);
		if (rc < 0)
			break;
		total += in[i].len + MOQ_CACHE_FRAME_OVERHEAD;
	}
	if (i == 0)
		return n == 0 ? 0 : rc;
	publish(g);
	bill(g, total);
	maybe_evict(g->cache);
	return (int)i;
}

int64_t moq_cache_frame_begin(struct moq_cache_group *g, int64_t timestamp, size_t size)
{
	struct wsave s;
	int rc = wcheck(g);

	if (rc < 0)
		return rc;
	if (g->open)
		return MOQ_ERR_STATE;
	if (size > MOQ_CACHE_GROUP_CAP - g->w_bytes)
		return MOQ_ERR_TOO_LARGE;
	wsave(g, &s);
	rc = frame_start(g, timestamp, (uint32_t)size);
	if (rc < 0) {
		wrestore(g, &s);
		return rc;
	}
	if (size == 0)
		frame_end(g, arrival_now(g->cache));
	publish(g);
	bill(g, MOQ_CACHE_FRAME_OVERHEAD);
	maybe_evict(g->cache);
	return (int64_t)size;
}

int64_t moq_cache_frame_begin_meta(struct moq_cache_group *g, int64_t timestamp, size_t size,
                                   const struct moq_cache_meta *m)
{
	struct moq_cache *c = g->cache;
	uint32_t idx = g->w_nstarted;
	struct ext_arr *a = g->ext;
	uint8_t *blob = NULL;
	size_t ext_len = m != NULL ? m->ext_len : 0;
	int64_t r;
	int rc;

	if (m == NULL || (ext_len == 0 && !m->has_loc))
		return moq_cache_frame_begin(g, timestamp, size);
	if (ext_len > MOQ_CACHE_EXT_MAX || (ext_len && m->ext == NULL))
		return ext_len > MOQ_CACHE_EXT_MAX ? MOQ_ERR_TOO_LARGE : MOQ_ERR_INVAL;
	if ((rc = wcheck(g)) < 0)
		return rc;
	if (g->open)
		return MOQ_ERR_STATE;
	if (idx >= MOQ_CACHE_GROUP_MAX_FRAMES)
		return MOQ_ERR_LIMIT;
	if (a == NULL || idx >= a->cap) {
		uint32_t cap = a != NULL ? a->cap * 2 : 16;
		struct ext_arr *na;

		while (cap <= idx)
			cap *= 2;
		na = c_alloc(c, sizeof(*na) + (size_t)cap * sizeof(na->e[0]));
		if (na == NULL)
			return MOQ_ERR_NOMEM;
		memset(na, 0, sizeof(*na) + (size_t)cap * sizeof(na->e[0]));
		if (a != NULL)
			memcpy(na->e, a->e, (size_t)a->cap * sizeof(a->e[0]));
		na->cap = cap;
		na->older = a;
		STORE_REL(&g->ext, na);
		bill(g, sizeof(*na) + (uint64_t)cap * sizeof(na->e[0]));
		a = na;
	}
	if (ext_len) {
		blob = c_alloc(c, ext_len);
		if (blob == NULL)
			return MOQ_ERR_NOMEM;
		memcpy(blob, m->ext, ext_len);
	}
	/* published with the frame (release) */
	a->e[idx].p = blob;
	a->e[idx].len = (uint32_t)ext_len;
	a->e[idx].has_loc = m->has_loc;
	a->e[idx].subgroup = m->subgroup;
	a->e[idx].object = m->object;
	r = moq_cache_frame_begin(g, timestamp, size);
	if (r < 0) {
		memset(&a->e[idx], 0, sizeof(a->e[idx]));
		if (blob != NULL)
			c_free(c, blob);
		return r;
	}
	bill(g, ext_len);
	if (!LOAD_RLX(&g->track->has_ext))
		STORE_REL(&g->track->has_ext, 1u);
	return r;
}

int64_t moq_cache_frame_begin_ext(struct moq_cache_group *g, int64_t timestamp, size_t size,
                                  const void *ext, size_t ext_len)
{
	struct moq_cache_meta m = {.ext = ext, .ext_len = ext_len};

	if (ext_len && ext == NULL)
		return MOQ_ERR_INVAL;
	return moq_cache_frame_begin_meta(g, timestamp, size, &m);
}

int moq_cache_frame_meta(const struct moq_cache_group *g, uint32_t index, struct moq_cache_meta *m)
{
	const struct ext_arr *a = LOAD_ACQ(&g->ext);

	if (a == NULL || index >= a->cap || (a->e[index].p == NULL && !a->e[index].has_loc))
		return MOQ_ERR_NOTFOUND;
	m->ext = a->e[index].p;
	m->ext_len = a->e[index].len;
	m->has_loc = a->e[index].has_loc != 0;
	m->subgroup = a->e[index].subgroup;
	m->object = a->e[index].object;
	return 0;
}

int moq_cache_frame_ext(const struct moq_cache_group *g, uint32_t index, const uint8_t **p,
                        size_t *len)
{
	const struct ext_arr *a = LOAD_ACQ(&g->ext);

	if (a == NULL || index >= a->cap || a->e[index].p == NULL)
		return MOQ_ERR_NOTFOUND;
	*p = a->e[index].p;
	*len = a->e[index].len;
	return 0;
}

bool moq_cache_track_has_ext(const struct moq_cache_track *t)
{
	return LOAD_ACQ(&t->has_ext) != 0;
}

int64_t moq_cache_frame_append(struct moq_cache_group *g, const void *data, size_t len)
{
	struct wsave s;
	int64_t missing;
	int rc = wcheck(g);

	if (rc < 0)
		return rc;
	if (!g->open)
		return MOQ_ERR_STATE;
	if (len > g->open_missing || (data == NULL && len > 0))
		return MOQ_ERR_INVAL;
	if (len == 0)
		return g->open_missing;
	wsave(g, &s);
	rc = frame_bytes(g, data, (uint32_t)len, CLOCK_READ);
	if (rc < 0) {
		wrestore(g, &s);
		return rc;
	}
	missing = g->open ? g->open_missing : 0;
	publish(g);
	bill(g, len);
	maybe_evict(g->cache);
	return missing;
}

int moq_cache_group_finish(struct moq_cache_group *g)
{
	uint32_t st = LOAD_RLX(&g->state);

	if ((st & ST_WMASK) != ST_OPEN)
		return MOQ_ERR_CLOSED;
	if (g->open)
		return MOQ_ERR_STATE;
	__atomic_fetch_or(&g->state, ST_FIN, __ATOMIC_RELEASE);
	track_bump(g->track);
	return 0;
}

int moq_cache_group_abort(struct moq_cache_group *g)
{
	uint32_t st = LOAD_RLX(&g->state);

	if ((st & ST_WMASK) != ST_OPEN)
		return MOQ_ERR_CLOSED;
	__atomic_fetch_or(&g->state, ST_ABORT, __ATOMIC_RELEASE);
	track_bump(g->track);
	return 0;
}

/* --- groups: readers ----------------------------------------------------- */

uint64_t moq_cache_group_seq(const struct moq_cache_group *g)
{
	return g->seq;
}

uint64_t moq_cache_group_created(const struct moq_cache_group *g)
{
	return g->created;
}

int moq_cache_group_ts(const struct moq_cache_group *g, int newest, int64_t *ts)
{
	uint32_t started = LOAD_ACQ(&g->nstarted);

	if (started == 0)
		return MOQ_ERR_NOTFOUND;
	*ts = rec_at(g, newest ? started - 1 : 0)->timestamp;
	return 0;
}

int moq_cache_group_status(const struct moq_cache_group *g, uint64_t *bytes, uint32_t *frames)
{
	uint32_t st = LOAD_ACQ(&g->state);

	if (bytes != NULL)
		*bytes = LOAD_ACQ(&g->bytes);
	if (frames != NULL)
		*frames = LOAD_ACQ(&g->nstarted);
	if (removed(st))
		return reason_err[(st & ST_RMASK) >> ST_RSHIFT];
	if ((st & ST_WMASK) == ST_FIN)
		return MOQ_ERR_CLOSED;
	if ((st & ST_WMASK) == ST_ABORT)
		return MOQ_ERR_DROPPED;
	return 0;
}

/* The published piece holding byte @x (< published bytes), searching from
 * @hint (a piece at or before it) or, with hint NONE, by bisection. */
static uint32_t piece_find(const struct moq_cache_group *g, uint32_t np, uint64_t x, uint32_t hint)
{
	uint32_t lo, hi;

	if (hint != NONE) {
		while (hint + 1 < np && piece_at(g, hint + 1)->off <= x)
			hint++;
		return hint;
	}
	lo = 0;
	hi = np;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (piece_at(g, mid)->off <= x)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Copy @k complete frame records from @f on into @buf. */
static inline void copy_records(const struct moq_cache_group *g, uint32_t f,
                                struct moq_cache_frame *buf, uint32_t k)
{
	while (k > 0) {
		uint32_t c = chunk_of(f), i = f - chunk_first(c);
		uint32_t m = (CHUNK0 << c) - i;

		if (m > k)
			m = k;
		memcpy(buf, &fchunk(g, c)[i], m * sizeof(*buf));
		buf += m;
		f += m;
		k -= m;
	}
}

static inline int read_frames(struct moq_cache_group *g, struct moq_cache_cursor *cur,
                              struct moq_cache_frame *buf, uint32_t n)
{
	uint32_t st = LOAD_ACQ(&g->state);
	uint32_t done, f = cur->frame, pos = cur->pos;
	uint32_t started, np, p;
	uint64_t bytes, x, end;
	const struct moq_cache_frame *r;
	const struct piece *pc;

	if (__builtin_expect(st != ST_OPEN && st != ST_FIN, 0)) {
		if (removed(st))
			return reason_err[(st & ST_RMASK) >> ST_RSHIFT];
		return MOQ_ERR_DROPPED;
	}
	done = LOAD_ACQ(&g->ncomplete);
	if (f < done) {
		/* a batch of complete frames: copies of their records */
		uint32_t k = done - f < n ? done - f : n;

		copy_records(g, f, buf, k);
		if (__builtin_expect(pos != 0, 0)) {
			/* the rest of a frame returned in pieces before */
			buf->start = pos;
			buf->len -= pos;
			buf->offset += pos;
			if (buf->data != NULL) {
				buf->data += pos;
			} else {
				np = LOAD_ACQ(&g->npieces);
				p = piece_find(g, np, buf->offset,
				               cur->piece ? cur->piece - 1 : NONE);
				pc = piece_at(g, p);
				end = pc->off + (LOAD_RLX(&pc->len) & P_LEN);
				if (end >= buf->offset + buf->len)
					buf->data = pc->ptr + (buf->offset - pc->off);
			}
		}
		cur->frame = f + k;
		cur->pos = 0;
		cur->piece = 0;
		return (int)k;
	}
	/* the next frame is still arriving: its next contiguous run */
	bytes = LOAD_ACQ(&g->bytes);
	started = LOAD_ACQ(&g->nstarted);
	if (f >= started)
		return st == ST_FIN ? MOQ_ERR_CLOSED : 0;
	r = rec_at(g, f);
	x = r->offset + pos;
	if (x >= bytes)
		return 0;
	np = LOAD_ACQ(&g->npieces);
	p = piece_find(g, np, x, cur->piece ? cur->piece - 1 : NONE);
	pc = piece_at(g, p);
	end = pc->off + (LOAD_RLX(&pc->len) & P_LEN);
	if (end > bytes)
		end = bytes;
	if (end > r->offset + r->size)
		end = r->offset + r->size;
	buf->timestamp = r->timestamp;
	buf->offset = x;
	buf->data = pc->ptr + (x - pc->off);
	buf->size = r->size;
	buf->start = pos;
	buf->len = (uint32_t)(end - x);
	buf->index = f;
	buf->arrival = 0;
	if (end == r->offset + r->size) {
		/* it completed meanwhile: this view ends it (its arrival was
		 * stored before the bytes we acquired) */
		buf->arrival = r->arrival;
		cur->frame = f + 1;
		cur->pos = 0;
		cur->piece = 0;
	} else {
		cur->pos = pos + buf->len;
		cur->piece = p + 1;
	}
	return 1;
}

int moq_cache_read_frames(struct moq_cache_group *g, struct moq_cache_cursor *cur,
                          struct moq_cache_frame *buf, unsigned n)
{
	if (n == 0)
		return MOQ_ERR_INVAL;
	return read_frames(g, cur, buf, n);
}

int moq_cache_read_frame(struct moq_cache_group *g, struct moq_cache_cursor *cur,
                         struct moq_cache_frame *f)
{
	return read_frames(g, cur, f, 1);
}

int moq_cache_group_iov(const struct moq_cache_group *g, uint64_t offset, uint64_t len,
                        struct iovec *iov, unsigned n)
{
	uint64_t bytes, end;
	uint32_t np, j;
	unsigned k = 0;

	if (n == 0)
		return MOQ_ERR_INVAL;
	bytes = LOAD_ACQ(&g->bytes);
	np = LOAD_ACQ(&g->npieces);
	if (offset >= bytes || len == 0)
		return 0;
	end = offset + len < bytes ? offset + len : bytes;
	for (j = piece_find(g, np, offset, NONE); j < np && k < n && offset < end; j++) {
		const struct piece *p = piece_at(g, j);
		uint64_t pe = p->off + (LOAD_RLX(&p->len) & P_LEN);

		if (pe <= offset)
			continue;
		if (pe > end)
			pe = end;
		iov[k].iov_base = (void *)(uintptr_t)(p->ptr + (offset - p->off));
		iov[k].iov_len = (size_t)(pe - offset);
		offset = pe;
		k++;
	}
	return (int)k;
}

/* --- destroy ------------------------------------------------------------- */

void moq_cache_destroy(struct moq_cache *c)
{
	uint32_t b;

	if (c == NULL)
		return;
	lock(c);
	for (b = 0; b <= c->bmask; b++)
		while (c->buckets[b] != NULL)
			track_drop_locked(c->buckets[b]);
	reclaim_locked(c, true);
	unlock(c);
	c_free(c, c->buckets);
	c_free(c, c->readers);
	c_free(c, c);
}
