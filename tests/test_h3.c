/* SPDX-License-Identifier: MIT */
/*
 * test_h3.c: the HTTP/3 / WebTransport layer (h3/): the wire pieces
 * (settings both ways, CONNECT parsing, version negotiation, prefixes,
 * datagram prefix, error-code mapping, capsules) and, over real QUIC on the
 * in-memory link, WebTransport sessions between a moq node and a client
 * that speaks HTTP/3 and QPACK (tests/test_h3_session.c part below).
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp3/nghttp3.h>

#include "h3.h"
#include "link.h"
#include "quic.h"

/* ------------------------------------------------------------ helpers */

/* A HEADERS payload (QPACK field section) for name/value pairs, encoded by
 * nghttp3's encoder independently of h3.c. */
static size_t qpack_block(const char *const *kv, size_t n, uint8_t *out, size_t cap)
{
	const nghttp3_mem *mem = nghttp3_mem_default();
	nghttp3_qpack_encoder *enc;
	nghttp3_buf pb, rb, eb;
	nghttp3_nv nva[16];
	size_t len;

	ck_assert_uint_le(n, 16);
	for (size_t i = 0; i < n; i++) {
		nva[i].name = (uint8_t *)(uintptr_t)kv[2 * i];
		nva[i].namelen = strlen(kv[2 * i]);
		nva[i].value = (uint8_t *)(uintptr_t)kv[2 * i + 1];
		nva[i].valuelen = strlen(kv[2 * i + 1]);
		nva[i].flags = NGHTTP3_NV_FLAG_NONE;
	}
	nghttp3_buf_init(&pb);
	nghttp3_buf_init(&rb);
	nghttp3_buf_init(&eb);
	ck_assert_int_eq(nghttp3_qpack_encoder_new(&enc, 0, mem), 0);
	ck_assert_int_eq(nghttp3_qpack_encoder_encode(enc, &pb, &rb, &eb, 0, nva, n), 0);
	len = (size_t)(pb.last - pb.pos) + (size_t)(rb.last - rb.pos);
	ck_assert_uint_le(len, cap);
	memcpy(out, pb.pos, (size_t)(pb.last - pb.pos));
	memcpy(out + (pb.last - pb.pos), rb.pos, (size_t)(rb.last - rb.pos));
	ck_assert_uint_eq((size_t)(eb.last - eb.pos), 0); /* no dynamic table */
	nghttp3_buf_free(&pb, mem);
	nghttp3_buf_free(&rb, mem);
	nghttp3_buf_free(&eb, mem);
	nghttp3_qpack_encoder_del(enc);
	return len;
}

#define GOOD_PROTOS "\"moq-lite-05\", \"moq-lite-04\", \"moq-lite-03\", \"moql\", \"moqt-19\""

/* Parse a request made of @kv; returns the status (or the negative error). */
static int parse_kv(const char *const *kv, size_t n, struct moq_h3_request *r)
{
	uint8_t block[2048];
	size_t len = qpack_block(kv, n, block, sizeof(block));
	int rc = moq_h3_connect_parse(0, block, len, r);

	return rc < 0 ? rc : r->status;
}

/* ------------------------------------------------------------ varints */

START_TEST(varints)
{
	static const uint64_t vals[] = {0,     63,         64,         16383,
	                                16384, 1073741823, 1073741824, 4611686018427387903ull};
	static const size_t lens[] = {1, 1, 2, 2, 4, 4, 8, 8};
	uint8_t b[8];

	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		uint64_t v = 12345;
		size_t n = moq_h3_varint_put(b, vals[i]);

		ck_assert_uint_eq(n, lens[i]);
		ck_assert_int_eq(moq_h3_varint_get(b, n, &v), (int)n);
		ck_assert_uint_eq(v, vals[i]);
		/* one byte short */
		ck_assert_int_eq(moq_h3_varint_get(b, n - 1, &v), MOQ_ERR_SHORT);
	}
	ck_assert_uint_eq(moq_h3_varint_len(1ull << 62), 0);
	/* RFC 9000, A.1's examples */
	{
		static const uint8_t ex[] = {0x40, 0x25};
		uint64_t v;
		ck_assert_int_eq(moq_h3_varint_get(ex, 2, &v), 2);
		ck_assert_uint_eq(v, 37);
	}
}
END_TEST

/* ------------------------------------------------------- error codes */

START_TEST(error_codes_both_ways)
{
	/* BINDINGS.md: c=6 -> 0x52e4a40fa8e1 */
	ck_assert_uint_eq(moq_h3_code_to_h3(6), 0x52e4a40fa8e1ull);
	ck_assert_uint_eq(moq_h3_code_to_h3(0), MOQ_H3_WT_CODE_FIRST);
	ck_assert_uint_eq(moq_h3_code_to_h3(0xffffffffull), MOQ_H3_WT_CODE_LAST);
	/* 0x1e -> skips the GREASE codepoint FIRST + 0x1e */
	ck_assert_uint_eq(moq_h3_code_to_h3(0x1e), MOQ_H3_WT_CODE_FIRST + 0x1f);
	for (uint64_t c = 0; c < 200000; c += 7) {
		uint64_t h = moq_h3_code_to_h3(c);
		ck_assert_uint_ge(h, MOQ_H3_WT_CODE_FIRST);
		ck_assert_uint_le(h, MOQ_H3_WT_CODE_LAST);
		/* never a GREASE codepoint (0x1f * N + 0x21) */
		ck_assert_uint_ne((h - 0x21) % 0x1f, 0);
		ck_assert_uint_eq(moq_h3_code_from_h3(h), c);
	}
	/* the raw moq-lite form is accepted too */
	for (uint64_t c = 0; c < 64; c++)
		ck_assert_uint_eq(moq_h3_code_from_h3(c), c);
	ck_assert_uint_eq(moq_h3_code_from_h3(MOQ_H3_WT_CODE_LAST + 1), MOQ_H3_WT_CODE_LAST + 1);
}
END_TEST

/* ----------------------------------------------------------- settings */

static void read_control(const uint8_t *b, int n, struct moq_h3_settings *s)
{
	uint64_t type, flen;
	int h;

	ck_assert_int_gt(n, 3);
	ck_assert_uint_eq(b[0], MOQ_H3_STREAM_CONTROL);
	h = moq_h3_frame_head(b + 1, (size_t)n - 1, &type, &flen);
	ck_assert_int_gt(h, 0);
	ck_assert_uint_eq(type, MOQ_H3_FRAME_SETTINGS);
	ck_assert_uint_eq(1 + (size_t)h + flen, (size_t)n);
	ck_assert_int_eq(moq_h3_settings_decode(b + 1 + h, flen, s), 0);
}

/* The value of setting @id in the SETTINGS payload @p (@len), -1 if absent. */
static int64_t setting_value(const uint8_t *p, size_t len, uint64_t id)
{
	for (size_t off = 0; off < len;) {
		uint64_t k, v;
		int a = moq_h3_varint_get(p + off, len - off, &k), b;

		ck_assert_int_gt(a, 0);
		b = moq_h3_varint_get(p + off + (size_t)a, len - off - (size_t)a, &v);
		ck_assert_int_gt(b, 0);
		off += (size_t)a + (size_t)b;
		if (k == id)
			return (int64_t)v;
	}
	return -1;
}

START_TEST(settings_both_ways)
{
	uint8_t b[128];
	struct moq_h3_settings s;
	int n = moq_h3_control_open(b, sizeof(b), 0);

	/* the server's, BINDINGS.md 1 */
	read_control(b, n, &s);
	ck_assert_uint_eq(s.count, 11);
	ck_assert_uint_eq(s.enable_connect, 1);
	ck_assert_uint_eq(s.h3_datagram, 1);
	ck_assert_uint_eq(s.wt_max_sessions, 1);
	ck_assert_uint_eq(s.wt_enable_old, 1);
	ck_assert_uint_eq(s.qpack_max_table, 0);
	/* Chrome's old codepoints are there by value */
	{
		static const uint8_t dg_old[] = {0x80, 0xff, 0xd2, 0x77};
		static const uint8_t wt_old[] = {0xab, 0x60, 0x37, 0x43};
		static const uint8_t wt_new[] = {0xc0, 0, 0, 0, 0xc6, 0x71, 0x70, 0x6a};
		ck_assert_ptr_nonnull(memmem(b, (size_t)n, dg_old, sizeof(dg_old)));
		ck_assert_ptr_nonnull(memmem(b, (size_t)n, wt_old, sizeof(wt_old)));
		ck_assert_ptr_nonnull(memmem(b, (size_t)n, wt_new, sizeof(wt_new)));
	}
	/* draft-ietf-webtrans-http3-13 / -14, 9.2: SETTINGS_WT_ENABLED
	 * (0x2c7cf000), -13's WT_MAX_SESSIONS (0x14e9cd29) and the initial
	 * limits WT_INITIAL_MAX_STREAMS_UNI (0x2b64) / _BIDI (0x2b65) /
	 * WT_INITIAL_MAX_DATA (0x2b61), by value: the largest the draft allows
	 * (we never raise them with capsules; QUIC's flow control bounds) */
	{
		const uint8_t *p = b + 3;
		size_t pl = (size_t)n - 3;

		ck_assert_int_eq(setting_value(p, pl, 0x2c7cf000), 1);
		ck_assert_int_eq(setting_value(p, pl, 0x14e9cd29), 1);
		ck_assert_int_eq(setting_value(p, pl, 0x2b64), (int64_t)(1ull << 60));
		ck_assert_int_eq(setting_value(p, pl, 0x2b65), (int64_t)(1ull << 60));
		ck_assert_int_eq(setting_value(p, pl, 0x2b61), (int64_t)((1ull << 62) - 1));
		ck_assert_uint_eq(s.wt_enabled, 1);
		ck_assert_uint_eq(s.wt_init_max_streams_uni, 1ull << 60);
		ck_assert_uint_eq(s.wt_init_max_streams_bidi, 1ull << 60);
		ck_assert_uint_eq(s.wt_init_max_data, (1ull << 62) - 1);
	}
	/* a client's: no ENABLE_CONNECT_PROTOCOL, the rest the same */
	n = moq_h3_control_open(b, sizeof(b), 1);
	read_control(b, n, &s);
	ck_assert_uint_eq(s.enable_connect, 0);
	ck_assert_uint_eq(s.h3_datagram, 1);
	ck_assert_uint_eq(s.wt_enabled, 1);
	ck_assert_uint_eq(s.count, 10);
	ck_assert_int_eq(moq_h3_control_open(b, 8, 0), MOQ_ERR_TOO_LARGE);
	ck_assert_int_le(moq_h3_control_open(b, sizeof(b), 0), MOQ_H3_CONTROL_OPEN_MAX);

	/* what Chrome sends: QPACK settings, the old datagram codepoint, a
	 * GREASE id; all read */
	{
		uint8_t p[64];
		size_t l = 0;
		l += moq_h3_varint_put(p + l, MOQ_H3_SET_QPACK_MAX_TABLE);
		l += moq_h3_varint_put(p + l, 0);
		l += moq_h3_varint_put(p + l, MOQ_H3_SET_QPACK_BLOCKED);
		l += moq_h3_varint_put(p + l, 0);
		l += moq_h3_varint_put(p + l, MOQ_H3_SET_H3_DATAGRAM_OLD);
		l += moq_h3_varint_put(p + l, 1);
		l += moq_h3_varint_put(p + l, 0x1f * 3 + 0x21); /* GREASE */
		l += moq_h3_varint_put(p + l, 77);
		l += moq_h3_varint_put(p + l, MOQ_H3_SET_WT_MAX_SESS_OLD);
		l += moq_h3_varint_put(p + l, 16);
		ck_assert_int_eq(moq_h3_settings_decode(p, l, &s), 0);
		ck_assert_uint_eq(s.h3_datagram, 1);
		ck_assert_uint_eq(s.wt_max_sessions, 16);
		ck_assert_uint_eq(s.count, 5);
		/* truncated: the last value cut */
		ck_assert_int_eq(moq_h3_settings_decode(p, l - 1, &s), MOQ_ERR_DECODE);
	}
	/* the same id twice; an HTTP/2 setting: errors (RFC 9114, 7.2.4) */
	{
		static const uint8_t twice[] = {0x08, 0x01, 0x08, 0x01};
		static const uint8_t h2[] = {0x02, 0x00};
		ck_assert_int_eq(moq_h3_settings_decode(twice, sizeof(twice), &s), MOQ_ERR_PROTO);
		ck_assert_int_eq(moq_h3_settings_decode(h2, sizeof(h2), &s), MOQ_ERR_PROTO);
	}
}
END_TEST

/* ----------------------------------------------------------- CONNECT */

START_TEST(connect_accepted)
{
	struct moq_h3_request r;
	const char *kv[] = {":method",
	                    "CONNECT",
	                    ":protocol",
	                    "webtransport",
	                    ":scheme",
	                    "https",
	                    ":authority",
	                    "127.0.0.1:4443",
	                    ":path",
	                    "/demo?jwt=abc.def",
	                    "origin",
	                    "https://example.test",
	                    "wt-available-protocols",
	                    GOOD_PROTOS};

	ck_assert_int_eq(parse_kv(kv, 7, &r), 200);
	ck_assert_int_eq(r.v, MOQ_LITE_05);
	ck_assert_str_eq(r.path, "/demo?jwt=abc.def");
	ck_assert_uint_eq(r.path_len, strlen("/demo?jwt=abc.def"));
	ck_assert_str_eq(r.authority, "127.0.0.1:4443");
	ck_assert_str_eq(r.origin, "https://example.test");
	moq_h3_request_free(&r);

	ck_assert(r.negotiated);
	moq_h3_request_free(&r);

	/* the client's preference wins: 03 first */
	kv[13] = "\"moqt-19\", \"moq-lite-03\";q=1, \"moq-lite-05\"";
	ck_assert_int_eq(parse_kv(kv, 7, &r), 200);
	ck_assert_int_eq(r.v, MOQ_LITE_03);
	moq_h3_request_free(&r);

	/* no wt-available-protocols: accepted with the default version, not
	 * negotiated (moq-relay answers it 200 without wt-protocol) */
	ck_assert_int_eq(parse_kv(kv, 6, &r), 200);
	ck_assert_int_eq(r.v, MOQ_H3_DEFAULT_VERSION);
	ck_assert_int_eq(r.v, MOQ_LITE_05);
	ck_assert(!r.negotiated);
	moq_h3_request_free(&r);

	/* our own encoder's request parses the same */
	{
		size_t len;
		uint8_t *f = moq_h3_request_encode(0, "relay.test", "/room", &len);
		uint64_t type, flen;
		int h;
		ck_assert_ptr_nonnull(f);
		h = moq_h3_frame_head(f, len, &type, &flen);
		ck_assert_uint_eq(type, MOQ_H3_FRAME_HEADERS);
		ck_assert_uint_eq((size_t)h + flen, len);
		ck_assert_int_eq(moq_h3_connect_parse(0, f + h, flen, &r), 0);
		ck_assert_int_eq(r.status, 200);
		ck_assert_int_eq(r.v, MOQ_LITE_05);
		ck_assert_str_eq(r.path, "/room");
		moq_h3_request_free(&r);
		free(f);
	}
}
END_TEST

START_TEST(connect_refused)
{
	struct moq_h3_request r;
	/* index pairs to change, and the status expected */
	static const struct {
		int idx;           /* value index to replace (-1: drop the pair at drop) */
		const char *value; /* the replacement */
		int drop;          /* pair index to drop (-1: none) */
		int status;
	} cases[] = {
	        {1, "GET", -1, 400},                    /* :method */
	        {-1, NULL, 1, 400},                     /* no :protocol */
	        {3, "websocket", -1, 501},              /* :protocol */
	        {5, "http", -1, 400},                   /* :scheme */
	        {-1, NULL, 3, 400},                     /* no :authority */
	        {7, "", -1, 400},                       /* empty :authority */
	        {9, "demo", -1, 400},                   /* :path without / */
	        {-1, NULL, 4, 400},                     /* no :path */
	        {-1, NULL, 0, 400},                     /* no :method */
	        {-1, NULL, 2, 400},                     /* no :scheme */
	        {11, "\"moql\", \"moqt-21\"", -1, 406}, /* none of ours */
	        {11, "\"moq-lite-99\"", -1, 406},       /* unknown version */
	        {11, "moq-lite-05", -1, 400},           /* not sf-strings */
	        {11, "\"moq-lite-05\",", -1, 400},      /* trailing comma */
	        {7, "user@h:1", -1, 400},               /* userinfo in :authority */
	        {7, "h:99999", -1, 400},                /* port > 65535 */
	        {7, "h:1/x", -1, 400},                  /* a path in :authority */
	        {7, "h x", -1, 400},                    /* a space */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *base[] = {":method",
		                      "CONNECT",
		                      ":protocol",
		                      "webtransport",
		                      ":scheme",
		                      "https",
		                      ":authority",
		                      "h:1",
		                      ":path",
		                      "/p",
		                      "wt-available-protocols",
		                      GOOD_PROTOS};
		const char *kv[12];
		size_t n = 0;

		if (cases[i].idx >= 0)
			base[cases[i].idx] = cases[i].value;
		for (int p = 0; p < 6; p++) {
			if (p == cases[i].drop)
				continue;
			kv[2 * n] = base[2 * p];
			kv[2 * n + 1] = base[2 * p + 1];
			n++;
		}
		ck_assert_msg(parse_kv(kv, n, &r) == cases[i].status, "case %zu: status %d why %s",
		              i, r.status, r.why ? r.why : "-");
		ck_assert_ptr_nonnull(r.why);
		ck_assert_int_eq(r.v, 0);
		moq_h3_request_free(&r);
	}
	/* a pseudo-header twice, an unknown one, one after a regular field */
	{
		const char *twice[] = {":method",
		                       "CONNECT",
		                       ":method",
		                       "CONNECT",
		                       ":protocol",
		                       "webtransport",
		                       ":scheme",
		                       "https",
		                       ":authority",
		                       "h",
		                       ":path",
		                       "/",
		                       "wt-available-protocols",
		                       GOOD_PROTOS};
		const char *unknown[] = {":method",
		                         "CONNECT",
		                         ":protocol",
		                         "webtransport",
		                         ":scheme",
		                         "https",
		                         ":authority",
		                         "h",
		                         ":path",
		                         "/",
		                         ":color",
		                         "red",
		                         "wt-available-protocols",
		                         GOOD_PROTOS};
		const char *late[] = {":method",
		                      "CONNECT",
		                      ":protocol",
		                      "webtransport",
		                      ":scheme",
		                      "https",
		                      "origin",
		                      "x",
		                      ":authority",
		                      "h",
		                      ":path",
		                      "/",
		                      "wt-available-protocols",
		                      GOOD_PROTOS};
		ck_assert_int_eq(parse_kv(twice, 7, &r), 400);
		moq_h3_request_free(&r);
		ck_assert_int_eq(parse_kv(unknown, 7, &r), 400);
		moq_h3_request_free(&r);
		ck_assert_int_eq(parse_kv(late, 7, &r), 400);
		moq_h3_request_free(&r);
		/* RFC 6454, 7.3: one Origin */
		{
			const char *two[] = {":method", "CONNECT",  ":protocol",  "webtransport",
			                     ":scheme", "https",    ":authority", "h",
			                     ":path",   "/",        "origin",     "https://a",
			                     "origin",  "https://b"};
			ck_assert_int_eq(parse_kv(two, 7, &r), 400);
			moq_h3_request_free(&r);
		}
	}
	/* not QPACK: a reference into a dynamic table we never allowed,
	 * and garbage */
	{
		static const uint8_t dyn[] = {0x02, 0x00, 0x80};
		static const uint8_t junk[] = {0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff};
		ck_assert_int_eq(moq_h3_connect_parse(0, dyn, sizeof(dyn), &r), MOQ_ERR_DECODE);
		ck_assert_int_eq(moq_h3_connect_parse(0, junk, sizeof(junk), &r), MOQ_ERR_DECODE);
		ck_assert_ptr_null(r.path);
	}
}
END_TEST

START_TEST(authority_and_origin)
{
	static const char *const good[] = {"h",
	                                   "relay.example.com",
	                                   "relay.example.com:443",
	                                   "127.0.0.1:4443",
	                                   "[::1]:4443",
	                                   "[2001:db8::1]",
	                                   "xn--bcher-kva.example",
	                                   "a%41b",
	                                   "h:0",
	                                   "h:65535"};
	static const char *const bad[] = {
	        "",       ":443",        "user@h", "user:pw@h:1", "h:",  "h:65536", "h:123456",
	        "h:1a",   "h/",          "h?x",    "h#x",         "h x", "[::1",    "[]",
	        "[::1]x", "[::1]:99999", "a%4",    "a%zz",        "h\\x"};
	static const struct {
		const char *list, *origin;
		int ok;
	} o[] = {
	        {NULL, "https://evil.test", 1},
	        {"", "https://evil.test", 1},
	        {" , ", "https://evil.test", 1},
	        {"*", "https://evil.test", 1},
	        {"https://good.test", NULL, 1}, /* no Origin: not a browser */
	        {"https://good.test", "https://good.test", 1},
	        {"https://good.test", "HTTPS://Good.Test", 1},
	        {"https://good.test/", "https://good.test", 1},
	        {"https://a.test, https://good.test:8443", "https://good.test:8443", 1},
	        {"https://a.test,https://good.test:8443 ", "https://good.test:8443", 1},
	        {"https://good.test", "https://evil.test", 0},
	        {"https://good.test", "https://good.test:8443", 0},
	        {"https://good.test", "http://good.test", 0},
	        {"https://good.test", "https://good.test.evil.test", 0},
	        {"https://good.test", "https://good.tes", 0},
	        {"https://good.test", "null", 0},
	        {"https://good.test", "", 0},
	        {"https://good.test, *", "https://evil.test", 1},
	};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(moq_h3_authority_ok(good[i], strlen(good[i])), "%s", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!moq_h3_authority_ok(bad[i], strlen(bad[i])), "%s", bad[i]);
	ck_assert(!moq_h3_authority_ok("h\0x", 3));
	for (size_t i = 0; i < sizeof(o) / sizeof(o[0]); i++)
		ck_assert_msg(moq_h3_origin_allowed(o[i].list, o[i].origin,
		                                    o[i].origin ? strlen(o[i].origin) : 0) ==
		                      o[i].ok,
		              "case %zu", i);
}
END_TEST

START_TEST(protocol_lists)
{
	const char *l1 = "  \"a\\\"b\" , \"moq-lite-05\" ";

	ck_assert_int_eq(moq_h3_protocols_pick("\"moq-lite-04\"", 13), MOQ_LITE_04);
	ck_assert_int_eq(moq_h3_protocols_pick(l1, strlen(l1)), MOQ_LITE_05);
	/* moq-lite-06 (issue 25), in the client's order */
	ck_assert_int_eq(moq_h3_protocols_pick("\"moq-lite-06\", \"moq-lite-05\"", 28),
	                 MOQ_LITE_06);
	ck_assert_int_eq(moq_h3_protocols_pick("\"moq-lite-05\", \"moq-lite-06\"", 28),
	                 MOQ_LITE_05);
	ck_assert_int_eq(moq_h3_protocols_pick("", 0), 0);
	ck_assert_int_eq(moq_h3_protocols_pick("\"moq-lite-05", 12), MOQ_ERR_DECODE);
	ck_assert_int_eq(moq_h3_protocols_pick("\"x\" \"y\"", 7), MOQ_ERR_DECODE);
	ck_assert_int_eq(moq_h3_protocols_pick("\"\x01\"", 3), MOQ_ERR_DECODE);
}
END_TEST

START_TEST(response_both_ways)
{
	size_t len;
	uint8_t *f = moq_h3_response_encode(0, 200, MOQ_LITE_04, &len);
	uint64_t type, flen;
	int h, status;
	enum moq_version v;
	const nghttp3_mem *mem = nghttp3_mem_default();

	ck_assert_ptr_nonnull(f);
	h = moq_h3_frame_head(f, len, &type, &flen);
	ck_assert_uint_eq(type, MOQ_H3_FRAME_HEADERS);
	ck_assert_int_eq(moq_h3_response_parse(0, f + h, flen, &status, &v), 0);
	ck_assert_int_eq(status, 200);
	ck_assert_int_eq(v, MOQ_LITE_04);
	/* the fields as nghttp3's decoder sees them */
	{
		nghttp3_qpack_decoder *dec;
		nghttp3_qpack_stream_context *sctx;
		size_t off = 0;
		int seen = 0;
		ck_assert_int_eq(nghttp3_qpack_decoder_new(&dec, 0, 0, mem), 0);
		ck_assert_int_eq(nghttp3_qpack_stream_context_new(&sctx, 0, mem), 0);
		for (;;) {
			nghttp3_qpack_nv nv;
			uint8_t flags = 0;
			nghttp3_ssize n = nghttp3_qpack_decoder_read_request(
			        dec, sctx, &nv, &flags, f + h + off, flen - off, 1);
			ck_assert_int_ge(n, 0);
			off += (size_t)n;
			if (flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT) {
				nghttp3_vec a = nghttp3_rcbuf_get_buf(nv.name);
				nghttp3_vec b = nghttp3_rcbuf_get_buf(nv.value);
				if (a.len == 28 &&
				    !memcmp(a.base, "sec-webtransport-http3-draft", 28)) {
					ck_assert(b.len == 7 && !memcmp(b.base, "draft02", 7));
					seen |= 1;
				}
				if (a.len == 11 && !memcmp(a.base, "wt-protocol", 11)) {
					ck_assert(b.len == 13 &&
					          !memcmp(b.base, "\"moq-lite-04\"", 13));
					seen |= 2;
				}
				nghttp3_rcbuf_decref(nv.name);
				nghttp3_rcbuf_decref(nv.value);
			}
			if (flags & NGHTTP3_QPACK_DECODE_FLAG_FINAL)
				break;
		}
		ck_assert_int_eq(seen, 3);
		nghttp3_qpack_stream_context_del(sctx);
		nghttp3_qpack_decoder_del(dec);
	}
	free(f);
	f = moq_h3_response_encode(0, 406, 0, &len);
	h = moq_h3_frame_head(f, len, &type, &flen);
	ck_assert_int_eq(moq_h3_response_parse(0, f + h, flen, &status, &v), 0);
	ck_assert_int_eq(status, 406);
	ck_assert_int_eq(v, 0);
	free(f);
}
END_TEST

/* ----------------------------------------------------- control stream */

/* Chrome 156's control stream after its type byte, as a relay read it:
 * SETTINGS (QPACK 65536 / 16384 / 100, H3_DATAGRAM 0x33 and 0xffd277,
 * draft-02's ENABLE_WEBTRANSPORT, a GREASE id) and a GREASE frame. */
static const char chrome_ctl_hex[] =
        "042501800100000680004000074064330180ffd27701ab60374201c000001b"
        "a8525b03a0960a06c000000884e532ff02e1c9";

static size_t unhex(const char *h, uint8_t *out)
{
	size_t n = strlen(h) / 2;

	for (size_t i = 0; i < n; i++) {
		unsigned v;
		ck_assert_int_eq(sscanf(h + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
	return n;
}

/* Feed @b (@n) to a fresh reader (peer a server when @srv) in chunks of
 * @chunk; returns the last result (events or'ed) and the error in *@err. */
static int ctl_run(struct moq_h3_control *p, int srv, const uint8_t *b, size_t n, size_t chunk,
                   uint64_t *err)
{
	int ev = 0;

	moq_h3_control_init(p, srv);
	*err = 0;
	for (size_t off = 0; off < n; off += chunk) {
		size_t l = n - off < chunk ? n - off : chunk;
		int rc = moq_h3_control_feed(p, b + off, l, err);

		if (rc < 0) {
			moq_h3_control_free(p);
			return rc;
		}
		ev |= rc;
	}
	moq_h3_control_free(p);
	return ev;
}

START_TEST(control_stream_frames)
{
	struct moq_h3_control p;
	uint8_t b[4096];
	size_t n = unhex(chrome_ctl_hex, b);
	uint64_t err;

	/* Chrome's, whole, byte by byte and split at every offset: SETTINGS
	 * read, the GREASE frame after it skipped */
	for (size_t chunk = 1; chunk <= n; chunk++) {
		ck_assert_int_eq(ctl_run(&p, 0, b, n, chunk, &err), MOQ_H3_CTL_SETTINGS);
		ck_assert(p.got_settings);
		ck_assert_uint_eq(p.settings.qpack_max_table, 65536);
		ck_assert_uint_eq(p.settings.qpack_blocked, 100);
		ck_assert_uint_eq(p.settings.h3_datagram, 1);
		ck_assert_uint_eq(p.settings.wt_enable_old, 1);
		ck_assert_uint_eq(p.settings.count, 7);
		ck_assert(!p.in_frame && p.hl == 0);
	}
	/* after the SETTINGS the stream is still parsed (RFC 9114, 7.2.4:
	 * SETTINGS once; 7.2.1 / 7.2.2 / 7.2.5: DATA, HEADERS, PUSH_PROMISE
	 * never on it; 7.2.8: HTTP/2's types) */
	{
		static const uint8_t bad[][4] = {
		        {0x04, 0x00},       /* a second (empty) SETTINGS */
		        {0x01, 0x01, 0x00}, /* HEADERS */
		        {0x00, 0x01, 0x00}, /* DATA */
		        {0x05, 0x01, 0x00}, /* PUSH_PROMISE */
		        {0x02, 0x00},       /* HTTP/2 PRIORITY */
		        {0x06, 0x00},       /* PING */
		        {0x08, 0x00},       /* WINDOW_UPDATE */
		        {0x09, 0x00},       /* CONTINUATION */
		};
		static const size_t bl[] = {2, 3, 3, 3, 2, 2, 2, 2};

		for (size_t i = 0; i < sizeof(bl) / sizeof(bl[0]); i++) {
			memcpy(b + n, bad[i], bl[i]);
			ck_assert_int_eq(ctl_run(&p, 0, b, n + bl[i], n + bl[i], &err),
			                 MOQ_ERR_PROTO);
			ck_assert_uint_eq(err, MOQ_H3_FRAME_UNEXPECTED);
			/* split: the header's bytes one by one */
			ck_assert_int_eq(ctl_run(&p, 0, b, n + bl[i], 1, &err), MOQ_ERR_PROTO);
			ck_assert_uint_eq(err, MOQ_H3_FRAME_UNEXPECTED);
		}
	}
	/* the failure sticks */
	{
		static const uint8_t two[] = {0x04, 0x00, 0x04, 0x00};
		moq_h3_control_init(&p, 0);
		ck_assert_int_eq(moq_h3_control_feed(&p, two, 4, &err), MOQ_ERR_PROTO);
		err = 0;
		ck_assert_int_eq(moq_h3_control_feed(&p, two, 0, &err), MOQ_ERR_PROTO);
		ck_assert_uint_eq(err, MOQ_H3_FRAME_UNEXPECTED);
		moq_h3_control_free(&p);
	}
	/* SETTINGS first (6.2.1), even before an unknown frame */
	{
		static const uint8_t go[] = {0x07, 0x01, 0x00};
		static const uint8_t grease_first[] = {0x21, 0x00, 0x04, 0x00};
		ck_assert_int_eq(ctl_run(&p, 1, go, 3, 3, &err), MOQ_ERR_PROTO);
		ck_assert_uint_eq(err, MOQ_H3_MISSING_SETTINGS);
		ck_assert_int_eq(ctl_run(&p, 1, grease_first, 4, 1, &err), MOQ_ERR_PROTO);
		ck_assert_uint_eq(err, MOQ_H3_MISSING_SETTINGS);
	}
	/* a large unknown frame is skipped in pieces, nothing kept; a GOAWAY
	 * after it read */
	{
		size_t l = 0;
		static uint8_t big[70000];
		big[l++] = 0x04;
		big[l++] = 0x00;
		l += moq_h3_varint_put(big + l, 0x1f * 7 + 0x21);
		l += moq_h3_varint_put(big + l, 65536);
		memset(big + l, 0xee, 65536);
		l += 65536;
		big[l++] = 0x07;
		big[l++] = 0x01;
		big[l++] = 0x08; /* GOAWAY 8 (a client bidi stream id) */
		for (size_t chunk = 1000; chunk <= l; chunk += 33333) {
			moq_h3_control_init(&p, 1);
			int ev = 0;
			for (size_t off = 0; off < l; off += chunk) {
				int rc = moq_h3_control_feed(
				        &p, big + off, l - off < chunk ? l - off : chunk, &err);
				ck_assert_int_ge(rc, 0);
				ck_assert_ptr_null(p.buf);
				ev |= rc;
			}
			ck_assert_int_eq(ev, MOQ_H3_CTL_SETTINGS | MOQ_H3_CTL_GOAWAY);
			ck_assert(p.goaway);
			ck_assert_uint_eq(p.goaway_id, 8);
			moq_h3_control_free(&p);
		}
	}
	/* GOAWAY / MAX_PUSH_ID / CANCEL_PUSH: one varint exactly (7.1), ids
	 * that only go down (5.2), from whom (7.2.7) */
	{
		static const struct {
			int srv;
			uint8_t b[8];
			size_t n;
			int rc;
			uint64_t err;
		} cases[] = {
		        {1, {0x07, 0x01, 0x04, 0x07, 0x01, 0x00}, 6, MOQ_H3_CTL_GOAWAY, 0},
		        {1, {0x07, 0x01, 0x04, 0x07, 0x01, 0x08}, 6, MOQ_ERR_PROTO, MOQ_H3_ID_ERROR},
		        {1, {0x07, 0x01, 0x05}, 3, MOQ_ERR_PROTO, MOQ_H3_ID_ERROR},
		        {0, {0x07, 0x01, 0x05}, 3, MOQ_H3_CTL_GOAWAY, 0}, /* a push id */
		        {1, {0x07, 0x02, 0x04, 0x00}, 4, MOQ_ERR_PROTO, MOQ_H3_FRAME_ERROR},
		        {1, {0x07, 0x01, 0x40}, 3, MOQ_ERR_PROTO, MOQ_H3_FRAME_ERROR},
		        {1, {0x07, 0x00}, 2, MOQ_ERR_PROTO, MOQ_H3_FRAME_ERROR},
		        {1, {0x07, 0x09}, 2, MOQ_ERR_PROTO, MOQ_H3_FRAME_ERROR},
		        {1, {0x0d, 0x01, 0x00}, 3, MOQ_ERR_PROTO, MOQ_H3_FRAME_UNEXPECTED},
		        {0, {0x0d, 0x01, 0x05, 0x0d, 0x01, 0x07}, 6, 0, 0},
		        {0, {0x0d, 0x01, 0x05, 0x0d, 0x01, 0x04}, 6, MOQ_ERR_PROTO, MOQ_H3_ID_ERROR},
		        {0, {0x0d, 0x01, 0x05, 0x03, 0x01, 0x05}, 6, 0, 0},
		        {0, {0x0d, 0x01, 0x05, 0x03, 0x01, 0x06}, 6, MOQ_ERR_PROTO, MOQ_H3_ID_ERROR},
		        {0, {0x03, 0x01, 0x00}, 3, MOQ_ERR_PROTO, MOQ_H3_ID_ERROR},
		        {1, {0x03, 0x01, 0x00}, 3, MOQ_ERR_PROTO, MOQ_H3_ID_ERROR},
		};
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			uint8_t f[16] = {0x04, 0x00};
			memcpy(f + 2, cases[i].b, cases[i].n);
			for (size_t chunk = 1; chunk <= 2 + cases[i].n; chunk++) {
				int rc = ctl_run(&p, cases[i].srv, f, 2 + cases[i].n, chunk, &err);
				ck_assert_msg(
				        rc == (cases[i].rc ? cases[i].rc : MOQ_H3_CTL_SETTINGS) ||
				                (cases[i].rc > 0 &&
				                 rc == (cases[i].rc | MOQ_H3_CTL_SETTINGS)),
				        "case %zu chunk %zu: %d", i, chunk, rc);
				if (rc < 0)
					ck_assert_uint_eq(err, cases[i].err);
			}
		}
	}
	/* SETTINGS: truncated (FRAME_ERROR), repeated (SETTINGS_ERROR), too
	 * large (FRAME_ERROR), spread over many calls */
	{
		static const uint8_t trunc[] = {0x04, 0x01, 0x08};
		static const uint8_t twice[] = {0x04, 0x04, 0x08, 0x01, 0x08, 0x01};
		uint8_t large[8] = {0x04};
		size_t ll = 1 + moq_h3_varint_put(large + 1, MOQ_H3_MAX_FRAME + 1);
		ck_assert_int_eq(ctl_run(&p, 1, trunc, 3, 1, &err), MOQ_ERR_PROTO);
		ck_assert_uint_eq(err, MOQ_H3_FRAME_ERROR);
		ck_assert_int_eq(ctl_run(&p, 1, twice, 6, 2, &err), MOQ_ERR_PROTO);
		ck_assert_uint_eq(err, MOQ_H3_SETTINGS_ERROR);
		ck_assert_int_eq(ctl_run(&p, 1, large, ll, 1, &err), MOQ_ERR_PROTO);
		ck_assert_uint_eq(err, MOQ_H3_FRAME_ERROR);
		/* our own, both roles */
		for (int client = 0; client < 2; client++) {
			int cn = moq_h3_control_open(b, sizeof(b), client);
			ck_assert_int_eq(ctl_run(&p, !client, b + 1, (size_t)cn - 1, 5, &err),
			                 MOQ_H3_CTL_SETTINGS);
			ck_assert_uint_eq(p.settings.wt_enabled, 1);
		}
	}
}
END_TEST

/* ---------------------------------------------------------- capsules */

START_TEST(close_capsule)
{
	uint8_t b[2048];
	int n = moq_h3_close_capsule(b, sizeof(b), 0x12345678u, "bye", 3);
	uint64_t type, flen, ct;
	const uint8_t *val;
	size_t vlen;
	int h, c;

	ck_assert_int_gt(n, 0);
	h = moq_h3_frame_head(b, (size_t)n, &type, &flen);
	ck_assert_uint_eq(type, MOQ_H3_FRAME_DATA);
	ck_assert_uint_eq((size_t)h + flen, (size_t)n);
	c = moq_h3_capsule_get(b + h, flen, &ct, &val, &vlen);
	ck_assert_int_eq(c, (int)flen);
	ck_assert_uint_eq(ct, MOQ_H3_CAPSULE_CLOSE_WT);
	ck_assert_uint_eq(vlen, 7);
	ck_assert(val[0] == 0x12 && val[1] == 0x34 && val[2] == 0x56 && val[3] == 0x78);
	ck_assert(!memcmp(val + 4, "bye", 3));
	/* incomplete; too large */
	ck_assert_int_eq(moq_h3_capsule_get(b + h, flen - 1, &ct, &val, &vlen), MOQ_ERR_SHORT);
	{
		uint8_t big[16];
		size_t l = moq_h3_varint_put(big, MOQ_H3_CAPSULE_CLOSE_WT);
		l += moq_h3_varint_put(big + l, MOQ_H3_MAX_FRAME + 1);
		ck_assert_int_eq(moq_h3_capsule_get(big, l, &ct, &val, &vlen), MOQ_ERR_TOO_LARGE);
	}
	/* the reason is cut at 1024 bytes */
	{
		char r[2000];
		memset(r, 'x', sizeof(r));
		n = moq_h3_close_capsule(b, sizeof(b), 1, r, sizeof(r));
		h = moq_h3_frame_head(b, (size_t)n, &type, &flen);
		ck_assert_int_eq(moq_h3_capsule_get(b + h, flen, &ct, &val, &vlen), (int)flen);
		ck_assert_uint_eq(vlen, 4 + 1024);
		ck_assert_int_eq(moq_h3_close_capsule(b, 16, 1, r, 100), MOQ_ERR_TOO_LARGE);
	}
}
END_TEST

/* ---------------------------------------------------------- prefixes */

START_TEST(stream_and_datagram_prefixes)
{
	uint8_t b[16];
	uint64_t id;

	/* 0x54 and 0x41 are two-byte varints; session 0 one byte */
	ck_assert_uint_eq(moq_h3_stream_prefix(b, 0, 0), 3);
	ck_assert(b[0] == 0x40 && b[1] == 0x54 && b[2] == 0x00);
	ck_assert_uint_eq(moq_h3_stream_prefix(b, 1, 0), 3);
	ck_assert(b[0] == 0x40 && b[1] == 0x41 && b[2] == 0x00);
	ck_assert_uint_eq(moq_h3_stream_prefix(b, 0, 400), 4);
	ck_assert(b[2] == 0x41 && b[3] == 0x90);
	/* RFC 9297, 2.1: the quarter stream id */
	ck_assert_uint_eq(moq_h3_datagram_prefix(b, 0), 1);
	ck_assert_uint_eq(b[0], 0);
	ck_assert_uint_eq(moq_h3_datagram_prefix(b, 8), 1);
	ck_assert_uint_eq(b[0], 2);
	ck_assert_uint_eq(moq_h3_datagram_prefix(b, 4 * 100), 2);
	ck_assert_int_eq(moq_h3_datagram_parse(b, 2, &id), 2);
	ck_assert_uint_eq(id, 400);
	ck_assert_int_eq(moq_h3_datagram_parse(b, 1, &id), MOQ_ERR_DECODE);
	{
		static const uint8_t big[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
		ck_assert_int_eq(moq_h3_datagram_parse(big, 8, &id), MOQ_ERR_DECODE);
	}
}
END_TEST

/* ---------------------------------------------- sessions over real QUIC */

/* A relay node whose endpoint hands "h3" connections to h3/'s layer (as
 * dpdk_app/relay.c does), and a client endpoint on the in-memory link. The
 * raw client below speaks HTTP/3 by hand: its own control stream and
 * SETTINGS, the QPACK encoder / decoder streams, a CONNECT, capsules. */
#define MS 1000000ull

static struct {
	struct moq_cache_counting cnt;
	struct moq_cache *cache;
	struct moq_node *relay, *cnode;
	struct moq_quic_endpoint *sep, *cep;
	struct moq_quic_link *lnk;
	struct moq_wt_stats wst;
	struct moq_wt_cfg wcfg; /* moq_wt_accept's, set by a test before it connects */
	uint64_t closed_code;
	int closed_n, ready_n;
} S;

struct rawstream {
	int64_t sid;
	uint8_t buf[2048];
	size_t len;
	int fin;
	uint64_t reset_code;
	int reset;
};

static struct {
	struct moq_quic_conn *c;
	int established, closed;
	struct moq_quic_close_info ci;
	int64_t ctl, enc, dec, req;
	uint8_t ctl_buf[MOQ_H3_CONTROL_OPEN_MAX];
	uint8_t *reqf;
	size_t reqf_len;
	uint8_t extra[256]; /* data written on the CONNECT stream after the request */
	struct rawstream st[16];
	int nst;
	int late_ctl; /* open the control stream only when the test says */
} R;

static const uint8_t qpack_enc[] = {MOQ_H3_STREAM_QPACK_ENC,
                                    0x20}; /* Set Dynamic Table Capacity 0 */
static const uint8_t qpack_dec[] = {MOQ_H3_STREAM_QPACK_DEC};

static struct rawstream *raw_st(int64_t sid)
{
	for (int i = 0; i < R.nst; i++)
		if (R.st[i].sid == sid)
			return &R.st[i];
	ck_assert_int_lt(R.nst, 16);
	memset(&R.st[R.nst], 0, sizeof(R.st[0]));
	R.st[R.nst].sid = sid;
	return &R.st[R.nst++];
}

static long raw_put(int64_t sid, const void *p, size_t len, int fin)
{
	struct iovec iov = {.iov_base = (void *)(uintptr_t)p, .iov_len = len};
	return moq_quic_stream_write(R.c, sid, &iov, len ? 1 : 0, fin);
}

static int raw_established(struct moq_quic_conn *c, void *user, const char *alpn)
{
	(void)user;
	ck_assert_str_eq(alpn, MOQ_H3_ALPN);
	R.established = 1;
	/* our control stream with a client's SETTINGS, the QPACK streams, the
	 * CONNECT on the first bidi stream */
	int n = moq_h3_control_open(R.ctl_buf, sizeof(R.ctl_buf), 1);
	if (!R.late_ctl) {
		ck_assert_int_eq(moq_quic_stream_open(c, 0, &R.ctl), 0);
		ck_assert_int_ge(raw_put(R.ctl, R.ctl_buf, (size_t)n, 0), 0);
	}
	ck_assert_int_eq(moq_quic_stream_open(c, 0, &R.enc), 0);
	ck_assert_int_ge(raw_put(R.enc, qpack_enc, sizeof(qpack_enc), 0), 0);
	ck_assert_int_eq(moq_quic_stream_open(c, 0, &R.dec), 0);
	ck_assert_int_ge(raw_put(R.dec, qpack_dec, sizeof(qpack_dec), 0), 0);
	ck_assert_int_eq(moq_quic_stream_open(c, 1, &R.req), 0);
	ck_assert_int_eq(R.req, 0);
	ck_assert_int_ge(raw_put(R.req, R.reqf, R.reqf_len, 0), 0);
	return 0;
}

static int raw_data(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t off,
                    const uint8_t *d, size_t len, int fin)
{
	struct rawstream *r = raw_st(sid);

	(void)c;
	(void)user;
	(void)off;
	if (r->len + len <= sizeof(r->buf)) {
		memcpy(r->buf + r->len, d, len);
		r->len += len;
	}
	r->fin |= fin;
	return 0;
}

static void raw_reset(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t code,
                      uint64_t final_size)
{
	struct rawstream *r = raw_st(sid);

	(void)c;
	(void)user;
	(void)final_size;
	r->reset = 1;
	r->reset_code = code;
}

static void raw_closed(struct moq_quic_conn *c, void *user, const struct moq_quic_close_info *ci)
{
	(void)c;
	(void)user;
	R.closed = 1;
	R.ci = *ci;
	R.ci.reason = NULL;
}

static const struct moq_quic_callbacks raw_cbs = {
        .established = raw_established,
        .stream_data = raw_data,
        .stream_reset = raw_reset,
        .conn_closed = raw_closed,
};

static void srv_conn_new(struct moq_quic_conn *c, void *user)
{
	(void)user;
	moq_quic_conn_set_user(c, NULL);
}

static int srv_established(struct moq_quic_conn *c, void *user, const char *alpn)
{
	(void)user;
	if (alpn && strcmp(alpn, MOQ_H3_ALPN) == 0) {
		ck_assert_ptr_nonnull(moq_wt_accept(c, S.relay, &S.wst, NULL, &S.wcfg));
		return 0;
	}
	moq_node_quic_callbacks()->conn_new(c, S.relay);
	return moq_node_quic_callbacks()->established(c, moq_quic_conn_user(c), alpn);
}

static void on_closed_s(struct moq_session *s, void *user, uint64_t code, int local)
{
	(void)s;
	(void)user;
	(void)local;
	S.closed_n++;
	S.closed_code = code;
}

static void on_ready_s(struct moq_session *s, void *user)
{
	(void)s;
	(void)user;
	S.ready_n++;
}

static const struct moq_node_callbacks relay_cb = {.session_closed = on_closed_s};
static const struct moq_node_callbacks client_cb = {.session_ready = on_ready_s,
                                                    .session_closed = on_closed_s};
static struct moq_quic_callbacks srv_cbs;

static void s_setup(void)
{
	struct moq_cache_cfg cc = {0};
	struct moq_node_cfg nc = {0};
	struct moq_quic_config q;
	struct moq_quic_link_config lc;
	static const char *const alpns[] = {MOQ_ALPN_05, MOQ_H3_ALPN};
	static const char *const calpn[] = {MOQ_H3_ALPN};
	int err = 0;

	memset(&S, 0, sizeof(S));
	memset(&R, 0, sizeof(R));
	moq_cache_counting_init(&S.cnt);
	cc.alloc = moq_cache_counting_alloc(&S.cnt);
	S.cache = moq_cache_create(&cc);
	ck_assert_ptr_nonnull(S.cache);
	nc.cache = S.cache;
	nc.relay = 1;
	nc.origin = 11;
	nc.cb = &relay_cb;
	S.relay = moq_node_create(&nc);
	memset(&nc, 0, sizeof(nc));
	nc.origin = 12;
	nc.cb = &client_cb;
	S.cnode = moq_node_create(&nc);
	ck_assert(S.relay && S.cnode);
	srv_cbs = *moq_node_quic_callbacks();
	srv_cbs.conn_new = srv_conn_new;
	srv_cbs.established = srv_established;
	memset(&q, 0, sizeof(q));
	q.role = MOQ_QUIC_SERVER;
	q.alpn = alpns;
	q.alpn_count = 2;
	q.cb = &srv_cbs;
	q.max_datagram_frame_size = 65535;
	S.sep = moq_quic_endpoint_new(&q, &err);
	ck_assert_msg(S.sep != NULL, "%s", moq_err_str(err));
	q.role = MOQ_QUIC_CLIENT;
	q.worker_id = 2;
	q.alpn = calpn;
	q.alpn_count = 1;
	q.cb = moq_node_quic_callbacks();
	S.cep = moq_quic_endpoint_new(&q, &err);
	ck_assert_ptr_nonnull(S.cep);
	memset(&lc, 0, sizeof(lc));
	lc.dir[0].delay_ns = 1 * MS;
	lc.dir[1].delay_ns = 1 * MS;
	lc.seed = 3;
	S.lnk = moq_quic_link_new(&lc, S.cep, S.sep);
	ck_assert_ptr_nonnull(S.lnk);
}

static void s_teardown(void)
{
	moq_quic_endpoint_free(S.cep);
	moq_quic_endpoint_free(S.sep);
	moq_quic_link_free(S.lnk);
	moq_node_destroy(S.cnode);
	moq_node_destroy(S.relay);
	moq_cache_destroy(S.cache);
	free(R.reqf);
}

static int (*until_fn)(void);
static int poll_until(void *arg)
{
	uint64_t now = moq_quic_link_now(S.lnk);

	(void)arg;
	moq_node_poll(S.relay, now);
	moq_node_poll(S.cnode, now);
	moq_wt_timers(now);
	return until_fn();
}

static void run_until(int (*fn)(void), uint64_t ms)
{
	until_fn = fn;
	moq_quic_link_run(S.lnk, poll_until, NULL, ms * MS);
}

static void raw_connect(const char *const *kv, size_t n)
{
	struct moq_quic_addr l, r;
	uint8_t block[2048];
	size_t bl = qpack_block(kv, n, block, sizeof(block)), off = 0;
	int err = 0;

	R.reqf = malloc(bl + 16);
	off += moq_h3_varint_put(R.reqf, MOQ_H3_FRAME_HEADERS);
	off += moq_h3_varint_put(R.reqf + off, bl);
	memcpy(R.reqf + off, block, bl);
	R.reqf_len = off + bl;
	ck_assert_int_eq(moq_quic_addr_ip4("10.0.0.1", 5000, &l), 0);
	ck_assert_int_eq(moq_quic_addr_ip4("10.0.0.2", 4443, &r), 0);
	R.c = moq_quic_connect(S.cep, &l, &r, NULL, moq_quic_link_now(S.lnk), &err);
	ck_assert_ptr_nonnull(R.c);
	moq_quic_conn_set_callbacks(R.c, &raw_cbs, NULL);
}

/* The response HEADERS on the CONNECT stream: status and wt-protocol. */
static int raw_response(int *status, enum moq_version *v)
{
	struct rawstream *r = raw_st(0);
	uint64_t type, flen;
	int h = moq_h3_frame_head(r->buf, r->len, &type, &flen);

	if (h < 0 || r->len < (size_t)h + flen)
		return -1;
	ck_assert_uint_eq(type, MOQ_H3_FRAME_HEADERS);
	ck_assert_int_eq(moq_h3_response_parse(0, r->buf + h, flen, status, v), 0);
	return h + (int)flen;
}

static int got_response(void)
{
	int st;
	enum moq_version v;
	return raw_response(&st, &v) > 0;
}

static int raw_is_closed(void)
{
	return R.closed;
}

/* A uni stream of the server's whose first bytes are @b. */
static struct rawstream *server_uni(const uint8_t *b, size_t n)
{
	for (int i = 0; i < R.nst; i++)
		if ((R.st[i].sid & 3) == 3 && R.st[i].len >= n && !memcmp(R.st[i].buf, b, n))
			return &R.st[i];
	return NULL;
}

static const uint8_t wt_uni_pfx[] = {0x40, 0x54, 0x00};

static int got_setup_stream(void)
{
	return server_uni(wt_uni_pfx, 3) != NULL && server_uni((const uint8_t *)"\0", 1) != NULL;
}

/* A browser-like client: its SETTINGS, QPACK streams and CONNECT; the
 * relay's SETTINGS and 200 come back, the session's streams carry the
 * WebTransport prefix; a CLOSE_WEBTRANSPORT_SESSION capsule ends the
 * session with its code and the connection with the mapped one. */
START_TEST(session_settings_prefix_capsule)
{
	const char *kv[] = {":method",
	                    "CONNECT",
	                    ":protocol",
	                    "webtransport",
	                    ":scheme",
	                    "https",
	                    ":authority",
	                    "10.0.0.2:4443",
	                    ":path",
	                    "/",
	                    "origin",
	                    "https://t",
	                    "wt-available-protocols",
	                    GOOD_PROTOS};
	int status = 0, hl;
	enum moq_version v = 0;
	struct rawstream *ctl, *setup;
	uint64_t type, flen;
	struct moq_h3_settings set;
	uint8_t cap[64];
	int cn;

	raw_connect(kv, 7);
	run_until(got_setup_stream, 3000);
	ck_assert(R.established);
	hl = raw_response(&status, &v);
	ck_assert_int_gt(hl, 0);
	ck_assert_int_eq(status, 200);
	ck_assert_int_eq(v, MOQ_LITE_05);
	ck_assert_uint_eq(S.wst.sessions, 1);
	ck_assert_uint_eq(S.wst.h3_errors, 0);
	/* the server's control stream: type 0, SETTINGS with ours */
	ctl = server_uni((const uint8_t *)"\0", 1);
	ck_assert_ptr_nonnull(ctl);
	hl = moq_h3_frame_head(ctl->buf + 1, ctl->len - 1, &type, &flen);
	ck_assert_int_gt(hl, 0);
	ck_assert_uint_eq(type, MOQ_H3_FRAME_SETTINGS);
	ck_assert_int_eq(moq_h3_settings_decode(ctl->buf + 1 + hl, flen, &set), 0);
	ck_assert_uint_eq(set.enable_connect, 1);
	ck_assert_uint_eq(set.h3_datagram, 1);
	ck_assert_uint_eq(set.wt_max_sessions, 1);
	/* lite-05: the session's SETUP stream, behind the WT uni prefix: 0x54,
	 * session 0, then moq-lite's SETUP stream type 0x1 */
	setup = server_uni(wt_uni_pfx, 3);
	ck_assert_ptr_nonnull(setup);
	ck_assert_uint_gt(setup->len, 4);
	ck_assert_uint_eq(setup->buf[3], MOQ_STREAM_SETUP);
	/* the capsule: code 7, the session closes with 7 and the connection
	 * with 7 in the HTTP/3 space */
	cn = moq_h3_close_capsule(cap, sizeof(cap), 7, "bye", 3);
	ck_assert_int_ge(raw_put(R.req, cap, (size_t)cn, 1), 0);
	run_until(raw_is_closed, 3000);
	ck_assert(R.closed);
	ck_assert_int_eq(R.ci.kind, MOQ_QUIC_CLOSE_APPLICATION);
	ck_assert_uint_eq(R.ci.code, moq_h3_code_to_h3(7));
	ck_assert_uint_eq(S.wst.capsules_close, 1);
	ck_assert_int_eq(S.closed_n, 1);
	ck_assert_uint_eq(S.closed_code, 7);
}
END_TEST

/* Refused CONNECTs answered with their status over real QUIC, nothing else
 * lost: no :protocol -> 400; only versions that are not ours -> 406. */
START_TEST(session_connect_refused)
{
	static const struct {
		int drop;
		const char *protos;
		int status;
	} cases[] = {{1, GOOD_PROTOS, 400}, {-1, "\"moqt-21\", \"moql\"", 406}};

	for (size_t i = 0; i < 2; i++) {
		const char *base[] = {":method",
		                      "CONNECT",
		                      ":protocol",
		                      "webtransport",
		                      ":scheme",
		                      "https",
		                      ":authority",
		                      "h:1",
		                      ":path",
		                      "/",
		                      "wt-available-protocols",
		                      cases[i].protos};
		const char *kv[12];
		size_t n = 0;
		int status = 0;
		enum moq_version v = 9;

		for (int p = 0; p < 6; p++)
			if (p != cases[i].drop) {
				kv[2 * n] = base[2 * p];
				kv[2 * n + 1] = base[2 * p + 1];
				n++;
			}
		free(R.reqf);
		memset(&R, 0, sizeof(R));
		raw_connect(kv, n);
		run_until(got_response, 3000);
		ck_assert_int_gt(raw_response(&status, &v), 0);
		ck_assert_int_eq(status, cases[i].status);
		ck_assert_int_eq(v, 0);
		ck_assert(raw_st(0)->fin);
		ck_assert_uint_eq(S.wst.refused, i + 1);
		ck_assert_uint_eq(S.wst.sessions, 0);
		moq_quic_conn_close(R.c, MOQ_H3_NO_ERROR, NULL);
	}
	ck_assert_int_eq(S.closed_n, 0);
}
END_TEST

static const char *const good_kv[] = {":method",
                                      "CONNECT",
                                      ":protocol",
                                      "webtransport",
                                      ":scheme",
                                      "https",
                                      ":authority",
                                      "10.0.0.2:4443",
                                      ":path",
                                      "/",
                                      "wt-available-protocols",
                                      GOOD_PROTOS};

static int never(void)
{
	return 0;
}

/* A new raw client whose session is open (its CONNECT answered). */
static void raw_fresh(void)
{
	free(R.reqf);
	memset(&R, 0, sizeof(R));
	raw_connect(good_kv, 6);
	run_until(got_setup_stream, 3000);
	ck_assert(got_setup_stream());
}

/* RFC 9114, 6.2.1 / 7.2: the client's control stream is read for the whole
 * connection: after its SETTINGS, a second SETTINGS, a HEADERS or a DATA
 * frame closes the connection with H3_FRAME_UNEXPECTED, unknown frame
 * types (Chrome sends a GREASE frame there) are skipped and the session
 * goes on, its end is H3_CLOSED_CRITICAL_STREAM, and a second control
 * stream is H3_STREAM_CREATION_ERROR. */
START_TEST(session_control_stream_parsed)
{
	static const struct {
		uint8_t b[8];
		size_t n;
		int fin;
		int new_stream; /* 1: on a second control stream; 2: on the QPACK
		                 * encoder stream; 3: RESET_STREAM the control stream */
		uint64_t code;
	} cases[] = {
	        {{0x04, 0x00}, 2, 0, 0, MOQ_H3_FRAME_UNEXPECTED},        /* SETTINGS again */
	        {{0x01, 0x01, 0x00}, 3, 0, 0, MOQ_H3_FRAME_UNEXPECTED},  /* HEADERS */
	        {{0x00, 0x01, 0x00}, 3, 0, 0, MOQ_H3_FRAME_UNEXPECTED},  /* DATA */
	        {{0x07, 0x02, 0x00, 0x00}, 4, 0, 0, MOQ_H3_FRAME_ERROR}, /* GOAWAY, 1 byte extra */
	        {{0}, 0, 1, 0, MOQ_H3_CLOSED_CRITICAL_STREAM},           /* FIN */
	        {{0x00, 0x04, 0x00}, 3, 0, 1, MOQ_H3_STREAM_CREATION_ERROR},
	        {{0x02}, 1, 0, 1, MOQ_H3_STREAM_CREATION_ERROR}, /* a second QPACK encoder */
	        {{0}, 0, 1, 2, MOQ_H3_CLOSED_CRITICAL_STREAM},   /* QPACK encoder's FIN */
	        {{0}, 0, 0, 3, MOQ_H3_CLOSED_CRITICAL_STREAM},   /* control stream reset */
	};
	uint64_t errs = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t sid = -1;

		raw_fresh();
		if (cases[i].new_stream == 1) {
			ck_assert_int_eq(moq_quic_stream_open(R.c, 0, &sid), 0);
			ck_assert_int_ge(raw_put(sid, cases[i].b, cases[i].n, 0), 0);
		} else if (cases[i].new_stream == 2) {
			ck_assert_int_ge(raw_put(R.enc, cases[i].b, cases[i].n, cases[i].fin), 0);
		} else if (cases[i].new_stream == 3) {
			ck_assert_int_eq(moq_quic_stream_reset(R.c, R.ctl, MOQ_H3_NO_ERROR), 0);
		} else {
			ck_assert_int_ge(raw_put(R.ctl, cases[i].b, cases[i].n, cases[i].fin), 0);
		}
		run_until(raw_is_closed, 3000);
		ck_assert_msg(R.closed, "case %zu: the connection stayed open", i);
		ck_assert_int_eq(R.ci.kind, MOQ_QUIC_CLOSE_APPLICATION);
		ck_assert_msg(R.ci.code == cases[i].code, "case %zu: closed with 0x%lx", i,
		              (unsigned long)R.ci.code);
		ck_assert_uint_eq(S.wst.h3_errors, ++errs);
	}
	/* unknown / GREASE frames and a GOAWAY: read, nothing happens */
	{
		uint8_t f[64];
		size_t l = 0;

		raw_fresh();
		l += moq_h3_varint_put(f + l, 0x1f * 5 + 0x21);
		l += moq_h3_varint_put(f + l, 5);
		memcpy(f + l, "grease", 5);
		l += 5;
		f[l++] = 0x21; /* the first GREASE type, empty */
		f[l++] = 0x00;
		f[l++] = MOQ_H3_FRAME_GOAWAY;
		f[l++] = 0x01;
		f[l++] = 0x00;
		ck_assert_int_ge(raw_put(R.ctl, f, l, 0), 0);
		run_until(never, 300);
		ck_assert(!R.closed);
		ck_assert_uint_eq(S.wst.h3_errors, errs);
		ck_assert_int_eq(S.closed_n, (int)errs);
		/* then a HEADERS: the stream is still read */
		f[0] = MOQ_H3_FRAME_HEADERS;
		f[1] = 0x00;
		ck_assert_int_ge(raw_put(R.ctl, f, 2, 0), 0);
		run_until(raw_is_closed, 3000);
		ck_assert(R.closed);
		ck_assert_uint_eq(R.ci.code, MOQ_H3_FRAME_UNEXPECTED);
	}
}
END_TEST

/* draft-ietf-webtrans-http3, 3.1 / 3.2: a CONNECT that arrives before the
 * client's SETTINGS is held, not answered, and answered once they come;
 * SETTINGS that enable no WebTransport get 400. */
START_TEST(session_connect_waits_for_settings)
{
	static const uint8_t plain[] = {MOQ_H3_STREAM_CONTROL, MOQ_H3_FRAME_SETTINGS, 2,
	                                MOQ_H3_SET_QPACK_MAX_TABLE, 0};
	int status = 0;
	enum moq_version v = 0;

	for (int i = 0; i < 2; i++) {
		free(R.reqf);
		memset(&R, 0, sizeof(R));
		R.late_ctl = 1;
		raw_connect(good_kv, 6);
		/* the CONNECT (and the QPACK streams) went; no SETTINGS yet */
		run_until(never, 300);
		ck_assert(R.established);
		ck_assert_msg(raw_st(0)->len == 0, "answered before the client's SETTINGS");
		ck_assert(!R.closed);
		ck_assert_uint_eq(S.wst.held, (uint64_t)i + 1);
		ck_assert_uint_eq(S.wst.sessions, (uint64_t)i);
		/* now the control stream */
		ck_assert_int_eq(moq_quic_stream_open(R.c, 0, &R.ctl), 0);
		if (i == 0) {
			int n = moq_h3_control_open(R.ctl_buf, sizeof(R.ctl_buf), 1);
			ck_assert_int_ge(raw_put(R.ctl, R.ctl_buf, (size_t)n, 0), 0);
		} else {
			ck_assert_int_ge(raw_put(R.ctl, plain, sizeof(plain), 0), 0);
		}
		run_until(got_response, 3000);
		ck_assert_int_gt(raw_response(&status, &v), 0);
		ck_assert_int_eq(status, i == 0 ? 200 : 400);
		ck_assert_int_eq(v, i == 0 ? MOQ_LITE_05 : 0);
		ck_assert_uint_eq(S.wst.sessions, 1);
		if (i == 0) {
			run_until(got_setup_stream, 3000);
			ck_assert(got_setup_stream());
		}
		moq_quic_conn_close(R.c, MOQ_H3_NO_ERROR, NULL);
	}
}
END_TEST

/* Issue 22 item 14: a client that sends its CONNECT but never its SETTINGS
 * is not held until the idle timeout: after MOQ_WT_SETTINGS_WAIT_NS (10 s)
 * the connection is closed with H3_MISSING_SETTINGS, unanswered. */
START_TEST(session_settings_deadline)
{
	uint64_t t0, dt;

	R.late_ctl = 1;
	raw_connect(good_kv, 6);
	run_until(never, 300);
	ck_assert(R.established);
	ck_assert_uint_eq(S.wst.held, 1);
	ck_assert(!R.closed);
	t0 = moq_quic_link_now(S.lnk);
	/* in 50 ms slices: an idle link's virtual clock jumps to its next
	 * expiry (the idle timeout), where the relay's loop polls all along */
	for (int k = 0; k < 200 && !R.closed; k++) {
		run_until(raw_is_closed, 50);
		moq_wt_timers(moq_quic_link_now(S.lnk));
	}
	dt = moq_quic_link_now(S.lnk) - t0;
	printf("# SETTINGS never sent: closed 0x%llx %.2f s after the CONNECT was held\n",
	       (unsigned long long)R.ci.code, (double)(dt + 300 * MS) / 1e9);
	ck_assert_msg(R.closed, "still open 10 s after the CONNECT");
	ck_assert_uint_eq(R.ci.code, MOQ_H3_MISSING_SETTINGS);
	ck_assert_msg(raw_st(0)->len == 0, "the held CONNECT was answered");
	ck_assert_uint_eq(S.wst.sessions, 0);
	ck_assert_uint_ge(dt + 300 * MS, MOQ_WT_SETTINGS_WAIT_NS);
	ck_assert_uint_le(dt + 300 * MS, MOQ_WT_SETTINGS_WAIT_NS + 500 * MS);
}
END_TEST

/* A CONNECT without wt-available-protocols (a WebTransport client that
 * negotiates nothing): 200 without wt-protocol, as moq-relay answers, and
 * the default moq-lite version (05: its SETUP stream comes). */
START_TEST(session_connect_default_version)
{
	int status = 0, hl;
	enum moq_version v = 9;
	struct rawstream *r0;
	const nghttp3_mem *mem = nghttp3_mem_default();
	nghttp3_qpack_decoder *dec;
	nghttp3_qpack_stream_context *sctx;
	uint64_t type, flen;
	size_t off = 0;
	int fields = 0;

	raw_connect(good_kv, 5); /* the five pseudo-headers only */
	run_until(got_setup_stream, 3000);
	hl = raw_response(&status, &v);
	ck_assert_int_gt(hl, 0);
	ck_assert_int_eq(status, 200);
	ck_assert_int_eq(v, 0); /* no wt-protocol */
	ck_assert_uint_eq(S.wst.sessions, 1);
	ck_assert_uint_eq(S.wst.refused, 0);
	ck_assert(got_setup_stream());
	ck_assert_uint_eq(server_uni(wt_uni_pfx, 3)->buf[3], MOQ_STREAM_SETUP);
	/* the response's fields: :status and the draft-02 one, nothing else */
	r0 = raw_st(0);
	ck_assert_int_gt(moq_h3_frame_head(r0->buf, r0->len, &type, &flen), 0);
	ck_assert_int_eq(nghttp3_qpack_decoder_new(&dec, 0, 0, mem), 0);
	ck_assert_int_eq(nghttp3_qpack_stream_context_new(&sctx, 0, mem), 0);
	for (;;) {
		nghttp3_qpack_nv nv;
		uint8_t flags = 0;
		size_t h = (size_t)hl - (size_t)flen;
		nghttp3_ssize n = nghttp3_qpack_decoder_read_request(
		        dec, sctx, &nv, &flags, r0->buf + h + off, flen - off, 1);
		ck_assert_int_ge(n, 0);
		off += (size_t)n;
		if (flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT) {
			nghttp3_vec a = nghttp3_rcbuf_get_buf(nv.name);
			ck_assert(!(a.len == 11 && !memcmp(a.base, "wt-protocol", 11)));
			fields++;
			nghttp3_rcbuf_decref(nv.name);
			nghttp3_rcbuf_decref(nv.value);
		}
		if (flags & NGHTTP3_QPACK_DECODE_FLAG_FINAL)
			break;
	}
	ck_assert_int_eq(fields, 2);
	nghttp3_qpack_stream_context_del(sctx);
	nghttp3_qpack_decoder_del(dec);
}
END_TEST

/* --allowed-origins (moq_wt_cfg.allowed_origins): a browser's CONNECT from
 * another Origin gets 403 and no session; a listed one (any case) and a
 * request without Origin (not a browser) are served; a malformed
 * :authority gets 400. */
START_TEST(session_connect_origin)
{
	static const struct {
		const char *origin; /* NULL: none */
		const char *authority;
		int status;
	} cases[] = {
	        {"https://evil.test", "10.0.0.2:4443", 403},
	        {"https://GOOD.test", "10.0.0.2:4443", 200},
	        {NULL, "10.0.0.2:4443", 200},
	        {"https://other.test:8443", "10.0.0.2:4443", 200},
	        {"https://other.test", "10.0.0.2:4443", 403},
	        {"https://good.test", "x@10.0.0.2:4443", 400},
	};
	uint64_t refused = 0, sessions = 0;

	S.wcfg.allowed_origins = "https://good.test, https://other.test:8443";
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *kv[] = {":method",
		                    "CONNECT",
		                    ":protocol",
		                    "webtransport",
		                    ":scheme",
		                    "https",
		                    ":authority",
		                    cases[i].authority,
		                    ":path",
		                    "/",
		                    "wt-available-protocols",
		                    GOOD_PROTOS,
		                    "origin",
		                    cases[i].origin};
		int status = 0;
		enum moq_version v = 9;

		free(R.reqf);
		memset(&R, 0, sizeof(R));
		raw_connect(kv, cases[i].origin ? 7 : 6);
		run_until(got_response, 3000);
		ck_assert_int_gt(raw_response(&status, &v), 0);
		ck_assert_msg(status == cases[i].status, "case %zu: %d", i, status);
		if (status == 200) {
			ck_assert_int_eq(v, MOQ_LITE_05);
			sessions++;
		} else {
			ck_assert_int_eq(v, 0);
			ck_assert(raw_st(0)->fin);
			refused++;
		}
		ck_assert_uint_eq(S.wst.sessions, sessions);
		ck_assert_uint_eq(S.wst.refused, refused);
		moq_quic_conn_close(R.c, MOQ_H3_NO_ERROR, NULL);
	}
	ck_assert_uint_eq(S.wst.refused_origin, 2);
}
END_TEST

static int client_ready(void)
{
	return S.ready_n > 0;
}

static int stream_reset_seen(void)
{
	for (int i = 0; i < R.nst; i++)
		if (R.st[i].reset)
			return 1;
	return 0;
}

/* A moq-lite client over h3/'s own client (moq_wt_connect) gets a ready
 * session; a raw WebTransport bidi stream of an unknown moq-lite type is
 * reset with moq-lite's UNEXPECTED_STREAM in the HTTP/3 space, and only that
 * stream. */
START_TEST(session_client_and_error_mapping)
{
	struct moq_quic_addr l, r;
	struct moq_quic_conn *c;
	int err = 0;

	ck_assert_int_eq(moq_quic_addr_ip4("10.0.0.1", 5001, &l), 0);
	ck_assert_int_eq(moq_quic_addr_ip4("10.0.0.2", 4443, &r), 0);
	c = moq_quic_connect(S.cep, &l, &r, NULL, moq_quic_link_now(S.lnk), &err);
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_nonnull(
	        moq_wt_connect(c, S.cnode, "10.0.0.2:4443", "/", MOQ_ROLE_BOTH, NULL, NULL));
	run_until(client_ready, 3000);
	ck_assert_int_eq(S.ready_n, 1);
	ck_assert_uint_eq(S.wst.sessions, 1);

	/* the raw client: a bidi WT stream, SUBSCRIBE to nothing */
	{
		const char *kv[] = {":method",
		                    "CONNECT",
		                    ":protocol",
		                    "webtransport",
		                    ":scheme",
		                    "https",
		                    ":authority",
		                    "h:1",
		                    ":path",
		                    "/",
		                    "wt-available-protocols",
		                    GOOD_PROTOS};
		uint8_t b[16];
		size_t off = 0;
		int64_t sid;
		int n = 2;

		raw_connect(kv, 6);
		run_until(got_setup_stream, 3000);
		/* PROTOCOL.md, Streams: an unknown stream type resets that
		 * stream only, with UNEXPECTED_STREAM */
		off = moq_h3_stream_prefix(b, 1, 0);
		b[off++] = 0x3f;
		b[off++] = 0;
		ck_assert_int_eq(moq_quic_stream_open(R.c, 1, &sid), 0);
		(void)n;
		ck_assert_int_ge(raw_put(sid, b, off, 0), 0);
		run_until(stream_reset_seen, 3000);
		ck_assert_msg(
		        raw_st(sid)->reset, "len %zu fin %d first %02x streams_in %lu rejected %lu",
		        raw_st(sid)->len, raw_st(sid)->fin, raw_st(sid)->buf[0],
		        (unsigned long)S.wst.streams_in, (unsigned long)S.wst.streams_rejected);
		ck_assert_uint_eq(raw_st(sid)->reset_code,
		                  moq_h3_code_to_h3(MOQ_CODE_UNEXPECTED_STREAM));
		ck_assert_uint_eq(moq_h3_code_from_h3(raw_st(sid)->reset_code),
		                  MOQ_CODE_UNEXPECTED_STREAM);
		/* the session goes on */
		ck_assert(!R.closed);
		ck_assert_int_eq(S.closed_n, 0);
		ck_assert_uint_ge(S.wst.streams_in, 1);
	}
}
END_TEST

Suite *h3_suite(void);

Suite *h3_suite(void)
{
	Suite *s = suite_create("h3");
	TCase *t = tcase_create("wire");

	tcase_add_test(t, varints);
	tcase_add_test(t, error_codes_both_ways);
	tcase_add_test(t, settings_both_ways);
	tcase_add_test(t, connect_accepted);
	tcase_add_test(t, connect_refused);
	tcase_add_test(t, protocol_lists);
	tcase_add_test(t, authority_and_origin);
	tcase_add_test(t, response_both_ways);
	tcase_add_test(t, close_capsule);
	tcase_add_test(t, stream_and_datagram_prefixes);
	tcase_add_test(t, control_stream_frames);
	suite_add_tcase(s, t);
	t = tcase_create("session");
	tcase_add_checked_fixture(t, s_setup, s_teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, session_settings_prefix_capsule);
	tcase_add_test(t, session_connect_refused);
	tcase_add_test(t, session_client_and_error_mapping);
	tcase_add_test(t, session_control_stream_parsed);
	tcase_add_test(t, session_connect_waits_for_settings);
	tcase_add_test(t, session_settings_deadline);
	tcase_add_test(t, session_connect_default_version);
	tcase_add_test(t, session_connect_origin);
	suite_add_tcase(s, t);
	return s;
}
