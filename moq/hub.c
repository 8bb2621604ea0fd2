/* SPDX-License-Identifier: MIT */
/*
 * hub.c: the hub between the workers (nodes) of one relay: mailboxes,
 * relay-wide bounds, and the messages that route broadcasts, subscriptions
 * and TRACK_INFO across workers (docs/DESIGN.md, Threads).
 */
#include "moq.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "moq_int.h"

/* ------------------------------------------------------------------- hub */

/* One mailbox per node; a spinlock guards it (control path only). It holds
 * at most MOQ_HUB_BOX_MAX messages (issue 22: unbounded, a stalled worker
 * grew its mailbox without limit); a message beyond is dropped and counted
 * (moq_node_stats hub_dropped of the receiving node). */
struct hub_box {
	atomic_flag lock;
	struct hub_msg *head, *tail;
	uint32_t len;
	_Atomic uint64_t dropped;
};

/* Node bounds cfg.max_subscribers (@tracks 0) and cfg.max_tracks (@tracks
 * 1): take one unit when under the bound (0 = unlimited). With a hub the
 * bound is relay-wide: one atomic add on the hub's count (control path, one
 * per SUBSCRIBE). The node's own count is in its stats. */
bool bound_take(struct moq_node *n, int tracks)
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
void bound_put(struct moq_node *n, int tracks)
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
uint64_t hop_id_random(const void *salt)
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
	h->hop_key[0] = hop_id_random(h->nodes);
	h->hop_key[1] = hop_id_random(h->box);
	atomic_flag_clear(&h->lock);
	for (uint32_t i = 0; i < max_nodes; i++)
		atomic_flag_clear(&h->box[i].lock);
	return h;
}

static void hub_msg_free(struct hub_msg *m)
{
	free(m->path);
	free(m->track);
	moq_heap_free(MOQ_HEAP_HUB_MSG, m);
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

int hub_register(struct moq_hub *h, struct moq_node *n)
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

void hub_unregister(struct moq_hub *h, uint32_t id)
{
	struct hub_msg *m;

	spin_lock(&h->lock);
	h->nodes[id] = NULL;
	spin_unlock(&h->lock);
	spin_lock(&h->box[id].lock);
	m = h->box[id].head;
	h->box[id].head = h->box[id].tail = NULL;
	h->box[id].len = 0;
	spin_unlock(&h->box[id].lock);
	while (m) {
		struct hub_msg *nx = m->next;
		hub_msg_free(m);
		m = nx;
	}
}

struct hub_msg *hub_msg_new(struct moq_node *n, int kind, const char *p, size_t pl, const char *t,
                            size_t tl)
{
	struct hub_msg *m = moq_heap_calloc(MOQ_HEAP_HUB_MSG, 1, sizeof(*m));

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
void hub_post(struct moq_hub *h, uint32_t to, struct hub_msg *m)
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
	if (b->len >= MOQ_HUB_BOX_MAX) {
		spin_unlock(&b->lock);
		atomic_fetch_add(&b->dropped, 1);
		hub_msg_free(m);
		return;
	}
	b->len++;
	m->next = NULL;
	if (b->tail)
		b->tail->next = m;
	else
		__atomic_store_n(&b->head, m, __ATOMIC_RELEASE);
	b->tail = m;
	spin_unlock(&b->lock);
}

uint64_t hub_dropped(const struct moq_node *n)
{
	return n->hub ? atomic_load(&n->hub->box[n->hub_id].dropped) : 0;
}

/* @to1 is 1 + the node id (struct bcast owner encoding). */
void hub_send(struct moq_node *n, uint32_t to1, int kind, const char *p, size_t pl, const char *t,
              size_t tl)
{
	struct hub_msg *m;

	if (!n->hub || !to1 || to1 > n->hub->max)
		return;
	m = hub_msg_new(n, kind, p, pl, t, tl);
	if (m)
		hub_post(n->hub, to1 - 1, m);
}

/* Tell the other nodes that a broadcast we own is active or ended. */
void hub_announce(struct moq_node *n, struct bcast *bc, int active)
{
	if (!n->hub || bc->owner)
		return;
	for (uint32_t i = 0; i < n->hub->max; i++) {
		struct hub_msg *m;
		if (i == n->hub_id)
			continue;
		/* (active 2: ended after its route was lost, bcast_end) */
		m = hub_msg_new(n,
		                active == 1   ? HUB_ANN_ACTIVE
		                : active == 2 ? HUB_ANN_LOST
		                              : HUB_ANN_ENDED,
		                bc->path, bc->len, NULL, 0);
		if (!m)
			continue;
		m->nhops = (uint32_t)hops_chain(m->hops, bc->hops, bc->nhops, false, 0);
		hub_post(n->hub, i, m);
	}
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
			bc->nhops = (uint32_t)hops_chain(bc->hops, m->hops, m->nhops, false, 0);
			ann_notify(n, bc, 1);
			ups_reattach(n, bc); /* subscribers waiting for a new route */
			return;
		}
		if (bc->local || (!bc->owner && bc->pub))
			return; /* ours, with a live publisher: ours wins */
		if (bc->owner != from1) {
			/* Our lingering broadcast, or another worker's, moved to the
			 * sender (its publisher reconnected there): subscribe there. */
			uint32_t old = bc->owner;
			bc->owner = from1;
			bcast_unlinger(n, bc);
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
				if (up->dsubs || up->nremote || up->nlocal) {
					up->remote_owner = from1;
					hub_send(n, from1, HUB_SUB, up->path, up->plen, up->track,
					         up->tlen);
				}
			}
		}
		{
			/* the owner's route moved: this worker's announce requests
			 * whose peer is now on the chain hear it ended (ann_reroute) */
			uint64_t old_hops[MOQ_MAX_HOPS];
			uint32_t old_nh = bc->nhops;

			hops_chain(old_hops, bc->hops, old_nh, false, 0);
			bc->nhops = (uint32_t)hops_chain(bc->hops, m->hops, m->nhops, false, 0);
			ann_reroute(n, bc, bc->pub, old_hops, old_nh, false);
		}
		return;
	case HUB_ANN_LOST:
		if (bc && bc->owner == from1) {
			bc->lost = 1;
			bcast_end(n, bc);
		}
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

void hub_drain(struct moq_node *n)
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
	b->len = 0;
	spin_unlock(&b->lock);
	while (m) {
		struct hub_msg *nx = m->next;
		hub_handle(n, m);
		hub_msg_free(m);
		m = nx;
	}
}
