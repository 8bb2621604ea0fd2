/* SPDX-License-Identifier: MIT */
// pattern.h: path patterns as moq-relay's grants name them (github
// moq-dev/moq, rs/moq-pattern; doc/bin/relay/auth.md, Patterns): `foo` is
// one broadcast, `foo/**` is foo and everything beneath it, `**` is
// everything, `live/*` every broadcast one segment under live, `*.hang` a
// segment ending in .hang.
//
// Grammar (moq-pattern, tests/pattern.json "parse"): segments separated by
// '/', none empty; a segment is a literal (no '*'), `*` (exactly one
// segment), `**` (zero or more segments; at most one per pattern) or a
// partial `pre*suf` (one segment with that prefix and suffix). Any other use
// of '*' is invalid. At most MOQ_PATTERN_MAX_SEGMENTS segments. Matching is
// on whole segments (`foo/**` covers foo/bar, never foobar).
//
// Patterns are read in place: a struct moq_pattern points into the text it
// was parsed from, which must outlive it. No allocation except where noted.
#ifndef MOQ_AUTH_PATTERN_H
#define MOQ_AUTH_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* moq-pattern, pattern.rs: MAX_SEGMENTS (tests/pattern.json: 32 parse, 33
 * is too-many-segments). */
#define MOQ_PATTERN_MAX_SEGMENTS 32u

enum moq_pattern_error {
	MOQ_PATTERN_OK = 0,
	MOQ_PATTERN_EMPTY_SEGMENT = -1,      /* "/a", "a/", "a//b", "/" */
	MOQ_PATTERN_MULTIPLE_GLOBSTARS = -2, // "**/**", "a/**/b/**"
	MOQ_PATTERN_INVALID_SEGMENT = -3,    /* "***", "a*b*c" */
	MOQ_PATTERN_TOO_MANY_SEGMENTS = -4,
	MOQ_PATTERN_NOMEM = -5,
};

enum moq_pattern_kind {
	MOQ_SEG_LITERAL = 0,
	MOQ_SEG_WILDCARD, /* * */
	MOQ_SEG_GLOBSTAR, /* ** */
	MOQ_SEG_PARTIAL,  /* pre*suf */
};

struct moq_pattern_seg {
	uint8_t kind;      /* enum moq_pattern_kind */
	uint32_t off, len; /* the segment's text in moq_pattern.text */
	uint32_t star;     /* partial: the offset of '*' within the segment */
};

struct moq_pattern {
	const char *text; /* borrowed */
	uint32_t n;       /* segments; 0 = the pattern "" (matches the path "" only) */
	int32_t glob;     /* index of the ** segment, or -1 */
	struct moq_pattern_seg seg[MOQ_PATTERN_MAX_SEGMENTS];
};

/* moq_pattern_error_str: "empty-segment", ... (moq-pattern's names). */
const char *moq_pattern_error_str(int e);

/*
 * moq_pattern_parse: parse @len bytes of @text (kept, borrowed) into @p.
 * Returns MOQ_PATTERN_OK or an enum moq_pattern_error.
 */
int moq_pattern_parse(struct moq_pattern *p, const char *text, size_t len);

/* moq_pattern_has_wildcard: whether @p has a *, ** or partial segment. */
bool moq_pattern_has_wildcard(const struct moq_pattern *p);

// moq_pattern_head: the length of @p's literal head, the literal segments
// before the first wildcard ("a/b/*/c" -> 3, "a/b"; "**/a" -> 0). An
// announce interest asks for the head; what comes back is filtered by
// moq_pattern_match (auth.md: announcements travel by literal head).
size_t moq_pattern_head(const struct moq_pattern *p);

// moq_pattern_is_subtree: whether @p is "<literal head>/**" or "**" (what a
// put/get prefix of the older dialect means).
bool moq_pattern_is_subtree(const struct moq_pattern *p);

/*
 * moq_pattern_match: whether path @path (@len bytes; empty segments are
 * skipped, so "/a/" is "a") is in @p. Paths may have any number of segments.
 */
bool moq_pattern_match(const struct moq_pattern *p, const char *path, size_t len);

/* moq_pattern_overlaps: whether some path is in both @a and @b. */
bool moq_pattern_overlaps(const struct moq_pattern *a, const struct moq_pattern *b);

/* moq_pattern_contains: whether every path in @inner is in @outer. */
bool moq_pattern_contains(const struct moq_pattern *outer, const struct moq_pattern *inner);

/*
 * moq_pattern_overlaps_subtree: whether some path at or under normalised
 * path @prefix (@len bytes, any number of segments) is in @p.
 */
bool moq_pattern_overlaps_subtree(const struct moq_pattern *p, const char *prefix, size_t len);

// moq_pattern_rebase: the patterns relative to normalised path @root (@len
// bytes) that name the paths r with root/r in @p (moq-pattern, "rebase":
// "**/a" at root "a" is "" and "**/a"). Each result is a suffix of @p's
// text: @fn is called once per result with its offset in p->text (the
// text's length for the pattern ""), deduplicated. Returns the number of
// results.
unsigned moq_pattern_rebase(const struct moq_pattern *p, const char *root, size_t len,
                            void (*fn)(void *ctx, size_t off), void *ctx);

#endif /* MOQ_AUTH_PATTERN_H */
