/* SPDX-License-Identifier: MIT */
/*
 * fuzz_moq_session.c: libFuzzer target for a relay's session input. A
 * relay, a publisher (a track of live frames) and a fuzzing client run over
 * real QUIC on the in-memory link; each input is written by the client on a
 * new stream (first byte: bidi / uni, FIN, and which prefix to put before the
 * fuzz bytes: none, a stream type, or a valid SUBSCRIBE first). Whatever the
 * bytes, the relay must survive, close at most the fuzzing session, and keep
 * serving the publisher.
 * Built with -DFUZZ_LITE06 (fuzz_lite06_session) both endpoints offer
 * moq_node_alpns_all, so every session is moq-lite-06 (lite06.c).
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moq.h"
#include "link.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MS 1000000ull

static struct {
	struct moq_cache_counting rc, pc;
	struct moq_cache *rcache, *pcache;
	struct moq_node *relay, *client;
	struct moq_quic_endpoint *rep, *cep;
	struct moq_quic_link *lnk;
	struct moq_quic_addr raddr;
	struct moq_session *pub, *fz;
	struct moq_cache_track *t;
	uint64_t seq, frames;
	uint16_t port;
	int ready;
} F;

static void check(int c)
{
	if (!c)
		abort();
}

static struct moq_quic_addr addr4(const char *ip, uint16_t port)
{
	struct moq_quic_addr a;

	moq_quic_addr_ip4(ip, port, &a);
	return a;
}

static void cb_closed(struct moq_session *s, void *user, uint64_t code, int local)
{
	(void)user;
	(void)code;
	(void)local;
	if (s == F.fz)
		F.fz = NULL;
	if (s == F.pub)
		abort(); /* the relay must never close the publisher */
}

static const struct moq_node_callbacks cbs = {.session_closed = cb_closed};

static uint64_t now(void)
{
	return moq_quic_link_now(F.lnk);
}

static void step(uint64_t dt)
{
	uint64_t end = now() + dt;

	while (now() < end) {
		/* the publisher: a one-frame group every step */
		struct moq_cache_group *g;
		uint8_t buf[300];

		memset(buf, (int)F.frames, sizeof(buf));
		if (moq_cache_group_open(F.t, F.seq++, now(), &g) == 0) {
			moq_cache_write_frame(g, (int64_t)F.frames, buf, sizeof(buf));
			moq_cache_group_finish(g);
			moq_cache_group_unref(g);
		}
		F.frames++;
		moq_node_poll(F.client, now());
		moq_node_poll(F.relay, now());
		moq_quic_link_run(F.lnk, NULL, NULL, 2 * MS);
	}
}

static struct moq_session *connect_one(int role)
{
	struct moq_quic_addr la = addr4("10.0.0.1", F.port++);
	struct moq_session *s =
	        moq_node_connect(F.client, F.cep, &la, &F.raddr, NULL, role, NULL, now(), NULL);

	check(s != NULL);
	for (int i = 0; i < 500 && !moq_session_ready(s); i++)
		step(2 * MS);
	check(moq_session_ready(s));
	return s;
}

static void init(void)
{
	struct moq_cache_cfg cc = {0};
	struct moq_node_cfg nc = {0};
	struct moq_quic_config q = {0};
	struct moq_quic_link_config lc = {0};
	size_t nalpn;

	moq_cache_counting_init(&F.rc);
	moq_cache_counting_init(&F.pc);
	cc.alloc = moq_cache_counting_alloc(&F.rc);
	cc.budget = 1 << 20;
	F.rcache = moq_cache_create(&cc);
	cc.alloc = moq_cache_counting_alloc(&F.pc);
	F.pcache = moq_cache_create(&cc);
	nc.cache = F.rcache;
	nc.relay = 1;
	nc.origin = 1000;
	F.relay = moq_node_create(&nc);
	nc.cache = F.pcache;
	nc.relay = 0;
	nc.origin = 2000;
	nc.cb = &cbs;
	F.client = moq_node_create(&nc);
	q.role = MOQ_QUIC_SERVER;
#ifdef FUZZ_LITE06
	q.alpn = moq_node_alpns_all(&nalpn);
#else
	q.alpn = moq_node_alpns(&nalpn);
#endif
	q.alpn_count = nalpn;
	q.retry = MOQ_QUIC_RETRY_NEVER;
	q.max_conns_per_addr = 100000;
	q.max_conns = 100000;
	q.cb = moq_node_quic_callbacks();
	q.user = F.relay;
	F.rep = moq_quic_endpoint_new(&q, NULL);
	q.role = MOQ_QUIC_CLIENT;
	q.worker_id = 2;
	q.user = F.client;
	F.cep = moq_quic_endpoint_new(&q, NULL);
	lc.dir[0].delay_ns = lc.dir[1].delay_ns = 1 * MS;
	F.lnk = moq_quic_link_new(&lc, F.cep, F.rep);
	check(F.relay && F.client && F.rep && F.cep && F.lnk);
	F.raddr = addr4("10.0.0.2", 4443);
	F.port = 1024;
	check(moq_cache_track_create(F.pcache, "live/room", 9, "video", 5, NULL, &F.t) == 0);
	check(moq_node_publish(F.client, "live/room", 9, 1000) == 0);
	F.pub = connect_one(MOQ_ROLE_PUBLISHER);
	step(20 * MS);
	F.ready = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
#ifdef FUZZ_LITE06
	/* lite-06 SUBSCRIBE { 5, "live/room", "video", 1, max age 0, groups
	 * 0 0, frames 0 0 } */
	static const uint8_t sub[] = {0x02, 0x17, 0x05, 0x09, 'l',  'i',  'v', 'e', '/',
	                              'r',  'o',  'o',  'm',  0x05, 'v',  'i', 'd', 'e',
	                              'o',  0x01, 0x00, 0x00, 0x00, 0x00, 0x00};
#else
	static const uint8_t sub[] = {0x02, 0x16, 0x05, 0x09, 'l',  'i',  'v',  'e',
	                              '/',  'r',  'o',  'o',  'm',  0x05, 'v',  'i',
	                              'd',  'e',  'o',  0x01, 0x00, 0x00, 0x00, 0x00};
#endif
	uint8_t buf[4096 + sizeof(sub) + 1];
	size_t len = 0;
	uint8_t ctl;
	int bidi, fin;

	if (!F.ready)
		init();
	if (size < 1 || size > 4096)
		return 0;
	ctl = data[0];
	bidi = ctl & 1;
	fin = (ctl >> 1) & 1;
	switch ((ctl >> 2) & 3) {
	case 1: /* a stream type from the first byte's top bits */
		buf[len++] = (uint8_t)(ctl >> 4);
		break;
	case 2: /* a valid SUBSCRIBE, then the fuzz bytes (updates) */
		memcpy(buf, sub, sizeof(sub));
		len = sizeof(sub);
		bidi = 1;
		break;
	default:
		break;
	}
	memcpy(buf + len, data + 1, size - 1);
	len += size - 1;
	if (!F.fz)
		F.fz = connect_one(MOQ_ROLE_SUBSCRIBER);
	moq_session_write_raw(F.fz, bidi, buf, len, fin);
	step(10 * MS);
	/* The publisher's session is untouched (cb_closed aborts otherwise). */
	check(moq_session_ready(F.pub));
	return 0;
}
