/* SPDX-License-Identifier: MIT */
/*
 * ietf_codec.c: IETF moq-transport drafts 14-20 (ietf_codec.h). Each message
 * is one encoder and one decoder with the drafts' differences side by side;
 * the field order follows the drafts' message figures as @moq/net 0.3.4's
 * ietf/ implements them (tests/oracle/ietf_golden.mjs checks the bytes).
 */
#include "ietf_codec.h"

#include <string.h>

#include "moq_err.h"

/* ---- varints ---- */

/* draft-17, 1.4.1: the leading-ones varint. 0xxxxxxx = 7 bits, 10 = 14,
 * 110 = 21, 1110 = 28, 11110 = 35, 111110 = 42, 1111110 = 49 (draft-18+),
 * 11111110 = 56, 11111111 = 64. */
static size_t lo_len(uint64_t v)
{
	if (v < (UINT64_C(1) << 7))
		return 1;
	if (v < (UINT64_C(1) << 14))
		return 2;
	if (v < (UINT64_C(1) << 21))
		return 3;
	if (v < (UINT64_C(1) << 28))
		return 4;
	if (v < (UINT64_C(1) << 35))
		return 5;
	if (v < (UINT64_C(1) << 42))
		return 6;
	/* The 7-byte form is reserved in draft 17: skip it everywhere (as
	 * @moq/net does), 8 bytes carry 56 bits. */
	if (v < (UINT64_C(1) << 56))
		return 8;
	return 9;
}

size_t moq_ietf_varint_len(enum moq_ietf_draft d, uint64_t v)
{
	return moq_ietf_leading_ones(d) ? lo_len(v) : moq_varint_len(v);
}

int moq_ietf_varint_put(uint8_t *buf, size_t cap, enum moq_ietf_draft d, uint64_t v)
{
	size_t n, i;

	if (!moq_ietf_leading_ones(d))
		return moq_varint_put(buf, cap, v);
	n = lo_len(v);
	if (cap < n)
		return MOQ_ERR_TOO_LARGE;
	if (n == 9) {
		buf[0] = 0xff;
		for (i = 0; i < 8; i++)
			buf[1 + i] = (uint8_t)(v >> (8 * (7 - i)));
		return 9;
	}
	if (n == 8) {
		buf[0] = 0xfe;
		for (i = 0; i < 7; i++)
			buf[1 + i] = (uint8_t)(v >> (8 * (6 - i)));
		return 8;
	}
	for (i = 0; i < n; i++)
		buf[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	/* n - 1 leading ones, then a zero bit */
	buf[0] |= (uint8_t)(0xff << (9 - n));
	return (int)n;
}

int moq_ietf_varint_get(const uint8_t *buf, size_t len, enum moq_ietf_draft d, uint64_t *v)
{
	unsigned ones = 0;
	size_t n, i;
	uint64_t x;

	if (!moq_ietf_leading_ones(d))
		return moq_varint_get(buf, len, v);
	if (len == 0)
		return MOQ_ERR_SHORT;
	while (ones < 8 && (buf[0] & (0x80 >> ones)))
		ones++;
	if (ones == 6 && d == MOQ_IETF_17)
		return MOQ_ERR_DECODE; /* draft-17: 1111110x is reserved */
	n = ones <= 6 ? ones + 1 : ones == 7 ? 8 : 9;
	if (len < n)
		return MOQ_ERR_SHORT;
	x = ones >= 7 ? 0 : (buf[0] & (0x7f >> ones));
	for (i = 1; i < n; i++)
		x = (x << 8) | buf[i];
	*v = x;
	return (int)n;
}

/* ---- versions and ALPNs ---- */

static const char *const alpns[] = {"moq-00",  "moqt-15", "moqt-16", "moqt-17",
                                    "moqt-18", "moqt-19", "moqt-20"};

const char *moq_ietf_alpn(enum moq_ietf_draft d)
{
	if (d < MOQ_IETF_FIRST || d > MOQ_IETF_LAST)
		return NULL;
	return alpns[d - MOQ_IETF_FIRST];
}

int moq_ietf_alpn_draft(const char *alpn, size_t len)
{
	if (!alpn)
		return 0;
	for (int d = MOQ_IETF_FIRST; d <= MOQ_IETF_LAST; d++) {
		const char *a = alpns[d - MOQ_IETF_FIRST];
		if (strlen(a) == len && memcmp(a, alpn, len) == 0)
			return d;
	}
	return 0;
}

int moq_ietf_version_draft(uint64_t version)
{
	if ((version & ~UINT64_C(0xff)) != UINT64_C(0xff000000))
		return 0;
	if ((version & 0xff) < MOQ_IETF_FIRST || (version & 0xff) > MOQ_IETF_LAST)
		return 0;
	return (int)(version & 0xff);
}

/* ---- kinds and wire types ---- */

struct kind_row {
	enum moq_ietf_kind kind;
	uint64_t type;
	uint8_t from, to; /* drafts */
	const char *name;
};

/* draft-14 9 (Table 1) and its successors' message tables; 17 removed the
 * control-stream-only messages (MAX_REQUEST_ID, UNSUBSCRIBE, ...: a request
 * is its own bidi stream there), 18 renumbered SUBSCRIBE_NAMESPACE. */
static const struct kind_row kinds[] = {
        {IETF_CLIENT_SETUP, 0x20, 14, 16, "CLIENT_SETUP"},
        {IETF_SERVER_SETUP, 0x21, 14, 16, "SERVER_SETUP"},
        {IETF_SETUP, 0x2f00, 17, 20, "SETUP"},
        {IETF_GOAWAY, 0x10, 14, 20, "GOAWAY"},
        {IETF_MAX_REQUEST_ID, 0x15, 14, 16, "MAX_REQUEST_ID"},
        {IETF_REQUESTS_BLOCKED, 0x1a, 14, 16, "REQUESTS_BLOCKED"},
        {IETF_SUBSCRIBE, 0x03, 14, 20, "SUBSCRIBE"},
        {IETF_SUBSCRIBE_OK, 0x04, 14, 20, "SUBSCRIBE_OK"},
        {IETF_SUBSCRIBE_ERROR, 0x05, 14, 14, "SUBSCRIBE_ERROR"},
        {IETF_REQUEST_ERROR, 0x05, 15, 20, "REQUEST_ERROR"},
        {IETF_REQUEST_OK, 0x07, 15, 20, "REQUEST_OK"},
        {IETF_SUBSCRIBE_UPDATE, 0x02, 14, 20, "SUBSCRIBE_UPDATE"},
        {IETF_UNSUBSCRIBE, 0x0a, 14, 16, "UNSUBSCRIBE"},
        {IETF_PUBLISH_DONE, 0x0b, 14, 20, "PUBLISH_DONE"},
        {IETF_PUBLISH_NAMESPACE, 0x06, 14, 20, "PUBLISH_NAMESPACE"},
        {IETF_PUBLISH_NAMESPACE_OK, 0x07, 14, 14, "PUBLISH_NAMESPACE_OK"},
        {IETF_PUBLISH_NAMESPACE_ERROR, 0x08, 14, 14, "PUBLISH_NAMESPACE_ERROR"},
        {IETF_PUBLISH_NAMESPACE_DONE, 0x09, 14, 16, "PUBLISH_NAMESPACE_DONE"},
        {IETF_PUBLISH_NAMESPACE_CANCEL, 0x0c, 14, 16, "PUBLISH_NAMESPACE_CANCEL"},
        {IETF_SUBSCRIBE_NAMESPACE, 0x11, 14, 17, "SUBSCRIBE_NAMESPACE"},
        {IETF_SUBSCRIBE_NAMESPACE, 0x50, 18, 20, "SUBSCRIBE_NAMESPACE"},
        {IETF_SUBSCRIBE_NAMESPACE_OK, 0x12, 14, 14, "SUBSCRIBE_NAMESPACE_OK"},
        {IETF_SUBSCRIBE_NAMESPACE_ERROR, 0x13, 14, 14, "SUBSCRIBE_NAMESPACE_ERROR"},
        {IETF_UNSUBSCRIBE_NAMESPACE, 0x14, 14, 15, "UNSUBSCRIBE_NAMESPACE"},
        {IETF_NAMESPACE, 0x08, 15, 20, "NAMESPACE"},
        {IETF_NAMESPACE_DONE, 0x0e, 15, 20, "NAMESPACE_DONE"},
        {IETF_PUBLISH_BLOCKED, 0x0f, 17, 20, "PUBLISH_BLOCKED"},
        {IETF_TRACK_STATUS_REQUEST, 0x0d, 14, 20, "TRACK_STATUS_REQUEST"},
        {IETF_TRACK_STATUS, 0x0e, 14, 14, "TRACK_STATUS"},
        {IETF_FETCH, 0x16, 14, 20, "FETCH"},
        {IETF_FETCH_OK, 0x18, 14, 20, "FETCH_OK"},
        {IETF_FETCH_ERROR, 0x19, 14, 14, "FETCH_ERROR"},
        {IETF_FETCH_CANCEL, 0x17, 14, 16, "FETCH_CANCEL"},
        {IETF_PUBLISH, 0x1d, 14, 20, "PUBLISH"},
        {IETF_PUBLISH_OK, 0x1e, 14, 19, "PUBLISH_OK"},
        {IETF_PUBLISH_ERROR, 0x1f, 14, 14, "PUBLISH_ERROR"},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

uint64_t moq_ietf_kind_type(enum moq_ietf_draft d, enum moq_ietf_kind k)
{
	for (size_t i = 0; i < NKINDS; i++)
		if (kinds[i].kind == k && d >= kinds[i].from && d <= kinds[i].to)
			return kinds[i].type;
	return 0;
}

enum moq_ietf_kind moq_ietf_type_kind(enum moq_ietf_draft d, uint64_t type)
{
	for (size_t i = 0; i < NKINDS; i++)
		if (kinds[i].type == type && d >= kinds[i].from && d <= kinds[i].to)
			return kinds[i].kind;
	return IETF_NONE;
}

const char *moq_ietf_kind_name(enum moq_ietf_kind k)
{
	for (size_t i = 0; i < NKINDS; i++)
		if (kinds[i].kind == k)
			return kinds[i].name;
	return "NONE";
}

/* ---- reader / writer with a sticky error ---- */

struct rd {
	const uint8_t *p;
	size_t n, o;
	enum moq_ietf_draft d;
	int err;
};

struct wr {
	uint8_t *p;
	size_t cap, o;
	enum moq_ietf_draft d;
	int err;
};

static uint64_t rv(struct rd *r)
{
	uint64_t v = 0;
	int k;

	if (r->err)
		return 0;
	if (r->o >= r->n) {
		r->err = MOQ_ERR_DECODE;
		return 0;
	}
	k = moq_ietf_varint_get(r->p + r->o, r->n - r->o, r->d, &v);
	if (k < 0) {
		r->err = MOQ_ERR_DECODE;
		return 0;
	}
	r->o += (size_t)k;
	return v;
}

static uint8_t r8(struct rd *r)
{
	if (r->err)
		return 0;
	if (r->o >= r->n) {
		r->err = MOQ_ERR_DECODE;
		return 0;
	}
	return r->p[r->o++];
}

static struct moq_str rbytes(struct rd *r, uint64_t n)
{
	struct moq_str s = {NULL, 0};

	if (r->err)
		return s;
	if (n > r->n - r->o) {
		r->err = MOQ_ERR_DECODE;
		return s;
	}
	s.p = n ? (const char *)r->p + r->o : "";
	s.len = (size_t)n;
	r->o += (size_t)n;
	return s;
}

static struct moq_str rstr(struct rd *r, size_t max)
{
	uint64_t n = rv(r);

	if (!r->err && n > max)
		r->err = MOQ_ERR_DECODE;
	return rbytes(r, n);
}

static bool rdone(const struct rd *r)
{
	return r->o >= r->n;
}

static void fail(struct rd *r)
{
	if (!r->err)
		r->err = MOQ_ERR_DECODE;
}

static void wv(struct wr *w, uint64_t v)
{
	int k;

	if (w->err)
		return;
	k = moq_ietf_varint_put(w->p + w->o, w->cap - w->o, w->d, v);
	if (k < 0) {
		w->err = k;
		return;
	}
	w->o += (size_t)k;
}

static void wbytes(struct wr *w, const void *p, size_t n)
{
	if (w->err)
		return;
	if (n > w->cap - w->o) {
		w->err = MOQ_ERR_TOO_LARGE;
		return;
	}
	if (n)
		memcpy(w->p + w->o, p, n);
	w->o += n;
}

static void w8(struct wr *w, uint8_t b)
{
	wbytes(w, &b, 1);
}

static void wstr(struct wr *w, struct moq_str s)
{
	wv(w, s.len);
	wbytes(w, s.p, s.len);
}

/* ---- namespace tuples (draft-14 2.4.1: 1..32 fields, count first) ---- */

static void rns(struct rd *r, struct moq_ietf_msg *m)
{
	uint64_t n = rv(r);
	size_t total = 0;

	if (r->err)
		return;
	if (n > MOQ_IETF_MAX_NS) {
		fail(r);
		return;
	}
	m->ns_n = (uint32_t)n;
	for (uint32_t i = 0; i < m->ns_n && !r->err; i++) {
		m->ns[i] = rstr(r, MOQ_IETF_MAX_NAME);
		total += m->ns[i].len;
	}
	if (total > MOQ_IETF_MAX_NAME)
		fail(r);
}

static void wns(struct wr *w, const struct moq_ietf_msg *m)
{
	if (m->ns_n > MOQ_IETF_MAX_NS) {
		w->err = MOQ_ERR_INVAL;
		return;
	}
	wv(w, m->ns_n);
	for (uint32_t i = 0; i < m->ns_n; i++)
		wstr(w, m->ns[i]);
}

/* ---- parameters ---- */

const struct moq_ietf_param *moq_ietf_param_get(const struct moq_ietf_params *ps, uint64_t id)
{
	for (uint32_t i = 0; i < ps->n; i++)
		if (ps->p[i].id == id)
			return &ps->p[i];
	return NULL;
}

int moq_ietf_param_add(struct moq_ietf_params *ps, uint64_t id, uint64_t v, struct moq_str b)
{
	if (moq_ietf_param_get(ps, id))
		return MOQ_ERR_EXISTS;
	if (ps->n >= MOQ_IETF_MAX_PARAMS)
		return MOQ_ERR_LIMIT;
	ps->p[ps->n].id = id;
	ps->p[ps->n].v = v;
	ps->p[ps->n].b = b;
	ps->n++;
	return 0;
}

static void param_del(struct moq_ietf_params *ps, uint64_t id)
{
	for (uint32_t i = 0; i < ps->n; i++)
		if (ps->p[i].id == id) {
			memmove(&ps->p[i], &ps->p[i + 1], (ps->n - i - 1) * sizeof(ps->p[0]));
			ps->n--;
			return;
		}
}

/* draft-17+: a message parameter's value form is part of its definition.
 * 0 varint, 1 uint8, 2 bool (a byte, 0 or 1), 3 length-prefixed bytes. Odd
 * ids are always length-prefixed (the Key-Value-Pair rule). */
static int param_kind(uint64_t id)
{
	if (id & 1)
		return 3;
	switch (id) {
	case IETF_PARAM_PUBLISHER_PRIORITY:
	case IETF_PARAM_SUBSCRIBER_PRIORITY:
	case IETF_PARAM_GROUP_ORDER:
		return 1;
	case IETF_PARAM_FORWARD:
		return 2;
	default:
		return 0;
	}
}

/* Sort indices by id (insertion sort: at most 32). */
static void sort_ids(const struct moq_ietf_params *ps, uint32_t *idx)
{
	for (uint32_t i = 0; i < ps->n; i++) {
		uint32_t j = i;
		idx[i] = i;
		while (j > 0 && ps->p[idx[j - 1]].id > ps->p[i].id) {
			idx[j] = idx[j - 1];
			j--;
		}
		idx[j] = i;
	}
}

/*
 * Message parameters: always count-prefixed; ids absolute in 14/15, delta
 * coded in ascending order from 16; values even = varint, odd = length +
 * bytes through 16, per definition from 17 (param_kind).
 */
static void wparams(struct wr *w, const struct moq_ietf_params *ps)
{
	uint32_t idx[MOQ_IETF_MAX_PARAMS];
	uint64_t prev = 0;

	if (ps->n > MOQ_IETF_MAX_PARAMS) {
		w->err = MOQ_ERR_INVAL;
		return;
	}
	wv(w, ps->n);
	if (w->d >= MOQ_IETF_16)
		sort_ids(ps, idx);
	else
		for (uint32_t i = 0; i < ps->n; i++)
			idx[i] = i;
	for (uint32_t i = 0; i < ps->n; i++) {
		const struct moq_ietf_param *p = &ps->p[idx[i]];
		int k = w->d >= MOQ_IETF_17 ? param_kind(p->id) : (p->id & 1 ? 3 : 0);

		if (w->d >= MOQ_IETF_16) {
			if (i > 0 && p->id == prev) {
				w->err = MOQ_ERR_INVAL;
				return;
			}
			wv(w, p->id - prev);
			prev = p->id;
		} else {
			wv(w, p->id);
		}
		if (k == 0) {
			wv(w, p->v);
		} else if (k == 1 || k == 2) {
			if (p->v > (k == 1 ? 255u : 1u)) {
				w->err = MOQ_ERR_INVAL;
				return;
			}
			w8(w, (uint8_t)p->v);
		} else {
			wstr(w, p->b);
		}
	}
}

static void rparams(struct rd *r, struct moq_ietf_params *ps)
{
	uint64_t n = rv(r), prev = 0;

	ps->n = 0;
	if (r->err)
		return;
	if (n > MOQ_IETF_MAX_PARAMS) {
		fail(r);
		return;
	}
	for (uint64_t i = 0; i < n && !r->err; i++) {
		uint64_t id = rv(r);
		struct moq_ietf_param *p = &ps->p[ps->n];
		int k;

		if (r->d >= MOQ_IETF_16) {
			if (i > 0 && (id == 0 || id > UINT64_MAX - prev)) {
				fail(r); /* ascending, no repeats */
				return;
			}
			id += prev;
			prev = id;
		}
		if (moq_ietf_param_get(ps, id)) {
			fail(r); /* a repeated id is a protocol violation */
			return;
		}
		k = r->d >= MOQ_IETF_17 ? param_kind(id) : (id & 1 ? 3 : 0);
		memset(p, 0, sizeof(*p));
		p->id = id;
		if (k == 0) {
			p->v = rv(r);
		} else if (k == 1 || k == 2) {
			p->v = r8(r);
			if (k == 2 && p->v > 1)
				fail(r);
		} else {
			p->b = rstr(r, MOQ_IETF_MSG_MAX);
		}
		ps->n++;
	}
}

/*
 * SETUP options: 14/15 count + absolute ids, 16 count + delta ids, 17+ no
 * count (to the end of the message) + delta ids. Even = varint, odd =
 * length + bytes on every draft.
 */
static void wsetup_opts(struct wr *w, const struct moq_ietf_params *ps)
{
	uint32_t idx[MOQ_IETF_MAX_PARAMS];
	uint64_t prev = 0;

	if (ps->n > MOQ_IETF_MAX_PARAMS) {
		w->err = MOQ_ERR_INVAL;
		return;
	}
	if (w->d <= MOQ_IETF_16)
		wv(w, ps->n);
	if (w->d >= MOQ_IETF_16)
		sort_ids(ps, idx);
	else
		for (uint32_t i = 0; i < ps->n; i++)
			idx[i] = i;
	for (uint32_t i = 0; i < ps->n; i++) {
		const struct moq_ietf_param *p = &ps->p[idx[i]];

		if (w->d >= MOQ_IETF_16) {
			if (i > 0 && p->id == prev) {
				w->err = MOQ_ERR_INVAL;
				return;
			}
			wv(w, p->id - prev);
			prev = p->id;
		} else {
			wv(w, p->id);
		}
		if (p->id & 1)
			wstr(w, p->b);
		else
			wv(w, p->v);
	}
}

static void rsetup_opts(struct rd *r, struct moq_ietf_params *ps)
{
	uint64_t n = UINT64_MAX, prev = 0;

	ps->n = 0;
	if (r->d <= MOQ_IETF_16) {
		n = rv(r);
		if (!r->err && n > MOQ_IETF_MAX_PARAMS)
			fail(r);
	}
	for (uint64_t i = 0; i < n && !r->err; i++) {
		uint64_t id;
		struct moq_ietf_param *p;

		if (n == UINT64_MAX && rdone(r))
			break;
		if (ps->n >= MOQ_IETF_MAX_PARAMS) {
			fail(r);
			return;
		}
		id = rv(r);
		if (r->d >= MOQ_IETF_16) {
			if (i > 0 && (id == 0 || id > UINT64_MAX - prev)) {
				fail(r);
				return;
			}
			id += prev;
			prev = id;
		}
		if (moq_ietf_param_get(ps, id)) {
			fail(r);
			return;
		}
		p = &ps->p[ps->n];
		memset(p, 0, sizeof(*p));
		p->id = id;
		if (id & 1)
			p->b = rstr(r, MOQ_IETF_MSG_MAX);
		else
			p->v = rv(r);
		ps->n++;
	}
}

/* Key-value blocks without a count (object extension headers 10.2.1.2,
 * Track Properties): ids absolute in 14/15, delta from 16. */
int moq_ietf_kvp_check(const uint8_t *p, size_t n, enum moq_ietf_draft d)
{
	struct rd r = {p, n, 0, d, 0};
	uint64_t prev = 0;
	bool first = true;

	while (!rdone(&r) && !r.err) {
		uint64_t id = rv(&r);

		if (d >= MOQ_IETF_16) {
			if (!first && id > UINT64_MAX - prev)
				fail(&r);
			id = first ? id : prev + id;
			prev = id;
		}
		first = false;
		if (id & 1)
			(void)rstr(&r, n);
		else
			(void)rv(&r);
	}
	return r.err ? MOQ_ERR_DECODE : 0;
}

/* Track Properties: the rest of the message (16+), validated and kept raw. */
static void rprops(struct rd *r, struct moq_str *props)
{
	props->p = NULL;
	props->len = 0;
	if (r->err || r->d < MOQ_IETF_16)
		return;
	props->p = (const char *)r->p + r->o;
	props->len = r->n - r->o;
	if (moq_ietf_kvp_check(r->p + r->o, r->n - r->o, r->d) < 0)
		fail(r);
	r->o = r->n;
}

static void wprops(struct wr *w, const struct moq_str *props)
{
	if (props->len && w->d < MOQ_IETF_16) {
		w->err = MOQ_ERR_INVAL;
		return;
	}
	wbytes(w, props->p, props->len);
}

/* ---- filters ---- */

static int vput(struct wr *w, uint64_t v)
{
	wv(w, v);
	return w->err;
}

int moq_ietf_filter_encode(uint8_t *buf, size_t cap, enum moq_ietf_draft d,
                           const struct moq_ietf_filter *f)
{
	struct wr w = {buf, cap, 0, d, 0};

	if (d >= MOQ_IETF_20) {
		/* draft-20 5.1.2: the number of fields says what they are */
		switch (f->kind) {
		case IETF_F_UNFILTERED:
			break;
		case IETF_F_NEXT_OBJECT:
			vput(&w, 0);
			vput(&w, 0);
			break;
		case IETF_F_RELATIVE:
			vput(&w, f->groups);
			break;
		case IETF_F_ABSOLUTE:
			if (!f->has_end && f->start.group == 0 && f->start.object == 0)
				break;
			vput(&w, f->start.group);
			vput(&w, f->start.object);
			if (f->has_end) {
				if (f->end_group < f->start.group)
					return MOQ_ERR_INVAL;
				vput(&w, f->end_group - f->start.group);
				if (f->has_end_object)
					vput(&w, f->end_object);
			} else if (f->has_end_object) {
				return MOQ_ERR_INVAL;
			}
			break;
		default:
			return MOQ_ERR_INVAL;
		}
		return w.err ? w.err : (int)w.o;
	}
	/* draft-14 9.7 .. draft-19: a Filter Type, then its locations */
	switch (f->kind) {
	case IETF_F_UNFILTERED:
		vput(&w, IETF_FILTER_ABSOLUTE_START);
		vput(&w, 0);
		vput(&w, 0);
		break;
	case IETF_F_NEXT_OBJECT:
		vput(&w, IETF_FILTER_LARGEST_OBJECT);
		break;
	case IETF_F_RELATIVE:
		if (f->groups != 0)
			return MOQ_ERR_INVAL; /* needs draft 20 */
		vput(&w, IETF_FILTER_NEXT_GROUP);
		break;
	case IETF_F_ABSOLUTE:
		if (f->has_end_object)
			return MOQ_ERR_INVAL;
		vput(&w, f->has_end ? IETF_FILTER_ABSOLUTE_RANGE : IETF_FILTER_ABSOLUTE_START);
		vput(&w, f->start.group);
		vput(&w, f->start.object);
		if (f->has_end) {
			if (f->end_group < f->start.group)
				return MOQ_ERR_INVAL;
			vput(&w, f->end_group - f->start.group);
		}
		break;
	default:
		return MOQ_ERR_INVAL;
	}
	return w.err ? w.err : (int)w.o;
}

/* A tagged filter from @r (inline in 14's SUBSCRIBE, or a whole value). */
static void rfilter_tag(struct rd *r, struct moq_ietf_filter *f)
{
	uint64_t tag = rv(r);

	memset(f, 0, sizeof(*f));
	switch (tag) {
	case IETF_FILTER_NEXT_GROUP:
		f->kind = IETF_F_RELATIVE;
		break;
	case IETF_FILTER_LARGEST_OBJECT:
		f->kind = IETF_F_NEXT_OBJECT;
		break;
	case IETF_FILTER_ABSOLUTE_START:
	case IETF_FILTER_ABSOLUTE_RANGE:
		f->kind = IETF_F_ABSOLUTE;
		f->start.group = rv(r);
		f->start.object = rv(r);
		if (tag == IETF_FILTER_ABSOLUTE_RANGE) {
			uint64_t delta = rv(r);
			if (delta > UINT64_MAX - f->start.group)
				fail(r);
			f->has_end = true;
			f->end_group = f->start.group + delta;
		}
		break;
	default:
		fail(r);
	}
}

int moq_ietf_filter_decode(const uint8_t *p, size_t n, enum moq_ietf_draft d,
                           struct moq_ietf_filter *f)
{
	struct rd r = {p, n, 0, d, 0};
	uint64_t v[4];
	int k = 0;

	if (d < MOQ_IETF_20) {
		rfilter_tag(&r, f);
		if (!r.err && !rdone(&r))
			fail(&r);
		return r.err ? MOQ_ERR_DECODE : 0;
	}
	memset(f, 0, sizeof(*f));
	while (!rdone(&r) && !r.err) {
		if (k == 4)
			return MOQ_ERR_DECODE;
		v[k++] = rv(&r);
	}
	if (r.err)
		return MOQ_ERR_DECODE;
	if (k == 0) {
		f->kind = IETF_F_UNFILTERED;
	} else if (k == 1) {
		f->kind = IETF_F_RELATIVE;
		f->groups = v[0];
	} else if (k == 2 && v[0] == 0 && v[1] == 0) {
		f->kind = IETF_F_NEXT_OBJECT;
	} else {
		f->kind = IETF_F_ABSOLUTE;
		f->start.group = v[0];
		f->start.object = v[1];
		if (k >= 3) {
			if (v[2] > UINT64_MAX - v[0])
				return MOQ_ERR_DECODE;
			f->has_end = true;
			f->end_group = v[0] + v[2];
		}
		if (k == 4) {
			f->has_end_object = true;
			f->end_object = v[3];
		}
	}
	return 0;
}

static void wfilter_inline(struct wr *w, const struct moq_ietf_filter *f)
{
	int k;

	if (w->err)
		return;
	k = moq_ietf_filter_encode(w->p + w->o, w->cap - w->o, w->d, f);
	if (k < 0)
		w->err = k;
	else
		w->o += (size_t)k;
}

int moq_ietf_loc_decode(const uint8_t *p, size_t n, enum moq_ietf_draft d, struct moq_ietf_loc *l)
{
	struct rd r = {p, n, 0, d, 0};

	l->group = rv(&r);
	l->object = rv(&r);
	return r.err || !rdone(&r) ? MOQ_ERR_DECODE : 0;
}

/* ---- draft-20 FILL_PARAMETERS ---- */

/* The form of a FILL scope's id: 0 varint, 1 uint8, 3 bytes; -1 not allowed. */
static int fill_kind(uint64_t id)
{
	switch (id) {
	case IETF_FILL_TIMEOUT:
		return 0;
	case IETF_FILL_SUBSCRIBER_PRIORITY:
	case IETF_FILL_GROUP_ORDER:
		return 1;
	case IETF_FILL_LOCATION_FILTER:
	case IETF_FILL_SUBGROUP_FILTER:
	case IETF_FILL_OBJECTID_FILTER: /* length-prefixed though even */
	case IETF_FILL_PRIORITY_FILTER:
	case IETF_FILL_PROPERTY_FILTER:
		return 3;
	default:
		return -1;
	}
}

int moq_ietf_fill_decode(const uint8_t *p, size_t n, enum moq_ietf_draft d, struct moq_ietf_fill *f)
{
	struct rd r = {p, n, 0, d, 0};
	uint64_t count = rv(&r), prev = 0;

	memset(f, 0, sizeof(*f));
	if (r.err || count > MOQ_IETF_MAX_PARAMS)
		return MOQ_ERR_DECODE;
	for (uint64_t i = 0; i < count; i++) {
		uint64_t id = rv(&r);
		int k;

		if (i > 0) { /* delta coded, ascending, no repeats */
			if (id == 0 || id > UINT64_MAX - prev)
				return MOQ_ERR_DECODE;
			id += prev;
		}
		prev = id;
		k = fill_kind(id);
		if (r.err || k < 0)
			return MOQ_ERR_DECODE;
		if (k == 0) {
			(void)rv(&r);
		} else if (k == 1) {
			(void)r8(&r);
		} else {
			struct moq_str v = rstr(&r, MOQ_IETF_MSG_MAX);
			if (r.err)
				return MOQ_ERR_DECODE;
			if (id == IETF_FILL_LOCATION_FILTER) {
				if (moq_ietf_filter_decode((const uint8_t *)v.p, v.len, d,
				                           &f->filter) < 0)
					return MOQ_ERR_DECODE;
				f->has_filter = true;
			} else {
				f->range_filters = true;
			}
		}
	}
	return r.err || !rdone(&r) ? MOQ_ERR_DECODE : 0;
}

int moq_ietf_fill_encode(uint8_t *buf, size_t cap, enum moq_ietf_draft d,
                         const struct moq_ietf_fill *f)
{
	struct wr w = {buf, cap, 0, d, 0};
	uint8_t fb[64];
	int fk = 0;

	if (d < MOQ_IETF_20)
		return MOQ_ERR_INVAL;
	if (f->has_filter && (fk = moq_ietf_filter_encode(fb, sizeof(fb), d, &f->filter)) < 0)
		return fk;
	wv(&w, (uint64_t)f->has_filter + f->range_filters);
	if (f->has_filter) {
		wv(&w, IETF_FILL_LOCATION_FILTER); /* the first id is not a delta */
		wstr(&w, (struct moq_str){(const char *)fb, (size_t)fk});
	}
	if (f->range_filters) {
		wv(&w, f->has_filter ? IETF_FILL_SUBGROUP_FILTER - IETF_FILL_LOCATION_FILTER
		                     : IETF_FILL_SUBGROUP_FILTER);
		wv(&w, 0);
	}
	return w.err ? w.err : (int)w.o;
}

/* ---- fields that moved into parameters (15+) ---- */

/* Scratch for values the encoder builds (filter, location): per call. */
struct scratch {
	uint8_t filter[64];
	uint8_t loc[32];
	uint8_t fill[96];
};

static int add_loc(struct moq_ietf_params *ps, struct scratch *sc, enum moq_ietf_draft d,
                   const struct moq_ietf_loc *l)
{
	struct wr w = {sc->loc, sizeof(sc->loc), 0, d, 0};

	wv(&w, l->group);
	wv(&w, l->object);
	if (w.err)
		return w.err;
	return moq_ietf_param_add(ps, IETF_PARAM_LARGEST_OBJECT, 0,
	                          (struct moq_str){(const char *)sc->loc, w.o});
}

static int add_filter(struct moq_ietf_params *ps, struct scratch *sc, enum moq_ietf_draft d,
                      const struct moq_ietf_filter *f)
{
	int k = moq_ietf_filter_encode(sc->filter, sizeof(sc->filter), d, f);

	if (k < 0)
		return k;
	return moq_ietf_param_add(ps, IETF_PARAM_SUBSCRIPTION_FILTER, 0,
	                          (struct moq_str){(const char *)sc->filter, (size_t)k});
}

/* Pull a uint8 field out of the parameters (decode side). */
static void take8(struct rd *r, struct moq_ietf_params *ps, uint64_t id, uint8_t *out, uint8_t dflt)
{
	const struct moq_ietf_param *p = moq_ietf_param_get(ps, id);

	*out = dflt;
	if (!p)
		return;
	if (p->v > 255)
		fail(r);
	*out = (uint8_t)p->v;
	param_del(ps, id);
}

static void take_filter(struct rd *r, struct moq_ietf_params *ps, struct moq_ietf_filter *f)
{
	const struct moq_ietf_param *p = moq_ietf_param_get(ps, IETF_PARAM_SUBSCRIPTION_FILTER);

	memset(f, 0, sizeof(*f));
	if (!p)
		return; /* absent: unfiltered */
	if (moq_ietf_filter_decode((const uint8_t *)p->b.p, p->b.len, r->d, f) < 0)
		fail(r);
	param_del(ps, IETF_PARAM_SUBSCRIPTION_FILTER);
}

/* draft 20: FILL_PARAMETERS out of a SUBSCRIBE's parameters */
static void take_fill(struct rd *r, struct moq_ietf_params *ps, struct moq_ietf_msg *m)
{
	const struct moq_ietf_param *p = moq_ietf_param_get(ps, IETF_PARAM_FILL);

	if (!p || r->d < MOQ_IETF_20)
		return; /* before 20 an unknown parameter, left as it is */
	if (moq_ietf_fill_decode((const uint8_t *)p->b.p, p->b.len, r->d, &m->fill) < 0)
		fail(r);
	m->has_fill = true;
	param_del(ps, IETF_PARAM_FILL);
}

static void take_loc(struct rd *r, struct moq_ietf_params *ps, struct moq_ietf_msg *m)
{
	const struct moq_ietf_param *p = moq_ietf_param_get(ps, IETF_PARAM_LARGEST_OBJECT);

	if (!p)
		return;
	if (moq_ietf_loc_decode((const uint8_t *)p->b.p, p->b.len, r->d, &m->largest) < 0)
		fail(r);
	m->content_exists = 1;
	param_del(ps, IETF_PARAM_LARGEST_OBJECT);
}

/* ---- messages: encode ---- */

static void w_req_delta(struct wr *w, const struct moq_ietf_msg *m)
{
	if (w->d == MOQ_IETF_17)
		wv(w, m->req_delta); /* draft-17 only: Required Request ID Delta */
}

static bool has_reply_id(enum moq_ietf_draft d)
{
	return d <= MOQ_IETF_16; /* 17+: the reply's stream names the request */
}

static void enc_body(struct wr *w, const struct moq_ietf_msg *m)
{
	enum moq_ietf_draft d = w->d;
	struct moq_ietf_params ps = m->params;
	struct scratch sc;

	switch (m->kind) {
	case IETF_CLIENT_SETUP:
		if (d == MOQ_IETF_14) {
			if (m->versions_n > MOQ_IETF_MAX_VERSIONS) {
				w->err = MOQ_ERR_INVAL;
				return;
			}
			wv(w, m->versions_n);
			for (uint32_t i = 0; i < m->versions_n; i++)
				wv(w, m->versions[i]);
		}
		wsetup_opts(w, &m->params);
		break;
	case IETF_SERVER_SETUP:
		if (d == MOQ_IETF_14)
			wv(w, m->version);
		wsetup_opts(w, &m->params);
		break;
	case IETF_SETUP:
		wsetup_opts(w, &m->params);
		break;
	case IETF_GOAWAY:
		if (m->reason.len > MOQ_IETF_MAX_URI) {
			w->err = MOQ_ERR_INVAL;
			return;
		}
		wstr(w, m->reason);
		if (d >= MOQ_IETF_17)
			wv(w, m->timeout);
		break;
	case IETF_MAX_REQUEST_ID:
	case IETF_REQUESTS_BLOCKED:
	case IETF_UNSUBSCRIBE:
	case IETF_PUBLISH_NAMESPACE_OK:
	case IETF_SUBSCRIBE_NAMESPACE_OK:
	case IETF_UNSUBSCRIBE_NAMESPACE:
	case IETF_FETCH_CANCEL:
		wv(w, m->request_id);
		break;
	case IETF_SUBSCRIBE:
		wv(w, m->request_id);
		w_req_delta(w, m);
		wns(w, m);
		wstr(w, m->name);
		if (d == MOQ_IETF_14) {
			w8(w, m->priority);
			w8(w, m->group_order);
			w8(w, m->forward);
			wfilter_inline(w, &m->filter);
			wparams(w, &ps);
			break;
		}
		/* 15+: the fields are parameters (JS order; sorted from 16) */
		if (moq_ietf_param_add(&ps, IETF_PARAM_SUBSCRIBER_PRIORITY, m->priority,
		                       (struct moq_str){0}) < 0 ||
		    moq_ietf_param_add(&ps, IETF_PARAM_GROUP_ORDER, m->group_order,
		                       (struct moq_str){0}) < 0 ||
		    moq_ietf_param_add(&ps, IETF_PARAM_FORWARD, m->forward, (struct moq_str){0}) <
		            0 ||
		    add_filter(&ps, &sc, d, &m->filter) < 0) {
			w->err = MOQ_ERR_INVAL;
			return;
		}
		if (m->has_fill) {
			int k = moq_ietf_fill_encode(sc.fill, sizeof(sc.fill), d, &m->fill);
			if (k < 0 || moq_ietf_param_add(&ps, IETF_PARAM_FILL, 0,
			                                (struct moq_str){(const char *)sc.fill,
			                                                 (size_t)k}) < 0) {
				w->err = MOQ_ERR_INVAL;
				return;
			}
		}
		wparams(w, &ps);
		break;
	case IETF_SUBSCRIBE_OK:
		if (has_reply_id(d))
			wv(w, m->request_id);
		wv(w, m->track_alias);
		if (d == MOQ_IETF_14) {
			wv(w, m->expires);
			w8(w, m->group_order);
			w8(w, m->content_exists);
			if (m->content_exists) {
				wv(w, m->largest.group);
				wv(w, m->largest.object);
			}
			wparams(w, &ps);
			break;
		}
		if ((d == MOQ_IETF_15 && m->group_order &&
		     moq_ietf_param_add(&ps, IETF_PARAM_GROUP_ORDER, m->group_order,
		                        (struct moq_str){0}) < 0) ||
		    (m->content_exists && add_loc(&ps, &sc, d, &m->largest) < 0)) {
			w->err = MOQ_ERR_INVAL;
			return;
		}
		wparams(w, &ps);
		wprops(w, &m->props);
		break;
	case IETF_SUBSCRIBE_ERROR:
	case IETF_PUBLISH_NAMESPACE_ERROR:
	case IETF_SUBSCRIBE_NAMESPACE_ERROR:
	case IETF_FETCH_ERROR:
	case IETF_PUBLISH_ERROR:
		wv(w, m->request_id);
		wv(w, m->code);
		wstr(w, m->reason);
		break;
	case IETF_REQUEST_ERROR:
		if (has_reply_id(d))
			wv(w, m->request_id);
		wv(w, m->code);
		if (d >= MOQ_IETF_16)
			wv(w, m->retry);
		wstr(w, m->reason);
		break;
	case IETF_REQUEST_OK:
		if (has_reply_id(d))
			wv(w, m->request_id);
		wparams(w, &ps);
		wprops(w, &m->props);
		break;
	case IETF_SUBSCRIBE_UPDATE:
		wv(w, m->request_id);
		if (d == MOQ_IETF_14) {
			wv(w, m->sub_request_id);
			wv(w, m->start.group);
			wv(w, m->start.object);
			wv(w, m->end_group);
			w8(w, m->priority);
			w8(w, m->forward);
		} else if (d <= MOQ_IETF_16) {
			wv(w, m->sub_request_id);
		} else {
			w_req_delta(w, m);
		}
		wparams(w, &ps);
		break;
	case IETF_PUBLISH_DONE:
		if (has_reply_id(d))
			wv(w, m->request_id);
		wv(w, m->code);
		wv(w, m->stream_count);
		wstr(w, m->reason);
		break;
	case IETF_PUBLISH_NAMESPACE:
		wv(w, m->request_id);
		w_req_delta(w, m);
		wns(w, m);
		wparams(w, &ps);
		break;
	case IETF_PUBLISH_NAMESPACE_DONE:
	case IETF_PUBLISH_NAMESPACE_CANCEL:
		if (d == MOQ_IETF_16)
			wv(w, m->request_id);
		else
			wns(w, m);
		if (m->kind == IETF_PUBLISH_NAMESPACE_CANCEL) {
			wv(w, m->code);
			wstr(w, m->reason);
		}
		break;
	case IETF_SUBSCRIBE_NAMESPACE:
		wv(w, m->request_id);
		w_req_delta(w, m);
		wns(w, m);
		if (d == MOQ_IETF_16 || d == MOQ_IETF_17)
			wv(w, m->options);
		wparams(w, &ps);
		break;
	case IETF_NAMESPACE:
	case IETF_NAMESPACE_DONE:
		wns(w, m);
		break;
	case IETF_PUBLISH_BLOCKED:
		wns(w, m);
		wstr(w, m->name);
		break;
	case IETF_TRACK_STATUS_REQUEST:
		wv(w, m->request_id);
		w_req_delta(w, m);
		wns(w, m);
		wstr(w, m->name);
		if (d == MOQ_IETF_14) {
			w8(w, m->priority);
			w8(w, m->group_order);
			w8(w, m->forward);
			wfilter_inline(w, &m->filter);
		}
		wparams(w, &ps);
		break;
	case IETF_TRACK_STATUS:
		wns(w, m);
		wstr(w, m->name);
		wv(w, m->code);
		wv(w, m->last.group);
		wv(w, m->last.object);
		break;
	case IETF_FETCH:
		wv(w, m->request_id);
		w_req_delta(w, m);
		if (d == MOQ_IETF_14) {
			w8(w, m->priority);
			w8(w, m->group_order);
		}
		if (d >= MOQ_IETF_20) {
			/* draft-20 10.13: no Fetch Type; shaped like SUBSCRIBE, the
			 * range in LOCATION_FILTER (absent: the whole track) */
			wns(w, m);
			wstr(w, m->name);
		} else {
			wv(w, m->fetch_type);
			switch (m->fetch_type) {
			case IETF_FETCH_STANDALONE:
				wns(w, m);
				wstr(w, m->name);
				wv(w, m->start.group);
				wv(w, m->start.object);
				wv(w, m->end.group);
				wv(w, m->end.object);
				break;
			case IETF_FETCH_RELATIVE_JOINING:
			case IETF_FETCH_ABSOLUTE_JOINING:
				wv(w, m->joining_id);
				wv(w, m->joining_start);
				break;
			default:
				w->err = MOQ_ERR_INVAL;
				return;
			}
		}
		if (d != MOQ_IETF_14 &&
		    (moq_ietf_param_add(&ps, IETF_PARAM_SUBSCRIBER_PRIORITY, m->priority,
		                        (struct moq_str){0}) < 0 ||
		     moq_ietf_param_add(&ps, IETF_PARAM_GROUP_ORDER, m->group_order,
		                        (struct moq_str){0}) < 0 ||
		     (d >= MOQ_IETF_20 && m->filter.kind != IETF_F_UNFILTERED &&
		      add_filter(&ps, &sc, d, &m->filter) < 0))) {
			w->err = MOQ_ERR_INVAL;
			return;
		}
		wparams(w, &ps);
		break;
	case IETF_FETCH_OK:
		if (has_reply_id(d))
			wv(w, m->request_id);
		if (d == MOQ_IETF_14)
			w8(w, m->group_order);
		w8(w, m->end_of_track);
		wv(w, m->end.group);
		wv(w, m->end.object);
		wparams(w, &ps);
		if (d != MOQ_IETF_14)
			wprops(w, &m->props);
		break;
	case IETF_PUBLISH:
		wv(w, m->request_id);
		w_req_delta(w, m);
		wns(w, m);
		wstr(w, m->name);
		wv(w, m->track_alias);
		if (d == MOQ_IETF_14) {
			w8(w, m->group_order);
			w8(w, m->content_exists);
			if (m->content_exists) {
				wv(w, m->largest.group);
				wv(w, m->largest.object);
			}
			w8(w, m->forward);
			wparams(w, &ps);
			break;
		}
		if ((d == MOQ_IETF_15 &&
		     moq_ietf_param_add(&ps, IETF_PARAM_GROUP_ORDER, m->group_order,
		                        (struct moq_str){0}) < 0) ||
		    moq_ietf_param_add(&ps, IETF_PARAM_FORWARD, m->forward, (struct moq_str){0}) <
		            0 ||
		    (m->content_exists && add_loc(&ps, &sc, d, &m->largest) < 0)) {
			w->err = MOQ_ERR_INVAL;
			return;
		}
		wparams(w, &ps);
		wprops(w, &m->props);
		break;
	case IETF_PUBLISH_OK:
		if (d <= MOQ_IETF_16)
			wv(w, m->request_id);
		if (d == MOQ_IETF_14) {
			w8(w, m->forward);
			w8(w, m->priority);
			w8(w, m->group_order);
			wfilter_inline(w, &m->filter);
		}
		wparams(w, &ps);
		break;
	default:
		w->err = MOQ_ERR_INVAL;
	}
}

int moq_ietf_msg_encode(uint8_t *buf, size_t cap, enum moq_ietf_draft d,
                        const struct moq_ietf_msg *m)
{
	uint64_t type = moq_ietf_kind_type(d, m->kind);
	struct wr w = {buf, cap, 0, d, 0};
	size_t body;

	if (!type)
		return MOQ_ERR_INVAL;
	wv(&w, type);
	if (!w.err && w.cap - w.o < 2)
		w.err = MOQ_ERR_TOO_LARGE;
	if (w.err)
		return w.err;
	w.o += 2;
	body = w.o;
	enc_body(&w, m);
	if (w.err)
		return w.err;
	if (w.o - body > MOQ_IETF_MSG_MAX)
		return MOQ_ERR_TOO_LARGE;
	/* draft-14 9: Message Length (16), big-endian */
	buf[body - 2] = (uint8_t)((w.o - body) >> 8);
	buf[body - 1] = (uint8_t)(w.o - body);
	return (int)w.o;
}

/* ---- messages: decode ---- */

static void r_req_delta(struct rd *r, struct moq_ietf_msg *m)
{
	if (r->d == MOQ_IETF_17)
		m->req_delta = rv(r);
}

static void dec_body(struct rd *r, struct moq_ietf_msg *m)
{
	enum moq_ietf_draft d = r->d;

	switch (m->kind) {
	case IETF_CLIENT_SETUP:
		if (d == MOQ_IETF_14) {
			uint64_t n = rv(r);
			if (n > MOQ_IETF_MAX_VERSIONS || n == 0) {
				fail(r);
				return;
			}
			m->versions_n = (uint32_t)n;
			for (uint32_t i = 0; i < m->versions_n; i++) {
				uint64_t v = rv(r);
				if (v > UINT32_MAX)
					fail(r);
				m->versions[i] = (uint32_t)v;
			}
		}
		rsetup_opts(r, &m->params);
		break;
	case IETF_SERVER_SETUP:
		if (d == MOQ_IETF_14) {
			uint64_t v = rv(r);
			if (v > UINT32_MAX)
				fail(r);
			m->version = (uint32_t)v;
		}
		rsetup_opts(r, &m->params);
		break;
	case IETF_SETUP:
		rsetup_opts(r, &m->params);
		break;
	case IETF_GOAWAY:
		m->reason = rstr(r, MOQ_IETF_MAX_URI);
		if (d >= MOQ_IETF_17)
			m->timeout = rv(r);
		if (d >= MOQ_IETF_18 && !rdone(r))
			m->request_id = rv(r); /* draft-18: optional trailing Request ID */
		break;
	case IETF_MAX_REQUEST_ID:
	case IETF_REQUESTS_BLOCKED:
	case IETF_UNSUBSCRIBE:
	case IETF_PUBLISH_NAMESPACE_OK:
	case IETF_SUBSCRIBE_NAMESPACE_OK:
	case IETF_UNSUBSCRIBE_NAMESPACE:
	case IETF_FETCH_CANCEL:
		m->request_id = rv(r);
		break;
	case IETF_SUBSCRIBE:
		m->request_id = rv(r);
		r_req_delta(r, m);
		rns(r, m);
		m->name = rstr(r, MOQ_IETF_MAX_NAME);
		if (d == MOQ_IETF_14) {
			m->priority = r8(r);
			m->group_order = r8(r);
			m->forward = r8(r);
			rfilter_tag(r, &m->filter);
			rparams(r, &m->params);
		} else {
			rparams(r, &m->params);
			take8(r, &m->params, IETF_PARAM_SUBSCRIBER_PRIORITY, &m->priority, 128);
			take8(r, &m->params, IETF_PARAM_GROUP_ORDER, &m->group_order, 0);
			take8(r, &m->params, IETF_PARAM_FORWARD, &m->forward, 1);
			take_filter(r, &m->params, &m->filter);
			take_fill(r, &m->params, m);
		}
		/* draft-14 9.7: group order 0 (publisher's), 1, 2; forward 0/1 */
		if (m->group_order > 2 || m->forward > 1)
			fail(r);
		if (r->d < MOQ_IETF_20 && m->filter.kind == IETF_F_RELATIVE && m->filter.groups)
			fail(r);
		break;
	case IETF_SUBSCRIBE_OK:
		if (has_reply_id(d))
			m->request_id = rv(r);
		m->track_alias = rv(r);
		if (d == MOQ_IETF_14) {
			m->expires = rv(r);
			m->group_order = r8(r);
			m->content_exists = r8(r);
			if (m->content_exists > 1 || m->group_order > 2)
				fail(r);
			if (m->content_exists) {
				m->largest.group = rv(r);
				m->largest.object = rv(r);
			}
			rparams(r, &m->params);
		} else {
			rparams(r, &m->params);
			take8(r, &m->params, IETF_PARAM_GROUP_ORDER, &m->group_order, 0);
			take_loc(r, &m->params, m);
			rprops(r, &m->props);
		}
		break;
	case IETF_SUBSCRIBE_ERROR:
	case IETF_PUBLISH_NAMESPACE_ERROR:
	case IETF_SUBSCRIBE_NAMESPACE_ERROR:
	case IETF_FETCH_ERROR:
	case IETF_PUBLISH_ERROR:
		m->request_id = rv(r);
		m->code = rv(r);
		m->reason = rstr(r, MOQ_IETF_MSG_MAX);
		break;
	case IETF_REQUEST_ERROR:
		if (has_reply_id(d))
			m->request_id = rv(r);
		m->code = rv(r);
		if (d >= MOQ_IETF_16)
			m->retry = rv(r);
		m->reason = rstr(r, MOQ_IETF_MSG_MAX);
		break;
	case IETF_REQUEST_OK:
		if (has_reply_id(d))
			m->request_id = rv(r);
		rparams(r, &m->params);
		rprops(r, &m->props);
		break;
	case IETF_SUBSCRIBE_UPDATE:
		m->request_id = rv(r);
		if (d == MOQ_IETF_14) {
			m->sub_request_id = rv(r);
			m->start.group = rv(r);
			m->start.object = rv(r);
			m->end_group = rv(r);
			m->priority = r8(r);
			m->forward = r8(r);
			if (m->forward > 1)
				fail(r);
		} else if (d <= MOQ_IETF_16) {
			m->sub_request_id = rv(r);
		} else {
			r_req_delta(r, m);
		}
		rparams(r, &m->params);
		break;
	case IETF_PUBLISH_DONE:
		if (has_reply_id(d))
			m->request_id = rv(r);
		m->code = rv(r);
		m->stream_count = rv(r);
		m->reason = rstr(r, MOQ_IETF_MSG_MAX);
		break;
	case IETF_PUBLISH_NAMESPACE:
		m->request_id = rv(r);
		r_req_delta(r, m);
		rns(r, m);
		if (!r->err && m->ns_n == 0)
			fail(r); /* draft-14 2.4.1: a track namespace has 1..32 fields */
		rparams(r, &m->params);
		break;
	case IETF_PUBLISH_NAMESPACE_DONE:
	case IETF_PUBLISH_NAMESPACE_CANCEL:
		if (d == MOQ_IETF_16)
			m->request_id = rv(r);
		else
			rns(r, m);
		if (m->kind == IETF_PUBLISH_NAMESPACE_CANCEL) {
			m->code = rv(r);
			m->reason = rstr(r, MOQ_IETF_MSG_MAX);
		}
		break;
	case IETF_SUBSCRIBE_NAMESPACE:
		m->request_id = rv(r);
		r_req_delta(r, m);
		rns(r, m);
		if (d == MOQ_IETF_16 || d == MOQ_IETF_17)
			m->options = rv(r);
		rparams(r, &m->params);
		break;
	case IETF_NAMESPACE:
	case IETF_NAMESPACE_DONE:
		rns(r, m);
		break;
	case IETF_PUBLISH_BLOCKED:
		rns(r, m);
		m->name = rstr(r, MOQ_IETF_MAX_NAME);
		break;
	case IETF_TRACK_STATUS_REQUEST:
		m->request_id = rv(r);
		r_req_delta(r, m);
		rns(r, m);
		m->name = rstr(r, MOQ_IETF_MAX_NAME);
		if (d == MOQ_IETF_14) {
			m->priority = r8(r);
			m->group_order = r8(r);
			m->forward = r8(r);
			rfilter_tag(r, &m->filter);
		}
		rparams(r, &m->params);
		break;
	case IETF_TRACK_STATUS:
		rns(r, m);
		m->name = rstr(r, MOQ_IETF_MAX_NAME);
		m->code = rv(r);
		m->last.group = rv(r);
		m->last.object = rv(r);
		break;
	case IETF_FETCH:
		m->request_id = rv(r);
		r_req_delta(r, m);
		if (d == MOQ_IETF_14) {
			m->priority = r8(r);
			m->group_order = r8(r);
		}
		if (d >= MOQ_IETF_20) {
			rns(r, m);
			m->name = rstr(r, MOQ_IETF_MAX_NAME);
		} else {
			uint64_t t = rv(r);
			m->fetch_type = (uint8_t)t;
			if (t == IETF_FETCH_STANDALONE) {
				rns(r, m);
				m->name = rstr(r, MOQ_IETF_MAX_NAME);
				m->start.group = rv(r);
				m->start.object = rv(r);
				m->end.group = rv(r);
				m->end.object = rv(r);
			} else if (t == IETF_FETCH_RELATIVE_JOINING ||
			           t == IETF_FETCH_ABSOLUTE_JOINING) {
				m->joining_id = rv(r);
				m->joining_start = rv(r);
			} else {
				fail(r);
			}
		}
		rparams(r, &m->params);
		if (d != MOQ_IETF_14) {
			take8(r, &m->params, IETF_PARAM_SUBSCRIBER_PRIORITY, &m->priority, 128);
			take8(r, &m->params, IETF_PARAM_GROUP_ORDER, &m->group_order, 0);
		}
		if (d >= MOQ_IETF_20)
			take_filter(r, &m->params, &m->filter);
		if (m->group_order > 2)
			fail(r);
		break;
	case IETF_FETCH_OK:
		if (has_reply_id(d))
			m->request_id = rv(r);
		if (d == MOQ_IETF_14)
			m->group_order = r8(r);
		m->end_of_track = r8(r);
		if (m->end_of_track > 1)
			fail(r);
		m->end.group = rv(r);
		m->end.object = rv(r);
		rparams(r, &m->params);
		if (d != MOQ_IETF_14)
			rprops(r, &m->props);
		break;
	case IETF_PUBLISH:
		m->request_id = rv(r);
		r_req_delta(r, m);
		rns(r, m);
		m->name = rstr(r, MOQ_IETF_MAX_NAME);
		m->track_alias = rv(r);
		if (d == MOQ_IETF_14) {
			m->group_order = r8(r);
			m->content_exists = r8(r);
			if (m->content_exists > 1)
				fail(r);
			if (m->content_exists) {
				m->largest.group = rv(r);
				m->largest.object = rv(r);
			}
			m->forward = r8(r);
			rparams(r, &m->params);
		} else {
			rparams(r, &m->params);
			take8(r, &m->params, IETF_PARAM_GROUP_ORDER, &m->group_order, 0);
			take8(r, &m->params, IETF_PARAM_FORWARD, &m->forward, 1);
			take_loc(r, &m->params, m);
			rprops(r, &m->props);
		}
		if (m->forward > 1 || m->group_order > 2)
			fail(r);
		break;
	case IETF_PUBLISH_OK:
		if (d <= MOQ_IETF_16)
			m->request_id = rv(r);
		if (d == MOQ_IETF_14) {
			m->forward = r8(r);
			m->priority = r8(r);
			m->group_order = r8(r);
			rfilter_tag(r, &m->filter);
		}
		rparams(r, &m->params);
		break;
	default:
		fail(r);
	}
}

int moq_ietf_msg_decode(const uint8_t *buf, size_t len, enum moq_ietf_draft d,
                        struct moq_ietf_msg *m)
{
	uint64_t type;
	int k = moq_ietf_varint_get(buf, len, d, &type);
	size_t n;
	struct rd r;

	memset(m, 0, offsetof(struct moq_ietf_msg, params));
	m->params.n = 0;
	m->props = (struct moq_str){NULL, 0};
	if (k < 0)
		return k;
	if (len - (size_t)k < 2)
		return MOQ_ERR_SHORT;
	n = ((size_t)buf[k] << 8) | buf[k + 1];
	if (len - (size_t)k - 2 < n) {
		/* An unknown type is known before the body arrives. */
		return moq_ietf_type_kind(d, type) == IETF_NONE ? MOQ_ERR_PROTO : MOQ_ERR_SHORT;
	}
	m->kind = moq_ietf_type_kind(d, type);
	if (m->kind == IETF_NONE)
		return MOQ_ERR_PROTO;
	r = (struct rd){buf + k + 2, n, 0, d, 0};
	dec_body(&r, m);
	if (r.err || !rdone(&r))
		return MOQ_ERR_DECODE;
	return k + 2 + (int)n;
}

/* ---- namespace <-> path (moq-relay's mapping, docs/DESIGN.md) ---- */

int moq_ietf_ns_to_path(char *dst, size_t cap, const struct moq_str *ns, uint32_t n)
{
	size_t o = 0;

	if (n > MOQ_IETF_MAX_NS)
		return MOQ_ERR_DECODE;
	for (uint32_t i = 0; i < n; i++) {
		if (ns[i].len == 0)
			return MOQ_ERR_DECODE; /* a path segment is never empty */
		if (i) {
			if (o >= cap)
				return MOQ_ERR_TOO_LARGE;
			dst[o++] = '/';
		}
		for (size_t j = 0; j < ns[i].len; j++) {
			char c = ns[i].p[j];
			if (c == '/' || c == '\\') {
				if (o >= cap)
					return MOQ_ERR_TOO_LARGE;
				dst[o++] = '\\';
			}
			if (o >= cap)
				return MOQ_ERR_TOO_LARGE;
			dst[o++] = c;
		}
	}
	return (int)o;
}

int moq_ietf_path_to_ns(const char *path, size_t len, struct moq_str *ns)
{
	int n = 0;
	size_t start = 0;

	if (len == 0)
		return 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && path[i] == '\\' && i + 1 < len) {
			i++;
			continue;
		}
		if (i == len || path[i] == '/') {
			if (n == MOQ_IETF_MAX_NS)
				return MOQ_ERR_TOO_LARGE;
			ns[n].p = path + start;
			ns[n].len = i - start;
			n++;
			start = i + 1;
		}
	}
	return n;
}

/* ---- data plane ---- */

/* draft-14 10.4.2 (Table 7): 0x10..0x1d, bit 0x01 extensions, bits 0x06
 * the subgroup id form (0 zero, 2 first object id, 4 explicit; 6 invalid),
 * 0x08 end of group; 0x30.. the same without a priority byte (15+
 * DEFAULT_PRIORITY); draft-18 adds 0x40 for the first object of a group. */
static bool first_object_bit(enum moq_ietf_draft d)
{
	return d >= MOQ_IETF_18;
}

int moq_ietf_subgroup_hdr_encode(uint8_t *buf, size_t cap, enum moq_ietf_draft d,
                                 const struct moq_ietf_subgroup_hdr *h)
{
	struct wr w = {buf, cap, 0, d, 0};
	uint64_t t = h->has_priority ? 0x10 : 0x30;

	if (h->sg_mode > 2 || (!h->has_priority && d == MOQ_IETF_14))
		return MOQ_ERR_INVAL;
	if (h->extensions)
		t |= 0x01;
	t |= (uint64_t)h->sg_mode << 1;
	if (h->end_of_group)
		t |= 0x08;
	if (h->first_object && first_object_bit(d))
		t |= 0x40;
	wv(&w, t);
	wv(&w, h->track_alias);
	wv(&w, h->group);
	if (h->sg_mode == 2)
		wv(&w, h->subgroup);
	if (h->has_priority)
		w8(&w, h->priority);
	return w.err ? w.err : (int)w.o;
}

int moq_ietf_subgroup_hdr_decode(const uint8_t *buf, size_t len, enum moq_ietf_draft d,
                                 struct moq_ietf_subgroup_hdr *h)
{
	struct rd r = {buf, len, 0, d, 0};
	uint64_t t, base;
	int k;

	memset(h, 0, sizeof(*h));
	k = moq_ietf_varint_get(buf, len, d, &t);
	if (k < 0)
		return k;
	h->type = t;
	h->first_object = true;
	if (first_object_bit(d)) {
		h->first_object = (t & 0x40) != 0;
		t &= ~(uint64_t)0x40;
	}
	if (t >= 0x10 && t <= 0x1f) {
		h->has_priority = true;
		base = t - 0x10;
	} else if (t >= 0x30 && t <= 0x3f && d >= MOQ_IETF_15) {
		base = t - 0x30;
	} else {
		return MOQ_ERR_DECODE;
	}
	h->extensions = base & 0x01;
	h->sg_mode = (uint8_t)((base >> 1) & 3);
	h->end_of_group = (base & 0x08) != 0;
	if (h->sg_mode == 3)
		return MOQ_ERR_DECODE;
	r.o = (size_t)k;
	h->track_alias = rv(&r);
	h->group = rv(&r);
	if (h->sg_mode == 2)
		h->subgroup = rv(&r);
	h->priority = h->has_priority ? r8(&r) : 128;
	if (r.err)
		return MOQ_ERR_SHORT; /* a stream prefix: every field may still come */
	return (int)r.o;
}

int moq_ietf_object_encode_head(uint8_t *buf, size_t cap, enum moq_ietf_draft d, bool ext,
                                const struct moq_ietf_object *o)
{
	struct wr w = {buf, cap, 0, d, 0};

	wv(&w, o->id_delta);
	if (ext) {
		wstr(&w, o->ext);
	} else if (o->ext.len) {
		return MOQ_ERR_INVAL;
	}
	wv(&w, o->payload_len);
	if (o->payload_len == 0)
		wv(&w, o->status);
	return w.err ? w.err : (int)w.o;
}

int moq_ietf_object_decode_head(const uint8_t *buf, size_t len, enum moq_ietf_draft d, bool ext,
                                struct moq_ietf_object *o)
{
	struct rd r = {buf, len, 0, d, 0};
	uint64_t n;

	memset(o, 0, sizeof(*o));
	o->id_delta = rv(&r);
	if (ext) {
		uint64_t el = rv(&r);
		if (r.err)
			return MOQ_ERR_SHORT;
		if (el > MOQ_IETF_MSG_MAX)
			return MOQ_ERR_DECODE;
		if (el > len - r.o)
			return MOQ_ERR_SHORT;
		o->has_ext = el > 0;
		o->ext = rbytes(&r, el);
		if (moq_ietf_kvp_check((const uint8_t *)o->ext.p, o->ext.len, d) < 0)
			return MOQ_ERR_DECODE;
	}
	n = rv(&r);
	if (r.err)
		return MOQ_ERR_SHORT;
	if (n > MOQ_FRAME_MAX)
		return MOQ_ERR_DECODE;
	o->payload_len = (size_t)n;
	if (n == 0) {
		o->status = rv(&r);
		if (r.err)
			return MOQ_ERR_SHORT;
		if (o->status != IETF_OBJ_NORMAL && o->status != IETF_OBJ_DOES_NOT_EXIST &&
		    o->status != IETF_OBJ_END_OF_GROUP && o->status != IETF_OBJ_END_OF_TRACK)
			return MOQ_ERR_DECODE;
	}
	return (int)r.o;
}

/* draft-14 10.3.1: 0x00..0x07 (bit 0 extensions, bit 1 end of group, bit 2
 * status), 0x20/0x21 status. From 15 the type is flags: 0x01 extensions,
 * 0x02 end of group, 0x04 object id 0 (omitted), 0x08 default priority,
 * 0x20 status; a status never also ends the group. */
#define DG_EXT          0x01
#define DG_EOG          0x02
#define DG_ZERO_ID      0x04
#define DG_DEFAULT_PRIO 0x08
#define DG_STATUS       0x20
#define DG_ALL          (DG_EXT | DG_EOG | DG_ZERO_ID | DG_DEFAULT_PRIO | DG_STATUS)

static bool dg_valid(uint64_t t, enum moq_ietf_draft d)
{
	if (d == MOQ_IETF_14)
		return t <= 0x07 || t == 0x20 || t == 0x21;
	return (t & ~(uint64_t)DG_ALL) == 0 && !((t & DG_STATUS) && (t & DG_EOG));
}

int moq_ietf_datagram_encode(uint8_t *buf, size_t cap, enum moq_ietf_draft d,
                             const struct moq_ietf_datagram *g)
{
	struct wr w = {buf, cap, 0, d, 0};
	uint64_t t = 0;

	if (g->has_ext)
		t |= DG_EXT;
	if (g->end_of_group)
		t |= DG_EOG;
	if (!g->has_object_id)
		t |= DG_ZERO_ID;
	if (!g->has_priority)
		t |= DG_DEFAULT_PRIO;
	if (g->is_status)
		t |= DG_STATUS;
	if (!dg_valid(t, d) || (g->has_ext && g->ext.len == 0) ||
	    (d >= MOQ_IETF_17 && g->has_ext && g->is_status && g->status != IETF_OBJ_NORMAL))
		return MOQ_ERR_INVAL;
	wv(&w, t);
	wv(&w, g->track_alias);
	wv(&w, g->group);
	if (g->has_object_id)
		wv(&w, g->object);
	if (g->has_priority)
		w8(&w, g->priority);
	if (g->has_ext)
		wstr(&w, g->ext);
	if (g->is_status)
		wv(&w, g->status);
	else
		wbytes(&w, g->payload, g->payload_len);
	return w.err ? w.err : (int)w.o;
}

int moq_ietf_datagram_decode(const uint8_t *buf, size_t len, enum moq_ietf_draft d,
                             struct moq_ietf_datagram *g)
{
	struct rd r = {buf, len, 0, d, 0};
	uint64_t t;

	memset(g, 0, sizeof(*g));
	t = rv(&r);
	if (r.err || !dg_valid(t, d))
		return MOQ_ERR_DECODE;
	g->type = t;
	g->track_alias = rv(&r);
	g->group = rv(&r);
	g->has_object_id = !(t & DG_ZERO_ID);
	if (g->has_object_id)
		g->object = rv(&r);
	g->has_priority = !(t & DG_DEFAULT_PRIO);
	g->priority = g->has_priority ? r8(&r) : 128;
	g->end_of_group = (t & DG_EOG) != 0;
	g->has_ext = (t & DG_EXT) != 0;
	if (g->has_ext) {
		g->ext = rstr(&r, len);
		if (!r.err && (g->ext.len == 0 ||
		               moq_ietf_kvp_check((const uint8_t *)g->ext.p, g->ext.len, d) < 0))
			fail(&r);
	}
	g->is_status = (t & DG_STATUS) != 0;
	if (g->is_status) {
		g->status = rv(&r);
		if (!r.err && !rdone(&r))
			fail(&r);
		/* 17+: only a Normal object has properties */
		if (d >= MOQ_IETF_17 && g->has_ext && g->status != IETF_OBJ_NORMAL)
			fail(&r);
	} else if (!r.err) {
		g->payload = buf + r.o;
		g->payload_len = len - r.o;
		r.o = len;
	}
	return r.err ? MOQ_ERR_DECODE : 0;
}

/* FETCH stream objects. draft-14 10.4.4: Group ID, Subgroup ID, Object ID,
 * Publisher Priority (8), Extension Headers Length + headers, Payload
 * Length, [Status]. From 15 a Serialization Flags varint leads: bits 0x03
 * the subgroup (0 zero, 1 the prior object's, 2 prior + 1, 3 present),
 * 0x04 Object ID present (else prior + 1), 0x08 Group ID present (else the
 * prior's), 0x10 priority present (else the prior's), 0x20 extensions
 * present; a zero length is an empty object, no status. */
#define FO_SG_MASK 0x03
#define FO_OBJECT  0x04
#define FO_GROUP   0x08
#define FO_PRIO    0x10
#define FO_EXT     0x20

int moq_ietf_fetch_obj_encode_head(uint8_t *buf, size_t cap, enum moq_ietf_draft d,
                                   const struct moq_ietf_fetch_obj *prev,
                                   const struct moq_ietf_fetch_obj *o)
{
	struct wr w = {buf, cap, 0, d, 0};
	uint64_t f = 0;

	if (d == MOQ_IETF_14) {
		wv(&w, o->group);
		wv(&w, o->subgroup);
		wv(&w, o->object);
		w8(&w, o->priority);
		wstr(&w, o->has_ext ? o->ext : (struct moq_str){NULL, 0});
		wv(&w, o->payload_len);
		if (o->payload_len == 0)
			wv(&w, o->status);
		return w.err ? w.err : (int)w.o;
	}
	if (!prev || o->group != prev->group)
		f |= FO_GROUP;
	if (!prev || (f & FO_GROUP) || o->object != prev->object + 1)
		f |= FO_OBJECT;
	if (!prev || o->priority != prev->priority)
		f |= FO_PRIO;
	if (o->has_ext)
		f |= FO_EXT;
	if (o->subgroup == 0)
		f |= 0;
	else if (prev && o->subgroup == prev->subgroup)
		f |= 1;
	else if (prev && o->subgroup == prev->subgroup + 1)
		f |= 2;
	else
		f |= 3;
	wv(&w, f);
	if (f & FO_GROUP)
		wv(&w, o->group);
	if ((f & FO_SG_MASK) == 3)
		wv(&w, o->subgroup);
	if (f & FO_OBJECT)
		wv(&w, o->object);
	if (f & FO_PRIO)
		w8(&w, o->priority);
	if (f & FO_EXT)
		wstr(&w, o->ext);
	wv(&w, o->payload_len);
	return w.err ? w.err : (int)w.o;
}

int moq_ietf_fetch_obj_decode_head(const uint8_t *buf, size_t len, enum moq_ietf_draft d,
                                   const struct moq_ietf_fetch_obj *prev,
                                   struct moq_ietf_fetch_obj *o)
{
	struct rd r = {buf, len, 0, d, 0};
	uint64_t f, n;

	memset(o, 0, sizeof(*o));
	if (d == MOQ_IETF_14) {
		o->group = rv(&r);
		o->subgroup = rv(&r);
		o->object = rv(&r);
		o->priority = r8(&r);
		o->ext = rstr(&r, MOQ_IETF_MSG_MAX);
		o->has_ext = o->ext.len > 0;
	} else {
		f = rv(&r);
		if (r.err)
			return MOQ_ERR_SHORT;
		if (f & ~(uint64_t)0x3f)
			return MOQ_ERR_DECODE;
		if (!prev && (!(f & FO_GROUP) || !(f & FO_OBJECT) || !(f & FO_PRIO) ||
		              (f & FO_SG_MASK) == 1 || (f & FO_SG_MASK) == 2))
			return MOQ_ERR_DECODE; /* the first object names everything */
		o->flags = f;
		o->group = (f & FO_GROUP) ? rv(&r) : prev->group;
		switch (f & FO_SG_MASK) {
		case 0:
			o->subgroup = 0;
			break;
		case 1:
			o->subgroup = prev->subgroup;
			break;
		case 2:
			o->subgroup = prev->subgroup + 1;
			break;
		default:
			o->subgroup = rv(&r);
		}
		o->object = (f & FO_OBJECT) ? rv(&r) : prev->object + 1;
		o->priority = (f & FO_PRIO) ? r8(&r) : prev->priority;
		if (f & FO_EXT) {
			o->has_ext = true;
			o->ext = rstr(&r, MOQ_IETF_MSG_MAX);
		}
	}
	if (!r.err && o->ext.len &&
	    moq_ietf_kvp_check((const uint8_t *)o->ext.p, o->ext.len, d) < 0)
		return MOQ_ERR_DECODE;
	n = rv(&r);
	if (r.err)
		return MOQ_ERR_SHORT;
	if (n > MOQ_FRAME_MAX)
		return MOQ_ERR_DECODE;
	o->payload_len = (size_t)n;
	if (n == 0 && d == MOQ_IETF_14) {
		o->status = rv(&r);
		if (r.err)
			return MOQ_ERR_SHORT;
	}
	return (int)r.o;
}
