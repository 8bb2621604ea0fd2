/* SPDX-License-Identifier: MIT */
/*
 * stream.c: the session's streams: the stream-id map, pooled tx buffers
 * (kept until acknowledged), and opening, writing, resetting and refusing
 * a stream (docs/PROTOCOL.md, Streams).
 */
#include "moq.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "moq_int.h"

/* --------------------------------------------------------- stream map */

static uint32_t smap_slot(const struct smap *m, int64_t k)
{
	return (uint32_t)(((uint64_t)k * 0x9E3779B97F4A7C15ull) >> 32) & (m->cap - 1);
}

struct mstream *smap_get(const struct smap *m, int64_t k)
{
	if (!m->cap)
		return NULL;
	for (uint32_t i = smap_slot(m, k);; i = (i + 1) & (m->cap - 1)) {
		const struct smap_ent *e = &m->ents[i];
		if (!e->val)
			return NULL;
		if (e->key == k)
			return e->val;
	}
}

static int smap_put(struct smap *m, int64_t k, struct mstream *v);

static int smap_grow(struct smap *m)
{
	struct smap nm;
	uint32_t cap = m->cap ? m->cap * 2 : 64;

	nm.cap = cap;
	nm.used = 0;
	nm.ents = moq_heap_calloc(MOQ_HEAP_MOQ_SMAP, cap, sizeof(*nm.ents));
	if (!nm.ents)
		return MOQ_ERR_NOMEM;
	for (uint32_t i = 0; i < m->cap; i++)
		if (m->ents[i].val)
			smap_put(&nm, m->ents[i].key, m->ents[i].val);
	moq_heap_free(MOQ_HEAP_MOQ_SMAP, m->ents);
	*m = nm;
	return 0;
}

static int smap_put(struct smap *m, int64_t k, struct mstream *v)
{
	uint32_t i;

	if ((m->used + 1) * 2 > m->cap && smap_grow(m) < 0)
		return MOQ_ERR_NOMEM;
	for (i = smap_slot(m, k); m->ents[i].val; i = (i + 1) & (m->cap - 1))
		;
	m->ents[i].key = k;
	m->ents[i].val = v;
	m->used++;
	return 0;
}

void smap_del(struct smap *m, int64_t k)
{
	uint32_t i, j;

	if (!m->cap)
		return;
	for (i = smap_slot(m, k);; i = (i + 1) & (m->cap - 1)) {
		if (!m->ents[i].val)
			return;
		if (m->ents[i].key == k)
			break;
	}
	m->ents[i].val = NULL;
	m->used--;
	/* Backward-shift deletion keeps probe chains intact. */
	for (j = (i + 1) & (m->cap - 1); m->ents[j].val; j = (j + 1) & (m->cap - 1)) {
		uint32_t h = smap_slot(m, m->ents[j].key);
		bool move = (j > i) ? (h <= i || h > j) : (h <= i && h > j);
		if (move) {
			m->ents[i] = m->ents[j];
			m->ents[j].val = NULL;
			i = j;
		}
	}
}

/* ----------------------------------------------------------- tx buffers */

static void chunk_put(struct moq_session *s, struct txchunk *c)
{
	if (c->cap == TXCHUNK_DATA && s->pool_len < POOL_MAX) {
		c->next = s->pool;
		s->pool = c;
		moq_heap_move(MOQ_HEAP_TXCHUNK, MOQ_HEAP_MOQ_SPARE, c);
		s->pool_len++;
	} else {
		moq_heap_free(MOQ_HEAP_TXCHUNK, c);
	}
}

void tx_free(struct moq_session *s, struct txbuf *tb)
{
	struct txchunk *c = tb->head, *nx;

	for (; c; c = nx) {
		nx = c->next;
		chunk_put(s, c);
	}
	tb->head = tb->tail = NULL;
	tb->head_off = 0;
}

/* A control stream's bytes all come from its txbuf, so stream offsets are
 * txbuf offsets: chunks the peer acknowledged are released (a long-lived
 * announce stream does not grow with every ANNOUNCE it ever sent). */
void tx_release_acked(struct moq_session *s, struct txbuf *tb, uint64_t acked)
{
	while (tb->head && tb->head != tb->tail && tb->head_off + tb->head->len <= acked) {
		struct txchunk *c = tb->head;
		tb->head = c->next;
		tb->head_off += c->len;
		chunk_put(s, c);
	}
}

/* ----------------------------------------------------------- pool trim */

/* Spare pools give memory back when use falls (issue 28): of the spares a
 * pool held through a whole period (its low mark: no use took them), half
 * go back to libc; a pool in steady use keeps what it cycles, one that was
 * filled by a lagging burst empties in a few periods. */
void pool_trim(struct moq_session *s)
{
	for (uint32_t k = s->pool_low / 2; k && s->pool; k--) {
		struct txchunk *c = s->pool;
		s->pool = c->next;
		s->pool_len--;
		moq_heap_free(MOQ_HEAP_MOQ_SPARE, c);
	}
	for (uint32_t k = s->st_pool_low / 2; k && s->st_pool; k--) {
		struct mstream *st = s->st_pool;
		s->st_pool = st->pool_next;
		s->st_pool_len--;
		moq_heap_free(MOQ_HEAP_MOQ_SPARE, st);
	}
	for (uint32_t k = s->go_pool_low / 2; k && s->go_pool; k--) {
		struct gout *go = s->go_pool;
		s->go_pool = go->next;
		s->go_pool_len--;
		moq_heap_free(MOQ_HEAP_MOQ_SPARE, go);
	}
	s->pool_low = s->pool_len;
	s->st_pool_low = s->st_pool_len;
	s->go_pool_low = s->go_pool_len;
}

/* -------------------------------------------------------------- streams */

/* Spare stream and group-stream records, so a group per subscriber costs
 * no allocation in the steady state (POOL_MAX of each per session). */
static struct mstream *st_alloc(struct moq_session *s)
{
	struct mstream *st = s->st_pool;
	uint32_t u;

	if (!st) {
		st = moq_heap_calloc_lines(MOQ_HEAP_MOQ_STREAM, sizeof(*st));
		if (st)
			st->heap_usable = (uint32_t)malloc_usable_size(st);
		return st;
	}
	s->st_pool = st->pool_next;
	if (--s->st_pool_len < s->st_pool_low)
		s->st_pool_low = s->st_pool_len;
	u = st->heap_usable;
	moq_heap_move_bytes(MOQ_HEAP_MOQ_SPARE, MOQ_HEAP_MOQ_STREAM, u);
	memset(st, 0, sizeof(*st));
	st->heap_usable = u;
	return st;
}

void st_release(struct moq_session *s, struct mstream *st)
{
	if (s->st_pool_len >= POOL_MAX) {
		moq_heap_free(MOQ_HEAP_MOQ_STREAM, st);
		return;
	}
	st->pool_next = s->st_pool;
	s->st_pool = st;
	moq_heap_move_bytes(MOQ_HEAP_MOQ_STREAM, MOQ_HEAP_MOQ_SPARE, st->heap_usable);
	s->st_pool_len++;
}

/* inline: st_open's copy is on the fanout path (a stream per group); the
 * prototype in moq_int.h makes this the external definition control.c calls. */
inline struct mstream *st_new(struct moq_session *s, int64_t sid, uint8_t kind, int local)
{
	struct mstream *st = st_alloc(s);

	if (!st)
		return NULL;
	st->sid = sid;
	st->kind = kind;
	st->local = (uint8_t)local;
	if (smap_put(&s->streams, sid, st) < 0) {
		st_release(s, st);
		return NULL;
	}
	/* on QUIC, the stream's acknowledgements and its close come with the
	 * record (no look-up by id: a miss per call at thousands of sessions);
	 * it lives until that close or the connection's (st_free) */
	if (!s->bops && s->conn)
		moq_quic_stream_set_app(s->conn, sid, st);
	return st;
}

struct mstream *st_open(struct moq_session *s, int bidi, uint8_t kind, int *err)
{
	int64_t sid;
	int rc;
	struct mstream *st;

	if (!s->tp || s->closing) {
		*err = MOQ_ERR_STATE;
		return NULL;
	}
	rc = tp_open(s, bidi, &sid);
	if (rc < 0) {
		*err = rc;
		return NULL;
	}
	st = st_new(s, sid, kind, 1);
	if (!st) {
		tp_reset(s, sid, MOQ_CODE_CANCEL);
		*err = MOQ_ERR_NOMEM;
	}
	return st;
}

/* Write @len bytes (copied into the stream's tx buffer) and/or FIN. */
int st_write(struct moq_session *s, struct mstream *st, const void *data, size_t len, int fin)
{
	struct iovec iov = {NULL, 0};
	long rc;

	if (!s->tp || st->fin_sent || st->reset_sent)
		return MOQ_ERR_CLOSED;
	if (len) {
		uint8_t *p = tx_reserve(s, &st->tx, len);
		if (!p)
			return MOQ_ERR_NOMEM;
		memcpy(p, data, len);
		iov.iov_base = p;
		iov.iov_len = len;
	}
	rc = tp_write(s, st->sid, &iov, len ? 1 : 0, fin);
	if (rc < 0)
		return (int)rc;
	st->tx_off += len;
	if (fin)
		st->fin_sent = 1;
	return 0;
}

/* Encode @m (prefixed with the stream type when @stype >= 0) and write it. */
int st_send(struct moq_session *s, struct mstream *st, int64_t stype, const struct moq_msg *m,
            int fin)
{
	uint8_t buf[8 + 4200];
	size_t off = 0;
	int rc;

	if (stype >= 0) {
		rc = moq_varint_put(buf, sizeof(buf), (uint64_t)stype);
		if (rc < 0)
			return rc;
		off = (size_t)rc;
	}
	if (m && s->v == MOQ_LITE_06 && m->type == MOQ_MSG_ANNOUNCE) {
		struct moq_msg m6 = *m;
		rc = lite06_ann_out(s, st, &m6);
		if (rc <= 0)
			return rc;
		rc = moq_msg_encode(buf + off, sizeof(buf) - off, s->v, &m6);
		if (rc < 0)
			return rc;
		return st_write(s, st, buf, off + (size_t)rc, fin);
	}
	if (m) {
		rc = moq_msg_encode(buf + off, sizeof(buf) - off, s->v, m);
		if (rc < 0)
			return rc;
		off += (size_t)rc;
	}
	return st_write(s, st, buf, off, fin);
}

void st_reset(struct moq_session *s, struct mstream *st, uint64_t code)
{
	if (!s->tp)
		return;
	if (!st->fin_sent && !st->reset_sent && (st->local || !(st->sid & 2))) {
		tp_reset(s, st->sid, code);
		st->reset_sent = 1;
	}
}

/* Refuse a peer stream: stop its sending side and reset ours. */
void st_refuse(struct moq_session *s, struct mstream *st, uint64_t code)
{
	if (!s->tp)
		return;
	if (!st->rx_fin)
		tp_stop_sending(s, st->sid, code);
	st_reset(s, st, code);
	st->kind = SK_IGNORE;
}
