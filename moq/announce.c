/* SPDX-License-Identifier: MIT */
/*
 * announce.c: ANNOUNCE_PLEASE / ANNOUNCE streams: answering a peer's
 * interest with the matching broadcasts, and learning broadcasts from the
 * announce streams we opened (docs/PROTOCOL.md, Announce).
 */
#include "moq.h"

#include <stdlib.h>
#include <string.h>

#include "moq_int.h"

/* ------------------------------------------------------------ announce */

/* Whether announce stream @st (ANN_IN of @s) should hear about @bc when
 * its live route is @pub with @hops. */
static bool ann_match_route(struct moq_session *s, struct mstream *st, struct bcast *bc,
                            const struct moq_session *pub, const uint64_t *hops, uint32_t nh,
                            size_t *off)
{
	if (!s->server && s->role == MOQ_ROLE_SUBSCRIBER)
		return false; /* a subscribe-only client session publishes nothing */
	if (pub == s)
		return false; /* never echo a broadcast to its publisher */
	if (!moq_path_has_prefix(st->prefix, st->plen, bc->path, bc->len, off))
		return false;
	/* PROTOCOL.md, Announce: loop prevention. */
	if (hops_have(hops, nh, st->exclude_hop) || hops_have(hops, nh, s->peer_origin))
		return false;
	/* cfg.auth: a session sees only the broadcasts its token may get */
	return nh + 1 <= MOQ_MAX_HOPS && access_ok(s, 0, bc->path, bc->len);
}

/* Whether announce stream @st (ANN_IN of @s) should hear about @bc. */
static bool ann_match(struct moq_session *s, struct mstream *st, struct bcast *bc, size_t *off)
{
	return ann_match_route(s, st, bc, bc->pub, bc->hops, bc->nhops, off);
}

/*
 * Send @bc on announce stream @st of @s (@off: where the suffix begins) as
 * the route @hops (@nh): the live one, or for an ENDED after a reroute the
 * one the peer heard. lite-03/04 carry the sender's own hop too; a chain
 * that would pass MOQ_MAX_HOPS is never built: nothing is sent, counted.
 */
static int ann_send_route(struct moq_session *s, struct mstream *st, struct bcast *bc, size_t off,
                          int active, const uint64_t *hops, uint32_t nh)
{
	struct moq_msg m = {.type = MOQ_MSG_ANNOUNCE};
	struct moq_announce *a = &m.u.announce;
	int len;

	/* lite-05: the receiver stamps our origin (from ANNOUNCE_OK); earlier
	 * versions carry the sender's own hop. */
	len = hops_chain(a->hops, hops, nh, s->v < MOQ_LITE_05, s->n->cfg.origin);
	if (len < 0) {
		s->n->st.ann_hops_refused++;
		return MOQ_ERR_INVAL;
	}
	/* A restart (ANN_RESTART): lite-05 sends a second ACTIVE, which its
	 * receiver takes as a restart; earlier versions have none, so ENDED
	 * then ACTIVE (as moq-relay does). */
	if (active == ANN_RESTART && s->v < MOQ_LITE_05) {
		int rc = ann_send_route(s, st, bc, off, 0, hops, nh);
		if (rc < 0)
			return rc;
	}
	a->status = active ? MOQ_ANNOUNCE_ACTIVE : MOQ_ANNOUNCE_ENDED;
	/* lite-06: the route's accumulated costs (0 for our own broadcast: we
	 * produce it); a route heard without costs is priced by lite06_ann_out */
	a->warm_cost = a->cold_cost = MOQ6_COST_UNSET;
	if (bc->local) {
		a->warm_cost = a->cold_cost = 0;
	} else if (bc->cost.set) {
		a->warm_cost = bc->cost.warm;
		a->cold_cost = bc->cost.cold;
	}
	a->suffix.p = bc->path + off;
	a->suffix.len = bc->len - off;
	a->hop_count = (uint32_t)len;
	return st_send(s, st, -1, &m, 0);
}

/* Send @bc's live route. */
static int ann_send(struct moq_session *s, struct mstream *st, struct bcast *bc, size_t off,
                    int active)
{
	return ann_send_route(s, st, bc, off, active, bc->hops, bc->nhops);
}

/* Tell every matching announce stream of every session about @bc
 * (@active: 0 ended, 1 active, ANN_RESTART). The node keeps the announce
 * requests in one list, so an announce costs a walk of the requests, not of
 * every session's streams. */
void ann_notify(struct moq_node *n, struct bcast *bc, int active)
{
	for (struct mstream *st = n->ann_in; st; st = st->ann_next) {
		struct moq_session *s = st->ann_s;
		size_t off;
		if (s->closing || st->kind != SK_ANN_IN || st->fin_sent)
			continue;
		if (ann_match(s, st, bc, &off))
			ann_send(s, st, bc, off, active);
	}
}

/*
 * @bc's live route changed from @old_pub with @old_hops to its current one
 * (bcast_route). A request that heard the old route and may not hear the
 * new one (its peer is on the new chain: the route now goes through it) is
 * told the broadcast ended, or the peer would keep a route through us that
 * leads back to itself; one that may hear only the new route hears it
 * active; one that hears both hears a restart when @renew (another
 * broadcast under the path), nothing otherwise.
 */
void ann_reroute(struct moq_node *n, struct bcast *bc, const struct moq_session *old_pub,
                 const uint64_t *old_hops, uint32_t old_nh, bool renew)
{
	for (struct mstream *st = n->ann_in; st; st = st->ann_next) {
		struct moq_session *s = st->ann_s;
		size_t off;
		bool was, is;
		if (s->closing || st->kind != SK_ANN_IN || st->fin_sent)
			continue;
		was = ann_match_route(s, st, bc, old_pub, old_hops, old_nh, &off);
		is = ann_match(s, st, bc, &off);
		if (was && !is) /* ended: the route it heard */
			ann_send_route(s, st, bc, off, 0, old_hops, old_nh);
		else if (!was && is)
			ann_send(s, st, bc, off, 1);
		else if (was && (renew || s->v == MOQ_LITE_06))
			/* lite-06: ANNOUNCE_UPDATE re-prices the route (7.8) */
			ann_send(s, st, bc, off, ANN_RESTART);
	}
}

/* Announce request @st of @s ends (FIN, reset, freed): off the node's list. */
void ann_in_stop(struct moq_session *s, struct mstream *st)
{
	struct moq_node *n = s->n;

	if (!st->ann_s)
		return;
	if (st->ann_prev)
		st->ann_prev->ann_next = st->ann_next;
	else
		n->ann_in = st->ann_next;
	if (st->ann_next)
		st->ann_next->ann_prev = st->ann_prev;
	st->ann_next = st->ann_prev = NULL;
	st->ann_s = NULL;
	s->nann_in--;
	free(st->prefix);
	st->prefix = NULL;
}

int ann_in_start(struct moq_session *s, struct mstream *st, const struct moq_announce_req *r)
{
	struct moq_node *n = s->n;
	struct plink *under;
	int rc;
	uint64_t count = 0;

	if (s->nann_in >= n->cfg.max_announces) {
		n->st.ann_req_refused++;
		n->st.refused_bounds++;
		st_refuse(s, st, MOQ_CODE_BOUNDS);
		return 0;
	}
	rc = path_norm_join(s->root, s->rootlen, r->prefix.p, r->prefix.len, &st->prefix,
	                    &st->plen);
	if (rc < 0)
		return MOQ_CODE_DECODE;
	if (st->prefix && st->plen > n->cfg.max_broadcast_name) {
		n->st.names_refused_broadcast++;
		n->st.refused_bounds++;
		free(st->prefix);
		st->prefix = NULL;
	}
	if (!st->prefix) {
		st_refuse(s, st, MOQ_CODE_BOUNDS);
		return 0;
	}
	if (!access_overlaps(s, 0, st->prefix, st->plen)) {
		free(st->prefix); /* not counted in nann_in */
		st->prefix = NULL;
		n->st.auth_denied++;
		st_refuse(s, st, MOQ_CODE_UNAUTHORIZED);
		return 0;
	}
	st->exclude_hop = r->exclude_hop;
	s->nann_in++;
	st->ann_s = s;
	st->ann_next = n->ann_in;
	if (st->ann_next)
		st->ann_next->ann_prev = st;
	n->ann_in = st;
	/* issue 22: the broadcasts under the prefix only (the prefix index),
	 * not the whole table, each twice (lite-05 counts them first) */
	under = st->plen ? bcast_under(n, st->prefix, st->plen) : NULL;
	for (struct plink *l = under; l; l = l->next) {
		size_t off;
		if (ann_match(s, st, l->bc, &off))
			count++;
	}
	for (struct bcast *bc = st->plen ? NULL : n->bcasts; bc; bc = bc->next) {
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
	for (struct plink *l = under; l; l = l->next) {
		size_t off;
		if (ann_match(s, st, l->bc, &off))
			ann_send(s, st, l->bc, off, 1);
	}
	for (struct bcast *bc = st->plen ? NULL : n->bcasts; bc; bc = bc->next) {
		size_t off;
		if (ann_match(s, st, bc, &off))
			ann_send(s, st, bc, off, 1);
	}
	return 0;
}

/* An ANNOUNCE on a request we made. */
int on_announce(struct moq_session *s, struct mstream *st, const struct moq_announce *a)
{
	struct moq_node *n = s->n;
	char *full;
	size_t flen;
	int rc;
	uint64_t hops[MOQ_MAX_HOPS];
	uint32_t nh;
	int len;
	int active = a->status != MOQ_ANNOUNCE_ENDED;
	struct bcast *bc;

	rc = path_norm_join(st->prefix, st->plen, a->suffix.p, a->suffix.len, &full, &flen);
	if (rc < 0)
		return MOQ_CODE_DECODE;
	if (!full)
		return MOQ_CODE_BOUNDS;
	if (active && !access_ok(s, 1, full, flen)) {
		n->st.auth_denied++; /* cfg.auth: announcing needs put */
		free(full);
		return 0;
	}
	/* lite-05: stamp the responder's origin from ANNOUNCE_OK (0 = none);
	 * a chain that would pass MOQ_MAX_HOPS is dropped (PROTOCOL.md,
	 * Announce: at most 32 hops). */
	len = hops_chain(hops, a->hops, a->hop_count, s->v >= MOQ_LITE_05 && st->ann_origin,
	                 st->ann_origin);
	if (active && len < 0) {
		n->st.ann_hops_refused++;
		free(full);
		return 0;
	}
	nh = len < 0 ? 0 : (uint32_t)len;
	if (active && hops_have(hops, nh, n->cfg.origin)) {
		n->st.loops_refused++; /* PROTOCOL.md, Announce: loop prevention */
		free(full);
		return 0;
	}
	/* issue 22: a client's announce starts its own chain */
	if (active && n->cfg.relay && !access_peer(s)) {
		nh = hops_client(n, hops, nh);
		n->st.ann_chains_restarted++;
	}
	if (!n->cfg.relay) {
		if (n->cfg.cb && n->cfg.cb->announce)
			n->cfg.cb->announce(s, n->cfg.user, full, flen, active);
		free(full);
		return 0;
	}
	if (flen > n->cfg.max_broadcast_name) {
		n->st.names_refused_broadcast++;
		n->st.refused_bounds++;
		free(full);
		return MOQ_CODE_BOUNDS;
	}
	if (active) {
		/* lite-06 7.6 / 7.3.4: the route costs what it was advertised
		 * with plus what the announcing peer declared in its SETUP
		 * (1 when absent), saturating at the largest varint */
		struct rcost cost = {0};
		uint64_t link = s->setup_in ? s->peer_cost : 1;
		if (s->v == MOQ_LITE_06) {
			cost.set = true;
			cost.warm = a->warm_cost > MOQ_VARINT_MAX - link ? MOQ_VARINT_MAX
			                                                 : a->warm_cost + link;
			cost.cold = a->cold_cost > MOQ_VARINT_MAX - link ? MOQ_VARINT_MAX
			                                                 : a->cold_cost + link;
		}
		uint64_t code = bcast_offer(n, s, full, flen, hops, nh, cost.set ? &cost : NULL);
		free(full);
		return (int)code;
	}
	bc = bcast_find(n, full, flen);
	if (bc)
		bcast_withdraw(n, bc, s, false);
	free(full);
	return 0;
}

/* The announce stream we opened closed: all of its broadcasts are gone. */
void ann_out_gone(struct moq_session *s, struct mstream *st)
{
	struct moq_node *n = s->n;
	struct bsrc *b, *bn;
	struct bcast *bc, *nx;

	if (!n->cfg.relay)
		return;
	/* the session's own routes (issue 22: was a walk of the origin table);
	 * a withdraw takes only that route off these lists */
	for (b = s->backup_routes; b; b = bn) {
		bn = b->snext;
		if (moq_path_has_prefix(st->prefix, st->plen, b->bc->path, b->bc->len, NULL))
			bcast_withdraw(n, b->bc, s, false);
	}
	for (bc = s->live_routes; bc; bc = nx) {
		nx = bc->pnext;
		if (moq_path_has_prefix(st->prefix, st->plen, bc->path, bc->len, NULL))
			bcast_withdraw(n, bc, s, false);
	}
}

int ann_request(struct moq_session *s, const char *prefix, size_t len, int *err)
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
