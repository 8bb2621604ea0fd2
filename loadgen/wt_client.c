/* SPDX-License-Identifier: MIT */
/*
 * wt_client.c: moqdp-load over WebTransport (wt_client.h).
 */
#include "wt_client.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "h3.h"

const char *const *moq_lg_wt_alpns(size_t *count)
{
	static const char *const alpns[] = {MOQ_H3_ALPN};

	*count = 1;
	return alpns;
}

int moq_lg_wt_connect(struct moq_node *n, struct moq_quic_endpoint *ep,
                      const struct moq_quic_addr *local, const struct moq_quic_addr *relay,
                      const char *query, int role, void *user, void (*failed)(void *user),
                      uint64_t now)
{
	char ip[INET6_ADDRSTRLEN], authority[INET6_ADDRSTRLEN + 8], path[600];
	int e = 0;

	if (relay->u.sa.sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &relay->u.in6.sin6_addr, ip, sizeof(ip));
		snprintf(authority, sizeof(authority), "[%s]:%u", ip,
		         ntohs(relay->u.in6.sin6_port));
	} else {
		inet_ntop(AF_INET, &relay->u.in4.sin_addr, ip, sizeof(ip));
		snprintf(authority, sizeof(authority), "%s:%u", ip, ntohs(relay->u.in4.sin_port));
	}
	/* BINDINGS.md 1: the URL path roots the session (the relay's root
	 * here); the token rides in ?jwt= */
	snprintf(path, sizeof(path), "/%s", query ? query : "");
	return moq_wt_dial(ep, local, relay, n, authority, path, role, user, failed, now, &e) ? 0
	                                                                                      : e;
}
