/* SPDX-License-Identifier: MIT */
/*
 * web.h: the relay's TCP side (BINDINGS.md, sections 2 and 3).
 *
 *  - struct moq_qmux: qmux-01 (draft-ietf-quic-qmux-01) as used by @moq/qmux
 *    over WebSocket, no I/O: QX_TRANSPORT_PARAMETERS first, QUIC frames
 *    (STREAM, RESET_STREAM, STOP_SENDING, MAX_*, *_BLOCKED, CLOSE, QX_PING)
 *    in records of at most the peer's max_record_size, QUIC flow control
 *    (connection and stream windows, stream counts), keep-alive and idle
 *    timeout. Stream data goes out by reference (zero copy): a record is
 *    returned as iovecs into the writer's memory, and a stream's bytes count
 *    as acknowledged once the record carrying them has been written to the
 *    socket / TLS layer (moq_qmux_record_done).
 *  - struct moq_web: one worker's HTTP/1.1 listener on TCP (plain, and TLS
 *    when the first byte is a TLS handshake record): GET /health,
 *    /certificate.sha256, /announced/<prefix>, /fetch/<broadcast>/<track>,
 *    and the WebSocket upgrade to qmux-01.moq-lite-05 / -04 / -03, whose
 *    moq-lite sessions run on the worker's node (moq.h, bindings).
 *
 * Threads: a struct moq_qmux / moq_web is used by one thread (a worker).
 * Errors: 0 / counts, or negative MOQ_ERR_* (common/moq_err.h).
 */
#ifndef MOQ_WEB_WEB_H
#define MOQ_WEB_WEB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "moq_err.h"

struct moq_node;
struct moq_cache;
struct moq_auth;
struct moq_session;

/* --- qmux-01 ------------------------------------------------------------ */

/* qmux-01, Transport parameters: the default and least max_record_size. */
#define MOQ_QMUX_MIN_RECORD 16382u
/* The largest record the engine builds, whatever the peer's max_record_size
 * (a peer may advertise up to 2^62-1): every peer takes this much, and the
 * writer's buffers (a TLS or masked copy) are sized for it. */
#define MOQ_QMUX_MAX_SEND_RECORD MOQ_QMUX_MIN_RECORD
/* QUIC transport error codes (RFC 9000, 20.1) a qmux close carries. */
#define MOQ_QMUX_FLOW_CONTROL_ERROR        0x03u
#define MOQ_QMUX_STREAM_LIMIT_ERROR        0x04u
#define MOQ_QMUX_STREAM_STATE_ERROR        0x05u
#define MOQ_QMUX_FINAL_SIZE_ERROR          0x06u
#define MOQ_QMUX_FRAME_ENCODING_ERROR      0x07u
#define MOQ_QMUX_TRANSPORT_PARAMETER_ERROR 0x08u
#define MOQ_QMUX_PROTOCOL_VIOLATION        0x0au

/* Transport parameters (qmux-01 uses QUIC's ids; BINDINGS.md, section 2). */
struct moq_qmux_params {
	uint64_t idle_timeout_ms;             /* 0x01 */
	uint64_t max_data;                    /* 0x04 */
	uint64_t max_stream_data_bidi_local;  /* 0x05 */
	uint64_t max_stream_data_bidi_remote; /* 0x06 */
	uint64_t max_stream_data_uni;         /* 0x07 */
	uint64_t max_streams_bidi;            /* 0x08 */
	uint64_t max_streams_uni;             /* 0x09 */
	uint64_t max_record_size;             /* 0x0571c59429cd0845 */
};

/* What the engine tells the layer above (a moq-lite session). All but
 * closed may be NULL. They run inside moq_qmux_recv_record, _timers,
 * _record_done or the stream calls. */
struct moq_qmux_callbacks {
	void (*stream_data)(void *user, int64_t sid, const uint8_t *d, size_t len, int fin);
	void (*stream_reset)(void *user, int64_t sid, uint64_t code);
	void (*stream_stop_sending)(void *user, int64_t sid, uint64_t code);
	/* total bytes of @sid written out (the caller may release them) */
	void (*stream_acked)(void *user, int64_t sid, uint64_t total);
	/* both directions of @sid are done; its memory is released */
	void (*stream_closed)(void *user, int64_t sid);
	/* more may be written / opened (credit arrived, a record went out) */
	void (*writable)(void *user);
	/* the session ended: @code with @app (APPLICATION_CLOSE) or a transport
	 * error (CONNECTION_CLOSE), @local: this side closed it. Called once. */
	void (*closed)(void *user, uint64_t code, int app, int local);
};

struct moq_qmux_cfg {
	int server;                   /* 1: stream ids with bit 0 set are ours */
	struct moq_qmux_params local; /* ours; all zero = the defaults of BINDINGS.md */
	const struct moq_qmux_callbacks *cb;
	void *user;
	uint64_t ping_ns; /* keep-alive after this long without sending, 0 = 5 s */
};

struct moq_qmux;

/* Counters of an engine. */
struct moq_qmux_stats {
	uint64_t records_in, records_out, bytes_in, bytes_out;
	uint64_t streams_opened_local, streams_opened_remote;
	uint64_t pings_sent, pings_answered;
	uint64_t unacked; /* stream bytes accepted and not yet written out */
};

/* moq_qmux_default_params: the parameters BINDINGS.md lists (idle 30 s,
 * 1 MiB, 256 KiB per stream, 100 streams, max_record_size 16382). */
void moq_qmux_default_params(struct moq_qmux_params *p);

/*
 * moq_qmux_new: an engine; its transport parameters are the first frame of
 * its first record. Returns NULL for a bad @cfg (no callbacks,
 * max_record_size below 16382) or when memory is short.
 */
struct moq_qmux *moq_qmux_new(const struct moq_qmux_cfg *cfg, uint64_t now);

/* moq_qmux_free: free the engine (no callback). NULL is a no-op. */
void moq_qmux_free(struct moq_qmux *q);

/*
 * moq_qmux_recv_record: one record (a WebSocket binary message: frames
 * concatenated). Returns 0, or a negative MOQ_ERR_PROTO when the peer broke
 * the protocol: the engine is then closing with a CONNECTION_CLOSE carrying
 * the transport error (moq_qmux_close_code) that the next record holds, and
 * the closed callback has run. MOQ_ERR_CLOSED after close.
 */
int moq_qmux_recv_record(struct moq_qmux *q, const uint8_t *rec, size_t len, uint64_t now);

/*
 * moq_qmux_next_record: the next record to send, as @iov (up to @n >= 4
 * entries): iov[0] the frame headers in the engine's memory, the rest stream
 * payload in the writer's memory. Returns the number of iovecs (0: nothing
 * to send), the record's size in *@len: at most the smaller of the peer's
 * max_record_size and MOQ_QMUX_MAX_SEND_RECORD, every frame whole. The
 * record stays the engine's current one (the same is returned again) until
 * moq_qmux_record_done. MOQ_ERR_INVAL: @n below 4 or the record's iovecs;
 * MOQ_ERR_TOO_LARGE: a frame did not fit (a bug: the caller closes).
 */
int moq_qmux_next_record(struct moq_qmux *q, struct iovec *iov, unsigned n, size_t *len);

/* moq_qmux_record_done: the current record was written out whole: its
 * stream bytes are acknowledged (stream_acked). */
void moq_qmux_record_done(struct moq_qmux *q, uint64_t now);

/*
 * moq_qmux_timers: keep-alive QX_PING after ping_ns without sending; close
 * after the idle timeout (min of both sides' nonzero values) without
 * receiving (closed callback, code 0, not app). Returns 1 when closed now.
 */
int moq_qmux_timers(struct moq_qmux *q, uint64_t now);

/* moq_qmux_stream_open: a local stream (QUIC ids). Returns 0 with *@sid,
 * MOQ_ERR_AGAIN (the peer's stream count, 0 until its parameters arrive;
 * writable tells when more), MOQ_ERR_STATE (closing), MOQ_ERR_NOMEM. */
int moq_qmux_stream_open(struct moq_qmux *q, int bidi, int64_t *sid);

/*
 * moq_qmux_stream_write: queue @iov (NOT copied: valid until stream_acked
 * covers it or the stream is reset / closed) and FIN. Returns the bytes
 * accepted (fewer when the stream's queue of references is full),
 * MOQ_ERR_NOTFOUND, MOQ_ERR_CLOSED (after FIN or reset), MOQ_ERR_STATE.
 */
long moq_qmux_stream_write(struct moq_qmux *q, int64_t sid, const struct iovec *iov, size_t n,
                           int fin);

/* moq_qmux_stream_reset / _stop_sending: RESET_STREAM / STOP_SENDING with
 * @code. Returns 0 or MOQ_ERR_NOTFOUND. */
int moq_qmux_stream_reset(struct moq_qmux *q, int64_t sid, uint64_t code);
int moq_qmux_stream_stop_sending(struct moq_qmux *q, int64_t sid, uint64_t code);

/* moq_qmux_close: APPLICATION_CLOSE with @code; the closed callback runs
 * during the call. The close frame is the next (last) record. */
void moq_qmux_close(struct moq_qmux *q, uint64_t code);

/* moq_qmux_abort: CONNECTION_CLOSE with transport error @code (the layer
 * below found the peer's input bad, e.g. an oversized WebSocket message). */
void moq_qmux_abort(struct moq_qmux *q, uint64_t code);

/* moq_qmux_closing: nonzero once closed (the last record may still be due). */
int moq_qmux_closing(const struct moq_qmux *q);

/* moq_qmux_close_code: the code of the close (sent or received). */
uint64_t moq_qmux_close_code(const struct moq_qmux *q);

/* moq_qmux_peer_params: the peer's parameters (NULL before they arrived). */
const struct moq_qmux_params *moq_qmux_peer_params(const struct moq_qmux *q);

/* moq_qmux_get_stats: counters into @out. */
void moq_qmux_get_stats(const struct moq_qmux *q, struct moq_qmux_stats *out);

/* --- WebSocket (RFC 6455) helpers --------------------------------------- */

/* moq_ws_accept_key: Sec-WebSocket-Accept for @key (RFC 6455, 4.2.2) into
 * @out (29 bytes with the NUL). Returns 0 or MOQ_ERR_INVAL. */
int moq_ws_accept_key(const char *key, size_t len, char out[29]);

/* moq_ws_header: a server frame header (FIN, @opcode, unmasked, @len) into
 * @out (up to 10 bytes). Returns its length. */
size_t moq_ws_header(uint8_t out[10], unsigned opcode, uint64_t len);

/*
 * moq_ws_select: the subprotocol the relay accepts from the offered
 * Sec-WebSocket-Protocol list @offered (comma separated, possibly several
 * header lines joined by commas): qmux-01.moq-lite-05, then -04, then -03.
 * Returns the moq version (enum moq_version of codec.h), with the accepted
 * token in *@name, or MOQ_ERR_NOTFOUND.
 */
int moq_ws_select(const char *offered, size_t len, const char **name);

/* --- the HTTP listener --------------------------------------------------- */

struct moq_web;

struct moq_web_cfg {
	struct moq_node *node;          /* the worker's node: sessions, origin (required
	                          * with addresses; a client-only @w may have none) */
	struct moq_cache *cache;        /* /fetch reads it (the node's cache) */
	struct moq_auth *auth;          /* NULL: no auth */
	const struct sockaddr *addr[8]; /* bind TCP here (the relay's addresses, its port) */
	socklen_t addrlen[8];
	unsigned int naddr;
	uint32_t max_conns;         /* TCP connections of this listener, 0 = 256 */
	const uint8_t *fingerprint; /* SHA-256 of the certificate's DER (32), NULL: none */
	void *tls_ctx;              /* a WOLFSSL_CTX for TLS (borrowed), NULL: plain only */
	const char *static_dir;     /* /demo/ files are served from here, NULL: none */
	/* A connection with output pending that takes no byte of it for this
	 * long is closed (stats closes_slow): a reader that stopped reading
	 * holds no slot, buffer or cache group for longer. 0 = 20 s. */
	uint64_t write_timeout_ns;
	/* /fetch requests in progress (each pins one cache track and group;
	 * a connection runs at most one); beyond: 503. 0 = 64. */
	uint32_t max_fetches;
	/* --allowed-origins (common/moq_origin.h, as WebTransport's): a
	 * WebSocket upgrade with an Origin not in the list gets 403 (stats
	 * refused_origin); one without Origin is allowed. NULL / "" = every
	 * origin. Borrowed: it must outlive the listener. */
	const char *allowed_origins;
	/* GET /status/metrics (status.c; the /status page polls it): write the
	 * relay's Prometheus text into @buf (@len bytes) and return its length,
	 * or a negative MOQ_ERR_* when it does not fit. Called on the thread
	 * that polls the listener. NULL: /status/metrics answers 404. */
	int (*metrics)(void *arg, char *buf, size_t len);
	void *metrics_arg;
	/* The relay's first listener: refuse an address whose TCP port another
	 * process listens on (every listener binds with SO_REUSEPORT, so a
	 * second relay's would get half the connections without a word). The
	 * later workers' listeners share the port with the first. */
	int port_must_be_free;
};

/* Counters of a listener. */
struct moq_web_stats {
	uint64_t conns, conns_total, conns_refused; /* open / accepted / over max_conns */
	uint64_t requests, ws_sessions, ws_open, tls_conns;
	uint64_t closes_protocol; /* WebSocket sessions closed for bad input */
	uint64_t closes_slow;     /* connections closed at the write deadline */
	uint64_t fetches;         /* /fetch requests in progress now (pinned groups) */
	uint64_t fetches_refused; /* /fetch refused past max_fetches (503) */
	uint64_t refused_origin;  /* WebSocket upgrades refused 403 (allowed_origins) */
	uint64_t bytes_in, bytes_out;
	/* --auth-url: HTTP requests asked of the auth server, answered from
	 * the listener's cache (http.c) */
	uint64_t auth_asked, auth_cache_hits;
};

/*
 * moq_web_create: bind the TCP listener(s) (SO_REUSEPORT: every worker has
 * its own, the kernel spreads connections). Returns NULL with one line in
 * @err.
 */
struct moq_web *moq_web_create(const struct moq_web_cfg *cfg, char *err, size_t errlen);

/* moq_web_poll: accept, read, write, run timers (non-blocking; one
 * epoll_wait with timeout 0). Returns the events handled. */
int moq_web_poll(struct moq_web *w, uint64_t now);

/*
 * moq_web_connect: (client; moqdp-load --transport ws) open a WebSocket to
 * @to (the relay's address and port, TCP), offering qmux-01.moq-lite-05 and
 * -04 on request target "/" + @path (may carry "?jwt="); once the upgrade
 * is answered and the relay's transport parameters are in, a session on
 * @node (moq.h, moq_binding_connect, @role) with @user as its user pointer:
 * @node's session_ready callback follows at its next poll. A @w made with
 * naddr 0 listens on nothing. Returns 0, MOQ_ERR_INVAL, MOQ_ERR_NOMEM,
 * MOQ_ERR_IO.
 */
int moq_web_connect(struct moq_web *w, struct moq_node *node, const struct sockaddr *to,
                    socklen_t tolen, const char *path, int role, void *user);

/* moq_web_set_tls: new TLS connections use @tls_ctx and @fingerprint
 * (certificate reload). */
void moq_web_set_tls(struct moq_web *w, void *tls_ctx, const uint8_t *fingerprint);

/*
 * moq_web_drain: the relay is draining (SIGQUIT): from now on GET /health
 * answers 503 "draining\n"; with @close, every WebSocket session the
 * listener accepted is also closed now (qmux APPLICATION_CLOSE 0, then
 * WebSocket Close 1000; its moq-lite session ends). The GOAWAY before it
 * is the node's (moq.h, moq_node_goaway). Returns the sessions closed.
 */
int moq_web_drain(struct moq_web *w, int close);

/* moq_web_stats: counters into @out. */
void moq_web_stats(const struct moq_web *w, struct moq_web_stats *out);

/* moq_web_fd: the listener's epoll descriptor (readable when moq_web_poll
 * has events), for a caller's own epoll set. */
int moq_web_fd(const struct moq_web *w);

/* moq_web_port: the bound TCP port of the first address (host order). */
unsigned int moq_web_port(const struct moq_web *w);

/* moq_web_destroy: close every connection (sessions end) and the listener. */
void moq_web_destroy(struct moq_web *w);

/*
 * moq_web_req_parse: what the listener would answer to request bytes @d
 * from the request alone (no node, no socket; tests and the fuzz target):
 * the HTTP status (101 for an acceptable WebSocket upgrade, 200 for a
 * /health, /certificate.sha256 or a well-formed /announced or /fetch, 400,
 * 404, 405, 414, 431, ...), 0 when the request is incomplete.
 */
int moq_web_req_parse(const uint8_t *d, size_t n);

/*
 * moq_web_ws_parse: what a WebSocket connection of the listener makes of
 * client bytes @d (no node, no socket; tests and the fuzz target): the
 * upgrade done, frames parsed as from a client (masked; binary messages are
 * qmux records for a server engine, control frames answered), every record
 * the engine builds taken at once. @d[0] sets how many bytes each read
 * brings (1 to 256), the rest are the bytes. Returns 0, MOQ_ERR_PROTO when
 * the connection closed for bad input, MOQ_ERR_NOMEM.
 */
int moq_web_ws_parse(const uint8_t *d, size_t n);

/* moq_web_tls_ctx_new: a TLS (1.2 / 1.3) server context for TCP with the
 * certificate and key of the QUIC context @quic_ctx (a WOLFSSL_CTX).
 * Returns NULL on failure. moq_web_tls_ctx_free frees it. */
void *moq_web_tls_ctx_new(void *quic_ctx);
void moq_web_tls_ctx_free(void *ctx);

#endif /* MOQ_WEB_WEB_H */
