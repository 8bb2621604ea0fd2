/* SPDX-License-Identifier: MIT */
/*
 * send.c: the send path: the write loop over the ready list (stateless
 * replies first, then connections round robin, streams by urgency).
 */
#include "quic_int.h"

#include <string.h>

/* iovecs handed to ngtcp2 per writev call. */
#define WRITE_VECS 16
/* A packet with at least this much room left was not filled because ngtcp2
 * had nothing more to put in it (its control frames are shorter; STREAM and
 * CRYPTO frames are split to fit). */
#define PKT_ROOM_LEFT 256

/* Build the iovec list from sent_off, at most @max entries and no more than
 * needed to cover @bytes (one packet's worth: ngtcp2 walks every entry it is
 * given); sets *all when it reaches end_off. */
static size_t strm_vecs(const struct quic_strm *s, ngtcp2_vec *v, size_t max, size_t bytes,
                        int *all)
{
	uint32_t i = s->send_idx;
	size_t pos = s->send_pos, n = 0, total = 0;

	while (i < s->n && n < max && total < bytes) {
		const struct sq_ent *e = &s->ents[i];

		v[n].base = (uint8_t *)(uintptr_t)(e->base + pos);
		v[n].len = e->len - pos;
		total += v[n].len;
		n++;
		pos = 0;
		i++;
	}
	*all = (i >= s->n);
	return n;
}

static void strm_advance(struct quic_strm *s, size_t len)
{
	s->sent_off += len;
	while (len > 0 && s->send_idx < s->n) {
		size_t left = s->ents[s->send_idx].len - s->send_pos;

		if (len < left) {
			s->send_pos += len;
			return;
		}
		len -= left;
		s->send_idx++;
		s->send_pos = 0;
	}
}

/* Copy a socket address; IPv4 as a fixed-size copy (per packet). */
static inline void addr_set(struct moq_quic_addr *dst, const ngtcp2_sockaddr *sa,
                            ngtcp2_socklen len)
{
	if (len == sizeof(struct sockaddr_in))
		dst->u.in4 = *(const struct sockaddr_in *)(const void *)sa;
	else
		memcpy(&dst->u, sa, len <= sizeof(dst->u) ? len : sizeof(dst->u));
	dst->len = len;
}

/* Write up to @n packets of @c into @pkts; returns the count and sets *more
 * when the connection may still have something to send. */
static size_t conn_write(struct moq_quic_conn *c, struct moq_quic_pkt *pkts, size_t n, uint64_t now,
                         int *more)
{
	struct moq_quic_endpoint *ep = c->ep;
	ngtcp2_path_storage ps;
	ngtcp2_pkt_info pi;
	size_t i = 0, max_pkts, maxlen;

	*more = 0;
	if (c->state == CS_CLOSING) {
		if (c->close_pending && n > 0 && pkts[0].cap >= c->close_len) {
			memcpy(pkts[0].data, c->close_buf, c->close_len);
			pkts[0].len = c->close_len;
			pkts[0].local = c->local;
			pkts[0].remote = c->remote;
			pkts[0].ecn = 0;
			c->close_pending = 0;
			return 1;
		}
		return 0;
	}
	if (c->state >= CS_DRAINING)
		return 0;

	maxlen = ngtcp2_conn_get_max_tx_udp_payload_size(c->q);
	max_pkts = ngtcp2_conn_get_send_quantum(c->q) / maxlen;
	if (max_pkts == 0)
		max_pkts = 1;
	if (max_pkts > n)
		max_pkts = n;
	ngtcp2_path_storage_zero(&ps);

	while (i < max_pkts) {
		struct moq_quic_pkt *pk = &pkts[i];
		size_t cap = pk->cap < ep->cfg.max_udp_payload ? pk->cap : ep->cfg.max_udp_payload;
		uint32_t tries = c->npend + 1;
		ngtcp2_ssize nw;
		int dg_done = 0;

		for (;;) {
			/* the most urgent non-empty class; round robin inside it */
			struct quic_strm *s = tries > 0 && c->pend_mask
			                              ? c->pend_head[__builtin_ctz(c->pend_mask)]
			                              : NULL;
			ngtcp2_vec v[WRITE_VECS];
			size_t vcnt = 0;
			int64_t sid = -1;
			uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
			ngtcp2_ssize ndatalen = -1;
			int all = 0;

			if (!dg_done && dgram_pending(c)) {
				/* datagrams first (dgram.c), as many as fit */
				int acc;
				c->in_ng = 1;
				nw = dgram_write(c, &ps.path, &pi, pk->data, cap, now, &acc);
				c->in_ng = 0;
				if (nw == NGTCP2_ERR_WRITE_MORE)
					continue;
				if (acc || nw != 0)
					break; /* the packet is written (or an error) */
				dg_done = 1; /* nothing written: stream data next */
				continue;
			}
			if (tries > 0)
				tries--;
			if (s) {
				vcnt = strm_vecs(s, v, WRITE_VECS, cap, &all);
				sid = s->id;
				if (all && s->fin_queued)
					flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
				/* the last stream with data: ngtcp2 closes the
				 * packet in this call (no WRITE_MORE round trip) */
				if (all && c->npend == 1)
					flags &= ~(uint32_t)NGTCP2_WRITE_STREAM_FLAG_MORE;
			}
			c->in_ng = 1;
			nw = ngtcp2_conn_writev_stream(c->q, &ps.path, &pi, pk->data, cap,
			                               &ndatalen, flags, sid, v, vcnt, now);
			c->in_ng = 0;
			if (s && ndatalen >= 0) {
				strm_advance(s, (size_t)ndatalen);
				if ((flags & NGTCP2_WRITE_STREAM_FLAG_FIN) &&
				    s->sent_off == s->end_off)
					s->fin_sent = 1;
				pend_del(c, s);
				if (strm_has_unsent(s))
					pend_add(c, s); /* to the tail: round robin */
			}
			if (nw == NGTCP2_ERR_WRITE_MORE)
				continue;
			if (nw == NGTCP2_ERR_STREAM_DATA_BLOCKED && s) {
				pend_del(c, s);
				s->blocked = 1;
				continue;
			}
			if ((nw == NGTCP2_ERR_STREAM_SHUT_WR ||
			     nw == NGTCP2_ERR_STREAM_NOT_FOUND) &&
			    s) {
				pend_del(c, s);
				s->wr_closed = 1;
				continue;
			}
			break;
		}
		if (nw < 0) {
			conn_fail(c, (int)nw, now);
			if (c->state == CS_CLOSING && i < n)
				i += conn_write(c, pkts + i, n - i, now, more);
			*more = 0;
			return i;
		}
		if (nw == 0) {
			c->expired = 0; /* all ngtcp2 had, probes included */
			break;
		}
		pk->len = (size_t)nw;
		addr_set(&pk->local, ps.path.local.addr, ps.path.local.addrlen);
		addr_set(&pk->remote, ps.path.remote.addr, ps.path.remote.addrlen);
		pk->ecn = (uint8_t)pi.ecn;
		c->bytes_sent += (size_t)nw;
		i++;
		if (i == max_pkts) {
			*more = 1;
		} else if (c->npend == 0 && !dgram_pending(c) && !c->expired && c->server &&
		           c->state == CS_ESTABLISHED && (size_t)nw + PKT_ROOM_LEFT <= maxlen &&
		           (size_t)nw + PKT_ROOM_LEFT <= cap) {
			/* No stream has data and ngtcp2 did not fill the packet:
			 * it has nothing more, and asking costs a writev call
			 * per connection written. Not after a timer fired (PTO
			 * probes come in pairs): then until ngtcp2 says 0. */
			break;
		}
	}
	if (i > 0)
		ngtcp2_conn_update_pkt_tx_time(c->q, now);
	if (c->close_req) {
		/* the application closed from a callback during the write */
		conn_after_ng(c, now);
		if (c->state == CS_CLOSING && i < n)
			i += conn_write(c, pkts + i, n - i, now, more);
		*more = 0;
	}
	return i;
}

int moq_quic_endpoint_send(struct moq_quic_endpoint *ep, struct moq_quic_pkt *pkts, size_t n,
                           uint64_t now)
{
	size_t i = 0, k, rounds, w;

	if (ep == NULL || (pkts == NULL && n > 0))
		return MOQ_ERR_INVAL;
	for (k = 0; k < n; k++)
		if (pkts[k].data == NULL || pkts[k].cap < MOQ_QUIC_MIN_PKT_BUF)
			return MOQ_ERR_INVAL;
	ep->now = now;
	/* stateless replies first */
	while (i < n && ep->slq_n > 0) {
		struct sl_pkt *p = &ep->slq[ep->slq_head];

		memcpy(pkts[i].data, p->buf, p->len);
		pkts[i].len = p->len;
		pkts[i].local = p->local;
		pkts[i].remote = p->remote;
		pkts[i].ecn = 0;
		ep->slq_head = (ep->slq_head + 1) % ep->slq_cap;
		ep->slq_n--;
		i++;
	}
	/* connections round robin; each visited at most once per call */
	rounds = 0;
	for (k = 0; ep->rhead; k++) {
		struct moq_quic_conn *c = ep->rhead;
		int more = 0;

		if (i >= n)
			break;
		if (rounds == 0)
			rounds = ep->rcount; /* those ready now, once each */
		if (k >= rounds)
			break;
		ready_del(c);
		w = conn_write(c, pkts + i, n - i, now, &more);
		i += w;
		if (c->exp_check) {
			c->exp_check = 0;
			if (w == 0)
				ep->st.timer_idle++; /* the expiry made nothing to send */
		}
		if (c->state == CS_DEAD) {
			conn_free(c);
			continue;
		}
		if (more)
			ready_add(c);
		if (w > 0)
			conn_update_timer_sent(c, now); /* a new pacing timestamp */
		else
			conn_update_timer(c);
	}
	/* the fast path's connections (handoff.c) */
	if (i < n)
		i += hand_send(ep, pkts + i, n - i, now);
	ep->st.pkts_out += i;
	for (k = 0; k < i; k++)
		ep->st.bytes_out += pkts[k].len;
	return (int)i;
}

int moq_quic_endpoint_pending(const struct moq_quic_endpoint *ep)
{
	return ep != NULL && (ep->slq_n > 0 || ep->rhead != NULL || hand_pending(ep));
}
