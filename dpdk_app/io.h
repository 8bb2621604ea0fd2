/* SPDX-License-Identifier: MIT */
/*
 * io.h: the relay's I/O backends behind one ops table: DPDK ports (relay.c)
 * and kernel sockets (kernel.c). relay.c picks the table for --backend and
 * calls it once per worker iteration (a function pointer per burst of 32,
 * never per packet); a backend sees its worker only through struct relay_io.
 * Not a public header; it does not include relay_int.h.
 */
#ifndef MOQ_DPDK_APP_IO_H
#define MOQ_DPDK_APP_IO_H

#include <stddef.h>
#include <stdint.h>

#include "pmd_config.h"
#include "quic.h"

struct moq_relay;
struct moq_node;
struct moq_cache;
struct moq_auth;
struct rte_mempool;
struct rte_ring;
struct relay_web;

/* Counters a worker writes and the main lcore reads. */
struct relay_worker_stats {
	uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes;
	uint64_t tx_drops, tx_nombuf, tx_unresolved;
	uint64_t tx_ring_full; /* flushes that left packets for the next iteration (the
	                        * TX ring, or the kernel backend's socket, was full) */
	uint64_t redirected, redirected_in, redirect_drops;
	uint64_t busy_tsc, idle_tsc;
	uint64_t busy_polls, idle_polls; /* iterations that did work / found none */
	uint64_t goaways, drain_closes;  /* SIGQUIT: GOAWAY sent, connections closed */
	uint64_t conn_set_full;          /* a connection the drain set could not track */
	uint64_t gso_msgs;               /* kernel backend: GSO sends of several datagrams */
	uint64_t rx_truncated;           /* kernel backend: datagrams over --mtu, dropped */
	/* admission (--admit-busy; relay.c, admit_window): the last window's
	 * busy share in permille, windows that closed admission, the credit
	 * of new subscriptions given for the current window */
	uint64_t admit_busy_permille, admit_closed_windows;
	int64_t admit_credit;
	/* kernel backend --tcp (web.h, struct moq_web_stats): connections open
	 * now / accepted / refused by --max-tcp-conns, WebSocket sessions
	 * opened / closed for bad input */
	uint64_t tcp_conns, tcp_conns_total, tcp_refused, ws_sessions, ws_protocol_closes;
	/* ... closed at the write deadline, /fetch in progress / refused past
	 * its bound, WebSocket upgrades refused for their Origin (403) */
	uint64_t tcp_closes_slow, web_fetches, web_fetches_refused, ws_refused_origin;
	/* dpdk backend --tcp (exc.c): frames handed to the exception port,
	 * frames it sent out of the data port, frames it did not take, TCP
	 * frames to a port not the relay's (dropped) */
	uint64_t exc_in, exc_out, exc_drops, exc_refused;
};

/* What a backend sees of its worker; relay.c fills it before open. */
struct relay_io {
	struct moq_relay *relay; /* for moq_relay_clock_ns (relay.h) */
	unsigned int id;         /* the worker's index */
	unsigned int nb_workers;
	struct moq_quic_endpoint *ep;
	struct moq_node *node;         /* the worker's moq-lite sessions (moq.h) */
	struct rte_ring *ring;         /* datagrams of our connections from other workers */
	struct rte_ring *const *rings; /* every worker's ring, [nb_workers] */
	struct rte_mempool *pool;      /* kernel backend: redirect copies */
	struct relay_worker_stats *st; /* the worker's counters */
	void *priv;                    /* the backend's own per-worker state */
	/* the kernel backend's TCP side (--tcp, web.h): the certificate the
	 * endpoint serves now (relay.c updates it on SIGHUP), the cache and
	 * the auth key set (NULL: off) */
	struct moq_quic_tls *tls;
	struct moq_cache *cache;
	struct moq_auth *auth;
	struct relay_web *web; /* that TCP side once open (the drain), NULL: none */
};

/* A backend. open and close may be NULL. */
struct relay_io_ops {
	const char *name;
	/* set up worker @io's I/O from @cfg; 0, or a MOQ_ERR_* with one line
	 * in @err */
	int (*open)(struct relay_io *io, const struct moq_pmd_config *cfg, char *err,
	            size_t errlen);
	/* one iteration: receive bursts, the redirect ring, timers, the moq
	 * node, send bursts; returns the packets handled (0 = idle) */
	int (*poll)(struct relay_io *io, uint64_t now);
	/* free what open set up (also after a failed or no open) */
	void (*close)(struct relay_io *io);
};

/* The TCP side (--tcp, web.h) of a worker: its HTTP / WebSocket listener,
 * the TLS context and the certificate that context was made from, its byte
 * counters as last added to the worker's. kernel.c: the kernel backend's
 * workers; exc.c: the DPDK backend's, behind its exception port. */
struct moq_web;
struct relay_web {
	struct moq_web *web;
	void *web_tls;
	const struct moq_quic_tls *web_cert;
	uint64_t web_in, web_out;
};
int moq_relay_web_open(struct relay_io *io, struct relay_web *k, const struct moq_pmd_config *cfg,
                       char *err, size_t errlen);
/* poll it (epoll, timeout 0), follow SIGHUP's certificate, add its
 * counters to io->st; returns the work done (0: idle or off) */
int moq_relay_web_poll(struct relay_io *io, struct relay_web *k, uint64_t now);
void moq_relay_web_close(struct relay_web *k);
/* SIGQUIT: /health answers 503; with @close the WebSocket sessions are
 * closed too (web.h, moq_web_drain). Returns the sessions closed. */
int moq_relay_web_drain(struct relay_web *k, int close);

/* kernel.c: the kernel-socket backend. */
extern const struct relay_io_ops moq_relay_kernel_ops;

/* relay.c: a moq_quic_addr for @ip (4 or 16 bytes by @family 4 / 6) and
 * @port (host order). */
void moq_relay_addr_from(struct moq_quic_addr *a, int family, const uint8_t *ip, uint16_t port);

#endif /* MOQ_DPDK_APP_IO_H */
