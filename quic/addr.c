/* SPDX-License-Identifier: MIT */
/*
 * addr.c: source addresses: connections counted per remote IP (the
 * per-address limit at accept), and IPv4 address parsing.
 */
#include "quic_int.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

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
struct addr_ent *atab_get(struct moq_quic_endpoint *ep, const struct moq_quic_addr *a, int create)
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
void atab_compact(struct moq_quic_endpoint *ep)
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
