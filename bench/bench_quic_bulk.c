/* SPDX-License-Identifier: MIT */
/*
 * bench_quic_bulk: one server connection sends a large stream (default
 * 100 MB) to an in-process client over a virtual-time path (1 ms each way,
 * no loss), with real TLS 1.3 / AES-128-GCM. Measures the server's whole
 * send path (its _send, _recv of ACKs and _timers calls): TSC cycles per
 * payload byte natively, and instructions per payload byte under callgrind
 * (--callgrind re-runs this program under valgrind and reads the totals).
 *
 *   bench_quic_bulk [--bytes N] [--src N] [--pkt 1200] [--cc cubic|bbr] [--reps 3] [--json]
 *                   [--callgrind [--cg-bytes N]]
 */
#include "quic.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <x86intrin.h>

/* One-way delay of the virtual path (ns). */
#define PATH_DELAY 1000000ull
/* Datagrams in flight per direction (reused buffers, like a TX mbuf pool). */
#define QCAP 4096
/* Send buffer handed to the stream per iovec (the cache's group blocks are
 * at most 64 KiB; a few large ones keep the iovec count down here). */
#define CHUNK (1u << 20)

struct dgram {
	uint64_t at;
	size_t len;
	struct moq_quic_addr from, to;
	uint8_t data[1500];
};

struct fifo {
	struct dgram *d;
	uint32_t head, n;
};

static struct fifo up, down; /* client->server, server->client */
static uint64_t srv_cycles;
/* Size of the source buffer the stream is written from (0 = all of it
 * distinct memory; N = the same N bytes again and again, like a cached group
 * fanned out, hot in the CPU caches). */
static size_t src_bytes;
/* Per-window figures: cycles per byte over each WINDOW acknowledged bytes;
 * the median of the windows resists the machine being shared (a preempted
 * window is an outlier, not a bias). */
#define WINDOW      (4u << 20)
#define MAX_WINDOWS 4096
static double win_cpb[MAX_WINDOWS];
static int nwin;
static uint64_t win_cycles0, win_acked0;
static int measuring;
static uint64_t rx_bytes, acked;
static int rx_fin, established_c, established_s;
static struct moq_quic_conn *sconn;

static int on_est(struct moq_quic_conn *c, void *user, const char *alpn)
{
	(void)alpn;
	if (user == (void *)1) {
		established_s = 1;
		sconn = c;
	} else {
		established_c = 1;
	}
	return 0;
}

static int on_data(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t off,
                   const uint8_t *data, size_t len, int fin)
{
	(void)c;
	(void)user;
	(void)sid;
	(void)off;
	(void)data;
	rx_bytes += len;
	if (fin)
		rx_fin = 1;
	return 0;
}

static void on_acked(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t a, uint64_t newly,
                     void *app)
{
	(void)app;
	(void)c;
	(void)user;
	(void)sid;
	(void)a;
	acked += newly;
}

static const struct moq_quic_callbacks cbs = {
        .established = on_est,
        .stream_data = on_data,
        .stream_acked = on_acked,
};

/* Close a window once WINDOW more bytes are acknowledged (checked after each
 * server call, when srv_cycles is up to date). */
static void win_check(void)
{
	if (acked - win_acked0 >= WINDOW && nwin < MAX_WINDOWS) {
		win_cpb[nwin++] = (double)(srv_cycles - win_cycles0) / (double)(acked - win_acked0);
		win_cycles0 = srv_cycles;
		win_acked0 = acked;
	}
}

/* The server's calls, kept out of line so callgrind can collect only them
 * (--toggle-collect=bulk_srv_*). */
__attribute__((noinline)) int bulk_srv_send(struct moq_quic_endpoint *ep, struct moq_quic_pkt *p,
                                            size_t n, uint64_t now);
__attribute__((noinline)) int bulk_srv_recv(struct moq_quic_endpoint *ep, const uint8_t *d,
                                            size_t len, const struct moq_quic_addr *l,
                                            const struct moq_quic_addr *r, uint64_t now);
__attribute__((noinline)) int bulk_srv_timers(struct moq_quic_endpoint *ep, uint64_t now);

int bulk_srv_send(struct moq_quic_endpoint *ep, struct moq_quic_pkt *p, size_t n, uint64_t now)
{
	uint64_t t = __rdtsc();
	int rv = moq_quic_endpoint_send(ep, p, n, now);

	srv_cycles += __rdtsc() - t;
	win_check();
	return rv;
}

int bulk_srv_recv(struct moq_quic_endpoint *ep, const uint8_t *d, size_t len,
                  const struct moq_quic_addr *l, const struct moq_quic_addr *r, uint64_t now)
{
	uint64_t t = __rdtsc();
	int rv = moq_quic_endpoint_recv(ep, d, len, l, r, now);

	srv_cycles += __rdtsc() - t;
	win_check();
	return rv;
}

int bulk_srv_timers(struct moq_quic_endpoint *ep, uint64_t now)
{
	uint64_t t = __rdtsc();
	int rv = moq_quic_endpoint_timers(ep, now);

	srv_cycles += __rdtsc() - t;
	win_check();
	return rv;
}

static struct moq_quic_addr addr4(const char *ip, uint16_t port)
{
	struct moq_quic_addr a;

	moq_quic_addr_ip4(ip, port, &a);
	return a;
}

/* Write a burst straight into the queue's free slots (as into TX mbufs). */
static int pump(struct moq_quic_endpoint *ep, struct fifo *f, uint64_t now, int server)
{
	struct moq_quic_pkt pk[MOQ_QUIC_BURST];
	int n, i, total = 0;

	do {
		size_t room = QCAP - f->n;

		if (room > MOQ_QUIC_BURST)
			room = MOQ_QUIC_BURST;
		if (room == 0)
			return total; /* the path is full: deliver first */
		for (i = 0; i < (int)room; i++) {
			pk[i].data = f->d[(f->head + f->n + (uint32_t)i) % QCAP].data;
			pk[i].cap = sizeof(f->d[0].data);
		}
		n = server && measuring ? bulk_srv_send(ep, pk, room, now)
		                        : moq_quic_endpoint_send(ep, pk, room, now);
		for (i = 0; i < n; i++) {
			struct dgram *d = &f->d[(f->head + f->n) % QCAP];

			d->len = pk[i].len;
			d->from = pk[i].local;
			d->to = pk[i].remote;
			d->at = now + PATH_DELAY;
			f->n++;
		}
		total += n > 0 ? n : 0;
	} while (n == (int)MOQ_QUIC_BURST);
	return total;
}

static int deliver(struct moq_quic_endpoint *ep, struct fifo *f, uint64_t now, int server)
{
	int k = 0;

	while (f->n > 0 && f->d[f->head].at <= now) {
		struct dgram *d = &f->d[f->head];

		if (server && measuring)
			bulk_srv_recv(ep, d->data, d->len, &d->to, &d->from, now);
		else
			moq_quic_endpoint_recv(ep, d->data, d->len, &d->to, &d->from, now);
		f->head = (f->head + 1) % QCAP;
		f->n--;
		k++;
	}
	return k;
}

struct result {
	size_t bytes, pkt;
	const char *cc;
	double cycles_per_byte;
	double instr_per_byte; /* < 0: not measured */
	double win_median;     /* median over 4 MiB windows */
	uint64_t pkts;
	double virt_s;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int run(size_t bytes, size_t pkt, enum moq_quic_cc cc, struct result *res)
{
	static const char *const alpn[] = {"moq-lite-05"};
	struct moq_quic_config sc, ccfg;
	struct moq_quic_endpoint *srv, *cli;
	struct moq_quic_addr ca = addr4("10.0.0.1", 1000), sa = addr4("10.0.0.2", 443);
	struct moq_quic_stats st;
	uint64_t now = 1000000000ull;
	uint8_t *buf;
	int64_t sid;
	size_t off, srcsz, chunk;

	srv_cycles = 0;
	nwin = 0;
	win_cycles0 = win_acked0 = 0;
	measuring = 0;
	rx_bytes = acked = 0;
	rx_fin = established_c = established_s = 0;
	up.head = up.n = down.head = down.n = 0;
	memset(&sc, 0, sizeof(sc));
	sc.role = MOQ_QUIC_SERVER;
	sc.alpn = alpn;
	sc.alpn_count = 1;
	sc.retry = MOQ_QUIC_RETRY_NEVER;
	sc.max_udp_payload = pkt;
	sc.cc = cc;
	sc.cb = &cbs;
	sc.user = (void *)1;
	ccfg = sc;
	ccfg.role = MOQ_QUIC_CLIENT;
	ccfg.user = (void *)2;
	ccfg.max_stream_data = 64u << 20;
	ccfg.max_data = 256u << 20;
	srv = moq_quic_endpoint_new(&sc, NULL);
	cli = moq_quic_endpoint_new(&ccfg, NULL);
	up.d = calloc(QCAP, sizeof(struct dgram));
	down.d = calloc(QCAP, sizeof(struct dgram));
	srcsz = src_bytes && src_bytes < bytes ? src_bytes : bytes;
	chunk = srcsz < CHUNK ? srcsz : CHUNK;
	buf = malloc(srcsz);
	if (!srv || !cli || !up.d || !down.d || !buf) {
		fprintf(stderr, "bench_quic_bulk: setup failed\n");
		return 1;
	}
	for (off = 0; off < srcsz; off++)
		buf[off] = (uint8_t)(off * 7);
	if (moq_quic_connect(cli, &ca, &sa, NULL, now, NULL) == NULL) {
		fprintf(stderr, "bench_quic_bulk: connect failed\n");
		return 1;
	}

	for (;;) {
		int acts = 0;
		uint64_t next = UINT64_MAX, e;

		acts += deliver(cli, &down, now, 0);
		acts += deliver(srv, &up, now, 1);
		if (moq_quic_endpoint_next_expiry(cli) <= now)
			acts += moq_quic_endpoint_timers(cli, now);
		if (moq_quic_endpoint_next_expiry(srv) <= now)
			acts += measuring ? bulk_srv_timers(srv, now)
			                  : moq_quic_endpoint_timers(srv, now);
		if (established_s == 1 && established_c) {
			/* start the stream once, from caller memory (no copies) */
			struct iovec iov[256];
			size_t n = 0;

			int orv = moq_quic_stream_open(sconn, 0, &sid);

			if (orv == MOQ_ERR_AGAIN)
				goto not_yet; /* the peer's stream limit is not known yet */
			if (orv != 0) {
				fprintf(stderr, "bench_quic_bulk: stream open: %s\n",
				        moq_err_str(orv));
				return 1;
			}
			/* caller memory, no copies; iovecs in batches of 256 */
			for (off = 0; off < bytes;) {
				for (n = 0; n < 256 && off < bytes; n++) {
					size_t l = bytes - off < chunk ? bytes - off : chunk;

					iov[n].iov_base = buf + (off % srcsz);
					iov[n].iov_len = l;
					off += l;
				}
				if (moq_quic_stream_write(sconn, sid, iov, n, off == bytes) < 0) {
					fprintf(stderr, "bench_quic_bulk: stream write failed\n");
					return 1;
				}
			}
			established_s = 2;
			measuring = 1; /* the transfer only, not the handshake */
		}
	not_yet:
		if (moq_quic_endpoint_pending(srv))
			acts += pump(srv, &down, now, 1);
		if (moq_quic_endpoint_pending(cli))
			acts += pump(cli, &up, now, 0);
		if (rx_fin && acked >= bytes)
			break;
		if (acts)
			continue;
		if (down.n)
			next = down.d[down.head].at;
		if (up.n && up.d[up.head].at < next)
			next = up.d[up.head].at;
		e = moq_quic_endpoint_next_expiry(cli);
		if (e < next)
			next = e;
		e = moq_quic_endpoint_next_expiry(srv);
		if (e < next)
			next = e;
		if (next == UINT64_MAX) {
			fprintf(stderr, "bench_quic_bulk: stalled\n");
			return 1;
		}
		now = next > now ? next : now + 1;
	}
	if (rx_bytes != bytes) {
		fprintf(stderr, "bench_quic_bulk: received %llu of %zu bytes\n",
		        (unsigned long long)rx_bytes, bytes);
		return 1;
	}
	moq_quic_endpoint_stats(srv, &st);
	res->bytes = bytes;
	res->pkt = pkt;
	res->cc = cc == MOQ_QUIC_CC_BBR ? "bbr" : "cubic";
	res->cycles_per_byte = (double)srv_cycles / (double)bytes;
	if (nwin >= 3) {
		/* skip the first window (slow start), then the median */
		qsort(win_cpb + 1, (size_t)(nwin - 1), sizeof(double), cmp_double);
		res->win_median = win_cpb[1 + (nwin - 1) / 2];
	} else {
		res->win_median = res->cycles_per_byte;
	}
	res->instr_per_byte = -1;
	res->pkts = st.pkts_out;
	res->virt_s = (double)(now - 1000000000ull) / 1e9;
	moq_quic_endpoint_free(cli);
	moq_quic_endpoint_free(srv);
	free(up.d);
	free(down.d);
	free(buf);
	return 0;
}

/* Run ourselves under callgrind, collecting the server functions only. */
static double callgrind_ipb(const char *self, size_t bytes, size_t pkt, const char *cc)
{
	char out[64], b[32], p[32], srcs[32], line[512];
	FILE *f;
	pid_t pid;
	int status;
	double ir = -1;

	snprintf(out, sizeof(out), "/tmp/bench_quic_bulk.%d.cg", (int)getpid());
	snprintf(b, sizeof(b), "%zu", bytes);
	snprintf(p, sizeof(p), "%zu", pkt);
	snprintf(srcs, sizeof(srcs), "%zu", src_bytes);
	pid = fork();
	if (pid == 0) {
		char cgout[96];

		snprintf(cgout, sizeof(cgout), "--callgrind-out-file=%s", out);
		if (freopen("/dev/null", "w", stderr) == NULL)
			_exit(126);
		execlp("valgrind", "valgrind", "--tool=callgrind", cgout,
		       "--toggle-collect=bulk_srv_*", self, "--bytes", b, "--pkt", p, "--cc", cc,
		       "--reps", "1", "--src", srcs, "--quiet", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		return -1;
	f = fopen(out, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "totals:", 7) == 0 || strncmp(line, "summary:", 8) == 0)
			ir = strtod(strchr(line, ':') + 1, NULL);
	fclose(f);
	unlink(out);
	return ir < 0 ? -1 : ir / (double)bytes;
}

int main(int argc, char **argv)
{
	size_t bytes = 100u * 1000 * 1000, cg_bytes = 10u * 1000 * 1000, pkt = 1200;
	int json = 0, cg = 0, quiet = 0, i, k, reps = 3;
	double cpb[16], tot[16], median, whole;
	const char *ccname = "cubic";
	struct result r;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
			bytes = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--cg-bytes") && i + 1 < argc)
			cg_bytes = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--pkt") && i + 1 < argc)
			pkt = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--cc") && i + 1 < argc)
			ccname = argv[++i];
		else if (!strcmp(argv[i], "--src") && i + 1 < argc)
			src_bytes = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--callgrind"))
			cg = 1;
		else if (!strcmp(argv[i], "--quiet"))
			quiet = 1;
		else {
			fprintf(stderr,
			        "usage: %s [--bytes N] [--src N] [--pkt 1200] [--cc cubic|bbr] "
			        "[--reps 3] "
			        "[--json] "
			        "[--callgrind [--cg-bytes N]]\n",
			        argv[0]);
			return 2;
		}
	}
	if (reps < 1 || reps > 16) {
		fprintf(stderr, "--reps must be 1..16\n");
		return 2;
	}
	if (pkt < MOQ_QUIC_MIN_PKT_BUF || pkt > MOQ_QUIC_MAX_UDP_PAYLOAD) {
		fprintf(stderr, "--pkt must be %d..%d\n", MOQ_QUIC_MIN_PKT_BUF,
		        MOQ_QUIC_MAX_UDP_PAYLOAD);
		return 2;
	}
	for (k = 0; k < reps; k++) {
		if (run(bytes, pkt, strcmp(ccname, "bbr") ? MOQ_QUIC_CC_CUBIC : MOQ_QUIC_CC_BBR,
		        &r) != 0)
			return 1;
		cpb[k] = r.win_median;
		tot[k] = r.cycles_per_byte;
	}
	qsort(cpb, (size_t)reps, sizeof(cpb[0]), cmp_double);
	qsort(tot, (size_t)reps, sizeof(tot[0]), cmp_double);
	r.cycles_per_byte = cpb[0]; /* best run's median window */
	median = cpb[reps / 2];
	whole = tot[0]; /* best run, whole transfer */
	if (quiet)
		return 0;
	if (cg)
		r.instr_per_byte = callgrind_ipb(argv[0], cg_bytes, pkt, r.cc);
	if (json) {
		printf("{\"bench\":\"quic_bulk\",\"bytes\":%zu,\"src_bytes\":%zu,\"pkt\":%zu,"
		       "\"cc\":\"%s\","
		       "\"server_cycles_per_byte\":%.3f,\"server_cycles_per_byte_median\":%.3f,"
		       "\"server_cycles_per_byte_whole\":%.3f,"
		       "\"reps\":%d,\"server_instr_per_byte\":%.3f,"
		       "\"callgrind_bytes\":%zu,\"server_pkts\":%llu,\"virtual_s\":%.3f,"
		       "\"target_cycles_per_byte\":2.0}\n",
		       r.bytes, src_bytes && src_bytes < r.bytes ? src_bytes : r.bytes, r.pkt, r.cc,
		       r.cycles_per_byte, median, whole, reps, r.instr_per_byte, cg ? cg_bytes : 0,
		       (unsigned long long)r.pkts, r.virt_s);
		return 0;
	}
	printf("quic bulk: 1 server connection, TLS_AES_128_GCM_SHA256, server side only; source "
	       "%zu bytes%s\n",
	       src_bytes && src_bytes < bytes ? src_bytes : bytes,
	       src_bytes && src_bytes < bytes ? " (reused: cache-hot)" : " (distinct)");
	printf("%-12s %-6s %-6s %12s %12s %12s %12s %10s %10s\n", "bytes", "pkt", "cc", "cycles/B",
	       "cyc/B med", "cyc/B whole", "instr/byte", "pkts", "virt s");
	printf("%-12zu %-6zu %-6s %12.3f %12.3f %12.3f ", r.bytes, r.pkt, r.cc, r.cycles_per_byte,
	       median, whole);
	if (r.instr_per_byte >= 0)
		printf("%12.3f", r.instr_per_byte);
	else
		printf("%12s", cg ? "failed" : "-");
	printf(" %10llu %10.3f\n", (unsigned long long)r.pkts, r.virt_s);
	if (cg)
		printf("(instr/byte from callgrind over %zu bytes)\n", cg_bytes);
	printf("(cycles/B: TSC cycles per byte, median of 4 MiB windows, best of %d runs; cyc/B "
	       "med:\n"
	       " the median run; whole: best whole transfer incl. preemption. Target <= 2.0)\n",
	       reps);
	return 0;
}
