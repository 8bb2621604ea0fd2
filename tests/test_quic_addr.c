/* SPDX-License-Identifier: MIT */
/*
 * test_quic_addr.c: connections counted per source for max_conns_per_addr
 * (quic.h, moq_quic_addr_table; issue 22, item 12): an IPv6 source is its
 * /64 (not its /128), an IPv4-mapped IPv6 address is its IPv4 address, a
 * table shared by several threads (a relay's workers) holds one limit for
 * all of them exactly, a source's slot is freed when its last connection
 * ends (linear probing's deletion keeps every other source findable), and a
 * full table refuses.
 */
#include <arpa/inet.h>
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moq_err.h"
#include "quic.h"

static struct moq_quic_addr a6(const char *ip)
{
	struct moq_quic_addr a;

	memset(&a, 0, sizeof(a));
	a.u.in6.sin6_family = AF_INET6;
	ck_assert_int_eq(inet_pton(AF_INET6, ip, &a.u.in6.sin6_addr), 1);
	a.len = sizeof(a.u.in6);
	return a;
}

static struct moq_quic_addr a4(const char *ip)
{
	struct moq_quic_addr a;

	ck_assert_int_eq(moq_quic_addr_ip4(ip, 4443, &a), 0);
	return a;
}

/* One host's addresses in one /64 are one source; the next /64 another. */
START_TEST(ipv6_per_64)
{
	struct moq_quic_addr_table *t = moq_quic_addr_table_new(64);
	struct moq_quic_addr x1 = a6("2001:db8:1:2::1"), x2 = a6("2001:db8:1:2:ffff::9");
	struct moq_quic_addr x3 = a6("2001:db8:1:2:aaaa:bbbb:cccc:dddd");
	struct moq_quic_addr y = a6("2001:db8:1:3::1");

	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(moq_quic_addr_table_take(t, &x1, 2), 0);
	ck_assert_int_eq(moq_quic_addr_table_take(t, &x2, 2), 0);
	ck_assert_int_eq(moq_quic_addr_table_take(t, &x3, 2), MOQ_ERR_LIMIT);
	ck_assert_uint_eq(moq_quic_addr_table_count(t, &x3), 2);
	ck_assert_int_eq(moq_quic_addr_table_take(t, &y, 2), 0);
	ck_assert_uint_eq(moq_quic_addr_table_sources(t), 2);
	/* one ends: another address of the /64 may come in */
	moq_quic_addr_table_put(t, &x1);
	ck_assert_int_eq(moq_quic_addr_table_take(t, &x3, 2), 0);
	moq_quic_addr_table_put(t, &x2);
	moq_quic_addr_table_put(t, &x3);
	moq_quic_addr_table_put(t, &y);
	ck_assert_uint_eq(moq_quic_addr_table_sources(t), 0);
	ck_assert_uint_eq(moq_quic_addr_table_count(t, &x1), 0);
	moq_quic_addr_table_free(t);
}
END_TEST

/* IPv4 counts per address; ::ffff:a.b.c.d (a dual-stack socket) is a.b.c.d,
 * not one /64 for every IPv4 client. */
START_TEST(ipv4_and_mapped)
{
	struct moq_quic_addr_table *t = moq_quic_addr_table_new(64);
	struct moq_quic_addr v4 = a4("10.0.0.1"), m4 = a6("::ffff:10.0.0.1");
	struct moq_quic_addr other = a6("::ffff:10.0.0.2"), o4 = a4("10.0.0.3");

	ck_assert_int_eq(moq_quic_addr_table_take(t, &v4, 2), 0);
	ck_assert_int_eq(moq_quic_addr_table_take(t, &m4, 2), 0);
	ck_assert_int_eq(moq_quic_addr_table_take(t, &v4, 2), MOQ_ERR_LIMIT);
	ck_assert_int_eq(moq_quic_addr_table_take(t, &other, 2), 0);
	ck_assert_int_eq(moq_quic_addr_table_take(t, &o4, 2), 0);
	ck_assert_uint_eq(moq_quic_addr_table_count(t, &m4), 2);
	ck_assert_uint_eq(moq_quic_addr_table_sources(t), 3);
	ck_assert_int_eq(moq_quic_addr_table_take(t, &o4, 0), MOQ_ERR_LIMIT);
	moq_quic_addr_table_free(t);
}
END_TEST

struct racer {
	struct moq_quic_addr_table *t;
	struct moq_quic_addr a;
	unsigned int taken;
};

#define RACE_LIMIT 5000u
#define RACERS     4

static void *race(void *arg)
{
	struct racer *r = arg;

	for (unsigned int i = 0; i < RACE_LIMIT; i++)
		if (moq_quic_addr_table_take(r->t, &r->a, RACE_LIMIT) == 0)
			r->taken++;
	return NULL;
}

/* Four threads (workers) take for one source at once: exactly the limit
 * is granted in total, not the limit per thread. */
START_TEST(shared_across_threads)
{
	struct moq_quic_addr_table *t = moq_quic_addr_table_new(16);
	struct racer r[RACERS];
	pthread_t th[RACERS];
	unsigned int total = 0;

	for (int i = 0; i < RACERS; i++) {
		r[i].t = t;
		r[i].a = a6("2001:db8::7");
		r[i].taken = 0;
		ck_assert_int_eq(pthread_create(&th[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < RACERS; i++) {
		pthread_join(th[i], NULL);
		total += r[i].taken;
	}
	ck_assert_uint_eq(total, RACE_LIMIT);
	ck_assert_uint_eq(moq_quic_addr_table_count(t, &r[0].a), RACE_LIMIT);
	for (unsigned int i = 0; i < RACE_LIMIT; i++)
		moq_quic_addr_table_put(t, &r[0].a);
	ck_assert_uint_eq(moq_quic_addr_table_sources(t), 0);
	moq_quic_addr_table_free(t);
}
END_TEST

/* Many sources in and out in a scrambled order: every count stays what a
 * plain array says (a deletion in a probe run must keep the run's later
 * entries findable). */
START_TEST(churn_matches_reference)
{
	enum { N = 3000 };
	struct moq_quic_addr_table *t = moq_quic_addr_table_new(N);
	static uint32_t ref[N];
	uint64_t x = 88172645463325252ull;

	memset(ref, 0, sizeof(ref));
	for (int step = 0; step < 200000; step++) {
		struct moq_quic_addr a;
		unsigned int k;
		uint32_t ip;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		k = (unsigned int)(x % N);
		ip = htonl(0x0a000000u + k);
		memset(&a, 0, sizeof(a));
		a.u.in4.sin_family = AF_INET;
		memcpy(&a.u.in4.sin_addr, &ip, 4);
		a.len = sizeof(a.u.in4);
		if ((x >> 32) % 3 != 0) {
			int rc = moq_quic_addr_table_take(t, &a, 3);

			ck_assert_int_eq(rc, ref[k] < 3 ? 0 : MOQ_ERR_LIMIT);
			if (rc == 0)
				ref[k]++;
		} else if (ref[k] > 0) {
			moq_quic_addr_table_put(t, &a);
			ref[k]--;
		}
		ck_assert_uint_eq(moq_quic_addr_table_count(t, &a), ref[k]);
	}
	{
		uint32_t live = 0;

		for (int k = 0; k < N; k++)
			live += ref[k] > 0;
		ck_assert_uint_eq(moq_quic_addr_table_sources(t), live);
	}
	moq_quic_addr_table_free(t);
}
END_TEST

/* A table for 16 sources: at least 16 get in, the table's bound refuses
 * beyond it (counted like the limit: the relay refuses the connection). */
START_TEST(full_table_refuses)
{
	struct moq_quic_addr_table *t = moq_quic_addr_table_new(16);
	unsigned int ok = 0;
	char ip[32];

	for (int i = 1; i <= 64; i++) {
		struct moq_quic_addr a;

		snprintf(ip, sizeof(ip), "10.1.0.%d", i);
		a = a4(ip);
		ok += moq_quic_addr_table_take(t, &a, 4) == 0;
	}
	ck_assert_uint_ge(ok, 16);
	ck_assert_uint_lt(ok, 64);
	ck_assert_uint_eq(moq_quic_addr_table_sources(t), ok);
	moq_quic_addr_table_free(t);
}
END_TEST

Suite *quic_addr_suite(void);

Suite *quic_addr_suite(void)
{
	Suite *s = suite_create("quic_addr");
	TCase *tc = tcase_create("per_source");

	tcase_add_test(tc, ipv6_per_64);
	tcase_add_test(tc, ipv4_and_mapped);
	tcase_add_test(tc, shared_across_threads);
	tcase_add_test(tc, churn_matches_reference);
	tcase_add_test(tc, full_table_refuses);
	suite_add_tcase(s, tc);
	return s;
}
