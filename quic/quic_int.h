/* SPDX-License-Identifier: MIT */
/*
 * quic_int.h: private structures of the QUIC endpoint, the helpers the
 * files of quic/ share, and the hot small ones as static inline (hashing,
 * the ready list, the pending-stream list).
 */
#ifndef MOQ_QUIC_QUIC_INT_H
#define MOQ_QUIC_QUIC_INT_H

#include "quic.h"

#include <string.h>

#include "moq_heapacct.h"

#include <wolfssl/options.h>
#include <wolfssl/ssl.h>
#include <wolfssl/wolfcrypt/random.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

/* At most this many ALPN ids in a config. */
#define QUIC_ALPN_MAX_IDS 16
/* CIDs one connection can have registered (ngtcp2 keeps <= 8 of its own +
 * the client-chosen ones). */
#define QUIC_CONN_MAX_CIDS 12
/* Peer stateless reset tokens kept per connection. */
#define QUIC_CONN_MAX_TOKENS 8
/* Size of a queued stateless reply slot (VN, Retry, reset, CLOSE). */
#define QUIC_SL_SLOT 512
/* RFC 9000, 10.3: a stateless reset is at least 21 bytes (1 + 4 unpredictable
 * + 16 token); ngtcp2 wants >= 5 random bytes, so >= 22. Triggers of up to
 * 43 bytes are answered one byte shorter (10.3, "Detecting a Stateless
 * Reset"), longer ones with a random length below the trigger. */
#define SRESET_MIN_LEN       (1 + NGTCP2_MIN_STATELESS_RESET_RANDLEN + NGTCP2_STATELESS_RESET_TOKENLEN)
#define SRESET_SHORT_TRIGGER 43

enum conn_state {
	CS_HANDSHAKE = 0,
	CS_ESTABLISHED,
	CS_CLOSING,  /* we sent CONNECTION_CLOSE (RFC 9000, 10.2.1) */
	CS_DRAINING, /* the peer closed (RFC 9000, 10.2.2) */
	CS_DEAD,     /* to be freed */
};

struct sq_ent {
	const uint8_t *base;
	size_t len;
};

#define STRM_INL 4u /* entries inside the stream record */

/* A stream's send queue of caller memory, and its bookkeeping. */
struct quic_strm {
	int64_t id;
	struct sq_ent *ents; /* [head, n) live entries */
	uint32_t cap, head, n;
	uint32_t send_idx;  /* entry holding sent_off */
	size_t send_pos;    /* offset in that entry */
	uint64_t head_off;  /* stream offset of ents[head] */
	uint64_t end_off;   /* end of queued data */
	uint64_t sent_off;  /* handed to ngtcp2 */
	uint64_t acked_off; /* acknowledged contiguously */
	uint8_t fin_queued, fin_sent, wr_closed, blocked, in_pend, local_reset;
	uint8_t urgency; /* pending class, 0 = most urgent */
	struct quic_strm *pnext, *pprev;
	void *app; /* moq_quic_stream_set_app */
	/* a short stream's entries (an audio frame's group: header, size,
	 * payload) live here, not in an array of their own: one cache miss
	 * less per write, send and acknowledgement (strm_vecs and strm_ack
	 * were 18% of a worker at 5,000 subscribers, mostly misses) */
	struct sq_ent inl[STRM_INL];
};

/* The entry array is the record's own (not to be freed or realloc'd). */
static inline int strm_ents_inline(const struct quic_strm *s)
{
	return s->ents == s->inl;
}

/* Heap bytes of @s's entry array (0 when inline). */
static inline uint64_t strm_ents_bytes(const struct quic_strm *s)
{
	return strm_ents_inline(s) ? 0 : (uint64_t)s->cap * sizeof(*s->ents);
}

struct cid_key {
	uint8_t len;
	uint8_t id[NGTCP2_MAX_CIDLEN];
};

/* A hash table from byte strings (CIDs, reset tokens) to connections: a
 * key and its connection in one 32-byte entry (a lookup per datagram reads
 * one line; as two arrays it read two). */
struct ktab_ent {
	struct cid_key k;
	struct moq_quic_conn *c;
};

struct ktab {
	struct ktab_ent *ents;
	uint32_t cap, n;
	uint32_t max_cap; /* the bound cap doubles up to (cid.c) */
};

struct moq_quic_conn {
	struct moq_quic_endpoint *ep;
	ngtcp2_conn *q;
	WOLFSSL *ssl;
	uint32_t tls_gen; /* ep->tls_gen when ssl was made from ep->ctx */
	ngtcp2_crypto_conn_ref ref;
	void *user;
	/* this connection's callbacks: the endpoint's until
	 * moq_quic_conn_set_callbacks hands it to another layer */
	const struct moq_quic_callbacks *cb;
	int server;
	enum conn_state state;
	/* what a datagram for a handed-off connection reads here, in the line
	 * of @state: the fast path (handoff.c), @fp once the engine serves
	 * this connection (q and ssl are NULL then, the streams are the
	 * engine's) */
	struct fp_conn *fp;
	uint64_t bytes_recv;
	int notified;  /* conn_closed was called */
	int half_open; /* counted in ep half_open */
	int in_ng;     /* inside an ngtcp2 call (callbacks may run) */
	int close_req; /* app closed during a callback: finish after */
	uint64_t close_code;
	char close_reason[64];
	int got_sreset;
	int cb_failed;
	uint32_t addr_slot_valid;
	struct moq_quic_addr counted_addr; /* counted in ep->atab (addr_slot_valid) */
	struct moq_quic_addr local, remote;
	const char *alpn; /* negotiated: one of ep->alpn[] (8 B, not 256), or NULL */

	/* CIDs registered in the endpoint table for this connection. */
	struct cid_key cids[QUIC_CONN_MAX_CIDS];
	uint32_t ncids;

	/* the peer's stateless reset tokens, registered in ep->ttab */
	uint8_t tokens[QUIC_CONN_MAX_TOKENS][NGTCP2_STATELESS_RESET_TOKENLEN];
	uint32_t ntokens;

	/* streams: map by id (open addressing) + list of streams to send */
	struct quic_strm **smap;
	uint32_t smap_cap, smap_n;
	struct quic_strm *pend_head[MOQ_QUIC_URGENCY_LEVELS], *pend_tail[MOQ_QUIC_URGENCY_LEVELS];
	uint32_t npend;
	uint8_t pend_mask; /* bit u: class u has pending streams */
	/* peer streams closed whose slots are not granted again yet (conn.c,
	 * stream_close_cb: MAX_STREAMS in batches) */
	uint32_t owed_uni, owed_bidi;
	/* a timer was handled since ngtcp2 last said it had nothing to send
	 * (send.c: write until it says so) */
	uint8_t expired;
	/* a heap expiry was handled and no write has visited since
	 * (stats.timer_idle) */
	uint8_t exp_check;
	/* the time of the last ngtcp2_conn_handle_expiry (timer.c, ng_expiry) */
	uint64_t exp_ts;

	/* ready list (something may be sent) */
	struct moq_quic_conn *rnext, *rprev;
	int in_ready;

	/* timer heap */
	uint32_t hidx;
	uint64_t hkey;
	uint64_t deadline; /* closing / draining end */

	/* CONNECTION_CLOSE kept for the closing period */
	uint8_t *close_buf;
	size_t close_len;
	int close_pending;
	uint32_t closing_rx;

	/* all-connections list */
	struct moq_quic_conn *anext, *aprev;

	uint64_t bytes_sent;
	uint64_t key_updates;

	/* @fp (below, beside @state): @fpkeys, the 1-RTT secrets captured at
	 * install (server, config fastpath), freed at the handoff or with
	 * the connection */
	struct moq_quic_light_keys *fpkeys;
	uint8_t fp_ok;    /* moq_quic_conn_allow_handoff was called */
	uint8_t fp_final; /* refused for good: stays on ngtcp2 */
	struct quic_dgq *dq; /* queued datagrams (dgram.c), NULL until used */
};

/* dgram.c: the datagram queue (moq_quic_dgram_send) */
int dgram_pending(const struct moq_quic_conn *c);
ngtcp2_ssize dgram_write(struct moq_quic_conn *c, ngtcp2_path *path, ngtcp2_pkt_info *pi,
                         uint8_t *dest, size_t cap, uint64_t now, int *accepted);
void dgram_recv(struct moq_quic_conn *c, const uint8_t *data, size_t len);
void dgram_free(struct moq_quic_conn *c);
/* the peer negotiated datagrams (and so did we) */
int dgram_negotiated(const struct moq_quic_conn *c);
/* handoff.c, after the import: the queue moves to the engine's */
void dgram_hand_over(struct moq_quic_conn *c);

struct sl_pkt {
	uint8_t buf[QUIC_SL_SLOT];
	size_t len;
	struct moq_quic_addr local, remote;
};

struct moq_quic_endpoint {
	struct moq_quic_config cfg;
	char *alpn[QUIC_ALPN_MAX_IDS];
	size_t alpn_len[QUIC_ALPN_MAX_IDS];
	size_t alpn_count;
	uint8_t alpn_wire[QUIC_ALPN_MAX_IDS * 256];
	size_t alpn_wire_len;
	char alpn_csv[QUIC_ALPN_MAX_IDS * 256]; /* "a,b,c" for wolfSSL_UseALPN */
	char *cert_file, *key_file, *ca_file, *server_name;

	WOLFSSL_CTX *ctx; /* for new connections; each WOLFSSL holds a ref */
	uint32_t tls_gen; /* bumped when reload_cert replaces ctx */
	WC_RNG rng;
	uint8_t secret[MOQ_QUIC_SECRET_LEN];
	uint8_t fp[32];
	int have_fp;
	uint64_t hash_key;

	ngtcp2_callbacks cbs;
	ngtcp2_mem mem; /* size-class cache handed to ngtcp2 */
	void *mem_cache;

	struct ktab ctab; /* CID -> connection */
	struct ktab ttab; /* peer stateless reset token -> connection */

	/* source -> connection count (addr.c): cfg.addr_table, or the
	 * endpoint's own (@atab_own) */
	struct moq_quic_addr_table *atab;
	int atab_own;

	/* timers */
	struct moq_quic_conn **heap;
	uint32_t heap_n, heap_cap;

	/* ready list */
	struct moq_quic_conn *rhead, *rtail;
	size_t rcount; /* connections on the ready list */

	/* spare stream records, with their entry arrays (strm_new) */
	struct quic_strm *sfree;
	uint32_t nsfree;
	uint32_t nslive, nslive_peak; /* stream records in use, and their peak */
	uint32_t nsfree_low;          /* fewest spares since the last strm_trim */
	uint64_t mem_trimmed;         /* last mem_trim */
	uint64_t sfree_bytes;         /* the spares' records and entry arrays (stream.c) */

	/* every connection */
	struct moq_quic_conn *ahead;

	/* stateless replies */
	struct sl_pkt *slq;
	uint32_t slq_cap, slq_head, slq_n;

	/* stateless reset token bucket (RFC 9000, 10.3: rate-limited) */
	double sr_tokens;
	uint64_t sr_ts;

	struct moq_quic_stats st;
	uint64_t now; /* latest timestamp the caller gave */

	/* the fast path engine (config.fastpath; handoff.c) and the scratch
	 * one export fills */
	struct fp_engine *fpe;
	struct hand_scratch *hscratch;
};

/* ---------------------------------------------------------------- hashing */

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static inline uint64_t hash_bytes(uint64_t key, const uint8_t *p, size_t len)
{
	uint64_t h = key ^ (len * 0x9e3779b97f4a7c15ULL);
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t w;

		memcpy(&w, p + i, 8);
		h = mix64(h ^ w);
	}
	if (i < len) {
		uint64_t w = 0;

		memcpy(&w, p + i, len - i);
		h = mix64(h ^ w ^ 0x5bd1e995);
	}
	return h;
}

/* ------------------------------------------------------------ ready list */

static inline void ready_add(struct moq_quic_conn *c)
{
	struct moq_quic_endpoint *ep = c->ep;

	if (c->in_ready || c->state == CS_DEAD || c->state == CS_DRAINING)
		return;
	c->in_ready = 1;
	ep->rcount++;
	c->rnext = NULL;
	c->rprev = ep->rtail;
	if (ep->rtail)
		ep->rtail->rnext = c;
	else
		ep->rhead = c;
	ep->rtail = c;
}

static inline void ready_del(struct moq_quic_conn *c)
{
	struct moq_quic_endpoint *ep = c->ep;

	if (!c->in_ready)
		return;
	if (c->rprev)
		c->rprev->rnext = c->rnext;
	else
		ep->rhead = c->rnext;
	if (c->rnext)
		c->rnext->rprev = c->rprev;
	else
		ep->rtail = c->rprev;
	ep->rcount--;
	c->in_ready = 0;
	c->rnext = c->rprev = NULL;
}
/* ------------------------------------------------------ pending streams */

static inline void pend_add(struct moq_quic_conn *c, struct quic_strm *s)
{
	if (s->in_pend || s->blocked || s->wr_closed)
		return;
	s->in_pend = 1;
	s->pnext = NULL;
	s->pprev = c->pend_tail[s->urgency];
	if (c->pend_tail[s->urgency])
		c->pend_tail[s->urgency]->pnext = s;
	else
		c->pend_head[s->urgency] = s;
	c->pend_tail[s->urgency] = s;
	c->npend++;
	c->pend_mask |= (uint8_t)(1u << s->urgency);
}

static inline void pend_del(struct moq_quic_conn *c, struct quic_strm *s)
{
	if (!s->in_pend)
		return;
	if (s->pprev)
		s->pprev->pnext = s->pnext;
	else
		c->pend_head[s->urgency] = s->pnext;
	if (s->pnext)
		s->pnext->pprev = s->pprev;
	else
		c->pend_tail[s->urgency] = s->pprev;
	if (c->pend_head[s->urgency] == NULL)
		c->pend_mask &= (uint8_t) ~(1u << s->urgency);
	s->in_pend = 0;
	s->pnext = s->pprev = NULL;
	c->npend--;
}

static inline int strm_has_unsent(const struct quic_strm *s)
{
	return s->sent_off < s->end_off || (s->fin_queued && !s->fin_sent);
}

/* ---------------------------------------------- shared between the files */

/* alloc.c: the size-class cache handed to ngtcp2 as ep->mem. */
int mem_init(struct moq_quic_endpoint *ep);
void mem_fini(struct moq_quic_endpoint *ep);
uint64_t mem_cached_bytes(const struct moq_quic_endpoint *ep); /* in the free lists */
/* Every MEM_TRIM_NS: half of the spares no use took since the last trim
 * (ngtcp2's free lists, spare stream records) go back to libc (alloc.c). */
void mem_trim(struct moq_quic_endpoint *ep, uint64_t now);
void strm_trim(struct moq_quic_endpoint *ep); /* the stream records' part (stream.c) */

/* cid.c: byte strings (CIDs, reset tokens) -> connections. */
int ktab_init(struct ktab *t, uint64_t entries);
void ktab_fini(struct ktab *t);
void ktab_prefetch(const struct moq_quic_endpoint *ep, const struct ktab *t, const uint8_t *id,
                   size_t len);
struct moq_quic_conn *ktab_find(const struct moq_quic_endpoint *ep, const struct ktab *t,
                                const uint8_t *id, size_t len);
struct moq_quic_conn *ctab_find(const struct moq_quic_endpoint *ep, const uint8_t *id, size_t len);
void conn_add_token(struct moq_quic_conn *c, const uint8_t *token);
void conn_del_token(struct moq_quic_conn *c, const uint8_t *token);
int conn_add_cid(struct moq_quic_conn *c, const uint8_t *id, size_t len);
void conn_del_cid(struct moq_quic_conn *c, const uint8_t *id, size_t len);

/* addr.c: connections per remote IP. */

/* timer.c: the timer heap. */
void heap_remove(struct moq_quic_endpoint *ep, struct moq_quic_conn *c);
void conn_update_timer(struct moq_quic_conn *c);
void conn_update_timer_sent(struct moq_quic_conn *c, uint64_t now);

/* stream.c: stream records. */
/* Free @s and its entry array, uncounted from heap kind @k (stream.c). */
void strm_heap_free(struct quic_strm *s, enum moq_heap_kind k);
struct quic_strm *strm_new(struct moq_quic_conn *c, int64_t id);
void strm_free(struct moq_quic_conn *c, struct quic_strm *s);
void strm_ack(struct quic_strm *s, uint64_t acked);
struct quic_strm *strm_find(const struct moq_quic_conn *c, int64_t id);

/* close.c: closing, draining and freeing connections. */
void conn_notify(struct moq_quic_conn *c, struct moq_quic_close_info *info);
void conn_half_open_done(struct moq_quic_conn *c);
void conn_start_closing(struct moq_quic_conn *c, const ngtcp2_connection_close_error *e,
                        uint64_t now);
void conn_fail(struct moq_quic_conn *c, int rv, uint64_t now);
void conn_after_ng(struct moq_quic_conn *c, uint64_t now);
void conn_free(struct moq_quic_conn *c);

/* conn.c: ngtcp2 glue. */
void make_cid(struct moq_quic_endpoint *ep, ngtcp2_cid *cid);
void setup_callbacks(struct moq_quic_endpoint *ep);
void settings_init(struct moq_quic_endpoint *ep, ngtcp2_settings *s, uint64_t now);
void params_init(struct moq_quic_endpoint *ep, ngtcp2_transport_params *p);
struct moq_quic_conn *conn_alloc(struct moq_quic_endpoint *ep, const struct moq_quic_addr *local,
                                 const struct moq_quic_addr *remote, void *user);
void path_of(ngtcp2_path *path, const struct moq_quic_addr *local,
             const struct moq_quic_addr *remote);

/* stateless.c: replies without connection state, queued for _send. */
void send_version_negotiation(struct moq_quic_endpoint *ep, const ngtcp2_version_cid *vc,
                              size_t dgram_len, const struct moq_quic_addr *local,
                              const struct moq_quic_addr *remote);
void send_retry(struct moq_quic_endpoint *ep, const ngtcp2_pkt_hd *hd, size_t dgram_len,
                const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                uint64_t now);
void send_stateless_close(struct moq_quic_endpoint *ep, const ngtcp2_pkt_hd *hd, uint64_t code,
                          size_t dgram_len, const struct moq_quic_addr *local,
                          const struct moq_quic_addr *remote);
void send_stateless_reset(struct moq_quic_endpoint *ep, const uint8_t *dcid, size_t dcidlen,
                          size_t dgram_len, const struct moq_quic_addr *local,
                          const struct moq_quic_addr *remote, uint64_t now);

/* handoff.c: the fast path behind the same calls (issue 23). */
struct fp_conn;
struct fp_engine;
struct hand_scratch;
int hand_init(struct moq_quic_endpoint *ep);
void hand_fini(struct moq_quic_endpoint *ep);
void hand_try(struct moq_quic_conn *c, uint64_t now);
/* hand_export: @c's 1-RTT state as an engine import (*@imp: the endpoint's
 * scratch, valid until the next export; ngtcp2 keeps the connection), for
 * hand_try and tests/test_fastpath.c's interop. Returns 0, or MOQ_ERR_STATE
 * with *@why the reason it cannot move now. */
struct fp_import;
int hand_export(struct moq_quic_conn *c, struct fp_import **imp, enum moq_quic_handoff_reason *why);
void hand_recv(struct moq_quic_conn *c, const uint8_t *data, size_t len,
               const struct moq_quic_addr *local, const struct moq_quic_addr *remote, uint64_t now);
int hand_recv_unknown(struct moq_quic_endpoint *ep, const uint8_t *data, size_t len,
                      const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                      uint64_t now);
size_t hand_send(struct moq_quic_endpoint *ep, struct moq_quic_pkt *pkts, size_t n, uint64_t now);
int hand_timers(struct moq_quic_endpoint *ep, uint64_t now);
uint64_t hand_next_expiry(const struct moq_quic_endpoint *ep);
void hand_stats(const struct moq_quic_endpoint *ep, struct moq_quic_stats *out);
int hand_pending(const struct moq_quic_endpoint *ep);
void hand_conn_free(struct moq_quic_conn *c);
int hand_close(struct moq_quic_conn *c, uint64_t app_err, const char *reason);
uint64_t hand_cwnd(const struct moq_quic_conn *c);
void hand_info(const struct moq_quic_conn *c, struct moq_quic_conn_info *out);
int hand_update_key(struct moq_quic_conn *c);
int hand_stream_open(struct moq_quic_conn *c, int bidi, int64_t *sid);
long hand_stream_write(struct moq_quic_conn *c, int64_t sid, const struct iovec *iov, size_t iovcnt,
                       int fin);
long hand_stream_queued(const struct moq_quic_conn *c, int64_t sid);
int hand_stream_reset(struct moq_quic_conn *c, int64_t sid, uint64_t app_err);
int hand_stream_stop_sending(struct moq_quic_conn *c, int64_t sid, uint64_t app_err);
int hand_stream_set_urgency(struct moq_quic_conn *c, int64_t sid, uint8_t urgency);
int hand_stream_set_app(struct moq_quic_conn *c, int64_t sid, void *app);

/* export.c: capture a server connection's 1-RTT secrets for the handoff. */
int quic_capture_server(struct moq_quic_conn *c);

/* tls.c */
int quic_tls_ctx_new(struct moq_quic_endpoint *ep);
void quic_tls_ctx_free(struct moq_quic_endpoint *ep);
int quic_tls_conn_new(struct moq_quic_conn *c);
void quic_tls_conn_free(struct moq_quic_conn *c);
void quic_tls_conn_alpn(struct moq_quic_conn *c);
int quic_rng_init(struct moq_quic_endpoint *ep);
void quic_rng_free(struct moq_quic_endpoint *ep);
void quic_rand(struct moq_quic_endpoint *ep, uint8_t *dst, size_t len);
void quic_aead_init(void);
int quic_encrypt_cb(uint8_t *dest, const ngtcp2_crypto_aead *aead,
                    const ngtcp2_crypto_aead_ctx *aead_ctx, const uint8_t *plaintext,
                    size_t plaintextlen, const uint8_t *nonce, size_t noncelen, const uint8_t *aad,
                    size_t aadlen);
/* The endpoint whose ngtcp2_conn_read_pkt runs on this thread (endpoint.c),
 * for the decrypt callback's ACK count (conn.c; ngtcp2's decrypt callback
 * carries no user pointer). NULL outside a read. */
extern __thread struct moq_quic_endpoint *quic_rx_ep;

int quic_decrypt_cb(uint8_t *dest, const ngtcp2_crypto_aead *aead,
                    const ngtcp2_crypto_aead_ctx *aead_ctx, const uint8_t *ciphertext,
                    size_t ciphertextlen, const uint8_t *nonce, size_t noncelen, const uint8_t *aad,
                    size_t aadlen);
int quic_hp_mask_cb(uint8_t *dest, const ngtcp2_crypto_cipher *hp,
                    const ngtcp2_crypto_cipher_ctx *hp_ctx, const uint8_t *sample);

#endif /* MOQ_QUIC_QUIC_INT_H */
