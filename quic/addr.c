/* SPDX-License-Identifier: MIT */
/*
 * addr.c: source addresses: connections counted per source (an IPv4
 * address, an IPv6 /64; the per-address limit at accept) in a table
 * several endpoints may share, and IPv4 address parsing.
 */
#include "quic_int.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* ------------------------------------------------------ source addresses */

/* One source: an IPv4 address, or an IPv6 /64 (RFC 4291, 2.5.1: the
 * interface identifier is the low 64 bits, and a host, one customer's LAN,
 * gets a /64 to pick addresses from: counting /128s let one host open a
 * connection from every address it has). An IPv4-mapped IPv6 address
 * (RFC 4291, 2.5.5.2; a dual-stack socket) is its IPv4 address. */
struct addr_ent {
	uint8_t fam; /* 0: free */
	uint8_t ip[16];
	uint32_t count;
};

struct moq_quic_addr_table {
	int lock; /* the slots and @used (a spinlock: taken per new or closed
	           * connection, never per packet) */
	uint32_t cap, used;
	uint64_t hash_key;
	struct addr_ent *e;
};

static int addr_key(const struct moq_quic_addr *a, uint8_t *fam, uint8_t ip[16])
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	memset(ip, 0, 16);
	if (a->u.sa.sa_family == AF_INET) {
		*fam = 4;
		memcpy(ip, &a->u.in4.sin_addr, 4);
		return 0;
	}
	if (a->u.sa.sa_family == AF_INET6) {
		const uint8_t *b = (const uint8_t *)&a->u.in6.sin6_addr;

		if (memcmp(b, v4mapped, 12) == 0) {
			*fam = 4;
			memcpy(ip, b + 12, 4);
		} else {
			*fam = 6;
			memcpy(ip, b, 8); /* the /64 */
		}
		return 0;
	}
	return MOQ_ERR_INVAL;
}

static void tlock(struct moq_quic_addr_table *t)
{
	while (__atomic_test_and_set(&t->lock, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&t->lock, __ATOMIC_RELAXED)) {
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		}
}

static void tunlock(struct moq_quic_addr_table *t)
{
	__atomic_clear(&t->lock, __ATOMIC_RELEASE);
}

static uint32_t slot_of(const struct moq_quic_addr_table *t, uint8_t fam, const uint8_t ip[16])
{
	return (uint32_t)hash_bytes(t->hash_key ^ fam, ip, 16) & (t->cap - 1);
}

/* The slot of (@fam, @ip), or of the free slot ending its probe run. */
static uint32_t find(const struct moq_quic_addr_table *t, uint8_t fam, const uint8_t ip[16])
{
	uint32_t i = slot_of(t, fam, ip);

	while (t->e[i].fam != 0 && (t->e[i].fam != fam || memcmp(t->e[i].ip, ip, 16) != 0))
		i = (i + 1) & (t->cap - 1);
	return i;
}

struct moq_quic_addr_table *moq_quic_addr_table_new(uint32_t max_sources)
{
	struct moq_quic_addr_table *t = calloc(1, sizeof(*t));
	uint64_t cap = 16;

	if (t == NULL)
		return NULL;
	/* at most half full: short probe runs, and always a free slot */
	while (cap < 2ull * max_sources && cap < (1ull << 31))
		cap <<= 1;
	t->cap = (uint32_t)cap;
	t->e = calloc(t->cap, sizeof(*t->e));
	if (t->e == NULL) {
		free(t);
		return NULL;
	}
	/* keyed: a peer cannot choose addresses that share a probe run */
	if (getrandom(&t->hash_key, sizeof(t->hash_key), 0) != sizeof(t->hash_key))
		t->hash_key = (uint64_t)(uintptr_t)t ^ 0x9e3779b97f4a7c15ull;
	return t;
}

void moq_quic_addr_table_free(struct moq_quic_addr_table *t)
{
	if (t == NULL)
		return;
	free(t->e);
	free(t);
}

int moq_quic_addr_table_take(struct moq_quic_addr_table *t, const struct moq_quic_addr *a,
                             uint32_t limit)
{
	uint8_t fam, ip[16];
	uint32_t i;
	int rc = 0;

	if (t == NULL || addr_key(a, &fam, ip) != 0)
		return MOQ_ERR_INVAL;
	tlock(t);
	i = find(t, fam, ip);
	if (t->e[i].fam != 0) {
		if (t->e[i].count >= limit)
			rc = MOQ_ERR_LIMIT;
		else
			t->e[i].count++;
	} else if (limit == 0 || t->used + 1 > t->cap / 2) {
		rc = MOQ_ERR_LIMIT;
	} else {
		t->e[i].fam = fam;
		memcpy(t->e[i].ip, ip, 16);
		t->e[i].count = 1;
		t->used++;
	}
	tunlock(t);
	return rc;
}

void moq_quic_addr_table_put(struct moq_quic_addr_table *t, const struct moq_quic_addr *a)
{
	uint8_t fam, ip[16];
	uint32_t i, j, mask;

	if (t == NULL || addr_key(a, &fam, ip) != 0)
		return;
	tlock(t);
	mask = t->cap - 1;
	i = find(t, fam, ip);
	if (t->e[i].fam == 0 || --t->e[i].count > 0) {
		tunlock(t);
		return;
	}
	/* the last one: free the slot, moving back the later entries of its
	 * run that may use it (linear probing's deletion, Knuth vol. 3,
	 * 6.4, algorithm R): no tombstones, nothing to compact */
	t->e[i].fam = 0;
	t->used--;
	for (j = (i + 1) & mask; t->e[j].fam != 0; j = (j + 1) & mask) {
		uint32_t h = slot_of(t, t->e[j].fam, t->e[j].ip);

		/* e[j] stays when its home h lies cyclically in (i, j] */
		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		t->e[i] = t->e[j];
		t->e[j].fam = 0;
		i = j;
	}
	tunlock(t);
}

uint32_t moq_quic_addr_table_count(struct moq_quic_addr_table *t, const struct moq_quic_addr *a)
{
	uint8_t fam, ip[16];
	uint32_t i, n;

	if (t == NULL || addr_key(a, &fam, ip) != 0)
		return 0;
	tlock(t);
	i = find(t, fam, ip);
	n = t->e[i].fam != 0 ? t->e[i].count : 0;
	tunlock(t);
	return n;
}

uint32_t moq_quic_addr_table_sources(struct moq_quic_addr_table *t)
{
	uint32_t n;

	tlock(t);
	n = t->used;
	tunlock(t);
	return n;
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
