/* SPDX-License-Identifier: MIT */
/*
 * mgmt.c: observability, all on the main lcore and off the data path: the
 * stats line, Prometheus text on a small HTTP listener (kernel socket;
 * /health and /metrics), rte_telemetry commands (/moqdp/stats,
 * /moqdp/conns, /moqdp/tracks, /moqdp/cache). The counters summed over
 * workers come from relay.c (moq_relay_stats, mgmt.h).
 */
#define _GNU_SOURCE /* accept4 */
#include "mgmt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <rte_telemetry.h>

#include "moq_err.h"
#include "moq_heapacct.h"
#include "net.h"
#include "pmd_config.h"
#include "quic.h"
#include "io.h"
#include "cluster.h"

static double rate(uint64_t a, uint64_t b, double secs)
{
	return secs > 0 ? (double)(a - b) / secs : 0;
}

/* rte_telemetry callbacks carry no user pointer: the one relay of the
 * process. DPDK serves each telemetry client on a thread of its own: a
 * handler holds tel_lock while it reads the relay (and lat_base), and
 * unregistering takes it, so once moq_relay_telemetry_unregister returns no
 * handler is inside the relay (moq_relay_destroy calls it before it frees
 * anything). */
static pthread_mutex_t tel_lock = PTHREAD_MUTEX_INITIALIZER;
static struct relay_mgmt *tel_relay;

static void latency_reset(struct relay_mgmt *m, struct moq_latency *last)
{
	struct moq_relay_stats s;

	moq_relay_stats(m->relay, &s);
	if (last != NULL) {
		struct moq_lat_hist h = s.relay_lat;

		moq_lat_hist_sub(&h, &m->lat_base);
		moq_lat_hist_summary(&h, last);
	}
	m->lat_base = s.relay_lat;
}

void moq_relay_latency_reset(struct moq_relay *r, struct moq_latency *last)
{
	pthread_mutex_lock(&tel_lock);
	latency_reset(moq_relay_mgmt_of(r), last);
	pthread_mutex_unlock(&tel_lock);
}

int moq_relay_stats_line(const struct moq_relay_stats *now, const struct moq_relay_stats *prev,
                         char *buf, size_t len)
{
	static const struct moq_relay_stats zero;
	const struct moq_relay_stats *p = prev ? prev : &zero;
	double secs = (double)(now->uptime_ns - p->uptime_ns) / 1e9;
	uint64_t busy = now->busy_tsc - p->busy_tsc, idle = now->idle_tsc - p->idle_tsc;
	struct moq_lat_hist lat = now->relay_lat;
	struct moq_latency l;
	int n;

	moq_lat_hist_sub(&lat, &p->relay_lat); /* this interval's */
	moq_lat_hist_summary(&lat, &l);

	n = snprintf(buf, len,
	             "conns=%" PRIu64 " sessions=%" PRIu64 " subs=%" PRIu64 " bcasts=%" PRIu64
	             " in=%.3fGbps out=%.3fGbps rx=%.3fMpps "
	             "tx=%.3fMpps busy=%.1f%% cache=%.1f/%.0fMiB drops=%" PRIu64
	             " redirects=%" PRIu64 " rx_nombuf=%" PRIu64 " lat=%.0f/%.0f/%.0fus"
	             " mbufs=%" PRIu64 "/%" PRIu64,
	             now->conns, now->sessions, now->subscribers, now->broadcasts,
	             rate(now->rx_bytes, p->rx_bytes, secs) * 8 / 1e9,
	             rate(now->tx_bytes, p->tx_bytes, secs) * 8 / 1e9,
	             rate(now->rx_pkts, p->rx_pkts, secs) / 1e6,
	             rate(now->tx_pkts, p->tx_pkts, secs) / 1e6,
	             busy + idle ? 100.0 * (double)busy / (double)(busy + idle) : 0.0,
	             (double)now->cache_used / 1048576, (double)now->cache_budget / 1048576,
	             (now->net_drops + now->tx_drops + now->redirect_drops + now->quic_dropped) -
	                     (p->net_drops + p->tx_drops + p->redirect_drops + p->quic_dropped),
	             now->redirected - p->redirected, now->rx_nombuf, l.p50_us, l.p99_us, l.max_us,
	             now->mbufs_in_use, now->mbufs_peak);
	return n < 0 ? 0 : (n >= (int)len ? (int)len - 1 : n);
}

struct mbuf_w {
	char *buf;
	size_t len, off;
	int over;
};

static void put(struct mbuf_w *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct mbuf_w *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->over)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->off, o->len - o->off, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->len - o->off)
		o->over = 1;
	else
		o->off += (size_t)n;
}

static void metric(struct mbuf_w *o, const char *name, const char *type, const char *help,
                   uint64_t v)
{
	put(o, "# HELP moqdp_%s %s\n# TYPE moqdp_%s %s\nmoqdp_%s %" PRIu64 "\n", name, help, name,
	    type, name, v);
}

/* Issue 22 item 19, the grace: how late the upstream groups taken late
 * came (a histogram), and the subscriber holes DROPped once the wait for
 * one ran out. */
static void late_metrics(struct mbuf_w *o, const struct moq_relay_stats *s)
{
	uint64_t cum = 0;

	put(o, "# HELP moqdp_group_lateness_seconds Upstream groups taken late (a newer group's "
	       "header came first), by how long after that newer group.\n"
	       "# TYPE moqdp_group_lateness_seconds histogram\n");
	for (int b = 0; b < MOQ_LATE_BUCKETS; b++) {
		cum += s->late_hist[b];
		if (b < MOQ_LATE_BUCKETS - 1)
			put(o, "moqdp_group_lateness_seconds_bucket{le=\"%.3f\"} %" PRIu64 "\n",
			    moq_late_bucket_ms[b] / 1e3, cum);
		else
			put(o, "moqdp_group_lateness_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n",
			    cum);
	}
	put(o,
	    "moqdp_group_lateness_seconds_sum %.6f\nmoqdp_group_lateness_seconds_count %" PRIu64
	    "\n",
	    (double)s->late_sum_ns / 1e9, s->groups_late_taken);
	metric(o, "group_lateness_max_microseconds", "gauge",
	       "The latest upstream group taken late: how late, in microseconds.",
	       s->late_max_ns / 1000);
	metric(o, "groups_hole_timeouts_total", "counter",
	       "Groups DROPped (24) to a subscriber after the wait for a late upstream group ran "
	       "out (per subscription).",
	       s->groups_hole_timeouts);
}

/* One labelled series per worker: {worker="<id>"}. */
static void worker_metric(struct mbuf_w *o, const struct moq_relay_stats *s, const char *name,
                          const char *type, const char *help, size_t off)
{
	put(o, "# HELP moqdp_worker_%s %s\n# TYPE moqdp_worker_%s %s\n", name, help, name, type);
	for (unsigned int i = 0; i < s->workers && i < MOQ_RELAY_MAX_WORKERS; i++) {
		uint64_t v;

		memcpy(&v, (const char *)&s->worker[i] + off, sizeof(v));
		put(o, "moqdp_worker_%s{worker=\"%u\"} %" PRIu64 "\n", name, i, v);
	}
}

static void worker_metrics(struct mbuf_w *o, const struct moq_relay_stats *s)
{
#define WOFF(f) offsetof(struct moq_relay_worker_counters, f)
	worker_metric(o, s, "connections", "gauge", "Open QUIC connections, per worker.",
	              WOFF(conns));
	worker_metric(o, s, "connections_accepted_total", "counter",
	              "QUIC connections accepted, per worker.", WOFF(conns_total));
	worker_metric(o, s, "sessions", "gauge", "moq-lite sessions open, per worker.",
	              WOFF(sessions));
	worker_metric(o, s, "frames_in_total", "counter",
	              "Frames ingested from publishers on this worker.", WOFF(frames_in));
	worker_metric(o, s, "frames_out_total", "counter",
	              "Frames queued to subscribers on this worker.", WOFF(frames_out));
	worker_metric(o, s, "redirected_in_total", "counter",
	              "Datagrams of this worker's connections that arrived on another.",
	              WOFF(redirected_in));
	worker_metric(o, s, "cert_generation", "gauge",
	              "The certificate generation new connections on this worker get.",
	              WOFF(cert_generation));
	worker_metric(o, s, "admit_busy_permille", "gauge",
	              "--admit-busy: the worker's busy share of its last 100 ms window.",
	              WOFF(admit_busy_permille));
#undef WOFF
	/* busy / idle seconds per worker (the busy share of each: the Grafana
	 * dashboard, docs/grafana/moqdp.json, and /status) */
	for (int k = 0; k < 2; k++) {
		const char *name = k == 0 ? "busy" : "idle";
		double hz = s->tsc_hz ? (double)s->tsc_hz : 1;

		put(o,
		    "# HELP moqdp_worker_%s_seconds_total Worker time spent %s, per worker.\n"
		    "# TYPE moqdp_worker_%s_seconds_total counter\n",
		    name, k == 0 ? "on packets" : "polling empty queues", name);
		for (unsigned int i = 0; i < s->workers && i < MOQ_RELAY_MAX_WORKERS; i++)
			put(o, "moqdp_worker_%s_seconds_total{worker=\"%u\"} %.6f\n", name, i,
			    (double)(k == 0 ? s->worker[i].busy_tsc : s->worker[i].idle_tsc) / hz);
	}
}

/* Relay-added latency as a summary (since start; moq.h says what is
 * measured): quantiles from the merged histogram, _sum, _count, and the
 * deliveries not measured. */
static void lat_metrics(struct mbuf_w *o, const struct moq_lat_hist *h)
{
	static const double q[] = {0.5, 0.9, 0.99};

	put(o, "# HELP moqdp_relay_latency_seconds Relay-added latency per frame and subscriber: "
	       "frame complete in the cache to the end of the worker iteration that wrote its "
	       "last byte to QUIC and sent the TX burst.\n"
	       "# TYPE moqdp_relay_latency_seconds summary\n");
	for (unsigned int i = 0; i < sizeof(q) / sizeof(q[0]); i++)
		put(o, "moqdp_relay_latency_seconds{quantile=\"%g\"} %.9f\n", q[i],
		    (double)moq_lat_hist_quantile(h, q[i]) / 1e9);
	put(o,
	    "moqdp_relay_latency_seconds_sum %.9f\nmoqdp_relay_latency_seconds_count %" PRIu64 "\n",
	    (double)h->sum_ns / 1e9, h->samples);
	put(o,
	    "# HELP moqdp_relay_latency_max_seconds Largest relay-added latency since start.\n"
	    "# TYPE moqdp_relay_latency_max_seconds gauge\nmoqdp_relay_latency_max_seconds "
	    "%.9f\n",
	    (double)h->max_ns / 1e9);
	metric(o, "relay_latency_unmeasured_total", "counter",
	       "Deliveries not measured (a worker's pending list was full).", h->overflow);
}

/* Per-peer bounds (one series per bound, named by its option) and
 * broadcast ownership. */
static void bounds_metrics(struct mbuf_w *o, const struct moq_relay_stats *s)
{
	const struct {
		const char *bound;
		uint64_t v;
	} b[] = {
	        {"max_broadcasts", s->ann_refused_relay},
	        {"max_session_broadcasts", s->ann_refused_session},
	        {"max_announce_requests", s->ann_req_refused},
	        {"max_session_subscriptions", s->subs_refused_session},
	        {"max_session_fetches", s->fetches_refused},
	        {"max_broadcast_name", s->names_refused_broadcast},
	        {"max_track_name", s->names_refused_track},
	        {"max_message", s->msgs_refused_size},
	        {"capacity", s->subs_refused_capacity}, /* --admit-busy */
	};

	put(o, "# HELP moqdp_bounds_refused_total Requests refused by a per-peer bound "
	       "(reset or session closed with 11).\n# TYPE moqdp_bounds_refused_total counter\n");
	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++)
		put(o, "moqdp_bounds_refused_total{bound=\"%s\"} %" PRIu64 "\n", b[i].bound,
		    b[i].v);
	metric(o, "control_rx_buffer_bytes", "gauge",
	       "Control-stream receive buffers held (partial messages only).", s->ctl_rx_bytes);
	metric(o, "broadcasts_replaced_total", "counter",
	       "Live broadcasts a newer publisher replaced (the older waits as a backup).",
	       s->bcast_replaced);
	metric(o, "broadcast_failovers_total", "counter",
	       "Broadcasts a backup or standby route took over.", s->bcast_failovers);
	metric(o, "broadcast_drain_failovers_total", "counter",
	       "Broadcasts moved to a standby when their route's session sent GOAWAY.",
	       s->bcast_drained);
	metric(o, "upstream_reattached_total", "counter",
	       "Upstream subscriptions whose broadcast's route was lost that a new route of it "
	       "took over within their subscribers' group deadline.",
	       s->ups_reattached);
	metric(o, "announces_duplicate_total", "counter",
	       "Duplicate ANNOUNCEs in one session on lite-03/04 (session closed with 12).",
	       s->ann_duplicates);
	metric(o, "announces_restart_total", "counter",
	       "Duplicate (restart) ANNOUNCEs in one session on lite-05.", s->ann_restarts);
}

/* The libc heap by object kind (moq_heapacct.h; issue 28), and what
 * mallinfo2 has in use that no kind accounts for (kind="other"). */
static void heap_metrics(struct mbuf_w *o)
{
	struct moq_heap_kind_stat hk[MOQ_HEAP_KINDS];
	struct mallinfo2 mi = mallinfo2();
	int64_t sum = 0, in_use = (int64_t)(mi.uordblks + mi.hblkhd);

	moq_heap_read(hk);
	put(o,
	    "# HELP moqdp_heap_bytes The libc heap in use, by object kind (malloc_usable_size).\n"
	    "# TYPE moqdp_heap_bytes gauge\n");
	for (int k = 0; k < MOQ_HEAP_KINDS; k++) {
		put(o, "moqdp_heap_bytes{kind=\"%s\"} %" PRId64 "\n", moq_heap_kind_name(k),
		    hk[k].bytes);
		sum += hk[k].bytes;
	}
	put(o, "moqdp_heap_bytes{kind=\"other\"} %" PRId64 "\n", in_use - sum);
	put(o, "# HELP moqdp_heap_objects Heap objects, by kind.\n"
	       "# TYPE moqdp_heap_objects gauge\n");
	for (int k = 0; k < MOQ_HEAP_KINDS; k++)
		put(o, "moqdp_heap_objects{kind=\"%s\"} %" PRId64 "\n", moq_heap_kind_name(k),
		    hk[k].objs);
	metric(o, "malloc_in_use_bytes", "gauge",
	       "The libc heap in use (mallinfo2 uordblks + hblkhd).", (uint64_t)in_use);
}

int moq_relay_metrics(const struct moq_relay_stats *s, char *buf, size_t len)
{
	struct mbuf_w o = {buf, len, 0, 0};
	double hz = s->tsc_hz ? (double)s->tsc_hz : 1;

	metric(&o, "workers", "gauge", "Worker lcores.", s->workers);
	metric(&o, "connections", "gauge", "Open QUIC connections.", s->conns);
	metric(&o, "connections_half_open", "gauge", "Handshakes in progress.", s->half_open);
	metric(&o, "connections_accepted_total", "counter", "QUIC connections accepted.",
	       s->conns_total);
	put(&o,
	    "# HELP moqdp_connections_refused_total New QUIC connections refused by a relay "
	    "limit.\n"
	    "# TYPE moqdp_connections_refused_total counter\n"
	    "moqdp_connections_refused_total{reason=\"max_connections\"} %" PRIu64 "\n"
	    "moqdp_connections_refused_total{reason=\"half_open\"} %" PRIu64 "\n"
	    "moqdp_connections_refused_total{reason=\"per_addr\"} %" PRIu64 "\n",
	    s->conns_refused_max, s->conns_refused_half_open, s->conns_refused_per_addr);
	metric(&o, "sessions", "gauge", "moq-lite sessions open.", s->sessions);
	/* issue 23: --fastpath (quic/handoff.c) */
	metric(&o, "fastpath_connections", "gauge",
	       "QUIC connections served by the 1-RTT fast path (--fastpath on).",
	       s->fastpath_conns);
	metric(&o, "fastpath_handoffs_total", "counter",
	       "Connections moved from ngtcp2 to the fast path.", s->handoffs);
	metric(&o, "fastpath_key_updates_total", "counter",
	       "1-RTT key updates on the fast path, either side's (RFC 9001, 6).",
	       s->fastpath_key_updates);
	metric(&o, "fastpath_packets_lost_total", "counter",
	       "Packets the fast path declared lost (RFC 9002, 6).", s->fastpath_pkts_lost);
	metric(&o, "fastpath_paths_validated_total", "counter",
	       "New peer addresses the fast path validated (RFC 9000, 9).",
	       s->fastpath_paths_validated);
	{
		static const char *const why[MOQ_QUIC_HANDOFF_REASONS] = {
		        "not_confirmed", "in_flight", "stream_busy", "key_update",
		        "cipher",        "limit",     "import",      "other"};

		put(&o, "# HELP moqdp_fastpath_handoffs_refused_total Handoff attempts that left "
		        "a connection on ngtcp2, by reason (cipher, limit, import: for good; the "
		        "others: retried).\n"
		        "# TYPE moqdp_fastpath_handoffs_refused_total counter\n");
		for (int k = 0; k < MOQ_QUIC_HANDOFF_REASONS; k++)
			put(&o,
			    "moqdp_fastpath_handoffs_refused_total{reason=\"%s\"} %" PRIu64 "\n",
			    why[k], s->handoff_refused[k]);
	}
	metric(&o, "broadcasts", "gauge", "Broadcasts announced to the relay.", s->broadcasts);
	metric(&o, "subscribers", "gauge", "Active downstream subscriptions (--max-subscribers).",
	       s->subscribers);
	metric(&o, "tracks", "gauge", "Upstream tracks served, summed over workers (--max-tracks).",
	       s->tracks);
	put(&o,
	    "# HELP moqdp_subscribes_refused_total SUBSCRIBEs refused by a relay limit.\n"
	    "# TYPE moqdp_subscribes_refused_total counter\n"
	    "moqdp_subscribes_refused_total{reason=\"max_subscribers\"} %" PRIu64 "\n"
	    "moqdp_subscribes_refused_total{reason=\"max_tracks\"} %" PRIu64 "\n",
	    s->subs_refused_limit, s->tracks_refused_limit);
	metric(&o, "groups_in_total", "counter", "Groups ingested into the cache.", s->groups_in);
	metric(&o, "frames_in_total", "counter", "Frames ingested into the cache.", s->frames_in);
	metric(&o, "media_in_bytes_total", "counter", "Media payload bytes ingested.",
	       s->media_bytes_in);
	metric(&o, "groups_out_total", "counter", "Group streams opened to subscribers.",
	       s->groups_out);
	metric(&o, "frames_out_total", "counter", "Frames queued to subscribers.", s->frames_out);
	metric(&o, "fanout_visits_total", "counter", "Sessions fanout visited (marked with work).",
	       s->fanout_visits);
	metric(&o, "fanout_visits_idle_total", "counter",
	       "Fanout visits that wrote nothing (marks without work).", s->fanout_visits_idle);
	metric(&o, "media_out_bytes_total", "counter", "Media payload bytes queued to subscribers.",
	       s->media_bytes_out);
	metric(&o, "group_resets_total", "counter",
	       "Group streams reset (expired, evicted, lagged, dropped, cancelled).",
	       s->group_resets);
	metric(&o, "rx_packets_total", "counter", "Frames (datagrams) received.", s->rx_pkts);
	metric(&o, "rx_bytes_total", "counter", "Bytes received.", s->rx_bytes);
	metric(&o, "tx_packets_total", "counter", "Frames (datagrams) sent.", s->tx_pkts);
	metric(&o, "tx_bytes_total", "counter", "Bytes sent.", s->tx_bytes);
	metric(&o, "rx_datagrams_total", "counter", "UDP datagrams handed to QUIC.", s->rx_udp);
	metric(&o, "rx_udp_partial_checksum_total", "counter",
	       "Datagrams accepted with a kernel partial UDP checksum (af_packet).",
	       s->rx_l4_partial);
	metric(&o, "rx_nombuf_total", "counter", "RX mbuf allocation failures (ports).",
	       s->rx_nombuf);
	metric(&o, "rx_missed_total", "counter", "Frames the NIC dropped (imissed).", s->imissed);
	metric(&o, "tx_dropped_total", "counter",
	       "Frames not sent (TX buffer full, no mbuf, unresolved).", s->tx_drops);
	metric(&o, "tx_ring_full_total", "counter",
	       "TX bursts the ring did not take whole (the rest waits; no new packets meanwhile).",
	       s->tx_ring_full);
	metric(&o, "redirected_total", "counter", "Datagrams forwarded to their owner lcore.",
	       s->redirected);
	metric(&o, "redirect_dropped_total", "counter", "Datagrams for unknown or full lcores.",
	       s->redirect_drops);
	metric(&o, "tx_gso_sends_total", "counter",
	       "Kernel backend: sends carrying several datagrams (UDP GSO).", s->gso_msgs);
	metric(&o, "tcp_connections", "gauge", "--tcp: TCP connections open.", s->tcp_conns);
	metric(&o, "tcp_connections_total", "counter", "--tcp: TCP connections accepted.",
	       s->tcp_conns_total);
	metric(&o, "tcp_refused_total", "counter",
	       "--tcp: TCP connections closed at once by --max-tcp-conns.", s->tcp_refused);
	metric(&o, "ws_sessions_total", "counter", "--tcp: WebSocket (qmux) sessions opened.",
	       s->ws_sessions);
	metric(&o, "ws_protocol_closes_total", "counter",
	       "--tcp: WebSocket sessions closed for bad input (a qmux CONNECTION_CLOSE).",
	       s->ws_protocol_closes);
	metric(&o, "ws_refused_origin_total", "counter",
	       "--tcp: WebSocket upgrades refused 403, an Origin not in --allowed-origins.",
	       s->ws_refused_origin);
	metric(&o, "tcp_closes_slow_total", "counter",
	       "--tcp: connections closed at the write deadline (a reader that stopped reading).",
	       s->tcp_closes_slow);
	metric(&o, "fetches", "gauge", "--tcp: /fetch requests in progress (each pins a group).",
	       s->web_fetches);
	metric(&o, "fetches_refused_total", "counter",
	       "--tcp: /fetch requests refused 503, past the listener's bound.",
	       s->web_fetches_refused);
	metric(&o, "exception_to_kernel_total", "counter",
	       "--tcp, dpdk backend: frames handed to the exception port (TCP, ARP, ICMP).",
	       s->exc_in);
	metric(&o, "exception_from_kernel_total", "counter",
	       "--tcp, dpdk backend: frames the kernel wrote on the exception port, sent.",
	       s->exc_out);
	metric(&o, "exception_drops_total", "counter",
	       "--tcp, dpdk backend: frames the exception port did not take.", s->exc_drops);
	metric(&o, "exception_refused_total", "counter",
	       "--tcp, dpdk backend: TCP frames to a port not the relay's, dropped.",
	       s->exc_refused);
	metric(&o, "announcements_total", "counter",
	       "Gratuitous ARPs and unsolicited NAs sent (start, link up).", s->announcements);
	metric(&o, "goaway_sent_total", "counter", "GOAWAY sent to sessions (drain).", s->goaways);
	metric(&o, "admit_goaway_total", "counter",
	       "GOAWAY sent to new subscribers refused for capacity (--admit-refuse goaway=URL).",
	       s->goaways_capacity);
	metric(&o, "admit_sessions_total", "counter",
	       "Sessions admitted as subscribers (their first SUBSCRIBE accepted).",
	       s->subs_admitted);
	metric(&o, "admit_closed_windows_total", "counter",
	       "100 ms windows a worker admitted no new subscriber (--admit-busy).",
	       s->admit_closed_windows);
	metric(&o, "drain_closed_total", "counter", "Connections closed at the end of a drain.",
	       s->drain_closes);
	metric(&o, "quic_dropped_total", "counter", "Datagrams QUIC dropped.", s->quic_dropped);
	metric(&o, "cert_reloads_total", "counter",
	       "SIGHUP: worker endpoints that took the new certificate.", s->cert_reloads);
	metric(&o, "cert_reload_errors_total", "counter",
	       "SIGHUP: worker endpoints that refused it (the old one stays).",
	       s->cert_reload_errors);
	put(&o,
	    "# HELP moqdp_auth_refused_total Sessions closed or requests refused with 6 "
	    "(--auth-*).\n"
	    "# TYPE moqdp_auth_refused_total counter\n"
	    "moqdp_auth_refused_total{reason=\"setup\"} %" PRIu64 "\n"
	    "moqdp_auth_refused_total{reason=\"expired\"} %" PRIu64 "\n"
	    "moqdp_auth_refused_total{reason=\"request\"} %" PRIu64 "\n",
	    s->auth_refused, s->auth_expired, s->auth_denied);
	metric(&o, "auth_reloads_total", "counter", "SIGHUP: auth key sets swapped in.",
	       s->auth_reloads);
	metric(&o, "auth_reload_errors_total", "counter",
	       "SIGHUP: auth key files refused (the old keys stay).", s->auth_reload_errors);
	metric(&o, "auth_url_requests_total", "counter",
	       "--auth-url: events posted to the auth server (connect, revalidate, end).",
	       s->auth_url_requests);
	put(&o,
	    "# HELP moqdp_auth_url_answers_total --auth-url answers to connect and revalidate.\n"
	    "# TYPE moqdp_auth_url_answers_total counter\n"
	    "moqdp_auth_url_answers_total{result=\"admitted\"} %" PRIu64 "\n"
	    "moqdp_auth_url_answers_total{result=\"refused\"} %" PRIu64 "\n"
	    "moqdp_auth_url_answers_total{result=\"unavailable\"} %" PRIu64 "\n",
	    s->auth_url_admitted, s->auth_url_refused, s->auth_url_unavailable);
	metric(&o, "connections_old_cert", "gauge",
	       "Open connections still on a replaced certificate.", s->conns_old_cert);
	metric(&o, "cert_generation", "gauge",
	       "The certificate generation: 1 at start, + 1 per SIGHUP that loaded one.",
	       s->cert_generation);
	metric(&o, "cert_pem_loads_total", "counter",
	       "PEM certificate chains read and parsed (start and SIGHUP).", s->cert_pem_loads);
	put(&o,
	    "# HELP moqdp_certificate_info The certificate browsers pin "
	    "(serverCertificateHashes).\n"
	    "# TYPE moqdp_certificate_info gauge\nmoqdp_certificate_info{sha256=\"%s\"} 1\n",
	    s->cert_sha256);
	metric(&o, "certificate_not_after_seconds", "gauge",
	       "The generated certificate's end, Unix seconds (0 with --cert).",
	       (uint64_t)s->cert_not_after);
	metric(&o, "certificate_renewals_total", "counter",
	       "Generated certificates replaced before they expired.", s->cert_renewals);
	metric(&o, "webtransport_sessions_total", "counter",
	       "WebTransport CONNECTs accepted (moq-lite sessions over HTTP/3).", s->wt_sessions);
	metric(&o, "webtransport_refused_total", "counter",
	       "WebTransport CONNECTs refused (4xx / 5xx, bounds).", s->wt_refused);
	metric(&o, "webtransport_h3_errors_total", "counter",
	       "HTTP/3 connections closed with an HTTP/3 error.", s->wt_h3_errors);
	metric(&o, "webtransport_streams_total", "counter",
	       "WebTransport streams the peers opened.", s->wt_streams_in);
	metric(&o, "webtransport_streams_rejected_total", "counter",
	       "WebTransport streams refused (no such session, bad prefix).",
	       s->wt_streams_rejected);
	metric(&o, "webtransport_held_total", "counter",
	       "WebTransport CONNECTs that came before the client's SETTINGS (held until them).",
	       s->wt_held);
	metric(&o, "webtransport_refused_origin_total", "counter",
	       "WebTransport CONNECTs refused 403, an Origin not in --allowed-origins.",
	       s->wt_refused_origin);
	put(&o,
	    "# HELP moqdp_busy_seconds_total Worker time spent on packets.\n"
	    "# TYPE moqdp_busy_seconds_total counter\nmoqdp_busy_seconds_total %.6f\n",
	    (double)s->busy_tsc / hz);
	put(&o,
	    "# HELP moqdp_idle_seconds_total Worker time spent polling empty queues.\n"
	    "# TYPE moqdp_idle_seconds_total counter\nmoqdp_idle_seconds_total %.6f\n",
	    (double)s->idle_tsc / hz);
	metric(&o, "busy_polls_total", "counter", "Worker iterations that did work.",
	       s->busy_polls);
	metric(&o, "idle_polls_total", "counter", "Worker iterations that found nothing to do.",
	       s->idle_polls);
	metric(&o, "cache_used_bytes", "gauge", "Cache memory in use.", s->cache_used);
	metric(&o, "cache_budget_bytes", "gauge", "Cache byte budget.", s->cache_budget);
	metric(&o, "cache_tracks", "gauge", "Tracks in the cache.", s->cache_tracks);
	metric(&o, "cache_groups", "gauge", "Groups in the cache.", s->cache_groups);
	metric(&o, "cache_evicted_total", "counter", "Groups evicted for the byte budget.",
	       s->cache_evicted);
	metric(&o, "cache_expired_total", "counter", "Groups expired (--max-latency).",
	       s->cache_expired);
	metric(&o, "cache_lagged_total", "counter", "Groups pushed out of a track's window.",
	       s->cache_lagged);
	metric(&o, "cache_pool_limit_bytes", "gauge",
	       "Bytes the cache's pools may reserve (from --cache-budget).", s->cache_pool_limit);
	metric(&o, "cache_pool_reserved_bytes", "gauge", "Bytes the cache's pools reserved.",
	       s->cache_pool_reserved);
	metric(&o, "cache_pool_slab_bytes", "gauge", "Bytes of pool slabs serving a size class.",
	       s->cache_pool_slab_bytes);
	metric(&o, "cache_pool_held_bytes", "gauge",
	       "Bytes the pools hand to the cache (class sizes; rte_malloc above the largest).",
	       s->cache_pool_obj_bytes);
	metric(&o, "cache_pool_exhausted_total", "counter",
	       "Cache allocations refused: the pools were at their limit.",
	       s->cache_pool_exhausted);
	metric(&o, "cache_pool_fallback_total", "counter",
	       "Cache allocations above the largest class (rte_malloc).", s->cache_pool_fallback);
	metric(&o, "mbufs_in_use", "gauge", "Mbufs of the relay's pools in use.", s->mbufs_in_use);
	metric(&o, "mbufs_in_use_peak", "gauge",
	       "Most mbufs in use seen (sampled every ~10 ms and at every read).", s->mbufs_peak);
	metric(&o, "mbufs", "gauge", "Mbufs in the relay's pools.", s->mbufs_total);
	lat_metrics(&o, &s->relay_lat);
	put(&o,
	    "# HELP moqdp_uptime_seconds Time since start.\n# TYPE moqdp_uptime_seconds "
	    "gauge\nmoqdp_uptime_seconds %.3f\n",
	    (double)s->uptime_ns / 1e9);
	worker_metrics(&o, s);
	put(&o, "# HELP moqdp_net_dropped_total Frames the network stack dropped, by reason.\n"
	        "# TYPE moqdp_net_dropped_total counter\n");
	for (int d = 0; d < MOQ_NET_DROP_MAX; d++)
		put(&o, "moqdp_net_dropped_total{reason=\"%s\"} %" PRIu64 "\n",
		    moq_net_drop_name(d), s->net_drop[d]);
	bounds_metrics(&o, s);
	metric(&o, "upstream_subscriptions", "gauge",
	       "Upstream subscriptions open (one per track a worker relays), summed over workers.",
	       s->upstream_subs);
	metric(&o, "cluster_announces_dropped_total", "counter",
	       "Announces dropped because their hop chain holds this relay (reflected).",
	       s->loops_refused);
	metric(&o, "announces_hops_refused_total", "counter",
	       "Announces not built or dropped: their hop chain would pass 32 hops.",
	       s->ann_hops_refused);
	metric(&o, "announces_chain_restarted_total", "counter",
	       "Client announces whose hop chain the relay replaced by its own (only peers "
	       "present hops).",
	       s->ann_chains_restarted);
	metric(&o, "hub_dropped_total", "counter",
	       "Messages between workers dropped: the receiving worker's hub mailbox was full.",
	       s->hub_dropped);
	metric(&o, "groups_end_lost_total", "counter",
	       "Groups below a publisher's END that had not arrived within the max latency "
	       "(dropped to subscribers).",
	       s->groups_end_lost);
	heap_metrics(&o);
	put(&o, "# HELP moqdp_groups_reset_total Group streams reset to subscribers, by reason "
	        "(the reset code's name).\n# TYPE moqdp_groups_reset_total counter\n");
	put(&o,
	    "moqdp_groups_reset_total{reason=\"old\"} %" PRIu64 "\n"
	    "moqdp_groups_reset_total{reason=\"evicted\"} %" PRIu64 "\n"
	    "moqdp_groups_reset_total{reason=\"lagged\"} %" PRIu64 "\n"
	    "moqdp_groups_reset_total{reason=\"dropped\"} %" PRIu64 "\n"
	    "moqdp_groups_reset_total{reason=\"cancel\"} %" PRIu64 "\n",
	    s->resets_old, s->resets_evicted, s->resets_lagged, s->resets_dropped,
	    s->resets_cancel);
	metric(&o, "groups_skipped_total", "counter",
	       "Groups not sent to a subscriber: gone from the cache before a stream could open.",
	       s->groups_skipped);
	metric(&o, "groups_in_late_total", "counter",
	       "Upstream groups refused: a newer group of the track had begun first (STOP_SENDING "
	       "2 upstream, DROP 24 downstream).",
	       s->groups_in_late);
	late_metrics(&o, s);
	metric(&o, "quic_ack_packets_in_total", "counter",
	       "QUIC packets received whose first frame is an ACK.", s->quic_ack_pkts_in);
	metric(&o, "quic_streams_opened_total", "counter", "QUIC streams opened, by either side.",
	       s->quic_streams_opened);
	metric(&o, "quic_timer_expiries_total", "counter",
	       "Connection timer expiries handled (the timer heap).", s->quic_timer_expiries);
	metric(&o, "quic_timer_idle_total", "counter",
	       "Timer expiries after which the connection's next write sent nothing.",
	       s->quic_timer_idle);
	metric(&o, "quic_timer_pacing_total", "counter",
	       "Pacing-only expiries handled right after a write (no timer wake-up).",
	       s->quic_timer_inline);
	metric(&o, "quic_packets_in_total", "counter", "QUIC packets handed to connections.",
	       s->quic_pkts_in);
	metric(&o, "quic_packets_out_total", "counter", "QUIC packets written.", s->quic_pkts_out);
	metric(&o, "datagrams_in_total", "counter",
	       "Single-frame groups received as QUIC datagrams (lite-05 6.4).", s->dgrams_in);
	metric(&o, "datagrams_in_dropped_total", "counter",
	       "Datagrams dropped: undecodable, no live subscription, or late.", s->dgrams_in_bad);
	metric(&o, "ietf_extensions_kept_total", "counter",
	       "IETF objects whose extension headers the cache keeps for IETF readers.",
	       s->ietf_ext_kept);
	metric(&o, "ietf_extensions_dropped_total", "counter",
	       "IETF objects whose extension headers were dropped (datagrams, over 4 KiB).",
	       s->ietf_ext_dropped);
	metric(&o, "ietf_subgroups_refused_total", "counter",
	       "IETF subgroup streams refused: a subgroup other than 0.",
	       s->ietf_subgroups_refused);
	metric(&o, "ietf_groups_paused_total", "counter",
	       "Groups not sent to IETF subscriptions paused with forward 0.",
	       s->ietf_groups_paused);
	metric(&o, "ietf_fills_total", "counter", "Draft-20 fills (FILL_PARAMETERS) served.",
	       s->ietf_fills);
	metric(&o, "ietf_fill_objects_total", "counter", "Objects draft-20 fills carried.",
	       s->ietf_fill_objects);
	metric(&o, "ietf_fills_refused_total", "counter",
	       "Draft-20 fills refused (a range filter): their stream reset after the header.",
	       s->ietf_fills_refused);
	metric(&o, "datagrams_out_total", "counter",
	       "Single-frame groups sent to subscribers as QUIC datagrams.", s->dgrams_out);
	metric(&o, "datagrams_too_large_total", "counter",
	       "Single-frame groups too large for a datagram: sent on a stream instead.",
	       s->dgrams_too_large);
	metric(&o, "quic_datagrams_dropped_total", "counter",
	       "Datagrams queued and never sent (queue overflow, connection closed).",
	       s->quic_dgrams_dropped);
	metric(&o, "fastpath_datagrams_lost_total", "counter",
	       "Datagrams the fast path sent in packets declared lost (never retransmitted).",
	       s->fastpath_dgrams_lost);
	metric(&o, "fastpath_ranges_coarsened_total", "counter",
	       "Fast-path stream ranges that found the interval pool dry: resent again, not lost.",
	       s->fastpath_ivl_coarsened);
	return o.over ? MOQ_ERR_TOO_LARGE : (int)o.off;
}

/* Per peer link (cluster.h), appended to /metrics' @buf after its first
 * @off bytes. Returns the new length or MOQ_ERR_TOO_LARGE. */
static int cluster_metrics(const struct moq_cluster *c, char *buf, size_t len, int off)
{
	struct mbuf_w o = {buf, len, (size_t)off, 0};
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} series[] = {
	        {"state", "gauge", "Peer link: 0 down, 1 connecting, 2 up.",
	         offsetof(struct moq_cluster_link_info, state)},
	        {"rtt_seconds", "gauge", "Peer link: smoothed RTT.",
	         offsetof(struct moq_cluster_link_info, rtt_ns)},
	        {"upstream_subscriptions", "gauge",
	         "Peer link: our upstream subscriptions over it (one per track).",
	         offsetof(struct moq_cluster_link_info, upstream_subs)},
	        {"sent_bytes_total", "counter", "Peer link: UDP payload bytes sent.",
	         offsetof(struct moq_cluster_link_info, bytes_sent)},
	        {"received_bytes_total", "counter", "Peer link: UDP payload bytes received.",
	         offsetof(struct moq_cluster_link_info, bytes_recv)},
	        {"reconnects_total", "counter", "Peer link: dials after the first.",
	         offsetof(struct moq_cluster_link_info, reconnects)},
	        {"connects_total", "counter", "Peer link: sessions that became ready.",
	         offsetof(struct moq_cluster_link_info, connects)},
	};
	unsigned int nb = moq_cluster_links(c);

	if (off < 0 || nb == 0)
		return off;
	for (size_t k = 0; k < sizeof(series) / sizeof(series[0]); k++) {
		put(&o, "# HELP moqdp_cluster_link_%s %s\n# TYPE moqdp_cluster_link_%s %s\n",
		    series[k].name, series[k].help, series[k].name, series[k].type);
		for (unsigned int i = 0; i < nb; i++) {
			struct moq_cluster_link_info li;
			uint64_t v;

			moq_cluster_link_info(c, i, &li);
			if (series[k].off == offsetof(struct moq_cluster_link_info, state))
				v = (uint64_t)li.state;
			else
				memcpy(&v, (const char *)&li + series[k].off, sizeof(v));
			if (series[k].off == offsetof(struct moq_cluster_link_info, rtt_ns))
				put(&o, "moqdp_cluster_link_%s{peer=\"%s\"} %.6f\n", series[k].name,
				    li.url, (double)v / 1e9);
			else
				put(&o, "moqdp_cluster_link_%s{peer=\"%s\"} %" PRIu64 "\n",
				    series[k].name, li.url, v);
		}
	}
	return o.over ? MOQ_ERR_TOO_LARGE : (int)o.off;
}

static int mgmt_metrics(const struct relay_mgmt *m, char *buf, size_t len, int off);

int moq_relay_metrics_text(void *relay, char *buf, size_t len)
{
	struct moq_relay_stats s;
	int n;

	moq_relay_stats(relay, &s);
	n = moq_relay_metrics(&s, buf, len);
	n = cluster_metrics(moq_relay_cluster(relay), buf, len, n);
	return mgmt_metrics(moq_relay_mgmt_of(relay), buf, len, n);
}

/* HTTP ------------------------------------------------------------------ */

int moq_relay_mgmt_open(struct relay_mgmt *m, struct moq_relay *r, const char *addr, char *err,
                        size_t errlen)
{
	struct moq_cfg_addr a;
	struct moq_quic_addr sa;
	char host[64], *colon;
	int one = 1, fd;
	unsigned int port;
	socklen_t len = sizeof(sa.u);

	m->relay = r;
	if (addr[0] == '\0')
		return 0;
	snprintf(host, sizeof(host), "%s", addr);
	colon = strrchr(host, ':');
	*colon = '\0';
	port = (unsigned int)atoi(colon + 1);
	if (host[0] == '[') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	if (moq_pmd_parse_addr(host, &a) != 0) {
		snprintf(err, errlen, "--mgmt: '%s' is not host:port", addr);
		return MOQ_ERR_CONFIG;
	}
	moq_relay_addr_from(&sa, a.family == AF_INET ? 4 : 6, a.addr, (uint16_t)port);
	fd = socket(a.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, &sa.u.sa, sa.len) != 0 || listen(fd, 16) != 0) {
		snprintf(err, errlen, "--mgmt: cannot listen on %s: %s", addr, strerror(errno));
		if (fd >= 0)
			close(fd);
		return MOQ_ERR_IO;
	}
	getsockname(fd, &sa.u.sa, &len);
	m->http_port = a.family == AF_INET ? ntohs(sa.u.in4.sin_port) : ntohs(sa.u.in6.sin6_port);
	m->http_fd = fd;
	return 0;
}

void moq_relay_mgmt_close(struct relay_mgmt *m)
{
	while (m->npend > 0)
		close(m->pend[--m->npend].fd);
	if (m->http_fd >= 0)
		close(m->http_fd);
	m->http_fd = -1;
}

static void respond(int fd, const char *status, const char *type, const char *body, size_t blen)
{
	char hdr[256];
	int n = snprintf(hdr, sizeof(hdr),
	                 "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
	                 "Connection: close\r\n\r\n",
	                 status, type, blen);

	if (write(fd, hdr, (size_t)n) == n && blen > 0) {
		for (size_t off = 0; off < blen;) {
			ssize_t w = write(fd, body + off, blen - off);

			if (w <= 0)
				break;
			off += (size_t)w;
		}
	}
}

/* The management port's own figures, after the relay's in /metrics and
 * /status/metrics (another thread: the counters are written atomically on
 * the main lcore, the pending count published at the end of each poll). */
static int mgmt_metrics(const struct relay_mgmt *m, char *buf, size_t len, int off)
{
	struct mbuf_w o = {buf, len, (size_t)off, 0};

	if (off < 0)
		return off;
	metric(&o, "mgmt_http_requests_total", "counter", "Requests the management port answered.",
	       __atomic_load_n(&m->http_requests, __ATOMIC_RELAXED));
	metric(&o, "mgmt_http_timeouts_total", "counter",
	       "Management connections closed unanswered: no whole request within 2 s, or "
	       "pushed out by a 17th.",
	       __atomic_load_n(&m->http_timeouts, __ATOMIC_RELAXED));
	metric(&o, "mgmt_http_pending", "gauge",
	       "Management connections whose request was on its way at the last poll.",
	       __atomic_load_n(&m->pending_now, __ATOMIC_RELAXED));
	return o.over ? MOQ_ERR_TOO_LARGE : (int)o.off;
}

/* Answer the request @req (NUL-terminated) on @fd. */
static void serve(struct relay_mgmt *m, int fd, const char *req)
{
	static char body[65536]; /* 64 workers: ~22 KB of per-worker series */
	struct timeval tv = {0, 200000}; /* a slow reader costs the main lcore 200 ms at most */
	int fl = fcntl(fd, F_GETFL);
	struct moq_relay_stats s;

	/* the answer is written blocking, within the send timeout */
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	__atomic_fetch_add(&m->http_requests, 1, __ATOMIC_RELAXED);
	if (strncmp(req, "GET ", 4) != 0) {
		respond(fd, "405 Method Not Allowed", "text/plain", "GET only\n", 9);
	} else if (strncmp(req + 4, "/health ", 8) == 0 || strncmp(req + 4, "/health?", 8) == 0) {
		int draining = moq_relay_draining(m->relay);

		if (draining)
			respond(fd, "503 Service Unavailable", "text/plain", "draining\n", 9);
		else
			respond(fd, "200 OK", "text/plain", "ok\n", 3);
	} else if (strncmp(req + 4, "/metrics ", 9) == 0) {
		int len;

		moq_relay_stats(m->relay, &s);
		len = moq_relay_metrics(&s, body, sizeof(body));
		len = cluster_metrics(moq_relay_cluster(m->relay), body, sizeof(body), len);
		len = mgmt_metrics(m, body, sizeof(body), len);
		if (len < 0)
			respond(fd, "500 Internal Server Error", "text/plain", "too large\n", 10);
		else
			respond(fd, "200 OK", "text/plain; version=0.0.4", body, (size_t)len);
	} else {
		respond(fd, "404 Not Found", "text/plain", "not found\n", 10);
	}
}

/* Memory the pools gave back (issue 28) is free in libc's arenas, still in
 * RSS: when the counted heap (moq_heapacct.h, read without locks) fell by
 * HEAP_TRIM_DROP (2 MiB) from its peak since the last trim, malloc_trim returns the
 * free pages to the system. Checked every HEAP_TRIM_NS on the main lcore;
 * a trim locks each arena in turn (a worker that mallocs meanwhile waits:
 * rare in the steady state, and only after a burst was given back). */
#define HEAP_TRIM_NS   5000000000ull
#define HEAP_TRIM_DROP (2ll << 20)

static void heap_give_back(struct relay_mgmt *m)
{
	struct moq_heap_kind_stat hk[MOQ_HEAP_KINDS];
	struct timespec ts;
	uint64_t now;
	int64_t sum = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (now - m->heap_checked < HEAP_TRIM_NS)
		return;
	m->heap_checked = now;
	moq_heap_read(hk);
	for (int k = 0; k < MOQ_HEAP_KINDS; k++)
		sum += hk[k].bytes;
	if (sum > m->heap_peak)
		m->heap_peak = sum;
	if (m->heap_peak - sum >= HEAP_TRIM_DROP) {
		malloc_trim(0);
		__atomic_fetch_add(&m->heap_trims, 1, __ATOMIC_RELAXED);
		m->heap_peak = sum;
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Close pending connection @i (the last takes its place). */
static void mgmt_drop(struct relay_mgmt *m, unsigned int i)
{
	close(m->pend[i].fd);
	m->pend[i] = m->pend[--m->npend];
}

/* Read what pending connection @i has; once its request's header is all
 * there (or fills the buffer: answered as it is), answer and close it. A
 * peer that closed or failed is dropped. The request is read to the end of
 * its header so that closing does not reset the connection under the
 * answer (unread data makes the kernel send RST). */
static void mgmt_read(struct relay_mgmt *m, unsigned int i)
{
	struct mgmt_conn *c = &m->pend[i];
	ssize_t n = read(c->fd, c->req + c->len, sizeof(c->req) - 1u - c->len);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		mgmt_drop(m, i);
		return;
	}
	c->len = (uint16_t)(c->len + n);
	c->req[c->len] = '\0';
	if (strstr(c->req, "\r\n\r\n") == NULL && strstr(c->req, "\n\n") == NULL &&
	    c->len < sizeof(c->req) - 1u)
		return;
	serve(m, c->fd, c->req);
	mgmt_drop(m, i);
}

void moq_relay_mgmt_poll(struct relay_mgmt *m, int timeout_ms)
{
	struct pollfd p[1 + MGMT_PENDING];
	uint64_t now;
	int fd;

	heap_give_back(m);
	if (m->http_fd < 0) {
		poll(NULL, 0, timeout_ms);
		return;
	}
	p[0] = (struct pollfd){m->http_fd, POLLIN, 0};
	for (unsigned int i = 0; i < m->npend; i++)
		p[1 + i] = (struct pollfd){m->pend[i].fd, POLLIN, 0};
	if (poll(p, 1 + m->npend, timeout_ms) > 0) {
		for (unsigned int i = m->npend; i-- > 0;)
			if (p[1 + i].revents)
				mgmt_read(m, i);
		while ((p[0].revents & POLLIN) &&
		       (fd = accept4(m->http_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
			if (m->npend == MGMT_PENDING) { /* the oldest goes */
				__atomic_fetch_add(&m->http_timeouts, 1, __ATOMIC_RELAXED);
				mgmt_drop(m, 0);
			}
			m->pend[m->npend] = (struct mgmt_conn){.fd = fd, .t0 = mono_ns()};
			mgmt_read(m, m->npend++); /* the request may be there already */
		}
	}
	now = mono_ns();
	for (unsigned int i = m->npend; i-- > 0;)
		if (now - m->pend[i].t0 >= MGMT_REQ_TIMEOUT) {
			__atomic_fetch_add(&m->http_timeouts, 1, __ATOMIC_RELAXED);
			mgmt_drop(m, i);
		}
	__atomic_store_n(&m->pending_now, m->npend, __ATOMIC_RELAXED);
}

/* telemetry ------------------------------------------------------------- */

/* Run @fill for the registered relay under tel_lock; -1 when there is none
 * (not yet, or destroyed). */
static int tel_locked(int (*fill)(struct relay_mgmt *m, struct rte_tel_data *d),
                      struct rte_tel_data *d)
{
	int rc = -1;

	pthread_mutex_lock(&tel_lock);
	if (tel_relay != NULL)
		rc = fill(tel_relay, d);
	pthread_mutex_unlock(&tel_lock);
	return rc;
}

/* relay_lat_* of @h into dict @d: us (rounded) and ns. */
static void tel_latency(struct rte_tel_data *d, const struct moq_lat_hist *h)
{
	static const struct {
		const char *us, *ns;
		double q;
	} f[] = {{"relay_lat_p50_us", "relay_lat_p50_ns", 0.5},
	         {"relay_lat_p90_us", "relay_lat_p90_ns", 0.9},
	         {"relay_lat_p99_us", "relay_lat_p99_ns", 0.99}};

	rte_tel_data_add_dict_u64(d, "relay_lat_samples", h->samples);
	rte_tel_data_add_dict_u64(d, "relay_lat_overflow", h->overflow);
	for (unsigned int i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		uint64_t v = moq_lat_hist_quantile(h, f[i].q);

		rte_tel_data_add_dict_u64(d, f[i].us, (v + 500) / 1000);
		rte_tel_data_add_dict_u64(d, f[i].ns, v);
	}
	rte_tel_data_add_dict_u64(d, "relay_lat_max_us", (h->max_ns + 500) / 1000);
	rte_tel_data_add_dict_u64(d, "relay_lat_max_ns", h->max_ns);
	rte_tel_data_add_dict_u64(d, "relay_lat_sum_ns", h->sum_ns);
}

/* libc's heap (not the EAL heap: that is /eal/heap_info): malloc_in_use is
 * what is allocated now (ngtcp2 and wolfSSL per-connection state, sessions,
 * quic/alloc.c's size-class cache), malloc_free what libc holds freed but has
 * not returned to the system, malloc_mmap the blocks mmap'd on their own.
 * mallinfo2 walks every arena's bins under its lock: control path only (the
 * soak samples it every 10 s; scripts/soak). */
static void malloc_fill(struct rte_tel_data *d)
{
	struct mallinfo2 mi = mallinfo2();

	rte_tel_data_add_dict_u64(d, "malloc_in_use", mi.uordblks + mi.hblkhd);
	rte_tel_data_add_dict_u64(d, "malloc_free", mi.fordblks);
	rte_tel_data_add_dict_u64(d, "malloc_arena", mi.arena);
	rte_tel_data_add_dict_u64(d, "malloc_mmap", mi.hblkhd);
}

static int stats_fill(struct relay_mgmt *m, struct rte_tel_data *d)
{
	struct moq_relay_stats s;

	moq_relay_stats(m->relay, &s);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "workers", s.workers);
	rte_tel_data_add_dict_u64(d, "ports", s.ports);
	rte_tel_data_add_dict_u64(d, "rx_packets", s.rx_pkts);
	rte_tel_data_add_dict_u64(d, "rx_bytes", s.rx_bytes);
	rte_tel_data_add_dict_u64(d, "tx_packets", s.tx_pkts);
	rte_tel_data_add_dict_u64(d, "tx_bytes", s.tx_bytes);
	rte_tel_data_add_dict_u64(d, "rx_datagrams", s.rx_udp);
	rte_tel_data_add_dict_u64(d, "rx_nombuf", s.rx_nombuf);
	rte_tel_data_add_dict_u64(d, "tx_dropped", s.tx_drops);
	rte_tel_data_add_dict_u64(d, "tx_ring_full", s.tx_ring_full);
	rte_tel_data_add_dict_u64(d, "net_dropped", s.net_drops);
	rte_tel_data_add_dict_u64(d, "redirected", s.redirected);
	rte_tel_data_add_dict_u64(d, "redirect_dropped", s.redirect_drops);
	rte_tel_data_add_dict_u64(d, "quic_dropped", s.quic_dropped);
	rte_tel_data_add_dict_u64(d, "busy_tsc", s.busy_tsc);
	rte_tel_data_add_dict_u64(d, "idle_tsc", s.idle_tsc);
	rte_tel_data_add_dict_u64(d, "busy_polls", s.busy_polls);
	rte_tel_data_add_dict_u64(d, "idle_polls", s.idle_polls);
	rte_tel_data_add_dict_u64(d, "connections", s.conns);
	rte_tel_data_add_dict_u64(d, "conns_refused_max", s.conns_refused_max);
	rte_tel_data_add_dict_u64(d, "conns_refused_half_open", s.conns_refused_half_open);
	rte_tel_data_add_dict_u64(d, "conns_refused_per_addr", s.conns_refused_per_addr);
	rte_tel_data_add_dict_u64(d, "sessions", s.sessions);
	rte_tel_data_add_dict_u64(d, "exception_to_kernel", s.exc_in);
	rte_tel_data_add_dict_u64(d, "exception_from_kernel", s.exc_out);
	rte_tel_data_add_dict_u64(d, "exception_drops", s.exc_drops);
	rte_tel_data_add_dict_u64(d, "exception_refused", s.exc_refused);
	rte_tel_data_add_dict_string(d, "certificate_sha256", s.cert_sha256);
	rte_tel_data_add_dict_u64(d, "certificate_not_after", (uint64_t)s.cert_not_after);
	rte_tel_data_add_dict_u64(d, "certificate_renewals", s.cert_renewals);
	rte_tel_data_add_dict_u64(d, "wt_sessions", s.wt_sessions);
	rte_tel_data_add_dict_u64(d, "wt_refused", s.wt_refused);
	rte_tel_data_add_dict_u64(d, "wt_h3_errors", s.wt_h3_errors);
	rte_tel_data_add_dict_u64(d, "wt_streams", s.wt_streams_in);
	rte_tel_data_add_dict_u64(d, "wt_held", s.wt_held);
	rte_tel_data_add_dict_u64(d, "wt_refused_origin", s.wt_refused_origin);
	rte_tel_data_add_dict_u64(d, "ws_refused_origin", s.ws_refused_origin);
	rte_tel_data_add_dict_u64(d, "tcp_closes_slow", s.tcp_closes_slow);
	rte_tel_data_add_dict_u64(d, "fetches", s.web_fetches);
	rte_tel_data_add_dict_u64(d, "fetches_refused", s.web_fetches_refused);
	rte_tel_data_add_dict_u64(d, "announces_hops_refused", s.ann_hops_refused);
	rte_tel_data_add_dict_u64(d, "announces_chain_restarted", s.ann_chains_restarted);
	rte_tel_data_add_dict_u64(d, "hub_dropped", s.hub_dropped);
	rte_tel_data_add_dict_u64(d, "groups_end_lost", s.groups_end_lost);
	rte_tel_data_add_dict_u64(d, "broadcasts", s.broadcasts);
	rte_tel_data_add_dict_u64(d, "frames_in", s.frames_in);
	rte_tel_data_add_dict_u64(d, "frames_out", s.frames_out);
	rte_tel_data_add_dict_u64(d, "fanout_visits", s.fanout_visits);
	rte_tel_data_add_dict_u64(d, "fanout_visits_idle", s.fanout_visits_idle);
	rte_tel_data_add_dict_u64(d, "mbufs_in_use", s.mbufs_in_use);
	rte_tel_data_add_dict_u64(d, "mbufs_peak", s.mbufs_peak);
	rte_tel_data_add_dict_u64(d, "mbufs_total", s.mbufs_total);
	malloc_fill(d);
	rte_tel_data_add_dict_u64(d, "quic_spare_bytes", s.quic_spare_bytes);
	/* admission (--admit-busy) */
	rte_tel_data_add_dict_u64(d, "subscribers", s.subscribers);
	rte_tel_data_add_dict_u64(d, "admit_sessions", s.subs_admitted);
	rte_tel_data_add_dict_u64(d, "admit_refused", s.subs_refused_capacity);
	rte_tel_data_add_dict_u64(d, "admit_goaways", s.goaways_capacity);
	rte_tel_data_add_dict_u64(d, "admit_closed_windows", s.admit_closed_windows);
	/* groups reset by reason, groups never sent; fixed per-connection work */
	rte_tel_data_add_dict_u64(d, "groups_reset_old", s.resets_old);
	rte_tel_data_add_dict_u64(d, "groups_reset_evicted", s.resets_evicted);
	rte_tel_data_add_dict_u64(d, "groups_reset_lagged", s.resets_lagged);
	rte_tel_data_add_dict_u64(d, "groups_reset_dropped", s.resets_dropped);
	rte_tel_data_add_dict_u64(d, "groups_reset_cancel", s.resets_cancel);
	rte_tel_data_add_dict_u64(d, "groups_skipped", s.groups_skipped);
	rte_tel_data_add_dict_u64(d, "groups_in_late", s.groups_in_late);
	rte_tel_data_add_dict_u64(d, "ietf_ext_kept", s.ietf_ext_kept);
	rte_tel_data_add_dict_u64(d, "ietf_ext_dropped", s.ietf_ext_dropped);
	rte_tel_data_add_dict_u64(d, "ietf_subgroups_refused", s.ietf_subgroups_refused);
	rte_tel_data_add_dict_u64(d, "ietf_groups_paused", s.ietf_groups_paused);
	rte_tel_data_add_dict_u64(d, "ietf_fills", s.ietf_fills);
	rte_tel_data_add_dict_u64(d, "ietf_fills_refused", s.ietf_fills_refused);
	rte_tel_data_add_dict_u64(d, "groups_late_taken", s.groups_late_taken);
	rte_tel_data_add_dict_u64(d, "groups_late_max_us", s.late_max_ns / 1000);
	rte_tel_data_add_dict_u64(d, "groups_late_sum_us", s.late_sum_ns / 1000);
	for (int b = 0; b < MOQ_LATE_BUCKETS; b++) {
		char key[32];
		if (b < MOQ_LATE_BUCKETS - 1)
			snprintf(key, sizeof(key), "groups_late_le_%ums", moq_late_bucket_ms[b]);
		else
			snprintf(key, sizeof(key), "groups_late_le_inf");
		rte_tel_data_add_dict_u64(d, key, s.late_hist[b]);
	}
	rte_tel_data_add_dict_u64(d, "groups_hole_timeouts", s.groups_hole_timeouts);
	rte_tel_data_add_dict_u64(d, "quic_ack_pkts_in", s.quic_ack_pkts_in);
	rte_tel_data_add_dict_u64(d, "quic_streams_opened", s.quic_streams_opened);
	rte_tel_data_add_dict_u64(d, "quic_timer_expiries", s.quic_timer_expiries);
	rte_tel_data_add_dict_u64(d, "quic_timer_idle", s.quic_timer_idle);
	rte_tel_data_add_dict_u64(d, "quic_timer_inline", s.quic_timer_inline);
	rte_tel_data_add_dict_u64(d, "quic_pkts_in", s.quic_pkts_in);
	rte_tel_data_add_dict_u64(d, "dgrams_in", s.dgrams_in);
	rte_tel_data_add_dict_u64(d, "dgrams_out", s.dgrams_out);
	rte_tel_data_add_dict_u64(d, "dgrams_too_large", s.dgrams_too_large);
	rte_tel_data_add_dict_u64(d, "quic_pkts_out", s.quic_pkts_out);
	/* relay-added latency since start or the last /moqdp/latency_reset */
	moq_lat_hist_sub(&s.relay_lat, &m->lat_base);
	tel_latency(d, &s.relay_lat);
	return 0;
}

/* /moqdp/heap: the libc heap by object kind (heap_metrics). */
static int tel_heap(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct moq_heap_kind_stat hk[MOQ_HEAP_KINDS];
	struct mallinfo2 mi = mallinfo2();
	int64_t sum = 0, in_use = (int64_t)(mi.uordblks + mi.hblkhd);
	char key[64];

	(void)cmd;
	(void)params;
	moq_heap_read(hk);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "malloc_in_use", (uint64_t)in_use);
	for (int k = 0; k < MOQ_HEAP_KINDS; k++) {
		sum += hk[k].bytes;
		snprintf(key, sizeof(key), "%s_bytes", moq_heap_kind_name(k));
		rte_tel_data_add_dict_u64(d, key, hk[k].bytes > 0 ? (uint64_t)hk[k].bytes : 0);
		snprintf(key, sizeof(key), "%s_objects", moq_heap_kind_name(k));
		rte_tel_data_add_dict_u64(d, key, hk[k].objs > 0 ? (uint64_t)hk[k].objs : 0);
	}
	rte_tel_data_add_dict_u64(d, "other_bytes", in_use > sum ? (uint64_t)(in_use - sum) : 0);
	pthread_mutex_lock(&tel_lock);
	if (tel_relay != NULL)
		rte_tel_data_add_dict_u64(
		        d, "malloc_trims",
		        __atomic_load_n(&tel_relay->heap_trims, __ATOMIC_RELAXED));
	pthread_mutex_unlock(&tel_lock);
	return 0;
}

static int tel_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	return tel_locked(stats_fill, d);
}

/* /moqdp/latency_reset: a new window for /moqdp/stats' relay_lat_*; answers
 * with the window that ended. */
static int latency_reset_fill(struct relay_mgmt *m, struct rte_tel_data *d)
{
	struct moq_latency l;

	latency_reset(m, &l);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "relay_lat_samples", l.samples);
	rte_tel_data_add_dict_u64(d, "relay_lat_overflow", l.overflow);
	rte_tel_data_add_dict_u64(d, "relay_lat_p50_ns", (uint64_t)(l.p50_us * 1e3));
	rte_tel_data_add_dict_u64(d, "relay_lat_p99_ns", (uint64_t)(l.p99_us * 1e3));
	rte_tel_data_add_dict_u64(d, "relay_lat_max_ns", (uint64_t)(l.max_us * 1e3));
	return 0;
}

static int tel_latency_reset(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	return tel_locked(latency_reset_fill, d);
}

static int conns_fill(struct relay_mgmt *m, struct rte_tel_data *d)
{
	struct relay_mgmt_worker w[MOQ_RELAY_MAX_WORKERS];
	unsigned int n;

	rte_tel_data_start_dict(d);
	n = moq_relay_mgmt_workers(m->relay, w);
	for (unsigned int i = 0; i < n; i++) {
		char k[32];

		snprintf(k, sizeof(k), "worker%u", i);
		rte_tel_data_add_dict_u64(d, k, w[i].conns_active);
		snprintf(k, sizeof(k), "worker%u_accepted", i);
		rte_tel_data_add_dict_u64(d, k, w[i].conns_accepted);
		snprintf(k, sizeof(k), "worker%u_sessions", i);
		rte_tel_data_add_dict_u64(d, k, w[i].sessions);
	}
	return 0;
}

static int tel_conns(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	return tel_locked(conns_fill, d);
}

static int cache_fill(struct relay_mgmt *m, struct rte_tel_data *d)
{
	struct relay_mgmt_cache c;

	rte_tel_data_start_dict(d);
	moq_relay_mgmt_cache(m->relay, &c);
	rte_tel_data_add_dict_u64(d, "budget_bytes", c.budget);
	rte_tel_data_add_dict_u64(d, "used_bytes", c.used);
	rte_tel_data_add_dict_u64(d, "max_latency_us", c.max_latency_us);
	rte_tel_data_add_dict_u64(d, "tracks", c.tracks);
	rte_tel_data_add_dict_u64(d, "groups", c.groups);
	rte_tel_data_add_dict_u64(d, "evicted", c.evicted);
	rte_tel_data_add_dict_u64(d, "expired", c.expired);
	rte_tel_data_add_dict_u64(d, "lagged", c.lagged);
	rte_tel_data_add_dict_u64(d, "pool_limit_bytes", c.pool_limit);
	rte_tel_data_add_dict_u64(d, "pool_reserved_bytes", c.pool_reserved);
	rte_tel_data_add_dict_u64(d, "pool_slab_bytes", c.pool_slab_bytes);
	rte_tel_data_add_dict_u64(d, "pool_held_bytes", c.pool_obj_bytes);
	rte_tel_data_add_dict_u64(d, "pool_objects", c.pool_objs);
	rte_tel_data_add_dict_u64(d, "pool_cached_objects", c.pool_cached);
	rte_tel_data_add_dict_u64(d, "pool_exhausted", c.pool_exhausted);
	rte_tel_data_add_dict_u64(d, "pool_fallback_allocs", c.pool_fallback);
	rte_tel_data_add_dict_u64(d, "pool_remote_frees", c.pool_remote_frees);
	return 0;
}

static int tel_cache(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	return tel_locked(cache_fill, d);
}

/* Relay-wide figures (moq/ has no way to list tracks yet): broadcasts
 * announced (each once, though the hub mirrors it into every worker's origin
 * table), tracks and groups in the cache all workers share, upstream
 * subscriptions and downstream subscribers summed over workers, groups
 * ingested and group streams fanned out. */
static int tracks_fill(struct relay_mgmt *m, struct rte_tel_data *d)
{
	struct moq_relay_stats s;

	moq_relay_stats(m->relay, &s);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "broadcasts", s.broadcasts);
	rte_tel_data_add_dict_u64(d, "tracks", s.cache_tracks);
	rte_tel_data_add_dict_u64(d, "groups", s.cache_groups);
	rte_tel_data_add_dict_u64(d, "upstream_subs", s.upstream_subs);
	rte_tel_data_add_dict_u64(d, "subscribers", s.subscribers);
	rte_tel_data_add_dict_u64(d, "groups_in", s.groups_in);
	rte_tel_data_add_dict_u64(d, "groups_out", s.groups_out);
	return 0;
}

static int tel_tracks(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	return tel_locked(tracks_fill, d);
}

/* /moqdp/cluster: one dict per peer link (cluster.h), by index. */
static int cluster_fill(struct relay_mgmt *m, struct rte_tel_data *d)
{
	const struct moq_cluster *c = moq_relay_cluster(m->relay);
	struct moq_relay_stats s;

	moq_relay_stats(m->relay, &s);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "announces_dropped", s.loops_refused);
	rte_tel_data_add_dict_u64(d, "links", moq_cluster_links(c));
	for (unsigned int i = 0; i < moq_cluster_links(c); i++) {
		struct rte_tel_data *ld = rte_tel_data_alloc();
		struct moq_cluster_link_info li;
		char name[16];

		if (ld == NULL)
			return -ENOMEM;
		moq_cluster_link_info(c, i, &li);
		rte_tel_data_start_dict(ld);
		rte_tel_data_add_dict_string(ld, "peer", li.url);
		rte_tel_data_add_dict_u64(ld, "state", (uint64_t)li.state);
		rte_tel_data_add_dict_u64(ld, "rtt_us", li.rtt_ns / 1000);
		rte_tel_data_add_dict_u64(ld, "upstream_subs", li.upstream_subs);
		rte_tel_data_add_dict_u64(ld, "bytes_sent", li.bytes_sent);
		rte_tel_data_add_dict_u64(ld, "bytes_recv", li.bytes_recv);
		rte_tel_data_add_dict_u64(ld, "reconnects", li.reconnects);
		rte_tel_data_add_dict_u64(ld, "connects", li.connects);
		snprintf(name, sizeof(name), "link%u", i);
		rte_tel_data_add_dict_container(d, name, ld, 0);
	}
	return 0;
}

static int tel_cluster(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	return tel_locked(cluster_fill, d);
}

void moq_relay_telemetry_register(struct relay_mgmt *m)
{
	static int registered;

	pthread_mutex_lock(&tel_lock);
	tel_relay = m;
	pthread_mutex_unlock(&tel_lock);
	if (registered)
		return;
	registered = 1;
	rte_telemetry_register_cmd("/moqdp/stats", tel_stats, "Relay counters. No parameters");
	rte_telemetry_register_cmd(
	        "/moqdp/conns", tel_conns,
	        "Open and accepted connections, sessions, per worker. No parameters");
	rte_telemetry_register_cmd("/moqdp/cache", tel_cache,
	                           "Cache budget and use. No parameters");
	rte_telemetry_register_cmd("/moqdp/tracks", tel_tracks,
	                           "Broadcasts, tracks, subscriptions, relay-wide. No "
	                           "parameters");
	rte_telemetry_register_cmd("/moqdp/cluster", tel_cluster,
	                           "Peer relay links: state, RTT, upstream subscriptions, bytes, "
	                           "reconnects. No parameters");
	rte_telemetry_register_cmd("/moqdp/heap", tel_heap,
	                           "The libc heap by object kind (bytes, objects). No parameters");
	rte_telemetry_register_cmd("/moqdp/latency_reset", tel_latency_reset,
	                           "Start a new window for /moqdp/stats relay_lat_*; returns "
	                           "the one that ended. No parameters");
}

void moq_relay_telemetry_unregister(struct relay_mgmt *m)
{
	pthread_mutex_lock(&tel_lock); /* waits for a handler inside the relay */
	if (tel_relay == m)
		tel_relay = NULL;
	pthread_mutex_unlock(&tel_lock);
}
