/* SPDX-License-Identifier: MIT */
/*
 * binding.c: a WebSocket connection as a moq-lite binding (moq.h): the
 * qmux-01 engine (qmux.c) between the session and the socket. Records out
 * are a WebSocket header and the record's iovecs, written with sendmsg
 * (plain: the fanout's cache memory goes to the socket as it is) or
 * wolfSSL_write (TLS: copied once); a record's stream bytes are
 * acknowledged to the session once the socket / TLS layer took the whole
 * record (moq.h, moq_binding_stream_acked).
 */
#define _GNU_SOURCE
#include "web_int.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include "moq.h"

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
		r = web_raw_write(c, c->tlsrec, c->rtot);
		if (r < 0)
			return -1;
		if (r == 0)
			return 0;
		c->w->st.bytes_out += (uint64_t)r;
		c->wout += (uint64_t)r;
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
		c->wout += (uint64_t)r;
	}
	return 1;
}

/* Hand the session its end (deferred out of the engine's callbacks). */
void web_sess_end(struct wconn *c)
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
void web_conn_flush(struct wconn *c, uint64_t now)
{
	for (;;) {
		int r;

		if (!c->rbusy) {
			r = web_out_flush(c);
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

			if (n < 0 || (n > 0 && len > MOQ_QMUX_MAX_SEND_RECORD)) {
				c->dead = 1; /* never past tlsrec / maskbuf */
				return;
			}
			if (n == 0)
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
				web_mask_key(c, k);
				o = h + 4;
				for (int i = 1; i <= n; i++) {
					web_ws_mask(m + o, c->riov[i].iov_base, c->riov[i].iov_len,
					            k, o - h - 4);
					o += c->riov[i].iov_len;
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
		web_ws_close_frame(c, c->ws_code                         ? c->ws_code
		                      : c->close_app || !c->sclose_local ? WS_CLOSE_NORMAL
		                                                         : WS_CLOSE_PROTOCOL);
		if (web_out_flush(c) < 0)
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

	web_mark(c);
	return moq_qmux_stream_write(c->q, sid, iov, n, fin);
}

static int b_reset(void *b, int64_t sid, uint64_t code)
{
	struct wconn *c = b;

	web_mark(c);
	return moq_qmux_stream_reset(c->q, sid, code);
}

static int b_stop(void *b, int64_t sid, uint64_t code)
{
	struct wconn *c = b;

	web_mark(c);
	return moq_qmux_stream_stop_sending(c->q, sid, code);
}

static void b_close(void *b, uint64_t code)
{
	struct wconn *c = b;

	web_mark(c);
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

static void b_peer(void *b, char *remote, char *local, size_t acap, char *server_name,
                   size_t scap)
{
	struct wconn *c = b;
	const char *rp, *lp;

	web_conn_addrs(c, remote, local, acap, &rp, &lp);
	if (!rp)
		remote[0] = 0;
	if (!lp)
		local[0] = 0;
	if (!web_conn_server_name(c, server_name, scap))
		server_name[0] = 0;
}

static const struct moq_binding_ops ws_ops = {
        .stream_open = b_open,
        .stream_write = b_write,
        .stream_reset = b_reset,
        .stream_stop_sending = b_stop,
        .close = b_close,
        .get_info = b_info,
        .transport = "websocket",
        .get_peer = b_peer,
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
	if (c->w->dry) /* moq_web_ws_parse: no node */
		return;
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

	web_mark(c);
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
	web_mark(c);
}

const struct moq_qmux_callbacks web_qmux_cb = {
        .stream_data = q_data,
        .stream_reset = q_reset,
        .stream_stop_sending = q_stop,
        .stream_acked = q_acked,
        .stream_closed = q_sclosed,
        .writable = q_writable,
        .closed = q_closed,
};

int web_qmux_start(struct wconn *c, int server, uint64_t now)
{
	struct moq_qmux_cfg qc;

	memset(&qc, 0, sizeof(qc));
	qc.server = server;
	moq_qmux_default_params(&qc.local);
	qc.cb = &web_qmux_cb;
	qc.user = c;
	c->q = moq_qmux_new(&qc, now);
	return c->q != NULL ? 0 : MOQ_ERR_NOMEM;
}
