/* SPDX-License-Identifier: MIT */
/*
 * web_int.h: what the files of web/ share (not a public header): a TCP
 * connection (struct wconn) and the listener (struct moq_web), their
 * bounds, and the functions one file gives the others. web.h is the API.
 *
 *   conn.c     the listener, connections, buffers, poll loop and deadlines
 *   http.c     the HTTP request: parsing, routing, query and path decoding
 *   ws.c       WebSocket (RFC 6455): handshake pieces, framing in and out
 *   binding.c  qmux-01 records as a moq-lite binding (moq.h)
 *   fetch.c    /announced and /fetch (chunked bodies)
 *   static.c   /demo/ files
 *   client.c   the client side (moq_web_connect)
 */
#ifndef MOQ_WEB_WEB_INT_H
#define MOQ_WEB_WEB_INT_H

#include "web.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <http_parser.h>
#include <wslay/wslay.h>
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include "cache.h"

struct moq_auth_grant;
struct moq_auth_req;

/* An Authorization header's room: "Bearer " and a token of auth.h's bound. */
#define MOQ_AUTH_MAX_TOKEN_HDR (4096 + 16)
/* --auth-url answers for /announced, /fetch, /status/metrics kept per
 * listener (http.c), each for its grant's lifetime: until its `expires`, its
 * `revalidate` cadence, and at most AUTH_CACHE_MAX_NS. */
#define AUTH_CACHE_N      64
#define AUTH_CACHE_MAX_NS 60000000000ull
/* A parked request waits this long past the auth client's own deadline
 * (authurl.h, 10 s) before it is answered 504. */
#define AUTH_PARK_SLACK_NS 1000000000ull

struct web_auth_entry {
	char *key; /* "<path>?<query>\n<authorization>"; NULL = free */
	struct moq_auth_grant *grant;
	uint64_t until; /* poll clock */
};

/* Request line + headers of one request (431 beyond). */
#define REQ_MAX 8192
/* Bytes read per connection per call. */
#define IN_CAP 16384
/* Responses, WebSocket control frames, /fetch bodies. */
#define OUT_CAP 65536
/* The record buffer: our max_record_size. */
#define REC_CAP MOQ_QMUX_MIN_RECORD
/* A record going out in one piece (TLS: copied for wolfSSL_write; client:
 * masked): its WebSocket header (RFC 6455, 5.2: up to 10 bytes, a client's
 * 4-byte masking key) and at most MOQ_QMUX_MAX_SEND_RECORD bytes. */
#define WS_HDR_MAX  14
#define REC_OUT_CAP (MOQ_QMUX_MAX_SEND_RECORD + WS_HDR_MAX)
/* iovecs of one record (qmux.c keeps up to 64 segments a stream). */
#define REC_IOV 68
/* A slow TCP subscriber is bounded like a slow QUIC one (moq.h, fanout's
 * budget max(2 cwnd, 64 KiB)): this is the "cwnd" get_info reports. */
#define WS_WINDOW (64u << 10)
/* BINDINGS.md, section 3: /fetch waits this long for the broadcast (and a
 * live group this long for its next bytes). */
#define FETCH_WAIT_NS 30000000000ull
/* /fetch requests in progress per listener (each pins a cache group),
 * unless cfg.max_fetches says. */
#define FETCH_MAX 64
/* A peer that takes no byte of pending output for this long is closed
 * (cfg.write_timeout_ns 0). */
#define WRITE_TIMEOUT_NS 20000000000ull
/* The largest /announced body (a snapshot): 4,096 names of 256 bytes. */
#define ANN_MAX (1u << 20)
/* A connection that sends no complete request within this long is closed. */
#define REQ_TIMEOUT_NS 10000000000ull
/* qmux timers and fetch progress are looked at this often. */
#define TICK_NS 20000000ull
/* RFC 6455, 7.4.1 */
#define WS_CLOSE_NORMAL   1000
#define WS_CLOSE_PROTOCOL 1002
#define WS_CLOSE_DATA     1003
#define WS_CLOSE_TOO_BIG  1009

enum cstate {
	C_SNIFF,
	C_TLS_HS,
	C_HTTP,
	C_WS,
	C_FETCH,
	C_FILE,
	C_BODY,
	C_DONE,
	C_CONNECTING,
	C_WS_HS,
	C_AUTH /* --auth-url: the request waits for the auth server (http.c) */
};

struct wconn {
	struct moq_web *w;
	struct wconn *next, *prev; /* all connections */
	struct wconn *dnext;       /* dirty list */
	int fd, dirty, dead;
	enum cstate st;
	WOLFSSL *ssl;
	uint64_t t0;
	/* input */
	uint8_t in[IN_CAP];
	size_t inlen, inoff;
	/* output bytes (responses, control frames); @tls_pend: the length of a
	 * wolfSSL_write to repeat (WANT_WRITE) */
	uint8_t out[OUT_CAP];
	size_t outlen, outoff, tls_pend;
	int close_after;
	/* HTTP request */
	http_parser hp;
	size_t req_bytes;
	int req_done, last_was_value;
	char url[2048];
	size_t urllen;
	char field[64];
	size_t fieldlen;
	int hdr; /* which header the value belongs to */
	char upgrade[64], key[64], version[8], proto[1024];
	size_t upgradelen, keylen, versionlen, protolen;
	char origin[256]; /* the Origin field (has_origin: the request had one) */
	size_t originlen;
	int has_origin;
	/* Authorization: Bearer <token> (authzlen 0: none; the value cut at
	 * the buffer is refused as too long) and Host (request.rs server_name
	 * on plain HTTP) */
	char authz[MOQ_AUTH_MAX_TOKEN_HDR];
	size_t authzlen;
	char host[256];
	size_t hostlen;
	/* --auth-url admission of this request (http.c): its lifecycle with
	 * the server (ended when the connection goes), the grant it gave (taken
	 * by web_auth_grant), the state (0 not asked, 1 waiting, 2 answered) */
	struct moq_auth_req *areq;
	struct moq_auth_grant *agrant;
	int aust, aresult;
	uint64_t adeadline, at0_real;
	/* WebSocket + qmux */
	wslay_frame_context_ptr wsf;
	uint64_t frame_left;
	int frame_op, in_msg, close_app;
	unsigned int ws_code;
	uint8_t ctl[125];
	size_t ctllen;
	uint8_t rec[REC_CAP];
	size_t reclen;
	struct moq_qmux *q;
	struct moq_session *s;
	int sclose, sclose_local, accepted, ws_version;
	uint64_t sclose_code;
	int ws_close_sent;
	/* the record being written: ws header + the record's iovecs */
	uint8_t wshdr[10];
	struct iovec riov[REC_IOV + 1];
	unsigned int rn;
	size_t rtot, rdone;
	int rbusy;
	uint8_t *tlsrec; /* TLS: the record in one piece for wolfSSL_write */
	/* /fetch */
	char fb[1024], ftrack[256];
	size_t fblen, ftlen;
	uint64_t fseq, fdeadline;
	int flatest, fsent_hdr;
	struct moq_cache_track *ftr;
	struct moq_cache_group *fg;
	struct moq_cache_cursor fcur;
	struct moq_cache_frame fv; /* the view being sent, from @fvdone on */
	uint32_t fvdone;
	int fvhave, fpinned;
	int fheld;       /* moq_node_track_hold taken: released with the fetch */
	uint64_t fbytes; /* payload bytes sent */
	/* /announced: the body, sent in chunks (body_step) */
	uint8_t *body;
	size_t bodylen, bodycap, bodyoff;
	int body_cut, anon;
	/* output pending and no byte written since (0: none pending); the
	 * bytes written (@wout) when last looked at */
	uint64_t wblocked, wbytes, wout;
	/* /demo/ files (cfg.static_dir) */
	int file_fd;
	/* the client side (moq_web_connect): frames out are masked (RFC 6455,
	 * 5.3), so a record is copied once into maskbuf */
	int client, role;
	struct moq_node *node;
	void *user;
	uint8_t *maskbuf;
	uint32_t mask_seed;
};

struct moq_web {
	struct moq_web_cfg cfg;
	int lfd[8];
	unsigned int nl;
	int ep;
	struct wconn *conns;
	struct wconn *dirty;
	uint64_t next_tick;
	uint8_t fp[32];
	int has_fp;
	int dry;      /* moq_web_req_parse: decide, touch no node, no socket */
	int draining; /* moq_web_drain: /health answers 503 */
	struct moq_web_stats st;
	struct web_auth_entry acache[AUTH_CACHE_N];
};

/* --- conn.c: output and the connection's life ---------------------------- */

/* web_mark: @c has something to do (the poll services it). */
void web_mark(struct wconn *c);
/* web_out_room: free bytes of the output buffer. */
int web_out_room(const struct wconn *c);
/* web_out_put: append @n bytes to the output buffer (a connection that
 * would overrun it is closed). */
void web_out_put(struct wconn *c, const void *p, size_t n);
/* web_respond / _text: a whole response (Connection: close); the
 * connection is done once it is out. */
void web_respond(struct wconn *c, int code, const char *reason, const char *ctype, const char *body,
                 size_t blen);
void web_respond_text(struct wconn *c, int code, const char *reason, const char *body);
/* web_raw_write: @n bytes to the socket or TLS. Returns the bytes taken,
 * 0 would block, -1 gone. */
ssize_t web_raw_write(struct wconn *c, const uint8_t *p, size_t n);
/* web_out_flush: the output buffer out. Returns 1 all out, 0 blocked, -1
 * gone. */
int web_out_flush(struct wconn *c);
/* web_conn_read: read what the socket has into c->in. Returns the bytes
 * read, 0 would block, -1 closed / failed. */
ssize_t web_conn_read(struct wconn *c);
/* web_conn_free: close @c (its session ends) and free it. */
void web_conn_free(struct wconn *c);
/* web_conn_link: @c (calloc'd, its fd in the epoll set) joins @w's
 * connections (counted). */
void web_conn_link(struct moq_web *w, struct wconn *c);

/* --- http.c: the request ------------------------------------------------- */

/* web_http_feed: parse what c->in holds; answer once the request is complete
 * or bad. Returns 1 when answered, 0 when more is needed. */
int web_http_feed(struct wconn *c, uint64_t now);
/* web_query_get: the value of key @k in query @q (@qn bytes): the last
 * non-empty one, form-decoded into @out (@cap bytes, NUL-terminated), keys
 * compared form-decoded: as auth.h, moq_auth_split_query reads `jwt`.
 * Returns its length, -1 (absent) or MOQ_ERR_TOO_LARGE (longer than
 * @cap - 1). */
int web_query_get(const char *q, size_t qn, const char *k, char *out, size_t cap);
/* web_pct_decode: undo %XX of @n bytes of @s in place (RFC 3986, 2.1); with
 * @form, '+' is a space and a bad escape stays as it is
 * (application/x-www-form-urlencoded, as auth.c reads a query), without, a
 * bad escape is an error (a path). Returns the new length or -1. */
int web_pct_decode(char *s, size_t n, int form);
/* web_auth_grant: authorise a request on path @path with the query's `jwt`
 * (auth.h, moq_auth_connect). Returns 1 with the grant in *@g (the caller
 * frees it; NULL without cfg.auth), 0 when refused; sets c->anon. */
int web_auth_grant(struct wconn *c, const char *path, size_t plen, const char *query, size_t qn,
                   struct moq_auth_grant **g);
/* web_conn_addrs: @c's peer and own addresses, "ip:port" / "[ip6]:port"
 * (request.rs remote, local), into @remote / @local (@cap bytes each);
 * *@rp / *@lp NULL when unknown. */
int web_conn_addrs(const struct wconn *c, char *remote, char *local, size_t cap,
                   const char **rp, const char **lp);
/* web_conn_server_name: the TLS SNI, else the Host header (request.rs
 * server_name), NULL when neither. */
const char *web_conn_server_name(const struct wconn *c, char *out, size_t cap);
/* web_http_auth_step: a request parked for the auth server (C_AUTH): the
 * answer in, the request served (or refused). */
void web_http_auth_step(struct wconn *c, uint64_t now);
/* web_http_auth_release: the connection goes: post its `end`, free what
 * the admission holds. */
void web_http_auth_release(struct wconn *c);
/* web_auth_cache_clear: the listener's cached answers freed. */
void web_auth_cache_clear(struct moq_web *w);
/* web_cors: the Access-Control-Allow-Origin line for a 200 with data: only
 * on answers made without a token. */
const char *web_cors(const struct wconn *c);

/* --- ws.c: WebSocket framing --------------------------------------------- */

extern const struct wslay_frame_callbacks web_wsl_cb;
/* web_b64: standard base64 (RFC 4648, 4) of @n bytes into @out (NUL-ended,
 * 4 * ceil(n / 3) + 1 bytes). */
void web_b64(const uint8_t *in, size_t n, char *out);
/* web_mask_key: a client's next masking key (RFC 6455, 5.3). */
void web_mask_key(struct wconn *c, uint8_t k[4]);
/* web_ws_mask: @n bytes of @src XORed with key @k into @dst, @off the
 * position of src[0] in the frame's payload (RFC 6455, 5.3). */
void web_ws_mask(uint8_t *dst, const uint8_t *src, size_t n, const uint8_t k[4], size_t off);
/* web_ws_ctl: a control frame (close, pong) of @n <= 125 bytes, masked by a
 * client, into the output buffer. */
void web_ws_ctl(struct wconn *c, unsigned int op, const uint8_t *p, size_t n);
/* web_ws_close_frame: the WebSocket Close with @code, once. */
void web_ws_close_frame(struct wconn *c, unsigned int code);
/* web_ws_input: parse the frames c->in holds; each binary message is a
 * qmux record. */
void web_ws_input(struct wconn *c, uint64_t now);

/* --- binding.c: qmux records as a moq-lite binding ----------------------- */

extern const struct moq_qmux_callbacks web_qmux_cb;
/* web_sess_end: hand the session its end (deferred out of the engine's
 * callbacks, never while a record is half written). */
void web_sess_end(struct wconn *c);
/* web_qmux_start: @c's qmux engine (the default parameters of BINDINGS.md,
 * @server: the relay's side), its callbacks to @c. Returns 0 or
 * MOQ_ERR_NOMEM. */
int web_qmux_start(struct wconn *c, int server, uint64_t now);
/* web_conn_flush: everything @c has to say, as far as the socket takes it:
 * output bytes, qmux records, the closing frames. */
void web_conn_flush(struct wconn *c, uint64_t now);

/* --- fetch.c, static.c: the endpoints with bodies ------------------------ */

void web_serve_announced(struct wconn *c, const char *prefix, size_t plen, const char *query,
                         size_t qn);
void web_body_step(struct wconn *c);

/* web_serve_status (status.c): /status, /status/status.js, /status/metrics;
 * returns 1 when @path (@pl bytes, no query; @query the request's) is one
 * of them (answered), 0. */
int web_serve_status(struct wconn *c, const char *path, size_t pl, const char *query, size_t qn);
void web_serve_fetch(struct wconn *c, char *rest, size_t rn, const char *query, size_t qn,
                     uint64_t now);
void web_fetch_step(struct wconn *c, uint64_t now);
/* web_fetch_release: drop what a /fetch pins (group, track, its count). */
void web_fetch_release(struct wconn *c);
void web_serve_file(struct wconn *c, const char *name, size_t n);
void web_file_step(struct wconn *c);

/* --- client.c ------------------------------------------------------------ */

/* web_client_progress: the upgrade out, the server's answer in. */
void web_client_progress(struct wconn *c, uint64_t now);

#endif /* MOQ_WEB_WEB_INT_H */
