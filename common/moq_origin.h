/* SPDX-License-Identifier: MIT */
/*
 * moq_origin.h: the operator's `--allowed-origins` check, shared by the
 * WebTransport CONNECT (h3/, moq_h3_origin_allowed) and the WebSocket
 * upgrade (web/) without either depending on the other.
 */
#ifndef MOQ_ORIGIN_H
#define MOQ_ORIGIN_H

#include <stddef.h>
#include <string.h>

static inline int moq_origin_ieq(const char *a, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char x = a[i], y = b[i];

		if (x >= 'A' && x <= 'Z')
			x = (char)(x - 'A' + 'a');
		if (y >= 'A' && y <= 'Z')
			y = (char)(y - 'A' + 'a');
		if (x != y)
			return 0;
	}
	return 1;
}

/*
 * moq_origin_allowed: @list is a comma-separated list of serialised origins
 * (RFC 6454, 6.2: scheme "://" host [":" port], a trailing '/' tolerated),
 * compared with @origin (@len bytes) without regard to ASCII case; NULL, ""
 * or an entry "*" allow every origin. @origin NULL (the request had no
 * Origin: not from a browser page) is allowed; an empty one matches no
 * entry. Returns 1 (allowed) or 0.
 */
static inline int moq_origin_allowed(const char *list, const char *origin, size_t len)
{
	const char *p = list;

	if (!list || !origin)
		return 1;
	p = list + strspn(list, " \t,");
	if (*p == '\0')
		return 1; /* an empty list: no check */
	while (*p) {
		size_t n = strcspn(p, ","), e = n;

		while (e > 0 && (p[e - 1] == ' ' || p[e - 1] == '\t'))
			e--;
		if (e == 1 && p[0] == '*')
			return 1;
		if (e > 1 && p[e - 1] == '/')
			e--; /* "https://example.com/": the same origin */
		if (e == len && e > 0 && moq_origin_ieq(p, origin, len))
			return 1;
		p += n;
		p += strspn(p, " \t,");
	}
	return 0;
}

#endif
