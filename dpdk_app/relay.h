/* SPDX-License-Identifier: MIT */
/*
 * relay.h: the moqdp-relay program as a library: ports and workers from a
 * struct moq_pmd_config, the run-to-completion worker iteration (RX burst ->
 * network stack -> QUIC endpoint -> TX burst), the kernel-socket backend,
 * counters, the stats line, Prometheus text and rte_telemetry commands.
 * main.c is a thin shell around it; tests drive single iterations.
 *
 * Threads: worker w's state is touched only by the lcore running it (or a
 * test calling moq_relay_poll on one thread). Each worker publishes its
 * figures at 10 Hz and when it stops (a sequence count: readers get one
 * consistent copy); moq_relay_stats reads only those, from any thread (the
 * main lcore, the telemetry threads). The main lcore sets the
 * quit/drain/reload flags.
 */
#ifndef MOQ_DPDK_APP_RELAY_H
#define MOQ_DPDK_APP_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "moq.h"
#include "net.h"
#include "pmd_config.h"

struct moq_relay;

/* Most workers (lcores running endpoints). The QUIC CID carries a worker id
 * byte; DPDK's RTE_MAX_LCORE bounds it further. */
#define MOQ_RELAY_MAX_WORKERS 64

/* One worker's share (moq_relay_stats.worker[]): where connections and
 * media are. */
struct moq_relay_worker_counters {
	uint64_t conns, conns_total; /* open now / accepted */
	uint64_t sessions;           /* moq-lite sessions open */
	uint64_t frames_in;          /* ingested from publishers on this worker */
	uint64_t frames_out;         /* queued to subscribers on this worker */
	uint64_t redirected_in;      /* datagrams other workers handed over */
	uint64_t cert_generation;    /* the relay's certificate generation it serves */
	uint64_t busy_tsc, idle_tsc;
	uint64_t admit_busy_permille; /* --admit-busy: busy share of its last window */
};

/* Counters summed over workers and ports (moq_relay_stats). */
struct moq_relay_stats {
	unsigned int workers, ports;
	uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes; /* frames / datagrams */
	uint64_t rx_udp;                               /* datagrams to QUIC */
	uint64_t rx_l4_partial;                        /* accepted with a kernel partial checksum */
	uint64_t rx_nombuf;                            /* ports' rte_eth_stats */
	uint64_t imissed;
	uint64_t tx_drops;       /* TX buffer full / no mbuf */
	uint64_t tx_ring_full;   /* TX ring full: packets held for the next iteration */
	uint64_t redirected;     /* datagrams sent to their owner worker */
	uint64_t redirect_drops; /* owner's ring full / unknown worker */
	uint64_t busy_tsc, idle_tsc;
	uint64_t busy_polls, idle_polls; /* iterations that did work / found none */
	uint64_t tsc_hz;
	uint64_t net_drops;                  /* sum of net_drop[] */
	uint64_t net_drop[MOQ_NET_DROP_MAX]; /* per reason */
	uint64_t quic_dropped;               /* undecodable / refused datagrams */
	uint64_t goaways, drain_closes;      /* SIGQUIT drain */
	uint64_t cert_reloads;               /* SIGHUP: endpoints that took the new certificate */
	uint64_t cert_reload_errors;         /* ... that refused it (kept the old one) */
	uint64_t conns_old_cert;             /* open connections on a replaced certificate */
	uint64_t quic_spare_bytes;           /* heap quic/ keeps for reuse (spare_bytes) */
	uint64_t cert_generation;            /* 1 at start, + 1 per SIGHUP that loaded one */
	uint64_t cert_pem_loads;             /* PEM chains read (quic.h, moq_quic_tls_pem_loads) */
	uint64_t gso_msgs;                   /* kernel backend: UDP GSO sends */
	uint64_t announcements;              /* gratuitous ARP / unsolicited NA sent */
	uint64_t conns, conns_total, half_open;
	uint64_t conns_refused_max;       /* new connections refused: --max-connections */
	uint64_t conns_refused_half_open; /* ... handshakes in progress at quic/'s bound */
	uint64_t conns_refused_per_addr;  /* ... --max-conns-per-addr */
	uint64_t sessions;                /* moq-lite sessions open (publishers + subscribers) */
	uint64_t broadcasts; /* announced (the largest worker origin table: the hub mirrors each) */
	uint64_t subscribers;        /* active downstream subscriptions (--max-subscribers) */
	uint64_t tracks;             /* upstream tracks served, per worker summed (--max-tracks) */
	uint64_t upstream_subs;      /* upstream subscriptions open, summed over workers */
	uint64_t subs_refused_limit; /* SUBSCRIBEs refused by --max-subscribers */
	uint64_t tracks_refused_limit;                    /* SUBSCRIBEs refused by --max-tracks */
	uint64_t auth_refused, auth_expired;              /* sessions closed with 6 (--auth-*) */
	uint64_t auth_denied;                             /* requests outside the token: reset 6 */
	uint64_t auth_reloads, auth_reload_errors;        /* SIGHUP: key sets swapped / kept */
	uint64_t groups_in, frames_in, media_bytes_in;    /* ingested into the cache */
	uint64_t groups_out, frames_out, media_bytes_out; /* fanout, queued to QUIC */
	uint64_t fanout_visits,
	        fanout_visits_idle; /* sessions fanout visited / that wrote nothing */
	uint64_t group_resets; /* old + evicted + lagged + dropped + cancelled */
	uint64_t cache_used, cache_budget;
	uint64_t cache_tracks, cache_groups;                 /* live now */
	uint64_t cache_evicted, cache_expired, cache_lagged; /* groups removed: budget,
	                                                       * --max-latency, window */
	/* the cache's pools (pool.h): bytes they may reserve, have reserved,
	 * hold in slabs, hand to the cache; allocations refused at the limit,
	 * served by rte_malloc (above the largest class) */
	uint64_t cache_pool_limit, cache_pool_reserved, cache_pool_slab_bytes;
	uint64_t cache_pool_obj_bytes, cache_pool_exhausted, cache_pool_fallback;
	/* --auth-url (auth/authurl.h): events posted; answers admitting,
	 * refusing (401/403, nothing granted), unavailable (fail closed) */
	uint64_t auth_url_requests, auth_url_admitted, auth_url_refused, auth_url_unavailable;
	/* admission (--admit-busy, moq.h moq_node_admit), summed over workers:
	 * new subscribers refused (reset 11), GOAWAYs sent for it, sessions
	 * admitted, windows that closed admission */
	uint64_t subs_refused_capacity, goaways_capacity, subs_admitted, admit_closed_windows;
	uint64_t uptime_ns;
	struct moq_relay_worker_counters worker[MOQ_RELAY_MAX_WORKERS]; /* 0..workers-1 */
	/* mbufs of the relay's pools (rte_mempool_in_use_count, summed over
	 * its pools): now, the largest value sampled (main lcore, every
	 * ~10 ms, and at every stats read), and the pools' size */
	uint64_t mbufs_in_use, mbufs_peak, mbufs_total;
	/* relay-added latency (moq.h, moq_node_latency_commit): every worker's
	 * histogram merged, since start (the workers' copies, 10 Hz) */
	struct moq_lat_hist relay_lat;
	/* per-peer bounds and broadcast ownership (moq.h, struct
	 * moq_node_stats), summed over workers */
	uint64_t ann_refused_relay;       /* --max-broadcasts */
	uint64_t ann_refused_session;     /* --max-session-broadcasts */
	uint64_t ann_req_refused;         /* --max-announce-requests */
	uint64_t subs_refused_session;    /* --max-session-subscriptions */
	uint64_t fetches_refused;         /* --max-session-fetches */
	uint64_t names_refused_broadcast; /* --max-broadcast-name */
	uint64_t names_refused_track;     /* --max-track-name */
	uint64_t msgs_refused_size;       /* --max-message */
	uint64_t ctl_rx_bytes;            /* control-stream receive buffers now */
	uint64_t bcast_replaced, bcast_failovers, ann_duplicates, ann_restarts;
	uint64_t bcast_drained; /* failovers off a session that sent GOAWAY */
	uint64_t ups_reattached;
	/* relay-to-relay (cluster.h): announces dropped because their hop
	 * chain holds our hop id (a reflected announce), summed over workers */
	uint64_t loops_refused;
	/* announces whose hop chain would pass 32 hops, client announces whose
	 * chain was restarted, hub messages dropped at a full mailbox, groups
	 * below a publisher's END that never arrived (moq.h), summed */
	uint64_t ann_hops_refused, ann_chains_restarted, hub_dropped, groups_end_lost;
	/* WebTransport (h3.h, struct moq_wt_stats), summed over workers */
	uint64_t wt_sessions, wt_refused, wt_h3_errors, wt_streams_in, wt_streams_rejected,
	        wt_capsules_close, wt_held, wt_refused_origin;
	/* the certificate browsers pin: 64 lowercase hex; the generated one's
	 * end (Unix s, 0 with a --cert) and its renewals */
	char cert_sha256[65];
	int64_t cert_not_after;
	uint64_t cert_renewals;
	/* kernel backend --tcp (web.h): TCP connections open / accepted /
	 * refused by --max-tcp-conns, WebSocket sessions, their closes for bad
	 * input */
	uint64_t tcp_conns, tcp_conns_total, tcp_refused, ws_sessions, ws_protocol_closes;
	/* ... closed at the write deadline, /fetch in progress / refused past
	 * its bound, WebSocket upgrades refused for their Origin (403) */
	uint64_t tcp_closes_slow, web_fetches, web_fetches_refused, ws_refused_origin;
	/* dpdk backend --tcp (exc.c): frames to / from the exception port,
	 * frames it did not take, TCP frames to ports not the relay's
	 * (dropped, not forwarded) */
	uint64_t exc_in, exc_out, exc_drops, exc_refused;
	/* issue 23 (--fastpath): connections on the fast path now, handoffs
	 * done, attempts that did not move one by reason (quic.h,
	 * MOQ_QUIC_HANDOFF_*) */
	uint64_t fastpath_conns, handoffs, handoff_refused[MOQ_QUIC_HANDOFF_REASONS];
	uint64_t fastpath_key_updates, fastpath_pkts_lost, fastpath_paths_validated;
	/* group_resets by reason (moq.h struct moq_node_stats), and groups
	 * never sent (gone before a stream could open): bench-fanout sets them
	 * against its subscribers' reset / missing counts (issue 22, item 19) */
	uint64_t resets_old, resets_evicted, resets_lagged, resets_dropped, resets_cancel;
	uint64_t groups_skipped;
	uint64_t groups_in_late; /* upstream groups refused: a newer one began first */
	/* upstream groups taken late, by how late (moq.h struct moq_node_stats
	 * late_hist), the largest and the sum; subscriber holes DROPped once
	 * the wait for a late group ran out (issue 22 item 19) */
	uint64_t groups_late_taken, late_hist[MOQ_LATE_BUCKETS], late_max_ns, late_sum_ns;
	uint64_t groups_hole_timeouts;
	/* per-connection fixed work (quic.h struct moq_quic_stats; issue 23,
	 * "measure b"): ACK packets in, streams opened, timer-heap expiries,
	 * those after which nothing was sent, pacing-only expiries, QUIC
	 * packets in / out */
	uint64_t quic_ack_pkts_in, quic_streams_opened, quic_timer_expiries, quic_timer_idle;
	uint64_t quic_timer_inline, quic_pkts_in, quic_pkts_out;
	/* lite-05 datagrams (moq.h / quic.h): single-frame groups in and out
	 * as datagrams, those too large for one (sent as streams), bad ones
	 * dropped, datagrams QUIC dropped unsent, those the fast path lost */
	uint64_t dgrams_in, dgrams_out, dgrams_too_large, dgrams_in_bad;
	uint64_t quic_dgrams_dropped, fastpath_dgrams_lost;
	uint64_t fastpath_ivl_coarsened; /* quic.h */
	/* IETF sessions (moq.h struct moq_node_stats): objects whose extension
	 * headers were kept / dropped, subgroup streams refused, groups not sent
	 * to paused (forward 0) subscriptions, draft-20 fills
	 * served, the objects they carried, fills refused */
	uint64_t ietf_ext_kept, ietf_ext_dropped, ietf_subgroups_refused, ietf_groups_paused;
	uint64_t ietf_fills, ietf_fill_objects, ietf_fills_refused;
};

/*
 * moq_relay_create: set up everything @cfg describes (after rte_eal_init):
 * ports, mempools per socket, per-worker network contexts, redirect rings and
 * QUIC endpoints (or kernel sockets for --backend kernel). Telemetry commands
 * are registered. Workers are not started. Returns the relay, or NULL with
 * one line in @err naming the option or the step that failed.
 */
struct moq_relay *moq_relay_create(const struct moq_pmd_config *cfg, char *err, size_t errlen);

/*
 * moq_relay_poll: one iteration of worker @w (0..workers-1): RX bursts of its
 * queues, its redirect ring, timers, a TX burst. Returns the number of
 * packets handled (0 = idle), or MOQ_ERR_INVAL for a bad @w.
 */
int moq_relay_poll(struct moq_relay *r, unsigned int w);

/*
 * moq_relay_run: launch the workers on their lcores and run the main lcore's
 * loop (stats line, management HTTP, signals) until moq_relay_quit, or
 * until a drain finishes. Returns 0.
 */
int moq_relay_run(struct moq_relay *r);

/* Flags for the signal handlers (async-signal-safe). */
void moq_relay_quit(struct moq_relay *r);
void moq_relay_drain(struct moq_relay *r);
void moq_relay_reload(struct moq_relay *r);

/* moq_relay_destroy: stop ports, free endpoints, rings, pools. */
void moq_relay_destroy(struct moq_relay *r);

/* moq_relay_stats: sum the workers' published figures into @out (any
 * thread; the workers' copies are at most ~100 ms old). */
void moq_relay_stats(struct moq_relay *r, struct moq_relay_stats *out);

/*
 * moq_relay_clock_ns: the relay's latency clock, nanoseconds from the TSC
 * (constant and the same on every lcore; no system call): the cache stamps
 * frame arrivals with it and every worker commits its latency samples with
 * it after its TX burst (moq.h, moq_node_latency_commit).
 */
uint64_t moq_relay_clock_ns(const struct moq_relay *r);

/*
 * moq_relay_mbufs_sample: read the relay's pools' mbufs in use now and raise
 * the peak (any thread; rte_mempool_in_use_count walks the lcore caches:
 * control path only). Returns the mbufs in use.
 */
uint64_t moq_relay_mbufs_sample(struct moq_relay *r);

/*
 * moq_relay_latency_reset: start a new measurement window: /moqdp/stats
 * reports relay-added latency since now (the previous window's summary in
 * @last when not NULL). /metrics keeps counting since start. Any thread
 * (the /moqdp/latency_reset command runs it; serialised with the telemetry
 * handlers).
 */
void moq_relay_latency_reset(struct moq_relay *r, struct moq_latency *last);

/*
 * moq_relay_stats_line: the one-line summary ("conns=.. sessions=.. subs=.. in=..Gbps
 * out=..Gbps rx=..Mpps busy=..% cache=../.. drops=..") from @now and the
 * previous sample @prev (rates over the interval; NULL = totals). Returns
 * the length written (truncated to @len).
 */
int moq_relay_stats_line(const struct moq_relay_stats *now, const struct moq_relay_stats *prev,
                         char *buf, size_t len);

/*
 * moq_relay_metrics: Prometheus text exposition (moqdp_* names, base units,
 * _total counters) into @buf. Returns the length, or MOQ_ERR_TOO_LARGE.
 */
int moq_relay_metrics(const struct moq_relay_stats *s, char *buf, size_t len);

/*
 * moq_relay_metrics_text: what GET /metrics on --mgmt answers, for relay
 * @relay (a struct moq_relay *; void for moq_web_cfg.metrics): its stats
 * (moq_relay_stats, safe from any thread) and the cluster links' series,
 * into @buf. Returns the length, or MOQ_ERR_TOO_LARGE. The TCP listener's
 * /status/metrics (web/status.c) calls it on a worker.
 */
int moq_relay_metrics_text(void *relay, char *buf, size_t len);

/* moq_relay_port_id: the DPDK port id of the relay's port @i (0..ports-1),
 * or MOQ_ERR_NOTFOUND. */
int moq_relay_port_id(const struct moq_relay *r, unsigned int i);

/* moq_relay_net: worker @w's network context on the relay's port @i (tests). */
struct moq_net *moq_relay_net(struct moq_relay *r, unsigned int w, unsigned int i);

/* moq_relay_pool: the RX mempool of port @i (tests). */
struct rte_mempool *moq_relay_pool(struct moq_relay *r, unsigned int i);

/* moq_relay_http_port: the TCP port the management listener is bound to, or
 * 0 when it is off. */
unsigned int moq_relay_http_port(const struct moq_relay *r);

/* moq_relay_fingerprint: the SHA-256 fingerprint of the certificate as
 * "AB:CD:..." into @buf (>= 96 bytes); "" for the kernel backend without
 * endpoints. */
void moq_relay_fingerprint(const struct moq_relay *r, char *buf, size_t len);

struct moq_cluster;
/* moq_relay_cluster: the links to peer relays (cluster.h), NULL without
 * --cluster-connect. */
struct moq_cluster *moq_relay_cluster(const struct moq_relay *r);

/* moq_relay_fingerprint_hex: the same as 64 lowercase hex characters, what
 * a browser pins (serverCertificateHashes; BINDINGS.md 1, the body of
 * certificate.sha256), into @buf (>= 65 bytes). Changes when the relay
 * renews its generated certificate or SIGHUP loads a --cert. */
void moq_relay_fingerprint_hex(const struct moq_relay *r, char *buf, size_t len);

#endif /* MOQ_DPDK_APP_RELAY_H */
