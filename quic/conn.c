/* SPDX-License-Identifier: MIT */
/*
 * conn.c: connections: the ngtcp2 callbacks (glue to the application's
 * callbacks), settings and transport parameters, and the moq_quic_conn_*
 * calls.
 */
#include "quic_int.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Active connection IDs we accept from the peer (RFC 9000, 18.2). */
#define ACTIVE_CID_LIMIT 4

/* --------------------------------------------------------- ngtcp2 glue */

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
	struct moq_quic_conn *c = ref->user_data;

	return c->q;
}

static void rand_cb(uint8_t *dest, size_t destlen, const ngtcp2_rand_ctx *rand_ctx)
{
	quic_rand(rand_ctx->native_handle, dest, destlen);
}

/* Our CID format: byte 0 = owning worker, bytes 1.. = CSPRNG output. */
void make_cid(struct moq_quic_endpoint *ep, ngtcp2_cid *cid)
{
	cid->datalen = MOQ_QUIC_CID_LEN;
	quic_rand(ep, cid->data + 1, MOQ_QUIC_CID_LEN - 1);
	cid->data[0] = ep->cfg.worker_id;
}

static int get_new_cid_cb(ngtcp2_conn *q, ngtcp2_cid *cid, uint8_t *token, size_t cidlen,
                          void *user_data)
{
	struct moq_quic_conn *c = user_data;
	int tries;

	(void)q;
	(void)cidlen;
	for (tries = 0; tries < 4; tries++) {
		make_cid(c->ep, cid);
		if (conn_add_cid(c, cid->data, cid->datalen) == 0)
			break;
	}
	if (tries == 4)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	/* RFC 9000, 10.3.2: the token is derived from a static key and the CID. */
	if (ngtcp2_crypto_generate_stateless_reset_token(token, c->ep->secret,
	                                                 sizeof(c->ep->secret), cid) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

static int remove_cid_cb(ngtcp2_conn *q, const ngtcp2_cid *cid, void *user_data)
{
	struct moq_quic_conn *c = user_data;

	(void)q;
	conn_del_cid(c, cid->data, cid->datalen);
	return 0;
}

static int handshake_completed_cb(ngtcp2_conn *q, void *user_data)
{
	struct moq_quic_conn *c = user_data;
	struct moq_quic_endpoint *ep = c->ep;

	(void)q;
	c->state = CS_ESTABLISHED;
	conn_half_open_done(c);
	ep->st.conns_established++;
	quic_tls_conn_alpn(c);
	if (!c->server) {
		/* RFC 9000, 18.2: the server's token for the handshake CID */
		const ngtcp2_transport_params *rp = ngtcp2_conn_get_remote_transport_params(c->q);

		if (rp && rp->stateless_reset_token_present)
			conn_add_token(c, rp->stateless_reset_token);
	}
	if (c->alpn == NULL) {
		/* RFC 9001, 8.1: QUIC requires ALPN. */
		ngtcp2_conn_set_tls_alert(c->q, 120);
		return NGTCP2_ERR_CALLBACK_FAILURE;
	}
	if (!c->notified && !c->close_req && c->cb && c->cb->established) {
		if (c->cb->established(c, c->user, c->alpn) < 0) {
			c->cb_failed = 1;
			return NGTCP2_ERR_CALLBACK_FAILURE;
		}
	}
	return 0;
}

static int app_live(const struct moq_quic_conn *c)
{
	return !c->notified && !c->close_req && c->cb != NULL;
}

static int recv_stream_data_cb(ngtcp2_conn *q, uint32_t flags, int64_t sid, uint64_t offset,
                               const uint8_t *data, size_t datalen, void *user_data,
                               void *stream_user_data)
{
	struct moq_quic_conn *c = user_data;
	const struct moq_quic_callbacks *cb = c->cb;

	(void)stream_user_data;
	if (app_live(c) && cb->stream_data) {
		if (cb->stream_data(c, c->user, sid, offset, data, datalen,
		                    (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0) < 0) {
			c->cb_failed = 1;
			return NGTCP2_ERR_CALLBACK_FAILURE;
		}
	}
	/* The data was consumed (copied out) during the call: open the
	 * windows again at once (RFC 9000, 4.2). */
	ngtcp2_conn_extend_max_stream_offset(q, sid, datalen);
	ngtcp2_conn_extend_max_offset(q, datalen);
	return 0;
}

static int acked_cb(ngtcp2_conn *q, int64_t sid, uint64_t offset, uint64_t datalen, void *user_data,
                    void *stream_user_data)
{
	struct moq_quic_conn *c = user_data;
	struct quic_strm *s = stream_user_data;
	const struct moq_quic_callbacks *cb = c->cb;

	(void)q;
	if (s == NULL)
		return 0;
	strm_ack(s, offset + datalen);
	if (datalen > 0 && app_live(c) && cb->stream_acked)
		cb->stream_acked(c, c->user, sid, offset + datalen, datalen, s->app);
	return 0;
}

static int stream_open_cb(ngtcp2_conn *q, int64_t sid, void *user_data)
{
	struct moq_quic_conn *c = user_data;
	const struct moq_quic_callbacks *cb = c->cb;
	struct quic_strm *s = strm_new(c, sid);

	if (s == NULL)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	c->ep->st.streams_opened++;
	ngtcp2_conn_set_stream_user_data(q, sid, s);
	if (app_live(c) && cb->stream_open && cb->stream_open(c, c->user, sid) < 0) {
		c->cb_failed = 1;
		return NGTCP2_ERR_CALLBACK_FAILURE;
	}
	return 0;
}

static int stream_close_cb(ngtcp2_conn *q, uint32_t flags, int64_t sid, uint64_t app_err,
                           void *user_data, void *stream_user_data)
{
	struct moq_quic_conn *c = user_data;
	const struct moq_quic_callbacks *cb = c->cb;
	struct quic_strm *s = stream_user_data;

	(void)q;
	if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
		app_err = 0;
	/* ngtcp2 0.12 answers a peer's STOP_SENDING with RESET_STREAM itself
	 * (RFC 9000, 3.5) and has no callback for it: a stream with a send
	 * side that closes with an error code although we neither reset it
	 * nor had all of it acknowledged was stopped by the peer. */
	if (s && (flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET) && !s->local_reset &&
	    (ngtcp2_is_bidi_stream(sid) || ngtcp2_conn_is_local_stream(q, sid)) &&
	    !(s->fin_sent && s->acked_off >= s->end_off)) {
		s->wr_closed = 1;
		pend_del(c, s);
		if (app_live(c) && cb->stream_stop_sending)
			cb->stream_stop_sending(c, c->user, sid, app_err);
	}
	if (app_live(c) && cb->stream_closed)
		cb->stream_closed(c, c->user, sid, app_err, s ? s->app : NULL);
	if (s)
		strm_free(c, s);
	/* A stream slot of the peer's is free again: allow one more
	 * (RFC 9000, 4.6), granted in batches of half the initial limit (as
	 * browsers' QUIC stacks do): one MAX_STREAMS per closed stream made
	 * the peer ACK a packet of its own for every one-frame audio group. */
	if (!ngtcp2_conn_is_local_stream(q, sid)) {
		int bidi = ngtcp2_is_bidi_stream(sid);
		uint64_t lim = bidi ? c->ep->cfg.max_streams_bidi : c->ep->cfg.max_streams_uni;
		uint32_t *owed = bidi ? &c->owed_bidi : &c->owed_uni;

		if (++*owed >= (lim / 2 > 0 ? lim / 2 : 1)) {
			if (bidi)
				ngtcp2_conn_extend_max_streams_bidi(q, *owed);
			else
				ngtcp2_conn_extend_max_streams_uni(q, *owed);
			*owed = 0;
		}
	}
	return 0;
}

static int stream_reset_cb(ngtcp2_conn *q, int64_t sid, uint64_t final_size, uint64_t app_err,
                           void *user_data, void *stream_user_data)
{
	struct moq_quic_conn *c = user_data;
	const struct moq_quic_callbacks *cb = c->cb;

	(void)q;
	(void)stream_user_data;
	if (app_live(c) && cb->stream_reset)
		cb->stream_reset(c, c->user, sid, app_err, final_size);
	return 0;
}

static int extend_streams_cb(ngtcp2_conn *q, uint64_t max_streams, void *user_data)
{
	struct moq_quic_conn *c = user_data;
	const struct moq_quic_callbacks *cb = c->cb;

	(void)q;
	(void)max_streams;
	if (app_live(c) && cb->writable && c->state == CS_ESTABLISHED)
		cb->writable(c, c->user, -1);
	return 0;
}

static int extend_stream_data_cb(ngtcp2_conn *q, int64_t sid, uint64_t max_data, void *user_data,
                                 void *stream_user_data)
{
	struct moq_quic_conn *c = user_data;
	const struct moq_quic_callbacks *cb = c->cb;
	struct quic_strm *s = stream_user_data;

	(void)q;
	(void)max_data;
	if (s && s->blocked) {
		s->blocked = 0;
		if (strm_has_unsent(s))
			pend_add(c, s);
	}
	ready_add(c);
	if (app_live(c) && cb->writable)
		cb->writable(c, c->user, sid);
	return 0;
}

/* RFC 9221: a DATAGRAM frame the peer sent (max_datagram_frame_size > 0):
 * to the application's datagram callback (dgram.c). */
static int recv_datagram_cb(ngtcp2_conn *q, uint32_t flags, const uint8_t *data, size_t datalen,
                            void *user_data)
{
	(void)q;
	(void)flags;
	dgram_recv(user_data, data, datalen);
	return 0;
}

static int dcid_status_cb(ngtcp2_conn *q, int type, uint64_t seq, const ngtcp2_cid *cid,
                          const uint8_t *token, void *user_data)
{
	struct moq_quic_conn *c = user_data;

	(void)q;
	(void)seq;
	(void)cid;
	if (token == NULL)
		return 0;
	if (type == NGTCP2_CONNECTION_ID_STATUS_TYPE_ACTIVATE)
		conn_add_token(c, token);
	else
		conn_del_token(c, token);
	return 0;
}

static int recv_sreset_cb(ngtcp2_conn *q, const ngtcp2_pkt_stateless_reset *sr, void *user_data)
{
	struct moq_quic_conn *c = user_data;

	(void)q;
	(void)sr;
	c->got_sreset = 1;
	return 0;
}

static int update_key_cb(ngtcp2_conn *q, uint8_t *rx_secret, uint8_t *tx_secret,
                         ngtcp2_crypto_aead_ctx *rx_aead_ctx, uint8_t *rx_iv,
                         ngtcp2_crypto_aead_ctx *tx_aead_ctx, uint8_t *tx_iv,
                         const uint8_t *current_rx_secret, const uint8_t *current_tx_secret,
                         size_t secretlen, void *user_data)
{
	struct moq_quic_conn *c = user_data;

	c->key_updates++;
	return ngtcp2_crypto_update_key_cb(q, rx_secret, tx_secret, rx_aead_ctx, rx_iv, tx_aead_ctx,
	                                   tx_iv, current_rx_secret, current_tx_secret, secretlen,
	                                   user_data);
}

__thread struct moq_quic_endpoint *quic_rx_ep;

/* quic_decrypt_cb, and a packet whose first frame after PADDING (type 0) is
 * an ACK (0x02, 0x03 with ECN counts) counted in stats.ack_pkts_in: the
 * peer's ACK-driven cost (issue 23, "measure b"). Every QUIC AEAD has a
 * 16-byte tag (RFC 9001, 5.3). */
static int decrypt_count_cb(uint8_t *dest, const ngtcp2_crypto_aead *aead,
                            const ngtcp2_crypto_aead_ctx *aead_ctx, const uint8_t *ciphertext,
                            size_t ciphertextlen, const uint8_t *nonce, size_t noncelen,
                            const uint8_t *aad, size_t aadlen)
{
	int rv = quic_decrypt_cb(dest, aead, aead_ctx, ciphertext, ciphertextlen, nonce, noncelen,
	                         aad, aadlen);

	if (rv == 0 && quic_rx_ep != NULL && ciphertextlen > 16) {
		size_t i = 0, n = ciphertextlen - 16;

		while (i < n && dest[i] == 0)
			i++;
		if (i < n && (dest[i] == 0x02 || dest[i] == 0x03))
			quic_rx_ep->st.ack_pkts_in++;
	}
	return rv;
}

static void log_cb(void *user_data, const char *fmt, ...)
{
	va_list ap;

	(void)user_data;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void setup_callbacks(struct moq_quic_endpoint *ep)
{
	ngtcp2_callbacks *cb = &ep->cbs;

	memset(cb, 0, sizeof(*cb));
	if (ep->cfg.role == MOQ_QUIC_CLIENT) {
		cb->client_initial = ngtcp2_crypto_client_initial_cb;
		cb->recv_retry = ngtcp2_crypto_recv_retry_cb;
		cb->recv_stateless_reset = recv_sreset_cb;
	} else {
		cb->recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
	}
	cb->recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
	quic_aead_init();
	cb->encrypt = quic_encrypt_cb;
	cb->decrypt = decrypt_count_cb;
	cb->hp_mask = quic_hp_mask_cb;
	cb->update_key = update_key_cb;
	cb->delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
	cb->delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
	cb->get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
	cb->version_negotiation = ngtcp2_crypto_version_negotiation_cb;
	cb->rand = rand_cb;
	cb->get_new_connection_id = get_new_cid_cb;
	cb->remove_connection_id = remove_cid_cb;
	cb->handshake_completed = handshake_completed_cb;
	cb->recv_stream_data = recv_stream_data_cb;
	cb->acked_stream_data_offset = acked_cb;
	cb->stream_open = stream_open_cb;
	cb->stream_close = stream_close_cb;
	cb->stream_reset = stream_reset_cb;
	cb->recv_datagram = recv_datagram_cb;
	cb->extend_max_local_streams_bidi = extend_streams_cb;
	cb->extend_max_local_streams_uni = extend_streams_cb;
	cb->extend_max_stream_data = extend_stream_data_cb;
	cb->dcid_status = dcid_status_cb;
}

void settings_init(struct moq_quic_endpoint *ep, ngtcp2_settings *s, uint64_t now)
{
	ngtcp2_settings_default(s);
	s->initial_ts = now;
	s->max_tx_udp_payload_size = ep->cfg.max_udp_payload;
	s->handshake_timeout = ep->cfg.handshake_timeout_ns;
	s->rand_ctx.native_handle = ep;
	s->max_window = ep->cfg.max_data;
	s->max_stream_window = ep->cfg.max_stream_data;
	switch (ep->cfg.cc) {
	case MOQ_QUIC_CC_BBR:
		s->cc_algo = NGTCP2_CC_ALGO_BBR;
		break;
	case MOQ_QUIC_CC_RENO:
		s->cc_algo = NGTCP2_CC_ALGO_RENO;
		break;
	default:
		s->cc_algo = NGTCP2_CC_ALGO_CUBIC;
		break;
	}
	if (ep->cfg.debug)
		s->log_printf = log_cb;
}

void params_init(struct moq_quic_endpoint *ep, ngtcp2_transport_params *p)
{
	ngtcp2_transport_params_default(p);
	p->initial_max_stream_data_bidi_local = ep->cfg.max_stream_data;
	p->initial_max_stream_data_bidi_remote = ep->cfg.max_stream_data;
	p->initial_max_stream_data_uni = ep->cfg.max_stream_data;
	p->initial_max_data = ep->cfg.max_data;
	p->initial_max_streams_bidi = ep->cfg.max_streams_bidi;
	p->initial_max_streams_uni = ep->cfg.max_streams_uni;
	p->max_idle_timeout = ep->cfg.idle_timeout_ns;
	p->active_connection_id_limit = ACTIVE_CID_LIMIT;
	/* RFC 9221, 3: DATAGRAM frames accepted (recv_datagram_cb) */
	p->max_datagram_frame_size = ep->cfg.max_datagram_frame_size;
}

struct moq_quic_conn *conn_alloc(struct moq_quic_endpoint *ep, const struct moq_quic_addr *local,
                                 const struct moq_quic_addr *remote, void *user)
{
	struct moq_quic_conn *c = moq_heap_calloc(MOQ_HEAP_QUIC_CONN, 1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->ep = ep;
	c->ref.get_conn = get_conn;
	c->ref.user_data = c;
	c->user = user ? user : ep->cfg.user;
	c->cb = ep->cfg.cb;
	c->hidx = UINT32_MAX;
	c->local = *local;
	c->remote = *remote;
	c->anext = ep->ahead;
	if (ep->ahead)
		ep->ahead->aprev = c;
	ep->ahead = c;
	ep->st.conns_active++;
	return c;
}

void path_of(ngtcp2_path *path, const struct moq_quic_addr *local,
             const struct moq_quic_addr *remote)
{
	memset(path, 0, sizeof(*path));
	path->local.addr = (ngtcp2_sockaddr *)(uintptr_t)&local->u.sa;
	path->local.addrlen = local->len;
	path->remote.addr = (ngtcp2_sockaddr *)(uintptr_t)&remote->u.sa;
	path->remote.addrlen = remote->len;
}

void *moq_quic_conn_user(const struct moq_quic_conn *c)
{
	return c->user;
}

void moq_quic_conn_set_user(struct moq_quic_conn *c, void *user)
{
	c->user = user;
}

void moq_quic_conn_set_callbacks(struct moq_quic_conn *c, const struct moq_quic_callbacks *cb,
                                 void *user)
{
	c->cb = cb;
	c->user = user;
}

struct moq_quic_endpoint *moq_quic_conn_endpoint(const struct moq_quic_conn *c)
{
	return c->ep;
}

const char *moq_quic_conn_alpn(const struct moq_quic_conn *c)
{
	return c->alpn;
}

int moq_quic_conn_is_server(const struct moq_quic_conn *c)
{
	return c->server;
}

const struct moq_quic_addr *moq_quic_conn_remote(const struct moq_quic_conn *c)
{
	return &c->remote;
}

char *moq_quic_addr_str(const struct moq_quic_addr *a, char *out, size_t cap)
{
	char ip[INET6_ADDRSTRLEN];

	out[0] = 0;
	if (a && a->u.sa.sa_family == AF_INET &&
	    inet_ntop(AF_INET, &a->u.in4.sin_addr, ip, sizeof(ip)))
		snprintf(out, cap, "%s:%u", ip, ntohs(a->u.in4.sin_port));
	else if (a && a->u.sa.sa_family == AF_INET6 &&
	         inet_ntop(AF_INET6, &a->u.in6.sin6_addr, ip, sizeof(ip)))
		snprintf(out, cap, "[%s]:%u", ip, ntohs(a->u.in6.sin6_port));
	return out;
}

const struct moq_quic_addr *moq_quic_conn_local(const struct moq_quic_conn *c)
{
	return &c->local;
}

const char *moq_quic_conn_server_name(const struct moq_quic_conn *c, char *out, size_t cap)
{
	void *sni = NULL;
	unsigned short n;

	if (c->ssl == NULL || cap == 0)
		return NULL;
	n = wolfSSL_SNI_GetRequest(c->ssl, WOLFSSL_SNI_HOST_NAME, &sni);
	if (n == 0 || sni == NULL || n >= cap)
		return NULL;
	memcpy(out, sni, n);
	out[n] = 0;
	return out;
}

void moq_quic_conn_get_info(const struct moq_quic_conn *c, struct moq_quic_conn_info *out)
{
	ngtcp2_conn_stat cs;

	memset(out, 0, sizeof(*out));
	if (c->fp != NULL) {
		hand_info(c, out);
		return;
	}
	if (c->q == NULL) {
		/* closed (a handed-off one's engine record goes before its
		 * conn_closed: cb_conn_closed reads this for --auth-url's end),
		 * or not made yet: the counters kept here */
		out->bytes_sent = c->bytes_sent;
		out->bytes_recv = c->bytes_recv;
		out->key_updates = c->key_updates;
		return;
	}
	ngtcp2_conn_get_conn_stat(c->q, &cs);
	out->smoothed_rtt_ns = cs.smoothed_rtt;
	out->min_rtt_ns = cs.min_rtt;
	out->cwnd = cs.cwnd;
	out->bytes_in_flight = cs.bytes_in_flight;
	out->bytes_sent = c->bytes_sent;
	out->bytes_recv = c->bytes_recv;
	out->established = c->state == CS_ESTABLISHED;
	out->validated = c->state == CS_ESTABLISHED || !c->server;
	out->key_updates = c->key_updates;
}

uint64_t moq_quic_conn_cwnd(const struct moq_quic_conn *c)
{
	ngtcp2_conn_stat cs;

	if (c->fp != NULL)
		return hand_cwnd(c);
	if (c->q == NULL)
		return 0;
	ngtcp2_conn_get_conn_stat(c->q, &cs);
	return cs.cwnd;
}

int moq_quic_conn_close(struct moq_quic_conn *c, uint64_t app_err, const char *reason)
{
	struct moq_quic_close_info info;
	ngtcp2_connection_close_error e;

	if (c == NULL)
		return MOQ_ERR_INVAL;
	if (c->notified || c->state >= CS_CLOSING)
		return 0;
	if (c->fp != NULL)
		return hand_close(c, app_err, reason);
	c->close_code = app_err;
	snprintf(c->close_reason, sizeof(c->close_reason), "%s", reason ? reason : "");
	if (c->in_ng) {
		/* inside an ngtcp2 callback: tell the application now, write
		 * the CONNECTION_CLOSE when ngtcp2 returns */
		c->close_req = 1;
		memset(&info, 0, sizeof(info));
		info.kind = MOQ_QUIC_CLOSE_APPLICATION;
		info.local = 1;
		info.code = app_err;
		info.err = app_err == 0 ? 0 : MOQ_ERR_CLOSED;
		info.what = "application close";
		conn_notify(c, &info);
		return 0;
	}
	ngtcp2_connection_close_error_set_application_error(
	        &e, app_err, (const uint8_t *)c->close_reason, strlen(c->close_reason));
	/* the endpoint's latest timestamp: ngtcp2 needs one >= the last it saw */
	conn_start_closing(c, &e, c->ep->now);
	return 0;
}

int moq_quic_conn_update_key(struct moq_quic_conn *c, uint64_t now)
{
	int rv;

	if (c == NULL)
		return MOQ_ERR_INVAL;
	if (c->state != CS_ESTABLISHED)
		return MOQ_ERR_STATE;
	if (c->fp != NULL)
		return hand_update_key(c);
	rv = ngtcp2_conn_initiate_key_update(c->q, now);
	if (rv != 0) {
		/* ngtcp2 derives the next keys during a write: schedule one so
		 * that a retry after the next _send can succeed */
		ready_add(c);
		return MOQ_ERR_STATE;
	}
	ready_add(c);
	return 0;
}
