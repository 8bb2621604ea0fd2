/* SPDX-License-Identifier: MIT */
/*
 * client.c: the application's side of a session: connect, subscribe,
 * announce requests, TRACK, FETCH, GOAWAY, raw writes (moq.h).
 */
#include "moq.h"

#include <stdlib.h>
#include <string.h>

#include "moq_int.h"

/* ------------------------------------------------------- client sessions */

struct moq_session *moq_node_connect(struct moq_node *n, struct moq_quic_endpoint *ep,
                                     const struct moq_quic_addr *local,
                                     const struct moq_quic_addr *remote, const char *path, int role,
                                     void *user, uint64_t now, int *err)
{
	struct moq_session *s = sess_new(n, NULL, 0);
	struct moq_quic_conn *c;
	int e = 0;

	if (!s) {
		if (err)
			*err = MOQ_ERR_LIMIT;
		return NULL;
	}
	if (path && !(s->path = memdup0(path, strlen(path)))) {
		s->freed = 1;
		sess_free(s, 0, 1);
		if (err)
			*err = MOQ_ERR_NOMEM;
		return NULL;
	}
	s->role = (uint8_t)role;
	s->user = user;
	n->now = now;
	c = moq_quic_connect(ep, local, remote, s, now, &e);
	if (!c) {
		s->freed = 1;
		s->closing = 1;
		n->st.sessions_total--;
		sess_free(s, 0, 1);
		if (err)
			*err = e ? e : MOQ_ERR_IO;
		return NULL;
	}
	s->conn = c;
	s->tp = c;
	return s;
}

enum moq_version moq_session_version(const struct moq_session *s)
{
	return s->v;
}

int moq_session_ready(const struct moq_session *s)
{
	return s->ready && !s->closing;
}

struct moq_quic_conn *moq_session_conn(const struct moq_session *s)
{
	return s->conn;
}

void moq_session_set_user(struct moq_session *s, void *user)
{
	s->user = user;
}

void *moq_session_user(const struct moq_session *s)
{
	return s->user;
}

int moq_session_announce_request(struct moq_session *s, const char *prefix, size_t len)
{
	int err = 0;

	/* PROTOCOL.md, Goaway: the receiver opens no new streams. */
	if (!moq_session_ready(s) || s->goaway_in)
		return MOQ_ERR_STATE;
	ann_request(s, prefix, len, &err);
	return err < 0 ? err : 0;
}

int64_t moq_session_subscribe(struct moq_session *s, const char *broadcast, size_t blen,
                              const char *track, size_t tlen, const struct moq_sub_params *p)
{
	struct moq_subscribe_update a;
	struct usub *us;
	size_t pl;
	char *bp;
	int err = 0;

	/* PROTOCOL.md, Goaway: the receiver opens no new streams. */
	if (!moq_session_ready(s) || s->goaway_in)
		return MOQ_ERR_STATE;
	bp = path_dup(broadcast, blen, &pl);
	if (!bp)
		return MOQ_ERR_INVAL;
	a = (struct moq_subscribe_update){p->priority, p->ordered,     p->max_latency_ms, p->start,
	                                  p->end,      p->frame_start, p->frame_end};
	/* frame bounds exist on lite-06 only, and only within a named group */
	if ((p->frame_start || p->frame_end) &&
	    (s->v != MOQ_LITE_06 || (p->frame_start && p->start == MOQ_GROUP_NONE) ||
	     (p->frame_end && p->end == MOQ_GROUP_NONE))) {
		free(bp);
		return MOQ_ERR_INVAL;
	}
	us = usub_open(s, bp, pl, track, tlen, &a, &err);
	free(bp);
	if (!us)
		return err;
	return (int64_t)us->id;
}

int moq_session_subscribe_update(struct moq_session *s, uint64_t id, const struct moq_sub_params *p)
{
	struct usub *us = usub_find(s, id);
	struct moq_msg m = {.type = MOQ_MSG_SUBSCRIBE_UPDATE};

	if (!us || us->closed)
		return MOQ_ERR_NOTFOUND;
	m.u.subscribe_update = (struct moq_subscribe_update){p->priority, p->ordered,
	                                                     p->max_latency_ms, p->start, p->end};
	return st_send(s, us->st, -1, &m, 0);
}

int moq_session_unsubscribe(struct moq_session *s, uint64_t id)
{
	struct usub *us = usub_find(s, id);

	if (!us || us->closed)
		return MOQ_ERR_NOTFOUND;
	usub_close(us);
	/* Cancel its groups in flight (STOP_SENDING). */
	for (uint32_t i = 0; i < s->streams.cap; i++) {
		struct mstream *st = s->streams.ents[i].val;
		if (st && st->kind == SK_GROUP_IN && st->gi->us == us && !st->gi->refused) {
			gin_end(s, st->gi, MOQ_CODE_CANCEL);
			if (!st->rx_fin)
				tp_stop_sending(s, st->sid, MOQ_CODE_CANCEL);
		}
	}
	return 0;
}

int moq_session_track(struct moq_session *s, const char *broadcast, size_t blen, const char *track,
                      size_t tlen)
{
	struct moq_msg m = {.type = MOQ_MSG_TRACK};
	struct mstream *st;
	struct tinfo *ti;
	size_t pl;
	char *bp;
	int err;

	/* PROTOCOL.md, Goaway: the receiver opens no new streams. */
	if (!moq_session_ready(s) || s->goaway_in)
		return MOQ_ERR_STATE;
	if (s->v < MOQ_LITE_05)
		return MOQ_ERR_INVAL;
	bp = path_dup(broadcast, blen, &pl);
	if (!bp)
		return MOQ_ERR_INVAL;
	ti = tinfo_new(bp, pl, track, tlen);
	free(bp);
	if (!ti)
		return MOQ_ERR_NOMEM;
	st = st_open(s, 1, SK_TRACK_OUT, &err);
	if (!st) {
		tinfo_free(ti);
		return err;
	}
	st->ti = ti;
	m.u.track.broadcast = (struct moq_str){ti->path, ti->plen};
	m.u.track.track = (struct moq_str){ti->track, ti->tlen};
	return st_send(s, st, MOQ_STREAM_TRACK, &m, 1);
}

int64_t moq_session_fetch(struct moq_session *s, const char *broadcast, size_t blen,
                          const char *track, size_t tlen, uint8_t priority, uint64_t seq)
{
	struct moq_msg m = {.type = MOQ_MSG_FETCH};
	struct mstream *st;
	struct gin *gi;
	size_t pl;
	char *bp;
	int err;

	/* PROTOCOL.md, Goaway: the receiver opens no new streams. */
	if (!moq_session_ready(s) || s->goaway_in)
		return MOQ_ERR_STATE;
	gi = calloc(1, sizeof(*gi));
	bp = path_dup(broadcast, blen, &pl);
	if (!gi || !bp) {
		free(gi);
		free(bp);
		return bp ? MOQ_ERR_NOMEM : MOQ_ERR_INVAL;
	}
	st = st_open(s, 1, SK_FETCH_OUT, &err);
	if (!st) {
		free(gi);
		free(bp);
		return err;
	}
	/* The reply is a group's frames without a header (lite-05 format). */
	moq_group_rx_init(&gi->rx, s->v, false);
	gi->fetch = 1;
	gi->have_hdr = 1;
	gi->sub_id = s->next_sub_id++;
	gi->seq = seq;
	st->gi = gi;
	m.u.fetch = (struct moq_fetch){{bp, pl}, {track, tlen}, priority, seq};
	err = st_send(s, st, MOQ_STREAM_FETCH, &m, 1);
	free(bp);
	if (err < 0)
		return err;
	if (s->n->cfg.cb && s->n->cfg.cb->group_begin)
		s->n->cfg.cb->group_begin(s, s->n->cfg.user, gi->sub_id, seq);
	return (int64_t)gi->sub_id;
}

int moq_node_goaway(struct moq_node *n, const char *uri, size_t len)
{
	int told = 0;

	for (struct moq_session *s = n->sessions; s; s = s->next)
		if (moq_session_ready(s) && s->v >= MOQ_LITE_04 &&
		    moq_session_goaway(s, uri, len) == 0)
			told++;
	return told;
}

int moq_session_goaway(struct moq_session *s, const char *uri, size_t len)
{
	struct moq_msg m = {.type = MOQ_MSG_GOAWAY};
	struct mstream *st;
	int err;

	if (!moq_session_ready(s))
		return MOQ_ERR_STATE;
	if (s->v < MOQ_LITE_04)
		return MOQ_ERR_INVAL;
	st = st_open(s, 1, SK_GOAWAY_OUT, &err);
	if (!st)
		return err;
	m.u.goaway.uri = (struct moq_str){uri, len};
	return st_send(s, st, MOQ_STREAM_GOAWAY, &m, 1);
}

void moq_session_close(struct moq_session *s, uint64_t code)
{
	if (s->closing && !s->tp)
		return;
	s->closing = 1;
	s->close_code = code;
	if (s->tp && !s->depth)
		tp_close(s, code);
	else if (!s->freed)
		sess_mark(s);
}

int64_t moq_session_write_raw(struct moq_session *s, int bidi, const uint8_t *data, size_t len,
                              int fin)
{
	int err;
	struct mstream *st;

	if (!moq_session_ready(s))
		return MOQ_ERR_STATE;
	st = st_open(s, bidi, SK_RAW, &err);
	if (!st)
		return err;
	err = st_write(s, st, data, len, fin);
	return err < 0 ? err : st->sid;
}

int moq_session_write_raw_stream(struct moq_session *s, int64_t sid, const uint8_t *data,
                                 size_t len, int fin)
{
	struct mstream *st;

	if (!moq_session_ready(s))
		return MOQ_ERR_STATE;
	st = smap_get(&s->streams, sid);
	if (!st)
		return MOQ_ERR_NOTFOUND;
	return st_write(s, st, data, len, fin);
}
