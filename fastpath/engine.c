/* SPDX-License-Identifier: MIT */
/*
 * engine.c: the per-lcore engine (fastpath.h): pools, the CID and token
 * tables, the ready list, the timer wheel, import and routing.
 */
#include "fp_int.h"

#include <stdlib.h>
#include <string.h>

/* Defaults (fastpath.h, struct fp_engine_config). */
#define DEF_MAX_CONNS  1024u
#define DEF_SENT_RING  256u
#define DEF_REORDER    4096u
#define DEF_TICK_NS    1000000ull
#define DEF_STREAM_WIN (256u * 1024u)
#define DEF_CONN_WIN   (1024u * 1024u)
/* Wheel slots: 4096 ticks of 1 ms cover the ACK delay, loss and PTO
 * timers in one round; idle timeouts take a few rounds. */
#define WHEEL_SLOTS 4096u
/* Reassembly buffers: one per 8 connections (a subscriber sends little,
 * and only data out of order takes one; without one a frame beyond the
 * delivered prefix is not acknowledged and comes again). */
#define RBUF_PER_CONN_DIV 8u

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

struct fp_engine *fp_engine_new(const struct fp_engine_config *cfg, int *err)
{
	struct fp_engine *e;
	uint32_t i, ntab;
	int rv = MOQ_ERR_NOMEM;

	if (cfg == NULL) {
		rv = MOQ_ERR_CONFIG;
		goto out;
	}
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		goto out;
	e->cfg = *cfg;
	e->cb = cfg->cb;
	if (!e->cfg.max_conns)
		e->cfg.max_conns = DEF_MAX_CONNS;
	if (!e->cfg.max_streams)
		e->cfg.max_streams = 16 * e->cfg.max_conns;
	if (!e->cfg.max_chunks)
		e->cfg.max_chunks = 64 * e->cfg.max_conns;
	if (!e->cfg.sent_ring)
		e->cfg.sent_ring = DEF_SENT_RING;
	if (!e->cfg.reorder_bytes)
		e->cfg.reorder_bytes = DEF_REORDER;
	if (!e->cfg.wheel_tick_ns)
		e->cfg.wheel_tick_ns = DEF_TICK_NS;
	if (!e->cfg.stream_window)
		e->cfg.stream_window = DEF_STREAM_WIN;
	if (!e->cfg.conn_window)
		e->cfg.conn_window = DEF_CONN_WIN;
	if (e->cfg.max_conns > (1u << 27) - 2 || /* fp_hent.conn */
	    (e->cfg.sent_ring & (e->cfg.sent_ring - 1)) || e->cfg.sent_ring < 16 ||
	    e->cfg.sent_ring > 32768 || (e->cfg.reorder_bytes % 64) ||
	    e->cfg.reorder_bytes > 65536) {
		rv = MOQ_ERR_CONFIG;
		goto fail_e;
	}
	if (fp_wheel_init(&e->wheel, WHEEL_SLOTS, e->cfg.wheel_tick_ns, 0) < 0)
		goto fail_e;
	e->conns = calloc(e->cfg.max_conns, sizeof(*e->conns));
	/* (cache-line aligned records: their first lines are what a packet
	 * touches, fp_int.h) */
	e->colds = aligned_alloc(64, (size_t)e->cfg.max_conns * sizeof(*e->colds));
	if (e->colds)
		memset(e->colds, 0, (size_t)e->cfg.max_conns * sizeof(*e->colds));
	e->rings = calloc((size_t)e->cfg.max_conns * e->cfg.sent_ring, sizeof(*e->rings));
	e->streams = calloc(e->cfg.max_streams, sizeof(*e->streams));
	e->chunks = calloc(e->cfg.max_chunks, sizeof(*e->chunks));
	/* intervals (acknowledged out of order, lost) exist only under loss or
	 * reordering: one per queued chunk (was two: 1.5 KB a connection) */
	e->nivls = e->cfg.max_chunks;
	/* fp_ivl_alloc keeps one node for every stream record (a stream
	 * holding none can always record its first range), so at least that
	 * many and a few to spare */
	if (e->nivls < e->cfg.max_streams + e->cfg.max_streams / 4 + 4)
		e->nivls = e->cfg.max_streams + e->cfg.max_streams / 4 + 4;
	e->ivls = calloc(e->nivls, sizeof(*e->ivls));
	/* further ranges of packets carrying more than one stream (a packet
	 * that would need one more waits: send.c) */
	e->nsranges = 12 * e->cfg.max_conns;
	e->sranges = calloc(e->nsranges, sizeof(*e->sranges));
	e->nrbufs = e->cfg.max_conns / RBUF_PER_CONN_DIV + 4;
	e->rbuf_bytes = e->cfg.reorder_bytes + e->cfg.reorder_bytes / 8;
	e->rbufs = calloc(e->nrbufs, e->rbuf_bytes);
	/* at most FP_MAX_SCIDS CIDs (and peer tokens: 1 + FP_MAX_PEER_CIDS)
	 * per connection, a few in practice (quic/ issues 2-4): sized for all
	 * of them, rounded up to a power of two (was twice that: 1.5 KB a
	 * connection; linear probing stays short while it is below ~3/4
	 * full, and a connection holding every CID it may is ~60 %) */
	ntab = pow2_at_least(e->cfg.max_conns * (FP_MAX_PEER_CIDS + 1) + FP_MAX_SCIDS);
	e->cid_tab = calloc(ntab, sizeof(*e->cid_tab));
	e->tok_tab = calloc(ntab, sizeof(*e->tok_tab));
	e->tab_mask = ntab - 1;
	if (!e->conns || !e->colds || !e->rings || !e->streams || !e->chunks || !e->ivls ||
	    !e->sranges || !e->rbufs || !e->cid_tab || !e->tok_tab)
		goto fail_pools;
	/* free lists, each threaded through the records' own next fields */
	for (i = 0; i < e->cfg.max_conns; i++)
		e->conns[i].ready_next = i + 1 < e->cfg.max_conns ? i + 1 : FP_NONE32;
	e->free_conn = 0;
	for (i = 0; i < e->cfg.max_streams; i++)
		e->streams[i].next = i + 1 < e->cfg.max_streams ? i + 1 : FP_NONE32;
	e->free_stream = 0;
	for (i = 0; i < e->cfg.max_chunks; i++)
		e->chunks[i].next = i + 1 < e->cfg.max_chunks ? i + 1 : FP_NONE32;
	e->free_chunk = 0;
	for (i = 0; i < e->nivls; i++)
		e->ivls[i].next = i + 1 < e->nivls ? i + 1 : FP_NONE32;
	e->free_ivl = 0;
	e->nfree_ivl = e->nivls;
	for (i = 0; i < e->nsranges; i++)
		e->sranges[i].next = i + 1 < e->nsranges ? i + 1 : FP_NONE32;
	e->free_srange = 0;
	for (i = 0; i < e->nrbufs; i++)
		*(uint32_t *)(e->rbufs + (size_t)i * e->rbuf_bytes) =
		        i + 1 < e->nrbufs ? i + 1 : FP_NONE32;
	e->free_rbuf = 0;
	e->ready_head = e->ready_tail = FP_NONE32;
	if (err)
		*err = 0;
	return e;
fail_pools:
	free(e->conns);
	free(e->colds);
	free(e->rings);
	free(e->streams);
	free(e->chunks);
	free(e->ivls);
	free(e->sranges);
	free(e->rbufs);
	free(e->cid_tab);
	free(e->tok_tab);
	fp_wheel_fini(&e->wheel);
fail_e:
	free(e);
out:
	if (err)
		*err = rv;
	return NULL;
}

void fp_engine_free(struct fp_engine *e)
{
	uint32_t i;

	if (e == NULL)
		return;
	for (i = 0; i < e->cfg.max_conns; i++) {
		struct fp_conn *c = &e->conns[i];
		if (c->e == NULL)
			continue;
		fp_conn_drop(c);
	}
	free(e->conns);
	free(e->colds);
	free(e->rings);
	free(e->streams);
	free(e->chunks);
	free(e->ivls);
	free(e->sranges);
	free(e->rbufs);
	free(e->cid_tab);
	free(e->tok_tab);
	fp_wheel_fini(&e->wheel);
	free(e);
}

/* ---- tables ------------------------------------------------------------ */

static inline __attribute__((always_inline)) uint32_t hash_key(const uint8_t *k, uint8_t len)
{
	/* our CIDs (after quic/'s worker byte) and the tokens are random bytes,
	 * but a CID generator may keep some bytes fixed (a worker or server id,
	 * a counter): mix the first and the last 8 of them (fewer: all). With
	 * the last 8 alone, CIDs that differ only in their first bytes all fell
	 * into one probe run (bench_fastpath --conns 100: 1,240 instructions
	 * per ACK in tab_slot alone) */
	uint64_t v = 0, w = 0;

	if (len >= 8) {
		memcpy(&v, k + len - 8, 8);
		memcpy(&w, k, 8);
		v ^= w * 0xc2b2ae3d27d4eb4full;
	} else {
		memcpy(&v, k, len);
	}
	v ^= len;
	v *= 0x9e3779b97f4a7c15ull;
	return (uint32_t)(v >> 32);
}

int fp_tab_add(struct fp_engine *e, struct fp_hent *t, const uint8_t *key, uint8_t len,
               uint32_t conn)
{
	uint32_t i = hash_key(key, len) & e->tab_mask, n;

	for (n = 0; n <= e->tab_mask; n++, i = (i + 1) & e->tab_mask) {
		if (t[i].conn == 0)
			break;
		if (t[i].len == len && memcmp(t[i].key, key, len) == 0)
			return MOQ_ERR_EXISTS;
	}
	if (n > e->tab_mask)
		return MOQ_ERR_LIMIT;
	t[i].conn = conn + 1;
	t[i].len = len;
	memcpy(t[i].key, key, len);
	return 0;
}

static inline __attribute__((always_inline)) int key_eq(const uint8_t *a, const uint8_t *b,
                                                        uint8_t len)
{
	uint64_t x, y, u, v;

	if (len != 16)
		return memcmp(a, b, len) == 0;
	/* our CIDs and the tokens: two loads each */
	memcpy(&x, a, 8);
	memcpy(&y, a + 8, 8);
	memcpy(&u, b, 8);
	memcpy(&v, b + 8, 8);
	return ((x ^ u) | (y ^ v)) == 0;
}

static inline __attribute__((always_inline)) uint32_t
tab_slot(const struct fp_engine *e, const struct fp_hent *t, const uint8_t *key, uint8_t len)
{
	uint32_t i = hash_key(key, len) & e->tab_mask, n;

	for (n = 0; n <= e->tab_mask; n++, i = (i + 1) & e->tab_mask) {
		if (t[i].conn == 0)
			return FP_NONE32;
		if (t[i].len == len && key_eq(t[i].key, key, len))
			return i;
	}
	return FP_NONE32;
}

void fp_tab_del(struct fp_engine *e, struct fp_hent *t, const uint8_t *key, uint8_t len)
{
	uint32_t i = tab_slot(e, t, key, len), j, n;

	if (i == FP_NONE32)
		return;
	/* backward-shift deletion (linear probing): the entries after @i in
	 * its run move up unless that would put one before its home slot, so
	 * no tombstone is left. Tombstones only ever accumulated (a lookup of
	 * an unknown CID or token, as every stray short-header datagram makes,
	 * walks to an empty slot): a relay with connections coming and going
	 * filled the tables with them */
	j = i;
	for (n = 0; n < e->tab_mask; n++) {
		uint32_t k;
		j = (j + 1) & e->tab_mask;
		if (t[j].conn == 0)
			break;
		k = hash_key(t[j].key, t[j].len) & e->tab_mask;
		/* j stays when its home k is cyclically in (i, j] */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		t[i] = t[j];
		i = j;
	}
	t[i].conn = 0;
}

/* fp_tab_find of a 16-byte key (our CIDs): tab_slot with the length a
 * constant, so hash_key and key_eq fold to a few loads inline (the routing
 * of every packet; bench_fastpath: ~120 instructions per ACK through their
 * calls, ~35 inline) */
static uint32_t tab_find16(const struct fp_engine *e, const struct fp_hent *t, const uint8_t *key)
{
	uint32_t i = tab_slot(e, t, key, 16);

	return i == FP_NONE32 ? FP_NONE32 : (uint32_t)t[i].conn - 1;
}

uint32_t fp_tab_find(const struct fp_engine *e, const struct fp_hent *t, const uint8_t *key,
                     uint8_t len)
{
	uint32_t i = tab_slot(e, t, key, len);

	return i == FP_NONE32 ? FP_NONE32 : (uint32_t)t[i].conn - 1;
}

void fp_len_ref(struct fp_engine *e, uint8_t len, int delta)
{
	uint32_t i;

	e->len_in_use[len] = (uint32_t)((int)e->len_in_use[len] + delta);
	/* the lengths in use, for fp_engine_recv to try (one in practice) */
	e->nlens = 0;
	for (i = FP_CID_MAX; i >= 1; i--)
		if (e->len_in_use[i] && e->nlens < sizeof(e->lens))
			e->lens[e->nlens++] = (uint8_t)i;
}

/* ---- interval nodes --------------------------------------------------- */

/*
 * A node for a stream's interval lists. @holder: the stream holds one
 * already (in either list). max_streams nodes are held back for streams
 * that hold none: a holder gets one only beyond them, else NONE (the caller
 * coarsens into a node it holds: fp_ivl_add), while a stream holding none
 * always gets one. Invariant: free nodes >= streams holding none, since
 * only holders draw on the rest; so no range is ever forgotten.
 */
uint32_t fp_ivl_alloc(struct fp_engine *e, int holder)
{
	uint32_t i = e->free_ivl;

	if (i == FP_NONE32 || (holder && e->nfree_ivl <= e->cfg.max_streams)) {
		e->st.pool_exhausted++;
		return FP_NONE32;
	}
	e->free_ivl = e->ivls[i].next;
	e->ivls[i].next = FP_NONE32;
	e->nfree_ivl--;
	return i;
}

void fp_ivl_free_list(struct fp_engine *e, uint32_t head)
{
	while (head != FP_NONE32) {
		uint32_t n = e->ivls[head].next;
		fp_ivl_put(e, head);
		head = n;
	}
}

/* ---- ready list and timers --------------------------------------------- */

void fp_ready_add(struct fp_conn *c)
{
	struct fp_engine *e = c->e;
	uint32_t i = conn_idx(c);

	if (c->on_ready)
		return;
	c->on_ready = 1;
	c->ready_next = FP_NONE32;
	c->ready_prev = e->ready_tail;
	if (e->ready_tail != FP_NONE32)
		e->conns[e->ready_tail].ready_next = i;
	else
		e->ready_head = i;
	e->ready_tail = i;
}

void fp_ready_del(struct fp_conn *c)
{
	struct fp_engine *e = c->e;

	if (!c->on_ready)
		return;
	if (c->ready_prev != FP_NONE32)
		e->conns[c->ready_prev].ready_next = c->ready_next;
	else
		e->ready_head = c->ready_next;
	if (c->ready_next != FP_NONE32)
		e->conns[c->ready_next].ready_prev = c->ready_prev;
	else
		e->ready_tail = c->ready_prev;
	c->on_ready = 0;
	c->ready_next = c->ready_prev = FP_NONE32;
}

int fp_engine_pending(const struct fp_engine *e)
{
	return e->ready_head != FP_NONE32;
}

static void fire(struct fp_tnode *n, void *arg)
{
	struct fp_engine *e = arg;
	struct fp_conn *c = (struct fp_conn *)((char *)n - offsetof(struct fp_conn, tn));

	e->st.timers_run++;
	fp_conn_fire(c, e->wheel_now);
}

int fp_engine_timers(struct fp_engine *e, uint64_t now)
{
	/* fp_conn_fire gets @now, not the deadline */
	e->wheel_now = now;
	return fp_wheel_run(&e->wheel, now, fire, e);
}

uint64_t fp_engine_next_expiry(const struct fp_engine *e)
{
	return fp_wheel_next(&e->wheel);
}

void fp_engine_stats(const struct fp_engine *e, struct fp_stats *out)
{
	*out = e->st;
}

/* While one ready connection sends, the next ones load (a chain of misses
 * per connection otherwise): the one after @c, whose index @c's record
 * holds (its record, the cold lines a packet reads, its send keys), and
 * what @c's own send reads through pointers (its sent-packet slot, the
 * AEAD schedule, the first stream it sends from), @c's lines having been
 * asked for a connection earlier. */
static void send_prefetch(const struct fp_engine *e, const struct fp_conn *c)
{
	if (c->ready_next != FP_NONE32) {
		uint32_t i = c->ready_next;
		const struct fp_cold *x = &e->colds[i];

		for (size_t o = 0; o < sizeof(struct fp_conn); o += 64)
			__builtin_prefetch((const char *)&e->conns[i] + o);
		__builtin_prefetch(x);
		__builtin_prefetch((const char *)x + 64);
		__builtin_prefetch((const char *)x + 128);
		__builtin_prefetch(&x->keys.tx_aead);
		for (size_t o = 0; o < sizeof(x->keys.tx_hp); o += 64)
			__builtin_prefetch((const char *)&x->keys.tx_hp + o);
	}
	__builtin_prefetch(&c->ring[c->tx_pn & c->ring_mask]);
	fp_aes_prefetch(c->x->keys.tx_aead);
	if (c->send_head != FP_NONE32)
		__builtin_prefetch(&e->streams[c->send_head]);
}

int fp_engine_send(struct fp_engine *e, struct fp_pkt *pkts, size_t n, uint64_t now)
{
	size_t done = 0;
	uint32_t guard = e->cfg.max_conns + 1;

	while (done < n && e->ready_head != FP_NONE32 && guard-- > 0) {
		struct fp_conn *c = &e->conns[e->ready_head];
		int k;

		if (c->ready_next != FP_NONE32)
			send_prefetch(e, &e->conns[c->ready_next]);
		k = fp_conn_send(c, pkts + done, n - done, now);

		if (k > 0)
			done += (size_t)k;
		/* still ready (the burst ran out): round robin, to the tail */
		if (c->on_ready && c->ready_next != FP_NONE32) {
			fp_ready_del(c);
			fp_ready_add(c);
		} else if (c->on_ready && k <= 0) {
			fp_ready_del(c);
		}
	}
	return (int)done;
}

/* ---- routing ----------------------------------------------------------- */

int fp_engine_recv(struct fp_engine *e, const uint8_t *data, size_t len,
                   const struct fp_addr *local, const struct fp_addr *remote, uint64_t now)
{
	uint32_t ci = FP_NONE32;
	uint32_t l;

	if (e == NULL || data == NULL)
		return MOQ_ERR_INVAL;
	if (len < 1 + 1 || (data[0] & HDR_LONG))
		return MOQ_ERR_NOTFOUND; /* long headers are the endpoint's */
	/* the DCID length is that of our CIDs: try the lengths in use (one in
	 * practice: quic/ chooses MOQ_QUIC_CID_LEN, 16 bytes: looked up inline) */
	if (e->nlens == 1 && e->lens[0] == 16 && len >= 17)
		ci = tab_find16(e, e->cid_tab, data + 1);
	else
		for (l = 0; l < e->nlens && ci == FP_NONE32; l++)
			if (len >= 1u + e->lens[l])
				ci = fp_tab_find(e, e->cid_tab, data + 1, e->lens[l]);
	if (ci != FP_NONE32)
		return fp_conn_recv(&e->conns[ci], data, len, local, remote, now) == MOQ_ERR_INVAL
		               ? MOQ_ERR_INVAL
		               : 0;

	/* RFC 9000, 10.3.1: a datagram ending in a token of ours is a reset */
	if (len >= 21 && !(data[0] & HDR_LONG)) {
		ci = fp_tab_find(e, e->tok_tab, data + len - FP_TOKEN_LEN, FP_TOKEN_LEN);
		if (ci != FP_NONE32) {
			fp_conn_stateless_reset(&e->conns[ci], now);
			return 0;
		}
	}
	return MOQ_ERR_NOTFOUND;
}
