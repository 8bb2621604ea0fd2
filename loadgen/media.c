/* SPDX-License-Identifier: MIT */
/*
 * media.c: synthetic media tracks, their frame format and the subscriber's
 * verification (media.h).
 */
#include "media.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ------------------------------------------------------------- */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

uint64_t moq_lg_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- CRC-32C ------------------------------------------------------------- */

/* Castagnoli polynomial, reflected (RFC 3720, B.4). */
#define CRC32C_POLY 0x82f63b78u

static uint32_t crc_table[256];
static int crc_ready;
static int crc_hw = -1;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc_table[i] = c;
	}
	crc_ready = 1;
}

static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t len)
{
	if (!crc_ready)
		crc_init();
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw_run(uint32_t crc, const uint8_t *p,
                                                             size_t len)
{
	uint64_t c = crc;
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	uint32_t c32 = (uint32_t)c;
	while (len--)
		c32 = __builtin_ia32_crc32qi(c32, *p++);
	return c32;
}
#endif

uint32_t moq_lg_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	crc = ~crc;
#if defined(__x86_64__)
	if (crc_hw < 0) {
		__builtin_cpu_init();
		crc_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
	}
	if (crc_hw)
		return ~crc_hw_run(crc, p, len);
#endif
	return ~crc_sw(crc, p, len);
}

/* ---- tracks -------------------------------------------------------------- */

struct moq_lg_track_cfg moq_lg_track_video(uint16_t id, uint64_t bitrate_bps)
{
	struct moq_lg_track_cfg t;
	memset(&t, 0, sizeof(t));
	snprintf(t.name, sizeof(t.name), "video");
	t.kind = MOQ_LG_VIDEO;
	t.id = id;
	t.bitrate_bps = bitrate_bps;
	t.frame_ns = 1000000000ull / MOQ_LG_VIDEO_FPS;
	t.group_frames = MOQ_LG_VIDEO_GOP;
	t.key_ratio = MOQ_LG_VIDEO_KEYRATIO;
	return t;
}

struct moq_lg_track_cfg moq_lg_track_audio(uint16_t id)
{
	struct moq_lg_track_cfg t;
	memset(&t, 0, sizeof(t));
	snprintf(t.name, sizeof(t.name), "audio");
	t.kind = MOQ_LG_AUDIO;
	t.id = id;
	t.bitrate_bps = MOQ_LG_AUDIO_BPS;
	t.frame_ns = MOQ_LG_AUDIO_FRAME_NS;
	t.group_frames = 1;
	t.key_ratio = 1;
	return t;
}

static uint64_t delta_size(const struct moq_lg_track_cfg *t)
{
	/* bits per group / 8 = bytes per group */
	double gbytes = (double)t->bitrate_bps * (double)t->frame_ns * t->group_frames / 8e9;
	return (uint64_t)(gbytes / (double)(t->key_ratio + t->group_frames - 1));
}

uint32_t moq_lg_frame_size(const struct moq_lg_track_cfg *t, uint32_t index)
{
	uint64_t d = delta_size(t);
	uint64_t s = index == 0 ? d * t->key_ratio : d;
	if (s < MOQ_LG_HDR_LEN)
		s = MOQ_LG_HDR_LEN;
	if (s > MOQ_LG_FRAME_MAX)
		s = MOQ_LG_FRAME_MAX;
	return (uint32_t)s;
}

/* splitmix64: seeds the body's PRNG from (track, group, frame). */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint32_t moq_lg_keyframe_size(const struct moq_lg_track_cfg *t, uint64_t group)
{
	uint32_t lo = moq_lg_frame_size(t, 0), hi = t->key_max;
	uint64_t r;

	if (hi > MOQ_LG_KEYFRAME_MAX)
		hi = MOQ_LG_KEYFRAME_MAX;
	if (hi <= lo)
		return lo;
	r = mix64(((uint64_t)t->id << 48) ^ group ^ 0x6b657966ull); /* "keyf" */
	if ((r & 3) == 0)
		return hi;
	/* about log-uniform: a power-of-two octave between lo's and hi's, then
	 * a size in it, clamped to [lo, hi] */
	unsigned klo = 31u - (unsigned)__builtin_clz(lo), khi = 31u - (unsigned)__builtin_clz(hi);
	unsigned k = klo + (unsigned)((r >> 2) % (khi - klo + 1));
	uint64_t v = (1ull << k) + ((r >> 16) & ((1ull << k) - 1));
	return v >= hi ? hi : v <= lo ? lo : (uint32_t)v;
}

/* A rate "1M", "64k", "4Mbps", "2500000". */
static int parse_rate(const char *s, size_t n, uint64_t *out)
{
	char tmp[32], *end;
	if (n == 0 || n >= sizeof(tmp))
		return MOQ_ERR_INVAL;
	memcpy(tmp, s, n);
	tmp[n] = 0;
	double v = strtod(tmp, &end);
	if (end == tmp || v <= 0)
		return MOQ_ERR_INVAL;
	double mul = 1;
	if (*end == 'k' || *end == 'K')
		mul = 1e3, end++;
	else if (*end == 'M')
		mul = 1e6, end++;
	else if (*end == 'G')
		mul = 1e9, end++;
	if (strcmp(end, "bps") == 0 || strcmp(end, "b") == 0)
		end += strlen(end);
	if (*end)
		return MOQ_ERR_INVAL;
	v *= mul;
	if (v < 1 || v > 1e11)
		return MOQ_ERR_INVAL;
	*out = (uint64_t)v;
	return 0;
}

static int parse_uint(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	if (n == 0)
		return MOQ_ERR_INVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return MOQ_ERR_INVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v > max)
			return MOQ_ERR_INVAL;
	}
	*out = v;
	return 0;
}

int moq_lg_track_parse(const char *spec, uint16_t id, struct moq_lg_track_cfg *out)
{
	if (!spec || !out)
		return MOQ_ERR_INVAL;
	const char *p = spec, *e = strchr(p, ':');
	size_t n = e ? (size_t)(e - p) : strlen(p);
	struct moq_lg_track_cfg t;
	if (n == 5 && memcmp(p, "video", 5) == 0)
		t = moq_lg_track_video(id, 1000000);
	else if (n == 5 && memcmp(p, "audio", 5) == 0)
		t = moq_lg_track_audio(id);
	else
		return MOQ_ERR_INVAL;
	int first = 1;
	while (e) {
		p = e + 1;
		e = strchr(p, ':');
		n = e ? (size_t)(e - p) : strlen(p);
		const char *eq = memchr(p, '=', n);
		uint64_t v;
		if (!eq && n == 6 && memcmp(p, "silent", 6) == 0) {
			t.silent = 1;
			first = 0;
			continue;
		}
		if (!eq) {
			if (!first || parse_rate(p, n, &t.bitrate_bps) != 0)
				return MOQ_ERR_INVAL;
			first = 0;
			continue;
		}
		first = 0;
		size_t kn = (size_t)(eq - p), vn = n - kn - 1;
		const char *vs = eq + 1;
		if (kn == 3 && memcmp(p, "fps", 3) == 0) {
			if (parse_uint(vs, vn, 1000, &v) || v == 0)
				return MOQ_ERR_INVAL;
			t.frame_ns = 1000000000ull / v;
		} else if (kn == 2 && memcmp(p, "ms", 2) == 0) {
			if (parse_uint(vs, vn, 10000, &v) || v == 0)
				return MOQ_ERR_INVAL;
			t.frame_ns = v * 1000000ull;
		} else if (kn == 3 && memcmp(p, "gop", 3) == 0) {
			if (parse_uint(vs, vn, 100000, &v) || v == 0)
				return MOQ_ERR_INVAL;
			t.group_frames = (uint32_t)v;
		} else if (kn == 3 && memcmp(p, "key", 3) == 0) {
			if (parse_uint(vs, vn, 1000, &v) || v == 0)
				return MOQ_ERR_INVAL;
			t.key_ratio = (uint32_t)v;
		} else if (kn == 4 && memcmp(p, "name", 4) == 0) {
			if (vn == 0 || vn >= sizeof(t.name))
				return MOQ_ERR_INVAL;
			memcpy(t.name, vs, vn);
			t.name[vn] = 0;
		} else if (kn == 4 && memcmp(p, "rate", 4) == 0) {
			if (parse_rate(vs, vn, &t.bitrate_bps))
				return MOQ_ERR_INVAL;
		} else {
			return MOQ_ERR_INVAL;
		}
	}
	/* Frames must hold the header and stay under the cap. */
	uint64_t d = delta_size(&t);
	if (d < MOQ_LG_HDR_LEN || d * t.key_ratio > MOQ_LG_FRAME_MAX)
		return MOQ_ERR_INVAL;
	*out = t;
	return 0;
}

/* ---- generator ----------------------------------------------------------- */

void moq_lg_gen_init(struct moq_lg_gen *g, const struct moq_lg_track_cfg *t, uint64_t now,
                     uint64_t first_group)
{
	memset(g, 0, sizeof(*g));
	g->cfg = *t;
	if (g->cfg.group_frames == 0)
		g->cfg.group_frames = 1;
	if (g->cfg.key_ratio == 0)
		g->cfg.key_ratio = 1;
	g->start_ns = now;
	g->group = first_group;
}

uint64_t moq_lg_gen_next(const struct moq_lg_gen *g)
{
	if (g->cfg.silent)
		return UINT64_MAX;
	return g->start_ns + g->frames * g->cfg.frame_ns;
}

int moq_lg_gen_frame(struct moq_lg_gen *g, uint64_t now_ns, uint8_t *buf, size_t cap,
                     struct moq_lg_frame_info *info)
{
	uint32_t len = g->index == 0 ? moq_lg_keyframe_size(&g->cfg, g->group)
	                             : moq_lg_frame_size(&g->cfg, g->index);
	if (!buf || cap < len)
		return MOQ_ERR_TOO_LARGE;
	put32(buf, MOQ_LG_MAGIC);
	put16(buf + 8, g->cfg.id);
	put16(buf + 10, g->index == 0 ? MOQ_LG_KEYFRAME : 0);
	put32(buf + 12, g->index);
	put64(buf + 16, g->group);
	put64(buf + 24, now_ns);
	put32(buf + 32, len);
	put32(buf + 36, 0);
	put64(buf + 40, g->frames);
	uint64_t x = mix64(((uint64_t)g->cfg.id << 48) ^ (g->group << 20) ^ g->index) | 1;
	size_t off = MOQ_LG_HDR_LEN;
	for (; off + 8 <= len; off += 8) {
		/* xorshift64* */
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		uint64_t v = x * 0x2545f4914f6cdd1dull;
		memcpy(buf + off, &v, 8);
	}
	for (; off < len; off++)
		buf[off] = (uint8_t)(x >> (off & 7));
	put32(buf + 4, moq_lg_crc32c(0, buf + 8, len - 8));

	if (info) {
		info->group = g->group;
		info->index = g->index;
		info->len = len;
		info->last = g->index + 1 == g->cfg.group_frames;
		info->pts_us = (int64_t)(g->frames * g->cfg.frame_ns / 1000);
	}
	g->frames++;
	g->bytes += len;
	if (++g->index == g->cfg.group_frames) {
		g->index = 0;
		g->group++;
	}
	return (int)len;
}

/* ---- histogram ----------------------------------------------------------- */

void moq_lg_hist_reset(struct moq_lg_hist *h)
{
	memset(h, 0, sizeof(*h));
}

static unsigned hist_slot(uint64_t v)
{
	if (v < (1ull << MOQ_LG_HIST_MIN))
		return 0;
	unsigned e = 63u - (unsigned)__builtin_clzll(v);
	if (e > MOQ_LG_HIST_MAX)
		return MOQ_LG_HIST_SLOTS - 1;
	unsigned sub = (unsigned)((v >> (e - 4)) & (MOQ_LG_HIST_SUB - 1));
	return 1 + (e - MOQ_LG_HIST_MIN) * MOQ_LG_HIST_SUB + sub;
}

/* The largest value that falls into slot @s. */
static uint64_t slot_top(unsigned s)
{
	if (s == 0)
		return (1ull << MOQ_LG_HIST_MIN) - 1;
	if (s >= MOQ_LG_HIST_SLOTS - 1)
		return UINT64_MAX;
	unsigned e = (s - 1) / MOQ_LG_HIST_SUB + MOQ_LG_HIST_MIN;
	unsigned sub = (s - 1) % MOQ_LG_HIST_SUB;
	return (1ull << e) + ((uint64_t)(sub + 1) << (e - 4)) - 1;
}

void moq_lg_hist_add(struct moq_lg_hist *h, uint64_t v)
{
	if (h->n == 0 || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->n++;
	h->sum += v;
	h->slot[hist_slot(v)]++;
}

void moq_lg_hist_merge(struct moq_lg_hist *dst, const struct moq_lg_hist *src)
{
	if (src->n == 0)
		return;
	if (dst->n == 0 || src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	dst->n += src->n;
	dst->sum += src->sum;
	for (unsigned i = 0; i < MOQ_LG_HIST_SLOTS; i++)
		dst->slot[i] += src->slot[i];
}

uint64_t moq_lg_hist_pct(const struct moq_lg_hist *h, double p)
{
	if (h->n == 0)
		return 0;
	if (p <= 0)
		return h->min;
	if (p >= 100)
		return h->max;
	uint64_t rank = (uint64_t)((double)h->n * p / 100.0);
	if (rank >= h->n)
		rank = h->n - 1;
	if (rank == 0)
		return h->min;
	uint64_t acc = 0;
	for (unsigned i = 0; i < MOQ_LG_HIST_SLOTS; i++) {
		acc += h->slot[i];
		if (acc > rank) {
			uint64_t v = slot_top(i);
			if (v > h->max)
				v = h->max;
			if (v < h->min)
				v = h->min;
			return v;
		}
	}
	return h->max;
}

/* ---- verification -------------------------------------------------------- */

void moq_lg_counts_add(struct moq_lg_counts *dst, const struct moq_lg_counts *src)
{
	const uint64_t *s = (const uint64_t *)src;
	uint64_t *d = (uint64_t *)dst;
	for (size_t i = 0; i < sizeof(*src) / sizeof(uint64_t); i++)
		d[i] += s[i];
}

uint64_t moq_lg_counts_errors(const struct moq_lg_counts *c)
{
	return c->frames_bad_crc + c->frames_bad_hdr + c->frames_bad_order + c->groups_dup;
}

void moq_lg_rx_init(struct moq_lg_rx *r, uint16_t track_id, struct moq_lg_hist *hist)
{
	memset(r, 0, sizeof(*r));
	r->track_id = track_id;
	r->hist = hist;
}

#define WIN_BITS 1024u

static int win_test(const struct moq_lg_rx *r, uint64_t seq)
{
	unsigned b = (unsigned)(seq % WIN_BITS);
	return (int)((r->window[b / 64] >> (b % 64)) & 1);
}

static void win_set(struct moq_lg_rx *r, uint64_t seq, int on)
{
	unsigned b = (unsigned)(seq % WIN_BITS);
	if (on)
		r->window[b / 64] |= 1ull << (b % 64);
	else
		r->window[b / 64] &= ~(1ull << (b % 64));
}

static struct moq_lg_rx_group *find_group(struct moq_lg_rx *r, uint64_t seq)
{
	struct moq_lg_rx_group *h = &r->g[r->hint];
	if (h->used && h->seq == seq)
		return h;
	if (r->nused == 0)
		return NULL;
	for (unsigned i = 0; i < MOQ_LG_RX_GROUPS; i++)
		if (r->g[i].used && r->g[i].seq == seq) {
			r->hint = i;
			return &r->g[i];
		}
	return NULL;
}

int moq_lg_rx_group_begin(struct moq_lg_rx *r, uint64_t seq)
{
	if (!r->have_first) {
		r->have_first = 1;
		r->first_seq = r->newest_seq = seq;
	} else if (seq > r->newest_seq) {
		uint64_t gap = seq - r->newest_seq;
		if (gap >= WIN_BITS)
			memset(r->window, 0, sizeof(r->window));
		else
			for (uint64_t s = r->newest_seq + 1; s <= seq; s++)
				win_set(r, s, 0);
		r->newest_seq = seq;
	} else {
		if (r->newest_seq - seq < WIN_BITS && win_test(r, seq)) {
			r->c.groups_dup++;
			return MOQ_ERR_EXISTS;
		}
		if (seq != r->newest_seq)
			r->c.groups_late++;
		if (seq < r->first_seq)
			r->first_seq = seq;
	}
	struct moq_lg_rx_group *g = NULL;
	if (r->nused < MOQ_LG_RX_GROUPS) {
		/* the hint's slot is usually the one the last group freed */
		unsigned i = r->hint;
		while (r->g[i].used)
			i = (i + 1) % MOQ_LG_RX_GROUPS;
		g = &r->g[i];
		r->hint = i;
	}
	win_set(r, seq, 1);
	r->seen++;
	if (!g) {
		r->c.groups_untracked++;
		return MOQ_ERR_LIMIT;
	}
	memset(g, 0, sizeof(*g));
	g->used = 1;
	g->seq = seq;
	r->nused++;
	return 0;
}

static void frame_cut(struct moq_lg_rx *r, struct moq_lg_rx_group *g)
{
	if (g->in_frame && g->fgot < g->fsize)
		r->c.frames_partial++;
	g->in_frame = 0;
}

int moq_lg_rx_frame(struct moq_lg_rx *r, uint64_t seq, uint64_t size)
{
	struct moq_lg_rx_group *g = find_group(r, seq);
	if (!g) {
		/* a group that began while every slot was taken */
		if (r->have_first && seq <= r->newest_seq && r->newest_seq - seq < WIN_BITS &&
		    win_test(r, seq))
			r->c.frames_untracked++;
		else
			r->c.frames_bad_hdr++;
		return MOQ_ERR_NOTFOUND;
	}
	frame_cut(r, g);
	if (size < MOQ_LG_HDR_LEN) {
		/* Not one of ours: cannot hold the header. Its bytes (if any)
		 * are still accepted so the stream can be followed. */
		r->c.frames_bad_hdr++;
		g->bad = 1;
	} else {
		g->bad = 0;
	}
	g->fsize = size;
	g->fgot = 0;
	g->crc = ~0u;
	g->in_frame = size > 0;
	return 0;
}

static int frame_check(struct moq_lg_rx *r, struct moq_lg_rx_group *g, uint64_t now_ns)
{
	const uint8_t *h = g->hdr;
	uint32_t crc = ~g->crc;
	if (g->bad)
		return MOQ_ERR_DECODE; /* counted at moq_lg_rx_frame */
	if (get32(h) != MOQ_LG_MAGIC || get16(h + 8) != r->track_id || get64(h + 16) != g->seq ||
	    get32(h + 32) != g->fsize) {
		r->c.frames_bad_hdr++;
		return MOQ_ERR_DECODE;
	}
	if (get32(h + 4) != crc) {
		r->c.frames_bad_crc++;
		return MOQ_ERR_DECODE;
	}
	uint32_t idx = get32(h + 12);
	if (idx != g->next_index) {
		r->c.frames_bad_order++;
		g->next_index = idx + 1;
		return MOQ_ERR_DECODE;
	}
	g->next_index++;
	r->c.frames_ok++;
	r->c.bytes_ok += g->fsize;
	uint64_t sent = get64(h + 24);
	if (sent < r->lat_after)
		r->c.frames_catchup++;
	else if (r->hist && now_ns >= sent)
		moq_lg_hist_add(r->hist, now_ns - sent);
	return 1;
}

#if defined(__x86_64__)
/* The running CRC register (not inverted at the ends) over @len bytes. */
static uint32_t crc_raw(uint32_t reg, const uint8_t *p, size_t len)
{
	if (crc_hw < 0)
		(void)moq_lg_crc32c(0, p, 0);
	if (crc_hw)
		return crc_hw_run(reg, p, len);
	return crc_sw(reg, p, len);
}
#else
static uint32_t crc_raw(uint32_t reg, const uint8_t *p, size_t len)
{
	return crc_sw(reg, p, len);
}
#endif

int moq_lg_rx_data(struct moq_lg_rx *r, uint64_t seq, const uint8_t *data, size_t len,
                   uint64_t now_ns)
{
	struct moq_lg_rx_group *g = find_group(r, seq);
	if (!g)
		return MOQ_ERR_NOTFOUND;
	if (len == 0)
		return 0;
	if (!g->in_frame || len > g->fsize - g->fgot) {
		r->c.frames_bad_hdr++;
		g->in_frame = 0;
		return MOQ_ERR_INVAL;
	}
	uint64_t off = g->fgot;
	/* header bytes */
	if (off < MOQ_LG_HDR_LEN) {
		size_t n = MOQ_LG_HDR_LEN - off;
		if (n > len)
			n = len;
		memcpy(g->hdr + off, data, n);
	}
	/* CRC covers [8, size) */
	if (off + len > 8) {
		size_t skip = off < 8 ? (size_t)(8 - off) : 0;
		g->crc = crc_raw(g->crc, data + skip, len - skip);
	}
	g->fgot += len;
	if (g->fgot < g->fsize)
		return 0;
	g->in_frame = 0;
	return frame_check(r, g, now_ns);
}

int moq_lg_rx_group_end(struct moq_lg_rx *r, uint64_t seq, int64_t code)
{
	struct moq_lg_rx_group *g = find_group(r, seq);
	if (!g)
		return MOQ_ERR_NOTFOUND;
	frame_cut(r, g);
	if (code < 0) {
		r->c.groups_ok++;
	} else {
		r->c.groups_reset++;
		if (code < 32)
			r->c.groups_reset_code[code]++;
	}
	g->used = 0;
	r->nused--;
	return 0;
}

void moq_lg_rx_finish(struct moq_lg_rx *r)
{
	if (!r->have_first)
		return;
	uint64_t span = r->newest_seq - r->first_seq + 1;
	if (span > r->seen)
		r->c.groups_missing += span - r->seen;
}

/* ---- reports ------------------------------------------------------------- */

static double rate(uint64_t a, uint64_t b, double dt)
{
	return dt > 0 && a >= b ? (double)(a - b) / dt : 0;
}

int moq_lg_report_json(const struct moq_lg_report *now, const struct moq_lg_report *prev, char *buf,
                       size_t len)
{
	struct moq_lg_report zero;
	if (!prev) {
		memset(&zero, 0, sizeof(zero));
		prev = &zero;
	}
	double dt = now->t_s - prev->t_s;
	const struct moq_lg_counts *c = &now->c;
	uint64_t p50 = now->hist ? moq_lg_hist_pct(now->hist, 50) : 0;
	uint64_t p99 = now->hist ? moq_lg_hist_pct(now->hist, 99) : 0;
	uint64_t mx = now->hist ? now->hist->max : 0;
	int n = snprintf(
	        buf, len,
	        "{\"t\":%.3f,\"subs_target\":%" PRIu64 ",\"subs_connected\":%" PRIu64
	        ",\"subs_ready\":%" PRIu64 ",\"subs_closed\":%" PRIu64 ",\"pub_frames\":%" PRIu64
	        ",\"pub_bytes\":%" PRIu64 ",\"pub_groups\":%" PRIu64 ",\"frames_ok\":%" PRIu64
	        ",\"bytes_ok\":%" PRIu64 ",\"frames_per_s\":%.1f,\"goodput_mbps\":%.3f"
	        ",\"rx_wire_gbps\":%.4f,\"tx_wire_gbps\":%.4f,\"rx_kpps\":%.2f,\"tx_kpps\":%.2f"
	        ",\"groups_ok\":%" PRIu64 ",\"groups_reset\":%" PRIu64 ",\"groups_late\":%" PRIu64
	        ",\"groups_missing\":%" PRIu64 ",\"frames_partial\":%" PRIu64
	        ",\"bad_crc\":%" PRIu64 ",\"bad_hdr\":%" PRIu64 ",\"bad_order\":%" PRIu64
	        ",\"groups_dup\":%" PRIu64 ",\"frames_catchup\":%" PRIu64
	        ",\"groups_untracked\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"lat_n\":%" PRIu64
	        ",\"lat_p50_us\":%.1f,\"lat_p99_us\":%.1f,\"lat_max_us\":%.1f}",
	        now->t_s, now->subs_target, now->subs_connected, now->subs_ready, now->subs_closed,
	        now->pub_frames, now->pub_bytes, now->pub_groups, c->frames_ok, c->bytes_ok,
	        rate(c->frames_ok, prev->c.frames_ok, dt),
	        rate(c->bytes_ok, prev->c.bytes_ok, dt) * 8 / 1e6,
	        rate(now->rx_bytes_wire, prev->rx_bytes_wire, dt) * 8 / 1e9,
	        rate(now->tx_bytes_wire, prev->tx_bytes_wire, dt) * 8 / 1e9,
	        rate(now->rx_pkts, prev->rx_pkts, dt) / 1e3,
	        rate(now->tx_pkts, prev->tx_pkts, dt) / 1e3, c->groups_ok, c->groups_reset,
	        c->groups_late, c->groups_missing, c->frames_partial, c->frames_bad_crc,
	        c->frames_bad_hdr, c->frames_bad_order, c->groups_dup, c->frames_catchup,
	        c->groups_untracked, moq_lg_counts_errors(c), now->hist ? now->hist->n : 0,
	        (double)p50 / 1e3, (double)p99 / 1e3, (double)mx / 1e3);
	if (n < 0)
		n = 0;
	if (len && (size_t)n >= len)
		n = (int)len - 1;
	return n;
}

int moq_lg_report_line(const struct moq_lg_report *now, const struct moq_lg_report *prev, char *buf,
                       size_t len)
{
	struct moq_lg_report zero;
	if (!prev) {
		memset(&zero, 0, sizeof(zero));
		prev = &zero;
	}
	double dt = now->t_s - prev->t_s;
	const struct moq_lg_counts *c = &now->c;
	uint64_t p50 = now->hist ? moq_lg_hist_pct(now->hist, 50) : 0;
	uint64_t p99 = now->hist ? moq_lg_hist_pct(now->hist, 99) : 0;
	int n = snprintf(buf, len,
	                 "t=%.0fs subs=%" PRIu64 "/%" PRIu64 " pub=%" PRIu64
	                 "fr rx=%.0ffr/s %.2fMbps groups=%" PRIu64 " reset=%" PRIu64
	                 " missing=%" PRIu64 " errors=%" PRIu64 " lat p50=%.2fms p99=%.2fms",
	                 now->t_s, now->subs_ready, now->subs_target, now->pub_frames,
	                 rate(c->frames_ok, prev->c.frames_ok, dt),
	                 rate(c->bytes_ok, prev->c.bytes_ok, dt) * 8 / 1e6, c->groups_ok,
	                 c->groups_reset, c->groups_missing, moq_lg_counts_errors(c),
	                 (double)p50 / 1e6, (double)p99 / 1e6);
	if (n < 0)
		n = 0;
	if (len && (size_t)n >= len)
		n = (int)len - 1;
	return n;
}
