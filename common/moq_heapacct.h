/* SPDX-License-Identifier: MIT */
/*
 * moq_heapacct.h: the relay's libc heap by object kind (issue 28): bytes
 * (malloc_usable_size, so slack is counted) and objects per kind, summed
 * over threads; what mallinfo2 shows in use and no kind accounts for is
 * the rest (DPDK, libc, start-up tables). Each thread counts into its own
 * cache line (no shared writes on the data path); readers sum the slots.
 */
#ifndef MOQ_COMMON_HEAPACCT_H
#define MOQ_COMMON_HEAPACCT_H

#include <stddef.h>
#include <stdint.h>

enum moq_heap_kind {
	MOQ_HEAP_QUIC_CONN,    /* struct moq_quic_conn and its close buffer */
	MOQ_HEAP_NGTCP2,       /* blocks ngtcp2 holds (quic/alloc.c, in use) */
	MOQ_HEAP_NGTCP2_SPARE, /* quic/alloc.c's free lists */
	MOQ_HEAP_TLS,          /* wolfSSL's allocations (wolfSSL_SetAllocators) */
	MOQ_HEAP_QUIC_STREAM,  /* quic/stream.c records and entry arrays in use */
	MOQ_HEAP_QUIC_SPARE,   /* quic/stream.c spare records */
	MOQ_HEAP_QUIC_SMAP,    /* per-connection stream maps */
	MOQ_HEAP_SESSION,      /* struct moq_session */
	MOQ_HEAP_MOQ_STREAM,   /* struct mstream (in use and per-session spares) */
	MOQ_HEAP_GOUT,         /* fanout group streams: struct gout */
	MOQ_HEAP_TXCHUNK,      /* moq send-queue chunks (txbuf) */
	MOQ_HEAP_MOQ_SMAP,     /* per-session stream-id maps */
	MOQ_HEAP_SUB,          /* subscriptions (struct dsub) */
	MOQ_HEAP_HUB_MSG,      /* cross-worker hub messages */
	MOQ_HEAP_CTRL_BUF,     /* control streams' receive buffers */
	MOQ_HEAP_MOQ_SPARE,    /* sessions' spare send chunks, stream, group-stream records */
	MOQ_HEAP_KINDS
};

/* The name of @k as /metrics and telemetry print it ("quic_conn", ...). */
const char *moq_heap_kind_name(enum moq_heap_kind k);

/* Count @p (from malloc/calloc/realloc; NULL: nothing) as one object of
 * kind @k: malloc_usable_size(@p) bytes. */
void moq_heap_count(enum moq_heap_kind k, void *p);

/* Uncount @p (before it is freed or handed to realloc). */
void moq_heap_uncount(enum moq_heap_kind k, void *p);

/* Add @bytes and @objs (either may be negative) to kind @k: for pools that
 * move objects between kinds without malloc (spare lists). */
void moq_heap_add(enum moq_heap_kind k, int64_t bytes, int64_t objs);

/* @p (counted as kind @from) is now kind @to: a pool's take or put. */
void moq_heap_move(enum moq_heap_kind from, enum moq_heap_kind to, void *p);
/* @bytes of one object move from kind @from to kind @to (a pooled record
 * taken or given back): one call, one slot lookup (moq_heap_move was two
 * moq_heap_add, 67 instructions a move; six moves a group stream) */
void moq_heap_move_bytes(enum moq_heap_kind from, enum moq_heap_kind to, int64_t bytes);

/* malloc/calloc/free/realloc that count: the same contracts as libc's. */
void *moq_heap_malloc(enum moq_heap_kind k, size_t size);
void *moq_heap_calloc(enum moq_heap_kind k, size_t n, size_t size);
/* calloc(1, @size) on a cache-line boundary (64 bytes): for the records the
 * fanout reads by their first lines (a session, a subscription, a stream).
 * malloc's are 16 bytes into a line, so a record's first 64 bytes spanned
 * two. moq_heap_free frees it. */
void *moq_heap_calloc_lines(enum moq_heap_kind k, size_t size);
void *moq_heap_realloc(enum moq_heap_kind k, void *p, size_t size);
void moq_heap_free(enum moq_heap_kind k, void *p);

struct moq_heap_kind_stat {
	int64_t bytes;
	int64_t objs;
};

/* Sum every thread's counters into @out[MOQ_HEAP_KINDS] (racy reads of
 * counters other threads write: each is exact on its own, the sum is a
 * snapshot within a few operations). */
void moq_heap_read(struct moq_heap_kind_stat out[MOQ_HEAP_KINDS]);

#endif /* MOQ_COMMON_HEAPACCT_H */
