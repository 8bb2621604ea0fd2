/* SPDX-License-Identifier: MIT */
/*
 * http.c: one worker's HTTP/1.1 listener on TCP (web.h; BINDINGS.md,
 * sections 2 and 3).
 *
 * Every worker binds its own socket with SO_REUSEPORT (the kernel spreads
 * connections) and polls it with epoll (edge-triggered, timeout 0) from its
 * loop: no thread of its own. A connection whose first byte is 0x16 (a TLS
 * handshake record) is TLS (wolfSSL, the relay's certificate), otherwise
 * plain. Requests are parsed by http_parser (Debian's libhttp-parser); one
 * request per connection (Connection: close), or the WebSocket upgrade.
 *
 * A WebSocket connection carries qmux-01 (qmux.c): frames in are parsed by
 * wslay (its frame layer, no I/O: we feed it the bytes read), each binary
 * message one record; records out are a WebSocket header and the record's
 * iovecs, written with writev (plain: the fanout's cache memory goes to the
 * socket as it is) or wolfSSL_write (TLS). A record's stream bytes are
 * acknowledged to the moq-lite session once the socket / TLS layer took the
 * whole record (moq.h, moq_binding_stream_acked).
 */
#define _GNU_SOURCE
#include "web.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <http_parser.h>
#include <wslay/wslay.h>
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include "auth.h"
#include "cache.h"
#include "moq.h"

/* Request line + headers of one request (431 beyond). */
#define REQ_MAX 8192
/* Bytes read per connection per call. */
#define IN_CAP 16384
/* Responses, WebSocket control frames, /fetch bodies. */
#define OUT_CAP 65536
/* The record buffer: our max_record_size. */
#define REC_CAP MOQ_QMUX_MIN_RECORD
/* iovecs of one record (qmux.c keeps up to 64 segments a stream). */
#define REC_IOV 68
/* A slow TCP subscriber is bounded like a slow QUIC one (moq.h, fanout's
 * budget max(2 cwnd, 64 KiB)): this is the "cwnd" get_info reports. */
#define WS_WINDOW (64u << 10)
/* BINDINGS.md, section 3: /fetch waits this long for the broadcast. */
#define FETCH_WAIT_NS 30000000000ull
/* A connection that sends no complete request within this long is closed. */
#define REQ_TIMEOUT_NS 10000000000ull
/* qmux timers and fetch progress are looked at this often. */
#define TICK_NS 20000000ull
/* RFC 6455, 7.4.1 */
#define WS_CLOSE_NORMAL   1000
#define WS_CLOSE_PROTOCOL 1002
#define WS_CLOSE_DATA     1003
#define WS_CLOSE_TOO_BIG  1009

enum cstate { C_SNIFF, C_TLS_HS, C_HTTP, C_WS, C_FETCH, C_FILE, C_DONE, C_CONNECTING, C_WS_HS };

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
};

static void conn_free(struct wconn *c);

/* --- output -------------------------------------------------------------- */

static void mark(struct wconn *c)
{
	if (!c->dirty) {
		c->dirty = 1;
		c->dnext = c->w->dirty;
		c->w->dirty = c;
	}
}

static int out_room(const struct wconn *c)
{
	return (int)(OUT_CAP - c->outlen);
}

static void out_put(struct wconn *c, const void *p, size_t n)
{
	if (c->outoff == c->outlen && c->tls_pend == 0)
		c->outoff = c->outlen = 0;
	if (n > OUT_CAP - c->outlen) {
		c->dead = 1; /* cannot happen with the sizes used; never overrun */
		return;
	}
	memcpy(c->out + c->outlen, p, n);
	c->outlen += n;
	mark(c);
}

static void respond(struct wconn *c, int code, const char *reason, const char *ctype,
                    const char *body, size_t blen)
{
	char h[512];
	int n = snprintf(h, sizeof(h),
	                 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
	                 "Access-Control-Allow-Origin: *\r\nCache-Control: no-store\r\n"
	                 "Connection: close\r\n\r\n",
	                 code, reason, ctype, blen);

	out_put(c, h, (size_t)n);
	if (blen > 0)
		out_put(c, body, blen);
	c->close_after = 1;
	c->st = C_DONE;
}

static void respond_text(struct wconn *c, int code, const char *reason, const char *body)
{
	respond(c, code, reason, "text/plain; charset=utf-8", body, strlen(body));
}

/* Write @p / @n to the connection: plain send, or TLS. Returns the bytes
 * taken (0: would block), or -1 (connection gone). */
static ssize_t raw_write(struct wconn *c, const uint8_t *p, size_t n)
{
	ssize_t r;

	if (c->ssl != NULL) {
		int e;

		r = wolfSSL_write(c->ssl, p, (int)n);
		if (r > 0)
			return r;
		e = wolfSSL_get_error(c->ssl, (int)r);
		return e == WOLFSSL_ERROR_WANT_WRITE || e == WOLFSSL_ERROR_WANT_READ ? 0 : -1;
	}
	r = send(c->fd, p, n, MSG_NOSIGNAL);
	if (r >= 0)
		return r;
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
}

/* Write the current record from @rdone on. Returns 1 written whole, 0
 * blocked, -1 gone. */
static int rec_write(struct wconn *c)
{
	if (c->ssl != NULL) {
		ssize_t r;

		/* wolfSSL wants the same buffer again after WANT_WRITE: the
		 * record is copied once into tlsrec (TLS copies to encrypt
		 * anyway) and written in one call */
		if (c->rdone == 0) {
			size_t o = 0;

			for (unsigned int i = 0; i < c->rn; i++) {
				memcpy(c->tlsrec + o, c->riov[i].iov_base, c->riov[i].iov_len);
				o += c->riov[i].iov_len;
			}
			c->rdone = 1; /* copied */
		}
		r = raw_write(c, c->tlsrec, c->rtot);
		if (r < 0)
			return -1;
		if (r == 0)
			return 0;
		c->w->st.bytes_out += (uint64_t)r;
		return 1;
	}
	while (c->rdone < c->rtot) {
		struct iovec v[REC_IOV + 1];
		struct msghdr mh;
		size_t skip = c->rdone;
		unsigned int k = 0;
		ssize_t r;

		for (unsigned int i = 0; i < c->rn; i++) {
			if (skip >= c->riov[i].iov_len) {
				skip -= c->riov[i].iov_len;
				continue;
			}
			v[k].iov_base = (uint8_t *)c->riov[i].iov_base + skip;
			v[k].iov_len = c->riov[i].iov_len - skip;
			skip = 0;
			k++;
		}
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = v;
		mh.msg_iovlen = k;
		r = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		if (r < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
		c->rdone += (size_t)r;
		c->w->st.bytes_out += (uint64_t)r;
	}
	return 1;
}

/* Flush the output bytes. Returns 1 all out, 0 blocked, -1 gone. */
static int out_flush(struct wconn *c)
{
	while (c->outoff < c->outlen) {
		size_t n = c->tls_pend ? c->tls_pend : c->outlen - c->outoff;
		ssize_t r;

		if (c->ssl != NULL && n > 16384)
			n = 16384;
		r = raw_write(c, c->out + c->outoff, n);
		if (r < 0)
			return -1;
		if (r == 0) {
			if (c->ssl != NULL)
				c->tls_pend = n;
			return 0;
		}
		c->tls_pend = 0;
		c->outoff += (size_t)r;
		c->w->st.bytes_out += (uint64_t)r;
	}
	c->outoff = c->outlen = 0;
	return 1;
}

/* A client's masking key (RFC 6455, 5.3: unpredictable to scripts; this
 * client runs no scripts, a xorshift of the connection's seed will do). */
static void mask_key(struct wconn *c, uint8_t k[4])
{
	uint32_t x = c->mask_seed;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	c->mask_seed = x;
	memcpy(k, &x, 4);
}

/* A control frame (close, pong) of @n <= 125 bytes, masked by a client. */
static void ws_ctl(struct wconn *c, unsigned int op, const uint8_t *p, size_t n)
{
	uint8_t f[2 + 4 + 125];
	size_t o = moq_ws_header(f, op, n);

	if (c->client) {
		uint8_t *k = f + o;

		f[1] |= 0x80;
		mask_key(c, k);
		o += 4;
		for (size_t i = 0; i < n; i++)
			f[o + i] = p[i] ^ k[i & 3];
	} else {
		memcpy(f + o, p, n);
	}
	out_put(c, f, o + n);
}

static void ws_close_frame(struct wconn *c, unsigned int code)
{
	uint8_t f[2];

	if (c->ws_close_sent)
		return;
	c->ws_close_sent = 1;
	/* RFC 6455, 5.5.1: the status code, big-endian */
	f[0] = (uint8_t)(code >> 8);
	f[1] = (uint8_t)code;
	ws_ctl(c, 0x8, f, sizeof(f));
	c->close_after = 1;
}

/* Hand the session its end (deferred out of the engine's callbacks). */
static void sess_end(struct wconn *c)
{
	struct moq_session *s = c->s;

	/* not while a record is half written: it may point into memory the
	 * session holds (cache groups) */
	if (s == NULL || !c->sclose || (c->rbusy && !c->dead))
		return;
	c->s = NULL;
	moq_binding_closed(s, c->sclose_code, c->sclose_local);
}

/* Everything the connection has to say, as far as the socket takes it. */
static void conn_flush(struct wconn *c, uint64_t now)
{
	for (;;) {
		int r;

		if (!c->rbusy) {
			r = out_flush(c);
			if (r < 0) {
				c->dead = 1;
				return;
			}
			if (r == 0)
				return;
		}
		if (c->q == NULL)
			break;
		if (!c->rbusy) {
			size_t len;
			int n = moq_qmux_next_record(c->q, c->riov + 1, REC_IOV, &len);

			if (n <= 0)
				break;
			c->riov[0].iov_base = c->wshdr;
			c->riov[0].iov_len = moq_ws_header(c->wshdr, 0x2, len);
			c->rn = (unsigned int)n + 1;
			c->rtot = len + c->riov[0].iov_len;
			if (c->client) {
				/* masked: header, key, then the record XORed into maskbuf */
				uint8_t *k, *m = c->maskbuf;
				size_t h = moq_ws_header(m, 0x2, len), o;

				m[1] |= 0x80;
				k = m + h;
				mask_key(c, k);
				o = h + 4;
				for (int i = 1; i <= n; i++) {
					const uint8_t *p = c->riov[i].iov_base;

					for (size_t j = 0; j < c->riov[i].iov_len; j++, o++)
						m[o] = p[j] ^ k[(o - h - 4) & 3];
				}
				c->riov[0].iov_base = m;
				c->riov[0].iov_len = o;
				c->rn = 1;
				c->rtot = o;
			}
			c->rdone = 0;
			c->rbusy = 1;
		}
		r = rec_write(c);
		if (r < 0) {
			c->dead = 1;
			return;
		}
		if (r == 0)
			return;
		c->rbusy = 0;
		moq_qmux_record_done(c->q, now); /* acknowledges the stream bytes */
	}
	if (c->q != NULL && moq_qmux_closing(c->q) && !c->rbusy) {
		/* BINDINGS.md, section 2: the qmux close, then the WebSocket Close */
		ws_close_frame(c, c->ws_code                         ? c->ws_code
		                  : c->close_app || !c->sclose_local ? WS_CLOSE_NORMAL
		                                                     : WS_CLOSE_PROTOCOL);
		if (out_flush(c) < 0)
			c->dead = 1;
	}
	if (c->close_after && c->outoff == c->outlen && !c->rbusy) {
		if (c->ssl != NULL)
			wolfSSL_shutdown(c->ssl);
		shutdown(c->fd, SHUT_WR);
		c->dead = 1;
	}
}

/* --- the binding (moq.h) ------------------------------------------------- */

static int b_open(void *b, int bidi, int64_t *sid)
{
	struct wconn *c = b;

	return moq_qmux_stream_open(c->q, bidi, sid);
}

static long b_write(void *b, int64_t sid, const struct iovec *iov, size_t n, int fin)
{
	struct wconn *c = b;

	mark(c);
	return moq_qmux_stream_write(c->q, sid, iov, n, fin);
}

static int b_reset(void *b, int64_t sid, uint64_t code)
{
	struct wconn *c = b;

	mark(c);
	return moq_qmux_stream_reset(c->q, sid, code);
}

static int b_stop(void *b, int64_t sid, uint64_t code)
{
	struct wconn *c = b;

	mark(c);
	return moq_qmux_stream_stop_sending(c->q, sid, code);
}

static void b_close(void *b, uint64_t code)
{
	struct wconn *c = b;

	mark(c);
	moq_qmux_close(c->q, code);
}

static void b_info(void *b, struct moq_quic_conn_info *out)
{
	struct wconn *c = b;
	struct moq_qmux_stats qs;

	memset(out, 0, sizeof(*out));
	moq_qmux_get_stats(c->q, &qs);
	out->cwnd = WS_WINDOW;
	out->bytes_in_flight = qs.unacked;
	out->bytes_sent = qs.bytes_out;
	out->bytes_recv = qs.bytes_in;
	out->smoothed_rtt_ns = 10000000;
	out->min_rtt_ns = 1000000;
	out->established = 1;
	out->validated = 1;
}

static const struct moq_binding_ops ws_ops = {
        .stream_open = b_open,
        .stream_write = b_write,
        .stream_reset = b_reset,
        .stream_stop_sending = b_stop,
        .close = b_close,
        .get_info = b_info,
};

/* the engine's callbacks: what qmux saw, to the session */
static void q_data(void *u, int64_t sid, const uint8_t *d, size_t len, int fin)
{
	struct wconn *c = u;

	if (c->s != NULL)
		moq_binding_stream_data(c->s, sid, d, len, fin);
}

static void q_reset(void *u, int64_t sid, uint64_t code)
{
	struct wconn *c = u;

	if (c->s != NULL)
		moq_binding_stream_reset(c->s, sid, code);
}

static void q_stop(void *u, int64_t sid, uint64_t code)
{
	struct wconn *c = u;

	if (c->s != NULL)
		moq_binding_stream_stop_sending(c->s, sid, code);
}

static void q_acked(void *u, int64_t sid, uint64_t total)
{
	struct wconn *c = u;

	if (c->s != NULL)
		moq_binding_stream_acked(c->s, sid, total);
}

static void q_sclosed(void *u, int64_t sid)
{
	struct wconn *c = u;

	if (c->s != NULL)
		moq_binding_stream_closed(c->s, sid);
}

/* The session starts once the client's transport parameters are in (the
 * first writable): a moq-lite session opens streams as it starts (lite-03/04
 * relay: the announce request) and qmux has the stream credit from then on.
 * Called from inside moq_qmux_recv_record, before the record's next frame. */
static void sess_start(struct wconn *c)
{
	c->accepted = 1;
	if (c->client) {
		c->s = moq_binding_connect(c->node, &ws_ops, c, (enum moq_version)c->ws_version,
		                           c->url[0] ? c->url : NULL, c->role);
		if (c->s != NULL)
			moq_session_set_user(c->s, c->user);
		else
			moq_qmux_close(c->q, 11);
		return;
	}
	c->s = moq_binding_accept(c->w->cfg.node, &ws_ops, c, (enum moq_version)c->ws_version,
	                          c->url, c->urllen);
	if (c->s == NULL) /* refused by the node's bounds: moq-lite 11 */
		moq_qmux_close(c->q, 11);
}

static void q_writable(void *u)
{
	struct wconn *c = u;

	mark(c);
	if (!c->accepted && moq_qmux_peer_params(c->q) != NULL)
		sess_start(c);
	else if (c->s != NULL)
		moq_binding_writable(c->s);
}

static void q_closed(void *u, uint64_t code, int app, int local)
{
	struct wconn *c = u;

	c->close_app = app;
	c->sclose = 1;
	c->sclose_code = code;
	c->sclose_local = local;
	mark(c);
}

static const struct moq_qmux_callbacks ws_qcb = {
        .stream_data = q_data,
        .stream_reset = q_reset,
        .stream_stop_sending = q_stop,
        .stream_acked = q_acked,
        .stream_closed = q_sclosed,
        .writable = q_writable,
        .closed = q_closed,
};

/* --- WebSocket input ----------------------------------------------------- */

static ssize_t wsl_recv(uint8_t *buf, size_t len, int flags, void *user)
{
	struct wconn *c = user;
	size_t n = c->inlen - c->inoff;

	(void)flags;
	if (n == 0)
		return -1; /* WSLAY_ERR_WANT_READ */
	if (n > len)
		n = len;
	memcpy(buf, c->in + c->inoff, n);
	c->inoff += n;
	return (ssize_t)n;
}

static ssize_t wsl_send(const uint8_t *d, size_t len, int flags, void *user)
{
	(void)d, (void)len, (void)flags, (void)user;
	return -1; /* frames out are written by conn_flush */
}

static int wsl_mask(uint8_t *buf, size_t len, void *user)
{
	(void)buf, (void)len, (void)user;
	return -1;
}

static const struct wslay_frame_callbacks wsl_cb = {wsl_send, wsl_recv, wsl_mask};

/* A WebSocket-level failure: the qmux CONNECTION_CLOSE with @qcode first,
 * then the WebSocket Close with @ws_code (conn_flush). */
static void ws_fail(struct wconn *c, uint64_t qcode, unsigned int ws_code)
{
	c->w->st.closes_protocol++;
	c->ws_code = ws_code;
	if (c->q != NULL)
		moq_qmux_abort(c->q, qcode);
	mark(c);
}

static void ws_input(struct wconn *c, uint64_t now)
{
	struct wslay_frame_iocb io;

	while (!c->dead && !c->close_after && (c->q == NULL || !moq_qmux_closing(c->q))) {
		ssize_t r;

		memset(&io, 0, sizeof(io));
		r = wslay_frame_recv(c->wsf, &io);
		if (r == WSLAY_ERR_WANT_READ)
			break;
		if (r < 0) {
			ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_PROTOCOL);
			return;
		}
		if (c->frame_left == 0) { /* a new frame */
			c->frame_left = io.payload_length;
			c->frame_op = io.opcode;
			c->ctllen = 0;
			/* RFC 6455, 5.1 / 5.2: a client masks; no extensions */
			if (io.mask == c->client || io.rsv != 0) {
				ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_PROTOCOL);
				return;
			}
			if (io.opcode == 0x1) { /* text: not qmux (@moq/qmux: 1003) */
				ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_DATA);
				return;
			}
			if (io.opcode == 0x2 || io.opcode == 0x0) {
				if ((io.opcode == 0x2) == c->in_msg) { /* RFC 6455, 5.4 */
					ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_PROTOCOL);
					return;
				}
				if (io.opcode == 0x2) {
					c->in_msg = 1;
					c->reclen = 0;
				}
				/* qmux-01, 5: a record over our max_record_size */
				if (c->reclen + io.payload_length > REC_CAP) {
					ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_TOO_BIG);
					return;
				}
			} else if (io.opcode < 0x8 || io.payload_length > 125) {
				ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_PROTOCOL);
				return;
			}
		}
		if (io.data_length > c->frame_left) {
			ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_PROTOCOL);
			return;
		}
		c->frame_left -= io.data_length;
		if (c->frame_op == 0x2 || c->frame_op == 0x0) {
			memcpy(c->rec + c->reclen, io.data, io.data_length);
			c->reclen += io.data_length;
		} else {
			memcpy(c->ctl + c->ctllen, io.data, io.data_length);
			c->ctllen += io.data_length;
		}
		if (c->frame_left > 0)
			continue;
		/* the frame is complete */
		if (c->frame_op == 0x9) { /* ping: pong with its payload */
			ws_ctl(c, 0xA, c->ctl, c->ctllen);
		} else if (c->frame_op == 0x8) {
			/* the peer closes: the session ends (no qmux close came) */
			if (c->q != NULL && !moq_qmux_closing(c->q))
				moq_qmux_close(c->q, 0);
			c->sclose_local = 0;
			ws_close_frame(c, WS_CLOSE_NORMAL);
			return;
		} else if ((c->frame_op == 0x2 || c->frame_op == 0x0) && io.fin) {
			int rc;

			c->in_msg = 0;
			rc = moq_qmux_recv_record(c->q, c->rec, c->reclen, now);
			mark(c);
			if (rc == MOQ_ERR_PROTO)
				c->w->st.closes_protocol++;
		}
	}
}

/* --- requests ------------------------------------------------------------ */

enum { H_NONE, H_UPGRADE, H_KEY, H_VERSION, H_PROTO };

static void hcopy(char *dst, size_t cap, size_t *len, const char *p, size_t n)
{
	if (*len + n >= cap)
		n = *len < cap - 1 ? cap - 1 - *len : 0;
	memcpy(dst + *len, p, n);
	*len += n;
	dst[*len] = 0;
}

static int hp_url(http_parser *p, const char *at, size_t n)
{
	struct wconn *c = p->data;

	if (c->urllen + n >= sizeof(c->url)) {
		c->urllen = sizeof(c->url) - 1; /* too long: the parser stops, 414 */
		c->url[c->urllen] = 0;
		return 1;
	}
	memcpy(c->url + c->urllen, at, n);
	c->urllen += n;
	c->url[c->urllen] = 0;
	return 0;
}

static int hp_field(http_parser *p, const char *at, size_t n)
{
	struct wconn *c = p->data;

	if (c->last_was_value) {
		c->fieldlen = 0;
		c->last_was_value = 0;
	}
	hcopy(c->field, sizeof(c->field), &c->fieldlen, at, n);
	return 0;
}

static int hp_value(http_parser *p, const char *at, size_t n)
{
	struct wconn *c = p->data;

	if (!c->last_was_value) {
		c->last_was_value = 1;
		c->hdr = strcasecmp(c->field, "upgrade") == 0                  ? H_UPGRADE
		         : strcasecmp(c->field, "sec-websocket-key") == 0      ? H_KEY
		         : strcasecmp(c->field, "sec-websocket-version") == 0  ? H_VERSION
		         : strcasecmp(c->field, "sec-websocket-protocol") == 0 ? H_PROTO
		                                                               : H_NONE;
		/* RFC 7230, 3.2.2: several lines of a list header are one list */
		if (c->hdr == H_PROTO && c->protolen > 0)
			hcopy(c->proto, sizeof(c->proto), &c->protolen, ",", 1);
	}
	switch (c->hdr) {
	case H_UPGRADE:
		hcopy(c->upgrade, sizeof(c->upgrade), &c->upgradelen, at, n);
		break;
	case H_KEY:
		hcopy(c->key, sizeof(c->key), &c->keylen, at, n);
		break;
	case H_VERSION:
		hcopy(c->version, sizeof(c->version), &c->versionlen, at, n);
		break;
	case H_PROTO:
		hcopy(c->proto, sizeof(c->proto), &c->protolen, at, n);
		break;
	default:
		break;
	}
	return 0;
}

static int hp_done(http_parser *p)
{
	struct wconn *c = p->data;

	c->req_done = 1;
	return 0;
}

static const http_parser_settings hp_settings = {
        .on_url = hp_url,
        .on_header_field = hp_field,
        .on_header_value = hp_value,
        .on_message_complete = hp_done,
};

/* The value of query key @k in @q (@qn bytes, "a=1&b=2"), last one wins,
 * percent-decoding not needed for the values used here. Returns its length
 * or -1 (absent). */
static int query_get(const char *q, size_t qn, const char *k, const char **v)
{
	size_t kl = strlen(k), i = 0;
	int found = -1;

	while (i < qn) {
		size_t a = i, e;

		while (i < qn && q[i] != '&')
			i++;
		e = a;
		while (e < i && q[e] != '=')
			e++;
		if (e - a == kl && memcmp(q + a, k, kl) == 0) {
			*v = e < i ? q + e + 1 : q + e;
			found = e < i ? (int)(i - e - 1) : 0;
		}
		i++;
	}
	return found;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

/* Undo %XX in place (RFC 3986, 2.1); returns the new length or -1 for a
 * bad escape. */
static int pct_decode(char *s, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%') {
			int hi, lo;

			if (i + 2 >= n || (hi = hexval(s[i + 1])) < 0 ||
			    (lo = hexval(s[i + 2])) < 0)
				return -1;
			s[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			s[o++] = s[i];
		}
	}
	return (int)o;
}

static int auth_ok(struct wconn *c, const char *path, size_t plen, const char *query, size_t qn,
                   int need_get_prefix)
{
	struct moq_auth_grant *g = NULL;
	const char *jwt = NULL;
	char target[3072];
	int jl, rc, ok;

	if (c->w->cfg.auth == NULL)
		return 1;
	jl = query_get(query, qn, "jwt", &jwt);
	/* as a lite-05 SETUP Path: "path?jwt=..." (auth.h, moq_auth_connect) */
	rc = snprintf(target, sizeof(target), "%.*s%s%.*s", (int)plen, path, jl > 0 ? "?jwt=" : "",
	              jl > 0 ? jl : 0, jl > 0 ? jwt : "");
	if (rc < 0 || (size_t)rc >= sizeof(target))
		return 0;
	if (moq_auth_connect(c->w->cfg.auth, target, (size_t)rc, &g) != MOQ_AUTH_OK)
		return 0;
	ok = !need_get_prefix || moq_auth_grant_overlaps(g, 0, "", 0);
	moq_auth_grant_free(g);
	return ok;
}

struct ann_ctx {
	struct wconn *c;
	int full;
};

static void ann_cb(void *user, const char *path, size_t plen, size_t off)
{
	struct ann_ctx *a = user;
	const char *sfx = path + off;
	size_t n = plen - off;

	while (n > 0 && *sfx == '/')
		sfx++, n--;
	if ((size_t)out_room(a->c) < n + 512) {
		a->full = 1;
		return;
	}
	out_put(a->c, sfx, n);
	out_put(a->c, "\n", 1);
}

static void serve_announced(struct wconn *c, const char *prefix, size_t plen, const char *query,
                            size_t qn)
{
	char h[256];
	struct ann_ctx a = {c, 0};
	size_t hdr_at, body_at;
	int n;

	if (!auth_ok(c, prefix, plen, query, qn, 0)) {
		respond_text(c, 401, "Unauthorized", "unauthorized\n");
		return;
	}
	if (c->w->dry) {
		respond_text(c, 200, "OK", "");
		return;
	}
	/* the body first (its length goes in the header): written after a
	 * placeholder, then the header is put in front */
	hdr_at = c->outlen;
	body_at = hdr_at + 200;
	c->outlen = body_at;
	n = moq_node_broadcasts(c->w->cfg.node, prefix, plen, ann_cb, &a);
	if (n < 0) {
		c->outlen = hdr_at;
		respond_text(c, 400, "Bad Request", "bad prefix\n");
		return;
	}
	n = snprintf(h, sizeof(h),
	             "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
	             "Content-Length: %zu\r\nAccess-Control-Allow-Origin: *\r\n"
	             "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
	             c->outlen - body_at);
	/* right-align the header against the body */
	memcpy(c->out + body_at - (size_t)n, h, (size_t)n);
	c->outoff = body_at - (size_t)n;
	c->close_after = 1;
	c->st = C_DONE;
}

static void fetch_release(struct wconn *c)
{
	if (c->fg != NULL)
		moq_cache_group_unref(c->fg);
	if (c->ftr != NULL)
		moq_cache_track_unref(c->ftr);
	c->fg = NULL;
	c->ftr = NULL;
}

/* /fetch progress: find the track, the group, then copy out what arrived. */
static void fetch_step(struct wconn *c, uint64_t now)
{
	struct moq_cache_frame fr[8];
	int n;

	if (c->ftr == NULL) {
		if (moq_node_broadcast_live(c->w->cfg.node, c->fb, c->fblen) &&
		    c->w->cfg.cache != NULL)
			c->ftr = moq_cache_track_lookup(c->w->cfg.cache, c->fb, c->fblen, c->ftrack,
			                                c->ftlen);
		if (c->ftr == NULL) {
			if (now >= c->fdeadline)
				respond_text(c, 504, "Gateway Timeout", "no such broadcast yet\n");
			return;
		}
	}
	if (c->fg == NULL) {
		uint64_t seq = c->fseq;
		int rc;

		if (c->flatest) {
			rc = moq_cache_track_latest(c->ftr, &seq);
			if (rc == MOQ_ERR_AGAIN) { /* no group yet: wait for the first */
				if (now >= c->fdeadline)
					respond_text(c, 504, "Gateway Timeout", "no group yet\n");
				return;
			}
			if (rc != 0) {
				respond_text(c, 404, "Not Found", "no such group\n");
				return;
			}
		}
		rc = moq_cache_track_group(c->ftr, seq, &c->fg);
		if (rc != 0) {
			c->fg = NULL;
			respond_text(c, 404, "Not Found", "no such group\n");
			return;
		}
		memset(&c->fcur, 0, sizeof(c->fcur));
	}
	if (!c->fsent_hdr) {
		static const char h[] =
		        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
		        "Access-Control-Allow-Origin: *\r\nCache-Control: no-store\r\n"
		        "Connection: close\r\n\r\n";

		out_put(c, h, sizeof(h) - 1);
		c->fsent_hdr = 1;
	}
	/* the group's frame payloads, raw, until it ends (the body ends with
	 * the connection) */
	while (out_room(c) >= 16384 + 1) {
		n = moq_cache_read_frames(c->fg, &c->fcur, fr, 1);
		if (n == 0) {
			if (now >= c->fdeadline)
				c->close_after = 1; /* a group still open after 30 s */
			return;
		}
		if (n < 0) {
			c->close_after = 1; /* finished (or removed: cut short) */
			c->st = C_DONE;
			return;
		}
		for (uint32_t done = 0; done < fr[0].len;) {
			struct iovec v[8];
			uint32_t take = fr[0].len - done;
			int k;

			if (take > 16384)
				take = 16384;
			if (fr[0].data != NULL) {
				out_put(c, fr[0].data + done, take);
				done += take;
				continue;
			}
			k = moq_cache_group_iov(c->fg, fr[0].offset + done, take, v, 8);
			if (k <= 0)
				break;
			for (int i = 0; i < k; i++) {
				out_put(c, v[i].iov_base, v[i].iov_len);
				done += (uint32_t)v[i].iov_len;
			}
		}
		if (c->fcur.pos != 0 && c->fcur.frame == fr[0].index &&
		    !moq_cache_frame_complete(&fr[0]))
			continue;
	}
}

static void serve_fetch(struct wconn *c, char *rest, size_t rn, const char *query, size_t qn,
                        uint64_t now)
{
	const char *v = NULL;
	char *slash;
	int vl, n;

	n = pct_decode(rest, rn);
	if (n < 0) {
		respond_text(c, 400, "Bad Request", "bad path\n");
		return;
	}
	rn = (size_t)n;
	while (rn > 0 && rest[rn - 1] == '/')
		rn--;
	rest[rn] = 0;
	slash = memrchr(rest, '/', rn);
	/* /fetch/<broadcast>/<track>: both non-empty */
	if (slash == NULL || slash == rest || (size_t)(slash - rest) + 1 >= rn ||
	    (size_t)(slash - rest) >= sizeof(c->fb) ||
	    rn - (size_t)(slash - rest) - 1 >= sizeof(c->ftrack)) {
		respond_text(c, 400, "Bad Request", "want /fetch/<broadcast>/<track>\n");
		return;
	}
	vl = query_get(query, qn, "group", &v);
	if (vl <= 0 || (vl == 6 && memcmp(v, "latest", 6) == 0)) {
		c->flatest = 1;
	} else {
		char num[24];
		char *end;

		if (vl >= (int)sizeof(num)) {
			respond_text(c, 400, "Bad Request", "bad group\n");
			return;
		}
		memcpy(num, v, (size_t)vl);
		num[vl] = 0;
		errno = 0;
		c->fseq = strtoull(num, &end, 10);
		if (*end != 0 || errno != 0 || num[0] < '0' || num[0] > '9') {
			respond_text(c, 400, "Bad Request", "bad group\n");
			return;
		}
	}
	n = moq_path_norm(c->fb, sizeof(c->fb), rest, (size_t)(slash - rest));
	if (n <= 0) {
		respond_text(c, 400, "Bad Request", "bad broadcast path\n");
		return;
	}
	c->fblen = (size_t)n;
	c->ftlen = rn - (size_t)(slash - rest) - 1;
	memcpy(c->ftrack, slash + 1, c->ftlen);
	if (!auth_ok(c, c->fb, c->fblen, query, qn, 0)) {
		respond_text(c, 401, "Unauthorized", "unauthorized\n");
		return;
	}
	if (c->w->dry) {
		respond_text(c, 200, "OK", "");
		return;
	}
	c->fdeadline = now + FETCH_WAIT_NS;
	c->st = C_FETCH;
	fetch_step(c, now);
}

static void serve_ws(struct wconn *c, uint64_t now)
{
	const char *name = NULL;
	char accept[29], h[512];
	struct moq_qmux_cfg qc;
	int v, n;

	/* RFC 6455, 4.2.1 */
	if (strcasestr(c->upgrade, "websocket") == NULL || c->keylen == 0 ||
	    strcmp(c->version, "13") != 0 || moq_ws_accept_key(c->key, c->keylen, accept) != 0) {
		respond_text(c, 400, "Bad Request", "not a WebSocket upgrade\n");
		return;
	}
	v = moq_ws_select(c->proto, c->protolen, &name);
	if (v < 0) { /* BINDINGS.md, section 2: 400 when nothing offered matches */
		respond_text(c, 400, "Bad Request",
		             "no supported subprotocol (qmux-01.moq-lite-05)\n");
		return;
	}
	{
		char *qm = memchr(c->url, '?', c->urllen);
		size_t pl = qm ? (size_t)(qm - c->url) : c->urllen;

		if (!auth_ok(c, c->url, pl, qm ? qm + 1 : "", qm ? c->urllen - pl - 1 : 0, 0)) {
			respond_text(c, 401, "Unauthorized", "unauthorized\n");
			return;
		}
	}
	if (c->w->dry) {
		respond_text(c, 101, "Switching Protocols", "");
		return;
	}
	if (wslay_frame_context_init(&c->wsf, &wsl_cb, c) != 0 ||
	    (c->ssl != NULL && (c->tlsrec = malloc(REC_CAP + 64)) == NULL)) {
		respond_text(c, 503, "Service Unavailable", "out of memory\n");
		return;
	}
	memset(&qc, 0, sizeof(qc));
	qc.server = 1;
	moq_qmux_default_params(&qc.local);
	qc.cb = &ws_qcb;
	qc.user = c;
	c->q = moq_qmux_new(&qc, now);
	if (c->q == NULL) {
		respond_text(c, 503, "Service Unavailable", "out of memory\n");
		return;
	}
	c->ws_version = v; /* the session starts with the client's parameters */
	n = snprintf(h, sizeof(h),
	             "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	             "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n"
	             "Sec-WebSocket-Protocol: %s\r\n\r\n",
	             accept, name);
	out_put(c, h, (size_t)n);
	c->st = C_WS;
	c->w->st.ws_sessions++;
	c->w->st.ws_open++;
	/* our transport parameters go out at once (qmux-01, 4.2) */
	mark(c);
}

/* /demo/<name>: a file of cfg.static_dir (names of [A-Za-z0-9._-], not
 * starting with '.'), streamed from its descriptor. */
static void serve_file(struct wconn *c, const char *name, size_t n)
{
	static const struct {
		const char *ext, *type;
	} types[] = {{".html", "text/html; charset=utf-8"},
	             {".js", "text/javascript; charset=utf-8"},
	             {".css", "text/css"},
	             {".map", "application/json"}};
	const char *type = "application/octet-stream";
	char path[4200], h[512];
	struct stat sb;
	int fd, hl;

	if (n == 0) {
		name = "index.html";
		n = 10;
	}
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
		      (name[i] >= '0' && name[i] <= '9') || name[i] == '.' || name[i] == '_' ||
		      name[i] == '-') ||
		    name[0] == '.') {
			respond_text(c, 404, "Not Found", "not found\n");
			return;
		}
	snprintf(path, sizeof(path), "%s/%.*s", c->w->cfg.static_dir, (int)n, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		if (fd >= 0)
			close(fd);
		respond_text(c, 404, "Not Found", "not found\n");
		return;
	}
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		size_t el = strlen(types[i].ext);

		if (n > el && memcmp(name + n - el, types[i].ext, el) == 0)
			type = types[i].type;
	}
	hl = snprintf(h, sizeof(h),
	              "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %lld\r\n"
	              "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
	              type, (long long)sb.st_size);
	out_put(c, h, (size_t)hl);
	c->file_fd = fd;
	c->st = C_FILE;
}

static void file_step(struct wconn *c)
{
	while (out_room(c) >= 16384) {
		ssize_t r;

		if (c->outoff == c->outlen && c->tls_pend == 0)
			c->outoff = c->outlen = 0;
		r = read(c->file_fd, c->out + c->outlen, (size_t)out_room(c));
		if (r <= 0) {
			close(c->file_fd);
			c->file_fd = -1;
			c->close_after = 1;
			c->st = C_DONE;
			return;
		}
		c->outlen += (size_t)r;
	}
}

static void hexfp(const uint8_t fp[32], char out[65])
{
	static const char hx[] = "0123456789abcdef";

	for (int i = 0; i < 32; i++) {
		out[2 * i] = hx[fp[i] >> 4];
		out[2 * i + 1] = hx[fp[i] & 15];
	}
	out[64] = 0;
}

static void request(struct wconn *c, uint64_t now)
{
	char *path = c->url, *qm = memchr(c->url, '?', c->urllen);
	size_t pl = qm ? (size_t)(qm - c->url) : c->urllen;
	const char *query = qm ? qm + 1 : "";
	size_t qn = qm ? c->urllen - pl - 1 : 0;

	c->w->st.requests++;
	if (c->hp.method != HTTP_GET) {
		respond_text(c, 405, "Method Not Allowed", "GET only\n");
		return;
	}
	if (c->urllen == 0 || c->url[0] != '/') {
		respond_text(c, 400, "Bad Request", "bad request target\n");
		return;
	}
	if (c->hp.upgrade || c->upgradelen > 0) {
		serve_ws(c, now);
		return;
	}
	if (pl == 7 && memcmp(path, "/health", 7) == 0) {
		if (c->w->draining)
			respond_text(c, 503, "Service Unavailable", "draining\n");
		else
			respond_text(c, 200, "OK", "ok\n");
	} else if (pl == 19 && memcmp(path, "/certificate.sha256", 19) == 0) {
		char hex[65];

		if (!c->w->has_fp) {
			respond_text(c, 404, "Not Found", "no certificate\n");
			return;
		}
		hexfp(c->w->fp, hex);
		respond(c, 200, "OK", "text/plain", hex, 64);
	} else if ((pl == 10 && memcmp(path, "/announced", 10) == 0) ||
	           (pl > 10 && memcmp(path, "/announced/", 11) == 0)) {
		char pre[2048];
		int n;

		memcpy(pre, path + 10, pl - 10);
		n = pct_decode(pre, pl - 10);
		if (n < 0) {
			respond_text(c, 400, "Bad Request", "bad prefix\n");
			return;
		}
		serve_announced(c, pre, (size_t)n, query, qn);
	} else if (c->w->cfg.static_dir != NULL && !c->w->dry && pl >= 6 &&
	           memcmp(path, "/demo/", 6) == 0) {
		serve_file(c, path + 6, pl - 6);
	} else if (pl > 7 && memcmp(path, "/fetch/", 7) == 0) {
		char rest[2048];

		memcpy(rest, path + 7, pl - 7);
		serve_fetch(c, rest, pl - 7, query, qn, now);
	} else {
		respond_text(c, 404, "Not Found", "not found\n");
	}
}

/* --- connections --------------------------------------------------------- */

/* Read what the socket has into c->in (after what is there). Returns bytes
 * read, 0 would block, -1 closed / failed. */
/* Parse what c->in holds of the request; answer once it is complete (or
 * bad). Returns 1 when answered, 0 when more is needed. */
static int http_feed(struct wconn *c, uint64_t now)
{
	size_t n = c->inlen - c->inoff, done;

	done = http_parser_execute(&c->hp, &hp_settings, (const char *)c->in + c->inoff, n);
	c->req_bytes += done;
	c->inoff += done;
	if (c->urllen + 1 >= sizeof(c->url)) {
		respond_text(c, 414, "URI Too Long", "request target too long\n");
		return 1;
	}
	if (HTTP_PARSER_ERRNO(&c->hp) != HPE_OK && !c->req_done) {
		respond_text(c, 400, "Bad Request", "malformed request\n");
		return 1;
	}
	if (c->req_bytes > REQ_MAX) {
		respond_text(c, 431, "Request Header Fields Too Large", "request too large\n");
		return 1;
	}
	if (!c->req_done)
		return 0;
	request(c, now);
	return 1;
}

int moq_web_req_parse(const uint8_t *d, size_t n)
{
	struct moq_web *w = calloc(1, sizeof(*w));
	struct wconn *c = calloc(1, sizeof(*c));
	int code = 0;

	if (w == NULL || c == NULL) {
		free(w);
		free(c);
		return MOQ_ERR_NOMEM;
	}
	w->dry = 1;
	w->has_fp = 1;
	c->w = w;
	c->fd = -1;
	c->file_fd = -1;
	c->st = C_HTTP;
	http_parser_init(&c->hp, HTTP_REQUEST);
	c->hp.data = c;
	while (n > 0 && c->st == C_HTTP) {
		size_t k = n < IN_CAP - c->inlen ? n : IN_CAP - c->inlen;

		memcpy(c->in + c->inlen, d, k);
		c->inlen += k;
		d += k;
		n -= k;
		if (http_feed(c, 0))
			break;
		if (c->inoff == c->inlen)
			c->inoff = c->inlen = 0;
		else if (c->inlen == IN_CAP)
			break;
	}
	if (c->outlen >= 12 && memcmp(c->out, "HTTP/1.1 ", 9) == 0)
		code = (c->out[9] - '0') * 100 + (c->out[10] - '0') * 10 + (c->out[11] - '0');
	free(c);
	free(w);
	return code;
}

static ssize_t conn_read(struct wconn *c)
{
	ssize_t r;

	if (c->inoff == c->inlen)
		c->inoff = c->inlen = 0;
	if (c->inlen == IN_CAP) {
		if (c->inoff == 0)
			return 0;
		memmove(c->in, c->in + c->inoff, c->inlen - c->inoff);
		c->inlen -= c->inoff;
		c->inoff = 0;
	}
	if (c->ssl != NULL) {
		int e;

		r = wolfSSL_read(c->ssl, c->in + c->inlen, (int)(IN_CAP - c->inlen));
		if (r > 0) {
			c->inlen += (size_t)r;
			c->w->st.bytes_in += (uint64_t)r;
			return r;
		}
		e = wolfSSL_get_error(c->ssl, (int)r);
		return e == WOLFSSL_ERROR_WANT_READ || e == WOLFSSL_ERROR_WANT_WRITE ? 0 : -1;
	}
	r = recv(c->fd, c->in + c->inlen, IN_CAP - c->inlen, 0);
	if (r > 0) {
		c->inlen += (size_t)r;
		c->w->st.bytes_in += (uint64_t)r;
		return r;
	}
	if (r == 0)
		return -1;
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
}

static void conn_input(struct wconn *c, uint64_t now)
{
	if (c->st == C_SNIFF) {
		uint8_t b;
		ssize_t r = recv(c->fd, &b, 1, MSG_PEEK);

		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			c->dead = 1;
			return;
		}
		if (r < 0)
			return;
		/* RFC 8446, 5.1: a TLS record of type handshake (22) */
		if (b == 0x16 && c->w->cfg.tls_ctx != NULL) {
			c->ssl = wolfSSL_new(c->w->cfg.tls_ctx);
			if (c->ssl == NULL || wolfSSL_set_fd(c->ssl, c->fd) != WOLFSSL_SUCCESS) {
				c->dead = 1;
				return;
			}
			c->w->st.tls_conns++;
			c->st = C_TLS_HS;
		} else {
			c->st = C_HTTP;
		}
	}
	if (c->st == C_TLS_HS) {
		int r = wolfSSL_accept(c->ssl), e;

		if (r != WOLFSSL_SUCCESS) {
			e = wolfSSL_get_error(c->ssl, r);
			if (e != WOLFSSL_ERROR_WANT_READ && e != WOLFSSL_ERROR_WANT_WRITE)
				c->dead = 1;
			return;
		}
		c->st = C_HTTP;
	}
	for (;;) {
		ssize_t r;

		if (c->dead || c->st == C_DONE || c->st == C_FETCH || c->st == C_FILE)
			break;
		if (c->st == C_WS && (c->close_after || moq_qmux_closing(c->q)))
			break;
		r = conn_read(c);
		if (r < 0) {
			if (c->st == C_WS && c->q != NULL && !moq_qmux_closing(c->q)) {
				/* the peer went away without a close */
				c->sclose = 1;
				c->sclose_code = 0;
				c->sclose_local = 0;
			}
			c->dead = 1;
			return;
		}
		if (r == 0 && c->inoff == c->inlen)
			break;
		if (c->st == C_HTTP) {
			if (http_feed(c, now) || r == 0)
				break;
			continue;
		}
		if (c->st == C_WS)
			ws_input(c, now);
		if (r == 0)
			break;
	}
}

static void conn_free(struct wconn *c)
{
	struct moq_web *w = c->w;

	sess_end(c);
	if (c->s != NULL) { /* the connection went: the session ends with it */
		struct moq_session *s = c->s;

		c->s = NULL;
		moq_binding_closed(s, 0, 0);
	}
	fetch_release(c);
	if (c->file_fd >= 0)
		close(c->file_fd);
	if (c->q != NULL) {
		moq_qmux_free(c->q);
		w->st.ws_open--;
	}
	if (c->wsf != NULL)
		wslay_frame_context_free(c->wsf);
	if (c->ssl != NULL)
		wolfSSL_free(c->ssl);
	free(c->tlsrec);
	free(c->maskbuf);
	/* out of the dirty list (ending the session above may have put it
	 * back there) */
	for (struct wconn **pp = &w->dirty; *pp != NULL; pp = &(*pp)->dnext)
		if (*pp == c) {
			*pp = c->dnext;
			break;
		}
	if (c->fd >= 0) {
		epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	w->st.conns--;
	free(c);
}

/* Everything due on @c: input handled by the caller; output, session end. */
static void client_progress(struct wconn *c, uint64_t now);

static void conn_service(struct wconn *c, uint64_t now)
{
	if (c->st == C_CONNECTING || c->st == C_WS_HS)
		client_progress(c, now);
	for (int i = 0; i < 16 && (c->st == C_FETCH || c->st == C_FILE) && !c->dead; i++) {
		size_t before = c->outlen;

		if (c->st == C_FETCH)
			fetch_step(c, now);
		else
			file_step(c);
		conn_flush(c, now);
		if (c->outoff != c->outlen || c->outlen == before)
			break; /* the socket is full, or nothing new */
	}
	conn_flush(c, now);
	if (c->q != NULL && moq_qmux_closing(c->q) && !c->sclose) {
		c->sclose = 1;
		c->sclose_code = moq_qmux_close_code(c->q);
	}
	sess_end(c);
}

static void accept_some(struct moq_web *w, int lfd, uint64_t now)
{
	for (int i = 0; i < 64; i++) {
		struct wconn *c;
		struct epoll_event ev;
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;

		if (fd < 0)
			return;
		if (w->st.conns >= w->cfg.max_conns) {
			w->st.conns_refused++;
			close(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (c == NULL) {
			w->st.conns_refused++;
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->w = w;
		c->fd = fd;
		c->t0 = now;
		c->st = C_SNIFF;
		c->file_fd = -1;
		http_parser_init(&c->hp, HTTP_REQUEST);
		c->hp.data = c;
		ev.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP;
		ev.data.ptr = c;
		if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
			close(fd);
			free(c);
			continue;
		}
		c->next = w->conns;
		if (w->conns)
			w->conns->prev = c;
		w->conns = c;
		w->st.conns++;
		w->st.conns_total++;
	}
}

int moq_web_poll(struct moq_web *w, uint64_t now)
{
	struct epoll_event ev[64];
	int n = epoll_wait(w->ep, ev, 64, 0), work = 0;
	struct wconn *c, *nx;

	for (int i = 0; i < n; i++) {
		if ((uintptr_t)ev[i].data.ptr < 8) {
			accept_some(w, w->lfd[(uintptr_t)ev[i].data.ptr], now);
			continue;
		}
		c = ev[i].data.ptr;
		if (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
			conn_input(c, now);
		mark(c);
	}
	work += n > 0 ? n : 0;
	/* the connections something happened to (input, fanout writes) */
	while ((c = w->dirty) != NULL) {
		w->dirty = c->dnext;
		c->dirty = 0;
		if (!c->dead)
			conn_service(c, now);
		if (c->dead)
			conn_free(c);
		work++;
	}
	if (now >= w->next_tick) {
		w->next_tick = now + TICK_NS;
		for (c = w->conns; c != NULL; c = nx) {
			nx = c->next;
			if (c->q != NULL && moq_qmux_timers(c->q, now))
				c->dead = 1; /* idle: closed without a word (RFC 9000, 10.1) */
			if (c->st == C_FETCH || c->st == C_FILE || c->q != NULL)
				conn_service(c, now);
			if (c->t0 == 0) /* a client connection: from its first tick */
				c->t0 = now;
			if ((c->st == C_SNIFF || c->st == C_TLS_HS || c->st == C_HTTP ||
			     c->st == C_CONNECTING || c->st == C_WS_HS) &&
			    now - c->t0 > REQ_TIMEOUT_NS)
				c->dead = 1;
			if (c->dead)
				conn_free(c);
		}
		/* free what the pass above marked dead through the dirty list */
		while ((c = w->dirty) != NULL) {
			w->dirty = c->dnext;
			c->dirty = 0;
			if (!c->dead)
				conn_service(c, now);
			if (c->dead)
				conn_free(c);
		}
	}
	return work;
}

struct moq_web *moq_web_create(const struct moq_web_cfg *cfg, char *err, size_t errlen)
{
	struct moq_web *w;
	struct epoll_event ev;

	if (cfg == NULL || (cfg->node == NULL && cfg->naddr > 0) || cfg->naddr > 8) {
		snprintf(err, errlen, "web: bad configuration");
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL) {
		snprintf(err, errlen, "web: out of memory");
		return NULL;
	}
	w->cfg = *cfg;
	if (w->cfg.max_conns == 0)
		w->cfg.max_conns = 256;
	if (cfg->fingerprint != NULL) {
		memcpy(w->fp, cfg->fingerprint, 32);
		w->has_fp = 1;
	}
	w->ep = epoll_create1(EPOLL_CLOEXEC);
	if (w->ep < 0) {
		snprintf(err, errlen, "web: epoll: %s", strerror(errno));
		free(w);
		return NULL;
	}
	for (unsigned int i = 0; i < cfg->naddr; i++) {
		int fd = socket(cfg->addr[i]->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		                0),
		    one = 1;
		char ip[INET6_ADDRSTRLEN] = "?";
		unsigned int port = 0;

		if (cfg->addr[i]->sa_family == AF_INET) {
			const struct sockaddr_in *a = (const void *)cfg->addr[i];

			inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
			port = ntohs(a->sin_port);
		} else {
			const struct sockaddr_in6 *a = (const void *)cfg->addr[i];

			inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
			port = ntohs(a->sin6_port);
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		}
		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
		    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
		    bind(fd, cfg->addr[i], cfg->addrlen[i]) != 0 || listen(fd, 512) != 0) {
			snprintf(err, errlen, "--tcp: cannot listen on TCP %s port %u: %s", ip,
			         port, strerror(errno));
			if (fd >= 0)
				close(fd);
			w->nl = i;
			moq_web_destroy(w);
			return NULL;
		}
		w->lfd[i] = fd;
		ev.events = EPOLLIN;
		ev.data.ptr = (void *)(uintptr_t)i;
		epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev);
	}
	w->nl = cfg->naddr;
	return w;
}

void moq_web_set_tls(struct moq_web *w, void *tls_ctx, const uint8_t *fingerprint)
{
	w->cfg.tls_ctx = tls_ctx;
	if (fingerprint != NULL) {
		memcpy(w->fp, fingerprint, 32);
		w->has_fp = 1;
	}
}

int moq_web_drain(struct moq_web *w, int close)
{
	int n = 0;

	w->draining = 1;
	if (!close)
		return 0;
	for (struct wconn *c = w->conns; c != NULL; c = c->next)
		if (!c->client && c->q != NULL && !moq_qmux_closing(c->q)) {
			moq_qmux_close(c->q, 0); /* APPLICATION_CLOSE 0, then Close 1000 */
			mark(c);
			n++;
		}
	return n;
}

void moq_web_stats(const struct moq_web *w, struct moq_web_stats *out)
{
	*out = w->st;
}

int moq_web_fd(const struct moq_web *w)
{
	return w->ep;
}

unsigned int moq_web_port(const struct moq_web *w)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);

	if (w->nl == 0 || getsockname(w->lfd[0], (struct sockaddr *)&ss, &l) != 0)
		return 0;
	return ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
	                               : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

void moq_web_destroy(struct moq_web *w)
{
	if (w == NULL)
		return;
	while (w->conns != NULL)
		conn_free(w->conns);
	for (unsigned int i = 0; i < w->nl; i++)
		close(w->lfd[i]);
	if (w->ep >= 0)
		close(w->ep);
	free(w);
}

void *moq_web_tls_ctx_new(void *quic_ctx)
{
	WOLFSSL_CTX *ctx;
	WOLFSSL_X509 *x;
	WOLFSSL_EVP_PKEY *k;

	if (quic_ctx == NULL)
		return NULL;
	x = wolfSSL_CTX_get0_certificate(quic_ctx);
	k = wolfSSL_CTX_get0_privatekey(quic_ctx);
	/* TLS 1.2 and 1.3 (wolfSSL's build has NO_OLD_TLS) */
	ctx = wolfSSL_CTX_new(wolfSSLv23_server_method());
	if (ctx == NULL || x == NULL || k == NULL)
		goto fail;
	if (wolfSSL_CTX_use_certificate(ctx, x) != WOLFSSL_SUCCESS ||
	    wolfSSL_CTX_use_PrivateKey(ctx, k) != WOLFSSL_SUCCESS ||
	    wolfSSL_CTX_check_private_key(ctx) != WOLFSSL_SUCCESS)
		goto fail;
	return ctx;
fail:
	wolfSSL_CTX_free(ctx);
	return NULL;
}

void moq_web_tls_ctx_free(void *ctx)
{
	wolfSSL_CTX_free(ctx);
}

/* --- the client side (moq_web_connect) ----------------------------------- */

/* The upgrade is out; read the server's answer: "HTTP/1.1 101" with the
 * subprotocol it chose, then qmux runs on what follows. */
static void client_progress(struct wconn *c, uint64_t now)
{
	if (c->st == C_CONNECTING) {
		int e = 0;
		socklen_t l = sizeof(e);
		char req[2600], key[32];
		uint8_t nonce[16];
		int n;

		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &l) != 0 || e == EINPROGRESS)
			return;
		if (e != 0) {
			c->dead = 1;
			return;
		}
		{
			struct sockaddr_storage ss;

			l = sizeof(ss);
			if (getpeername(c->fd, (struct sockaddr *)&ss, &l) != 0)
				return; /* not connected yet */
		}
		for (int i = 0; i < 16; i++) {
			uint8_t k[4];

			mask_key(c, k);
			nonce[i] = k[0];
		}
		/* RFC 6455, 4.1: a base64 16-byte nonce */
		{
			static const char t[] =
			        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
			size_t o = 0;

			for (int i = 0; i < 16; i += 3) {
				uint32_t v = (uint32_t)nonce[i] << 16 |
				             (i + 1 < 16 ? (uint32_t)nonce[i + 1] << 8 : 0) |
				             (i + 2 < 16 ? nonce[i + 2] : 0);

				key[o++] = t[(v >> 18) & 63];
				key[o++] = t[(v >> 12) & 63];
				key[o++] = i + 1 < 16 ? t[(v >> 6) & 63] : '=';
				key[o++] = i + 2 < 16 ? t[v & 63] : '=';
			}
			key[o] = 0;
		}
		n = snprintf(req, sizeof(req),
		             "GET /%s HTTP/1.1\r\nHost: moqdp\r\nUpgrade: websocket\r\n"
		             "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
		             "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: "
		             "qmux-01.moq-lite-05, qmux-01.moq-lite-04\r\n\r\n",
		             c->url[0] == '/' ? c->url + 1 : c->url, key);
		if (n < 0 || (size_t)n >= sizeof(req)) {
			c->dead = 1;
			return;
		}
		out_put(c, req, (size_t)n);
		c->st = C_WS_HS;
		return;
	}
	/* C_WS_HS */
	for (;;) {
		ssize_t r = conn_read(c);
		const uint8_t *end;
		const char *name = NULL;
		char *p, *hdr;
		int v;

		if (r < 0) {
			c->dead = 1;
			return;
		}
		end = memmem(c->in + c->inoff, c->inlen - c->inoff, "\r\n\r\n", 4);
		if (end == NULL) {
			if (r == 0)
				return;
			continue;
		}
		hdr = (char *)c->in + c->inoff;
		if (c->inlen - c->inoff < 12 || memcmp(hdr, "HTTP/1.1 101", 12) != 0) {
			c->dead = 1;
			return;
		}
		c->in[end - c->in] = 0; /* the blank line's CR: the headers end here */
		p = strcasestr(hdr, "\r\nSec-WebSocket-Protocol:");
		v = p ? moq_ws_select(p + 25, strcspn(p + 25, "\r"), &name) : MOQ_ERR_NOTFOUND;
		c->inoff = (size_t)(end - c->in) + 4;
		if (v < 0) {
			c->dead = 1;
			return;
		}
		c->ws_version = v;
		if (wslay_frame_context_init(&c->wsf, &wsl_cb, c) != 0) {
			c->dead = 1;
			return;
		}
		{
			struct moq_qmux_cfg qc;

			memset(&qc, 0, sizeof(qc));
			qc.server = 0;
			moq_qmux_default_params(&qc.local);
			qc.cb = &ws_qcb;
			qc.user = c;
			c->q = moq_qmux_new(&qc, now);
		}
		if (c->q == NULL) {
			c->dead = 1;
			return;
		}
		c->st = C_WS;
		c->w->st.ws_sessions++;
		c->w->st.ws_open++;
		ws_input(c, now); /* what came with the answer */
		return;
	}
}

int moq_web_connect(struct moq_web *w, struct moq_node *node, const struct sockaddr *to,
                    socklen_t tolen, const char *path, int role, void *user)
{
	struct epoll_event ev;
	struct wconn *c;
	int fd, one = 1;

	if (node == NULL || to == NULL || (path && strlen(path) >= sizeof(c->url)))
		return MOQ_ERR_INVAL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return MOQ_ERR_NOMEM;
	c->maskbuf = malloc(REC_CAP + 14);
	fd = socket(to->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->maskbuf == NULL || fd < 0) {
		free(c->maskbuf);
		free(c);
		if (fd >= 0)
			close(fd);
		return MOQ_ERR_NOMEM;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, to, tolen) != 0 && errno != EINPROGRESS) {
		close(fd);
		free(c->maskbuf);
		free(c);
		return MOQ_ERR_IO;
	}
	c->w = w;
	c->fd = fd;
	c->file_fd = -1;
	c->client = 1;
	c->node = node;
	c->role = role;
	c->user = user;
	c->mask_seed = (uint32_t)(uintptr_t)c ^ 0x9e3779b9u ^ (uint32_t)fd;
	if (c->mask_seed == 0)
		c->mask_seed = 1;
	if (path != NULL) {
		c->urllen = strlen(path);
		memcpy(c->url, path, c->urllen + 1);
	}
	c->st = C_CONNECTING;
	ev.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP;
	ev.data.ptr = c;
	if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
		close(fd);
		free(c->maskbuf);
		free(c);
		return MOQ_ERR_IO;
	}
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
	w->st.conns++;
	w->st.conns_total++;
	mark(c);
	return 0;
}
