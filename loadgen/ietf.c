/* SPDX-License-Identifier: MIT */
/*
 * ietf.c: the load generator's IETF moq-transport client (ietf.h).
 *
 * Control messages ride the control bidi (14-16) or, from 17, our SETUP uni
 * stream and a bidi per request. Subgroup streams are read in place: only
 * the stream and object headers are gathered into a small buffer, payload
 * bytes go from QUIC's buffer to the counters / the verifier.
 */
#include "ietf.h"

#include <stdlib.h>
#include <string.h>

#include "ietf_codec.h"
#include "moq_err.h"

#define HDR_CAP 512 /* a subgroup / object header (with extensions) fits */

/* Memory handed to moq_quic_stream_write, kept until the stream closes. */
struct chunk {
	struct chunk *next;
	int64_t sid;
	size_t len;
	uint8_t data[];
};

enum rkind { R_NEW = 0, R_CTL, R_SG, R_IGNORE };

/* A stream we read. */
struct rs {
	struct rs *next;
	int64_t sid;
	uint8_t kind, hdr, done;
	uint8_t *buf; /* R_CTL: messages; R_SG: a header being gathered */
	size_t len, cap;
	struct moq_ietf_subgroup_hdr h;
	uint64_t left; /* payload bytes of the current object still to come */
	uint64_t objs;
};

struct lc {
	struct moq_lg_ietf *lg;
	struct moq_quic_conn *c;
	int idx; /* -1: the publisher */
	uint8_t established, setup_ok, sub_ok, announced, relay_sub, closed;
	int64_t ctl_sid; /* 14-16: the control bidi; 17+: the subscribe's request bidi */
	uint64_t alias;  /* subscriber: from SUBSCRIBE_OK; publisher: ours */
	uint64_t bytes, objects, groups;
	struct rs *rs;
	struct chunk *chunks;
	struct moq_lg_rx *rx; /* verify */
	/* publisher: the group being written */
	int64_t gsid;
	uint64_t ggroup;
	uint64_t est_ns; /* when the handshake completed */
};

struct moq_lg_ietf {
	struct moq_lg_ietf_cfg cfg;
	struct lc pub;
	struct lc *subs;
	struct moq_ietf_msg ns; /* the namespace tuple (ns, ns_n) */
	char nsbuf[128];
	struct moq_lg_ietf_counts c;
	uint64_t now; /* moq_lg_ietf_set_now */
};

/* ---- writing ---- */

static int wr(struct lc *l, int64_t sid, const void *p, size_t n, int fin)
{
	struct chunk *ch = NULL;
	struct iovec iov;
	long w;

	if (!l->c)
		return MOQ_ERR_STATE;
	if (n) {
		ch = malloc(sizeof(*ch) + n);
		if (!ch)
			return MOQ_ERR_NOMEM;
		ch->sid = sid;
		ch->len = n;
		memcpy(ch->data, p, n);
		ch->next = l->chunks;
		l->chunks = ch;
		iov.iov_base = ch->data;
		iov.iov_len = n;
	}
	w = moq_quic_stream_write(l->c, sid, &iov, n ? 1 : 0, fin);
	return w < 0 ? (int)w : 0;
}

static void chunks_free(struct lc *l, int64_t sid, int all)
{
	for (struct chunk **pp = &l->chunks; *pp;) {
		struct chunk *ch = *pp;
		if (all || ch->sid == sid) {
			*pp = ch->next;
			free(ch);
		} else {
			pp = &ch->next;
		}
	}
}

static int send_msg(struct lc *l, int64_t sid, const struct moq_ietf_msg *m, int fin)
{
	uint8_t b[2048];
	int n = moq_ietf_msg_encode(b, sizeof(b), (enum moq_ietf_draft)l->lg->cfg.draft, m);

	if (n < 0)
		return n;
	return wr(l, sid, b, (size_t)n, fin);
}

static void set_ns(const struct moq_lg_ietf *lg, struct moq_ietf_msg *m)
{
	m->ns_n = lg->ns.ns_n;
	memcpy(m->ns, lg->ns.ns, sizeof(m->ns[0]) * lg->ns.ns_n);
}

/* A request's stream: the control stream (14-16) or a new bidi (17+). */
static int64_t req_stream(struct lc *l)
{
	int64_t sid;

	if (l->lg->cfg.draft <= 16)
		return l->ctl_sid;
	if (moq_quic_stream_open(l->c, 1, &sid) < 0)
		return -1;
	return sid;
}

/* ---- reading ---- */

static struct rs *rs_get(struct lc *l, int64_t sid)
{
	struct rs *r;

	for (r = l->rs; r; r = r->next)
		if (r->sid == sid)
			return r;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->sid = sid;
	r->next = l->rs;
	l->rs = r;
	return r;
}

static void rs_del(struct lc *l, int64_t sid)
{
	for (struct rs **pp = &l->rs; *pp; pp = &(*pp)->next)
		if ((*pp)->sid == sid) {
			struct rs *r = *pp;
			*pp = r->next;
			free(r->buf);
			free(r);
			return;
		}
}

static int buf_add(struct rs *r, const uint8_t *p, size_t n, size_t max)
{
	if (r->len + n > r->cap) {
		size_t cap = r->cap ? r->cap : 256;
		uint8_t *b;
		while (cap < r->len + n)
			cap *= 2;
		if (cap > max)
			return MOQ_ERR_TOO_LARGE;
		b = realloc(r->buf, cap);
		if (!b)
			return MOQ_ERR_NOMEM;
		r->buf = b;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, p, n);
	r->len += n;
	return 0;
}

static void subscribe(struct lc *l)
{
	struct moq_ietf_msg m = {0};

	m.kind = IETF_SUBSCRIBE;
	m.request_id = 0;
	set_ns(l->lg, &m);
	m.name = (struct moq_str){l->lg->cfg.track, strlen(l->lg->cfg.track)};
	m.priority = 1;
	m.group_order = 2;
	m.forward = 1;
	m.filter.kind = IETF_F_NEXT_OBJECT;
	l->ctl_sid = req_stream(l);
	if (l->ctl_sid >= 0)
		send_msg(l, l->ctl_sid, &m, 0);
}

static void on_msg(struct lc *l, int64_t sid, const struct moq_ietf_msg *m)
{
	struct moq_lg_ietf *lg = l->lg;

	switch (m->kind) {
	case IETF_SERVER_SETUP:
	case IETF_SETUP:
		if (l->setup_ok)
			break;
		l->setup_ok = 1;
		if (l->idx >= 0) {
			lg->c.subs_setup++;
			subscribe(l);
		}
		break;
	case IETF_PUBLISH_NAMESPACE_OK:
	case IETF_PUBLISH_OK:
	case IETF_REQUEST_OK:
		if (l->idx < 0) {
			l->announced = 1;
			if (lg->cfg.use_publish)
				l->relay_sub = 1; /* PUBLISH accepted: forwarding */
		}
		break;
	case IETF_SUBSCRIBE:
		if (l->idx < 0 && lg->cfg.use_publish) {
			lg->c.errors++; /* a PUBLISHed track needs no SUBSCRIBE */
		} else if (l->idx < 0) {
			/* the relay subscribes to our track */
			struct moq_ietf_msg ok = {0};
			ok.kind = IETF_SUBSCRIBE_OK;
			ok.request_id = m->request_id;
			l->alias = m->track_alias ? m->track_alias : 77;
			ok.track_alias = l->alias;
			ok.group_order = 1;
			send_msg(l, sid, &ok, 0);
			l->relay_sub = 1;
		}
		break;
	case IETF_SUBSCRIBE_OK:
		if (l->idx >= 0 && !l->sub_ok) {
			l->sub_ok = 1;
			l->alias = m->track_alias;
			lg->c.subs_ok++;
		}
		break;
	case IETF_SUBSCRIBE_ERROR:
	case IETF_REQUEST_ERROR:
		if (l->idx >= 0)
			lg->c.subs_refused++;
		break;
	default:
		break;
	}
}

static void ctl_data(struct lc *l, struct rs *r, const uint8_t *p, size_t n)
{
	enum moq_ietf_draft d = (enum moq_ietf_draft)l->lg->cfg.draft;
	size_t off = 0;

	if (buf_add(r, p, n, 4 * MOQ_IETF_MSG_MAX) < 0) {
		l->lg->c.errors++;
		r->kind = R_IGNORE;
		return;
	}
	for (;;) {
		struct moq_ietf_msg m;
		int k = moq_ietf_msg_decode(r->buf + off, r->len - off, d, &m);
		if (k == MOQ_ERR_SHORT)
			break;
		if (k < 0) {
			l->lg->c.errors++;
			r->kind = R_IGNORE;
			return;
		}
		on_msg(l, r->sid, &m);
		off += (size_t)k;
	}
	memmove(r->buf, r->buf + off, r->len - off);
	r->len -= off;
}

static uint64_t now_ns(void)
{
	return moq_lg_now_ns();
}

/* Payload bytes of the current object. */
static void sg_payload(struct lc *l, struct rs *r, const uint8_t *p, size_t n)
{
	l->bytes += n;
	l->lg->c.bytes += n;
	if (l->rx)
		moq_lg_rx_data(l->rx, r->h.group, p, n, now_ns());
}

static void sg_object_end(struct lc *l, struct rs *r)
{
	(void)r;
	l->objects++;
	l->lg->c.objects++;
}

static void sg_data(struct lc *l, struct rs *r, const uint8_t *p, size_t n)
{
	enum moq_ietf_draft d = (enum moq_ietf_draft)l->lg->cfg.draft;

	while (n && r->kind == R_SG) {
		size_t take;
		int k;

		if (r->left) {
			take = n < r->left ? n : (size_t)r->left;
			sg_payload(l, r, p, take);
			p += take;
			n -= take;
			r->left -= take;
			if (!r->left)
				sg_object_end(l, r);
			continue;
		}
		/* a header: gather what fits, decode, give back the excess */
		take = HDR_CAP - r->len < n ? HDR_CAP - r->len : n;
		if (buf_add(r, p, take, HDR_CAP) < 0)
			goto bad;
		if (!r->hdr) {
			k = moq_ietf_subgroup_hdr_decode(r->buf, r->len, d, &r->h);
			if (k >= 0 && r->h.track_alias != l->alias)
				goto bad;
		} else {
			struct moq_ietf_object ob;
			k = moq_ietf_object_decode_head(r->buf, r->len, d, r->h.extensions, &ob);
			if (k >= 0) {
				if (ob.id_delta != 0)
					goto bad; /* the relay sends objects 0, 1, 2, ... */
				if (ob.payload_len == 0 && ob.status != IETF_OBJ_NORMAL) {
					/* end of group / track: no object */
				} else {
					r->left = ob.payload_len;
					if (l->rx)
						moq_lg_rx_frame(l->rx, r->h.group, ob.payload_len);
					r->objs++;
					if (!r->left)
						sg_object_end(l, r);
				}
			}
		}
		if (k == MOQ_ERR_SHORT) {
			if (r->len >= HDR_CAP)
				goto bad;
			p += take;
			n -= take;
			continue;
		}
		if (k < 0)
			goto bad;
		if (!r->hdr) {
			r->hdr = 1;
			if (l->rx)
				moq_lg_rx_group_begin(l->rx, r->h.group);
		}
		/* bytes of @p beyond the header are not the header's */
		{
			size_t used = take - (r->len - (size_t)k);
			p += used;
			n -= used;
			r->len = 0;
		}
	}
	return;
bad:
	l->lg->c.errors++;
	r->kind = R_IGNORE;
}

static void sg_fin(struct lc *l, struct rs *r)
{
	if (r->kind != R_SG || r->done)
		return;
	r->done = 1;
	if (!r->hdr || r->left || r->len) {
		l->lg->c.errors++; /* cut short */
		return;
	}
	l->groups++;
	l->lg->c.groups++;
	if (l->rx)
		moq_lg_rx_group_end(l->rx, r->h.group, -1);
}

/* ---- callbacks ---- */

static int cb_established(struct moq_quic_conn *c, void *user, const char *alpn)
{
	struct lc *l = user;
	struct moq_lg_ietf *lg = l->lg;
	struct moq_ietf_msg m = {0};
	int64_t sid;

	(void)c;
	if (!alpn || moq_ietf_alpn_draft(alpn, strlen(alpn)) != lg->cfg.draft)
		return MOQ_ERR_INVAL; /* closes: the relay picked another protocol */
	l->established = 1;
	l->est_ns = lg->now;
	if (lg->cfg.draft >= 17) {
		m.kind = IETF_SETUP;
		if (moq_quic_stream_open(l->c, 0, &sid) < 0)
			return MOQ_ERR_STATE;
	} else {
		m.kind = IETF_CLIENT_SETUP;
		if (moq_quic_stream_open(l->c, 1, &sid) < 0)
			return MOQ_ERR_STATE;
		l->ctl_sid = sid;
		if (lg->cfg.draft == 14) {
			m.versions_n = 1;
			m.versions[0] = MOQ_IETF_VERSION(14);
		}
	}
	moq_ietf_param_add(&m.params, IETF_OPT_PATH, 0, (struct moq_str){"/", 1});
	moq_ietf_param_add(&m.params, IETF_OPT_MAX_REQUEST_ID, 100, (struct moq_str){0});
	moq_ietf_param_add(&m.params, IETF_OPT_IMPLEMENTATION, 0, (struct moq_str){"moqdp-load", 10});
	if (send_msg(l, sid, &m, 0) < 0)
		return MOQ_ERR_STATE;
	if (l->idx < 0) {
		struct moq_ietf_msg a = {0};
		a.kind = IETF_PUBLISH_NAMESPACE;
		a.request_id = 0;
		set_ns(lg, &a);
		if (lg->cfg.use_publish) {
			a.kind = IETF_PUBLISH;
			a.name = (struct moq_str){lg->cfg.track, strlen(lg->cfg.track)};
			a.track_alias = l->alias = 1;
			a.group_order = 1;
			a.forward = 1;
		}
		sid = req_stream(l);
		if (sid < 0 || send_msg(l, sid, &a, 0) < 0)
			return MOQ_ERR_STATE;
	}
	return 0;
}

static int cb_stream_data(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t off,
                          const uint8_t *data, size_t len, int fin)
{
	struct lc *l = user;
	struct rs *r = rs_get(l, sid);

	(void)c;
	(void)off;
	if (!r)
		return MOQ_ERR_NOMEM;
	if (r->kind == R_NEW && len) {
		/* a uni stream from the relay: its SETUP stream (17+: type
		 * 0x2f00, first byte 0xaf) or a subgroup stream; a bidi: control */
		if (!(sid & 2) || (l->lg->cfg.draft >= 17 && data[0] == 0xaf))
			r->kind = R_CTL;
		else
			r->kind = R_SG;
	}
	if (r->kind == R_CTL)
		ctl_data(l, r, data, len);
	else if (r->kind == R_SG)
		sg_data(l, r, data, len);
	if (fin && r->kind == R_SG)
		sg_fin(l, r);
	return 0;
}

static void cb_stream_reset(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t app_err,
                            uint64_t final_size)
{
	struct lc *l = user;
	struct rs *r = rs_get(l, sid);

	(void)c;
	(void)final_size;
	if (r && r->kind == R_SG && !r->done) {
		r->done = 1;
		l->lg->c.groups_reset++;
		if (l->rx && r->hdr)
			moq_lg_rx_group_end(l->rx, r->h.group, (int64_t)(app_err & 31));
	}
}

static void cb_stream_closed(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t app_err,
                             void *app)
{
	(void)app;
	struct lc *l = user;

	(void)c;
	(void)app_err;
	chunks_free(l, sid, 0);
	if (sid != l->ctl_sid)
		rs_del(l, sid);
}

static void cb_conn_closed(struct moq_quic_conn *c, void *user, const struct moq_quic_close_info *i)
{
	struct lc *l = user;

	(void)c;
	l->closed = 1;
	l->c = NULL;
	l->lg->c.subs_closed += l->idx >= 0;
	l->lg->c.close_code = i ? i->code : 0;
	l->lg->c.close_local = i ? i->local : 0;
	l->lg->c.close_what = i ? i->what : NULL;
	chunks_free(l, 0, 1);
	while (l->rs) {
		struct rs *r = l->rs;
		l->rs = r->next;
		free(r->buf);
		free(r);
	}
}

static const struct moq_quic_callbacks lg_cbs = {
        .established = cb_established,
        .stream_data = cb_stream_data,
        .stream_reset = cb_stream_reset,
        .stream_closed = cb_stream_closed,
        .conn_closed = cb_conn_closed,
};

const struct moq_quic_callbacks *moq_lg_ietf_callbacks(void)
{
	return &lg_cbs;
}

/* ---- the API ---- */

struct moq_lg_ietf *moq_lg_ietf_new(const struct moq_lg_ietf_cfg *cfg)
{
	struct moq_lg_ietf *lg;
	int n;

	if (!cfg || cfg->draft < MOQ_IETF_FIRST || cfg->draft > MOQ_IETF_LAST ||
	    !cfg->broadcast[0] || !cfg->track[0])
		return NULL;
	lg = calloc(1, sizeof(*lg));
	if (!lg)
		return NULL;
	lg->cfg = *cfg;
	lg->cfg.broadcast[sizeof(lg->cfg.broadcast) - 1] = 0;
	lg->cfg.track[sizeof(lg->cfg.track) - 1] = 0;
	memcpy(lg->nsbuf, lg->cfg.broadcast, sizeof(lg->nsbuf));
	n = moq_ietf_path_to_ns(lg->nsbuf, strlen(lg->nsbuf), lg->ns.ns);
	if (n <= 0) {
		free(lg);
		return NULL;
	}
	lg->ns.ns_n = (uint32_t)n;
	lg->pub.lg = lg;
	lg->pub.idx = -1;
	lg->pub.ctl_sid = -1;
	lg->pub.gsid = -1;
	lg->subs = calloc(cfg->subscribers ? cfg->subscribers : 1, sizeof(*lg->subs));
	if (!lg->subs) {
		free(lg);
		return NULL;
	}
	for (uint32_t i = 0; i < cfg->subscribers; i++) {
		struct lc *l = &lg->subs[i];
		l->lg = lg;
		l->idx = (int)i;
		l->ctl_sid = -1;
		if (cfg->verify) {
			l->rx = malloc(sizeof(*l->rx));
			if (!l->rx) {
				moq_lg_ietf_free(lg);
				return NULL;
			}
			moq_lg_rx_init(l->rx, cfg->track_id, cfg->hist);
		}
	}
	return lg;
}

static void lc_drop(struct lc *l)
{
	chunks_free(l, 0, 1);
	while (l->rs) {
		struct rs *r = l->rs;
		l->rs = r->next;
		free(r->buf);
		free(r);
	}
	free(l->rx);
	l->rx = NULL;
}

void moq_lg_ietf_free(struct moq_lg_ietf *lg)
{
	if (!lg)
		return;
	/* (connections still open are the endpoint's: free it first) */
	lc_drop(&lg->pub);
	for (uint32_t i = 0; i < lg->cfg.subscribers; i++)
		lc_drop(&lg->subs[i]);
	free(lg->subs);
	free(lg);
}

int moq_lg_ietf_connect(struct moq_lg_ietf *lg, struct moq_quic_endpoint *ep, int idx,
                        const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                        uint64_t now)
{
	struct lc *l;
	int err = 0;

	if (idx >= (int)lg->cfg.subscribers || idx < -1)
		return MOQ_ERR_INVAL;
	l = idx < 0 ? &lg->pub : &lg->subs[idx];
	if (l->c)
		return MOQ_ERR_EXISTS;
	l->c = moq_quic_connect(ep, local, remote, l, now, &err);
	return l->c ? 0 : (err ? err : MOQ_ERR_IO);
}

int moq_lg_ietf_pub_announced(const struct moq_lg_ietf *lg)
{
	return lg->pub.announced && lg->pub.c;
}

int moq_lg_ietf_pub_ready(const struct moq_lg_ietf *lg)
{
	return lg->pub.announced && lg->pub.relay_sub && lg->pub.c;
}

int moq_lg_ietf_pub_object(struct moq_lg_ietf *lg, uint64_t group, uint32_t index,
                           const uint8_t *data, size_t len, int last)
{
	enum moq_ietf_draft d = (enum moq_ietf_draft)lg->cfg.draft;
	struct lc *l = &lg->pub;
	uint8_t hb[64];
	int hn = 0, rc;
	struct moq_ietf_object ob = {0};
	uint8_t *buf;

	if (!moq_lg_ietf_pub_ready(lg))
		return MOQ_ERR_STATE;
	if (index == 0) {
		struct moq_ietf_subgroup_hdr h = {0};
		if (l->gsid >= 0) /* the previous group was not ended: end it */
			wr(l, l->gsid, NULL, 0, 1);
		rc = moq_quic_stream_open(l->c, 0, &l->gsid);
		if (rc < 0) {
			l->gsid = -1;
			return rc;
		}
		l->ggroup = group;
		h.has_priority = true;
		h.priority = 7;
		h.first_object = true;
		h.track_alias = l->alias;
		h.group = group;
		hn = moq_ietf_subgroup_hdr_encode(hb, sizeof(hb), d, &h);
		if (hn < 0)
			return hn;
		lg->c.pub_groups++;
	} else if (l->gsid < 0 || group != l->ggroup) {
		return MOQ_ERR_STATE;
	}
	ob.payload_len = len;
	rc = moq_ietf_object_encode_head(hb + hn, sizeof(hb) - (size_t)hn, d, false, &ob);
	if (rc < 0)
		return rc;
	hn += rc;
	/* one chunk: header and payload */
	buf = malloc((size_t)hn + len);
	if (!buf)
		return MOQ_ERR_NOMEM;
	memcpy(buf, hb, (size_t)hn);
	memcpy(buf + hn, data, len);
	rc = wr(l, l->gsid, buf, (size_t)hn + len, last);
	free(buf);
	if (rc < 0)
		return rc;
	lg->c.pub_objects++;
	lg->c.pub_bytes += len;
	if (last)
		l->gsid = -1;
	return 0;
}

int moq_lg_ietf_sub_setup(const struct moq_lg_ietf *lg, uint32_t idx)
{
	return idx < lg->cfg.subscribers && lg->subs[idx].setup_ok;
}

int moq_lg_ietf_sub_ok(const struct moq_lg_ietf *lg, uint32_t idx)
{
	return idx < lg->cfg.subscribers && lg->subs[idx].sub_ok;
}

uint64_t moq_lg_ietf_sub_established(const struct moq_lg_ietf *lg, uint32_t idx)
{
	return idx < lg->cfg.subscribers ? lg->subs[idx].est_ns : 0;
}

void moq_lg_ietf_set_now(struct moq_lg_ietf *lg, uint64_t now)
{
	lg->now = now;
}

uint64_t moq_lg_ietf_sub_bytes(const struct moq_lg_ietf *lg, uint32_t idx)
{
	return idx < lg->cfg.subscribers ? lg->subs[idx].bytes : 0;
}

uint64_t moq_lg_ietf_sub_groups(const struct moq_lg_ietf *lg, uint32_t idx)
{
	return idx < lg->cfg.subscribers ? lg->subs[idx].groups : 0;
}

void moq_lg_ietf_counts(struct moq_lg_ietf *lg, struct moq_lg_ietf_counts *out,
                        struct moq_lg_counts *vc, int final)
{
	*out = lg->c;
	if (vc)
		memset(vc, 0, sizeof(*vc));
	for (uint32_t i = 0; vc && i < lg->cfg.subscribers; i++) {
		struct lc *l = &lg->subs[i];
		if (!l->rx)
			continue;
		if (final)
			moq_lg_rx_finish(l->rx);
		moq_lg_counts_add(vc, &l->rx->c);
	}
}

void moq_lg_ietf_close(struct moq_lg_ietf *lg)
{
	if (lg->pub.c)
		moq_quic_conn_close(lg->pub.c, 0, NULL);
	for (uint32_t i = 0; i < lg->cfg.subscribers; i++)
		if (lg->subs[i].c)
			moq_quic_conn_close(lg->subs[i].c, 0, NULL);
}
