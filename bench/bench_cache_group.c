/* SPDX-License-Identifier: MIT */
/*
 * bench_cache_group: per-frame cost of reading and writing a group one frame
 * at a time against batches (DESIGN.md rule 3, issue 3 benchmark 2).
 *
 * 64-byte frames, groups of {512, 8192, 32768} frames. Reads: a cursor from
 * the first frame to the last, with moq_cache_read_frame (single) or
 * moq_cache_read_frames with a caller-owned buffer of {8, 32, 128}. Writes:
 * a fresh group filled with moq_cache_write_frame (single) or
 * moq_cache_write_frames batches of {8, 32, 128} (the allocator is the
 * counting heap, so writes include its malloc). Prints ns/frame (wall clock,
 * best of 5) and instructions/frame, counted by re-running each case under
 * `valgrind --tool=callgrind --toggle-collect=bench_case_body` (only the
 * measured loop is counted).
 *
 *   bench_cache_group [--json] [--no-callgrind]
 *   bench_cache_group --case read|write --frames N --batch B --reps R   (one case)
 * Exit status 1 when a read target is missed: batch 8 <= 1/4 and batch 32 <=
 * 1/6 of single-frame reads, in instructions per frame.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"

#define FRAME 64

static const unsigned sizes[] = {512, 8192, 32768};
static const unsigned batches[] = {1, 8, 32, 128};

static struct moq_cache_counting cnt;
static struct moq_cache *cache;
static struct moq_cache_track *track;
static uint64_t seq;
static uint8_t payload[FRAME];
static volatile uint64_t sink;

static void setup(void)
{
	struct moq_cache_cfg cfg = {0};
	struct moq_cache_track_cfg tc = {0, 4};

	moq_cache_counting_init(&cnt);
	cfg.alloc = moq_cache_counting_alloc(&cnt);
	cache = moq_cache_create(&cfg);
	if (cache == NULL || moq_cache_track_create(cache, "b", 1, "t", 1, &tc, &track) != 0)
		abort();
	memset(payload, 0xab, sizeof(payload));
}

static struct moq_cache_group *filled(unsigned frames)
{
	struct moq_cache_group *g;
	unsigned i;

	if (moq_cache_group_open(track, seq++, 0, &g) != 0)
		abort();
	for (i = 0; i < frames; i++)
		if (moq_cache_write_frame(g, i, payload, FRAME) != 0)
			abort();
	moq_cache_group_finish(g);
	return g;
}

/* The measured loop; its name is what callgrind counts. */
__attribute__((noinline)) void bench_case_body(int write, struct moq_cache_group *g,
                                               unsigned frames, unsigned batch, unsigned reps);

__attribute__((noinline)) void bench_case_body(int write, struct moq_cache_group *g,
                                               unsigned frames, unsigned batch, unsigned reps)
{
	struct moq_cache_frame buf[128];
	struct moq_cache_frame_in in[128];
	uint64_t acc = 0;
	unsigned r, i;

	for (i = 0; i < 128; i++)
		in[i] = (struct moq_cache_frame_in){(int64_t)i, payload, FRAME};
	for (r = 0; r < reps; r++) {
		if (!write) {
			struct moq_cache_cursor cur = {0};
			int n;

			if (batch == 1) {
				while ((n = moq_cache_read_frame(g, &cur, buf)) > 0)
					acc += buf[0].len;
			} else {
				while ((n = moq_cache_read_frames(g, &cur, buf, batch)) > 0)
					acc += buf[n - 1].len;
			}
		} else {
			struct moq_cache_group *w;

			if (moq_cache_group_open(track, seq++, 0, &w) != 0)
				abort();
			if (batch == 1) {
				for (i = 0; i < frames; i++)
					acc += (uint64_t)moq_cache_write_frame(w, i, payload,
					                                       FRAME);
			} else {
				for (i = 0; i < frames; i += batch)
					acc += (uint64_t)moq_cache_write_frames(w, in, batch);
			}
			moq_cache_group_finish(w);
			moq_cache_group_unref(w);
		}
	}
	sink = acc;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ns per frame, best of 5 */
static double timed(int write, unsigned frames, unsigned batch)
{
	struct moq_cache_group *g = write ? NULL : filled(frames);
	unsigned reps = (write ? 400000u : 4000000u) / frames;
	double best = 1e30;
	int k;

	if (reps == 0)
		reps = 1;
	for (k = 0; k < 5; k++) {
		double t0 = now_ns(), t;

		bench_case_body(write, g, frames, batch, reps);
		t = (now_ns() - t0) / ((double)reps * frames);
		if (t < best)
			best = t;
	}
	if (g != NULL)
		moq_cache_group_unref(g);
	return best;
}

/* instructions per frame under callgrind; < 0 when unavailable */
static double insns(const char *self, int write, unsigned frames, unsigned batch)
{
	char out[64], cmd[512], line[512];
	unsigned reps = (write ? 32768u : 131072u) / frames;
	double ir = -1;
	FILE *f;

	if (reps == 0)
		reps = 1;
	snprintf(out, sizeof(out), "/tmp/bench_cache_group.%d.cg", (int)getpid());
	snprintf(cmd, sizeof(cmd),
	         "valgrind --tool=callgrind --callgrind-out-file=%s "
	         "--toggle-collect=bench_case_body %s --case %s --frames %u --batch %u --reps %u "
	         ">/dev/null 2>&1",
	         out, self, write ? "write" : "read", frames, batch, reps);
	if (system(cmd) != 0)
		return -1;
	f = fopen(out, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "totals:", 7) == 0 || strncmp(line, "summary:", 8) == 0)
			ir = strtod(strchr(line, ':') + 1, NULL);
	}
	fclose(f);
	unlink(out);
	return ir < 0 ? -1 : ir / ((double)reps * frames);
}

static int one_case(int argc, char **argv)
{
	int write = 0;
	unsigned frames = 512, batch = 1, reps = 1;
	struct moq_cache_group *g;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--case") == 0)
			write = strcmp(argv[i + 1], "write") == 0;
		else if (strcmp(argv[i], "--frames") == 0)
			frames = (unsigned)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--batch") == 0)
			batch = (unsigned)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--reps") == 0)
			reps = (unsigned)atoi(argv[i + 1]);
	}
	setup();
	g = write ? NULL : filled(frames);
	bench_case_body(write, g, frames, batch, reps);
	return 0;
}

int main(int argc, char **argv)
{
	int json = 0, cg = 1, fail = 0;
	double single_ins[2][3], single_ns[2][3];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--case") == 0)
			return one_case(argc, argv);
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		if (strcmp(argv[i], "--no-callgrind") == 0)
			cg = 0;
	}
	if (cg && system("valgrind --version >/dev/null 2>&1") != 0)
		cg = 0;
	setup();
	if (!json)
		printf("%-5s %-7s %-6s %9s %11s %9s %9s\n", "op", "frames", "batch", "ns/frame",
		       "insn/frame", "ns/single", "ins/single");
	for (int w = 0; w < 2; w++) {
		for (unsigned si = 0; si < 3; si++) {
			for (unsigned bi = 0; bi < 4; bi++) {
				unsigned fr = sizes[si], b = batches[bi];
				double ns = timed(w, fr, b);
				double ins = cg ? insns(argv[0], w, fr, b) : -1;
				double rn, ri;

				if (b == 1) {
					single_ns[w][si] = ns;
					single_ins[w][si] = ins;
				}
				rn = ns / single_ns[w][si];
				ri = ins > 0 ? ins / single_ins[w][si] : -1;
				if (!w && ins > 0 &&
				    ((b == 8 && ri > 0.25) || (b == 32 && ri > 1.0 / 6)))
					fail = 1;
				if (json)
					printf("{\"bench\":\"group\",\"op\":\"%s\",\"frames\":%u,"
					       "\"batch\":%u,\"ns_per_frame\":%.2f,"
					       "\"insn_per_frame\":%.1f,\"ns_vs_single\":%.3f,"
					       "\"insn_vs_single\":%.3f}\n",
					       w ? "write" : "read", fr, b, ns, ins, rn, ri);
				else
					printf("%-5s %-7u %-6u %9.2f %11.1f %9.3f %9.3f\n",
					       w ? "write" : "read", fr, b, ns, ins, rn, ri);
			}
		}
	}
	if (!json)
		printf("read targets (instructions): batch8 <= 0.25, batch32 <= 0.167 of single: "
		       "%s\n",
		       !cg    ? "not measured (no valgrind)"
		       : fail ? "FAIL"
		              : "PASS");
	moq_cache_track_drop(track);
	moq_cache_track_unref(track);
	moq_cache_destroy(cache);
	return fail;
}
