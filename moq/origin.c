/* SPDX-License-Identifier: MIT */
/*
 * origin.c: paths and the origin table: the broadcasts a relay node knows,
 * their publisher or owning worker, and the end of one
 * (docs/PROTOCOL.md, Announce).
 */
#include "moq.h"

#include <stdlib.h>
#include <string.h>

#include "moq_int.h"

/* ---------------------------------------------------------------- utils */

char *memdup0(const void *p, size_t len)
{
	char *d = malloc(len + 1);

	if (d) {
		if (len)
			memcpy(d, p, len);
		d[len] = 0;
	}
	return d;
}

/* Normalise @p into a new string (PROTOCOL.md, path). */
char *path_dup(const char *p, size_t len, size_t *out_len)
{
	char *d = malloc(len + 1);
	int n;

	if (!d)
		return NULL;
	n = moq_path_norm(d, len + 1, p, len);
	if (n < 0) {
		free(d);
		return NULL;
	}
	d[n] = 0;
	*out_len = (size_t)n;
	return d;
}

/* Join two normalised paths into a new normalised string. */
char *path_join(const char *a, size_t al, const char *b, size_t bl, size_t *out_len)
{
	char *d = malloc(al + bl + 2);
	size_t o = 0;

	if (!d)
		return NULL;
	memcpy(d, a, al);
	o = al;
	if (al && bl)
		d[o++] = '/';
	memcpy(d + o, b, bl);
	o += bl;
	d[o] = 0;
	*out_len = o;
	if (moq_path_segments(d, o) > MOQ_PATH_MAX_SEGMENTS) {
		free(d);
		return NULL;
	}
	return d;
}

/* A path from a control message, normalised: messages are at most
 * cfg.max_msg <= 4096 bytes (moq_node_create), so it always fits. */
#define PATH_NORM_BUF 4200

/*
 * Normalise the path @p (@len bytes, from the peer; PROTOCOL.md, path) and
 * join it under @base (@bl bytes, normalised; NULL = ""): the session's root
 * for the paths a peer names, the announce stream's prefix for the suffixes
 * it announces. *@out is the new string (*@out_len bytes, the caller frees
 * it), or NULL when the joined path has more than MOQ_PATH_MAX_SEGMENTS
 * segments or memory ran out. Returns 0, or moq_path_norm's error
 * (MOQ_ERR_DECODE, MOQ_ERR_TOO_LARGE) when @p is not a path (*@out NULL).
 */
int path_norm_join(const char *base, size_t bl, const char *p, size_t len, char **out,
                   size_t *out_len)
{
	char buf[PATH_NORM_BUF];
	int rc = moq_path_norm(buf, sizeof(buf), p, len);

	*out = NULL;
	if (rc < 0)
		return rc;
	*out = path_join(base ? base : "", bl, buf, (size_t)rc, out_len);
	return 0;
}

/*
 * Whether a request's broadcast path @p (@plen bytes, joined under the
 * session's root; NULL: the caller refuses it otherwise) and track name of
 * @tlen bytes are within cfg.max_broadcast_name / cfg.max_track_name. A
 * refusal is counted; the caller resets the request with 11 (bounds).
 */
bool names_fit(struct moq_node *n, const char *p, size_t plen, size_t tlen)
{
	if (p && plen > n->cfg.max_broadcast_name) {
		n->st.names_refused_broadcast++;
		n->st.refused_bounds++;
		return false;
	}
	if (tlen > n->cfg.max_track_name) {
		n->st.names_refused_track++;
		n->st.refused_bounds++;
		return false;
	}
	return true;
}

/*
 * A request's broadcast @b (SUBSCRIBE, FETCH, TRACK) joined under the
 * session's root into *@full (malloc'd; NULL when the join fails: the caller
 * answers not found), after the checks every request takes: a path that does
 * not decode fails the session (5), one the token may not read is refused
 * with 6, names over their bounds with 11 (names_fit). Returns 0 to go on,
 * -1 when the request was answered (nothing to free).
 */
int req_path(struct moq_session *s, struct mstream *st, const struct moq_str *b, size_t tlen,
             char **full, size_t *flen)
{
	struct moq_node *n = s->n;

	if (path_norm_join(s->root, s->rootlen, b->p, b->len, full, flen) < 0) {
		sess_fail(s, MOQ_CODE_DECODE);
		return -1;
	}
	if (*full && !access_ok(s, 0, *full, *flen)) {
		free(*full);
		n->st.auth_denied++;
		st_refuse(s, st, MOQ_CODE_UNAUTHORIZED);
		return -1;
	}
	if (!names_fit(n, *full, *flen, tlen)) {
		free(*full);
		st_refuse(s, st, MOQ_CODE_BOUNDS);
		return -1;
	}
	return 0;
}

/*
 * Every hop chain is built here (PROTOCOL.md, Announce: at most 32 hops):
 * @src's @nh hops into @dst (room for MOQ_MAX_HOPS), then @extra when
 * @add. Returns the chain's length, or -1 when it would pass MOQ_MAX_HOPS
 * (@dst then holds nothing the caller may use: it drops the chain).
 */
int hops_chain(uint64_t *dst, const uint64_t *src, uint32_t nh, bool add, uint64_t extra)
{
	if (nh > MOQ_MAX_HOPS || (add && nh == MOQ_MAX_HOPS))
		return -1;
	if (nh && dst != src)
		memmove(dst, src, nh * sizeof(src[0]));
	if (add)
		dst[nh++] = extra;
	return (int)nh;
}

/* SipHash-2-4 (Aumasson and Bernstein, 2012) of one 64-bit word: a keyed
 * PRF, so the hop ids client_hop makes cannot be aimed at another's. */
#define SIP_ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIP_ROUND(v0, v1, v2, v3)                                                                  \
	do {                                                                                       \
		v0 += v1;                                                                          \
		v1 = SIP_ROTL(v1, 13) ^ v0;                                                        \
		v0 = SIP_ROTL(v0, 32);                                                             \
		v2 += v3;                                                                          \
		v3 = SIP_ROTL(v3, 16) ^ v2;                                                        \
		v0 += v3;                                                                          \
		v3 = SIP_ROTL(v3, 21) ^ v0;                                                        \
		v2 += v1;                                                                          \
		v1 = SIP_ROTL(v1, 17) ^ v2;                                                        \
		v2 = SIP_ROTL(v2, 32);                                                             \
	} while (0)

static uint64_t siphash_u64(const uint64_t key[2], uint64_t m)
{
	uint64_t v0 = key[0] ^ 0x736f6d6570736575ull, v1 = key[1] ^ 0x646f72616e646f6dull;
	uint64_t v2 = key[0] ^ 0x6c7967656e657261ull, v3 = key[1] ^ 0x7465646279746573ull;
	uint64_t b = 8ull << 56; /* the length byte, no tail */

	v3 ^= m;
	SIP_ROUND(v0, v1, v2, v3);
	SIP_ROUND(v0, v1, v2, v3);
	v0 ^= m;
	v3 ^= b;
	SIP_ROUND(v0, v1, v2, v3);
	SIP_ROUND(v0, v1, v2, v3);
	v0 ^= b;
	v2 ^= 0xff;
	for (int i = 0; i < 4; i++)
		SIP_ROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

/*
 * Issue 22: only a cluster peer (access_peer) may present a hop chain. A
 * client's announce starts its own chain here: its @nh hops in @hops (as
 * received, the responder's hop stamped) become one hop, the relay's keyed
 * hash of the client's own hop id (the chain's last: lite-04 senders append
 * their own, lite-05 receivers stamp it). The same client over two sessions
 * of this relay (a reconnect, a standby) keeps one publisher id; no client
 * can name another publisher's first hop, nor shorten its chain, to take
 * its broadcast over without the ownership rules (AUTH-CLUSTER.md). An
 * unknown id (0, lite-03) stays unknown. Returns the new length (0 or 1).
 */
uint32_t hops_client(const struct moq_node *n, uint64_t *hops, uint32_t nh)
{
	uint64_t own;

	if (!nh)
		return 0;
	own = hops[nh - 1];
	hops[0] = own ? (siphash_u64(n->hop_key, own) & 0x3fffffffffffffffull) | 1 : 0;
	return 1;
}

bool hops_have(const uint64_t *hops, uint32_t n, uint64_t h)
{
	if (h == 0)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (hops[i] == h)
			return true;
	return false;
}

/* ----------------------------------------------------- origin table */

/* The table starts with this many buckets and doubles when it holds more
 * broadcasts than buckets (a lookup then walks about one entry). */
#define BTAB_MIN 64u

/* FNV-1a over the path (PROTOCOL.md's route hash uses it too). */
static uint64_t path_hash(const char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
	return h;
}

struct bcast *bcast_find(struct moq_node *n, const char *p, size_t len)
{
	uint64_t h;

	if (!n->btab)
		return NULL;
	h = path_hash(p, len);
	for (struct bcast *b = n->btab[h & n->bmask]; b; b = b->hnext)
		if (b->hash == h && b->len == len && memcmp(b->path, p, len) == 0)
			return b;
	return NULL;
}

/* Double the buckets (or make the first ones). Returns false when memory is
 * short (the table keeps working, with longer chains). */
static bool btab_grow(struct moq_node *n)
{
	uint32_t cap = n->btab ? (n->bmask + 1) * 2 : BTAB_MIN;
	struct bcast **t = calloc(cap, sizeof(*t));

	if (!t)
		return false;
	for (struct bcast *b = n->bcasts; b; b = b->next) {
		b->hnext = t[b->hash & (cap - 1)];
		t[b->hash & (cap - 1)] = b;
	}
	free(n->btab);
	n->btab = t;
	n->bmask = cap - 1;
	return true;
}

/* ----------------------------------------------------- prefix index */

static struct pfx *pfx_find(const struct moq_node *n, const char *p, size_t len, uint64_t h)
{
	if (!n->ptab)
		return NULL;
	for (struct pfx *x = n->ptab[h & n->pmask]; x; x = x->hnext)
		if (x->hash == h && x->len == len && memcmp(x->path, p, len) == 0)
			return x;
	return NULL;
}

/* Double the index's buckets (or make the first ones) when it holds more
 * prefixes than buckets. Returns false when memory is short and there is
 * no table yet. */
static bool ptab_grow(struct moq_node *n)
{
	uint32_t cap = n->ptab ? (n->pmask + 1) * 2 : BTAB_MIN;
	struct pfx **t;

	if (n->ptab && n->npfx < n->pmask + 1)
		return true;
	t = calloc(cap, sizeof(*t));
	if (!t)
		return n->ptab != NULL;
	for (uint32_t i = 0; n->ptab && i <= n->pmask; i++)
		for (struct pfx *x = n->ptab[i], *nx; x; x = nx) {
			nx = x->hnext;
			x->hnext = t[x->hash & (cap - 1)];
			t[x->hash & (cap - 1)] = x;
		}
	free(n->ptab);
	n->ptab = t;
	n->pmask = cap - 1;
	return true;
}

/* @l leaves its prefix's list; an empty prefix leaves the index. */
static void plink_drop(struct moq_node *n, struct plink *l)
{
	struct pfx *x = l->px;

	if (!x)
		return;
	PLINK_UNLINK(l, next, pprev);
	l->px = NULL;
	if (x->head)
		return;
	for (struct pfx **pp = &n->ptab[x->hash & n->pmask]; *pp; pp = &(*pp)->hnext)
		if (*pp == x) {
			*pp = x->hnext;
			break;
		}
	n->npfx--;
	free(x);
}

/* Put @bc in the list of each of its prefixes (segment boundaries and the
 * path itself). Returns false when memory ran out (nothing is left in). */
static bool pfx_index(struct moq_node *n, struct bcast *bc)
{
	uint32_t k = 0, np = 1;

	for (size_t i = 0; i < bc->len; i++)
		np += bc->path[i] == '/';
	bc->pl = calloc(np, sizeof(*bc->pl));
	if (!bc->pl)
		return false;
	for (size_t i = 0; i <= bc->len; i++) {
		struct plink *l;
		struct pfx *x;
		uint64_t h;

		if (i < bc->len && bc->path[i] != '/')
			continue;
		h = path_hash(bc->path, i);
		x = pfx_find(n, bc->path, i, h);
		if (!x) {
			if (!ptab_grow(n) || !(x = calloc(1, sizeof(*x) + i + 1)))
				goto fail;
			memcpy(x->path, bc->path, i);
			x->len = i;
			x->hash = h;
			x->hnext = n->ptab[h & n->pmask];
			n->ptab[h & n->pmask] = x;
			n->npfx++;
		}
		l = &bc->pl[k++];
		l->bc = bc;
		l->px = x;
		PLINK_AT(&x->head, l, next, pprev);
	}
	bc->npl = k;
	return true;
fail:
	bc->npl = k;
	while (bc->npl)
		plink_drop(n, &bc->pl[--bc->npl]);
	free(bc->pl);
	bc->pl = NULL;
	return false;
}

/*
 * The broadcasts under prefix @p (@len bytes, normalised, not empty): the
 * first link of its list in the prefix index (walk with ->next, each ->bc),
 * NULL when none. Proportional to the broadcasts under @p, not to the
 * table. An empty prefix is the node's whole list (n->bcasts).
 */
struct plink *bcast_under(struct moq_node *n, const char *p, size_t len)
{
	struct pfx *x = pfx_find(n, p, len, path_hash(p, len));

	return x ? x->head : NULL;
}

struct bcast *bcast_add(struct moq_node *n, const char *p, size_t len)
{
	struct bcast *b;

	if ((!n->btab || n->st.broadcasts >= (uint64_t)n->bmask + 1) && !btab_grow(n) && !n->btab)
		return NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->path = memdup0(p, len);
	if (!b->path) {
		free(b);
		return NULL;
	}
	b->len = len;
	b->hash = path_hash(p, len);
	if (!pfx_index(n, b)) {
		free(b->path);
		free(b);
		return NULL;
	}
	b->hnext = n->btab[b->hash & n->bmask];
	n->btab[b->hash & n->bmask] = b;
	b->next = n->bcasts;
	if (b->next)
		b->next->prev = b;
	n->bcasts = b;
	n->st.broadcasts++;
	return b;
}

/* @s becomes @bc's live publisher (NULL: none); keeps the sessions' route
 * counts (cfg.max_session_broadcasts). */
void bcast_set_pub(struct bcast *bc, struct moq_session *s)
{
	if (bc->pub) {
		bc->pub->nbcasts--;
		PLINK_UNLINK(bc, pnext, ppprev);
	}
	bc->pub = s;
	if (s) {
		s->nbcasts++;
		PLINK_AT(&s->live_routes, bc, pnext, ppprev);
	}
}

/* Backup route @b is dropped (off its session's list and count). */
static void bsrc_free(struct bsrc *b)
{
	PLINK_UNLINK(b, snext, spprev);
	b->pub->nbcasts--;
	free(b);
}

void bcast_unlink(struct moq_node *n, struct bcast *bc)
{
	bcast_unlinger(n, bc);
	for (struct bcast **pp = &n->btab[bc->hash & n->bmask]; *pp; pp = &(*pp)->hnext)
		if (*pp == bc) {
			*pp = bc->hnext;
			break;
		}
	if (bc->prev)
		bc->prev->next = bc->next;
	else
		n->bcasts = bc->next;
	if (bc->next)
		bc->next->prev = bc->prev;
	n->st.broadcasts--;
	while (bc->npl)
		plink_drop(n, &bc->pl[--bc->npl]);
	free(bc->pl);
	bcast_set_pub(bc, NULL);
	while (bc->backups) {
		struct bsrc *b = bc->backups;
		bc->backups = b->next;
		bsrc_free(b);
	}
	free(bc->path);
	free(bc);
}

/* ------------------------------------------------------------ linger */

/* @bc's publisher is gone: it ends at now + cfg.linger_ns unless one comes
 * back (PROTOCOL.md, The relay's cache). The queue is in deadline order
 * because the node's clock only moves forward and the linger is fixed, so
 * moq_node_poll looks at its head only (bcast_linger_expire). */
void bcast_linger(struct moq_node *n, struct bcast *bc)
{
	bcast_unlinger(n, bc);
	bc->linger_until = n->now + n->cfg.linger_ns;
	if (!bc->linger_until)
		bc->linger_until = 1;
	bc->lnext = NULL;
	bc->lprev = n->linger_tail;
	if (n->linger_tail)
		n->linger_tail->lnext = bc;
	else
		n->linger_head = bc;
	n->linger_tail = bc;
}

/* @bc has a publisher again (or ends now): off the linger queue. */
void bcast_unlinger(struct moq_node *n, struct bcast *bc)
{
	if (!bc->linger_until)
		return;
	if (bc->lprev)
		bc->lprev->lnext = bc->lnext;
	else
		n->linger_head = bc->lnext;
	if (bc->lnext)
		bc->lnext->lprev = bc->lprev;
	else
		n->linger_tail = bc->lprev;
	bc->lnext = bc->lprev = NULL;
	bc->linger_until = 0;
}

/* Lingering broadcasts whose publisher did not come back by @now end. */
void bcast_linger_expire(struct moq_node *n, uint64_t now)
{
	while (n->linger_head && now >= n->linger_head->linger_until)
		bcast_end(n, n->linger_head);
}

/* End every upstream of @bc's path: its subscribers get END. */
void bcast_end(struct moq_node *n, struct bcast *bc)
{
	/* its route was lost (the linger ran out, or the owning worker lost
	 * it): subscribers wait for a new route within their group deadline
	 * (up_orphan) instead of ending now */
	bool lost = bc->linger_until != 0 || bc->lost;
	/* (another worker's: its linger ran out just now) */
	uint64_t linger = n->cfg.linger_ns, now = n->now,
	         lost_at = bc->linger_until > linger ? bc->linger_until - linger
	                   : now > linger            ? now - linger
	                                             : 0;

	if (!bc->owner)
		hub_announce(n, bc, lost ? 2 : 0);
	ann_notify(n, bc, 0);
	tinfo_drop_path(n, bc->path, bc->len);
	for (struct upstream *up = n->ups; up; up = up->next)
		if (up->plen == bc->len && memcmp(up->path, bc->path, bc->len) == 0) {
			if (!lost || up->ended || !up_orphan(up, lost_at)) {
				up->ended = 1;
				up->end_seq = UINT64_MAX;
				up_touch(up);
			}
			if (up->us) {
				usub_close(up->us);
				up->us->up = NULL;
				up->us = NULL;
				n->st.upstream_subs--;
				up_idle(up);
			}
		}
	bcast_unlink(n, bc);
}

/* ------------------------------------------------ broadcast ownership */

/*
 * AUTH-CLUSTER.md, Broadcast ownership, as moq-relay does it: the first hop
 * of a route's hop list names the broadcast's original publisher. A route
 * whose first hop is unknown (lite-03 carries only a hop count; 0) is its
 * own publisher. Two routes are the same broadcast when their first hops
 * are equal and known.
 */
static bool same_publisher(const uint64_t *a, uint32_t na, const uint64_t *b, uint32_t nb)
{
	return na && nb && a[0] && a[0] == b[0];
}

/* Two routes are different broadcasts when both first hops are known and
 * differ (an unknown one is taken as a reconnect of the same). */
static bool other_publisher(const uint64_t *a, uint32_t na, const uint64_t *b, uint32_t nb)
{
	return na && nb && a[0] && b[0] && a[0] != b[0];
}

/* AUTH-CLUSTER.md, Relay-to-relay: route choice hashes with FNV-1a from
 * moq-relay's seed, so every node of a cluster (moqdp or moq-relay) ranks
 * the same routes the same way. */
#define ROUTE_FNV_SEED  0x420C0DECB00Bull
#define ROUTE_FNV_PRIME 0x100000001b3ull

uint64_t moq_route_hash(const char *name, size_t len, const uint64_t *hops, uint32_t nh)
{
	uint64_t h = ROUTE_FNV_SEED;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)name[i]) * ROUTE_FNV_PRIME;
	for (uint32_t i = 0; i < nh; i++)
		for (unsigned b = 0; b < 8; b++) /* each hop id little-endian */
			h = (h ^ ((hops[i] >> (8 * b)) & 0xff)) * ROUTE_FNV_PRIME;
	return h;
}

/*
 * Route order (AUTH-CLUSTER.md, Relay-to-relay: announced before offline,
 * lower cost, fewer hops, the FNV-1a hash over the name and hop ids, then
 * newest). moq-lite 03..05 carry no cost, and an offline route is not kept
 * as a candidate here (a lingering broadcast has no route). Returns > 0
 * when route @a is preferred to @b, < 0 when @b is, 0 when only age can
 * tell (the caller keeps the newest):
 *  - the same original publisher over two routes: fewer hops, then the
 *    lower hash over the name and the whole chain;
 *  - two original publishers, at least one learned through another relay
 *    (a chain of more than one hop): the lower hash over the name and the
 *    first hop (the publisher). Hop counts differ by where a node sits, so
 *    they cannot decide between publishers if every node is to pick the
 *    same one; the publisher's id is the same everywhere;
 *  - two publishers both connected directly: 0 (Broadcast ownership: the
 *    newer one replaces the live one).
 */
static int route_cmp(const char *p, size_t len, const uint64_t *a, uint32_t na, const uint64_t *b,
                     uint32_t nb)
{
	uint64_t ha, hb;

	if (na && nb && a[0] && a[0] == b[0]) {
		if (na != nb)
			return na < nb ? 1 : -1;
		ha = moq_route_hash(p, len, a, na);
		hb = moq_route_hash(p, len, b, nb);
	} else {
		if ((na <= 1 && nb <= 1) || !na || !nb || !a[0] || !b[0])
			return 0;
		ha = moq_route_hash(p, len, a, 1);
		hb = moq_route_hash(p, len, b, 1);
	}
	return ha == hb ? 0 : ha < hb ? 1 : -1;
}

/* lite-06 (draft-06 5.1.1.1): among routes that both carry costs, the lower
 * Warm Route Cost, then the lower Cold; otherwise, or on a tie, route_cmp. */
static int route_rank(const char *p, size_t len, const uint64_t *a, uint32_t na,
                      const struct rcost *ca, const uint64_t *b, uint32_t nb,
                      const struct rcost *cb)
{
	/* lite-06 7.18: a route that arrived on a session that sent GOAWAY is
	 * the most expensive there is, whatever the other route's version */
	if (ca && cb && ca->drain != cb->drain)
		return ca->drain ? -1 : 1;
	if (ca && cb && ca->set && cb->set) {
		if (ca->warm != cb->warm)
			return ca->warm < cb->warm ? 1 : -1;
		if (ca->cold != cb->cold)
			return ca->cold < cb->cold ? 1 : -1;
	}
	return route_cmp(p, len, a, na, b, nb);
}

static const struct rcost rcost_none;
static const struct rcost rcost_drain = {true, true, MOQ6_COST_CEILING, MOQ6_COST_CEILING};

static struct bsrc **bsrc_find(struct bcast *bc, const struct moq_session *s)
{
	for (struct bsrc **pp = &bc->backups; *pp; pp = &(*pp)->next)
		if ((*pp)->pub == s)
			return pp;
	return NULL;
}

/* Whether @s holds a route to @bc (live or backup). */
bool bcast_has_route(const struct bcast *bc, const struct moq_session *s)
{
	if (bc->pub == s)
		return true;
	for (const struct bsrc *b = bc->backups; b; b = b->next)
		if (b->pub == s)
			return true;
	return false;
}

/* Keep @s's route (@hops) as a backup of @bc, newest first. */
static bool bsrc_push(struct bcast *bc, struct moq_session *s, const uint64_t *hops, uint32_t nh,
                      const struct rcost *rc)
{
	struct bsrc *b = calloc(1, sizeof(*b));

	if (!b)
		return false;
	b->cost = rc ? *rc : rcost_none;
	b->pub = s;
	b->bc = bc;
	b->nhops = (uint32_t)hops_chain(b->hops, hops, nh, false, 0);
	b->next = bc->backups;
	bc->backups = b;
	s->nbcasts++;
	PLINK_AT(&s->backup_routes, b, snext, spprev);
	return true;
}

/*
 * Make @s (@hops) @bc's live route. @renew: it is another broadcast than
 * the one subscribers were reading (another original publisher replaced it,
 * or an older one returns): their subscriptions end (END, then FIN; they
 * subscribe again, PROTOCOL.md, Subscribe), the tracks start over empty,
 * what was learned about them (TRACK_INFO) is forgotten, and announce
 * requests hear a restart (lite-05: a second ACTIVE; lite-03/04: ENDED then
 * ACTIVE). Otherwise (the same broadcast over another route, or a publisher
 * back within the linger) the upstream subscriptions move to @s and go on
 * at its next group, nothing announced.
 */
static void bcast_route(struct moq_node *n, struct bcast *bc, struct moq_session *s,
                        const uint64_t *hops, uint32_t nh, const struct rcost *rc, bool renew)
{
	uint64_t old_hops[MOQ_MAX_HOPS];
	uint32_t old_nh = bc->nhops;
	const struct moq_session *old_pub = bc->pub;

	hops_chain(old_hops, bc->hops, old_nh, false, 0);
	bcast_unlinger(n, bc);
	bcast_set_pub(bc, s);
	bc->nhops = (uint32_t)hops_chain(bc->hops, hops, nh, false, 0);
	bc->cost = rc ? *rc : rcost_none;
	if (renew)
		tinfo_drop_path(n, bc->path, bc->len);
	for (struct upstream *up = n->ups; up; up = up->next) {
		if (up->plen != bc->len || memcmp(up->path, bc->path, bc->len) != 0 || up->ended)
			continue;
		if (up->us) {
			usub_close(up->us);
			up->us->up = NULL;
			up->us = NULL;
			n->st.upstream_subs--;
		}
		if (renew)
			up_restart(up);
		if (up->dsubs || up->nremote || up->nlocal)
			up_open(up, s);
	}
	/* requests hear a restart, or the end or start of the route where
	 * it now runs through their peer or no longer does */
	ann_reroute(n, bc, old_pub, old_hops, old_nh, renew);
	hub_announce(n, bc, 1);
}

/*
 * ANNOUNCE active of path @p (normalised, @len bytes) from session @s with
 * hop list @hops (the responder's origin stamped, lite-05). Applies the
 * ownership rules and the per-peer bounds. Returns 0, or the code to close
 * @s with: MOQ_CODE_BOUNDS (cfg.max_broadcasts, cfg.max_session_broadcasts),
 * MOQ_CODE_DUPLICATE (lite-03/04: @s announced @p already).
 */
uint64_t bcast_offer(struct moq_node *n, struct moq_session *s, const char *p, size_t len,
                     const uint64_t *hops, uint32_t nh, const struct rcost *rc)
{
	struct bcast *bc = bcast_find(n, p, len);
	struct bsrc **bp;

	if (s->goaway_in && n->cfg.relay)
		rc = &rcost_drain; /* still served, at the ceiling (7.18) */
	if (bc && bc->local)
		return 0; /* our own broadcast wins */
	if (bc && bcast_has_route(bc, s)) {
		/* AUTH-CLUSTER.md: a duplicate active announce within one
		 * session is an error on lite-03/04 and a restart on lite-05. */
		if (s->v < MOQ_LITE_05) {
			n->st.ann_duplicates++;
			return MOQ_CODE_DUPLICATE;
		}
		n->st.ann_restarts++;
		bp = bsrc_find(bc, s);
		if (bp) { /* a hidden route: only its hops (and costs) change */
			(*bp)->nhops = (uint32_t)hops_chain((*bp)->hops, hops, nh, false, 0);
			(*bp)->cost = rc ? *rc : rcost_none;
			return 0;
		}
		/* The same original publisher: the route is updated in place;
		 * another one: a new broadcast under the same path. */
		bcast_route(n, bc, s, hops, nh, rc, !same_publisher(bc->hops, bc->nhops, hops, nh));
		return 0;
	}
	if (s->nbcasts >= sess_max_broadcasts(s)) {
		n->st.ann_refused_session++;
		n->st.refused_bounds++;
		return MOQ_CODE_BOUNDS;
	}
	if (!bc) {
		if (n->st.broadcasts >= n->cfg.max_broadcasts) {
			n->st.ann_refused_relay++;
			n->st.refused_bounds++;
			return MOQ_CODE_BOUNDS;
		}
		bc = bcast_add(n, p, len);
		if (!bc)
			return 0;
		bcast_set_pub(bc, s);
		bc->nhops = (uint32_t)hops_chain(bc->hops, hops, nh, false, 0);
		bc->cost = rc ? *rc : rcost_none;
		ann_notify(n, bc, 1);
		hub_announce(n, bc, 1);
		ups_reattach(n, bc); /* subscribers waiting for a new route */
		return 0;
	}
	if (bc->owner) {
		/* Another worker had it (its publisher reconnected here): ours
		 * now. */
		uint32_t old = bc->owner;
		bc->owner = 0;
		for (struct upstream *up = n->ups; up; up = up->next)
			if (up->remote_owner == old && up->plen == len &&
			    memcmp(up->path, p, len) == 0) {
				hub_send(n, old, HUB_UNSUB, up->path, up->plen, up->track,
				         up->tlen);
				up->remote_owner = 0;
			}
	}
	if (!bc->pub || bc->pub->closing) {
		/* No live publisher (it lingers, or another worker had it): the
		 * upstream subscriptions splice over to @s; a different original
		 * publisher is a new broadcast. */
		bcast_route(n, bc, s, hops, nh, rc, other_publisher(bc->hops, bc->nhops, hops, nh));
		return 0;
	}
	if (same_publisher(bc->hops, bc->nhops, hops, nh)) {
		/* The same original publisher over another route: a standby,
		 * or the live route when it ranks first (route_cmp: fewer
		 * hops); the subscriptions splice over, nothing announced. */
		if (route_rank(p, len, hops, nh, rc, bc->hops, bc->nhops, &bc->cost) > 0 &&
		    bsrc_push(bc, bc->pub, bc->hops, bc->nhops, &bc->cost)) {
			bcast_route(n, bc, s, hops, nh, rc, false);
			return 0;
		}
		bsrc_push(bc, s, hops, nh, rc);
		return 0;
	}
	/* Another publisher learned through a relay that ranks below the live
	 * one waits as a hidden backup: every node keeps the same publisher
	 * (route_cmp). */
	if (route_rank(p, len, hops, nh, rc, bc->hops, bc->nhops, &bc->cost) < 0) {
		bsrc_push(bc, s, hops, nh, rc);
		return 0;
	}
	/* A newer publisher replaces the live one, which waits as a hidden
	 * backup and comes back when the newer ends. */
	if (!bsrc_push(bc, bc->pub, bc->hops, bc->nhops, &bc->cost))
		return 0;
	n->st.bcast_replaced++;
	bcast_route(n, bc, s, hops, nh, rc, true);
	return 0;
}

/* The backup that takes over when @bc's live route goes: a standby of the
 * same publisher first (it splices in), the best ranked of those (fewer
 * hops); otherwise the best ranked other publisher, the newest on a tie. */
static struct bsrc **bsrc_best(struct bcast *bc)
{
	struct bsrc **best = &bc->backups;
	bool bsame = same_publisher(bc->hops, bc->nhops, (*best)->hops, (*best)->nhops);

	for (struct bsrc **pp = &(*best)->next; *pp; pp = &(*pp)->next) {
		struct bsrc *b = *pp;
		bool same = same_publisher(bc->hops, bc->nhops, b->hops, b->nhops);
		if ((same && !bsame) ||
		    (same == bsame &&
		     route_rank(bc->path, bc->len, b->hops, b->nhops, &b->cost, (*best)->hops,
		                (*best)->nhops, &(*best)->cost) > 0)) {
			best = pp;
			bsame = same;
		}
	}
	return best;
}

/*
 * Session @s no longer publishes @bc (it announced ENDED, closed its
 * announce stream, or went away: @abrupt). A backup route is dropped
 * silently. The live route fails over to the newest backup (a standby of
 * the same publisher splices in, an older publisher returns as a new
 * broadcast); with none, the broadcast ends, or after an abrupt loss it
 * lingers for cfg.linger_ns. May free @bc.
 */
/* Backup *@bp of @bc becomes its live route (a failover): off the backup
 * list, the subscriptions spliced over (a new broadcast when it is another
 * original publisher). */
static void bsrc_take_over(struct moq_node *n, struct bcast *bc, struct bsrc **bp)
{
	struct bsrc *b = *bp;

	*bp = b->next;
	PLINK_UNLINK(b, snext, spprev);
	b->pub->nbcasts--;
	n->st.bcast_failovers++;
	bcast_route(n, bc, b->pub, b->hops, b->nhops, &b->cost,
	            !same_publisher(bc->hops, bc->nhops, b->hops, b->nhops));
	free(b);
}

void bcast_withdraw(struct moq_node *n, struct bcast *bc, struct moq_session *s, bool abrupt)
{
	struct bsrc *b;
	struct bsrc **bp;

	if (bc->pub != s) {
		bp = bsrc_find(bc, s);
		if (bp) {
			b = *bp;
			*bp = b->next;
			bsrc_free(b);
		}
		return;
	}
	if (bc->backups) {
		bsrc_take_over(n, bc, bsrc_best(bc));
		return;
	}
	if (abrupt) {
		bcast_set_pub(bc, NULL);
		bcast_linger(n, bc);
		return;
	}
	bcast_end(n, bc);
}

/*
 * Session @s sent GOAWAY (lite-06 7.18: "A relay that receives a GOAWAY
 * SHOULD treat the announcements that arrived on that session as the most
 * expensive routes available, so a subscription it can serve from another
 * session moves at the next Group boundary rather than when the draining
 * session finally closes. The routes stay usable"). Every route of @s is
 * priced at the ceiling and ranks below any other (route_rank); a live one
 * with a standby of the same original publisher on another session moves
 * there at once (the upstream subscriptions splice over at its next group,
 * nothing announced but the new price), keeping @s as a standby; one without
 * stays on @s until it ends, announced at the ceiling (lite-06 requests hear
 * an ANNOUNCE_UPDATE) so the drain propagates downstream. Another original
 * publisher is not spliced in (routes of different first hops promise
 * nothing about each other's content, 5.1.1.1): it takes over when @s ends,
 * as before.
 */
void bcast_session_drain(struct moq_node *n, struct moq_session *s)
{
	struct bcast *bc, *next;

	for (struct bsrc *b = s->backup_routes; b; b = b->snext)
		b->cost = rcost_drain;
	for (bc = s->live_routes; bc; bc = next) {
		struct bsrc *b = bc->backups ? *bsrc_best(bc) : NULL;

		next = bc->pnext;
		bc->cost = rcost_drain;
		/* @s stays as a standby (on the list's head: @b is found again) */
		if (b && !b->cost.drain && same_publisher(bc->hops, bc->nhops, b->hops, b->nhops) &&
		    bsrc_push(bc, s, bc->hops, bc->nhops, &rcost_drain)) {
			n->st.bcast_drained++;
			bsrc_take_over(n, bc, bsrc_find(bc, b->pub));
			continue;
		}
		ann_reroute(n, bc, bc->pub, bc->hops, bc->nhops, false); /* at the ceiling */
	}
}

/* Session @s is going away: its routes fail over, linger or are dropped.
 * Its own lists (issue 22: was a walk of the whole origin table per
 * session close); each withdraw takes the route off them. */
void bcast_session_gone(struct moq_node *n, struct moq_session *s)
{
	while (s->backup_routes)
		bcast_withdraw(n, s->backup_routes->bc, s, true);
	while (s->live_routes)
		bcast_withdraw(n, s->live_routes, s, true);
}

/* moq.h: the origin table as the HTTP listener's /announced lists it. */
int moq_node_broadcasts(struct moq_node *n, const char *prefix, size_t len,
                        void (*cb)(void *user, const char *path, size_t plen, size_t suffix_off),
                        void *user)
{
	size_t plen, off;
	char *p = path_dup(prefix ? prefix : "", len, &plen);
	int count = 0;

	if (p == NULL)
		return MOQ_ERR_INVAL;
	if (plen) { /* the prefix index: only what lies under it */
		for (struct plink *l = bcast_under(n, p, plen); l; l = l->next) {
			if (l->bc->linger_until != 0 ||
			    !moq_path_has_prefix(p, plen, l->bc->path, l->bc->len, &off))
				continue;
			cb(user, l->bc->path, l->bc->len, off);
			count++;
		}
		free(p);
		return count;
	}
	for (struct bcast *bc = n->bcasts; bc; bc = bc->next) {
		if (bc->linger_until != 0 || !moq_path_has_prefix(p, plen, bc->path, bc->len, &off))
			continue;
		cb(user, bc->path, bc->len, off);
		count++;
	}
	free(p);
	return count;
}

bool moq_node_broadcast_live(struct moq_node *n, const char *path, size_t len)
{
	size_t plen;
	char *p = path_dup(path, len, &plen);
	struct bcast *bc = p ? bcast_find(n, p, plen) : NULL;

	free(p);
	return bc != NULL && bc->linger_until == 0;
}

int moq_node_track_hold(struct moq_node *n, const char *path, size_t len, const char *track,
                        size_t tlen)
{
	size_t plen;
	char *p = path_dup(path, len, &plen);
	struct bcast *bc = p && n->cfg.cache ? bcast_find(n, p, plen) : NULL;
	struct upstream *up;
	int limited = 0, rc;

	if (!p) {
		rc = MOQ_ERR_NOMEM;
	} else if (!bc || bc->linger_until != 0) {
		rc = MOQ_ERR_NOTFOUND;
	} else if (bc->local) {
		rc = 0; /* moq_node_publish: read straight from the cache */
	} else if (!(up = up_get(n, p, plen, track, tlen, &limited))) {
		rc = limited ? MOQ_ERR_LIMIT : MOQ_ERR_NOMEM;
	} else {
		/* as a MoQ subscriber joining (subscribe.c, on_subscribe) */
		up->nlocal++;
		up_changed(up);
		rc = 1;
	}
	free(p);
	return rc;
}

void moq_node_track_release(struct moq_node *n, const char *path, size_t len, const char *track,
                            size_t tlen)
{
	size_t plen;
	char *p = path_dup(path, len, &plen);
	struct upstream *up = p ? up_find(n, p, plen, track, tlen) : NULL;

	if (up && up->nlocal) {
		up->nlocal--;
		up_changed(up);
	}
	free(p);
}
