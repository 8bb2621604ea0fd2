/* SPDX-License-Identifier: MIT */
/*
 * fuzz_moq_announce.c: libFuzzer target for a relay's announce and hop
 * handling (issue 22): the origin table, broadcast ownership, failover and
 * rerouting, loop prevention and the 32-hop bound. A relay node serves up
 * to four sessions on an in-memory binding (moq.h, Bindings: no QUIC, so a
 * run is a few microseconds); the input is a program of operations: open a
 * session (lite-03/04/05), announce a broadcast on the relay's announce
 * request with a chain of hops (short ids that collide, the relay's own id,
 * up to 32), open an announce request with a prefix and an excluded hop,
 * end an announce stream, close a session, write raw bytes on the announce
 * stream, or let time pass (linger). After every input all sessions close
 * and the linger passes: the relay must hold no broadcast, no session and
 * no route count, whatever happened.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NSESS     4
#define RELAY_HOP 1000 /* the relay's hop id: chains holding it are loops */
#define SEC       1000000000ull

struct fsess {
	struct moq_session *s;
	int64_t next_bidi; /* the client's next bidi stream (0, 4, ...) */
	int64_t next_srv;  /* the relay's next stream ids it opens */
	int64_t next_uni;
	int closing; /* the session asked to close: moq_binding_closed due */
	uint64_t code;
	enum moq_version v;
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

	if (bidi) {
		*sid = f->next_srv;
		f->next_srv += 4;
	} else {
		*sid = f->next_uni;
		f->next_uni += 4;
	}
	return 0;
}

/* Everything is taken; nothing is acknowledged (the session keeps its
 * bytes until it closes at the end of the input). */
static long b_write(void *b, int64_t sid, const struct iovec *iov, size_t n, int fin)
{
	size_t len = 0;

	(void)b;
	(void)sid;
	(void)fin;
	for (size_t i = 0; i < n; i++)
		len += iov[i].iov_len;
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

	f->closing = 1; /* moq_binding_closed after the current call */
	f->code = code;
}

static const struct moq_binding_ops ops = {
        .stream_open = b_open,
        .stream_write = b_write,
        .stream_reset = b_reset,
        .stream_stop_sending = b_reset,
        .close = b_close,
};

static void init(void)
{
	struct moq_cache_cfg cc = {0};
	struct moq_node_cfg nc = {0};

	moq_cache_counting_init(&F.cnt);
	cc.alloc = moq_cache_counting_alloc(&F.cnt);
	F.cache = moq_cache_create(&cc);
	check(F.cache != NULL);
	nc.cache = F.cache;
	nc.relay = 1;
	nc.origin = RELAY_HOP;
	nc.max_session_broadcasts = 6; /* bounds are reached */
	nc.max_broadcasts = 12;
	nc.max_announces = 3;
	F.relay = moq_node_create(&nc);
	check(F.relay != NULL);
	F.now = SEC;
}

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

static void sess_close(struct fsess *f)
{
	struct moq_session *s = f->s;

	if (!s)
		return;
	f->s = NULL;
	moq_binding_closed(s, 0, 0);
}

/* The broadcast names a program picks from: nested so prefixes overlap. */
static const char *const names[] = {"a", "a/b", "a/b/c", "b", "a/c", "b/a/c", "c", ""};

/* One operation from @p (at most @n bytes); the bytes it used. */
static size_t op(const uint8_t *p, size_t n)
{
	uint8_t c = p[0];
	struct fsess *f = &F.fs[(c >> 4) & (NSESS - 1)];
	struct moq_msg m;
	uint8_t buf[1024];
	size_t used = 1;
	int len;

	memset(&m, 0, sizeof(m));
	switch (c & 0x7) {
	case 0: /* a session: lite-03, 04 or 05 (with its SETUP) */
		if (f->s || n < 2)
			return used;
		memset(f, 0, sizeof(*f));
		f->next_srv = 1;
		f->next_uni = 3;
		f->v = (enum moq_version)(MOQ_LITE_03 + p[1] % 3);
		f->s = moq_binding_accept(F.relay, &ops, f, f->v, "/", 1);
		if (f->s && f->v == MOQ_LITE_05) {
			m.type = MOQ_MSG_SETUP;
			m.u.setup.has_role = true;
			m.u.setup.role = MOQ_ROLE_BOTH;
			m.u.setup.has_origin = true;
			m.u.setup.origin = 1 + p[1] % 7;
			buf[0] = MOQ_STREAM_SETUP;
			len = moq_msg_encode(buf + 1, sizeof(buf) - 1, f->v, &m);
			if (len > 0)
				moq_binding_stream_data(f->s, 2, buf, (size_t)len + 1, 0);
		}
		return 2;
	case 1: { /* ANNOUNCE on the relay's request (its first bidi: 1) */
		uint32_t nh;

		if (!f->s || n < 3)
			return used;
		nh = p[2] % 34;
		if (nh > MOQ_MAX_HOPS)
			nh = MOQ_MAX_HOPS;
		used = 3 + nh;
		if (used > n)
			return n;
		m.type = MOQ_MSG_ANNOUNCE;
		m.u.announce.status = p[1] & 1 ? MOQ_ANNOUNCE_ENDED : MOQ_ANNOUNCE_ACTIVE;
		m.u.announce.suffix.p = names[(p[1] >> 1) & 7];
		m.u.announce.suffix.len = strlen(m.u.announce.suffix.p);
		m.u.announce.hop_count = nh;
		for (uint32_t i = 0; i < nh; i++) /* 0: unknown; 9: the relay */
			m.u.announce.hops[i] = p[3 + i] % 10 == 9 ? RELAY_HOP : p[3 + i] % 10;
		if (f->v == MOQ_LITE_03) /* only the count */
			memset(m.u.announce.hops, 0, sizeof(m.u.announce.hops));
		len = moq_msg_encode(buf, sizeof(buf), f->v, &m);
		if (len > 0)
			moq_binding_stream_data(f->s, 1, buf, (size_t)len, 0);
		return used;
	}
	case 2: /* an announce request: prefix, excluded hop */
		if (!f->s || n < 2)
			return used;
		m.type = MOQ_MSG_ANNOUNCE_REQ;
		m.u.announce_req.prefix.p = names[p[1] & 7];
		m.u.announce_req.prefix.len = strlen(m.u.announce_req.prefix.p);
		m.u.announce_req.exclude_hop = (p[1] >> 3) % 10;
		buf[0] = MOQ_STREAM_ANNOUNCE;
		len = moq_msg_encode(buf + 1, sizeof(buf) - 1, f->v, &m);
		if (len > 0) {
			moq_binding_stream_data(f->s, f->next_bidi, buf, (size_t)len + 1, 0);
			f->next_bidi += 4;
		}
		return 2;
	case 3: /* the relay's announce stream ends (FIN) or is reset */
		if (f->s) {
			if (c & 8)
				moq_binding_stream_reset(f->s, 1, 0);
			else
				moq_binding_stream_data(f->s, 1, NULL, 0, 1);
		}
		return used;
	case 4: /* the session goes away */
		sess_close(f);
		return used;
	case 5: { /* raw bytes on the announce stream: the decoder's input */
		size_t k = n > 1 ? 1 + p[1] % 64 : 0;

		if (k + 2 > n)
			k = n > 2 ? n - 2 : 0;
		if (f->s && k)
			moq_binding_stream_data(f->s, 1, p + 2, k, 0);
		return 2 + k > n ? n : 2 + k;
	}
	case 6: /* time passes (the linger is 5 s) */
		F.now += (uint64_t)(c >> 3) * SEC / 2;
		moq_node_poll(F.relay, F.now);
		return used;
	default: /* the client ends one of its announce requests */
		if (f->s && f->next_bidi)
			moq_binding_stream_data(f->s, f->next_bidi - 4, NULL, 0, 1);
		return used;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct moq_node_stats st;
	size_t off = 0;

	if (!F.relay)
		init();
	while (off < size && off < 4096) {
		off += op(data + off, size - off);
		flush();
	}
	for (int i = 0; i < NSESS; i++)
		sess_close(&F.fs[i]);
	F.now += 10 * SEC; /* past every linger */
	moq_node_poll(F.relay, F.now);
	moq_node_stats(F.relay, &st);
	check(st.sessions == 0);
	check(st.broadcasts == 0);
	return 0;
}
