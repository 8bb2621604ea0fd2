/* SPDX-License-Identifier: MIT */
/*
 * node_serve.c: a moq/ relay node served on a kernel UDP socket until a
 * child process exits (node_serve.h).
 */
#include "node_serve.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "media.h"

/* One round at @now: what came in, the node's work, what goes out. */
static void serve_round(const struct node_serve *s, uint64_t now)
{
	static uint8_t buf[2048], out[32][MOQ_QUIC_MAX_UDP_PAYLOAD];

	for (int i = 0; i < 256; i++) {
		struct moq_quic_addr from;
		socklen_t fl = sizeof(from.u);
		ssize_t n;

		memset(&from, 0, sizeof(from));
		n = recvfrom(s->fd, buf, sizeof(buf), MSG_DONTWAIT, &from.u.sa, &fl);
		if (n < 0)
			break;
		from.len = fl;
		if (s->drop != NULL && s->drop(s->drop_arg, buf, (size_t)n))
			continue;
		moq_quic_endpoint_recv(s->ep, buf, (size_t)n, s->local, &from, now);
	}
	moq_node_poll(s->node, now);
	moq_cache_expire(s->cache, now);
	moq_quic_endpoint_timers(s->ep, now);
	for (int round = 0; round < 16; round++) {
		struct moq_quic_pkt pk[32];
		int n;

		for (int i = 0; i < 32; i++) {
			pk[i].data = out[i];
			pk[i].cap = sizeof(out[i]);
		}
		n = moq_quic_endpoint_send(s->ep, pk, 32, now);
		for (int i = 0; i < n; i++)
			sendto(s->fd, pk[i].data, pk[i].len, 0, &pk[i].remote.u.sa,
			       pk[i].remote.len);
		if (n < 32)
			break;
	}
}

int node_serve_until_exit(const struct node_serve *s, pid_t pid, uint64_t limit_ns,
                          void (*each)(void *arg, uint64_t elapsed_ns), void *arg)
{
	uint64_t t0 = moq_lg_now_ns();
	int status = -1;

	for (;;) {
		struct pollfd p = {.fd = s->fd, .events = POLLIN};
		uint64_t now;

		poll(&p, 1, 1);
		now = moq_lg_now_ns();
		serve_round(s, now);
		if (each != NULL)
			each(arg, now - t0);
		if (waitpid(pid, &status, WNOHANG) == pid)
			return status;
		if (now - t0 > limit_ns) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
	}
}
