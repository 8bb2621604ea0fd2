/* SPDX-License-Identifier: MIT */
/*
 * pattern.c: moq-relay's path patterns (pattern.h). The reference is github
 * moq-dev/moq, rs/moq-pattern (src/pattern.rs and the golden vectors of
 * tests/pattern.json, which tests/test_auth.c runs case by case).
 *
 * A pattern has at most one globstar, so matching a path is linear (the
 * head before it, the tail after it from the end) and the pattern-pattern
 * relations recurse with at most two branches per globstar.
 */
#include "pattern.h"

#include <stdlib.h>
#include <string.h>

const char *moq_pattern_error_str(int e)
{
	switch (e) {
	case MOQ_PATTERN_OK:
		return "ok";
	case MOQ_PATTERN_EMPTY_SEGMENT:
		return "empty-segment";
	case MOQ_PATTERN_MULTIPLE_GLOBSTARS:
		return "multiple-globstars";
	case MOQ_PATTERN_INVALID_SEGMENT:
		return "invalid-segment";
	case MOQ_PATTERN_TOO_MANY_SEGMENTS:
		return "too-many-segments";
	case MOQ_PATTERN_NOMEM:
		return "out of memory";
	}
	return "unknown";
}

/* A sequence of segments over a text: a parsed pattern, or a path split
 * into literals (any number of them, on the heap). */
struct seq {
	const char *t;
	uint32_t n;
	const struct moq_pattern_seg *s;
};

static int seg_classify(const char *t, uint32_t off, uint32_t len, struct moq_pattern_seg *sg)
{
	uint32_t stars = 0, at = 0;

	for (uint32_t i = 0; i < len; i++)
		if (t[off + i] == '*') {
			if (!stars)
				at = i;
			stars++;
		}
	sg->off = off;
	sg->len = len;
	sg->star = at;
	if (stars == 0)
		sg->kind = MOQ_SEG_LITERAL;
	else if (stars == 1)
		sg->kind = len == 1 ? MOQ_SEG_WILDCARD : MOQ_SEG_PARTIAL;
	else if (stars == 2 && len == 2)
		sg->kind = MOQ_SEG_GLOBSTAR;
	else
		return MOQ_PATTERN_INVALID_SEGMENT;
	return 0;
}

int moq_pattern_parse(struct moq_pattern *p, const char *text, size_t len)
{
	size_t i = 0;

	p->text = text;
	p->n = 0;
	p->glob = -1;
	if (len == 0)
		return 0;
	for (;;) {
		size_t s = i;
		int rc;
		while (i < len && text[i] != '/')
			i++;
		if (i == s)
			return MOQ_PATTERN_EMPTY_SEGMENT;
		if (p->n == MOQ_PATTERN_MAX_SEGMENTS)
			return MOQ_PATTERN_TOO_MANY_SEGMENTS;
		rc = seg_classify(text, (uint32_t)s, (uint32_t)(i - s), &p->seg[p->n]);
		if (rc)
			return rc;
		if (p->seg[p->n].kind == MOQ_SEG_GLOBSTAR) {
			if (p->glob >= 0)
				return MOQ_PATTERN_MULTIPLE_GLOBSTARS;
			p->glob = (int32_t)p->n;
		}
		p->n++;
		if (i == len)
			return 0;
		i++; /* the '/'; a trailing one leaves an empty segment */
		if (i == len)
			return MOQ_PATTERN_EMPTY_SEGMENT;
	}
}

bool moq_pattern_has_wildcard(const struct moq_pattern *p)
{
	for (uint32_t i = 0; i < p->n; i++)
		if (p->seg[i].kind != MOQ_SEG_LITERAL)
			return true;
	return false;
}

size_t moq_pattern_head(const struct moq_pattern *p)
{
	size_t end = 0;

	for (uint32_t i = 0; i < p->n && p->seg[i].kind == MOQ_SEG_LITERAL; i++)
		end = p->seg[i].off + p->seg[i].len;
	return end;
}

bool moq_pattern_is_subtree(const struct moq_pattern *p)
{
	if (!p->n || p->glob != (int32_t)p->n - 1)
		return false;
	for (uint32_t i = 0; i + 1 < p->n; i++)
		if (p->seg[i].kind != MOQ_SEG_LITERAL)
			return false;
	return true;
}

/* -------------------------------------------------------------- segments */

/* A non-globstar pattern segment @s (in @t) against literal @l (@ll bytes). */
static bool seg_lit(const char *t, const struct moq_pattern_seg *s, const char *l, size_t ll)
{
	switch (s->kind) {
	case MOQ_SEG_LITERAL:
		return s->len == ll && memcmp(t + s->off, l, ll) == 0;
	case MOQ_SEG_WILDCARD:
		return ll > 0;
	case MOQ_SEG_PARTIAL: {
		size_t pre = s->star, suf = s->len - s->star - 1;
		return ll >= pre + suf && memcmp(t + s->off, l, pre) == 0 &&
		       memcmp(t + s->off + s->star + 1, l + ll - suf, suf) == 0;
	}
	}
	return false;
}

/* Whether @x (@xl) ends with @y (@yl). */
static bool ends_with(const char *x, size_t xl, const char *y, size_t yl)
{
	return xl >= yl && memcmp(x + xl - yl, y, yl) == 0;
}

static bool seg_overlap(const char *at, const struct moq_pattern_seg *a, const char *bt,
                        const struct moq_pattern_seg *b)
{
	if (a->kind == MOQ_SEG_LITERAL)
		return seg_lit(bt, b, at + a->off, a->len);
	if (b->kind == MOQ_SEG_LITERAL)
		return seg_lit(at, a, bt + b->off, b->len);
	if (a->kind == MOQ_SEG_WILDCARD || b->kind == MOQ_SEG_WILDCARD)
		return true;
	/* two partials: the longer prefix then the longer suffix is in both
	 * when the prefixes agree and the suffixes agree */
	{
		const char *ap = at + a->off, *bp = bt + b->off;
		size_t apl = a->star, bpl = b->star;
		size_t asl = a->len - a->star - 1, bsl = b->len - b->star - 1;
		size_t m = apl < bpl ? apl : bpl;
		if (memcmp(ap, bp, m) != 0)
			return false;
		return asl < bsl ? ends_with(bp + b->star + 1, bsl, ap + a->star + 1, asl)
		                 : ends_with(ap + a->star + 1, asl, bp + b->star + 1, bsl);
	}
}

/* Whether every segment @i matches is matched by @o (neither a globstar). */
static bool seg_contains(const char *ot, const struct moq_pattern_seg *o, const char *it,
                         const struct moq_pattern_seg *i)
{
	switch (o->kind) {
	case MOQ_SEG_LITERAL:
		return i->kind == MOQ_SEG_LITERAL && i->len == o->len &&
		       memcmp(ot + o->off, it + i->off, o->len) == 0;
	case MOQ_SEG_WILDCARD:
		return true;
	case MOQ_SEG_PARTIAL:
		if (i->kind == MOQ_SEG_LITERAL)
			return seg_lit(ot, o, it + i->off, i->len);
		if (i->kind == MOQ_SEG_PARTIAL) {
			size_t opl = o->star, osl = o->len - o->star - 1;
			size_t ipl = i->star, isl = i->len - i->star - 1;
			return ipl >= opl && memcmp(it + i->off, ot + o->off, opl) == 0 &&
			       ends_with(it + i->off + i->star + 1, isl, ot + o->off + o->star + 1,
			                 osl);
		}
		return false;
	}
	return false;
}

/* ------------------------------------------------------------ sequences */

static bool is_glob(const struct seq *q, uint32_t i)
{
	return i < q->n && q->s[i].kind == MOQ_SEG_GLOBSTAR;
}

static bool overlap(const struct seq *a, uint32_t i, const struct seq *b, uint32_t j)
{
	for (;;) {
		if (i == a->n && j == b->n)
			return true;
		if (is_glob(a, i))
			return overlap(a, i + 1, b, j) || (j < b->n && overlap(a, i, b, j + 1));
		if (is_glob(b, j))
			return overlap(a, i, b, j + 1) || (i < a->n && overlap(a, i + 1, b, j));
		if (i == a->n || j == b->n || !seg_overlap(a->t, &a->s[i], b->t, &b->s[j]))
			return false;
		i++;
		j++;
	}
}

static bool contains(const struct seq *o, uint32_t i, const struct seq *in, uint32_t j)
{
	for (;;) {
		if (i == o->n && j == in->n)
			return true;
		if (is_glob(o, i))
			return contains(o, i + 1, in, j) ||
			       (j < in->n && contains(o, i, in, j + 1));
		if (i == o->n || j == in->n || is_glob(in, j) ||
		    !seg_contains(o->t, &o->s[i], in->t, &in->s[j]))
			return false;
		i++;
		j++;
	}
}

static struct seq seq_of(const struct moq_pattern *p)
{
	return (struct seq){p->text, p->n, p->seg};
}

bool moq_pattern_overlaps(const struct moq_pattern *a, const struct moq_pattern *b)
{
	struct seq x = seq_of(a), y = seq_of(b);

	return overlap(&x, 0, &y, 0);
}

bool moq_pattern_contains(const struct moq_pattern *outer, const struct moq_pattern *inner)
{
	struct seq x = seq_of(outer), y = seq_of(inner);

	return contains(&x, 0, &y, 0);
}

/* The next non-empty segment of @s (@len) from *@i: its start and length,
 * or false at the end. */
static bool next_seg(const char *s, size_t len, size_t *i, size_t *off, size_t *sl)
{
	while (*i < len && s[*i] == '/')
		(*i)++;
	if (*i == len)
		return false;
	*off = *i;
	while (*i < len && s[*i] != '/')
		(*i)++;
	*sl = *i - *off;
	return true;
}

bool moq_pattern_match(const struct moq_pattern *p, const char *path, size_t len)
{
	size_t i = 0, off, sl, total = 0, head = p->glob < 0 ? p->n : (size_t)p->glob, tail;
	uint32_t k;

	/* the segments before the globstar (or all), in order */
	for (k = 0; k < head; k++)
		if (!next_seg(path, len, &i, &off, &sl) ||
		    !seg_lit(p->text, &p->seg[k], path + off, sl))
			return false;
	if (p->glob < 0)
		return !next_seg(path, len, &i, &off, &sl);
	/* the globstar takes all but the last `tail` segments */
	tail = p->n - head - 1;
	{
		size_t j = i;
		while (next_seg(path, len, &j, &off, &sl))
			total++;
	}
	if (total < tail)
		return false;
	for (size_t skip = total - tail; skip; skip--)
		next_seg(path, len, &i, &off, &sl);
	for (k = (uint32_t)head + 1; k < p->n; k++)
		if (!next_seg(path, len, &i, &off, &sl) ||
		    !seg_lit(p->text, &p->seg[k], path + off, sl))
			return false;
	return true;
}

/* @path split into literal segments, then (@glob) a globstar; NULL on
 * allocation failure. The caller frees the segments. */
static struct moq_pattern_seg *split(const char *path, size_t len, bool glob, uint32_t *n)
{
	size_t i = 0, off, sl, cnt = 0;
	struct moq_pattern_seg *s;

	{
		size_t j = 0;
		while (next_seg(path, len, &j, &off, &sl))
			cnt++;
	}
	s = calloc(cnt + 1, sizeof(*s));
	if (!s)
		return NULL;
	*n = 0;
	while (next_seg(path, len, &i, &off, &sl))
		s[(*n)++] =
		        (struct moq_pattern_seg){MOQ_SEG_LITERAL, (uint32_t)off, (uint32_t)sl, 0};
	if (glob)
		s[(*n)++] = (struct moq_pattern_seg){MOQ_SEG_GLOBSTAR, 0, 0, 0};
	return s;
}

bool moq_pattern_overlaps_subtree(const struct moq_pattern *p, const char *prefix, size_t len)
{
	struct seq x = seq_of(p), y = {prefix, 0, NULL};
	struct moq_pattern_seg *s = split(prefix, len, true, &y.n);
	bool ok;

	if (!s)
		return false; /* fail closed */
	y.s = s;
	ok = overlap(&x, 0, &y, 0);
	free(s);
	return ok;
}

/* rebase: the suffixes of @p from segment @i that name what lies beyond the
 * root's segments from @k; bit i of *@found set per result (i == n: ""). */
static void rebase(const struct moq_pattern *p, uint32_t i, const struct seq *r, uint32_t k,
                   uint64_t *found)
{
	for (;;) {
		if (k == r->n) {
			*found |= 1ull << i;
			return;
		}
		if (i == p->n)
			return;
		if (p->seg[i].kind == MOQ_SEG_GLOBSTAR) {
			/* the globstar takes this root segment and stays, or
			 * takes nothing */
			rebase(p, i, r, k + 1, found);
			i++;
			continue;
		}
		if (!seg_lit(p->text, &p->seg[i], r->t + r->s[k].off, r->s[k].len))
			return;
		i++;
		k++;
	}
}

unsigned moq_pattern_rebase(const struct moq_pattern *p, const char *root, size_t len,
                            void (*fn)(void *ctx, size_t off), void *ctx)
{
	struct seq r = {root, 0, NULL};
	struct moq_pattern_seg *s = split(root, len, false, &r.n);
	uint64_t found = 0;
	unsigned cnt = 0;
	size_t tl;

	if (!s)
		return 0;
	r.s = s;
	rebase(p, 0, &r, 0, &found);
	free(s);
	tl = p->n ? p->seg[p->n - 1].off + p->seg[p->n - 1].len : 0;
	for (uint32_t i = 0; i <= p->n; i++)
		if (found & (1ull << i)) {
			fn(ctx, i < p->n ? p->seg[i].off : tl);
			cnt++;
		}
	return cnt;
}
