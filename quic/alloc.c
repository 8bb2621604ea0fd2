/* SPDX-License-Identifier: MIT */
/*
 * alloc.c: the size-class cache that ngtcp2 allocates from (one per
 * endpoint): no malloc per packet once warm.
 */
#include "quic_int.h"

#include <stdlib.h>
#include <string.h>

#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/memory.h>

#include "moq_heapacct.h"

/* ------------------------------------------------------------ allocator */
/* ngtcp2 allocates small objects while packets flow (frame chains, skip-list
 * nodes, ACK ranges). Each endpoint hands it a size-class cache so that,
 * once warm, the data path does not call malloc (house rule: no malloc per
 * packet). Blocks carry a 16-byte header with their class; larger blocks go
 * to malloc directly. Each class keeps at most MEM_CACHE_MAX free blocks. */
#define MEM_HDR       16
#define MEM_CLASSES   7 /* 64 B .. 4 KiB */
#define MEM_MIN_SHIFT 6
#define MEM_CACHE_MAX 4096
#define MEM_BIG       0xff

struct mem_free {
	struct mem_free *next;
};

/* Spares are trimmed every MEM_TRIM_NS (mem_trim): a period long against
 * the waves of streams a slow subscriber's acks close, short against an
 * operator watching memory fall after a burst. */
#define MEM_TRIM_NS 2000000000ull

struct quic_mem {
	struct mem_free *head[MEM_CLASSES];
	uint32_t n[MEM_CLASSES];
	uint32_t low[MEM_CLASSES]; /* fewest free blocks since the last trim */
	uint64_t bytes;            /* in the free lists */
};

static int mem_class(size_t size)
{
	int c = 0;

	size += MEM_HDR;
	while (c < MEM_CLASSES && ((size_t)1 << (c + MEM_MIN_SHIFT)) < size)
		c++;
	return c < MEM_CLASSES ? c : MEM_BIG;
}

static void *mem_malloc(size_t size, void *user_data)
{
	struct quic_mem *m = user_data;
	int c = mem_class(size);
	uint8_t *p;

	if (c != MEM_BIG && m->head[c] != NULL) {
		p = (uint8_t *)m->head[c];
		m->head[c] = m->head[c]->next;
		if (--m->n[c] < m->low[c])
			m->low[c] = m->n[c];
		m->bytes -= (size_t)1 << (c + MEM_MIN_SHIFT);
		moq_heap_add(MOQ_HEAP_NGTCP2_SPARE, -((int64_t)1 << (c + MEM_MIN_SHIFT)), -1);
		moq_heap_add(MOQ_HEAP_NGTCP2, (int64_t)1 << (c + MEM_MIN_SHIFT), 1);
		return p;
	}
	p = malloc(c == MEM_BIG ? size + MEM_HDR : (size_t)1 << (c + MEM_MIN_SHIFT));
	if (p == NULL)
		return NULL;
	if (c == MEM_BIG)
		moq_heap_count(MOQ_HEAP_NGTCP2, p);
	else
		moq_heap_add(MOQ_HEAP_NGTCP2, (int64_t)1 << (c + MEM_MIN_SHIFT), 1);
	p[0] = (uint8_t)c;
	return p + MEM_HDR;
}

static void mem_free(void *ptr, void *user_data)
{
	struct quic_mem *m = user_data;
	uint8_t *p;
	int c;

	if (ptr == NULL)
		return;
	p = (uint8_t *)ptr - MEM_HDR;
	c = p[0];
	if (c == MEM_BIG) {
		moq_heap_free(MOQ_HEAP_NGTCP2, p);
		return;
	}
	moq_heap_add(MOQ_HEAP_NGTCP2, -((int64_t)1 << (c + MEM_MIN_SHIFT)), -1);
	if (m->n[c] >= MEM_CACHE_MAX) {
		free(p);
		return;
	}
	moq_heap_add(MOQ_HEAP_NGTCP2_SPARE, (int64_t)1 << (c + MEM_MIN_SHIFT), 1);
	/* the free-list link lives in the payload; the class byte stays */
	((struct mem_free *)ptr)->next = m->head[c];
	m->head[c] = ptr;
	m->n[c]++;
	m->bytes += (size_t)1 << (c + MEM_MIN_SHIFT);
}

static void *mem_calloc(size_t nmemb, size_t size, void *user_data)
{
	void *p;

	if (size != 0 && nmemb > SIZE_MAX / size)
		return NULL;
	p = mem_malloc(nmemb * size, user_data);
	if (p)
		memset(p, 0, nmemb * size);
	return p;
}

static void *mem_realloc(void *ptr, size_t size, void *user_data)
{
	uint8_t *p;
	size_t cap;
	void *np;
	int c;

	if (ptr == NULL)
		return mem_malloc(size, user_data);
	if (size == 0) {
		mem_free(ptr, user_data);
		return NULL;
	}
	p = (uint8_t *)ptr - MEM_HDR;
	c = p[0];
	if (c == MEM_BIG) {
		np = moq_heap_realloc(MOQ_HEAP_NGTCP2, p, size + MEM_HDR);
		return np ? (uint8_t *)np + MEM_HDR : NULL;
	}
	cap = ((size_t)1 << (c + MEM_MIN_SHIFT)) - MEM_HDR;
	if (size <= cap)
		return ptr;
	np = mem_malloc(size, user_data);
	if (np == NULL)
		return NULL;
	memcpy(np, ptr, cap);
	mem_free(ptr, user_data);
	return np;
}

/* wolfSSL's heap, counted (MOQ_HEAP_TLS): plain malloc underneath, so a
 * block wolfSSL allocated before the hook frees through it safely (it is
 * uncounted by its usable size). */
static void *tls_malloc(size_t size)
{
	return moq_heap_malloc(MOQ_HEAP_TLS, size);
}

static void tls_free(void *p)
{
	moq_heap_free(MOQ_HEAP_TLS, p);
}

static void *tls_realloc(void *p, size_t size)
{
	return moq_heap_realloc(MOQ_HEAP_TLS, p, size);
}

static int tls_hooked;

int mem_init(struct moq_quic_endpoint *ep)
{
	if (!__atomic_exchange_n(&tls_hooked, 1, __ATOMIC_ACQ_REL))
		wolfSSL_SetAllocators(tls_malloc, tls_free, tls_realloc);
	ep->mem_cache = calloc(1, sizeof(struct quic_mem));
	if (ep->mem_cache == NULL)
		return MOQ_ERR_NOMEM;
	ep->mem.user_data = ep->mem_cache;
	ep->mem.malloc = mem_malloc;
	ep->mem.free = mem_free;
	ep->mem.calloc = mem_calloc;
	ep->mem.realloc = mem_realloc;
	return 0;
}

void mem_trim(struct moq_quic_endpoint *ep, uint64_t now)
{
	struct quic_mem *m = ep->mem_cache;

	if (m == NULL || now - ep->mem_trimmed < MEM_TRIM_NS)
		return;
	ep->mem_trimmed = now;
	for (int c = 0; c < MEM_CLASSES; c++) {
		for (uint32_t k = m->low[c] / 2; k && m->head[c]; k--) {
			struct mem_free *f = m->head[c];

			m->head[c] = f->next;
			m->n[c]--;
			m->bytes -= (size_t)1 << (c + MEM_MIN_SHIFT);
			moq_heap_add(MOQ_HEAP_NGTCP2_SPARE, -((int64_t)1 << (c + MEM_MIN_SHIFT)),
			             -1);
			free((uint8_t *)f - MEM_HDR);
		}
		m->low[c] = m->n[c];
	}
	strm_trim(ep);
}

uint64_t mem_cached_bytes(const struct moq_quic_endpoint *ep)
{
	const struct quic_mem *m = ep->mem_cache;

	return m != NULL ? m->bytes : 0;
}

void mem_fini(struct moq_quic_endpoint *ep)
{
	struct quic_mem *m = ep->mem_cache;
	int c;

	if (m == NULL)
		return;
	for (c = 0; c < MEM_CLASSES; c++) {
		while (m->head[c]) {
			struct mem_free *f = m->head[c];

			m->head[c] = f->next;
			moq_heap_add(MOQ_HEAP_NGTCP2_SPARE, -((int64_t)1 << (c + MEM_MIN_SHIFT)),
			             -1);
			free((uint8_t *)f - MEM_HDR);
		}
	}
	free(m);
	ep->mem_cache = NULL;
}
