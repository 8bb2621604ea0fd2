/* SPDX-License-Identifier: MIT */
/*
 * dgram.c: RFC 9221 DATAGRAM frames on the fast path (fastpath.h,
 * "datagrams"): the queue per connection (as quic/dgram.c's: a header
 * copied, the payload referenced until sealed, the oldest dropped when
 * full), the frames written first into ack-eliciting packets by send.c
 * (counted in flight; acked or lost, never resent: the count rides in the
 * sent record's ctl bits), and the frames received (recv.c) handed to the
 * datagram callback.
 */
#include "fp_int.h"

#include <stdlib.h>

/* Room left for an ACK frame before the datagram (as quic/dgram.c). */
#define ACK_ROOM 32
/* The DATAGRAM frame's own header: type 0x31 and a length varint. */
#define FRAME_HDR 9
/* Short header: flags and the longest packet number (+ the DCID). */
#define SHORT_HDR_EXTRA (1 + 4)
/* Datagrams one packet's record can count (CF_DG_MASK). */
#define DG_PER_PKT 7

struct fp_dgent {
	uint8_t hdr[FP_DGRAM_HDR_MAX];
	uint8_t hdrlen;
	uint8_t n;
	uint16_t len; /* the whole payload */
	struct fp_iov iov[FP_DGRAM_IOV];
	void (*release)(void *arg);
	void *arg;
};

struct fp_dgq {
	uint32_t head, n;
	struct fp_dgent e[FP_DGRAM_QUEUE];
};

static void dq_pop(struct fp_conn *c)
{
	struct fp_dgq *q = c->x->dq;
	struct fp_dgent *d = &q->e[q->head];

	if (d->release)
		d->release(d->arg);
	d->release = NULL;
	q->head = (q->head + 1) % FP_DGRAM_QUEUE;
	q->n--;
	c->dg_n = (uint8_t)q->n;
}

size_t fp_dgram_max(const struct fp_conn *c)
{
	size_t pkt, over, fmax;
	uint64_t peer;

	if (c == NULL || c->e == NULL || c->state != ST_OPEN)
		return 0;
	peer = c->x->peer.max_datagram_frame_size;
	pkt = c->max_pkt;
	over = SHORT_HDR_EXTRA + c->dcid_len + FP_TAG_LEN + FRAME_HDR + ACK_ROOM;
	if (peer <= FRAME_HDR || pkt <= over)
		return 0;
	pkt -= over;
	/* RFC 9221, 3: the limit counts the whole frame (type, length) */
	fmax = peer - FRAME_HDR < 65535 ? (size_t)(peer - FRAME_HDR) : 65535;
	return pkt < fmax ? pkt : fmax;
}

int fp_dgram_send(struct fp_conn *c, const uint8_t *hdr, size_t hdrlen, const struct fp_iov *iov,
                  size_t n, void (*release)(void *arg), void *arg)
{
	struct fp_dgq *q;
	struct fp_dgent *d;
	size_t total = hdrlen, max;

	if (c == NULL || c->e == NULL || hdrlen > FP_DGRAM_HDR_MAX || n > FP_DGRAM_IOV ||
	    (hdrlen && hdr == NULL) || (n && iov == NULL))
		return MOQ_ERR_INVAL;
	max = fp_dgram_max(c);
	if (max == 0)
		return MOQ_ERR_STATE;
	for (size_t i = 0; i < n; i++)
		total += iov[i].len;
	if (total > max)
		return MOQ_ERR_TOO_LARGE;
	if (c->x->dq == NULL && (c->x->dq = calloc(1, sizeof(*c->x->dq))) == NULL)
		return MOQ_ERR_NOMEM;
	q = c->x->dq;
	if (q->n == FP_DGRAM_QUEUE) {
		/* live media: the newest goes, the oldest is dropped */
		dq_pop(c);
		c->e->st.dgrams_dropped++;
	}
	d = &q->e[(q->head + q->n) % FP_DGRAM_QUEUE];
	if (hdrlen)
		memcpy(d->hdr, hdr, hdrlen);
	d->hdrlen = (uint8_t)hdrlen;
	d->n = (uint8_t)n;
	for (size_t i = 0; i < n; i++)
		d->iov[i] = iov[i];
	d->len = (uint16_t)total;
	d->release = release;
	d->arg = arg;
	q->n++;
	c->dg_n = (uint8_t)q->n;
	fp_ready_add(c);
	return 0;
}

uint8_t *fp_dgram_write(struct fp_conn *c, uint8_t *p, uint8_t *end, int empty, uint16_t *ctl)
{
	struct fp_dgq *q = c->x->dq;
	unsigned k = 0;

	while (q != NULL && q->n > 0 && k < DG_PER_PKT) {
		struct fp_dgent *d = &q->e[q->head];
		size_t need = 1 + fp_varint_len(d->len) + d->len;

		if (need > (size_t)(end - p)) {
			if (!empty)
				break; /* the next packet takes it */
			/* not even an empty packet holds it (a smaller buffer) */
			c->e->st.dgrams_dropped++;
			dq_pop(c);
			continue;
		}
		/* RFC 9221, 4: type 0x31, with a length */
		*p++ = FT_DATAGRAM | 1;
		p = fp_varint_put(p, d->len);
		memcpy(p, d->hdr, d->hdrlen);
		p += d->hdrlen;
		for (unsigned i = 0; i < d->n; i++) {
			if (d->iov[i].len)
				memcpy(p, d->iov[i].base, d->iov[i].len);
			p += d->iov[i].len;
		}
		/* copied into the packet: the caller's memory goes back now */
		dq_pop(c);
		c->e->st.dgrams_out++;
		empty = 0;
		k++;
	}
	*ctl = (uint16_t)((*ctl & ~CF_DG_MASK) | (k << CF_DG_SHIFT));
	return p;
}

void fp_dgram_done(struct fp_conn *c, uint16_t ctl, int lost)
{
	uint64_t k = (ctl & CF_DG_MASK) >> CF_DG_SHIFT;

	if (lost)
		c->e->st.dgrams_lost += k;
	else
		c->e->st.dgrams_acked += k;
}

int fp_dgram_recv(struct fp_conn *c, uint64_t ft, const uint8_t **pp, const uint8_t *end,
                  uint64_t now)
{
	const struct fp_callbacks *cb = c->e->cb;
	const uint8_t *p = *pp;
	uint64_t len;

	if (ft & 1) {
		if (fp_varint_get(&p, end, &len) < 0 || (uint64_t)(end - p) < len)
			return fp_violation(c, FP_E_FRAME_ENCODING, ft, "datagram", now);
	} else {
		len = (uint64_t)(end - p); /* to the end of the packet */
	}
	/* RFC 9221, 3: a frame we did not allow (or larger than we said) */
	if (c->x->local_dgram_max == 0 ||
	    1 + (ft & 1 ? fp_varint_len(len) : 0) + len > c->x->local_dgram_max)
		return fp_violation(c, FP_E_PROTOCOL_VIOLATION, ft, "datagram not allowed", now);
	*pp = p + len;
	c->e->st.dgrams_in++;
	if (cb == NULL || cb->datagram == NULL) {
		c->e->st.dgrams_in_dropped++;
		return 0;
	}
	cb->datagram(c, c->user, p, (size_t)len);
	return 0;
}

void fp_dgram_free(struct fp_conn *c)
{
	if (c->x->dq == NULL)
		return;
	while (c->x->dq->n > 0) {
		c->e->st.dgrams_dropped++;
		dq_pop(c);
	}
	free(c->x->dq);
	c->x->dq = NULL;
	c->dg_n = 0;
}
