/* SPDX-License-Identifier: MIT */
/*
 * counting.c: a thread-safe heap allocator for tests and benchmarks that
 * counts the bytes and blocks it hands out (what the cache really holds).
 */
#include "cache.h"

#include <stdlib.h>
#include <string.h>

/* Every block carries a 16-byte header (or @align bytes when larger) in
 * front: its size and the header length. Not counted as held. */
#define HDR_MIN 16u

static void *counting_alloc(void *ctx, size_t size, size_t align)
{
	struct moq_cache_counting *c = ctx;
	uint64_t n = __atomic_add_fetch(&c->attempts, 1, __ATOMIC_RELAXED);
	size_t hdr = align > HDR_MIN ? align : HDR_MIN;
	uint8_t *raw;

	if (c->fail_after != 0 && n >= c->fail_after)
		return NULL;
	if (hdr > HDR_MIN)
		raw = aligned_alloc(hdr, (hdr + size + hdr - 1) / hdr * hdr);
	else
		raw = malloc(hdr + size);
	if (raw == NULL)
		return NULL;
	memcpy(raw + hdr - 16, &hdr, sizeof(hdr));
	memcpy(raw + hdr - 8, &size, sizeof(size));
	__atomic_add_fetch(&c->live_bytes, (int64_t)size, __ATOMIC_RELAXED);
	__atomic_add_fetch(&c->live_blocks, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&c->total_allocs, 1, __ATOMIC_RELAXED);
	return raw + hdr;
}

static void counting_free(void *ctx, void *p)
{
	struct moq_cache_counting *c = ctx;
	uint8_t *u = p;
	size_t hdr, size;

	if (p == NULL)
		return;
	memcpy(&size, u - 8, sizeof(size));
	memcpy(&hdr, u - 16, sizeof(hdr));
	__atomic_sub_fetch(&c->live_bytes, (int64_t)size, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&c->live_blocks, 1, __ATOMIC_RELAXED);
	free(u - hdr);
}

void moq_cache_counting_init(struct moq_cache_counting *c)
{
	memset(c, 0, sizeof(*c));
}

struct moq_cache_alloc moq_cache_counting_alloc(struct moq_cache_counting *c)
{
	struct moq_cache_alloc a = {counting_alloc, counting_free, c};

	return a;
}

struct moq_cache_counting_stats moq_cache_counting_stats(const struct moq_cache_counting *c)
{
	struct moq_cache_counting_stats s;

	s.live_bytes = __atomic_load_n(&c->live_bytes, __ATOMIC_RELAXED);
	s.live_blocks = __atomic_load_n(&c->live_blocks, __ATOMIC_RELAXED);
	s.total_allocs = __atomic_load_n(&c->total_allocs, __ATOMIC_RELAXED);
	return s;
}
