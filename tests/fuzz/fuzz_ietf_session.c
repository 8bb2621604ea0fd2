/* SPDX-License-Identifier: MIT */
/*
 * fuzz_ietf_session.c: libFuzzer target for IETF moq-transport sessions
 * (moq/ietf_session.c, drafts 14-20) on a relay node, over an in-memory
 * binding (no QUIC). The input is a program: open a session of a draft,
 * give it a valid SETUP, write raw bytes on a stream (the client's bidi or
 * uni streams, or the relay's), a valid PUBLISH_NAMESPACE / SUBSCRIBE /
 * SUBSCRIBE_NAMESPACE / FETCH / PUBLISH / subgroup stream / OBJECT
 * datagram (or raw datagram bytes), end or reset a stream, acknowledge
 * what the relay wrote, close a session, poll. After every input all
 * sessions close: the node must hold no session and no broadcast.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ietf_codec.h"
#include "ietf_session.h"
#include "moq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NSESS 2
#define SEC   1000000000ull

struct fsess {
	struct moq_session *s;
	int d;
	int64_t next_srv, next_uni;
	uint64_t next_req;
	uint64_t written[64]; /* bytes the relay wrote per small stream id */
	int closing;
	uint64_t code;
	uint64_t dgrams_out;
};

static struct {
	struct moq_cache_counting cnt;
	struct moq_cache *cache;
	struct moq_node *relay;
	struct fsess fs[NSESS];
	uint64_t now;
} F;

static void check(int c)
{
	if (!c)
		abort();
}

static int b_open(void *b, int bidi, int64_t *sid)
{
	struct fsess *f = b;

	*sid = bidi ? f->next_srv : f->next_uni;
	if (bidi)
		f->next_srv += 4;
	else
		f->next_uni += 4;
	return 0;
}

static long b_write(void *b, int64_t sid, const struct iovec *iov, size_t n, int fin)
{
	struct fsess *f = b;
	size_t len = 0;

	(void)fin;
	for (size_t i = 0; i < n; i++)
		len += iov[i].iov_len;
	if (sid >= 0 && sid < 64)
		f->written[sid] += len;
	return (long)len;
}

static int b_reset(void *b, int64_t sid, uint64_t code)
{
	(void)b;
	(void)sid;
	(void)code;
	return 0;
}

static void b_close(void *b, uint64_t code)
{
	struct fsess *f = b;

	f->closing = 1;
	f->code = code;
}

/* The relay's OBJECT datagrams: counted, the payload released at once. */
static int b_dgram(void *b, const uint8_t *hdr, size_t hdrlen, const struct iovec *iov,
                   size_t iovcnt, void (*release)(void *arg), void *arg)
{
	struct fsess *f = b;

	(void)hdr;
	(void)iov;
	(void)iovcnt;
	check(hdrlen > 0);
	f->dgrams_out++;
	if (release)
		release(arg);
	return 0;
}

static const struct moq_binding_ops ops = {
        .dgram_send = b_dgram,
        .stream_open = b_open,
        .stream_write = b_write,
        .stream_reset = b_reset,
        .stream_stop_sending = b_reset,
        .close = b_close,
};

static void flush(void)
{
	for (int i = 0; i < NSESS; i++) {
		struct fsess *f = &F.fs[i];
		if (f->s && f->closing) {
			struct moq_session *s = f->s;
			f->s = NULL;
			moq_binding_closed(s, f->code, 1);
		}
	}
}

static void send_msg(struct fsess *f, int64_t sid, struct moq_ietf_msg *m)
{
	uint8_t buf[1024];
	int n = moq_ietf_msg_encode(buf, sizeof(buf), f->d, m);

	if (n > 0)
		moq_binding_stream_data(f->s, sid, buf, (size_t)n, 0);
}

/* A request's stream: the control stream (14-16), else a new client bidi. */
static int64_t req_sid(struct fsess *f, uint8_t pick)
{
	return f->d <= 16 ? 0 : 4 * (1 + (pick % 8));
}

static size_t op(const uint8_t *p, size_t n)
{
	struct fsess *f = &F.fs[(p[0] >> 4) & (NSESS - 1)];
	struct moq_ietf_msg m;
	size_t used = 1;

	memset(&m, 0, sizeof(m));
	switch (p[0] & 0x7) {
	case 0: /* a session of draft 14..20 */
		if (f->s || n < 2)
			return used;
		memset(f, 0, sizeof(*f));
		f->next_srv = 1;
		f->next_uni = 3;
		f->d = MOQ_IETF_14 + p[1] % 7;
		f->s = moq_binding_accept(F.relay, &ops, f, MOQ_VERSION_IETF(f->d), "/", 1);
		return 2;
	case 1: /* a valid SETUP */
		if (!f->s)
			return used;
		m.kind = f->d <= 16 ? IETF_CLIENT_SETUP : IETF_SETUP;
		m.versions_n = 1;
		m.versions[0] = MOQ_IETF_VERSION(f->d);
		moq_ietf_param_add(&m.params, IETF_OPT_MAX_REQUEST_ID, 100, (struct moq_str){0});
		send_msg(f, f->d <= 16 ? 0 : 2, &m);
		return used;
	case 2: { /* raw bytes on a stream */
		size_t len;
		int64_t sid;
		if (!f->s || n < 3)
			return n;
		sid = p[1] % 24;
		len = p[2] % 64;
		if (3 + len > n)
			len = n - 3;
		moq_binding_stream_data(f->s, sid, p + 3, len, (p[1] & 0x80) != 0);
		return 3 + len;
	}
	case 3: /* FIN or reset a stream, or STOP_SENDING */
		if (!f->s || n < 2)
			return n;
		if (p[1] & 0x40)
			moq_binding_stream_reset(f->s, p[1] % 24, p[1] >> 6);
		else if (p[1] & 0x20)
			moq_binding_stream_stop_sending(f->s, p[1] % 24, 0);
		else
			moq_binding_stream_data(f->s, p[1] % 24, NULL, 0, 1);
		return 2;
	case 4: /* acknowledge what the relay wrote on a stream, or close it */
		if (!f->s || n < 2)
			return n;
		if (p[1] & 0x80)
			moq_binding_stream_closed(f->s, p[1] % 24);
		else
			moq_binding_stream_acked(f->s, p[1] % 24, f->written[p[1] % 24]);
		return 2;
	case 5: /* a valid request */
		if (!f->s || n < 2)
			return n;
		m.request_id = (p[1] & 0x80) ? (uint64_t)(p[1] & 7) : f->next_req;
		f->next_req += 2;
		m.ns_n = 2;
		m.ns[0] = (struct moq_str){"a", 1};
		m.ns[1] = (struct moq_str){p[1] & 1 ? "b" : "c", 1};
		m.name = (struct moq_str){"t", 1};
		m.forward = 1;
		m.filter.kind = IETF_F_NEXT_OBJECT;
		m.kind = (p[1] >> 1) % 5 == 0   ? IETF_PUBLISH_NAMESPACE
		         : (p[1] >> 1) % 5 == 1 ? IETF_SUBSCRIBE
		         : (p[1] >> 1) % 5 == 2 ? IETF_SUBSCRIBE_NAMESPACE
		         : (p[1] >> 1) % 5 == 3 ? IETF_FETCH
		                                : IETF_PUBLISH;
		/* PUBLISH: alias 0..3, as the subgroup streams and datagrams */
		m.track_alias = (p[1] >> 5) & 3;
		/* FETCH: standalone or joining (14-19), a range in the filter (20) */
		m.fetch_type = 1 + (p[1] >> 3) % 3;
		m.joining_id = (p[1] >> 4) & 6;
		m.joining_start = p[1] & 3;
		m.end.group = p[1] & 7;
		m.filter.kind = (p[1] & 0x40) ? IETF_F_ABSOLUTE : IETF_F_NEXT_OBJECT;
		m.filter.has_end = (p[1] & 0x20) != 0;
		m.filter.end_group = p[1] & 15;
		if (m.kind == IETF_SUBSCRIBE_NAMESPACE)
			m.ns_n = 1;
		send_msg(f, req_sid(f, p[1] >> 3), &m);
		return 2;
	case 6: { /* a subgroup stream: header and objects of alias 1 (the relay's
	           * first SUBSCRIBE's request id); with bit 3 an OBJECT
	           * datagram (valid, alias 0..3, object 0 or 1; or raw bytes) */
		struct moq_ietf_subgroup_hdr h = {0};
		uint8_t buf[256];
		int k;
		if (!f->s || n < 2)
			return n;
		if (p[0] & 8) {
			struct moq_ietf_datagram dg = {0};
			if (p[1] & 0x80) { /* raw */
				size_t len = p[1] & 31;
				if (2 + len > n)
					len = n - 2;
				moq_binding_datagram(f->s, p + 2, len);
				return 2 + len;
			}
			dg.track_alias = p[1] & 3;
			dg.group = (p[1] >> 2) & 7;
			dg.has_object_id = (p[1] & 0x20) != 0;
			dg.object = (p[1] >> 6) & 1;
			dg.has_priority = true;
			dg.end_of_group = (p[1] & 1) != 0;
			dg.payload = (const uint8_t *)"xy";
			dg.payload_len = 2;
			k = moq_ietf_datagram_encode(buf, sizeof(buf), f->d, &dg);
			if (k > 0)
				moq_binding_datagram(f->s, buf, (size_t)k);
			return 2;
		}
		h.has_priority = true;
		h.track_alias = p[1] & 3;
		h.group = p[1] >> 2;
		h.first_object = true;
		k = moq_ietf_subgroup_hdr_encode(buf, sizeof(buf), f->d, &h);
		for (int o = 0; o < 3 && k > 0; o++) {
			struct moq_ietf_object ob = {0};
			ob.payload_len = (size_t)o;
			ob.status = o == 0 ? IETF_OBJ_NORMAL : 0;
			k += moq_ietf_object_encode_head(buf + k, sizeof(buf) - (size_t)k, f->d,
			                                 false, &ob);
			memset(buf + k, 'x', (size_t)o);
			k += o;
		}
		if (k > 0)
			moq_binding_stream_data(f->s, 2 + 4 * (1 + (p[1] & 7)), buf, (size_t)k,
			                        p[1] & 1);
		return 2;
	}
	default: /* time passes; or the session goes */
		if (p[0] & 8) {
			if (f->s) {
				struct moq_session *s = f->s;
				f->s = NULL;
				moq_binding_closed(s, 0, 0);
			}
		} else {
			F.now += SEC / 10;
			moq_node_poll(F.relay, F.now);
		}
		return used;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct moq_cache_cfg cc = {0};
	struct moq_node_cfg nc = {0};
	struct moq_node_stats st;
	size_t i = 0;

	memset(&F, 0, sizeof(F));
	moq_cache_counting_init(&F.cnt);
	cc.alloc = moq_cache_counting_alloc(&F.cnt);
	F.cache = moq_cache_create(&cc);
	check(F.cache != NULL);
	nc.cache = F.cache;
	nc.relay = 1;
	nc.origin = 1000;
	F.relay = moq_node_create(&nc);
	check(F.relay != NULL);
	F.now = SEC;
	while (i < size) {
		i += op(data + i, size - i);
		flush();
	}
	for (int k = 0; k < NSESS; k++) {
		struct fsess *f = &F.fs[k];
		if (f->s) {
			struct moq_session *s = f->s;
			f->s = NULL;
			moq_binding_closed(s, 0, 1);
		}
	}
	F.now += 60 * SEC; /* past the linger */
	moq_node_poll(F.relay, F.now);
	moq_node_stats(F.relay, &st);
	check(st.sessions == 0);
	moq_node_destroy(F.relay);
	moq_cache_destroy(F.cache);
	return 0;
}
