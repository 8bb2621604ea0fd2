/* SPDX-License-Identifier: MIT */
/*
 * ingest.c: group streams from a publisher into the cache (the relay) or
 * to the application's callbacks (docs/PROTOCOL.md, Group).
 */
#include "moq.h"

#include "moq_int.h"

/* ---------------------------------------------------------------- ingest */

const uint32_t moq_late_bucket_ms[MOQ_LATE_BUCKETS - 1] = {1, 2, 5, 10, 20, 50, 100, 200, 500};

/* Group @g (just opened) came below the track's newest @latest: how late,
 * relative to its next newer group (whose created time it took). */
static void late_count(struct moq_node *n, const struct moq_cache_group *g)
{
	uint64_t created = moq_cache_group_created(g);
	uint64_t late = n->now > created ? n->now - created : 0;
	unsigned int b = 0;

	while (b < MOQ_LATE_BUCKETS - 1 && late > (uint64_t)moq_late_bucket_ms[b] * 1000000u)
		b++;
	n->st.groups_late_taken++;
	n->st.late_hist[b]++;
	n->st.late_sum_ns += late;
	if (late > n->st.late_max_ns)
		n->st.late_max_ns = late;
}

struct usub *usub_find(struct moq_session *s, uint64_t id)
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
int up_restart(struct upstream *up)
{
	struct moq_node *n = up->n;
	struct moq_cache_track *nt = NULL, *old = up->ct;

	for (struct dsub *d = up->dsubs; d; d = d->unext) {
		if (!d->started)
			continue; /* it has read nothing: it follows the new track */
		for (struct gout *go = d->s->gouts; go; go = go->next)
			if (go->d == d)
				gout_reset(d->s, go, MOQ_CODE_CANCEL);
		for (struct gout *go = d->s->gfin, *nx; go; go = nx) {
			nx = go->next; /* a reset moves it to gdone */
			if (go->d == d)
				gout_reset(d->s, go, MOQ_CODE_CANCEL);
		}
		d->ending = 1;
		sess_mark(d->s);
	}
	moq_cache_track_drop(up->ct);
	if (moq_cache_track_create(n->cfg.cache, up->path, up->plen, up->track, up->tlen,
	                           &n->cfg.track, &nt) < 0)
		return MOQ_ERR_NOMEM;
	for (struct dsub *d = up->dsubs; d; d = d->unext)
		if (!d->started && d->track == old) {
			moq_cache_track_unref(old);
			moq_cache_track_ref(nt);
			d->track = nt;
			d->last_version = 0;
			sess_mark(d->s);
		}
	moq_cache_track_unref(up->ct);
	up->ct = nt;
	up->last_version = 0;
	return 0;
}

/*
 * A reply on the relay's upstream subscription @us (issue 22 item 19): its
 * start (lite-05 START, lite-03/04 SUBSCRIBE_OK's start group) and its
 * DROPs tell which groups will not come: none below the start, none the
 * publisher dropped. The cache is told (moq_cache_track_gap), so fanout
 * DROPs those holes at once instead of waiting for a late group (a relay
 * that restarted its upstream after the track went idle, an edge whose
 * origin DROPped a range). END: up_end.
 */
void up_reply(struct usub *us, const struct moq_subscribe_reply *r)
{
	struct upstream *up = us->up;
	uint64_t start = r->kind == MOQ_SUB_START ? r->group
	                 : r->kind == MOQ_SUB_OK  ? r->start
	                                          : MOQ_GROUP_NONE;

	if (r->kind == MOQ_SUB_END) {
		up_end(up, r->group);
		return;
	}
	if (start != MOQ_GROUP_NONE) {
		us->got_start = 1;
		if (start)
			moq_cache_track_gap(up->ct, 0, start - 1);
	}
	if (r->kind == MOQ_SUB_DROP && r->drop_start <= r->drop_end)
		moq_cache_track_gap(up->ct, r->drop_start, r->drop_end);
}

/* Whether @seq is the newest group @t holds: an upstream subscription that
 * moved to another route of the same broadcast (a standby taking over,
 * bcast_withdraw) starts with the group in progress, which the cache has
 * from the old route. That group is refused (the old route's copy stands);
 * the next one continues the track. When the old copy was aborted (the old
 * upstream closed mid-group: a track that went idle, a route that went
 * away), the new upstream's whole copy replaces it
 * (moq_cache_group_reopen), so subscribers started there get it. */
static bool is_newest(struct moq_cache_track *t, uint64_t seq)
{
	uint64_t latest;

	return moq_cache_track_latest(t, &latest) == 0 && latest == seq;
}

void gin_end(struct moq_session *s, struct gin *gi, int64_t code)
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
	if (!st->rx_fin && s->tp)
		tp_stop_sending(s, st->sid, code);
}

void gin_data(struct moq_session *s, struct mstream *st, const uint8_t *p, size_t len)
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
			if (!gi->us || gi->us->closed ||
			    (gi->us->up && gi->us->up->ended && gi->seq >= gi->us->up->end_seq)) {
				/* Late group of an ended subscription, or one at or
				 * past the END the publisher sent. (One below END
				 * that comes after END and the publisher's FIN is
				 * taken: the subscription waits for it, up_end.) */
				gin_refuse(s, st, MOQ_CODE_CANCEL);
				return;
			}
			n->st.groups_in++;
			if (gi->us->up) {
				uint64_t latest = 0;
				int lrc = moq_cache_track_latest(gi->us->up->ct, &latest);
				int orc = moq_cache_group_open(gi->us->up->ct, gi->seq, n->now,
				                               &gi->g);
				if (orc == MOQ_ERR_ORDER && !gi->us->got_group) {
					if (is_newest(gi->us->up->ct, gi->seq))
						orc = moq_cache_group_reopen(
						        gi->us->up->ct, gi->seq, n->now, &gi->g);
					else if (up_restart(gi->us->up) == 0)
						orc = moq_cache_group_open(gi->us->up->ct, gi->seq,
						                           n->now, &gi->g);
				}
				if (orc == 0 && !gi->us->got_group && !gi->us->got_start && gi->seq)
					/* no START: the subscription starts here */
					moq_cache_track_gap(gi->us->up->ct, 0, gi->seq - 1);
				if (orc == 0 && lrc == 0 && gi->seq < latest && gi->us->got_group)
					late_count(n, gi->g);
				if (orc == 0)
					gi->us->got_group = 1;
				if (orc < 0) {
					gi->g = NULL;
					if (orc == MOQ_ERR_ORDER)
						n->st.groups_in_late++;
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
				struct moq_cache_meta fm = {0};
				int64_t r;
				/* an IETF publisher's extension headers and object
				 * location, beside it */
				if (s->bops && s->bops->frame_meta)
					s->bops->frame_meta(s->tp, st->sid, &fm);
				r = moq_cache_frame_begin_meta(gi->g, ev.timestamp, ev.frame_size,
				                               &fm);
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
