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

#include <stdlib.h>
#include <string.h>

#include "moq_int.h"

#define NS_PER_S 1000000000ull

/* Authorise @s (a server session of a node with cfg.auth; once). Returns 0,
 * or -1 when the session is refused (it is closing with 6). */
int access_session(struct moq_session *s, const struct moq_str *setup_path)
{
	struct moq_node *n = s->n;
	struct moq_auth_grant *g = NULL;
	struct moq_str url;
	int rc;

	if (!n->cfg.auth || !s->server)
		return 0;
	if (s->auth_done)
		return s->grant ? 0 : -1;
	s->auth_done = 1;
	/* a binding's request target (WebTransport, WebSocket) carries the
	 * path and `?jwt=` when SETUP does not */
	if ((!setup_path || !setup_path->len) && s->url) {
		url = (struct moq_str){s->url, strlen(s->url)};
		setup_path = &url;
	}
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
	s->grant = g;
	/* AUTH-CLUSTER.md, Link auth: the broad token (put and get on
	 * everything from root "") is a cluster link's */
	s->link_grant = moq_auth_grant_allows(g, 1, "", 0) && moq_auth_grant_allows(g, 0, "", 0);
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
	return 0;
}

/* Authorise a lite-03/04 session on its first request, if that came before
 * the handshake callback did. */
static bool access_grant(struct moq_session *s)
{
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
