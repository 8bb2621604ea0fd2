/* SPDX-License-Identifier: MIT */
/*
 * endpoint.c: the QUIC endpoint: its configuration and limits, the
 * worker a datagram belongs to, each datagram routed by CID (or answered
 * with version negotiation, Retry, a refusal or a stateless reset), server
 * accept and client connect, stats. The other concerns have their own files:
 * conn.c, stream.c, send.c, timer.c, close.c, cid.c, addr.c, stateless.c,
 * alloc.c, tls.c.
 */
#include "quic_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>

#include <ngtcp2/ngtcp2_crypto_wolfssl.h>

#include "fastpath.h"

/* Defaults (quic.h documents them). */
#define DEF_MAX_CONNS      1024
#define DEF_MAX_HALF_OPEN  256
#define DEF_MAX_PER_ADDR   64
#define DEF_STREAMS_BIDI   100
#define DEF_STREAMS_UNI    1000
#define DEF_STREAM_DATA    (1u << 20)
#define DEF_MAX_DATA       (16u << 20)
#define DEF_HS_TIMEOUT     (10ull * NGTCP2_SECONDS)
#define DEF_IDLE_TIMEOUT   (30ull * NGTCP2_SECONDS)
#define DEF_TOKEN_LIFETIME (10ull * NGTCP2_SECONDS)
#define DEF_SRESET_RATE    1000
#define DEF_SL_QUEUE       64

/* ------------------------------------------------------------ endpoint */

int moq_quic_cid_worker(const uint8_t *cid, size_t cidlen)
{
	if (cid == NULL || cidlen != MOQ_QUIC_CID_LEN)
		return MOQ_ERR_NOTFOUND;
	return cid[0];
}

int moq_quic_pkt_worker(const uint8_t *data, size_t len)
{
	if (data == NULL || len < 1)
		return MOQ_ERR_DECODE;
	if (data[0] & 0x80) {
		/* RFC 8999, 5.1: long header; byte 5 is the DCID length. */
		uint32_t version;
		uint8_t type;

		if (len < 6)
			return MOQ_ERR_DECODE;
		if (6 + (size_t)data[5] > len)
			return MOQ_ERR_DECODE;
		version = (uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 |
		          (uint32_t)data[3] << 8 | data[4];
		type = (data[0] >> 4) & 0x3;
		/* RFC 9000, 17.2: Initial (0) and 0-RTT (1) may carry the
		 * client's random DCID. */
		if (version != NGTCP2_PROTO_VER_V1 || type == 0 || type == 1)
			return MOQ_ERR_NOTFOUND;
		return moq_quic_cid_worker(data + 6, data[5]);
	}
	if (len < 1 + MOQ_QUIC_CID_LEN)
		return MOQ_ERR_DECODE;
	return moq_quic_cid_worker(data + 1, MOQ_QUIC_CID_LEN);
}

static char *dupstr(const char *s)
{
	return s ? strdup(s) : NULL;
}

struct moq_quic_endpoint *moq_quic_endpoint_new(const struct moq_quic_config *cfg, int *err)
{
	struct moq_quic_endpoint *ep;
	const char *why;
	size_t i;
	int rv = MOQ_ERR_CONFIG;

	if (cfg == NULL || cfg->alpn == NULL || cfg->alpn_count == 0 ||
	    cfg->alpn_count > QUIC_ALPN_MAX_IDS ||
	    (cfg->role != MOQ_QUIC_SERVER && cfg->role != MOQ_QUIC_CLIENT) ||
	    (cfg->cert_file == NULL) != (cfg->key_file == NULL) ||
	    (cfg->tls != NULL && (cfg->role != MOQ_QUIC_SERVER || cfg->cert_file != NULL)) ||
	    cfg->max_udp_payload > MOQ_QUIC_MAX_UDP_PAYLOAD ||
	    (cfg->max_udp_payload != 0 && cfg->max_udp_payload < MOQ_QUIC_MIN_PKT_BUF))
		goto fail_arg;
	for (i = 0; i < cfg->alpn_count; i++) {
		size_t l = cfg->alpn[i] ? strlen(cfg->alpn[i]) : 0;

		if (l == 0 || l > MOQ_QUIC_ALPN_MAX)
			goto fail_arg;
	}
	rv = moq_quic_check_tls(&why);
	if (rv != 0) {
		fprintf(stderr, "moqdp quic: %s\n", why);
		goto fail_arg;
	}
	rv = MOQ_ERR_NOMEM;
	ep = calloc(1, sizeof(*ep));
	if (ep == NULL)
		goto fail_arg;
	ep->cfg = *cfg;
	/* defaults */
#define DEF(f, v)                                                                                  \
	do {                                                                                       \
		if (ep->cfg.f == 0)                                                                \
			ep->cfg.f = (v);                                                           \
	} while (0)
	DEF(max_conns, DEF_MAX_CONNS);
	DEF(max_half_open, DEF_MAX_HALF_OPEN);
	DEF(max_conns_per_addr, DEF_MAX_PER_ADDR);
	DEF(max_streams_bidi, DEF_STREAMS_BIDI);
	DEF(max_streams_uni, DEF_STREAMS_UNI);
	DEF(max_stream_data, DEF_STREAM_DATA);
	DEF(max_data, DEF_MAX_DATA);
	DEF(handshake_timeout_ns, DEF_HS_TIMEOUT);
	DEF(idle_timeout_ns, DEF_IDLE_TIMEOUT);
	DEF(max_udp_payload, MOQ_QUIC_MAX_UDP_PAYLOAD);
	DEF(retry_threshold, ep->cfg.max_half_open / 2 ? ep->cfg.max_half_open / 2 : 1);
	DEF(retry_token_lifetime_ns, DEF_TOKEN_LIFETIME);
	DEF(stateless_reset_per_s, DEF_SRESET_RATE);
	DEF(stateless_queue, DEF_SL_QUEUE);
#undef DEF
	ep->cfg.alpn = NULL;
	ep->alpn_count = cfg->alpn_count;
	for (i = 0; i < cfg->alpn_count; i++) {
		size_t l = strlen(cfg->alpn[i]);

		ep->alpn[i] = strdup(cfg->alpn[i]);
		if (ep->alpn[i] == NULL)
			goto fail_strings;
		ep->alpn_len[i] = l;
		/* RFC 7301, 3.1: ProtocolNameList, one length byte each. */
		ep->alpn_wire[ep->alpn_wire_len++] = (uint8_t)l;
		memcpy(ep->alpn_wire + ep->alpn_wire_len, cfg->alpn[i], l);
		ep->alpn_wire_len += l;
		if (i > 0)
			strcat(ep->alpn_csv, ",");
		strcat(ep->alpn_csv, cfg->alpn[i]);
	}
	ep->cert_file = dupstr(cfg->cert_file);
	ep->key_file = dupstr(cfg->key_file);
	ep->ca_file = dupstr(cfg->ca_file);
	ep->server_name = dupstr(cfg->server_name ? cfg->server_name : "localhost");
	if ((cfg->cert_file && !ep->cert_file) || (cfg->key_file && !ep->key_file) ||
	    (cfg->ca_file && !ep->ca_file) || !ep->server_name)
		goto fail_strings;
	ep->cfg.cert_file = ep->cert_file;
	ep->cfg.key_file = ep->key_file;
	ep->cfg.ca_file = ep->ca_file;
	ep->cfg.server_name = ep->server_name;

	rv = quic_rng_init(ep);
	if (rv != 0)
		goto fail_strings;
	if (cfg->secret)
		memcpy(ep->secret, cfg->secret, MOQ_QUIC_SECRET_LEN);
	else
		quic_rand(ep, ep->secret, MOQ_QUIC_SECRET_LEN);
	ep->cfg.secret = NULL;
	quic_rand(ep, (uint8_t *)&ep->hash_key, sizeof(ep->hash_key));

	rv = MOQ_ERR_NOMEM;
	if (ktab_init(&ep->ctab, (uint64_t)ep->cfg.max_conns * QUIC_CONN_MAX_CIDS) != 0 ||
	    ktab_init(&ep->ttab, (uint64_t)ep->cfg.max_conns * QUIC_CONN_MAX_TOKENS) != 0)
		goto fail_tables;
	ep->atab = cfg->addr_table;
	if (ep->atab == NULL) {
		ep->atab = moq_quic_addr_table_new(ep->cfg.max_conns);
		ep->atab_own = 1;
	}
	ep->heap_cap = ep->cfg.max_conns;
	ep->heap = calloc(ep->heap_cap, sizeof(*ep->heap));
	ep->slq_cap = ep->cfg.stateless_queue;
	ep->slq = calloc(ep->slq_cap, sizeof(*ep->slq));
	if (!ep->atab || !ep->heap || !ep->slq)
		goto fail_tables;
	ep->sr_tokens = ep->cfg.stateless_reset_per_s / 10.0 + 1;

	rv = mem_init(ep);
	if (rv != 0)
		goto fail_tables;
	rv = quic_tls_ctx_new(ep); /* or takes cfg->tls */
	if (rv != 0)
		goto fail_tables;
	rv = hand_init(ep); /* the fast path engine, config.fastpath */
	if (rv != 0) {
		quic_tls_ctx_free(ep);
		goto fail_tables;
	}
	setup_callbacks(ep);
	if (err)
		*err = 0;
	return ep;

fail_tables:
	mem_fini(ep);
	free(ep->slq);
	free(ep->heap);
	if (ep->atab_own)
		moq_quic_addr_table_free(ep->atab);
	ktab_fini(&ep->ttab);
	ktab_fini(&ep->ctab);
	quic_rng_free(ep);
fail_strings:
	for (i = 0; i < QUIC_ALPN_MAX_IDS; i++)
		free(ep->alpn[i]);
	free(ep->cert_file);
	free(ep->key_file);
	free(ep->ca_file);
	free(ep->server_name);
	free(ep);
fail_arg:
	if (err)
		*err = rv;
	return NULL;
}

void moq_quic_endpoint_free(struct moq_quic_endpoint *ep)
{
	size_t i;

	if (ep == NULL)
		return;
	while (ep->ahead)
		conn_free(ep->ahead);
	hand_fini(ep);
	mem_fini(ep);
	quic_tls_ctx_free(ep);
	free(ep->slq);
	free(ep->heap);
	if (ep->atab_own)
		moq_quic_addr_table_free(ep->atab);
	ktab_fini(&ep->ttab);
	ktab_fini(&ep->ctab);
	quic_rng_free(ep);
	while (ep->sfree != NULL) {
		struct quic_strm *s = ep->sfree;

		ep->sfree = s->pnext;
		strm_heap_free(s, MOQ_HEAP_QUIC_SPARE);
	}
	for (i = 0; i < QUIC_ALPN_MAX_IDS; i++)
		free(ep->alpn[i]);
	free(ep->cert_file);
	free(ep->key_file);
	free(ep->ca_file);
	free(ep->server_name);
	free(ep);
}

/* Feed one datagram to an existing connection. */
static void conn_recv(struct moq_quic_conn *c, const uint8_t *data, size_t len,
                      const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                      uint64_t now)
{
	ngtcp2_path path;
	ngtcp2_pkt_info pi;
	int rv;

	if (c->state == CS_CLOSING) {
		/* RFC 9000, 10.2.1: resend CONNECTION_CLOSE, rate-limited
		 * (on the 1st, 2nd, 4th, 8th ... packet). */
		c->closing_rx++;
		if ((c->closing_rx & (c->closing_rx - 1)) == 0) {
			c->close_pending = 1;
			ready_add(c);
		}
		return;
	}
	if (c->state >= CS_DRAINING)
		return;
	if (c->fp != NULL) {
		hand_recv(c, data, len, local, remote, now);
		return;
	}
	memset(&pi, 0, sizeof(pi));
	path_of(&path, local, remote);
	c->bytes_recv += len;
	c->in_ng = 1;
	quic_rx_ep = c->ep;
	rv = ngtcp2_conn_read_pkt(c->q, &path, &pi, data, len, now);
	quic_rx_ep = NULL;
	c->in_ng = 0;
	if (rv != 0)
		conn_fail(c, rv, now);
	else
		conn_after_ng(c, now);
	if (c->state < CS_CLOSING) {
		const ngtcp2_path *cur = ngtcp2_conn_get_path(c->q);

		if (cur->remote.addrlen <= sizeof(c->remote.u)) {
			memcpy(&c->remote.u, cur->remote.addr, cur->remote.addrlen);
			c->remote.len = cur->remote.addrlen;
		}
		/* quiet now (an ACK took the last packet in flight)? then the
		 * fast path takes it over (handoff.c) */
		if (c->fp_ok) {
			hand_try(c, now);
			if (c->fp != NULL)
				return;
		}
		ready_add(c);
		/* the next _send visits it and sets its timer after writing
		 * (send.c): once per burst, not per datagram (a timer update
		 * is an ngtcp2_conn_get_expiry and a heap move) */
		if (c->in_ready)
			return;
	}
	conn_update_timer(c);
}

static int need_retry(const struct moq_quic_endpoint *ep)
{
	switch (ep->cfg.retry) {
	case MOQ_QUIC_RETRY_ALWAYS:
		return 1;
	case MOQ_QUIC_RETRY_NEVER:
		return 0;
	default:
		return ep->st.half_open >= ep->cfg.retry_threshold;
	}
}

/* A first packet from a client: vet it, apply the limits, Retry or accept. */
static void server_accept(struct moq_quic_endpoint *ep, const uint8_t *data, size_t len,
                          const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                          uint64_t now)
{
	ngtcp2_pkt_hd hd;
	ngtcp2_cid odcid, scid;
	ngtcp2_settings s;
	ngtcp2_transport_params p;
	ngtcp2_path path;
	struct moq_quic_conn *c;
	int validated = 0, counted, rv;

	rv = ngtcp2_accept(&hd, data, len);
	if (rv == NGTCP2_ERR_RETRY) {
		send_retry(ep, &hd, len, local, remote, now);
		return;
	}
	if (rv != 0) {
		ep->st.pkts_dropped++;
		return;
	}
	if (ep->st.conns_active >= ep->cfg.max_conns) {
		ep->st.refused_conns++;
		send_stateless_close(ep, &hd, NGTCP2_CONNECTION_REFUSED, len, local, remote);
		return;
	}
	/* the source's count (an IPv4 address, an IPv6 /64; shared by every
	 * endpoint given the same cfg.addr_table): a source at its limit gets
	 * no Retry either; the count is taken below, with the connection */
	counted = ep->cfg.max_conns_per_addr != UINT32_MAX;
	if (counted && moq_quic_addr_table_count(ep->atab, remote) >= ep->cfg.max_conns_per_addr) {
		ep->st.refused_per_addr++;
		send_stateless_close(ep, &hd, NGTCP2_CONNECTION_REFUSED, len, local, remote);
		return;
	}
	if (hd.type == NGTCP2_PKT_INITIAL && hd.token.len > 0 &&
	    hd.token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
		if (ngtcp2_crypto_verify_retry_token(&odcid, hd.token.base, hd.token.len,
		                                     ep->secret, sizeof(ep->secret), hd.version,
		                                     &remote->u.sa, remote->len, &hd.dcid,
		                                     ep->cfg.retry_token_lifetime_ns, now) != 0) {
			/* RFC 9000, 8.1.2: close with INVALID_TOKEN. */
			ep->st.retry_token_bad++;
			send_stateless_close(ep, &hd, NGTCP2_INVALID_TOKEN, len, local, remote);
			return;
		}
		validated = 1;
	} else if (need_retry(ep)) {
		if (hd.type == NGTCP2_PKT_INITIAL)
			send_retry(ep, &hd, len, local, remote, now);
		else
			ep->st.pkts_dropped++;
		return;
	}
	if (ep->st.half_open >= ep->cfg.max_half_open) {
		ep->st.refused_half_open++;
		send_stateless_close(ep, &hd, NGTCP2_CONNECTION_REFUSED, len, local, remote);
		return;
	}

	/* another endpoint sharing the table may have taken the last one
	 * since the check above; a full table refuses too */
	if (counted &&
	    moq_quic_addr_table_take(ep->atab, remote, ep->cfg.max_conns_per_addr) != 0) {
		ep->st.refused_per_addr++;
		send_stateless_close(ep, &hd, NGTCP2_CONNECTION_REFUSED, len, local, remote);
		return;
	}
	c = conn_alloc(ep, local, remote, NULL);
	if (c == NULL) {
		if (counted)
			moq_quic_addr_table_put(ep->atab, remote);
		ep->st.pkts_dropped++;
		return;
	}
	c->server = 1;
	ep->st.conns_accepted++;
	c->half_open = 1;
	ep->st.half_open++;
	c->addr_slot_valid = counted;
	c->counted_addr = *remote;
	c->notified = 1; /* nothing handed out until conn_new */

	make_cid(ep, &scid);
	settings_init(ep, &s, now);
	params_init(ep, &p);
	if (validated) {
		/* RFC 9000, 7.3: after Retry, original_destination_connection_id
		 * is the first DCID, retry_source_connection_id ours. */
		p.original_dcid = odcid;
		p.retry_scid = hd.dcid;
		p.retry_scid_present = 1;
		s.token = hd.token;
	} else {
		p.original_dcid = hd.dcid;
	}
	p.stateless_reset_token_present = 1;
	if (ngtcp2_crypto_generate_stateless_reset_token(p.stateless_reset_token, ep->secret,
	                                                 sizeof(ep->secret), &scid) != 0)
		goto fail_conn;
	path_of(&path, local, remote);
	if (ngtcp2_conn_server_new(&c->q, &hd.scid, &scid, &path, hd.version, &ep->cbs, &s, &p,
	                           &ep->mem, c) != 0) {
		c->q = NULL;
		goto fail_conn;
	}
	if (quic_tls_conn_new(c) != 0)
		goto fail_conn;
	ngtcp2_conn_set_tls_native_handle(c->q, c->ssl);
	if (ep->cfg.keep_alive_ns)
		ngtcp2_conn_set_keep_alive_timeout(c->q, ep->cfg.keep_alive_ns);
	/* the fast path needs the 1-RTT secrets (export.c); without them the
	 * connection just stays on ngtcp2 */
	if (ep->fpe != NULL)
		(void)quic_capture_server(c);
	if (conn_add_cid(c, scid.data, scid.datalen) != 0 ||
	    conn_add_cid(c, hd.dcid.data, hd.dcid.datalen) != 0)
		goto fail_conn;
	/* After a Retry the client's first DCID (carried in the token) is
	 * this connection's too: its token-less Initial, late or retransmitted
	 * when the Retry was lost, reaches it (and is dropped there) instead
	 * of making a second half-open connection that never completes. When
	 * the DCID is taken already (that Initial got its own connection),
	 * nothing is registered. */
	if (validated && odcid.datalen > 0)
		(void)conn_add_cid(c, odcid.data, odcid.datalen);
	c->notified = 0;
	if (ep->cfg.cb && ep->cfg.cb->conn_new)
		ep->cfg.cb->conn_new(c, c->user);
	conn_recv(c, data, len, local, remote, now);
	return;

fail_conn:
	ep->st.pkts_dropped++;
	conn_free(c);
}

static void free_dead(struct moq_quic_endpoint *ep, struct moq_quic_conn *c)
{
	if (c && c->state == CS_DEAD)
		conn_free(c);
	(void)ep;
}

void moq_quic_endpoint_prefetch(const struct moq_quic_endpoint *ep, const uint8_t *data, size_t len,
                                int stage, const void **hint)
{
	const struct moq_quic_conn *c;

	/* short headers only: a long header is a handshake (rare, not worth
	 * it); the DCID of a short one is ours, MOQ_QUIC_CID_LEN long */
	if (ep == NULL || data == NULL || hint == NULL || len < 1 + MOQ_QUIC_CID_LEN ||
	    (data[0] & 0x80))
		return;
	switch (stage) {
	case 0:
		ktab_prefetch(ep, &ep->ctab, data + 1, MOQ_QUIC_CID_LEN);
		break;
	case 1:
		c = ctab_find(ep, data + 1, MOQ_QUIC_CID_LEN);
		*hint = c;
		if (c != NULL)
			__builtin_prefetch((const char *)c + offsetof(struct moq_quic_conn, state));
		break;
	case 2:
		c = *hint;
		*hint = c != NULL ? c->fp : NULL;
		fp_conn_prefetch(*hint, 0);
		break;
	case 3:
		fp_conn_prefetch(*hint, 1);
		break;
	case 4:
		fp_conn_prefetch(*hint, 2);
		break;
	case 5:
		fp_conn_prefetch(*hint, 3);
		break;
	}
}

int moq_quic_endpoint_recv(struct moq_quic_endpoint *ep, const uint8_t *data, size_t len,
                           const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                           uint64_t now)
{
	ngtcp2_version_cid vc;
	struct moq_quic_conn *c;
	int rv;

	if (ep == NULL || data == NULL || local == NULL || remote == NULL || len == 0 ||
	    local->len > sizeof(local->u) || remote->len > sizeof(remote->u))
		return MOQ_ERR_INVAL;
	ep->now = now;
	ep->st.pkts_in++;
	ep->st.bytes_in += len;
	rv = ngtcp2_pkt_decode_version_cid(&vc, data, len, MOQ_QUIC_CID_LEN);
	if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
		if (ep->cfg.role == MOQ_QUIC_SERVER)
			send_version_negotiation(ep, &vc, len, local, remote);
		else
			ep->st.pkts_dropped++;
		return 0;
	}
	if (rv != 0) {
		ep->st.pkts_dropped++;
		return 0;
	}
	c = ctab_find(ep, vc.dcid, vc.dcidlen);
	if (c != NULL) {
		conn_recv(c, data, len, local, remote, now);
		free_dead(ep, c);
		return 0;
	}
	if (!(data[0] & 0x80)) {
		/* short header, unknown CID. RFC 9000, 10.3.1: a stateless reset carries a random DCID;
		 * its last 16 bytes are the token of one of our connections */
		if (len >= SRESET_MIN_LEN) {
			c = ktab_find(ep, &ep->ttab, data + len - NGTCP2_STATELESS_RESET_TOKENLEN,
			              NGTCP2_STATELESS_RESET_TOKENLEN);
			if (c != NULL) {
				conn_recv(c, data, len, local, remote, now);
				free_dead(ep, c);
				return 0;
			}
		}
		/* the fast path's own: CIDs of a connection in its closing
		 * period, tokens learnt from NEW_CONNECTION_ID */
		if (ep->fpe != NULL &&
		    hand_recv_unknown(ep, data, len, local, remote, now) != MOQ_ERR_NOTFOUND)
			return 0;
		/* a CID another worker chose: the caller forwards it */
		if (vc.dcidlen == MOQ_QUIC_CID_LEN && vc.dcid[0] != ep->cfg.worker_id) {
			ep->st.pkts_wrong_worker++;
			return MOQ_ERR_NOTFOUND;
		}
		ep->st.pkts_dropped++;
		send_stateless_reset(ep, vc.dcid, vc.dcidlen, len, local, remote, now);
		return 0;
	}
	/* a Handshake packet carries a DCID we chose: maybe another worker's
	 * (RFC 9000, 17.2.4); Initial / 0-RTT DCIDs may be the client's */
	if (((data[0] >> 4) & 0x3) == 2 && vc.version == NGTCP2_PROTO_VER_V1 &&
	    vc.dcidlen == MOQ_QUIC_CID_LEN && vc.dcid[0] != ep->cfg.worker_id) {
		ep->st.pkts_wrong_worker++;
		return MOQ_ERR_NOTFOUND;
	}
	if (ep->cfg.role != MOQ_QUIC_SERVER) {
		ep->st.pkts_dropped++;
		return 0;
	}
	server_accept(ep, data, len, local, remote, now);
	return 0;
}

void moq_quic_endpoint_stats(const struct moq_quic_endpoint *ep, struct moq_quic_stats *out)
{
	if (ep && out) {
		*out = ep->st;
		out->spare_bytes = mem_cached_bytes(ep) + ep->sfree_bytes;
		hand_stats(ep, out);
	}
}

int moq_quic_endpoint_fingerprint(const struct moq_quic_endpoint *ep, uint8_t out[32])
{
	if (ep == NULL || out == NULL)
		return MOQ_ERR_INVAL;
	if (!ep->have_fp)
		return MOQ_ERR_STATE;
	memcpy(out, ep->fp, 32);
	return 0;
}

char *moq_quic_fingerprint_str(const uint8_t fp[32], char *buf, size_t buflen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i, o = 0;

	if (buf == NULL || buflen == 0)
		return buf;
	for (i = 0; i < 32 && o + 3 < buflen; i++) {
		if (i)
			buf[o++] = ':';
		buf[o++] = hex[fp[i] >> 4];
		buf[o++] = hex[fp[i] & 15];
	}
	buf[o] = '\0';
	return buf;
}

uint8_t moq_quic_endpoint_worker(const struct moq_quic_endpoint *ep)
{
	return ep->cfg.worker_id;
}

struct moq_quic_conn *moq_quic_connect(struct moq_quic_endpoint *ep,
                                       const struct moq_quic_addr *local,
                                       const struct moq_quic_addr *remote, void *user, uint64_t now,
                                       int *err)
{
	struct moq_quic_conn *c;
	ngtcp2_cid dcid, scid;
	ngtcp2_settings s;
	ngtcp2_transport_params p;
	ngtcp2_path path;
	int rv = MOQ_ERR_INVAL;

	if (ep == NULL || local == NULL || remote == NULL || local->len > sizeof(local->u) ||
	    remote->len > sizeof(remote->u))
		goto fail_arg;
	rv = MOQ_ERR_STATE;
	if (ep->cfg.role != MOQ_QUIC_CLIENT)
		goto fail_arg;
	rv = MOQ_ERR_LIMIT;
	if (ep->st.conns_active >= ep->cfg.max_conns)
		goto fail_arg;
	ep->now = now;
	rv = MOQ_ERR_NOMEM;
	c = conn_alloc(ep, local, remote, user);
	if (c == NULL)
		goto fail_arg;
	c->notified = 1;
	/* RFC 9000, 7.2: the first DCID is unpredictable, >= 8 bytes. */
	dcid.datalen = MOQ_QUIC_CID_LEN;
	quic_rand(ep, dcid.data, dcid.datalen);
	make_cid(ep, &scid);
	settings_init(ep, &s, now);
	params_init(ep, &p);
	path_of(&path, local, remote);
	rv = MOQ_ERR_CRYPTO;
	if (ngtcp2_conn_client_new(&c->q, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &ep->cbs, &s,
	                           &p, &ep->mem, c) != 0) {
		c->q = NULL;
		goto fail_conn;
	}
	if (quic_tls_conn_new(c) != 0)
		goto fail_conn;
	ngtcp2_conn_set_tls_native_handle(c->q, c->ssl);
	if (ep->cfg.keep_alive_ns)
		ngtcp2_conn_set_keep_alive_timeout(c->q, ep->cfg.keep_alive_ns);
	rv = MOQ_ERR_LIMIT;
	if (conn_add_cid(c, scid.data, scid.datalen) != 0)
		goto fail_conn;
	c->notified = 0;
	ready_add(c);
	conn_update_timer(c);
	if (err)
		*err = 0;
	return c;

fail_conn:
	conn_free(c);
fail_arg:
	if (err)
		*err = rv;
	return NULL;
}
