/* SPDX-License-Identifier: MIT */
/*
 * conn.c: one worker's HTTP/1.1 listener on TCP (web.h; BINDINGS.md,
 * sections 2 and 3): the listening sockets, the connections and their
 * buffers, the poll loop, timers and deadlines.
 *
 * Every worker binds its own socket with SO_REUSEPORT (the kernel spreads
 * connections) and polls it with epoll (edge-triggered, timeout 0) from its
 * loop: no thread of its own. A connection whose first byte is 0x16 (a TLS
 * handshake record) is TLS (wolfSSL, the relay's certificate), otherwise
 * plain. What a connection then is lives beside: http.c (requests and
 * routing), ws.c (WebSocket framing), binding.c (qmux records as a moq-lite
 * binding), fetch.c (/fetch, /announced), static.c (/demo/), client.c (the
 * client side of moqdp-load).
 */
#define _GNU_SOURCE
#include "web_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include "moq.h"

void web_mark(struct wconn *c)
{
	if (!c->dirty) {
		c->dirty = 1;
		c->dnext = c->w->dirty;
		c->w->dirty = c;
	}
}

int web_out_room(const struct wconn *c)
{
	return (int)(OUT_CAP - c->outlen);
}

void web_out_put(struct wconn *c, const void *p, size_t n)
{
	if (c->outoff == c->outlen && c->tls_pend == 0)
		c->outoff = c->outlen = 0;
	if (n > OUT_CAP - c->outlen) {
		c->dead = 1; /* cannot happen with the sizes used; never overrun */
		return;
	}
	memcpy(c->out + c->outlen, p, n);
	c->outlen += n;
	web_mark(c);
}

void web_respond(struct wconn *c, int code, const char *reason, const char *ctype, const char *body,
                 size_t blen)
{
	char h[512];
	int n = snprintf(h, sizeof(h),
	                 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
	                 "Access-Control-Allow-Origin: *\r\nCache-Control: no-store\r\n"
	                 "Connection: close\r\n\r\n",
	                 code, reason, ctype, blen);

	web_out_put(c, h, (size_t)n);
	if (blen > 0)
		web_out_put(c, body, blen);
	c->close_after = 1;
	c->st = C_DONE;
}

void web_respond_text(struct wconn *c, int code, const char *reason, const char *body)
{
	web_respond(c, code, reason, "text/plain; charset=utf-8", body, strlen(body));
}

/* Write @p / @n to the connection: plain send, or TLS. Returns the bytes
 * taken (0: would block), or -1 (connection gone). */
ssize_t web_raw_write(struct wconn *c, const uint8_t *p, size_t n)
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

/* Flush the output bytes. Returns 1 all out, 0 blocked, -1 gone. */
int web_out_flush(struct wconn *c)
{
	while (c->outoff < c->outlen) {
		size_t n = c->tls_pend ? c->tls_pend : c->outlen - c->outoff;
		ssize_t r;

		if (c->ssl != NULL && n > 16384)
			n = 16384;
		r = web_raw_write(c, c->out + c->outoff, n);
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
		c->wout += (uint64_t)r;
	}
	c->outoff = c->outlen = 0;
	return 1;
}

ssize_t web_conn_read(struct wconn *c)
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

		if (c->dead || c->st == C_DONE || c->st == C_FETCH || c->st == C_FILE ||
		    c->st == C_BODY || c->st == C_AUTH)
			break;
		if (c->st == C_WS && (c->close_after || moq_qmux_closing(c->q)))
			break;
		r = web_conn_read(c);
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
			if (web_http_feed(c, now) || r == 0)
				break;
			continue;
		}
		if (c->st == C_WS)
			web_ws_input(c, now);
		if (r == 0)
			break;
	}
}

void web_conn_free(struct wconn *c)
{
	struct moq_web *w = c->w;

	web_sess_end(c);
	if (c->s != NULL) { /* the connection went: the session ends with it */
		struct moq_session *s = c->s;

		c->s = NULL;
		moq_binding_closed(s, 0, 0);
	}
	web_fetch_release(c);
	web_http_auth_release(c);
	free(c->body);
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
static void conn_service(struct wconn *c, uint64_t now)
{
	if (c->st == C_CONNECTING || c->st == C_WS_HS)
		web_client_progress(c, now);
	for (int i = 0;
	     i < 16 && (c->st == C_FETCH || c->st == C_FILE || c->st == C_BODY) && !c->dead; i++) {
		size_t before = c->outlen;

		if (c->st == C_FETCH)
			web_fetch_step(c, now);
		else if (c->st == C_BODY)
			web_body_step(c);
		else
			web_file_step(c);
		web_conn_flush(c, now);
		if (c->outoff != c->outlen || c->outlen == before)
			break; /* the socket is full, or nothing new */
	}
	web_conn_flush(c, now);
	/* the write deadline starts when output waits and restarts with every
	 * byte the peer takes */
	if (!c->rbusy && c->outoff == c->outlen)
		c->wblocked = 0;
	else if (c->wblocked == 0 || c->wout != c->wbytes)
		c->wblocked = now ? now : 1;
	c->wbytes = c->wout;
	if (c->q != NULL && moq_qmux_closing(c->q) && !c->sclose) {
		c->sclose = 1;
		c->sclose_code = moq_qmux_close_code(c->q);
	}
	web_sess_end(c);
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
		web_conn_link(w, c);
	}
}

/* Service the connections on the dirty list (something happened to them:
 * input, fanout writes, a close). Returns how many. */
static int service_dirty(struct moq_web *w, uint64_t now)
{
	struct wconn *c;
	int n = 0;

	while ((c = w->dirty) != NULL) {
		w->dirty = c->dnext;
		c->dirty = 0;
		if (!c->dead)
			conn_service(c, now);
		if (c->dead)
			web_conn_free(c);
		n++;
	}
	return n;
}

void web_conn_link(struct moq_web *w, struct wconn *c)
{
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
	w->st.conns++;
	w->st.conns_total++;
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
		web_mark(c);
	}
	work += n > 0 ? n : 0;
	/* the connections something happened to (input, fanout writes) */
	work += service_dirty(w, now);
	if (now >= w->next_tick) {
		w->next_tick = now + TICK_NS;
		for (c = w->conns; c != NULL; c = nx) {
			nx = c->next;
			if (c->q != NULL && moq_qmux_timers(c->q, now))
				c->dead = 1; /* idle: closed without a word (RFC 9000, 10.1) */
			if (c->st == C_AUTH) /* --auth-url: the answer in? (http.c) */
				web_http_auth_step(c, now);
			if (c->st == C_FETCH || c->st == C_FILE || c->st == C_BODY || c->q != NULL)
				conn_service(c, now);
			/* the write deadline: output pending, not a byte taken */
			if (!c->dead && c->wblocked != 0 &&
			    now - c->wblocked > w->cfg.write_timeout_ns) {
				w->st.closes_slow++;
				c->dead = 1;
			}
			if (c->t0 == 0) /* a client connection: from its first tick */
				c->t0 = now;
			if ((c->st == C_SNIFF || c->st == C_TLS_HS || c->st == C_HTTP ||
			     c->st == C_CONNECTING || c->st == C_WS_HS) &&
			    now - c->t0 > REQ_TIMEOUT_NS)
				c->dead = 1;
			if (c->dead)
				web_conn_free(c);
		}
		/* free what the pass above marked dead through the dirty list */
		service_dirty(w, now);
	}
	return work;
}

/* Whether another socket listens on TCP @sa: a bind with SO_REUSEADDR
 * (past TIME_WAIT) but without SO_REUSEPORT fails with EADDRINUSE. */
static bool tcp_port_taken(const struct sockaddr *sa, socklen_t len)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	bool taken;

	if (fd < 0)
		return false; /* (the bind that follows reports it) */
	if (sa->sa_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	taken = bind(fd, sa, len) != 0 && errno == EADDRINUSE;
	close(fd);
	return taken;
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
	if (w->cfg.write_timeout_ns == 0)
		w->cfg.write_timeout_ns = WRITE_TIMEOUT_NS;
	if (w->cfg.max_fetches == 0)
		w->cfg.max_fetches = FETCH_MAX;
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
		if (fd >= 0 && cfg->port_must_be_free && port != 0 &&
		    tcp_port_taken(cfg->addr[i], cfg->addrlen[i])) {
			snprintf(err, errlen,
			         "--tcp: TCP %s port %u is in use by another process (the listener "
			         "binds with SO_REUSEPORT: the two would split its connections)",
			         ip, port);
			close(fd);
			w->nl = i;
			moq_web_destroy(w);
			return NULL;
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
			web_mark(c);
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
		web_conn_free(w->conns);
	for (unsigned int i = 0; i < w->nl; i++)
		close(w->lfd[i]);
	if (w->ep >= 0)
		close(w->ep);
	web_auth_cache_clear(w);
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
	quic_tls_keep_sni(ctx); /* server_name for --auth-url (http.c) */
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
