/* SPDX-License-Identifier: MIT */
/*
 * cluster.h: the relay's links to peer relays (AUTH-CLUSTER.md,
 * Relay-to-relay; moq-relay's --cluster-connect). For each URL of
 * --cluster-connect worker 0 dials the peer as a moq-lite client from a
 * client QUIC endpoint of its own, on a kernel UDP socket of its own, and
 * keeps the link up: a lost or refused link is dialled again after 1 s,
 * doubling to 10 s, jittered, the delay back to 1 s once a link lasted 10 s.
 *
 * A link is bidirectional and its session is an ordinary session of worker
 * 0's moq node: the peer asks for our announcements and we for its (an
 * announce request for ""), so each relay learns the other's broadcasts with
 * their hop chains (moq/ drops a chain holding our own hop id and routes as
 * AUTH-CLUSTER.md says), and subscriptions go over the link on demand, one
 * upstream subscription per track however many local subscribers.
 *
 * moql:// (or moqt://) URLs dial raw QUIC; https:// URLs dial WebTransport
 * (ALPN h3, h3.h's moq_wt_connect; the session begins with the CONNECT's
 * 200). The token of --cluster-token travels as ?jwt= in the lite-05 SETUP
 * path (raw QUIC) or the CONNECT's :path (WebTransport). With a CA file
 * (--cluster-ca) the peer's certificate must chain to it and name the peer:
 * the URL's host (a DNS name, or an address in its IP entries) or
 * --cluster-name (issue 22: a chain alone accepted any certificate the CA
 * issued, for any host, and sent it --cluster-token). Mutual TLS
 * is not offered.
 *
 * The I/O of a link is the backend's: on the kernel backend each link has a
 * kernel UDP socket of its own (the wildcard, an ephemeral port); on the
 * DPDK backend (moq_cluster_set_io) a link's local address is the data
 * port's and its local UDP port one of a range the relay's network layer
 * takes as its own (moq_net_iface.client_port_lo); the relay hands every
 * datagram to such a port to worker 0 (moq_cluster_input; another worker's
 * RX queue forwards it over worker 0's ring) and sends the links' packets
 * from worker 0 through its own TX path (neighbour table, TX buffers).
 * Everything else here is the same for both.
 *
 * Threads: moq_cluster_poll and the node callbacks run on worker 0;
 * moq_cluster_link_info may be called from any thread (each figure is read
 * atomically; a set of them may be torn between two polls).
 */
#ifndef MOQ_DPDK_APP_CLUSTER_H
#define MOQ_DPDK_APP_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "moq.h"
#include "pmd_config.h"
#include "quic.h"

struct moq_cluster;

/* Peers a relay dials at most. */
#define MOQ_CLUSTER_MAX_LINKS 16

/* Link states (moqdp_cluster_link_state). */
enum moq_cluster_state {
	MOQ_CLUSTER_DOWN = 0,       /* waiting for the next attempt */
	MOQ_CLUSTER_CONNECTING = 1, /* handshake / SETUP in progress */
	MOQ_CLUSTER_UP = 2,         /* the session is ready */
};

/* What /metrics and telemetry show of one link. */
struct moq_cluster_link_info {
	char url[256];                   /* without its query (no token) */
	int state;                       /* enum moq_cluster_state */
	uint64_t rtt_ns;                 /* smoothed RTT of the current connection */
	uint64_t upstream_subs;          /* our upstream subscriptions over it now */
	uint64_t bytes_sent, bytes_recv; /* UDP payload, every connection of the link */
	uint64_t connects;               /* sessions that became ready */
	uint64_t reconnects;             /* attempts after the first */
	uint64_t failures;               /* attempts or sessions that ended */
	uint64_t peer_origin;            /* the peer's hop id (lite-05 SETUP), 0 = unknown */
};

/*
 * moq_cluster_create: parse cfg->cluster_connect (URLs) and read
 * cfg->cluster_token. Returns the cluster, or NULL with one line in @err
 * naming the option (a URL that is neither moql://host[:port]/... nor
 * https://host[:port]/..., an unresolvable host, an unreadable token file,
 * memory).
 * Returns NULL with @err empty when no peer is configured.
 */
struct moq_cluster *moq_cluster_create(const struct moq_pmd_config *cfg, char *err, size_t errlen);

/* moq_cluster_node_callbacks: the callbacks worker 0's node must have
 * (cfg.cb, with the cluster as cfg.user): they follow the links' sessions. */
const struct moq_node_callbacks *moq_cluster_node_callbacks(void);

/* The DPDK backend's side of the links (moq_cluster_set_io). */
struct moq_cluster_io {
	void *ctx;
	/* our address (its port 0) for dialling @remote: 0, or MOQ_ERR_* when
	 * no data port has an address of its family */
	int (*local_addr)(void *ctx, const struct moq_quic_addr *remote, struct moq_quic_addr *out);
	/* send what @ep has ready (worker 0); returns the packets sent */
	int (*send)(void *ctx, struct moq_quic_endpoint *ep, uint64_t now);
	/* the local UDP ports of the links: port_lo + [0, links) */
	uint16_t port_lo;
};

/* moq_cluster_set_io: use @io (copied) instead of kernel sockets; before
 * moq_cluster_attach. */
void moq_cluster_set_io(struct moq_cluster *c, const struct moq_cluster_io *io);

/* moq_cluster_port: whether @port (host order) is a link's local port with
 * moq_cluster_set_io (any thread: fixed after attach). */
static inline int moq_cluster_port(uint16_t port_lo, unsigned int links, uint16_t port)
{
	return (uint16_t)(port - port_lo) < links;
}

/* moq_cluster_input: a datagram to local address @local (a link's port),
 * from @remote, on worker 0. Returns 0, or MOQ_ERR_NOTFOUND when @local is
 * no link's. */
int moq_cluster_input(struct moq_cluster *c, const uint8_t *data, size_t len,
                      const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                      uint64_t now);

/*
 * moq_cluster_attach: give the links worker 0's @node: open each link's
 * socket and client endpoint. The first dial happens at the first poll.
 * Returns 0, or a MOQ_ERR_* with one line in @err.
 */
int moq_cluster_attach(struct moq_cluster *c, struct moq_node *node,
                       const struct moq_pmd_config *cfg, char *err, size_t errlen);

/* moq_cluster_poll: worker 0's iteration: receive, timers, dials and
 * reconnects, send. Returns the datagrams handled (0 = idle). */
int moq_cluster_poll(struct moq_cluster *c, uint64_t now);

/* moq_cluster_drain: the relay is draining (SIGQUIT): close every link's
 * connection now (CONNECTION_CLOSE, application code 0, sent at the next
 * poll) and dial none again. Returns the connections closed. Worker 0. */
int moq_cluster_drain(struct moq_cluster *c);

/* moq_cluster_close: close every link (sessions end; before the node is
 * destroyed). */
void moq_cluster_close(struct moq_cluster *c);

/* moq_cluster_destroy: free @c after moq_cluster_close. NULL is a no-op. */
void moq_cluster_destroy(struct moq_cluster *c);

/* moq_cluster_links: the number of links (fixed after create). */
unsigned int moq_cluster_links(const struct moq_cluster *c);

/* moq_cluster_link_info: link @i's figures into @out. Returns 0 or
 * MOQ_ERR_INVAL. */
int moq_cluster_link_info(const struct moq_cluster *c, unsigned int i,
                          struct moq_cluster_link_info *out);

#endif /* MOQ_DPDK_APP_CLUSTER_H */
