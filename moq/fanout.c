/* SPDX-License-Identifier: MIT */
/*
 * fanout.c: fanout from the cache: group streams per subscriber in send
 * order, the per-session budget, END / DROP / START on the subscribe stream
 * (docs/PROTOCOL.md, Subscribe and Priority; docs/DESIGN.md), and
 * moq_node_poll, which visits the marked sessions and runs the node's timers
 * (here, so the visit of each session stays one function).
 */
#include "moq.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "ietf_session.h"
#include "moq_int.h"

#define EXPIRE_NS    100000000ull  /* cache expiry and reclaim from poll every 100 ms */
#define MIN_BUDGET   (64u * 1024u) /* smallest per-session fanout budget */
#define FIN_CHECK_NS 100000000ull  /* FIN'd streams with stale groups: every 100 ms */
#define POOL_TRIM_NS 2000000000ull /* spare pools give back what 2 s did not use */
/* Group streams a session holds (written, FIN'd or reset, until QUIC closes
 * them) at most: one per GOUT_WINDOW_SHARE bytes of its window (the fanout
 * budget: 2 cwnd, at least MIN_BUDGET, at most session_queue; read from
 * QUIC once the floor's count is reached, as the byte budget is), at least
 * GOUT_CAP_MIN, at most cfg.max_group_streams. A stalled subscriber's
 * streams (reset when their groups expire, kept until the resets are
 * acknowledged) stop new opens there; later groups wait in the cache and
 * are DROPped once gone (docs/DESIGN.md, Memory per subscriber). */
#define GOUT_WINDOW_SHARE 2048u
#define GOUT_CAP_MIN      8u

/* ---------------------------------------------------------------- fanout */

/* Spare group-stream records, as st_alloc keeps streams (POOL_MAX). */
static struct gout *gout_alloc(struct moq_session *s)
{
	struct gout *go = s->go_pool;
	uint32_t u;

	if (!go) {
		go = moq_heap_calloc_lines(MOQ_HEAP_GOUT, sizeof(*go));
		if (go)
			go->heap_usable = (uint32_t)malloc_usable_size(go);
		return go;
	}
	s->go_pool = go->next;
	if (--s->go_pool_len < s->go_pool_low)
		s->go_pool_low = s->go_pool_len;
	u = go->heap_usable;
	moq_heap_move_bytes(MOQ_HEAP_MOQ_SPARE, MOQ_HEAP_GOUT, u);
	memset(go, 0, sizeof(*go));
	go->heap_usable = u;
	return go;
}

void gout_release(struct moq_session *s, struct gout *go)
{
	if (s->go_pool_len >= POOL_MAX) {
		moq_heap_free(MOQ_HEAP_GOUT, go);
		return;
	}
	go->next = s->go_pool;
	s->go_pool = go;
	moq_heap_move_bytes(MOQ_HEAP_GOUT, MOQ_HEAP_MOQ_SPARE, go->heap_usable);
	s->go_pool_len++;
}

/* @len bytes for @go's own stream bytes (headers), at a stable address:
 * in the record while they fit, else in the stream's send chunks;
 * gh_commit keeps the @used first of them. */
static inline uint8_t *gh_reserve(struct moq_session *s, struct gout *go, size_t len)
{
	if (GOUT_HB - go->hb_len >= len)
		return go->hb + go->hb_len;
	return tx_reserve(s, &go->st->tx, len);
}

static inline void gh_commit(struct gout *go, const uint8_t *p, size_t len, size_t used)
{
	if (p >= go->hb && p < go->hb + GOUT_HB)
		go->hb_len = (uint8_t)(go->hb_len + used);
	else
		tx_unreserve(&go->st->tx, len - used);
}

/* A stream that writes no more (FIN sent or reset) leaves the live list
 * (@pp points at its link there) for gfin (FIN sent, data unacknowledged)
 * or gdone; returns the next on the live list. */
static inline bool gout_is_done(const struct gout *go)
{
	return go->reset || go->fin;
}

/* ------------------------------------------------------- FIN registry */

struct fgrp {
	struct moq_cache_group *g; /* not a reference: its gouts hold one */
	struct gout *head;         /* empty ones are freed by the check pass */
	struct fgrp *hnext;
};

#define FG_MIN_CAP 64u

static uint32_t fg_slot(const struct moq_node *n, const struct moq_cache_group *g)
{
	uint64_t h = (uint64_t)(uintptr_t)g * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 32) & (n->fg_cap - 1);
}

static int fg_grow(struct moq_node *n)
{
	uint32_t ocap = n->fg_cap, ncap = ocap ? ocap * 2 : FG_MIN_CAP;
	struct fgrp **ot = n->fg_tab, **nt = calloc(ncap, sizeof(*nt));

	if (nt == NULL)
		return MOQ_ERR_NOMEM;
	n->fg_tab = nt;
	n->fg_cap = ncap;
	for (uint32_t i = 0; i < ocap; i++)
		for (struct fgrp *f = ot[i], *nx; f; f = nx) {
			uint32_t b = fg_slot(n, f->g);
			nx = f->hnext;
			f->hnext = nt[b];
			nt[b] = f;
		}
	free(ot);
	return 0;
}

static struct fgrp *fg_get(struct moq_node *n, struct moq_cache_group *g)
{
	struct fgrp *f;
	uint32_t b;

	if (n->fg_n >= n->fg_cap && fg_grow(n) < 0 && n->fg_cap == 0)
		return NULL;
	b = fg_slot(n, g);
	for (f = n->fg_tab[b]; f; f = f->hnext)
		if (f->g == g)
			return f;
	f = n->fg_spare;
	if (f != NULL)
		n->fg_spare = f->hnext;
	else if ((f = malloc(sizeof(*f))) == NULL)
		return NULL;
	f->g = g;
	f->head = NULL;
	f->hnext = n->fg_tab[b];
	n->fg_tab[b] = f;
	n->fg_n++;
	return f;
}

void fg_fini(struct moq_node *n)
{
	for (uint32_t i = 0; i < n->fg_cap; i++)
		for (struct fgrp *f = n->fg_tab[i], *nx; f; f = nx) {
			nx = f->hnext;
			free(f);
		}
	while (n->fg_spare) {
		struct fgrp *f = n->fg_spare;
		n->fg_spare = f->hnext;
		free(f);
	}
	free(n->fg_tab);
	n->fg_tab = NULL;
	n->fg_cap = n->fg_n = 0;
}

static void gfin_add(struct moq_session *s, struct gout *go)
{
	struct fgrp *f = fg_get(s->n, go->g);

	go->on_fin = 1;
	gout_link_at(&s->gfin, go);
	go->fg = f;
	if (f == NULL) { /* out of memory: the per-session walk covers it */
		s->fin_unreg++;
		return;
	}
	PLINK_AT(&f->head, go, fnext, fpprev);
}

void gfin_del(struct gout *go)
{
	gout_unlink(go);
	go->on_fin = 0;
	if (go->fg == NULL) {
		go->s->fin_unreg--;
		return;
	}
	PLINK_UNLINK(go, fnext, fpprev);
	go->fg = NULL;
}

/* The FIN_CHECK_NS pass over the registry: a stale group's FIN'd streams
 * still unacknowledged are reset; empty entries are freed. */
static void fg_check(struct moq_node *n)
{
	for (uint32_t i = 0; i < n->fg_cap; i++)
		for (struct fgrp **pp = &n->fg_tab[i], *f; (f = *pp);) {
			int stc;

			if (f->head == NULL) {
				*pp = f->hnext;
				f->hnext = n->fg_spare;
				n->fg_spare = f;
				n->fg_n--;
				continue;
			}
			stc = moq_cache_group_status(f->g, NULL, NULL);
			if (group_stale(stc))
				for (struct gout *go = f->head, *nx; go; go = nx) {
					struct moq_session *s = go->s;
					nx = go->fnext; /* the reset takes it off */
					if (s->closing || !s->tp)
						continue;
					gout_reset(s, go, err_code(stc));
					sess_mark(s);
				}
			pp = &f->hnext;
		}
}

/* The FIN check for what the registry does not cover: @s's FIN'd streams
 * of subscriptions with their own max latency, and any the registry could
 * not take (out of memory). */
static void sess_fin_check(struct moq_session *s)
{
	for (struct gout *go = s->gfin, *nx; go; go = nx) {
		int stc;

		nx = go->next; /* a reset moves it to gdone */
		if (go->fg != NULL && !(go->d && go->d->lat_ns))
			continue;
		stc = moq_cache_group_status(go->g, NULL, NULL);
		if (group_stale(stc) || gout_too_old(s, go)) {
			gout_reset(s, go, group_stale(stc) ? err_code(stc) : MOQ_CODE_OLD);
			sess_mark(s);
		}
	}
}

static struct gout *gout_retire(struct moq_session *s, struct gout **pp)
{
	struct gout *go = *pp;

	gout_unlink(go);
	go->done = 1;
	if (!go->reset && go->acked < go->written)
		gfin_add(s, go);
	else
		gout_link_at(&s->gdone, go);
	return *pp;
}

void gout_reset(struct moq_session *s, struct gout *go, uint64_t code)
{
	struct moq_node *n = s->n;

	if (go->reset || (go->fin && go->acked >= go->written))
		return;
	go->reset = 1;
	/* RFC 9000, 3.1: RESET_STREAM is allowed after FIN until all data is
	 * acknowledged; the stale tail is then never retransmitted. */
	if (s->tp && !go->st->reset_sent) {
		tp_reset(s, go->st->sid, code);
		go->st->reset_sent = 1;
	}
	/* Reset data is never acknowledged: stop billing it. */
	s->unacked -= go->written - go->acked;
	go->written = go->acked;
	gout_fin_settled(s, go);
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

uint64_t err_code(int err)
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
 * @x goes before @y. A subscriber that asked for ordered delivery gets its
 * groups oldest first; at one priority its streams go before the
 * newest-first ones (sequences of different tracks do not compare, and one
 * key per stream keeps the order total). */
static int gout_order(const struct gout *x, const struct gout *y)
{
	if (x->priority != y->priority)
		return x->priority > y->priority ? -1 : 1;
	if (x->ordered != y->ordered)
		return x->ordered ? -1 : 1;
	if (x->seq != y->seq)
		return (x->seq > y->seq) != x->ordered ? -1 : 1;
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
	gout_link_at(pp, go);
}

/* Priorities changed (SUBSCRIBE_UPDATE): put the live list back in order. */
void gout_resort(struct moq_session *s)
{
	struct gout *go = s->gouts;

	s->gouts = NULL;
	while (go) {
		struct gout *nx = go->next;
		gout_link(s, go);
		go = nx;
	}
}

static struct gout *gout_make(struct moq_session *s, struct mstream *st, struct moq_cache_group *g,
                              uint8_t priority, uint8_t ordered)
{
	struct gout *go = gout_alloc(s);

	if (!go)
		return NULL;
	go->s = s;
	go->st = st;
	go->g = g;
	go->seq = moq_cache_group_seq(g);
	go->priority = priority;
	go->ordered = ordered;
	st->go = go;
	gout_link(s, go);
	s->ngouts++;
	return go;
}

struct gout *gout_new(struct moq_session *s, struct mstream *st, struct moq_cache_group *g,
                      uint8_t priority)
{
	return gout_make(s, st, g, priority, 0);
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
	go = gout_make(s, st, g, d->p.priority, d->p.ordered);
	if (!go) {
		st_reset(s, st, MOQ_CODE_CANCEL);
		return MOQ_ERR_NOMEM;
	}
	go->d = d;
	d->n_gouts++;
	/* lite-06: a subscription that starts / ends mid-group */
	if (d->frame_start && go->seq == d->p.start)
		moq_cache_cursor_seek(&go->cur, (uint32_t)d->frame_start, 0);
	if (d->frame_end && go->seq == d->p.end)
		go->frame_end = d->frame_end;
	/* moq-lite, Group: type 0x0, GROUP { subscribe id, sequence }: the only
	 * per-subscriber bytes of the stream (as st_send would write them). */
	h = gh_reserve(s, go, 32 < GOUT_HB ? 32 : GOUT_HB);
	if (h) {
		size_t room = 32 < GOUT_HB ? 32 : GOUT_HB;
		int hl = s->v == MOQ_LITE_06
		                 ? moq6_group_hdr_encode(h, room, d->id, go->seq, go->cur.frame)
		                 : moq_group_hdr_encode(h, room, d->id, go->seq);
		struct iovec iov = {h, hl > 0 ? (size_t)hl : 0};
		gh_commit(go, h, room, iov.iov_len);
		if (iov.iov_len && tp_write(s, st->sid, &iov, 1, 0) >= 0)
			st->tx_off += iov.iov_len;
	}
	go->written = st->tx_off;
	s->unacked += st->tx_off;
	s->n->st.groups_out++;
	/* (no sess_mark: dsub_advance runs in fanout_session, whose walk of
	 * the live streams that follows pumps this one; the mark made a
	 * second visit with nothing to write, a fifth of all visits in
	 * bench_moq_fanout --audio) */
	return 0;
}

#define MAX_IOV 128

/* Keep what QUIC holds for this session near its congestion window, so the
 * ranking (not the order of earlier writes) decides what goes out next:
 * unacknowledged bytes <= max(2 cwnd, 64 KiB), capped by the configured
 * session_queue. The cwnd is read (moq_quic_conn_get_info) only once the
 * floor is reached, at most once per visit. */
static __attribute__((noinline)) bool budget_refresh(struct moq_session *s)
{
	s->budget_fresh = 1;
	s->budget = 2 * tp_cwnd(s);
	if (s->budget < MIN_BUDGET)
		s->budget = MIN_BUDGET;
	if (s->budget > s->n->cfg.session_queue)
		s->budget = s->n->cfg.session_queue;
	return s->unacked < s->budget;
}

static inline bool budget_left(struct moq_session *s)
{
	if (s->unacked < s->budget)
		return true;
	if (s->budget_fresh)
		return false;
	return budget_refresh(s);
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
		int cnt;
		unsigned ni = 0;
		uint64_t bytes = 0;
		long rc;
		int i, fin = 0, cut = 0, bound = 0;

		if (go->frame_end && go->cur.frame >= go->frame_end) {
			/* lite-06: the subscription (or fetch) ends here */
			if (tp_write(s, go->st->sid, NULL, 0, 1) >= 0) {
				go->fin = 1;
				go->st->fin_sent = 1;
				n->st.groups_fin++;
			}
			break;
		}
		cnt = moq_cache_read_frames(go->g, &go->cur, fb, batch);
		if (cnt > 0 && go->frame_end) {
			/* frames at or past the end bound are not sent */
			for (i = 0; i < cnt; i++)
				if (fb[i].index >= go->frame_end)
					break;
			if (i < cnt) {
				cnt = i;
				bound = 1;
				moq_cache_cursor_seek(&go->cur, (uint32_t)go->frame_end, 0);
			}
		}
		if (cnt == 0 && bound)
			continue;
		if (cnt == 0)
			break;
		if (cnt < 0) {
			if (cnt == MOQ_ERR_CLOSED) {
				/* moq-lite, Group: FIN at a frame boundary = complete. */
				if (tp_write(s, go->st->sid, NULL, 0, 1) >= 0) {
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
			uint32_t len = f->len;
			if (ni + 2 > MAX_IOV) {
				/* No room for this frame (its header and a
				 * piece): it is read again from where it starts
				 * in this view. */
				moq_cache_cursor_seek(&go->cur, f->index, f->start);
				cut = 1;
				break;
			}
			if (f->start == 0) {
				uint8_t *h = gh_reserve(s, go, 16);
				int hl;
				if (!h) {
					gout_reset(s, go, MOQ_CODE_CANCEL);
					return total;
				}
				hl = moq_frame_hdr_encode(h, 16, s->v, f->timestamp - go->prev_ts,
				                          f->size);
				if (hl < 0)
					hl = 0;
				gh_commit(go, h, 16, (size_t)hl);
				go->prev_ts = f->timestamp;
				iov[ni].iov_base = h;
				iov[ni++].iov_len = (size_t)hl;
				bytes += (size_t)hl;
			}
			if (len) {
				if (f->data) {
					iov[ni].iov_base = (void *)f->data;
					iov[ni++].iov_len = len;
				} else {
					unsigned k0 = ni;
					int k = moq_cache_group_iov(go->g, f->offset, len, iov + ni,
					                            MAX_IOV - ni);
					if (k <= 0) {
						gout_reset(s, go, MOQ_CODE_CANCEL);
						return total;
					}
					ni += (unsigned)k;
					if (ni == MAX_IOV) {
						/* the array may be full before the
						 * frame's end: write what has iovecs
						 * and continue at the first byte
						 * without one (the frame header is
						 * not repeated: its start is not 0) */
						uint64_t got = 0;
						while (k0 < ni)
							got += iov[k0++].iov_len;
						if (got < len) {
							len = (uint32_t)got;
							moq_cache_cursor_seek(&go->cur, f->index,
							                      f->start + len);
							cut = 1;
						}
					}
				}
				bytes += len;
			}
			n->st.bytes_out += len;
			if (cut)
				break; /* the frame is not complete: not counted */
			if (moq_cache_frame_complete(f))
				n->st.frames_out++;
		}
		/* A short batch: the group may be complete and all read, then
		 * the FIN goes with these bytes (not after a cut: the cursor is
		 * back at the first byte not written). */
		if ((unsigned)cnt < batch && !cut) {
			uint32_t frames;
			stc = moq_cache_group_status(go->g, NULL, &frames);
			fin = stc == MOQ_ERR_CLOSED && go->cur.frame >= frames;
		}
		if (bound && !cut)
			fin = 1;
		rc = tp_write(s, go->st->sid, iov, ni, fin);
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
		/* relay-added latency: frames whose last byte QUIC now has (a
		 * cut frame is not among the first i) */
		if (!go->fetch)
			moq_lat_record(n, fb, (unsigned)i);
		/* A short batch (or a partial frame's view) reached what is
		 * published: unless the group ended (FIN or reset due now), another
		 * read would return nothing; new bytes move the track's version.
		 * After a cut there is more to write now. */
		if (fin || ((unsigned)cnt < batch && stc == 0 && !cut))
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

/* Groups of a subscription skipped before a stream could open, gathered
 * into one DROP per run of the same code (PROTOCOL.md, Subscribe: every
 * group in range is finished or dropped). */
struct drops {
	uint64_t start, end; /* inclusive; start > end: none */
	uint64_t code;
};

static void drops_flush(struct moq_session *s, struct dsub *d, struct drops *r)
{
	if (r->start <= r->end) {
		dsub_drop(s, d, r->start, r->end, r->code);
		s->n->st.groups_skipped += r->end - r->start + 1;
	}
	r->start = 1;
	r->end = 0;
}

static void drops_add(struct moq_session *s, struct dsub *d, struct drops *r, uint64_t from,
                      uint64_t to, uint64_t code)
{
	if (r->start <= r->end && (r->code != code || r->end + 1 != from))
		drops_flush(s, d, r);
	if (r->start > r->end) {
		r->start = from;
		r->code = code;
	}
	r->end = to;
}

/*
 * lite-06 Max Age is measured on group timestamps (PROTOCOL.md): a group's
 * age runs from its successor's first timestamp to the track's newest one.
 * newest_ts: that newest timestamp (the newest group's newest frame, or the
 * one before's while the newest has none yet), in the track's timescale.
 * False when the track's timestamps cannot say: timescale not known, no
 * frame, or all 0 (lite-03/04 and IETF publishers carry none).
 */
static bool newest_ts(const struct dsub *d, uint64_t latest, int64_t *to)
{
	if (!d->ts_hz)
		return false;
	for (uint64_t q = latest, k = 0; k < 2 && q <= latest; q--, k++) {
		struct moq_cache_group *g;
		int rc;
		if (moq_cache_track_group(d->track, q, &g) < 0)
			continue;
		rc = moq_cache_group_ts(g, 1, to);
		moq_cache_group_unref(g);
		if (rc == 0)
			return *to != 0;
	}
	return false;
}

/* The age of the group before @succ at @now: on timestamps when @have_to
 * (*newest_ts) and @succ has a frame at or before it, else (timestamps
 * that cannot say, or run backwards) from when @succ began at the relay. */
static uint64_t pred_age(const struct dsub *d, const struct moq_cache_group *succ, bool have_to,
                         int64_t to, uint64_t now)
{
	uint64_t began = moq_cache_group_created(succ);
	int64_t from;

	if (have_to && moq_cache_group_ts(succ, 0, &from) == 0 && to >= from)
		return (uint64_t)((unsigned __int128)(uint64_t)(to - from) * 1000000000u / d->ts_hz);
	return now > began ? now - began : 0;
}

/* @g (of @d's track) is older than @d's own max latency (dsub_params) and
 * not the newest: by the subscriber's measure it expired. */
static bool group_too_old(const struct moq_session *s, const struct dsub *d,
                          const struct moq_cache_group *g, uint64_t latest)
{
	uint64_t created = moq_cache_group_created(g), now = s->n->now;
	uint64_t seq = moq_cache_group_seq(g), age;

	if (seq >= latest)
		return false;
	if (d->by_age) {
		/* lite-06 Max Age: a group's age runs from its successor's
		 * first timestamp (no successor yet: it is not old) */
		struct moq_cache_group *succ;
		int64_t to = 0;
		bool have_to = newest_ts(d, latest, &to);
		if (moq_cache_track_group(d->track, seq + 1, &succ) < 0)
			return false;
		age = pred_age(d, succ, have_to, to, now);
		moq_cache_group_unref(succ);
		return age > d->lat_ns;
	}
	return now > created && now - created > d->lat_ns;
}

bool gout_too_old(const struct moq_session *s, const struct gout *go)
{
	uint64_t latest;

	return go->d && go->d->lat_ns && go->d->track &&
	       moq_cache_track_latest(go->d->track, &latest) == 0 &&
	       group_too_old(s, go->d, go->g, latest);
}

/* An idle track whose upstream subscription was opened again (a viewer
 * came back after the last one left): its cached groups are what the last
 * subscription left, and the new one starts past them, so a subscriber
 * started there (at the newest, or the oldest within its Max Age) would be
 * DROPped every group between. It starts at the new one's first group. */
static bool newest_aborted(struct moq_cache_track *t, uint64_t latest)
{
	struct moq_cache_group *g;
	int rc;

	if (moq_cache_track_group(t, latest, &g) < 0)
		return false;
	rc = moq_cache_group_status(g, NULL, NULL);
	moq_cache_group_unref(g);
	return rc == MOQ_ERR_DROPPED;
}

static inline bool up_restarting(const struct dsub *d, uint64_t latest)
{
	const struct upstream *up = d->up;

	/* until it says where it starts; then only if that is past the
	 * cached groups (a gap after the newest), or the newest is the one
	 * the old subscription left aborted, which the new one's copy
	 * replaces (ingest.c, is_newest); an ended one starts none */
	return up && up->us && !up->us->got_group && !up->ended && !up->end_wait &&
	       moq_cache_track_idle(d->track) &&
	       (!up->us->got_start || moq_cache_track_gap_final(d->track, latest + 1) ||
	        newest_aborted(d->track, latest));
}

/* Where a live subscriber (no start asked) starts: the newest group while it
 * is the live edge, that is while the track's writer is live (a catalog's
 * one group stays current however old), or else (an idle track: the relay's
 * upstream subscription stopped, its cached groups are what was left) while
 * it is no older than the track's max latency, or the subscriber's smaller
 * one. Older, or gone: no START yet, it starts at the next group. */
static __attribute__((noinline)) bool start_at_latest(const struct moq_session *s,
                                                      const struct dsub *d, uint64_t latest)
{
	struct moq_cache_group *g;
	uint64_t lat, created, now = s->n->now;
	bool ok;

	if (moq_cache_track_group(d->track, latest, &g) < 0)
		return false;
	lat = d->lat_ns ? d->lat_ns : moq_cache_track_max_latency(d->track);
	created = moq_cache_group_created(g);
	ok = !moq_cache_track_idle(d->track) || now <= created || now - created <= lat;
	moq_cache_group_unref(g);
	return ok;
}

/*
 * lite-06: the first group of @d, whose p.start is Group Start (an absolute
 * floor) and p.max_latency_ms its Max Age: the oldest group at or above the
 * floor still within the age, a group's age running from its successor's
 * first timestamp (pred_age; the newest group's is 0); Max Age 0 = the
 * newest group.
 */
static __attribute__((noinline)) uint64_t age_start(const struct moq_session *s, struct dsub *d,
                                                    uint64_t latest)
{
	uint64_t first = latest, floor = d->p.start == MOQ_GROUP_NONE ? 0 : d->p.start;
	uint64_t age_ns = d->p.max_latency_ms * 1000000ull, now = s->n->now;
	int64_t to = 0;
	bool have_to;

	if (!d->ts_hz)
		dsub_timescale(s->n, NULL, d); /* its TRACK_INFO may have come */
	have_to = newest_ts(d, latest, &to);
	while (age_ns && first > floor) {
		struct moq_cache_group *succ, *g;
		uint64_t age;
		/* group first - 1's age runs from group first's start */
		if (moq_cache_track_group(d->track, first, &succ) < 0)
			break;
		age = pred_age(d, succ, have_to, to, now);
		moq_cache_group_unref(succ);
		if (age > age_ns)
			break;
		if (moq_cache_track_group(d->track, first - 1, &g) < 0)
			break; /* not in the cache (any more) */
		moq_cache_group_unref(g);
		first--;
	}
	return first;
}

/* Issue 22 item 19: how long a subscriber waits for a group the cache has
 * not got while a newer one is there (QUIC delivers group streams
 * independently: after a lost packet, group N's header can come after
 * N+1's; the cache takes it late, moq_cache_group_open). Bounded by the
 * subscriber's max latency. 100 ms covers a loss recovery (ngtcp2's PTO:
 * smoothed RTT + 4 RTT variance + max_ack_delay 25 ms, doubled once) on a
 * busy relay's upstream; a group the publisher really skipped costs its
 * subscribers at most this much extra delay (groups go out in order). */
#define HOLE_GRACE_NS 100000000ull

/* Group d->next_seq is not in the cache (NOTFOUND), newer ones are: wait
 * for it (true; the session is marked to be looked at again) while the next
 * newer group is younger than the grace, else it is gone (false: DROP).
 * No wait for one the track's writer said will not come (its upstream
 * DROPped it, or the upstream subscription starts after it:
 * moq_cache_track_gap), nor on a track whose writer stopped. */
static bool hole_wait(struct moq_session *s, struct dsub *d, uint64_t latest)
{
	uint64_t lat = d->lat_ns ? d->lat_ns : moq_cache_track_max_latency(d->track);
	uint64_t grace = lat < HOLE_GRACE_NS ? lat : HOLE_GRACE_NS, now = s->n->now, q;

	if (moq_cache_track_gap_final(d->track, d->next_seq) || moq_cache_track_idle(d->track))
		return false;
	for (q = d->next_seq + 1; q <= latest; q++) {
		struct moq_cache_group *g;
		uint64_t created;
		int rc = moq_cache_track_group(d->track, q, &g);

		if (rc == MOQ_ERR_NOTFOUND)
			continue;
		if (rc != 0)
			return false; /* a newer one is gone already */
		created = moq_cache_group_created(g);
		moq_cache_group_unref(g);
		if (now <= created || now - created < grace) {
			s->retry = 1;
			return true;
		}
		s->n->st.groups_hole_timeouts++; /* the wait ran out */
		return false;
	}
	return false;
}

/* dsub_advance found group d->next_seq gone or never received (@rc), or
 * found it (@rc 0, *@g) for a subscriber with its own max latency: skip what
 * cannot be opened, up to the first group that can, accounting for the
 * skipped ones with DROPs. Returns 0 with *@g to open at d->next_seq, or
 * MOQ_ERR_AGAIN (nothing more now). Out of line: fanout visits sessions
 * often, and this is rare. */
static __attribute__((noinline)) int dsub_skip(struct moq_session *s, struct dsub *d,
                                               uint64_t latest, uint64_t end, int rc,
                                               struct moq_cache_group **g)
{
	struct drops dr = {1, 0, 0};

	for (;;) {
		if (rc == 0 && !(d->lat_ns && group_too_old(s, d, *g, latest)))
			break;
		if (rc == 0) {
			moq_cache_group_unref(*g);
			drops_add(s, d, &dr, d->next_seq, d->next_seq, MOQ_CODE_OLD);
			d->next_seq++;
		} else if (rc == MOQ_ERR_NOTFOUND) {
			/* A sequence the cache never got (the publisher skipped
			 * it, or its stream is late): once past the grace,
			 * dropped upstream. */
			if (hole_wait(s, d, latest)) {
				rc = MOQ_ERR_AGAIN;
				break;
			}
			drops_add(s, d, &dr, d->next_seq, d->next_seq, MOQ_CODE_DROPPED);
			d->next_seq++;
		} else if (rc == MOQ_ERR_AGAIN) {
			break;
		} else {
			/* Gone before a stream could open: continue at the newest
			 * group (DESIGN.md, Billing), and account for the skipped
			 * ones with a DROP. */
			uint64_t to = d->next_seq < latest ? latest : d->next_seq + 1;
			drops_add(s, d, &dr, d->next_seq, to - 1, err_code(rc));
			d->next_seq = to;
		}
		if (d->next_seq > latest || (end != MOQ_GROUP_NONE && d->next_seq > end)) {
			rc = MOQ_ERR_AGAIN;
			break;
		}
		rc = moq_cache_track_group(d->track, d->next_seq, g);
	}
	drops_flush(s, d, &dr);
	return rc;
}

/* @d's upstream ended and waits no longer for late groups (up_end_check):
 * the groups below its END that never arrived are DROPped (3 timeout: not
 * there within the max latency), so the END that follows is the
 * publisher's, unchanged (issue 29). A subscription that never started
 * ends at that END (with no END, after the newest group) without a DROP:
 * no group of the track arrived, or none it could start at. @lrc and
 * @latest: moq_cache_track_latest of the track; @end: the subscription's
 * own end. Out of line: rare. */
static __attribute__((noinline)) void dsub_upstream_end(struct moq_session *s, struct dsub *d,
                                                        int lrc, uint64_t latest, uint64_t end)
{
	uint64_t es = d->up->end_seq, last;
	struct drops dr = {1, 0, 0};

	if (!d->started) {
		if (es != UINT64_MAX && d->next_seq < es)
			d->next_seq = es;
		else if (es == UINT64_MAX && lrc == 0 && d->next_seq <= latest)
			d->next_seq = latest + 1; /* (its END: after the newest) */
		return;
	}
	if (es == UINT64_MAX || d->next_seq >= es)
		return;
	if (lrc == 0 && d->next_seq <= latest)
		return; /* cached groups still to open */
	last = es - 1;
	if (end != MOQ_GROUP_NONE && end < last)
		last = end;
	if (d->next_seq <= last)
		drops_add(s, d, &dr, d->next_seq, last, MOQ_CODE_TIMEOUT);
	drops_flush(s, d, &dr);
	d->next_seq = es;
}

static inline uint32_t gout_cap_of(const struct moq_session *s)
{
	uint64_t b = s->budget > MIN_BUDGET ? s->budget : MIN_BUDGET, c = b / GOUT_WINDOW_SHARE;

	if (c < GOUT_CAP_MIN)
		c = GOUT_CAP_MIN;
	return c < s->n->cfg.max_group_streams ? (uint32_t)c : s->n->cfg.max_group_streams;
}

/* May @s open one more group stream (GOUT_WINDOW_SHARE)? */
static inline bool gout_room(struct moq_session *s)
{
	if (s->ngouts < gout_cap_of(s))
		return true;
	if (s->budget_fresh || s->ngouts >= s->n->cfg.max_group_streams)
		return false;
	budget_refresh(s);
	return s->ngouts < gout_cap_of(s);
}

/* Open group streams for new groups of @d. */
static void dsub_advance(struct moq_session *s, struct dsub *d)
{
	uint64_t latest = 0, end = agg_end(d);
	int rc, lrc;
	uint64_t ver;

	if (d->done || !d->track)
		return;
	ver = moq_cache_track_version(d->track);
	lrc = moq_cache_track_latest(d->track, &latest);
	if (lrc == MOQ_ERR_CLOSED && dsub_retrack(d)) { /* not started: the new track */
		ver = moq_cache_track_version(d->track);
		lrc = moq_cache_track_latest(d->track, &latest);
	}
	if (lrc == MOQ_ERR_CLOSED) {
		d->ending = 1;
	} else if (lrc == 0 && !d->ending) {
		if (!d->started) {
			/* A live subscriber starts at the newest group; one asking for
			 * an older start gets what the cache still has from there. */
			uint64_t first = latest;
			if (d->p.start != MOQ_GROUP_NONE && d->p.start > latest)
				return; /* a future start: wait for it */
			if ((d->by_age || d->p.start == MOQ_GROUP_NONE) &&
			    __builtin_expect(up_restarting(d, latest), 0))
				goto out; /* the new upstream's first group */
			if (d->by_age)
				first = age_start(s, d, latest);
			else if (d->p.start != MOQ_GROUP_NONE)
				first = d->p.start;
			else if (!start_at_latest(s, d, latest))
				goto out; /* stale: wait for the next group */
			dsub_start(s, d, first);
		}
		while (d->next_seq <= latest && (end == MOQ_GROUP_NONE || d->next_seq <= end)) {
			struct moq_cache_group *g;
			if (!gout_room(s)) {
				s->room_wait = 1; /* a stream slot frees it: st_free marks */
				break;
			}
			rc = moq_cache_track_group(d->track, d->next_seq, &g);
			if (rc == 0 ? d->lat_ns != 0 : rc != MOQ_ERR_AGAIN)
				rc = dsub_skip(s, d, latest, end, rc, &g);
			if (rc != 0)
				break;
			if (dgram_out(s, d, g)) { /* a datagram instead (dgram.c) */
				d->next_seq++;
				continue;
			}
			if (gout_open(s, d, g) < 0) {
				moq_cache_group_unref(g);
				s->retry = 1;
				break;
			}
			d->next_seq++;
		}
	}
out:
	d->last_version = ver;
	if (!d->started && !d->ending && !(d->up && d->up->ended))
		return;
	if (d->up && d->up->ended && !d->up->end_wait && !d->ending)
		dsub_upstream_end(s, d, lrc, latest, end);
	if (d->n_gouts == 0) {
		bool over = d->ending || (end != MOQ_GROUP_NONE && d->next_seq > end);
		/* The publisher ended it: over once every group below its END is
		 * accounted for (dsub_upstream_end), or with no END (its FIN
		 * alone) after the wait for late groups, at the newest. */
		if (d->up && d->up->ended && !d->up->end_wait) {
			uint64_t es = d->up->end_seq;
			if (es != UINT64_MAX ? d->next_seq >= es
			                     : (lrc != 0 || d->next_seq > latest))
				over = true;
		}
		if (over)
			dsub_finish(s, d);
	}
}

/* The safety net, every FIN_CHECK_NS: could @s have work that nothing
 * marked? A group stream to open that could not be, a stream waiting at the
 * budget, a track version it has not seen or a live stream whose group
 * ended or was removed (FIN / reset due). Cheap: no QUIC call, no cache
 * read. It ran every 20 ms: walking the subscriptions and live streams of
 * 5,000 sessions that often was a fifth of an overloaded worker (perf);
 * versions are watched every poll anyway (n->watch, n->ups), acks and
 * stream credit mark the sessions that wait on them, and a group's end
 * moves its track's version, so what waits for this pass is an eviction. */
static bool sess_stale(struct moq_session *s)
{
	if (s->retry || s->blocked || s->room_wait)
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
	bool lat = s->nlat != 0; /* some subscription has its own max latency */

	s->retry = 0;
	s->room_wait = 0;
	s->walk_all = 0;
	/* The budget starts at its floor; budget_left (bytes) and gout_room
	 * (streams) ask QUIC for the cwnd only when the floor is reached. */
	s->budget = n->cfg.session_queue < MIN_BUDGET ? n->cfg.session_queue : MIN_BUDGET;
	s->budget_fresh = s->budget == n->cfg.session_queue;
	for (struct dsub *d = s->dsubs; d; d = d->next)
		dsub_advance(s, d);
	if (s->closing || !s->ngouts)
		return 0;
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
		/* the next stream's two lines load while this one is pumped (a
		 * miss per stream of a lagging subscriber's dozens otherwise) */
		if (go->next != NULL) {
			__builtin_prefetch(go->next);
			__builtin_prefetch((const char *)go->next + 64);
		}
		if (gout_is_done(go)) {
			gout_retire(s, pp);
			continue;
		}
		stc = moq_cache_group_status(go->g, NULL, &frames);
		if (group_stale(stc) || (lat && gout_too_old(s, go))) {
			gout_reset(s, go, group_stale(stc) ? err_code(stc) : MOQ_CODE_OLD);
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

/* ------------------------------------------------------------- node poll */

int moq_node_poll(struct moq_node *n, uint64_t now)
{
	int written = 0;
	struct moq_session *s;

	n->now = now;
	hub_drain(n);
	ups_settle(n);
	/* DESIGN.md, Threads: poll each relayed track's published counter
	 * once; a change marks its subscribers' sessions. */
	for (struct upstream *up = n->ups, *nx; up; up = nx) {
		uint64_t v = moq_cache_track_version(up->ct);
		nx = up->next;
		if (v != up->last_version) {
			up->last_version = v;
			up_touch(up);
			if (up->end_wait)
				up_end_check(up); /* a last group arrived or ended */
		} else if (up->end_wait && (now >= up->end_deadline || !up->us)) {
			up_end_check(up);
		} else if (up->orphan_until && now >= up->orphan_until) {
			up_orphan_expire(up); /* no new route came in time */
		}
	}
	/* Local broadcasts' tracks are watched per session that reads them. */
	for (s = n->watch; s; s = s->wnext) {
		/* one session ahead: thousands of them do not stay in cache
		 * between polls, and the walk is a chain of misses otherwise */
		if (s->wnext != NULL)
			sess_prefetch(s->wnext);
		if (s->queued || !s->ready || s->closing || !s->tp)
			continue;
		for (struct dsub *d = s->dsubs; d; d = d->next)
			if (!d->up && !d->done && d->track &&
			    moq_cache_track_version(d->track) != d->last_version) {
				sess_mark(s);
				break;
			}
	}
	/* Lingering broadcasts whose publisher did not come back end now (a
	 * queue in deadline order: its head only). */
	bcast_linger_expire(n, now);
	/* cfg.auth: sessions whose token expired close now (access.c). */
	if (n->auth_next && now >= n->auth_next)
		access_expire(n, now);
	/* --auth-url: admissions and revalidations answered (access.c) */
	if (n->auth_sessions && now >= n->auth_poll_at)
		access_url_poll(n, now);
	/* Every FIN_CHECK_NS, one walk over the sessions: a session with work
	 * nothing marked is marked (the safety net, sess_stale); a blocked one
	 * walks all its live streams at its next visit; and a FIN'd stream
	 * still unacknowledged whose group expired, was evicted or fell out of
	 * the window is reset, so its stale tail is not retransmitted (RFC
	 * 9000, 3.1). Not on every visit: a slow subscriber holds dozens of
	 * these per session. The safety net ran every 20 ms on its own walk:
	 * at 5,000 sessions that walk alone (a cache miss per session) was 6%
	 * of the worker, for wake-ups acks and stream credit already give. */
	if (now - n->last_fin_check >= FIN_CHECK_NS) {
		bool trim = now - n->last_pool_trim >= POOL_TRIM_NS;

		n->last_fin_check = now;
		if (trim)
			n->last_pool_trim = now;
		for (s = n->sessions; s; s = s->next) {
			if (s->next != NULL)
				sess_prefetch(s->next);
			if (trim)
				pool_trim(s);
			if (s->closing || !s->tp)
				continue;
			if (s->gouts && s->blocked) {
				s->walk_all = 1;
				sess_mark(s);
			} else if (!s->queued && s->ready && sess_stale(s)) {
				sess_mark(s);
			}
			if (s->nlat || s->fin_unreg)
				sess_fin_check(s);
		}
		fg_check(n); /* stale groups, once per group */
	}
	/* Visit the marked sessions only; marks made meanwhile (a session
	 * that opened a group stream, ...) are for the next poll. */
	n->work = n->pending;
	n->pending = NULL;
	while ((s = n->work)) {
		struct moq_session *nx = s->pnext;

		n->work = nx;
		/* as in the watch walk above, two deep: the session after the
		 * next one, and what the next one's visit reads (its lines
		 * were asked for a step ago) */
		if (nx != NULL) {
			if (nx->pnext != NULL)
				sess_prefetch(nx->pnext);
			sess_prefetch_deps(nx);
		}
		s->queued = 0;
		if (__builtin_expect(s->ready_due, 0)) {
			/* a binding's client session (moq_binding_connect) */
			s->ready_due = 0;
			if (!s->closing && n->cfg.cb && n->cfg.cb->session_ready)
				n->cfg.cb->session_ready(s, n->cfg.user);
		}
		if (__builtin_expect(s->ietf != NULL, 0)) {
			/* an IETF shell's deferred work; a close it makes is
			 * carried out by sess_flush below (ietf_session.c, pump) */
			s->depth++;
			ietf_poll(s->ietf);
			s->depth--;
		}
		if (s->ready && !s->closing && s->tp) {
			int w;
			s->depth++;
			w = fanout_session(s);
			s->depth--;
			written += w;
			n->st.fanout_visits++;
			n->st.fanout_visits_idle += w == 0;
		}
		sess_flush(s);
	}
	if (n->cfg.cache) {
		moq_cache_quiescent(n->cfg.cache, n->cfg.cache_reader);
		/* Groups expire on a timer too, not only when their track opens
		 * a new one: an idle track's groups (and then the track) and a
		 * stalled track's old ones go once older than its max latency
		 * (cache.h, moq_cache_expire_idle). Retired index entries are
		 * freed after a grace period; group opens do it too, but an
		 * idle relay must as well (the expiry reclaims). */
		if (now - n->last_expire >= EXPIRE_NS) {
			moq_cache_expire_idle(n->cfg.cache, now);
			n->last_expire = now;
		}
	}
	return written;
}
