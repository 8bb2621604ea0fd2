/* SPDX-License-Identifier: MIT */
/*
 * fetch.c: the endpoints that read the worker's node and cache
 * (BINDINGS.md, section 3): GET /announced/<prefix> (the origin table's
 * broadcasts the token may get) and GET /fetch/<broadcast>/<track> (one
 * group's frame payloads from the cache), both chunked (RFC 9112, 7.1): a
 * body cut short ends without the last chunk.
 */
#define _GNU_SOURCE
#include "web_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "cache.h"
#include "moq.h"

/* The body of a chunked response (RFC 9112, 7.1): one chunk, or the last
 * (empty) chunk that ends a whole body. A body that is cut short ends
 * with the connection, without it, so the client can tell. */
#define CHUNK_HDR 12 /* "%zx\r\n" of a length below 2^40, and the CRLF after */

static void chunk_head(struct wconn *c, size_t n)
{
	char h[16];
	int l = snprintf(h, sizeof(h), "%zx\r\n", n);

	web_out_put(c, h, (size_t)l);
}

static void chunk_put(struct wconn *c, const void *p, size_t n)
{
	chunk_head(c, n);
	web_out_put(c, p, n);
	web_out_put(c, "\r\n", 2);
}

static void chunk_end(struct wconn *c)
{
	web_out_put(c, "0\r\n\r\n", 5);
}

/* /announced: the snapshot goes into a heap buffer (c->body) of at most
 * ANN_MAX bytes, then out in chunks (body_step). */
struct ann_ctx {
	struct wconn *c;
	const struct moq_auth_grant *g;
	int full;
};

static void ann_cb(void *user, const char *path, size_t plen, size_t off)
{
	struct ann_ctx *a = user;
	struct wconn *c = a->c;
	const char *sfx = path + off;
	size_t n = plen - off;

	/* the token's `get` grants, as a MoQ session's announce interest
	 * (moq/announce.c, ann_match_route) */
	if (a->g != NULL && !moq_auth_grant_allows(a->g, 0, path, plen))
		return;
	while (n > 0 && *sfx == '/')
		sfx++, n--;
	if (c->bodylen + n + 1 > c->bodycap) {
		size_t cap = c->bodycap ? 2 * c->bodycap : 4096;
		uint8_t *nb;

		while (cap < c->bodylen + n + 1)
			cap *= 2;
		if (cap > ANN_MAX)
			cap = ANN_MAX;
		if (c->bodylen + n + 1 > cap || (nb = realloc(c->body, cap)) == NULL) {
			a->full = 1;
			return;
		}
		c->body = nb;
		c->bodycap = cap;
	}
	memcpy(c->body + c->bodylen, sfx, n);
	c->body[c->bodylen + n] = '\n';
	c->bodylen += n + 1;
}

void web_serve_announced(struct wconn *c, const char *prefix, size_t plen, const char *query,
                         size_t qn)
{
	char h[320], norm[2048];
	struct moq_auth_grant *g = NULL;
	struct ann_ctx a = {c, NULL, 0};
	int n = moq_path_norm(norm, sizeof(norm), prefix, plen);

	if (n < 0) {
		web_respond_text(c, 400, "Bad Request", "bad prefix\n");
		return;
	}
	/* an announce interest needs `get` under the prefix (moq/access.c) */
	if (!web_auth_grant(c, prefix, plen, query, qn, &g) ||
	    (g != NULL && !moq_auth_grant_overlaps(g, 0, norm, (size_t)n))) {
		moq_auth_grant_free(g);
		web_respond_text(c, 401, "Unauthorized", "unauthorized\n");
		return;
	}
	if (c->w->dry) {
		moq_auth_grant_free(g);
		web_respond_text(c, 200, "OK", "");
		return;
	}
	a.g = g;
	/* --auth-url: a grant's `root` replaces the dialed path (an alias, as
	 * for a session: moq/access.c): the listing is the root's */
	if (g != NULL && moq_auth_url_client(c->w->cfg.auth) != NULL &&
	    (g->rootlen != (size_t)n || memcmp(g->root, norm, (size_t)n) != 0)) {
		prefix = g->root;
		plen = g->rootlen;
	}
	n = moq_node_broadcasts(c->w->cfg.node, prefix, plen, ann_cb, &a);
	moq_auth_grant_free(g);
	if (n < 0) {
		web_respond_text(c, 400, "Bad Request", "bad prefix\n");
		return;
	}
	n = snprintf(h, sizeof(h),
	             "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
	             "Transfer-Encoding: chunked\r\n%sCache-Control: no-store\r\n"
	             "Connection: close\r\n\r\n",
	             web_cors(c));
	web_out_put(c, h, (size_t)n);
	c->body_cut = a.full;
	c->bodyoff = 0;
	c->st = C_BODY;
	web_body_step(c);
}

/* The rest of c->body, in chunks as the output buffer has room; the last
 * chunk unless the body was cut (c->body_cut). */
void web_body_step(struct wconn *c)
{
	while (c->bodyoff < c->bodylen && web_out_room(c) > CHUNK_HDR) {
		size_t n = c->bodylen - c->bodyoff;

		if (n > (size_t)web_out_room(c) - CHUNK_HDR)
			n = (size_t)web_out_room(c) - CHUNK_HDR;
		chunk_put(c, c->body + c->bodyoff, n);
		c->bodyoff += n;
	}
	if (c->bodyoff < c->bodylen || web_out_room(c) < 5)
		return;
	if (!c->body_cut)
		chunk_end(c);
	free(c->body);
	c->body = NULL;
	c->bodylen = c->bodycap = c->bodyoff = 0;
	c->close_after = 1;
	c->st = C_DONE;
}

void web_fetch_release(struct wconn *c)
{
	if (c->fg != NULL)
		moq_cache_group_unref(c->fg);
	if (c->ftr != NULL)
		moq_cache_track_unref(c->ftr);
	c->fg = NULL;
	c->ftr = NULL;
	if (c->fheld) {
		c->fheld = 0;
		moq_node_track_release(c->w->cfg.node, c->fb, c->fblen, c->ftrack, c->ftlen);
	}
	if (c->fpinned) {
		c->fpinned = 0;
		c->w->st.fetches--;
	}
}

/* The /fetch body is over: the last chunk when the group was read whole
 * (finished, and every published byte sent), else the body ends with the
 * connection (cut short: evicted, aborted, its track dropped, stalled). */
static void fetch_end(struct wconn *c, int rc)
{
	uint64_t bytes = 0;

	if (rc == MOQ_ERR_CLOSED && moq_cache_group_status(c->fg, &bytes, NULL) == MOQ_ERR_CLOSED &&
	    bytes == c->fbytes)
		chunk_end(c);
	web_fetch_release(c);
	c->close_after = 1;
	c->st = C_DONE;
}

/* Payload bytes of the current view (c->fv from c->fvdone on) as one chunk
 * of at most @room bytes. Returns the bytes put, 0 when the cache gave none
 * (published bytes are always there). */
static size_t fetch_chunk(struct wconn *c, size_t room)
{
	const struct moq_cache_frame *f = &c->fv;
	size_t take = f->len - c->fvdone, got = 0;
	struct iovec v[8];
	int k;

	if (take > room)
		take = room;
	if (f->data != NULL) {
		chunk_put(c, f->data + c->fvdone, take);
		return take;
	}
	k = moq_cache_group_iov(c->fg, f->offset + c->fvdone, take, v, 8);
	for (int i = 0; i < k; i++)
		got += v[i].iov_len;
	if (got == 0)
		return 0;
	chunk_head(c, got);
	for (int i = 0; i < k; i++)
		web_out_put(c, v[i].iov_base, v[i].iov_len);
	web_out_put(c, "\r\n", 2);
	return got;
}

/* /fetch progress: find the track, the group, then copy out what arrived
 * as chunks (any frame size: a frame goes out in as many chunks as the
 * output buffer takes). */
void web_fetch_step(struct wconn *c, uint64_t now)
{
	if (c->ftr == NULL) {
		/* a track announced but not in the cache: the node subscribes
		 * upstream for us, as for a MoQ subscriber (issue 22, item 5) */
		if (!c->fheld && c->w->cfg.cache != NULL &&
		    moq_node_track_hold(c->w->cfg.node, c->fb, c->fblen, c->ftrack, c->ftlen) == 1)
			c->fheld = 1;
		if (moq_node_broadcast_live(c->w->cfg.node, c->fb, c->fblen) &&
		    c->w->cfg.cache != NULL)
			c->ftr = moq_cache_track_lookup(c->w->cfg.cache, c->fb, c->fblen, c->ftrack,
			                                c->ftlen);
		if (c->ftr == NULL) {
			if (now >= c->fdeadline) {
				web_fetch_release(c);
				web_respond_text(c, 504, "Gateway Timeout",
				                 "no such broadcast yet\n");
			}
			return;
		}
	}
	if (c->fg == NULL) {
		uint64_t seq = c->fseq;
		int rc;

		if (c->flatest) {
			rc = moq_cache_track_latest(c->ftr, &seq);
			if (rc == MOQ_ERR_AGAIN) { /* no group yet: wait for the first */
				if (now >= c->fdeadline) {
					web_fetch_release(c);
					web_respond_text(c, 504, "Gateway Timeout",
					                 "no group yet\n");
				}
				return;
			}
			if (rc != 0) {
				web_fetch_release(c);
				web_respond_text(c, 404, "Not Found", "no such group\n");
				return;
			}
		}
		rc = moq_cache_track_group(c->ftr, seq, &c->fg);
		if (rc != 0 && c->fheld && !c->flatest &&
		    moq_cache_track_latest(c->ftr, &seq) == MOQ_ERR_AGAIN) {
			/* subscribed upstream, no group arrived yet: wait */
			c->fg = NULL;
			if (now >= c->fdeadline) {
				web_fetch_release(c);
				web_respond_text(c, 504, "Gateway Timeout", "no group yet\n");
			}
			return;
		}
		if (rc != 0) {
			/* a group this relay's cache does not hold (older than the
			 * upstream subscription's start, or expired): 404, as
			 * moq-relay's /fetch answers (track.get_group: None); a
			 * relay does not FETCH it upstream (docs/DEPLOY.md) */
			c->fg = NULL;
			web_fetch_release(c);
			web_respond_text(c, 404, "Not Found",
			                 "no such group in this relay's cache (older than what it "
			                 "holds, or expired)\n");
			return;
		}
		memset(&c->fcur, 0, sizeof(c->fcur));
	}
	if (!c->fsent_hdr) {
		char h[320];
		int n = snprintf(h, sizeof(h),
		                 "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
		                 "Transfer-Encoding: chunked\r\n%sCache-Control: no-store\r\n"
		                 "Connection: close\r\n\r\n",
		                 web_cors(c));

		web_out_put(c, h, (size_t)n);
		c->fsent_hdr = 1;
		c->fdeadline = now + FETCH_WAIT_NS;
	}
	/* the group's frame payloads, raw, until it ends */
	while (web_out_room(c) > CHUNK_HDR + 256) {
		size_t put = 0;

		if (!c->fvhave) {
			int n = moq_cache_read_frames(c->fg, &c->fcur, &c->fv, 1);

			if (n == 0) {
				/* a live group: more comes; one that stalls for
				 * FETCH_WAIT_NS is cut */
				if (now >= c->fdeadline)
					fetch_end(c, 0);
				return;
			}
			if (n < 0) {
				fetch_end(c, n);
				return;
			}
			c->fvhave = 1;
			c->fvdone = 0;
		}
		if (c->fv.len > c->fvdone) {
			put = fetch_chunk(c, (size_t)web_out_room(c) - CHUNK_HDR);
			if (put == 0) {
				fetch_end(c, 0);
				return;
			}
		}
		c->fvdone += (uint32_t)put;
		c->fbytes += put;
		c->fdeadline = now + FETCH_WAIT_NS;
		if (c->fvdone == c->fv.len)
			c->fvhave = 0;
	}
}

void web_serve_fetch(struct wconn *c, char *rest, size_t rn, const char *query, size_t qn,
                     uint64_t now)
{
	struct moq_auth_grant *g = NULL;
	char *slash, num[24];
	int vl, n, ok;

	n = web_pct_decode(rest, rn, 0);
	if (n < 0) {
		web_respond_text(c, 400, "Bad Request", "bad path\n");
		return;
	}
	rn = (size_t)n;
	while (rn > 0 && rest[rn - 1] == '/')
		rn--;
	rest[rn] = 0;
	slash = memrchr(rest, '/', rn);
	/* /fetch/<broadcast>/<track>: both non-empty */
	if (slash == NULL || slash == rest || (size_t)(slash - rest) + 1 >= rn ||
	    (size_t)(slash - rest) >= sizeof(c->fb) ||
	    rn - (size_t)(slash - rest) - 1 >= sizeof(c->ftrack)) {
		web_respond_text(c, 400, "Bad Request", "want /fetch/<broadcast>/<track>\n");
		return;
	}
	vl = web_query_get(query, qn, "group", num, sizeof(num));
	if (vl == -1 || (vl == 6 && memcmp(num, "latest", 6) == 0)) {
		c->flatest = 1;
	} else {
		char *end;

		errno = 0;
		c->fseq = vl > 0 ? strtoull(num, &end, 10) : 0;
		if (vl <= 0 || *end != 0 || errno != 0 || num[0] < '0' || num[0] > '9') {
			web_respond_text(c, 400, "Bad Request", "bad group\n");
			return;
		}
	}
	n = moq_path_norm(c->fb, sizeof(c->fb), rest, (size_t)(slash - rest));
	if (n <= 0) {
		web_respond_text(c, 400, "Bad Request", "bad broadcast path\n");
		return;
	}
	c->fblen = (size_t)n;
	c->ftlen = rn - (size_t)(slash - rest) - 1;
	memcpy(c->ftrack, slash + 1, c->ftlen);
	/* a FETCH needs `get` on the broadcast, as a MoQ session's does
	 * (moq/origin.c, req_path) */
	ok = web_auth_grant(c, c->fb, c->fblen, query, qn, &g);
	/* --auth-url: the grant's `root` (an alias) is the broadcast read */
	if (ok && g != NULL && moq_auth_url_client(c->w->cfg.auth) != NULL &&
	    g->rootlen < sizeof(c->fb) &&
	    (g->rootlen != c->fblen || memcmp(g->root, c->fb, c->fblen) != 0)) {
		memcpy(c->fb, g->root, g->rootlen);
		c->fblen = g->rootlen;
	}
	ok = ok && (g == NULL || moq_auth_grant_allows(g, 0, c->fb, c->fblen));
	moq_auth_grant_free(g);
	if (!ok) {
		web_respond_text(c, 401, "Unauthorized", "unauthorized\n");
		return;
	}
	if (c->w->dry) {
		web_respond_text(c, 200, "OK", "");
		return;
	}
	/* each /fetch pins a track and a group until it ends: bounded per
	 * listener (cfg.max_fetches) */
	if (c->w->st.fetches >= c->w->cfg.max_fetches) {
		c->w->st.fetches_refused++;
		web_respond_text(c, 503, "Service Unavailable", "too many fetches\n");
		return;
	}
	c->fpinned = 1;
	c->w->st.fetches++;
	c->fdeadline = now + FETCH_WAIT_NS;
	c->st = C_FETCH;
	web_fetch_step(c, now);
}
