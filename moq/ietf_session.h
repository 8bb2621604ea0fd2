/* SPDX-License-Identifier: MIT */
/*
 * ietf_session.h: IETF moq-transport sessions (drafts 14-20) on the relay's
 * origin and cache. An IETF session is a translator (docs/DESIGN.md, "Two
 * protocol families"): the transport's session (raw QUIC or a binding) is a
 * shell whose input goes to ietf_session.c, which runs a moq-lite-04 server
 * session of its own (an in-process binding) and translates between the two:
 * PUBLISH_NAMESPACE <-> ANNOUNCE, SUBSCRIBE <-> SUBSCRIBE, subgroup-0 objects
 * <-> frames of a group. Routing, auth, bounds, the cache and fanout are the
 * lite session's, unchanged.
 */
#ifndef MOQ_MOQ_IETF_SESSION_H
#define MOQ_MOQ_IETF_SESSION_H

#include "moq.h"

/* A binding's version argument for IETF draft @d (14..20): moq_binding_accept
 * takes it beside the moq-lite versions. */
#define MOQ_IETF_BINDING_BASE  0x100
#define MOQ_VERSION_IETF(d)    ((enum moq_version)(MOQ_IETF_BINDING_BASE + (d)))
#define MOQ_VERSION_IS_IETF(v) ((int)(v) > MOQ_IETF_BINDING_BASE)

struct ietf_sess;

/* Called by session.c: a server session on binding @ops/@b for draft @d
 * (moq_binding_accept with MOQ_VERSION_IETF(d)). NULL: refused. */
struct moq_session *ietf_binding_accept(struct moq_node *n, const struct moq_binding_ops *ops,
                                        void *b, int d, const char *url, size_t url_len);

/* Called by session.c: raw QUIC session @s (server) negotiated the ALPN of
 * draft @d; it becomes the shell. 0, or MOQ_ERR_NOMEM / MOQ_ERR_INVAL. */
int ietf_quic_attach(struct moq_session *s, int d);

/* The shell's input, diverted by session.c's moq_binding_* entry points. */
void ietf_stream_data(struct ietf_sess *ie, int64_t sid, const uint8_t *data, size_t len, int fin);
void ietf_stream_acked(struct ietf_sess *ie, int64_t sid, uint64_t acked);
void ietf_stream_reset(struct ietf_sess *ie, int64_t sid, uint64_t code);
void ietf_stream_stop_sending(struct ietf_sess *ie, int64_t sid, uint64_t code);
void ietf_stream_closed(struct ietf_sess *ie, int64_t sid);
void ietf_writable(struct ietf_sess *ie);
/* The shell was marked (sess_mark): work deferred out of the inner
 * session's own calls (a SUBSCRIBE_OK for a PUBLISHed track, a refusal). */
void ietf_poll(struct ietf_sess *ie);
/* The lite session of @ie is being freed (by its node, or by ietf_closed). */
void ietf_inner_gone(struct ietf_sess *ie);

/* An OBJECT datagram the client sent (session.c, dgram.c: sess_datagram of
 * the shell): object 0 of a group becomes that group as one frame in the
 * cache, through dgram_in on the lite session; anything else is counted
 * (dgrams_in_bad) and dropped. */
void ietf_datagram(struct ietf_sess *ie, const uint8_t *p, size_t len);

/* dgram.c's dgram_out on the lite session behind @ie: the OBJECT_DATAGRAM
 * header (object 0, end of group, the frame's extension headers as its
 * properties) of cache group @g of the client's subscription whose lite id
 * is @lite_id. Bytes, or < 0 (not a datagram: it goes on a stream). */
#define IETF_DGRAM_HDR_MAX 280 /* properties up to 256 bytes */
int ietf_dgram_hdr(struct ietf_sess *ie, uint8_t *buf, size_t cap, uint64_t lite_id,
                   const struct moq_cache_group *g);

/* The heap the translator of @ie holds (bytes asked of malloc, without its
 * headers): its state, its stream records (live and pooled) with what
 * each holds, queued acknowledgements and datagrams; not its lite session,
 * which is counted as any lite session's. */
size_t ietf_heap_bytes(const struct ietf_sess *ie);

/* The shell's transport closed (frees @ie and its lite session). */
void ietf_closed(struct ietf_sess *ie, uint64_t code, int local);

#endif
