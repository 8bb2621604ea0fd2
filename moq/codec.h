/* SPDX-License-Identifier: MIT */
/*
 * codec.h: the moq-lite wire codec (lite-03, lite-04, lite-05), see
 * docs/PROTOCOL.md. Pure functions over caller-owned buffers: no allocation,
 * no I/O, no global state.
 *
 * Decoded messages point into the input buffer (struct moq_str); they stay
 * valid as long as the caller keeps that buffer. Decoders are strict: a
 * message whose declared length holds too few bytes or leaves bytes over is
 * MOQ_ERR_DECODE; a buffer that does not yet hold the whole message is
 * MOQ_ERR_SHORT (feed more bytes and call again).
 */
#ifndef MOQ_MOQ_CODEC_H
#define MOQ_MOQ_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* moq-lite drafts this codec speaks; the ALPN selects one (PROTOCOL.md). */
enum moq_version {
	MOQ_LITE_03 = 3,
	MOQ_LITE_04 = 4,
	MOQ_LITE_05 = 5,
	/* moq-lite-06: its own wire format (lite06_codec.h); moq_msg_encode /
	 * decode translate these structs to and from it. */
	MOQ_LITE_06 = 6,
};

/* RFC 9000, 16: the largest value a QUIC varint carries. */
#define MOQ_VARINT_MAX ((UINT64_C(1) << 62) - 1)
/* PROTOCOL.md, path: at most 32 segments. */
#define MOQ_PATH_MAX_SEGMENTS 32
/* PROTOCOL.md, hop list: at most 32 hop ids. */
#define MOQ_MAX_HOPS 32
/* PROTOCOL.md, SETUP: at most 64 parameters. */
#define MOQ_SETUP_MAX_PARAMS 64
/* PROTOCOL.md, Group: a frame (and a group's cached bytes) is capped at 32 MiB. */
#define MOQ_FRAME_MAX (32u << 20)
/* An absent optional group (encoded as 0 on the wire). */
#define MOQ_GROUP_NONE UINT64_MAX

/* PROTOCOL.md, Streams: the varint that opens every stream. */
enum moq_stream_type {
	MOQ_STREAM_ANNOUNCE = 0x1,  /* bidi */
	MOQ_STREAM_SUBSCRIBE = 0x2, /* bidi */
	MOQ_STREAM_FETCH = 0x3,     /* bidi, lite-05 */
	MOQ_STREAM_PROBE = 0x4,     /* bidi */
	MOQ_STREAM_GOAWAY = 0x5,    /* bidi, lite-04+ */
	MOQ_STREAM_TRACK = 0x6,     /* bidi, lite-05 */
	MOQ_STREAM_GROUP = 0x0,     /* uni */
	MOQ_STREAM_SETUP = 0x1,     /* uni, lite-05 */
};

/* PROTOCOL.md, Error codes: stream reset and session close codes. */
enum moq_code {
	MOQ_CODE_CANCEL = 0,
	MOQ_CODE_REQUIRED_EXTENSION = 1,
	MOQ_CODE_OLD = 2,
	MOQ_CODE_TIMEOUT = 3,
	MOQ_CODE_TRANSPORT = 4,
	MOQ_CODE_DECODE = 5,
	MOQ_CODE_UNAUTHORIZED = 6,
	MOQ_CODE_VERSION = 9,
	MOQ_CODE_UNEXPECTED_STREAM = 10,
	MOQ_CODE_BOUNDS = 11,
	MOQ_CODE_DUPLICATE = 12,
	MOQ_CODE_NOT_FOUND = 13,
	MOQ_CODE_WRONG_SIZE = 14,
	MOQ_CODE_PROTOCOL_VIOLATION = 15,
	MOQ_CODE_UNEXPECTED_MESSAGE = 16,
	MOQ_CODE_UNSUPPORTED = 17,
	MOQ_CODE_TOO_MANY_PARAMETERS = 19,
	MOQ_CODE_INVALID_ROLE = 20,
	MOQ_CODE_UNKNOWN_ALPN = 21,
	MOQ_CODE_DROPPED = 24,
	MOQ_CODE_CLOSED = 25,
	MOQ_CODE_LAGGED = 26,
	MOQ_CODE_FRAME_TOO_LARGE = 27,
	MOQ_CODE_TIMESTAMP_MISMATCH = 29,
	MOQ_CODE_UNROUTABLE = 30,
	MOQ_CODE_EVICTED = 31,
};

/* A byte string inside a caller's buffer (not NUL-terminated). */
struct moq_str {
	const char *p;
	size_t len;
};

/* ---- varints (RFC 9000, 16) ---- */

/* moq_varint_len: bytes @v takes (1, 2, 4 or 8); 0 when @v > MOQ_VARINT_MAX. */
size_t moq_varint_len(uint64_t v);

/*
 * moq_varint_put: write @v in its shortest form into @buf (@cap bytes).
 * Returns the bytes written, MOQ_ERR_INVAL when @v > MOQ_VARINT_MAX,
 * MOQ_ERR_TOO_LARGE when @cap is too small.
 */
int moq_varint_put(uint8_t *buf, size_t cap, uint64_t v);

/*
 * moq_varint_get: read one varint from @buf (@len bytes) into @v.
 * Returns the bytes read (1..8) or MOQ_ERR_SHORT when @len is too small.
 */
int moq_varint_get(const uint8_t *buf, size_t len, uint64_t *v);

/* moq_zigzag / moq_unzigzag: PROTOCOL.md, zigzag: (s << 1) ^ (s >> 63). */
uint64_t moq_zigzag(int64_t s);
int64_t moq_unzigzag(uint64_t u);

/* ---- paths (PROTOCOL.md, path) ---- */

/*
 * moq_path_norm: normalise @src (@len bytes): trim leading and trailing '/',
 * collapse '//'. Writes the result to @dst (@cap bytes; may not overlap
 * @src). Returns the normalised length, MOQ_ERR_DECODE when it has more than
 * MOQ_PATH_MAX_SEGMENTS segments, MOQ_ERR_TOO_LARGE when @cap is too small.
 */
int moq_path_norm(char *dst, size_t cap, const char *src, size_t len);

/* moq_path_segments: segments of @p once normalised (non-empty runs between "/"). */
size_t moq_path_segments(const char *p, size_t len);

/*
 * moq_path_has_prefix: nonzero when normalised @prefix matches normalised
 * @path on whole segments ("foo" matches "foo" and "foo/bar", never "foobar";
 * "" matches everything). On a match, *@suffix_off (when not NULL) is where
 * the suffix starts in @path.
 */
bool moq_path_has_prefix(const char *prefix, size_t plen, const char *path, size_t len,
                         size_t *suffix_off);

/* ---- messages ---- */

/* Every moq-lite message this codec knows, for moq_msg_encode/decode. */
enum moq_msg_type {
	MOQ_MSG_SETUP = 1,    /* uni 0x1, lite-05 */
	MOQ_MSG_ANNOUNCE_REQ, /* bidi 0x1, first message */
	MOQ_MSG_ANNOUNCE_OK,  /* bidi 0x1 reply, lite-05 */
	MOQ_MSG_ANNOUNCE,     /* bidi 0x1 reply */
	MOQ_MSG_SUBSCRIBE,    /* bidi 0x2, first message */
	MOQ_MSG_SUBSCRIBE_UPDATE,
	MOQ_MSG_SUBSCRIBE_REPLY, /* typed: START/END/DROP (05), OK/DROP (03/04) */
	MOQ_MSG_TRACK,           /* bidi 0x6, lite-05 */
	MOQ_MSG_TRACK_INFO,
	MOQ_MSG_GROUP,  /* uni 0x0 header (after the stream type) */
	MOQ_MSG_FETCH,  /* bidi 0x3 */
	MOQ_MSG_PROBE,  /* bidi 0x4 */
	MOQ_MSG_GOAWAY, /* bidi 0x5, lite-04+ */
	MOQ_MSG_TYPE_MAX,
};

/* SETUP parameter ids (PROTOCOL.md, Session set-up). */
enum moq_setup_param {
	MOQ_SETUP_PROBE = 0x1,
	MOQ_SETUP_PATH = 0x2,
	MOQ_SETUP_ROLE = 0x3,
	MOQ_SETUP_ORIGIN = 0x5,
};

/* SETUP Role values. */
enum moq_role {
	MOQ_ROLE_BOTH = 0,
	MOQ_ROLE_PUBLISHER = 1,
	MOQ_ROLE_SUBSCRIBER = 2,
};

/* ANNOUNCE status values. */
enum moq_announce_status {
	MOQ_ANNOUNCE_ENDED = 0,
	MOQ_ANNOUNCE_ACTIVE = 1,
	MOQ_ANNOUNCE_RESTART = 2, /* lite-05 only; decodes as active */
};

/* Subscribe reply kinds (the varint type of the typed reply). */
enum moq_sub_reply_kind {
	MOQ_SUB_START = 0, /* lite-05 */
	MOQ_SUB_END = 1,   /* lite-05 */
	MOQ_SUB_DROP = 2,  /* lite-05 type 2; lite-03/04 type 1 */
	MOQ_SUB_OK = 3,    /* lite-03/04 type 0 */
};

struct moq_setup {
	/* Which parameters are present; absent ones are not encoded. */
	bool has_probe, has_path, has_role, has_origin;
	bool has_cost; /* lite-06 Cost */
	uint64_t probe;
	struct moq_str path; /* client only: path plus "?query" */
	uint64_t role;       /* enum moq_role; unknown values mean both */
	uint64_t origin;     /* hop id (lite-06: Hop) */
	uint64_t cost;       /* lite-06: Cost (1 when absent) */
};

struct moq_announce_req {
	struct moq_str prefix;
	uint64_t exclude_hop; /* lite-04/05 */
};

struct moq_announce_ok {
	uint64_t origin; /* the publisher's hop id */
	uint64_t active; /* how many ANNOUNCEs form the initial set */
};

struct moq_announce {
	uint8_t status; /* enum moq_announce_status */
	struct moq_str suffix;
	uint32_t hop_count;
	uint64_t hops[MOQ_MAX_HOPS]; /* lite-03 carries only the count: all 0 */
	/* lite-06: typed START / END / UPDATE with implicit ids (the session
	 * keeps the id to suffix map, lite06.c) and the route's costs */
	uint8_t kind6;
	uint64_t id6;
	uint64_t warm_cost, cold_cost;
};

struct moq_subscribe {
	uint64_t id;
	struct moq_str broadcast;
	struct moq_str track;
	uint8_t priority;
	bool ordered;
	uint64_t max_latency_ms;
	uint64_t start; /* MOQ_GROUP_NONE when absent */
	uint64_t end;   /* MOQ_GROUP_NONE when absent */
	/* lite-06: the first frame of the start group, the end frame (index
	 * + 1; 0 = whole group) of the end group */
	uint64_t frame_start, frame_end;
	/* lite-06 (decoded): start is Group Start, an absolute floor, and the
	 * first group is resolved through max_latency_ms as Max Age */
	bool by_age;
};

struct moq_subscribe_update {
	uint8_t priority;
	bool ordered;
	uint64_t max_latency_ms;
	uint64_t start;                  /* MOQ_GROUP_NONE when absent */
	uint64_t end;                    /* MOQ_GROUP_NONE when absent */
	uint64_t frame_start, frame_end; /* lite-06 */
	bool by_age;                     /* lite-06, as in struct moq_subscribe */
};

struct moq_subscribe_reply {
	uint8_t kind;   /* enum moq_sub_reply_kind */
	uint64_t group; /* START: first group; END: first group that never comes */
	/* DROP */
	uint64_t drop_start, drop_end, drop_code;
	/* OK (lite-03/04) */
	uint8_t priority;
	bool ordered;
	uint64_t max_latency_ms;
	uint64_t start, end; /* MOQ_GROUP_NONE when absent */
};

struct moq_track {
	struct moq_str broadcast;
	struct moq_str track;
};

struct moq_track_info {
	uint8_t priority;
	bool ordered;
	uint64_t max_latency_ms;
	uint64_t timescale; /* non-zero */
};

struct moq_group {
	uint64_t subscribe_id;
	uint64_t sequence;
	uint64_t frame_start; /* lite-06: index of the stream's first frame */
};

struct moq_fetch {
	struct moq_str broadcast;
	struct moq_str track;
	uint8_t priority;
	uint64_t group;
	uint64_t frame_start, frame_end; /* lite-06 (frame end = index + 1, 0 = all) */
};

struct moq_probe {
	uint64_t bitrate; /* bits/s, 0 unknown */
	uint64_t rtt_ms;  /* lite-04+, 0 unknown */
};

struct moq_goaway {
	struct moq_str uri;
};

/* One message of any type. */
struct moq_msg {
	enum moq_msg_type type;
	union {
		struct moq_setup setup;
		struct moq_announce_req announce_req;
		struct moq_announce_ok announce_ok;
		struct moq_announce announce;
		struct moq_subscribe subscribe;
		struct moq_subscribe_update subscribe_update;
		struct moq_subscribe_reply subscribe_reply;
		struct moq_track track;
		struct moq_track_info track_info;
		struct moq_group group;
		struct moq_fetch fetch;
		struct moq_probe probe;
		struct moq_goaway goaway;
	} u;
};

/*
 * moq_msg_encode: encode @m for version @v (length prefix included, and the
 * varint type for a subscribe reply) into @buf (@cap bytes). The stream type
 * that opens a stream is not part of a message.
 * Returns the bytes written; MOQ_ERR_TOO_LARGE when @cap is too small;
 * MOQ_ERR_INVAL when a field is out of range (a varint above 2^62-1, more
 * than 32 hops, a path of more than 32 segments, a zero timescale) or the
 * message does not exist in @v.
 */
int moq_msg_encode(uint8_t *buf, size_t cap, enum moq_version v, const struct moq_msg *m);

/*
 * moq_msg_decode: decode one message of type @type for version @v from the
 * start of @buf (@len bytes) into @m; strings in @m point into @buf.
 * Returns the bytes consumed; MOQ_ERR_SHORT when @buf does not hold the whole
 * message yet; MOQ_ERR_TOO_LARGE when its declared length exceeds @max_len;
 * MOQ_ERR_DECODE when it is malformed (body short or with bytes left over, a
 * bool other than 0/1, a path of more than 32 segments, more than 32 hops, a
 * bad status, an unknown reply type, a zero timescale, invalid UTF-8 is not
 * checked); MOQ_ERR_PROTO for a SETUP with a repeated parameter id or more
 * than 64 parameters; MOQ_ERR_INVAL when @type does not exist in @v.
 */
int moq_msg_decode(enum moq_msg_type type, enum moq_version v, const uint8_t *buf, size_t len,
                   size_t max_len, struct moq_msg *m);

/*
 * moq_msg_peek_len: the total size (prefix included) of the next message of
 * @type at @buf, or MOQ_ERR_SHORT when the prefix itself is incomplete,
 * MOQ_ERR_TOO_LARGE when it exceeds @max_len.
 */
int moq_msg_peek_len(enum moq_msg_type type, const uint8_t *buf, size_t len, size_t max_len);

/* moq_msg_peek_len_v: moq_msg_peek_len for version @v (lite-06 types its
 * announces too). */
int moq_msg_peek_len_v(enum moq_msg_type type, enum moq_version v, const uint8_t *buf, size_t len,
                       size_t max_len);

/*
 * moq_group_hdr_encode: the bytes that open a group stream we send: the
 * stream type MOQ_STREAM_GROUP and GROUP { @sub_id, @seq } (size prefixed),
 * byte for byte what moq_varint_put + moq_msg_encode write, without the
 * generic encoder (once per group and subscriber). Writes at most 26 bytes.
 * Returns the bytes written or MOQ_ERR_TOO_LARGE (@cap) / MOQ_ERR_INVAL
 * (a value above MOQ_VARINT_MAX).
 */
int moq_group_hdr_encode(uint8_t *buf, size_t cap, uint64_t sub_id, uint64_t seq);

/*
 * moq_frame_hdr_encode: the bytes that precede a frame's payload in a group
 * (or fetch) stream: lite-05 { zigzag timestamp delta, size }, lite-03/04
 * { size }. Writes at most 16 bytes. Returns the bytes written or
 * MOQ_ERR_TOO_LARGE / MOQ_ERR_INVAL (size above MOQ_FRAME_MAX).
 */
int moq_frame_hdr_encode(uint8_t *buf, size_t cap, enum moq_version v, int64_t ts_delta,
                         uint64_t size);

/* ---- incremental group / fetch stream parser ---- */

/* What one moq_group_rx_next call produced. */
enum moq_group_ev_type {
	MOQ_GEV_NONE = 0, /* bytes consumed, nothing complete yet */
	MOQ_GEV_HEADER,   /* the GROUP header: ev.group */
	MOQ_GEV_FRAME,    /* a frame starts: ev.frame_size, ev.timestamp */
	MOQ_GEV_DATA,     /* a piece of the current frame's payload: ev.data */
};

struct moq_group_ev {
	enum moq_group_ev_type type;
	struct moq_group group;
	uint64_t frame_size;
	int64_t timestamp;   /* lite-05: absolute (sum of deltas); else 0 */
	const uint8_t *data; /* into the caller's input */
	size_t data_len;
	uint64_t frame_left; /* payload bytes of this frame still to come */
};

/*
 * The parser's state; embed it (no allocation). Small prefixes that straddle
 * chunks (varints, the header) are kept in @scratch; payload bytes never are.
 */
struct moq_group_rx {
	enum moq_version version;
	uint8_t state;
	uint8_t scratch_len;
	uint8_t scratch[40];
	uint64_t frame_left;
	int64_t timestamp;
	uint64_t frames;
};

/*
 * moq_group_rx_init: start parsing a stream. @with_header: a group stream
 * whose stream type (0x0) was already consumed, so a GROUP header comes
 * first; false: a fetch response (frames only).
 */
void moq_group_rx_init(struct moq_group_rx *rx, enum moq_version v, bool with_header);

/*
 * moq_group_rx_next: consume bytes from @buf (@len > 0) and report at most one
 * event in @ev. Call again with the rest of the input until it is used up.
 * Returns the bytes consumed (>= 1); MOQ_ERR_DECODE for a malformed header;
 * MOQ_ERR_TOO_LARGE for a frame above MOQ_FRAME_MAX. After an error the
 * parser is dead.
 */
int moq_group_rx_next(struct moq_group_rx *rx, const uint8_t *buf, size_t len,
                      struct moq_group_ev *ev);

/* moq_group_rx states (struct moq_group_rx's state) */
enum {
	GRX_HEADER = 0, /* collecting the GROUP message in scratch */
	GRX_TS,         /* collecting the timestamp varint (lite-05) */
	GRX_SIZE,       /* collecting the size varint */
	GRX_PAYLOAD,    /* handing out payload */
	GRX_DEAD,
};

/*
 * moq_group_rx_piece: the common case of moq_group_rx_next, inline, for a
 * writer that hands over whole pieces (moq/fanout.c: a frame's header, then
 * its payload in pieces): @buf is exactly one frame's size varint (moq-lite
 * 03/04; returns 1, *@size set, the parser at its payload) or bytes all
 * inside the current frame's payload (returns 2). 0: anything else, nothing
 * consumed (moq_group_rx_next takes it).
 */
static inline int moq_group_rx_piece(struct moq_group_rx *rx, const uint8_t *buf, size_t len,
                                     uint64_t *size)
{
	uint64_t v;

	if (len == 0 || rx->scratch_len || rx->version >= MOQ_LITE_05)
		return 0;
	if (rx->state == GRX_PAYLOAD) {
		if (len > rx->frame_left)
			return 0;
		rx->frame_left -= len;
		if (rx->frame_left == 0)
			rx->state = GRX_SIZE;
		return 2;
	}
	if (rx->state != GRX_SIZE)
		return 0;
	switch (len) { /* RFC 9000, 16: the two top bits give the length */
	case 1:
		if (buf[0] >> 6)
			return 0;
		v = buf[0];
		break;
	case 2:
		if ((buf[0] >> 6) != 1)
			return 0;
		v = (uint64_t)(buf[0] & 0x3f) << 8 | buf[1];
		break;
	case 4:
		if ((buf[0] >> 6) != 2)
			return 0;
		v = (uint64_t)(buf[0] & 0x3f) << 24 | (uint64_t)buf[1] << 16 |
		    (uint64_t)buf[2] << 8 | buf[3];
		break;
	default:
		return 0;
	}
	if (v > MOQ_FRAME_MAX)
		return 0;
	rx->frames++;
	rx->frame_left = v;
	rx->state = v ? GRX_PAYLOAD : GRX_SIZE;
	*size = v;
	return 1;
}

/*
 * moq_group_rx_fin: the stream finished. Returns 0 when it ended at a frame
 * boundary after its header, MOQ_ERR_DECODE otherwise.
 */
int moq_group_rx_fin(const struct moq_group_rx *rx);

/*
 * Accumulates one varint that may straddle chunks (a stream's type).
 */
struct moq_varint_rx {
	uint8_t len;
	uint8_t buf[8];
};

/*
 * moq_varint_rx_push: feed bytes; returns the bytes consumed and sets *@done
 * and *@v once the varint is complete. Never fails.
 */
size_t moq_varint_rx_push(struct moq_varint_rx *vr, const uint8_t *buf, size_t len, bool *done,
                          uint64_t *v);

/* ---- datagrams (lite-05 6.4; dgram_codec.c) ---- */

/* The largest datagram header: three 8-byte varints. */
#define MOQ_DGRAM_HDR_MAX 24

/*
 * moq_dgram_hdr_encode: { subscribe id, group sequence, timestamp } as
 * varints into @buf (@cap bytes); the payload follows to the datagram's end.
 * Returns the length, MOQ_ERR_INVAL (a value > MOQ_VARINT_MAX) or
 * MOQ_ERR_TOO_LARGE (@cap too small).
 * moq_dgram_hdr_decode: the same from a received datagram's @p (@len);
 * returns the header length (the payload is the rest) or MOQ_ERR_DECODE.
 */
int moq_dgram_hdr_encode(uint8_t *buf, size_t cap, uint64_t sub_id, uint64_t seq,
                         uint64_t timestamp);
int moq_dgram_hdr_decode(const uint8_t *p, size_t len, uint64_t *sub_id, uint64_t *seq,
                         uint64_t *timestamp);

#endif /* MOQ_MOQ_CODEC_H */
