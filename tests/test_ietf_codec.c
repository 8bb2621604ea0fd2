/* SPDX-License-Identifier: MIT */
/*
 * test_ietf_codec.c: the IETF moq-transport codec (moq/ietf_codec.c), drafts
 * 14-20, against golden bytes from @moq/net's ietf/ encoder
 * (tests/oracle/ietf_golden.mjs), round trips of every message kind in every
 * draft, the data plane (subgroup headers, objects, datagrams, fetch
 * objects), the namespace <-> path mapping and malformed input.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ietf_codec.h"
#include "moq_err.h"
#include "oracle/ietf_golden_vectors.h"

#define S(lit) ((struct moq_str){(lit), sizeof(lit) - 1})
#define NOSTR  ((struct moq_str){NULL, 0})

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

static const char *golden(const char *name)
{
	for (size_t i = 0; i < sizeof(ietf_vecs) / sizeof(ietf_vecs[0]); i++)
		if (strcmp(ietf_vecs[i].name, name) == 0)
			return ietf_vecs[i].hex;
	return NULL;
}

static size_t golden_bytes(const char *name, uint8_t *out, size_t cap)
{
	const char *h = golden(name);

	ck_assert_msg(h != NULL, "no golden vector %s", name);
	ck_assert_msg(h[0] != '!', "%s: @moq/net refused: %s", name, h);
	return unhex(h, out, cap);
}

static void ck_bytes(const char *name, const uint8_t *got, size_t n, const uint8_t *want, size_t wn)
{
	if (n != wn || memcmp(got, want, n) != 0) {
		char a[1024] = "", b[1024] = "";
		for (size_t i = 0; i < n && i < 500; i++)
			sprintf(a + 2 * i, "%02x", got[i]);
		for (size_t i = 0; i < wn && i < 500; i++)
			sprintf(b + 2 * i, "%02x", want[i]);
		ck_abort_msg("%s: got %s want %s", name, a, b);
	}
}

static void ns2(struct moq_ietf_msg *m, struct moq_str a, struct moq_str b)
{
	m->ns_n = 0;
	m->ns[m->ns_n++] = a;
	if (b.len)
		m->ns[m->ns_n++] = b;
}

/* The SETUP options the generator writes: MAX_REQUEST_ID first (the
 * generator's 14/15 order: varints, then byte strings), PATH, IMPLEMENTATION. */
static void setup_opts(struct moq_ietf_params *ps)
{
	ps->n = 0;
	ck_assert_int_eq(moq_ietf_param_add(ps, IETF_OPT_MAX_REQUEST_ID, 42069, NOSTR), 0);
	ck_assert_int_eq(moq_ietf_param_add(ps, IETF_OPT_PATH, 0, S("/demo?jwt=abc")), 0);
	ck_assert_int_eq(moq_ietf_param_add(ps, IETF_OPT_IMPLEMENTATION, 0, S("moq-lite-js")), 0);
}

static uint8_t props_buf[16];

/*
 * Build the message the generator encoded under @base for draft @d (the
 * fields must match ietf_golden.mjs). Returns false for a name that is not
 * a control message.
 */
static bool build(const char *base, int d, struct moq_ietf_msg *m)
{
	memset(m, 0, sizeof(*m));
	if (!strcmp(base, "client_setup")) {
		m->kind = IETF_CLIENT_SETUP;
		m->versions_n = 3;
		m->versions[0] = 0xff0dad02;
		m->versions[1] = 0xff0dad01;
		m->versions[2] = MOQ_IETF_VERSION(14);
		setup_opts(&m->params);
	} else if (!strcmp(base, "server_setup")) {
		m->kind = IETF_SERVER_SETUP;
		m->version = MOQ_IETF_VERSION(14);
		setup_opts(&m->params);
	} else if (!strcmp(base, "setup")) {
		m->kind = IETF_SETUP;
		setup_opts(&m->params);
	} else if (!strcmp(base, "max_request_id")) {
		m->kind = IETF_MAX_REQUEST_ID;
		m->request_id = 300;
	} else if (!strcmp(base, "requests_blocked")) {
		m->kind = IETF_REQUESTS_BLOCKED;
		m->request_id = 42;
	} else if (!strcmp(base, "unsubscribe")) {
		m->kind = IETF_UNSUBSCRIBE;
		m->request_id = 6;
	} else if (!strcmp(base, "publish_namespace_done")) {
		m->kind = IETF_PUBLISH_NAMESPACE_DONE;
		m->request_id = 3;
		if (d != 16)
			ns2(m, S("demo"), S("room"));
	} else if (!strcmp(base, "publish_namespace_cancel")) {
		m->kind = IETF_PUBLISH_NAMESPACE_CANCEL;
		m->request_id = 3;
		if (d != 16)
			ns2(m, S("demo"), S("room"));
		m->code = 4;
		m->reason = S("gone");
	} else if (!strcmp(base, "goaway")) {
		m->kind = IETF_GOAWAY;
		m->reason = S("https://relay.example/moq");
		m->timeout = d >= 17 ? 5000 : 0;
	} else if (!strcmp(base, "goaway_empty")) {
		m->kind = IETF_GOAWAY;
	} else if (!strcmp(base, "request_ok")) {
		m->kind = IETF_REQUEST_OK;
		m->request_id = d <= 16 ? 9 : 0;
	} else if (!strcmp(base, "request_error")) {
		m->kind = IETF_REQUEST_ERROR;
		m->request_id = d <= 16 ? 9 : 0;
		m->code = 4;
		m->retry = d >= 16 ? 250 : 0;
		m->reason = S("not found");
	} else if (!strcmp(base, "namespace")) {
		m->kind = IETF_NAMESPACE;
		ns2(m, S("room"), NOSTR);
	} else if (!strcmp(base, "namespace_done")) {
		m->kind = IETF_NAMESPACE_DONE;
		ns2(m, S("room"), NOSTR);
	} else if (!strcmp(base, "subscribe_error")) {
		m->kind = IETF_SUBSCRIBE_ERROR;
		m->request_id = 9;
		m->code = 4;
		m->reason = S("not found");
	} else if (!strcmp(base, "publish_namespace_ok")) {
		m->kind = IETF_PUBLISH_NAMESPACE_OK;
		m->request_id = 3;
	} else if (!strcmp(base, "publish_namespace_error")) {
		m->kind = IETF_PUBLISH_NAMESPACE_ERROR;
		m->request_id = 3;
		m->code = 1;
		m->reason = S("unauthorized");
	} else if (!strcmp(base, "subscribe_namespace_ok")) {
		m->kind = IETF_SUBSCRIBE_NAMESPACE_OK;
		m->request_id = 5;
	} else if (!strcmp(base, "subscribe_namespace_error")) {
		m->kind = IETF_SUBSCRIBE_NAMESPACE_ERROR;
		m->request_id = 5;
		m->code = 4;
		m->reason = S("unknown");
	} else if (!strcmp(base, "publish_error")) {
		m->kind = IETF_PUBLISH_ERROR;
		m->request_id = 7;
		m->code = 3;
		m->reason = S("no");
	} else if (!strcmp(base, "track_status")) {
		m->kind = IETF_TRACK_STATUS;
		ns2(m, S("demo"), S("room"));
		m->name = S("video");
		m->last.group = 12;
		m->last.object = 3;
	} else if (!strcmp(base, "unsubscribe_namespace")) {
		m->kind = IETF_UNSUBSCRIBE_NAMESPACE;
		m->request_id = 5;
	} else if (!strcmp(base, "publish_blocked")) {
		m->kind = IETF_PUBLISH_BLOCKED;
		ns2(m, S("room"), NOSTR);
		m->name = S("video");
	} else if (!strcmp(base, "subscribe_namespace")) {
		m->kind = IETF_SUBSCRIBE_NAMESPACE;
		m->request_id = 4;
		m->options = (d == 16 || d == 17) ? 1 : 0;
		ns2(m, S("demo"), NOSTR);
	} else if (!strncmp(base, "subscribe_", 10) &&
	           (!strcmp(base + 10, "live") || !strcmp(base + 10, "all") ||
	            !strcmp(base + 10, "range") || !strcmp(base + 10, "next") ||
	            !strcmp(base + 10, "rel2"))) {
		const char *f = base + 10;
		m->kind = IETF_SUBSCRIBE;
		m->request_id = 2;
		ns2(m, S("demo"), S("room"));
		m->name = S("video");
		m->priority = 7;
		m->group_order = 2;
		m->forward = 1;
		if (!strcmp(f, "live")) {
			m->filter.kind = IETF_F_NEXT_OBJECT;
		} else if (!strcmp(f, "all")) {
			m->filter.kind = IETF_F_UNFILTERED;
		} else if (!strcmp(f, "range")) {
			m->filter.kind = IETF_F_ABSOLUTE;
			m->filter.start.group = 10;
			m->filter.has_end = true;
			m->filter.end_group = 20;
		} else if (!strcmp(f, "next")) {
			m->filter.kind = IETF_F_RELATIVE;
		} else {
			m->filter.kind = IETF_F_RELATIVE;
			m->filter.groups = 2;
		}
	} else if (!strcmp(base, "subscribe_ok") || !strcmp(base, "subscribe_ok_largest") ||
	           !strcmp(base, "subscribe_ok_props")) {
		m->kind = IETF_SUBSCRIBE_OK;
		m->request_id = d <= 16 ? 2 : 0;
		m->track_alias = 17;
		m->group_order = (d == 14 || d == 15) ? 2 : 0;
		if (!strcmp(base, "subscribe_ok_largest")) {
			m->content_exists = 1;
			m->largest.group = 5;
			m->largest.object = 2;
		}
		if (!strcmp(base, "subscribe_ok_props")) {
			/* TIMESCALE (0x08) = 1000, then DEFAULT_PUBLISHER_GROUP_ORDER
			 * (0x22, delta 0x1a) = 2 */
			size_t o = 0;
			o += (size_t)moq_ietf_varint_put(props_buf + o, 16 - o, d, 0x08);
			o += (size_t)moq_ietf_varint_put(props_buf + o, 16 - o, d, 1000);
			o += (size_t)moq_ietf_varint_put(props_buf + o, 16 - o, d, 0x22 - 0x08);
			o += (size_t)moq_ietf_varint_put(props_buf + o, 16 - o, d, 2);
			m->props = (struct moq_str){(const char *)props_buf, o};
		}
	} else if (!strcmp(base, "subscribe_update")) {
		m->kind = IETF_SUBSCRIBE_UPDATE;
		m->request_id = 2;
		m->priority = d == 14 ? 128 : 0;
		m->forward = d == 14 ? 1 : 0;
	} else if (!strcmp(base, "publish_done")) {
		m->kind = IETF_PUBLISH_DONE;
		m->request_id = d <= 16 ? 2 : 0;
		m->code = 2;
		m->reason = S("ended");
	} else if (!strcmp(base, "publish_namespace")) {
		m->kind = IETF_PUBLISH_NAMESPACE;
		m->request_id = 3;
		ns2(m, S("demo"), S("room"));
	} else if (!strcmp(base, "track_status_request")) {
		m->kind = IETF_TRACK_STATUS_REQUEST;
		m->request_id = 8;
		ns2(m, S("demo"), S("room"));
		m->name = S("video");
		if (d == 14) {
			m->group_order = 2;
			m->filter.kind = IETF_F_NEXT_OBJECT;
		}
	} else if (!strcmp(base, "publish")) {
		m->kind = IETF_PUBLISH;
		m->request_id = 7;
		ns2(m, S("demo"), S("room"));
		m->name = S("video");
		m->track_alias = 33;
		m->group_order = 2;
		m->content_exists = 1;
		m->largest.group = 4;
		m->largest.object = 1;
		m->forward = 1;
		if (d >= 17) {
			/* the generator's Track Properties: group order 2 */
			size_t o = 0;
			o += (size_t)moq_ietf_varint_put(props_buf + o, 16 - o, d, 0x22);
			o += (size_t)moq_ietf_varint_put(props_buf + o, 16 - o, d, 2);
			m->props = (struct moq_str){(const char *)props_buf, o};
		}
	} else {
		return false;
	}
	return true;
}

static const char *const control_names[] = {
        "client_setup",
        "server_setup",
        "setup",
        "max_request_id",
        "requests_blocked",
        "unsubscribe",
        "publish_namespace_done",
        "publish_namespace_cancel",
        "goaway",
        "goaway_empty",
        "request_ok",
        "request_error",
        "namespace",
        "namespace_done",
        "subscribe_error",
        "publish_namespace_ok",
        "publish_namespace_error",
        "subscribe_namespace_ok",
        "subscribe_namespace_error",
        "publish_error",
        "track_status",
        "unsubscribe_namespace",
        "publish_blocked",
        "subscribe_namespace",
        "subscribe_live",
        "subscribe_all",
        "subscribe_range",
        "subscribe_next",
        "subscribe_rel2",
        "subscribe_ok",
        "subscribe_ok_largest",
        "subscribe_ok_props",
        "subscribe_update",
        "publish_done",
        "publish_namespace",
        "track_status_request",
        "publish",
};

/* Every control vector: our encoder writes the generator's bytes, our
 * decoder reads them back to the same bytes. */
START_TEST(golden_control)
{
	int checked = 0;

	for (int d = MOQ_IETF_14; d <= MOQ_IETF_20; d++) {
		for (size_t i = 0; i < sizeof(control_names) / sizeof(control_names[0]); i++) {
			char name[96];
			uint8_t want[1024], got[1024], again[1024];
			struct moq_ietf_msg m, m2;
			size_t wn;
			int n, k;

			snprintf(name, sizeof(name), "%s_d%d", control_names[i], d);
			if (!golden(name))
				continue;
			ck_assert(build(control_names[i], d, &m));
			wn = golden_bytes(name, want, sizeof(want));
			n = moq_ietf_msg_encode(got, sizeof(got), d, &m);
			ck_assert_msg(n > 0, "%s: encode %d", name, n);
			ck_bytes(name, got, (size_t)n, want, wn);
			k = moq_ietf_msg_decode(want, wn, d, &m2);
			ck_assert_msg(k == (int)wn, "%s: decode %d", name, k);
			ck_assert_int_eq(m2.kind, m.kind);
			n = moq_ietf_msg_encode(again, sizeof(again), d, &m2);
			ck_bytes(name, again, (size_t)n, want, wn);
			/* every shorter prefix is short, never a success */
			for (size_t cut = 0; cut < wn; cut++) {
				k = moq_ietf_msg_decode(want, cut, d, &m2);
				ck_assert_msg(k == MOQ_ERR_SHORT, "%s cut %zu: %d", name, cut, k);
			}
			checked++;
		}
	}
	/* the generator covers 30-odd messages in each of 7 drafts */
	ck_assert_int_ge(checked, 150);
}
END_TEST

START_TEST(golden_varints)
{
	static const uint64_t vs[] = {0,
	                              63,
	                              64,
	                              127,
	                              128,
	                              16383,
	                              16384,
	                              2097151,
	                              2097152,
	                              268435456,
	                              UINT64_C(1) << 35,
	                              UINT64_C(1) << 42,
	                              UINT64_C(1) << 49,
	                              UINT64_C(1) << 56,
	                              (UINT64_C(1) << 62) - 1};

	for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
		for (int d = 16; d <= 20; d += 4) {
			char name[64];
			uint8_t want[16], got[16];
			uint64_t v;
			size_t wn;
			int n;

			snprintf(name, sizeof(name), "varint%d_%llu", d, (unsigned long long)vs[i]);
			wn = golden_bytes(name, want, sizeof(want));
			n = moq_ietf_varint_put(got, sizeof(got), d, vs[i]);
			ck_assert_int_gt(n, 0);
			ck_bytes(name, got, (size_t)n, want, wn);
			ck_assert_uint_eq(moq_ietf_varint_len(d, vs[i]), wn);
			ck_assert_int_eq(moq_ietf_varint_get(want, wn, d, &v), (int)wn);
			ck_assert_uint_eq(v, vs[i]);
			ck_assert_int_eq(moq_ietf_varint_get(want, wn - 1, d, &v), MOQ_ERR_SHORT);
		}
	}
	/* the 7-byte leading-ones form: reserved in 17, read from 18 */
	{
		const uint8_t seven[] = {0xfc, 0, 0, 0, 0, 1, 2};
		uint64_t v;
		ck_assert_int_eq(moq_ietf_varint_get(seven, 7, 17, &v), MOQ_ERR_DECODE);
		ck_assert_int_eq(moq_ietf_varint_get(seven, 7, 18, &v), 7);
		ck_assert_uint_eq(v, 0x102);
	}
}
END_TEST

/* Subgroup headers and objects against the generator's. */
START_TEST(golden_data)
{
	for (int d = MOQ_IETF_14; d <= MOQ_IETF_20; d++) {
		char name[64];
		uint8_t want[512], got[512];
		size_t wn, o;
		int n;
		struct moq_ietf_subgroup_hdr h, h2;
		struct moq_ietf_object ob;

		/* sg0: subgroup 0, end of group, priority 5, first object */
		memset(&h, 0, sizeof(h));
		h.end_of_group = true;
		h.has_priority = true;
		h.first_object = true;
		h.track_alias = 17;
		h.group = 300;
		h.priority = 5;
		snprintf(name, sizeof(name), "group_sg0_d%d", d);
		wn = golden_bytes(name, want, sizeof(want));
		n = moq_ietf_subgroup_hdr_encode(got, sizeof(got), d, &h);
		ck_assert_int_gt(n, 0);
		ck_bytes(name, got, (size_t)n, want, wn);
		ck_assert_int_eq(moq_ietf_subgroup_hdr_decode(want, wn, d, &h2), (int)wn);
		ck_assert(h2.end_of_group && h2.has_priority && !h2.extensions && h2.first_object);
		ck_assert_uint_eq(h2.group, 300);
		ck_assert_uint_eq(h2.track_alias, 17);
		ck_assert_int_eq(h2.priority, 5);
		ck_assert_int_eq(moq_ietf_subgroup_hdr_decode(want, wn - 1, d, &h2), MOQ_ERR_SHORT);

		/* sgx: extensions, explicit subgroup 3, not the first object (18+) */
		memset(&h, 0, sizeof(h));
		h.extensions = true;
		h.sg_mode = 2;
		h.subgroup = 3;
		h.has_priority = true;
		h.track_alias = 17;
		h.group = 300;
		h.priority = 5;
		snprintf(name, sizeof(name), "group_sgx_d%d", d);
		wn = golden_bytes(name, want, sizeof(want));
		n = moq_ietf_subgroup_hdr_encode(got, sizeof(got), d, &h);
		ck_bytes(name, got, (size_t)n, want, wn);
		ck_assert_int_eq(moq_ietf_subgroup_hdr_decode(want, wn, d, &h2), (int)wn);
		ck_assert(h2.extensions && h2.sg_mode == 2 && h2.subgroup == 3);
		ck_assert(h2.first_object == (d < 18));

		/* sgnp: no priority byte (15+), subgroup = first object id */
		if (d >= 15) {
			memset(&h, 0, sizeof(h));
			h.sg_mode = 1;
			h.first_object = true;
			h.track_alias = 17;
			h.group = 300;
			snprintf(name, sizeof(name), "group_sgnp_d%d", d);
			wn = golden_bytes(name, want, sizeof(want));
			n = moq_ietf_subgroup_hdr_encode(got, sizeof(got), d, &h);
			ck_bytes(name, got, (size_t)n, want, wn);
			ck_assert_int_eq(moq_ietf_subgroup_hdr_decode(want, wn, d, &h2), (int)wn);
			ck_assert(!h2.has_priority && h2.priority == 128 && h2.sg_mode == 1);
		} else {
			memset(&h, 0, sizeof(h));
			ck_assert_int_eq(moq_ietf_subgroup_hdr_encode(got, sizeof(got), d, &h),
			                 MOQ_ERR_INVAL);
		}

		/* objects: "hello", an empty object, 200 x 'x', end of group */
		snprintf(name, sizeof(name), "objects_d%d", d);
		wn = golden_bytes(name, want, sizeof(want));
		o = 0;
		{
			static const char big[200] = {[0 ... 199] = 'x'};
			const struct {
				const char *p;
				size_t n;
				uint64_t st;
			} objs[] = {{"hello", 5, 0}, {"", 0, 0}, {big, 200, 0}, {"", 0, 3}};
			for (size_t i = 0; i < 4; i++) {
				memset(&ob, 0, sizeof(ob));
				ob.payload_len = objs[i].n;
				ob.status = objs[i].st;
				n = moq_ietf_object_encode_head(got + o, sizeof(got) - o, d, false,
				                                &ob);
				ck_assert_int_gt(n, 0);
				o += (size_t)n;
				memcpy(got + o, objs[i].p, objs[i].n);
				o += objs[i].n;
			}
			ck_bytes(name, got, o, want, wn);
			o = 0;
			for (size_t i = 0; i < 4; i++) {
				n = moq_ietf_object_decode_head(want + o, wn - o, d, false, &ob);
				ck_assert_int_gt(n, 0);
				ck_assert_uint_eq(ob.payload_len, objs[i].n);
				ck_assert_uint_eq(ob.status, objs[i].st);
				o += (size_t)n;
				ck_assert_int_eq(memcmp(want + o, objs[i].p, objs[i].n), 0);
				o += objs[i].n;
			}
			ck_assert_uint_eq(o, wn);
		}
		/* an object of a stream with extensions: delta 4, no headers, "hi" */
		snprintf(name, sizeof(name), "objects_ext_d%d", d);
		wn = golden_bytes(name, want, sizeof(want));
		memset(&ob, 0, sizeof(ob));
		ob.id_delta = 4;
		ob.payload_len = 2;
		n = moq_ietf_object_encode_head(got, sizeof(got), d, true, &ob);
		memcpy(got + n, "hi", 2);
		ck_bytes(name, got, (size_t)n + 2, want, wn);
		ck_assert_int_eq(moq_ietf_object_decode_head(want, wn, d, true, &ob), n);
		ck_assert_uint_eq(ob.id_delta, 4);

		/* the fetch stream: type 0x05, request 10, objects 7/0 "ab", 7/1 "cd"
		 * (@moq/net writes its draft-15+ serialization flags on 14 too; ours
		 * writes 14's explicit fields there, so 14 is checked by round trip) */
		if (d >= 15) {
			struct moq_ietf_fetch_obj a = {0}, b = {0}, ra, rb;
			snprintf(name, sizeof(name), "fetch_stream_d%d", d);
			wn = golden_bytes(name, want, sizeof(want));
			o = 0;
			n = moq_ietf_varint_put(got, sizeof(got), d, IETF_STREAM_FETCH);
			o += (size_t)n;
			o += (size_t)moq_ietf_varint_put(got + o, sizeof(got) - o, d, 10);
			a.group = 7;
			a.payload_len = 2;
			o += (size_t)moq_ietf_fetch_obj_encode_head(got + o, sizeof(got) - o, d,
			                                            NULL, &a);
			memcpy(got + o, "ab", 2);
			o += 2;
			b.group = 7;
			b.object = 1;
			b.payload_len = 2;
			o += (size_t)moq_ietf_fetch_obj_encode_head(got + o, sizeof(got) - o, d, &a,
			                                            &b);
			memcpy(got + o, "cd", 2);
			o += 2;
			ck_bytes(name, got, o, want, wn);
			n = moq_ietf_fetch_obj_decode_head(want + 2, wn - 2, d, NULL, &ra);
			ck_assert_int_gt(n, 0);
			ck_assert_uint_eq(ra.group, 7);
			ck_assert_uint_eq(ra.object, 0);
			ck_assert_int_eq(moq_ietf_fetch_obj_decode_head(
			                         want + 2 + n + 2, wn - 4 - (size_t)n, d, &ra, &rb),
			                 2); /* flags 0 (all inherited), length 2 */
			ck_assert_uint_eq(rb.group, 7);
			ck_assert_uint_eq(rb.object, 1);
			ck_assert_uint_eq(rb.payload_len, 2);
		}
	}
}
END_TEST

/* A fully populated message of every kind, through every draft that has
 * it: what the draft carries survives. */
static void fill(struct moq_ietf_msg *m, enum moq_ietf_kind k, int d)
{
	memset(m, 0, sizeof(*m));
	m->kind = k;
	m->request_id = 1234;
	ns2(m, S("live"), S("room/a"));
	m->name = S("video");
	m->track_alias = 99;
	m->priority = 200;
	m->group_order = 1;
	m->forward = 1;
	m->code = 0x10;
	m->reason = S("why");
	m->retry = 77;
	m->timeout = 1000;
	m->stream_count = 3;
	m->options = 2;
	m->expires = 5;
	m->content_exists = 1;
	m->largest.group = 1 << 20;
	m->largest.object = 7;
	m->filter.kind = IETF_F_ABSOLUTE;
	m->filter.start.group = 5;
	m->filter.start.object = 1;
	m->filter.has_end = true;
	m->filter.end_group = 9;
	m->fetch_type = IETF_FETCH_STANDALONE;
	m->start.group = 2;
	m->start.object = 0;
	m->end.group = 4;
	m->end.object = 5;
	m->joining_id = 8;
	m->joining_start = 2;
	m->end_of_track = 1;
	m->version = MOQ_IETF_VERSION(14);
	m->versions_n = 2;
	m->versions[0] = MOQ_IETF_VERSION(14);
	m->versions[1] = MOQ_IETF_VERSION(15);
	m->sub_request_id = 11;
	m->end_group = 12;
	m->last.group = 3;
	m->last.object = 4;
	if (k == IETF_CLIENT_SETUP || k == IETF_SERVER_SETUP || k == IETF_SETUP) {
		moq_ietf_param_add(&m->params, IETF_OPT_MAX_REQUEST_ID, 100, NOSTR);
		moq_ietf_param_add(&m->params, IETF_OPT_AUTH_TOKEN, 0, S("tok"));
	} else {
		moq_ietf_param_add(&m->params, IETF_PARAM_DELIVERY_TIMEOUT, 3000, NOSTR);
		moq_ietf_param_add(&m->params, IETF_PARAM_AUTH_TOKEN, 0, S("\x01tok"));
	}
	(void)d;
}

START_TEST(roundtrip_all)
{
	int done = 0;

	for (int d = MOQ_IETF_14; d <= MOQ_IETF_20; d++) {
		for (int k = IETF_CLIENT_SETUP; k < IETF_KIND_COUNT; k++) {
			struct moq_ietf_msg m, m2;
			uint8_t buf[2048], again[2048];
			int n, r, n2;

			if (!moq_ietf_kind_type(d, k)) {
				fill(&m, k, d);
				ck_assert_int_eq(moq_ietf_msg_encode(buf, sizeof(buf), d, &m),
				                 MOQ_ERR_INVAL);
				continue;
			}
			fill(&m, k, d);
			n = moq_ietf_msg_encode(buf, sizeof(buf), d, &m);
			ck_assert_msg(n > 0, "%s d%d: %d", moq_ietf_kind_name(k), d, n);
			r = moq_ietf_msg_decode(buf, (size_t)n, d, &m2);
			ck_assert_msg(r == n, "%s d%d: decode %d of %d", moq_ietf_kind_name(k), d,
			              r, n);
			ck_assert_int_eq(m2.kind, k);
			n2 = moq_ietf_msg_encode(again, sizeof(again), d, &m2);
			ck_assert_int_eq(n2, n);
			ck_assert_msg(memcmp(buf, again, (size_t)n) == 0, "%s d%d",
			              moq_ietf_kind_name(k), d);
			/* the extra parameters come back whatever else moved */
			if (k != IETF_NAMESPACE && k != IETF_NAMESPACE_DONE && k != IETF_GOAWAY &&
			    k != IETF_MAX_REQUEST_ID && k != IETF_REQUESTS_BLOCKED &&
			    k != IETF_UNSUBSCRIBE && k != IETF_PUBLISH_DONE &&
			    k != IETF_PUBLISH_BLOCKED && k != IETF_SUBSCRIBE_ERROR &&
			    k != IETF_REQUEST_ERROR && k != IETF_PUBLISH_NAMESPACE_OK &&
			    k != IETF_PUBLISH_NAMESPACE_ERROR && k != IETF_PUBLISH_NAMESPACE_DONE &&
			    k != IETF_PUBLISH_NAMESPACE_CANCEL &&
			    k != IETF_SUBSCRIBE_NAMESPACE_OK &&
			    k != IETF_SUBSCRIBE_NAMESPACE_ERROR &&
			    k != IETF_UNSUBSCRIBE_NAMESPACE && k != IETF_TRACK_STATUS &&
			    k != IETF_FETCH_ERROR && k != IETF_FETCH_CANCEL &&
			    k != IETF_PUBLISH_ERROR) {
				const struct moq_ietf_param *p = moq_ietf_param_get(
				        &m2.params, k <= IETF_SETUP ? IETF_OPT_AUTH_TOKEN
				                                    : IETF_PARAM_AUTH_TOKEN);
				ck_assert_msg(p != NULL, "%s d%d: param", moq_ietf_kind_name(k), d);
			}
			if (k == IETF_SUBSCRIBE) {
				ck_assert_int_eq(m2.priority, 200);
				ck_assert_int_eq(m2.group_order, 1);
				ck_assert_int_eq(m2.filter.kind, IETF_F_ABSOLUTE);
				ck_assert_uint_eq(m2.filter.end_group, 9);
				ck_assert_uint_eq(m2.ns_n, 2);
				ck_assert_uint_eq(m2.ns[1].len, 6);
			}
			if (k == IETF_PUBLISH || (k == IETF_SUBSCRIBE_OK && d >= 15) ||
			    (k == IETF_SUBSCRIBE_OK && d == 14)) {
				ck_assert_int_eq(m2.content_exists, 1);
				ck_assert_uint_eq(m2.largest.group, 1 << 20);
			}
			if (k == IETF_FETCH && d < 20) {
				ck_assert_int_eq(m2.fetch_type, IETF_FETCH_STANDALONE);
				ck_assert_uint_eq(m2.end.object, 5);
			}
			if (k == IETF_FETCH && d == 20) {
				ck_assert_int_eq(m2.filter.kind, IETF_F_ABSOLUTE);
				ck_assert_uint_eq(m2.filter.start.group, 5);
			}
			if (k == IETF_REQUEST_ERROR)
				ck_assert_uint_eq(m2.retry, d >= 16 ? 77 : 0);
			if (k == IETF_GOAWAY)
				ck_assert_uint_eq(m2.timeout, d >= 17 ? 1000 : 0);
			/* one byte more inside the stated length is malformed (but for
			 * GOAWAY from 18, whose trailing request id it then is) */
			if (!(k == IETF_GOAWAY && d >= 18)) {
				size_t tl = moq_ietf_varint_len(d, moq_ietf_kind_type(d, k));
				size_t body = ((size_t)buf[tl] << 8 | buf[tl + 1]) + 1;
				buf[n] = 0;
				buf[tl] = (uint8_t)(body >> 8);
				buf[tl + 1] = (uint8_t)body;
				ck_assert_msg(moq_ietf_msg_decode(buf, (size_t)n + 1, d, &m2) ==
				                      MOQ_ERR_DECODE,
				              "%s d%d: trailing byte", moq_ietf_kind_name(k), d);
			}
			done++;
		}
	}
	ck_assert_int_ge(done, 7 * 15);
}
END_TEST

/* Joining FETCH (14-19) and draft-20's FETCH with LOCATION_FILTER. */
START_TEST(fetch_forms)
{
	for (int d = 14; d <= 20; d++) {
		struct moq_ietf_msg m, m2;
		uint8_t buf[256];
		int n;

		memset(&m, 0, sizeof(m));
		m.kind = IETF_FETCH;
		m.request_id = 4;
		m.priority = 9;
		m.group_order = 2;
		if (d < 20) {
			m.fetch_type = IETF_FETCH_RELATIVE_JOINING;
			m.joining_id = 2;
			m.joining_start = 1;
		} else {
			ns2(&m, S("demo"), NOSTR);
			m.name = S("video");
			m.filter.kind = IETF_F_RELATIVE;
			m.filter.groups = 1;
		}
		n = moq_ietf_msg_encode(buf, sizeof(buf), d, &m);
		ck_assert_int_gt(n, 0);
		ck_assert_int_eq(moq_ietf_msg_decode(buf, (size_t)n, d, &m2), n);
		ck_assert_int_eq(m2.priority, 9);
		if (d < 20) {
			ck_assert_int_eq(m2.fetch_type, IETF_FETCH_RELATIVE_JOINING);
			ck_assert_uint_eq(m2.joining_id, 2);
			ck_assert_uint_eq(m2.joining_start, 1);
		} else {
			ck_assert_int_eq(m2.filter.kind, IETF_F_RELATIVE);
			ck_assert_uint_eq(m2.filter.groups, 1);
		}
		/* an unknown fetch type is malformed (type byte after id [, delta]
		 * [, priority, order]) */
		if (d < 20) {
			size_t at = 3 + 1 + (d == 17) + (d == 14 ? 2 : 0);
			buf[at] = 0x09;
			ck_assert_int_eq(moq_ietf_msg_decode(buf, (size_t)n, d, &m2),
			                 MOQ_ERR_DECODE);
		}
	}
}
END_TEST

START_TEST(filters)
{
	/* draft-20's field-count forms and the tagged forms of 15-19 */
	const struct {
		int d;
		const char *hex;
		enum moq_ietf_filter_kind kind;
		uint64_t a, b;
		bool end;
		uint64_t eg;
		bool eo;
	} cases[] = {
	        {20, "", IETF_F_UNFILTERED, 0, 0, false, 0, false},
	        {20, "01", IETF_F_RELATIVE, 1, 0, false, 0, false},
	        {20, "0000", IETF_F_NEXT_OBJECT, 0, 0, false, 0, false},
	        {20, "0502", IETF_F_ABSOLUTE, 5, 2, false, 0, false},
	        {20, "050203", IETF_F_ABSOLUTE, 5, 2, true, 8, false},
	        {20, "05020304", IETF_F_ABSOLUTE, 5, 2, true, 8, true},
	        {18, "01", IETF_F_RELATIVE, 0, 0, false, 0, false},
	        {18, "02", IETF_F_NEXT_OBJECT, 0, 0, false, 0, false},
	        {18, "030502", IETF_F_ABSOLUTE, 5, 2, false, 0, false},
	        {15, "04050203", IETF_F_ABSOLUTE, 5, 2, true, 8, false},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t in[16], out[16];
		size_t n = unhex(cases[i].hex, in, sizeof(in));
		struct moq_ietf_filter f;
		int k;

		ck_assert_int_eq(moq_ietf_filter_decode(in, n, cases[i].d, &f), 0);
		ck_assert_int_eq(f.kind, cases[i].kind);
		if (f.kind == IETF_F_RELATIVE)
			ck_assert_uint_eq(f.groups, cases[i].a);
		if (f.kind == IETF_F_ABSOLUTE) {
			ck_assert_uint_eq(f.start.group, cases[i].a);
			ck_assert_uint_eq(f.start.object, cases[i].b);
			ck_assert_int_eq(f.has_end, cases[i].end);
			if (f.has_end)
				ck_assert_uint_eq(f.end_group, cases[i].eg);
			ck_assert_int_eq(f.has_end_object, cases[i].eo);
		}
		k = moq_ietf_filter_encode(out, sizeof(out), cases[i].d, &f);
		ck_assert_int_eq(k, (int)n);
		ck_assert_int_eq(memcmp(in, out, n), 0);
	}
	{
		uint8_t in[8] = {1, 2, 3, 4, 5};
		struct moq_ietf_filter f = {.kind = IETF_F_RELATIVE, .groups = 2};
		uint8_t out[8];
		ck_assert_int_eq(moq_ietf_filter_decode(in, 5, 20, &f), MOQ_ERR_DECODE);
		ck_assert_int_eq(moq_ietf_filter_decode(in, 0, 18, &f), MOQ_ERR_DECODE);
		in[0] = 9;
		ck_assert_int_eq(moq_ietf_filter_decode(in, 1, 18, &f), MOQ_ERR_DECODE);
		in[0] = 1;
		ck_assert_int_eq(moq_ietf_filter_decode(in, 2, 18, &f), MOQ_ERR_DECODE);
		f.kind = IETF_F_RELATIVE;
		f.groups = 2;
		ck_assert_int_eq(moq_ietf_filter_encode(out, sizeof(out), 19, &f), MOQ_ERR_INVAL);
	}
}
END_TEST

/* draft-20 FILL_PARAMETERS. The bytes are what @moq/net 0.3.4's
 * ietf/filter.js encodeFill / decodeFill produce and accept (run in node:
 * relative 2; absolute {5,1}..{7,3}; no filter; relative 300 (a two-byte
 * leading-ones varint); a filter plus SUBGROUP_FILTER; FILL_TIMEOUT and
 * SUBSCRIBER_PRIORITY beside an unfiltered LOCATION_FILTER). */
START_TEST(fills)
{
	const struct {
		const char *hex;
		bool filter, range, enc;
		enum moq_ietf_filter_kind kind;
		uint64_t a;
	} cases[] = {
	        {"01210102", true, false, true, IETF_F_RELATIVE, 2},
	        {"01210405010203", true, false, true, IETF_F_ABSOLUTE, 5},
	        {"00", false, false, true, 0, 0},
	        {"012102812c", true, false, true, IETF_F_RELATIVE, 300},
	        {"022101020400", true, true, true, IETF_F_RELATIVE, 2},
	        {"030a0516070100", true, false, false, IETF_F_UNFILTERED, 0},
	};
	/* refused by both: an id the scope does not allow (0x23), trailing
	 * bytes, a truncated value, an id given twice (delta 0) */
	const char *bad[] = {"012300", "0000", "01210501", "0221010200"};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t in[32], out[32];
		size_t n = unhex(cases[i].hex, in, sizeof(in));
		struct moq_ietf_fill f;

		ck_assert_int_eq(moq_ietf_fill_decode(in, n, MOQ_IETF_20, &f), 0);
		ck_assert_int_eq(f.has_filter, cases[i].filter);
		ck_assert_int_eq(f.range_filters, cases[i].range);
		if (f.has_filter) {
			ck_assert_int_eq(f.filter.kind, cases[i].kind);
			if (f.filter.kind == IETF_F_RELATIVE)
				ck_assert_uint_eq(f.filter.groups, cases[i].a);
			if (f.filter.kind == IETF_F_ABSOLUTE) {
				ck_assert_uint_eq(f.filter.start.group, 5);
				ck_assert_uint_eq(f.filter.start.object, 1);
				ck_assert_uint_eq(f.filter.end_group, 7);
				ck_assert_uint_eq(f.filter.end_object, 3);
			}
		}
		if (cases[i].enc) {
			int k = moq_ietf_fill_encode(out, sizeof(out), MOQ_IETF_20, &f);
			ck_assert_int_eq(k, (int)n);
			ck_assert_int_eq(memcmp(in, out, n), 0);
		}
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t in[32];
		size_t n = unhex(bad[i], in, sizeof(in));
		struct moq_ietf_fill f;
		ck_assert_msg(moq_ietf_fill_decode(in, n, MOQ_IETF_20, &f) == MOQ_ERR_DECODE, "%s",
		              bad[i]);
	}
	/* a draft-20 SUBSCRIBE carries it; before 20 it cannot be written */
	{
		struct moq_ietf_msg m = {0}, o;
		uint8_t b[256];
		int k;

		m.kind = IETF_SUBSCRIBE;
		m.request_id = 4;
		m.ns_n = 1;
		m.ns[0] = (struct moq_str){"live", 4};
		m.name = (struct moq_str){"video", 5};
		m.forward = 1;
		m.filter.kind = IETF_F_NEXT_OBJECT;
		m.has_fill = true;
		m.fill.has_filter = true;
		m.fill.filter.kind = IETF_F_RELATIVE;
		m.fill.filter.groups = 1;
		k = moq_ietf_msg_encode(b, sizeof(b), MOQ_IETF_20, &m);
		ck_assert_int_gt(k, 0);
		ck_assert_int_eq(moq_ietf_msg_decode(b, (size_t)k, MOQ_IETF_20, &o), k);
		ck_assert(o.has_fill);
		ck_assert(o.fill.has_filter);
		ck_assert_int_eq(o.fill.filter.kind, IETF_F_RELATIVE);
		ck_assert_uint_eq(o.fill.filter.groups, 1);
		ck_assert_int_eq(o.filter.kind, IETF_F_NEXT_OBJECT);
		ck_assert_ptr_null(moq_ietf_param_get(&o.params, IETF_PARAM_FILL));
		m.fill.filter.groups = 0;
		m.has_fill = false;
		k = moq_ietf_msg_encode(b, sizeof(b), MOQ_IETF_20, &m);
		ck_assert_int_eq(moq_ietf_msg_decode(b, (size_t)k, MOQ_IETF_20, &o), k);
		ck_assert(!o.has_fill);
		m.has_fill = true;
		ck_assert_int_eq(moq_ietf_msg_encode(b, sizeof(b), MOQ_IETF_19, &m), MOQ_ERR_INVAL);
	}
}
END_TEST

START_TEST(datagrams)
{
	for (int d = 14; d <= 20; d++) {
		struct moq_ietf_datagram g = {0}, g2;
		uint8_t buf[64], ext[2] = {0x10, 0x05};
		int n;

		g.track_alias = 3;
		g.group = 42;
		g.has_priority = true;
		g.priority = 7;
		g.end_of_group = true;
		g.has_ext = true;
		g.ext = (struct moq_str){(const char *)ext, 2};
		g.payload = (const uint8_t *)"hello";
		g.payload_len = 5;
		n = moq_ietf_datagram_encode(buf, sizeof(buf), d, &g);
		ck_assert_int_gt(n, 0);
		ck_assert_int_eq(buf[0], 0x07); /* properties, end of group, object 0 */
		ck_assert_int_eq(moq_ietf_datagram_decode(buf, (size_t)n, d, &g2), 0);
		ck_assert_uint_eq(g2.group, 42);
		ck_assert(!g2.has_object_id && g2.end_of_group && g2.has_ext);
		ck_assert_uint_eq(g2.payload_len, 5);
		ck_assert_int_eq(memcmp(g2.payload, "hello", 5), 0);
		/* a status datagram with an explicit object id */
		memset(&g, 0, sizeof(g));
		g.track_alias = 1;
		g.group = 2;
		g.has_object_id = true;
		g.has_priority = true;
		g.priority = 128;
		g.is_status = true;
		g.status = IETF_OBJ_END_OF_TRACK;
		n = moq_ietf_datagram_encode(buf, sizeof(buf), d, &g);
		ck_assert_int_eq(buf[0], 0x20);
		ck_assert_int_eq(moq_ietf_datagram_decode(buf, (size_t)n, d, &g2), 0);
		ck_assert(g2.is_status && g2.status == IETF_OBJ_END_OF_TRACK);
		/* a trailing byte after a status is malformed */
		buf[n] = 0;
		ck_assert_int_eq(moq_ietf_datagram_decode(buf, (size_t)n + 1, d, &g2),
		                 MOQ_ERR_DECODE);
		/* default priority: 15+ only */
		g.has_priority = false;
		n = moq_ietf_datagram_encode(buf, sizeof(buf), d, &g);
		ck_assert_int_eq(n > 0, d >= 15);
		/* status and end of group together, the reserved 0x10 */
		{
			uint8_t bad[] = {0x22, 1, 2, 3, 4};
			ck_assert_int_eq(moq_ietf_datagram_decode(bad, 5, d, &g2), MOQ_ERR_DECODE);
			bad[0] = 0x10;
			ck_assert_int_eq(moq_ietf_datagram_decode(bad, 5, d, &g2), MOQ_ERR_DECODE);
		}
	}
}
END_TEST

/*
 * OBJECT_DATAGRAM as drafts 17-20 draw it (moq-wg/moq-transport, tags
 * draft-ietf-moq-transport-17 and -19 and the draft-20 text, "Object
 * Datagram"): Type Flags, Track Alias, Group ID, [Object ID], [Publisher
 * Priority (8)], [Properties], [Object Status], [Payload]; leading-ones
 * varints (group 300 is 0x81 0x2c). Rules the figures state: PROPERTIES with
 * a zero length, STATUS with END_OF_GROUP, bit 4, any bit the draft does not
 * define, and (from 17) PROPERTIES on a status that is not Normal are
 * PROTOCOL_VIOLATIONs (decode errors here).
 */
START_TEST(datagram_figures)
{
	const struct {
		const char *hex;
		uint64_t alias, group, object, status;
		int prio; /* -1: the DEFAULT_PRIORITY bit */
		bool eog, ext, st;
		const char *payload;
	} ok[] = {
	        /* 0x00: object id, priority, payload */
	        {"0003812c0507686921", 3, 300, 5, 0, 7, false, false, false, "hi!"},
	        /* 0x0c: object 0 and the default priority */
	        {"0c03812c6869", 3, 300, 0, 0, -1, false, false, false, "hi"},
	        /* 0x03: properties (type 2 = 5), end of group */
	        {"030109040802020568", 1, 9, 4, 0, 8, true, true, false, "h"},
	        /* 0x20: a status (END_OF_TRACK 4) */
	        {"200102060404", 1, 2, 6, 4, 4, false, false, true, NULL},
	        /* 0x2d: status Normal with properties, object 0, default priority */
	        {"2d010202020500", 1, 2, 0, 0, -1, false, true, true, NULL},
	};
	const char *bad[] = {
	        "0103010200"
	        "0068",       /* PROPERTIES, length 0 */
	        "2201020600", /* STATUS and END_OF_GROUP */
	        "1001020600"
	        "68", /* bit 4 */
	        "4001020600"
	        "68", /* 0x40: a bit no draft defines */
	        "2101020600020205"
	        "03", /* PROPERTIES on END_OF_GROUP status (17+) */
	};

	for (int d = MOQ_IETF_17; d <= MOQ_IETF_20; d++) {
		for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
			uint8_t in[64], out[64];
			size_t n = unhex(ok[i].hex, in, sizeof(in));
			struct moq_ietf_datagram g;
			int k;

			ck_assert_msg(moq_ietf_datagram_decode(in, n, d, &g) == 0, "d%d %s", d,
			              ok[i].hex);
			ck_assert_uint_eq(g.track_alias, ok[i].alias);
			ck_assert_uint_eq(g.group, ok[i].group);
			ck_assert_uint_eq(g.object, ok[i].object);
			ck_assert_int_eq(g.has_priority, ok[i].prio >= 0);
			if (ok[i].prio >= 0)
				ck_assert_uint_eq(g.priority, (unsigned)ok[i].prio);
			ck_assert_int_eq(g.end_of_group, ok[i].eog);
			ck_assert_int_eq(g.has_ext, ok[i].ext);
			ck_assert_int_eq(g.is_status, ok[i].st);
			if (g.is_status) {
				ck_assert_uint_eq(g.status, ok[i].status);
			} else {
				ck_assert_uint_eq(g.payload_len, strlen(ok[i].payload));
				ck_assert_int_eq(memcmp(g.payload, ok[i].payload, g.payload_len),
				                 0);
			}
			k = moq_ietf_datagram_encode(out, sizeof(out), d, &g);
			ck_assert_int_eq(k, (int)n);
			ck_assert_int_eq(memcmp(in, out, n), 0);
		}
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			uint8_t in[64];
			size_t n = unhex(bad[i], in, sizeof(in));
			struct moq_ietf_datagram g;
			ck_assert_msg(moq_ietf_datagram_decode(in, n, d, &g) == MOQ_ERR_DECODE,
			              "d%d %s", d, bad[i]);
		}
	}
	/* 16 had no rule against properties on a status */
	{
		uint8_t in[64];
		size_t n = unhex(bad[4], in, sizeof(in));
		struct moq_ietf_datagram g;
		ck_assert_int_eq(moq_ietf_datagram_decode(in, n, MOQ_IETF_16, &g), 0);
		ck_assert_uint_eq(g.status, IETF_OBJ_END_OF_GROUP);
		ck_assert_int_eq(moq_ietf_datagram_encode(in, sizeof(in), MOQ_IETF_17, &g),
		                 MOQ_ERR_INVAL);
	}
}
END_TEST

START_TEST(fetch_objects)
{
	for (int d = 14; d <= 20; d++) {
		struct moq_ietf_fetch_obj objs[4] = {
		        {.group = 3, .subgroup = 0, .object = 0, .priority = 1, .payload_len = 4},
		        {.group = 3, .subgroup = 1, .object = 2, .priority = 1, .payload_len = 0},
		        {.group = 5, .subgroup = 2, .object = 0, .priority = 9, .payload_len = 1},
		        {.group = 5, .subgroup = 9, .object = 1, .priority = 9, .payload_len = 2},
		};
		uint8_t buf[256];
		size_t o = 0, r = 0;
		struct moq_ietf_fetch_obj prev;

		for (int i = 0; i < 4; i++) {
			int n = moq_ietf_fetch_obj_encode_head(buf + o, sizeof(buf) - o, d,
			                                       i ? &objs[i - 1] : NULL, &objs[i]);
			ck_assert_int_gt(n, 0);
			o += (size_t)n + objs[i].payload_len;
		}
		for (int i = 0; i < 4; i++) {
			struct moq_ietf_fetch_obj got;
			int n = moq_ietf_fetch_obj_decode_head(buf + r, o - r, d, i ? &prev : NULL,
			                                       &got);
			ck_assert_int_gt(n, 0);
			ck_assert_uint_eq(got.group, objs[i].group);
			ck_assert_uint_eq(got.subgroup, objs[i].subgroup);
			ck_assert_uint_eq(got.object, objs[i].object);
			ck_assert_int_eq(got.priority, objs[i].priority);
			ck_assert_uint_eq(got.payload_len, objs[i].payload_len);
			r += (size_t)n + got.payload_len;
			prev = objs[i];
		}
		ck_assert_uint_eq(r, o);
	}
}
END_TEST

START_TEST(namespace_paths)
{
	struct moq_str ns[MOQ_IETF_MAX_NS];
	char out[256];
	int n;

	ns[0] = S("demo");
	ns[1] = S("room");
	n = moq_ietf_ns_to_path(out, sizeof(out), ns, 2);
	ck_assert_int_eq(n, 9);
	ck_assert_int_eq(memcmp(out, "demo/room", 9), 0);
	ns[1] = S("a/b\\c");
	n = moq_ietf_ns_to_path(out, sizeof(out), ns, 2);
	ck_assert_int_eq(n, 12);
	ck_assert_int_eq(memcmp(out, "demo/a\\/b\\\\c", 12), 0);
	n = moq_ietf_path_to_ns(out, 12, ns);
	ck_assert_int_eq(n, 2);
	ck_assert_uint_eq(ns[1].len, 7); /* escapes kept: a\/b\\c */
	ck_assert_int_eq(moq_ietf_path_to_ns("", 0, ns), 0);
	ck_assert_int_eq(moq_ietf_path_to_ns("a/b/c", 5, ns), 3);
	ns[0] = S("");
	ck_assert_int_eq(moq_ietf_ns_to_path(out, sizeof(out), ns, 1), MOQ_ERR_DECODE);
	ns[0] = S("demo");
	ck_assert_int_eq(moq_ietf_ns_to_path(out, 3, ns, 1), MOQ_ERR_TOO_LARGE);
	{
		char many[80];
		for (int i = 0; i < 40; i++) {
			many[2 * i] = 'a';
			many[2 * i + 1] = '/';
		}
		ck_assert_int_eq(moq_ietf_path_to_ns(many, 65, ns), MOQ_ERR_TOO_LARGE);
		ck_assert_int_eq(moq_ietf_path_to_ns(many, 63, ns), 32);
	}
}
END_TEST

START_TEST(alpns)
{
	ck_assert_int_eq(moq_ietf_alpn_draft("moq-00", 6), 14);
	ck_assert_int_eq(moq_ietf_alpn_draft("moqt-20", 7), 20);
	ck_assert_int_eq(moq_ietf_alpn_draft("moqt-17", 7), 17);
	ck_assert_int_eq(moq_ietf_alpn_draft("moqt-21", 7), 0);
	ck_assert_int_eq(moq_ietf_alpn_draft("moq-lite-05", 11), 0);
	ck_assert_str_eq(moq_ietf_alpn(15), "moqt-15");
	ck_assert_ptr_null(moq_ietf_alpn(13));
	ck_assert_int_eq(moq_ietf_version_draft(0xff00000e), 14);
	ck_assert_int_eq(moq_ietf_version_draft(0xff000014), 20);
	ck_assert_int_eq(moq_ietf_version_draft(0xff000007), 0);
	ck_assert_int_eq(moq_ietf_version_draft(0xff0dad02), 0);
	ck_assert_int_eq(moq_ietf_type_kind(14, 0x08), IETF_PUBLISH_NAMESPACE_ERROR);
	ck_assert_int_eq(moq_ietf_type_kind(15, 0x08), IETF_NAMESPACE);
	ck_assert_int_eq(moq_ietf_type_kind(17, 0x15), IETF_NONE);
	ck_assert_int_eq(moq_ietf_type_kind(18, 0x11), IETF_NONE);
	ck_assert_int_eq(moq_ietf_type_kind(18, 0x50), IETF_SUBSCRIBE_NAMESPACE);
}
END_TEST

/* Malformed control input: every case is an error, never a success. */
START_TEST(malformed)
{
	struct moq_ietf_msg m;
	uint8_t b[256];
	size_t n;

	/* unknown types, known before the body arrives */
	n = unhex("3f0000", b, sizeof(b));
	ck_assert_int_eq(moq_ietf_msg_decode(b, n, 14, &m), MOQ_ERR_PROTO);
	n = unhex("1500", b, sizeof(b)); /* MAX_REQUEST_ID: not in 17 */
	ck_assert_int_eq(moq_ietf_msg_decode(b, 2, 17, &m), MOQ_ERR_SHORT);
	n = unhex("150002412c", b, sizeof(b));
	ck_assert_int_eq(moq_ietf_msg_decode(b, n, 17, &m), MOQ_ERR_PROTO);
	ck_assert_int_eq(moq_ietf_msg_decode(b, n, 14, &m), 5);
	ck_assert_uint_eq(m.request_id, 300);
	/* a length one too long (a byte left over) and one too short */
	n = unhex("15000341"
	          "2c00",
	          b, sizeof(b));
	ck_assert_int_eq(moq_ietf_msg_decode(b, n, 14, &m), MOQ_ERR_DECODE);
	n = unhex("150001412c", b, sizeof(b));
	ck_assert_int_eq(moq_ietf_msg_decode(b, n, 14, &m), MOQ_ERR_DECODE);
	/* 33 namespace fields */
	{
		size_t o = 0;
		b[o++] = 0x06;
		o += 2;
		b[o++] = 3;  /* request id */
		b[o++] = 33; /* fields */
		for (int i = 0; i < 33; i++) {
			b[o++] = 1;
			b[o++] = 'a';
		}
		b[o++] = 0;
		b[1] = (uint8_t)((o - 3) >> 8);
		b[2] = (uint8_t)(o - 3);
		ck_assert_int_eq(moq_ietf_msg_decode(b, o, 14, &m), MOQ_ERR_DECODE);
		b[4] = 32;
		b[o - 3] = 0; /* drop one field: now 32 fields and 1 stray byte */
		b[1] = (uint8_t)((o - 5) >> 8);
		b[2] = (uint8_t)(o - 5);
		b[o - 3] = 0;
		ck_assert_int_eq(moq_ietf_msg_decode(b, o - 2, 14, &m), (int)o - 2);
		ck_assert_uint_eq(m.ns_n, 32);
	}
	/* PUBLISH_NAMESPACE with an empty tuple */
	n = unhex("060003030000", b, sizeof(b));
	ck_assert_int_eq(moq_ietf_msg_decode(b, n, 14, &m), MOQ_ERR_DECODE);
	/* a repeated parameter id (14: absolute ids) */
	n = unhex("060009030101610202010201", b, sizeof(b));
	/* 06 0009 | 03 | 01 01 61 | 02 | 02 01 | 02 01  -> dup id 2 */
	ck_assert_int_eq(moq_ietf_msg_decode(b, n, 14, &m), MOQ_ERR_DECODE);
	/* 16+: the second id a delta of 0 (a repeat) */
	n = unhex("060009030101610202010001", b, sizeof(b));
	ck_assert_int_eq(moq_ietf_msg_decode(b, n, 16, &m), MOQ_ERR_DECODE);
	ck_assert_int_eq(moq_ietf_msg_decode(b, n, 14, &m), (int)n);
	/* forward = 2 in a 14 SUBSCRIBE */
	{
		struct moq_ietf_msg s;
		uint8_t out[128];
		int k;
		build("subscribe_live", 14, &s);
		k = moq_ietf_msg_encode(out, sizeof(out), 14, &s);
		ck_assert_int_gt(k, 0);
		/* type, len(2), id, count, 4 demo, 4 room, 5 video, prio, order, fwd */
		ck_assert_int_eq(out[3 + 1 + 1 + 5 + 5 + 6 + 2], 1);
		out[3 + 1 + 1 + 5 + 5 + 6 + 2] = 2;
		ck_assert_int_eq(moq_ietf_msg_decode(out, (size_t)k, 14, &m), MOQ_ERR_DECODE);
		/* a d20 relative filter is refused on 19 */
		build("subscribe_rel2", 20, &s);
		ck_assert_int_eq(moq_ietf_msg_encode(out, sizeof(out), 19, &s), MOQ_ERR_INVAL);
	}
	/* a message over 65535 bytes does not encode */
	{
		static uint8_t big[70000];
		static uint8_t out[80000];
		struct moq_ietf_msg g = {0};
		g.kind = IETF_REQUEST_OK;
		moq_ietf_param_add(&g.params, 0x41, 0, (struct moq_str){(const char *)big, 66000});
		ck_assert_int_eq(moq_ietf_msg_encode(out, sizeof(out), 18, &g), MOQ_ERR_TOO_LARGE);
	}
	/* subgroup header types that are none */
	{
		struct moq_ietf_subgroup_hdr h;
		uint8_t t[] = {0x06, 1, 1};
		ck_assert_int_eq(moq_ietf_subgroup_hdr_decode(t, 3, 14, &h), MOQ_ERR_DECODE);
		t[0] = 0x16; /* subgroup forms 0x02 and 0x04 together */
		ck_assert_int_eq(moq_ietf_subgroup_hdr_decode(t, 3, 14, &h), MOQ_ERR_DECODE);
		t[0] = 0x30; /* no priority byte: 15+ */
		ck_assert_int_eq(moq_ietf_subgroup_hdr_decode(t, 3, 14, &h), MOQ_ERR_DECODE);
		ck_assert_int_eq(moq_ietf_subgroup_hdr_decode(t, 3, 15, &h), 3);
	}
	/* an unknown object status, and broken extension headers */
	{
		struct moq_ietf_object o;
		uint8_t a[] = {0, 0, 2};
		uint8_t e[] = {0, 2, 0x03, 0x05, 1, 'x'}; /* odd id, length 5 > 1 left */
		ck_assert_int_eq(moq_ietf_object_decode_head(a, 3, 14, false, &o), MOQ_ERR_DECODE);
		ck_assert_int_eq(moq_ietf_object_decode_head(e, 6, 14, true, &o), MOQ_ERR_DECODE);
	}
}
END_TEST

Suite *ietf_codec_suite(void);

Suite *ietf_codec_suite(void)
{
	Suite *s = suite_create("ietf_codec");
	TCase *tc = tcase_create("ietf_codec");

	tcase_add_test(tc, golden_control);
	tcase_add_test(tc, golden_varints);
	tcase_add_test(tc, golden_data);
	tcase_add_test(tc, roundtrip_all);
	tcase_add_test(tc, fetch_forms);
	tcase_add_test(tc, filters);
	tcase_add_test(tc, fills);
	tcase_add_test(tc, datagrams);
	tcase_add_test(tc, datagram_figures);
	tcase_add_test(tc, fetch_objects);
	tcase_add_test(tc, namespace_paths);
	tcase_add_test(tc, alpns);
	tcase_add_test(tc, malformed);
	suite_add_tcase(s, tc);
	return s;
}
