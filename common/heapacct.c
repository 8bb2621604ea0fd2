/* SPDX-License-Identifier: MIT */
/*
 * heapacct.c: per-kind heap counters (moq_heapacct.h).
 */
#include "moq_heapacct.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* Threads with a slot of their own; later ones share the last slot with
 * atomic adds (tests that start many threads). */
#define HEAP_SLOTS 64

struct heap_slot {
	int64_t bytes[MOQ_HEAP_KINDS];
	int64_t objs[MOQ_HEAP_KINDS];
} __attribute__((aligned(64)));

static struct heap_slot slots[HEAP_SLOTS];
static uint32_t slots_used;
static __thread struct heap_slot *mine;
static __thread int shared; /* on the last, shared slot */

static const char *const names[MOQ_HEAP_KINDS] = {
        [MOQ_HEAP_QUIC_CONN] = "quic_conn",       [MOQ_HEAP_NGTCP2] = "ngtcp2",
        [MOQ_HEAP_NGTCP2_SPARE] = "ngtcp2_spare", [MOQ_HEAP_TLS] = "tls",
        [MOQ_HEAP_QUIC_STREAM] = "quic_stream",   [MOQ_HEAP_QUIC_SPARE] = "quic_stream_spare",
        [MOQ_HEAP_QUIC_SMAP] = "quic_stream_map", [MOQ_HEAP_SESSION] = "session",
        [MOQ_HEAP_MOQ_STREAM] = "moq_stream",     [MOQ_HEAP_GOUT] = "group_stream",
        [MOQ_HEAP_TXCHUNK] = "send_chunk",        [MOQ_HEAP_MOQ_SMAP] = "moq_stream_map",
        [MOQ_HEAP_SUB] = "subscription",          [MOQ_HEAP_HUB_MSG] = "hub_msg",
        [MOQ_HEAP_CTRL_BUF] = "control_buf",      [MOQ_HEAP_MOQ_SPARE] = "session_spare",
};

const char *moq_heap_kind_name(enum moq_heap_kind k)
{
	return (unsigned)k < MOQ_HEAP_KINDS ? names[k] : "?";
}

static struct heap_slot *slot(void)
{
	if (mine == NULL) {
		uint32_t i = __atomic_fetch_add(&slots_used, 1, __ATOMIC_RELAXED);

		if (i >= HEAP_SLOTS - 1) {
			i = HEAP_SLOTS - 1;
			shared = 1;
		}
		mine = &slots[i];
	}
	return mine;
}

static inline void slot_add(struct heap_slot *s, enum moq_heap_kind k, int64_t bytes, int64_t objs)
{
	/* one writer per slot: a load and a store, atomic for the readers */
	__atomic_store_n(&s->bytes[k], __atomic_load_n(&s->bytes[k], __ATOMIC_RELAXED) + bytes,
	                 __ATOMIC_RELAXED);
	__atomic_store_n(&s->objs[k], __atomic_load_n(&s->objs[k], __ATOMIC_RELAXED) + objs,
	                 __ATOMIC_RELAXED);
}

void moq_heap_add(enum moq_heap_kind k, int64_t bytes, int64_t objs)
{
	struct heap_slot *s = slot();

	if ((unsigned)k >= MOQ_HEAP_KINDS)
		return;
	if (shared) {
		__atomic_fetch_add(&s->bytes[k], bytes, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->objs[k], objs, __ATOMIC_RELAXED);
		return;
	}
	slot_add(s, k, bytes, objs);
}

void moq_heap_count(enum moq_heap_kind k, void *p)
{
	if (p != NULL)
		moq_heap_add(k, (int64_t)malloc_usable_size(p), 1);
}

void moq_heap_uncount(enum moq_heap_kind k, void *p)
{
	if (p != NULL)
		moq_heap_add(k, -(int64_t)malloc_usable_size(p), -1);
}

void moq_heap_move_bytes(enum moq_heap_kind from, enum moq_heap_kind to, int64_t b)
{
	struct heap_slot *s;

	if ((unsigned)from >= MOQ_HEAP_KINDS || (unsigned)to >= MOQ_HEAP_KINDS)
		return;
	s = slot();
	if (shared) {
		moq_heap_add(from, -b, -1);
		moq_heap_add(to, b, 1);
		return;
	}
	slot_add(s, from, -b, -1);
	slot_add(s, to, b, 1);
}

void moq_heap_move(enum moq_heap_kind from, enum moq_heap_kind to, void *p)
{
	moq_heap_move_bytes(from, to, (int64_t)malloc_usable_size(p));
}

void *moq_heap_malloc(enum moq_heap_kind k, size_t size)
{
	void *p = malloc(size);

	moq_heap_count(k, p);
	return p;
}

void *moq_heap_calloc(enum moq_heap_kind k, size_t n, size_t size)
{
	void *p = calloc(n, size);

	moq_heap_count(k, p);
	return p;
}

void *moq_heap_calloc_lines(enum moq_heap_kind k, size_t size)
{
	size_t b = size ? (size + 63) & ~(size_t)63 : 64;
	void *p;

	if (b < size)
		return NULL;
	p = aligned_alloc(64, b);
	if (p != NULL) {
		memset(p, 0, b);
		moq_heap_count(k, p);
	}
	return p;
}

void *moq_heap_realloc(enum moq_heap_kind k, void *p, size_t size)
{
	size_t old = p != NULL ? malloc_usable_size(p) : 0;
	void *np = realloc(p, size);

	if (np == NULL) {
		if (size == 0 && p != NULL) /* glibc: realloc(p, 0) freed p */
			moq_heap_add(k, -(int64_t)old, -1);
		return NULL;
	}
	moq_heap_add(k, (int64_t)malloc_usable_size(np) - (int64_t)old, p == NULL ? 1 : 0);
	return np;
}

void moq_heap_free(enum moq_heap_kind k, void *p)
{
	moq_heap_uncount(k, p);
	free(p);
}

void moq_heap_read(struct moq_heap_kind_stat out[MOQ_HEAP_KINDS])
{
	for (int k = 0; k < MOQ_HEAP_KINDS; k++)
		out[k].bytes = out[k].objs = 0;
	for (int i = 0; i < HEAP_SLOTS; i++)
		for (int k = 0; k < MOQ_HEAP_KINDS; k++) {
			out[k].bytes += __atomic_load_n(&slots[i].bytes[k], __ATOMIC_RELAXED);
			out[k].objs += __atomic_load_n(&slots[i].objs[k], __ATOMIC_RELAXED);
		}
}
