/* SPDX-License-Identifier: MIT */
/*
 * light.h: light subscribers of moqdp-load. A subscriber connection that is
 * established, subscribed to every track and has verified its first group
 * (client.c) is taken over
 * from ngtcp2 (quic.h, "light clients"): from then on its datagrams are
 * answered here, without decrypting them. Per datagram: remove header
 * protection (RFC 9001, 5.4), decode the packet number (RFC 9000, A.3),
 * note it in the received ranges; ACK-only 1-RTT packets are sealed with
 * AES-128-GCM in wolfCrypt (RFC 9001, 5.3) and sent at a browser's rate:
 * every 2nd ack-eliciting packet for the first LG_LIGHT_DECIMATE_AFTER
 * packets, then every 10th, at most max_ack_delay after the first one
 * unacknowledged, at once for a packet out of order (RFC 9000, 13.2).
 * A key update by the peer (the key phase bit flips, RFC 9001, 6) derives
 * the next secrets with HKDF-Expand-Label "quic ku" and answers in the new
 * phase. With nothing received for a third of the idle timeout a PING goes
 * out (a browser's keep-alive). Every relay packet after the handshake is
 * taken as ack-eliciting (it carries stream data; its ACK-only packets only
 * answer our PINGs).
 *
 * The same code follows a prepared connection's packet numbers while ngtcp2
 * still reads them (moq_lg_light_observe), so the take-over knows the
 * numbers and ranges received so far.
 *
 * Single thread, no I/O: datagrams in (moq_lg_light_recv), packet buffers
 * out (moq_lg_light_send). Errors are 0 / counts / negative MOQ_ERR_*.
 */
#ifndef MOQ_LOADGEN_LIGHT_H
#define MOQ_LOADGEN_LIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "quic.h"

struct moq_lg_light;

/* Figures of the light subscribers together. */
struct moq_lg_light_stats {
	uint64_t conns;        /* taken over */
	uint64_t refused;      /* prepared but not exportable (kept full) */
	uint64_t rx_pkts;      /* datagrams answered */
	uint64_t rx_bytes;     /* their UDP payload bytes */
	uint64_t acked_pkts;   /* packets covered by an ACK sent */
	uint64_t acked_bytes;  /* their bytes */
	uint64_t acks_sent;    /* ACK packets */
	uint64_t pings_sent;   /* keep-alives */
	uint64_t out_of_order; /* packets not one above the largest (immediate ACK) */
	uint64_t key_updates;  /* peer key updates followed */
	uint64_t bad_pkts;     /* too short / not 1-RTT */
	uint64_t closes_sent;  /* CONNECTION_CLOSE at stop */
	uint64_t stalled;      /* taken over, nothing received for 1 s (now) */
	uint64_t cycles;       /* TSC cycles spent in recv + send of taken-over conns */
	uint64_t tsc_hz;       /* TSC rate measured against CLOCK_MONOTONIC (0 = not yet) */
};

/*
 * moq_lg_light_create: room for @n connections (index 0 .. n-1). Returns
 * NULL on allocation failure.
 */
struct moq_lg_light *moq_lg_light_create(uint32_t n);

/* moq_lg_light_destroy: free. NULL is a no-op. */
void moq_lg_light_destroy(struct moq_lg_light *L);

/*
 * moq_lg_light_prepare: connection @idx is @c, right after it was opened
 * (before the first send): capture its keys (moq_quic_conn_light_prepare)
 * and follow its packet numbers. Returns 0 or what the quic/ call returns.
 */
int moq_lg_light_prepare(struct moq_lg_light *L, uint32_t idx, struct moq_quic_conn *c);

/*
 * moq_lg_light_take: take @idx over from @c (prepared, established): export,
 * detach @c (its application gets conn_closed) and answer its packets from
 * now on. With @mute, never send anything for it (tests: the relay must then
 * give up on it). Returns 0, MOQ_ERR_STATE / MOQ_ERR_CONFIG (not
 * exportable: @c is left alone) or MOQ_ERR_NOMEM.
 */
int moq_lg_light_take(struct moq_lg_light *L, uint32_t idx, struct moq_quic_conn *c, int mute,
                      uint64_t now);

/*
 * moq_lg_light_recv: a received datagram. Returns 1 when it belonged to a
 * taken-over connection (consumed), 0 otherwise (give it to the endpoint,
 * then to moq_lg_light_observe).
 */
int moq_lg_light_recv(struct moq_lg_light *L, const uint8_t *data, size_t len, uint64_t now);

/* moq_lg_light_observe: a datagram the endpoint has read: follow its packet
 * number when it is a prepared connection's 1-RTT packet. */
void moq_lg_light_observe(struct moq_lg_light *L, const uint8_t *data, size_t len, uint64_t now);

/* moq_lg_light_send: write up to @n due ACK (or PING, CONNECTION_CLOSE)
 * packets into @pkts (as moq_quic_endpoint_send). Returns the count. */
int moq_lg_light_send(struct moq_lg_light *L, struct moq_quic_pkt *pkts, size_t n, uint64_t now);

/* moq_lg_light_poll: move ACKs whose delay ran out to the send list, send
 * keep-alives. Returns the number of connections made due. */
int moq_lg_light_poll(struct moq_lg_light *L, uint64_t now);

/* moq_lg_light_pending: nonzero when _send has packets to write now. */
int moq_lg_light_pending(const struct moq_lg_light *L);

/* moq_lg_light_next_wake: the earliest time _poll has work (UINT64_MAX: none). */
uint64_t moq_lg_light_next_wake(const struct moq_lg_light *L);

/* moq_lg_light_stop: every taken-over connection sends CONNECTION_CLOSE
 * (application, code 0) at the next _send. */
void moq_lg_light_stop(struct moq_lg_light *L, uint64_t now);

/* moq_lg_light_stats: the counters. */
void moq_lg_light_stats(struct moq_lg_light *L, uint64_t now, struct moq_lg_light_stats *out);

/* moq_lg_light_is_taken: 1 when @idx was taken over. */
int moq_lg_light_is_taken(const struct moq_lg_light *L, uint32_t idx);

#endif /* MOQ_LOADGEN_LIGHT_H */
