/* SPDX-License-Identifier: MIT */
/*
 * test_loadgen_client.c: the load generator's client (loadgen/client.h)
 * against a real moq/ relay node, both on real QUIC endpoints (ngtcp2 +
 * wolfSSL) joined by quic/'s in-memory link in virtual time: a publisher and
 * subscribers from several local addresses; every frame is verified.
 */
#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "client.h"
#include "link.h"
#include "moq.h"

static struct moq_quic_addr addr4(const char *ip, uint16_t port)
{
	struct moq_quic_addr a;

	moq_quic_addr_ip4(ip, port, &a);
	return a;
}

struct relay {
	struct moq_cache_counting cnt;
	struct moq_cache *cache;
	struct moq_node *node;
	struct moq_quic_endpoint *ep;
};

static void relay_init(struct relay *r)
{
	moq_cache_counting_init(&r->cnt);
	struct moq_cache_cfg cc = {.alloc = moq_cache_counting_alloc(&r->cnt)};
	r->cache = moq_cache_create(&cc);
	ck_assert_ptr_nonnull(r->cache);
	struct moq_node_cfg nc = {.cache = r->cache, .relay = 1};
	r->node = moq_node_create(&nc);
	ck_assert_ptr_nonnull(r->node);
	size_t n;
	const char *const *alpn = moq_node_alpns(&n);
	struct moq_quic_config qc = {
	        .role = MOQ_QUIC_SERVER,
	        .alpn = alpn,
	        .alpn_count = n,
	        .cb = moq_node_quic_callbacks(),
	        .user = r->node,
	        .retry = MOQ_QUIC_RETRY_NEVER,
	};
	int e = 0;
	r->ep = moq_quic_endpoint_new(&qc, &e);
	ck_assert_msg(r->ep != NULL, "server endpoint: %d", e);
}

static void relay_free(struct relay *r)
{
	moq_quic_endpoint_free(r->ep);
	moq_node_destroy(r->node);
	moq_cache_destroy(r->cache);
}

/* Run link + both sides for @ns of virtual time. The link jumps its clock
 * to the next delivery or expiry; a 1-byte datagram towards the client (an
 * undecodable packet it drops and counts) every @tick keeps the clock from
 * jumping past the publisher's next frame. */
static void run_for(struct moq_quic_link *l, struct moq_lg_client *cl, struct relay *r,
                    const struct moq_quic_addr *relay_addr, const struct moq_quic_addr *client,
                    uint64_t ns, uint64_t *max_connecting)
{
	uint64_t end = moq_quic_link_now(l) + ns, tick_due = 0;
	const uint8_t junk = 0;
	while (moq_quic_link_now(l) < end) {
		uint64_t now = moq_quic_link_now(l);
		moq_lg_client_poll(cl, now);
		moq_node_poll(r->node, now);
		moq_cache_expire(r->cache, now);
		if (max_connecting) {
			struct moq_lg_report rp;
			moq_lg_client_report(cl, now, 0, &rp, NULL);
			if (rp.subs_connected - rp.subs_ready - rp.subs_closed > *max_connecting)
				*max_connecting =
				        rp.subs_connected - rp.subs_ready - rp.subs_closed;
		}
		if (now >= tick_due) {
			ck_assert_int_eq(moq_quic_link_inject(l, 1, &junk, 1, relay_addr, client),
			                 0);
			tick_due = now + 500000; /* the link delay */
		}
		moq_quic_link_step(l);
	}
}

START_TEST(publisher_and_subscribers_over_relay)
{
	struct relay r;
	relay_init(&r);

	struct moq_quic_addr locals[4];
	char ip[32];
	for (unsigned i = 0; i < 4; i++) {
		snprintf(ip, sizeof(ip), "10.1.0.%u", 10 + i);
		locals[i] = addr4(ip, 5000);
	}
	struct moq_lg_client_cfg cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.publish = 1;
	cfg.subscribers = 12;
	cfg.ramp_per_s = 100;
	ck_assert_int_eq(moq_lg_track_parse("video:1M:gop=15", 1, &cfg.tracks[0]), 0);
	ck_assert_int_eq(moq_lg_track_parse("audio", 2, &cfg.tracks[1]), 0);
	cfg.ntracks = 2;
	snprintf(cfg.broadcast, sizeof(cfg.broadcast), "loadgen/test");
	cfg.relay = addr4("10.1.0.1", 4443);
	cfg.locals = locals;
	cfg.nlocals = 4;
	cfg.conns_per_addr = 4;

	int e = 0;
	struct moq_lg_client *cl = moq_lg_client_create(&cfg, 1000000000ull, &e);
	ck_assert_msg(cl != NULL, "client: %d", e);
	struct moq_quic_link_config lc;
	memset(&lc, 0, sizeof(lc));
	lc.dir[0].delay_ns = lc.dir[1].delay_ns = 500000; /* 0.5 ms each way */
	lc.start_ns = 1000000000ull;
	struct moq_quic_link *l = moq_quic_link_new(&lc, moq_lg_client_endpoint(cl), r.ep);
	ck_assert_ptr_nonnull(l);

	run_for(l, cl, &r, &cfg.relay, &locals[0], 3000000000ull, NULL);

	struct moq_lg_report rep;
	struct moq_lg_client_extra ex;
	moq_lg_client_report(cl, moq_quic_link_now(l), 0, &rep, &ex);
	char line[2048];
	moq_lg_report_json(&rep, NULL, line, sizeof(line));
	fprintf(stderr, "%s\n", line);
	ck_assert_uint_eq(ex.pub_ready, 1);
	ck_assert_uint_eq(rep.subs_ready, 12);
	ck_assert_uint_eq(ex.connect_errors, 0);
	ck_assert_uint_eq(ex.subs_failed, 0);
	ck_assert_uint_eq(moq_lg_counts_errors(&rep.c), 0);
	ck_assert_uint_eq(rep.c.frames_bad_hdr, 0);
	/* ~2.5 s of media for 12 subscribers: 30 video + 50 audio frames/s */
	ck_assert_uint_gt(rep.c.frames_ok, 12 * 80);
	ck_assert_uint_gt(rep.c.groups_ok, 12 * 50);
	ck_assert_uint_eq(ex.subs_stalled, 0);
	ck_assert_uint_gt(rep.hist->n, 0);
	/* two 0.5 ms hops; frames older than a subscription are not counted */
	ck_assert_uint_ge(moq_lg_hist_pct(rep.hist, 50), 1000000);
	ck_assert_uint_lt(moq_lg_hist_pct(rep.hist, 50), 5000000);
	/* no lossy link, no budget: nothing reset */
	ck_assert_uint_eq(rep.c.groups_reset, 0);

	/* the relay fanned out to every subscriber from one upstream */
	struct moq_node_stats ns;
	moq_node_stats(r.node, &ns);
	ck_assert_uint_ge(ns.sessions, 13);
	ck_assert_uint_le(ns.upstream_subs, 2);

	/* a clean stop: every session closes without error */
	moq_lg_client_stop(cl, moq_quic_link_now(l));
	run_for(l, cl, &r, &cfg.relay, &locals[0], 200000000ull, NULL);
	moq_lg_client_report(cl, moq_quic_link_now(l), 1, &rep, &ex);
	ck_assert_uint_eq(ex.subs_failed, 0);
	ck_assert_uint_eq(moq_lg_counts_errors(&rep.c), 0);
	moq_node_stats(r.node, &ns);
	ck_assert_uint_eq(ns.sessions, 0);

	moq_quic_link_free(l);
	moq_lg_client_destroy(cl);
	relay_free(&r);
}
END_TEST

START_TEST(handshakes_bounded)
{
	struct relay r;
	relay_init(&r);
	struct moq_quic_addr local = addr4("10.1.0.10", 5000);
	struct moq_lg_client_cfg cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.publish = 1;
	cfg.subscribers = 12;
	cfg.ramp_per_s = 1000; /* all 12 within 12 ms, handshakes take ~40 ms */
	cfg.max_handshakes = 3;
	cfg.tracks[0] = moq_lg_track_audio(1);
	cfg.ntracks = 1;
	snprintf(cfg.broadcast, sizeof(cfg.broadcast), "loadgen/hs");
	cfg.relay = addr4("10.1.0.1", 4443);
	cfg.locals = &local;
	cfg.nlocals = 1;
	int e = 0;
	struct moq_lg_client *cl = moq_lg_client_create(&cfg, 1000000000ull, &e);
	ck_assert_ptr_nonnull(cl);
	struct moq_quic_link_config lc;
	memset(&lc, 0, sizeof(lc));
	lc.dir[0].delay_ns = lc.dir[1].delay_ns = 10000000; /* 10 ms each way */
	lc.start_ns = 1000000000ull;
	struct moq_quic_link *l = moq_quic_link_new(&lc, moq_lg_client_endpoint(cl), r.ep);
	uint64_t max_connecting = 0;
	run_for(l, cl, &r, &cfg.relay, &local, 1500000000ull, &max_connecting);
	struct moq_lg_report rep;
	struct moq_lg_client_extra ex;
	moq_lg_client_report(cl, moq_quic_link_now(l), 0, &rep, &ex);
	/* the ramp waited: never more than 3 subscribers in their handshake */
	ck_assert_uint_eq(max_connecting, 3);
	ck_assert_uint_eq(rep.subs_ready, 12);
	ck_assert_uint_eq(ex.subs_failed, 0);
	ck_assert_uint_gt(rep.c.frames_ok, 12);
	ck_assert_uint_eq(moq_lg_counts_errors(&rep.c), 0);
	moq_quic_link_free(l);
	moq_lg_client_destroy(cl);
	relay_free(&r);
}
END_TEST

/* The hop id the client's node announces with, made in a child process. */
static uint64_t origin_in_child(const struct moq_lg_client_cfg *cfg)
{
	int fd[2];
	uint64_t o = 0;
	ck_assert_int_eq(pipe(fd), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int e = 0;
		struct moq_lg_client *cl = moq_lg_client_create(cfg, 1000000000ull, &e);
		o = cl ? moq_lg_client_origin(cl) : 0;
		_exit(write(fd[1], &o, sizeof(o)) == (ssize_t)sizeof(o) ? 0 : 1);
	}
	close(fd[1]);
	ck_assert_int_eq(read(fd[0], &o, sizeof(o)), (int)sizeof(o));
	close(fd[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return o;
}

/* The client's hop id is its own, not derived from where its node was
 * allocated: two processes with the same allocation history (forked from
 * one state here; two ASan builds of moqdp-relay and moqdp-load, whose
 * allocator uses a fixed region, in dpdk_relay's media_over_memif) get
 * different ones. With moq/'s address-derived default the relay took the
 * publisher's announce for its own and dropped it as a loop (moq-lite 05
 * stamps the responder's id from ANNOUNCE_OK): every subscription was
 * "not found". */
START_TEST(origin_not_from_address)
{
	struct moq_quic_addr local = addr4("10.1.0.10", 5000);
	struct moq_lg_client_cfg cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.publish = 1;
	cfg.tracks[0] = moq_lg_track_audio(1);
	cfg.ntracks = 1;
	snprintf(cfg.broadcast, sizeof(cfg.broadcast), "loadgen/origin");
	cfg.relay = addr4("10.1.0.1", 4443);
	cfg.locals = &local;
	cfg.nlocals = 1;
	uint64_t a = origin_in_child(&cfg), b = origin_in_child(&cfg);
	ck_assert_uint_ne(a, 0);
	ck_assert_uint_ne(b, 0);
	ck_assert_uint_lt(a, 1ull << 62); /* a varint */
	ck_assert_msg(a != b, "two processes, one hop id %llx", (unsigned long long)a);
	/* one given in the configuration is used */
	cfg.origin = 0x1234;
	int e = 0;
	struct moq_lg_client *cl = moq_lg_client_create(&cfg, 1000000000ull, &e);
	ck_assert_ptr_nonnull(cl);
	ck_assert_uint_eq(moq_lg_client_origin(cl), 0x1234);
	moq_lg_client_destroy(cl);
}
END_TEST

/* End to end over the in-memory link: the relay learns the publisher's
 * broadcast (its loop prevention refused nothing) and both subscribers get
 * media. */
START_TEST(announce_reaches_relay)
{
	struct relay r;
	relay_init(&r);
	struct moq_quic_addr local = addr4("10.1.0.10", 5000);
	struct moq_lg_client_cfg cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.publish = 1;
	cfg.subscribers = 2;
	cfg.tracks[0] = moq_lg_track_audio(1);
	cfg.ntracks = 1;
	snprintf(cfg.broadcast, sizeof(cfg.broadcast), "loadgen/announce");
	cfg.relay = addr4("10.1.0.1", 4443);
	cfg.locals = &local;
	cfg.nlocals = 1;
	int e = 0;
	struct moq_lg_client *cl = moq_lg_client_create(&cfg, 1000000000ull, &e);
	ck_assert_ptr_nonnull(cl);
	struct moq_quic_link_config lc;
	memset(&lc, 0, sizeof(lc));
	lc.dir[0].delay_ns = lc.dir[1].delay_ns = 2000000;
	lc.start_ns = 1000000000ull;
	struct moq_quic_link *l = moq_quic_link_new(&lc, moq_lg_client_endpoint(cl), r.ep);
	ck_assert_ptr_nonnull(l);
	run_for(l, cl, &r, &cfg.relay, &local, 1500000000ull, NULL);
	struct moq_node_stats ns;
	struct moq_lg_report rep;
	struct moq_lg_client_extra ex;
	moq_node_stats(r.node, &ns);
	moq_lg_client_report(cl, moq_quic_link_now(l), 0, &rep, &ex);
	ck_assert_uint_ne(moq_lg_client_origin(cl), moq_node_origin(r.node));
	ck_assert_uint_eq(ns.loops_refused, 0);
	ck_assert_uint_eq(ns.broadcasts, 1);
	ck_assert_uint_eq(rep.subs_ready, 2);
	ck_assert_uint_gt(rep.c.frames_ok, 2 * 40);
	ck_assert_uint_eq(moq_lg_counts_errors(&rep.c), 0);
	moq_quic_link_free(l);
	moq_lg_client_destroy(cl);
	relay_free(&r);
}
END_TEST

START_TEST(bad_config_refused)
{
	struct moq_quic_addr local = addr4("10.1.0.2", 5000);
	struct moq_lg_client_cfg cfg;
	int e = 0;
	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.broadcast, sizeof(cfg.broadcast), "x");
	cfg.locals = &local;
	cfg.nlocals = 1;
	cfg.publish = 1;
	/* no tracks */
	ck_assert_ptr_null(moq_lg_client_create(&cfg, 1, &e));
	ck_assert_int_eq(e, MOQ_ERR_INVAL);
	cfg.tracks[0] = moq_lg_track_audio(1);
	cfg.ntracks = 1;
	/* no local address */
	cfg.nlocals = 0;
	e = 0;
	ck_assert_ptr_null(moq_lg_client_create(&cfg, 1, &e));
	ck_assert_int_eq(e, MOQ_ERR_INVAL);
	/* nothing to do */
	cfg.nlocals = 1;
	cfg.publish = 0;
	e = 0;
	ck_assert_ptr_null(moq_lg_client_create(&cfg, 1, &e));
	ck_assert_int_eq(e, MOQ_ERR_INVAL);
	/* and a good one */
	cfg.subscribers = 1;
	struct moq_lg_client *cl = moq_lg_client_create(&cfg, 1, &e);
	ck_assert_ptr_nonnull(cl);
	moq_lg_client_destroy(cl);
}
END_TEST

/* Write @gen's due frames into @t (a track of the relay's own cache, a
 * broadcast the relay publishes itself) up to @now. */
static void relay_publish_due(struct moq_cache_track *t, struct moq_lg_gen *gen, uint8_t *buf,
                              uint64_t now)
{
	while (moq_lg_gen_next(gen) <= now) {
		struct moq_lg_frame_info fi;
		int len = moq_lg_gen_frame(gen, now, buf, MOQ_LG_FRAME_MAX, &fi);
		ck_assert_int_gt(len, 0);
		struct moq_cache_group *g = NULL;
		ck_assert_int_eq(moq_cache_group_open(t, fi.group, now, &g), 0);
		ck_assert_int_eq(moq_cache_write_frame(g, fi.pts_us, buf, (size_t)len), 0);
		moq_cache_group_finish(g);
		moq_cache_group_unref(g);
	}
}

/* Subscribers whose broadcast is not there yet are refused "not found" and
 * retry every MOQ_LG_RETRY_NS (the client walks its subscribers only when a
 * retry is due); once the relay has the broadcast every subscription gets
 * through and every frame verifies, and the retries stop. */
START_TEST(subscriptions_retried_until_announced)
{
	struct relay r;
	relay_init(&r);
	struct moq_quic_addr local = addr4("10.1.0.10", 5000);
	struct moq_lg_client_cfg cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.subscribers = 3;
	cfg.tracks[0] = moq_lg_track_audio(1);
	cfg.ntracks = 1;
	snprintf(cfg.broadcast, sizeof(cfg.broadcast), "loadgen/late");
	cfg.relay = addr4("10.1.0.1", 4443);
	cfg.locals = &local;
	cfg.nlocals = 1;
	int e = 0;
	struct moq_lg_client *cl = moq_lg_client_create(&cfg, 1000000000ull, &e);
	ck_assert_ptr_nonnull(cl);
	struct moq_quic_link_config lc;
	memset(&lc, 0, sizeof(lc));
	lc.dir[0].delay_ns = lc.dir[1].delay_ns = 1000000;
	lc.start_ns = 1000000000ull;
	struct moq_quic_link *l = moq_quic_link_new(&lc, moq_lg_client_endpoint(cl), r.ep);
	ck_assert_ptr_nonnull(l);

	/* 0.7 s without the broadcast: refused, retried (~3 times each) */
	run_for(l, cl, &r, &cfg.relay, &local, 700000000ull, NULL);
	struct moq_lg_report rep;
	struct moq_lg_client_extra ex;
	moq_lg_client_report(cl, moq_quic_link_now(l), 0, &rep, &ex);
	ck_assert_uint_eq(rep.subs_ready, 3);
	ck_assert_uint_eq(rep.c.frames_ok, 0);
	ck_assert_uint_ge(ex.sub_retries, 3 * 2);
	ck_assert_uint_le(ex.sub_retries, 3 * 4);
	ck_assert_uint_eq(ex.sub_refused, 0);

	/* the relay publishes it itself, frames follow every 20 ms */
	struct moq_cache_track *t = NULL;
	struct moq_cache_track_cfg tc = {0};
	ck_assert_int_eq(moq_cache_track_create(r.cache, "loadgen/late", 12, "audio", 5, &tc, &t),
	                 0);
	ck_assert_int_eq(moq_node_publish(r.node, "loadgen/late", 12, 1000000), 0);
	struct moq_lg_gen gen;
	uint64_t t0 = moq_quic_link_now(l);
	moq_lg_gen_init(&gen, &cfg.tracks[0], t0, 7);
	uint8_t *buf = malloc(MOQ_LG_FRAME_MAX);
	ck_assert_ptr_nonnull(buf);
	const uint8_t junk = 0;
	uint64_t tick_due = 0;
	while (moq_quic_link_now(l) < t0 + 1000000000ull) {
		uint64_t now = moq_quic_link_now(l);
		relay_publish_due(t, &gen, buf, now);
		moq_lg_client_poll(cl, now);
		moq_node_poll(r.node, now);
		moq_cache_expire(r.cache, now);
		/* keeps the link's clock from jumping past the next frame (as
		 * run_for) */
		if (now >= tick_due) {
			ck_assert_int_eq(moq_quic_link_inject(l, 1, &junk, 1, &cfg.relay, &local),
			                 0);
			tick_due = now + 500000;
		}
		moq_quic_link_step(l);
	}
	uint64_t retries = 0;
	moq_lg_client_report(cl, moq_quic_link_now(l), 0, &rep, &ex);
	retries = ex.sub_retries;
	ck_assert_uint_eq(moq_lg_counts_errors(&rep.c), 0);
	/* ~1 s of 50 frames/s to each, less the first retry's wait */
	ck_assert_uint_gt(rep.c.frames_ok, 3 * 30);
	ck_assert_uint_eq(ex.sub_refused, 0);
	/* no more retries once subscribed */
	run_for(l, cl, &r, &cfg.relay, &local, 500000000ull, NULL);
	moq_lg_client_report(cl, moq_quic_link_now(l), 0, &rep, &ex);
	ck_assert_uint_eq(ex.sub_retries, retries);

	free(buf);
	moq_cache_track_unref(t);
	moq_quic_link_free(l);
	moq_lg_client_destroy(cl);
	relay_free(&r);
}
END_TEST

/* moq_lg_heap_hugepages in a child process (it changes malloc's settings
 * for the rest of the process): bad sizes refused; a good one marks part of
 * the brk heap (or nothing under a sanitizer's allocator) and malloc keeps
 * working over it. */
START_TEST(heap_hugepages)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int ok = moq_lg_heap_hugepages(1u << 20) == MOQ_ERR_INVAL &&
		         moq_lg_heap_hugepages((size_t)2 << 30) == MOQ_ERR_INVAL;
		long marked = moq_lg_heap_hugepages(64u << 20);
		ok = ok && (marked >= 0 || marked == MOQ_ERR_IO) && marked <= (64l << 20);
		for (int i = 0; ok && i < 64; i++) {
			uint8_t *p = malloc(100000);
			if (!p) {
				ok = 0;
				break;
			}
			memset(p, i, 100000);
			ok = p[99999] == (uint8_t)i;
			free(p);
		}
		_exit(ok ? 0 : 1);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

Suite *loadgen_client_suite(void);
Suite *loadgen_client_suite(void)
{
	Suite *s = suite_create("loadgen_client");
	TCase *tc = tcase_create("client");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, publisher_and_subscribers_over_relay);
	tcase_add_test(tc, handshakes_bounded);
	tcase_add_test(tc, bad_config_refused);
	tcase_add_test(tc, origin_not_from_address);
	tcase_add_test(tc, announce_reaches_relay);
	tcase_add_test(tc, subscriptions_retried_until_announced);
	tcase_add_test(tc, heap_hugepages);
	suite_add_tcase(s, tc);
	return s;
}
