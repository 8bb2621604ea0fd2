/* SPDX-License-Identifier: MIT */
/*
 * close.c: closing a connection: close reasons for the application, the
 * closing and draining periods (RFC 9000, 10.2), freeing.
 */
#include "quic_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ closing */

static const char *transport_what(uint64_t code)
{
	if (code >= NGTCP2_CRYPTO_ERROR && code <= NGTCP2_CRYPTO_ERROR + 0xff) {
		switch (code - NGTCP2_CRYPTO_ERROR) {
		case 120:
			return "tls alert 120 no_application_protocol (ALPN mismatch)";
		case 40:
			return "tls alert 40 handshake_failure";
		case 42:
			return "tls alert 42 bad_certificate";
		case 48:
			return "tls alert 48 unknown_ca";
		case 109:
			return "tls alert 109 missing_extension";
		default:
			return "tls alert";
		}
	}
	switch (code) {
	case NGTCP2_NO_ERROR:
		return "no error";
	case NGTCP2_INTERNAL_ERROR:
		return "internal error";
	case NGTCP2_CONNECTION_REFUSED:
		return "connection refused";
	case NGTCP2_FLOW_CONTROL_ERROR:
		return "flow control error";
	case NGTCP2_STREAM_LIMIT_ERROR:
		return "stream limit error";
	case NGTCP2_STREAM_STATE_ERROR:
		return "stream state error";
	case NGTCP2_FINAL_SIZE_ERROR:
		return "final size error";
	case NGTCP2_FRAME_ENCODING_ERROR:
		return "frame encoding error";
	case NGTCP2_TRANSPORT_PARAMETER_ERROR:
		return "transport parameter error";
	case NGTCP2_PROTOCOL_VIOLATION:
		return "protocol violation";
	case NGTCP2_INVALID_TOKEN:
		return "invalid token";
	case NGTCP2_KEY_UPDATE_ERROR:
		return "key update error";
	default:
		return "transport error";
	}
}

static void info_from_ccerr(struct moq_quic_close_info *info,
                            const ngtcp2_connection_close_error *e)
{
	info->code = e->error_code;
	info->reason = e->reason;
	info->reasonlen = e->reasonlen;
	switch (e->type) {
	case NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION:
		info->kind = MOQ_QUIC_CLOSE_APPLICATION;
		info->what = "application close";
		info->err = e->error_code == 0 ? 0 : MOQ_ERR_CLOSED;
		break;
	case NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT_VERSION_NEGOTIATION:
		info->kind = MOQ_QUIC_CLOSE_VERSION;
		info->what = "version negotiation failed";
		info->err = MOQ_ERR_PROTO;
		break;
	case NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT_IDLE_CLOSE:
		info->kind = MOQ_QUIC_CLOSE_IDLE;
		info->what = "idle timeout";
		info->err = MOQ_ERR_CLOSED;
		break;
	default:
		info->kind = MOQ_QUIC_CLOSE_TRANSPORT;
		info->what = transport_what(e->error_code);
		if (e->error_code == NGTCP2_NO_ERROR)
			info->err = 0;
		else if (e->error_code >= NGTCP2_CRYPTO_ERROR &&
		         e->error_code <= NGTCP2_CRYPTO_ERROR + 0xff)
			info->err = MOQ_ERR_CRYPTO;
		else
			info->err = MOQ_ERR_PROTO;
		break;
	}
}

/* Tell the application once; afterwards no callback reaches it for @c. */
void conn_notify(struct moq_quic_conn *c, struct moq_quic_close_info *info)
{
	struct moq_quic_endpoint *ep = c->ep;

	if (c->notified)
		return;
	c->notified = 1;
	if (info->kind == MOQ_QUIC_CLOSE_TRANSPORT && info->code != NGTCP2_NO_ERROR)
		ep->st.conn_errors++;
	if (info->code == NGTCP2_STREAM_LIMIT_ERROR && info->kind == MOQ_QUIC_CLOSE_TRANSPORT)
		ep->st.refused_streams++;
	if (c->cb && c->cb->conn_closed)
		c->cb->conn_closed(c, c->user, info);
}

static void conn_notify_ccerr(struct moq_quic_conn *c, int local)
{
	ngtcp2_connection_close_error e;
	struct moq_quic_close_info info;

	memset(&info, 0, sizeof(info));
	ngtcp2_conn_get_connection_close_error(c->q, &e);
	info_from_ccerr(&info, &e);
	info.local = local;
	if (c->got_sreset) {
		info.kind = MOQ_QUIC_CLOSE_STATELESS_RESET;
		info.what = "stateless reset received";
		info.err = MOQ_ERR_CLOSED;
	}
	conn_notify(c, &info);
}

void conn_half_open_done(struct moq_quic_conn *c)
{
	if (c->half_open) {
		c->half_open = 0;
		c->ep->st.half_open--;
	}
}

/* Enter the closing period with @e (RFC 9000, 10.2.1): one CONNECTION_CLOSE
 * is written now and resent (rate-limited) while packets keep arriving. */
void conn_start_closing(struct moq_quic_conn *c, const ngtcp2_connection_close_error *e,
                        uint64_t now)
{
	ngtcp2_path_storage ps;
	ngtcp2_pkt_info pi;
	ngtcp2_ssize n;
	struct moq_quic_close_info info;

	if (c->state >= CS_CLOSING)
		return;
	conn_half_open_done(c);
	ngtcp2_path_storage_zero(&ps);
	if (c->close_buf == NULL)
		c->close_buf = moq_heap_malloc(MOQ_HEAP_QUIC_CONN, MOQ_QUIC_MAX_UDP_PAYLOAD);
	n = c->close_buf ? ngtcp2_conn_write_connection_close(c->q, &ps.path, &pi, c->close_buf,
	                                                      c->ep->cfg.max_udp_payload, e, now)
	                 : 0;
	if (n > 0) {
		c->close_len = (size_t)n;
		c->close_pending = 1;
		c->state = CS_CLOSING;
		/* RFC 9000, 10.2: the closing period lasts three PTOs. */
		c->deadline = now + 3 * ngtcp2_conn_get_pto(c->q);
		ready_add(c);
	} else {
		c->state = CS_DEAD;
		c->deadline = now;
	}
	memset(&info, 0, sizeof(info));
	info_from_ccerr(&info, e);
	info.local = 1;
	conn_notify(c, &info);
	conn_update_timer(c);
}

static void conn_start_draining(struct moq_quic_conn *c, uint64_t now)
{
	if (c->state >= CS_CLOSING)
		return;
	conn_half_open_done(c);
	c->state = CS_DRAINING;
	c->deadline = now + 3 * ngtcp2_conn_get_pto(c->q);
	ready_del(c);
	conn_notify_ccerr(c, 0);
	conn_update_timer(c);
}

/* Close @c silently (idle timeout, handshake timeout, dropped). */
static void conn_drop(struct moq_quic_conn *c, struct moq_quic_close_info *info)
{
	conn_half_open_done(c);
	c->state = CS_DEAD;
	c->deadline = 0;
	ready_del(c);
	conn_notify(c, info);
	conn_update_timer(c);
}

/* Handle a fatal ngtcp2 error @rv on @c (RFC 9000, 10.2). */
void conn_fail(struct moq_quic_conn *c, int rv, uint64_t now)
{
	ngtcp2_connection_close_error e;
	struct moq_quic_close_info info;

	memset(&info, 0, sizeof(info));
	if (c->ep->cfg.debug)
		fprintf(stderr, "moqdp quic: conn %p (%s) error %s, tls alert %u\n", (void *)c,
		        c->server ? "server" : "client", ngtcp2_strerror(rv),
		        ngtcp2_conn_get_tls_alert(c->q));
	switch (rv) {
	case NGTCP2_ERR_DRAINING:
		conn_start_draining(c, now);
		return;
	case NGTCP2_ERR_CLOSING:
		return;
	case NGTCP2_ERR_DROP_CONN:
	case NGTCP2_ERR_RETRY:
		info.kind = MOQ_QUIC_CLOSE_TRANSPORT;
		info.what = "connection dropped";
		info.err = MOQ_ERR_DROPPED;
		info.local = 1;
		conn_drop(c, &info);
		return;
	case NGTCP2_ERR_RECV_VERSION_NEGOTIATION:
		info.kind = MOQ_QUIC_CLOSE_VERSION;
		info.what = "version negotiation: no common version";
		info.err = MOQ_ERR_PROTO;
		info.local = 1;
		conn_drop(c, &info);
		return;
	case NGTCP2_ERR_IDLE_CLOSE:
		c->ep->st.idle_timeouts++;
		info.kind = MOQ_QUIC_CLOSE_IDLE;
		info.what = "idle timeout";
		info.err = MOQ_ERR_CLOSED;
		info.local = 1;
		conn_drop(c, &info);
		return;
	case NGTCP2_ERR_HANDSHAKE_TIMEOUT:
		c->ep->st.handshake_timeouts++;
		info.kind = MOQ_QUIC_CLOSE_HANDSHAKE_TIMEOUT;
		info.what = "handshake timeout";
		info.err = MOQ_ERR_CLOSED;
		info.local = 1;
		conn_drop(c, &info);
		return;
	case NGTCP2_ERR_CRYPTO:
		/* RFC 9001, 4.8: a TLS alert becomes CRYPTO_ERROR 0x100 + alert */
		ngtcp2_connection_close_error_set_transport_error_tls_alert(
		        &e, ngtcp2_conn_get_tls_alert(c->q), NULL, 0);
		break;
	case NGTCP2_ERR_CALLBACK_FAILURE:
		if (ngtcp2_conn_get_tls_alert(c->q) != 0) {
			ngtcp2_connection_close_error_set_transport_error_tls_alert(
			        &e, ngtcp2_conn_get_tls_alert(c->q), NULL, 0);
			break;
		}
		if (c->cb_failed) {
			ngtcp2_connection_close_error_set_transport_error(
			        &e, NGTCP2_INTERNAL_ERROR, (const uint8_t *)"application", 11);
			break;
		}
		/* fall through */
	default:
		ngtcp2_connection_close_error_set_transport_error_liberr(&e, rv, NULL, 0);
		break;
	}
	conn_start_closing(c, &e, now);
}

/* Finish an application close requested during a callback. */
void conn_after_ng(struct moq_quic_conn *c, uint64_t now)
{
	if (c->close_req && c->state < CS_CLOSING) {
		ngtcp2_connection_close_error e;

		c->close_req = 0;
		ngtcp2_connection_close_error_set_application_error(
		        &e, c->close_code, (const uint8_t *)c->close_reason,
		        strlen(c->close_reason));
		conn_start_closing(c, &e, now);
	}
}

void conn_free(struct moq_quic_conn *c)
{
	struct moq_quic_endpoint *ep = c->ep;
	uint32_t i;

	hand_conn_free(c); /* the engine's side first: it notifies */
	dgram_free(c);     /* queued datagrams released (their memory is the caller's) */
	if (!c->notified) {
		struct moq_quic_close_info info;

		memset(&info, 0, sizeof(info));
		info.kind = MOQ_QUIC_CLOSE_ENDPOINT;
		info.what = "endpoint closed";
		info.err = MOQ_ERR_CLOSED;
		info.local = 1;
		conn_notify(c, &info);
	}
	conn_half_open_done(c);
	ready_del(c);
	heap_remove(ep, c);
	while (c->ncids > 0)
		conn_del_cid(c, c->cids[0].id, c->cids[0].len);
	while (c->ntokens > 0)
		conn_del_token(c, c->tokens[0]);
	if (c->addr_slot_valid) /* the source counted at accept, not a migrated one */
		moq_quic_addr_table_put(ep->atab, &c->counted_addr);
	for (i = 0; i < c->smap_cap; i++) {
		struct quic_strm *s = c->smap[i];

		if (s) {
			strm_heap_free(s, MOQ_HEAP_QUIC_STREAM);
			ep->nslive--;
		}
	}
	moq_heap_free(MOQ_HEAP_QUIC_SMAP, c->smap);
	if (c->q)
		ngtcp2_conn_del(c->q);
	quic_tls_conn_free(c);
	moq_heap_free(MOQ_HEAP_QUIC_CONN, c->close_buf);
	if (c->aprev)
		c->aprev->anext = c->anext;
	else
		ep->ahead = c->anext;
	if (c->anext)
		c->anext->aprev = c->aprev;
	ep->st.conns_active--;
	ep->st.conns_closed++;
	moq_heap_free(MOQ_HEAP_QUIC_CONN, c);
}
