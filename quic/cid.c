/* SPDX-License-Identifier: MIT */
/*
 * cid.c: the endpoint's connection ID table and the peer's stateless
 * reset tokens (byte strings -> connections).
 */
#include "quic_int.h"

#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------- CID table */
/* Open addressing, linear probing, backward-shift deletion; sized for
 * max_conns * QUIC_CONN_MAX_CIDS at <= 50 % load, so it never grows. The same
 * structure maps the peer's stateless reset tokens to connections. */

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
		const struct cid_key *k = &t->keys[i];

		if (k->len == 0)
			return NULL;
		if (k->len == len && memcmp(k->id, id, len) == 0)
			return t->vals[i];
		i = (i + 1) & (t->cap - 1);
	}
}

static int ktab_add(const struct moq_quic_endpoint *ep, struct ktab *t, const uint8_t *id,
                    size_t len, struct moq_quic_conn *c)
{
	uint32_t i;

	if (len == 0 || len > NGTCP2_MAX_CIDLEN)
		return MOQ_ERR_INVAL;
	if ((t->n + 1) * 2 > t->cap)
		return MOQ_ERR_LIMIT;
	i = ktab_slot(ep, t, id, len);
	for (;;) {
		struct cid_key *k = &t->keys[i];

		if (k->len == 0)
			break;
		if (k->len == len && memcmp(k->id, id, len) == 0)
			return MOQ_ERR_EXISTS;
		i = (i + 1) & (t->cap - 1);
	}
	t->keys[i].len = (uint8_t)len;
	memcpy(t->keys[i].id, id, len);
	t->vals[i] = c;
	t->n++;
	return 0;
}

static void ktab_del(const struct moq_quic_endpoint *ep, struct ktab *t, const uint8_t *id,
                     size_t len)
{
	uint32_t mask = t->cap - 1, i = ktab_slot(ep, t, id, len), j;

	for (;;) {
		struct cid_key *k = &t->keys[i];

		if (k->len == 0)
			return;
		if (k->len == len && memcmp(k->id, id, len) == 0)
			break;
		i = (i + 1) & mask;
	}
	/* backward shift */
	j = i;
	for (;;) {
		uint32_t h;

		j = (j + 1) & mask;
		if (t->keys[j].len == 0)
			break;
		h = ktab_slot(ep, t, t->keys[j].id, t->keys[j].len);
		/* move j to i if h is not cyclically in (i, j] */
		if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
			t->keys[i] = t->keys[j];
			t->vals[i] = t->vals[j];
			i = j;
		}
	}
	t->keys[i].len = 0;
	t->vals[i] = NULL;
	t->n--;
}

int ktab_init(struct ktab *t, uint64_t entries)
{
	t->cap = 16;
	while (t->cap < entries * 2 && t->cap < (1u << 30))
		t->cap <<= 1;
	t->n = 0;
	t->keys = calloc(t->cap, sizeof(*t->keys));
	t->vals = calloc(t->cap, sizeof(*t->vals));
	return t->keys && t->vals ? 0 : MOQ_ERR_NOMEM;
}

void ktab_fini(struct ktab *t)
{
	free(t->keys);
	free(t->vals);
	t->keys = NULL;
	t->vals = NULL;
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
