/* SPDX-License-Identifier: MIT */
/*
 * node_serve.h: a moq/ relay node served in the test's own process on a
 * kernel UDP socket (tests/node_serve.c), for the suites that run moqdp-load
 * as a child process against it (test_loadgen_kernel.c,
 * test_loadgen_light.c).
 */
#ifndef MOQ_TESTS_NODE_SERVE_H
#define MOQ_TESTS_NODE_SERVE_H

#include <stdint.h>
#include <sys/types.h>

#include "cache.h"
#include "moq.h"
#include "quic.h"

/* What is served: the socket, the endpoint bound to it at @local, its node
 * and the node's cache. */
struct node_serve {
	int fd;
	struct moq_quic_endpoint *ep;
	struct moq_node *node;
	struct moq_cache *cache;
	const struct moq_quic_addr *local;
	/* when not NULL: a received datagram it returns nonzero for is dropped
	 * (loss injected by a test) */
	int (*drop)(void *arg, const uint8_t *data, size_t len);
	void *drop_arg;
};

/*
 * node_serve_until_exit: serve @s (each round: up to 1 ms for a datagram,
 * every datagram waiting, the node's poll, the cache's expiry, the
 * endpoint's timers, up to 16 bursts of 32 out) until child @pid exits or
 * @limit_ns passes (it is then killed). @each, when not NULL, runs after
 * every round with @arg and the ns since the start. Returns the child's
 * wait status, or -1 after a kill.
 */
int node_serve_until_exit(const struct node_serve *s, pid_t pid, uint64_t limit_ns,
                          void (*each)(void *arg, uint64_t elapsed_ns), void *arg);

#endif /* MOQ_TESTS_NODE_SERVE_H */
