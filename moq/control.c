/* SPDX-License-Identifier: MIT */
/*
 * control.c: control stream input: stream types, message framing and
 * dispatch, SETUP and FETCH requests (docs/PROTOCOL.md, Streams).
 */
#include "moq.h"

#include <stdlib.h>
#include <string.h>

#include "moq_int.h"

/* ---------------------------------------------------------- control rx */

static uint64_t msg_err_code(int rc)
{
	switch (rc) {
	case MOQ_ERR_DECODE:
		return MOQ_CODE_DECODE;
	case MOQ_ERR_PROTO:
		return MOQ_CODE_PROTOCOL_VIOLATION;
	case MOQ_ERR_TOO_LARGE:
		return MOQ_CODE_BOUNDS;
	default:
		return MOQ_CODE_UNEXPECTED_MESSAGE;
	}
}

/* The message type expected next on @st, or 0 when none may come. */
static int expected(const struct moq_session *s, const struct mstream *st)
{
	switch (st->kind) {
	case SK_SETUP_IN:
		return st->got_first ? 0 : MOQ_MSG_SETUP;
	case SK_ANN_IN:
		return st->got_first ? 0 : MOQ_MSG_ANNOUNCE_REQ;
	case SK_ANN_OUT:
		return (s->v >= MOQ_LITE_05 && !st->got_first) ? MOQ_MSG_ANNOUNCE_OK
		                                               : MOQ_MSG_ANNOUNCE;
	case SK_SUB_IN:
		return st->got_first ? MOQ_MSG_SUBSCRIBE_UPDATE : MOQ_MSG_SUBSCRIBE;
	case SK_SUB_OUT:
		return MOQ_MSG_SUBSCRIBE_REPLY;
	case SK_TRACK_IN:
		return st->got_first ? 0 : MOQ_MSG_TRACK;
	case SK_TRACK_OUT:
		return st->got_first ? 0 : MOQ_MSG_TRACK_INFO;
	case SK_FETCH_IN:
		return st->got_first ? 0 : MOQ_MSG_FETCH;
	case SK_GOAWAY_IN:
		return st->got_first ? 0 : MOQ_MSG_GOAWAY;
	default:
		return -1; /* bytes are ignored */
	}
}

static void on_setup(struct moq_session *s, const struct moq_setup *m);
static void on_fetch(struct moq_session *s, struct mstream *st, const struct moq_fetch *f);

static void on_sub_reply(struct moq_session *s, struct mstream *st,
                         const struct moq_subscribe_reply *r)
{
	struct moq_node *n = s->n;
	struct usub *us = st->us;

	if (!us)
		return;
	if (us->up) {
		up_reply(us, r);
		return;
	}
	if (n->cfg.cb && n->cfg.cb->sub_reply)
		n->cfg.cb->sub_reply(s, n->cfg.user, us->id, r);
}

/* Handle one decoded control message. Returns a session close code or 0. */
static uint64_t on_msg(struct moq_session *s, struct mstream *st, struct moq_msg *m)
{
	struct moq_node *n = s->n;
	int first = !st->got_first;

	st->got_first = 1;
	switch (m->type) {
	case MOQ_MSG_SETUP:
		on_setup(s, &m->u.setup);
		return 0;
	case MOQ_MSG_ANNOUNCE_REQ:
		return (uint64_t)ann_in_start(s, st, &m->u.announce_req);
	case MOQ_MSG_ANNOUNCE_OK:
		st->ann_origin = m->u.announce_ok.origin;
		return 0;
	case MOQ_MSG_ANNOUNCE:
		if (s->v == MOQ_LITE_06)
			return lite06_on_announce(s, st, &m->u.announce);
		return (uint64_t)on_announce(s, st, &m->u.announce);
	case MOQ_MSG_SUBSCRIBE:
		on_subscribe(s, st, &m->u.subscribe);
		return 0;
	case MOQ_MSG_SUBSCRIBE_UPDATE:
		on_subscribe_update(s, st, &m->u.subscribe_update);
		return 0;
	case MOQ_MSG_SUBSCRIBE_REPLY:
		on_sub_reply(s, st, &m->u.subscribe_reply);
		return 0;
	case MOQ_MSG_TRACK:
		on_track(s, st, &m->u.track);
		return 0;
	case MOQ_MSG_TRACK_INFO:
		on_track_info(s, st, &m->u.track_info);
		return 0;
	case MOQ_MSG_FETCH:
		on_fetch(s, st, &m->u.fetch);
		return 0;
	case MOQ_MSG_GOAWAY:
		s->goaway_in = 1;
		if (n->cfg.relay)
			bcast_session_drain(n, s);
		if (n->cfg.cb && n->cfg.cb->goaway)
			n->cfg.cb->goaway(s, n->cfg.user, m->u.goaway.uri.p, m->u.goaway.uri.len);
		return 0;
	default:
		(void)first;
		return MOQ_CODE_UNEXPECTED_MESSAGE;
	}
}

/* lite-05: a server acts on a client's requests once its SETUP arrived;
 * until then their bytes wait in the stream's buffer. */
static bool rx_deferred(const struct moq_session *s, const struct mstream *st)
{
	/* --auth-url: every request waits while the admission is out */
	if (s->server && s->auth_pending && st->kind != SK_SETUP_IN)
		return true;
	return s->server && s->v >= MOQ_LITE_05 && !s->setup_in && st->kind != SK_SETUP_IN;
}

/*
 * Decode and handle the whole messages at the start of @buf (@len bytes)
 * on @st. Returns the bytes consumed; stops at a partial message, when the
 * session fails (closed with the error's code) or @st is refused. The
 * messages' strings point into @buf only during their handler.
 */
static size_t rx_parse(struct moq_session *s, struct mstream *st, const uint8_t *buf, size_t len)
{
	struct moq_node *n = s->n;
	size_t used = 0;

	if (rx_deferred(s, st))
		return 0;
	while (used < len && !s->closing && st->kind != SK_IGNORE) {
		struct moq_msg m;
		int t = expected(s, st);
		int rc;
		uint64_t code;

		if (t < 0)
			return len; /* bytes are ignored */
		if (t == 0) {
			sess_fail(s, MOQ_CODE_UNEXPECTED_MESSAGE);
			return used;
		}
		rc = moq_msg_decode((enum moq_msg_type)t, s->v, buf + used, len - used,
		                    n->cfg.max_msg, &m);
		if (rc == MOQ_ERR_SHORT)
			break;
		if (rc < 0) {
			if (rc == MOQ_ERR_TOO_LARGE) {
				n->st.msgs_refused_size++;
				n->st.refused_bounds++;
			}
			sess_fail(s, msg_err_code(rc));
			return used;
		}
		code = on_msg(s, st, &m);
		if (code) {
			sess_fail(s, code);
			return used;
		}
		used += (size_t)rc;
	}
	return used;
}

/* Free @st's receive buffer (it holds no bytes, or the stream is going). */
static void rx_drop(struct moq_session *s, struct mstream *st)
{
	s->n->st.ctl_rx_bytes -= st->rx_cap;
	moq_heap_free(MOQ_HEAP_CTRL_BUF, st->rx);
	st->rx = NULL;
	st->rx_cap = 0;
}

/* Parse the buffered control bytes of @st and handle a pending FIN. */
static void st_process(struct moq_session *s, struct mstream *st)
{
	struct moq_node *n = s->n;

	if (rx_deferred(s, st))
		return;
	if (st->rx_len) {
		size_t used = rx_parse(s, st, st->rx, st->rx_len);
		if (s->closing)
			return;
		if (used) {
			memmove(st->rx, st->rx + used, st->rx_len - used);
			st->rx_len -= (uint32_t)used;
		}
		if (!st->rx_len)
			rx_drop(s, st); /* held only while a message is partial */
	}
	if (!st->rx_fin || s->closing || st->kind == SK_IGNORE)
		return;
	/* The peer finished its side. */
	if (st->rx_len) {
		sess_fail(s, MOQ_CODE_DECODE); /* a message cut short by FIN */
		return;
	}
	switch (st->kind) {
	case SK_SETUP_IN:
		if (!st->got_first)
			sess_fail(s, MOQ_CODE_DECODE);
		break;
	case SK_ANN_IN:
		ann_in_stop(s, st);
		st->got_first = 0;
		st->kind = SK_IGNORE;
		st_write(s, st, NULL, 0, 1);
		break;
	case SK_ANN_OUT:
		ann_out_gone(s, st);
		st_write(s, st, NULL, 0, 1);
		st->kind = SK_IGNORE;
		break;
	case SK_SUB_IN:
		/* PROTOCOL.md, Subscribe: subscriber FIN = unsubscribe. */
		if (st->d)
			dsub_cancel(s, st->d);
		else
			st_write(s, st, NULL, 0, 1);
		break;
	case SK_SUB_OUT:
		if (st->us) {
			struct usub *us = st->us;
			if (us->up) {
				/* The publisher's FIN ends the subscription (after
				 * its END on lite-05, alone on lite-03/04), but its
				 * last groups may still be on their way: our side
				 * stays open for them (up_end, issue 29). */
				up_end(us->up, UINT64_MAX);
				break;
			}
			if (!us->closed && n->cfg.cb && n->cfg.cb->sub_closed)
				n->cfg.cb->sub_closed(s, n->cfg.user, us->id, -1);
			usub_close(us);
		}
		break;
	case SK_GOAWAY_IN:
	case SK_PROBE_IN:
	case SK_TRACK_OUT:
		if (!st->fin_sent && !st->local)
			st_write(s, st, NULL, 0, 1);
		break;
	default:
		break;
	}
}

/*
 * How many of the @len bytes at @data go into @st's buffer next, after
 * growing it for them (0: over the bound, or memory short). The buffer holds
 * only what has arrived of a partial message, never more than that
 * message's declared length (cfg.max_msg at most, plus its prefix): a stream
 * that sent a first byte holds a few bytes, not a message-sized buffer.
 * Bytes that wait for the lite-05 SETUP are held whole, up to the same
 * bound.
 */
static size_t rx_room(struct moq_session *s, struct mstream *st, const uint8_t *data, size_t len)
{
	struct moq_node *n = s->n;
	size_t limit = (size_t)n->cfg.max_msg + 16; /* one message and its prefix */
	size_t want = st->rx_len + len;
	int t = expected(s, st);
	uint8_t *p;

	if (t > 0 && !rx_deferred(s, st)) {
		/* Only up to the end of the first message. */
		uint8_t hdr[16];
		size_t hl = st->rx_len < sizeof(hdr) ? st->rx_len : sizeof(hdr);
		int tot;

		if (hl)
			memcpy(hdr, st->rx, hl);
		if (len > sizeof(hdr) - hl)
			len = sizeof(hdr) - hl;
		memcpy(hdr + hl, data, len);
		tot = moq_msg_peek_len_v((enum moq_msg_type)t, s->v, hdr, hl + len, n->cfg.max_msg);
		if (tot > 0 && (size_t)tot < want)
			want = (size_t)tot;
	}
	if (want > limit)
		want = limit;
	if (want <= st->rx_len)
		return 0;
	if (want > st->rx_cap) {
		p = moq_heap_realloc(MOQ_HEAP_CTRL_BUF, st->rx, want);
		if (!p)
			return 0;
		n->st.ctl_rx_bytes += want - st->rx_cap;
		st->rx = p;
		st->rx_cap = (uint32_t)want;
	}
	return want - st->rx_len;
}

/*
 * Control bytes of @st: whole messages are handled straight from @data (the
 * QUIC receive buffer); only a partial message, or bytes waiting for the
 * lite-05 SETUP, are copied into the stream's buffer (rx_room).
 */
static void ctl_rx(struct moq_session *s, struct mstream *st, const uint8_t *data, size_t len,
                   int fin)
{
	while (len && !s->closing && st->kind != SK_IGNORE) {
		size_t take;

		if (!st->rx_len) {
			size_t used = rx_parse(s, st, data, len);
			data += used;
			len -= used;
			if (!len || s->closing || st->kind == SK_IGNORE)
				break;
		}
		take = rx_room(s, st, data, len);
		if (!take) {
			sess_fail(s, MOQ_CODE_BOUNDS);
			return;
		}
		memcpy(st->rx + st->rx_len, data, take);
		st->rx_len += (uint32_t)take;
		data += take;
		len -= take;
		if (fin && !len)
			st->rx_fin = 1;
		st_process(s, st);
		/* @st may have been refused but is still alive here. */
	}
	if (fin && !st->rx_fin && !s->closing) {
		st->rx_fin = 1;
		st_process(s, st);
	}
}

static int kind_of(const struct moq_session *s, int uni, uint64_t type)
{
	if (uni) {
		if (type == MOQ_STREAM_GROUP)
			return SK_GROUP_IN;
		if (type == MOQ_STREAM_SETUP && s->v >= MOQ_LITE_05)
			return s->setup_in ? -2 : SK_SETUP_IN; /* twice: violation */
		return -1;
	}
	switch (type) {
	case MOQ_STREAM_ANNOUNCE:
		return SK_ANN_IN;
	case MOQ_STREAM_SUBSCRIBE:
		return SK_SUB_IN;
	case MOQ_STREAM_FETCH:
		return SK_FETCH_IN;
	case MOQ_STREAM_PROBE:
		return SK_PROBE_IN;
	case MOQ_STREAM_GOAWAY:
		/* lite-06: GOAWAY is the server's, at most once */
		if (s->v == MOQ_LITE_06 && (s->server || s->goaway_in))
			return -2;
		return s->v >= MOQ_LITE_04 ? SK_GOAWAY_IN : -1;
	case MOQ_STREAM_TRACK:
		return s->v >= MOQ_LITE_05 ? SK_TRACK_IN : -1;
	default:
		return -1;
	}
}

void stream_data(struct moq_session *s, int64_t sid, const uint8_t *data, size_t len, int fin)
{
	struct mstream *st = smap_get(&s->streams, sid);

	if (!st) {
		/* RFC 9000, 2.1: bit 0 is the initiator (1 = server). */
		int peer = (int)(sid & 1) != (s->server ? 1 : 0);
		if (!peer)
			return; /* one of ours, already freed */
		st = st_new(s, sid, SK_NEW, 0);
		if (!st) {
			sess_fail(s, MOQ_CODE_BOUNDS);
			return;
		}
	}
	if (st->kind == SK_NEW) {
		bool done = false;
		uint64_t type = 0;
		size_t used = moq_varint_rx_push(&st->type_rx, data, len, &done, &type);
		int k;

		if (used) { /* a FIN-only chunk may come with data == NULL */
			data += used;
			len -= used;
		}
		if (!done) {
			if (fin)
				st->kind = SK_IGNORE;
			return;
		}
		k = kind_of(s, (sid & 2) != 0, type);
		if (k == -2) {
			sess_fail(s, MOQ_CODE_PROTOCOL_VIOLATION);
			return;
		}
		if (k < 0) {
			/* PROTOCOL.md, Streams: an unknown type resets that stream only. */
			st_refuse(s, st, MOQ_CODE_UNEXPECTED_STREAM);
			return;
		}
		st->kind = (uint8_t)k;
		if (k == SK_GROUP_IN) {
			st->gi = calloc(1, sizeof(*st->gi));
			if (!st->gi) {
				st_refuse(s, st, MOQ_CODE_BOUNDS);
				return;
			}
			moq_group_rx_init(&st->gi->rx, s->v, true);
		}
	}
	switch (st->kind) {
	case SK_IGNORE:
	case SK_PROBE_IN:
	case SK_RAW:
		break;
	case SK_GROUP_IN:
	case SK_FETCH_OUT:
		if (!st->gi->refused)
			gin_data(s, st, data, len);
		if (fin && !s->closing && !st->gi->refused) {
			st->rx_fin = 1;
			if (moq_group_rx_fin(&st->gi->rx) < 0) {
				sess_fail(s, MOQ_CODE_DECODE);
				return;
			}
			gin_end(s, st->gi, -1);
		}
		return;
	case SK_SETUP_OUT:
	case SK_GROUP_OUT:
		break;
	default:
		ctl_rx(s, st, data, len, fin);
		return;
	}
	if (fin)
		st->rx_fin = 1;
}

static void on_setup(struct moq_session *s, const struct moq_setup *m)
{
	s->setup_in = 1;
	s->peer_origin = m->has_origin ? m->origin : 0;
	s->peer_role = m->has_role ? m->role : MOQ_ROLE_BOTH;
	s->peer_cost = m->has_cost ? m->cost : 1; /* lite-06 7.3.4: absent = 1 */
	if (s->server && m->has_path && m->path.len) {
		/* Path roots the session; the query (auth token) is not used. */
		size_t l = 0;
		while (l < m->path.len && m->path.p[l] != '?')
			l++;
		free(s->root);
		s->root = path_dup(m->path.p, l, &s->rootlen);
		if (!s->root) {
			sess_fail(s, MOQ_CODE_DECODE);
			return;
		}
	}
	if (access_session(s, m->has_path ? &m->path : NULL) < 0)
		return; /* cfg.auth refused it: closing with 6 */
	if (s->auth_pending)
		return; /* --auth-url: ctl_admitted once the grant is in */
	ctl_admitted(s);
}

/* The session is admitted (at SETUP, or when an --auth-url answer came:
 * access_url_poll): ask for its announcements, and handle the requests
 * that arrived before. */
void ctl_admitted(struct moq_session *s)
{
	struct moq_node *n = s->n;

	if (n->cfg.relay && s->server && !s->asked_announces &&
	    s->peer_role != MOQ_ROLE_SUBSCRIBER) {
		s->asked_announces = 1;
		access_ann_request(s);
	}
	/* Requests that arrived before SETUP can be handled now. */
	if (s->server) {
		for (uint32_t i = 0; i < s->streams.cap && !s->closing; i++) {
			struct mstream *st = s->streams.ents[i].val;
			if (st && st->kind != SK_SETUP_IN && (st->rx_len || st->rx_fin))
				st_process(s, st);
		}
	}
}

/* FETCH: the frames of one cached group, then FIN (PROTOCOL.md, Fetch). */
static void on_fetch(struct moq_session *s, struct mstream *st, const struct moq_fetch *f)
{
	struct moq_node *n = s->n;
	char *full;
	size_t flen;
	int rc;
	struct moq_cache_track *t;
	struct moq_cache_group *g;

	if (req_path(s, st, &f->broadcast, f->track.len, &full, &flen) < 0)
		return;
	if (s->nfetch >= n->cfg.max_fetches) {
		n->st.fetches_refused++;
		n->st.refused_bounds++;
		free(full);
		st_refuse(s, st, MOQ_CODE_BOUNDS);
		return;
	}
	if (!n->cfg.cache) {
		free(full);
		st_refuse(s, st, MOQ_CODE_NOT_FOUND);
		return;
	}
	t = full ? moq_cache_track_lookup(n->cfg.cache, full, flen, f->track.p, f->track.len)
	         : NULL;
	free(full);
	if (!t) {
		st_refuse(s, st, MOQ_CODE_NOT_FOUND);
		return;
	}
	rc = moq_cache_track_group(t, f->group, &g);
	moq_cache_track_unref(t);
	if (rc < 0) {
		st_refuse(s, st, MOQ_CODE_NOT_FOUND);
		return;
	}
	if ((f->frame_end && f->frame_end <= f->frame_start) || f->frame_start > UINT32_MAX ||
	    f->frame_end > UINT32_MAX || !gout_new(s, st, g, f->priority)) {
		moq_cache_group_unref(g);
		st_refuse(s, st, MOQ_CODE_BOUNDS);
		return;
	}
	/* lite-06: a fetch of frames [frame start, frame end) of the group */
	if (f->frame_start)
		moq_cache_cursor_seek(&st->go->cur, (uint32_t)f->frame_start, 0);
	st->go->frame_end = f->frame_end;
	st->go->fetch = 1;
	st->fetch_counted = 1;
	s->nfetch++;
}
