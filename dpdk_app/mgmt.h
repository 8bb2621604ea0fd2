/* SPDX-License-Identifier: MIT */
/*
 * mgmt.h: the relay's management side (mgmt.c), all on the main lcore or the
 * telemetry thread and off the data path: the HTTP listener (/health,
 * /metrics) and the rte_telemetry commands. It reads the relay only through
 * moq_relay_stats (relay.h) and the snapshots below, which relay.c fills.
 * Not a public header; it does not include relay_int.h.
 */
#ifndef MOQ_DPDK_APP_MGMT_H
#define MOQ_DPDK_APP_MGMT_H

#include <stddef.h>
#include <stdint.h>

#include "moq.h"
#include "relay.h"

/* The management side's own state, one per relay (struct moq_relay.mgmt). */
/* A management connection whose request has not all arrived: the main
 * lcore never waits for one (mgmt.c, moq_relay_mgmt_poll). */
#define MGMT_PENDING     16
#define MGMT_REQ_MAX     1024
#define MGMT_REQ_TIMEOUT 2000000000ull /* ns: a request must arrive within */
struct mgmt_conn {
	int fd;
	uint16_t len;
	uint64_t t0; /* accepted, CLOCK_MONOTONIC ns */
	char req[MGMT_REQ_MAX];
};

struct relay_mgmt {
	struct moq_relay *relay;
	int http_fd; /* -1: no listener */
	unsigned int http_port;
	uint64_t http_requests;
	/* requests on their way (at most MGMT_PENDING: the oldest goes for a
	 * new one), and those that did not arrive in time or were pushed out */
	struct mgmt_conn pend[MGMT_PENDING];
	unsigned int npend;
	unsigned int pending_now; /* npend at the end of the last poll (for /metrics) */
	uint64_t http_timeouts;
	/* relay-added latency: the merged histogram at the last
	 * /moqdp/latency_reset (telemetry thread only) */
	struct moq_lat_hist lat_base;
	/* heap_give_back (mgmt.c): the counted heap's peak since the last
	 * malloc_trim, and when it was last looked at (CLOCK_MONOTONIC ns) */
	int64_t heap_peak;
	uint64_t heap_checked;
	uint64_t heap_trims;
};

/* One worker's figures for /moqdp/conns (what the worker published of its
 * endpoint and node stats). */
struct relay_mgmt_worker {
	uint64_t conns_active, conns_accepted, sessions;
};

/* The cache's figures for /moqdp/cache. */
struct relay_mgmt_cache {
	uint64_t budget, used, max_latency_us;
	uint64_t tracks, groups, evicted, expired, lagged;
	/* its pools (pool.h): bytes the pools may reserve, have reserved, hold
	 * in slabs serving a class, hand out to the cache (class sizes, and
	 * rte_malloc above the largest); objects out, in lcore caches;
	 * allocations refused at the limit, above the largest class, objects
	 * freed into another socket's arena */
	uint64_t pool_limit, pool_reserved, pool_slab_bytes, pool_obj_bytes;
	uint64_t pool_objs, pool_cached, pool_exhausted, pool_fallback, pool_remote_frees;
};

/* relay.c: what the management side reads. */
struct relay_mgmt *moq_relay_mgmt_of(struct moq_relay *r);
/* SIGQUIT was received: /health answers 503. */
int moq_relay_draining(const struct moq_relay *r);
/* every worker's figures into @out[MOQ_RELAY_MAX_WORKERS]; returns how many */
unsigned int moq_relay_mgmt_workers(const struct moq_relay *r, struct relay_mgmt_worker *out);
void moq_relay_mgmt_cache(const struct moq_relay *r, struct relay_mgmt_cache *c);

/* mgmt.c: the HTTP listener on @addr ("host:port", "" = none) for relay @r,
 * the telemetry commands. */
int moq_relay_mgmt_open(struct relay_mgmt *m, struct moq_relay *r, const char *addr, char *err,
                        size_t errlen);
void moq_relay_mgmt_poll(struct relay_mgmt *m, int timeout_ms);
void moq_relay_mgmt_close(struct relay_mgmt *m);
void moq_relay_telemetry_register(struct relay_mgmt *m);
void moq_relay_telemetry_unregister(struct relay_mgmt *m);

#endif /* MOQ_DPDK_APP_MGMT_H */
