/* SPDX-License-Identifier: MIT */
/*
 * test_loadgen_dgram.c: lite-05 datagrams (6.4, issue 25 item 3) end to
 * end: moqdp-load --datagrams (its publisher sends the audio track's
 * single-frame groups as QUIC datagrams, its subscribers take them) as a
 * child process against a moq/ relay node served on a kernel UDP socket in
 * this process (real ngtcp2 + wolfSSL both sides). The relay takes the
 * publisher's datagrams into its cache and sends each audio group to every
 * subscriber as a datagram, video on streams. Then with loss injected into
 * what the relay receives: the lost datagrams are lost groups, counted as
 * missing by the subscribers' verifiers, and nothing else is affected (no
 * verification error, video complete).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "media.h"
#include "moq.h"
#include "node_serve.h"
#include "proc.h"
#include "quic.h"

#ifndef MOQDP_LOAD_PATH
#error "MOQDP_LOAD_PATH must name the moqdp-load binary"
#endif

static double jget(const char *line, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(line, pat);
	ck_assert_msg(p != NULL, "no %s in %s", key, line);
	return strtod(p + strlen(pat), NULL);
}

/* every @every'th received packet over 100 bytes is dropped (the ACK-only
 * packets of the subscribers are smaller: the publisher's media is hit) */
struct dropper {
	unsigned every, seen, dropped;
};

static int drop_some(void *arg, const uint8_t *data, size_t len)
{
	struct dropper *d = arg;

	(void)data;
	if (d->every == 0 || len <= 100)
		return 0;
	if (++d->seen % d->every)
		return 0;
	d->dropped++;
	return 1;
}

struct run {
	char last[8192];
	struct moq_node_stats ns;
	struct moq_quic_stats qs;
};

static int fastpath_on; /* the next run_load's relay: config.fastpath */

static void run_load(unsigned drop_every, const char *subs, const char *extra, struct run *r)
{
	struct moq_cache_counting cnt;
	moq_cache_counting_init(&cnt);
	struct moq_cache_cfg cc = {.alloc = moq_cache_counting_alloc(&cnt)};
	struct moq_cache *cache = moq_cache_create(&cc);
	struct moq_node_cfg nc = {.cache = cache, .relay = 1};
	struct moq_node *node = moq_node_create(&nc);
	size_t na;
	const char *const *alpn = moq_node_alpns(&na);
	struct moq_quic_config qc = {
	        .role = MOQ_QUIC_SERVER,
	        .alpn = alpn,
	        .alpn_count = na,
	        .cb = moq_node_quic_callbacks(),
	        .user = node,
	        .retry = MOQ_QUIC_RETRY_NEVER,
	        .max_datagram_frame_size = 65535, /* as dpdk_app/relay.c */
	        .fastpath = fastpath_on,
	};
	struct moq_quic_endpoint *ep;
	struct dropper dr = {drop_every, 0, 0};

	ck_assert_ptr_nonnull(node);
	ep = moq_quic_endpoint_new(&qc, NULL);
	ck_assert_ptr_nonnull(ep);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct moq_quic_addr local;
	memset(&local, 0, sizeof(local));
	local.u.in4.sin_family = AF_INET;
	local.u.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	local.len = sizeof(local.u.in4);
	ck_assert_int_eq(bind(fd, &local.u.sa, local.len), 0);
	socklen_t sl = local.len;
	getsockname(fd, &local.u.sa, &sl);
	char relay[32], out[] = "/tmp/moqdp-test-dgram-XXXXXX";
	snprintf(relay, sizeof(relay), "127.0.0.1:%u", ntohs(local.u.in4.sin_port));
	int ofd = mkstemp(out);
	ck_assert_int_ge(ofd, 0);
	close(ofd);

	const char *argv[] = {"--kernel", "--relay", relay, "--local", "127.0.0.2", "--publish",
	                      "--subscribers", subs, "--ramp", "100", "--duration", "3",
	                      "--tracks", "video:1M:gop=30,audio", "--quiet", extra, NULL};
	pid_t pid = proc_spawn(MOQDP_LOAD_PATH, argv, NULL, out, NULL);
	ck_assert_int_gt(pid, 0);
	struct node_serve sv = {fd, ep, node, cache, &local, drop_some, &dr};
	int status = node_serve_until_exit(&sv, pid, 30000000000ull, NULL, NULL);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);

	FILE *f = fopen(out, "r");
	char line[8192];
	r->last[0] = 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "\"final\":true"))
			snprintf(r->last, sizeof(r->last), "%s", line);
	fclose(f);
	unlink(out);
	ck_assert_msg(r->last[0], "no final line");
	moq_node_stats(node, &r->ns);
	moq_quic_endpoint_stats(ep, &r->qs);
	fprintf(stderr,
	        "relay: dgrams in %llu (bad %llu) out %llu too large %llu; packets dropped %u\n%s",
	        (unsigned long long)r->ns.dgrams_in, (unsigned long long)r->ns.dgrams_in_bad,
	        (unsigned long long)r->ns.dgrams_out, (unsigned long long)r->ns.dgrams_too_large,
	        dr.dropped, r->last);
	if (drop_every)
		ck_assert_uint_gt(dr.dropped, 0);
	moq_quic_endpoint_free(ep);
	moq_node_destroy(node);
	moq_cache_destroy(cache);
	close(fd);
}

START_TEST(audio_as_datagrams)
{
	struct run r;

	run_load(0, "10", "--datagrams", &r);
	ck_assert_int_eq((int)jget(r.last, "subs_ready"), 10);
	ck_assert_int_eq((int)jget(r.last, "errors"), 0);
	ck_assert_int_eq((int)jget(r.last, "subs_failed"), 0);
	/* ~2.5 s of 50 audio groups a second came in as datagrams ... */
	double pub = jget(r.last, "pub_dgrams_out");
	ck_assert_msg(pub > 100, "%s", r.last);
	ck_assert_uint_ge(r.ns.dgrams_in, (uint64_t)pub * 9 / 10);
	ck_assert_uint_eq(r.ns.dgrams_in_bad, 0);
	/* ... and went out as datagrams to the 10 subscribers, who verified
	 * them (audio frames among frames_ok; video on streams beside) */
	ck_assert_uint_gt(r.ns.dgrams_out, r.ns.dgrams_in * 8);
	ck_assert_uint_eq(r.ns.dgrams_too_large, 0);
	/* (the relay goes on sending after the subscribers' final report) */
	ck_assert_msg(jget(r.last, "sub_dgrams_in") >= (double)r.ns.dgrams_out * 0.7, "%s",
	              r.last);
	ck_assert_msg(jget(r.last, "frames_ok") > 10 * 2 * (30 + 50), "%s", r.last);
	/* on a clean loopback nothing is missing beyond the edges */
	ck_assert_msg(jget(r.last, "groups_missing") <= 10 * 2, "%s", r.last);
	ck_assert_uint_eq(r.qs.dgrams_in, r.ns.dgrams_in);
	ck_assert_uint_ge(r.qs.dgrams_out, r.ns.dgrams_out);
}
END_TEST

/* Without --datagrams nothing is negotiated: all on streams (the same run
 * otherwise). */
START_TEST(streams_without_datagrams)
{
	struct run r;

	run_load(0, "5", "--verbose", &r);
	ck_assert_int_eq((int)jget(r.last, "errors"), 0);
	ck_assert_uint_eq(r.ns.dgrams_in, 0);
	ck_assert_uint_eq(r.ns.dgrams_out, 0);
	ck_assert_int_eq((int)jget(r.last, "sub_dgrams_in"), 0);
	ck_assert_msg(jget(r.last, "frames_ok") > 5 * 2 * (30 + 50), "%s", r.last);
}
END_TEST

START_TEST(datagram_loss_is_group_loss)
{
	struct run r;

	run_load(20, "5", "--datagrams", &r);
	double pub = jget(r.last, "pub_dgrams_out");
	uint64_t lost = (uint64_t)pub - r.ns.dgrams_in;
	double missing = jget(r.last, "groups_missing");

	/* some of the publisher's datagrams were lost on the way in ... */
	ck_assert_msg(lost > 0, "%s", r.last);
	/* ... each a lost audio group for every subscriber (the relay never
	 * had it); nothing else lost: video is retransmitted, no error */
	ck_assert_int_eq((int)jget(r.last, "errors"), 0);
	ck_assert_int_eq((int)jget(r.last, "subs_failed"), 0);
	ck_assert_msg(missing >= (double)lost, "missing %.0f lost %llu: %s", missing,
	              (unsigned long long)lost, r.last);
	ck_assert_msg(missing <= (double)(lost + 4) * 5 * 1.5 + 10, "missing %.0f lost %llu: %s",
	              missing, (unsigned long long)lost, r.last);
	ck_assert_int_eq((int)jget(r.last, "groups_reset"), 0);
}
END_TEST

/* The fast path carries DATAGRAM frames (fastpath/dgram.c): with it on, the
 * subscriber sessions that negotiated datagrams are handed off and get the
 * audio groups as datagrams from the engine; every group verified or
 * missing, and those missing no more than the edges and what the engine
 * counted lost or dropped. */
START_TEST(fastpath_carries_datagram_sessions)
{
	struct run r;

	fastpath_on = 1;
	run_load(0, "5", "--datagrams", &r);
	fastpath_on = 0;
	fprintf(stderr, "fast path: handoffs %llu, dgrams out %llu acked %llu lost %llu\n",
	        (unsigned long long)r.qs.handoffs, (unsigned long long)r.qs.dgrams_out,
	        (unsigned long long)r.qs.fastpath_dgrams_acked,
	        (unsigned long long)r.qs.fastpath_dgrams_lost);
	ck_assert_int_eq((int)jget(r.last, "errors"), 0);
	ck_assert_int_eq((int)jget(r.last, "subs_failed"), 0);
	/* the 5 subscribers (and the publisher) left ngtcp2 ... */
	ck_assert_uint_ge(r.qs.handoffs, 5);
	/* ... and the engine sent their datagrams: ~2.5 s of 50 a second each */
	ck_assert_uint_gt(r.ns.dgrams_out, 5 * 50);
	ck_assert_uint_ge(r.qs.dgrams_out, r.ns.dgrams_out * 9 / 10);
	ck_assert_uint_gt(r.qs.fastpath_dgrams_acked, 5 * 50);
	ck_assert_msg(jget(r.last, "sub_dgrams_in") >= (double)r.ns.dgrams_out * 0.7, "%s",
	              r.last);
	ck_assert_msg(jget(r.last, "frames_ok") > 5 * 2 * (30 + 50), "%s", r.last);
	ck_assert_msg(jget(r.last, "groups_missing") <=
	                      5 * 2 + (double)(r.qs.fastpath_dgrams_lost + r.qs.dgrams_dropped),
	              "%s", r.last);
}
END_TEST

START_TEST(datagrams_refused_with_light)
{
	const char *argv[] = {"--kernel", "--relay", "127.0.0.1:1", "--subscribers", "1",
	                      "--light", "--datagrams", NULL};
	char out[] = "/tmp/moqdp-test-dgram-XXXXXX";
	int ofd = mkstemp(out);
	int status;

	close(ofd);
	pid_t pid = proc_spawn(MOQDP_LOAD_PATH, argv, NULL, out, NULL);
	ck_assert_int_gt(pid, 0);
	waitpid(pid, &status, 0);
	unlink(out);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2);
}
END_TEST

Suite *loadgen_dgram_suite(void);
Suite *loadgen_dgram_suite(void)
{
	Suite *s = suite_create("loadgen_dgram");
	TCase *tc = tcase_create("datagrams");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, audio_as_datagrams);
	tcase_add_test(tc, streams_without_datagrams);
	tcase_add_test(tc, datagram_loss_is_group_loss);
	tcase_add_test(tc, datagrams_refused_with_light);
	tcase_add_test(tc, fastpath_carries_datagram_sessions);
	suite_add_tcase(s, tc);
	return s;
}
