/* SPDX-License-Identifier: MIT */
/*
 * pool.h: the relay's cache memory, per-lcore size-class pools on hugepages
 * (issue 13: the cache allocator took DPDK's heap lock per small frame).
 *
 * Memory comes in 2 MiB chunks (rte_malloc_socket, reserved as the pool
 * grows, up to a limit fixed at creation) cut into 64 KiB slabs; a slab
 * serves one size class at a time (MOQ_POOL_CLASSES classes from 16 B to
 * 64 KiB, 1/8 of an octave apart up to 4 KiB) and goes back to its chunk's
 * arena when its last object is freed, so the classes share the memory.
 * Objects carry no header: a free finds its slab from the address (a table
 * of chunks). Each NUMA socket given at creation has an arena; an lcore
 * allocates from its socket's arena (another's when that one is full).
 *
 * Every EAL lcore has a cache of objects per class (at most 64 KiB of
 * memory per class): alloc and free are a pop and a push there. A cache
 * that runs empty takes a batch from its arena's slabs, one that runs full
 * returns a batch, each under the arena's spinlock: an object freed on an
 * lcore other than the one that allocated it (a group freed by the fanout
 * worker that dropped the last reference) goes back in such a batch.
 * Threads that are not EAL lcores take the lock per object.
 *
 * Sizes above 64 KiB, and alignments above 8, go to rte_malloc_socket
 * (counted as fallback). An allocation the pool cannot serve because the
 * limit is reached returns NULL and counts as exhausted: the cache reports
 * MOQ_ERR_NOMEM, as it did when rte_malloc failed.
 */
#ifndef MOQ_DPDK_APP_POOL_H
#define MOQ_DPDK_APP_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"

#define MOQ_POOL_SLAB       (64u * 1024u)        /* slab size: the largest class */
#define MOQ_POOL_CHUNK      (2u * 1024u * 1024u) /* reserved per rte_malloc call */
#define MOQ_POOL_MAX_CLASS  MOQ_POOL_SLAB
#define MOQ_POOL_CLASSES    64u
#define MOQ_POOL_MAX_ARENAS 4u

struct moq_pool;

/* moq_pool_class_size: the size of class @k (< MOQ_POOL_CLASSES). */
uint32_t moq_pool_class_size(unsigned k);
/* moq_pool_class_of: the class that serves @size bytes, or -1 (above
 * MOQ_POOL_MAX_CLASS). */
int moq_pool_class_of(size_t size);

/*
 * moq_pool_create: a pool that reserves at most @limit bytes (rounded up to
 * MOQ_POOL_CHUNK) spread over arenas on NUMA sockets @sockets[0..@nsockets)
 * (1..MOQ_POOL_MAX_ARENAS; duplicates allowed: each is an arena), from the
 * calling process's EAL. Nothing is reserved yet. Returns NULL (rte_errno
 * EINVAL for bad arguments, ENOMEM) on failure.
 */
struct moq_pool *moq_pool_create(const char *name, uint64_t limit, const int *sockets,
                                 unsigned nsockets);

/* moq_pool_free: release all of @p's memory (every object must be freed, or
 * at least never used again). NULL is a no-op. */
void moq_pool_free(struct moq_pool *p);

/* moq_pool_alloc: @size bytes aligned to @align (a power of two <= 64), or
 * NULL (exhausted). Any thread. */
void *moq_pool_alloc(struct moq_pool *p, size_t size, size_t align);

/* moq_pool_put: free @obj (from moq_pool_alloc of @p; NULL is a no-op). Any
 * thread. */
void moq_pool_put(struct moq_pool *p, void *obj);

/* moq_pool_alloc_on: moq_pool_alloc as if on an lcore of arena @arena, for
 * tests and benchmarks that drive several arenas from one lcore. */
void *moq_pool_alloc_on(struct moq_pool *p, unsigned arena, size_t size);

/* moq_pool_cache_alloc: @p as the cache's allocator (cache.h). */
struct moq_cache_alloc moq_pool_cache_alloc(struct moq_pool *p);

/* moq_pool_flush: return the calling lcore's cached objects to the arenas
 * (a worker that stops; tests). */
void moq_pool_flush(struct moq_pool *p);

struct moq_pool_stats {
	uint64_t limit;                   /* bytes the pool may reserve */
	uint64_t reserved;                /* bytes reserved (chunks) */
	uint64_t slab_bytes;              /* bytes of slabs serving a class */
	uint64_t obj_bytes;               /* class bytes of objects allocated (not cached) */
	uint64_t objs;                    /* objects allocated (not cached) */
	uint64_t allocs;                  /* allocations served by the classes, ever */
	uint64_t cached;                  /* objects in the lcores' caches */
	uint64_t exhausted;               /* allocations refused: the limit was reached */
	uint64_t fallback_allocs;         /* allocations above the largest class */
	uint64_t fallback_bytes;          /* bytes of those held now (requested sizes) */
	uint64_t remote_frees;            /* objects freed into another socket's arena */
	uint64_t slabs[MOQ_POOL_CLASSES]; /* slabs per class */
	uint64_t live[MOQ_POOL_CLASSES];  /* objects allocated per class */
};

/* moq_pool_stats: a snapshot (takes each arena's lock briefly; the lcores'
 * counters are read without stopping them). */
void moq_pool_stats(struct moq_pool *p, struct moq_pool_stats *st);

#endif /* MOQ_DPDK_APP_POOL_H */
