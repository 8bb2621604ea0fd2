/* SPDX-License-Identifier: MIT */
/*
 * test_moq_fanout_prop.c: a property test of fanout from the cache (issue
 * 12, defect 1): whatever the frame sizes, the way they arrive and when and
 * how a subscriber reads, every byte a subscriber gets is the publisher's,
 * in order, and a group stream either ends complete or is reset.
 *
 * Per trial (its own seed): a publisher (client node with its cache), a relay
 * node and subscribers (another client node), all over real QUIC joined by
 * the in-memory link (quic/link.c), in virtual time. The plan: groups of
 * frames whose sizes are log-uniform from 0 B to the 32 MiB cap (a group's
 * bytes are capped at 32 MiB too, PROTOCOL.md, Group), written into the
 * publisher's cache in random chunks at a random rate. Subscribers join at
 * random points: live (before the first group), late (at the newest group),
 * behind the edge (a SUBSCRIBE starting at an older group) and FETCH (one
 * cached group, complete or still arriving); some stall for a while (their
 * datagrams from the relay, or their acknowledgements, dropped). Every
 * subscriber checks frame sizes, timestamps, order and every payload byte.
 * A subscriber that never stalled must get every group from its start
 * complete; one that stalled may see resets but never a wrong byte. With no
 * reset anywhere, the relay's frames_out / bytes_out and latency samples
 * must equal what the subscribers received.
 *
 * One trial in three the publisher ends its subscription early (issue 29):
 * END {last + 1} and FIN on the relay's subscription as it opens the second
 * to last group, so END and FIN reach the relay before the headers of the
 * last two groups. Every subscriber must still get every group, and every
 * subscription exactly that END.
 *
 * Size: MOQDP_TEST_PROP_SCALE (default 3: the CI run, 9 trials of the full
 * size, about a minute; 1: 3 small trials; the script scripts/prop-fanout
 * runs it larger), MOQDP_TEST_PROP_SEED (default: from
 * the clock; printed with every failure, so a failure can be re-run).
 */
#include <check.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "link.h"
#include "moq.h"

#define MS           1000000ull
#define SEC          1000000000ull

#define MAX_GROUPS   64
#define MAX_FRAMES   96  /* frames per group in a plan */
#define MAX_PSUBS    8   /* subscribers per trial */
#define MAX_STREAMS  160 /* group streams a subscriber follows at once */
#define MAX_SUBIDS   8   /* subscriptions and fetches per subscriber */
#define CHUNK_MAX    (4u << 20)
#define STEP_NS      (2 * MS)
#define TRIAL_MAX_NS (120 * SEC) /* virtual time a trial may take */
/* The plan's cap: PROTOCOL.md, Group (MOQ_CACHE_GROUP_CAP, MOQ_FRAME_MAX). */
#define CAP (32u << 20)

/* ------------------------------------------------------------ the PRNG */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state += 0x9e3779b97f4a7c15ull;
	return mix64(rng_state);
}

/* Uniform in [0, n). */
static uint64_t rnd_below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

/* Log-uniform in [lo, hi] (1 <= lo <= hi < 2^63): an octave [2^k, 2^(k+1))
 * uniformly, then a value in it uniformly. */
static uint64_t rnd_log(uint64_t lo, uint64_t hi)
{
	unsigned klo = 63u - (unsigned)__builtin_clzll(lo),
	         khi = 63u - (unsigned)__builtin_clzll(hi);
	unsigned k = klo + (unsigned)rnd_below(khi - klo + 1);
	uint64_t v = (1ull << k) | rnd_below(1ull << k);

	return v < lo ? lo : v > hi ? hi : v;
}

/* ---------------------------------------------------------------- plan */

struct pgroup {
	uint32_t nframes;
	uint32_t size[MAX_FRAMES];
	uint64_t bytes;
};

static struct plan {
	uint64_t seed; /* this trial's */
	uint32_t ngroups;
	struct pgroup g[MAX_GROUPS];
	uint64_t bytes;
} P;

static uint64_t master_seed;
static int verbose; /* MOQDP_TEST_PROP_VERBOSE: progress every 100 ms (virtual) */
static int trial_no;

#define FAILF(fmt, ...)                                                                            \
	ck_abort_msg("MOQDP_TEST_PROP_SEED=%" PRIu64 " trial %d (seed %" PRIu64 "): " fmt,         \
	             master_seed, trial_no, P.seed, ##__VA_ARGS__)
#define CHECKF(cond, fmt, ...)                                                                     \
	do {                                                                                       \
		if (!(cond))                                                                       \
			FAILF(fmt, ##__VA_ARGS__);                                                 \
	} while (0)

static int64_t frame_ts(uint64_t seq, uint32_t idx)
{
	return (int64_t)(seq * 1000000 + idx * 1000);
}

/* The payload: 8-byte words of mix64(frame key + word index), little end
 * first, so a byte shifted, skipped or repeated anywhere is seen. */
static uint64_t frame_key(uint64_t seq, uint32_t idx)
{
	return mix64(P.seed ^ (seq << 32) ^ ((uint64_t)idx << 8));
}

static void pattern(uint64_t key, uint64_t off, uint8_t *out, size_t len)
{
	while (len) {
		uint64_t w = mix64(key + (off >> 3));
		unsigned b = (unsigned)(off & 7);
		size_t n = 8 - b < len ? 8 - b : len;

		if (n == 8) {
			memcpy(out, &w, 8); /* little-endian hosts (x86, arm64) */
		} else {
			for (size_t i = 0; i < n; i++)
				out[i] = (uint8_t)(w >> (8 * (b + i)));
		}
		out += n;
		off += n;
		len -= n;
	}
}

/* A frame size: log-uniform over [0, CAP] (0 and the cap itself now and
 * then). */
static uint32_t plan_size(void)
{
	uint64_t r = rnd_below(64);

	if (r == 0)
		return 0;
	if (r == 1)
		return CAP;
	return (uint32_t)(rnd_log(1, CAP + 1ull) - 1);
}

static void plan_make(uint32_t ngroups)
{
	P.ngroups = ngroups;
	P.bytes = 0;
	for (uint32_t s = 0; s < ngroups; s++) {
		struct pgroup *g = &P.g[s];
		uint32_t want = (uint32_t)rnd_log(1, MAX_FRAMES);

		g->nframes = 0;
		g->bytes = 0;
		while (g->nframes < want) {
			uint32_t sz = plan_size();
			int last = 0;

			if (sz >= CAP - g->bytes) {
				sz = (uint32_t)(CAP - g->bytes);
				last = 1;
			}
			g->size[g->nframes++] = sz;
			g->bytes += sz;
			if (last)
				break;
		}
		P.bytes += g->bytes;
	}
}

/* ------------------------------------------------------------- harness */

enum kind { K_LIVE, K_LATE, K_BEHIND, K_FETCH };
static const char *const kind_name[] = {"live", "late", "behind", "fetch"};

struct strm { /* one group stream being received */
	int used;
	uint64_t id, seq;
	uint32_t idx;         /* frames begun */
	uint64_t fsize, fgot; /* the current frame */
	int have_frame;
};

struct subid { /* one subscription or fetch */
	int used, fetch;
	uint64_t id;
	uint64_t want_start; /* behind: the start asked for */
	int got_start;
	uint64_t start;
	uint8_t complete[MAX_GROUPS], reset[MAX_GROUPS], dropped[MAX_GROUPS];
	int ended;    /* fetch: its group ended */
	int want_end; /* made before the publisher's early END: ends with it */
	int got_end;
	uint64_t end; /* END's group */
};

struct psub {
	struct moq_session *s;
	enum kind kind;
	int ready, closed, close_local;
	uint64_t close_code;
	uint64_t join_at; /* virtual ns after the publisher started */
	int joined;
	/* stall windows (relative to the publisher's start) */
	uint64_t stall_from, stall_to;
	int stall_mode; /* 0 none, 1 drop what the relay sends, 2 drop its acks */
	int stalled;    /* a stall window was applied */
	uint8_t cid[20], rcid[20];
	int cid_len, rcid_len;
	struct subid ids[MAX_SUBIDS];
	int nids;
	struct strm st[MAX_STREAMS];
	uint64_t frames, bytes, frames_live, resets;
	int64_t first_reset; /* the code of the first */
	uint64_t errors;
	char first_error[256];
};

static struct h {
	struct moq_cache_counting rcnt, pcnt;
	struct moq_cache *rcache, *pcache;
	struct moq_node *relay, *client, *subnode;
	struct moq_quic_endpoint *rep, *cep;
	struct moq_quic_link *lnk;
	struct moq_quic_addr raddr;
	uint16_t port;
	struct moq_session *pub;
	int pub_ready;
	uint64_t pub_code; /* its close code */
	int pub_local;
	struct psub subs[MAX_PSUBS];
	int nsubs;
	int learning;            /* index of the subscriber whose CID the filter learns, or -1 */
	uint64_t t0;             /* publisher start */
	uint8_t had[MAX_GROUPS]; /* relay_has */
	/* publisher */
	struct moq_cache_track *vt;
	struct moq_cache_group *g;
	uint32_t seq, fidx;
	uint64_t foff; /* bytes of the open frame written */
	int fopen;
	uint64_t rate; /* bytes per step */
	uint8_t *buf;
	int end_early; /* this trial's publisher ends its subscription early */
	int end_sent;
} H;

static uint64_t now(void)
{
	return moq_quic_link_now(H.lnk);
}

static uint64_t vclock(void *ctx)
{
	(void)ctx;
	return H.lnk ? moq_quic_link_now(H.lnk) : 0;
}

static struct psub *psub_of(struct moq_session *s)
{
	void *u = moq_session_user(s);

	return u == (void *)&H ? NULL : u;
}

static void sub_error(struct psub *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sub_error(struct psub *u, const char *fmt, ...)
{
	va_list ap;

	if (u->errors++ == 0) {
		va_start(ap, fmt);
		vsnprintf(u->first_error, sizeof(u->first_error), fmt, ap);
		va_end(ap);
	}
}

static struct subid *subid_of(struct psub *u, uint64_t id)
{
	for (int i = 0; i < u->nids; i++)
		if (u->ids[i].id == id)
			return &u->ids[i];
	return NULL;
}

static struct strm *strm_of(struct psub *u, uint64_t id, uint64_t seq, int create)
{
	struct strm *fr = NULL;

	for (int i = 0; i < MAX_STREAMS; i++) {
		struct strm *t = &u->st[i];
		if (t->used && t->id == id && t->seq == seq)
			return create ? NULL : t;
		if (!t->used && !fr)
			fr = t;
	}
	if (!create || !fr)
		return NULL;
	memset(fr, 0, sizeof(*fr));
	fr->used = 1;
	fr->id = id;
	fr->seq = seq;
	return fr;
}

static void cb_ready(struct moq_session *s, void *user)
{
	struct psub *u = psub_of(s);

	(void)user;
	if (u)
		u->ready = 1;
	else
		H.pub_ready = 1;
}

static void cb_closed(struct moq_session *s, void *user, uint64_t code, int local)
{
	struct psub *u = psub_of(s);

	(void)user;
	if (u) {
		u->closed = 1;
		u->close_code = code;
		u->close_local = local;
		u->s = NULL;
	} else {
		H.pub = NULL;
		H.pub_code = code;
		H.pub_local = local;
	}
}

static void cb_sub_reply(struct moq_session *s, void *user, uint64_t id,
                         const struct moq_subscribe_reply *r)
{
	struct psub *u = psub_of(s);
	struct subid *d;

	(void)user;
	if (!u || !(d = subid_of(u, id)))
		return;
	if (r->kind == MOQ_SUB_START || r->kind == MOQ_SUB_OK) {
		d->got_start = 1;
		d->start = r->kind == MOQ_SUB_START ? r->group : r->start;
	} else if (r->kind == MOQ_SUB_DROP) {
		for (uint64_t q = r->drop_start; q <= r->drop_end && q < MAX_GROUPS; q++)
			d->dropped[q] = 1;
	} else if (r->kind == MOQ_SUB_END) {
		d->got_end = 1;
		d->end = r->group;
	}
}

static void cb_group_begin(struct moq_session *s, void *user, uint64_t id, uint64_t seq)
{
	struct psub *u = psub_of(s);

	(void)user;
	if (!u)
		return;
	/* a FETCH's group begins inside moq_session_fetch, before its id is
	 * returned (sub_fetch registers it as UINT64_MAX) */
	if (!subid_of(u, id) && subid_of(u, UINT64_MAX))
		subid_of(u, UINT64_MAX)->id = id;
	if (!subid_of(u, id) || seq >= P.ngroups) {
		sub_error(u, "group stream of id %" PRIu64 " group %" PRIu64 " not asked for", id,
		          seq);
		return;
	}
	if (!strm_of(u, id, seq, 1))
		sub_error(u, "group %" PRIu64 " of id %" PRIu64 " twice (or too many streams)", seq,
		          id);
}

static void cb_frame(struct moq_session *s, void *user, uint64_t id, uint64_t seq, int64_t ts,
                     uint64_t size)
{
	struct psub *u = psub_of(s);
	struct strm *t;

	(void)user;
	if (!u || !(t = strm_of(u, id, seq, 0)))
		return;
	if (t->have_frame && t->fgot != t->fsize) {
		sub_error(u,
		          "group %" PRIu64 " frame %u: a frame header after %" PRIu64 " of %" PRIu64
		          " bytes",
		          seq, t->idx - 1, t->fgot, t->fsize);
		return;
	}
	if (t->idx >= P.g[seq].nframes) {
		sub_error(u, "group %" PRIu64 ": frame %u of %u", seq, t->idx, P.g[seq].nframes);
		return;
	}
	if (size != P.g[seq].size[t->idx]) {
		sub_error(u, "group %" PRIu64 " frame %u: size %" PRIu64 ", published %u", seq,
		          t->idx, size, P.g[seq].size[t->idx]);
		return;
	}
	if (moq_session_version(s) >= MOQ_LITE_05 && ts != frame_ts(seq, t->idx)) {
		sub_error(u,
		          "group %" PRIu64 " frame %u: timestamp %" PRId64 ", published %" PRId64,
		          seq, t->idx, ts, frame_ts(seq, t->idx));
		return;
	}
	t->fsize = size;
	t->fgot = 0;
	t->have_frame = 1;
	t->idx++;
	if (size == 0)
		u->frames++;
}

static void cb_frame_data(struct moq_session *s, void *user, uint64_t id, uint64_t seq,
                          const uint8_t *data, size_t len)
{
	static uint8_t want[64 * 1024];
	struct psub *u = psub_of(s);
	struct strm *t;
	uint64_t key;

	(void)user;
	if (!u || !(t = strm_of(u, id, seq, 0)))
		return;
	if (!t->have_frame || t->fgot + len > t->fsize) {
		sub_error(u,
		          "group %" PRIu64 " frame %u: %zu payload bytes past its end (%" PRIu64
		          " of %" PRIu64 ")",
		          seq, t->idx ? t->idx - 1 : 0, len, t->fgot, t->fsize);
		return;
	}
	key = frame_key(seq, t->idx - 1);
	for (size_t done = 0; done < len;) {
		size_t n = len - done < sizeof(want) ? len - done : sizeof(want);

		pattern(key, t->fgot + done, want, n);
		if (memcmp(want, data + done, n) != 0) {
			size_t k = 0;
			while (want[k] == data[done + k])
				k++;
			sub_error(u,
			          "group %" PRIu64 " frame %u (%" PRIu64
			          " bytes): payload byte %" PRIu64 " differs",
			          seq, t->idx - 1, t->fsize, t->fgot + done + k);
			return;
		}
		done += n;
	}
	t->fgot += len;
	u->bytes += len;
	if (t->fgot == t->fsize)
		u->frames++;
}

static void cb_group_end(struct moq_session *s, void *user, uint64_t id, uint64_t seq, int64_t code)
{
	struct psub *u = psub_of(s);
	struct subid *d;
	struct strm *t;

	(void)user;
	if (!u || !(d = subid_of(u, id)) || seq >= MAX_GROUPS)
		return;
	t = strm_of(u, id, seq, 0);
	if (d->fetch)
		d->ended = 1;
	if (code < 0) {
		if (!t || t->idx != P.g[seq].nframes || (t->have_frame && t->fgot != t->fsize)) {
			sub_error(u,
			          "group %" PRIu64
			          " ended (FIN) after %u of %u frames, the last with %" PRIu64
			          " of %" PRIu64 " bytes",
			          seq, t ? t->idx : 0, P.g[seq].nframes, t ? t->fgot : 0,
			          t ? t->fsize : 0);
		} else {
			d->complete[seq] = 1;
			if (!d->fetch) {
				uint64_t f = P.g[seq].nframes;
				u->frames_live += f;
			}
		}
	} else {
		d->reset[seq] = 1;
		if (!u->resets++)
			u->first_reset = code;
	}
	if (t)
		t->used = 0;
}

static const struct moq_node_callbacks client_cbs = {
        .session_ready = cb_ready,
        .session_closed = cb_closed,
        .sub_reply = cb_sub_reply,
        .group_begin = cb_group_begin,
        .frame = cb_frame,
        .frame_data = cb_frame_data,
        .group_end = cb_group_end,
};

/* A stalled subscriber: the datagrams of its connection in one direction
 * are dropped. Connection IDs are learned from the long headers of the
 * handshake: the client's Initial names its own CID (what the relay's short
 * headers carry), the relay's reply to it the relay's CID. */
static int stall_filter(void *arg, int dir, uint8_t *data, size_t *len, uint64_t t)
{
	(void)arg;
	if (*len < 8)
		return 0;
	if (data[0] & 0x80) {
		size_t dl = data[5], sl;
		if (6 + dl + 1 > *len)
			return 0;
		sl = data[6 + dl];
		if (sl > 20 || dl > 20 || 7 + dl + sl > *len)
			return 0;
		if (dir == 0 && H.learning >= 0 && !H.subs[H.learning].cid_len) {
			struct psub *u = &H.subs[H.learning];
			memcpy(u->cid, data + 7 + dl, sl);
			u->cid_len = (int)sl;
		} else if (dir == 1) {
			for (int i = 0; i < H.nsubs; i++) {
				struct psub *u = &H.subs[i];
				if (u->cid_len && !u->rcid_len && (size_t)u->cid_len == dl &&
				    memcmp(data + 6, u->cid, dl) == 0) {
					memcpy(u->rcid, data + 7 + dl, sl);
					u->rcid_len = (int)sl;
				}
			}
		}
		return 0;
	}
	for (int i = 0; i < H.nsubs; i++) {
		struct psub *u = &H.subs[i];
		uint64_t rel = t - H.t0;
		if (!u->stall_mode || !H.t0 || rel < u->stall_from || rel >= u->stall_to)
			continue;
		if (u->stall_mode == 1 && dir == 1 && u->cid_len && *len > (size_t)u->cid_len &&
		    memcmp(data + 1, u->cid, (size_t)u->cid_len) == 0) {
			u->stalled = 1;
			return 1;
		}
		if (u->stall_mode == 2 && dir == 0 && u->rcid_len && *len > (size_t)u->rcid_len &&
		    memcmp(data + 1, u->rcid, (size_t)u->rcid_len) == 0) {
			u->stalled = 1;
			return 1;
		}
	}
	return 0;
}

static struct moq_quic_addr addr4(const char *ip, uint16_t port)
{
	struct moq_quic_addr a;

	moq_quic_addr_ip4(ip, port, &a);
	return a;
}

static void h_init(void)
{
	struct moq_cache_cfg cc = {0};
	struct moq_node_cfg nc = {0};
	struct moq_quic_config q = {0};
	struct moq_quic_link_config lc = {0};
	const char *const *alpns;
	size_t nalpn;
	int err = 0;

	memset(&H, 0, sizeof(H));
	H.learning = -1;
	moq_cache_counting_init(&H.rcnt);
	moq_cache_counting_init(&H.pcnt);
	cc.alloc = moq_cache_counting_alloc(&H.rcnt);
	cc.clock = vclock;
	H.rcache = moq_cache_create(&cc);
	cc.alloc = moq_cache_counting_alloc(&H.pcnt);
	H.pcache = moq_cache_create(&cc);
	ck_assert(H.rcache && H.pcache);

	nc.cache = H.rcache;
	nc.relay = 1;
	nc.origin = 1000;
	/* the per-session budget: from its 64 KiB floor to the default 4 MiB */
	nc.session_queue = rnd_log(64 * 1024, 4u << 20);
	nc.max_group_streams = 128;
	/* Groups stay for the whole trial: what is tested is fanout, not expiry. */
	nc.track.max_latency = TRIAL_MAX_NS * 2;
	nc.track.window = 128;
	H.relay = moq_node_create(&nc);
	nc.track.max_latency = 0;
	nc.track.window = 0;
	nc.cache = H.pcache;
	nc.relay = 0;
	nc.origin = 2000;
	nc.cb = &client_cbs;
	nc.user = &H;
	H.client = moq_node_create(&nc);
	nc.cache = NULL;
	nc.origin = 3000;
	H.subnode = moq_node_create(&nc);
	ck_assert(H.relay && H.client && H.subnode);

	alpns = moq_node_alpns(&nalpn);
	q.role = MOQ_QUIC_SERVER;
	q.worker_id = 1;
	q.alpn = alpns;
	q.alpn_count = nalpn;
	q.retry = MOQ_QUIC_RETRY_NEVER;
	q.max_conns = 64;
	q.max_conns_per_addr = 64;
	q.max_half_open = 64;
	q.max_streams_uni = 10000;
	q.cb = moq_node_quic_callbacks();
	q.user = H.relay;
	H.rep = moq_quic_endpoint_new(&q, &err);
	ck_assert_msg(H.rep != NULL, "relay endpoint: %s", moq_err_str(err));
	q.role = MOQ_QUIC_CLIENT;
	q.worker_id = 2;
	q.user = H.client;
	/* Clients keep their sessions alive, as deployed ones do: a fetch-only
	 * subscriber whose groups arrived, or the publisher once its last group
	 * is acknowledged, hears nothing while slower subscribers are served
	 * over lossy, reordering links, and a trial of 15 groups of up to
	 * 32 MiB takes longer than the 30 s idle timeout (virtual): without
	 * PINGs those sessions idled out (issue 22, item 17: "closed by the
	 * subscriber, code 4"). */
	q.keep_alive_ns = 5 * SEC;
	H.cep = moq_quic_endpoint_new(&q, &err);
	ck_assert_msg(H.cep != NULL, "client endpoint: %s", moq_err_str(err));
	for (int d = 0; d < 2; d++) {
		lc.dir[d].delay_ns = (1 + rnd_below(10)) * MS / 2;
		/* random reordering and a little loss: stream data reaches
		 * the relay's ingest in chunks of every size */
		lc.dir[d].reorder_ppm = (uint32_t)rnd_below(4) * 5000;
		lc.dir[d].loss_ppm = (uint32_t)rnd_below(3) * 1000;
	}
	lc.max_queue = 1 << 17;
	lc.seed = rnd() | 1;
	H.lnk = moq_quic_link_new(&lc, H.cep, H.rep);
	ck_assert_ptr_nonnull(H.lnk);
	moq_quic_link_set_filter(H.lnk, stall_filter, NULL);
	H.raddr = addr4("10.0.0.2", 4443);
	H.port = 20000;
	H.buf = malloc(CHUNK_MAX);
	ck_assert_ptr_nonnull(H.buf);
}

static void h_fini(void)
{
	if (H.g)
		moq_cache_group_unref(H.g);
	if (H.vt)
		moq_cache_track_unref(H.vt);
	moq_quic_endpoint_free(H.cep);
	moq_quic_endpoint_free(H.rep);
	moq_quic_link_free(H.lnk);
	H.lnk = NULL;
	moq_node_destroy(H.subnode);
	moq_node_destroy(H.client);
	moq_node_destroy(H.relay);
	moq_cache_destroy(H.pcache);
	moq_cache_destroy(H.rcache);
	free(H.buf);
}

static struct moq_session *h_connect(void *user, int role)
{
	struct moq_quic_addr la = addr4("10.0.0.1", H.port++);
	int err = 0;
	struct moq_session *s =
	        moq_node_connect(role == MOQ_ROLE_SUBSCRIBER ? H.subnode : H.client, H.cep, &la,
	                         &H.raddr, NULL, role, user, now(), &err);

	ck_assert_msg(s != NULL, "connect: %s", moq_err_str(err));
	return s;
}

/* The relay's subscription as the publisher sees it: the relay's second
 * bidi stream (after its announce request), its first subscription there. */
#define PUB_SUB_SID 5

/* The publisher ends its subscription early: END {P.ngroups} and FIN on it
 * (the client node still sends the groups it has, from its cache). */
static void pub_end_early(void)
{
	struct moq_msg m = {.type = MOQ_MSG_SUBSCRIBE_REPLY};
	uint8_t buf[32];
	int len;

	m.u.subscribe_reply.kind = MOQ_SUB_END;
	m.u.subscribe_reply.group = P.ngroups;
	m.u.subscribe_reply.start = m.u.subscribe_reply.end = MOQ_GROUP_NONE;
	len = moq_msg_encode(buf, sizeof(buf), moq_session_version(H.pub), &m);
	CHECKF(len > 0 &&
	               moq_session_write_raw_stream(H.pub, PUB_SUB_SID, buf, (size_t)len, 1) == 0,
	       "publisher: END on its subscription");
	H.end_sent = 1;
}

/* The publisher: @H.rate bytes per step into its cache, in random chunks
 * (a whole frame written at once now and then). Returns 1 when every group
 * is written. */
static int pub_step(void)
{
	uint64_t left = H.rate;

	while (H.seq < P.ngroups && left > 0) {
		struct pgroup *pg = &P.g[H.seq];
		uint32_t size;

		if (!H.g) {
			if (H.end_early && !H.end_sent && H.seq + 2 >= P.ngroups)
				pub_end_early(); /* before the last two groups */
			ck_assert_int_eq(moq_cache_group_open(H.vt, H.seq, now(), &H.g), 0);
			H.fidx = 0;
			H.fopen = 0;
			/* each group at its own rate: 16 MB/s to 2 GB/s (virtual) */
			H.rate = rnd_log(32 * 1024, 4u << 20);
		}
		if (H.fidx == pg->nframes) {
			ck_assert_int_eq(moq_cache_group_finish(H.g), 0);
			moq_cache_group_unref(H.g);
			H.g = NULL;
			H.seq++;
			continue;
		}
		size = pg->size[H.fidx];
		if (!H.fopen && size <= CHUNK_MAX && size <= left && rnd_below(3) == 0) {
			pattern(frame_key(H.seq, H.fidx), 0, H.buf, size);
			CHECKF(moq_cache_write_frame(H.g, frame_ts(H.seq, H.fidx), H.buf, size) ==
			               0,
			       "publisher: write_frame group %u frame %u", H.seq, H.fidx);
			left -= size;
			H.fidx++;
			continue;
		}
		if (!H.fopen) {
			CHECKF(moq_cache_frame_begin(H.g, frame_ts(H.seq, H.fidx), size) == size,
			       "publisher: frame_begin group %u frame %u", H.seq, H.fidx);
			H.fopen = 1;
			H.foff = 0;
		}
		while (H.foff < size && left > 0) {
			uint64_t n = rnd_log(1, CHUNK_MAX);
			int64_t rc;
			if (n > size - H.foff)
				n = size - H.foff;
			if (n > left && left < size - H.foff)
				n = left;
			pattern(frame_key(H.seq, H.fidx), H.foff, H.buf, n);
			rc = moq_cache_frame_append(H.g, H.buf, n);
			CHECKF(rc == (int64_t)(size - H.foff - n), "publisher: append %" PRId64,
			       rc);
			H.foff += n;
			left -= n < left ? n : left;
		}
		if (H.foff == size) {
			H.fopen = 0;
			H.fidx++;
		}
	}
	return H.seq == P.ngroups;
}

/* One step of virtual time: publisher, the three nodes, the link. */
static int h_step(int publish)
{
	int done = publish ? pub_step() : 0;

	moq_node_poll(H.client, now());
	moq_node_poll(H.subnode, now());
	moq_node_poll(H.relay, now());
	moq_node_latency_commit(H.relay, now());
	moq_quic_link_run(H.lnk, NULL, NULL, STEP_NS);
	return done;
}

static int h_until(int (*pred)(void), uint64_t max)
{
	uint64_t end = now() + max;

	while (now() < end) {
		if (pred())
			return 1;
		h_step(0);
	}
	return pred();
}

static int pub_is_ready(void)
{
	struct moq_node_stats st;

	moq_node_stats(H.relay, &st);
	return H.pub_ready && st.broadcasts >= 1;
}

static int learned(void)
{
	struct psub *u = &H.subs[H.learning];

	return u->ready && u->cid_len && u->rcid_len;
}

static int upstream_open(void)
{
	struct moq_node_stats st;

	moq_node_stats(H.client, &st);
	return st.subscribers >= 1;
}

/* The relay's newest cached group, or -1. */
static int64_t relay_latest(void)
{
	struct moq_cache_track *t = moq_cache_track_lookup(H.rcache, "live/room", 9, "video", 5);
	uint64_t seq = 0;
	int rc;

	if (!t)
		return -1;
	rc = moq_cache_track_latest(t, &seq);
	moq_cache_track_unref(t);
	return rc == 0 || rc == MOQ_ERR_CLOSED ? (int64_t)seq : -1;
}

/* Whether the relay has group @q. It has every group from the first it
 * got from upstream on (nothing expires during a trial); a group the
 * publisher finished before the relay's subscription reached it never
 * arrives (a subscription that starts there skips it). */
static int relay_has(uint64_t q)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	int rc;

	if (H.had[q])
		return 1;
	t = moq_cache_track_lookup(H.rcache, "live/room", 9, "video", 5);
	if (!t)
		return 0;
	rc = moq_cache_track_group(t, q, &g);
	moq_cache_track_unref(t);
	if (rc == 0) {
		moq_cache_group_unref(g);
		H.had[q] = 1;
	}
	return rc == 0;
}

/* A group the relay has, up to @back - 1 before @latest. */
static uint64_t older(int64_t latest, uint64_t back)
{
	uint64_t q = rnd_below(back);

	q = (uint64_t)latest > q ? (uint64_t)latest - q : 0;
	while (q < (uint64_t)latest && !relay_has(q))
		q++;
	return q;
}

static void sub_subscribe(struct psub *u, uint64_t start)
{
	struct moq_sub_params p = {1, false, 0, start, MOQ_GROUP_NONE};
	int64_t id = moq_session_subscribe(u->s, "live/room", 9, "video", 5, &p);
	struct subid *d;

	CHECKF(id >= 0 && u->nids < MAX_SUBIDS, "subscribe: %" PRId64, id);
	d = &u->ids[u->nids++];
	memset(d, 0, sizeof(*d));
	d->used = 1;
	d->id = (uint64_t)id;
	d->want_start = start;
	/* (one made later may reach the publisher as a new subscription, once
	 * the relay let go of the ended one: it ends at END only if it joined
	 * the ended one) */
	d->want_end = H.end_early && !H.end_sent;
}

static void sub_fetch(struct psub *u, uint64_t seq)
{
	int64_t id;
	struct subid *d;

	CHECKF(u->nids < MAX_SUBIDS, "too many fetches");
	/* the id is known only on return, and group_begin comes from inside
	 * the call: register the next id first */
	d = &u->ids[u->nids];
	memset(d, 0, sizeof(*d));
	d->used = 1;
	d->fetch = 1;
	d->id = UINT64_MAX;
	d->want_start = seq;
	u->nids++;
	id = moq_session_fetch(u->s, "live/room", 9, "video", 5, (uint8_t)rnd_below(4), seq);
	CHECKF(id >= 0 && d->id == (uint64_t)id, "fetch: %" PRId64, id);
}

/* A subscription is finished when every group from its start to the last
 * is accounted for (complete, reset or dropped), a fetch when its group
 * ended. */
static int subid_done(const struct subid *d)
{
	if (d->fetch)
		return d->ended;
	if (d->want_end && !d->got_end)
		return 0; /* and ends at END */
	if (!d->got_start)
		return d->got_end; /* joined after the last group: END only */
	for (uint64_t q = d->start; q < P.ngroups; q++)
		if (!d->complete[q] && !d->reset[q] && !d->dropped[q] && relay_has(q))
			return 0;
	return 1;
}

static int all_done(void)
{
	for (int i = 0; i < H.nsubs; i++) {
		struct psub *u = &H.subs[i];
		if (!u->joined || u->closed)
			return 0;
		for (int k = 0; k < u->nids; k++)
			if (!subid_done(&u->ids[k]))
				return 0;
	}
	return 1;
}

static void dump(void)
{
	struct moq_node_stats ps;

	moq_node_stats(H.client, &ps);
	fprintf(stderr, "#  publisher: %" PRIu64 " SUBSCRIBEs%s\n", ps.subscribes_in,
	        H.end_sent ? ", its END sent" : "");
	for (int i = 0; i < H.nsubs; i++) {
		struct psub *u = &H.subs[i];
		fprintf(stderr,
		        "#  sub %d %s join %.3f s stall %d [%.3f, %.3f) s%s: frames %" PRIu64
		        " bytes %" PRIu64 " resets %" PRIu64 " (first code %" PRId64
		        ") errors %" PRIu64 " %s%s\n",
		        i, kind_name[u->kind], (double)u->join_at / SEC, u->stall_mode,
		        (double)u->stall_from / SEC, (double)u->stall_to / SEC,
		        u->stalled ? " (stalled)" : "", u->frames, u->bytes, u->resets,
		        u->resets ? u->first_reset : 0, u->errors, u->first_error,
		        u->closed ? " CLOSED" : "");
		for (int k = 0; k < u->nids; k++) {
			struct subid *d = &u->ids[k];
			fprintf(stderr, "#   id %" PRIu64 " %s start %" PRIu64 "%s", d->id,
			        d->fetch ? "fetch" : "sub", d->fetch ? d->want_start : d->start,
			        d->got_start || d->fetch ? "" : " (no START)");
			if (d->got_end)
				fprintf(stderr, " END %" PRIu64, d->end);
			fputs(": ", stderr);
			for (uint32_t q = 0; q < P.ngroups; q++)
				fputc(d->complete[q]  ? 'C'
				      : d->reset[q]   ? 'R'
				      : d->dropped[q] ? 'D'
				                      : '.',
				      stderr);
			fputc('\n', stderr);
		}
	}
}

/* Fail at once (not at the trial's time limit) on a wrong byte, a closed
 * session, or a reset that a subscriber which never stalled must not see. */
static void check_early(void)
{
	if (!H.pub) {
		dump();
		FAILF("the publisher's session closed by %s, code %" PRIu64
		      " (publisher at group %u frame %u)",
		      H.pub_local ? "the publisher" : "the relay", H.pub_code, H.seq, H.fidx);
	}
	for (int i = 0; i < H.nsubs; i++) {
		struct psub *u = &H.subs[i];
		if (u->errors || u->closed || (u->resets && !u->stalled)) {
			char why[64] = "";
			if (u->closed)
				snprintf(why, sizeof(why),
				         " session closed by the %s, code %" PRIu64,
				         u->close_local ? "subscriber" : "relay", u->close_code);
			dump();
			FAILF("subscriber %d (%s%s): %s%s%s", i, kind_name[u->kind],
			      u->stalled ? ", stalled" : "", u->errors ? u->first_error : "", why,
			      u->resets && !u->stalled ? " a group reset" : "");
		}
	}
}

static void trial(uint32_t ngroups, uint32_t nsubs)
{
	struct moq_node_stats rs;
	struct moq_lat_hist lh;
	uint64_t end, frames = 0, bytes = 0, frames_live = 0, resets = 0;
	int pub_done = 0;

	plan_make(ngroups);
	h_init();
	/* (from the trial's seed, not its random stream: the other choices of
	 * a seed stay what they were) */
	H.end_early = mix64(P.seed ^ 0x29) % 3 == 0;
	H.pub = h_connect(&H, MOQ_ROLE_PUBLISHER);
	{
		struct moq_cache_track_cfg tc = {.max_latency = TRIAL_MAX_NS * 2, .window = 128};
		ck_assert_int_eq(
		        moq_cache_track_create(H.pcache, "live/room", 9, "video", 5, &tc, &H.vt),
		        0);
	}
	ck_assert_int_eq(moq_node_publish(H.client, "live/room", 9, 1000000), 0);
	CHECKF(h_until(pub_is_ready, 5 * SEC), "publisher not announced");

	/* Subscribers connect one at a time (the filter learns each one's
	 * connection IDs). The first is live and never stalls before the
	 * publisher's upstream subscription is open. */
	H.nsubs = (int)nsubs;
	for (int i = 0; i < H.nsubs; i++) {
		struct psub *u = &H.subs[i];
		uint64_t r = rnd_below(8);
		memset(u, 0, sizeof(*u));
		u->kind = i == 0  ? K_LIVE
		          : r < 2 ? K_LIVE
		          : r < 4 ? K_LATE
		          : r < 6 ? K_BEHIND
		                  : K_FETCH;
		/* while publishing (~100 MB/s, virtual) */
		if (u->kind != K_LIVE)
			u->join_at = rnd_below(10 * MS + P.bytes * 10);
		if (rnd_below(3) == 0) {
			u->stall_mode = 1 + (int)rnd_below(2);
			u->stall_from = u->join_at + rnd_log(1, 2000) * MS;
			u->stall_to = u->stall_from + rnd_log(20, 3000) * MS;
		}
		H.learning = i;
		u->s = h_connect(u, MOQ_ROLE_SUBSCRIBER);
		CHECKF(h_until(learned, 5 * SEC), "subscriber %d not ready", i);
	}
	H.learning = -1;
	for (int i = 0; i < H.nsubs; i++)
		if (H.subs[i].kind == K_LIVE) {
			sub_subscribe(&H.subs[i], MOQ_GROUP_NONE);
			H.subs[i].joined = 1;
		}
	CHECKF(h_until(upstream_open, 5 * SEC), "no upstream subscription");

	H.rate = rnd_log(32 * 1024, 4u << 20);
	H.t0 = now();
	end = H.t0 + TRIAL_MAX_NS;
	while (now() < end) {
		uint64_t rel = now() - H.t0;
		for (int i = 0; i < H.nsubs; i++) {
			struct psub *u = &H.subs[i];
			int64_t latest;
			if (u->joined || u->closed || rel < u->join_at)
				continue;
			latest = relay_latest();
			if (latest < 0)
				continue;
			u->joined = 1;
			if (u->kind == K_LATE) {
				sub_subscribe(u, MOQ_GROUP_NONE);
			} else if (u->kind == K_BEHIND) {
				sub_subscribe(u, older(latest, 4));
			} else {
				int nf = 1 + (int)rnd_below(3);
				for (int k = 0; k < nf; k++)
					sub_fetch(u, older(latest, 3));
			}
		}
		pub_done |= h_step(1);
		if (pub_done && all_done())
			break;
		check_early();
		if (verbose && rel / (100 * MS) != (now() - H.t0) / (100 * MS)) {
			fprintf(stderr, "# %.1f s: publisher group %u frame %u\n",
			        (double)(now() - H.t0) / SEC, H.seq, H.fidx);
			dump();
		}
	}
	/* settle: late acknowledgements, counters */
	for (int i = 0; i < 20; i++)
		h_step(0);

	if (!pub_done || !all_done()) {
		dump();
		FAILF("not finished after %.1f s (virtual): publisher at group %u of %u",
		      (double)TRIAL_MAX_NS / SEC, H.seq, P.ngroups);
	}
	for (int i = 0; i < H.nsubs; i++) {
		struct psub *u = &H.subs[i];
		if (u->errors || u->closed) {
			dump();
			FAILF("subscriber %d (%s%s): %" PRIu64 " errors, first: %s%s", i,
			      kind_name[u->kind], u->stalled ? ", stalled" : "", u->errors,
			      u->first_error, u->closed ? "; session closed" : "");
		}
		for (int k = 0; k < u->nids; k++) {
			struct subid *d = &u->ids[k];
			if (d->fetch) {
				if (!u->stalled && !d->complete[d->want_start]) {
					dump();
					FAILF("subscriber %d: fetch of group %" PRIu64
					      " not complete",
					      i, d->want_start);
				}
				continue;
			}
			if (d->got_end && d->end != P.ngroups) {
				dump();
				FAILF("subscriber %d: END %" PRIu64 ", the publisher's %u", i,
				      d->end, P.ngroups);
			}
			if (d->want_start != MOQ_GROUP_NONE && d->got_start &&
			    d->start != d->want_start) {
				dump();
				FAILF("subscriber %d: START %" PRIu64 ", asked for %" PRIu64, i,
				      d->start, d->want_start);
			}
			for (uint64_t q = d->start; q < P.ngroups && !u->stalled; q++)
				if (!d->complete[q] && relay_has(q)) {
					dump();
					FAILF("subscriber %d (%s, never stalled): group %" PRIu64
					      " not complete",
					      i, kind_name[u->kind], q);
				}
		}
		frames += u->frames;
		bytes += u->bytes;
		frames_live += u->frames_live;
		resets += u->resets;
	}
	/* With nothing reset, the relay's counters are exact: every frame
	 * and byte it counted out reached a subscriber, once. */
	moq_node_stats(H.relay, &rs);
	moq_node_latency_hist(H.relay, &lh);
	CHECKF(rs.groups_end_lost == 0, "relay: %" PRIu64 " groups below END lost",
	       rs.groups_end_lost);
	if (resets == 0 && rs.resets_old + rs.resets_evicted + rs.resets_lagged +
	                                   rs.resets_dropped + rs.resets_cancel ==
	                           0) {
		CHECKF(rs.frames_out == frames && rs.bytes_out == bytes,
		       "relay counted %" PRIu64 " frames %" PRIu64
		       " bytes out, subscribers got %" PRIu64 " frames %" PRIu64 " bytes",
		       rs.frames_out, rs.bytes_out, frames, bytes);
		CHECKF(lh.samples + lh.overflow == frames_live,
		       "relay-added latency: %" PRIu64 " samples, %" PRIu64
		       " frames to subscriptions",
		       lh.samples + lh.overflow, frames_live);
	} else {
		CHECKF(rs.frames_out >= frames && rs.bytes_out >= bytes,
		       "relay counted %" PRIu64 " frames out, subscribers got %" PRIu64,
		       rs.frames_out, frames);
	}
	fprintf(stderr,
	        "# trial %d: %u groups %.1f MiB, %d subscribers%s: %" PRIu64 " frames %.1f MiB "
	        "verified, %" PRIu64 " resets; %.2f s virtual\n",
	        trial_no, P.ngroups, (double)P.bytes / (1 << 20), H.nsubs,
	        H.end_early ? ", END before the last two groups" : "", frames,
	        (double)bytes / (1 << 20), resets, (double)(now() - H.t0) / SEC);
	h_fini();
}

static unsigned env_uint(const char *name, unsigned def)
{
	const char *v = getenv(name);

	return v && *v ? (unsigned)strtoul(v, NULL, 0) : def;
}

/* MOQDP_TEST_PROP_SCALE=N: 3 N trials; N = 1: of 2 to 4 groups and 3 to
 * 5 subscribers; N > 1: up to 15 groups and 8 subscribers. CI runs 3: at
 * scale 1 (3 small trials) it never met what fails at full size (issue 22,
 * item 17), and 3 costs about a minute. */
#define CI_SCALE 3
START_TEST(fanout_every_byte)
{
	unsigned scale = env_uint("MOQDP_TEST_PROP_SCALE", CI_SCALE);
	const char *sv = getenv("MOQDP_TEST_PROP_SEED");
	unsigned trials = 3 * (scale ? scale : 1);

	verbose = (int)env_uint("MOQDP_TEST_PROP_VERBOSE", 0);
	master_seed = sv && *sv ? strtoull(sv, NULL, 0)
	                        : mix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
	fprintf(stderr, "# moq_fanout_prop: MOQDP_TEST_PROP_SEED=%" PRIu64 " scale %u\n",
	        master_seed, scale);
	for (trial_no = 0; trial_no < (int)trials; trial_no++) {
		uint32_t groups, subs;

		P.seed = mix64(mix64(master_seed) + (uint64_t)trial_no);
		rng_state = P.seed;
		groups = 2 + (uint32_t)rnd_below(scale > 1 ? 14 : 3);
		subs = 3 + (uint32_t)rnd_below(scale > 1 ? MAX_PSUBS - 2 : 3);
		trial(groups, subs);
	}
}
END_TEST

/* moq_cache_cursor_seek: a reader that wrote only part of a batch (its
 * iovec array was full) continues at the first unwritten byte, mid-frame or
 * at a frame's start; the view of the rest has start != 0 and its iovecs
 * hold exactly the frame's remaining bytes. */
START_TEST(cursor_seek)
{
	struct moq_cache_counting cnt;
	struct moq_cache_cfg cc = {0};
	struct moq_cache *c;
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct moq_cache_cursor cur = {0};
	struct moq_cache_frame fb[8];
	static const uint32_t sizes[] = {3u << 20, 100, 0, 1500000, 70000};
	struct iovec iov[128];
	uint8_t *buf = malloc(4u << 20), *want = malloc(4u << 20);

	ck_assert(buf && want);
	P.seed = 42;
	moq_cache_counting_init(&cnt);
	cc.alloc = moq_cache_counting_alloc(&cnt);
	c = moq_cache_create(&cc);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(moq_cache_track_create(c, "b", 1, "t", 1, NULL, &t), 0);
	ck_assert_int_eq(moq_cache_group_open(t, 0, 1, &g), 0);
	for (uint32_t i = 0; i < 5; i++) {
		pattern(frame_key(0, i), 0, buf, sizes[i]);
		ck_assert_int_eq(moq_cache_frame_begin(g, frame_ts(0, i), sizes[i]), sizes[i]);
		for (uint32_t off = 0; off < sizes[i];) {
			uint32_t n = sizes[i] - off < 40000 ? sizes[i] - off : 40000;
			ck_assert_int_ge(moq_cache_frame_append(g, buf + off, n), 0);
			off += n;
		}
	}
	ck_assert_int_eq(moq_cache_group_finish(g), 0);
	/* every frame read back from a seek to byte p of it: p = 0, a middle
	 * byte, the last byte */
	for (uint32_t i = 0; i < 5; i++) {
		uint32_t ps[3] = {0, sizes[i] / 2, sizes[i] ? sizes[i] - 1 : 0};
		pattern(frame_key(0, i), 0, want, sizes[i]);
		for (int k = 0; k < 3; k++) {
			uint32_t p = ps[k], got = 0;
			int n, ni;
			moq_cache_cursor_seek(&cur, i, p);
			n = moq_cache_read_frames(g, &cur, fb, 8);
			ck_assert_int_eq(n, (int)(5 - i));
			ck_assert_uint_eq(fb[0].index, i);
			ck_assert_uint_eq(fb[0].start, p);
			ck_assert_uint_eq(fb[0].len, sizes[i] - p);
			ck_assert(moq_cache_frame_complete(&fb[0]));
			if (fb[0].len == 0)
				continue; /* an empty frame */
			if (fb[0].data) {
				ck_assert(memcmp(fb[0].data, want + p, fb[0].len) == 0);
				continue;
			}
			ni = moq_cache_group_iov(g, fb[0].offset, fb[0].len, iov, 128);
			ck_assert_int_gt(ni, 0);
			for (int j = 0; j < ni; j++) {
				ck_assert(memcmp(iov[j].iov_base, want + p + got, iov[j].iov_len) ==
				          0);
				got += (uint32_t)iov[j].iov_len;
			}
			ck_assert_uint_eq(got, sizes[i] - p);
		}
	}
	/* a read after the last frame: the group is finished */
	moq_cache_cursor_seek(&cur, 5, 0);
	ck_assert_int_eq(moq_cache_read_frames(g, &cur, fb, 8), MOQ_ERR_CLOSED);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	moq_cache_destroy(c);
	free(buf);
	free(want);
}
END_TEST

Suite *moq_fanout_prop_suite(void);

Suite *moq_fanout_prop_suite(void)
{
	Suite *s = suite_create("moq_fanout_prop");
	TCase *tc = tcase_create("prop");

	tcase_set_timeout(tc, 3600);
	tcase_add_test(tc, cursor_seek);
	tcase_add_test(tc, fanout_every_byte);
	suite_add_tcase(s, tc);
	return s;
}
