/* SPDX-License-Identifier: MIT */
/*
 * conn.c: one connection of the fast path: import, receiving (header
 * protection, AEAD, key phases, frames), ACK processing over the sent ring,
 * loss detection and PTO (RFC 9002), NewReno, streams, close and timers.
 */
#include "fp_int.h"

#include <assert.h>
#include <stdlib.h>

_Static_assert(sizeof(struct fp_conn) <= 256, "the hot record is at most 256 bytes");
_Static_assert(sizeof(struct fp_sent) == 32, "a sent-packet record is 32 bytes");

/* RFC 9002, 7.2: initial window 10 datagrams (and at least 14720 bytes). */
#define INIT_CWND_PKTS 10
/* Received ranges kept for our ACKs (RFC 9000, 13.2.3 lets us bound them). */
#define RX_RANGES FP_IMPORT_RANGES
/* RFC 9000, 13.2.2: ACK every 2nd ack-eliciting packet. */
#define ACK_EVERY 2
/* CONNECTION_CLOSE repeats in the closing period (RFC 9000, 10.2.1). */
#define CLOSE_REPEATS 8
/* Time-threshold loss (RFC 9002, 6.1.2): 9/8 of the RTT. */
#define TIME_THRESH_NUM 9
#define TIME_THRESH_DEN 8
/* STREAM frames whose data we never read: 2^62 - 1 (RFC 9000, 4.5). */
#define MAX_OFFSET ((1ull << 62) - 1)
/* Ring slots the window leaves for records waiting to be declared lost. */
#define RING_SPARE 16u

static uint32_t us_of(const struct fp_conn *c, uint64_t now)
{
	return (uint32_t)((now - c->x->epoch_ns) / 1000);
}

uint64_t fp_pto(const struct fp_conn *c)
{
	/* RFC 9002, 6.2.1 */
	uint64_t v = 4 * c->rttvar;

	if (v < K_GRANULARITY_NS)
		v = K_GRANULARITY_NS;
	return c->srtt + v + c->x->peer.max_ack_delay_ns;
}

static int is_local_sid(const struct fp_conn *c, int64_t sid)
{
	return ((uint64_t)sid & 1) == c->is_server;
}

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

static struct fp_stream *stream_new(struct fp_conn *c, int64_t sid)
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
	while (s->chunks != FP_NONE32) {
		struct fp_chunk *k = &e->chunks[s->chunks];
		uint32_t n = k->next;
		if (upto != UINT64_MAX && k->off + k->len > upto)
			break;
		if (s->cur == s->chunks)
			s->cur = FP_NONE32;
		k->next = e->free_chunk;
		e->free_chunk = s->chunks;
		s->chunks = n;
	}
	if (s->chunks == FP_NONE32)
		s->chunks_tail = FP_NONE32;
}

static void rbuf_free(struct fp_engine *e, struct fp_stream *s)
{
	if (s->rbuf == FP_NONE32)
		return;
	*(uint32_t *)(e->rbufs + (size_t)s->rbuf * e->rbuf_bytes) = e->free_rbuf;
	e->free_rbuf = s->rbuf;
	s->rbuf = FP_NONE32;
}

/* Unlink and free @s (no callback). */
static void stream_free(struct fp_conn *c, struct fp_stream *s)
{
	struct fp_engine *e = c->e;
	uint32_t idx = (uint32_t)(s - e->streams), *pp;

	chunks_release(e, s, UINT64_MAX);
	fp_ivl_free_list(e, s->acked_ivl);
	fp_ivl_free_list(e, s->lost_ivl);
	rbuf_free(e, s);
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
	const struct fp_callbacks *cb = c->e->cb;
	struct fp_cold *x = c->x;
	int64_t sid = s->id;
	uint64_t err = s->app_err;

	if (!(s->flags & SF_RECV_DONE) || !send_done(s) || s->refs > 0)
		return;
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
	stream_free(c, s);
	if (cb && cb->stream_closed)
		cb->stream_closed(c, c->user, sid, err);
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

/* Add [lo, hi) to the ascending interval list at *@head (merging). */
void fp_ivl_add(struct fp_engine *e, uint32_t *head, uint64_t lo, uint64_t hi)
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
			w->next = e->free_ivl;
			e->free_ivl = v->next;
			v->next = wn;
		}
		return;
	}
	n = fp_ivl_alloc(e);
	if (n == FP_NONE32)
		return; /* counted; the range will be resent / re-acked later */
	e->ivls[n].lo = lo;
	e->ivls[n].hi = hi;
	e->ivls[n].next = *pp;
	*pp = n;
}

static void stream_acked_range(struct fp_conn *c, struct fp_stream *s, uint64_t off,
                               uint64_t end, int fin)
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
			v->next = e->free_ivl;
			e->free_ivl = s->acked_ivl;
			s->acked_ivl = n;
		}
	} else {
		fp_ivl_add(e, &s->acked_ivl, off, end);
	}
	if (s->snd_acked > before) {
		chunks_release(e, s, s->snd_acked);
		if (e->cb && e->cb->stream_acked)
			e->cb->stream_acked(c, c->user, s->id, s->snd_acked, s->snd_acked - before);
	}
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
			fp_ivl_add(e, &s->lost_ivl, lo, hi);
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

static void on_acked_range(struct fp_conn *c, uint32_t sidx, uint64_t off, uint32_t len,
                           int kind, int fin)
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
	fp_stream_maybe_free(c, s);
}

/* ---- import ------------------------------------------------------------ */

static void conn_tables_del(struct fp_conn *c)
{
	struct fp_engine *e = c->e;
	struct fp_cold *x = c->x;
	unsigned i;

	for (i = 0; i < x->nscids; i++) {
		fp_tab_del(e, e->cid_tab, x->scids[i].id, x->scids[i].len);
		fp_len_ref(e, x->scids[i].len, -1);
	}
	x->nscids = 0;
	if (x->dcid.has_token)
		fp_tab_del(e, e->tok_tab, x->dcid.token, FP_TOKEN_LEN);
	for (i = 0; i < x->npeer_cids; i++)
		if (x->peer_cids[i].has_token)
			fp_tab_del(e, e->tok_tab, x->peer_cids[i].token, FP_TOKEN_LEN);
	x->dcid.has_token = 0;
	x->npeer_cids = 0;
}

static int add_token(struct fp_conn *c, const struct fp_cid *cid)
{
	if (!cid->has_token)
		return 0;
	return fp_tab_add(c->e, c->e->tok_tab, cid->token, FP_TOKEN_LEN, conn_idx(c));
}

struct fp_conn *fp_conn_import(struct fp_engine *e, const struct fp_import *imp, uint64_t now,
                               int *err)
{
	struct fp_conn *c;
	struct fp_cold *x;
	uint32_t idx;
	size_t i;
	int rv;

	if (e == NULL || imp == NULL || imp->nscids == 0 || imp->nscids > FP_MAX_SCIDS ||
	    imp->npeer_cids > FP_MAX_PEER_CIDS || imp->nrx_ranges > FP_IMPORT_RANGES ||
	    imp->dcid.len > FP_CID_MAX) {
		rv = MOQ_ERR_INVAL;
		goto out;
	}
	if (imp->cipher != FP_CIPHER_AES_128_GCM_SHA256 || imp->version != 1 ||
	    imp->bytes_in_flight != 0) {
		rv = MOQ_ERR_CONFIG;
		goto out;
	}
	for (i = 0; i < imp->nscids; i++)
		if (imp->scids[i].len == 0 || imp->scids[i].len > FP_CID_MAX) {
			rv = MOQ_ERR_INVAL;
			goto out;
		}
	idx = e->free_conn;
	if (idx == FP_NONE32) {
		e->st.pool_exhausted++;
		rv = MOQ_ERR_LIMIT;
		goto out;
	}
	c = &e->conns[idx];
	x = &e->colds[idx];
	e->free_conn = c->ready_next;
	memset(c, 0, sizeof(*c));
	memset(x, 0, sizeof(*x));
	c->e = e;
	c->x = x;
	x->cidx = idx;
	c->ring = e->rings + (size_t)idx * e->cfg.sent_ring;
	memset(c->ring, 0, e->cfg.sent_ring * sizeof(*c->ring));
	c->ring_mask = (uint16_t)(e->cfg.sent_ring - 1);
	c->user = imp->user;
	c->ready_next = c->ready_prev = FP_NONE32;
	c->send_head = c->send_tail = FP_NONE32;
	x->streams = FP_NONE32;
	c->is_server = imp->is_server ? 1 : 0;
	rv = fp_keys_setup(&x->keys, imp);
	if (rv < 0)
		goto fail_slot;
	x->keys.tx_phase_first_pn = imp->tx_pn;
	c->kp = c->rx_kp = imp->key_phase ? 1 : 0;
	/* CIDs */
	x->dcid = imp->dcid;
	memcpy(x->peer_cids, imp->peer_cids, sizeof(x->peer_cids));
	x->npeer_cids = imp->npeer_cids;
	x->peer_retire_prior_to = imp->peer_retire_prior_to;
	x->next_scid_seq = imp->next_scid_seq;
	x->local_cid_limit = imp->local_active_cid_limit ? imp->local_active_cid_limit : 2;
	x->grease = imp->local_grease_quic_bit ? 1 : 0;
	c->dcid_len = imp->dcid.len;
	c->scid_len = imp->scids[0].len;
	for (i = 0; i < imp->nscids; i++) {
		rv = fp_tab_add(e, e->cid_tab, imp->scids[i].id, imp->scids[i].len, idx);
		if (rv < 0)
			goto fail_cids;
		x->scids[x->nscids++] = imp->scids[i];
		fp_len_ref(e, imp->scids[i].len, 1);
		if (imp->scids[i].seq >= x->next_scid_seq)
			x->next_scid_seq = imp->scids[i].seq + 1;
	}
	rv = add_token(c, &x->dcid);
	for (i = 0; rv == 0 && i < x->npeer_cids; i++)
		rv = add_token(c, &x->peer_cids[i]);
	if (rv < 0)
		goto fail_cids;
	/* packet numbers and ACK state */
	c->tx_pn = imp->tx_pn;
	c->largest_acked = imp->largest_acked;
	c->ring_lo = imp->tx_pn;
	c->rx_largest = imp->rx_largest_pn;
	c->rx_largest_t = now;
	memcpy(x->rx_ranges, imp->rx_ranges, sizeof(x->rx_ranges));
	x->nrx = imp->nrx_ranges;
	if (x->nrx == 0 && imp->rx_largest_pn != FP_PN_NONE) {
		x->rx_ranges[0].lo = x->rx_ranges[0].hi = imp->rx_largest_pn;
		x->nrx = 1;
	}
	if (imp->ack_eliciting_pending) {
		c->rx_unacked = 1;
		c->ctl |= CF_ACK;
	}
	x->max_ack_delay_ns = imp->max_ack_delay_ns ? imp->max_ack_delay_ns : 25000000ull;
	x->ack_delay_exp = imp->ack_delay_exponent ? imp->ack_delay_exponent : 3;
	x->peer = imp->peer;
	if (!x->peer.max_ack_delay_ns)
		x->peer.max_ack_delay_ns = 25000000ull;
	if (!x->peer.ack_delay_exponent)
		x->peer.ack_delay_exponent = 3;
	if (x->peer.ack_delay_exponent > 20 || x->peer.max_ack_delay_ns >= (1ull << 14) * 1000000) {
		rv = MOQ_ERR_CONFIG;
		goto fail_cids;
	}
	/* RTT and congestion */
	c->srtt = imp->smoothed_rtt_ns ? imp->smoothed_rtt_ns : K_INITIAL_RTT_NS;
	c->rttvar = imp->smoothed_rtt_ns ? imp->rttvar_ns : K_INITIAL_RTT_NS / 2;
	c->min_rtt = imp->min_rtt_ns ? imp->min_rtt_ns : UINT64_MAX;
	c->latest_rtt = imp->latest_rtt_ns;
	c->max_pkt = imp->max_udp_payload ? imp->max_udp_payload : FP_MIN_PKT_BUF;
	if (c->max_pkt > FP_MAX_UDP_PAYLOAD)
		c->max_pkt = FP_MAX_UDP_PAYLOAD;
	if (x->peer.max_udp_payload_size && x->peer.max_udp_payload_size < c->max_pkt)
		c->max_pkt = (uint16_t)x->peer.max_udp_payload_size;
	if (c->max_pkt < FP_MIN_PKT_BUF) {
		rv = MOQ_ERR_CONFIG;
		goto fail_cids;
	}
	c->cwnd = imp->cwnd ? imp->cwnd : INIT_CWND_PKTS * (uint64_t)c->max_pkt;
	if (c->cwnd < MIN_CWND_PKTS * (uint64_t)c->max_pkt)
		c->cwnd = MIN_CWND_PKTS * (uint64_t)c->max_pkt;
	c->ssthresh = imp->ssthresh ? imp->ssthresh : UINT64_MAX;
	c->recovery_start = now;
	/* flow control */
	x->local_max_data = imp->local_max_data;
	x->recv_data = imp->recv_data;
	c->peer_max_data = imp->peer_max_data;
	c->sent_data = imp->sent_data;
	x->local_msd_bidi_local = imp->local_max_stream_data_bidi_local;
	x->local_msd_bidi_remote = imp->local_max_stream_data_bidi_remote;
	x->local_msd_uni = imp->local_max_stream_data_uni;
	x->local_max_sb = imp->local_max_streams_bidi;
	x->local_max_su = imp->local_max_streams_uni;
	x->peer_max_sb = imp->peer_max_streams_bidi;
	x->peer_max_su = imp->peer_max_streams_uni;
	x->next_local_bidi = imp->next_local_bidi;
	x->next_local_uni = imp->next_local_uni;
	x->next_remote_bidi = imp->next_remote_bidi;
	x->next_remote_uni = imp->next_remote_uni;
	for (i = 0; i < imp->nstreams; i++) {
		const struct fp_import_stream *is = &imp->streams[i];
		struct fp_stream *s = stream_new(c, is->id);
		if (s == NULL) {
			rv = MOQ_ERR_LIMIT;
			goto fail_streams;
		}
		s->user = is->user;
		s->snd_off = s->snd_end = s->snd_acked = is->send_offset;
		s->rcv_off = s->rcv_hi = is->recv_offset;
		if (!((s->flags & SF_UNI) && !(s->flags & SF_LOCAL)))
			s->snd_max = is->send_max;
		if (!((s->flags & SF_UNI) && (s->flags & SF_LOCAL)))
			s->rcv_max = is->recv_max;
		if (is->flags & FP_STREAM_FIN_SENT)
			s->flags |= SF_FIN_QUEUED | SF_FIN_SENT | SF_FIN_ACKED;
		if (is->flags & FP_STREAM_FIN_RECV) {
			s->rcv_final = is->recv_offset;
			s->flags |= SF_FIN_RECV | SF_RECV_DONE;
		}
		if (is->flags & FP_STREAM_RESET_SENT)
			s->flags |= SF_RESET_SENT | SF_RESET_ACKED;
		if (is->flags & FP_STREAM_RESET_RECV)
			s->flags |= SF_RECV_DONE;
		if (is->flags & FP_STREAM_STOP_SENT)
			s->flags |= SF_STOP_SENT;
	}
	/* the peer's idle timeout and ours: the smaller nonzero (RFC 9000, 10.1) */
	x->idle_ns = imp->local_idle_timeout_ns;
	if (x->peer.max_idle_timeout_ns &&
	    (!x->idle_ns || x->peer.max_idle_timeout_ns < x->idle_ns))
		x->idle_ns = x->peer.max_idle_timeout_ns;
	x->idle_at = x->idle_ns ? now + x->idle_ns : UINT64_MAX;
	x->local = imp->local;
	x->remote = imp->remote;
	c->validated = imp->path_validated ? 1 : 0;
	x->path_recv = imp->path_bytes_recv;
	x->path_sent = imp->path_bytes_sent;
	x->epoch_ns = now;
	x->last_tx_t = now;
	c->pace_t = 0; /* a first burst may go at once */
	e->st.conns_active++;
	e->st.conns_imported++;
	if (c->ctl)
		fp_ready_add(c);
	fp_conn_timer(c);
	if (err)
		*err = 0;
	return c;
fail_streams:
	while (x->streams != FP_NONE32)
		stream_free(c, &e->streams[x->streams]);
fail_cids:
	conn_tables_del(c);
	fp_keys_free(&x->keys);
fail_slot:
	c->e = NULL;
	c->ready_next = e->free_conn;
	e->free_conn = idx;
out:
	if (err)
		*err = rv;
	return NULL;
}

/* ---- freeing and closing --------------------------------------------- */

static void release_all_streams(struct fp_conn *c)
{
	while (c->x->streams != FP_NONE32)
		stream_free(c, &c->e->streams[c->x->streams]);
	c->send_head = c->send_tail = FP_NONE32;
}

static void ring_clear(struct fp_conn *c)
{
	struct fp_engine *e = c->e;
	uint32_t i;

	for (i = 0; i <= c->ring_mask; i++) {
		struct fp_sent *r = &c->ring[i];
		uint32_t m = r->more;
		if (!(r->flags & PF_USED))
			continue;
		while (m != FP_NONE32 && (r->flags & PF_RANGE)) {
			uint32_t n = e->sranges[m].next;
			e->sranges[m].next = e->free_srange;
			e->free_srange = m;
			m = n;
		}
		r->flags = 0;
	}
}

void fp_conn_free(struct fp_conn *c)
{
	struct fp_engine *e = c->e;
	uint32_t idx = conn_idx(c);

	if (c->x->busy) {
		c->x->free_pending = 1;
		c->state = ST_DEAD;
		return;
	}
	fp_ready_del(c);
	fp_wheel_cancel(&e->wheel, &c->tn);
	conn_tables_del(c);
	ring_clear(c);
	release_all_streams(c);
	fp_keys_free(&c->x->keys);
	e->st.conns_active--;
	e->st.conns_closed++;
	c->e = NULL;
	c->ready_next = e->free_conn;
	e->free_conn = idx;
}

static void notify_closed(struct fp_conn *c, enum fp_close_kind kind, int local, uint64_t code,
                          uint64_t ftype, const char *what, const uint8_t *reason,
                          size_t reasonlen)
{
	const struct fp_callbacks *cb = c->e->cb;
	struct fp_close_info info;

	/* nothing of the caller's is referenced after conn_closed */
	ring_clear(c);
	release_all_streams(c);
	c->inflight = 0;
	if (cb == NULL || cb->conn_closed == NULL)
		return;
	memset(&info, 0, sizeof(info));
	info.kind = kind;
	info.local = local;
	info.code = code;
	info.frame_type = ftype;
	info.what = what;
	info.reason = reason;
	info.reasonlen = reasonlen;
	cb->conn_closed(c, c->user, &info);
}

void fp_close_local(struct fp_conn *c, int app, uint64_t code, uint64_t ftype, const char *what,
                    uint64_t now)
{
	struct fp_cold *x = c->x;

	if (c->state != ST_OPEN)
		return;
	c->state = ST_CLOSING;
	x->close_app = app ? 1 : 0;
	x->close_code = code;
	x->close_ftype = ftype;
	x->close_budget = CLOSE_REPEATS;
	c->ctl = CF_CLOSE;
	/* RFC 9000, 10.2: the closing period lasts three PTOs */
	x->idle_at = now + 3 * fp_pto(c);
	c->ack_at = 0;
	c->loss_time = 0;
	if (!app && code != FP_E_NO_ERROR)
		c->e->st.conn_errors++;
	fp_ready_add(c);
	notify_closed(c, app ? FP_CLOSE_APPLICATION : FP_CLOSE_TRANSPORT, 1, code, ftype, what,
	              x->close_reason, x->close_reasonlen);
	fp_conn_timer(c);
}

/* A protocol violation by the peer (RFC 9000, 20.1). */
static int violation(struct fp_conn *c, uint64_t code, uint64_t ftype, const char *what,
                     uint64_t now)
{
	static const char pv[] = "protocol violation";

	memcpy(c->x->close_reason, pv, sizeof(pv) - 1);
	c->x->close_reasonlen = sizeof(pv) - 1;
	fp_close_local(c, 0, code, ftype, what, now);
	return -1;
}

void fp_conn_stateless_reset(struct fp_conn *c, uint64_t now)
{
	(void)now;
	if (c->state == ST_DEAD)
		return;
	c->e->st.stateless_resets++;
	if (c->state == ST_OPEN)
		notify_closed(c, FP_CLOSE_STATELESS_RESET, 0, 0, 0, "stateless reset", NULL, 0);
	c->state = ST_DEAD;
	fp_conn_free(c);
}

int fp_conn_close(struct fp_conn *c, int app, uint64_t code, const char *reason)
{
	size_t n;

	if (c == NULL)
		return MOQ_ERR_INVAL;
	if (c->state != ST_OPEN)
		return MOQ_ERR_STATE;
	n = reason ? strlen(reason) : 0;
	if (n > sizeof(c->x->close_reason))
		n = sizeof(c->x->close_reason);
	if (n)
		memcpy(c->x->close_reason, reason, n);
	c->x->close_reasonlen = (uint8_t)n;
	/* the time of the closing period: the latest the engine saw */
	fp_close_local(c, app, code, 0, app ? "application close" : "transport close",
	               c->x->last_tx_t > c->rx_largest_t ? c->x->last_tx_t : c->rx_largest_t);
	return 0;
}

void fp_conn_drop(struct fp_conn *c)
{
	if (c == NULL || c->e == NULL)
		return;
	if (c->state == ST_OPEN)
		notify_closed(c, FP_CLOSE_ENGINE, 1, 0, 0, "dropped", NULL, 0);
	c->state = ST_DEAD;
	fp_conn_free(c);
}

/* ---- RTT, congestion, loss --------------------------------------------- */

static void rtt_sample(struct fp_conn *c, uint64_t latest, uint64_t ack_delay)
{
	/* RFC 9002, 5.3 */
	c->latest_rtt = latest;
	if (c->min_rtt == UINT64_MAX || latest < c->min_rtt)
		c->min_rtt = latest;
	if (ack_delay > c->x->peer.max_ack_delay_ns)
		ack_delay = c->x->peer.max_ack_delay_ns;
	if (c->srtt == K_INITIAL_RTT_NS && c->rttvar == K_INITIAL_RTT_NS / 2) {
		c->srtt = latest;
		c->rttvar = latest / 2;
		return;
	}
	if (latest >= c->min_rtt + ack_delay)
		latest -= ack_delay;
	{
		uint64_t d = c->srtt > latest ? c->srtt - latest : latest - c->srtt;
		c->rttvar = (3 * c->rttvar + d) / 4;
		c->srtt = (7 * c->srtt + latest) / 8;
	}
}

static void cc_on_ack(struct fp_conn *c, uint64_t sent_ns, uint32_t size)
{
	/* RFC 9002, 7.3.3: no increase for packets sent before recovery began,
	 * nor while the application (not the window) limited the sender */
	if (sent_ns <= c->recovery_start)
		return;
	if (!c->cc_blocked && c->inflight + size < c->cwnd / 2)
		return;
	if (c->cwnd < c->ssthresh) {
		c->cwnd += size;
	} else {
		c->ca_acc += size;
		if (c->ca_acc >= c->cwnd) {
			c->ca_acc -= c->cwnd;
			c->cwnd += c->max_pkt;
		}
	}
	/* the sent ring bounds packets in flight: a window beyond it is not
	 * usable (and would not be probed) */
	if (c->cwnd > (uint64_t)(c->ring_mask + 1u - RING_SPARE) * c->max_pkt)
		c->cwnd = (uint64_t)(c->ring_mask + 1u - RING_SPARE) * c->max_pkt;
}

static void cc_on_loss(struct fp_conn *c, uint64_t sent_ns, uint64_t now)
{
	/* RFC 9002, 7.3.2: one reduction per round trip */
	if (sent_ns <= c->recovery_start)
		return;
	c->recovery_start = now;
	c->ssthresh = c->cwnd / 2;
	if (c->ssthresh < MIN_CWND_PKTS * (uint64_t)c->max_pkt)
		c->ssthresh = MIN_CWND_PKTS * (uint64_t)c->max_pkt;
	c->cwnd = c->ssthresh;
	c->ca_acc = 0;
}

static uint64_t sent_time(const struct fp_conn *c, const struct fp_sent *r, uint64_t now)
{
	uint32_t age = us_of(c, now) - r->t_us;
	return now - (uint64_t)age * 1000;
}

/* Walk a record's ranges with @fn, freeing the extra ones. */
static void sent_ranges(struct fp_conn *c, struct fp_sent *r,
                        void (*fn)(struct fp_conn *, uint32_t, uint64_t, uint32_t, int, int))
{
	struct fp_engine *e = c->e;
	uint32_t m = r->more;

	if (!(r->flags & PF_RANGE))
		return;
	fn(c, r->sidx, r->off, r->len, r->kind, (r->flags & PF_FIN) != 0);
	while (m != FP_NONE32) {
		struct fp_srange *sr = &e->sranges[m];
		uint32_t n = sr->next;
		if (c->state == ST_OPEN)
			fn(c, sr->sidx, sr->off, sr->len, sr->kind, sr->fin);
		sr->next = e->free_srange;
		e->free_srange = m;
		m = n;
	}
	r->more = FP_NONE32;
}

static void on_lost(struct fp_conn *c, uint64_t pn, struct fp_sent *r, uint64_t now)
{
	uint64_t ts = sent_time(c, r, now);

	(void)pn;
	if (r->flags & PF_INFLIGHT)
		c->inflight -= r->size;
	c->x->pkts_lost++;
	c->e->st.pkts_lost++;
	c->ctl |= r->ctl & CF_RESEND;
	if (r->ctl & CF_RESEND)
		fp_ready_add(c);
	sent_ranges(c, r, fp_on_lost_range);
	r->flags = 0;
	cc_on_loss(c, ts, now);
}

static void advance_ring_lo(struct fp_conn *c)
{
	while (c->ring_lo < c->tx_pn) {
		const struct fp_sent *r = &c->ring[c->ring_lo & c->ring_mask];
		if ((r->flags & PF_USED) && r->pn_lo == (uint32_t)c->ring_lo)
			break;
		c->ring_lo++;
	}
}

static void detect_lost(struct fp_conn *c, uint64_t now)
{
	uint64_t rtt = c->latest_rtt > c->srtt ? c->latest_rtt : c->srtt, delay, pn;
	uint64_t lt = 0;

	c->loss_time = 0;
	if (c->largest_acked == FP_PN_NONE)
		return;
	/* RFC 9002, 6.1.2 */
	delay = rtt * TIME_THRESH_NUM / TIME_THRESH_DEN;
	if (delay < K_GRANULARITY_NS)
		delay = K_GRANULARITY_NS;
	for (pn = c->ring_lo; pn < c->largest_acked && c->state == ST_OPEN; pn++) {
		struct fp_sent *r = &c->ring[pn & c->ring_mask];
		uint64_t ts;
		if (!(r->flags & PF_USED) || r->pn_lo != (uint32_t)pn)
			continue;
		ts = sent_time(c, r, now);
		if (pn + K_PACKET_THRESHOLD <= c->largest_acked || ts + delay <= now) {
			on_lost(c, pn, r, now);
			continue;
		}
		if (lt == 0 || ts + delay < lt)
			lt = ts + delay;
	}
	c->loss_time = lt;
	advance_ring_lo(c);
}

static int on_ack(struct fp_conn *c, const struct fp_ack *a, uint64_t now)
{
	struct fp_engine *e = c->e;
	uint32_t i;
	int newly_elicit = 0;
	uint64_t largest_sent = 0;

	e->st.acks_in++;
	/* RFC 9000, 13.1: acknowledging a packet never sent */
	if (a->largest >= c->tx_pn)
		return violation(c, FP_E_PROTOCOL_VIOLATION, FT_ACK, "ack of unsent packet", now);
	/* oldest first, so stream data is acknowledged in order (the prefix
	 * moves, no interval is kept) */
	for (i = a->n; i-- > 0;) {
		uint64_t hi = a->r[i].hi, lo = a->r[i].lo, pn;
		if (hi < c->ring_lo)
			continue;
		if (lo < c->ring_lo)
			lo = c->ring_lo;
		for (pn = lo; pn <= hi; pn++) {
			struct fp_sent *r = &c->ring[pn & c->ring_mask];
			if (!(r->flags & PF_USED) || r->pn_lo != (uint32_t)pn)
				continue;
			if (pn == a->largest && (r->flags & PF_ELICIT)) {
				newly_elicit = 1;
				largest_sent = sent_time(c, r, now);
			}
			if (r->flags & PF_INFLIGHT) {
				c->inflight -= r->size;
				cc_on_ack(c, sent_time(c, r, now), r->size);
			}
			if (c->tx_update && pn >= c->x->keys.tx_phase_first_pn)
				c->tx_update = 0; /* RFC 9001, 6.5: the update is confirmed */
			sent_ranges(c, r, on_acked_range);
			r->flags = 0;
			if (c->state != ST_OPEN)
				return -1;
		}
	}
	if (c->largest_acked == FP_PN_NONE || a->largest > c->largest_acked)
		c->largest_acked = a->largest;
	if (newly_elicit) {
		uint64_t delay = (a->delay << c->x->peer.ack_delay_exponent) * 1000;
		rtt_sample(c, now - largest_sent, delay);
	}
	c->pto_count = 0;
	c->cc_blocked = 0;
	advance_ring_lo(c);
	detect_lost(c, now);
	if (c->send_head != FP_NONE32)
		fp_ready_add(c);
	return 0;
}

/* ---- receiving --------------------------------------------------------- */

/* Note @pn in the received ranges (newest first). 0: new, 1: duplicate. */
static int rx_range_add(struct fp_cold *x, uint64_t pn)
{
	uint32_t i;

	for (i = 0; i < x->nrx; i++) {
		struct fp_range *r = &x->rx_ranges[i];
		if (pn > r->hi + 1)
			break;
		if (pn == r->hi + 1) {
			r->hi = pn;
			if (i > 0 && x->rx_ranges[i - 1].lo == pn + 1) {
				x->rx_ranges[i - 1].lo = r->lo;
				memmove(&x->rx_ranges[i], &x->rx_ranges[i + 1],
				        (x->nrx - i - 1) * sizeof(*r));
				x->nrx--;
			}
			return 0;
		}
		if (pn >= r->lo)
			return 1;
		if (pn + 1 == r->lo) {
			r->lo = pn;
			if (i + 1 < x->nrx && x->rx_ranges[i + 1].hi + 1 == pn) {
				r->lo = x->rx_ranges[i + 1].lo;
				memmove(&x->rx_ranges[i + 1], &x->rx_ranges[i + 2],
				        (x->nrx - i - 2) * sizeof(*r));
				x->nrx--;
			}
			return 0;
		}
	}
	if (i == RX_RANGES)
		return 1; /* older than every range kept: treated as a duplicate */
	if (x->nrx == RX_RANGES)
		x->nrx--;
	memmove(&x->rx_ranges[i + 1], &x->rx_ranges[i], (x->nrx - i) * sizeof(x->rx_ranges[0]));
	x->rx_ranges[i].lo = x->rx_ranges[i].hi = pn;
	x->nrx++;
	return 0;
}

static int rx_seen(const struct fp_cold *x, uint64_t pn)
{
	uint32_t i;

	for (i = 0; i < x->nrx; i++) {
		if (pn > x->rx_ranges[i].hi)
			return 0;
		if (pn >= x->rx_ranges[i].lo)
			return 1;
	}
	return x->nrx == RX_RANGES; /* below everything kept */
}

static int deliver(struct fp_conn *c, struct fp_stream *s, uint64_t off, const uint8_t *d,
                   size_t n, int fin)
{
	const struct fp_callbacks *cb = c->e->cb;

	if (cb && cb->stream_data && !(s->flags & SF_STOP_SENT) &&
	    cb->stream_data(c, c->user, s->id, off, d, n, fin) < 0) {
		fp_close_local(c, 0, FP_E_INTERNAL, 0, "stream_data callback failed",
		               c->rx_largest_t);
		return -1;
	}
	return c->state == ST_OPEN ? 0 : -1;
}

static uint8_t *rbuf_mem(struct fp_engine *e, uint32_t i)
{
	return e->rbufs + (size_t)i * e->rbuf_bytes;
}

/* Deliver what the reassembly buffer holds from rcv_off on. */
static int rbuf_drain(struct fp_conn *c, struct fp_stream *s)
{
	struct fp_engine *e = c->e;
	uint32_t R = e->cfg.reorder_bytes;
	uint8_t *bits, *data;
	uint64_t n = 0, any = 0, i;

	if (s->rbuf == FP_NONE32)
		return 0;
	bits = rbuf_mem(e, s->rbuf);
	data = bits + R / 8;
	while (n < R) {
		uint64_t p = (s->rcv_off + n) % R;
		if (!(bits[p / 8] & (1u << (p % 8))))
			break;
		bits[p / 8] &= (uint8_t)~(1u << (p % 8));
		n++;
	}
	if (n > 0) {
		uint64_t p = s->rcv_off % R, first = n < R - p ? n : R - p, off = s->rcv_off;
		int fin = s->rcv_final == off + n;
		s->rcv_off += n;
		if (deliver(c, s, off, data + p, first, fin && first == n) < 0)
			return -1;
		if (first < n && deliver(c, s, off + first, data, n - first, fin) < 0)
			return -1;
		if (fin)
			s->flags |= SF_RECV_DONE;
	}
	for (i = 0; i < R / 8 && !any; i++)
		any = bits[i];
	if (!any)
		rbuf_free(e, s);
	return 0;
}

static void extend_credit(struct fp_conn *c, struct fp_stream *s)
{
	struct fp_engine *e = c->e;
	struct fp_cold *x = c->x;
	uint64_t w = e->cfg.stream_window;

	/* RFC 9000, 4.2: more credit once half the window is used */
	if (s && !(s->flags & (SF_FIN_RECV | SF_RECV_DONE)) && s->rcv_max - s->rcv_off < w / 2) {
		s->rcv_max = s->rcv_off + w;
		s->flags |= SF_P_MSD;
		fp_stream_sendq(c, s);
	}
	if (x->local_max_data - x->recv_data < e->cfg.conn_window / 2) {
		x->local_max_data = x->recv_data + e->cfg.conn_window;
		c->ctl |= CF_MAX_DATA;
		fp_ready_add(c);
	}
}

/* The stream a frame of the peer names (opening it when the peer may),
 * NULL when it is gone (the frame is ignored). *@bad: the error code. */
static struct fp_stream *peer_stream(struct fp_conn *c, int64_t sid, int sending, uint64_t *bad)
{
	struct fp_cold *x = c->x;
	struct fp_stream *s = fp_stream_find(c, sid);
	int uni = (sid & 2) != 0;

	*bad = 0;
	if (is_local_sid(c, sid)) {
		int64_t next = uni ? x->next_local_uni : x->next_local_bidi;
		/* RFC 9000, 19.8: data on our unidirectional stream */
		if (uni && sending) {
			*bad = FP_E_STREAM_STATE;
			return NULL;
		}
		if (s == NULL && sid >= next)
			*bad = FP_E_STREAM_STATE;
		return s;
	}
	if (s != NULL)
		return s;
	{
		int64_t *next = uni ? &x->next_remote_uni : &x->next_remote_bidi;
		uint64_t limit = uni ? x->local_max_su : x->local_max_sb;
		if (sid < *next)
			return NULL; /* closed already */
		/* RFC 9000, 4.6 */
		if ((uint64_t)(sid >> 2) >= limit) {
			*bad = FP_E_STREAM_LIMIT;
			return NULL;
		}
		s = stream_new(c, sid);
		if (s == NULL) {
			*bad = FP_E_INTERNAL;
			return NULL;
		}
		*next = sid + 4;
		if (c->e->cb && c->e->cb->stream_open)
			c->e->cb->stream_open(c, c->user, sid);
		return s;
	}
}

static int on_stream(struct fp_conn *c, uint8_t ft, int64_t sid, uint64_t off, const uint8_t *d,
                     uint64_t len, int fin, uint64_t now)
{
	struct fp_engine *e = c->e;
	struct fp_cold *x = c->x;
	struct fp_stream *s;
	uint64_t bad, end = off + len;

	if (end > MAX_OFFSET)
		return violation(c, FP_E_FRAME_ENCODING, ft, "stream offset too large", now);
	s = peer_stream(c, sid, 1, &bad);
	if (bad)
		return violation(c, bad, ft, "stream frame", now);
	if (s == NULL)
		return 0;
	/* RFC 9000, 4.5: final size */
	if (s->rcv_final != UINT64_MAX && (end > s->rcv_final || (fin && end != s->rcv_final)))
		return violation(c, FP_E_FINAL_SIZE, ft, "final size changed", now);
	if (fin && end < s->rcv_hi)
		return violation(c, FP_E_FINAL_SIZE, ft, "final size below data", now);
	/* RFC 9000, 4.1 */
	if (end > s->rcv_max)
		return violation(c, FP_E_FLOW_CONTROL, ft, "stream flow control", now);
	if (end > s->rcv_hi) {
		x->recv_data += end - s->rcv_hi;
		s->rcv_hi = end;
		if (x->recv_data > x->local_max_data)
			return violation(c, FP_E_FLOW_CONTROL, ft, "connection flow control", now);
	}
	if (fin) {
		s->rcv_final = end;
		s->flags |= SF_FIN_RECV;
	}
	if (s->flags & SF_RECV_DONE)
		return 0;
	if (off <= s->rcv_off) {
		if (end > s->rcv_off || (fin && end == s->rcv_off)) {
			uint64_t skip = s->rcv_off - off, o = s->rcv_off;
			int done = s->rcv_final == end;
			s->rcv_off = end;
			if (deliver(c, s, o, d + skip, len - skip, done && fin) < 0)
				return -1;
			if (s->rbuf != FP_NONE32 && rbuf_drain(c, s) < 0)
				return -1;
			if (done && fin)
				s->flags |= SF_RECV_DONE;
		}
	} else {
		uint32_t R = e->cfg.reorder_bytes;
		uint8_t *bits, *data;
		uint64_t p;
		if (end - s->rcv_off > R) {
			/* beyond the bound: the packet is not acknowledged, so the
			 * peer sends it again */
			e->st.reorder_drops++;
			x->refuse_pkt = 1;
			return 0;
		}
		if (s->rbuf == FP_NONE32) {
			if (e->free_rbuf == FP_NONE32) {
				e->st.reorder_drops++;
				x->refuse_pkt = 1;
				return 0;
			}
			s->rbuf = e->free_rbuf;
			e->free_rbuf = *(uint32_t *)rbuf_mem(e, s->rbuf);
			memset(rbuf_mem(e, s->rbuf), 0, R / 8);
		}
		bits = rbuf_mem(e, s->rbuf);
		data = bits + R / 8;
		for (p = off; p < end; p++) {
			uint64_t q = p % R;
			data[q] = d[p - off];
			bits[q / 8] |= (uint8_t)(1u << (q % 8));
		}
	}
	if (s->flags & SF_RECV_DONE) {
		rbuf_free(e, s);
		fp_stream_maybe_free(c, s);
		extend_credit(c, NULL);
		return c->state == ST_OPEN ? 0 : -1;
	}
	extend_credit(c, s);
	return 0;
}

/* Our side of @s is reset: RESET_STREAM(@err) is queued, data dropped. */
static void reset_send(struct fp_conn *c, struct fp_stream *s, uint64_t err)
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

static int on_reset_stream(struct fp_conn *c, int64_t sid, uint64_t err, uint64_t final,
                           uint64_t now)
{
	struct fp_cold *x = c->x;
	struct fp_stream *s;
	uint64_t bad;

	s = peer_stream(c, sid, 1, &bad);
	if (bad)
		return violation(c, bad, FT_RESET_STREAM, "reset_stream", now);
	if (s == NULL)
		return 0;
	if ((s->rcv_final != UINT64_MAX && final != s->rcv_final) || final < s->rcv_hi)
		return violation(c, FP_E_FINAL_SIZE, FT_RESET_STREAM, "final size", now);
	if (final > s->rcv_max)
		return violation(c, FP_E_FLOW_CONTROL, FT_RESET_STREAM, "flow control", now);
	x->recv_data += final - s->rcv_hi;
	s->rcv_hi = final;
	if (x->recv_data > x->local_max_data)
		return violation(c, FP_E_FLOW_CONTROL, FT_RESET_STREAM, "flow control", now);
	s->rcv_final = final;
	if (s->flags & SF_RECV_DONE)
		return 0;
	s->flags |= SF_FIN_RECV | SF_RECV_DONE;
	s->flags &= (uint16_t)~(SF_P_STOP | SF_P_MSD);
	rbuf_free(c->e, s);
	if (c->e->cb && c->e->cb->stream_reset)
		c->e->cb->stream_reset(c, c->user, sid, err, final);
	if (c->state != ST_OPEN)
		return -1;
	if ((s = fp_stream_find(c, sid)) != NULL)
		fp_stream_maybe_free(c, s);
	extend_credit(c, NULL);
	return 0;
}

static int on_stop_sending(struct fp_conn *c, int64_t sid, uint64_t err, uint64_t now)
{
	struct fp_stream *s;
	uint64_t bad;

	/* RFC 9000, 19.5: on a receive-only stream it is a STREAM_STATE_ERROR */
	if (!is_local_sid(c, sid) && (sid & 2))
		return violation(c, FP_E_STREAM_STATE, FT_STOP_SENDING, "stop_sending", now);
	s = peer_stream(c, sid, 0, &bad);
	if (bad)
		return violation(c, bad, FT_STOP_SENDING, "stop_sending", now);
	if (s == NULL || (s->flags & SF_RESET_SENT))
		return 0;
	reset_send(c, s, err);
	if (c->e->cb && c->e->cb->stop_sending)
		c->e->cb->stop_sending(c, c->user, sid, err);
	return c->state == ST_OPEN ? 0 : -1;
}

static int on_max_stream_data(struct fp_conn *c, int64_t sid, uint64_t max, uint64_t now)
{
	struct fp_stream *s;
	uint64_t bad;

	/* RFC 9000, 19.10: on a receive-only stream: STREAM_STATE_ERROR */
	if (!is_local_sid(c, sid) && (sid & 2))
		return violation(c, FP_E_STREAM_STATE, FT_MAX_STREAM_DATA, "max_stream_data", now);
	s = peer_stream(c, sid, 0, &bad);
	if (bad)
		return violation(c, bad, FT_MAX_STREAM_DATA, "max_stream_data", now);
	if (s == NULL || max <= s->snd_max)
		return 0;
	{
		int was = s->snd_off >= s->snd_max && s->snd_off < s->snd_end;
		s->snd_max = max;
		s->flags &= ~(uint32_t)SF_SDB_DONE;
		if (fp_stream_has_send(c, s))
			fp_stream_sendq(c, s);
		if (was && c->e->cb && c->e->cb->writable)
			c->e->cb->writable(c, c->user, sid);
	}
	return c->state == ST_OPEN ? 0 : -1;
}

static void path_new(struct fp_conn *c, const struct fp_addr *remote, const struct fp_addr *local,
                     size_t len, uint64_t now)
{
	struct fp_cold *x = c->x;
	int port_only = 0;

	(void)now;
	/* RFC 9000, 9.3: the peer moved; validate the new address, and within
	 * 3x of what it sent until then (8.1) */
	if (remote->len == x->remote.len && remote->len >= 4) {
		/* sockaddr_in / _in6: family 2 bytes, port 2 bytes, then the
		 * address: only the port differs on a NAT rebinding */
		port_only = memcmp(remote->b + 4, x->remote.b + 4, remote->len - 4) == 0;
	}
	x->remote = *remote;
	if (local)
		x->local = *local;
	c->validated = 0;
	x->path_recv = len;
	x->path_sent = 0;
	if (fp_random(x->challenge, sizeof(x->challenge)) < 0)
		memset(x->challenge, 0x5a, sizeof(x->challenge));
	x->challenge_out = 1;
	c->ctl |= CF_CHALLENGE;
	if (!port_only) {
		/* RFC 9000, 9.4: a new path starts from the initial window */
		c->cwnd = INIT_CWND_PKTS * (uint64_t)c->max_pkt;
		c->ssthresh = UINT64_MAX;
		c->srtt = K_INITIAL_RTT_NS;
		c->rttvar = K_INITIAL_RTT_NS / 2;
	}
	/* RFC 9000, 9.5: another of the peer's CIDs for the new path */
	if (x->npeer_cids > 0) {
		if (x->nretire < FP_MAX_PEER_CIDS) {
			x->retire_pending[x->nretire++] = x->dcid.seq;
			c->ctl |= CF_RETIRE_CID;
		}
		if (x->dcid.has_token)
			fp_tab_del(c->e, c->e->tok_tab, x->dcid.token, FP_TOKEN_LEN);
		x->dcid = x->peer_cids[0];
		memmove(&x->peer_cids[0], &x->peer_cids[1],
		        (x->npeer_cids - 1) * sizeof(x->peer_cids[0]));
		x->npeer_cids--;
		c->dcid_len = x->dcid.len;
	}
	fp_ready_add(c);
	if (c->e->cb && c->e->cb->path_new)
		c->e->cb->path_new(c, c->user, remote, 0);
}

static int on_new_cid(struct fp_conn *c, const uint8_t **p, const uint8_t *end, uint64_t now)
{
	struct fp_cold *x = c->x;
	uint64_t seq, rpt;
	struct fp_cid n;
	unsigned i;

	if (fp_varint_get(p, end, &seq) < 0 || fp_varint_get(p, end, &rpt) < 0 || *p >= end)
		return violation(c, FP_E_FRAME_ENCODING, FT_NEW_CONNECTION_ID, "new_cid", now);
	memset(&n, 0, sizeof(n));
	n.seq = seq;
	n.len = *(*p)++;
	/* RFC 9000, 19.15 */
	if (n.len < 1 || n.len > FP_CID_MAX || rpt > seq ||
	    (size_t)(end - *p) < (size_t)n.len + FP_TOKEN_LEN)
		return violation(c, FP_E_FRAME_ENCODING, FT_NEW_CONNECTION_ID, "new_cid", now);
	memcpy(n.id, *p, n.len);
	*p += n.len;
	memcpy(n.token, *p, FP_TOKEN_LEN);
	*p += FP_TOKEN_LEN;
	n.has_token = 1;
	if (seq < x->peer_retire_prior_to) {
		/* RFC 9000, 19.15: retire it at once */
		if (x->nretire < FP_MAX_PEER_CIDS) {
			x->retire_pending[x->nretire++] = seq;
			c->ctl |= CF_RETIRE_CID;
			fp_ready_add(c);
		}
		return 0;
	}
	if (seq == x->dcid.seq)
		return 0;
	for (i = 0; i < x->npeer_cids; i++)
		if (x->peer_cids[i].seq == seq)
			return 0; /* a repeat */
	if (rpt > x->peer_retire_prior_to) {
		x->peer_retire_prior_to = rpt;
		for (i = 0; i < x->npeer_cids;) {
			if (x->peer_cids[i].seq < rpt) {
				if (x->nretire < FP_MAX_PEER_CIDS)
					x->retire_pending[x->nretire++] = x->peer_cids[i].seq;
				if (x->peer_cids[i].has_token)
					fp_tab_del(c->e, c->e->tok_tab, x->peer_cids[i].token,
					           FP_TOKEN_LEN);
				x->peer_cids[i] = x->peer_cids[--x->npeer_cids];
				continue;
			}
			i++;
		}
		c->ctl |= CF_RETIRE_CID;
		fp_ready_add(c);
	}
	/* RFC 9000, 5.1.1: more than we allow is a CONNECTION_ID_LIMIT_ERROR */
	if ((uint64_t)x->npeer_cids + 1 >= x->local_cid_limit + (x->dcid.seq < rpt ? 1 : 0) &&
	    x->npeer_cids + 1u > x->local_cid_limit)
		return violation(c, FP_E_CONNECTION_ID_LIMIT, FT_NEW_CONNECTION_ID, "cid limit", now);
	if (x->npeer_cids < FP_MAX_PEER_CIDS) {
		x->peer_cids[x->npeer_cids++] = n;
		fp_tab_add(c->e, c->e->tok_tab, n.token, FP_TOKEN_LEN, conn_idx(c));
	}
	if (x->dcid.seq < rpt && x->npeer_cids > 0) {
		/* the active one is retired: move on */
		if (x->nretire < FP_MAX_PEER_CIDS)
			x->retire_pending[x->nretire++] = x->dcid.seq;
		if (x->dcid.has_token)
			fp_tab_del(c->e, c->e->tok_tab, x->dcid.token, FP_TOKEN_LEN);
		x->dcid = x->peer_cids[0];
		x->peer_cids[0] = x->peer_cids[--x->npeer_cids];
		c->dcid_len = x->dcid.len;
		c->ctl |= CF_RETIRE_CID;
		fp_ready_add(c);
	}
	return 0;
}

static int on_retire_cid(struct fp_conn *c, uint64_t seq, const uint8_t *dcid, uint64_t now)
{
	struct fp_engine *e = c->e;
	struct fp_cold *x = c->x;
	unsigned i;

	/* RFC 9000, 19.16 */
	if (seq >= x->next_scid_seq)
		return violation(c, FP_E_PROTOCOL_VIOLATION, FT_RETIRE_CONNECTION_ID,
		                 "retire of unissued cid", now);
	for (i = 0; i < x->nscids; i++) {
		struct fp_cid r = x->scids[i];
		if (r.seq != seq)
			continue;
		if (r.len == c->scid_len && memcmp(r.id, dcid, r.len) == 0)
			return violation(c, FP_E_PROTOCOL_VIOLATION, FT_RETIRE_CONNECTION_ID,
			                 "retire of the cid in use", now);
		fp_tab_del(e, e->cid_tab, r.id, r.len);
		fp_len_ref(e, r.len, -1);
		x->scids[i] = x->scids[--x->nscids];
		x->scid_pending[i] = x->scid_pending[x->nscids];
		if (e->cb && e->cb->scid_retired)
			e->cb->scid_retired(c, c->user, &r);
		break;
	}
	/* issue a replacement */
	if (e->cb && e->cb->new_scid && x->nscids < FP_MAX_SCIDS) {
		struct fp_cid n;
		memset(&n, 0, sizeof(n));
		if (e->cb->new_scid(c, c->user, &n) == 0 && n.len > 0 && n.len <= FP_CID_MAX &&
		    fp_tab_add(e, e->cid_tab, n.id, n.len, conn_idx(c)) == 0) {
			n.seq = x->next_scid_seq++;
			n.has_token = 1;
			fp_len_ref(e, n.len, 1);
			x->scid_pending[x->nscids] = 1;
			x->scids[x->nscids++] = n;
			c->ctl |= CF_NEW_CID;
			fp_ready_add(c);
		}
	}
	return 0;
}

/* Frames of one packet. Returns 0, or -1 when the connection closed.
 * *@elicit: an ack-eliciting frame was seen; *@probing_only: only probing
 * frames (RFC 9000, 9.1). */
static int frames(struct fp_conn *c, const uint8_t *p, const uint8_t *end, const uint8_t *dcid,
                  int *elicit, int *probing_only, uint64_t now)
{
	struct fp_engine *e = c->e;
	struct fp_cold *x = c->x;

	*elicit = 0;
	*probing_only = 1;
	if (p == end)
		return violation(c, FP_E_PROTOCOL_VIOLATION, 0, "packet without frames", now);
	while (p < end) {
		uint64_t ft, a, b, d2;
		int64_t sid;

		if (*p == FT_PADDING) {
			p++;
			continue;
		}
		if (fp_varint_get(&p, end, &ft) < 0)
			return violation(c, FP_E_FRAME_ENCODING, 0, "frame type", now);
		if (ft != FT_ACK && ft != FT_ACK_ECN && ft != FT_CLOSE_TRANSPORT && ft != FT_CLOSE_APP)
			*elicit = 1;
		if (ft != FT_PATH_CHALLENGE && ft != FT_PATH_RESPONSE && ft != FT_NEW_CONNECTION_ID)
			*probing_only = 0;
		switch (ft) {
		case FT_PING:
		case FT_HANDSHAKE_DONE:
			/* RFC 9000, 19.20: a server receiving it: PROTOCOL_VIOLATION */
			if (ft == FT_HANDSHAKE_DONE && c->is_server)
				return violation(c, FP_E_PROTOCOL_VIOLATION, ft, "handshake_done", now);
			break;
		case FT_ACK:
		case FT_ACK_ECN: {
			struct fp_ack ack;
			if (fp_ack_parse(&p, end, ft == FT_ACK_ECN, &ack) < 0)
				return violation(c, FP_E_FRAME_ENCODING, ft, "ack frame", now);
			if (on_ack(c, &ack, now) < 0)
				return -1;
			break;
		}
		case FT_RESET_STREAM:
			if (fp_varint_get(&p, end, &a) < 0 || fp_varint_get(&p, end, &b) < 0 ||
			    fp_varint_get(&p, end, &d2) < 0)
				return violation(c, FP_E_FRAME_ENCODING, ft, "reset_stream", now);
			if (on_reset_stream(c, (int64_t)a, b, d2, now) < 0)
				return -1;
			break;
		case FT_STOP_SENDING:
			if (fp_varint_get(&p, end, &a) < 0 || fp_varint_get(&p, end, &b) < 0)
				return violation(c, FP_E_FRAME_ENCODING, ft, "stop_sending", now);
			if (on_stop_sending(c, (int64_t)a, b, now) < 0)
				return -1;
			break;
		case FT_CRYPTO:
			/* post-handshake TLS messages (a NewSessionTicket to a
			 * client): none are expected from a client; skipped */
			if (fp_varint_get(&p, end, &a) < 0 || fp_varint_get(&p, end, &b) < 0 ||
			    (uint64_t)(end - p) < b)
				return violation(c, FP_E_FRAME_ENCODING, ft, "crypto", now);
			p += b;
			break;
		case FT_NEW_TOKEN:
			/* RFC 9000, 19.7: a server receiving it: PROTOCOL_VIOLATION */
			if (c->is_server)
				return violation(c, FP_E_PROTOCOL_VIOLATION, ft, "new_token", now);
			if (fp_varint_get(&p, end, &a) < 0 || (uint64_t)(end - p) < a || a == 0)
				return violation(c, FP_E_FRAME_ENCODING, ft, "new_token", now);
			p += a;
			break;
		case FT_MAX_DATA:
			if (fp_varint_get(&p, end, &a) < 0)
				return violation(c, FP_E_FRAME_ENCODING, ft, "max_data", now);
			if (a > c->peer_max_data) {
				int was = c->sent_data >= c->peer_max_data;
				uint32_t i;
				c->peer_max_data = a;
				for (i = x->streams; i != FP_NONE32; i = e->streams[i].next)
					if (fp_stream_has_send(c, &e->streams[i]))
						fp_stream_sendq(c, &e->streams[i]);
				if (was && e->cb && e->cb->writable)
					e->cb->writable(c, c->user, -1);
				if (c->state != ST_OPEN)
					return -1;
			}
			break;
		case FT_MAX_STREAM_DATA:
			if (fp_varint_get(&p, end, &a) < 0 || fp_varint_get(&p, end, &b) < 0)
				return violation(c, FP_E_FRAME_ENCODING, ft, "max_stream_data", now);
			if (on_max_stream_data(c, (int64_t)a, b, now) < 0)
				return -1;
			break;
		case FT_MAX_STREAMS_BIDI:
		case FT_MAX_STREAMS_UNI: {
			uint64_t *m = ft == FT_MAX_STREAMS_BIDI ? &x->peer_max_sb : &x->peer_max_su;
			if (fp_varint_get(&p, end, &a) < 0 || a > (1ull << 60))
				return violation(c, FP_E_FRAME_ENCODING, ft, "max_streams", now);
			if (a > *m) {
				*m = a;
				if (e->cb && e->cb->writable)
					e->cb->writable(c, c->user, -2);
				if (c->state != ST_OPEN)
					return -1;
			}
			break;
		}
		case FT_DATA_BLOCKED:
		case FT_STREAMS_BLOCKED_BIDI:
		case FT_STREAMS_BLOCKED_UNI:
			if (fp_varint_get(&p, end, &a) < 0 ||
			    (ft != FT_DATA_BLOCKED && a > (1ull << 60)))
				return violation(c, FP_E_FRAME_ENCODING, ft, "blocked", now);
			break;
		case FT_STREAM_DATA_BLOCKED:
			if (fp_varint_get(&p, end, &a) < 0 || fp_varint_get(&p, end, &b) < 0)
				return violation(c, FP_E_FRAME_ENCODING, ft, "stream_data_blocked", now);
			/* RFC 9000, 19.13: on a send-only stream: STREAM_STATE_ERROR */
			if (is_local_sid(c, (int64_t)a) && (a & 2))
				return violation(c, FP_E_STREAM_STATE, ft, "stream_data_blocked", now);
			break;
		case FT_NEW_CONNECTION_ID:
			if (on_new_cid(c, &p, end, now) < 0)
				return -1;
			break;
		case FT_RETIRE_CONNECTION_ID:
			if (fp_varint_get(&p, end, &a) < 0)
				return violation(c, FP_E_FRAME_ENCODING, ft, "retire_cid", now);
			if (on_retire_cid(c, a, dcid, now) < 0)
				return -1;
			break;
		case FT_PATH_CHALLENGE:
			if (end - p < 8)
				return violation(c, FP_E_FRAME_ENCODING, ft, "path_challenge", now);
			memcpy(x->response, p, 8);
			p += 8;
			c->ctl |= CF_RESPONSE;
			fp_ready_add(c);
			break;
		case FT_PATH_RESPONSE:
			if (end - p < 8)
				return violation(c, FP_E_FRAME_ENCODING, ft, "path_response", now);
			if (x->challenge_out && memcmp(p, x->challenge, 8) == 0) {
				x->challenge_out = 0;
				c->validated = 1;
				c->ctl &= (uint16_t)~CF_CHALLENGE;
				e->st.paths_validated++;
				if (e->cb && e->cb->path_new)
					e->cb->path_new(c, c->user, &x->remote, 1);
				if (c->state != ST_OPEN)
					return -1;
			}
			p += 8;
			break;
		case FT_CLOSE_TRANSPORT:
		case FT_CLOSE_APP: {
			uint64_t code, fty = 0, rl;
			if (fp_varint_get(&p, end, &code) < 0 ||
			    (ft == FT_CLOSE_TRANSPORT && fp_varint_get(&p, end, &fty) < 0) ||
			    fp_varint_get(&p, end, &rl) < 0 || (uint64_t)(end - p) < rl)
				return violation(c, FP_E_FRAME_ENCODING, ft, "connection_close", now);
			/* RFC 9000, 10.2.2: draining */
			c->state = ST_DRAINING;
			c->ctl = 0;
			x->idle_at = now + 3 * fp_pto(c);
			fp_ready_del(c);
			notify_closed(c, ft == FT_CLOSE_APP ? FP_CLOSE_APPLICATION : FP_CLOSE_TRANSPORT,
			              0, code, fty, "closed by the peer", p, rl);
			fp_conn_timer(c);
			return -1;
		}
		case FT_DATAGRAM:
		case FT_DATAGRAM + 1:
			/* RFC 9221: dropped (the relay reads none) */
			if (ft & 1) {
				if (fp_varint_get(&p, end, &a) < 0 || (uint64_t)(end - p) < a)
					return violation(c, FP_E_FRAME_ENCODING, ft, "datagram", now);
				p += a;
			} else {
				p = end;
			}
			break;
		default:
			if (ft >= FT_STREAM && ft <= FT_STREAM + 7) {
				uint64_t off = 0, len;
				if (fp_varint_get(&p, end, &a) < 0 ||
				    ((ft & 0x04) && fp_varint_get(&p, end, &off) < 0))
					return violation(c, FP_E_FRAME_ENCODING, ft, "stream", now);
				if (ft & 0x02) {
					if (fp_varint_get(&p, end, &len) < 0 ||
					    (uint64_t)(end - p) < len)
						return violation(c, FP_E_FRAME_ENCODING, ft, "stream",
						                 now);
				} else {
					len = (uint64_t)(end - p);
				}
				sid = (int64_t)a;
				if (on_stream(c, (uint8_t)ft, sid, off, p, len, ft & 0x01, now) < 0)
					return -1;
				p += len;
				break;
			}
			/* RFC 9000, 12.4: an unknown frame type */
			return violation(c, FP_E_FRAME_ENCODING, ft, "unknown frame", now);
		}
		if (c->state != ST_OPEN)
			return -1;
	}
	return 0;
}

static int is_reset(const struct fp_conn *c, const uint8_t *data, size_t len)
{
	const struct fp_cold *x = c->x;
	const uint8_t *t = data + len - FP_TOKEN_LEN;
	unsigned i;

	/* RFC 9000, 10.3.1 */
	if (len < 21)
		return 0;
	if (x->dcid.has_token && memcmp(t, x->dcid.token, FP_TOKEN_LEN) == 0)
		return 1;
	for (i = 0; i < x->npeer_cids; i++)
		if (x->peer_cids[i].has_token && memcmp(t, x->peer_cids[i].token, FP_TOKEN_LEN) == 0)
			return 1;
	return 0;
}

static int same_addr(const struct fp_addr *a, const struct fp_addr *b)
{
	return a->len == b->len && memcmp(a->b, b->b, a->len) == 0;
}

static void conn_leave(struct fp_conn *c)
{
	if (--c->x->busy == 0 && c->x->free_pending) {
		c->x->free_pending = 0;
		fp_conn_free(c);
	}
}

int fp_conn_recv(struct fp_conn *c, const uint8_t *data, size_t len, const struct fp_addr *local,
                 const struct fp_addr *remote, uint64_t now)
{
	struct fp_engine *e;
	struct fp_cold *x;
	struct fp_keys *k;
	struct fp_rxkey *rk;
	uint8_t mask[16], *hdr, *pl, b0;
	size_t pn_off, hlen, i;
	unsigned pnlen;
	uint64_t trunc = 0, pn;
	int phase, which, elicit, probing, rv = 0;

	if (c == NULL || data == NULL || c->e == NULL)
		return MOQ_ERR_INVAL;
	e = c->e;
	x = c->x;
	k = &x->keys;
	e->st.pkts_in++;
	e->st.bytes_in += len;
	if (c->state == ST_DEAD)
		return MOQ_ERR_CLOSED;
	pn_off = 1 + (size_t)c->scid_len;
	/* RFC 9000, 17.3.1 / RFC 9287: the fixed bit, unless we allowed grease */
	if (len < pn_off + 4 + FP_SAMPLE_LEN || (data[0] & HDR_LONG) ||
	    (!(data[0] & HDR_FIXED) && !x->grease) ||
	    len > sizeof(e->scratch) - 64) {
		e->st.pkts_dropped++;
		return 0;
	}
	if (c->state == ST_DRAINING) {
		e->st.pkts_dropped++;
		return 0;
	}
	x->busy++;
	x->now = now;
	/* RFC 9001, 5.4.1: remove header protection */
	if (fp_hp_mask(k->rx_hp, data + pn_off + 4, mask) < 0)
		goto drop;
	b0 = data[0] ^ (mask[0] & 0x1f);
	pnlen = (b0 & HDR_PNLEN) + 1u;
	hdr = e->scratch;
	hdr[0] = b0;
	memcpy(hdr + 1, data + 1, c->scid_len);
	for (i = 0; i < pnlen; i++) {
		hdr[pn_off + i] = data[pn_off + i] ^ mask[1 + i];
		trunc = (trunc << 8) | hdr[pn_off + i];
	}
	hlen = pn_off + pnlen;
	pn = fp_pn_decode(c->rx_largest, trunc, pnlen);
	if (rx_seen(x, pn))
		goto drop;
	/* RFC 9001, 6.3: which key generation */
	phase = (b0 & HDR_KEY_PHASE) ? 1 : 0;
	if (phase == c->rx_kp) {
		which = 0;
	} else if (k->have_prev && pn < k->rx_phase_first_pn && now < k->prev_until) {
		which = 2;
	} else {
		which = 1;
	}
	rk = &k->rx[(k->rxc + which) % 3];
	pl = hdr + ((hlen + 15) & ~(size_t)15);
	if (fp_open(rk->aead, rk->iv, pn, hdr, hlen, data + hlen, len - hlen, pl) < 0) {
		if (is_reset(c, data, len)) {
			fp_conn_stateless_reset(c, now);
			conn_leave(c);
			return MOQ_ERR_CLOSED;
		}
		goto drop;
	}
	/* RFC 9000, 17.3.1: reserved bits must be 0 after protection is removed */
	if (b0 & HDR_RESERVED) {
		violation(c, FP_E_PROTOCOL_VIOLATION, 0, "reserved bits", now);
		goto closed;
	}
	if (c->state == ST_CLOSING) {
		/* RFC 9000, 10.2.1: answer with the CONNECTION_CLOSE again */
		if (x->close_budget > 0) {
			x->close_budget--;
			c->ctl |= CF_CLOSE;
			fp_ready_add(c);
		}
		conn_leave(c);
		return 0;
	}
	if (which == 1) {
		/* RFC 9001, 6.2: the peer updated its keys; so do we */
		if (fp_keys_rotate_rx(k, pn, now + 3 * fp_pto(c)) < 0) {
			violation(c, FP_E_INTERNAL, 0, "key update", now);
			goto closed;
		}
		c->rx_kp ^= 1;
		e->st.key_updates++;
		x->key_updates++;
		if (c->kp != c->rx_kp) {
			if (fp_keys_update_tx(k, c->tx_pn) < 0) {
				violation(c, FP_E_INTERNAL, 0, "key update", now);
				goto closed;
			}
			c->kp = c->rx_kp;
			c->tx_update = 1;
		}
	}
	x->pkts_recv++;
	x->bytes_recv += len;
	if (remote && !same_addr(remote, &x->remote))
		x->path_recv = 0; /* counted below if it becomes the path */
	else if (!c->validated)
		x->path_recv += len;
	{
		uint64_t prev_largest = c->rx_largest;
		size_t plen = len - hlen - FP_TAG_LEN;

		x->refuse_pkt = 0;
		/* RFC 9000, 10.1: a packet processed restarts the idle timer */
		x->idle_at = x->idle_ns ? now + (x->idle_ns > 3 * fp_pto(c) ? x->idle_ns
		                                                               : 3 * fp_pto(c))
		                        : UINT64_MAX;
		x->elicit_since_rx = 0;
		if (frames(c, pl, pl + plen, data + 1, &elicit, &probing, now) < 0)
			goto closed;
		if (x->refuse_pkt) {
			/* stream data of it could not be kept: as if it was lost */
			e->st.pkts_dropped++;
			fp_conn_timer(c);
			conn_leave(c);
			return 0;
		}
		rx_range_add(x, pn);
		if (c->rx_largest == FP_PN_NONE || pn > c->rx_largest) {
			c->rx_largest = pn;
			c->rx_largest_t = now;
		}
		/* RFC 9000, 9.3: the newest non-probing packet from a new address
		 * moves the connection */
		if (remote && !same_addr(remote, &x->remote) && !probing &&
		    (prev_largest == FP_PN_NONE || pn > prev_largest))
			path_new(c, remote, local, len, now);
		if (elicit) {
			c->rx_unacked++;
			/* RFC 9000, 13.2.1 / 13.2.2: out of order or every 2nd:
			 * at once; else within max_ack_delay */
			if (c->rx_unacked >= ACK_EVERY ||
			    (prev_largest != FP_PN_NONE && pn != prev_largest + 1)) {
				c->ctl |= CF_ACK;
				fp_ready_add(c);
			} else if (c->ack_at == 0) {
				c->ack_at = now + x->max_ack_delay_ns;
			}
		}
	}
	fp_conn_timer(c);
	conn_leave(c);
	return rv;
drop:
	e->st.pkts_dropped++;
	conn_leave(c);
	return 0;
closed:
	conn_leave(c);
	return MOQ_ERR_CLOSED;
}

/* ---- timers ------------------------------------------------------------ */

void fp_conn_timer(struct fp_conn *c)
{
	struct fp_engine *e = c->e;
	struct fp_cold *x = c->x;
	uint64_t t = x->idle_at;

	if (c->state == ST_DEAD) {
		fp_wheel_cancel(&e->wheel, &c->tn);
		return;
	}
	if (c->state == ST_OPEN) {
		if (c->ack_at && c->ack_at < t)
			t = c->ack_at;
		if (c->loss_time) {
			if (c->loss_time < t)
				t = c->loss_time;
		} else if (c->inflight > 0) {
			uint64_t pto = c->last_elicit_t + (fp_pto(c) << (c->pto_count < 16 ? c->pto_count : 16));
			if (pto < t)
				t = pto;
		}
		/* the pacer's time when it alone holds data back */
		if (c->send_head != FP_NONE32 && c->pace_t > x->now && c->inflight < c->cwnd &&
		    !(c->ring[c->tx_pn & c->ring_mask].flags & PF_USED) && c->pace_t < t)
			t = c->pace_t;
		if (e->cfg.keep_alive_ns && x->last_tx_t + e->cfg.keep_alive_ns < t)
			t = x->last_tx_t + e->cfg.keep_alive_ns;
	}
	if (t == UINT64_MAX)
		fp_wheel_cancel(&e->wheel, &c->tn);
	else
		fp_wheel_arm(&e->wheel, &c->tn, t);
}

static void on_pto(struct fp_conn *c, uint64_t now)
{
	struct fp_engine *e = c->e;
	uint64_t pn;

	/* RFC 9002, 6.2.4: one or two probes; they carry the oldest data in
	 * flight again when there is some, else a PING */
	c->pto_count++;
	e->st.ptos++;
	c->probes = 2;
	for (pn = c->ring_lo; pn < c->tx_pn; pn++) {
		struct fp_sent *r = &c->ring[pn & c->ring_mask];
		uint32_t m;
		if (!(r->flags & PF_USED) || r->pn_lo != (uint32_t)pn || !(r->flags & PF_ELICIT))
			continue;
		if (r->flags & PF_RANGE) {
			struct fp_stream *s = &e->streams[r->sidx];
			if (s->id >= 0 && r->kind == RK_DATA && !(s->flags & SF_RESET_SENT))
				fp_ivl_add(e, &s->lost_ivl, r->off, r->off + r->len);
			if (s->id >= 0 && fp_stream_has_send(c, s))
				fp_stream_sendq(c, s);
			for (m = r->more; m != FP_NONE32; m = e->sranges[m].next) {
				struct fp_srange *sr = &e->sranges[m];
				struct fp_stream *s2 = &e->streams[sr->sidx];
				if (s2->id >= 0 && sr->kind == RK_DATA && !(s2->flags & SF_RESET_SENT))
					fp_ivl_add(e, &s2->lost_ivl, sr->off, sr->off + sr->len);
				if (s2->id >= 0 && fp_stream_has_send(c, s2))
					fp_stream_sendq(c, s2);
			}
		}
		c->ctl |= r->ctl & CF_RESEND;
		break;
	}
	c->ctl |= CF_PING;
	(void)now;
	fp_ready_add(c);
}

void fp_conn_fire(struct fp_conn *c, uint64_t now)
{
	struct fp_engine *e = c->e;
	struct fp_cold *x = c->x;
	int did = 0;

	if (c->state == ST_DEAD)
		return;
	x->busy++;
	x->now = now;
	if (now >= x->idle_at) {
		if (c->state == ST_OPEN) {
			e->st.idle_timeouts++;
			notify_closed(c, FP_CLOSE_IDLE, 1, 0, 0, "idle timeout", NULL, 0);
		}
		c->state = ST_DEAD;
		fp_conn_free(c);
		conn_leave(c);
		return;
	}
	if (c->state != ST_OPEN) {
		fp_conn_timer(c);
		conn_leave(c);
		return;
	}
	if (c->ack_at && now >= c->ack_at) {
		c->ctl |= CF_ACK;
		c->ack_at = 0;
		fp_ready_add(c);
		did = 1;
	}
	if (c->loss_time && now >= c->loss_time) {
		detect_lost(c, now);
		fp_ready_add(c);
		did = 1;
	} else if (!c->loss_time && c->inflight > 0 &&
	           now >= c->last_elicit_t + (fp_pto(c) << (c->pto_count < 16 ? c->pto_count : 16))) {
		on_pto(c, now);
		did = 1;
	}
	if (fp_conn_has_send(c, now)) {
		fp_ready_add(c);
		did = 1;
	}
	if (e->cfg.keep_alive_ns && now >= x->last_tx_t + e->cfg.keep_alive_ns) {
		c->ctl |= CF_PING;
		x->last_tx_t = now; /* once per period even if the send waits */
		fp_ready_add(c);
		did = 1;
	}
	if (!did)
		e->st.timers_idle++;
	if (c->state == ST_OPEN)
		fp_conn_timer(c);
	conn_leave(c);
}

/* ---- the rest of the API ---------------------------------------------- */

void *fp_conn_user(const struct fp_conn *c)
{
	return c->user;
}

void fp_conn_set_user(struct fp_conn *c, void *user)
{
	c->user = user;
}

struct fp_engine *fp_conn_engine(const struct fp_conn *c)
{
	return c->e;
}

void fp_conn_get_info(const struct fp_conn *c, struct fp_conn_info *o)
{
	const struct fp_cold *x = c->x;

	memset(o, 0, sizeof(*o));
	o->smoothed_rtt_ns = c->srtt;
	o->rttvar_ns = c->rttvar;
	o->min_rtt_ns = c->min_rtt;
	o->latest_rtt_ns = c->latest_rtt;
	o->cwnd = c->cwnd;
	o->ssthresh = c->ssthresh;
	o->bytes_in_flight = c->inflight;
	o->tx_pn = c->tx_pn;
	o->largest_acked = c->largest_acked;
	o->rx_largest_pn = c->rx_largest;
	o->pkts_sent = x->pkts_sent;
	o->pkts_recv = x->pkts_recv;
	o->pkts_lost = x->pkts_lost;
	o->bytes_sent = x->bytes_sent;
	o->bytes_recv = x->bytes_recv;
	o->key_updates = x->key_updates;
	o->key_phase = c->kp;
	o->path_validated = c->validated;
	o->closing = c->state != ST_OPEN;
	o->sent_data = c->sent_data;
	o->peer_max_data = c->peer_max_data;
	o->recv_data = x->recv_data;
	o->local_max_data = x->local_max_data;
	o->remote = x->remote;
}

int fp_conn_update_key(struct fp_conn *c)
{
	if (c == NULL || c->state != ST_OPEN || c->tx_update || c->kp != c->rx_kp)
		return MOQ_ERR_STATE;
	/* RFC 9001, 6.1 */
	if (fp_keys_update_tx(&c->x->keys, c->tx_pn) < 0)
		return MOQ_ERR_CRYPTO;
	c->kp ^= 1;
	c->tx_update = 1;
	c->x->key_updates++;
	c->e->st.key_updates++;
	return 0;
}

int fp_conn_ping(struct fp_conn *c)
{
	if (c == NULL || c->state != ST_OPEN)
		return MOQ_ERR_STATE;
	c->ctl |= CF_PING;
	fp_ready_add(c);
	return 0;
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
	s = stream_new(c, *next);
	if (s == NULL)
		return MOQ_ERR_LIMIT;
	*sid = *next;
	*next += 4;
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
			struct fp_chunk *t = s->chunks_tail != FP_NONE32 ? &e->chunks[s->chunks_tail]
			                                                 : NULL;
			if (t && t->base + t->len == b && (uint64_t)t->len + l < UINT32_MAX / 2) {
				t->len += l; /* contiguous with the last piece */
			} else {
				uint32_t k = e->free_chunk;
				e->free_chunk = e->chunks[k].next;
				e->chunks[k].base = b;
				e->chunks[k].len = l;
				e->chunks[k].off = s->snd_end;
				e->chunks[k].next = FP_NONE32;
				if (t)
					t->next = k;
				else
					s->chunks = k;
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
	reset_send(c, s, app_err);
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

long fp_stateless_reset_build(uint8_t *out, size_t len, const uint8_t token[FP_TOKEN_LEN],
                              const uint8_t *rand)
{
	/* RFC 9000, 10.3: 0b01 then unpredictable bits, the token last */
	if (out == NULL || token == NULL || rand == NULL || len < 21)
		return MOQ_ERR_INVAL;
	memcpy(out, rand, len - FP_TOKEN_LEN);
	out[0] = (uint8_t)((out[0] & 0x3f) | HDR_FIXED);
	memcpy(out + len - FP_TOKEN_LEN, token, FP_TOKEN_LEN);
	return (long)len;
}
