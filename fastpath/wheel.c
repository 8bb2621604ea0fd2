/* SPDX-License-Identifier: MIT */
/*
 * wheel.c: the per-lcore timer wheel (wheel.h).
 */
#include "wheel.h"

#include <stdlib.h>

int fp_wheel_init(struct fp_wheel *w, uint32_t nslots, uint64_t tick_ns, uint64_t now)
{
	uint32_t i;

	if (nslots < 64 || (nslots & (nslots - 1)) != 0 || tick_ns == 0)
		return -1;
	w->slots = calloc(nslots, sizeof(*w->slots));
	w->bits = calloc(nslots / 64, sizeof(*w->bits));
	if (w->slots == NULL || w->bits == NULL) {
		free(w->slots);
		free(w->bits);
		return -1;
	}
	for (i = 0; i < nslots; i++)
		w->slots[i].next = w->slots[i].prev = &w->slots[i];
	w->nslots = nslots;
	w->tick_ns = tick_ns;
	w->cur = now / tick_ns;
	w->count = 0;
	w->next_at = UINT64_MAX;
	return 0;
}

void fp_wheel_fini(struct fp_wheel *w)
{
	free(w->slots);
	free(w->bits);
	w->slots = NULL;
	w->bits = NULL;
}

/* After an unlink next to @p: clear the slot's bit when @p is a head left
 * alone. */
static void slot_check(struct fp_wheel *w, struct fp_tnode *p)
{
	if (p >= w->slots && p < w->slots + w->nslots && p->next == p) {
		size_t i = (size_t)(p - w->slots);
		w->bits[i / 64] &= ~(1ull << (i % 64));
	}
}

void fp_wheel_cancel(struct fp_wheel *w, struct fp_tnode *n)
{
	if (n->prev == NULL)
		return;
	struct fp_tnode *p = n->prev;

	p->next = n->next;
	n->next->prev = p;
	n->next = n->prev = NULL;
	w->count--;
	slot_check(w, p);
}

void fp_wheel_arm(struct fp_wheel *w, struct fp_tnode *n, uint64_t when)
{
	uint64_t t = when / w->tick_ns;
	struct fp_tnode *h;

	if (n->prev != NULL) {
		if (n->when == when)
			return;
		fp_wheel_cancel(w, n);
	}
	if (t < w->cur)
		t = w->cur;
	h = &w->slots[t & (w->nslots - 1)];
	w->bits[(t & (w->nslots - 1)) / 64] |= 1ull << ((t & (w->nslots - 1)) % 64);
	n->when = when;
	n->next = h->next;
	n->prev = h;
	h->next->prev = n;
	h->next = n;
	w->count++;
	if (when < w->next_at)
		w->next_at = when;
}

/* A new lower bound of the deadlines: the earliest of this round's entries
 * in the first non-empty slots from cur (the bitmap skips empty ones). */
static void next_update(struct fp_wheel *w)
{
	uint64_t t = w->cur, scanned = 0;
	uint32_t mask = w->nslots - 1;

	if (w->count == 0) {
		w->next_at = UINT64_MAX;
		return;
	}
	while (scanned < w->nslots) {
		uint32_t sl = (uint32_t)(t & mask);
		uint64_t word = w->bits[sl / 64] >> (sl % 64), best = UINT64_MAX;
		const struct fp_tnode *h, *n;
		if (word == 0) {
			uint32_t skip = 64 - sl % 64;
			t += skip;
			scanned += skip;
			continue;
		}
		{
			uint32_t z = (uint32_t)__builtin_ctzll(word);
			t += z;
			scanned += z;
		}
		h = &w->slots[t & mask];
		for (n = h->next; n != h; n = n->next)
			if (n->when < best && n->when / w->tick_ns <= t)
				best = n->when;
		if (best != UINT64_MAX) {
			w->next_at = best;
			return;
		}
		t++;
		scanned++;
	}
	/* every entry is a round or more away */
	w->next_at = (w->cur + w->nslots) * w->tick_ns;
}

int fp_wheel_run(struct fp_wheel *w, uint64_t now, void (*fire)(struct fp_tnode *, void *),
                 void *arg)
{
	uint64_t end = now / w->tick_ns, t;
	int fired = 0;

	if (now < w->next_at || end < w->cur)
		return 0;
	/* a gap longer than the wheel: each slot once */
	t = end - w->cur >= w->nslots ? end - w->nslots + 1 : w->cur;
	for (; t <= end && w->count > 0; t++) {
		struct fp_tnode *h = &w->slots[t & (w->nslots - 1)], *n, *next;
		/* entries fired may re-arm into this slot: take them off first */
		struct fp_tnode due = {&due, &due, 0};

		for (n = h->next; n != h; n = next) {
			next = n->next;
			if (n->when > now)
				continue;
			n->prev->next = n->next;
			n->next->prev = n->prev;
			n->next = due.next;
			n->prev = &due;
			due.next->prev = n;
			due.next = n;
		}
		if (h->next == h)
			w->bits[(t & (w->nslots - 1)) / 64] &=
			        ~(1ull << ((t & (w->nslots - 1)) % 64));
		while (due.next != &due) {
			n = due.next;
			due.next = n->next;
			n->next->prev = &due;
			n->next = n->prev = NULL;
			w->count--;
			fired++;
			fire(n, arg);
		}
	}
	/* slot end is looked at again next time: it may hold entries due
	 * later within this tick (and what a callback armed in the past) */
	w->cur = end;
	next_update(w);
	return fired;
}

uint64_t fp_wheel_next(const struct fp_wheel *w)
{
	return w->count == 0 ? UINT64_MAX : w->next_at;
}
