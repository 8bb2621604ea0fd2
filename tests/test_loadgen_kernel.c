/* SPDX-License-Identifier: MIT */
/*
 * test_loadgen_kernel.c: the moqdp-load program in --kernel mode, run as a
 * child process against a moq/ relay node that this test serves on a kernel
 * UDP socket on loopback (real ngtcp2 + wolfSSL on both sides). The child's
 * subscribers come from several loopback addresses; its final JSON line must
 * show every subscriber ready, media delivered and no error; a bad argument
 * exits 2 with one line.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "ietf_codec.h"
#include "media.h"
#include "moq.h"
#include "node_serve.h"
#include "proc.h"
#include "quic.h"

#ifndef MOQDP_LOAD_PATH
#error "MOQDP_LOAD_PATH must name the moqdp-load binary"
#endif

/* moqdp-load with @argv (argv[0] its path), stdout to @out_path (proc.h). */
static pid_t spawn(char *const argv[], const char *out_path)
{
	pid_t pid = proc_spawn(argv[0], (const char *const *)&argv[1], NULL, out_path, NULL);

	ck_assert_int_gt(pid, 0);
	return pid;
}

/* The value of "key": in a JSON line (numbers only). */
static double jget(const char *line, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(line, pat);
	ck_assert_msg(p != NULL, "no %s in %s", key, line);
	return strtod(p + strlen(pat), NULL);
}

/* moqdp-load --kernel against a relay node on @family's loopback
 * (127.0.0.1, or ::1 with the subscribers' sockets all on ::1, each on a
 * port of its own). */
static void run_against_relay_node_as(int family, const char *proto, int ietf_publish)
{
	struct moq_cache_counting cnt;
	moq_cache_counting_init(&cnt);
	struct moq_cache_cfg cc = {.alloc = moq_cache_counting_alloc(&cnt)};
	struct moq_cache *cache = moq_cache_create(&cc);
	struct moq_node_cfg nc = {.cache = cache, .relay = 1};
	struct moq_node *node = moq_node_create(&nc);
	ck_assert_ptr_nonnull(node);
	size_t na, k = 0;
	const char *const *la = moq_node_alpns(&na);
	static const char *alpn[24];
	/* moq-lite's ALPNs, then IETF's (as dpdk_app/relay.c) */
	for (size_t i = 0; i < na && k < 16; i++)
		alpn[k++] = la[i];
	for (int d = MOQ_IETF_LAST; d >= MOQ_IETF_FIRST; d--)
		alpn[k++] = moq_ietf_alpn(d);
	struct moq_quic_config qc = {
	        .role = MOQ_QUIC_SERVER,
	        .alpn = alpn,
	        .alpn_count = k,
	        .cb = moq_node_quic_callbacks(),
	        .user = node,
	        .retry = MOQ_QUIC_RETRY_NEVER,
	};
	struct moq_quic_endpoint *ep = moq_quic_endpoint_new(&qc, NULL);
	ck_assert_ptr_nonnull(ep);

	int fd = socket(family, SOCK_DGRAM, 0);
	struct moq_quic_addr local;
	memset(&local, 0, sizeof(local));
	if (family == AF_INET6) {
		local.u.in6.sin6_family = AF_INET6;
		local.u.in6.sin6_addr = in6addr_loopback;
		local.len = sizeof(local.u.in6);
	} else {
		local.u.in4.sin_family = AF_INET;
		local.u.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		local.len = sizeof(local.u.in4);
	}
	ck_assert_int_eq(bind(fd, &local.u.sa, local.len), 0);
	socklen_t sl = local.len;
	getsockname(fd, &local.u.sa, &sl);
	char relay[48], out[] = "/tmp/moqdp-test-load-XXXXXX";
	if (family == AF_INET6)
		snprintf(relay, sizeof(relay), "[::1]:%u", ntohs(local.u.in6.sin6_port));
	else
		snprintf(relay, sizeof(relay), "127.0.0.1:%u", ntohs(local.u.in4.sin_port));
	int ofd = mkstemp(out);
	ck_assert_int_ge(ofd, 0);
	close(ofd);

	char *argv[] = {MOQDP_LOAD_PATH,
	                "--kernel",
	                "--relay",
	                relay,
	                "--local",
	                family == AF_INET6 ? "::1/128" : "127.0.0.2",
	                "--publish",
	                "--subscribers",
	                "20",
	                "--ramp",
	                "100",
	                "--conns-per-addr",
	                "6",
	                "--duration",
	                "2.5",
	                "--tracks",
	                proto ? "video:1M:gop=30" : "video:1M:gop=30,audio",
	                "--quiet",
	                proto ? "--protocol" : NULL,
	                (char *)proto,
	                ietf_publish ? "--ietf-publish" : NULL,
	                NULL};
	pid_t pid = spawn(argv, out);
	struct node_serve sv = {fd, ep, node, cache, &local};
	int status = node_serve_until_exit(&sv, pid, 20000000000ull, NULL, NULL);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);

	/* the final JSON line */
	FILE *f = fopen(out, "r");
	char line[4096], last[4096] = "";
	int per_second = 0;
	while (fgets(line, sizeof(line), f)) {
		ck_assert_msg(line[0] == '{' && strstr(line, "}\n"), "not a JSON line: %s", line);
		if (strstr(line, "\"final\":true"))
			snprintf(last, sizeof(last), "%s", line);
		else
			per_second++;
	}
	fclose(f);
	unlink(out);
	ck_assert_msg(last[0], "no final line");
	/* a JSON line per second of the 2.5 s run */
	ck_assert_int_ge(per_second, 2);
	ck_assert_int_eq((int)jget(last, "subs_ready"), 20);
	ck_assert_int_eq((int)jget(last, "errors"), 0);
	ck_assert_int_eq((int)jget(last, "subs_failed"), 0);
	if (!proto) /* (ietf_run.c's lines have no connect_errors) */
		ck_assert_int_eq((int)jget(last, "connect_errors"), 0);
	else
		ck_assert_int_eq((int)jget(last, "ietf_errors"), 0);
	if (proto) /* IETF: video only; a PUBLISHed track's first group may
	            * have started before the relay read it (refused) */
		ck_assert_msg(jget(last, "frames_ok") > 20 * 20, "%s", last);
	else /* ~2 s of 30 video + 50 audio frames/s to 20 subscribers */
		ck_assert_msg(jget(last, "frames_ok") > 20 * 80, "%s", last);
	ck_assert_msg(jget(last, "lat_p50_us") > 0 && jget(last, "lat_p50_us") < 50000, "%s", last);

	struct moq_node_stats ns;
	moq_node_stats(node, &ns);
	ck_assert_uint_ge(ns.sessions_total, 21);
	moq_quic_endpoint_free(ep);
	moq_node_destroy(node);
	moq_cache_destroy(cache);
	close(fd);
}

static void run_against_relay_node(int family)
{
	run_against_relay_node_as(family, NULL, 0);
}

START_TEST(program_against_relay_node)
{
	run_against_relay_node(AF_INET);
}
END_TEST

/* The same over IPv6 (issue 26): --relay [::1]:PORT, 20 subscribers on
 * four sockets bound to ::1/128 (6 per address), every frame verified. */
START_TEST(program_against_relay_node_ipv6)
{
	run_against_relay_node(AF_INET6);
}
END_TEST

/* IETF moq-transport (issue 24): draft 16 over IPv6 (PUBLISH_NAMESPACE, the
 * relay subscribes), draft 20 over IPv6 and draft 14 over IPv4 with the
 * publisher PUBLISHing its track (--ietf-publish): 20 subscribers, every
 * object verified. */
START_TEST(program_ietf_ipv6)
{
	run_against_relay_node_as(AF_INET6, "ietf-16", 0);
}
END_TEST

START_TEST(program_ietf_publish)
{
	run_against_relay_node_as(AF_INET6, "ietf-20", 1);
	run_against_relay_node_as(AF_INET, "ietf-14", 1);
}
END_TEST

START_TEST(bad_arguments)
{
	const char *bad[][4] = {
	        {"--subscribers", "x", NULL, NULL},
	        {"--tracks", "video:1X", "--publish", NULL},
	        {"--relay", "nowhere", "--publish", NULL},
	        {"--bogus", NULL, NULL, NULL},
	        {"--duration", NULL, NULL, NULL},
	        {"--subscribers", "0", NULL, NULL}, /* nothing to do */
	        {"--ietf-publish", "--publish", NULL, NULL}, /* not IETF */
	        {"--max-latency", "0", "--publish", NULL},
	        {"--max-latency", "5s", "--publish", NULL},
	        /* IPv6: a bracket left open, the families apart, a bad prefix */
	        {"--relay", "[::1:4443", "--publish", NULL},
	        {"--relay", "[::1]:4443", "--local", "127.0.0.2"},
	        {"--relay", "127.0.0.1:4443", "--local", "::1"},
	        {"--relay", "[::1]:4443", "--local", "::1/129"},
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[10] = {MOQDP_LOAD_PATH, "--kernel"};
		int k = 0;
		for (; k < 4 && bad[i][k]; k++)
			argv[2 + k] = (char *)bad[i][k];
		if (k == 4) /* (the family cases: something to do) */
			argv[2 + k] = "--publish";
		pid_t pid = spawn(argv, "/dev/null");
		int status;
		waitpid(pid, &status, 0);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 2, "case %u: status %d",
		              i, status);
	}
}
END_TEST

/* --keyframe-max (issue 12): video keyframes of varying size up to the
 * value, 4 MiB at most (MOQ_LG_KEYFRAME_MAX: frames of a track spec may be
 * larger since issue 29, --keyframe-max's bound stayed), each still verified
 * by a subscriber's checks. */
START_TEST(keyframe_max_sizes)
{
	struct moq_lg_track_cfg t;
	struct moq_lg_gen g;
	struct moq_lg_rx rx;
	uint8_t *buf = malloc(MOQ_LG_FRAME_MAX);
	uint32_t lo, seen_max = 0, seen_min = UINT32_MAX;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(moq_lg_track_parse("video:16M:fps=2:gop=4:key=1", 1, &t), 0);
	lo = moq_lg_frame_size(&t, 0);
	/* without key_max: the regular keyframe */
	ck_assert_uint_eq(moq_lg_keyframe_size(&t, 7), lo);
	t.key_max = MOQ_LG_KEYFRAME_MAX;
	moq_lg_gen_init(&g, &t, 0, 0);
	moq_lg_rx_init(&rx, 1, NULL);
	for (uint64_t q = 0; q < 64; q++) {
		uint32_t k = moq_lg_keyframe_size(&t, q);
		ck_assert_uint_ge(k, lo);
		ck_assert_uint_le(k, MOQ_LG_KEYFRAME_MAX);
		seen_max = k > seen_max ? k : seen_max;
		seen_min = k < seen_min ? k : seen_min;
		/* a group as the generator writes it, verified in 64 KiB chunks */
		ck_assert_int_eq(moq_lg_rx_group_begin(&rx, q), 0);
		for (uint32_t i = 0; i < t.group_frames; i++) {
			struct moq_lg_frame_info fi;
			int len = moq_lg_gen_frame(&g, 0, buf, MOQ_LG_FRAME_MAX, &fi);
			ck_assert_int_eq(len, i == 0 ? (int)k : (int)moq_lg_frame_size(&t, i));
			ck_assert_int_eq(moq_lg_rx_frame(&rx, q, (uint64_t)len), 0);
			for (int off = 0; off < len; off += 65536) {
				int n = len - off < 65536 ? len - off : 65536;
				ck_assert_int_ge(moq_lg_rx_data(&rx, q, buf + off, (size_t)n, 1),
				                 0);
			}
		}
		ck_assert_int_eq(moq_lg_rx_group_end(&rx, q, -1), 0);
	}
	/* 4 MiB in about one group of four, the rest spread below */
	ck_assert_uint_eq(seen_max, MOQ_LG_KEYFRAME_MAX);
	ck_assert_uint_lt(seen_min, MOQ_LG_KEYFRAME_MAX / 2);
	ck_assert_uint_eq(rx.c.frames_ok, 64 * t.group_frames);
	ck_assert_uint_eq(moq_lg_counts_errors(&rx.c), 0);
	/* the same sizes every run (subscribers need not know them) */
	ck_assert_uint_eq(moq_lg_keyframe_size(&t, 0), moq_lg_keyframe_size(&t, 0));
	free(buf);

	/* bad values: one line, exit 2 */
	const char *bad[] = {"0", "47", "4194305", "5Mi", "-1", "1x", "", "4Gi"};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[] = {MOQDP_LOAD_PATH,  "--kernel",     "--publish",
		                "--keyframe-max", (char *)bad[i], NULL};
		pid_t pid = spawn(argv, "/dev/null");
		int status;
		waitpid(pid, &status, 0);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 2, "'%s': status %d",
		              bad[i], status);
	}
}
END_TEST

/* Issue 29's frames: a track spec gives frames up to MOQ_LG_FRAME_MAX
 * (16 MiB); 12 MiB x 2 per group at 8 fps is generated and verified whole,
 * in 64 KiB chunks; a spec over the cap is refused, and moqdp-load says so
 * in one line (exit 2). */
START_TEST(frames_up_to_16_mib)
{
	struct moq_lg_track_cfg t;
	struct moq_lg_gen g;
	struct moq_lg_rx rx;
	uint8_t *buf = malloc(MOQ_LG_FRAME_MAX);

	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_ge(MOQ_LG_FRAME_MAX, 12u << 20);
	ck_assert_int_eq(moq_lg_track_parse("video:805306368:fps=8:gop=2:key=1", 1, &t), 0);
	ck_assert_uint_eq(moq_lg_frame_size(&t, 0), 12u << 20);
	ck_assert_uint_eq(moq_lg_frame_size(&t, 1), 12u << 20);
	ck_assert_uint_eq(t.frame_ns, 125000000);
	moq_lg_gen_init(&g, &t, 0, 0);
	moq_lg_rx_init(&rx, 1, NULL);
	for (uint64_t q = 0; q < 2; q++) {
		ck_assert_int_eq(moq_lg_rx_group_begin(&rx, q), 0);
		for (uint32_t i = 0; i < 2; i++) {
			struct moq_lg_frame_info fi;
			int len = moq_lg_gen_frame(&g, 0, buf, MOQ_LG_FRAME_MAX, &fi);

			ck_assert_int_eq(len, 12 << 20);
			ck_assert_uint_eq(fi.group, q);
			ck_assert_int_eq(moq_lg_rx_frame(&rx, q, (uint64_t)len), 0);
			for (int off = 0; off < len; off += 65536)
				ck_assert_int_ge(moq_lg_rx_data(&rx, q, buf + off, 65536, 1), 0);
		}
		ck_assert_int_eq(moq_lg_rx_group_end(&rx, q, -1), 0);
	}
	ck_assert_uint_eq(rx.c.frames_ok, 4);
	ck_assert_uint_eq(rx.c.bytes_ok, 4ull * (12u << 20));
	ck_assert_uint_eq(moq_lg_counts_errors(&rx.c), 0);
	/* 16 MiB is the cap; 17 MiB frames are refused, by the parser and by
	 * moqdp-load */
	ck_assert_int_eq(moq_lg_track_parse("video:1073741824:fps=8:gop=1:key=1", 1, &t), 0);
	ck_assert_uint_eq(moq_lg_frame_size(&t, 0), 16u << 20);
	ck_assert_int_eq(moq_lg_track_parse("video:1140850688:fps=8:gop=1:key=1", 1, &t),
	                 MOQ_ERR_INVAL);
	{
		char *argv[] = {MOQDP_LOAD_PATH,
		                "--kernel",
		                "--publish",
		                "--tracks",
		                "video:1140850688:fps=8:gop=1:key=1",
		                NULL};
		pid_t pid = spawn(argv, "/dev/null");
		int status;

		waitpid(pid, &status, 0);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 2, "status %d", status);
	}
	free(buf);
}
END_TEST

Suite *loadgen_kernel_suite(void);
Suite *loadgen_kernel_suite(void)
{
	Suite *s = suite_create("loadgen_kernel");
	TCase *tc = tcase_create("program");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, program_against_relay_node);
	tcase_add_test(tc, program_against_relay_node_ipv6);
	tcase_add_test(tc, program_ietf_ipv6);
	tcase_add_test(tc, program_ietf_publish);
	tcase_add_test(tc, bad_arguments);
	suite_add_tcase(s, tc);
	/* issue 12: --keyframe-max */
	tc = tcase_create("keyframe_max");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, keyframe_max_sizes);
	tcase_add_test(tc, frames_up_to_16_mib);
	suite_add_tcase(s, tc);
	return s;
}
