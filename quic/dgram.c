/* SPDX-License-Identifier: MIT */
/*
 * dgram.c: RFC 9221 DATAGRAM frames (quic.h, "datagrams"): a bounded queue
 * per connection of datagrams that reference caller memory (a small header
 * copied, the payload referenced until written), written first into the
 * connection's packets by send.c, and the receive callback. Nothing is
 * retransmitted.
 */
#include "quic_int.h"

#include <stdlib.h>
#include <string.h>

#include "fastpath.h"

/* Room left in a packet for what ngtcp2 may put before the datagram: an ACK
 * frame with a few ranges (RFC 9000, 19.3). */
#define ACK_ROOM 32
/* The DATAGRAM frame's own header: type 0x31 and a length varint. */
#define FRAME_HDR 9
/* Short header: flags, DCID, the longest packet number; then the AEAD tag. */
#define SHORT_HDR_EXTRA (1 + 4)
#define AEAD_TAG        16

struct dgram_ent {
	uint8_t hdr[MOQ_QUIC_DGRAM_HDR_MAX];
	uint8_t hdrlen;
	uint8_t iovcnt;
	struct iovec iov[MOQ_QUIC_DGRAM_IOV];
	void (*release)(void *arg);
	void *arg;
};

struct quic_dgq {
	uint32_t head, n;
	struct dgram_ent e[MOQ_QUIC_DGRAM_QUEUE];
};

static void ent_release(struct dgram_ent *e)
{
	if (e->release)
		e->release(e->arg);
	e->release = NULL;
}

static void dq_pop(struct quic_dgq *q)
{
	ent_release(&q->e[q->head]);
	q->head = (q->head + 1) % MOQ_QUIC_DGRAM_QUEUE;
	q->n--;
}

int dgram_negotiated(const struct moq_quic_conn *c)
{
	const ngtcp2_transport_params *rp;

	if (c->q == NULL || c->ep->cfg.max_datagram_frame_size == 0)
		return 0;
	rp = ngtcp2_conn_get_remote_transport_params(c->q);
	return rp != NULL && rp->max_datagram_frame_size > 0;
}

size_t moq_quic_dgram_max(const struct moq_quic_conn *c)
{
	const ngtcp2_transport_params *rp;
	size_t pkt, over, fmax;

	if (c == NULL || c->close_req || c->notified)
		return 0;
	if (c->fp != NULL)
		return fp_dgram_max(c->fp); /* handed off: the engine's limits */
	if (c->q == NULL || c->state != CS_ESTABLISHED || !dgram_negotiated(c))
		return 0;
	rp = ngtcp2_conn_get_remote_transport_params(c->q);
	pkt = ngtcp2_conn_get_max_tx_udp_payload_size(c->q);
	if (pkt > c->ep->cfg.max_udp_payload)
		pkt = c->ep->cfg.max_udp_payload;
	over = SHORT_HDR_EXTRA + ngtcp2_conn_get_dcid(c->q)->datalen + AEAD_TAG + FRAME_HDR +
	       ACK_ROOM;
	if (pkt <= over)
		return 0;
	pkt -= over;
	/* RFC 9221, 3: the limit counts the whole frame (type, length) */
	fmax = rp->max_datagram_frame_size > FRAME_HDR
	               ? (size_t)(rp->max_datagram_frame_size - FRAME_HDR)
	               : 0;
	return pkt < fmax ? pkt : fmax;
}

int moq_quic_dgram_send(struct moq_quic_conn *c, const uint8_t *hdr, size_t hdrlen,
                        const struct iovec *iov, size_t iovcnt, void (*release)(void *arg),
                        void *arg)
{
	struct quic_dgq *q;
	struct dgram_ent *e;
	size_t total = hdrlen, max;

	if (c == NULL || hdrlen > MOQ_QUIC_DGRAM_HDR_MAX || iovcnt > MOQ_QUIC_DGRAM_IOV ||
	    (hdrlen && hdr == NULL) || (iovcnt && iov == NULL))
		return MOQ_ERR_INVAL;
	if (c->fp != NULL && !c->close_req && !c->notified) {
		/* handed off: the engine's queue, the same contract */
		struct fp_iov v[MOQ_QUIC_DGRAM_IOV];

		for (size_t i = 0; i < iovcnt; i++) {
			v[i].base = iov[i].iov_base;
			v[i].len = iov[i].iov_len;
		}
		return fp_dgram_send(c->fp, hdr, hdrlen, v, iovcnt, release, arg);
	}
	max = moq_quic_dgram_max(c);
	if (max == 0)
		return MOQ_ERR_STATE;
	for (size_t i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	if (total > max)
		return MOQ_ERR_TOO_LARGE;
	if (c->dq == NULL && (c->dq = calloc(1, sizeof(*c->dq))) == NULL)
		return MOQ_ERR_NOMEM;
	q = c->dq;
	if (q->n == MOQ_QUIC_DGRAM_QUEUE) {
		/* live media: the newest goes, the oldest is dropped */
		dq_pop(q);
		c->ep->st.dgrams_dropped++;
	}
	e = &q->e[(q->head + q->n) % MOQ_QUIC_DGRAM_QUEUE];
	memcpy(e->hdr, hdr, hdrlen);
	e->hdrlen = (uint8_t)hdrlen;
	e->iovcnt = (uint8_t)iovcnt;
	for (size_t i = 0; i < iovcnt; i++)
		e->iov[i] = iov[i];
	e->release = release;
	e->arg = arg;
	q->n++;
	ready_add(c);
	return 0;
}

int dgram_pending(const struct moq_quic_conn *c)
{
	return c->dq != NULL && c->dq->n > 0;
}

/* Write the oldest queued datagram into the packet being built at @dest
 * (NGTCP2_WRITE_DATAGRAM_FLAG_MORE: ngtcp2 may ask for more frames with
 * NGTCP2_ERR_WRITE_MORE). *@accepted: it went into the packet (and is
 * released). One ngtcp2 refuses (the peer's limit; the state) is dropped
 * and 0 returned, as when nothing was written. */
ngtcp2_ssize dgram_write(struct moq_quic_conn *c, ngtcp2_path *path, ngtcp2_pkt_info *pi,
                         uint8_t *dest, size_t cap, uint64_t now, int *accepted)
{
	struct quic_dgq *q = c->dq;
	struct dgram_ent *e = &q->e[q->head];
	ngtcp2_vec v[1 + MOQ_QUIC_DGRAM_IOV];
	size_t vn = 0;
	ngtcp2_ssize nw;

	*accepted = 0;
	if (e->hdrlen) {
		v[vn].base = e->hdr;
		v[vn++].len = e->hdrlen;
	}
	for (unsigned i = 0; i < e->iovcnt; i++) {
		if (e->iov[i].iov_len == 0)
			continue; /* ngtcp2 takes no empty vectors */
		v[vn].base = e->iov[i].iov_base;
		v[vn++].len = e->iov[i].iov_len;
	}
	nw = ngtcp2_conn_writev_datagram(c->q, path, pi, dest, cap, accepted,
	                                 NGTCP2_WRITE_DATAGRAM_FLAG_MORE, 0, v, vn, now);
	if (*accepted) {
		c->ep->st.dgrams_out++;
		dq_pop(q);
	} else if (nw == NGTCP2_ERR_INVALID_ARGUMENT || nw == NGTCP2_ERR_INVALID_STATE) {
		c->ep->st.dgrams_dropped++;
		dq_pop(q);
		return 0;
	}
	return nw;
}

void dgram_recv(struct moq_quic_conn *c, const uint8_t *data, size_t len)
{
	c->ep->st.dgrams_in++;
	if (c->notified || c->close_req || c->cb == NULL || c->cb->datagram == NULL) {
		c->ep->st.dgrams_in_dropped++;
		return;
	}
	c->cb->datagram(c, c->user, data, len);
}

void dgram_hand_over(struct moq_quic_conn *c)
{
	struct quic_dgq *q = c->dq;

	if (q == NULL)
		return;
	while (q->n > 0) {
		struct dgram_ent *e = &q->e[q->head];
		struct fp_iov v[MOQ_QUIC_DGRAM_IOV];

		for (unsigned i = 0; i < e->iovcnt; i++) {
			v[i].base = e->iov[i].iov_base;
			v[i].len = e->iov[i].iov_len;
		}
		if (fp_dgram_send(c->fp, e->hdr, e->hdrlen, v, e->iovcnt, e->release, e->arg) == 0)
			e->release = NULL; /* the engine releases it */
		else
			c->ep->st.dgrams_dropped++;
		dq_pop(q);
	}
	free(q);
	c->dq = NULL;
}

void dgram_free(struct moq_quic_conn *c)
{
	if (c->dq == NULL)
		return;
	while (c->dq->n > 0) {
		c->ep->st.dgrams_dropped++;
		dq_pop(c->dq);
	}
	free(c->dq);
	c->dq = NULL;
}
