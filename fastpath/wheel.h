/* SPDX-License-Identifier: MIT */
/*
 * wheel.h: a hashed timer wheel, one per lcore (fastpath.h's engine has
 * one). Nodes are embedded in their owners (intrusive, no allocation); a
 * node is in the wheel or not, and has one deadline. Arming, re-arming and
 * cancelling are O(1); fp_wheel_run visits only the slots of the ticks that
 * passed (entries a later round of the wheel is due for stay in their slot).
 */
#ifndef MOQ_FASTPATH_WHEEL_H
#define MOQ_FASTPATH_WHEEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct fp_tnode {
	struct fp_tnode *next, *prev; /* prev == NULL: not armed */
	uint64_t when;                /* deadline, ns */
};

struct fp_wheel {
	struct fp_tnode *slots; /* nslots list heads (sentinels) */
	uint64_t *bits;         /* a bit per slot: non-empty */
	uint32_t nslots;        /* power of two */
	uint64_t tick_ns;
	uint64_t cur;   /* the next tick fp_wheel_run looks at */
	uint64_t count; /* armed nodes */
	/* <= the earliest deadline (UINT64_MAX: none): a run before it
	 * returns at once, the common case of a poll loop */
	uint64_t next_at;
};

/* fp_wheel_init: @nslots (a power of two) slots of @tick_ns. Returns 0, or
 * -1 (bad arguments, no memory). @now is the clock's current value. */
int fp_wheel_init(struct fp_wheel *w, uint32_t nslots, uint64_t tick_ns, uint64_t now);
void fp_wheel_fini(struct fp_wheel *w);

/* fp_wheel_arm: (re-)arm @n for @when (cancelled first if armed). A
 * deadline in the past fires at the next fp_wheel_run. */
void fp_wheel_arm(struct fp_wheel *w, struct fp_tnode *n, uint64_t when);
/* fp_wheel_cancel: disarm @n (no-op when not armed). */
void fp_wheel_cancel(struct fp_wheel *w, struct fp_tnode *n);
static inline int fp_wheel_armed(const struct fp_tnode *n)
{
	return n->prev != NULL;
}

/*
 * fp_wheel_run: disarm every node due at @now and call @fire(node, arg)
 * for it (@fire may re-arm it or others). Returns the number fired.
 */
int fp_wheel_run(struct fp_wheel *w, uint64_t now, void (*fire)(struct fp_tnode *, void *),
                 void *arg);

/* fp_wheel_next: a time <= the earliest deadline (exact unless every entry
 * is a round of the wheel or more away), UINT64_MAX when empty. O(1): the
 * value is kept by _arm and _run (a scan of the non-empty slot bitmap). */
uint64_t fp_wheel_next(const struct fp_wheel *w);

#ifdef __cplusplus
}
#endif

#endif /* MOQ_FASTPATH_WHEEL_H */
