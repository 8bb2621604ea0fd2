/* SPDX-License-Identifier: MIT */
/*
 * bench_moq_fanout.c: the relay's fanout path in instructions per payload
 * byte, split into moq/, quic/ and cache/ (not a timed test).
 *
 * One relay node and endpoint; one client endpoint carrying a publisher (its
 * own node and cache) and N subscribers (another node), joined by quic/'s
 * in-memory virtual-time link (1 ms each way, no loss). The publisher sends
 * the moq_session test's media: 15 frames per group, one every 33 ms, a
 * 6000-6600 byte first frame and 200-1500 byte others. Every subscriber
 * subscribes to the track; the run lasts G groups, then every subscriber's
 * payload byte count is checked against what was published.
 *
 *   bench_moq_fanout [--subs N] [--groups G] [--callgrind [--cache-sim]]
 *                    [--scope poll|relay] [--cg-out FILE]
 *                    [--audio] [--scale K] [--rate MBPS] [--fastpath]
 *
 * --protocol ietf-NN (14..20): the publisher and the subscribers speak IETF
 * moq-transport draft NN (loadgen/ietf.c) instead of moq-lite: the relay
 * serves them through moq/ietf_session.c's translator, the same media and
 * the same byte check (--protocol lite, the default: moq-lite). Not with
 * --audio.
 *
 * --fastpath: the relay endpoint hands its subscribers off to the 1-RTT fast
 * path (quic/handoff.c, issue 23) once set up and quiet.
 *
 * --cg-out keeps callgrind's output file for callgrind_annotate. --scale K
 * multiplies every video frame's size by K (1..16): 1 is about 0.3 Mbps of
 * video, 4 about 1.2 Mbps (bench-fanout's 1M case), 13 about 4 Mbps.
 *
 * --audio adds an audio track the subscribers also take: one 160-byte frame
 * per group every 20 ms (a new stream per frame, as the open-source MoQ
 * publisher sends audio). --rate caps the relay -> subscribers direction of
 * the link at MBPS in all, below what the subscribers need: they fall
 * behind, the relay's tracks expire groups after 1 s and reset the streams
 * of stale ones (the overload a slow load generator or a thin uplink
 * causes); then every subscriber is not expected to get every byte, and
 * the run lasts the groups' time + 2 s.
 *
 * With --callgrind the program runs itself under valgrind's callgrind,
 * collecting only inside the relay's moq_node_poll (bench_relay_poll), or
 * with --scope relay also inside the relay endpoint's receive, timer and
 * send calls (the link's moq_quic_link_b_*: ACK processing, packet writing
 * and encryption: all the relay does), and
 * prints the instructions per payload byte the relay queued (bytes_out),
 * split by the source folder of each function (exclusive costs; inlined
 * code counts where its source is). The ramp (handshakes, subscriptions
 * and, with --fastpath, every subscriber's handoff: a connection's one-off
 * costs) is run uninstrumented when valgrind/callgrind.h is available; with
 * --fastpath the run fails when a subscriber is not on the fast path before
 * the first group.
 *
 * --cache-sim (with --callgrind): callgrind also simulates the caches, with
 * the last level sized as a core's L2 (1 MiB, 16-way; 32 KiB L1s), and the
 * table adds the data misses there (reads + writes) per KB of payload by
 * part: at thousands of subscribers the relay's state does not stay in a
 * core's cache between visits, and what each connection's packets, ACKs
 * and streams touch costs a miss per cache line (DESIGN.md, "Misses per
 * packet"). Deterministic like the instruction counts (valgrind simulates
 * no prefetch: what prefetching hides natively still counts).
 *
 * Without --callgrind it also prints the heap a group stream costs (issue
 * 23, item 4; moq_heapacct.h kinds): at the sample with the most group
 * streams open, what each kind holds beyond the sample before the media
 * started, divided by the streams: moq/'s records (struct gout, struct
 * mstream, send chunks), quic/'s stream record and ngtcp2's blocks in use
 * (its stream, plus the packets in flight: an upper bound).
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ietf.h"
#include "ietf_codec.h"
#include "moq.h"
#include "link.h"
#include "moq_heapacct.h"

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND_H 1
#endif
#endif
#ifndef HAVE_CALLGRIND_H
#define CALLGRIND_START_INSTRUMENTATION
#endif

#define MS               1000000ull
#define SEC              1000000000ull
#define FRAMES_PER_GROUP 15
#define FRAME_NS         (33 * MS)
#define SCALE_MAX        16 /* --scale: frame sizes times 1..16 */

struct sub {
	struct moq_session *s;
	int ready;
	uint64_t bytes, frames, groups;
	int started;
	uint64_t first_seq;
	int64_t vid; /* the video subscription's id */
};

/* per-stream heap (heap_sample): the kinds at the samples with the fewest
 * and the most group streams open, once every subscriber started (its
 * START reply and first streams are not per-stream costs) */
static struct moq_heap_kind_stat hkm[MOQ_HEAP_KINDS], hkp[MOQ_HEAP_KINDS];
static int heap_on, heap_have;

static int all_started(void);

static void heap_sample(void)
{
	struct moq_heap_kind_stat hk[MOQ_HEAP_KINDS];

	if (!heap_on || (!heap_have && !all_started()))
		return;
	moq_heap_read(hk);
	if (!heap_have || hk[MOQ_HEAP_GOUT].objs < hkm[MOQ_HEAP_GOUT].objs)
		memcpy(hkm, hk, sizeof(hk));
	if (!heap_have || hk[MOQ_HEAP_GOUT].objs > hkp[MOQ_HEAP_GOUT].objs)
		memcpy(hkp, hk, sizeof(hk));
	heap_have = 1;
}

/* Per group stream: the difference of the two samples over the difference
 * in streams (both ends of each stream are in this process: the relay's
 * send side and the subscriber's receive side, each with its own mstream,
 * quic record and ngtcp2 stream), and the relay's send side alone (one
 * gout, mstream and quic record at their size a record, and its send
 * chunks: only the relay's group streams take chunks here). */
static void heap_report(void)
{
	static const enum moq_heap_kind k[] = {MOQ_HEAP_GOUT, MOQ_HEAP_MOQ_STREAM, MOQ_HEAP_TXCHUNK,
	                                       MOQ_HEAP_QUIC_STREAM, MOQ_HEAP_NGTCP2};
	int64_t n = hkp[MOQ_HEAP_GOUT].objs - hkm[MOQ_HEAP_GOUT].objs;
	double relay = 0, both = 0;

	if (n <= 0)
		return;
	printf("group streams open: %lld to %lld; heap per group stream (bytes):\n",
	       (long long)hkm[MOQ_HEAP_GOUT].objs, (long long)hkp[MOQ_HEAP_GOUT].objs);
	printf("%-12s %12s %9s %12s\n", "kind", "both ends", "objects", "relay side");
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		double b = (double)(hkp[k[i]].bytes - hkm[k[i]].bytes) / (double)n;
		double o = (double)(hkp[k[i]].objs - hkm[k[i]].objs) / (double)n;
		double r = 0;
		if (k[i] == MOQ_HEAP_GOUT || k[i] == MOQ_HEAP_TXCHUNK)
			r = b;
		else if (k[i] != MOQ_HEAP_NGTCP2 && hkp[k[i]].objs > 0)
			r = (double)hkp[k[i]].bytes / (double)hkp[k[i]].objs;
		printf("%-12s %12.1f %9.2f %12.1f\n", moq_heap_kind_name(k[i]), b, o, r);
		if (k[i] != MOQ_HEAP_NGTCP2) {
			both += b;
			relay += r;
		}
	}
	printf("%-12s %12.1f %9s %12.1f\n", "moq+quic", both, "", relay);
}

static struct {
	struct moq_cache_counting rcnt, pcnt; /* malloc-backed cache memory */
	struct moq_cache *rcache, *pcache;
	struct moq_node *relay, *client, *subnode;
	struct moq_quic_endpoint *rep, *cep;
	struct moq_quic_link *lnk;
	struct moq_cache_track *vt;
	struct moq_cache_group *g;
	uint64_t seq, next_frame, max_groups;
	uint32_t fidx;
	int pub_ready;
	struct sub *subs;
	int nsubs;
	uint32_t scale;    /* --scale */
	int audio;         /* --audio */
	int fastpath;      /* --fastpath: the relay endpoint's config.fastpath (issue 23) */
	uint64_t rate_bps; /* --rate */
	struct moq_cache_track *at;
	uint64_t aseq, next_audio;
	int draft;               /* --protocol ietf-NN; 0: moq-lite */
	struct moq_lg_ietf *ie;  /* the IETF publisher and subscribers */
} B;

#define AUDIO_NS    (20 * MS)
#define AUDIO_BYTES 160

static uint64_t now(void)
{
	return moq_quic_link_now(B.lnk);
}

static size_t frame_size(uint64_t seq, uint32_t idx)
{
	return B.scale * (idx == 0 ? 6000 + (seq % 7) * 100 : 200 + ((seq * 31 + idx * 97) % 1300));
}

static struct sub *sub_of(struct moq_session *s)
{
	struct sub *u = moq_session_user(s);
	return u && u >= B.subs && u < B.subs + B.nsubs ? u : NULL;
}

static void cb_ready(struct moq_session *s, void *user)
{
	(void)user;
	if (sub_of(s))
		sub_of(s)->ready = 1;
	else
		B.pub_ready = 1;
}

static void cb_group_begin(struct moq_session *s, void *user, uint64_t id, uint64_t seq)
{
	struct sub *u = sub_of(s);

	(void)user;
	(void)id;
	if (u && !u->started) {
		u->started = 1;
		u->first_seq = seq;
	}
}

static void cb_frame(struct moq_session *s, void *user, uint64_t id, uint64_t seq, int64_t ts,
                     uint64_t size)
{
	(void)user;
	(void)id;
	(void)seq;
	(void)ts;
	(void)size;
	if (sub_of(s))
		sub_of(s)->frames++;
}

static void cb_frame_data(struct moq_session *s, void *user, uint64_t id, uint64_t seq,
                          const uint8_t *data, size_t len)
{
	(void)user;
	(void)seq;
	(void)data;
	if (sub_of(s) && (int64_t)id == sub_of(s)->vid)
		sub_of(s)->bytes += len;
}

static void cb_group_end(struct moq_session *s, void *user, uint64_t id, uint64_t seq, int64_t code)
{
	(void)user;
	(void)seq;
	if (sub_of(s) && code < 0 && (int64_t)id == sub_of(s)->vid)
		sub_of(s)->groups++;
}

static const struct moq_node_callbacks cbs = {
        .session_ready = cb_ready,
        .group_begin = cb_group_begin,
        .frame = cb_frame,
        .frame_data = cb_frame_data,
        .group_end = cb_group_end,
};

static struct moq_quic_addr addr4(const char *ip, uint16_t port)
{
	struct moq_quic_addr a;

	moq_quic_addr_ip4(ip, port, &a);
	return a;
}

/* The relay's poll, out of line: callgrind collects inside it only. */
__attribute__((noinline)) int bench_relay_poll(struct moq_node *n, uint64_t t);
__attribute__((noinline)) int bench_relay_poll(struct moq_node *n, uint64_t t)
{
	return moq_node_poll(n, t);
}

static void pub_tick(uint64_t t)
{
	static uint8_t buf[8000 * SCALE_MAX];

	while (B.draft && B.pub_ready && t >= B.next_frame && B.seq < B.max_groups) {
		size_t sz = frame_size(B.seq, B.fidx);
		memset(buf, (int)(B.seq * 31 + B.fidx), sz);
		if (moq_lg_ietf_pub_object(B.ie, B.seq, B.fidx, buf, sz,
		                           B.fidx + 1 == FRAMES_PER_GROUP) < 0)
			exit(3);
		if (++B.fidx == FRAMES_PER_GROUP) {
			B.fidx = 0;
			B.seq++;
		}
		B.next_frame += FRAME_NS;
	}
	while (!B.draft && B.pub_ready && t >= B.next_frame && B.seq < B.max_groups) {
		size_t sz = frame_size(B.seq, B.fidx);
		if (!B.g && moq_cache_group_open(B.vt, B.seq, t, &B.g) < 0)
			exit(3);
		memset(buf, (int)(B.seq * 31 + B.fidx), sz);
		if (moq_cache_write_frame(B.g, (int64_t)(B.seq * FRAMES_PER_GROUP + B.fidx) * 33,
		                          buf, sz) < 0)
			exit(3);
		if (++B.fidx == FRAMES_PER_GROUP) {
			moq_cache_group_finish(B.g);
			moq_cache_group_unref(B.g);
			B.g = NULL;
			B.fidx = 0;
			B.seq++;
		}
		B.next_frame += FRAME_NS;
	}
	/* audio: a group of one frame every 20 ms, while the video runs */
	while (B.audio && B.pub_ready && t >= B.next_audio && B.seq < B.max_groups) {
		struct moq_cache_group *ag;
		memset(buf, (int)B.aseq, AUDIO_BYTES);
		if (moq_cache_group_open(B.at, B.aseq, t, &ag) < 0 ||
		    moq_cache_write_frame(ag, (int64_t)B.aseq * 20, buf, AUDIO_BYTES) < 0)
			exit(3);
		moq_cache_group_finish(ag);
		moq_cache_group_unref(ag);
		B.aseq++;
		B.next_audio += AUDIO_NS;
	}
}

/* TSC cycles in the relay's moq_node_poll (the native timing; the link
 * times the relay endpoint's own calls, link.h) */
static uint64_t poll_cycles;

static void step(void)
{
	uint64_t t0;

	pub_tick(now());
	moq_node_poll(B.client, now());
	moq_node_poll(B.subnode, now());
	t0 = __builtin_ia32_rdtsc();
	bench_relay_poll(B.relay, now());
	poll_cycles += __builtin_ia32_rdtsc() - t0;
	moq_quic_link_run(B.lnk, NULL, NULL, 2 * MS);
	heap_sample();
}

static int all_ready(void)
{
	for (int i = 0; i < B.nsubs; i++)
		if (B.draft ? !moq_lg_ietf_sub_setup(B.ie, (uint32_t)i) : !B.subs[i].ready)
			return 0;
	return 1;
}

static int all_started(void)
{
	for (int i = 0; i < B.nsubs; i++)
		if (!B.subs[i].started)
			return 0;
	return 1;
}

static int all_done(uint64_t groups)
{
	for (int i = 0; i < B.nsubs; i++)
		if ((B.draft ? moq_lg_ietf_sub_groups(B.ie, (uint32_t)i) : B.subs[i].groups) <
		    groups)
			return 0;
	return 1;
}

/* The ramp ends once the subscriptions are in place, before the first
 * group: with --fastpath once every subscriber's connection is on the fast
 * path (a handoff is a connection's one-off cost, like its handshake, and
 * lands outside the measured part for either protocol), else after 200 ms.
 * Nothing is published yet (B.max_groups is 0). */
static int ramp_end(void)
{
	struct moq_quic_stats qs;
	uint64_t end = now() + (B.fastpath ? 5 * SEC : 200 * MS);

	while (now() < end) {
		step();
		moq_quic_endpoint_stats(B.rep, &qs);
		if (B.fastpath && qs.fastpath_conns >= (uint64_t)B.nsubs)
			break;
	}
	if (B.fastpath && qs.fastpath_conns < (uint64_t)B.nsubs) {
		/* a subscriber set up and subscribed, with nothing in flight,
		 * is handed off (quic/handoff.c): one that is not would send
		 * the first groups through ngtcp2 */
		fprintf(stderr, "ramp: %" PRIu64 " of %d subscribers on the fast path\n",
		        qs.fastpath_conns, B.nsubs);
		return -4;
	}
	return 0;
}

static int setup(void)
{
	struct moq_cache_cfg cc = {0};
	struct moq_node_cfg nc = {0};
	struct moq_quic_config q = {0};
	struct moq_quic_link_config lc = {0};
	struct moq_node_stats st;
	const char *const *alpns;
	size_t nalpn;
	int err = 0;

	moq_cache_counting_init(&B.rcnt);
	moq_cache_counting_init(&B.pcnt);
	cc.alloc = moq_cache_counting_alloc(&B.rcnt);
	B.rcache = moq_cache_create(&cc);
	cc.alloc = moq_cache_counting_alloc(&B.pcnt);
	B.pcache = moq_cache_create(&cc);
	if (!B.rcache || !B.pcache)
		return -1;
	nc.cache = B.rcache;
	nc.max_sessions = 8192; /* --subs up to 8000 (the default is 4096) */
	nc.relay = 1;
	nc.origin = 1000;
	if (B.rate_bps)
		nc.track.max_latency = 1 * SEC; /* stale groups are reset */
	B.relay = moq_node_create(&nc);
	nc.track.max_latency = 0;
	nc.relay = 0;
	nc.cache = B.pcache;
	nc.origin = 2000;
	nc.cb = &cbs;
	B.client = moq_node_create(&nc);
	nc.cache = NULL;
	nc.origin = 3000;
	B.subnode = moq_node_create(&nc);
	if (!B.relay || !B.client || !B.subnode)
		return -1;
	alpns = moq_node_alpns(&nalpn);
	if (B.draft) {
		/* the relay's list as dpdk_app/relay.c has it: moq-lite's ALPNs,
		 * then IETF's */
		static const char *all[32];
		size_t k = 0;
		for (size_t i = 0; i < nalpn && k < 24; i++)
			all[k++] = alpns[i];
		for (int d = MOQ_IETF_LAST; d >= MOQ_IETF_FIRST; d--)
			all[k++] = moq_ietf_alpn((enum moq_ietf_draft)d);
		alpns = all;
		nalpn = k;
	}
	q.role = MOQ_QUIC_SERVER;
	q.worker_id = 1;
	q.alpn = alpns;
	q.alpn_count = nalpn;
	q.retry = MOQ_QUIC_RETRY_NEVER;
	q.max_conns = 8192;
	q.max_conns_per_addr = 8192;
	q.max_half_open = 8192;
	q.max_streams_uni = 100000;
	q.cb = moq_node_quic_callbacks();
	q.user = B.relay;
	q.fastpath = B.fastpath;
	B.rep = moq_quic_endpoint_new(&q, &err);
	q.fastpath = 0;
	q.role = MOQ_QUIC_CLIENT;
	q.worker_id = 2;
	q.user = B.client;
	if (B.draft) {
		static const char *one[1];
		struct moq_lg_ietf_cfg ic = {0};
		one[0] = moq_ietf_alpn((enum moq_ietf_draft)B.draft);
		q.alpn = one;
		q.alpn_count = 1;
		q.cb = moq_lg_ietf_callbacks();
		q.user = NULL;
		ic.draft = B.draft;
		ic.subscribers = (uint32_t)B.nsubs;
		snprintf(ic.broadcast, sizeof(ic.broadcast), "live/room");
		snprintf(ic.track, sizeof(ic.track), "video");
		B.ie = moq_lg_ietf_new(&ic);
		if (!B.ie)
			return -1;
	}
	B.cep = moq_quic_endpoint_new(&q, &err);
	if (!B.rep || !B.cep)
		return -1;
	lc.dir[0].delay_ns = 1 * MS;
	lc.dir[1].delay_ns = 1 * MS;
	lc.dir[1].rate_bps = B.rate_bps;
	lc.max_queue = 1 << 20;
	lc.seed = 7;
	B.lnk = moq_quic_link_new(&lc, B.cep, B.rep);
	if (!B.lnk)
		return -1;

	/* the publisher and its broadcast */
	if (B.draft) {
		struct moq_quic_addr la = addr4("10.0.0.1", 19999), ra = addr4("10.0.0.2", 4443);
		if (moq_lg_ietf_connect(B.ie, B.cep, -1, &la, &ra, now()) < 0)
			return -1;
		B.pub_ready = 1; /* objects are written once the relay subscribed */
	} else {
		struct moq_quic_addr la = addr4("10.0.0.1", 19999), ra = addr4("10.0.0.2", 4443);
		if (moq_cache_track_create(B.pcache, "live/room", 9, "video", 5, NULL, &B.vt) < 0 ||
		    (B.audio && moq_cache_track_create(B.pcache, "live/room", 9, "audio", 5, NULL,
		                                       &B.at) < 0) ||
		    moq_node_publish(B.client, "live/room", 9, 1000000) < 0 ||
		    !moq_node_connect(B.client, B.cep, &la, &ra, NULL, MOQ_ROLE_PUBLISHER, NULL,
		                      now(), &err))
			return -1;
	}
	for (uint64_t end = now() + 2 * SEC; now() < end;) {
		moq_node_stats(B.relay, &st);
		if (B.pub_ready && st.broadcasts)
			break;
		step();
	}
	/* the subscribers, connected in waves of 100 */
	for (int i = 0; i < B.nsubs; i++) {
		struct moq_quic_addr la = addr4("10.0.0.1", (uint16_t)(20000 + i));
		struct moq_quic_addr ra = addr4("10.0.0.2", 4443);
		if (B.draft) {
			if (moq_lg_ietf_connect(B.ie, B.cep, i, &la, &ra, now()) < 0)
				return -1;
		} else {
			B.subs[i].s = moq_node_connect(B.subnode, B.cep, &la, &ra, NULL,
			                               MOQ_ROLE_SUBSCRIBER, &B.subs[i], now(), &err);
			if (!B.subs[i].s)
				return -1;
		}
		if (i % 100 == 99)
			for (int k = 0; k < 50; k++)
				step();
	}
	for (uint64_t end = now() + 20 * SEC; now() < end && !all_ready();)
		step();
	if (!all_ready())
		return -2;
	if (B.draft) { /* the IETF subscribers subscribed at SETUP */
		for (uint64_t end = now() + 5 * SEC; now() < end && !moq_lg_ietf_pub_ready(B.ie);)
			step();
		if (!moq_lg_ietf_pub_ready(B.ie))
			return -3;
		return ramp_end();
	}
	for (int i = 0; i < B.nsubs; i++) {
		struct moq_sub_params p = {1, false, 5000, MOQ_GROUP_NONE, MOQ_GROUP_NONE};
		B.subs[i].vid = moq_session_subscribe(B.subs[i].s, "live/room", 9, "video", 5, &p);
		if (B.subs[i].vid < 0)
			return -3;
		if (B.audio &&
		    moq_session_subscribe(B.subs[i].s, "live/room", 9, "audio", 5, &p) < 0)
			return -3;
	}
	return ramp_end();
}

/* Exclusive Ir of a callgrind output file by source folder (@ir[NPART]:
 * moq, quic, cache, fastpath, other), and with the cache simulated the
 * last-level data misses (@miss[NPART], DLmr + DLmw). */
#define NPART 5
static const char *const part_name[NPART] = {"moq", "quic", "cache", "fastpath", "other"};

static int cg_split(const char *path, double ir[NPART], double miss[NPART])
{
	static char kinds[65536]; /* file id -> '0' + part */
	char line[4096];
	int cur = 4, skip = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	for (int k = 0; k < NPART; k++)
		ir[k] = miss[k] = 0;
	while (fgets(line, sizeof(line), f)) {
		int callee = !strncmp(line, "cfi=", 4) || !strncmp(line, "cfl=", 4);
		if (callee || !strncmp(line, "fl=", 3) || !strncmp(line, "fi=", 3) ||
		    !strncmp(line, "fe=", 3)) {
			/* "(id) name" defines, "(id)" refers; a callee's file only
			 * defines its id */
			char *p = line + (callee ? 4 : 3), *name;
			long id = -1;
			int kind;
			if (*p == '(')
				id = strtol(p + 1, &name, 10);
			else
				name = p;
			name = strchr(name, ')') ? strchr(name, ')') + 1 : name;
			while (*name == ' ')
				name++;
			if (*name && *name != '\n') {
				kind = strstr(name, "/moq/") ? 0
				       : strstr(name, "/quic/") || strstr(name, "ngtcp2") ||
				                       strstr(name, "wolfssl")
				               ? 1
				       : strstr(name, "/cache/")    ? 2
				       : strstr(name, "/fastpath/") ? 3
				                                    : 4;
				if (id >= 0 && id < 65536)
					kinds[id] = (char)('0' + kind);
				if (!callee)
					cur = kind;
			} else if (!callee) {
				cur = id >= 0 && id < 65536 && kinds[id] ? kinds[id] - '0' : 4;
			}
			continue;
		}
		if (!strncmp(line, "calls=", 6)) {
			skip = 1; /* the next cost line is the call's inclusive cost */
			continue;
		}
		if ((line[0] >= '0' && line[0] <= '9') || line[0] == '+' || line[0] == '-' ||
		    line[0] == '*') {
			char *sp = strchr(line, ' ');
			double v;
			if (!sp)
				continue;
			if (skip) {
				skip = 0;
				continue;
			}
			{
				/* position, then Ir [Dr Dw I1mr D1mr D1mw ILmr
				 * DLmr DLmw] with the cache simulated (trailing
				 * zeros left out) */
				char *q = sp + 1, *e;
				double ev[9] = {0};
				for (int k = 0; k < 9; k++, q = e) {
					ev[k] = strtod(q, &e);
					if (e == q)
						break;
				}
				v = ev[0];
				ir[cur] += v;
				miss[cur] += ev[7] + ev[8];
			}
		}
	}
	fclose(f);
	return 0;
}

static int run_callgrind(const char *self, int nsubs, uint64_t groups, int whole, const char *keep,
                         int csim)
{
	char out[256], bf[64], ns[24], gs[24], rs[24], ks[24], ps[16];
	pid_t pid;
	int status;
	double ir[NPART], miss[NPART], t = 0, mt = 0;
	FILE *f;
	uint64_t bytes = 0;

	if (keep)
		snprintf(out, sizeof(out), "%s", keep);
	else
		snprintf(out, sizeof(out), "/tmp/bench_moq_fanout.%d.cg", (int)getpid());
	snprintf(bf, sizeof(bf), "/tmp/bench_moq_fanout.%d.bytes", (int)getpid());
	snprintf(ns, sizeof(ns), "%d", nsubs);
	snprintf(gs, sizeof(gs), "%" PRIu64, groups);
	snprintf(rs, sizeof(rs), "%.6f", (double)B.rate_bps / 1e6);
	snprintf(ks, sizeof(ks), "%u", B.scale);
	if (B.draft)
		snprintf(ps, sizeof(ps), "ietf-%d", B.draft);
	else
		snprintf(ps, sizeof(ps), "lite");
	pid = fork();
	if (pid == 0) {
		char cgout[300];
		const char *t1 = whole ? "--toggle-collect=moq_quic_link_b_send" : "--quiet";
		const char *t2 = whole ? "--toggle-collect=moq_quic_link_b_recv" : "--quiet";
		const char *t3 = whole ? "--toggle-collect=moq_quic_link_b_timers" : "--quiet";
		snprintf(cgout, sizeof(cgout), "--callgrind-out-file=%s", out);
		const char *c1 = csim ? "--cache-sim=yes" : "--quiet";
		const char *c2 = csim ? "--LL=1048576,16,64" : "--quiet";
		const char *c3 = csim ? "--D1=32768,8,64" : "--quiet";
		const char *c4 = csim ? "--I1=32768,8,64" : "--quiet";
		execlp("valgrind", "valgrind", "--tool=callgrind", "--quiet", cgout,
		       "--dump-instr=no", "--compress-strings=yes", "--compress-pos=no", c1, c2, c3,
		       c4,
#ifdef HAVE_CALLGRIND_H
		       "--instr-atstart=no",
#endif
		       "--toggle-collect=bench_relay_poll", t1, t2, t3, self, "--subs", ns,
		       "--groups", gs, "--bytes-file", bf, "--rate", rs, "--scale", ks,
		       "--protocol", ps,
		       B.fastpath ? "--fastpath" : (B.audio ? "--audio" : (char *)NULL),
		       B.fastpath && B.audio ? "--audio" : (char *)NULL, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		fprintf(stderr, "callgrind run failed\n");
		return 1;
	}
	f = fopen(bf, "r");
	if (!f || fscanf(f, "%" SCNu64, &bytes) != 1 || !bytes) {
		fprintf(stderr, "no byte count from the run\n");
		if (f)
			fclose(f);
		return 1;
	}
	fclose(f);
	unlink(bf);
	if (cg_split(out, ir, miss) < 0)
		return 1;
	if (!keep)
		unlink(out);
	for (int k = 0; k < NPART; k++) {
		t += ir[k];
		mt += miss[k];
	}
	printf("%s: ", ps);
	printf("relay %s, %d subscribers, %" PRIu64
	       " groups%s%s, frame sizes x%u: %.1f M instructions, %" PRIu64
	       " payload bytes queued\n",
	       whole ? "(poll + endpoint recv/timers/send)" : "moq_node_poll", nsubs, groups,
	       B.audio ? ", audio" : "", B.rate_bps ? ", rate-capped" : "", B.scale, t / 1e6,
	       bytes);
	if (!csim) {
		printf("%-8s %14s %10s %8s\n", "part", "instructions", "instr/B", "share");
		for (int k = 0; k < NPART; k++)
			printf("%-8s %14.0f %10.3f %7.1f%%\n", part_name[k], ir[k],
			       ir[k] / (double)bytes, 100 * ir[k] / t);
		printf("%-8s %14.0f %10.3f\n", "total", t, t / (double)bytes);
	} else {
		printf("%-8s %14s %10s %12s %10s %8s\n", "part", "instructions", "instr/B",
		       "L2 misses", "per KB", "share");
		for (int k = 0; k < NPART; k++)
			printf("%-8s %14.0f %10.3f %12.0f %10.2f %7.1f%%\n", part_name[k], ir[k],
			       ir[k] / (double)bytes, miss[k], miss[k] * 1000 / (double)bytes,
			       mt > 0 ? 100 * miss[k] / mt : 0);
		printf("%-8s %14.0f %10.3f %12.0f %10.2f\n", "total", t, t / (double)bytes, mt,
		       mt * 1000 / (double)bytes);
		printf("(L2 misses: last-level data misses, reads + writes, of a simulated 1 MiB "
		       "16-way L2, per KB of payload queued)\n");
	}
	return 0;
}

int main(int argc, char **argv)
{
	int cg = 0, whole = 0, csim = 0, rc = -1;
	const char *bytes_file = NULL, *keep = NULL;
	uint64_t groups = 4;
	struct moq_node_stats st;
	struct moq_quic_link_stats ls0;
	uint64_t want = 0, bad = 0;

	B.nsubs = 1000;
	B.scale = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--subs") && i + 1 < argc)
			B.nsubs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--groups") && i + 1 < argc)
			groups = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--callgrind"))
			cg = 1;
		else if (!strcmp(argv[i], "--scope") && i + 1 < argc &&
		         (!strcmp(argv[i + 1], "poll") || !strcmp(argv[i + 1], "relay")))
			whole = !strcmp(argv[++i], "relay");
		else if (!strcmp(argv[i], "--cache-sim"))
			csim = 1;
		else if (!strcmp(argv[i], "--cg-out") && i + 1 < argc)
			keep = argv[++i];
		else if (!strcmp(argv[i], "--bytes-file") && i + 1 < argc)
			bytes_file = argv[++i];
		else if (!strcmp(argv[i], "--audio"))
			B.audio = 1;
		else if (!strcmp(argv[i], "--fastpath"))
			B.fastpath = 1;
		else if (!strcmp(argv[i], "--scale") && i + 1 < argc)
			B.scale = (uint32_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
			B.rate_bps = (uint64_t)(strtod(argv[++i], NULL) * 1e6);
		else if (!strcmp(argv[i], "--protocol") && i + 1 < argc) {
			const char *v = argv[++i];
			if (!strcmp(v, "lite"))
				B.draft = 0;
			else if (!strncmp(v, "ietf-", 5) && atoi(v + 5) >= MOQ_IETF_FIRST &&
			         atoi(v + 5) <= MOQ_IETF_LAST)
				B.draft = atoi(v + 5);
			else {
				fprintf(stderr, "--protocol: '%s' is not lite or ietf-14 .. ietf-20\n",
				        v);
				return 2;
			}
		} else {
			fprintf(stderr,
			        "usage: %s [--subs N] [--groups G] [--callgrind [--cache-sim]] "
			        "[--scope poll|relay] [--cg-out FILE] [--audio] [--scale K] "
			        "[--rate MBPS] [--fastpath] [--protocol lite|ietf-NN]\n",
			        argv[0]);
			return 2;
		}
	}
	if (B.draft && B.audio) {
		fprintf(stderr, "--protocol ietf-NN: not with --audio\n");
		return 2;
	}
	if (B.nsubs < 1 || B.nsubs > 8000 || groups < 1 || B.scale < 1 || B.scale > SCALE_MAX) {
		fprintf(stderr, "--subs 1..8000, --groups >= 1, --scale 1..%d\n", SCALE_MAX);
		return 2;
	}
	if (cg)
		return run_callgrind(argv[0], B.nsubs, groups, whole, keep, csim);
	B.subs = calloc((size_t)B.nsubs, sizeof(*B.subs));
	if (!B.subs || (rc = setup()) < 0) {
		int ready = 0;
		for (int i = 0; B.subs && i < B.nsubs; i++)
			ready += B.subs[i].ready;
		fprintf(stderr, "setup failed (%d): %d of %d subscribers ready\n", rc, ready,
		        B.nsubs);
		if (B.ie) {
			struct moq_lg_ietf_counts ic;
			moq_lg_ietf_counts(B.ie, &ic, NULL, 0);
			fprintf(stderr,
			        "IETF: %" PRIu64 " set up, %" PRIu64 " subscribed, %" PRIu64
			        " refused, %" PRIu64 " closed (last code %" PRIu64 "), %" PRIu64
			        " errors, publisher ready %d\n",
			        ic.subs_setup, ic.subs_ok, ic.subs_refused, ic.subs_closed,
			        ic.close_code, ic.errors, moq_lg_ietf_pub_ready(B.ie));
		}
		return 1;
	}
	/* The measured part: from the first group on. */
	B.max_groups = groups;
	B.next_frame = now();
	B.next_audio = now();
	heap_on = !bytes_file; /* not the callgrind run: the heap a stream costs */
	moq_quic_link_get_stats(B.lnk, 1, &ls0);
	poll_cycles = 0;
	CALLGRIND_START_INSTRUMENTATION;
	/* until every subscriber has every group (or 2 s past the last): an
	 * idle tail would only add the poll's fixed costs */
	for (uint64_t end = now() + groups * FRAMES_PER_GROUP * FRAME_NS + 2 * SEC;
	     now() < end && (B.rate_bps || !all_done(groups));)
		step();
	for (uint64_t s = 0; s < groups; s++)
		for (uint32_t i = 0; i < FRAMES_PER_GROUP; i++)
			want += frame_size(s, i);
	for (int i = 0; i < B.nsubs; i++) {
		uint64_t g = B.draft ? moq_lg_ietf_sub_groups(B.ie, (uint32_t)i) : B.subs[i].groups;
		uint64_t b = B.draft ? moq_lg_ietf_sub_bytes(B.ie, (uint32_t)i) : B.subs[i].bytes;
		if (g != groups || b != want || (B.draft && !moq_lg_ietf_sub_ok(B.ie, (uint32_t)i)))
			bad++;
	}
	moq_node_stats(B.relay, &st);
	printf("%s: ", B.draft ? moq_ietf_alpn((enum moq_ietf_draft)B.draft) : "moq-lite");
	printf("%d subscribers, %" PRIu64 " groups: relay out %" PRIu64 " frames %" PRIu64
	       " bytes; %" PRIu64 " subscribers without every video byte; resets: %" PRIu64
	       " old, %" PRIu64 " evicted, %" PRIu64 " lagged\n",
	       B.nsubs, groups, st.frames_out, st.bytes_out, bad, st.resets_old, st.resets_evicted,
	       st.resets_lagged);
	printf("fanout: %" PRIu64 " session visits, %" PRIu64 " wrote nothing\n", st.fanout_visits,
	       st.fanout_visits_idle);
	heap_report();
	if (!bytes_file) {
		/* natively: the relay's TSC cycles in the measured part, per KB
		 * it sent (noisy on a shared machine: compare binaries
		 * alternately, several runs each) */
		struct moq_quic_link_stats ls;
		double kb = (double)st.bytes_out / 1024.0;
		uint64_t snd, rcv, tmr;

		moq_quic_link_get_stats(B.lnk, 1, &ls);
		snd = ls.b_send_cycles - ls0.b_send_cycles;
		rcv = ls.b_recv_cycles - ls0.b_recv_cycles;
		tmr = ls.b_timer_cycles - ls0.b_timer_cycles;
		printf("time: relay TSC cycles per KB out: fanout %.0f, send %.0f, recv %.0f, timers "
		       "%.0f, all %.0f; fanout %.0f per session visit\n",
		       (double)poll_cycles / kb, (double)snd / kb, (double)rcv / kb, (double)tmr / kb,
		       (double)(poll_cycles + snd + rcv + tmr) / kb,
		       st.fanout_visits ? (double)poll_cycles / (double)st.fanout_visits : 0.0);
	}
	if (bytes_file) {
		FILE *f = fopen(bytes_file, "w");
		if (f) {
			fprintf(f, "%" PRIu64 "\n", st.bytes_out);
			fclose(f);
		}
	}
	/* rate-capped: falling behind is the point */
	return bad && !B.rate_bps ? 1 : 0;
}
