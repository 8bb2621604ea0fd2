/* SPDX-License-Identifier: MIT */
/* The one path normaliser (moq_path.h). */
#include "moq_path.h"

#include <string.h>

long moq_path_normalise(char *dst, size_t cap, const char *src, size_t len, size_t max_segs)
{
	size_t o = 0, segs = 0, i = 0;

	while (i < len) {
		size_t s;

		while (i < len && src[i] == '/')
			i++;
		if (i == len)
			break;
		s = i;
		while (i < len && src[i] != '/')
			i++;
		if (++segs > max_segs)
			return MOQ_PATH_NORM_SEGMENTS;
		if (o + (o ? 1 : 0) + (i - s) > cap)
			return MOQ_PATH_NORM_TOO_LARGE;
		if (o)
			dst[o++] = '/';
		memcpy(dst + o, src + s, i - s);
		o += i - s;
	}
	return (long)o;
}
