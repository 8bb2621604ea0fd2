/* SPDX-License-Identifier: MIT */
/*
 * test_loadgen_light.c: moqdp-load's light subscribers (loadgen/light.h)
 * against a real relay: a moq/ relay node on a kernel UDP socket on
 * loopback (ngtcp2 + wolfSSL on both sides), moqdp-load --kernel --light as
 * a child process. The relay's own per-connection figures must show every
 * subscriber's data acknowledged all along (light ones included: their
 * ACKs are the only ones it gets), no idle timeout, no group reset, and no
 * more bytes sent than the load generator received (no retransmission
 * storm); the verifying sample verifies every frame. A second run mutes
 * some light subscribers (MOQDP_TEST_LIGHT_MUTE): the relay then stops
 * getting their ACKs and resets their groups, which shows the ACK path is
 * what keeps the others going.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
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

#define SUBS      16
#define MAX_CONNS 64
/* the relay's view of each connection, sampled twice */
struct seen {
	struct moq_quic_conn *c[MAX_CONNS];
	int live[MAX_CONNS];
	uint64_t acked1[MAX_CONNS], acked2[MAX_CONNS], sent2[MAX_CONNS], cwnd2[MAX_CONNS];
	int n;
};
static struct seen seen;
static struct moq_quic_callbacks wrapped;
static const struct moq_quic_callbacks *orig;

static int on_established(struct moq_quic_conn *c, void *user, const char *alpn)
{
	if (seen.n < MAX_CONNS) {
		seen.live[seen.n] = 1;
		seen.c[seen.n++] = c;
	}
	return orig->established(c, user, alpn);
}

static void on_conn_closed(struct moq_quic_conn *c, void *user,
                           const struct moq_quic_close_info *info)
{
	for (int i = 0; i < seen.n; i++)
		if (seen.c[i] == c)
			seen.live[i] = 0;
	orig->conn_closed(c, user, info);
}

/* bytes the relay sent on @c that are no longer in flight: acknowledged
 * (or declared lost: then they would be in flight again as retransmissions
 * and sent grows past what the client received, checked separately) */
static uint64_t acked_of(struct moq_quic_conn *c, uint64_t *sent, uint64_t *cwnd)
{
	struct moq_quic_conn_info ci;
	moq_quic_conn_get_info(c, &ci);
	if (sent)
		*sent = ci.bytes_sent;
	if (cwnd)
		*cwnd = ci.cwnd;
	return ci.bytes_sent - ci.bytes_in_flight;
}

static void sample(int which)
{
	for (int i = 0; i < seen.n; i++) {
		if (!seen.live[i])
			continue;
		if (which == 1)
			seen.acked1[i] = acked_of(seen.c[i], NULL, NULL);
		else
			seen.acked2[i] = acked_of(seen.c[i], &seen.sent2[i], &seen.cwnd2[i]);
	}
}

/* Sample the connections once at @t[0] and once at @t[1] (ns after the
 * start; node_serve_until_exit's callback). */
struct samples {
	uint64_t t[2];
	int done[2];
};

static void sample_at(void *arg, uint64_t elapsed)
{
	struct samples *sm = arg;

	for (int k = 0; k < 2; k++)
		if (!sm->done[k] && elapsed >= sm->t[k]) {
			sample(k + 1);
			sm->done[k] = 1;
		}
}

static double jget(const char *line, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(line, pat);
	ck_assert_msg(p != NULL, "no %s in %s", key, line);
	return strtod(p + strlen(pat), NULL);
}

struct run {
	struct moq_quic_stats qs;
	struct moq_node_stats ns;
	char last[8192];
	int status;
};

/* moqdp-load --light with SUBS subscribers (every 4th verifying) for 7 s
 * against a relay node; @mute light subscribers never ACK. */
static void run_light(unsigned mute, struct run *r)
{
	memset(&seen, 0, sizeof(seen));
	orig = moq_node_quic_callbacks();
	wrapped = *orig;
	wrapped.established = on_established;
	wrapped.conn_closed = on_conn_closed;

	struct moq_cache_counting cnt;
	moq_cache_counting_init(&cnt);
	struct moq_cache_cfg cc = {.alloc = moq_cache_counting_alloc(&cnt)};
	struct moq_cache *cache = moq_cache_create(&cc);
	struct moq_node_cfg nc = {.cache = cache, .relay = 1};
	struct moq_node *node = moq_node_create(&nc);
	ck_assert_ptr_nonnull(node);
	size_t na;
	const char *const *alpn = moq_node_alpns(&na);
	struct moq_quic_config qc = {
	        .role = MOQ_QUIC_SERVER,
	        .alpn = alpn,
	        .alpn_count = na,
	        .cb = &wrapped,
	        .user = node,
	        .retry = MOQ_QUIC_RETRY_NEVER,
	};
	struct moq_quic_endpoint *ep = moq_quic_endpoint_new(&qc, NULL);
	ck_assert_ptr_nonnull(ep);

	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	int rcv = 4 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	struct moq_quic_addr local;
	memset(&local, 0, sizeof(local));
	local.u.in4.sin_family = AF_INET;
	local.u.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	local.len = sizeof(local.u.in4);
	ck_assert_int_eq(bind(fd, &local.u.sa, local.len), 0);
	socklen_t sl = local.len;
	getsockname(fd, &local.u.sa, &sl);
	char relay[32], out[] = "/tmp/moqdp-test-light-XXXXXX", subs[16];
	snprintf(relay, sizeof(relay), "127.0.0.1:%u", ntohs(local.u.in4.sin_port));
	snprintf(subs, sizeof(subs), "%d", SUBS);
	int ofd = mkstemp(out);
	ck_assert_int_ge(ofd, 0);
	close(ofd);

	char *argv[] = {MOQDP_LOAD_PATH,
	                "--kernel",
	                "--relay",
	                relay,
	                "--local",
	                "127.0.0.2",
	                "--publish",
	                "--subscribers",
	                subs,
	                "--ramp",
	                "100",
	                "--conns-per-addr",
	                "8",
	                "--duration",
	                "7",
	                "--tracks",
	                "video:1M:gop=30,audio",
	                "--light",
	                "--verify-every",
	                "4",
	                "--verify-min",
	                "1",
	                "--quiet",
	                NULL};
	char mv[16];
	snprintf(mv, sizeof(mv), "%u", mute);
	if (mute)
		setenv("MOQDP_TEST_LIGHT_MUTE", mv, 1);
	pid_t pid = proc_spawn(argv[0], (const char *const *)&argv[1], NULL, out, NULL);
	ck_assert_int_gt(pid, 0);
	unsetenv("MOQDP_TEST_LIGHT_MUTE");
	/* samples 4 and 6.5 s in: every subscriber is light (or verifying) by
	 * 4 s (ramp 0.3 s, 1 s groups) */
	{
		struct node_serve sv = {fd, ep, node, cache, &local};
		struct samples sm = {{4000000000ull, 6500000000ull}, {0, 0}};

		r->status = node_serve_until_exit(&sv, pid, 40000000000ull, sample_at, &sm);
	}

	FILE *f = fopen(out, "r");
	char line[8192];
	r->last[0] = 0;
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "\"final\":true"))
			snprintf(r->last, sizeof(r->last), "%s", line);
	if (f)
		fclose(f);
	unlink(out);
	moq_quic_endpoint_stats(ep, &r->qs);
	moq_node_stats(node, &r->ns);
	moq_quic_endpoint_free(ep);
	moq_node_destroy(node);
	moq_cache_destroy(cache);
	close(fd);
}

START_TEST(light_subscribers_acked)
{
	struct run r;
	run_light(0, &r);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %d", r.status);
	ck_assert_msg(r.last[0], "no final line");
	/* 12 light, 4 verifying (subscribers 0, 4, 8, 12) */
	ck_assert_int_eq((int)jget(r.last, "light_subs"), 12);
	ck_assert_int_eq((int)jget(r.last, "verify_subs"), 4);
	ck_assert_int_eq((int)jget(r.last, "subs_ready"), SUBS);
	ck_assert_int_eq((int)jget(r.last, "subs_failed"), 0);
	/* the verifying sample verified every frame: ~6 s of 30 + 50 frames/s */
	ck_assert_int_eq((int)jget(r.last, "errors"), 0);
	ck_assert_int_eq((int)jget(r.last, "light_errors"), 0);
	ck_assert_int_eq((int)jget(r.last, "groups_missing"), 0);
	ck_assert_int_eq((int)jget(r.last, "groups_reset"), 0);
	ck_assert_int_eq((int)jget(r.last, "frames_partial"), 0);
	ck_assert_msg(jget(r.last, "frames_ok") > 4 * 80 * 5, "%s", r.last);
	/* light ones: >= 4 s of ~1.07 Mbps each, ACKed */
	ck_assert_msg(jget(r.last, "light_acked_bytes") > 12 * 400000.0, "%s", r.last);
	ck_assert_msg(jget(r.last, "light_acks") > 12 * 50, "%s", r.last);
	ck_assert_int_eq((int)jget(r.last, "light_bad"), 0);
	ck_assert_int_eq((int)jget(r.last, "light_key_updates"), 0);
	ck_assert_int_eq((int)jget(r.last, "light_stalled"), 0);

	/* the relay: all 17 connections were up at the second sample, each
	 * with its bytes acknowledged between the samples (2.5 s of >= 64 kbps
	 * audio + 1 Mbps video for subscribers) */
	ck_assert_int_eq(seen.n, SUBS + 1);
	int growing = 0;
	for (int i = 0; i < seen.n; i++) {
		ck_assert_msg(seen.acked2[i] > 0, "conn %d never sampled live", i);
		/* no loss-driven collapse: ngtcp2's initial window is 10 packets
		 * (RFC 9002, 7.2); a loss would cut it, persistent congestion
		 * to 2 packets */
		ck_assert_msg(seen.cwnd2[i] >= 10 * 1200, "conn %d cwnd %llu", i,
		              (unsigned long long)seen.cwnd2[i]);
		if (seen.acked2[i] > seen.acked1[i] + 200000)
			growing++;
	}
	/* every subscriber (the publisher's connection carries little back) */
	ck_assert_int_ge(growing, SUBS);
	ck_assert_uint_eq(r.qs.idle_timeouts, 0);
	ck_assert_uint_eq(r.qs.handshake_timeouts, 0);
	ck_assert_uint_eq(r.ns.resets_old + r.ns.resets_lagged + r.ns.resets_dropped +
	                          r.ns.resets_evicted,
	                  0);
	/* no retransmission storm: the relay sent at most 10 % more than the
	 * load generator received (loopback loses nothing) */
	double wire_rx = jget(r.last, "wire_rx_bytes");
	ck_assert_msg((double)r.qs.bytes_out < 1.10 * wire_rx + 200000, "relay out %llu, rx %.0f",
	              (unsigned long long)r.qs.bytes_out, wire_rx);
}
END_TEST

START_TEST(light_subscriber_without_acks_is_reset)
{
	struct run r;
	run_light(3, &r);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %d", r.status);
	ck_assert_msg(r.last[0], "no final line");
	ck_assert_int_eq((int)jget(r.last, "light_subs"), 12);
	/* the verifying sample is untouched */
	ck_assert_int_eq((int)jget(r.last, "errors"), 0);
	ck_assert_int_eq((int)jget(r.last, "groups_missing"), 0);
	/* three connections' bytes stopped being acknowledged; the others go on */
	int stuck = 0, growing = 0;
	for (int i = 0; i < seen.n; i++) {
		if (!seen.acked2[i])
			continue;
		if (seen.acked2[i] <= seen.acked1[i] + 1000)
			stuck++;
		else if (seen.acked2[i] > seen.acked1[i] + 200000)
			growing++;
	}
	ck_assert_int_eq(stuck, 3);
	ck_assert_int_ge(growing, SUBS - 3);
	/* and the relay gave up on their groups */
	ck_assert_msg(r.ns.resets_old + r.ns.resets_lagged + r.ns.resets_dropped > 0,
	              "old %llu lagged %llu dropped %llu", (unsigned long long)r.ns.resets_old,
	              (unsigned long long)r.ns.resets_lagged,
	              (unsigned long long)r.ns.resets_dropped);
}
END_TEST

/* --verify-every / --verify-min are refused without --light (exit 2). */
START_TEST(verify_options_need_light)
{
	char *argv[] = {
	        MOQDP_LOAD_PATH, "--kernel", "--subscribers", "2", "--verify-every", "5", NULL};
	pid_t pid = proc_spawn(argv[0], (const char *const *)&argv[1], NULL, NULL, NULL);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(proc_wait(pid, 30000), 2);
}
END_TEST

Suite *loadgen_light_suite(void);
Suite *loadgen_light_suite(void)
{
	Suite *s = suite_create("loadgen_light");
	TCase *tc = tcase_create("light");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, light_subscribers_acked);
	tcase_add_test(tc, light_subscriber_without_acks_is_reset);
	tcase_add_test(tc, verify_options_need_light);
	suite_add_tcase(s, tc);
	return s;
}
