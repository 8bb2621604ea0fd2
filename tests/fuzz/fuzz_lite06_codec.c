/* SPDX-License-Identifier: MIT */
/*
 * fuzz_lite06_codec.c: libFuzzer target for moq/lite06_codec.c. The input is
 * decoded as every lite-06 message type; what decodes is re-encoded and
 * decoded again (the fields must survive, the bytes must be no longer), and
 * peek_len must agree with decode. The same through codec.h's structs
 * (moq_msg_decode / encode with MOQ_LITE_06: what sessions use), whose
 * re-encoding must be stable. The error code mappings are total.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lite06_codec.h"
#include "moq_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static void same_str(struct moq_str a, struct moq_str b)
{
	check(a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0));
}

static void roundtrip(enum moq6_msg_type t, const uint8_t *p, size_t n)
{
	static uint8_t out[1 << 16];
	struct moq6_msg m, m2;
	int rc = moq6_msg_decode(t, p, n, 1 << 15, &m);
	int e, rc2, pk;

	pk = moq6_msg_peek_len(t, p, n, 1 << 15);
	if (rc < 0) {
		check(rc == MOQ_ERR_SHORT || rc == MOQ_ERR_DECODE || rc == MOQ_ERR_PROTO ||
		      rc == MOQ_ERR_TOO_LARGE);
		if (rc == MOQ_ERR_TOO_LARGE)
			check(pk == MOQ_ERR_TOO_LARGE);
		return;
	}
	check(pk == rc);
	check((size_t)rc <= n);
	e = moq6_msg_encode(out, sizeof(out), &m);
	/* non-minimal varints on the wire make the re-encoding shorter */
	check(e > 0 && e <= rc);
	rc2 = moq6_msg_decode(t, out, (size_t)e, 1 << 15, &m2);
	check(rc2 == e);
	check(m2.type == m.type);
	switch (t) {
	case MOQ6_SUBSCRIBE:
		check(m.u.subscribe.id == m2.u.subscribe.id &&
		      m.u.subscribe.max_age_ms == m2.u.subscribe.max_age_ms &&
		      m.u.subscribe.group_start == m2.u.subscribe.group_start &&
		      m.u.subscribe.group_end == m2.u.subscribe.group_end &&
		      m.u.subscribe.frame_start == m2.u.subscribe.frame_start &&
		      m.u.subscribe.frame_end == m2.u.subscribe.frame_end);
		same_str(m.u.subscribe.broadcast, m2.u.subscribe.broadcast);
		same_str(m.u.subscribe.track, m2.u.subscribe.track);
		break;
	case MOQ6_ANNOUNCE:
		check(m.u.announce.kind == m2.u.announce.kind &&
		      m.u.announce.id == m2.u.announce.id &&
		      m.u.announce.hop_count == m2.u.announce.hop_count &&
		      m.u.announce.warm_cost == m2.u.announce.warm_cost &&
		      m.u.announce.cold_cost == m2.u.announce.cold_cost);
		check(m.u.announce.hop_count <= MOQ_MAX_HOPS);
		for (uint32_t i = 0; i < m.u.announce.hop_count; i++)
			check(m.u.announce.hops[i] == m2.u.announce.hops[i]);
		same_str(m.u.announce.suffix, m2.u.announce.suffix);
		break;
	case MOQ6_SETUP:
		check(m.u.setup.has_cost == m2.u.setup.has_cost &&
		      m.u.setup.cost == m2.u.setup.cost &&
		      m.u.setup.has_hop == m2.u.setup.has_hop && m.u.setup.hop == m2.u.setup.hop);
		break;
	case MOQ6_FETCH:
		check(m.u.fetch.group == m2.u.fetch.group &&
		      m.u.fetch.frame_start == m2.u.fetch.frame_start &&
		      m.u.fetch.frame_end == m2.u.fetch.frame_end);
		break;
	case MOQ6_GOAWAY:
		check(m.u.goaway.uri.len <= MOQ6_GOAWAY_URI_MAX);
		break;
	default:
		break;
	}
}

/* The same bytes through codec.h's structs (what sessions use): decode as
 * MOQ_LITE_06, re-encode, decode again; the bytes must agree with the
 * direct codec's re-encoding. */
static void generic(enum moq_msg_type t, const uint8_t *p, size_t n)
{
	static uint8_t out[1 << 16], out2[1 << 16];
	struct moq_msg m, m2;
	int rc = moq_msg_decode(t, MOQ_LITE_06, p, n, 1 << 15, &m);
	int e, e2;

	if (rc < 0) {
		check(rc == MOQ_ERR_SHORT || rc == MOQ_ERR_DECODE || rc == MOQ_ERR_PROTO ||
		      rc == MOQ_ERR_TOO_LARGE);
		return;
	}
	e = moq_msg_encode(out, sizeof(out), MOQ_LITE_06, &m);
	check(e > 0 && e <= rc);
	check(moq_msg_decode(t, MOQ_LITE_06, out, (size_t)e, 1 << 15, &m2) == e);
	e2 = moq_msg_encode(out2, sizeof(out2), MOQ_LITE_06, &m2);
	check(e2 == e && memcmp(out, out2, (size_t)e) == 0);
	check(moq_msg_peek_len_v(t, MOQ_LITE_06, p, n, 1 << 15) == rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int t = MOQ6_SETUP; t < MOQ6_TYPE_MAX; t++)
		roundtrip((enum moq6_msg_type)t, data, size);
	for (int t = MOQ_MSG_SETUP; t < MOQ_MSG_TYPE_MAX; t++)
		generic((enum moq_msg_type)t, data, size);
	if (size >= 8) {
		uint64_t c;
		memcpy(&c, data, sizeof(c));
		(void)moq6_code_stream(c);
		(void)moq6_code_from_stream(c);
		(void)moq6_code_session(c);
	}
	return 0;
}
