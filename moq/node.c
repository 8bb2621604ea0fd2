/* SPDX-License-Identifier: MIT */
/*
 * node.c: a node (one worker's MoQ state): create and destroy, stats,
 * local publishing (docs/DESIGN.md). Its poll, which drives fanout, is in
 * fanout.c.
 */
#include "moq.h"

#include <stdlib.h>
#include <string.h>

#include "ietf_session.h"
#include "moq_int.h"

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
	n->admit_credit = MOQ_ADMIT_OPEN;
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
	if (!n->cfg.max_broadcasts)
		n->cfg.max_broadcasts = MOQ_DEFAULT_MAX_BROADCASTS;
	if (!n->cfg.max_session_broadcasts)
		n->cfg.max_session_broadcasts = MOQ_DEFAULT_MAX_SESSION_BROADCASTS;
	if (!n->cfg.link_max_subscriptions)
		n->cfg.link_max_subscriptions = MOQ_DEFAULT_LINK_MAX_SUBSCRIPTIONS;
	if (!n->cfg.link_max_session_broadcasts)
		n->cfg.link_max_session_broadcasts = MOQ_DEFAULT_LINK_MAX_SESSION_BROADCASTS;
	if (!n->cfg.max_fetches)
		n->cfg.max_fetches = MOQ_DEFAULT_MAX_FETCHES;
	if (!n->cfg.max_broadcast_name)
		n->cfg.max_broadcast_name = MOQ_DEFAULT_MAX_BROADCAST_NAME;
	if (!n->cfg.max_track_name)
		n->cfg.max_track_name = MOQ_DEFAULT_MAX_TRACK_NAME;
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
		memcpy(n->hop_key, n->hub->hop_key, sizeof(n->hop_key));
	} else {
		n->hop_key[0] = hop_id_random(n);
		n->hop_key[1] = hop_id_random(&n->cfg);
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
		s->tp = NULL;
		s->freed = 1;
		sess_free(s, MOQ_CODE_CLOSED, 1);
	}
	while (n->ups) {
		struct upstream *up = n->ups;
		while (up->dsubs)
			up->dsubs = up->dsubs->unext;
		up_free(up);
	}
	fg_fini(n);
	while (n->bcasts)
		bcast_unlink(n, n->bcasts);
	free(n->btab);
	free(n->ptab);
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

void moq_node_stats(const struct moq_node *n, struct moq_node_stats *out)
{
	*out = n->st;
	out->hub_dropped = hub_dropped(n);
}

size_t moq_node_ietf_heap(const struct moq_node *n, size_t *n_out, size_t *max_out)
{
	size_t all = 0, k = 0, max = 0;

	for (const struct moq_session *s = n->sessions; s; s = s->next) {
		size_t b;
		if (!s->ietf)
			continue;
		b = ietf_heap_bytes(s->ietf);
		all += b;
		k++;
		if (b > max)
			max = b;
	}
	if (n_out)
		*n_out = k;
	if (max_out)
		*max_out = max;
	return all;
}

void moq_node_admit(struct moq_node *n, int64_t credit)
{
	n->admit_credit = credit;
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
	bcast_unlinger(n, bc);
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
