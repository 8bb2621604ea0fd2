/* SPDX-License-Identifier: MIT */
/*
 * test_pool.c: the relay's cache pools (dpdk_app/pool.h) under EAL, on three
 * lcores: every class, alloc on one lcore and free on another (one after the
 * other, and at the same time through a ring), exhaustion at the limit and
 * slabs shared by the classes, rte_malloc above the largest class, and the
 * cache (cache.h) on the pool: a write at the limit fails with
 * MOQ_ERR_NOMEM and the cache goes on once memory is free again.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include "cache.h"
#include "pool.h"

const char *moq_suite_lcores(void);
Suite *pool_suite(void);

const char *moq_suite_lcores(void)
{
	return "0@0,1@1,2@0";
}

static struct moq_pool *mkpool(uint64_t limit)
{
	int sock = (int)rte_socket_id();
	struct moq_pool *p = moq_pool_create("test", limit, &sock, 1);

	ck_assert_ptr_nonnull(p);
	return p;
}

static struct moq_pool_stats stats(struct moq_pool *p)
{
	struct moq_pool_stats st;

	moq_pool_stats(p, &st);
	return st;
}

/* run @fn(@arg) on lcore @lc and wait for it */
static int on_lcore(unsigned lc, lcore_function_t *fn, void *arg)
{
	ck_assert_int_eq(rte_eal_remote_launch(fn, arg, lc), 0);
	return rte_eal_wait_lcore(lc);
}

START_TEST(every_class)
{
	struct moq_pool *p = mkpool(64ull << 20);
	uint32_t prev = 0;

	for (unsigned k = 0; k < MOQ_POOL_CLASSES; k++) {
		uint32_t sz = moq_pool_class_size(k);
		uint8_t *o[3];

		ck_assert_uint_gt(sz, prev);
		ck_assert_uint_eq(sz % 8, 0);
		/* every size in (prev, sz] is served by class k */
		ck_assert_int_eq(moq_pool_class_of(sz), (int)k);
		ck_assert_int_eq(moq_pool_class_of(prev + 1), (int)k);
		/* rounding wastes at most 1/8 above 64 B (bigger steps above 4 KiB) */
		if (prev >= 64 && sz <= 4096)
			ck_assert_uint_le(sz - prev, prev / 8);
		for (int i = 0; i < 3; i++) {
			o[i] = moq_pool_alloc(p, sz, 8);
			ck_assert_ptr_nonnull(o[i]);
			ck_assert_uint_eq((uintptr_t)o[i] % 8, 0);
			memset(o[i], 0xa0 + i, sz);
		}
		for (int i = 0; i < 3; i++) {
			ck_assert_uint_eq(o[i][0], 0xa0 + i);
			ck_assert_uint_eq(o[i][sz - 1], 0xa0 + i);
		}
		ck_assert_uint_eq(stats(p).live[k], 3);
		/* in ceil(3 / objects per slab) slabs */
		ck_assert_uint_eq(stats(p).slabs[k],
		                  (3 + MOQ_POOL_SLAB / sz - 1) / (MOQ_POOL_SLAB / sz));
		for (int i = 0; i < 3; i++)
			moq_pool_put(p, o[i]);
		ck_assert_uint_eq(stats(p).live[k], 0);
		prev = sz;
	}
	ck_assert_uint_eq(prev, MOQ_POOL_MAX_CLASS);
	ck_assert_int_eq(moq_pool_class_of(MOQ_POOL_MAX_CLASS + 1), -1);
	ck_assert_uint_eq(stats(p).objs, 0);
	ck_assert_uint_eq(stats(p).fallback_allocs, 0);
	ck_assert_uint_eq(stats(p).exhausted, 0);
	moq_pool_flush(p);
	ck_assert_uint_eq(stats(p).slab_bytes, 0); /* every slab back in its arena */
	ck_assert_uint_eq(stats(p).cached, 0);
	moq_pool_free(p);
}
END_TEST

/* --- one lcore allocates, another frees ----------------------------------- */

#define NOBJ 5000u

struct xfer {
	struct moq_pool *p;
	void **obj;
	uint32_t *size;
	unsigned n;
	unsigned bad;
	struct rte_ring *ring;
};

static uint32_t obj_size(unsigned i)
{
	/* a mix: small frames, group-sized, blocks */
	static const uint32_t s[] = {17, 160, 200, 300, 1100, 1500, 2048, 4096, 9000, 65536};

	return s[i % RTE_DIM(s)] - (i / 10) % 7;
}

static void stamp(uint8_t *o, uint32_t size, unsigned i)
{
	memcpy(o, &i, sizeof(i));
	o[size - 1] = (uint8_t)i;
}

static int stamped(const uint8_t *o, uint32_t size, unsigned i)
{
	unsigned v;

	memcpy(&v, o, sizeof(v));
	return v == i && o[size - 1] == (uint8_t)i;
}

static int alloc_all(void *arg)
{
	struct xfer *x = arg;

	for (unsigned i = 0; i < x->n; i++) {
		x->size[i] = obj_size(i);
		x->obj[i] = moq_pool_alloc(x->p, x->size[i], 8);
		if (x->obj[i] == NULL) {
			x->bad++;
			continue;
		}
		stamp(x->obj[i], x->size[i], i);
	}
	return 0;
}

static int free_all(void *arg)
{
	struct xfer *x = arg;

	for (unsigned i = 0; i < x->n; i++) {
		if (!stamped(x->obj[i], x->size[i], i))
			x->bad++;
		moq_pool_put(x->p, x->obj[i]);
	}
	return 0;
}

static int flush(void *arg)
{
	moq_pool_flush(((struct xfer *)arg)->p);
	return 0;
}

START_TEST(remote_frees)
{
	struct xfer x = {0};
	struct moq_pool_stats st;
	uint64_t bytes = 0;

	x.p = mkpool(512ull << 20);
	x.n = NOBJ;
	x.obj = calloc(NOBJ, sizeof(*x.obj));
	x.size = calloc(NOBJ, sizeof(*x.size));
	/* twice: the second round reuses what the first freed remotely */
	for (int round = 0; round < 2; round++) {
		ck_assert_int_eq(on_lcore(1, alloc_all, &x), 0);
		ck_assert_uint_eq(x.bad, 0);
		for (unsigned i = 0; i < NOBJ; i++)
			bytes += round == 0 ? x.size[i] : 0;
		st = stats(x.p);
		ck_assert_uint_eq(st.objs, NOBJ);
		ck_assert_uint_ge(st.obj_bytes, bytes);
		ck_assert_uint_le(st.obj_bytes, bytes + bytes / 8);
		ck_assert_int_eq(on_lcore(2, free_all, &x), 0);
		ck_assert_uint_eq(x.bad, 0); /* nobody else wrote into them */
		st = stats(x.p);
		ck_assert_uint_eq(st.objs, 0);
		ck_assert_uint_gt(st.cached, 0); /* lcore 2 keeps a cache of each class */
		ck_assert_uint_le(st.cached, MOQ_POOL_CLASSES * 32u);
	}
	ck_assert_uint_eq(st.remote_frees, 0); /* one socket: all in the home arena */
	/* the batches went back to their slabs: once the caches are flushed too,
	 * no slab is left serving a class */
	on_lcore(1, flush, &x);
	on_lcore(2, flush, &x);
	st = stats(x.p);
	ck_assert_uint_eq(st.cached, 0);
	ck_assert_uint_eq(st.slab_bytes, 0);
	ck_assert_uint_eq(st.exhausted, 0);
	moq_pool_free(x.p);
	free(x.obj);
	free(x.size);
}
END_TEST

/* at the same time: lcore 1 allocates and sends through a ring, lcore 2
 * checks and frees */
#define NSTREAM 300000u

static int producer(void *arg)
{
	struct xfer *x = arg;

	for (unsigned i = 0; i < NSTREAM; i++) {
		uint32_t size = obj_size(i);
		uint8_t *o = moq_pool_alloc(x->p, size, 8);

		if (o == NULL) {
			__atomic_fetch_add(&x->bad, 1, __ATOMIC_RELAXED);
			o = NULL;
		} else {
			stamp(o, size, i);
		}
		while (rte_ring_enqueue(x->ring, o) != 0)
			rte_pause();
	}
	return 0;
}

static int consumer(void *arg)
{
	struct xfer *x = arg;

	for (unsigned i = 0; i < NSTREAM; i++) {
		void *o;

		while (rte_ring_dequeue(x->ring, &o) != 0)
			rte_pause();
		if (o == NULL || !stamped(o, obj_size(i), i))
			__atomic_fetch_add(&x->bad, 1, __ATOMIC_RELAXED);
		/* also churn a local object: alloc and free on this lcore */
		moq_pool_put(x->p, moq_pool_alloc(x->p, 1 + i % 3000, 8));
		moq_pool_put(x->p, o);
	}
	moq_pool_flush(x->p);
	return 0;
}

START_TEST(concurrent_remote_frees)
{
	struct xfer x = {0};
	struct moq_pool_stats st;

	x.p = mkpool(64ull << 20); /* the ring holds at most 1024 in flight */
	x.ring = rte_ring_create("pool_test", 1024, (int)rte_socket_id(),
	                         RING_F_SP_ENQ | RING_F_SC_DEQ);
	ck_assert_ptr_nonnull(x.ring);
	ck_assert_int_eq(rte_eal_remote_launch(consumer, &x, 2), 0);
	ck_assert_int_eq(rte_eal_remote_launch(producer, &x, 1), 0);
	rte_eal_wait_lcore(1);
	rte_eal_wait_lcore(2);
	ck_assert_uint_eq(x.bad, 0);
	on_lcore(1, flush, &x);
	st = stats(x.p);
	ck_assert_uint_eq(st.objs, 0);
	ck_assert_uint_eq(st.cached, 0);
	ck_assert_uint_eq(st.slab_bytes, 0);
	ck_assert_uint_eq(st.exhausted, 0);
	ck_assert_uint_le(st.reserved, 64ull << 20);
	rte_ring_free(x.ring);
	moq_pool_free(x.p);
}
END_TEST

START_TEST(exhaustion_and_sharing)
{
	struct moq_pool *p = mkpool(MOQ_POOL_CHUNK); /* 32 slabs of 64 KiB */
	unsigned per = MOQ_POOL_CHUNK / MOQ_POOL_SLAB;
	void *big[64], *small[4096];
	unsigned n = 0, ns = 0;

	while (n < 64 && (big[n] = moq_pool_alloc(p, MOQ_POOL_SLAB, 8)) != NULL)
		n++;
	ck_assert_uint_eq(n, per); /* the limit, exactly */
	ck_assert_uint_eq(stats(p).exhausted, 1);
	ck_assert_uint_eq(stats(p).reserved, MOQ_POOL_CHUNK);
	ck_assert_ptr_null(moq_pool_alloc(p, 100, 8)); /* no slab left for any class */
	ck_assert_uint_eq(stats(p).exhausted, 2);
	/* one freed: one fits again */
	moq_pool_put(p, big[--n]);
	moq_pool_flush(p);
	big[n] = moq_pool_alloc(p, MOQ_POOL_SLAB, 8);
	ck_assert_ptr_nonnull(big[n++]);
	/* all freed: the slabs serve another class */
	while (n > 0)
		moq_pool_put(p, big[--n]);
	moq_pool_flush(p);
	ck_assert_uint_eq(stats(p).slab_bytes, 0);
	while (ns < 4096 && (small[ns] = moq_pool_alloc(p, 1000, 8)) != NULL)
		ns++;
	/* 1024-byte class: 64 per slab, 32 slabs */
	ck_assert_uint_eq(moq_pool_class_size((unsigned)moq_pool_class_of(1000)), 1024);
	ck_assert_uint_eq(ns, per * 64);
	ck_assert_uint_eq(stats(p).exhausted, 3);
	ck_assert_uint_eq(stats(p).reserved, MOQ_POOL_CHUNK); /* never above the limit */
	/* above the largest class: rte_malloc, whatever the limit */
	{
		void *f = moq_pool_alloc(p, 100000, 8), *a = moq_pool_alloc(p, 64, 64);

		ck_assert_ptr_nonnull(f);
		ck_assert_ptr_nonnull(a);
		ck_assert_uint_eq((uintptr_t)a % 64, 0);
		memset(f, 1, 100000);
		ck_assert_uint_eq(stats(p).fallback_allocs, 2);
		ck_assert_uint_ge(stats(p).fallback_bytes, 100064);
		moq_pool_put(p, f);
		moq_pool_put(p, a);
		ck_assert_uint_eq(stats(p).fallback_bytes, 0);
	}
	while (ns > 0)
		moq_pool_put(p, small[--ns]);
	moq_pool_flush(p);
	ck_assert_uint_eq(stats(p).objs, 0);
	ck_assert_uint_eq(stats(p).slab_bytes, 0);
	moq_pool_free(p);
}
END_TEST

START_TEST(bad_arguments)
{
	int sock = (int)rte_socket_id();

	ck_assert_ptr_null(moq_pool_create("t", 1 << 20, &sock, 0));
	ck_assert_int_eq(rte_errno, EINVAL);
	ck_assert_ptr_null(moq_pool_create("t", 0, &sock, 1));
	moq_pool_put(NULL, NULL);
	moq_pool_free(NULL);
}
END_TEST

/* --- the cache on the pool ------------------------------------------------- */

START_TEST(cache_on_pool)
{
	struct moq_pool *p = mkpool(2 * MOQ_POOL_CHUNK);
	struct moq_cache_cfg cfg = {0};
	struct moq_cache *c;
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	static uint8_t frame[60000];
	uint64_t seq = 0;
	int rc = 0, written = 0;

	cfg.alloc = moq_pool_cache_alloc(p);
	c = moq_cache_create(&cfg); /* no budget: only the pool limits it */
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(moq_cache_track_create(c, "b", 1, "v", 1, NULL, &t), 0);
	/* groups of one 60 KB frame until the pool is exhausted */
	while (seq < 200) {
		ck_assert_int_eq(moq_cache_group_open(t, seq++, 0, &g), 0);
		rc = moq_cache_write_frame(g, 0, frame, sizeof(frame));
		moq_cache_group_finish(g);
		moq_cache_group_unref(g);
		if (rc != 0)
			break;
		written++;
	}
	ck_assert_int_eq(rc, MOQ_ERR_NOMEM); /* refused like any allocation failure */
	ck_assert_uint_gt(stats(p).exhausted, 0);
	ck_assert_int_gt(written, 40);
	/* evict down: the memory comes back and writes succeed again */
	moq_cache_budget_set(c, 200000);
	ck_assert_int_eq(moq_cache_group_open(t, seq++, 0, &g), 0);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, frame, sizeof(frame)), 0);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, frame, 300), 0);
	moq_cache_group_finish(g);
	moq_cache_group_unref(g);
	moq_cache_track_drop(t);
	moq_cache_track_unref(t);
	moq_cache_destroy(c);
	moq_pool_flush(p);
	ck_assert_uint_eq(stats(p).objs, 0);
	ck_assert_uint_eq(stats(p).fallback_bytes, 0);
	ck_assert_uint_eq(stats(p).slab_bytes, 0);
	moq_pool_free(p);
}
END_TEST

Suite *pool_suite(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("pool");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, every_class);
	tcase_add_test(tc, remote_frees);
	tcase_add_test(tc, concurrent_remote_frees);
	tcase_add_test(tc, exhaustion_and_sharing);
	tcase_add_test(tc, bad_arguments);
	tcase_add_test(tc, cache_on_pool);
	suite_add_tcase(s, tc);
	return s;
}
