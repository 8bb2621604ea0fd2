/* SPDX-License-Identifier: MIT */
/*
 * wt_client.h: moqdp-load's sessions over WebTransport (--transport wt):
 * a QUIC connection with ALPN "h3" taken over by h3/'s layer, which sends
 * the extended CONNECT and starts the moq-lite session on the 200 (h3.h).
 */
#ifndef MOQ_LOADGEN_WT_CLIENT_H
#define MOQ_LOADGEN_WT_CLIENT_H

#include <stdint.h>

#include "moq.h"
#include "quic.h"

/* How moqdp-load reaches the relay. */
enum moq_lg_transport {
	MOQ_LG_TRANSPORT_QUIC = 0, /* raw QUIC, the moq-lite ALPNs */
	MOQ_LG_TRANSPORT_WT = 1,   /* WebTransport over HTTP/3 (ALPN h3) */
};

/* moq_lg_wt_alpns: the ALPN list of a WebTransport client endpoint. */
const char *const *moq_lg_wt_alpns(size_t *count);

/*
 * moq_lg_wt_connect: connect to @relay from @local and run the session of
 * node @n over WebTransport: URL https://<relay>/@query (@query "" or
 * "?jwt=..."), @role as moq_node_connect's, @user the session's user
 * pointer once it is ready (session_ready); @failed(@user) when the
 * connection ends before a session began. Returns 0, or a negative
 * MOQ_ERR_* of moq_quic_connect (MOQ_ERR_LIMIT, MOQ_ERR_NOMEM, ...).
 */
int moq_lg_wt_connect(struct moq_node *n, struct moq_quic_endpoint *ep,
                      const struct moq_quic_addr *local, const struct moq_quic_addr *relay,
                      const char *query, int role, void *user, void (*failed)(void *user),
                      uint64_t now);

#endif /* MOQ_LOADGEN_WT_CLIENT_H */
