/* SPDX-License-Identifier: MIT */
/*
 * wheel.c: the per-lcore timer wheel (wheel.h).
 */
#include "wheel.h"

#include <stdlib.h>

int fp_wheel_init(struct fp_wheel *w, uint32_t nslots, uint64_t tick_ns, uint64_t now)
{
	uint32_t i;

	if (nslots == 0 || (nslots & (nslots - 1)) != 0 || tick_ns == 0)
		return -1;
	w->slots = calloc(nslots, sizeof(*w->slots));
	if (w->slots == NULL)
		return -1;
	for (i = 0; i < nslots; i++)
		w->slots[i].next = w->slots[i].prev = &w->slots[i];
	w->nslots = nslots;
	w->tick_ns = tick_ns;
	w->cur = now / tick_ns;
	w->count = 0;
	return 0;
}

void fp_wheel_fini(struct fp_wheel *w)
{
	free(w->slots);
	w->slots = NULL;
}

void fp_wheel_cancel(struct fp_wheel *w, struct fp_tnode *n)
{
	if (n->prev == NULL)
		return;
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = NULL;
	w->count--;
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
	n->when = when;
	n->next = h->next;
	n->prev = h;
	h->next->prev = n;
	h->next = n;
	w->count++;
}

int fp_wheel_run(struct fp_wheel *w, uint64_t now, void (*fire)(struct fp_tnode *, void *),
                 void *arg)
{
	uint64_t end = now / w->tick_ns, t;
	int fired = 0;

	if (end < w->cur)
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
	return fired;
}

uint64_t fp_wheel_next(const struct fp_wheel *w)
{
	uint64_t t;
	uint32_t i;

	if (w->count == 0)
		return UINT64_MAX;
	for (i = 0, t = w->cur; i < w->nslots; i++, t++) {
		const struct fp_tnode *h = &w->slots[t & (w->nslots - 1)], *n;
		uint64_t best = UINT64_MAX;

		for (n = h->next; n != h; n = n->next)
			if (n->when < best)
				best = n->when;
		/* an entry of this round: the slot's tick is due */
		if (best != UINT64_MAX && best / w->tick_ns <= t)
			return best;
	}
	/* every entry is rounds ahead: the earliest of them */
	{
		uint64_t best = UINT64_MAX;
		for (i = 0; i < w->nslots; i++) {
			const struct fp_tnode *h = &w->slots[i], *n;
			for (n = h->next; n != h; n = n->next)
				if (n->when < best)
					best = n->when;
		}
		return best;
	}
}
