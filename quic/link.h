/* SPDX-License-Identifier: MIT */
/*
 * link.h: an in-memory, virtual-time network joining two QUIC endpoints,
 * for tests (quic/, moq/) and benchmarks. Deterministic: the same seed and
 * configuration give the same loss / reorder pattern and the same result.
 *
 * Direction 0 carries datagrams that endpoint a sends to endpoint b,
 * direction 1 the reverse. Each direction has its own loss rate, reorder
 * rate, one-way delay and byte accounting. Addresses are taken from the
 * packets (pkt.local becomes the receiver's remote), so one link carries any
 * number of connections between the two endpoints.
 *
 * Virtual time: the link owns the clock. moq_quic_link_run advances it
 * straight to the next event (a delivery or an endpoint expiry), so a test
 * of a 30 s idle timeout takes milliseconds of real time.
 */
#ifndef MOQ_QUIC_LINK_H
#define MOQ_QUIC_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "quic.h"

#ifdef __cplusplus
extern "C" {
#endif

struct moq_quic_link;

struct moq_quic_link_dir_config {
	uint32_t loss_ppm;    /* drop probability, parts per million */
	uint32_t reorder_ppm; /* probability a datagram is held back */
	uint64_t reorder_ns;  /* how long it is held back (0 = 2 * delay + 1 ms) */
	uint64_t delay_ns;    /* one-way delay (0 = none) */
	uint64_t rate_bps;    /* serialisation rate in bit/s (0 = unlimited) */
};

struct moq_quic_link_config {
	struct moq_quic_link_dir_config dir[2];
	uint64_t seed;      /* PRNG seed (0 = 1) */
	uint32_t max_queue; /* datagrams in flight per direction (0 = 4096) */
	uint64_t start_ns;  /* initial virtual time (0 = 1 s) */
};

struct moq_quic_link_stats {
	uint64_t pkts_sent; /* written by the sending endpoint */
	uint64_t bytes_sent;
	uint64_t pkts_lost;       /* dropped by loss_ppm or the filter */
	uint64_t pkts_queue_full; /* dropped: max_queue reached */
	uint64_t pkts_reordered;
	uint64_t pkts_delivered;
	uint64_t bytes_delivered;
	/* endpoint b's calls (moq_quic_link_b_*), in TSC cycles (x86; ns
	 * elsewhere): what a benchmark times natively (bench_moq_fanout
	 * --time). Counted in st[1] only. */
	uint64_t b_send_cycles, b_recv_cycles, b_timer_cycles;
};

/*
 * A filter sees every datagram as it is sent (after accounting in
 * bytes_sent). It may modify the bytes in place (up to 1500) and *len, and
 * returns 0 to pass it on, 1 to drop it (counted as lost).
 */
typedef int (*moq_quic_link_filter_fn)(void *arg, int dir, uint8_t *data, size_t *len,
                                       uint64_t now);

/*
 * moq_quic_link_new: join @a and @b (not owned; they must outlive the link).
 * Returns NULL on bad arguments or no memory.
 */
struct moq_quic_link *moq_quic_link_new(const struct moq_quic_link_config *cfg,
                                        struct moq_quic_endpoint *a, struct moq_quic_endpoint *b);

/* moq_quic_link_free: free the link and datagrams still in flight. */
void moq_quic_link_free(struct moq_quic_link *l);

/* moq_quic_link_set_filter: install (or clear with NULL) a filter. */
void moq_quic_link_set_filter(struct moq_quic_link *l, moq_quic_link_filter_fn fn, void *arg);

/*
 * moq_quic_link_set_nat: a NAT rebinding (RFC 9000, 9.3) from now on:
 * datagrams endpoint a sends from @inside reach b as from @outside, and b's
 * datagrams to @outside reach a at @inside (a's connection never learns of
 * it). NULL @inside clears it. Datagrams already on the link keep their
 * addresses.
 */
void moq_quic_link_set_nat(struct moq_quic_link *l, const struct moq_quic_addr *inside,
                           const struct moq_quic_addr *outside);

/* moq_quic_link_now: the current virtual time (ns). */
uint64_t moq_quic_link_now(const struct moq_quic_link *l);

/*
 * moq_quic_link_inject: put a raw datagram on direction @dir (0: to b, 1:
 * to a) from @from to @to, delivered after the direction's delay, not
 * subject to loss. Returns 0, MOQ_ERR_INVAL (len > 1500 or bad dir),
 * MOQ_ERR_LIMIT (queue full).
 */
int moq_quic_link_inject(struct moq_quic_link *l, int dir, const uint8_t *data, size_t len,
                         const struct moq_quic_addr *from, const struct moq_quic_addr *to);

/*
 * moq_quic_link_step: do everything due at the current time (send bursts
 * from both endpoints, deliver due datagrams, run due timers); when nothing
 * was due, advance the clock to the next event. Returns the number of
 * actions done, 0 when nothing at all will ever happen (no datagrams in
 * flight and no expiry).
 */
int moq_quic_link_step(struct moq_quic_link *l);

/*
 * moq_quic_link_run: step until @done(@arg) returns nonzero (checked after
 * every step; NULL = until idle) or the virtual clock passes now + @max_ns.
 * Returns 0 when done (or idle with done NULL), MOQ_ERR_AGAIN when time ran
 * out, or MOQ_ERR_STATE when the link went idle before done.
 */
int moq_quic_link_run(struct moq_quic_link *l, int (*done)(void *arg), void *arg, uint64_t max_ns);

/*
 * moq_quic_link_set_endpoint: replace endpoint @idx (0 = a, 1 = b), e.g. to
 * simulate a restarted server that lost its connections. Datagrams in flight
 * go to the new one. Returns 0 or MOQ_ERR_INVAL.
 */
int moq_quic_link_set_endpoint(struct moq_quic_link *l, int idx, struct moq_quic_endpoint *ep);

/* moq_quic_link_get_stats: the counters of direction @dir (0 or 1). */
void moq_quic_link_get_stats(const struct moq_quic_link *l, int dir,
                             struct moq_quic_link_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* MOQ_QUIC_LINK_H */
