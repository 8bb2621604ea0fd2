/* SPDX-License-Identifier: MIT */
/*
 * fastpath.h: the 1-RTT fast path engine (issue 23, item 3).
 *
 * A connection whose handshake ngtcp2 completed and confirmed, and that is
 * quiet (nothing of ngtcp2's unacknowledged), is exported (struct
 * fp_import, filled by the handoff from ngtcp2 + quic/'s captured secrets)
 * and from then on its 1-RTT packets are sealed, opened, acknowledged,
 * recovered and paced here: short headers only (RFC 9000, 17.3.1),
 * AES-128-GCM + AES header protection through wolfCrypt directly (RFC 9001,
 * 5; TLS_AES_128_GCM_SHA256 only), key updates both ways (RFC 9001, 6),
 * RFC 9002 loss detection / PTO / NewReno with pacing, flow control both
 * ways, streams, CIDs, path validation, close, idle timeout, stateless
 * reset.
 *
 * Like quic/, the engine does no I/O and includes nothing of DPDK. One
 * engine per lcore (struct fp_engine); an engine and its connections are
 * only ever touched by the thread that owns it (no locks). It owns:
 *   - a bounded pool of connections, streams and send-chunk records
 *     (allocated once at fp_engine_new; nothing is allocated per packet),
 *   - a timer wheel (wheel.h) holding one timer per connection,
 *   - a ready list of connections with something to send,
 *   - a table from our CIDs to connections (fp_engine_recv routes by it) and
 *     from the peers' stateless reset tokens to connections.
 *
 * Stream data is sent without copies: fp_stream_write() queues references
 * to caller memory (e.g. cache memory). The payload is read once, when it
 * is sealed into the TX buffer (AES-GCM from caller memory into the packet
 * buffer), and again only if the packet is lost (re-sent from the same
 * caller memory). The caller keeps every byte alive and unchanged until the
 * stream_acked callback reports it (a cumulative prefix per stream), or
 * stream_closed / conn_closed is called.
 *
 * Timestamps are nanoseconds on one monotonic clock per engine.
 *
 * Errors: 0 / a count, or a negative MOQ_ERR_* (common/moq_err.h). A
 * protocol violation by the peer closes that connection with the RFC 9000,
 * 20.1 transport error code and touches nothing else.
 */
#ifndef MOQ_FASTPATH_FASTPATH_H
#define MOQ_FASTPATH_FASTPATH_H

#include <stddef.h>
#include <stdint.h>

#include "moq_err.h"

#ifdef __cplusplus
extern "C" {
#endif

struct fp_engine;
struct fp_conn;

/* ---- limits and constants ---------------------------------------------- */

#define FP_CID_MAX       20 /* RFC 9000, 17.2: a CID is 0..20 bytes */
#define FP_TOKEN_LEN     16 /* RFC 9000, 10.3: stateless reset token */
#define FP_SECRET_LEN    32 /* SHA-256 traffic secret (TLS_AES_128_GCM_SHA256) */
#define FP_KEY_LEN       16 /* AES-128 */
#define FP_IV_LEN        12 /* RFC 9001, 5.3: AEAD nonce */
#define FP_HP_LEN        16 /* AES-128 header protection key */
#define FP_ADDR_MAX      28 /* sizeof(struct sockaddr_in6) */
#define FP_MAX_SCIDS     8  /* our CIDs per connection the engine tracks */
#define FP_MAX_PEER_CIDS 8  /* the peer's CIDs (active + spares) kept */
#define FP_IMPORT_RANGES 8  /* received pn ranges carried over at import */
/* The value of a packet number field that holds none (no packet yet). */
#define FP_PN_NONE UINT64_MAX
/* Bytes a packet buffer given to fp_*_send must hold at least
 * (RFC 9000, 14: every path supports 1200-byte UDP payloads). */
#define FP_MIN_PKT_BUF 1200
/* Largest UDP payload the engine writes (the same as quic/'s). */
#define FP_MAX_UDP_PAYLOAD 1452

/* The only cipher suite the engine seals with (RFC 9001, 5.3). */
enum fp_cipher {
	FP_CIPHER_AES_128_GCM_SHA256 = 0x1301, /* TLS 1.3 cipher suite id */
};

/* ---- addresses ---------------------------------------------------------- */

/*
 * A UDP address as opaque bytes: the engine only compares them (memcmp over
 * len) and copies them into fp_pkt.remote. The handoff puts a struct
 * sockaddr_in / sockaddr_in6 (or its moq_quic_addr's sockaddr) in b.
 */
struct fp_addr {
	uint8_t len;
	uint8_t b[FP_ADDR_MAX];
};

/* ---- the import: a connection's state at the handoff ------------------- */

/* One CID with its sequence number and stateless reset token. */
struct fp_cid {
	uint64_t seq; /* RFC 9000, 5.1.1: sequence number */
	uint8_t len;  /* 0..FP_CID_MAX */
	uint8_t id[FP_CID_MAX];
	uint8_t has_token; /* token is set */
	uint8_t token[FP_TOKEN_LEN];
};

/* One direction's 1-RTT keys of the current key phase (RFC 9001, 5.1):
 * secret is the traffic secret the key and iv were derived from; the next
 * phase's secret is HKDF-Expand-Label(secret, "quic ku", "", 32) (RFC 9001,
 * 6.1), which the engine derives itself. hp never changes (RFC 9001, 6). */
struct fp_dir_keys {
	uint8_t secret[FP_SECRET_LEN];
	uint8_t key[FP_KEY_LEN];
	uint8_t iv[FP_IV_LEN];
	uint8_t hp[FP_HP_LEN];
};

/* A received packet number range [lo, hi] (inclusive). */
struct fp_range {
	uint64_t lo, hi;
};

/* Stream flags for fp_import_stream.flags. */
#define FP_STREAM_FIN_SENT   0x01 /* we sent (and the peer acknowledged) FIN */
#define FP_STREAM_FIN_RECV   0x02 /* the peer's FIN arrived (recv_offset final) */
#define FP_STREAM_RESET_SENT 0x04 /* we reset the send side */
#define FP_STREAM_RESET_RECV 0x08 /* the peer reset its send side */
#define FP_STREAM_STOP_SENT  0x10 /* we sent STOP_SENDING */

/* One open stream at the handoff. Quiet means every byte sent so far is
 * acknowledged: send_offset is both sent and acknowledged. */
struct fp_import_stream {
	int64_t id;
	uint64_t send_offset; /* bytes we sent (all acknowledged) */
	uint64_t send_max;    /* the peer's MAX_STREAM_DATA for it */
	uint64_t recv_offset; /* bytes received in order (delivered) */
	uint64_t recv_max;    /* the MAX_STREAM_DATA we advertised */
	uint32_t flags;       /* FP_STREAM_* */
	void *user;           /* the caller's, fp_stream_user() */
};

/* The peer's transport parameters the engine needs (RFC 9000, 18.2). */
struct fp_peer_params {
	uint64_t max_udp_payload_size;       /* 0 = 65527 */
	uint64_t max_idle_timeout_ns;        /* 0 = none */
	uint64_t active_connection_id_limit; /* 0 = 2 */
	uint64_t ack_delay_exponent;         /* default 3 */
	uint64_t max_ack_delay_ns;           /* default 25 ms */
	/* as the peer sent them: _bidi_local limits what we send on bidi
	 * streams the peer opens, _bidi_remote on bidi streams we open, _uni on
	 * uni streams we open (RFC 9000, 18.2) */
	uint64_t initial_max_stream_data_bidi_local;
	uint64_t initial_max_stream_data_bidi_remote;
	uint64_t initial_max_stream_data_uni;
	uint8_t disable_active_migration;
	uint64_t max_datagram_frame_size; /* RFC 9221, 3; 0 = no datagrams */
};

/*
 * struct fp_import: everything fp_conn_import needs. The handoff fills it
 * from ngtcp2 (transport parameters, CIDs, conn_stat, streams) and quic/'s
 * captured secrets; it is read during fp_conn_import only (copied).
 */
struct fp_import {
	uint32_t version;  /* QUIC version (0x00000001; v2 is not supported) */
	uint8_t is_server; /* 1: we are the server (stream id parity) */
	uint16_t cipher;   /* FP_CIPHER_AES_128_GCM_SHA256 */

	/* 1-RTT keys (RFC 9001, 5.1), current phase */
	struct fp_dir_keys tx, rx;
	uint8_t key_phase; /* the current key phase bit (RFC 9001, 6) */

	/* CIDs (RFC 9000, 5.1) */
	struct fp_cid dcid; /* the active CID toward the peer, with the peer's
	                      * stateless reset token for it if it gave one */
	struct fp_cid peer_cids[FP_MAX_PEER_CIDS]; /* spare peer CIDs (NEW_CONNECTION_ID) */
	uint8_t npeer_cids;
	uint64_t peer_retire_prior_to;     /* the peer's largest Retire Prior To seen */
	struct fp_cid scids[FP_MAX_SCIDS]; /* our CIDs, each with its token */
	uint8_t nscids;
	uint64_t next_scid_seq; /* the next sequence number for a CID we issue */

	/* packet numbers (RFC 9000, 12.3) */
	uint64_t tx_pn;         /* next packet number to send */
	uint64_t largest_acked; /* largest of ours the peer acked, FP_PN_NONE */

	/* ACK state of the peer's packets (RFC 9000, 13.2) */
	uint64_t rx_largest_pn;                      /* FP_PN_NONE: none received */
	struct fp_range rx_ranges[FP_IMPORT_RANGES]; /* newest (highest) first */
	uint8_t nrx_ranges;
	uint8_t ack_eliciting_pending; /* an ACK is owed */
	uint64_t max_ack_delay_ns;     /* ours (our transport parameter) */
	uint64_t ack_delay_exponent;   /* ours */

	/* RTT (RFC 9002, 5); 0 smoothed = no sample yet (kInitialRtt) */
	uint64_t smoothed_rtt_ns, rttvar_ns, min_rtt_ns, latest_rtt_ns;

	/* congestion (RFC 9002, 7); bytes_in_flight must be 0 (quiet) */
	uint64_t cwnd, ssthresh, bytes_in_flight;

	/* connection flow control (RFC 9000, 4.1) */
	uint64_t local_max_data; /* the MAX_DATA we advertised */
	uint64_t recv_data;      /* the peer's stream bytes counted against it */
	uint64_t peer_max_data;  /* the peer's MAX_DATA */
	uint64_t sent_data;      /* our stream bytes counted against it */
	/* the initial MAX_STREAM_DATA we give streams (our transport params) */
	uint64_t local_max_stream_data_bidi_local;  /* bidi streams we open */
	uint64_t local_max_stream_data_bidi_remote; /* bidi streams the peer opens */
	uint64_t local_max_stream_data_uni;         /* uni streams the peer opens */

	/* stream counts (RFC 9000, 4.6) */
	uint64_t local_max_streams_bidi, local_max_streams_uni; /* we allow the peer */
	uint64_t peer_max_streams_bidi, peer_max_streams_uni;   /* the peer allows us */
	int64_t next_local_bidi, next_local_uni;                /* next stream id we open */
	int64_t next_remote_bidi, next_remote_uni; /* lowest id the peer has not opened */

	const struct fp_import_stream *streams; /* every open stream */
	size_t nstreams;

	struct fp_peer_params peer;
	uint64_t local_idle_timeout_ns; /* ours; 0 = none */

	/* path (RFC 9000, 8 and 9) */
	struct fp_addr local, remote;
	uint8_t path_validated;   /* the peer's address is validated */
	uint64_t path_bytes_recv; /* for the 3x limit when not validated */
	uint64_t path_bytes_sent;

	void *user; /* the connection's user pointer, fp_conn_user() */

	/* the largest UDP payload to send on the path (what ngtcp2 used: its
	 * max_tx_udp_payload_size / PMTUD result); 0 = 1200 (RFC 9000, 14) */
	uint16_t max_udp_payload;
	/* the active_connection_id_limit we advertised (how many peer CIDs we
	 * accept, RFC 9000, 5.1.1); 0 = 2 */
	uint64_t local_active_cid_limit;
	/* we sent grease_quic_bit (RFC 9287; ngtcp2 does by default): the
	 * peer's packets may have the fixed bit clear */
	uint8_t local_grease_quic_bit;
	/* RFC 9221, 3: the max_datagram_frame_size we advertised; 0 = none
	 * (a DATAGRAM frame received is then a PROTOCOL_VIOLATION) */
	uint64_t local_max_datagram_frame_size;
};

/* ---- callbacks ---------------------------------------------------------- */

enum fp_close_kind {
	FP_CLOSE_TRANSPORT = 0,       /* transport error code (RFC 9000, 20.1) */
	FP_CLOSE_APPLICATION = 1,     /* application error code */
	FP_CLOSE_IDLE = 2,            /* idle timeout, nothing sent (RFC 9000, 10.1) */
	FP_CLOSE_STATELESS_RESET = 3, /* the peer sent a stateless reset (10.3) */
	FP_CLOSE_ENGINE = 4,          /* the engine was freed / fp_conn_drop */
};

struct fp_close_info {
	enum fp_close_kind kind;
	int local;             /* 1: this side closed; 0: the peer did */
	uint64_t code;         /* transport or application error code */
	uint64_t frame_type;   /* transport close: the offending frame type */
	const char *what;      /* constant description, e.g. "idle timeout" */
	const uint8_t *reason; /* reason phrase, valid during the call */
	size_t reasonlen;
};

/*
 * Callbacks (all optional). They run during fp_conn_recv / fp_engine_recv /
 * fp_*_send / fp_engine_timers / fp_conn_close, on the engine's thread,
 * with @user = fp_conn_user(c). A callback may call fp_stream_* and
 * fp_conn_close on @c, but must not free the engine. A stream_data
 * callback returning a negative value closes the connection with
 * INTERNAL_ERROR.
 */
struct fp_callbacks {
	/* Stream data at @offset, in order (the engine reassembles within
	 * fp_engine_config.reorder_bytes per stream); @data is valid during the
	 * call only. @fin: the stream ends after this chunk (len may be 0). */
	int (*stream_data)(struct fp_conn *c, void *user, int64_t sid, uint64_t offset,
	                   const uint8_t *data, size_t len, int fin);
	/* The peer opened stream @sid (its first frame; before stream_data). */
	void (*stream_open)(struct fp_conn *c, void *user, int64_t sid);
	/* The peer reset stream @sid (RESET_STREAM, RFC 9000, 19.4). */
	void (*stream_reset)(struct fp_conn *c, void *user, int64_t sid, uint64_t app_err,
	                     uint64_t final_size);
	/* The peer sent STOP_SENDING on @sid (19.5); the engine has already
	 * reset the send side with RESET_STREAM(@app_err): queued data is
	 * dropped and released through stream_closed. */
	void (*stop_sending)(struct fp_conn *c, void *user, int64_t sid, uint64_t app_err);
	/* The peer acknowledged the first @acked bytes of @sid (a cumulative
	 * prefix; @newly more than at the previous call): the caller may release
	 * the memory backing them. @suser: the stream's user pointer
	 * (fp_stream_set_user; the import's), NULL when none was set. */
	void (*stream_acked)(struct fp_conn *c, void *user, int64_t sid, uint64_t acked,
	                     uint64_t newly, void *suser);
	/* Stream @sid is finished both ways (or reset); nothing of the caller's
	 * memory queued on it is referenced any more; the id is gone. @suser:
	 * as for stream_acked. */
	void (*stream_closed)(struct fp_conn *c, void *user, int64_t sid, uint64_t app_err,
	                      void *suser);
	/* More may be written: the peer raised MAX_STREAM_DATA on @sid or
	 * MAX_DATA (@sid == -1), or allowed more streams (@sid == -2). */
	void (*writable)(struct fp_conn *c, void *user, int64_t sid);
	/* The connection is gone; @c is invalid after the call and none of the
	 * caller's memory is referenced. Called once per imported connection. */
	void (*conn_closed)(struct fp_conn *c, void *user, const struct fp_close_info *info);
	/* Packets arrived from @remote, a new address (RFC 9000, 9.3): the
	 * engine is validating it with PATH_CHALLENGE. @validated is 0 then,
	 * and 1 in a second call once the path is validated and the connection
	 * has moved to it. */
	void (*path_new)(struct fp_conn *c, void *user, const struct fp_addr *remote,
	                 int validated);
	/* (optional) Issue a new CID of ours: fill @cid (len, id, token; seq is
	 * set by the engine). Return 0, or < 0 to issue none. Without it the
	 * engine issues no CIDs beyond the imported ones. */
	int (*new_scid)(struct fp_conn *c, void *user, struct fp_cid *cid);
	/* (optional) Our CID @cid was retired by the peer and left the engine's
	 * table (the handoff may drop its own routing entry). */
	void (*scid_retired)(struct fp_conn *c, void *user, const struct fp_cid *cid);
	/* (optional) A DATAGRAM frame's payload (RFC 9221; dgram.c); @data is
	 * valid during the call only. Without it they are dropped (counted). */
	void (*datagram)(struct fp_conn *c, void *user, const uint8_t *data, size_t len);
};

/* ---- the engine --------------------------------------------------------- */

struct fp_engine_config {
	uint32_t max_conns;     /* 0 = 1024 */
	uint32_t max_streams;   /* 0 = 16 * max_conns: stream records, all conns */
	uint32_t max_chunks;    /* 0 = 64 * max_conns: queued write references */
	uint32_t sent_ring;     /* 0 = 256: sent-packet records per connection
	                         * (power of two; bounds packets in flight) */
	uint32_t reorder_bytes; /* 0 = 4096: out-of-order receive buffer per
	                         * stream (beyond it the frame is dropped) */
	uint64_t wheel_tick_ns; /* 0 = 1 ms: timer wheel granularity */
	uint64_t keep_alive_ns; /* PING after this long without sending; 0 = off */
	/* stream receive windows the engine extends for the peer's streams:
	 * when half of the window is consumed a MAX_STREAM_DATA / MAX_DATA is
	 * sent (RFC 9000, 4.2) */
	uint64_t stream_window; /* 0 = 256 KiB */
	uint64_t conn_window;   /* 0 = 1 MiB */
	const struct fp_callbacks *cb;
};

/* Engine counters; every drop has one. */
struct fp_stats {
	uint64_t conns_active, conns_imported, conns_closed;
	uint64_t pkts_in, pkts_out, bytes_in, bytes_out;
	uint64_t pkts_dropped;      /* undecryptable / malformed / unknown CID */
	uint64_t acks_in, acks_out; /* ACK frames taken / written */
	uint64_t streams_opened;    /* by either side, after the import */
	uint64_t pkts_lost, pkts_retransmitted_bytes, ptos;
	uint64_t key_updates;      /* key phases started by either side */
	uint64_t stateless_resets; /* received and matched */
	uint64_t paths_validated;
	uint64_t idle_timeouts;
	uint64_t conn_errors;             /* closed for a peer's protocol violation */
	uint64_t reorder_drops;           /* stream data beyond the reorder bound */
	uint64_t timers_run, timers_idle; /* expiries, and those with nothing to do */
	uint64_t pool_exhausted;          /* a stream / chunk / conn record was refused */
	uint64_t persistent_congestion;   /* RFC 9002, 7.6 (window back to 2 packets) */
	/* an acknowledged or lost range found the interval pool empty and was
	 * folded into a range the stream holds (resent again, never lost) */
	uint64_t ivl_coarsened;
	/* RFC 9221 datagrams (dgram.c) */
	uint64_t dgrams_in;         /* DATAGRAM frames received */
	uint64_t dgrams_in_dropped; /* ... with no datagram callback to take them */
	uint64_t dgrams_out;        /* written into packets */
	uint64_t dgrams_acked;      /* ... in packets the peer acknowledged */
	uint64_t dgrams_lost;       /* ... in packets declared lost (never resent) */
	uint64_t dgrams_dropped;    /* queued and never sent: the queue overflowed
	                             * (oldest first), too large, or closed */
	/* packets whose stream data was sealed from the caller's chunks into
	 * the packet without a copy first (gcm.c, fp_sealv) */
	uint64_t pkts_gathered;
};

/*
 * fp_engine_new: an engine with the pools of @cfg (allocated now; the
 * callbacks table is referenced, not copied, and must outlive the engine).
 * Returns NULL when memory is short or @cfg is invalid (*@err, when not
 * NULL: MOQ_ERR_NOMEM, MOQ_ERR_CONFIG).
 */
struct fp_engine *fp_engine_new(const struct fp_engine_config *cfg, int *err);

/*
 * fp_aead_select: the AES-128-GCM of connections imported from now on, in
 * every engine of the process: @own 1 = gcm.c's (the default: VAES +
 * VPCLMULQDQ on AVX-512 where the CPU has them, else wolfCrypt); 0 =
 * wolfCrypt always (--fastpath-gcm off). Returns fp_aead_name(): "vaes",
 * "wolfcrypt" (or "aesni" in tests: gcm.c's 128-bit code), what they use.
 */
const char *fp_aead_select(int own);
const char *fp_aead_name(void);

/* fp_engine_free: drop every connection (conn_closed, FP_CLOSE_ENGINE, no
 * packet) and free the engine. NULL is ignored. */
void fp_engine_free(struct fp_engine *e);

/*
 * fp_conn_import: a connection from @imp (read during the call only). Its
 * CIDs enter the engine's table. Returns the connection, or NULL with *@err:
 * MOQ_ERR_CONFIG (another cipher / version, or bytes_in_flight != 0),
 * MOQ_ERR_LIMIT (max_conns, or the stream / CID records), MOQ_ERR_EXISTS (a
 * CID already in the table), MOQ_ERR_INVAL, MOQ_ERR_CRYPTO (a key schedule
 * could not be set up).
 */
struct fp_conn *fp_conn_import(struct fp_engine *e, const struct fp_import *imp, uint64_t now,
                               int *err);

/*
 * fp_engine_recv: route one UDP datagram by its DCID (a short header; its
 * length is that of our CIDs) and process it as fp_conn_recv does. A
 * datagram whose last 16 bytes are a peer's stateless reset token closes
 * that connection (RFC 9000, 10.3.1). Returns 0 (consumed: processed or
 * dropped and counted), MOQ_ERR_NOTFOUND (not one of ours, nothing
 * changed: the caller's endpoint takes it), MOQ_ERR_INVAL.
 */
int fp_engine_recv(struct fp_engine *e, const uint8_t *data, size_t len,
                   const struct fp_addr *local, const struct fp_addr *remote, uint64_t now);

/*
 * fp_conn_prefetch: start loading what receiving a datagram for @c reads, in
 * four stages a caller runs over a burst of datagrams before it receives any
 * (moq_quic_endpoint_prefetch), each reading only what the one before
 * loaded: stage 0 the connection's record, its cold lines a packet reads and
 * its receive keys; 1 the AEAD's key schedule and the sent-packet records
 * the next ACK takes; 2 the stream record the first of them names; 3 that
 * stream's first queued chunk and the caller's record for it
 * (fp_stream_set_user: its first line). Changes nothing.
 */
void fp_conn_prefetch(const struct fp_conn *c, int stage);

/*
 * fp_conn_recv: process one UDP datagram for @c (decrypt, frames, stream
 * data to the callbacks, ACKs queued). @data is not referenced after the
 * call. Returns 0 (processed, or dropped and counted), MOQ_ERR_CLOSED when
 * the connection closed during the call (@c is invalid then),
 * MOQ_ERR_INVAL.
 */
int fp_conn_recv(struct fp_conn *c, const uint8_t *data, size_t len, const struct fp_addr *local,
                 const struct fp_addr *remote, uint64_t now);

/* A TX buffer for fp_*_send: the caller sets data / cap / user; the engine
 * sets len, local and remote. */
struct fp_pkt {
	uint8_t *data;                /* in: where to write the UDP payload */
	uint16_t cap;                 /* in: its size (>= FP_MIN_PKT_BUF) */
	uint16_t len;                 /* out: UDP payload length */
	struct fp_addr local, remote; /* out */
	struct fp_conn *conn;         /* out: the connection it is for */
	void *user;                   /* caller's; untouched */
};

/*
 * fp_conn_send: seal up to @n packets of @c into @pkts (what it has to send
 * within congestion control, pacing and the anti-amplification limit at
 * @now: ACKs, control frames, retransmissions, then stream data, most
 * urgent first). Returns the number of buffers filled, or MOQ_ERR_INVAL. A
 * connection whose closing period or draining ended during the call is
 * freed (conn_closed).
 */
int fp_conn_send(struct fp_conn *c, struct fp_pkt *pkts, size_t n, uint64_t now);

/*
 * fp_engine_send: as fp_conn_send over the engine's ready list, round robin,
 * until @n buffers are filled or nothing is ready. Returns the count.
 */
int fp_engine_send(struct fp_engine *e, struct fp_pkt *pkts, size_t n, uint64_t now);

/* fp_engine_pending: nonzero when a connection is on the ready list. */
int fp_engine_pending(const struct fp_engine *e);

/*
 * fp_engine_timers: run the wheel up to @now (ACK delay, loss detection,
 * PTO, pacing, idle timeout, keep-alive, closing / draining end). Timed out
 * connections are closed (conn_closed). Returns the number of expiries run.
 */
int fp_engine_timers(struct fp_engine *e, uint64_t now);

/* fp_engine_next_expiry: the earliest time _timers has work, UINT64_MAX if
 * none (rounded up to the wheel tick). */
uint64_t fp_engine_next_expiry(const struct fp_engine *e);

/* fp_engine_stats: copy the counters into @out. */
void fp_engine_stats(const struct fp_engine *e, struct fp_stats *out);

/* ---- connections -------------------------------------------------------- */

/* Per-connection figures. */
struct fp_conn_info {
	uint64_t smoothed_rtt_ns, rttvar_ns, min_rtt_ns, latest_rtt_ns;
	uint64_t cwnd, ssthresh, bytes_in_flight;
	uint64_t tx_pn, largest_acked, rx_largest_pn;
	uint64_t pkts_sent, pkts_recv, pkts_lost, bytes_sent, bytes_recv;
	uint64_t key_updates; /* key phase changes since import */
	uint8_t key_phase;
	uint8_t path_validated;
	uint8_t closing; /* closing or draining (RFC 9000, 10.2) */
	uint64_t sent_data, peer_max_data, recv_data, local_max_data;
	struct fp_addr remote;
};

void *fp_conn_user(const struct fp_conn *c);
void fp_conn_set_user(struct fp_conn *c, void *user);
struct fp_engine *fp_conn_engine(const struct fp_conn *c);
void fp_conn_get_info(const struct fp_conn *c, struct fp_conn_info *out);
/* fp_conn_cwnd: the congestion window alone (fp_conn_get_info's cwnd). */
uint64_t fp_conn_cwnd(const struct fp_conn *c);

/*
 * fp_conn_close: close @c with application (@app != 0) or transport error
 * @code and a reason (copied, truncated to 64 bytes): CONNECTION_CLOSE is
 * written by the next _send (the connection enters the closing period, RFC
 * 9000, 10.2.1, and answers further packets with it, rate limited);
 * conn_closed is called during this call and @c must not be used by the
 * caller afterwards except by the engine. Returns 0, MOQ_ERR_STATE
 * (already closing), MOQ_ERR_INVAL.
 */
int fp_conn_close(struct fp_conn *c, int app, uint64_t code, const char *reason);

/* fp_conn_drop: forget @c at once without a packet (conn_closed with
 * FP_CLOSE_ENGINE). */
void fp_conn_drop(struct fp_conn *c);

/*
 * fp_conn_update_key: start a key update (RFC 9001, 6.1): the next packet
 * is sent in the other key phase. Returns 0, MOQ_ERR_STATE while the
 * previous update is not yet acknowledged (6.5), MOQ_ERR_CRYPTO.
 */
int fp_conn_update_key(struct fp_conn *c);

/* fp_conn_ping: send a PING (ack-eliciting) with the next packets. */
int fp_conn_ping(struct fp_conn *c);

/* ---- streams ------------------------------------------------------------ */

/* A piece of caller memory for fp_stream_write (not copied). */
struct fp_iov {
	const uint8_t *base;
	size_t len;
};

/*
 * fp_stream_open: open a stream (bidi != 0: bidirectional) within the
 * peer's MAX_STREAMS. Returns 0 with its id in *@sid, MOQ_ERR_AGAIN when the
 * peer's limit is reached (a STREAMS_BLOCKED is sent; the writable callback
 * with sid -2 tells when more are allowed), MOQ_ERR_LIMIT (no stream
 * record), MOQ_ERR_STATE (closing).
 */
int fp_stream_open(struct fp_conn *c, int bidi, int64_t *sid);

/*
 * fp_stream_write: queue @n pieces of caller memory (referenced, not
 * copied) at the end of stream @sid, and its end when @fin. Bytes beyond
 * the peer's flow control limits stay queued (DATA_BLOCKED /
 * STREAM_DATA_BLOCKED are sent) until the limits rise. Each byte stays
 * referenced until stream_acked covers it or stream_closed / conn_closed.
 * Returns the number of bytes queued, MOQ_ERR_NOTFOUND (unknown stream or
 * receive-only), MOQ_ERR_CLOSED (after FIN or reset), MOQ_ERR_LIMIT (no
 * chunk record: nothing was queued), MOQ_ERR_STATE (closing).
 */
long fp_stream_write(struct fp_conn *c, int64_t sid, const struct fp_iov *iov, size_t n, int fin);

/* fp_stream_queued: bytes of @sid written and not yet acknowledged, or
 * MOQ_ERR_NOTFOUND. */
long fp_stream_queued(const struct fp_conn *c, int64_t sid);

/*
 * fp_stream_reset: abort sending on @sid with RESET_STREAM(@app_err) (RFC
 * 9000, 19.4); queued data is dropped (released with stream_closed).
 * Returns 0 or MOQ_ERR_NOTFOUND.
 */
int fp_stream_reset(struct fp_conn *c, int64_t sid, uint64_t app_err);

/* fp_stream_stop_sending: STOP_SENDING(@app_err) on @sid (19.5); further
 * data from the peer is discarded. Returns 0 or MOQ_ERR_NOTFOUND. */
int fp_stream_stop_sending(struct fp_conn *c, int64_t sid, uint64_t app_err);

/* fp_stream_set_urgency: send class 0 (first) .. 7 of @sid (default 3).
 * Returns 0, MOQ_ERR_INVAL, MOQ_ERR_NOTFOUND. */
int fp_stream_set_urgency(struct fp_conn *c, int64_t sid, uint8_t urgency);

/* fp_stream_user / _set_user: a per-stream user pointer. */
void *fp_stream_user(const struct fp_conn *c, int64_t sid);
int fp_stream_set_user(struct fp_conn *c, int64_t sid, void *user);

/* ---- datagrams (RFC 9221; dgram.c) -------------------------------------
 *
 * The same contract as quic.h's moq_quic_dgram_*: a bounded queue per
 * connection of datagrams referencing caller memory (a small header copied),
 * written first into the next ack-eliciting packets (after an ACK), counted
 * in flight for congestion control, never retransmitted.
 */
#define FP_DGRAM_HDR_MAX 32 /* header bytes fp_dgram_send copies */
#define FP_DGRAM_IOV     4  /* payload pieces one datagram references */
#define FP_DGRAM_QUEUE   64 /* queued per connection; beyond, the oldest goes */

/* fp_dgram_max: the largest datagram (header + payload) @c can send now:
 * one packet of the connection's size less the short header, tag, frame
 * header and room for an ACK, within the peer's max_datagram_frame_size.
 * 0: the peer takes none, or @c is closing. */
size_t fp_dgram_max(const struct fp_conn *c);

/*
 * fp_dgram_send: queue one datagram, @hdr (copied) then @n pieces of caller
 * memory (referenced until @release(@arg): once sealed into a packet, or
 * dropped; @release may be NULL). Returns 0 (@release will be called once),
 * or with @release not called: MOQ_ERR_TOO_LARGE (> fp_dgram_max),
 * MOQ_ERR_STATE (see fp_dgram_max), MOQ_ERR_INVAL, MOQ_ERR_NOMEM.
 */
int fp_dgram_send(struct fp_conn *c, const uint8_t *hdr, size_t hdrlen, const struct fp_iov *iov,
                  size_t n, void (*release)(void *arg), void *arg);

/* ---- helpers ------------------------------------------------------------ */

/*
 * fp_stateless_reset_build: a stateless reset (RFC 9000, 10.3) of @len
 * bytes (>= 21; shorter than the packet that triggered it, 10.3.3) into
 * @out ending in @token, the rest unpredictable bytes from @rand (@len - 16
 * of them; the caller's RNG). Returns @len or MOQ_ERR_INVAL.
 */
long fp_stateless_reset_build(uint8_t *out, size_t len, const uint8_t token[FP_TOKEN_LEN],
                              const uint8_t *rand);

#ifdef __cplusplus
}
#endif

#endif /* MOQ_FASTPATH_FASTPATH_H */
