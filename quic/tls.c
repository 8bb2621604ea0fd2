/* SPDX-License-Identifier: MIT */
/*
 * tls.c: wolfSSL contexts for the QUIC endpoint: the QUIC capability check,
 * certificate loading or self-signed generation (ECDSA P-256), ALPN.
 */
#include "quic_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <wolfssl/options.h>
#include <wolfssl/ssl.h>
#include <wolfssl/quic.h>
#include <wolfssl/wolfcrypt/asn_public.h>
#include <wolfssl/wolfcrypt/ecc.h>
#include <wolfssl/wolfcrypt/sha256.h>
#include <wolfssl/wolfcrypt/random.h>
#include <ngtcp2/ngtcp2_crypto_wolfssl.h>

#if !defined(WOLFSSL_QUIC)
#error "wolfSSL was built without --enable-quic"
#endif
#if !defined(OPENSSL_ALL)
#error "wolfSSL was built without --enable-opensslall (the ALPN select callback is ignored)"
#endif

/* TLS 1.3 suites QUIC may use (RFC 9001, 5.3); AES-128-GCM first. */
#define TLS13_CIPHERS                                                                              \
	"TLS13-AES128-GCM-SHA256:TLS13-AES256-GCM-SHA384:TLS13-CHACHA20-POLY1305-SHA256"
/* Validity of the generated development certificate (days after now).
 * wolfSSL back-dates notBefore by one day (asn.c SetValidity), so 13 gives
 * 14 days in total: browsers accept a certificate pinned with
 * serverCertificateHashes only if it is valid for at most 14 days
 * (W3C WebTransport, 4.4 "custom certificate requirements"). */
#define SELF_SIGNED_DAYS 13

static int tls_inited;
static uint64_t pem_loads; /* moq_quic_tls_pem_loads (atomic) */

static void tls_init_once(void)
{
	if (!__atomic_exchange_n(&tls_inited, 1, __ATOMIC_ACQ_REL))
		wolfSSL_Init();
}

int moq_quic_check_tls(const char **why)
{
	WOLFSSL_CTX *ctx;
	int rv;

	tls_init_once();
	ctx = wolfSSL_CTX_new(wolfTLSv1_3_server_method());
	if (ctx == NULL) {
		if (why)
			*why = "wolfSSL_CTX_new(TLS 1.3) failed";
		return MOQ_ERR_CONFIG;
	}
	/* Installs wolfSSL's QUIC method: fails on a wolfSSL without QUIC. */
	rv = ngtcp2_crypto_wolfssl_configure_server_context(ctx);
	wolfSSL_CTX_free(ctx);
	if (rv != 0) {
		if (why)
			*why = "the linked wolfSSL has no QUIC support (--enable-quic)";
		return MOQ_ERR_CONFIG;
	}
	if (why)
		*why = NULL;
	return 0;
}

/* RFC 7301, 3.2: the server picks from the client's list; we pick our most
 * preferred protocol the client offers. No overlap: fatal
 * no_application_protocol alert (120). */
static int alpn_select(WOLFSSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
	/* the connection's endpoint (quic_tls_conn_new): a context may be
	 * shared by the endpoints of several workers (moq_quic_tls_new) */
	const ngtcp2_crypto_conn_ref *ref = wolfSSL_get_app_data(ssl);
	const struct moq_quic_conn *c = ref != NULL ? ref->user_data : NULL;
	const struct moq_quic_endpoint *ep;
	size_t i;

	(void)arg;
	if (c == NULL)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	ep = c->ep;
	for (i = 0; i < ep->alpn_count; i++) {
		const unsigned char *p = in, *end = in + inlen;
		size_t l = ep->alpn_len[i];

		while (p < end) {
			size_t pl = *p;

			if (p + 1 + pl > end)
				break;
			if (pl == l && memcmp(p + 1, ep->alpn[i], l) == 0) {
				*out = p + 1;
				*outlen = (unsigned char)pl;
				return SSL_TLSEXT_ERR_OK;
			}
			p += 1 + pl;
		}
	}
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* wolfCrypt objects are allocated by wolfCrypt itself (wc_ecc_key_new,
 * wc_CertNew): their size depends on build settings (SP_INT_BITS ...) that
 * the installed headers do not all carry, and a stack copy sized by our
 * view of the struct was overrun. */
#define DEV_CERT_DER_MAX 2048
#define DEV_KEY_DER_MAX  256

/* A new self-signed development certificate (DER into @der, @derlen) and
 * its ECDSA P-256 key (DER into @kder, @klen). */
static int make_self_signed(WC_RNG *rng, uint8_t der[DEV_CERT_DER_MAX], int *derlen,
                            uint8_t kder[DEV_KEY_DER_MAX], int *klen)
{
	ecc_key *key;
	Cert *cert;
	int rv = MOQ_ERR_CRYPTO;

	key = wc_ecc_key_new(NULL);
	if (key == NULL)
		return MOQ_ERR_NOMEM;
	cert = wc_CertNew(NULL);
	if (cert == NULL) {
		rv = MOQ_ERR_NOMEM;
		goto fail_key;
	}
	if (wc_ecc_make_key_ex(rng, 32, key, ECC_SECP256R1) != 0)
		goto fail_cert;
	snprintf(cert->subject.commonName, CTC_NAME_SIZE, "moqdp-dev");
	snprintf(cert->subject.org, CTC_NAME_SIZE, "moqdp");
	cert->isCA = 0;
	cert->sigType = CTC_SHA256wECDSA;
	cert->daysValid = SELF_SIGNED_DAYS;
	/* X.509 v3 extensions: browsers' verifiers for pinned certificates
	 * (Chromium's quiche CertificateView) do not parse a certificate
	 * without any ("Failed to parse the certificate"). */
	if (wc_SetKeyUsage(cert, "digitalSignature") != 0 ||
	    wc_SetExtKeyUsage(cert, "serverAuth") != 0 ||
	    wc_SetSubjectKeyIdFromPublicKey_ex(cert, ECC_TYPE, key) != 0)
		goto fail_cert;
	*derlen = wc_MakeCert_ex(cert, der, DEV_CERT_DER_MAX, ECC_TYPE, key, rng);
	if (*derlen <= 0)
		goto fail_cert;
	*derlen = wc_SignCert_ex(cert->bodySz, cert->sigType, der, DEV_CERT_DER_MAX, ECC_TYPE, key,
	                         rng);
	if (*derlen <= 0)
		goto fail_cert;
	*klen = wc_EccKeyToDer(key, kder, DEV_KEY_DER_MAX);
	if (*klen <= 0)
		goto fail_cert;
	rv = 0;
fail_cert:
	wc_CertFree(cert);
fail_key:
	wc_ecc_key_free(key);
	return rv;
}

static int gen_self_signed(WC_RNG *rng, WOLFSSL_CTX *ctx, uint8_t fp[32])
{
	uint8_t der[DEV_CERT_DER_MAX], kder[DEV_KEY_DER_MAX];
	int derlen, klen, rv = make_self_signed(rng, der, &derlen, kder, &klen);

	if (rv != 0)
		return rv;
	if (wolfSSL_CTX_use_certificate_buffer(ctx, der, derlen, WOLFSSL_FILETYPE_ASN1) !=
	            WOLFSSL_SUCCESS ||
	    wolfSSL_CTX_use_PrivateKey_buffer(ctx, kder, klen, WOLFSSL_FILETYPE_ASN1) !=
	            WOLFSSL_SUCCESS ||
	    wc_Sha256Hash(der, (word32)derlen, fp) != 0)
		return MOQ_ERR_CRYPTO;
	return 0;
}

/* @der (@len bytes, wolfCrypt PEM type @type) as PEM into @file, made with
 * @mode (its permissions set even when it existed). */
static int write_pem(const char *file, const uint8_t *der, int len, int type, mode_t mode)
{
	uint8_t pem[4096];
	int n = wc_DerToPem(der, (word32)len, pem, sizeof(pem), type);
	FILE *f;
	int ok;

	if (n <= 0)
		return MOQ_ERR_CRYPTO;
	f = fopen(file, "we");
	if (f == NULL)
		return MOQ_ERR_IO;
	/* the mode before the first byte (the key's file: 0600) */
	ok = fchmod(fileno(f), mode) == 0 && fwrite(pem, 1, (size_t)n, f) == (size_t)n &&
	     fflush(f) == 0 && fsync(fileno(f)) == 0;
	if (fclose(f) != 0)
		ok = 0;
	return ok ? 0 : MOQ_ERR_IO;
}

int moq_quic_tls_dev_cert_write(const char *cert_file, const char *key_file)
{
	uint8_t der[DEV_CERT_DER_MAX], kder[DEV_KEY_DER_MAX];
	int derlen, klen, rv;
	WC_RNG rng;

	if (cert_file == NULL || key_file == NULL)
		return MOQ_ERR_INVAL;
	if (wc_InitRng(&rng) != 0)
		return MOQ_ERR_CRYPTO;
	rv = make_self_signed(&rng, der, &derlen, kder, &klen);
	wc_FreeRng(&rng);
	if (rv == 0)
		rv = write_pem(key_file, kder, klen, ECC_PRIVATEKEY_TYPE, 0600);
	if (rv == 0)
		rv = write_pem(cert_file, der, derlen, CERT_TYPE, 0644);
	return rv;
}

/* Read a whole (small) file; *len gets its size. NULL on failure. */
static uint8_t *read_file(const char *file, long *len)
{
	FILE *f = fopen(file, "rb");
	uint8_t *buf = NULL;
	long n;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && n < (1 << 20) &&
	    fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*len = n;
	}
	fclose(f);
	return buf;
}

/* RFC 5480, 2.1.1: id-ecPublicKey, as it appears (DER) in an SPKI */
static const uint8_t oid_ec_public_key[] = {0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01};

static int has_bytes(const uint8_t *hay, size_t n, const uint8_t *needle, size_t m)
{
	size_t i;

	for (i = 0; i + m <= n; i++)
		if (memcmp(hay + i, needle, m) == 0)
			return 1;
	return 0;
}

/*
 * The SHA-256 of the first certificate of the PEM chain, and a check that
 * the key belongs to it: wolfSSL 5.5.4's wolfSSL_CTX_check_private_key
 * accepts any ECC key, so for an ECC certificate the public point of the
 * private key is compared with the one the certificate carries (the tail of
 * its SubjectPublicKeyInfo, RFC 5480, 2.2).
 */
static int pem_check(uint8_t fp[32], const char *cert_file, const char *key_file)
{
	uint8_t *pem, *der = NULL, *kpem = NULL, *kder = NULL, spki[512], pt[160];
	long n, kn = 0;
	int derlen, kderlen, spkilen = (int)sizeof(spki), rv = MOQ_ERR_IO;
	word32 idx = 0, ptlen = sizeof(pt);
	WOLFSSL_X509 *x = NULL;
	ecc_key *priv = NULL;

	pem = read_file(cert_file, &n);
	if (pem == NULL)
		return MOQ_ERR_IO;
	der = malloc((size_t)n);
	if (der == NULL) {
		rv = MOQ_ERR_NOMEM;
		goto fail_cert;
	}
	rv = MOQ_ERR_CRYPTO;
	derlen = wc_CertPemToDer(pem, (int)n, der, (int)n, CERT_TYPE);
	if (derlen <= 0 || wc_Sha256Hash(der, (word32)derlen, fp) != 0)
		goto fail_cert;
	x = wolfSSL_X509_load_certificate_buffer(der, derlen, WOLFSSL_FILETYPE_ASN1);
	if (x == NULL || wolfSSL_X509_get_pubkey_buffer(x, spki, &spkilen) != WOLFSSL_SUCCESS ||
	    spkilen <= 0 || spkilen > (int)sizeof(spki))
		goto fail_cert;
	if (!has_bytes(spki, (size_t)spkilen, oid_ec_public_key, sizeof(oid_ec_public_key))) {
		rv = 0; /* not ECC: wolfSSL's own check stands */
		goto fail_cert;
	}
	rv = MOQ_ERR_IO;
	kpem = read_file(key_file, &kn);
	if (kpem == NULL)
		goto fail_cert;
	kder = malloc((size_t)kn);
	if (kder == NULL) {
		rv = MOQ_ERR_NOMEM;
		goto fail_cert;
	}
	rv = MOQ_ERR_CRYPTO;
	kderlen = wc_KeyPemToDer(kpem, (int)kn, kder, (int)kn, NULL);
	if (kderlen <= 0 || (priv = wc_ecc_key_new(NULL)) == NULL)
		goto fail_cert;
	if (wc_GetPkcs8TraditionalOffset(kder, &idx, (word32)kderlen) < 0)
		idx = 0;
	if (wc_EccPrivateKeyDecode(kder, &idx, priv, (word32)kderlen) == 0) {
		if (wc_ecc_export_x963(priv, pt, &ptlen) != 0) {
			ptlen = sizeof(pt);
			if (wc_ecc_make_pub(priv, NULL) != 0 ||
			    wc_ecc_export_x963(priv, pt, &ptlen) != 0)
				ptlen = 0;
		}
		if (ptlen > 0 && (int)ptlen <= spkilen &&
		    memcmp(spki + spkilen - ptlen, pt, ptlen) == 0)
			rv = 0;
	}
fail_cert:
	if (priv)
		wc_ecc_key_free(priv);
	if (x)
		wolfSSL_X509_free(x);
	free(kder);
	free(kpem);
	free(der);
	free(pem);
	return rv;
}

/* wolfSSL failed to load @file: MOQ_ERR_IO when it cannot be read at all,
 * MOQ_ERR_CRYPTO when it can (its content is not a usable PEM). */
static int load_err(const char *file)
{
	return access(file, R_OK) == 0 ? MOQ_ERR_CRYPTO : MOQ_ERR_IO;
}

/*
 * A new TLS context into *out, for a server (@server) or a client. Server:
 * certificate chain @cert_file and key @key_file (both NULL: a self-signed
 * certificate generated with @rng), the key checked against the
 * certificate, the SHA-256 of the leaf into @fp. Client: @ca_file, if any,
 * to verify servers with. The context belongs to no endpoint (ALPN is
 * chosen from the connection's own endpoint), so endpoints on several
 * threads may share it. *out and @fp are written only on success.
 */
void quic_tls_keep_sni(void *wctx)
{
	/* wolfSSL keeps a client's SNI only when the server has one of its own
	 * (no WOLFSSL_ALWAYS_KEEP_SNI in this build): a placeholder name, any
	 * name the client sends taken as a match, so the handshake goes on
	 * whatever it asks for and wolfSSL_SNI_GetRequest gives it (--auth-url
	 * requests' server_name, rs/moq-auth request.rs) */
	static const char placeholder[] = "moqdp.invalid";
	WOLFSSL_CTX *ctx = wctx;

	if (wolfSSL_CTX_UseSNI(ctx, WOLFSSL_SNI_HOST_NAME, placeholder,
	                       (unsigned short)(sizeof(placeholder) - 1)) == WOLFSSL_SUCCESS)
		wolfSSL_CTX_SNI_SetOptions(ctx, WOLFSSL_SNI_HOST_NAME,
		                           WOLFSSL_SNI_CONTINUE_ON_MISMATCH |
		                                   WOLFSSL_SNI_ANSWER_ON_MISMATCH);
}

static int tls_ctx_build(int server, const char *cert_file, const char *key_file,
                         const char *ca_file, WC_RNG *rng, WOLFSSL_CTX **out, uint8_t fp[32])
{
	uint8_t newfp[32];
	WOLFSSL_CTX *ctx;
	int rv = MOQ_ERR_CRYPTO;

	tls_init_once();
	ctx = wolfSSL_CTX_new(server ? wolfTLSv1_3_server_method() : wolfTLSv1_3_client_method());
	if (ctx == NULL)
		return MOQ_ERR_CRYPTO;
	if (server) {
		/* installs wolfSSL's QUIC method */
		if (ngtcp2_crypto_wolfssl_configure_server_context(ctx) != 0)
			goto fail_ctx;
		wolfSSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
		quic_tls_keep_sni(ctx);
	} else if (ngtcp2_crypto_wolfssl_configure_client_context(ctx) != 0) {
		goto fail_ctx;
	}
	if (wolfSSL_CTX_set_cipher_list(ctx, TLS13_CIPHERS) != WOLFSSL_SUCCESS)
		goto fail_ctx;

	if (server && cert_file != NULL) {
		__atomic_add_fetch(&pem_loads, 1, __ATOMIC_RELAXED);
		if (wolfSSL_CTX_use_certificate_chain_file(ctx, cert_file) != WOLFSSL_SUCCESS) {
			rv = load_err(cert_file);
			goto fail_ctx;
		}
		if (wolfSSL_CTX_use_PrivateKey_file(ctx, key_file, WOLFSSL_FILETYPE_PEM) !=
		    WOLFSSL_SUCCESS) {
			rv = load_err(key_file);
			goto fail_ctx;
		}
		if (wolfSSL_CTX_check_private_key(ctx) != WOLFSSL_SUCCESS) {
			rv = MOQ_ERR_CRYPTO;
			goto fail_ctx;
		}
		rv = pem_check(newfp, cert_file, key_file);
		if (rv != 0)
			goto fail_ctx;
	} else if (server) {
		rv = gen_self_signed(rng, ctx, newfp);
		if (rv != 0)
			goto fail_ctx;
	} else if (ca_file != NULL) {
		if (wolfSSL_CTX_load_verify_locations(ctx, ca_file, NULL) != WOLFSSL_SUCCESS) {
			rv = load_err(ca_file);
			goto fail_ctx;
		}
		wolfSSL_CTX_set_verify(ctx, WOLFSSL_VERIFY_PEER, NULL);
	} else {
		wolfSSL_CTX_set_verify(ctx, WOLFSSL_VERIFY_NONE, NULL);
	}
	if (server)
		memcpy(fp, newfp, sizeof(newfp));
	*out = ctx;
	return 0;

fail_ctx:
	wolfSSL_CTX_free(ctx);
	return rv;
}

uint64_t moq_quic_tls_pem_loads(void)
{
	return __atomic_load_n(&pem_loads, __ATOMIC_RELAXED);
}

/* A server context built once and shared (quic.h): wolfSSL counts the
 * references on ctx (each endpoint's, each connection's WOLFSSL, this
 * handle's) under its own lock, so any thread may take or drop one. */
struct moq_quic_tls {
	WOLFSSL_CTX *ctx;
	uint8_t fp[32];
};

struct moq_quic_tls *moq_quic_tls_new(const char *cert_file, const char *key_file, int *err)
{
	struct moq_quic_tls *t;
	WC_RNG rng;
	int rv = MOQ_ERR_INVAL;

	if ((cert_file == NULL) != (key_file == NULL))
		goto fail_arg;
	rv = MOQ_ERR_NOMEM;
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		goto fail_arg;
	tls_init_once();
	rv = MOQ_ERR_CRYPTO;
	if (wc_InitRng(&rng) != 0)
		goto fail_alloc;
	rv = tls_ctx_build(1, cert_file, key_file, NULL, &rng, &t->ctx, t->fp);
	wc_FreeRng(&rng);
	if (rv != 0)
		goto fail_alloc;
	if (err)
		*err = 0;
	return t;

fail_alloc:
	free(t);
fail_arg:
	if (err)
		*err = rv;
	return NULL;
}

void moq_quic_tls_free(struct moq_quic_tls *t)
{
	if (t == NULL)
		return;
	wolfSSL_CTX_free(t->ctx); /* this handle's reference */
	free(t);
}

void moq_quic_tls_fingerprint(const struct moq_quic_tls *t, uint8_t out[32])
{
	memcpy(out, t->fp, sizeof(t->fp));
}

static int asn1_unix(const WOLFSSL_ASN1_TIME *a, int64_t *out)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	if (a == NULL || wolfSSL_ASN1_TIME_to_tm(a, &tm) != WOLFSSL_SUCCESS)
		return MOQ_ERR_CRYPTO;
	*out = (int64_t)timegm(&tm);
	return 0;
}

int moq_quic_tls_validity(const struct moq_quic_tls *t, int64_t *not_before, int64_t *not_after)
{
	WOLFSSL_X509 *x = wolfSSL_CTX_get0_certificate(t->ctx);

	if (x == NULL)
		return MOQ_ERR_CRYPTO;
	if (asn1_unix(wolfSSL_X509_get_notBefore(x), not_before) != 0 ||
	    asn1_unix(wolfSSL_X509_get_notAfter(x), not_after) != 0)
		return MOQ_ERR_CRYPTO;
	return 0;
}

int quic_tls_ctx_new(struct moq_quic_endpoint *ep)
{
	int rv;

	if (ep->cfg.tls != NULL) { /* shared: take a reference */
		if (wolfSSL_CTX_up_ref(ep->cfg.tls->ctx) != WOLFSSL_SUCCESS)
			return MOQ_ERR_CRYPTO;
		ep->ctx = ep->cfg.tls->ctx;
		memcpy(ep->fp, ep->cfg.tls->fp, sizeof(ep->fp));
		ep->have_fp = 1;
		ep->cfg.tls = NULL; /* the caller's handle may go */
		return 0;
	}
	rv = tls_ctx_build(ep->cfg.role == MOQ_QUIC_SERVER, ep->cert_file, ep->key_file,
	                   ep->ca_file, &ep->rng, &ep->ctx, ep->fp);
	if (rv == 0 && ep->cfg.role == MOQ_QUIC_SERVER)
		ep->have_fp = 1;
	return rv;
}

void quic_tls_ctx_free(struct moq_quic_endpoint *ep)
{
	if (ep->ctx != NULL)
		wolfSSL_CTX_free(ep->ctx);
	ep->ctx = NULL;
}

/*
 * Every WOLFSSL holds a reference on the WOLFSSL_CTX it was made from
 * (wolfSSL_new counts it up, wolfSSL_free down; the last one frees it). So
 * the swap drops only the endpoint's own reference: connections made before
 * keep the old certificate until they are freed, new ones get the new one.
 * @ctx (the endpoint's reference on it) and @fp replace the current ones.
 */
static void ctx_swap(struct moq_quic_endpoint *ep, WOLFSSL_CTX *ctx, const uint8_t fp[32])
{
	struct moq_quic_conn *c;

	/* connections made until now stay on the old context */
	for (c = ep->ahead; c != NULL; c = c->anext)
		if (c->ssl != NULL && c->tls_gen == ep->tls_gen)
			ep->st.conns_old_cert++;
	ep->tls_gen++;
	wolfSSL_CTX_free(ep->ctx);
	ep->ctx = ctx;
	memcpy(ep->fp, fp, sizeof(ep->fp));
	ep->have_fp = 1;
	ep->st.cert_reloads++;
}

int moq_quic_endpoint_set_tls(struct moq_quic_endpoint *ep, struct moq_quic_tls *t)
{
	if (ep == NULL || t == NULL)
		return MOQ_ERR_INVAL;
	if (ep->cfg.role != MOQ_QUIC_SERVER)
		return MOQ_ERR_STATE;
	if (t->ctx == ep->ctx)
		return 0; /* already on it */
	if (wolfSSL_CTX_up_ref(t->ctx) != WOLFSSL_SUCCESS) {
		ep->st.cert_reload_errors++;
		return MOQ_ERR_CRYPTO;
	}
	ctx_swap(ep, t->ctx, t->fp);
	return 0;
}

int moq_quic_endpoint_reload_cert(struct moq_quic_endpoint *ep, const char *cert_file,
                                  const char *key_file)
{
	WOLFSSL_CTX *ctx = NULL;
	char *cf, *kf;
	uint8_t fp[32];
	int rv;

	if (ep == NULL || cert_file == NULL || key_file == NULL)
		return MOQ_ERR_INVAL;
	if (ep->cfg.role != MOQ_QUIC_SERVER)
		return MOQ_ERR_STATE;
	rv = MOQ_ERR_NOMEM;
	cf = strdup(cert_file);
	kf = strdup(key_file);
	if (cf == NULL || kf == NULL)
		goto fail_copy;
	rv = tls_ctx_build(1, cf, kf, NULL, &ep->rng, &ctx, fp);
	if (rv != 0)
		goto fail_copy;
	ctx_swap(ep, ctx, fp);
	free(ep->cert_file);
	free(ep->key_file);
	ep->cert_file = cf;
	ep->key_file = kf;
	ep->cfg.cert_file = cf;
	ep->cfg.key_file = kf;
	return 0;

fail_copy:
	free(cf);
	free(kf);
	ep->st.cert_reload_errors++;
	return rv;
}

/*
 * A client verifying its server (a CA file) also checks that the
 * certificate names @name (RFC 9525, 6: the reference identity is the host
 * the client meant to reach; a chain to the CA alone would accept any
 * certificate the CA ever issued, for any host): a DNS name against the
 * subject alternative names (or the CN without any), an IP address literal
 * against the IP address entries. Returns 0 or -1.
 */
static int peer_name_check(WOLFSSL *ssl, const char *name)
{
	unsigned char a[16];

	if (inet_pton(AF_INET, name, a) == 1 || inet_pton(AF_INET6, name, a) == 1)
		return wolfSSL_X509_VERIFY_PARAM_set1_ip_asc(wolfSSL_get0_param(ssl), name) ==
		                       WOLFSSL_SUCCESS
		               ? 0
		               : -1;
	return wolfSSL_check_domain_name(ssl, name) == WOLFSSL_SUCCESS ? 0 : -1;
}

int quic_tls_conn_new(struct moq_quic_conn *c)
{
	struct moq_quic_endpoint *ep = c->ep;
	WOLFSSL *ssl = wolfSSL_new(ep->ctx);

	if (ssl == NULL)
		return MOQ_ERR_NOMEM;
	wolfSSL_set_app_data(ssl, &c->ref);
	c->tls_gen = ep->tls_gen;
	if (c->server) {
		wolfSSL_set_accept_state(ssl);
		/* Without a server ALPN list wolfSSL completes a handshake that
		 * matched nothing; with it, a mismatch is the fatal alert
		 * no_application_protocol (RFC 7301, 3.2). The select callback
		 * still picks by our preference first. */
		if (wolfSSL_UseALPN(ssl, ep->alpn_csv, (unsigned int)strlen(ep->alpn_csv),
		                    WOLFSSL_ALPN_FAILED_ON_MISMATCH) != WOLFSSL_SUCCESS) {
			wolfSSL_free(ssl);
			return MOQ_ERR_CRYPTO;
		}
	} else {
		wolfSSL_set_connect_state(ssl);
		if (wolfSSL_set_alpn_protos(ssl, ep->alpn_wire, (unsigned int)ep->alpn_wire_len) !=
		    0) {
			wolfSSL_free(ssl);
			return MOQ_ERR_CRYPTO;
		}
		wolfSSL_UseSNI(ssl, WOLFSSL_SNI_HOST_NAME, ep->server_name,
		               (unsigned short)strlen(ep->server_name));
		if (ep->ca_file != NULL && peer_name_check(ssl, ep->server_name) != 0) {
			wolfSSL_free(ssl);
			return MOQ_ERR_CRYPTO;
		}
		/* RFC 9001, 8.2: quic_transport_parameters (0x39), QUIC v1. */
		wolfSSL_set_quic_transport_version(ssl, 0x39);
	}
	c->ssl = ssl;
	return 0;
}

void quic_tls_conn_free(struct moq_quic_conn *c)
{
	if (c->ssl == NULL)
		return;
	if (c->tls_gen != c->ep->tls_gen && c->ep->st.conns_old_cert > 0)
		c->ep->st.conns_old_cert--;
	/* drops this connection's reference on its context (the last one
	 * frees a context replaced by moq_quic_endpoint_reload_cert) */
	wolfSSL_free(c->ssl);
	c->ssl = NULL;
}

int moq_quic_conn_peer_fingerprint(const struct moq_quic_conn *c, uint8_t out[32])
{
	WOLFSSL_X509 *x;
	const unsigned char *der;
	int derlen, rv = MOQ_ERR_STATE;

	if (c == NULL || out == NULL)
		return MOQ_ERR_INVAL;
	if (c->ssl == NULL)
		return MOQ_ERR_STATE;
	x = wolfSSL_get_peer_certificate(c->ssl); /* a copy */
	if (x == NULL)
		return MOQ_ERR_STATE;
	der = wolfSSL_X509_get_der(x, &derlen);
	if (der != NULL && derlen > 0)
		rv = wc_Sha256Hash(der, (word32)derlen, out) == 0 ? 0 : MOQ_ERR_CRYPTO;
	wolfSSL_X509_free(x);
	return rv;
}

void quic_tls_conn_alpn(struct moq_quic_conn *c)
{
	const unsigned char *p = NULL;
	unsigned int len = 0;

	c->alpn = NULL;
	wolfSSL_get0_alpn_selected(c->ssl, &p, &len);
	if (p == NULL || len == 0)
		return;
	/* the server selects from ep->alpn (alpn_select), and a client offers
	 * that list: the endpoint's copy outlives the connection */
	for (size_t i = 0; i < c->ep->alpn_count; i++)
		if (c->ep->alpn_len[i] == len && memcmp(c->ep->alpn[i], p, len) == 0) {
			c->alpn = c->ep->alpn[i];
			return;
		}
}

int quic_rng_init(struct moq_quic_endpoint *ep)
{
	tls_init_once();
	return wc_InitRng(&ep->rng) == 0 ? 0 : MOQ_ERR_CRYPTO;
}

void quic_rng_free(struct moq_quic_endpoint *ep)
{
	wc_FreeRng(&ep->rng);
}

void quic_rand(struct moq_quic_endpoint *ep, uint8_t *dst, size_t len)
{
	if (wc_RNG_GenerateBlock(&ep->rng, dst, (word32)len) != 0)
		abort(); /* a broken CSPRNG must not produce guessable CIDs */
}

/*
 * Packet protection straight through wolfCrypt. ngtcp2's wolfSSL backend
 * goes through wolfSSL's EVP layer, which for AES-GCM copies every packet
 * into a growing buffer (realloc + memcpy) and re-initialises the cipher per
 * packet. The AEAD contexts ngtcp2 created are EVP contexts whose Aes is
 * already keyed, so AES-GCM packets (RFC 9001, 5.3) and AES header
 * protection (RFC 9001, 5.4.3) call wolfCrypt on that Aes directly; other
 * ciphers (ChaCha20) keep ngtcp2's path.
 */
#include <wolfssl/openssl/evp.h>
#include <wolfssl/wolfcrypt/aes.h>

/* RFC 9001, 5.3: AEAD_AES_*_GCM tag length. */
#define GCM_TAGLEN 16

static const WOLFSSL_EVP_CIPHER *gcm128, *gcm256, *ctr128, *ctr256;

static void aead_ids_init(void)
{
	if (gcm128 == NULL) {
		gcm128 = wolfSSL_EVP_aes_128_gcm();
		gcm256 = wolfSSL_EVP_aes_256_gcm();
		ctr128 = wolfSSL_EVP_aes_128_ctr();
		ctr256 = wolfSSL_EVP_aes_256_ctr();
	}
}

static int is_gcm(const ngtcp2_crypto_aead *aead)
{
	return aead->native_handle == gcm128 || aead->native_handle == gcm256;
}

int quic_encrypt_cb(uint8_t *dest, const ngtcp2_crypto_aead *aead,
                    const ngtcp2_crypto_aead_ctx *aead_ctx, const uint8_t *plaintext,
                    size_t plaintextlen, const uint8_t *nonce, size_t noncelen, const uint8_t *aad,
                    size_t aadlen)
{
	WOLFSSL_EVP_CIPHER_CTX *ctx = aead_ctx->native_handle;

	if (!is_gcm(aead))
		return ngtcp2_crypto_encrypt_cb(dest, aead, aead_ctx, plaintext, plaintextlen,
		                                nonce, noncelen, aad, aadlen);
	if (wc_AesGcmEncrypt(&ctx->cipher.aes, dest, plaintext, (word32)plaintextlen, nonce,
	                     (word32)noncelen, dest + plaintextlen, GCM_TAGLEN, aad,
	                     (word32)aadlen) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

int quic_decrypt_cb(uint8_t *dest, const ngtcp2_crypto_aead *aead,
                    const ngtcp2_crypto_aead_ctx *aead_ctx, const uint8_t *ciphertext,
                    size_t ciphertextlen, const uint8_t *nonce, size_t noncelen, const uint8_t *aad,
                    size_t aadlen)
{
	WOLFSSL_EVP_CIPHER_CTX *ctx = aead_ctx->native_handle;
	size_t len;

	if (!is_gcm(aead))
		return ngtcp2_crypto_decrypt_cb(dest, aead, aead_ctx, ciphertext, ciphertextlen,
		                                nonce, noncelen, aad, aadlen);
	if (ciphertextlen < GCM_TAGLEN)
		return NGTCP2_ERR_DECRYPT;
	len = ciphertextlen - GCM_TAGLEN;
	if (wc_AesGcmDecrypt(&ctx->cipher.aes, dest, ciphertext, (word32)len, nonce,
	                     (word32)noncelen, ciphertext + len, GCM_TAGLEN, aad,
	                     (word32)aadlen) != 0)
		return NGTCP2_ERR_DECRYPT;
	return 0;
}

int quic_hp_mask_cb(uint8_t *dest, const ngtcp2_crypto_cipher *hp,
                    const ngtcp2_crypto_cipher_ctx *hp_ctx, const uint8_t *sample)
{
	WOLFSSL_EVP_CIPHER_CTX *ctx = hp_ctx->native_handle;

	if (hp->native_handle != ctr128 && hp->native_handle != ctr256)
		return ngtcp2_crypto_hp_mask_cb(dest, hp, hp_ctx, sample);
	/* RFC 9001, 5.4.3: mask = AES-ECB(hp_key, sample). ngtcp2's wolfSSL
	 * backend keys an AES-CTR context for it (the first CTR block with the
	 * sample as counter is the same value). */
	{
		/* wolfSSL's AES-NI path mallocs a bounce buffer for unaligned
		 * blocks: hand it aligned ones */
		uint8_t in[16] __attribute__((aligned(16)));
		uint8_t out[16] __attribute__((aligned(16)));

		memcpy(in, sample, sizeof(in));
		if (wc_AesEncryptDirect(&ctx->cipher.aes, out, in) != 0)
			return NGTCP2_ERR_CALLBACK_FAILURE;
		memcpy(dest, out, NGTCP2_HP_SAMPLELEN);
	}
	return 0;
}

void quic_aead_init(void)
{
	tls_init_once();
	aead_ids_init();
}

/*
 * HKDF straight through wolfCrypt. ngtcp2's wolfSSL backend derives every
 * QUIC key (Initial, Handshake, 1-RTT, each key update; RFC 9001, 5.1 and
 * 6) and our stateless reset tokens with wolfSSL_quic_hkdf*(), which builds
 * an EVP_PKEY_CTX per call; wolfSSL gives each EVP_PKEY its own DRBG, so
 * every derivation instantiated and health-tested a SHA-256 DRBG (~60 % of
 * a server handshake's instructions with the P-256 SP code). The link
 * redirects the backend's calls here (quic/meson.build: -Wl,--wrap), and
 * these compute the same RFC 5869 HKDF with wc_HKDF_*: no RNG, no
 * allocation. A digest other than SHA-256 / SHA-384 (not used by QUIC's
 * TLS 1.3 suites) goes to wolfSSL's own function.
 */
#include <wolfssl/wolfcrypt/hmac.h>

int __real_wolfSSL_quic_hkdf_extract(uint8_t *dest, const WOLFSSL_EVP_MD *md, const uint8_t *secret,
                                     size_t secretlen, const uint8_t *salt, size_t saltlen);
int __real_wolfSSL_quic_hkdf_expand(uint8_t *dest, size_t destlen, const WOLFSSL_EVP_MD *md,
                                    const uint8_t *secret, size_t secretlen, const uint8_t *info,
                                    size_t infolen);
int __real_wolfSSL_quic_hkdf(uint8_t *dest, size_t destlen, const WOLFSSL_EVP_MD *md,
                             const uint8_t *secret, size_t secretlen, const uint8_t *salt,
                             size_t saltlen, const uint8_t *info, size_t infolen);
int __wrap_wolfSSL_quic_hkdf_extract(uint8_t *dest, const WOLFSSL_EVP_MD *md, const uint8_t *secret,
                                     size_t secretlen, const uint8_t *salt, size_t saltlen);
int __wrap_wolfSSL_quic_hkdf_expand(uint8_t *dest, size_t destlen, const WOLFSSL_EVP_MD *md,
                                    const uint8_t *secret, size_t secretlen, const uint8_t *info,
                                    size_t infolen);
int __wrap_wolfSSL_quic_hkdf(uint8_t *dest, size_t destlen, const WOLFSSL_EVP_MD *md,
                             const uint8_t *secret, size_t secretlen, const uint8_t *salt,
                             size_t saltlen, const uint8_t *info, size_t infolen);

/* The wolfCrypt hash type of @md, or -1. */
static int hkdf_type(const WOLFSSL_EVP_MD *md)
{
	static const WOLFSSL_EVP_MD *sha256, *sha384;

	if (sha256 == NULL) {
		sha256 = wolfSSL_EVP_sha256();
		sha384 = wolfSSL_EVP_sha384();
	}
	if (md == NULL)
		return -1;
	/* wolfSSL's EVP_MD is its name string */
	if (md == sha256 || strcmp((const char *)md, (const char *)sha256) == 0)
		return WC_SHA256;
	if (md == sha384 || strcmp((const char *)md, (const char *)sha384) == 0)
		return WC_SHA384;
	return -1;
}

static int hkdf_lens_ok(size_t a, size_t b, size_t c)
{
	return a <= UINT32_MAX && b <= UINT32_MAX && c <= UINT32_MAX;
}

int __wrap_wolfSSL_quic_hkdf_extract(uint8_t *dest, const WOLFSSL_EVP_MD *md, const uint8_t *secret,
                                     size_t secretlen, const uint8_t *salt, size_t saltlen)
{
	int type = hkdf_type(md);

	if (type < 0 || dest == NULL || !hkdf_lens_ok(secretlen, saltlen, 0))
		return __real_wolfSSL_quic_hkdf_extract(dest, md, secret, secretlen, salt, saltlen);
	return wc_HKDF_Extract(type, salt, (word32)saltlen, secret, (word32)secretlen, dest) == 0
	               ? WOLFSSL_SUCCESS
	               : WOLFSSL_FAILURE;
}

int __wrap_wolfSSL_quic_hkdf_expand(uint8_t *dest, size_t destlen, const WOLFSSL_EVP_MD *md,
                                    const uint8_t *secret, size_t secretlen, const uint8_t *info,
                                    size_t infolen)
{
	int type = hkdf_type(md);

	if (type < 0 || dest == NULL || !hkdf_lens_ok(destlen, secretlen, infolen))
		return __real_wolfSSL_quic_hkdf_expand(dest, destlen, md, secret, secretlen, info,
		                                       infolen);
	return wc_HKDF_Expand(type, secret, (word32)secretlen, info, (word32)infolen, dest,
	                      (word32)destlen) == 0
	               ? WOLFSSL_SUCCESS
	               : WOLFSSL_FAILURE;
}

int __wrap_wolfSSL_quic_hkdf(uint8_t *dest, size_t destlen, const WOLFSSL_EVP_MD *md,
                             const uint8_t *secret, size_t secretlen, const uint8_t *salt,
                             size_t saltlen, const uint8_t *info, size_t infolen)
{
	int type = hkdf_type(md);

	if (type < 0 || dest == NULL || !hkdf_lens_ok(destlen, secretlen, saltlen) ||
	    infolen > UINT32_MAX)
		return __real_wolfSSL_quic_hkdf(dest, destlen, md, secret, secretlen, salt, saltlen,
		                                info, infolen);
	return wc_HKDF(type, secret, (word32)secretlen, salt, (word32)saltlen, info,
	               (word32)infolen, dest, (word32)destlen) == 0
	               ? WOLFSSL_SUCCESS
	               : WOLFSSL_FAILURE;
}

void *moq_quic_tls_wolfssl_ctx(const struct moq_quic_tls *t)
{
	return t != NULL ? t->ctx : NULL;
}
