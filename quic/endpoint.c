/* SPDX-License-Identifier: MIT */
/*
 * quic.c: the QUIC endpoint: CID table, version negotiation, Retry,
 * stateless reset, limits, connections (ngtcp2 callbacks), zero-copy stream
 * send queues, the burst write loop and the timer heap.
 */
#include "quic_int.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ngtcp2/ngtcp2_crypto_wolfssl.h>

/* Defaults (quic.h documents them). */
#define DEF_MAX_CONNS      1024
#define DEF_MAX_HALF_OPEN  256
#define DEF_MAX_PER_ADDR   64
#define DEF_STREAMS_BIDI   100
#define DEF_STREAMS_UNI    1000
#define DEF_STREAM_DATA    (1u << 20)
#define DEF_MAX_DATA       (16u << 20)
#define DEF_HS_TIMEOUT     (10ull * NGTCP2_SECONDS)
#define DEF_IDLE_TIMEOUT   (30ull * NGTCP2_SECONDS)
#define DEF_TOKEN_LIFETIME (10ull * NGTCP2_SECONDS)
#define DEF_SRESET_RATE    1000
#define DEF_SL_QUEUE       64
/* RFC 9000, 14.1: a client Initial datagram is at least 1200 bytes; VN and
 * Retry only answer datagrams that size (RFC 9000, 6.1 / 8.1). */
#define MIN_INITIAL_DGRAM 1200
/* RFC 9000, 8.1: at most 3x the bytes received from an unvalidated address. */
#define AMPLIFICATION_FACTOR 3
/* RFC 9000, 10.3: a stateless reset is at least 21 bytes (1 + 4 unpredictable
 * + 16 token); ngtcp2 wants >= 5 random bytes, so >= 22. Triggers of up to
 * 43 bytes are answered one byte shorter (10.3, "Detecting a Stateless
 * Reset"), longer ones with a random length below the trigger. */
#define SRESET_MIN_LEN       (1 + NGTCP2_MIN_STATELESS_RESET_RANDLEN + NGTCP2_STATELESS_RESET_TOKENLEN)
#define SRESET_SHORT_TRIGGER 43
/* Stream map initial size (power of two). */
#define SMAP_INIT 16
/* iovecs handed to ngtcp2 per writev call. */
#define WRITE_VECS 16
/* Active connection IDs we accept from the peer (RFC 9000, 18.2). */
#define ACTIVE_CID_LIMIT 4

/* ------------------------------------------------------------ allocator */
/* ngtcp2 allocates small objects while packets flow (frame chains, skip-list
 * nodes, ACK ranges). Each endpoint hands it a size-class cache so that,
 * once warm, the data path does not call malloc (house rule: no malloc per
 * packet). Blocks carry a 16-byte header with their class; larger blocks go
 * to malloc directly. Each class keeps at most MEM_CACHE_MAX free blocks. */
#define MEM_HDR       16
#define MEM_CLASSES   7 /* 64 B .. 4 KiB */
#define MEM_MIN_SHIFT 6
#define MEM_CACHE_MAX 4096
#define MEM_BIG       0xff

struct mem_free {
	struct mem_free *next;
};

struct quic_mem {
	struct mem_free *head[MEM_CLASSES];
	uint32_t n[MEM_CLASSES];
};

static int mem_class(size_t size)
{
	int c = 0;

	size += MEM_HDR;
	while (c < MEM_CLASSES && ((size_t)1 << (c + MEM_MIN_SHIFT)) < size)
		c++;
	return c < MEM_CLASSES ? c : MEM_BIG;
}

static void *mem_malloc(size_t size, void *user_data)
{
	struct quic_mem *m = user_data;
	int c = mem_class(size);
	uint8_t *p;

	if (c != MEM_BIG && m->head[c] != NULL) {
		p = (uint8_t *)m->head[c];
		m->head[c] = m->head[c]->next;
		m->n[c]--;
		return p;
	}
	p = malloc(c == MEM_BIG ? size + MEM_HDR : (size_t)1 << (c + MEM_MIN_SHIFT));
	if (p == NULL)
		return NULL;
	p[0] = (uint8_t)c;
	return p + MEM_HDR;
}

static void mem_free(void *ptr, void *user_data)
{
	struct quic_mem *m = user_data;
	uint8_t *p;
	int c;

	if (ptr == NULL)
		return;
	p = (uint8_t *)ptr - MEM_HDR;
	c = p[0];
	if (c == MEM_BIG || m->n[c] >= MEM_CACHE_MAX) {
		free(p);
		return;
	}
	/* the free-list link lives in the payload; the class byte stays */
	((struct mem_free *)ptr)->next = m->head[c];
	m->head[c] = ptr;
	m->n[c]++;
}

static void *mem_calloc(size_t nmemb, size_t size, void *user_data)
{
	void *p;

	if (size != 0 && nmemb > SIZE_MAX / size)
		return NULL;
	p = mem_malloc(nmemb * size, user_data);
	if (p)
		memset(p, 0, nmemb * size);
	return p;
}

static void *mem_realloc(void *ptr, size_t size, void *user_data)
{
	uint8_t *p;
	size_t cap;
	void *np;
	int c;

	if (ptr == NULL)
		return mem_malloc(size, user_data);
	if (size == 0) {
		mem_free(ptr, user_data);
		return NULL;
	}
	p = (uint8_t *)ptr - MEM_HDR;
	c = p[0];
	if (c == MEM_BIG) {
		np = realloc(p, size + MEM_HDR);
		return np ? (uint8_t *)np + MEM_HDR : NULL;
	}
	cap = ((size_t)1 << (c + MEM_MIN_SHIFT)) - MEM_HDR;
	if (size <= cap)
		return ptr;
	np = mem_malloc(size, user_data);
	if (np == NULL)
		return NULL;
	memcpy(np, ptr, cap);
	mem_free(ptr, user_data);
	return np;
}

static int mem_init(struct moq_quic_endpoint *ep)
{
	ep->mem_cache = calloc(1, sizeof(struct quic_mem));
	if (ep->mem_cache == NULL)
		return MOQ_ERR_NOMEM;
	ep->mem.user_data = ep->mem_cache;
	ep->mem.malloc = mem_malloc;
	ep->mem.free = mem_free;
	ep->mem.calloc = mem_calloc;
	ep->mem.realloc = mem_realloc;
	return 0;
}

static void mem_fini(struct moq_quic_endpoint *ep)
{
	struct quic_mem *m = ep->mem_cache;
	int c;

	if (m == NULL)
		return;
	for (c = 0; c < MEM_CLASSES; c++) {
		while (m->head[c]) {
			struct mem_free *f = m->head[c];

			m->head[c] = f->next;
			free((uint8_t *)f - MEM_HDR);
		}
	}
	free(m);
	ep->mem_cache = NULL;
}

/* ---------------------------------------------------------------- hashing */

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static uint64_t hash_bytes(uint64_t key, const uint8_t *p, size_t len)
{
	uint64_t h = key ^ (len * 0x9e3779b97f4a7c15ULL);
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t w;

		memcpy(&w, p + i, 8);
		h = mix64(h ^ w);
	}
	if (i < len) {
		uint64_t w = 0;

		memcpy(&w, p + i, len - i);
		h = mix64(h ^ w ^ 0x5bd1e995);
	}
	return h;
}

/* -------------------------------------------------------------- CID table */
/* Open addressing, linear probing, backward-shift deletion; sized for
 * max_conns * QUIC_CONN_MAX_CIDS at <= 50 % load, so it never grows. The same
 * structure maps the peer's stateless reset tokens to connections. */

static uint32_t ktab_slot(const struct moq_quic_endpoint *ep, const struct ktab *t,
                          const uint8_t *id, size_t len)
{
	return (uint32_t)hash_bytes(ep->hash_key, id, len) & (t->cap - 1);
}

static struct moq_quic_conn *ktab_find(const struct moq_quic_endpoint *ep, const struct ktab *t,
                                       const uint8_t *id, size_t len)
{
	uint32_t i = ktab_slot(ep, t, id, len);

	for (;;) {
		const struct cid_key *k = &t->keys[i];

		if (k->len == 0)
			return NULL;
		if (k->len == len && memcmp(k->id, id, len) == 0)
			return t->vals[i];
		i = (i + 1) & (t->cap - 1);
	}
}

static int ktab_add(const struct moq_quic_endpoint *ep, struct ktab *t, const uint8_t *id,
                    size_t len, struct moq_quic_conn *c)
{
	uint32_t i;

	if (len == 0 || len > NGTCP2_MAX_CIDLEN)
		return MOQ_ERR_INVAL;
	if ((t->n + 1) * 2 > t->cap)
		return MOQ_ERR_LIMIT;
	i = ktab_slot(ep, t, id, len);
	for (;;) {
		struct cid_key *k = &t->keys[i];

		if (k->len == 0)
			break;
		if (k->len == len && memcmp(k->id, id, len) == 0)
			return MOQ_ERR_EXISTS;
		i = (i + 1) & (t->cap - 1);
	}
	t->keys[i].len = (uint8_t)len;
	memcpy(t->keys[i].id, id, len);
	t->vals[i] = c;
	t->n++;
	return 0;
}

static void ktab_del(const struct moq_quic_endpoint *ep, struct ktab *t, const uint8_t *id,
                     size_t len)
{
	uint32_t mask = t->cap - 1, i = ktab_slot(ep, t, id, len), j;

	for (;;) {
		struct cid_key *k = &t->keys[i];

		if (k->len == 0)
			return;
		if (k->len == len && memcmp(k->id, id, len) == 0)
			break;
		i = (i + 1) & mask;
	}
	/* backward shift */
	j = i;
	for (;;) {
		uint32_t h;

		j = (j + 1) & mask;
		if (t->keys[j].len == 0)
			break;
		h = ktab_slot(ep, t, t->keys[j].id, t->keys[j].len);
		/* move j to i if h is not cyclically in (i, j] */
		if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
			t->keys[i] = t->keys[j];
			t->vals[i] = t->vals[j];
			i = j;
		}
	}
	t->keys[i].len = 0;
	t->vals[i] = NULL;
	t->n--;
}

static int ktab_init(struct ktab *t, uint64_t entries)
{
	t->cap = 16;
	while (t->cap < entries * 2 && t->cap < (1u << 30))
		t->cap <<= 1;
	t->n = 0;
	t->keys = calloc(t->cap, sizeof(*t->keys));
	t->vals = calloc(t->cap, sizeof(*t->vals));
	return t->keys && t->vals ? 0 : MOQ_ERR_NOMEM;
}

static void ktab_fini(struct ktab *t)
{
	free(t->keys);
	free(t->vals);
	t->keys = NULL;
	t->vals = NULL;
}

static struct moq_quic_conn *ctab_find(const struct moq_quic_endpoint *ep, const uint8_t *id,
                                       size_t len)
{
	return ktab_find(ep, &ep->ctab, id, len);
}

/* The peer's stateless reset tokens (RFC 9000, 10.3.1: a datagram whose
 * last 16 bytes match one is a reset for that connection). */
static void conn_add_token(struct moq_quic_conn *c, const uint8_t *token)
{
	uint32_t i;

	for (i = 0; i < c->ntokens; i++)
		if (memcmp(c->tokens[i], token, NGTCP2_STATELESS_RESET_TOKENLEN) == 0)
			return;
	if (c->ntokens >= QUIC_CONN_MAX_TOKENS)
		return;
	if (ktab_add(c->ep, &c->ep->ttab, token, NGTCP2_STATELESS_RESET_TOKENLEN, c) != 0)
		return;
	memcpy(c->tokens[c->ntokens++], token, NGTCP2_STATELESS_RESET_TOKENLEN);
}

static void conn_del_token(struct moq_quic_conn *c, const uint8_t *token)
{
	uint32_t i;

	for (i = 0; i < c->ntokens; i++) {
		if (memcmp(c->tokens[i], token, NGTCP2_STATELESS_RESET_TOKENLEN) == 0) {
			ktab_del(c->ep, &c->ep->ttab, token, NGTCP2_STATELESS_RESET_TOKENLEN);
			memcpy(c->tokens[i], c->tokens[--c->ntokens],
			       NGTCP2_STATELESS_RESET_TOKENLEN);
			return;
		}
	}
}

static int conn_add_cid(struct moq_quic_conn *c, const uint8_t *id, size_t len)
{
	int rv;

	if (c->ncids >= QUIC_CONN_MAX_CIDS)
		return MOQ_ERR_LIMIT;
	rv = ktab_add(c->ep, &c->ep->ctab, id, len, c);
	if (rv != 0)
		return rv;
	c->cids[c->ncids].len = (uint8_t)len;
	memcpy(c->cids[c->ncids].id, id, len);
	c->ncids++;
	return 0;
}

static void conn_del_cid(struct moq_quic_conn *c, const uint8_t *id, size_t len)
{
	uint32_t i;

	for (i = 0; i < c->ncids; i++) {
		if (c->cids[i].len == len && memcmp(c->cids[i].id, id, len) == 0) {
			ktab_del(c->ep, &c->ep->ctab, id, len);
			c->cids[i] = c->cids[--c->ncids];
			return;
		}
	}
}

/* ------------------------------------------------------ source addresses */

static int addr_key(const struct moq_quic_addr *a, uint8_t *fam, uint8_t ip[16])
{
	memset(ip, 0, 16);
	if (a->u.sa.sa_family == AF_INET) {
		*fam = 4;
		memcpy(ip, &a->u.in4.sin_addr, 4);
		return 0;
	}
	if (a->u.sa.sa_family == AF_INET6) {
		*fam = 6;
		memcpy(ip, &a->u.in6.sin6_addr, 16);
		return 0;
	}
	return MOQ_ERR_INVAL;
}

/* Find (or with @create, make) the entry of @a's IP; NULL when full. */
static struct addr_ent *atab_get(struct moq_quic_endpoint *ep, const struct moq_quic_addr *a,
                                 int create)
{
	uint8_t fam, ip[16];
	uint32_t mask = ep->atab_cap - 1, i, n;

	if (addr_key(a, &fam, ip) != 0)
		return NULL;
	i = (uint32_t)hash_bytes(ep->hash_key ^ fam, ip, 16) & mask;
	for (n = 0; n < ep->atab_cap; n++, i = (i + 1) & mask) {
		struct addr_ent *e = &ep->atab[i];

		if (!e->used) {
			if (!create)
				return NULL;
			e->used = 1;
			e->fam = fam;
			memcpy(e->ip, ip, 16);
			e->count = 0;
			return e;
		}
		if (e->fam == fam && memcmp(e->ip, ip, 16) == 0)
			return e;
	}
	return NULL;
}

/* Entries are never removed (count drops to 0) to keep probing simple; the
 * table is rebuilt when it fills with zero-count entries. */
static void atab_compact(struct moq_quic_endpoint *ep)
{
	struct addr_ent *old = ep->atab;
	uint32_t i, cap = ep->atab_cap;
	struct addr_ent *nt = calloc(cap, sizeof(*nt));

	if (nt == NULL)
		return;
	ep->atab = nt;
	for (i = 0; i < cap; i++) {
		if (old[i].used && old[i].count > 0) {
			struct moq_quic_addr a;
			struct addr_ent *e;

			memset(&a, 0, sizeof(a));
			if (old[i].fam == 4) {
				a.u.in4.sin_family = AF_INET;
				memcpy(&a.u.in4.sin_addr, old[i].ip, 4);
			} else {
				a.u.in6.sin6_family = AF_INET6;
				memcpy(&a.u.in6.sin6_addr, old[i].ip, 16);
			}
			e = atab_get(ep, &a, 1);
			if (e)
				e->count = old[i].count;
		}
	}
	free(old);
}

/* ------------------------------------------------------------ timer heap */

static void heap_swap(struct moq_quic_endpoint *ep, uint32_t a, uint32_t b)
{
	struct moq_quic_conn *t = ep->heap[a];

	ep->heap[a] = ep->heap[b];
	ep->heap[b] = t;
	ep->heap[a]->hidx = a;
	ep->heap[b]->hidx = b;
}

static void heap_up(struct moq_quic_endpoint *ep, uint32_t i)
{
	while (i > 0) {
		uint32_t p = (i - 1) / 2;

		if (ep->heap[p]->hkey <= ep->heap[i]->hkey)
			break;
		heap_swap(ep, p, i);
		i = p;
	}
}

static void heap_down(struct moq_quic_endpoint *ep, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < ep->heap_n && ep->heap[l]->hkey < ep->heap[m]->hkey)
			m = l;
		if (r < ep->heap_n && ep->heap[r]->hkey < ep->heap[m]->hkey)
			m = r;
		if (m == i)
			return;
		heap_swap(ep, i, m);
		i = m;
	}
}

static void heap_remove(struct moq_quic_endpoint *ep, struct moq_quic_conn *c)
{
	uint32_t i = c->hidx;

	if (i == UINT32_MAX)
		return;
	ep->heap_n--;
	if (i != ep->heap_n) {
		ep->heap[i] = ep->heap[ep->heap_n];
		ep->heap[i]->hidx = i;
		heap_down(ep, i);
		heap_up(ep, i);
	}
	c->hidx = UINT32_MAX;
}

/* The heap holds max_conns entries (allocated up front). */
static void heap_set(struct moq_quic_endpoint *ep, struct moq_quic_conn *c, uint64_t key)
{
	if (key == UINT64_MAX) {
		heap_remove(ep, c);
		return;
	}
	if (c->hidx == UINT32_MAX) {
		c->hidx = ep->heap_n++;
		ep->heap[c->hidx] = c;
		c->hkey = key;
		heap_up(ep, c->hidx);
		return;
	}
	c->hkey = key;
	heap_down(ep, c->hidx);
	heap_up(ep, c->hidx);
}

static void conn_update_timer(struct moq_quic_conn *c)
{
	uint64_t key;

	if (c->state == CS_DEAD)
		key = 0;
	else if (c->state >= CS_CLOSING)
		key = c->deadline;
	else
		key = ngtcp2_conn_get_expiry(c->q);
	heap_set(c->ep, c, key);
}

/* ------------------------------------------------------------ ready list */

static void ready_add(struct moq_quic_conn *c)
{
	struct moq_quic_endpoint *ep = c->ep;

	if (c->in_ready || c->state == CS_DEAD || c->state == CS_DRAINING)
		return;
	c->in_ready = 1;
	ep->rcount++;
	c->rnext = NULL;
	c->rprev = ep->rtail;
	if (ep->rtail)
		ep->rtail->rnext = c;
	else
		ep->rhead = c;
	ep->rtail = c;
}

static void ready_del(struct moq_quic_conn *c)
{
	struct moq_quic_endpoint *ep = c->ep;

	if (!c->in_ready)
		return;
	if (c->rprev)
		c->rprev->rnext = c->rnext;
	else
		ep->rhead = c->rnext;
	if (c->rnext)
		c->rnext->rprev = c->rprev;
	else
		ep->rtail = c->rprev;
	ep->rcount--;
	c->in_ready = 0;
	c->rnext = c->rprev = NULL;
}

/* -------------------------------------------------------------- streams */

static uint32_t smap_slot(const struct moq_quic_conn *c, int64_t id)
{
	return (uint32_t)mix64((uint64_t)id) & (c->smap_cap - 1);
}

static struct quic_strm *smap_find(const struct moq_quic_conn *c, int64_t id)
{
	uint32_t i;

	if (c->smap_cap == 0)
		return NULL;
	i = smap_slot(c, id);
	for (;;) {
		struct quic_strm *s = c->smap[i];

		if (s == NULL)
			return NULL;
		if (s->id == id)
			return s;
		i = (i + 1) & (c->smap_cap - 1);
	}
}

static int smap_put_raw(struct quic_strm **map, uint32_t cap, struct quic_strm *s)
{
	uint32_t i = (uint32_t)mix64((uint64_t)s->id) & (cap - 1);

	while (map[i] != NULL)
		i = (i + 1) & (cap - 1);
	map[i] = s;
	return 0;
}

static int smap_add(struct moq_quic_conn *c, struct quic_strm *s)
{
	if ((c->smap_n + 1) * 2 > c->smap_cap) {
		uint32_t ncap = c->smap_cap ? c->smap_cap * 2 : SMAP_INIT, i;
		struct quic_strm **nm = calloc(ncap, sizeof(*nm));

		if (nm == NULL)
			return MOQ_ERR_NOMEM;
		for (i = 0; i < c->smap_cap; i++)
			if (c->smap[i])
				smap_put_raw(nm, ncap, c->smap[i]);
		free(c->smap);
		c->smap = nm;
		c->smap_cap = ncap;
	}
	smap_put_raw(c->smap, c->smap_cap, s);
	c->smap_n++;
	return 0;
}

static void smap_del(struct moq_quic_conn *c, int64_t id)
{
	uint32_t mask = c->smap_cap - 1, i, j;

	if (c->smap_cap == 0)
		return;
	i = smap_slot(c, id);
	for (;;) {
		if (c->smap[i] == NULL)
			return;
		if (c->smap[i]->id == id)
			break;
		i = (i + 1) & mask;
	}
	j = i;
	for (;;) {
		uint32_t h;

		j = (j + 1) & mask;
		if (c->smap[j] == NULL)
			break;
		h = smap_slot(c, c->smap[j]->id);
		if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
			c->smap[i] = c->smap[j];
			i = j;
		}
	}
	c->smap[i] = NULL;
	c->smap_n--;
}

static void pend_add(struct moq_quic_conn *c, struct quic_strm *s)
{
	if (s->in_pend || s->blocked || s->wr_closed)
		return;
	s->in_pend = 1;
	s->pnext = NULL;
	s->pprev = c->pend_tail[s->urgency];
	if (c->pend_tail[s->urgency])
		c->pend_tail[s->urgency]->pnext = s;
	else
		c->pend_head[s->urgency] = s;
	c->pend_tail[s->urgency] = s;
	c->npend++;
	c->pend_mask |= (uint8_t)(1u << s->urgency);
}

static void pend_del(struct moq_quic_conn *c, struct quic_strm *s)
{
	if (!s->in_pend)
		return;
	if (s->pprev)
		s->pprev->pnext = s->pnext;
	else
		c->pend_head[s->urgency] = s->pnext;
	if (s->pnext)
		s->pnext->pprev = s->pprev;
	else
		c->pend_tail[s->urgency] = s->pprev;
	if (c->pend_head[s->urgency] == NULL)
		c->pend_mask &= (uint8_t) ~(1u << s->urgency);
	s->in_pend = 0;
	s->pnext = s->pprev = NULL;
	c->npend--;
}

/* Stream records are recycled per endpoint with their entry arrays: moq-lite
 * opens a stream per group, and audio has a group per frame (50 streams a
 * second per subscriber): a calloc and a realloc per stream were 11% of the
 * relay's fanout instructions (bench_moq_fanout --subs 1000 --audio). */
#define STRM_SPARE_MAX  4096u
#define STRM_SPARE_ENTS 64u /* larger entry arrays are not kept */

/* A zeroed stream record: a spare one (keeping its entry array) or a new one. */
static struct quic_strm *strm_get(struct moq_quic_endpoint *ep)
{
	struct quic_strm *s = ep->sfree;

	if (s != NULL) {
		struct sq_ent *ents = s->ents;
		uint32_t cap = s->cap;

		ep->sfree = s->pnext;
		ep->nsfree--;
		memset(s, 0, sizeof(*s));
		s->ents = ents;
		s->cap = cap;
	} else if ((s = calloc(1, sizeof(*s))) == NULL) {
		return NULL;
	}
	s->urgency = MOQ_QUIC_URGENCY_DEFAULT;
	return s;
}

/* Back to the spares (or freed): @s is in no list or map. */
static void strm_put(struct moq_quic_endpoint *ep, struct quic_strm *s)
{
	if (ep->nsfree < STRM_SPARE_MAX && s->cap <= STRM_SPARE_ENTS) {
		s->pnext = ep->sfree;
		ep->sfree = s;
		ep->nsfree++;
		return;
	}
	free(s->ents);
	free(s);
}

static struct quic_strm *strm_new(struct moq_quic_conn *c, int64_t id)
{
	struct quic_strm *s = strm_get(c->ep);

	if (s == NULL)
		return NULL;
	s->id = id;
	if (smap_add(c, s) != 0) {
		strm_put(c->ep, s);
		return NULL;
	}
	return s;
}

static void strm_free(struct moq_quic_conn *c, struct quic_strm *s)
{
	pend_del(c, s);
	smap_del(c, s->id);
	strm_put(c->ep, s);
}

static int strm_has_unsent(const struct quic_strm *s)
{
	return s->sent_off < s->end_off || (s->fin_queued && !s->fin_sent);
}

/* Build the iovec list from sent_off, at most @max entries and no more than
 * needed to cover @bytes (one packet's worth: ngtcp2 walks every entry it is
 * given); sets *all when it reaches end_off. */
static size_t strm_vecs(const struct quic_strm *s, ngtcp2_vec *v, size_t max, size_t bytes,
                        int *all)
{
	uint32_t i = s->send_idx;
	size_t pos = s->send_pos, n = 0, total = 0;

	while (i < s->n && n < max && total < bytes) {
		const struct sq_ent *e = &s->ents[i];

		v[n].base = (uint8_t *)(uintptr_t)(e->base + pos);
		v[n].len = e->len - pos;
		total += v[n].len;
		n++;
		pos = 0;
		i++;
	}
	*all = (i >= s->n);
	return n;
}

static void strm_advance(struct quic_strm *s, size_t len)
{
	s->sent_off += len;
	while (len > 0 && s->send_idx < s->n) {
		size_t left = s->ents[s->send_idx].len - s->send_pos;

		if (len < left) {
			s->send_pos += len;
			return;
		}
		len -= left;
		s->send_idx++;
		s->send_pos = 0;
	}
}

/* Drop fully acknowledged entries from the front. */
static void strm_ack(struct quic_strm *s, uint64_t acked)
{
	if (acked <= s->acked_off)
		return;
	s->acked_off = acked;
	while (s->head < s->n && s->head_off + s->ents[s->head].len <= acked &&
	       s->head < s->send_idx) {
		s->head_off += s->ents[s->head].len;
		s->head++;
	}
	if (s->head == s->n) {
		s->send_idx -= s->head;
		s->n = s->head = 0;
	} else if (s->head > 32 && s->head * 2 > s->n) {
		memmove(s->ents, s->ents + s->head, (s->n - s->head) * sizeof(*s->ents));
		s->n -= s->head;
		s->send_idx -= s->head;
		s->head = 0;
	}
}

/* ------------------------------------------------------------ closing */

static const char *transport_what(uint64_t code)
{
	if (code >= NGTCP2_CRYPTO_ERROR && code <= NGTCP2_CRYPTO_ERROR + 0xff) {
		switch (code - NGTCP2_CRYPTO_ERROR) {
		case 120:
			return "tls alert 120 no_application_protocol (ALPN mismatch)";
		case 40:
			return "tls alert 40 handshake_failure";
		case 42:
			return "tls alert 42 bad_certificate";
		case 48:
			return "tls alert 48 unknown_ca";
		case 109:
			return "tls alert 109 missing_extension";
		default:
			return "tls alert";
		}
	}
	switch (code) {
	case NGTCP2_NO_ERROR:
		return "no error";
	case NGTCP2_INTERNAL_ERROR:
		return "internal error";
	case NGTCP2_CONNECTION_REFUSED:
		return "connection refused";
	case NGTCP2_FLOW_CONTROL_ERROR:
		return "flow control error";
	case NGTCP2_STREAM_LIMIT_ERROR:
		return "stream limit error";
	case NGTCP2_STREAM_STATE_ERROR:
		return "stream state error";
	case NGTCP2_FINAL_SIZE_ERROR:
		return "final size error";
	case NGTCP2_FRAME_ENCODING_ERROR:
		return "frame encoding error";
	case NGTCP2_TRANSPORT_PARAMETER_ERROR:
		return "transport parameter error";
	case NGTCP2_PROTOCOL_VIOLATION:
		return "protocol violation";
	case NGTCP2_INVALID_TOKEN:
		return "invalid token";
	case NGTCP2_KEY_UPDATE_ERROR:
		return "key update error";
	default:
		return "transport error";
	}
}

static void info_from_ccerr(struct moq_quic_close_info *info,
                            const ngtcp2_connection_close_error *e)
{
	info->code = e->error_code;
	info->reason = e->reason;
	info->reasonlen = e->reasonlen;
	switch (e->type) {
	case NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION:
		info->kind = MOQ_QUIC_CLOSE_APPLICATION;
		info->what = "application close";
		info->err = e->error_code == 0 ? 0 : MOQ_ERR_CLOSED;
		break;
	case NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT_VERSION_NEGOTIATION:
		info->kind = MOQ_QUIC_CLOSE_VERSION;
		info->what = "version negotiation failed";
		info->err = MOQ_ERR_PROTO;
		break;
	case NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT_IDLE_CLOSE:
		info->kind = MOQ_QUIC_CLOSE_IDLE;
		info->what = "idle timeout";
		info->err = MOQ_ERR_CLOSED;
		break;
	default:
		info->kind = MOQ_QUIC_CLOSE_TRANSPORT;
		info->what = transport_what(e->error_code);
		if (e->error_code == NGTCP2_NO_ERROR)
			info->err = 0;
		else if (e->error_code >= NGTCP2_CRYPTO_ERROR &&
		         e->error_code <= NGTCP2_CRYPTO_ERROR + 0xff)
			info->err = MOQ_ERR_CRYPTO;
		else
			info->err = MOQ_ERR_PROTO;
		break;
	}
}

/* Tell the application once; afterwards no callback reaches it for @c. */
static void conn_notify(struct moq_quic_conn *c, struct moq_quic_close_info *info)
{
	struct moq_quic_endpoint *ep = c->ep;

	if (c->notified)
		return;
	c->notified = 1;
	if (info->kind == MOQ_QUIC_CLOSE_TRANSPORT && info->code != NGTCP2_NO_ERROR)
		ep->st.conn_errors++;
	if (info->code == NGTCP2_STREAM_LIMIT_ERROR && info->kind == MOQ_QUIC_CLOSE_TRANSPORT)
		ep->st.refused_streams++;
	if (ep->cfg.cb && ep->cfg.cb->conn_closed)
		ep->cfg.cb->conn_closed(c, c->user, info);
}

static void conn_notify_ccerr(struct moq_quic_conn *c, int local)
{
	ngtcp2_connection_close_error e;
	struct moq_quic_close_info info;

	memset(&info, 0, sizeof(info));
	ngtcp2_conn_get_connection_close_error(c->q, &e);
	info_from_ccerr(&info, &e);
	info.local = local;
	if (c->got_sreset) {
		info.kind = MOQ_QUIC_CLOSE_STATELESS_RESET;
		info.what = "stateless reset received";
		info.err = MOQ_ERR_CLOSED;
	}
	conn_notify(c, &info);
}

static void conn_half_open_done(struct moq_quic_conn *c)
{
	if (c->half_open) {
		c->half_open = 0;
		c->ep->st.half_open--;
	}
}

/* Enter the closing period with @e (RFC 9000, 10.2.1): one CONNECTION_CLOSE
 * is written now and resent (rate-limited) while packets keep arriving. */
static void conn_start_closing(struct moq_quic_conn *c, const ngtcp2_connection_close_error *e,
                               uint64_t now)
{
	ngtcp2_path_storage ps;
	ngtcp2_pkt_info pi;
	ngtcp2_ssize n;
	struct moq_quic_close_info info;

	if (c->state >= CS_CLOSING)
		return;
	conn_half_open_done(c);
	ngtcp2_path_storage_zero(&ps);
	if (c->close_buf == NULL)
		c->close_buf = malloc(MOQ_QUIC_MAX_UDP_PAYLOAD);
	n = c->close_buf ? ngtcp2_conn_write_connection_close(c->q, &ps.path, &pi, c->close_buf,
	                                                      c->ep->cfg.max_udp_payload, e, now)
	                 : 0;
	if (n > 0) {
		c->close_len = (size_t)n;
		c->close_pending = 1;
		c->state = CS_CLOSING;
		/* RFC 9000, 10.2: the closing period lasts three PTOs. */
		c->deadline = now + 3 * ngtcp2_conn_get_pto(c->q);
		ready_add(c);
	} else {
		c->state = CS_DEAD;
		c->deadline = now;
	}
	memset(&info, 0, sizeof(info));
	info_from_ccerr(&info, e);
	info.local = 1;
	conn_notify(c, &info);
	conn_update_timer(c);
}

static void conn_start_draining(struct moq_quic_conn *c, uint64_t now)
{
	if (c->state >= CS_CLOSING)
		return;
	conn_half_open_done(c);
	c->state = CS_DRAINING;
	c->deadline = now + 3 * ngtcp2_conn_get_pto(c->q);
	ready_del(c);
	conn_notify_ccerr(c, 0);
	conn_update_timer(c);
}

/* Close @c silently (idle timeout, handshake timeout, dropped). */
static void conn_drop(struct moq_quic_conn *c, struct moq_quic_close_info *info)
{
	conn_half_open_done(c);
	c->state = CS_DEAD;
	c->deadline = 0;
	ready_del(c);
	conn_notify(c, info);
	conn_update_timer(c);
}

/* Handle a fatal ngtcp2 error @rv on @c (RFC 9000, 10.2). */
static void conn_fail(struct moq_quic_conn *c, int rv, uint64_t now)
{
	ngtcp2_connection_close_error e;
	struct moq_quic_close_info info;

	memset(&info, 0, sizeof(info));
	if (c->ep->cfg.debug)
		fprintf(stderr, "moqdp quic: conn %p (%s) error %s, tls alert %u\n", (void *)c,
		        c->server ? "server" : "client", ngtcp2_strerror(rv),
		        ngtcp2_conn_get_tls_alert(c->q));
	switch (rv) {
	case NGTCP2_ERR_DRAINING:
		conn_start_draining(c, now);
		return;
	case NGTCP2_ERR_CLOSING:
		return;
	case NGTCP2_ERR_DROP_CONN:
	case NGTCP2_ERR_RETRY:
		info.kind = MOQ_QUIC_CLOSE_TRANSPORT;
		info.what = "connection dropped";
		info.err = MOQ_ERR_DROPPED;
		info.local = 1;
		conn_drop(c, &info);
		return;
	case NGTCP2_ERR_RECV_VERSION_NEGOTIATION:
		info.kind = MOQ_QUIC_CLOSE_VERSION;
		info.what = "version negotiation: no common version";
		info.err = MOQ_ERR_PROTO;
		info.local = 1;
		conn_drop(c, &info);
		return;
	case NGTCP2_ERR_IDLE_CLOSE:
		c->ep->st.idle_timeouts++;
		info.kind = MOQ_QUIC_CLOSE_IDLE;
		info.what = "idle timeout";
		info.err = MOQ_ERR_CLOSED;
		info.local = 1;
		conn_drop(c, &info);
		return;
	case NGTCP2_ERR_HANDSHAKE_TIMEOUT:
		c->ep->st.handshake_timeouts++;
		info.kind = MOQ_QUIC_CLOSE_HANDSHAKE_TIMEOUT;
		info.what = "handshake timeout";
		info.err = MOQ_ERR_CLOSED;
		info.local = 1;
		conn_drop(c, &info);
		return;
	case NGTCP2_ERR_CRYPTO:
		/* RFC 9001, 4.8: a TLS alert becomes CRYPTO_ERROR 0x100 + alert */
		ngtcp2_connection_close_error_set_transport_error_tls_alert(
		        &e, ngtcp2_conn_get_tls_alert(c->q), NULL, 0);
		break;
	case NGTCP2_ERR_CALLBACK_FAILURE:
		if (ngtcp2_conn_get_tls_alert(c->q) != 0) {
			ngtcp2_connection_close_error_set_transport_error_tls_alert(
			        &e, ngtcp2_conn_get_tls_alert(c->q), NULL, 0);
			break;
		}
		if (c->cb_failed) {
			ngtcp2_connection_close_error_set_transport_error(
			        &e, NGTCP2_INTERNAL_ERROR, (const uint8_t *)"application", 11);
			break;
		}
		/* fall through */
	default:
		ngtcp2_connection_close_error_set_transport_error_liberr(&e, rv, NULL, 0);
		break;
	}
	conn_start_closing(c, &e, now);
}

/* Finish an application close requested during a callback. */
static void conn_after_ng(struct moq_quic_conn *c, uint64_t now)
{
	if (c->close_req && c->state < CS_CLOSING) {
		ngtcp2_connection_close_error e;

		c->close_req = 0;
		ngtcp2_connection_close_error_set_application_error(
		        &e, c->close_code, (const uint8_t *)c->close_reason,
		        strlen(c->close_reason));
		conn_start_closing(c, &e, now);
	}
}

static void conn_free(struct moq_quic_conn *c)
{
	struct moq_quic_endpoint *ep = c->ep;
	uint32_t i;

	if (!c->notified) {
		struct moq_quic_close_info info;

		memset(&info, 0, sizeof(info));
		info.kind = MOQ_QUIC_CLOSE_ENDPOINT;
		info.what = "endpoint closed";
		info.err = MOQ_ERR_CLOSED;
		info.local = 1;
		conn_notify(c, &info);
	}
	conn_half_open_done(c);
	ready_del(c);
	heap_remove(ep, c);
	while (c->ncids > 0)
		conn_del_cid(c, c->cids[0].id, c->cids[0].len);
	while (c->ntokens > 0)
		conn_del_token(c, c->tokens[0]);
	if (c->addr_slot_valid) {
		/* the address counted at accept, not the current (migrated) one */
		struct addr_ent *e = atab_get(ep, &c->counted_addr, 0);

		if (e && e->count > 0)
			e->count--;
	}
	for (i = 0; i < c->smap_cap; i++) {
		struct quic_strm *s = c->smap[i];

		if (s) {
			free(s->ents);
			free(s);
		}
	}
	free(c->smap);
	if (c->q)
		ngtcp2_conn_del(c->q);
	quic_tls_conn_free(c);
	free(c->close_buf);
	if (c->aprev)
		c->aprev->anext = c->anext;
	else
		ep->ahead = c->anext;
	if (c->anext)
		c->anext->aprev = c->aprev;
	ep->st.conns_active--;
	ep->st.conns_closed++;
	free(c);
}

/* --------------------------------------------------------- ngtcp2 glue */

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
	struct moq_quic_conn *c = ref->user_data;

	return c->q;
}

static void rand_cb(uint8_t *dest, size_t destlen, const ngtcp2_rand_ctx *rand_ctx)
{
	quic_rand(rand_ctx->native_handle, dest, destlen);
}

/* Our CID format: byte 0 = owning worker, bytes 1.. = CSPRNG output. */
static void make_cid(struct moq_quic_endpoint *ep, ngtcp2_cid *cid)
{
	cid->datalen = MOQ_QUIC_CID_LEN;
	quic_rand(ep, cid->data + 1, MOQ_QUIC_CID_LEN - 1);
	cid->data[0] = ep->cfg.worker_id;
}

static int get_new_cid_cb(ngtcp2_conn *q, ngtcp2_cid *cid, uint8_t *token, size_t cidlen,
                          void *user_data)
{
	struct moq_quic_conn *c = user_data;
	int tries;

	(void)q;
	(void)cidlen;
	for (tries = 0; tries < 4; tries++) {
		make_cid(c->ep, cid);
		if (conn_add_cid(c, cid->data, cid->datalen) == 0)
			break;
	}
	if (tries == 4)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	/* RFC 9000, 10.3.2: the token is derived from a static key and the CID. */
	if (ngtcp2_crypto_generate_stateless_reset_token(token, c->ep->secret,
	                                                 sizeof(c->ep->secret), cid) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

static int remove_cid_cb(ngtcp2_conn *q, const ngtcp2_cid *cid, void *user_data)
{
	struct moq_quic_conn *c = user_data;

	(void)q;
	conn_del_cid(c, cid->data, cid->datalen);
	return 0;
}

static int handshake_completed_cb(ngtcp2_conn *q, void *user_data)
{
	struct moq_quic_conn *c = user_data;
	struct moq_quic_endpoint *ep = c->ep;

	(void)q;
	c->state = CS_ESTABLISHED;
	conn_half_open_done(c);
	ep->st.conns_established++;
	quic_tls_conn_alpn(c);
	if (!c->server) {
		/* RFC 9000, 18.2: the server's token for the handshake CID */
		const ngtcp2_transport_params *rp = ngtcp2_conn_get_remote_transport_params(c->q);

		if (rp && rp->stateless_reset_token_present)
			conn_add_token(c, rp->stateless_reset_token);
	}
	if (c->alpn[0] == '\0') {
		/* RFC 9001, 8.1: QUIC requires ALPN. */
		ngtcp2_conn_set_tls_alert(c->q, 120);
		return NGTCP2_ERR_CALLBACK_FAILURE;
	}
	if (!c->notified && !c->close_req && ep->cfg.cb && ep->cfg.cb->established) {
		if (ep->cfg.cb->established(c, c->user, c->alpn) < 0) {
			c->cb_failed = 1;
			return NGTCP2_ERR_CALLBACK_FAILURE;
		}
	}
	return 0;
}

static int app_live(const struct moq_quic_conn *c)
{
	return !c->notified && !c->close_req && c->ep->cfg.cb != NULL;
}

static int recv_stream_data_cb(ngtcp2_conn *q, uint32_t flags, int64_t sid, uint64_t offset,
                               const uint8_t *data, size_t datalen, void *user_data,
                               void *stream_user_data)
{
	struct moq_quic_conn *c = user_data;
	const struct moq_quic_callbacks *cb = c->ep->cfg.cb;

	(void)stream_user_data;
	if (app_live(c) && cb->stream_data) {
		if (cb->stream_data(c, c->user, sid, offset, data, datalen,
		                    (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0) < 0) {
			c->cb_failed = 1;
			return NGTCP2_ERR_CALLBACK_FAILURE;
		}
	}
	/* The data was consumed (copied out) during the call: open the
	 * windows again at once (RFC 9000, 4.2). */
	ngtcp2_conn_extend_max_stream_offset(q, sid, datalen);
	ngtcp2_conn_extend_max_offset(q, datalen);
	return 0;
}

static int acked_cb(ngtcp2_conn *q, int64_t sid, uint64_t offset, uint64_t datalen, void *user_data,
                    void *stream_user_data)
{
	struct moq_quic_conn *c = user_data;
	struct quic_strm *s = stream_user_data;
	const struct moq_quic_callbacks *cb = c->ep->cfg.cb;

	(void)q;
	if (s == NULL)
		return 0;
	strm_ack(s, offset + datalen);
	if (datalen > 0 && app_live(c) && cb->stream_acked)
		cb->stream_acked(c, c->user, sid, offset + datalen, datalen);
	return 0;
}

static int stream_open_cb(ngtcp2_conn *q, int64_t sid, void *user_data)
{
	struct moq_quic_conn *c = user_data;
	const struct moq_quic_callbacks *cb = c->ep->cfg.cb;
	struct quic_strm *s = strm_new(c, sid);

	if (s == NULL)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	ngtcp2_conn_set_stream_user_data(q, sid, s);
	if (app_live(c) && cb->stream_open && cb->stream_open(c, c->user, sid) < 0) {
		c->cb_failed = 1;
		return NGTCP2_ERR_CALLBACK_FAILURE;
	}
	return 0;
}

static int stream_close_cb(ngtcp2_conn *q, uint32_t flags, int64_t sid, uint64_t app_err,
                           void *user_data, void *stream_user_data)
{
	struct moq_quic_conn *c = user_data;
	const struct moq_quic_callbacks *cb = c->ep->cfg.cb;
	struct quic_strm *s = stream_user_data;

	(void)q;
	if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
		app_err = 0;
	/* ngtcp2 0.12 answers a peer's STOP_SENDING with RESET_STREAM itself
	 * (RFC 9000, 3.5) and has no callback for it: a stream with a send
	 * side that closes with an error code although we neither reset it
	 * nor had all of it acknowledged was stopped by the peer. */
	if (s && (flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET) && !s->local_reset &&
	    (ngtcp2_is_bidi_stream(sid) || ngtcp2_conn_is_local_stream(q, sid)) &&
	    !(s->fin_sent && s->acked_off >= s->end_off)) {
		s->wr_closed = 1;
		pend_del(c, s);
		if (app_live(c) && cb->stream_stop_sending)
			cb->stream_stop_sending(c, c->user, sid, app_err);
	}
	if (app_live(c) && cb->stream_closed)
		cb->stream_closed(c, c->user, sid, app_err);
	if (s)
		strm_free(c, s);
	/* A stream slot of the peer's is free again: allow one more
	 * (RFC 9000, 4.6). */
	if (!ngtcp2_conn_is_local_stream(q, sid)) {
		if (ngtcp2_is_bidi_stream(sid))
			ngtcp2_conn_extend_max_streams_bidi(q, 1);
		else
			ngtcp2_conn_extend_max_streams_uni(q, 1);
	}
	return 0;
}

static int stream_reset_cb(ngtcp2_conn *q, int64_t sid, uint64_t final_size, uint64_t app_err,
                           void *user_data, void *stream_user_data)
{
	struct moq_quic_conn *c = user_data;
	const struct moq_quic_callbacks *cb = c->ep->cfg.cb;

	(void)q;
	(void)stream_user_data;
	if (app_live(c) && cb->stream_reset)
		cb->stream_reset(c, c->user, sid, app_err, final_size);
	return 0;
}

static int extend_streams_cb(ngtcp2_conn *q, uint64_t max_streams, void *user_data)
{
	struct moq_quic_conn *c = user_data;
	const struct moq_quic_callbacks *cb = c->ep->cfg.cb;

	(void)q;
	(void)max_streams;
	if (app_live(c) && cb->writable && c->state == CS_ESTABLISHED)
		cb->writable(c, c->user, -1);
	return 0;
}

static int extend_stream_data_cb(ngtcp2_conn *q, int64_t sid, uint64_t max_data, void *user_data,
                                 void *stream_user_data)
{
	struct moq_quic_conn *c = user_data;
	const struct moq_quic_callbacks *cb = c->ep->cfg.cb;
	struct quic_strm *s = stream_user_data;

	(void)q;
	(void)max_data;
	if (s && s->blocked) {
		s->blocked = 0;
		if (strm_has_unsent(s))
			pend_add(c, s);
	}
	ready_add(c);
	if (app_live(c) && cb->writable)
		cb->writable(c, c->user, sid);
	return 0;
}

static int dcid_status_cb(ngtcp2_conn *q, int type, uint64_t seq, const ngtcp2_cid *cid,
                          const uint8_t *token, void *user_data)
{
	struct moq_quic_conn *c = user_data;

	(void)q;
	(void)seq;
	(void)cid;
	if (token == NULL)
		return 0;
	if (type == NGTCP2_CONNECTION_ID_STATUS_TYPE_ACTIVATE)
		conn_add_token(c, token);
	else
		conn_del_token(c, token);
	return 0;
}

static int recv_sreset_cb(ngtcp2_conn *q, const ngtcp2_pkt_stateless_reset *sr, void *user_data)
{
	struct moq_quic_conn *c = user_data;

	(void)q;
	(void)sr;
	c->got_sreset = 1;
	return 0;
}

static int update_key_cb(ngtcp2_conn *q, uint8_t *rx_secret, uint8_t *tx_secret,
                         ngtcp2_crypto_aead_ctx *rx_aead_ctx, uint8_t *rx_iv,
                         ngtcp2_crypto_aead_ctx *tx_aead_ctx, uint8_t *tx_iv,
                         const uint8_t *current_rx_secret, const uint8_t *current_tx_secret,
                         size_t secretlen, void *user_data)
{
	struct moq_quic_conn *c = user_data;

	c->key_updates++;
	return ngtcp2_crypto_update_key_cb(q, rx_secret, tx_secret, rx_aead_ctx, rx_iv, tx_aead_ctx,
	                                   tx_iv, current_rx_secret, current_tx_secret, secretlen,
	                                   user_data);
}

static void log_cb(void *user_data, const char *fmt, ...)
{
	va_list ap;

	(void)user_data;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void setup_callbacks(struct moq_quic_endpoint *ep)
{
	ngtcp2_callbacks *cb = &ep->cbs;

	memset(cb, 0, sizeof(*cb));
	if (ep->cfg.role == MOQ_QUIC_CLIENT) {
		cb->client_initial = ngtcp2_crypto_client_initial_cb;
		cb->recv_retry = ngtcp2_crypto_recv_retry_cb;
		cb->recv_stateless_reset = recv_sreset_cb;
	} else {
		cb->recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
	}
	cb->recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
	quic_aead_init();
	cb->encrypt = quic_encrypt_cb;
	cb->decrypt = quic_decrypt_cb;
	cb->hp_mask = quic_hp_mask_cb;
	cb->update_key = update_key_cb;
	cb->delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
	cb->delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
	cb->get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
	cb->version_negotiation = ngtcp2_crypto_version_negotiation_cb;
	cb->rand = rand_cb;
	cb->get_new_connection_id = get_new_cid_cb;
	cb->remove_connection_id = remove_cid_cb;
	cb->handshake_completed = handshake_completed_cb;
	cb->recv_stream_data = recv_stream_data_cb;
	cb->acked_stream_data_offset = acked_cb;
	cb->stream_open = stream_open_cb;
	cb->stream_close = stream_close_cb;
	cb->stream_reset = stream_reset_cb;
	cb->extend_max_local_streams_bidi = extend_streams_cb;
	cb->extend_max_local_streams_uni = extend_streams_cb;
	cb->extend_max_stream_data = extend_stream_data_cb;
	cb->dcid_status = dcid_status_cb;
}

static void settings_init(struct moq_quic_endpoint *ep, ngtcp2_settings *s, uint64_t now)
{
	ngtcp2_settings_default(s);
	s->initial_ts = now;
	s->max_tx_udp_payload_size = ep->cfg.max_udp_payload;
	s->handshake_timeout = ep->cfg.handshake_timeout_ns;
	s->rand_ctx.native_handle = ep;
	s->max_window = ep->cfg.max_data;
	s->max_stream_window = ep->cfg.max_stream_data;
	switch (ep->cfg.cc) {
	case MOQ_QUIC_CC_BBR:
		s->cc_algo = NGTCP2_CC_ALGO_BBR;
		break;
	case MOQ_QUIC_CC_RENO:
		s->cc_algo = NGTCP2_CC_ALGO_RENO;
		break;
	default:
		s->cc_algo = NGTCP2_CC_ALGO_CUBIC;
		break;
	}
	if (ep->cfg.debug)
		s->log_printf = log_cb;
}

static void params_init(struct moq_quic_endpoint *ep, ngtcp2_transport_params *p)
{
	ngtcp2_transport_params_default(p);
	p->initial_max_stream_data_bidi_local = ep->cfg.max_stream_data;
	p->initial_max_stream_data_bidi_remote = ep->cfg.max_stream_data;
	p->initial_max_stream_data_uni = ep->cfg.max_stream_data;
	p->initial_max_data = ep->cfg.max_data;
	p->initial_max_streams_bidi = ep->cfg.max_streams_bidi;
	p->initial_max_streams_uni = ep->cfg.max_streams_uni;
	p->max_idle_timeout = ep->cfg.idle_timeout_ns;
	p->active_connection_id_limit = ACTIVE_CID_LIMIT;
}

static struct moq_quic_conn *conn_alloc(struct moq_quic_endpoint *ep,
                                        const struct moq_quic_addr *local,
                                        const struct moq_quic_addr *remote, void *user)
{
	struct moq_quic_conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->ep = ep;
	c->ref.get_conn = get_conn;
	c->ref.user_data = c;
	c->user = user ? user : ep->cfg.user;
	c->hidx = UINT32_MAX;
	c->local = *local;
	c->remote = *remote;
	c->anext = ep->ahead;
	if (ep->ahead)
		ep->ahead->aprev = c;
	ep->ahead = c;
	ep->st.conns_active++;
	return c;
}

static void path_of(ngtcp2_path *path, const struct moq_quic_addr *local,
                    const struct moq_quic_addr *remote)
{
	memset(path, 0, sizeof(*path));
	path->local.addr = (ngtcp2_sockaddr *)(uintptr_t)&local->u.sa;
	path->local.addrlen = local->len;
	path->remote.addr = (ngtcp2_sockaddr *)(uintptr_t)&remote->u.sa;
	path->remote.addrlen = remote->len;
}

/* ----------------------------------------------------- stateless replies */

static struct sl_pkt *sl_slot(struct moq_quic_endpoint *ep)
{
	if (ep->slq_n == ep->slq_cap) {
		ep->st.stateless_queue_full++;
		return NULL;
	}
	return &ep->slq[(ep->slq_head + ep->slq_n) % ep->slq_cap];
}

/* Commit a reply written into @p: RFC 9000, 8.1: never more than three times
 * the bytes of the datagram that triggered it (no state, so the address is
 * never validated). */
static void sl_commit(struct moq_quic_endpoint *ep, struct sl_pkt *p, size_t len,
                      size_t trigger_len, const struct moq_quic_addr *local,
                      const struct moq_quic_addr *remote)
{
	if (len > AMPLIFICATION_FACTOR * trigger_len) {
		ep->st.amplification_drops++;
		return;
	}
	p->len = len;
	p->local = *local;
	p->remote = *remote;
	ep->slq_n++;
}

static void send_version_negotiation(struct moq_quic_endpoint *ep, const ngtcp2_version_cid *vc,
                                     size_t dgram_len, const struct moq_quic_addr *local,
                                     const struct moq_quic_addr *remote)
{
	/* RFC 9000, 6.1: list what we support; RFC 8999, 6: echo the CIDs
	 * swapped. */
	static const uint32_t versions[] = {NGTCP2_PROTO_VER_V1};
	struct sl_pkt *p;
	uint8_t r;
	ngtcp2_ssize n;

	if (dgram_len < MIN_INITIAL_DGRAM) {
		ep->st.pkts_dropped++;
		return;
	}
	p = sl_slot(ep);
	if (p == NULL)
		return;
	quic_rand(ep, &r, 1);
	n = ngtcp2_pkt_write_version_negotiation(p->buf, sizeof(p->buf), r, vc->scid, vc->scidlen,
	                                         vc->dcid, vc->dcidlen, versions, 1);
	if (n <= 0)
		return;
	ep->st.vn_sent++;
	sl_commit(ep, p, (size_t)n, dgram_len, local, remote);
}

static void send_retry(struct moq_quic_endpoint *ep, const ngtcp2_pkt_hd *hd, size_t dgram_len,
                       const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                       uint64_t now)
{
	uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN];
	ngtcp2_cid scid;
	ngtcp2_ssize tlen, n;
	struct sl_pkt *p;

	if (dgram_len < MIN_INITIAL_DGRAM) {
		ep->st.pkts_dropped++;
		return;
	}
	p = sl_slot(ep);
	if (p == NULL)
		return;
	make_cid(ep, &scid);
	/* RFC 9000, 8.1.2: the token binds the client address, the original
	 * DCID and a timestamp, authenticated with the static secret. */
	tlen = ngtcp2_crypto_generate_retry_token(token, ep->secret, sizeof(ep->secret),
	                                          hd->version, &remote->u.sa, remote->len, &scid,
	                                          &hd->dcid, now);
	if (tlen < 0)
		return;
	n = ngtcp2_crypto_write_retry(p->buf, sizeof(p->buf), hd->version, &hd->scid, &scid,
	                              &hd->dcid, token, (size_t)tlen);
	if (n <= 0)
		return;
	ep->st.retry_sent++;
	sl_commit(ep, p, (size_t)n, dgram_len, local, remote);
}

/* A CONNECTION_CLOSE in an Initial packet, without creating state
 * (refusals and invalid tokens, RFC 9000, 8.1.2 / 5.2.2). */
static void send_stateless_close(struct moq_quic_endpoint *ep, const ngtcp2_pkt_hd *hd,
                                 uint64_t code, size_t dgram_len, const struct moq_quic_addr *local,
                                 const struct moq_quic_addr *remote)
{
	ngtcp2_ssize n;
	struct sl_pkt *p = sl_slot(ep);

	if (p == NULL)
		return;
	/* SCID = the client's DCID: the Initial keys derive from it
	 * (RFC 9001, 5.2), so the client can read the close. */
	n = ngtcp2_crypto_write_connection_close(p->buf, sizeof(p->buf), hd->version, &hd->scid,
	                                         &hd->dcid, code, NULL, 0);
	if (n <= 0)
		return;
	sl_commit(ep, p, (size_t)n, dgram_len, local, remote);
}

/* RFC 9000, 10.3: a stateless reset for a short-header packet we have no
 * connection for; always shorter than the trigger (so two endpoints cannot
 * loop), rate-limited by a token bucket. */
static void send_stateless_reset(struct moq_quic_endpoint *ep, const uint8_t *dcid, size_t dcidlen,
                                 size_t dgram_len, const struct moq_quic_addr *local,
                                 const struct moq_quic_addr *remote, uint64_t now)
{
	uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN];
	uint8_t rnd[SRESET_SHORT_TRIGGER];
	ngtcp2_cid cid;
	size_t len;
	ngtcp2_ssize n;
	struct sl_pkt *p;
	double rate = ep->cfg.stateless_reset_per_s, burst = rate / 10 + 1;

	if (dgram_len <= SRESET_MIN_LEN) {
		ep->st.sreset_too_small++;
		return;
	}
	if (now > ep->sr_ts) {
		ep->sr_tokens += (double)(now - ep->sr_ts) * rate / 1e9;
		if (ep->sr_tokens > burst)
			ep->sr_tokens = burst;
		ep->sr_ts = now;
	}
	if (ep->sr_tokens < 1.0) {
		ep->st.sreset_rate_limited++;
		return;
	}
	p = sl_slot(ep);
	if (p == NULL)
		return;
	ep->sr_tokens -= 1.0;
	if (dgram_len <= SRESET_SHORT_TRIGGER) {
		len = dgram_len - 1;
	} else {
		uint8_t r;

		quic_rand(ep, &r, 1);
		/* between 43 bytes and the trigger - 1 */
		len = SRESET_SHORT_TRIGGER + r % (dgram_len - SRESET_SHORT_TRIGGER);
		if (len >= dgram_len)
			len = dgram_len - 1;
		if (len > sizeof(rnd) + 1 + NGTCP2_STATELESS_RESET_TOKENLEN)
			len = sizeof(rnd) + 1 + NGTCP2_STATELESS_RESET_TOKENLEN;
	}
	ngtcp2_cid_init(&cid, dcid, dcidlen);
	if (ngtcp2_crypto_generate_stateless_reset_token(token, ep->secret, sizeof(ep->secret),
	                                                 &cid) != 0)
		return;
	quic_rand(ep, rnd, sizeof(rnd));
	n = ngtcp2_pkt_write_stateless_reset(p->buf, sizeof(p->buf), token, rnd,
	                                     len - 1 - NGTCP2_STATELESS_RESET_TOKENLEN);
	if (n <= 0)
		return;
	ep->st.sreset_sent++;
	sl_commit(ep, p, (size_t)n, dgram_len, local, remote);
}

/* ------------------------------------------------------------ endpoint */

int moq_quic_cid_worker(const uint8_t *cid, size_t cidlen)
{
	if (cid == NULL || cidlen != MOQ_QUIC_CID_LEN)
		return MOQ_ERR_NOTFOUND;
	return cid[0];
}

int moq_quic_pkt_worker(const uint8_t *data, size_t len)
{
	if (data == NULL || len < 1)
		return MOQ_ERR_DECODE;
	if (data[0] & 0x80) {
		/* RFC 8999, 5.1: long header; byte 5 is the DCID length. */
		uint32_t version;
		uint8_t type;

		if (len < 6)
			return MOQ_ERR_DECODE;
		if (6 + (size_t)data[5] > len)
			return MOQ_ERR_DECODE;
		version = (uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 |
		          (uint32_t)data[3] << 8 | data[4];
		type = (data[0] >> 4) & 0x3;
		/* RFC 9000, 17.2: Initial (0) and 0-RTT (1) may carry the
		 * client's random DCID. */
		if (version != NGTCP2_PROTO_VER_V1 || type == 0 || type == 1)
			return MOQ_ERR_NOTFOUND;
		return moq_quic_cid_worker(data + 6, data[5]);
	}
	if (len < 1 + MOQ_QUIC_CID_LEN)
		return MOQ_ERR_DECODE;
	return moq_quic_cid_worker(data + 1, MOQ_QUIC_CID_LEN);
}

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t p = 16;

	while (p < n && p < (1u << 30))
		p <<= 1;
	return p;
}

static char *dupstr(const char *s)
{
	return s ? strdup(s) : NULL;
}

struct moq_quic_endpoint *moq_quic_endpoint_new(const struct moq_quic_config *cfg, int *err)
{
	struct moq_quic_endpoint *ep;
	const char *why;
	size_t i;
	int rv = MOQ_ERR_CONFIG;

	if (cfg == NULL || cfg->alpn == NULL || cfg->alpn_count == 0 ||
	    cfg->alpn_count > QUIC_ALPN_MAX_IDS ||
	    (cfg->role != MOQ_QUIC_SERVER && cfg->role != MOQ_QUIC_CLIENT) ||
	    (cfg->cert_file == NULL) != (cfg->key_file == NULL) ||
	    cfg->max_udp_payload > MOQ_QUIC_MAX_UDP_PAYLOAD ||
	    (cfg->max_udp_payload != 0 && cfg->max_udp_payload < MOQ_QUIC_MIN_PKT_BUF))
		goto fail_arg;
	for (i = 0; i < cfg->alpn_count; i++) {
		size_t l = cfg->alpn[i] ? strlen(cfg->alpn[i]) : 0;

		if (l == 0 || l > MOQ_QUIC_ALPN_MAX)
			goto fail_arg;
	}
	rv = moq_quic_check_tls(&why);
	if (rv != 0) {
		fprintf(stderr, "moqdp quic: %s\n", why);
		goto fail_arg;
	}
	rv = MOQ_ERR_NOMEM;
	ep = calloc(1, sizeof(*ep));
	if (ep == NULL)
		goto fail_arg;
	ep->cfg = *cfg;
	/* defaults */
#define DEF(f, v)                                                                                  \
	do {                                                                                       \
		if (ep->cfg.f == 0)                                                                \
			ep->cfg.f = (v);                                                           \
	} while (0)
	DEF(max_conns, DEF_MAX_CONNS);
	DEF(max_half_open, DEF_MAX_HALF_OPEN);
	DEF(max_conns_per_addr, DEF_MAX_PER_ADDR);
	DEF(max_streams_bidi, DEF_STREAMS_BIDI);
	DEF(max_streams_uni, DEF_STREAMS_UNI);
	DEF(max_stream_data, DEF_STREAM_DATA);
	DEF(max_data, DEF_MAX_DATA);
	DEF(handshake_timeout_ns, DEF_HS_TIMEOUT);
	DEF(idle_timeout_ns, DEF_IDLE_TIMEOUT);
	DEF(max_udp_payload, MOQ_QUIC_MAX_UDP_PAYLOAD);
	DEF(retry_threshold, ep->cfg.max_half_open / 2 ? ep->cfg.max_half_open / 2 : 1);
	DEF(retry_token_lifetime_ns, DEF_TOKEN_LIFETIME);
	DEF(stateless_reset_per_s, DEF_SRESET_RATE);
	DEF(stateless_queue, DEF_SL_QUEUE);
#undef DEF
	ep->cfg.alpn = NULL;
	ep->alpn_count = cfg->alpn_count;
	for (i = 0; i < cfg->alpn_count; i++) {
		size_t l = strlen(cfg->alpn[i]);

		ep->alpn[i] = strdup(cfg->alpn[i]);
		if (ep->alpn[i] == NULL)
			goto fail_strings;
		ep->alpn_len[i] = l;
		/* RFC 7301, 3.1: ProtocolNameList, one length byte each. */
		ep->alpn_wire[ep->alpn_wire_len++] = (uint8_t)l;
		memcpy(ep->alpn_wire + ep->alpn_wire_len, cfg->alpn[i], l);
		ep->alpn_wire_len += l;
		if (i > 0)
			strcat(ep->alpn_csv, ",");
		strcat(ep->alpn_csv, cfg->alpn[i]);
	}
	ep->cert_file = dupstr(cfg->cert_file);
	ep->key_file = dupstr(cfg->key_file);
	ep->ca_file = dupstr(cfg->ca_file);
	ep->server_name = dupstr(cfg->server_name ? cfg->server_name : "localhost");
	if ((cfg->cert_file && !ep->cert_file) || (cfg->key_file && !ep->key_file) ||
	    (cfg->ca_file && !ep->ca_file) || !ep->server_name)
		goto fail_strings;
	ep->cfg.cert_file = ep->cert_file;
	ep->cfg.key_file = ep->key_file;
	ep->cfg.ca_file = ep->ca_file;
	ep->cfg.server_name = ep->server_name;

	rv = quic_rng_init(ep);
	if (rv != 0)
		goto fail_strings;
	if (cfg->secret)
		memcpy(ep->secret, cfg->secret, MOQ_QUIC_SECRET_LEN);
	else
		quic_rand(ep, ep->secret, MOQ_QUIC_SECRET_LEN);
	ep->cfg.secret = NULL;
	quic_rand(ep, (uint8_t *)&ep->hash_key, sizeof(ep->hash_key));

	rv = MOQ_ERR_NOMEM;
	if (ktab_init(&ep->ctab, (uint64_t)ep->cfg.max_conns * QUIC_CONN_MAX_CIDS) != 0 ||
	    ktab_init(&ep->ttab, (uint64_t)ep->cfg.max_conns * QUIC_CONN_MAX_TOKENS) != 0)
		goto fail_tables;
	ep->atab_cap = pow2_at_least((uint64_t)ep->cfg.max_conns * 2);
	ep->atab = calloc(ep->atab_cap, sizeof(*ep->atab));
	ep->heap_cap = ep->cfg.max_conns;
	ep->heap = calloc(ep->heap_cap, sizeof(*ep->heap));
	ep->slq_cap = ep->cfg.stateless_queue;
	ep->slq = calloc(ep->slq_cap, sizeof(*ep->slq));
	if (!ep->atab || !ep->heap || !ep->slq)
		goto fail_tables;
	ep->sr_tokens = ep->cfg.stateless_reset_per_s / 10.0 + 1;

	rv = mem_init(ep);
	if (rv != 0)
		goto fail_tables;
	rv = quic_tls_ctx_new(ep);
	if (rv != 0)
		goto fail_tables;
	setup_callbacks(ep);
	if (err)
		*err = 0;
	return ep;

fail_tables:
	mem_fini(ep);
	free(ep->slq);
	free(ep->heap);
	free(ep->atab);
	ktab_fini(&ep->ttab);
	ktab_fini(&ep->ctab);
	quic_rng_free(ep);
fail_strings:
	for (i = 0; i < QUIC_ALPN_MAX_IDS; i++)
		free(ep->alpn[i]);
	free(ep->cert_file);
	free(ep->key_file);
	free(ep->ca_file);
	free(ep->server_name);
	free(ep);
fail_arg:
	if (err)
		*err = rv;
	return NULL;
}

void moq_quic_endpoint_free(struct moq_quic_endpoint *ep)
{
	size_t i;

	if (ep == NULL)
		return;
	while (ep->ahead)
		conn_free(ep->ahead);
	mem_fini(ep);
	quic_tls_ctx_free(ep);
	free(ep->slq);
	free(ep->heap);
	free(ep->atab);
	ktab_fini(&ep->ttab);
	ktab_fini(&ep->ctab);
	quic_rng_free(ep);
	while (ep->sfree != NULL) {
		struct quic_strm *s = ep->sfree;

		ep->sfree = s->pnext;
		free(s->ents);
		free(s);
	}
	for (i = 0; i < QUIC_ALPN_MAX_IDS; i++)
		free(ep->alpn[i]);
	free(ep->cert_file);
	free(ep->key_file);
	free(ep->ca_file);
	free(ep->server_name);
	free(ep);
}

/* Feed one datagram to an existing connection. */
static void conn_recv(struct moq_quic_conn *c, const uint8_t *data, size_t len,
                      const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                      uint64_t now)
{
	ngtcp2_path path;
	ngtcp2_pkt_info pi;
	int rv;

	if (c->state == CS_CLOSING) {
		/* RFC 9000, 10.2.1: resend CONNECTION_CLOSE, rate-limited
		 * (on the 1st, 2nd, 4th, 8th ... packet). */
		c->closing_rx++;
		if ((c->closing_rx & (c->closing_rx - 1)) == 0) {
			c->close_pending = 1;
			ready_add(c);
		}
		return;
	}
	if (c->state >= CS_DRAINING)
		return;
	memset(&pi, 0, sizeof(pi));
	path_of(&path, local, remote);
	c->bytes_recv += len;
	c->in_ng = 1;
	rv = ngtcp2_conn_read_pkt(c->q, &path, &pi, data, len, now);
	c->in_ng = 0;
	if (rv != 0)
		conn_fail(c, rv, now);
	else
		conn_after_ng(c, now);
	if (c->state < CS_CLOSING) {
		const ngtcp2_path *cur = ngtcp2_conn_get_path(c->q);

		if (cur->remote.addrlen <= sizeof(c->remote.u)) {
			memcpy(&c->remote.u, cur->remote.addr, cur->remote.addrlen);
			c->remote.len = cur->remote.addrlen;
		}
		ready_add(c);
	}
	conn_update_timer(c);
}

static int need_retry(const struct moq_quic_endpoint *ep)
{
	switch (ep->cfg.retry) {
	case MOQ_QUIC_RETRY_ALWAYS:
		return 1;
	case MOQ_QUIC_RETRY_NEVER:
		return 0;
	default:
		return ep->st.half_open >= ep->cfg.retry_threshold;
	}
}

/* A first packet from a client: vet it, apply the limits, Retry or accept. */
static void server_accept(struct moq_quic_endpoint *ep, const uint8_t *data, size_t len,
                          const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                          uint64_t now)
{
	ngtcp2_pkt_hd hd;
	ngtcp2_cid odcid, scid;
	ngtcp2_settings s;
	ngtcp2_transport_params p;
	ngtcp2_path path;
	struct moq_quic_conn *c;
	struct addr_ent *ae;
	int validated = 0, rv;

	rv = ngtcp2_accept(&hd, data, len);
	if (rv == NGTCP2_ERR_RETRY) {
		send_retry(ep, &hd, len, local, remote, now);
		return;
	}
	if (rv != 0) {
		ep->st.pkts_dropped++;
		return;
	}
	if (ep->st.conns_active >= ep->cfg.max_conns) {
		ep->st.refused_conns++;
		send_stateless_close(ep, &hd, NGTCP2_CONNECTION_REFUSED, len, local, remote);
		return;
	}
	ae = atab_get(ep, remote, 1);
	if (ae == NULL) {
		atab_compact(ep);
		ae = atab_get(ep, remote, 1);
	}
	if (ae == NULL || ae->count >= ep->cfg.max_conns_per_addr) {
		ep->st.refused_per_addr++;
		send_stateless_close(ep, &hd, NGTCP2_CONNECTION_REFUSED, len, local, remote);
		return;
	}
	if (hd.type == NGTCP2_PKT_INITIAL && hd.token.len > 0 &&
	    hd.token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
		if (ngtcp2_crypto_verify_retry_token(&odcid, hd.token.base, hd.token.len,
		                                     ep->secret, sizeof(ep->secret), hd.version,
		                                     &remote->u.sa, remote->len, &hd.dcid,
		                                     ep->cfg.retry_token_lifetime_ns, now) != 0) {
			/* RFC 9000, 8.1.2: close with INVALID_TOKEN. */
			ep->st.retry_token_bad++;
			send_stateless_close(ep, &hd, NGTCP2_INVALID_TOKEN, len, local, remote);
			return;
		}
		validated = 1;
	} else if (need_retry(ep)) {
		if (hd.type == NGTCP2_PKT_INITIAL)
			send_retry(ep, &hd, len, local, remote, now);
		else
			ep->st.pkts_dropped++;
		return;
	}
	if (ep->st.half_open >= ep->cfg.max_half_open) {
		ep->st.refused_half_open++;
		send_stateless_close(ep, &hd, NGTCP2_CONNECTION_REFUSED, len, local, remote);
		return;
	}

	c = conn_alloc(ep, local, remote, NULL);
	if (c == NULL) {
		ep->st.pkts_dropped++;
		return;
	}
	c->server = 1;
	ep->st.conns_accepted++;
	c->half_open = 1;
	ep->st.half_open++;
	ae->count++;
	c->addr_slot_valid = 1;
	c->counted_addr = *remote;
	c->notified = 1; /* nothing handed out until conn_new */

	make_cid(ep, &scid);
	settings_init(ep, &s, now);
	params_init(ep, &p);
	if (validated) {
		/* RFC 9000, 7.3: after Retry, original_destination_connection_id
		 * is the first DCID, retry_source_connection_id ours. */
		p.original_dcid = odcid;
		p.retry_scid = hd.dcid;
		p.retry_scid_present = 1;
		s.token = hd.token;
	} else {
		p.original_dcid = hd.dcid;
	}
	p.stateless_reset_token_present = 1;
	if (ngtcp2_crypto_generate_stateless_reset_token(p.stateless_reset_token, ep->secret,
	                                                 sizeof(ep->secret), &scid) != 0)
		goto fail_conn;
	path_of(&path, local, remote);
	if (ngtcp2_conn_server_new(&c->q, &hd.scid, &scid, &path, hd.version, &ep->cbs, &s, &p,
	                           &ep->mem, c) != 0) {
		c->q = NULL;
		goto fail_conn;
	}
	if (quic_tls_conn_new(c) != 0)
		goto fail_conn;
	ngtcp2_conn_set_tls_native_handle(c->q, c->ssl);
	if (ep->cfg.keep_alive_ns)
		ngtcp2_conn_set_keep_alive_timeout(c->q, ep->cfg.keep_alive_ns);
	if (conn_add_cid(c, scid.data, scid.datalen) != 0 ||
	    conn_add_cid(c, hd.dcid.data, hd.dcid.datalen) != 0)
		goto fail_conn;
	/* After a Retry the client's first DCID (carried in the token) is
	 * this connection's too: its token-less Initial, late or retransmitted
	 * when the Retry was lost, reaches it (and is dropped there) instead
	 * of making a second half-open connection that never completes. When
	 * the DCID is taken already (that Initial got its own connection),
	 * nothing is registered. */
	if (validated && odcid.datalen > 0)
		(void)conn_add_cid(c, odcid.data, odcid.datalen);
	c->notified = 0;
	if (ep->cfg.cb && ep->cfg.cb->conn_new)
		ep->cfg.cb->conn_new(c, c->user);
	conn_recv(c, data, len, local, remote, now);
	return;

fail_conn:
	ep->st.pkts_dropped++;
	conn_free(c);
}

static void free_dead(struct moq_quic_endpoint *ep, struct moq_quic_conn *c)
{
	if (c && c->state == CS_DEAD)
		conn_free(c);
	(void)ep;
}

int moq_quic_endpoint_recv(struct moq_quic_endpoint *ep, const uint8_t *data, size_t len,
                           const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                           uint64_t now)
{
	ngtcp2_version_cid vc;
	struct moq_quic_conn *c;
	int rv;

	if (ep == NULL || data == NULL || local == NULL || remote == NULL || len == 0 ||
	    local->len > sizeof(local->u) || remote->len > sizeof(remote->u))
		return MOQ_ERR_INVAL;
	ep->now = now;
	ep->st.pkts_in++;
	ep->st.bytes_in += len;
	rv = ngtcp2_pkt_decode_version_cid(&vc, data, len, MOQ_QUIC_CID_LEN);
	if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
		if (ep->cfg.role == MOQ_QUIC_SERVER)
			send_version_negotiation(ep, &vc, len, local, remote);
		else
			ep->st.pkts_dropped++;
		return 0;
	}
	if (rv != 0) {
		ep->st.pkts_dropped++;
		return 0;
	}
	c = ctab_find(ep, vc.dcid, vc.dcidlen);
	if (c != NULL) {
		conn_recv(c, data, len, local, remote, now);
		free_dead(ep, c);
		return 0;
	}
	if (!(data[0] & 0x80)) {
		/* short header, unknown CID. RFC 9000, 10.3.1: a stateless reset carries a random DCID;
		 * its last 16 bytes are the token of one of our connections */
		if (len >= SRESET_MIN_LEN) {
			c = ktab_find(ep, &ep->ttab, data + len - NGTCP2_STATELESS_RESET_TOKENLEN,
			              NGTCP2_STATELESS_RESET_TOKENLEN);
			if (c != NULL) {
				conn_recv(c, data, len, local, remote, now);
				free_dead(ep, c);
				return 0;
			}
		}
		/* a CID another worker chose: the caller forwards it */
		if (vc.dcidlen == MOQ_QUIC_CID_LEN && vc.dcid[0] != ep->cfg.worker_id) {
			ep->st.pkts_wrong_worker++;
			return MOQ_ERR_NOTFOUND;
		}
		ep->st.pkts_dropped++;
		send_stateless_reset(ep, vc.dcid, vc.dcidlen, len, local, remote, now);
		return 0;
	}
	/* a Handshake packet carries a DCID we chose: maybe another worker's
	 * (RFC 9000, 17.2.4); Initial / 0-RTT DCIDs may be the client's */
	if (((data[0] >> 4) & 0x3) == 2 && vc.version == NGTCP2_PROTO_VER_V1 &&
	    vc.dcidlen == MOQ_QUIC_CID_LEN && vc.dcid[0] != ep->cfg.worker_id) {
		ep->st.pkts_wrong_worker++;
		return MOQ_ERR_NOTFOUND;
	}
	if (ep->cfg.role != MOQ_QUIC_SERVER) {
		ep->st.pkts_dropped++;
		return 0;
	}
	server_accept(ep, data, len, local, remote, now);
	return 0;
}

/* Copy a socket address; IPv4 as a fixed-size copy (per packet). */
static inline void addr_set(struct moq_quic_addr *dst, const ngtcp2_sockaddr *sa,
                            ngtcp2_socklen len)
{
	if (len == sizeof(struct sockaddr_in))
		dst->u.in4 = *(const struct sockaddr_in *)(const void *)sa;
	else
		memcpy(&dst->u, sa, len <= sizeof(dst->u) ? len : sizeof(dst->u));
	dst->len = len;
}

/* Write up to @n packets of @c into @pkts; returns the count and sets *more
 * when the connection may still have something to send. */
static size_t conn_write(struct moq_quic_conn *c, struct moq_quic_pkt *pkts, size_t n, uint64_t now,
                         int *more)
{
	struct moq_quic_endpoint *ep = c->ep;
	ngtcp2_path_storage ps;
	ngtcp2_pkt_info pi;
	size_t i = 0, max_pkts, maxlen;

	*more = 0;
	if (c->state == CS_CLOSING) {
		if (c->close_pending && n > 0 && pkts[0].cap >= c->close_len) {
			memcpy(pkts[0].data, c->close_buf, c->close_len);
			pkts[0].len = c->close_len;
			pkts[0].local = c->local;
			pkts[0].remote = c->remote;
			pkts[0].ecn = 0;
			c->close_pending = 0;
			return 1;
		}
		return 0;
	}
	if (c->state >= CS_DRAINING)
		return 0;

	maxlen = ngtcp2_conn_get_max_tx_udp_payload_size(c->q);
	max_pkts = ngtcp2_conn_get_send_quantum(c->q) / maxlen;
	if (max_pkts == 0)
		max_pkts = 1;
	if (max_pkts > n)
		max_pkts = n;
	ngtcp2_path_storage_zero(&ps);

	while (i < max_pkts) {
		struct moq_quic_pkt *pk = &pkts[i];
		size_t cap = pk->cap < ep->cfg.max_udp_payload ? pk->cap : ep->cfg.max_udp_payload;
		uint32_t tries = c->npend + 1;
		ngtcp2_ssize nw;

		for (;;) {
			/* the most urgent non-empty class; round robin inside it */
			struct quic_strm *s = tries > 0 && c->pend_mask
			                              ? c->pend_head[__builtin_ctz(c->pend_mask)]
			                              : NULL;
			ngtcp2_vec v[WRITE_VECS];
			size_t vcnt = 0;
			int64_t sid = -1;
			uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
			ngtcp2_ssize ndatalen = -1;
			int all = 0;

			if (tries > 0)
				tries--;
			if (s) {
				vcnt = strm_vecs(s, v, WRITE_VECS, cap, &all);
				sid = s->id;
				if (all && s->fin_queued)
					flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
			}
			c->in_ng = 1;
			nw = ngtcp2_conn_writev_stream(c->q, &ps.path, &pi, pk->data, cap,
			                               &ndatalen, flags, sid, v, vcnt, now);
			c->in_ng = 0;
			if (s && ndatalen >= 0) {
				strm_advance(s, (size_t)ndatalen);
				if ((flags & NGTCP2_WRITE_STREAM_FLAG_FIN) &&
				    s->sent_off == s->end_off)
					s->fin_sent = 1;
				pend_del(c, s);
				if (strm_has_unsent(s))
					pend_add(c, s); /* to the tail: round robin */
			}
			if (nw == NGTCP2_ERR_WRITE_MORE)
				continue;
			if (nw == NGTCP2_ERR_STREAM_DATA_BLOCKED && s) {
				pend_del(c, s);
				s->blocked = 1;
				continue;
			}
			if ((nw == NGTCP2_ERR_STREAM_SHUT_WR ||
			     nw == NGTCP2_ERR_STREAM_NOT_FOUND) &&
			    s) {
				pend_del(c, s);
				s->wr_closed = 1;
				continue;
			}
			break;
		}
		if (nw < 0) {
			conn_fail(c, (int)nw, now);
			if (c->state == CS_CLOSING && i < n)
				i += conn_write(c, pkts + i, n - i, now, more);
			*more = 0;
			return i;
		}
		if (nw == 0)
			break;
		pk->len = (size_t)nw;
		addr_set(&pk->local, ps.path.local.addr, ps.path.local.addrlen);
		addr_set(&pk->remote, ps.path.remote.addr, ps.path.remote.addrlen);
		pk->ecn = (uint8_t)pi.ecn;
		c->bytes_sent += (size_t)nw;
		i++;
		if (i == max_pkts)
			*more = 1;
	}
	if (i > 0)
		ngtcp2_conn_update_pkt_tx_time(c->q, now);
	if (c->close_req) {
		/* the application closed from a callback during the write */
		conn_after_ng(c, now);
		if (c->state == CS_CLOSING && i < n)
			i += conn_write(c, pkts + i, n - i, now, more);
		*more = 0;
	}
	return i;
}

int moq_quic_endpoint_send(struct moq_quic_endpoint *ep, struct moq_quic_pkt *pkts, size_t n,
                           uint64_t now)
{
	size_t i = 0, k, rounds;

	if (ep == NULL || (pkts == NULL && n > 0))
		return MOQ_ERR_INVAL;
	for (k = 0; k < n; k++)
		if (pkts[k].data == NULL || pkts[k].cap < MOQ_QUIC_MIN_PKT_BUF)
			return MOQ_ERR_INVAL;
	ep->now = now;
	/* stateless replies first */
	while (i < n && ep->slq_n > 0) {
		struct sl_pkt *p = &ep->slq[ep->slq_head];

		memcpy(pkts[i].data, p->buf, p->len);
		pkts[i].len = p->len;
		pkts[i].local = p->local;
		pkts[i].remote = p->remote;
		pkts[i].ecn = 0;
		ep->slq_head = (ep->slq_head + 1) % ep->slq_cap;
		ep->slq_n--;
		i++;
	}
	/* connections round robin; each visited at most once per call */
	rounds = 0;
	for (k = 0; ep->rhead; k++) {
		struct moq_quic_conn *c = ep->rhead;
		int more = 0;

		if (i >= n)
			break;
		if (rounds == 0)
			rounds = ep->rcount; /* those ready now, once each */
		if (k >= rounds)
			break;
		ready_del(c);
		i += conn_write(c, pkts + i, n - i, now, &more);
		if (c->state == CS_DEAD) {
			conn_free(c);
			continue;
		}
		if (more)
			ready_add(c);
		conn_update_timer(c);
	}
	ep->st.pkts_out += i;
	for (k = 0; k < i; k++)
		ep->st.bytes_out += pkts[k].len;
	return (int)i;
}

int moq_quic_endpoint_timers(struct moq_quic_endpoint *ep, uint64_t now)
{
	int done = 0;

	if (ep == NULL)
		return MOQ_ERR_INVAL;
	ep->now = now;
	while (ep->heap_n > 0 && ep->heap[0]->hkey <= now) {
		struct moq_quic_conn *c = ep->heap[0];
		int rv;

		done++;
		if (c->state >= CS_CLOSING) {
			/* end of the closing / draining period */
			conn_free(c);
			continue;
		}
		c->in_ng = 1;
		rv = ngtcp2_conn_handle_expiry(c->q, now);
		c->in_ng = 0;
		if (rv != 0)
			conn_fail(c, rv, now);
		else
			conn_after_ng(c, now);
		if (c->state == CS_DEAD) {
			conn_free(c);
			continue;
		}
		ready_add(c);
		conn_update_timer(c);
		/* an expiry ngtcp2 does not clear (pacing) is retried by _send */
		if (c->hidx != UINT32_MAX && c->hkey <= now)
			heap_set(ep, c, now + 1);
	}
	return done;
}

uint64_t moq_quic_endpoint_next_expiry(const struct moq_quic_endpoint *ep)
{
	if (ep == NULL || ep->heap_n == 0)
		return UINT64_MAX;
	return ep->heap[0]->hkey;
}

int moq_quic_endpoint_pending(const struct moq_quic_endpoint *ep)
{
	return ep != NULL && (ep->slq_n > 0 || ep->rhead != NULL);
}

void moq_quic_endpoint_stats(const struct moq_quic_endpoint *ep, struct moq_quic_stats *out)
{
	if (ep && out)
		*out = ep->st;
}

int moq_quic_endpoint_fingerprint(const struct moq_quic_endpoint *ep, uint8_t out[32])
{
	if (ep == NULL || out == NULL)
		return MOQ_ERR_INVAL;
	if (!ep->have_fp)
		return MOQ_ERR_STATE;
	memcpy(out, ep->fp, 32);
	return 0;
}

char *moq_quic_fingerprint_str(const uint8_t fp[32], char *buf, size_t buflen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i, o = 0;

	if (buf == NULL || buflen == 0)
		return buf;
	for (i = 0; i < 32 && o + 3 < buflen; i++) {
		if (i)
			buf[o++] = ':';
		buf[o++] = hex[fp[i] >> 4];
		buf[o++] = hex[fp[i] & 15];
	}
	buf[o] = '\0';
	return buf;
}

uint8_t moq_quic_endpoint_worker(const struct moq_quic_endpoint *ep)
{
	return ep->cfg.worker_id;
}

struct moq_quic_conn *moq_quic_connect(struct moq_quic_endpoint *ep,
                                       const struct moq_quic_addr *local,
                                       const struct moq_quic_addr *remote, void *user, uint64_t now,
                                       int *err)
{
	struct moq_quic_conn *c;
	ngtcp2_cid dcid, scid;
	ngtcp2_settings s;
	ngtcp2_transport_params p;
	ngtcp2_path path;
	int rv = MOQ_ERR_INVAL;

	if (ep == NULL || local == NULL || remote == NULL || local->len > sizeof(local->u) ||
	    remote->len > sizeof(remote->u))
		goto fail_arg;
	rv = MOQ_ERR_STATE;
	if (ep->cfg.role != MOQ_QUIC_CLIENT)
		goto fail_arg;
	rv = MOQ_ERR_LIMIT;
	if (ep->st.conns_active >= ep->cfg.max_conns)
		goto fail_arg;
	ep->now = now;
	rv = MOQ_ERR_NOMEM;
	c = conn_alloc(ep, local, remote, user);
	if (c == NULL)
		goto fail_arg;
	c->notified = 1;
	/* RFC 9000, 7.2: the first DCID is unpredictable, >= 8 bytes. */
	dcid.datalen = MOQ_QUIC_CID_LEN;
	quic_rand(ep, dcid.data, dcid.datalen);
	make_cid(ep, &scid);
	settings_init(ep, &s, now);
	params_init(ep, &p);
	path_of(&path, local, remote);
	rv = MOQ_ERR_CRYPTO;
	if (ngtcp2_conn_client_new(&c->q, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &ep->cbs, &s,
	                           &p, &ep->mem, c) != 0) {
		c->q = NULL;
		goto fail_conn;
	}
	if (quic_tls_conn_new(c) != 0)
		goto fail_conn;
	ngtcp2_conn_set_tls_native_handle(c->q, c->ssl);
	if (ep->cfg.keep_alive_ns)
		ngtcp2_conn_set_keep_alive_timeout(c->q, ep->cfg.keep_alive_ns);
	rv = MOQ_ERR_LIMIT;
	if (conn_add_cid(c, scid.data, scid.datalen) != 0)
		goto fail_conn;
	c->notified = 0;
	ready_add(c);
	conn_update_timer(c);
	if (err)
		*err = 0;
	return c;

fail_conn:
	conn_free(c);
fail_arg:
	if (err)
		*err = rv;
	return NULL;
}

void *moq_quic_conn_user(const struct moq_quic_conn *c)
{
	return c->user;
}

void moq_quic_conn_set_user(struct moq_quic_conn *c, void *user)
{
	c->user = user;
}

struct moq_quic_endpoint *moq_quic_conn_endpoint(const struct moq_quic_conn *c)
{
	return c->ep;
}

const char *moq_quic_conn_alpn(const struct moq_quic_conn *c)
{
	return c->alpn[0] ? c->alpn : NULL;
}

int moq_quic_conn_is_server(const struct moq_quic_conn *c)
{
	return c->server;
}

const struct moq_quic_addr *moq_quic_conn_remote(const struct moq_quic_conn *c)
{
	return &c->remote;
}

void moq_quic_conn_get_info(const struct moq_quic_conn *c, struct moq_quic_conn_info *out)
{
	ngtcp2_conn_stat cs;

	memset(out, 0, sizeof(*out));
	if (c->q == NULL)
		return;
	ngtcp2_conn_get_conn_stat(c->q, &cs);
	out->smoothed_rtt_ns = cs.smoothed_rtt;
	out->min_rtt_ns = cs.min_rtt;
	out->cwnd = cs.cwnd;
	out->bytes_in_flight = cs.bytes_in_flight;
	out->bytes_sent = c->bytes_sent;
	out->bytes_recv = c->bytes_recv;
	out->established = c->state == CS_ESTABLISHED;
	out->validated = c->state == CS_ESTABLISHED || !c->server;
	out->key_updates = c->key_updates;
}

int moq_quic_conn_close(struct moq_quic_conn *c, uint64_t app_err, const char *reason)
{
	struct moq_quic_close_info info;
	ngtcp2_connection_close_error e;

	if (c == NULL)
		return MOQ_ERR_INVAL;
	if (c->notified || c->state >= CS_CLOSING)
		return 0;
	c->close_code = app_err;
	snprintf(c->close_reason, sizeof(c->close_reason), "%s", reason ? reason : "");
	if (c->in_ng) {
		/* inside an ngtcp2 callback: tell the application now, write
		 * the CONNECTION_CLOSE when ngtcp2 returns */
		c->close_req = 1;
		memset(&info, 0, sizeof(info));
		info.kind = MOQ_QUIC_CLOSE_APPLICATION;
		info.local = 1;
		info.code = app_err;
		info.err = app_err == 0 ? 0 : MOQ_ERR_CLOSED;
		info.what = "application close";
		conn_notify(c, &info);
		return 0;
	}
	ngtcp2_connection_close_error_set_application_error(
	        &e, app_err, (const uint8_t *)c->close_reason, strlen(c->close_reason));
	/* the endpoint's latest timestamp: ngtcp2 needs one >= the last it saw */
	conn_start_closing(c, &e, c->ep->now);
	return 0;
}

int moq_quic_conn_update_key(struct moq_quic_conn *c, uint64_t now)
{
	int rv;

	if (c == NULL)
		return MOQ_ERR_INVAL;
	if (c->state != CS_ESTABLISHED)
		return MOQ_ERR_STATE;
	rv = ngtcp2_conn_initiate_key_update(c->q, now);
	if (rv != 0) {
		/* ngtcp2 derives the next keys during a write: schedule one so
		 * that a retry after the next _send can succeed */
		ready_add(c);
		return MOQ_ERR_STATE;
	}
	ready_add(c);
	return 0;
}

int moq_quic_stream_open(struct moq_quic_conn *c, int bidi, int64_t *sid)
{
	struct quic_strm *s;
	int64_t id;
	int rv;

	if (c == NULL || sid == NULL)
		return MOQ_ERR_INVAL;
	if (c->state != CS_ESTABLISHED || c->notified)
		return MOQ_ERR_STATE;
	s = strm_get(c->ep);
	if (s == NULL)
		return MOQ_ERR_NOMEM;
	rv = bidi ? ngtcp2_conn_open_bidi_stream(c->q, &id, s)
	          : ngtcp2_conn_open_uni_stream(c->q, &id, s);
	if (rv != 0) {
		strm_put(c->ep, s);
		if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED) {
			c->ep->st.refused_streams++;
			return MOQ_ERR_AGAIN;
		}
		return MOQ_ERR_NOMEM;
	}
	s->id = id;
	if (smap_add(c, s) != 0) {
		ngtcp2_conn_set_stream_user_data(c->q, id, NULL);
		ngtcp2_conn_shutdown_stream(c->q, id, 0);
		strm_put(c->ep, s);
		return MOQ_ERR_NOMEM;
	}
	*sid = id;
	return 0;
}

long moq_quic_stream_write(struct moq_quic_conn *c, int64_t sid, const struct iovec *iov,
                           size_t iovcnt, int fin)
{
	struct quic_strm *s;
	size_t k, need = 0;
	long total = 0;

	if (c == NULL || (iov == NULL && iovcnt > 0))
		return MOQ_ERR_INVAL;
	if (c->state != CS_ESTABLISHED || c->notified)
		return MOQ_ERR_STATE;
	s = smap_find(c, sid);
	/* a receive-only stream: the peer's unidirectional one */
	if (s == NULL || (!ngtcp2_is_bidi_stream(sid) && !ngtcp2_conn_is_local_stream(c->q, sid)))
		return MOQ_ERR_NOTFOUND;
	if (s->fin_queued || s->wr_closed)
		return MOQ_ERR_CLOSED;
	for (k = 0; k < iovcnt; k++)
		if (iov[k].iov_len > 0)
			need++;
	if (s->n + need > s->cap) {
		uint32_t ncap = s->cap ? s->cap : 8;
		struct sq_ent *ne;

		/* reclaim acknowledged entries first */
		if (s->head > 0) {
			memmove(s->ents, s->ents + s->head, (s->n - s->head) * sizeof(*s->ents));
			s->n -= s->head;
			s->send_idx -= s->head;
			s->head = 0;
		}
		while (s->n + need > ncap)
			ncap *= 2;
		if (ncap != s->cap) {
			ne = realloc(s->ents, ncap * sizeof(*ne));
			if (ne == NULL)
				return MOQ_ERR_NOMEM;
			s->ents = ne;
			s->cap = ncap;
		}
	}
	for (k = 0; k < iovcnt; k++) {
		if (iov[k].iov_len == 0)
			continue;
		s->ents[s->n].base = iov[k].iov_base;
		s->ents[s->n].len = iov[k].iov_len;
		s->n++;
		s->end_off += iov[k].iov_len;
		total += (long)iov[k].iov_len;
	}
	if (fin)
		s->fin_queued = 1;
	if (strm_has_unsent(s))
		pend_add(c, s);
	ready_add(c);
	return total;
}

long moq_quic_stream_queued(const struct moq_quic_conn *c, int64_t sid)
{
	const struct quic_strm *s = c ? smap_find(c, sid) : NULL;

	if (s == NULL)
		return MOQ_ERR_NOTFOUND;
	return (long)(s->end_off - s->acked_off);
}

int moq_quic_stream_reset(struct moq_quic_conn *c, int64_t sid, uint64_t app_err)
{
	struct quic_strm *s;

	if (c == NULL || c->state >= CS_CLOSING)
		return MOQ_ERR_NOTFOUND;
	s = smap_find(c, sid);
	if (s == NULL)
		return MOQ_ERR_NOTFOUND;
	/* RFC 9000, 19.4: RESET_STREAM abandons what was not delivered. */
	if (ngtcp2_conn_shutdown_stream_write(c->q, sid, app_err) != 0)
		return MOQ_ERR_NOTFOUND;
	s->wr_closed = 1;
	s->local_reset = 1;
	pend_del(c, s);
	ready_add(c);
	return 0;
}

int moq_quic_stream_stop_sending(struct moq_quic_conn *c, int64_t sid, uint64_t app_err)
{
	if (c == NULL || c->state >= CS_CLOSING || smap_find(c, sid) == NULL)
		return MOQ_ERR_NOTFOUND;
	/* RFC 9000, 19.5 */
	if (ngtcp2_conn_shutdown_stream_read(c->q, sid, app_err) != 0)
		return MOQ_ERR_NOTFOUND;
	ready_add(c);
	return 0;
}

int moq_quic_stream_set_urgency(struct moq_quic_conn *c, int64_t sid, uint8_t urgency)
{
	struct quic_strm *s;
	int was;

	if (c == NULL || urgency >= MOQ_QUIC_URGENCY_LEVELS)
		return MOQ_ERR_INVAL;
	s = smap_find(c, sid);
	if (s == NULL)
		return MOQ_ERR_NOTFOUND;
	was = s->in_pend;
	pend_del(c, s);
	s->urgency = urgency;
	if (was)
		pend_add(c, s);
	return 0;
}

int moq_quic_addr_ip4(const char *ip, uint16_t port, struct moq_quic_addr *out)
{
	if (out == NULL)
		return MOQ_ERR_INVAL;
	memset(out, 0, sizeof(*out));
	if (ip == NULL || inet_pton(AF_INET, ip, &out->u.in4.sin_addr) != 1)
		return MOQ_ERR_INVAL;
	out->u.in4.sin_family = AF_INET;
	out->u.in4.sin_port = htons(port);
	out->len = sizeof(out->u.in4);
	return 0;
}
