/* SPDX-License-Identifier: MIT */
/*
 * latency.c: relay-added latency (moq.h): arrivals of frames written to
 * subscribers, committed into a histogram, and the histogram's arithmetic.
 */
#include "moq.h"

#include <string.h>

#include "moq_int.h"

/* --- relay-added latency (moq.h) ----------------------------------------- */

/* Histogram bucket of @v ns (moq.h, MOQ_LAT_*). */
static unsigned lat_bucket(uint64_t v)
{
	unsigned e;

	if (v < (1ull << MOQ_LAT_MIN_SHIFT))
		return 0;
	e = 63u - (unsigned)__builtin_clzll(v);
	if (e >= MOQ_LAT_MAX_SHIFT)
		return MOQ_LAT_BUCKETS - 1;
	return 1u + ((e - MOQ_LAT_MIN_SHIFT) << MOQ_LAT_SUB_BITS) +
	       (unsigned)((v >> (e - MOQ_LAT_SUB_BITS)) & ((1u << MOQ_LAT_SUB_BITS) - 1));
}

/* [lower, upper) of bucket @b in ns; the last bucket's upper is UINT64_MAX. */
static void lat_bounds(unsigned b, uint64_t *lo, uint64_t *hi)
{
	unsigned e, m;

	if (b == 0) {
		*lo = 0;
		*hi = 1ull << MOQ_LAT_MIN_SHIFT;
		return;
	}
	if (b >= MOQ_LAT_BUCKETS - 1) {
		*lo = 1ull << MOQ_LAT_MAX_SHIFT;
		*hi = UINT64_MAX;
		return;
	}
	e = MOQ_LAT_MIN_SHIFT + ((b - 1) >> MOQ_LAT_SUB_BITS);
	m = (b - 1) & ((1u << MOQ_LAT_SUB_BITS) - 1);
	*lo = (uint64_t)((1u << MOQ_LAT_SUB_BITS) + m) << (e - MOQ_LAT_SUB_BITS);
	*hi = (uint64_t)((1u << MOQ_LAT_SUB_BITS) + m + 1) << (e - MOQ_LAT_SUB_BITS);
}

/* Per write to a subscriber's stream. A frame is written to many subscribers
 * in one iteration, and under load to each at its own position in the
 * stream, so the pending arrivals are a table hashed by arrival (a slot per
 * distinct frame, with a count) rather than a list of deliveries: the
 * same-as-last-time check takes the usual case, else a multiplicative hash
 * and at most LAT_PROBES linear probes; a delivery that finds no slot is
 * counted in overflow. */
#define LAT_PROBES 8u
_Static_assert((MOQ_LAT_PENDING & (MOQ_LAT_PENDING - 1)) == 0 && MOQ_LAT_PENDING <= 65536,
               "the pending table is a power of two with 16-bit slot numbers");

static inline void lat_note(struct moq_node *n, uint64_t a)
{
	struct lat_pend *p = &n->lat_pend[n->lat_last];
	uint32_t h;

	if (p->count != 0 && p->arrival == a) {
		p->count++;
		return;
	}
	h = (uint32_t)((a * 0x9e3779b97f4a7c15ull) >> 40);
	for (uint32_t k = 0; k < LAT_PROBES; k++) {
		uint32_t i = (h + k) & (MOQ_LAT_PENDING - 1);

		p = &n->lat_pend[i];
		if (p->count == 0) {
			p->arrival = a;
			p->count = 1;
			n->lat_used[n->lat_npend++] = (uint16_t)i;
			n->lat_last = i;
			return;
		}
		if (p->arrival == a) {
			p->count++;
			n->lat_last = i;
			return;
		}
	}
	n->lat.overflow++;
}

void moq_lat_record(struct moq_node *n, const struct moq_cache_frame *f, unsigned cnt)
{
	for (unsigned i = 0; i < cnt; i++)
		if (moq_cache_frame_complete(&f[i]))
			lat_note(n, f[i].arrival);
}

void moq_node_latency_commit(struct moq_node *n, uint64_t now_ns)
{
	struct moq_lat_hist *h = &n->lat;

	for (uint32_t k = 0; k < n->lat_npend; k++) {
		struct lat_pend *p = &n->lat_pend[n->lat_used[k]];
		uint64_t d = now_ns > p->arrival ? now_ns - p->arrival : 0;

		h->bucket[lat_bucket(d)] += p->count;
		h->samples += p->count;
		h->sum_ns += d * p->count;
		if (d > h->max_ns)
			h->max_ns = d;
		p->count = 0;
	}
	n->lat_npend = 0;
}

uint32_t moq_node_latency_pending(const struct moq_node *n)
{
	return n->lat_npend;
}

void moq_node_latency_hist(const struct moq_node *n, struct moq_lat_hist *out)
{
	memcpy(out, &n->lat, sizeof(*out));
}

void moq_node_latency(const struct moq_node *n, struct moq_latency *out)
{
	moq_lat_hist_summary(&n->lat, out);
}

void moq_lat_hist_merge(struct moq_lat_hist *dst, const struct moq_lat_hist *src)
{
	dst->samples += src->samples;
	dst->overflow += src->overflow;
	dst->sum_ns += src->sum_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
	for (unsigned b = 0; b < MOQ_LAT_BUCKETS; b++)
		dst->bucket[b] += src->bucket[b];
}

static uint64_t sat_sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

void moq_lat_hist_sub(struct moq_lat_hist *dst, const struct moq_lat_hist *base)
{
	uint64_t lo, hi, top = 0;

	dst->samples = sat_sub(dst->samples, base->samples);
	dst->overflow = sat_sub(dst->overflow, base->overflow);
	dst->sum_ns = sat_sub(dst->sum_ns, base->sum_ns);
	for (unsigned b = 0; b < MOQ_LAT_BUCKETS; b++) {
		dst->bucket[b] = sat_sub(dst->bucket[b], base->bucket[b]);
		if (dst->bucket[b]) {
			lat_bounds(b, &lo, &hi);
			top = hi;
		}
	}
	if (top < dst->max_ns)
		dst->max_ns = top;
}

uint64_t moq_lat_hist_quantile(const struct moq_lat_hist *h, double q)
{
	uint64_t total = 0, rank, seen = 0, lo, hi, mid;

	for (unsigned b = 0; b < MOQ_LAT_BUCKETS; b++)
		total += h->bucket[b];
	if (total == 0)
		return 0;
	if (q < 0)
		q = 0;
	if (q > 1)
		q = 1;
	/* the smallest value with at least q of the samples at or below it */
	rank = (uint64_t)(q * (double)total + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > total)
		rank = total;
	for (unsigned b = 0; b < MOQ_LAT_BUCKETS; b++) {
		seen += h->bucket[b];
		if (seen < rank)
			continue;
		lat_bounds(b, &lo, &hi);
		mid = hi == UINT64_MAX ? h->max_ns : lo + (hi - lo) / 2;
		return mid < h->max_ns ? mid : h->max_ns; /* every sample <= max */
	}
	return h->max_ns;
}

void moq_lat_hist_summary(const struct moq_lat_hist *h, struct moq_latency *out)
{
	memset(out, 0, sizeof(*out));
	out->samples = h->samples;
	out->overflow = h->overflow;
	out->p50_us = (double)moq_lat_hist_quantile(h, 0.50) / 1e3;
	out->p90_us = (double)moq_lat_hist_quantile(h, 0.90) / 1e3;
	out->p99_us = (double)moq_lat_hist_quantile(h, 0.99) / 1e3;
	out->max_us = (double)h->max_ns / 1e3;
	out->mean_us = h->samples ? (double)h->sum_ns / (double)h->samples / 1e3 : 0;
}
