/* SPDX-License-Identifier: MIT */
/*
 * timer.c: the timer heap: each connection keyed by its next expiry
 * (ngtcp2's, or the end of its closing / draining period).
 */
#include "quic_int.h"

/* ------------------------------------------------------------ timer heap */

static void heap_swap(struct moq_quic_endpoint *ep, uint32_t a, uint32_t b)
{
	struct moq_quic_conn *t = ep->heap[a];

	ep->heap[a] = ep->heap[b];
	ep->heap[b] = t;
	ep->heap[a]->hidx = a;
	ep->heap[b]->hidx = b;
}

static void heap_up(struct moq_quic_endpoint *ep, uint32_t i)
{
	while (i > 0) {
		uint32_t p = (i - 1) / 2;

		if (ep->heap[p]->hkey <= ep->heap[i]->hkey)
			break;
		heap_swap(ep, p, i);
		i = p;
	}
}

static void heap_down(struct moq_quic_endpoint *ep, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < ep->heap_n && ep->heap[l]->hkey < ep->heap[m]->hkey)
			m = l;
		if (r < ep->heap_n && ep->heap[r]->hkey < ep->heap[m]->hkey)
			m = r;
		if (m == i)
			return;
		heap_swap(ep, i, m);
		i = m;
	}
}

void heap_remove(struct moq_quic_endpoint *ep, struct moq_quic_conn *c)
{
	uint32_t i = c->hidx;

	if (i == UINT32_MAX)
		return;
	ep->heap_n--;
	if (i != ep->heap_n) {
		ep->heap[i] = ep->heap[ep->heap_n];
		ep->heap[i]->hidx = i;
		heap_down(ep, i);
		heap_up(ep, i);
	}
	c->hidx = UINT32_MAX;
}

/* The heap holds max_conns entries (allocated up front). */
static void heap_set(struct moq_quic_endpoint *ep, struct moq_quic_conn *c, uint64_t key)
{
	if (key == UINT64_MAX) {
		heap_remove(ep, c);
		return;
	}
	if (c->hidx == UINT32_MAX) {
		c->hidx = ep->heap_n++;
		ep->heap[c->hidx] = c;
		c->hkey = key;
		heap_up(ep, c->hidx);
		return;
	}
	c->hkey = key;
	heap_down(ep, c->hidx);
	heap_up(ep, c->hidx);
}

/*
 * ngtcp2's expiry, never at or before a time its handle_expiry already ran
 * at. ngtcp2 0.12.1 says a retired CID's removal is due at retired_ts + pto
 * (ngtcp2_conn_internal_expiry) but handle_expiry removes it only once the
 * time is past that (conn_remove_retired_connection_id keeps it while
 * retired_ts + pto >= ts; the same for retired and bound DCIDs): at that
 * very time the expiry stays due after being handled, and a loop whose
 * clock waits for the next expiry (virtual time, quic/link.c) never moves.
 * A peer that moves us to a new CID, as the fast path does after a NAT
 * rebinding, starts such a timer. What handle_expiry left due at exp_ts is
 * due 1 ns later, when ngtcp2 does remove it.
 */
static uint64_t ng_expiry(const struct moq_quic_conn *c)
{
	uint64_t key = ngtcp2_conn_get_expiry(c->q);

	return key <= c->exp_ts ? c->exp_ts + 1 : key;
}

void conn_update_timer(struct moq_quic_conn *c)
{
	uint64_t key;

	if (c->state == CS_DEAD)
		key = 0;
	else if (c->state >= CS_CLOSING)
		key = c->deadline;
	else
		key = ng_expiry(c);
	heap_set(c->ep, c, key);
}

/* ngtcp2 0.12.1 lets a packet go when its pacing timestamp is at most this
 * far ahead (lib/ngtcp2_conn.c, NGTCP2_PKT_PACING_OVERHEAD). */
#define PACING_SLACK_NS 1000000ull

/*
 * After a write. ngtcp2 sets a pacing timestamp after every burst
 * (ngtcp2_conn_update_pkt_tx_time) and its expiry includes it, but it sends
 * anyway when that timestamp is <= 1 ms ahead: such a timer only woke the
 * connection for a handle_expiry and a write with nothing to send, once per
 * burst (bench_moq_fanout --scope relay: 220k expiries for 178k packets,
 * 15% of the relay's instructions). When the next expiry is that close and
 * every timer is still in the future, handle_expiry now does nothing but
 * drop the pacing timestamp (ngtcp2_conn_handle_expiry: each part acts on
 * expired timers only). A pacing wait > 1 ms, one that holds packets back,
 * stays a timer.
 */
void conn_update_timer_sent(struct moq_quic_conn *c, uint64_t now)
{
	uint64_t key;

	if (c->state != CS_ESTABLISHED || c->in_ng) {
		conn_update_timer(c);
		return;
	}
	key = ng_expiry(c);
	if (key > now && key <= now + PACING_SLACK_NS) {
		int rv;

		c->in_ng = 1;
		rv = ngtcp2_conn_handle_expiry(c->q, now);
		c->in_ng = 0;
		c->exp_ts = now;
		c->ep->st.timer_inline++;
		if (rv == 0)
			key = ng_expiry(c);
	}
	heap_set(c->ep, c, key);
}

int moq_quic_endpoint_timers(struct moq_quic_endpoint *ep, uint64_t now)
{
	int done = 0;

	if (ep == NULL)
		return MOQ_ERR_INVAL;
	ep->now = now;
	mem_trim(ep, now); /* spares unused for a period go back (alloc.c) */

	/* the fast path's wheel first: a connection it closes is CS_DEAD
	 * with key 0 here, freed by the loop below */
	done += hand_timers(ep, now);
	while (ep->heap_n > 0 && ep->heap[0]->hkey <= now) {
		struct moq_quic_conn *c = ep->heap[0];
		int rv;

		done++;
		if (c->state >= CS_CLOSING) {
			/* end of the closing / draining period */
			conn_free(c);
			continue;
		}
		c->expired = 1;
		ep->st.timer_expiries++;
		c->exp_check = 1; /* send.c: did the next write send anything? */
		c->in_ng = 1;
		rv = ngtcp2_conn_handle_expiry(c->q, now);
		c->in_ng = 0;
		c->exp_ts = now;
		if (rv != 0)
			conn_fail(c, rv, now);
		else
			conn_after_ng(c, now);
		if (c->state == CS_DEAD) {
			conn_free(c);
			continue;
		}
		ready_add(c);
		conn_update_timer(c);
		/* an expiry ngtcp2 does not clear (pacing) is retried by _send */
		if (c->hidx != UINT32_MAX && c->hkey <= now)
			heap_set(ep, c, now + 1);
	}
	return done;
}

uint64_t moq_quic_endpoint_next_expiry(const struct moq_quic_endpoint *ep)
{
	uint64_t fp;

	if (ep == NULL)
		return UINT64_MAX;
	fp = hand_next_expiry(ep);
	if (ep->heap_n == 0 || fp < ep->heap[0]->hkey)
		return fp;
	return ep->heap[0]->hkey;
}
