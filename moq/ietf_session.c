/* SPDX-License-Identifier: MIT */
/*
 * ietf_session.c: IETF moq-transport sessions, drafts 14-20 (ietf_session.h).
 *
 * The transport's session is a shell: its streams come here. Behind it runs
 * a moq-lite-04 server session on an in-process binding (ie_ops), so the
 * origin table, auth, bounds, the cache and fanout treat an IETF client as a
 * lite one. This file translates:
 *
 *   IETF (outer, the client)                  lite-04 (inner, the relay)
 *   CLIENT_SETUP / SETUP (PATH, AUTH TOKEN)   the session URL (?jwt=)
 *   PUBLISH_NAMESPACE ns                      ANNOUNCE active on the relay's announce request
 *   PUBLISH_NAMESPACE_DONE / request FIN      ANNOUNCE ended
 *   SUBSCRIBE (client)                        SUBSCRIBE on a client bidi
 *   SUBSCRIBE_OK / REQUEST_ERROR / PUBLISH_DONE  <- OK / reset / FIN of it
 *   UNSUBSCRIBE / request FIN                 FIN of it
 *   subgroup stream, subgroup 0 (relay out)   <- GROUP stream: object k = frame k
 *   SUBSCRIBE (relay, to a publishing client) <- SUBSCRIBE the relay opens
 *   subgroup stream (client publishing)       GROUP stream, frames = objects
 *   SUBSCRIBE_NAMESPACE prefix                ANNOUNCE_REQUEST; announces -> NAMESPACE
 *   PUBLISH ns track alias                    ANNOUNCE of ns; the relay's SUBSCRIBE to the
 *                                             track is bound to the alias (no SUBSCRIBE out)
 *   PUBLISH_DONE / request FIN                the publisher's FIN of that subscribe stream
 *
 * Control messages ride the control stream in 14-16 and a bidi stream per
 * request from 17 (16: SUBSCRIBE_NAMESPACE already has its own). Bytes the
 * inner session writes are copied at once; they are acknowledged to it when
 * the client acknowledges what they became, so fanout's per-session budget
 * still bounds what waits here.
 */
#include "ietf_session.h"

#include "ietf_codec.h"
#include "moq_err.h"
#include "moq_int.h"

/* Request ids the client may use ahead of the ones it has used (14-16:
 * MAX_REQUEST_ID); a multiple of 2 (client ids are even). */
#define IE_REQ_WINDOW 512
#define IE_MSG_MAX    (MOQ_IETF_MSG_MAX + 16)
/* groups one FETCH (or fill) serves at most */
#define IE_FETCH_GROUPS 1024

enum xkind {
	X_NEW = 0,   /* outer, peer-opened, type not read */
	X_CONTROL,   /* 14-16: the control stream */
	X_SETUP_IN,  /* 17+: the client's SETUP uni */
	X_SETUP_OUT, /* 17+: ours */
	X_REQ_IN,    /* a client request's bidi (17+; 16's SUBSCRIBE_NAMESPACE) */
	X_REQ_OUT,   /* our request's bidi (17+) */
	X_SG_IN,     /* a subgroup stream from the client */
	X_SG_OUT,    /* a subgroup stream to the client */
	X_IGNORE,
	/* inner session streams */
	I_ANN_OUT,   /* the relay asks for the client's announces */
	I_SUB_OUT,   /* the relay subscribes to the client */
	I_GROUP_OUT, /* a group the relay sends the client */
	I_GOAWAY,    /* the relay's GOAWAY */
	I_OTHER,     /* inner-opened, unknown */
	I_SUB_IN,    /* the client's SUBSCRIBE (we opened it on the inner) */
	I_ANN_IN,    /* the client's SUBSCRIBE_NAMESPACE */
	I_GROUP_IN,  /* a group the client publishes */
};

/* What waits on an outer stream until the client acknowledges it: bytes
 * of ours (headers, control messages: data[], cap bytes, appended to while
 * it is the tail) or a reference to the inner's memory (ref: an object's
 * payload as the inner wrote it, cache memory, valid until the inner's
 * acknowledgement, which comes only once the client acknowledged this:
 * mark_push). */
struct oq {
	struct oq *next;
	uint64_t off; /* stream offset of the first byte */
	uint32_t len, cap;
	const uint8_t *ref;
	uint8_t data[];
};

/* OBJECT datagrams that came before the SUBSCRIBE_OK naming their alias
 * (ngtcp2 hands a packet's datagrams over before its stream data), kept
 * while one of the relay's SUBSCRIBEs awaits its reply. */
#define IE_EARLY_DG 8

struct early_dg {
	uint8_t *p;
	size_t len;
};

#define OQ_MIN_CAP  240 /* a copy entry's room: several object headers */
#define OQ_POOL_MAX 256 /* spare reference entries kept per session */
#define XS_POOL_MAX 32  /* spare stream records (a group's two each) */

struct mark {
	uint64_t r; /* outer offset */
	int64_t isid;
	uint64_t l;  /* inner bytes to acknowledge once r is */
	uint8_t via; /* a group on several outer streams: through its gack */
};

/* A group sent on several subgroup streams: the inner's acknowledgement up
 * to @l waits for @n marks (one per outer stream that held bytes then), in
 * order (struct xs.ga). */
struct gack {
	uint64_t l;
	uint32_t n;
};

/* subgroup streams one group is sent on besides its first */
#define IE_SG_OUT_MAX 8
/* bytes a client's subgroup stream may hold while another subgroup of its
 * group has an object under way into the (one) lite group stream */
#define IE_SG_RX_MAX (1u << 20)

/* Header bytes of a subgroup stream (subgroup / object headers), where they
 * stay until the stream's record is freed (the transport references them). */
struct arena {
	struct arena *next;
	uint32_t len, cap;
	uint8_t data[];
};

#define ARENA_MIN 256
#define BATCH_MAX 64 /* iovecs gathered before a write to the transport */

/*
 * A stream record, inner or outer. The fields of one kind alone are in the
 * union at the end (a record's kind changes only from one without any of
 * them: X_NEW and I_OTHER once their type is read, X_SG_IN to X_IGNORE):
 * every record carried them all, 864 bytes, and a subscriber's session
 * holds about seven (control, requests, groups) at a time.
 */
struct xs {
	struct xs *next;
	int64_t sid;
	struct arena *ar; /* X_SG_OUT: header bytes (newest first) */
	struct xs *peer;  /* inner <-> outer (request and group streams) */
	uint8_t inner, kind;
	uint8_t rx_fin, fin_q, fin_sent, reset, typed, gone;
	uint8_t i_out_done, i_in_done, closed_due; /* inner: each direction ended */
	uint8_t got_req, fin_due; /* I_SUB_OUT: SUBSCRIBE read; a FIN into the inner due */
	uint8_t reset_due;        /* I_SUB_OUT: refuse it (11 bounds) at the next pump */
	uint8_t pub_bound;        /* I_SUB_OUT: served by the client's PUBLISH (no SUBSCRIBE out) */
	uint8_t ok_due;           /* I_SUB_OUT: SUBSCRIBE_OK into the inner at the next pump */
	uint8_t held;             /* X_REQ_IN: came before the SETUP, read once it is */
	/* X_SG_IN: waits for another subgroup's object to end (its group's
	 * owner); its subgroup id is known (from the header or first object) */
	uint8_t waiting, sg_known;
	uint8_t ploc; /* I_GROUP_IN: the next frame's location is not (0, index) */
	/* I_GROUP_OUT of a track with locations: the subgroup header waits for
	 * the first object (hdr_due, template sh); the group's other subgroup
	 * streams (nsgo); several: multi, the inner's acknowledgements in
	 * order (ga) */
	uint8_t hdr_due, nsgo, multi;
	uint8_t paused;           /* I_SUB_IN: forward 0, its groups are not sent */
	uint8_t sink, stop_due;   /* I_GROUP_OUT of a paused subscription: its bytes go
	                           * nowhere; STOP_SENDING into the inner at the next pump */
	uint8_t ok_sent, done_sent, is_req;
	uint8_t grx_init;                  /* I_GROUP_OUT: grx is set up */
	uint8_t hdr_done, obj_hdr_pending; /* X_SG_IN */
	uint8_t fill_req, trim;            /* I_SUB_IN: see the union */
	/* I_GROUP_OUT: frames drop_lo..drop_hi of the group went in a fill
	 * (drop); the frame read now is one (cur_drop) */
	uint8_t drop, cur_drop;
	/* X_SG_IN and X_SG_OUT: the subgroup id; X_SG_OUT and I_GROUP_OUT:
	 * the next object id the client expects (delta coding) */
	uint64_t sgid, next_id;
	struct xs *owner; /* I_GROUP_IN: the subgroup stream whose object is under way */
	struct xs *cur_o; /* I_GROUP_OUT: the outer stream the frame read now goes to */
	struct gack *ga;
	uint32_t nga, cga;
	uint8_t *rx;
	size_t rx_len, rx_cap;
	/* outer send side */
	struct oq *qh, *qt, *qs; /* qs: where the next flush starts */
	uint64_t q_end, sent, acked;
	struct mark *mk;
	uint32_t nmk, cmk;
	uint64_t req_id, alias, lite_id;
	uint64_t in_l;    /* inner bytes consumed (inner-opened streams) */
	size_t lite_tlen; /* I_SUB_IN: the track name after prefix's NUL */
	/* I_ANN_OUT / I_ANN_IN: the requested prefix */
	char *prefix;
	size_t plen;
	/* I_GROUP_OUT of a track with extension headers: its cache group (a
	 * reference), whose frames' headers its objects carry */
	struct moq_cache_group *cg;
	/* I_SUB_IN: the cache track (a reference) once known */
	struct moq_cache_track *ct;
	/* I_GROUP_IN: the next frame's extension headers, until the inner's
	 * ingest takes them (ie_frame_meta) */
	uint8_t *pext;
	size_t pext_len;
	union {
		struct { /* I_SUB_IN */
			/* what the inner was last told */
			struct moq_subscribe_update su;
			/* draft 20: FILL_PARAMETERS and the SUBSCRIBE's filter,
			 * served at the SUBSCRIBE_OK (fill_req); then the objects
			 * the fill carried (trim_lo to trim_hi, inclusive: trim),
			 * which the subscription does not send again */
			struct moq_ietf_fill fill;
			struct moq_ietf_filter sfilter;
			struct moq_ietf_loc trim_lo, trim_hi;
		};
		struct {                         /* I_GROUP_OUT */
			struct moq_group_rx grx; /* the lite group stream read */
			struct moq_ietf_subgroup_hdr sh;
			struct xs *sgo[IE_SG_OUT_MAX];
			/* frames dropped (drop); the frame read now is fidx - 1 */
			uint64_t drop_lo, drop_hi, fidx;
		};
		struct { /* X_SG_IN */
			struct moq_ietf_subgroup_hdr h;
			uint64_t obj_left, in_next;
		};
		struct { /* I_GROUP_IN: the group it carries; subgroup
		          * streams feeding it (nsg); frames begun (nfr); the
		          * next frame's location when ploc (ie_frame_meta) */
			uint64_t grp, psg, pobj;
			uint32_t nsg, nfr;
		};
	};
};

struct ie_ack {
	int64_t isid;
	uint64_t l;
};

struct ietf_sess {
	struct moq_session *shell, *inner;
	struct moq_node *n;
	enum moq_ietf_draft d;
	char *url;
	size_t url_len;
	uint8_t started, dead, closing;
	/* pump walks the stream records only when something may be due: set
	 * by every input but the hot two (an acknowledgement, the inner's
	 * group bytes), which set it when they change more than bytes */
	uint8_t scan;
	uint64_t close_code;
	int depth;
	struct xs *streams;
	/* spare records, each with its mark array and one ARENA_MIN arena
	 * kept (xs_new / xs_free: no malloc per group) */
	struct xs *xpool;
	uint32_t nxpool;
	int64_t control_sid;
	int64_t next_ibidi, next_iuni; /* our streams on the inner (client-side ids) */
	int64_t next_obidi, next_ouni; /* inner-opened ids */
	uint64_t next_peer_req, max_granted, peer_max, next_our_req, next_lite_id;
	uint32_t open_reqs; /* client requests not yet over (14-16: MAX_REQUEST_ID) */
	struct ie_ack *acks;
	uint32_t nacks, cacks;
	uint64_t objects_dropped;
	struct oq *qpool; /* spare reference entries */
	uint32_t nqpool;
	struct xs *hit[2]; /* the records xs_find found last, outer and inner */
	/* a subgroup stream opened for a group that a paused subscription's
	 * (forward 0) turned out to be, nothing written: the next group's */
	struct xs *spare_sg;
	struct early_dg early[IE_EARLY_DG];
	uint32_t nearly;
	/* what an inner write becomes on a subgroup stream, gathered and
	 * written to the transport at once (b_flush). Every batch is begun
	 * and flushed within one ie_write, so its BATCH_MAX iovecs are on
	 * ie_write's stack (the outermost's, when it nests), not 1 KB in
	 * every session */
	struct xs *bo;
	struct iovec *bv;
	uint32_t bn;
	size_t btotal; /* the bytes of bv[0 .. bn) */
};

static const struct moq_binding_ops ie_ops;

/* ---- stream records ---- */

static struct xs *xs_find(struct ietf_sess *ie, int inner, int64_t sid)
{
	struct xs *h = ie->hit[inner != 0];

	if (h && h->inner == inner && h->sid == sid && !h->gone)
		return h;
	for (struct xs *x = ie->streams; x; x = x->next)
		if (x->inner == inner && x->sid == sid && !x->gone)
			return ie->hit[inner != 0] = x;
	return NULL;
}

static struct xs *xs_new(struct ietf_sess *ie, int inner, int64_t sid, uint8_t kind)
{
	struct xs *x = ie->xpool;

	if (x) {
		struct mark *mk = x->mk;
		struct arena *ar = x->ar;
		uint32_t cmk = x->cmk;
		ie->xpool = x->next;
		ie->nxpool--;
		memset(x, 0, sizeof(*x));
		x->mk = mk;
		x->cmk = cmk;
		x->ar = ar;
	} else if (!(x = calloc(1, sizeof(*x)))) {
		return NULL;
	}
	x->inner = (uint8_t)inner;
	x->sid = sid;
	x->kind = kind; /* (nothing of a new record is due: no scan) */
	x->next = ie->streams;
	ie->streams = x;
	return x;
}

static void oq_free(struct ietf_sess *ie, struct oq *q)
{
	if (q->ref && ie->nqpool < OQ_POOL_MAX) {
		q->next = ie->qpool;
		ie->qpool = q;
		ie->nqpool++;
		return;
	}
	free(q);
}

static void xs_free(struct ietf_sess *ie, struct xs *x)
{
	bool keep = ie->nxpool < XS_POOL_MAX;

	if (x->inner && x->is_req && ie->open_reqs)
		ie->open_reqs--;
	for (struct xs **pp = &ie->streams; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	/* every link to it goes (a request stream's peer may have been
	 * relinked, so not only x->peer's) */
	for (struct xs *o = ie->streams; o; o = o->next)
		if (o->peer == x)
			o->peer = NULL;
	for (struct xs *o = ie->streams; o; o = o->next)
		if (o->kind == I_GROUP_OUT) {
			for (uint32_t k = 0; k < o->nsgo; k++)
				if (o->sgo[k] == x)
					o->sgo[k] = NULL;
			if (o->cur_o == x)
				o->cur_o = NULL;
		} else if (o->kind == I_GROUP_IN && o->owner == x) {
			o->owner = NULL;
		}
	while (x->qh) {
		struct oq *q = x->qh;
		x->qh = q->next;
		oq_free(ie, q);
	}
	/* pooled, the record keeps its oldest arena when it is ARENA_MIN */
	while (x->ar && (!keep || x->ar->next || x->ar->cap != ARENA_MIN)) {
		struct arena *a = x->ar;
		x->ar = a->next;
		free(a);
	}
	if (x->ar) {
		x->ar->len = 0; /* kept with the record */
		x->ar->next = NULL;
	}
	if (ie->hit[0] == x)
		ie->hit[0] = NULL;
	if (ie->hit[1] == x)
		ie->hit[1] = NULL;
	if (ie->spare_sg == x)
		ie->spare_sg = NULL;
	if (ie->bo == x) {
		ie->bo = NULL;
		ie->bn = 0;
		ie->btotal = 0;
	}
	if (x->cg)
		moq_cache_group_unref(x->cg);
	if (x->ct)
		moq_cache_track_unref(x->ct);
	free(x->pext);
	free(x->ga);
	free(x->rx);
	free(x->prefix);
	if (keep) {
		x->next = ie->xpool;
		ie->xpool = x;
		ie->nxpool++;
		return;
	}
	free(x->mk);
	free(x);
}

static int rx_append(struct xs *x, const uint8_t *p, size_t n)
{
	if (x->rx_len + n > x->rx_cap) {
		size_t cap = x->rx_cap ? x->rx_cap * 2 : 256;
		uint8_t *r;
		while (cap < x->rx_len + n)
			cap *= 2;
		if (cap > (x->kind == X_SG_IN ? IE_SG_RX_MAX : 2 * IE_MSG_MAX + 65536))
			return MOQ_ERR_TOO_LARGE;
		r = realloc(x->rx, cap);
		if (!r)
			return MOQ_ERR_NOMEM;
		x->rx = r;
		x->rx_cap = cap;
	}
	if (n)
		memcpy(x->rx + x->rx_len, p, n);
	x->rx_len += n;
	return 0;
}

static void rx_consume(struct xs *x, size_t n)
{
	if (x->rx_len > n)
		memmove(x->rx, x->rx + n, x->rx_len - n);
	x->rx_len -= n;
	/* emptied: the buffer goes, but a client's subgroup stream's (its
	 * objects come through it). A subscriber's session kept four of
	 * 256 bytes (control and request streams) that one message each
	 * filled once */
	if (x->rx_len == 0 && x->kind != X_SG_IN) {
		free(x->rx);
		x->rx = NULL;
		x->rx_cap = 0;
	}
}

/* ---- inner acknowledgements (delivered outside the inner's calls) ---- */

static void ack_later(struct ietf_sess *ie, int64_t isid, uint64_t l)
{
	if (ie->nacks == ie->cacks) {
		uint32_t c = ie->cacks ? ie->cacks * 2 : 16;
		struct ie_ack *a = realloc(ie->acks, c * sizeof(*a));
		if (!a)
			return;
		ie->acks = a;
		ie->cacks = c;
	}
	ie->acks[ie->nacks].isid = isid;
	ie->acks[ie->nacks].l = l;
	ie->nacks++;
}

/* ---- outer writes ---- */

static void ox_flush(struct ietf_sess *ie, struct xs *x)
{
	while (!x->reset && ie->shell && ie->shell->tp) {
		struct iovec iov[16];
		size_t n = 0, total = 0;
		long w;
		int fin;

		for (struct oq *q = x->qs ? x->qs : x->qh; q && n < 16; q = q->next) {
			uint64_t end = q->off + q->len;
			if (end <= x->sent)
				continue;
			uint64_t skip = x->sent > q->off ? x->sent - q->off : 0;
			iov[n].iov_base = (uint8_t *)(uintptr_t)(q->ref ? q->ref : q->data) + skip;
			iov[n].iov_len = q->len - skip;
			total += iov[n].iov_len;
			n++;
		}
		fin = x->fin_q && !x->fin_sent && x->sent + total == x->q_end;
		if (!total && !fin)
			return;
		w = tp_write(ie->shell, x->sid, iov, n, fin);
		if (w < 0)
			return;
		x->sent += (uint64_t)w;
		if (!x->qs)
			x->qs = x->qh;
		while (x->qs && x->qs->next && x->qs->off + x->qs->len <= x->sent)
			x->qs = x->qs->next;
		if (fin && (size_t)w == total)
			x->fin_sent = 1;
		if ((size_t)w < total || !n)
			return;
	}
}

static void oq_link(struct xs *x, struct oq *q)
{
	if (x->qt)
		x->qt->next = q;
	else
		x->qh = q;
	x->qt = q;
	x->q_end += q->len;
}

static int ox_write(struct ietf_sess *ie, struct xs *x, const void *p, size_t n, int fin)
{
	if (!x || x->reset || x->fin_q)
		return MOQ_ERR_STATE;
	if (n && x->qt && !x->qt->ref && x->qt->cap - x->qt->len >= n) {
		/* the tail has room: bytes already handed to the transport do
		 * not move */
		memcpy(x->qt->data + x->qt->len, p, n);
		x->qt->len += (uint32_t)n;
		x->q_end += n;
	} else if (n) {
		size_t cap = n < OQ_MIN_CAP ? OQ_MIN_CAP : n;
		struct oq *q = malloc(sizeof(*q) + cap);
		if (!q)
			return MOQ_ERR_NOMEM;
		q->next = NULL;
		q->off = x->q_end;
		q->len = (uint32_t)n;
		q->cap = (uint32_t)cap;
		q->ref = NULL;
		memcpy(q->data, p, n);
		oq_link(x, q);
	}
	if (fin)
		x->fin_q = 1;
	ox_flush(ie, x);
	return 0;
}

static void ox_reset(struct ietf_sess *ie, struct xs *x, uint64_t code);

/* Write the gathered iovecs of ie->bo: straight to the transport when
 * nothing waits before them (what it takes is referenced there, nothing is
 * queued here), the rest as reference entries (ox_flush on writable). */
static void b_flush(struct ietf_sess *ie)
{
	struct xs *o = ie->bo;
	size_t total = ie->btotal, w = 0;
	uint32_t n = ie->bn;

	ie->bn = 0;
	ie->btotal = 0;
	if (!o || !n)
		return;
	if (o->reset || o->fin_q)
		return;
	if (o->sent == o->q_end && ie->shell && ie->shell->tp) {
		long r = tp_write(ie->shell, o->sid, ie->bv, n, 0);
		w = r > 0 ? (size_t)r : 0;
		o->sent += w;
		o->q_end += w;
	}
	if (w == total)
		return;
	for (uint32_t k = 0; k < n; k++) {
		size_t l = ie->bv[k].iov_len;
		struct oq *q;
		if (w >= l) {
			w -= l;
			continue;
		}
		q = ie->qpool;
		if (q) {
			ie->qpool = q->next;
			ie->nqpool--;
		} else if (!(q = malloc(sizeof(*q)))) {
			ox_reset(ie, o, 0); /* no memory: the client loses this group */
			return;
		}
		q->next = NULL;
		q->off = o->q_end;
		q->len = (uint32_t)(l - w);
		q->cap = 0;
		q->ref = (const uint8_t *)ie->bv[k].iov_base + w;
		w = 0;
		oq_link(o, q);
	}
	ox_flush(ie, o);
}

/* @n bytes at @p for subgroup stream @o, not copied (the inner's memory,
 * valid until its acknowledgement: struct oq), or (@copy) header bytes
 * copied into @o's arena. */
static void b_add(struct ietf_sess *ie, struct xs *o, const uint8_t *p, size_t n, int copy)
{
	struct iovec *last;

	if (!o || !n || o->reset || o->fin_q)
		return;
	if (ie->bo != o || ie->bn == BATCH_MAX) {
		b_flush(ie);
		ie->bo = o;
	}
	if (copy) {
		struct arena *a = o->ar;
		uint8_t *d;
		if (!a || a->cap - a->len < n) {
			size_t cap = n < ARENA_MIN ? ARENA_MIN : n;
			a = malloc(sizeof(*a) + cap);
			if (!a) {
				b_flush(ie);
				ox_reset(ie, o, 0);
				return;
			}
			a->len = 0;
			a->cap = (uint32_t)cap;
			a->next = o->ar;
			o->ar = a;
		}
		d = a->data + a->len;
		memcpy(d, p, n);
		a->len += (uint32_t)n;
		p = d;
	}
	ie->btotal += n;
	last = ie->bn ? &ie->bv[ie->bn - 1] : NULL;
	if (last && (const uint8_t *)last->iov_base + last->iov_len == p) {
		last->iov_len += n; /* contiguous: one iovec */
		return;
	}
	ie->bv[ie->bn].iov_base = (void *)(uintptr_t)p;
	ie->bv[ie->bn].iov_len = n;
	ie->bn++;
}

static void ox_reset(struct ietf_sess *ie, struct xs *x, uint64_t code)
{
	if (!x || x->reset || x->fin_sent)
		return;
	x->reset = 1;
	ie->scan = 1;
	if (ie->shell && ie->shell->tp)
		tp_reset(ie->shell, x->sid, code);
}

static struct xs *ox_open(struct ietf_sess *ie, int bidi, uint8_t kind)
{
	int64_t sid;
	struct xs *x;

	if (!ie->shell || !ie->shell->tp || tp_open(ie->shell, bidi, &sid) < 0)
		return NULL;
	x = xs_new(ie, 0, sid, kind);
	if (!x)
		ox_reset(ie, &(struct xs){.sid = sid}, 0);
	return x;
}

/* A mark: once the client acknowledged what @o holds now, the inner's
 * stream @i is acknowledged up to what it wrote so far. */
static void mark_push(struct ietf_sess *ie, struct xs *o, struct xs *i)
{
	if (!o || o->acked >= o->q_end) {
		ack_later(ie, i->sid, i->in_l);
		return;
	}
	if (o->nmk == o->cmk) {
		uint32_t c = o->cmk ? o->cmk * 2 : 8;
		struct mark *m = realloc(o->mk, c * sizeof(*m));
		if (!m)
			return;
		o->mk = m;
		o->cmk = c;
	}
	o->mk[o->nmk++] = (struct mark){o->q_end, i->sid, i->in_l, 0};
}

/* A group on several subgroup streams (@i->multi): the inner's
 * acknowledgements up to the head entries whose marks all fired. */
static void ga_pop(struct ietf_sess *ie, struct xs *i)
{
	uint32_t k = 0;

	while (k < i->nga && i->ga[k].n == 0)
		ack_later(ie, i->sid, i->ga[k++].l);
	if (k) {
		memmove(i->ga, i->ga + k, (i->nga - k) * sizeof(*i->ga));
		i->nga -= k;
	}
}

static struct gack *ga_push(struct xs *i, uint64_t l)
{
	if (i->nga == i->cga) {
		uint32_t c = i->cga ? i->cga * 2 : 8;
		struct gack *g = realloc(i->ga, c * sizeof(*g));
		if (!g)
			return NULL;
		i->ga = g;
		i->cga = c;
	}
	i->ga[i->nga] = (struct gack){l, 0};
	return &i->ga[i->nga++];
}

static int mark_add(struct xs *o, const struct mark *m)
{
	if (o->nmk == o->cmk) {
		uint32_t c = o->cmk ? o->cmk * 2 : 8;
		struct mark *n = realloc(o->mk, c * sizeof(*n));
		if (!n)
			return -1;
		o->mk = n;
		o->cmk = c;
	}
	o->mk[o->nmk++] = *m;
	return 0;
}

/* The outer streams group @i is sent on: its first (peer) and the others. */
static struct xs *g_out(struct xs *i, uint32_t k)
{
	return k == 0 ? i->peer : i->sgo[k - 1];
}

/* What group @i wrote so far is acknowledged to the inner once the client
 * acknowledged what each of its outer streams holds now. */
static void group_mark(struct ietf_sess *ie, struct xs *i)
{
	struct gack *g;

	if (!i->multi) {
		mark_push(ie, i->peer, i);
		return;
	}
	if (!(g = ga_push(i, i->in_l)))
		return;
	for (uint32_t k = 0; k <= i->nsgo; k++) {
		struct xs *o = g_out(i, k);
		if (o && !o->reset && o->acked < o->q_end &&
		    mark_add(o, &(struct mark){o->q_end, i->sid, i->in_l, 1}) == 0)
			g->n++;
	}
	ga_pop(ie, i);
}

/* A mark of a group on several streams fired. */
static void ga_fired(struct ietf_sess *ie, int64_t isid, uint64_t l)
{
	struct xs *i = xs_find(ie, 1, isid);

	if (!i || i->kind != I_GROUP_OUT)
		return;
	for (uint32_t k = 0; k < i->nga; k++)
		if (i->ga[k].l == l && i->ga[k].n) {
			i->ga[k].n--;
			break;
		}
	ga_pop(ie, i);
}

/* Every outer stream of group @i is over: reset, gone, or finished and
 * acknowledged. */
static bool group_out_done(const struct xs *i)
{
	for (uint32_t k = 0; k <= i->nsgo; k++) {
		const struct xs *o = k == 0 ? i->peer : i->sgo[k - 1];
		if (o && !o->reset && !o->gone && !(o->fin_sent && o->acked >= o->q_end))
			return false;
	}
	return true;
}

/* ---- control messages out ---- */

static void fail_session_at(struct ietf_sess *ie, uint64_t code, int line);
#define fail_session(ie, code) fail_session_at((ie), (code), __LINE__)

static void fail_session_at(struct ietf_sess *ie, uint64_t code, int line)
{
	if (ie->closing)
		return;
	(void)line; /* the call site, for a debugger */
	ie->closing = 1;
	ie->close_code = code;
}

static int send_msg_on(struct ietf_sess *ie, struct xs *x, const struct moq_ietf_msg *m, int fin)
{
	static uint8_t buf[IE_MSG_MAX];
	int n = moq_ietf_msg_encode(buf, sizeof(buf), ie->d, m);

	if (n < 0)
		return n;
	return ox_write(ie, x, buf, (size_t)n, fin);
}

/* The stream a request's messages travel on: its own (17+, and 16's
 * SUBSCRIBE_NAMESPACE), else the control stream. */
static struct xs *req_stream(struct ietf_sess *ie, struct xs *inner_x)
{
	if (inner_x && inner_x->peer)
		return inner_x->peer;
	return xs_find(ie, 0, ie->control_sid);
}

static void send_req_error(struct ietf_sess *ie, struct xs *on, uint64_t req_id, uint64_t code,
                           const char *why, enum moq_ietf_kind d14_kind)
{
	struct moq_ietf_msg m = {0};

	m.kind = ie->d == MOQ_IETF_14 ? d14_kind : IETF_REQUEST_ERROR;
	m.request_id = req_id;
	m.code = code;
	m.reason = (struct moq_str){why, strlen(why)};
	send_msg_on(ie, on, &m, on && on->kind == X_REQ_IN);
}

/* ---- namespaces ---- */

/* Unescape a tuple field of a path (moq_ietf_path_to_ns keeps "\/"). */
static size_t unescape(char *dst, const struct moq_str *f)
{
	size_t o = 0;

	for (size_t i = 0; i < f->len; i++) {
		if (f->p[i] == '\\' && i + 1 < f->len)
			i++;
		dst[o++] = f->p[i];
	}
	return o;
}

/* Fill @m's namespace from the path @p: fields point into @scratch. */
static int ns_from_path(struct moq_ietf_msg *m, const char *p, size_t len, char *scratch)
{
	struct moq_str f[MOQ_IETF_MAX_NS];
	int n = moq_ietf_path_to_ns(p, len, f);
	size_t o = 0;

	if (n < 0)
		return n;
	m->ns_n = (uint32_t)n;
	for (int i = 0; i < n; i++) {
		size_t l = unescape(scratch + o, &f[i]);
		m->ns[i] = (struct moq_str){scratch + o, l};
		o += l;
	}
	return 0;
}

/* ---- into the inner session ---- */

static void in_data(struct ietf_sess *ie, int64_t isid, const void *p, size_t n, int fin)
{
	if (ie->inner && !ie->dead)
		moq_binding_stream_data(ie->inner, isid, p, n, fin);
}

static int in_send(struct ietf_sess *ie, struct xs *i, int64_t stype, const struct moq_msg *m,
                   int fin)
{
	uint8_t buf[IE_MSG_MAX];
	size_t o = 0;
	int n;

	if (stype >= 0)
		o += (size_t)moq_varint_put(buf, sizeof(buf), (uint64_t)stype);
	n = moq_msg_encode(buf + o, sizeof(buf) - o, MOQ_LITE_04, m);
	if (n < 0)
		return n;
	in_data(ie, i->sid, buf, o + (size_t)n, fin);
	if (fin)
		i->i_in_done = 1;
	return 0;
}

static struct xs *in_open(struct ietf_sess *ie, int bidi, uint8_t kind)
{
	int64_t sid;

	if (bidi) {
		sid = ie->next_ibidi;
		ie->next_ibidi += 4;
	} else {
		sid = ie->next_iuni;
		ie->next_iuni += 4;
	}
	{
		struct xs *x = xs_new(ie, 1, sid, kind);
		if (x)
			x->typed = 1; /* the inner's replies carry no stream type */
		return x;
	}
}

/* ---- the client's requests ---- */

static struct xs *find_kind(struct ietf_sess *ie, uint8_t kind, uint64_t key, int by_alias)
{
	for (struct xs *x = ie->streams; x; x = x->next)
		if (x->inner && x->kind == kind && !x->gone &&
		    (by_alias ? x->alias == key : x->req_id == key))
			return x;
	return NULL;
}

static struct xs *find_lite(struct ietf_sess *ie, uint8_t kind, uint64_t lite_id)
{
	for (struct xs *x = ie->streams; x; x = x->next)
		if (x->inner && x->kind == kind && !x->gone && x->lite_id == lite_id)
			return x;
	return NULL;
}

/* draft-14 9.1 / 3.3: client request ids are even, from 0, each 2 above the
 * last; 14-16 bound them by MAX_REQUEST_ID. */
static int check_req_id(struct ietf_sess *ie, uint64_t id)
{
	if (id != ie->next_peer_req) {
		fail_session(ie, IETF_CLOSE_INVALID_REQUEST_ID);
		return -1;
	}
	if (ie->d <= MOQ_IETF_16 && id >= ie->max_granted) {
		fail_session(ie, IETF_CLOSE_TOO_MANY_REQUESTS);
		return -1;
	}
	ie->next_peer_req += 2;
	ie->open_reqs++;
	return 0;
}

static void on_client_subscribe(struct ietf_sess *ie, struct xs *ox, const struct moq_ietf_msg *m)
{
	char path[MOQ_IETF_MAX_NAME + MOQ_IETF_MAX_NS * 2];
	int pl = moq_ietf_ns_to_path(path, sizeof(path), m->ns, m->ns_n);
	struct moq_msg sm = {.type = MOQ_MSG_SUBSCRIBE};
	struct xs *i;

	if (pl < 0) {
		send_req_error(ie, ox, m->request_id, IETF_REQ_DOES_NOT_EXIST, "bad namespace",
		               IETF_SUBSCRIBE_ERROR);
		return;
	}
	i = in_open(ie, 1, I_SUB_IN);
	if (!i) {
		send_req_error(ie, ox, m->request_id, IETF_REQ_INTERNAL, "memory",
		               IETF_SUBSCRIBE_ERROR);
		return;
	}
	i->req_id = m->request_id;
	i->alias = m->request_id; /* as @moq/net: the track alias is the request id */
	/* kept for a joining FETCH: "path\0track" */
	if ((i->prefix = malloc((size_t)pl + m->name.len + 1))) {
		memcpy(i->prefix, path, (size_t)pl);
		i->prefix[pl] = '\0';
		memcpy(i->prefix + pl + 1, m->name.p, m->name.len);
		i->plen = (size_t)pl;
		i->lite_tlen = m->name.len;
	}
	i->lite_id = ie->next_lite_id++;
	i->is_req = 1;
	/* forward 0: subscribed (SUBSCRIBE_OK, the relay reads the track) but
	 * no group goes out until an update sets forward 1 */
	i->paused = !m->forward;
	if (ox) {
		i->peer = ox;
		ox->peer = i;
	}
	sm.u.subscribe.id = i->lite_id;
	sm.u.subscribe.broadcast = (struct moq_str){path, (size_t)pl};
	sm.u.subscribe.track = m->name;
	sm.u.subscribe.priority = m->priority;
	sm.u.subscribe.ordered = m->group_order == 1;
	sm.u.subscribe.max_latency_ms = 0;
	sm.u.subscribe.start = MOQ_GROUP_NONE;
	sm.u.subscribe.end = MOQ_GROUP_NONE;
	{
		/* DELIVERY_TIMEOUT (ms): lite's max latency, groups older go */
		const struct moq_ietf_param *dt =
		        moq_ietf_param_get(&m->params, IETF_PARAM_DELIVERY_TIMEOUT);
		if (dt)
			sm.u.subscribe.max_latency_ms = dt->v;
	}
	if (m->filter.kind == IETF_F_ABSOLUTE) {
		sm.u.subscribe.start = m->filter.start.group;
		if (m->filter.has_end)
			sm.u.subscribe.end = m->filter.end_group;
	}
	if (ie->d >= MOQ_IETF_20 && m->has_fill) {
		i->fill_req = 1;
		i->fill = m->fill;
		i->sfilter = m->filter;
	}
	i->su.priority = sm.u.subscribe.priority;
	i->su.ordered = sm.u.subscribe.ordered;
	i->su.max_latency_ms = sm.u.subscribe.max_latency_ms;
	i->su.start = sm.u.subscribe.start;
	i->su.end = sm.u.subscribe.end;
	in_send(ie, i, MOQ_STREAM_SUBSCRIBE, &sm, 0);
}

static void client_unsubscribe(struct ietf_sess *ie, struct xs *i)
{
	if (!i || i->i_in_done)
		return;
	i->i_in_done = 1;
	in_data(ie, i->sid, NULL, 0, 1); /* lite: subscriber FIN = unsubscribe */
}

/* An update refused: REQUEST_ERROR (14: SUBSCRIBE_ERROR) without ending
 * the request stream (17+: it is the subscription's). */
static void upd_refuse(struct ietf_sess *ie, struct xs *on, uint64_t req_id, uint64_t code,
                       const char *why)
{
	struct moq_ietf_msg e = {0};

	e.kind = ie->d == MOQ_IETF_14 ? IETF_SUBSCRIBE_ERROR : IETF_REQUEST_ERROR;
	e.request_id = req_id;
	e.code = code;
	e.reason = (struct moq_str){why, strlen(why)};
	send_msg_on(ie, on, &e, 0);
}

/* SUBSCRIBE_UPDATE (14-16) / REQUEST_UPDATE (17+) of a client's
 * subscription: priority, end and start (a later start only), delivery
 * timeout become a lite SUBSCRIBE_UPDATE (which restates every field);
 * forward pauses and resumes it here (lite has no pause: the groups that
 * begin while it is paused are cancelled for this session, a group under
 * way when it pauses ends whole, forwarding resumes with the next group
 * that begins). Its Request ID is a new one
 * (moq-transport's reading) or the subscription's (@moq/net routes it so):
 * the next id is taken when it is that, and nothing is refused for it. */
static void on_sub_update(struct ietf_sess *ie, struct xs *ox, const struct moq_ietf_msg *m)
{
	struct xs *on = ox ? ox : xs_find(ie, 0, ie->control_sid);
	struct xs *i = NULL;
	struct moq_msg u = {.type = MOQ_MSG_SUBSCRIBE_UPDATE};
	struct moq_subscribe_update *su = &u.u.subscribe_update;
	const struct moq_ietf_param *p;
	uint64_t start = MOQ_GROUP_NONE, end = MOQ_GROUP_NONE;
	int fwd = 1;

	if (m->request_id == ie->next_peer_req) {
		if (check_req_id(ie, m->request_id) < 0)
			return;
		ie->open_reqs--; /* answered at once */
	}
	if (ox) /* 17+: the subscription's own request stream */
		i = ox->peer && ox->peer->kind == I_SUB_IN ? ox->peer : NULL;
	else if (!(i = find_kind(ie, I_SUB_IN, m->sub_request_id, 0)))
		i = find_kind(ie, I_SUB_IN, m->request_id, 0);
	if (!i || i->i_in_done || i->gone) {
		upd_refuse(ie, on, m->request_id, IETF_REQ_DOES_NOT_EXIST, "no such subscription");
		return;
	}
	*su = i->su;
	fwd = !i->paused; /* 15+: kept unless a FORWARD parameter says */
	if (ie->d == MOQ_IETF_14) {
		su->priority = m->priority;
		fwd = m->forward;
		if (m->start.group)
			start = m->start.group;
		if (m->end_group) /* the end group plus 1; 0 open */
			end = m->end_group - 1;
	} else {
		struct moq_ietf_filter f;
		if ((p = moq_ietf_param_get(&m->params, IETF_PARAM_SUBSCRIBER_PRIORITY))) {
			if (p->v > 255) {
				fail_session(ie, IETF_CLOSE_PROTOCOL_VIOLATION);
				return;
			}
			su->priority = (uint8_t)p->v;
		}
		if ((p = moq_ietf_param_get(&m->params, IETF_PARAM_FORWARD)))
			fwd = p->v != 0;
		if ((p = moq_ietf_param_get(&m->params, IETF_PARAM_SUBSCRIPTION_FILTER))) {
			if (moq_ietf_filter_decode((const uint8_t *)p->b.p, p->b.len, ie->d, &f) < 0) {
				fail_session(ie, IETF_CLOSE_PROTOCOL_VIOLATION);
				return;
			}
			if (f.kind == IETF_F_ABSOLUTE) {
				start = f.start.group;
				if (f.has_end)
					end = f.end_group;
			}
		}
	}
	if ((p = moq_ietf_param_get(&m->params, IETF_PARAM_DELIVERY_TIMEOUT)))
		su->max_latency_ms = p->v;
	/* a subscription only narrows: a later start, an end */
	if (start != MOQ_GROUP_NONE && (su->start == MOQ_GROUP_NONE || start > su->start))
		su->start = start;
	if (end != MOQ_GROUP_NONE)
		su->end = end;
	if (su->end != MOQ_GROUP_NONE && su->start != MOQ_GROUP_NONE && su->end < su->start) {
		upd_refuse(ie, on, m->request_id, IETF_REQ_INVALID_RANGE, "end before start");
		return;
	}
	i->su = *su;
	i->paused = !fwd;
	in_send(ie, i, -1, &u, 0);
	if (ie->d >= MOQ_IETF_15) {
		struct moq_ietf_msg ok = {0};
		ok.kind = IETF_REQUEST_OK;
		ok.request_id = m->request_id;
		send_msg_on(ie, on, &ok, 0);
	}
}

/* The relay's announce request @a (I_ANN_OUT) learns @path, if its
 * prefix covers it. */
static void announce_one(struct ietf_sess *ie, struct xs *a, const char *path, size_t pl,
                         int active)
{
	size_t off = 0;
	struct moq_msg am = {.type = MOQ_MSG_ANNOUNCE};

	if (a->plen && !moq_path_has_prefix(a->prefix, a->plen, path, pl, &off))
		return;
	am.u.announce.status = active ? MOQ_ANNOUNCE_ACTIVE : MOQ_ANNOUNCE_ENDED;
	am.u.announce.suffix = (struct moq_str){path + off, pl - off};
	while (am.u.announce.suffix.len && am.u.announce.suffix.p[0] == '/') {
		am.u.announce.suffix.p++;
		am.u.announce.suffix.len--;
	}
	in_send(ie, a, -1, &am, 0);
}

/* Every announce request of the relay learns @path. */
static void announce_to_inner(struct ietf_sess *ie, const char *path, size_t pl, int active)
{
	for (struct xs *a = ie->streams; a; a = a->next)
		if (a->inner && a->kind == I_ANN_OUT && !a->gone && !a->i_in_done)
			announce_one(ie, a, path, pl, active);
}

/* A record that announces a path: a PUBLISH_NAMESPACE's (is_req 2) or a
 * PUBLISH's (3: its namespace, implicitly, as moq-relay does). */
static int ann_holder(const struct xs *x)
{
	return x->inner && (x->is_req == 2 || x->is_req == 3) && !x->gone;
}

/* Another record than @except holds @path (scanning up to @until, or all):
 * the inner hears of a path once, however many announce it. */
static int path_held(struct ietf_sess *ie, const char *path, size_t pl, const struct xs *except,
                     const struct xs *until)
{
	for (struct xs *x = ie->streams; x && x != until; x = x->next)
		if (x != except && ann_holder(x) && x->plen == pl && !memcmp(x->prefix, path, pl))
			return 1;
	return 0;
}

/* The relay's announce request @a came after some of the client's
 * PUBLISH_NAMESPACEs (the inner session asks only once it is admitted:
 * --auth-url answers later): it learns the namespaces announced so far. */
static void announce_replay(struct ietf_sess *ie, struct xs *a)
{
	for (struct xs *r = ie->streams; r; r = r->next)
		if (ann_holder(r) && !path_held(ie, r->prefix, r->plen, r, r))
			announce_one(ie, a, r->prefix, r->plen, 1);
}

/* A client's PUBLISH_NAMESPACE: a record (outer request stream or none)
 * keeps its path so DONE (or the stream's end) withdraws it. */
static void on_publish_namespace(struct ietf_sess *ie, struct xs *ox, const struct moq_ietf_msg *m)
{
	char path[MOQ_IETF_MAX_NAME + MOQ_IETF_MAX_NS * 2];
	int pl = moq_ietf_ns_to_path(path, sizeof(path), m->ns, m->ns_n);
	struct moq_ietf_msg ok = {0};
	struct xs *rec;

	if (pl <= 0) {
		send_req_error(ie, ox, m->request_id, IETF_REQ_DOES_NOT_EXIST, "bad namespace",
		               IETF_PUBLISH_NAMESPACE_ERROR);
		return;
	}
	/* a record of the announce: an inner-side entry without a stream */
	rec = xs_new(ie, 1, -1, I_OTHER);
	if (!rec || !(rec->prefix = memdup0(path, (size_t)pl))) {
		send_req_error(ie, ox, m->request_id, IETF_REQ_INTERNAL, "memory",
		               IETF_PUBLISH_NAMESPACE_ERROR);
		return;
	}
	rec->plen = (size_t)pl;
	rec->req_id = m->request_id;
	rec->is_req = 2; /* an announce record */
	if (ox) {
		rec->peer = ox;
		ox->peer = rec;
	}
	if (!path_held(ie, path, (size_t)pl, rec, NULL))
		announce_to_inner(ie, path, (size_t)pl, 1);
	ok.kind = ie->d == MOQ_IETF_14 ? IETF_PUBLISH_NAMESPACE_OK : IETF_REQUEST_OK;
	ok.request_id = m->request_id;
	send_msg_on(ie, ox ? ox : xs_find(ie, 0, ie->control_sid), &ok, 0);
}

static void unannounce(struct ietf_sess *ie, struct xs *rec)
{
	if (!rec || rec->gone)
		return;
	rec->gone = 1;
	if (!path_held(ie, rec->prefix, rec->plen, rec, NULL))
		announce_to_inner(ie, rec->prefix, rec->plen, 0);
}

static struct xs *announce_by_ns(struct ietf_sess *ie, const struct moq_ietf_msg *m)
{
	char path[MOQ_IETF_MAX_NAME + MOQ_IETF_MAX_NS * 2];
	int pl = moq_ietf_ns_to_path(path, sizeof(path), m->ns, m->ns_n);

	for (struct xs *x = ie->streams; x && pl > 0; x = x->next)
		if (x->inner && x->is_req == 2 && !x->gone && x->plen == (size_t)pl &&
		    !memcmp(x->prefix, path, (size_t)pl))
			return x;
	return NULL;
}

static void on_subscribe_namespace(struct ietf_sess *ie, struct xs *ox,
                                   const struct moq_ietf_msg *m)
{
	char path[MOQ_IETF_MAX_NAME + MOQ_IETF_MAX_NS * 2];
	int pl = m->ns_n ? moq_ietf_ns_to_path(path, sizeof(path), m->ns, m->ns_n) : 0;
	struct moq_msg am = {.type = MOQ_MSG_ANNOUNCE_REQ};
	struct moq_ietf_msg ok = {0};
	struct xs *i;

	if (pl < 0 || !(i = in_open(ie, 1, I_ANN_IN))) {
		send_req_error(ie, ox, m->request_id, IETF_REQ_DOES_NOT_EXIST, "bad prefix",
		               IETF_SUBSCRIBE_NAMESPACE_ERROR);
		return;
	}
	i->req_id = m->request_id;
	i->is_req = 1;
	if (pl > 0 && !(i->prefix = memdup0(path, (size_t)pl)))
		return;
	i->plen = (size_t)pl;
	if (ox) {
		i->peer = ox;
		ox->peer = i;
	}
	ok.kind = ie->d == MOQ_IETF_14 ? IETF_SUBSCRIBE_NAMESPACE_OK : IETF_REQUEST_OK;
	ok.request_id = m->request_id;
	send_msg_on(ie, req_stream(ie, i), &ok, 0);
	am.u.announce_req.prefix = (struct moq_str){path, (size_t)pl};
	in_send(ie, i, MOQ_STREAM_ANNOUNCE, &am, 0);
}

/* ---- PUBLISH: a track the client pushes ---- */

/* A client's PUBLISH is a record (inner side, no stream; is_req 3) of
 * "path\0track" and its alias: it announces the namespace (implicitly, as
 * moq-relay does; path_held keeps the inner hearing of a path once), and
 * the relay's subscription to that track is bound to it (relay_subscribe:
 * no SUBSCRIBE goes out, the client's subgroup streams of the alias feed
 * it). Groups that arrive while nobody reads the track are refused like
 * any stream of an alias without a subscription (STOP_SENDING). */
static struct xs *publish_find(struct ietf_sess *ie, const char *path, size_t pl, const char *track,
                               size_t tl)
{
	for (struct xs *x = ie->streams; x; x = x->next)
		if (x->inner && x->is_req == 3 && !x->gone && x->plen == pl && x->lite_tlen == tl &&
		    !memcmp(x->prefix, path, pl) && !memcmp(x->prefix + pl + 1, track, tl))
			return x;
	return NULL;
}

/* The PUBLISH a PUBLISH_DONE (or a request stream's end) is about. */
static struct xs *publish_of(struct ietf_sess *ie, struct xs *ox, uint64_t req_id)
{
	if (ox)
		return ox->peer && ox->peer->is_req == 3 && !ox->peer->gone ? ox->peer : NULL;
	for (struct xs *x = ie->streams; x; x = x->next)
		if (x->inner && x->is_req == 3 && !x->gone && x->req_id == req_id)
			return x;
	return NULL;
}

/* 0: the PUBLISH holds its request; -1: answered with an error. */
static int on_publish(struct ietf_sess *ie, struct xs *ox, const struct moq_ietf_msg *m)
{
	char path[MOQ_IETF_MAX_NAME + MOQ_IETF_MAX_NS * 2];
	int pl = moq_ietf_ns_to_path(path, sizeof(path), m->ns, m->ns_n);
	struct xs *on = ox ? ox : xs_find(ie, 0, ie->control_sid);
	struct moq_ietf_msg ok = {0};
	struct xs *p;

	if (pl <= 0) {
		send_req_error(ie, on, m->request_id, IETF_REQ_DOES_NOT_EXIST, "bad namespace",
		               IETF_PUBLISH_ERROR);
		return -1;
	}
	/* the alias names one track of the session (draft-14 9.1) */
	for (p = ie->streams; p; p = p->next)
		if (p->inner && !p->gone && p->alias == m->track_alias &&
		    (p->is_req == 3 || (p->kind == I_SUB_OUT && p->ok_sent && !p->pub_bound))) {
			fail_session(ie, IETF_CLOSE_DUPLICATE_TRACK_ALIAS);
			return -1;
		}
	if (publish_find(ie, path, (size_t)pl, m->name.p, m->name.len)) {
		send_req_error(ie, on, m->request_id, IETF_REQ_DUPLICATE, "already published",
		               IETF_PUBLISH_ERROR);
		return -1;
	}
	p = xs_new(ie, 1, -1, I_OTHER);
	if (!p || !(p->prefix = malloc((size_t)pl + m->name.len + 1))) {
		send_req_error(ie, on, m->request_id, IETF_REQ_INTERNAL, "memory",
		               IETF_PUBLISH_ERROR);
		if (p)
			p->gone = 1;
		return -1;
	}
	memcpy(p->prefix, path, (size_t)pl);
	p->prefix[pl] = '\0';
	memcpy(p->prefix + pl + 1, m->name.p, m->name.len);
	p->plen = (size_t)pl;
	p->lite_tlen = m->name.len;
	p->req_id = m->request_id;
	p->alias = m->track_alias;
	p->is_req = 3;
	if (ox) {
		p->peer = ox;
		ox->peer = p;
	}
	if (!path_held(ie, path, (size_t)pl, p, NULL))
		announce_to_inner(ie, path, (size_t)pl, 1);
	/* accepted, forwarding from the live edge (20: REQUEST_OK) */
	ok.request_id = m->request_id;
	if (ie->d >= MOQ_IETF_20) {
		ok.kind = IETF_REQUEST_OK;
	} else {
		ok.kind = IETF_PUBLISH_OK;
		ok.forward = 1;
		ok.priority = 128;
		ok.group_order = 2;
		ok.filter.kind = IETF_F_NEXT_OBJECT;
		if (ie->d >= MOQ_IETF_15)
			moq_ietf_param_add(&ok.params, IETF_PARAM_FORWARD, 1, (struct moq_str){0});
	}
	send_msg_on(ie, on, &ok, 0);
	return 0;
}

/* The client's track ends (PUBLISH_DONE, or its request stream ended):
 * the relay's subscription to it ends (lite: the publisher's FIN) and the
 * namespace goes unless something else announces it. */
static void pub_end(struct ietf_sess *ie, struct xs *p)
{
	if (!p || p->gone || p->is_req != 3)
		return;
	for (struct xs *i = ie->streams; i; i = i->next)
		if (i->inner && i->kind == I_SUB_OUT && i->pub_bound && !i->gone &&
		    i->req_id == p->req_id && !i->i_in_done) {
			i->i_in_done = 1;
			in_data(ie, i->sid, NULL, 0, 1);
		}
	unannounce(ie, p);
}

/* ---- replies to the relay's requests (client -> relay) ---- */

static void early_replay(struct ietf_sess *ie, uint64_t alias);

/* The relay's subscription @i is served: SUBSCRIBE_OK into the inner. */
static void inner_sub_ok(struct ietf_sess *ie, struct xs *i)
{
	struct moq_msg r = {.type = MOQ_MSG_SUBSCRIBE_REPLY};

	i->ok_sent = 1;
	r.u.subscribe_reply.kind = MOQ_SUB_OK;
	r.u.subscribe_reply.priority = 128;
	r.u.subscribe_reply.ordered = false;
	r.u.subscribe_reply.max_latency_ms = 0;
	r.u.subscribe_reply.start = MOQ_GROUP_NONE;
	r.u.subscribe_reply.end = MOQ_GROUP_NONE;
	in_send(ie, i, -1, &r, 0);
}

static void on_sub_reply(struct ietf_sess *ie, struct xs *i, const struct moq_ietf_msg *m)
{
	if (!i || i->kind != I_SUB_OUT)
		return;
	if (m->kind == IETF_SUBSCRIBE_OK) {
		i->alias = m->track_alias;
		inner_sub_ok(ie, i);
		if (ie->nearly)
			early_replay(ie, i->alias);
	} else if (m->kind == IETF_PUBLISH_DONE) {
		if (!i->i_in_done) {
			i->i_in_done = 1;
			in_data(ie, i->sid, NULL, 0, 1);
		}
	} else { /* SUBSCRIBE_ERROR / REQUEST_ERROR */
		if (!i->i_in_done) {
			i->i_in_done = 1;
			if (ie->inner)
				moq_binding_stream_reset(ie->inner, i->sid,
				                         m->code == IETF_REQ_UNAUTHORIZED
				                                 ? MOQ_CODE_UNAUTHORIZED
				                                 : MOQ_CODE_NOT_FOUND);
		}
		if (ie->nearly)
			early_replay(ie, UINT64_MAX); /* none is its: gone if nothing awaits */
	}
}

/* ---- FETCH, served from the relay's cache ---- */

/* The relay's cache track of broadcast @path (a namespace as a path, under
 * the session's root) and @track, or NULL. */
static struct moq_cache_track *cached_track(struct ietf_sess *ie, const char *path, size_t pl,
                                            const char *track, size_t tlen)
{
	struct upstream *up;
	char *full = NULL;
	size_t flen = 0;

	if (!ie->inner ||
	    path_norm_join(ie->inner->root, ie->inner->rootlen, path, pl, &full, &flen) < 0 ||
	    !full)
		return NULL;
	up = up_find(ie->n, full, flen, track, tlen);
	free(full);
	return up ? up->ct : NULL;
}

/* Write objects @lo..@hi (inclusive) of group @seq of @ct (its complete
 * frames so far) as FETCH objects on @o; *@first_obj gets the first one
 * written, *@last_obj the last. Returns how many. */
static int fetch_group(struct ietf_sess *ie, struct xs *o, struct moq_cache_track *ct, uint64_t seq,
                       uint64_t lo, uint64_t hi, struct moq_ietf_fetch_obj *prev, int *have_prev,
                       uint64_t *first_obj, uint64_t *last_obj)
{
	struct moq_cache_group *g;
	struct moq_cache_cursor cur = {0};
	int n = 0;

	if (moq_cache_track_group(ct, seq, &g) < 0)
		return 0; /* gone or skipped: nothing of it */
	for (;;) {
		struct moq_cache_frame f[16];
		int k = moq_cache_read_frames(g, &cur, f, 16);

		if (k <= 0)
			break;
		for (int i = 0; i < k; i++) {
			struct moq_ietf_fetch_obj ob = {0};
			static uint8_t hb[MOQ_CACHE_EXT_MAX + 64];
			int hn;

			if (!moq_cache_frame_complete(&f[i]) || f[i].start)
				continue; /* a frame still arriving: not fetched */
			ob.group = seq;
			ob.object = f[i].index;
			{
				/* an IETF publisher's location and extension headers
				 * (objects in the order they came: by object id
				 * within each subgroup) */
				struct moq_cache_meta fm;
				if (moq_cache_frame_meta(g, f[i].index, &fm) == 0) {
					if (fm.has_loc) {
						ob.subgroup = fm.subgroup;
						ob.object = fm.object;
					}
					if (fm.ext_len) {
						ob.has_ext = true;
						ob.ext = (struct moq_str){(const char *)fm.ext,
						                          fm.ext_len};
					}
				}
			}
			if (ob.object < lo || ob.object > hi)
				continue;
			ob.priority = 128;
			ob.payload_len = f[i].size;
			hn = moq_ietf_fetch_obj_encode_head(hb, sizeof(hb), ie->d,
			                                    *have_prev ? prev : NULL, &ob);
			if (hn < 0)
				break;
			ox_write(ie, o, hb, (size_t)hn, 0);
			if (f[i].data) {
				ox_write(ie, o, f[i].data, f[i].len, 0);
			} else {
				struct iovec iov[16];
				int ni = moq_cache_group_iov(g, f[i].offset, f[i].len, iov, 16);
				for (int j = 0; j < ni; j++)
					ox_write(ie, o, iov[j].iov_base, iov[j].iov_len, 0);
			}
			*prev = ob;
			*have_prev = 1;
			if (!n)
				*first_obj = ob.object;
			*last_obj = ob.object;
			n++;
		}
	}
	moq_cache_group_unref(g);
	return n;
}

static void on_fetch(struct ietf_sess *ie, struct xs *ox, const struct moq_ietf_msg *m)
{
	char path[MOQ_IETF_MAX_NAME + MOQ_IETF_MAX_NS * 2];
	const char *track;
	size_t tlen;
	int pl;
	struct moq_cache_track *ct;
	uint64_t latest = 0, start, end, first_obj = 0, last_obj = 0;
	struct moq_ietf_fetch_obj prev;
	int have_prev = 0;
	struct xs *o;
	struct moq_ietf_msg ok = {0};
	enum moq_ietf_kind ek = IETF_FETCH_ERROR;
	struct xs *on = ox ? ox : xs_find(ie, 0, ie->control_sid);
	uint8_t hb[32];
	int hn;

	if (ie->d < MOQ_IETF_20 && m->fetch_type != IETF_FETCH_STANDALONE) {
		/* joining: the track of the client's subscription @joining_id */
		struct xs *j = find_kind(ie, I_SUB_IN, m->joining_id, 0);
		if (!j || !j->prefix) {
			send_req_error(ie, on, m->request_id, IETF_REQ_DOES_NOT_EXIST,
			               "no such subscription", ek);
			return;
		}
		memcpy(path, j->prefix, j->plen);
		pl = (int)j->plen;
		track = j->prefix + j->plen + 1;
		tlen = j->lite_tlen;
	} else {
		pl = moq_ietf_ns_to_path(path, sizeof(path), m->ns, m->ns_n);
		track = m->name.p;
		tlen = m->name.len;
	}
	if (pl < 0) {
		send_req_error(ie, on, m->request_id, IETF_REQ_DOES_NOT_EXIST, "bad namespace", ek);
		return;
	}
	ct = cached_track(ie, path, (size_t)pl, track, tlen);
	if (!ct || moq_cache_track_latest(ct, &latest) < 0) {
		send_req_error(ie, on, m->request_id, IETF_REQ_DOES_NOT_EXIST, "not in the cache",
		               ek);
		return;
	}
	/* the range, in groups */
	if (ie->d >= MOQ_IETF_20) {
		start = m->filter.kind == IETF_F_ABSOLUTE ? m->filter.start.group : 0;
		end = m->filter.kind == IETF_F_ABSOLUTE && m->filter.has_end ? m->filter.end_group
		                                                             : latest;
		if (m->filter.kind == IETF_F_RELATIVE)
			start = latest + 1 > m->filter.groups ? latest + 1 - m->filter.groups : 0;
	} else if (m->fetch_type == IETF_FETCH_STANDALONE) {
		start = m->start.group;
		end = m->end.group;
	} else if (m->fetch_type == IETF_FETCH_RELATIVE_JOINING) {
		/* draft-14 9.16.2: the joining_start groups before the live edge */
		start = latest > m->joining_start ? latest - m->joining_start : 0;
		end = latest;
	} else {
		start = m->joining_start;
		end = latest;
	}
	if (end > latest)
		end = latest;
	if (start > end) {
		send_req_error(ie, on, m->request_id, IETF_REQ_INVALID_RANGE, "invalid range", ek);
		return;
	}
	o = ox_open(ie, 0, X_SG_OUT);
	if (!o) {
		send_req_error(ie, on, m->request_id, IETF_REQ_INTERNAL, "no stream", ek);
		return;
	}
	/* FETCH_OK first, then the FETCH stream: type 0x05, request id,
	 * objects in ascending order */
	ok.kind = IETF_FETCH_OK;
	ok.request_id = m->request_id;
	ok.group_order = 1;
	ok.end.group = end;
	send_msg_on(ie, on, &ok, 0);
	hn = moq_ietf_varint_put(hb, sizeof(hb), ie->d, IETF_STREAM_FETCH);
	hn += moq_ietf_varint_put(hb + hn, sizeof(hb) - (size_t)hn, ie->d, m->request_id);
	ox_write(ie, o, hb, (size_t)hn, 0);
	for (uint64_t g = start; g <= end && g - start < IE_FETCH_GROUPS; g++)
		fetch_group(ie, o, ct, g, 0, UINT64_MAX, &prev, &have_prev, &first_obj, &last_obj);
	ox_write(ie, o, NULL, 0, 1); /* freed once acknowledged (pump) */
	if (ox)
		ox_write(ie, ox, NULL, 0, 1); /* 17+: the request is over */
}

/* The Largest Object of @ct in *@l: the newest group's last complete frame
 * (the group before it while the newest has none). 0, or -1: no content. */
static int cached_largest(struct moq_cache_track *ct, struct moq_ietf_loc *l)
{
	uint64_t latest;

	if (!ct || moq_cache_track_latest(ct, &latest) < 0)
		return -1;
	for (uint64_t back = 0; back < 2 && back <= latest; back++) {
		struct moq_cache_group *g;
		struct moq_cache_cursor cur = {0};
		uint64_t n = 0;

		if (moq_cache_track_group(ct, latest - back, &g) < 0)
			continue;
		for (;;) {
			struct moq_cache_frame f[16];
			int k = moq_cache_read_frames(g, &cur, f, 16);

			if (k <= 0)
				break;
			for (int i = 0; i < k; i++)
				if (moq_cache_frame_complete(&f[i]))
					n = (uint64_t)f[i].index + 1;
		}
		moq_cache_group_unref(g);
		if (n) {
			l->group = latest - back;
			l->object = n - 1;
			return 0;
		}
	}
	return -1;
}

/*
 * draft 20: the fill @i's SUBSCRIBE asked for (FILL_PARAMETERS), on a FETCH
 * stream with the SUBSCRIBE's request id. Its LOCATION_FILTER (else the
 * subscription's) is resolved with the FETCH rules against Largest Object
 * @l (@have: the track has content) and never goes past it. An empty range
 * opens no stream; a fill with a range filter (which objects pass: not
 * kept, so not served unfiltered) opens one and resets it after the header,
 * the draft's fill-failure signal. Either way the subscription goes on.
 * What the fill carried, the subscription then leaves out (trim), so the
 * two together deliver each object once.
 */
static void serve_fill(struct ietf_sess *ie, struct xs *i, struct moq_cache_track *ct, int have,
                       const struct moq_ietf_loc *l)
{
	const struct moq_ietf_filter *f = i->fill.has_filter ? &i->fill.filter : &i->sfilter;
	struct moq_ietf_loc st = {0, 0}, en = {0, 0};
	struct moq_ietf_fetch_obj prev;
	int have_prev = 0, unsup = i->fill.range_filters;
	struct xs *o;
	uint8_t hb[32];
	int hn;

	i->fill_req = 0;
	if (!have)
		return;
	if (!unsup) {
		switch (f->kind) {
		case IETF_F_UNFILTERED:
			break;
		case IETF_F_NEXT_OBJECT:
			return; /* one past Largest Object: always empty */
		case IETF_F_RELATIVE:
			st.group = l->group + 1 > f->groups ? l->group + 1 - f->groups : 0;
			break;
		case IETF_F_ABSOLUTE:
			st = f->start;
			break;
		}
		en = *l;
		if (f->kind == IETF_F_ABSOLUTE && f->has_end &&
		    (f->end_group < l->group || (f->end_group == l->group && f->has_end_object &&
		                                 f->end_object < l->object))) {
			en.group = f->end_group;
			en.object = f->has_end_object ? f->end_object : UINT64_MAX;
		}
		if (st.group > en.group || (st.group == en.group && en.object < st.object))
			return;
	}
	o = ox_open(ie, 0, X_SG_OUT);
	if (!o)
		return;
	hn = moq_ietf_varint_put(hb, sizeof(hb), ie->d, IETF_STREAM_FETCH);
	hn += moq_ietf_varint_put(hb + hn, sizeof(hb) - (size_t)hn, ie->d, i->req_id);
	ox_write(ie, o, hb, (size_t)hn, 0);
	if (unsup) {
		ie->n->st.ietf_fills_refused++;
		ox_reset(ie, o, IETF_REQ_NOT_SUPPORTED);
		return;
	}
	for (uint64_t g = st.group; g <= en.group && g - st.group < IE_FETCH_GROUPS; g++) {
		uint64_t a = 0, b = 0;

		if (fetch_group(ie, o, ct, g, g == st.group ? st.object : 0,
		                g == en.group ? en.object : UINT64_MAX, &prev, &have_prev, &a,
		                &b) <= 0)
			continue;
		if (!i->trim) {
			i->trim = 1;
			i->trim_lo = (struct moq_ietf_loc){g, a};
		}
		i->trim_hi = (struct moq_ietf_loc){g, b};
		ie->n->st.ietf_fill_objects += b - a + 1;
	}
	ie->n->st.ietf_fills++;
	ox_write(ie, o, NULL, 0, 1); /* freed once acknowledged (pump) */
}

/* TRACK_STATUS_REQUEST: the largest location the relay's cache has of the
 * track (14: TRACK_STATUS; 15+: REQUEST_OK with LARGEST_OBJECT, or
 * REQUEST_ERROR DOES_NOT_EXIST). */
static void on_track_status(struct ietf_sess *ie, struct xs *ox, const struct moq_ietf_msg *m)
{
	char path[MOQ_IETF_MAX_NAME + MOQ_IETF_MAX_NS * 2];
	int pl = moq_ietf_ns_to_path(path, sizeof(path), m->ns, m->ns_n);
	struct xs *on = ox ? ox : xs_find(ie, 0, ie->control_sid);
	struct moq_cache_track *ct =
	        pl >= 0 ? cached_track(ie, path, (size_t)pl, m->name.p, m->name.len) : NULL;
	struct moq_ietf_msg r = {0};
	struct moq_cache_group *g;
	uint64_t latest = 0;
	uint32_t frames = 0;
	uint8_t loc[32];
	int found = 0, k;

	if (ct && moq_cache_track_latest(ct, &latest) == 0 &&
	    moq_cache_track_group(ct, latest, &g) == 0) {
		moq_cache_group_status(g, NULL, &frames);
		moq_cache_group_unref(g);
		found = 1;
	}
	r.request_id = m->request_id;
	if (ie->d == MOQ_IETF_14) {
		r.kind = IETF_TRACK_STATUS;
		r.ns_n = m->ns_n;
		memcpy(r.ns, m->ns, sizeof(r.ns[0]) * m->ns_n);
		r.name = m->name;
		r.code = found ? 0x0 : 0x1; /* in progress / does not exist */
		r.last.group = latest;
		r.last.object = frames ? frames - 1 : 0;
		send_msg_on(ie, on, &r, ox != NULL);
		return;
	}
	if (!found) {
		send_req_error(ie, on, m->request_id, IETF_REQ_DOES_NOT_EXIST, "not in the cache",
		               IETF_SUBSCRIBE_ERROR);
		return;
	}
	k = moq_ietf_varint_put(loc, sizeof(loc), ie->d, latest);
	k += moq_ietf_varint_put(loc + k, sizeof(loc) - (size_t)k, ie->d, frames ? frames - 1 : 0);
	r.kind = IETF_REQUEST_OK;
	moq_ietf_param_add(&r.params, IETF_PARAM_LARGEST_OBJECT, 0,
	                   (struct moq_str){(const char *)loc, (size_t)k});
	send_msg_on(ie, on, &r, ox != NULL);
}

/* ---- a control message from the client ---- */

static void on_msg(struct ietf_sess *ie, struct xs *ox, const struct moq_ietf_msg *m)
{
	struct xs *i;

	switch (m->kind) {
	case IETF_SUBSCRIBE:
		if (check_req_id(ie, m->request_id) < 0)
			return;
		on_client_subscribe(ie, ox, m);
		break;
	case IETF_PUBLISH_NAMESPACE:
		if (check_req_id(ie, m->request_id) < 0)
			return;
		on_publish_namespace(ie, ox, m);
		break;
	case IETF_SUBSCRIBE_NAMESPACE:
		if (check_req_id(ie, m->request_id) < 0)
			return;
		on_subscribe_namespace(ie, ox, m);
		break;
	case IETF_FETCH:
		if (check_req_id(ie, m->request_id) < 0)
			return;
		on_fetch(ie, ox, m);
		ie->open_reqs--; /* answered at once */
		break;
	case IETF_TRACK_STATUS_REQUEST:
		if (check_req_id(ie, m->request_id) < 0)
			return;
		on_track_status(ie, ox, m);
		ie->open_reqs--; /* answered at once */
		break;
	case IETF_PUBLISH:
		if (check_req_id(ie, m->request_id) < 0)
			return;
		if (on_publish(ie, ox, m) < 0)
			ie->open_reqs--; /* answered at once */
		break;
	case IETF_UNSUBSCRIBE:
		client_unsubscribe(ie, find_kind(ie, I_SUB_IN, m->request_id, 0));
		break;
	case IETF_UNSUBSCRIBE_NAMESPACE:
		i = find_kind(ie, I_ANN_IN, m->request_id, 0);
		if (i && !i->i_in_done) {
			i->i_in_done = 1;
			in_data(ie, i->sid, NULL, 0, 1);
		}
		break;
	case IETF_PUBLISH_NAMESPACE_DONE:
		if (ie->d == MOQ_IETF_16) {
			for (struct xs *x = ie->streams; x; x = x->next)
				if (x->inner && x->is_req == 2 && !x->gone &&
				    x->req_id == m->request_id) {
					unannounce(ie, x);
					break;
				}
		} else {
			unannounce(ie, announce_by_ns(ie, m));
		}
		break;
	case IETF_SUBSCRIBE_OK:
	case IETF_SUBSCRIBE_ERROR:
	case IETF_REQUEST_ERROR:
	case IETF_PUBLISH_DONE:
		if (m->kind == IETF_PUBLISH_DONE &&
		    (i = publish_of(ie, ox && ox->kind == X_REQ_IN ? ox : NULL, m->request_id))) {
			pub_end(ie, i);
			break;
		}
		if (ox && ox->kind == X_REQ_OUT)
			i = ox->peer;
		else
			i = find_kind(ie, I_SUB_OUT, m->request_id, 0);
		on_sub_reply(ie, i, m);
		break;
	case IETF_MAX_REQUEST_ID:
		if (m->request_id <= ie->peer_max) {
			fail_session(ie, IETF_CLOSE_PROTOCOL_VIOLATION);
			return;
		}
		ie->peer_max = m->request_id;
		break;
	case IETF_REQUESTS_BLOCKED:
	case IETF_REQUEST_OK:
	case IETF_PUBLISH_NAMESPACE_OK:
	case IETF_PUBLISH_NAMESPACE_ERROR:
	case IETF_PUBLISH_NAMESPACE_CANCEL:
	case IETF_SUBSCRIBE_UPDATE:
		on_sub_update(ie, ox, m);
		break;
	case IETF_GOAWAY:
		break;
	default:
		fail_session(ie, IETF_CLOSE_PROTOCOL_VIOLATION);
	}
}

/* Read whole messages off @x's buffer. */
static void read_msgs(struct ietf_sess *ie, struct xs *x)
{
	static struct moq_ietf_msg m;

	while (x->rx_len && !ie->closing) {
		int k = moq_ietf_msg_decode(x->rx, x->rx_len, ie->d, &m);

		if (k == MOQ_ERR_SHORT)
			return;
		if (k < 0) {
			fail_session(ie, IETF_CLOSE_PROTOCOL_VIOLATION);
			return;
		}
		on_msg(ie, x->kind == X_REQ_IN || x->kind == X_REQ_OUT ? x : NULL, &m);
		rx_consume(x, (size_t)k);
		/* 17+: a request stream carries one request; replies follow */
		if (x->kind == X_REQ_IN && m.kind != IETF_SUBSCRIBE_UPDATE)
			x->typed = 1;
	}
}

/* ---- set-up ---- */

static int start_inner(struct ietf_sess *ie, const struct moq_ietf_params *ps)
{
	const struct moq_ietf_param *path = moq_ietf_param_get(ps, IETF_OPT_PATH);
	const struct moq_ietf_param *tok = moq_ietf_param_get(ps, IETF_OPT_AUTH_TOKEN);
	const struct moq_ietf_param *mr = moq_ietf_param_get(ps, IETF_OPT_MAX_REQUEST_ID);
	char *url;
	size_t ul = 0, cap;
	struct moq_session *in;

	if (mr)
		ie->peer_max = mr->v;
	/* The URL of the lite session: the binding's (WebTransport /
	 * WebSocket), else the PATH option (raw QUIC); a token in the
	 * AUTHORIZATION TOKEN option (draft-14 9.2.1.1: USE_VALUE 0x3,
	 * token type, value) joins it as ?jwt=. */
	cap = ie->url_len + (path ? path->b.len : 0) + (tok ? tok->b.len : 0) + 16;
	url = malloc(cap);
	if (!url)
		return MOQ_ERR_NOMEM;
	if (ie->url_len) {
		memcpy(url, ie->url, ie->url_len);
		ul = ie->url_len;
	} else if (path && path->b.len) {
		memcpy(url, path->b.p, path->b.len);
		ul = path->b.len;
	} else {
		url[ul++] = '/';
	}
	if (tok && tok->b.len && !memchr(url, '?', ul)) {
		struct moq_str v = tok->b;
		uint64_t alias_type, ttype;
		int k = moq_ietf_varint_get((const uint8_t *)v.p, v.len, ie->d, &alias_type);
		if (k > 0 && alias_type == 3) {
			int k2 = moq_ietf_varint_get((const uint8_t *)v.p + k, v.len - (size_t)k,
			                             ie->d, &ttype);
			if (k2 > 0) {
				v.p += k + k2;
				v.len -= (size_t)(k + k2);
			}
		}
		memcpy(url + ul, "?jwt=", 5);
		ul += 5;
		memcpy(url + ul, v.p, v.len);
		ul += v.len;
	}
	/* One client, one session in max_sessions and the sessions count: the
	 * shell holds the slot, the inner lite session takes it for its
	 * admission and is not counted after (sess_free: ietf_owner). */
	ie->n->st.sessions--;
	in = moq_binding_accept(ie->n, &ie_ops, ie, MOQ_LITE_04, url, ul);
	ie->n->st.sessions++;
	free(url);
	if (!in)
		return MOQ_ERR_LIMIT;
	ie->n->st.sessions--; /* sess_new counted it */
	ie->n->st.sessions_total--;
	ie->inner = in;
	in->ietf_owner = ie;
	ie->started = 1;
	return 0;
}

static void send_our_setup(struct ietf_sess *ie, struct xs *on, const struct moq_ietf_msg *client)
{
	struct moq_ietf_msg m = {0};

	(void)client;
	m.kind = ie->d <= MOQ_IETF_16 ? IETF_SERVER_SETUP : IETF_SETUP;
	m.version = MOQ_IETF_VERSION(ie->d);
	if (ie->d <= MOQ_IETF_16)
		moq_ietf_param_add(&m.params, IETF_OPT_MAX_REQUEST_ID, ie->max_granted,
		                   (struct moq_str){0});
	moq_ietf_param_add(&m.params, IETF_OPT_IMPLEMENTATION, 0, (struct moq_str){"moqdp", 5});
	if (ie->d >= MOQ_IETF_17) {
		uint8_t buf[256];
		int t = moq_ietf_varint_put(buf, sizeof(buf), ie->d, IETF_STREAM_SETUP);
		int n = moq_ietf_msg_encode(buf + t, sizeof(buf) - (size_t)t, ie->d, &m);
		/* the SETUP uni stream: stream type 0x2f00 is the message type too,
		 * written once (the message's own type is the stream type) */
		if (n > 0)
			ox_write(ie, on, buf + t, (size_t)n, 0);
		return;
	}
	send_msg_on(ie, on, &m, 0);
}

static void req_held(struct ietf_sess *ie);

static void on_setup_bytes(struct ietf_sess *ie, struct xs *x)
{
	static struct moq_ietf_msg m;
	int k = moq_ietf_msg_decode(x->rx, x->rx_len, ie->d, &m);
	bool ok;

	if (k == MOQ_ERR_SHORT)
		return;
	ok = k > 0 && (m.kind == (ie->d <= MOQ_IETF_16 ? IETF_CLIENT_SETUP : IETF_SETUP));
	if (!ok) {
		fail_session(ie, IETF_CLOSE_PROTOCOL_VIOLATION);
		return;
	}
	if (ie->d == MOQ_IETF_14) {
		bool have = false;
		for (uint32_t i = 0; i < m.versions_n; i++)
			have |= m.versions[i] == MOQ_IETF_VERSION(14);
		if (!have) {
			fail_session(ie, IETF_CLOSE_VERSION_NEGOTIATION);
			return;
		}
	}
	if (ie->d <= MOQ_IETF_16)
		send_our_setup(ie, x, &m);
	if (start_inner(ie, &m.params) < 0) {
		fail_session(ie, IETF_CLOSE_INTERNAL);
		return;
	}
	rx_consume(x, (size_t)k);
	if (x->kind == X_CONTROL)
		read_msgs(ie, x);
	req_held(ie);
}

/* A request stream's bytes and FIN. */
static void req_in(struct ietf_sess *ie, struct xs *x)
{
	/* (17+: after the request, only REQUEST_UPDATE) */
	if (!x->typed || x->kind == X_REQ_OUT || x->rx_len)
		read_msgs(ie, x);
	if (x->rx_fin && !x->gone) {
		struct xs *i = x->peer;
		if (i && i->kind == I_SUB_IN)
			client_unsubscribe(ie, i);
		else if (i && i->is_req == 2)
			unannounce(ie, i);
		else if (i && i->is_req == 3)
			pub_end(ie, i);
		else if (i && i->kind == I_ANN_IN && !i->i_in_done) {
			i->i_in_done = 1;
			in_data(ie, i->sid, NULL, 0, 1);
		}
	}
}

/* The session started: the request streams that came before the SETUP,
 * in the order they were opened (lowest stream id first). */
static void req_held(struct ietf_sess *ie)
{
	for (;;) {
		struct xs *first = NULL;
		for (struct xs *x = ie->streams; x; x = x->next)
			if (!x->inner && x->kind == X_REQ_IN && x->held && !x->gone &&
			    (!first || x->sid < first->sid))
				first = x;
		if (!first || ie->closing)
			return;
		first->held = 0;
		req_in(ie, first);
	}
}

/* ---- subgroup streams from the client ---- */

/* The lite group stream that the client's subgroup streams of (@alias,
 * @group) feed, while it is open: one per group, their objects serialised
 * into it whole. */
static struct xs *group_in_find(struct ietf_sess *ie, uint64_t alias, uint64_t group)
{
	for (struct xs *g = ie->streams; g; g = g->next)
		if (g->inner && g->kind == I_GROUP_IN && !g->gone && !g->i_in_done &&
		    g->alias == alias && g->grp == group)
			return g;
	return NULL;
}

/* STOP_SENDING to every subgroup stream that feeds @gi. */
static void sg_stop_all(struct ietf_sess *ie, struct xs *gi)
{
	for (struct xs *s = ie->streams; s; s = s->next)
		if (!s->inner && s->kind == X_SG_IN && s->peer == gi) {
			if (ie->shell && ie->shell->tp)
				tp_stop_sending(ie->shell, s->sid, 0);
			s->kind = X_IGNORE;
			s->peer = NULL;
			s->rx_len = 0;
		}
	gi->nsg = 0;
	gi->owner = NULL;
}

/* Subgroup stream @x no longer feeds its group: it ended (FIN, END_OF_GROUP)
 * or was @lost (reset, refused). The group ends when no subgroup stream
 * feeds it; it is lost with an object cut short, or with its only stream. */
static void sg_end(struct ietf_sess *ie, struct xs *x, int lost)
{
	struct xs *gi = x->peer;

	if (!gi || gi->kind != I_GROUP_IN)
		return;
	x->peer = NULL;
	x->waiting = 0;
	if (gi->peer == x)
		gi->peer = NULL;
	if (gi->nsg)
		gi->nsg--;
	if (gi->i_in_done)
		return;
	if (gi->owner == x || (lost && gi->nsg == 0)) {
		gi->owner = NULL;
		gi->i_in_done = 1;
		if (ie->inner)
			moq_binding_stream_reset(ie->inner, gi->sid, MOQ_CODE_CANCEL);
		sg_stop_all(ie, gi);
		return;
	}
	if (gi->nsg == 0) {
		gi->i_in_done = 1;
		in_data(ie, gi->sid, NULL, 0, 1);
	}
}

static void sg_in(struct ietf_sess *ie, struct xs *x)
{
	while (x->rx_len && !ie->closing && !x->reset && x->kind == X_SG_IN) {
		struct xs *gi = x->peer;
		if (!x->hdr_done) {
			int k = moq_ietf_subgroup_hdr_decode(x->rx, x->rx_len, ie->d, &x->h);
			struct xs *sub;
			uint8_t hb[32];
			int hn;

			if (k == MOQ_ERR_SHORT)
				return;
			if (k < 0) {
				fail_session(ie, IETF_CLOSE_PROTOCOL_VIOLATION);
				return;
			}
			rx_consume(x, (size_t)k);
			x->hdr_done = 1;
			sub = find_kind(ie, I_SUB_OUT, x->h.track_alias, 1);
			if (!sub || !sub->ok_sent) {
				ie->objects_dropped++;
				x->kind = X_IGNORE;
				if (ie->shell && ie->shell->tp)
					tp_stop_sending(ie->shell, x->sid, 0);
				x->rx_len = 0;
				return;
			}
			x->sg_known = x->h.sg_mode != 1; /* 1: the first object's id */
			x->sgid = x->h.sg_mode == 2 ? x->h.subgroup : 0;
			x->in_next = 0;
			gi = group_in_find(ie, x->h.track_alias, x->h.group);
			if (!gi) {
				gi = in_open(ie, 0, I_GROUP_IN);
				if (!gi)
					return;
				gi->alias = x->h.track_alias;
				gi->grp = x->h.group;
				/* stream type 0x0 and GROUP */
				hn = moq_group_hdr_encode(hb, sizeof(hb), sub->lite_id, x->h.group);
				if (hn > 0)
					in_data(ie, gi->sid, hb, (size_t)hn, 0);
			}
			if (!gi->peer)
				gi->peer = x;
			gi->nsg++;
			x->peer = gi;
			continue;
		}
		if (x->obj_left) {
			size_t n = x->rx_len < x->obj_left ? x->rx_len : x->obj_left;
			if (gi)
				in_data(ie, gi->sid, x->rx, n, 0);
			x->obj_left -= n;
			rx_consume(x, n);
			if (!x->obj_left && gi && gi->owner == x)
				gi->owner = NULL; /* the object is whole in the group */
			continue;
		}
		if (gi && gi->owner && gi->owner != x) {
			/* another subgroup's object is under way into the group:
			 * this one's objects wait (sg_wake) */
			x->waiting = 1;
			return;
		}
		{
			struct moq_ietf_object o;
			int k = moq_ietf_object_decode_head(x->rx, x->rx_len, ie->d,
			                                    x->h.extensions, &o);
			uint8_t fh[16];
			uint64_t id;
			int fn;

			if (k == MOQ_ERR_SHORT)
				return;
			if (k < 0 || o.id_delta > UINT64_MAX / 4 - x->in_next) {
				fail_session(ie, IETF_CLOSE_PROTOCOL_VIOLATION);
				return;
			}
			id = x->in_next + o.id_delta;
			x->in_next = id + 1;
			if (!x->sg_known) {
				x->sgid = id;
				x->sg_known = 1;
			}
			if (gi)
				gi->pext_len = 0; /* this object's, or none */
			if (o.has_ext && o.ext.len && gi) {
				/* kept beside the frame: the inner's ingest takes them
				 * when it reads the frame header below (ie_frame_meta) */
				if (o.ext.len > MOQ_CACHE_EXT_MAX) {
					ie->n->st.ietf_ext_dropped++;
				} else {
					if (!gi->pext)
						gi->pext = malloc(MOQ_CACHE_EXT_MAX);
					if (gi->pext) {
						memcpy(gi->pext, o.ext.p, o.ext.len);
						gi->pext_len = o.ext.len;
						ie->n->st.ietf_ext_kept++;
					} else {
						ie->n->st.ietf_ext_dropped++;
					}
				}
			}
			rx_consume(x, (size_t)k);
			if (o.payload_len == 0 && o.status != IETF_OBJ_NORMAL) {
				/* end of group / track: this subgroup is complete */
				if (o.status == IETF_OBJ_END_OF_GROUP ||
				    o.status == IETF_OBJ_END_OF_TRACK) {
					sg_end(ie, x, 0);
					x->kind = X_IGNORE;
					x->rx_len = 0;
					return;
				}
				continue; /* does not exist: no frame */
			}
			if (gi) {
				/* the frame's location, kept when it is not what a
				 * lone subgroup 0 would give (ie_frame_meta) */
				gi->ploc = x->sgid != 0 || id != gi->nfr;
				gi->psg = x->sgid;
				gi->pobj = id;
				gi->nfr++;
			}
			fn = moq_frame_hdr_encode(fh, sizeof(fh), MOQ_LITE_04, 0, o.payload_len);
			if (fn > 0 && gi)
				in_data(ie, gi->sid, fh, (size_t)fn, 0);
			x->obj_left = o.payload_len;
			if (x->obj_left && gi)
				gi->owner = x;
		}
	}
}

/* @x's bytes so far; its end once they are all in. */
static void sg_run(struct ietf_sess *ie, struct xs *x)
{
	sg_in(ie, x);
	if (x->kind == X_SG_IN && x->rx_fin && !x->waiting && x->peer)
		sg_end(ie, x, 0);
}

/* @gi's object ended: the subgroup streams that wait go on, one object at
 * a time (each waits again only for another's object under way). */
static void sg_wake(struct ietf_sess *ie, struct xs *gi)
{
	while (gi->kind == I_GROUP_IN && !gi->owner && !gi->i_in_done && !ie->closing) {
		struct xs *w = NULL;
		for (struct xs *s = ie->streams; s; s = s->next)
			if (!s->inner && s->kind == X_SG_IN && s->waiting && s->peer == gi &&
			    (!w || s->sid < w->sid))
				w = s;
		if (!w)
			return;
		w->waiting = 0;
		sg_run(ie, w);
	}
}

/* ---- the shell's input ---- */

static void pump(struct ietf_sess *ie);

static void outer_new_stream(struct ietf_sess *ie, struct xs *x)
{
	uint64_t t;
	int k;

	if (x->sid & 2) { /* uni */
		if (ie->d >= MOQ_IETF_17 && !ie->started) {
			k = moq_ietf_varint_get(x->rx, x->rx_len, ie->d, &t);
			if (k == MOQ_ERR_SHORT)
				return;
			if (k < 0 || t != IETF_STREAM_SETUP) {
				fail_session(ie, IETF_CLOSE_PROTOCOL_VIOLATION);
				return;
			}
			x->kind = X_SETUP_IN;
			return;
		}
		x->kind = X_SG_IN;
		return;
	}
	/* bidi */
	if (ie->d <= MOQ_IETF_16 && ie->control_sid < 0) {
		x->kind = X_CONTROL;
		ie->control_sid = x->sid;
		return;
	}
	/* a request stream may come before the SETUP (QUIC does not order
	 * streams: a lost packet reorders them); it waits for it (req_held) */
	x->kind = X_REQ_IN;
	x->held = !ie->started;
}

void ietf_stream_data(struct ietf_sess *ie, int64_t sid, const uint8_t *data, size_t len, int fin)
{
	struct xs *x;

	if (ie->dead || ie->closing)
		return;
	ie->depth++;
	ie->scan = 1;
	x = xs_find(ie, 0, sid);
	if (!x && !(x = xs_new(ie, 0, sid, X_NEW))) {
		fail_session(ie, IETF_CLOSE_INTERNAL);
		goto out;
	}
	if (x->kind == X_IGNORE)
		goto out;
	if (rx_append(x, data, len) < 0) {
		if (x->kind == X_SG_IN) {
			/* held too long behind another subgroup's object: this
			 * subgroup is refused, the session goes on */
			struct xs *gi = x->peer;
			ie->n->st.ietf_subgroups_refused++;
			if (ie->shell && ie->shell->tp)
				tp_stop_sending(ie->shell, x->sid, 0);
			sg_end(ie, x, 1);
			x->kind = X_IGNORE;
			x->rx_len = 0;
			if (gi)
				sg_wake(ie, gi);
			goto out;
		}
		fail_session(ie, IETF_CLOSE_PROTOCOL_VIOLATION);
		goto out;
	}
	if (fin)
		x->rx_fin = 1;
	if (x->kind == X_NEW)
		outer_new_stream(ie, x);
	switch (x->kind) {
	case X_CONTROL:
		if (!ie->started)
			on_setup_bytes(ie, x);
		else
			read_msgs(ie, x);
		if (x->rx_fin)
			fail_session(ie,
			             IETF_CLOSE_PROTOCOL_VIOLATION); /* the control stream ended */
		break;
	case X_SETUP_IN:
		if (!ie->started) {
			/* the stream type is the message type: decode from the start */
			on_setup_bytes(ie, x);
		}
		break;
	case X_REQ_IN:
	case X_REQ_OUT:
		if (x->kind == X_REQ_IN && !ie->started)
			break; /* kept until the SETUP (req_held) */
		req_in(ie, x);
		break;
	case X_SG_IN: {
		struct xs *gi = x->peer;
		sg_run(ie, x);
		if (!gi)
			gi = x->peer;
		if (gi && gi->kind == I_GROUP_IN)
			sg_wake(ie, gi);
		break;
	}
	default:
		break;
	}
out:
	ie->depth--;
	pump(ie);
}

void ietf_stream_acked(struct ietf_sess *ie, int64_t sid, uint64_t acked)
{
	struct xs *x;
	uint32_t k = 0;

	if (ie->dead)
		return;
	x = xs_find(ie, 0, sid);
	if (!x)
		return;
	ie->depth++;
	if (acked > x->acked)
		x->acked = acked;
	while (x->qh && x->qh->off + x->qh->len <= x->acked && x->qh != x->qt) {
		/* (the tail stays: later bytes may be appended to it) */
		struct oq *q = x->qh;
		x->qh = q->next;
		if (x->qs == q)
			x->qs = q->next;
		oq_free(ie, q);
	}
	if (x->qh && x->qh == x->qt && x->qh->off + x->qh->len <= x->acked && x->kind != X_SG_OUT) {
		/* a control or request stream's tail, all acknowledged: it goes
		 * too (its next message, seconds away if ever, takes a new one;
		 * 288 bytes a stream) */
		oq_free(ie, x->qh);
		x->qh = x->qt = x->qs = NULL;
	}
	if (x->kind != X_SG_OUT || (x->fin_sent && x->acked >= x->q_end))
		ie->scan = 1; /* done (garbage), or not a group's stream */
	while (k < x->nmk && x->mk[k].r <= x->acked) {
		if (x->mk[k].via)
			ga_fired(ie, x->mk[k].isid, x->mk[k].l);
		else
			ack_later(ie, x->mk[k].isid, x->mk[k].l);
		k++;
	}
	if (k == x->nmk) {
		x->nmk = 0; /* the usual case: every mark fired */
	} else if (k) {
		memmove(x->mk, x->mk + k, (x->nmk - k) * sizeof(*x->mk));
		x->nmk -= k;
	}
	if (x->peer && x->peer->kind == I_GROUP_OUT && x->peer->i_out_done &&
	    group_out_done(x->peer)) {
		x->peer->closed_due = 1;
		ie->scan = 1;
	}
	ie->depth--;
	pump(ie);
}

void ietf_stream_reset(struct ietf_sess *ie, int64_t sid, uint64_t code)
{
	struct xs *x;

	(void)code;
	if (ie->dead)
		return;
	ie->scan = 1;
	x = xs_find(ie, 0, sid);
	if (!x)
		return;
	ie->depth++;
	x->rx_fin = 1;
	if (x->peer) {
		struct xs *i = x->peer;
		if (i->kind == I_GROUP_IN) {
			/* that subgroup's objects end here; the group goes on
			 * while another feeds it (sg_end) */
			sg_end(ie, x, 1);
			sg_wake(ie, i);
		} else if (i->kind == I_SUB_IN) {
			client_unsubscribe(ie, i);
		} else if (i->is_req == 2) {
			unannounce(ie, i);
		} else if (i->is_req == 3) {
			pub_end(ie, i);
		} else if (i->kind == I_ANN_IN && !i->i_in_done) {
			i->i_in_done = 1;
			in_data(ie, i->sid, NULL, 0, 1);
		}
	}
	x->kind = X_IGNORE;
	ie->depth--;
	pump(ie);
}

void ietf_stream_stop_sending(struct ietf_sess *ie, int64_t sid, uint64_t code)
{
	struct xs *x;

	if (ie->dead)
		return;
	ie->scan = 1;
	x = xs_find(ie, 0, sid);
	if (!x)
		return;
	ie->depth++;
	/* the client no longer wants this stream: a subgroup stream's group */
	if (x->peer && x->peer->kind == I_GROUP_OUT && ie->inner)
		moq_binding_stream_stop_sending(ie->inner, x->peer->sid, MOQ_CODE_CANCEL);
	ox_reset(ie, x, code);
	ie->depth--;
	pump(ie);
}

void ietf_stream_closed(struct ietf_sess *ie, int64_t sid)
{
	struct xs *x;

	if (ie->dead)
		return;
	ie->scan = 1;
	x = xs_find(ie, 0, sid);
	if (!x)
		return;
	x->gone = 1;
	/* (a group on several subgroup streams: once all of them are over) */
	if (x->peer && x->peer->kind == I_GROUP_OUT && (!x->peer->multi || group_out_done(x->peer)))
		x->peer->closed_due = 1;
	pump(ie);
}

void ietf_poll(struct ietf_sess *ie)
{
	if (!ie->dead)
		pump(ie);
}

void ietf_writable(struct ietf_sess *ie)
{
	if (ie->dead)
		return;
	ie->scan = 1;
	for (struct xs *x = ie->streams; x; x = x->next)
		if (!x->inner && x->sent < x->q_end)
			ox_flush(ie, x);
	if (ie->inner)
		moq_binding_writable(ie->inner);
}

static size_t xs_heap(const struct xs *x)
{
	size_t b = sizeof(*x) + x->rx_cap + (size_t)x->cmk * sizeof(struct mark) +
	           (size_t)x->cga * sizeof(struct gack) + (x->pext ? MOQ_CACHE_EXT_MAX : 0);

	for (const struct arena *a = x->ar; a; a = a->next)
		b += sizeof(*a) + a->cap;
	for (const struct oq *q = x->qh; q; q = q->next)
		b += sizeof(*q) + (q->ref ? 0 : q->cap);
	if (x->prefix)
		b += x->plen + 1;
	return b;
}

size_t ietf_heap_bytes(const struct ietf_sess *ie)
{
	size_t b = sizeof(*ie) + (size_t)ie->cacks * sizeof(struct ie_ack) +
	           (size_t)ie->nqpool * sizeof(struct oq);

	if (ie->url)
		b += ie->url_len + 1;
	for (const struct xs *x = ie->streams; x; x = x->next)
		b += xs_heap(x);
	for (const struct xs *x = ie->xpool; x; x = x->next)
		b += xs_heap(x);
	for (uint32_t i = 0; i < ie->nearly; i++)
		b += ie->early[i].len;
	return b;
}

static void ie_free(struct ietf_sess *ie)
{
	while (ie->streams)
		xs_free(ie, ie->streams);
	while (ie->xpool) {
		struct xs *x = ie->xpool;
		ie->xpool = x->next;
		free(x->ar);
		free(x->mk);
		free(x);
	}
	while (ie->qpool) {
		struct oq *q = ie->qpool;
		ie->qpool = q->next;
		free(q);
	}
	for (uint32_t i = 0; i < ie->nearly; i++)
		free(ie->early[i].p);
	free(ie->acks);
	free(ie->url);
	free(ie);
}

void ietf_inner_gone(struct ietf_sess *ie)
{
	ie->inner = NULL;
}

void ietf_closed(struct ietf_sess *ie, uint64_t code, int local)
{
	struct moq_session *in = ie->inner;

	ie->shell = NULL;
	ie->inner = NULL;
	if (in)
		moq_binding_closed(in, code, local);
	if (ie->depth)
		ie->dead = 1; /* freed by the outermost call (pump) */
	else
		ie_free(ie);
}

/* After each input: deliver the inner's acknowledgements, close streams
 * that are done, carry out a deferred close. */
static void pump(struct ietf_sess *ie)
{
	uint8_t walked;

	if (ie->depth)
		return;
	if (ie->dead) {
		ie_free(ie);
		return;
	}
	ie->depth++;
	while (ie->nacks && ie->inner) {
		struct ie_ack a = ie->acks[--ie->nacks];
		moq_binding_stream_acked(ie->inner, a.isid, a.l);
	}
	walked = ie->scan;
	ie->scan = 0; /* what the walk's callbacks change sets it again */
	for (struct xs *x = walked ? ie->streams : NULL, *nx; x; x = nx) {
		bool done;

		nx = x->next;
		if (!x->inner || x->sid < 0 || x->gone || !ie->inner)
			continue;
		if (x->ok_due && !x->i_in_done) {
			x->ok_due = 0;
			inner_sub_ok(ie, x);
		}
		if (x->reset_due && !x->i_in_done) {
			x->reset_due = 0;
			x->i_in_done = 1;
			moq_binding_stream_reset(ie->inner, x->sid, MOQ_CODE_BOUNDS);
		}
		if (x->fin_due && !x->i_in_done) {
			x->fin_due = 0;
			x->i_in_done = 1;
			in_data(ie, x->sid, NULL, 0, 1);
		}
		if (x->stop_due && !x->i_out_done) {
			/* a paused subscription's group: the relay cancels it */
			x->stop_due = 0;
			moq_binding_stream_stop_sending(ie->inner, x->sid, MOQ_CODE_CANCEL);
		}
		switch (x->kind) {
		case I_GROUP_OUT:
			done = x->i_out_done && group_out_done(x);
			break;
		case I_GROUP_IN:
			done = x->i_in_done;
			break;
		default:
			done = x->i_out_done && x->i_in_done;
		}
		if (done || x->closed_due) {
			int64_t s = x->sid;
			x->closed_due = 0;
			x->gone = 1;
			moq_binding_stream_closed(ie->inner, s);
			nx = ie->streams; /* the inner may have written: rescan */
		}
	}
	ie->depth--;
	if (ie->dead) {
		ie_free(ie);
		return;
	}
	/* garbage: records whose both sides are over */
	for (struct xs *x = walked || ie->scan ? ie->streams : NULL, *nx; x; x = nx) {
		nx = x->next;
		/* an outer stream the transport closed references nothing of ours
		 * any more; one we finished is done once all is acknowledged */
		if ((x->gone && (!x->peer || x->peer->gone)) ||
		    (!x->inner && !x->peer && x->kind == X_SG_OUT && x->fin_sent &&
		     x->acked >= x->q_end))
			xs_free(ie, x);
	}
	/* 14-16: the client may have IE_REQ_WINDOW / 2 requests open; more
	 * room once some are over (draft-14 9.5 MAX_REQUEST_ID) */
	if (ie->d <= MOQ_IETF_16 && ie->started && !ie->closing) {
		uint64_t room =
		        ie->next_peer_req + 2 * (uint64_t)(IE_REQ_WINDOW / 2 - ie->open_reqs);
		if (ie->open_reqs <= IE_REQ_WINDOW / 2 &&
		    room >= ie->max_granted + IE_REQ_WINDOW / 2) {
			struct moq_ietf_msg m = {0};
			ie->max_granted = room;
			m.kind = IETF_MAX_REQUEST_ID;
			m.request_id = room;
			send_msg_on(ie, xs_find(ie, 0, ie->control_sid), &m, 0);
		}
	}
	if (ie->closing == 1 && ie->shell && ie->shell->tp) {
		struct moq_session *sh = ie->shell;
		ie->closing = 2;
		if (sh->depth) {
			/* inside one of the shell's callbacks (a datagram's, the
			 * poll walk's): freeing it here would free it under its
			 * caller; the caller's sess_flush closes it at depth 0 */
			sh->closing = 1;
			sh->close_code = ie->close_code;
			sess_mark(sh);
		} else {
			tp_close(sh, ie->close_code); /* may free @ie (ietf_closed) */
		}
	}
}

/* ---- the inner session's binding (ie_ops) ---- */

static int ie_open(void *b, int bidi, int64_t *sid)
{
	struct ietf_sess *ie = b;
	struct xs *x;

	if (bidi) {
		*sid = ie->next_obidi;
		ie->next_obidi += 4;
	} else {
		struct xs *o;
		/* a group stream: the client's stream opens with it (no credit:
		 * the inner retries later) */
		if ((o = ie->spare_sg))
			ie->spare_sg = NULL;
		else if (!(o = ox_open(ie, 0, X_SG_OUT)))
			return MOQ_ERR_AGAIN;
		*sid = ie->next_ouni;
		ie->next_ouni += 4;
		x = xs_new(ie, 1, *sid, I_GROUP_OUT);
		if (!x) {
			ox_reset(ie, o, 0);
			return MOQ_ERR_NOMEM;
		}
		x->peer = o;
		o->peer = x;
		return 0;
	}
	if (!xs_new(ie, 1, *sid, X_NEW))
		return MOQ_ERR_NOMEM;
	return 0;
}

/* The relay subscribes to the client (a publisher): SUBSCRIBE out. */
static void relay_subscribe(struct ietf_sess *ie, struct xs *i, const struct moq_subscribe *s)
{
	static char scratch[MOQ_IETF_MAX_NAME + 64];
	struct moq_ietf_msg m = {0};
	struct xs *on;

	i->lite_id = s->id;
	{
		/* a track the client PUBLISHed: served by it, nothing to ask */
		struct xs *p = publish_find(ie, s->broadcast.p, s->broadcast.len, s->track.p,
		                            s->track.len);
		if (p) {
			i->req_id = p->req_id;
			i->alias = p->alias;
			i->pub_bound = 1;
			/* not from inside the inner's write: at the shell's poll */
			i->ok_due = 1;
			if (ie->shell)
				sess_mark(ie->shell);
			return;
		}
	}
	if (ie->d <= MOQ_IETF_16 && ie->next_our_req >= ie->peer_max) {
		/* the client's MAX_REQUEST_ID leaves no room: REQUESTS_BLOCKED to
		 * it, and the relay's subscription is refused (11 bounds) */
		struct moq_ietf_msg b = {0};
		b.kind = IETF_REQUESTS_BLOCKED;
		b.request_id = ie->peer_max;
		send_msg_on(ie, xs_find(ie, 0, ie->control_sid), &b, 0);
		i->reset_due = 1;
		if (ie->shell)
			sess_mark(ie->shell);
		return;
	}
	m.kind = IETF_SUBSCRIBE;
	m.request_id = ie->next_our_req;
	ie->next_our_req += 2;
	i->req_id = m.request_id;
	if (ns_from_path(&m, s->broadcast.p, s->broadcast.len, scratch) < 0)
		return;
	m.name = s->track;
	m.priority = s->priority;
	m.group_order = 2;
	m.forward = 1;
	/* join at the live edge as @moq/net does: the current group on 20,
	 * the largest object before */
	if (ie->d >= MOQ_IETF_20) {
		m.filter.kind = IETF_F_RELATIVE;
		m.filter.groups = 1;
	} else {
		m.filter.kind = IETF_F_NEXT_OBJECT;
	}
	if (ie->d >= MOQ_IETF_17) {
		on = ox_open(ie, 1, X_REQ_OUT);
		if (!on)
			return;
		on->peer = i;
		i->peer = on;
	} else {
		on = xs_find(ie, 0, ie->control_sid);
	}
	send_msg_on(ie, on, &m, 0);
}

/* The subgroup header of group @i's subgroup @sg on @o, whose first object
 * is @id. */
static void sg_hdr(struct ietf_sess *ie, struct xs *i, struct xs *o, uint64_t sg, uint64_t id)
{
	struct moq_ietf_subgroup_hdr h = i->sh;
	uint8_t hb[48];
	int hn;

	h.sg_mode = sg ? 2 : 0;
	h.subgroup = sg;
	if (id != 0)
		h.first_object = false;
	if (o == i->peer)
		i->hdr_due = 0;
	o->sgid = sg;
	o->next_id = 0;
	hn = moq_ietf_subgroup_hdr_encode(hb, sizeof(hb), ie->d, &h);
	if (hn > 0)
		b_add(ie, o, hb, (size_t)hn, 1);
}

/* The outer stream that carries subgroup @sg of group @i (object @id is the
 * next): its first stream, or one opened for it; NULL when none can be. */
static struct xs *sg_out(struct ietf_sess *ie, struct xs *i, uint64_t sg, uint64_t id)
{
	struct xs *o = i->peer;

	if (!o)
		return NULL;
	if (i->hdr_due) {
		sg_hdr(ie, i, o, sg, id);
		return o;
	}
	if (o->sgid == sg)
		return o;
	for (uint32_t k = 0; k < i->nsgo; k++)
		if (i->sgo[k] && i->sgo[k]->sgid == sg)
			return i->sgo[k];
	if (i->nsgo == IE_SG_OUT_MAX || !(o = ox_open(ie, 0, X_SG_OUT)))
		return NULL;
	o->peer = i;
	if (!i->multi) {
		/* the inner's acknowledgements now wait for every stream of
		 * the group: the marks already on the first go through ga too */
		struct xs *p = i->peer;
		for (uint32_t k = 0; k < p->nmk; k++) {
			struct gack *g;
			if (p->mk[k].isid != i->sid || p->mk[k].via ||
			    !(g = ga_push(i, p->mk[k].l)))
				continue;
			g->n = 1;
			p->mk[k].via = 1;
		}
		i->multi = 1;
	}
	i->sgo[i->nsgo++] = o;
	sg_hdr(ie, i, o, sg, id);
	return o;
}

/* Bytes the inner writes on a stream it opened or we opened. */
static void inner_bytes(struct ietf_sess *ie, struct xs *x, const uint8_t *p, size_t n)
{
	static struct moq_msg m;

	if (x->kind == I_GROUP_OUT) {
		struct xs *o = x->peer;
		size_t off = 0;

		if (x->sink)
			return; /* acknowledged at once (mark_push, no outer stream) */
		if (!x->grx_init) {
			if (!n)
				return;
			if (p[0] != MOQ_STREAM_GROUP) {
				ox_reset(ie, o, 0);
				return;
			}
			moq_group_rx_init(&x->grx, MOQ_LITE_04, true);
			x->grx_init = 1;
			off = 1;
		}
		while (off < n) {
			struct moq_group_ev ev;
			int k = moq_group_rx_next(&x->grx, p + off, n - off, &ev);
			uint8_t hb[48];
			int hn;

			if (k < 0) {
				ox_reset(ie, o, 0);
				return;
			}
			off += (size_t)k;
			if (ev.type == MOQ_GEV_HEADER) {
				struct xs *sub = find_lite(ie, I_SUB_IN, ev.group.subscribe_id);
				struct moq_ietf_subgroup_hdr h = {0};
				if (!sub) {
					ox_reset(ie, o, 0);
					return;
				}
				if (sub->paused) {
					/* forward 0: the group is not the client's; its
					 * stream, nothing written yet, serves the next
					 * group, and the relay cancels this one */
					if (o && !ie->spare_sg && !o->reset && o->q_end == 0)
						ie->spare_sg = o;
					else
						ox_reset(ie, o, 0);
					if (o)
						o->peer = NULL;
					x->peer = NULL;
					x->sink = 1;
					x->stop_due = 1;
					ie->scan = 1;
					ie->n->st.ietf_groups_paused++;
					if (ie->shell)
						sess_mark(ie->shell);
					return;
				}
				x->fidx = 0;
				x->next_id = 0;
				x->cur_drop = 0;
				/* a track whose publisher sent extension headers: the
				 * objects carry them, from the cache group */
				if (!sub->ct && sub->prefix &&
				    (sub->ct = cached_track(ie, sub->prefix, sub->plen,
				                            sub->prefix + sub->plen + 1,
				                            sub->lite_tlen)))
					moq_cache_track_ref(sub->ct);
				if (sub->ct && !x->cg && moq_cache_track_has_ext(sub->ct) &&
				    moq_cache_track_group(sub->ct, ev.group.sequence, &x->cg) < 0)
					x->cg = NULL;
				h.extensions = x->cg != NULL;
				if (sub->trim && ev.group.sequence >= sub->trim_lo.group &&
				    ev.group.sequence <= sub->trim_hi.group) {
					x->drop = 1;
					x->drop_lo = ev.group.sequence == sub->trim_lo.group
					                     ? sub->trim_lo.object
					                     : 0;
					x->drop_hi = ev.group.sequence == sub->trim_hi.group
					                     ? sub->trim_hi.object
					                     : UINT64_MAX;
				}
				h.has_priority = true;
				h.priority = 128;
				/* (18+) whether the stream holds the group's first object */
				h.first_object = !(x->drop && x->drop_lo == 0);
				h.track_alias = sub->alias;
				h.group = ev.group.sequence;
				x->cur_o = o;
				if (o) {
					o->sgid = 0;
					o->next_id = 0;
				}
				if (x->cg) {
					/* objects may have subgroups of their own: the
					 * first one's opens this stream (sg_out) */
					x->sh = h;
					x->hdr_due = 1;
					continue;
				}
				hn = moq_ietf_subgroup_hdr_encode(hb, sizeof(hb), ie->d, &h);
				if (hn > 0)
					b_add(ie, o, hb, (size_t)hn, 1);
			} else if (ev.type == MOQ_GEV_FRAME) {
				static uint8_t eb[MOQ_CACHE_EXT_MAX + 48];
				struct moq_ietf_object ob = {0};
				struct moq_cache_meta fm = {0};
				uint64_t idx = x->fidx++, id = idx, sg = 0;
				struct xs *so = o;
				if (x->cg && moq_cache_frame_meta(x->cg, (uint32_t)idx, &fm) == 0 &&
				    fm.has_loc) {
					sg = fm.subgroup;
					id = fm.object;
				}
				x->cur_drop = x->drop && id >= x->drop_lo && id <= x->drop_hi;
				if (x->cur_drop)
					continue; /* the fill carried it */
				if (x->cg)
					so = sg_out(ie, x, sg, id);
				if (!so || id < so->next_id) {
					/* no stream for its subgroup (no stream credit,
					 * IE_SG_OUT_MAX), or out of order in it */
					x->cur_drop = 1;
					if (x->cg)
						ie->n->st.ietf_subgroups_refused++;
					continue;
				}
				x->cur_o = so;
				ob.id_delta = id - so->next_id;
				so->next_id = id + 1;
				ob.payload_len = (size_t)ev.frame_size;
				if (fm.ext_len) {
					ob.has_ext = true;
					ob.ext = (struct moq_str){(const char *)fm.ext, fm.ext_len};
				}
				hn = moq_ietf_object_encode_head(eb, sizeof(eb), ie->d,
				                                 x->cg != NULL, &ob);
				if (hn > 0)
					b_add(ie, so, eb, (size_t)hn, 1);
			} else if (ev.type == MOQ_GEV_DATA && ev.data_len && !x->cur_drop) {
				/* the payload as the inner wrote it (cache memory),
				 * not copied */
				b_add(ie, x->cur_o, ev.data, ev.data_len, 0);
			}
		}
		return;
	}
	if (rx_append(x, p, n) < 0)
		return;
	for (;;) {
		int k;
		if (!x->typed) {
			uint64_t t;
			int tk = moq_varint_get(x->rx, x->rx_len, &t);
			if (tk < 0)
				return;
			rx_consume(x, (size_t)tk);
			x->typed = 1;
			if (x->kind == X_NEW) {
				x->kind = t == MOQ_STREAM_ANNOUNCE    ? I_ANN_OUT
				          : t == MOQ_STREAM_SUBSCRIBE ? I_SUB_OUT
				          : t == MOQ_STREAM_GOAWAY    ? I_GOAWAY
				                                      : I_OTHER;
			}
		}
		if (!x->rx_len)
			return;
		switch (x->kind) {
		case I_ANN_OUT:
			k = moq_msg_decode(MOQ_MSG_ANNOUNCE_REQ, MOQ_LITE_04, x->rx, x->rx_len,
			                   4096, &m);
			if (k == MOQ_ERR_SHORT)
				return;
			if (k > 0 && !x->prefix) {
				x->plen = m.u.announce_req.prefix.len;
				x->prefix = memdup0(m.u.announce_req.prefix.p, x->plen);
				announce_replay(ie, x);
			}
			break;
		case I_SUB_OUT:
			k = moq_msg_decode(x->got_req ? MOQ_MSG_SUBSCRIBE_UPDATE
			                              : MOQ_MSG_SUBSCRIBE,
			                   MOQ_LITE_04, x->rx, x->rx_len, 4096, &m);
			if (k == MOQ_ERR_SHORT)
				return;
			if (k > 0 && !x->got_req) {
				x->got_req = 1;
				relay_subscribe(ie, x, &m.u.subscribe);
			}
			break;
		case I_SUB_IN:
			k = moq_msg_decode(MOQ_MSG_SUBSCRIBE_REPLY, MOQ_LITE_04, x->rx, x->rx_len,
			                   4096, &m);
			if (k == MOQ_ERR_SHORT)
				return;
			if (k > 0 && m.u.subscribe_reply.kind == MOQ_SUB_OK && !x->ok_sent) {
				struct moq_ietf_msg ok = {0};
				struct moq_cache_track *ct =
				        x->prefix ? cached_track(ie, x->prefix, x->plen,
				                                 x->prefix + x->plen + 1,
				                                 x->lite_tlen)
				                  : NULL;
				x->ok_sent = 1;
				ok.kind = IETF_SUBSCRIBE_OK;
				ok.request_id = x->req_id;
				ok.track_alias = x->alias;
				ok.group_order = 2;
				/* LARGEST_OBJECT once the track has content (what a
				 * fill is sized against) */
				ok.content_exists = cached_largest(ct, &ok.largest) == 0;
				send_msg_on(ie, req_stream(ie, x), &ok, 0);
				if (x->fill_req)
					serve_fill(ie, x, ct, ok.content_exists, &ok.largest);
			}
			break;
		case I_ANN_IN:
			k = moq_msg_decode(MOQ_MSG_ANNOUNCE, MOQ_LITE_04, x->rx, x->rx_len, 4096,
			                   &m);
			if (k == MOQ_ERR_SHORT)
				return;
			if (k > 0) {
				static char scratch[MOQ_IETF_MAX_NAME + 64];
				static char full[MOQ_IETF_MAX_NAME + 64];
				struct moq_ietf_msg nm = {0};
				const struct moq_str *sfx = &m.u.announce.suffix;
				int act = m.u.announce.status != MOQ_ANNOUNCE_ENDED;

				if (ie->d == MOQ_IETF_14) {
					/* 14: the matching namespaces come as PUBLISH_NAMESPACE
					 * (and _DONE), whole */
					size_t fl = 0;
					if (x->plen) {
						memcpy(full, x->prefix, x->plen);
						fl = x->plen;
						if (sfx->len)
							full[fl++] = '/';
					}
					memcpy(full + fl, sfx->p, sfx->len);
					fl += sfx->len;
					if (ns_from_path(&nm, full, fl, scratch) < 0)
						break;
					nm.kind = act ? IETF_PUBLISH_NAMESPACE
					              : IETF_PUBLISH_NAMESPACE_DONE;
					nm.request_id = ie->next_our_req;
					if (act)
						ie->next_our_req += 2;
				} else {
					if (ns_from_path(&nm, sfx->p, sfx->len, scratch) < 0)
						break;
					nm.kind = act ? IETF_NAMESPACE : IETF_NAMESPACE_DONE;
				}
				send_msg_on(ie, req_stream(ie, x), &nm, 0);
			}
			break;
		case I_GOAWAY: {
			struct moq_ietf_msg g = {0};
			k = moq_msg_decode(MOQ_MSG_GOAWAY, MOQ_LITE_04, x->rx, x->rx_len, 9000, &m);
			if (k == MOQ_ERR_SHORT)
				return;
			if (k > 0) {
				g.kind = IETF_GOAWAY;
				g.reason = m.u.goaway.uri;
				if (ie->d <= MOQ_IETF_16) {
					send_msg_on(ie, xs_find(ie, 0, ie->control_sid), &g, 0);
				} else {
					/* 17+: GOAWAY rides our SETUP stream */
					for (struct xs *s = ie->streams; s; s = s->next)
						if (!s->inner && s->kind == X_SETUP_OUT)
							send_msg_on(ie, s, &g, 0);
				}
			}
			break;
		}
		default:
			x->rx_len = 0;
			return;
		}
		if (k < 0) {
			x->rx_len = 0;
			return;
		}
		rx_consume(x, (size_t)k);
	}
}

/* One more iovec of @o's in the batch (ie->bo == @o, room checked). */
static inline void b_put(struct ietf_sess *ie, const uint8_t *p, size_t n)
{
	struct iovec *last = ie->bn ? &ie->bv[ie->bn - 1] : NULL;

	ie->btotal += n;
	if (last && (const uint8_t *)last->iov_base + last->iov_len == p) {
		last->iov_len += n;
		return;
	}
	ie->bv[ie->bn].iov_base = (void *)(uintptr_t)p;
	ie->bv[ie->bn].iov_len = n;
	ie->bn++;
}

/* The common case of a group's bytes (one subgroup, no extension headers,
 * nothing left out): fanout writes a frame's header and its payload as pieces
 * of their own, so each header becomes the object's header, written into @o's
 * arena, and each payload piece is referenced as it is, without inner_bytes'
 * general parser and b_add. Returns how many of @iov it took (0: not this
 * case); inner_bytes takes the rest. */
static size_t group_pieces(struct ietf_sess *ie, struct xs *x, const struct iovec *iov, size_t n,
                           size_t *bytes)
{
	struct xs *o = x->peer;
	bool lo = moq_ietf_leading_ones(ie->d);
	size_t k;

	if (!x->grx_init || x->sink || x->cg || x->drop || x->cur_drop || x->multi || !o ||
	    x->cur_o != o || o->reset || o->fin_q)
		return 0;
	if (ie->bo != o) {
		b_flush(ie);
		ie->bo = o;
	}
	for (k = 0; k < n && ie->bn < BATCH_MAX; k++) {
		const uint8_t *p = iov[k].iov_base;
		size_t len = iov[k].iov_len;
		struct arena *a = o->ar;
		uint64_t size, id = x->fidx;
		uint8_t *d;
		int l;

		if (x->grx.state == GRX_PAYLOAD) {
			if (moq_group_rx_piece(&x->grx, p, len, &size) != 2)
				break;
			b_put(ie, p, len);
			*bytes += len;
			continue;
		}
		/* a header needs a delta below 64 and room in the arena (else
		 * the general path writes it) */
		if (id < o->next_id || id - o->next_id >= 64 || !a || a->cap - a->len < 24 ||
		    moq_group_rx_piece(&x->grx, p, len, &size) != 1)
			break;
		/* draft-14 10.4.2: Object Id Delta, Payload Length, Object Status
		 * for an empty payload; as moq_ietf_object_encode_head writes them
		 * (a delta below 64 is one byte in either varint) */
		d = a->data + a->len;
		d[0] = (uint8_t)(id - o->next_id);
		if (size < 16384 && size >= 64) {
			d[1] = (uint8_t)((lo ? 0x80 : 0x40) | (size >> 8));
			d[2] = (uint8_t)size;
			l = 3;
		} else {
			/* a size varint of at most 4 bytes (moq_group_rx_piece):
			 * below 2^30, 4 bytes at most in either varint */
			l = 1 + moq_ietf_varint_put(d + 1, 23, ie->d, size);
		}
		if (size == 0)
			d[l++] = 0; /* status 0: a normal object */
		a->len += (uint32_t)l;
		x->fidx++;
		o->next_id = id + 1;
		b_put(ie, d, (size_t)l);
		*bytes += len;
	}
	return k;
}

static long ie_write(void *b, int64_t sid, const struct iovec *iov, size_t n, int fin)
{
	struct ietf_sess *ie = b;
	struct xs *x = xs_find(ie, 1, sid);
	size_t total = 0;
	struct iovec bv[BATCH_MAX];
	bool outer = ie->bv == NULL;

	if (!x)
		return MOQ_ERR_NOTFOUND;
	ie->depth++;
	if (outer)
		ie->bv = bv;
	for (size_t k = 0; k < n;) {
		if (x->kind == I_GROUP_OUT)
			k += group_pieces(ie, x, iov + k, n - k, &total);
		if (k < n) {
			inner_bytes(ie, x, iov[k].iov_base, iov[k].iov_len);
			total += iov[k].iov_len;
			k++;
		}
	}
	if (fin && x->kind == I_GROUP_OUT && x->hdr_due && x->peer)
		sg_hdr(ie, x, x->peer, 0, 0); /* no object: an empty subgroup 0 */
	b_flush(ie); /* before a FIN, and before the mark below */
	if (outer)
		ie->bv = NULL;
	x->in_l += total;
	if (fin && !x->i_out_done) {
		x->i_out_done = 1;
		switch (x->kind) {
		case I_GROUP_OUT:
			for (uint32_t k = 0; k <= x->nsgo; k++)
				if (g_out(x, k))
					ox_write(ie, g_out(x, k), NULL, 0, 1);
			break;
		case I_SUB_IN:
			if (!x->done_sent) {
				/* the subscription ended: PUBLISH_DONE (17+: then FIN) */
				struct moq_ietf_msg d = {0};
				x->done_sent = 1;
				d.kind = IETF_PUBLISH_DONE;
				d.request_id = x->req_id;
				d.code = IETF_DONE_TRACK_ENDED;
				d.reason = (struct moq_str){"track ended", 11};
				send_msg_on(ie, req_stream(ie, x), &d, x->peer != NULL);
			}
			break;
		case I_SUB_OUT:
			if (x->pub_bound) {
				/* the client's PUBLISH goes on; nothing to tell it */
			} else if (ie->d <= MOQ_IETF_16) {
				struct moq_ietf_msg u = {0};
				u.kind = IETF_UNSUBSCRIBE;
				u.request_id = x->req_id;
				send_msg_on(ie, xs_find(ie, 0, ie->control_sid), &u, 0);
			} else if (x->peer) {
				ox_write(ie, x->peer, NULL, 0, 1);
			}
			x->fin_due = 1; /* our side of it ends too */
			break;
		default:
			break;
		}
	}
	if (fin || x->kind != I_GROUP_OUT || x->multi)
		ie->scan = 1;
	/* what became client bytes is acknowledged once the client has them */
	if (x->kind == I_GROUP_OUT)
		group_mark(ie, x);
	else
		ack_later(ie, x->sid, x->in_l);
	ie->depth--;
	return (long)total;
}

static int ie_reset(void *b, int64_t sid, uint64_t code)
{
	struct ietf_sess *ie = b;
	struct xs *x = xs_find(ie, 1, sid);

	ie->scan = 1;
	if (!x)
		return 0;
	ie->depth++;
	x->i_out_done = 1;
	switch (x->kind) {
	case I_GROUP_OUT:
		/* the inner frees what the outer stream references: reset it even
		 * after its FIN unless the client has it all */
		for (uint32_t k = 0; k <= x->nsgo; k++) {
			struct xs *o = g_out(x, k);
			if (o && o->fin_sent && o->acked < o->q_end && !o->reset)
				o->fin_sent = 0;
			ox_reset(ie, o, code);
		}
		x->closed_due = 1;
		break;
	case I_SUB_IN:
		if (!x->ok_sent)
			send_req_error(ie, req_stream(ie, x), x->req_id,
			               code == MOQ_CODE_UNAUTHORIZED ? IETF_REQ_UNAUTHORIZED
			                                             : IETF_REQ_DOES_NOT_EXIST,
			               code == MOQ_CODE_UNAUTHORIZED ? "unauthorized" : "not found",
			               IETF_SUBSCRIBE_ERROR);
		else if (!x->done_sent) {
			struct moq_ietf_msg d = {0};
			x->done_sent = 1;
			d.kind = IETF_PUBLISH_DONE;
			d.request_id = x->req_id;
			d.code = code == MOQ_CODE_UNAUTHORIZED ? IETF_DONE_UNAUTHORIZED
			                                       : IETF_DONE_INTERNAL;
			d.reason = (struct moq_str){"reset", 5};
			send_msg_on(ie, req_stream(ie, x), &d, x->peer != NULL);
		}
		break;
	case I_ANN_IN:
		send_req_error(ie, req_stream(ie, x), x->req_id,
		               code == MOQ_CODE_UNAUTHORIZED ? IETF_REQ_UNAUTHORIZED
		                                             : IETF_REQ_DOES_NOT_EXIST,
		               "refused", IETF_SUBSCRIBE_NAMESPACE_ERROR);
		break;
	case I_SUB_OUT:
		if (x->pub_bound) {
			/* the client's PUBLISH goes on */
		} else if (ie->d <= MOQ_IETF_16) {
			struct moq_ietf_msg u = {0};
			u.kind = IETF_UNSUBSCRIBE;
			u.request_id = x->req_id;
			send_msg_on(ie, xs_find(ie, 0, ie->control_sid), &u, 0);
		} else {
			ox_reset(ie, x->peer, 0);
		}
		break;
	default:
		break;
	}
	ie->depth--;
	return 0;
}

static int ie_stop(void *b, int64_t sid, uint64_t code)
{
	struct ietf_sess *ie = b;
	struct xs *x = xs_find(ie, 1, sid);

	ie->scan = 1;
	(void)code;
	/* the relay cancels a group the client publishes */
	if (x && x->kind == I_GROUP_IN && !x->i_in_done) {
		sg_stop_all(ie, x);
		x->i_in_done = 1;
	}
	return 0;
}

static void ie_close(void *b, uint64_t code)
{
	struct ietf_sess *ie = b;

	ie->scan = 1;
	/* lite codes: 0 clean; anything else an internal / protocol error */
	fail_session(ie, code == 0                       ? IETF_CLOSE_NO_ERROR
	                 : code == MOQ_CODE_UNAUTHORIZED ? IETF_CLOSE_UNAUTHORIZED
	                                                 : IETF_CLOSE_PROTOCOL_VIOLATION);
	pump(ie);
}

static void ie_info(void *b, struct moq_quic_conn_info *ci)
{
	struct ietf_sess *ie = b;

	if (ie->shell && ie->shell->tp)
		tp_info(ie->shell, ci);
	else
		memset(ci, 0, sizeof(*ci));
}

/* --auth-url: the inner session's requests describe the IETF client (the
 * shell's transport and peer, the draft's ALPN), not the in-process binding */
static const char *ie_proto(void *b, const char **alpn)
{
	struct ietf_sess *ie = b;

	*alpn = moq_ietf_alpn(ie->d);
	return ie->shell ? moq_session_transport(ie->shell) : "quic";
}

static void ie_peer(void *b, char *remote, char *local, size_t acap, char *sni, size_t scap)
{
	struct ietf_sess *ie = b;

	if (ie->shell)
		moq_session_peer(ie->shell, remote, local, acap, sni, scap);
}

/* ---- OBJECT datagrams (draft-14 10.3; the flag form from 15) ---- */

/* One of the relay's SUBSCRIBEs awaits the client's reply. */
static int sub_awaited(struct ietf_sess *ie)
{
	for (struct xs *x = ie->streams; x; x = x->next)
		if (x->inner && x->kind == I_SUB_OUT && !x->gone && x->got_req && !x->ok_sent &&
		    !x->i_in_done)
			return 1;
	return 0;
}

/* Entry @i out of the kept datagrams (its copy is the caller's). */
static struct early_dg early_take(struct ietf_sess *ie, uint32_t i)
{
	struct early_dg e = ie->early[i];

	memmove(&ie->early[i], &ie->early[i + 1], (ie->nearly - i - 1) * sizeof(ie->early[0]));
	ie->nearly--;
	return e;
}

static void early_drop(struct ietf_sess *ie, uint32_t i)
{
	free(early_take(ie, i).p);
}

static void early_keep(struct ietf_sess *ie, const uint8_t *p, size_t len)
{
	uint8_t *c;

	if (ie->nearly == IE_EARLY_DG) { /* the oldest goes */
		early_drop(ie, 0);
		ie->n->st.dgrams_in_bad++;
	}
	if (!(c = malloc(len ? len : 1))) {
		ie->n->st.dgrams_in_bad++;
		return;
	}
	memcpy(c, p, len);
	ie->early[ie->nearly].p = c;
	ie->early[ie->nearly].len = len;
	ie->nearly++;
}

static void dgram_take(struct ietf_sess *ie, const uint8_t *p, size_t len, int may_keep);

/* The client answered SUBSCRIBE_OK with @alias: the datagrams of it that
 * came first go in now; once nothing is awaited, the rest are dropped. */
static void early_replay(struct ietf_sess *ie, uint64_t alias)
{
	for (uint32_t i = 0; i < ie->nearly;) {
		struct moq_ietf_datagram g;
		if (moq_ietf_datagram_decode(ie->early[i].p, ie->early[i].len, ie->d, &g) == 0 &&
		    g.track_alias == alias) {
			struct early_dg e = early_take(ie, i);
			dgram_take(ie, e.p, e.len, 0);
			free(e.p);
		} else {
			i++;
		}
	}
	if (!sub_awaited(ie))
		while (ie->nearly) {
			early_drop(ie, 0);
			ie->n->st.dgrams_in_bad++;
		}
}

static void dgram_take(struct ietf_sess *ie, const uint8_t *p, size_t len, int may_keep)
{
	struct moq_node *n = ie->n;
	struct moq_ietf_datagram g;
	struct xs *sub;

	/* A datagram the draft calls malformed (a type or flag it lacks,
	 * empty properties, properties on a status other than Normal) closes
	 * the session with PROTOCOL_VIOLATION, as the draft says (pump defers
	 * the close to the end of the transport's callback: the shell's depth).
	 * One for no track the client answered SUBSCRIBE_OK for, or that the
	 * cache cannot hold, is counted and dropped, as lite-05's: the session
	 * goes on (one that may be for a SUBSCRIBE_OK still on its way waits
	 * for it: early_keep). */
	if (ie->dead || ie->closing || !ie->inner) {
		n->st.dgrams_in_bad++;
		return;
	}
	if (moq_ietf_datagram_decode(p, len, ie->d, &g) < 0) {
		n->st.dgrams_in_bad++;
		fail_session(ie, IETF_CLOSE_PROTOCOL_VIOLATION);
		pump(ie);
		return;
	}
	if (!(sub = find_kind(ie, I_SUB_OUT, g.track_alias, 1)) || !sub->ok_sent ||
	    sub->i_in_done) {
		if (may_keep && sub_awaited(ie))
			early_keep(ie, p, len);
		else
			n->st.dgrams_in_bad++;
		return;
	}
	if (g.is_status) {
		/* no payload: a single-object group has nothing to end, and an
		 * object that does not exist is no frame (as on streams) */
		if (g.status != IETF_OBJ_NORMAL && g.status != IETF_OBJ_DOES_NOT_EXIST &&
		    g.status != IETF_OBJ_END_OF_GROUP && g.status != IETF_OBJ_END_OF_TRACK)
			n->st.dgrams_in_bad++;
		return;
	}
	if (g.object != 0) {
		/* the cache's datagram group is one frame, finished at once:
		 * a later object of the group has nowhere to go */
		n->st.dgrams_in_bad++;
		return;
	}
	if (g.has_ext && g.ext.len > MOQ_CACHE_EXT_MAX) {
		n->st.ietf_ext_dropped++;
		g.has_ext = false;
	}
	if (g.has_ext)
		n->st.ietf_ext_kept++; /* beside the frame, as on streams */
	ie->depth++;
	/* the frame's timestamp is 0, as a lite-04 frame's (sg_in) */
	dgram_in_ext(ie->inner, sub->lite_id, g.group, 0, g.payload, g.payload_len,
	             g.has_ext ? (const uint8_t *)g.ext.p : NULL, g.has_ext ? g.ext.len : 0);
	ie->depth--;
	pump(ie);
}

void ietf_datagram(struct ietf_sess *ie, const uint8_t *p, size_t len)
{
	ie->scan = 1;
	dgram_take(ie, p, len, 1);
}

int ietf_dgram_hdr(struct ietf_sess *ie, uint8_t *buf, size_t cap, uint64_t lite_id,
                   const struct moq_cache_group *cg)
{
	struct moq_ietf_datagram g = {0};
	const uint8_t *xp;
	size_t xn;
	struct xs *sub;

	/* paused (forward 0): as a stream, which the shell cancels */
	if (ie->dead || ie->closing || !(sub = find_lite(ie, I_SUB_IN, lite_id)) || !sub->ok_sent ||
	    sub->paused)
		return MOQ_ERR_STATE;
	g.track_alias = sub->alias;
	g.group = moq_cache_group_seq(cg);
	if (moq_cache_frame_ext(cg, 0, &xp, &xn) == 0) {
		g.has_ext = true; /* too large for @cap: the group goes on a stream */
		g.ext = (struct moq_str){(const char *)xp, xn};
	}
	g.has_object_id = false; /* object 0 */
	g.has_priority = true;
	g.priority = 128;      /* as the subgroup headers */
	g.end_of_group = true; /* the group's only object */
	return moq_ietf_datagram_encode(buf, cap, ie->d, &g);
}

/* The payload referenced, as the transport's own dgram_send; the shell's
 * transport must have negotiated datagrams (raw QUIC: the client's
 * max_datagram_frame_size, which also bounds the size; WebTransport: its
 * HTTP datagrams; qmux: none, the group goes on a stream). */
static int ie_dgram_send(void *b, const uint8_t *hdr, size_t hdrlen, const struct iovec *iov,
                         size_t iovcnt, void (*release)(void *arg), void *arg)
{
	struct ietf_sess *ie = b;
	struct moq_session *sh = ie->shell;

	if (ie->dead || ie->closing || !sh || !sh->tp)
		return MOQ_ERR_STATE;
	if (sh->bops)
		return sh->bops->dgram_send ? sh->bops->dgram_send(sh->tp, hdr, hdrlen, iov, iovcnt,
		                                                   release, arg)
		                            : MOQ_ERR_STATE;
	return sh->conn ? moq_quic_dgram_send(sh->conn, hdr, hdrlen, iov, iovcnt, release, arg)
	                : MOQ_ERR_STATE;
}

/* The inner accepted the client's SUBSCRIBE (subscribe.c): the IETF client
 * on raw QUIC may move to the fast path once quiet, as a moq-lite
 * subscriber's connection does (WebTransport's at its CONNECT). Not at the
 * SUBSCRIBE_OK, which waits for the track: the first objects would go through
 * ngtcp2. */
static void ie_allow_handoff(void *b)
{
	struct ietf_sess *ie = b;

	if (ie->shell && ie->shell->conn)
		(void)moq_quic_conn_allow_handoff(ie->shell->conn);
}

static void ie_frame_meta(void *b, int64_t sid, struct moq_cache_meta *m)
{
	struct ietf_sess *ie = b;
	struct xs *x = xs_find(ie, 1, sid);

	memset(m, 0, sizeof(*m));
	if (!x || x->kind != I_GROUP_IN)
		return;
	if (x->pext_len) {
		m->ext = x->pext;
		m->ext_len = x->pext_len;
		x->pext_len = 0; /* this frame's only */
	}
	if (x->ploc) {
		m->has_loc = true;
		m->subgroup = x->psg;
		m->object = x->pobj;
		x->ploc = 0;
	}
}

static const struct moq_binding_ops ie_ops = {
        .frame_meta = ie_frame_meta,
        .allow_handoff = ie_allow_handoff,
        .dgram_send = ie_dgram_send,
        .stream_open = ie_open,
        .stream_write = ie_write,
        .stream_reset = ie_reset,
        .stream_stop_sending = ie_stop,
        .close = ie_close,
        .get_info = ie_info,
        .get_peer = ie_peer,
        .get_proto = ie_proto,
};

/* ---- accept ---- */

/* The translator of shell @s (transport set up): draft @d, binding URL @url. */
static struct ietf_sess *ie_new(struct moq_session *s, int d, const char *url, size_t url_len)
{
	struct ietf_sess *ie = calloc(1, sizeof(*ie));

	if (!ie)
		return NULL;
	if (url && url_len && !(ie->url = memdup0(url, url_len))) {
		free(ie);
		return NULL;
	}
	ie->url_len = ie->url ? url_len : 0;
	ie->scan = 1;
	s->ietf = ie;
	ie->shell = s;
	ie->n = s->n;
	ie->d = (enum moq_ietf_draft)d;
	ie->control_sid = -1;
	ie->next_ibidi = 0;   /* client-initiated bidi */
	ie->next_iuni = 2;    /* client-initiated uni */
	ie->next_obidi = 1;   /* server-initiated bidi */
	ie->next_ouni = 3;    /* server-initiated uni */
	ie->next_our_req = 1; /* server request ids are odd */
	ie->max_granted = IE_REQ_WINDOW;
	if (ie->d >= MOQ_IETF_17) {
		/* draft-17: each side opens its SETUP uni stream at once */
		struct xs *so = ox_open(ie, 0, X_SETUP_OUT);
		if (so)
			send_our_setup(ie, so, NULL);
	}
	return ie;
}

int ietf_quic_attach(struct moq_session *s, int d)
{
	if (d < MOQ_IETF_FIRST || d > MOQ_IETF_LAST)
		return MOQ_ERR_INVAL;
	return ie_new(s, d, NULL, 0) ? 0 : MOQ_ERR_NOMEM;
}

struct moq_session *ietf_binding_accept(struct moq_node *n, const struct moq_binding_ops *ops,
                                        void *b, int d, const char *url, size_t url_len)
{
	struct moq_session *s;

	if (d < MOQ_IETF_FIRST || d > MOQ_IETF_LAST || !ops || !b)
		return NULL;
	s = sess_new(n, NULL, 1);
	if (!s) {
		n->st.refused_bounds++;
		return NULL;
	}
	s->bops = ops;
	s->tp = b;
	if (!ie_new(s, d, url, url_len)) {
		s->tp = NULL;
		s->freed = 1;
		sess_free(s, 0, 1);
		return NULL;
	}
	return s;
}
