/* SPDX-License-Identifier: MIT */
/*
 * cid.c: the endpoint's connection ID table and the peer's stateless
 * reset tokens (byte strings -> connections).
 */
#include "quic_int.h"

#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------- CID table */
/* Open addressing, linear probing, backward-shift deletion, <= 50 % load. It
 * starts at KTAB_MIN_CAP slots and doubles when an insert would pass 50 %, up
 * to the bound max_conns * QUIC_CONN_MAX_CIDS needs (max_cap); it never
 * shrinks. Sizing it for the bound up front (4M slots, 120 MB for the CID
 * table at the relay's default --max-connections 100000) made the relay's
 * RSS creep: calloc maps it untouched, and every new connection's CIDs and
 * tokens hash onto fresh pages, so each churn of clients faulted in ~9 pages
 * per connection until the whole table was resident (scripts/soak). Doubling
 * costs one rehash per power of two of the peak key count (amortised O(1)
 * per insert; no allocation in the steady state). The same structure maps
 * the peer's stateless reset tokens to connections. */
#define KTAB_MIN_CAP 256u

static uint32_t ktab_slot(const struct moq_quic_endpoint *ep, const struct ktab *t,
                          const uint8_t *id, size_t len)
{
	return (uint32_t)hash_bytes(ep->hash_key, id, len) & (t->cap - 1);
}

struct moq_quic_conn *ktab_find(const struct moq_quic_endpoint *ep, const struct ktab *t,
                                const uint8_t *id, size_t len)
{
	uint32_t i = ktab_slot(ep, t, id, len);

	for (;;) {
		const struct ktab_ent *e = &t->ents[i];

		if (e->k.len == 0)
			return NULL;
		if (e->k.len == len && memcmp(e->k.id, id, len) == 0)
			return e->c;
		i = (i + 1) & (t->cap - 1);
	}
}

/* Start loading the slot @id hashes to (moq_quic_endpoint_prefetch). */
void ktab_prefetch(const struct moq_quic_endpoint *ep, const struct ktab *t, const uint8_t *id,
                   size_t len)
{
	__builtin_prefetch(&t->ents[ktab_slot(ep, t, id, len)]);
}

/* Double @t's capacity: a rehash of its n keys into a new array. */
static int ktab_grow(const struct moq_quic_endpoint *ep, struct ktab *t)
{
	uint32_t ncap = t->cap * 2, mask = ncap - 1, i, j;
	struct ktab_ent *ne = calloc(ncap, sizeof(*ne));

	if (ne == NULL)
		return MOQ_ERR_NOMEM;
	for (i = 0; i < t->cap; i++) {
		const struct ktab_ent *e = &t->ents[i];

		if (e->k.len == 0)
			continue;
		j = (uint32_t)hash_bytes(ep->hash_key, e->k.id, e->k.len) & mask;
		while (ne[j].k.len != 0)
			j = (j + 1) & mask;
		ne[j] = *e;
	}
	free(t->ents);
	t->ents = ne;
	t->cap = ncap;
	return 0;
}

static int ktab_add(const struct moq_quic_endpoint *ep, struct ktab *t, const uint8_t *id,
                    size_t len, struct moq_quic_conn *c)
{
	uint32_t i;

	if (len == 0 || len > NGTCP2_MAX_CIDLEN)
		return MOQ_ERR_INVAL;
	if ((t->n + 1) * 2 > t->cap) {
		int rc = t->cap < t->max_cap ? ktab_grow(ep, t) : MOQ_ERR_LIMIT;

		if (rc != 0)
			return rc;
	}
	i = ktab_slot(ep, t, id, len);
	for (;;) {
		const struct ktab_ent *e = &t->ents[i];

		if (e->k.len == 0)
			break;
		if (e->k.len == len && memcmp(e->k.id, id, len) == 0)
			return MOQ_ERR_EXISTS;
		i = (i + 1) & (t->cap - 1);
	}
	t->ents[i].k.len = (uint8_t)len;
	memcpy(t->ents[i].k.id, id, len);
	t->ents[i].c = c;
	t->n++;
	return 0;
}

static void ktab_del(const struct moq_quic_endpoint *ep, struct ktab *t, const uint8_t *id,
                     size_t len)
{
	uint32_t mask = t->cap - 1, i = ktab_slot(ep, t, id, len), j;

	for (;;) {
		const struct ktab_ent *e = &t->ents[i];

		if (e->k.len == 0)
			return;
		if (e->k.len == len && memcmp(e->k.id, id, len) == 0)
			break;
		i = (i + 1) & mask;
	}
	/* backward shift */
	j = i;
	for (;;) {
		uint32_t h;

		j = (j + 1) & mask;
		if (t->ents[j].k.len == 0)
			break;
		h = ktab_slot(ep, t, t->ents[j].k.id, t->ents[j].k.len);
		/* move j to i if h is not cyclically in (i, j] */
		if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
			t->ents[i] = t->ents[j];
			i = j;
		}
	}
	t->ents[i].k.len = 0;
	t->ents[i].c = NULL;
	t->n--;
}

int ktab_init(struct ktab *t, uint64_t entries)
{
	t->max_cap = 16;
	while (t->max_cap < entries * 2 && t->max_cap < (1u << 30))
		t->max_cap <<= 1;
	t->cap = t->max_cap < KTAB_MIN_CAP ? t->max_cap : KTAB_MIN_CAP;
	t->n = 0;
	t->ents = calloc(t->cap, sizeof(*t->ents));
	return t->ents ? 0 : MOQ_ERR_NOMEM;
}

void ktab_fini(struct ktab *t)
{
	free(t->ents);
	t->ents = NULL;
}

struct moq_quic_conn *ctab_find(const struct moq_quic_endpoint *ep, const uint8_t *id, size_t len)
{
	return ktab_find(ep, &ep->ctab, id, len);
}

/* The peer's stateless reset tokens (RFC 9000, 10.3.1: a datagram whose
 * last 16 bytes match one is a reset for that connection). */
void conn_add_token(struct moq_quic_conn *c, const uint8_t *token)
{
	uint32_t i;

	for (i = 0; i < c->ntokens; i++)
		if (memcmp(c->tokens[i], token, NGTCP2_STATELESS_RESET_TOKENLEN) == 0)
			return;
	if (c->ntokens >= QUIC_CONN_MAX_TOKENS)
		return;
	if (ktab_add(c->ep, &c->ep->ttab, token, NGTCP2_STATELESS_RESET_TOKENLEN, c) != 0)
		return;
	memcpy(c->tokens[c->ntokens++], token, NGTCP2_STATELESS_RESET_TOKENLEN);
}

void conn_del_token(struct moq_quic_conn *c, const uint8_t *token)
{
	uint32_t i;

	for (i = 0; i < c->ntokens; i++) {
		if (memcmp(c->tokens[i], token, NGTCP2_STATELESS_RESET_TOKENLEN) == 0) {
			ktab_del(c->ep, &c->ep->ttab, token, NGTCP2_STATELESS_RESET_TOKENLEN);
			memcpy(c->tokens[i], c->tokens[--c->ntokens],
			       NGTCP2_STATELESS_RESET_TOKENLEN);
			return;
		}
	}
}

int conn_add_cid(struct moq_quic_conn *c, const uint8_t *id, size_t len)
{
	int rv;

	if (c->ncids >= QUIC_CONN_MAX_CIDS)
		return MOQ_ERR_LIMIT;
	rv = ktab_add(c->ep, &c->ep->ctab, id, len, c);
	if (rv != 0)
		return rv;
	c->cids[c->ncids].len = (uint8_t)len;
	memcpy(c->cids[c->ncids].id, id, len);
	c->ncids++;
	return 0;
}

void conn_del_cid(struct moq_quic_conn *c, const uint8_t *id, size_t len)
{
	uint32_t i;

	for (i = 0; i < c->ncids; i++) {
		if (c->cids[i].len == len && memcmp(c->cids[i].id, id, len) == 0) {
			ktab_del(c->ep, &c->ep->ctab, id, len);
			c->cids[i] = c->cids[--c->ncids];
			return;
		}
	}
}
