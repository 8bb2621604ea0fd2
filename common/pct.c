/* SPDX-License-Identifier: MIT */
/* pct.c: moq_pct.h. */
#include "moq_pct.h"

static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

int moq_pct_decode(char *s, size_t n, int form)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int hi = -1, lo = -1;

		if (s[i] == '%' && i + 2 < n) {
			hi = hexval(s[i + 1]);
			lo = hexval(s[i + 2]);
		}
		if (hi >= 0 && lo >= 0) {
			s[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else if (s[i] == '%' && !form) {
			return -1;
		} else {
			s[o++] = form && s[i] == '+' ? ' ' : s[i];
		}
	}
	return (int)o;
}
