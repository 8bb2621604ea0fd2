/* SPDX-License-Identifier: MIT */
/*
 * media.h: the load generator's synthetic media and its verification.
 *
 * Publisher side: a track (video or audio) is a bitrate, a frame rate, a
 * group length in frames and, for video, a keyframe ratio (the first frame of
 * a group is that many times the size of the other frames). Frames are due
 * at fixed intervals; moq_lg_gen_next() says when, moq_lg_gen_frame() writes
 * one. Every payload starts with a MOQ_LG_HDR_LEN-byte header:
 *
 *   off size field
 *     0   4  magic "MQLG"
 *     4   4  CRC-32C of bytes [8, len)   (the rest of the header and the body)
 *     8   2  track id
 *    10   2  flags (MOQ_LG_KEYFRAME)
 *    12   4  frame index in its group
 *    16   8  group sequence
 *    24   8  send timestamp, ns (CLOCK_MONOTONIC of the sending host)
 *    32   4  payload length
 *    36   4  reserved (0)
 *    40   8  frame number in the track (0, 1, 2, ...)
 *
 * all little-endian, then a body of pseudo-random bytes seeded from (track,
 * group, frame). The CRC is computed over bytes as they arrive, so a
 * subscriber verifies frames delivered in chunks without reassembling them.
 *
 * Subscriber side: struct moq_lg_rx follows one subscription (one track):
 * per group stream it checks that frames arrive in order (index 0, 1, ...),
 * carry that group's sequence and the subscription's track, have the length
 * the frame header announced, and match their CRC; it counts groups complete
 * / reset / missing and records delivery latency (receive time - send
 * timestamp) of each frame's last byte into a histogram.
 *
 * Pure C, no EAL, no system calls except in moq_lg_now_ns(); single thread
 * per object. Errors are 0 / counts / negative MOQ_ERR_* (common/moq_err.h).
 */
#ifndef MOQ_LOADGEN_MEDIA_H
#define MOQ_LOADGEN_MEDIA_H

#include <stddef.h>
#include <stdint.h>

#include "moq_err.h"

/* The frame header (see above). */
#define MOQ_LG_HDR_LEN  48u
#define MOQ_LG_MAGIC    0x474c514du /* "MQLG" read as a little-endian u32 */
#define MOQ_LG_KEYFRAME 0x1u
/* Largest frame a track spec may give (issue 29's 12 MiB frames x 2 groups
 * at 8 fps: "video:805306368:fps=8:gop=2:key=1"); two of them fit a group
 * under PROTOCOL.md's 32 MiB cap. */
#define MOQ_LG_FRAME_MAX (16u << 20)
/* Largest keyframe --keyframe-max (struct moq_lg_track_cfg key_max) asks
 * for: frames that span many cache pieces (issue 12), as before. */
#define MOQ_LG_KEYFRAME_MAX (4u << 20)
/* Defaults of the audio track: Opus-like 64 kbps in 20 ms frames, one frame
 * per group (as the open-source MoQ publisher sends audio). */
#define MOQ_LG_AUDIO_BPS      64000u
#define MOQ_LG_AUDIO_FRAME_NS 20000000ull
/* Defaults of a video track: 30 fps, 2 s groups, keyframe 8x a delta frame. */
#define MOQ_LG_VIDEO_FPS      30u
#define MOQ_LG_VIDEO_GOP      60u
#define MOQ_LG_VIDEO_KEYRATIO 8u

/* Histogram: 16 linear sub-buckets per power of two from 2^10 ns (1 us) to
 * 2^40 ns (18 min); relative error below 1/16. */
#define MOQ_LG_HIST_SUB   16u
#define MOQ_LG_HIST_MIN   10u
#define MOQ_LG_HIST_MAX   40u
#define MOQ_LG_HIST_SLOTS ((MOQ_LG_HIST_MAX - MOQ_LG_HIST_MIN + 1u) * MOQ_LG_HIST_SUB + 1u)

enum moq_lg_kind {
	MOQ_LG_VIDEO = 0,
	MOQ_LG_AUDIO = 1,
};

/* One synthetic track. */
struct moq_lg_track_cfg {
	char name[32]; /* track name ("video", "audio") */
	enum moq_lg_kind kind;
	uint16_t id;           /* track id carried in every header */
	uint64_t bitrate_bps;  /* average payload bitrate */
	uint64_t frame_ns;     /* frame interval (1e9 / fps) */
	uint32_t group_frames; /* frames per group (>= 1) */
	uint32_t key_ratio;    /* keyframe size / delta frame size (>= 1) */
	uint32_t key_max;      /* 0, or keyframes of varying size up to this
	                        * (moq_lg_keyframe_size; at most MOQ_LG_KEYFRAME_MAX) */
	uint8_t silent;        /* "video:silent": announced and subscribable, never
	                        * a frame (moq_lg_gen_next is never due; bench-fanout's
	                        * fixed-cost case, issue 23) */
};

/* moq_lg_track_video / _audio: a track config with the defaults above and
 * @bitrate_bps (video), named "video" / "audio". */
struct moq_lg_track_cfg moq_lg_track_video(uint16_t id, uint64_t bitrate_bps);
struct moq_lg_track_cfg moq_lg_track_audio(uint16_t id);

/*
 * moq_lg_track_parse: parse a track spec "video:1M", "video:4Mbps:fps=30:gop=60:key=8",
 * "audio", "audio:64k", "video:silent" (a track that never sends a frame) into @out
 * with @id. Units: plain bits/s, k, M, G
 * (decimal), an optional "bps". Returns 0 or MOQ_ERR_INVAL (unknown kind or
 * key, bad number, a frame that would be smaller than the header or larger
 * than MOQ_LG_FRAME_MAX).
 */
int moq_lg_track_parse(const char *spec, uint16_t id, struct moq_lg_track_cfg *out);

/*
 * moq_lg_frame_size: the payload size of frame @index of a group of @t.
 * Delta frames are D = group bytes / (key_ratio + group_frames - 1), the
 * keyframe key_ratio * D, never below MOQ_LG_HDR_LEN.
 */
uint32_t moq_lg_frame_size(const struct moq_lg_track_cfg *t, uint32_t index);

/*
 * moq_lg_keyframe_size: the keyframe size of group @group of @t. Without
 * key_max (or with key_max at most the regular keyframe size) it is
 * moq_lg_frame_size(@t, 0); with it, a size per group from a PRNG seeded by
 * (track id, group): key_max itself for one group in four, else
 * log-uniform between the regular keyframe size and key_max (moqdp-load
 * --keyframe-max: frames that span many cache pieces, issue 12). Subscribers
 * need not know it: the header carries the length.
 */
uint32_t moq_lg_keyframe_size(const struct moq_lg_track_cfg *t, uint64_t group);

/* The generator of one track. */
struct moq_lg_gen {
	struct moq_lg_track_cfg cfg;
	uint64_t start_ns; /* time of frame 0 */
	uint64_t frames;   /* frames written so far */
	uint64_t group;    /* sequence of the current group */
	uint32_t index;    /* index of the next frame in its group */
	uint64_t bytes;    /* payload bytes written so far */
};

/* moq_lg_gen_init: start @g at time @now with the first group @first_group. */
void moq_lg_gen_init(struct moq_lg_gen *g, const struct moq_lg_track_cfg *t, uint64_t now,
                     uint64_t first_group);

/* moq_lg_gen_next: when the next frame is due (ns, the clock of init). */
uint64_t moq_lg_gen_next(const struct moq_lg_gen *g);

/* Where a generated frame belongs. */
struct moq_lg_frame_info {
	uint64_t group; /* group sequence */
	uint32_t index; /* frame index in the group; 0 opens a new group */
	uint32_t len;   /* payload bytes written */
	int last;       /* the group ends after this frame */
	int64_t pts_us; /* presentation time of the frame, microseconds */
};

/*
 * moq_lg_gen_frame: write the next frame into @buf (@cap bytes) stamped with
 * send time @now_ns and advance. Returns the payload length (also in
 * info->len), or MOQ_ERR_TOO_LARGE when @cap is short (nothing advanced).
 */
int moq_lg_gen_frame(struct moq_lg_gen *g, uint64_t now_ns, uint8_t *buf, size_t cap,
                     struct moq_lg_frame_info *info);

/* moq_lg_crc32c: CRC-32C (Castagnoli) of @len bytes continuing from @crc
 * (start with 0). SSE4.2 when the CPU has it. */
uint32_t moq_lg_crc32c(uint32_t crc, const void *buf, size_t len);

/* --- latency histogram --------------------------------------------------- */

struct moq_lg_hist {
	uint64_t n, sum, min, max;
	uint64_t slot[MOQ_LG_HIST_SLOTS];
};

void moq_lg_hist_reset(struct moq_lg_hist *h);
void moq_lg_hist_add(struct moq_lg_hist *h, uint64_t v);
/* moq_lg_hist_merge: add @src's counts into @dst. */
void moq_lg_hist_merge(struct moq_lg_hist *dst, const struct moq_lg_hist *src);
/* moq_lg_hist_pct: the value at percentile @p (0..100), an upper bound of its
 * bucket clamped to [min, max]; 0 when empty. */
uint64_t moq_lg_hist_pct(const struct moq_lg_hist *h, double p);

/* --- verification -------------------------------------------------------- */

/* Counters, summed over subscriptions by the program. */
struct moq_lg_counts {
	uint64_t frames_ok, bytes_ok;
	uint64_t frames_bad_crc;        /* CRC mismatch */
	uint64_t frames_bad_hdr;        /* wrong magic / track / group / length */
	uint64_t frames_bad_order;      /* frame index not the next one of its group */
	uint64_t frames_partial;        /* frame cut short by a reset or a FIN */
	uint64_t groups_ok;             /* complete (FIN) */
	uint64_t groups_reset;          /* reset by the sender (any code) */
	uint64_t groups_reset_code[32]; /* by moq-lite code (< 32) */
	uint64_t groups_late;           /* began after a newer group had begun */
	uint64_t groups_dup;            /* a sequence seen twice */
	uint64_t groups_missing;        /* never begun, between the first and the newest */
	uint64_t frames_catchup;        /* verified, sent before lat_after: not in the histogram */
	uint64_t groups_untracked;      /* over MOQ_LG_RX_GROUPS in progress: not verified */
	uint64_t frames_untracked;      /* frames of those groups */
};

void moq_lg_counts_add(struct moq_lg_counts *dst, const struct moq_lg_counts *src);
/* moq_lg_counts_errors: frames corrupt, out of order or duplicated groups
 * (what must be 0 in a clean run). */
uint64_t moq_lg_counts_errors(const struct moq_lg_counts *c);

/* Groups a subscription tracks at once (concurrent group streams). */
#define MOQ_LG_RX_GROUPS 64u

/* One group stream in progress. */
struct moq_lg_rx_group {
	uint64_t seq;
	int used;
	uint32_t next_index; /* expected frame index */
	/* the frame being received */
	uint64_t fsize, fgot;
	uint8_t hdr[MOQ_LG_HDR_LEN];
	uint32_t crc;
	int in_frame, bad;
};

/* One subscription's verifier. */
struct moq_lg_rx {
	uint16_t track_id;
	int have_first;
	uint64_t first_seq, newest_seq;
	uint64_t seen; /* groups begun (distinct) */
	/* bitmap of sequences seen in [newest - 1023, newest] */
	uint64_t window[16];
	/* slot of the group last begun or looked up: chunks of one group
	 * stream arrive back to back, so lookups start there */
	uint32_t hint;
	uint32_t nused; /* slots in use */
	struct moq_lg_rx_group g[MOQ_LG_RX_GROUPS];
	struct moq_lg_counts c;
	struct moq_lg_hist *hist; /* borrowed; may be shared; NULL = none */
	/* Frames sent before this time (e.g. the subscription's start: a joining
	 * subscriber first gets the current group from its beginning) are
	 * verified but not put in the latency histogram. */
	uint64_t lat_after;
};

/* moq_lg_rx_init: a verifier for track @track_id recording latency into
 * @hist (borrowed, may be NULL). */
void moq_lg_rx_init(struct moq_lg_rx *r, uint16_t track_id, struct moq_lg_hist *hist);

/* moq_lg_rx_group_begin: group stream @seq began. Returns 0, MOQ_ERR_LIMIT
 * (MOQ_LG_RX_GROUPS in progress; the group is not verified: counted in
 * groups_untracked, its frames in frames_untracked) or MOQ_ERR_EXISTS (a
 * duplicate, counted). */
int moq_lg_rx_group_begin(struct moq_lg_rx *r, uint64_t seq);

/* moq_lg_rx_frame: a frame of @size bytes begins in group @seq. Returns 0 or
 * MOQ_ERR_NOTFOUND (no such group in progress: counted in frames_untracked
 * when the group began untracked, else bad_hdr). */
int moq_lg_rx_frame(struct moq_lg_rx *r, uint64_t seq, uint64_t size);

/*
 * moq_lg_rx_data: @len payload bytes of the current frame of group @seq,
 * received at @now_ns. The frame is checked when its last byte arrives.
 * Returns 1 when a frame completed and verified, 0 when more is needed,
 * MOQ_ERR_DECODE when a completed frame failed a check (counted),
 * MOQ_ERR_NOTFOUND (no such group), MOQ_ERR_INVAL (more bytes than the
 * frame's size; counted bad_hdr).
 */
int moq_lg_rx_data(struct moq_lg_rx *r, uint64_t seq, const uint8_t *data, size_t len,
                   uint64_t now_ns);

/* moq_lg_rx_group_end: group @seq ended: @code -1 = FIN (complete), else the
 * reset code. Returns 0 or MOQ_ERR_NOTFOUND. */
int moq_lg_rx_group_end(struct moq_lg_rx *r, uint64_t seq, int64_t code);

/* moq_lg_rx_finish: count groups never seen between the first and the
 * newest into c.groups_missing (call once, at the end). */
void moq_lg_rx_finish(struct moq_lg_rx *r);

/* --- progress ------------------------------------------------------------ */

/* A snapshot the program reports. */
struct moq_lg_report {
	double t_s; /* seconds since start */
	uint64_t subs_target, subs_connected, subs_ready, subs_closed;
	uint64_t pub_frames, pub_bytes, pub_groups;
	struct moq_lg_counts c;
	const struct moq_lg_hist *hist;
	uint64_t rx_bytes_wire, tx_bytes_wire; /* UDP payload bytes */
	uint64_t rx_pkts, tx_pkts;
};

/*
 * moq_lg_report_json: one JSON object (no newline) for @now, with rates over
 * the interval since @prev (NULL: since start). Returns the length (truncated
 * to @len - 1, always NUL-terminated).
 */
int moq_lg_report_json(const struct moq_lg_report *now, const struct moq_lg_report *prev, char *buf,
                       size_t len);

/* moq_lg_report_line: the live one-line summary. Same return. */
int moq_lg_report_line(const struct moq_lg_report *now, const struct moq_lg_report *prev, char *buf,
                       size_t len);

/* moq_lg_now_ns: CLOCK_MONOTONIC in ns (the clock every timestamp uses). */
uint64_t moq_lg_now_ns(void);

#endif /* MOQ_LOADGEN_MEDIA_H */
