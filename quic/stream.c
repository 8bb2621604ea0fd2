/* SPDX-License-Identifier: MIT */
/*
 * stream.c: streams: the map by id, the zero-copy send queues of caller
 * memory, spare stream records, and the moq_quic_stream_* calls.
 */
#include "quic_int.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* Stream map initial size (power of two). */
#define SMAP_INIT 16

/* -------------------------------------------------------------- streams */

static uint32_t smap_slot(const struct moq_quic_conn *c, int64_t id)
{
	return (uint32_t)mix64((uint64_t)id) & (c->smap_cap - 1);
}

static struct quic_strm *smap_find(const struct moq_quic_conn *c, int64_t id)
{
	uint32_t i;

	if (c->smap_cap == 0)
		return NULL;
	i = smap_slot(c, id);
	for (;;) {
		struct quic_strm *s = c->smap[i];

		if (s == NULL)
			return NULL;
		if (s->id == id)
			return s;
		i = (i + 1) & (c->smap_cap - 1);
	}
}

struct quic_strm *strm_find(const struct moq_quic_conn *c, int64_t id)
{
	return smap_find(c, id);
}

static int smap_put_raw(struct quic_strm **map, uint32_t cap, struct quic_strm *s)
{
	uint32_t i = (uint32_t)mix64((uint64_t)s->id) & (cap - 1);

	while (map[i] != NULL)
		i = (i + 1) & (cap - 1);
	map[i] = s;
	return 0;
}

static int smap_add(struct moq_quic_conn *c, struct quic_strm *s)
{
	if ((c->smap_n + 1) * 2 > c->smap_cap) {
		uint32_t ncap = c->smap_cap ? c->smap_cap * 2 : SMAP_INIT, i;
		struct quic_strm **nm = moq_heap_calloc(MOQ_HEAP_QUIC_SMAP, ncap, sizeof(*nm));

		if (nm == NULL)
			return MOQ_ERR_NOMEM;
		for (i = 0; i < c->smap_cap; i++)
			if (c->smap[i])
				smap_put_raw(nm, ncap, c->smap[i]);
		moq_heap_free(MOQ_HEAP_QUIC_SMAP, c->smap);
		c->smap = nm;
		c->smap_cap = ncap;
	}
	smap_put_raw(c->smap, c->smap_cap, s);
	c->smap_n++;
	return 0;
}

static void smap_del(struct moq_quic_conn *c, int64_t id)
{
	uint32_t mask = c->smap_cap - 1, i, j;

	if (c->smap_cap == 0)
		return;
	i = smap_slot(c, id);
	for (;;) {
		if (c->smap[i] == NULL)
			return;
		if (c->smap[i]->id == id)
			break;
		i = (i + 1) & mask;
	}
	j = i;
	for (;;) {
		uint32_t h;

		j = (j + 1) & mask;
		if (c->smap[j] == NULL)
			break;
		h = smap_slot(c, c->smap[j]->id);
		if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
			c->smap[i] = c->smap[j];
			i = j;
		}
	}
	c->smap[i] = NULL;
	c->smap_n--;
}

/* Stream records are recycled per endpoint with their entry arrays: moq-lite
 * opens a stream per group, and audio has a group per frame (50 streams a
 * second per subscriber): a calloc and a realloc per stream were 11% of the
 * relay's fanout instructions (bench_moq_fanout --subs 1000 --audio). */
#define STRM_SPARE_MAX  4096u
#define STRM_SPARE_ENTS 64u /* larger entry arrays are not kept */
/* Past STRM_SPARE_MAX, spares are kept up to the peak of records in use:
 * 5,000 slow subscribers hold hundreds of thousands of streams that close
 * in waves, and a fixed 4,096 made each wave free what the next one
 * allocated again (malloc and page faults: ~15% of an overloaded worker
 * under perf). The records never exceed twice their peak in use. */

/* A record's heap (record and entry array) moves from kind @from to @to
 * (in use <-> spare; moq_heapacct.h). */
static void strm_heap_move(const struct quic_strm *s, enum moq_heap_kind from,
                           enum moq_heap_kind to)
{
	int64_t b = (int64_t)malloc_usable_size((void *)s) +
	            (strm_ents_inline(s) ? 0 : (int64_t)malloc_usable_size(s->ents));

	moq_heap_move_bytes(from, to, b);
}

void strm_heap_free(struct quic_strm *s, enum moq_heap_kind k)
{
	if (!strm_ents_inline(s)) {
		moq_heap_add(k, -(int64_t)malloc_usable_size(s->ents), 0);
		free(s->ents);
	}
	moq_heap_free(k, s);
}

/* A zeroed stream record: a spare one (keeping its entry array) or a new one. */
static struct quic_strm *strm_get(struct moq_quic_endpoint *ep)
{
	struct quic_strm *s = ep->sfree;

	if (s != NULL) {
		struct sq_ent *ents = strm_ents_inline(s) ? NULL : s->ents;
		uint32_t cap = s->cap;

		ep->sfree = s->pnext;
		if (ep->sfree != NULL) /* the next open's record: its first touch missed */
			__builtin_prefetch(ep->sfree);
		if (--ep->nsfree < ep->nsfree_low)
			ep->nsfree_low = ep->nsfree;
		ep->sfree_bytes -= sizeof(*s) + strm_ents_bytes(s);
		strm_heap_move(s, MOQ_HEAP_QUIC_SPARE, MOQ_HEAP_QUIC_STREAM);
		memset(s, 0, offsetof(struct quic_strm, inl));
		s->ents = ents != NULL ? ents : s->inl;
		s->cap = ents != NULL ? cap : STRM_INL;
	} else if ((s = moq_heap_calloc(MOQ_HEAP_QUIC_STREAM, 1, sizeof(*s))) == NULL) {
		return NULL;
	} else {
		s->ents = s->inl;
		s->cap = STRM_INL;
	}
	s->urgency = MOQ_QUIC_URGENCY_DEFAULT;
	if (++ep->nslive > ep->nslive_peak)
		ep->nslive_peak = ep->nslive;
	return s;
}

/* Back to the spares (or freed): @s is in no list or map. */
static void strm_put(struct moq_quic_endpoint *ep, struct quic_strm *s)
{
	ep->nslive--;
	if ((ep->nsfree < STRM_SPARE_MAX || ep->nsfree < ep->nslive_peak) &&
	    s->cap <= STRM_SPARE_ENTS) {
		s->pnext = ep->sfree;
		ep->sfree = s;
		ep->nsfree++;
		ep->sfree_bytes += sizeof(*s) + strm_ents_bytes(s);
		strm_heap_move(s, MOQ_HEAP_QUIC_STREAM, MOQ_HEAP_QUIC_SPARE);
		return;
	}
	strm_heap_free(s, MOQ_HEAP_QUIC_STREAM);
}

/* Half the spares no open took since the last trim are freed, and the
 * peak that strm_put keeps spares up to decays toward what is in use now:
 * a burst of lagging subscribers (hundreds of thousands of records) is
 * given back within a few trims once it is over (issue 28). */
void strm_trim(struct moq_quic_endpoint *ep)
{
	for (uint32_t k = ep->nsfree_low / 2; k && ep->sfree; k--) {
		struct quic_strm *s = ep->sfree;

		ep->sfree = s->pnext;
		ep->nsfree--;
		ep->sfree_bytes -= sizeof(*s) + strm_ents_bytes(s);
		strm_heap_free(s, MOQ_HEAP_QUIC_SPARE);
	}
	ep->nsfree_low = ep->nsfree;
	if (ep->nslive_peak / 2 > ep->nslive)
		ep->nslive_peak /= 2;
	else
		ep->nslive_peak = ep->nslive;
}

struct quic_strm *strm_new(struct moq_quic_conn *c, int64_t id)
{
	struct quic_strm *s = strm_get(c->ep);

	if (s == NULL)
		return NULL;
	s->id = id;
	if (smap_add(c, s) != 0) {
		strm_put(c->ep, s);
		return NULL;
	}
	return s;
}

void strm_free(struct moq_quic_conn *c, struct quic_strm *s)
{
	pend_del(c, s);
	smap_del(c, s->id);
	strm_put(c->ep, s);
}

/* Drop fully acknowledged entries from the front. */
void strm_ack(struct quic_strm *s, uint64_t acked)
{
	if (acked <= s->acked_off)
		return;
	s->acked_off = acked;
	while (s->head < s->n && s->head_off + s->ents[s->head].len <= acked &&
	       s->head < s->send_idx) {
		s->head_off += s->ents[s->head].len;
		s->head++;
	}
	if (s->head == s->n) {
		s->send_idx -= s->head;
		s->n = s->head = 0;
	} else if (s->head > 32 && s->head * 2 > s->n) {
		memmove(s->ents, s->ents + s->head, (s->n - s->head) * sizeof(*s->ents));
		s->n -= s->head;
		s->send_idx -= s->head;
		s->head = 0;
	}
}

int moq_quic_stream_open(struct moq_quic_conn *c, int bidi, int64_t *sid)
{
	struct quic_strm *s;
	int64_t id;
	int rv;

	if (c == NULL || sid == NULL)
		return MOQ_ERR_INVAL;
	if (c->state != CS_ESTABLISHED || c->notified)
		return MOQ_ERR_STATE;
	if (c->fp != NULL)
		return hand_stream_open(c, bidi, sid);
	s = strm_get(c->ep);
	if (s == NULL)
		return MOQ_ERR_NOMEM;
	rv = bidi ? ngtcp2_conn_open_bidi_stream(c->q, &id, s)
	          : ngtcp2_conn_open_uni_stream(c->q, &id, s);
	if (rv != 0) {
		strm_put(c->ep, s);
		if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED) {
			c->ep->st.refused_streams++;
			return MOQ_ERR_AGAIN;
		}
		return MOQ_ERR_NOMEM;
	}
	c->ep->st.streams_opened++;
	s->id = id;
	if (smap_add(c, s) != 0) {
		ngtcp2_conn_set_stream_user_data(c->q, id, NULL);
		ngtcp2_conn_shutdown_stream(c->q, id, 0);
		strm_put(c->ep, s);
		return MOQ_ERR_NOMEM;
	}
	*sid = id;
	return 0;
}

long moq_quic_stream_write(struct moq_quic_conn *c, int64_t sid, const struct iovec *iov,
                           size_t iovcnt, int fin)
{
	struct quic_strm *s;
	size_t k, need = 0;
	long total = 0;

	if (c == NULL || (iov == NULL && iovcnt > 0))
		return MOQ_ERR_INVAL;
	if (c->state != CS_ESTABLISHED || c->notified)
		return MOQ_ERR_STATE;
	if (c->fp != NULL)
		return hand_stream_write(c, sid, iov, iovcnt, fin);
	s = smap_find(c, sid);
	/* a receive-only stream: the peer's unidirectional one */
	if (s == NULL || (!ngtcp2_is_bidi_stream(sid) && !ngtcp2_conn_is_local_stream(c->q, sid)))
		return MOQ_ERR_NOTFOUND;
	if (s->fin_queued || s->wr_closed)
		return MOQ_ERR_CLOSED;
	for (k = 0; k < iovcnt; k++)
		if (iov[k].iov_len > 0)
			need++;
	if (s->n + need > s->cap) {
		uint32_t ncap = s->cap ? s->cap : 8;
		struct sq_ent *ne;

		/* reclaim acknowledged entries first */
		if (s->head > 0) {
			memmove(s->ents, s->ents + s->head, (s->n - s->head) * sizeof(*s->ents));
			s->n -= s->head;
			s->send_idx -= s->head;
			s->head = 0;
		}
		while (s->n + need > ncap)
			ncap *= 2;
		if (ncap != s->cap) {
			if (strm_ents_inline(s)) {
				ne = malloc(ncap * sizeof(*ne));
				if (ne != NULL) {
					memcpy(ne, s->inl, s->n * sizeof(*ne));
					moq_heap_add(MOQ_HEAP_QUIC_STREAM,
					             (int64_t)malloc_usable_size(ne), 0);
				}
			} else {
				/* (the array's bytes, not a new object) */
				int64_t ob = (int64_t)malloc_usable_size(s->ents);
				ne = realloc(s->ents, ncap * sizeof(*ne));
				if (ne != NULL)
					moq_heap_add(MOQ_HEAP_QUIC_STREAM,
					             (int64_t)malloc_usable_size(ne) - ob, 0);
			}
			if (ne == NULL)
				return MOQ_ERR_NOMEM;
			s->ents = ne;
			s->cap = ncap;
		}
	}
	for (k = 0; k < iovcnt; k++) {
		if (iov[k].iov_len == 0)
			continue;
		s->ents[s->n].base = iov[k].iov_base;
		s->ents[s->n].len = iov[k].iov_len;
		s->n++;
		s->end_off += iov[k].iov_len;
		total += (long)iov[k].iov_len;
	}
	if (fin)
		s->fin_queued = 1;
	if (strm_has_unsent(s))
		pend_add(c, s);
	ready_add(c);
	return total;
}

long moq_quic_stream_queued(const struct moq_quic_conn *c, int64_t sid)
{
	const struct quic_strm *s;

	if (c != NULL && c->fp != NULL)
		return hand_stream_queued(c, sid);
	s = c ? smap_find(c, sid) : NULL;
	if (s == NULL)
		return MOQ_ERR_NOTFOUND;
	return (long)(s->end_off - s->acked_off);
}

int moq_quic_stream_reset(struct moq_quic_conn *c, int64_t sid, uint64_t app_err)
{
	struct quic_strm *s;

	if (c == NULL || c->state >= CS_CLOSING)
		return MOQ_ERR_NOTFOUND;
	if (c->fp != NULL)
		return hand_stream_reset(c, sid, app_err);
	s = smap_find(c, sid);
	if (s == NULL)
		return MOQ_ERR_NOTFOUND;
	/* RFC 9000, 19.4: RESET_STREAM abandons what was not delivered. */
	if (ngtcp2_conn_shutdown_stream_write(c->q, sid, app_err) != 0)
		return MOQ_ERR_NOTFOUND;
	s->wr_closed = 1;
	s->local_reset = 1;
	pend_del(c, s);
	ready_add(c);
	return 0;
}

int moq_quic_stream_stop_sending(struct moq_quic_conn *c, int64_t sid, uint64_t app_err)
{
	if (c == NULL || c->state >= CS_CLOSING)
		return MOQ_ERR_NOTFOUND;
	if (c->fp != NULL)
		return hand_stream_stop_sending(c, sid, app_err);
	if (smap_find(c, sid) == NULL)
		return MOQ_ERR_NOTFOUND;
	/* RFC 9000, 19.5 */
	if (ngtcp2_conn_shutdown_stream_read(c->q, sid, app_err) != 0)
		return MOQ_ERR_NOTFOUND;
	ready_add(c);
	return 0;
}

int moq_quic_stream_set_app(struct moq_quic_conn *c, int64_t sid, void *app)
{
	struct quic_strm *s;

	if (c == NULL)
		return MOQ_ERR_INVAL;
	if (c->fp != NULL)
		return hand_stream_set_app(c, sid, app);
	s = smap_find(c, sid);
	if (s == NULL)
		return MOQ_ERR_NOTFOUND;
	s->app = app;
	return 0;
}

int moq_quic_stream_set_urgency(struct moq_quic_conn *c, int64_t sid, uint8_t urgency)
{
	struct quic_strm *s;
	int was;

	if (c == NULL || urgency >= MOQ_QUIC_URGENCY_LEVELS)
		return MOQ_ERR_INVAL;
	if (c->fp != NULL)
		return hand_stream_set_urgency(c, sid, urgency);
	s = smap_find(c, sid);
	if (s == NULL)
		return MOQ_ERR_NOTFOUND;
	was = s->in_pend;
	pend_del(c, s);
	s->urgency = urgency;
	if (was)
		pend_add(c, s);
	return 0;
}
