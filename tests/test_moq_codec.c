/* SPDX-License-Identifier: MIT */
/*
 * test_moq_codec.c: the moq-lite codec against golden bytes from the
 * reference JS client (tests/oracle), round trips for every message and
 * version, strict decoding, and the incremental group stream parser.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "moq_err.h"
#include "oracle/golden_vectors.h"

#define S(lit) ((struct moq_str){(lit), sizeof(lit) - 1})

static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = strlen(hex) / 2;

	ck_assert_uint_le(n, cap);
	for (size_t i = 0; i < n; i++) {
		unsigned x;
		ck_assert_int_eq(sscanf(hex + 2 * i, "%2x", &x), 1);
		out[i] = (uint8_t)x;
	}
	return n;
}

static const char *golden(const char *name);

/* A message's golden bytes; group headers drop their stream type byte. */
static size_t golden_msg(const char *name, uint8_t *out, size_t cap)
{
	size_t n = unhex(golden(name), out, cap);

	if (strncmp(name, "group_hdr", 9) == 0) {
		ck_assert_int_eq(out[0], MOQ_STREAM_GROUP);
		memmove(out, out + 1, --n);
	}
	return n;
}

static const char *golden(const char *name)
{
	for (size_t i = 0; i < sizeof(golden_vecs) / sizeof(golden_vecs[0]); i++)
		if (strcmp(golden_vecs[i].name, name) == 0)
			return golden_vecs[i].hex;
	ck_abort_msg("no golden vector %s", name);
	return NULL;
}

/* A message built in C with the same fields as tests/oracle/golden.mjs. */
struct built {
	char name[40];
	enum moq_version v;
	struct moq_msg m;
};

static int build_all(struct built *out, size_t cap)
{
	size_t n = 0;
	struct built *b;

#define ADD(nm, ver, ty)                                                                           \
	do {                                                                                       \
		ck_assert_uint_lt(n, cap);                                                         \
		b = &out[n++];                                                                     \
		memset(b, 0, sizeof(*b));                                                          \
		snprintf(b->name, sizeof(b->name), "%s", nm);                                      \
		b->v = ver;                                                                        \
		b->m.type = ty;                                                                    \
	} while (0)

	ADD("setup5_full", MOQ_LITE_05, MOQ_MSG_SETUP);
	b->m.u.setup = (struct moq_setup){.has_probe = true,
	                                  .probe = 1,
	                                  .has_path = true,
	                                  .path = S("live/room?jwt=abc"),
	                                  .has_role = true,
	                                  .role = MOQ_ROLE_PUBLISHER,
	                                  .has_origin = true,
	                                  .origin = 12345};
	ADD("setup5_empty", MOQ_LITE_05, MOQ_MSG_SETUP);
	ADD("setup5_sub", MOQ_LITE_05, MOQ_MSG_SETUP);
	b->m.u.setup = (struct moq_setup){
	        .has_role = true, .role = MOQ_ROLE_SUBSCRIBER, .has_origin = true, .origin = 7};
	for (int v = 3; v <= 5; v++) {
		char nm[40];
#define NM(fmt) (snprintf(nm, sizeof(nm), fmt, v), nm)
		ADD(NM("announce_req%d"), v, MOQ_MSG_ANNOUNCE_REQ);
		b->m.u.announce_req = (struct moq_announce_req){S("demo"), v >= 4 ? 7 : 0};
		ADD(NM("announce_req%d_root"), v, MOQ_MSG_ANNOUNCE_REQ);
		b->m.u.announce_req = (struct moq_announce_req){S(""), 0};
		ADD(NM("announce%d_active"), v, MOQ_MSG_ANNOUNCE);
		b->m.u.announce.status = MOQ_ANNOUNCE_ACTIVE;
		b->m.u.announce.suffix = S("room1");
		b->m.u.announce.hop_count = 2;
		b->m.u.announce.hops[0] = v >= 4 ? 5 : 0;
		b->m.u.announce.hops[1] = v >= 4 ? 300 : 0;
		ADD(NM("announce%d_ended"), v, MOQ_MSG_ANNOUNCE);
		b->m.u.announce.status = MOQ_ANNOUNCE_ENDED;
		b->m.u.announce.suffix = S("room1");
		ADD(NM("subscribe%d_live"), v, MOQ_MSG_SUBSCRIBE);
		b->m.u.subscribe =
		        (struct moq_subscribe){1,    S("demo/room"), S("video"),    7, true,
		                               5000, MOQ_GROUP_NONE, MOQ_GROUP_NONE};
		ADD(NM("subscribe%d_range"), v, MOQ_MSG_SUBSCRIBE);
		b->m.u.subscribe = (struct moq_subscribe){
		        300, S("demo/room"), S("audio"), 255, false, 0, 10, 20};
		ADD(NM("subscribe_update%d"), v, MOQ_MSG_SUBSCRIBE_UPDATE);
		b->m.u.subscribe_update =
		        (struct moq_subscribe_update){3, false, 250, 4, MOQ_GROUP_NONE};
		if (v < 5) {
			ADD(NM("subscribe_ok%d"), v, MOQ_MSG_SUBSCRIBE_REPLY);
			b->m.u.subscribe_reply.kind = MOQ_SUB_OK;
			b->m.u.subscribe_reply.priority = 7;
			b->m.u.subscribe_reply.ordered = true;
			b->m.u.subscribe_reply.max_latency_ms = 5000;
			b->m.u.subscribe_reply.start = 0;
			b->m.u.subscribe_reply.end = MOQ_GROUP_NONE;
			ADD(NM("subscribe_drop%d"), v, MOQ_MSG_SUBSCRIBE_REPLY);
			b->m.u.subscribe_reply.kind = MOQ_SUB_DROP;
			b->m.u.subscribe_reply.drop_start = 3;
			b->m.u.subscribe_reply.drop_end = 5;
			b->m.u.subscribe_reply.drop_code = 31;
			b->m.u.subscribe_reply.start = b->m.u.subscribe_reply.end = MOQ_GROUP_NONE;
		}
		if (v >= 4) {
			ADD(NM("goaway%d"), v, MOQ_MSG_GOAWAY);
			b->m.u.goaway.uri = S("https://relay.example/moq");
			ADD(NM("goaway%d_empty"), v, MOQ_MSG_GOAWAY);
			b->m.u.goaway.uri = S("");
		}
		ADD(NM("probe%d"), v, MOQ_MSG_PROBE);
		b->m.u.probe = (struct moq_probe){2500000, v >= 4 ? 30 : 0};
		ADD(NM("fetch%d"), v, MOQ_MSG_FETCH);
		b->m.u.fetch = (struct moq_fetch){S("demo/room"), S("video"), 9, 17};
#undef NM
	}
	ADD("announce_ok5", MOQ_LITE_05, MOQ_MSG_ANNOUNCE_OK);
	b->m.u.announce_ok = (struct moq_announce_ok){99, 2};
	ADD("subscribe_start5", MOQ_LITE_05, MOQ_MSG_SUBSCRIBE_REPLY);
	b->m.u.subscribe_reply.kind = MOQ_SUB_START;
	b->m.u.subscribe_reply.group = 42;
	b->m.u.subscribe_reply.start = b->m.u.subscribe_reply.end = MOQ_GROUP_NONE;
	ADD("subscribe_end5", MOQ_LITE_05, MOQ_MSG_SUBSCRIBE_REPLY);
	b->m.u.subscribe_reply.kind = MOQ_SUB_END;
	b->m.u.subscribe_reply.group = 100;
	b->m.u.subscribe_reply.start = b->m.u.subscribe_reply.end = MOQ_GROUP_NONE;
	ADD("subscribe_drop5", MOQ_LITE_05, MOQ_MSG_SUBSCRIBE_REPLY);
	b->m.u.subscribe_reply.kind = MOQ_SUB_DROP;
	b->m.u.subscribe_reply.drop_start = 2;
	b->m.u.subscribe_reply.drop_end = 3;
	b->m.u.subscribe_reply.drop_code = 26;
	b->m.u.subscribe_reply.start = b->m.u.subscribe_reply.end = MOQ_GROUP_NONE;
	ADD("track5", MOQ_LITE_05, MOQ_MSG_TRACK);
	b->m.u.track = (struct moq_track){S("demo/room"), S("video")};
	ADD("track_info5", MOQ_LITE_05, MOQ_MSG_TRACK_INFO);
	b->m.u.track_info = (struct moq_track_info){5, true, 5000, 1000};
	ADD("group_hdr", MOQ_LITE_05, MOQ_MSG_GROUP);
	b->m.u.group = (struct moq_group){1, 42};
	ADD("group_hdr_big", MOQ_LITE_05, MOQ_MSG_GROUP);
	b->m.u.group = (struct moq_group){70000, 20000};
#undef ADD
	return (int)n;
}

static bool str_eq(struct moq_str a, struct moq_str b)
{
	return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

/* Field-by-field equality (strings by content). */
static void assert_msg_eq(const struct moq_msg *a, const struct moq_msg *b, const char *name)
{
	ck_assert_msg(a->type == b->type, "%s: type", name);
	switch (a->type) {
	case MOQ_MSG_SETUP:
		ck_assert_msg(a->u.setup.has_probe == b->u.setup.has_probe &&
		                      a->u.setup.probe == b->u.setup.probe &&
		                      a->u.setup.has_path == b->u.setup.has_path &&
		                      (!a->u.setup.has_path ||
		                       str_eq(a->u.setup.path, b->u.setup.path)) &&
		                      a->u.setup.has_role == b->u.setup.has_role &&
		                      a->u.setup.role == b->u.setup.role &&
		                      a->u.setup.has_origin == b->u.setup.has_origin &&
		                      a->u.setup.origin == b->u.setup.origin,
		              "%s: setup", name);
		break;
	case MOQ_MSG_ANNOUNCE_REQ:
		ck_assert_msg(str_eq(a->u.announce_req.prefix, b->u.announce_req.prefix) &&
		                      a->u.announce_req.exclude_hop ==
		                              b->u.announce_req.exclude_hop,
		              "%s", name);
		break;
	case MOQ_MSG_ANNOUNCE: {
		const struct moq_announce *x = &a->u.announce, *y = &b->u.announce;
		uint32_t hops = x->status == MOQ_ANNOUNCE_ENDED ? 0 : x->hop_count;
		ck_assert_msg(x->status == y->status && str_eq(x->suffix, y->suffix), "%s", name);
		ck_assert_msg(y->hop_count == hops, "%s: hops", name);
		for (uint32_t i = 0; i < hops; i++)
			ck_assert_msg(x->hops[i] == y->hops[i], "%s: hop %u", name, i);
		break;
	}
	case MOQ_MSG_SUBSCRIBE: {
		const struct moq_subscribe *x = &a->u.subscribe, *y = &b->u.subscribe;
		ck_assert_msg(x->id == y->id && str_eq(x->broadcast, y->broadcast) &&
		                      str_eq(x->track, y->track) && x->priority == y->priority &&
		                      x->ordered == y->ordered &&
		                      x->max_latency_ms == y->max_latency_ms &&
		                      x->start == y->start && x->end == y->end,
		              "%s", name);
		break;
	}
	case MOQ_MSG_TRACK:
		ck_assert_msg(str_eq(a->u.track.broadcast, b->u.track.broadcast) &&
		                      str_eq(a->u.track.track, b->u.track.track),
		              "%s", name);
		break;
	case MOQ_MSG_FETCH:
		ck_assert_msg(str_eq(a->u.fetch.broadcast, b->u.fetch.broadcast) &&
		                      str_eq(a->u.fetch.track, b->u.fetch.track) &&
		                      a->u.fetch.priority == b->u.fetch.priority &&
		                      a->u.fetch.group == b->u.fetch.group,
		              "%s", name);
		break;
	case MOQ_MSG_GOAWAY:
		ck_assert_msg(str_eq(a->u.goaway.uri, b->u.goaway.uri), "%s", name);
		break;
	case MOQ_MSG_SUBSCRIBE_UPDATE: {
		const struct moq_subscribe_update *x = &a->u.subscribe_update,
		                                  *y = &b->u.subscribe_update;
		ck_assert_msg(x->priority == y->priority && x->ordered == y->ordered &&
		                      x->max_latency_ms == y->max_latency_ms &&
		                      x->start == y->start && x->end == y->end,
		              "%s", name);
		break;
	}
	case MOQ_MSG_SUBSCRIBE_REPLY: {
		const struct moq_subscribe_reply *x = &a->u.subscribe_reply,
		                                 *y = &b->u.subscribe_reply;
		ck_assert_msg(x->kind == y->kind && x->group == y->group &&
		                      x->drop_start == y->drop_start &&
		                      x->drop_end == y->drop_end && x->drop_code == y->drop_code &&
		                      x->priority == y->priority && x->ordered == y->ordered &&
		                      x->max_latency_ms == y->max_latency_ms &&
		                      x->start == y->start && x->end == y->end,
		              "%s", name);
		break;
	}
	case MOQ_MSG_TRACK_INFO:
		ck_assert_msg(a->u.track_info.priority == b->u.track_info.priority &&
		                      a->u.track_info.ordered == b->u.track_info.ordered &&
		                      a->u.track_info.max_latency_ms ==
		                              b->u.track_info.max_latency_ms &&
		                      a->u.track_info.timescale == b->u.track_info.timescale,
		              "%s", name);
		break;
	case MOQ_MSG_ANNOUNCE_OK:
		ck_assert_msg(a->u.announce_ok.origin == b->u.announce_ok.origin &&
		                      a->u.announce_ok.active == b->u.announce_ok.active,
		              "%s", name);
		break;
	case MOQ_MSG_GROUP:
		ck_assert_msg(a->u.group.subscribe_id == b->u.group.subscribe_id &&
		                      a->u.group.sequence == b->u.group.sequence,
		              "%s", name);
		break;
	case MOQ_MSG_PROBE:
		ck_assert_msg(a->u.probe.bitrate == b->u.probe.bitrate &&
		                      a->u.probe.rtt_ms == b->u.probe.rtt_ms,
		              "%s", name);
		break;
	default:
		ck_abort_msg("%s: unknown type", name);
		break;
	}
}

START_TEST(test_golden_encode)
{
	static struct built all[128];
	int n = build_all(all, 128);
	uint8_t want[512], got[512];

	ck_assert_int_gt(n, 40);
	for (int i = 0; i < n; i++) {
		size_t wl = golden_msg(all[i].name, want, sizeof(want));
		int gl = moq_msg_encode(got, sizeof(got), all[i].v, &all[i].m);
		ck_assert_msg(gl == (int)wl, "%s: %d bytes, oracle %zu", all[i].name, gl, wl);
		ck_assert_msg(memcmp(got, want, wl) == 0, "%s: bytes differ", all[i].name);
	}
}
END_TEST

/* Decode the oracle's bytes, compare fields, and re-encode them. */
START_TEST(test_golden_decode_roundtrip)
{
	static struct built all[128];
	int n = build_all(all, 128);
	uint8_t want[512], got[512];

	for (int i = 0; i < n; i++) {
		struct moq_msg m;
		size_t wl = golden_msg(all[i].name, want, sizeof(want));
		int rc = moq_msg_decode(all[i].m.type, all[i].v, want, wl, 4096, &m);
		ck_assert_msg(rc == (int)wl, "%s: decode %d", all[i].name, rc);
		assert_msg_eq(&all[i].m, &m, all[i].name);
		ck_assert_int_eq(moq_msg_encode(got, sizeof(got), all[i].v, &m), (int)wl);
		ck_assert(memcmp(got, want, wl) == 0);
	}
}
END_TEST

/* Every truncation is SHORT; a body one byte short or long is DECODE. */
START_TEST(test_strict_decoding)
{
	static struct built all[128];
	int n = build_all(all, 128);
	uint8_t buf[512], mut[520];

	for (int i = 0; i < n; i++) {
		struct moq_msg m;
		size_t len = golden_msg(all[i].name, buf, sizeof(buf));
		size_t lo = all[i].m.type == MOQ_MSG_SUBSCRIBE_REPLY ? 1 : 0; /* length offset */

		for (size_t k = 0; k < len; k++)
			ck_assert_msg(moq_msg_decode(all[i].m.type, all[i].v, buf, k, 4096, &m) ==
			                      MOQ_ERR_SHORT,
			              "%s: %zu bytes", all[i].name, k);
		if (buf[lo] >= 63 || buf[lo] == 0)
			continue; /* only one-byte length prefixes are edited here */
		/* Body one byte short: the declared length cuts the last field. */
		memcpy(mut, buf, len);
		mut[lo]--;
		ck_assert_msg(moq_msg_decode(all[i].m.type, all[i].v, mut, len - 1, 4096, &m) ==
		                      MOQ_ERR_DECODE,
		              "%s: short body accepted", all[i].name);
		/* A byte left over. */
		memcpy(mut, buf, len);
		mut[lo]++;
		mut[len] = 0;
		ck_assert_msg(moq_msg_decode(all[i].m.type, all[i].v, mut, len + 1, 4096, &m) ==
		                      MOQ_ERR_DECODE,
		              "%s: trailing byte accepted", all[i].name);
		/* The size of the whole message is known from its prefix. */
		ck_assert_int_eq(moq_msg_peek_len(all[i].m.type, buf, lo + 1, 4096), (int)len);
		ck_assert_int_eq(moq_msg_peek_len(all[i].m.type, buf, lo, 4096), MOQ_ERR_SHORT);
		ck_assert_int_eq(moq_msg_peek_len(all[i].m.type, buf, len, 0), MOQ_ERR_TOO_LARGE);
		/* Too long for the caller's bound. */
		ck_assert_int_eq(moq_msg_decode(all[i].m.type, all[i].v, buf, len, 0, &m),
		                 buf[lo] ? MOQ_ERR_TOO_LARGE : (int)len);
	}
}
END_TEST

START_TEST(test_varints)
{
	static const uint64_t vals[] = {0,
	                                37,
	                                63,
	                                64,
	                                15293,
	                                16383,
	                                16384,
	                                494878333,
	                                1073741823,
	                                1073741824,
	                                151288809941952652ull,
	                                MOQ_VARINT_MAX};
	uint8_t want[8], got[8];
	char name[48];
	uint64_t v;

	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		snprintf(name, sizeof(name), "varint_%llu", (unsigned long long)vals[i]);
		size_t wl = unhex(golden(name), want, sizeof(want));
		ck_assert_int_eq(moq_varint_put(got, sizeof(got), vals[i]), (int)wl);
		ck_assert(memcmp(got, want, wl) == 0);
		ck_assert_int_eq(moq_varint_get(want, wl, &v), (int)wl);
		ck_assert(v == vals[i]);
		ck_assert_int_eq(moq_varint_get(want, wl - 1, &v),
		                 wl > 1 ? MOQ_ERR_SHORT : MOQ_ERR_SHORT);
		ck_assert_int_eq(moq_varint_put(got, wl - 1, vals[i]), MOQ_ERR_TOO_LARGE);
	}
	ck_assert_int_eq(moq_varint_put(got, 8, MOQ_VARINT_MAX + 1), MOQ_ERR_INVAL);
	/* RFC 9000, 16: a non-minimal encoding is still a valid varint. */
	ck_assert_int_eq(moq_varint_get((const uint8_t *)"\x40\x25", 2, &v), 2);
	ck_assert(v == 37);
	ck_assert(moq_zigzag(0) == 0 && moq_zigzag(-1) == 1 && moq_zigzag(1) == 2);
	ck_assert(moq_zigzag(INT64_MIN) == UINT64_MAX);
	for (int64_t s = -1000; s <= 1000; s += 7)
		ck_assert(moq_unzigzag(moq_zigzag(s)) == s);
	ck_assert(moq_unzigzag(moq_zigzag(INT64_MAX)) == INT64_MAX);
}
END_TEST

START_TEST(test_paths)
{
	char out[256], in[256];
	size_t off;

	for (size_t i = 0; i < sizeof(golden_paths) / sizeof(golden_paths[0]); i++) {
		int n = moq_path_norm(out, sizeof(out), golden_paths[i].in,
		                      strlen(golden_paths[i].in));
		ck_assert_int_eq(n, (int)strlen(golden_paths[i].out));
		ck_assert(memcmp(out, golden_paths[i].out, (size_t)n) == 0);
	}
	/* 32 segments are fine, 33 are not. */
	in[0] = 0;
	for (int i = 0; i < 32; i++)
		strcat(in, "/a");
	ck_assert_int_eq(moq_path_norm(out, sizeof(out), in, strlen(in)), 63);
	ck_assert_uint_eq(moq_path_segments(out, 63), 32);
	strcat(in, "//b/");
	ck_assert_int_eq(moq_path_norm(out, sizeof(out), in, strlen(in)), MOQ_ERR_DECODE);
	ck_assert_int_eq(moq_path_norm(out, 3, "abcd", 4), MOQ_ERR_TOO_LARGE);
	/* Whole-segment prefixes. */
	ck_assert(moq_path_has_prefix("foo", 3, "foo/bar", 7, &off) && off == 4);
	ck_assert(moq_path_has_prefix("foo", 3, "foo", 3, &off) && off == 3);
	ck_assert(moq_path_has_prefix("", 0, "foo", 3, &off) && off == 0);
	ck_assert(!moq_path_has_prefix("foo", 3, "foobar", 6, NULL));
	ck_assert(!moq_path_has_prefix("foo/bar", 7, "foo", 3, NULL));
	ck_assert(moq_path_has_prefix("foo/bar", 7, "foo/bar/baz", 11, &off) && off == 8);

	/* A path of 33 segments on the wire is a decode error. */
	{
		uint8_t buf[300];
		struct moq_msg m = {.type = MOQ_MSG_ANNOUNCE_REQ};
		size_t l = strlen(in);
		buf[0] = (uint8_t)(0x40 | ((l + 3) >> 8));
		buf[1] = (uint8_t)(l + 3);
		buf[2] = (uint8_t)(0x40 | (l >> 8));
		buf[3] = (uint8_t)l;
		memcpy(buf + 4, in, l);
		buf[4 + l] = 0;
		ck_assert_int_eq(
		        moq_msg_decode(MOQ_MSG_ANNOUNCE_REQ, MOQ_LITE_04, buf, l + 5, 4096, &m),
		        MOQ_ERR_DECODE);
		m.u.announce_req.prefix = (struct moq_str){in, l};
		ck_assert_int_eq(moq_msg_encode(buf, sizeof(buf), MOQ_LITE_04, &m), MOQ_ERR_INVAL);
	}
}
END_TEST

START_TEST(test_setup_rules)
{
	struct moq_msg m;
	/* unknown id 0x20 ignored */
	static const uint8_t unk[] = {0x07, 0x02, 0x20, 0x01, 0xaa, 0x05, 0x01, 0x09};
	/* id 0x5 twice */
	static const uint8_t dup[] = {0x07, 0x02, 0x05, 0x01, 0x01, 0x05, 0x01, 0x02};
	/* 65 parameters */
	static const uint8_t many[] = {0x02, 0x40, 0x41};
	/* role value with a trailing byte */
	static const uint8_t trail[] = {0x05, 0x01, 0x03, 0x02, 0x01, 0x00};

	ck_assert_int_eq(moq_msg_decode(MOQ_MSG_SETUP, MOQ_LITE_05, unk, sizeof(unk), 4096, &m),
	                 (int)sizeof(unk));
	ck_assert(!m.u.setup.has_probe && m.u.setup.has_origin && m.u.setup.origin == 9);
	ck_assert_int_eq(moq_msg_decode(MOQ_MSG_SETUP, MOQ_LITE_05, dup, sizeof(dup), 4096, &m),
	                 MOQ_ERR_PROTO);
	ck_assert_int_eq(moq_msg_decode(MOQ_MSG_SETUP, MOQ_LITE_05, many, sizeof(many), 4096, &m),
	                 MOQ_ERR_PROTO);
	ck_assert_int_eq(moq_msg_decode(MOQ_MSG_SETUP, MOQ_LITE_05, trail, sizeof(trail), 4096, &m),
	                 MOQ_ERR_DECODE);
	/* Messages that do not exist in a version. */
	ck_assert_int_eq(moq_msg_decode(MOQ_MSG_SETUP, MOQ_LITE_04, unk, sizeof(unk), 4096, &m),
	                 MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_msg_decode(MOQ_MSG_GOAWAY, MOQ_LITE_03, unk, sizeof(unk), 4096, &m),
	                 MOQ_ERR_INVAL);
	/* A bool other than 0/1, a zero timescale, a bad status, a bad reply type. */
	{
		static const uint8_t ti[] = {0x04, 0x05, 0x02, 0x00, 0x01};
		static const uint8_t ti0[] = {0x04, 0x05, 0x01, 0x00, 0x00};
		static const uint8_t an[] = {0x03, 0x02, 0x00, 0x00};
		static const uint8_t rep[] = {0x03, 0x01, 0x00};
		ck_assert_int_eq(moq_msg_decode(MOQ_MSG_TRACK_INFO, MOQ_LITE_05, ti, 5, 64, &m),
		                 MOQ_ERR_DECODE);
		ck_assert_int_eq(moq_msg_decode(MOQ_MSG_TRACK_INFO, MOQ_LITE_05, ti0, 5, 64, &m),
		                 MOQ_ERR_DECODE);
		ck_assert_int_eq(moq_msg_decode(MOQ_MSG_ANNOUNCE, MOQ_LITE_04, an, 4, 64, &m),
		                 MOQ_ERR_DECODE);
		ck_assert_int_eq(moq_msg_decode(MOQ_MSG_ANNOUNCE, MOQ_LITE_05, an, 4, 64, &m), 4);
		ck_assert_int_eq(
		        moq_msg_decode(MOQ_MSG_SUBSCRIBE_REPLY, MOQ_LITE_05, rep, 3, 64, &m),
		        MOQ_ERR_DECODE);
	}
}
END_TEST

/* Parse "group_hdr" + "frames5" split into chunks of every size. */
static void parse_frames(enum moq_version v, const uint8_t *s, size_t len, size_t chunk,
                         bool header)
{
	static const int64_t ts[3] = {1000, 1033, 1020};
	uint8_t pay[3][256];
	size_t plen[3] = {0, 0, 0};
	int frames = -1, headers = 0;
	struct moq_group_rx rx;
	size_t off = 0;

	moq_group_rx_init(&rx, v, header);
	while (off < len) {
		size_t n = len - off < chunk ? len - off : chunk;
		const uint8_t *p = s + off;
		off += n;
		while (n) {
			struct moq_group_ev ev;
			int rc = moq_group_rx_next(&rx, p, n, &ev);
			ck_assert_int_gt(rc, 0);
			ck_assert_uint_le((size_t)rc, n);
			p += rc;
			n -= (size_t)rc;
			switch (ev.type) {
			case MOQ_GEV_HEADER:
				headers++;
				ck_assert(ev.group.subscribe_id == 1 && ev.group.sequence == 42);
				break;
			case MOQ_GEV_FRAME:
				frames++;
				ck_assert_int_lt(frames, 3);
				if (v >= MOQ_LITE_05)
					ck_assert(ev.timestamp == ts[frames]);
				break;
			case MOQ_GEV_DATA:
				ck_assert_int_ge(frames, 0);
				/* The payload is handed out in place, never copied. */
				ck_assert(ev.data >= s && ev.data + ev.data_len <= s + len);
				ck_assert_uint_le(ev.data_len, chunk);
				memcpy(pay[frames] + plen[frames], ev.data, ev.data_len);
				plen[frames] += ev.data_len;
				break;
			default:
				break;
			}
		}
	}
	ck_assert_int_eq(headers, header ? 1 : 0);
	ck_assert_int_eq(frames, 2);
	ck_assert_int_eq(moq_group_rx_fin(&rx), 0);
	ck_assert(plen[0] == 5 && memcmp(pay[0], "hello", 5) == 0);
	ck_assert(plen[1] == 0 && plen[2] == 200);
	for (int i = 0; i < 200; i++)
		ck_assert_int_eq(pay[2][i], i % 251);
}

START_TEST(test_group_parser_chunks)
{
	uint8_t s[600];
	size_t hl = unhex(golden("group_hdr"), s, sizeof(s));
	size_t fl;

	/* Skip the stream type byte: the session consumes it. */
	memmove(s, s + 1, --hl);
	fl = unhex(golden("frames5"), s + hl, sizeof(s) - hl);
	for (size_t chunk = 1; chunk <= hl + fl; chunk++)
		parse_frames(MOQ_LITE_05, s, hl + fl, chunk, true);
	/* A fetch response: frames only. */
	for (size_t chunk = 1; chunk <= fl; chunk += 3)
		parse_frames(MOQ_LITE_05, s + hl, fl, chunk, false);
	/* lite-03 frames have no timestamps. */
	fl = unhex(golden("frames3"), s + hl, sizeof(s) - hl);
	for (size_t chunk = 1; chunk <= hl + fl; chunk += 2)
		parse_frames(MOQ_LITE_03, s, hl + fl, chunk, true);

	/* Our frame header encoder agrees with the oracle's frames. */
	{
		uint8_t want[600], got[600];
		size_t wl = unhex(golden("frames5"), want, sizeof(want)), gl = 0;
		static const int64_t ts[3] = {1000, 1033, 1020};
		static const size_t sz[3] = {5, 0, 200};
		int64_t prev = 0;
		for (int i = 0; i < 3; i++) {
			int n = moq_frame_hdr_encode(got + gl, sizeof(got) - gl, MOQ_LITE_05,
			                             ts[i] - prev, sz[i]);
			ck_assert_int_gt(n, 0);
			gl += (size_t)n;
			prev = ts[i];
			memcpy(got + gl, want + gl, sz[i]); /* payload */
			gl += sz[i];
		}
		ck_assert_uint_eq(gl, wl);
		ck_assert(memcmp(got, want, wl) == 0);
	}

	/* The group stream header fast path writes what the generic encoder
	 * writes (stream type + GROUP), in every version, every varint size. */
	{
		static const uint64_t vals[] = {
		        0, 1, 63, 64, 16383, 16384, 1073741823, 1073741824, MOQ_VARINT_MAX};
		static const enum moq_version vs[] = {MOQ_LITE_03, MOQ_LITE_04, MOQ_LITE_05};
		uint8_t want[64], got[64];
		for (size_t vi = 0; vi < 3; vi++)
			for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
				for (size_t j = 0; j < sizeof(vals) / sizeof(vals[0]); j++) {
					struct moq_msg m = {.type = MOQ_MSG_GROUP};
					int wl = moq_varint_put(want, sizeof(want),
					                        MOQ_STREAM_GROUP);
					int n, gl;
					m.u.group.subscribe_id = vals[i];
					m.u.group.sequence = vals[j];
					n = moq_msg_encode(want + wl, sizeof(want) - (size_t)wl,
					                   vs[vi], &m);
					ck_assert_int_gt(n, 0);
					wl += n;
					gl = moq_group_hdr_encode(got, sizeof(got), vals[i],
					                          vals[j]);
					ck_assert_int_eq(gl, wl);
					ck_assert(memcmp(got, want, (size_t)wl) == 0);
					/* too small a buffer */
					ck_assert_int_eq(moq_group_hdr_encode(got, (size_t)wl - 1,
					                                      vals[i], vals[j]),
					                 MOQ_ERR_TOO_LARGE);
				}
		ck_assert_int_eq(moq_group_hdr_encode(got, sizeof(got), MOQ_VARINT_MAX + 1, 0),
		                 MOQ_ERR_INVAL);
	}
}
END_TEST

START_TEST(test_group_parser_errors)
{
	struct moq_group_rx rx;
	struct moq_group_ev ev;
	/* header, one frame of size 4 with only 2 bytes */
	static const uint8_t part[] = {0x02, 0x01, 0x2a, 0x00, 0x04, 0xaa, 0xbb};
	/* frame size 32 MiB + 1 */
	static const uint8_t big[] = {0x02, 0x01, 0x2a, 0x00, 0x82, 0x00, 0x00, 0x01};
	/* header with a trailing byte inside its length */
	static const uint8_t hdr[] = {0x03, 0x01, 0x2a, 0x00};
	size_t off = 0;
	int rc;

	moq_group_rx_init(&rx, MOQ_LITE_05, true);
	while (off < sizeof(part)) {
		rc = moq_group_rx_next(&rx, part + off, sizeof(part) - off, &ev);
		ck_assert_int_gt(rc, 0);
		off += (size_t)rc;
	}
	ck_assert_int_eq(moq_group_rx_fin(&rx), MOQ_ERR_DECODE);

	moq_group_rx_init(&rx, MOQ_LITE_05, true);
	off = 0;
	do {
		rc = moq_group_rx_next(&rx, big + off, sizeof(big) - off, &ev);
		if (rc > 0)
			off += (size_t)rc;
	} while (rc > 0 && off < sizeof(big));
	ck_assert_int_eq(rc, MOQ_ERR_TOO_LARGE);

	moq_group_rx_init(&rx, MOQ_LITE_05, true);
	ck_assert_int_eq(moq_group_rx_next(&rx, hdr, sizeof(hdr), &ev), MOQ_ERR_DECODE);
	/* A stream that ends before its header. */
	moq_group_rx_init(&rx, MOQ_LITE_05, true);
	ck_assert_int_eq(moq_group_rx_next(&rx, hdr, 1, &ev), 1);
	ck_assert_int_eq(moq_group_rx_fin(&rx), MOQ_ERR_DECODE);
	/* A stream type varint straddling two chunks. */
	{
		struct moq_varint_rx vr = {0};
		bool done;
		uint64_t v = 0;
		ck_assert_uint_eq(
		        moq_varint_rx_push(&vr, (const uint8_t *)"\x80\x01", 2, &done, &v), 2);
		ck_assert(!done);
		ck_assert_uint_eq(
		        moq_varint_rx_push(&vr, (const uint8_t *)"\x02\x03\x09", 3, &done, &v), 2);
		ck_assert(done && v == 0x010203);
	}
}
END_TEST

Suite *moq_codec_suite(void);

Suite *moq_codec_suite(void)
{
	Suite *s = suite_create("moq_codec");
	TCase *tc = tcase_create("codec");

	tcase_add_test(tc, test_golden_encode);
	tcase_add_test(tc, test_golden_decode_roundtrip);
	tcase_add_test(tc, test_strict_decoding);
	tcase_add_test(tc, test_varints);
	tcase_add_test(tc, test_paths);
	tcase_add_test(tc, test_setup_rules);
	tcase_add_test(tc, test_group_parser_chunks);
	tcase_add_test(tc, test_group_parser_errors);
	suite_add_tcase(s, tc);
	return s;
}
