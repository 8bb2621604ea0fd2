/* SPDX-License-Identifier: MIT */
/*
 * ietf.h: the load generator's IETF moq-transport client (drafts 14-20),
 * written with moq/ietf_codec: one publisher and any number of subscribers,
 * each a raw QUIC connection (ALPN moq_ietf_alpn(draft)) on an endpoint the
 * caller made with moq_lg_ietf_callbacks() and drives (kernel sockets in
 * moqdp-load, the in-memory link in bench_moq_fanout).
 *
 *  - publisher: CLIENT_SETUP / SETUP, PUBLISH_NAMESPACE of the broadcast's
 *    tuple ("live/room" -> ("live", "room")), answers the relay's
 *    SUBSCRIBE for the track with SUBSCRIBE_OK (cfg.use_publish: PUBLISH of
 *    the track instead, ready at PUBLISH_OK / REQUEST_OK); the caller then hands it
 *    objects (moq_lg_ietf_pub_object): group g's objects go on one
 *    subgroup stream (subgroup 0, ids 0, 1, ...), FIN after the last.
 *  - subscribers: SETUP, SUBSCRIBE the track (NextObject / draft-20
 *    relative 1); every subgroup stream's objects are counted and, with
 *    cfg.verify, checked as moq-lite's subscribers check frames (media.h's
 *    moq_lg_rx: order, header, length, CRC, latency).
 *
 * Single thread. Bytes written stay referenced until the stream closes
 * (quic.h: stream data is not copied), so they are kept per stream and
 * freed at its stream_closed / the connection's close.
 */
#ifndef MOQ_LOADGEN_IETF_H
#define MOQ_LOADGEN_IETF_H

#include <stddef.h>
#include <stdint.h>

#include "media.h"
#include "quic.h"

struct moq_lg_ietf;

struct moq_lg_ietf_cfg {
	int draft;            /* 14..20 */
	uint32_t subscribers; /* subscriber connections (indices 0..n-1) */
	char broadcast[128];  /* the broadcast path: the namespace tuple */
	char track[64];       /* the track name */
	int verify;           /* subscribers verify payloads (media.h frames) */
	uint16_t track_id;    /* the media track id (verify) */
	struct moq_lg_hist *hist; /* latency histogram (verify), borrowed; may be NULL */
	int use_publish; /* the publisher PUBLISHes its track (alias 1) instead of
	                  * PUBLISH_NAMESPACE and waiting for the relay's SUBSCRIBE */
};

struct moq_lg_ietf_counts {
	uint64_t subs_setup;      /* subscribers whose SETUP was answered */
	uint64_t subs_ok;         /* SUBSCRIBE_OK received */
	uint64_t subs_refused;    /* SUBSCRIBE answered with an error */
	uint64_t subs_closed;     /* connections closed (any code) */
	uint64_t objects, bytes;  /* payload received, every subscriber */
	uint64_t groups;          /* subgroup streams complete (FIN after objects) */
	uint64_t groups_reset;    /* subgroup streams reset by the relay */
	uint64_t errors;          /* decode errors, wrong alias / order / size */
	uint64_t pub_objects, pub_bytes, pub_groups;
	uint64_t close_code; /* the last close code seen */
	int close_local;     /* ... whether this side closed */
	const char *close_what; /* ... its description (a constant), or NULL */
};

/* moq_lg_ietf_new: NULL on bad @cfg (draft out of range, empty names) or
 * no memory. */
struct moq_lg_ietf *moq_lg_ietf_new(const struct moq_lg_ietf_cfg *cfg);
void moq_lg_ietf_free(struct moq_lg_ietf *lg);

/* The endpoint's callbacks (moq_quic_config.cb; .user unused: each
 * connection's user is its record). */
const struct moq_quic_callbacks *moq_lg_ietf_callbacks(void);

/* moq_lg_ietf_connect: connect subscriber @idx (or the publisher: @idx -1)
 * from @local to @remote on @ep. 0 or a negative MOQ_ERR_*. */
int moq_lg_ietf_connect(struct moq_lg_ietf *lg, struct moq_quic_endpoint *ep, int idx,
                        const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                        uint64_t now);

/* 1 once the relay accepted the publisher's namespace (or its PUBLISH). */
int moq_lg_ietf_pub_announced(const struct moq_lg_ietf *lg);
/* 1 once the publisher's namespace is accepted and the relay subscribed
 * (cfg.use_publish: once its PUBLISH is accepted). */
int moq_lg_ietf_pub_ready(const struct moq_lg_ietf *lg);

/* moq_lg_ietf_pub_object: object @index of group @group (@index 0 opens
 * the group's subgroup stream; objects in order), @len bytes copied; @last
 * ends the group (FIN). 0 or a negative MOQ_ERR_*. */
int moq_lg_ietf_pub_object(struct moq_lg_ietf *lg, uint64_t group, uint32_t index,
                           const uint8_t *data, size_t len, int last);

/* Subscriber @idx: SETUP answered (its SUBSCRIBE sent), SUBSCRIBE_OK
 * received, its payload bytes / groups. */
int moq_lg_ietf_sub_setup(const struct moq_lg_ietf *lg, uint32_t idx);
int moq_lg_ietf_sub_ok(const struct moq_lg_ietf *lg, uint32_t idx);
/* when subscriber @idx's handshake completed (the clock of connect's @now
 * as given to moq_lg_ietf_set_now), 0 before */
uint64_t moq_lg_ietf_sub_established(const struct moq_lg_ietf *lg, uint32_t idx);
/* the time the established callbacks record (the caller's clock) */
void moq_lg_ietf_set_now(struct moq_lg_ietf *lg, uint64_t now);
uint64_t moq_lg_ietf_sub_bytes(const struct moq_lg_ietf *lg, uint32_t idx);
uint64_t moq_lg_ietf_sub_groups(const struct moq_lg_ietf *lg, uint32_t idx);

/* Totals; with cfg.verify @vc (may be NULL) gets the verifiers' counts
 * (@final: count missing groups first, once at the end). */
void moq_lg_ietf_counts(struct moq_lg_ietf *lg, struct moq_lg_ietf_counts *out,
                        struct moq_lg_counts *vc, int final);

/* moq_lg_ietf_close: close every connection (code 0). */
void moq_lg_ietf_close(struct moq_lg_ietf *lg);

#endif
