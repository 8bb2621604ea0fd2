/* SPDX-License-Identifier: MIT */
/*
 * test_web_qmux.c: the qmux-01 engine (web/qmux.c) in-process: two engines,
 * a client and a server, joined by a loop that moves records between them;
 * and hand-made records for every frame type and every error. Plus the
 * WebSocket helpers (accept key, subprotocol choice, frame header).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "codec.h"
#include "web.h"
#include "web_int.h"

#define MAXS 64

/* What one side saw. */
struct side {
	struct moq_qmux *q;
	uint8_t data[MAXS][210000];
	size_t dlen[MAXS];
	int64_t dsid[MAXS];
	int fin[MAXS];
	unsigned int ns;
	int64_t reset_sid, stop_sid;
	uint64_t reset_code, stop_code;
	uint64_t acked[MAXS];
	int closed, close_app, close_local, writable, sclosed;
	unsigned int nreset, nstop;
	uint64_t close_code;
	size_t max_rec;
	uint64_t now;
};

static int slot(struct side *s, int64_t sid)
{
	for (unsigned int i = 0; i < s->ns; i++)
		if (s->dsid[i] == sid)
			return (int)i;
	ck_assert_uint_lt(s->ns, MAXS);
	s->dsid[s->ns] = sid;
	return (int)s->ns++;
}

static void cb_data(void *u, int64_t sid, const uint8_t *d, size_t len, int fin)
{
	struct side *s = u;
	int i = slot(s, sid);

	ck_assert_uint_le(s->dlen[i] + len, sizeof(s->data[i]));
	memcpy(s->data[i] + s->dlen[i], d, len);
	s->dlen[i] += len;
	s->fin[i] |= fin;
}

static void cb_reset(void *u, int64_t sid, uint64_t code)
{
	struct side *s = u;

	s->reset_sid = sid;
	s->reset_code = code;
	s->nreset++;
}

static void cb_stop(void *u, int64_t sid, uint64_t code)
{
	struct side *s = u;

	s->stop_sid = sid;
	s->stop_code = code;
	s->nstop++;
}

static void cb_acked(void *u, int64_t sid, uint64_t total)
{
	struct side *s = u;

	s->acked[slot(s, sid)] = total;
}

static void cb_sclosed(void *u, int64_t sid)
{
	struct side *s = u;

	(void)sid;
	s->sclosed++;
}

static void cb_writable(void *u)
{
	((struct side *)u)->writable++;
}

static void cb_closed(void *u, uint64_t code, int app, int local)
{
	struct side *s = u;

	ck_assert_int_eq(s->closed, 0); /* once */
	s->closed = 1;
	s->close_code = code;
	s->close_app = app;
	s->close_local = local;
}

static const struct moq_qmux_callbacks cbs = {cb_data,    cb_reset,    cb_stop,  cb_acked,
                                              cb_sclosed, cb_writable, cb_closed};

static void side_init(struct side *s, int server, const struct moq_qmux_params *p)
{
	struct moq_qmux_cfg c;

	memset(s, 0, sizeof(*s));
	memset(&c, 0, sizeof(c));
	c.server = server;
	if (p)
		c.local = *p;
	c.cb = &cbs;
	c.user = s;
	s->reset_sid = s->stop_sid = -1;
	s->q = moq_qmux_new(&c, 0);
	ck_assert_ptr_nonnull(s->q);
}

/* Move one record from @a to @b (into a flat buffer, like a WebSocket
 * message). Returns 1 moved, 0 nothing to send. */
static int move1(struct side *a, struct side *b, int *rc)
{
	static uint8_t buf[1 << 20];
	struct iovec iov[80];
	size_t len, o = 0;
	int n = moq_qmux_next_record(a->q, iov, 80, &len);

	ck_assert_int_ge(n, 0);
	if (n == 0)
		return 0;
	for (int i = 0; i < n; i++) {
		memcpy(buf + o, iov[i].iov_base, iov[i].iov_len);
		o += iov[i].iov_len;
	}
	ck_assert_uint_eq(o, len);
	if (len > a->max_rec)
		a->max_rec = len;
	moq_qmux_record_done(a->q, a->now);
	*rc = moq_qmux_recv_record(b->q, buf, len, b->now);
	return 1;
}

static void pump(struct side *a, struct side *b)
{
	int rc = 0;

	for (int i = 0; i < 100000; i++) {
		int m = 0;

		if (!moq_qmux_closing(a->q) || 1)
			m |= move1(a, b, &rc);
		m |= move1(b, a, &rc);
		if (!m)
			return;
	}
	ck_abort_msg("pump did not settle");
}

/* A record from hex-ish bytes. */
static size_t rec(uint8_t *out, const uint64_t *v, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++)
		o += (size_t)moq_varint_put(out + o, 64, v[i]);
	return o;
}

/* The client's parameters as a record (default values), then @rest. */
static size_t tp_rec(uint8_t *out, const uint8_t *params, size_t plen)
{
	size_t o = 0;

	o += (size_t)moq_varint_put(out, 16, 0x3f5153300d0a0d0aull);
	o += (size_t)moq_varint_put(out + o, 16, plen);
	memcpy(out + o, params, plen);
	return o + plen;
}

/* One transport parameter, its length computed. */
static size_t tparam(uint8_t *out, uint64_t id, uint64_t v)
{
	size_t o = (size_t)moq_varint_put(out, 16, id);

	o += (size_t)moq_varint_put(out + o, 16, moq_varint_len(v));
	return o + (size_t)moq_varint_put(out + o, 16, v);
}

static size_t tp_default(uint8_t *out)
{
	static const uint64_t p[][2] = {{0x01, 30000},  {0x04, 1 << 20}, {0x05, 262144},
	                                {0x06, 262144}, {0x07, 262144},  {0x08, 10},
	                                {0x09, 10}};
	uint8_t b[128];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		n += tparam(b + n, p[i][0], p[i][1]);
	return tp_rec(out, b, n);
}

static void pair(struct side *c, struct side *s, const struct moq_qmux_params *cp,
                 const struct moq_qmux_params *sp)
{
	side_init(c, 0, cp);
	side_init(s, 1, sp);
	pump(c, s);
	ck_assert_ptr_nonnull(moq_qmux_peer_params(c->q));
	ck_assert_ptr_nonnull(moq_qmux_peer_params(s->q));
}

static struct side *A, *B;

static void setup(void)
{
	A = calloc(1, sizeof(*A));
	B = calloc(1, sizeof(*B));
}

static void teardown(void)
{
	moq_qmux_free(A->q);
	moq_qmux_free(B->q);
	free(A);
	free(B);
}

START_TEST(params_first_and_parsed)
{
	struct moq_qmux_params p;
	struct iovec iov[8];
	size_t len;
	uint64_t type;
	int64_t sid;

	moq_qmux_default_params(&p);
	p.max_streams_bidi = 7;
	p.max_record_size = 20000;
	side_init(A, 1, &p);
	/* nothing may be opened before the peer's parameters (its limits are 0
	 * until then: the writable callback follows them) */
	ck_assert_int_eq(moq_qmux_stream_open(A->q, 1, &sid), MOQ_ERR_AGAIN);
	ck_assert_int_eq(moq_qmux_next_record(A->q, iov, 8, &len), 1);
	ck_assert_int_eq(moq_varint_get(iov[0].iov_base, len, &type), 8);
	ck_assert(type == 0x3f5153300d0a0d0aull);
	side_init(B, 0, NULL);
	moq_qmux_record_done(A->q, 0);
	{
		uint8_t buf[512];

		ck_assert_uint_le(len, sizeof(buf));
		memcpy(buf, iov[0].iov_base, len);
		ck_assert_int_eq(moq_qmux_recv_record(B->q, buf, len, 0), 0);
	}
	ck_assert_uint_eq(moq_qmux_peer_params(B->q)->max_streams_bidi, 7);
	ck_assert_uint_eq(moq_qmux_peer_params(B->q)->max_record_size, 20000);
	ck_assert_uint_eq(moq_qmux_peer_params(B->q)->idle_timeout_ms, 30000);
	ck_assert_uint_eq(moq_qmux_peer_params(B->q)->max_data, 1u << 20);
}
END_TEST

START_TEST(stream_both_ways_and_acked)
{
	static uint8_t big[200000];
	struct iovec v;
	int64_t sid;
	long n;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7 + 3);
	pair(A, B, NULL, NULL);
	ck_assert_int_eq(moq_qmux_stream_open(A->q, 1, &sid), 0);
	ck_assert_int_eq(sid, 0); /* client bidi 0 */
	v.iov_base = big;
	v.iov_len = 60000;
	n = moq_qmux_stream_write(A->q, sid, &v, 1, 1);
	ck_assert_int_eq(n, 60000);
	pump(A, B);
	ck_assert_int_eq(B->ns, 1);
	ck_assert_int_eq(B->dsid[0], 0);
	ck_assert_uint_eq(B->dlen[0], 60000);
	ck_assert_int_eq(B->fin[0], 1);
	ck_assert_mem_eq(B->data[0], big, 60000);
	ck_assert_uint_eq(A->acked[slot(A, 0)], 60000);
	/* every record within the peer's max_record_size */
	ck_assert_uint_le(A->max_rec, MOQ_QMUX_MIN_RECORD);
	/* the server answers on the same stream, and opens a uni one */
	v.iov_base = big + 1;
	v.iov_len = 1000;
	ck_assert_int_eq(moq_qmux_stream_write(B->q, 0, &v, 1, 1), 1000);
	ck_assert_int_eq(moq_qmux_stream_open(B->q, 0, &sid), 0);
	ck_assert_int_eq(sid, 3); /* server uni 0 */
	ck_assert_int_eq(moq_qmux_stream_write(B->q, sid, &v, 1, 0), 1000);
	pump(A, B);
	ck_assert_uint_eq(A->dlen[slot(A, 0)], 1000);
	ck_assert_mem_eq(A->data[slot(A, 0)], big + 1, 1000);
	ck_assert_uint_eq(A->dlen[slot(A, 3)], 1000);
	ck_assert_int_eq(A->fin[slot(A, 3)], 0);
	/* the bidi stream is done both ways: both sides forgot it */
	ck_assert_int_ge(A->sclosed, 1);
	ck_assert_int_ge(B->sclosed, 1);
	/* writing after FIN */
	ck_assert_int_eq(moq_qmux_stream_write(B->q, 0, &v, 1, 0), MOQ_ERR_NOTFOUND);
	/* the client cannot write on the server's uni stream */
	ck_assert_int_eq(moq_qmux_stream_write(A->q, 3, &v, 1, 0), MOQ_ERR_NOTFOUND);
}
END_TEST

START_TEST(flow_control_stream_and_conn)
{
	static uint8_t big[300000];
	struct moq_qmux_params small;
	struct iovec v[4];
	int64_t sid;
	int rc = 0;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i ^ (i >> 8));
	moq_qmux_default_params(&small);
	small.max_stream_data_bidi_remote = 5000; /* what the client may send us */
	small.max_data = 8000;
	pair(A, B, NULL, &small);
	ck_assert_int_eq(moq_qmux_stream_open(A->q, 1, &sid), 0);
	for (int i = 0; i < 4; i++) {
		v[i].iov_base = big + i * 50000;
		v[i].iov_len = 50000;
	}
	ck_assert_int_eq(moq_qmux_stream_write(A->q, sid, v, 4, 1), 200000);
	/* one record: at most the stream window */
	ck_assert_int_eq(move1(A, B, &rc), 1);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(B->dlen[0], 5000);
	ck_assert_int_eq(move1(A, B, &rc), 0); /* blocked until credit */
	/* the server consumed it: MAX_STREAM_DATA / MAX_DATA follow */
	pump(A, B);
	ck_assert_uint_eq(B->dlen[0], 200000);
	ck_assert_int_eq(B->fin[0], 1);
	ck_assert_mem_eq(B->data[0], big, 200000);
	ck_assert_uint_eq(A->acked[slot(A, sid)], 200000);
	ck_assert_int_gt(A->writable, 0);
	/* the other way: the server's writes to the client's window */
	ck_assert_int_eq(moq_qmux_stream_open(B->q, 0, &sid), 0);
	ck_assert_int_eq(moq_qmux_stream_write(B->q, sid, v, 4, 0), 200000);
	pump(A, B);
	ck_assert_uint_eq(A->dlen[slot(A, sid)], 200000);
	ck_assert_mem_eq(A->data[slot(A, sid)], big, 200000);
}
END_TEST

START_TEST(flow_control_violation_closes)
{
	struct moq_qmux_params small;
	uint8_t r[9000];
	size_t o;
	uint64_t hdr[] = {0x0e, 0, 0, 0x40 | 0}; /* STREAM sid 0 off 0 len (2 bytes) */

	moq_qmux_default_params(&small);
	small.max_stream_data_bidi_remote = 100;
	side_init(B, 1, &small);
	o = tp_default(r);
	/* 200 bytes on stream 0: over the 100 we allow */
	o += rec(r + o, hdr, 3);
	r[o++] = 0x40;
	r[o++] = 200;
	memset(r + o, 'x', 200);
	o += 200;
	ck_assert_int_eq(moq_qmux_recv_record(B->q, r, o, 0), MOQ_ERR_PROTO);
	ck_assert_int_eq(B->closed, 1);
	ck_assert_int_eq(B->close_app, 0);
	ck_assert_uint_eq(B->close_code, MOQ_QMUX_FLOW_CONTROL_ERROR);
	ck_assert_uint_eq(B->dlen[0], 0);
	/* the next record carries CONNECTION_CLOSE */
	{
		struct iovec iov[8];
		size_t len;
		const uint8_t *p;
		uint64_t t;
		int k;

		ck_assert_int_eq(moq_qmux_next_record(B->q, iov, 8, &len), 1);
		p = iov[0].iov_base;
		/* after our parameters */
		ck_assert_int_eq(moq_varint_get(p, len, &t), 8);
		k = 8;
		{
			uint64_t l;
			int m = moq_varint_get(p + k, len - (size_t)k, &l);

			k += m + (int)l;
		}
		k += moq_varint_get(p + k, len - (size_t)k, &t);
		ck_assert_uint_eq(t, 0x1c);
		moq_varint_get(p + k, len - (size_t)k, &t);
		ck_assert_uint_eq(t, MOQ_QMUX_FLOW_CONTROL_ERROR);
	}
}
END_TEST

START_TEST(stream_count_limits)
{
	struct moq_qmux_params cp;
	struct iovec v = {"abc", 3};
	int64_t sid, s0, s1;

	moq_qmux_default_params(&cp);
	cp.max_streams_uni = 2; /* the client lets the server open 2 uni streams */
	pair(A, B, &cp, NULL);
	ck_assert_int_eq(moq_qmux_stream_open(B->q, 0, &s0), 0);
	ck_assert_int_eq(moq_qmux_stream_open(B->q, 0, &s1), 0);
	ck_assert_int_eq(moq_qmux_stream_open(B->q, 0, &sid), MOQ_ERR_AGAIN);
	ck_assert_int_eq(moq_qmux_stream_write(B->q, s0, &v, 1, 1), 3);
	ck_assert_int_eq(moq_qmux_stream_write(B->q, s1, &v, 1, 1), 3);
	B->writable = 0;
	pump(A, B);
	/* both closed at the client: MAX_STREAMS came back */
	ck_assert_int_gt(B->writable, 0);
	ck_assert_int_eq(moq_qmux_stream_open(B->q, 0, &sid), 0);
	ck_assert_int_eq(sid, 2 * 4 + 3);
}
END_TEST

START_TEST(stream_limit_violation_closes)
{
	uint8_t r[512];
	size_t o;
	/* STREAM on client bidi stream index 10 (id 40): over the 100? no: we
	 * allow 2 */
	uint64_t f[] = {0x0f, 40, 0, 1, 'x'};
	struct moq_qmux_params sp;

	moq_qmux_default_params(&sp);
	sp.max_streams_bidi = 2;
	side_init(B, 1, &sp);
	o = tp_default(r);
	o += rec(r + o, f, 4);
	r[o++] = 'x';
	ck_assert_int_eq(moq_qmux_recv_record(B->q, r, o, 0), MOQ_ERR_PROTO);
	ck_assert_uint_eq(B->close_code, MOQ_QMUX_STREAM_LIMIT_ERROR);
}
END_TEST

START_TEST(reset_and_stop_sending)
{
	struct iovec v = {"hello", 5};
	int64_t sid;

	pair(A, B, NULL, NULL);
	ck_assert_int_eq(moq_qmux_stream_open(A->q, 1, &sid), 0);
	ck_assert_int_eq(moq_qmux_stream_write(A->q, sid, &v, 1, 0), 5);
	pump(A, B);
	/* the client resets its sending side: RESET_STREAM */
	ck_assert_int_eq(moq_qmux_stream_reset(A->q, sid, 13), 0);
	pump(A, B);
	ck_assert_int_eq(B->reset_sid, sid);
	ck_assert_uint_eq(B->reset_code, 13);
	/* the server's STOP_SENDING on a stream it receives: the client's
	 * callback runs and the engine answers with RESET_STREAM */
	ck_assert_int_eq(moq_qmux_stream_open(A->q, 0, &sid), 0);
	ck_assert_int_eq(moq_qmux_stream_write(A->q, sid, &v, 1, 0), 5);
	pump(A, B);
	B->reset_sid = -1;
	ck_assert_int_eq(moq_qmux_stream_stop_sending(B->q, sid, 26), 0);
	pump(A, B);
	ck_assert_int_eq(A->stop_sid, sid);
	ck_assert_uint_eq(A->stop_code, 26);
	ck_assert_int_eq(B->reset_sid, sid);
	ck_assert_uint_eq(B->reset_code, 26);
	/* reset and done: the stream is gone */
	ck_assert_int_lt(moq_qmux_stream_write(A->q, sid, &v, 1, 0), 0);
}
END_TEST

START_TEST(every_frame_type_accepted)
{
	uint8_t r[2048];
	size_t o;
	struct side *s = B;
	/* after the client's parameters: PADDING, PING, MAX_DATA, MAX_STREAM_DATA
	 * (our bidi 1 not open: ignored), MAX_STREAMS x2, DATA_BLOCKED,
	 * STREAM_DATA_BLOCKED, STREAMS_BLOCKED x2, QX_PING request / response,
	 * STREAM without OFF/LEN (runs to the end) */
	uint64_t f[] = {0x00,    0x00,
	                0x01,    0x10,
	                2000000, 0x11,
	                0,       500000,
	                0x12,    50,
	                0x13,    60,
	                0x14,    100,
	                0x15,    0,
	                100,     0x16,
	                10,      0x17,
	                10,      0x348c67529ef8c7bdull,
	                7,       0x348c67529ef8c7beull,
	                0,       0x0f,
	                4,       0,
	                2};
	struct iovec iov[8];
	size_t len;
	int64_t sid;

	side_init(s, 1, NULL);
	o = tp_default(r);
	o += rec(r + o, f, sizeof(f) / sizeof(f[0]));
	memcpy(r + o, "hi", 2);
	o += 2;
	ck_assert_int_eq(moq_qmux_recv_record(s->q, r, o, 0), 0);
	ck_assert_int_eq(s->closed, 0);
	ck_assert_uint_eq(s->dlen[slot(s, 4)], 2);
	ck_assert_int_eq(s->fin[slot(s, 4)], 1);
	/* MAX_STREAMS raised what we may open */
	for (int i = 0; i < 50; i++)
		ck_assert_int_eq(moq_qmux_stream_open(s->q, 1, &sid), 0);
	ck_assert_int_eq(moq_qmux_stream_open(s->q, 1, &sid), MOQ_ERR_AGAIN);
	/* the reply record holds our parameters and the ping response (7) */
	ck_assert_int_ge(moq_qmux_next_record(s->q, iov, 8, &len), 1);
	{
		const uint8_t *p = iov[0].iov_base;
		uint64_t t, l;
		size_t k = 0;
		int found = 0;

		k += (size_t)moq_varint_get(p, len, &t);
		k += (size_t)moq_varint_get(p + k, len - k, &l);
		k += l;
		while (k < iov[0].iov_len) {
			k += (size_t)moq_varint_get(p + k, len - k, &t);
			if (t == 0x348c67529ef8c7beull) {
				k += (size_t)moq_varint_get(p + k, len - k, &l);
				ck_assert_uint_eq(l, 7);
				found = 1;
				break;
			}
			k += (size_t)moq_varint_get(p + k, len - k, &l); /* one-varint frames */
		}
		ck_assert_int_eq(found, 1);
	}
	/* APPLICATION_CLOSE from the peer */
	{
		uint64_t c[] = {0x1d, 6, 3};

		o = rec(r, c, 3);
		memcpy(r + o, "bye", 3);
		o += 3;
		ck_assert_int_eq(moq_qmux_recv_record(s->q, r, o, 0), 0);
		ck_assert_int_eq(s->closed, 1);
		ck_assert_int_eq(s->close_app, 1);
		ck_assert_int_eq(s->close_local, 0);
		ck_assert_uint_eq(s->close_code, 6);
	}
}
END_TEST

/* Bad input: each record closes with the transport error given. */
static void bad(const uint8_t *r, size_t n, uint64_t code)
{
	struct side *s = calloc(1, sizeof(*s));

	side_init(s, 1, NULL);
	ck_assert_int_eq(moq_qmux_recv_record(s->q, r, n, 0), MOQ_ERR_PROTO);
	ck_assert_int_eq(s->closed, 1);
	ck_assert_int_eq(s->close_local, 1);
	ck_assert_uint_eq(s->close_code, code);
	/* nothing more is taken */
	ck_assert_int_eq(moq_qmux_recv_record(s->q, r, n, 0), MOQ_ERR_CLOSED);
	moq_qmux_free(s->q);
	free(s);
}

START_TEST(bad_input_closes)
{
	uint8_t r[40000], p[64];
	size_t o, pl;

	/* a STREAM frame before the parameters */
	{
		uint64_t f[] = {0x0b, 0, 1};

		o = rec(r, f, 3);
		r[o++] = 'x';
		bad(r, o, MOQ_QMUX_PROTOCOL_VIOLATION);
	}
	/* a duplicate parameter */
	{
		uint64_t f[] = {0x04, 1, 5, 0x04, 1, 6};

		pl = rec(p, f, 6);
		bad(r, tp_rec(r, p, pl), MOQ_QMUX_TRANSPORT_PARAMETER_ERROR);
	}
	/* a forbidden one (original_destination_connection_id) */
	{
		uint64_t f[] = {0x00, 1, 5};

		pl = rec(p, f, 3);
		bad(r, tp_rec(r, p, pl), MOQ_QMUX_TRANSPORT_PARAMETER_ERROR);
	}
	/* max_record_size under 16382 */
	{
		uint64_t f[] = {0x0571c59429cd0845ull, 2, 1000};

		pl = rec(p, f, 3);
		bad(r, tp_rec(r, p, pl), MOQ_QMUX_TRANSPORT_PARAMETER_ERROR);
	}
	/* a value whose length disagrees with its varint */
	{
		uint64_t f[] = {0x04, 4, 5};

		pl = rec(p, f, 3);
		p[pl++] = 0;
		bad(r, tp_rec(r, p, pl), MOQ_QMUX_TRANSPORT_PARAMETER_ERROR);
	}
	/* a truncated parameters frame */
	{
		o = tp_default(r);
		bad(r, o - 1, MOQ_QMUX_FRAME_ENCODING_ERROR);
	}
	/* parameters twice */
	{
		o = tp_default(r);
		o += tp_default(r + o);
		bad(r, o, MOQ_QMUX_PROTOCOL_VIOLATION);
	}
	/* a DATAGRAM (none advertised) */
	{
		uint64_t f[] = {0x31, 1};

		o = tp_default(r);
		o += rec(r + o, f, 2);
		r[o++] = 1;
		bad(r, o, MOQ_QMUX_FRAME_ENCODING_ERROR);
	}
	/* an unknown frame type */
	{
		uint64_t f[] = {0x2a};

		o = tp_default(r);
		o += rec(r + o, f, 1);
		bad(r, o, MOQ_QMUX_FRAME_ENCODING_ERROR);
	}
	/* a STREAM frame on a stream of ours we never opened */
	{
		uint64_t f[] = {0x0b, 1, 1};

		o = tp_default(r);
		o += rec(r + o, f, 3);
		r[o++] = 'x';
		bad(r, o, MOQ_QMUX_STREAM_STATE_ERROR);
	}
	/* a gap in a stream's offsets */
	{
		uint64_t f[] = {0x0e, 0, 5, 1};

		o = tp_default(r);
		o += rec(r + o, f, 4);
		r[o++] = 'x';
		bad(r, o, MOQ_QMUX_PROTOCOL_VIOLATION);
	}
	/* a STREAM length beyond the record */
	{
		uint64_t f[] = {0x0a, 0, 50};

		o = tp_default(r);
		o += rec(r + o, f, 3);
		bad(r, o, MOQ_QMUX_FRAME_ENCODING_ERROR);
	}
	/* a record over our max_record_size */
	{
		o = tp_default(r);
		memset(r + o, 0, sizeof(r) - o); /* PADDING */
		bad(r, 16383, MOQ_QMUX_PROTOCOL_VIOLATION);
	}
}
END_TEST

START_TEST(idle_timeout_and_ping)
{
	struct moq_qmux_params p;
	struct moq_qmux_stats st;

	moq_qmux_default_params(&p);
	p.idle_timeout_ms = 1000;
	pair(A, B, NULL, &p);
	/* 6 s of silence from the client side: the server pings after 5 s */
	B->now = A->now = 5500000000ull;
	ck_assert_int_eq(moq_qmux_timers(B->q, B->now), 1); /* 1 s idle: closed */
	ck_assert_int_eq(B->closed, 1);
	ck_assert_int_eq(B->close_local, 1);
	/* with the default 30 s: a ping at 5 s, answered, keeps it open */
	moq_qmux_free(A->q);
	moq_qmux_free(B->q);
	pair(A, B, NULL, NULL);
	A->now = B->now = 5100000000ull;
	ck_assert_int_eq(moq_qmux_timers(B->q, B->now), 0);
	pump(A, B);
	moq_qmux_get_stats(B->q, &st);
	ck_assert_uint_eq(st.pings_sent, 1);
	moq_qmux_get_stats(A->q, &st);
	ck_assert_uint_eq(st.pings_answered, 1);
	A->now = B->now = 31000000000ull;
	ck_assert_int_eq(moq_qmux_timers(B->q, B->now), 0); /* the pong was heard at 5.1 s */
	A->now = B->now = 36000000000ull;
	ck_assert_int_eq(moq_qmux_timers(B->q, B->now), 1);
}
END_TEST

START_TEST(app_close_goes_out_last)
{
	struct iovec v = {"abc", 3};
	int64_t sid;

	pair(A, B, NULL, NULL);
	ck_assert_int_eq(moq_qmux_stream_open(B->q, 0, &sid), 0);
	moq_qmux_stream_write(B->q, sid, &v, 1, 0);
	moq_qmux_close(B->q, 4);
	ck_assert_int_eq(B->closed, 1);
	ck_assert_int_eq(B->close_local, 1);
	pump(A, B);
	ck_assert_int_eq(A->closed, 1);
	ck_assert_int_eq(A->close_app, 1);
	ck_assert_uint_eq(A->close_code, 4);
	ck_assert_int_eq(moq_qmux_stream_open(B->q, 0, &sid), MOQ_ERR_STATE);
}
END_TEST

/* Every record @a has queued, moved to @b one by one; each must fit the
 * writer's buffers (MOQ_QMUX_MAX_SEND_RECORD) and parse cleanly. Returns
 * the records moved. */
static int drain_checked(struct side *a, struct side *b)
{
	int moved = 0, rc = 0;

	for (int i = 0; i < 10000; i++) {
		struct iovec iov[80];
		size_t len;
		int n = moq_qmux_next_record(a->q, iov, 80, &len);

		ck_assert_int_ge(n, 0);
		if (n == 0)
			return moved;
		ck_assert_uint_le(len, MOQ_QMUX_MAX_SEND_RECORD);
		ck_assert_int_eq(move1(a, b, &rc), 1);
		ck_assert_int_eq(rc, 0);
		ck_assert_int_eq(b->closed, 0);
		moved++;
	}
	ck_abort_msg("records without end");
	return moved;
}

/* issue 22, item 1: a peer advertising max_record_size 2^62-1 must not
 * make the engine build records larger than the writer's buffer (web/http.c
 * copies a TLS record into REC_CAP + a WebSocket header): the record holds
 * control frames and a STREAM frame, together at most
 * MOQ_QMUX_MAX_SEND_RECORD bytes. */
START_TEST(record_bounded_with_huge_peer_record_size)
{
	static uint8_t big[40000];
	struct moq_qmux_params cp;
	struct iovec v = {big, sizeof(big)};
	int64_t sid[10], u;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 13 + 1);
	moq_qmux_default_params(&cp);
	cp.max_record_size = (1ull << 62) - 1;
	pair(A, B, &cp, NULL);
	/* the server: a uni stream with 40,000 bytes, and ten bidi streams it
	 * stops and resets (RESET_STREAM + STOP_SENDING each), a ping */
	ck_assert_int_eq(moq_qmux_stream_open(B->q, 0, &u), 0);
	ck_assert_int_eq(moq_qmux_stream_write(B->q, u, &v, 1, 0), (long)sizeof(big));
	for (int i = 0; i < 10; i++) {
		struct iovec one = {big, 1};

		ck_assert_int_eq(moq_qmux_stream_open(B->q, 1, &sid[i]), 0);
		ck_assert_int_eq(moq_qmux_stream_write(B->q, sid[i], &one, 1, 0), 1);
	}
	drain_checked(B, A);
	for (int i = 0; i < 10; i++) {
		ck_assert_int_eq(moq_qmux_stream_stop_sending(B->q, sid[i], 9), 0);
		ck_assert_int_eq(moq_qmux_stream_reset(B->q, sid[i], 8), 0);
	}
	B->now = A->now = 5100000000ull;
	moq_qmux_timers(B->q, B->now); /* a QX_PING request */
	ck_assert_int_eq(moq_qmux_stream_write(B->q, u, &v, 1, 1), (long)sizeof(big));
	drain_checked(B, A);
	ck_assert_uint_eq(A->dlen[slot(A, u)], 2 * sizeof(big));
	ck_assert_mem_eq(A->data[slot(A, u)], big, sizeof(big));
	ck_assert_mem_eq(A->data[slot(A, u)] + sizeof(big), big, sizeof(big));
	ck_assert_uint_eq(A->nreset, 10);
	ck_assert_uint_eq(A->nstop, 10);
}
END_TEST

/* issue 22, item 1 (the header part): control frames of many streams at
 * once (RESET_STREAM + STOP_SENDING + MAX_STREAM_DATA each) fill more than
 * one record's header buffer: each frame goes whole into this record or the
 * next one, none is cut or dropped, and a STREAM frame still follows. */
START_TEST(record_header_never_overfills)
{
	static uint8_t big[300];
	struct moq_qmux_params cp;
	struct iovec v = {big, sizeof(big)};
	int64_t sid[60], u, x;

	/* stream ids of 4-byte varints (>= 16384): 28 bytes of control
	 * frames per stream */
	moq_qmux_default_params(&cp);
	cp.max_streams_bidi = 5000;
	pair(A, B, &cp, NULL);
	for (int i = 0; i < 4100; i++)
		ck_assert_int_eq(moq_qmux_stream_open(B->q, 1, &x), 0);
	for (int i = 0; i < 60; i++) {
		ck_assert_int_eq(moq_qmux_stream_open(B->q, 1, &sid[i]), 0);
		ck_assert_int_ge(sid[i], 16384);
		ck_assert_int_eq(moq_qmux_stream_write(B->q, sid[i], &v, 1, 0), (long)sizeof(big));
	}
	drain_checked(B, A);
	ck_assert_int_eq(moq_qmux_stream_open(B->q, 0, &u), 0);
	for (int i = 0; i < 60; i++) {
		/* large varints: codes of 8 bytes */
		ck_assert_int_eq(moq_qmux_stream_stop_sending(B->q, sid[i], (1ull << 61) + 7), 0);
		ck_assert_int_eq(moq_qmux_stream_reset(B->q, sid[i], (1ull << 61) + 5), 0);
	}
	ck_assert_int_eq(moq_qmux_stream_write(B->q, u, &v, 1, 1), (long)sizeof(big));
	/* a QX_PING request each way: B's record starts with the response
	 * and its own request (18 bytes), so the 36th stream's 28 bytes
	 * (998 + 28) cross the 1,024-byte header buffer */
	A->now = B->now = 5100000000ull;
	moq_qmux_timers(A->q, A->now);
	drain_checked(A, B);
	moq_qmux_timers(B->q, B->now);
	ck_assert_int_ge(drain_checked(B, A), 2);
	ck_assert_uint_eq(A->nreset, 60);
	ck_assert_uint_eq(A->nstop, 60);
	ck_assert_uint_eq(A->reset_code, (1ull << 61) + 5);
	ck_assert_uint_eq(A->stop_code, (1ull << 61) + 7);
	ck_assert_uint_eq(A->dlen[slot(A, u)], sizeof(big));
	ck_assert_int_eq(A->fin[slot(A, u)], 1);
}
END_TEST

/* A client frame (masked, key 0x11223344) of @op with @p into @out, after a
 * first byte that makes moq_web_ws_parse read @chunk bytes at a time. */
static size_t ws_frame(uint8_t *out, unsigned op, int fin, int mask, const uint8_t *p, size_t n)
{
	static const uint8_t k[4] = {0x11, 0x22, 0x33, 0x44};
	size_t o = moq_ws_header(out, op, n);

	if (!fin)
		out[0] &= 0x7f;
	if (mask) {
		out[1] |= 0x80;
		memcpy(out + o, k, 4);
		o += 4;
	}
	for (size_t i = 0; i < n; i++)
		out[o + i] = mask ? p[i] ^ k[i & 3] : p[i];
	return o + n;
}

START_TEST(ws_framing_dry)
{
	static uint8_t in[70000], rec[20000];
	size_t o, rl = tp_default(rec);

	/* the client's parameters in a masked binary message, read 3 bytes at
	 * a time, then a ping: taken */
	in[0] = 2;
	o = 1 + ws_frame(in + 1, 0x2, 1, 1, rec, rl);
	o += ws_frame(in + o, 0x9, 1, 1, (const uint8_t *)"hi", 2);
	ck_assert_int_eq(moq_web_ws_parse(in, o), 0);
	/* fragmented: two pieces of one message */
	o = 1 + ws_frame(in + 1, 0x2, 0, 1, rec, 5);
	o += ws_frame(in + o, 0x0, 1, 1, rec + 5, rl - 5);
	ck_assert_int_eq(moq_web_ws_parse(in, o), 0);
	/* unmasked from a client, text, a control frame over 125 bytes, a
	 * continuation without a message, a record over 16382 bytes: closed */
	o = 1 + ws_frame(in + 1, 0x2, 1, 0, rec, rl);
	ck_assert_int_eq(moq_web_ws_parse(in, o), MOQ_ERR_PROTO);
	o = 1 + ws_frame(in + 1, 0x1, 1, 1, rec, rl);
	ck_assert_int_eq(moq_web_ws_parse(in, o), MOQ_ERR_PROTO);
	o = 1 + ws_frame(in + 1, 0x9, 1, 1, rec, 126);
	ck_assert_int_eq(moq_web_ws_parse(in, o), MOQ_ERR_PROTO);
	o = 1 + ws_frame(in + 1, 0x0, 1, 1, rec, rl);
	ck_assert_int_eq(moq_web_ws_parse(in, o), MOQ_ERR_PROTO);
	o = 1 + ws_frame(in + 1, 0x2, 1, 1, rec, 16383);
	ck_assert_int_eq(moq_web_ws_parse(in, o), MOQ_ERR_PROTO);
	/* a bad qmux record (no parameters first) */
	o = 1 + ws_frame(in + 1, 0x2, 1, 1, (const uint8_t *)"\x10\x01", 2);
	ck_assert_int_eq(moq_web_ws_parse(in, o), MOQ_ERR_PROTO);
}
END_TEST

/* One query reader: the listener's (web_query_get) and auth's
 * (moq_auth_split_query, what a token is read with) find the same `jwt`
 * in every query; path decoding is strict where form decoding keeps a bad
 * escape (issue 22: one copy, and they agree). */
START_TEST(query_and_decoding_agree)
{
	static const char *const qs[] = {
	        "jwt=abc",
	        "a=1&jwt=x%2By&b=2",
	        "jwt=first&jwt=second",
	        "jwt=first&jwt=",
	        "j%77t=enc",
	        "jwt",
	        "jwt=a+b%zz",
	        "x=1&jwt=%41%42",
	        "&&jwt=q&",
	        "",
	        "jwtx=1&xjwt=2",
	        "jwt=%",
	};
	char a[256], b[256], p[32];
	size_t pl, al;

	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		char in[300];
		int bl;

		snprintf(in, sizeof(in), "room?%s", qs[i]);
		ck_assert_int_eq(moq_auth_split_query(in, strlen(in), &pl, a, sizeof(a), &al), 0);
		bl = web_query_get(qs[i], strlen(qs[i]), "jwt", b, sizeof(b));
		if (al == 0) {
			ck_assert_msg(bl == -1, "%s: web %d", qs[i], bl);
			continue;
		}
		ck_assert_msg(bl == (int)al && memcmp(a, b, al) == 0, "%s: auth %s, web %s", qs[i],
		              a, bl >= 0 ? b : "-");
	}
	ck_assert_int_eq(web_query_get("group=12345678901234567890123456", 31, "group", b, 24),
	                 MOQ_ERR_TOO_LARGE);
	memcpy(p, "a%2Fb+c%41", 11);
	ck_assert_int_eq(web_pct_decode(p, 10, 0), 6);
	ck_assert_mem_eq(p, "a/b+cA", 6);
	memcpy(p, "a%2Fb+c%41", 11);
	ck_assert_int_eq(web_pct_decode(p, 10, 1), 6);
	ck_assert_mem_eq(p, "a/b cA", 6);
	memcpy(p, "a%zz", 5);
	ck_assert_int_eq(web_pct_decode(p, 4, 0), -1);
	ck_assert_int_eq(web_pct_decode(p, 4, 1), 4);
}
END_TEST

START_TEST(ws_helpers)
{
	char acc[29];
	const char *name = NULL;
	uint8_t h[10];
	const char *off =
	        "qmux-02.moq-lite-05, qmux-01.moq-lite-04 ,qmux-01.moq-lite-05,webtransport";

	/* RFC 6455, 1.3's example */
	ck_assert_int_eq(moq_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", 24, acc), 0);
	ck_assert_str_eq(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	/* our preference: lite-05 over -04 whatever the client's order */
	ck_assert_int_eq(moq_ws_select(off, strlen(off), &name), MOQ_LITE_05);
	ck_assert_str_eq(name, "qmux-01.moq-lite-05");
	off = "qmux-01.moq-lite-03, qmux-01.moq-lite-04";
	ck_assert_int_eq(moq_ws_select(off, strlen(off), &name), MOQ_LITE_04);
	/* moq-lite-06 (issue 25) first, as moq-relay */
	off = "qmux-01.moq-lite-05, qmux-01.moq-lite-06";
	ck_assert_int_eq(moq_ws_select(off, strlen(off), &name), MOQ_LITE_06);
	ck_assert_str_eq(name, "qmux-01.moq-lite-06");
	off = "qmux-00.moq-lite-05, webtransport, qmux-01";
	ck_assert_int_eq(moq_ws_select(off, strlen(off), &name), MOQ_ERR_NOTFOUND);
	off = "qmux-01.moq-lite-055";
	ck_assert_int_eq(moq_ws_select(off, strlen(off), &name), MOQ_ERR_NOTFOUND);
	ck_assert_uint_eq(moq_ws_header(h, 2, 125), 2);
	ck_assert_uint_eq(h[0], 0x82);
	ck_assert_uint_eq(h[1], 125);
	ck_assert_uint_eq(moq_ws_header(h, 2, 16382), 4);
	ck_assert_uint_eq(h[1], 126);
	ck_assert_uint_eq((h[2] << 8) | h[3], 16382);
	ck_assert_uint_eq(moq_ws_header(h, 2, 70000), 10);
	ck_assert_uint_eq(h[1], 127);
}
END_TEST

/* The listener's answer to a request, decided from the request alone
 * (web.h, moq_web_req_parse: the code paths of http.c, run dry). */
static int req(const char *r)
{
	return moq_web_req_parse((const uint8_t *)r, strlen(r));
}

#define UPG(proto)                                                                                 \
	"GET /room?jwt=x HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"     \
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" proto       \
	"\r\n"

START_TEST(http_requests)
{
	static char big[20000];

	ck_assert_int_eq(req("GET /health HTTP/1.1\r\nHost: h\r\n\r\n"), 200);
	ck_assert_int_eq(req("GET /certificate.sha256 HTTP/1.1\r\n\r\n"), 200);
	ck_assert_int_eq(req("GET /health HTTP/1.1\r\nHost: h\r\n"), 0); /* incomplete */
	ck_assert_int_eq(req("POST /health HTTP/1.1\r\nContent-Length: 0\r\n\r\n"), 405);
	ck_assert_int_eq(req("GET /nothing HTTP/1.1\r\n\r\n"), 404);
	ck_assert_int_eq(req("BLAH\r\n\r\n"), 400);
	ck_assert_int_eq(req("GET /announced/a%2 HTTP/1.1\r\n\r\n"), 400);
	ck_assert_int_eq(req("GET /announced/demo HTTP/1.1\r\n\r\n"), 200);
	ck_assert_int_eq(req("GET /fetch/demo/bbb/video?group=latest HTTP/1.1\r\n\r\n"), 200);
	ck_assert_int_eq(req("GET /fetch/demo/bbb/video?group=12 HTTP/1.1\r\n\r\n"), 200);
	ck_assert_int_eq(req("GET /fetch/demo/bbb/video?group=-1 HTTP/1.1\r\n\r\n"), 400);
	ck_assert_int_eq(req("GET /fetch/video HTTP/1.1\r\n\r\n"), 400);
	ck_assert_int_eq(req("GET /fetch//video HTTP/1.1\r\n\r\n"), 400);
	/* the upgrade: our preference among what is offered, 400 for none */
	ck_assert_int_eq(
	        req(UPG("Sec-WebSocket-Protocol: qmux-02.moq-lite-05, qmux-01.moq-lite-05\r\n")),
	        101);
	ck_assert_int_eq(req(UPG("Sec-WebSocket-Protocol: webtransport\r\n"
	                         "Sec-WebSocket-Protocol: qmux-01.moq-lite-03\r\n")),
	                 101);
	ck_assert_int_eq(req(UPG("Sec-WebSocket-Protocol: qmux-00.moq-lite-05, webtransport\r\n")),
	                 400);
	ck_assert_int_eq(req(UPG("")), 400);
	ck_assert_int_eq(req("GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
	                     "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: "
	                     "qmux-01.moq-lite-05\r\n\r\n"),
	                 400); /* no key */
	/* bounds: a long target 414, long headers 431 */
	memset(big, 'a', sizeof(big) - 1);
	{
		char r[30000];

		snprintf(r, sizeof(r), "GET /%.*s HTTP/1.1\r\n\r\n", 3000, big);
		ck_assert_int_eq(req(r), 414);
		snprintf(r, sizeof(r), "GET / HTTP/1.1\r\nX-A: %.*s\r\n\r\n", 12000, big);
		ck_assert_int_eq(req(r), 431);
	}
}
END_TEST

Suite *web_qmux_suite(void);

Suite *web_qmux_suite(void)
{
	Suite *s = suite_create("web_qmux");
	TCase *t = tcase_create("qmux");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, params_first_and_parsed);
	tcase_add_test(t, stream_both_ways_and_acked);
	tcase_add_test(t, flow_control_stream_and_conn);
	tcase_add_test(t, flow_control_violation_closes);
	tcase_add_test(t, stream_count_limits);
	tcase_add_test(t, stream_limit_violation_closes);
	tcase_add_test(t, reset_and_stop_sending);
	tcase_add_test(t, every_frame_type_accepted);
	tcase_add_test(t, bad_input_closes);
	tcase_add_test(t, idle_timeout_and_ping);
	tcase_add_test(t, app_close_goes_out_last);
	tcase_add_test(t, record_bounded_with_huge_peer_record_size);
	tcase_add_test(t, record_header_never_overfills);
	tcase_add_test(t, ws_framing_dry);
	tcase_add_test(t, query_and_decoding_agree);
	tcase_add_test(t, ws_helpers);
	tcase_add_test(t, http_requests);
	suite_add_tcase(s, t);
	return s;
}
