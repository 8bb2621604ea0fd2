/* SPDX-License-Identifier: MIT */
/*
 * track.c: TRACK / TRACK_INFO (lite-05): the relay's bounded cache of
 * track info, asking the publisher or the owning worker, answering waiting
 * requests (docs/PROTOCOL.md, Track).
 */
#include "moq.h"

#include <stdlib.h>
#include <string.h>

#include "moq_int.h"

#define MAX_TINFO 1024u /* TRACK_INFO answers a relay node keeps */

/* ---------------------------------------------------------- track info */

void tinfo_free(struct tinfo *ti)
{
	free(ti->path);
	free(ti->track);
	free(ti);
}

struct tinfo *tinfo_new(const char *p, size_t pl, const char *t, size_t tl)
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
struct tinfo *tinfo_find(struct moq_node *n, const char *p, size_t pl, const char *t, size_t tl)
{
	for (struct tinfo *ti = n->tinfos; ti; ti = ti->next)
		if (ti->plen == pl && ti->tlen == tl && memcmp(ti->path, p, pl) == 0 &&
		    memcmp(ti->track, t, tl) == 0)
			return ti;
	return NULL;
}

struct tinfo *tinfo_get(struct moq_node *n, const char *p, size_t pl, const char *t, size_t tl)
{
	struct tinfo *ti = tinfo_find(n, p, pl, t, tl);

	if (ti)
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

/* @bc ended: forget what we learned about its tracks; waiting requests get
 * the defaults. */
void tinfo_drop_path(struct moq_node *n, const char *p, size_t pl)
{
	for (struct tinfo **pp = &n->tinfos; *pp;) {
		struct tinfo *ti = *pp;
		if (ti->plen != pl || memcmp(ti->path, p, pl) != 0) {
			pp = &ti->next;
			continue;
		}
		for (struct moq_session *s = n->sessions; s; s = s->next)
			for (uint32_t i = 0; i < s->streams.cap; i++) {
				struct mstream *st = s->streams.ents[i].val;
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

const struct moq_track_info default_info = {0, false, MOQ_DEFAULT_MAX_LATENCY_MS, 1000};

/* TRACK_INFO for @ti is known: answer the requests waiting here and the
 * other workers that asked us through the hub. */
void tinfo_learned(struct moq_node *n, struct tinfo *ti, const struct moq_track_info *info)
{
	ti->have = 1;
	ti->ti = *info;
	for (struct moq_session *o = n->sessions; o; o = o->next)
		for (uint32_t i = 0; i < o->streams.cap; i++) {
			struct mstream *w = o->streams.ents[i].val;
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
void tinfo_ask(struct moq_node *n, struct bcast *bc, struct tinfo *ti)
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

void on_track(struct moq_session *s, struct mstream *st, const struct moq_track *t)
{
	struct moq_node *n = s->n;
	char *full;
	size_t flen;
	struct bcast *bc;
	struct tinfo *ti;

	if (req_path(s, st, &t->broadcast, t->track.len, &full, &flen) < 0)
		return;
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

void on_track_info(struct moq_session *s, struct mstream *st, const struct moq_track_info *info)
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

/* lite-06 Max Age is measured on group timestamps (PROTOCOL.md), which
 * need the track's timescale: a local broadcast's own; a relayed one's
 * from its TRACK_INFO, asked now when not known (the publisher or the
 * owning worker answers; fanout.c's age_start looks again). Until then,
 * and for a timescale past 32 bits, d->ts_hz stays 0: arrival times. */
void dsub_timescale(struct moq_node *n, struct bcast *bc, struct dsub *d)
{
	struct tinfo *ti;
	uint64_t hz = 0;

	if (bc && bc->local) {
		hz = bc->timescale ? bc->timescale : 1000;
	} else if (d->up) {
		ti = tinfo_find(n, d->path, d->plen, d->up->track, d->up->tlen);
		if (!ti && bc)
			ti = tinfo_get(n, d->path, d->plen, d->up->track, d->up->tlen);
		if (ti && !ti->have && bc)
			tinfo_ask(n, bc, ti); /* may answer at once (the defaults) */
		if (ti && ti->have)
			hz = ti->ti.timescale;
	}
	d->ts_hz = hz <= UINT32_MAX ? (uint32_t)hz : 0;
}
