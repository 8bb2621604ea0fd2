/* SPDX-License-Identifier: MIT */
/*
 * h3.h: the minimal HTTP/3 a WebTransport session needs, and moq-lite over
 * WebTransport (docs/BINDINGS.md section 1; RFC 9114, RFC 9204, RFC 9220,
 * RFC 9297, draft-ietf-webtrans-http3).
 *
 * Two parts:
 *   - wire helpers without state (varints, SETTINGS, the extended CONNECT
 *     and its response, capsules, datagram and stream prefixes, the error
 *     code mapping): what the unit suite and the fuzz target drive;
 *   - struct moq_wt, one WebTransport session on one QUIC connection whose
 *     ALPN is "h3": it takes the connection's callbacks over
 *     (moq_quic_conn_set_callbacks), runs the control streams and the
 *     CONNECT, strips and adds the WebTransport stream prefixes and hands
 *     the moq-lite session (moq_binding_accept / _connect) exactly the
 *     streams it would see on raw QUIC. Stream ids are the QUIC ones; the
 *     acknowledged offsets of locally opened streams are moved back by the
 *     prefix so the session counts its own bytes. Frame data is written
 *     from the caller's memory as on raw QUIC (fanout stays zero-copy).
 *
 * QPACK: Debian 12's libnghttp3 (0.8) standalone QPACK encoder / decoder,
 * static table only (we announce a dynamic table capacity of 0, open no
 * encoder / decoder streams, and read and drop the peer's).
 *
 * Errors: 0 / a count, or a negative MOQ_ERR_* (common/moq_err.h).
 */
#ifndef MOQ_H3_H3_H
#define MOQ_H3_H3_H

#include <stddef.h>
#include <stdint.h>

#include "moq_err.h"
#include "codec.h"
#include "moq.h"
#include "quic.h"

#ifdef __cplusplus
extern "C" {
#endif

/* RFC 9114, 3.1: the ALPN of HTTP/3, offered beside the moq-lite ALPNs. */
#define MOQ_H3_ALPN "h3"

/* RFC 9114, 7.2: frame types. */
#define MOQ_H3_FRAME_DATA         0x00
#define MOQ_H3_FRAME_HEADERS      0x01
#define MOQ_H3_FRAME_CANCEL_PUSH  0x03
#define MOQ_H3_FRAME_SETTINGS     0x04
#define MOQ_H3_FRAME_PUSH_PROMISE 0x05
#define MOQ_H3_FRAME_GOAWAY       0x07
#define MOQ_H3_FRAME_MAX_PUSH_ID  0x0d
/* RFC 9114, 6.2 / RFC 9204, 4.2: unidirectional stream types. */
#define MOQ_H3_STREAM_CONTROL   0x00
#define MOQ_H3_STREAM_PUSH      0x01
#define MOQ_H3_STREAM_QPACK_ENC 0x02
#define MOQ_H3_STREAM_QPACK_DEC 0x03
/* draft-ietf-webtrans-http3, 4.1 / 4.2: WebTransport stream signals. */
#define MOQ_H3_STREAM_WT_UNI  0x54
#define MOQ_H3_STREAM_WT_BIDI 0x41
/* draft-ietf-webtrans-http3, 5: CLOSE_WEBTRANSPORT_SESSION, DRAIN. */
#define MOQ_H3_CAPSULE_CLOSE_WT 0x2843
#define MOQ_H3_CAPSULE_DRAIN_WT 0x78ae

/* SETTINGS identifiers (BINDINGS.md 1: the server's values; Chrome still
 * checks the old datagram and WebTransport codepoints). */
#define MOQ_H3_SET_QPACK_MAX_TABLE   0x01
#define MOQ_H3_SET_MAX_FIELD_SECTION 0x06
#define MOQ_H3_SET_QPACK_BLOCKED     0x07
#define MOQ_H3_SET_ENABLE_CONNECT    0x08       /* RFC 8441 / 9220 */
#define MOQ_H3_SET_H3_DATAGRAM       0x33       /* RFC 9297 */
#define MOQ_H3_SET_H3_DATAGRAM_OLD   0xffd277   /* draft-ietf-masque-h3-datagram */
#define MOQ_H3_SET_WT_MAX_SESSIONS   0xc671706a /* draft-ietf-webtrans-http3-07+ */
#define MOQ_H3_SET_WT_ENABLE_OLD     0x2b603742 /* draft-02 ENABLE_WEBTRANSPORT */
#define MOQ_H3_SET_WT_MAX_SESS_OLD   0x2b603743 /* draft-02..06 max sessions */
/* draft-ietf-webtrans-http3-13 / -14, 9.2: the newer drafts' settings.
 * -13 announces WebTransport with WT_MAX_SESSIONS at a new codepoint, -14
 * with SETTINGS_WT_ENABLED; both give the session's initial flow-control
 * limits (5.5: streams the peer may open, bytes it may send). */
#define MOQ_H3_SET_WT_ENABLED               0x2c7cf000 /* -14+ SETTINGS_WT_ENABLED */
#define MOQ_H3_SET_WT_MAX_SESS_13           0x14e9cd29 /* -13 SETTINGS_WT_MAX_SESSIONS */
#define MOQ_H3_SET_WT_INIT_MAX_DATA         0x2b61
#define MOQ_H3_SET_WT_INIT_MAX_STREAMS_UNI  0x2b64
#define MOQ_H3_SET_WT_INIT_MAX_STREAMS_BIDI 0x2b65

/* The initial limits we announce. One session per connection, and we send
 * no WT_MAX_STREAMS / WT_MAX_DATA capsules to raise them later, so they are
 * the largest values the draft allows (5.5.1: at most 2^60 streams; a
 * varint: at most 2^62 - 1 bytes): the peer is bounded by QUIC's own flow
 * control (the transport parameters ngtcp2 moves), as on raw QUIC. */
#define MOQ_H3_WT_INIT_STREAMS (1ull << 60)
#define MOQ_H3_WT_INIT_DATA    ((1ull << 62) - 1)

/* RFC 9114, 8.1 / RFC 9204, 6: HTTP/3 and QPACK error codes. */
#define MOQ_H3_NO_ERROR                   0x100
#define MOQ_H3_GENERAL_PROTOCOL_ERROR     0x101
#define MOQ_H3_INTERNAL_ERROR             0x102
#define MOQ_H3_STREAM_CREATION_ERROR      0x103
#define MOQ_H3_CLOSED_CRITICAL_STREAM     0x104
#define MOQ_H3_FRAME_UNEXPECTED           0x105
#define MOQ_H3_FRAME_ERROR                0x106
#define MOQ_H3_ID_ERROR                   0x108
#define MOQ_H3_SETTINGS_ERROR             0x109
#define MOQ_H3_MISSING_SETTINGS           0x10a
#define MOQ_H3_REQUEST_REJECTED           0x10b
#define MOQ_H3_MESSAGE_ERROR              0x10e
#define MOQ_H3_QPACK_DECOMPRESSION_FAILED 0x200
/* draft-ietf-webtrans-http3, 9.5: a stream for a session not (yet) open. */
#define MOQ_H3_WT_BUFFERED_STREAM_REJECTED 0x3994bd84
#define MOQ_H3_WT_SESSION_GONE             0x170d7b68

/* draft-ietf-webtrans-http3, 4.4: application codes in the HTTP/3 space. */
#define MOQ_H3_WT_CODE_FIRST 0x52e4a40fa8dbull
#define MOQ_H3_WT_CODE_LAST  0x52e5ac983162ull

/* The largest HEADERS / capsule we read (CONNECT requests are < 1 KiB;
 * moq-relay's MAX_FRAME_SIZE is 64 KiB). Longer: refused. */
#define MOQ_H3_MAX_FRAME 16384u

/* ------------------------------------------------------------ varints */

/*
 * The RFC 9000, 16 varints are moq/codec's (one implementation for the
 * project); these names keep h3's call sites short.
 *
 * moq_h3_varint_get: decode one varint from @p (@len bytes) into @v; the
 * bytes used, or MOQ_ERR_SHORT.
 */
static inline int moq_h3_varint_get(const uint8_t *p, size_t len, uint64_t *v)
{
	return moq_varint_get(p, len, v);
}

/* moq_h3_varint_len: the encoded length of @v (1, 2, 4, 8; 0 when @v >=
 * 2^62). */
static inline size_t moq_h3_varint_len(uint64_t v)
{
	return moq_varint_len(v);
}

/* moq_h3_varint_put: encode @v at @p, which has room for
 * moq_h3_varint_len(v) bytes; the bytes written (0 when @v >= 2^62). */
static inline size_t moq_h3_varint_put(uint8_t *p, uint64_t v)
{
	int n = moq_varint_put(p, moq_varint_len(v), v);

	return n < 0 ? 0 : (size_t)n;
}

/* ------------------------------------------------------- error codes */

/* moq_h3_code_to_h3: a moq-lite (WebTransport application) code @c in the
 * HTTP/3 space: 0x52e4a40fa8db + c + floor(c / 0x1e). @c is taken modulo
 * 2^32 (WebTransport codes are 32 bits). */
uint64_t moq_h3_code_to_h3(uint64_t c);

/* moq_h3_code_from_h3: the inverse for @h inside [FIRST, LAST] (codepoints
 * reserved for GREASE give the code below them); any other @h is returned
 * as it is (a peer that sent the raw moq-lite code: both forms accepted). */
uint64_t moq_h3_code_from_h3(uint64_t h);

/* ----------------------------------------------------------- settings */

/* The settings a peer sent that matter here (0 = absent). */
struct moq_h3_settings {
	uint64_t qpack_max_table;
	uint64_t qpack_blocked;
	uint64_t max_field_section;
	uint64_t enable_connect;
	uint64_t h3_datagram;     /* 0x33 or the old 0xffd277 */
	uint64_t wt_max_sessions; /* 0xc671706a or the old 0x2b603743 */
	uint64_t wt_enable_old;   /* 0x2b603742 */
	uint64_t wt_enabled;      /* 0x2c7cf000 (draft-14+) */
	uint64_t wt_init_max_data;
	uint64_t wt_init_max_streams_uni;
	uint64_t wt_init_max_streams_bidi;
	uint32_t count; /* identifiers read (unknown and GREASE included) */
};

/* The bytes moq_h3_control_open writes at most. */
#define MOQ_H3_CONTROL_OPEN_MAX 128

/*
 * moq_h3_control_open: the bytes our control stream starts with: the
 * stream type 0x00 and a SETTINGS frame with ENABLE_CONNECT_PROTOCOL,
 * H3_DATAGRAM (both codepoints) and the WebTransport settings of every
 * draft a browser may speak (draft-02's ENABLE and max sessions, -07's max
 * sessions, -13's max sessions, -14's WT_ENABLED, and the initial limits
 * MOQ_H3_WT_INIT_*), or, when @client, the same without
 * ENABLE_CONNECT_PROTOCOL (a server's setting). Writes into @buf (@cap
 * bytes; MOQ_H3_CONTROL_OPEN_MAX suffice). Returns the length, or
 * MOQ_ERR_TOO_LARGE.
 */
int moq_h3_control_open(uint8_t *buf, size_t cap, int client);

/*
 * moq_h3_settings_decode: RFC 9114, 7.2.4: the payload of a SETTINGS
 * frame (@p, @len) into *@out (zeroed first). Returns 0, MOQ_ERR_DECODE
 * (truncated pair), MOQ_ERR_PROTO (a setting repeated, or an HTTP/2
 * setting 0x02..0x05 that RFC 9114, 7.2.4.1 forbids).
 */
int moq_h3_settings_decode(const uint8_t *p, size_t len, struct moq_h3_settings *out);

/*
 * moq_h3_settings_webtransport: nonzero when the peer's SETTINGS @s allow a
 * WebTransport session, in the terms of any draft a browser speaks: HTTP
 * datagrams (RFC 9297, 0x33, or the old 0xffd277) and WebTransport
 * (draft-14's SETTINGS_WT_ENABLED, -07 / -13's WT_MAX_SESSIONS > 0, or
 * draft-02's ENABLE_WEBTRANSPORT = 1, which Chrome 156 sends). moq-relay
 * (web-transport-quinn) refuses a client without them the same way.
 */
int moq_h3_settings_webtransport(const struct moq_h3_settings *s);

/* ------------------------------------------------------ control stream */

/*
 * The peer's control stream (RFC 9114, 6.2.1), read frame by frame for the
 * whole connection, after its stream type: SETTINGS first (else
 * H3_MISSING_SETTINGS), then GOAWAY, MAX_PUSH_ID (from a client only),
 * CANCEL_PUSH, and frames of unknown types, which are skipped without
 * being kept (7.2.8 / 9). A second SETTINGS (7.2.4), DATA, HEADERS,
 * PUSH_PROMISE (7.2.1, 7.2.2, 7.2.5) and HTTP/2's reserved types 0x02,
 * 0x06, 0x08, 0x09 (7.2.8) are H3_FRAME_UNEXPECTED; a frame whose payload
 * is not exactly its fields is H3_FRAME_ERROR (7.1); a GOAWAY id that grows
 * or that is no client bidi stream from a server, a MAX_PUSH_ID that
 * shrinks, are H3_ID_ERROR (5.2, 7.2.7). The stream's end is for the
 * caller (H3_CLOSED_CRITICAL_STREAM, 6.2.1).
 */
struct moq_h3_control {
	int peer_server;  /* the peer is the server */
	int got_settings; /* its SETTINGS were read (in settings) */
	struct moq_h3_settings settings;
	int goaway;          /* a GOAWAY was read: its id in goaway_id */
	uint64_t goaway_id;  /* the smallest so far */
	uint64_t max_push;   /* the largest MAX_PUSH_ID (client), + 1; 0 = none */
	uint8_t hdr[16];     /* the frame header while incomplete */
	uint8_t hl;          /* bytes in hdr */
	uint8_t in_frame;    /* hdr complete: type / left describe the frame */
	uint64_t type, left; /* its type, payload bytes still to come */
	uint8_t *buf;        /* the payload of a frame we read, while incomplete */
	size_t blen, bcap;
	uint64_t failed; /* the HTTP/3 error it failed with (0: none) */
};

/* moq_h3_control_feed's events (a bit set). */
#define MOQ_H3_CTL_SETTINGS 1 /* the SETTINGS just completed */
#define MOQ_H3_CTL_GOAWAY   2 /* a GOAWAY was read (goaway_id) */

/* moq_h3_control_init: an empty reader for the control stream of a peer
 * that is a server when @peer_server. */
void moq_h3_control_init(struct moq_h3_control *p, int peer_server);

/*
 * moq_h3_control_feed: the next @len bytes of the control stream (after its
 * type). Returns the events of these bytes (MOQ_H3_CTL_*, 0: none),
 * MOQ_ERR_PROTO with the HTTP/3 error code to close the connection with in
 * *@h3err (the reader stays failed: later calls return it again), or
 * MOQ_ERR_NOMEM. SETTINGS larger than MOQ_H3_MAX_FRAME are H3_FRAME_ERROR.
 */
int moq_h3_control_feed(struct moq_h3_control *p, const uint8_t *d, size_t len, uint64_t *h3err);

/* moq_h3_control_free: what the reader allocated (it may be fed again
 * after moq_h3_control_init). */
void moq_h3_control_free(struct moq_h3_control *p);

/* ------------------------------------------------------------ frames */

/*
 * moq_h3_frame_head: the type and length of the frame at @p. Returns the
 * header's length (type + length varints), MOQ_ERR_SHORT when @len does
 * not hold the whole header.
 */
int moq_h3_frame_head(const uint8_t *p, size_t len, uint64_t *type, uint64_t *flen);

/* ----------------------------------------------------------- CONNECT */

/* The version a CONNECT without wt-available-protocols gets. moq-relay
 * answers such a request 200 without wt-protocol (rs/moq-native, quinn.rs:
 * "we default to no sub-protocol to support older clients") and then
 * runs the legacy SETUP exchange, which this project does not serve; it
 * runs its default moq-lite version instead, the first of ours (what
 * moq-relay lands on over WebSocket too, BINDINGS.md 2). */
#define MOQ_H3_DEFAULT_VERSION MOQ_LITE_05

/* A parsed extended CONNECT (RFC 9220) request. */
struct moq_h3_request {
	enum moq_version v; /* negotiated from wt-available-protocols, or the
	                     * default (0: refused) */
	int negotiated;     /* v came from wt-available-protocols: the response
	                     * names it in wt-protocol (else it names none) */
	char *path;         /* :path, query included (malloc'd; moq_h3_request_free) */
	size_t path_len;
	char *authority; /* :authority (malloc'd) */
	char *origin;    /* the Origin field (malloc'd), NULL when absent */
	int status;      /* 200: accept; otherwise the HTTP status to refuse with */
	const char *why; /* a constant description of a refusal */
};

/*
 * moq_h3_connect_parse: decode the QPACK field section @block (@len bytes,
 * the payload of the HEADERS frame on the CONNECT stream @sid) with
 * nghttp3's decoder (static table only) and check it (RFC 9220, 3 and
 * draft-ietf-webtrans-http3, 3.2): :method CONNECT, :protocol webtransport,
 * :scheme https, an :authority that is host[:port] (RFC 3986, 3.2; no
 * userinfo, RFC 9110, 4.2.4), a :path starting with '/', no pseudo-header
 * twice or unknown, at most one Origin (kept in out->origin, checked by the
 * caller: moq_h3_origin_allowed); then negotiate `wt-available-protocols`
 * (an RFC 8941 list of strings, the client's preference) against moq-lite
 * 05 / 04 / 03; without the field, MOQ_H3_DEFAULT_VERSION (out->negotiated
 * 0). On return out->status is 200 (accepted, out->v set), 400
 * (malformed request: out->why says which part), 501 (:protocol is not
 * webtransport) or 406 (a list without a moq-lite version of ours). Returns 0 (see
 * out->status), MOQ_ERR_DECODE (QPACK could not be decoded: the peer
 * broke HTTP/3, QPACK_DECOMPRESSION_FAILED), MOQ_ERR_NOMEM.
 */
int moq_h3_connect_parse(int64_t sid, const uint8_t *block, size_t len, struct moq_h3_request *out);

/* moq_h3_request_free: free what moq_h3_connect_parse allocated. */
void moq_h3_request_free(struct moq_h3_request *r);

/*
 * moq_h3_authority_ok: nonzero when @a (@len bytes) is an RFC 3986, 3.2
 * authority without userinfo: a host (reg-name or IPv4 of unreserved,
 * sub-delims and %HH, or an IP literal in brackets) and an optional port of
 * 1 to 5 digits up to 65535.
 */
int moq_h3_authority_ok(const char *a, size_t len);

/*
 * moq_h3_origin_allowed: the operator's `--allowed-origins` (docs/DEPLOY.md)
 * applied to a CONNECT's Origin @origin (@len bytes; NULL: the request had
 * none). @list is a comma-separated list of serialised origins (RFC 6454,
 * 6.2: scheme "://" host [":" port], a trailing '/' tolerated), compared
 * without regard to ASCII case; NULL, "" or an entry "*" allow every
 * origin (moq-relay checks none: the default). A request without Origin is
 * not from a browser page (moqdp-load, moq-native clients, relay links: a
 * browser always sends it, draft-ietf-webtrans-http3, 3.2) and is allowed.
 * Returns 1 (allowed) or 0.
 */
int moq_h3_origin_allowed(const char *list, const char *origin, size_t len);

/*
 * moq_h3_protocols_pick: parse an RFC 8941 list of strings @list and
 * return the first moq-lite version of ours in it (0: none). Returns
 * MOQ_ERR_DECODE for a list that is not an sf-list of strings.
 */
int moq_h3_protocols_pick(const char *list, size_t len);

/*
 * moq_h3_response_encode: a HEADERS frame (type, length, QPACK field
 * section) with :status @status and, for 200, sec-webtransport-http3-draft:
 * draft02 and wt-protocol: "moq-lite-0N" for @v (none when @v is 0). Returns a malloc'd buffer
 * (*@out_len bytes) or NULL (memory).
 */
uint8_t *moq_h3_response_encode(int64_t sid, int status, enum moq_version v, size_t *out_len);

/*
 * moq_h3_request_encode: (client) a HEADERS frame with the extended
 * CONNECT for https://@authority@path offering moq-lite 05, 04, 03 in
 * wt-available-protocols. Returns a malloc'd buffer or NULL.
 */
uint8_t *moq_h3_request_encode(int64_t sid, const char *authority, const char *path,
                               size_t *out_len);

/*
 * moq_h3_response_parse: (client) decode the response field section
 * @block; *@status gets :status, *@v the version of wt-protocol (0 when
 * absent or not ours). Returns 0, MOQ_ERR_DECODE.
 */
int moq_h3_response_parse(int64_t sid, const uint8_t *block, size_t len, int *status,
                          enum moq_version *v);

/* ---------------------------------------------------------- capsules */

/*
 * moq_h3_capsule_get: RFC 9297, 3.2: the capsule at @p: *@type, its value
 * at *@val (*@vlen bytes, inside @p). Returns the capsule's total length,
 * MOQ_ERR_SHORT (incomplete), MOQ_ERR_TOO_LARGE (> MOQ_H3_MAX_FRAME).
 */
int moq_h3_capsule_get(const uint8_t *p, size_t len, uint64_t *type, const uint8_t **val,
                       size_t *vlen);

/*
 * moq_h3_close_capsule: a DATA frame carrying CLOSE_WEBTRANSPORT_SESSION
 * with the 32-bit @code and @reason (truncated to 1024 bytes, the draft's
 * bound) into @buf (@cap). Returns the length, or MOQ_ERR_TOO_LARGE.
 */
int moq_h3_close_capsule(uint8_t *buf, size_t cap, uint32_t code, const char *reason,
                         size_t reason_len);

/* ----------------------------------------------------------- prefixes */

/*
 * moq_h3_stream_prefix: the bytes a WebTransport stream of session
 * @session_id starts with: 0x54 + id (uni) or 0x41 + id (bidi), into @buf
 * (16 bytes suffice). Returns the length.
 */
size_t moq_h3_stream_prefix(uint8_t *buf, int bidi, uint64_t session_id);

/*
 * moq_h3_datagram_prefix: RFC 9297, 2.1: an HTTP datagram of session
 * @session_id starts with the quarter stream id. Writes it into @buf
 * (8 bytes suffice); returns the length.
 */
size_t moq_h3_datagram_prefix(uint8_t *buf, uint64_t session_id);

/*
 * moq_h3_datagram_parse: the session id of the HTTP datagram @p (@len) in
 * *@session_id, the payload offset returned. MOQ_ERR_DECODE when the
 * prefix is truncated or names no client-bidi stream.
 */
int moq_h3_datagram_parse(const uint8_t *p, size_t len, uint64_t *session_id);

/* ------------------------------------------------- WebTransport sessions */

struct moq_wt;

/* Counters of one worker's WebTransport layer (moq_wt_stats). */
struct moq_wt_stats {
	uint64_t sessions;         /* CONNECTs accepted */
	uint64_t refused;          /* CONNECTs answered with a 4xx / 5xx */
	uint64_t h3_errors;        /* connections closed with an HTTP/3 error */
	uint64_t streams_in;       /* WebTransport streams the peers opened */
	uint64_t streams_rejected; /* ... before their session was open, or bad prefixes */
	uint64_t capsules_close;   /* CLOSE_WEBTRANSPORT_SESSION received */
	uint64_t datagrams_dropped;
	uint64_t held;           /* CONNECTs that came before the client's SETTINGS (held) */
	uint64_t refused_origin; /* ... of refused: 403, an Origin not allowed */
};

/* A server's WebTransport settings (moq_wt_accept; zero = defaults). */
struct moq_wt_cfg {
	/* moq_h3_origin_allowed's list: a CONNECT from another Origin gets
	 * 403 (counted in refused_origin). NULL / "" = every origin. Borrowed:
	 * it must outlive the connections. */
	const char *allowed_origins;
};

/*
 * moq_wt_accept: (server) take over connection @c whose handshake just
 * negotiated MOQ_H3_ALPN (call from the endpoint's established callback).
 * Opens the control stream with our SETTINGS and waits for the CONNECT on
 * the client's first bidi stream; an accepted CONNECT starts a moq-lite
 * session on @n (moq_binding_accept: the negotiated version, the :path as
 * the session root and the `jwt` query as its token). @stats (may be NULL)
 * is the worker's counters, which must outlive @c. @cb: the callbacks @c
 * gets, NULL = moq_wt_quic_callbacks(); a caller that must see the
 * connection close passes a copy with conn_closed wrapped (calling the
 * original). @cfg (may be NULL: defaults) is read now and its strings
 * later (they must outlive @c). Returns the session object (also the
 * connection's user pointer from now on), or NULL when memory ran out
 * (then @c is closed with H3_INTERNAL_ERROR).
 */
struct moq_wt *moq_wt_accept(struct moq_quic_conn *c, struct moq_node *n,
                             struct moq_wt_stats *stats, const struct moq_quic_callbacks *cb,
                             const struct moq_wt_cfg *cfg);

/* How long a server holds a CONNECT that came before the client's SETTINGS
 * (draft-ietf-webtrans-http3, 3.1: it cannot be answered without them):
 * after this the connection is closed with H3_MISSING_SETTINGS. Browsers
 * send SETTINGS in their first flight, but a starved Chromium (CI, three busy
 * loops beside it on 2 cores) was seen past 2 s; 10 s, the auth deadline,
 * still ends a held CONNECT long before the idle timeout. */
#define MOQ_WT_SETTINGS_WAIT_NS (10000000000ull)

/*
 * moq_wt_timers: end the wait of the CONNECTs this thread holds for their
 * client's SETTINGS once MOQ_WT_SETTINGS_WAIT_NS passed (counted from the
 * first call that sees one: call it every poll, with the poll's clock).
 */
void moq_wt_timers(uint64_t now);

/* moq_wt_quic_callbacks: the QUIC callbacks of a connection this layer
 * runs (user pointer: its struct moq_wt). */
const struct moq_quic_callbacks *moq_wt_quic_callbacks(void);

/*
 * moq_wt_connect: (client) take over @c (just made by moq_quic_connect,
 * offering MOQ_H3_ALPN): at the handshake it opens the control stream and
 * sends the CONNECT for https://@authority@path (@path with any query);
 * the 200 response starts a moq-lite client session on @n
 * (moq_binding_connect with @role; the version the server chose) whose
 * user pointer is @user (moq_session_user): the node's session callbacks
 * then run as for moq_node_connect's sessions. When the connection ends
 * before a session began (handshake, refusal), @failed (may be NULL) is
 * called with @user. Returns the object, or NULL (memory).
 */
struct moq_wt *moq_wt_connect(struct moq_quic_conn *c, struct moq_node *n, const char *authority,
                              const char *path, int role, void *user, void (*failed)(void *user));

/*
 * moq_wt_dial: moq_quic_connect from @ep (@local -> @remote; the endpoint
 * offers MOQ_H3_ALPN) and moq_wt_connect on the new connection, the rest as
 * there. Returns the connection, or NULL with *@err set (the connection, if
 * made, closed).
 */
struct moq_quic_conn *moq_wt_dial(struct moq_quic_endpoint *ep, const struct moq_quic_addr *local,
                                  const struct moq_quic_addr *remote, struct moq_node *n,
                                  const char *authority, const char *path, int role, void *user,
                                  void (*failed)(void *user), uint64_t now, int *err);

/* moq_wt_session: the moq-lite session on @w, NULL before the CONNECT
 * succeeded or after it ended. */
struct moq_session *moq_wt_session(const struct moq_wt *w);

/* moq_wt_conn_session: the moq-lite session of a connection taken over
 * by this layer (its ALPN is MOQ_H3_ALPN), else NULL. */
struct moq_session *moq_wt_conn_session(const struct moq_quic_conn *c);

#ifdef __cplusplus
}
#endif

#endif /* MOQ_H3_H3_H */
