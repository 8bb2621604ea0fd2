/* SPDX-License-Identifier: MIT */
/*
 * client.c: the client side (moq_web_connect; moqdp-load --transport ws):
 * the WebSocket upgrade out, the server's 101 in, then qmux as a client
 * whose frames are masked (RFC 6455, 5.3).
 */
#define _GNU_SOURCE
#include "web_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include "moq.h"

/* --- the client side (moq_web_connect) ----------------------------------- */

/* The upgrade is out; read the server's answer: "HTTP/1.1 101" with the
 * subprotocol it chose, then qmux runs on what follows. */
void web_client_progress(struct wconn *c, uint64_t now)
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

			web_mask_key(c, k);
			nonce[i] = k[0];
		}
		/* RFC 6455, 4.1: a base64 16-byte nonce */
		web_b64(nonce, sizeof(nonce), key);
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
		web_out_put(c, req, (size_t)n);
		c->st = C_WS_HS;
		return;
	}
	/* C_WS_HS */
	for (;;) {
		ssize_t r = web_conn_read(c);
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
		if (wslay_frame_context_init(&c->wsf, &web_wsl_cb, c) != 0) {
			c->dead = 1;
			return;
		}
		if (web_qmux_start(c, 0, now) != 0) {
			c->dead = 1;
			return;
		}
		c->st = C_WS;
		c->w->st.ws_sessions++;
		c->w->st.ws_open++;
		web_ws_input(c, now); /* what came with the answer */
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
	c->maskbuf = malloc(REC_OUT_CAP);
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
	web_conn_link(w, c);
	web_mark(c);
	return 0;
}
