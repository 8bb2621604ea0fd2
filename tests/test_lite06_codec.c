/* SPDX-License-Identifier: MIT */
/*
 * test_lite06_codec.c: the moq-lite-06 codec (moq/lite06_codec.c) against
 * golden bytes built by hand from the message figures of
 * draft-lcurley-moq-lite-06 (as transcribed in ../shared/PROTOCOL.md,
 * "moq-lite-06"; each figure is quoted beside its vector), round trips of
 * every message, strict decoding, and the per-version error code mapping.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lite06_codec.h"
#include "moq_err.h"

#define S(lit) ((struct moq_str){(lit), sizeof(lit) - 1})

static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = 0;

	for (const char *p = hex; *p;) {
		unsigned x;
		if (*p == ' ') {
			p++;
			continue;
		}
		ck_assert_uint_lt(n, cap);
		ck_assert_int_eq(sscanf(p, "%2x", &x), 1);
		out[n++] = (uint8_t)x;
		p += 2;
	}
	return n;
}

struct vec {
	const char *name;
	const char *hex; /* hand-built from the figure in the comment */
	struct moq6_msg m;
};

static struct vec vecs[] = {
        /* SETUP { Message Length (i), Parameter Count (i), { Parameter ID (i),
	 *   Parameter Length (i), Value } ... }; 0x1 Probe (i), 0x2 Path (s),
	 *   0x3 Role (i), 0x4 Cost (i), 0x5 Hop (i).
	 * 26 bytes: 5 params; probe 1; path "live?jwt=x" (10 B); role 1;
	 * cost 3; hop 300 (varint 0x412c, 2 B). */
        {"setup_full",
         "1a 05 01 01 01 02 0a 6c 69 76 65 3f 6a 77 74 3d 78 03 01 01 04 01 03 05 02 41 2c",
         {.type = MOQ6_SETUP,
          .u.setup = {.has_probe = true,
                      .probe = 1,
                      .has_path = true,
                      .path = {"live?jwt=x", 10},
                      .has_role = true,
                      .role = MOQ_ROLE_PUBLISHER,
                      .has_cost = true,
                      .cost = 3,
                      .has_hop = true,
                      .hop = 300}}},
        /* SETUP with no parameters: length 1, count 0 (Cost defaults to 1). */
        {"setup_empty", "01 00", {.type = MOQ6_SETUP, .u.setup = {.cost = MOQ6_COST_DEFAULT}}},
        /* ANNOUNCE_REQUEST { Message Length (i), Broadcast Path Prefix (s) }
	 * (no Exclude Hop in 06). */
        {"announce_request",
         "05 04 72 6f 6f 6d",
         {.type = MOQ6_ANNOUNCE_REQUEST, .u.announce_request = {{"room", 4}}}},
        /* ANNOUNCE_OK { Message Length (i), Hop ID (i), Active Count (i) } */
        {"announce_ok", "02 07 02", {.type = MOQ6_ANNOUNCE_OK, .u.announce_ok = {7, 2}}},
        /* ANNOUNCE_START { Type (i) = 0x0, Message Length (i), Route Prefix
	 *   Suffix (s), Hop Count (i), Hop ID (i) ..., Warm Cost (i), Cold Cost (i) }
	 * "a/b", hops [300, 7], warm 0, cold 5: body 10 bytes. */
        {"announce_start",
         "00 0a 03 61 2f 62 02 41 2c 07 00 05",
         {.type = MOQ6_ANNOUNCE,
          .u.announce = {.kind = MOQ6_ANN_START,
                         .suffix = {"a/b", 3},
                         .hop_count = 2,
                         .hops = {300, 7},
                         .warm_cost = 0,
                         .cold_cost = 5}}},
        /* ANNOUNCE_END { Type (i) = 0x1, Message Length (i), Announce ID (i) } */
        {"announce_end",
         "01 01 03",
         {.type = MOQ6_ANNOUNCE, .u.announce = {.kind = MOQ6_ANN_END, .id = 3, .suffix = {"", 0}}}},
        /* ANNOUNCE_UPDATE { Type (i) = 0x2, Message Length (i), Announce ID (i),
	 *   Hop Count (i), Hop ID (i) ..., Warm Cost (i), Cold Cost (i) }
	 * id 0, hops [9], warm 2, cold 70 (varint 0x4046). */
        {"announce_update",
         "02 06 00 01 09 02 40 46",
         {.type = MOQ6_ANNOUNCE,
          .u.announce = {.kind = MOQ6_ANN_UPDATE,
                         .id = 0,
                         .suffix = {"", 0},
                         .hop_count = 1,
                         .hops = {9},
                         .warm_cost = 2,
                         .cold_cost = 70}}},
        /* SUBSCRIBE { Message Length (i), Subscribe ID (i), Broadcast Path (s),
	 *   Track Name (s), Subscriber Priority (8), Subscriber Max Age (i),
	 *   Group Start (i), Group End (i), Frame Start (i), Frame End (i) }
	 * (no Ordered). id 1, "room/alice", "video", 0x80, max age 5000 ms
	 * (0x5388), start group 10 frame 2, unbounded: 25 bytes. */
        {"subscribe",
         "19 01 0a 72 6f 6f 6d 2f 61 6c 69 63 65 05 76 69 64 65 6f 80 53 88 0a 00 02 00",
         {.type = MOQ6_SUBSCRIBE,
          .u.subscribe = {1, {"room/alice", 10}, {"video", 5}, 0x80, 5000, 10, 0, 2, 0}}},
        /* SUBSCRIBE_UPDATE { Message Length (i), Subscriber Priority (8),
	 *   Subscriber Max Age (i), Group Start (i), Group End (i), Frame Start (i),
	 *   Frame End (i) } */
        {"subscribe_update",
         "06 01 00 0c 14 00 03",
         {.type = MOQ6_SUBSCRIBE_UPDATE, .u.subscribe_update = {1, 0, 12, 20, 0, 3}}},
        /* SUBSCRIBE_OK { Type (i) = 0x0, Message Length (i), Group Sequence (i) } */
        {"subscribe_ok",
         "00 01 0a",
         {.type = MOQ6_SUBSCRIBE_REPLY, .u.subscribe_reply = {.kind = MOQ6_SUB_OK, .group = 10}}},
        /* SUBSCRIBE_END { Type (i) = 0x1, Message Length (i), Group Sequence (i) }
	 * (exclusive: 15 is the first group never delivered) */
        {"subscribe_end",
         "01 01 0f",
         {.type = MOQ6_SUBSCRIBE_REPLY, .u.subscribe_reply = {.kind = MOQ6_SUB_END, .group = 15}}},
        /* SUBSCRIBE_DROP { Type (i) = 0x2, Message Length (i), Group Start (i),
	 *   Group End (i), Error Code (i) }: groups 3..4 evicted (0x35). */
        {"subscribe_drop",
         "02 03 03 04 35",
         {.type = MOQ6_SUBSCRIBE_REPLY,
          .u.subscribe_reply = {.kind = MOQ6_SUB_DROP,
                                .drop_start = 3,
                                .drop_end = 4,
                                .drop_code = MOQ6_STREAM_EVICTED}}},
        /* TRACK { Message Length (i), Broadcast Path (s), Track Name (s) } */
        {"track",
         "11 0a 72 6f 6f 6d 2f 61 6c 69 63 65 05 61 75 64 69 6f",
         {.type = MOQ6_TRACK, .u.track = {{"room/alice", 10}, {"audio", 5}}}},
        /* TRACK_INFO { Message Length (i), Publisher Priority (8), Publisher Max
	 *   Age (i), Timescale (i) } (no Ordered). 2, 2000 ms (0x47d0), 90000
	 * (0x80015f90). */
        {"track_info",
         "07 02 47 d0 80 01 5f 90",
         {.type = MOQ6_TRACK_INFO, .u.track_info = {2, 2000, 90000}}},
        /* GROUP { Message Length (i), Subscribe ID (i), Group Sequence (i),
	 *   Frame Start (i) } */
        {"group", "03 01 0a 02", {.type = MOQ6_GROUP, .u.group = {1, 10, 2}}},
        /* FETCH { Message Length (i), Broadcast Path (s), Track Name (s),
	 *   Subscriber Priority (8), Group Sequence (i), Frame Start (i),
	 *   Frame End (i) }: frames 1..3 of group 9 (frame end = index + 1). */
        {"fetch",
         "15 0a 72 6f 6f 6d 2f 61 6c 69 63 65 05 76 69 64 65 6f 00 09 01 04",
         {.type = MOQ6_FETCH, .u.fetch = {{"room/alice", 10}, {"video", 5}, 0, 9, 1, 4}}},
        /* PROBE { Message Length (i), Bitrate (i), RTT (i) }: 1 Mb/s
	 * (0x800f4240), 25 ms. */
        {"probe", "05 80 0f 42 40 19", {.type = MOQ6_PROBE, .u.probe = {1000000, 25}}},
        /* GOAWAY { Message Length (i), New Session URI (s) } */
        {"goaway",
         "13 12 68 74 74 70 73 3a 2f 2f 62 2e 65 78 61 6d 70 6c 65 2f",
         {.type = MOQ6_GOAWAY, .u.goaway = {{"https://b.example/", 18}}}},
};

#define NVECS (sizeof(vecs) / sizeof(vecs[0]))

static void same_str(struct moq_str a, struct moq_str b)
{
	ck_assert_uint_eq(a.len, b.len);
	ck_assert(a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

/* Field by field: the decoded message is the one the vector was built from. */
static void same_msg(const struct moq6_msg *a, const struct moq6_msg *b)
{
	ck_assert_int_eq(a->type, b->type);
	switch (a->type) {
	case MOQ6_SETUP:
		ck_assert_int_eq(a->u.setup.has_probe, b->u.setup.has_probe);
		ck_assert_int_eq(a->u.setup.has_path, b->u.setup.has_path);
		ck_assert_int_eq(a->u.setup.has_role, b->u.setup.has_role);
		ck_assert_int_eq(a->u.setup.has_cost, b->u.setup.has_cost);
		ck_assert_int_eq(a->u.setup.has_hop, b->u.setup.has_hop);
		ck_assert_uint_eq(a->u.setup.probe, b->u.setup.probe);
		ck_assert_uint_eq(a->u.setup.role, b->u.setup.role);
		ck_assert_uint_eq(a->u.setup.cost, b->u.setup.cost);
		ck_assert_uint_eq(a->u.setup.hop, b->u.setup.hop);
		if (a->u.setup.has_path)
			same_str(a->u.setup.path, b->u.setup.path);
		break;
	case MOQ6_ANNOUNCE_REQUEST:
		same_str(a->u.announce_request.prefix, b->u.announce_request.prefix);
		break;
	case MOQ6_ANNOUNCE_OK:
		ck_assert_uint_eq(a->u.announce_ok.hop, b->u.announce_ok.hop);
		ck_assert_uint_eq(a->u.announce_ok.active, b->u.announce_ok.active);
		break;
	case MOQ6_ANNOUNCE:
		ck_assert_uint_eq(a->u.announce.kind, b->u.announce.kind);
		ck_assert_uint_eq(a->u.announce.id, b->u.announce.id);
		same_str(a->u.announce.suffix, b->u.announce.suffix);
		ck_assert_uint_eq(a->u.announce.hop_count, b->u.announce.hop_count);
		for (uint32_t i = 0; i < a->u.announce.hop_count; i++)
			ck_assert_uint_eq(a->u.announce.hops[i], b->u.announce.hops[i]);
		ck_assert_uint_eq(a->u.announce.warm_cost, b->u.announce.warm_cost);
		ck_assert_uint_eq(a->u.announce.cold_cost, b->u.announce.cold_cost);
		break;
	case MOQ6_SUBSCRIBE:
		ck_assert_uint_eq(a->u.subscribe.id, b->u.subscribe.id);
		same_str(a->u.subscribe.broadcast, b->u.subscribe.broadcast);
		same_str(a->u.subscribe.track, b->u.subscribe.track);
		ck_assert_uint_eq(a->u.subscribe.priority, b->u.subscribe.priority);
		ck_assert_uint_eq(a->u.subscribe.max_age_ms, b->u.subscribe.max_age_ms);
		ck_assert_uint_eq(a->u.subscribe.group_start, b->u.subscribe.group_start);
		ck_assert_uint_eq(a->u.subscribe.group_end, b->u.subscribe.group_end);
		ck_assert_uint_eq(a->u.subscribe.frame_start, b->u.subscribe.frame_start);
		ck_assert_uint_eq(a->u.subscribe.frame_end, b->u.subscribe.frame_end);
		break;
	case MOQ6_SUBSCRIBE_UPDATE:
		ck_assert_uint_eq(a->u.subscribe_update.priority, b->u.subscribe_update.priority);
		ck_assert_uint_eq(a->u.subscribe_update.max_age_ms,
		                  b->u.subscribe_update.max_age_ms);
		ck_assert_uint_eq(a->u.subscribe_update.group_start,
		                  b->u.subscribe_update.group_start);
		ck_assert_uint_eq(a->u.subscribe_update.group_end, b->u.subscribe_update.group_end);
		ck_assert_uint_eq(a->u.subscribe_update.frame_start,
		                  b->u.subscribe_update.frame_start);
		ck_assert_uint_eq(a->u.subscribe_update.frame_end, b->u.subscribe_update.frame_end);
		break;
	case MOQ6_SUBSCRIBE_REPLY:
		ck_assert_uint_eq(a->u.subscribe_reply.kind, b->u.subscribe_reply.kind);
		ck_assert_uint_eq(a->u.subscribe_reply.group, b->u.subscribe_reply.group);
		ck_assert_uint_eq(a->u.subscribe_reply.drop_start, b->u.subscribe_reply.drop_start);
		ck_assert_uint_eq(a->u.subscribe_reply.drop_end, b->u.subscribe_reply.drop_end);
		ck_assert_uint_eq(a->u.subscribe_reply.drop_code, b->u.subscribe_reply.drop_code);
		break;
	case MOQ6_TRACK:
		same_str(a->u.track.broadcast, b->u.track.broadcast);
		same_str(a->u.track.track, b->u.track.track);
		break;
	case MOQ6_TRACK_INFO:
		ck_assert_uint_eq(a->u.track_info.priority, b->u.track_info.priority);
		ck_assert_uint_eq(a->u.track_info.max_age_ms, b->u.track_info.max_age_ms);
		ck_assert_uint_eq(a->u.track_info.timescale, b->u.track_info.timescale);
		break;
	case MOQ6_GROUP:
		ck_assert(memcmp(&a->u.group, &b->u.group, sizeof(a->u.group)) == 0);
		break;
	case MOQ6_FETCH:
		same_str(a->u.fetch.broadcast, b->u.fetch.broadcast);
		same_str(a->u.fetch.track, b->u.fetch.track);
		ck_assert_uint_eq(a->u.fetch.priority, b->u.fetch.priority);
		ck_assert_uint_eq(a->u.fetch.group, b->u.fetch.group);
		ck_assert_uint_eq(a->u.fetch.frame_start, b->u.fetch.frame_start);
		ck_assert_uint_eq(a->u.fetch.frame_end, b->u.fetch.frame_end);
		break;
	case MOQ6_PROBE:
		ck_assert_uint_eq(a->u.probe.bitrate, b->u.probe.bitrate);
		ck_assert_uint_eq(a->u.probe.rtt_ms, b->u.probe.rtt_ms);
		break;
	case MOQ6_GOAWAY:
		same_str(a->u.goaway.uri, b->u.goaway.uri);
		break;
	default:
		ck_abort_msg("type %d", a->type);
	}
}

START_TEST(test_golden_encode)
{
	for (size_t i = 0; i < NVECS; i++) {
		uint8_t want[256], got[256];
		size_t n = unhex(vecs[i].hex, want, sizeof(want));
		int e = moq6_msg_encode(got, sizeof(got), &vecs[i].m);

		ck_assert_msg(e == (int)n, "%s: encoded %d bytes, figure says %zu", vecs[i].name, e,
		              n);
		ck_assert_msg(memcmp(got, want, n) == 0, "%s: bytes differ", vecs[i].name);
		/* one byte short of room: TOO_LARGE, never a partial success */
		ck_assert_int_eq(moq6_msg_encode(got, n - 1, &vecs[i].m), MOQ_ERR_TOO_LARGE);
	}
}
END_TEST

START_TEST(test_golden_decode_roundtrip)
{
	for (size_t i = 0; i < NVECS; i++) {
		uint8_t in[256], again[256];
		size_t n = unhex(vecs[i].hex, in, sizeof(in));
		struct moq6_msg m;
		int rc = moq6_msg_decode(vecs[i].m.type, in, n, 4096, &m);
		int e;

		ck_assert_msg(rc == (int)n, "%s: decode %d", vecs[i].name, rc);
		same_msg(&m, &vecs[i].m);
		e = moq6_msg_encode(again, sizeof(again), &m);
		ck_assert_int_eq(e, (int)n);
		ck_assert(memcmp(again, in, n) == 0);
		ck_assert_int_eq(moq6_msg_peek_len(vecs[i].m.type, in, n, 4096), (int)n);
		/* every strict prefix is SHORT, never a wrong message */
		for (size_t k = 0; k < n; k++)
			ck_assert_int_eq(moq6_msg_decode(vecs[i].m.type, in, k, 4096, &m),
			                 MOQ_ERR_SHORT);
		/* a declared length above the cap (every body here is non-empty) */
		ck_assert_int_eq(moq6_msg_decode(vecs[i].m.type, in, n, 0, &m), MOQ_ERR_TOO_LARGE);
	}
}
END_TEST

/* Decode @hex as @t, expecting @want. */
static void expect(enum moq6_msg_type t, const char *hex, int want)
{
	uint8_t in[256];
	struct moq6_msg m;
	size_t n = unhex(hex, in, sizeof(in));
	int rc = moq6_msg_decode(t, in, n, 4096, &m);

	ck_assert_msg(rc == want, "%s: got %d want %d", hex, rc, want);
}

START_TEST(test_strict)
{
	/* a byte left over in the body */
	expect(MOQ6_ANNOUNCE_OK, "03 07 02 00", MOQ_ERR_DECODE);
	/* a body that ends inside a field */
	expect(MOQ6_ANNOUNCE_OK, "01 07", MOQ_ERR_DECODE);
	/* lite-05's SUBSCRIBE (with Ordered and optional groups) is not 06's:
	 * 05 body { id 1, "a", "v", prio 7, ordered 1, 250 ms, start 0, end 0 }
	 * is one byte short of 06's (frame end missing) */
	expect(MOQ6_SUBSCRIBE, "0b 01 01 61 01 76 07 01 40 fa 00 00", MOQ_ERR_DECODE);
	/* unknown typed kinds */
	expect(MOQ6_ANNOUNCE, "03 01 00", MOQ_ERR_DECODE);
	expect(MOQ6_SUBSCRIBE_REPLY, "03 01 00", MOQ_ERR_DECODE);
	/* a repeated non-zero hop id: protocol violation (START and UPDATE) */
	expect(MOQ6_ANNOUNCE, "00 07 01 61 02 07 07 00 00", MOQ_ERR_PROTO);
	expect(MOQ6_ANNOUNCE, "02 06 00 02 09 09 00 00", MOQ_ERR_PROTO);
	/* zero hops repeat freely (unknown hops bridged from older versions) */
	expect(MOQ6_ANNOUNCE, "00 07 01 61 02 00 00 01 01", 9);
	/* 33 hops */
	{
		char hex[200] = "00 26 01 61 21";
		for (int i = 0; i < 33; i++)
			strcat(hex, " 00");
		strcat(hex, " 00 00");
		expect(MOQ6_ANNOUNCE, hex, MOQ_ERR_DECODE);
	}
	/* zero timescale */
	expect(MOQ6_TRACK_INFO, "03 02 00 00", MOQ_ERR_DECODE);
	/* a path of 33 segments */
	{
		/* "a/" x 32 + "a": 65 bytes (varint 0x4041), body 67 (0x4043) */
		char hex[400] = "40 43 40 41";
		for (int i = 0; i < 32; i++)
			strcat(hex, " 61 2f");
		strcat(hex, " 61");
		expect(MOQ6_ANNOUNCE_REQUEST, hex, MOQ_ERR_DECODE);
	}
	/* SETUP: a repeated id, a varint parameter that is not one varint, an
	 * unknown id (ignored), Cost absent = 1 */
	expect(MOQ6_SETUP, "07 02 04 01 03 04 01 05", MOQ_ERR_PROTO);
	expect(MOQ6_SETUP, "05 01 05 02 01 02", MOQ_ERR_DECODE);
	{
		uint8_t in[16];
		struct moq6_msg m;
		size_t n = unhex("08 02 3f 02 aa bb 05 01 09", in, sizeof(in));
		ck_assert_int_eq(moq6_msg_decode(MOQ6_SETUP, in, n, 64, &m), (int)n);
		ck_assert(m.u.setup.has_hop && m.u.setup.hop == 9);
		ck_assert(!m.u.setup.has_cost && m.u.setup.cost == MOQ6_COST_DEFAULT);
	}
	/* 65 parameters */
	{
		uint8_t in[300];
		struct moq6_msg m;
		size_t n = 0;
		in[n++] = 0x40 | 0;
		in[n++] = 0; /* length, patched below */
		in[n++] = 0x40;
		in[n++] = 65;
		for (int i = 0; i < 65; i++) {
			in[n++] = 0x40;
			in[n++] = (uint8_t)(10 + i);
			in[n++] = 0;
		}
		in[1] = (uint8_t)(n - 2);
		ck_assert_int_eq(moq6_msg_decode(MOQ6_SETUP, in, n, 1024, &m), MOQ_ERR_PROTO);
	}
	/* GOAWAY URI above 8192 bytes, both ways */
	{
		static uint8_t in[8200];
		static char uri[8193];
		struct moq6_msg m = {.type = MOQ6_GOAWAY};
		memset(uri, 'u', sizeof(uri));
		m.u.goaway.uri = (struct moq_str){uri, sizeof(uri)};
		ck_assert_int_eq(moq6_msg_encode(in, sizeof(in), &m), MOQ_ERR_INVAL);
		m.u.goaway.uri.len = 8192;
		ck_assert_int_eq(moq6_msg_encode(in, sizeof(in), &m), 8192 + 4);
		/* patch the lengths to claim 8193 bytes */
		ck_assert_int_eq(moq_varint_put(in, 4, 8193 + 2), 2);
		ck_assert_int_eq(moq_varint_put(in + 2, 2, 8193), 2);
		in[8196] = 'u';
		ck_assert_int_eq(moq6_msg_decode(MOQ6_GOAWAY, in, 8197, 16384, &m), MOQ_ERR_DECODE);
	}
	/* encoder refusals */
	{
		uint8_t out[64];
		struct moq6_msg m = {.type = MOQ6_TRACK_INFO};
		ck_assert_int_eq(moq6_msg_encode(out, sizeof(out), &m), MOQ_ERR_INVAL);
		m = (struct moq6_msg){.type = MOQ6_ANNOUNCE};
		m.u.announce.kind = 3;
		ck_assert_int_eq(moq6_msg_encode(out, sizeof(out), &m), MOQ_ERR_INVAL);
		m.u.announce.kind = MOQ6_ANN_UPDATE;
		m.u.announce.hop_count = 33;
		ck_assert_int_eq(moq6_msg_encode(out, sizeof(out), &m), MOQ_ERR_INVAL);
		m = (struct moq6_msg){.type = MOQ6_PROBE};
		m.u.probe.bitrate = MOQ_VARINT_MAX + 1;
		ck_assert_int_eq(moq6_msg_encode(out, sizeof(out), &m), MOQ_ERR_INVAL);
		m = (struct moq6_msg){.type = MOQ6_TYPE_MAX};
		ck_assert_int_eq(moq6_msg_encode(out, sizeof(out), &m), MOQ_ERR_INVAL);
		ck_assert_int_eq(moq6_msg_decode(MOQ6_TYPE_MAX, out, 4, 64, &m), MOQ_ERR_INVAL);
	}
}
END_TEST

START_TEST(test_group_header)
{
	uint8_t out[40], want[40];
	/* the stream type 0x0, then GROUP { 3, sub 1, seq 10, frame start 2 } */
	size_t n = unhex("00 03 01 0a 02", want, sizeof(want));
	int e = moq6_group_hdr_encode(out, sizeof(out), 1, 10, 2);
	struct moq6_msg m;

	ck_assert_int_eq(e, (int)n);
	ck_assert(memcmp(out, want, n) == 0);
	/* the largest: 1 + 1 + 3 x 8 */
	e = moq6_group_hdr_encode(out, sizeof(out), MOQ_VARINT_MAX, MOQ_VARINT_MAX, MOQ_VARINT_MAX);
	ck_assert_int_eq(e, 26);
	ck_assert_int_eq(moq6_msg_decode(MOQ6_GROUP, out + 1, 25, 64, &m), 25);
	ck_assert_uint_eq(m.u.group.frame_start, MOQ_VARINT_MAX);
	ck_assert_int_eq(
	        moq6_group_hdr_encode(out, 25, MOQ_VARINT_MAX, MOQ_VARINT_MAX, MOQ_VARINT_MAX),
	        MOQ_ERR_TOO_LARGE);
	/* FRAME { Timestamp Delta (zigzag i), Frame Length (i), Payload } as in
	 * 05: delta -2 -> 3, 4 bytes */
	n = unhex("03 04", want, sizeof(want));
	e = moq_frame_hdr_encode(out, sizeof(out), MOQ_LITE_05, -2, 4);
	ck_assert_int_eq(e, (int)n);
	ck_assert(memcmp(out, want, n) == 0);
}
END_TEST

START_TEST(test_codes)
{
	/* a lite-05 cancel (0) goes out as 06's cancelled (1): 0 is internal */
	ck_assert_uint_eq(moq6_code_stream(MOQ_CODE_CANCEL), MOQ6_STREAM_CANCELLED);
	ck_assert_uint_eq(moq6_code_from_stream(MOQ6_STREAM_INTERNAL), MOQ_CODE_TRANSPORT);
	ck_assert_uint_eq(moq6_code_stream(MOQ_CODE_NOT_FOUND), 0x33);
	ck_assert_uint_eq(moq6_code_stream(MOQ_CODE_OLD), 0x34);
	ck_assert_uint_eq(moq6_code_stream(MOQ_CODE_EVICTED), 0x35);
	ck_assert_uint_eq(moq6_code_stream(MOQ_CODE_UNROUTABLE), 0x36);
	ck_assert_uint_eq(moq6_code_stream(MOQ_CODE_LAGGED), 0x5);
	ck_assert_uint_eq(moq6_code_stream(MOQ_CODE_FRAME_TOO_LARGE), 0x38);
	ck_assert_uint_eq(moq6_code_stream(MOQ_CODE_UNAUTHORIZED), MOQ6_STREAM_INTERNAL);
	ck_assert_uint_eq(moq6_code_stream(100), 100);
	/* draft-lcurley-moq-lite-06 (24 Sep 2026) Table 3: a refusal for a
	 * limit is 0x30 NO_CAPACITY, not 0x32 GROUP_TOO_LARGE (a group aborted
	 * past the cache budget) */
	ck_assert_uint_eq(moq6_code_stream(MOQ_CODE_BOUNDS), MOQ6_STREAM_NO_CAPACITY);
	ck_assert_uint_eq(moq6_code_from_stream(MOQ6_STREAM_NO_CAPACITY), MOQ_CODE_BOUNDS);
	ck_assert_uint_ne(moq6_code_stream(MOQ_CODE_DROPPED), MOQ6_STREAM_NO_CAPACITY);
	/* every mapped code comes back as itself */
	for (uint64_t c = 0; c < 64; c++) {
		uint64_t w = moq6_code_stream(c);
		if (w != MOQ6_STREAM_INTERNAL || c == MOQ_CODE_TRANSPORT)
			ck_assert_uint_eq(moq6_code_from_stream(w), c);
	}
	ck_assert_uint_eq(moq6_code_from_stream(0x20), MOQ_CODE_PROTOCOL_VIOLATION);
	ck_assert_uint_eq(moq6_code_session(MOQ_CODE_CANCEL), MOQ6_SESS_NO_ERROR);
	ck_assert_uint_eq(moq6_code_session(MOQ_CODE_UNAUTHORIZED), MOQ6_SESS_UNAUTHORIZED);
	ck_assert_uint_eq(moq6_code_session(MOQ_CODE_PROTOCOL_VIOLATION),
	                  MOQ6_SESS_PROTOCOL_VIOLATION);
	ck_assert_uint_eq(moq6_code_session(MOQ_CODE_UNKNOWN_ALPN), MOQ6_SESS_VERSION_NEGOTIATION);
	ck_assert_uint_eq(moq6_code_session(MOQ_CODE_TOO_MANY_PARAMETERS),
	                  MOQ6_SESS_KEY_VALUE_FORMATTING);
	ck_assert_uint_eq(moq6_code_session(MOQ_CODE_BOUNDS), MOQ6_SESS_INTERNAL);
}
END_TEST

/* SUBSCRIBE_DROP { Type (i) = 0x2, Message Length (i), Group Start (i),
 *   Group End (i), Error Code (i) }, draft-06 7.15: "Error Code: An
 *   application-specific error code. A value of 0 indicates no error; the
 *   groups are simply unavailable." moqdp's DROPPED (a sequence never
 *   delivered upstream) is that 0; EVICTED keeps 0x35. */
START_TEST(test_drop_code_generic)
{
	uint8_t out[16], want[16];
	struct moq_msg m = {.type = MOQ_MSG_SUBSCRIBE_REPLY}, d;
	size_t n = unhex("02 03 03 04 00", want, sizeof(want));
	int e;

	m.u.subscribe_reply.kind = MOQ_SUB_DROP;
	m.u.subscribe_reply.drop_start = 3;
	m.u.subscribe_reply.drop_end = 4;
	m.u.subscribe_reply.drop_code = MOQ_CODE_DROPPED;
	e = moq6_encode_generic(out, sizeof(out), &m);
	ck_assert_int_eq(e, (int)n);
	ck_assert(memcmp(out, want, n) == 0);
	ck_assert_int_eq(moq6_decode_generic(MOQ_MSG_SUBSCRIBE_REPLY, out, n, 64, &d), (int)n);
	ck_assert_uint_eq(d.u.subscribe_reply.kind, MOQ_SUB_DROP);
	ck_assert_uint_eq(d.u.subscribe_reply.drop_code, MOQ_CODE_DROPPED);
	m.u.subscribe_reply.drop_code = MOQ_CODE_EVICTED;
	n = unhex("02 03 03 04 35", want, sizeof(want));
	e = moq6_encode_generic(out, sizeof(out), &m);
	ck_assert_int_eq(e, (int)n);
	ck_assert(memcmp(out, want, n) == 0);
	ck_assert_int_eq(moq6_decode_generic(MOQ_MSG_SUBSCRIBE_REPLY, out, n, 64, &d), (int)n);
	ck_assert_uint_eq(d.u.subscribe_reply.drop_code, MOQ_CODE_EVICTED);
}
END_TEST

Suite *lite06_codec_suite(void);

Suite *lite06_codec_suite(void)
{
	Suite *s = suite_create("lite06_codec");
	TCase *tc = tcase_create("codec");

	tcase_add_test(tc, test_golden_encode);
	tcase_add_test(tc, test_golden_decode_roundtrip);
	tcase_add_test(tc, test_strict);
	tcase_add_test(tc, test_group_header);
	tcase_add_test(tc, test_codes);
	tcase_add_test(tc, test_drop_code_generic);
	suite_add_tcase(s, tc);
	return s;
}
