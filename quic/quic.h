/* SPDX-License-Identifier: MIT */
/*
 * quic.h: the moqdp QUIC endpoint (ngtcp2 0.12 + wolfSSL 5.5.4).
 *
 * The endpoint does no I/O. The caller (a worker lcore, a kernel socket loop
 * or a test) hands it:
 *   - received UDP datagrams, moq_quic_endpoint_recv(): pointer, length,
 *     local/remote address and a timestamp. Nothing is kept after the call:
 *     stream data is handed to the application's callback during the call.
 *   - empty packet buffers, moq_quic_endpoint_send(): up to a burst of them
 *     are filled (ngtcp2 writes and encrypts in place) across the connections
 *     that have something to send, honouring congestion control and pacing.
 *   - the clock, moq_quic_endpoint_timers(): runs every connection expiry that
 *     is due (loss detection, idle / handshake timeouts, pacing, closing).
 *
 * One endpoint per worker; an endpoint and its connections are only ever
 * touched by the thread that owns it (DESIGN.md, rule 2: no locks). Server-
 * chosen connection IDs carry the owning worker's id; moq_quic_pkt_worker()
 * reads it so a datagram that arrived on another worker can be forwarded.
 *
 * Stream data is sent without copies: moq_quic_stream_write() queues
 * references to caller memory (iovecs). ngtcp2 keeps pointers to sent data
 * until the peer acknowledges it, so the caller must keep each byte alive
 * until the stream_acked callback reports it (or stream_closed / conn_closed,
 * after which nothing is referenced any more).
 *
 * Errors: 0 / a count, or a negative MOQ_ERR_* (common/moq_err.h). A protocol
 * error closes the offending connection (with the QUIC error code ngtcp2
 * infers) and leaves everything else untouched.
 *
 * Timestamps are nanoseconds on any monotonic clock the caller chooses (the
 * same clock for every call on an endpoint).
 */
#ifndef MOQ_QUIC_QUIC_H
#define MOQ_QUIC_QUIC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>

#include "moq_err.h"

#ifdef __cplusplus
extern "C" {
#endif

struct moq_quic_endpoint;
struct moq_quic_conn;
struct moq_quic_tls;

/* Burst size of one send call in the relay (DESIGN.md, rule 3). */
#define MOQ_QUIC_BURST 32
/* Length of server/client chosen connection IDs (RFC 9000 allows <= 20). */
#define MOQ_QUIC_CID_LEN 16
/* Largest UDP payload the endpoint writes; packet buffers must hold this. */
#define MOQ_QUIC_MAX_UDP_PAYLOAD 1452
/* Smallest packet buffer accepted by moq_quic_endpoint_send (RFC 9000,
 * 14: a client Initial datagram is padded to 1200 bytes). */
#define MOQ_QUIC_MIN_PKT_BUF 1200
/* Length of the static secret (stateless reset and Retry tokens). */
#define MOQ_QUIC_SECRET_LEN 32
/* Longest ALPN protocol id (RFC 7301: 1..255 bytes). */
#define MOQ_QUIC_ALPN_MAX 255

/* An IPv4 or IPv6 UDP address. len is sizeof(in4) or sizeof(in6). */
struct moq_quic_addr {
	union {
		struct sockaddr sa;
		struct sockaddr_in in4;
		struct sockaddr_in6 in6;
	} u;
	socklen_t len;
};

/*
 * A packet buffer for moq_quic_endpoint_send. The caller sets data and cap
 * (and may use user, e.g. for the mbuf that owns data); the endpoint sets
 * len, local, remote and ecn for each buffer it fills.
 */
struct moq_quic_pkt {
	uint8_t *data;               /* in: where to write the UDP payload */
	size_t cap;                  /* in: its size (>= MOQ_QUIC_MIN_PKT_BUF) */
	size_t len;                  /* out: UDP payload length */
	struct moq_quic_addr local;  /* out: source address */
	struct moq_quic_addr remote; /* out: destination address */
	uint8_t ecn;                 /* out: ECN codepoint for the IP header */
	void *user;                  /* caller's; untouched */
};

enum moq_quic_role {
	MOQ_QUIC_SERVER = 0,
	MOQ_QUIC_CLIENT = 1,
};

enum moq_quic_retry_mode {
	MOQ_QUIC_RETRY_AUTO = 0, /* when half-open >= retry_threshold */
	MOQ_QUIC_RETRY_ALWAYS = 1,
	MOQ_QUIC_RETRY_NEVER = 2,
};

enum moq_quic_cc {
	MOQ_QUIC_CC_CUBIC = 0,
	MOQ_QUIC_CC_BBR = 1, /* ngtcp2 0.12's BBR (v1) */
	MOQ_QUIC_CC_RENO = 2,
};

/* Why a connection closed (conn_closed callback). */
enum moq_quic_close_kind {
	MOQ_QUIC_CLOSE_TRANSPORT = 0,   /* QUIC transport error code (RFC 9000, 20.1) */
	MOQ_QUIC_CLOSE_APPLICATION = 1, /* application error code */
	MOQ_QUIC_CLOSE_IDLE = 2,        /* idle timeout, nothing sent */
	MOQ_QUIC_CLOSE_HANDSHAKE_TIMEOUT = 3,
	MOQ_QUIC_CLOSE_STATELESS_RESET = 4, /* the peer sent a stateless reset */
	MOQ_QUIC_CLOSE_RETRY = 5,           /* client: a Retry could not be used */
	MOQ_QUIC_CLOSE_VERSION = 6,         /* client: version negotiation failed */
	MOQ_QUIC_CLOSE_ENDPOINT = 7,        /* the endpoint was destroyed */
};

struct moq_quic_close_info {
	enum moq_quic_close_kind kind;
	int local;             /* 1: this side closed; 0: the peer did */
	uint64_t code;         /* QUIC transport or application error code */
	int err;               /* a MOQ_ERR_* summary: 0 for a clean application close
			   * with code 0, MOQ_ERR_CRYPTO for TLS failures (e.g. ALPN
			   * mismatch), MOQ_ERR_PROTO, MOQ_ERR_CLOSED, ... */
	const char *what;      /* a constant human-readable description, e.g.
			   * "tls alert 120 no_application_protocol (ALPN mismatch)" */
	const uint8_t *reason; /* peer/local reason phrase, valid during the call */
	size_t reasonlen;
};

/*
 * Application callbacks. All are optional (NULL = ignore). They run during
 * moq_quic_endpoint_recv / _send / _timers / moq_quic_conn_close, on the
 * endpoint's thread. @user is moq_quic_conn_user(c): the endpoint's
 * config.user until the application sets its own with moq_quic_conn_set_user.
 * A callback may call moq_quic_stream_* and moq_quic_conn_close on @c, but
 * must not destroy the endpoint. A callback returning a negative value closes
 * the connection with an INTERNAL_ERROR (RFC 9000, 20.1).
 */
struct moq_quic_callbacks {
	/* A server accepted a new connection (before the handshake finishes);
	 * the place to set a per-connection user pointer. */
	void (*conn_new)(struct moq_quic_conn *c, void *user);
	/* The handshake completed; @alpn (NUL-terminated, also readable later
	 * with moq_quic_conn_alpn) is the negotiated protocol. */
	int (*established)(struct moq_quic_conn *c, void *user, const char *alpn);
	/* The peer opened stream @sid (first frame seen). */
	int (*stream_open)(struct moq_quic_conn *c, void *user, int64_t sid);
	/* Stream data at @offset: @data is valid only during the call; copy what
	 * is needed. @fin: this chunk ends the stream (len may be 0). Chunks
	 * arrive in order (ngtcp2 reassembles). */
	int (*stream_data)(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t offset,
	                   const uint8_t *data, size_t len, int fin);
	/* The peer acknowledged the first @acked bytes of stream @sid in total
	 * (@newly more than at the previous call): caller memory backing those
	 * bytes may be released. @app: the stream's pointer of
	 * moq_quic_stream_set_app, NULL when none was set. */
	void (*stream_acked)(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t acked,
	                     uint64_t newly, void *app);
	/* The peer reset stream @sid (RESET_STREAM) with @app_err. */
	void (*stream_reset)(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t app_err,
	                     uint64_t final_size);
	/* The peer asked us to stop sending on @sid (STOP_SENDING); ngtcp2 has
	 * already answered with RESET_STREAM(@app_err). With ngtcp2 0.12 this
	 * is reported when the stream closes, just before stream_closed. */
	void (*stream_stop_sending)(struct moq_quic_conn *c, void *user, int64_t sid,
	                            uint64_t app_err);
	/* Stream @sid is gone in both directions; nothing of the caller's memory
	 * queued on it is referenced any more. @app_err is the code when it was
	 * reset, 0 otherwise. @app: as for stream_acked. */
	void (*stream_closed)(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t app_err,
	                      void *app);
	/* More data may be written: the peer raised a flow control limit on
	 * @sid, or (sid == -1) allowed more streams. */
	void (*writable)(struct moq_quic_conn *c, void *user, int64_t sid);
	/* The connection closed (locally or by the peer, or timed out). After
	 * this call the connection handle is invalid and no caller memory is
	 * referenced. Called once per connection that was handed out. */
	void (*conn_closed)(struct moq_quic_conn *c, void *user,
	                    const struct moq_quic_close_info *info);
	/* RFC 9221: a DATAGRAM frame's payload (@data valid during the call;
	 * dgram.c). NULL: received datagrams are dropped (counted). */
	void (*datagram)(struct moq_quic_conn *c, void *user, const uint8_t *data, size_t len);
};

/* Endpoint configuration. Zero means the default written next to a field. */
struct moq_quic_config {
	enum moq_quic_role role;
	uint8_t worker_id; /* encoded in every CID this endpoint chooses */

	/* TLS. Server: cert_file + key_file (PEM chain / PEM key), or both NULL
	 * to generate a self-signed ECDSA P-256 certificate (development); or
	 * tls, a context built once for several endpoints (moq_quic_tls_new;
	 * then cert_file and key_file are NULL). The endpoint takes its own
	 * reference on tls's context: the caller may free tls after _new. */
	const char *cert_file;
	const char *key_file;
	struct moq_quic_tls *tls;
	/* Client: CA file to verify the server with; NULL = no verification
	 * (development only). With it the certificate must also name
	 * server_name (a DNS name, or an IP address literal). */
	const char *ca_file;
	/* Client: the SNI host name; NULL = "localhost". */
	const char *server_name;
	/* ALPN ids in preference order (server: the ones it accepts; client:
	 * the ones it offers). Required, 1..16 entries. The strings are copied. */
	const char *const *alpn;
	size_t alpn_count;

	/* Shared secret for stateless reset and Retry tokens; identical on
	 * every worker of a host so any worker can validate. NULL = random. */
	const uint8_t *secret; /* MOQ_QUIC_SECRET_LEN bytes */

	/* Limits (each refusal is counted in struct moq_quic_stats). */
	uint32_t max_conns;          /* 0 = 1024 */
	uint32_t max_half_open;      /* 0 = 256: handshakes in progress */
	uint32_t max_conns_per_addr; /* 0 = 64: per source (an IPv4 address, an IPv6
	                                * /64); UINT32_MAX = none */
	/* where those are counted: a table several endpoints share (a relay's
	 * workers: one limit across them; moq_quic_addr_table_new, it must
	 * outlive them), NULL = the endpoint's own */
	struct moq_quic_addr_table *addr_table;
	uint64_t max_streams_bidi;     /* 0 = 100: peer-opened, per connection */
	uint64_t max_streams_uni;      /* 0 = 1000 */
	uint64_t max_stream_data;      /* 0 = 1 MiB: receive window per stream */
	uint64_t max_data;             /* 0 = 16 MiB: receive window per conn */
	uint64_t handshake_timeout_ns; /* 0 = 10 s */
	uint64_t idle_timeout_ns;      /* 0 = 30 s */
	size_t max_udp_payload;        /* 0 = 1452 (<= MOQ_QUIC_MAX_UDP_PAYLOAD) */

	enum moq_quic_retry_mode retry;
	uint32_t retry_threshold;         /* 0 = max_half_open / 2 (AUTO mode) */
	uint64_t retry_token_lifetime_ns; /* 0 = 10 s */
	uint32_t stateless_reset_per_s;   /* 0 = 1000: token bucket, burst = rate/10+1 */
	uint32_t stateless_queue;         /* 0 = 64: queued stateless replies */

	enum moq_quic_cc cc;

	const struct moq_quic_callbacks *cb;
	void *user; /* default per-connection user pointer */

	/* Print ngtcp2's debug log to stderr (tests only). */
	int debug;

	/* Send a PING after this long without traffic, so an idle connection
	 * (a subscriber waiting for the next group) is not closed by the idle
	 * timeout and NAT bindings stay open. 0 = off. */
	uint64_t keep_alive_ns;

	/* RFC 9221: the max_datagram_frame_size transport parameter; 0 = no
	 * DATAGRAM frames (the default). > 0: the peer may send them (HTTP/3
	 * datagrams, which WebTransport clients require to be on); received
	 * ones are dropped. */
	uint64_t max_datagram_frame_size;

	/* Issue 23, the fast path: a server connection the application marked
	 * with moq_quic_conn_allow_handoff (its session set-up is done) leaves
	 * ngtcp2 once it is quiet and is served by the 1-RTT engine
	 * (fastpath.h) behind the same calls. 0 = off: everything stays on
	 * ngtcp2. fastpath_max_conns: the engine's connection pool (0 =
	 * max_conns). */
	int fastpath;
	uint32_t fastpath_max_conns;
};

/* Endpoint counters; every refusal or drop has one. */
struct moq_quic_stats {
	uint64_t conns_active;
	uint64_t half_open;
	uint64_t conns_accepted;
	uint64_t conns_established;
	uint64_t conns_closed;
	uint64_t refused_conns;     /* max_conns reached */
	uint64_t refused_half_open; /* max_half_open reached */
	uint64_t refused_per_addr;  /* max_conns_per_addr reached */
	uint64_t refused_streams;   /* peer exceeded stream limit / local open blocked */
	uint64_t handshake_timeouts;
	uint64_t idle_timeouts;
	uint64_t vn_sent; /* version negotiation packets */
	uint64_t retry_sent;
	uint64_t retry_token_bad; /* invalid / expired Retry tokens */
	uint64_t sreset_sent;     /* stateless resets */
	uint64_t sreset_rate_limited;
	uint64_t sreset_too_small;    /* trigger too short to answer smaller */
	uint64_t amplification_drops; /* stateless reply > 3x received (RFC 9000, 8.1) */
	uint64_t stateless_queue_full;
	uint64_t pkts_in;
	uint64_t pkts_out;
	uint64_t bytes_in;
	uint64_t bytes_out;
	uint64_t pkts_dropped;       /* undecodable / unknown / refused datagrams */
	uint64_t pkts_wrong_worker;  /* CID of another worker (caller should forward) */
	uint64_t conn_errors;        /* connections closed by a protocol error */
	uint64_t cert_reloads;       /* moq_quic_endpoint_reload_cert successes */
	uint64_t cert_reload_errors; /* ... refusals (the old certificate stayed) */
	uint64_t conns_old_cert;     /* live connections still on a replaced cert */
	uint64_t spare_bytes;        /* freed ngtcp2 blocks and stream records kept for reuse:
	                       * bounded (alloc.c 4096 blocks a class, stream.c 4096) */
	/* the fast path (config.fastpath; handoff.c) */
	uint64_t fastpath_conns; /* gauge: connections served by the engine */
	uint64_t handoffs;       /* connections moved to it */
	/* attempts that did not move a connection, by reason
	 * (MOQ_QUIC_HANDOFF_*): the busy ones are retried at the next
	 * datagram; CIPHER, LIMIT and IMPORT leave it on ngtcp2 for good */
	uint64_t handoff_refused[8];
	/* the engine's own (fastpath.h, struct fp_stats) */
	uint64_t fastpath_key_updates; /* key phases started by either side */
	uint64_t fastpath_pkts_lost;
	uint64_t fastpath_paths_validated;
	/* Fixed per-connection work (issue 23, "measure b"; bench-fanout): */
	uint64_t ack_pkts_in;    /* packets received whose first frame (after
	                          * PADDING) is an ACK (conn.c, decrypt_count_cb) */
	uint64_t streams_opened; /* streams opened, by either side */
	uint64_t timer_expiries; /* timer-heap expiries handled (timer.c) */
	uint64_t timer_idle;     /* ... after which the connection's next write
	                          * sent nothing (send.c) */
	uint64_t timer_inline;   /* pacing-only expiries handled after a write
	                          * (timer.c, conn_update_timer_sent) */
	/* RFC 9221 datagrams (dgram.c) */
	uint64_t dgrams_in;      /* DATAGRAM frames received */
	uint64_t dgrams_in_dropped; /* ... with no datagram callback to take them */
	uint64_t dgrams_out;     /* written into packets */
	uint64_t dgrams_dropped; /* queued and never sent: the queue overflowed
	                          * (oldest first) or the connection closed */
	/* the fast path's datagrams (fastpath/dgram.c; its dgrams_out and
	 * dgrams_dropped are in the two above): in packets acknowledged, and
	 * in packets declared lost (never retransmitted) */
	uint64_t fastpath_dgrams_acked, fastpath_dgrams_lost;
	/* the fast path's stream ranges (acknowledged out of order, lost)
	 * that found its interval pool dry and were coarsened into a lost
	 * range the stream held (resent again; fastpath/stream.c) */
	uint64_t fastpath_ivl_coarsened;
};

/* Why a handoff did not happen (moq_quic_stats.handoff_refused index). */
enum moq_quic_handoff_reason {
	MOQ_QUIC_HANDOFF_NOT_CONFIRMED = 0, /* handshake not confirmed yet */
	MOQ_QUIC_HANDOFF_IN_FLIGHT = 1,     /* packets unacknowledged, frames queued */
	MOQ_QUIC_HANDOFF_STREAM_BUSY = 2,   /* stream data unsent / unacked / out of order */
	MOQ_QUIC_HANDOFF_KEY_UPDATE = 3,    /* a key update or path validation running */
	MOQ_QUIC_HANDOFF_CIPHER = 4,        /* not TLS_AES_128_GCM_SHA256 (final) */
	MOQ_QUIC_HANDOFF_LIMIT = 5,         /* the engine's pools are full (final) */
	MOQ_QUIC_HANDOFF_IMPORT = 6,        /* the engine refused the state (final) */
	MOQ_QUIC_HANDOFF_OTHER = 7,         /* too many CIDs / ranges / streams */
	MOQ_QUIC_HANDOFF_REASONS = 8,
};

/* Per-connection figures, from ngtcp2's conn_stat. */
struct moq_quic_conn_info {
	uint64_t smoothed_rtt_ns;
	uint64_t min_rtt_ns;
	uint64_t cwnd;
	uint64_t bytes_in_flight;
	uint64_t bytes_sent; /* UDP payload bytes written for this connection */
	uint64_t bytes_recv;
	uint64_t pkts_lost; /* always 0: ngtcp2 0.12 does not expose it */
	int established;
	int validated;        /* the peer's address is validated */
	uint64_t key_updates; /* 1-RTT key generations derived (RFC 9001, 6):
			       * ngtcp2 derives the next one ahead of use */
};

/*
 * moq_quic_check_tls: verify that the linked wolfSSL has QUIC support (and
 * the OpenSSL compatibility layer the ALPN select callback needs).
 * moq_quic_endpoint_new calls it too. Returns 0, or MOQ_ERR_CONFIG with a
 * message in @why (may be NULL) when the library is unusable.
 */
int moq_quic_check_tls(const char **why);

/*
 * moq_quic_endpoint_new: create an endpoint (one per worker) from @cfg. The
 * config and the strings it points to are copied. A server without cert/key
 * generates a self-signed certificate (see moq_quic_endpoint_fingerprint).
 * Returns NULL on failure (bad config, TLS setup, memory); when @err is not
 * NULL it receives the MOQ_ERR_* code (MOQ_ERR_CONFIG, MOQ_ERR_CRYPTO,
 * MOQ_ERR_NOMEM, MOQ_ERR_IO for unreadable PEM files, MOQ_ERR_CRYPTO for
 * unusable ones or a key that does not match its certificate).
 */
struct moq_quic_endpoint *moq_quic_endpoint_new(const struct moq_quic_config *cfg, int *err);

/*
 * moq_quic_endpoint_free: close every connection silently (conn_closed with
 * MOQ_QUIC_CLOSE_ENDPOINT) and free the endpoint. NULL is ignored.
 */
void moq_quic_endpoint_free(struct moq_quic_endpoint *ep);

/*
 * moq_quic_endpoint_recv: process one received UDP datagram (it may hold
 * several coalesced QUIC packets). @data is not referenced after the call;
 * stream data is delivered through the callbacks during it. Replies
 * (handshake, ACKs, stateless packets) are produced by the next _send.
 * Returns 0 when the datagram was consumed (processed, or dropped and
 * counted), MOQ_ERR_NOTFOUND when its DCID belongs to another worker
 * (moq_quic_pkt_worker tells which; the caller should forward it; nothing
 * was changed), MOQ_ERR_INVAL for bad arguments.
 */
int moq_quic_endpoint_recv(struct moq_quic_endpoint *ep, const uint8_t *data, size_t len,
                           const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                           uint64_t now);

/*
 * moq_quic_endpoint_prefetch: start loading what _recv of @data will read,
 * in stages: a caller with a burst of datagrams runs stage 0 over all of
 * them, then stage 1, ... up to MOQ_QUIC_PREFETCH_STAGES - 1, and then
 * receives them; each stage reads only what the one before loaded, so the
 * misses of different datagrams overlap instead of following one another
 * (0: the CID table's slot, 1: the connection, 2: a handed-off
 * connection's fast-path record and keys, 3: its AEAD key schedule and
 * sent-packet records, 4: the stream record the next acknowledged one
 * names, 5: that stream's first chunk and the application's record of it,
 * moq_quic_stream_set_app). @hint is the datagram's own word between the
 * stages (NULL before stage 0; nothing may be received or sent before the
 * last stage). Changes nothing; any datagram is safe to pass.
 */
#define MOQ_QUIC_PREFETCH_STAGES 6
void moq_quic_endpoint_prefetch(const struct moq_quic_endpoint *ep, const uint8_t *data, size_t len,
                                int stage, const void **hint);

/*
 * moq_quic_endpoint_send: fill up to @n packet buffers (each pkts[i].data of
 * pkts[i].cap bytes, cap >= MOQ_QUIC_MIN_PKT_BUF) with packets to send: the
 * queued stateless replies first, then connections round robin, within what
 * their congestion controller and pacer allow at @now. Returns the number of
 * buffers filled (0..n; pkts[0..ret) have len/local/remote set), or
 * MOQ_ERR_INVAL.
 */
int moq_quic_endpoint_send(struct moq_quic_endpoint *ep, struct moq_quic_pkt *pkts, size_t n,
                           uint64_t now);

/*
 * moq_quic_endpoint_timers: run every connection expiry due at @now (loss
 * detection, ACK delay, pacing, idle / handshake timeout, end of the closing
 * period). Connections that time out are closed (conn_closed). Returns the
 * number of expiries handled.
 */
int moq_quic_endpoint_timers(struct moq_quic_endpoint *ep, uint64_t now);

/*
 * moq_quic_endpoint_next_expiry: the earliest timestamp at which _timers has
 * work, or UINT64_MAX when there is none. A connection a datagram made ready
 * to send (moq_quic_endpoint_pending) gets its timer from the _send that
 * writes it: call _send before sleeping until this time.
 */
uint64_t moq_quic_endpoint_next_expiry(const struct moq_quic_endpoint *ep);

/*
 * moq_quic_endpoint_pending: nonzero when _send has something to write now
 * (stateless replies or connections marked ready).
 */
int moq_quic_endpoint_pending(const struct moq_quic_endpoint *ep);

/* moq_quic_endpoint_stats: copy the counters into @out. */
void moq_quic_endpoint_stats(const struct moq_quic_endpoint *ep, struct moq_quic_stats *out);

/*
 * moq_quic_endpoint_fingerprint: the SHA-256 of the endpoint's certificate
 * (DER) into @out (32 bytes). Returns 0, or MOQ_ERR_STATE for a client
 * without a certificate.
 */
int moq_quic_endpoint_fingerprint(const struct moq_quic_endpoint *ep, uint8_t out[32]);

/*
 * moq_quic_endpoint_reload_cert: (server) replace the certificate for NEW
 * connections, e.g. on the relay's SIGHUP. A TLS context is built from the
 * PEM chain @cert_file and PEM key @key_file (copied) with the same checks
 * as moq_quic_endpoint_new (the key belongs to the certificate, ALPN, QUIC
 * method); only when all of it succeeds does it replace the current one.
 * Connections that exist already (established or mid-handshake) keep the
 * old certificate; the old context is freed with the last of them
 * (stats.conns_old_cert counts them). moq_quic_endpoint_fingerprint then
 * returns the new certificate's fingerprint.
 * Call it on the endpoint's owning thread like every endpoint call (no
 * locks), between _recv / _send / _timers calls: in the relay, each worker
 * reloads its own endpoint from its loop when it sees the reload flag. It
 * reads the files and builds a context (blocking, 1.1-1.5 ms measured on
 * the dev VM for a P-256 certificate): not per packet.
 * Returns 0, or (the endpoint exactly as it was; counted in
 * stats.cert_reload_errors) MOQ_ERR_IO when a file cannot be read,
 * MOQ_ERR_CRYPTO when a file is not a usable PEM certificate / key or the
 * key does not match the certificate, MOQ_ERR_NOMEM, MOQ_ERR_INVAL for NULL
 * arguments, MOQ_ERR_STATE on a client endpoint.
 */
int moq_quic_endpoint_reload_cert(struct moq_quic_endpoint *ep, const char *cert_file,
                                  const char *key_file);

/*
 * moq_quic_tls_new: a server TLS context built once, for endpoints on any
 * threads to share (config.tls, moq_quic_endpoint_set_tls): the PEM chain
 * @cert_file and PEM key @key_file (both NULL: a generated self-signed ECDSA
 * P-256 certificate) with the checks of moq_quic_endpoint_new (the key
 * belongs to the certificate) and QUIC's TLS settings. Every endpoint and
 * every connection made from it holds its own reference on the context
 * (wolfSSL counts them under its lock); the last one frees it. Reads the
 * files (blocking, ~1-2 ms): control path, e.g. the relay's main lcore on
 * SIGHUP. Returns the handle (the caller's reference), or NULL with *@err
 * MOQ_ERR_IO (a file cannot be read), MOQ_ERR_CRYPTO (not a usable PEM
 * certificate / key, or the key does not match), MOQ_ERR_NOMEM or
 * MOQ_ERR_INVAL (one file without the other).
 */
struct moq_quic_tls *moq_quic_tls_new(const char *cert_file, const char *key_file, int *err);

/*
 * moq_quic_tls_dev_cert_write: a new self-signed development certificate,
 * the one moq_quic_tls_new(NULL, NULL) would generate (ECDSA P-256, 14
 * days), written as PEM to @cert_file and its key to @key_file (mode 0600),
 * for moq_quic_tls_new(@cert_file, @key_file) to load now and at the next
 * start (the relay's --state-dir: a pinned serverCertificateHashes survives
 * a restart). Returns 0, MOQ_ERR_IO (a file cannot be written),
 * MOQ_ERR_CRYPTO, MOQ_ERR_NOMEM or MOQ_ERR_INVAL.
 */
int moq_quic_tls_dev_cert_write(const char *cert_file, const char *key_file);

/* moq_quic_tls_free: drop the caller's reference (endpoints and connections
 * keep theirs). Any thread. NULL is ignored. */
void moq_quic_tls_free(struct moq_quic_tls *t);

/* moq_quic_tls_fingerprint: the SHA-256 of @t's certificate (DER) into
 * @out (32 bytes). */
void moq_quic_tls_fingerprint(const struct moq_quic_tls *t, uint8_t out[32]);

/* moq_quic_tls_wolfssl_ctx: @t's WOLFSSL_CTX, for a TCP listener that
 * serves the same certificate and key (web.h, moq_web_tls_ctx_new). */
void *moq_quic_tls_wolfssl_ctx(const struct moq_quic_tls *t);

/*
 * moq_quic_tls_validity: the notBefore / notAfter of @t's (leaf)
 * certificate in Unix seconds. The generated development certificate is
 * ECDSA P-256 valid 14 days in total, from a day before it was made (what
 * browsers accept with serverCertificateHashes). Returns 0, or
 * MOQ_ERR_CRYPTO when the dates cannot be read.
 */
int moq_quic_tls_validity(const struct moq_quic_tls *t, int64_t *not_before, int64_t *not_after);

/*
 * moq_quic_endpoint_set_tls: (server) new connections of @ep get @t's
 * certificate from now on; open ones keep theirs (as _reload_cert, but no
 * file is read: no blocking, nothing to fail on a built @t). @ep takes its
 * own reference on @t's context; the caller keeps @t. On @ep's thread,
 * between _recv / _send / _timers calls. Counted in stats.cert_reloads;
 * moq_quic_endpoint_fingerprint then returns @t's. Returns 0 (also when @ep
 * is on @t already), MOQ_ERR_INVAL for NULL arguments, MOQ_ERR_STATE on a
 * client endpoint.
 */
int moq_quic_endpoint_set_tls(struct moq_quic_endpoint *ep, struct moq_quic_tls *t);

/*
 * moq_quic_tls_pem_loads: how many times this process has read and parsed a
 * PEM certificate chain for a server TLS context (endpoints, reloads): a
 * counter for tests and metrics (a reload should read the files once, not
 * once per worker).
 */
uint64_t moq_quic_tls_pem_loads(void);

/*
 * moq_quic_fingerprint_str: format a 32-byte fingerprint as "AB:CD:..." into
 * @buf (at least 96 bytes). Returns @buf.
 */
char *moq_quic_fingerprint_str(const uint8_t fp[32], char *buf, size_t buflen);

/*
 * Connections per source, for max_conns_per_addr: a source is an IPv4
 * address or an IPv6 /64 (an IPv4-mapped IPv6 address is its IPv4 address).
 * A table may be shared by endpoints on several threads (a spinlock, taken
 * once per new and per closed connection, never per packet): a relay's
 * workers then count one limit together, whichever worker RSS gave each
 * connection to.
 *
 * moq_quic_addr_table_new: a table for up to @max_sources sources with a
 * connection (beyond, take refuses). NULL when memory is short.
 * moq_quic_addr_table_free: free it (after every endpoint using it).
 * moq_quic_addr_table_take: count one connection of @a's source unless it
 * has @limit already. Returns 0, MOQ_ERR_LIMIT (@limit reached, or the
 * table has @max_sources sources), MOQ_ERR_INVAL (neither IPv4 nor IPv6).
 * moq_quic_addr_table_put: one connection of @a's source ended.
 * moq_quic_addr_table_count: the connections counted for @a's source.
 * moq_quic_addr_table_sources: the sources with a connection.
 */
struct moq_quic_addr_table;
struct moq_quic_addr_table *moq_quic_addr_table_new(uint32_t max_sources);
void moq_quic_addr_table_free(struct moq_quic_addr_table *t);
int moq_quic_addr_table_take(struct moq_quic_addr_table *t, const struct moq_quic_addr *a,
                             uint32_t limit);
void moq_quic_addr_table_put(struct moq_quic_addr_table *t, const struct moq_quic_addr *a);
uint32_t moq_quic_addr_table_count(struct moq_quic_addr_table *t, const struct moq_quic_addr *a);
uint32_t moq_quic_addr_table_sources(struct moq_quic_addr_table *t);

/*
 * moq_quic_addr_ip4: fill @out with IPv4 address @ip (dotted quad) and UDP
 * @port (host order). Returns 0, or MOQ_ERR_INVAL (@ip is not an IPv4
 * address; @out is then zeroed).
 */
int moq_quic_addr_ip4(const char *ip, uint16_t port, struct moq_quic_addr *out);

/* moq_quic_endpoint_worker: the worker id this endpoint encodes in its CIDs. */
uint8_t moq_quic_endpoint_worker(const struct moq_quic_endpoint *ep);

/*
 * moq_quic_cid_worker: the worker id encoded in a CID this host chose.
 * Returns 0..255, or MOQ_ERR_NOTFOUND when @cid is not of our format
 * (wrong length).
 */
int moq_quic_cid_worker(const uint8_t *cid, size_t cidlen);

/*
 * moq_quic_pkt_worker: read the DCID of a received datagram and return the
 * worker id encoded in it (0..255). Returns MOQ_ERR_NOTFOUND for a packet
 * whose DCID the client chose (a first Initial / 0-RTT: any worker may take
 * it; steer by the RSS hash) or that is not ours, MOQ_ERR_DECODE when the
 * header cannot be parsed.
 */
int moq_quic_pkt_worker(const uint8_t *data, size_t len);

/*
 * moq_quic_connect: (client role) start a connection to @remote from
 * @local. The Initial is written by the next _send. @user is the
 * per-connection user pointer (NULL = config.user). Returns the connection
 * or NULL (with *err set when @err is not NULL: MOQ_ERR_STATE on a server
 * endpoint, MOQ_ERR_LIMIT at max_conns, MOQ_ERR_NOMEM, MOQ_ERR_CRYPTO).
 */
struct moq_quic_conn *moq_quic_connect(struct moq_quic_endpoint *ep,
                                       const struct moq_quic_addr *local,
                                       const struct moq_quic_addr *remote, void *user, uint64_t now,
                                       int *err);

/* moq_quic_conn_user / _set_user: the per-connection user pointer. */
void *moq_quic_conn_user(const struct moq_quic_conn *c);
void moq_quic_conn_set_user(struct moq_quic_conn *c, void *user);

/*
 * moq_quic_conn_set_callbacks: from now on @c's callbacks are @cb (NULL:
 * none) with @user, instead of the endpoint's config.cb: a layer above
 * takes a connection over, e.g. HTTP/3 when the negotiated ALPN is "h3"
 * (call it from the established callback or right after moq_quic_connect).
 * The other connections keep the endpoint's table (a direct call each). On
 * the endpoint's thread; @cb must outlive the connection.
 */
void moq_quic_conn_set_callbacks(struct moq_quic_conn *c, const struct moq_quic_callbacks *cb,
                                 void *user);

/* moq_quic_conn_endpoint: the endpoint that owns @c. */
struct moq_quic_endpoint *moq_quic_conn_endpoint(const struct moq_quic_conn *c);

/*
 * moq_quic_conn_alpn: the negotiated ALPN (NUL-terminated), or NULL before
 * the handshake completes. Valid as long as the connection.
 */
const char *moq_quic_conn_alpn(const struct moq_quic_conn *c);

/*
 * moq_quic_conn_peer_fingerprint: the SHA-256 of the peer's (leaf)
 * certificate, DER, into @out (32 bytes), e.g. for a client to pin the
 * server's certificate. Returns 0, MOQ_ERR_STATE when the peer has shown no
 * certificate (before the handshake got that far; a client connection seen
 * from the server), MOQ_ERR_INVAL.
 */
int moq_quic_conn_peer_fingerprint(const struct moq_quic_conn *c, uint8_t out[32]);

/* moq_quic_conn_is_server: 1 for a server-side connection. */
int moq_quic_conn_is_server(const struct moq_quic_conn *c);

/* moq_quic_conn_remote: the peer's current address. */
const struct moq_quic_addr *moq_quic_conn_remote(const struct moq_quic_conn *c);
/* moq_quic_addr_str: @a as "ip:port" / "[ip6]:port" into @out (@cap
 * bytes; "" for another family). Returns @out. */
char *moq_quic_addr_str(const struct moq_quic_addr *a, char *out, size_t cap);
/* quic_tls_keep_sni: a server WOLFSSL_CTX (@wctx) keeps each client's SNI
 * for moq_quic_conn_server_name, whatever name it asks for (the TCP
 * listener's TLS context too). */
void quic_tls_keep_sni(void *wctx);
/* moq_quic_conn_local: the address the connection arrived on (request.rs
 * `local`). */
const struct moq_quic_addr *moq_quic_conn_local(const struct moq_quic_conn *c);
/* moq_quic_conn_server_name: the SNI the client presented, NUL-terminated
 * into @out (@cap bytes); NULL when none (or not kept by the TLS stack). */
const char *moq_quic_conn_server_name(const struct moq_quic_conn *c, char *out, size_t cap);

/* moq_quic_conn_get_info: per-connection figures into @out. */
void moq_quic_conn_get_info(const struct moq_quic_conn *c, struct moq_quic_conn_info *out);
/* moq_quic_conn_cwnd: its congestion window alone (get_info's cwnd), from
 * the lines a packet reads anyway: what fanout's budget asks per session
 * visit (get_info fills the whole record, the fast path's cold lines too);
 * 0 for a connection closed or not made yet. */
uint64_t moq_quic_conn_cwnd(const struct moq_quic_conn *c);

/*
 * moq_quic_conn_close: close @c with application error @app_err and an
 * optional reason (copied). A CONNECTION_CLOSE is written by the next _send;
 * conn_closed is called during this call and @c is invalid afterwards.
 * Returns 0, or MOQ_ERR_INVAL.
 */
int moq_quic_conn_close(struct moq_quic_conn *c, uint64_t app_err, const char *reason);

/*
 * moq_quic_conn_allow_handoff: (server, config.fastpath) the application's
 * session set-up on @c is done (HTTP/3 + WebTransport CONNECT, or the MoQ
 * SETUP) and @c mostly receives what the relay sends (a subscriber): the
 * endpoint may move it to the fast path as soon as it is quiet. Nothing
 * changes for the caller: the same moq_quic_* calls and callbacks serve it.
 * Returns 0, MOQ_ERR_STATE (fast path off, a client connection, or closing).
 */
int moq_quic_conn_allow_handoff(struct moq_quic_conn *c);

/* moq_quic_conn_fastpath: 1 when @c is served by the fast path now. */
int moq_quic_conn_fastpath(const struct moq_quic_conn *c);

/*
 * moq_quic_conn_update_key: start a 1-RTT key update (RFC 9001, 6).
 * Returns 0, MOQ_ERR_STATE before the handshake is confirmed, while a
 * previous update is not yet confirmed, or before ngtcp2 derived the next
 * keys (it does so during a _send at least a PTO after the last update):
 * retry after the next _send.
 */
int moq_quic_conn_update_key(struct moq_quic_conn *c, uint64_t now);

/*
 * moq_quic_stream_open: open a local stream (bidi != 0: bidirectional) and
 * return its id in *sid. Returns 0, MOQ_ERR_AGAIN when the peer's stream
 * limit is reached (the writable callback with sid -1 tells when more are
 * allowed; counted in refused_streams), MOQ_ERR_STATE before the handshake /
 * after close, MOQ_ERR_NOMEM.
 */
int moq_quic_stream_open(struct moq_quic_conn *c, int bidi, int64_t *sid);

/*
 * moq_quic_stream_write: queue @iovcnt buffers (caller memory, NOT copied)
 * at the end of stream @sid, and the end of the stream when @fin. Each byte
 * must stay valid and unchanged until stream_acked covers it, or
 * stream_closed / conn_closed is called. Zero-length iovecs are skipped; a
 * write with iovcnt 0 and fin only ends the stream. Returns the number of
 * bytes queued, MOQ_ERR_NOTFOUND for an unknown / receive-only stream,
 * MOQ_ERR_CLOSED after fin or reset, MOQ_ERR_STATE when the connection is
 * closing, MOQ_ERR_NOMEM.
 */
long moq_quic_stream_write(struct moq_quic_conn *c, int64_t sid, const struct iovec *iov,
                           size_t iovcnt, int fin);

/*
 * moq_quic_stream_queued: bytes queued on @sid and not yet acknowledged
 * (what the caller still holds), or MOQ_ERR_NOTFOUND.
 */
long moq_quic_stream_queued(const struct moq_quic_conn *c, int64_t sid);

/*
 * moq_quic_stream_reset: abort sending on @sid with RESET_STREAM(@app_err)
 * (RFC 9000, 19.4). Queued data is dropped: stream_closed / the acked
 * callback will not report it, and the caller may release it once
 * stream_closed is called. Returns 0 or MOQ_ERR_NOTFOUND.
 */
int moq_quic_stream_reset(struct moq_quic_conn *c, int64_t sid, uint64_t app_err);

/* Send urgency classes (like RFC 9218's urgency): 0 is served first. */
#define MOQ_QUIC_URGENCY_LEVELS  8
#define MOQ_QUIC_URGENCY_DEFAULT 3

/*
 * moq_quic_stream_set_urgency: put stream @sid in send class @urgency
 * (0 = most urgent .. 7). When a packet is built, queued data of the most
 * urgent class with data goes first, round robin among the streams of that
 * class; a new stream starts in MOQ_QUIC_URGENCY_DEFAULT. Returns 0,
 * MOQ_ERR_INVAL (urgency >= MOQ_QUIC_URGENCY_LEVELS), MOQ_ERR_NOTFOUND.
 */
int moq_quic_stream_set_urgency(struct moq_quic_conn *c, int64_t sid, uint8_t urgency);

/*
 * moq_quic_stream_set_app: the application's pointer for stream @sid,
 * handed to stream_acked and stream_closed (and carried across the
 * handoff to the fast path), so the application finds its record without a
 * look-up by id. It must stay valid until stream_closed or conn_closed.
 * Returns 0 or MOQ_ERR_NOTFOUND.
 */
int moq_quic_stream_set_app(struct moq_quic_conn *c, int64_t sid, void *app);

/*
 * moq_quic_stream_stop_sending: ask the peer to stop sending on @sid with
 * STOP_SENDING(@app_err) (RFC 9000, 19.5); further data is discarded.
 * Returns 0 or MOQ_ERR_NOTFOUND.
 */
int moq_quic_stream_stop_sending(struct moq_quic_conn *c, int64_t sid, uint64_t app_err);

/* ---- datagrams (RFC 9221; dgram.c) ------------------------------------
 *
 * Unreliable DATAGRAM frames on a connection both sides negotiated
 * (config.max_datagram_frame_size > 0 here, the peer's transport
 * parameter > 0). Nothing is retransmitted: a datagram lost is lost.
 * Queued datagrams go first in the connection's next packets (before
 * stream data), several per packet when they fit.
 */
/* Bytes of a datagram's own header moq_quic_dgram_send copies. */
#define MOQ_QUIC_DGRAM_HDR_MAX 32
/* Payload iovecs one datagram may reference. */
#define MOQ_QUIC_DGRAM_IOV 4
/* Datagrams queued per connection; beyond, the oldest is dropped. */
#define MOQ_QUIC_DGRAM_QUEUE 64

/*
 * moq_quic_dgram_max: the largest datagram (header + payload) @c can send:
 * what fits one packet of the connection's current size (short header,
 * DATAGRAM frame header and room for an ACK frame taken off) and the peer's
 * max_datagram_frame_size. 0 when datagrams cannot be sent: not negotiated,
 * the handshake not complete, or closing. A connection the fast path
 * serves sends them from the engine's queue, with the same limits
 * (fastpath/dgram.c).
 */
size_t moq_quic_dgram_max(const struct moq_quic_conn *c);

/*
 * moq_quic_dgram_send: queue one datagram: @hdr (@hdrlen <=
 * MOQ_QUIC_DGRAM_HDR_MAX bytes, copied) followed by @iovcnt (<=
 * MOQ_QUIC_DGRAM_IOV) payload buffers that are NOT copied: they must stay
 * valid until @release(@arg) is called (after the datagram is written into
 * a packet, or dropped; @release may be NULL). Returns 0 (queued; @release
 * will be called exactly once), or, with @release not called:
 * MOQ_ERR_TOO_LARGE (more than moq_quic_dgram_max), MOQ_ERR_STATE (no
 * datagrams on @c now: see moq_quic_dgram_max), MOQ_ERR_INVAL,
 * MOQ_ERR_NOMEM.
 */
int moq_quic_dgram_send(struct moq_quic_conn *c, const uint8_t *hdr, size_t hdrlen,
                        const struct iovec *iov, size_t iovcnt, void (*release)(void *arg),
                        void *arg);

/* ---- light clients (export.c) ------------------------------------------
 *
 * A load generator's "light" subscriber: a client connection that, once
 * established and subscribed, is taken away from ngtcp2 and answered by the
 * caller itself (header protection, packet numbers, ACK-only 1-RTT packets;
 * loadgen/light.c). quic/ captures the connection's 1-RTT secrets and keys
 * during the handshake, exports them with the CIDs and packet number state,
 * and then forgets the connection without sending anything.
 */
#define MOQ_QUIC_LIGHT_SECRET_MAX 48 /* SHA-384 */
#define MOQ_QUIC_LIGHT_KEY_MAX    32 /* AES-256 */
#define MOQ_QUIC_LIGHT_IV_LEN     12 /* RFC 9001, 5.3: the AEAD nonce */
#define MOQ_QUIC_LIGHT_MAX_CIDS   12

/* One direction's 1-RTT secret and the keys derived from it (RFC 9001, 5.1). */
struct moq_quic_light_dir {
	uint8_t secret[MOQ_QUIC_LIGHT_SECRET_MAX];
	uint8_t key[MOQ_QUIC_LIGHT_KEY_MAX];
	uint8_t iv[MOQ_QUIC_LIGHT_IV_LEN];
	uint8_t hp[MOQ_QUIC_LIGHT_KEY_MAX];
};

/* What moq_quic_conn_light_prepare captures (caller memory). */
struct moq_quic_light_keys {
	struct moq_quic_light_dir rx, tx; /* rx: the server's packets */
	size_t secretlen, keylen;
	int have; /* 1-RTT keys captured */
	int got;  /* bit 0: rx captured, bit 1: tx (a server learns them apart) */
};

/* A connection's state at the switch-over. */
struct moq_quic_light {
	const struct moq_quic_light_keys *keys;
	uint8_t dcid[20]; /* the peer's CID our packets carry */
	size_t dcidlen;
	uint8_t scids[MOQ_QUIC_LIGHT_MAX_CIDS][20]; /* ours: the peer's packets carry one */
	size_t scidlen;
	unsigned nscids;
	/* the first packet number the caller may send: above every one ngtcp2
	 * used (RFC 9000, 12.3: numbers may be skipped, never reused) */
	uint64_t tx_pn;
	uint64_t ack_delay_exponent; /* ours (RFC 9000, 18.2) */
	uint64_t max_ack_delay_ns;   /* ours */
	uint64_t idle_timeout_ns;    /* negotiated (RFC 9000, 10.1), 0 = none */
	struct moq_quic_addr local, remote;
	uint32_t version;
};

/*
 * moq_quic_conn_light_prepare: (client, before its first _send) have the
 * handshake of @c offer AES-128-GCM only and record its 1-RTT secrets and
 * keys into @keys (caller memory that must outlive the handshake; have is
 * set once they are known). Returns 0, MOQ_ERR_INVAL (@c a server
 * connection or NULL), MOQ_ERR_STATE (the handshake has started),
 * MOQ_ERR_CRYPTO (wolfSSL refused the cipher list or method).
 */
int moq_quic_conn_light_prepare(struct moq_quic_conn *c, struct moq_quic_light_keys *keys);

/*
 * moq_quic_conn_light_export: fill @out for @c (CIDs and addresses always).
 * Returns 0 when @c can be taken over: established, keys captured by
 * _prepare, AES-128-GCM with SHA-256; else MOQ_ERR_STATE (not established
 * or keys not captured) or MOQ_ERR_CONFIG (another cipher). @out->keys
 * points into the @keys given to _prepare.
 */
int moq_quic_conn_light_export(struct moq_quic_conn *c, const struct moq_quic_light_keys *keys,
                               struct moq_quic_light *out);

/*
 * moq_quic_conn_light_detach: forget @c without sending anything: its
 * application gets conn_closed (kind APPLICATION, code 0, local, what
 * "detached") now and the connection is freed at the next _timers. Its
 * CIDs leave the endpoint's table: datagrams for them must not reach
 * moq_quic_endpoint_recv any more (it would answer with stateless resets).
 */
void moq_quic_conn_light_detach(struct moq_quic_conn *c);

#ifdef __cplusplus
}
#endif

#endif /* MOQ_QUIC_QUIC_H */
