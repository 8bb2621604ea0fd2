/* SPDX-License-Identifier: MIT */
/*
 * test_lite06_relay.c: moq-lite-06 sessions through a moq/ relay node served
 * in this process on a kernel UDP socket on loopback (real ngtcp2 + wolfSSL),
 * its endpoint offering moq_node_alpns_all (06 first). moqdp-load child
 * processes: a lite-06 publisher with lite-06 subscribers, and lite-05 and
 * lite-04 subscribers on the same broadcast; every frame each subscriber gets
 * is verified by moqdp-load (moq_lg_rx: sizes, contents, order within a
 * group); the relay counts the sessions per negotiated version.
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
#include "moq.h"
#include "node_serve.h"
#include "proc.h"
#include "quic.h"

#ifndef MOQDP_LOAD_PATH
#error "MOQDP_LOAD_PATH must name the moqdp-load binary"
#endif

/* Sessions the relay saw ready, per version (index = enum moq_version). */
static unsigned ready_by_version[8];

static void on_ready(struct moq_session *s, void *user)
{
	unsigned v = (unsigned)moq_session_version(s);

	(void)user;
	if (v < 8)
		ready_by_version[v]++;
}

static const struct moq_node_callbacks relay_cbs = {.session_ready = on_ready};

static double jget(const char *line, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(line, pat);
	ck_assert_msg(p != NULL, "no %s in %s", key, line);
	return strtod(p + strlen(pat), NULL);
}

/* The final JSON line of a moqdp-load run written to @path. */
static void final_line(const char *path, char *last, size_t cap)
{
	FILE *f = fopen(path, "r");
	char line[4096];

	ck_assert_ptr_nonnull(f);
	last[0] = '\0';
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "\"final\":true"))
			snprintf(last, cap, "%s", line);
	fclose(f);
	ck_assert_msg(last[0], "no final line in %s", path);
}

struct relay {
	struct moq_cache_counting cnt;
	struct moq_cache *cache;
	struct moq_node *node;
	struct moq_quic_endpoint *ep;
	int fd;
	struct moq_quic_addr local;
	char addr[32];
};

static void relay_up(struct relay *r, int dgrams)
{
	struct moq_cache_cfg cc;
	struct moq_node_cfg nc = {.relay = 1, .cb = &relay_cbs};
	size_t na;
	const char *const *alpn = moq_node_alpns_all(&na);
	struct moq_quic_config qc = {
	        .role = MOQ_QUIC_SERVER,
	        .alpn = alpn,
	        .alpn_count = na,
	        .cb = moq_node_quic_callbacks(),
	        .retry = MOQ_QUIC_RETRY_NEVER,
	        .max_datagram_frame_size = dgrams ? 65535 : 0, /* as dpdk_app/relay.c */
	};
	socklen_t sl;

	memset(ready_by_version, 0, sizeof(ready_by_version));
	moq_cache_counting_init(&r->cnt);
	cc = (struct moq_cache_cfg){.alloc = moq_cache_counting_alloc(&r->cnt)};
	r->cache = moq_cache_create(&cc);
	ck_assert_ptr_nonnull(r->cache);
	nc.cache = r->cache;
	r->node = moq_node_create(&nc);
	ck_assert_ptr_nonnull(r->node);
	qc.user = r->node;
	r->ep = moq_quic_endpoint_new(&qc, NULL);
	ck_assert_ptr_nonnull(r->ep);
	r->fd = socket(AF_INET, SOCK_DGRAM, 0);
	memset(&r->local, 0, sizeof(r->local));
	r->local.u.in4.sin_family = AF_INET;
	r->local.u.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	r->local.len = sizeof(r->local.u.in4);
	ck_assert_int_eq(bind(r->fd, &r->local.u.sa, r->local.len), 0);
	sl = r->local.len;
	getsockname(r->fd, &r->local.u.sa, &sl);
	snprintf(r->addr, sizeof(r->addr), "127.0.0.1:%u", ntohs(r->local.u.in4.sin_port));
}

static void relay_down(struct relay *r)
{
	moq_quic_endpoint_free(r->ep);
	moq_node_destroy(r->node);
	moq_cache_destroy(r->cache);
	close(r->fd);
}

/* A moqdp-load child: @lite version, @publish or not, @subs subscribers
 * from @local, @tracks (NULL: video and audio), @extra (one more argument
 * or NULL), output to @out (a mkstemp template, filled in). */
static pid_t load_x(const struct relay *r, const char *lite, int publish, const char *subs,
                    const char *local, const char *dur, const char *tracks, const char *extra,
                    char *out)
{
	int ofd = mkstemp(out);
	const char *argv[24];
	int k = 0;
	pid_t pid;

	ck_assert_int_ge(ofd, 0);
	close(ofd);
	argv[k++] = "--kernel";
	argv[k++] = "--relay";
	argv[k++] = r->addr;
	argv[k++] = "--local";
	argv[k++] = local;
	argv[k++] = "--lite";
	argv[k++] = lite;
	if (publish)
		argv[k++] = "--publish";
	argv[k++] = "--subscribers";
	argv[k++] = subs;
	argv[k++] = "--ramp";
	argv[k++] = "100";
	argv[k++] = "--duration";
	argv[k++] = dur;
	argv[k++] = "--tracks";
	argv[k++] = tracks ? tracks : "video:500k:gop=15,audio";
	argv[k++] = "--quiet";
	if (extra)
		argv[k++] = extra;
	argv[k] = NULL;
	pid = proc_spawn(MOQDP_LOAD_PATH, argv, NULL, out, NULL);
	ck_assert_int_gt(pid, 0);
	return pid;
}

static pid_t load(const struct relay *r, const char *lite, int publish, const char *subs,
                  const char *local, const char *dur, char *out)
{
	return load_x(r, lite, publish, subs, local, dur, NULL, NULL, out);
}

/* The subscribers of run @out all got media, verified, with no error. */
static void check_run(const char *out, int subs, const char *what)
{
	char last[4096];

	final_line(out, last, sizeof(last));
	printf("# %s: subs_ready %d frames_ok %.0f groups_ok %.0f errors %.0f\n", what,
	       (int)jget(last, "subs_ready"), jget(last, "frames_ok"), jget(last, "groups_ok"),
	       jget(last, "errors"));
	ck_assert_msg((int)jget(last, "subs_ready") == subs, "%s: %s", what, last);
	ck_assert_msg((int)jget(last, "errors") == 0, "%s: %s", what, last);
	ck_assert_msg((int)jget(last, "subs_failed") == 0, "%s: %s", what, last);
	ck_assert_msg((int)jget(last, "connect_errors") == 0, "%s: %s", what, last);
	/* ~2 s of 30 video + 50 audio frames/s per subscriber */
	ck_assert_msg(jget(last, "frames_ok") > subs * 80, "%s: %s", what, last);
	unlink(out);
}

START_TEST(mixed_versions_one_broadcast)
{
	struct relay r;
	char o6[] = "/tmp/moqdp-l06-6-XXXXXX", o5[] = "/tmp/moqdp-l06-5-XXXXXX",
	     o4[] = "/tmp/moqdp-l06-4-XXXXXX";
	pid_t p5, p4, p6;
	int st;

	relay_up(&r, 0);
	struct node_serve sv = {r.fd, r.ep, r.node, r.cache, &r.local};
	/* the older versions' subscribers first: they wait for the announce */
	p5 = load(&r, "05", 0, "4", "127.0.0.3", "4", o5);
	p4 = load(&r, "04", 0, "4", "127.0.0.4", "4", o4);
	p6 = load(&r, "06", 1, "4", "127.0.0.2", "3", o6);
	st = node_serve_until_exit(&sv, p6, 30000000000ull, NULL, NULL);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "lite-06 run: status %d", st);
	st = node_serve_until_exit(&sv, p5, 30000000000ull, NULL, NULL);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "lite-05 run: status %d", st);
	st = node_serve_until_exit(&sv, p4, 30000000000ull, NULL, NULL);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "lite-04 run: status %d", st);
	check_run(o6, 4, "lite-06");
	check_run(o5, 4, "lite-05");
	check_run(o4, 4, "lite-04");
	/* each process's sessions negotiated the version it offered: 06's
	 * publisher and subscribers (one connection each at least) */
	printf("# relay sessions ready: lite-06 %u, lite-05 %u, lite-04 %u\n",
	       ready_by_version[MOQ_LITE_06], ready_by_version[MOQ_LITE_05],
	       ready_by_version[MOQ_LITE_04]);
	ck_assert_uint_ge(ready_by_version[MOQ_LITE_06], 2);
	ck_assert_uint_ge(ready_by_version[MOQ_LITE_05], 1);
	ck_assert_uint_ge(ready_by_version[MOQ_LITE_04], 1);
	relay_down(&r);
}
END_TEST

/* The final line of run @out, @subs subscribers all ready and error-free,
 * into @last; the file is removed. */
static void final_ok(const char *out, int subs, const char *what, char *last, size_t cap)
{
	final_line(out, last, cap);
	printf("# %s: %s", what, last);
	ck_assert_msg((int)jget(last, "subs_ready") == subs, "%s: %s", what, last);
	ck_assert_msg((int)jget(last, "errors") == 0, "%s: %s", what, last);
	ck_assert_msg((int)jget(last, "subs_failed") == 0, "%s: %s", what, last);
	unlink(out);
}

/* lite-06 datagrams (draft-lcurley-moq-lite-06 6.4): a single-frame group
 * travels as a datagram on lite-06 as on lite-05, but "the total datagram
 * body MUST NOT exceed 1200 bytes ... a publisher MUST NOT send a larger one
 * and a receiver MUST silently drop it. A group whose frame does not fit is
 * simply not eligible for datagram delivery." Three runs, --datagrams on
 * every session: (1) lite-06 audio of 160-byte frames goes as datagrams
 * both ways; (2) a lite-06 publisher of 1,300-byte audio frames (520 kb/s,
 * 20 ms: within QUIC's datagram room, beyond the draft's 1,200) sends none
 * and its groups reach the relay's lite-06 subscribers on streams; (3) a
 * lite-05 publisher sends those 1,300-byte groups as datagrams (lite-05 has
 * no such bound), lite-05 subscribers get them as datagrams, lite-06
 * subscribers of the same broadcast on streams (the relay counts them too
 * large), every frame verified. */
START_TEST(datagrams_lite06_1200)
{
	struct relay r;
	char o1[] = "/tmp/moqdp-l06-d1-XXXXXX", o2[] = "/tmp/moqdp-l06-d2-XXXXXX",
	     o5[] = "/tmp/moqdp-l06-d5-XXXXXX", o6[] = "/tmp/moqdp-l06-d6-XXXXXX";
	char last[4096];
	struct moq_node_stats ns;
	pid_t p, p6;
	int st;

	/* (1) small frames: datagrams on lite-06 */
	relay_up(&r, 1);
	struct node_serve sv = {r.fd, r.ep, r.node, r.cache, &r.local};
	p = load_x(&r, "06", 1, "3", "127.0.0.2", "3", "audio", "--datagrams", o1);
	st = node_serve_until_exit(&sv, p, 30000000000ull, NULL, NULL);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "run 1: status %d", st);
	final_ok(o1, 3, "lite-06 160 B", last, sizeof(last));
	moq_node_stats(r.node, &ns);
	ck_assert_msg(jget(last, "pub_dgrams_out") > 80, "%s", last);
	ck_assert_uint_ge(ns.dgrams_in, 80);
	ck_assert_uint_eq(ns.dgrams_in_bad, 0);
	ck_assert_uint_eq(ns.dgrams_too_large, 0);
	ck_assert_msg(jget(last, "sub_dgrams_in") > 3 * 60, "%s", last);
	relay_down(&r);

	/* (2) 1,300-byte frames from a lite-06 publisher: streams only */
	relay_up(&r, 1);
	sv = (struct node_serve){r.fd, r.ep, r.node, r.cache, &r.local};
	p = load_x(&r, "06", 1, "3", "127.0.0.2", "3", "audio:520k", "--datagrams", o2);
	st = node_serve_until_exit(&sv, p, 30000000000ull, NULL, NULL);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "run 2: status %d", st);
	final_ok(o2, 3, "lite-06 1300 B", last, sizeof(last));
	moq_node_stats(r.node, &ns);
	ck_assert_msg(jget(last, "pub_dgrams_out") == 0, "%s", last);
	ck_assert_msg(jget(last, "pub_dgrams_too_large") > 80, "%s", last);
	ck_assert_uint_eq(ns.dgrams_in, 0);
	ck_assert_msg(jget(last, "sub_dgrams_in") == 0, "%s", last);
	/* ~2 s of 50 groups a second for each of the 3, on streams */
	ck_assert_msg(jget(last, "frames_ok") > 3 * 80, "%s", last);
	relay_down(&r);

	/* (3) a lite-05 publisher's 1,300-byte datagrams, lite-05 and lite-06
	 * subscribers */
	relay_up(&r, 1);
	sv = (struct node_serve){r.fd, r.ep, r.node, r.cache, &r.local};
	p6 = load_x(&r, "06", 0, "3", "127.0.0.3", "4", "audio:520k", "--datagrams", o6);
	p = load_x(&r, "05", 1, "3", "127.0.0.2", "3", "audio:520k", "--datagrams", o5);
	st = node_serve_until_exit(&sv, p, 30000000000ull, NULL, NULL);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "run 3 lite-05: status %d", st);
	st = node_serve_until_exit(&sv, p6, 30000000000ull, NULL, NULL);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "run 3 lite-06: status %d", st);
	moq_node_stats(r.node, &ns);
	printf("# relay: dgrams in %llu out %llu too large %llu bad %llu\n",
	       (unsigned long long)ns.dgrams_in, (unsigned long long)ns.dgrams_out,
	       (unsigned long long)ns.dgrams_too_large, (unsigned long long)ns.dgrams_in_bad);
	final_ok(o5, 3, "lite-05 1300 B", last, sizeof(last));
	ck_assert_msg(jget(last, "pub_dgrams_out") > 80, "%s", last);
	ck_assert_msg(jget(last, "sub_dgrams_in") > 3 * 60, "%s", last);
	final_ok(o6, 3, "lite-06 subscribers of it", last, sizeof(last));
	ck_assert_msg(jget(last, "sub_dgrams_in") == 0, "%s", last);
	ck_assert_msg(jget(last, "frames_ok") > 3 * 80, "%s", last);
	ck_assert_uint_ge(ns.dgrams_in, 80);
	ck_assert_uint_ge(ns.dgrams_too_large, 3 * 60);
	relay_down(&r);
}
END_TEST

Suite *lite06_relay_suite(void);

Suite *lite06_relay_suite(void)
{
	Suite *s = suite_create("lite06_relay");
	TCase *tc = tcase_create("relay");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, mixed_versions_one_broadcast);
	tcase_add_test(tc, datagrams_lite06_1200);
	suite_add_tcase(s, tc);
	return s;
}
