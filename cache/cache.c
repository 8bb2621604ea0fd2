/* SPDX-License-Identifier: MIT */
/*
 * cache.c: broadcast / track / group / frame storage (see cache.h).
 *
 * A group's index is one append-only table of 32-byte entries, in chunks that
 * double (4, 8, 16, ... entries) so nothing ever moves under a reader. A frame
 * is an F entry (timestamp, group byte offset, size); an exact-fit frame's F
 * entry points at its own copy, a block-stored frame's F entry is followed by
 * the P ("piece") entries that hold its bytes, each a contiguous run inside
 * one of the group's blocks. The writer fills entries and bytes, then
 * release-stores the entry count and the byte count; readers acquire-load the
 * byte count first, then the entry count, and use only entries and bytes
 * below those.
 */
#include "cache.h"

#include <stdbool.h>
#include <string.h>

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

/* --- entries ------------------------------------------------------------- */

#define ENT_P      0x80000000u /* piece entry (else frame entry) */
#define ENT_OWNS   0x40000000u /* ptr is an allocation this entry frees */
#define ENT_CONTIG 0x20000000u /* F: complete, all bytes in the next entry */
#define ENT_EXACT  0x10000000u /* F: ptr is the frame's exact-fit copy */
#define ENT_LEN    0x0fffffffu /* size (F) or length (P); 32 MiB fits */

struct ent {
	const uint8_t *ptr; /* F exact: the copy; P: the run's first byte */
	int64_t ts;         /* F: timestamp */
	uint32_t off;       /* group byte offset of the first byte */
	uint32_t len;       /* atomic: flags | size or length */
	uint32_t npieces;   /* F: P entries that follow (final once complete) */
	uint32_t pad;
};

#define CHUNK0_SHIFT 2u /* chunk k holds 4 << k entries */
#define NCHUNK       18u
#define CHUNK0       (1u << CHUNK0_SHIFT)
#define NONE         UINT32_MAX

_Static_assert(MOQ_CACHE_GROUP_MAX_ENTRIES == CHUNK0 * ((1u << NCHUNK) - 1u),
               "entry limit matches the chunk directory");
_Static_assert(MOQ_CACHE_GROUP_CAP <= ENT_LEN, "a size fits the length bits");

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

enum reason { R_NONE, R_EVICTED, R_OLD, R_LAGGED, R_CLOSED };

static const int reason_err[] = {0, MOQ_ERR_EVICTED, MOQ_ERR_OLD, MOQ_ERR_LAGGED, MOQ_ERR_CLOSED};

struct moq_cache_group {
	struct moq_cache *cache;
	struct moq_cache_track *track; /* referenced */
	uint64_t seq;
	uint64_t created;
	uint32_t refs;    /* atomic */
	uint32_t state;   /* atomic */
	uint64_t bytes;   /* atomic: published payload bytes */
	uint32_t nent;    /* atomic: published entries */
	uint32_t nframes; /* atomic: published frames (complete or started) */
	uint64_t billed;  /* atomic */
	/* writer private */
	uint32_t w_bytes, w_nent, w_nframes;
	uint32_t open_f;       /* entry of the open frame or NONE */
	uint32_t open_missing; /* its missing bytes */
	uint32_t w_piece;      /* piece entry extendable at blk + blk_used, or NONE */
	uint8_t *blk;
	uint32_t blk_used, blk_cap;
	/* under the cache lock */
	struct moq_cache_group *gprev, *gnext, *tprev, *tnext;
	struct retire rt;
	struct ent *chunk[NCHUNK];
	struct ent ent0[CHUNK0];
};

_Static_assert(sizeof(struct moq_cache_group) <= MOQ_CACHE_GROUP_OVERHEAD,
               "group overhead billed covers the descriptor");

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
	uint32_t mask;    /* window - 1 */
	uint64_t max_latency;
	uint64_t newest;                       /* atomic: newest seq + 1; 0 = none */
	uint64_t version;                      /* atomic */
	struct moq_cache_group *ghead, *gtail; /* live groups, by sequence */
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

static inline struct ent *ent_at(const struct moq_cache_group *g, uint32_t i)
{
	uint32_t q = (i >> CHUNK0_SHIFT) + 1;
	uint32_t k = 31 - (uint32_t)__builtin_clz(q);

	return &g->chunk[k][i - CHUNK0 * ((1u << k) - 1u)];
}

/* Entry @i for the writer, allocating its chunk. NULL: MOQ_ERR_NOMEM/LIMIT. */
static struct ent *ent_new(struct moq_cache_group *g, uint32_t i, int *err)
{
	uint32_t q, k;

	if (i >= MOQ_CACHE_GROUP_MAX_ENTRIES) {
		*err = MOQ_ERR_LIMIT;
		return NULL;
	}
	q = (i >> CHUNK0_SHIFT) + 1;
	k = 31 - (uint32_t)__builtin_clz(q);
	if (g->chunk[k] == NULL) {
		g->chunk[k] = c_alloc(g->cache, (size_t)(CHUNK0 << k) * sizeof(struct ent));
		if (g->chunk[k] == NULL) {
			*err = MOQ_ERR_NOMEM;
			return NULL;
		}
	}
	return &g->chunk[k][i - CHUNK0 * ((1u << k) - 1u)];
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
	uint32_t i, k, n = g->w_nent;
	uint64_t left;

	/* the writer's state is ours now: every holder is gone */
	for (i = 0; i < n; i++) {
		struct ent *e = ent_at(g, i);

		if (e->len & ENT_OWNS)
			c_free(c, (void *)(uintptr_t)e->ptr);
	}
	for (k = 1; k < NCHUNK; k++)
		c_free(c, g->chunk[k]);
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
	__atomic_store_n(&c->readers[id].seen, __atomic_load_n(&c->gp, __ATOMIC_SEQ_CST),
	                 __ATOMIC_SEQ_CST);
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
		if (g == NULL)
			break;
		group_remove(g, R_EVICTED);
		n++;
	}
	return n;
}

static int expire_track_locked(struct moq_cache_track *t, uint64_t now, bool all)
{
	struct moq_cache_group *g = t->ghead, *next;
	int n = 0;

	for (; g != NULL; g = next) {
		next = g->tnext;
		if ((all || !is_newest(g)) && now > g->created &&
		    now - g->created > t->max_latency) {
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
	evict_locked(c);
	reclaim_locked(c, false);
	unlock(c);
}

int moq_cache_expire(struct moq_cache *c, uint64_t now)
{
	uint32_t b;
	int n = 0;

	lock(c);
	for (b = 0; b <= c->bmask; b++) {
		struct moq_cache_track *t;

		for (t = c->buckets[b]; t != NULL; t = t->hnext)
			n += expire_track_locked(t, now, false);
	}
	n += evict_locked(c);
	reclaim_locked(c, false);
	unlock(c);
	return n;
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
			moq_cache_track_ref(t);
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

int moq_cache_group_open(struct moq_cache_track *t, uint64_t seq, uint64_t now,
                         struct moq_cache_group **out)
{
	struct moq_cache *c = t->cache;
	struct moq_cache_group *g, *o, *next;
	uint64_t newest;
	struct slot *s;

	if (out == NULL || seq >= UINT64_MAX >> 3)
		return MOQ_ERR_INVAL;
	g = c_alloc(c, sizeof(*g));
	if (g == NULL)
		return MOQ_ERR_NOMEM;
	memset(g, 0, sizeof(*g) - sizeof(g->ent0));
	g->cache = c;
	g->track = t;
	g->seq = seq;
	g->created = now;
	g->refs = 2; /* the window's and the writer's */
	g->open_f = NONE;
	g->w_piece = NONE;
	g->chunk[0] = g->ent0;

	lock(c);
	reclaim_locked(c, false);
	if (LOAD_RLX(&t->dropped)) {
		unlock(c);
		c_free(c, g);
		return MOQ_ERR_CLOSED;
	}
	newest = LOAD_RLX(&t->newest);
	if (newest != 0 && seq < newest) {
		unlock(c);
		c_free(c, g);
		return MOQ_ERR_ORDER;
	}
	moq_cache_track_ref(t);
	/* the new group becomes the newest: every older one may expire */
	expire_track_locked(t, now, true);
	/* the window keeps sequences (seq - window, seq] */
	for (o = t->ghead; o != NULL; o = next) {
		next = o->tnext;
		if (o->seq + t->mask + 1 <= seq)
			group_remove(o, R_LAGGED);
	}
	/* link: global open order, track sequence order */
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
	s = &t->ring[seq & t->mask];
	STORE_REL(&s->g, g);
	STORE_REL(&t->newest, seq + 1);
	bill(g, MOQ_CACHE_GROUP_OVERHEAD);
	track_bump(t);
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
	STORE_REL(&g->nent, g->w_nent);
	STORE_REL(&g->nframes, g->w_nframes);
	STORE_REL(&g->bytes, (uint64_t)g->w_bytes);
	track_bump(g->track);
}

static void maybe_evict(struct moq_cache *c)
{
	uint64_t budget = LOAD_RLX(&c->budget);

	if (budget != 0 && LOAD_RLX(&c->used) > budget && trylock(c)) {
		evict_locked(c);
		reclaim_locked(c, false);
		unlock(c);
	}
}

/* Writer state saved before a step, to undo it on failure. */
struct wsave {
	uint32_t bytes, nent, nframes, open_f, open_missing, piece, piece_len;
	uint8_t *blk;
	uint32_t blk_used, blk_cap;
};

static void wsave(const struct moq_cache_group *g, struct wsave *s)
{
	s->bytes = g->w_bytes;
	s->nent = g->w_nent;
	s->nframes = g->w_nframes;
	s->open_f = g->open_f;
	s->open_missing = g->open_missing;
	s->piece = g->w_piece;
	s->piece_len = s->piece != NONE ? LOAD_RLX(&ent_at(g, s->piece)->len) : 0;
	s->blk = g->blk;
	s->blk_used = g->blk_used;
	s->blk_cap = g->blk_cap;
}

static void wrestore(struct moq_cache_group *g, const struct wsave *s)
{
	uint32_t i;

	uint32_t k;

	for (i = s->nent; i < g->w_nent; i++) {
		struct ent *e = ent_at(g, i);

		if (e->len & ENT_OWNS)
			c_free(g->cache, (void *)(uintptr_t)e->ptr);
		e->len = 0;
	}
	/* chunks that held no entry before go too */
	for (k = 1; k < NCHUNK; k++) {
		if (g->chunk[k] != NULL && CHUNK0 * ((1u << k) - 1u) >= s->nent) {
			c_free(g->cache, g->chunk[k]);
			g->chunk[k] = NULL;
		}
	}
	g->w_bytes = s->bytes;
	g->w_nent = s->nent;
	g->w_nframes = s->nframes;
	g->open_f = s->open_f;
	g->open_missing = s->open_missing;
	g->w_piece = s->piece;
	if (s->piece != NONE)
		STORE_RLX(&ent_at(g, s->piece)->len, s->piece_len);
	g->blk = s->blk;
	g->blk_used = s->blk_used;
	g->blk_cap = s->blk_cap;
}

/* Size of the next block: a power of two between 64 B and 64 KiB, at most the
 * bytes the open frame still needs (so a big frame fills its blocks) unless
 * the group is already large (then 1/32 of it, so growth stays cheap and the
 * last block wastes at most ~3 %). */
static uint32_t block_size(const struct moq_cache_group *g, uint32_t need)
{
	uint32_t grow = g->w_bytes / 32, size;

	if (need >= MOQ_CACHE_BLOCK_MAX || grow >= MOQ_CACHE_BLOCK_MAX)
		return MOQ_CACHE_BLOCK_MAX;
	if (need <= MOQ_CACHE_BLOCK_MIN && grow <= MOQ_CACHE_BLOCK_MIN)
		return MOQ_CACHE_BLOCK_MIN;
	/* round the need up when that wastes at most a quarter of it, else down
	 * (the frame then continues in a next, smaller block) */
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
		uint32_t n;

		if (g->blk_used == g->blk_cap) {
			uint32_t size = block_size(g, g->open_missing);
			uint8_t *b = g->cache->a.alloc(g->cache->a.ctx, size, 1);
			struct ent *e;

			if (b == NULL)
				return MOQ_ERR_NOMEM;
			e = ent_new(g, g->w_nent, &err);
			if (e == NULL) {
				c_free(g->cache, b);
				return err;
			}
			g->blk = b;
			g->blk_used = 0;
			g->blk_cap = size;
			e->ptr = b;
			e->ts = 0;
			e->off = g->w_bytes;
			STORE_RLX(&e->len, ENT_P | ENT_OWNS);
			e->npieces = 0;
			g->w_piece = g->w_nent++;
		} else if (g->w_piece == NONE) {
			struct ent *e = ent_new(g, g->w_nent, &err);

			if (e == NULL)
				return err;
			e->ptr = g->blk + g->blk_used;
			e->ts = 0;
			e->off = g->w_bytes;
			STORE_RLX(&e->len, ENT_P);
			e->npieces = 0;
			g->w_piece = g->w_nent++;
		}
		n = g->blk_cap - g->blk_used;
		if (n > len)
			n = len;
		memcpy(g->blk + g->blk_used, data, n);
		{
			struct ent *e = ent_at(g, g->w_piece);

			STORE_RLX(&e->len, LOAD_RLX(&e->len) + n);
		}
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
	struct ent *e = ent_new(g, g->w_nent, &err);

	if (e == NULL)
		return err;
	e->ptr = NULL;
	e->ts = ts;
	e->off = g->w_bytes;
	STORE_RLX(&e->len, size);
	e->npieces = 0;
	g->open_f = g->w_nent++;
	g->open_missing = size;
	g->w_piece = NONE;
	g->w_nframes++;
	return 0;
}

/* The open frame has all of its bytes. */
static void frame_end(struct moq_cache_group *g)
{
	struct ent *f = ent_at(g, g->open_f);
	uint32_t pieces = g->w_nent - g->open_f - 1;

	STORE_RLX(&f->npieces, pieces);
	if (pieces == 1)
		STORE_RLX(&f->len, LOAD_RLX(&f->len) | ENT_CONTIG);
	g->open_f = NONE;
	g->w_piece = NONE;
}

/* Bytes of the open frame; exact-fit when they are all of it and small. */
static int frame_bytes(struct moq_cache_group *g, const uint8_t *data, uint32_t len)
{
	struct ent *f = ent_at(g, g->open_f);
	uint32_t size = LOAD_RLX(&f->len) & ENT_LEN;
	int rc;

	if (len == size && size <= MOQ_CACHE_COPY_WHOLE && size > 0) {
		uint8_t *p = g->cache->a.alloc(g->cache->a.ctx, size, 1);

		if (p == NULL)
			return MOQ_ERR_NOMEM;
		memcpy(p, data, size);
		f->ptr = p;
		STORE_RLX(&f->len, size | ENT_EXACT | ENT_OWNS);
		g->w_bytes += size;
		g->open_missing = 0;
	} else if (len > 0) {
		rc = put_bytes(g, data, len);
		if (rc < 0)
			return rc;
	}
	if (g->open_missing == 0)
		frame_end(g);
	return 0;
}

static int put_frame(struct moq_cache_group *g, int64_t ts, const void *data, uint32_t len)
{
	struct wsave s;
	int rc;

	wsave(g, &s);
	rc = frame_start(g, ts, len);
	if (rc == 0)
		rc = frame_bytes(g, data, len);
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
	if (g->open_f != NONE)
		return MOQ_ERR_STATE;
	if (len > MOQ_CACHE_GROUP_CAP - g->w_bytes)
		return MOQ_ERR_TOO_LARGE;
	if (data == NULL && len > 0)
		return MOQ_ERR_INVAL;
	rc = put_frame(g, timestamp, data, (uint32_t)len);
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
	uint64_t total = 0;
	unsigned i;
	int rc = wcheck(g);

	if (rc < 0)
		return rc;
	if (g->open_f != NONE)
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
	if ((uint64_t)g->w_nent + n > MOQ_CACHE_GROUP_MAX_ENTRIES)
		return MOQ_ERR_LIMIT;
	total = 0;
	for (i = 0; i < n; i++) {
		rc = put_frame(g, in[i].timestamp, in[i].data, (uint32_t)in[i].len);
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
	if (g->open_f != NONE)
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
		frame_end(g);
	publish(g);
	bill(g, MOQ_CACHE_FRAME_OVERHEAD);
	maybe_evict(g->cache);
	return (int64_t)size;
}

int64_t moq_cache_frame_append(struct moq_cache_group *g, const void *data, size_t len)
{
	struct wsave s;
	int64_t missing;
	int rc = wcheck(g);

	if (rc < 0)
		return rc;
	if (g->open_f == NONE)
		return MOQ_ERR_STATE;
	if (len > g->open_missing || (data == NULL && len > 0))
		return MOQ_ERR_INVAL;
	if (len == 0)
		return g->open_missing;
	wsave(g, &s);
	rc = frame_bytes(g, data, (uint32_t)len);
	if (rc < 0) {
		wrestore(g, &s);
		return rc;
	}
	missing = g->open_f == NONE ? 0 : g->open_missing;
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
	if (g->open_f != NONE)
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
	g->open_f = NONE;
	g->w_piece = NONE;
	__atomic_fetch_or(&g->state, ST_ABORT, __ATOMIC_RELEASE);
	track_bump(g->track);
	return 0;
}

/* --- groups: readers ----------------------------------------------------- */

uint64_t moq_cache_group_seq(const struct moq_cache_group *g)
{
	return g->seq;
}

int moq_cache_group_status(const struct moq_cache_group *g, uint64_t *bytes, uint32_t *frames)
{
	uint32_t st = LOAD_ACQ(&g->state);

	if (bytes != NULL)
		*bytes = LOAD_ACQ(&g->bytes);
	if (frames != NULL)
		*frames = LOAD_ACQ(&g->nframes);
	if (removed(st))
		return reason_err[(st & ST_RMASK) >> ST_RSHIFT];
	if ((st & ST_WMASK) == ST_FIN)
		return MOQ_ERR_CLOSED;
	if ((st & ST_WMASK) == ST_ABORT)
		return MOQ_ERR_DROPPED;
	return 0;
}

/* The rest of a complete frame read in pieces before, from byte @pos: its
 * address when it lies in one piece, else NULL. */
static const uint8_t *rest_contig(const struct moq_cache_group *g, const struct ent *e, uint32_t p,
                                  uint32_t pos)
{
	uint64_t x = (uint64_t)e->off + pos;
	uint32_t size = LOAD_RLX(&e->len) & ENT_LEN;

	for (;; p++) {
		const struct ent *pe = ent_at(g, p);
		uint64_t end = pe->off + (LOAD_RLX(&pe->len) & ENT_LEN);

		if (x < end)
			return end >= (uint64_t)e->off + size ? pe->ptr + (x - pe->off) : NULL;
	}
}

static inline int read_frames(struct moq_cache_group *g, struct moq_cache_cursor *cur,
                              struct moq_cache_frame *buf, unsigned n)
{
	uint32_t st = LOAD_ACQ(&g->state);
	uint64_t bytes;
	uint32_t nent, i, pos;
	unsigned count = 0;

	if (st != ST_OPEN && st != ST_FIN) {
		if (removed(st))
			return reason_err[(st & ST_RMASK) >> ST_RSHIFT];
		return MOQ_ERR_DROPPED;
	}
	bytes = LOAD_ACQ(&g->bytes);
	nent = LOAD_ACQ(&g->nent);
	i = cur->ent;
	pos = cur->pos;
	while (count < n && i < nent) {
		const struct ent *e = ent_at(g, i);
		uint32_t w = LOAD_RLX(&e->len);
		uint32_t size = w & ENT_LEN;
		struct moq_cache_frame *f = &buf[count];

		if ((uint64_t)e->off + size > bytes) {
			/* the frame is still arriving: its next contiguous run */
			uint32_t p = cur->piece ? cur->piece : i + 1;
			uint64_t x = (uint64_t)e->off + pos;
			const struct ent *pe;
			uint64_t end;

			if (count > 0 || x >= bytes)
				break;
			for (;;) {
				pe = ent_at(g, p);
				end = pe->off + (LOAD_RLX(&pe->len) & ENT_LEN);
				if (x < end || p + 1 >= nent)
					break;
				p++;
			}
			if (end > bytes)
				end = bytes;
			if (x >= end)
				break;
			f->timestamp = e->ts;
			f->offset = x;
			f->data = pe->ptr + (x - pe->off);
			f->size = size;
			f->start = pos;
			f->len = (uint32_t)(end - x);
			f->index = cur->frame;
			cur->piece = p;
			cur->pos = pos + f->len;
			cur->ent = i;
			return 1;
		}
		f->timestamp = e->ts;
		f->offset = (uint64_t)e->off + pos;
		f->size = size;
		f->start = pos;
		f->len = size - pos;
		f->index = cur->frame++;
		if (w & ENT_EXACT)
			f->data = e->ptr + pos;
		else if (w & ENT_CONTIG)
			f->data = ent_at(g, i + 1)->ptr + pos;
		else if (pos > 0)
			f->data = rest_contig(g, e, cur->piece, pos);
		else
			f->data = NULL;
		i += 1 + LOAD_RLX(&e->npieces);
		pos = 0;
		count++;
	}
	if (count > 0) {
		cur->ent = i;
		cur->pos = 0;
		cur->piece = 0;
		return (int)count;
	}
	if (st == ST_FIN && i >= nent)
		return MOQ_ERR_CLOSED;
	return 0;
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

/* data-bearing length of entry @e (0: a frame whose bytes are in pieces) */
static uint32_t ent_data(const struct ent *e)
{
	uint32_t w = LOAD_RLX(&e->len);

	if (w & (ENT_P | ENT_EXACT))
		return w & ENT_LEN;
	return 0;
}

int moq_cache_group_iov(const struct moq_cache_group *g, uint64_t offset, uint64_t len,
                        struct iovec *iov, unsigned n)
{
	uint64_t bytes, end;
	uint32_t nent, lo, hi, j;
	unsigned k = 0;

	if (n == 0)
		return MOQ_ERR_INVAL;
	bytes = LOAD_ACQ(&g->bytes);
	nent = LOAD_ACQ(&g->nent);
	if (offset >= bytes || len == 0)
		return 0;
	end = offset + len < bytes ? offset + len : bytes;
	/* the last entry starting at or before @offset */
	lo = 0;
	hi = nent;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (ent_at(g, mid)->off <= offset)
			lo = mid;
		else
			hi = mid;
	}
	j = lo;
	while (j > 0 && ent_data(ent_at(g, j)) == 0)
		j--;
	for (; j < nent && k < n && offset < end; j++) {
		const struct ent *e = ent_at(g, j);
		uint64_t dl = ent_data(e), de;

		if (dl == 0)
			continue;
		de = e->off + dl;
		if (de <= offset)
			continue;
		if (de > end)
			de = end;
		iov[k].iov_base = (void *)(uintptr_t)(e->ptr + (offset - e->off));
		iov[k].iov_len = (size_t)(de - offset);
		offset = de;
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
