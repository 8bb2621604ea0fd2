/* SPDX-License-Identifier: MIT */
/*
 * send.c: building 1-RTT packets (RFC 9000, 12 and 17.3.1): the ACK, the
 * control frames, stream data copied once from caller memory into the TX
 * buffer and sealed there (AES-128-GCM in place), header protection, and
 * the sent-packet record.
 */
#include "fp_int.h"

/* Stream ranges one packet may carry (the inline one and extras). */
#define MAX_RANGES_PER_PKT 16
/* The smallest room worth a STREAM frame: type, id, offset, length. */
#define STREAM_HDR_MAX (1 + 8 + 8 + 2)
#define MIN_DATA_ROOM  (STREAM_HDR_MAX + 16)
/* RFC 9000, 8.2.1: a PATH_CHALLENGE datagram is padded to 1200 bytes. */
#define CHALLENGE_PAD 1200u
/* Packets a pacer lets go back to back (RFC 9002, 7.7: a small burst). */
#define PACE_BURST_PKTS 10u
/* RFC 9002, 7.7: pace at 1.25 x cwnd / srtt. */
#define PACE_NUM 4u
#define PACE_DEN 5u
/* The smallest packet worth sending within the amplification limit. */
#define AMP_MIN 64u

/* The ring slot of the next packet number is free. Every packet number
 * below ring_lo is out of the ring (advance_ring_lo), so with fewer than the
 * ring's size in [ring_lo, tx_pn) the slot is free without reading it: the
 * record is then only written, by the packet (a read of it was a cache miss
 * per packet, ~1.5 of ~100 per subscriber visit in bench_moq_fanout
 * --cache-sim). */
static inline int ring_free(const struct fp_conn *c)
{
	return c->tx_pn - c->ring_lo <= c->ring_mask ||
	       !(c->ring[c->tx_pn & c->ring_mask].flags & PF_USED);
}

static uint64_t pace_interval(const struct fp_conn *c, uint64_t bytes)
{
	/* bytes / (1.25 * cwnd / srtt) */
	return bytes * c->srtt * PACE_NUM / (c->cwnd * PACE_DEN);
}

/* May an ack-eliciting packet go now? */
static inline __attribute__((always_inline)) int can_elicit(const struct fp_conn *c, uint64_t now)
{
	if (!ring_free(c))
		return 0;
	if (c->probes > 0)
		return 1;
	return c->inflight < c->cwnd && c->pace_t <= now;
}

/* RFC 9000, 8.1: what an unvalidated address may still be sent. */
static uint64_t amp_room(const struct fp_conn *c)
{
	uint64_t allowed = 3 * c->x->path_recv;

	if (c->validated)
		return UINT64_MAX;
	return allowed > c->x->path_sent ? allowed - c->x->path_sent : 0;
}

int fp_conn_has_send(const struct fp_conn *c, uint64_t now)
{
	if (amp_room(c) < AMP_MIN)
		return 0;
	if (c->state == ST_CLOSING)
		return (c->ctl & CF_CLOSE) != 0;
	if (c->state != ST_OPEN)
		return 0;
	if (c->ctl & CF_ACK)
		return 1;
	if (!can_elicit(c, now))
		return 0;
	return (c->ctl & ~CF_ACK) != 0 || c->send_head != FP_NONE32 || c->dg_n;
}

/* Copy stream bytes [off, off + n) of @s from the caller's chunks. */
static void stream_copy(struct fp_engine *e, struct fp_stream *s, uint64_t off, uint8_t *dst,
                        size_t n, int is_new)
{
	uint32_t i = s->chunks;

	if (is_new && s->cur != FP_NONE32 && e->chunks[s->cur].off <= off)
		i = s->cur;
	while (n > 0 && i != FP_NONE32) {
		struct fp_chunk *k = &e->chunks[i];
		if (off >= k->off + k->len) {
			i = k->next;
			continue;
		}
		{
			size_t at = (size_t)(off - k->off), m = k->len - at;
			if (m > n)
				m = n;
			memcpy(dst, k->base + at, m);
			dst += m;
			off += m;
			n -= m;
			if (is_new)
				s->cur = i;
			if (at + m == k->len)
				i = k->next;
		}
	}
}

/* Pieces a packet's stream data may come in without a copy (fp_sealv). */
#define GATHER_MAX 8

/*
 * stream_copy without the copy: stream bytes [off, off + n) of @s as
 * pieces of the caller's chunks into @v (at most @max). Returns how many,
 * or 0 when more than @max would be needed (then stream_copy does it).
 * The chunk walk is stream_copy's on purpose: stream_copy written over
 * this one cost 57 instructions a packet more (bench_fastpath --callgrind:
 * 942 -> 999; the no-copy path 790 -> 821).
 */
static unsigned stream_pieces(struct fp_engine *e, struct fp_stream *s, uint64_t off, size_t n,
                              struct fp_iov *v, unsigned max)
{
	uint32_t i = s->chunks, cur = s->cur;
	unsigned nv = 0;

	if (cur != FP_NONE32 && e->chunks[cur].off <= off)
		i = cur;
	while (n > 0 && i != FP_NONE32) {
		struct fp_chunk *k = &e->chunks[i];
		if (off >= k->off + k->len) {
			i = k->next;
			continue;
		}
		{
			size_t at = (size_t)(off - k->off), m = k->len - at;
			if (m > n)
				m = n;
			if (nv == max)
				return 0;
			v[nv].base = k->base + at;
			v[nv++].len = m;
			off += m;
			n -= m;
			cur = i;
			if (at + m == k->len)
				i = k->next;
		}
	}
	s->cur = cur;
	return nv;
}

struct pktb {
	struct fp_conn *c;
	uint8_t *p, *end;
	struct fp_sent rec;
	uint32_t nranges, last_more;
	int elicit;
};

static void add_range(struct pktb *b, uint32_t sidx, uint64_t off, uint16_t len, uint8_t kind,
                      int fin)
{
	struct fp_engine *e = b->c->e;

	e->streams[sidx].refs++;
	if (b->nranges == 0) {
		b->rec.flags |= PF_RANGE | (fin ? PF_FIN : 0);
		b->rec.sidx = sidx;
		b->rec.off = off;
		b->rec.len = len;
		b->rec.kind = kind;
	} else {
		uint32_t m = e->free_srange;
		struct fp_srange *sr = &e->sranges[m];
		e->free_srange = sr->next;
		sr->off = off;
		sr->sidx = sidx;
		sr->len = len;
		sr->kind = kind;
		sr->fin = (uint8_t)(fin != 0);
		sr->next = FP_NONE32;
		if (b->last_more == FP_NONE32)
			b->rec.more = m;
		else
			e->sranges[b->last_more].next = m;
		b->last_more = m;
	}
	b->nranges++;
}

static int range_room(const struct pktb *b)
{
	return b->nranges == 0 ||
	       (b->nranges < MAX_RANGES_PER_PKT && b->c->e->free_srange != FP_NONE32);
}

/* Control frames and data of one stream. Returns 1 when the stream has
 * nothing more to send. */
static int stream_frames(struct pktb *b, struct fp_stream *s)
{
	struct fp_conn *c = b->c;
	struct fp_engine *e = c->e;
	uint32_t sidx = (uint32_t)(s - e->streams);
	size_t room;

	if ((s->flags & SF_P_RESET) && range_room(b) && b->end - b->p >= 1 + 8 + 8 + 8) {
		*b->p++ = FT_RESET_STREAM;
		b->p = fp_varint_put(b->p, (uint64_t)s->id);
		b->p = fp_varint_put(b->p, s->app_err);
		b->p = fp_varint_put(b->p, s->snd_off);
		s->flags &= ~SF_P_RESET;
		add_range(b, sidx, 0, 0, RK_RESET, 0);
		b->elicit = 1;
	}
	if ((s->flags & SF_P_STOP) && range_room(b) && b->end - b->p >= 1 + 8 + 8) {
		*b->p++ = FT_STOP_SENDING;
		b->p = fp_varint_put(b->p, (uint64_t)s->id);
		b->p = fp_varint_put(b->p, s->app_err);
		s->flags &= ~SF_P_STOP;
		add_range(b, sidx, 0, 0, RK_STOP, 0);
		b->elicit = 1;
	}
	if ((s->flags & SF_P_MSD) && range_room(b) && b->end - b->p >= 1 + 8 + 8) {
		*b->p++ = FT_MAX_STREAM_DATA;
		b->p = fp_varint_put(b->p, (uint64_t)s->id);
		b->p = fp_varint_put(b->p, s->rcv_max);
		s->flags &= ~SF_P_MSD;
		add_range(b, sidx, 0, 0, RK_MSD, 0);
		b->elicit = 1;
	}
	if ((s->flags & SF_P_SDB) && b->end - b->p >= 1 + 8 + 8) {
		*b->p++ = FT_STREAM_DATA_BLOCKED;
		b->p = fp_varint_put(b->p, (uint64_t)s->id);
		b->p = fp_varint_put(b->p, s->snd_max);
		s->flags &= ~SF_P_SDB;
		b->elicit = 1;
	}
	if (s->flags & SF_RESET_SENT)
		return !(s->flags & SF_P_MASK);
	/* lost data first (RFC 9000, 13.3: repaired from the caller's memory) */
	while (s->lost_ivl != FP_NONE32 && range_room(b)) {
		struct fp_ivl *v = &e->ivls[s->lost_ivl];
		uint64_t lo = v->lo < s->snd_acked ? s->snd_acked : v->lo, n;
		uint8_t *f;
		int fin;
		if (lo >= v->hi) {
			uint32_t nx = v->next;
			fp_ivl_put(e, s->lost_ivl);
			s->lost_ivl = nx;
			continue;
		}
		room = (size_t)(b->end - b->p);
		if (room < MIN_DATA_ROOM)
			return 0;
		n = v->hi - lo;
		if (n > room - STREAM_HDR_MAX)
			n = room - STREAM_HDR_MAX;
		if (n > UINT16_MAX)
			n = UINT16_MAX;
		fin = lo + n == s->snd_end && (s->flags & SF_FIN_SENT);
		f = b->p;
		*f++ = (uint8_t)(FT_STREAM | 0x04 | 0x02 | (fin ? 1 : 0));
		f = fp_varint_put(f, (uint64_t)s->id);
		f = fp_varint_put(f, lo);
		*f++ = (uint8_t)(0x40 | (n >> 8));
		*f++ = (uint8_t)n;
		stream_copy(e, s, lo, f, n, 0);
		b->p = f + n;
		add_range(b, sidx, lo, (uint16_t)n, RK_DATA, fin);
		e->st.pkts_retransmitted_bytes += n;
		b->elicit = 1;
		v->lo = lo + n;
	}
	if (s->lost_ivl != FP_NONE32)
		return 0;
	/* new data within both flow control limits (RFC 9000, 4.1) */
	while (range_room(b)) {
		uint64_t n = s->snd_end - s->snd_off, lim;
		int fin;
		uint8_t *f;
		if (n == 0 && !((s->flags & (SF_FIN_QUEUED | SF_FIN_SENT)) == SF_FIN_QUEUED))
			return 1;
		lim = s->snd_max - s->snd_off;
		if (n > lim) {
			n = lim;
			if (n == 0 && !(s->flags & SF_SDB_DONE)) {
				/* STREAM_DATA_BLOCKED once per limit (RFC 9000, 4.1) */
				s->flags |= SF_P_SDB | SF_SDB_DONE;
			}
		}
		lim = c->peer_max_data - c->sent_data;
		if (n > lim) {
			n = lim;
			if (c->x->dblocked_at != c->peer_max_data) {
				c->x->dblocked_at = c->peer_max_data;
				c->ctl |= CF_DBLOCKED;
			}
		}
		room = (size_t)(b->end - b->p);
		if (room < MIN_DATA_ROOM)
			return 0;
		if (n > room - STREAM_HDR_MAX)
			n = room - STREAM_HDR_MAX;
		if (n > UINT16_MAX)
			n = UINT16_MAX;
		fin = s->snd_off + n == s->snd_end && (s->flags & SF_FIN_QUEUED);
		if (n == 0 && !fin)
			return (s->flags & SF_P_SDB) ? 0 : 1; /* blocked: off the list */
		f = b->p;
		*f++ = (uint8_t)(FT_STREAM | 0x04 | 0x02 | (fin ? 1 : 0));
		f = fp_varint_put(f, (uint64_t)s->id);
		f = fp_varint_put(f, s->snd_off);
		*f++ = (uint8_t)(0x40 | (n >> 8));
		*f++ = (uint8_t)n;
		stream_copy(e, s, s->snd_off, f, n, 1);
		b->p = f + n;
		add_range(b, sidx, s->snd_off, (uint16_t)n, RK_DATA, fin);
		s->snd_off += n;
		c->sent_data += n;
		if (fin)
			s->flags |= SF_FIN_SENT;
		b->elicit = 1;
		if (fin || s->snd_off == s->snd_end)
			return !(s->flags & SF_P_MASK);
	}
	return 0;
}

/* One control frame of a type byte and one varint (MAX_DATA, MAX_STREAMS,
 * DATA_BLOCKED, STREAMS_BLOCKED) when @flag is pending in @ctl and it fits;
 * @track: the packet's record keeps the flag (re-sent when lost). */
static void ctl_varint(struct pktb *b, uint16_t ctl, uint16_t flag, uint8_t type, uint64_t v,
                       int track)
{
	if (!(ctl & flag) || b->end - b->p < 9)
		return;
	*b->p++ = type;
	b->p = fp_varint_put(b->p, v);
	b->c->ctl &= (uint16_t)~flag;
	if (track)
		b->rec.ctl |= flag;
	b->elicit = 1;
}

static void conn_frames(struct pktb *b)
{
	struct fp_conn *c = b->c;
	struct fp_cold *x = c->x;
	uint16_t ctl = c->ctl;
	unsigned i;

	if ((ctl & CF_PING) && b->end - b->p >= 1) {
		*b->p++ = FT_PING;
		c->ctl &= (uint16_t)~CF_PING;
		b->elicit = 1;
	}
	ctl_varint(b, ctl, CF_MAX_DATA, FT_MAX_DATA, x->local_max_data, 1);
	ctl_varint(b, ctl, CF_MAX_SB, FT_MAX_STREAMS_BIDI, x->local_max_sb, 1);
	ctl_varint(b, ctl, CF_MAX_SU, FT_MAX_STREAMS_UNI, x->local_max_su, 1);
	ctl_varint(b, ctl, CF_DBLOCKED, FT_DATA_BLOCKED, c->peer_max_data, 0);
	ctl_varint(b, ctl, CF_SB_BIDI, FT_STREAMS_BLOCKED_BIDI, x->peer_max_sb, 0);
	ctl_varint(b, ctl, CF_SB_UNI, FT_STREAMS_BLOCKED_UNI, x->peer_max_su, 0);
	if (ctl & CF_NEW_CID) {
		int left = 0;
		for (i = 0; i < x->nscids; i++) {
			struct fp_cid *n = &x->scids[i];
			if (!x->scid_pending[i])
				continue;
			if (b->end - b->p < 1 + 8 + 8 + 1 + n->len + FP_TOKEN_LEN) {
				left = 1;
				continue;
			}
			*b->p++ = FT_NEW_CONNECTION_ID;
			b->p = fp_varint_put(b->p, n->seq);
			b->p = fp_varint_put(b->p, 0);
			*b->p++ = n->len;
			memcpy(b->p, n->id, n->len);
			b->p += n->len;
			memcpy(b->p, n->token, FP_TOKEN_LEN);
			b->p += FP_TOKEN_LEN;
			x->scid_pending[i] = 0;
			b->elicit = 1;
		}
		if (!left)
			c->ctl &= (uint16_t)~CF_NEW_CID;
		b->rec.ctl |= CF_NEW_CID;
	}
	if (ctl & CF_RETIRE_CID) {
		while (x->nretire > 0 && b->end - b->p >= 9) {
			*b->p++ = FT_RETIRE_CONNECTION_ID;
			b->p = fp_varint_put(b->p, x->retire_pending[--x->nretire]);
			b->elicit = 1;
		}
		if (x->nretire == 0)
			c->ctl &= (uint16_t)~CF_RETIRE_CID;
	}
	if ((ctl & CF_CHALLENGE) && x->challenge_out && b->end - b->p >= 9) {
		*b->p++ = FT_PATH_CHALLENGE;
		memcpy(b->p, x->challenge, 8);
		b->p += 8;
		c->ctl &= (uint16_t)~CF_CHALLENGE;
		b->rec.ctl |= CF_CHALLENGE;
		b->elicit = 1;
	}
	if ((ctl & CF_RESPONSE) && b->end - b->p >= 9) {
		*b->p++ = FT_PATH_RESPONSE;
		memcpy(b->p, x->response, 8);
		b->p += 8;
		c->ctl &= (uint16_t)~CF_RESPONSE;
		b->elicit = 1;
	}
}

/* Serve the send list: the most urgent class first, round robin in it. */
static void streams_frames(struct pktb *b)
{
	struct fp_conn *c = b->c;
	struct fp_engine *e = c->e;

	while (c->send_head != FP_NONE32 && b->end - b->p >= MIN_DATA_ROOM && range_room(b)) {
		uint32_t i, prev = FP_NONE32, best = FP_NONE32, bestprev = FP_NONE32;
		uint8_t u = 255;
		struct fp_stream *s;

		if (c->send_head == c->send_tail) {
			best = c->send_head; /* one stream: nothing to choose */
		} else {
			for (i = c->send_head; i != FP_NONE32;
			     prev = i, i = e->streams[i].send_next)
				if (e->streams[i].urgency < u) {
					u = e->streams[i].urgency;
					best = i;
					bestprev = prev;
				}
		}
		s = &e->streams[best];
		if (stream_frames(b, s)) {
			/* done: off the list */
			if (bestprev == FP_NONE32)
				c->send_head = s->send_next;
			else
				e->streams[bestprev].send_next = s->send_next;
			if (c->send_tail == best)
				c->send_tail = bestprev;
			s->flags &= ~SF_ON_LIST;
			s->send_next = FP_NONE32;
			fp_stream_maybe_free(c, s);
			if (c->state != ST_OPEN)
				return;
		} else {
			/* room ran out, or the stream is blocked with a frame owed:
			 * to the tail (round robin) and stop */
			if (s->send_next != FP_NONE32) {
				if (bestprev == FP_NONE32)
					c->send_head = s->send_next;
				else
					e->streams[bestprev].send_next = s->send_next;
				e->streams[c->send_tail].send_next = best;
				s->send_next = FP_NONE32;
				c->send_tail = best;
			}
			break;
		}
	}
}

static void close_frame(struct pktb *b)
{
	struct fp_cold *x = b->c->x;
	size_t rl = x->close_reasonlen;

	if ((size_t)(b->end - b->p) < 1 + 8 + 8 + 2 + rl)
		rl = 0;
	*b->p++ = x->close_app ? FT_CLOSE_APP : FT_CLOSE_TRANSPORT;
	b->p = fp_varint_put(b->p, x->close_code);
	if (!x->close_app)
		b->p = fp_varint_put(b->p, x->close_ftype);
	b->p = fp_varint_put(b->p, rl);
	memcpy(b->p, x->close_reason, rl);
	b->p += rl;
}

/* One packet into @pkt. Returns 1, or 0 when there is nothing to send. */
static int build(struct fp_conn *c, struct fp_pkt *pkt, uint64_t now)
{
	struct fp_engine *e = c->e;
	struct fp_cold *x = c->x;
	struct fp_keys *k = &x->keys;
	struct pktb b;
	size_t cap = pkt->cap < c->max_pkt ? pkt->cap : c->max_pkt, hlen, plen, pn_off, len;
	unsigned pnlen;
	uint8_t *d = pkt->data, mask[16];
	int elicit_ok, ack = 0, challenge = 0;
	uint64_t pn = c->tx_pn;

	if (c->state == ST_CLOSING ? !(c->ctl & CF_CLOSE) : c->state != ST_OPEN)
		return 0;
	if (!c->validated) {
		/* RFC 9000, 8.1: 3x what the unvalidated address sent */
		uint64_t allowed = amp_room(c);
		if (allowed < AMP_MIN)
			return 0;
		if (cap > allowed)
			cap = (size_t)allowed;
	}
	elicit_ok = c->state == ST_OPEN && can_elicit(c, now);
	if (c->state == ST_OPEN && !(c->ctl & CF_ACK) && !elicit_ok) {
		if (c->inflight >= c->cwnd && (c->send_head != FP_NONE32 || c->dg_n))
			c->cc_blocked = 1;
		return 0;
	}
	if (c->state == ST_OPEN && !(c->ctl & CF_ACK) && !(c->ctl & ~CF_ACK) &&
	    c->send_head == FP_NONE32 && !c->dg_n)
		return 0;
	/* RFC 9000, 17.3.1 */
	pnlen = fp_pn_len(pn, c->largest_acked);
	pn_off = 1 + (size_t)c->dcid_len;
	d[0] = (uint8_t)(HDR_FIXED | (c->kp ? HDR_KEY_PHASE : 0) | (pnlen - 1));
	/* fixed-size copies (the buffer holds >= 1200 bytes): the CID, then the
	 * packet number's pnlen low bytes big-endian */
	memcpy(d + 1, x->dcid.id, FP_CID_MAX);
	{
		uint32_t be = __builtin_bswap32((uint32_t)pn << (8 * (4 - pnlen)));
		memcpy(d + pn_off, &be, 4);
	}
	hlen = pn_off + pnlen;
	memset(&b, 0, sizeof(b));
	b.c = c;
	b.p = d + hlen;
	b.end = d + cap - FP_TAG_LEN;
	b.rec.more = FP_NONE32;
	b.last_more = FP_NONE32;
	if (c->state == ST_CLOSING) {
		close_frame(&b);
		c->ctl = 0;
	} else {
		if (c->rx_largest != FP_PN_NONE &&
		    ((c->ctl & CF_ACK) || c->rx_unacked || c->ack_at)) {
			/* RFC 9000, 13.2.5 / 19.3: delay in us >> exponent */
			uint64_t dl = ((now - c->rx_largest_t) / 1000) >> x->ack_delay_exp;
			size_t n =
			        fp_ack_write(b.p, (size_t)(b.end - b.p), x->rx_ranges, x->nrx, dl);
			b.p += n;
			ack = n > 0;
			if (ack) {
				c->rx_unacked = 0;
				c->ack_at = 0;
				e->st.acks_out++;
			}
		}
		c->ctl &= (uint16_t)~CF_ACK;
		if (elicit_ok) {
			challenge = (c->ctl & CF_CHALLENGE) && x->challenge_out;
			if (c->dg_n) {
				/* RFC 9221: datagrams first (as quic/send.c) */
				uint8_t *p0 = b.p;
				b.p = fp_dgram_write(c, b.p, b.end, b.p == d + hlen, &b.rec.ctl);
				b.elicit |= b.p != p0;
			}
			if (c->ctl)
				conn_frames(&b);
			if (c->send_head != FP_NONE32)
				streams_frames(&b);
			if (c->state != ST_OPEN && c->state != ST_CLOSING)
				return 0;
		}
	}
	plen = (size_t)(b.p - (d + hlen));
	if (plen == 0)
		return 0;
	/* RFC 9000, 8.2.1: PATH_CHALLENGE datagrams are padded to 1200 bytes */
	if (challenge && hlen + plen + FP_TAG_LEN < CHALLENGE_PAD && cap >= CHALLENGE_PAD) {
		size_t pad = CHALLENGE_PAD - (hlen + plen + FP_TAG_LEN);
		memset(b.p, 0, pad);
		b.p += pad;
		plen += pad;
	}
	/* RFC 9001, 5.4.2: a sample of 16 bytes 4 bytes after the pn */
	if (plen + pnlen < 4) {
		memset(b.p, 0, 4 - pnlen - plen);
		plen = 4 - pnlen;
	}
	len = hlen + plen + FP_TAG_LEN;
	/* RFC 9001, 5.3 and 5.4.1 */
	if (fp_seal(k->tx_aead, k->tx_iv, pn, d, hlen, d + hlen, plen) < 0 ||
	    fp_hp_mask(&k->tx_hp, d + pn_off + 4, mask) < 0) {
		fp_close_local(c, 0, FP_E_INTERNAL, 0, "seal failed", now);
		return 0;
	}
	d[0] ^= mask[0] & 0x1f;
	{
		/* RFC 9001, 5.4.1: the pn bytes, masked in one go */
		uint32_t v, m;
		memcpy(&v, d + pn_off, 4);
		memcpy(&m, mask + 1, 4);
		m &= pnlen == 4 ? 0xffffffffu : ((1u << (8 * pnlen)) - 1);
		v ^= m;
		memcpy(d + pn_off, &v, 4);
	}
	c->tx_pn++;
	if (b.elicit) {
		struct fp_sent *r = &c->ring[pn & c->ring_mask];
		*r = b.rec;
		r->pn_lo = (uint32_t)pn;
		r->t_us = (uint32_t)((now - x->epoch_ns) / 1000);
		r->size = (uint16_t)len;
		r->flags |= PF_USED | PF_ELICIT | PF_INFLIGHT;
		if ((r->flags & (PF_RANGE | PF_FIN)) == PF_RANGE && r->kind == RK_DATA &&
		    r->more == FP_NONE32 && !(r->ctl & CF_DG_MASK))
			r->flags |= PF_SIMPLE;
		c->inflight += len;
		c->last_elicit_t = now;
		if (c->probes > 0)
			c->probes--;
		/* RFC 9000, 10.1 */
		if (!x->elicit_since_rx && x->idle_ns) {
			x->elicit_since_rx = 1;
			x->idle_at =
			        now + (x->idle_ns > 3 * fp_pto(c) ? x->idle_ns : 3 * fp_pto(c));
		}
		/* RFC 9002, 7.7 */
		{
			uint64_t iv = pace_interval(c, len);
			if (c->pace_t + PACE_BURST_PKTS * iv < now)
				c->pace_t = now - PACE_BURST_PKTS * iv;
			c->pace_t += iv;
		}
	}
	if (!c->validated)
		x->path_sent += len;
	x->last_tx_t = now;
	x->pkts_sent++;
	x->bytes_sent += len;
	e->st.pkts_out++;
	e->st.bytes_out += len;
	pkt->len = (uint16_t)len;
	pkt->local = x->local;
	pkt->remote = x->remote;
	pkt->conn = c;
	(void)ack;
	return 1;
}

/*
 * The common packet of a fanout connection, built without the general
 * path's checks: one stream on the send list with new data and credit,
 * nothing else owed (no ACK, no control frame, no lost data, a validated
 * path). Returns the stream, or NULL when build() must do it.
 */
static struct fp_stream *fast_stream(const struct fp_conn *c, uint64_t now)
{
	struct fp_stream *s;

	if (c->state != ST_OPEN || !c->validated || c->ctl || c->rx_unacked || c->ack_at ||
	    c->dg_n || c->send_head == FP_NONE32 || c->send_head != c->send_tail ||
	    !can_elicit(c, now))
		return NULL;
	s = &c->e->streams[c->send_head];
	if ((s->flags & (SF_P_MASK | SF_RESET_SENT)) || s->lost_ivl != FP_NONE32 ||
	    s->snd_off >= s->snd_end || s->snd_off >= s->snd_max ||
	    c->sent_data >= c->peer_max_data || !ring_free(c))
		return NULL;
	return s;
}

/* One STREAM frame of new data of @s (fast_stream's) into @pkt. */
static void build_fast(struct fp_conn *c, struct fp_stream *s, struct fp_pkt *pkt, uint64_t now)
{
	struct fp_engine *e = c->e;
	struct fp_cold *x = c->x;
	struct fp_keys *k = &x->keys;
	uint8_t *d = pkt->data, *f, mask[16];
	uint64_t pn = c->tx_pn, n, lim;
	unsigned pnlen = fp_pn_len(pn, c->largest_acked);
	size_t cap = pkt->cap < c->max_pkt ? pkt->cap : c->max_pkt;
	size_t pn_off = 1 + (size_t)c->dcid_len, hlen = pn_off + pnlen, plen, len;
	struct fp_sent *r = &c->ring[pn & c->ring_mask];
	struct fp_iov v[GATHER_MAX];
	unsigned nv;
	int fin, sealed;

	/* RFC 9000, 17.3.1 (as build()) */
	d[0] = (uint8_t)(HDR_FIXED | (c->kp ? HDR_KEY_PHASE : 0) | (pnlen - 1));
	memcpy(d + 1, x->dcid.id, FP_CID_MAX);
	{
		uint32_t be = __builtin_bswap32((uint32_t)pn << (8 * (4 - pnlen)));
		memcpy(d + pn_off, &be, 4);
	}
	/* RFC 9000, 19.8: STREAM with offset and length, within both limits */
	n = s->snd_end - s->snd_off;
	lim = s->snd_max - s->snd_off;
	if (n > lim)
		n = lim;
	lim = c->peer_max_data - c->sent_data;
	if (n > lim)
		n = lim;
	lim = cap - FP_TAG_LEN - hlen - STREAM_HDR_MAX;
	if (n > lim)
		n = lim;
	fin = s->snd_off + n == s->snd_end && (s->flags & SF_FIN_QUEUED);
	f = d + hlen;
	*f++ = (uint8_t)(FT_STREAM | 0x04 | 0x02 | (fin ? 1 : 0));
	f = fp_varint_put(f, (uint64_t)s->id);
	f = fp_varint_put(f, s->snd_off);
	*f++ = (uint8_t)(0x40 | (n >> 8));
	*f++ = (uint8_t)n;
	plen = (size_t)(f + n - (d + hlen));
	len = hlen + plen + FP_TAG_LEN;
	/* the frame's header where it is, the data where the caller's chunks
	 * hold it: sealed from there into the packet, not copied first (gcm.c);
	 * with wolfCrypt, or data in too many pieces, copied and sealed in place */
	nv = fp_aes_gathers(k->tx_aead)
	             ? stream_pieces(e, s, s->snd_off, (size_t)n, v + 1, GATHER_MAX - 1)
	             : 0;
	if (nv == 0)
		stream_copy(e, s, s->snd_off, f, n, 1);
	/* the sent record, its one range inline */
	r->pn_lo = (uint32_t)pn;
	r->t_us = (uint32_t)((now - x->epoch_ns) / 1000);
	r->off = s->snd_off;
	r->sidx = (uint32_t)(s - e->streams);
	r->len = (uint16_t)n;
	r->size = (uint16_t)len;
	r->flags = PF_USED | PF_ELICIT | PF_INFLIGHT | PF_RANGE | (fin ? PF_FIN : PF_SIMPLE);
	r->kind = RK_DATA;
	r->ctl = 0;
	r->more = FP_NONE32;
	s->refs++;
	s->snd_off += n;
	c->sent_data += n;
	if (fin)
		s->flags |= SF_FIN_SENT;
	if (!fin && s->snd_off < s->snd_end && s->snd_off == s->snd_max &&
	    !(s->flags & SF_SDB_DONE)) {
		/* RFC 9000, 4.1: blocked by the stream's limit, said once; the
		 * general path writes the frame next */
		s->flags |= SF_P_SDB | SF_SDB_DONE;
	} else if (fin || s->snd_off == s->snd_end || s->snd_off == s->snd_max ||
	           c->sent_data == c->peer_max_data) {
		/* nothing more now: off the send list (a write or more credit
		 * puts it back) */
		s->flags &= ~SF_ON_LIST;
		s->send_next = FP_NONE32;
		c->send_head = c->send_tail = FP_NONE32;
	}
	if (s->snd_off < s->snd_end && c->sent_data == c->peer_max_data &&
	    x->dblocked_at != c->peer_max_data) {
		x->dblocked_at = c->peer_max_data;
		c->ctl |= CF_DBLOCKED;
	}
	/* RFC 9001, 5.3 and 5.4.1 */
	if (nv > 0) {
		v[0].base = d + hlen;
		v[0].len = (size_t)(f - (d + hlen));
		sealed = fp_sealv(k->tx_aead, k->tx_iv, pn, d, hlen, v, nv + 1, d + hlen, plen);
		e->st.pkts_gathered++;
	} else {
		sealed = fp_seal(k->tx_aead, k->tx_iv, pn, d, hlen, d + hlen, plen);
	}
	if (sealed < 0 || fp_hp_mask(&k->tx_hp, d + pn_off + 4, mask) < 0) {
		fp_close_local(c, 0, FP_E_INTERNAL, 0, "seal failed", now);
		pkt->len = 0;
		return;
	}
	d[0] ^= mask[0] & 0x1f;
	{
		uint32_t w, m;
		memcpy(&w, d + pn_off, 4);
		memcpy(&m, mask + 1, 4);
		m &= pnlen == 4 ? 0xffffffffu : ((1u << (8 * pnlen)) - 1);
		w ^= m;
		memcpy(d + pn_off, &w, 4);
	}
	c->tx_pn++;
	c->inflight += len;
	c->last_elicit_t = now;
	if (c->probes > 0)
		c->probes--;
	if (!x->elicit_since_rx && x->idle_ns) {
		uint64_t p3 = 3 * fp_pto(c);
		x->elicit_since_rx = 1;
		x->idle_at = now + (x->idle_ns > p3 ? x->idle_ns : p3);
	}
	{
		uint64_t iv = pace_interval(c, len);
		if (c->pace_t + PACE_BURST_PKTS * iv < now)
			c->pace_t = now - PACE_BURST_PKTS * iv;
		c->pace_t += iv;
	}
	x->last_tx_t = now;
	x->pkts_sent++;
	x->bytes_sent += len;
	e->st.pkts_out++;
	e->st.bytes_out += len;
	pkt->len = (uint16_t)len;
	pkt->local = x->local;
	pkt->remote = x->remote;
	pkt->conn = c;
}

int fp_conn_send(struct fp_conn *c, struct fp_pkt *pkts, size_t n, uint64_t now)
{
	size_t done = 0;

	if (c == NULL || pkts == NULL || c->e == NULL)
		return MOQ_ERR_INVAL;
	if (c->state == ST_DEAD)
		return 0;
	c->x->busy++;
	c->x->now = now;
	while (done < n) {
		struct fp_stream *fs;

		if (pkts[done].cap < FP_MIN_PKT_BUF)
			break;
		fs = fast_stream(c, now);
		if (fs != NULL) {
			build_fast(c, fs, &pkts[done], now);
			if (pkts[done].len == 0)
				break; /* the seal failed: closed */
			done++;
			continue;
		}
		if (!build(c, &pkts[done], now)) {
			/* nothing more, or held back (window, pacer, amplification
			 * limit: an ACK or the timer makes it ready again) */
			fp_ready_del(c);
			break;
		}
		done++;
	}
	fp_conn_timer(c);
	if (--c->x->busy == 0 && c->x->free_pending) {
		c->x->free_pending = 0;
		fp_conn_free(c);
	}
	return (int)done;
}
