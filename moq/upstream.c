/* SPDX-License-Identifier: MIT */
/*
 * upstream.c: the relay's one upstream subscription per track: the
 * aggregate of its subscribers' parameters, opening, updating and closing
 * the SUBSCRIBE we send (docs/PROTOCOL.md, Subscribe and Priority).
 */
#include "moq.h"

#include <stdlib.h>
#include <string.h>

#include "moq_int.h"

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
		if (d->p.start == MOQ_GROUP_NONE || (d->by_age && d->p.start == 0))
			a->start = MOQ_GROUP_NONE; /* lite-06 floor 0: the live edge too */
}

/* Strip the session's root from a full path for the wire. */
struct moq_str wire_path(const struct moq_session *s, const char *p, size_t len)
{
	size_t off = 0;

	if (s->rootlen && moq_path_has_prefix(s->root, s->rootlen, p, len, &off))
		return (struct moq_str){p + off, len - off};
	return (struct moq_str){p, len};
}

struct usub *usub_open(struct moq_session *s, const char *b, size_t bl, const char *t, size_t tl,
                       const struct moq_subscribe_update *p, int *err)
{
	struct usub *us;
	struct mstream *st;
	struct moq_msg m = {.type = MOQ_MSG_SUBSCRIBE};

	if (s->nusubs >= sess_max_subscriptions(s)) {
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
	        (struct moq_subscribe){us->id,         wire_path(s, b, bl), {t, tl},  p->priority,
	                               p->ordered,     p->max_latency_ms,   p->start, p->end,
	                               p->frame_start, p->frame_end};
	*err = st_send(s, st, MOQ_STREAM_SUBSCRIBE, &m, 0);
	us->next = s->usubs;
	s->usubs = us;
	s->nusubs++;
	return us;
}

/* Unsubscribe: FIN our side (PROTOCOL.md, Subscribe: FIN = unsubscribe). */
void usub_close(struct usub *us)
{
	if (us->closed)
		return;
	us->closed = 1;
	if (us->st && us->s->tp)
		st_write(us->s, us->st, NULL, 0, 1);
}

void up_open(struct upstream *up, struct moq_session *pub)
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
		/* The publisher ended the track (END, FIN or a reset): its
		 * subscribers finish; nobody asks again until a new upstream
		 * (after the last of them left). */
		if (up->ended)
			return;
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
		/* not to a publisher that ended the subscription (up_end) */
		if (!up->us->closed && !up->ended)
			st_send(up->us->s, up->us->st, -1, &m, 0);
	}
}

/* Recompute @up's aggregate over all its subscribers (or free it when none
 * is left). */
static void up_recompute(struct upstream *up)
{
	struct moq_subscribe_update a;
	struct moq_node *n = up->n;

	if (!up->dsubs && !up->nremote && !up->nlocal) {
		/* cfg.up_hold_ns: a running subscription waits for a
		 * subscriber to come back before it is closed (ups_settle) */
		if (n->cfg.up_hold_ns && up->us && !up->us->closed && !up->ended) {
			if (!up->hold_until) {
				up->hold_until = n->now + n->cfg.up_hold_ns;
				if (!n->hold_next || up->hold_until < n->hold_next)
					n->hold_next = up->hold_until;
			}
			return;
		}
		up_free(up);
		return;
	}
	up->hold_until = 0;
	up_agg(up, &a);
	up_apply(up, &a);
}

/* A subscriber of @up left, changed its parameters, or a worker's interest
 * changed: the aggregate of a running upstream subscription is recomputed
 * at the next poll, once however many changed (a walk over every subscriber
 * per change is quadratic in a ramp or a mass disconnect). */
void up_changed(struct upstream *up)
{
	struct moq_node *n = up->n;

	/* Opening (no upstream subscription yet) and closing (no subscriber
	 * left) happen now; only an update of a running one waits. */
	if (!up->us || (!up->dsubs && !up->nremote && !up->nlocal)) {
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
void up_added(struct upstream *up, const struct dsub *d)
{
	struct moq_subscribe_update a = up->agg;

	if (up->dirty || !up->agg_set || !up->us || up->ndsubs <= 1 || up->nremote || up->nlocal) {
		up_changed(up);
		return;
	}
	agg_add(&a, &d->p);
	up_apply(up, &a);
}

void ups_settle(struct moq_node *n)
{
	struct upstream *up, *nx;

	while ((up = n->dirty_ups)) {
		n->dirty_ups = up->dnext;
		up->dirty = 0;
		up->dnext = NULL;
		up_recompute(up);
	}
	/* Held upstreams (cfg.up_hold_ns) nobody came back to close now. */
	if (!n->hold_next || n->now < n->hold_next)
		return;
	n->hold_next = 0;
	for (up = n->ups; up; up = nx) {
		nx = up->next;
		if (!up->hold_until)
			continue;
		if (up->dsubs || up->nremote || up->nlocal) {
			up->hold_until = 0;
		} else if (n->now >= up->hold_until || !up->us || up->us->closed || up->ended) {
			up_free(up);
		} else if (!n->hold_next || up->hold_until < n->hold_next) {
			n->hold_next = up->hold_until;
		}
	}
}

/* Groups of a track whose streams may still be open at the end of an
 * upstream subscription: up_end_check looks this far below the end for one
 * still arriving (a publisher pipelines a few groups, not dozens; past
 * that, the max latency still ends the wait). */
#define END_OPEN_SCAN 32u

/* How long an ended upstream subscription waits for its last groups: the
 * track's max latency, or the largest its subscribers asked for when that
 * is smaller (a group older than that is of no use to any of them). */
static uint64_t end_wait_ns(const struct upstream *up)
{
	uint64_t lat = moq_cache_track_max_latency(up->ct), ms = up->agg.max_latency_ms;

	if (ms && ms < UINT64_MAX / 1000000u && ms * 1000000u < lat)
		lat = ms * 1000000u;
	return lat;
}

/*
 * The publisher ended @up's subscription: END {@end} (lite-05), or its FIN
 * (@end UINT64_MAX: the end after an END, the only end signal of
 * lite-03/04). END and FIN can arrive before the headers of the last groups
 * (a publisher's group streams queued behind each other: issue 29), so
 * the subscription stays open on our side: groups below the end are taken
 * until each arrived or the max latency passed (up_end_check), and only
 * then is it closed. Downstream, END {@end} is forwarded as it came, after
 * those groups; one that never arrived is a DROP, never a shorter END.
 */
void up_end(struct upstream *up, uint64_t end)
{
	struct moq_node *n = up->n;

	if (end != UINT64_MAX || !up->ended)
		up->end_seq = end; /* a FIN after END keeps END's group */
	up->ended = 1;
	if (!up->end_wait && up->us && !up->us->closed) {
		up->end_wait = 1;
		up->end_deadline = n->now + end_wait_ns(up);
	}
	up_touch(up);
	if (up->end_wait)
		up_end_check(up); /* (everything below END may be here already) */
}

/* Whether every group below @up's END that can still arrive has, and none
 * of them is still being written. The cache takes groups above its newest
 * only (MOQ_ERR_ORDER), so those are the ones from the newest + 1 on. */
static bool end_arrived(struct upstream *up)
{
	uint64_t latest, es = up->end_seq;
	int rc;

	if (es == UINT64_MAX)
		return false; /* FIN alone: any group may still come */
	if (es == 0)
		return true;
	rc = moq_cache_track_latest(up->ct, &latest);
	if (rc == MOQ_ERR_CLOSED)
		return true;
	if (rc != 0 || latest + 1 < es)
		return false;
	for (uint64_t k = 0, q = es - 1; k < END_OPEN_SCAN; k++, q--) {
		struct moq_cache_group *g;
		int stc;

		if (moq_cache_track_group(up->ct, q, &g) == 0) {
			stc = moq_cache_group_status(g, NULL, NULL);
			moq_cache_group_unref(g);
			if (stc == 0)
				return false; /* still arriving */
		}
		if (q == 0)
			break;
	}
	return true;
}

/* At the poll, for an upstream in end_wait (up_end): once its last groups
 * arrived, the max latency passed or the publisher is gone, the wait ends:
 * the groups below END still missing are counted (fanout DROPs them), the
 * track's newest group may expire (up_idle) and our side of the
 * subscription is FIN'd. */
void up_end_check(struct upstream *up)
{
	struct moq_node *n = up->n;
	bool gone = !up->us || up->us->closed;
	uint64_t latest;

	if (!gone && n->now < up->end_deadline && !end_arrived(up))
		return;
	up->end_wait = 0;
	/* (a track that never got a group: nothing to lose, its subscribers
	 * never started) */
	if (up->end_seq != UINT64_MAX && moq_cache_track_latest(up->ct, &latest) == 0 &&
	    latest + 1 < up->end_seq)
		n->st.groups_end_lost += up->end_seq - latest - 1;
	up_idle(up);
	if (!gone)
		usub_close(up->us);
	up_touch(up);
}

uint32_t moq_session_upstreams(const struct moq_session *s)
{
	uint32_t k = 0;

	for (const struct usub *us = s->usubs; us; us = us->next)
		k += us->up && !us->closed;
	return k;
}

uint64_t moq_session_peer_origin(const struct moq_session *s)
{
	return s->peer_origin;
}

uint32_t moq_session_announce_requests(const struct moq_session *s)
{
	return s->nann_in;
}

void up_free(struct upstream *up)
{
	struct moq_node *n = up->n;
	if (up->us) {
		usub_close(up->us);
		up->us->up = NULL;
		up->us = NULL;
		n->st.upstream_subs--;
		up_idle(up);
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
struct upstream *up_get(struct moq_node *n, const char *p, size_t pl, const char *t, size_t tl,
                        int *limited)
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

struct upstream *up_find(struct moq_node *n, const char *p, size_t pl, const char *t, size_t tl)
{
	for (struct upstream *up = n->ups; up; up = up->next)
		if (up->plen == pl && up->tlen == tl && memcmp(up->path, p, pl) == 0 &&
		    memcmp(up->track, t, tl) == 0)
			return up;
	return NULL;
}

/* ---------------------------------------------- a lost route's waiters */

/*
 * Failover across a lost route (issue 26): the broadcast of @up's path
 * ended because its route was lost at @lost_at (a cluster link or publisher
 * gone, the linger past: bcast_end), not by its publisher's ENDED.
 * Subscribers that came in the route's last seconds (the loss not yet
 * noticed, the dead route's broadcast still listed) and those reading it
 * wait for a new route of the path (ups_reattach) until their group
 * deadline from the loss: the largest max latency they asked for, at least
 * the track's (with the defaults, 5 s, no longer than the linger). Returns
 * whether @up waits; otherwise it ends now.
 */
bool up_orphan(struct upstream *up, uint64_t lost_at)
{
	uint64_t lat = moq_cache_track_max_latency(up->ct), ms = up->agg.max_latency_ms;

	if (!up->dsubs && !up->nremote && !up->nlocal)
		return false;
	if (ms && ms < UINT64_MAX / 1000000u && ms * 1000000u > lat)
		lat = ms * 1000000u;
	if (lost_at > UINT64_MAX - lat || lost_at + lat <= up->n->now)
		return false;
	up->orphan_until = lost_at + lat;
	return true;
}

/* No new route came within the wait: @up's subscribers end as they would
 * have at the broadcast's end. Other workers reading through @up (nremote)
 * decide for theirs: it waits while they do (they let go, HUB_UNSUB, when
 * their own wait ends). */
void up_orphan_expire(struct upstream *up)
{
	if (up->nremote) {
		up->orphan_until = up->n->now + 1000000000ull;
		return;
	}
	up->orphan_until = 0;
	up->ended = 1;
	up->end_seq = UINT64_MAX;
	up_touch(up);
}

/* A route of @bc's path came (a new broadcast after one that was lost):
 * the upstreams waiting for it (up_orphan) subscribe there, to the
 * publisher or, on another worker's broadcast, through that worker. */
void ups_reattach(struct moq_node *n, struct bcast *bc)
{
	for (struct upstream *up = n->ups; up; up = up->next) {
		if (!up->orphan_until || up->plen != bc->len ||
		    memcmp(up->path, bc->path, bc->len) != 0)
			continue;
		up->orphan_until = 0;
		if (!up->dsubs && !up->nremote && !up->nlocal)
			continue;
		n->st.ups_reattached++;
		if (bc->pub && !bc->pub->closing) {
			/* ours now: the worker we read through before lets go */
			if (up->remote_owner)
				hub_send(n, up->remote_owner, HUB_UNSUB, up->path, up->plen,
				         up->track, up->tlen);
			up->remote_owner = 0;
			if (!up->us)
				up_open(up, bc->pub);
		} else if (bc->owner && up->remote_owner != bc->owner) {
			/* (the same owner kept our subscription: it waited too) */
			if (up->remote_owner)
				hub_send(n, up->remote_owner, HUB_UNSUB, up->path, up->plen,
				         up->track, up->tlen);
			up->remote_owner = bc->owner;
			hub_send(n, bc->owner, HUB_SUB, up->path, up->plen, up->track, up->tlen);
		}
		up_touch(up);
	}
}

/* @d has read nothing of its track, which another worker restarted
 * (up_restart: the cache track dropped, a new one made): it reads the new
 * one, as does @d's upstream. Returns whether it moved. */
bool dsub_retrack(struct dsub *d)
{
	struct upstream *up = d->up;
	struct moq_cache_track *nt;

	if (!up || d->started)
		return false;
	nt = moq_cache_track_lookup(up->n->cfg.cache, up->path, up->plen, up->track, up->tlen);
	if (!nt)
		return false;
	if (nt == d->track) {
		moq_cache_track_unref(nt);
		return false;
	}
	if (up->ct == d->track) {
		moq_cache_track_unref(up->ct);
		moq_cache_track_ref(nt);
		up->ct = nt;
		up->last_version = 0;
	}
	moq_cache_track_unref(d->track);
	d->track = nt;
	d->last_version = 0;
	return true;
}
