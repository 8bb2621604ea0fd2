/* SPDX-License-Identifier: MIT */
/*
 * session.c: moq-lite sessions over quic/: creating and freeing a session
 * and its streams, deferred closes, SETUP, and the QUIC callbacks that drive
 * it (docs/PROTOCOL.md, docs/DESIGN.md). The other parts of moq/ sessions and
 * routing are in the files beside it, by concern (moq_int.h).
 */
#include "moq.h"

#include <stdlib.h>
#include <string.h>

#include "moq_int.h"
#include "ietf_session.h"
#include "ietf_codec.h"

/* Control path allocations only: sessions, streams, subscriptions. The data
 * path (frames) allocates nothing but pooled header chunks. */

/* ------------------------------------------------------ pending sessions */

static void sess_unlink(struct moq_session **pp, struct moq_session *s, int watch)
{
	for (; *pp; pp = watch ? &(*pp)->wnext : &(*pp)->pnext)
		if (*pp == s) {
			*pp = watch ? s->wnext : s->pnext;
			return;
		}
}

/* Take @s off the node's pending / work and watch lists (it is freed). */
static void sess_unlist(struct moq_session *s)
{
	if (s->queued) {
		/* in the pending list, or in the one moq_node_poll is visiting */
		sess_unlink(&s->n->pending, s, 0);
		sess_unlink(&s->n->work, s, 0);
		s->queued = 0;
	}
	if (s->watched) {
		sess_unlink(&s->n->watch, s, 1);
		s->watched = 0;
	}
}

/* -------------------------------------------------------------- sessions */

struct moq_session *sess_new(struct moq_node *n, struct moq_quic_conn *c, int server)
{
	struct moq_session *s;

	if (n->st.sessions >= n->cfg.max_sessions)
		return NULL;
	s = moq_heap_calloc_lines(MOQ_HEAP_SESSION, sizeof(*s));
	if (!s)
		return NULL;
	s->n = n;
	s->conn = c;
	s->tp = c;
	s->server = (uint8_t)server;
	sess_mark(s);
	s->next = n->sessions;
	n->sessions = s;
	n->st.sessions++;
	n->st.sessions_total++;
	return s;
}

/* A group stream of subscription @d is gone: can that end @d (dsub_advance
 * finishes a subscription once its last group stream is, when its track or
 * its range ended)? */
static bool gone_may_end(const struct dsub *d)
{
	return d == NULL ||
	       (d->n_gouts == 0 &&
	        (d->ending || d->done || d->p.end != MOQ_GROUP_NONE || (d->up && d->up->ended)));
}

static void st_free(struct moq_session *s, struct mstream *st)
{
	/* A stream slot or a subscription changed: fanout has work when the
	 * session waited for a slot (room_wait) or for budget (blocked), when
	 * it was not a group stream, or when it may end its subscription. A
	 * live group stream's end alone is not work: marking every one made
	 * 45% of all fanout visits, which wrote nothing (bench_moq_fanout
	 * --audio: a stream per audio frame) */
	if (!st->go || s->room_wait || s->blocked)
		sess_mark(s);
	if (st->go) {
		struct gout *go = st->go;
		if (!go->fin && !go->reset)
			s->unacked -= go->written - go->acked;
		else if (go->fin)
			s->unacked -= go->written - go->acked;
		if (go->d && go->d->n_gouts)
			go->d->n_gouts--;
		if (gone_may_end(go->d))
			sess_mark(s);
		if (go->on_fin)
			gfin_del(go);
		else
			gout_unlink(go);
		s->ngouts--;
		moq_cache_group_unref(go->g);
		gout_release(s, go);
	}
	if (st->gi) {
		if (st->gi->g) {
			moq_cache_group_abort(st->gi->g);
			moq_cache_group_unref(st->gi->g);
		}
		free(st->gi);
	}
	if (st->d)
		dsub_free(s, st->d);
	if (st->us) {
		struct usub *us = st->us;
		if (us->up) {
			us->up->us = NULL;
			s->n->st.upstream_subs--;
			up_idle(us->up);
		}
		for (struct usub **pp = &s->usubs; *pp; pp = &(*pp)->next)
			if (*pp == us) {
				*pp = us->next;
				break;
			}
		s->nusubs--;
		free(us->bcast);
		free(us->track);
		free(us);
	}
	ann_in_stop(s, st);
	lite06_st_free(st);
	if (st->fetch_counted)
		s->nfetch--;
	if (st->kind == SK_TRACK_OUT && st->ti && !s->n->cfg.relay)
		tinfo_free(st->ti); /* a client request never answered */
	free(st->prefix);
	s->n->st.ctl_rx_bytes -= st->rx_cap;
	moq_heap_free(MOQ_HEAP_CTRL_BUF, st->rx);
	tx_free(s, &st->tx);
	smap_del(&s->streams, st->sid);
	st_release(s, st);
}

/* The connection is gone: free the session and everything it holds. */
void sess_free(struct moq_session *s, uint64_t code, int local)
{
	struct moq_node *n = s->n;
	/* the lite session behind an IETF shell is not counted (the shell is) */
	int counted = !s->ietf_owner;

	access_url_end(s, code); /* --auth-url: the end event */
	if (s->ietf_owner) { /* the lite session of an IETF shell */
		ietf_inner_gone(s->ietf_owner);
		s->ietf_owner = NULL;
	}
	if (s->ietf) { /* an IETF shell freed without moq_binding_closed (node destroy) */
		struct ietf_sess *ie = s->ietf;
		s->ietf = NULL;
		ietf_closed(ie, code, local);
	}
	s->closing = 1;
	if (n->cfg.cb && n->cfg.cb->session_closed)
		n->cfg.cb->session_closed(s, n->cfg.user, code, local);
	/* A publisher that drops fails over to another route of its
	 * broadcasts, or keeps them for the linger. */
	bcast_session_gone(n, s);
	for (uint32_t i = 0; i < s->streams.cap; i++) {
		struct mstream *st = s->streams.ents[i].val;
		if (st) {
			st_free(s, st);
			i = (uint32_t)-1; /* the map shifted: rescan */
			if (!s->streams.used)
				break;
		}
	}
	while (s->dsubs)
		dsub_free(s, s->dsubs);
	sess_unlist(s);
	for (struct moq_session **pp = &n->sessions; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	if (counted)
		n->st.sessions--;
	while (s->pool) {
		struct txchunk *c = s->pool;
		s->pool = c->next;
		moq_heap_free(MOQ_HEAP_MOQ_SPARE, c);
	}
	while (s->st_pool) {
		struct mstream *st = s->st_pool;
		s->st_pool = st->pool_next;
		moq_heap_free(MOQ_HEAP_MOQ_SPARE, st);
	}
	while (s->go_pool) {
		struct gout *go = s->go_pool;
		s->go_pool = go->next;
		moq_heap_free(MOQ_HEAP_MOQ_SPARE, go);
	}
	moq_heap_free(MOQ_HEAP_MOQ_SMAP, s->streams.ents);
	free(s->root);
	free(s->path);
	free(s->url);
	moq_auth_grant_free(s->grant);
	moq_heap_free(MOQ_HEAP_SESSION, s);
}

/* Close the session with @code at the end of the current callback. */
void sess_fail(struct moq_session *s, uint64_t code)
{
	if (s->closing)
		return;
	s->closing = 1;
	s->close_code = code;
	if (code)
		s->n->st.sessions_closed_error++;
	sess_mark(s); /* moq_node_poll carries out the close if nothing else does */
}

static void send_setup(struct moq_session *s)
{
	struct moq_node *n = s->n;
	struct moq_msg m = {.type = MOQ_MSG_SETUP};
	int err;
	struct mstream *st = st_open(s, 0, SK_SETUP_OUT, &err);

	if (!st)
		return;
	m.u.setup.has_origin = n->cfg.origin != 0;
	m.u.setup.origin = n->cfg.origin;
	if (!s->server && s->path) {
		m.u.setup.has_path = true;
		m.u.setup.path = (struct moq_str){s->path, strlen(s->path)};
	}
	if (!s->server && s->role != MOQ_ROLE_BOTH) {
		m.u.setup.has_role = true;
		m.u.setup.role = s->role;
	}
	if (s->v == MOQ_LITE_06 && n->cfg.has_cost) { /* 7.3.4: both ends may send it */
		m.u.setup.has_cost = true;
		m.u.setup.cost = n->cfg.cost;
	}
	/* moq-lite 05: type 0x1, SETUP, then FIN. */
	st_send(s, st, MOQ_STREAM_SETUP, &m, 1);
}

static enum moq_version alpn_version(const char *alpn)
{
	if (!alpn)
		return 0;
	if (strcmp(alpn, MOQ_ALPN_06) == 0)
		return MOQ_LITE_06;
	if (strcmp(alpn, MOQ_ALPN_05) == 0)
		return MOQ_LITE_05;
	if (strcmp(alpn, MOQ_ALPN_04) == 0)
		return MOQ_LITE_04;
	if (strcmp(alpn, MOQ_ALPN_03) == 0)
		return MOQ_LITE_03;
	return 0;
}

/* ------------------------------------------------------- QUIC callbacks */

static void cb_conn_new(struct moq_quic_conn *c, void *user)
{
	struct moq_node *n = user;
	struct moq_session *s = sess_new(n, c, 1);

	if (!s) {
		n->st.refused_bounds++;
		moq_quic_conn_set_user(c, NULL);
		return;
	}
	moq_quic_conn_set_user(c, s);
}

#define ENTER(s)                                                                                   \
	do {                                                                                       \
		if (!(s) || (s)->closing)                                                          \
			return 0;                                                                  \
		(s)->depth++;                                                                      \
	} while (0)
#define LEAVE(s)                                                                                   \
	do {                                                                                       \
		(s)->depth--;                                                                      \
		sess_flush(s);                                                                     \
	} while (0)

/* The transport is up with version @v (QUIC: from the ALPN). */
static void sess_established(struct moq_session *s, enum moq_version v)
{
	s->v = v;
	if (!s->v) {
		sess_fail(s, MOQ_CODE_UNKNOWN_ALPN);
		return;
	}
	/* lite-03/04 carry no SETUP: cfg.auth authorises them here */
	if (s->v < MOQ_LITE_05 && access_session(s, NULL) < 0)
		return;
	if (s->v >= MOQ_LITE_05)
		send_setup(s);
	else if (s->auth_pending)
		; /* --auth-url: ctl_admitted asks once the grant is in */
	else if (s->n->cfg.relay && s->server) {
		s->asked_announces = 1;
		access_ann_request(s);
	}
	s->ready = 1;
	sess_mark(s);
	if (s->bops && !s->server)
		s->ready_due = 1; /* moq_binding_connect: at the next poll */
	else if (s->n->cfg.cb && s->n->cfg.cb->session_ready)
		s->n->cfg.cb->session_ready(s, s->n->cfg.user);
}

static int cb_established(struct moq_quic_conn *c, void *user, const char *alpn)
{
	struct moq_session *s = user;

	if (!s) {
		/* refused in cb_conn_new (max_sessions): closed now, with the
		 * protocol's code, not left open until its idle timeout */
		int d = alpn ? moq_ietf_alpn_draft(alpn, strlen(alpn)) : 0;
		moq_quic_conn_close(c, d ? IETF_CLOSE_INTERNAL : MOQ_CODE_BOUNDS,
		                    "too many sessions");
		return 0;
	}
	ENTER(s);
	{
		/* an IETF moq-transport ALPN: the session becomes its shell */
		int d = alpn ? moq_ietf_alpn_draft(alpn, strlen(alpn)) : 0;
		if (d && !s->bops && s->server) {
			if (ietf_quic_attach(s, d) < 0)
				sess_fail(s, MOQ_CODE_UNKNOWN_ALPN);
			LEAVE(s);
			return 0;
		}
	}
	sess_established(s, alpn_version(alpn));
	LEAVE(s);
	return 0;
}

void moq_binding_stream_data(struct moq_session *s, int64_t sid, const uint8_t *data, size_t len,
                             int fin)
{
	if (s && s->ietf) {
		ietf_stream_data(s->ietf, sid, data, len, fin);
		return;
	}
	if (!s || s->closing)
		return;
	s->depth++;
	if (!s->v)
		sess_fail(s, MOQ_CODE_PROTOCOL_VIOLATION);
	else
		stream_data(s, sid, data, len, fin);
	s->depth--;
	sess_flush(s);
}

static int cb_stream_data(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t offset,
                          const uint8_t *data, size_t len, int fin)
{
	struct moq_session *s = user;

	(void)offset;
	if (s && !s->closing && !s->v)
		s->v = alpn_version(moq_quic_conn_alpn(c));
	moq_binding_stream_data(s, sid, data, len, fin);
	return 0;
}

/* @app: the stream's record as moq_quic_stream_set_app left it (st_new), or
 * NULL: looked up by id. */
static void stream_acked(struct moq_session *s, int64_t sid, uint64_t acked, struct mstream *app)
{
	struct mstream *st;

	if (s && s->ietf) {
		ietf_stream_acked(s->ietf, sid, acked);
		return;
	}
	if (!s || s->closing)
		return;
	/* (the record's first line, which the test loads, is what the
	 * acknowledgement reads: the map's slot is not) */
	st = app != NULL && app->sid == sid ? app : smap_get(&s->streams, sid);
	if (st && !st->go && st->kind != SK_GROUP_OUT)
		tx_release_acked(s, &st->tx, acked);
	if (st && st->go && !st->go->reset && acked > st->go->acked) {
		uint64_t a = acked > st->go->written ? st->go->written : acked;
		if (a > st->go->acked) {
			s->unacked -= a - st->go->acked;
			st->go->acked = a;
			gout_fin_settled(s, st->go);
			if (s->blocked) {
				s->blocked = 0;
				sess_mark(s);
			}
		}
	}
}

void moq_binding_stream_acked(struct moq_session *s, int64_t sid, uint64_t acked)
{
	stream_acked(s, sid, acked, NULL);
}

static void cb_stream_acked(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t acked,
                            uint64_t newly, void *app)
{
	(void)c;
	(void)newly;
	stream_acked(user, sid, acked, app);
}

void moq_binding_stream_reset(struct moq_session *s, int64_t sid, uint64_t app_err)
{
	struct moq_node *n;
	struct mstream *st;

	if (s && s->ietf) {
		ietf_stream_reset(s->ietf, sid, app_err);
		return;
	}
	if (!s || s->closing)
		return;
	n = s->n;
	st = smap_get(&s->streams, sid);
	if (!st)
		return;
	if (s->v == MOQ_LITE_06)
		app_err = moq6_code_from_stream(app_err); /* lite-05 numbers inside */
	s->depth++;
	st->rx_fin = 1;
	switch (st->kind) {
	case SK_GROUP_IN:
	case SK_FETCH_OUT:
		if (st->kind == SK_GROUP_IN && !st->gi->have_hdr)
			n->st.groups_reset_unseen++;
		if (!st->gi->refused)
			gin_end(s, st->gi, (int64_t)app_err);
		break;
	case SK_SUB_OUT:
		if (st->us) {
			struct usub *us = st->us;
			if (us->up) {
				/* Rejected upstream: pass the code to every subscriber. */
				struct upstream *up = us->up;
				for (struct dsub *d = up->dsubs; d; d = d->unext)
					if (d->st && !d->done) {
						st_refuse(d->s, d->st, app_err);
						d->done = 1;
					}
				up->ended = 1;
				up->end_seq = 0;
				up_idle(up);
			} else if (!us->closed && n->cfg.cb && n->cfg.cb->sub_closed) {
				n->cfg.cb->sub_closed(s, n->cfg.user, us->id, (int64_t)app_err);
			}
			us->closed = 1;
			st_reset(s, st, MOQ_CODE_CANCEL);
		}
		break;
	case SK_SUB_IN:
		if (st->d)
			dsub_cancel(s, st->d);
		break;
	case SK_ANN_OUT:
		ann_out_gone(s, st);
		st_reset(s, st, MOQ_CODE_CANCEL);
		st->kind = SK_IGNORE;
		break;
	case SK_ANN_IN:
		ann_in_stop(s, st);
		st->kind = SK_IGNORE;
		st_reset(s, st, MOQ_CODE_CANCEL);
		break;
	default:
		if (st->kind == SK_NEW && (sid & 2))
			n->st.groups_reset_unseen++; /* a uni stream reset before its type */
		if (!(sid & 2))
			st_reset(s, st, MOQ_CODE_CANCEL);
		break;
	}
	s->depth--;
	sess_flush(s);
}

static void cb_stream_reset(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t app_err,
                            uint64_t final_size)
{
	(void)c;
	(void)final_size;
	moq_binding_stream_reset(user, sid, app_err);
}

/* QUIC: the endpoint has already reset the sending side with the same code
 * (quic.h); a binding resets it here. */
static void stop_sending(struct moq_session *s, int64_t sid, uint64_t app_err)
{
	struct mstream *st;

	if (s && s->ietf) {
		ietf_stream_stop_sending(s->ietf, sid, app_err);
		return;
	}
	if (!s || s->closing)
		return;
	st = smap_get(&s->streams, sid);
	if (!st)
		return;
	if (s->v == MOQ_LITE_06)
		app_err = moq6_code_from_stream(app_err); /* tp_reset maps it back */
	if (st->go && !st->go->fin && !st->go->reset) {
		st->go->reset = 1;
		s->unacked -= st->go->written - st->go->acked;
		st->go->written = st->go->acked;
		s->n->st.resets_cancel++;
	}
	if (s->bops && !st->reset_sent && !st->fin_sent && s->tp)
		tp_reset(s, sid, app_err);
	st->reset_sent = 1;
}

void moq_binding_stream_stop_sending(struct moq_session *s, int64_t sid, uint64_t app_err)
{
	stop_sending(s, sid, app_err);
}

static void cb_stream_stop_sending(struct moq_quic_conn *c, void *user, int64_t sid,
                                   uint64_t app_err)
{
	(void)c;
	stop_sending(user, sid, app_err);
}

static void stream_closed(struct moq_session *s, int64_t sid, struct mstream *app)
{
	struct mstream *st;

	if (s && s->ietf && !s->freed) {
		ietf_stream_closed(s->ietf, sid);
		return;
	}
	if (!s || s->freed)
		return;
	st = app != NULL && app->sid == sid ? app : smap_get(&s->streams, sid);
	if (st)
		st_free(s, st);
}

void moq_binding_stream_closed(struct moq_session *s, int64_t sid)
{
	stream_closed(s, sid, NULL);
}

static void cb_stream_closed(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t app_err,
                             void *app)
{
	(void)c;
	(void)app_err;
	stream_closed(user, sid, app);
}

void moq_binding_writable(struct moq_session *s)
{
	/* moq_node_poll retries whatever waited for stream credit. */
	if (s && s->ietf)
		ietf_writable(s->ietf);
	else if (s)
		sess_mark(s);
}

static void cb_writable(struct moq_quic_conn *c, void *user, int64_t sid)
{
	(void)c;
	(void)sid;
	moq_binding_writable(user);
}

void moq_binding_closed(struct moq_session *s, uint64_t code, int local)
{
	if (!s)
		return;
	/* --auth-url: the end reports the bytes the binding moved (QUIC
	 * ones: cb_conn_closed) */
	if (s->auth_req && s->bops && s->bops->get_info && s->tp && !s->auth_tx) {
		struct moq_quic_conn_info ci = {0};
		s->bops->get_info(s->tp, &ci);
		s->auth_tx = ci.bytes_sent;
		s->auth_rx = ci.bytes_recv;
	}
	if (s->ietf) {
		struct ietf_sess *ie = s->ietf;
		s->ietf = NULL;
		ietf_closed(ie, code, local);
	}
	s->conn = NULL;
	s->tp = NULL;
	s->freed = 1;
	sess_free(s, s->close_code ? s->close_code : code, local);
}

static void cb_conn_closed(struct moq_quic_conn *c, void *user,
                           const struct moq_quic_close_info *info)
{
	uint64_t code;

	/* --auth-url: the end reports the bytes QUIC moved */
	if (user && ((struct moq_session *)user)->auth_req && c) {
		struct moq_quic_conn_info ci;
		moq_quic_conn_get_info(c, &ci);
		((struct moq_session *)user)->auth_tx = ci.bytes_sent;
		((struct moq_session *)user)->auth_rx = ci.bytes_recv;
	}
	/* PROTOCOL.md, Error codes: an idle timeout (nothing heard for the
	 * negotiated idle timeout: a session with nothing to send and no
	 * keep-alive) is 3 timeout, not 4 transport, which is left for the
	 * transport's own errors. */
	if (info->kind == MOQ_QUIC_CLOSE_APPLICATION)
		code = info->code;
	else if (info->kind == MOQ_QUIC_CLOSE_IDLE)
		code = MOQ_CODE_TIMEOUT;
	else
		code = MOQ_CODE_TRANSPORT;
	moq_binding_closed(user, code, info->local);
}

/* ------------------------------------------------------------ bindings */

/* A session failed before the binding ever saw it: free it quietly. */
static struct moq_session *binding_drop(struct moq_session *s)
{
	s->tp = NULL;
	s->freed = 1;
	sess_free(s, 0, 1);
	return NULL;
}

/* The binding's transport is up: the session starts as a QUIC one does at
 * its handshake (a refusal, auth or version, closes it at the next poll
 * through the binding's close). */
static struct moq_session *binding_start(struct moq_session *s, enum moq_version v)
{
	s->depth++;
	sess_established(s, v);
	s->depth--;
	return s;
}

struct moq_session *moq_binding_accept(struct moq_node *n, const struct moq_binding_ops *ops,
                                       void *b, enum moq_version v, const char *url, size_t url_len)
{
	struct moq_session *s;
	size_t l = 0;

	if (!ops || !b || !url)
		return NULL;
	if (MOQ_VERSION_IS_IETF(v)) /* IETF moq-transport: ietf_session.c */
		return ietf_binding_accept(n, ops, b, (int)v - MOQ_IETF_BINDING_BASE, url, url_len);
	s = sess_new(n, NULL, 1);
	if (!s) {
		n->st.refused_bounds++;
		return NULL;
	}
	s->bops = ops;
	s->tp = b;
	while (l < url_len && url[l] != '?')
		l++;
	/* the URL path roots the session, as a lite-05 SETUP Path does */
	if (!(s->url = memdup0(url, url_len)) || (l && !(s->root = path_dup(url, l, &s->rootlen))))
		return binding_drop(s);
	return binding_start(s, v);
}

struct moq_session *moq_binding_connect(struct moq_node *n, const struct moq_binding_ops *ops,
                                        void *b, enum moq_version v, const char *path, int role)
{
	struct moq_session *s;

	if (!ops || !b)
		return NULL;
	s = sess_new(n, NULL, 0);
	if (!s)
		return NULL;
	s->bops = ops;
	s->tp = b;
	s->role = (uint8_t)role;
	if (path && !(s->path = memdup0(path, strlen(path))))
		return binding_drop(s);
	return binding_start(s, v);
}

/* RFC 9221 / lite-05 6.4: a datagram of the peer's (dgram.c) */
static void cb_datagram(struct moq_quic_conn *c, void *user, const uint8_t *data, size_t len)
{
	struct moq_session *s = user;

	if (!s || s->closing)
		return;
	if (!s->v)
		s->v = alpn_version(moq_quic_conn_alpn(c));
	s->depth++;
	sess_datagram(s, data, len);
	s->depth--;
	sess_flush(s);
}

static const struct moq_quic_callbacks node_cbs = {
        .conn_new = cb_conn_new,
        .established = cb_established,
        .stream_data = cb_stream_data,
        .stream_acked = cb_stream_acked,
        .stream_reset = cb_stream_reset,
        .stream_stop_sending = cb_stream_stop_sending,
        .stream_closed = cb_stream_closed,
        .writable = cb_writable,
        .conn_closed = cb_conn_closed,
        .datagram = cb_datagram,
};

const struct moq_quic_callbacks *moq_node_quic_callbacks(void)
{
	return &node_cbs;
}

const char *const *moq_node_alpns(size_t *count)
{
	static const char *const alpns[] = {MOQ_ALPN_05, MOQ_ALPN_04, MOQ_ALPN_03};

	if (count)
		*count = 3;
	return alpns;
}

const char *const *moq_node_alpns_all(size_t *count)
{
	/* lite-06 first, as moq-relay offers it */
	static const char *const alpns[] = {MOQ_ALPN_06, MOQ_ALPN_05, MOQ_ALPN_04, MOQ_ALPN_03};

	if (count)
		*count = 4;
	return alpns;
}
