/* SPDX-License-Identifier: MIT */
/*
 * pool.c: per-lcore size-class pools on hugepages (see pool.h).
 *
 * An arena owns chunks; a chunk is MOQ_POOL_CHUNK bytes aligned to a slab,
 * with a descriptor per slab kept beside it (not in the chunk: objects fill
 * slabs exactly). A slab serving a class hands out objects from its free
 * list, then by carving the next untouched one; a slab with free objects is
 * on its class's partial list, a full one on no list, an empty one on the
 * arena's free list. All of that is under the arena's spinlock, taken once
 * per batch. A chunk is aligned to a slab, not to its own size (an aligned
 * 2 MiB block costs the EAL heap up to twice that); the chunk table maps
 * each 2 MiB address window a chunk overlaps (two) to the chunk: open
 * addressing, entries only ever added (under the table lock), read without
 * a lock on every free.
 */
#include "pool.h"

#include <errno.h>
#include <string.h>

#include <rte_common.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_spinlock.h>

#define SLAB_SHIFT      16u
#define CHUNK_SHIFT     21u
#define SLABS_PER_CHUNK (MOQ_POOL_CHUNK / MOQ_POOL_SLAB)
/* Per-lcore cache of a class: at most this many bytes, at most CACHE_MAX
 * objects, at least 2; a refill or flush moves half of it. */
#define CACHE_BYTES (64u * 1024u)
#define CACHE_MAX   32u
#define NO_CLASS    0xffffu

_Static_assert((1u << SLAB_SHIFT) == MOQ_POOL_SLAB, "slab shift");
_Static_assert((1u << CHUNK_SHIFT) == MOQ_POOL_CHUNK, "chunk shift");

struct slab {
	struct slab *prev, *next; /* partial list of its class, or free list */
	void *free;               /* free objects, linked through their first word */
	uint8_t *base;
	uint32_t carved; /* objects handed out at least once */
	uint32_t inuse;  /* objects outside the slab (allocated or cached) */
	uint32_t cap;    /* objects per slab */
	uint16_t cls;    /* NO_CLASS when free */
	uint8_t arena;
	uint8_t listed; /* on its class's partial list */
};

struct chunk {
	uint8_t *base;
	struct slab slab[SLABS_PER_CHUNK];
};

struct arena {
	rte_spinlock_t lock;
	int socket;
	struct slab *free_slabs; /* singly linked through next */
	struct slab *partial[MOQ_POOL_CLASSES];
	uint64_t slabs[MOQ_POOL_CLASSES];
	/* objects freed / allocated by threads without an lcore cache */
	uint64_t alloc_nolc[MOQ_POOL_CLASSES], free_nolc[MOQ_POOL_CLASSES];
} __rte_cache_aligned;

struct lcache {
	uint32_t n[MOQ_POOL_CLASSES];
	uint64_t allocs[MOQ_POOL_CLASSES], frees[MOQ_POOL_CLASSES]; /* this lcore's */
	void *obj[MOQ_POOL_CLASSES][CACHE_MAX];
} __rte_cache_aligned;

struct moq_pool {
	unsigned narenas;
	uint64_t limit_chunks;
	uint64_t nchunks; /* under tlock: reserved or being reserved */
	uint64_t nlisted; /* under tlock: in chunks[] */
	rte_spinlock_t tlock;
	uint32_t tmask;
	struct tentry {
		uintptr_t key;   /* atomic: address >> CHUNK_SHIFT; 0 = free */
		struct chunk *c; /* a chunk overlapping that window */
	} * table;
	struct chunk **chunks;            /* all of them, for free */
	uint8_t home[RTE_MAX_LCORE];      /* arena of each lcore */
	struct lcache *lc[RTE_MAX_LCORE]; /* NULL for lcores not enabled */
	uint64_t exhausted, fallback_allocs, fallback_bytes, remote_frees; /* atomic */
	struct arena arena[MOQ_POOL_MAX_ARENAS];
};

/* One lcore writes its counters, the stats reader reads them. */
static inline void count(uint64_t *c)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* --- classes ------------------------------------------------------------- */

/* 16..64 by 8; 64..4096 in eighths of an octave; then sizes whose slab
 * waste is small (64 KiB = 6 x 10240 + 4096: 6 %); 32 and 64 KiB. */
static uint32_t class_size[MOQ_POOL_CLASSES];
static uint8_t class_small[4096 / 8 + 1]; /* (size + 7) / 8 -> class */
static uint32_t class_depth[MOQ_POOL_CLASSES];
static int classes_ready;

static void classes_init(void)
{
	static const uint32_t big[] = {5120, 6144, 7168, 8192, 10240, 12288, 16384, 32768, 65536};
	unsigned k = 0, i;

	if (__atomic_load_n(&classes_ready, __ATOMIC_ACQUIRE))
		return;
	for (uint32_t s = 16; s <= 64; s += 8)
		class_size[k++] = s;
	for (uint32_t o = 64; o < 4096; o *= 2)
		for (i = 1; i <= 8; i++)
			class_size[k++] = o + o / 8 * i;
	for (i = 0; i < RTE_DIM(big); i++)
		class_size[k++] = big[i];
	RTE_VERIFY(k == MOQ_POOL_CLASSES);
	for (i = 0, k = 0; i <= 4096 / 8; i++) {
		while (class_size[k] < i * 8)
			k++;
		class_small[i] = (uint8_t)k;
	}
	for (k = 0; k < MOQ_POOL_CLASSES; k++) {
		uint32_t d = CACHE_BYTES / class_size[k];

		class_depth[k] = d > CACHE_MAX ? CACHE_MAX : d < 2 ? 2 : d;
	}
	__atomic_store_n(&classes_ready, 1, __ATOMIC_RELEASE);
}

uint32_t moq_pool_class_size(unsigned k)
{
	classes_init();
	return k < MOQ_POOL_CLASSES ? class_size[k] : 0;
}

static inline int class_of(size_t size)
{
	unsigned k;

	if (size <= 4096)
		return class_small[(size + 7) / 8];
	if (size > MOQ_POOL_MAX_CLASS)
		return -1;
	for (k = class_small[4096 / 8] + 1; class_size[k] < size; k++)
		;
	return (int)k;
}

int moq_pool_class_of(size_t size)
{
	classes_init();
	return class_of(size);
}

/* --- the chunk table ----------------------------------------------------- */

static inline uint32_t thash(uintptr_t key, uint32_t mask)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

static inline struct chunk *chunk_find(const struct moq_pool *p, const void *obj)
{
	uintptr_t a = (uintptr_t)obj, key = a >> CHUNK_SHIFT, k;
	uint32_t h = thash(key, p->tmask);

	while ((k = __atomic_load_n(&p->table[h].key, __ATOMIC_ACQUIRE)) != 0) {
		const struct chunk *c = p->table[h].c;

		if (k == key && a - (uintptr_t)c->base < MOQ_POOL_CHUNK)
			return (struct chunk *)c;
		h = (h + 1) & p->tmask;
	}
	return NULL;
}

/* Under the table lock: @c under the 2 MiB window @key. */
static void table_add(struct moq_pool *p, uintptr_t key, struct chunk *c)
{
	uint32_t h = thash(key, p->tmask);

	while (p->table[h].key != 0)
		h = (h + 1) & p->tmask;
	p->table[h].c = c;
	__atomic_store_n(&p->table[h].key, key, __ATOMIC_RELEASE);
}

/* A new chunk for arena @ai, its slabs onto the free list. Under the arena
 * lock. NULL at the limit or when EAL has no memory. */
static struct slab *chunk_add(struct moq_pool *p, unsigned ai)
{
	struct arena *a = &p->arena[ai];
	struct chunk *c;
	uint8_t *base;

	rte_spinlock_lock(&p->tlock);
	if (p->nchunks >= p->limit_chunks) {
		rte_spinlock_unlock(&p->tlock);
		return NULL;
	}
	p->nchunks++; /* reserve our place: the table never overfills */
	rte_spinlock_unlock(&p->tlock);
	c = rte_zmalloc_socket("moqdp_pool_chunk", sizeof(*c), RTE_CACHE_LINE_SIZE, a->socket);
	base = rte_malloc_socket("moqdp_pool", MOQ_POOL_CHUNK, MOQ_POOL_SLAB, a->socket);
	if (c == NULL || base == NULL) {
		rte_free(c);
		rte_free(base);
		rte_spinlock_lock(&p->tlock);
		p->nchunks--;
		rte_spinlock_unlock(&p->tlock);
		return NULL;
	}
	c->base = base;
	for (unsigned i = 0; i < SLABS_PER_CHUNK; i++) {
		struct slab *s = &c->slab[i];

		s->base = base + (size_t)i * MOQ_POOL_SLAB;
		s->cls = NO_CLASS;
		s->arena = (uint8_t)ai;
		s->next = i + 1 < SLABS_PER_CHUNK ? &c->slab[i + 1] : a->free_slabs;
	}
	a->free_slabs = &c->slab[0];
	rte_spinlock_lock(&p->tlock);
	p->chunks[p->nlisted++] = c;
	table_add(p, (uintptr_t)base >> CHUNK_SHIFT, c);
	if (((uintptr_t)base + MOQ_POOL_CHUNK - 1) >> CHUNK_SHIFT != (uintptr_t)base >> CHUNK_SHIFT)
		table_add(p, ((uintptr_t)base + MOQ_POOL_CHUNK - 1) >> CHUNK_SHIFT, c);
	rte_spinlock_unlock(&p->tlock);
	return a->free_slabs;
}

/* --- slabs (under the arena lock) ---------------------------------------- */

static void partial_link(struct arena *a, struct slab *s)
{
	s->prev = NULL;
	s->next = a->partial[s->cls];
	if (s->next != NULL)
		s->next->prev = s;
	a->partial[s->cls] = s;
	s->listed = 1;
}

static void partial_unlink(struct arena *a, struct slab *s)
{
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		a->partial[s->cls] = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
	s->listed = 0;
}

/* Up to @n objects of class @k into @out. */
static unsigned get_locked(struct moq_pool *p, unsigned ai, unsigned k, void **out, unsigned n)
{
	struct arena *a = &p->arena[ai];
	unsigned got = 0;

	while (got < n) {
		struct slab *s = a->partial[k];

		if (s == NULL) {
			s = a->free_slabs != NULL ? a->free_slabs : chunk_add(p, ai);
			if (s == NULL)
				break;
			a->free_slabs = s->next;
			s->cls = (uint16_t)k;
			s->free = NULL;
			s->carved = 0;
			s->inuse = 0;
			s->cap = MOQ_POOL_SLAB / class_size[k];
			a->slabs[k]++;
			partial_link(a, s);
		}
		while (got < n && s->inuse < s->cap) {
			void *o;

			if (s->free != NULL) {
				o = s->free;
				s->free = *(void **)o;
			} else {
				o = s->base + (size_t)s->carved++ * class_size[k];
			}
			s->inuse++;
			out[got++] = o;
		}
		if (s->inuse == s->cap)
			partial_unlink(a, s);
	}
	return got;
}

static void put_locked(struct arena *a, struct slab *s, void *o)
{
	*(void **)o = s->free;
	s->free = o;
	if (--s->inuse == 0) {
		if (s->listed)
			partial_unlink(a, s);
		a->slabs[s->cls]--;
		s->cls = NO_CLASS;
		s->next = a->free_slabs;
		a->free_slabs = s;
	} else if (!s->listed) {
		partial_link(a, s);
	}
}

static inline struct slab *slab_of(const struct chunk *c, const void *o)
{
	return (struct slab *)&c->slab[((uintptr_t)o - (uintptr_t)c->base) >> SLAB_SHIFT];
}

/* Return @n objects of class @k, all from arena @ai, to their slabs. */
static void put_batch(struct moq_pool *p, unsigned ai, void **obj, unsigned n)
{
	struct arena *a = &p->arena[ai];

	rte_spinlock_lock(&a->lock);
	for (unsigned i = 0; i < n; i++)
		put_locked(a, slab_of(chunk_find(p, obj[i]), obj[i]), obj[i]);
	rte_spinlock_unlock(&a->lock);
}

/* --- create / free ------------------------------------------------------- */

struct moq_pool *moq_pool_create(const char *name, uint64_t limit, const int *sockets,
                                 unsigned nsockets)
{
	struct moq_pool *p;
	uint64_t nch;
	uint32_t tsize = 16;
	unsigned i;

	(void)name;
	classes_init();
	if (nsockets == 0 || nsockets > MOQ_POOL_MAX_ARENAS || limit == 0 || limit > (1ull << 46)) {
		rte_errno = EINVAL;
		return NULL;
	}
	nch = (limit + MOQ_POOL_CHUNK - 1) / MOQ_POOL_CHUNK;
	while (tsize < 4 * nch) /* two windows per chunk, half full at most */
		tsize *= 2;
	p = rte_zmalloc_socket("moqdp_pool", sizeof(*p), RTE_CACHE_LINE_SIZE, sockets[0]);
	if (p == NULL)
		goto fail_pool;
	p->narenas = nsockets;
	p->limit_chunks = nch;
	p->tmask = tsize - 1;
	rte_spinlock_init(&p->tlock);
	p->table = rte_zmalloc_socket("moqdp_pool_table", tsize * sizeof(*p->table),
	                              RTE_CACHE_LINE_SIZE, sockets[0]);
	p->chunks = rte_zmalloc_socket("moqdp_pool_chunks", (nch + 1) * sizeof(*p->chunks),
	                               RTE_CACHE_LINE_SIZE, sockets[0]);
	if (p->table == NULL || p->chunks == NULL)
		goto fail_tables;
	for (i = 0; i < nsockets; i++) {
		rte_spinlock_init(&p->arena[i].lock);
		p->arena[i].socket = sockets[i];
	}
	for (i = 0; i < RTE_MAX_LCORE; i++) {
		int sock;

		if (!rte_lcore_is_enabled(i))
			continue;
		sock = (int)rte_lcore_to_socket_id(i);
		for (unsigned ai = 0; ai < nsockets; ai++)
			if (sockets[ai] == sock) {
				p->home[i] = (uint8_t)ai;
				break;
			}
		p->lc[i] = rte_zmalloc_socket("moqdp_pool_lcache", sizeof(struct lcache),
		                              RTE_CACHE_LINE_SIZE, sock);
		if (p->lc[i] == NULL)
			goto fail_tables;
	}
	return p;

fail_tables:
	moq_pool_free(p);
	rte_errno = ENOMEM;
	return NULL;
fail_pool:
	rte_errno = ENOMEM;
	return NULL;
}

void moq_pool_free(struct moq_pool *p)
{
	if (p == NULL)
		return;
	for (unsigned i = 0; i < RTE_MAX_LCORE; i++)
		rte_free(p->lc[i]);
	for (uint64_t i = 0; p->chunks != NULL && p->chunks[i] != NULL; i++) {
		rte_free(p->chunks[i]->base);
		rte_free(p->chunks[i]);
	}
	rte_free(p->chunks);
	rte_free(p->table);
	rte_free(p);
}

/* --- alloc / free -------------------------------------------------------- */

static void *fallback_alloc(struct moq_pool *p, size_t size, size_t align)
{
	void *o = rte_malloc_socket("moqdp_cache", size, (unsigned int)align, SOCKET_ID_ANY);

	if (o != NULL) {
		/* what the heap element really holds, the same figure the free
		 * subtracts */
		if (rte_malloc_validate(o, &size) != 0)
			size = 0;
		__atomic_fetch_add(&p->fallback_allocs, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&p->fallback_bytes, size, __ATOMIC_RELAXED);
	}
	return o;
}

/* One object of class @k without an lcore cache: arena @ai first, then the
 * others. */
static void *alloc_locked_one(struct moq_pool *p, unsigned ai, unsigned k)
{
	for (unsigned i = 0; i < p->narenas; i++) {
		unsigned x = (ai + i) % p->narenas;
		struct arena *a = &p->arena[x];
		void *o;

		rte_spinlock_lock(&a->lock);
		if (get_locked(p, x, k, &o, 1) == 1) {
			a->alloc_nolc[k]++;
			rte_spinlock_unlock(&a->lock);
			return o;
		}
		rte_spinlock_unlock(&a->lock);
	}
	__atomic_fetch_add(&p->exhausted, 1, __ATOMIC_RELAXED);
	return NULL;
}

void *moq_pool_alloc(struct moq_pool *p, size_t size, size_t align)
{
	unsigned lcore = rte_lcore_id();
	struct lcache *lc;
	int k;

	if (align > 8 || (k = class_of(size)) < 0)
		return fallback_alloc(p, size ? size : 1, align);
	if (lcore >= RTE_MAX_LCORE || (lc = p->lc[lcore]) == NULL)
		return alloc_locked_one(p, 0, (unsigned)k);
	if (unlikely(lc->n[k] == 0)) {
		struct arena *a = &p->arena[p->home[lcore]];
		unsigned got;

		rte_spinlock_lock(&a->lock);
		got = get_locked(p, p->home[lcore], (unsigned)k, lc->obj[k], class_depth[k] / 2);
		rte_spinlock_unlock(&a->lock);
		if (got == 0) {
			/* the home arena is full: one object from another */
			void *o = p->narenas > 1
			                  ? alloc_locked_one(p, (p->home[lcore] + 1) % p->narenas,
			                                     (unsigned)k)
			                  : NULL;

			if (p->narenas == 1)
				__atomic_fetch_add(&p->exhausted, 1, __ATOMIC_RELAXED);
			return o;
		}
		lc->n[k] = got;
	}
	count(&lc->allocs[k]);
	return lc->obj[k][--lc->n[k]];
}

void *moq_pool_alloc_on(struct moq_pool *p, unsigned arena, size_t size)
{
	int k = class_of(size);

	if (k < 0 || arena >= p->narenas)
		return NULL;
	return alloc_locked_one(p, arena, (unsigned)k);
}

void moq_pool_put(struct moq_pool *p, void *obj)
{
	unsigned lcore = rte_lcore_id();
	struct chunk *c;
	struct slab *s;
	struct lcache *lc;
	unsigned k;

	if (obj == NULL)
		return;
	c = chunk_find(p, obj);
	if (c == NULL) {
		size_t size = 0;

		if (rte_malloc_validate(obj, &size) == 0)
			__atomic_fetch_sub(&p->fallback_bytes, size, __ATOMIC_RELAXED);
		rte_free(obj);
		return;
	}
	s = slab_of(c, obj);
	k = s->cls; /* stable: the slab has an object out, ours */
	if (lcore >= RTE_MAX_LCORE || (lc = p->lc[lcore]) == NULL || s->arena != p->home[lcore]) {
		struct arena *a = &p->arena[s->arena];

		if (lcore < RTE_MAX_LCORE && p->lc[lcore] != NULL)
			__atomic_fetch_add(&p->remote_frees, 1, __ATOMIC_RELAXED);
		rte_spinlock_lock(&a->lock);
		a->free_nolc[k]++;
		put_locked(a, s, obj);
		rte_spinlock_unlock(&a->lock);
		return;
	}
	if (unlikely(lc->n[k] == class_depth[k])) {
		unsigned half = class_depth[k] / 2;

		put_batch(p, s->arena, &lc->obj[k][lc->n[k] - half], half);
		lc->n[k] -= half;
	}
	count(&lc->frees[k]);
	lc->obj[k][lc->n[k]++] = obj;
}

void moq_pool_flush(struct moq_pool *p)
{
	unsigned lcore = rte_lcore_id();
	struct lcache *lc;

	if (lcore >= RTE_MAX_LCORE || (lc = p->lc[lcore]) == NULL)
		return;
	for (unsigned k = 0; k < MOQ_POOL_CLASSES; k++) {
		put_batch(p, p->home[lcore], lc->obj[k], lc->n[k]);
		lc->n[k] = 0;
	}
}

static void *cache_alloc(void *ctx, size_t size, size_t align)
{
	return moq_pool_alloc(ctx, size, align);
}

static void cache_free(void *ctx, void *obj)
{
	moq_pool_put(ctx, obj);
}

struct moq_cache_alloc moq_pool_cache_alloc(struct moq_pool *p)
{
	struct moq_cache_alloc a = {cache_alloc, cache_free, p};

	return a;
}

/* --- stats --------------------------------------------------------------- */

void moq_pool_stats(struct moq_pool *p, struct moq_pool_stats *st)
{
	int64_t live[MOQ_POOL_CLASSES] = {0};

	memset(st, 0, sizeof(*st));
	st->limit = p->limit_chunks * MOQ_POOL_CHUNK;
	rte_spinlock_lock(&p->tlock);
	st->reserved = p->nchunks * MOQ_POOL_CHUNK;
	rte_spinlock_unlock(&p->tlock);
	for (unsigned ai = 0; ai < p->narenas; ai++) {
		struct arena *a = &p->arena[ai];

		rte_spinlock_lock(&a->lock);
		for (unsigned k = 0; k < MOQ_POOL_CLASSES; k++) {
			st->slabs[k] += a->slabs[k];
			live[k] += (int64_t)(a->alloc_nolc[k] - a->free_nolc[k]);
			st->allocs += a->alloc_nolc[k];
		}
		rte_spinlock_unlock(&a->lock);
	}
	for (unsigned i = 0; i < RTE_MAX_LCORE; i++) {
		const struct lcache *lc = p->lc[i];

		if (lc == NULL)
			continue;
		for (unsigned k = 0; k < MOQ_POOL_CLASSES; k++) {
			uint64_t na = __atomic_load_n(&lc->allocs[k], __ATOMIC_RELAXED);

			live[k] += (int64_t)(na - __atomic_load_n(&lc->frees[k], __ATOMIC_RELAXED));
			st->allocs += na;
			st->cached += __atomic_load_n(&lc->n[k], __ATOMIC_RELAXED);
		}
	}
	for (unsigned k = 0; k < MOQ_POOL_CLASSES; k++) {
		st->live[k] = live[k] > 0 ? (uint64_t)live[k] : 0;
		st->objs += st->live[k];
		st->obj_bytes += st->live[k] * class_size[k];
		st->slab_bytes += st->slabs[k] * MOQ_POOL_SLAB;
	}
	st->exhausted = __atomic_load_n(&p->exhausted, __ATOMIC_RELAXED);
	st->fallback_allocs = __atomic_load_n(&p->fallback_allocs, __ATOMIC_RELAXED);
	st->fallback_bytes = __atomic_load_n(&p->fallback_bytes, __ATOMIC_RELAXED);
	st->remote_frees = __atomic_load_n(&p->remote_frees, __ATOMIC_RELAXED);
}
