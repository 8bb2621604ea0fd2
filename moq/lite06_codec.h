/* SPDX-License-Identifier: MIT */
/*
 * lite06_codec.h: the moq-lite-06 wire codec (draft-lcurley-moq-lite-06,
 * ALPN "moq-lite-06", version 0xff0dad06; ../shared/PROTOCOL.md, section
 * "moq-lite-06"). lite-06 is not parse-compatible with 03/04/05 (codec.h), so
 * it has its own message set; varints, strings, paths and the frame header
 * ({zigzag timestamp delta, size}, as in 05) are codec.h's.
 *
 * Pure functions over caller-owned buffers: no allocation, no I/O, no global
 * state. Decoded strings point into the input buffer. Decoders are strict: a
 * body that is short or has bytes left over is MOQ_ERR_DECODE; a buffer that
 * does not yet hold the whole message is MOQ_ERR_SHORT.
 */
#ifndef MOQ_MOQ_LITE06_CODEC_H
#define MOQ_MOQ_LITE06_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"

/* draft-lcurley-moq-lite-06: the version number and the ALPN / WebTransport
 * protocol / qmux suffix that select it. */
#define MOQ_LITE06_VERSION UINT32_C(0xff0dad06)
#ifndef MOQ_ALPN_06
#define MOQ_ALPN_06 "moq-lite-06"
#endif
/* lite-06 GOAWAY: the new session URI is at most 8192 bytes. */
#define MOQ6_GOAWAY_URI_MAX 8192
/* lite-06 SETUP Cost: the default when the parameter is absent. */
#define MOQ6_COST_DEFAULT 1
/* A route cost not known yet (announce.c to lite06.c: price by hops). */
#define MOQ6_COST_UNSET UINT64_MAX
/* The ceiling cost a GOAWAY'd path is advertised with (the largest varint). */
#define MOQ6_COST_CEILING MOQ_VARINT_MAX

/* lite-06 messages (the stream types are codec.h's enum moq_stream_type). */
enum moq6_msg_type {
	MOQ6_SETUP = 1,        /* uni 0x1, each side once */
	MOQ6_ANNOUNCE_REQUEST, /* bidi 0x1, first message */
	MOQ6_ANNOUNCE_OK,      /* bidi 0x1, the publisher's first reply */
	MOQ6_ANNOUNCE,         /* bidi 0x1, typed: START / END / UPDATE */
	MOQ6_SUBSCRIBE,        /* bidi 0x2, first message */
	MOQ6_SUBSCRIBE_UPDATE, /* bidi 0x2, subscriber's later messages */
	MOQ6_SUBSCRIBE_REPLY,  /* bidi 0x2, typed: OK / END / DROP */
	MOQ6_TRACK,            /* bidi 0x6 */
	MOQ6_TRACK_INFO,
	MOQ6_GROUP,  /* uni 0x0 header (after the stream type) */
	MOQ6_FETCH,  /* bidi 0x3 */
	MOQ6_PROBE,  /* bidi 0x4 */
	MOQ6_GOAWAY, /* bidi 0x5 */
	MOQ6_TYPE_MAX,
};

/* lite-06 SETUP parameter ids. */
enum moq6_setup_param {
	MOQ6_SETUP_PROBE = 0x1, /* probe level (i) */
	MOQ6_SETUP_PATH = 0x2,  /* path (s), may carry "?query"; empty = default */
	MOQ6_SETUP_ROLE = 0x3,  /* role (i), enum moq_role */
	MOQ6_SETUP_COST = 0x4,  /* cost (i), default 1 */
	MOQ6_SETUP_HOP = 0x5,   /* hop (i): the session's hop id */
};

/* ANNOUNCE message types (the varint before the length). */
enum moq6_announce_kind {
	MOQ6_ANN_START = 0x0,
	MOQ6_ANN_END = 0x1,
	MOQ6_ANN_UPDATE = 0x2,
};

/* Subscribe reply types. */
enum moq6_sub_reply_kind {
	MOQ6_SUB_OK = 0x0,
	MOQ6_SUB_END = 0x1, /* exclusive: the first group never delivered */
	MOQ6_SUB_DROP = 0x2,
};

/* lite-06 session close codes. */
enum moq6_session_code {
	MOQ6_SESS_NO_ERROR = 0x0,
	MOQ6_SESS_INTERNAL = 0x1,
	MOQ6_SESS_UNAUTHORIZED = 0x2,
	MOQ6_SESS_PROTOCOL_VIOLATION = 0x3,
	MOQ6_SESS_KEY_VALUE_FORMATTING = 0x6,
	MOQ6_SESS_GOAWAY_TIMEOUT = 0x10,
	MOQ6_SESS_CONTROL_TIMEOUT = 0x11,
	MOQ6_SESS_VERSION_NEGOTIATION = 0x15,
};

/* lite-06 stream reset codes (a reset with 0 is an internal error). */
enum moq6_stream_code {
	MOQ6_STREAM_INTERNAL = 0x0,
	MOQ6_STREAM_CANCELLED = 0x1,
	MOQ6_STREAM_DELIVERY_TIMEOUT = 0x2,
	MOQ6_STREAM_SESSION_CLOSED = 0x3,
	MOQ6_STREAM_GOING_AWAY = 0x4,
	MOQ6_STREAM_TOO_FAR_BEHIND = 0x5,
	MOQ6_STREAM_MALFORMED_TRACK = 0x12,
	MOQ6_STREAM_NO_CAPACITY = 0x30,
	MOQ6_STREAM_CONTROL_TIMEOUT = 0x31,
	MOQ6_STREAM_GROUP_TOO_LARGE = 0x32,
	MOQ6_STREAM_NOT_FOUND = 0x33,
	MOQ6_STREAM_OLD = 0x34,
	MOQ6_STREAM_EVICTED = 0x35,
	MOQ6_STREAM_UNROUTABLE = 0x36,
	MOQ6_STREAM_WRONG_SIZE = 0x37,
	MOQ6_STREAM_FRAME_TOO_LARGE = 0x38,
	MOQ6_STREAM_TIMESTAMP_MISMATCH = 0x39,
	MOQ6_STREAM_APPLICATION = 64, /* and up: application codes */
};

struct moq6_setup {
	bool has_probe, has_path, has_role, has_cost, has_hop;
	uint64_t probe;
	struct moq_str path;
	uint64_t role;
	uint64_t cost; /* MOQ6_COST_DEFAULT when absent (decoder fills it) */
	uint64_t hop;
};

struct moq6_announce_request {
	struct moq_str prefix;
};

struct moq6_announce_ok {
	uint64_t hop;    /* the publisher's hop id */
	uint64_t active; /* how many ANNOUNCE_STARTs form the initial set */
};

/* START: suffix, hops, costs; UPDATE: id, hops, costs; END: id. */
struct moq6_announce {
	uint8_t kind; /* enum moq6_announce_kind */
	uint64_t id;  /* END / UPDATE: the implicit id (n-th START is n) */
	struct moq_str suffix;
	uint32_t hop_count;
	uint64_t hops[MOQ_MAX_HOPS];
	uint64_t warm_cost, cold_cost;
};

/* Subscription bounds. Group end and frame end are exclusive-plus-one
 * encodings: 0 = unbounded, N = up to (not including) N. */
struct moq6_subscribe {
	uint64_t id;
	struct moq_str broadcast;
	struct moq_str track;
	uint8_t priority;
	uint64_t max_age_ms; /* 0 = the latest group only */
	uint64_t group_start, group_end;
	uint64_t frame_start, frame_end;
};

struct moq6_subscribe_update {
	uint8_t priority;
	uint64_t max_age_ms;
	uint64_t group_start, group_end;
	uint64_t frame_start, frame_end;
};

struct moq6_subscribe_reply {
	uint8_t kind;   /* enum moq6_sub_reply_kind */
	uint64_t group; /* OK: first group; END: first group never delivered */
	uint64_t drop_start, drop_end, drop_code;
};

struct moq6_track {
	struct moq_str broadcast;
	struct moq_str track;
};

struct moq6_track_info {
	uint8_t priority;
	uint64_t max_age_ms;
	uint64_t timescale; /* non-zero */
};

struct moq6_group {
	uint64_t subscribe_id;
	uint64_t sequence;
	uint64_t frame_start; /* index of the first frame on this stream */
};

struct moq6_fetch {
	struct moq_str broadcast;
	struct moq_str track;
	uint8_t priority;
	uint64_t group;
	uint64_t frame_start;
	uint64_t frame_end; /* index + 1; 0 = to the end of the group */
};

struct moq6_probe {
	uint64_t bitrate;
	uint64_t rtt_ms;
};

struct moq6_goaway {
	struct moq_str uri; /* <= MOQ6_GOAWAY_URI_MAX bytes */
};

struct moq6_msg {
	enum moq6_msg_type type;
	union {
		struct moq6_setup setup;
		struct moq6_announce_request announce_request;
		struct moq6_announce_ok announce_ok;
		struct moq6_announce announce;
		struct moq6_subscribe subscribe;
		struct moq6_subscribe_update subscribe_update;
		struct moq6_subscribe_reply subscribe_reply;
		struct moq6_track track;
		struct moq6_track_info track_info;
		struct moq6_group group;
		struct moq6_fetch fetch;
		struct moq6_probe probe;
		struct moq6_goaway goaway;
	} u;
};

/*
 * moq6_msg_encode: encode @m (the varint type for a typed message, then the
 * length, then the body) into @buf (@cap bytes).
 * Returns the bytes written; MOQ_ERR_TOO_LARGE when @cap is too small;
 * MOQ_ERR_INVAL when a field is out of range (a varint above 2^62-1, more
 * than 32 hops, a path of more than 32 segments, a zero timescale, a GOAWAY
 * URI above 8192 bytes, an unknown kind or type).
 */
int moq6_msg_encode(uint8_t *buf, size_t cap, const struct moq6_msg *m);

/*
 * moq6_msg_decode: decode one message of type @type from the start of @buf
 * (@len bytes) into @m; strings point into @buf.
 * Returns the bytes consumed; MOQ_ERR_SHORT when @buf does not hold it all
 * yet; MOQ_ERR_TOO_LARGE when its declared length exceeds @max_len;
 * MOQ_ERR_DECODE when malformed (body short or with bytes left over, a path
 * of more than 32 segments, more than 32 hops, an unknown message kind, a
 * zero timescale, a GOAWAY URI above 8192 bytes, a SETUP parameter whose
 * value is not one varint); MOQ_ERR_PROTO for a SETUP with a repeated
 * parameter id or more than 64 parameters, or an announce whose hop list
 * repeats a non-zero hop id (the draft: a protocol violation);
 * MOQ_ERR_INVAL for an unknown @type.
 */
int moq6_msg_decode(enum moq6_msg_type type, const uint8_t *buf, size_t len, size_t max_len,
                    struct moq6_msg *m);

/*
 * moq6_msg_peek_len: the total size (type and length prefix included) of the
 * next message of @type at @buf; MOQ_ERR_SHORT when the prefix itself is not
 * complete; MOQ_ERR_TOO_LARGE when the body exceeds @max_len.
 */
int moq6_msg_peek_len(enum moq6_msg_type type, const uint8_t *buf, size_t len, size_t max_len);

/*
 * moq6_group_hdr_encode: the bytes that open a group stream: the stream type
 * MOQ_STREAM_GROUP and GROUP { @sub_id, @seq, @frame_start } (size prefixed),
 * byte for byte what moq_varint_put + moq6_msg_encode write. Writes at most
 * 34 bytes. Returns the bytes written or MOQ_ERR_TOO_LARGE / MOQ_ERR_INVAL.
 */
int moq6_group_hdr_encode(uint8_t *buf, size_t cap, uint64_t sub_id, uint64_t seq,
                          uint64_t frame_start);

/*
 * moq6_code_stream: the lite-06 stream reset code for a moqdp (lite-05
 * numbering, enum moq_code) code @c; application codes (>= 64) unchanged.
 * 0 (cancel in 05) becomes 0x1 cancelled: a reset with 0 is an internal
 * error in 06; 11 (bounds: a limit reached) becomes 0x30 no capacity.
 */
uint64_t moq6_code_stream(uint64_t c);

/*
 * moq6_code_from_stream: the enum moq_code for a lite-06 stream reset code
 * @c (the inverse of moq6_code_stream where one exists; 0x0 internal maps to
 * MOQ_CODE_TRANSPORT, unknown codes below 64 to MOQ_CODE_PROTOCOL_VIOLATION).
 */
uint64_t moq6_code_from_stream(uint64_t c);

/*
 * moq6_code_session: the lite-06 session close code for an enum moq_code
 * @c: 0 no error, 6 unauthorised -> 0x2, 5/10/12/15/16/20 -> 0x3 protocol
 * violation, 19 -> 0x6, 9/21 -> 0x15, 3 -> 0x11, 64 and up unchanged,
 * anything else -> 0x1 internal.
 */
uint64_t moq6_code_session(uint64_t c);

/* ---- the generic messages (codec.h) on the lite-06 wire ---- */

/*
 * moq6_encode_generic: encode codec.h message @m as lite-06 (what
 * moq_msg_encode does for MOQ_LITE_06). The mapping: SETUP Origin is Hop;
 * ANNOUNCE uses @m's kind6 / id6 / costs (the session fills them, lite06.c),
 * the announce request's exclude hop is not on the wire; SUBSCRIBE /
 * SUBSCRIBE_UPDATE carry max_latency_ms as Max Age, start as Group Start
 * (absent = 0) and end as Group End (absent = 0, else end + 1), Ordered is
 * not on the wire; the lite-05 START reply is SUBSCRIBE_OK, a DROP's code is
 * mapped (moq6_code_stream; 24 dropped is 0, "simply unavailable"); TRACK_INFO drops Ordered. Returns as
 * moq6_msg_encode; MOQ_ERR_INVAL also for a lite-03/04 OK reply.
 */
int moq6_encode_generic(uint8_t *buf, size_t cap, const struct moq_msg *m);

/*
 * moq6_decode_generic: decode a lite-06 message of codec.h type @type into
 * @m (the inverse of moq6_encode_generic: Group Start 0 = absent, Group End
 * 0 = absent, N = N - 1; ANNOUNCE START / UPDATE / END as status active /
 * restart / ended with kind6 and id6 set and an empty suffix for UPDATE and
 * END). Returns as moq6_msg_decode.
 */
int moq6_decode_generic(enum moq_msg_type type, const uint8_t *buf, size_t len, size_t max_len,
                        struct moq_msg *m);

/* moq6_peek_generic: moq6_msg_peek_len for codec.h type @type. */
int moq6_peek_generic(enum moq_msg_type type, const uint8_t *buf, size_t len, size_t max_len);

#endif /* MOQ_MOQ_LITE06_CODEC_H */
