/* SPDX-License-Identifier: MIT */
/*
 * light.c: light subscribers (light.h).
 */
#include "light.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/aes.h>
#include <wolfssl/wolfcrypt/hash.h>
#include <wolfssl/wolfcrypt/kdf.h>

#include "moq_err.h"

/* Received ranges an ACK reports at most (the newest); older ones are
 * dropped (RFC 9000, 13.2.3 lets a receiver limit them). */
#define LIGHT_RANGES 8
/* Chromium's ACK decimation: every 2nd ack-eliciting packet for the first
 * 100 of a connection, then every 10th (bounded by max_ack_delay). */
#define DECIMATE_AFTER  100u
#define ACK_EVERY_FIRST 2u
#define ACK_EVERY_LATER 10u
/* RFC 9001, 5.3 / 5.4: AES-128-GCM tag, header protection sample. */
#define TAG_LEN    16u
#define SAMPLE_LEN 16u
/* Our packet numbers are written in 4 bytes (RFC 9000, 17.1): a peer can
 * decode any of them whatever it acknowledged. */
#define PN_LEN 4u
/* The short header's fixed bit and key phase (RFC 9000, 17.3.1). */
#define HDR_FIXED     0x40u
#define HDR_KEY_PHASE 0x04u
/* Frames (RFC 9000, 19). */
#define FT_PING     0x01u
#define FT_ACK      0x02u
#define FT_CLOSE_AP 0x1du
/* Keep-alive: a PING when nothing was sent for this part of the idle
 * timeout (browsers ping well inside it). */
#define KEEPALIVE_DIV 3u
/* A light subscriber that received nothing for this long counts as
 * stalled (client.h's MOQ_LG_STALL_NS: audio alone is 50 packets a second). */
#define LIGHT_STALL_NS 1000000000ull
/* Keep-alives are looked for this often (a walk over all connections). */
#define SWEEP_NS 1000000000ull
/* The ACK delay we advertise when the export has none (RFC 9000, 18.2). */
#define DEFAULT_MAX_ACK_DELAY_NS 25000000ull
/* Bytes set aside per wolfCrypt Aes beyond our view of sizeof(Aes): its
 * layout depends on build settings the installed headers may not all carry
 * (see quic/tls.c, gen_self_signed). */
#define AES_SLACK 1024u

enum lc_state { LC_NONE = 0, LC_PREPARED, LC_TAKEN, LC_CLOSED };
enum lc_list { L_NONE = 0, L_WAIT, L_READY };

struct range {
	uint64_t lo, hi;
};

struct lconn {
	uint8_t state, list, mute, imm, ping, close;
	uint8_t rx_phase, tx_phase;
	uint8_t dcidlen;
	uint8_t dcid[20];
	struct moq_quic_light_keys keys;
	Aes *tx_aead, *tx_hp, *rx_hp;
	uint8_t tx_iv[MOQ_QUIC_LIGHT_IV_LEN];
	struct moq_quic_addr local, remote;
	uint64_t tx_pn;
	int64_t largest;
	uint64_t largest_ns;
	struct range r[LIGHT_RANGES];
	uint32_t nr;
	uint32_t unacked;
	uint64_t unacked_bytes, first_unacked_ns, rx_total;
	uint64_t last_tx_ns, last_rx_ns;
	uint64_t ack_delay_exp, max_ack_delay_ns, keepalive_ns;
	struct lconn *next, *prev;
};

struct list {
	struct lconn *head, *tail;
	uint32_t n;
};

struct cent {
	uint8_t cid[20];
	uint32_t idx1; /* index + 1; 0 = empty */
};

struct moq_lg_light {
	struct lconn *c;
	uint32_t n;
	struct cent *tab;
	uint32_t tcap, tn; /* power of two */
	size_t cidlen;     /* our CIDs' length (all the same) */
	struct list wait, ready;
	uint64_t next_sweep;
	int stopping;
	struct moq_lg_light_stats st;
	uint64_t tsc0, ns0;
};

/* ---- helpers ------------------------------------------------------------- */

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void list_del(struct moq_lg_light *L, struct lconn *c)
{
	struct list *l;
	if (c->list == L_NONE)
		return;
	l = c->list == L_WAIT ? &L->wait : &L->ready;
	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		l->tail = c->prev;
	l->n--;
	c->next = c->prev = NULL;
	c->list = L_NONE;
}

static void list_add(struct moq_lg_light *L, struct lconn *c, enum lc_list which)
{
	struct list *l = which == L_WAIT ? &L->wait : &L->ready;
	list_del(L, c);
	c->prev = l->tail;
	c->next = NULL;
	if (l->tail)
		l->tail->next = c;
	else
		l->head = c;
	l->tail = c;
	l->n++;
	c->list = (uint8_t)which;
}

static uint64_t hash_cid(const uint8_t *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

static int tab_put(struct moq_lg_light *L, const uint8_t *cid, uint32_t idx)
{
	if ((L->tn + 1) * 2 > L->tcap) {
		uint32_t ncap = L->tcap ? L->tcap * 2 : 1024;
		struct cent *nt = calloc(ncap, sizeof(*nt));
		if (!nt)
			return MOQ_ERR_NOMEM;
		for (uint32_t i = 0; i < L->tcap; i++) {
			struct cent *e = &L->tab[i];
			if (!e->idx1)
				continue;
			uint32_t j = (uint32_t)hash_cid(e->cid, L->cidlen) & (ncap - 1);
			while (nt[j].idx1)
				j = (j + 1) & (ncap - 1);
			nt[j] = *e;
		}
		free(L->tab);
		L->tab = nt;
		L->tcap = ncap;
	}
	uint32_t j = (uint32_t)hash_cid(cid, L->cidlen) & (L->tcap - 1);
	while (L->tab[j].idx1) {
		if (!memcmp(L->tab[j].cid, cid, L->cidlen)) {
			L->tab[j].idx1 = idx + 1;
			return 0;
		}
		j = (j + 1) & (L->tcap - 1);
	}
	memcpy(L->tab[j].cid, cid, L->cidlen);
	L->tab[j].idx1 = idx + 1;
	L->tn++;
	return 0;
}

/* The connection a short-header datagram is for, or NULL. */
static struct lconn *lookup(const struct moq_lg_light *L, const uint8_t *d, size_t len)
{
	/* the fixed bit is not looked at: a peer that may grease it (RFC 9287,
	 * ngtcp2 does when we advertise grease_quic_bit) clears it at random */
	if (!L->tcap || len < 1 + L->cidlen || (d[0] & 0x80))
		return NULL;
	uint32_t j = (uint32_t)hash_cid(d + 1, L->cidlen) & (L->tcap - 1);
	while (L->tab[j].idx1) {
		if (!memcmp(L->tab[j].cid, d + 1, L->cidlen))
			return &L->c[L->tab[j].idx1 - 1];
		j = (j + 1) & (L->tcap - 1);
	}
	return NULL;
}

static Aes *aes_new(void)
{
	size_t sz = (sizeof(Aes) + AES_SLACK + 63) & ~(size_t)63;
	Aes *a = aligned_alloc(64, sz);
	if (!a)
		return NULL;
	memset(a, 0, sz);
	if (wc_AesInit(a, NULL, INVALID_DEVID) != 0) {
		free(a);
		return NULL;
	}
	return a;
}

static void aes_free(Aes *a)
{
	if (a) {
		wc_AesFree(a);
		free(a);
	}
}

/* RFC 9001, 5.4.3: mask = AES-ECB(hp_key, sample). */
static int hp_mask(Aes *a, const uint8_t *sample, uint8_t mask[16])
{
	/* wolfSSL's AES-NI path mallocs a bounce buffer for unaligned blocks */
	uint8_t in[16] __attribute__((aligned(16)));
	uint8_t out[16] __attribute__((aligned(16)));
	memcpy(in, sample, 16);
	if (wc_AesEncryptDirect(a, out, in) != 0)
		return -1;
	memcpy(mask, out, 16);
	return 0;
}

/* RFC 9001, 5.1: HKDF-Expand-Label(secret, label, "", len) with SHA-256. */
static int expand_label(uint8_t *out, size_t outlen, const uint8_t *secret, size_t secretlen,
                        const char *label)
{
	static const uint8_t proto[] = "tls13 ";
	return wc_Tls13_HKDF_Expand_Label(out, (word32)outlen, secret, (word32)secretlen, proto,
	                                  sizeof(proto) - 1, (const uint8_t *)label,
	                                  (word32)strlen(label), NULL, 0, WC_SHA256) == 0
	               ? 0
	               : -1;
}

/* The packet protection key and IV of @secret (RFC 9001, 5.1). */
static int derive_key_iv(const uint8_t *secret, size_t secretlen, uint8_t key[16],
                         uint8_t iv[MOQ_QUIC_LIGHT_IV_LEN])
{
	if (expand_label(key, 16, secret, secretlen, "quic key") < 0 ||
	    expand_label(iv, MOQ_QUIC_LIGHT_IV_LEN, secret, secretlen, "quic iv") < 0)
		return -1;
	return 0;
}

/* RFC 9000, A.3: the full packet number from @trunc of @bits bits. */
static uint64_t decode_pn(int64_t largest, uint64_t trunc, unsigned bits)
{
	uint64_t expected = (uint64_t)(largest + 1);
	uint64_t win = 1ull << bits, hwin = win / 2, mask = win - 1;
	uint64_t cand = (expected & ~mask) | trunc;
	if (cand + hwin <= expected && cand < (1ull << 62) - win)
		return cand + win;
	if (cand > expected + hwin && cand >= win)
		return cand - win;
	return cand;
}

/* Note @pn in the ranges (newest first). Returns 1 when it is new. */
static int range_add(struct lconn *c, uint64_t pn)
{
	uint32_t i;
	for (i = 0; i < c->nr; i++) {
		struct range *r = &c->r[i];
		if (pn > r->hi + 1)
			break;
		if (pn == r->hi + 1) {
			r->hi = pn;
			if (i > 0 && c->r[i - 1].lo == pn + 1) {
				c->r[i - 1].lo = r->lo;
				memmove(&c->r[i], &c->r[i + 1], (c->nr - i - 1) * sizeof(*r));
				c->nr--;
			}
			return 1;
		}
		if (pn >= r->lo)
			return 0;
		if (pn + 1 == r->lo) {
			r->lo = pn;
			if (i + 1 < c->nr && c->r[i + 1].hi + 1 == pn) {
				r->lo = c->r[i + 1].lo;
				memmove(&c->r[i + 1], &c->r[i + 2], (c->nr - i - 2) * sizeof(*r));
				c->nr--;
			}
			return 1;
		}
	}
	if (i == LIGHT_RANGES)
		return 1; /* older than every range kept: not reported */
	if (c->nr == LIGHT_RANGES)
		c->nr--; /* drop the oldest */
	memmove(&c->r[i + 1], &c->r[i], (c->nr - i) * sizeof(c->r[0]));
	c->r[i].lo = c->r[i].hi = pn;
	c->nr++;
	return 1;
}

/* The peer moved to the next key phase (RFC 9001, 6.2): our next secrets
 * and send key; header protection keys do not change (6.1). */
static int key_update(struct moq_lg_light *L, struct lconn *c)
{
	struct moq_quic_light_keys *k = &c->keys;
	uint8_t next[MOQ_QUIC_LIGHT_SECRET_MAX], key[16];
	if (expand_label(next, k->secretlen, k->rx.secret, k->secretlen, "quic ku") < 0)
		return -1;
	memcpy(k->rx.secret, next, k->secretlen);
	if (expand_label(next, k->secretlen, k->tx.secret, k->secretlen, "quic ku") < 0)
		return -1;
	memcpy(k->tx.secret, next, k->secretlen);
	if (derive_key_iv(k->tx.secret, k->secretlen, key, c->tx_iv) < 0 ||
	    wc_AesGcmSetKey(c->tx_aead, key, 16) != 0)
		return -1;
	c->rx_phase ^= 1;
	c->tx_phase ^= 1;
	L->st.key_updates++;
	return 0;
}

/* One received 1-RTT packet of @c: its number into the ranges. Returns 1
 * when it calls for an ACK at once (out of order), 0, or -1 (not one). */
static int rx_pkt(struct moq_lg_light *L, struct lconn *c, const uint8_t *d, size_t len,
                  uint64_t now)
{
	size_t pn_off = 1 + L->cidlen;
	uint8_t mask[16];
	/* RFC 9001, 5.4.2: the sample starts 4 bytes after the packet number */
	if (len < pn_off + PN_LEN + SAMPLE_LEN ||
	    hp_mask(c->rx_hp, d + pn_off + PN_LEN, mask) < 0) {
		L->st.bad_pkts++;
		return -1;
	}
	uint8_t b0 = d[0] ^ (mask[0] & 0x1f);
	unsigned pnlen = (b0 & 3u) + 1;
	uint64_t trunc = 0;
	for (unsigned i = 0; i < pnlen; i++)
		trunc = (trunc << 8) | (uint8_t)(d[pn_off + i] ^ mask[1 + i]);
	uint64_t pn = decode_pn(c->largest, trunc, pnlen * 8);
	int imm = 0;
	if ((int64_t)pn > c->largest) {
		if (c->largest >= 0 && pn != (uint64_t)c->largest + 1)
			imm = 1;
		/* a newer packet in the other phase: the peer updated its keys
		 * (an older one may still come in the old phase) */
		if (((b0 & HDR_KEY_PHASE) != 0) != c->rx_phase && c->state == LC_TAKEN &&
		    key_update(L, c) < 0)
			L->st.bad_pkts++;
		else if (c->state == LC_PREPARED)
			c->rx_phase = (b0 & HDR_KEY_PHASE) != 0;
		c->largest = (int64_t)pn;
		c->largest_ns = now;
	} else {
		imm = 1;
	}
	range_add(c, pn);
	c->rx_total++;
	c->last_rx_ns = now;
	if (c->state == LC_TAKEN) {
		if (!c->unacked)
			c->first_unacked_ns = now;
		c->unacked++;
		c->unacked_bytes += len;
		L->st.rx_pkts++;
		L->st.rx_bytes += len;
		if (imm)
			L->st.out_of_order++;
	}
	return imm;
}

static int make_rx_hp(struct lconn *c)
{
	if (c->rx_hp)
		return 0;
	c->rx_hp = aes_new();
	if (!c->rx_hp || wc_AesSetKeyDirect(c->rx_hp, c->keys.rx.hp, (word32)c->keys.keylen, NULL,
	                                    AES_ENCRYPTION) != 0) {
		aes_free(c->rx_hp);
		c->rx_hp = NULL;
		return -1;
	}
	return 0;
}

/* ---- API ------------------------------------------------------------------ */

struct moq_lg_light *moq_lg_light_create(uint32_t n)
{
	struct moq_lg_light *L = calloc(1, sizeof(*L));
	if (!L)
		return NULL;
	L->c = calloc(n ? n : 1, sizeof(*L->c));
	if (!L->c) {
		free(L);
		return NULL;
	}
	L->n = n;
	L->tsc0 = __rdtsc();
	L->ns0 = mono_ns();
	return L;
}

void moq_lg_light_destroy(struct moq_lg_light *L)
{
	if (!L)
		return;
	for (uint32_t i = 0; i < L->n; i++) {
		aes_free(L->c[i].tx_aead);
		aes_free(L->c[i].tx_hp);
		aes_free(L->c[i].rx_hp);
	}
	free(L->tab);
	free(L->c);
	free(L);
}

int moq_lg_light_prepare(struct moq_lg_light *L, uint32_t idx, struct moq_quic_conn *c)
{
	struct moq_quic_light ex;
	if (idx >= L->n || !c)
		return MOQ_ERR_INVAL;
	struct lconn *lc = &L->c[idx];
	int rc = moq_quic_conn_light_prepare(c, &lc->keys);
	if (rc < 0)
		return rc;
	/* the CIDs (the export fails before the handshake, but has them) */
	moq_quic_conn_light_export(c, &lc->keys, &ex);
	if (!ex.nscids || (L->cidlen && ex.scidlen != L->cidlen) || ex.scidlen > 20)
		return MOQ_ERR_STATE;
	L->cidlen = ex.scidlen;
	for (unsigned i = 0; i < ex.nscids; i++)
		if (tab_put(L, ex.scids[i], idx) < 0)
			return MOQ_ERR_NOMEM;
	lc->state = LC_PREPARED;
	lc->largest = -1;
	return 0;
}

int moq_lg_light_take(struct moq_lg_light *L, uint32_t idx, struct moq_quic_conn *c, int mute,
                      uint64_t now)
{
	struct moq_quic_light ex;
	uint8_t key[16], iv[MOQ_QUIC_LIGHT_IV_LEN];
	if (idx >= L->n || L->c[idx].state != LC_PREPARED)
		return MOQ_ERR_STATE;
	struct lconn *lc = &L->c[idx];
	int rc = moq_quic_conn_light_export(c, &lc->keys, &ex);
	if (rc == 0 && (ex.scidlen != L->cidlen || ex.dcidlen > sizeof(lc->dcid)))
		rc = MOQ_ERR_STATE;
	/* our HKDF gives ngtcp2's keys: the key update derivation is the same
	 * function with another label */
	if (rc == 0 && (derive_key_iv(lc->keys.tx.secret, lc->keys.secretlen, key, iv) < 0 ||
	                memcmp(key, lc->keys.tx.key, 16) || memcmp(iv, lc->keys.tx.iv, sizeof(iv))))
		rc = MOQ_ERR_CRYPTO;
	/* a key update before the take-over left the captured keys behind
	 * (cannot happen with ngtcp2 0.12 below its 2^23-packet AES-GCM limit) */
	if (rc == 0 && lc->rx_phase)
		rc = MOQ_ERR_STATE;
	if (rc == 0 && make_rx_hp(lc) < 0)
		rc = MOQ_ERR_NOMEM;
	if (rc == 0) {
		lc->tx_aead = aes_new();
		lc->tx_hp = aes_new();
		if (!lc->tx_aead || !lc->tx_hp ||
		    wc_AesGcmSetKey(lc->tx_aead, lc->keys.tx.key, 16) != 0 ||
		    wc_AesSetKeyDirect(lc->tx_hp, lc->keys.tx.hp, 16, NULL, AES_ENCRYPTION) != 0)
			rc = MOQ_ERR_NOMEM;
	}
	if (rc < 0) {
		L->st.refused++;
		return rc;
	}
	for (unsigned i = 0; i < ex.nscids; i++)
		if (tab_put(L, ex.scids[i], idx) < 0)
			return MOQ_ERR_NOMEM;
	memcpy(lc->tx_iv, lc->keys.tx.iv, sizeof(lc->tx_iv));
	memcpy(lc->dcid, ex.dcid, ex.dcidlen);
	lc->dcidlen = (uint8_t)ex.dcidlen;
	lc->local = ex.local;
	lc->remote = ex.remote;
	lc->tx_pn = ex.tx_pn;
	lc->tx_phase = 0; /* ngtcp2 0.12 never starts a key update of its own */
	lc->ack_delay_exp = ex.ack_delay_exponent;
	lc->max_ack_delay_ns = ex.max_ack_delay_ns ? ex.max_ack_delay_ns : DEFAULT_MAX_ACK_DELAY_NS;
	lc->keepalive_ns = ex.idle_timeout_ns ? ex.idle_timeout_ns / KEEPALIVE_DIV : 0;
	lc->mute = (uint8_t)(mute != 0);
	lc->last_tx_ns = lc->last_rx_ns = now;
	lc->state = LC_TAKEN;
	moq_quic_conn_light_detach(c);
	L->st.conns++;
	/* acknowledge at once what ngtcp2 may not have yet */
	lc->unacked = 0;
	lc->unacked_bytes = 0;
	lc->imm = 1;
	if (!lc->mute)
		list_add(L, lc, L_READY);
	return 0;
}

int moq_lg_light_recv(struct moq_lg_light *L, const uint8_t *data, size_t len, uint64_t now)
{
	struct lconn *c = lookup(L, data, len);
	if (!c || c->state < LC_TAKEN)
		return 0;
	if (c->state == LC_CLOSED)
		return 1;
	uint64_t t0 = __rdtsc();
	int imm = rx_pkt(L, c, data, len, now);
	if (imm >= 0 && !c->mute) {
		uint32_t every = c->rx_total < DECIMATE_AFTER ? ACK_EVERY_FIRST : ACK_EVERY_LATER;
		if (imm || c->unacked >= every) {
			c->imm = 1;
			if (c->list != L_READY)
				list_add(L, c, L_READY);
		} else if (c->list == L_NONE) {
			list_add(L, c, L_WAIT);
		}
	}
	L->st.cycles += __rdtsc() - t0;
	return 1;
}

void moq_lg_light_observe(struct moq_lg_light *L, const uint8_t *data, size_t len, uint64_t now)
{
	struct lconn *c = lookup(L, data, len);
	if (!c || c->state != LC_PREPARED || !c->keys.have)
		return;
	if (make_rx_hp(c) < 0)
		return;
	rx_pkt(L, c, data, len, now);
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
	if (v < 64) {
		p[0] = (uint8_t)v;
		return 1;
	}
	if (v < 16384) {
		p[0] = (uint8_t)(0x40 | (v >> 8));
		p[1] = (uint8_t)v;
		return 2;
	}
	if (v < (1ull << 30)) {
		for (int i = 3; i >= 0; i--, v >>= 8)
			p[i] = (uint8_t)v;
		p[0] |= 0x80;
		return 4;
	}
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
	p[0] |= 0xc0;
	return 8;
}

/* Build @c's packet (ACK, PING if due, CONNECTION_CLOSE at stop) into @pk.
 * Returns 0 or -1 (no room / crypto failure). */
static int build(struct lconn *c, struct moq_quic_pkt *pk, uint64_t now)
{
	/* header + PING + ACK (<= 1 + 4 * 8 + LIGHT_RANGES * 16) + CLOSE + tag */
	size_t need = 1 + c->dcidlen + PN_LEN + 1 + 33 + LIGHT_RANGES * 16 + 3 + TAG_LEN;
	if (pk->cap < need)
		return -1;
	uint8_t *p = pk->data;
	size_t pn_off = 1 + c->dcidlen, hlen = pn_off + PN_LEN, o;
	uint64_t pn = c->tx_pn++;
	p[0] = (uint8_t)(HDR_FIXED | (c->tx_phase ? HDR_KEY_PHASE : 0) | (PN_LEN - 1));
	memcpy(p + 1, c->dcid, c->dcidlen);
	for (unsigned i = 0; i < PN_LEN; i++)
		p[pn_off + i] = (uint8_t)(pn >> (8 * (PN_LEN - 1 - i)));
	o = hlen;
	if (c->ping)
		p[o++] = FT_PING;
	if (c->nr) {
		/* RFC 9000, 19.3 */
		uint64_t delay = now > c->largest_ns ? (now - c->largest_ns) / 1000 : 0;
		p[o++] = FT_ACK;
		o += put_varint(p + o, c->r[0].hi);
		o += put_varint(p + o, delay >> c->ack_delay_exp);
		o += put_varint(p + o, c->nr - 1);
		o += put_varint(p + o, c->r[0].hi - c->r[0].lo);
		for (uint32_t i = 1; i < c->nr; i++) {
			o += put_varint(p + o, c->r[i - 1].lo - c->r[i].hi - 2);
			o += put_varint(p + o, c->r[i].hi - c->r[i].lo);
		}
	}
	if (c->close) {
		/* RFC 9000, 19.19: application close, code 0, no reason */
		p[o++] = FT_CLOSE_AP;
		p[o++] = 0;
		p[o++] = 0;
	}
	if (o == hlen)
		p[o++] = FT_PING;
	/* RFC 9001, 5.3: nonce = iv XOR the packet number, left-padded */
	uint8_t nonce[MOQ_QUIC_LIGHT_IV_LEN];
	memcpy(nonce, c->tx_iv, sizeof(nonce));
	for (unsigned i = 0; i < 8; i++)
		nonce[sizeof(nonce) - 1 - i] ^= (uint8_t)(pn >> (8 * i));
	if (wc_AesGcmEncrypt(c->tx_aead, p + hlen, p + hlen, (word32)(o - hlen), nonce,
	                     sizeof(nonce), p + o, TAG_LEN, p, (word32)hlen) != 0)
		return -1;
	/* RFC 9001, 5.4.1 */
	uint8_t mask[16];
	if (hp_mask(c->tx_hp, p + pn_off + PN_LEN, mask) < 0)
		return -1;
	p[0] ^= mask[0] & 0x1f;
	for (unsigned i = 0; i < PN_LEN; i++)
		p[pn_off + i] ^= mask[1 + i];
	pk->len = o + TAG_LEN;
	pk->local = c->local;
	pk->remote = c->remote;
	pk->ecn = 0;
	return 0;
}

int moq_lg_light_send(struct moq_lg_light *L, struct moq_quic_pkt *pkts, size_t n, uint64_t now)
{
	size_t k = 0;
	if (!L->ready.head)
		return 0;
	uint64_t t0 = __rdtsc();
	while (k < n && L->ready.head) {
		struct lconn *c = L->ready.head;
		list_del(L, c);
		if (c->mute || c->state != LC_TAKEN)
			continue;
		if (build(c, &pkts[k], now) < 0) {
			L->st.bad_pkts++;
			continue;
		}
		k++;
		if (c->nr) {
			L->st.acks_sent++;
			L->st.acked_pkts += c->unacked;
			L->st.acked_bytes += c->unacked_bytes;
		}
		if (c->ping)
			L->st.pings_sent++;
		if (c->close) {
			L->st.closes_sent++;
			c->state = LC_CLOSED;
		}
		c->unacked = 0;
		c->unacked_bytes = 0;
		c->first_unacked_ns = 0;
		c->imm = c->ping = 0;
		c->last_tx_ns = now;
	}
	L->st.cycles += __rdtsc() - t0;
	return (int)k;
}

int moq_lg_light_poll(struct moq_lg_light *L, uint64_t now)
{
	int due = 0;
	while (L->wait.head &&
	       L->wait.head->first_unacked_ns + L->wait.head->max_ack_delay_ns <= now) {
		list_add(L, L->wait.head, L_READY);
		due++;
	}
	if (now >= L->next_sweep) {
		L->next_sweep = now + SWEEP_NS;
		for (uint32_t i = 0; i < L->n; i++) {
			struct lconn *c = &L->c[i];
			if (c->state != LC_TAKEN || c->mute || !c->keepalive_ns ||
			    now < c->last_tx_ns + c->keepalive_ns)
				continue;
			c->ping = 1;
			list_add(L, c, L_READY);
			due++;
		}
	}
	return due;
}

int moq_lg_light_pending(const struct moq_lg_light *L)
{
	return L->ready.head != NULL;
}

uint64_t moq_lg_light_next_wake(const struct moq_lg_light *L)
{
	uint64_t t = L->next_sweep;
	if (L->wait.head && L->wait.head->first_unacked_ns + L->wait.head->max_ack_delay_ns < t)
		t = L->wait.head->first_unacked_ns + L->wait.head->max_ack_delay_ns;
	return t;
}

void moq_lg_light_stop(struct moq_lg_light *L, uint64_t now)
{
	(void)now;
	L->stopping = 1;
	for (uint32_t i = 0; i < L->n; i++) {
		struct lconn *c = &L->c[i];
		if (c->state != LC_TAKEN || c->mute)
			continue;
		c->close = 1;
		list_add(L, c, L_READY);
	}
}

void moq_lg_light_stats(struct moq_lg_light *L, uint64_t now, struct moq_lg_light_stats *out)
{
	uint64_t ns = mono_ns(), tsc = __rdtsc();
	L->st.stalled = 0;
	for (uint32_t i = 0; i < L->n; i++)
		if (L->c[i].state == LC_TAKEN && now > L->c[i].last_rx_ns + LIGHT_STALL_NS)
			L->st.stalled++;
	if (ns > L->ns0 + 200000000ull)
		L->st.tsc_hz = (uint64_t)((double)(tsc - L->tsc0) * 1e9 / (double)(ns - L->ns0));
	*out = L->st;
}

int moq_lg_light_is_taken(const struct moq_lg_light *L, uint32_t idx)
{
	return idx < L->n && L->c[idx].state >= LC_TAKEN;
}
