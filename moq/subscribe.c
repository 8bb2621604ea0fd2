/* SPDX-License-Identifier: MIT */
/*
 * subscribe.c: SUBSCRIBE from the peer: bounds, routing to a local broadcast or
 * an upstream, SUBSCRIBE_UPDATE, unsubscribe (docs/PROTOCOL.md, Subscribe).
 */
#include "moq.h"

#include <stdlib.h>
#include <string.h>

#include "moq_int.h"

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
	PLINK_UNLINK(d, unext, uprev);
	up->ndsubs--;
	d->up = NULL;
	up_changed(up);
}

/* The subscriber unsubscribed (or reset the stream): cancel in-flight
 * groups, leave the upstream, FIN our side. */
void dsub_cancel(struct moq_session *s, struct dsub *d)
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

/* The subscriber's own max_latency (PROTOCOL.md, Subscribe), applied to its
 * delivery: a group older than that (by its open time) is skipped with a
 * DROP or its stream reset with 2 (old) once a newer group exists, as the
 * cache does at the track's max latency. 0 (none given) or a value not
 * below the track's leaves it to the cache. */
void dsub_params(struct dsub *d)
{
	uint64_t ms = d->p.max_latency_ms;

	if (d->lat_ns)
		d->s->nlat--;
	d->lat_ns = 0;
	if (ms && d->track && ms < UINT64_MAX / 1000000u &&
	    ms * 1000000u < moq_cache_track_max_latency(d->track)) {
		d->lat_ns = ms * 1000000u;
		d->s->nlat++;
	}
}

void dsub_free(struct moq_session *s, struct dsub *d)
{
	dsub_detach(d);
	for (struct gout *go = s->gouts; go; go = go->next)
		if (go->d == d)
			go->d = NULL;
	for (struct gout *go = s->gfin; go; go = go->next)
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
	if (d->lat_ns)
		s->nlat--;
	if (d->counted)
		bound_put(s->n, 0);
	if (d->track)
		moq_cache_track_unref(d->track);
	if (d->st)
		d->st->d = NULL;
	free(d->path);
	moq_heap_free(MOQ_HEAP_SUB, d);
}

/* A new subscriber the node has no headroom for (moq_node_admit): reset
 * 11 bounds, and with cfg.admit_goaway a lite-04+ session is told, once,
 * to go to that relay (PROTOCOL.md, Goaway). */
static void refuse_capacity(struct moq_session *s, struct mstream *st)
{
	struct moq_node *n = s->n;

	n->st.subs_refused_capacity++;
	n->st.refused_bounds++;
	if (n->cfg.admit_goaway && !s->admit_goaway && s->v >= MOQ_LITE_04 &&
	    moq_session_goaway(s, n->cfg.admit_goaway, n->cfg.admit_goaway_len) == 0) {
		s->admit_goaway = 1;
		n->st.goaways_capacity++;
	}
	st_refuse(s, st, MOQ_CODE_BOUNDS);
}

/* SUBSCRIBE from the peer (PROTOCOL.md, Subscribe). A request beyond a
 * configured bound (per session, cfg.max_subscribers, cfg.max_tracks) is
 * refused with reset 11 bounds (PROTOCOL.md, Error codes). */
void on_subscribe(struct moq_session *s, struct mstream *st, const struct moq_subscribe *m)
{
	struct moq_node *n = s->n;
	char *full = NULL;
	size_t flen;
	int limited = 0;
	uint64_t code;
	struct bcast *bc;
	struct dsub *d = NULL;

	n->st.subscribes_in++;
	if (dsub_find(s, m->id)) {
		sess_fail(s, MOQ_CODE_DUPLICATE); /* ids are unique per session */
		return;
	}
	if (s->ndsubs >= sess_max_subscriptions(s)) {
		n->st.subs_refused_session++;
		n->st.refused_bounds++;
		st_refuse(s, st, MOQ_CODE_BOUNDS);
		return;
	}
	if (!s->admitted && (s->admit_refused || n->admit_credit <= 0)) {
		s->admit_refused = 1; /* all or nothing: not video without audio */
		refuse_capacity(s, st);
		return;
	}
	if (req_path(s, st, &m->broadcast, m->track.len, &full, &flen) < 0)
		return;
	if (!bound_take(n, 0)) {
		free(full);
		n->st.subs_refused_limit++;
		n->st.refused_bounds++;
		st_refuse(s, st, MOQ_CODE_BOUNDS);
		return;
	}
	code = MOQ_CODE_BOUNDS;
	if (!full)
		goto fail_refuse;
	bc = n->cfg.cache ? bcast_find(n, full, flen) : NULL;
	code = MOQ_CODE_NOT_FOUND;
	if (!bc || bc->pub == s)
		goto fail_refuse;
	code = MOQ_CODE_BOUNDS;
	d = moq_heap_calloc_lines(MOQ_HEAP_SUB, sizeof(*d));
	if (!d)
		goto fail_refuse;
	d->s = s;
	d->st = st;
	d->id = m->id;
	d->p = (struct moq_sub_params){m->priority, m->ordered, m->max_latency_ms, m->start,
	                               m->end};
	/* lite-06: frame bounds within the named start / end group (the codec
	 * reads them only there; a bound on an unnamed group is refused) */
	if ((m->frame_start && m->start == MOQ_GROUP_NONE) ||
	    (m->frame_end && m->end == MOQ_GROUP_NONE) ||
	    (m->frame_end && m->start == m->end && m->frame_end <= m->frame_start) ||
	    m->frame_start > UINT32_MAX || m->frame_end > UINT32_MAX) {
		code = MOQ_CODE_BOUNDS;
		goto fail_refuse;
	}
	d->frame_start = m->frame_start;
	d->frame_end = m->frame_end;
	d->by_age = m->by_age;
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
		PLINK_AT(&up->dsubs, d, unext, uprev);
		up->ndsubs++;
		moq_cache_track_ref(up->ct);
		d->track = up->ct;
	}
	d->path = full;
	d->plen = flen;
	dsub_params(d);
	if (d->by_age)
		dsub_timescale(n, bc, d);
	st->d = d;
	if (!d->up && !s->watched) {
		/* a local broadcast's track: moq_node_poll watches it */
		s->watched = 1;
		s->wnext = n->watch;
		n->watch = s;
	}
	sess_mark(s);
	/* set-up done and serving a subscriber: quic/ may move the connection
	 * to its fast path once quiet (quic.h; same calls either way) */
	if (s->conn != NULL)
		(void)moq_quic_conn_allow_handoff(s->conn);
	else if (s->bops && s->bops->allow_handoff)
		s->bops->allow_handoff(s->tp);
	d->next = s->dsubs;
	s->dsubs = d;
	s->ndsubs++;
	if (d->up)
		up_added(d->up, d);
	if (n->admit_credit != MOQ_ADMIT_OPEN)
		n->admit_credit--;
	if (!s->admitted) {
		s->admitted = 1;
		n->st.subs_admitted++;
	}
	return;
fail_refuse:
	moq_heap_free(MOQ_HEAP_SUB, d);
	free(full);
	bound_put(n, 0);
	st_refuse(s, st, code);
}

/* SUBSCRIBE_UPDATE (PROTOCOL.md, Subscribe): every field replaces the
 * subscription's. Priority and ordered rank its streams from now on,
 * max_latency applies to its delivery (dsub_params), end bounds it. start:
 * before START it is where the subscription will start; after, a later
 * start skips the groups before it (their streams in flight are cancelled,
 * they are out of range), an earlier one changes nothing (groups already
 * accounted for are not sent again). */
void on_subscribe_update(struct moq_session *s, struct mstream *st,
                         const struct moq_subscribe_update *m)
{
	struct dsub *d = st->d;

	sess_mark(s);
	if (!d)
		return;
	d->p.priority = m->priority;
	d->p.ordered = m->ordered;
	d->p.max_latency_ms = m->max_latency_ms;
	d->p.start = m->start;
	d->p.end = m->end;
	d->frame_start = m->start == MOQ_GROUP_NONE ? 0 : m->frame_start;
	d->frame_end = m->end == MOQ_GROUP_NONE ? 0 : m->frame_end;
	dsub_params(d);
	if (d->started && m->start != MOQ_GROUP_NONE && m->start > d->next_seq)
		d->next_seq = m->start;
	for (struct gout *go = s->gouts; go; go = go->next) {
		if (go->d != d)
			continue;
		go->priority = m->priority;
		go->ordered = m->ordered;
		if (d->started && m->start != MOQ_GROUP_NONE && go->seq < m->start)
			gout_reset(s, go, MOQ_CODE_CANCEL);
	}
	gout_resort(s);
	if (d->up)
		up_changed(d->up);
}
