/* SPDX-License-Identifier: MIT */
/*
 * qmux.c: qmux-01 (draft-ietf-quic-qmux-01) without I/O (web.h).
 *
 * A record (one WebSocket binary message) carries frames concatenated, at
 * most the receiver's max_record_size bytes. QX_TRANSPORT_PARAMETERS is the
 * first frame each way. Frames are QUIC's (RFC 9000, 19) on a reliable,
 * ordered byte stream: no ACK, no packet numbers; a STREAM frame's offset
 * must continue its stream exactly. Flow control is QUIC's (RFC 9000, 4):
 * per-stream and connection byte windows, stream counts per direction.
 *
 * Sending is zero copy: a stream keeps the writer's (pointer, length)
 * segments; a record is returned as iovecs (frame headers in the engine's
 * buffer, payload in the writer's memory), and once the caller wrote it out
 * (moq_qmux_record_done) its payload counts as acknowledged.
 */
#include "web.h"

#include <stdlib.h>
#include <string.h>

#include "codec.h"

/* qmux-01, 4.1: the frame types beyond QUIC's. */
#define QX_TRANSPORT_PARAMETERS 0x3f5153300d0a0d0aull
#define QX_PING_REQUEST         0x348c67529ef8c7bdull
#define QX_PING_RESPONSE        0x348c67529ef8c7beull
/* qmux-01, 4.2: the max_record_size transport parameter. */
#define TP_MAX_RECORD_SIZE 0x0571c59429cd0845ull
/* @moq/qmux: application_protocols, forbidden over WebSocket. */
#define TP_APPLICATION_PROTOCOLS 0x3d4f9c2a8b1e6075ull

/* Segments (writer memory references) a stream holds unacknowledged; a
 * write beyond is accepted partly (the caller retries on writable). */
#define QSEGS 64
/* Stream table buckets (power of two). */
#define QHASH 256
/* The frame-header part of a record: control frames + one STREAM header. */
#define QHDR 1024
/* BINDINGS.md, section 2: keep-alive every 5 s. */
#define QPING_NS 5000000000ull

struct qseg {
	const uint8_t *p;
	size_t len;
};

struct qstream {
	struct qstream *hnext;
	struct qstream *snext, *sprev; /* send-ready list */
	struct qstream *cnext;         /* control list (RESET / STOP / MAX_STREAM_DATA) */
	int64_t sid;
	uint8_t in_ready, in_ctrl;
	uint8_t has_send, has_recv; /* the directions this stream has */
	uint8_t send_done, recv_done;
	uint8_t fin_queued, fin_sent, reset_pending, stop_pending, msd_pending;
	uint64_t reset_code, stop_code;
	/* send: offsets in the stream's bytes */
	uint64_t queued, sent, acked, send_max;
	struct qseg seg[QSEGS]; /* ring: segments from @acked on */
	unsigned int shead, scount;
	uint64_t seg_off; /* stream offset of seg[shead] */
	/* receive */
	uint64_t recv_off, recv_max, recv_window;
};

struct moq_qmux {
	struct moq_qmux_cfg cfg;
	struct moq_qmux_params peer;
	int peer_seen, tp_sent, closing, close_sent, close_app, closed_cb;
	uint64_t close_code;
	struct qstream *tab[QHASH];
	struct qstream *ready_head, *ready_tail;
	struct qstream *ctrl_head;
	/* stream counts: opened by us / the peer, per direction [bidi, uni] */
	uint64_t local_next[2], local_max[2];
	uint64_t remote_next[2], remote_max[2], remote_closed[2];
	int max_streams_pending[2];
	/* connection flow control */
	uint64_t send_data, send_data_max;
	uint64_t recv_data, recv_data_max;
	int max_data_pending;
	/* pings */
	uint64_t ping_seq, ping_reply, last_send, last_recv;
	int ping_reply_pending, ping_req_pending;
	/* the current record */
	int rec_built;
	size_t rec_len;
	unsigned int rec_niov;
	struct iovec rec_iov[QSEGS + 1];
	struct qstream *rec_stream;
	uint64_t rec_stream_end;
	int rec_fin, rec_close;
	uint8_t hdr[QHDR];
	struct moq_qmux_stats st;
};

void moq_qmux_default_params(struct moq_qmux_params *p)
{
	/* BINDINGS.md, section 2: what @moq/qmux and moq-relay send */
	p->idle_timeout_ms = 30000;
	p->max_data = 1u << 20;
	p->max_stream_data_bidi_local = 256u << 10;
	p->max_stream_data_bidi_remote = 256u << 10;
	p->max_stream_data_uni = 256u << 10;
	p->max_streams_bidi = 100;
	p->max_streams_uni = 100;
	p->max_record_size = MOQ_QMUX_MIN_RECORD;
}

/* stream id helpers (RFC 9000, 2.1) */
static int sid_local(const struct moq_qmux *q, int64_t sid)
{
	return (int)(sid & 1) == (q->cfg.server ? 1 : 0);
}

static int sid_uni(int64_t sid)
{
	return (int)((sid >> 1) & 1);
}

static struct qstream *sfind(const struct moq_qmux *q, int64_t sid)
{
	struct qstream *s = q->tab[(uint64_t)(sid >> 2) & (QHASH - 1)];

	while (s != NULL && s->sid != sid)
		s = s->hnext;
	return s;
}

static struct qstream *snew(struct moq_qmux *q, int64_t sid)
{
	struct qstream *s = calloc(1, sizeof(*s));
	unsigned int b = (unsigned int)((uint64_t)(sid >> 2) & (QHASH - 1));
	int local = sid_local(q, sid), uni = sid_uni(sid);

	if (s == NULL)
		return NULL;
	s->sid = sid;
	s->has_send = !uni || local;
	s->has_recv = !uni || !local;
	s->send_done = !s->has_send;
	s->recv_done = !s->has_recv;
	/* RFC 9000, 18.2: the peer's window for what we send, ours for what
	 * we receive, by who opened the stream */
	if (uni) {
		s->send_max = q->peer.max_stream_data_uni;
		s->recv_window = q->cfg.local.max_stream_data_uni;
	} else if (local) {
		s->send_max = q->peer.max_stream_data_bidi_remote;
		s->recv_window = q->cfg.local.max_stream_data_bidi_local;
	} else {
		s->send_max = q->peer.max_stream_data_bidi_local;
		s->recv_window = q->cfg.local.max_stream_data_bidi_remote;
	}
	s->recv_max = s->recv_window;
	s->hnext = q->tab[b];
	q->tab[b] = s;
	return s;
}

static void ready_add(struct moq_qmux *q, struct qstream *s)
{
	if (s->in_ready)
		return;
	s->in_ready = 1;
	s->snext = NULL;
	s->sprev = q->ready_tail;
	if (q->ready_tail)
		q->ready_tail->snext = s;
	else
		q->ready_head = s;
	q->ready_tail = s;
}

static void ready_del(struct moq_qmux *q, struct qstream *s)
{
	if (!s->in_ready)
		return;
	if (s->sprev)
		s->sprev->snext = s->snext;
	else
		q->ready_head = s->snext;
	if (s->snext)
		s->snext->sprev = s->sprev;
	else
		q->ready_tail = s->sprev;
	s->in_ready = 0;
	s->snext = s->sprev = NULL;
}

static void ctrl_add(struct moq_qmux *q, struct qstream *s)
{
	if (s->in_ctrl)
		return;
	s->in_ctrl = 1;
	s->cnext = q->ctrl_head;
	q->ctrl_head = s;
}

static void ctrl_del(struct moq_qmux *q, struct qstream *s)
{
	struct qstream **pp = &q->ctrl_head;

	if (!s->in_ctrl)
		return;
	while (*pp != NULL && *pp != s)
		pp = &(*pp)->cnext;
	if (*pp == s)
		*pp = s->cnext;
	s->in_ctrl = 0;
}

/* Both directions done and nothing left to say: forget the stream; a peer
 * stream's count credit comes back (RFC 9000, 4.6: MAX_STREAMS). */
static void sfree_maybe(struct moq_qmux *q, struct qstream *s)
{
	struct qstream **pp;
	int64_t sid = s->sid;

	if (!s->send_done || !s->recv_done || s->in_ctrl || q->rec_stream == s)
		return;
	ready_del(q, s);
	pp = &q->tab[(uint64_t)(sid >> 2) & (QHASH - 1)];
	while (*pp != s)
		pp = &(*pp)->hnext;
	*pp = s->hnext;
	if (!sid_local(q, sid)) {
		int d = sid_uni(sid);
		uint64_t win = d ? q->cfg.local.max_streams_uni : q->cfg.local.max_streams_bidi;

		/* keep the peer's allowance a window ahead of what closed, in
		 * steps of half a window */
		q->remote_closed[d]++;
		if (q->remote_closed[d] + win >= q->remote_max[d] + (win + 1) / 2) {
			q->remote_max[d] = q->remote_closed[d] + win;
			q->max_streams_pending[d] = 1;
		}
	}
	free(s);
	if (q->cfg.cb->stream_closed && !q->closing)
		q->cfg.cb->stream_closed(q->cfg.user, sid);
}

struct moq_qmux *moq_qmux_new(const struct moq_qmux_cfg *cfg, uint64_t now)
{
	struct moq_qmux *q;

	if (cfg == NULL || cfg->cb == NULL || cfg->cb->closed == NULL)
		return NULL;
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		return NULL;
	q->cfg = *cfg;
	if (q->cfg.local.max_record_size == 0)
		moq_qmux_default_params(&q->cfg.local);
	if (q->cfg.local.max_record_size < MOQ_QMUX_MIN_RECORD) {
		free(q);
		return NULL;
	}
	if (q->cfg.ping_ns == 0)
		q->cfg.ping_ns = QPING_NS;
	/* until the peer's parameters arrive: nothing may be sent but ours */
	q->peer.max_record_size = MOQ_QMUX_MIN_RECORD;
	q->remote_max[0] = q->cfg.local.max_streams_bidi;
	q->remote_max[1] = q->cfg.local.max_streams_uni;
	q->recv_data_max = q->cfg.local.max_data;
	q->last_send = q->last_recv = now;
	return q;
}

void moq_qmux_free(struct moq_qmux *q)
{
	if (q == NULL)
		return;
	for (unsigned int b = 0; b < QHASH; b++) {
		struct qstream *s = q->tab[b], *nx;

		for (; s != NULL; s = nx) {
			nx = s->hnext;
			free(s);
		}
	}
	free(q);
}

static void do_close(struct moq_qmux *q, uint64_t code, int app, int local)
{
	if (q->closing)
		return;
	q->closing = 1;
	q->close_code = code;
	q->close_app = app;
	if (!local)
		q->close_sent = 1; /* nothing to answer with */
	if (!q->closed_cb) {
		q->closed_cb = 1;
		q->cfg.cb->closed(q->cfg.user, code, app, local);
	}
}

/* A protocol error: CONNECTION_CLOSE with @code (RFC 9000, 10.2). */
static int perr(struct moq_qmux *q, uint64_t code)
{
	do_close(q, code, 0, 1);
	return MOQ_ERR_PROTO;
}

/* --- receive ------------------------------------------------------------- */

struct rd {
	const uint8_t *p;
	size_t len;
	int bad;
};

static uint64_t rv(struct rd *r)
{
	uint64_t v = 0;
	int n;

	if (r->bad)
		return 0;
	n = moq_varint_get(r->p, r->len, &v);
	if (n < 0) {
		r->bad = 1;
		return 0;
	}
	r->p += n;
	r->len -= (size_t)n;
	return v;
}

static const uint8_t *rbytes(struct rd *r, uint64_t n)
{
	const uint8_t *p = r->p;

	if (r->bad || n > r->len) {
		r->bad = 1;
		return NULL;
	}
	r->p += n;
	r->len -= (size_t)n;
	return p;
}

/* qmux-01, 4.2 / RFC 9000, 18: the peer's parameters. */
static int parse_params(struct moq_qmux *q, const uint8_t *p, size_t len)
{
	static const uint64_t known[] = {
	        0x01, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x20, TP_MAX_RECORD_SIZE};
	struct moq_qmux_params pp;
	struct rd r = {p, len, 0};
	unsigned int seen = 0;

	memset(&pp, 0, sizeof(pp));
	pp.max_record_size = MOQ_QMUX_MIN_RECORD;
	while (r.len > 0) {
		uint64_t id = rv(&r), l = rv(&r), v = 0;
		const uint8_t *val = rbytes(&r, l);
		unsigned int k;

		if (r.bad)
			return perr(q, MOQ_QMUX_TRANSPORT_PARAMETER_ERROR);
		/* qmux-01, 4.2: parameters of QUIC's handshake have no place here */
		if (id == 0x00 || id == 0x02 || id == 0x03 || (id >= 0x0a && id <= 0x10) ||
		    id == TP_APPLICATION_PROTOCOLS)
			return perr(q, MOQ_QMUX_TRANSPORT_PARAMETER_ERROR);
		for (k = 0; k < sizeof(known) / sizeof(known[0]); k++)
			if (known[k] == id)
				break;
		if (k == sizeof(known) / sizeof(known[0]))
			continue; /* RFC 9000, 18.1: unknown ones are ignored */
		if (seen & (1u << k))
			return perr(q, MOQ_QMUX_TRANSPORT_PARAMETER_ERROR); /* RFC 9000, 7.4 */
		seen |= 1u << k;
		if (moq_varint_get(val, (size_t)l, &v) != (int)l)
			return perr(q, MOQ_QMUX_TRANSPORT_PARAMETER_ERROR);
		switch (id) {
		case 0x01:
			pp.idle_timeout_ms = v;
			break;
		case 0x04:
			pp.max_data = v;
			break;
		case 0x05:
			pp.max_stream_data_bidi_local = v;
			break;
		case 0x06:
			pp.max_stream_data_bidi_remote = v;
			break;
		case 0x07:
			pp.max_stream_data_uni = v;
			break;
		case 0x08:
			pp.max_streams_bidi = v;
			break;
		case 0x09:
			pp.max_streams_uni = v;
			break;
		case 0x20:
			break; /* datagrams: we never send them */
		default:
			pp.max_record_size = v;
			break;
		}
	}
	/* RFC 9000, 18.2: stream counts above 2^60 are an error; qmux-01:
	 * max_record_size below the default is */
	if (pp.max_streams_bidi > (1ull << 60) || pp.max_streams_uni > (1ull << 60) ||
	    pp.max_record_size < MOQ_QMUX_MIN_RECORD)
		return perr(q, MOQ_QMUX_TRANSPORT_PARAMETER_ERROR);
	q->peer = pp;
	q->peer_seen = 1;
	q->local_max[0] = pp.max_streams_bidi;
	q->local_max[1] = pp.max_streams_uni;
	q->send_data_max = pp.max_data;
	return 0;
}

/* A peer-opened stream @sid (implicitly opening the lower ones of its
 * direction, RFC 9000, 3.2) or NULL when it was closed already; *@err set
 * on a stream-limit violation. */
static struct qstream *remote_stream(struct moq_qmux *q, int64_t sid, int *err)
{
	int d = sid_uni(sid);
	uint64_t idx = (uint64_t)sid >> 2;
	struct qstream *s = sfind(q, sid);

	*err = 0;
	if (s != NULL)
		return s;
	if (idx < q->remote_next[d])
		return NULL; /* opened and closed before */
	if (idx >= q->remote_max[d]) {
		*err = perr(q, MOQ_QMUX_STREAM_LIMIT_ERROR); /* RFC 9000, 4.6 */
		return NULL;
	}
	/* the lower ids open too; they come into being when they are used */
	for (uint64_t i = q->remote_next[d]; i <= idx; i++) {
		int64_t id = (int64_t)(i << 2) | (d << 1) | (q->cfg.server ? 0 : 1);

		s = snew(q, id);
		if (s == NULL) {
			*err = perr(q, MOQ_QMUX_PROTOCOL_VIOLATION);
			return NULL;
		}
		q->st.streams_opened_remote++;
	}
	q->remote_next[d] = idx + 1;
	return s;
}

/* RFC 9000, 4.2: open the peer's windows once half is used (the session
 * consumes stream data as it is delivered). */
static void recv_credit(struct moq_qmux *q, struct qstream *s)
{
	if (s != NULL && !s->recv_done && s->recv_max - s->recv_off < s->recv_window / 2) {
		s->recv_max = s->recv_off + s->recv_window;
		s->msd_pending = 1;
		ctrl_add(q, s);
	}
	if (q->recv_data_max - q->recv_data < q->cfg.local.max_data / 2) {
		q->recv_data_max = q->recv_data + q->cfg.local.max_data;
		q->max_data_pending = 1;
	}
}

static int on_stream(struct moq_qmux *q, uint64_t type, struct rd *r)
{
	int64_t sid = (int64_t)rv(r);
	uint64_t off = (type & 0x04) ? rv(r) : 0;
	uint64_t len = (type & 0x02) ? rv(r) : r->len;
	const uint8_t *d = rbytes(r, len);
	int fin = (int)(type & 0x01), err = 0;
	struct qstream *s;

	if (r->bad || sid < 0 || (uint64_t)sid > MOQ_VARINT_MAX)
		return perr(q, MOQ_QMUX_FRAME_ENCODING_ERROR);
	if (sid_local(q, sid)) {
		/* RFC 9000, 19.8: a send-only stream of ours, or one not opened */
		if (sid_uni(sid) || ((uint64_t)sid >> 2) >= q->local_next[0])
			return perr(q, MOQ_QMUX_STREAM_STATE_ERROR);
		s = sfind(q, sid);
	} else {
		s = remote_stream(q, sid, &err);
		if (err)
			return err;
	}
	/* RFC 9000, 4.1: the connection window counts every byte */
	if (q->recv_data + len > q->recv_data_max)
		return perr(q, MOQ_QMUX_FLOW_CONTROL_ERROR);
	if (s == NULL || s->recv_done) {
		q->recv_data += len; /* closed: discarded, but it was sent */
		recv_credit(q, NULL);
		return 0;
	}
	/* an ordered byte stream: the offset continues the stream exactly */
	if (off != s->recv_off)
		return perr(q, MOQ_QMUX_PROTOCOL_VIOLATION);
	if (off + len > s->recv_max)
		return perr(q, MOQ_QMUX_FLOW_CONTROL_ERROR);
	s->recv_off += len;
	q->recv_data += len;
	if (fin)
		s->recv_done = 1;
	if (q->cfg.cb->stream_data && (len > 0 || fin))
		q->cfg.cb->stream_data(q->cfg.user, sid, d, (size_t)len, fin);
	if (q->closing)
		return 0;
	/* the callback may have freed nothing: @s is ours until sfree_maybe */
	recv_credit(q, fin ? NULL : s);
	if (fin)
		sfree_maybe(q, s);
	return 0;
}

static int on_reset(struct moq_qmux *q, struct rd *r)
{
	int64_t sid = (int64_t)rv(r);
	uint64_t code = rv(r), final = rv(r);
	struct qstream *s;
	int err = 0;

	if (r->bad || sid < 0)
		return perr(q, MOQ_QMUX_FRAME_ENCODING_ERROR);
	if (sid_local(q, sid)) {
		if (sid_uni(sid) || ((uint64_t)sid >> 2) >= q->local_next[0])
			return perr(q, MOQ_QMUX_STREAM_STATE_ERROR);
		s = sfind(q, sid);
	} else {
		s = remote_stream(q, sid, &err);
		if (err)
			return err;
	}
	if (s == NULL || s->recv_done)
		return 0;
	/* RFC 9000, 4.5: the final size counts in the window (qmux drafts up to
	 * 02 may send 0: the larger of the two) */
	if (final > s->recv_off) {
		if (final > s->recv_max || q->recv_data + (final - s->recv_off) > q->recv_data_max)
			return perr(q, MOQ_QMUX_FLOW_CONTROL_ERROR);
		q->recv_data += final - s->recv_off;
		s->recv_off = final;
	}
	s->recv_done = 1;
	s->msd_pending = 0;
	if (q->cfg.cb->stream_reset)
		q->cfg.cb->stream_reset(q->cfg.user, sid, code);
	if (q->closing)
		return 0;
	recv_credit(q, NULL);
	sfree_maybe(q, s);
	return 0;
}

static int on_stop(struct moq_qmux *q, struct rd *r)
{
	int64_t sid = (int64_t)rv(r);
	uint64_t code = rv(r);
	struct qstream *s;
	int err = 0;

	if (r->bad || sid < 0)
		return perr(q, MOQ_QMUX_FRAME_ENCODING_ERROR);
	if (sid_local(q, sid)) {
		if (((uint64_t)sid >> 2) >= q->local_next[sid_uni(sid)])
			return perr(q, MOQ_QMUX_STREAM_STATE_ERROR);
		s = sfind(q, sid);
	} else {
		if (sid_uni(sid)) /* RFC 9000, 19.5: a receive-only stream */
			return perr(q, MOQ_QMUX_STREAM_STATE_ERROR);
		s = remote_stream(q, sid, &err);
		if (err)
			return err;
	}
	if (s == NULL || s->send_done || s->reset_pending)
		return 0;
	/* the session answers with a reset (moq.h: stop_sending) */
	if (q->cfg.cb->stream_stop_sending)
		q->cfg.cb->stream_stop_sending(q->cfg.user, sid, code);
	s = sfind(q, sid);
	/* RFC 9000, 3.5: a STOP_SENDING is answered with RESET_STREAM */
	if (s != NULL && !q->closing && !s->send_done && !s->reset_pending)
		moq_qmux_stream_reset(q, sid, code);
	return 0;
}

static void wake(struct moq_qmux *q)
{
	if (q->cfg.cb->writable && !q->closing)
		q->cfg.cb->writable(q->cfg.user);
}

static int on_frame(struct moq_qmux *q, uint64_t type, struct rd *r)
{
	struct qstream *s;
	uint64_t a, b;

	if (type >= 0x08 && type <= 0x0f)
		return on_stream(q, type, r);
	switch (type) {
	case 0x00: /* PADDING */
		return 0;
	case 0x01: /* PING (RFC 9000, 19.2): nothing to do on a reliable link */
		return 0;
	case 0x04:
		return on_reset(q, r);
	case 0x05:
		return on_stop(q, r);
	case 0x10: /* MAX_DATA */
		a = rv(r);
		if (r->bad)
			break;
		if (a > q->send_data_max) {
			q->send_data_max = a;
			wake(q);
		}
		return 0;
	case 0x11: /* MAX_STREAM_DATA */
		a = rv(r);
		b = rv(r);
		if (r->bad)
			break;
		/* RFC 9000, 19.10: for a receive-only stream it is an error */
		if (!sid_local(q, (int64_t)a) && sid_uni((int64_t)a))
			return perr(q, MOQ_QMUX_STREAM_STATE_ERROR);
		s = sfind(q, (int64_t)a);
		if (s != NULL && b > s->send_max) {
			s->send_max = b;
			if (s->queued > s->sent || (s->fin_queued && !s->fin_sent))
				ready_add(q, s);
			wake(q);
		}
		return 0;
	case 0x12: /* MAX_STREAMS */
	case 0x13:
		a = rv(r);
		if (r->bad)
			break;
		if (a > (1ull << 60))
			return perr(q, MOQ_QMUX_FRAME_ENCODING_ERROR);
		if (a > q->local_max[type - 0x12]) {
			q->local_max[type - 0x12] = a;
			wake(q);
		}
		return 0;
	case 0x14: /* DATA_BLOCKED and friends: informational */
	case 0x16:
	case 0x17:
		rv(r);
		break;
	case 0x15:
		rv(r);
		rv(r);
		break;
	case 0x1c: /* CONNECTION_CLOSE */
	case 0x1d: /* APPLICATION_CLOSE */
		a = rv(r);
		if (type == 0x1c)
			rv(r); /* the frame type */
		b = rv(r);
		rbytes(r, b);
		if (r->bad)
			break;
		do_close(q, a, type == 0x1d, 0);
		return 0;
	default:
		if (type == QX_PING_REQUEST) {
			a = rv(r);
			if (r->bad)
				break;
			q->ping_reply = a;
			q->ping_reply_pending = 1;
			q->st.pings_answered++;
			return 0;
		}
		if (type == QX_PING_RESPONSE) {
			rv(r);
			break;
		}
		if (type == QX_TRANSPORT_PARAMETERS) /* only first, only once */
			return perr(q, MOQ_QMUX_PROTOCOL_VIOLATION);
		/* DATAGRAM (0x30/0x31) too: we advertised no max_datagram_frame_size
		 * (RFC 9221, 3), and anything unknown (RFC 9000, 12.4) */
		return perr(q, MOQ_QMUX_FRAME_ENCODING_ERROR);
	}
	return r->bad ? perr(q, MOQ_QMUX_FRAME_ENCODING_ERROR) : 0;
}

int moq_qmux_recv_record(struct moq_qmux *q, const uint8_t *rec, size_t len, uint64_t now)
{
	struct rd r = {rec, len, 0};

	if (q->closing)
		return MOQ_ERR_CLOSED;
	q->last_recv = now;
	q->st.records_in++;
	q->st.bytes_in += len;
	/* qmux-01, 5: a record over our max_record_size */
	if (len > q->cfg.local.max_record_size)
		return perr(q, MOQ_QMUX_PROTOCOL_VIOLATION);
	while (r.len > 0 && !q->closing) {
		uint64_t type = rv(&r);
		int rc;

		if (r.bad)
			return perr(q, MOQ_QMUX_FRAME_ENCODING_ERROR);
		if (!q->peer_seen) {
			const uint8_t *p;
			uint64_t l;

			if (type == 0x00)
				continue; /* leading PADDING */
			/* qmux-01, 4.2: QX_TRANSPORT_PARAMETERS is the first frame */
			if (type != QX_TRANSPORT_PARAMETERS)
				return perr(q, MOQ_QMUX_PROTOCOL_VIOLATION);
			l = rv(&r);
			p = rbytes(&r, l);
			if (r.bad)
				return perr(q, MOQ_QMUX_FRAME_ENCODING_ERROR);
			rc = parse_params(q, p, (size_t)l);
			if (rc == 0)
				wake(q);
		} else {
			rc = on_frame(q, type, &r);
		}
		if (rc < 0)
			return rc;
	}
	return q->closing && !q->close_sent && !q->close_app && q->close_code != 0 ? MOQ_ERR_PROTO
	                                                                           : 0;
}

/* --- send ---------------------------------------------------------------- */

struct wr {
	uint8_t *p;
	size_t cap, len;
	int err; /* a write did not fit */
};

static int wv(struct wr *w, uint64_t v)
{
	int n = moq_varint_put(w->p + w->len, w->cap - w->len, v);

	if (n < 0) {
		w->err = 1;
		return -1;
	}
	w->len += (size_t)n;
	return 0;
}

static size_t vlen(uint64_t v)
{
	return moq_varint_len(v);
}

static void put_params(struct moq_qmux *q, struct wr *w)
{
	const struct moq_qmux_params *p = &q->cfg.local;
	const uint64_t ids[] = {0x01, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, TP_MAX_RECORD_SIZE};
	const uint64_t vals[] = {p->idle_timeout_ms,
	                         p->max_data,
	                         p->max_stream_data_bidi_local,
	                         p->max_stream_data_bidi_remote,
	                         p->max_stream_data_uni,
	                         p->max_streams_bidi,
	                         p->max_streams_uni,
	                         p->max_record_size};
	size_t body = 0;

	for (unsigned int i = 0; i < 8; i++)
		body += vlen(ids[i]) + vlen(vlen(vals[i])) + vlen(vals[i]);
	wv(w, QX_TRANSPORT_PARAMETERS);
	wv(w, body);
	for (unsigned int i = 0; i < 8; i++) {
		wv(w, ids[i]);
		wv(w, vlen(vals[i]));
		wv(w, vals[i]);
	}
}

/* Room for a frame of @need bytes in the header part, and in the record
 * (@budget): a frame goes in whole or waits for the next record. */
static int room(const struct wr *w, size_t budget, size_t need)
{
	return w->len + need <= w->cap && w->len + need <= budget;
}

/* The bytes of @s's pending control frames (RESET_STREAM, STOP_SENDING,
 * MAX_STREAM_DATA; RFC 9000, 19.4, 19.5, 19.10). */
static size_t ctrl_need(const struct qstream *s)
{
	size_t n = 0, sl = vlen((uint64_t)s->sid);

	if (s->reset_pending)
		n += 1 + sl + vlen(s->reset_code) + vlen(s->sent);
	if (s->stop_pending)
		n += 1 + sl + vlen(s->stop_code);
	if (s->msd_pending && !s->recv_done)
		n += 1 + sl + vlen(s->recv_max);
	return n;
}

int moq_qmux_next_record(struct moq_qmux *q, struct iovec *iov, unsigned n, size_t *len)
{
	struct wr w = {q->hdr, sizeof(q->hdr), 0, 0};
	/* qmux-01, 5: at most the peer's max_record_size, and never more than
	 * the writer's buffers take (web.h, MOQ_QMUX_MAX_SEND_RECORD): a peer
	 * advertising 2^62-1 gets records of our size */
	size_t budget = q->peer.max_record_size < MOQ_QMUX_MAX_SEND_RECORD
	                        ? (size_t)q->peer.max_record_size
	                        : MOQ_QMUX_MAX_SEND_RECORD;
	struct qstream *s;

	if (n < 4)
		return MOQ_ERR_INVAL;
	if (q->rec_built)
		goto out;
	if (q->close_sent)
		return 0;
	q->rec_stream = NULL;
	q->rec_fin = 0;
	q->rec_close = 0;
	q->rec_niov = 1;
	if (!q->tp_sent) {
		put_params(q, &w);
		q->tp_sent = 1;
	}
	if (q->closing) {
		/* RFC 9000, 19.19: CONNECTION_CLOSE carries the frame type (0) */
		wv(&w, q->close_app ? 0x1d : 0x1c);
		wv(&w, q->close_code);
		if (!q->close_app)
			wv(&w, 0);
		wv(&w, 0);
		q->rec_close = 1;
		goto built;
	}
	if (q->ping_reply_pending &&
	    room(&w, budget, vlen(QX_PING_RESPONSE) + vlen(q->ping_reply))) {
		wv(&w, QX_PING_RESPONSE);
		wv(&w, q->ping_reply);
		q->ping_reply_pending = 0;
	}
	if (q->ping_req_pending && room(&w, budget, vlen(QX_PING_REQUEST) + vlen(q->ping_seq))) {
		wv(&w, QX_PING_REQUEST);
		wv(&w, q->ping_seq++);
		q->ping_req_pending = 0;
	}
	if (q->max_data_pending && room(&w, budget, 1 + vlen(q->recv_data_max))) {
		wv(&w, 0x10);
		wv(&w, q->recv_data_max);
		q->max_data_pending = 0;
	}
	for (int d = 0; d < 2; d++)
		if (q->max_streams_pending[d] && room(&w, budget, 1 + vlen(q->remote_max[d]))) {
			wv(&w, 0x12 + (uint64_t)d);
			wv(&w, q->remote_max[d]);
			q->max_streams_pending[d] = 0;
		}
	/* each stream's frames whole, or in the next record */
	while ((s = q->ctrl_head) != NULL && room(&w, budget, ctrl_need(s))) {
		ctrl_del(q, s);
		if (s->reset_pending) {
			/* RFC 9000, 19.4: final size = what was sent */
			wv(&w, 0x04);
			wv(&w, (uint64_t)s->sid);
			wv(&w, s->reset_code);
			wv(&w, s->sent);
			s->reset_pending = 0;
		}
		if (s->stop_pending) {
			wv(&w, 0x05);
			wv(&w, (uint64_t)s->sid);
			wv(&w, s->stop_code);
			s->stop_pending = 0;
		}
		if (s->msd_pending) {
			if (!s->recv_done) {
				wv(&w, 0x11);
				wv(&w, (uint64_t)s->sid);
				wv(&w, s->recv_max);
			}
			s->msd_pending = 0;
		}
		sfree_maybe(q, s);
	}
	/* one STREAM frame: the first ready stream with credit (round robin) */
	for (s = q->ready_head; s != NULL; s = s->snext) {
		uint64_t avail = s->queued - s->sent, credit, take, hdr, off = s->sent;
		unsigned int k, i;
		size_t skip;

		credit = s->send_max > s->sent ? s->send_max - s->sent : 0;
		if (q->send_data_max - q->send_data < credit)
			credit = q->send_data_max - q->send_data;
		take = avail < credit ? avail : credit;
		if (take == 0 && !(s->fin_queued && !s->fin_sent && avail == 0))
			continue;
		hdr = 1 + vlen((uint64_t)s->sid) + vlen(off) + 2;
		if (!room(&w, budget, hdr + 4))
			break;
		if (take > budget - w.len - hdr)
			take = budget - w.len - hdr;
		if (take > 16383) /* the 2-byte length above */
			take = 16383;
		/* payload iovecs from the segments, starting at @off */
		skip = (size_t)(off - s->seg_off);
		k = 0;
		{
			uint64_t left = take;

			for (i = 0; i < s->scount && left > 0 && 1 + k < n && 1 + k <= QSEGS; i++) {
				const struct qseg *g = &s->seg[(s->shead + i) % QSEGS];
				size_t l;

				if (skip >= g->len) {
					skip -= g->len;
					continue;
				}
				l = g->len - skip;
				if (l > left)
					l = (size_t)left;
				q->rec_iov[1 + k].iov_base = (void *)(g->p + skip);
				q->rec_iov[1 + k].iov_len = l;
				k++;
				left -= l;
				skip = 0;
			}
			take -= left;
		}
		q->rec_fin = s->fin_queued && off + take == s->queued;
		wv(&w, 0x0e | (uint64_t)q->rec_fin);
		wv(&w, (uint64_t)s->sid);
		wv(&w, off);
		/* the length in two bytes (RFC 9000, 16: 0x40 prefix) */
		w.p[w.len++] = (uint8_t)(0x40 | (take >> 8));
		w.p[w.len++] = (uint8_t)take;
		s->sent += take;
		q->send_data += take;
		if (q->rec_fin)
			s->fin_sent = 1;
		q->rec_stream = s;
		q->rec_stream_end = s->sent;
		q->rec_niov = 1 + k;
		/* round robin: to the back, or out when nothing is left to send */
		ready_del(q, s);
		if (s->sent < s->queued || (s->fin_queued && !s->fin_sent))
			ready_add(q, s);
		break;
	}
built:
	if (w.len == 0)
		return 0;
	/* every frame above checked its room first: a varint that did not
	 * fit would have cut a frame (never sent) */
	if (w.err) {
		q->rec_niov = 0;
		return MOQ_ERR_TOO_LARGE;
	}
	q->rec_iov[0].iov_base = q->hdr;
	q->rec_iov[0].iov_len = w.len;
	q->rec_len = 0;
	for (unsigned int i = 0; i < q->rec_niov; i++)
		q->rec_len += q->rec_iov[i].iov_len;
	q->rec_built = 1;
out:
	if (q->rec_niov > n)
		return MOQ_ERR_INVAL;
	memcpy(iov, q->rec_iov, q->rec_niov * sizeof(*iov));
	*len = q->rec_len;
	return (int)q->rec_niov;
}

void moq_qmux_record_done(struct moq_qmux *q, uint64_t now)
{
	struct qstream *s = q->rec_stream;

	if (!q->rec_built)
		return;
	q->rec_built = 0;
	q->rec_stream = NULL;
	q->last_send = now;
	q->st.records_out++;
	q->st.bytes_out += q->rec_len;
	if (q->rec_close) {
		q->close_sent = 1;
		return;
	}
	if (s == NULL)
		return;
	/* the bytes are out: release the segments they covered */
	if (q->rec_stream_end > s->acked) {
		q->st.unacked -= q->rec_stream_end - s->acked;
		s->acked = q->rec_stream_end;
		while (s->scount > 0 && s->seg_off + s->seg[s->shead].len <= s->acked) {
			s->seg_off += s->seg[s->shead].len;
			s->shead = (s->shead + 1) % QSEGS;
			s->scount--;
		}
		if (q->cfg.cb->stream_acked && !q->closing)
			q->cfg.cb->stream_acked(q->cfg.user, s->sid, s->acked);
	}
	if (q->rec_fin && s->acked == s->queued)
		s->send_done = 1;
	if (!q->closing) {
		sfree_maybe(q, s);
		wake(q);
	}
}

int moq_qmux_timers(struct moq_qmux *q, uint64_t now)
{
	uint64_t idle = q->cfg.local.idle_timeout_ms, pi;

	if (q->closing)
		return 0;
	pi = q->peer_seen ? q->peer.idle_timeout_ms : 0;
	if (idle == 0 || (pi != 0 && pi < idle))
		idle = pi;
	/* RFC 9000, 10.1: silent close after the idle timeout */
	if (idle != 0 && now - q->last_recv > idle * 1000000ull) {
		do_close(q, 0, 0, 1);
		q->close_sent = 1; /* nobody to tell */
		return 1;
	}
	if (q->peer_seen && now - q->last_send > q->cfg.ping_ns && !q->ping_req_pending) {
		/* qmux-01, QX_PING: a request the peer answers; any record counts
		 * as sending, so this goes out only on a quiet session */
		q->last_send = now;
		q->st.pings_sent++;
		q->ping_req_pending = 1;
	}
	return 0;
}

int moq_qmux_stream_open(struct moq_qmux *q, int bidi, int64_t *sid)
{
	int d = bidi ? 0 : 1;
	struct qstream *s;
	int64_t id;

	if (q->closing)
		return MOQ_ERR_STATE;
	/* RFC 9000, 4.6; before the peer's parameters its limits are 0: the
	 * writable callback follows when they arrive */
	if (q->local_next[d] >= q->local_max[d])
		return MOQ_ERR_AGAIN;
	id = (int64_t)(q->local_next[d] << 2) | (d << 1) | (q->cfg.server ? 1 : 0);
	s = snew(q, id);
	if (s == NULL)
		return MOQ_ERR_NOMEM;
	q->local_next[d]++;
	q->st.streams_opened_local++;
	*sid = id;
	return 0;
}

long moq_qmux_stream_write(struct moq_qmux *q, int64_t sid, const struct iovec *iov, size_t n,
                           int fin)
{
	struct qstream *s;
	long acc = 0;
	size_t i;

	if (q->closing)
		return MOQ_ERR_STATE;
	s = sfind(q, sid);
	if (s == NULL || !s->has_send)
		return MOQ_ERR_NOTFOUND;
	if (s->fin_queued || s->reset_pending || s->send_done)
		return MOQ_ERR_CLOSED;
	for (i = 0; i < n; i++) {
		if (iov[i].iov_len == 0)
			continue;
		if (s->scount == QSEGS)
			break;
		s->seg[(s->shead + s->scount) % QSEGS] =
		        (struct qseg){(const uint8_t *)iov[i].iov_base, iov[i].iov_len};
		s->scount++;
		s->queued += iov[i].iov_len;
		acc += (long)iov[i].iov_len;
	}
	q->st.unacked += (uint64_t)acc;
	if (fin && i == n)
		s->fin_queued = 1;
	if (s->queued > s->sent || (s->fin_queued && !s->fin_sent))
		ready_add(q, s);
	return acc;
}

int moq_qmux_stream_reset(struct moq_qmux *q, int64_t sid, uint64_t code)
{
	struct qstream *s = sfind(q, sid);

	if (s == NULL || !s->has_send)
		return MOQ_ERR_NOTFOUND;
	if (s->send_done || s->reset_pending)
		return 0;
	/* queued data is dropped: the caller may release it (moq.h) */
	s->reset_pending = 1;
	s->reset_code = code;
	s->send_done = 1;
	q->st.unacked -= s->queued - s->sent;
	s->scount = 0;
	s->queued = s->sent;
	ready_del(q, s);
	ctrl_add(q, s);
	return 0;
}

int moq_qmux_stream_stop_sending(struct moq_qmux *q, int64_t sid, uint64_t code)
{
	struct qstream *s = sfind(q, sid);

	if (s == NULL || !s->has_recv)
		return MOQ_ERR_NOTFOUND;
	if (s->recv_done)
		return 0;
	s->stop_pending = 1;
	s->stop_code = code;
	/* further data is discarded; the peer answers with RESET_STREAM */
	ctrl_add(q, s);
	return 0;
}

void moq_qmux_close(struct moq_qmux *q, uint64_t code)
{
	do_close(q, code, 1, 1);
}

void moq_qmux_abort(struct moq_qmux *q, uint64_t code)
{
	do_close(q, code, 0, 1);
}

int moq_qmux_closing(const struct moq_qmux *q)
{
	return q->closing;
}

uint64_t moq_qmux_close_code(const struct moq_qmux *q)
{
	return q->close_code;
}

const struct moq_qmux_params *moq_qmux_peer_params(const struct moq_qmux *q)
{
	return q->peer_seen ? &q->peer : NULL;
}

void moq_qmux_get_stats(const struct moq_qmux *q, struct moq_qmux_stats *out)
{
	*out = q->st;
}
