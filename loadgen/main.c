/* SPDX-License-Identifier: MIT */
/*
 * main.c: moqdp-load, the MoQ load generator.
 *
 *   moqdp-load [EAL args] -- [args]     DPDK: one port (net_memif, net_tap, a NIC)
 *   moqdp-load --kernel [args]          kernel UDP sockets, no EAL
 *
 * args:
 *   --relay IP:PORT        the relay (dpdk default 10.77.0.1:4443, kernel 127.0.0.1:4443);
 *                          IPv6 as [IP6]:PORT
 *   --local IP[/LEN]       first local address (dpdk default 10.77.0.2/24, kernel
 *                          127.0.0.2, or ::1/128 when --relay is IPv6); more are
 *                          taken after it, one per --conns-per-addr subscriber
 *                          sessions (IPv6: counting up in the last 32 bits; the
 *                          family must be --relay's; IPv6 LEN defaults to 64). An
 *                          IPv6 /128 (::1: no address after it) with --kernel:
 *                          every socket binds that one address on a port of its
 *                          own; on DPDK a /128 is refused beyond one address
 *   --publish              run the publisher
 *   --subscribers N        subscriber sessions (default 0)
 *   --ramp R               sessions opened per second (default 200; 0 = all at once)
 *   --tracks SPEC,...      default "video:1M,audio" (media.h, moq_lg_track_parse)
 *   --key-update S         S seconds after the start every subscriber's
 *                          connection starts a 1-RTT key update (RFC 9001, 6)
 *   --max-latency MS       the subscribers' SUBSCRIBE max latency (default 5000)
 *   --end-early N          the publisher sends N groups of its one track and,
 *                          when it opens the last, END {last + 1} and FIN
 *                          before that group's stream (issue 29 tests); it
 *                          stops, before --duration, once every subscriber
 *                          ended those groups and got the END
 *   --keyframe-max BYTES   video keyframes of varying size up to BYTES (at most
 *                          4 MiB; suffixes k, M, Ki, Mi): per group from the
 *                          track's regular keyframe size to BYTES, BYTES itself
 *                          in one group of four (moq_lg_keyframe_size); still
 *                          checksummed and verified
 *   --broadcast PATH       default "moqdp/load"
 *   --duration SECONDS     run time (default 10; 0 = until SIGINT)
 *   --warmup SECONDS       latency is recorded from then on (default 0); SIGUSR1
 *                          restarts the latency histogram at any time (benchmarks
 *                          send it when their measurement window opens)
 *   --conns-per-addr N     default 60
 *   --max-handshakes N     sessions connecting at once (default 64): the ramp
 *                          waits while that many handshakes are in flight
 *   --json FILE            JSON lines (one per second, a final one) to FILE ("-": stdout,
 *                          the default)
 *   --quiet                no live line on stderr
 *   --port N               dpdk: the port id (default: the first)
 *   --busy-poll            dpdk: never sleep (default: an idle iteration sleeps until
 *                          the next timer or frame, at most IDLE_SLEEP_MAX_NS, so a
 *                          shared machine's relay lcores keep their CPU)
 *   --thp                  put the first HEAP_RESERVE bytes of the malloc heap on
 *                          transparent huge pages (moq_lg_heap_hugepages; default off,
 *                          see HEAP_RESERVE)
 *   --light                light subscribers (loadgen/light.h): all but a verifying
 *                          sample are taken over from ngtcp2 after their first
 *                          verified group and only ACK from then on
 *   --verify-every N       with --light: subscriber k verifies when k % N == 0
 *                          (default 20), N lowered until --verify-min verify
 *   --verify-min N         with --light: at least N verifying subscribers (default 100)
 *   --datagrams            lite-05 6.4: QUIC datagrams negotiated; the publisher sends
 *                          its single-frame groups (audio) as datagrams, the
 *                          subscribers verify them as groups (raw QUIC or --transport wt:
 *                          HTTP/3 datagrams; full subscribers)
 *   --transport quic|wt    raw QUIC (default) or WebTransport: ALPN h3, the
 *                          extended CONNECT, WebTransport stream prefixes
 *                          (wt_client.c, h3/)
 *   --transport ws         every session over WebSocket + qmux-01 to the relay's
 *                          TCP port (the same number; relay --tcp 1), with --kernel
 *   --protocol lite|ietf-NN  moq-lite (default) or IETF moq-transport draft NN
 *                          (14..20; loadgen/ietf.c, ietf_run.c): with --kernel and
 *                          one track; subscribers verify every object
 *   --ietf-publish         with --protocol ietf-NN --publish: the publisher PUBLISHes
 *                          its track (publisher-initiated) instead of PUBLISH_NAMESPACE
 *   --lite 03|04|05|06     raw QUIC sessions offer only that moq-lite version (default:
 *                          lite-05, 04, 03)
 *   --verbose
 *
 * Prints a live line on stderr, a JSON line per second and a final summary.
 * Exits 0 when nothing was corrupt or out of order and, with subscribers,
 * media was delivered; 1 otherwise; 2 for bad arguments.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "client.h"
#include "ietf_run.h"
#include "wt_client.h"
#include "media.h"
#include "net.h"
#include "web.h"
#include "ws.h"

/* --transport ws: the epoll tag of the web's descriptor in the kernel set */
#define WS_EV 0xffffffffu

#define BURST 32
/* Packet buffers per moq_lg_client_send call: each call of
 * moq_quic_endpoint_send counts its whole list of ready connections and
 * visits each at most once, and at 1,000 subscribers nearly every one is
 * ready with one ACK: 32 buffers a call walked that list ~30 times to write
 * 1,000 ACKs. 128 a call costs 4 walks. */
#define TX_BATCH 128
/* Send batches / receive bursts per loop iteration at most (bounded work
 * per iteration: 512 packets out, 256 in). */
#define TX_ROUNDS 4
#define RX_ROUNDS 8
/* DPDK port set-up: descriptors and mbufs (rx + tx rings, bursts in flight
 * and the per-lcore cache). */
#define NB_RXD     1024
#define NB_TXD     1024
#define NB_MBUFS   8191
#define MBUF_CACHE 256
/* After --duration: how long sessions get to close cleanly. */
#define STOP_GRACE_NS 300000000ull
#define MAX_LOCALS    250
/* DPDK mode: the longest sleep of an idle iteration (a received packet waits
 * at most this long in the RX ring). */
#define IDLE_SLEEP_MAX_NS 100000ull
/* --thp: the malloc heap's first growth on transparent huge pages. Every
 * connection's state (ngtcp2, quic/, moq/, the verifiers) is on the heap and
 * at 1,000 subscribers each packet touches another connection's pages:
 * bench_loadgen_client --subs 1000 (client and relay in one process, 2 s)
 * client 23-24 -> 16-18 ns per verified byte. Off by default: with ngtcp2
 * 0.12.1 a received uni stream is never freed (one per group), the heap
 * grows ~35 MB/s at 1,000 subscribers and each new huge page is cleared
 * whole: clear_page_erms was 13-29 % of moqdp-load in bench-fanout. 1 GiB
 * of address space, committed only when touched. */
#define HEAP_RESERVE (1ull << 30)

static volatile sig_atomic_t quit, mark;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		mark = 1;
	else
		quit = 1;
}

struct opts {
	int kernel, publish, quiet, verbose, busy_poll, thp;
	uint32_t subscribers, conns_per_addr, max_handshakes, key_max, end_early;
	uint32_t max_latency_ms;
	double ramp, duration, warmup, key_update;
	char tracks[256], broadcast[128], json[256];
	char relay[64], local[64];
	int port;
	char jwt[MOQ_LG_JWT_MAX + 1]; /* --jwt TOKEN / --token FILE */
	int light;                    /* --light */
	int datagrams;                /* --datagrams */
	uint32_t verify_every, verify_min;
	int transport; /* --transport quic|wt (wt_client.h) */
	int ws;        /* --transport ws (ws.h) */
	int ietf;      /* --protocol ietf-NN: the draft (0: moq-lite) */
	int ietf_publish; /* --ietf-publish */
	int lite;      /* --lite NN (3..6): offer that moq-lite version only */
};

struct io_stats {
	uint64_t rx_pkts, tx_pkts, tx_drops, unresolved, rx_other;
};

/* ---- arguments ------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr,
	        "usage: moqdp-load [EAL args] -- [args]   (DPDK)\n"
	        "       moqdp-load --kernel [args]        (kernel UDP sockets)\n"
	        "args: --relay IP:PORT --local IP[/LEN] --publish --subscribers N --ramp R/s\n"
	        "      --tracks video:1M,audio --keyframe-max BYTES --broadcast PATH --duration S\n"
	        "      --max-latency MS --end-early N\n"
	        "      --conns-per-addr N --max-handshakes N --key-update S\n"
	        "      --jwt TOKEN | --token FILE (sent as SETUP Path ?jwt=)\n"
	        "      --transport quic|wt|ws (raw QUIC, default; WebTransport over HTTP/3; "
	        "WebSocket + qmux-01 to the relay's TCP port, with --kernel)\n"
	        "      --warmup S --json FILE|- --quiet --port N --busy-poll --thp --verbose\n"
	        "      --light [--verify-every N] [--verify-min N] --datagrams\n"
	        "      --protocol lite|ietf-14..ietf-20 (IETF moq-transport, with --kernel)\n"
	        "      --ietf-publish (IETF: PUBLISH the track, not PUBLISH_NAMESPACE)\n"
	        "      --lite 03|04|05|06 (raw QUIC: offer that moq-lite version only)\n");
}

/* A byte count: digits, then nothing, k, M (decimal), Ki or Mi (binary). */
static int parse_bytes(const char *v, uint64_t *out)
{
	static const struct {
		const char *sfx;
		uint64_t mul;
	} units[] = {{"", 1}, {"k", 1000}, {"M", 1000000}, {"Ki", 1024}, {"Mi", 1048576}};
	char *end;
	unsigned long long n;

	if (*v < '0' || *v > '9')
		return -1;
	n = strtoull(v, &end, 10);
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].sfx)) {
			if (n > UINT32_MAX)
				return -1;
			*out = n * units[i].mul;
			return 0;
		}
	return -1;
}

static int parse_args(struct opts *o, int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV()                                                                                    \
	do {                                                                                       \
		if (!v) {                                                                          \
			fprintf(stderr, "moqdp-load: %s needs a value\n", a);                      \
			return -1;                                                                 \
		}                                                                                  \
		i++;                                                                               \
	} while (0)
		char *end = NULL;
		if (!strcmp(a, "--kernel")) {
			o->kernel = 1;
		} else if (!strcmp(a, "--publish")) {
			o->publish = 1;
		} else if (!strcmp(a, "--quiet")) {
			o->quiet = 1;
		} else if (!strcmp(a, "--busy-poll")) {
			o->busy_poll = 1;
		} else if (!strcmp(a, "--thp")) {
			o->thp = 1;
		} else if (!strcmp(a, "--verbose")) {
			o->verbose = 1;
		} else if (!strcmp(a, "--transport")) {
			NEEDV();
			if (!strcmp(v, "quic")) {
				o->transport = MOQ_LG_TRANSPORT_QUIC;
			} else if (!strcmp(v, "wt")) {
				o->transport = MOQ_LG_TRANSPORT_WT;
			} else if (!strcmp(v, "ws")) {
				o->ws = 1; /* WebSocket + qmux-01 (ws.h) */
			} else {
				fprintf(stderr,
				        "moqdp-load: --transport: '%s' is not quic, wt or ws\n", v);
				return -1;
			}
		} else if (!strcmp(a, "--ietf-publish")) {
			o->ietf_publish = 1;
		} else if (!strcmp(a, "--protocol")) {
			NEEDV();
			if (!strcmp(v, "lite")) {
				o->ietf = 0;
			} else if (!strncmp(v, "ietf-", 5) && atoi(v + 5) >= 14 &&
			           atoi(v + 5) <= 20 && strlen(v) == 7) {
				o->ietf = atoi(v + 5);
			} else {
				fprintf(stderr,
				        "moqdp-load: --protocol: '%s' is not lite or ietf-14 .. "
				        "ietf-20\n",
				        v);
				return -1;
			}
		} else if (!strcmp(a, "--lite")) {
			NEEDV();
			unsigned long n = strtoul(v, &end, 10);
			if (*end || n < 3 || n > 6) {
				fprintf(stderr,
				        "moqdp-load: --lite: '%s' is not 03, 04, 05 or 06\n", v);
				return -1;
			}
			o->lite = (int)n;
		} else if (!strcmp(a, "--subscribers")) {
			NEEDV();
			unsigned long n = strtoul(v, &end, 10);
			if (*end || n > 1000000) {
				fprintf(stderr, "moqdp-load: --subscribers: '%s' is not a count\n",
				        v);
				return -1;
			}
			o->subscribers = (uint32_t)n;
		} else if (!strcmp(a, "--light")) {
			o->light = 1;
		} else if (!strcmp(a, "--datagrams")) {
			o->datagrams = 1;
		} else if (!strcmp(a, "--verify-every") || !strcmp(a, "--verify-min")) {
			NEEDV();
			unsigned long n = strtoul(v, &end, 10);
			if (*end || n == 0 || n > 1000000) {
				fprintf(stderr, "moqdp-load: %s: '%s' is not a count\n", a, v);
				return -1;
			}
			if (!strcmp(a, "--verify-every"))
				o->verify_every = (uint32_t)n;
			else
				o->verify_min = (uint32_t)n;
		} else if (!strcmp(a, "--max-handshakes")) {
			NEEDV();
			unsigned long n = strtoul(v, &end, 10);
			if (*end || n == 0 || n > 100000) {
				fprintf(stderr,
				        "moqdp-load: --max-handshakes: '%s' is not a count\n", v);
				return -1;
			}
			o->max_handshakes = (uint32_t)n;
		} else if (!strcmp(a, "--max-latency")) {
			NEEDV();
			unsigned long n = strtoul(v, &end, 10);
			if (*end || n == 0 || n > 3600000) {
				fprintf(stderr,
				        "moqdp-load: --max-latency: '%s' is not 1 to 3600000 ms\n",
				        v);
				return -1;
			}
			o->max_latency_ms = (uint32_t)n;
		} else if (!strcmp(a, "--end-early")) {
			NEEDV();
			unsigned long n = strtoul(v, &end, 10);
			if (*end || n == 0 || n > 1000) {
				fprintf(stderr, "moqdp-load: --end-early: '%s' is not 1 to 1000\n",
				        v);
				return -1;
			}
			o->end_early = (uint32_t)n;
		} else if (!strcmp(a, "--keyframe-max")) {
			NEEDV();
			uint64_t n;
			if (parse_bytes(v, &n) < 0 || n < MOQ_LG_HDR_LEN ||
			    n > MOQ_LG_KEYFRAME_MAX) {
				fprintf(stderr,
				        "moqdp-load: --keyframe-max: '%s' is not 48 B to 4 MiB\n",
				        v);
				return -1;
			}
			o->key_max = (uint32_t)n;
		} else if (!strcmp(a, "--conns-per-addr")) {
			NEEDV();
			unsigned long n = strtoul(v, &end, 10);
			if (*end || n == 0 || n > 100000) {
				fprintf(stderr,
				        "moqdp-load: --conns-per-addr: '%s' is not a count\n", v);
				return -1;
			}
			o->conns_per_addr = (uint32_t)n;
		} else if (!strcmp(a, "--key-update")) {
			NEEDV();
			double d = strtod(v, &end);
			if (end == v || (*end && strcmp(end, "s")) || d <= 0 || d > 3600) {
				fprintf(stderr,
				        "moqdp-load: --key-update: '%s' is not seconds in (0, "
				        "3600]\n",
				        v);
				return -1;
			}
			o->key_update = d;
		} else if (!strcmp(a, "--ramp") || !strcmp(a, "--duration") ||
		           !strcmp(a, "--warmup")) {
			NEEDV();
			double d = strtod(v, &end);
			if (end == v || (*end && strcmp(end, "/s") && strcmp(end, "s")) || d < 0) {
				fprintf(stderr, "moqdp-load: %s: '%s' is not a number\n", a, v);
				return -1;
			}
			if (!strcmp(a, "--ramp"))
				o->ramp = d;
			else if (!strcmp(a, "--warmup"))
				o->warmup = d;
			else
				o->duration = d;
		} else if (!strcmp(a, "--tracks") || !strcmp(a, "--broadcast") ||
		           !strcmp(a, "--json") || !strcmp(a, "--relay") || !strcmp(a, "--local")) {
			NEEDV();
			char *dst = !strcmp(a, "--tracks")      ? o->tracks
			            : !strcmp(a, "--broadcast") ? o->broadcast
			            : !strcmp(a, "--json")      ? o->json
			            : !strcmp(a, "--relay")     ? o->relay
			                                        : o->local;
			size_t cap = !strcmp(a, "--tracks")      ? sizeof(o->tracks)
			             : !strcmp(a, "--broadcast") ? sizeof(o->broadcast)
			             : !strcmp(a, "--json")      ? sizeof(o->json)
			                                         : sizeof(o->relay);
			if (strlen(v) >= cap) {
				fprintf(stderr, "moqdp-load: %s: too long\n", a);
				return -1;
			}
			snprintf(dst, cap, "%s", v);
		} else if (!strcmp(a, "--jwt") || !strcmp(a, "--token")) {
			/* a token for the relay's --auth-key: inline, or a file
			 * holding it (whitespace around it ignored) */
			NEEDV();
			size_t n = 0;
			if (!strcmp(a, "--jwt")) {
				n = strlen(v);
				if (n <= MOQ_LG_JWT_MAX)
					memcpy(o->jwt, v, n);
			} else {
				FILE *f = fopen(v, "r");
				if (!f) {
					fprintf(stderr, "moqdp-load: --token: %s: %s\n", v,
					        strerror(errno));
					return -1;
				}
				n = fread(o->jwt, 1, MOQ_LG_JWT_MAX + 1, f);
				fclose(f);
				while (n && n <= MOQ_LG_JWT_MAX &&
				       isspace((unsigned char)o->jwt[n - 1]))
					n--;
			}
			if (n > MOQ_LG_JWT_MAX || n == 0) {
				fprintf(stderr, "moqdp-load: %s: empty or longer than %u bytes\n",
				        a, MOQ_LG_JWT_MAX);
				return -1;
			}
			o->jwt[n] = 0;
			for (size_t k = 0; k < n; k++)
				if (isspace((unsigned char)o->jwt[k]) || o->jwt[k] == '&') {
					fprintf(stderr, "moqdp-load: %s: not a token\n", a);
					return -1;
				}
		} else if (!strcmp(a, "--port")) {
			NEEDV();
			long n = strtol(v, &end, 10);
			if (*end || n < 0 || n >= RTE_MAX_ETHPORTS) {
				fprintf(stderr, "moqdp-load: --port: '%s' is not a port id\n", v);
				return -1;
			}
			o->port = (int)n;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage();
			exit(0);
		} else {
			fprintf(stderr, "moqdp-load: unknown argument '%s'\n", a);
			return -1;
		}
	}
	return 0;
}

/* --local: an IPv4 or IPv6 address (port 0) with an optional /LEN
 * (default 24 for IPv4, 64 for IPv6). */
static int parse_local(const char *s, struct moq_quic_addr *a, unsigned *plen)
{
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "%s", s);
	char *slash = strchr(tmp, '/');
	int v6 = strchr(tmp, ':') != NULL;
	memset(a, 0, sizeof(*a));
	*plen = v6 ? 64 : 24;
	if (slash) {
		*slash = 0;
		char *end;
		unsigned long l = strtoul(slash + 1, &end, 10);
		if (*end || l == 0 || l > (v6 ? 128u : 32u))
			return -1;
		*plen = (unsigned)l;
	}
	if (v6) {
		a->u.in6.sin6_family = AF_INET6;
		a->len = sizeof(a->u.in6);
		return inet_pton(AF_INET6, tmp, &a->u.in6.sin6_addr) == 1 ? 0 : -1;
	}
	a->u.in4.sin_family = AF_INET;
	a->len = sizeof(a->u.in4);
	return inet_pton(AF_INET, tmp, &a->u.in4.sin_addr) == 1 ? 0 : -1;
}

/* --relay: IPv4:PORT or [IPv6]:PORT. */
static int parse_hostport(const char *s, struct moq_quic_addr *a)
{
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "%s", s);
	char *colon = strrchr(tmp, ':'), *host = tmp;
	if (!colon)
		return -1;
	*colon = 0;
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end || port == 0 || port > 65535)
		return -1;
	memset(a, 0, sizeof(*a));
	if (tmp[0] == '[') {
		size_t hl = strlen(tmp);
		if (hl < 3 || tmp[hl - 1] != ']')
			return -1;
		tmp[hl - 1] = 0;
		host = tmp + 1;
		a->u.in6.sin6_family = AF_INET6;
		a->u.in6.sin6_port = htons((uint16_t)port);
		a->len = sizeof(a->u.in6);
		return inet_pton(AF_INET6, host, &a->u.in6.sin6_addr) == 1 ? 0 : -1;
	}
	a->u.in4.sin_family = AF_INET;
	a->u.in4.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &a->u.in4.sin_addr) != 1)
		return -1;
	a->len = sizeof(a->u.in4);
	return 0;
}

/* @a = @ip (4 or 16 bytes by @family, 4 or 6), @port (host order). */
static void addr_set(struct moq_quic_addr *a, int family, const uint8_t *ip, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	if (family == 6) {
		a->u.in6.sin6_family = AF_INET6;
		memcpy(&a->u.in6.sin6_addr, ip, 16);
		a->u.in6.sin6_port = htons(port);
		a->len = sizeof(a->u.in6);
	} else {
		a->u.in4.sin_family = AF_INET;
		memcpy(&a->u.in4.sin_addr, ip, 4);
		a->u.in4.sin_port = htons(port);
		a->len = sizeof(a->u.in4);
	}
}

/* The raw address of @a (4 or 16 bytes) and its family (4 or 6). */
static const uint8_t *addr_ip(const struct moq_quic_addr *a, int *family)
{
	if (a->u.sa.sa_family == AF_INET6) {
		*family = 6;
		return (const uint8_t *)&a->u.in6.sin6_addr;
	}
	*family = 4;
	return (const uint8_t *)&a->u.in4.sin_addr;
}

/* The key locals are numbered by: an IPv4 address, an IPv6 address's
 * last 32 bits (host order; local k is the first's key + k). */
static uint32_t addr_key(const struct moq_quic_addr *a)
{
	int f;
	const uint8_t *ip = addr_ip(a, &f);
	uint32_t v;

	memcpy(&v, ip + (f == 6 ? 12 : 0), 4);
	return ntohl(v);
}

static uint16_t addr_port(const struct moq_quic_addr *a)
{
	return ntohs(a->u.sa.sa_family == AF_INET6 ? a->u.in6.sin6_port : a->u.in4.sin_port);
}

/* Local @i of the sockets or contexts @locals (@n of them, the first's key
 * @base) that @l names: by its key, else (an IPv6 /128, one address on
 * every socket) by its port; @n when none. */
static unsigned local_index(const struct moq_quic_addr *locals, unsigned n, uint32_t base,
                            const struct moq_quic_addr *l)
{
	unsigned i = addr_key(l) - base;

	if (i < n && addr_port(&locals[i]) == addr_port(l))
		return i;
	for (i = 0; i < n; i++)
		if (addr_port(&locals[i]) == addr_port(l) && addr_key(&locals[i]) == addr_key(l))
			return i;
	return n;
}

static int parse_tracks(const char *spec, struct moq_lg_client_cfg *cfg)
{
	char tmp[256];
	snprintf(tmp, sizeof(tmp), "%s", spec);
	char *save = NULL;
	cfg->ntracks = 0;
	for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (cfg->ntracks == MOQ_LG_MAX_TRACKS) {
			fprintf(stderr, "moqdp-load: --tracks: at most %d\n", MOQ_LG_MAX_TRACKS);
			return -1;
		}
		if (moq_lg_track_parse(t, (uint16_t)(cfg->ntracks + 1),
		                       &cfg->tracks[cfg->ntracks]) < 0) {
			fprintf(stderr,
			        "moqdp-load: --tracks: bad track '%s' (e.g. video:1M, "
			        "video:4M:fps=30:gop=60:key=8, audio)\n",
			        t);
			return -1;
		}
		for (unsigned k = 0; k < cfg->ntracks; k++)
			if (!strcmp(cfg->tracks[k].name, cfg->tracks[cfg->ntracks].name)) {
				fprintf(stderr,
				        "moqdp-load: --tracks: two tracks named '%s' (add "
				        ":name=)\n",
				        t);
				return -1;
			}
		cfg->ntracks++;
	}
	return cfg->ntracks ? 0 : -1;
}

/* ---- progress ------------------------------------------------------------- */

struct progress {
	FILE *json;
	int live, tty;
	struct moq_lg_report prev;
	int have_prev;
	uint64_t next_ns, start_ns;
};

static void progress_tick(struct progress *p, struct moq_lg_client *cl, uint64_t now,
                          const struct io_stats *io)
{
	struct moq_lg_report r;
	struct moq_lg_client_extra ex;
	char buf[4096], line[512];
	moq_lg_client_report(cl, now, 0, &r, &ex);
	int n = moq_lg_report_json(&r, p->have_prev ? &p->prev : NULL, buf, sizeof(buf));
	if (p->json && n > 1) {
		/* append the client's own figures before the closing brace */
		buf[n - 1] = 0;
		char lb[256] = "";
		if (ex.light_cands)
			snprintf(lb, sizeof(lb),
			         ",\"light_subs\":%" PRIu64 ",\"verify_subs\":%" PRIu64
			         ",\"light_acked_bytes\":%" PRIu64 ",\"light_rx_bytes\":%" PRIu64
			         ",\"wire_rx_bytes\":%" PRIu64,
			         ex.light_subs, ex.verify_subs, ex.light.acked_bytes,
			         ex.light.rx_bytes, r.rx_bytes_wire);
		fprintf(p->json,
		        "%s,\"subs_stalled\":%" PRIu64 ",\"subs_failed\":%" PRIu64
		        ",\"tx_drops\":%" PRIu64 "%s}\n",
		        buf, ex.subs_stalled, ex.subs_failed, io->tx_drops + io->unresolved, lb);
		fflush(p->json);
	}
	if (p->live) {
		moq_lg_report_line(&r, p->have_prev ? &p->prev : NULL, line, sizeof(line));
		if (p->tty)
			fprintf(stderr, "\r%s stalled=%" PRIu64 "\033[K", line, ex.subs_stalled);
		else
			fprintf(stderr, "%s stalled=%" PRIu64 "\n", line, ex.subs_stalled);
	}
	p->prev = r;
	p->have_prev = 1;
}

/* The process's CPU time (user + system), for its cost per byte. */
static double cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --light: the two kinds apart, and what a light subscriber costs us. */
static void light_summary(const struct moq_lg_report *r, const struct moq_lg_client_extra *ex,
                          char *jbuf, size_t jcap)
{
	const struct moq_lg_light_stats *l = &ex->light;
	double cpu = cpu_seconds();
	double light_cyc_b = l->rx_bytes ? (double)l->cycles / (double)l->rx_bytes : 0;
	double light_cyc_s = ex->light_subs && r->t_s > 0
	                             ? (double)l->cycles / (double)ex->light_subs / r->t_s
	                             : 0;
	double all_ns_b = r->rx_bytes_wire ? cpu * 1e9 / (double)r->rx_bytes_wire : 0;
	if (jbuf) {
		snprintf(jbuf, jcap,
		         ",\"light_subs\":%" PRIu64 ",\"light_cands\":%" PRIu64
		         ",\"verify_subs\":%" PRIu64 ",\"light_refused\":%" PRIu64
		         ",\"light_rx_pkts\":%" PRIu64 ",\"light_rx_bytes\":%" PRIu64
		         ",\"light_acked_pkts\":%" PRIu64 ",\"light_acked_bytes\":%" PRIu64
		         ",\"light_acks\":%" PRIu64 ",\"light_out_of_order\":%" PRIu64
		         ",\"light_key_updates\":%" PRIu64 ",\"light_bad\":%" PRIu64
		         ",\"light_stalled\":%" PRIu64 ",\"light_frames_ok\":%" PRIu64
		         ",\"light_errors\":%" PRIu64
		         ",\"light_cycles_per_byte\":%.4f,\"light_cycles_per_sub_s\":%.0f"
		         ",\"tsc_hz\":%" PRIu64 ",\"cpu_s\":%.3f,\"cpu_ns_per_byte\":%.3f"
		         ",\"wire_rx_bytes\":%" PRIu64,
		         ex->light_subs, ex->light_cands, ex->verify_subs, l->refused, l->rx_pkts,
		         l->rx_bytes, l->acked_pkts, l->acked_bytes, l->acks_sent, l->out_of_order,
		         l->key_updates, l->bad_pkts, l->stalled, ex->light_c.frames_ok,
		         moq_lg_counts_errors(&ex->light_c), light_cyc_b, light_cyc_s, l->tsc_hz,
		         cpu, all_ns_b, r->rx_bytes_wire);
		return;
	}
	fprintf(stderr,
	        "  light       %" PRIu64 " of %" PRIu64 " subscribers light (%" PRIu64
	        " kept full), %" PRIu64 " verifying; before the take-over %" PRIu64
	        " frames verified, %" PRIu64 " errors\n",
	        ex->light_subs, ex->light_cands, l->refused, ex->verify_subs, ex->light_c.frames_ok,
	        moq_lg_counts_errors(&ex->light_c));
	fprintf(stderr,
	        "              %" PRIu64 " pkts / %.2f MB received, %.2f MB ACKed in %" PRIu64
	        " ACKs (%.1f pkts an ACK), %" PRIu64 " out of order, %" PRIu64
	        " key updates, %" PRIu64 " pings, %" PRIu64 " bad, %" PRIu64
	        " stalled at the end\n",
	        l->rx_pkts, (double)l->rx_bytes / 1e6, (double)l->acked_bytes / 1e6, l->acks_sent,
	        l->acks_sent ? (double)l->acked_pkts / (double)l->acks_sent : 0.0, l->out_of_order,
	        l->key_updates, l->pings_sent, l->bad_pkts, l->stalled);
	fprintf(stderr,
	        "  cost        light path %.3f cycles/B (%.0f cycles per light subscriber a "
	        "second, "
	        "TSC %.2f GHz); whole moqdp-load %.2f ns CPU per wire byte in\n",
	        light_cyc_b, light_cyc_s, (double)l->tsc_hz / 1e9, all_ns_b);
}

static int summary(struct moq_lg_client *cl, uint64_t now, FILE *json, const struct io_stats *io,
                   int tty, uint32_t subscribers)
{
	struct moq_lg_report r;
	struct moq_lg_client_extra ex;
	char buf[4096];
	moq_lg_client_report(cl, now, 1, &r, &ex);
	char lbuf[1024] = "";
	if (ex.light_cands)
		light_summary(&r, &ex, lbuf, sizeof(lbuf));
	if (tty)
		fputc('\n', stderr);
	int n = moq_lg_report_json(&r, NULL, buf, sizeof(buf));
	/* resets by code and streams reset before their header (bench-fanout's
	 * lost groups by cause) */
	char cbuf[640];
	int cn = snprintf(cbuf, sizeof(cbuf),
	                  ",\"pub_dgrams_out\":%" PRIu64 ",\"pub_dgrams_too_large\":%" PRIu64
	                  ",\"sub_dgrams_in\":%" PRIu64 ",\"groups_reset_unseen\":%" PRIu64
	                  ",\"end_sent\":%" PRIu64 ",\"end_subs\":%" PRIu64 ",\"end_min\":%" PRIu64
	                  ",\"end_max\":%" PRIu64 ",\"drop_replies\":%" PRIu64
	                  ",\"groups_reset_codes\":{",
	                  ex.pub_dgrams_out, ex.pub_dgrams_too_large, ex.sub_dgrams_in,
	                  ex.groups_reset_unseen, ex.end_sent, ex.end_subs, ex.end_min, ex.end_max,
	                  ex.drop_replies);
	for (unsigned k = 0, first = 1; k < 32 && cn > 0 && (size_t)cn < sizeof(cbuf) - 32; k++)
		if (r.c.groups_reset_code[k]) {
			cn += snprintf(cbuf + cn, sizeof(cbuf) - (size_t)cn, "%s\"%u\":%" PRIu64,
			               first ? "" : ",", k, r.c.groups_reset_code[k]);
			first = 0;
		}
	if (cn > 0 && (size_t)cn < sizeof(cbuf) - 64)
		cn += snprintf(cbuf + cn, sizeof(cbuf) - (size_t)cn,
		               "},\"pub_reset_by\":{\"old\":%" PRIu64 ",\"evicted\":%" PRIu64
		               ",\"lagged\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"cancel\":%" PRIu64
		               "},\"pub_resets\":%" PRIu64 ",\"pub_skipped\":%" PRIu64
		               ",\"drop_groups\":%" PRIu64 ",\"drop_codes\":{",
		               ex.pub_reset_by[0], ex.pub_reset_by[1], ex.pub_reset_by[2],
		               ex.pub_reset_by[3], ex.pub_reset_by[4], ex.pub_resets,
		               ex.pub_skipped, ex.drop_groups);
	for (unsigned k = 0, first = 1; k < 32 && cn > 0 && (size_t)cn < sizeof(cbuf) - 32; k++)
		if (ex.drop_code[k]) {
			cn += snprintf(cbuf + cn, sizeof(cbuf) - (size_t)cn, "%s\"%u\":%" PRIu64,
			               first ? "" : ",", k, ex.drop_code[k]);
			first = 0;
		}
	if (cn > 0 && (size_t)cn < sizeof(cbuf) - 1)
		snprintf(cbuf + cn, sizeof(cbuf) - (size_t)cn, "}");
	if (json && n > 1) {
		buf[n - 1] = 0;
		fprintf(json,
		        "%s%s,\"final\":true,\"subs_stalled\":%" PRIu64 ",\"subs_failed\":%" PRIu64
		        ",\"connect_errors\":%" PRIu64 ",\"sub_retries\":%" PRIu64
		        ",\"handshake_p50_us\":%.1f,\"tx_drops\":%" PRIu64
		        ",\"io_rx_pkts\":%" PRIu64 ",\"io_tx_pkts\":%" PRIu64 "%s}\n",
		        buf, cbuf, ex.subs_stalled, ex.subs_failed, ex.connect_errors,
		        ex.sub_retries, (double)ex.handshake_p50_ns / 1e3,
		        io->tx_drops + io->unresolved, io->rx_pkts, io->tx_pkts, lbuf);
		fflush(json);
	}
	const struct moq_lg_counts *c = &r.c;
	uint64_t errors = moq_lg_counts_errors(c);
	fprintf(stderr,
	        "moqdp-load: summary after %.1f s\n"
	        "  publisher   %" PRIu64 " frames, %" PRIu64 " groups, %.2f MB%s\n"
	        "  subscribers %" PRIu64 " of %" PRIu64 " ready, %" PRIu64 " failed, %" PRIu64
	        " stalled at the end, handshake p50 %.2f ms\n"
	        "  delivered   %" PRIu64 " frames verified (%.2f MB), %" PRIu64
	        " groups complete, %" PRIu64 " reset, %" PRIu64 " missing, %" PRIu64
	        " partial frames\n"
	        "  errors      %" PRIu64 " (bad crc %" PRIu64 ", bad header %" PRIu64
	        ", out of order %" PRIu64 ", duplicate groups %" PRIu64 ")\n"
	        "  latency     publisher -> relay -> subscriber: p50 %.3f ms, p99 %.3f ms, max "
	        "%.3f ms (%" PRIu64 " frames)\n"
	        "  wire        in %.2f MB / %" PRIu64 " pkts, out %.2f MB / %" PRIu64
	        " pkts, tx drops %" PRIu64 "\n",
	        r.t_s, r.pub_frames, r.pub_groups, (double)r.pub_bytes / 1e6,
	        ex.pub_ready ? "" : " (publisher off or never connected)", r.subs_ready,
	        r.subs_target, ex.subs_failed, ex.subs_stalled, (double)ex.handshake_p50_ns / 1e6,
	        c->frames_ok, (double)c->bytes_ok / 1e6, c->groups_ok, c->groups_reset,
	        c->groups_missing, c->frames_partial, errors, c->frames_bad_crc, c->frames_bad_hdr,
	        c->frames_bad_order, c->groups_dup, (double)moq_lg_hist_pct(r.hist, 50) / 1e6,
	        (double)moq_lg_hist_pct(r.hist, 99) / 1e6, (double)r.hist->max / 1e6, r.hist->n,
	        (double)r.rx_bytes_wire / 1e6, r.rx_pkts, (double)r.tx_bytes_wire / 1e6, r.tx_pkts,
	        io->tx_drops + io->unresolved);
	if (ex.key_updates)
		fprintf(stderr, "  key updates %" PRIu64 " subscriber connections started one\n",
		        ex.key_updates);
	if (ex.pub_dgrams_out || ex.sub_dgrams_in || ex.pub_dgrams_too_large)
		fprintf(stderr,
		        "  datagrams   publisher sent %" PRIu64 " (%" PRIu64
		        " too large: streams), subscribers got %" PRIu64 "\n",
		        ex.pub_dgrams_out, ex.pub_dgrams_too_large, ex.sub_dgrams_in);
	if (ex.light_cands)
		light_summary(&r, &ex, NULL, 0);
	if (ex.end_sent || ex.end_subs || ex.drop_replies)
		fprintf(stderr,
		        "  end         publisher END {%" PRIu64 "}; subscribers got END on %" PRIu64
		        " subscriptions, groups %" PRIu64 "..%" PRIu64 ", %" PRIu64
		        " DROPs (%" PRIu64 " groups)\n",
		        ex.end_sent, ex.end_subs, ex.end_min, ex.end_max, ex.drop_replies,
		        ex.drop_groups);
	if (errors || moq_lg_counts_errors(&ex.light_c))
		return 1;
	if (subscribers && c->frames_ok == 0)
		return 1;
	return 0;
}

/* ---- kernel sockets ------------------------------------------------------- */

struct kio {
	int ep;
	struct moq_net_ksock socks[MAX_LOCALS];
	unsigned n;
	uint32_t base;                      /* host order: addr_key(locals[0]) */
	const struct moq_quic_addr *locals; /* what each socket bound */
	struct moq_net_kbuf *kb;            /* the receive and send bursts (net.h) */
};

static int kernel_open(struct kio *k, struct moq_quic_addr *locals, unsigned n)
{
	k->ep = epoll_create1(0);
	if (k->ep < 0)
		return -1;
	k->n = 0;
	k->base = addr_key(&locals[0]);
	k->locals = locals;
	k->kb = calloc(1, moq_net_kbuf_size());
	if (!k->kb)
		return -1;
	for (unsigned i = 0; i < n; i++) {
		socklen_t sl = locals[i].len;
		if (moq_net_ksock_open(&k->socks[i], &locals[i].u.sa, locals[i].len, 0, 4 << 20,
		                       &locals[i].u.sa, &sl) < 0) {
			char ip[INET6_ADDRSTRLEN];
			int f;
			const uint8_t *a = addr_ip(&locals[i], &f);
			inet_ntop(f == 6 ? AF_INET6 : AF_INET, a, ip, sizeof(ip));
			fprintf(stderr, "moqdp-load: bind %s: %s\n", ip, strerror(errno));
			return -1;
		}
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
		epoll_ctl(k->ep, EPOLL_CTL_ADD, k->socks[i].fd, &ev);
		k->n++;
	}
	return 0;
}

static void kernel_close(struct kio *k)
{
	for (unsigned i = 0; i < k->n; i++)
		moq_net_ksock_close(&k->socks[i]);
	if (k->ep >= 0)
		close(k->ep);
	free(k->kb);
}

static int kernel_rx(struct kio *k, unsigned i, struct moq_lg_client *cl,
                     const struct moq_quic_addr *locals, struct io_stats *io)
{
	struct moq_net_kdgram d[MOQ_NET_KIO_BURST];
	int total = 0;
	for (;;) {
		int n = moq_net_krecv(k->kb, k->socks[i].fd, d);
		if (n <= 0)
			break;
		uint64_t now = moq_lg_now_ns();
		for (int j = 0; j < n; j++) {
			struct moq_quic_addr remote;
			memset(&remote, 0, sizeof(remote));
			remote.len = d[j].addrlen <= sizeof(remote.u) ? d[j].addrlen
			                                              : (socklen_t)sizeof(remote.u);
			memcpy(&remote.u, d[j].addr, remote.len);
			moq_lg_client_recv(cl, d[j].data, d[j].len, &locals[i], &remote, now);
		}
		io->rx_pkts += (uint64_t)n;
		total += n;
		if (n < MOQ_NET_KIO_BURST)
			break;
	}
	return total;
}

static int kernel_tx(struct kio *k, struct moq_lg_client *cl, struct io_stats *io)
{
	static uint8_t bufs[TX_BATCH][MOQ_QUIC_MAX_UDP_PAYLOAD];
	struct moq_quic_pkt pkts[TX_BATCH];
	int total = 0;
	for (int round = 0; round < TX_ROUNDS; round++) {
		if (!moq_lg_client_pending(cl))
			break;
		for (int j = 0; j < TX_BATCH; j++) {
			pkts[j].data = bufs[j];
			pkts[j].cap = sizeof(bufs[j]);
		}
		int n = moq_lg_client_send(cl, pkts, TX_BATCH, moq_lg_now_ns());
		if (n <= 0)
			break;
		/* sendmmsg per run of packets from the same local address */
		int j = 0;
		while (j < n) {
			unsigned s = local_index(k->locals, k->n, k->base, &pkts[j].local);
			struct moq_net_kdgram d[TX_BATCH];
			int m = 0;
			while (j + m < n && (m == 0 || local_index(k->locals, k->n, k->base,
			                                           &pkts[j + m].local) == s)) {
				struct moq_quic_pkt *p = &pkts[j + m];
				d[m].data = p->data;
				d[m].len = p->len;
				d[m].addr = &p->remote.u.sa;
				d[m].addrlen = p->remote.len;
				m++;
			}
			if (s >= k->n) {
				io->tx_drops += (uint64_t)m;
			} else {
				/* bursts of MOQ_NET_KIO_BURST until one is not taken whole */
				int sent = 0;
				while (sent < m) {
					int c = m - sent < MOQ_NET_KIO_BURST ? m - sent
					                                     : MOQ_NET_KIO_BURST;
					int x = moq_net_ksend(k->kb, &k->socks[s], d + sent, c,
					                      NULL);
					sent += x;
					if (x < c)
						break;
				}
				io->tx_pkts += (uint64_t)sent;
				io->tx_drops += (uint64_t)(m - sent);
			}
			j += m;
		}
		total += n;
		if (n < TX_BATCH)
			break;
	}
	return total;
}

/* ---- DPDK ----------------------------------------------------------------- */

struct dio {
	uint16_t port;
	struct rte_mempool *pool;
	struct moq_net_iface *ifc;
	struct moq_net *net;
	unsigned n;
	uint32_t base; /* host order: addr_key(locals[0]) */
	int family;    /* 4 or 6: the locals' and the relay's */
};

static int dpdk_open(struct dio *d, int port, const struct moq_quic_addr *locals, unsigned n,
                     unsigned plen)
{
	uint16_t pid;
	if (port < 0) {
		int found = 0;
		RTE_ETH_FOREACH_DEV(pid)
		{
			found = 1;
			break;
		}
		if (!found) {
			fprintf(stderr, "moqdp-load: no DPDK port (give one with --vdev=...)\n");
			return -1;
		}
	} else {
		pid = (uint16_t)port;
		if (!rte_eth_dev_is_valid_port(pid)) {
			fprintf(stderr, "moqdp-load: --port %d: no such port\n", port);
			return -1;
		}
	}
	d->port = pid;
	d->pool = rte_pktmbuf_pool_create("lg_pool", NB_MBUFS, MBUF_CACHE, 0,
	                                  RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
	if (!d->pool) {
		fprintf(stderr, "moqdp-load: mbuf pool: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	uint16_t nrxd = NB_RXD, ntxd = NB_TXD;
	if (rte_eth_dev_configure(pid, 1, 1, &conf) < 0 ||
	    rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nrxd, &ntxd) < 0 ||
	    rte_eth_rx_queue_setup(pid, 0, nrxd, rte_eth_dev_socket_id(pid), NULL, d->pool) < 0 ||
	    rte_eth_tx_queue_setup(pid, 0, ntxd, rte_eth_dev_socket_id(pid), NULL) < 0) {
		fprintf(stderr, "moqdp-load: port %u set-up failed\n", pid);
		return -1;
	}
	if (rte_eth_dev_start(pid) < 0) {
		fprintf(stderr, "moqdp-load: port %u start failed\n", pid);
		return -1;
	}
	rte_eth_promiscuous_enable(pid);
	struct rte_ether_addr mac;
	rte_eth_macaddr_get(pid, &mac);
	d->ifc = calloc(n, sizeof(*d->ifc));
	d->net = calloc(n, sizeof(*d->net));
	if (!d->ifc || !d->net)
		return -1;
	d->n = n;
	d->base = addr_key(&locals[0]);
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *ip = addr_ip(&locals[i], &d->family);
		/* IPv6: the context answers NS for its address (and its
		 * link-local one) and solicits the relay's */
		moq_net_iface_init(&d->ifc[i], mac.addr_bytes, d->family == 4 ? ip : NULL,
		                   d->family == 4 ? (uint8_t)plen : 0, d->family == 6 ? ip : NULL,
		                   d->family == 6 ? (uint8_t)plen : 0, addr_port(&locals[i]));
		moq_net_init(&d->net[i], &d->ifc[i]);
	}
	char name[RTE_ETH_NAME_MAX_LEN] = "?";
	rte_eth_dev_get_name_by_port(pid, name);
	fprintf(stderr, "moqdp-load: port %u (%s) mac " RTE_ETHER_ADDR_PRT_FMT ", %u address(es)\n",
	        pid, name, RTE_ETHER_ADDR_BYTES(&mac), n);
	return 0;
}

/* Wait for the port's link (a memif peer connects asynchronously), then
 * resolve the relay's MAC before the first QUIC packet, so the handshake does
 * not start with packets dropped as unresolved. The answer is shared by every
 * local address's context. Returns 0, or -1 when either timed out. */
static int dpdk_prepare(struct dio *d, const struct moq_quic_addr *relay, double timeout_s)
{
	uint64_t end = moq_lg_now_ns() + (uint64_t)(timeout_s * 1e9);
	struct rte_eth_link link;
	do {
		memset(&link, 0, sizeof(link));
		rte_eth_link_get_nowait(d->port, &link);
		if (link.link_status == RTE_ETH_LINK_UP)
			break;
		usleep(10000);
	} while (moq_lg_now_ns() < end);
	if (link.link_status != RTE_ETH_LINK_UP) {
		fprintf(stderr, "moqdp-load: port %u: link down after %.0f s\n", d->port,
		        timeout_s);
		return -1;
	}
	int fam;
	const uint8_t *ip = addr_ip(relay, &fam);
	while (moq_lg_now_ns() < end) {
		uint64_t now = moq_lg_now_ns();
		uint8_t mac[6], req[128];
		size_t req_len = 0;
		if (moq_net_resolve(&d->net[0], fam, ip, now, mac, req, sizeof(req), &req_len) ==
		    0) {
			for (unsigned i = 1; i < d->n; i++)
				moq_net_neigh_learn(&d->net[i], fam, ip, mac, now);
			return 0;
		}
		if (req_len) {
			struct rte_mbuf *m = rte_pktmbuf_alloc(d->pool);
			if (m) {
				memcpy(rte_pktmbuf_append(m, (uint16_t)req_len), req, req_len);
				if (rte_eth_tx_burst(d->port, 0, &m, 1) != 1)
					rte_pktmbuf_free(m);
			}
		}
		struct rte_mbuf *ms[BURST];
		uint16_t n = rte_eth_rx_burst(d->port, 0, ms, BURST);
		for (uint16_t i = 0; i < n; i++) {
			struct moq_net_udp u;
			struct rte_mbuf *reply = NULL;
			if (moq_net_rx_mbuf(&d->net[0], ms[i], now, &u, d->pool, &reply) ==
			            MOQ_NET_REPLY &&
			    reply && rte_eth_tx_burst(d->port, 0, &reply, 1) != 1)
				rte_pktmbuf_free(reply);
			rte_pktmbuf_free(ms[i]);
		}
		usleep(1000);
	}
	fprintf(stderr, "moqdp-load: the relay's address did not answer %s in %.0f s\n",
	        fam == 6 ? "neighbour solicitation" : "ARP", timeout_s);
	return -1;
}

/* The context of the local address a frame is for (IPv4 destination, ARP
 * target, IPv6 destination or, for a neighbour solicitation, its target:
 * the last 32 bits); the first one otherwise. */
static struct moq_net *dpdk_ctx_for(struct dio *d, struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	uint16_t len = rte_pktmbuf_data_len(m);
	uint32_t ip = 0;
	if (len >= 42 && f[12] == 0x08 && f[13] == 0x06)
		memcpy(&ip, f + 38, 4); /* ARP target protocol address */
	else if (len >= 34 && f[12] == 0x08 && f[13] == 0x00)
		memcpy(&ip, f + 30, 4); /* IPv4 destination */
	else if (len >= 78 && f[12] == 0x86 && f[13] == 0xdd && f[20] == 58 && f[54] == 135)
		memcpy(&ip, f + 74, 4); /* ICMPv6 NS: its target (offset 62 + 12) */
	else if (len >= 54 && f[12] == 0x86 && f[13] == 0xdd)
		memcpy(&ip, f + 50, 4); /* IPv6 destination (offset 38 + 12) */
	uint32_t idx = ntohl(ip) - d->base;
	return idx < d->n ? &d->net[idx] : &d->net[0];
}

static int dpdk_rx_burst(struct dio *d, struct moq_lg_client *cl, struct io_stats *io)
{
	struct rte_mbuf *ms[BURST], *replies[BURST];
	uint16_t n = rte_eth_rx_burst(d->port, 0, ms, BURST), nr = 0;
	if (!n)
		return 0;
	uint64_t now = moq_lg_now_ns();
	for (uint16_t i = 0; i < n; i++) {
		struct moq_net *net = dpdk_ctx_for(d, ms[i]);
		struct moq_net_udp u;
		struct rte_mbuf *reply = NULL;
		enum moq_net_verdict v = moq_net_rx_mbuf(net, ms[i], now, &u, d->pool, &reply);
		if (v == MOQ_NET_UDP && (u.family == 4 || u.family == 6)) {
			struct moq_quic_addr local, remote;
			addr_set(&local, u.family, u.dst, u.dport);
			addr_set(&remote, u.family, u.src, u.sport);
			moq_lg_client_recv(cl, u.payload, u.len, &local, &remote, now);
		} else if (v == MOQ_NET_REPLY && reply) {
			replies[nr++] = reply;
		} else {
			io->rx_other++;
		}
		/* DESIGN.md: the RX mbuf goes back in the same iteration */
		rte_pktmbuf_free(ms[i]);
	}
	io->rx_pkts += n;
	if (nr) {
		uint16_t s = rte_eth_tx_burst(d->port, 0, replies, nr);
		for (uint16_t i = s; i < nr; i++)
			rte_pktmbuf_free(replies[i]);
	}
	return n;
}

/* Drain the RX ring (up to RX_ROUNDS bursts): a relay fans a keyframe out to
 * every subscriber at once, and what the ring cannot hold the relay drops. */
static int dpdk_rx(struct dio *d, struct moq_lg_client *cl, struct io_stats *io)
{
	int total = 0;
	for (int round = 0; round < RX_ROUNDS; round++) {
		int n = dpdk_rx_burst(d, cl, io);
		total += n;
		if (n < BURST)
			break;
	}
	return total;
}

static int dpdk_tx(struct dio *d, struct moq_lg_client *cl, struct io_stats *io)
{
	struct rte_mbuf *ms[TX_BATCH], *out[TX_BATCH * 2];
	struct moq_quic_pkt pkts[TX_BATCH];
	int total = 0;
	for (int round = 0; round < TX_ROUNDS; round++) {
		/* nothing to write: no mbufs taken and given back */
		if (!moq_lg_client_pending(cl))
			break;
		if (rte_pktmbuf_alloc_bulk(d->pool, ms, TX_BATCH) != 0) {
			io->tx_drops++;
			break;
		}
		for (int j = 0; j < TX_BATCH; j++) {
			pkts[j].data = rte_pktmbuf_mtod(ms[j], uint8_t *);
			pkts[j].cap = rte_pktmbuf_tailroom(ms[j]);
			if (pkts[j].cap > MOQ_QUIC_MAX_UDP_PAYLOAD)
				pkts[j].cap = MOQ_QUIC_MAX_UDP_PAYLOAD;
		}
		uint64_t now = moq_lg_now_ns();
		int n = moq_lg_client_send(cl, pkts, TX_BATCH, now);
		if (n < 0)
			n = 0;
		uint16_t no = 0;
		for (int j = 0; j < n; j++) {
			struct rte_mbuf *m = ms[j], *sol = NULL;
			const struct moq_quic_pkt *p = &pkts[j];
			uint32_t idx = addr_key(&p->local) - d->base;
			struct moq_net *net = idx < d->n ? &d->net[idx] : &d->net[0];
			int fam;
			const uint8_t *dst = addr_ip(&p->remote, &fam);
			m->data_len = (uint16_t)p->len;
			m->pkt_len = (uint32_t)p->len;
			int rc = moq_net_udp_encap_mbuf(net, m, fam, dst, addr_port(&p->local),
			                                addr_port(&p->remote), p->ecn, now, d->pool,
			                                &sol);
			if (sol)
				out[no++] = sol;
			if (rc == 0) {
				out[no++] = m;
			} else {
				/* next hop not resolved yet: QUIC retransmits */
				io->unresolved++;
				rte_pktmbuf_free(m);
			}
		}
		if (n < TX_BATCH)
			rte_pktmbuf_free_bulk(ms + n, (unsigned)(TX_BATCH - n));
		uint16_t s = 0;
		while (s < no) {
			uint16_t k = rte_eth_tx_burst(d->port, 0, out + s, (uint16_t)(no - s));
			if (k == 0)
				break;
			s = (uint16_t)(s + k);
		}
		io->tx_pkts += s;
		for (uint16_t j = s; j < no; j++) {
			rte_pktmbuf_free(out[j]);
			io->tx_drops++;
		}
		total += n;
		if (n < TX_BATCH)
			break;
	}
	return total;
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct opts o;
	memset(&o, 0, sizeof(o));
	o.ramp = 200;
	o.duration = 10;
	o.port = -1;
	snprintf(o.tracks, sizeof(o.tracks), "video:1M,audio");
	snprintf(o.broadcast, sizeof(o.broadcast), "moqdp/load");
	snprintf(o.json, sizeof(o.json), "-");

	int kernel = 0, dash = -1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			dash = i;
			break;
		}
		if (!strcmp(argv[i], "--kernel"))
			kernel = 1;
	}
	int app_argc;
	char **app_argv;
	if (kernel && dash < 0) {
		app_argc = argc - 1;
		app_argv = argv + 1;
	} else if (dash >= 0) {
		app_argc = argc - dash - 1;
		app_argv = argv + dash + 1;
		for (int i = 0; i < app_argc; i++)
			if (!strcmp(app_argv[i], "--kernel"))
				kernel = 1;
	} else {
		usage();
		return 2;
	}
	if (parse_args(&o, app_argc, app_argv) < 0)
		return 2;
	if (o.thp) {
		long marked = moq_lg_heap_hugepages(HEAP_RESERVE);
		if (marked < 0 || o.verbose)
			fprintf(stderr, "moqdp-load: heap on huge pages: %s (%ld MiB)\n",
			        marked < 0 ? moq_err_str((int)marked) : "yes",
			        marked < 0 ? 0 : marked >> 20);
	}
	if (!o.relay[0])
		snprintf(o.relay, sizeof(o.relay), "%s",
		         o.kernel ? "127.0.0.1:4443" : "10.77.0.1:4443");
	if (!o.local[0])
		snprintf(o.local, sizeof(o.local), "%s",
		         o.relay[0] == '[' ? (o.kernel ? "::1/128" : "fd00:77::2/64")
		         : o.kernel        ? "127.0.0.2"
		                           : "10.77.0.2/24");

	struct moq_lg_client_cfg cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.publish = o.publish;
	cfg.subscribers = o.subscribers;
	cfg.ramp_per_s = o.ramp;
	cfg.conns_per_addr = o.conns_per_addr ? o.conns_per_addr : MOQ_LG_CONNS_PER_ADDR;
	cfg.verbose = o.verbose;
	cfg.max_handshakes = o.max_handshakes;
	if (o.lite && (o.transport == MOQ_LG_TRANSPORT_WT || o.ws || o.light)) {
		fprintf(stderr, "moqdp-load: --lite: raw QUIC sessions only (not with --transport "
		                "wt / ws or --light)\n");
		return 2;
	}
	if (o.ietf_publish && (!o.ietf || !o.publish)) {
		fprintf(stderr, "moqdp-load: --ietf-publish: needs --protocol ietf-NN and --publish\n");
		return 2;
	}
	if (o.lite && o.ietf) {
		fprintf(stderr, "moqdp-load: --lite: not with --protocol ietf-NN\n");
		return 2;
	}
	cfg.lite = o.lite;
	if ((o.verify_every || o.verify_min) && !o.light) {
		fprintf(stderr, "moqdp-load: --verify-every / --verify-min need --light\n");
		return 2;
	}
	if (o.light && (o.transport != MOQ_LG_TRANSPORT_QUIC || o.ws)) {
		fprintf(stderr, "moqdp-load: --light takes over raw QUIC connections only "
		                "(not --transport wt or ws)\n");
		return 2;
	}
	if (o.datagrams && (o.light || o.ws || o.ietf)) {
		fprintf(stderr, "moqdp-load: --datagrams needs QUIC full subscribers, raw or "
		                "WebTransport, moq-lite (not --light, ws or --protocol ietf-NN)\n");
		return 2;
	}
	cfg.datagrams = o.datagrams;
	if (o.light) {
		const char *mute = getenv("MOQDP_TEST_LIGHT_MUTE");
		cfg.light_verify_every = o.verify_every ? o.verify_every : 20;
		cfg.light_verify_min = o.verify_min ? o.verify_min : 100;
		cfg.light_mute = mute ? (uint32_t)strtoul(mute, NULL, 10) : 0;
	}
	memcpy(cfg.jwt, o.jwt, sizeof(cfg.jwt));
	cfg.transport = o.transport;
	snprintf(cfg.broadcast, sizeof(cfg.broadcast), "%s", o.broadcast);
	if (parse_tracks(o.tracks, &cfg) < 0)
		return 2;
	cfg.end_early_groups = o.end_early;
	cfg.key_update_ns = (uint64_t)(o.key_update * 1e9);
	cfg.sub_max_latency_ms = o.max_latency_ms;
	if (o.end_early && (cfg.ntracks != 1 || !o.publish)) {
		fprintf(stderr, "moqdp-load: --end-early needs --publish and one track\n");
		return 2;
	}
	for (unsigned k = 0; k < cfg.ntracks; k++)
		if (cfg.tracks[k].kind == MOQ_LG_VIDEO)
			cfg.tracks[k].key_max = o.key_max;
	int all_silent = cfg.ntracks > 0;
	for (unsigned k = 0; k < cfg.ntracks; k++)
		all_silent &= cfg.tracks[k].silent;
	if (!o.publish && o.subscribers == 0) {
		fprintf(stderr,
		        "moqdp-load: nothing to do: give --publish and/or --subscribers N\n");
		return 2;
	}
	if (parse_hostport(o.relay, &cfg.relay) < 0) {
		fprintf(stderr, "moqdp-load: --relay: '%s' is not IPv4:port or [IPv6]:port\n",
		        o.relay);
		return 2;
	}
	struct moq_quic_addr lip;
	unsigned plen;
	if (parse_local(o.local, &lip, &plen) < 0) {
		fprintf(stderr, "moqdp-load: --local: '%s' is not an IPv4 or IPv6 address\n",
		        o.local);
		return 2;
	}
	if (lip.u.sa.sa_family != cfg.relay.u.sa.sa_family) {
		fprintf(stderr, "moqdp-load: --local %s and --relay %s: not the same family\n",
		        o.local, o.relay);
		return 2;
	}
	unsigned nlocals = 1 + (o.subscribers + cfg.conns_per_addr - 1) / cfg.conns_per_addr;
	if (nlocals > MAX_LOCALS) {
		fprintf(stderr,
		        "moqdp-load: %u subscribers need %u local addresses (max %d): raise "
		        "--conns-per-addr\n",
		        o.subscribers, nlocals, MAX_LOCALS);
		return 2;
	}
	struct moq_quic_addr locals[MAX_LOCALS];
	memset(locals, 0, sizeof(locals));
	/* DPDK: a fixed UDP port on every address; kernel: ephemeral */
	uint16_t lport = o.kernel ? 0 : 40000;
	/* IPv6 /128 (::1): one address, a socket per local on a port of its
	 * own (the kernel's; DPDK has one port per address) */
	int one_addr = lip.u.sa.sa_family == AF_INET6 && plen == 128;
	if (one_addr && !o.kernel && nlocals > 1) {
		fprintf(stderr,
		        "moqdp-load: --local %s: a /128 is one address; on DPDK %u subscribers "
		        "need %u (a shorter prefix, or --kernel)\n",
		        o.local, o.subscribers, nlocals);
		return 2;
	}
	for (unsigned i = 0; i < nlocals; i++) {
		locals[i] = lip;
		if (lip.u.sa.sa_family == AF_INET6) {
			uint32_t v = htonl(addr_key(&lip) + (one_addr ? 0 : i));
			memcpy((uint8_t *)&locals[i].u.in6.sin6_addr + 12, &v, 4);
			locals[i].u.in6.sin6_port = htons(lport);
		} else {
			locals[i].u.in4.sin_addr.s_addr = htonl(addr_key(&lip) + i);
			locals[i].u.in4.sin_port = htons(lport);
		}
	}

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);

	if (o.ietf) { /* IETF moq-transport: ietf_run.c */
		struct moq_lg_ietf_run_cfg ir;
		memset(&ir, 0, sizeof(ir));
		if (!o.kernel || o.ws || o.transport != MOQ_LG_TRANSPORT_QUIC || o.light ||
		    o.end_early || o.jwt[0] || o.key_update > 0) {
			fprintf(stderr,
			        "moqdp-load: --protocol ietf-%d: needs --kernel, raw QUIC; not "
			        "with --light, --end-early, --jwt, --key-update\n",
			        o.ietf);
			return 2;
		}
		if (cfg.ntracks != 1) {
			fprintf(stderr, "moqdp-load: --protocol ietf-%d: one track (--tracks)\n",
			        o.ietf);
			return 2;
		}
		ir.draft = o.ietf;
		ir.publish = o.publish;
		ir.use_publish = o.ietf_publish;
		ir.subscribers = o.subscribers;
		ir.ramp_per_s = o.ramp;
		ir.conns_per_addr = cfg.conns_per_addr;
		ir.track = cfg.tracks[0];
		snprintf(ir.broadcast, sizeof(ir.broadcast), "%s", o.broadcast);
		ir.relay = cfg.relay;
		ir.locals = locals;
		ir.nlocals = nlocals;
		ir.duration_s = o.duration;
		ir.warmup_s = o.warmup;
		snprintf(ir.json, sizeof(ir.json), "%s", o.json);
		return moq_lg_ietf_run(&ir, &quit, &mark);
	}
	if (o.ws && !o.kernel) {
		fprintf(stderr,
		        "moqdp-load: --transport ws: needs --kernel (TCP on kernel sockets)\n");
		return 2;
	}
	struct kio k = {.ep = -1, .kb = NULL};
	struct dio d;
	memset(&d, 0, sizeof(d));
	if (o.kernel) {
		if (kernel_open(&k, locals, nlocals) < 0) {
			kernel_close(&k);
			return 1;
		}
	} else {
		int r = rte_eal_init(dash, argv);
		if (r < 0) {
			fprintf(stderr, "moqdp-load: EAL: %s\n", rte_strerror(rte_errno));
			return 1;
		}
		if (dpdk_open(&d, o.port, locals, nlocals, plen) < 0 ||
		    dpdk_prepare(&d, &cfg.relay, 10.0) < 0) {
			rte_eal_cleanup();
			return 1;
		}
	}
	cfg.locals = locals;
	cfg.nlocals = nlocals;
	struct moq_web *web = NULL;
	if (o.ws) {
		char werr[256];
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = WS_EV};

		web = moq_lg_ws_open(werr, sizeof(werr));
		if (!web || epoll_ctl(k.ep, EPOLL_CTL_ADD, moq_web_fd(web), &ev) != 0) {
			fprintf(stderr, "moqdp-load: --transport ws: %s\n",
			        web ? strerror(errno) : werr);
			return 1;
		}
		cfg.ws = web;
	}

	int err = 0;
	uint64_t t0 = moq_lg_now_ns();
	struct moq_lg_client *cl = moq_lg_client_create(&cfg, t0, &err);
	if (!cl) {
		fprintf(stderr, "moqdp-load: client set-up failed: %s\n", moq_err_str(err));
		return 1;
	}
	{
		char rip[INET6_ADDRSTRLEN], lip0[INET6_ADDRSTRLEN];
		int f;
		const uint8_t *ra = addr_ip(&cfg.relay, &f);
		inet_ntop(f == 6 ? AF_INET6 : AF_INET, ra, rip, sizeof(rip));
		ra = addr_ip(&locals[0], &f);
		inet_ntop(f == 6 ? AF_INET6 : AF_INET, ra, lip0, sizeof(lip0));
		fprintf(stderr,
		        "moqdp-load: %s mode, relay %s%s%s:%u, %s%u subscriber(s) at %.0f/s from "
		        "%s "
		        "(+%u "
		        "addresses), broadcast '%s', tracks %s, %.0f s\n",
		        o.kernel ? "kernel" : "dpdk", f == 6 ? "[" : "", rip, f == 6 ? "]" : "",
		        addr_port(&cfg.relay), o.publish ? "publisher + " : "", o.subscribers,
		        o.ramp, lip0, nlocals - 1, o.broadcast, o.tracks, o.duration);
	}

	struct progress pg;
	memset(&pg, 0, sizeof(pg));
	if (!strcmp(o.json, "-"))
		pg.json = stdout;
	else if (o.json[0] && !(pg.json = fopen(o.json, "w"))) {
		fprintf(stderr, "moqdp-load: --json %s: %s\n", o.json, strerror(errno));
		return 1;
	}
	pg.live = !o.quiet;
	pg.tty = isatty(2);
	pg.start_ns = t0;
	pg.next_ns = t0 + 1000000000ull;

	struct io_stats io;
	memset(&io, 0, sizeof(io));
	uint64_t end_ns = o.duration > 0 ? t0 + (uint64_t)(o.duration * 1e9) : UINT64_MAX;
	uint64_t stop_at = 0, next_done_check = 0;
	uint64_t warm_ns = o.warmup > 0 ? t0 + (uint64_t)(o.warmup * 1e9) : 0;
	int rc = 1;
	for (;;) {
		uint64_t now = moq_lg_now_ns();
		int work = 0;
		/* --end-early: done once every subscriber has every group and
		 * the publisher's END (checked about every 100 ms) */
		if (o.end_early && !stop_at && now >= next_done_check) {
			next_done_check = now + 100000000ull;
			if (moq_lg_client_end_early_done(cl))
				quit = 1;
		}
		if ((quit || now >= end_ns) && !stop_at) {
			/* the summary is what was delivered while every session
			 * ran; then they close */
			/* subscribers of silent tracks only are meant to get no
			 * frame: that is no failure */
			rc = summary(cl, now, pg.json, &io, pg.live && pg.tty,
			             all_silent ? 0 : o.subscribers);
			moq_lg_client_stop(cl, now);
			stop_at = now + STOP_GRACE_NS;
		}
		if (stop_at && now >= stop_at)
			break;
		if ((warm_ns && now >= warm_ns) || mark) {
			moq_lg_client_reset_latency(cl);
			warm_ns = 0;
			mark = 0;
		}
		if (o.kernel) {
			struct epoll_event evs[64];
			int timeout = 0;
			if (!moq_lg_client_pending(cl)) {
				uint64_t w = moq_lg_client_next_wake(cl);
				timeout = w <= now ? 0 : (int)((w - now + 999999) / 1000000);
				if (timeout > 10)
					timeout = 10;
			}
			int ne = epoll_wait(k.ep, evs, 64, timeout);
			for (int i = 0; i < ne; i++)
				if (evs[i].data.u32 != WS_EV)
					work += kernel_rx(&k, evs[i].data.u32, cl, locals, &io);
			now = moq_lg_now_ns();
			work += moq_lg_client_poll(cl, now);
			if (web)
				work += moq_web_poll(web, now); /* what the nodes wrote goes out */
			work += kernel_tx(&k, cl, &io);
		} else {
			work += dpdk_rx(&d, cl, &io);
			now = moq_lg_now_ns();
			work += moq_lg_client_poll(cl, now);
			work += dpdk_tx(&d, cl, &io);
			if (!work && !o.busy_poll && !moq_lg_client_pending(cl)) {
				uint64_t w = moq_lg_client_next_wake(cl), t = moq_lg_now_ns();
				if (w > t + 20000) {
					uint64_t ns = w - t < IDLE_SLEEP_MAX_NS ? w - t
					                                        : IDLE_SLEEP_MAX_NS;
					struct timespec ts = {0, (long)ns};
					nanosleep(&ts, NULL);
				}
			}
		}
		if (now >= pg.next_ns) {
			progress_tick(&pg, cl, now, &io);
			pg.next_ns += 1000000000ull;
			if (pg.next_ns < now)
				pg.next_ns = now + 1000000000ull;
		}
	}
	if (pg.json && pg.json != stdout)
		fclose(pg.json);
	moq_web_destroy(web); /* its sessions end first, on the client's nodes */
	moq_lg_client_destroy(cl);
	if (o.kernel) {
		kernel_close(&k);
	} else {
		rte_eth_dev_stop(d.port);
		rte_eth_dev_close(d.port);
		free(d.net);
		free(d.ifc);
		rte_eal_cleanup();
	}
	return rc;
}
