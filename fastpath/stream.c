/* SPDX-License-Identifier: MIT */
/*
 * stream.c: the streams of a fast path connection: records in the engine's
 * pool, the caller's memory queued on them (chunks), acknowledged and lost
 * ranges (interval lists), closing, and the stream API of fastpath.h.
 */
#include "fp_int.h"

/* ---- streams ---------------------------------------------------------- */

struct fp_stream *fp_stream_find(struct fp_conn *c, int64_t sid)
{
	struct fp_engine *e = c->e;
	uint32_t i;

	for (i = c->x->streams; i != FP_NONE32; i = e->streams[i].next)
		if (e->streams[i].id == sid)
			return &e->streams[i];
	return NULL;
}

struct fp_stream *fp_stream_new(struct fp_conn *c, int64_t sid)
{
	struct fp_engine *e = c->e;
	uint32_t i = e->free_stream;
	struct fp_stream *s;
	struct fp_cold *x = c->x;
	int local = is_local_sid(c, sid), uni = (sid & 2) != 0;

	if (i == FP_NONE32) {
		e->st.pool_exhausted++;
		return NULL;
	}
	s = &e->streams[i];
	e->free_stream = s->next;
	memset(s, 0, sizeof(*s));
	s->id = sid;
	s->chunks = s->chunks_tail = s->acked_ivl = s->lost_ivl = s->rbuf = s->cur = FP_NONE32;
	s->send_next = FP_NONE32;
	s->rcv_final = UINT64_MAX;
	s->urgency = 3;
	s->flags = (uint32_t)((local ? SF_LOCAL : 0) | (uni ? SF_UNI : 0));
	if (local) {
		s->snd_max = uni ? x->peer.initial_max_stream_data_uni
		                 : x->peer.initial_max_stream_data_bidi_remote;
		s->rcv_max = uni ? 0 : x->local_msd_bidi_local;
		if (uni)
			s->flags |= SF_RECV_DONE;
	} else {
		s->snd_max = uni ? 0 : x->peer.initial_max_stream_data_bidi_local;
		s->rcv_max = uni ? x->local_msd_uni : x->local_msd_bidi_remote;
		if (uni)
			s->flags |= SF_FIN_ACKED | SF_FIN_QUEUED | SF_FIN_SENT;
	}
	s->next = x->streams;
	x->streams = i;
	return s;
}

static void chunks_release(struct fp_engine *e, struct fp_stream *s, uint64_t upto)
{
	/* the common ACK ends inside the first chunk: its record (a line
	 * written a round trip ago, a miss) is not read */
	if (upto != UINT64_MAX && s->chunks != FP_NONE32 && s->head_end > upto)
		return;
	while (s->chunks != FP_NONE32) {
		struct fp_chunk *k = &e->chunks[s->chunks];
		uint32_t n = k->next;
		if (upto != UINT64_MAX && k->off + k->len > upto) {
			s->head_end = k->off + k->len;
			break;
		}
		if (s->cur == s->chunks)
			s->cur = FP_NONE32;
		k->next = e->free_chunk;
		e->free_chunk = s->chunks;
		s->chunks = n;
	}
	if (s->chunks == FP_NONE32)
		s->chunks_tail = FP_NONE32;
}

void fp_rbuf_free(struct fp_engine *e, struct fp_stream *s)
{
	if (s->rbuf == FP_NONE32)
		return;
	*(uint32_t *)(e->rbufs + (size_t)s->rbuf * e->rbuf_bytes) = e->free_rbuf;
	e->free_rbuf = s->rbuf;
	s->rbuf = FP_NONE32;
}

/* Unlink and free @s (no callback). */
void fp_stream_free(struct fp_conn *c, struct fp_stream *s)
{
	struct fp_engine *e = c->e;
	uint32_t idx = (uint32_t)(s - e->streams), *pp;

	chunks_release(e, s, UINT64_MAX);
	fp_ivl_free_list(e, s->acked_ivl);
	fp_ivl_free_list(e, s->lost_ivl);
	fp_rbuf_free(e, s);
	for (pp = &c->x->streams; *pp != FP_NONE32; pp = &e->streams[*pp].next)
		if (*pp == idx) {
			*pp = s->next;
			break;
		}
	if (s->flags & SF_ON_LIST) {
		uint32_t *q, prev = FP_NONE32;
		for (q = &c->send_head; *q != FP_NONE32; prev = *q, q = &e->streams[*q].send_next)
			if (*q == idx) {
				*q = s->send_next;
				if (c->send_tail == idx)
					c->send_tail = prev;
				break;
			}
	}
	s->id = -1;
	s->next = e->free_stream;
	e->free_stream = idx;
}

static int send_done(const struct fp_stream *s)
{
	if (s->flags & SF_RESET_SENT)
		return (s->flags & SF_RESET_ACKED) != 0;
	return (s->flags & SF_FIN_ACKED) && s->snd_acked >= s->snd_end;
}

void fp_stream_maybe_free(struct fp_conn *c, struct fp_stream *s)
{
	const struct fp_callbacks *cb;
	struct fp_cold *x;
	int64_t sid;
	uint64_t err;
	void *suser;

	if (!(s->flags & SF_RECV_DONE) || !send_done(s) || s->refs > 0)
		return;
	cb = c->e->cb;
	x = c->x;
	sid = s->id;
	err = s->app_err;
	suser = s->user;
	if (!is_local_sid(c, sid)) {
		/* RFC 9000, 4.6: the peer may open one more of this kind */
		if (sid & 2) {
			x->local_max_su++;
			c->ctl |= CF_MAX_SU;
		} else {
			x->local_max_sb++;
			c->ctl |= CF_MAX_SB;
		}
		fp_ready_add(c);
	}
	fp_stream_free(c, s);
	if (cb && cb->stream_closed)
		cb->stream_closed(c, c->user, sid, err, suser);
}

int fp_stream_has_send(const struct fp_conn *c, const struct fp_stream *s)
{
	if (s->flags & SF_P_MASK)
		return 1;
	if (s->flags & SF_RESET_SENT)
		return 0;
	if (s->lost_ivl != FP_NONE32)
		return 1;
	if (s->snd_off < s->snd_end && s->snd_off < s->snd_max && c->sent_data < c->peer_max_data)
		return 1;
	if ((s->flags & (SF_FIN_QUEUED | SF_FIN_SENT)) == SF_FIN_QUEUED && s->snd_off == s->snd_end)
		return 1;
	return 0;
}

void fp_stream_sendq(struct fp_conn *c, struct fp_stream *s)
{
	struct fp_engine *e = c->e;
	uint32_t idx = (uint32_t)(s - e->streams);

	if (!(s->flags & SF_ON_LIST)) {
		s->flags |= SF_ON_LIST;
		s->send_next = FP_NONE32;
		if (c->send_tail != FP_NONE32)
			e->streams[c->send_tail].send_next = idx;
		else
			c->send_head = idx;
		c->send_tail = idx;
	}
	fp_ready_add(c);
}

/*
 * No node for [lo, hi) of @s (fp_ivl_alloc keeps the rest for streams that
 * hold none; @s holds one): the range goes into @s's lost list, coarsened.
 * Both kinds fit there safely: every byte in [snd_acked, snd_off) is still
 * the caller's, so a lost set that covers more resends bytes in flight or
 * already acknowledged (the peer ignores them; they are acknowledged again,
 * which moves the prefix on), where a forgotten lost range would never be
 * resent and a forgotten acknowledgement would hold the prefix back for
 * good. The nearest lost node widens to cover the range; with none, the
 * first acknowledged node becomes the lost list, widened to cover both.
 */
static void ivl_coarsen(struct fp_engine *e, struct fp_stream *s, uint64_t lo, uint64_t hi)
{
	uint32_t *pp = &s->lost_ivl, last = FP_NONE32;
	struct fp_ivl *v;

	e->st.ivl_coarsened++;
	if (*pp == FP_NONE32) {
		uint32_t n = s->acked_ivl; /* a holder: this list is not empty */

		v = &e->ivls[n];
		s->acked_ivl = v->next;
		v->next = FP_NONE32;
		if (lo < v->lo)
			v->lo = lo;
		if (hi > v->hi)
			v->hi = hi;
		s->lost_ivl = n;
		return;
	}
	while (*pp != FP_NONE32 && e->ivls[*pp].hi < lo) {
		last = *pp;
		pp = &e->ivls[*pp].next;
	}
	if (*pp != FP_NONE32) {
		v = &e->ivls[*pp]; /* above the range: reach down to it */
		if (lo < v->lo)
			v->lo = lo;
		if (hi > v->hi)
			v->hi = hi;
	} else {
		v = &e->ivls[last]; /* every node below it: reach up */
		if (hi > v->hi)
			v->hi = hi;
	}
}

/* Add [lo, hi) to @s's ascending interval list at *@head (merging; when no
 * node is left for it, coarsened into the lost list: ivl_coarsen). */
void fp_ivl_add(struct fp_engine *e, struct fp_stream *s, uint32_t *head, uint64_t lo, uint64_t hi)
{
	uint32_t *pp = head, n;

	if (lo >= hi)
		return;
	while (*pp != FP_NONE32 && e->ivls[*pp].hi < lo)
		pp = &e->ivls[*pp].next;
	if (*pp != FP_NONE32 && e->ivls[*pp].lo <= hi) {
		struct fp_ivl *v = &e->ivls[*pp];
		if (lo < v->lo)
			v->lo = lo;
		if (hi > v->hi)
			v->hi = hi;
		/* swallow the following ones it reaches */
		while (v->next != FP_NONE32 && e->ivls[v->next].lo <= v->hi) {
			struct fp_ivl *w = &e->ivls[v->next];
			uint32_t wn = w->next;
			if (w->hi > v->hi)
				v->hi = w->hi;
			fp_ivl_put(e, v->next);
			v->next = wn;
		}
		return;
	}
	n = fp_ivl_alloc(e, s->acked_ivl != FP_NONE32 || s->lost_ivl != FP_NONE32);
	if (n == FP_NONE32) {
		ivl_coarsen(e, s, lo, hi);
		return;
	}
	e->ivls[n].lo = lo;
	e->ivls[n].hi = hi;
	e->ivls[n].next = *pp;
	*pp = n;
}

static void stream_acked_range(struct fp_conn *c, struct fp_stream *s, uint64_t off, uint64_t end,
                               int fin)
{
	struct fp_engine *e = c->e;
	uint64_t before = s->snd_acked;

	if (fin)
		s->flags |= SF_FIN_ACKED;
	if (off <= s->snd_acked) {
		if (end > s->snd_acked)
			s->snd_acked = end;
		while (s->acked_ivl != FP_NONE32 && e->ivls[s->acked_ivl].lo <= s->snd_acked) {
			struct fp_ivl *v = &e->ivls[s->acked_ivl];
			uint32_t n = v->next;
			if (v->hi > s->snd_acked)
				s->snd_acked = v->hi;
			fp_ivl_put(e, s->acked_ivl);
			s->acked_ivl = n;
		}
	} else {
		fp_ivl_add(e, s, &s->acked_ivl, off, end);
	}
	if (e->ackb_on) {
		/* inside one ACK frame: one release and one stream_acked per
		 * stream run, at fp_ack_flush */
		if (e->ackb_s != s) {
			fp_ack_flush(c);
			e->ackb_s = s;
			e->ackb_sid = s->id;
			e->ackb_before = before;
		}
		return;
	}
	if (s->snd_acked > before) {
		chunks_release(e, s, s->snd_acked);
		if (e->cb && e->cb->stream_acked)
			e->cb->stream_acked(c, c->user, s->id, s->snd_acked, s->snd_acked - before,
			                    s->user);
	}
}

void fp_ack_flush(struct fp_conn *c)
{
	struct fp_engine *e = c->e;
	struct fp_stream *s = e->ackb_s;
	uint64_t before = e->ackb_before;

	if (s == NULL)
		return;
	e->ackb_s = NULL;
	if (c->state != ST_OPEN || s->id != e->ackb_sid)
		return; /* closed meanwhile: nothing of the caller's is held */
	if (s->snd_acked > before) {
		chunks_release(e, s, s->snd_acked);
		if (e->cb && e->cb->stream_acked)
			e->cb->stream_acked(c, c->user, s->id, s->snd_acked, s->snd_acked - before,
			                    s->user);
	}
	/* (fp_stream_maybe_free's first test here: most ACKs leave data of
	 * the stream in flight) */
	if (c->state == ST_OPEN && s->id >= 0 && s->refs == 0 && (s->flags & SF_RECV_DONE))
		fp_stream_maybe_free(c, s);
}

void fp_on_lost_range(struct fp_conn *c, uint32_t sidx, uint64_t off, uint32_t len, int kind,
                      int fin)
{
	struct fp_engine *e = c->e;
	struct fp_stream *s = &e->streams[sidx];

	if (s->refs > 0)
		s->refs--;
	if (s->id < 0)
		return;
	switch (kind) {
	case RK_DATA: {
		uint64_t lo = off, hi = off + len;
		if (s->flags & SF_RESET_SENT)
			break;
		if (lo < s->snd_acked)
			lo = s->snd_acked;
		if (lo < hi)
			fp_ivl_add(e, s, &s->lost_ivl, lo, hi);
		/* the FIN goes again (a frame of its own if need be) */
		if (fin && !(s->flags & SF_FIN_ACKED))
			s->flags &= ~(uint32_t)SF_FIN_SENT;
		break;
	}
	case RK_RESET:
		s->flags |= SF_P_RESET;
		break;
	case RK_STOP:
		if (!(s->flags & SF_RECV_DONE))
			s->flags |= SF_P_STOP;
		break;
	case RK_MSD:
		if (!(s->flags & (SF_RECV_DONE | SF_FIN_RECV)))
			s->flags |= SF_P_MSD;
		break;
	}
	if (fp_stream_has_send(c, s))
		fp_stream_sendq(c, s);
}

void fp_on_acked_range(struct fp_conn *c, uint32_t sidx, uint64_t off, uint32_t len, int kind,
                       int fin)
{
	struct fp_stream *s = &c->e->streams[sidx];

	if (s->refs > 0)
		s->refs--;
	if (s->id < 0)
		return;
	if (kind == RK_DATA)
		stream_acked_range(c, s, off, off + len, fin);
	else if (kind == RK_RESET)
		s->flags |= SF_RESET_ACKED;
	if (c->e->ackb_on && c->e->ackb_s == s)
		return; /* fp_ack_flush frees it if it is done */
	fp_stream_maybe_free(c, s);
}

/* Our side of @s is reset: RESET_STREAM(@err) is queued, data dropped. */
void fp_reset_send(struct fp_conn *c, struct fp_stream *s, uint64_t err)
{
	if (s->flags & (SF_RESET_SENT))
		return;
	if ((s->flags & SF_FIN_ACKED) && s->snd_acked >= s->snd_end)
		return; /* everything was delivered already */
	s->flags |= SF_RESET_SENT | SF_P_RESET;
	s->flags &= ~(uint32_t)SF_P_SDB;
	s->app_err = err;
	fp_ivl_free_list(c->e, s->lost_ivl);
	s->lost_ivl = FP_NONE32;
	fp_stream_sendq(c, s);
}

int fp_stream_open(struct fp_conn *c, int bidi, int64_t *sid)
{
	struct fp_cold *x = c->x;
	int64_t *next = bidi ? &x->next_local_bidi : &x->next_local_uni;
	uint64_t limit = bidi ? x->peer_max_sb : x->peer_max_su;
	struct fp_stream *s;

	if (c->state != ST_OPEN)
		return MOQ_ERR_STATE;
	/* RFC 9000, 4.6 */
	if ((uint64_t)(*next >> 2) >= limit) {
		uint64_t *at = bidi ? &x->sb_bidi_at : &x->sb_uni_at;
		if (*at != limit || limit == 0) {
			*at = limit;
			c->ctl |= bidi ? CF_SB_BIDI : CF_SB_UNI;
			fp_ready_add(c);
		}
		return MOQ_ERR_AGAIN;
	}
	s = fp_stream_new(c, *next);
	if (s == NULL)
		return MOQ_ERR_LIMIT;
	*sid = *next;
	*next += 4;
	c->e->st.streams_opened++;
	return 0;
}

long fp_stream_write(struct fp_conn *c, int64_t sid, const struct fp_iov *iov, size_t n, int fin)
{
	struct fp_engine *e = c->e;
	struct fp_stream *s;
	size_t i, need = 0;
	long total = 0;

	if (c->state != ST_OPEN)
		return MOQ_ERR_STATE;
	s = fp_stream_find(c, sid);
	if (s == NULL || ((s->flags & SF_UNI) && !(s->flags & SF_LOCAL)))
		return MOQ_ERR_NOTFOUND;
	if (s->flags & (SF_FIN_QUEUED | SF_RESET_SENT))
		return MOQ_ERR_CLOSED;
	/* all or nothing: count the chunk records first */
	for (i = 0; i < n; i++)
		if (iov[i].len)
			need++;
	{
		uint32_t f = e->free_chunk;
		size_t have = 0;
		while (f != FP_NONE32 && have < need) {
			have++;
			f = e->chunks[f].next;
		}
		if (have < need) {
			e->st.pool_exhausted++;
			return MOQ_ERR_LIMIT;
		}
	}
	for (i = 0; i < n; i++) {
		size_t len = iov[i].len;
		const uint8_t *b = iov[i].base;
		while (len > 0) {
			uint32_t l = len > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)len;
			struct fp_chunk *t =
			        s->chunks_tail != FP_NONE32 ? &e->chunks[s->chunks_tail] : NULL;
			if (t && t->base + t->len == b && (uint64_t)t->len + l < UINT32_MAX / 2) {
				t->len += l; /* contiguous with the last piece */
				if (s->chunks_tail == s->chunks)
					s->head_end += l;
			} else {
				uint32_t k = e->free_chunk;
				e->free_chunk = e->chunks[k].next;
				e->chunks[k].base = b;
				e->chunks[k].len = l;
				e->chunks[k].off = s->snd_end;
				e->chunks[k].next = FP_NONE32;
				if (t) {
					t->next = k;
				} else {
					s->chunks = k;
					s->head_end = s->snd_end + l;
				}
				s->chunks_tail = k;
			}
			s->snd_end += l;
			total += l;
			b += l;
			len -= l;
		}
	}
	if (fin)
		s->flags |= SF_FIN_QUEUED;
	if (fp_stream_has_send(c, s))
		fp_stream_sendq(c, s);
	return total;
}

long fp_stream_queued(const struct fp_conn *c, int64_t sid)
{
	struct fp_stream *s = fp_stream_find((struct fp_conn *)c, sid);

	if (s == NULL)
		return MOQ_ERR_NOTFOUND;
	return (long)(s->snd_end - s->snd_acked);
}

int fp_stream_reset(struct fp_conn *c, int64_t sid, uint64_t app_err)
{
	struct fp_stream *s = fp_stream_find(c, sid);

	if (s == NULL || ((s->flags & SF_UNI) && !(s->flags & SF_LOCAL)))
		return MOQ_ERR_NOTFOUND;
	fp_reset_send(c, s, app_err);
	chunks_release(c->e, s, UINT64_MAX);
	fp_stream_maybe_free(c, s);
	return 0;
}

int fp_stream_stop_sending(struct fp_conn *c, int64_t sid, uint64_t app_err)
{
	struct fp_stream *s = fp_stream_find(c, sid);

	if (s == NULL || ((s->flags & SF_UNI) && (s->flags & SF_LOCAL)))
		return MOQ_ERR_NOTFOUND;
	if (s->flags & (SF_STOP_SENT | SF_RECV_DONE))
		return 0;
	s->flags |= SF_STOP_SENT | SF_P_STOP;
	s->app_err = app_err;
	fp_stream_sendq(c, s);
	return 0;
}

int fp_stream_set_urgency(struct fp_conn *c, int64_t sid, uint8_t urgency)
{
	struct fp_stream *s;

	if (urgency > 7)
		return MOQ_ERR_INVAL;
	s = fp_stream_find(c, sid);
	if (s == NULL)
		return MOQ_ERR_NOTFOUND;
	s->urgency = urgency;
	return 0;
}

void *fp_stream_user(const struct fp_conn *c, int64_t sid)
{
	struct fp_stream *s = fp_stream_find((struct fp_conn *)c, sid);

	return s ? s->user : NULL;
}

int fp_stream_set_user(struct fp_conn *c, int64_t sid, void *user)
{
	struct fp_stream *s = fp_stream_find(c, sid);

	if (s == NULL)
		return MOQ_ERR_NOTFOUND;
	s->user = user;
	return 0;
}
