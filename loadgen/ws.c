/* SPDX-License-Identifier: MIT */
/*
 * ws.c: moqdp-load --transport ws: the client's sessions over WebSocket
 * (qmux-01, web.h) instead of QUIC: one struct moq_web with no listener
 * holds every TCP connection; client.c opens sessions through
 * moq_lg_ws_connect (its connect_one hook) and main.c polls it in its
 * kernel-socket loop (its epoll set holds the web's, ws.h).
 */
#include "ws.h"

#include <stdio.h>
#include <string.h>

#include "web.h"

struct moq_web *moq_lg_ws_open(char *err, size_t errlen)
{
	struct moq_web_cfg wc;

	memset(&wc, 0, sizeof(wc));
	wc.max_conns = 1u << 20; /* the client bounds itself (--subscribers) */
	return moq_web_create(&wc, err, errlen);
}

int moq_lg_ws_connect(struct moq_web *w, struct moq_node *node, const struct moq_quic_addr *relay,
                      const char *path, int role, void *user)
{
	/* the relay's TCP port is its UDP port (BINDINGS.md, section 3) */
	return moq_web_connect(w, node, &relay->u.sa, relay->len, path, role, user);
}
