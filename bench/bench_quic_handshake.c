/* SPDX-License-Identifier: MIT */
/*
 * bench_quic_handshake: cost of one QUIC handshake (TLS 1.3, ECDSA P-256
 * self-signed certificate, X25519/P-256 key share as wolfSSL picks it) on
 * the server side and on the client side. N clients connect one after the
 * other to an in-process server over a virtual path (1 ms each way, no
 * loss); each handshake runs until both sides are established and nothing
 * more is due, and the connections stay open (closing is not measured).
 * Prints TSC cycles per handshake for each side natively, and instructions
 * per handshake for each side under callgrind (--callgrind re-runs this
 * program under valgrind twice, collecting only hs_srv_* or hs_cli_*).
 *
 *   bench_quic_handshake [--n 200] [--json] [--callgrind [--cg-n 20]]
 */
#include "quic.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <x86intrin.h>

#define PATH_DELAY 1000000ull
#define QCAP       256

struct dgram {
	uint64_t at;
	size_t len;
	struct moq_quic_addr from, to;
	uint8_t data[1500];
};

struct fifo {
	struct dgram d[QCAP];
	uint32_t head, n;
};

static struct fifo up, down; /* client->server, server->client */
static uint64_t cyc[2];      /* 0 server, 1 client */
static int est[2];
static const char *const alpn[] = {"moq-lite-05"};

static int on_established(struct moq_quic_conn *c, void *user, const char *a)
{
	(void)a;
	(void)user;
	est[moq_quic_conn_is_server(c) ? 0 : 1]++;
	return 0;
}

static const struct moq_quic_callbacks cbs = {
        .established = on_established,
};

/* Each side's calls, out of line so callgrind can collect only one side
 * (--toggle-collect=hs_srv_* or hs_cli_*). */
#define SIDE_FNS(side, idx)                                                                        \
	__attribute__((noinline)) int hs_##side##_send(                                            \
	        struct moq_quic_endpoint *ep, struct moq_quic_pkt *p, size_t n, uint64_t now);     \
	__attribute__((noinline)) int hs_##side##_recv(                                            \
	        struct moq_quic_endpoint *ep, const uint8_t *d, size_t len,                        \
	        const struct moq_quic_addr *l, const struct moq_quic_addr *r, uint64_t now);       \
	__attribute__((noinline)) int hs_##side##_timers(struct moq_quic_endpoint *ep,             \
	                                                 uint64_t now);                            \
	int hs_##side##_send(struct moq_quic_endpoint *ep, struct moq_quic_pkt *p, size_t n,       \
	                     uint64_t now)                                                         \
	{                                                                                          \
		uint64_t t = __rdtsc();                                                            \
		int rv = moq_quic_endpoint_send(ep, p, n, now);                                    \
		cyc[idx] += __rdtsc() - t;                                                         \
		return rv;                                                                         \
	}                                                                                          \
	int hs_##side##_recv(struct moq_quic_endpoint *ep, const uint8_t *d, size_t len,           \
	                     const struct moq_quic_addr *l, const struct moq_quic_addr *r,         \
	                     uint64_t now)                                                         \
	{                                                                                          \
		uint64_t t = __rdtsc();                                                            \
		int rv = moq_quic_endpoint_recv(ep, d, len, l, r, now);                            \
		cyc[idx] += __rdtsc() - t;                                                         \
		return rv;                                                                         \
	}                                                                                          \
	int hs_##side##_timers(struct moq_quic_endpoint *ep, uint64_t now)                         \
	{                                                                                          \
		uint64_t t = __rdtsc();                                                            \
		int rv = moq_quic_endpoint_timers(ep, now);                                        \
		cyc[idx] += __rdtsc() - t;                                                         \
		return rv;                                                                         \
	}

SIDE_FNS(srv, 0)
SIDE_FNS(cli, 1)

__attribute__((noinline)) struct moq_quic_conn *hs_cli_connect(struct moq_quic_endpoint *ep,
                                                               const struct moq_quic_addr *l,
                                                               const struct moq_quic_addr *r,
                                                               uint64_t now);

struct moq_quic_conn *hs_cli_connect(struct moq_quic_endpoint *ep, const struct moq_quic_addr *l,
                                     const struct moq_quic_addr *r, uint64_t now)
{
	uint64_t t = __rdtsc();
	struct moq_quic_conn *c = moq_quic_connect(ep, l, r, NULL, now, NULL);

	cyc[1] += __rdtsc() - t;
	return c;
}

static struct moq_quic_addr addr4(uint32_t ip, uint16_t port)
{
	struct moq_quic_addr a;

	memset(&a, 0, sizeof(a));
	a.u.in4.sin_family = AF_INET;
	a.u.in4.sin_port = htons(port);
	a.u.in4.sin_addr.s_addr = htonl(ip);
	a.len = sizeof(a.u.in4);
	return a;
}

static void pump(struct moq_quic_endpoint *ep, struct fifo *f, uint64_t now, int server)
{
	struct moq_quic_pkt pk[MOQ_QUIC_BURST];
	int n, i;

	do {
		size_t room = QCAP - f->n;

		if (room > MOQ_QUIC_BURST)
			room = MOQ_QUIC_BURST;
		if (room == 0)
			return;
		for (i = 0; i < (int)room; i++) {
			pk[i].data = f->d[(f->head + f->n + (uint32_t)i) % QCAP].data;
			pk[i].cap = sizeof(f->d[0].data);
		}
		n = server ? hs_srv_send(ep, pk, room, now) : hs_cli_send(ep, pk, room, now);
		for (i = 0; i < n; i++) {
			struct dgram *d = &f->d[(f->head + f->n) % QCAP];

			d->len = pk[i].len;
			d->from = pk[i].local;
			d->to = pk[i].remote;
			d->at = now + PATH_DELAY;
			f->n++;
		}
	} while (n == (int)MOQ_QUIC_BURST);
}

static void deliver(struct moq_quic_endpoint *ep, struct fifo *f, uint64_t now, int server)
{
	while (f->n > 0 && f->d[f->head].at <= now) {
		struct dgram *d = &f->d[f->head];

		if (server)
			hs_srv_recv(ep, d->data, d->len, &d->to, &d->from, now);
		else
			hs_cli_recv(ep, d->data, d->len, &d->to, &d->from, now);
		f->head = (f->head + 1) % QCAP;
		f->n--;
	}
}

static uint64_t min3(uint64_t a, uint64_t b, uint64_t c)
{
	return a < b ? (a < c ? a : c) : (b < c ? b : c);
}

struct result {
	int n;
	double srv_cyc, cli_cyc; /* per handshake */
	double ms_per_hs;        /* virtual time */
};

/* N handshakes one after the other; returns 0 when all completed. */
static int run(int n, struct result *r)
{
	struct moq_quic_config sc, cc;
	struct moq_quic_endpoint *srv, *cli;
	struct moq_quic_addr saddr = addr4(0x0a000002, 4443);
	uint64_t now = 1000000000ull, t0 = now;
	int i, err = 0;

	memset(&sc, 0, sizeof(sc));
	sc.role = MOQ_QUIC_SERVER;
	sc.alpn = alpn;
	sc.alpn_count = 1;
	sc.retry = MOQ_QUIC_RETRY_NEVER;
	sc.max_conns = (uint32_t)n + 16;
	sc.max_half_open = (uint32_t)n + 16;
	sc.cb = &cbs;
	cc = sc;
	cc.role = MOQ_QUIC_CLIENT;
	cc.worker_id = 1;
	srv = moq_quic_endpoint_new(&sc, &err);
	cli = srv ? moq_quic_endpoint_new(&cc, &err) : NULL;
	if (cli == NULL) {
		fprintf(stderr, "endpoint: %s\n", moq_err_str(err));
		moq_quic_endpoint_free(srv);
		return -1;
	}
	memset(cyc, 0, sizeof(cyc));
	est[0] = est[1] = 0;
	for (i = 0; i < n; i++) {
		/* one client address per connection (max_conns_per_addr) */
		struct moq_quic_addr ca = addr4(0x0a010000u + (uint32_t)i, 40000);
		int rounds;

		if (hs_cli_connect(cli, &ca, &saddr, now) == NULL) {
			fprintf(stderr, "connect %d failed\n", i);
			break;
		}
		for (rounds = 0; rounds < 10000; rounds++) {
			uint64_t next;

			hs_cli_timers(cli, now);
			hs_srv_timers(srv, now);
			pump(cli, &up, now, 0);
			pump(srv, &down, now, 1);
			deliver(srv, &up, now, 1);
			deliver(cli, &down, now, 0);
			if (est[0] > i && est[1] > i && up.n == 0 && down.n == 0 &&
			    !moq_quic_endpoint_pending(cli) && !moq_quic_endpoint_pending(srv))
				break; /* both established, nothing in flight */
			next = min3(up.n ? up.d[up.head].at : UINT64_MAX,
			            down.n ? down.d[down.head].at : UINT64_MAX,
			            moq_quic_endpoint_next_expiry(cli));
			if (moq_quic_endpoint_next_expiry(srv) < next)
				next = moq_quic_endpoint_next_expiry(srv);
			if (moq_quic_endpoint_pending(cli) || moq_quic_endpoint_pending(srv))
				next = now;
			now = next > now ? next : now + 1;
		}
		if (est[0] <= i || est[1] <= i) {
			fprintf(stderr, "handshake %d did not complete\n", i);
			break;
		}
	}
	r->n = i;
	r->srv_cyc = i ? (double)cyc[0] / i : 0;
	r->cli_cyc = i ? (double)cyc[1] / i : 0;
	r->ms_per_hs = i ? (double)(now - t0) / 1e6 / i : 0;
	moq_quic_endpoint_free(cli);
	moq_quic_endpoint_free(srv);
	return i == n ? 0 : -1;
}

/* Run ourselves under callgrind collecting @side's functions; returns
 * instructions per handshake or -1. */
static double callgrind_iph(const char *self, int n, const char *side)
{
	char out[80], ns[32], tog[48], line[512];
	FILE *f;
	pid_t pid;
	int status;
	double ir = -1;

	snprintf(out, sizeof(out), "/tmp/bench_quic_handshake.%d.%s.cg", (int)getpid(), side);
	snprintf(ns, sizeof(ns), "%d", n);
	snprintf(tog, sizeof(tog), "--toggle-collect=hs_%s_*", side);
	pid = fork();
	if (pid == 0) {
		char cgout[112];

		snprintf(cgout, sizeof(cgout), "--callgrind-out-file=%s", out);
		if (freopen("/dev/null", "w", stderr) == NULL)
			_exit(126);
		execlp("valgrind", "valgrind", "--tool=callgrind", cgout, tog, self, "--n", ns,
		       "--quiet", (char *)NULL);
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
	if (getenv("BENCH_KEEP_CG"))
		fprintf(stderr, "callgrind output kept: %s\n", out);
	else
		unlink(out);
	return ir < 0 ? -1 : ir / (double)n;
}

int main(int argc, char **argv)
{
	int n = 200, cg_n = 20, json = 0, cg = 0, quiet = 0, i;
	double srv_ips = -1, cli_ips = -1;
	struct result r;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--n") && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--cg-n") && i + 1 < argc)
			cg_n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--callgrind"))
			cg = 1;
		else if (!strcmp(argv[i], "--quiet"))
			quiet = 1;
		else {
			fprintf(stderr, "usage: %s [--n 200] [--json] [--callgrind [--cg-n 20]]\n",
			        argv[0]);
			return 2;
		}
	}
	if (n < 1 || cg_n < 1)
		return 2;
	if (run(n, &r) != 0)
		return 1;
	if (quiet)
		return 0;
	if (cg) {
		srv_ips = callgrind_iph(argv[0], cg_n, "srv");
		cli_ips = callgrind_iph(argv[0], cg_n, "cli");
	}
	if (json) {
		printf("{\"bench\":\"quic_handshake\",\"handshakes\":%d,"
		       "\"server_cycles_per_hs\":%.0f,\"client_cycles_per_hs\":%.0f,"
		       "\"server_instr_per_hs\":%.0f,\"client_instr_per_hs\":%.0f,"
		       "\"callgrind_handshakes\":%d,\"virtual_ms_per_hs\":%.2f}\n",
		       r.n, r.srv_cyc, r.cli_cyc, srv_ips, cli_ips, cg ? cg_n : 0, r.ms_per_hs);
		return 0;
	}
	printf("%-8s %16s %18s\n", "side", "TSC cycles/hs", "instructions/hs");
	printf("%-8s %16.0f %18.0f\n", "server", r.srv_cyc, srv_ips);
	printf("%-8s %16.0f %18.0f\n", "client", r.cli_cyc, cli_ips);
	printf("(%d handshakes, %.1f virtual ms each; cycles natively, average on a "
	       "shared machine; instructions from callgrind over %d handshakes%s)\n",
	       r.n, r.ms_per_hs, cg ? cg_n : 0, cg ? "" : ": not run, use --callgrind");
	return 0;
}
