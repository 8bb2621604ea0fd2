/* SPDX-License-Identifier: MIT */
/*
 * ietf_run.h: moqdp-load --protocol ietf-NN on kernel sockets (ietf_run.c):
 * loadgen/ietf.c's publisher (one media.h track) and verifying subscribers
 * against a relay, JSON lines as moqdp-load's moq-lite mode writes them.
 */
#ifndef MOQ_LOADGEN_IETF_RUN_H
#define MOQ_LOADGEN_IETF_RUN_H

#include <signal.h>
#include <stdint.h>

#include "media.h"
#include "quic.h"

struct moq_lg_ietf_run_cfg {
	int draft; /* 14..20 */
	int publish;
	int use_publish; /* the publisher PUBLISHes its track (ietf.h) */
	uint32_t subscribers;
	double ramp_per_s; /* 0: all at once */
	uint32_t conns_per_addr;
	struct moq_lg_track_cfg track;
	char broadcast[128];
	struct moq_quic_addr relay;
	struct moq_quic_addr *locals; /* [0]: the publisher; bound here (ports filled in) */
	unsigned nlocals;
	double duration_s, warmup_s;
	char json[256]; /* "" none, "-" stdout */
};

/* Run until *@quit or the duration; *@mark resets the latency histogram.
 * Returns the exit code: 0 when every subscriber subscribed and every
 * object verified, 1 otherwise, 2 on bad configuration. */
int moq_lg_ietf_run(const struct moq_lg_ietf_run_cfg *cfg, volatile sig_atomic_t *quit,
                    volatile sig_atomic_t *mark);

#endif
