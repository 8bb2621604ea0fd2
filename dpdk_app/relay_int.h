/* SPDX-License-Identifier: MIT */
/*
 * relay_int.h: the relay's internal state, relay.c's alone. The kernel
 * backend sees a worker through io.h, the management side the relay through
 * mgmt.h; neither includes this header. Not a public header.
 */
#ifndef MOQ_DPDK_APP_RELAY_INT_H
#define MOQ_DPDK_APP_RELAY_INT_H

#include <stdint.h>

#include <rte_common.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "net.h"
#include "pmd_port.h"
#include "cache.h"
#include "moq.h"
#include "quic.h"
#include "relay.h"
#include "io.h"
#include "mgmt.h"
#include "h3.h"
#include "pool.h"

#define MOQ_RELAY_MAX_PORTS 8
#define MOQ_RELAY_MAX_RXQ   MOQ_CFG_MAX_LCORE_QUEUES /* refused beyond (pmd_config.h) */
/* TX mbufs buffered per port before a tx_burst: two bursts. */
#define MOQ_RELAY_TXBUF 64

/* What a worker publishes for the main lcore and the telemetry threads (at
 * 10 Hz and when it stops; relay.c, snap_publish / snap_read): its counters,
 * its endpoint's and node's stats, its latency histogram and its network
 * contexts' figures. Only uint64_t words: copied word by word with relaxed
 * atomics inside a sequence count, so a reader gets one consistent copy,
 * never a torn one, and never reads what the worker is writing. */
struct relay_snap {
	struct relay_worker_stats st;
	struct moq_quic_stats qs;
	struct moq_node_stats ns;
	struct moq_lat_hist lat;
	uint64_t rx_udp, rx_l4_partial;      /* moq_net_stats, summed over ports */
	uint64_t net_drop[MOQ_NET_DROP_MAX]; /* ... per reason */
	struct moq_wt_stats wt;              /* WebTransport sessions (h3.h) */
};

struct relay_worker {
	struct moq_relay *relay;
	unsigned int id, lcore;
	unsigned int nb_rxq;
	struct {
		uint16_t pi; /* relay port index */
		uint16_t queue;
	} rxq[MOQ_RELAY_MAX_RXQ];
	struct moq_net *net[MOQ_RELAY_MAX_PORTS];
	struct moq_quic_endpoint *ep;
	struct moq_node *node; /* this worker's moq-lite sessions (moq.h) */
	struct rte_ring *ring; /* datagrams of our connections from other workers */
	struct rte_mempool *pool;
	uint64_t next_expiry, stats_ns;
	struct rte_mbuf *tx[MOQ_RELAY_MAX_PORTS][MOQ_RELAY_TXBUF];
	uint64_t tx_retry_tsc; /* the ring was full: no flush before this TSC */
	uint64_t poll_tsc;     /* the TSC at this iteration's start (moq_relay_poll): a
	                        * full ring's retry is timed with it, not a read per flush */
	uint16_t nb_tx[MOQ_RELAY_MAX_PORTS];
	struct relay_worker_stats st __rte_cache_aligned;
	struct moq_wt_stats wt_stats; /* this worker's WebTransport layer (h3.h) */
	/* Open connections (for the drain): open addressing on the pointer,
	 * NULL = free, CONN_GONE = deleted; conn_cap is a power of two. */
	struct moq_quic_conn **conns;
	uint32_t conn_cap;
	int draining;
	int links_state;    /* worker 0's drain of the cluster links: LINKS_* */
	uint32_t tls_gen;   /* the relay_tls generation its endpoint serves (atomic) */
	int drain_closed;   /* SIGQUIT: closed what was left (drain_close) */
	struct relay_io io; /* what the I/O backend sees of this worker (io.h) */
	/* --tcp on the dpdk backend (exc.c): the TCP listener, the next poll */
	struct relay_web web;
	uint64_t exc_next;
	/* admission (--admit-busy): the window's start and busy TSC then */
	uint64_t admit_tsc0, admit_busy0;
	/* the published figures: written by the worker, read by any thread */
	uint32_t snap_seq __rte_cache_aligned; /* odd while the worker writes */
	struct relay_snap snap;
} __rte_cache_aligned;

/* relay_worker.links_state */
enum { LINKS_UP = 0, LINKS_CLOSING, LINKS_DONE };

struct relay_port {
	uint16_t port_id;
	uint8_t has_ip4, has_ip6, ip4_prefix, ip6_prefix;
	uint8_t ip4[4], ip6[16];
	struct moq_pmd_port pp;
	struct moq_net_iface ifc;
	/* the workers' shared neighbour table on this link (net.h): an ARP
	 * reply reaches one RX queue, every worker may need what it says */
	struct moq_net_neigh_table *neigh;
	struct rte_mempool *pool;
	int link_up; /* last seen by the main lcore; -1 = not yet */
};

/* A certificate generation: a TLS context every worker's endpoint shares
 * (quic.h, moq_quic_tls_new), gen 1 at start. */
struct relay_tls {
	struct moq_quic_tls *tls;
	uint32_t gen;
	struct relay_tls *next; /* tls_retired */
};

struct moq_relay {
	struct moq_pmd_config cfg;
	unsigned int nb_ports, nb_workers;
	struct relay_port ports[MOQ_RELAY_MAX_PORTS];
	uint16_t port_index[RTE_MAX_ETHPORTS];
	struct relay_worker *w[MOQ_RELAY_MAX_WORKERS];
	struct rte_ring *rings[MOQ_RELAY_MAX_WORKERS]; /* w[i]->ring (relay_io.rings) */
	const struct relay_io_ops *io_ops;             /* the backend's (io.h) */
	struct rte_mempool *pools[RTE_MAX_NUMA_NODES];
	struct rte_mempool *kpool; /* kernel backend: redirect copies */
	/* --tcp on the dpdk backend (exc.c): the exception port (-1: none),
	 * its vdev and kernel interface names, its mbuf pool */
	int exc_port, exc_made;
	char exc_name[40], exc_if[16];
	struct rte_mempool *exc_pool;
	/* the TCP ports it forwards (--port; the --mgmt port when bound to
	 * the data address or 0.0.0.0): TCP to others is refused */
	uint16_t exc_tcp_ports[2];
	unsigned int nb_exc_tcp_ports;
	struct moq_cache *cache;     /* shared by all workers (cache.h) */
	struct moq_pool *cache_pool; /* the cache's memory (pool.h) */
	uint64_t admit_window_tsc;   /* --admit-busy: ADMIT_WINDOW_NS in TSC cycles */
	struct moq_hub *hub;         /* joins the workers' nodes (moq.h); NULL with one */
	struct moq_auth *auth; /* --auth-*: the key set the nodes check (auth.h); NULL = off */
	struct moq_cluster *cluster; /* --cluster-connect: worker 0's links (cluster.h) */
	/* ... on the dpdk backend: the links' local UDP ports, lo + [0, n) */
	uint16_t cluster_port_lo;
	unsigned int cluster_ports;
	/* --max-conns-per-addr: connections per source, every worker's (quic.h) */
	struct moq_quic_addr_table *addr_table;
	int quit, drain, reload;
	/* the drain (relay.c, drain_step): the main lcore saw no client
	 * connection left, so worker 0 may close the cluster links; worker 0
	 * closed them (or has none) (atomics) */
	int drain_links, links_done;
	/* the main lcore: 3/4 of --drain-timeout passed, close what is left */
	int drain_close;
	uint32_t announce_pending; /* ports whose link came up: worker 0 announces */
	uint64_t announcements;    /* atomic: worker 0 and the main lcore add */
	uint64_t reloads, reload_failed;
	/* the certificate: built once on the main lcore (start, SIGHUP) and
	 * taken by every worker's endpoint from its own loop when the pointer
	 * moves (atomic); the ones replaced wait in tls_retired (main lcore
	 * only) until every worker has taken a newer one */
	struct relay_tls *tls;
	struct relay_tls *tls_retired;
	uint32_t tls_gen_now;   /* tls->gen, for readers on other threads (atomic) */
	struct relay_mgmt mgmt; /* the HTTP listener, telemetry (mgmt.h) */
	uint64_t t0_ns;
	char fingerprint[100];
	char fingerprint_hex[65]; /* the same, 64 lowercase hex (certificate.sha256) */
	int64_t cert_not_after;   /* Unix s: the generated certificate's end */
	uint64_t cert_renew_at;   /* moq_relay_now_ns() to renew it at (0: a --cert) */
	uint64_t cert_renewals;   /* generated certificates replaced before they expired */
	/* moq_relay_clock_ns: ns = (tsc - tsc0) * tsc_mult >> 32 */
	uint64_t tsc0, tsc_mult;
	/* mbufs in use (moq_relay_mbufs_sample; atomics: the main lcore and the
	 * telemetry thread sample) */
	uint64_t mbufs_in_use, mbufs_peak, mbufs_sampled_ns;
};

uint64_t moq_relay_now_ns(void);

/* exc.c: the dpdk backend's exception port (--tcp 1). open: create it
 * after the data ports (0, or MOQ_ERR_CONFIG with one line in @err);
 * take: a frame moq_net did not deliver (verdict @v), 1 when it went to
 * the kernel (TCP only to the relay's own ports, the rest counted in
 * exc_refused); poll: the kernel's frames out of the data port, the TCP
 * listener. relay.c: tx_add for exc.c. */
int moq_relay_exc_open(struct moq_relay *r, char *err, size_t errlen);
/* after the management listener opened: its port is forwarded too when it
 * listens on the data address (or on every address) */
void moq_relay_exc_mgmt(struct moq_relay *r);
void moq_relay_exc_close(struct moq_relay *r);
int moq_relay_exc_take(struct moq_relay *r, struct relay_worker *w, struct rte_mbuf *m, int v);
int moq_relay_exc_poll(struct moq_relay *r, struct relay_worker *w, uint64_t now);
void moq_relay_tx_add(struct moq_relay *r, struct relay_worker *w, unsigned int pi,
                      struct rte_mbuf *m);

/* devcert.c: the generated certificate kept in --state-dir. check: @dir
 * ("" = none) exists or is made, and is writable (0, or MOQ_ERR_CONFIG with
 * one line in @err naming --state-dir). dev_cert: the kept pair when it is
 * usable, has more than @renew_before s left and is not the one of
 * fingerprint @avoid (NULL: any), else a new pair written there (*@made =
 * 1); NULL with one line in @err. */
int moq_relay_state_dir_check(const char *dir, char *err, size_t errlen);
struct moq_quic_tls *moq_relay_dev_cert(const char *dir, const uint8_t *avoid, int64_t renew_before,
                                        int *made, char *err, size_t errlen);

#endif /* MOQ_DPDK_APP_RELAY_INT_H */
