/* SPDX-License-Identifier: MIT */
/*
 * dgram.c: moq-lite-05 datagrams (6.4; PROTOCOL.md, "lite-05 datagrams"):
 * a single-frame group as one QUIC DATAGRAM { subscribe id, group
 * sequence, timestamp, payload } on a raw QUIC session that negotiated
 * max_datagram_frame_size. In: a publisher's datagram becomes a finished
 * one-frame group in the cache (or the application's group callbacks, a
 * client). Out: fanout sends a finished one-frame group of a datagram
 * track (relayed: one whose publisher sent datagrams; local:
 * moq_node_track_datagrams) as a datagram, the payload referenced from the
 * cache until QUIC has written it; else, or when it does not fit, the
 * group goes on a stream as always. Nothing is retransmitted: a lost
 * datagram is a lost group (a stream subscriber of the relay gets it DROPped
 * as never received; a datagram subscriber sees the gap). On lite-06 a
 * datagram's whole body (header and payload) is at most 1,200 bytes
 * (draft-lcurley-moq-lite-06 6.4): a larger one is neither sent (the group
 * goes on a stream, counted too large) nor taken (dropped, counted bad).
 */
#include "moq.h"

#include <string.h>

#include "ietf_session.h"
#include "moq_int.h"

/* draft-lcurley-moq-lite-06 6.4: "The total datagram body MUST NOT exceed
 * 1200 bytes ... a publisher MUST NOT send a larger one and a receiver MUST
 * silently drop it." */
#define LITE06_DGRAM_MAX 1200

int moq_node_track_datagrams(struct moq_node *n, struct moq_cache_track *t, int on)
{
	for (uint32_t i = 0; i < n->ndgram_tracks; i++)
		if (n->dgram_tracks[i] == t) {
			if (!on)
				n->dgram_tracks[i] = n->dgram_tracks[--n->ndgram_tracks];
			return 0;
		}
	if (!on)
		return 0;
	if (n->ndgram_tracks >= MOQ_DGRAM_TRACKS)
		return MOQ_ERR_LIMIT;
	n->dgram_tracks[n->ndgram_tracks++] = t;
	return 0;
}

static bool dgram_track(const struct moq_node *n, const struct dsub *d)
{
	if (d->up)
		return d->up->dgram;
	for (uint32_t i = 0; i < n->ndgram_tracks; i++)
		if (n->dgram_tracks[i] == d->track)
			return true;
	return false;
}

void sess_datagram(struct moq_session *s, const uint8_t *p, size_t len)
{
	uint64_t sub, seq, ts;
	int hl;

	if (s->ietf && !s->closing) {
		/* an IETF shell's OBJECT datagram (ietf_session.c: it comes
		 * back through dgram_in on the translator's lite session) */
		ietf_datagram(s->ietf, p, len);
		return;
	}
	if (s->closing || s->ietf || s->v < MOQ_LITE_05) {
		s->n->st.dgrams_in_bad++;
		return;
	}
	hl = moq_dgram_hdr_decode(p, len, &sub, &seq, &ts);
	if (hl < 0 || (s->v == MOQ_LITE_06 && len > LITE06_DGRAM_MAX)) {
		s->n->st.dgrams_in_bad++;
		return;
	}
	dgram_in(s, sub, seq, ts, p + hl, len - (size_t)hl);
}

int dgram_in(struct moq_session *s, uint64_t sub, uint64_t seq, uint64_t ts, const uint8_t *p,
             size_t len)
{
	return dgram_in_ext(s, sub, seq, ts, p, len, NULL, 0);
}

int dgram_in_ext(struct moq_session *s, uint64_t sub, uint64_t seq, uint64_t ts, const uint8_t *p,
                 size_t len, const uint8_t *ext, size_t ext_len)
{
	struct moq_node *n = s->n;
	const struct moq_node_callbacks *cb = n->cfg.cb;
	struct usub *us = usub_find(s, sub);

	/* best effort, as @moq/net: an undecodable datagram or one for no
	 * live subscription is dropped, the session goes on */
	if (us == NULL || us->closed || seq > MOQ_VARINT_MAX >> 1 ||
	    (us->up && us->up->ended && seq >= us->up->end_seq)) {
		n->st.dgrams_in_bad++;
		return MOQ_ERR_NOTFOUND;
	}
	if (us->up) {
		struct moq_cache_group *g;
		int rc = moq_cache_group_open(us->up->ct, seq, n->now, &g);

		if (rc < 0) {
			if (rc == MOQ_ERR_ORDER)
				n->st.groups_in_late++;
			n->st.dgrams_in_bad++;
			return rc;
		}
		us->got_group = 1;
		us->up->dgram = 1;
		if (ext_len ? moq_cache_frame_begin_ext(g, (int64_t)ts, len, ext, ext_len) >= 0 &&
		                      (len == 0 || moq_cache_frame_append(g, p, len) == 0)
		            : moq_cache_write_frame(g, (int64_t)ts, p, len) == 0) {
			moq_cache_group_finish(g);
			n->st.frames_in++;
			n->st.bytes_in += len;
		} else {
			moq_cache_group_abort(g);
		}
		moq_cache_group_unref(g);
	} else if (cb) {
		if (cb->group_begin)
			cb->group_begin(s, n->cfg.user, sub, seq);
		if (cb->frame)
			cb->frame(s, n->cfg.user, sub, seq, (int64_t)ts, len);
		if (len && cb->frame_data)
			cb->frame_data(s, n->cfg.user, sub, seq, p, len);
		if (cb->group_end)
			cb->group_end(s, n->cfg.user, sub, seq, -1);
		n->st.frames_in++;
		n->st.bytes_in += len;
	}
	n->st.dgrams_in++;
	n->st.groups_in++;
	return 0;
}

void moq_binding_datagram(struct moq_session *s, const uint8_t *data, size_t len)
{
	if (!s || s->closing || !s->tp)
		return;
	s->depth++;
	sess_datagram(s, data, len);
	s->depth--;
	sess_flush(s);
}

static void group_release(void *arg)
{
	moq_cache_group_unref(arg);
}

bool dgram_out(struct moq_session *s, struct dsub *d, struct moq_cache_group *g)
{
	struct moq_node *n = s->n;
	struct moq_cache_cursor cur;
	struct moq_cache_frame f;
	struct iovec iov[MOQ_QUIC_DGRAM_IOV];
	uint8_t h[IETF_DGRAM_HDR_MAX > MOQ_DGRAM_HDR_MAX ? IETF_DGRAM_HDR_MAX : MOQ_DGRAM_HDR_MAX];
	uint32_t frames = 0;
	int k = 0, hl, rc;

	if ((s->bops ? !s->bops->dgram_send : !s->conn) || (s->v < MOQ_LITE_05 && !s->ietf_owner) ||
	    !dgram_track(n, d) || moq_cache_group_status(g, NULL, &frames) != MOQ_ERR_CLOSED ||
	    frames != 1)
		return false;
	memset(&cur, 0, sizeof(cur));
	if (moq_cache_read_frame(g, &cur, &f) != 1 || !moq_cache_frame_complete(&f) ||
	    f.timestamp < 0)
		return false;
	/* the lite session behind an IETF client: an OBJECT_DATAGRAM header
	 * (ietf_session.c) instead of lite-05's */
	hl = s->ietf_owner ? ietf_dgram_hdr(s->ietf_owner, h, sizeof(h), d->id, g)
	                   : moq_dgram_hdr_encode(h, sizeof(h), d->id, moq_cache_group_seq(g),
	                                          (uint64_t)f.timestamp);
	if (hl < 0)
		return false;
	if (!s->ietf_owner && s->v == MOQ_LITE_06 && (size_t)hl + f.len > LITE06_DGRAM_MAX) {
		n->st.dgrams_too_large++; /* not eligible: on a stream */
		return false;
	}
	if (f.len && f.data) {
		iov[0].iov_base = (void *)(uintptr_t)f.data;
		iov[0].iov_len = f.len;
		k = 1;
	} else if (f.len) {
		uint64_t got = 0;
		k = moq_cache_group_iov(g, f.offset, f.len, iov, MOQ_QUIC_DGRAM_IOV);
		for (int i = 0; i < k; i++)
			got += iov[i].iov_len;
		if (k <= 0 || got != f.len)
			return false; /* in more pieces than a datagram takes */
	}
	/* the payload stays the cache's: the reference goes with it */
	rc = s->bops ? s->bops->dgram_send(s->tp, h, (size_t)hl, iov, (size_t)k, group_release, g)
	             : moq_quic_dgram_send(s->conn, h, (size_t)hl, iov, (size_t)k, group_release,
	                                   g);
	if (rc == MOQ_ERR_TOO_LARGE)
		n->st.dgrams_too_large++;
	if (rc < 0)
		return false;
	n->st.dgrams_out++;
	n->st.groups_out++;
	n->st.frames_out++;
	n->st.bytes_out += f.len;
	moq_lat_record(n, &f, 1);
	return true;
}
