/* SPDX-License-Identifier: MIT */
/*
 * client.h: the load generator's MoQ client: one publisher and any number
 * of subscribers on one QUIC client endpoint, driven by an I/O loop it does
 * not own (kernel sockets or DPDK ports in main.c, the in-memory link in
 * tests). The publisher's session is on a moq/ node with the cache it
 * publishes from, the subscribers' on a second node without a cache that
 * is polled rarely (its periodic walks visit every session).
 *
 *  - publisher: a session with role publisher announces one broadcast whose
 *    tracks are synthetic media (media.h); due frames are written into the
 *    node's cache as time passes and served by moq/ from there.
 *  - subscribers: @subscribers sessions with role subscriber, opened at
 *    @ramp_per_s, each subscribing to every track and verifying every frame
 *    (moq_lg_rx), with at most @max_handshakes sessions connecting at once.
 *    A subscription refused with "not found" (the broadcast is not
 *    announced yet) is retried.
 *
 * Each session uses a local address from @locals: the publisher the first,
 * subscriber k the one after it that holds k / @conns_per_addr (a relay
 * limits connections per remote address). The I/O layer must be able to
 * send from and receive on every one of them.
 *
 * Single thread. Time is nanoseconds of CLOCK_MONOTONIC (moq_lg_now_ns):
 * the payload's send timestamps use it, so latency is only meaningful when
 * the caller's @now comes from it too.
 *
 * Errors are 0 / counts / negative MOQ_ERR_*.
 */
#ifndef MOQ_LOADGEN_CLIENT_H
#define MOQ_LOADGEN_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "light.h"
#include "media.h"
#include "quic.h"

#define MOQ_LG_MAX_TRACKS 8
/* Connections per local address by default: under quic/'s default of 64
 * connections per remote address on the relay. */
#define MOQ_LG_CONNS_PER_ADDR 60u
/* Retry a subscription refused as not found (broadcast not announced yet). */
#define MOQ_LG_RETRY_NS 200000000ull
/* Handshakes in flight at most, by default: the ramp waits above it. Under
 * quic/'s Retry threshold (half of max_half_open 256), so a ramp faster than
 * the relay's handshake rate queues here instead of triggering Retry and
 * refusals (measured: at 500/s on a loaded 2-core machine, p50 handshake
 * 4.5 s and 12 % of 1,000 sessions timing out without this bound). */
#define MOQ_LG_MAX_HANDSHAKES 64u
/* The longest token (moq-relay's ?jwt=) the client sends: auth.h's
 * MOQ_AUTH_MAX_TOKEN. */
#define MOQ_LG_JWT_MAX 4096u
/* A subscriber that received nothing for this long counts as stalled. */
#define MOQ_LG_STALL_NS 1000000000ull

struct moq_lg_client;

struct moq_lg_client_cfg {
	int publish;          /* run the publisher */
	uint32_t subscribers; /* subscriber sessions */
	double ramp_per_s;    /* sessions opened per second (0 = all at once) */
	struct moq_lg_track_cfg tracks[MOQ_LG_MAX_TRACKS];
	unsigned ntracks;
	char broadcast[128]; /* broadcast path */
	struct moq_quic_addr relay;
	const struct moq_quic_addr *locals; /* borrowed until destroy */
	unsigned nlocals;                   /* >= 1 */
	uint32_t conns_per_addr;            /* 0 = MOQ_LG_CONNS_PER_ADDR */
	uint64_t cache_budget;              /* publisher cache, 0 = 64 MiB */
	uint32_t max_handshakes;            /* sessions connecting at once, 0 = 64 */
	uint32_t max_udp_payload;           /* 0 = quic's default */
	uint64_t origin;                    /* hop id of the client's node, 0 = random */
	int verbose;
	/* a token for every session: sent in the lite-05 SETUP Path as
	 * "?jwt=..." (a relay with --auth-key checks it); "" = none */
	char jwt[MOQ_LG_JWT_MAX + 1];
	/* light subscribers (light.h): 0 = none; else subscriber k verifies
	 * every frame when k % light_verify_every == 0 (the step lowered so that
	 * at least light_verify_min of them do), the others are taken over at
	 * their first verified group, once every track delivers */
	uint32_t light_verify_every;
	uint32_t light_verify_min;
	uint32_t light_mute; /* this many light subscribers never ACK (tests) */
	/* 0: raw QUIC; 1: WebTransport over HTTP/3 (wt_client.h,
	 * enum moq_lg_transport) */
	int transport;
	/* --lite NN: raw QUIC sessions offer only moq-lite-NN (3..6); 0: the
	 * node's list (lite-05, 04, 03) */
	int lite;
	/* --transport ws (ws.h): sessions over WebSocket through this; NULL:
	 * QUIC */
	struct moq_web *ws;
	/* --end-early N (tests of issue 29): the publisher publishes N groups
	 * of its (single) track only; when it opens the last one, before that
	 * group's stream is written, it sends lite-05 SUBSCRIBE_END {last + 1}
	 * and FINs the relay's first subscribe stream (raw, stream 5: after
	 * the relay's announce request), so the relay sees END and FIN before
	 * the last groups' headers. 0 = off. */
	uint32_t end_early_groups;
	/* --key-update S (issue 23's interop): this long after the start each
	 * (full) subscriber's connection starts a 1-RTT key update (RFC 9001,
	 * 6; moq_quic_conn_update_key), retried until it is taken. 0 = off. */
	uint64_t key_update_ns;
	/* --max-latency MS: the subscribers' SUBSCRIBE max latency (0: the
	 * default, MOQ_DEFAULT_MAX_LATENCY_MS) */
	uint32_t sub_max_latency_ms;
	/* --datagrams (lite-05 6.4): the endpoint negotiates QUIC datagrams;
	 * the publisher sends its single-frame groups (tracks of one frame a
	 * group: audio) as datagrams, the subscribers take them (verified as
	 * the groups of streams are) */
	int datagrams;
};

/*
 * moq_lg_client_create: the endpoint, node and cache for @cfg (copied) at
 * time @now. Nothing is sent until the first moq_lg_client_poll. Returns
 * NULL with *@err (when not NULL) set: MOQ_ERR_INVAL (no tracks, no local
 * address, nothing to do), MOQ_ERR_NOMEM, MOQ_ERR_CRYPTO (TLS set-up).
 */
struct moq_lg_client *moq_lg_client_create(const struct moq_lg_client_cfg *cfg, uint64_t now,
                                           int *err);

/* moq_lg_client_destroy: close everything silently and free. NULL is a no-op. */
void moq_lg_client_destroy(struct moq_lg_client *cl);

/* moq_lg_client_endpoint: the QUIC endpoint (to feed and drain). */
struct moq_quic_endpoint *moq_lg_client_endpoint(struct moq_lg_client *cl);

/*
 * moq_lg_client_recv: one received UDP datagram for local address @local.
 * Returns what moq_quic_endpoint_recv returns.
 */
int moq_lg_client_recv(struct moq_lg_client *cl, const uint8_t *data, size_t len,
                       const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                       uint64_t now);

/* moq_lg_client_send: fill up to @n packet buffers (moq_quic_endpoint_send;
 * the light subscribers' ACKs first). */
int moq_lg_client_send(struct moq_lg_client *cl, struct moq_quic_pkt *pkts, size_t n, uint64_t now);

/* moq_lg_client_pending: nonzero when _send has something to write now. */
int moq_lg_client_pending(const struct moq_lg_client *cl);

/*
 * moq_lg_client_poll: open the sessions the ramp allows by @now, retry
 * refused subscriptions, write due frames into the cache, run the node's
 * fanout and the endpoint's timers. Returns the number of actions taken.
 */
int moq_lg_client_poll(struct moq_lg_client *cl, uint64_t now);

/* moq_lg_client_origin: the hop id the client's moq/ node announces with
 * (cfg.origin, else a random one drawn at create: never derived from an
 * address, which a peer process can share). */
uint64_t moq_lg_client_origin(const struct moq_lg_client *cl);

/* moq_lg_client_next_wake: the earliest time poll has work (a frame due, a
 * session to open, a timer), for an I/O loop that sleeps. */
uint64_t moq_lg_client_next_wake(const struct moq_lg_client *cl);

/*
 * moq_lg_client_stop: close every session cleanly (code 0): the publisher
 * unpublishes, subscribers close. Call _send for a while afterwards to get
 * the CONNECTION_CLOSE frames out.
 */
void moq_lg_client_stop(struct moq_lg_client *cl, uint64_t now);

/* moq_lg_client_reset_latency: empty the latency histogram (e.g. after a
 * warm-up, so the report covers steady state only). */
void moq_lg_client_reset_latency(struct moq_lg_client *cl);

/* Figures beyond the common report. */
struct moq_lg_client_extra {
	uint64_t subs_stalled; /* ready, subscribed, nothing for MOQ_LG_STALL_NS */
	uint64_t subs_failed;  /* closed with an error */
	uint64_t sub_retries;  /* subscriptions retried after "not found" */
	uint64_t sub_refused;  /* subscriptions ended by other codes */
	uint64_t connect_errors;
	uint64_t pub_ready; /* 1 once the publisher session is up */
	uint64_t pub_write_errors;
	uint64_t handshake_p50_ns, handshake_max_ns;
	/* light subscribers (cfg.light_verify_every) */
	uint64_t light_cands;         /* subscribers meant to go light */
	uint64_t light_subs;          /* taken over */
	uint64_t verify_subs;         /* full, verifying subscribers */
	struct moq_lg_counts light_c; /* what light ones verified before the take-over */
	struct moq_lg_light_stats light;
	uint64_t key_updates; /* --key-update: connections that started one */
	/* group streams reset before their header arrived (the subscribers'
	 * node, moq.h groups_reset_unseen): lost groups the relay reset but a
	 * verifier cannot name, so they count as missing too */
	uint64_t groups_reset_unseen;
	/* --end-early: the END {group} the publisher sent (0: none); the ENDs
	 * subscribers got (how many, lowest and highest group) and DROPs */
	uint64_t end_sent, end_subs, end_min, end_max, drop_replies;
	/* groups the DROPs named (the relay skipped them: counted as missing
	 * by the verifiers), by code */
	uint64_t drop_groups, drop_code[32];
	/* the publisher's node: group streams it reset toward the relay, and
	 * groups it skipped (losses before the relay) */
	uint64_t pub_resets, pub_skipped;
	uint64_t pub_reset_by[5]; /* old, evicted, lagged, dropped, cancel */
	/* --datagrams: groups the publisher's node sent as datagrams, those
	 * that did not fit one, and groups the subscribers got as datagrams */
	uint64_t pub_dgrams_out, pub_dgrams_too_large, sub_dgrams_in;
};

/*
 * moq_lg_client_end_early_done: with --end-early (cfg.end_early_groups), 1
 * once the publisher sent its END, every subscription got an END and every
 * subscriber ended (complete or reset) that many groups: nothing more is
 * coming, moqdp-load may stop before --duration.
 */
int moq_lg_client_end_early_done(const struct moq_lg_client *cl);

/*
 * moq_lg_client_report: fill @out (hist points into the client; valid until
 * destroy) and, when not NULL, @extra at time @now. With @final the
 * verifiers count their missing groups first (call once, at the end).
 */
void moq_lg_client_report(struct moq_lg_client *cl, uint64_t now, int final,
                          struct moq_lg_report *out, struct moq_lg_client_extra *extra);

/*
 * moq_lg_heap_hugepages: back the main malloc heap with transparent huge
 * pages, for a process that keeps thousands of connections' state on it
 * (ngtcp2, quic/, moq/ and the verifiers allocate with malloc): the heap
 * grows by @reserve bytes at a time (mallopt M_TOP_PAD, and is not trimmed
 * below it), is grown once now, and that range is marked MADV_HUGEPAGE.
 * Memory is still only committed when touched. Call once, early, before the
 * heap fills (later growth beyond @reserve gets ordinary pages). A no-op
 * (returns 0) when malloc does not use the brk heap (a sanitizer's
 * allocator). Returns the bytes marked, MOQ_ERR_INVAL (@reserve under 4 MiB
 * or over 1 GiB) or MOQ_ERR_IO (madvise refused: no THP in the kernel).
 */
long moq_lg_heap_hugepages(size_t reserve);

#endif /* MOQ_LOADGEN_CLIENT_H */
