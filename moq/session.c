/* SPDX-License-Identifier: MIT */
/*
 * session.c: moq-lite sessions over quic/, the relay's origin table,
 * upstream aggregation, ingest into the cache and fanout from it
 * (docs/PROTOCOL.md, docs/DESIGN.md).
 */
#include "moq.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "moq_int.h"

/* Control path allocations only: sessions, streams, subscriptions. The data
 * path (frames) allocates nothing but pooled header chunks. */

#define POOL_MAX     64            /* spare tx chunks kept per session */
#define RECLAIM_NS   100000000ull  /* cache reclaim from poll every 100 ms */
#define MIN_BUDGET   (64u * 1024u) /* smallest per-session fanout budget */
#define MAX_TINFO    1024u         /* TRACK_INFO answers a relay node keeps */
#define FULL_NS      20000000ull   /* safety-net check of every session every 20 ms */
#define FIN_CHECK_NS 100000000ull  /* FIN'd streams with stale groups: every 100 ms */

static void sess_fail(struct moq_session *s, uint64_t code);
static void st_process(struct moq_session *s, struct mstream *st);
static void dsub_detach(struct dsub *d);
static void up_free(struct upstream *up);
static void up_touch(struct upstream *up);
static void bcast_end(struct moq_node *n, struct bcast *bc);
static void hub_announce(struct moq_node *n, struct bcast *bc, int active);
static void tinfo_drop_path(struct moq_node *n, const char *p, size_t pl);
static bool bound_take(struct moq_node *n, int tracks);
static void bound_put(struct moq_node *n, int tracks);
static struct hub_msg *hub_msg_new(struct moq_node *n, int kind, const char *p, size_t pl,
                                   const char *t, size_t tl);
static void hub_post(struct moq_hub *h, uint32_t to, struct hub_msg *m);
static void hub_send(struct moq_node *n, uint32_t to1, int kind, const char *p, size_t pl,
                     const char *t, size_t tl);

/* ---------------------------------------------------------------- utils */

static char *memdup0(const void *p, size_t len)
{
	char *d = malloc(len + 1);

	if (d) {
		if (len)
			memcpy(d, p, len);
		d[len] = 0;
	}
	return d;
}

/* Normalise @p into a new string (PROTOCOL.md, path). */
static char *path_dup(const char *p, size_t len, size_t *out_len)
{
	char *d = malloc(len + 1);
	int n;

	if (!d)
		return NULL;
	n = moq_path_norm(d, len + 1, p, len);
	if (n < 0) {
		free(d);
		return NULL;
	}
	d[n] = 0;
	*out_len = (size_t)n;
	return d;
}

/* Join two normalised paths into a new normalised string. */
static char *path_join(const char *a, size_t al, const char *b, size_t bl, size_t *out_len)
{
	char *d = malloc(al + bl + 2);
	size_t o = 0;

	if (!d)
		return NULL;
	memcpy(d, a, al);
	o = al;
	if (al && bl)
		d[o++] = '/';
	memcpy(d + o, b, bl);
	o += bl;
	d[o] = 0;
	*out_len = o;
	if (moq_path_segments(d, o) > MOQ_PATH_MAX_SEGMENTS) {
		free(d);
		return NULL;
	}
	return d;
}

static bool hops_have(const uint64_t *hops, uint32_t n, uint64_t h)
{
	if (h == 0)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (hops[i] == h)
			return true;
	return false;
}

/* --------------------------------------------------------- stream map */

static uint32_t smap_slot(const struct smap *m, int64_t k)
{
	return (uint32_t)(((uint64_t)k * 0x9E3779B97F4A7C15ull) >> 32) & (m->cap - 1);
}

static struct mstream *smap_get(const struct smap *m, int64_t k)
{
	if (!m->cap)
		return NULL;
	for (uint32_t i = smap_slot(m, k);; i = (i + 1) & (m->cap - 1)) {
		if (!m->vals[i])
			return NULL;
		if (m->keys[i] == k)
			return m->vals[i];
	}
}

static int smap_put(struct smap *m, int64_t k, struct mstream *v);

static int smap_grow(struct smap *m)
{
	struct smap nm;
	uint32_t cap = m->cap ? m->cap * 2 : 64;

	nm.cap = cap;
	nm.used = 0;
	nm.keys = calloc(cap, sizeof(*nm.keys));
	nm.vals = calloc(cap, sizeof(*nm.vals));
	if (!nm.keys || !nm.vals) {
		free(nm.keys);
		free(nm.vals);
		return MOQ_ERR_NOMEM;
	}
	for (uint32_t i = 0; i < m->cap; i++)
		if (m->vals[i])
			smap_put(&nm, m->keys[i], m->vals[i]);
	free(m->keys);
	free(m->vals);
	*m = nm;
	return 0;
}

static int smap_put(struct smap *m, int64_t k, struct mstream *v)
{
	uint32_t i;

	if ((m->used + 1) * 2 > m->cap && smap_grow(m) < 0)
		return MOQ_ERR_NOMEM;
	for (i = smap_slot(m, k); m->vals[i]; i = (i + 1) & (m->cap - 1))
		;
	m->keys[i] = k;
	m->vals[i] = v;
	m->used++;
	return 0;
}

static void smap_del(struct smap *m, int64_t k)
{
	uint32_t i, j;

	if (!m->cap)
		return;
	for (i = smap_slot(m, k);; i = (i + 1) & (m->cap - 1)) {
		if (!m->vals[i])
			return;
		if (m->keys[i] == k)
			break;
	}
	m->vals[i] = NULL;
	m->used--;
	/* Backward-shift deletion keeps probe chains intact. */
	for (j = (i + 1) & (m->cap - 1); m->vals[j]; j = (j + 1) & (m->cap - 1)) {
		uint32_t h = smap_slot(m, m->keys[j]);
		bool move = (j > i) ? (h <= i || h > j) : (h <= i && h > j);
		if (move) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			m->vals[j] = NULL;
			i = j;
		}
	}
}

/* ------------------------------------------------------ pending sessions */

/* sess_mark: @s has fanout work (a track it reads moved, an ack freed budget,
 * a stream or request changed, a deferred close): moq_node_poll visits it at
 * its next call. Sessions with nothing new are not visited at all. */
static void sess_mark(struct moq_session *s)
{
	if (!s->queued && !s->freed) {
		s->queued = 1;
		s->pnext = s->n->pending;
		s->n->pending = s;
	}
}

static void sess_unlink(struct moq_session **pp, struct moq_session *s, int watch)
{
	for (; *pp; pp = watch ? &(*pp)->wnext : &(*pp)->pnext)
		if (*pp == s) {
			*pp = watch ? s->wnext : s->pnext;
			return;
		}
}

/* Take @s off the node's pending / work and watch lists (it is freed). */
static void sess_unlist(struct moq_session *s)
{
	if (s->queued) {
		/* in the pending list, or in the one moq_node_poll is visiting */
		sess_unlink(&s->n->pending, s, 0);
		sess_unlink(&s->n->work, s, 0);
		s->queued = 0;
	}
	if (s->watched) {
		sess_unlink(&s->n->watch, s, 1);
		s->watched = 0;
	}
}

/* ----------------------------------------------------------- tx buffers */

/* tx_reserve: @len contiguous bytes appended to @tb that stay at their
 * address until the stream is freed (ngtcp2 references them until acked). */
static uint8_t *tx_reserve(struct moq_session *s, struct txbuf *tb, size_t len)
{
	struct txchunk *c = tb->tail;
	uint8_t *p;

	if (!c || c->cap - c->len < len) {
		if (len <= TXCHUNK_DATA && s->pool) {
			c = s->pool;
			s->pool = c->next;
			s->pool_len--;
		} else {
			size_t cap = len > TXCHUNK_DATA ? len : TXCHUNK_DATA;
			c = malloc(sizeof(*c) + cap);
			if (!c)
				return NULL;
			c->cap = (uint32_t)cap;
			c->data = (uint8_t *)(c + 1);
		}
		c->next = NULL;
		c->len = 0;
		if (tb->tail)
			tb->tail->next = c;
		else
			tb->head = c;
		tb->tail = c;
	}
	p = c->data + c->len;
	c->len += (uint32_t)len;
	return p;
}

/* Give back the unused tail of the last reservation. */
static void tx_unreserve(struct txbuf *tb, size_t len)
{
	tb->tail->len -= (uint32_t)len;
}

static void chunk_put(struct moq_session *s, struct txchunk *c)
{
	if (c->cap == TXCHUNK_DATA && s->pool_len < POOL_MAX) {
		c->next = s->pool;
		s->pool = c;
		s->pool_len++;
	} else {
		free(c);
	}
}

static void tx_free(struct moq_session *s, struct txbuf *tb)
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
static void tx_release_acked(struct moq_session *s, struct txbuf *tb, uint64_t acked)
{
	while (tb->head && tb->head != tb->tail && tb->head_off + tb->head->len <= acked) {
		struct txchunk *c = tb->head;
		tb->head = c->next;
		tb->head_off += c->len;
		chunk_put(s, c);
	}
}

/* -------------------------------------------------------------- streams */

/* Spare stream and group-stream records, so a group per subscriber costs
 * no allocation in the steady state (POOL_MAX of each per session). */
static struct mstream *st_alloc(struct moq_session *s)
{
	struct mstream *st = s->st_pool;

	if (!st)
		return calloc(1, sizeof(*st));
	s->st_pool = st->pool_next;
	s->st_pool_len--;
	memset(st, 0, sizeof(*st));
	return st;
}

static void st_release(struct moq_session *s, struct mstream *st)
{
	if (s->st_pool_len >= POOL_MAX) {
		free(st);
		return;
	}
	st->pool_next = s->st_pool;
	s->st_pool = st;
	s->st_pool_len++;
}

static struct gout *gout_alloc(struct moq_session *s)
{
	struct gout *go = s->go_pool;

	if (!go)
		return calloc(1, sizeof(*go));
	s->go_pool = go->next;
	s->go_pool_len--;
	memset(go, 0, sizeof(*go));
	return go;
}

static void gout_release(struct moq_session *s, struct gout *go)
{
	if (s->go_pool_len >= POOL_MAX) {
		free(go);
		return;
	}
	go->next = s->go_pool;
	s->go_pool = go;
	s->go_pool_len++;
}

/* A stream that writes no more (FIN sent or reset) leaves the live list
 * (@pp points at its link there) for gdone; returns the next on the live
 * list. */
static inline bool gout_is_done(const struct gout *go)
{
	return go->reset || go->fin;
}

static struct gout *gout_retire(struct moq_session *s, struct gout **pp)
{
	struct gout *go = *pp;

	*pp = go->next;
	go->done = 1;
	go->next = s->gdone;
	s->gdone = go;
	return *pp;
}

static struct mstream *st_new(struct moq_session *s, int64_t sid, uint8_t kind, int local)
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
	return st;
}

static struct mstream *st_open(struct moq_session *s, int bidi, uint8_t kind, int *err)
{
	int64_t sid;
	int rc;
	struct mstream *st;

	if (!s->conn || s->closing) {
		*err = MOQ_ERR_STATE;
		return NULL;
	}
	rc = moq_quic_stream_open(s->conn, bidi, &sid);
	if (rc < 0) {
		*err = rc;
		return NULL;
	}
	st = st_new(s, sid, kind, 1);
	if (!st) {
		moq_quic_stream_reset(s->conn, sid, MOQ_CODE_CANCEL);
		*err = MOQ_ERR_NOMEM;
	}
	return st;
}

/* Write @len bytes (copied into the stream's tx buffer) and/or FIN. */
static int st_write(struct moq_session *s, struct mstream *st, const void *data, size_t len,
                    int fin)
{
	struct iovec iov = {NULL, 0};
	long rc;

	if (!s->conn || st->fin_sent || st->reset_sent)
		return MOQ_ERR_CLOSED;
	if (len) {
		uint8_t *p = tx_reserve(s, &st->tx, len);
		if (!p)
			return MOQ_ERR_NOMEM;
		memcpy(p, data, len);
		iov.iov_base = p;
		iov.iov_len = len;
	}
	rc = moq_quic_stream_write(s->conn, st->sid, &iov, len ? 1 : 0, fin);
	if (rc < 0)
		return (int)rc;
	st->tx_off += len;
	if (fin)
		st->fin_sent = 1;
	return 0;
}

/* Encode @m (prefixed with the stream type when @stype >= 0) and write it. */
static int st_send(struct moq_session *s, struct mstream *st, int64_t stype,
                   const struct moq_msg *m, int fin)
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
	if (m) {
		rc = moq_msg_encode(buf + off, sizeof(buf) - off, s->v, m);
		if (rc < 0)
			return rc;
		off += (size_t)rc;
	}
	return st_write(s, st, buf, off, fin);
}

static void st_reset(struct moq_session *s, struct mstream *st, uint64_t code)
{
	if (!s->conn)
		return;
	if (!st->fin_sent && !st->reset_sent && (st->local || !(st->sid & 2))) {
		moq_quic_stream_reset(s->conn, st->sid, code);
		st->reset_sent = 1;
	}
}

/* Refuse a peer stream: stop its sending side and reset ours. */
static void st_refuse(struct moq_session *s, struct mstream *st, uint64_t code)
{
	if (!s->conn)
		return;
	if (!st->rx_fin)
		moq_quic_stream_stop_sending(s->conn, st->sid, code);
	st_reset(s, st, code);
	st->kind = SK_IGNORE;
}

/* ----------------------------------------------------- origin table */

static struct bcast *bcast_find(struct moq_node *n, const char *p, size_t len)
{
	for (struct bcast *b = n->bcasts; b; b = b->next)
		if (b->len == len && memcmp(b->path, p, len) == 0)
			return b;
	return NULL;
}

/* Whether announce stream @st (ANN_IN of @s) should hear about @bc. */
static bool ann_match(struct moq_session *s, struct mstream *st, struct bcast *bc, size_t *off)
{
	if (!s->server && s->role == MOQ_ROLE_SUBSCRIBER)
		return false; /* a subscribe-only client session publishes nothing */
	if (bc->pub == s)
		return false; /* never echo a broadcast to its publisher */
	if (!moq_path_has_prefix(st->prefix, st->plen, bc->path, bc->len, off))
		return false;
	/* PROTOCOL.md, Announce: loop prevention. */
	if (hops_have(bc->hops, bc->nhops, st->exclude_hop) ||
	    hops_have(bc->hops, bc->nhops, s->peer_origin))
		return false;
	return bc->nhops + 1 <= MOQ_MAX_HOPS;
}

static int ann_send(struct moq_session *s, struct mstream *st, struct bcast *bc, size_t off,
                    int active)
{
	struct moq_msg m = {.type = MOQ_MSG_ANNOUNCE};
	struct moq_announce *a = &m.u.announce;

	a->status = active ? MOQ_ANNOUNCE_ACTIVE : MOQ_ANNOUNCE_ENDED;
	a->suffix.p = bc->path + off;
	a->suffix.len = bc->len - off;
	a->hop_count = bc->nhops;
	memcpy(a->hops, bc->hops, bc->nhops * sizeof(bc->hops[0]));
	/* lite-05: the receiver stamps our origin (from ANNOUNCE_OK); earlier
	 * versions carry the sender's own hop. */
	if (s->v < MOQ_LITE_05)
		a->hops[a->hop_count++] = s->n->cfg.origin;
	return st_send(s, st, -1, &m, 0);
}

/* Tell every matching announce stream of every session about @bc. */
static void ann_notify(struct moq_node *n, struct bcast *bc, int active)
{
	for (struct moq_session *s = n->sessions; s; s = s->next) {
		if (s->closing || !s->nann_in)
			continue;
		for (uint32_t i = 0; i < s->streams.cap; i++) {
			struct mstream *st = s->streams.vals[i];
			size_t off;
			if (!st || st->kind != SK_ANN_IN || !st->got_first || st->fin_sent)
				continue;
			if (ann_match(s, st, bc, &off))
				ann_send(s, st, bc, off, active);
		}
	}
}

static struct bcast *bcast_add(struct moq_node *n, const char *p, size_t len)
{
	struct bcast *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->path = memdup0(p, len);
	if (!b->path) {
		free(b);
		return NULL;
	}
	b->len = len;
	b->next = n->bcasts;
	n->bcasts = b;
	n->st.broadcasts++;
	return b;
}

static void bcast_unlink(struct moq_node *n, struct bcast *bc)
{
	for (struct bcast **pp = &n->bcasts; *pp; pp = &(*pp)->next)
		if (*pp == bc) {
			*pp = bc->next;
			break;
		}
	n->st.broadcasts--;
	free(bc->path);
	free(bc);
}

/* --------------------------------------------------------- upstreams */

/* PROTOCOL.md, Priority: priority max, ordered only if all ask,
 * max_latency max, start min, end max (any unbounded: unbounded). Grows
 * aggregate @a by one subscriber's parameters @p. */
static void agg_add(struct moq_subscribe_update *a, const struct moq_sub_params *p)
{
	if (p->priority > a->priority)
		a->priority = p->priority;
	a->ordered = a->ordered && p->ordered;
	if (p->max_latency_ms > a->max_latency_ms)
		a->max_latency_ms = p->max_latency_ms;
	if (a->start != MOQ_GROUP_NONE && (p->start == MOQ_GROUP_NONE || p->start < a->start))
		a->start = p->start;
	if (a->end != MOQ_GROUP_NONE && (p->end == MOQ_GROUP_NONE || p->end > a->end))
		a->end = p->end;
}

static void up_agg(struct upstream *up, struct moq_subscribe_update *a)
{
	bool first = true;

	memset(a, 0, sizeof(*a));
	a->start = a->end = MOQ_GROUP_NONE;
	for (struct dsub *d = up->dsubs; d; d = d->unext) {
		if (first) {
			*a = (struct moq_subscribe_update){d->p.priority, d->p.ordered,
			                                   d->p.max_latency_ms, d->p.start,
			                                   d->p.end};
			first = false;
			continue;
		}
		agg_add(a, &d->p);
	}
	/* A live subscriber (no start) needs the live edge: the upstream
	 * subscription starts there too. */
	for (struct dsub *d = up->dsubs; d; d = d->unext)
		if (d->p.start == MOQ_GROUP_NONE)
			a->start = MOQ_GROUP_NONE;
}

/* Strip the session's root from a full path for the wire. */
static struct moq_str wire_path(const struct moq_session *s, const char *p, size_t len)
{
	size_t off = 0;

	if (s->rootlen && moq_path_has_prefix(s->root, s->rootlen, p, len, &off))
		return (struct moq_str){p + off, len - off};
	return (struct moq_str){p, len};
}

static struct usub *usub_open(struct moq_session *s, const char *b, size_t bl, const char *t,
                              size_t tl, const struct moq_subscribe_update *p, int *err)
{
	struct usub *us;
	struct mstream *st;
	struct moq_msg m = {.type = MOQ_MSG_SUBSCRIBE};

	if (s->nusubs >= s->n->cfg.max_subscriptions) {
		*err = MOQ_ERR_LIMIT;
		return NULL;
	}
	us = calloc(1, sizeof(*us));
	if (!us || !(us->bcast = memdup0(b, bl)) || !(us->track = memdup0(t, tl))) {
		if (us)
			free(us->bcast);
		free(us);
		*err = MOQ_ERR_NOMEM;
		return NULL;
	}
	us->blen = bl;
	us->tlen = tl;
	st = st_open(s, 1, SK_SUB_OUT, err);
	if (!st) {
		free(us->bcast);
		free(us->track);
		free(us);
		return NULL;
	}
	us->s = s;
	us->st = st;
	us->id = s->next_sub_id++;
	st->us = us;
	m.u.subscribe =
	        (struct moq_subscribe){us->id,     wire_path(s, b, bl), {t, tl},  p->priority,
	                               p->ordered, p->max_latency_ms,   p->start, p->end};
	*err = st_send(s, st, MOQ_STREAM_SUBSCRIBE, &m, 0);
	us->next = s->usubs;
	s->usubs = us;
	s->nusubs++;
	return us;
}

/* Unsubscribe: FIN our side (PROTOCOL.md, Subscribe: FIN = unsubscribe). */
static void usub_close(struct usub *us)
{
	if (us->closed)
		return;
	us->closed = 1;
	if (us->st && us->s->conn)
		st_write(us->s, us->st, NULL, 0, 1);
}

static void up_open(struct upstream *up, struct moq_session *pub)
{
	int err;

	up->us = usub_open(pub, up->path, up->plen, up->track, up->tlen, &up->agg, &err);
	if (up->us) {
		up->us->up = up;
		up->n->st.upstream_subs++;
	}
}

/* Re-aggregate after a change of subscribers; update or open upstream. */
/* Apply aggregate @a to @up: open the upstream subscription, or update it
 * when the aggregate changed. */
static void up_apply(struct upstream *up, const struct moq_subscribe_update *a)
{
	struct moq_node *n = up->n;

	up->agg_set = 1;
	if (!up->us) {
		struct bcast *bc = bcast_find(n, up->path, up->plen);
		up->agg = *a;
		if (bc && bc->pub && !bc->pub->closing) {
			up_open(up, bc->pub);
		} else if (bc && bc->owner && !up->remote_owner) {
			/* Another worker owns the publisher: it subscribes, we read
			 * the shared cache. */
			up->remote_owner = bc->owner;
			hub_send(n, bc->owner, HUB_SUB, up->path, up->plen, up->track, up->tlen);
		}
		return;
	}
	if (memcmp(a, &up->agg, sizeof(*a)) != 0) {
		struct moq_msg m = {.type = MOQ_MSG_SUBSCRIBE_UPDATE};
		up->agg = *a;
		m.u.subscribe_update = *a;
		if (!up->us->closed)
			st_send(up->us->s, up->us->st, -1, &m, 0);
	}
}

/* Recompute @up's aggregate over all its subscribers (or free it when none
 * is left). */
static void up_recompute(struct upstream *up)
{
	struct moq_subscribe_update a;

	if (!up->dsubs && !up->nremote) {
		up_free(up);
		return;
	}
	up_agg(up, &a);
	up_apply(up, &a);
}

/* A subscriber of @up left, changed its parameters, or a worker's interest
 * changed: the aggregate of a running upstream subscription is recomputed
 * at the next poll, once however many changed (a walk over every subscriber
 * per change is quadratic in a ramp or a mass disconnect). */
static void up_changed(struct upstream *up)
{
	struct moq_node *n = up->n;

	/* Opening (no upstream subscription yet) and closing (no subscriber
	 * left) happen now; only an update of a running one waits. */
	if (!up->us || (!up->dsubs && !up->nremote)) {
		up_recompute(up);
		return;
	}
	if (up->dirty)
		return;
	up->dirty = 1;
	up->dnext = n->dirty_ups;
	n->dirty_ups = up;
}

/* Subscriber @d joined @up: the aggregate grows by its parameters alone
 * (PROTOCOL.md, Priority; the rules of up_agg). */
static void up_added(struct upstream *up, const struct dsub *d)
{
	struct moq_subscribe_update a = up->agg;

	if (up->dirty || !up->agg_set || !up->us || up->ndsubs <= 1 || up->nremote) {
		up_changed(up);
		return;
	}
	agg_add(&a, &d->p);
	up_apply(up, &a);
}

static void ups_settle(struct moq_node *n)
{
	struct upstream *up;

	while ((up = n->dirty_ups)) {
		n->dirty_ups = up->dnext;
		up->dirty = 0;
		up->dnext = NULL;
		up_recompute(up);
	}
}

/* Something changed for every subscriber of @up (it ended, ...). */
static void up_touch(struct upstream *up)
{
	for (struct dsub *d = up->dsubs; d; d = d->unext)
		sess_mark(d->s);
}

static void up_free(struct upstream *up)
{
	struct moq_node *n = up->n;
	if (up->us) {
		usub_close(up->us);
		up->us->up = NULL;
		up->us = NULL;
		n->st.upstream_subs--;
	}
	if (up->remote_owner)
		hub_send(n, up->remote_owner, HUB_UNSUB, up->path, up->plen, up->track, up->tlen);
	if (up->counted)
		bound_put(n, 1);
	if (up->dirty)
		for (struct upstream **pp = &n->dirty_ups; *pp; pp = &(*pp)->dnext)
			if (*pp == up) {
				*pp = up->dnext;
				break;
			}
	for (struct upstream **pp = &n->ups; *pp; pp = &(*pp)->next)
		if (*pp == up) {
			*pp = up->next;
			break;
		}
	if (up->ct) {
		uint64_t latest;
		/* A track that never got a group (a SUBSCRIBE to a name the
		 * publisher does not have) is not kept: clients cannot grow the
		 * cache's table with made-up names. With a hub another worker may
		 * still read it, so it stays. */
		if (!n->hub && moq_cache_track_latest(up->ct, &latest) == MOQ_ERR_AGAIN)
			moq_cache_track_drop(up->ct);
		moq_cache_track_unref(up->ct);
	}
	free(up->path);
	free(up->track);
	free(up);
}

/* The upstream of track @t of @p, created when missing. @limited (NULL: a
 * hub request, which the asking node counted) is set when cfg.max_tracks
 * refuses a new one. */
static struct upstream *up_get(struct moq_node *n, const char *p, size_t pl, const char *t,
                               size_t tl, int *limited)
{
	struct upstream *up;

	for (up = n->ups; up; up = up->next)
		if (up->plen == pl && up->tlen == tl && memcmp(up->path, p, pl) == 0 &&
		    memcmp(up->track, t, tl) == 0) {
			uint64_t x;
			/* Another worker restarted the track: use the new one. */
			if (moq_cache_track_latest(up->ct, &x) == MOQ_ERR_CLOSED) {
				struct moq_cache_track *nt =
				        moq_cache_track_lookup(n->cfg.cache, p, pl, t, tl);
				if (nt) {
					moq_cache_track_unref(up->ct);
					up->ct = nt;
				}
			}
			return up;
		}
	if (limited && !bound_take(n, 1)) {
		*limited = 1;
		n->st.tracks_refused_limit++;
		n->st.refused_bounds++;
		return NULL;
	}
	up = calloc(1, sizeof(*up));
	if (!up) {
		if (limited)
			bound_put(n, 1);
		return NULL;
	}
	up->counted = limited != NULL;
	up->n = n;
	up->path = memdup0(p, pl);
	up->track = memdup0(t, tl);
	up->plen = pl;
	up->tlen = tl;
	if (!up->path || !up->track)
		goto fail;
	up->ct = moq_cache_track_lookup(n->cfg.cache, p, pl, t, tl);
	if (!up->ct) {
		int rc = moq_cache_track_create(n->cfg.cache, p, pl, t, tl, &n->cfg.track, &up->ct);
		/* Another worker may have created it meanwhile. */
		if (rc == MOQ_ERR_EXISTS)
			up->ct = moq_cache_track_lookup(n->cfg.cache, p, pl, t, tl);
		if (!up->ct)
			goto fail;
	}
	up->next = n->ups;
	n->ups = up;
	return up;
fail:
	if (up->counted)
		bound_put(n, 1);
	free(up->path);
	free(up->track);
	free(up);
	return NULL;
}

/* ------------------------------------------------------ subscriptions */

static struct dsub *dsub_find(struct moq_session *s, uint64_t id)
{
	for (struct dsub *d = s->dsubs; d; d = d->next)
		if (d->id == id)
			return d;
	return NULL;
}

/* Leave the upstream (the last subscriber closes it). */
static void dsub_detach(struct dsub *d)
{
	struct upstream *up = d->up;

	if (!up)
		return;
	for (struct dsub **pp = &up->dsubs; *pp; pp = &(*pp)->unext)
		if (*pp == d) {
			*pp = d->unext;
			break;
		}
	up->ndsubs--;
	d->up = NULL;
	up_changed(up);
}

static void gout_reset(struct moq_session *s, struct gout *go, uint64_t code);
static void gout_resort(struct moq_session *s);
static int up_restart(struct upstream *up);

/* The subscriber unsubscribed (or reset the stream): cancel in-flight
 * groups, leave the upstream, FIN our side. */
static void dsub_cancel(struct moq_session *s, struct dsub *d)
{
	sess_mark(s);
	for (struct gout *go = s->gouts; go; go = go->next)
		if (go->d == d && !go->fin && !go->reset)
			gout_reset(s, go, MOQ_CODE_CANCEL);
	dsub_detach(d);
	d->done = 1;
	if (d->counted) {
		d->counted = 0;
		bound_put(s->n, 0);
	}
	if (d->st && !d->st->fin_sent && !d->st->reset_sent)
		st_write(s, d->st, NULL, 0, 1);
}

static void dsub_free(struct moq_session *s, struct dsub *d)
{
	dsub_detach(d);
	for (struct gout *go = s->gouts; go; go = go->next)
		if (go->d == d)
			go->d = NULL;
	for (struct gout *go = s->gdone; go; go = go->next)
		if (go->d == d)
			go->d = NULL;
	for (struct dsub **pp = &s->dsubs; *pp; pp = &(*pp)->next)
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	s->ndsubs--;
	if (d->counted)
		bound_put(s->n, 0);
	if (d->track)
		moq_cache_track_unref(d->track);
	if (d->st)
		d->st->d = NULL;
	free(d->path);
	free(d);
}

/* SUBSCRIBE from the peer (PROTOCOL.md, Subscribe). A request beyond a
 * configured bound (per session, cfg.max_subscribers, cfg.max_tracks) is
 * refused with reset 11 bounds (PROTOCOL.md, Error codes). */
static void on_subscribe(struct moq_session *s, struct mstream *st, const struct moq_subscribe *m)
{
	struct moq_node *n = s->n;
	char bbuf[4200], *full = NULL;
	size_t blen, flen;
	int rc, limited = 0;
	uint64_t code;
	struct bcast *bc;
	struct dsub *d = NULL;

	if (dsub_find(s, m->id)) {
		sess_fail(s, MOQ_CODE_DUPLICATE); /* ids are unique per session */
		return;
	}
	if (s->ndsubs >= n->cfg.max_subscriptions) {
		n->st.refused_bounds++;
		st_refuse(s, st, MOQ_CODE_BOUNDS);
		return;
	}
	rc = moq_path_norm(bbuf, sizeof(bbuf), m->broadcast.p, m->broadcast.len);
	if (rc < 0) {
		sess_fail(s, MOQ_CODE_DECODE);
		return;
	}
	if (!bound_take(n, 0)) {
		n->st.subs_refused_limit++;
		n->st.refused_bounds++;
		st_refuse(s, st, MOQ_CODE_BOUNDS);
		return;
	}
	blen = (size_t)rc;
	code = MOQ_CODE_BOUNDS;
	full = path_join(s->root ? s->root : "", s->rootlen, bbuf, blen, &flen);
	if (!full)
		goto fail_refuse;
	bc = n->cfg.cache ? bcast_find(n, full, flen) : NULL;
	code = MOQ_CODE_NOT_FOUND;
	if (!bc || bc->pub == s)
		goto fail_refuse;
	code = MOQ_CODE_BOUNDS;
	d = calloc(1, sizeof(*d));
	if (!d)
		goto fail_refuse;
	d->s = s;
	d->st = st;
	d->id = m->id;
	d->p = (struct moq_sub_params){m->priority, m->ordered, m->max_latency_ms, m->start,
	                               m->end};
	d->end_code = -1;
	d->counted = 1;
	if (bc->local) {
		d->track =
		        moq_cache_track_lookup(n->cfg.cache, full, flen, m->track.p, m->track.len);
		code = MOQ_CODE_NOT_FOUND;
		if (!d->track)
			goto fail_refuse;
	} else {
		struct upstream *up = up_get(n, full, flen, m->track.p, m->track.len, &limited);
		code = limited ? MOQ_CODE_BOUNDS : MOQ_CODE_UNROUTABLE;
		if (!up)
			goto fail_refuse;
		d->up = up;
		d->unext = up->dsubs;
		up->dsubs = d;
		up->ndsubs++;
		moq_cache_track_ref(up->ct);
		d->track = up->ct;
	}
	d->path = full;
	d->plen = flen;
	st->d = d;
	if (!d->up && !s->watched) {
		/* a local broadcast's track: moq_node_poll watches it */
		s->watched = 1;
		s->wnext = n->watch;
		n->watch = s;
	}
	sess_mark(s);
	d->next = s->dsubs;
	s->dsubs = d;
	s->ndsubs++;
	if (d->up)
		up_added(d->up, d);
	return;
fail_refuse:
	free(d);
	free(full);
	bound_put(n, 0);
	st_refuse(s, st, code);
}

static void on_subscribe_update(struct moq_session *s, struct mstream *st,
                                const struct moq_subscribe_update *m)
{
	struct dsub *d = st->d;

	sess_mark(s);
	(void)s;
	if (!d)
		return;
	d->p.priority = m->priority;
	d->p.ordered = m->ordered;
	d->p.max_latency_ms = m->max_latency_ms;
	d->p.end = m->end;
	for (struct gout *go = s->gouts; go; go = go->next)
		if (go->d == d)
			go->priority = m->priority;
	gout_resort(s);
	if (d->up)
		up_changed(d->up);
}

/* ------------------------------------------------------------ announce */

static int ann_in_start(struct moq_session *s, struct mstream *st, const struct moq_announce_req *r)
{
	struct moq_node *n = s->n;
	char buf[4200];
	int rc;
	uint64_t count = 0;

	if (s->nann_in >= n->cfg.max_announces) {
		n->st.refused_bounds++;
		st_refuse(s, st, MOQ_CODE_BOUNDS);
		return 0;
	}
	rc = moq_path_norm(buf, sizeof(buf), r->prefix.p, r->prefix.len);
	if (rc < 0)
		return MOQ_CODE_DECODE;
	st->prefix = path_join(s->root ? s->root : "", s->rootlen, buf, (size_t)rc, &st->plen);
	if (!st->prefix) {
		st_refuse(s, st, MOQ_CODE_BOUNDS);
		return 0;
	}
	st->exclude_hop = r->exclude_hop;
	s->nann_in++;
	for (struct bcast *bc = n->bcasts; bc; bc = bc->next) {
		size_t off;
		if (ann_match(s, st, bc, &off))
			count++;
	}
	/* lite-05: ANNOUNCE_OK { our hop id, how many initial announces }. */
	if (s->v >= MOQ_LITE_05) {
		struct moq_msg m = {.type = MOQ_MSG_ANNOUNCE_OK};
		m.u.announce_ok.origin = n->cfg.origin;
		m.u.announce_ok.active = count;
		st_send(s, st, -1, &m, 0);
	}
	for (struct bcast *bc = n->bcasts; bc; bc = bc->next) {
		size_t off;
		if (ann_match(s, st, bc, &off))
			ann_send(s, st, bc, off, 1);
	}
	return 0;
}

/* End every upstream of @bc's path: its subscribers get END. */
static void bcast_end(struct moq_node *n, struct bcast *bc)
{
	if (!bc->owner)
		hub_announce(n, bc, 0);
	ann_notify(n, bc, 0);
	tinfo_drop_path(n, bc->path, bc->len);
	for (struct upstream *up = n->ups; up; up = up->next)
		if (up->plen == bc->len && memcmp(up->path, bc->path, bc->len) == 0) {
			up->ended = 1;
			up->end_seq = UINT64_MAX;
			up_touch(up);
			if (up->us) {
				usub_close(up->us);
				up->us->up = NULL;
				up->us = NULL;
				n->st.upstream_subs--;
			}
		}
	bcast_unlink(n, bc);
}

/* An ANNOUNCE on a request we made. */
static int on_announce(struct moq_session *s, struct mstream *st, const struct moq_announce *a)
{
	struct moq_node *n = s->n;
	char sbuf[4200], *full;
	size_t flen;
	int rc;
	uint64_t hops[MOQ_MAX_HOPS + 1];
	uint32_t nh = a->hop_count;
	int active = a->status != MOQ_ANNOUNCE_ENDED;
	struct bcast *bc;

	rc = moq_path_norm(sbuf, sizeof(sbuf), a->suffix.p, a->suffix.len);
	if (rc < 0)
		return MOQ_CODE_DECODE;
	full = path_join(st->prefix, st->plen, sbuf, (size_t)rc, &flen);
	if (!full)
		return MOQ_CODE_BOUNDS;
	memcpy(hops, a->hops, nh * sizeof(hops[0]));
	/* lite-05: stamp the responder's origin from ANNOUNCE_OK (0 = none). */
	if (s->v >= MOQ_LITE_05 && st->ann_origin && nh < MOQ_MAX_HOPS)
		hops[nh++] = st->ann_origin;
	if (active && hops_have(hops, nh, n->cfg.origin)) {
		n->st.loops_refused++; /* PROTOCOL.md, Announce: loop prevention */
		free(full);
		return 0;
	}
	if (!n->cfg.relay) {
		if (n->cfg.cb && n->cfg.cb->announce)
			n->cfg.cb->announce(s, n->cfg.user, full, flen, active);
		free(full);
		return 0;
	}
	bc = bcast_find(n, full, flen);
	if (active) {
		int fresh = 0;
		if (!bc) {
			bc = bcast_add(n, full, flen);
			if (!bc) {
				free(full);
				return 0;
			}
			fresh = 1;
		} else if (bc->local) {
			free(full);
			return 0; /* our own broadcast wins */
		}
		if (bc->owner) {
			/* Another worker had it (its publisher reconnected here):
			 * ours now. */
			uint32_t old = bc->owner;
			bc->owner = 0;
			for (struct upstream *up = n->ups; up; up = up->next)
				if (up->remote_owner == old && up->plen == flen &&
				    memcmp(up->path, full, flen) == 0) {
					hub_send(n, old, HUB_UNSUB, up->path, up->plen, up->track,
					         up->tlen);
					up->remote_owner = 0;
				}
		}
		if (bc->pub != s) {
			/* A new publisher (or a reconnect within the linger): splice
			 * the upstream subscriptions over to it. */
			bc->pub = s;
			bc->linger_until = 0;
			for (struct upstream *up = n->ups; up; up = up->next)
				if (up->plen == flen && memcmp(up->path, full, flen) == 0 &&
				    !up->ended) {
					if (up->us) {
						usub_close(up->us);
						up->us->up = NULL;
						up->us = NULL;
						n->st.upstream_subs--;
					}
					if (up->dsubs || up->nremote)
						up_open(up, s);
				}
		}
		bc->nhops = nh;
		memcpy(bc->hops, hops, nh * sizeof(hops[0]));
		if (fresh)
			ann_notify(n, bc, 1);
		hub_announce(n, bc, 1);
	} else if (bc && bc->pub == s) {
		bcast_end(n, bc);
	}
	free(full);
	return 0;
}

/* The announce stream we opened closed: all of its broadcasts are gone. */
static void ann_out_gone(struct moq_session *s, struct mstream *st)
{
	struct moq_node *n = s->n;
	struct bcast *bc, *nx;

	if (!n->cfg.relay)
		return;
	for (bc = n->bcasts; bc; bc = nx) {
		nx = bc->next;
		if (bc->pub == s &&
		    moq_path_has_prefix(st->prefix, st->plen, bc->path, bc->len, NULL))
			bcast_end(n, bc);
	}
}

static int ann_request(struct moq_session *s, const char *prefix, size_t len, int *err)
{
	struct mstream *st;
	struct moq_msg m = {.type = MOQ_MSG_ANNOUNCE_REQ};
	size_t plen;
	char *p = path_dup(prefix, len, &plen);

	if (!p) {
		*err = MOQ_ERR_INVAL;
		return -1;
	}
	st = st_open(s, 1, SK_ANN_OUT, err);
	if (!st) {
		free(p);
		return -1;
	}
	/* Paths heard on this stream are rooted at the session's root. */
	st->prefix = path_join(s->root ? s->root : "", s->rootlen, p, plen, &st->plen);
	m.u.announce_req.prefix = (struct moq_str){p, plen};
	m.u.announce_req.exclude_hop = s->n->cfg.origin;
	*err = st_send(s, st, MOQ_STREAM_ANNOUNCE, &m, 0);
	free(p);
	return *err;
}

/* ---------------------------------------------------------- track info */

static void tinfo_free(struct tinfo *ti)
{
	free(ti->path);
	free(ti->track);
	free(ti);
}

static struct tinfo *tinfo_new(const char *p, size_t pl, const char *t, size_t tl)
{
	struct tinfo *ti = calloc(1, sizeof(*ti));
	if (!ti)
		return NULL;
	ti->path = memdup0(p, pl);
	ti->track = memdup0(t, tl);
	if (!ti->path || !ti->track) {
		free(ti->path);
		free(ti->track);
		free(ti);
		return NULL;
	}
	ti->plen = pl;
	ti->tlen = tl;
	return ti;
}

/* The relay's TRACK_INFO cache entry for @p / @t: bounded (MAX_TINFO; then
 * NULL and the caller answers defaults), freed when the broadcast ends. */
static struct tinfo *tinfo_get(struct moq_node *n, const char *p, size_t pl, const char *t,
                               size_t tl)
{
	struct tinfo *ti;

	for (ti = n->tinfos; ti; ti = ti->next)
		if (ti->plen == pl && ti->tlen == tl && memcmp(ti->path, p, pl) == 0 &&
		    memcmp(ti->track, t, tl) == 0)
			return ti;
	if (n->ntinfos >= MAX_TINFO)
		return NULL;
	ti = tinfo_new(p, pl, t, tl);
	if (!ti)
		return NULL;
	ti->next = n->tinfos;
	n->tinfos = ti;
	n->ntinfos++;
	return ti;
}

static void track_reply(struct moq_session *s, struct mstream *st, const struct moq_track_info *t);
static const struct moq_track_info default_info;

/* @bc ended: forget what we learned about its tracks; waiting requests get
 * the defaults. */
static void tinfo_drop_path(struct moq_node *n, const char *p, size_t pl)
{
	for (struct tinfo **pp = &n->tinfos; *pp;) {
		struct tinfo *ti = *pp;
		if (ti->plen != pl || memcmp(ti->path, p, pl) != 0) {
			pp = &ti->next;
			continue;
		}
		for (struct moq_session *s = n->sessions; s; s = s->next)
			for (uint32_t i = 0; i < s->streams.cap; i++) {
				struct mstream *st = s->streams.vals[i];
				if (!st || st->ti != ti)
					continue;
				if (st->kind == SK_TRACK_IN)
					track_reply(s, st, &default_info);
				st->ti = NULL;
			}
		*pp = ti->next;
		n->ntinfos--;
		tinfo_free(ti);
	}
}

static void track_reply(struct moq_session *s, struct mstream *st, const struct moq_track_info *t)
{
	struct moq_msg m = {.type = MOQ_MSG_TRACK_INFO};

	m.u.track_info = *t;
	st_send(s, st, -1, &m, 1);
	st->ti = NULL;
}

static const struct moq_track_info default_info = {0, false, MOQ_DEFAULT_MAX_LATENCY_MS, 1000};

/* TRACK_INFO for @ti is known: answer the requests waiting here and the
 * other workers that asked us through the hub. */
static void tinfo_learned(struct moq_node *n, struct tinfo *ti, const struct moq_track_info *info)
{
	ti->have = 1;
	ti->ti = *info;
	for (struct moq_session *o = n->sessions; o; o = o->next)
		for (uint32_t i = 0; i < o->streams.cap; i++) {
			struct mstream *w = o->streams.vals[i];
			if (w && w->kind == SK_TRACK_IN && w->ti == ti)
				track_reply(o, w, info);
		}
	for (uint32_t k = 0; ti->hub_wait && k < 64; k++)
		if (ti->hub_wait & (1ull << k)) {
			struct hub_msg *m = hub_msg_new(n, HUB_TRACK_INFO, ti->path, ti->plen,
			                                ti->track, ti->tlen);
			ti->hub_wait &= ~(1ull << k);
			if (m) {
				m->ti = *info;
				hub_post(n->hub, k, m);
			}
		}
}

/* Ask whoever can answer TRACK for @ti: the publisher (lite-05), the worker
 * that owns the broadcast, or nobody (the defaults). */
static void tinfo_ask(struct moq_node *n, struct bcast *bc, struct tinfo *ti)
{
	struct moq_session *pub = bc->pub;

	if (ti->asked || ti->have)
		return;
	ti->asked = 1;
	if (pub && pub->v >= MOQ_LITE_05 && !pub->closing) {
		int err;
		struct mstream *ts = st_open(pub, 1, SK_TRACK_OUT, &err);
		struct moq_msg m = {.type = MOQ_MSG_TRACK};
		if (ts) {
			ts->ti = ti;
			m.u.track.broadcast = wire_path(pub, ti->path, ti->plen);
			m.u.track.track = (struct moq_str){ti->track, ti->tlen};
			st_send(pub, ts, MOQ_STREAM_TRACK, &m, 1);
			return;
		}
	} else if (!pub && bc->owner) {
		hub_send(n, bc->owner, HUB_TRACK, ti->path, ti->plen, ti->track, ti->tlen);
		return;
	}
	/* No TRACK stream upstream (lite-03/04, or no publisher): defaults. */
	tinfo_learned(n, ti, &default_info);
}

static void on_track(struct moq_session *s, struct mstream *st, const struct moq_track *t)
{
	struct moq_node *n = s->n;
	char bbuf[4200], *full;
	size_t flen;
	int rc = moq_path_norm(bbuf, sizeof(bbuf), t->broadcast.p, t->broadcast.len);
	struct bcast *bc;
	struct tinfo *ti;

	if (rc < 0) {
		sess_fail(s, MOQ_CODE_DECODE);
		return;
	}
	full = path_join(s->root ? s->root : "", s->rootlen, bbuf, (size_t)rc, &flen);
	bc = full ? bcast_find(n, full, flen) : NULL;
	if (!bc) {
		free(full);
		st_refuse(s, st, MOQ_CODE_NOT_FOUND);
		return;
	}
	if (bc->local) {
		struct moq_track_info info = default_info;
		info.timescale = bc->timescale ? bc->timescale : 1000;
		free(full);
		track_reply(s, st, &info);
		return;
	}
	ti = tinfo_get(n, full, flen, t->track.p, t->track.len);
	free(full);
	if (!ti) {
		track_reply(s, st, &default_info); /* over the bound: not cached */
		return;
	}
	if (ti->have) {
		track_reply(s, st, &ti->ti);
		return;
	}
	st->ti = ti;
	tinfo_ask(n, bc, ti);
}

static void on_track_info(struct moq_session *s, struct mstream *st,
                          const struct moq_track_info *info)
{
	struct moq_node *n = s->n;
	struct tinfo *ti = st->ti;

	if (!ti)
		return;
	ti->have = 1;
	ti->ti = *info;
	st->ti = NULL;
	if (!n->cfg.relay) {
		/* the client's request owns its entry */
		if (n->cfg.cb && n->cfg.cb->track_info)
			n->cfg.cb->track_info(s, n->cfg.user, ti->path, ti->plen, ti->track,
			                      ti->tlen, info);
		tinfo_free(ti);
		return;
	}
	tinfo_learned(n, ti, info);
}

/* ---------------------------------------------------------------- fanout */

static void gout_reset(struct moq_session *s, struct gout *go, uint64_t code)
{
	struct moq_node *n = s->n;

	if (go->reset || (go->fin && go->acked >= go->written))
		return;
	go->reset = 1;
	/* RFC 9000, 3.1: RESET_STREAM is allowed after FIN until all data is
	 * acknowledged; the stale tail is then never retransmitted. */
	if (s->conn && !go->st->reset_sent) {
		moq_quic_stream_reset(s->conn, go->st->sid, code);
		go->st->reset_sent = 1;
	}
	/* Reset data is never acknowledged: stop billing it. */
	s->unacked -= go->written - go->acked;
	go->written = go->acked;
	switch (code) {
	case MOQ_CODE_OLD:
		n->st.resets_old++;
		break;
	case MOQ_CODE_EVICTED:
		n->st.resets_evicted++;
		break;
	case MOQ_CODE_LAGGED:
		n->st.resets_lagged++;
		break;
	case MOQ_CODE_DROPPED:
		n->st.resets_dropped++;
		break;
	default:
		n->st.resets_cancel++;
		break;
	}
}

/* Cache status of a group that went stale: expired, evicted or pushed out
 * of the window; its stream is reset with err_code(). */
static inline bool group_stale(int stc)
{
	return stc == MOQ_ERR_EVICTED || stc == MOQ_ERR_OLD || stc == MOQ_ERR_LAGGED;
}

static uint64_t err_code(int err)
{
	switch (err) {
	case MOQ_ERR_OLD:
		return MOQ_CODE_OLD;
	case MOQ_ERR_EVICTED:
		return MOQ_CODE_EVICTED;
	case MOQ_ERR_LAGGED:
		return MOQ_CODE_LAGGED;
	case MOQ_ERR_DROPPED:
		return MOQ_CODE_DROPPED;
	default:
		return MOQ_CODE_CANCEL;
	}
}

/* PROTOCOL.md, Priority: subscriber priority, then newest group; < 0 when
 * @x goes before @y. */
static int gout_order(const struct gout *x, const struct gout *y)
{
	if (x->priority != y->priority)
		return x->priority > y->priority ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq > y->seq ? -1 : 1;
	return 0;
}

/* The live list is kept in send order, so fanout walks it without sorting
 * and stops where the budget ends. A new group is the newest: it goes in
 * at the head of its priority, usually the list's head. */
static void gout_link(struct moq_session *s, struct gout *go)
{
	struct gout **pp = &s->gouts;

	while (*pp && gout_order(*pp, go) <= 0)
		pp = &(*pp)->next;
	go->next = *pp;
	*pp = go;
}

/* Priorities changed (SUBSCRIBE_UPDATE): put the live list back in order. */
static void gout_resort(struct moq_session *s)
{
	struct gout *go = s->gouts;

	s->gouts = NULL;
	while (go) {
		struct gout *nx = go->next;
		gout_link(s, go);
		go = nx;
	}
}

static struct gout *gout_new(struct moq_session *s, struct mstream *st, struct moq_cache_group *g,
                             uint8_t priority)
{
	struct gout *go = gout_alloc(s);

	if (!go)
		return NULL;
	go->st = st;
	go->g = g;
	go->seq = moq_cache_group_seq(g);
	go->priority = priority;
	st->go = go;
	gout_link(s, go);
	s->ngouts++;
	return go;
}

/* Open one uni stream for group @g of subscription @d. */
static int gout_open(struct moq_session *s, struct dsub *d, struct moq_cache_group *g)
{
	int err;
	struct mstream *st = st_open(s, 0, SK_GROUP_OUT, &err);
	struct gout *go;
	uint8_t *h;

	if (!st)
		return err;
	go = gout_new(s, st, g, d->p.priority);
	if (!go) {
		st_reset(s, st, MOQ_CODE_CANCEL);
		return MOQ_ERR_NOMEM;
	}
	go->d = d;
	d->n_gouts++;
	/* moq-lite, Group: type 0x0, GROUP { subscribe id, sequence }: the only
	 * per-subscriber bytes of the stream (as st_send would write them). */
	h = tx_reserve(s, &st->tx, 32);
	if (h) {
		int hl = moq_group_hdr_encode(h, 32, d->id, go->seq);
		struct iovec iov = {h, hl > 0 ? (size_t)hl : 0};
		tx_unreserve(&st->tx, 32 - iov.iov_len);
		if (iov.iov_len && moq_quic_stream_write(s->conn, st->sid, &iov, 1, 0) >= 0)
			st->tx_off += iov.iov_len;
	}
	go->written = st->tx_off;
	s->unacked += st->tx_off;
	s->n->st.groups_out++;
	sess_mark(s);
	return 0;
}

#define MAX_IOV 128

/* Keep what QUIC holds for this session near its congestion window, so the
 * ranking (not the order of earlier writes) decides what goes out next:
 * unacknowledged bytes <= max(2 cwnd, 64 KiB), capped by the configured
 * session_queue. The cwnd is read (moq_quic_conn_get_info) only once the
 * floor is reached, at most once per visit. */
static bool budget_left(struct moq_session *s)
{
	struct moq_quic_conn_info ci;

	if (s->unacked < s->budget)
		return true;
	if (s->budget_fresh)
		return false;
	s->budget_fresh = 1;
	moq_quic_conn_get_info(s->conn, &ci);
	s->budget = 2 * ci.cwnd;
	if (s->budget < MIN_BUDGET)
		s->budget = MIN_BUDGET;
	if (s->budget > s->n->cfg.session_queue)
		s->budget = s->n->cfg.session_queue;
	return s->unacked < s->budget;
}

/* Write what is cached and not yet sent of @go, in batches, while the
 * session's unacknowledged budget allows. Returns bytes queued. */
static uint64_t gout_pump(struct moq_session *s, struct gout *go)
{
	struct moq_node *n = s->n;
	struct moq_cache_frame fb[32];
	struct iovec iov[MAX_IOV];
	unsigned batch = n->cfg.batch;
	uint64_t total = 0;
	int stc = 0;

	if (batch > 32)
		batch = 32;
	while (!go->fin && !go->reset && budget_left(s)) {
		int cnt = moq_cache_read_frames(go->g, &go->cur, fb, batch);
		unsigned ni = 0;
		uint64_t bytes = 0;
		long rc;
		int i, fin = 0;

		if (cnt == 0)
			break;
		if (cnt < 0) {
			if (cnt == MOQ_ERR_CLOSED) {
				/* moq-lite, Group: FIN at a frame boundary = complete. */
				if (moq_quic_stream_write(s->conn, go->st->sid, NULL, 0, 1) >= 0) {
					go->fin = 1;
					go->st->fin_sent = 1;
					n->st.groups_fin++;
				}
			} else {
				gout_reset(s, go, err_code(cnt));
			}
			break;
		}
		for (i = 0; i < cnt; i++) {
			struct moq_cache_frame *f = &fb[i];
			if (ni + 2 > MAX_IOV)
				break; /* cannot happen with batch <= 32 and few pieces */
			if (f->start == 0) {
				uint8_t *h = tx_reserve(s, &go->st->tx, 16);
				int hl;
				if (!h) {
					gout_reset(s, go, MOQ_CODE_CANCEL);
					return total;
				}
				hl = moq_frame_hdr_encode(h, 16, s->v, f->timestamp - go->prev_ts,
				                          f->size);
				if (hl < 0)
					hl = 0;
				tx_unreserve(&go->st->tx, 16 - (size_t)hl);
				go->prev_ts = f->timestamp;
				iov[ni].iov_base = h;
				iov[ni++].iov_len = (size_t)hl;
				bytes += (size_t)hl;
			}
			if (f->len) {
				if (f->data) {
					iov[ni].iov_base = (void *)f->data;
					iov[ni++].iov_len = f->len;
				} else {
					int k = moq_cache_group_iov(go->g, f->offset, f->len,
					                            iov + ni, MAX_IOV - ni);
					if (k <= 0) {
						gout_reset(s, go, MOQ_CODE_CANCEL);
						return total;
					}
					ni += (unsigned)k;
				}
				bytes += f->len;
			}
			if (moq_cache_frame_complete(f))
				n->st.frames_out++;
			n->st.bytes_out += f->len;
		}
		/* A short batch: the group may be complete and all read, then
		 * the FIN goes with these bytes. */
		if ((unsigned)cnt < batch) {
			uint32_t frames;
			stc = moq_cache_group_status(go->g, NULL, &frames);
			fin = stc == MOQ_ERR_CLOSED && go->cur.frame >= frames;
		}
		rc = moq_quic_stream_write(s->conn, go->st->sid, iov, ni, fin);
		if (rc < 0) {
			gout_reset(s, go, MOQ_CODE_CANCEL);
			break;
		}
		go->written += bytes;
		go->st->tx_off += bytes;
		s->unacked += bytes;
		total += bytes;
		if (fin) {
			go->fin = 1;
			go->st->fin_sent = 1;
			n->st.groups_fin++;
		}
		/* relay-added latency: frames whose last byte QUIC now has */
		if (!go->fetch)
			moq_lat_record(n, fb, (unsigned)i);
		/* A short batch (or a partial frame's view) reached what is
		 * published: unless the group ended (FIN or reset due now), another
		 * read would return nothing; new bytes move the track's version. */
		if (fin || ((unsigned)cnt < batch && stc == 0))
			break;
	}
	return total;
}

static uint64_t agg_end(const struct dsub *d)
{
	return d->p.end;
}

/* Send END (lite-05) and FIN the subscribe stream: every group in range is
 * accounted for (PROTOCOL.md, Subscribe). */
static void dsub_finish(struct moq_session *s, struct dsub *d)
{
	if (d->st && !d->st->fin_sent && !d->st->reset_sent) {
		if (s->v >= MOQ_LITE_05) {
			struct moq_msg m = {.type = MOQ_MSG_SUBSCRIBE_REPLY};
			m.u.subscribe_reply.kind = MOQ_SUB_END;
			m.u.subscribe_reply.group = d->next_seq;
			st_send(s, d->st, -1, &m, 1);
		} else {
			st_write(s, d->st, NULL, 0, 1);
		}
	}
	d->done = 1;
}

/* DROP { start, end inclusive, code }: lite-05 type 2, lite-03/04 type 1. */
static void dsub_drop(struct moq_session *s, struct dsub *d, uint64_t start, uint64_t end,
                      uint64_t code)
{
	struct moq_msg m = {.type = MOQ_MSG_SUBSCRIBE_REPLY};

	if (!d->st || d->st->fin_sent || d->st->reset_sent)
		return;
	m.u.subscribe_reply.kind = MOQ_SUB_DROP;
	m.u.subscribe_reply.drop_start = start;
	m.u.subscribe_reply.drop_end = end;
	m.u.subscribe_reply.drop_code = code;
	m.u.subscribe_reply.start = m.u.subscribe_reply.end = MOQ_GROUP_NONE;
	st_send(s, d->st, -1, &m, 0);
}

static void dsub_start(struct moq_session *s, struct dsub *d, uint64_t first)
{
	struct moq_msg m = {.type = MOQ_MSG_SUBSCRIBE_REPLY};
	struct moq_subscribe_reply *r = &m.u.subscribe_reply;

	d->started = 1;
	d->start_seq = d->next_seq = first;
	r->start = r->end = MOQ_GROUP_NONE;
	if (s->v >= MOQ_LITE_05) {
		r->kind = MOQ_SUB_START;
		r->group = first;
	} else {
		r->kind = MOQ_SUB_OK;
		r->priority = d->p.priority;
		r->ordered = d->p.ordered;
		r->max_latency_ms = d->p.max_latency_ms;
		r->start = first;
		r->end = d->p.end;
	}
	st_send(s, d->st, -1, &m, 0);
}

/* Open group streams for new groups of @d. */
static void dsub_advance(struct moq_session *s, struct dsub *d)
{
	struct moq_node *n = s->n;
	uint64_t latest = 0, end = agg_end(d);
	int rc, lrc;
	uint64_t ver;

	if (d->done || !d->track)
		return;
	ver = moq_cache_track_version(d->track);
	lrc = moq_cache_track_latest(d->track, &latest);
	if (lrc == MOQ_ERR_CLOSED) {
		d->ending = 1;
	} else if (lrc == 0 && !d->ending) {
		if (!d->started) {
			/* A live subscriber starts at the newest group; one asking for
			 * an older start gets what the cache still has from there. */
			uint64_t first = latest;
			if (d->p.start != MOQ_GROUP_NONE && d->p.start > latest)
				return; /* a future start: wait for it */
			if (d->p.start != MOQ_GROUP_NONE)
				first = d->p.start;
			dsub_start(s, d, first);
		}
		while (d->next_seq <= latest && (end == MOQ_GROUP_NONE || d->next_seq <= end) &&
		       s->ngouts < n->cfg.max_group_streams) {
			struct moq_cache_group *g;
			rc = moq_cache_track_group(d->track, d->next_seq, &g);
			if (rc == 0) {
				if (gout_open(s, d, g) < 0) {
					moq_cache_group_unref(g);
					s->retry = 1;
					break;
				}
				d->next_seq++;
			} else if (rc == MOQ_ERR_NOTFOUND) {
				d->next_seq++;
			} else if (rc == MOQ_ERR_AGAIN) {
				break;
			} else {
				/* Gone before a stream could open: continue at the
				 * newest group (DESIGN.md, Billing), and account for
				 * the skipped ones with a DROP (PROTOCOL.md, Subscribe:
				 * every group in range is finished or dropped). */
				uint64_t to = d->next_seq < latest ? latest : d->next_seq + 1;
				dsub_drop(s, d, d->next_seq, to - 1, err_code(rc));
				n->st.groups_skipped += to - d->next_seq;
				d->next_seq = to;
			}
		}
	}
	d->last_version = ver;
	if (!d->started && !d->ending && !(d->up && d->up->ended))
		return;
	if (d->n_gouts == 0) {
		bool over = d->ending || (end != MOQ_GROUP_NONE && d->next_seq > end);
		if (d->up && d->up->ended) {
			uint64_t es = d->up->end_seq;
			if (es != UINT64_MAX ? d->next_seq >= es
			                     : (lrc != 0 || d->next_seq > latest))
				over = true;
		}
		if (over)
			dsub_finish(s, d);
	}
}

/* The safety net, every FULL_NS: could @s have work that nothing marked?
 * A track version it has not seen, a group stream to open that could not be,
 * a stream waiting at the budget, or a live stream whose group ended or was
 * removed (FIN / reset due). Cheap: no QUIC call, no cache read. */
static bool sess_stale(struct moq_session *s)
{
	if (s->retry || s->blocked)
		return true;
	for (struct dsub *d = s->dsubs; d; d = d->next)
		if (!d->done && d->track && moq_cache_track_version(d->track) != d->last_version)
			return true;
	for (struct gout **pp = &s->gouts, *go = *pp; go; pp = &go->next, go = *pp) {
		while (go && gout_is_done(go))
			go = gout_retire(s, pp);
		if (go && (go->fetch || moq_cache_group_status(go->g, NULL, NULL) != 0))
			return true;
		if (!go)
			break;
	}
	return false;
}

/* Fanout for one session moq_node_poll found marked (sess_mark). */
static int fanout_session(struct moq_session *s)
{
	struct moq_node *n = s->n;
	struct gout *go, **pp;
	int written = 0;
	int fetching = 0;
	bool all = s->walk_all;

	s->retry = 0;
	s->walk_all = 0;
	for (struct dsub *d = s->dsubs; d; d = d->next)
		dsub_advance(s, d);
	if (s->closing || !s->ngouts)
		return 0;
	/* The budget starts at its floor; budget_left asks QUIC for the cwnd
	 * only when the floor is reached. */
	s->budget = n->cfg.session_queue < MIN_BUDGET ? n->cfg.session_queue : MIN_BUDGET;
	s->budget_fresh = s->budget == n->cfg.session_queue;
	/* The live list is in send order (gout_link): pump each while the
	 * budget lasts. Past the budget only two things are due: a group
	 * that expired, was evicted or pushed out of the window resets its
	 * stream with the matching code, even when the subscriber is too slow
	 * to be written to; a stream whose group is complete and all sent
	 * gets its FIN whatever the budget. A slow subscriber holds dozens of
	 * streams: past the budget the walk stops, except on the FIN_CHECK_NS
	 * pass (walk_all). */
	for (pp = &s->gouts; (go = *pp);) {
		uint32_t frames = 0;
		int stc;
		if (gout_is_done(go)) {
			gout_retire(s, pp);
			continue;
		}
		stc = moq_cache_group_status(go->g, NULL, &frames);
		if (group_stale(stc)) {
			gout_reset(s, go, err_code(stc));
			gout_retire(s, pp);
			continue;
		}
		fetching |= go->fetch;
		if (budget_left(s)) {
			if (gout_pump(s, go))
				written++;
		} else if (!all) {
			break;
		} else if (stc == MOQ_ERR_CLOSED && go->cur.frame >= frames) {
			/* complete (its frame count final) and all sent: the FIN */
			uint64_t q = s->budget;
			s->budget = UINT64_MAX;
			gout_pump(s, go);
			s->budget = q;
		}
		if (*pp == go)
			pp = &go->next;
	}
	/* Out of budget with streams left: the next ack wakes us. A fetch
	 * follows its group without a subscription's version: keep polling. */
	if (!budget_left(s))
		s->blocked = 1;
	if (fetching)
		sess_mark(s);
	return written;
}

/* ---------------------------------------------------------------- ingest */

static struct usub *usub_find(struct moq_session *s, uint64_t id)
{
	for (struct usub *us = s->usubs; us; us = us->next)
		if (us->id == id)
			return us;
	return NULL;
}

/*
 * The first group of a (re)opened upstream subscription is not above what
 * the cache holds: the publisher restarted its numbering (a reload that
 * reconnected within the linger). The old groups cannot continue it: the
 * subscribers' in-flight groups are cancelled and their subscriptions end
 * (END, then FIN: they subscribe again), and the track starts over empty.
 * Returns 0 when @up has a fresh cache track.
 */
static int up_restart(struct upstream *up)
{
	struct moq_node *n = up->n;
	struct moq_cache_track *nt = NULL;

	for (struct dsub *d = up->dsubs; d; d = d->unext) {
		for (struct gout *go = d->s->gouts; go; go = go->next)
			if (go->d == d)
				gout_reset(d->s, go, MOQ_CODE_CANCEL);
		for (struct gout *go = d->s->gdone; go; go = go->next)
			if (go->d == d)
				gout_reset(d->s, go, MOQ_CODE_CANCEL);
		d->ending = 1;
		sess_mark(d->s);
	}
	moq_cache_track_drop(up->ct);
	if (moq_cache_track_create(n->cfg.cache, up->path, up->plen, up->track, up->tlen,
	                           &n->cfg.track, &nt) < 0)
		return MOQ_ERR_NOMEM;
	moq_cache_track_unref(up->ct);
	up->ct = nt;
	up->last_version = 0;
	return 0;
}

static void gin_end(struct moq_session *s, struct gin *gi, int64_t code)
{
	struct moq_node *n = s->n;

	if (gi->g) {
		if (code < 0)
			moq_cache_group_finish(gi->g);
		else
			moq_cache_group_abort(gi->g);
		moq_cache_group_unref(gi->g);
		gi->g = NULL;
	} else if (gi->have_hdr && !gi->refused && (gi->fetch || (gi->us && !gi->us->up)) &&
	           n->cfg.cb && n->cfg.cb->group_end) {
		n->cfg.cb->group_end(s, n->cfg.user, gi->sub_id, gi->seq, code);
	}
	gi->refused = 1;
}

static void gin_refuse(struct moq_session *s, struct mstream *st, uint64_t code)
{
	struct gin *gi = st->gi;

	if (gi->g) {
		moq_cache_group_abort(gi->g);
		moq_cache_group_unref(gi->g);
		gi->g = NULL;
	}
	gi->refused = 1;
	if (!st->rx_fin && s->conn)
		moq_quic_stream_stop_sending(s->conn, st->sid, code);
}

static void gin_data(struct moq_session *s, struct mstream *st, const uint8_t *p, size_t len)
{
	struct moq_node *n = s->n;
	struct gin *gi = st->gi;
	const struct moq_node_callbacks *cb = n->cfg.cb;

	while (len && !gi->refused) {
		struct moq_group_ev ev;
		int rc = moq_group_rx_next(&gi->rx, p, len, &ev);

		if (rc < 0) {
			sess_fail(s, rc == MOQ_ERR_TOO_LARGE ? MOQ_CODE_FRAME_TOO_LARGE
			                                     : MOQ_CODE_DECODE);
			return;
		}
		p += rc;
		len -= (size_t)rc;
		switch (ev.type) {
		case MOQ_GEV_HEADER:
			gi->have_hdr = 1;
			gi->sub_id = ev.group.subscribe_id;
			gi->seq = ev.group.sequence;
			gi->us = usub_find(s, gi->sub_id);
			if (!gi->us || gi->us->closed) {
				/* Late group of an ended subscription. */
				gin_refuse(s, st, MOQ_CODE_CANCEL);
				return;
			}
			n->st.groups_in++;
			if (gi->us->up) {
				int orc = moq_cache_group_open(gi->us->up->ct, gi->seq, n->now,
				                               &gi->g);
				if (orc == MOQ_ERR_ORDER && !gi->us->got_group &&
				    up_restart(gi->us->up) == 0)
					orc = moq_cache_group_open(gi->us->up->ct, gi->seq, n->now,
					                           &gi->g);
				if (orc == 0)
					gi->us->got_group = 1;
				if (orc < 0) {
					gi->g = NULL;
					gin_refuse(s, st,
					           orc == MOQ_ERR_ORDER ? MOQ_CODE_OLD
					                                : MOQ_CODE_CANCEL);
					return;
				}
			} else if (cb && cb->group_begin) {
				cb->group_begin(s, n->cfg.user, gi->sub_id, gi->seq);
			}
			break;
		case MOQ_GEV_FRAME:
			n->st.frames_in++;
			if (gi->g) {
				int64_t r =
				        moq_cache_frame_begin(gi->g, ev.timestamp, ev.frame_size);
				if (r < 0) {
					gin_refuse(s, st, err_code((int)r));
					return;
				}
			} else if (cb && cb->frame) {
				cb->frame(s, n->cfg.user, gi->sub_id, gi->seq, ev.timestamp,
				          ev.frame_size);
			}
			break;
		case MOQ_GEV_DATA:
			n->st.bytes_in += ev.data_len;
			if (gi->g) {
				/* The one copy in: receive buffer -> cache. */
				int64_t r = moq_cache_frame_append(gi->g, ev.data, ev.data_len);
				if (r < 0) {
					gin_refuse(s, st, err_code((int)r));
					return;
				}
			} else if (cb && cb->frame_data) {
				cb->frame_data(s, n->cfg.user, gi->sub_id, gi->seq, ev.data,
				               ev.data_len);
			}
			break;
		default:
			break;
		}
	}
}

/* ---------------------------------------------------------- control rx */

static uint64_t msg_err_code(int rc)
{
	switch (rc) {
	case MOQ_ERR_DECODE:
		return MOQ_CODE_DECODE;
	case MOQ_ERR_PROTO:
		return MOQ_CODE_PROTOCOL_VIOLATION;
	case MOQ_ERR_TOO_LARGE:
		return MOQ_CODE_BOUNDS;
	default:
		return MOQ_CODE_UNEXPECTED_MESSAGE;
	}
}

/* The message type expected next on @st, or 0 when none may come. */
static int expected(const struct moq_session *s, const struct mstream *st)
{
	switch (st->kind) {
	case SK_SETUP_IN:
		return st->got_first ? 0 : MOQ_MSG_SETUP;
	case SK_ANN_IN:
		return st->got_first ? 0 : MOQ_MSG_ANNOUNCE_REQ;
	case SK_ANN_OUT:
		return (s->v >= MOQ_LITE_05 && !st->got_first) ? MOQ_MSG_ANNOUNCE_OK
		                                               : MOQ_MSG_ANNOUNCE;
	case SK_SUB_IN:
		return st->got_first ? MOQ_MSG_SUBSCRIBE_UPDATE : MOQ_MSG_SUBSCRIBE;
	case SK_SUB_OUT:
		return MOQ_MSG_SUBSCRIBE_REPLY;
	case SK_TRACK_IN:
		return st->got_first ? 0 : MOQ_MSG_TRACK;
	case SK_TRACK_OUT:
		return st->got_first ? 0 : MOQ_MSG_TRACK_INFO;
	case SK_FETCH_IN:
		return st->got_first ? 0 : MOQ_MSG_FETCH;
	case SK_GOAWAY_IN:
		return st->got_first ? 0 : MOQ_MSG_GOAWAY;
	default:
		return -1; /* bytes are ignored */
	}
}

static void on_setup(struct moq_session *s, const struct moq_setup *m);
static void on_fetch(struct moq_session *s, struct mstream *st, const struct moq_fetch *f);

static void on_sub_reply(struct moq_session *s, struct mstream *st,
                         const struct moq_subscribe_reply *r)
{
	struct moq_node *n = s->n;
	struct usub *us = st->us;

	if (!us)
		return;
	if (us->up) {
		if (r->kind == MOQ_SUB_END) {
			us->up->ended = 1;
			us->up->end_seq = r->group;
			up_touch(us->up);
		}
		return;
	}
	if (n->cfg.cb && n->cfg.cb->sub_reply)
		n->cfg.cb->sub_reply(s, n->cfg.user, us->id, r);
}

/* Handle one decoded control message. Returns a session close code or 0. */
static uint64_t on_msg(struct moq_session *s, struct mstream *st, struct moq_msg *m)
{
	struct moq_node *n = s->n;
	int first = !st->got_first;

	st->got_first = 1;
	switch (m->type) {
	case MOQ_MSG_SETUP:
		on_setup(s, &m->u.setup);
		return 0;
	case MOQ_MSG_ANNOUNCE_REQ:
		return (uint64_t)ann_in_start(s, st, &m->u.announce_req);
	case MOQ_MSG_ANNOUNCE_OK:
		st->ann_origin = m->u.announce_ok.origin;
		return 0;
	case MOQ_MSG_ANNOUNCE:
		return (uint64_t)on_announce(s, st, &m->u.announce);
	case MOQ_MSG_SUBSCRIBE:
		on_subscribe(s, st, &m->u.subscribe);
		return 0;
	case MOQ_MSG_SUBSCRIBE_UPDATE:
		on_subscribe_update(s, st, &m->u.subscribe_update);
		return 0;
	case MOQ_MSG_SUBSCRIBE_REPLY:
		on_sub_reply(s, st, &m->u.subscribe_reply);
		return 0;
	case MOQ_MSG_TRACK:
		on_track(s, st, &m->u.track);
		return 0;
	case MOQ_MSG_TRACK_INFO:
		on_track_info(s, st, &m->u.track_info);
		return 0;
	case MOQ_MSG_FETCH:
		on_fetch(s, st, &m->u.fetch);
		return 0;
	case MOQ_MSG_GOAWAY:
		s->goaway_in = 1;
		if (n->cfg.cb && n->cfg.cb->goaway)
			n->cfg.cb->goaway(s, n->cfg.user, m->u.goaway.uri.p, m->u.goaway.uri.len);
		return 0;
	default:
		(void)first;
		return MOQ_CODE_UNEXPECTED_MESSAGE;
	}
}

/* Parse the buffered control bytes of @st and handle a pending FIN. */
static void st_process(struct moq_session *s, struct mstream *st)
{
	struct moq_node *n = s->n;

	/* lite-05: a server acts on a client's requests once its SETUP arrived. */
	if (s->server && s->v >= MOQ_LITE_05 && !s->setup_in && st->kind != SK_SETUP_IN)
		return;
	while (st->rx_len && !s->closing && st->kind != SK_IGNORE) {
		struct moq_msg m;
		int t = expected(s, st);
		int rc;
		uint64_t code;

		if (t < 0) {
			st->rx_len = 0;
			break;
		}
		if (t == 0) {
			sess_fail(s, MOQ_CODE_UNEXPECTED_MESSAGE);
			return;
		}
		rc = moq_msg_decode((enum moq_msg_type)t, s->v, st->rx, st->rx_len, n->cfg.max_msg,
		                    &m);
		if (rc == MOQ_ERR_SHORT)
			break;
		if (rc < 0) {
			sess_fail(s, msg_err_code(rc));
			return;
		}
		code = on_msg(s, st, &m);
		if (code) {
			sess_fail(s, code);
			return;
		}
		if (s->closing)
			return;
		memmove(st->rx, st->rx + rc, st->rx_len - (size_t)rc);
		st->rx_len -= (uint32_t)rc;
	}
	if (!st->rx_fin || s->closing || st->kind == SK_IGNORE)
		return;
	/* The peer finished its side. */
	if (st->rx_len) {
		sess_fail(s, MOQ_CODE_DECODE); /* a message cut short by FIN */
		return;
	}
	switch (st->kind) {
	case SK_SETUP_IN:
		if (!st->got_first)
			sess_fail(s, MOQ_CODE_DECODE);
		break;
	case SK_ANN_IN:
		if (st->got_first && st->prefix) {
			s->nann_in--;
			free(st->prefix);
			st->prefix = NULL;
		}
		st->got_first = 0;
		st->kind = SK_IGNORE;
		st_write(s, st, NULL, 0, 1);
		break;
	case SK_ANN_OUT:
		ann_out_gone(s, st);
		st_write(s, st, NULL, 0, 1);
		st->kind = SK_IGNORE;
		break;
	case SK_SUB_IN:
		/* PROTOCOL.md, Subscribe: subscriber FIN = unsubscribe. */
		if (st->d)
			dsub_cancel(s, st->d);
		else
			st_write(s, st, NULL, 0, 1);
		break;
	case SK_SUB_OUT:
		if (st->us) {
			struct usub *us = st->us;
			if (us->up) {
				us->up->ended = 1;
				us->up->end_seq = UINT64_MAX;
				up_touch(us->up);
			} else if (!us->closed && n->cfg.cb && n->cfg.cb->sub_closed) {
				n->cfg.cb->sub_closed(s, n->cfg.user, us->id, -1);
			}
			usub_close(us);
		}
		break;
	case SK_GOAWAY_IN:
	case SK_PROBE_IN:
	case SK_TRACK_OUT:
		if (!st->fin_sent && !st->local)
			st_write(s, st, NULL, 0, 1);
		break;
	default:
		break;
	}
}

static int kind_of(const struct moq_session *s, int uni, uint64_t type)
{
	if (uni) {
		if (type == MOQ_STREAM_GROUP)
			return SK_GROUP_IN;
		if (type == MOQ_STREAM_SETUP && s->v >= MOQ_LITE_05)
			return s->setup_in ? -2 : SK_SETUP_IN; /* twice: violation */
		return -1;
	}
	switch (type) {
	case MOQ_STREAM_ANNOUNCE:
		return SK_ANN_IN;
	case MOQ_STREAM_SUBSCRIBE:
		return SK_SUB_IN;
	case MOQ_STREAM_FETCH:
		return SK_FETCH_IN;
	case MOQ_STREAM_PROBE:
		return SK_PROBE_IN;
	case MOQ_STREAM_GOAWAY:
		return s->v >= MOQ_LITE_04 ? SK_GOAWAY_IN : -1;
	case MOQ_STREAM_TRACK:
		return s->v >= MOQ_LITE_05 ? SK_TRACK_IN : -1;
	default:
		return -1;
	}
}

static void stream_data(struct moq_session *s, int64_t sid, const uint8_t *data, size_t len,
                        int fin)
{
	struct moq_node *n = s->n;
	struct mstream *st = smap_get(&s->streams, sid);

	if (!st) {
		/* RFC 9000, 2.1: bit 0 is the initiator (1 = server). */
		int peer = (int)(sid & 1) != (s->server ? 1 : 0);
		if (!peer)
			return; /* one of ours, already freed */
		st = st_new(s, sid, SK_NEW, 0);
		if (!st) {
			sess_fail(s, MOQ_CODE_BOUNDS);
			return;
		}
	}
	if (st->kind == SK_NEW) {
		bool done = false;
		uint64_t type = 0;
		size_t used = moq_varint_rx_push(&st->type_rx, data, len, &done, &type);
		int k;

		if (used) { /* a FIN-only chunk may come with data == NULL */
			data += used;
			len -= used;
		}
		if (!done) {
			if (fin)
				st->kind = SK_IGNORE;
			return;
		}
		k = kind_of(s, (sid & 2) != 0, type);
		if (k == -2) {
			sess_fail(s, MOQ_CODE_PROTOCOL_VIOLATION);
			return;
		}
		if (k < 0) {
			/* PROTOCOL.md, Streams: an unknown type resets that stream only. */
			st_refuse(s, st, MOQ_CODE_UNEXPECTED_STREAM);
			return;
		}
		st->kind = (uint8_t)k;
		if (k == SK_GROUP_IN) {
			st->gi = calloc(1, sizeof(*st->gi));
			if (!st->gi) {
				st_refuse(s, st, MOQ_CODE_BOUNDS);
				return;
			}
			moq_group_rx_init(&st->gi->rx, s->v, true);
		}
	}
	switch (st->kind) {
	case SK_IGNORE:
	case SK_PROBE_IN:
	case SK_RAW:
		break;
	case SK_GROUP_IN:
	case SK_FETCH_OUT:
		if (!st->gi->refused)
			gin_data(s, st, data, len);
		if (fin && !s->closing && !st->gi->refused) {
			st->rx_fin = 1;
			if (moq_group_rx_fin(&st->gi->rx) < 0) {
				sess_fail(s, MOQ_CODE_DECODE);
				return;
			}
			gin_end(s, st->gi, -1);
		}
		return;
	case SK_SETUP_OUT:
	case SK_GROUP_OUT:
		break;
	default:
		while (len && !s->closing && st->kind != SK_IGNORE) {
			uint32_t cap = n->cfg.max_msg + 16, take;
			if (!st->rx) {
				st->rx = malloc(cap);
				if (!st->rx) {
					sess_fail(s, MOQ_CODE_BOUNDS);
					return;
				}
				st->rx_cap = cap;
			}
			take = st->rx_cap - st->rx_len;
			if (take == 0) {
				sess_fail(s, MOQ_CODE_BOUNDS);
				return;
			}
			if (take > len)
				take = (uint32_t)len;
			memcpy(st->rx + st->rx_len, data, take);
			st->rx_len += take;
			data += take;
			len -= take;
			if (fin && !len)
				st->rx_fin = 1;
			st_process(s, st);
			/* @st may have been refused but is still alive here. */
		}
		if (fin && !st->rx_fin && !s->closing) {
			st->rx_fin = 1;
			st_process(s, st);
		}
		return;
	}
	if (fin)
		st->rx_fin = 1;
}

static void on_setup(struct moq_session *s, const struct moq_setup *m)
{
	struct moq_node *n = s->n;

	s->setup_in = 1;
	s->peer_origin = m->has_origin ? m->origin : 0;
	s->peer_role = m->has_role ? m->role : MOQ_ROLE_BOTH;
	if (s->server && m->has_path && m->path.len) {
		/* Path roots the session; the query (auth token) is not used. */
		size_t l = 0;
		while (l < m->path.len && m->path.p[l] != '?')
			l++;
		free(s->root);
		s->root = path_dup(m->path.p, l, &s->rootlen);
		if (!s->root) {
			sess_fail(s, MOQ_CODE_DECODE);
			return;
		}
	}
	if (n->cfg.relay && s->server && !s->asked_announces &&
	    s->peer_role != MOQ_ROLE_SUBSCRIBER) {
		int err;
		s->asked_announces = 1;
		ann_request(s, "", 0, &err);
	}
	/* Requests that arrived before SETUP can be handled now. */
	if (s->server) {
		for (uint32_t i = 0; i < s->streams.cap && !s->closing; i++) {
			struct mstream *st = s->streams.vals[i];
			if (st && st->kind != SK_SETUP_IN && (st->rx_len || st->rx_fin))
				st_process(s, st);
		}
	}
}

/* FETCH: the frames of one cached group, then FIN (PROTOCOL.md, Fetch). */
static void on_fetch(struct moq_session *s, struct mstream *st, const struct moq_fetch *f)
{
	struct moq_node *n = s->n;
	char bbuf[4200], *full;
	size_t flen;
	int rc = moq_path_norm(bbuf, sizeof(bbuf), f->broadcast.p, f->broadcast.len);
	struct moq_cache_track *t;
	struct moq_cache_group *g;

	if (rc < 0) {
		sess_fail(s, MOQ_CODE_DECODE);
		return;
	}
	if (!n->cfg.cache) {
		st_refuse(s, st, MOQ_CODE_NOT_FOUND);
		return;
	}
	full = path_join(s->root ? s->root : "", s->rootlen, bbuf, (size_t)rc, &flen);
	t = full ? moq_cache_track_lookup(n->cfg.cache, full, flen, f->track.p, f->track.len)
	         : NULL;
	free(full);
	if (!t) {
		st_refuse(s, st, MOQ_CODE_NOT_FOUND);
		return;
	}
	rc = moq_cache_track_group(t, f->group, &g);
	moq_cache_track_unref(t);
	if (rc < 0) {
		st_refuse(s, st, MOQ_CODE_NOT_FOUND);
		return;
	}
	if (!gout_new(s, st, g, f->priority)) {
		moq_cache_group_unref(g);
		st_refuse(s, st, MOQ_CODE_BOUNDS);
		return;
	}
	st->go->fetch = 1;
}

/* -------------------------------------------------------------- sessions */

static struct moq_session *sess_new(struct moq_node *n, struct moq_quic_conn *c, int server)
{
	struct moq_session *s;

	if (n->st.sessions >= n->cfg.max_sessions)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->n = n;
	s->conn = c;
	s->server = (uint8_t)server;
	sess_mark(s);
	s->next = n->sessions;
	n->sessions = s;
	n->st.sessions++;
	n->st.sessions_total++;
	return s;
}

static void st_free(struct moq_session *s, struct mstream *st)
{
	sess_mark(s); /* a stream slot or a subscription changed */
	if (st->go) {
		struct gout *go = st->go;
		if (!go->fin && !go->reset)
			s->unacked -= go->written - go->acked;
		else if (go->fin)
			s->unacked -= go->written - go->acked;
		if (go->d && go->d->n_gouts)
			go->d->n_gouts--;
		for (struct gout **pp = go->done ? &s->gdone : &s->gouts; *pp; pp = &(*pp)->next)
			if (*pp == go) {
				*pp = go->next;
				break;
			}
		s->ngouts--;
		moq_cache_group_unref(go->g);
		gout_release(s, go);
	}
	if (st->gi) {
		if (st->gi->g) {
			moq_cache_group_abort(st->gi->g);
			moq_cache_group_unref(st->gi->g);
		}
		free(st->gi);
	}
	if (st->d)
		dsub_free(s, st->d);
	if (st->us) {
		struct usub *us = st->us;
		if (us->up) {
			us->up->us = NULL;
			s->n->st.upstream_subs--;
		}
		for (struct usub **pp = &s->usubs; *pp; pp = &(*pp)->next)
			if (*pp == us) {
				*pp = us->next;
				break;
			}
		s->nusubs--;
		free(us->bcast);
		free(us->track);
		free(us);
	}
	if (st->kind == SK_ANN_IN && st->prefix && st->got_first)
		s->nann_in--;
	if (st->kind == SK_TRACK_OUT && st->ti && !s->n->cfg.relay)
		tinfo_free(st->ti); /* a client request never answered */
	free(st->prefix);
	free(st->rx);
	tx_free(s, &st->tx);
	smap_del(&s->streams, st->sid);
	st_release(s, st);
}

/* The connection is gone: free the session and everything it holds. */
static void sess_free(struct moq_session *s, uint64_t code, int local)
{
	struct moq_node *n = s->n;

	s->closing = 1;
	if (n->cfg.cb && n->cfg.cb->session_closed)
		n->cfg.cb->session_closed(s, n->cfg.user, code, local);
	/* A publisher that drops keeps its broadcasts for the linger. */
	for (struct bcast *bc = n->bcasts; bc; bc = bc->next)
		if (bc->pub == s) {
			bc->pub = NULL;
			bc->linger_until = n->now + n->cfg.linger_ns;
			if (!bc->linger_until)
				bc->linger_until = 1;
		}
	for (uint32_t i = 0; i < s->streams.cap; i++) {
		struct mstream *st = s->streams.vals[i];
		if (st) {
			st_free(s, st);
			i = (uint32_t)-1; /* the map shifted: rescan */
			if (!s->streams.used)
				break;
		}
	}
	while (s->dsubs)
		dsub_free(s, s->dsubs);
	sess_unlist(s);
	for (struct moq_session **pp = &n->sessions; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	n->st.sessions--;
	while (s->pool) {
		struct txchunk *c = s->pool;
		s->pool = c->next;
		free(c);
	}
	while (s->st_pool) {
		struct mstream *st = s->st_pool;
		s->st_pool = st->pool_next;
		free(st);
	}
	while (s->go_pool) {
		struct gout *go = s->go_pool;
		s->go_pool = go->next;
		free(go);
	}
	free(s->streams.keys);
	free(s->streams.vals);
	free(s->root);
	free(s->path);
	free(s);
}

/* Close the session with @code at the end of the current callback. */
static void sess_fail(struct moq_session *s, uint64_t code)
{
	if (s->closing)
		return;
	s->closing = 1;
	s->close_code = code;
	if (code)
		s->n->st.sessions_closed_error++;
	sess_mark(s); /* moq_node_poll carries out the close if nothing else does */
}

/* Carry out a deferred close (frees @s). Returns nonzero when it did. */
static int sess_flush(struct moq_session *s)
{
	if (!s->closing || s->depth || !s->conn)
		return 0;
	/* conn_closed frees the session during this call. */
	moq_quic_conn_close(s->conn, s->close_code, NULL);
	return 1;
}

static void send_setup(struct moq_session *s)
{
	struct moq_node *n = s->n;
	struct moq_msg m = {.type = MOQ_MSG_SETUP};
	int err;
	struct mstream *st = st_open(s, 0, SK_SETUP_OUT, &err);

	if (!st)
		return;
	m.u.setup.has_origin = n->cfg.origin != 0;
	m.u.setup.origin = n->cfg.origin;
	if (!s->server && s->path) {
		m.u.setup.has_path = true;
		m.u.setup.path = (struct moq_str){s->path, strlen(s->path)};
	}
	if (!s->server && s->role != MOQ_ROLE_BOTH) {
		m.u.setup.has_role = true;
		m.u.setup.role = s->role;
	}
	/* moq-lite 05: type 0x1, SETUP, then FIN. */
	st_send(s, st, MOQ_STREAM_SETUP, &m, 1);
}

static enum moq_version alpn_version(const char *alpn)
{
	if (!alpn)
		return 0;
	if (strcmp(alpn, MOQ_ALPN_05) == 0)
		return MOQ_LITE_05;
	if (strcmp(alpn, MOQ_ALPN_04) == 0)
		return MOQ_LITE_04;
	if (strcmp(alpn, MOQ_ALPN_03) == 0)
		return MOQ_LITE_03;
	return 0;
}

/* ------------------------------------------------------- QUIC callbacks */

static void cb_conn_new(struct moq_quic_conn *c, void *user)
{
	struct moq_node *n = user;
	struct moq_session *s = sess_new(n, c, 1);

	if (!s) {
		n->st.refused_bounds++;
		moq_quic_conn_set_user(c, NULL);
		return;
	}
	moq_quic_conn_set_user(c, s);
}

#define ENTER(s)                                                                                   \
	do {                                                                                       \
		if (!(s) || (s)->closing)                                                          \
			return 0;                                                                  \
		(s)->depth++;                                                                      \
	} while (0)
#define LEAVE(s)                                                                                   \
	do {                                                                                       \
		(s)->depth--;                                                                      \
		sess_flush(s);                                                                     \
	} while (0)

static int cb_established(struct moq_quic_conn *c, void *user, const char *alpn)
{
	struct moq_session *s = user;

	(void)c;
	ENTER(s);
	s->v = alpn_version(alpn);
	if (!s->v) {
		sess_fail(s, MOQ_CODE_UNKNOWN_ALPN);
		LEAVE(s);
		return 0;
	}
	if (s->v >= MOQ_LITE_05)
		send_setup(s);
	else if (s->n->cfg.relay && s->server) {
		int err;
		s->asked_announces = 1;
		ann_request(s, "", 0, &err);
	}
	s->ready = 1;
	sess_mark(s);
	if (s->n->cfg.cb && s->n->cfg.cb->session_ready)
		s->n->cfg.cb->session_ready(s, s->n->cfg.user);
	LEAVE(s);
	return 0;
}

static int cb_stream_data(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t offset,
                          const uint8_t *data, size_t len, int fin)
{
	struct moq_session *s = user;

	(void)offset;
	ENTER(s);
	if (!s->v)
		s->v = alpn_version(moq_quic_conn_alpn(c));
	if (!s->v)
		sess_fail(s, MOQ_CODE_PROTOCOL_VIOLATION);
	else
		stream_data(s, sid, data, len, fin);
	LEAVE(s);
	return 0;
}

static void cb_stream_acked(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t acked,
                            uint64_t newly)
{
	struct moq_session *s = user;
	struct mstream *st;

	(void)c;
	(void)newly;
	if (!s || s->closing)
		return;
	st = smap_get(&s->streams, sid);
	if (st && !st->go && st->kind != SK_GROUP_OUT)
		tx_release_acked(s, &st->tx, acked);
	if (st && st->go && !st->go->reset && acked > st->go->acked) {
		uint64_t a = acked > st->go->written ? st->go->written : acked;
		if (a > st->go->acked) {
			s->unacked -= a - st->go->acked;
			st->go->acked = a;
			if (s->blocked) {
				s->blocked = 0;
				sess_mark(s);
			}
		}
	}
}

static void cb_stream_reset(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t app_err,
                            uint64_t final_size)
{
	struct moq_session *s = user;
	struct moq_node *n;
	struct mstream *st;

	(void)c;
	(void)final_size;
	if (!s || s->closing)
		return;
	n = s->n;
	st = smap_get(&s->streams, sid);
	if (!st)
		return;
	s->depth++;
	st->rx_fin = 1;
	switch (st->kind) {
	case SK_GROUP_IN:
	case SK_FETCH_OUT:
		if (!st->gi->refused)
			gin_end(s, st->gi, (int64_t)app_err);
		break;
	case SK_SUB_OUT:
		if (st->us) {
			struct usub *us = st->us;
			if (us->up) {
				/* Rejected upstream: pass the code to every subscriber. */
				struct upstream *up = us->up;
				for (struct dsub *d = up->dsubs; d; d = d->unext)
					if (d->st && !d->done) {
						st_refuse(d->s, d->st, app_err);
						d->done = 1;
					}
				up->ended = 1;
				up->end_seq = 0;
			} else if (!us->closed && n->cfg.cb && n->cfg.cb->sub_closed) {
				n->cfg.cb->sub_closed(s, n->cfg.user, us->id, (int64_t)app_err);
			}
			us->closed = 1;
			st_reset(s, st, MOQ_CODE_CANCEL);
		}
		break;
	case SK_SUB_IN:
		if (st->d)
			dsub_cancel(s, st->d);
		break;
	case SK_ANN_OUT:
		ann_out_gone(s, st);
		st_reset(s, st, MOQ_CODE_CANCEL);
		st->kind = SK_IGNORE;
		break;
	case SK_ANN_IN:
		if (st->got_first && st->prefix) {
			s->nann_in--;
			free(st->prefix);
			st->prefix = NULL;
		}
		st->kind = SK_IGNORE;
		st_reset(s, st, MOQ_CODE_CANCEL);
		break;
	default:
		if (!(sid & 2))
			st_reset(s, st, MOQ_CODE_CANCEL);
		break;
	}
	s->depth--;
	sess_flush(s);
}

static void cb_stream_stop_sending(struct moq_quic_conn *c, void *user, int64_t sid,
                                   uint64_t app_err)
{
	struct moq_session *s = user;
	struct mstream *st;

	(void)c;
	(void)app_err;
	if (!s || s->closing)
		return;
	st = smap_get(&s->streams, sid);
	if (!st)
		return;
	/* The endpoint resets the sending side with the same code. */
	if (st->go && !st->go->fin && !st->go->reset) {
		st->go->reset = 1;
		s->unacked -= st->go->written - st->go->acked;
		st->go->written = st->go->acked;
		s->n->st.resets_cancel++;
	}
	st->reset_sent = 1;
}

static void cb_stream_closed(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t app_err)
{
	struct moq_session *s = user;
	struct mstream *st;

	(void)c;
	(void)app_err;
	if (!s || s->freed)
		return;
	st = smap_get(&s->streams, sid);
	if (st)
		st_free(s, st);
}

static void cb_writable(struct moq_quic_conn *c, void *user, int64_t sid)
{
	struct moq_session *s = user;

	(void)c;
	(void)sid;
	/* moq_node_poll retries whatever waited for stream credit. */
	if (s)
		sess_mark(s);
}

static void cb_conn_closed(struct moq_quic_conn *c, void *user,
                           const struct moq_quic_close_info *info)
{
	struct moq_session *s = user;
	uint64_t code;

	(void)c;
	if (!s)
		return;
	code = info->kind == MOQ_QUIC_CLOSE_APPLICATION ? info->code : MOQ_CODE_TRANSPORT;
	if (info->kind == MOQ_QUIC_CLOSE_APPLICATION && info->code == 0)
		code = 0;
	s->conn = NULL;
	s->freed = 1;
	sess_free(s, s->close_code ? s->close_code : code, info->local);
}

static const struct moq_quic_callbacks node_cbs = {
        .conn_new = cb_conn_new,
        .established = cb_established,
        .stream_data = cb_stream_data,
        .stream_acked = cb_stream_acked,
        .stream_reset = cb_stream_reset,
        .stream_stop_sending = cb_stream_stop_sending,
        .stream_closed = cb_stream_closed,
        .writable = cb_writable,
        .conn_closed = cb_conn_closed,
};

const struct moq_quic_callbacks *moq_node_quic_callbacks(void)
{
	return &node_cbs;
}

const char *const *moq_node_alpns(size_t *count)
{
	static const char *const alpns[] = {MOQ_ALPN_05, MOQ_ALPN_04, MOQ_ALPN_03};

	if (count)
		*count = 3;
	return alpns;
}

/* ------------------------------------------------------------------- hub */

/* One mailbox per node; a spinlock guards it (control path only). */
struct hub_box {
	atomic_flag lock;
	struct hub_msg *head, *tail;
};

struct moq_hub {
	uint32_t max;
	uint64_t origin;
	_Atomic uint64_t nsubs;   /* downstream subscriptions of every node */
	_Atomic uint64_t ntracks; /* counted upstream tracks of every node */
	atomic_flag lock;
	struct moq_node **nodes;
	struct hub_box *box;
};

/* Node bounds cfg.max_subscribers (@tracks 0) and cfg.max_tracks (@tracks
 * 1): take one unit when under the bound (0 = unlimited). With a hub the
 * bound is relay-wide: one atomic add on the hub's count (control path, one
 * per SUBSCRIBE). The node's own count is in its stats. */
static bool bound_take(struct moq_node *n, int tracks)
{
	uint32_t max = tracks ? n->cfg.max_tracks : n->cfg.max_subscribers;
	uint64_t *mine = tracks ? &n->st.tracks : &n->st.subscribers;

	if (n->hub) {
		_Atomic uint64_t *all = tracks ? &n->hub->ntracks : &n->hub->nsubs;
		if (atomic_fetch_add(all, 1) >= max && max) {
			atomic_fetch_sub(all, 1);
			return false;
		}
	} else if (max && *mine >= max) {
		return false;
	}
	(*mine)++;
	return true;
}

/* Give back a unit taken with bound_take. */
static void bound_put(struct moq_node *n, int tracks)
{
	if (tracks)
		n->st.tracks--;
	else
		n->st.subscribers--;
	if (n->hub)
		atomic_fetch_sub(tracks ? &n->hub->ntracks : &n->hub->nsubs, 1);
}

static void spin_lock(atomic_flag *f)
{
	while (atomic_flag_test_and_set_explicit(f, memory_order_acquire))
		;
}

static void spin_unlock(atomic_flag *f)
{
	atomic_flag_clear_explicit(f, memory_order_release);
}

/* A hop id (PROTOCOL.md, Announce: loop prevention) for a node or hub
 * created without one: from the kernel's generator, not from the object's
 * address, which another process with the same allocation history (two
 * ASan builds: a fixed allocator region) has too; a relay then drops its
 * peer's announces as loops. The clock, pid and @salt if getrandom fails.
 * Nonzero, under 2^62 (a varint). Control path (create only). */
static uint64_t hop_id_random(const void *salt)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		v = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
		    ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)salt;
		v *= 0x9e3779b97f4a7c15ull;
	}
	return (v & 0x3fffffffffffffffull) | 1;
}

struct moq_hub *moq_hub_create(uint32_t max_nodes, uint64_t origin)
{
	struct moq_hub *h;

	if (!max_nodes)
		return NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->nodes = calloc(max_nodes, sizeof(*h->nodes));
	h->box = calloc(max_nodes, sizeof(*h->box));
	if (!h->nodes || !h->box) {
		free(h->nodes);
		free(h->box);
		free(h);
		return NULL;
	}
	h->max = max_nodes;
	h->origin = origin ? origin : hop_id_random(h);
	atomic_flag_clear(&h->lock);
	for (uint32_t i = 0; i < max_nodes; i++)
		atomic_flag_clear(&h->box[i].lock);
	return h;
}

static void hub_msg_free(struct hub_msg *m)
{
	free(m->path);
	free(m->track);
	free(m);
}

void moq_hub_destroy(struct moq_hub *h)
{
	if (!h)
		return;
	for (uint32_t i = 0; i < h->max; i++)
		while (h->box[i].head) {
			struct hub_msg *m = h->box[i].head;
			h->box[i].head = m->next;
			hub_msg_free(m);
		}
	free(h->nodes);
	free(h->box);
	free(h);
}

static int hub_register(struct moq_hub *h, struct moq_node *n)
{
	int id = -1;

	spin_lock(&h->lock);
	for (uint32_t i = 0; i < h->max; i++)
		if (!h->nodes[i]) {
			h->nodes[i] = n;
			id = (int)i;
			break;
		}
	spin_unlock(&h->lock);
	return id;
}

static void hub_unregister(struct moq_hub *h, uint32_t id)
{
	struct hub_msg *m;

	spin_lock(&h->lock);
	h->nodes[id] = NULL;
	spin_unlock(&h->lock);
	spin_lock(&h->box[id].lock);
	m = h->box[id].head;
	h->box[id].head = h->box[id].tail = NULL;
	spin_unlock(&h->box[id].lock);
	while (m) {
		struct hub_msg *nx = m->next;
		hub_msg_free(m);
		m = nx;
	}
}

static struct hub_msg *hub_msg_new(struct moq_node *n, int kind, const char *p, size_t pl,
                                   const char *t, size_t tl)
{
	struct hub_msg *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->kind = (uint8_t)kind;
	m->from = n->hub_id;
	m->path = memdup0(p, pl);
	m->plen = pl;
	if (t) {
		m->track = memdup0(t, tl);
		m->tlen = tl;
	}
	if (!m->path || (t && !m->track)) {
		hub_msg_free(m);
		return NULL;
	}
	return m;
}

/* Queue @m for node @to (0-based); dropped when that node is gone. */
static void hub_post(struct moq_hub *h, uint32_t to, struct hub_msg *m)
{
	struct hub_box *b = &h->box[to];
	int live;

	spin_lock(&h->lock);
	live = h->nodes[to] != NULL;
	spin_unlock(&h->lock);
	if (!live) {
		hub_msg_free(m);
		return;
	}
	spin_lock(&b->lock);
	m->next = NULL;
	if (b->tail)
		b->tail->next = m;
	else
		__atomic_store_n(&b->head, m, __ATOMIC_RELEASE);
	b->tail = m;
	spin_unlock(&b->lock);
}

/* @to1 is 1 + the node id (struct bcast owner encoding). */
static void hub_send(struct moq_node *n, uint32_t to1, int kind, const char *p, size_t pl,
                     const char *t, size_t tl)
{
	struct hub_msg *m;

	if (!n->hub || !to1 || to1 > n->hub->max)
		return;
	m = hub_msg_new(n, kind, p, pl, t, tl);
	if (m)
		hub_post(n->hub, to1 - 1, m);
}

/* Tell the other nodes that a broadcast we own is active or ended. */
static void hub_announce(struct moq_node *n, struct bcast *bc, int active)
{
	if (!n->hub || bc->owner)
		return;
	for (uint32_t i = 0; i < n->hub->max; i++) {
		struct hub_msg *m;
		if (i == n->hub_id)
			continue;
		m = hub_msg_new(n, active ? HUB_ANN_ACTIVE : HUB_ANN_ENDED, bc->path, bc->len, NULL,
		                0);
		if (!m)
			continue;
		m->nhops = bc->nhops;
		memcpy(m->hops, bc->hops, bc->nhops * sizeof(bc->hops[0]));
		hub_post(n->hub, i, m);
	}
}

static struct upstream *up_find(struct moq_node *n, const char *p, size_t pl, const char *t,
                                size_t tl)
{
	for (struct upstream *up = n->ups; up; up = up->next)
		if (up->plen == pl && up->tlen == tl && memcmp(up->path, p, pl) == 0 &&
		    memcmp(up->track, t, tl) == 0)
			return up;
	return NULL;
}

static void hub_handle(struct moq_node *n, struct hub_msg *m)
{
	uint32_t from1 = m->from + 1;
	struct bcast *bc = bcast_find(n, m->path, m->plen);
	struct upstream *up;

	switch (m->kind) {
	case HUB_ANN_ACTIVE:
		if (!bc) {
			bc = bcast_add(n, m->path, m->plen);
			if (!bc)
				return;
			bc->owner = from1;
			bc->nhops = m->nhops;
			memcpy(bc->hops, m->hops, m->nhops * sizeof(m->hops[0]));
			ann_notify(n, bc, 1);
			return;
		}
		if (bc->local || (!bc->owner && bc->pub))
			return; /* ours, with a live publisher: ours wins */
		if (bc->owner != from1) {
			/* Our lingering broadcast, or another worker's, moved to the
			 * sender (its publisher reconnected there): subscribe there. */
			uint32_t old = bc->owner;
			bc->owner = from1;
			bc->linger_until = 0;
			for (up = n->ups; up; up = up->next) {
				if (up->plen != m->plen || memcmp(up->path, m->path, m->plen) != 0)
					continue;
				if (up->us) {
					usub_close(up->us);
					up->us->up = NULL;
					up->us = NULL;
					n->st.upstream_subs--;
				}
				if (old && up->remote_owner == old)
					hub_send(n, old, HUB_UNSUB, up->path, up->plen, up->track,
					         up->tlen);
				up->remote_owner = 0;
				up->ended = 0;
				if (up->dsubs || up->nremote) {
					up->remote_owner = from1;
					hub_send(n, from1, HUB_SUB, up->path, up->plen, up->track,
					         up->tlen);
				}
			}
		}
		bc->nhops = m->nhops;
		memcpy(bc->hops, m->hops, m->nhops * sizeof(m->hops[0]));
		return;
	case HUB_ANN_ENDED:
		if (bc && bc->owner == from1)
			bcast_end(n, bc);
		return;
	case HUB_SUB:
		if (bc && bc->local)
			return; /* served straight from the shared cache */
		up = up_get(n, m->path, m->plen, m->track, m->tlen, NULL);
		if (!up)
			return;
		up->nremote++;
		up_changed(up);
		return;
	case HUB_TRACK: {
		/* Another worker's subscriber asks TRACK for a broadcast we own. */
		struct tinfo *ti = NULL;
		struct moq_track_info info = default_info;
		if (bc && bc->local) {
			info.timescale = bc->timescale ? bc->timescale : 1000;
		} else if (bc && !bc->owner &&
		           (ti = tinfo_get(n, m->path, m->plen, m->track, m->tlen)) != NULL) {
			if (!ti->have) {
				if (m->from < 64)
					ti->hub_wait |= 1ull << m->from;
				tinfo_ask(n, bc, ti);
				return;
			}
			info = ti->ti;
		}
		struct hub_msg *r =
		        hub_msg_new(n, HUB_TRACK_INFO, m->path, m->plen, m->track, m->tlen);
		if (r) {
			r->ti = info;
			hub_post(n->hub, m->from, r);
		}
		return;
	}
	case HUB_TRACK_INFO: {
		struct tinfo *ti = tinfo_get(n, m->path, m->plen, m->track, m->tlen);
		if (ti)
			tinfo_learned(n, ti, &m->ti);
		return;
	}
	case HUB_UNSUB:
		up = up_find(n, m->path, m->plen, m->track, m->tlen);
		if (up && up->nremote) {
			up->nremote--;
			up_changed(up);
		}
		return;
	default:
		return;
	}
}

static void hub_drain(struct moq_node *n)
{
	struct hub_box *b;
	struct hub_msg *m;

	if (!n->hub)
		return;
	b = &n->hub->box[n->hub_id];
	/* A lock-free peek; the next poll sees what it misses. */
	if (!__atomic_load_n(&b->head, __ATOMIC_ACQUIRE))
		return;
	spin_lock(&b->lock);
	m = b->head;
	__atomic_store_n(&b->head, NULL, __ATOMIC_RELAXED);
	b->tail = NULL;
	spin_unlock(&b->lock);
	while (m) {
		struct hub_msg *nx = m->next;
		hub_handle(n, m);
		hub_msg_free(m);
		m = nx;
	}
}

/* ------------------------------------------------------------------ node */

struct moq_node *moq_node_create(const struct moq_node_cfg *cfg)
{
	struct moq_node *n;

	if (!cfg || (cfg->relay && !cfg->cache))
		return NULL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->cfg = *cfg;
	if (!n->cfg.origin)
		n->cfg.origin = hop_id_random(n);
	if (!n->cfg.max_sessions)
		n->cfg.max_sessions = 4096;
	if (!n->cfg.max_subscriptions)
		n->cfg.max_subscriptions = 256;
	if (!n->cfg.max_announces)
		n->cfg.max_announces = 16;
	if (!n->cfg.max_group_streams)
		n->cfg.max_group_streams = 64;
	if (!n->cfg.max_msg)
		n->cfg.max_msg = 4096;
	if (n->cfg.max_msg > 4096)
		n->cfg.max_msg = 4096; /* the encoders' stack buffers */
	if (!n->cfg.session_queue)
		n->cfg.session_queue = 4u << 20;
	if (!n->cfg.linger_ns)
		n->cfg.linger_ns = MOQ_LINGER_NS;
	if (!n->cfg.batch)
		n->cfg.batch = MOQ_CACHE_BATCH;
	if (n->cfg.hub) {
		int id = hub_register(n->cfg.hub, n);
		if (id < 0) {
			free(n);
			return NULL;
		}
		n->hub = n->cfg.hub;
		n->hub_id = (uint32_t)id;
		if (!cfg->origin && n->hub->origin)
			n->cfg.origin = n->hub->origin;
	}
	if (n->cfg.cache) {
		int rc = moq_cache_reader_register(n->cfg.cache, n->cfg.cache_reader);
		if (rc < 0) {
			if (n->hub)
				hub_unregister(n->hub, n->hub_id);
			free(n);
			return NULL;
		}
	}
	return n;
}

void moq_node_destroy(struct moq_node *n)
{
	if (!n)
		return;
	while (n->sessions) {
		struct moq_session *s = n->sessions;
		s->conn = NULL;
		s->freed = 1;
		sess_free(s, MOQ_CODE_CLOSED, 1);
	}
	while (n->ups) {
		struct upstream *up = n->ups;
		while (up->dsubs)
			up->dsubs = up->dsubs->unext;
		up_free(up);
	}
	while (n->bcasts)
		bcast_unlink(n, n->bcasts);
	while (n->tinfos) {
		struct tinfo *t = n->tinfos;
		n->tinfos = t->next;
		tinfo_free(t);
	}
	if (n->cfg.cache)
		moq_cache_reader_unregister(n->cfg.cache, n->cfg.cache_reader);
	if (n->hub)
		hub_unregister(n->hub, n->hub_id);
	free(n);
}

int moq_node_poll(struct moq_node *n, uint64_t now)
{
	int written = 0;
	struct bcast *bc, *nx;
	struct moq_session *s;

	n->now = now;
	hub_drain(n);
	ups_settle(n);
	/* DESIGN.md, Threads: poll each relayed track's published counter
	 * once; a change marks its subscribers' sessions. */
	for (struct upstream *up = n->ups; up; up = up->next) {
		uint64_t v = moq_cache_track_version(up->ct);
		if (v != up->last_version) {
			up->last_version = v;
			up_touch(up);
		}
	}
	/* Local broadcasts' tracks are watched per session that reads them. */
	for (s = n->watch; s; s = s->wnext) {
		if (s->queued || !s->ready || s->closing || !s->conn)
			continue;
		for (struct dsub *d = s->dsubs; d; d = d->next)
			if (!d->up && !d->done && d->track &&
			    moq_cache_track_version(d->track) != d->last_version) {
				sess_mark(s);
				break;
			}
	}
	/* Lingering broadcasts whose publisher did not come back end now. */
	for (bc = n->bcasts; bc; bc = nx) {
		nx = bc->next;
		if (bc->linger_until && now >= bc->linger_until)
			bcast_end(n, bc);
	}
	/* Every FULL_NS, a session with work nothing marked is marked. */
	if (now - n->last_full >= FULL_NS) {
		n->last_full = now;
		for (s = n->sessions; s; s = s->next)
			if (!s->queued && s->ready && !s->closing && s->conn && sess_stale(s))
				sess_mark(s);
	}
	/* A FIN'd stream still unacknowledged whose group expired, was evicted
	 * or fell out of the window is reset, so its stale tail is not
	 * retransmitted (RFC 9000, 3.1). Not on every visit: a slow subscriber
	 * holds dozens of these per session. */
	if (now - n->last_fin_check >= FIN_CHECK_NS) {
		n->last_fin_check = now;
		for (s = n->sessions; s; s = s->next) {
			if (s->closing || !s->conn)
				continue;
			if (s->gouts && s->blocked) {
				s->walk_all = 1;
				sess_mark(s);
			}
			for (struct gout *go = s->gdone; go; go = go->next) {
				int stc;
				if (go->reset || go->acked >= go->written)
					continue;
				stc = moq_cache_group_status(go->g, NULL, NULL);
				if (group_stale(stc)) {
					gout_reset(s, go, err_code(stc));
					sess_mark(s);
				}
			}
		}
	}
	/* Visit the marked sessions only; marks made meanwhile (a session
	 * that opened a group stream, ...) are for the next poll. */
	n->work = n->pending;
	n->pending = NULL;
	while ((s = n->work)) {
		n->work = s->pnext;
		s->queued = 0;
		if (s->ready && !s->closing && s->conn) {
			s->depth++;
			written += fanout_session(s);
			s->depth--;
		}
		sess_flush(s);
	}
	if (n->cfg.cache) {
		moq_cache_quiescent(n->cfg.cache, n->cfg.cache_reader);
		/* Retired index entries are freed after a grace period; group
		 * opens do it too, but an idle relay must as well. */
		if (now - n->last_reclaim >= RECLAIM_NS) {
			moq_cache_reclaim(n->cfg.cache);
			n->last_reclaim = now;
		}
	}
	return written;
}

void moq_node_stats(const struct moq_node *n, struct moq_node_stats *out)
{
	*out = n->st;
}

uint64_t moq_node_origin(const struct moq_node *n)
{
	return n->cfg.origin;
}

int moq_node_publish(struct moq_node *n, const char *path, size_t len, uint64_t timescale)
{
	size_t pl;
	char *p;
	struct bcast *bc;

	if (!n->cfg.cache)
		return MOQ_ERR_STATE;
	p = path_dup(path, len, &pl);
	if (!p)
		return MOQ_ERR_INVAL;
	bc = bcast_find(n, p, pl);
	if (bc && (bc->local || bc->pub)) {
		free(p);
		return MOQ_ERR_EXISTS;
	}
	if (!bc)
		bc = bcast_add(n, p, pl);
	free(p);
	if (!bc)
		return MOQ_ERR_NOMEM;
	bc->local = 1;
	bc->owner = 0;
	bc->linger_until = 0;
	bc->timescale = timescale ? timescale : 1000;
	ann_notify(n, bc, 1);
	hub_announce(n, bc, 1);
	return 0;
}

int moq_node_unpublish(struct moq_node *n, const char *path, size_t len, uint64_t now)
{
	size_t pl;
	char *p = path_dup(path, len, &pl);
	struct bcast *bc = p ? bcast_find(n, p, pl) : NULL;

	n->now = now;
	if (!bc || !bc->local) {
		free(p);
		return MOQ_ERR_NOTFOUND;
	}
	/* Its subscriptions end once their in-flight groups are done. */
	for (struct moq_session *s = n->sessions; s; s = s->next)
		for (struct dsub *d = s->dsubs; d; d = d->next)
			if (!d->up && d->plen == pl && memcmp(d->path, p, pl) == 0) {
				d->ending = 1;
				sess_mark(s);
			}
	free(p);
	bcast_end(n, bc);
	return 0;
}

/* ------------------------------------------------------- client sessions */

struct moq_session *moq_node_connect(struct moq_node *n, struct moq_quic_endpoint *ep,
                                     const struct moq_quic_addr *local,
                                     const struct moq_quic_addr *remote, const char *path, int role,
                                     void *user, uint64_t now, int *err)
{
	struct moq_session *s = sess_new(n, NULL, 0);
	struct moq_quic_conn *c;
	int e = 0;

	if (!s) {
		if (err)
			*err = MOQ_ERR_LIMIT;
		return NULL;
	}
	if (path && !(s->path = memdup0(path, strlen(path)))) {
		s->freed = 1;
		sess_free(s, 0, 1);
		if (err)
			*err = MOQ_ERR_NOMEM;
		return NULL;
	}
	s->role = (uint8_t)role;
	s->user = user;
	n->now = now;
	c = moq_quic_connect(ep, local, remote, s, now, &e);
	if (!c) {
		s->freed = 1;
		s->closing = 1;
		n->st.sessions_total--;
		sess_free(s, 0, 1);
		if (err)
			*err = e ? e : MOQ_ERR_IO;
		return NULL;
	}
	s->conn = c;
	return s;
}

enum moq_version moq_session_version(const struct moq_session *s)
{
	return s->v;
}

int moq_session_ready(const struct moq_session *s)
{
	return s->ready && !s->closing;
}

struct moq_quic_conn *moq_session_conn(const struct moq_session *s)
{
	return s->conn;
}

void moq_session_set_user(struct moq_session *s, void *user)
{
	s->user = user;
}

void *moq_session_user(const struct moq_session *s)
{
	return s->user;
}

int moq_session_announce_request(struct moq_session *s, const char *prefix, size_t len)
{
	int err = 0;

	/* PROTOCOL.md, Goaway: the receiver opens no new streams. */
	if (!moq_session_ready(s) || s->goaway_in)
		return MOQ_ERR_STATE;
	ann_request(s, prefix, len, &err);
	return err < 0 ? err : 0;
}

int64_t moq_session_subscribe(struct moq_session *s, const char *broadcast, size_t blen,
                              const char *track, size_t tlen, const struct moq_sub_params *p)
{
	struct moq_subscribe_update a;
	struct usub *us;
	size_t pl;
	char *bp;
	int err = 0;

	/* PROTOCOL.md, Goaway: the receiver opens no new streams. */
	if (!moq_session_ready(s) || s->goaway_in)
		return MOQ_ERR_STATE;
	bp = path_dup(broadcast, blen, &pl);
	if (!bp)
		return MOQ_ERR_INVAL;
	a = (struct moq_subscribe_update){p->priority, p->ordered, p->max_latency_ms, p->start,
	                                  p->end};
	us = usub_open(s, bp, pl, track, tlen, &a, &err);
	free(bp);
	if (!us)
		return err;
	return (int64_t)us->id;
}

int moq_session_subscribe_update(struct moq_session *s, uint64_t id, const struct moq_sub_params *p)
{
	struct usub *us = usub_find(s, id);
	struct moq_msg m = {.type = MOQ_MSG_SUBSCRIBE_UPDATE};

	if (!us || us->closed)
		return MOQ_ERR_NOTFOUND;
	m.u.subscribe_update = (struct moq_subscribe_update){p->priority, p->ordered,
	                                                     p->max_latency_ms, p->start, p->end};
	return st_send(s, us->st, -1, &m, 0);
}

int moq_session_unsubscribe(struct moq_session *s, uint64_t id)
{
	struct usub *us = usub_find(s, id);

	if (!us || us->closed)
		return MOQ_ERR_NOTFOUND;
	usub_close(us);
	/* Cancel its groups in flight (STOP_SENDING). */
	for (uint32_t i = 0; i < s->streams.cap; i++) {
		struct mstream *st = s->streams.vals[i];
		if (st && st->kind == SK_GROUP_IN && st->gi->us == us && !st->gi->refused) {
			gin_end(s, st->gi, MOQ_CODE_CANCEL);
			if (!st->rx_fin)
				moq_quic_stream_stop_sending(s->conn, st->sid, MOQ_CODE_CANCEL);
		}
	}
	return 0;
}

int moq_session_track(struct moq_session *s, const char *broadcast, size_t blen, const char *track,
                      size_t tlen)
{
	struct moq_msg m = {.type = MOQ_MSG_TRACK};
	struct mstream *st;
	struct tinfo *ti;
	size_t pl;
	char *bp;
	int err;

	/* PROTOCOL.md, Goaway: the receiver opens no new streams. */
	if (!moq_session_ready(s) || s->goaway_in)
		return MOQ_ERR_STATE;
	if (s->v < MOQ_LITE_05)
		return MOQ_ERR_INVAL;
	bp = path_dup(broadcast, blen, &pl);
	if (!bp)
		return MOQ_ERR_INVAL;
	ti = tinfo_new(bp, pl, track, tlen);
	free(bp);
	if (!ti)
		return MOQ_ERR_NOMEM;
	st = st_open(s, 1, SK_TRACK_OUT, &err);
	if (!st) {
		tinfo_free(ti);
		return err;
	}
	st->ti = ti;
	m.u.track.broadcast = (struct moq_str){ti->path, ti->plen};
	m.u.track.track = (struct moq_str){ti->track, ti->tlen};
	return st_send(s, st, MOQ_STREAM_TRACK, &m, 1);
}

int64_t moq_session_fetch(struct moq_session *s, const char *broadcast, size_t blen,
                          const char *track, size_t tlen, uint8_t priority, uint64_t seq)
{
	struct moq_msg m = {.type = MOQ_MSG_FETCH};
	struct mstream *st;
	struct gin *gi;
	size_t pl;
	char *bp;
	int err;

	/* PROTOCOL.md, Goaway: the receiver opens no new streams. */
	if (!moq_session_ready(s) || s->goaway_in)
		return MOQ_ERR_STATE;
	gi = calloc(1, sizeof(*gi));
	bp = path_dup(broadcast, blen, &pl);
	if (!gi || !bp) {
		free(gi);
		free(bp);
		return bp ? MOQ_ERR_NOMEM : MOQ_ERR_INVAL;
	}
	st = st_open(s, 1, SK_FETCH_OUT, &err);
	if (!st) {
		free(gi);
		free(bp);
		return err;
	}
	/* The reply is a group's frames without a header (lite-05 format). */
	moq_group_rx_init(&gi->rx, s->v, false);
	gi->fetch = 1;
	gi->have_hdr = 1;
	gi->sub_id = s->next_sub_id++;
	gi->seq = seq;
	st->gi = gi;
	m.u.fetch = (struct moq_fetch){{bp, pl}, {track, tlen}, priority, seq};
	err = st_send(s, st, MOQ_STREAM_FETCH, &m, 1);
	free(bp);
	if (err < 0)
		return err;
	if (s->n->cfg.cb && s->n->cfg.cb->group_begin)
		s->n->cfg.cb->group_begin(s, s->n->cfg.user, gi->sub_id, seq);
	return (int64_t)gi->sub_id;
}

int moq_node_goaway(struct moq_node *n, const char *uri, size_t len)
{
	int told = 0;

	for (struct moq_session *s = n->sessions; s; s = s->next)
		if (moq_session_ready(s) && s->v >= MOQ_LITE_04 &&
		    moq_session_goaway(s, uri, len) == 0)
			told++;
	return told;
}

int moq_session_goaway(struct moq_session *s, const char *uri, size_t len)
{
	struct moq_msg m = {.type = MOQ_MSG_GOAWAY};
	struct mstream *st;
	int err;

	if (!moq_session_ready(s))
		return MOQ_ERR_STATE;
	if (s->v < MOQ_LITE_04)
		return MOQ_ERR_INVAL;
	st = st_open(s, 1, SK_GOAWAY_OUT, &err);
	if (!st)
		return err;
	m.u.goaway.uri = (struct moq_str){uri, len};
	return st_send(s, st, MOQ_STREAM_GOAWAY, &m, 1);
}

void moq_session_close(struct moq_session *s, uint64_t code)
{
	if (s->closing && !s->conn)
		return;
	s->closing = 1;
	s->close_code = code;
	if (s->conn && !s->depth)
		moq_quic_conn_close(s->conn, code, NULL);
	else if (!s->freed)
		sess_mark(s);
}

int64_t moq_session_write_raw(struct moq_session *s, int bidi, const uint8_t *data, size_t len,
                              int fin)
{
	int err;
	struct mstream *st;

	if (!moq_session_ready(s))
		return MOQ_ERR_STATE;
	st = st_open(s, bidi, SK_RAW, &err);
	if (!st)
		return err;
	err = st_write(s, st, data, len, fin);
	return err < 0 ? err : st->sid;
}

/* --- relay-added latency (moq.h) ----------------------------------------- */

/* Histogram bucket of @v ns (moq.h, MOQ_LAT_*). */
static unsigned lat_bucket(uint64_t v)
{
	unsigned e;

	if (v < (1ull << MOQ_LAT_MIN_SHIFT))
		return 0;
	e = 63u - (unsigned)__builtin_clzll(v);
	if (e >= MOQ_LAT_MAX_SHIFT)
		return MOQ_LAT_BUCKETS - 1;
	return 1u + ((e - MOQ_LAT_MIN_SHIFT) << MOQ_LAT_SUB_BITS) +
	       (unsigned)((v >> (e - MOQ_LAT_SUB_BITS)) & ((1u << MOQ_LAT_SUB_BITS) - 1));
}

/* [lower, upper) of bucket @b in ns; the last bucket's upper is UINT64_MAX. */
static void lat_bounds(unsigned b, uint64_t *lo, uint64_t *hi)
{
	unsigned e, m;

	if (b == 0) {
		*lo = 0;
		*hi = 1ull << MOQ_LAT_MIN_SHIFT;
		return;
	}
	if (b >= MOQ_LAT_BUCKETS - 1) {
		*lo = 1ull << MOQ_LAT_MAX_SHIFT;
		*hi = UINT64_MAX;
		return;
	}
	e = MOQ_LAT_MIN_SHIFT + ((b - 1) >> MOQ_LAT_SUB_BITS);
	m = (b - 1) & ((1u << MOQ_LAT_SUB_BITS) - 1);
	*lo = (uint64_t)((1u << MOQ_LAT_SUB_BITS) + m) << (e - MOQ_LAT_SUB_BITS);
	*hi = (uint64_t)((1u << MOQ_LAT_SUB_BITS) + m + 1) << (e - MOQ_LAT_SUB_BITS);
}

/* Per write to a subscriber's stream. A frame is written to many subscribers
 * in one iteration, and under load to each at its own position in the
 * stream, so the pending arrivals are a table hashed by arrival (a slot per
 * distinct frame, with a count) rather than a list of deliveries: the
 * same-as-last-time check takes the usual case, else a multiplicative hash
 * and at most LAT_PROBES linear probes; a delivery that finds no slot is
 * counted in overflow. */
#define LAT_PROBES 8u
_Static_assert((MOQ_LAT_PENDING & (MOQ_LAT_PENDING - 1)) == 0 && MOQ_LAT_PENDING <= 65536,
               "the pending table is a power of two with 16-bit slot numbers");

static inline void lat_note(struct moq_node *n, uint64_t a)
{
	struct lat_pend *p = &n->lat_pend[n->lat_last];
	uint32_t h;

	if (p->count != 0 && p->arrival == a) {
		p->count++;
		return;
	}
	h = (uint32_t)((a * 0x9e3779b97f4a7c15ull) >> 40);
	for (uint32_t k = 0; k < LAT_PROBES; k++) {
		uint32_t i = (h + k) & (MOQ_LAT_PENDING - 1);

		p = &n->lat_pend[i];
		if (p->count == 0) {
			p->arrival = a;
			p->count = 1;
			n->lat_used[n->lat_npend++] = (uint16_t)i;
			n->lat_last = i;
			return;
		}
		if (p->arrival == a) {
			p->count++;
			n->lat_last = i;
			return;
		}
	}
	n->lat.overflow++;
}

void moq_lat_record(struct moq_node *n, const struct moq_cache_frame *f, unsigned cnt)
{
	for (unsigned i = 0; i < cnt; i++)
		if (moq_cache_frame_complete(&f[i]))
			lat_note(n, f[i].arrival);
}

void moq_node_latency_commit(struct moq_node *n, uint64_t now_ns)
{
	struct moq_lat_hist *h = &n->lat;

	for (uint32_t k = 0; k < n->lat_npend; k++) {
		struct lat_pend *p = &n->lat_pend[n->lat_used[k]];
		uint64_t d = now_ns > p->arrival ? now_ns - p->arrival : 0;

		h->bucket[lat_bucket(d)] += p->count;
		h->samples += p->count;
		h->sum_ns += d * p->count;
		if (d > h->max_ns)
			h->max_ns = d;
		p->count = 0;
	}
	n->lat_npend = 0;
}

uint32_t moq_node_latency_pending(const struct moq_node *n)
{
	return n->lat_npend;
}

void moq_node_latency_hist(const struct moq_node *n, struct moq_lat_hist *out)
{
	memcpy(out, &n->lat, sizeof(*out));
}

void moq_node_latency(const struct moq_node *n, struct moq_latency *out)
{
	moq_lat_hist_summary(&n->lat, out);
}

void moq_lat_hist_merge(struct moq_lat_hist *dst, const struct moq_lat_hist *src)
{
	dst->samples += src->samples;
	dst->overflow += src->overflow;
	dst->sum_ns += src->sum_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
	for (unsigned b = 0; b < MOQ_LAT_BUCKETS; b++)
		dst->bucket[b] += src->bucket[b];
}

static uint64_t sat_sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

void moq_lat_hist_sub(struct moq_lat_hist *dst, const struct moq_lat_hist *base)
{
	uint64_t lo, hi, top = 0;

	dst->samples = sat_sub(dst->samples, base->samples);
	dst->overflow = sat_sub(dst->overflow, base->overflow);
	dst->sum_ns = sat_sub(dst->sum_ns, base->sum_ns);
	for (unsigned b = 0; b < MOQ_LAT_BUCKETS; b++) {
		dst->bucket[b] = sat_sub(dst->bucket[b], base->bucket[b]);
		if (dst->bucket[b]) {
			lat_bounds(b, &lo, &hi);
			top = hi;
		}
	}
	if (top < dst->max_ns)
		dst->max_ns = top;
}

uint64_t moq_lat_hist_quantile(const struct moq_lat_hist *h, double q)
{
	uint64_t total = 0, rank, seen = 0, lo, hi, mid;

	for (unsigned b = 0; b < MOQ_LAT_BUCKETS; b++)
		total += h->bucket[b];
	if (total == 0)
		return 0;
	if (q < 0)
		q = 0;
	if (q > 1)
		q = 1;
	/* the smallest value with at least q of the samples at or below it */
	rank = (uint64_t)(q * (double)total + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > total)
		rank = total;
	for (unsigned b = 0; b < MOQ_LAT_BUCKETS; b++) {
		seen += h->bucket[b];
		if (seen < rank)
			continue;
		lat_bounds(b, &lo, &hi);
		mid = hi == UINT64_MAX ? h->max_ns : lo + (hi - lo) / 2;
		return mid < h->max_ns ? mid : h->max_ns; /* every sample <= max */
	}
	return h->max_ns;
}

void moq_lat_hist_summary(const struct moq_lat_hist *h, struct moq_latency *out)
{
	memset(out, 0, sizeof(*out));
	out->samples = h->samples;
	out->overflow = h->overflow;
	out->p50_us = (double)moq_lat_hist_quantile(h, 0.50) / 1e3;
	out->p90_us = (double)moq_lat_hist_quantile(h, 0.90) / 1e3;
	out->p99_us = (double)moq_lat_hist_quantile(h, 0.99) / 1e3;
	out->max_us = (double)h->max_ns / 1e3;
	out->mean_us = h->samples ? (double)h->sum_ns / (double)h->samples / 1e3 : 0;
}
