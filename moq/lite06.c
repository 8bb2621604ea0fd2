/* SPDX-License-Identifier: MIT */
/*
 * lite06.c: what a moq-lite-06 session adds over lite-05's machinery
 * (draft-lcurley-moq-lite-06; ../shared/PROTOCOL.md, "moq-lite-06"). The
 * messages translate to codec.h's structs (lite06_codec.c); what needs
 * session state is here: announces are typed START / UPDATE / END with
 * implicit ids (the n-th START on a stream is id n), so each announce stream
 * keeps its id <-> suffix map, and the route costs.
 */
#define _GNU_SOURCE /* tdestroy */
#include "moq.h"

#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "lite06_codec.h"
#include "moq_int.h"

/* One announced route on one announce stream. */
struct a6ent {
	uint64_t id;
	size_t len;
	char sfx[]; /* the suffix, not NUL-terminated */
};

/* An announce stream's map (both trees hold the same entries). */
struct ann6 {
	void *by_id, *by_sfx;
	uint64_t next_id; /* the id of the next START */
	uint32_t count;
};

static int cmp_id(const void *a, const void *b)
{
	const struct a6ent *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_sfx(const void *a, const void *b)
{
	const struct a6ent *x = a, *y = b;
	size_t l = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->sfx, y->sfx, l);

	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

static struct ann6 *a6_get(struct mstream *st)
{
	if (!st->a6)
		st->a6 = calloc(1, sizeof(*st->a6));
	return st->a6;
}

static struct a6ent *a6_by_sfx(struct ann6 *t, const char *p, size_t len)
{
	struct a6ent *key = malloc(sizeof(*key) + len + 1);
	void *r;

	if (!key)
		return NULL;
	key->len = len;
	memcpy(key->sfx, p, len);
	r = tfind(key, &t->by_sfx, cmp_sfx);
	free(key);
	return r ? *(struct a6ent **)r : NULL;
}

static struct a6ent *a6_by_id(struct ann6 *t, uint64_t id)
{
	struct a6ent key = {.id = id};
	void *r = tfind(&key, &t->by_id, cmp_id);

	return r ? *(struct a6ent **)r : NULL;
}

/* A new entry with the next id; NULL when memory is short. */
static struct a6ent *a6_add(struct ann6 *t, const char *p, size_t len)
{
	struct a6ent *e = malloc(sizeof(*e) + len + 1);

	if (!e)
		return NULL;
	e->id = t->next_id;
	e->len = len;
	memcpy(e->sfx, p, len);
	if (!tsearch(e, &t->by_id, cmp_id)) {
		free(e);
		return NULL;
	}
	if (!tsearch(e, &t->by_sfx, cmp_sfx)) {
		tdelete(e, &t->by_id, cmp_id);
		free(e);
		return NULL;
	}
	t->next_id++;
	t->count++;
	return e;
}

static void a6_del(struct ann6 *t, struct a6ent *e)
{
	tdelete(e, &t->by_id, cmp_id);
	tdelete(e, &t->by_sfx, cmp_sfx);
	t->count--;
	free(e);
}

static void free_ent(void *p)
{
	free(p);
}

static void keep_ent(void *p)
{
	(void)p;
}

void lite06_st_free(struct mstream *st)
{
	struct ann6 *t = st->a6;

	if (!t)
		return;
	/* both trees hold the same entries: free them once */
	tdestroy(t->by_id, keep_ent);
	tdestroy(t->by_sfx, free_ent);
	free(t);
	st->a6 = NULL;
}

/* The cost a route of @nh hops is advertised with: each hop costs the
 * default (lite-06 SETUP Cost, 1 when absent); the route is cold (no
 * warm route is tracked yet), so warm = cold. */
static uint64_t route_cost(uint32_t nh)
{
	return (uint64_t)(nh + 1) * MOQ6_COST_DEFAULT;
}

int lite06_ann_out(struct moq_session *s, struct mstream *st, struct moq_msg *m)
{
	struct moq_announce *a = &m->u.announce;
	struct ann6 *t = a6_get(st);
	struct a6ent *e;

	if (!t)
		return MOQ_ERR_NOMEM;
	e = a6_by_sfx(t, a->suffix.p, a->suffix.len);
	if (a->status == MOQ_ANNOUNCE_ENDED) {
		if (!e)
			return 0; /* never announced on this stream: nothing to end */
		a->kind6 = MOQ6_ANN_END;
		a->id6 = e->id;
		a6_del(t, e);
		return 1;
	}
	if (a->warm_cost == MOQ6_COST_UNSET) /* heard without costs (03..05) */
		a->warm_cost = a->cold_cost = route_cost(a->hop_count);
	if (e) {
		/* already announced: the route changed (a restart, a reroute) */
		a->kind6 = MOQ6_ANN_UPDATE;
		a->id6 = e->id;
		return 1;
	}
	if (t->count >= s->n->cfg.max_broadcasts) {
		s->n->st.refused_bounds++;
		return 0;
	}
	e = a6_add(t, a->suffix.p, a->suffix.len);
	if (!e)
		return MOQ_ERR_NOMEM;
	a->kind6 = MOQ6_ANN_START;
	a->id6 = e->id;
	return 1;
}

uint64_t lite06_on_announce(struct moq_session *s, struct mstream *st, struct moq_announce *a)
{
	struct ann6 *t = a6_get(st);
	struct a6ent *e;
	uint64_t code;

	if (!t)
		return MOQ_CODE_BOUNDS;
	switch (a->kind6) {
	case MOQ6_ANN_START:
		/* lite-06: a second START for the same prefix is a protocol
		 * violation that closes the session */
		if (a6_by_sfx(t, a->suffix.p, a->suffix.len))
			return MOQ_CODE_PROTOCOL_VIOLATION;
		if (t->count >= s->n->cfg.max_broadcasts)
			return MOQ_CODE_BOUNDS;
		if (!a6_add(t, a->suffix.p, a->suffix.len))
			return MOQ_CODE_BOUNDS;
		a->status = MOQ_ANNOUNCE_ACTIVE;
		return (uint64_t)on_announce(s, st, a);
	case MOQ6_ANN_UPDATE:
		e = a6_by_id(t, a->id6);
		if (!e)
			return MOQ_CODE_PROTOCOL_VIOLATION; /* an id never started */
		a->suffix = (struct moq_str){e->sfx, e->len};
		a->status = MOQ_ANNOUNCE_RESTART;
		return (uint64_t)on_announce(s, st, a);
	default:
		e = a6_by_id(t, a->id6);
		if (!e)
			return MOQ_CODE_PROTOCOL_VIOLATION;
		a->suffix = (struct moq_str){e->sfx, e->len};
		a->status = MOQ_ANNOUNCE_ENDED;
		a->hop_count = 0;
		code = (uint64_t)on_announce(s, st, a);
		a6_del(t, e);
		return code;
	}
}
