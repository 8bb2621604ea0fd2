/* SPDX-License-Identifier: MIT */
/*
 * codec.c: moq-lite 03/04/05 messages (docs/PROTOCOL.md; checked against the
 * reference client @moq/net lite/ by tests/oracle).
 */
#include "codec.h"

#include <string.h>

#include "lite06_codec.h"
#include "moq_err.h"
#include "moq_path.h"
#include "codec_rw.h"

/* ---- varints: RFC 9000, 16 ---- */

size_t moq_varint_len(uint64_t v)
{
	if (v < (1u << 6))
		return 1;
	if (v < (1u << 14))
		return 2;
	if (v < (UINT64_C(1) << 30))
		return 4;
	if (v <= MOQ_VARINT_MAX)
		return 8;
	return 0;
}

int moq_varint_put(uint8_t *buf, size_t cap, uint64_t v)
{
	size_t n = moq_varint_len(v);

	if (n == 0)
		return MOQ_ERR_INVAL;
	if (cap < n)
		return MOQ_ERR_TOO_LARGE;
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	/* RFC 9000, 16: the two most significant bits encode log2 of the length. */
	buf[0] |= (uint8_t)((n == 1 ? 0 : n == 2 ? 1 : n == 4 ? 2 : 3) << 6);
	return (int)n;
}

int moq_varint_get(const uint8_t *buf, size_t len, uint64_t *v)
{
	size_t n;
	uint64_t x;

	if (len == 0)
		return MOQ_ERR_SHORT;
	n = (size_t)1 << (buf[0] >> 6);
	if (len < n)
		return MOQ_ERR_SHORT;
	x = buf[0] & 0x3f;
	for (size_t i = 1; i < n; i++)
		x = (x << 8) | buf[i];
	*v = x;
	return (int)n;
}

uint64_t moq_zigzag(int64_t s)
{
	return ((uint64_t)s << 1) ^ (uint64_t)(s >> 63);
}

int64_t moq_unzigzag(uint64_t u)
{
	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* ---- paths ---- */

int moq_path_norm(char *dst, size_t cap, const char *src, size_t len)
{
	long o = moq_path_normalise(dst, cap, src, len, MOQ_PATH_MAX_SEGMENTS);

	if (o == MOQ_PATH_NORM_SEGMENTS)
		return MOQ_ERR_DECODE;
	if (o < 0)
		return MOQ_ERR_TOO_LARGE;
	return (int)o;
}

size_t moq_path_segments(const char *p, size_t len)
{
	size_t n = 0;

	/* Non-empty runs between '/': the segments once normalised. */
	for (size_t i = 0; i < len; i++)
		if (p[i] != '/' && (i == 0 || p[i - 1] == '/'))
			n++;
	return n;
}

bool moq_path_has_prefix(const char *prefix, size_t plen, const char *path, size_t len,
                         size_t *suffix_off)
{
	size_t off;

	if (plen == 0) {
		off = 0;
	} else {
		if (len < plen || memcmp(prefix, path, plen) != 0)
			return false;
		/* moq-lite, path: prefixes match whole segments. */
		if (len == plen)
			off = len;
		else if (path[plen] == '/')
			off = plen + 1;
		else
			return false;
	}
	if (suffix_off)
		*suffix_off = off;
	return true;
}

/* PROTOCOL.md, optional group: 0 = absent, N = group N-1. */
static void w_optgroup(struct wr *w, uint64_t g)
{
	if (g == MOQ_GROUP_NONE)
		w_vi(w, 0);
	else if (g >= MOQ_VARINT_MAX)
		w->err = w->err ? w->err : MOQ_ERR_INVAL;
	else
		w_vi(w, g + 1);
}

static bool r_bool(struct rd *r)
{
	uint8_t v = r_u8(r);

	if (v > 1 && !r->err)
		r->err = MOQ_ERR_DECODE;
	return v == 1;
}

static uint64_t r_optgroup(struct rd *r)
{
	uint64_t v = r_vi(r);

	return v == 0 ? MOQ_GROUP_NONE : v - 1;
}

/* ---- message bodies ---- */

static void enc_body(struct wr *w, enum moq_version v, const struct moq_msg *m)
{
	switch (m->type) {
	case MOQ_MSG_SETUP: {
		const struct moq_setup *s = &m->u.setup;
		/* Order as the reference encoder: probe, path, role, origin. */
		w_vi(w, (uint64_t)s->has_probe + s->has_path + s->has_role + s->has_origin);
		if (s->has_probe)
			w_param_vi(w, MOQ_SETUP_PROBE, s->probe);
		if (s->has_path) {
			w_vi(w, MOQ_SETUP_PATH);
			w_str(w, s->path);
		}
		if (s->has_role)
			w_param_vi(w, MOQ_SETUP_ROLE, s->role);
		if (s->has_origin)
			w_param_vi(w, MOQ_SETUP_ORIGIN, s->origin);
		break;
	}
	case MOQ_MSG_ANNOUNCE_REQ:
		w_path(w, m->u.announce_req.prefix);
		if (v >= MOQ_LITE_04)
			w_vi(w, m->u.announce_req.exclude_hop);
		break;
	case MOQ_MSG_ANNOUNCE_OK:
		w_vi(w, m->u.announce_ok.origin);
		w_vi(w, m->u.announce_ok.active);
		break;
	case MOQ_MSG_ANNOUNCE: {
		const struct moq_announce *a = &m->u.announce;
		if (a->hop_count > MOQ_MAX_HOPS || a->status > MOQ_ANNOUNCE_RESTART ||
		    (a->status == MOQ_ANNOUNCE_RESTART && v < MOQ_LITE_05)) {
			w->err = MOQ_ERR_INVAL;
			break;
		}
		w_u8(w, a->status);
		w_path(w, a->suffix);
		/* An ended announce carries an empty hop list (as the reference). */
		uint32_t n = a->status == MOQ_ANNOUNCE_ENDED ? 0 : a->hop_count;
		w_vi(w, n);
		if (v >= MOQ_LITE_04)
			for (uint32_t i = 0; i < n; i++)
				w_vi(w, a->hops[i]);
		break;
	}
	case MOQ_MSG_SUBSCRIBE: {
		const struct moq_subscribe *s = &m->u.subscribe;
		w_vi(w, s->id);
		w_path(w, s->broadcast);
		w_str(w, s->track);
		w_u8(w, s->priority);
		w_u8(w, s->ordered);
		w_vi(w, s->max_latency_ms);
		w_optgroup(w, s->start);
		w_optgroup(w, s->end);
		break;
	}
	case MOQ_MSG_SUBSCRIBE_UPDATE: {
		const struct moq_subscribe_update *s = &m->u.subscribe_update;
		w_u8(w, s->priority);
		w_u8(w, s->ordered);
		w_vi(w, s->max_latency_ms);
		w_optgroup(w, s->start);
		w_optgroup(w, s->end);
		break;
	}
	case MOQ_MSG_SUBSCRIBE_REPLY: {
		const struct moq_subscribe_reply *s = &m->u.subscribe_reply;
		switch (s->kind) {
		case MOQ_SUB_START:
		case MOQ_SUB_END:
			w_vi(w, s->group);
			break;
		case MOQ_SUB_DROP:
			w_vi(w, s->drop_start);
			w_vi(w, s->drop_end);
			w_vi(w, s->drop_code);
			break;
		case MOQ_SUB_OK:
			w_u8(w, s->priority);
			w_u8(w, s->ordered);
			w_vi(w, s->max_latency_ms);
			w_optgroup(w, s->start);
			w_optgroup(w, s->end);
			break;
		}
		break;
	}
	case MOQ_MSG_TRACK:
		w_path(w, m->u.track.broadcast);
		w_str(w, m->u.track.track);
		break;
	case MOQ_MSG_TRACK_INFO:
		if (m->u.track_info.timescale == 0) {
			w->err = MOQ_ERR_INVAL;
			break;
		}
		w_u8(w, m->u.track_info.priority);
		w_u8(w, m->u.track_info.ordered);
		w_vi(w, m->u.track_info.max_latency_ms);
		w_vi(w, m->u.track_info.timescale);
		break;
	case MOQ_MSG_GROUP:
		w_vi(w, m->u.group.subscribe_id);
		w_vi(w, m->u.group.sequence);
		break;
	case MOQ_MSG_FETCH:
		w_path(w, m->u.fetch.broadcast);
		w_str(w, m->u.fetch.track);
		w_u8(w, m->u.fetch.priority);
		w_vi(w, m->u.fetch.group);
		break;
	case MOQ_MSG_PROBE:
		w_vi(w, m->u.probe.bitrate);
		if (v >= MOQ_LITE_04)
			w_vi(w, m->u.probe.rtt_ms);
		break;
	case MOQ_MSG_GOAWAY:
		w_str(w, m->u.goaway.uri);
		break;
	default:
		w->err = MOQ_ERR_INVAL;
		break;
	}
}

/* Which messages exist in which version (PROTOCOL.md, Streams). */
static bool msg_in_version(enum moq_msg_type t, enum moq_version v)
{
	if (v != MOQ_LITE_03 && v != MOQ_LITE_04 && v != MOQ_LITE_05)
		return false;
	switch (t) {
	case MOQ_MSG_SETUP:
	case MOQ_MSG_ANNOUNCE_OK:
	case MOQ_MSG_TRACK:
	case MOQ_MSG_TRACK_INFO:
		return v >= MOQ_LITE_05;
	case MOQ_MSG_GOAWAY:
		return v >= MOQ_LITE_04;
	default:
		return t > 0 && t < MOQ_MSG_TYPE_MAX;
	}
}

/* The varint type of a typed subscribe reply. */
static int reply_wire_type(enum moq_version v, uint8_t kind)
{
	if (v >= MOQ_LITE_05) {
		if (kind == MOQ_SUB_OK)
			return MOQ_ERR_INVAL;
		return kind; /* START 0, END 1, DROP 2 */
	}
	if (kind == MOQ_SUB_OK)
		return 0;
	if (kind == MOQ_SUB_DROP)
		return 1;
	return MOQ_ERR_INVAL;
}

int moq_msg_encode(uint8_t *buf, size_t cap, enum moq_version v, const struct moq_msg *m)
{
	struct wr cnt = {NULL, 0, 0, 0};
	struct wr w = {buf, cap, 0, 0};

	if (v == MOQ_LITE_06)
		return moq6_encode_generic(buf, cap, m);
	if (!m || !msg_in_version(m->type, v))
		return MOQ_ERR_INVAL;
	enc_body(&cnt, v, m);
	if (cnt.err)
		return cnt.err;
	if (m->type == MOQ_MSG_SUBSCRIBE_REPLY) {
		int t = reply_wire_type(v, m->u.subscribe_reply.kind);
		if (t < 0)
			return t;
		w_vi(&w, (uint64_t)t);
	}
	w_vi(&w, cnt.len);
	enc_body(&w, v, m);
	if (w.err)
		return w.err;
	return (int)w.len;
}

static int dec_setup(struct rd *r, struct moq_setup *s)
{
	uint64_t ids[MOQ_SETUP_MAX_PARAMS];
	uint64_t n = r_vi(r);

	memset(s, 0, sizeof(*s));
	if (r->err)
		return r->err;
	if (n > MOQ_SETUP_MAX_PARAMS)
		return MOQ_ERR_PROTO; /* 19 too many parameters */
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
		pr = (struct rd){(const uint8_t *)val.p, val.len, 0, 0};
		switch (id) {
		case MOQ_SETUP_PROBE:
		case MOQ_SETUP_ROLE:
		case MOQ_SETUP_ORIGIN:
			x = r_vi(&pr);
			if (pr.err || pr.off != pr.len)
				return MOQ_ERR_DECODE;
			if (id == MOQ_SETUP_PROBE) {
				s->has_probe = true;
				s->probe = x;
			} else if (id == MOQ_SETUP_ROLE) {
				s->has_role = true;
				s->role = x;
			} else {
				s->has_origin = true;
				s->origin = x;
			}
			break;
		case MOQ_SETUP_PATH:
			s->has_path = true;
			s->path = val;
			break;
		default:
			break; /* unknown ids are ignored */
		}
	}
	return 0;
}

static int dec_body(struct rd *r, enum moq_version v, enum moq_msg_type t, uint64_t wire_type,
                    struct moq_msg *m)
{
	m->type = t;
	switch (t) {
	case MOQ_MSG_SETUP:
		return dec_setup(r, &m->u.setup);
	case MOQ_MSG_ANNOUNCE_REQ:
		m->u.announce_req.prefix = r_path(r);
		m->u.announce_req.exclude_hop = v >= MOQ_LITE_04 ? r_vi(r) : 0;
		break;
	case MOQ_MSG_ANNOUNCE_OK:
		m->u.announce_ok.origin = r_vi(r);
		m->u.announce_ok.active = r_vi(r);
		break;
	case MOQ_MSG_ANNOUNCE: {
		struct moq_announce *a = &m->u.announce;
		uint64_t n;
		a->status = r_u8(r);
		/* moq-lite 05 accepts an explicit restart status; 03/04 never defined it. */
		if (!r->err && a->status != MOQ_ANNOUNCE_ENDED &&
		    a->status != MOQ_ANNOUNCE_ACTIVE &&
		    !(a->status == MOQ_ANNOUNCE_RESTART && v >= MOQ_LITE_05))
			return MOQ_ERR_DECODE;
		a->suffix = r_path(r);
		n = r_vi(r);
		if (r->err)
			return r->err;
		if (n > MOQ_MAX_HOPS)
			return MOQ_ERR_DECODE;
		a->hop_count = (uint32_t)n;
		for (uint32_t i = 0; i < a->hop_count; i++)
			a->hops[i] = v >= MOQ_LITE_04 ? r_vi(r) : 0;
		break;
	}
	case MOQ_MSG_SUBSCRIBE: {
		struct moq_subscribe *s = &m->u.subscribe;
		s->id = r_vi(r);
		s->broadcast = r_path(r);
		s->track = r_str(r);
		s->priority = r_u8(r);
		s->ordered = r_bool(r);
		s->max_latency_ms = r_vi(r);
		s->start = r_optgroup(r);
		s->end = r_optgroup(r);
		break;
	}
	case MOQ_MSG_SUBSCRIBE_UPDATE: {
		struct moq_subscribe_update *s = &m->u.subscribe_update;
		s->priority = r_u8(r);
		s->ordered = r_bool(r);
		s->max_latency_ms = r_vi(r);
		s->start = r_optgroup(r);
		s->end = r_optgroup(r);
		break;
	}
	case MOQ_MSG_SUBSCRIBE_REPLY: {
		struct moq_subscribe_reply *s = &m->u.subscribe_reply;
		memset(s, 0, sizeof(*s));
		s->start = s->end = MOQ_GROUP_NONE;
		if (v >= MOQ_LITE_05) {
			if (wire_type > MOQ_SUB_DROP)
				return MOQ_ERR_DECODE;
			s->kind = (uint8_t)wire_type;
		} else {
			if (wire_type > 1)
				return MOQ_ERR_DECODE;
			s->kind = wire_type == 0 ? MOQ_SUB_OK : MOQ_SUB_DROP;
		}
		switch (s->kind) {
		case MOQ_SUB_START:
		case MOQ_SUB_END:
			s->group = r_vi(r);
			break;
		case MOQ_SUB_DROP:
			s->drop_start = r_vi(r);
			s->drop_end = r_vi(r);
			s->drop_code = r_vi(r);
			break;
		default:
			s->priority = r_u8(r);
			s->ordered = r_bool(r);
			s->max_latency_ms = r_vi(r);
			s->start = r_optgroup(r);
			s->end = r_optgroup(r);
			break;
		}
		break;
	}
	case MOQ_MSG_TRACK:
		m->u.track.broadcast = r_path(r);
		m->u.track.track = r_str(r);
		break;
	case MOQ_MSG_TRACK_INFO:
		m->u.track_info.priority = r_u8(r);
		m->u.track_info.ordered = r_bool(r);
		m->u.track_info.max_latency_ms = r_vi(r);
		m->u.track_info.timescale = r_vi(r);
		if (!r->err && m->u.track_info.timescale == 0)
			return MOQ_ERR_DECODE;
		break;
	case MOQ_MSG_GROUP:
		m->u.group.subscribe_id = r_vi(r);
		m->u.group.sequence = r_vi(r);
		break;
	case MOQ_MSG_FETCH:
		m->u.fetch.broadcast = r_path(r);
		m->u.fetch.track = r_str(r);
		m->u.fetch.priority = r_u8(r);
		m->u.fetch.group = r_vi(r);
		break;
	case MOQ_MSG_PROBE:
		m->u.probe.bitrate = r_vi(r);
		m->u.probe.rtt_ms = v >= MOQ_LITE_04 ? r_vi(r) : 0;
		break;
	case MOQ_MSG_GOAWAY:
		m->u.goaway.uri = r_str(r);
		break;
	default:
		return MOQ_ERR_INVAL;
	}
	return r->err;
}

/* Parse the prefix (type for a reply, then length) of the next message. */
static int peek(enum moq_msg_type type, const uint8_t *buf, size_t len, size_t max_len,
                uint64_t *wire_type, size_t *hdr, uint64_t *body)
{
	size_t off = 0;
	int n;

	*wire_type = 0;
	if (type == MOQ_MSG_SUBSCRIBE_REPLY) {
		n = moq_varint_get(buf, len, wire_type);
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

int moq_msg_peek_len(enum moq_msg_type type, const uint8_t *buf, size_t len, size_t max_len)
{
	uint64_t wt = 0, body = 0;
	size_t hdr = 0;
	int rc = peek(type, buf, len, max_len, &wt, &hdr, &body);

	if (rc == MOQ_ERR_SHORT && hdr > 0 && body <= max_len)
		return (int)(hdr + body);
	if (rc < 0)
		return rc;
	return (int)(hdr + body);
}

int moq_msg_peek_len_v(enum moq_msg_type type, enum moq_version v, const uint8_t *buf, size_t len,
                       size_t max_len)
{
	if (v == MOQ_LITE_06)
		return moq6_peek_generic(type, buf, len, max_len);
	return moq_msg_peek_len(type, buf, len, max_len);
}

int moq_msg_decode(enum moq_msg_type type, enum moq_version v, const uint8_t *buf, size_t len,
                   size_t max_len, struct moq_msg *m)
{
	uint64_t wt, body;
	size_t hdr = 0;
	struct rd r;
	int rc;

	if (v == MOQ_LITE_06)
		return moq6_decode_generic(type, buf, len, max_len, m);
	if (!msg_in_version(type, v))
		return MOQ_ERR_INVAL;
	if (max_len > (size_t)1 << 30)
		max_len = (size_t)1 << 30;
	rc = peek(type, buf, len, max_len, &wt, &hdr, &body);
	if (rc < 0)
		return rc;
	r = (struct rd){buf + hdr, (size_t)body, 0, 0};
	/* fields this version does not carry (lite-06's frame bounds, costs)
	 * read as 0 */
	switch (type) {
	case MOQ_MSG_SUBSCRIBE:
		m->u.subscribe.frame_start = m->u.subscribe.frame_end = 0;
		m->u.subscribe.by_age = false;
		break;
	case MOQ_MSG_SUBSCRIBE_UPDATE:
		m->u.subscribe_update.frame_start = m->u.subscribe_update.frame_end = 0;
		m->u.subscribe_update.by_age = false;
		break;
	case MOQ_MSG_GROUP:
		m->u.group.frame_start = 0;
		break;
	case MOQ_MSG_FETCH:
		m->u.fetch.frame_start = m->u.fetch.frame_end = 0;
		break;
	case MOQ_MSG_ANNOUNCE:
		m->u.announce.kind6 = 0;
		m->u.announce.id6 = m->u.announce.warm_cost = m->u.announce.cold_cost = 0;
		break;
	default:
		break;
	}
	rc = dec_body(&r, v, type, wt, m);
	if (rc < 0)
		return rc;
	/* PROTOCOL.md, message: a body with bytes left over is rejected. */
	if (r.off != r.len)
		return MOQ_ERR_DECODE;
	return (int)(hdr + body);
}

/* RFC 9000, 16: @x (<= MOQ_VARINT_MAX) in @n bytes, big endian, the two
 * most significant bits log2(n). Once per frame and subscriber: no checks. */
static inline void vi_store(uint8_t *p, uint64_t x, size_t n)
{
	switch (n) {
	case 1:
		p[0] = (uint8_t)x;
		break;
	case 2:
		p[0] = (uint8_t)(0x40 | x >> 8);
		p[1] = (uint8_t)x;
		break;
	case 4:
		p[0] = (uint8_t)(0x80 | x >> 24);
		p[1] = (uint8_t)(x >> 16);
		p[2] = (uint8_t)(x >> 8);
		p[3] = (uint8_t)x;
		break;
	default:
		for (size_t i = 0; i < 8; i++)
			p[i] = (uint8_t)(x >> (56 - 8 * i));
		p[0] |= 0xc0;
		break;
	}
}

static inline size_t vi_len(uint64_t x)
{
	return x < (1u << 6) ? 1 : x < (1u << 14) ? 2 : x < (UINT64_C(1) << 30) ? 4 : 8;
}

int moq_group_hdr_encode(uint8_t *buf, size_t cap, uint64_t sub_id, uint64_t seq)
{
	size_t in, sn, body;

	if (sub_id > MOQ_VARINT_MAX || seq > MOQ_VARINT_MAX)
		return MOQ_ERR_INVAL;
	in = vi_len(sub_id);
	sn = vi_len(seq);
	body = in + sn; /* <= 16: a one-byte size prefix */
	/* moq-lite, Group: stream type 0x0, then GROUP { subscribe id, sequence }
	 * with its size prefix (the same in lite-03/04/05). */
	if (2 + body > cap)
		return MOQ_ERR_TOO_LARGE;
	buf[0] = MOQ_STREAM_GROUP;
	buf[1] = (uint8_t)body;
	vi_store(buf + 2, sub_id, in);
	vi_store(buf + 2 + in, seq, sn);
	return (int)(2 + body);
}

int moq_frame_hdr_encode(uint8_t *buf, size_t cap, enum moq_version v, int64_t ts_delta,
                         uint64_t size)
{
	uint64_t zz = 0;
	size_t tn = 0, sn;

	if (size > MOQ_FRAME_MAX)
		return MOQ_ERR_INVAL;
	/* moq-lite 05, Group: { zigzag timestamp delta, size, payload }. */
	if (v >= MOQ_LITE_05) {
		/* PROTOCOL.md, zigzag (as moq_zigzag) */
		zz = ((uint64_t)ts_delta << 1) ^ (uint64_t)(ts_delta >> 63);
		if (zz > MOQ_VARINT_MAX)
			return MOQ_ERR_INVAL;
		tn = vi_len(zz);
	}
	sn = vi_len(size); /* size <= MOQ_FRAME_MAX */
	if (!buf)
		return (int)(tn + sn); /* measuring only */
	if (tn + sn > cap)
		return MOQ_ERR_TOO_LARGE;
	if (tn)
		vi_store(buf, zz, tn);
	vi_store(buf + tn, size, sn);
	return (int)(tn + sn);
}

/* ---- incremental group stream parser ---- */

void moq_group_rx_init(struct moq_group_rx *rx, enum moq_version v, bool with_header)
{
	memset(rx, 0, sizeof(*rx));
	rx->version = v;
	rx->state = with_header ? GRX_HEADER : (v >= MOQ_LITE_05 ? GRX_TS : GRX_SIZE);
}

static uint8_t frame_start_state(const struct moq_group_rx *rx)
{
	return rx->version >= MOQ_LITE_05 ? GRX_TS : GRX_SIZE;
}

/* Collect one varint into scratch; returns consumed, sets *done. */
static size_t collect_varint(struct moq_group_rx *rx, const uint8_t *buf, size_t len, bool *done,
                             uint64_t *v)
{
	size_t need, take;

	*done = false;
	if (rx->scratch_len == 0) {
		/* Fast path: the whole varint is in this chunk. */
		int n = moq_varint_get(buf, len, v);
		if (n > 0) {
			*done = true;
			return (size_t)n;
		}
		rx->scratch[rx->scratch_len++] = buf[0];
		return 1;
	}
	need = (size_t)1 << (rx->scratch[0] >> 6);
	take = need - rx->scratch_len;
	if (take > len)
		take = len;
	memcpy(rx->scratch + rx->scratch_len, buf, take);
	rx->scratch_len += (uint8_t)take;
	if (rx->scratch_len == need) {
		moq_varint_get(rx->scratch, need, v);
		rx->scratch_len = 0;
		*done = true;
	}
	return take;
}

int moq_group_rx_next(struct moq_group_rx *rx, const uint8_t *buf, size_t len,
                      struct moq_group_ev *ev)
{
	bool done;
	uint64_t v;
	size_t n;

	ev->type = MOQ_GEV_NONE;
	if (len == 0)
		return MOQ_ERR_INVAL;
	switch (rx->state) {
	case GRX_HEADER: {
		/* moq-lite, Group: GROUP { length, subscribe id, sequence }: at most
		 * 1 + 8 + 8 + 8 bytes, so it always fits in scratch. */
		struct moq_msg m;
		size_t take = sizeof(rx->scratch) - rx->scratch_len;
		int rc;

		if (take > len)
			take = len;
		memcpy(rx->scratch + rx->scratch_len, buf, take);
		rc = moq_msg_decode(MOQ_MSG_GROUP, rx->version, rx->scratch, rx->scratch_len + take,
		                    24, &m);
		if (rc == MOQ_ERR_SHORT) {
			rx->scratch_len += (uint8_t)take;
			return (int)take;
		}
		if (rc < 0) {
			rx->state = GRX_DEAD;
			return rc == MOQ_ERR_TOO_LARGE ? MOQ_ERR_DECODE : rc;
		}
		n = (size_t)rc - rx->scratch_len;
		rx->scratch_len = 0;
		rx->state = frame_start_state(rx);
		ev->type = MOQ_GEV_HEADER;
		ev->group = m.u.group;
		return (int)n;
	}
	case GRX_TS:
		n = collect_varint(rx, buf, len, &done, &v);
		if (done) {
			/* Wraps rather than overflows on hostile input. */
			rx->timestamp =
			        (int64_t)((uint64_t)rx->timestamp + (uint64_t)moq_unzigzag(v));
			rx->state = GRX_SIZE;
		}
		return (int)n;
	case GRX_SIZE:
		n = collect_varint(rx, buf, len, &done, &v);
		if (done) {
			if (v > MOQ_FRAME_MAX) {
				rx->state = GRX_DEAD;
				return MOQ_ERR_TOO_LARGE;
			}
			rx->frames++;
			rx->frame_left = v;
			rx->state = v ? GRX_PAYLOAD : frame_start_state(rx);
			ev->type = MOQ_GEV_FRAME;
			ev->frame_size = v;
			ev->frame_left = v;
			ev->timestamp = rx->timestamp;
		}
		return (int)n;
	case GRX_PAYLOAD:
		n = len < rx->frame_left ? len : (size_t)rx->frame_left;
		rx->frame_left -= n;
		ev->type = MOQ_GEV_DATA;
		ev->data = buf;
		ev->data_len = n;
		ev->frame_left = rx->frame_left;
		if (rx->frame_left == 0)
			rx->state = frame_start_state(rx);
		return (int)n;
	default:
		return MOQ_ERR_DECODE;
	}
}

int moq_group_rx_fin(const struct moq_group_rx *rx)
{
	if ((rx->state == GRX_TS || rx->state == GRX_SIZE) && rx->scratch_len == 0)
		return 0;
	return MOQ_ERR_DECODE;
}

size_t moq_varint_rx_push(struct moq_varint_rx *vr, const uint8_t *buf, size_t len, bool *done,
                          uint64_t *v)
{
	size_t used = 0, need;

	*done = false;
	if (len == 0)
		return 0;
	if (vr->len == 0)
		vr->buf[vr->len++] = buf[used++];
	need = (size_t)1 << (vr->buf[0] >> 6);
	while (vr->len < need && used < len)
		vr->buf[vr->len++] = buf[used++];
	if (vr->len == need) {
		moq_varint_get(vr->buf, need, v);
		vr->len = 0;
		*done = true;
	}
	return used;
}
