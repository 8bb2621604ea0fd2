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

/* ------------------------------------------------------ pending sessions */

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
