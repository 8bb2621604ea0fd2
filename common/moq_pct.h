/* SPDX-License-Identifier: MIT */
/*
 * moq_pct.h: the one percent / form decoder of the tree (issue 22): what
 * web/ reads a request path and query with, and what auth/ reads a SETUP
 * Path's `jwt` with, so both decode alike.
 */
#ifndef MOQ_COMMON_PCT_H
#define MOQ_COMMON_PCT_H

#include <stddef.h>

/*
 * moq_pct_decode: undo %XX of @n bytes of @s in place (RFC 3986, 2.1); with
 * @form, '+' is a space and a bad escape stays as it is
 * (application/x-www-form-urlencoded, as the url crate reads a query),
 * without, a bad escape is an error (a path). Returns the new length or -1.
 */
int moq_pct_decode(char *s, size_t n, int form);

#endif /* MOQ_COMMON_PCT_H */
