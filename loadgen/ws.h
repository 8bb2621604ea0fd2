/* SPDX-License-Identifier: MIT */
/*
 * ws.h: moqdp-load --transport ws (ws.c): sessions over WebSocket + qmux-01
 * to the relay's TCP port (web.h). Not a public header.
 */
#ifndef MOQ_LOADGEN_WS_H
#define MOQ_LOADGEN_WS_H

#include <stddef.h>

#include "quic.h"

struct moq_web;
struct moq_node;

/* moq_lg_ws_open: a client-only listener-less moq_web (poll it with
 * moq_web_poll; moq_web_fd for an epoll set). NULL with one line in @err. */
struct moq_web *moq_lg_ws_open(char *err, size_t errlen);

/* moq_lg_ws_connect: a WebSocket session to @relay (TCP, the same port) on
 * @node with @role; @user becomes the session's user pointer once it
 * exists (session_ready follows). Returns 0 or a MOQ_ERR_*. */
int moq_lg_ws_connect(struct moq_web *w, struct moq_node *node, const struct moq_quic_addr *relay,
                      const char *path, int role, void *user);

#endif /* MOQ_LOADGEN_WS_H */
