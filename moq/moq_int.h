/* SPDX-License-Identifier: MIT */
/*
 * moq_int.h: private structures of moq/ sessions and routing, shared by the
 * files of moq/ (session.c and the ones beside it, one per concern).
 */
#ifndef MOQ_MOQ_MOQ_INT_H
#define MOQ_MOQ_MOQ_INT_H

#include "moq.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "lite06_codec.h"
#include "moq_heapacct.h"

/* Bytes kept for the stream's own outgoing data (control messages and frame
 * headers) until the peer acknowledges them (quic.h: no copies). */
#define TXCHUNK_DATA 1000u

#define POOL_MAX     64 /* spare tx chunks, streams and group streams kept per session */

struct txchunk {
	struct txchunk *next;
	uint32_t len, cap;
	uint8_t *data; /* points at the bytes after the struct */
};

struct txbuf {
	struct txchunk *head, *tail;
	uint64_t head_off; /* stream offset of head's first byte (control streams) */
};

/* Stream kinds (PROTOCOL.md, Streams) from this side's point of view. */
enum skind {
	SK_NEW = 0,   /* peer-opened, type not read yet */
	SK_SETUP_IN,  /* uni 0x1 from the peer */
	SK_SETUP_OUT, /* uni 0x1 we opened */
	SK_ANN_IN,    /* the peer asks us for announces */
	SK_ANN_OUT,   /* we ask the peer */
	SK_SUB_IN,    /* the peer subscribes to us */
	SK_SUB_OUT,   /* we subscribe to the peer */
	SK_TRACK_IN,
	SK_TRACK_OUT,
	SK_FETCH_IN,
	SK_FETCH_OUT, /* our FETCH: frames come back (a group stream without header) */
	SK_PROBE_IN,
	SK_GOAWAY_IN,
	SK_GOAWAY_OUT,
	SK_GROUP_IN,  /* uni 0x0 from the peer */
	SK_GROUP_OUT, /* uni 0x0 we send (also a fetch reply) */
	SK_RAW,       /* moq_session_write_raw */
	SK_IGNORE,    /* refused; input dropped */
};

struct moq_session;
struct mstream;
struct upstream;

/* lite-06 route costs (draft-06 7.6): what the route was advertised with
 * plus the announcing peer's SETUP Cost (saturating); unset on routes
 * heard over 03/04/05, which carry none. */
struct rcost {
	bool set;
	bool drain; /* heard on a session that sent GOAWAY: priced at the
	             * ceiling, ranked below every other route (7.18) */
	uint64_t warm, cold;
};

/* Another route to a broadcast (AUTH-CLUSTER.md, Broadcast ownership): an
 * older publisher the newer one replaced (a hidden backup), or the same
 * original publisher over another session (a standby). */
struct bsrc {
	struct bsrc *next; /* newest first */
	struct moq_session *pub;
	/* in @pub's list of backup routes (bcast_session_gone, ann_out_gone:
	 * a session's routes without a walk of the origin table) */
	struct bsrc *snext, **spprev;
	struct bcast *bc;
	uint32_t nhops;
	uint64_t hops[MOQ_MAX_HOPS];
	struct rcost cost;
};

/* The prefix index (issue 22: an announce request walked every broadcast
 * twice): every path prefix of a broadcast on segment boundaries, the path
 * itself included, lists the broadcasts under it; a request for prefix P
 * visits P's list. "" is the whole table (the node's list). */
struct pfx {
	struct pfx *hnext; /* in the node's ptab bucket */
	struct plink *head;
	uint64_t hash;
	size_t len;
	char path[]; /* NUL-terminated */
};

/* One broadcast in one prefix's list. */
struct plink {
	struct plink *next, **pprev;
	struct pfx *px;
	struct bcast *bc;
};

/* The origin table: one announced broadcast, in the node's hash table
 * (hnext) and list (next / prev), and while it lingers in the node's linger
 * queue (lnext / lprev, oldest deadline first). */
struct bcast {
	struct bcast *next, *prev;
	struct bcast *hnext;
	struct bcast *lnext, *lprev;
	char *path;
	size_t len;
	uint64_t hash;
	struct moq_session *pub;       /* NULL: local, lingering or another worker's
				  * (set with bcast_set_pub) */
	struct bcast *pnext, **ppprev; /* in @pub's list of live routes */
	uint32_t owner;                /* hub: 1 + id of the node that owns it; 0 = us */
	int local;
	uint64_t timescale;    /* local broadcasts */
	uint64_t linger_until; /* nonzero: the publisher is gone */
	uint8_t lost;          /* hub: the owner lost it (HUB_ANN_LOST), not ENDED */
	struct bsrc *backups;  /* other routes, newest first */
	struct plink *pl;      /* its places in the prefix index (npl of them) */
	uint32_t npl;
	uint32_t nhops;
	uint64_t hops[MOQ_MAX_HOPS];
	struct rcost cost; /* the live route's */
};

/* A subscription the peer made on us (we publish to it). */
struct dsub {
	/* what a fanout visit reads, in the first cache line (it read three:
	 * DESIGN.md, "Misses per packet") */
	struct dsub *next;             /* in the session */
	struct moq_cache_track *track; /* reader reference */
	struct upstream *up;           /* NULL: local broadcast */
	struct moq_session *s;
	uint64_t last_version;
	uint64_t next_seq;
	/* in the upstream: in this line beside @s, so a track's version
	 * change marks each subscriber's session from one line of it
	 * (up_touch), not two */
	struct dsub *unext;
	uint32_t n_gouts;
	uint8_t started, ending, done;
	uint8_t counted; /* holds one unit of cfg.max_subscribers */
	struct moq_sub_params p;
	uint64_t lat_ns;     /* its max_latency when below the track's (dsub_params), else 0 */
	struct dsub **uprev; /* the link pointing at it there: O(1) leave (a track's
	                      * thousands of subscribers leaving one by one walked
	                      * the list each: quadratic) */
	struct mstream *st;
	uint64_t id;
	char *path; /* the broadcast, normalised */
	size_t plen;
	uint64_t start_seq;
	int64_t end_code; /* ending: -1 END, else reset code */
	/* lite-06: the first frame of group p.start, the end frame (index + 1,
	 * 0 = none) of group p.end */
	uint64_t frame_start, frame_end;
	uint8_t by_age; /* lite-06: p.start is a floor, the first group by Max Age */
	uint32_t ts_hz; /* lite-06: the track's timescale once known (Max Age on
	                 * group timestamps), 0 = not known: arrival times */
};

/* A subscription we made on the peer. */
struct usub {
	struct usub *next;
	struct moq_session *s;
	struct mstream *st;
	uint64_t id;
	struct upstream *up; /* relay; NULL for the application's */
	char *bcast;
	size_t blen;
	char *track;
	size_t tlen;
	uint8_t closed;
	uint8_t got_group; /* a group of it was accepted into the cache */
	uint8_t got_start; /* the publisher said where it starts (up_reply) */
};

/* The relay's one upstream subscription per track. */
struct upstream {
	struct upstream *next;
	struct moq_node *n;
	char *path;
	size_t plen;
	char *track;
	size_t tlen;
	struct moq_cache_track *ct; /* writer reference */
	struct usub *us;            /* NULL while no publisher */
	struct dsub *dsubs;
	uint32_t ndsubs;
	struct moq_subscribe_update agg;
	uint8_t ended;
	uint64_t end_seq;      /* END from upstream: first group never coming */
	uint8_t end_wait;      /* ended, groups below the end may still arrive (up_end) */
	uint64_t end_deadline; /* node clock: end_wait stops at the latest then */
	uint32_t remote_owner; /* hub: 1 + id of the node subscribing for us */
	uint32_t nremote;      /* hub: other nodes subscribed through us */
	uint32_t nlocal;       /* moq_node_track_hold: local subscribers (/fetch) */
	uint64_t last_version; /* the cache track's version at the last poll */
	uint8_t counted;       /* holds one unit of cfg.max_tracks */
	uint8_t dirty;         /* on the node's dirty_ups: aggregate at the next poll */
	uint8_t agg_set;       /* agg is what the current subscribers ask */
	struct upstream *dnext;
	uint64_t hold_until; /* nonzero: no subscriber left; closes then (cfg.up_hold_ns) */
	uint8_t dgram;       /* a group of it came as a datagram (dgram.c) */
	/* nonzero: its broadcast's route was lost and the broadcast ended;
	 * its subscribers wait for a new route until then (up_orphan) */
	uint64_t orphan_until;
};

/* Hub messages between the nodes of one relay (control path only). */
enum {
	HUB_ANN_ACTIVE = 1, /* a broadcast we own is active (hops) */
	HUB_ANN_ENDED,      /* a broadcast we owned ended */
	HUB_ANN_LOST,       /* ... ended after its route was lost (up_orphan) */
	HUB_SUB,            /* subscribe a track of a broadcast you own for me */
	HUB_UNSUB,          /* I no longer need it */
	HUB_TRACK,          /* TRACK for a broadcast you own, please */
	HUB_TRACK_INFO,     /* the answer (ti) */
};

struct hub_msg {
	struct hub_msg *next;
	uint8_t kind;
	uint32_t from;
	char *path, *track;
	size_t plen, tlen;
	uint32_t nhops;
	uint64_t hops[MOQ_MAX_HOPS];
	struct moq_track_info ti; /* HUB_TRACK_INFO */
};

struct moq_hub {
	uint32_t max;
	uint64_t origin;
	_Atomic uint64_t nsubs;   /* downstream subscriptions of every node */
	_Atomic uint64_t ntracks; /* counted upstream tracks of every node */
	atomic_flag lock;
	struct moq_node **nodes;
	struct hub_box *box;
	uint64_t hop_key[2]; /* the nodes' client_hop key (random, relay-wide) */
};

/* A TRACK_INFO answer the relay learned (or is asking for). */
struct tinfo {
	struct tinfo *next;
	char *path;
	size_t plen;
	char *track;
	size_t tlen;
	uint8_t have, asked;
	struct moq_track_info ti;
	uint64_t hub_wait; /* hub node ids (< 64) waiting for the answer */
};

/* A group (or fetch reply) stream we send. */
struct fgrp;

#define GOUT_HB 39u /* header bytes inside struct gout (168 bytes in all) */

struct gout {
	struct gout *next;
	struct gout **pprev; /* the link pointing at it, in whichever list: O(1) unlink */
	struct moq_session *s;
	/* on gfin: in its group's list of the node's FIN registry (fanout.c) */
	struct fgrp *fg;
	struct gout *fnext, **fpprev;
	struct mstream *st;
	struct dsub *d; /* NULL for a fetch reply */
	/* the second line: what a write and an acknowledgement read */
	struct moq_cache_group *g;
	struct moq_cache_cursor cur;
	uint64_t seq;
	uint8_t priority;
	uint8_t ordered; /* its subscriber asked for groups in order */
	uint8_t fin, reset, fetch;
	uint8_t done;   /* off the live list: on the session's gfin or gdone */
	uint8_t on_fin; /* on gfin: FIN sent, not all acknowledged, not reset */
	uint32_t heap_usable; /* as mstream's */
	uint64_t written, acked;
	int64_t prev_ts;
	uint64_t frame_end; /* lite-06: FIN before this frame (0 = the group's end) */
	/* The stream's own bytes (GROUP header, frame headers) are built here
	 * while they fit, so an audio group's stream needs no send chunk (a
	 * 1 KB txchunk for ~6 bytes); QUIC references them until acknowledged,
	 * and the record lives until the stream is freed (issue 23, item 4). */
	uint8_t hb_len;
	uint8_t hb[GOUT_HB];
};

/* A group stream we receive. */
struct gin {
	struct moq_group_rx rx;
	struct usub *us;
	uint64_t sub_id, seq;
	struct moq_cache_group *g; /* relay: the group being written */
	uint8_t have_hdr, refused, fetch;
};

struct mstream {
	/* what an acknowledgement and the stream's close read, in the first
	 * cache line (DESIGN.md, "Misses per packet") */
	int64_t sid;
	uint8_t kind;
	uint8_t local;
	uint8_t fin_sent, reset_sent, rx_fin, got_first;
	uint8_t fetch_counted; /* FETCH_IN: holds one unit of cfg.max_fetches */
	struct moq_varint_rx type_rx;
	/* its malloc_usable_size, read once when allocated: the pool's take
	 * and put move it between heap kinds without reading the allocator's
	 * headers (a cache miss each at thousands of sessions; callgrind with a
	 * 1 MiB last-level cache, bench_moq_fanout --subs 1000: 2% of the
	 * relay's misses). Not the size asked for: glibc may hand out a chunk
	 * larger by up to 32 bytes */
	uint32_t heap_usable;
	/* what the stream belongs to */
	struct gout *go;
	struct dsub *d;
	struct tinfo *ti; /* TRACK_IN waiting / TRACK_OUT asking */
	/* announce streams */
	char *prefix;
	struct mstream *pool_next; /* in the session's spare list */
	struct txbuf tx;
	uint64_t tx_off; /* bytes written */
	uint8_t *rx;
	uint32_t rx_len, rx_cap;
	struct usub *us;
	struct gin *gi;
	struct ann6 *a6; /* lite-06 announce streams: implicit ids (lite06.c) */
	size_t plen;
	uint64_t exclude_hop;
	uint64_t ann_origin; /* ANN_OUT: the peer's hop id (ANNOUNCE_OK) */
	/* ANN_IN with a prefix: in the node's list of announce requests */
	struct mstream *ann_next, *ann_prev;
	struct moq_session *ann_s;
};

/* A session's streams by id: key and value side by side, so a lookup of a
 * cold session's map is one cache miss in the table, not two (callgrind,
 * 1 MiB last-level cache, bench_moq_fanout --subs 1000: smap_get was 3% of
 * the relay's misses, a lookup per stream acknowledged). */
struct smap_ent {
	int64_t key;
	struct mstream *val; /* NULL: empty */
};

struct smap {
	struct smap_ent *ents;
	uint32_t cap, used;
};

struct moq_session {
	/*
	 * What a fanout visit, an acknowledgement and a stream's open and
	 * close read, first and together (~3.3 cache lines; spread over the
	 * record's 7.5 they were ~6. callgrind with a 1 MiB last-level cache,
	 * bench_moq_fanout --subs 1000: DESIGN.md, "Misses per packet").
	 */
	/* node's pending list: in the line of @queued, so sess_mark writes
	 * one line of a session (up_touch marks a track's thousands) */
	struct moq_session *pnext;
	struct moq_node *n;
	struct moq_quic_conn *conn; /* raw QUIC; NULL on a binding */
	void *tp;                   /* the transport while it is up: conn, or the binding's */
	const struct moq_binding_ops *bops; /* NULL: raw QUIC */
	/* an IETF moq-transport session's shell: its input goes to
	 * ietf_session.c, which runs a lite session of its own */
	struct ietf_sess *ietf;
	uint8_t ready_due;  /* binding client: session_ready at the next poll */
	uint8_t tp_closing; /* binding: close called, moq_binding_closed due */
	uint8_t server, ready, setup_in, goaway_in, closing, freed;
	uint8_t walk_all;     /* the next fanout visit walks every live stream */
	uint8_t blocked;      /* fanout stopped at the budget; an ack wakes it */
	uint8_t budget_fresh; /* budget includes this visit's cwnd */
	uint8_t queued;       /* in the node's pending (or work) list: sess_mark */
	uint8_t watched;      /* in the node's watch list: has local subscriptions */
	uint8_t retry;        /* a group stream could not be opened: try again */
	uint8_t room_wait;    /* a group waits for a stream slot (gout_room): st_free marks */
	struct smap streams;
	struct dsub *dsubs;
	struct gout *gouts; /* streams still being written (may hold done ones) */
	/* FIN sent or reset, waiting for acknowledgements and for QUIC to close
	 * the stream (seconds with a slow subscriber, and audio opens a stream
	 * per frame): kept off @gouts so fanout visits only streams it writes.
	 * A FIN'd one whose group went stale is reset from the FIN_CHECK_NS
	 * pass (moq_node_poll). */
	struct gout *gdone;
	/* FIN sent and not yet all acknowledged (nor reset): the ones the
	 * FIN_CHECK_NS pass looks at. The others wait on gdone for QUIC to
	 * close them; with slow subscribers and a stream per audio frame that
	 * is hundreds per session, and walking them every 100 ms over 5,000
	 * sessions was ~1/3 of a relay worker. */
	struct gout *gfin;
	struct moq_session *next;  /* node's list of all sessions */
	struct moq_session *wnext; /* node's watch list */
	uint64_t unacked;          /* fanout bytes queued and not acknowledged */
	uint64_t budget;           /* this poll's limit for unacked */
	struct txchunk *pool;
	struct mstream *st_pool;
	struct gout *go_pool;
	enum moq_version v;
	int depth;          /* callback nesting; closes are deferred to depth 0 */
	uint32_t nlat;      /* dsubs with their own max latency (dsub_params) */
	uint32_t fin_unreg; /* on gfin but not in the node's registry (no memory) */
	uint32_t ngouts;    /* both lists: each holds a QUIC stream */
	uint32_t pool_len;
	uint32_t st_pool_len, go_pool_len;
	/* the fewest spares each pool held since the last trim (pool_trim):
	 * spares no use took for a whole period go back to libc */
	uint32_t pool_low, st_pool_low, go_pool_low;
	/* the rest: set-up, announces, routes, auth */
	uint8_t admitted, admit_refused, admit_goaway; /* moq_node_admit: a SUBSCRIBE
							* was accepted / refused for
							* capacity; GOAWAY sent */
	uint8_t asked_announces;
	uint8_t role; /* client: enum moq_role of this session */
	char *url;    /* binding: the request target (root, token) */
	char *root;   /* server: the client's SETUP Path, normalised (roots the session) */
	size_t rootlen;
	uint64_t peer_origin, peer_role;
	/* lite-06 SETUP Cost (1 when absent) */
	uint64_t peer_cost;
	char *path; /* client SETUP Path */
	uint32_t ndsubs;
	struct usub *usubs;
	uint32_t nusubs, nann_in;
	uint32_t nbcasts;           /* broadcast routes it holds (live or backup):
			   * cfg.max_session_broadcasts */
	struct bcast *live_routes;  /* the broadcasts it is the live route of */
	struct bsrc *backup_routes; /* its backup routes */
	uint32_t nfetch;            /* FETCH replies in flight: cfg.max_fetches */
	uint64_t next_sub_id;
	uint64_t close_code;
	void *user;
	struct ietf_sess *ietf_owner; /* the lite session behind an IETF shell: its owner */
	/* cfg.auth (access.c): what the token grants, once authorised */
	struct moq_auth_grant *grant;
	uint8_t auth_done;      /* authorisation ran (grant set, or closing) */
	uint8_t link_grant;     /* its token is a cluster link's (access_session) */
	uint64_t auth_deadline; /* node clock: the token's exp; 0 = none */
	/* --auth-url (auth/authurl.h; access.c): the session's lifecycle at
	 * the auth server; while @auth_pending its requests wait unparsed */
	struct moq_auth_req *auth_req;
	uint8_t auth_pending;
	uint8_t auth_peer;         /* the grant's `peer`: a cluster peer (link_grant) */
	uint64_t auth_reval_at;    /* node clock: the next revalidate; 0 = none */
	uint64_t auth_admitted;    /* node clock at admission */
	uint64_t auth_tx, auth_rx; /* bytes at close, for the end */
	struct moq_session *auth_snext, **auth_sprev; /* n->auth_sessions */
};

struct moq_node {
	struct moq_node_cfg cfg;
	struct moq_session *sessions;
	/* Sessions fanout visits at the next poll (sess_mark), and the ones
	 * with subscriptions to local broadcasts, whose tracks are watched per
	 * session (relayed tracks are watched once per node, in ups). */
	struct moq_session *pending;
	struct moq_session *work; /* the pending list moq_node_poll is visiting */
	struct moq_session *watch;
	/* upstreams whose subscribers left or changed their parameters: their
	 * aggregate is recomputed once, at the next poll (up_changed) */
	struct upstream *dirty_ups;
	uint64_t last_fin_check; /* last pass over FIN'd streams (FIN_CHECK_NS) */
	uint64_t last_pool_trim; /* last trim of the sessions' spare pools (POOL_TRIM_NS) */
	/* The FIN registry: every cache group with streams on some session's
	 * gfin, each with the list of them (chained hash on the group's
	 * address). The FIN_CHECK_NS pass asks each group's status once and
	 * walks only a stale group's streams, not every session's gfin. */
	struct fgrp **fg_tab;
	uint32_t fg_cap, fg_n;
	struct fgrp *fg_spare;
	struct bcast *bcasts; /* every broadcast, in a list ... */
	struct bcast **btab;  /* ... and hashed by path (bmask + 1 buckets) */
	uint32_t bmask;
	struct pfx **ptab; /* the prefix index, hashed by prefix (pmask + 1 buckets) */
	uint32_t pmask, npfx;
	struct bcast *linger_head, *linger_tail; /* lingering, oldest deadline first */
	struct mstream *ann_in;                  /* every session's announce requests (ANN_IN) */
	struct upstream *ups;
	uint64_t hold_next; /* earliest hold_until of the ups (0 = none held) */
	struct tinfo *tinfos;
	uint32_t ntinfos;
	uint64_t now;
	uint64_t last_expire;
	struct moq_node_stats st;
	struct moq_hub *hub;
	uint32_t hub_id;
	uint64_t auth_next; /* earliest session auth_deadline (access_expire), 0 = none */
	struct moq_session *auth_sessions; /* --auth-url: sessions with an auth_req */
	uint64_t auth_poll_at;             /* node clock: next access_url_poll */
	/* relay-added latency (moq.h): arrivals of frames written since the
	 * last moq_node_latency_commit, a table hashed by arrival (a frame
	 * sent to several subscribers takes one slot with a count; count 0 =
	 * free), the slots in use in lat_used[0..lat_npend), the last slot hit,
	 * and the histogram of what was committed */
	uint32_t lat_npend, lat_last;
	struct lat_pend {
		uint64_t arrival;
		uint64_t count;
	} lat_pend[MOQ_LAT_PENDING];
	uint16_t lat_used[MOQ_LAT_PENDING];
	struct moq_lat_hist lat;
	int64_t admit_credit; /* moq_node_admit; MOQ_ADMIT_OPEN = no limit */
	uint64_t hop_key[2];  /* client_hop's key: the hub's, or random */
	/* local tracks whose single-frame groups go out as datagrams
	 * (moq_node_track_datagrams; dgram.c) */
	struct moq_cache_track *dgram_tracks[MOQ_DGRAM_TRACKS];
	uint32_t ndgram_tracks;
};

/* latency.c, relay-added latency: note the arrivals of the complete frames
 * among @f[0..@cnt) just written to a subscriber's stream. */
void moq_lat_record(struct moq_node *n, const struct moq_cache_frame *f, unsigned cnt);

/* The parts of moq/ share these (each is documented at its definition). */

/* stream.c: the stream map, tx buffers, streams */
struct mstream *smap_get(const struct smap *m, int64_t k);
void smap_del(struct smap *m, int64_t k);
/* Free half the spares @s's pools kept unused since the last call (stream.c). */
void pool_trim(struct moq_session *s);
void tx_free(struct moq_session *s, struct txbuf *tb);
void tx_release_acked(struct moq_session *s, struct txbuf *tb, uint64_t acked);
void st_release(struct moq_session *s, struct mstream *st);
void gout_release(struct moq_session *s, struct gout *go);
struct mstream *st_new(struct moq_session *s, int64_t sid, uint8_t kind, int local);
struct mstream *st_open(struct moq_session *s, int bidi, uint8_t kind, int *err);
int st_write(struct moq_session *s, struct mstream *st, const void *data, size_t len, int fin);
int st_send(struct moq_session *s, struct mstream *st, int64_t stype, const struct moq_msg *m,
            int fin);
void st_reset(struct moq_session *s, struct mstream *st, uint64_t code);
void st_refuse(struct moq_session *s, struct mstream *st, uint64_t code);

/* origin.c: paths, the origin table */
char *memdup0(const void *p, size_t len);
char *path_dup(const char *p, size_t len, size_t *out_len);
char *path_join(const char *a, size_t al, const char *b, size_t bl, size_t *out_len);
int path_norm_join(const char *base, size_t bl, const char *p, size_t len, char **out,
                   size_t *out_len);
bool hops_have(const uint64_t *hops, uint32_t n, uint64_t h);
int hops_chain(uint64_t *dst, const uint64_t *src, uint32_t nh, bool add, uint64_t extra);
uint32_t hops_client(const struct moq_node *n, uint64_t *hops, uint32_t nh);
bool names_fit(struct moq_node *n, const char *p, size_t plen, size_t tlen);
int req_path(struct moq_session *s, struct mstream *st, const struct moq_str *b, size_t tlen,
             char **full, size_t *flen);
struct bcast *bcast_find(struct moq_node *n, const char *p, size_t len);
struct plink *bcast_under(struct moq_node *n, const char *p, size_t len);
struct bcast *bcast_add(struct moq_node *n, const char *p, size_t len);
void bcast_unlink(struct moq_node *n, struct bcast *bc);
void bcast_end(struct moq_node *n, struct bcast *bc);
void bcast_set_pub(struct bcast *bc, struct moq_session *s);
void bcast_linger(struct moq_node *n, struct bcast *bc);
void bcast_unlinger(struct moq_node *n, struct bcast *bc);
void bcast_linger_expire(struct moq_node *n, uint64_t now);
uint64_t bcast_offer(struct moq_node *n, struct moq_session *s, const char *p, size_t len,
                     const uint64_t *hops, uint32_t nh, const struct rcost *rc);
void bcast_withdraw(struct moq_node *n, struct bcast *bc, struct moq_session *s, bool abrupt);
bool bcast_has_route(const struct bcast *bc, const struct moq_session *s);
void bcast_session_gone(struct moq_node *n, struct moq_session *s);
void bcast_session_drain(struct moq_node *n, struct moq_session *s);

/* announce.c: announce streams */
#define ANN_RESTART 2 /* ann_notify: @bc is a new broadcast under the same path */
void ann_notify(struct moq_node *n, struct bcast *bc, int active);
void ann_reroute(struct moq_node *n, struct bcast *bc, const struct moq_session *old_pub,
                 const uint64_t *old_hops, uint32_t old_nh, bool renew);
void ann_in_stop(struct moq_session *s, struct mstream *st);
int ann_in_start(struct moq_session *s, struct mstream *st, const struct moq_announce_req *r);
int on_announce(struct moq_session *s, struct mstream *st, const struct moq_announce *a);
/* lite06.c: lite-06 announces (implicit ids). lite06_ann_out fills @m's
 * kind6 / id6 / costs before it is sent on ANN_IN @st: 1 send it, 0 send
 * nothing (an END never started, over the bound), < 0 an error.
 * lite06_on_announce resolves a received one and calls on_announce; it
 * returns a session close code or 0. lite06_st_free frees @st's map. */
int lite06_ann_out(struct moq_session *s, struct mstream *st, struct moq_msg *m);
uint64_t lite06_on_announce(struct moq_session *s, struct mstream *st, struct moq_announce *a);
void lite06_st_free(struct mstream *st);
void ann_out_gone(struct moq_session *s, struct mstream *st);
int ann_request(struct moq_session *s, const char *prefix, size_t len, int *err);

/* upstream.c: the relay's upstream subscriptions */
struct moq_str wire_path(const struct moq_session *s, const char *p, size_t len);
struct usub *usub_open(struct moq_session *s, const char *b, size_t bl, const char *t, size_t tl,
                       const struct moq_subscribe_update *p, int *err);
void usub_close(struct usub *us);
void up_open(struct upstream *up, struct moq_session *pub);
void up_changed(struct upstream *up);
void up_added(struct upstream *up, const struct dsub *d);
void ups_settle(struct moq_node *n);
void up_free(struct upstream *up);
void up_end(struct upstream *up, uint64_t end);
void up_end_check(struct upstream *up);
struct upstream *up_get(struct moq_node *n, const char *p, size_t pl, const char *t, size_t tl,
                        int *limited);
struct upstream *up_find(struct moq_node *n, const char *p, size_t pl, const char *t, size_t tl);

/* subscribe.c: the peer's subscriptions */
void dsub_cancel(struct moq_session *s, struct dsub *d);
void dsub_params(struct dsub *d);
void dsub_free(struct moq_session *s, struct dsub *d);
void on_subscribe(struct moq_session *s, struct mstream *st, const struct moq_subscribe *m);
void on_subscribe_update(struct moq_session *s, struct mstream *st,
                         const struct moq_subscribe_update *m);

/* track.c: TRACK / TRACK_INFO */
void tinfo_free(struct tinfo *ti);
struct tinfo *tinfo_new(const char *p, size_t pl, const char *t, size_t tl);
struct tinfo *tinfo_get(struct moq_node *n, const char *p, size_t pl, const char *t, size_t tl);
struct tinfo *tinfo_find(struct moq_node *n, const char *p, size_t pl, const char *t, size_t tl);
void dsub_timescale(struct moq_node *n, struct bcast *bc, struct dsub *d);
void tinfo_drop_path(struct moq_node *n, const char *p, size_t pl);
void tinfo_learned(struct moq_node *n, struct tinfo *ti, const struct moq_track_info *info);
void tinfo_ask(struct moq_node *n, struct bcast *bc, struct tinfo *ti);
void on_track(struct moq_session *s, struct mstream *st, const struct moq_track *t);
void on_track_info(struct moq_session *s, struct mstream *st, const struct moq_track_info *info);
extern const struct moq_track_info default_info;

/* fanout.c: group streams out */
void gout_reset(struct moq_session *s, struct gout *go, uint64_t code);
uint64_t err_code(int err);
bool gout_too_old(const struct moq_session *s, const struct gout *go);
void gout_resort(struct moq_session *s);
struct gout *gout_new(struct moq_session *s, struct mstream *st, struct moq_cache_group *g,
                      uint8_t priority);

/* ingest.c: group streams in */
int up_restart(struct upstream *up);
bool up_orphan(struct upstream *up, uint64_t lost_at);
void up_orphan_expire(struct upstream *up);
void ups_reattach(struct moq_node *n, struct bcast *bc);
bool dsub_retrack(struct dsub *d);
void up_reply(struct usub *us, const struct moq_subscribe_reply *r);
struct usub *usub_find(struct moq_session *s, uint64_t id);
void gin_end(struct moq_session *s, struct gin *gi, int64_t code);
void gin_data(struct moq_session *s, struct mstream *st, const uint8_t *p, size_t len);

/* control.c: control stream input */
void stream_data(struct moq_session *s, int64_t sid, const uint8_t *data, size_t len, int fin);

/* session.c: sessions */
struct moq_session *sess_new(struct moq_node *n, struct moq_quic_conn *c, int server);
void sess_free(struct moq_session *s, uint64_t code, int local);
void sess_fail(struct moq_session *s, uint64_t code);

/* access.c: cfg.auth, what each server session may do */
int access_session(struct moq_session *s, const struct moq_str *setup_path);
/* What an --auth-url request says of @s (access.c): its transport ("quic",
 * "websocket", ...), and its remote, local and server name (each "" when
 * unknown; @acap, @scap bytes) */
const char *moq_session_transport(const struct moq_session *s);
void moq_session_peer(const struct moq_session *s, char *remote, char *local, size_t acap,
                      char *sni, size_t scap);
bool access_allows(struct moq_session *s, int put, const char *p, size_t len);
bool access_overlaps(struct moq_session *s, int put, const char *p, size_t len);
bool access_peer(struct moq_session *s);
bool access_peer_allows(struct moq_session *s, int put, const char *p, size_t len);
void access_ann_request(struct moq_session *s);
void access_expire(struct moq_node *n, uint64_t now);
void access_url_poll(struct moq_node *n, uint64_t now);
void access_url_end(struct moq_session *s, uint64_t code);
void ctl_admitted(struct moq_session *s);

/* hub.c: the hub between workers, relay-wide bounds */
bool bound_take(struct moq_node *n, int tracks);
void bound_put(struct moq_node *n, int tracks);
uint64_t hop_id_random(const void *salt);
int hub_register(struct moq_hub *h, struct moq_node *n);
void hub_unregister(struct moq_hub *h, uint32_t id);
struct hub_msg *hub_msg_new(struct moq_node *n, int kind, const char *p, size_t pl, const char *t,
                            size_t tl);
void hub_post(struct moq_hub *h, uint32_t to, struct hub_msg *m);
void hub_send(struct moq_node *n, uint32_t to1, int kind, const char *p, size_t pl, const char *t,
              size_t tl);
void hub_announce(struct moq_node *n, struct bcast *bc, int active);
void hub_drain(struct moq_node *n);
uint64_t hub_dropped(const struct moq_node *n);

/* Intrusive lists with a back link to the link pointing at each element
 * (<sys/queue.h>'s LIST scheme, on the fields named): O(1) unlink.
 * PLINK_AT links @x in before *@pp (at the head when @pp is the head). */
#define PLINK_AT(pp, x, next, pprev)                                                               \
	do {                                                                                       \
		(x)->next = *(pp);                                                                 \
		if ((x)->next != NULL)                                                             \
			(x)->next->pprev = &(x)->next;                                             \
		*(pp) = (x);                                                                       \
		(x)->pprev = (pp);                                                                 \
	} while (0)
#define PLINK_UNLINK(x, next, pprev)                                                               \
	do {                                                                                       \
		*(x)->pprev = (x)->next;                                                           \
		if ((x)->next != NULL)                                                             \
			(x)->next->pprev = (x)->pprev;                                             \
		(x)->next = NULL;                                                                  \
		(x)->pprev = NULL;                                                                 \
	} while (0)

/* The session's gout lists (gouts, gfin, gdone): a stream that closes
 * leaves its list in O(1) (stream closes come oldest first, from the far
 * end of a LIFO list). */
static inline void gout_unlink(struct gout *go)
{
	PLINK_UNLINK(go, next, pprev);
}

static inline void gout_link_at(struct gout **pp, struct gout *go)
{
	PLINK_AT(pp, go, next, pprev);
}

/* fanout.c: gfin membership (the session's list and the node's FIN registry) */
void gfin_del(struct gout *go);
void fg_fini(struct moq_node *n);

/* A stream off the live list whose FIN is all acknowledged, or that was
 * reset, leaves gfin for gdone. */
static inline void gout_fin_settled(struct moq_session *s, struct gout *go)
{
	if (go->on_fin && (go->reset || go->acked >= go->written)) {
		gfin_del(go);
		gout_link_at(&s->gdone, go);
	}
}

/* The part of a session the fanout walks touch first (flags, lists, budget:
 * the struct's first ~300 bytes), prefetched one session ahead in those
 * walks: thousands of sessions do not stay in cache between polls. */
static inline void sess_prefetch(const struct moq_session *s)
{
	for (size_t off = 0; off < sizeof(*s) && off < 320; off += 64)
		__builtin_prefetch((const char *)s + off);
}

/* What a visit of @s reads next once @s's own lines are in (sess_prefetch
 * ran a step earlier): its first subscription, its first group stream and
 * the pooled records a new group stream takes. */
static inline void sess_prefetch_deps(const struct moq_session *s)
{
	if (s->dsubs != NULL) {
		__builtin_prefetch(s->dsubs);
		__builtin_prefetch((const char *)s->dsubs + 64);
	}
	if (s->gouts != NULL)
		__builtin_prefetch(s->gouts);
	if (s->go_pool != NULL)
		__builtin_prefetch(s->go_pool);
	if (s->st_pool != NULL)
		__builtin_prefetch(s->st_pool);
}

/* sess_mark: @s has fanout work (a track it reads moved, an ack freed budget,
 * a stream or request changed, a deferred close): moq_node_poll visits it at
 * its next call. Sessions with nothing new are not visited at all. */
static inline void sess_mark(struct moq_session *s)
{
	if (!s->queued && !s->freed) {
		s->queued = 1;
		s->pnext = s->n->pending;
		s->n->pending = s;
	}
}

/* Cache status of a group that went stale: expired, evicted or pushed out
 * of the window; its stream is reset with err_code(). */
static inline bool group_stale(int stc)
{
	return stc == MOQ_ERR_EVICTED || stc == MOQ_ERR_OLD || stc == MOQ_ERR_LAGGED;
}

/* tx_reserve: @len contiguous bytes appended to @tb that stay at their
 * address until the stream is freed (ngtcp2 references them until acked). */
static inline uint8_t *tx_reserve(struct moq_session *s, struct txbuf *tb, size_t len)
{
	struct txchunk *c = tb->tail;
	uint8_t *p;

	if (!c || c->cap - c->len < len) {
		if (len <= TXCHUNK_DATA && s->pool) {
			c = s->pool;
			s->pool = c->next;
			moq_heap_move(MOQ_HEAP_MOQ_SPARE, MOQ_HEAP_TXCHUNK, c);
			if (--s->pool_len < s->pool_low)
				s->pool_low = s->pool_len;
		} else {
			size_t cap = len > TXCHUNK_DATA ? len : TXCHUNK_DATA;
			c = moq_heap_malloc(MOQ_HEAP_TXCHUNK, sizeof(*c) + cap);
			if (!c)
				return NULL;
			c->cap = (uint32_t)cap;
			c->data = (uint8_t *)(c + 1);
		}
		c->next = NULL;
		c->len = 0;
		if (tb->tail)
			tb->tail->next = c;
		else
			tb->head = c;
		tb->tail = c;
	}
	p = c->data + c->len;
	c->len += (uint32_t)len;
	return p;
}

/* Give back the unused tail of the last reservation. */
static inline void tx_unreserve(struct txbuf *tb, size_t len)
{
	tb->tail->len -= (uint32_t)len;
}

/* The transport under a session (moq.h, Bindings): raw QUIC is called
 * directly; a binding through its ops. Callers check s->tp first. */
static inline int tp_open(struct moq_session *s, int bidi, int64_t *sid)
{
	if (__builtin_expect(s->bops != NULL, 0))
		return s->bops->stream_open(s->tp, bidi, sid);
	return moq_quic_stream_open(s->conn, bidi, sid);
}

static inline long tp_write(struct moq_session *s, int64_t sid, const struct iovec *iov, size_t n,
                            int fin)
{
	if (__builtin_expect(s->bops != NULL, 0))
		return s->bops->stream_write(s->tp, sid, iov, n, fin);
	return moq_quic_stream_write(s->conn, sid, iov, n, fin);
}

/* lite-06 renumbered the codes (a reset with 0 is an internal error): the
 * session works in lite-05's numbers, the wire gets the version's. */
static inline uint64_t wire_stream_code(const struct moq_session *s, uint64_t code)
{
	return s->v == MOQ_LITE_06 ? moq6_code_stream(code) : code;
}

static inline void tp_reset(struct moq_session *s, int64_t sid, uint64_t code)
{
	code = wire_stream_code(s, code);
	if (s->bops)
		s->bops->stream_reset(s->tp, sid, code);
	else
		moq_quic_stream_reset(s->conn, sid, code);
}

static inline void tp_stop_sending(struct moq_session *s, int64_t sid, uint64_t code)
{
	code = wire_stream_code(s, code);
	if (s->bops)
		s->bops->stream_stop_sending(s->tp, sid, code);
	else
		moq_quic_stream_stop_sending(s->conn, sid, code);
}

static inline void tp_close(struct moq_session *s, uint64_t code)
{
	if (s->v == MOQ_LITE_06)
		code = moq6_code_session(code);
	if (s->bops) {
		if (!s->tp_closing) {
			s->tp_closing = 1;
			s->bops->close(s->tp, code);
		}
	} else
		moq_quic_conn_close(s->conn, code, NULL);
}

/* cwnd and friends; a binding without get_info: a window as large as the
 * node's session queue, so the configured bound still applies. */
static inline void tp_info(struct moq_session *s, struct moq_quic_conn_info *ci);

/* The cwnd alone (fanout's budget, per visit): on QUIC without filling the
 * whole record (moq_quic_conn_cwnd). */
static inline uint64_t tp_cwnd(struct moq_session *s)
{
	struct moq_quic_conn_info ci;

	if (!s->bops)
		return moq_quic_conn_cwnd(s->conn);
	tp_info(s, &ci);
	return ci.cwnd;
}

static inline void tp_info(struct moq_session *s, struct moq_quic_conn_info *ci)
{
	if (!s->bops) {
		moq_quic_conn_get_info(s->conn, ci);
		return;
	}
	memset(ci, 0, sizeof(*ci));
	if (s->bops->get_info)
		s->bops->get_info(s->tp, ci);
	else
		ci->cwnd = s->n->cfg.session_queue;
}

/* Carry out a deferred close (frees @s). Returns nonzero when it did. */
static inline int sess_flush(struct moq_session *s)
{
	if (!s->closing || s->depth || !s->tp || s->tp_closing)
		return 0;
	/* conn_closed frees the session during this call. */
	tp_close(s, s->close_code);
	return 1;
}

/* The upstream subscription that wrote @up's cache track stopped: its newest
 * group is no longer the live edge and may expire (cache.h,
 * moq_cache_track_set_idle); the next group a publisher sends makes it live. */
static inline void up_idle(struct upstream *up)
{
	if (up->ct)
		moq_cache_track_set_idle(up->ct);
}

/* Whether @s may publish (@put) or read @p (absolute, normalised): always
 * without cfg.auth; for a session this node opened, as the token it
 * presents says (none: always). */
static inline bool access_ok(struct moq_session *s, int put, const char *p, size_t len)
{
	if (!s->server) /* a peer we dialled: as our token says (moq_session_peer_token) */
		return !s->grant || access_peer_allows(s, put, p, len);
	return !s->n->cfg.auth || access_allows(s, put, p, len);
}

/* Whether @s is a cluster link (moq.h, cfg.link_max_*): a session this
 * relay dialled, or one whose token is a link's (access_session). */
static inline bool sess_link(const struct moq_session *s)
{
	return (!s->server && s->n->cfg.relay) || s->link_grant;
}

/* The per-session bounds of @s: a link's, or a client's. */
static inline uint32_t sess_max_subscriptions(const struct moq_session *s)
{
	return sess_link(s) ? s->n->cfg.link_max_subscriptions : s->n->cfg.max_subscriptions;
}

static inline uint32_t sess_max_broadcasts(const struct moq_session *s)
{
	return sess_link(s) ? s->n->cfg.link_max_session_broadcasts
	                    : s->n->cfg.max_session_broadcasts;
}

/* Something changed for every subscriber of @up (it ended, ...). */
static inline void up_touch(struct upstream *up)
{
	/* a chain of misses otherwise (a subscription, then its session;
	 * one line of each: unext and s share a subscription's first, pnext
	 * and queued a session's): the subscription two ahead and the
	 * session of the next one load meanwhile */
	for (struct dsub *d = up->dsubs; d; d = d->unext) {
		const struct dsub *nx = d->unext;

		if (nx != NULL) {
			if (nx->unext != NULL)
				__builtin_prefetch(nx->unext);
			__builtin_prefetch(nx->s);
		}
		sess_mark(d->s);
	}
}

/* dgram.c: lite-05 datagrams (6.4) in (a publisher's, into the cache or the
 * application's callbacks) and out (a single-frame group to a subscriber
 * instead of a stream: returns true when it went, the group reference
 * taken) */
void sess_datagram(struct moq_session *s, const uint8_t *p, size_t len);
/* dgram_in: a single-frame group @seq (@ts, @p, @len) of @s's subscription
 * @sub received as a datagram: into the cache or the callbacks, as lite-05's
 * (also an IETF OBJECT datagram, on the translator's lite session). 0, or
 * < 0 when dropped (counted in dgrams_in_bad). */
int dgram_in(struct moq_session *s, uint64_t sub, uint64_t seq, uint64_t ts, const uint8_t *p,
             size_t len);
/* dgram_in of a frame with extension headers (@ext, @ext_len: an IETF
 * OBJECT datagram's properties, kept beside it in the cache) */
int dgram_in_ext(struct moq_session *s, uint64_t sub, uint64_t seq, uint64_t ts, const uint8_t *p,
                 size_t len, const uint8_t *ext, size_t ext_len);
bool dgram_out(struct moq_session *s, struct dsub *d, struct moq_cache_group *g);

#endif /* MOQ_MOQ_MOQ_INT_H */
