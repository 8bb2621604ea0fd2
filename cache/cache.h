/* SPDX-License-Identifier: MIT */
/*
 * cache.h: the relay's media cache.
 *
 * Model: broadcast (path) -> track (name) -> group (sequence) -> frames
 * (timestamp, payload). Payload bytes are stored once, in memory from an
 * injected allocator (hugepages through EAL in the relay, a counting heap in
 * tests), and read by any number of readers on any thread.
 *
 * Storage (DESIGN.md rule 1): a frame that arrives whole in one write and is
 * at most MOQ_CACHE_COPY_WHOLE bytes gets its own exact-fit allocation. Larger
 * frames and frames written in chunks go into blocks that belong to their
 * group alone and grow with it (size classes 64 B .. 64 KiB). Evicting a group
 * frees all of its memory once the last reference is gone.
 *
 * Concurrency: one writer per track (the lcore that owns the publisher's
 * connection), any number of readers. Publishing is a release-store of the
 * group's byte and frame counts; readers acquire-load them and never block
 * the writer. Index structures (the track table and a track's window of
 * recent groups) are reclaimed with a small QSBR scheme: every reader thread
 * registers a reader id and calls moq_cache_quiescent() between iterations
 * (when it holds no pointer obtained without a reference). Groups and tracks
 * handed out by lookups carry a reference and stay valid (with all of their
 * payload) until released, even after eviction: QUIC keeps pointers to
 * unacknowledged stream data.
 *
 * Group-level operations (open, finish, eviction, expiry, track create/drop)
 * serialise on a short spinlock per cache; frame writes and all reads take no
 * lock.
 *
 * Billing: billed = payload + MOQ_CACHE_FRAME_OVERHEAD per frame +
 * MOQ_CACHE_GROUP_OVERHEAD per group. Over the byte budget, groups are evicted
 * oldest first (by open order, across tracks); a track's newest group is never
 * evicted. A group older than its track's max_latency (and not the newest) is
 * expired; once the track's writer stopped (moq_cache_track_set_idle) its
 * newest group expires the same way, and moq_cache_expire drops a track that
 * holds no group and is referenced by nobody, so a cache whose tracks all
 * went idle returns to zero bytes. Clock values for expiry are supplied by the caller (nanoseconds
 * from any fixed origin). Every frame is stamped with its arrival time from
 * the configured clock (struct moq_cache_cfg.clock, once per write that
 * completes frames); the cache makes no other clock reads and no system
 * calls.
 *
 * Errors are 0 / counts / negative MOQ_ERR_* (common/moq_err.h). Readers of a
 * removed group get MOQ_ERR_EVICTED (byte budget, protocol reset code 31),
 * MOQ_ERR_OLD (max_latency, code 2) or MOQ_ERR_LAGGED (pushed out of the
 * track's window of recent groups, code 26). A group whose track was dropped
 * gives MOQ_ERR_CLOSED at once; a finished group gives MOQ_ERR_CLOSED once it
 * was read to its end; an aborted (publisher reset) group MOQ_ERR_DROPPED
 * (code 24).
 *
 * Use from moq/:
 *  ingest (publisher's lcore): moq_cache_track_create once; per group stream
 *    moq_cache_group_open(seq, now), then per frame header
 *    moq_cache_frame_begin(ts, size) and per stream chunk
 *    moq_cache_frame_append(bytes) (returns the bytes still missing, 0 =
 *    frame complete); FIN -> moq_cache_group_finish, RESET ->
 *    moq_cache_group_abort; then moq_cache_group_unref. An append that fails
 *    with EVICTED/OLD/LAGGED means the group is gone: keep parsing the stream
 *    and drop its bytes (or STOP_SENDING it).
 *  fanout (any lcore, a registered reader): moq_cache_track_lookup once;
 *    poll moq_cache_track_version; moq_cache_track_group(seq) per group
 *    stream (hold that reference until the peer acknowledged everything
 *    sent from it); moq_cache_read_frames into a buffer of MOQ_CACHE_BATCH;
 *    per frame write the per-subscriber frame header, then the payload as
 *    iovecs from moq_cache_group_iov(offset, len) (or the view's data
 *    pointer); when the iovec array fills first, write what has iovecs and
 *    moq_cache_cursor_seek to the first byte without one (the next read
 *    returns the rest of that frame, start != 0: no second header);
 *    MOQ_ERR_CLOSED = FIN the stream, EVICTED/OLD/LAGGED/DROPPED =
 *    reset it (codes 31/2/26/24). Call moq_cache_quiescent once per loop.
 */
#ifndef MOQ_CACHE_CACHE_H
#define MOQ_CACHE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "moq_err.h"

/* DESIGN.md rule 1: whole frames up to this size get an exact-fit copy. */
#define MOQ_CACHE_COPY_WHOLE (2u * 1024u)
/* Group block size classes: powers of two from 64 B to 64 KiB (rule 1). */
#define MOQ_CACHE_BLOCK_MIN 64u
#define MOQ_CACHE_BLOCK_MAX (64u * 1024u)
/* PROTOCOL.md, Group: a frame and a group's cached bytes are capped at 32 MiB. */
#define MOQ_CACHE_GROUP_CAP (32u * 1024u * 1024u)
/* Frames per group (index chunks of 2, 4, 8, ... records): 2 * (2^15 - 1). */
#define MOQ_CACHE_GROUP_MAX_FRAMES (2u * ((1u << 15) - 1u))
/* Billing: fixed overhead per frame and per group, in bytes. They match the
 * index memory a frame (its 48-byte record and a 16-byte piece, in chunks
 * grown by doubling) and a group (its descriptor with the first chunks
 * inline) really hold. */
#define MOQ_CACHE_FRAME_OVERHEAD 64u
#define MOQ_CACHE_GROUP_OVERHEAD 328u
/* PROTOCOL.md, Track: default max latency 5 s, in nanoseconds. */
#define MOQ_CACHE_DEFAULT_MAX_LATENCY 5000000000ull
/* Default window of recent groups per track (a power of two): 5 s of 20 ms
 * one-frame audio groups is 250. */
#define MOQ_CACHE_DEFAULT_WINDOW 256u
/* DESIGN.md rule 3: default read batch. */
#define MOQ_CACHE_BATCH 8u
/* Default number of QSBR reader slots and track table buckets. */
#define MOQ_CACHE_DEFAULT_READERS 64u
#define MOQ_CACHE_DEFAULT_BUCKETS 1024u

/*
 * struct moq_cache_alloc: where the cache's memory comes from. alloc returns
 * @size bytes aligned to @align (a power of two, at most 64) or NULL; free
 * releases a pointer alloc returned. Both may be called from any thread (a
 * group is freed by whichever thread drops its last reference), so they must
 * be thread-safe. In the relay: rte_malloc/rte_free or rte_mempool size
 * classes; in tests: moq_cache_counting_alloc().
 */
struct moq_cache_alloc {
	void *(*alloc)(void *ctx, size_t size, size_t align);
	void (*free)(void *ctx, void *p);
	void *ctx;
};

/*
 * struct moq_cache_counting: a thread-safe heap allocator that counts what it
 * holds (requested bytes, not malloc's own overhead). Read the counters with
 * moq_cache_counting_stats(). fail_after, when nonzero, makes allocation
 * number fail_after (1-based, counted from init) and later ones fail, to test
 * MOQ_ERR_NOMEM paths (set it directly).
 */
struct moq_cache_counting {
	int64_t live_bytes;    /* atomic */
	int64_t live_blocks;   /* atomic */
	uint64_t total_allocs; /* atomic: successful allocations */
	uint64_t attempts;     /* atomic: calls of alloc */
	uint64_t fail_after;   /* 0, or the first attempt (1-based) to fail */
};

struct moq_cache_counting_stats {
	int64_t live_bytes;
	int64_t live_blocks;
	uint64_t total_allocs;
};

/* moq_cache_counting_init: zero @c. */
void moq_cache_counting_init(struct moq_cache_counting *c);
/* moq_cache_counting_alloc: an allocator interface backed by @c (borrowed;
 * @c must outlive every cache using it). */
struct moq_cache_alloc moq_cache_counting_alloc(struct moq_cache_counting *c);
/* moq_cache_counting_stats: a snapshot of @c's counters. */
struct moq_cache_counting_stats moq_cache_counting_stats(const struct moq_cache_counting *c);

struct moq_cache;
struct moq_cache_track;
struct moq_cache_group;

struct moq_cache_cfg {
	struct moq_cache_alloc alloc; /* required */
	uint64_t budget;              /* bytes billed before eviction; 0 = no limit */
	uint32_t max_readers;         /* QSBR reader ids 0..max_readers-1; 0 = default */
	uint32_t buckets;             /* track table buckets (power of two); 0 = default */
	/* The arrival clock (struct moq_cache_frame.arrival): nanoseconds on a
	 * monotonic clock, read once per write call that completes a frame (a
	 * write_frames batch reads it once), on the writer's thread. NULL =
	 * CLOCK_MONOTONIC (clock_gettime, vDSO). The relay points it at the
	 * clock its workers pass to moq_node_latency_commit (moq.h). */
	uint64_t (*clock)(void *ctx);
	void *clock_ctx;
};

struct moq_cache_track_cfg {
	uint64_t max_latency; /* ns; 0 = MOQ_CACHE_DEFAULT_MAX_LATENCY */
	uint32_t window;      /* recent groups kept (power of two); 0 = default */
};

/*
 * moq_cache_create: a cache using @cfg->alloc for all of its memory. Returns
 * NULL when @cfg is invalid (no allocator, buckets not a power of two) or an
 * allocation failed.
 */
struct moq_cache *moq_cache_create(const struct moq_cache_cfg *cfg);

/*
 * moq_cache_destroy: drop every track and free everything. Every group and
 * track reference handed out must have been released, and no reader may use
 * the cache any more. NULL is a no-op.
 */
void moq_cache_destroy(struct moq_cache *c);

/* moq_cache_used: bytes billed now (payload + overheads of live groups). */
uint64_t moq_cache_used(const struct moq_cache *c);

/* Counters of a cache (struct moq_cache_stats); for telemetry. */
struct moq_cache_stats {
	uint64_t used;            /* bytes billed */
	uint64_t budget;          /* byte budget (0 = none) */
	uint64_t groups;          /* live groups (in some track's window) */
	uint64_t tracks;          /* live tracks */
	uint64_t evicted;         /* groups removed for the budget (or explicitly) */
	uint64_t expired;         /* groups removed for max_latency */
	uint64_t lagged;          /* groups pushed out of a window */
	uint64_t closed;          /* groups removed with their track */
	uint64_t retired_pending; /* removed objects waiting for a grace period */
};

/* moq_cache_stats: a snapshot of @c's counters (takes the group lock
 * briefly: control path). */
void moq_cache_stats(struct moq_cache *c, struct moq_cache_stats *st);

/* moq_cache_budget_set: change the byte budget (0 = no limit) and evict down
 * to it. Control path. */
void moq_cache_budget_set(struct moq_cache *c, uint64_t budget);

/* --- QSBR: reader threads ----------------------------------------------- */

/*
 * moq_cache_reader_register: mark reader @id (0..max_readers-1) online; from
 * now on retired index structures wait for it to pass moq_cache_quiescent().
 * A thread must be registered (and own its id) to call the lookup functions.
 * Returns 0, MOQ_ERR_INVAL (id out of range) or MOQ_ERR_EXISTS (online).
 */
int moq_cache_reader_register(struct moq_cache *c, unsigned id);
/* moq_cache_reader_unregister: mark reader @id offline (it holds no pointer
 * obtained without a reference). */
void moq_cache_reader_unregister(struct moq_cache *c, unsigned id);
/*
 * moq_cache_quiescent: reader @id holds no pointer obtained from the cache
 * without a reference (call once per lcore loop iteration). One store.
 */
void moq_cache_quiescent(struct moq_cache *c, unsigned id);
/*
 * moq_cache_reclaim: release retired objects whose grace period has passed.
 * Group open and moq_cache_expire() call it; call it on an idle control lcore
 * too. Returns how many objects were released.
 */
unsigned moq_cache_reclaim(struct moq_cache *c);

/* --- tracks -------------------------------------------------------------- */

/*
 * moq_cache_track_create: create track @name of broadcast @path (both copied,
 * any bytes, lengths up to 1024) for the one writer that will publish it.
 * @cfg may be NULL (defaults). The caller owns one reference
 * (moq_cache_track_unref). Returns 0 with *@out set, MOQ_ERR_EXISTS (that
 * path + name exists), MOQ_ERR_INVAL (a length over 1024, window not a power
 * of two or over 2^20), MOQ_ERR_NOMEM.
 */
int moq_cache_track_create(struct moq_cache *c, const char *path, size_t path_len, const char *name,
                           size_t name_len, const struct moq_cache_track_cfg *cfg,
                           struct moq_cache_track **out);

/*
 * moq_cache_track_lookup: find track @path / @name and take a reference on it
 * (release with moq_cache_track_unref). Lock-free; the calling thread must be
 * a registered reader (or the track's writer with no reader running). Returns
 * the track or NULL (not found, or being dropped by moq_cache_expire: the
 * caller may create it again).
 */
struct moq_cache_track *moq_cache_track_lookup(struct moq_cache *c, const char *path,
                                               size_t path_len, const char *name, size_t name_len);

/* moq_cache_track_ref / unref: take / drop a reference on @t. The last unref
 * of a dropped track frees it (any thread). */
void moq_cache_track_ref(struct moq_cache_track *t);
void moq_cache_track_unref(struct moq_cache_track *t);

/*
 * moq_cache_track_drop: remove @t from lookups and remove all of its groups
 * (their readers get MOQ_ERR_CLOSED; held references stay valid). The
 * caller's reference is not consumed. Returns 0 or MOQ_ERR_CLOSED (dropped
 * already).
 */
int moq_cache_track_drop(struct moq_cache_track *t);

/* moq_cache_broadcast_drop: drop every track of broadcast @path. Returns the
 * number of tracks dropped. */
int moq_cache_broadcast_drop(struct moq_cache *c, const char *path, size_t path_len);

/*
 * moq_cache_track_set_idle: @t's writer stopped writing it (the relay's
 * upstream subscription closed): its newest group is no longer the live
 * edge, and expires once older than max_latency like the others. The next
 * moq_cache_group_open makes the track live again. Any thread.
 */
void moq_cache_track_set_idle(struct moq_cache_track *t);

/* moq_cache_track_idle: true after moq_cache_track_set_idle until a group
 * opens (a new track is live). */
bool moq_cache_track_idle(const struct moq_cache_track *t);

/*
 * moq_cache_track_gap: the writer of @t knows that the groups @lo..@hi
 * (inclusive) it has not got will not come: its upstream DROPped them, or
 * its subscription starts after them. Readers waiting for one of them as a
 * late group (moq_cache_group_open takes skipped ones) stop waiting:
 * moq_cache_track_gap_final. The track keeps the last few such ranges
 * (merged when they touch). Bumps the track's version. Writer only.
 */
void moq_cache_track_gap(struct moq_cache_track *t, uint64_t lo, uint64_t hi);

/* moq_cache_track_gap_final: whether @seq is in a range given to
 * moq_cache_track_gap (a group not in @t that will not come). Lock-free;
 * any thread. */
bool moq_cache_track_gap_final(const struct moq_cache_track *t, uint64_t seq);

/* moq_cache_track_max_latency: @t's max latency in ns (its cfg, or the
 * default). */
uint64_t moq_cache_track_max_latency(const struct moq_cache_track *t);

/*
 * moq_cache_track_latest: the newest group's sequence in *@seq. Returns 0,
 * MOQ_ERR_AGAIN (no group yet) or MOQ_ERR_CLOSED (dropped).
 */
int moq_cache_track_latest(const struct moq_cache_track *t, uint64_t *seq);

/*
 * moq_cache_track_version: a counter that changes (release) whenever anything
 * on @t is published: a frame, bytes, a group opened, finished or removed.
 * A fanout lcore polls it (acquire) to find writable subscribers.
 */
uint64_t moq_cache_track_version(const struct moq_cache_track *t);

/*
 * moq_cache_track_group: group @seq of @t with a reference (release with
 * moq_cache_group_unref). Lock-free; the caller must be a registered reader or
 * the writer. Returns 0 with *@out set, or MOQ_ERR_AGAIN (not opened yet:
 * newer than the newest), MOQ_ERR_EVICTED / MOQ_ERR_OLD / MOQ_ERR_LAGGED /
 * MOQ_ERR_CLOSED (removed, and why), MOQ_ERR_LAGGED (older than the window
 * remembers), MOQ_ERR_NOTFOUND (skipped sequence).
 */
int moq_cache_track_group(struct moq_cache_track *t, uint64_t seq, struct moq_cache_group **out);

/* --- groups: writer ------------------------------------------------------ */

/*
 * moq_cache_group_open: open group @seq of @t at time @now (ns). Expires the
 * track's old groups, pushes the group @window sequences older out
 * (MOQ_ERR_LAGGED), then evicts over budget. Writer only. The caller owns
 * one reference (drop it with moq_cache_group_unref after finish/abort).
 * Several groups of a track may be open at once (group streams overlap).
 * A @seq below the newest is taken when it was skipped so far (never
 * opened: its stream came after a newer group's), is still in the window
 * and its next newer group is not older than max_latency (it gets that
 * group's created time when earlier than @now); readers of @seq then get it
 * instead of MOQ_ERR_NOTFOUND.
 * Returns 0 with *@out set, MOQ_ERR_ORDER (@seq below the newest and not
 * such a skipped sequence), MOQ_ERR_CLOSED (track dropped), MOQ_ERR_INVAL (@seq >= 2^61),
 * MOQ_ERR_NOMEM.
 */
int moq_cache_group_open(struct moq_cache_track *t, uint64_t seq, uint64_t now,
                         struct moq_cache_group **out);

/*
 * moq_cache_group_reopen: replace @t's newest group @seq, which its writer
 * aborted (moq_cache_group_abort: a publisher's stream that closed
 * mid-group), with a new empty one open at time @now, for a writer that
 * has the whole group again (the publisher's restarted subscription starts
 * there). Readers holding the old group go on seeing it dropped
 * (MOQ_ERR_DROPPED); moq_cache_track_group returns the new one. Writer
 * only; the caller owns one reference, as with moq_cache_group_open.
 * Returns 0 with *@out set, MOQ_ERR_ORDER (@seq is not the newest, or the
 * newest is not aborted: open, finished or removed), MOQ_ERR_CLOSED (track
 * dropped), MOQ_ERR_INVAL, MOQ_ERR_NOMEM.
 */
int moq_cache_group_reopen(struct moq_cache_track *t, uint64_t seq, uint64_t now,
                           struct moq_cache_group **out);

/*
 * moq_cache_write_frame: append one whole frame. Copied exact-fit when @len
 * <= MOQ_CACHE_COPY_WHOLE, into the group's blocks otherwise. Returns 0 or
 * (nothing changed) MOQ_ERR_TOO_LARGE (group would pass MOQ_CACHE_GROUP_CAP),
 * MOQ_ERR_STATE (a frame is open), MOQ_ERR_CLOSED (finished or aborted),
 * MOQ_ERR_EVICTED / MOQ_ERR_OLD / MOQ_ERR_LAGGED (group removed),
 * MOQ_ERR_LIMIT (MOQ_CACHE_GROUP_MAX_FRAMES, or the group's block index is full), MOQ_ERR_NOMEM.
 */
int moq_cache_write_frame(struct moq_cache_group *g, int64_t timestamp, const void *data,
                          size_t len);

/* One frame of a write_frames batch. */
struct moq_cache_frame_in {
	int64_t timestamp;
	const void *data;
	size_t len;
};

/*
 * moq_cache_write_frames: append @n whole frames, published with one release
 * store. The batch is checked first: a bad one (same errors as write_frame)
 * rejects the whole batch, nothing changed. Returns the number written (@n,
 * or fewer after MOQ_ERR_NOMEM), or a negative MOQ_ERR_* when none was.
 */
int moq_cache_write_frames(struct moq_cache_group *g, const struct moq_cache_frame_in *in,
                           unsigned n);

/*
 * moq_cache_frame_begin: start a frame of @size bytes (the size from its
 * header) whose payload arrives in chunks. Readers see it at once and can
 * read each chunk as it is appended. Returns the bytes still missing (@size;
 * 0 = an empty frame, already complete), or MOQ_ERR_TOO_LARGE, MOQ_ERR_STATE
 * (a frame is open), MOQ_ERR_CLOSED, MOQ_ERR_EVICTED / OLD / LAGGED,
 * MOQ_ERR_LIMIT, MOQ_ERR_NOMEM; nothing changed on error.
 */
int64_t moq_cache_frame_begin(struct moq_cache_group *g, int64_t timestamp, size_t size);

/*
 * moq_cache_frame_begin_ext: moq_cache_frame_begin of a frame that carries
 * extension headers (IETF moq-transport: @ext_len bytes, copied, at most
 * MOQ_CACHE_EXT_MAX; 0 is frame_begin). They are kept beside the payload
 * (moq-lite readers never see them) and published with the frame. Returns
 * as frame_begin, or MOQ_ERR_TOO_LARGE (@ext_len), MOQ_ERR_NOMEM; nothing
 * changed on error.
 */
#define MOQ_CACHE_EXT_MAX 4096u
int64_t moq_cache_frame_begin_ext(struct moq_cache_group *g, int64_t timestamp, size_t size,
                                  const void *ext, size_t ext_len);

/*
 * What an IETF moq-transport object carries beside its payload: extension
 * headers (@ext, @ext_len bytes) and its location in the group when that is
 * not (subgroup 0, object id = frame index) (@has_loc: @subgroup, @object).
 * moq-lite readers see neither: the frames of a group in arrival order.
 */
struct moq_cache_meta {
	const uint8_t *ext;
	size_t ext_len;
	bool has_loc;
	uint64_t subgroup, object;
};

/* moq_cache_frame_begin_meta: moq_cache_frame_begin of a frame with @m
 * (copied; NULL, or nothing in it, is frame_begin). Returns as
 * frame_begin_ext. */
int64_t moq_cache_frame_begin_meta(struct moq_cache_group *g, int64_t timestamp, size_t size,
                                   const struct moq_cache_meta *m);

/* moq_cache_frame_meta: what published frame @index of @g carries beside it
 * (valid while the group is referenced): 0, or MOQ_ERR_NOTFOUND (nothing:
 * no extension headers, location (0, @index)). Lock-free, any thread. */
int moq_cache_frame_meta(const struct moq_cache_group *g, uint32_t index, struct moq_cache_meta *m);

/* moq_cache_frame_ext: the extension headers of published frame @index of
 * @g in *@p / *@len (valid while the group is referenced): 0, or
 * MOQ_ERR_NOTFOUND (it has none). Lock-free, any thread. */
int moq_cache_frame_ext(const struct moq_cache_group *g, uint32_t index, const uint8_t **p,
                        size_t *len);

/* moq_cache_track_has_ext: whether a frame of @t ever had extension headers
 * or a location of its own (moq_cache_meta). */
bool moq_cache_track_has_ext(const struct moq_cache_track *t);

/*
 * moq_cache_frame_append: append @len bytes of the open frame. A frame whose
 * whole payload arrives in this first call and is <= MOQ_CACHE_COPY_WHOLE is
 * stored exact-fit. Returns the bytes still missing: 0 means the frame is
 * complete (and closed). Errors, nothing changed: MOQ_ERR_STATE (no frame
 * open), MOQ_ERR_INVAL (@len more than missing), MOQ_ERR_CLOSED,
 * MOQ_ERR_EVICTED / OLD / LAGGED, MOQ_ERR_LIMIT, MOQ_ERR_NOMEM.
 */
int64_t moq_cache_frame_append(struct moq_cache_group *g, const void *data, size_t len);

/*
 * moq_cache_group_finish: the group is complete (moq-lite: FIN at a frame
 * boundary). Readers get MOQ_ERR_CLOSED once they read everything. Returns 0,
 * MOQ_ERR_STATE (a frame is open), MOQ_ERR_CLOSED (finished or aborted).
 * Finishing a removed group is allowed (0).
 */
int moq_cache_group_finish(struct moq_cache_group *g);

/*
 * moq_cache_group_abort: the publisher reset the group stream: readers get
 * MOQ_ERR_DROPPED from then on. An open frame is abandoned. Returns 0 or
 * MOQ_ERR_CLOSED (already finished/aborted).
 */
int moq_cache_group_abort(struct moq_cache_group *g);

/* --- groups: readers ----------------------------------------------------- */

/* moq_cache_group_ref / unref: take / drop a reference. The last unref frees
 * the group and all its payload (any thread). */
void moq_cache_group_ref(struct moq_cache_group *g);
void moq_cache_group_unref(struct moq_cache_group *g);

/* moq_cache_group_seq: the group's sequence number. */
uint64_t moq_cache_group_seq(const struct moq_cache_group *g);

/* moq_cache_group_created: the @now the group was opened at (ns, the
 * caller's clock of moq_cache_group_open). */
uint64_t moq_cache_group_created(const struct moq_cache_group *g);

/* moq_cache_group_ts: the timestamp of the group's first frame (@newest 0)
 * or of its newest published one, complete or arriving (@newest 1), in *@ts.
 * Returns 0, or MOQ_ERR_NOTFOUND (no frame yet). Lock-free, any thread. */
int moq_cache_group_ts(const struct moq_cache_group *g, int newest, int64_t *ts);

/*
 * moq_cache_group_status: 0 while the group is open and live, else the code a
 * reader at its end gets: MOQ_ERR_CLOSED (finished), MOQ_ERR_DROPPED
 * (aborted), MOQ_ERR_EVICTED / MOQ_ERR_OLD / MOQ_ERR_LAGGED (removed; takes
 * precedence). @bytes and @frames (either may be NULL) get what is published.
 */
int moq_cache_group_status(const struct moq_cache_group *g, uint64_t *bytes, uint32_t *frames);

/*
 * struct moq_cache_cursor: a reader's position in a group. Zero it to start
 * at the first frame. Fields are private.
 */
struct moq_cache_cursor {
	uint32_t frame; /* the next (or current partial) frame */
	uint32_t pos;   /* bytes of that frame already returned */
	uint32_t piece; /* 1 + the piece holding byte @pos, or 0 (unknown) */
	uint32_t pad;
};

/*
 * moq_cache_cursor_seek: put @cur at payload byte @pos of frame @frame, so
 * the next read returns the frame from there (a frame's start is @pos then):
 * a reader that wrote only part of what a read returned (its iovec array
 * was full) continues at its first unwritten byte. @pos must be below the
 * frame's size (or 0), @frame at most the frames read so far.
 */
static inline void moq_cache_cursor_seek(struct moq_cache_cursor *cur, uint32_t frame, uint32_t pos)
{
	cur->frame = frame;
	cur->pos = pos;
	cur->piece = 0;
}

/*
 * struct moq_cache_frame: a view of (part of) one cached frame. The bytes stay
 * valid while the reader holds its group reference. The cache keeps one such
 * record per frame, prepared by the writer, so a batch read of complete
 * frames is a copy of consecutive records.
 */
struct moq_cache_frame {
	int64_t timestamp;
	uint64_t offset;     /* group byte offset of payload byte @start */
	const uint8_t *data; /* bytes [start, start+len) when contiguous, else
			      * NULL: use moq_cache_group_iov(offset, len) */
	uint32_t size;       /* the frame's whole payload size */
	uint32_t start;      /* first payload byte in this view (0 unless the
			      * frame was returned in pieces) */
	uint32_t len;        /* bytes in this view */
	uint32_t index;      /* frame number in the group (0-based) */
	uint64_t arrival;    /* when the frame was complete in the cache (ns, the
			      * cfg clock: the write of a whole frame, or the
			      * append of a chunked frame's last byte); 0 in a
			      * view that does not end the frame */
};

/* complete: this view ends the frame. */
static inline int moq_cache_frame_complete(const struct moq_cache_frame *f)
{
	return f->start + f->len == f->size;
}

/*
 * moq_cache_read_frames: fill @buf (caller-owned, @n entries) from @cur on.
 * Returns either a batch of complete frames (up to @n; the first may be the
 * rest of a frame returned in pieces before), or, when the next frame is
 * still arriving, one view of its newly arrived contiguous bytes (check
 * moq_cache_frame_complete: the view may end the frame). Advances @cur. Returns the count; 0 = nothing new yet;
 * MOQ_ERR_CLOSED (finished and all read), MOQ_ERR_DROPPED (aborted),
 * MOQ_ERR_EVICTED / MOQ_ERR_OLD / MOQ_ERR_LAGGED (group removed: reset the
 * subscriber's stream; views returned before stay valid while referenced),
 * MOQ_ERR_INVAL (@n == 0). Lock-free, any thread.
 */
int moq_cache_read_frames(struct moq_cache_group *g, struct moq_cache_cursor *cur,
                          struct moq_cache_frame *buf, unsigned n);

/* moq_cache_read_frame: moq_cache_read_frames with one entry: returns 1, 0
 * or the same errors. */
int moq_cache_read_frame(struct moq_cache_group *g, struct moq_cache_cursor *cur,
                         struct moq_cache_frame *f);

/*
 * moq_cache_group_iov: (pointer, length) views of published group bytes
 * [@offset, @offset + @len) in @iov (up to @n), for zero-copy writev into a
 * QUIC stream (ngtcp2_vec has the same layout). Stops at what is published.
 * Returns the number of iovecs filled (0 when nothing is published at
 * @offset), or MOQ_ERR_INVAL (@n == 0). Works on removed groups too (the
 * reader's reference keeps the bytes).
 */
int moq_cache_group_iov(const struct moq_cache_group *g, uint64_t offset, uint64_t len,
                        struct iovec *iov, unsigned n);

/*
 * moq_cache_expire: expire groups older than their track's max_latency at
 * time @now (ns) on every track (an idle track's newest group too), drop the
 * tracks left without a group that nobody references (a lookup racing with
 * that returns NULL), then evict over budget and reclaim. Control path; call
 * every few ms to 100 ms. Returns the number of groups removed.
 */
int moq_cache_expire(struct moq_cache *c, uint64_t now);

/*
 * moq_cache_expire_idle: the part of moq_cache_expire that group opens
 * leave undone: an idle track's groups (its newest too) and the old groups
 * of a live track that opened no group for its max latency expire; tracks
 * left without a group that nobody references are dropped (an expired
 * group references its track until it is reclaimed, after the readers'
 * grace period: a later call drops that track); then evict over budget and
 * reclaim. A live track that keeps opening groups expires its
 * old ones at each open (moq_cache_group_open), as without the timer.
 * Control path, for a periodic timer (moq_node_poll: every 100 ms).
 * Returns the number of groups removed.
 */
int moq_cache_expire_idle(struct moq_cache *c, uint64_t now);

/*
 * moq_cache_group_evict: remove group @g now (explicit eviction; readers get
 * MOQ_ERR_EVICTED). The newest group of a track may be evicted this way.
 * Returns 0 or MOQ_ERR_NOTFOUND (removed already).
 */
int moq_cache_group_evict(struct moq_cache_group *g);

#endif /* MOQ_CACHE_CACHE_H */
