/* SPDX-License-Identifier: MIT */
/*
 * recv.c: receiving on a fast path connection: header protection, packet
 * number, key phase (RFC 9001, 5.4 and 6), the AEAD, and the frames of
 * RFC 9000, 19 (stream data with reassembly within a bound, flow control,
 * CIDs, path validation, close).
 */
#include "fp_int.h"

/* Received ranges kept for our ACKs (RFC 9000, 13.2.3 lets us bound them). */
#define RX_RANGES FP_IMPORT_RANGES
/* RFC 9000, 13.2.2: ACK every 2nd ack-eliciting packet. */
#define ACK_EVERY 2
/* STREAM frames whose data we never read: 2^62 - 1 (RFC 9000, 4.5). */
#define MAX_OFFSET ((1ull << 62) - 1)

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

static int deliver(struct fp_conn *c, struct fp_stream *s, uint64_t off, const uint8_t *d, size_t n,
                   int fin)
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
		bits[p / 8] &= (uint8_t) ~(1u << (p % 8));
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
		fp_rbuf_free(e, s);
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
		/* RFC 9000, 3.2: opening a stream opens every lower one of its
		 * kind (a reordered frame of one of them still finds it) */
		while (*next <= sid) {
			int64_t id = *next;
			s = fp_stream_new(c, id);
			if (s == NULL) {
				*bad = FP_E_INTERNAL;
				return NULL;
			}
			*next = id + 4;
			c->e->st.streams_opened++;
			if (c->e->cb && c->e->cb->stream_open)
				c->e->cb->stream_open(c, c->user, id);
			if (c->state != ST_OPEN) {
				*bad = FP_E_INTERNAL;
				return NULL;
			}
		}
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
		return fp_violation(c, FP_E_FRAME_ENCODING, ft, "stream offset too large", now);
	s = peer_stream(c, sid, 1, &bad);
	if (bad)
		return fp_violation(c, bad, ft, "stream frame", now);
	if (s == NULL)
		return 0;
	/* RFC 9000, 4.5: final size */
	if (s->rcv_final != UINT64_MAX && (end > s->rcv_final || (fin && end != s->rcv_final)))
		return fp_violation(c, FP_E_FINAL_SIZE, ft, "final size changed", now);
	if (fin && end < s->rcv_hi)
		return fp_violation(c, FP_E_FINAL_SIZE, ft, "final size below data", now);
	/* RFC 9000, 4.1 */
	if (end > s->rcv_max)
		return fp_violation(c, FP_E_FLOW_CONTROL, ft, "stream flow control", now);
	if (end > s->rcv_hi) {
		x->recv_data += end - s->rcv_hi;
		s->rcv_hi = end;
		if (x->recv_data > x->local_max_data)
			return fp_violation(c, FP_E_FLOW_CONTROL, ft, "connection flow control",
			                    now);
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
		fp_rbuf_free(e, s);
		fp_stream_maybe_free(c, s);
		extend_credit(c, NULL);
		return c->state == ST_OPEN ? 0 : -1;
	}
	extend_credit(c, s);
	return 0;
}

static int on_reset_stream(struct fp_conn *c, int64_t sid, uint64_t err, uint64_t final,
                           uint64_t now)
{
	struct fp_cold *x = c->x;
	struct fp_stream *s;
	uint64_t bad;

	s = peer_stream(c, sid, 1, &bad);
	if (bad)
		return fp_violation(c, bad, FT_RESET_STREAM, "reset_stream", now);
	if (s == NULL)
		return 0;
	if ((s->rcv_final != UINT64_MAX && final != s->rcv_final) || final < s->rcv_hi)
		return fp_violation(c, FP_E_FINAL_SIZE, FT_RESET_STREAM, "final size", now);
	if (final > s->rcv_max)
		return fp_violation(c, FP_E_FLOW_CONTROL, FT_RESET_STREAM, "flow control", now);
	x->recv_data += final - s->rcv_hi;
	s->rcv_hi = final;
	if (x->recv_data > x->local_max_data)
		return fp_violation(c, FP_E_FLOW_CONTROL, FT_RESET_STREAM, "flow control", now);
	s->rcv_final = final;
	if (s->flags & SF_RECV_DONE)
		return 0;
	s->flags |= SF_FIN_RECV | SF_RECV_DONE;
	s->flags &= (uint16_t) ~(SF_P_STOP | SF_P_MSD);
	fp_rbuf_free(c->e, s);
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
		return fp_violation(c, FP_E_STREAM_STATE, FT_STOP_SENDING, "stop_sending", now);
	s = peer_stream(c, sid, 0, &bad);
	if (bad)
		return fp_violation(c, bad, FT_STOP_SENDING, "stop_sending", now);
	if (s == NULL || (s->flags & SF_RESET_SENT))
		return 0;
	fp_reset_send(c, s, err);
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
		return fp_violation(c, FP_E_STREAM_STATE, FT_MAX_STREAM_DATA, "max_stream_data",
		                    now);
	s = peer_stream(c, sid, 0, &bad);
	if (bad)
		return fp_violation(c, bad, FT_MAX_STREAM_DATA, "max_stream_data", now);
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
		return fp_violation(c, FP_E_FRAME_ENCODING, FT_NEW_CONNECTION_ID, "new_cid", now);
	memset(&n, 0, sizeof(n));
	n.seq = seq;
	n.len = *(*p)++;
	/* RFC 9000, 19.15 */
	if (n.len < 1 || n.len > FP_CID_MAX || rpt > seq ||
	    (size_t)(end - *p) < (size_t)n.len + FP_TOKEN_LEN)
		return fp_violation(c, FP_E_FRAME_ENCODING, FT_NEW_CONNECTION_ID, "new_cid", now);
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
		return fp_violation(c, FP_E_CONNECTION_ID_LIMIT, FT_NEW_CONNECTION_ID, "cid limit",
		                    now);
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
		return fp_violation(c, FP_E_PROTOCOL_VIOLATION, FT_RETIRE_CONNECTION_ID,
		                    "retire of unissued cid", now);
	for (i = 0; i < x->nscids; i++) {
		struct fp_cid r = x->scids[i];
		if (r.seq != seq)
			continue;
		if (r.len == c->scid_len && memcmp(r.id, dcid, r.len) == 0)
			return fp_violation(c, FP_E_PROTOCOL_VIOLATION, FT_RETIRE_CONNECTION_ID,
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
		return fp_violation(c, FP_E_PROTOCOL_VIOLATION, 0, "packet without frames", now);
	while (p < end) {
		uint64_t ft, a, b, d2;
		int64_t sid;

		if (*p == FT_PADDING) {
			p++;
			continue;
		}
		if (fp_varint_get(&p, end, &ft) < 0)
			return fp_violation(c, FP_E_FRAME_ENCODING, 0, "frame type", now);
		if (ft != FT_ACK && ft != FT_ACK_ECN && ft != FT_CLOSE_TRANSPORT &&
		    ft != FT_CLOSE_APP)
			*elicit = 1;
		if (ft != FT_PATH_CHALLENGE && ft != FT_PATH_RESPONSE && ft != FT_NEW_CONNECTION_ID)
			*probing_only = 0;
		switch (ft) {
		case FT_PING:
		case FT_HANDSHAKE_DONE:
			/* RFC 9000, 19.20: a server receiving it: PROTOCOL_VIOLATION */
			if (ft == FT_HANDSHAKE_DONE && c->is_server)
				return fp_violation(c, FP_E_PROTOCOL_VIOLATION, ft,
				                    "handshake_done", now);
			break;
		case FT_ACK:
		case FT_ACK_ECN: {
			struct fp_ack ack;
			if (fp_ack_parse(&p, end, ft == FT_ACK_ECN, &ack) < 0)
				return fp_violation(c, FP_E_FRAME_ENCODING, ft, "ack frame", now);
			if (fp_on_ack(c, &ack, now) < 0)
				return -1;
			break;
		}
		case FT_RESET_STREAM:
			if (fp_varint_get(&p, end, &a) < 0 || fp_varint_get(&p, end, &b) < 0 ||
			    fp_varint_get(&p, end, &d2) < 0)
				return fp_violation(c, FP_E_FRAME_ENCODING, ft, "reset_stream",
				                    now);
			if (on_reset_stream(c, (int64_t)a, b, d2, now) < 0)
				return -1;
			break;
		case FT_STOP_SENDING:
			if (fp_varint_get(&p, end, &a) < 0 || fp_varint_get(&p, end, &b) < 0)
				return fp_violation(c, FP_E_FRAME_ENCODING, ft, "stop_sending",
				                    now);
			if (on_stop_sending(c, (int64_t)a, b, now) < 0)
				return -1;
			break;
		case FT_CRYPTO:
			/* post-handshake TLS messages (a NewSessionTicket to a
			 * client): none are expected from a client; skipped */
			if (fp_varint_get(&p, end, &a) < 0 || fp_varint_get(&p, end, &b) < 0 ||
			    (uint64_t)(end - p) < b)
				return fp_violation(c, FP_E_FRAME_ENCODING, ft, "crypto", now);
			p += b;
			break;
		case FT_NEW_TOKEN:
			/* RFC 9000, 19.7: a server receiving it: PROTOCOL_VIOLATION */
			if (c->is_server)
				return fp_violation(c, FP_E_PROTOCOL_VIOLATION, ft, "new_token",
				                    now);
			if (fp_varint_get(&p, end, &a) < 0 || (uint64_t)(end - p) < a || a == 0)
				return fp_violation(c, FP_E_FRAME_ENCODING, ft, "new_token", now);
			p += a;
			break;
		case FT_MAX_DATA:
			if (fp_varint_get(&p, end, &a) < 0)
				return fp_violation(c, FP_E_FRAME_ENCODING, ft, "max_data", now);
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
				return fp_violation(c, FP_E_FRAME_ENCODING, ft, "max_stream_data",
				                    now);
			if (on_max_stream_data(c, (int64_t)a, b, now) < 0)
				return -1;
			break;
		case FT_MAX_STREAMS_BIDI:
		case FT_MAX_STREAMS_UNI: {
			uint64_t *m = ft == FT_MAX_STREAMS_BIDI ? &x->peer_max_sb : &x->peer_max_su;
			if (fp_varint_get(&p, end, &a) < 0 || a > (1ull << 60))
				return fp_violation(c, FP_E_FRAME_ENCODING, ft, "max_streams", now);
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
				return fp_violation(c, FP_E_FRAME_ENCODING, ft, "blocked", now);
			break;
		case FT_STREAM_DATA_BLOCKED:
			if (fp_varint_get(&p, end, &a) < 0 || fp_varint_get(&p, end, &b) < 0)
				return fp_violation(c, FP_E_FRAME_ENCODING, ft,
				                    "stream_data_blocked", now);
			/* RFC 9000, 19.13: on a send-only stream: STREAM_STATE_ERROR */
			if (is_local_sid(c, (int64_t)a) && (a & 2))
				return fp_violation(c, FP_E_STREAM_STATE, ft, "stream_data_blocked",
				                    now);
			break;
		case FT_NEW_CONNECTION_ID:
			if (on_new_cid(c, &p, end, now) < 0)
				return -1;
			break;
		case FT_RETIRE_CONNECTION_ID:
			if (fp_varint_get(&p, end, &a) < 0)
				return fp_violation(c, FP_E_FRAME_ENCODING, ft, "retire_cid", now);
			if (on_retire_cid(c, a, dcid, now) < 0)
				return -1;
			break;
		case FT_PATH_CHALLENGE:
			if (end - p < 8)
				return fp_violation(c, FP_E_FRAME_ENCODING, ft, "path_challenge",
				                    now);
			memcpy(x->response, p, 8);
			p += 8;
			c->ctl |= CF_RESPONSE;
			fp_ready_add(c);
			break;
		case FT_PATH_RESPONSE:
			if (end - p < 8)
				return fp_violation(c, FP_E_FRAME_ENCODING, ft, "path_response",
				                    now);
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
				return fp_violation(c, FP_E_FRAME_ENCODING, ft, "connection_close",
				                    now);
			/* RFC 9000, 10.2.2: draining */
			c->state = ST_DRAINING;
			c->ctl = 0;
			x->idle_at = now + 3 * fp_pto(c);
			fp_ready_del(c);
			fp_notify_closed(
			        c, ft == FT_CLOSE_APP ? FP_CLOSE_APPLICATION : FP_CLOSE_TRANSPORT,
			        0, code, fty, "closed by the peer", p, rl);
			fp_conn_timer(c);
			return -1;
		}
		case FT_DATAGRAM:
		case FT_DATAGRAM + 1:
			/* RFC 9221 (dgram.c) */
			if (fp_dgram_recv(c, ft, &p, end, now) < 0)
				return -1;
			break;
		default:
			if (ft >= FT_STREAM && ft <= FT_STREAM + 7) {
				uint64_t off = 0, len;
				if (fp_varint_get(&p, end, &a) < 0 ||
				    ((ft & 0x04) && fp_varint_get(&p, end, &off) < 0))
					return fp_violation(c, FP_E_FRAME_ENCODING, ft, "stream",
					                    now);
				if (ft & 0x02) {
					if (fp_varint_get(&p, end, &len) < 0 ||
					    (uint64_t)(end - p) < len)
						return fp_violation(c, FP_E_FRAME_ENCODING, ft,
						                    "stream", now);
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
			return fp_violation(c, FP_E_FRAME_ENCODING, ft, "unknown frame", now);
		}
		if (c->state != ST_OPEN)
			return -1;
	}
	return 0;
}

/*
 * A payload that is one ACK frame with one range (and PADDING): taken
 * without the frame loop. Returns 0 when it is something else (frames()
 * reads it), 1 when taken (*@rv: fp_on_ack's result).
 */
static int ack_only(struct fp_conn *c, const uint8_t *p, const uint8_t *end, uint64_t now, int *rv)
{
	struct fp_ack a;
	uint64_t count, first;

	p++;
	if (fp_varint_get(&p, end, &a.largest) < 0 || fp_varint_get(&p, end, &a.delay) < 0 ||
	    fp_varint_get(&p, end, &count) < 0 || count != 0 ||
	    fp_varint_get(&p, end, &first) < 0 || first > a.largest)
		return 0;
	while (p < end)
		if (*p++ != FT_PADDING)
			return 0;
	a.r[0].hi = a.largest;
	a.r[0].lo = a.largest - first;
	a.n = 1;
	a.has_ecn = 0;
	*rv = fp_on_ack(c, &a, now);
	return 1;
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
		if (x->peer_cids[i].has_token &&
		    memcmp(t, x->peer_cids[i].token, FP_TOKEN_LEN) == 0)
			return 1;
	return 0;
}

static int same_addr(const struct fp_addr *a, const struct fp_addr *b)
{
	uint64_t x, y, u, v;

	if (a->len != b->len)
		return 0;
	if (a->len != 16)
		return memcmp(a->b, b->b, a->len) == 0;
	/* sockaddr_in: two loads each */
	memcpy(&x, a->b, 8);
	memcpy(&y, a->b + 8, 8);
	memcpy(&u, b->b, 8);
	memcpy(&v, b->b + 8, 8);
	return ((x ^ u) | (y ^ v)) == 0;
}

static inline void pf_range(const void *p, size_t from, size_t to)
{
	for (size_t o = from & ~(size_t)63; o < to; o += 64)
		__builtin_prefetch((const char *)p + o);
}

void fp_conn_prefetch(const struct fp_conn *c, int stage)
{
	const struct fp_cold *x;

	if (c == NULL)
		return;
	if (stage == 0) {
		pf_range(c, 0, sizeof(*c));
		x = &c->e->colds[conn_idx(c)];
		/* the per-packet lines (fp_cold's first ones), the ACK ranges
		 * we keep, the receive keys and header protection */
		pf_range(x, 0, offsetof(struct fp_cold, rx_ranges) + sizeof(x->rx_ranges));
		pf_range(x, offsetof(struct fp_cold, keys),
		         offsetof(struct fp_cold, keys.rx) + sizeof(x->keys.rx));
		pf_range(x, offsetof(struct fp_cold, keys.rx_hp),
		         offsetof(struct fp_cold, keys.rx_hp) + sizeof(x->keys.rx_hp));
		return;
	}
	if (stage >= 2) {
		/* the stream of the record after the largest acknowledged (the
		 * one stage 1 loaded), then its chunk and the caller's record */
		const struct fp_sent *r;
		const struct fp_stream *s;
		uint64_t pn;

		if (c->ring == NULL)
			return;
		pn = c->largest_acked == FP_PN_NONE ? c->ring_lo : c->largest_acked + 1;
		r = &c->ring[pn & c->ring_mask];
		if (!(r->flags & PF_RANGE) || r->sidx >= c->e->cfg.max_streams)
			return;
		s = &c->e->streams[r->sidx];
		if (stage == 2) {
			__builtin_prefetch(s);
			__builtin_prefetch((const char *)s + 63);
			return;
		}
		if (s->chunks != FP_NONE32)
			__builtin_prefetch(&c->e->chunks[s->chunks]);
		if (s->user != NULL)
			__builtin_prefetch(s->user);
		return;
	}
	x = c->x;
	fp_aes_prefetch(x->keys.rx[x->keys.rxc].aead);
	if (c->ring != NULL) {
		/* the records after the largest acknowledged: what an ACK
		 * takes next */
		uint64_t pn = c->largest_acked == FP_PN_NONE ? c->ring_lo : c->largest_acked + 1;

		__builtin_prefetch(&c->ring[pn & c->ring_mask]);
		__builtin_prefetch(&c->ring[(pn + 2) & c->ring_mask]);
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
	    (!(data[0] & HDR_FIXED) && !x->grease) || len > sizeof(e->scratch) - 64) {
		/* RFC 9000, 10.3.1: a reset may be as short as 21 bytes */
		if (c->state == ST_OPEN && !(data[0] & HDR_LONG) && is_reset(c, data, len)) {
			fp_conn_stateless_reset(c, now);
			return MOQ_ERR_CLOSED;
		}
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
	if (fp_hp_mask(&k->rx_hp, data + pn_off + 4, mask) < 0)
		goto drop;
	b0 = data[0] ^ (mask[0] & 0x1f);
	pnlen = (b0 & HDR_PNLEN) + 1u;
	hdr = e->scratch;
	hdr[0] = b0;
	memcpy(hdr + 1, data + 1, FP_CID_MAX); /* (len > pn_off + 20 was checked) */
	{
		/* the 1-4 packet number bytes as one big-endian word: the
		 * packet is at least pn_off + 4 + the sample long (checked) */
		uint32_t w, m;
		memcpy(&w, data + pn_off, 4);
		memcpy(&m, mask + 1, 4);
		w = __builtin_bswap32(w ^ m) >> (32 - 8 * pnlen);
		trunc = w;
		w = __builtin_bswap32(w << (32 - 8 * pnlen));
		memcpy(hdr + pn_off, &w, 4); /* (the bytes past hlen are not read) */
	}
	hlen = pn_off + pnlen;
	pn = fp_pn_decode(c->rx_largest, trunc, pnlen);
	if (rx_seen(x, pn))
		goto drop;
	/* RFC 9001, 6.3: which key generation */
	phase = (b0 & HDR_KEY_PHASE) ? 1 : 0;
	if (k->have_prev && now >= k->prev_until)
		fp_keys_drop_prev(k); /* RFC 9001, 6.5: kept 3 PTO, not longer */
	if (phase == c->rx_kp) {
		which = 0;
	} else if (k->have_prev && pn < k->rx_phase_first_pn && now < k->prev_until) {
		which = 2;
	} else {
		which = 1;
	}
	i = (size_t)k->rxc + (size_t)which;
	rk = &k->rx[i >= 3 ? i - 3 : i];
	pl = hdr + ((hlen + 15) & ~(size_t)15);
	if (rk->aead == NULL && fp_keys_rx_ready(rk) < 0)
		goto drop; /* (the next generation's first packet: no memory) */
	if (fp_open(rk->aead, rk->iv, pn, hdr, hlen, data + hlen, len - hlen, pl) < 0) {
		goto drop;
	}
	/* RFC 9000, 17.3.1: reserved bits must be 0 after protection is removed */
	if (b0 & HDR_RESERVED) {
		fp_violation(c, FP_E_PROTOCOL_VIOLATION, 0, "reserved bits", now);
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
			fp_violation(c, FP_E_INTERNAL, 0, "key update", now);
			goto closed;
		}
		c->rx_kp ^= 1;
		e->st.key_updates++;
		x->key_updates++;
		if (c->kp != c->rx_kp) {
			if (fp_keys_update_tx(k, c->tx_pn) < 0) {
				fp_violation(c, FP_E_INTERNAL, 0, "key update", now);
				goto closed;
			}
			c->kp = c->rx_kp;
			c->tx_update = 1;
		}
	}
	x->pkts_recv++;
	x->bytes_recv += len;
	{
		uint64_t prev_largest = c->rx_largest;
		size_t plen = len - hlen - FP_TAG_LEN;
		int moved = remote && !same_addr(remote, &x->remote);

		if (moved)
			x->path_recv = 0; /* counted below if it becomes the path */
		else if (!c->validated)
			x->path_recv += len;
		x->refuse_pkt = 0;
		/* RFC 9000, 10.1: a packet processed restarts the idle timer */
		if (x->idle_ns) {
			uint64_t p3 = 3 * fp_pto(c);
			x->idle_at = now + (x->idle_ns > p3 ? x->idle_ns : p3);
		}
		x->elicit_since_rx = 0;
		if (plen >= 5 && pl[0] == FT_ACK && ack_only(c, pl, pl + plen, now, &rv)) {
			/* a packet of one ACK frame (what a subscriber sends) */
			if (rv < 0)
				goto closed;
			rv = 0;
			elicit = probing = 0;
		} else if (frames(c, pl, pl + plen, data + 1, &elicit, &probing, now) < 0) {
			goto closed;
		}
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
		if (moved && c->state == ST_OPEN && !probing &&
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
	/* RFC 9000, 10.3.1: whatever did not decrypt (or looked like a
	 * duplicate) may be a stateless reset of one of the peer's tokens */
	if (c->state == ST_OPEN && is_reset(c, data, len)) {
		fp_conn_stateless_reset(c, now);
		conn_leave(c);
		return MOQ_ERR_CLOSED;
	}
	e->st.pkts_dropped++;
	conn_leave(c);
	return 0;
closed:
	conn_leave(c);
	return MOQ_ERR_CLOSED;
}
