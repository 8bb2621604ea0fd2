/* SPDX-License-Identifier: MIT */
/*
 * lite06_codec.c: moq-lite-06 messages (draft-lcurley-moq-lite-06; the
 * figures are summarised in ../shared/PROTOCOL.md, "moq-lite-06").
 */
#include "lite06_codec.h"

#include <string.h>

#include "moq_err.h"
#include "codec_rw.h"

/* the writer and reader primitives are codec.c's (codec_rw.h) */

static void w_fail(struct wr *w, int err)
{
	if (!w->err)
		w->err = err;
}

static void w_hops(struct wr *w, uint32_t n, const uint64_t *hops)
{
	if (n > MOQ_MAX_HOPS) {
		w_fail(w, MOQ_ERR_INVAL);
		return;
	}
	w_vi(w, n);
	for (uint32_t i = 0; i < n; i++)
		w_vi(w, hops[i]);
}

/* Hop Count (i), Hop ID (i) ...: at most 32; a repeated non-zero id is a
 * protocol violation (0 is an unknown hop bridged from an older version). */
static void r_hops(struct rd *r, uint32_t *count, uint64_t *hops)
{
	uint64_t n = r_vi(r);

	*count = 0;
	if (r->err)
		return;
	if (n > MOQ_MAX_HOPS) {
		r->err = MOQ_ERR_DECODE;
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		hops[i] = r_vi(r);
		if (r->err)
			return;
		for (uint32_t j = 0; hops[i] && j < i; j++)
			if (hops[j] == hops[i]) {
				r->err = MOQ_ERR_PROTO;
				return;
			}
	}
	*count = (uint32_t)n;
}

/* ---- message bodies ---- */

static bool typed(enum moq6_msg_type t)
{
	return t == MOQ6_ANNOUNCE || t == MOQ6_SUBSCRIBE_REPLY;
}

static void enc_body(struct wr *w, const struct moq6_msg *m)
{
	switch (m->type) {
	case MOQ6_SETUP: {
		const struct moq6_setup *s = &m->u.setup;
		w_vi(w,
		     (uint64_t)s->has_probe + s->has_path + s->has_role + s->has_cost + s->has_hop);
		if (s->has_probe)
			w_param_vi(w, MOQ6_SETUP_PROBE, s->probe);
		if (s->has_path) {
			w_vi(w, MOQ6_SETUP_PATH);
			w_str(w, s->path);
		}
		if (s->has_role)
			w_param_vi(w, MOQ6_SETUP_ROLE, s->role);
		if (s->has_cost)
			w_param_vi(w, MOQ6_SETUP_COST, s->cost);
		if (s->has_hop)
			w_param_vi(w, MOQ6_SETUP_HOP, s->hop);
		break;
	}
	case MOQ6_ANNOUNCE_REQUEST:
		w_path(w, m->u.announce_request.prefix);
		break;
	case MOQ6_ANNOUNCE_OK:
		w_vi(w, m->u.announce_ok.hop);
		w_vi(w, m->u.announce_ok.active);
		break;
	case MOQ6_ANNOUNCE: {
		const struct moq6_announce *a = &m->u.announce;
		switch (a->kind) {
		case MOQ6_ANN_START:
			w_path(w, a->suffix);
			w_hops(w, a->hop_count, a->hops);
			w_vi(w, a->warm_cost);
			w_vi(w, a->cold_cost);
			break;
		case MOQ6_ANN_END:
			w_vi(w, a->id);
			break;
		case MOQ6_ANN_UPDATE:
			w_vi(w, a->id);
			w_hops(w, a->hop_count, a->hops);
			w_vi(w, a->warm_cost);
			w_vi(w, a->cold_cost);
			break;
		default:
			w_fail(w, MOQ_ERR_INVAL);
		}
		break;
	}
	case MOQ6_SUBSCRIBE: {
		const struct moq6_subscribe *s = &m->u.subscribe;
		w_vi(w, s->id);
		w_path(w, s->broadcast);
		w_str(w, s->track);
		w_u8(w, s->priority);
		w_vi(w, s->max_age_ms);
		w_vi(w, s->group_start);
		w_vi(w, s->group_end);
		w_vi(w, s->frame_start);
		w_vi(w, s->frame_end);
		break;
	}
	case MOQ6_SUBSCRIBE_UPDATE: {
		const struct moq6_subscribe_update *s = &m->u.subscribe_update;
		w_u8(w, s->priority);
		w_vi(w, s->max_age_ms);
		w_vi(w, s->group_start);
		w_vi(w, s->group_end);
		w_vi(w, s->frame_start);
		w_vi(w, s->frame_end);
		break;
	}
	case MOQ6_SUBSCRIBE_REPLY: {
		const struct moq6_subscribe_reply *s = &m->u.subscribe_reply;
		if (s->kind == MOQ6_SUB_OK || s->kind == MOQ6_SUB_END) {
			w_vi(w, s->group);
		} else if (s->kind == MOQ6_SUB_DROP) {
			w_vi(w, s->drop_start);
			w_vi(w, s->drop_end);
			w_vi(w, s->drop_code);
		} else {
			w_fail(w, MOQ_ERR_INVAL);
		}
		break;
	}
	case MOQ6_TRACK:
		w_path(w, m->u.track.broadcast);
		w_str(w, m->u.track.track);
		break;
	case MOQ6_TRACK_INFO:
		if (m->u.track_info.timescale == 0)
			w_fail(w, MOQ_ERR_INVAL);
		w_u8(w, m->u.track_info.priority);
		w_vi(w, m->u.track_info.max_age_ms);
		w_vi(w, m->u.track_info.timescale);
		break;
	case MOQ6_GROUP:
		w_vi(w, m->u.group.subscribe_id);
		w_vi(w, m->u.group.sequence);
		w_vi(w, m->u.group.frame_start);
		break;
	case MOQ6_FETCH:
		w_path(w, m->u.fetch.broadcast);
		w_str(w, m->u.fetch.track);
		w_u8(w, m->u.fetch.priority);
		w_vi(w, m->u.fetch.group);
		w_vi(w, m->u.fetch.frame_start);
		w_vi(w, m->u.fetch.frame_end);
		break;
	case MOQ6_PROBE:
		w_vi(w, m->u.probe.bitrate);
		w_vi(w, m->u.probe.rtt_ms);
		break;
	case MOQ6_GOAWAY:
		if (m->u.goaway.uri.len > MOQ6_GOAWAY_URI_MAX)
			w_fail(w, MOQ_ERR_INVAL);
		w_str(w, m->u.goaway.uri);
		break;
	default:
		w_fail(w, MOQ_ERR_INVAL);
	}
}

static uint64_t wire_kind(const struct moq6_msg *m)
{
	return m->type == MOQ6_ANNOUNCE ? m->u.announce.kind : m->u.subscribe_reply.kind;
}

int moq6_msg_encode(uint8_t *buf, size_t cap, const struct moq6_msg *m)
{
	struct wr cnt = {NULL, 0, 0, 0};
	struct wr w = {buf, cap, 0, 0};

	if (!m || m->type < MOQ6_SETUP || m->type >= MOQ6_TYPE_MAX)
		return MOQ_ERR_INVAL;
	enc_body(&cnt, m);
	if (cnt.err)
		return cnt.err;
	if (typed(m->type))
		w_vi(&w, wire_kind(m));
	w_vi(&w, cnt.len);
	enc_body(&w, m);
	if (w.err)
		return w.err;
	return (int)w.len;
}

static int dec_setup(struct rd *r, struct moq6_setup *s)
{
	uint64_t ids[MOQ_SETUP_MAX_PARAMS];
	uint64_t n = r_vi(r);

	memset(s, 0, sizeof(*s));
	s->cost = MOQ6_COST_DEFAULT;
	if (r->err)
		return r->err;
	if (n > MOQ_SETUP_MAX_PARAMS)
		return MOQ_ERR_PROTO;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t id = r_vi(r);
		struct moq_str val = r_str(r);
		struct rd pr;
		uint64_t x;

		if (r->err)
			return r->err;
		for (uint64_t j = 0; j < i; j++)
			if (ids[j] == id)
				return MOQ_ERR_PROTO; /* a repeated id is a violation */
		ids[i] = id;
		if (id == MOQ6_SETUP_PATH) {
			s->has_path = true;
			s->path = val;
			continue;
		}
		if (id < MOQ6_SETUP_PROBE || id > MOQ6_SETUP_HOP)
			continue; /* unknown ids are ignored */
		pr = (struct rd){(const uint8_t *)val.p, val.len, 0, 0};
		x = r_vi(&pr);
		if (pr.err || pr.off != pr.len)
			return MOQ_ERR_DECODE;
		switch (id) {
		case MOQ6_SETUP_PROBE:
			s->has_probe = true;
			s->probe = x;
			break;
		case MOQ6_SETUP_ROLE:
			s->has_role = true;
			s->role = x;
			break;
		case MOQ6_SETUP_COST:
			s->has_cost = true;
			s->cost = x;
			break;
		default:
			s->has_hop = true;
			s->hop = x;
			break;
		}
	}
	return 0;
}

static int dec_body(struct rd *r, enum moq6_msg_type t, uint64_t kind, struct moq6_msg *m)
{
	m->type = t;
	switch (t) {
	case MOQ6_SETUP:
		return dec_setup(r, &m->u.setup);
	case MOQ6_ANNOUNCE_REQUEST:
		m->u.announce_request.prefix = r_path(r);
		break;
	case MOQ6_ANNOUNCE_OK:
		m->u.announce_ok.hop = r_vi(r);
		m->u.announce_ok.active = r_vi(r);
		break;
	case MOQ6_ANNOUNCE: {
		struct moq6_announce *a = &m->u.announce;
		memset(a, 0, sizeof(*a));
		a->suffix = (struct moq_str){"", 0};
		if (kind > MOQ6_ANN_UPDATE)
			return MOQ_ERR_DECODE;
		a->kind = (uint8_t)kind;
		if (kind == MOQ6_ANN_START)
			a->suffix = r_path(r);
		else
			a->id = r_vi(r);
		if (kind != MOQ6_ANN_END) {
			r_hops(r, &a->hop_count, a->hops);
			a->warm_cost = r_vi(r);
			a->cold_cost = r_vi(r);
		}
		break;
	}
	case MOQ6_SUBSCRIBE: {
		struct moq6_subscribe *s = &m->u.subscribe;
		s->id = r_vi(r);
		s->broadcast = r_path(r);
		s->track = r_str(r);
		s->priority = r_u8(r);
		s->max_age_ms = r_vi(r);
		s->group_start = r_vi(r);
		s->group_end = r_vi(r);
		s->frame_start = r_vi(r);
		s->frame_end = r_vi(r);
		break;
	}
	case MOQ6_SUBSCRIBE_UPDATE: {
		struct moq6_subscribe_update *s = &m->u.subscribe_update;
		s->priority = r_u8(r);
		s->max_age_ms = r_vi(r);
		s->group_start = r_vi(r);
		s->group_end = r_vi(r);
		s->frame_start = r_vi(r);
		s->frame_end = r_vi(r);
		break;
	}
	case MOQ6_SUBSCRIBE_REPLY: {
		struct moq6_subscribe_reply *s = &m->u.subscribe_reply;
		memset(s, 0, sizeof(*s));
		if (kind > MOQ6_SUB_DROP)
			return MOQ_ERR_DECODE;
		s->kind = (uint8_t)kind;
		if (kind == MOQ6_SUB_DROP) {
			s->drop_start = r_vi(r);
			s->drop_end = r_vi(r);
			s->drop_code = r_vi(r);
		} else {
			s->group = r_vi(r);
		}
		break;
	}
	case MOQ6_TRACK:
		m->u.track.broadcast = r_path(r);
		m->u.track.track = r_str(r);
		break;
	case MOQ6_TRACK_INFO:
		m->u.track_info.priority = r_u8(r);
		m->u.track_info.max_age_ms = r_vi(r);
		m->u.track_info.timescale = r_vi(r);
		if (!r->err && m->u.track_info.timescale == 0)
			return MOQ_ERR_DECODE;
		break;
	case MOQ6_GROUP:
		m->u.group.subscribe_id = r_vi(r);
		m->u.group.sequence = r_vi(r);
		m->u.group.frame_start = r_vi(r);
		break;
	case MOQ6_FETCH:
		m->u.fetch.broadcast = r_path(r);
		m->u.fetch.track = r_str(r);
		m->u.fetch.priority = r_u8(r);
		m->u.fetch.group = r_vi(r);
		m->u.fetch.frame_start = r_vi(r);
		m->u.fetch.frame_end = r_vi(r);
		break;
	case MOQ6_PROBE:
		m->u.probe.bitrate = r_vi(r);
		m->u.probe.rtt_ms = r_vi(r);
		break;
	case MOQ6_GOAWAY:
		m->u.goaway.uri = r_str(r);
		if (!r->err && m->u.goaway.uri.len > MOQ6_GOAWAY_URI_MAX)
			return MOQ_ERR_DECODE;
		break;
	default:
		return MOQ_ERR_INVAL;
	}
	return r->err;
}

/* The prefix (the kind of a typed message, then the length) of the next
 * message; *@hdr is set once the prefix is complete. */
static int peek(enum moq6_msg_type type, const uint8_t *buf, size_t len, size_t max_len,
                uint64_t *kind, size_t *hdr, uint64_t *body)
{
	size_t off = 0;
	int n;

	*kind = 0;
	*hdr = 0;
	if (typed(type)) {
		n = moq_varint_get(buf, len, kind);
		if (n < 0)
			return n;
		off = (size_t)n;
	}
	n = moq_varint_get(buf + off, len - off, body);
	if (n < 0)
		return n;
	off += (size_t)n;
	if (*body > max_len)
		return MOQ_ERR_TOO_LARGE;
	*hdr = off;
	if (len - off < *body)
		return MOQ_ERR_SHORT;
	return 0;
}

int moq6_msg_peek_len(enum moq6_msg_type type, const uint8_t *buf, size_t len, size_t max_len)
{
	uint64_t kind = 0, body = 0;
	size_t hdr = 0;
	int rc;

	if (max_len > (size_t)1 << 30)
		max_len = (size_t)1 << 30;
	rc = peek(type, buf, len, max_len, &kind, &hdr, &body);
	if (rc == MOQ_ERR_SHORT && hdr > 0)
		return (int)(hdr + body);
	if (rc < 0)
		return rc;
	return (int)(hdr + body);
}

int moq6_msg_decode(enum moq6_msg_type type, const uint8_t *buf, size_t len, size_t max_len,
                    struct moq6_msg *m)
{
	uint64_t kind, body;
	size_t hdr = 0;
	struct rd r;
	int rc;

	if (type < MOQ6_SETUP || type >= MOQ6_TYPE_MAX || !m)
		return MOQ_ERR_INVAL;
	if (max_len > (size_t)1 << 30)
		max_len = (size_t)1 << 30;
	rc = peek(type, buf, len, max_len, &kind, &hdr, &body);
	if (rc < 0)
		return rc;
	r = (struct rd){buf + hdr, (size_t)body, 0, 0};
	rc = dec_body(&r, type, kind, m);
	if (rc < 0)
		return rc;
	if (r.off != r.len)
		return MOQ_ERR_DECODE; /* a body with bytes left over */
	return (int)(hdr + body);
}

int moq6_group_hdr_encode(uint8_t *buf, size_t cap, uint64_t sub_id, uint64_t seq,
                          uint64_t frame_start)
{
	struct moq6_msg m = {.type = MOQ6_GROUP};
	int n, k;

	m.u.group = (struct moq6_group){sub_id, seq, frame_start};
	n = moq_varint_put(buf, cap, MOQ_STREAM_GROUP);
	if (n < 0)
		return n;
	k = moq6_msg_encode(buf + n, cap - (size_t)n, &m);
	if (k < 0)
		return k;
	return n + k;
}

/* ---- error codes: moqdp's (lite-05 numbering) to and from lite-06 ---- */

static const struct {
	uint8_t internal; /* enum moq_code */
	uint8_t wire;     /* enum moq6_stream_code */
} stream_map[] = {
        {MOQ_CODE_CANCEL, MOQ6_STREAM_CANCELLED},
        {MOQ_CODE_OLD, MOQ6_STREAM_OLD},
        {MOQ_CODE_TIMEOUT, MOQ6_STREAM_DELIVERY_TIMEOUT},
        {MOQ_CODE_TRANSPORT, MOQ6_STREAM_INTERNAL},
        {MOQ_CODE_CLOSED, MOQ6_STREAM_SESSION_CLOSED},
        {MOQ_CODE_LAGGED, MOQ6_STREAM_TOO_FAR_BEHIND},
        {MOQ_CODE_NOT_FOUND, MOQ6_STREAM_NOT_FOUND},
        {MOQ_CODE_EVICTED, MOQ6_STREAM_EVICTED},
        {MOQ_CODE_UNROUTABLE, MOQ6_STREAM_UNROUTABLE},
        {MOQ_CODE_WRONG_SIZE, MOQ6_STREAM_WRONG_SIZE},
        {MOQ_CODE_FRAME_TOO_LARGE, MOQ6_STREAM_FRAME_TOO_LARGE},
        {MOQ_CODE_TIMESTAMP_MISMATCH, MOQ6_STREAM_TIMESTAMP_MISMATCH},
        {MOQ_CODE_DECODE, MOQ6_STREAM_MALFORMED_TRACK},
        /* draft-06 Table 3: 0x30 NO_CAPACITY, "could serve this request but
         * has no capacity for it now": moqdp's BOUNDS refusals (a limit
         * reached); 0x32 GROUP_TOO_LARGE is a group aborted past the cache
         * budget, which moqdp does not reset with BOUNDS */
        {MOQ_CODE_BOUNDS, MOQ6_STREAM_NO_CAPACITY},
};

/* SUBSCRIBE_DROP's Error Code (draft-06 7.15): "A value of 0 indicates no
 * error; the groups are simply unavailable", which is what moqdp's DROPPED
 * says (a sequence the publisher never delivered); other codes as on a
 * stream reset. */
static uint64_t drop_code6(uint64_t c)
{
	return c == MOQ_CODE_DROPPED ? 0 : moq6_code_stream(c);
}

static uint64_t drop_code_from6(uint64_t c)
{
	return c == 0 ? MOQ_CODE_DROPPED : moq6_code_from_stream(c);
}

uint64_t moq6_code_stream(uint64_t c)
{
	if (c >= MOQ6_STREAM_APPLICATION)
		return c;
	for (size_t i = 0; i < sizeof(stream_map) / sizeof(stream_map[0]); i++)
		if (stream_map[i].internal == c)
			return stream_map[i].wire;
	/* no lite-06 equivalent (unauthorised, unexpected stream, ...) */
	return MOQ6_STREAM_INTERNAL;
}

uint64_t moq6_code_from_stream(uint64_t c)
{
	if (c >= MOQ6_STREAM_APPLICATION)
		return c;
	if (c == MOQ6_STREAM_INTERNAL)
		return MOQ_CODE_TRANSPORT;
	if (c == MOQ6_STREAM_GOING_AWAY)
		return MOQ_CODE_CLOSED;
	if (c == MOQ6_STREAM_CONTROL_TIMEOUT)
		return MOQ_CODE_TIMEOUT;
	for (size_t i = 0; i < sizeof(stream_map) / sizeof(stream_map[0]); i++)
		if (stream_map[i].wire == c)
			return stream_map[i].internal;
	return MOQ_CODE_PROTOCOL_VIOLATION;
}

uint64_t moq6_code_session(uint64_t c)
{
	switch (c) {
	case MOQ_CODE_CANCEL:
		return MOQ6_SESS_NO_ERROR;
	case MOQ_CODE_UNAUTHORIZED:
		return MOQ6_SESS_UNAUTHORIZED;
	case MOQ_CODE_DECODE:
	case MOQ_CODE_UNEXPECTED_STREAM:
	case MOQ_CODE_DUPLICATE:
	case MOQ_CODE_PROTOCOL_VIOLATION:
	case MOQ_CODE_UNEXPECTED_MESSAGE:
	case MOQ_CODE_INVALID_ROLE:
		return MOQ6_SESS_PROTOCOL_VIOLATION;
	case MOQ_CODE_TOO_MANY_PARAMETERS:
		return MOQ6_SESS_KEY_VALUE_FORMATTING;
	case MOQ_CODE_VERSION:
	case MOQ_CODE_UNKNOWN_ALPN:
		return MOQ6_SESS_VERSION_NEGOTIATION;
	case MOQ_CODE_TIMEOUT:
		return MOQ6_SESS_CONTROL_TIMEOUT;
	default:
		return c >= 64 ? c : MOQ6_SESS_INTERNAL;
	}
}

/* ---- codec.h's messages on the lite-06 wire ---- */

static enum moq6_msg_type type6(enum moq_msg_type t)
{
	switch (t) {
	case MOQ_MSG_SETUP:
		return MOQ6_SETUP;
	case MOQ_MSG_ANNOUNCE_REQ:
		return MOQ6_ANNOUNCE_REQUEST;
	case MOQ_MSG_ANNOUNCE_OK:
		return MOQ6_ANNOUNCE_OK;
	case MOQ_MSG_ANNOUNCE:
		return MOQ6_ANNOUNCE;
	case MOQ_MSG_SUBSCRIBE:
		return MOQ6_SUBSCRIBE;
	case MOQ_MSG_SUBSCRIBE_UPDATE:
		return MOQ6_SUBSCRIBE_UPDATE;
	case MOQ_MSG_SUBSCRIBE_REPLY:
		return MOQ6_SUBSCRIBE_REPLY;
	case MOQ_MSG_TRACK:
		return MOQ6_TRACK;
	case MOQ_MSG_TRACK_INFO:
		return MOQ6_TRACK_INFO;
	case MOQ_MSG_GROUP:
		return MOQ6_GROUP;
	case MOQ_MSG_FETCH:
		return MOQ6_FETCH;
	case MOQ_MSG_PROBE:
		return MOQ6_PROBE;
	case MOQ_MSG_GOAWAY:
		return MOQ6_GOAWAY;
	default:
		return MOQ6_TYPE_MAX;
	}
}

/* Absent (MOQ_GROUP_NONE) is 0 on the lite-06 wire: Group Start's default
 * floor, Group End's unbounded. */
static uint64_t start6(uint64_t g)
{
	return g == MOQ_GROUP_NONE ? 0 : g;
}

static uint64_t end6(uint64_t g)
{
	return g == MOQ_GROUP_NONE ? 0 : g + 1;
}

int moq6_encode_generic(uint8_t *buf, size_t cap, const struct moq_msg *m)
{
	struct moq6_msg x;

	if (!m)
		return MOQ_ERR_INVAL;
	memset(&x, 0, sizeof(x));
	x.type = type6(m->type);
	switch (m->type) {
	case MOQ_MSG_SETUP: {
		const struct moq_setup *s = &m->u.setup;
		x.u.setup = (struct moq6_setup){.has_probe = s->has_probe,
		                                .has_path = s->has_path,
		                                .has_role = s->has_role,
		                                .has_cost = s->has_cost,
		                                .has_hop = s->has_origin,
		                                .probe = s->probe,
		                                .path = s->path,
		                                .role = s->role,
		                                .cost = s->cost,
		                                .hop = s->origin};
		break;
	}
	case MOQ_MSG_ANNOUNCE_REQ:
		x.u.announce_request.prefix = m->u.announce_req.prefix;
		break;
	case MOQ_MSG_ANNOUNCE_OK:
		x.u.announce_ok.hop = m->u.announce_ok.origin;
		x.u.announce_ok.active = m->u.announce_ok.active;
		break;
	case MOQ_MSG_ANNOUNCE: {
		const struct moq_announce *a = &m->u.announce;
		struct moq6_announce *b = &x.u.announce;
		if (a->hop_count > MOQ_MAX_HOPS)
			return MOQ_ERR_INVAL;
		b->kind = a->kind6;
		b->id = a->id6;
		b->suffix = a->suffix;
		b->hop_count = a->hop_count;
		memcpy(b->hops, a->hops, a->hop_count * sizeof(a->hops[0]));
		b->warm_cost = a->warm_cost;
		b->cold_cost = a->cold_cost;
		break;
	}
	case MOQ_MSG_SUBSCRIBE: {
		const struct moq_subscribe *s = &m->u.subscribe;
		x.u.subscribe =
		        (struct moq6_subscribe){s->id,        s->broadcast,      s->track,
		                                s->priority,  s->max_latency_ms, start6(s->start),
		                                end6(s->end), s->frame_start,    s->frame_end};
		break;
	}
	case MOQ_MSG_SUBSCRIBE_UPDATE: {
		const struct moq_subscribe_update *s = &m->u.subscribe_update;
		x.u.subscribe_update = (struct moq6_subscribe_update){
		        s->priority,  s->max_latency_ms, start6(s->start),
		        end6(s->end), s->frame_start,    s->frame_end};
		break;
	}
	case MOQ_MSG_SUBSCRIBE_REPLY: {
		const struct moq_subscribe_reply *r = &m->u.subscribe_reply;
		struct moq6_subscribe_reply *y = &x.u.subscribe_reply;
		if (r->kind == MOQ_SUB_START)
			y->kind = MOQ6_SUB_OK;
		else if (r->kind == MOQ_SUB_END)
			y->kind = MOQ6_SUB_END;
		else if (r->kind == MOQ_SUB_DROP)
			y->kind = MOQ6_SUB_DROP;
		else
			return MOQ_ERR_INVAL; /* lite-03/04's OK */
		y->group = r->group;
		y->drop_start = r->drop_start;
		y->drop_end = r->drop_end;
		y->drop_code = drop_code6(r->drop_code);
		break;
	}
	case MOQ_MSG_TRACK:
		x.u.track.broadcast = m->u.track.broadcast;
		x.u.track.track = m->u.track.track;
		break;
	case MOQ_MSG_TRACK_INFO:
		x.u.track_info.priority = m->u.track_info.priority;
		x.u.track_info.max_age_ms = m->u.track_info.max_latency_ms;
		x.u.track_info.timescale = m->u.track_info.timescale;
		break;
	case MOQ_MSG_GROUP:
		x.u.group.subscribe_id = m->u.group.subscribe_id;
		x.u.group.sequence = m->u.group.sequence;
		x.u.group.frame_start = m->u.group.frame_start;
		break;
	case MOQ_MSG_FETCH:
		x.u.fetch = (struct moq6_fetch){m->u.fetch.broadcast,   m->u.fetch.track,
		                                m->u.fetch.priority,    m->u.fetch.group,
		                                m->u.fetch.frame_start, m->u.fetch.frame_end};
		break;
	case MOQ_MSG_PROBE:
		x.u.probe.bitrate = m->u.probe.bitrate;
		x.u.probe.rtt_ms = m->u.probe.rtt_ms;
		break;
	case MOQ_MSG_GOAWAY:
		x.u.goaway.uri = m->u.goaway.uri;
		break;
	default:
		return MOQ_ERR_INVAL;
	}
	return moq6_msg_encode(buf, cap, &x);
}

int moq6_decode_generic(enum moq_msg_type type, const uint8_t *buf, size_t len, size_t max_len,
                        struct moq_msg *m)
{
	struct moq6_msg x;
	enum moq6_msg_type t = type6(type);
	int rc;

	if (t == MOQ6_TYPE_MAX || !m)
		return MOQ_ERR_INVAL;
	rc = moq6_msg_decode(t, buf, len, max_len, &x);
	if (rc < 0)
		return rc;
	memset(&m->u, 0, sizeof(m->u));
	m->type = type;
	switch (type) {
	case MOQ_MSG_SETUP: {
		const struct moq6_setup *s = &x.u.setup;
		m->u.setup = (struct moq_setup){.has_probe = s->has_probe,
		                                .has_path = s->has_path,
		                                .has_role = s->has_role,
		                                .has_origin = s->has_hop,
		                                .has_cost = s->has_cost,
		                                .probe = s->probe,
		                                .path = s->path,
		                                .role = s->role,
		                                .origin = s->hop,
		                                .cost = s->cost};
		break;
	}
	case MOQ_MSG_ANNOUNCE_REQ:
		m->u.announce_req.prefix = x.u.announce_request.prefix;
		break;
	case MOQ_MSG_ANNOUNCE_OK:
		m->u.announce_ok.origin = x.u.announce_ok.hop;
		m->u.announce_ok.active = x.u.announce_ok.active;
		break;
	case MOQ_MSG_ANNOUNCE: {
		struct moq_announce *a = &m->u.announce;
		const struct moq6_announce *b = &x.u.announce;
		a->kind6 = b->kind;
		a->id6 = b->id;
		a->status = b->kind == MOQ6_ANN_START    ? MOQ_ANNOUNCE_ACTIVE
		            : b->kind == MOQ6_ANN_UPDATE ? MOQ_ANNOUNCE_RESTART
		                                         : MOQ_ANNOUNCE_ENDED;
		a->suffix = b->suffix;
		a->hop_count = b->hop_count;
		memcpy(a->hops, b->hops, b->hop_count * sizeof(b->hops[0]));
		a->warm_cost = b->warm_cost;
		a->cold_cost = b->cold_cost;
		break;
	}
	case MOQ_MSG_SUBSCRIBE: {
		const struct moq6_subscribe *s = &x.u.subscribe;
		m->u.subscribe =
		        (struct moq_subscribe){s->id,
		                               s->broadcast,
		                               s->track,
		                               s->priority,
		                               false, /* lite-06: newest first */
		                               s->max_age_ms,
		                               s->group_start, /* the floor (by_age) */
		                               s->group_end ? s->group_end - 1 : MOQ_GROUP_NONE,
		                               s->frame_start,
		                               s->frame_end,
		                               true};
		break;
	}
	case MOQ_MSG_SUBSCRIBE_UPDATE: {
		const struct moq6_subscribe_update *s = &x.u.subscribe_update;
		m->u.subscribe_update = (struct moq_subscribe_update){
		        s->priority,
		        false,
		        s->max_age_ms,
		        s->group_start,
		        s->group_end ? s->group_end - 1 : MOQ_GROUP_NONE,
		        s->frame_start,
		        s->frame_end,
		        true};
		break;
	}
	case MOQ_MSG_SUBSCRIBE_REPLY: {
		const struct moq6_subscribe_reply *y = &x.u.subscribe_reply;
		struct moq_subscribe_reply *r = &m->u.subscribe_reply;
		r->kind = y->kind == MOQ6_SUB_OK    ? MOQ_SUB_START
		          : y->kind == MOQ6_SUB_END ? MOQ_SUB_END
		                                    : MOQ_SUB_DROP;
		r->group = y->group;
		r->drop_start = y->drop_start;
		r->drop_end = y->drop_end;
		r->drop_code = y->kind == MOQ6_SUB_DROP ? drop_code_from6(y->drop_code) : 0;
		r->start = r->end = MOQ_GROUP_NONE;
		break;
	}
	case MOQ_MSG_TRACK:
		m->u.track.broadcast = x.u.track.broadcast;
		m->u.track.track = x.u.track.track;
		break;
	case MOQ_MSG_TRACK_INFO:
		m->u.track_info.priority = x.u.track_info.priority;
		m->u.track_info.max_latency_ms = x.u.track_info.max_age_ms;
		m->u.track_info.timescale = x.u.track_info.timescale;
		break;
	case MOQ_MSG_GROUP:
		m->u.group.subscribe_id = x.u.group.subscribe_id;
		m->u.group.sequence = x.u.group.sequence;
		m->u.group.frame_start = x.u.group.frame_start;
		break;
	case MOQ_MSG_FETCH:
		m->u.fetch = (struct moq_fetch){x.u.fetch.broadcast,   x.u.fetch.track,
		                                x.u.fetch.priority,    x.u.fetch.group,
		                                x.u.fetch.frame_start, x.u.fetch.frame_end};
		break;
	case MOQ_MSG_PROBE:
		m->u.probe.bitrate = x.u.probe.bitrate;
		m->u.probe.rtt_ms = x.u.probe.rtt_ms;
		break;
	case MOQ_MSG_GOAWAY:
		m->u.goaway.uri = x.u.goaway.uri;
		break;
	default:
		return MOQ_ERR_INVAL;
	}
	return rc;
}

int moq6_peek_generic(enum moq_msg_type type, const uint8_t *buf, size_t len, size_t max_len)
{
	enum moq6_msg_type t = type6(type);

	if (t == MOQ6_TYPE_MAX)
		return MOQ_ERR_INVAL;
	return moq6_msg_peek_len(t, buf, len, max_len);
}
