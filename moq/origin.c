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

struct bcast *bcast_find(struct moq_node *n, const char *p, size_t len)
{
	for (struct bcast *b = n->bcasts; b; b = b->next)
		if (b->len == len && memcmp(b->path, p, len) == 0)
			return b;
	return NULL;
}

struct bcast *bcast_add(struct moq_node *n, const char *p, size_t len)
{
	struct bcast *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->path = memdup0(p, len);
	if (!b->path) {
		free(b);
		return NULL;
	}
	b->len = len;
	b->next = n->bcasts;
	n->bcasts = b;
	n->st.broadcasts++;
	return b;
}

void bcast_unlink(struct moq_node *n, struct bcast *bc)
{
	for (struct bcast **pp = &n->bcasts; *pp; pp = &(*pp)->next)
		if (*pp == bc) {
			*pp = bc->next;
			break;
		}
	n->st.broadcasts--;
	free(bc->path);
	free(bc);
}

/* End every upstream of @bc's path: its subscribers get END. */
void bcast_end(struct moq_node *n, struct bcast *bc)
{
	if (!bc->owner)
		hub_announce(n, bc, 0);
	ann_notify(n, bc, 0);
	tinfo_drop_path(n, bc->path, bc->len);
	for (struct upstream *up = n->ups; up; up = up->next)
		if (up->plen == bc->len && memcmp(up->path, bc->path, bc->len) == 0) {
			up->ended = 1;
			up->end_seq = UINT64_MAX;
			up_touch(up);
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
