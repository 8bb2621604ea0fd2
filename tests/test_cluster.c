/* SPDX-License-Identifier: MIT */
/*
 * test_cluster.c: relay-to-relay (issue 17; AUTH-CLUSTER.md, Relay-to-relay).
 * moqdp-relay processes on the kernel backend on loopback dial each other
 * with --cluster-connect; moqdp-load publishes at one and verifies every
 * frame its subscribers get at others. Cases:
 *  - three relays: origin O, edges E1 and E2 connected to O; subscribers at
 *    both edges verify every frame; O holds one subscription per track per
 *    edge and one upstream per track; E1 is killed: E2's subscribers see no
 *    gap and O frees what E1 held; E1 comes back, its subscribers resume;
 *    an edge keeps its upstream for --upstream-hold after its last viewer;
 *  - a loop O <-> E1 <-> E2 <-> O carries the broadcast once per relay and
 *    no announce circulates;
 *  - two publishers of one path at O and E2: every relay ends on the same
 *    one (moq_route_hash);
 *  - tokens on links: an edge with a broad token connects, one without is
 *    refused (6);
 *  - failover: an edge with two routes (through two mid-tier relays) loses
 *    the live one and its viewers go on over the other;
 *  - costs (lite-06 links): of two such routes the cheaper wins (the mid
 *    relays' --route-cost), in both orientations; the standby takes over;
 *  - option errors (a bad scheme, a missing --cluster-ca, a dpdk edge with
 *    no address of its peer's family)
 *    and moq_route_hash against an independent FNV-1a;
 *  - a WebTransport link (https://): an edge dials the origin with ALPN h3
 *    and its --cluster-token as ?jwt= of the CONNECT :path; the origin
 *    counts it as a WebTransport session, holds one subscription per track
 *    for it, and the edge's subscribers verify every frame; an edge
 *    without a token is refused and keeps re-dialling.
 * Every wait is bounded; every child is killed in teardown.
 *
 * tests/fixtures/auth/cluster.jwt: claims {root "", put [""], get [""],
 * exp 2100-01-01}, HS256 with hs256.jwk's key (minted with node's crypto as
 * mint.js does).
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "moq.h"
#include "proc.h"

#ifndef MOQDP_RELAY_PATH
#error "MOQDP_RELAY_PATH must name the moqdp-relay binary"
#endif

#define MAX_PROCS 16
/* Subscribers per edge in the three-relay case (the issue asks 500; the
 * 2-core machine runs three busy-polling relays and the load generators
 * beside other suites; 200 per edge lost groups to CPU starvation at a
 * load average of 11): MOQDP_TEST_CLUSTER_SUBS overrides. */
#define EDGE_SUBS 100
/* moqdp-load's default tracks: video and audio. */
#define TRACKS 2

struct proc {
	pid_t pid;
	char err[96];
	char prefix[64]; /* EAL --file-prefix of a relay ("" for moqdp-load) */
};

static struct proc procs[MAX_PROCS];

struct relay {
	struct proc *p;
	unsigned int udp, mport;
	char tag[16];
	char url[64]; /* moql://127.0.0.1:udp/ */
};

/* Start @prog with @args (NULL-terminated), stderr to a file of its own. */
static struct proc *spawn(const char *prog, const char *const *args, const char *tag)
{
	struct proc *p = NULL;

	for (int i = 0; i < MAX_PROCS; i++)
		if (procs[i].pid <= 0) {
			p = &procs[i];
			break;
		}
	ck_assert_ptr_nonnull(p);
	memset(p, 0, sizeof(*p));
	snprintf(p->err, sizeof(p->err), "/tmp/moqdp-cluster-test-%d-%s.err", (int)getpid(), tag);
	snprintf(p->prefix, sizeof(p->prefix), "%s", proc_file_prefix(args));
	p->pid = proc_spawn(prog, args, NULL, NULL, p->err);
	ck_assert_int_gt(p->pid, 0);
	return p;
}

/* Wait up to @ms for @p to exit: its exit status, or -1 (then killed, or
 * ended by a signal). */
static int wait_proc(struct proc *p, unsigned int ms)
{
	int rc = proc_wait(p->pid, ms);

	p->pid = -1;
	proc_rm_runtime_dir(p->prefix);
	return rc > 127 ? -1 : rc;
}

static void stop_proc(struct proc *p, int sig)
{
	if (p->pid > 0) {
		kill(p->pid, sig);
		wait_proc(p, 10000);
	}
}

static void teardown(void)
{
	for (int i = 0; i < MAX_PROCS; i++)
		if (procs[i].pid > 0) {
			kill(procs[i].pid, SIGKILL);
			waitpid(procs[i].pid, NULL, 0);
			procs[i].pid = -1;
			proc_rm_runtime_dir(procs[i].prefix);
			unlink(procs[i].err);
		}
}

static char *http_get(unsigned int port, const char *path)
{
	return proc_http_get(NULL, port, path);
}

/* The value of metric @name (with its labels) in a /metrics body, or -1. */
static long long metric(const char *body, const char *name)
{
	return proc_metric(body, name);
}

static long long relay_metric(const struct relay *r, const char *name)
{
	return metric(http_get(r->mport, "/metrics"), name);
}

/* Poll @r's /metrics up to @ms until @name equals @want; its last value. */
static long long wait_metric(const struct relay *r, const char *name, long long want,
                             unsigned int ms)
{
	uint64_t end = proc_now_ms() + ms;
	long long v;

	while ((v = relay_metric(r, name)) != want && proc_now_ms() < end)
		usleep(100000);
	return v;
}

/* ... until @name is at least @want. */
static long long wait_metric_ge(const struct relay *r, const char *name, long long want,
                                unsigned int ms)
{
	uint64_t end = proc_now_ms() + ms;
	long long v;

	while ((v = relay_metric(r, name)) < want && proc_now_ms() < end)
		usleep(100000);
	return v;
}

/* The link metric @what of @r towards peer @peer. */
static long long link_metric(const struct relay *r, const char *what, const struct relay *peer)
{
	char name[160];

	snprintf(name, sizeof(name), "moqdp_cluster_link_%s{peer=\"%s\"}", what, peer->url);
	return relay_metric(r, name);
}

static long long wait_link(const struct relay *r, const char *what, const struct relay *peer,
                           long long want, unsigned int ms)
{
	char name[160];

	snprintf(name, sizeof(name), "moqdp_cluster_link_%s{peer=\"%s\"}", what, peer->url);
	return wait_metric(r, name, want, ms);
}

/* Start relay @r (kernel backend on 127.0.0.1, its UDP port @udp, /metrics
 * on udp + 1) with the extra relay options @extra. */
static void relay_start(struct relay *r, const char *tag, unsigned int udp,
                        const char *const *extra)
{
	static char sudp[8][16], mgmt[8][32], prefix[8][80];
	static unsigned int k;
	const char *args[48];
	unsigned int n = 0, i = k++ % 8;
	uint64_t end;

	snprintf(r->tag, sizeof(r->tag), "%s", tag);
	r->udp = udp;
	r->mport = udp + 1;
	snprintf(r->url, sizeof(r->url), "moql://127.0.0.1:%u/", udp);
	snprintf(sudp[i], sizeof(sudp[i]), "%u", udp);
	snprintf(mgmt[i], sizeof(mgmt[i]), "127.0.0.1:%u", r->mport);
	snprintf(prefix[i], sizeof(prefix[i]), "--file-prefix=moqdp-cl-%s-%d", tag, (int)getpid());
	for (const char *a0[] = {prefix[i], "--no-huge", "-m", "256", "--no-pci", "-l", "0-1", "--",
	                         "--backend", "kernel", "--listen", "127.0.0.1", "--port", sudp[i],
	                         "--mgmt", mgmt[i], "--stats-interval", "0", NULL},
	                *const *a = a0;
	     *a; a++)
		args[n++] = *a;
	for (; *extra && n < 47; extra++)
		args[n++] = *extra;
	args[n] = NULL;
	r->p = spawn(MOQDP_RELAY_PATH, args, tag);
	end = proc_now_ms() + 20000;
	while (http_get(r->mport, "/health") == NULL && proc_now_ms() < end)
		usleep(50000);
	ck_assert_msg(http_get(r->mport, "/health") != NULL, "%s: %s", tag, proc_slurp(r->p->err));
}

/* moqdp-load --kernel at @r from @local with @more arguments, in the
 * background. */
static struct proc *load_start(const struct relay *r, const char *local, const char *tag,
                               const char *const *more)
{
	static char relay[8][40];
	static unsigned int k;
	const char *args[40];
	unsigned int n = 0, i = k++ % 8;

	snprintf(relay[i], sizeof(relay[i]), "127.0.0.1:%u", r->udp);
	args[n++] = "--kernel";
	args[n++] = "--relay";
	args[n++] = relay[i];
	args[n++] = "--local";
	args[n++] = local;
	for (; *more && n < 38; more++)
		args[n++] = *more;
	args[n++] = "--quiet";
	args[n] = NULL;
	return spawn(MOQDP_LOAD_PATH, args, tag);
}

/* Frames verified, groups missing and errors of a finished moqdp-load. */
static void load_result(struct proc *p, unsigned int ms, int want_rc, unsigned long long *delivered,
                        unsigned long long *missing, unsigned long long *errors)
{
	int rc = wait_proc(p, ms);
	const char *out = proc_slurp(p->err), *q;

	ck_assert_msg(rc == want_rc, "moqdp-load exit %d: %s", rc, out);
	q = strstr(out, "delivered ");
	ck_assert_msg(q && sscanf(q, "delivered %llu frames verified", delivered) == 1, "%s", out);
	q = strstr(q, "reset, ");
	ck_assert_msg(q && sscanf(q, "reset, %llu missing", missing) == 1, "%s", out);
	q = strstr(out, "errors ");
	ck_assert_msg(q && sscanf(q, "errors %llu", errors) == 1, "%s", out);
}

static unsigned int base_port(unsigned int salt)
{
	return 20000 + ((unsigned int)getpid() * 7 + salt * 10) % 30000;
}

static unsigned int edge_subs(void)
{
	const char *e = getenv("MOQDP_TEST_CLUSTER_SUBS");

	return e && atoi(e) > 0 ? (unsigned int)atoi(e) : EDGE_SUBS;
}

/* ------------------------------------------------------------ three relays */

START_TEST(three_relays)
{
	unsigned int b = base_port(1), nsub = edge_subs();
	struct relay o, e1, e2;
	char subs[16], oarg[64];
	const char *edge_args[] = {"--cluster-connect",
	                           oarg,
	                           "--cluster-ca",
	                           "insecure",
	                           "--upstream-hold",
	                           "3s",
	                           NULL};
	const char *none[] = {NULL};
	const char *pub[] = {"--publish", "--duration", "90", NULL};
	const char *sub18[] = {"--subscribers", subs, "--duration", "18", NULL};
	const char *sub5[] = {"--subscribers", subs, "--duration", "5", NULL};
	unsigned long long d1 = 0, d2 = 0, m = 1, e = 1, d1b = 0;
	long long osubs, oups, l1, l2, e2subs;
	struct proc *pp, *s1, *s2;
	uint64_t t_kill;
	double freed_s;

	snprintf(subs, sizeof(subs), "%u", nsub);
	relay_start(&o, "o", b, none);
	snprintf(oarg, sizeof(oarg), "%s", o.url);
	relay_start(&e1, "e1", b + 2, edge_args);
	relay_start(&e2, "e2", b + 4, edge_args);
	ck_assert_int_eq(wait_link(&e1, "state", &o, 2, 15000), 2);
	ck_assert_int_eq(wait_link(&e2, "state", &o, 2, 15000), 2);
	/* the publisher at O; its broadcast reaches both edges over the links */
	pp = load_start(&o, "127.0.3.1", "pub", pub);
	ck_assert_int_eq(wait_metric(&e1, "moqdp_broadcasts", 1, 15000), 1);
	ck_assert_int_eq(wait_metric(&e2, "moqdp_broadcasts", 1, 15000), 1);
	s1 = load_start(&e1, "127.0.1.1", "s1", sub18);
	s2 = load_start(&e2, "127.0.2.1", "s2", sub18);
	/* every subscriber at both edges reads both tracks */
	ck_assert_int_eq(wait_metric(&e1, "moqdp_subscribers", nsub * TRACKS, 30000),
	                 nsub * TRACKS);
	ck_assert_int_eq(wait_metric(&e2, "moqdp_subscribers", nsub * TRACKS, 30000),
	                 nsub * TRACKS);
	/* O: one subscription per track per edge, one upstream per track */
	osubs = wait_metric(&o, "moqdp_subscribers", 2 * TRACKS, 5000);
	oups = relay_metric(&o, "moqdp_upstream_subscriptions");
	l1 = link_metric(&e1, "upstream_subscriptions", &o);
	l2 = link_metric(&e2, "upstream_subscriptions", &o);
	ck_assert_int_eq(osubs, 2 * TRACKS);
	ck_assert_int_eq(oups, TRACKS);
	ck_assert_int_eq(l1, TRACKS);
	ck_assert_int_eq(l2, TRACKS);
	ck_assert_int_gt(link_metric(&e1, "received_bytes_total", &o), 0);
	/* E1 dies: E2's subscribers go on without a gap */
	sleep(2);
	kill(e1.p->pid, SIGKILL);
	t_kill = proc_now_ms();
	wait_proc(e1.p, 5000);
	/* O notices the lost edge (the link's 5 s idle timeout) and frees its
	 * subscriptions, while E2's viewers go on */
	ck_assert_int_eq(wait_metric(&o, "moqdp_subscribers", TRACKS, 12000), TRACKS);
	freed_s = (double)(proc_now_ms() - t_kill) / 1000;
	ck_assert_int_eq(relay_metric(&e2, "moqdp_subscribers"), nsub * TRACKS);
	load_result(s2, 60000, 0, &d2, &m, &e);
	ck_assert_uint_gt(d2, 100);
	ck_assert_uint_eq(m, 0);
	ck_assert_uint_eq(e, 0);
	wait_proc(s1, 30000); /* its relay is gone */
	/* E2's viewers left: its upstreams stay for --upstream-hold (3 s),
	 * then close; O frees E2's */
	ck_assert_int_eq(wait_metric(&e2, "moqdp_subscribers", 0, 10000), 0);
	e2subs = link_metric(&e2, "upstream_subscriptions", &o);
	ck_assert_int_eq(e2subs, TRACKS);
	ck_assert_int_eq(wait_link(&e2, "upstream_subscriptions", &o, 0, 8000), 0);
	ck_assert_int_eq(wait_metric(&o, "moqdp_subscribers", 0, 5000), 0);
	/* E1 comes back: its link and its subscribers resume */
	relay_start(&e1, "e1", b + 2, edge_args);
	ck_assert_int_eq(wait_link(&e1, "state", &o, 2, 15000), 2);
	ck_assert_int_eq(wait_metric(&e1, "moqdp_broadcasts", 1, 15000), 1);
	s1 = load_start(&e1, "127.0.1.1", "s1b", sub5);
	load_result(s1, 60000, 0, &d1b, &m, &e);
	ck_assert_uint_gt(d1b, 100);
	ck_assert_uint_eq(m, 0);
	ck_assert_uint_eq(e, 0);
	(void)d1;
	fprintf(stderr,
	        "three_relays: %u subscribers per edge; E2 verified %llu frames across E1's "
	        "kill (0 groups missing); E1 after its restart %llu; O held %lld subscriptions "
	        "(%d tracks x 2 edges) and %lld upstream subscriptions; each edge %lld over its "
	        "link; O freed E1's %.1f s after the kill\n",
	        nsub, d2, d1b, osubs, TRACKS, oups, l1, freed_s);
	stop_proc(pp, SIGKILL);
	stop_proc(e1.p, SIGTERM);
	stop_proc(e2.p, SIGTERM);
	ck_assert_int_eq(wait_proc(o.p, 100), -1); /* still running */
}
END_TEST

/* ------------------------------------------------------------------ loop */

START_TEST(loop_of_three)
{
	unsigned int b = base_port(2);
	struct relay o, e1, e2;
	char to_o[64], to_e1[64], to_e2[64];
	const char *oargs[] = {"--cluster-connect", to_e2, "--cluster-ca", "insecure", NULL};
	const char *e1args[] = {"--cluster-connect", to_o, "--cluster-ca", "insecure", NULL};
	const char *e2args[] = {"--cluster-connect", to_e1, "--cluster-ca", "insecure", NULL};
	const char *pub[] = {"--publish", "--duration", "60", NULL};
	const char *sub[] = {"--subscribers", "20", "--duration", "5", NULL};
	unsigned long long d = 0, m = 1, e = 1;
	long long drop1[3], drop2[3];
	struct relay *all[3] = {&o, &e1, &e2};
	struct proc *pp, *s1, *s2;

	snprintf(to_o, sizeof(to_o), "moql://127.0.0.1:%u/", b);
	snprintf(to_e1, sizeof(to_e1), "moql://127.0.0.1:%u/", b + 2);
	snprintf(to_e2, sizeof(to_e2), "moql://127.0.0.1:%u/", b + 4);
	relay_start(&o, "lo", b, oargs);
	relay_start(&e1, "le1", b + 2, e1args);
	relay_start(&e2, "le2", b + 4, e2args);
	ck_assert_int_eq(wait_link(&o, "state", &e2, 2, 20000), 2);
	ck_assert_int_eq(wait_link(&e1, "state", &o, 2, 20000), 2);
	ck_assert_int_eq(wait_link(&e2, "state", &e1, 2, 20000), 2);
	pp = load_start(&o, "127.0.3.1", "lpub", pub);
	for (int i = 1; i < 3; i++)
		ck_assert_int_eq(wait_metric(all[i], "moqdp_broadcasts", 1, 15000), 1);
	sleep(2); /* every route announced around the loop has arrived */
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(relay_metric(all[i], "moqdp_broadcasts"), 1);
		drop1[i] = relay_metric(all[i], "moqdp_cluster_announces_dropped_total");
		ck_assert_int_ge(drop1[i], 0);
	}
	s1 = load_start(&e1, "127.0.1.1", "ls1", sub);
	s2 = load_start(&e2, "127.0.2.1", "ls2", sub);
	ck_assert_int_eq(wait_metric(&e2, "moqdp_subscribers", 20 * TRACKS, 20000), 20 * TRACKS);
	ck_assert_int_eq(wait_metric(&e1, "moqdp_subscribers", 20 * TRACKS, 20000), 20 * TRACKS);
	/* once per relay: each holds one upstream per track, E2 over its
	 * shorter route (O's link, 2 hops, not E1's, 3) */
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(relay_metric(all[i], "moqdp_upstream_subscriptions"), TRACKS);
	ck_assert_int_eq(link_metric(&e1, "upstream_subscriptions", &o), TRACKS);
	ck_assert_int_eq(link_metric(&e2, "upstream_subscriptions", &e1), 0);
	/* O: E1's subscriptions and E2's (over O's own link to E2) */
	ck_assert_int_eq(relay_metric(&o, "moqdp_subscribers"), 2 * TRACKS);
	load_result(s1, 60000, 0, &d, &m, &e);
	ck_assert_uint_gt(d, 100);
	ck_assert_uint_eq(m + e, 0);
	load_result(s2, 60000, 0, &d, &m, &e);
	ck_assert_uint_gt(d, 100);
	ck_assert_uint_eq(m + e, 0);
	/* nothing circulates: the dropped counters stood still meanwhile */
	for (int i = 0; i < 3; i++) {
		drop2[i] = relay_metric(all[i], "moqdp_cluster_announces_dropped_total");
		ck_assert_int_eq(drop2[i], drop1[i]);
		ck_assert_int_le(drop2[i], 4);
	}
	fprintf(stderr, "loop_of_three: reflected announces dropped O %lld E1 %lld E2 %lld\n",
	        drop2[0], drop2[1], drop2[2]);
	stop_proc(pp, SIGKILL);
}
END_TEST

/* ------------------------------------------------------ two publishers */

START_TEST(two_publishers_one_route)
{
	unsigned int b = base_port(3);
	struct relay o, e1, e2;
	char oarg[64];
	const char *edge_args[] = {"--cluster-connect", oarg, "--cluster-ca", "insecure", NULL};
	const char *none[] = {NULL};
	const char *pubs[] = {"--publish", "--duration", "60", NULL};
	const char *sub[] = {"--subscribers", "5", "--duration", "10", NULL};
	struct proc *pa, *pb, *s0, *s1, *s2;
	unsigned long long d = 0, m = 1, e = 1;
	long long e2link, e2subs, oups;
	int same;

	/* Each relay hears its own publisher first and the other's over the
	 * link later: E2 and publisher B first (its link to O still failing),
	 * then O and publisher A at once. A relay that took the newest route
	 * would read B through E2 at O and A through O at E2: a loop. */
	snprintf(oarg, sizeof(oarg), "moql://127.0.0.1:%u/", b);
	relay_start(&e2, "pe2", b + 4, edge_args);
	pb = load_start(&e2, "127.0.4.1", "pb", pubs);
	ck_assert_int_eq(wait_metric(&e2, "moqdp_broadcasts", 1, 15000), 1);
	relay_start(&o, "po", b, none);
	pa = load_start(&o, "127.0.3.1", "pa", pubs);
	relay_start(&e1, "pe1", b + 2, edge_args);
	ck_assert_int_eq(wait_link(&e1, "state", &o, 2, 15000), 2);
	ck_assert_int_eq(wait_link(&e2, "state", &o, 2, 20000), 2);
	ck_assert_int_eq(wait_metric(&e1, "moqdp_broadcasts", 1, 15000), 1);
	/* once the routes settled, viewers at every relay (moqdp-load's
	 * viewers do not subscribe again after a restart) */
	sleep(3);
	s0 = load_start(&o, "127.0.5.1", "ps0", sub);
	s1 = load_start(&e1, "127.0.1.1", "ps1", sub);
	s2 = load_start(&e2, "127.0.2.1", "ps2", sub);
	ck_assert_int_eq(wait_metric(&e1, "moqdp_subscribers", 5 * TRACKS, 20000), 5 * TRACKS);
	ck_assert_int_ge(wait_metric_ge(&e2, "moqdp_subscribers", 5 * TRACKS, 20000), 5 * TRACKS);
	ck_assert_int_ge(wait_metric_ge(&o, "moqdp_subscribers", 5 * TRACKS + TRACKS, 20000),
	                 5 * TRACKS + TRACKS);
	sleep(3);
	/* the same route everywhere: E2 reads A through O (its link carries
	 * the upstreams), or O reads B through E2 (E2 serves O's link one
	 * subscription per track beside its own 5 viewers'); E1 follows O */
	e2link = link_metric(&e2, "upstream_subscriptions", &o);
	e2subs = relay_metric(&e2, "moqdp_subscribers");
	oups = relay_metric(&o, "moqdp_upstream_subscriptions");
	same = (e2link == TRACKS && e2subs == 5 * TRACKS) ||
	       (e2link == 0 && e2subs == 5 * TRACKS + TRACKS);
	ck_assert_msg(same, "E2 link upstreams %lld, E2 subscribers %lld, O upstreams %lld", e2link,
	              e2subs, oups);
	/* O: its 5 viewers and E1's link (one per track), plus... nothing
	 * else when it reads A; E2 does not subscribe at O when it reads B */
	ck_assert_int_eq(relay_metric(&o, "moqdp_subscribers"),
	                 5 * TRACKS + TRACKS + (e2link ? TRACKS : 0));
	ck_assert_int_eq(oups, TRACKS);
	ck_assert_int_eq(link_metric(&e1, "upstream_subscriptions", &o), TRACKS);
	fprintf(stderr, "two_publishers_one_route: every relay reads %s\n",
	        e2link ? "O's publisher" : "E2's publisher");
	/* and the media flows to every viewer, uncorrupted and in order */
	{
		struct proc *v[3] = {s0, s1, s2};
		for (int i = 0; i < 3; i++) {
			load_result(v[i], 60000, 0, &d, &m, &e);
			fprintf(stderr,
			        "two_publishers_one_route: viewers at %s: %llu frames, %llu "
			        "groups missing, %llu errors\n",
			        i == 0   ? "O"
			        : i == 1 ? "E1"
			                 : "E2",
			        d, m, e);
			ck_assert_uint_gt(d, 100);
			ck_assert_uint_eq(e, 0);
			ck_assert_uint_eq(m, 0);
		}
	}
	stop_proc(pa, SIGKILL);
	stop_proc(pb, SIGKILL);
}
END_TEST

/* ----------------------------------------------------------- failover */

/* Origin @o, mid-tier relays @m1 and @m2 dialling it (@mid1, @mid2: their
 * options, which name @oarg), edge @e dialling both (@edge names @marg);
 * a publisher at O (@pub) and 10 subscribers at E (@sub), both links up and
 * the subscribers' subscriptions at E. Relay tags: @t + o, m1, m2, e. */
static void diamond(char t, unsigned int b, struct relay *o, struct relay *m1, struct relay *m2,
                    struct relay *e, char *oarg, size_t olen, char *marg, size_t mlen,
                    const char *const *mid1, const char *const *mid2, const char *const *edge,
                    const char *const *pub, const char *const *sub, struct proc **pp,
                    struct proc **sv)
{
	const char *none[] = {NULL};
	char tag[8];

	snprintf(tag, sizeof(tag), "%co", t);
	relay_start(o, tag, b, none);
	snprintf(oarg, olen, "%s", o->url);
	snprintf(tag, sizeof(tag), "%cm1", t);
	relay_start(m1, tag, b + 2, mid1);
	snprintf(tag, sizeof(tag), "%cm2", t);
	relay_start(m2, tag, b + 4, mid2);
	snprintf(marg, mlen, "%s,%s", m1->url, m2->url);
	snprintf(tag, sizeof(tag), "%ce", t);
	relay_start(e, tag, b + 6, edge);
	ck_assert_int_eq(wait_link(e, "state", m1, 2, 15000), 2);
	ck_assert_int_eq(wait_link(e, "state", m2, 2, 15000), 2);
	snprintf(tag, sizeof(tag), "%cpub", t);
	*pp = load_start(o, "127.0.3.1", tag, pub);
	ck_assert_int_eq(wait_metric(e, "moqdp_broadcasts", 1, 15000), 1);
	sleep(1);
	snprintf(tag, sizeof(tag), "%csub", t);
	*sv = load_start(e, "127.0.1.1", tag, sub);
	ck_assert_int_eq(wait_metric(e, "moqdp_subscribers", 10 * TRACKS, 20000), 10 * TRACKS);
}

/* O, mid-tier relays M1 and M2 linked to O, an edge E linked to both: E
 * has two routes to O's broadcast (3 hops each; the hash picks one). The
 * mid-tier relay E reads through is killed: E's viewers go on over the
 * other route (a standby of the same publisher, spliced in at the next
 * group it sends), they are not ended; the gap is the time E takes to see
 * the link is gone (5 s without a packet). */
START_TEST(failover_to_standby_route)
{
	unsigned int b = base_port(5);
	struct relay o, m1, m2, e;
	char oarg[64], marg[160];
	const char *mid[] = {"--cluster-connect", oarg, "--cluster-ca", "insecure", NULL};
	const char *edge[] = {"--cluster-connect", marg, "--cluster-ca", "insecure", NULL};
	const char *pub[] = {"--publish", "--duration", "60", NULL};
	const char *sub[] = {"--subscribers", "10", "--duration", "16", NULL};
	unsigned long long d = 0, m = 1, er = 1;
	struct relay *live, *other;
	struct proc *pp, *sv;
	uint64_t t_kill;

	diamond('f', b, &o, &m1, &m2, &e, oarg, sizeof(oarg), marg, sizeof(marg), mid, mid, edge,
	        pub, sub, &pp, &sv);
	ck_assert_int_eq(wait_metric(&e, "moqdp_upstream_subscriptions", TRACKS, 5000), TRACKS);
	live = link_metric(&e, "upstream_subscriptions", &m1) == TRACKS ? &m1 : &m2;
	other = live == &m1 ? &m2 : &m1;
	ck_assert_int_eq(link_metric(&e, "upstream_subscriptions", live), TRACKS);
	ck_assert_int_eq(link_metric(&e, "upstream_subscriptions", other), 0);
	sleep(2);
	kill(live->p->pid, SIGKILL);
	t_kill = proc_now_ms();
	wait_proc(live->p, 5000);
	/* E moves its upstreams to the other route; its viewers stay */
	ck_assert_int_eq(wait_link(&e, "upstream_subscriptions", other, TRACKS, 12000), TRACKS);
	fprintf(stderr, "failover_to_standby_route: E read over %s again %.1f s after the kill\n",
	        other->tag, (double)(proc_now_ms() - t_kill) / 1000);
	ck_assert_int_ge(relay_metric(&e, "moqdp_broadcast_failovers_total"), 1);
	ck_assert_int_eq(relay_metric(&e, "moqdp_subscribers"), 10 * TRACKS);
	ck_assert_int_eq(relay_metric(&e, "moqdp_broadcasts"), 1);
	load_result(sv, 60000, 0, &d, &m, &er);
	fprintf(stderr,
	        "failover_to_standby_route: 10 viewers verified %llu frames, %llu groups "
	        "missing across the failover (video and audio groups of the ~5 s E took to "
	        "notice), %llu errors\n",
	        d, m, er);
	ck_assert_uint_gt(d, 1000);
	ck_assert_uint_eq(er, 0);
	stop_proc(pp, SIGKILL);
}
END_TEST

/* Issue 25, routes with costs over lite-06 links: an edge E reads one
 * broadcast of O through two mid-tier relays M1 and M2 that declare
 * --route-cost 2 and 9 (_i 0) or 9 and 2 (_i 1) in their lite-06 SETUP.
 * E reads over the cheaper one in both orientations (over lite-05 links
 * the choice is moq_route_hash's, the same in both); killed, the standby
 * takes over and E's viewers go on. */
START_TEST(cheaper_route_wins)
{
	unsigned int b = base_port(6 + (unsigned int)_i);
	struct relay o, m1, m2, e;
	char oarg[64], marg[160];
	const char *mid_cheap[] = {"--cluster-connect", oarg, "--cluster-ca", "insecure",
	                           "--route-cost", "2", NULL};
	const char *mid_dear[] = {"--cluster-connect", oarg, "--cluster-ca", "insecure",
	                          "--route-cost", "9", NULL};
	const char *edge[] = {"--cluster-connect", marg, "--cluster-ca", "insecure", NULL};
	const char *pub[] = {"--publish", "--duration", "60", NULL};
	const char *sub[] = {"--subscribers", "10", "--duration", "14", NULL};
	unsigned long long d = 0, m = 1, er = 1;
	struct relay *cheap, *dear;
	struct proc *pp, *sv;

	diamond('c', b, &o, &m1, &m2, &e, oarg, sizeof(oarg), marg, sizeof(marg),
	        _i ? mid_dear : mid_cheap, _i ? mid_cheap : mid_dear, edge, pub, sub, &pp, &sv);
	cheap = _i ? &m2 : &m1;
	dear = _i ? &m1 : &m2;
	ck_assert_int_eq(wait_link(&e, "upstream_subscriptions", cheap, TRACKS, 5000), TRACKS);
	ck_assert_int_eq(link_metric(&e, "upstream_subscriptions", dear), 0);
	sleep(2);
	kill(cheap->p->pid, SIGKILL);
	wait_proc(cheap->p, 5000);
	ck_assert_int_eq(wait_link(&e, "upstream_subscriptions", dear, TRACKS, 12000), TRACKS);
	ck_assert_int_ge(relay_metric(&e, "moqdp_broadcast_failovers_total"), 1);
	load_result(sv, 60000, 0, &d, &m, &er);
	fprintf(stderr,
	        "cheaper_route_wins (%s cheap): E read over the cost-2 route, then the cost-9 "
	        "standby; 10 viewers verified %llu frames, %llu groups missing across the "
	        "failover, %llu errors\n",
	        cheap->tag, d, m, er);
	ck_assert_uint_gt(d, 500);
	ck_assert_uint_eq(er, 0);
	stop_proc(pp, SIGKILL);
}
END_TEST

/* ------------------------------------------------------------- tokens */

START_TEST(tokens_on_links)
{
	unsigned int b = base_port(4);
	struct relay o, e1, e2;
	char oarg[64];
	const char *oargs[] = {"--auth-key", AUTH_FIXTURES "/hs256.jwk", NULL};
	const char *with[] = {
	        "--cluster-connect",          oarg, "--cluster-ca", "insecure", "--cluster-token",
	        AUTH_FIXTURES "/cluster.jwt", NULL};
	const char *without[] = {"--cluster-connect", oarg, "--cluster-ca", "insecure", NULL};
	const char *pub[] = {
	        "--publish", "--duration", "30", "--token", AUTH_FIXTURES "/cluster.jwt", NULL};
	const char *sub[] = {"--subscribers", "5", "--duration", "4", NULL};
	unsigned long long d = 0, m = 1, e = 1;
	struct proc *pp;

	relay_start(&o, "to", b, oargs);
	snprintf(oarg, sizeof(oarg), "%s", o.url);
	relay_start(&e1, "te1", b + 2, with);
	relay_start(&e2, "te2", b + 4, without);
	ck_assert_int_eq(wait_link(&e1, "state", &o, 2, 15000), 2);
	/* without a token O closes each attempt with 6 (unauthorized) */
	ck_assert_int_ge(wait_metric_ge(&o, "moqdp_auth_refused_total{reason=\"setup\"}", 2, 15000),
	                 2);
	ck_assert_int_ne(link_metric(&e2, "state", &o), 2);
	ck_assert_int_eq(link_metric(&e2, "connects_total", &o), 0);
	ck_assert_int_ge(link_metric(&e2, "reconnects_total", &o), 1);
	pp = load_start(&o, "127.0.3.1", "tpub", pub);
	ck_assert_int_eq(wait_metric(&e1, "moqdp_broadcasts", 1, 15000), 1);
	ck_assert_int_eq(relay_metric(&e2, "moqdp_broadcasts"), 0);
	load_result(load_start(&e1, "127.0.1.1", "ts1", sub), 60000, 0, &d, &m, &e);
	ck_assert_uint_gt(d, 100);
	ck_assert_uint_eq(m + e, 0);
	stop_proc(pp, SIGKILL);
}
END_TEST

/* ------------------------------------------------------------ options */

static void expect_refusal(const char *const *extra, const char *want)
{
	char prefix[80];
	const char *args[40] = {prefix, "--no-huge", "-m", "256", "--no-pci", "-l", "0-1", "--"};
	unsigned int n = 8;
	struct proc *p;
	int rc;
	const char *err;

	snprintf(prefix, sizeof(prefix), "--file-prefix=moqdp-cl-opt-%d", (int)getpid());
	if (strncmp(extra[0], "--vdev", 6) == 0) { /* an EAL argument first */
		args[7] = *extra++;
		args[n++] = "--";
	}
	for (; *extra; extra++)
		args[n++] = *extra;
	args[n] = NULL;
	p = spawn(MOQDP_RELAY_PATH, args, "opt");
	rc = wait_proc(p, 20000);
	err = proc_slurp(p->err);
	ck_assert_msg(rc != 0 && strstr(err, want) != NULL, "exit %d: %s", rc, err);
	/* one line */
	ck_assert_msg(strchr(strstr(err, want), '\n') == strrchr(err, '\n'), "%s", err);
	unlink(p->err);
}

START_TEST(option_refusals)
{
	const char *https[] = {"--backend", "kernel", "--cluster-connect",
	                       "https://127.0.0.1:4443/", NULL};
	const char *noca[] = {"--backend", "kernel", "--cluster-connect", "moql://127.0.0.1:4443/",
	                      NULL};
	/* the dpdk backend dials from a data port's address of the peer's
	 * family (issue 26): an IPv6 peer and IPv4 only is refused */
	const char *dpdk[] = {"--vdev=net_null0", "--listen", "10.9.9.2/24",
	                      "--cluster-connect", "moql://[2001:db8::1]:4443/", "--cluster-ca",
	                      "insecure", NULL};
	const char *token[] = {"--backend", "kernel", "--cluster-token", "/nonexistent", NULL};
	const char *badtok[] = {"--backend",
	                        "kernel",
	                        "--cluster-connect",
	                        "moql://127.0.0.1:4443/",
	                        "--cluster-ca",
	                        "insecure",
	                        "--cluster-token",
	                        "/nonexistent/token",
	                        NULL};
	const char *scheme[] = {"--backend",  "kernel",       "--cluster-connect",
	                        "udp://x:1/", "--cluster-ca", "insecure",
	                        NULL};

	/* https:// is accepted (wt_link) and verifies certificates as moql:// */
	expect_refusal(https, "moqdp-relay: --cluster-ca: required with --cluster-connect");
	expect_refusal(noca, "moqdp-relay: --cluster-ca: required with --cluster-connect");
	expect_refusal(dpdk, "moqdp-relay: --cluster-connect: moql://[2001:db8::1]:4443/: no "
	                     "--listen address of its family (IPv6)");
	expect_refusal(token, "moqdp-relay: --cluster-token: only with --cluster-connect");
	expect_refusal(badtok, "moqdp-relay: --cluster-token: cannot read /nonexistent/token");
	expect_refusal(scheme, "moqdp-relay: --cluster-connect: 'udp://x:1/' is not a moql://");
}
END_TEST

/* ------------------------------------------------------ WebTransport link */

START_TEST(wt_link)
{
	unsigned int b = base_port(6), nsub = edge_subs();
	struct relay o, ow, e1, e2;
	char oarg[64], subs[16];
	const char *oargs[] = {"--auth-key", AUTH_FIXTURES "/hs256.jwk", NULL};
	const char *with[] = {"--cluster-connect",
	                      oarg,
	                      "--cluster-ca",
	                      "insecure",
	                      "--cluster-token",
	                      AUTH_FIXTURES "/cluster.jwt",
	                      "--upstream-hold",
	                      "1s",
	                      NULL};
	const char *without[] = {"--cluster-connect", oarg, "--cluster-ca", "insecure", NULL};
	const char *pub[] = {
	        "--publish", "--duration", "40", "--token", AUTH_FIXTURES "/cluster.jwt", NULL};
	const char *sub[] = {"--subscribers", subs, "--duration", "8", NULL};
	unsigned long long d = 0, d2 = 0, m = 1, e = 1;
	long long wts, osubs, oups, lups;
	struct proc *pp, *ps;

	snprintf(subs, sizeof(subs), "%u", nsub);
	relay_start(&o, "wo", b, oargs);
	ow = o; /* the link's peer label: the https:// URL */
	snprintf(ow.url, sizeof(ow.url), "https://127.0.0.1:%u/", o.udp);
	snprintf(oarg, sizeof(oarg), "%s", ow.url);
	relay_start(&e1, "we1", b + 2, with);
	ck_assert_int_eq(wait_link(&e1, "state", &ow, 2, 15000), 2);
	/* O took the link as a WebTransport session (h3/, CONNECT accepted):
	 * the only one (moqdp-load below publishes over raw QUIC) */
	wts = wait_metric(&o, "moqdp_webtransport_sessions_total", 1, 5000);
	ck_assert_int_eq(wts, 1);
	ck_assert_int_eq(wait_metric(&o, "moqdp_sessions", 1, 3000), 1);
	/* without a token O refuses each attempt; E2 keeps dialling */
	relay_start(&e2, "we2", b + 4, without);
	ck_assert_int_ge(wait_link(&e2, "reconnects_total", &ow, 1, 15000), 1);
	ck_assert_int_ne(link_metric(&e2, "state", &ow), 2);
	ck_assert_int_eq(link_metric(&e2, "connects_total", &ow), 0);
	pp = load_start(&o, "127.0.3.1", "wpub", pub);
	ck_assert_int_eq(wait_metric(&e1, "moqdp_broadcasts", 1, 15000), 1);
	ck_assert_int_eq(relay_metric(&e2, "moqdp_broadcasts"), 0);
	ps = load_start(&e1, "127.0.1.1", "ws1", sub);
	ck_assert_int_eq(wait_metric(&e1, "moqdp_subscribers", nsub * TRACKS, 30000),
	                 nsub * TRACKS);
	/* O: one subscription per track for the edge, one upstream per track;
	 * the edge: one upstream per track over its link */
	osubs = wait_metric(&o, "moqdp_subscribers", TRACKS, 5000);
	oups = relay_metric(&o, "moqdp_upstream_subscriptions");
	lups = wait_link(&e1, "upstream_subscriptions", &ow, TRACKS, 3000);
	ck_assert_int_eq(osubs, TRACKS);
	ck_assert_int_eq(oups, TRACKS);
	ck_assert_int_eq(lups, TRACKS);
	load_result(ps, 60000, 0, &d, &m, &e);
	ck_assert_uint_gt(d, 100);
	ck_assert_uint_eq(m, 0);
	ck_assert_uint_eq(e, 0);
	ck_assert_int_gt(link_metric(&e1, "received_bytes_total", &ow), 0);
	ck_assert_int_gt(link_metric(&e1, "sent_bytes_total", &ow), 0);
	/* one session all along: the link never dropped */
	ck_assert_int_eq(link_metric(&e1, "connects_total", &ow), 1);
	ck_assert_int_eq(link_metric(&e1, "reconnects_total", &ow), 0);
	/* the viewers left: after --upstream-hold the edge unsubscribes and O
	 * frees what the link held */
	ck_assert_int_eq(wait_link(&e1, "upstream_subscriptions", &ow, 0, 8000), 0);
	ck_assert_int_eq(wait_metric(&o, "moqdp_subscribers", 0, 5000), 0);
	wts = relay_metric(&o, "moqdp_webtransport_sessions_total");
	/* O dies and comes back on its port: the link notices (idle timeout),
	 * dials again with its backoff and carries a new broadcast */
	stop_proc(pp, SIGKILL);
	stop_proc(e2.p, SIGTERM);
	kill(o.p->pid, SIGKILL);
	wait_proc(o.p, 5000);
	ck_assert_int_ne(wait_link(&e1, "state", &ow, 0, 12000), 2);
	ck_assert_int_eq(wait_metric(&e1, "moqdp_broadcasts", 0, 12000), 0);
	relay_start(&o, "wo", b, oargs);
	ck_assert_int_eq(wait_link(&e1, "state", &ow, 2, 30000), 2);
	ck_assert_int_eq(link_metric(&e1, "connects_total", &ow), 2);
	ck_assert_int_ge(link_metric(&e1, "reconnects_total", &ow), 1);
	ck_assert_int_eq(wait_metric(&o, "moqdp_webtransport_sessions_total", 1, 5000), 1);
	pp = load_start(&o, "127.0.3.1", "wpub2", pub);
	ck_assert_int_eq(wait_metric(&e1, "moqdp_broadcasts", 1, 15000), 1);
	sub[3] = "4";
	load_result(load_start(&e1, "127.0.1.1", "ws2", sub), 60000, 0, &d2, &m, &e);
	ck_assert_uint_gt(d2, 100);
	ck_assert_uint_eq(m, 0);
	ck_assert_uint_eq(e, 0);
	fprintf(stderr,
	        "wt_link: %u subscribers at the edge verified %llu frames (0 missing, 0 errors) "
	        "over an https:// link; O counted %lld WebTransport sessions (with E2's refused "
	        "ones), held %lld "
	        "subscriptions (%d tracks) and %lld upstream subscriptions\n",
	        nsub, d, wts, osubs, TRACKS, oups);
	fprintf(stderr, "wt_link: after O's restart the link came back; %llu frames verified\n",
	        d2);
	stop_proc(pp, SIGKILL);
}
END_TEST

/* moq_route_hash against FNV-1a computed here byte by byte. */
START_TEST(route_hash_fnv1a)
{
	const uint64_t hops[2] = {0x0102030405060708ull, 42};
	uint64_t h = 0x420C0DECB00Bull;
	const char *name = "demo/room";

	for (const char *c = name; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
	for (int i = 0; i < 2; i++) {
		uint8_t le[8];

		for (int k = 0; k < 8; k++)
			le[k] = (uint8_t)(hops[i] >> (8 * k));
		for (int k = 0; k < 8; k++)
			h = (h ^ le[k]) * 0x100000001b3ull;
	}
	ck_assert_uint_eq(moq_route_hash(name, strlen(name), hops, 2), h);
	ck_assert_uint_eq(moq_route_hash("", 0, NULL, 0), 0x420C0DECB00Bull);
	ck_assert_uint_ne(moq_route_hash(name, strlen(name), hops, 1),
	                  moq_route_hash(name, strlen(name), hops + 1, 1));
}
END_TEST

/* ------------------------------------------- peer certificate names */

/* ... until the link metric @what of @r towards @peer is at least @want. */
static long long wait_link_ge(const struct relay *r, const char *what, const struct relay *peer,
                              long long want, unsigned int ms)
{
	char name[160];

	snprintf(name, sizeof(name), "moqdp_cluster_link_%s{peer=\"%s\"}", what, peer->url);
	return wait_metric_ge(r, name, want, ms);
}

/* issue 22, item 7: with --cluster-ca a link checks that the peer's
 * certificate names the peer: the URL's host, or --cluster-name. O's
 * certificate (from a test CA, made here with openssl) names relay-o.test
 * and the address 127.0.0.2; every edge dials moql://127.0.0.1. E1 names
 * relay-o.test and connects; E2 checks the URL's address 127.0.0.1 (not in
 * the certificate) and E3 the name wrong.test: both are refused at the
 * handshake and keep re-dialling, though their chain to the CA is good. */
START_TEST(cert_names)
{
	unsigned int b = base_port(7);
	struct relay o, e1, e2, e3;
	char dir[64], cmd[2048], oarg[64], ca[96], cert[96], key[96];
	const char *oargs[] = {"--cert", cert, "--key", key, NULL};
	const char *right[] = {"--cluster-connect", oarg, "--cluster-ca", ca, "--cluster-name",
	                       "relay-o.test",      NULL};
	const char *byaddr[] = {"--cluster-connect", oarg, "--cluster-ca", ca, NULL};
	const char *wrong[] = {"--cluster-connect", oarg, "--cluster-ca", ca, "--cluster-name",
	                       "wrong.test",        NULL};

	snprintf(dir, sizeof(dir), "/tmp/moqdp-cluster-certs-%d", (int)getpid());
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	snprintf(cert, sizeof(cert), "%s/o.pem", dir);
	snprintf(key, sizeof(key), "%s/o.key", dir);
	snprintf(cmd, sizeof(cmd),
	         "set -e; rm -rf %s; mkdir -p %s; cd %s; "
	         "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
	         "-keyout ca.key -out ca.pem -days 2 -subj /CN=moqdp-test-ca "
	         "-addext basicConstraints=critical,CA:TRUE "
	         "-addext keyUsage=critical,keyCertSign 2>/dev/null; "
	         "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout o.key "
	         "-out o.csr -subj /CN=relay-o.test 2>/dev/null; "
	         "printf 'subjectAltName=DNS:relay-o.test,IP:127.0.0.2\\n' > ext; "
	         "openssl x509 -req -in o.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out o.pem "
	         "-days 2 -extfile ext 2>/dev/null",
	         dir, dir, dir);
	ck_assert_msg(system(cmd) == 0, "openssl could not make the test certificates");
	relay_start(&o, "co", b, oargs);
	snprintf(oarg, sizeof(oarg), "%s", o.url);
	relay_start(&e1, "ce1", b + 2, right);
	relay_start(&e2, "ce2", b + 4, byaddr);
	relay_start(&e3, "ce3", b + 6, wrong);
	ck_assert_int_eq(wait_link(&e1, "state", &o, 2, 15000), 2);
	ck_assert_int_ge(wait_link_ge(&e2, "reconnects_total", &o, 1, 15000), 1);
	ck_assert_int_ge(wait_link_ge(&e3, "reconnects_total", &o, 1, 15000), 1);
	ck_assert_int_eq(link_metric(&e2, "connects_total", &o), 0);
	ck_assert_int_eq(link_metric(&e3, "connects_total", &o), 0);
	ck_assert_int_ne(link_metric(&e2, "state", &o), 2);
	ck_assert_int_ne(link_metric(&e3, "state", &o), 2);
	ck_assert_int_eq(link_metric(&e1, "connects_total", &o), 1);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *cluster_suite(void);

Suite *cluster_suite(void)
{
	Suite *s = suite_create("cluster");
	TCase *tc = tcase_create("unit");

	tcase_add_test(tc, route_hash_fnv1a);
	suite_add_tcase(s, tc);
	/* a TCase per scenario (CK_RUN_CASE picks one) */
	const struct {
		const char *name;
		const TTest *t;
	} cases[] = {
	        {"options", option_refusals},
	        {"tokens", tokens_on_links},
	        {"three", three_relays},
	        {"loop", loop_of_three},
	        {"two_publishers", two_publishers_one_route},
	        {"failover", failover_to_standby_route},
	        {"wt_link", wt_link},
	        {"cert_names", cert_names},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tc = tcase_create(cases[i].name);
		tcase_set_timeout(tc, 240);
		tcase_add_checked_fixture(tc, NULL, teardown);
		tcase_add_test(tc, cases[i].t);
		suite_add_tcase(s, tc);
	}
	tc = tcase_create("costs");
	tcase_set_timeout(tc, 240);
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_loop_test(tc, cheaper_route_wins, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
