/* SPDX-License-Identifier: MIT */
/*
 * client.c: the load generator's publisher and subscribers over moq/'s
 * client role (client.h).
 */
#include "client.h"
#include "ws.h"

#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "codec.h"
#include "moq.h"
#include "wt_client.h"

/* The publisher's cache byte budget when none is given: 5 s of a 4 Mbps
 * track is 2.5 MB, so 64 MiB keeps every group until it expires. */
#define DEFAULT_CACHE_BUDGET (64ull << 20)
/* moq_cache_expire is a control-path call that walks every group of every
 * track; opening a group already expires its own track's old groups, so
 * this only catches a track that stopped: every 100 ms is plenty. */
#define EXPIRE_EVERY_NS 100000000ull
/* Frames written per track per poll at most (a stalled loop catches up over
 * a few polls rather than in one burst). */
#define MAX_FRAMES_PER_POLL 16
/* The publisher's timestamps are in microseconds (TRACK_INFO timescale). */
#define TIMESCALE_US 1000000ull
/* Subscribers start this long after the publisher is up (its announce has
 * to reach the relay first). */
#define SUB_START_DELAY_NS 100000000ull
/* moq_node_poll of the publisher's node at least this often when no frame
 * was published. */
#define NODE_POLL_NS 1000000ull
/* moq_node_poll of the subscribers' node: it has nothing to fan out (its
 * sessions write SUBSCRIBEs directly and verify what they receive in the
 * QUIC callbacks); its poll only retries control writes that waited for
 * stream credit and carries out deferred closes, but every 20 ms of its
 * calls walks all its sessions (moq/'s safety net) and every 100 ms again
 * (stale FIN'd streams). At 1,000 subscribers those walks were 8-10 % of
 * moqdp-load (a cache miss or two per session). */
#define SUB_NODE_POLL_NS 100000000ull

/* Light subscribers' flow control grant (RFC 9000, 4.6: streams <= 2^60;
 * 16: a varint < 2^62). */
#define LIGHT_MAX_STREAMS (1ull << 60)
#define LIGHT_MAX_DATA    ((1ull << 62) - 1)

enum sub_state { SUB_IDLE = 0, SUB_CONNECTING, SUB_READY, SUB_CLOSED, SUB_LIGHT };

struct lg_sub {
	struct moq_lg_client *cl;
	struct moq_session *s;
	uint32_t idx;
	uint8_t state, is_pub, failed;
	uint8_t light_cand, light_due, light_taking; /* light.h */
	int64_t ids[MOQ_LG_MAX_TRACKS];              /* -1: not subscribed */
	uint64_t retry_at[MOQ_LG_MAX_TRACKS];
	uint64_t connect_ns, last_rx_ns;
	struct moq_lg_rx rx[MOQ_LG_MAX_TRACKS];
	int key_updated; /* --key-update: started on its connection */
};

struct lg_pubtrack {
	struct moq_lg_gen gen;
	struct moq_cache_track *t;
	struct moq_cache_group *g; /* the group being written */
};

struct moq_lg_client {
	struct moq_lg_client_cfg cfg;
	struct moq_quic_addr *locals;
	struct moq_quic_endpoint *ep;
	struct moq_node *node;  /* the publisher's session (and its cache) */
	struct moq_node *snode; /* the subscribers' sessions; NULL without */
	struct moq_cache *cache;
	struct moq_cache_counting counting;
	uint64_t now, start_ns, next_expire, next_node_poll, next_snode_poll;

	/* publisher */
	struct lg_sub pub;
	struct lg_pubtrack pt[MOQ_LG_MAX_TRACKS];
	int pub_started;
	uint64_t pub_ready_ns;
	uint8_t *fbuf;
	uint64_t pub_frames, pub_bytes, pub_groups, pub_write_errors;
	int end_early_done; /* --end-early: its groups all written */
	uint64_t end_sent; /* --end-early: the END {group} sent (0: none) */
	/* what the subscribers were told (sub_reply): ENDs, their lowest and
	 * highest group, DROPs (tests of issue 29 check the exact END) */
	uint64_t end_subs, end_min, end_max, drop_replies;
	uint64_t drop_groups, drop_code[32]; /* groups those DROPs named, by code */

	/* subscribers */
	struct lg_sub *subs;
	uint32_t opened;     /* sessions started */
	uint32_t connecting; /* subscriber sessions in their handshake */
	uint64_t ramp_t0;    /* ramp origin; 0 = not yet */
	/* earliest retry_at of any subscriber (0 = none): poll walks the
	 * subscribers only then, not on every call */
	uint64_t next_retry;
	int stopping;
	char setup_path[MOQ_LG_JWT_MAX + 8]; /* "?jwt=<cfg.jwt>", "" without one */
	struct moq_lg_hist lat, hs;
	/* light subscribers: the take-over queue (indices), and the latency of
	 * what they verified before it (kept out of lat) */
	struct moq_lg_light *light;
	uint32_t *take_q;
	uint32_t take_n, light_taken, light_cands;
	struct moq_lg_hist lat_light;
	uint64_t subs_ready_total, subs_closed, subs_failed, retries, refused, connect_errors;
	/* --key-update */
	uint64_t key_updates;
	int key_updates_done;
};

/* ---- helpers ------------------------------------------------------------- */

/* Every how many subscribers one verifies (0: no light subscribers): at
 * most cfg.light_verify_every, lowered until light_verify_min verify. */
static uint32_t light_step(const struct moq_lg_client_cfg *cfg)
{
	uint32_t every = cfg->light_verify_every;
	if (!every || !cfg->subscribers)
		return 0;
	if (cfg->light_verify_min) {
		uint32_t most = cfg->subscribers / cfg->light_verify_min;
		if (most < every)
			every = most;
	}
	return every > 1 ? every : 0;
}

static int track_of(const struct lg_sub *u, uint64_t id)
{
	for (unsigned i = 0; i < u->cl->cfg.ntracks; i++)
		if (u->ids[i] >= 0 && (uint64_t)u->ids[i] == id)
			return (int)i;
	return -1;
}

static struct lg_sub *sub_of(struct moq_session *s)
{
	return moq_session_user(s);
}

/* A subscription of @u is to be retried at @at. */
static void retry_later(struct lg_sub *u, unsigned i, uint64_t at)
{
	struct moq_lg_client *cl = u->cl;
	u->retry_at[i] = at;
	if (!cl->next_retry || at < cl->next_retry)
		cl->next_retry = at;
}

static void subscribe_track(struct lg_sub *u, unsigned i)
{
	struct moq_lg_client *cl = u->cl;
	const struct moq_lg_track_cfg *t = &cl->cfg.tracks[i];
	struct moq_sub_params p = {
	        /* audio first when both compete for the link */
	        .priority = t->kind == MOQ_LG_AUDIO ? 2 : 1,
	        .ordered = false,
	        .max_latency_ms = cl->cfg.sub_max_latency_ms ? cl->cfg.sub_max_latency_ms
	                                                     : MOQ_DEFAULT_MAX_LATENCY_MS,
	        .start = MOQ_GROUP_NONE,
	        .end = MOQ_GROUP_NONE,
	};
	int64_t id = moq_session_subscribe(u->s, cl->cfg.broadcast, strlen(cl->cfg.broadcast),
	                                   t->name, strlen(t->name), &p);
	u->retry_at[i] = 0;
	u->rx[i].lat_after = cl->now;
	if (id >= 0) {
		u->ids[i] = id;
	} else {
		u->ids[i] = -1;
		retry_later(u, i, cl->now + MOQ_LG_RETRY_NS);
	}
}

/* ---- moq callbacks ------------------------------------------------------- */

static void on_ready(struct moq_session *s, void *user)
{
	struct moq_lg_client *cl = user;
	struct lg_sub *u = sub_of(s);
	if (!u)
		return;
	if (!u->is_pub && u->state == SUB_CONNECTING && cl->connecting)
		cl->connecting--;
	u->state = SUB_READY;
	u->s = s; /* a WebTransport / WebSocket session exists only from now on */
	moq_lg_hist_add(&cl->hs, cl->now - u->connect_ns);
	if (u->is_pub) {
		cl->pub_ready_ns = cl->now;
		return;
	}
	cl->subs_ready_total++;
	u->last_rx_ns = cl->now;
	for (unsigned i = 0; i < cl->cfg.ntracks; i++)
		subscribe_track(u, i);
}

static void on_closed(struct moq_session *s, void *user, uint64_t code, int local)
{
	struct moq_lg_client *cl = user;
	struct lg_sub *u = sub_of(s);
	if (!u)
		return;
	if (u->light_taking) {
		/* detached for a light take-over (light.h): not a close */
		u->s = NULL;
		return;
	}
	if (cl->cfg.verbose && (code != 0 || !cl->stopping))
		fprintf(stderr, "moqdp-load: session %u closed code=%llu local=%d\n", u->idx,
		        (unsigned long long)code, local);
	if (!cl->stopping && (code != 0 || !local)) {
		u->failed = 1;
		if (!u->is_pub)
			cl->subs_failed++;
	}
	if (u->state == SUB_READY && !u->is_pub)
		cl->subs_closed++;
	if (u->state == SUB_CONNECTING && !u->is_pub && cl->connecting)
		cl->connecting--;
	u->state = SUB_CLOSED;
	u->s = NULL;
}

static void on_sub_closed(struct moq_session *s, void *user, uint64_t id, int64_t code)
{
	struct moq_lg_client *cl = user;
	struct lg_sub *u = sub_of(s);
	int i;
	if (!u || (i = track_of(u, id)) < 0)
		return;
	u->ids[i] = -1;
	if (code == MOQ_CODE_NOT_FOUND && !cl->stopping) {
		/* not announced yet: try again shortly */
		retry_later(u, i, cl->now + MOQ_LG_RETRY_NS);
		cl->retries++;
	} else if (code >= 0) {
		cl->refused++;
	}
}

static void on_sub_reply(struct moq_session *s, void *user, uint64_t id,
                         const struct moq_subscribe_reply *r)
{
	struct moq_lg_client *cl = user;

	(void)s;
	(void)id;
	if (r->kind == MOQ_SUB_END) {
		if (cl->end_subs == 0 || r->group < cl->end_min)
			cl->end_min = r->group;
		if (cl->end_subs == 0 || r->group > cl->end_max)
			cl->end_max = r->group;
		cl->end_subs++;
	} else if (r->kind == MOQ_SUB_DROP) {
		uint64_t k = r->drop_end >= r->drop_start ? r->drop_end - r->drop_start + 1 : 0;

		cl->drop_replies++;
		cl->drop_groups += k;
		if (r->drop_code < 32)
			cl->drop_code[r->drop_code] += k;
	}
}

static struct moq_lg_rx *rx_of(struct moq_session *s, uint64_t id)
{
	struct lg_sub *u = sub_of(s);
	int i;
	if (!u || (i = track_of(u, id)) < 0)
		return NULL;
	return &u->rx[i];
}

static void on_group_begin(struct moq_session *s, void *user, uint64_t id, uint64_t seq)
{
	(void)user;
	struct moq_lg_rx *r = rx_of(s, id);
	if (r)
		moq_lg_rx_group_begin(r, seq);
}

static void on_frame(struct moq_session *s, void *user, uint64_t id, uint64_t seq, int64_t ts,
                     uint64_t size)
{
	(void)user;
	(void)ts;
	struct moq_lg_rx *r = rx_of(s, id);
	if (r)
		moq_lg_rx_frame(r, seq, size);
}

static void on_frame_data(struct moq_session *s, void *user, uint64_t id, uint64_t seq,
                          const uint8_t *data, size_t len)
{
	struct moq_lg_client *cl = user;
	struct lg_sub *u = sub_of(s);
	int i;
	if (!u || (i = track_of(u, id)) < 0)
		return;
	u->last_rx_ns = cl->now;
	moq_lg_rx_data(&u->rx[i], seq, data, len, cl->now);
}

static void on_group_end(struct moq_session *s, void *user, uint64_t id, uint64_t seq, int64_t code)
{
	struct moq_lg_client *cl = user;
	struct moq_lg_rx *r = rx_of(s, id);
	if (!r)
		return;
	moq_lg_rx_group_end(r, seq, code);
	struct lg_sub *u = sub_of(s);
	if (!u->light_cand || u->light_due || code != -1)
		return;
	/* a light candidate goes light with its first verified group (this
	 * one), once every track is subscribed and delivering (a group begun) */
	for (unsigned i = 0; i < cl->cfg.ntracks; i++)
		if (u->ids[i] < 0 || u->rx[i].seen == 0)
			return;
	u->light_due = 1;
	cl->take_q[cl->take_n++] = u->idx;
}

static const struct moq_node_callbacks node_cb = {
        .session_ready = on_ready,
        .session_closed = on_closed,
        .sub_closed = on_sub_closed,
        .sub_reply = on_sub_reply,
        .group_begin = on_group_begin,
        .frame = on_frame,
        .frame_data = on_frame_data,
        .group_end = on_group_end,
};

/* ---- life cycle ---------------------------------------------------------- */

/* A hop id of our own (PROTOCOL.md, Announce: loop prevention). moq/'s
 * default is derived from the node's heap address, which another process
 * with the same allocation history (two ASan builds: a fixed allocator
 * region) gets too: the relay then took the publisher's announce for its
 * own and dropped it as a loop. From the kernel's generator (the clock,
 * pid and address if that fails); nonzero, under 2^62 (a varint). */
static uint64_t random_origin(const void *salt)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		v = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
		    ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)salt;
		v *= 0x9e3779b97f4a7c15ull;
	}
	return (v & 0x3fffffffffffffffull) | 1;
}

struct moq_lg_client *moq_lg_client_create(const struct moq_lg_client_cfg *cfg, uint64_t now,
                                           int *err)
{
	struct moq_lg_client *cl;
	int e = MOQ_ERR_INVAL;

	if (!cfg || cfg->ntracks == 0 || cfg->ntracks > MOQ_LG_MAX_TRACKS || !cfg->locals ||
	    cfg->nlocals == 0 || (!cfg->publish && cfg->subscribers == 0) || !cfg->broadcast[0])
		goto fail_args;
	e = MOQ_ERR_NOMEM;
	cl = calloc(1, sizeof(*cl));
	if (!cl)
		goto fail_args;
	cl->cfg = *cfg;
	if (cl->cfg.jwt[0])
		snprintf(cl->setup_path, sizeof(cl->setup_path), "?jwt=%.*s", (int)MOQ_LG_JWT_MAX,
		         cl->cfg.jwt);
	if (!cl->cfg.conns_per_addr)
		cl->cfg.conns_per_addr = MOQ_LG_CONNS_PER_ADDR;
	if (!cl->cfg.cache_budget)
		cl->cfg.cache_budget = DEFAULT_CACHE_BUDGET;
	if (!cl->cfg.max_handshakes)
		cl->cfg.max_handshakes = MOQ_LG_MAX_HANDSHAKES;
	cl->locals = calloc(cfg->nlocals, sizeof(*cl->locals));
	if (!cl->locals)
		goto fail_locals;
	memcpy(cl->locals, cfg->locals, cfg->nlocals * sizeof(*cl->locals));
	cl->cfg.locals = cl->locals;
	cl->now = cl->start_ns = now;
	moq_lg_hist_reset(&cl->lat);
	moq_lg_hist_reset(&cl->hs);
	moq_lg_hist_reset(&cl->lat_light);

	if (cfg->subscribers) {
		cl->subs = calloc(cfg->subscribers, sizeof(*cl->subs));
		if (!cl->subs)
			goto fail_subs;
		uint32_t every = light_step(cfg);
		if (every) {
			cl->light = moq_lg_light_create(cfg->subscribers);
			cl->take_q = calloc(cfg->subscribers, sizeof(*cl->take_q));
			if (!cl->light || !cl->take_q)
				goto fail_subs;
		}
		for (uint32_t k = 0; k < cfg->subscribers; k++) {
			struct lg_sub *u = &cl->subs[k];
			u->cl = cl;
			u->idx = k;
			u->light_cand = every && k % every != 0;
			cl->light_cands += u->light_cand;
			for (unsigned i = 0; i < cfg->ntracks; i++) {
				u->ids[i] = -1;
				moq_lg_rx_init(&u->rx[i], cfg->tracks[i].id,
				               u->light_cand ? &cl->lat_light : &cl->lat);
			}
		}
	}
	cl->pub.cl = cl;
	cl->pub.is_pub = 1;
	cl->pub.idx = UINT32_MAX;

	moq_cache_counting_init(&cl->counting);
	struct moq_cache_cfg cc = {
	        .alloc = moq_cache_counting_alloc(&cl->counting),
	        .budget = cl->cfg.cache_budget,
	};
	cl->cache = moq_cache_create(&cc);
	if (!cl->cache)
		goto fail_cache;
	if (cfg->publish) {
		cl->fbuf = malloc(MOQ_LG_FRAME_MAX);
		if (!cl->fbuf)
			goto fail_fbuf;
		for (unsigned i = 0; i < cfg->ntracks; i++) {
			struct moq_cache_track_cfg tc = {0};
			if (moq_cache_track_create(cl->cache, cfg->broadcast,
			                           strlen(cfg->broadcast), cfg->tracks[i].name,
			                           strlen(cfg->tracks[i].name), &tc,
			                           &cl->pt[i].t) < 0)
				goto fail_tracks;
		}
	}

	struct moq_node_cfg nc = {
	        .cache = cl->cache,
	        .cache_reader = 0,
	        .relay = 0,
	        .origin = cfg->origin ? cfg->origin : random_origin(cl),
	        .max_sessions = 16, /* the publisher's session */
	        .cb = &node_cb,
	        .user = cl,
	};
	cl->node = moq_node_create(&nc);
	if (!cl->node)
		goto fail_node;
	if (cfg->publish &&
	    moq_node_publish(cl->node, cfg->broadcast, strlen(cfg->broadcast), TIMESCALE_US) < 0)
		goto fail_snode;
	/* --datagrams: the tracks of single-frame groups go as datagrams */
	for (unsigned i = 0; cfg->publish && cfg->datagrams && i < cfg->ntracks; i++)
		if (cfg->tracks[i].group_frames == 1)
			(void)moq_node_track_datagrams(cl->node, cl->pt[i].t, 1);
	/* The subscribers on a node of their own (no cache: nothing they
	 * receive is kept), polled rarely (SUB_NODE_POLL_NS). Both nodes share
	 * the endpoint: a client connection's callbacks reach the session that
	 * opened it, whose node is its own. */
	if (cfg->subscribers) {
		struct moq_node_cfg sc = {
		        .origin = random_origin(&nc),
		        .max_sessions = cfg->subscribers + 16,
		        .cb = &node_cb,
		        .user = cl,
		};
		cl->snode = moq_node_create(&sc);
		if (!cl->snode)
			goto fail_snode;
	}

	size_t nalpn;
	const char *const *alpn = cfg->transport == MOQ_LG_TRANSPORT_WT ? moq_lg_wt_alpns(&nalpn)
	                                                                : moq_node_alpns(&nalpn);
	/* --lite NN: that version alone (moq_node_alpns_all lists 06 .. 03) */
	static const char *one_alpn[1];
	if (cfg->lite && cfg->transport != MOQ_LG_TRANSPORT_WT) {
		const char *const *all = moq_node_alpns_all(&nalpn);
		one_alpn[0] = all[6 - cfg->lite];
		alpn = one_alpn;
		nalpn = 1;
	}
	struct moq_quic_config qc = {
	        .role = MOQ_QUIC_CLIENT,
	        .alpn = alpn,
	        .alpn_count = nalpn,
	        .max_conns = cfg->subscribers + 16,
	        .max_half_open = cfg->subscribers + 16,
	        .max_conns_per_addr = cfg->subscribers + 16,
	        /* a subscriber receives one uni stream per group */
	        .max_streams_uni = 10000,
	        /* light subscribers never send MAX_DATA / MAX_STREAM_DATA /
	         * MAX_STREAMS after the take-over: everything is granted at
	         * the handshake (set below) */
	        .max_udp_payload = cfg->max_udp_payload,
	        .cb = moq_node_quic_callbacks(),
	        .user = cl->node,
	        /* --datagrams: RFC 9221 on every connection (lite-05 6.4) */
	        .max_datagram_frame_size = cfg->datagrams ? 65535 : 0,
	};
	if (cl->light) {
		/* RFC 9000, 4.6 / 18.2: the largest stream count and the
		 * largest varint; every subscriber gets them, so the relay sees
		 * no difference between the two kinds */
		qc.max_streams_uni = LIGHT_MAX_STREAMS;
		qc.max_data = LIGHT_MAX_DATA;
		qc.max_stream_data = LIGHT_MAX_DATA;
	}
	int qe = 0;
	cl->ep = moq_quic_endpoint_new(&qc, &qe);
	if (!cl->ep) {
		e = qe ? qe : MOQ_ERR_CRYPTO;
		goto fail_ep;
	}
	cl->next_expire = now + EXPIRE_EVERY_NS;
	return cl;

fail_ep:
	moq_node_destroy(cl->snode);
fail_snode:
	moq_node_destroy(cl->node);
fail_node:
fail_tracks:
	for (unsigned i = 0; i < MOQ_LG_MAX_TRACKS; i++)
		if (cl->pt[i].t)
			moq_cache_track_unref(cl->pt[i].t);
	free(cl->fbuf);
fail_fbuf:
	moq_cache_destroy(cl->cache);
fail_cache:
	free(cl->subs);
fail_subs:
	moq_lg_light_destroy(cl->light);
	free(cl->take_q);
	free(cl->locals);
fail_locals:
	free(cl);
fail_args:
	if (err)
		*err = e;
	return NULL;
}

void moq_lg_client_destroy(struct moq_lg_client *cl)
{
	if (!cl)
		return;
	moq_quic_endpoint_free(cl->ep); /* releases every session */
	moq_node_destroy(cl->snode);
	moq_node_destroy(cl->node);
	for (unsigned i = 0; i < MOQ_LG_MAX_TRACKS; i++) {
		if (cl->pt[i].g)
			moq_cache_group_unref(cl->pt[i].g);
		if (cl->pt[i].t)
			moq_cache_track_unref(cl->pt[i].t);
	}
	moq_cache_destroy(cl->cache);
	free(cl->fbuf);
	free(cl->subs);
	moq_lg_light_destroy(cl->light);
	free(cl->take_q);
	free(cl->locals);
	free(cl);
}

struct moq_quic_endpoint *moq_lg_client_endpoint(struct moq_lg_client *cl)
{
	return cl->ep;
}

int moq_lg_client_recv(struct moq_lg_client *cl, const uint8_t *data, size_t len,
                       const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                       uint64_t now)
{
	cl->now = now;
	/* a light subscriber's datagram never reaches the endpoint */
	if (cl->light && moq_lg_light_recv(cl->light, data, len, now))
		return 0;
	int rc = moq_quic_endpoint_recv(cl->ep, data, len, local, remote, now);
	if (cl->light)
		moq_lg_light_observe(cl->light, data, len, now);
	return rc;
}

int moq_lg_client_send(struct moq_lg_client *cl, struct moq_quic_pkt *pkts, size_t n, uint64_t now)
{
	int k = 0;
	cl->now = now;
	if (cl->light)
		k = moq_lg_light_send(cl->light, pkts, n, now);
	if ((size_t)k == n)
		return k;
	int m = moq_quic_endpoint_send(cl->ep, pkts + k, n - (size_t)k, now);
	return m < 0 ? (k ? k : m) : k + m;
}

int moq_lg_client_pending(const struct moq_lg_client *cl)
{
	return moq_quic_endpoint_pending(cl->ep) || (cl->light && moq_lg_light_pending(cl->light));
}

/* ---- poll ---------------------------------------------------------------- */

static const struct moq_quic_addr *local_for(const struct moq_lg_client *cl, uint32_t k)
{
	if (cl->cfg.nlocals == 1)
		return &cl->locals[0];
	/* locals[0] is the publisher's; subscribers use the others */
	uint32_t a = 1 + (k / cl->cfg.conns_per_addr) % (cl->cfg.nlocals - 1);
	return &cl->locals[a];
}

/* A WebTransport connection ended before its session began. */
static void wt_failed(void *user)
{
	struct lg_sub *u = user;
	struct moq_lg_client *cl = u->cl;

	if (!cl->stopping) {
		u->failed = 1;
		if (!u->is_pub)
			cl->subs_failed++;
	}
	if (u->state == SUB_CONNECTING && !u->is_pub && cl->connecting)
		cl->connecting--;
	u->state = SUB_CLOSED;
}

static void connect_one(struct moq_lg_client *cl, struct lg_sub *u, const struct moq_quic_addr *l,
                        int role)
{
	int e = 0;
	u->connect_ns = cl->now;
	u->state = SUB_CONNECTING;
	if (cl->cfg.transport == MOQ_LG_TRANSPORT_WT || cl->cfg.ws) {
		/* WebTransport / --transport ws: the session comes with on_ready */
		u->s = NULL;
		if (cl->cfg.ws)
			e = moq_lg_ws_connect(cl->cfg.ws, u->is_pub ? cl->node : cl->snode,
			                      &cl->cfg.relay,
			                      cl->setup_path[0] ? cl->setup_path : NULL, role, u);
		else
			e = moq_lg_wt_connect(u->is_pub ? cl->node : cl->snode, cl->ep, l,
			                      &cl->cfg.relay, cl->setup_path, role, u, wt_failed,
			                      cl->now);
		if (e < 0) {
			u->state = SUB_CLOSED;
			u->failed = 1;
			cl->connect_errors++;
		}
		return;
	}
	u->s = moq_node_connect(u->is_pub ? cl->node : cl->snode, cl->ep, l, &cl->cfg.relay,
	                        cl->setup_path[0] ? cl->setup_path : NULL, role, u, cl->now, &e);
	if (!u->s) {
		u->state = SUB_CLOSED;
		u->failed = 1;
		cl->connect_errors++;
		if (cl->cfg.verbose)
			fprintf(stderr, "moqdp-load: connect %u failed: %s\n", u->idx,
			        moq_err_str(e));
		return;
	}
	/* a light candidate's keys are captured during its handshake */
	if (u->light_cand && moq_lg_light_prepare(cl->light, u->idx, moq_session_conn(u->s)) < 0)
		u->light_cand = 0;
}

/* Take the queued light candidates over (outside any QUIC callback). */
static int take_light(struct moq_lg_client *cl)
{
	int done = 0;
	for (uint32_t j = 0; j < cl->take_n; j++) {
		struct lg_sub *u = &cl->subs[cl->take_q[j]];
		struct moq_quic_conn *c = u->s ? moq_session_conn(u->s) : NULL;
		if (u->state != SUB_READY || !c) {
			u->light_cand = 0;
			continue;
		}
		u->light_taking = 1;
		int mute = cl->light_taken < cl->cfg.light_mute;
		if (moq_lg_light_take(cl->light, u->idx, c, mute, cl->now) == 0) {
			u->state = SUB_LIGHT;
			cl->light_taken++;
			done++;
		} else {
			u->light_taking = 0;
			u->light_cand = 0;
			if (cl->cfg.verbose)
				fprintf(stderr, "moqdp-load: subscriber %u stays full\n", u->idx);
		}
	}
	cl->take_n = 0;
	return done;
}

/* The relay's subscribe stream to the publisher: its second bidi (server
 * initiated: 1, 5, ...), after the announce request. */
#define END_EARLY_SID 5

/* --end-early: END {@end} (lite-05; older versions end with the FIN
 * alone) and FIN on the relay's subscribe stream, raw. */
static void end_early(struct moq_lg_client *cl, uint64_t end)
{
	struct moq_msg m = {.type = MOQ_MSG_SUBSCRIBE_REPLY};
	uint8_t buf[32];
	int len = 0;

	if (!cl->pub.s)
		return;
	if (moq_session_version(cl->pub.s) >= MOQ_LITE_05) {
		m.u.subscribe_reply.kind = MOQ_SUB_END;
		m.u.subscribe_reply.group = end;
		m.u.subscribe_reply.start = m.u.subscribe_reply.end = MOQ_GROUP_NONE;
		len = moq_msg_encode(buf, sizeof(buf), moq_session_version(cl->pub.s), &m);
		if (len < 0)
			len = 0;
	}
	if (moq_session_write_raw_stream(cl->pub.s, END_EARLY_SID, buf, (size_t)len, 1) < 0)
		cl->pub_write_errors++;
	else
		cl->end_sent = end;
	if (cl->end_sent == end && cl->cfg.verbose)
		fprintf(stderr, "moqdp-load: END {%llu} and FIN sent early\n",
		        (unsigned long long)end);
}

static int publish_due(struct moq_lg_client *cl)
{
	int done = 0;
	for (unsigned i = 0; i < cl->cfg.ntracks; i++) {
		struct lg_pubtrack *p = &cl->pt[i];
		for (int k = 0; k < MAX_FRAMES_PER_POLL && moq_lg_gen_next(&p->gen) <= cl->now &&
		                !cl->end_early_done;
		     k++) {
			struct moq_lg_frame_info fi;
			int len =
			        moq_lg_gen_frame(&p->gen, cl->now, cl->fbuf, MOQ_LG_FRAME_MAX, &fi);
			if (len < 0) {
				cl->pub_write_errors++;
				break;
			}
			if (fi.index == 0) {
				if (p->g) {
					moq_cache_group_finish(p->g);
					moq_cache_group_unref(p->g);
					p->g = NULL;
				}
				if (moq_cache_group_open(p->t, fi.group, cl->now, &p->g) < 0) {
					p->g = NULL;
					cl->pub_write_errors++;
				} else {
					cl->pub_groups++;
				}
				if (cl->cfg.end_early_groups &&
				    cl->pub_groups == cl->cfg.end_early_groups)
					end_early(cl, fi.group + 1);
			}
			if (p->g &&
			    moq_cache_write_frame(p->g, fi.pts_us, cl->fbuf, (size_t)len) < 0)
				cl->pub_write_errors++;
			cl->pub_frames++;
			cl->pub_bytes += (uint64_t)len;
			if (fi.last && p->g) {
				moq_cache_group_finish(p->g);
				moq_cache_group_unref(p->g);
				p->g = NULL;
			}
			done++;
			/* --end-early: nothing after the last group */
			if (fi.last && cl->cfg.end_early_groups &&
			    cl->pub_groups >= cl->cfg.end_early_groups)
				cl->end_early_done = 1;
		}
	}
	return done;
}

/* --key-update: each ready subscriber's connection starts a key update once
 * (quic.h: MOQ_ERR_STATE until ngtcp2 has the next keys: tried again at the
 * next poll). */
static int key_updates(struct moq_lg_client *cl, uint64_t now)
{
	int work = 0;

	if (!cl->cfg.key_update_ns || now < cl->start_ns + cl->cfg.key_update_ns ||
	    cl->key_updates_done)
		return 0;
	cl->key_updates_done = 1;
	for (uint32_t k = 0; k < cl->opened; k++) {
		struct lg_sub *u = &cl->subs[k];
		struct moq_quic_conn *c = u->s ? moq_session_conn(u->s) : NULL;

		if (u->key_updated || u->state != SUB_READY || c == NULL)
			continue;
		if (moq_quic_conn_update_key(c, now) == 0) {
			u->key_updated = 1;
			cl->key_updates++;
			work++;
		} else {
			cl->key_updates_done = 0; /* again at the next poll */
		}
	}
	return work;
}

/* --end-early: its groups are published only once every subscriber is
 * subscribed and the relay's subscription reached the publisher (the END
 * goes on that subscription's stream, and every subscriber is to see every
 * group): on a slow host (a sanitizer build) the groups were otherwise due
 * before the relay had subscribed, and the END had no stream to go on. */
static int end_early_ready(struct moq_lg_client *cl)
{
	struct moq_node_stats ps;

	if (!cl->cfg.end_early_groups)
		return 1;
	if (cl->opened < cl->cfg.subscribers)
		return 0;
	for (uint32_t k = 0; k < cl->opened; k++)
		for (unsigned i = 0; i < cl->cfg.ntracks; i++)
			if (cl->subs[k].state != SUB_READY || cl->subs[k].ids[i] < 0)
				return 0;
	moq_node_stats(cl->node, &ps);
	return ps.subscribers > 0;
}

int moq_lg_client_poll(struct moq_lg_client *cl, uint64_t now)
{
	int work = 0, published = 0;
	cl->now = now;

	if (cl->stopping)
		goto run;
	work += key_updates(cl, now);
	/* the publisher's session first */
	if (cl->cfg.publish && cl->pub.state == SUB_IDLE) {
		connect_one(cl, &cl->pub, &cl->locals[0], MOQ_ROLE_PUBLISHER);
		work++;
	}
	if (cl->cfg.publish && !cl->pub_started && cl->pub.state == SUB_READY &&
	    end_early_ready(cl)) {
		/* group sequences start from the wall clock's seconds so a
		 * restarted publisher never goes backwards */
		for (unsigned i = 0; i < cl->cfg.ntracks; i++)
			moq_lg_gen_init(&cl->pt[i].gen, &cl->cfg.tracks[i], now, now / 1000000ull);
		cl->pub_started = 1;
	}
	if (cl->pub_started) {
		published = publish_due(cl);
		work += published;
	}

	/* the subscribers' ramp */
	if (!cl->ramp_t0 && cl->opened < cl->cfg.subscribers) {
		if (!cl->cfg.publish)
			cl->ramp_t0 = now;
		else if (cl->pub_started && now >= cl->pub_ready_ns + SUB_START_DELAY_NS)
			cl->ramp_t0 = now;
		/* --end-early: the publisher starts only once they are
		 * subscribed (end_early_ready) */
		else if (cl->cfg.end_early_groups && cl->pub.state == SUB_READY &&
		         now >= cl->pub_ready_ns + SUB_START_DELAY_NS)
			cl->ramp_t0 = now;
	}
	if (cl->ramp_t0 && cl->opened < cl->cfg.subscribers) {
		uint64_t allowed = cl->cfg.subscribers;
		if (cl->cfg.ramp_per_s > 0)
			allowed = 1 + (uint64_t)((double)(now - cl->ramp_t0) * cl->cfg.ramp_per_s /
			                         1e9);
		while (cl->opened < allowed && cl->opened < cl->cfg.subscribers &&
		       cl->connecting < cl->cfg.max_handshakes) {
			struct lg_sub *u = &cl->subs[cl->opened];
			connect_one(cl, u, local_for(cl, cl->opened), MOQ_ROLE_SUBSCRIBER);
			if (u->state == SUB_CONNECTING)
				cl->connecting++;
			cl->opened++;
			work++;
		}
	}
	/* subscriptions to retry: a walk over every subscriber, so only when
	 * the earliest one is due (the walk finds the next earliest; retries
	 * made meanwhile lower it through retry_later) */
	if (cl->next_retry && now >= cl->next_retry) {
		uint64_t next = 0;
		cl->next_retry = 0;
		for (uint32_t k = 0; k < cl->opened; k++) {
			struct lg_sub *u = &cl->subs[k];
			for (unsigned i = 0; i < cl->cfg.ntracks; i++) {
				if (!u->retry_at[i])
					continue;
				if (u->state == SUB_READY && now >= u->retry_at[i]) {
					subscribe_track(u, i);
					work++;
				} else if (u->state == SUB_READY &&
				           (!next || u->retry_at[i] < next)) {
					next = u->retry_at[i];
				}
			}
		}
		if (next && (!cl->next_retry || next < cl->next_retry))
			cl->next_retry = next;
	}
run:
	if (cl->light) {
		if (cl->take_n && !cl->stopping)
			work += take_light(cl);
		work += moq_lg_light_poll(cl->light, now);
	}
	if (now >= cl->next_expire) {
		moq_cache_expire(cl->cache, now);
		cl->next_expire = now + EXPIRE_EVERY_NS;
	}
	/* the publisher's node has fanout to write: at once after new frames,
	 * else every NODE_POLL_NS (window opened by ACKs, retried control
	 * writes); the subscribers' every SUB_NODE_POLL_NS */
	if (published || now >= cl->next_node_poll || cl->stopping) {
		work += moq_node_poll(cl->node, now);
		cl->next_node_poll = now + NODE_POLL_NS;
	}
	if (cl->snode && (now >= cl->next_snode_poll || cl->stopping)) {
		work += moq_node_poll(cl->snode, now);
		cl->next_snode_poll = now + SUB_NODE_POLL_NS;
	}
	work += moq_quic_endpoint_timers(cl->ep, now);
	return work;
}

uint64_t moq_lg_client_origin(const struct moq_lg_client *cl)
{
	return moq_node_origin(cl->node);
}

uint64_t moq_lg_client_next_wake(const struct moq_lg_client *cl)
{
	uint64_t t = moq_quic_endpoint_next_expiry(cl->ep);
	if (cl->next_expire < t)
		t = cl->next_expire;
	if (cl->next_node_poll < t)
		t = cl->next_node_poll;
	if (cl->snode && cl->next_snode_poll < t)
		t = cl->next_snode_poll;
	if (cl->next_retry && cl->next_retry < t && !cl->stopping)
		t = cl->next_retry;
	if (cl->light) {
		uint64_t n = cl->take_n ? cl->now : moq_lg_light_next_wake(cl->light);
		if (n < t)
			t = n;
	}
	if (cl->pub_started && !cl->stopping && !cl->end_early_done)
		for (unsigned i = 0; i < cl->cfg.ntracks; i++) {
			uint64_t n = moq_lg_gen_next(&cl->pt[i].gen);
			if (n < t)
				t = n;
		}
	if (cl->ramp_t0 && cl->opened < cl->cfg.subscribers && !cl->stopping &&
	    cl->connecting < cl->cfg.max_handshakes) {
		uint64_t n = cl->now;
		if (cl->cfg.ramp_per_s > 0)
			n = cl->ramp_t0 + (uint64_t)((double)cl->opened * 1e9 / cl->cfg.ramp_per_s);
		if (n < t)
			t = n;
	}
	return t;
}

void moq_lg_client_stop(struct moq_lg_client *cl, uint64_t now)
{
	cl->now = now;
	cl->stopping = 1;
	if (cl->light)
		moq_lg_light_stop(cl->light, now);
	for (uint32_t k = 0; k < cl->opened; k++)
		if (cl->subs[k].s)
			moq_session_close(cl->subs[k].s, 0);
	if (cl->cfg.publish) {
		moq_node_unpublish(cl->node, cl->cfg.broadcast, strlen(cl->cfg.broadcast), now);
		if (cl->pub.s)
			moq_session_close(cl->pub.s, 0);
	}
}

void moq_lg_client_report(struct moq_lg_client *cl, uint64_t now, int final,
                          struct moq_lg_report *out, struct moq_lg_client_extra *extra)
{
	struct moq_quic_stats qs;
	memset(out, 0, sizeof(*out));
	out->t_s = (double)(now - cl->start_ns) / 1e9;
	out->subs_target = cl->cfg.subscribers;
	out->subs_connected = cl->opened;
	out->subs_closed = cl->subs_closed;
	out->pub_frames = cl->pub_frames;
	out->pub_bytes = cl->pub_bytes;
	out->pub_groups = cl->pub_groups;
	out->hist = &cl->lat;
	uint64_t stalled = 0, nlight = 0, nverify = 0;
	struct moq_lg_counts light_c;
	memset(&light_c, 0, sizeof(light_c));
	for (uint32_t k = 0; k < cl->opened; k++) {
		struct lg_sub *u = &cl->subs[k];
		if (u->state == SUB_READY) {
			out->subs_ready++;
			if (now > u->last_rx_ns + MOQ_LG_STALL_NS)
				stalled++;
		} else if (u->state == SUB_LIGHT) {
			out->subs_ready++;
			nlight++;
		}
		if (u->light_cand) {
			/* what a light one (or one still to be taken over)
			 * verified before the take-over is reported apart: it
			 * verifies nothing after, so the verifying sample's
			 * counts never move between the kinds */
			for (unsigned i = 0; i < cl->cfg.ntracks; i++)
				moq_lg_counts_add(&light_c, &u->rx[i].c);
			continue;
		}
		nverify++;
		for (unsigned i = 0; i < cl->cfg.ntracks; i++) {
			if (final)
				moq_lg_rx_finish(&u->rx[i]);
			moq_lg_counts_add(&out->c, &u->rx[i].c);
		}
	}
	moq_quic_endpoint_stats(cl->ep, &qs);
	out->rx_bytes_wire = qs.bytes_in;
	out->tx_bytes_wire = qs.bytes_out;
	out->rx_pkts = qs.pkts_in;
	out->tx_pkts = qs.pkts_out;
	struct moq_lg_light_stats ls;
	memset(&ls, 0, sizeof(ls));
	if (cl->light) {
		moq_lg_light_stats(cl->light, now, &ls);
		out->rx_bytes_wire += ls.rx_bytes;
		out->rx_pkts += ls.rx_pkts;
		out->tx_pkts += ls.acks_sent + ls.pings_sent;
	}
	if (extra) {
		memset(extra, 0, sizeof(*extra));
		extra->subs_stalled = stalled;
		extra->subs_failed = cl->subs_failed;
		extra->sub_retries = cl->retries;
		extra->sub_refused = cl->refused;
		extra->connect_errors = cl->connect_errors;
		extra->pub_ready = cl->pub.state == SUB_READY || cl->pub_started;
		extra->pub_write_errors = cl->pub_write_errors;
		extra->handshake_p50_ns = moq_lg_hist_pct(&cl->hs, 50);
		extra->handshake_max_ns = cl->hs.max;
		extra->light_cands = cl->light_cands;
		extra->key_updates = cl->key_updates;
		extra->light_subs = nlight;
		extra->verify_subs = nverify;
		extra->light_c = light_c;
		extra->light = ls;
		extra->end_sent = cl->end_sent;
		extra->end_subs = cl->end_subs;
		extra->end_min = cl->end_min;
		extra->end_max = cl->end_max;
		extra->drop_replies = cl->drop_replies;
		extra->drop_groups = cl->drop_groups;
		memcpy(extra->drop_code, cl->drop_code, sizeof(extra->drop_code));
		if (cl->node) {
			/* the publisher's side: group streams it reset toward the
			 * relay (its own fanout: old, evicted, lagged, ...) */
			struct moq_node_stats ps;

			moq_node_stats(cl->node, &ps);
			extra->pub_resets = ps.resets_old + ps.resets_evicted + ps.resets_lagged +
			                    ps.resets_dropped + ps.resets_cancel;
			extra->pub_skipped = ps.groups_skipped;
			extra->pub_reset_by[0] = ps.resets_old;
			extra->pub_reset_by[1] = ps.resets_evicted;
			extra->pub_reset_by[2] = ps.resets_lagged;
			extra->pub_reset_by[3] = ps.resets_dropped;
			extra->pub_reset_by[4] = ps.resets_cancel;
			extra->pub_dgrams_out = ps.dgrams_out;
			extra->pub_dgrams_too_large = ps.dgrams_too_large;
		}
		if (cl->snode) {
			struct moq_node_stats ns;

			moq_node_stats(cl->snode, &ns);
			extra->groups_reset_unseen = ns.groups_reset_unseen;
			extra->sub_dgrams_in = ns.dgrams_in;
		}
	}
}

int moq_lg_client_end_early_done(const struct moq_lg_client *cl)
{
	uint64_t ended = 0;

	if (!cl->cfg.end_early_groups || !cl->end_sent || cl->opened < cl->cfg.subscribers ||
	    cl->end_subs < (uint64_t)cl->cfg.subscribers * cl->cfg.ntracks)
		return 0;
	for (uint32_t k = 0; k < cl->opened; k++)
		for (unsigned i = 0; i < cl->cfg.ntracks; i++)
			ended += cl->subs[k].rx[i].c.groups_ok + cl->subs[k].rx[i].c.groups_reset;
	return ended >= (uint64_t)cl->cfg.end_early_groups * cl->cfg.subscribers * cl->cfg.ntracks;
}

void moq_lg_client_reset_latency(struct moq_lg_client *cl)
{
	moq_lg_hist_reset(&cl->lat);
}

/* ---- heap ---------------------------------------------------------------- */

/* The x86-64 transparent huge page. */
#define HUGE_PAGE (2ull << 20)
/* An allocation that grows the heap: under malloc's default mmap threshold
 * (128 KiB), so it comes from the brk heap. */
#define GROW_CHUNK (120u << 10)
#define GROW_TRIES 8

long moq_lg_heap_hugepages(size_t reserve)
{
	void *p[GROW_TRIES];
	int n = 0;

	if (reserve < 2 * HUGE_PAGE || reserve > (1ull << 30))
		return MOQ_ERR_INVAL;
	/* every growth of the heap is by at least @reserve, and free() does
	 * not give it back (a trimmed and regrown heap is a new mapping
	 * without the advice) */
	mallopt(M_TOP_PAD, (int)reserve);
	mallopt(M_TRIM_THRESHOLD, (int)reserve);
	char *lo = sbrk(0);
	/* what the heap's top holds already is used first: allocate until the
	 * heap has grown */
	while (n < GROW_TRIES && (size_t)((char *)sbrk(0) - lo) < reserve / 2) {
		p[n] = malloc(GROW_CHUNK);
		if (!p[n])
			break;
		n++;
	}
	char *hi = sbrk(0);
	for (int i = 0; i < n; i++)
		free(p[i]);
	uintptr_t a = ((uintptr_t)lo + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
	uintptr_t b = (uintptr_t)hi & ~(uintptr_t)(HUGE_PAGE - 1);
	if (hi == (char *)-1 || lo == (char *)-1 || b <= a)
		return 0;
	if (madvise((void *)a, b - a, MADV_HUGEPAGE) != 0)
		return MOQ_ERR_IO;
	return (long)(b - a);
}
