/* SPDX-License-Identifier: MIT */
/*
 * handoff.c: the fast path behind quic/'s own calls (issue 23). A server
 * connection the application marked (moq_quic_conn_allow_handoff: its
 * session set-up is done) leaves ngtcp2 when it is quiet: its 1-RTT state
 * (ngtcp2_conn_export_state, scripts/patches/ngtcp2-0.12.1-export.patch, and
 * the secrets export.c captured at install) is imported into the endpoint's
 * engine (fastpath.h), and the ngtcp2 connection and wolfSSL session are
 * freed. The moq_quic_conn stays: its CIDs stay in the endpoint's table and
 * route to the engine's connection, and every moq_quic_stream_* /
 * moq_quic_conn_* call and callback keeps its contract, so moq/ and h3/ do
 * not know which side serves a connection.
 */
#include "quic_int.h"

#include <stdlib.h>
#include <string.h>

#include <wolfssl/openssl/evp.h>

#include "fastpath.h"

/* Streams one export may carry (moq-lite subscribers have a control stream
 * and a few group streams open when quiet; more is retried later). */
#define HAND_MAX_STREAMS 64
/* Sent-packet records per handed-off connection (hand_init). */
#define HAND_SENT_RING 128u
/* iovecs converted per engine write call. */
#define HAND_IOV 16

/* The engine's datagram queue keeps quic.h's contract (dgram.c). */
_Static_assert(FP_DGRAM_HDR_MAX == MOQ_QUIC_DGRAM_HDR_MAX && FP_DGRAM_IOV == MOQ_QUIC_DGRAM_IOV &&
                       FP_DGRAM_QUEUE == MOQ_QUIC_DGRAM_QUEUE,
               "the fast path's datagram queue is quic.h's");

/* Scratch for one export (ngtcp2's view, then the engine's). */
struct hand_scratch {
	ngtcp2_conn_export ex;
	ngtcp2_conn_export_stream xs[HAND_MAX_STREAMS];
	struct fp_import_stream is[HAND_MAX_STREAMS];
	struct fp_import imp;
};

/* ------------------------------------------------------------ addresses */

static void addr_to_fp(struct fp_addr *o, const struct moq_quic_addr *a)
{
	size_t len = a->len <= FP_ADDR_MAX ? a->len : FP_ADDR_MAX;

	memset(o, 0, sizeof(*o));
	o->len = (uint8_t)len;
	memcpy(o->b, &a->u, len);
}

static void addr_from_fp(struct moq_quic_addr *o, const struct fp_addr *a)
{
	size_t len = a->len <= sizeof(o->u) ? a->len : sizeof(o->u);

	memset(o, 0, sizeof(*o));
	memcpy(&o->u, a->b, len);
	o->len = (socklen_t)len;
}

/* ------------------------------------------------- the engine's callbacks */

static struct moq_quic_conn *conn_of_fp(struct fp_conn *fc, void *user)
{
	(void)fc;
	return user;
}

static int cb_stream_data(struct fp_conn *fc, void *user, int64_t sid, uint64_t offset,
                          const uint8_t *data, size_t len, int fin)
{
	struct moq_quic_conn *c = conn_of_fp(fc, user);

	if (c == NULL) /* closed: the engine only drains it */
		return -1;

	if (c->cb && c->cb->stream_data)
		return c->cb->stream_data(c, c->user, sid, offset, data, len, fin) < 0 ? -1 : 0;
	return 0;
}

static void cb_stream_open(struct fp_conn *fc, void *user, int64_t sid)
{
	struct moq_quic_conn *c = conn_of_fp(fc, user);

	if (c == NULL) /* closed: the engine only drains it */
		return;

	if (c->cb && c->cb->stream_open && c->cb->stream_open(c, c->user, sid) < 0)
		(void)fp_conn_close(fc, 0, NGTCP2_INTERNAL_ERROR, "stream_open");
}

static void cb_stream_reset(struct fp_conn *fc, void *user, int64_t sid, uint64_t app_err,
                            uint64_t final_size)
{
	struct moq_quic_conn *c = conn_of_fp(fc, user);

	if (c == NULL) /* closed: the engine only drains it */
		return;

	if (c->cb && c->cb->stream_reset)
		c->cb->stream_reset(c, c->user, sid, app_err, final_size);
}

static void cb_stop_sending(struct fp_conn *fc, void *user, int64_t sid, uint64_t app_err)
{
	struct moq_quic_conn *c = conn_of_fp(fc, user);

	if (c == NULL) /* closed: the engine only drains it */
		return;

	if (c->cb && c->cb->stream_stop_sending)
		c->cb->stream_stop_sending(c, c->user, sid, app_err);
}

static void cb_stream_acked(struct fp_conn *fc, void *user, int64_t sid, uint64_t acked,
                            uint64_t newly, void *app)
{
	struct moq_quic_conn *c = conn_of_fp(fc, user);

	if (c == NULL) /* closed: the engine only drains it */
		return;

	if (c->cb && c->cb->stream_acked)
		c->cb->stream_acked(c, c->user, sid, acked, newly, app);
}

static void cb_stream_closed(struct fp_conn *fc, void *user, int64_t sid, uint64_t app_err,
                             void *app)
{
	struct moq_quic_conn *c = conn_of_fp(fc, user);

	if (c == NULL) /* closed: the engine only drains it */
		return;

	if (c->cb && c->cb->stream_closed)
		c->cb->stream_closed(c, c->user, sid, app_err, app);
}

static void cb_writable(struct fp_conn *fc, void *user, int64_t sid)
{
	struct moq_quic_conn *c = conn_of_fp(fc, user);

	if (c == NULL) /* closed: the engine only drains it */
		return;

	/* quic.h: -1 is "more streams allowed"; MAX_DATA (-1 here) wakes
	 * every writer the same way */
	if (c->cb && c->cb->writable)
		c->cb->writable(c, c->user, sid < 0 ? -1 : sid);
}

static void cb_conn_closed(struct fp_conn *fc, void *user, const struct fp_close_info *info)
{
	struct moq_quic_conn *c = conn_of_fp(fc, user);

	if (c == NULL) /* closed: the engine only drains it */
		return;
	struct moq_quic_endpoint *ep = c->ep;
	struct moq_quic_close_info qi;

	memset(&qi, 0, sizeof(qi));
	switch (info->kind) {
	case FP_CLOSE_TRANSPORT:
		qi.kind = MOQ_QUIC_CLOSE_TRANSPORT;
		qi.err = info->code == NGTCP2_NO_ERROR ? 0 : MOQ_ERR_PROTO;
		break;
	case FP_CLOSE_APPLICATION:
		qi.kind = MOQ_QUIC_CLOSE_APPLICATION;
		qi.err = info->code == 0 ? 0 : MOQ_ERR_CLOSED;
		break;
	case FP_CLOSE_IDLE:
		qi.kind = MOQ_QUIC_CLOSE_IDLE;
		qi.err = MOQ_ERR_CLOSED;
		ep->st.idle_timeouts++;
		break;
	case FP_CLOSE_STATELESS_RESET:
		qi.kind = MOQ_QUIC_CLOSE_STATELESS_RESET;
		qi.err = MOQ_ERR_CLOSED;
		c->got_sreset = 1;
		break;
	default:
		qi.kind = MOQ_QUIC_CLOSE_ENDPOINT;
		qi.err = MOQ_ERR_CLOSED;
		break;
	}
	qi.local = info->local;
	qi.code = info->code;
	qi.what = info->what ? info->what : "fast path";
	qi.reason = info->reason;
	qi.reasonlen = info->reasonlen;
	/* the engine keeps it for its closing period (its CONNECTION_CLOSE
	 * goes out from hand_send) while @c is freed at the next _timers or
	 * _recv: it must not point back at @c any more */
	fp_conn_set_user(fc, NULL);
	{
		struct fp_conn_info fi;
		fp_conn_get_info(fc, &fi);
		c->key_updates += fi.key_updates; /* get_info's count after this */
	}
	c->fp = NULL;
	ep->st.fastpath_conns--;
	conn_notify(c, &qi);
	/* freed by the next _timers (or by _recv right after this datagram);
	 * the engine answers its CIDs until the closing period ends
	 * (hand_recv_unknown) */
	c->state = CS_DEAD;
	c->deadline = 0;
	conn_update_timer(c);
}

static void cb_path_new(struct fp_conn *fc, void *user, const struct fp_addr *remote, int validated)
{
	struct moq_quic_conn *c = conn_of_fp(fc, user);

	if (c == NULL) /* closed: the engine only drains it */
		return;

	/* RFC 9000, 9.3: the connection moves once the new path is validated */
	if (validated)
		addr_from_fp(&c->remote, remote);
}

static int cb_new_scid(struct fp_conn *fc, void *user, struct fp_cid *cid)
{
	struct moq_quic_conn *c = conn_of_fp(fc, user);

	if (c == NULL) /* closed: the engine only drains it */
		return -1;
	ngtcp2_cid nc;
	int tries;

	for (tries = 0; tries < 4; tries++) {
		make_cid(c->ep, &nc);
		if (conn_add_cid(c, nc.data, nc.datalen) == 0)
			break;
	}
	if (tries == 4)
		return -1;
	/* RFC 9000, 10.3.2: derived from the static key and the CID, as
	 * conn.c does for ngtcp2's */
	if (ngtcp2_crypto_generate_stateless_reset_token(cid->token, c->ep->secret,
	                                                 sizeof(c->ep->secret), &nc) != 0) {
		conn_del_cid(c, nc.data, nc.datalen);
		return -1;
	}
	cid->len = (uint8_t)nc.datalen;
	memcpy(cid->id, nc.data, nc.datalen);
	cid->has_token = 1;
	return 0;
}

static void cb_scid_retired(struct fp_conn *fc, void *user, const struct fp_cid *cid)
{
	struct moq_quic_conn *c = conn_of_fp(fc, user);

	if (c == NULL) /* closed: the engine only drains it */
		return;

	conn_del_cid(c, cid->id, cid->len);
}

/* RFC 9221: a DATAGRAM frame the engine read goes where ngtcp2's would
 * (dgram.c: the same counters and callback) */
static void cb_datagram(struct fp_conn *fc, void *user, const uint8_t *data, size_t len)
{
	struct moq_quic_conn *c = conn_of_fp(fc, user);

	if (c == NULL) /* closed: the engine only drains it */
		return;
	dgram_recv(c, data, len);
}

static const struct fp_callbacks hand_cbs = {
        .stream_data = cb_stream_data,
        .stream_open = cb_stream_open,
        .stream_reset = cb_stream_reset,
        .stop_sending = cb_stop_sending,
        .stream_acked = cb_stream_acked,
        .stream_closed = cb_stream_closed,
        .writable = cb_writable,
        .conn_closed = cb_conn_closed,
        .path_new = cb_path_new,
        .new_scid = cb_new_scid,
        .scid_retired = cb_scid_retired,
        .datagram = cb_datagram,
};

/* ------------------------------------------------------------- endpoint */

int hand_init(struct moq_quic_endpoint *ep)
{
	struct fp_engine_config fc;
	int err = 0;

	if (!ep->cfg.fastpath || ep->cfg.role != MOQ_QUIC_SERVER)
		return 0;
	memset(&fc, 0, sizeof(fc));
	fc.max_conns = ep->cfg.fastpath_max_conns ? ep->cfg.fastpath_max_conns : ep->cfg.max_conns;
	fc.keep_alive_ns = ep->cfg.keep_alive_ns;
	fc.stream_window = ep->cfg.max_stream_data;
	fc.conn_window = ep->cfg.max_data;
	/* 128 sent records (4 KiB) a connection instead of the engine's 256:
	 * the window is capped at 112 full packets in flight (134 KB: 10 Mbit/s
	 * at a 100 ms RTT, far above a subscriber's media rate), and a handed-off
	 * connection stays within 16 KB (issue 23, target 5) */
	fc.sent_ring = HAND_SENT_RING;
	fc.cb = &hand_cbs;
	ep->hscratch = malloc(sizeof(*ep->hscratch));
	if (ep->hscratch == NULL)
		return MOQ_ERR_NOMEM;
	ep->fpe = fp_engine_new(&fc, &err);
	if (ep->fpe == NULL) {
		free(ep->hscratch);
		ep->hscratch = NULL;
		return err ? err : MOQ_ERR_NOMEM;
	}
	return 0;
}

void hand_fini(struct moq_quic_endpoint *ep)
{
	fp_engine_free(ep->fpe);
	ep->fpe = NULL;
	free(ep->hscratch);
	ep->hscratch = NULL;
}

/* ------------------------------------------------------------- handoff */

static void refuse(struct moq_quic_conn *c, enum moq_quic_handoff_reason why, int final)
{
	c->ep->st.handoff_refused[why]++;
	if (final) {
		c->fp_final = 1;
		free(c->fpkeys);
		c->fpkeys = NULL;
	}
}

static enum moq_quic_handoff_reason busy_reason(ngtcp2_export_busy b)
{
	switch (b) {
	case NGTCP2_EXPORT_NOT_CONFIRMED:
		return MOQ_QUIC_HANDOFF_NOT_CONFIRMED;
	case NGTCP2_EXPORT_IN_FLIGHT:
		return MOQ_QUIC_HANDOFF_IN_FLIGHT;
	case NGTCP2_EXPORT_STREAM_BUSY:
		return MOQ_QUIC_HANDOFF_STREAM_BUSY;
	case NGTCP2_EXPORT_KEY_UPDATE:
	case NGTCP2_EXPORT_PATH:
		return MOQ_QUIC_HANDOFF_KEY_UPDATE;
	default:
		return MOQ_QUIC_HANDOFF_OTHER;
	}
}

static void cid_to_fp(struct fp_cid *o, const ngtcp2_conn_export_cid *x)
{
	memset(o, 0, sizeof(*o));
	o->seq = x->seq;
	o->len = (uint8_t)(x->cid.datalen <= FP_CID_MAX ? x->cid.datalen : FP_CID_MAX);
	memcpy(o->id, x->cid.data, o->len);
	o->has_token = x->token_present;
	memcpy(o->token, x->token, FP_TOKEN_LEN);
}

/* RFC 9001, 5.1: the generation in use, from its secret; the header
 * protection key from the first generation's (captured at install). */
static int dir_keys(struct fp_dir_keys *o, const struct moq_quic_light_dir *first,
                    const uint8_t *secret, uint32_t version, const ngtcp2_crypto_ctx *cc)
{
	memcpy(o->secret, secret, FP_SECRET_LEN);
	memcpy(o->hp, first->hp, FP_HP_LEN);
	if (memcmp(secret, first->secret, FP_SECRET_LEN) == 0) {
		memcpy(o->key, first->key, FP_KEY_LEN);
		memcpy(o->iv, first->iv, FP_IV_LEN);
		return 0;
	}
	/* QUIC v1 labels (the engine takes v1 only) */
	if (version != NGTCP2_PROTO_VER_V1 ||
	    ngtcp2_crypto_hkdf_expand_label(o->key, FP_KEY_LEN, &cc->md, secret, FP_SECRET_LEN,
	                                    (const uint8_t *)"quic key", 8) != 0 ||
	    ngtcp2_crypto_hkdf_expand_label(o->iv, FP_IV_LEN, &cc->md, secret, FP_SECRET_LEN,
	                                    (const uint8_t *)"quic iv", 7) != 0)
		return MOQ_ERR_CRYPTO;
	return 0;
}

/* Is stream @id ours to send on (bidi, or a uni stream we opened)? */
static int can_send(int64_t id)
{
	/* RFC 9000, 2.1: bit 0 = server-initiated, bit 1 = uni */
	return (id & 2) == 0 || (id & 1) == 1;
}

static int can_recv(int64_t id)
{
	return (id & 2) == 0 || (id & 1) == 0;
}

/* Fill s->imp from ngtcp2's export. Returns 0 or a reason (> 0). */
static int build_import(struct moq_quic_conn *c, struct hand_scratch *s)
{
	const ngtcp2_conn_export *ex = &s->ex;
	struct fp_import *imp = &s->imp;
	const struct moq_quic_light_keys *k = c->fpkeys;
	const ngtcp2_crypto_ctx *cc = ngtcp2_conn_get_crypto_ctx(c->q);
	const ngtcp2_transport_params *lp = ngtcp2_conn_get_local_transport_params(c->q);
	const ngtcp2_transport_params *rp = ngtcp2_conn_get_remote_transport_params(c->q);
	size_t i, n;

	memset(imp, 0, sizeof(*imp));
	if (rp == NULL || ex->secretlen != FP_SECRET_LEN)
		return MOQ_QUIC_HANDOFF_CIPHER;
	imp->version = ex->version;
	imp->is_server = 1;
	imp->cipher = FP_CIPHER_AES_128_GCM_SHA256;
	if (dir_keys(&imp->tx, &k->tx, ex->tx_secret, ex->version, cc) != 0 ||
	    dir_keys(&imp->rx, &k->rx, ex->rx_secret, ex->version, cc) != 0)
		return MOQ_QUIC_HANDOFF_IMPORT;
	imp->key_phase = ex->key_phase;

	/* RFC 9000, 5.1: the peer's CIDs (current first), then ours */
	if (ex->ndcid == 0)
		return MOQ_QUIC_HANDOFF_OTHER;
	cid_to_fp(&imp->dcid, &ex->dcid[0]);
	for (i = 1; i < ex->ndcid && imp->npeer_cids < FP_MAX_PEER_CIDS; i++)
		cid_to_fp(&imp->peer_cids[imp->npeer_cids++], &ex->dcid[i]);
	imp->peer_retire_prior_to = ex->dcid_retire_prior_to;
	for (i = 0; i < ex->nscid; i++) {
		struct fp_cid *o;

		if (ex->scid[i].retired)
			continue;
		if (imp->nscids == FP_MAX_SCIDS)
			return MOQ_QUIC_HANDOFF_OTHER;
		o = &imp->scids[imp->nscids++];
		cid_to_fp(o, &ex->scid[i]);
		/* RFC 9000, 10.3.2: our tokens derive from the static key */
		if (ngtcp2_crypto_generate_stateless_reset_token(
		            o->token, c->ep->secret, sizeof(c->ep->secret), &ex->scid[i].cid) != 0)
			return MOQ_QUIC_HANDOFF_IMPORT;
		o->has_token = 1;
	}
	imp->next_scid_seq = ex->scid_last_seq + 1;

	/* RFC 9000, 12.3 and 13.2 */
	imp->tx_pn = (uint64_t)ex->tx_next_pkt_num;
	imp->largest_acked = ex->tx_largest_acked < 0 ? FP_PN_NONE : (uint64_t)ex->tx_largest_acked;
	imp->rx_largest_pn =
	        ex->rx_largest_pkt_num < 0 ? FP_PN_NONE : (uint64_t)ex->rx_largest_pkt_num;
	for (i = 0; i < ex->rx_ack_nranges && imp->nrx_ranges < FP_IMPORT_RANGES; i++) {
		struct fp_range *r = &imp->rx_ranges[imp->nrx_ranges++];

		r->hi = (uint64_t)ex->rx_ack_ranges[i].largest;
		r->lo = r->hi + 1 - ex->rx_ack_ranges[i].len;
	}
	imp->ack_eliciting_pending = ex->rx_ack_eliciting_pending;
	imp->max_ack_delay_ns = lp->max_ack_delay;
	imp->ack_delay_exponent = lp->ack_delay_exponent;

	/* RFC 9002, 5 and 7 */
	if (ex->first_rtt_sample_ts != UINT64_MAX) {
		imp->smoothed_rtt_ns = ex->smoothed_rtt;
		imp->rttvar_ns = ex->rttvar;
		imp->min_rtt_ns = ex->min_rtt;
		imp->latest_rtt_ns = ex->latest_rtt;
	}
	imp->cwnd = ex->cwnd;
	imp->ssthresh = ex->ssthresh;
	imp->bytes_in_flight = ex->bytes_in_flight;

	/* RFC 9000, 4: the limits told, both ways */
	imp->local_max_data = ex->rx_max_offset;
	imp->recv_data = ex->rx_offset;
	imp->peer_max_data = ex->tx_max_offset;
	imp->sent_data = ex->tx_offset;
	imp->local_max_stream_data_bidi_local = lp->initial_max_stream_data_bidi_local;
	imp->local_max_stream_data_bidi_remote = lp->initial_max_stream_data_bidi_remote;
	imp->local_max_stream_data_uni = lp->initial_max_stream_data_uni;
	imp->local_max_streams_bidi = ex->remote_max_streams_bidi;
	imp->local_max_streams_uni = ex->remote_max_streams_uni;
	imp->peer_max_streams_bidi = ex->local_max_streams_bidi;
	imp->peer_max_streams_uni = ex->local_max_streams_uni;
	imp->next_local_bidi = ex->local_next_bidi;
	imp->next_local_uni = ex->local_next_uni;
	/* the client's streams: ids 4n (bidi) and 4n + 2 (uni) */
	imp->next_remote_bidi = (int64_t)(ex->remote_opened_bidi * 4);
	imp->next_remote_uni = (int64_t)(ex->remote_opened_uni * 4 + 2);

	for (i = 0, n = 0; i < ex->nstreams; i++) {
		const ngtcp2_conn_export_stream *x = &s->xs[i];
		struct fp_import_stream *o = &s->is[n++];
		struct quic_strm *qs = strm_find(c, x->stream_id);

		/* queued on our side and not yet handed to ngtcp2 */
		if (qs != NULL && (strm_has_unsent(qs) || qs->acked_off < qs->end_off))
			return MOQ_QUIC_HANDOFF_STREAM_BUSY;
		memset(o, 0, sizeof(*o));
		o->id = x->stream_id;
		o->user = qs != NULL ? qs->app : NULL;
		o->send_offset = x->tx_offset;
		o->send_max = x->tx_max_offset;
		o->recv_offset = x->rx_offset;
		o->recv_max = x->rx_max_offset;
		if (can_send(x->stream_id)) {
			if (x->flags & NGTCP2_EXPORT_STRM_FLAG_SENT_RST)
				o->flags |= FP_STREAM_RESET_SENT;
			else if (x->flags & NGTCP2_EXPORT_STRM_FLAG_SHUT_WR)
				o->flags |= FP_STREAM_FIN_SENT;
		}
		if (can_recv(x->stream_id)) {
			if (x->flags & NGTCP2_EXPORT_STRM_FLAG_RECV_RST)
				o->flags |= FP_STREAM_RESET_RECV;
			else if (x->flags & NGTCP2_EXPORT_STRM_FLAG_SHUT_RD)
				o->flags |= FP_STREAM_FIN_RECV;
			if (x->flags & NGTCP2_EXPORT_STRM_FLAG_STOP_SENDING)
				o->flags |= FP_STREAM_STOP_SENT;
		}
	}
	imp->streams = s->is;
	imp->nstreams = n;

	imp->peer.max_udp_payload_size = rp->max_udp_payload_size;
	imp->peer.max_idle_timeout_ns = rp->max_idle_timeout;
	imp->peer.active_connection_id_limit = rp->active_connection_id_limit;
	imp->peer.ack_delay_exponent = rp->ack_delay_exponent;
	imp->peer.max_ack_delay_ns = rp->max_ack_delay;
	imp->peer.initial_max_stream_data_bidi_local = rp->initial_max_stream_data_bidi_local;
	imp->peer.initial_max_stream_data_bidi_remote = rp->initial_max_stream_data_bidi_remote;
	imp->peer.initial_max_stream_data_uni = rp->initial_max_stream_data_uni;
	imp->peer.disable_active_migration = (uint8_t)rp->disable_active_migration;
	imp->local_idle_timeout_ns = lp->max_idle_timeout;

	addr_to_fp(&imp->local, &c->local);
	addr_to_fp(&imp->remote, &c->remote);
	/* RFC 9000, 8.1: a completed handshake validated the client's address */
	imp->path_validated = 1;
	imp->path_bytes_recv = c->bytes_recv;
	imp->path_bytes_sent = c->bytes_sent;
	imp->user = c;
	/* what ngtcp2 sends on this path, and our transport parameters the
	 * engine applies (RFC 9287: with grease_quic_bit the peer may clear
	 * the fixed bit) */
	imp->max_udp_payload = (uint16_t)ngtcp2_conn_get_path_max_tx_udp_payload_size(c->q);
	imp->local_active_cid_limit = lp->active_connection_id_limit;
	imp->local_grease_quic_bit = (uint8_t)lp->grease_quic_bit;
	/* RFC 9221, 3: datagrams as dgram.c negotiated them, both ways */
	imp->peer.max_datagram_frame_size = dgram_negotiated(c) ? rp->max_datagram_frame_size : 0;
	imp->local_max_datagram_frame_size = lp->max_datagram_frame_size;
	return 0;
}

/* After the import: what ngtcp2 and quic/ held for @c goes. */
static void release_ngtcp2(struct moq_quic_conn *c, const ngtcp2_conn_export *ex)
{
	struct moq_quic_endpoint *ep = c->ep;
	uint32_t i;
	size_t k;

	for (i = 0; i < c->smap_cap; i++) {
		struct quic_strm *s = c->smap[i];

		if (s != NULL) {
			c->smap[i] = NULL;
			s->in_pend = 0; /* npend == 0: in no list */
			strm_heap_free(s, MOQ_HEAP_QUIC_STREAM);
			ep->nslive--;
		}
	}
	moq_heap_free(MOQ_HEAP_QUIC_SMAP, c->smap);
	c->smap = NULL;
	c->smap_cap = c->smap_n = 0;
	/* the peer retired these (RFC 9000, 19.16): no more routing */
	for (k = 0; k < ex->nscid; k++)
		if (ex->scid[k].retired)
			conn_del_cid(c, ex->scid[k].cid.data, ex->scid[k].cid.datalen);
	ready_del(c);
	heap_remove(ep, c);
	ngtcp2_conn_del(c->q);
	c->q = NULL;
	quic_tls_conn_free(c);
	free(c->fpkeys);
	c->fpkeys = NULL;
	moq_heap_free(MOQ_HEAP_QUIC_CONN, c->close_buf);
	c->close_buf = NULL;
}

int hand_export(struct moq_quic_conn *c, struct fp_import **imp, enum moq_quic_handoff_reason *why)
{
	struct hand_scratch *s = c->ep->hscratch;
	const ngtcp2_crypto_ctx *cc;
	int rv;

	*why = MOQ_QUIC_HANDOFF_OTHER;
	if (s == NULL || c->q == NULL || c->state != CS_ESTABLISHED || c->in_ng)
		return MOQ_ERR_STATE;
	*why = MOQ_QUIC_HANDOFF_CIPHER;
	if (c->fpkeys == NULL || !c->fpkeys->have)
		return MOQ_ERR_STATE;
	/* RFC 9001, 5.3: the engine seals with AES-128-GCM only */
	cc = ngtcp2_conn_get_crypto_ctx(c->q);
	if (cc->aead.native_handle != wolfSSL_EVP_aes_128_gcm() ||
	    cc->md.native_handle != wolfSSL_EVP_sha256() || c->fpkeys->keylen != FP_KEY_LEN ||
	    c->fpkeys->secretlen != FP_SECRET_LEN)
		return MOQ_ERR_STATE;
	*why = MOQ_QUIC_HANDOFF_STREAM_BUSY;
	if (c->npend > 0)
		return MOQ_ERR_STATE;
	rv = ngtcp2_conn_export_state(c->q, &s->ex, s->xs, HAND_MAX_STREAMS);
	if (rv != 0) {
		*why = busy_reason(s->ex.busy);
		return MOQ_ERR_STATE;
	}
	rv = build_import(c, s);
	if (rv != 0) {
		*why = (enum moq_quic_handoff_reason)rv;
		return MOQ_ERR_STATE;
	}
	*imp = &s->imp;
	return 0;
}

void hand_try(struct moq_quic_conn *c, uint64_t now)
{
	struct moq_quic_endpoint *ep = c->ep;
	enum moq_quic_handoff_reason why;
	struct fp_import *imp;
	struct fp_conn *fc;
	int err = 0;

	if (!c->fp_ok || c->fp_final || c->fp != NULL || ep->fpe == NULL || c->q == NULL ||
	    c->state != CS_ESTABLISHED || c->in_ng || c->close_req || c->notified)
		return;
	if (hand_export(c, &imp, &why) != 0) {
		/* another cipher, or an export the engine cannot take: for good */
		refuse(c, why, why == MOQ_QUIC_HANDOFF_CIPHER || why == MOQ_QUIC_HANDOFF_IMPORT);
		return;
	}
	fc = fp_conn_import(ep->fpe, imp, now, &err);
	if (fc == NULL) {
		refuse(c, err == MOQ_ERR_LIMIT ? MOQ_QUIC_HANDOFF_LIMIT : MOQ_QUIC_HANDOFF_IMPORT,
		       1);
		return;
	}
	release_ngtcp2(c, &ep->hscratch->ex);
	c->fp = fc;
	/* datagrams still queued go on in the engine's queue (dgram.c) */
	dgram_hand_over(c);
	ep->st.handoffs++;
	ep->st.fastpath_conns++;
}

/* ------------------------------------------------------------ the data path */

void hand_recv(struct moq_quic_conn *c, const uint8_t *data, size_t len,
               const struct moq_quic_addr *local, const struct moq_quic_addr *remote, uint64_t now)
{
	struct fp_addr l, r;

	addr_to_fp(&l, local);
	addr_to_fp(&r, remote);
	c->bytes_recv += len;
	/* MOQ_ERR_CLOSED: cb_conn_closed ran, @c is CS_DEAD (freed by _recv) */
	(void)fp_conn_recv(c->fp, data, len, &l, &r, now);
}

int hand_recv_unknown(struct moq_quic_endpoint *ep, const uint8_t *data, size_t len,
                      const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                      uint64_t now)
{
	struct fp_addr l, r;

	if (ep->fpe == NULL)
		return MOQ_ERR_NOTFOUND;
	addr_to_fp(&l, local);
	addr_to_fp(&r, remote);
	return fp_engine_recv(ep->fpe, data, len, &l, &r, now);
}

size_t hand_send(struct moq_quic_endpoint *ep, struct moq_quic_pkt *pkts, size_t n, uint64_t now)
{
	size_t done = 0;

	if (ep->fpe == NULL)
		return 0;
	while (done < n && fp_engine_pending(ep->fpe)) {
		struct fp_pkt fpk[MOQ_QUIC_BURST];
		size_t m = n - done < MOQ_QUIC_BURST ? n - done : MOQ_QUIC_BURST, k;
		int w;

		for (k = 0; k < m; k++) {
			size_t cap = pkts[done + k].cap;

			if (cap > ep->cfg.max_udp_payload)
				cap = ep->cfg.max_udp_payload;
			memset(&fpk[k], 0, sizeof(fpk[k]));
			fpk[k].data = pkts[done + k].data;
			fpk[k].cap = (uint16_t)cap;
		}
		w = fp_engine_send(ep->fpe, fpk, m, now);
		if (w <= 0)
			break;
		for (k = 0; k < (size_t)w; k++) {
			struct moq_quic_pkt *p = &pkts[done + k];
			struct moq_quic_conn *c =
			        fpk[k].conn != NULL ? fp_conn_user(fpk[k].conn) : NULL;

			p->len = fpk[k].len;
			addr_from_fp(&p->local, &fpk[k].local);
			addr_from_fp(&p->remote, &fpk[k].remote);
			p->ecn = 0;
			if (c != NULL && c->fp == fpk[k].conn)
				c->bytes_sent += fpk[k].len;
		}
		done += (size_t)w;
		if ((size_t)w < m)
			break;
	}
	return done;
}

int hand_timers(struct moq_quic_endpoint *ep, uint64_t now)
{
	return ep->fpe != NULL ? fp_engine_timers(ep->fpe, now) : 0;
}

uint64_t hand_next_expiry(const struct moq_quic_endpoint *ep)
{
	return ep->fpe != NULL ? fp_engine_next_expiry(ep->fpe) : UINT64_MAX;
}

void hand_stats(const struct moq_quic_endpoint *ep, struct moq_quic_stats *out)
{
	struct fp_stats st;

	if (ep->fpe == NULL)
		return;
	fp_engine_stats(ep->fpe, &st);
	out->fastpath_key_updates = st.key_updates;
	out->fastpath_pkts_lost = st.pkts_lost;
	out->fastpath_paths_validated = st.paths_validated;
	/* RFC 9221: the engine's datagrams count with ngtcp2's (dgram.c) */
	out->dgrams_out += st.dgrams_out;
	out->dgrams_dropped += st.dgrams_dropped;
	out->dgrams_in_dropped += st.dgrams_in_dropped;
	out->fastpath_dgrams_acked = st.dgrams_acked;
	out->fastpath_dgrams_lost = st.dgrams_lost;
	out->fastpath_ivl_coarsened = st.ivl_coarsened;
	/* issue 23's fixed costs count both stacks' work (bench-fanout): the
	 * engine's ACK frames taken (at most one a packet, as ack_pkts_in
	 * counts them), streams and timer expiries; pkts_in and pkts_out are
	 * counted for both at the endpoint already (endpoint.c, send.c) */
	out->ack_pkts_in += st.acks_in;
	out->streams_opened += st.streams_opened;
	out->timer_expiries += st.timers_run;
	out->timer_idle += st.timers_idle;
}

int hand_pending(const struct moq_quic_endpoint *ep)
{
	return ep->fpe != NULL && fp_engine_pending(ep->fpe);
}

void hand_conn_free(struct moq_quic_conn *c)
{
	if (c->fp != NULL)
		fp_conn_drop(c->fp); /* cb_conn_closed: notified, fp NULL */
	free(c->fpkeys);
	c->fpkeys = NULL;
}

/* ------------------------------------------------- the same calls, served */

int hand_close(struct moq_quic_conn *c, uint64_t app_err, const char *reason)
{
	int rv = fp_conn_close(c->fp, 1, app_err, reason);

	return rv == MOQ_ERR_STATE ? 0 : rv;
}

uint64_t hand_cwnd(const struct moq_quic_conn *c)
{
	return fp_conn_cwnd(c->fp);
}

void hand_info(const struct moq_quic_conn *c, struct moq_quic_conn_info *out)
{
	struct fp_conn_info fi;

	fp_conn_get_info(c->fp, &fi);
	memset(out, 0, sizeof(*out));
	out->smoothed_rtt_ns = fi.smoothed_rtt_ns;
	out->min_rtt_ns = fi.min_rtt_ns;
	out->cwnd = fi.cwnd;
	out->bytes_in_flight = fi.bytes_in_flight;
	out->bytes_sent = c->bytes_sent;
	out->bytes_recv = c->bytes_recv;
	out->pkts_lost = fi.pkts_lost;
	out->established = 1;
	out->validated = fi.path_validated;
	out->key_updates = c->key_updates + fi.key_updates;
}

int hand_update_key(struct moq_quic_conn *c)
{
	int rv = fp_conn_update_key(c->fp);

	return rv == 0 ? 0 : MOQ_ERR_STATE;
}

int hand_stream_open(struct moq_quic_conn *c, int bidi, int64_t *sid)
{
	int rv = fp_stream_open(c->fp, bidi, sid);

	if (rv == MOQ_ERR_AGAIN)
		c->ep->st.refused_streams++;
	return rv == MOQ_ERR_LIMIT ? MOQ_ERR_NOMEM : rv;
}

long hand_stream_write(struct moq_quic_conn *c, int64_t sid, const struct iovec *iov, size_t iovcnt,
                       int fin)
{
	struct fp_iov v[HAND_IOV];
	long total = 0;
	size_t k = 0;

	do {
		size_t m = 0;
		long w;

		while (k < iovcnt && m < HAND_IOV) {
			if (iov[k].iov_len > 0) {
				v[m].base = iov[k].iov_base;
				v[m].len = iov[k].iov_len;
				m++;
			}
			k++;
		}
		w = fp_stream_write(c->fp, sid, v, m, fin && k >= iovcnt);
		if (w < 0)
			return total > 0 ? total : (w == MOQ_ERR_LIMIT ? MOQ_ERR_NOMEM : w);
		total += w;
	} while (k < iovcnt);
	return total;
}

long hand_stream_queued(const struct moq_quic_conn *c, int64_t sid)
{
	return fp_stream_queued(c->fp, sid);
}

int hand_stream_reset(struct moq_quic_conn *c, int64_t sid, uint64_t app_err)
{
	return fp_stream_reset(c->fp, sid, app_err);
}

int hand_stream_stop_sending(struct moq_quic_conn *c, int64_t sid, uint64_t app_err)
{
	return fp_stream_stop_sending(c->fp, sid, app_err);
}

int hand_stream_set_app(struct moq_quic_conn *c, int64_t sid, void *app)
{
	return fp_stream_set_user(c->fp, sid, app) < 0 ? MOQ_ERR_NOTFOUND : 0;
}

int hand_stream_set_urgency(struct moq_quic_conn *c, int64_t sid, uint8_t urgency)
{
	return fp_stream_set_urgency(c->fp, sid, urgency);
}

/* ---------------------------------------------------------------- public */

int moq_quic_conn_allow_handoff(struct moq_quic_conn *c)
{
	if (c == NULL || !c->server || c->ep->fpe == NULL || c->state >= CS_CLOSING)
		return MOQ_ERR_STATE;
	c->fp_ok = 1;
	return 0;
}

int moq_quic_conn_fastpath(const struct moq_quic_conn *c)
{
	return c != NULL && c->fp != NULL;
}
