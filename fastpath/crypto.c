/* SPDX-License-Identifier: MIT */
/*
 * crypto.c: the 1-RTT key schedule through wolfCrypt directly (RFC 9001,
 * 5.1, 5.3, 5.4, 6): AES-128-GCM for packets, AES-ECB (one block, AES-NI)
 * for header protection, HKDF-Expand-Label for key updates. No EVP layer.
 */
#include "fp_int.h"
#include "aesni.h"

#include <immintrin.h>
#include <stdlib.h>
#include <sys/random.h>

#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/aes.h>
#include <wolfssl/wolfcrypt/hash.h>
#include <wolfssl/wolfcrypt/kdf.h>

/* Bytes set aside per Aes beyond our view of sizeof(Aes), as
 * loadgen/light.c does (the installed headers may not carry every build
 * setting of the library), unless aes_slack() finds the library keeps
 * within sizeof(Aes). */
#define AES_SLACK 256u

/*
 * What the library writes beyond our sizeof(Aes): an Aes in a buffer with
 * AES_SLACK canary bytes behind it is initialised, keyed, used to seal and
 * open and freed; when the canary is intact the library's Aes is no larger
 * than the headers say and no slack is kept (512 bytes a connection: the tx
 * and current rx contexts). Once per process.
 */
static size_t aes_slack(void)
{
	static int slack = -1;
	int v = __atomic_load_n(&slack, __ATOMIC_RELAXED);
	size_t sz = (sizeof(Aes) + AES_SLACK + 63) & ~(size_t)63, i;
	uint8_t key[16] = {1}, iv[12] = {2}, pt[64] = {3}, ct[64], tag[16];
	uint8_t *b;
	Aes *a;

	if (v >= 0)
		return (size_t)v;
	v = AES_SLACK;
	b = aligned_alloc(64, sz);
	if (b != NULL) {
		memset(b, 0xa5, sz);
		a = (Aes *)(void *)b;
		if (wc_AesInit(a, NULL, INVALID_DEVID) == 0) {
			if (wc_AesGcmSetKey(a, key, sizeof(key)) == 0 &&
			    wc_AesGcmEncrypt(a, ct, pt, sizeof(pt), iv, sizeof(iv), tag,
			                     sizeof(tag), NULL, 0) == 0 &&
			    wc_AesGcmDecrypt(a, pt, ct, sizeof(ct), iv, sizeof(iv), tag,
			                     sizeof(tag), NULL, 0) == 0) {
				v = 0;
				for (i = sizeof(Aes); i < sz; i++)
					if (b[i] != 0xa5)
						v = AES_SLACK;
			}
			wc_AesFree(a);
		}
		free(b);
	}
	__atomic_store_n(&slack, v, __ATOMIC_RELAXED);
	return (size_t)v;
}

/* gcm.c's AES-128-GCM where the CPU has VAES + VPCLMULQDQ (own = 1: only
 * the head up to aes is allocated), else a wolfCrypt Aes. */
struct fp_aes {
	struct fp_gcm g;
	int own;
	Aes aes __attribute__((aligned(64)));
};

static int force_mode; /* FP_AEAD_* */

int fp_crypto_force(int mode)
{
	int was = force_mode;
	force_mode = mode;
	return was;
}

const char *fp_aead_select(int own)
{
	fp_crypto_force(own ? FP_AEAD_AUTO : FP_AEAD_WOLFCRYPT);
	return fp_aead_name();
}

/* What an fp_aes made now uses: 2 gcm.c's 512-bit code, 1 its 128-bit code,
 * 0 wolfCrypt. The 128-bit code costs more than wolfCrypt's AVX2 assembly
 * (bench_fastpath: ~860-1,010 cycles a 1,200-byte seal against ~750): only
 * when asked. */
static int aead_kind(void)
{
	if (force_mode == FP_AEAD_128)
		return fp_gcm_usable() > 0 ? 1 : 0;
	return force_mode == FP_AEAD_AUTO && fp_gcm_usable() == 2 ? 2 : 0;
}

const char *fp_aead_name(void)
{
	static const char *const names[] = {"wolfcrypt", "aesni", "vaes"};
	return names[aead_kind()];
}

int fp_crypto_init(void)
{
	return 0;
}

static struct fp_aes *aes_new(int own)
{
	size_t sz = own ? offsetof(struct fp_aes, aes)
	                : (sizeof(struct fp_aes) + aes_slack() + 63) & ~(size_t)63;
	struct fp_aes *a = aligned_alloc(64, sz);

	if (a == NULL)
		return NULL;
	memset(a, 0, sz);
	a->own = own;
	if (!own && wc_AesInit(&a->aes, NULL, INVALID_DEVID) != 0) {
		free(a);
		return NULL;
	}
	return a;
}

struct fp_aes *fp_aes_new(void)
{
	return aes_new(aead_kind() != 0);
}

void fp_aes_free(struct fp_aes *a)
{
	if (a) {
		if (!a->own)
			wc_AesFree(&a->aes);
		free(a);
	}
}

int fp_aes_gcm_key(struct fp_aes *a, const uint8_t *key)
{
	if (a->own) {
		fp_gcm_key(&a->g, key, force_mode != FP_AEAD_128);
		return 0;
	}
	return wc_AesGcmSetKey(&a->aes, key, FP_KEY_LEN) == 0 ? 0 : MOQ_ERR_CRYPTO;
}

/* ---- header protection: one AES-128 block (RFC 9001, 5.4.3) ---------- */

/* FIPS 197, 5.2 with AES-NI: round key i + 1 from round key i and the
 * AESKEYGENASSIST of it (Intel's AES-NI white paper, 4.1). */
#define HP_TARGET __attribute__((target("aes,sse2")))

HP_TARGET static __m128i hp_expand(__m128i k, __m128i assist)
{
	assist = _mm_shuffle_epi32(assist, 0xff);
	k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
	k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
	k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
	return _mm_xor_si128(k, assist);
}

HP_TARGET void fp_aes128_schedule(uint8_t rk[11 * 16], const uint8_t *key)
{
	__m128i k[11];
	int i;

	k[0] = _mm_loadu_si128((const __m128i *)key);
	/* the round constants must be immediates */
	k[1] = hp_expand(k[0], _mm_aeskeygenassist_si128(k[0], 0x01));
	k[2] = hp_expand(k[1], _mm_aeskeygenassist_si128(k[1], 0x02));
	k[3] = hp_expand(k[2], _mm_aeskeygenassist_si128(k[2], 0x04));
	k[4] = hp_expand(k[3], _mm_aeskeygenassist_si128(k[3], 0x08));
	k[5] = hp_expand(k[4], _mm_aeskeygenassist_si128(k[4], 0x10));
	k[6] = hp_expand(k[5], _mm_aeskeygenassist_si128(k[5], 0x20));
	k[7] = hp_expand(k[6], _mm_aeskeygenassist_si128(k[6], 0x40));
	k[8] = hp_expand(k[7], _mm_aeskeygenassist_si128(k[7], 0x80));
	k[9] = hp_expand(k[8], _mm_aeskeygenassist_si128(k[8], 0x1b));
	k[10] = hp_expand(k[9], _mm_aeskeygenassist_si128(k[9], 0x36));
	for (i = 0; i < 11; i++)
		_mm_store_si128((__m128i *)(rk + 16 * i), k[i]);
}

HP_TARGET static void hp_block(const uint8_t rk[11 * 16], const uint8_t *in, uint8_t *out)
{
	_mm_storeu_si128((__m128i *)out, fp_aes128_enc(rk, _mm_loadu_si128((const __m128i *)in)));
}

static int have_aesni(void)
{
	static int v = -1;

	if (v < 0)
		v = __builtin_cpu_supports("aes") && __builtin_cpu_supports("sse2");
	return v;
}

int fp_hp_key(struct fp_hpkey *h, const uint8_t *key, int soft)
{
	fp_hp_free(h);
	if (!soft && have_aesni()) {
		fp_aes128_schedule(h->rk, key);
		return 0;
	}
	h->soft = aes_new(0); /* wolfCrypt's AES-ECB */
	if (h->soft == NULL)
		return MOQ_ERR_NOMEM;
	if (wc_AesSetKey(&h->soft->aes, key, FP_HP_LEN, NULL, AES_ENCRYPTION) != 0) {
		fp_hp_free(h);
		return MOQ_ERR_CRYPTO;
	}
	return 0;
}

void fp_hp_free(struct fp_hpkey *h)
{
	fp_aes_free(h->soft);
	memset(h, 0, sizeof(*h));
}

int fp_hp_mask(const struct fp_hpkey *h, const uint8_t *sample, uint8_t mask[16])
{
	/* wolfSSL's AES-NI path mallocs a bounce buffer for unaligned blocks */
	uint8_t in[16] __attribute__((aligned(16)));
	uint8_t out[16] __attribute__((aligned(16)));

	if (h->soft == NULL) {
		hp_block(h->rk, sample, mask);
		return 0;
	}
	memcpy(in, sample, 16);
	if (wc_AesEncryptDirect(&h->soft->aes, out, in) != 0)
		return MOQ_ERR_CRYPTO;
	memcpy(mask, out, 16);
	return 0;
}

/* RFC 9001, 5.3: the nonce is the IV XORed with the packet number. */
static void nonce_of(uint8_t n[FP_IV_LEN], const uint8_t iv[FP_IV_LEN], uint64_t pn)
{
	uint64_t lo;

	/* the packet number, big-endian, into the last 8 bytes */
	memcpy(n, iv, 4);
	memcpy(&lo, iv + 4, 8);
	lo ^= __builtin_bswap64(pn);
	memcpy(n + 4, &lo, 8);
}

int fp_seal(struct fp_aes *a, const uint8_t iv[FP_IV_LEN], uint64_t pn, const uint8_t *aad,
            size_t aadlen, uint8_t *p, size_t len)
{
	uint8_t n[FP_IV_LEN];

	nonce_of(n, iv, pn);
	if (a->own) {
		fp_gcm_seal(&a->g, n, aad, aadlen, p, len, p, p + len);
		return 0;
	}
	return wc_AesGcmEncrypt(&a->aes, p, p, (word32)len, n, FP_IV_LEN, p + len, FP_TAG_LEN, aad,
	                        (word32)aadlen) == 0
	               ? 0
	               : MOQ_ERR_CRYPTO;
}

void fp_aes_prefetch(const struct fp_aes *a)
{
	if (a == NULL)
		return;
	/* our GCM's round keys and powers of H, then the first lines of
	 * wolfCrypt's Aes (its round keys) for a key our GCM does not take:
	 * which one is in use is not known before @a's lines are in */
	for (size_t o = 0; o < offsetof(struct fp_aes, aes) + 256; o += 64)
		__builtin_prefetch((const char *)a + o);
}

int fp_aes_gathers(const struct fp_aes *a)
{
	return a->own;
}

int fp_sealv(struct fp_aes *a, const uint8_t iv[FP_IV_LEN], uint64_t pn, const uint8_t *aad,
             size_t aadlen, const struct fp_iov *v, unsigned n, uint8_t *out, size_t len)
{
	uint8_t nc[FP_IV_LEN];

	if (!a->own)
		return MOQ_ERR_INVAL;
	nonce_of(nc, iv, pn);
	fp_gcm_sealv(&a->g, nc, aad, aadlen, v, n, out, len, out + len);
	return 0;
}

int fp_open(struct fp_aes *a, const uint8_t iv[FP_IV_LEN], uint64_t pn, const uint8_t *aad,
            size_t aadlen, const uint8_t *in, size_t len, uint8_t *out)
{
	uint8_t n[FP_IV_LEN];

	if (len < FP_TAG_LEN)
		return MOQ_ERR_CRYPTO;
	nonce_of(n, iv, pn);
	if (a->own)
		return fp_gcm_open(&a->g, n, aad, aadlen, in, len - FP_TAG_LEN, out,
		                   in + len - FP_TAG_LEN);
	return wc_AesGcmDecrypt(&a->aes, out, in, (word32)(len - FP_TAG_LEN), n, FP_IV_LEN,
	                        in + len - FP_TAG_LEN, FP_TAG_LEN, aad, (word32)aadlen) == 0
	               ? 0
	               : MOQ_ERR_CRYPTO;
}

int fp_expand_label(uint8_t *out, size_t outlen, const uint8_t *secret, const char *label)
{
	static const uint8_t proto[] = "tls13 ";

	return wc_Tls13_HKDF_Expand_Label(out, (word32)outlen, secret, FP_SECRET_LEN, proto,
	                                  sizeof(proto) - 1, (const uint8_t *)label,
	                                  (word32)strlen(label), NULL, 0, WC_SHA256) == 0
	               ? 0
	               : MOQ_ERR_CRYPTO;
}

int fp_next_secret(uint8_t next[FP_SECRET_LEN], const uint8_t secret[FP_SECRET_LEN])
{
	/* RFC 9001, 6.1: secret_<n+1> = HKDF-Expand-Label(secret_<n>, "quic ku", "", Hash.length) */
	uint8_t tmp[FP_SECRET_LEN];

	if (fp_expand_label(tmp, FP_SECRET_LEN, secret, "quic ku") < 0)
		return MOQ_ERR_CRYPTO;
	memcpy(next, tmp, FP_SECRET_LEN);
	return 0;
}

int fp_key_iv(const uint8_t secret[FP_SECRET_LEN], uint8_t key[FP_KEY_LEN], uint8_t iv[FP_IV_LEN])
{
	/* RFC 9001, 5.1 */
	if (fp_expand_label(key, FP_KEY_LEN, secret, "quic key") < 0 ||
	    fp_expand_label(iv, FP_IV_LEN, secret, "quic iv") < 0)
		return MOQ_ERR_CRYPTO;
	return 0;
}

static int rx_slot_set(struct fp_rxkey *r, const uint8_t secret[FP_SECRET_LEN])
{
	/* the key and IV are derived ahead (RFC 9001, 6.3); the Aes (~1.1 KB
	 * with its GCM state) is made only when a packet of this generation
	 * arrives (fp_keys_rx_ready): most connections never update their
	 * keys. A slot that still has one (the previous generation's, not yet
	 * expired) is re-keyed in place */
	memcpy(r->secret, secret, FP_SECRET_LEN);
	if (fp_key_iv(secret, r->key, r->iv) < 0)
		return MOQ_ERR_CRYPTO;
	if (r->aead)
		return fp_aes_gcm_key(r->aead, r->key);
	return 0;
}

int fp_keys_rx_ready(struct fp_rxkey *r)
{
	if (r->aead)
		return 0;
	if ((r->aead = fp_aes_new()) == NULL)
		return MOQ_ERR_NOMEM;
	return fp_aes_gcm_key(r->aead, r->key);
}

int fp_keys_setup(struct fp_keys *k, const struct fp_import *imp)
{

	memset(k, 0, sizeof(*k));
	/* tx and current rx: the next rx generation's Aes exists from its
	 * first packet on (its key is derived ahead), the previous one's until
	 * its keys expire (3 PTO) */
	k->tx_aead = fp_aes_new();
	k->rx[0].aead = fp_aes_new();
	if (!k->tx_aead || !k->rx[0].aead)
		goto fail;
	memcpy(k->tx_secret, imp->tx.secret, FP_SECRET_LEN);
	memcpy(k->tx_iv, imp->tx.iv, FP_IV_LEN);
	if (fp_aes_gcm_key(k->tx_aead, imp->tx.key) < 0 ||
	    fp_hp_key(&k->tx_hp, imp->tx.hp, 0) < 0 || fp_hp_key(&k->rx_hp, imp->rx.hp, 0) < 0)
		goto fail;
	memcpy(k->rx[0].secret, imp->rx.secret, FP_SECRET_LEN);
	memcpy(k->rx[0].iv, imp->rx.iv, FP_IV_LEN);
	if (fp_aes_gcm_key(k->rx[0].aead, imp->rx.key) < 0)
		goto fail;
	k->rxc = 0;
	if (fp_keys_derive_rx_next(k) < 0)
		goto fail;
	k->rx_phase_first_pn = 0;
	return 0;
fail:
	fp_keys_free(k);
	return MOQ_ERR_CRYPTO;
}

void fp_keys_free(struct fp_keys *k)
{
	int i;

	fp_aes_free(k->tx_aead);
	fp_hp_free(&k->tx_hp);
	fp_hp_free(&k->rx_hp);
	for (i = 0; i < 3; i++)
		fp_aes_free(k->rx[i].aead);
	memset(k, 0, sizeof(*k));
}

int fp_keys_derive_rx_next(struct fp_keys *k)
{
	uint8_t next[FP_SECRET_LEN];
	struct fp_rxkey *cur = &k->rx[k->rxc];

	if (fp_next_secret(next, cur->secret) < 0)
		return MOQ_ERR_CRYPTO;
	return rx_slot_set(&k->rx[(k->rxc + 1) % 3], next);
}

int fp_keys_rotate_rx(struct fp_keys *k, uint64_t pn, uint64_t prev_until)
{
	/* RFC 9001, 6.2 / 6.5: next becomes current, current is kept as the
	 * previous generation for reordered packets; a new next is derived
	 * into the slot of the one before (dropped now) */
	k->rxc = (uint8_t)((k->rxc + 1) % 3);
	k->have_prev = 1;
	k->prev_until = prev_until;
	k->rx_phase_first_pn = pn;
	return fp_keys_derive_rx_next(k);
}

void fp_keys_drop_prev(struct fp_keys *k)
{
	struct fp_rxkey *p = &k->rx[(k->rxc + 2) % 3];

	k->have_prev = 0;
	fp_aes_free(p->aead);
	p->aead = NULL;
	memset(p->secret, 0, sizeof(p->secret));
	memset(p->key, 0, sizeof(p->key));
}

int fp_keys_update_tx(struct fp_keys *k, uint64_t first_pn)
{
	uint8_t key[FP_KEY_LEN];

	if (fp_next_secret(k->tx_secret, k->tx_secret) < 0 ||
	    fp_key_iv(k->tx_secret, key, k->tx_iv) < 0 || fp_aes_gcm_key(k->tx_aead, key) < 0)
		return MOQ_ERR_CRYPTO;
	k->tx_phase_first_pn = first_pn;
	return 0;
}

int fp_random(uint8_t *out, size_t len)
{
	/* control path only (PATH_CHALLENGE data): never per packet */
	while (len > 0) {
		ssize_t n = getrandom(out, len, 0);
		if (n <= 0)
			return MOQ_ERR_CRYPTO;
		out += n;
		len -= (size_t)n;
	}
	return 0;
}
