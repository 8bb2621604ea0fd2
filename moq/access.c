/* SPDX-License-Identifier: MIT */
/*
 * access.c: what each server session may do when the node has cfg.auth
 * (auth.h; docs/DEPLOY.md, Auth). A session is authorised once, at set-up:
 * the lite-05 SETUP Path carries the connection path and `?jwt=` (on a
 * binding, the request URL does); lite-03/04 over raw QUIC have no SETUP, so
 * only public prefixes (rooted at "") apply. A refusal, a
 * SETUP Role the token cannot serve, and later the token's expiry close the
 * session with 6 "unauthorized" (moq-relay, connection.rs). Requests are
 * checked when they arrive (announce: put; subscribe, fetch, track and
 * announce interest: get), never per packet.
 */
#include "moq.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moq_int.h"
#include "authurl.h"

#define NS_PER_S 1000000000ull
/* --auth-url: how often a node looks for answers (access_url_poll) */
#define AUTH_POLL_NS (2ull * 1000000ull)

static int access_url_session(struct moq_session *s, const struct moq_str *setup_path);

/* @g is @s's grant from now on: the cluster-link flag, and the session's
 * deadline at its exp (a timer, access_expire). */
static void grant_install(struct moq_session *s, struct moq_auth_grant *g)
{
	struct moq_node *n = s->n;

	moq_auth_grant_free(s->grant);
	s->grant = g;
	/* AUTH-CLUSTER.md, Link auth: the broad token (put and get on
	 * everything from root "") is a cluster link's */
	s->link_grant = moq_auth_grant_allows(g, 1, "", 0) && moq_auth_grant_allows(g, 0, "", 0);
	s->auth_deadline = 0;
	/* connection.rs: the session lasts no longer than the token; a timer
	 * on the node's clock (access_expire), not a check per packet */
	if (g->has_exp && (uint64_t)g->exp <= UINT64_MAX / NS_PER_S) {
		uint64_t unow = moq_auth_now_ns(n->cfg.auth), exp = (uint64_t)g->exp * NS_PER_S;
		s->auth_deadline = n->now + (exp > unow ? exp - unow : 0);
		if (!s->auth_deadline)
			s->auth_deadline = 1;
		if (!n->auth_next || s->auth_deadline < n->auth_next)
			n->auth_next = s->auth_deadline;
	}
}

/* Authorise @s (a server session of a node with cfg.auth; once). Returns 0,
 * or -1 when the session is refused (it is closing with 6). With --auth-url
 * 0 may mean admission pending (s->auth_pending: its requests wait). */
int access_session(struct moq_session *s, const struct moq_str *setup_path)
{
	struct moq_node *n = s->n;
	struct moq_auth_grant *g = NULL;
	struct moq_str url;
	int rc;

	if (!n->cfg.auth || !s->server)
		return 0;
	if (s->auth_done)
		return s->grant || s->auth_pending ? 0 : -1;
	s->auth_done = 1;
	/* a binding's request target (WebTransport, WebSocket) carries the
	 * path and `?jwt=` when SETUP does not */
	if ((!setup_path || !setup_path->len) && s->url) {
		url = (struct moq_str){s->url, strlen(s->url)};
		setup_path = &url;
	}
	if (moq_auth_url_client(n->cfg.auth))
		return access_url_session(s, setup_path);
	rc = moq_auth_connect(n->cfg.auth, setup_path ? setup_path->p : NULL,
	                      setup_path ? setup_path->len : 0, &g);
	/* connection.rs: a Role the token cannot serve is refused too */
	if (rc == 0 && ((s->peer_role == MOQ_ROLE_PUBLISHER && !g->nput) ||
	                (s->peer_role == MOQ_ROLE_SUBSCRIBER && !g->nget))) {
		moq_auth_grant_free(g);
		rc = -1;
	}
	if (rc) {
		n->st.auth_refused++;
		sess_fail(s, MOQ_CODE_UNAUTHORIZED);
		return -1;
	}
	grant_install(s, g);
	return 0;
}

/* Authorise a lite-03/04 session on its first request, if that came before
 * the handshake callback did. */
static bool access_grant(struct moq_session *s)
{
	if (s->auth_pending)
		return false;
	if (!s->auth_done && s->v && s->v < MOQ_LITE_05)
		access_session(s, NULL);
	return s->grant != NULL;
}

bool access_allows(struct moq_session *s, int put, const char *p, size_t len)
{
	return access_grant(s) && moq_auth_grant_allows(s->grant, put, p, len);
}

/*
 * A session we dialled with a token (moq_session_peer_token): the token
 * says what the peer lets us do, and the peer is held to the same. Our
 * names there are relative to its root (the token's connection path). The
 * peer publishing @p to us (@put: its ANNOUNCE) is what we may get from
 * it; the peer reading @p from us (its SUBSCRIBE, FETCH, TRACK, announce
 * interest) is what we may put to it.
 */
static bool peer_grant(struct moq_session *s, int put, const char *p, size_t len, bool overlap)
{
	const struct moq_auth_grant *g = s->grant;
	size_t al;
	char *a = path_join(g->root, g->rootlen, p, len, &al);
	bool ok;

	if (!a)
		return false;
	ok = overlap ? moq_auth_grant_overlaps(g, !put, a, al)
	             : moq_auth_grant_allows(g, !put, a, al);
	free(a);
	return ok;
}

bool access_peer_allows(struct moq_session *s, int put, const char *p, size_t len)
{
	return peer_grant(s, put, p, len, false);
}

int moq_session_peer_token(struct moq_session *s, const char *setup_path, size_t len)
{
	struct moq_auth_grant *g = NULL;
	int rc;

	if (!s || s->server || !setup_path)
		return MOQ_ERR_INVAL;
	rc = moq_auth_peek(setup_path, len, &g);
	if (rc)
		return rc == MOQ_AUTH_NOMEM ? MOQ_ERR_NOMEM : MOQ_ERR_INVAL;
	moq_auth_grant_free(s->grant);
	s->grant = g;
	return 0;
}

bool access_overlaps(struct moq_session *s, int put, const char *p, size_t len)
{
	if (!s->server)
		return !s->grant || peer_grant(s, put, p, len, true);
	if (!s->n->cfg.auth)
		return true;
	return access_grant(s) && moq_auth_grant_overlaps(s->grant, put, p, len);
}

/*
 * Whether @s may present a hop chain (issue 22: only a cluster peer; a
 * client's chain starts at this relay, hops_client): a session this node
 * opened (a cluster link, a cascade), every session of a node without
 * cfg.auth (no grants there: each session may do everything), and a server
 * session whose token grants put and get on everything from root ""
 * (AUTH-CLUSTER.md, Link auth: the broad token a peer's link carries).
 */
bool access_peer(struct moq_session *s)
{
	if (!s->n->cfg.auth || !s->server)
		return true;
	return access_grant(s) && s->link_grant;
}

/* Ask a client for its announcements: under everything without auth; with
 * it, one request per prefix the token may publish (moq-net,
 * lite/subscriber.rs, one announce interest per allowed prefix), a prefix
 * inside another one skipped. */
void access_ann_request(struct moq_session *s)
{
	const struct moq_auth_grant *g = s->grant;
	int err;

	if (!s->n->cfg.auth || !s->server) {
		ann_request(s, "", 0, &err);
		return;
	}
	if (!g)
		return;
	for (uint32_t i = 0; i < g->nput; i++) {
		const struct moq_auth_path *p = &g->put[i];
		size_t off = g->rootlen;
		bool inside = false;

		for (uint32_t j = 0; j < g->nput && !inside; j++)
			inside = j != i &&
			         moq_path_has_prefix(g->put[j].p, g->put[j].len, p->p, p->len,
			                             NULL) &&
			         (g->put[j].len < p->len || j < i);
		if (inside)
			continue;
		/* the request is relative to the session's root */
		if (off && p->len > off)
			off++;
		ann_request(s, p->p + off, p->len - off, &err);
	}
}

/* The node's auth timer is due: close the sessions whose token expired
 * (6, while the others go on) and arm the timer for the next one. */
void access_expire(struct moq_node *n, uint64_t now)
{
	uint64_t next = 0;

	for (struct moq_session *s = n->sessions; s; s = s->next) {
		if (!s->auth_deadline || s->closing)
			continue;
		if (now >= s->auth_deadline) {
			s->auth_deadline = 0;
			n->st.auth_expired++;
			sess_fail(s, MOQ_CODE_UNAUTHORIZED);
			continue;
		}
		if (!next || s->auth_deadline < next)
			next = s->auth_deadline;
	}
	n->auth_next = next;
}

/* ------------------------------------------------------------ --auth-url */

static const char *role_name(uint64_t r)
{
	return r == MOQ_ROLE_PUBLISHER    ? "publisher"
	       : r == MOQ_ROLE_SUBSCRIBER ? "subscriber"
	                                  : NULL;
}

const char *moq_session_transport(const struct moq_session *s)
{
	return s->bops && s->bops->transport ? s->bops->transport : "quic";
}

/* request.rs, remote / local: "203.0.113.9:4433", "[::1]:443"; server_name:
 * the SNI (raw QUIC, WebTransport: the QUIC connection's; a binding such as
 * WebSocket: its own, the Host without SNI). Each "" when unknown. */
void moq_session_peer(const struct moq_session *s, char *remote, char *local, size_t acap,
                      char *sni, size_t scap)
{
	remote[0] = local[0] = sni[0] = 0;
	if (s->bops && s->bops->get_peer) {
		s->bops->get_peer(s->tp, remote, local, acap, sni, scap);
	} else if (s->conn) {
		moq_quic_addr_str(moq_quic_conn_remote(s->conn), remote, acap);
		moq_quic_addr_str(moq_quic_conn_local(s->conn), local, acap);
		if (!moq_quic_conn_server_name(s->conn, sni, scap))
			sni[0] = 0;
	}
}

/*
 * --auth-url (auth/authurl.h; doc/bin/relay/auth.md, The contract): post
 * `connect` with what the session presented and wait, its requests held
 * unparsed (control.c, rx_deferred), for access_url_poll to take the
 * answer. Never blocks: the request runs on the client's threads.
 */
static int access_url_session(struct moq_session *s, const struct moq_str *setup_path)
{
	struct moq_node *n = s->n;
	char path[1024], query[4096], alpn[24], remote[64] = "", local[64] = "", sni[256] = "";
	struct moq_auth_url_info info = {.path = path};
	size_t pl = 0, ql = 0;

	if (setup_path && setup_path->len) {
		const char *q = memchr(setup_path->p, '?', setup_path->len);
		pl = q ? (size_t)(q - setup_path->p) : setup_path->len;
		ql = q ? setup_path->len - pl - 1 : 0;
		if (pl >= sizeof(path) || ql >= sizeof(query)) {
			n->st.auth_refused++;
			sess_fail(s, MOQ_CODE_UNAUTHORIZED);
			return -1;
		}
		memcpy(query, setup_path->p + pl + 1, ql);
		if (q)
			info.query = query;
	}
	/* request.rs: "The path exactly as dialed" (a SETUP Path has no
	 * leading '/'; a URL does) */
	path[0] = 0;
	if (setup_path && setup_path->len)
		memcpy(path, setup_path->p, pl);
	path[pl] = 0;
	query[ql] = 0;
	moq_session_peer(s, remote, local, sizeof(remote), sni, sizeof(sni));
	info.remote = remote[0] ? remote : NULL;
	info.local = local[0] ? local : NULL;
	info.server_name = sni[0] ? sni : NULL;
	info.role = role_name(s->peer_role);
	if (s->bops && s->bops->get_proto) {
		info.transport = s->bops->get_proto(s->tp, &info.alpn);
	} else {
		info.transport = moq_session_transport(s);
		/* the negotiated moq-lite version (moq_node_alpns) */
		snprintf(alpn, sizeof(alpn), "moq-lite-%02u", (unsigned)s->v);
		info.alpn = s->v ? alpn : NULL;
	}
	s->auth_req = moq_auth_url_connect(moq_auth_url_client(n->cfg.auth), &info);
	if (!s->auth_req) {
		n->st.auth_refused++;
		sess_fail(s, MOQ_CODE_UNAUTHORIZED);
		return -1;
	}
	s->auth_pending = 1;
	s->auth_snext = n->auth_sessions;
	if (n->auth_sessions)
		n->auth_sessions->auth_sprev = &s->auth_snext;
	n->auth_sessions = s;
	s->auth_sprev = &n->auth_sessions;
	n->auth_poll_at = 0;
	return 0;
}

/*
 * auth.md, Revalidate: "Subscriptions and fetches outside a narrower grant
 * reset with Unauthorized, the broadcasts it published outside abort, and
 * everything else keeps flowing". A wider grant lets new requests through.
 */
static void grant_narrow(struct moq_session *s, const struct moq_auth_grant *g)
{
	struct moq_node *n = s->n;
	struct bcast *bc, *nx;
	struct bsrc *b, *bn;

	for (struct dsub *d = s->dsubs; d; d = d->next) {
		if (d->done || d->ending || moq_auth_grant_allows(g, 0, d->path, d->plen))
			continue;
		n->st.auth_denied++;
		if (d->st && !d->st->fin_sent && !d->st->reset_sent)
			st_reset(s, d->st, MOQ_CODE_UNAUTHORIZED);
		dsub_cancel(s, d);
	}
	if (!n->cfg.relay)
		return;
	for (b = s->backup_routes; b; b = bn) {
		bn = b->snext;
		if (!moq_auth_grant_allows(g, 1, b->bc->path, b->bc->len))
			bcast_withdraw(n, b->bc, s, false);
	}
	for (bc = s->live_routes; bc; bc = nx) {
		nx = bc->pnext;
		if (!moq_auth_grant_allows(g, 1, bc->path, bc->len))
			bcast_withdraw(n, bc, s, false);
	}
}

/*
 * auth.md, Revalidate: "a wider grant brings those paths back". A
 * publisher was asked for its announcements under each put head at
 * admission (access_ann_request); ask it under the heads of @g that no
 * head of the old grant @old covers.
 */
static void grant_widen(struct moq_session *s, const struct moq_auth_grant *old,
                        const struct moq_auth_grant *g)
{
	int err;

	if (!s->n->cfg.relay || !s->asked_announces)
		return;
	for (uint32_t i = 0; i < g->nput; i++) {
		const struct moq_auth_path *p = &g->put[i];
		bool covered = false;
		size_t off = g->rootlen;

		for (uint32_t j = 0; j < old->nput && !covered; j++)
			covered = moq_path_has_prefix(old->put[j].p, old->put[j].len, p->p, p->len,
			                              NULL);
		for (uint32_t j = 0; j < i && !covered; j++)
			covered =
			        moq_path_has_prefix(g->put[j].p, g->put[j].len, p->p, p->len, NULL);
		if (covered)
			continue;
		if (off && p->len > off)
			off++;
		if (p->len >= off)
			ann_request(s, p->p + off, p->len - off, &err);
	}
}

/* The node's sessions with an --auth-url request: take the answers in. */
void access_url_poll(struct moq_node *n, uint64_t now)
{
	n->auth_poll_at = now + AUTH_POLL_NS;
	for (struct moq_session *s = n->auth_sessions, *nx; s; s = nx) {
		struct moq_auth_grant *g = NULL;
		int fresh = 0, result = 0;
		char why[8];

		nx = s->auth_snext;
		if (s->closing)
			continue;
		if (moq_auth_req_poll(s->auth_req, &fresh, &g, &result, why, sizeof(why)) != 0)
			continue;
		if (!fresh) {
			/* revalidate on the grant's cadence */
			if (s->auth_reval_at && now >= s->auth_reval_at) {
				s->auth_reval_at = 0;
				moq_auth_req_revalidate(s->auth_req);
			}
			continue;
		}
		if (s->auth_pending) {
			/* connect answered */
			s->auth_pending = 0;
			if (!g) {
				n->st.auth_refused++;
				sess_fail(s, MOQ_CODE_UNAUTHORIZED);
				sess_flush(s);
				continue;
			}
			/* grant.rs, root: "replacing the dialed one" (how a
			 * server aliases a slug): the session's names are
			 * relative to it from now on */
			if (g->rootlen != s->rootlen ||
			    (g->rootlen && memcmp(g->root, s->root, g->rootlen) != 0)) {
				size_t rl;
				char *r = path_dup(g->root, g->rootlen, &rl);
				if (!r) {
					moq_auth_grant_free(g);
					sess_fail(s, MOQ_CODE_UNAUTHORIZED);
					sess_flush(s);
					continue;
				}
				free(s->root);
				s->root = r;
				s->rootlen = rl;
			}
			grant_install(s, g);
			s->auth_peer = moq_auth_req_peer(s->auth_req);
			/* grant.rs, peer: a cluster peer, trusted as a link is */
			if (s->auth_peer)
				s->link_grant = 1;
			s->auth_admitted = now;
			ctl_admitted(s);
		} else if (g && (g->rootlen != s->grant->rootlen ||
		                 memcmp(g->root, s->grant->root, g->rootlen) != 0 ||
		                 moq_auth_req_peer(s->auth_req) != (bool)s->auth_peer)) {
			/* auth.md: "A changed root or mounts closes the session
			 * with Unauthorized, and so does a flipped peer" */
			moq_auth_grant_free(g);
			n->st.auth_expired++;
			sess_fail(s, MOQ_CODE_UNAUTHORIZED);
			sess_flush(s);
			continue;
		} else if (g) {
			/* revalidate answered with a grant: resize in place */
			grant_narrow(s, g);
			grant_widen(s, s->grant, g);
			grant_install(s, g);
			if (s->auth_peer)
				s->link_grant = 1;
		} else if (result == MOQ_AUTH_REFUSED) {
			/* "A 401 or 403 closes the session now, as does a 2xx
			 * whose grant names nothing" */
			n->st.auth_expired++;
			sess_fail(s, MOQ_CODE_UNAUTHORIZED);
			sess_flush(s);
			continue;
		}
		/* else (timeout, 5xx, invalid): the session lives until its
		 * expires; asked again at the next cadence */
		if (moq_auth_req_revalidate_ns(s->auth_req))
			s->auth_reval_at = now + moq_auth_req_revalidate_ns(s->auth_req);
		sess_mark(s);
		sess_flush(s);
	}
}

/* @s is closing: post its `end` (the request is freed once sent). */
void access_url_end(struct moq_session *s, uint64_t code)
{
	struct moq_node *n = s->n;
	const char *reason;

	if (!s->auth_req)
		return;
	reason =
	        code == MOQ_CODE_UNAUTHORIZED ? (s->grant ? "expired" : "refused") : "disconnected";
	moq_auth_req_end(s->auth_req, reason, s->auth_tx, s->auth_rx,
	                 s->auth_admitted && n->now > s->auth_admitted ? n->now - s->auth_admitted
	                                                               : 0);
	s->auth_req = NULL;
	*s->auth_sprev = s->auth_snext;
	if (s->auth_snext)
		s->auth_snext->auth_sprev = s->auth_sprev;
	s->auth_snext = NULL;
	s->auth_sprev = NULL;
}
