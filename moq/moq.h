/* SPDX-License-Identifier: MIT */
/*
 * moq.h: moq-lite sessions over quic/ and the relay's routing between them.
 *
 * One struct moq_node per worker thread holds every session of that
 * worker's QUIC endpoint. It runs in two configurations:
 *
 *  - relay (cfg.relay = 1): publishing clients are asked for their
 *    announcements; the origin table maps each announced broadcast to its
 *    publisher. A subscriber's SUBSCRIBE to a remote track opens one upstream
 *    subscription (shared by every later subscriber, parameters aggregated as
 *    PROTOCOL.md, Priority says, closed by the last unsubscribe). The
 *    publisher's group streams are parsed as chunks arrive and written into
 *    the cache; fanout sends each subscriber one uni stream per group, the
 *    frames by reference into the cache.
 *  - client (cfg.relay = 0): the load generator and tests. Broadcasts
 *    published with moq_node_publish are served from the same cache (the
 *    application writes frames into it); subscriptions made with
 *    moq_session_subscribe deliver frames through callbacks.
 *
 * A relay with several workers gives every worker's node the same
 * struct moq_hub (and the same cache): announcements are mirrored between
 * the nodes and a subscriber on any worker is served from the shared cache,
 * the publisher's worker holding the one upstream subscription.
 *
 * Wiring: give the QUIC endpoint moq_node_quic_callbacks() as its callbacks
 * and the node as its config.user (server), or connect with moq_node_connect
 * (client). Call moq_node_poll(now) every loop iteration: it writes pending
 * fanout data, resets stale groups and runs the node's timers. Time always
 * comes from the caller (nanoseconds, the endpoint's clock); moq/ makes no
 * system calls and includes no DPDK header.
 *
 * A session that sends malformed or unexpected input is closed with the
 * protocol's error code (PROTOCOL.md, Error codes); other sessions and the
 * cache are not touched.
 *
 * Errors: 0 / counts, or negative MOQ_ERR_* (common/moq_err.h).
 */
#ifndef MOQ_MOQ_MOQ_H
#define MOQ_MOQ_MOQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "moq_err.h"
#include "cache.h"
#include "quic.h"

struct moq_node;
struct moq_session;
struct moq_hub;
struct moq_auth;

/* The ALPNs a node speaks, in preference order (PROTOCOL.md). */
#ifndef MOQ_ALPN_06
#define MOQ_ALPN_06 "moq-lite-06" /* lite06_codec.h */
#endif
#define MOQ_ALPN_05 "moq-lite-05"
#define MOQ_ALPN_04 "moq-lite-04"
#define MOQ_ALPN_03 "moq-lite-03"
/* PROTOCOL.md, The relay's cache: a dropped publisher lingers 5 s. */
#define MOQ_LINGER_NS 5000000000ull
/* PROTOCOL.md, Track: default max latency 5 s. */
#define MOQ_DEFAULT_MAX_LATENCY_MS 5000u

/* Per-peer bounds (struct moq_node_cfg; 0 there = these). Chosen so a
 * single peer cannot make the relay hold much more than a busy legitimate
 * one: a production relay carries thousands of broadcasts, one publisher a
 * handful (a room's cameras), and names are short (moq-lite paths of a few
 * segments, track names like "video" or "catalog.json"). */
#define MOQ_DEFAULT_MAX_BROADCASTS         16384u /* in the origin table */
#define MOQ_DEFAULT_MAX_SESSION_BROADCASTS 1024u  /* announced by one session */
#define MOQ_DEFAULT_MAX_FETCHES            16u    /* FETCH replies in flight per session */
#define MOQ_DEFAULT_MAX_BROADCAST_NAME     1024u  /* bytes of a broadcast path */
#define MOQ_DEFAULT_MAX_TRACK_NAME         256u   /* bytes of a track name */
/* A cluster link is one session carrying a whole origin (issue 22): its
 * subscriptions are every track one relay reads from the other, its
 * broadcasts every broadcast of the peer, so it takes these instead of the
 * per-session ones above (the origin table's bound still applies). */
#define MOQ_DEFAULT_LINK_MAX_SUBSCRIPTIONS      65536u
#define MOQ_DEFAULT_LINK_MAX_SESSION_BROADCASTS 16384u /* = MOQ_DEFAULT_MAX_BROADCASTS */

/* Requests (announce, subscribe, track, fetch) return MOQ_ERR_STATE before
 * the session is ready and after the peer sent GOAWAY. */

/* Callbacks of the client role (all optional). They run inside the QUIC
 * callbacks or moq_node_poll, on the node's thread. */
struct moq_node_callbacks {
	/* The session is usable (handshake done, lite-05 SETUP sent). */
	void (*session_ready)(struct moq_session *s, void *user);
	/* The session closed; @code is the moq-lite code (0 clean), @local
	 * whether this side closed it. @s is invalid after the call. */
	void (*session_closed)(struct moq_session *s, void *user, uint64_t code, int local);
	/* An announcement on a request made with moq_session_announce_request:
	 * @path is the full broadcast path (prefix + suffix, normalised). */
	void (*announce)(struct moq_session *s, void *user, const char *path, size_t len,
	                 int active);
	/* A reply on subscription @id (START / END / DROP, or OK on 03/04). */
	void (*sub_reply)(struct moq_session *s, void *user, uint64_t id,
	                  const struct moq_subscribe_reply *r);
	/* The subscription ended: @code -1 = the publisher finished it (FIN),
	 * otherwise the reset code (13 not found, 6, 30, ...). */
	void (*sub_closed)(struct moq_session *s, void *user, uint64_t id, int64_t code);
	/* A group stream of subscription @id began. */
	void (*group_begin)(struct moq_session *s, void *user, uint64_t id, uint64_t seq);
	/* A frame of @size bytes begins; its payload follows in frame_data. */
	void (*frame)(struct moq_session *s, void *user, uint64_t id, uint64_t seq, int64_t ts,
	              uint64_t size);
	/* Payload bytes of the current frame (valid during the call). */
	void (*frame_data)(struct moq_session *s, void *user, uint64_t id, uint64_t seq,
	                   const uint8_t *data, size_t len);
	/* The group stream ended: @code -1 = complete (FIN), else the reset code
	 * (2 old, 24 dropped, 26 lagged, 31 evicted, ...). */
	void (*group_end)(struct moq_session *s, void *user, uint64_t id, uint64_t seq,
	                  int64_t code);
	/* TRACK_INFO for a moq_session_track request. */
	void (*track_info)(struct moq_session *s, void *user, const char *broadcast, size_t blen,
	                   const char *track, size_t tlen, const struct moq_track_info *ti);
	/* The peer sent GOAWAY (@uri may be empty). */
	void (*goaway)(struct moq_session *s, void *user, const char *uri, size_t len);
};

struct moq_node_cfg {
	struct moq_cache *cache;          /* borrowed; ingest and fanout storage. Required
				  * for a relay and for publishing; a client that
				  * only subscribes may leave it NULL */
	unsigned cache_reader;            /* the node's QSBR reader id in the cache */
	int relay;                        /* 1: relay routing; 0: client */
	uint64_t origin;                  /* our hop id (PROTOCOL.md, hop list); 0 = random
				  * (getrandom), never derived from an address */
	uint32_t max_sessions;            /* 0 = 4096 */
	uint32_t max_subscriptions;       /* per session, 0 = 256 (exceeding: reset 11) */
	uint32_t max_subscribers;         /* active downstream subscriptions of the node
					   * (of the relay with a hub), 0 = unlimited;
					   * exceeding: the SUBSCRIBE is reset 11 */
	uint32_t max_tracks;              /* tracks the node serves through upstream
					   * subscriptions (of the relay with a hub: a track
					   * counts once per node whose subscribers read
					   * it), 0 = unlimited; a SUBSCRIBE to a new one
					   * beyond it is reset 11 */
	uint32_t max_announces;           /* announce requests per session, 0 = 16 */
	uint32_t max_group_streams;       /* fanout group streams in flight per session,
				     * 0 = 64 */
	uint32_t max_msg;                 /* largest control message, 0 = 4096 bytes */
	uint64_t session_queue;           /* cap on unacknowledged fanout bytes per session
	                         * (the working limit is max(2 cwnd, 64 KiB) under
	                         * it, so the ranking decides what is sent), 0 = 4 MiB */
	uint64_t linger_ns;               /* 0 = MOQ_LINGER_NS */
	uint32_t batch;                   /* frames per cache read, 0 = MOQ_CACHE_BATCH */
	struct moq_cache_track_cfg track; /* relay: settings of the cache tracks it creates
					   * for upstream subscriptions (max latency, window) */
	const struct moq_node_callbacks *cb;
	void *user;          /* passed to the callbacks */
	struct moq_hub *hub; /* relay with several workers: the hub that joins their
			      * nodes (moq_hub_create); NULL for one node */
	/* Per-peer bounds of a relay (0 = the MOQ_DEFAULT_* above). A
	 * publisher's ANNOUNCE beyond max_broadcasts (the node's origin table)
	 * or max_session_broadcasts (routes one session holds, live or backup),
	 * or naming a path longer than max_broadcast_name, closes that session
	 * with 11 (bounds); a request (SUBSCRIBE, FETCH, TRACK, announce
	 * request) naming a longer path or a track longer than max_track_name,
	 * or a FETCH beyond max_fetches in flight, is reset with 11. Each
	 * refusal is counted (struct moq_node_stats). */
	uint32_t max_broadcasts;
	uint32_t max_session_broadcasts;
	/* The same two per-session bounds for cluster links (0 = the
	 * MOQ_DEFAULT_LINK_* above): a session this relay dialled, or a server
	 * session whose token grants put and get on everything from root ""
	 * (AUTH-CLUSTER.md, Link auth). Without cfg.auth an accepted session
	 * cannot be told from a client: it has the client bounds. */
	uint32_t link_max_subscriptions;
	uint32_t link_max_session_broadcasts;
	uint32_t max_fetches;
	uint32_t max_broadcast_name;
	uint32_t max_track_name;
	/* borrowed; NULL = no auth. Server sessions are authorised at set-up
	 * (lite-05 SETUP Path `?jwt=`; lite-03/04: public prefixes only) and
	 * closed with 6 when refused or when the token expires; announce needs
	 * `put`, subscribe / fetch / track / announce interest need `get`
	 * (auth.h, docs/DEPLOY.md, Auth) */
	struct moq_auth *auth;
	/* relay: how long an upstream subscription stays open after its last
	 * subscriber left (a viewer that comes back within it is served at
	 * once, a flapping one does not make the relay unsubscribe and
	 * subscribe again upstream); 0 = it closes at once */
	uint64_t up_hold_ns;
	/* Admission (moq_node_admit): a SUBSCRIBE the node has no headroom
	 * for is reset with 11 (bounds); with admit_goaway set (a relay URL,
	 * borrowed) a lite-04+ session is also sent GOAWAY naming it, once. */
	const char *admit_goaway;
	size_t admit_goaway_len;
	/* lite-06 SETUP Cost (draft-lcurley-moq-lite-06 7.3.4) we declare on
	 * every lite-06 session: what subscribing from this node costs, in
	 * the deployment's Route Cost units (0: free). has_cost 0: the
	 * parameter is not sent, which the peer prices as 1 */
	int has_cost;
	uint64_t cost;
};

/* Counters of a node (monotonic unless noted). */
/* Buckets of struct moq_node_stats late_hist (upper bounds in ms, then +Inf). */
#define MOQ_LATE_BUCKETS 10
extern const uint32_t moq_late_bucket_ms[MOQ_LATE_BUCKETS - 1];

struct moq_node_stats {
	uint64_t sessions; /* open now */
	uint64_t sessions_total;
	uint64_t sessions_closed_error;             /* closed by us for bad input */
	uint64_t broadcasts;                        /* in the origin table now */
	uint64_t upstream_subs;                     /* open upstream subscriptions now */
	uint64_t groups_in, frames_in, bytes_in;    /* ingested */
	uint64_t groups_out, frames_out, bytes_out; /* fanout (payload bytes queued) */
	uint64_t groups_fin;                        /* fanout group streams finished */
	uint64_t resets_old, resets_evicted, resets_lagged, resets_dropped, resets_cancel;
	uint64_t groups_skipped;       /* not sent: gone before a stream could open */
	uint64_t refused_bounds;       /* requests refused by a configured limit */
	uint64_t loops_refused;        /* announces dropped by loop prevention */
	uint64_t ann_hops_refused;     /* announces not built or dropped: the hop chain
					* would pass MOQ_MAX_HOPS (32) */
	uint64_t ann_chains_restarted; /* client announces whose hop chain the relay
					* replaced by its own (only peers present hops) */
	uint64_t hub_dropped;          /* hub messages to this node dropped: its
					* mailbox held MOQ_HUB_BOX_MAX */
	uint64_t subscribers;          /* active downstream subscriptions now (this node) */
	uint64_t tracks;               /* upstream tracks counted against max_tracks now */
	uint64_t subs_refused_limit;   /* SUBSCRIBEs refused by max_subscribers */
	uint64_t tracks_refused_limit; /* SUBSCRIBEs refused by max_tracks */
	uint64_t subscribes_in;        /* SUBSCRIBEs received (refused ones too) */
	/* Per-peer bounds: what each refused (each also counts in
	 * refused_bounds), and the control-stream buffers held now. */
	uint64_t ann_refused_relay;       /* ANNOUNCEs over max_broadcasts (session closed 11) */
	uint64_t ann_refused_session;     /* ... over max_session_broadcasts (closed 11) */
	uint64_t ann_req_refused;         /* announce requests over max_announces (reset 11) */
	uint64_t subs_refused_session;    /* SUBSCRIBEs over max_subscriptions (reset 11) */
	uint64_t fetches_refused;         /* FETCHes over max_fetches (reset 11) */
	uint64_t names_refused_broadcast; /* paths over max_broadcast_name (11) */
	uint64_t names_refused_track;     /* track names over max_track_name (reset 11) */
	uint64_t msgs_refused_size;       /* control messages declaring more than max_msg
					  * (session closed 11) */
	uint64_t ctl_rx_bytes;            /* control-stream receive buffers allocated now */
	/* Broadcast ownership (AUTH-CLUSTER.md) */
	uint64_t bcast_replaced;  /* a newer publisher replaced a live one (it waits as backup) */
	uint64_t bcast_failovers; /* a backup or standby route took over */
	uint64_t bcast_drained;   /* ... from a live route whose session sent GOAWAY */
	uint64_t ups_reattached;  /* upstreams waiting after a lost route a new one took */
	uint64_t ann_duplicates;  /* duplicate ANNOUNCEs in one session (lite-03/04: closed 12) */
	uint64_t ann_restarts;    /* ... lite-05: a restart */
	uint64_t auth_refused;    /* sessions closed with 6 at set-up (token, role) */
	uint64_t auth_expired;    /* sessions closed with 6 when their token expired */
	uint64_t auth_denied;     /* requests refused with 6: path outside the token */
	/* Admission (moq_node_admit) */
	uint64_t subs_refused_capacity; /* SUBSCRIBEs of new subscribers refused (reset 11):
					 * no headroom */
	uint64_t goaways_capacity;      /* sessions sent GOAWAY (cfg.admit_goaway) for it */
	uint64_t subs_admitted;         /* sessions admitted as subscribers (their first
					 * SUBSCRIBE accepted), ever */
	/* Groups below a publisher's END that had not arrived when the
	 * track's max latency passed: DROPped (3 timeout) to its subscribers,
	 * counted once per track here (issue 29) */
	uint64_t groups_end_lost;
	/* Peer uni streams reset before their group header arrived (a
	 * subscriber cannot tell which group it lost: bench-fanout's "reset
	 * before header", issue 22 item 19) */
	uint64_t groups_reset_unseen;
	/* Upstream groups refused because a newer group of the track had
	 * begun first (the cache keeps groups in order: STOP_SENDING 2 to the
	 * publisher, DROP 24 to subscribers) */
	uint64_t groups_in_late;
	/* IETF sessions (ietf_session.c): objects from IETF publishers whose
	 * extension headers (timestamps) were dropped (the lite side and the
	 * cache carry none), and subgroup streams refused (a subgroup other
	 * than 0: a group is one stream in the cache) */
	uint64_t ietf_ext_dropped;
	uint64_t ietf_subgroups_refused;
	/* groups not sent to an IETF subscription with forward 0 (the relay
	 * cancels them for that session) */
	uint64_t ietf_groups_paused;
	/* objects whose extension headers the cache keeps for IETF readers
	 * (subgroup streams: moq_cache_frame_begin_ext) */
	uint64_t ietf_ext_kept;
	/* draft-20 fills (FILL_PARAMETERS): served, objects they carried, and
	 * refused (a range filter: its stream reset after the header) */
	uint64_t ietf_fills;
	uint64_t ietf_fill_objects;
	uint64_t ietf_fills_refused;
	/* lite-05 datagrams (6.4; dgram.c) */
	uint64_t dgrams_in;        /* single-frame groups received as datagrams */
	uint64_t dgrams_in_bad;    /* ... dropped: undecodable, unknown or ended
				    * subscription, late (not above the newest) */
	uint64_t dgrams_out;       /* single-frame groups sent as datagrams */
	uint64_t dgrams_too_large; /* ... that did not fit one: sent as a stream */
	/* Issue 22 item 19, the grace: upstream groups taken late (below the
	 * track's newest: a newer group's header came first), by how late
	 * (now minus the created time of the next newer group, which the late
	 * one takes): at most 1, 2, 5, 10, 20, 50, 100, 200, 500 ms, more; and
	 * the largest. Subscriber holes DROPped (24) because the wait for a
	 * late group (fanout's HOLE_GRACE_NS) ran out, per subscription as
	 * groups_skipped. */
	uint64_t groups_late_taken;
	uint64_t late_hist[MOQ_LATE_BUCKETS];
	uint64_t late_max_ns, late_sum_ns;
	uint64_t groups_hole_timeouts;
	/* Fanout's visits to marked sessions (sess_mark), and those that
	 * wrote nothing (the cost of a mark without work). */
	uint64_t fanout_visits, fanout_visits_idle;
};

/*
 * moq_hub_create: join the nodes (one per worker) of one relay process:
 * each worker's announcements are mirrored to the others, and a subscriber
 * on one worker to a broadcast published on another gets its data through
 * the shared cache, the owning worker keeping the one upstream subscription.
 * Messages between nodes go through per-node mailboxes drained by
 * moq_node_poll (control path; a short spinlock, never per frame). Nodes with
 * origin 0 take @origin as their hop id (0 = random, getrandom). Returns NULL when
 * @max_nodes is 0 or memory is short.
 */
struct moq_hub *moq_hub_create(uint32_t max_nodes, uint64_t origin);

/* Messages one node's hub mailbox holds between two of its polls: a
 * worker's control-path backlog (announces, subscriptions of the others)
 * stays far below; beyond, a message is dropped and counted (hub_dropped)
 * rather than memory growing without bound behind a stalled worker. */
#define MOQ_HUB_BOX_MAX 65536u

/* moq_hub_destroy: free the hub after every node using it was destroyed. */
void moq_hub_destroy(struct moq_hub *h);

/*
 * moq_node_create: a node using @cfg (copied). Returns NULL when @cfg is
 * invalid (no cache) or memory is short.
 */
struct moq_node *moq_node_create(const struct moq_node_cfg *cfg);

/*
 * moq_node_destroy: free the node. Close the QUIC endpoint first (its
 * conn_closed callbacks release every session); sessions still open are
 * freed here without closing their connections. NULL is a no-op.
 */
void moq_node_destroy(struct moq_node *n);

/* moq_node_quic_callbacks: the QUIC callbacks to install on the endpoint
 * (static storage). The endpoint's config.user must be the node. */
const struct moq_quic_callbacks *moq_node_quic_callbacks(void);

/* moq_node_alpns: the ALPN list (lite-05, 04, 03) and its length. */
const char *const *moq_node_alpns(size_t *count);
/* moq_node_alpns_all: every moq-lite ALPN the node speaks, lite-06 first
 * ("moq-lite-06", 05, 04, 03): a server's list (it prefers 06 when the
 * client offers it). */
const char *const *moq_node_alpns_all(size_t *count);

/*
 * moq_node_poll: write pending fanout data (per session, newest group of
 * the highest priority first, in batches), reset group streams whose group
 * expired / was evicted / lagged, end lingering broadcasts, and run the
 * node's other timers. Only sessions with something new are visited (a track
 * they read moved, an acknowledgement freed budget, a stream or request
 * changed); every 20 ms every session is checked for work nothing announced.
 * Returns the number of streams written.
 */
int moq_node_poll(struct moq_node *n, uint64_t now);

/* moq_node_stats: copy the counters into @out. */
void moq_node_stats(const struct moq_node *n, struct moq_node_stats *out);
/* The heap the IETF translators of @n's sessions hold (ietf_session.c,
 * ietf_heap_bytes: what an IETF session costs besides its lite session),
 * in all; *@n_out: how many, *@max_out: the largest one's (either may be
 * NULL). A walk over the sessions: for diagnostics and tests, not per
 * poll. */
size_t moq_node_ietf_heap(const struct moq_node *n, size_t *n_out, size_t *max_out);

/* moq_node_origin: the node's hop id. */
uint64_t moq_node_origin(const struct moq_node *n);

/*
 * moq_node_publish: announce broadcast @path (normalised; copied) from this
 * node. Its tracks are the cache's tracks under @path (the application
 * creates them with moq_cache_track_create and writes frames). @timescale is
 * sent in TRACK_INFO (0 = 1000 per second). Peers that asked for announces
 * under a matching prefix are told at once. Returns 0, MOQ_ERR_EXISTS,
 * MOQ_ERR_INVAL (bad path), MOQ_ERR_NOMEM.
 */
int moq_node_publish(struct moq_node *n, const char *path, size_t len, uint64_t timescale);

/*
 * moq_node_track_datagrams: (lite-05 6.4) single-frame groups of the local
 * track @t go to subscribers whose session negotiated QUIC datagrams as
 * one datagram each instead of a stream (a frame too large for one: a
 * stream). A lost one is a lost group. Relayed tracks are marked by their
 * publisher: a track one of whose groups arrived as a datagram. Up to
 * MOQ_DGRAM_TRACKS local tracks; the node keeps no reference (unmark with
 * @on 0 before the track is dropped). Returns 0 or MOQ_ERR_LIMIT.
 */
#define MOQ_DGRAM_TRACKS 8
int moq_node_track_datagrams(struct moq_node *n, struct moq_cache_track *t, int on);

/*
 * moq_node_unpublish: end a broadcast published with moq_node_publish:
 * announced as ended, its subscriptions end. Returns 0 or MOQ_ERR_NOTFOUND.
 */
int moq_node_unpublish(struct moq_node *n, const char *path, size_t len, uint64_t now);

/*
 * moq_node_connect: (client role) open a connection on client endpoint @ep
 * and a session on it. @path (may be NULL) is sent in the lite-05 SETUP Path
 * parameter, @role (enum moq_role) in its Role parameter; a session with
 * role MOQ_ROLE_SUBSCRIBER announces none of the node's broadcasts. @user
 * is the session's application pointer. Returns the session or NULL (*@err
 * set when not NULL).
 */
struct moq_session *moq_node_connect(struct moq_node *n, struct moq_quic_endpoint *ep,
                                     const struct moq_quic_addr *local,
                                     const struct moq_quic_addr *remote, const char *path, int role,
                                     void *user, uint64_t now, int *err);

/* moq_session_version: the negotiated version, or 0 before the handshake. */
enum moq_version moq_session_version(const struct moq_session *s);

/* moq_session_ready: nonzero once the session can open streams. */
int moq_session_ready(const struct moq_session *s);

/* moq_session_conn: the QUIC connection (NULL once closed, and for a
 * session on a binding). */
struct moq_quic_conn *moq_session_conn(const struct moq_session *s);

/* moq_session_set_user / moq_session_user: an application pointer. */
void moq_session_set_user(struct moq_session *s, void *user);
void *moq_session_user(const struct moq_session *s);

/*
 * Bindings (BINDINGS.md): a moq-lite session over a transport other than raw
 * QUIC (WebTransport over HTTP/3, qmux over WebSocket). The session calls the
 * binding's ops for stream operations; the binding feeds the session what it
 * saw with the moq_binding_* calls below, in the sense of the QUIC callbacks
 * of quic.h. Raw QUIC sessions keep calling quic/ directly.
 */
struct moq_binding_ops {
	/* Same contracts as moq_quic_stream_open / _write / _reset /
	 * _stop_sending (quic.h): stream ids QUIC-style (bit 0 = server-
	 * initiated, bit 1 = uni); write returns the bytes accepted (fewer under
	 * flow control) or a negative MOQ_QUIC_ERR_*, and the iov memory stays
	 * referenced until moq_binding_stream_acked covers it (fanout passes
	 * cache memory: zero copy). Codes are moq-lite codes; a binding that
	 * maps codes (WebTransport: the HTTP/3 space) maps them itself. */
	int (*stream_open)(void *b, int bidi, int64_t *sid);
	long (*stream_write)(void *b, int64_t sid, const struct iovec *iov, size_t n, int fin);
	int (*stream_reset)(void *b, int64_t sid, uint64_t code);
	int (*stream_stop_sending)(void *b, int64_t sid, uint64_t code);
	/* Close the session with moq-lite @code; the binding then calls
	 * moq_binding_closed (during this call or later). */
	void (*close)(void *b, uint64_t code);
	/* cwnd / bytes_in_flight / RTT for fanout's per-session budget; NULL:
	 * unknown (the budget is the node's session_queue). */
	void (*get_info)(void *b, struct moq_quic_conn_info *out);
	/* --auth-url requests' `transport` ("websocket", ...); NULL: "quic"
	 * (WebTransport is QUIC: rs/moq-auth, request.rs) */
	const char *transport;
	/* lite-05 6.4 datagrams (moq/dgram.c): as moq_quic_dgram_send (@hdr
	 * copied, the payload referenced until @release); NULL: none on this
	 * binding (single-frame groups go on streams) */
	int (*dgram_send)(void *b, const uint8_t *hdr, size_t hdrlen, const struct iovec *iov,
	                  size_t iovcnt, void (*release)(void *arg), void *arg);
	/* --auth-url requests' `remote`, `local` ("ip:port", "[ip6]:port",
	 * @acap bytes each) and `server_name` (@scap): each left "" when
	 * unknown; NULL: the session's QUIC connection's */
	void (*get_peer)(void *b, char *remote, char *local, size_t acap, char *server_name,
	                 size_t scap);
	/* --auth-url requests' `transport` and `alpn` (the protocol the client
	 * speaks) of a binding that carries the session for another one (the
	 * IETF translator's inner moq-lite session: the IETF client's); NULL:
	 * `transport` above and the session's moq-lite version */
	const char *(*get_proto)(void *b, const char **alpn);
	/* What the frame whose header the session just read on group stream
	 * @sid carries beside it (IETF moq-transport: extension headers, its
	 * subgroup and object id), kept in the cache with it
	 * (moq_cache_frame_begin_meta): *@m filled (its bytes valid during the
	 * call), zeroed for nothing. NULL: frames carry nothing (every moq-lite
	 * binding). */
	void (*frame_meta)(void *b, int64_t sid, struct moq_cache_meta *m);
	/* The session accepted a subscriber's SUBSCRIBE (its set-up is done and
	 * it mostly receives): a binding that carries it over a QUIC
	 * connection of its own may let that connection move to the fast path
	 * (moq_quic_conn_allow_handoff), as subscribe.c does for raw QUIC
	 * sessions. NULL: nothing to do (the binding decides elsewhere:
	 * WebTransport at its CONNECT). */
	void (*allow_handoff)(void *b);
};

/* moq_binding_datagram: a datagram's payload for session @s (the binding's
 * own framing removed; valid during the call) */
void moq_binding_datagram(struct moq_session *s, const uint8_t *data, size_t len);

/*
 * moq_binding_accept: a server session on binding @b. @v was negotiated by
 * the binding (wt-protocol, the WebSocket subprotocol); @url is the request
 * target "/path?query": the path roots the session (like the lite-05 SETUP
 * Path), and with cfg.auth its `jwt` query is the token. The session is ready
 * at once (lite-05 SETUP streams follow as on raw QUIC). Returns NULL when
 * the node refuses it (max_sessions, memory): the binding refuses the peer.
 */
struct moq_session *moq_binding_accept(struct moq_node *n, const struct moq_binding_ops *ops,
                                       void *b, enum moq_version v, const char *url,
                                       size_t url_len);

/*
 * moq_binding_connect: a client session on binding @b, once the binding's
 * own handshake is done: as moq_node_connect's session after its QUIC
 * handshake. @path is the lite-05 SETUP Path (NULL: none), @role as there.
 * The node's session_ready callback runs at its next moq_node_poll (after
 * this returns, so moq_session_set_user can come first). NULL: refused.
 */
struct moq_session *moq_binding_connect(struct moq_node *n, const struct moq_binding_ops *ops,
                                        void *b, enum moq_version v, const char *path, int role);

/* What the binding saw. @acked: total bytes of the moq-lite stream the peer
 * acknowledged (the binding's own prefixes excluded). After
 * moq_binding_closed (which frees @s) the binding must not use @s again;
 * moq_node_destroy frees the sessions still open without calling close. */
void moq_binding_stream_data(struct moq_session *s, int64_t sid, const uint8_t *data, size_t len,
                             int fin);
void moq_binding_stream_acked(struct moq_session *s, int64_t sid, uint64_t acked);
void moq_binding_stream_reset(struct moq_session *s, int64_t sid, uint64_t code);
void moq_binding_stream_stop_sending(struct moq_session *s, int64_t sid, uint64_t code);
void moq_binding_stream_closed(struct moq_session *s, int64_t sid);
void moq_binding_writable(struct moq_session *s);
void moq_binding_closed(struct moq_session *s, uint64_t code, int local);

/*
 * moq_session_announce_request: ask the peer for broadcasts under @prefix
 * (announce callback). Returns 0, MOQ_ERR_STATE (not ready), MOQ_ERR_LIMIT,
 * MOQ_ERR_AGAIN (no stream credit), MOQ_ERR_NOMEM.
 */
int moq_session_announce_request(struct moq_session *s, const char *prefix, size_t len);

/* Parameters of moq_session_subscribe. */
struct moq_sub_params {
	uint8_t priority;
	bool ordered;
	uint64_t max_latency_ms;
	uint64_t start; /* MOQ_GROUP_NONE: from the newest group */
	uint64_t end;   /* MOQ_GROUP_NONE: unbounded */
	/* lite-06: start at frame @frame_start of group @start, end before
	 * frame @frame_end (index + 1; 0 = whole group) of group @end; both
	 * need that group named (not MOQ_GROUP_NONE); other versions: 0 */
	uint64_t frame_start, frame_end;
};

/*
 * moq_session_subscribe: subscribe to @track of @broadcast. Returns the
 * subscription id (>= 0), or MOQ_ERR_STATE, MOQ_ERR_LIMIT, MOQ_ERR_AGAIN,
 * MOQ_ERR_INVAL, MOQ_ERR_NOMEM.
 */
int64_t moq_session_subscribe(struct moq_session *s, const char *broadcast, size_t blen,
                              const char *track, size_t tlen, const struct moq_sub_params *p);

/* moq_session_subscribe_update: send SUBSCRIBE_UPDATE. Returns 0 or
 * MOQ_ERR_NOTFOUND / MOQ_ERR_NOMEM. */
int moq_session_subscribe_update(struct moq_session *s, uint64_t id,
                                 const struct moq_sub_params *p);

/*
 * moq_session_unsubscribe: FIN the subscribe stream and STOP_SENDING the
 * subscription's group streams. Returns 0 or MOQ_ERR_NOTFOUND.
 */
int moq_session_unsubscribe(struct moq_session *s, uint64_t id);

/* moq_session_track: ask for TRACK_INFO (lite-05; track_info callback).
 * Returns 0, MOQ_ERR_STATE, MOQ_ERR_INVAL, MOQ_ERR_AGAIN, MOQ_ERR_NOMEM. */
int moq_session_track(struct moq_session *s, const char *broadcast, size_t blen, const char *track,
                      size_t tlen);

/*
 * moq_session_fetch: FETCH group @seq of @track (PROTOCOL.md, Fetch). The
 * frames arrive through group_begin / frame / frame_data / group_end with the
 * returned id (>= 0, from the subscription id space); a reset (13 not found)
 * is group_end with its code. Returns the id or MOQ_ERR_STATE, MOQ_ERR_INVAL,
 * MOQ_ERR_AGAIN, MOQ_ERR_NOMEM.
 */
int64_t moq_session_fetch(struct moq_session *s, const char *broadcast, size_t blen,
                          const char *track, size_t tlen, uint8_t priority, uint64_t seq);

/*
 * moq_node_admit: admission control of new subscribers (issue 13). The
 * node may accept @credit more SUBSCRIBEs before the next call; a
 * SUBSCRIBE from a session that has not yet had one accepted (a new
 * subscriber) is refused with 11 (bounds) while the credit is used up
 * (counted in subs_refused_capacity; GOAWAY too with cfg.admit_goaway),
 * and so is every later SUBSCRIBE of that session (a viewer gets all of
 * its tracks or none). A session once admitted is never refused for
 * capacity: its further SUBSCRIBEs (another track, a new rendition) are
 * accepted and only use up credit. MOQ_ADMIT_OPEN (the default) = no limit. The relay calls it
 * per window of its worker's busy time (dpdk_app/relay.c). Node thread.
 */
#define MOQ_ADMIT_OPEN INT64_MAX
void moq_node_admit(struct moq_node *n, int64_t credit);

/* moq_node_goaway: send GOAWAY with @uri to every session of the node
 * (lite-04+; graceful drain). Returns the number of sessions told. */
int moq_node_goaway(struct moq_node *n, const char *uri, size_t len);

/* moq_session_goaway: send GOAWAY with @uri (lite-04+). Returns 0,
 * MOQ_ERR_STATE, MOQ_ERR_AGAIN, MOQ_ERR_NOMEM. */
int moq_session_goaway(struct moq_session *s, const char *uri, size_t len);

/*
 * moq_session_close: close the session with moq-lite code @code (0 clean).
 * The session is freed during the call (session_closed callback), or at the
 * end of the node callback it was called from; do not use @s afterwards.
 */
void moq_session_close(struct moq_session *s, uint64_t code);

/*
 * moq_session_write_raw: open a stream (@bidi) and write @len raw bytes
 * (copied) on it, with FIN when @fin. For tests of malformed input. Returns
 * the stream id or a negative MOQ_ERR_*.
 */
int64_t moq_session_write_raw(struct moq_session *s, int bidi, const uint8_t *data, size_t len,
                              int fin);

/*
 * moq_session_write_raw_stream: write @len raw bytes (copied) on the open
 * stream @sid, with FIN when @fin: a stream this side opened, or one the
 * peer opened that has a sending side (e.g. the announce request a relay
 * sent us, to answer it with a malformed or duplicate ANNOUNCE). For tests.
 * Returns 0, MOQ_ERR_STATE, MOQ_ERR_NOTFOUND, MOQ_ERR_CLOSED, MOQ_ERR_NOMEM.
 */
int moq_session_write_raw_stream(struct moq_session *s, int64_t sid, const uint8_t *data,
                                 size_t len, int fin);

/* --- relay-added latency ------------------------------------------------ */

/*
 * What is measured (DESIGN.md, Decisions: relay-added latency): for every
 * frame a node's fanout hands to a subscriber's QUIC stream, the time from
 * the frame being complete in the cache (struct moq_cache_frame.arrival,
 * stamped by the cache's clock at ingest) to the moq_node_latency_commit()
 * that ends the worker iteration which wrote the frame's last byte to the
 * stream (after that iteration's encryption and TX burst). One sample per
 * frame and subscriber; FETCH replies are not counted. What QUIC holds back
 * (congestion / flow control) after the write is not included. A subscriber
 * that joins mid-group gets the group's earlier frames at once: they count
 * with their age. The cache's clock and the commit's @now_ns must be the
 * same clock.
 *
 * Per frame written the node notes the arrival in a bounded pending table
 * (MOQ_LAT_PENDING slots hashed by arrival: one frame delivered to many
 * subscribers in the same iteration takes one slot with a count), no clock
 * read, no syscall; a delivery that finds no slot is counted in overflow,
 * not measured.
 */

/* Log-linear histogram of nanoseconds: bucket 0 below 2^10 ns (~1 us), then
 * 16 buckets per power of two up to 2^34 ns (~17 s), the last bucket above.
 * A bucket is 1/16 of its lower bound wide (6.25 %); quantiles report its
 * middle (<= 3.2 % off). */
#define MOQ_LAT_SUB_BITS  4u
#define MOQ_LAT_MIN_SHIFT 10u
#define MOQ_LAT_MAX_SHIFT 34u
#define MOQ_LAT_BUCKETS   (2u + (MOQ_LAT_MAX_SHIFT - MOQ_LAT_MIN_SHIFT) * (1u << MOQ_LAT_SUB_BITS))
/* Pending arrivals per node between commits: up to 4,096 distinct frames
 * per worker iteration (a frame sent to every subscriber is one slot). */
#define MOQ_LAT_PENDING 4096u

/* A latency histogram (plain counters; copy it, merge it, subtract it). */
struct moq_lat_hist {
	uint64_t samples;  /* frame deliveries measured */
	uint64_t overflow; /* deliveries not measured: the pending list was full */
	uint64_t sum_ns;
	uint64_t max_ns;
	uint64_t bucket[MOQ_LAT_BUCKETS];
};

/* A summary of a histogram. Quantiles are 0 without samples. */
struct moq_latency {
	uint64_t samples, overflow;
	double p50_us, p90_us, p99_us, max_us, mean_us;
};

/*
 * moq_node_latency_commit: count the deliveries pending since the last
 * commit at @now_ns (the node's thread, once per worker iteration, after its
 * TX burst; the cache's clock). An arrival later than @now_ns counts as 0.
 * Cheap with nothing pending.
 */
void moq_node_latency_commit(struct moq_node *n, uint64_t now_ns);

/* moq_node_latency_pending: entries waiting for a commit (0 = a caller may
 * skip reading its clock). */
uint32_t moq_node_latency_pending(const struct moq_node *n);

/* moq_node_latency_hist: copy @n's histogram into @out (the node's thread,
 * or a reader that accepts a copy torn between two commits). */
void moq_node_latency_hist(const struct moq_node *n, struct moq_lat_hist *out);

/* moq_node_latency: the summary of @n's histogram since it was created. */
void moq_node_latency(const struct moq_node *n, struct moq_latency *out);

/* moq_lat_hist_merge: add @src into @dst (several workers' histograms). */
void moq_lat_hist_merge(struct moq_lat_hist *dst, const struct moq_lat_hist *src);

/*
 * moq_lat_hist_sub: @dst -= @base, where @base is an earlier copy of the
 * same (merged) histogram: what was counted since. Counts saturate at 0;
 * max_ns becomes the upper bound of the highest bucket left, capped at
 * @dst's max.
 */
void moq_lat_hist_sub(struct moq_lat_hist *dst, const struct moq_lat_hist *base);

/* moq_lat_hist_quantile: the @q (0..1) quantile of @h in ns (the middle of
 * its bucket, capped at max_ns), 0 without samples. */
uint64_t moq_lat_hist_quantile(const struct moq_lat_hist *h, double q);

/* moq_lat_hist_summary: samples, overflow, p50 / p90 / p99 / max / mean of
 * @h in microseconds into @out. */
void moq_lat_hist_summary(const struct moq_lat_hist *h, struct moq_latency *out);

/* --- relay-to-relay (AUTH-CLUSTER.md, Relay-to-relay) -------------------- */

/*
 * moq_route_hash: FNV-1a from moq-relay's seed 0x420C0DECB00B over the
 * broadcast name @name (@len bytes) then each of @hops[0..@nh) as 8
 * little-endian bytes: the deterministic tie-break of route choice, the same
 * on every node of a cluster.
 */
uint64_t moq_route_hash(const char *name, size_t len, const uint64_t *hops, uint32_t nh);

/* moq_session_upstreams: the relay's upstream subscriptions (one per track
 * its subscribers read through this session) open on @s now. */
uint32_t moq_session_upstreams(const struct moq_session *s);

/*
 * moq_session_peer_token: client session @s (a relay's cluster link)
 * presents the token in @setup_path (@len bytes, "path?jwt=..."; as sent in
 * its SETUP or CONNECT): the peer lets us do only what that token grants,
 * and the peer is held to the same here (issue 22). Its announces are taken
 * only under the token's get (what we may read from it); its
 * subscriptions, fetches, TRACKs and announce requests are served only
 * under its put (what we may publish to it), refused with 6 otherwise. The
 * claims are read without checking the signature (auth.h, moq_auth_peek).
 * Without a call the peer may do everything. Returns 0, MOQ_ERR_INVAL (not
 * a client session; no token, or one that does not parse or grants
 * nothing), MOQ_ERR_NOMEM.
 */
int moq_session_peer_token(struct moq_session *s, const char *setup_path, size_t len);

/* moq_session_peer_origin: the peer's hop id from its SETUP (lite-05), 0
 * when it sent none. */
uint64_t moq_session_peer_origin(const struct moq_session *s);

/* moq_session_announce_requests: the peer's announce requests open on @s
 * (a relay peer asks once it accepted the session). */
uint32_t moq_session_announce_requests(const struct moq_session *s);

/* --- the origin table for the HTTP listener (web.h) ---------------------- */

/*
 * moq_node_broadcasts: call @cb for every broadcast in @n's origin table
 * (with a hub: every worker's) under @prefix (normalised here; whole
 * segments) whose publisher is live (lingering ones are left out), with its
 * normalised path and where the suffix after @prefix starts. A snapshot, on
 * the node's thread. Returns the count, or MOQ_ERR_INVAL for a bad prefix.
 */
int moq_node_broadcasts(struct moq_node *n, const char *prefix, size_t len,
                        void (*cb)(void *user, const char *path, size_t plen, size_t suffix_off),
                        void *user);

/* moq_node_broadcast_live: whether broadcast @path (normalised here) is in
 * the origin table with a live publisher. */
bool moq_node_broadcast_live(struct moq_node *n, const char *path, size_t len);

/*
 * moq_node_track_hold: a local (non-session) subscriber of track @track of
 * broadcast @path (normalised), e.g. an HTTP /fetch: the node subscribes
 * upstream to the broadcast's publisher (or the worker owning it) as for a
 * MoQ subscriber, at the live edge. Returns 1 when held (release with
 * moq_node_track_release), 0 when nothing is needed (a broadcast published
 * on the node: it is in the cache), or MOQ_ERR_NOTFOUND (no such live
 * broadcast) / MOQ_ERR_LIMIT (cfg.max_tracks) / MOQ_ERR_NOMEM.
 */
int moq_node_track_hold(struct moq_node *n, const char *path, size_t len, const char *track,
                        size_t tlen);

/* moq_node_track_release: end a hold (moq_node_track_hold returned 1); the
 * upstream subscription ends as for a MoQ subscriber (cfg.up_hold_ns). */
void moq_node_track_release(struct moq_node *n, const char *path, size_t len, const char *track,
                            size_t tlen);

#endif /* MOQ_MOQ_MOQ_H */
