/* SPDX-License-Identifier: MIT */
/*
 * stateless.c: stateless replies: version negotiation, Retry, CONNECTION_CLOSE
 * without state and stateless reset, queued for _send and bounded by the
 * anti-amplification limit.
 */
#include "quic_int.h"

#include <string.h>

/* RFC 9000, 14.1: a client Initial datagram is at least 1200 bytes; VN and
 * Retry only answer datagrams that size (RFC 9000, 6.1 / 8.1). */
#define MIN_INITIAL_DGRAM 1200
/* RFC 9000, 8.1: at most 3x the bytes received from an unvalidated address. */
#define AMPLIFICATION_FACTOR 3

/* ----------------------------------------------------- stateless replies */

static struct sl_pkt *sl_slot(struct moq_quic_endpoint *ep)
{
	if (ep->slq_n == ep->slq_cap) {
		ep->st.stateless_queue_full++;
		return NULL;
	}
	return &ep->slq[(ep->slq_head + ep->slq_n) % ep->slq_cap];
}

/* Commit a reply written into @p: RFC 9000, 8.1: never more than three times
 * the bytes of the datagram that triggered it (no state, so the address is
 * never validated). */
static void sl_commit(struct moq_quic_endpoint *ep, struct sl_pkt *p, size_t len,
                      size_t trigger_len, const struct moq_quic_addr *local,
                      const struct moq_quic_addr *remote)
{
	if (len > AMPLIFICATION_FACTOR * trigger_len) {
		ep->st.amplification_drops++;
		return;
	}
	p->len = len;
	p->local = *local;
	p->remote = *remote;
	ep->slq_n++;
}

void send_version_negotiation(struct moq_quic_endpoint *ep, const ngtcp2_version_cid *vc,
                              size_t dgram_len, const struct moq_quic_addr *local,
                              const struct moq_quic_addr *remote)
{
	/* RFC 9000, 6.1: list what we support; RFC 8999, 6: echo the CIDs
	 * swapped. */
	static const uint32_t versions[] = {NGTCP2_PROTO_VER_V1};
	struct sl_pkt *p;
	uint8_t r;
	ngtcp2_ssize n;

	if (dgram_len < MIN_INITIAL_DGRAM) {
		ep->st.pkts_dropped++;
		return;
	}
	p = sl_slot(ep);
	if (p == NULL)
		return;
	quic_rand(ep, &r, 1);
	n = ngtcp2_pkt_write_version_negotiation(p->buf, sizeof(p->buf), r, vc->scid, vc->scidlen,
	                                         vc->dcid, vc->dcidlen, versions, 1);
	if (n <= 0)
		return;
	ep->st.vn_sent++;
	sl_commit(ep, p, (size_t)n, dgram_len, local, remote);
}

void send_retry(struct moq_quic_endpoint *ep, const ngtcp2_pkt_hd *hd, size_t dgram_len,
                const struct moq_quic_addr *local, const struct moq_quic_addr *remote, uint64_t now)
{
	uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN];
	ngtcp2_cid scid;
	ngtcp2_ssize tlen, n;
	struct sl_pkt *p;

	if (dgram_len < MIN_INITIAL_DGRAM) {
		ep->st.pkts_dropped++;
		return;
	}
	p = sl_slot(ep);
	if (p == NULL)
		return;
	make_cid(ep, &scid);
	/* RFC 9000, 8.1.2: the token binds the client address, the original
	 * DCID and a timestamp, authenticated with the static secret. */
	tlen = ngtcp2_crypto_generate_retry_token(token, ep->secret, sizeof(ep->secret),
	                                          hd->version, &remote->u.sa, remote->len, &scid,
	                                          &hd->dcid, now);
	if (tlen < 0)
		return;
	n = ngtcp2_crypto_write_retry(p->buf, sizeof(p->buf), hd->version, &hd->scid, &scid,
	                              &hd->dcid, token, (size_t)tlen);
	if (n <= 0)
		return;
	ep->st.retry_sent++;
	sl_commit(ep, p, (size_t)n, dgram_len, local, remote);
}

/* A CONNECTION_CLOSE in an Initial packet, without creating state
 * (refusals and invalid tokens, RFC 9000, 8.1.2 / 5.2.2). */
void send_stateless_close(struct moq_quic_endpoint *ep, const ngtcp2_pkt_hd *hd, uint64_t code,
                          size_t dgram_len, const struct moq_quic_addr *local,
                          const struct moq_quic_addr *remote)
{
	ngtcp2_ssize n;
	struct sl_pkt *p = sl_slot(ep);

	if (p == NULL)
		return;
	/* SCID = the client's DCID: the Initial keys derive from it
	 * (RFC 9001, 5.2), so the client can read the close. */
	n = ngtcp2_crypto_write_connection_close(p->buf, sizeof(p->buf), hd->version, &hd->scid,
	                                         &hd->dcid, code, NULL, 0);
	if (n <= 0)
		return;
	sl_commit(ep, p, (size_t)n, dgram_len, local, remote);
}

/* RFC 9000, 10.3: a stateless reset for a short-header packet we have no
 * connection for; always shorter than the trigger (so two endpoints cannot
 * loop), rate-limited by a token bucket. */
void send_stateless_reset(struct moq_quic_endpoint *ep, const uint8_t *dcid, size_t dcidlen,
                          size_t dgram_len, const struct moq_quic_addr *local,
                          const struct moq_quic_addr *remote, uint64_t now)
{
	uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN];
	uint8_t rnd[SRESET_SHORT_TRIGGER];
	ngtcp2_cid cid;
	size_t len;
	ngtcp2_ssize n;
	struct sl_pkt *p;
	double rate = ep->cfg.stateless_reset_per_s, burst = rate / 10 + 1;

	if (dgram_len <= SRESET_MIN_LEN) {
		ep->st.sreset_too_small++;
		return;
	}
	if (now > ep->sr_ts) {
		ep->sr_tokens += (double)(now - ep->sr_ts) * rate / 1e9;
		if (ep->sr_tokens > burst)
			ep->sr_tokens = burst;
		ep->sr_ts = now;
	}
	if (ep->sr_tokens < 1.0) {
		ep->st.sreset_rate_limited++;
		return;
	}
	p = sl_slot(ep);
	if (p == NULL)
		return;
	ep->sr_tokens -= 1.0;
	if (dgram_len <= SRESET_SHORT_TRIGGER) {
		len = dgram_len - 1;
	} else {
		uint8_t r;

		quic_rand(ep, &r, 1);
		/* between 43 bytes and the trigger - 1 */
		len = SRESET_SHORT_TRIGGER + r % (dgram_len - SRESET_SHORT_TRIGGER);
		if (len >= dgram_len)
			len = dgram_len - 1;
		if (len > sizeof(rnd) + 1 + NGTCP2_STATELESS_RESET_TOKENLEN)
			len = sizeof(rnd) + 1 + NGTCP2_STATELESS_RESET_TOKENLEN;
	}
	ngtcp2_cid_init(&cid, dcid, dcidlen);
	if (ngtcp2_crypto_generate_stateless_reset_token(token, ep->secret, sizeof(ep->secret),
	                                                 &cid) != 0)
		return;
	quic_rand(ep, rnd, sizeof(rnd));
	n = ngtcp2_pkt_write_stateless_reset(p->buf, sizeof(p->buf), token, rnd,
	                                     len - 1 - NGTCP2_STATELESS_RESET_TOKENLEN);
	if (n <= 0)
		return;
	ep->st.sreset_sent++;
	sl_commit(ep, p, (size_t)n, dgram_len, local, remote);
}
