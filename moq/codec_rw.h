/* SPDX-License-Identifier: MIT */
/*
 * codec_rw.h (moq/ internal): the bounded writer and reader that every moq
 * codec builds its messages with (codec.c: lite-03..05, lite06_codec.c):
 * one copy of the varint, string and path primitives and their error rules.
 * A writer with p == NULL only counts.
 */
#ifndef MOQ_CODEC_RW_H
#define MOQ_CODEC_RW_H

#include <stdint.h>
#include <string.h>

#include "codec.h"
#include "moq_err.h"

/* ---- a bounded writer: with buf == NULL it only counts ---- */

struct wr {
	uint8_t *p;
	size_t cap, len;
	int err;
};

static inline void w_bytes(struct wr *w, const void *b, size_t n)
{
	if (w->err)
		return;
	if (w->p) {
		if (w->cap - w->len < n) {
			w->err = MOQ_ERR_TOO_LARGE;
			return;
		}
		if (n)
			memcpy(w->p + w->len, b, n);
	}
	w->len += n;
}

static inline void w_vi(struct wr *w, uint64_t v)
{
	uint8_t tmp[8];
	int n = moq_varint_put(tmp, sizeof(tmp), v);

	if (n < 0) {
		if (!w->err)
			w->err = MOQ_ERR_INVAL;
		return;
	}
	w_bytes(w, tmp, (size_t)n);
}

static inline void w_u8(struct wr *w, uint8_t v)
{
	w_bytes(w, &v, 1);
}

static inline void w_str(struct wr *w, struct moq_str s)
{
	w_vi(w, s.len);
	w_bytes(w, s.p, s.len);
}

static inline void w_path(struct wr *w, struct moq_str s)
{
	/* The encoder writes paths as given; they must be normalised already. */
	if (moq_path_segments(s.p, s.len) > MOQ_PATH_MAX_SEGMENTS && !w->err)
		w->err = MOQ_ERR_INVAL;
	w_str(w, s);
}

/* ---- a bounded reader over one message body ---- */

struct rd {
	const uint8_t *p;
	size_t len, off;
	int err;
};

static inline uint64_t r_vi(struct rd *r)
{
	uint64_t v = 0;
	int n;

	if (r->err)
		return 0;
	n = moq_varint_get(r->p + r->off, r->len - r->off, &v);
	if (n < 0) {
		r->err = MOQ_ERR_DECODE; /* short inside a length-delimited body */
		return 0;
	}
	r->off += (size_t)n;
	return v;
}

static inline uint8_t r_u8(struct rd *r)
{
	if (r->err)
		return 0;
	if (r->off >= r->len) {
		r->err = MOQ_ERR_DECODE;
		return 0;
	}
	return r->p[r->off++];
}

static inline struct moq_str r_str(struct rd *r)
{
	struct moq_str s = {"", 0};
	uint64_t n = r_vi(r);

	if (r->err)
		return s;
	if (n > r->len - r->off) {
		r->err = MOQ_ERR_DECODE;
		return s;
	}
	s.p = (const char *)r->p + r->off;
	s.len = (size_t)n;
	r->off += (size_t)n;
	return s;
}

static inline struct moq_str r_path(struct rd *r)
{
	struct moq_str s = r_str(r);

	/* PROTOCOL.md, path: at most 32 segments once normalised. */
	if (moq_path_segments(s.p, s.len) > MOQ_PATH_MAX_SEGMENTS && !r->err)
		r->err = MOQ_ERR_DECODE;
	return s;
}

static inline void w_param_vi(struct wr *w, uint64_t id, uint64_t v)
{
	w_vi(w, id);
	w_vi(w, moq_varint_len(v));
	w_vi(w, v);
}

#endif /* MOQ_CODEC_RW_H */
