/* SPDX-License-Identifier: MIT */
/*
 * bench_fastpath: the 1-RTT fast path engine (fastpath/) sending a bulk
 * stream over a virtual-time path (1 ms each way, no loss) to a second
 * engine that acknowledges like a browser (every 2nd packet). Measures the
 * sending engine's calls only (its _send, the _recv of the ACKs and its
 * _timers): TSC cycles natively, and under callgrind (--callgrind re-runs
 * this program under valgrind, collecting the bench_srv_* functions, and
 * reads callgrind_annotate's inclusive totals) the instructions
 *   - per 1,200-byte packet sent, excluding the AEAD (issue 23, target 6:
 *     <= 800), with the AEAD (wc_AesGcmEncrypt) and header protection
 *     (fp_hp_mask, AES-NI or wolfCrypt) shown separately,
 *   - per ACK frame taken (target <= 400), without the AEAD open
 *     (wc_AesGcmDecrypt) and header protection of the packet carrying it.
 * Writes a table (stdout), and a PNG (gnuplot) with --png FILE.
 *
 *   bench_fastpath [--bytes N] [--conns N] [--callgrind] [--png FILE] [--json]
 */
#include "fastpath.h"
#include "fp_int.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <x86intrin.h>

/* One-way delay of the virtual path (ns). */
#define PATH_DELAY 1000000ull
/* Datagrams in flight per direction. */
#define QCAP 8192
/* The UDP payload of the data packets (the figure the target is set for). */
#define PKT 1200
/* Pieces the stream is written in (cache blocks are <= 64 KiB). */
#define PIECE 65536u
/* The targets of issue 23 (instructions). */
#define TARGET_PKT 800.0
#define TARGET_ACK 400.0

struct dgram {
	uint64_t at;
	uint16_t len;
	uint8_t d[1500];
	struct fp_addr from;
};

struct fifo {
	struct dgram *d;
	uint32_t head, n;
};

static struct fifo down, up; /* server->client, client->server */
static uint64_t now = 1000000000ull;
static uint64_t srv_cycles;
/* TSC readings around the measured calls: not under callgrind */
static int tsc = 1;
static uint64_t acked_total, rx_total;
static uint8_t *src;
static size_t src_len;

static int on_data(struct fp_conn *c, void *user, int64_t sid, uint64_t off, const uint8_t *d,
                   size_t n, int fin)
{
	(void)c, (void)user, (void)sid, (void)off, (void)d, (void)fin;
	rx_total += n;
	return 0;
}

static void on_acked(struct fp_conn *c, void *user, int64_t sid, uint64_t acked, uint64_t newly,
                     void *app)
{
	(void)app;
	(void)c, (void)user, (void)sid, (void)acked;
	acked_total += newly;
}

static const struct fp_callbacks cbs = {
        .stream_data = on_data,
        .stream_acked = on_acked,
};

/* The sending engine's calls, out of line so callgrind collects only them
 * (--toggle-collect=bench_srv_*). */
__attribute__((noinline)) int bench_srv_send(struct fp_engine *e, struct fp_pkt *p, size_t n);
__attribute__((noinline)) int bench_srv_recv(struct fp_engine *e, const uint8_t *d, size_t len,
                                             const struct fp_addr *l, const struct fp_addr *r);
__attribute__((noinline)) int bench_srv_timers(struct fp_engine *e);

int bench_srv_send(struct fp_engine *e, struct fp_pkt *p, size_t n)
{
	uint64_t t = tsc ? __rdtsc() : 0;
	int rv = fp_engine_send(e, p, n, now);
	if (tsc)
		srv_cycles += __rdtsc() - t;
	return rv;
}

int bench_srv_recv(struct fp_engine *e, const uint8_t *d, size_t len, const struct fp_addr *l,
                   const struct fp_addr *r)
{
	uint64_t t = tsc ? __rdtsc() : 0;
	int rv = fp_engine_recv(e, d, len, l, r, now);
	if (tsc)
		srv_cycles += __rdtsc() - t;
	return rv;
}

int bench_srv_timers(struct fp_engine *e)
{
	uint64_t t = tsc ? __rdtsc() : 0;
	int rv = fp_engine_timers(e, now);
	if (tsc)
		srv_cycles += __rdtsc() - t;
	return rv;
}

static void mk_dir(struct fp_dir_keys *k, uint8_t seed)
{
	memset(k->secret, seed, sizeof(k->secret));
	memset(k->key, seed + 1, sizeof(k->key));
	memset(k->iv, seed + 2, sizeof(k->iv));
	memset(k->hp, seed + 3, sizeof(k->hp));
}

static void addr_of(struct fp_addr *a, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	a->len = 16;
	a->b[0] = 2;
	a->b[2] = (uint8_t)(port >> 8);
	a->b[3] = (uint8_t)port;
	a->b[4] = 10;
	a->b[7] = 1;
}

/* The imports of connection @i: side 0 the server, 1 the client. */
static void mk_import(struct fp_import *m, int side, uint32_t i)
{
	memset(m, 0, sizeof(*m));
	m->version = 1;
	m->is_server = side == 0;
	m->cipher = FP_CIPHER_AES_128_GCM_SHA256;
	mk_dir(&m->tx, (uint8_t)(0x10 + side));
	mk_dir(&m->rx, (uint8_t)(0x11 - side));
	m->nscids = 1;
	m->scids[0].len = 16;
	memset(m->scids[0].id, 0xa0 + side, 16);
	memcpy(m->scids[0].id, &i, sizeof(i));
	m->scids[0].has_token = 1;
	memset(m->scids[0].token, 0xc0 + side, 16);
	memcpy(m->scids[0].token, &i, sizeof(i));
	m->dcid.len = 16;
	memset(m->dcid.id, 0xa1 - side, 16);
	memcpy(m->dcid.id, &i, sizeof(i));
	m->tx_pn = 1000;
	m->largest_acked = FP_PN_NONE;
	m->rx_largest_pn = FP_PN_NONE;
	m->max_ack_delay_ns = 25000000;
	m->ack_delay_exponent = 3;
	m->smoothed_rtt_ns = 2 * PATH_DELAY;
	m->rttvar_ns = PATH_DELAY;
	m->min_rtt_ns = 2 * PATH_DELAY;
	m->latest_rtt_ns = 2 * PATH_DELAY;
	m->local_max_data = m->peer_max_data = 1ull << 50;
	m->local_max_stream_data_bidi_local = m->local_max_stream_data_bidi_remote =
	        m->local_max_stream_data_uni = 1ull << 40;
	m->peer.initial_max_stream_data_bidi_local = m->peer.initial_max_stream_data_bidi_remote =
	        m->peer.initial_max_stream_data_uni = 1ull << 40;
	m->local_max_streams_bidi = m->local_max_streams_uni = 100;
	m->peer_max_streams_bidi = m->peer_max_streams_uni = 100;
	m->next_local_bidi = side == 0 ? 1 : 0;
	m->next_local_uni = side == 0 ? 3 : 2;
	m->next_remote_bidi = side == 0 ? 0 : 1;
	m->next_remote_uni = side == 0 ? 2 : 3;
	m->peer.max_idle_timeout_ns = m->local_idle_timeout_ns = 30000000000ull;
	m->path_validated = 1;
	m->max_udp_payload = PKT;
	addr_of(&m->local, (uint16_t)(4433 + side));
	addr_of(&m->remote, (uint16_t)(4434 - side));
}

static void push(struct fifo *f, const uint8_t *d, size_t len, const struct fp_addr *from)
{
	struct dgram *g;

	if (f->n == QCAP)
		return;
	g = &f->d[(f->head + f->n++) % QCAP];
	g->at = now + PATH_DELAY;
	g->len = (uint16_t)len;
	memcpy(g->d, d, len);
	g->from = *from;
}

struct result {
	uint64_t bytes, pkts_out, pkts_in, acks_in;
	double cyc_per_pkt;
	/* callgrind (inclusive instructions) */
	double ir_send, ir_recv, ir_timers, ir_seal, ir_open, ir_hp;
	int have_cg;
};

static int run(size_t bytes, uint32_t conns, struct result *r)
{
	struct fp_engine_config cfg;
	struct fp_engine *e[2];
	struct fp_conn **c[2];
	static uint8_t bufs[32][1500];
	struct fp_pkt pk[32];
	struct fp_addr a0, a1;
	struct fp_stats st;
	uint32_t i;
	int s, err;
	uint64_t guard = 0;

	now = 1000000000ull;
	srv_cycles = acked_total = rx_total = 0;
	down.head = down.n = up.head = up.n = 0;
	memset(&cfg, 0, sizeof(cfg));
	cfg.max_conns = conns;
	cfg.max_chunks = 64 * conns + 64;
	cfg.sent_ring = 1024;
	cfg.cb = &cbs;
	for (s = 0; s < 2; s++) {
		e[s] = fp_engine_new(&cfg, &err);
		c[s] = calloc(conns, sizeof(*c[s]));
		if (!e[s] || !c[s])
			return -1;
		for (i = 0; i < conns; i++) {
			struct fp_import im;
			mk_import(&im, s, i);
			c[s][i] = fp_conn_import(e[s], &im, now, &err);
			if (!c[s][i]) {
				fprintf(stderr, "import: %d\n", err);
				return -1;
			}
		}
	}
	addr_of(&a0, 4433);
	addr_of(&a1, 4434);
	/* each connection: one stream of bytes / conns from the source buffer */
	for (i = 0; i < conns; i++) {
		int64_t sid;
		size_t off, per = bytes / conns;
		if (fp_stream_open(c[0][i], 0, &sid) < 0)
			return -1;
		for (off = 0; off < per; off += PIECE) {
			struct fp_iov v;
			size_t n = per - off < PIECE ? per - off : PIECE;
			v.base = src + (off % (src_len - PIECE));
			v.len = n;
			if (fp_stream_write(c[0][i], sid, &v, 1, off + n == per) != (long)n)
				return -1;
		}
	}
	for (i = 0; i < 32; i++) {
		pk[i].data = bufs[i];
		pk[i].cap = sizeof(bufs[i]);
	}
	while (acked_total < (bytes / conns) * conns && guard++ < 100000000ull) {
		int n, k, any = 0;
		uint64_t next = UINT64_MAX, t;

		/* as a poll loop does: send when something is ready, run the
		 * timers when one is due */
		n = fp_engine_pending(e[0]) ? bench_srv_send(e[0], pk, 32) : 0;
		for (k = 0; k < n; k++)
			push(&down, pk[k].data, pk[k].len, &a0);
		any |= n > 0;
		n = fp_engine_send(e[1], pk, 32, now);
		for (k = 0; k < n; k++)
			push(&up, pk[k].data, pk[k].len, &a1);
		any |= n > 0;
		while (down.n && down.d[down.head].at <= now) {
			struct dgram *g = &down.d[down.head];
			fp_engine_recv(e[1], g->d, g->len, &a1, &g->from, now);
			down.head = (down.head + 1) % QCAP;
			down.n--;
			any = 1;
		}
		while (up.n && up.d[up.head].at <= now) {
			struct dgram *g = &up.d[up.head];
			bench_srv_recv(e[0], g->d, g->len, &a0, &g->from);
			up.head = (up.head + 1) % QCAP;
			up.n--;
			any = 1;
		}
		if (fp_engine_next_expiry(e[0]) <= now)
			bench_srv_timers(e[0]);
		fp_engine_timers(e[1], now);
		if (any || fp_engine_pending(e[0]) || fp_engine_pending(e[1]))
			continue;
		if (down.n)
			next = down.d[down.head].at;
		if (up.n && up.d[up.head].at < next)
			next = up.d[up.head].at;
		t = fp_engine_next_expiry(e[0]);
		if (t < next)
			next = t;
		t = fp_engine_next_expiry(e[1]);
		if (t < next)
			next = t;
		if (next == UINT64_MAX)
			break;
		if (next > now)
			now = next;
		else
			now += 1000;
	}
	fp_engine_stats(e[0], &st);
	r->bytes = acked_total;
	r->pkts_out = st.pkts_out;
	r->pkts_in = st.pkts_in;
	r->acks_in = st.acks_in;
	r->cyc_per_pkt = st.pkts_out ? (double)srv_cycles / (double)st.pkts_out : 0;
	if (rx_total != acked_total)
		fprintf(stderr, "bench_fastpath: received %llu of %llu acked\n",
		        (unsigned long long)rx_total, (unsigned long long)acked_total);
	for (s = 0; s < 2; s++) {
		fp_engine_free(e[s]);
		free(c[s]);
	}
	return acked_total >= (bytes / conns) * conns ? 0 : -1;
}

/* callgrind_annotate --inclusive=yes: the total of function @fn. */
static double incl_of(const char *ann, const char *fn)
{
	FILE *f = fopen(ann, "r");
	char line[1024];
	double v = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strstr(line, ":"), *p, *q;
		char num[64];
		size_t j = 0;
		if (colon == NULL)
			continue;
		/* "  1,234 (12.3%)  file:function [obj]" */
		p = colon + 1;
		q = p + strlen(fn);
		if (strncmp(p, fn, strlen(fn)) != 0 ||
		    (*q != ' ' && *q != '\n' && *q != '\'' && *q))
			continue;
		for (p = line; *p && (*p == ' ' || *p == ',' || (*p >= '0' && *p <= '9')); p++)
			if (*p >= '0' && *p <= '9' && j + 1 < sizeof(num))
				num[j++] = *p;
		num[j] = '\0';
		if (j > 0) {
			v = strtod(num, NULL);
			break;
		}
	}
	fclose(f);
	return v;
}

/* Median TSC cycles of one fp_seal of 1,200 bytes (@c[0]) and one fp_open
 * of a 40-byte ACK packet (@c[1]) with the AEAD @mode (FP_AEAD_*). */
static void aead_cycles(double c[2], int mode)
{
	enum { N = 2001 };
	static uint64_t t[N];
	uint8_t key[16] = {7}, iv[12] = {9}, hdr[21] = {0x40}, p[1300], q[64], out[64];
	int was = fp_crypto_force(mode), i, j, k;
	struct fp_aes *a = fp_aes_new();
	int bad = a == NULL || fp_aes_gcm_key(a, key) < 0;

	fp_crypto_force(was);
	c[0] = c[1] = 0;
	if (bad) {
		fp_aes_free(a);
		return;
	}
	memset(p, 1, sizeof(p));
	memset(q, 2, 24);
	fp_seal(a, iv, 5, hdr, sizeof(hdr), q, 24); /* 24 + 16 = 40 bytes to open */
	for (k = 0; k < 2; k++) {
		for (i = 0; i < N; i++) {
			uint64_t t0 = __rdtsc();
			if (k == 0)
				fp_seal(a, iv, (uint64_t)i, hdr, sizeof(hdr), p,
				        1200 - sizeof(hdr) - 16);
			else
				fp_open(a, iv, 5, hdr, sizeof(hdr), q, 40, out);
			t[i] = __rdtsc() - t0;
		}
		for (i = 1; i < N; i++) /* insertion sort: N is small */
			for (j = i; j > 0 && t[j - 1] > t[j]; j--) {
				uint64_t x = t[j];
				t[j] = t[j - 1];
				t[j - 1] = x;
			}
		c[k] = (double)t[N / 2];
	}
	fp_aes_free(a);
}

/* @aead: "wolfcrypt" (the AES-GCM a CPU without VAES runs; the copy path)
 * or "128" (gcm.c's 128-bit code: the engine code of the 512-bit path,
 * stream data sealed from the chunks; valgrind has no AVX-512). */
static int callgrind(const char *self, size_t bytes, uint32_t conns, const char *aead,
                     struct result *r)
{
	char out[96], ann[96], b[32], n[32], cmd[512];
	int g = !strcmp(aead, "128");
	pid_t pid;
	int status;

	snprintf(out, sizeof(out), "/tmp/bench_fastpath.%d.cg", (int)getpid());
	snprintf(ann, sizeof(ann), "/tmp/bench_fastpath.%d.txt", (int)getpid());
	snprintf(b, sizeof(b), "%zu", bytes);
	snprintf(n, sizeof(n), "%u", conns);
	pid = fork();
	if (pid == 0) {
		char cgout[128];
		snprintf(cgout, sizeof(cgout), "--callgrind-out-file=%s", out);
		if (freopen("/dev/null", "w", stderr) == NULL)
			_exit(126);
		execlp("valgrind", "valgrind", "--tool=callgrind", cgout,
		       "--toggle-collect=bench_srv_*", self, "--bytes", b, "--conns", n, "--quiet",
		       "--aead", aead, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		return -1;
	/* the same run natively for the counts (virtual time: deterministic) */
	{
		int was = fp_crypto_force(g ? FP_AEAD_128 : FP_AEAD_WOLFCRYPT), rc;
		rc = run(bytes, conns, r);
		fp_crypto_force(was);
		if (rc < 0)
			return -1;
	}
	snprintf(cmd, sizeof(cmd), "callgrind_annotate --inclusive=yes --threshold=100 %s > %s",
	         out, ann);
	if (system(cmd) != 0)
		return -1;
	r->ir_send = incl_of(ann, "bench_srv_send");
	r->ir_recv = incl_of(ann, "bench_srv_recv");
	r->ir_timers = incl_of(ann, "bench_srv_timers");
	r->ir_seal = incl_of(ann, g ? "fp_gcm_sealv" : "wc_AesGcmEncrypt");
	r->ir_open = incl_of(ann, g ? "fp_gcm_open" : "wc_AesGcmDecrypt");
	r->ir_hp = incl_of(ann, "fp_hp_mask");
	r->have_cg = r->ir_send > 0;
	unlink(out);
	unlink(ann);
	return r->have_cg ? 0 : -1;
}

static void png(const char *file, double pkt_eng, double pkt_aead, double pkt_hp, double ack_eng,
                double ack_aead, double ack_hp)
{
	FILE *g = popen("gnuplot", "w");

	if (g == NULL) {
		fprintf(stderr, "bench_fastpath: no gnuplot, no PNG\n");
		return;
	}
	fprintf(g, "set terminal png size 900,500\nset output '%s'\n", file);
	fprintf(g, "set title 'fast path: instructions (callgrind), engine vs AEAD / HP'\n");
	fprintf(g, "set style data histograms\nset style histogram rowstacked\n");
	fprintf(g, "set style fill solid 0.8 border -1\nset boxwidth 0.5\n");
	fprintf(g, "set ylabel 'instructions'\nset key outside right\nset yrange [0:*]\n");
	fprintf(g, "set arrow 1 from -0.4,%g to 0.4,%g nohead front lw 2 lc rgb 'red'\n",
	        TARGET_PKT, TARGET_PKT);
	fprintf(g, "set arrow 2 from 0.6,%g to 1.4,%g nohead front lw 2 lc rgb 'red'\n", TARGET_ACK,
	        TARGET_ACK);
	fprintf(g, "plot '-' using 2:xtic(1) title 'engine', '' using 2 title 'header protection',"
	           " '' using 2 title 'AEAD'\n");
	fprintf(g, "\"per packet sent\" %g\n\"per ACK frame\" %g\ne\n", pkt_eng, ack_eng);
	fprintf(g, "\"per packet sent\" %g\n\"per ACK frame\" %g\ne\n", pkt_hp, ack_hp);
	fprintf(g, "\"per packet sent\" %g\n\"per ACK frame\" %g\ne\n", pkt_aead, ack_aead);
	pclose(g);
}

/*
 * Memory per connection (issue 23, target 5: <= 16 KB after the handoff),
 * measured: the heap (mallinfo2: in use + mmap'd) an engine of @n
 * connections takes with all @n imported (as quic/handoff.c configures it:
 * the default pools, @ring sent records each), divided by @n. The pools are
 * made at fp_engine_new for max_conns, so this is what each connection slot
 * costs whether or not it carries media.
 */
static double mem_per_conn(uint32_t n, uint32_t ring)
{
	struct fp_engine_config cfg;
	struct fp_mallinfo_pair {
		size_t used, mapped;
	} a, b;
	struct mallinfo2 mi;
	struct fp_engine *e;
	uint32_t i;
	int err;

	memset(&cfg, 0, sizeof(cfg));
	cfg.max_conns = n;
	cfg.sent_ring = ring;
	cfg.cb = &cbs;
	mi = mallinfo2();
	a.used = mi.uordblks;
	a.mapped = mi.hblkhd;
	e = fp_engine_new(&cfg, &err);
	if (e == NULL)
		return -1;
	for (i = 0; i < n; i++) {
		struct fp_import im;
		mk_import(&im, 0, i);
		if (fp_conn_import(e, &im, now, &err) == NULL) {
			fp_engine_free(e);
			return -1;
		}
	}
	mi = mallinfo2();
	b.used = mi.uordblks;
	b.mapped = mi.hblkhd;
	fp_engine_free(e);
	return ((double)(b.used - a.used) + (double)(b.mapped - a.mapped)) / n;
}

int main(int argc, char **argv)
{
	size_t bytes = 20u * 1000 * 1000, cg_bytes = 4u * 1000 * 1000;
	uint32_t conns = 1;
	int quiet = 0, cg = 0, json = 0, i;
	uint32_t mem_n = 0;
	const char *pngf = NULL;
	struct result r, c, rw, cgv;
	double gather_eng = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
			bytes = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--conns") && i + 1 < argc)
			conns = (uint32_t)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--cg-bytes") && i + 1 < argc)
			cg_bytes = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--png") && i + 1 < argc)
			pngf = argv[++i];
		else if (!strcmp(argv[i], "--callgrind"))
			cg = 1;
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--mem") && i + 1 < argc)
			mem_n = (uint32_t)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--quiet"))
			quiet = 1, tsc = 0;
		else if (!strcmp(argv[i], "--aead") && i + 1 < argc) {
			/* the callgrind child's AES-GCM (see callgrind()) */
			const char *a = argv[++i];
			if (strcmp(a, "128") && strcmp(a, "wolfcrypt")) {
				fprintf(stderr, "bench_fastpath: --aead: 128 or wolfcrypt\n");
				return 2;
			}
			fp_crypto_force(!strcmp(a, "128") ? FP_AEAD_128 : FP_AEAD_WOLFCRYPT);
		} else {
			fprintf(stderr,
			        "usage: %s [--bytes N] [--conns N] [--callgrind [--cg-bytes N]] "
			        "[--png FILE] [--json] [--mem N]\n",
			        argv[0]);
			return 2;
		}
	}
	if (conns == 0 || bytes / conns == 0)
		return 2;
	if (mem_n) {
		/* side by side in one run: the engine's default ring and the
		 * smaller ones */
		static const uint32_t rings[] = {256, 128, 64};

		printf("| engine memory per connection, %u imported | sent ring | bytes |\n"
		       "|---|---|---|\n",
		       mem_n);
		for (i = 0; i < 3; i++) {
			double m = mem_per_conn(mem_n, rings[i]);
			if (m < 0) {
				fprintf(stderr, "bench_fastpath: import failed\n");
				return 1;
			}
			printf("| | %u | %.0f |\n", rings[i], m);
		}
		return 0;
	}
	src_len = 4u << 20;
	src = malloc(src_len);
	for (i = 0; i < (int)src_len; i++)
		src[i] = (uint8_t)(i * 131);
	down.d = calloc(QCAP, sizeof(struct dgram));
	up.d = calloc(QCAP, sizeof(struct dgram));
	/* natively, side by side: the engine on wolfCrypt's AES-GCM, then on
	 * gcm.c's where the CPU allows (under valgrind it never does: valgrind
	 * has no AVX-512, so the callgrind figures below are wolfCrypt's) */
	memset(&rw, 0, sizeof(rw));
	if (!quiet && fp_gcm_usable()) {
		int was = fp_crypto_force(FP_AEAD_WOLFCRYPT);
		if (run(bytes, conns, &rw) < 0) {
			fprintf(stderr, "bench_fastpath: the transfer did not complete\n");
			return 1;
		}
		fp_crypto_force(was);
	}
	memset(&r, 0, sizeof(r));
	if (run(bytes, conns, &r) < 0) {
		fprintf(stderr, "bench_fastpath: the transfer did not complete\n");
		return 1;
	}
	if (quiet)
		return 0;
	memset(&c, 0, sizeof(c));
	memset(&cgv, 0, sizeof(cgv));
	if (cg && (callgrind(argv[0], cg_bytes, conns, "wolfcrypt", &c) < 0 ||
	           callgrind(argv[0], cg_bytes, conns, "128", &cgv) < 0)) {
		fprintf(stderr, "bench_fastpath: callgrind failed\n");
		return 1;
	}
	printf("| fast path, %u conn(s), %zu B, %d B packets | value |\n|---|---|\n", conns, bytes,
	       PKT);
	printf("| packets sent / ACK packets in / ACK frames | %llu / %llu / %llu |\n",
	       (unsigned long long)r.pkts_out, (unsigned long long)r.pkts_in,
	       (unsigned long long)r.acks_in);
	printf("| TSC cycles per packet sent (send+recv+timers, native), AES-GCM of %s | %.0f |\n",
	       fp_gcm_usable() ? "gcm.c" : "wolfCrypt", r.cyc_per_pkt);
	if (rw.pkts_out) {
		double own[2], x128[2], wc[2];
		aead_cycles(own, FP_AEAD_AUTO);
		aead_cycles(x128, FP_AEAD_128);
		aead_cycles(wc, FP_AEAD_WOLFCRYPT);
		printf("| the same, AES-GCM of wolfCrypt (same run) | %.0f (%.2fx) |\n",
		       rw.cyc_per_pkt, rw.cyc_per_pkt / r.cyc_per_pkt);
		printf("| TSC cycles per 1,200-B seal / 40-B open: gcm.c (%s) | %.0f / %.0f |\n",
		       fp_gcm_usable() == 2 ? "512-bit" : "128-bit", own[0], own[1]);
		printf("| TSC cycles per 1,200-B seal / 40-B open: gcm.c 128-bit | %.0f / %.0f |\n",
		       x128[0], x128[1]);
		printf("| TSC cycles per 1,200-B seal / 40-B open: wolfCrypt | %.0f / %.0f |\n",
		       wc[0], wc[1]);
	}
	if (c.have_cg) {
		/* header protection runs once per packet each way: split by count */
		double hp_call = c.ir_hp / (double)(c.pkts_out + c.pkts_in);
		double pkt_all = c.ir_send / (double)c.pkts_out;
		double pkt_aead = c.ir_seal / (double)c.pkts_out;
		double pkt_hp = hp_call;
		double pkt_eng = pkt_all - pkt_aead;
		double ack_all = c.ir_recv / (double)c.acks_in;
		double ack_aead = c.ir_open / (double)c.acks_in;
		double ack_hp = hp_call * (double)c.pkts_in / (double)c.acks_in;
		double ack_eng = ack_all - ack_aead - ack_hp;
		double tmr = c.ir_timers / (double)c.pkts_out;

		printf("| callgrind over %zu B: packets / ACK frames | %llu / %llu |\n", cg_bytes,
		       (unsigned long long)c.pkts_out, (unsigned long long)c.acks_in);
		printf("| instr per packet sent, excluding the AEAD (target <= %.0f) | **%.0f** "
		       "(of it header protection %.0f) |\n",
		       TARGET_PKT, pkt_eng, pkt_hp);
		printf("| instr per packet sent, AEAD (wc_AesGcmEncrypt, 1,200 B) | %.0f |\n",
		       pkt_aead);
		if (cgv.have_cg) {
			/* the same engine, sealing from the chunks (gcm.c; what the
			 * 512-bit AES-GCM runs, measured on its 128-bit twin) */
			double g_eng = (cgv.ir_send - cgv.ir_seal) / (double)cgv.pkts_out;
			double g_ack = (cgv.ir_recv - cgv.ir_open) / (double)cgv.acks_in - ack_hp;
			printf("| the same, stream data sealed from the chunks (gcm.c, no copy) | "
			       "**%.0f** |\n",
			       g_eng);
			printf("| instr per packet sent, AEAD (gcm.c 128-bit; valgrind has no "
			       "AVX-512) | %.0f |\n",
			       cgv.ir_seal / (double)cgv.pkts_out);
			printf("| instr per ACK frame taken without AEAD and HP, gcm.c | %.0f |\n",
			       g_ack);
			gather_eng = g_eng;
		}
		printf("| instr per ACK frame taken, without AEAD and HP (target <= %.0f) | "
		       "**%.0f** "
		       "|\n",
		       TARGET_ACK, ack_eng);
		printf("| instr per ACK frame taken, AEAD open + HP of its packet | %.0f + %.0f "
		       "|\n",
		       ack_aead, ack_hp);
		printf("| the same per packet it acknowledged (%.2f packets per ACK frame) | %.0f "
		       "|\n",
		       (double)c.pkts_out / (double)c.acks_in,
		       ack_eng * (double)c.acks_in / (double)c.pkts_out);
		printf("| instr in timers per packet sent | %.1f |\n", tmr);
		if (json)
			printf("{\"pkt_instr_excl_aead\":%.0f,\"pkt_instr_excl_aead_gather\":%.0f,"
			       "\"pkt_aead\":%.0f,\"pkt_hp\":%.0f,"
			       "\"ack_instr\":%.0f,\"ack_aead\":%.0f,\"ack_hp\":%.0f,"
			       "\"cycles_per_pkt\":%.0f}\n",
			       pkt_eng, gather_eng, pkt_aead, pkt_hp, ack_eng, ack_aead, ack_hp,
			       r.cyc_per_pkt);
		if (pngf)
			png(pngf, pkt_eng - pkt_hp, pkt_aead, pkt_hp, ack_eng, ack_aead, ack_hp);
	}
	free(src);
	free(down.d);
	free(up.d);
	return 0;
}
