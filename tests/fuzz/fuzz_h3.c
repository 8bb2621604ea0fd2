/* SPDX-License-Identifier: MIT */
/*
 * fuzz_h3.c: libFuzzer target for h3/'s parsers of peer input: the first
 * byte picks the parser, the rest is its input (a CONNECT field section,
 * a response, SETTINGS, a capsule stream, a wt-available-protocols list,
 * frame headers and datagram / stream prefixes, the control stream reader
 * fed in chunks, :authority and Origin checks). Each must return an error or a bounded result, never
 * read past its input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data + 1;
	size_t len;

	if (size < 1)
		return 0;
	len = size - 1;
	switch (data[0] % 8) {
	case 0: {
		struct moq_h3_request r;
		if (moq_h3_connect_parse(0, p, len, &r) == 0) {
			if (r.status == 200 && (!r.path || r.path[0] != '/' || !r.v))
				abort();
			if (r.status == 200 && !r.negotiated && r.v != MOQ_H3_DEFAULT_VERSION)
				abort();
			if (r.status != 200 && (!r.why || r.v))
				abort();
			moq_h3_request_free(&r);
		}
		break;
	}
	case 1: {
		int status;
		enum moq_version v;
		if (moq_h3_response_parse(0, p, len, &status, &v) == 0 &&
		    (status < 100 || status > 999))
			abort();
		break;
	}
	case 2: {
		struct moq_h3_settings s;
		(void)moq_h3_settings_decode(p, len, &s);
		break;
	}
	case 3: {
		size_t off = 0;
		for (;;) {
			uint64_t type;
			const uint8_t *val;
			size_t vlen;
			int n = moq_h3_capsule_get(p + off, len - off, &type, &val, &vlen);
			if (n <= 0)
				break;
			if (val < p + off || val + vlen > p + len)
				abort();
			off += (size_t)n;
		}
		break;
	}
	case 4: {
		int v = moq_h3_protocols_pick((const char *)p, len);
		if (v != 0 && v != MOQ_ERR_DECODE && v != MOQ_LITE_03 && v != MOQ_LITE_04 &&
		    v != MOQ_LITE_05 && v != MOQ_LITE_06)
			abort();
		break;
	}
	case 6: {
		/* p[0]: the peer is a server (bit 0); p[1]: the chunk size;
		 * the rest: the control stream after its type */
		struct moq_h3_control c;
		size_t chunk, off = 2, settings = 0;
		uint64_t err = 0, err2 = 0;

		if (len < 2)
			break;
		moq_h3_control_init(&c, p[0] & 1);
		chunk = (size_t)p[1] + 1;
		while (off < len) {
			size_t l = len - off < chunk ? len - off : chunk;
			int rc = moq_h3_control_feed(&c, p + off, l, &err);

			off += l;
			if (rc == MOQ_ERR_NOMEM)
				break;
			if (rc < 0) {
				/* it stays failed with the same code */
				if (rc != MOQ_ERR_PROTO || !err || c.buf ||
				    moq_h3_control_feed(&c, p, 1, &err2) != MOQ_ERR_PROTO ||
				    err2 != err)
					abort();
				break;
			}
			if (rc & MOQ_H3_CTL_SETTINGS)
				settings++;
			if (settings > 1 || (rc && !c.got_settings) || c.blen > c.bcap ||
			    (c.buf && !c.in_frame) || c.bcap > MOQ_H3_MAX_FRAME)
				abort();
		}
		moq_h3_control_free(&c);
		break;
	}
	case 7: {
		/* :authority syntax; Origin against a list: the input up to
		 * the first NUL is the list, the rest the origin */
		const uint8_t *z = memchr(p, 0, len);
		char list[512];
		size_t ll = z ? (size_t)(z - p) : 0;

		(void)moq_h3_authority_ok((const char *)p, len);
		if (z && ll < sizeof(list)) {
			const char *o = (const char *)z + 1;
			size_t ol = len - ll - 1;
			memcpy(list, p, ll);
			list[ll] = '\0';
			/* no list / an empty one allows all; so does no Origin */
			if ((ll == 0 && !moq_h3_origin_allowed(list, o, ol)) ||
			    !moq_h3_origin_allowed(list, NULL, 0) ||
			    !moq_h3_origin_allowed(NULL, o, ol))
				abort();
		}
		break;
	}
	default: {
		uint64_t a, b;
		int h = moq_h3_frame_head(p, len, &a, &b);
		if (h > (int)len)
			abort();
		h = moq_h3_datagram_parse(p, len, &a);
		if (h > 0 && (a % 4 != 0 || (size_t)h > len))
			abort();
		if (len >= 8) {
			uint64_t code;
			memcpy(&code, p, 8);
			code &= 0xffffffffull;
			if (moq_h3_code_from_h3(moq_h3_code_to_h3(code)) != code)
				abort();
		}
		break;
	}
	}
	return 0;
}
