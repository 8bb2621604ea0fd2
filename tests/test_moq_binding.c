/* SPDX-License-Identifier: MIT */
/*
 * test_moq_binding.c: moq-lite sessions on a binding (moq.h, Bindings): the
 * interface WebTransport and qmux implement, driven by an in-memory pair of
 * binding ends that delivers stream bytes, FINs, resets and acknowledgements
 * between two nodes in order. A publisher node and a subscriber node reach a
 * relay node through it; the relay sees only moq_binding_accept sessions.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lite06_codec.h"
#include "moq.h"

#define MS          1000000ull
#define FRAMES      10
#define MAX_STREAMS 512

enum { P_DATA, P_RESET, P_STOP, P_CLOSE };

struct pend {
	struct pend *next;
	int kind;
	int64_t sid;
	uint8_t *data;
	size_t len;
	int fin;
	uint64_t code;
};

struct strm {
	int64_t sid;
	int used;
	uint64_t written; /* bytes we wrote */
	int wdone, rdone; /* our sending / receiving side finished */
	int closed;
};

struct end {
	struct moq_session *s;
	struct end *peer;
	int server;
	int64_t nbidi, nuni;
	struct pend *head, *tail; /* for the peer */
	struct strm st[MAX_STREAMS];
	int closed;
	uint64_t close_code;
	int close_local;
	uint64_t opens, writes;
};

static struct end *end_new(int server)
{
	struct end *e = calloc(1, sizeof(*e));

	ck_assert(e);
	e->server = server;
	return e;
}

static struct strm *strm_get(struct end *e, int64_t sid, int create)
{
	struct strm *free_slot = NULL;

	for (int i = 0; i < MAX_STREAMS; i++) {
		if (e->st[i].used && e->st[i].sid == sid)
			return &e->st[i];
		if (!e->st[i].used && !free_slot)
			free_slot = &e->st[i];
	}
	if (!create || !free_slot)
		return NULL;
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->used = 1;
	free_slot->sid = sid;
	/* a uni stream has one direction only */
	if (sid & 2) {
		int ours = (int)(sid & 1) == e->server;
		if (ours)
			free_slot->rdone = 1;
		else
			free_slot->wdone = 1;
	}
	return free_slot;
}

static void push(struct end *e, int kind, int64_t sid, const void *d, size_t len, int fin,
                 uint64_t code)
{
	struct pend *p = calloc(1, sizeof(*p));

	ck_assert(p);
	p->kind = kind;
	p->sid = sid;
	p->fin = fin;
	p->code = code;
	if (len) {
		p->data = malloc(len);
		ck_assert(p->data);
		memcpy(p->data, d, len);
		p->len = len;
	}
	if (e->tail)
		e->tail->next = p;
	else
		e->head = p;
	e->tail = p;
}

static int b_open(void *b, int bidi, int64_t *sid)
{
	struct end *e = b;
	int64_t idx = bidi ? e->nbidi++ : e->nuni++;

	if (e->closed)
		return MOQ_ERR_CLOSED;
	*sid = idx << 2 | (bidi ? 0 : 2) | e->server;
	ck_assert(strm_get(e, *sid, 1));
	e->opens++;
	return 0;
}

static long b_write(void *b, int64_t sid, const struct iovec *iov, size_t n, int fin)
{
	struct end *e = b;
	struct strm *t = strm_get(e, sid, 1);
	size_t total = 0;
	uint8_t *buf;

	ck_assert(t);
	ck_assert_msg(!t->wdone, "write on a finished stream %lld", (long long)sid);
	for (size_t i = 0; i < n; i++)
		total += iov[i].iov_len;
	buf = malloc(total ? total : 1);
	ck_assert(buf);
	total = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(buf + total, iov[i].iov_base, iov[i].iov_len);
		total += iov[i].iov_len;
	}
	push(e, P_DATA, sid, buf, total, fin, 0);
	free(buf);
	t->written += total;
	e->writes++;
	return (long)total;
}

static int b_reset(void *b, int64_t sid, uint64_t code)
{
	struct end *e = b;
	struct strm *t = strm_get(e, sid, 1);

	if (t->wdone)
		return 0;
	t->wdone = 1;
	push(e, P_RESET, sid, NULL, 0, 0, code);
	return 0;
}

static int b_stop(void *b, int64_t sid, uint64_t code)
{
	struct end *e = b;

	push(e, P_STOP, sid, NULL, 0, 0, code);
	return 0;
}

static void b_close(void *b, uint64_t code)
{
	struct end *e = b;

	push(e, P_CLOSE, -1, NULL, 0, 0, code);
}

static const struct moq_binding_ops ops = {
        .stream_open = b_open,
        .stream_write = b_write,
        .stream_reset = b_reset,
        .stream_stop_sending = b_stop,
        .close = b_close,
};

static void maybe_closed(struct end *e, struct strm *t)
{
	if (t->wdone && t->rdone && !t->closed) {
		t->closed = 1;
		t->used = 0;
		if (e->s && !e->closed)
			moq_binding_stream_closed(e->s, t->sid);
	}
}

static void end_gone(struct end *e, uint64_t code, int local)
{
	if (e->closed)
		return;
	e->closed = 1;
	e->close_code = code;
	e->close_local = local;
	if (e->s)
		moq_binding_closed(e->s, code, local);
	e->s = NULL;
}

/* Deliver what @e queued to its peer (and the acknowledgements back).
 * Returns the number of items delivered. */
static int deliver(struct end *e)
{
	struct end *q = e->peer;
	int n = 0;
	struct pend *p;

	while ((p = e->head)) {
		e->head = p->next;
		if (!e->head)
			e->tail = NULL;
		n++;
		if (p->kind == P_CLOSE) {
			end_gone(e, p->code, 1);
			end_gone(q, p->code, 0);
		} else if (!q->closed && !e->closed) {
			struct strm *r = strm_get(q, p->sid, 1);
			struct strm *w = strm_get(e, p->sid, 0);
			switch (p->kind) {
			case P_DATA:
				if (r && !r->rdone) {
					if (p->fin)
						r->rdone = 1;
					moq_binding_stream_data(q->s, p->sid, p->data, p->len,
					                        p->fin);
				}
				if (w && !e->closed) {
					moq_binding_stream_acked(e->s, p->sid, w->written);
					if (p->fin && !w->wdone) {
						w->wdone = 1;
						maybe_closed(e, w);
					}
				}
				if (r && !q->closed)
					maybe_closed(q, r);
				break;
			case P_RESET:
				if (r && !r->rdone) {
					r->rdone = 1;
					moq_binding_stream_reset(q->s, p->sid, p->code);
					if (!q->closed)
						maybe_closed(q, r);
				}
				if (w)
					maybe_closed(e, w);
				break;
			case P_STOP:
				if (r && !r->wdone)
					moq_binding_stream_stop_sending(q->s, p->sid, p->code);
				break;
			}
		}
		free(p->data);
		free(p);
	}
	return n;
}

/* ------------------------------------------------------------- harness */

struct subst {
	uint64_t frames, bytes, bad, groups_done;
	uint64_t next_frame; /* expected index across the run */
	int ready;
	int64_t sub_closed;
};

static struct {
	struct moq_cache_counting rcnt, pcnt;
	struct moq_cache *rcache, *pcache;
	struct moq_node *relay, *pubn, *subn;
	struct end *pub_c, *pub_s, *sub_c, *sub_s;
	struct subst sub;
	uint64_t now;
	/* lite-06 mid-group start: group mid_seq's first frame is mid_frame */
	uint64_t mid_seq;
	uint32_t mid_frame;
	/* lite-06 Max Age: the groups subscription age_id completed (bits) */
	int64_t age_id;
	uint64_t age_groups;
} B;

static uint8_t fbyte(uint64_t seq, uint32_t idx, uint64_t off)
{
	return (uint8_t)(seq * 13 + idx * 5 + off);
}

static size_t fsize(uint64_t seq, uint32_t idx)
{
	return idx == 0 ? 3000 : 100 + (seq * 7 + idx * 11) % 900;
}

static uint64_t cur_seq, cur_off;
static uint32_t cur_idx;
static int cur_started;

static void on_ready(struct moq_session *s, void *user)
{
	(void)user;
	if (moq_session_user(s))
		((struct subst *)moq_session_user(s))->ready = 1;
}

static void on_frame(struct moq_session *s, void *user, uint64_t id, uint64_t seq, int64_t ts,
                     uint64_t size)
{
	(void)s;
	(void)user;
	(void)id;
	(void)ts;
	if (seq != cur_seq || !cur_started) {
		cur_seq = seq;
		cur_idx = seq == B.mid_seq ? B.mid_frame : 0;
		cur_started = 1;
	} else {
		cur_idx++;
	}
	cur_off = 0;
	if (size != fsize(seq, cur_idx))
		B.sub.bad++;
	B.sub.frames++;
}

static void on_frame_data(struct moq_session *s, void *user, uint64_t id, uint64_t seq,
                          const uint8_t *d, size_t len)
{
	(void)s;
	(void)user;
	(void)id;
	for (size_t i = 0; i < len; i++)
		if (d[i] != fbyte(seq, cur_idx, cur_off + i))
			B.sub.bad++;
	cur_off += len;
	B.sub.bytes += len;
}

static void on_group_end(struct moq_session *s, void *user, uint64_t id, uint64_t seq, int64_t code)
{
	(void)s;
	(void)user;
	if (code == -1)
		B.sub.groups_done++;
	if (code == -1 && (int64_t)id == B.age_id && seq < 64)
		B.age_groups |= 1ull << seq;
}

static void on_sub_closed(struct moq_session *s, void *user, uint64_t id, int64_t code)
{
	(void)s;
	(void)user;
	(void)id;
	B.sub.sub_closed = code;
}

static const struct moq_node_callbacks sub_cb = {
        .session_ready = on_ready,
        .frame = on_frame,
        .frame_data = on_frame_data,
        .group_end = on_group_end,
        .sub_closed = on_sub_closed,
};

static void setup(void)
{
	struct moq_cache_cfg cc = {0};
	struct moq_node_cfg nc = {0};

	memset(&B, 0, sizeof(B));
	cur_started = 0;
	B.now = 1000 * MS;
	moq_cache_counting_init(&B.rcnt);
	moq_cache_counting_init(&B.pcnt);
	cc.alloc = moq_cache_counting_alloc(&B.rcnt);
	B.rcache = moq_cache_create(&cc);
	cc.alloc = moq_cache_counting_alloc(&B.pcnt);
	B.pcache = moq_cache_create(&cc);
	ck_assert(B.rcache && B.pcache);
	nc.cache = B.rcache;
	nc.relay = 1;
	nc.origin = 77;
	B.relay = moq_node_create(&nc);
	memset(&nc, 0, sizeof(nc));
	nc.cache = B.pcache;
	nc.origin = 78;
	B.pubn = moq_node_create(&nc);
	memset(&nc, 0, sizeof(nc));
	nc.cb = &sub_cb;
	nc.origin = 79;
	B.subn = moq_node_create(&nc);
	ck_assert(B.relay && B.pubn && B.subn);
}

static void pair(struct end **c, struct end **s)
{
	*c = end_new(0);
	*s = end_new(1);
	(*c)->peer = *s;
	(*s)->peer = *c;
}

static void pump(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		int n = 0;
		B.now += MS;
		moq_node_poll(B.pubn, B.now);
		moq_node_poll(B.relay, B.now);
		moq_node_poll(B.subn, B.now);
		struct end *ends[] = {B.pub_c, B.pub_s, B.sub_c, B.sub_s};
		for (int k = 0; k < 4; k++)
			if (ends[k])
				n += deliver(ends[k]);
		(void)n;
	}
}

static void teardown_ends(void)
{
	struct end *ends[] = {B.pub_c, B.pub_s, B.sub_c, B.sub_s};

	for (int k = 0; k < 4; k++)
		if (ends[k]) {
			if (ends[k]->s)
				moq_session_close(ends[k]->s, 0);
		}
	pump(5);
	moq_node_destroy(B.subn);
	moq_node_destroy(B.pubn);
	moq_node_destroy(B.relay);
	moq_cache_destroy(B.pcache);
	moq_cache_destroy(B.rcache);
	for (int k = 0; k < 4; k++)
		if (ends[k]) {
			while (ends[k]->head) {
				struct pend *p = ends[k]->head;
				ends[k]->head = p->next;
				free(p->data);
				free(p);
			}
			free(ends[k]);
		}
}

/* A publisher on URL /demo publishing "room" and a subscriber on URL / reading
 * "demo/room": the URL path roots the publisher's session, and every byte of
 * FRAMES frames a group crosses both bindings in order. */
static void run_version(enum moq_version v)
{
	struct moq_cache_track *vt;
	struct moq_cache_group *g;
	struct moq_sub_params p = {0, false, 5000, MOQ_GROUP_NONE, MOQ_GROUP_NONE};
	uint64_t want_bytes = 0;
	const uint64_t groups = 6;

	setup();
	pair(&B.pub_c, &B.pub_s);
	pair(&B.sub_c, &B.sub_s);
	B.pub_s->s = moq_binding_accept(B.relay, &ops, B.pub_s, v, "/demo?x=1", 9);
	ck_assert(B.pub_s->s);
	B.pub_c->s = moq_binding_connect(B.pubn, &ops, B.pub_c, v, NULL, MOQ_ROLE_PUBLISHER);
	ck_assert(B.pub_c->s);
	B.sub_s->s = moq_binding_accept(B.relay, &ops, B.sub_s, v, "/", 1);
	B.sub_c->s = moq_binding_connect(B.subn, &ops, B.sub_c, v, NULL, MOQ_ROLE_SUBSCRIBER);
	ck_assert(B.sub_s->s && B.sub_c->s);
	moq_session_set_user(B.sub_c->s, &B.sub);
	ck_assert_int_eq(moq_cache_track_create(B.pcache, "room", 4, "video", 5, NULL, &vt), 0);
	ck_assert_int_eq(moq_node_publish(B.pubn, "room", 4, 1000), 0);
	pump(20);
	ck_assert_msg(B.sub.ready, "session_ready after moq_binding_connect, at a poll");
	ck_assert_int_ge(moq_session_subscribe(B.sub_c->s, "demo/room", 9, "video", 5, &p), 0);
	pump(20);
	for (uint64_t seq = 0; seq < groups; seq++) {
		ck_assert_int_eq(moq_cache_group_open(vt, seq, B.now, &g), 0);
		for (uint32_t i = 0; i < FRAMES; i++) {
			uint8_t buf[4000];
			size_t sz = fsize(seq, i);
			for (size_t k = 0; k < sz; k++)
				buf[k] = fbyte(seq, i, k);
			ck_assert_int_eq(moq_cache_write_frame(g, i, buf, sz), 0);
			want_bytes += sz;
			pump(2);
		}
		ck_assert_int_eq(moq_cache_group_finish(g), 0);
		moq_cache_group_unref(g);
		pump(5);
	}
	pump(30);
	ck_assert_uint_eq(B.sub.bad, 0);
	ck_assert_uint_eq(B.sub.frames, groups * FRAMES);
	ck_assert_uint_eq(B.sub.bytes, want_bytes);
	ck_assert_uint_eq(B.sub.groups_done, groups);
	ck_assert_msg(B.pub_s->opens + B.sub_s->opens > 0,
	              "the relay opened streams on the binding");
	moq_cache_track_unref(vt);
	teardown_ends();
}

START_TEST(test_binding_lite05)
{
	run_version(MOQ_LITE_05);
}
END_TEST

START_TEST(test_binding_lite04)
{
	run_version(MOQ_LITE_04);
}
END_TEST

/* moq-lite-06 on a binding (the path WebTransport and qmux take). */
START_TEST(test_binding_lite06)
{
	run_version(MOQ_LITE_06);
}
END_TEST

/* lite-06: SUBSCRIBE { group start 2, frame start 3, group end 4, frame end
 * 5 }: group 2 from its fourth frame, group 3 whole, group 4's first five
 * frames, each byte checked; groups 0, 1 and 5 never come. Then a FETCH-less
 * check of the bounds' refusals: frame bounds on unnamed groups. */
START_TEST(test_binding_lite06_mid_group)
{
	struct moq_cache_track *vt;
	struct moq_cache_group *g;
	struct moq_sub_params p = {0, false, 5000, 2, 4, 3, 5};
	struct moq_sub_params bad = {0, false, 5000, MOQ_GROUP_NONE, 4, 3, 0};
	uint64_t want_bytes = 0, want_frames = 0;
	const uint64_t groups = 6;

	setup();
	B.mid_seq = 2;
	B.mid_frame = 3;
	pair(&B.pub_c, &B.pub_s);
	pair(&B.sub_c, &B.sub_s);
	B.pub_s->s = moq_binding_accept(B.relay, &ops, B.pub_s, MOQ_LITE_06, "/demo", 5);
	B.pub_c->s =
	        moq_binding_connect(B.pubn, &ops, B.pub_c, MOQ_LITE_06, NULL, MOQ_ROLE_PUBLISHER);
	B.sub_s->s = moq_binding_accept(B.relay, &ops, B.sub_s, MOQ_LITE_06, "/", 1);
	B.sub_c->s =
	        moq_binding_connect(B.subn, &ops, B.sub_c, MOQ_LITE_06, NULL, MOQ_ROLE_SUBSCRIBER);
	ck_assert(B.pub_c->s && B.sub_c->s);
	moq_session_set_user(B.sub_c->s, &B.sub);
	ck_assert_int_eq(moq_cache_track_create(B.pcache, "room", 4, "video", 5, NULL, &vt), 0);
	ck_assert_int_eq(moq_node_publish(B.pubn, "room", 4, 1000), 0);
	pump(20);
	ck_assert(B.sub.ready);
	/* a frame start without its group is refused before anything is sent */
	ck_assert_int_eq(moq_session_subscribe(B.sub_c->s, "demo/room", 9, "video", 5, &bad),
	                 MOQ_ERR_INVAL);
	ck_assert_int_ge(moq_session_subscribe(B.sub_c->s, "demo/room", 9, "video", 5, &p), 0);
	pump(20);
	for (uint64_t seq = 0; seq < groups; seq++) {
		ck_assert_int_eq(moq_cache_group_open(vt, seq, B.now, &g), 0);
		for (uint32_t i = 0; i < FRAMES; i++) {
			uint8_t buf[4000];
			size_t sz = fsize(seq, i);
			for (size_t k = 0; k < sz; k++)
				buf[k] = fbyte(seq, i, k);
			ck_assert_int_eq(moq_cache_write_frame(g, i, buf, sz), 0);
			if ((seq == 2 && i >= 3) || seq == 3 || (seq == 4 && i < 5)) {
				want_bytes += sz;
				want_frames++;
			}
			pump(2);
		}
		ck_assert_int_eq(moq_cache_group_finish(g), 0);
		moq_cache_group_unref(g);
		pump(5);
	}
	pump(30);
	ck_assert_uint_eq(want_frames, 7 + 10 + 5);
	ck_assert_uint_eq(B.sub.bad, 0);
	ck_assert_uint_eq(B.sub.frames, want_frames);
	ck_assert_uint_eq(B.sub.bytes, want_bytes);
	ck_assert_uint_eq(B.sub.groups_done, 3);
	moq_cache_track_unref(vt);
	teardown_ends();
}
END_TEST

/* lite-06 6.4 on the receiving side: a publisher's datagram whose whole
 * body exceeds 1,200 bytes "a receiver MUST silently drop": the relay takes
 * a 1,200-byte body into its cache (a group the subscriber then gets on a
 * stream) and drops a 1,201-byte one, counted bad, the session going on;
 * lite-05 has no such bound (the same 1,201 bytes are taken). */
static void dgram_body(uint8_t *buf, size_t len, uint64_t seq)
{
	int hl = moq_dgram_hdr_encode(buf, len, 0, seq, 0);

	ck_assert_int_gt(hl, 0);
	for (size_t k = (size_t)hl; k < len; k++)
		buf[k] = (uint8_t)k;
}

static void run_dgram_cap(enum moq_version v, uint64_t want_in, uint64_t want_bad)
{
	struct moq_cache_track *vt;
	struct moq_sub_params p = {0, false, 5000, MOQ_GROUP_NONE, MOQ_GROUP_NONE};
	struct moq_node_stats ns;
	uint8_t buf[1201];

	setup();
	pair(&B.pub_c, &B.pub_s);
	pair(&B.sub_c, &B.sub_s);
	B.pub_s->s = moq_binding_accept(B.relay, &ops, B.pub_s, v, "/demo", 5);
	B.pub_c->s = moq_binding_connect(B.pubn, &ops, B.pub_c, v, NULL, MOQ_ROLE_PUBLISHER);
	B.sub_s->s = moq_binding_accept(B.relay, &ops, B.sub_s, v, "/", 1);
	B.sub_c->s = moq_binding_connect(B.subn, &ops, B.sub_c, v, NULL, MOQ_ROLE_SUBSCRIBER);
	ck_assert(B.pub_c->s && B.sub_c->s);
	moq_session_set_user(B.sub_c->s, &B.sub);
	ck_assert_int_eq(moq_cache_track_create(B.pcache, "room", 4, "video", 5, NULL, &vt), 0);
	ck_assert_int_eq(moq_node_publish(B.pubn, "room", 4, 1000), 0);
	pump(20);
	ck_assert_int_ge(moq_session_subscribe(B.sub_c->s, "demo/room", 9, "video", 5, &p), 0);
	pump(20);
	/* the relay's subscription upstream is its first (id 0) on the
	 * publisher's session: datagrams as the publisher would send them */
	dgram_body(buf, 1200, 0);
	moq_binding_datagram(B.pub_s->s, buf, 1200);
	pump(20);
	dgram_body(buf, 1201, 1);
	moq_binding_datagram(B.pub_s->s, buf, 1201);
	pump(20);
	moq_node_stats(B.relay, &ns);
	ck_assert_uint_eq(ns.dgrams_in, want_in);
	ck_assert_uint_eq(ns.dgrams_in_bad, want_bad);
	ck_assert_uint_eq(B.sub.groups_done, want_in);
	ck_assert_int_eq(B.pub_s->closed, 0);
	ck_assert_int_eq(B.sub_c->closed, 0);
	moq_cache_track_unref(vt);
	teardown_ends();
}

START_TEST(test_binding_lite06_datagram_1200)
{
	run_dgram_cap(MOQ_LITE_06, 1, 1);
	run_dgram_cap(MOQ_LITE_05, 2, 0);
}
END_TEST

/* The URL path roots the session: the broadcast is "demo/room", so a
 * subscriber asking for "room" gets not-found, not the broadcast. */
START_TEST(test_binding_root)
{
	struct moq_cache_track *vt;
	struct moq_sub_params p = {0, false, 5000, MOQ_GROUP_NONE, MOQ_GROUP_NONE};

	setup();
	B.sub.sub_closed = 0;
	pair(&B.pub_c, &B.pub_s);
	pair(&B.sub_c, &B.sub_s);
	B.pub_s->s = moq_binding_accept(B.relay, &ops, B.pub_s, MOQ_LITE_05, "/demo", 5);
	B.pub_c->s =
	        moq_binding_connect(B.pubn, &ops, B.pub_c, MOQ_LITE_05, NULL, MOQ_ROLE_PUBLISHER);
	B.sub_s->s = moq_binding_accept(B.relay, &ops, B.sub_s, MOQ_LITE_05, "/", 1);
	B.sub_c->s =
	        moq_binding_connect(B.subn, &ops, B.sub_c, MOQ_LITE_05, NULL, MOQ_ROLE_SUBSCRIBER);
	moq_session_set_user(B.sub_c->s, &B.sub);
	ck_assert_int_eq(moq_cache_track_create(B.pcache, "room", 4, "video", 5, NULL, &vt), 0);
	ck_assert_int_eq(moq_node_publish(B.pubn, "room", 4, 1000), 0);
	pump(20);
	ck_assert_int_ge(moq_session_subscribe(B.sub_c->s, "room", 4, "video", 5, &p), 0);
	pump(20);
	ck_assert_int_eq(B.sub.sub_closed, 13); /* not found */
	moq_cache_track_unref(vt);
	teardown_ends();
}
END_TEST

/* Bad input on one binding session: an unknown stream type is refused on
 * that stream alone (STOP_SENDING 10 through the binding); a message cut short
 * by FIN closes that session through the binding's close with 5 (decode);
 * the other session goes on. */
START_TEST(test_binding_bad_input_closes_one)
{
	static const uint8_t junk[] = {0x3f, 0x01, 0x02};
	static const uint8_t cut[] = {MOQ_STREAM_SUBSCRIBE, 0x20, 0x01};
	struct pend *p;
	int stopped = 0;

	setup();
	pair(&B.pub_c, &B.pub_s);
	pair(&B.sub_c, &B.sub_s);
	B.pub_s->s = moq_binding_accept(B.relay, &ops, B.pub_s, MOQ_LITE_05, "/", 1);
	B.pub_c->s = moq_binding_connect(B.pubn, &ops, B.pub_c, MOQ_LITE_05, NULL, MOQ_ROLE_BOTH);
	B.sub_s->s = moq_binding_accept(B.relay, &ops, B.sub_s, MOQ_LITE_05, "/", 1);
	B.sub_c->s = moq_binding_connect(B.subn, &ops, B.sub_c, MOQ_LITE_05, NULL, MOQ_ROLE_BOTH);
	moq_session_set_user(B.sub_c->s, &B.sub);
	pump(10);
	/* an unknown stream type on a client uni stream: that stream only */
	moq_binding_stream_data(B.pub_s->s, 402, junk, sizeof(junk), 0);
	for (p = B.pub_s->head; p; p = p->next)
		if (p->kind == P_STOP && p->sid == 402 && p->code == MOQ_CODE_UNEXPECTED_STREAM)
			stopped = 1;
	ck_assert_msg(stopped, "STOP_SENDING 10 on the unknown stream");
	pump(10);
	ck_assert(!B.pub_s->closed);
	/* a SUBSCRIBE declaring 32 bytes, then FIN after 1: the session */
	moq_binding_stream_data(B.pub_s->s, 400, cut, sizeof(cut), 1);
	pump(10);
	ck_assert_msg(B.pub_s->closed, "the relay closed the bad session");
	ck_assert_uint_eq(B.pub_s->close_code, MOQ_CODE_DECODE);
	ck_assert(B.pub_s->close_local);
	ck_assert(B.pub_c->closed && !B.pub_c->close_local);
	ck_assert(!B.sub_s->closed && !B.sub_c->closed);
	ck_assert(moq_session_ready(B.sub_c->s));
	teardown_ends();
}
END_TEST

/* The Max Age cases' start: a lite-06 publisher of demo/room "video"
 * (its TRACK_INFO timescale @timescale) and a lite-06 subscriber with a
 * live subscription that keeps the track at the relay. */
static struct moq_cache_track *max_age_setup(uint64_t timescale)
{
	struct moq_sub_params live = {0, false, 5000, MOQ_GROUP_NONE, MOQ_GROUP_NONE, 0, 0};
	struct moq_cache_track *vt;

	setup();
	B.age_id = -1;
	pair(&B.pub_c, &B.pub_s);
	pair(&B.sub_c, &B.sub_s);
	B.pub_s->s = moq_binding_accept(B.relay, &ops, B.pub_s, MOQ_LITE_06, "/demo", 5);
	B.pub_c->s =
	        moq_binding_connect(B.pubn, &ops, B.pub_c, MOQ_LITE_06, NULL, MOQ_ROLE_PUBLISHER);
	B.sub_s->s = moq_binding_accept(B.relay, &ops, B.sub_s, MOQ_LITE_06, "/", 1);
	B.sub_c->s =
	        moq_binding_connect(B.subn, &ops, B.sub_c, MOQ_LITE_06, NULL, MOQ_ROLE_SUBSCRIBER);
	moq_session_set_user(B.sub_c->s, &B.sub);
	ck_assert_int_eq(moq_cache_track_create(B.pcache, "room", 4, "video", 5, NULL, &vt), 0);
	ck_assert_int_eq(moq_node_publish(B.pubn, "room", 4, timescale), 0);
	pump(20);
	ck_assert_int_ge(moq_session_subscribe(B.sub_c->s, "demo/room", 9, "video", 5, &live), 0);
	pump(20);
	return vt;
}

/* lite-06 Max Age: a subscriber joining with Group Start 0 (the default
 * floor) starts at the oldest group still within its Max Age. The frames'
 * timestamps are all 0 here (they cannot say), so a group's age runs from
 * when its successor began at the relay (test_binding_lite06_max_age_timestamps
 * has the timestamps' case): groups begin
 * 100 ms apart; joining 50 ms after group 5 began, Max Age 275 ms reaches
 * back to group 2 (its age 250 ms, group 1's 350 ms), Max Age 0 gives the
 * newest group alone. A live lite-06 subscription keeps the track at the
 * relay meanwhile. */
START_TEST(test_binding_lite06_max_age)
{
	struct moq_cache_track *vt;
	struct moq_cache_group *g[7];
	struct moq_sub_params aged = {0, false, 275, MOQ_GROUP_NONE, MOQ_GROUP_NONE, 0, 0};
	int64_t id;

	vt = max_age_setup(1000);
	for (uint64_t seq = 0; seq < 6; seq++) {
		uint8_t buf[200];
		if (seq)
			B.now += 100 * MS - 10 * MS; /* pump(10) below adds 10 ms */
		ck_assert_int_eq(moq_cache_group_open(vt, seq, B.now, &g[seq]), 0);
		memset(buf, (int)seq, sizeof(buf));
		ck_assert_int_eq(moq_cache_write_frame(g[seq], 0, buf, sizeof(buf)), 0);
		if (seq < 5) /* the newest stays open: the track is live */
			ck_assert_int_eq(moq_cache_group_finish(g[seq]), 0);
		pump(10);
	}
	B.now += 40 * MS;
	id = moq_session_subscribe(B.sub_c->s, "demo/room", 9, "video", 5, &aged);
	ck_assert_int_ge(id, 0);
	B.age_id = id;
	pump(30);
	/* groups 2, 3 and 4 complete for the aged subscription; 5 is open */
	ck_assert_msg(B.age_groups == ((1ull << 2) | (1ull << 3) | (1ull << 4)),
	              "groups completed for Max Age 275 ms: %#llx",
	              (unsigned long long)B.age_groups);
	/* Max Age 0: the newest group only (5: still open, nothing completes
	 * until it does) */
	aged.max_latency_ms = 0;
	B.age_groups = 0;
	id = moq_session_subscribe(B.sub_c->s, "demo/room", 9, "video", 5, &aged);
	ck_assert_int_ge(id, 0);
	B.age_id = id;
	pump(10);
	ck_assert_int_eq(moq_cache_group_finish(g[5]), 0);
	pump(30);
	ck_assert_msg(B.age_groups == (1ull << 5), "groups completed for Max Age 0: %#llx",
	              (unsigned long long)B.age_groups);
	for (int k = 0; k < 6; k++)
		moq_cache_group_unref(g[k]);
	moq_cache_track_unref(vt);
	teardown_ends();
}
END_TEST

/* lite-06 Max Age is measured on group timestamps (PROTOCOL.md: a group's
 * age runs from its successor's first timestamp), not on arrival: six
 * groups arrive at the relay in one burst, their timestamps 100 ms apart
 * (timescale 1,000,000, learned from the publisher's TRACK_INFO). Newest
 * timestamp 500 ms: group 2's age 200 ms, group 1's 300 ms, so Max Age
 * 275 ms starts at group 2 (by arrival every group is 0 ms old and it
 * would start at 0). */
START_TEST(test_binding_lite06_max_age_timestamps)
{
	struct moq_cache_track *vt;
	struct moq_cache_group *g[6];
	struct moq_sub_params aged = {0, false, 275, MOQ_GROUP_NONE, MOQ_GROUP_NONE, 0, 0};
	int64_t id;

	vt = max_age_setup(1000000);
	for (uint64_t seq = 0; seq < 6; seq++) {
		uint8_t buf[200];
		ck_assert_int_eq(moq_cache_group_open(vt, seq, B.now, &g[seq]), 0);
		memset(buf, (int)seq, sizeof(buf));
		ck_assert_int_eq(moq_cache_write_frame(g[seq], (int64_t)seq * 100000, buf,
		                                       sizeof(buf)),
		                 0);
		if (seq < 5) /* the newest stays open: the track is live */
			ck_assert_int_eq(moq_cache_group_finish(g[seq]), 0);
	}
	pump(10);
	id = moq_session_subscribe(B.sub_c->s, "demo/room", 9, "video", 5, &aged);
	ck_assert_int_ge(id, 0);
	B.age_id = id;
	pump(30);
	ck_assert_msg(B.age_groups == ((1ull << 2) | (1ull << 3) | (1ull << 4)),
	              "groups completed for Max Age 275 ms on timestamps: %#llx",
	              (unsigned long long)B.age_groups);
	for (int k = 0; k < 6; k++)
		moq_cache_group_unref(g[k]);
	moq_cache_track_unref(vt);
	teardown_ends();
}
END_TEST

/* lite-06 protocol violations close the session (wire code 0x3): a second
 * ANNOUNCE_START for a prefix on an announce stream, and a GOAWAY stream
 * from a client (GOAWAY is the server's); the other session goes on. */
START_TEST(test_binding_lite06_violations)
{
	/* ANNOUNCE_START { "room", no hops, warm 0, cold 0 } */
	static const uint8_t start[] = {0x00, 0x08, 0x04, 'r', 'o', 'o', 'm', 0x00, 0x00, 0x00};
	static const uint8_t goaway[] = {MOQ_STREAM_GOAWAY, 0x01, 0x00};

	for (int k = 0; k < 2; k++) {
		setup();
		pair(&B.pub_c, &B.pub_s);
		pair(&B.sub_c, &B.sub_s);
		B.pub_s->s = moq_binding_accept(B.relay, &ops, B.pub_s, MOQ_LITE_06, "/", 1);
		B.pub_c->s = moq_binding_connect(B.pubn, &ops, B.pub_c, MOQ_LITE_06, NULL,
		                                 MOQ_ROLE_PUBLISHER);
		B.sub_s->s = moq_binding_accept(B.relay, &ops, B.sub_s, MOQ_LITE_06, "/", 1);
		B.sub_c->s = moq_binding_connect(B.subn, &ops, B.sub_c, MOQ_LITE_06, NULL,
		                                 MOQ_ROLE_SUBSCRIBER);
		moq_session_set_user(B.sub_c->s, &B.sub);
		ck_assert_int_eq(moq_node_publish(B.pubn, "room", 4, 1000), 0);
		pump(20);
		ck_assert(!B.pub_s->closed);
		if (k == 0) {
			/* the relay's announce request to the publisher is its
			 * first bidi stream (1); the same START twice more */
			moq_binding_stream_data(B.pub_s->s, 1, start, sizeof(start), 0);
			moq_binding_stream_data(B.pub_s->s, 1, start, sizeof(start), 0);
		} else {
			moq_binding_stream_data(B.pub_s->s, 400, goaway, sizeof(goaway), 0);
		}
		pump(10);
		ck_assert_msg(B.pub_s->closed, "case %d: the relay closed the session", k);
		ck_assert_uint_eq(B.pub_s->close_code, MOQ6_SESS_PROTOCOL_VIOLATION);
		ck_assert(B.pub_s->close_local);
		ck_assert(!B.sub_s->closed && !B.sub_c->closed);
		ck_assert(moq_session_ready(B.sub_c->s));
		teardown_ends();
	}
}
END_TEST

/* ---- lite-06 route costs (draft-lcurley-moq-lite-06 5.1.1.1, 7.3.4, 7.6) */

/* A raw lite-06 peer of the relay: the relay's session is real, the peer's
 * side is bytes this test writes (its end has no session). */
static struct end *raw_peer(struct end **c)
{
	struct end *s;

	pair(c, &s);
	s->s = moq_binding_accept(B.relay, &ops, s, MOQ_LITE_06, "/", 1);
	ck_assert(s->s);
	return s;
}

/* SETUP on the peer's first uni stream (2): Role @role, Cost @cost. */
static void raw_setup(struct end *s, uint64_t role, uint64_t cost)
{
	const uint8_t b[] = {MOQ_STREAM_SETUP, 0x07, 0x02, 0x03,         0x01,
	                     (uint8_t)role,    0x04, 0x01, (uint8_t)cost};
	moq_binding_stream_data(s->s, 2, b, sizeof(b), 1);
}

/* ANNOUNCE_OK { hop @hop, active 0 }, the publisher's first reply on the
 * relay's announce request to it (the relay's first bidi stream, 1). */
static void raw_ok(struct end *s, uint8_t hop)
{
	const uint8_t b[] = {0x02, hop, 0x00};
	moq_binding_stream_data(s->s, 1, b, sizeof(b), 0);
}

/* ANNOUNCE_START { "room", no hops, @warm, @cold } on that stream. */
static void raw_start(struct end *s, uint8_t warm, uint8_t cold)
{
	const uint8_t b[] = {0x00, 0x08, 0x04, 'r', 'o', 'o', 'm', 0x00, warm, cold};
	moq_binding_stream_data(s->s, 1, b, sizeof(b), 0);
}

static void pump_ends(struct end **ends, int n, int rounds, uint8_t *cap, size_t *caplen,
                      size_t capmax, struct end *watch)
{
	for (int i = 0; i < rounds; i++) {
		B.now += MS;
		moq_node_poll(B.relay, B.now);
		for (struct pend *p = watch->head; p; p = p->next)
			if (p->kind == P_DATA && p->sid == 0 && p->len) {
				ck_assert_uint_le(*caplen + p->len, capmax);
				memcpy(cap + *caplen, p->data, p->len);
				*caplen += p->len;
			}
		for (int k = 0; k < n; k++)
			deliver(ends[k]);
	}
}

/* The announces the relay sent on the subscriber's announce stream since
 * offset *@off: returns the last one's kind and costs. */
static int last_announce(const uint8_t *cap, size_t len, size_t *off, struct moq6_announce *out)
{
	int n = 0;

	while (*off < len) {
		struct moq6_msg m;
		int k = moq6_msg_decode(MOQ6_ANNOUNCE, cap + *off, len - *off, 4096, &m);
		ck_assert_int_gt(k, 0);
		*off += (size_t)k;
		*out = m.u.announce;
		n++;
	}
	return n;
}

/* The nodes, caches and the @n ends of a raw-peer test, freed. */
static void raw_teardown(struct end **ends, int n)
{
	moq_node_destroy(B.subn);
	moq_node_destroy(B.pubn);
	moq_node_destroy(B.relay);
	moq_cache_destroy(B.pcache);
	moq_cache_destroy(B.rcache);
	for (int i = 0; i < n; i++) {
		while (ends[i]->head) {
			struct pend *p = ends[i]->head;
			ends[i]->head = p->next;
			free(p->data);
			free(p);
		}
		free(ends[i]);
	}
}

START_TEST(test_binding_lite06_route_costs)
{
	struct end *p1c, *p2c, *sc, *p1, *p2, *sub;
	static uint8_t cap[4096];
	size_t caplen = 0, off = 0;
	struct moq6_msg m;
	struct moq6_announce a;
	struct moq_node_stats st;
	/* ANNOUNCE_REQUEST { "" } on the subscriber's first bidi stream (0) */
	static const uint8_t req[] = {MOQ_STREAM_ANNOUNCE, 0x01, 0x00};
	/* ANNOUNCE_END { id 0 } */
	static const uint8_t end0[] = {0x01, 0x01, 0x00};
	int k;

	setup();
	p1 = raw_peer(&p1c);
	p2 = raw_peer(&p2c);
	sub = raw_peer(&sc);
	struct end *ends[] = {p1, p2, sub, p1c, p2c, sc};
	raw_setup(p1, MOQ_ROLE_PUBLISHER, 1);
	raw_setup(p2, MOQ_ROLE_PUBLISHER, 3);
	raw_setup(sub, MOQ_ROLE_SUBSCRIBER, 1);
	pump_ends(ends, 6, 5, cap, &caplen, sizeof(cap), sub);
	ck_assert(!p1->closed && !p2->closed && !sub->closed);
	raw_ok(p1, 41);
	raw_ok(p2, 42);
	pump_ends(ends, 6, 2, cap, &caplen, sizeof(cap), sub);
	ck_assert(!p1->closed && !p2->closed);
	/* P1 advertises warm 4 / cold 6 and declared Cost 1: the route costs
	 * 5 / 7 at the relay */
	raw_start(p1, 4, 6);
	pump_ends(ends, 6, 5, cap, &caplen, sizeof(cap), sub);
	moq_binding_stream_data(sub->s, 0, req, sizeof(req), 0);
	pump_ends(ends, 6, 5, cap, &caplen, sizeof(cap), sub);
	k = moq6_msg_decode(MOQ6_ANNOUNCE_OK, cap, caplen, 4096, &m);
	ck_assert_int_gt(k, 0);
	ck_assert_uint_eq(m.u.announce_ok.active, 1);
	ck_assert_uint_eq(m.u.announce_ok.hop, 77);
	off = (size_t)k;
	ck_assert_int_eq(last_announce(cap, caplen, &off, &a), 1);
	ck_assert_uint_eq(a.kind, MOQ6_ANN_START);
	ck_assert_uint_eq(a.warm_cost, 5);
	ck_assert_uint_eq(a.cold_cost, 7);
	/* P2, newer but dearer (9 + its Cost 3 = 12): a standby, the route and
	 * what the subscriber heard stay */
	raw_start(p2, 9, 9);
	pump_ends(ends, 6, 5, cap, &caplen, sizeof(cap), sub);
	moq_node_stats(B.relay, &st);
	ck_assert_uint_eq(st.bcast_replaced, 0);
	ck_assert_int_eq(last_announce(cap, caplen, &off, &a), 0);
	/* P1 ends its route: P2 takes over, the subscriber hears the new price
	 * as an ANNOUNCE_UPDATE of the same id */
	moq_binding_stream_data(p1->s, 1, end0, sizeof(end0), 0);
	pump_ends(ends, 6, 5, cap, &caplen, sizeof(cap), sub);
	moq_node_stats(B.relay, &st);
	ck_assert_uint_eq(st.bcast_failovers, 1);
	ck_assert_int_ge(last_announce(cap, caplen, &off, &a), 1);
	ck_assert_uint_eq(a.kind, MOQ6_ANN_UPDATE);
	ck_assert_uint_eq(a.id, 0);
	ck_assert_uint_eq(a.warm_cost, 12);
	ck_assert_uint_eq(a.cold_cost, 12);
	/* P1 again, cheaper (0 + 1): it wins the route back at once */
	raw_start(p1, 0, 0);
	pump_ends(ends, 6, 5, cap, &caplen, sizeof(cap), sub);
	moq_node_stats(B.relay, &st);
	ck_assert_uint_eq(st.bcast_replaced, 1);
	ck_assert_int_ge(last_announce(cap, caplen, &off, &a), 1);
	ck_assert_uint_eq(a.kind, MOQ6_ANN_UPDATE);
	ck_assert_uint_eq(a.warm_cost, 1);
	ck_assert_uint_eq(a.cold_cost, 1);
	ck_assert(!p1->closed && !p2->closed && !sub->closed);
	for (int i = 0; i < 3; i++)
		moq_session_close(ends[i]->s, 0);
	pump_ends(ends, 6, 3, cap, &caplen, sizeof(cap), sub);
	raw_teardown(ends, 6);
}
END_TEST

/* lite-06 7.18: "A relay that receives a GOAWAY SHOULD treat the
 * announcements that arrived on that session as the most expensive routes
 * available, so a subscription it can serve from another session moves at
 * the next Group boundary ... The routes stay usable." The relay dials two
 * raw lite-06 servers that both carry "room" from the same origin (hop 50):
 * S1 at warm 1, S2 at warm 5 (+ the link's Cost 1: 2 and 6), so S1's route
 * is live and S2's a standby. S1 sends GOAWAY: the route moves to S2 at once
 * (a failover counted drained, S1 kept as a standby) and a lite-06
 * subscriber hears ANNOUNCE_UPDATE at 6. S2 sends GOAWAY too: no route left
 * that is not draining, so it stays on S2 and is advertised at the ceiling
 * (the drain propagates downstream). Nobody is closed. */
static struct end *raw_server(struct end **srv, uint8_t cost)
{
	struct end *c;
	/* the server's SETUP { Cost } on its first uni stream (3) */
	const uint8_t setup6[] = {MOQ_STREAM_SETUP, 0x04, 0x01, 0x04, 0x01, cost};

	pair(&c, srv);
	c->s = moq_binding_connect(B.relay, &ops, c, MOQ_LITE_06, NULL, MOQ_ROLE_BOTH);
	ck_assert(c->s);
	moq_binding_stream_data(c->s, 3, setup6, sizeof(setup6), 1);
	return c;
}

START_TEST(test_binding_lite06_goaway_reprices)
{
	struct end *c1, *s1, *c2, *s2, *sc, *sub;
	static uint8_t cap[4096];
	size_t caplen = 0, off = 0;
	struct moq6_msg m;
	struct moq6_announce a;
	struct moq_node_stats st;
	static const uint8_t req[] = {MOQ_STREAM_ANNOUNCE, 0x01, 0x00};
	/* ANNOUNCE_OK { hop, active 0 } and ANNOUNCE_START { "room", hops
	 * [50], warm, cold } on the relay's announce request (its bidi 0) */
	const uint8_t ok1[] = {0x02, 41, 0x00}, ok2[] = {0x02, 42, 0x00};
	const uint8_t st1[] = {0x00, 0x09, 0x04, 'r', 'o', 'o', 'm', 0x01, 50, 1, 1};
	const uint8_t st2[] = {0x00, 0x09, 0x04, 'r', 'o', 'o', 'm', 0x01, 50, 5, 5};
	/* GOAWAY { "" } on the server's first bidi stream (1) */
	static const uint8_t goaway[] = {0x05, 0x01, 0x00};
	int k;

	setup();
	c1 = raw_server(&s1, 1);
	c2 = raw_server(&s2, 1);
	sub = raw_peer(&sc);
	struct end *ends[] = {c1, s1, c2, s2, sub, sc};
	raw_setup(sub, MOQ_ROLE_SUBSCRIBER, 1);
	pump_ends(ends, 6, 5, cap, &caplen, sizeof(cap), sub);
	ck_assert_int_eq(moq_session_announce_request(c1->s, "", 0), 0);
	ck_assert_int_eq(moq_session_announce_request(c2->s, "", 0), 0);
	pump_ends(ends, 6, 2, cap, &caplen, sizeof(cap), sub);
	moq_binding_stream_data(c1->s, 0, ok1, sizeof(ok1), 0);
	pump_ends(ends, 6, 3, cap, &caplen, sizeof(cap), sub);
	moq_binding_stream_data(c1->s, 0, st1, sizeof(st1), 0);
	pump_ends(ends, 6, 3, cap, &caplen, sizeof(cap), sub);
	moq_binding_stream_data(c2->s, 0, ok2, sizeof(ok2), 0);
	moq_binding_stream_data(c2->s, 0, st2, sizeof(st2), 0);
	pump_ends(ends, 6, 3, cap, &caplen, sizeof(cap), sub);
	ck_assert_msg(!c1->closed && !c2->closed && !sub->closed, "closed %d/%llu %d/%llu %d/%llu",
	              c1->closed, (unsigned long long)c1->close_code, c2->closed,
	              (unsigned long long)c2->close_code, sub->closed,
	              (unsigned long long)sub->close_code);
	moq_binding_stream_data(sub->s, 0, req, sizeof(req), 0);
	pump_ends(ends, 6, 5, cap, &caplen, sizeof(cap), sub);
	k = moq6_msg_decode(MOQ6_ANNOUNCE_OK, cap, caplen, 4096, &m);
	ck_assert_int_gt(k, 0);
	off = (size_t)k;
	ck_assert_int_eq(last_announce(cap, caplen, &off, &a), 1);
	ck_assert_uint_eq(a.kind, MOQ6_ANN_START);
	ck_assert_uint_eq(a.warm_cost, 2); /* S1's, live */
	/* S1 drains: the route moves to its standby on S2 */
	moq_binding_stream_data(c1->s, 1, goaway, sizeof(goaway), 0);
	pump_ends(ends, 6, 5, cap, &caplen, sizeof(cap), sub);
	moq_node_stats(B.relay, &st);
	ck_assert_uint_eq(st.bcast_drained, 1);
	ck_assert_uint_eq(st.bcast_failovers, 1);
	ck_assert_int_ge(last_announce(cap, caplen, &off, &a), 1);
	ck_assert_uint_eq(a.kind, MOQ6_ANN_UPDATE);
	ck_assert_uint_eq(a.warm_cost, 6);
	ck_assert_uint_eq(a.cold_cost, 6);
	/* S2 drains as well: nothing better, served at the ceiling */
	moq_binding_stream_data(c2->s, 1, goaway, sizeof(goaway), 0);
	pump_ends(ends, 6, 5, cap, &caplen, sizeof(cap), sub);
	moq_node_stats(B.relay, &st);
	ck_assert_uint_eq(st.bcast_drained, 1);
	ck_assert_int_ge(last_announce(cap, caplen, &off, &a), 1);
	ck_assert_uint_eq(a.kind, MOQ6_ANN_UPDATE);
	ck_assert_uint_eq(a.warm_cost, MOQ6_COST_CEILING);
	ck_assert_uint_eq(a.cold_cost, MOQ6_COST_CEILING);
	ck_assert(moq_node_broadcast_live(B.relay, "room", 4));
	ck_assert(!c1->closed && !c2->closed && !sub->closed);
	for (int i = 0; i < 6; i += 2)
		if (ends[i]->s)
			moq_session_close(ends[i]->s, 0);
	pump_ends(ends, 6, 3, cap, &caplen, sizeof(cap), sub);
	raw_teardown(ends, 6);
}
END_TEST

/* lite-06 7.3.4: the Cost the relay declares (moq_node_cfg.cost, the
 * relay's --route-cost) goes in its SETUP on every lite-06 session, 0
 * included ("meaningful and distinct from absent"); without it the
 * parameter is absent (the peer prices the relay at 1). The relay's SETUP is
 * the only message on its first uni stream (3: a server's). */
static void relay_setup_cost(int has, uint64_t cost, bool want_has, uint64_t want)
{
	struct end *c, *s;
	struct moq_node_cfg nc = {0};
	static uint8_t cap[256];
	size_t caplen = 0;
	struct moq6_msg m;

	setup();
	moq_node_destroy(B.relay);
	nc.cache = B.rcache;
	nc.relay = 1;
	nc.origin = 77;
	nc.has_cost = has;
	nc.cost = cost;
	B.relay = moq_node_create(&nc);
	ck_assert(B.relay);
	s = raw_peer(&c);
	raw_setup(s, MOQ_ROLE_SUBSCRIBER, 1);
	for (int i = 0; i < 5; i++) {
		B.now += MS;
		moq_node_poll(B.relay, B.now);
		for (struct pend *p = s->head; p; p = p->next)
			if (p->kind == P_DATA && p->sid == 3 && p->len) {
				ck_assert_uint_le(caplen + p->len, sizeof(cap));
				memcpy(cap + caplen, p->data, p->len);
				caplen += p->len;
			}
		deliver(s);
		deliver(c);
	}
	ck_assert_uint_gt(caplen, 1);
	ck_assert_uint_eq(cap[0], MOQ_STREAM_SETUP);
	ck_assert_int_gt(moq6_msg_decode(MOQ6_SETUP, cap + 1, caplen - 1, 4096, &m), 0);
	ck_assert_int_eq(m.u.setup.has_cost, want_has);
	ck_assert_uint_eq(m.u.setup.cost, want);
	ck_assert(m.u.setup.has_hop && m.u.setup.hop == 77);
	ck_assert(!s->closed);
	moq_session_close(s->s, 0);
	for (int i = 0; i < 3; i++) {
		B.now += MS;
		moq_node_poll(B.relay, B.now);
		deliver(s);
		deliver(c);
	}
	struct end *ends[] = {c, s};
	raw_teardown(ends, 2);
}

START_TEST(test_binding_lite06_setup_cost)
{
	relay_setup_cost(1, 5, true, 5);
	relay_setup_cost(1, 0, true, 0);
	relay_setup_cost(0, 0, false, MOQ6_COST_DEFAULT);
}
END_TEST

Suite *moq_binding_suite(void);
Suite *moq_binding_suite(void)
{
	Suite *s = suite_create("moq_binding");
	TCase *tc = tcase_create("binding");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_binding_lite05);
	tcase_add_test(tc, test_binding_lite04);
	tcase_add_test(tc, test_binding_lite06);
	tcase_add_test(tc, test_binding_lite06_mid_group);
	tcase_add_test(tc, test_binding_lite06_datagram_1200);
	tcase_add_test(tc, test_binding_lite06_setup_cost);
	tcase_add_test(tc, test_binding_lite06_goaway_reprices);
	tcase_add_test(tc, test_binding_lite06_violations);
	tcase_add_test(tc, test_binding_lite06_max_age);
	tcase_add_test(tc, test_binding_lite06_max_age_timestamps);
	tcase_add_test(tc, test_binding_lite06_route_costs);
	tcase_add_test(tc, test_binding_root);
	tcase_add_test(tc, test_binding_bad_input_closes_one);
	suite_add_tcase(s, tc);
	return s;
}
