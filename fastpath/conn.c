/* SPDX-License-Identifier: MIT */
/*
 * conn.c: one connection of the fast path: import, close, ACK processing
 * over the sent ring, loss detection and PTO (RFC 9002), NewReno, timers.
 * Receiving is recv.c, streams stream.c, building packets send.c.
 */
#include "fp_int.h"

#include <stdlib.h>

_Static_assert(sizeof(struct fp_conn) <= 256, "the hot record is at most 256 bytes");
_Static_assert(sizeof(struct fp_sent) == 32, "a sent-packet record is 32 bytes");

/* CONNECTION_CLOSE repeats in the closing period (RFC 9000, 10.2.1). */
#define CLOSE_REPEATS 8
/* Time-threshold loss (RFC 9002, 6.1.2): 9/8 of the RTT. */
#define TIME_THRESH_NUM 9
#define TIME_THRESH_DEN 8
/* Ring slots the window leaves for records waiting to be declared lost. */
#define RING_SPARE 16u

static uint32_t us_of(const struct fp_conn *c, uint64_t now)
{
	return (uint32_t)((now - c->x->epoch_ns) / 1000);
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
	x->local_dgram_max = imp->local_max_datagram_frame_size;
	if (!x->peer.max_ack_delay_ns)
		x->peer.max_ack_delay_ns = 25000000ull;
	if (!x->peer.ack_delay_exponent)
		x->peer.ack_delay_exponent = 3;
	if (x->peer.ack_delay_exponent > 20 || x->peer.max_ack_delay_ns >= (1ull << 14) * 1000000) {
		rv = MOQ_ERR_CONFIG;
		goto fail_cids;
	}
	x->peer_max_ack_delay_ns = x->peer.max_ack_delay_ns;
	x->peer_ack_delay_exp = (uint8_t)x->peer.ack_delay_exponent;
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
	c->rec_us = 0; /* us_of(c, now): the epoch is now */
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
		struct fp_stream *s = fp_stream_new(c, is->id);
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
		fp_stream_free(c, &e->streams[x->streams]);
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
		fp_stream_free(c, &c->e->streams[c->x->streams]);
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
	fp_dgram_free(c);
	fp_keys_free(&c->x->keys);
	e->st.conns_active--;
	e->st.conns_closed++;
	c->e = NULL;
	c->ready_next = e->free_conn;
	e->free_conn = idx;
}

void fp_notify_closed(struct fp_conn *c, enum fp_close_kind kind, int local, uint64_t code,
                      uint64_t ftype, const char *what, const uint8_t *reason, size_t reasonlen)
{
	const struct fp_callbacks *cb = c->e->cb;
	struct fp_close_info info;

	/* nothing of the caller's is referenced after conn_closed */
	ring_clear(c);
	release_all_streams(c);
	fp_dgram_free(c);
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
	fp_notify_closed(c, app ? FP_CLOSE_APPLICATION : FP_CLOSE_TRANSPORT, 1, code, ftype, what,
	                 x->close_reason, x->close_reasonlen);
	fp_conn_timer(c);
}

/* A protocol fp_violation by the peer (RFC 9000, 20.1). */
int fp_violation(struct fp_conn *c, uint64_t code, uint64_t ftype, const char *what, uint64_t now)
{
	static const char pv[] = "protocol fp_violation";

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
		fp_notify_closed(c, FP_CLOSE_STATELESS_RESET, 0, 0, 0, "stateless reset", NULL, 0);
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
		fp_notify_closed(c, FP_CLOSE_ENGINE, 1, 0, 0, "dropped", NULL, 0);
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
	if (ack_delay > c->x->peer_max_ack_delay_ns)
		ack_delay = c->x->peer_max_ack_delay_ns;
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

static void cc_on_ack(struct fp_conn *c, uint64_t inflight0, uint64_t size)
{
	/* RFC 9002, 7.3.3: @size bytes newly acknowledged by one ACK frame, of
	 * packets sent after the recovery start (fp_on_ack leaves the others
	 * out); no increase while the application (not the window) limited
	 * the sender (@inflight0: in flight before the ACK) */
	if (!c->cc_blocked && inflight0 < c->cwnd / 2)
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
	c->rec_us = us_of(c, now);
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

/* As sent_time, with us_of(c, now) computed once by the caller. */
static inline uint64_t sent_time_us(uint32_t now_us, const struct fp_sent *r, uint64_t now)
{
	return now - (uint64_t)(now_us - r->t_us) * 1000;
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
	if (r->ctl & CF_DG_MASK)
		fp_dgram_done(c, r->ctl, 1);
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
	uint64_t lt = 0, first_t = 0, last_t = 0;
	int run = 1, nlost = 0, gap = 0;

	c->loss_time = 0;
	/* nothing in flight below the largest acknowledged: nothing to test
	 * (the common ACK, of everything up to its largest) */
	if (c->largest_acked == FP_PN_NONE || c->ring_lo >= c->largest_acked)
		return;
	/* RFC 9002, 6.1.2 */
	delay = rtt * TIME_THRESH_NUM / TIME_THRESH_DEN;
	if (delay < K_GRANULARITY_NS)
		delay = K_GRANULARITY_NS;
	for (pn = c->ring_lo; pn < c->largest_acked && c->state == ST_OPEN; pn++) {
		struct fp_sent *r = &c->ring[pn & c->ring_mask];
		uint64_t ts;
		if (!(r->flags & PF_USED) || r->pn_lo != (uint32_t)pn) {
			gap = nlost > 0; /* acknowledged (or never in flight) */
			continue;
		}
		ts = sent_time(c, r, now);
		if (pn + K_PACKET_THRESHOLD <= c->largest_acked || ts + delay <= now) {
			if (gap)
				run = 0; /* not one span of lost packets */
			if (nlost++ == 0)
				first_t = ts;
			last_t = ts;
			on_lost(c, pn, r, now);
			continue;
		}
		gap = nlost > 0;
		if (lt == 0 || ts + delay < lt)
			lt = ts + delay;
	}
	/* RFC 9002, 7.6: lost packets spanning more than 3 x the PTO (without
	 * backoff), nothing in between acknowledged, after an RTT sample:
	 * persistent congestion, back to the minimum window */
	if (nlost >= 2 && run && c->min_rtt != UINT64_MAX &&
	    last_t - first_t > K_PERSISTENT_CONGESTION * fp_pto(c)) {
		c->cwnd = MIN_CWND_PKTS * (uint64_t)c->max_pkt;
		c->ca_acc = 0;
		c->recovery_start = now;
		c->rec_us = us_of(c, now);
		c->e->st.persistent_congestion++;
	}
	c->loss_time = lt;
	if (nlost)
		advance_ring_lo(c);
}

int fp_on_ack(struct fp_conn *c, const struct fp_ack *a, uint64_t now)
{
	struct fp_engine *e = c->e;
	struct fp_sent *ring = c->ring;
	uint32_t i, now_us = us_of(c, now), mask = c->ring_mask, rec_age;
	int newly_elicit = 0;
	uint64_t largest_sent = 0, acked_bytes = 0, inflight0 = c->inflight;

	e->st.acks_in++;
	/* RFC 9000, 13.1: acknowledging a packet never sent */
	if (a->largest >= c->tx_pn)
		return fp_violation(c, FP_E_PROTOCOL_VIOLATION, FT_ACK, "ack of unsent packet",
		                    now);
	/* RFC 9002, 7.3.3: packets sent at or before the recovery start do
	 * not grow the window: those whose age (the records' microseconds) is
	 * at least the time since it; no packet's send time is computed */
	rec_age = c->recovery_start >= now                            ? 0
	          : now - c->recovery_start >= (1ull << 32) * 1000ull ? UINT32_MAX
	                                                              : now_us - c->rec_us;
	/* RFC 9002, 5.1: an RTT sample when the largest acknowledged is newly
	 * acknowledged and ack-eliciting (its record is read before the walk
	 * frees it) */
	{
		const struct fp_sent *r = &ring[a->largest & mask];
		if ((r->flags & (PF_USED | PF_ELICIT)) == (PF_USED | PF_ELICIT) &&
		    r->pn_lo == (uint32_t)a->largest && a->largest >= c->ring_lo) {
			newly_elicit = 1;
			largest_sent = sent_time_us(now_us, r, now);
		}
	}
	e->ackb_on = 1;
	/* oldest first, so stream data is acknowledged in order (the prefix
	 * moves, no interval is kept) */
	for (i = a->n; i-- > 0;) {
		uint64_t hi = a->r[i].hi, lo = a->r[i].lo, pn;
		if (hi < c->ring_lo)
			continue;
		if (lo < c->ring_lo)
			lo = c->ring_lo;
		for (pn = lo; pn <= hi; pn++) {
			struct fp_sent *r = &ring[pn & mask];
			struct fp_stream *st;
			uint8_t fl = r->flags;
			if (!(fl & PF_USED) || r->pn_lo != (uint32_t)pn)
				continue;
			r->flags = 0;
			if (fl & PF_INFLIGHT) {
				c->inflight -= r->size;
				/* the window grows once per ACK frame, by what it
				 * acknowledged (cc_on_ack) */
				if (now_us - r->t_us < rec_age)
					acked_bytes += r->size;
			}
			st = &e->streams[r->sidx];
			if ((fl & PF_SIMPLE) && st->id >= 0 && st->acked_ivl == FP_NONE32 &&
			    r->off <= st->snd_acked && (e->ackb_s == st || e->ackb_s == NULL)) {
				/* the common record: in-order data of the stream this
				 * ACK frame is moving (fp_ack_flush reports it) */
				if (e->ackb_s == NULL) {
					e->ackb_s = st;
					e->ackb_sid = st->id;
					e->ackb_before = st->snd_acked;
				}
				if (st->refs > 0)
					st->refs--;
				if (r->off + r->len > st->snd_acked)
					st->snd_acked = r->off + r->len;
				continue;
			}
			if (r->ctl & CF_DG_MASK)
				fp_dgram_done(c, r->ctl, 0);
			r->flags = fl;
			sent_ranges(c, r, fp_on_acked_range);
			r->flags = 0;
			if (c->state != ST_OPEN) {
				e->ackb_on = 0;
				e->ackb_s = NULL;
				return -1;
			}
		}
	}
	e->ackb_on = 0;
	fp_ack_flush(c);
	if (c->state != ST_OPEN)
		return -1;
	if (c->tx_update && a->largest >= c->x->keys.tx_phase_first_pn)
		c->tx_update = 0; /* RFC 9001, 6.5: the update is confirmed */
	if (acked_bytes)
		cc_on_ack(c, inflight0, acked_bytes);
	if (c->largest_acked == FP_PN_NONE || a->largest > c->largest_acked)
		c->largest_acked = a->largest;
	if (newly_elicit) {
		uint64_t delay = (a->delay << c->x->peer_ack_delay_exp) * 1000;
		rtt_sample(c, now - largest_sent, delay);
	}
	c->pto_count = 0;
	c->cc_blocked = 0;
	advance_ring_lo(c);
	/* (detect_lost's first test here: the common ACK leaves nothing in
	 * flight below its largest) */
	if (c->ring_lo < c->largest_acked)
		detect_lost(c, now);
	else
		c->loss_time = 0;
	if (c->send_head != FP_NONE32 || c->dg_n)
		fp_ready_add(c);
	return 0;
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
			uint64_t pto = c->last_elicit_t +
			               (fp_pto(c) << (c->pto_count < 16 ? c->pto_count : 16));
			if (pto < t)
				t = pto;
		}
		/* the pacer's time when it alone holds data back */
		if ((c->send_head != FP_NONE32 || c->dg_n) && c->pace_t > x->now &&
		    c->inflight < c->cwnd && !(c->ring[c->tx_pn & c->ring_mask].flags & PF_USED) &&
		    c->pace_t < t)
			t = c->pace_t;
		if (e->cfg.keep_alive_ns && x->last_tx_t + e->cfg.keep_alive_ns < t)
			t = x->last_tx_t + e->cfg.keep_alive_ns;
	}
	/* a timer armed earlier and still ahead stays: firing early is
	 * harmless (fp_conn_fire looks at every deadline and re-arms), and it
	 * saves a re-arm per packet as the PTO moves on with every send */
	if (fp_wheel_armed(&c->tn) && c->tn.when <= t && c->tn.when > x->now)
		return;
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
				fp_ivl_add(e, s, &s->lost_ivl, r->off, r->off + r->len);
			if (s->id >= 0 && fp_stream_has_send(c, s))
				fp_stream_sendq(c, s);
			for (m = r->more; m != FP_NONE32; m = e->sranges[m].next) {
				struct fp_srange *sr = &e->sranges[m];
				struct fp_stream *s2 = &e->streams[sr->sidx];
				if (s2->id >= 0 && sr->kind == RK_DATA &&
				    !(s2->flags & SF_RESET_SENT))
					fp_ivl_add(e, s2, &s2->lost_ivl, sr->off,
					           sr->off + sr->len);
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
			fp_notify_closed(c, FP_CLOSE_IDLE, 1, 0, 0, "idle timeout", NULL, 0);
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
	           now >= c->last_elicit_t +
	                           (fp_pto(c) << (c->pto_count < 16 ? c->pto_count : 16))) {
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

uint64_t fp_conn_cwnd(const struct fp_conn *c)
{
	return c->cwnd;
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
