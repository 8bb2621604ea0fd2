/* SPDX-License-Identifier: MIT */
/*
 * test_moq_threads.c: two relay workers on two threads, joined by a hub and
 * sharing one cache, as the relay program runs them. Worker 1 (thread 1)
 * has the publisher; worker 2 (thread 2) the subscribers, which must get
 * every byte of the groups they receive while worker 1 ingests. Each thread
 * owns its endpoints, its in-memory link and its nodes; only the cache and
 * the hub are shared. Also built with ThreadSanitizer when available.
 */
#include <check.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "moq.h"
#include "link.h"

#define MS          1000000ull
#define NSUBS       4
#define WANT_GROUPS 12

static struct moq_cache_counting rcnt;
static struct moq_cache *rcache;
static struct moq_hub *hub;
static atomic_int done, announced;
/* Each worker's virtual clock: a worker waits (real time) while it is more
 * than 50 ms ahead of the other, so the two clocks stay close. Once the
 * broadcast is announced, the publisher also waits for the subscribers'
 * worker to start: otherwise, with that thread descheduled, it could spend
 * all its steps (and groups) before anyone subscribed. */
static _Atomic uint64_t vclock[2];

static void pace(int id, uint64_t now)
{
	atomic_store(&vclock[id], now);
	while (!atomic_load(&done) && (atomic_load(&vclock[!id]) || atomic_load(&announced)) &&
	       now > atomic_load(&vclock[!id]) + 50 * MS) {
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
}

static struct moq_quic_addr addr4(const char *ip, uint16_t port)
{
	struct moq_quic_addr a;

	moq_quic_addr_ip4(ip, port, &a);
	return a;
}

/* One worker: a relay node and endpoint, a client node and endpoint, a link. */
struct worker {
	int id;
	struct moq_node *relay, *client;
	struct moq_quic_endpoint *rep, *cep;
	struct moq_quic_link *lnk;
	struct moq_cache_counting pcnt;
	struct moq_cache *pcache; /* the publisher's own (worker 1) */
	/* subscribers (worker 2) */
	struct moq_session *subs[NSUBS];
	uint64_t complete[NSUBS], errors[NSUBS], bytes[NSUBS];
	uint64_t oseq[NSUBS][256], off[NSUBS][256]; /* per group in flight */
	int ready;
};

static uint8_t pat(uint64_t seq, uint64_t off)
{
	return (uint8_t)(seq * 13 + off);
}

static int sub_index(struct worker *w, struct moq_session *s)
{
	for (int i = 0; i < NSUBS; i++)
		if (w->subs[i] == s)
			return i;
	return -1;
}

static void cb_ready(struct moq_session *s, void *user)
{
	(void)s;
	((struct worker *)user)->ready++;
}

/* One frame per group in this test: check its bytes as they arrive. */
static void cb_group_begin(struct moq_session *s, void *user, uint64_t id, uint64_t seq)
{
	struct worker *w = user;
	int i = sub_index(w, s);

	(void)id;
	if (i >= 0) {
		w->oseq[i][seq % 256] = seq;
		w->off[i][seq % 256] = 0;
	}
}

static void cb_frame_data(struct moq_session *s, void *user, uint64_t id, uint64_t seq,
                          const uint8_t *data, size_t len)
{
	struct worker *w = user;
	int i = sub_index(w, s);

	(void)id;
	if (i < 0)
		return;
	if (w->oseq[i][seq % 256] != seq) {
		w->errors[i]++;
		return;
	}
	for (size_t k = 0; k < len; k++)
		if (data[k] != pat(seq, w->off[i][seq % 256] + k))
			w->errors[i]++;
	w->off[i][seq % 256] += len;
	w->bytes[i] += len;
}

static void cb_group_end(struct moq_session *s, void *user, uint64_t id, uint64_t seq, int64_t code)
{
	struct worker *w = user;
	int i = sub_index(w, s);

	(void)id;
	(void)seq;
	if (i >= 0 && code < 0)
		w->complete[i]++;
}

static const struct moq_node_callbacks cbs = {
        .session_ready = cb_ready,
        .group_begin = cb_group_begin,
        .frame_data = cb_frame_data,
        .group_end = cb_group_end,
};

static void worker_init(struct worker *w, int id)
{
	struct moq_node_cfg nc = {0};
	struct moq_quic_config q = {0};
	struct moq_quic_link_config lc = {0};
	size_t nalpn;

	memset(w, 0, sizeof(*w));
	w->id = id;
	nc.cache = rcache;
	nc.cache_reader = (unsigned)id;
	nc.relay = 1;
	nc.hub = hub;
	w->relay = moq_node_create(&nc);
	ck_assert_ptr_nonnull(w->relay);
	memset(&nc, 0, sizeof(nc));
	if (id == 0) {
		struct moq_cache_cfg cc = {0};
		moq_cache_counting_init(&w->pcnt);
		cc.alloc = moq_cache_counting_alloc(&w->pcnt);
		w->pcache = moq_cache_create(&cc);
		ck_assert_ptr_nonnull(w->pcache);
		nc.cache = w->pcache;
	}
	nc.origin = 5000 + (uint64_t)id;
	nc.cb = &cbs;
	nc.user = w;
	w->client = moq_node_create(&nc);
	ck_assert_ptr_nonnull(w->client);
	q.role = MOQ_QUIC_SERVER;
	q.worker_id = (uint8_t)(1 + id);
	q.alpn = moq_node_alpns(&nalpn);
	q.alpn_count = nalpn;
	q.retry = MOQ_QUIC_RETRY_NEVER;
	q.cb = moq_node_quic_callbacks();
	q.user = w->relay;
	w->rep = moq_quic_endpoint_new(&q, NULL);
	q.role = MOQ_QUIC_CLIENT;
	q.worker_id = (uint8_t)(10 + id);
	q.user = w->client;
	w->cep = moq_quic_endpoint_new(&q, NULL);
	ck_assert(w->rep && w->cep);
	lc.dir[0].delay_ns = lc.dir[1].delay_ns = 1 * MS;
	lc.seed = (uint64_t)id + 1;
	w->lnk = moq_quic_link_new(&lc, w->cep, w->rep);
	ck_assert_ptr_nonnull(w->lnk);
}

static void worker_fini(struct worker *w)
{
	moq_quic_endpoint_free(w->cep);
	moq_quic_endpoint_free(w->rep);
	moq_quic_link_free(w->lnk);
	moq_node_destroy(w->client);
	moq_node_destroy(w->relay);
	moq_cache_destroy(w->pcache);
}

static void worker_step(struct worker *w)
{
	uint64_t now = moq_quic_link_now(w->lnk);

	pace(w->id, now);
	moq_node_poll(w->client, now);
	moq_node_poll(w->relay, now);
	moq_quic_link_run(w->lnk, NULL, NULL, 2 * MS);
}

static struct moq_session *worker_connect(struct worker *w, int role, uint16_t port)
{
	struct moq_quic_addr la = addr4("10.0.0.1", port);
	struct moq_quic_addr ra = addr4("10.0.0.2", 4443);

	return moq_node_connect(w->client, w->cep, &la, &ra, NULL, role, NULL,
	                        moq_quic_link_now(w->lnk), NULL);
}

/* Worker 1: the publisher, one 3000-byte frame per group every 20 ms. */
static void *thread_pub(void *arg)
{
	struct worker *w = arg;
	struct moq_cache_track *t;
	uint64_t seq = 0, next = 0, steps = 0;
	struct moq_node_stats st;

	ck_assert_int_eq(moq_cache_track_create(w->pcache, "t/b", 3, "v", 1, NULL, &t), 0);
	ck_assert_int_eq(moq_node_publish(w->client, "t/b", 3, 1000), 0);
	ck_assert_ptr_nonnull(worker_connect(w, MOQ_ROLE_PUBLISHER, 30000));
	while (!atomic_load(&done) && steps++ < 40000) {
		uint64_t now = moq_quic_link_now(w->lnk);
		moq_node_stats(w->relay, &st);
		if (st.broadcasts)
			atomic_store(&announced, 1);
		if (w->ready && now >= next) {
			struct moq_cache_group *g;
			uint8_t buf[3000];
			for (size_t k = 0; k < sizeof(buf); k++)
				buf[k] = pat(seq, k);
			ck_assert_int_eq(moq_cache_group_open(t, seq, now, &g), 0);
			ck_assert_int_eq(moq_cache_write_frame(g, (int64_t)seq, buf, sizeof(buf)),
			                 0);
			ck_assert_int_eq(moq_cache_group_finish(g), 0);
			moq_cache_group_unref(g);
			seq++;
			next = now + 20 * MS;
		}
		worker_step(w);
	}
	moq_cache_track_unref(t);
	return NULL;
}

/* Worker 2: subscribers to the broadcast published on worker 1. */
static void *thread_sub(void *arg)
{
	struct worker *w = arg;
	uint64_t steps = 0;
	int subscribed = 0;

	/* Wait (real time) for worker 1's announcement to be mirrored. */
	while (!atomic_load(&announced) && steps++ < 20000) {
		struct timespec ts = {0, 500000};
		nanosleep(&ts, NULL);
	}
	ck_assert_msg(atomic_load(&announced), "not announced");
	steps = 0;
	for (int i = 0; i < NSUBS; i++) {
		w->subs[i] = worker_connect(w, MOQ_ROLE_SUBSCRIBER, (uint16_t)(31000 + i));
		ck_assert_ptr_nonnull(w->subs[i]);
	}
	while (steps++ < 20000) { /* 40 s virtual */
		int all = 1;
		if (!subscribed && w->ready == NSUBS) {
			struct moq_sub_params p = {1, false, 5000, MOQ_GROUP_NONE, MOQ_GROUP_NONE};
			for (int i = 0; i < NSUBS; i++)
				ck_assert_int_ge(
				        moq_session_subscribe(w->subs[i], "t/b", 3, "v", 1, &p), 0);
			subscribed = 1;
		}
		for (int i = 0; i < NSUBS; i++)
			if (w->complete[i] < WANT_GROUPS)
				all = 0;
		if (subscribed && all)
			break;
		worker_step(w);
	}
	atomic_store(&done, 1);
	return NULL;
}

START_TEST(test_two_threads)
{
	struct moq_cache_cfg cc = {0};
	static struct worker w1, w2;
	pthread_t t1, t2;

	moq_cache_counting_init(&rcnt);
	cc.alloc = moq_cache_counting_alloc(&rcnt);
	cc.budget = 4u << 20;
	rcache = moq_cache_create(&cc);
	hub = moq_hub_create(2, 0);
	ck_assert(rcache && hub);
	atomic_store(&done, 0);
	atomic_store(&announced, 0);
	atomic_store(&vclock[0], 0);
	atomic_store(&vclock[1], 0);
	worker_init(&w1, 0);
	worker_init(&w2, 1);
	ck_assert_int_eq(pthread_create(&t1, NULL, thread_pub, &w1), 0);
	ck_assert_int_eq(pthread_create(&t2, NULL, thread_sub, &w2), 0);
	pthread_join(t2, NULL);
	pthread_join(t1, NULL);
	for (int i = 0; i < NSUBS; i++) {
		fprintf(stderr,
		        "# threads: subscriber %d on worker 2: %llu groups, %llu bytes, %llu "
		        "errors\n",
		        i, (unsigned long long)w2.complete[i], (unsigned long long)w2.bytes[i],
		        (unsigned long long)w2.errors[i]);
		ck_assert_uint_ge(w2.complete[i], WANT_GROUPS);
		ck_assert_uint_eq(w2.errors[i], 0);
	}
	worker_fini(&w2);
	worker_fini(&w1);
	moq_hub_destroy(hub);
	moq_cache_destroy(rcache);
}
END_TEST

Suite *moq_threads_suite(void);

Suite *moq_threads_suite(void)
{
	Suite *s = suite_create("moq_threads");
	TCase *tc = tcase_create("threads");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_two_threads);
	suite_add_tcase(s, tc);
	return s;
}
