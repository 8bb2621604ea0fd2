/* SPDX-License-Identifier: MIT */
/*
 * moq_path.h: the one path normaliser of the tree (issue 22): moq/'s routing
 * (moq_path_norm, codec.c) and auth/'s grants (moq-token's path.rs rules)
 * both call it, so a grant names exactly the broadcasts routing finds.
 */
#ifndef MOQ_COMMON_PATH_H
#define MOQ_COMMON_PATH_H

#include <stddef.h>

#define MOQ_PATH_NORM_TOO_LARGE (-1) /* @cap too small */
#define MOQ_PATH_NORM_SEGMENTS (-2)  /* more than @max_segs segments */

/*
 * moq_path_normalise: @src (@len bytes) with leading and trailing '/' trimmed
 * and runs of '/' collapsed (empty segments dropped) into @dst (@cap bytes;
 * not overlapping @src; no NUL written). Returns the normalised length, or
 * one of the codes above (the segment count is checked first).
 */
long moq_path_normalise(char *dst, size_t cap, const char *src, size_t len, size_t max_segs);

#endif /* MOQ_COMMON_PATH_H */
