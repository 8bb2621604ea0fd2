/* SPDX-License-Identifier: MIT */
/*
 * export.c: a client connection's 1-RTT state for a caller that takes it
 * over (quic.h, "light clients"): the handshake's secrets captured on the
 * way to ngtcp2, the CIDs, a packet number the caller may start from, and
 * forgetting the connection without a word on the wire.
 */
#include "quic_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <wolfssl/openssl/evp.h>
#include <wolfssl/quic.h>
#include <ngtcp2/ngtcp2_crypto_wolfssl.h>

/* The one TLS 1.3 suite a light client offers: the light side seals its
 * ACKs with AES-128-GCM in wolfCrypt directly (RFC 9001, 5.3). */
#define LIGHT_CIPHERS "TLS13-AES128-GCM-SHA256"
/* The shortest packet ngtcp2 writes: 1 byte of flags, a CID of at least 8
 * (MOQ_QUIC_CID_LEN on a moqdp relay), a packet number and 4 - pnlen bytes
 * of payload so that the header protection sample exists (RFC 9001, 5.4.2),
 * and the 16-byte tag: bytes_sent / this bounds the packets sent. */
#define MIN_PKT_BYTES 20
/* Packet numbers ngtcp2 may have skipped on top (it skips some on purpose
 * to detect optimistic ACKs). */
#define PN_SKIP_MARGIN 1024

static pthread_once_t idx_once = PTHREAD_ONCE_INIT;
static int keys_idx = -1;

static void idx_init(void)
{
	/* index 0 is wolfSSL_set_app_data's (tls.c puts the conn ref there) */
	do
		keys_idx = wolfSSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	while (keys_idx == 0);
}

static ngtcp2_conn *conn_of(WOLFSSL *ssl)
{
	ngtcp2_crypto_conn_ref *ref = wolfSSL_get_app_data(ssl);

	return ref->get_conn(ref);
}

/*
 * ngtcp2's own wolfSSL QUIC method (ngtcp2_crypto_wolfssl) is static; these
 * do what it does with the public calls it uses, and for the application
 * level ask ngtcp2 for the derived keys too (RFC 9001, 5.1).
 */
static int light_set_secrets(WOLFSSL *ssl, WOLFSSL_ENCRYPTION_LEVEL wlevel, const uint8_t *rx,
                             const uint8_t *tx, size_t secretlen)
{
	ngtcp2_conn *q = conn_of(ssl);
	ngtcp2_crypto_level level = ngtcp2_crypto_wolfssl_from_wolfssl_encryption_level(wlevel);
	struct moq_quic_light_keys *k = NULL;
	int app = level == NGTCP2_CRYPTO_LEVEL_APPLICATION;

	if (app && keys_idx >= 0)
		k = wolfSSL_get_ex_data(ssl, keys_idx);
	if (k && secretlen > sizeof(k->rx.secret))
		k = NULL;
	if (rx &&
	    ngtcp2_crypto_derive_and_install_rx_key(q, k ? k->rx.key : NULL, k ? k->rx.iv : NULL,
	                                            k ? k->rx.hp : NULL, level, rx, secretlen) != 0)
		return 0;
	if (tx &&
	    ngtcp2_crypto_derive_and_install_tx_key(q, k ? k->tx.key : NULL, k ? k->tx.iv : NULL,
	                                            k ? k->tx.hp : NULL, level, tx, secretlen) != 0)
		return 0;
	if (k) {
		const ngtcp2_crypto_ctx *cc = ngtcp2_conn_get_crypto_ctx(q);

		if (rx)
			memcpy(k->rx.secret, rx, secretlen);
		if (tx)
			memcpy(k->tx.secret, tx, secretlen);
		k->secretlen = secretlen;
		k->keylen = ngtcp2_crypto_aead_keylen(&cc->aead);
		/* wolfSSL gives both directions in one call on a client, a
		 * server may learn them apart */
		k->got |= (rx != NULL ? 1 : 0) | (tx != NULL ? 2 : 0);
		k->have = k->got == 3;
	}
	return 1;
}

static int light_add_handshake_data(WOLFSSL *ssl, WOLFSSL_ENCRYPTION_LEVEL wlevel,
                                    const uint8_t *data, size_t len)
{
	ngtcp2_conn *q = conn_of(ssl);
	ngtcp2_crypto_level level = ngtcp2_crypto_wolfssl_from_wolfssl_encryption_level(wlevel);
	int rv = ngtcp2_conn_submit_crypto_data(q, level, data, len);

	if (rv != 0) {
		ngtcp2_conn_set_tls_error(q, rv);
		return 0;
	}
	return 1;
}

static int light_flush_flight(WOLFSSL *ssl)
{
	(void)ssl;
	return 1;
}

static int light_send_alert(WOLFSSL *ssl, WOLFSSL_ENCRYPTION_LEVEL level, uint8_t alert)
{
	(void)level;
	ngtcp2_conn_set_tls_alert(conn_of(ssl), alert);
	return 1;
}

static const WOLFSSL_QUIC_METHOD light_method = {
        .set_encryption_secrets = light_set_secrets,
        .add_handshake_data = light_add_handshake_data,
        .flush_flight = light_flush_flight,
        .send_alert = light_send_alert,
};

int moq_quic_conn_light_prepare(struct moq_quic_conn *c, struct moq_quic_light_keys *keys)
{
	if (c == NULL || keys == NULL || c->server || c->ssl == NULL)
		return MOQ_ERR_INVAL;
	if (c->state != CS_HANDSHAKE || c->bytes_sent > 0)
		return MOQ_ERR_STATE;
	pthread_once(&idx_once, idx_init);
	if (keys_idx < 0)
		return MOQ_ERR_CRYPTO;
	memset(keys, 0, sizeof(*keys));
	if (wolfSSL_set_cipher_list(c->ssl, LIGHT_CIPHERS) != WOLFSSL_SUCCESS ||
	    wolfSSL_set_ex_data(c->ssl, keys_idx, keys) != WOLFSSL_SUCCESS ||
	    wolfSSL_set_quic_method(c->ssl, &light_method) != WOLFSSL_SUCCESS)
		return MOQ_ERR_CRYPTO;
	return 0;
}

int moq_quic_conn_light_export(struct moq_quic_conn *c, const struct moq_quic_light_keys *keys,
                               struct moq_quic_light *out)
{
	const ngtcp2_cid *d;
	const ngtcp2_transport_params *lp, *rp;
	const ngtcp2_crypto_ctx *cc;
	uint32_t i;

	memset(out, 0, sizeof(*out));
	if (c == NULL || c->q == NULL)
		return MOQ_ERR_INVAL;
	out->keys = keys;
	out->local = c->local;
	out->remote = c->remote;
	d = ngtcp2_conn_get_dcid(c->q);
	out->dcidlen = d->datalen;
	memcpy(out->dcid, d->data, d->datalen);
	for (i = 0; i < c->ncids && i < MOQ_QUIC_LIGHT_MAX_CIDS; i++) {
		memcpy(out->scids[i], c->cids[i].id, c->cids[i].len);
		out->scidlen = c->cids[i].len;
	}
	out->nscids = i;
	out->version = ngtcp2_conn_get_negotiated_version(c->q);
	lp = ngtcp2_conn_get_local_transport_params(c->q);
	rp = ngtcp2_conn_get_remote_transport_params(c->q);
	out->ack_delay_exponent = lp->ack_delay_exponent;
	out->max_ack_delay_ns = lp->max_ack_delay;
	out->idle_timeout_ns = lp->max_idle_timeout;
	if (rp && rp->max_idle_timeout &&
	    (!out->idle_timeout_ns || rp->max_idle_timeout < out->idle_timeout_ns))
		out->idle_timeout_ns = rp->max_idle_timeout;
	/* every 1-RTT packet ngtcp2 sent took at least MIN_PKT_BYTES of
	 * bytes_sent (RFC 9000, 17.3.1) */
	out->tx_pn = c->bytes_sent / MIN_PKT_BYTES + PN_SKIP_MARGIN;
	if (c->state != CS_ESTABLISHED || keys == NULL || !keys->have ||
	    !ngtcp2_conn_get_handshake_completed(c->q))
		return MOQ_ERR_STATE;
	cc = ngtcp2_conn_get_crypto_ctx(c->q);
	if (cc->aead.native_handle != wolfSSL_EVP_aes_128_gcm() ||
	    cc->md.native_handle != wolfSSL_EVP_sha256() || keys->keylen != 16 ||
	    keys->secretlen != 32)
		return MOQ_ERR_CONFIG;
	return 0;
}

void moq_quic_conn_light_detach(struct moq_quic_conn *c)
{
	struct moq_quic_close_info info;

	if (c == NULL || c->notified || c->state >= CS_CLOSING)
		return;
	memset(&info, 0, sizeof(info));
	info.kind = MOQ_QUIC_CLOSE_APPLICATION;
	info.what = "detached";
	info.local = 1;
	/* as a silent drop (close.c), without a CONNECTION_CLOSE */
	conn_half_open_done(c);
	c->state = CS_DEAD;
	c->deadline = 0;
	ready_del(c);
	conn_notify(c, &info);
	conn_update_timer(c);
}

/*
 * A server connection of a fast-path endpoint: the same capture as a light
 * client's (the secrets and derived keys of the first 1-RTT generation, RFC
 * 9001, 5.1; the header protection key never changes, 6), without
 * narrowing the cipher list: a connection that negotiates another suite
 * just stays on ngtcp2 (handoff.c). Returns 0, MOQ_ERR_NOMEM or
 * MOQ_ERR_CRYPTO.
 */
int quic_capture_server(struct moq_quic_conn *c)
{
	struct moq_quic_light_keys *k;

	pthread_once(&idx_once, idx_init);
	if (keys_idx < 0 || c->ssl == NULL)
		return MOQ_ERR_CRYPTO;
	k = calloc(1, sizeof(*k));
	if (k == NULL)
		return MOQ_ERR_NOMEM;
	if (wolfSSL_set_ex_data(c->ssl, keys_idx, k) != WOLFSSL_SUCCESS ||
	    wolfSSL_set_quic_method(c->ssl, &light_method) != WOLFSSL_SUCCESS) {
		free(k);
		return MOQ_ERR_CRYPTO;
	}
	c->fpkeys = k;
	return 0;
}
