/* SPDX-License-Identifier: MIT */
/*
 * ietf_codec.h: the IETF moq-transport wire codec, drafts 14 to 20
 * (draft-ietf-moq-transport-14 .. -20), beside the moq-lite codec (codec.h).
 * Pure functions over caller-owned buffers: no allocation, no I/O.
 *
 * One flat message struct serves every control message of every draft; the
 * draft is a parameter of every call, so the per-draft differences (fields
 * that moved into parameters, request ids dropped from replies, the
 * leading-ones varint of draft 17+, delta-coded parameter types of 16+) live
 * in ietf_codec.c next to each other. The executable reference is
 * @moq/net 0.3.4's ietf/ folder (tests/oracle/ietf_golden.mjs draws golden
 * bytes from it).
 *
 * Decoded strings point into the input buffer. Decoders are strict: a
 * control message whose 16-bit length holds too few bytes or leaves bytes
 * over is MOQ_ERR_DECODE; a buffer that does not yet hold the whole message
 * is MOQ_ERR_SHORT; a message type the draft does not define is
 * MOQ_ERR_PROTO.
 */
#ifndef MOQ_MOQ_IETF_CODEC_H
#define MOQ_MOQ_IETF_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"

/* The drafts served; the number is the draft's own. */
enum moq_ietf_draft {
	MOQ_IETF_14 = 14,
	MOQ_IETF_15 = 15,
	MOQ_IETF_16 = 16,
	MOQ_IETF_17 = 17,
	MOQ_IETF_18 = 18,
	MOQ_IETF_19 = 19,
	MOQ_IETF_20 = 20,
};
#define MOQ_IETF_FIRST MOQ_IETF_14
#define MOQ_IETF_LAST  MOQ_IETF_20

/* draft-14, 9.1 (and every later draft): version 0xff000000 + draft number. */
#define MOQ_IETF_VERSION(d) (UINT32_C(0xff000000) | (uint32_t)(d))

/* ALPNs / WebTransport protocols: draft-14 "moq-00" (version in SETUP), then
 * "moqt-NN" which pins the draft. */
#define MOQ_IETF_ALPN_14 "moq-00"

/* Bounds. draft-14, 9.2.1: a namespace has 1..32 fields (0 allowed in
 * SUBSCRIBE_NAMESPACE prefixes); the whole tuple plus the track name is at
 * most 4096 bytes. Control messages: a 16-bit length. */
#define MOQ_IETF_MAX_NS       32
#define MOQ_IETF_MAX_NAME     4096
#define MOQ_IETF_MAX_PARAMS   32
#define MOQ_IETF_MAX_VERSIONS 64
#define MOQ_IETF_MSG_MAX      65535
/* draft-14, 9.13: GOAWAY's URI is at most 8192 bytes. */
#define MOQ_IETF_MAX_URI 8192

/* Logical control messages. Wire types collide across drafts (0x08 is
 * PUBLISH_NAMESPACE_ERROR in 14 and NAMESPACE from 15, 0x0e TRACK_STATUS in 14
 * and NAMESPACE_DONE from 15), so the codec maps kind <-> type per draft. */
enum moq_ietf_kind {
	IETF_NONE = 0,
	IETF_CLIENT_SETUP,              /* 0x20, 14-16 */
	IETF_SERVER_SETUP,              /* 0x21, 14-16 */
	IETF_SETUP,                     /* 0x2f00, 17+ (uni stream type too) */
	IETF_GOAWAY,                    /* 0x10 */
	IETF_MAX_REQUEST_ID,            /* 0x15, 14-16 */
	IETF_REQUESTS_BLOCKED,          /* 0x1a, 14-16 */
	IETF_SUBSCRIBE,                 /* 0x03 */
	IETF_SUBSCRIBE_OK,              /* 0x04 */
	IETF_SUBSCRIBE_ERROR,           /* 0x05, 14 */
	IETF_REQUEST_ERROR,             /* 0x05, 15+ */
	IETF_REQUEST_OK,                /* 0x07, 15+ */
	IETF_SUBSCRIBE_UPDATE,          /* 0x02 (REQUEST_UPDATE from 17) */
	IETF_UNSUBSCRIBE,               /* 0x0a, 14-16 (17+: stream FIN) */
	IETF_PUBLISH_DONE,              /* 0x0b */
	IETF_PUBLISH_NAMESPACE,         /* 0x06 */
	IETF_PUBLISH_NAMESPACE_OK,      /* 0x07, 14 */
	IETF_PUBLISH_NAMESPACE_ERROR,   /* 0x08, 14 */
	IETF_PUBLISH_NAMESPACE_DONE,    /* 0x09, 14-16 */
	IETF_PUBLISH_NAMESPACE_CANCEL,  /* 0x0c, 14-16 */
	IETF_SUBSCRIBE_NAMESPACE,       /* 0x11 in 14-17, 0x50 from 18 */
	IETF_SUBSCRIBE_NAMESPACE_OK,    /* 0x12, 14 */
	IETF_SUBSCRIBE_NAMESPACE_ERROR, /* 0x13, 14 */
	IETF_UNSUBSCRIBE_NAMESPACE,     /* 0x14, 14-15 */
	IETF_NAMESPACE,                 /* 0x08, 15+ */
	IETF_NAMESPACE_DONE,            /* 0x0e, 15+ */
	IETF_PUBLISH_BLOCKED,           /* 0x0f, 17+ */
	IETF_TRACK_STATUS_REQUEST,      /* 0x0d */
	IETF_TRACK_STATUS,              /* 0x0e, 14 */
	IETF_FETCH,                     /* 0x16 */
	IETF_FETCH_OK,                  /* 0x18 */
	IETF_FETCH_ERROR,               /* 0x19, 14 */
	IETF_FETCH_CANCEL,              /* 0x17, 14-16 */
	IETF_PUBLISH,                   /* 0x1d */
	IETF_PUBLISH_OK,                /* 0x1e, 14-19 */
	IETF_PUBLISH_ERROR,             /* 0x1f, 14 */
	IETF_KIND_COUNT,
};

/* SETUP option ids (draft-14, 9.3.2; the same numbers in 17's SETUP). */
enum moq_ietf_setup_opt {
	IETF_OPT_PATH = 0x1,
	IETF_OPT_MAX_REQUEST_ID = 0x2,
	IETF_OPT_AUTH_TOKEN = 0x3,
	IETF_OPT_MAX_AUTH_CACHE = 0x4,
	IETF_OPT_AUTHORITY = 0x5,
	IETF_OPT_IMPLEMENTATION = 0x7,
};

/* Message parameter ids (draft-14, 9.2.2; draft-17+ give some a fixed
 * uint8 / bool form, see ietf_codec.c param_kind). */
enum moq_ietf_param_id {
	IETF_PARAM_DELIVERY_TIMEOUT = 0x02,
	IETF_PARAM_AUTH_TOKEN = 0x03,
	IETF_PARAM_MAX_CACHE_DURATION = 0x04,
	IETF_PARAM_SUBGROUP_TIMEOUT = 0x06,
	IETF_PARAM_EXPIRES = 0x08,
	IETF_PARAM_LARGEST_OBJECT = 0x09,
	IETF_PARAM_PUBLISHER_PRIORITY = 0x0e,
	IETF_PARAM_FORWARD = 0x10,
	IETF_PARAM_SUBSCRIBER_PRIORITY = 0x20,
	IETF_PARAM_SUBSCRIPTION_FILTER = 0x21,
	IETF_PARAM_GROUP_ORDER = 0x22,
	IETF_PARAM_FILL = 0x23,
	IETF_PARAM_INCLUDE_PROPERTIES = 0x35,
};

/* Session close codes (draft-14, 3.4 / 13.1). */
enum moq_ietf_close {
	IETF_CLOSE_NO_ERROR = 0x0,
	IETF_CLOSE_INTERNAL = 0x1,
	IETF_CLOSE_UNAUTHORIZED = 0x2,
	IETF_CLOSE_PROTOCOL_VIOLATION = 0x3,
	IETF_CLOSE_INVALID_REQUEST_ID = 0x4,
	IETF_CLOSE_DUPLICATE_TRACK_ALIAS = 0x5,
	IETF_CLOSE_KEY_VALUE_FORMATTING = 0x6,
	IETF_CLOSE_TOO_MANY_REQUESTS = 0x7,
	IETF_CLOSE_INVALID_PATH = 0x8,
	IETF_CLOSE_MALFORMED_PATH = 0x9,
	IETF_CLOSE_GOAWAY_TIMEOUT = 0x10,
	IETF_CLOSE_CONTROL_TIMEOUT = 0x11,
	IETF_CLOSE_DATA_TIMEOUT = 0x12,
	IETF_CLOSE_AUTH_TOKEN_CACHE_OVERFLOW = 0x13,
	IETF_CLOSE_DUPLICATE_AUTH_TOKEN_ALIAS = 0x14,
	IETF_CLOSE_VERSION_NEGOTIATION = 0x15,
};

/* Request error codes (SUBSCRIBE_ERROR / REQUEST_ERROR, draft-14 9.9). */
enum moq_ietf_req_error {
	IETF_REQ_INTERNAL = 0x0,
	IETF_REQ_UNAUTHORIZED = 0x1,
	IETF_REQ_TIMEOUT = 0x2,
	IETF_REQ_NOT_SUPPORTED = 0x3,
	IETF_REQ_DOES_NOT_EXIST = 0x4, /* TRACK_DOES_NOT_EXIST / NAMESPACE_PREFIX_UNKNOWN */
	IETF_REQ_INVALID_RANGE = 0x5,
	IETF_REQ_DUPLICATE = 0x6, /* e.g. NAMESPACE_PREFIX_OVERLAP / duplicate announce */
};

/* PUBLISH_DONE status codes (draft-14, 9.12). */
enum moq_ietf_done {
	IETF_DONE_INTERNAL = 0x0,
	IETF_DONE_UNAUTHORIZED = 0x1,
	IETF_DONE_TRACK_ENDED = 0x2,
	IETF_DONE_SUBSCRIPTION_ENDED = 0x3,
	IETF_DONE_GOING_AWAY = 0x4,
	IETF_DONE_EXPIRED = 0x5,
	IETF_DONE_TOO_FAR_BEHIND = 0x6,
};

/* Object status (draft-14, 10.2.1.1). */
enum moq_ietf_status {
	IETF_OBJ_NORMAL = 0x0,
	IETF_OBJ_DOES_NOT_EXIST = 0x1,
	IETF_OBJ_END_OF_GROUP = 0x3,
	IETF_OBJ_END_OF_TRACK = 0x4,
};

/* Uni stream types. */
#define IETF_STREAM_FETCH 0x05
#define IETF_STREAM_SETUP 0x2f00 /* 17+: the SETUP uni stream and message type */

/* One parameter: even ids (and draft-17+'s uint8/bool ones) carry @v, odd
 * ids carry @b (for LARGEST_OBJECT the raw two-varint value). */
struct moq_ietf_param {
	uint64_t id;
	uint64_t v;
	struct moq_str b;
};

struct moq_ietf_params {
	uint32_t n;
	struct moq_ietf_param p[MOQ_IETF_MAX_PARAMS];
};

/* A location: group, object. */
struct moq_ietf_loc {
	uint64_t group;
	uint64_t object;
};

/* draft-14..19 subscription filter types (inline in 14, the value of
 * SUBSCRIPTION_FILTER in 15-19). Draft 20's LOCATION_FILTER is the raw
 * parameter value, see moq_ietf_filter_decode. */
enum moq_ietf_filter_type {
	IETF_FILTER_NEXT_GROUP = 0x1,
	IETF_FILTER_LARGEST_OBJECT = 0x2,
	IETF_FILTER_ABSOLUTE_START = 0x3,
	IETF_FILTER_ABSOLUTE_RANGE = 0x4,
};

/* A filter in one shape for every draft. kind: what the publisher resolves. */
enum moq_ietf_filter_kind {
	IETF_F_UNFILTERED = 0, /* from {0,0}, no end (20: empty value) */
	IETF_F_NEXT_OBJECT,    /* the live edge (LargestObject) */
	IETF_F_RELATIVE,       /* @groups back from the next group (NextGroup is 0;
	                        * other values need draft 20) */
	IETF_F_ABSOLUTE,       /* start, optional end group / end object */
};

struct moq_ietf_filter {
	enum moq_ietf_filter_kind kind;
	uint64_t groups; /* RELATIVE */
	struct moq_ietf_loc start;
	bool has_end;
	uint64_t end_group;
	bool has_end_object; /* 20 only */
	uint64_t end_object;
};

/*
 * draft-20 FILL_PARAMETERS (a SUBSCRIBE parameter): a backfill of what the
 * track already has, up to its Largest Object, on a FETCH stream with the
 * SUBSCRIBE's request id. Its value is a nested parameter scope of its own
 * (count, delta-coded ascending ids, a fixed form per id).
 */
enum moq_ietf_fill_param {
	IETF_FILL_TIMEOUT = 0x0a,             /* varint */
	IETF_FILL_SUBSCRIBER_PRIORITY = 0x20, /* uint8 */
	IETF_FILL_LOCATION_FILTER = 0x21,     /* bytes */
	IETF_FILL_GROUP_ORDER = 0x22,         /* uint8 */
	IETF_FILL_SUBGROUP_FILTER = 0x25,     /* bytes: 0x25-0x28 are range filters */
	IETF_FILL_OBJECTID_FILTER = 0x26,
	IETF_FILL_PRIORITY_FILTER = 0x27,
	IETF_FILL_PROPERTY_FILTER = 0x28,
};

struct moq_ietf_fill {
	bool has_filter;    /* a LOCATION_FILTER; else the subscription's applies */
	bool range_filters; /* a range filter (0x25-0x28): which objects pass */
	struct moq_ietf_filter filter;
};

/* FETCH types (draft-14 9.16, until 19; 20 has no type field). */
enum moq_ietf_fetch_type {
	IETF_FETCH_STANDALONE = 0x1,
	IETF_FETCH_RELATIVE_JOINING = 0x2,
	IETF_FETCH_ABSOLUTE_JOINING = 0x3,
};

/*
 * A control message. Which fields a kind uses (per draft) is listed at its
 * encoder in ietf_codec.c; unused fields are ignored on encode and zero after
 * decode.
 */
struct moq_ietf_msg {
	enum moq_ietf_kind kind;
	uint64_t request_id; /* absent on the wire for some replies from 17 */
	uint64_t req_delta;  /* draft-17 only: required request id delta */
	uint32_t ns_n;       /* namespace tuple (or suffix/prefix) */
	struct moq_str ns[MOQ_IETF_MAX_NS];
	struct moq_str name; /* track name */
	uint64_t track_alias;
	uint8_t priority; /* subscriber / publisher priority */
	uint8_t group_order;
	uint8_t forward;
	uint8_t content_exists;
	uint8_t end_of_track;
	struct moq_ietf_loc largest;   /* content_exists; FETCH_OK end location */
	struct moq_ietf_filter filter; /* SUBSCRIBE (14 inline) */
	bool has_fill;                 /* SUBSCRIBE (20): FILL_PARAMETERS */
	struct moq_ietf_fill fill;
	uint64_t expires;
	uint64_t code;         /* error / status code */
	uint64_t retry;        /* REQUEST_ERROR retry interval (16+) */
	struct moq_str reason; /* reason phrase / GOAWAY uri */
	uint64_t timeout;      /* GOAWAY timeout (17+) */
	uint64_t stream_count; /* PUBLISH_DONE */
	uint64_t options;      /* SUBSCRIBE_NAMESPACE options (16-17) */
	uint32_t version;      /* SERVER_SETUP selected version (14) */
	uint32_t versions_n;   /* CLIENT_SETUP versions (14) */
	uint32_t versions[MOQ_IETF_MAX_VERSIONS];
	/* FETCH */
	uint8_t fetch_type;
	struct moq_ietf_loc start, end;
	uint64_t joining_id, joining_start;
	/* d14 SUBSCRIBE_UPDATE */
	uint64_t sub_request_id;
	uint64_t end_group;
	/* TRACK_STATUS (14) */
	struct moq_ietf_loc last;
	struct moq_ietf_params params; /* message parameters or SETUP options */
	struct moq_str props;          /* Track Properties (16+), raw */
};

/* ---- versions, ALPNs, varints ---- */

/* moq_ietf_alpn: the ALPN (and WebTransport protocol) of draft @d, or NULL. */
const char *moq_ietf_alpn(enum moq_ietf_draft d);

/* moq_ietf_alpn_draft: the draft an ALPN names (14..20), 0 when none. */
int moq_ietf_alpn_draft(const char *alpn, size_t len);

/* moq_ietf_version_draft: the draft of a SETUP version number, 0 when none. */
int moq_ietf_version_draft(uint64_t version);

/* moq_ietf_leading_ones: whether draft @d uses the leading-ones varint (17+). */
static inline bool moq_ietf_leading_ones(enum moq_ietf_draft d)
{
	return d >= MOQ_IETF_17;
}

/* moq_ietf_varint_len: bytes @v takes in draft @d's varint; 0 if too large. */
size_t moq_ietf_varint_len(enum moq_ietf_draft d, uint64_t v);

/*
 * moq_ietf_varint_put: write @v in draft @d's varint (QUIC's up to 16, the
 * leading-ones form from 17) into @buf (@cap bytes). Returns the bytes
 * written, MOQ_ERR_INVAL when @v does not fit, MOQ_ERR_TOO_LARGE when @cap is
 * too small.
 */
int moq_ietf_varint_put(uint8_t *buf, size_t cap, enum moq_ietf_draft d, uint64_t v);

/*
 * moq_ietf_varint_get: read one varint of draft @d. Returns the bytes read,
 * MOQ_ERR_SHORT when @len is too small, MOQ_ERR_DECODE for the 7-byte form
 * draft 17 reserves.
 */
int moq_ietf_varint_get(const uint8_t *buf, size_t len, enum moq_ietf_draft d, uint64_t *v);

/* ---- control messages ---- */

/* moq_ietf_kind_type: the wire type of @k in draft @d; 0 when @d lacks it. */
uint64_t moq_ietf_kind_type(enum moq_ietf_draft d, enum moq_ietf_kind k);

/* moq_ietf_type_kind: the kind wire type @type is in draft @d; IETF_NONE when
 * undefined. */
enum moq_ietf_kind moq_ietf_type_kind(enum moq_ietf_draft d, uint64_t type);

/* moq_ietf_kind_name: a printable name (for logs and tests). */
const char *moq_ietf_kind_name(enum moq_ietf_kind k);

/*
 * moq_ietf_msg_encode: write @m as type, 16-bit length, payload into @buf
 * (@cap bytes) for draft @d. Returns the bytes written; MOQ_ERR_INVAL when
 * the draft lacks the kind or a field is out of range, MOQ_ERR_TOO_LARGE when
 * @cap is too small or the payload exceeds 65535 bytes.
 */
int moq_ietf_msg_encode(uint8_t *buf, size_t cap, enum moq_ietf_draft d,
                        const struct moq_ietf_msg *m);

/*
 * moq_ietf_msg_decode: read one control message (type, length, payload) of
 * draft @d from @buf into @m (strings point into @buf). Returns the bytes
 * consumed; MOQ_ERR_SHORT (need more), MOQ_ERR_PROTO (a type the draft does
 * not define), MOQ_ERR_DECODE (malformed: bad length, bad field, bounds).
 */
int moq_ietf_msg_decode(const uint8_t *buf, size_t len, enum moq_ietf_draft d,
                        struct moq_ietf_msg *m);

/* moq_ietf_param_get: the parameter @id of @ps, or NULL. */
const struct moq_ietf_param *moq_ietf_param_get(const struct moq_ietf_params *ps, uint64_t id);

/* moq_ietf_param_add: append a parameter (@v for even ids, @b for odd).
 * Returns 0, MOQ_ERR_LIMIT when full, MOQ_ERR_EXISTS for a repeated id. */
int moq_ietf_param_add(struct moq_ietf_params *ps, uint64_t id, uint64_t v, struct moq_str b);

/*
 * moq_ietf_filter_decode / _encode: a SUBSCRIPTION_FILTER / LOCATION_FILTER
 * value of draft @d (tagged through 19, a field count in 20). _encode returns
 * the bytes written (0 is legal: draft 20's unfiltered), MOQ_ERR_INVAL when
 * the draft cannot express @f; _decode returns 0 or MOQ_ERR_DECODE.
 */
int moq_ietf_filter_decode(const uint8_t *p, size_t n, enum moq_ietf_draft d,
                           struct moq_ietf_filter *f);
int moq_ietf_filter_encode(uint8_t *buf, size_t cap, enum moq_ietf_draft d,
                           const struct moq_ietf_filter *f);

/*
 * moq_ietf_fill_decode / _encode: FILL_PARAMETERS' value (draft 20).
 * _decode returns 0, or MOQ_ERR_DECODE (an id the scope does not allow, a
 * repeated id, a truncated value, trailing bytes, a bad LOCATION_FILTER);
 * _encode writes the filter (when @f->has_filter) and, for
 * @f->range_filters, an empty SUBGROUP_FILTER; returns the bytes written or
 * MOQ_ERR_INVAL / MOQ_ERR_TOO_LARGE.
 */
int moq_ietf_fill_decode(const uint8_t *p, size_t n, enum moq_ietf_draft d,
                         struct moq_ietf_fill *f);
int moq_ietf_fill_encode(uint8_t *buf, size_t cap, enum moq_ietf_draft d,
                         const struct moq_ietf_fill *f);

/* moq_ietf_loc_decode: LARGEST_OBJECT's value (two varints). 0 or MOQ_ERR_DECODE. */
int moq_ietf_loc_decode(const uint8_t *p, size_t n, enum moq_ietf_draft d, struct moq_ietf_loc *l);

/* moq_ietf_kvp_check: whether @p (@n bytes) is a well-formed key-value block
 * of draft @d without count (extension headers, track properties): 0 or
 * MOQ_ERR_DECODE. */
int moq_ietf_kvp_check(const uint8_t *p, size_t n, enum moq_ietf_draft d);

/* moq_ietf_ns_to_path: the broadcast path of a namespace tuple, fields joined
 * with '/' (moq-relay's mapping, docs/DESIGN.md): a field holding '/' or '\'
 * escapes it with '\'. Returns the length written to @dst (@cap bytes),
 * MOQ_ERR_TOO_LARGE when it does not fit, MOQ_ERR_DECODE for an empty field
 * anywhere but a lone empty tuple. */
int moq_ietf_ns_to_path(char *dst, size_t cap, const struct moq_str *ns, uint32_t n);

/* moq_ietf_path_to_ns: split @path (@len bytes) into tuple fields in @ns
 * (at most MOQ_IETF_MAX_NS; they point into @path, escapes left in place:
 * the caller writes them with moq_ietf_field_unescape). Returns the count,
 * MOQ_ERR_TOO_LARGE with more than 32 fields. An empty path is 0 fields. */
int moq_ietf_path_to_ns(const char *path, size_t len, struct moq_str *ns);

/* ---- data plane ---- */

/* Subgroup stream header (draft-14 10.4.2): type 0x10..0x1d (0x30..0x3d
 * from 15: no priority byte; 0x40 set = first object of the group, 18+). */
struct moq_ietf_subgroup_hdr {
	uint64_t type;     /* the wire type, as read */
	bool extensions;   /* objects carry extension headers */
	bool end_of_group; /* the stream ends the group */
	bool has_priority;
	bool first_object; /* 18+ bit; always true before 18 */
	uint8_t sg_mode;   /* 0: subgroup 0, 1: first object id, 2: explicit */
	uint64_t track_alias;
	uint64_t group;
	uint64_t subgroup; /* sg_mode 2 */
	uint8_t priority;  /* has_priority (else 128) */
};

/* moq_ietf_subgroup_hdr_encode: from the flag fields of @h (type ignored).
 * Returns bytes or MOQ_ERR_INVAL / MOQ_ERR_TOO_LARGE. */
int moq_ietf_subgroup_hdr_encode(uint8_t *buf, size_t cap, enum moq_ietf_draft d,
                                 const struct moq_ietf_subgroup_hdr *h);
/* moq_ietf_subgroup_hdr_decode: from the stream's first bytes (stream type
 * included). Returns bytes, MOQ_ERR_SHORT, MOQ_ERR_DECODE (type not a
 * subgroup header of this draft). */
int moq_ietf_subgroup_hdr_decode(const uint8_t *buf, size_t len, enum moq_ietf_draft d,
                                 struct moq_ietf_subgroup_hdr *h);

/* An object on a subgroup stream or datagram. */
struct moq_ietf_object {
	uint64_t id_delta; /* subgroup streams: Object ID delta (prev + 1 + delta) */
	uint64_t id;       /* datagram / fetch: absolute */
	bool has_ext;
	struct moq_str ext; /* extension headers, raw (moq_ietf_kvp_check) */
	uint64_t status;    /* for an empty payload */
	size_t payload_len;
	const uint8_t *payload; /* decode: into the buffer */
};

/* moq_ietf_object_encode_head: write an object's header (id delta,
 * [extensions], payload length, [status]) as a subgroup stream with
 * extensions=@ext carries it; the payload bytes follow (the caller writes
 * @o->payload_len of them). Returns bytes or MOQ_ERR_INVAL / _TOO_LARGE. */
int moq_ietf_object_encode_head(uint8_t *buf, size_t cap, enum moq_ietf_draft d, bool ext,
                                const struct moq_ietf_object *o);
/* moq_ietf_object_decode_head: the header of the next object; @o->payload_len
 * bytes of payload follow (payload is not read). Returns bytes, MOQ_ERR_SHORT,
 * MOQ_ERR_DECODE. */
int moq_ietf_object_decode_head(const uint8_t *buf, size_t len, enum moq_ietf_draft d, bool ext,
                                struct moq_ietf_object *o);

/* OBJECT_DATAGRAM (draft-14 10.3.1; flag bits from 15). */
struct moq_ietf_datagram {
	uint64_t type;
	uint64_t track_alias;
	uint64_t group;
	bool has_object_id; /* false: object 0 (the ZERO_OBJECT_ID bit) */
	uint64_t object;
	bool has_priority; /* false: the subscription's (15+) */
	uint8_t priority;
	bool end_of_group;
	bool has_ext;
	struct moq_str ext;
	bool is_status;
	uint64_t status;
	const uint8_t *payload;
	size_t payload_len;
};

/* moq_ietf_datagram_encode / _decode: a whole datagram (the payload runs to
 * its end). Return bytes / 0, or MOQ_ERR_INVAL, MOQ_ERR_TOO_LARGE,
 * MOQ_ERR_DECODE. */
int moq_ietf_datagram_encode(uint8_t *buf, size_t cap, enum moq_ietf_draft d,
                             const struct moq_ietf_datagram *g);
int moq_ietf_datagram_decode(const uint8_t *buf, size_t len, enum moq_ietf_draft d,
                             struct moq_ietf_datagram *g);

/* A FETCH stream object (draft-14 10.4.4: explicit group, subgroup, object,
 * priority; from 15 a flags varint says which of them are present). */
struct moq_ietf_fetch_obj {
	uint64_t flags; /* decode: as read (15+) */
	uint64_t group;
	uint64_t subgroup;
	uint64_t object;
	uint8_t priority;
	bool has_ext;
	struct moq_str ext;
	uint64_t status; /* 14: for an empty payload */
	size_t payload_len;
};

/* moq_ietf_fetch_obj_encode_head / _decode_head: one object's header on a
 * FETCH stream, relative to @prev (the previous object of the stream, or
 * NULL for the first). The payload follows. */
int moq_ietf_fetch_obj_encode_head(uint8_t *buf, size_t cap, enum moq_ietf_draft d,
                                   const struct moq_ietf_fetch_obj *prev,
                                   const struct moq_ietf_fetch_obj *o);
int moq_ietf_fetch_obj_decode_head(const uint8_t *buf, size_t len, enum moq_ietf_draft d,
                                   const struct moq_ietf_fetch_obj *prev,
                                   struct moq_ietf_fetch_obj *o);

#endif
