/* SPDX-License-Identifier: MIT */
/*
 * pmd_config.c: one table of keys; the config file, the environment and the
 * command line all go through moq_pmd_config_set().
 */
#include "pmd_config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "moq_err.h"
#include "pmd_profile.h"

extern char **environ;

enum key_type {
	K_ADDRS, /* comma-separated moq_cfg_addr list (listen) */
	K_ADDR,  /* one moq_cfg_addr */
	K_U16,   /* integer in [min, max] */
	K_U32,
	K_SIZE,     /* size with unit, u64 bytes in [min, max] */
	K_DUR,      /* duration with unit, u64 microseconds in [min, max] */
	K_PATH,     /* string up to MOQ_CFG_PATH_MAX */
	K_BACKEND,  /* dpdk | kernel */
	K_QUEUES,   /* (port,queue,lcore),... */
	K_MASK,     /* hex port mask */
	K_PROFILE,  /* auto | a profile name */
	K_HOSTPORT, /* host:port or "" */
	K_ADMIT,    /* bounds | goaway=URL */
	K_ONOFF,    /* on | off, a u32 1 / 0 */
};

struct key {
	const char *name;
	enum key_type type;
	size_t off;
	uint64_t min, max;
	const char *help;
};

#define OFF(f) offsetof(struct moq_pmd_config, f)
#define US     1000000ull

/* The keys, with the bounds each value must respect. */
static const struct key keys[] = {
        {"listen", K_ADDRS, OFF(listen), 0, 0,
         "address[/prefix] list the relay answers on (default 0.0.0.0)"},
        {"port", K_U16, OFF(udp_port), 1, 65535, "UDP port (default 4443)"},
        {"gateway", K_ADDR, OFF(gateway4), 0, 0, "IPv4 next hop for off-link peers"},
        {"gateway6", K_ADDR, OFF(gateway6), 0, 0, "IPv6 next hop for off-link peers"},
        /* 1280: the IPv6 minimum link MTU (RFC 8200, 5), also QUIC's floor for
	 * datagrams (RFC 9000, 14); 9000: jumbo frames. */
        {"mtu", K_U16, OFF(mtu), 1280, 9000, "IP MTU of the ports (default 1500)"},
        {"cert", K_PATH, OFF(cert), 0, 0, "TLS certificate chain (PEM); empty = self-signed"},
        {"key", K_PATH, OFF(key), 0, 0, "TLS private key (PEM)"},
        {"state-dir", K_PATH, OFF(state_dir), 0, 0,
         "without --cert: keep the generated certificate and key here until due for "
         "renewal; \"\" = keep nothing (default $STATE_DIRECTORY, /var/lib/moqdp as root, "
         "else ~/.local/state/moqdp)"},
        {"cache-budget", K_SIZE, OFF(cache_budget), 1ull << 20, 1ull << 42,
         "cache byte budget (default 1GiB)"},
        {"max-latency", K_DUR, OFF(max_latency_us), 1000, 3600 * US,
         "groups older than this expire from the cache (default 5s, moq-lite's default)"},
        {"max-connections", K_U32, OFF(max_connections), 1, 10000000,
         "QUIC connections per worker (default 100000)"},
        /* 0 = unlimited; 10000000: --max-connections' bound */
        {"max-conns-per-addr", K_U32, OFF(max_conns_per_addr), 0, 10000000,
         "QUIC connections from one source (an IPv4 address, an IPv6 /64), all "
         "workers together; beyond: refused, 0 = unlimited (default 1024)"},
        {"max-subscribers", K_U32, OFF(max_subscribers), 1, 10000000,
         "active subscriptions, relay-wide; beyond: SUBSCRIBE reset 11 (default 100000)"},
        {"max-streams", K_U32, OFF(max_streams), 1, 1000000, "per connection (default 1000)"},
        {"max-tracks", K_U32, OFF(max_tracks), 1, 10000000,
         "upstream tracks served, relay-wide (once per worker reading one); beyond: "
         "SUBSCRIBE to a new track reset 11 (default 10000)"},
        {"idle-timeout", K_DUR, OFF(idle_timeout_us), 1000, 3600 * US,
         "QUIC idle timeout (default 30s)"},
        {"backend", K_BACKEND, OFF(backend), 0, 0, "dpdk or kernel (default dpdk)"},
        {"queues", K_QUEUES, OFF(queues), 0, 0,
         "\"(port,queue,lcore),...\" RX queue to lcore map, at most 16 queues per lcore "
         "(default: queue 0 of each port)"},
        {"portmask", K_MASK, OFF(portmask), 0, 0, "hex mask of ports to use (default all)"},
        /* 64..32768: the range DPDK PMDs accept; clamped to the device's limits later. */
        {"rx-desc", K_U16, OFF(rx_desc), 64, 32768, "RX descriptors per queue (default: profile)"},
        {"tx-desc", K_U16, OFF(tx_desc), 64, 32768, "TX descriptors per queue (default: profile)"},
        {"redirect-ring", K_U32, OFF(redirect_ring), 64, 1u << 20,
         "per-lcore ring for other lcores' packets (default 1024, power of 2)"},
        /* 16M mbufs of 2 KiB = 32 GiB: more than one socket's hugepages. */
        {"pool-mbufs", K_U32, OFF(pool_mbufs), 0, 1u << 24,
         "mbufs per NUMA socket pool, 0 = from queues x descriptors x lcores (default 0)"},
        {"profile", K_PROFILE, OFF(profile), 0, 0, "auto or a PMD profile name (default auto)"},
        {"stats-interval", K_DUR, OFF(stats_interval_us), 0, 3600 * US,
         "stats line period, 0 = off (default 5s)"},
        {"mgmt", K_HOSTPORT, OFF(mgmt), 0, 0,
         "HTTP management listener host:port, \"\" = off (default 127.0.0.1:9464)"},
        {"drain-timeout", K_DUR, OFF(drain_timeout_us), 0, 600 * US,
         "SIGQUIT grace period (default 10s)"},
        {"config", K_PATH, OFF(config), 0, 0, "config file (command line / MOQDP_CONFIG only)"},
        /* Per-peer bounds (moq.h, struct moq_node_cfg); each refusal is a
	 * moqdp_bounds_refused_total{bound=...} counter. */
        {"max-broadcasts", K_U32, OFF(max_broadcasts), 1, 10000000,
         "broadcasts in the origin table; an ANNOUNCE beyond closes its session with 11 "
         "(default 16384)"},
        {"max-session-broadcasts", K_U32, OFF(max_session_broadcasts), 1, 10000000,
         "broadcasts one session may announce (live or backup); beyond: closed with 11 "
         "(default 1024)"},
        {"link-max-subscriptions", K_U32, OFF(link_max_subscriptions), 1, 10000000,
         "subscriptions over one cluster link (a session we dialled, or one with the broad "
         "link token), either way (default 65536)"},
        {"link-max-broadcasts", K_U32, OFF(link_max_broadcasts), 1, 10000000,
         "broadcasts one cluster link may announce (default 16384)"},
        {"max-announce-requests", K_U32, OFF(max_announce_requests), 1, 1000000,
         "announce requests per session; beyond: reset 11 (default 16)"},
        {"max-session-subscriptions", K_U32, OFF(max_session_subscriptions), 1, 1000000,
         "subscriptions per session; beyond: SUBSCRIBE reset 11 (default 256)"},
        {"max-session-fetches", K_U32, OFF(max_session_fetches), 1, 1000000,
         "FETCH replies in flight per session; beyond: reset 11 (default 16)"},
        /* a name travels in one control message: at most --max-message */
        {"max-broadcast-name", K_U32, OFF(max_broadcast_name), 1, 4096,
         "bytes of a broadcast path; longer: request reset 11, ANNOUNCE closes the session "
         "(default 1024)"},
        {"max-track-name", K_U32, OFF(max_track_name), 1, 4096,
         "bytes of a track name; longer: request reset 11 (default 256)"},
        /* 64: room for a SUBSCRIBE with short names; 4096: the encoders'
	 * buffers (moq_node_create caps max_msg there) */
        {"max-message", K_U32, OFF(max_message), 64, 4096,
         "largest control message a peer may declare; larger: session closed with 11 "
         "(default 4096)"},
        /* moq-relay's names (rs/moq-relay/src/auth.rs) */
        {"auth-key", K_PATH, OFF(auth_key), 0, 0,
         "JWK file (JSON or base64url) that signs tokens (?jwt=); default: no auth"},
        {"auth-key-dir", K_PATH, OFF(auth_key_dir), 0, 0,
         "directory of {kid}.jwk keys, chosen by the token's kid"},
        {"auth-public", K_PATH, OFF(auth_public), 0, 0,
         "patterns (comma-separated, each with a wildcard: anon/**) open without a token, "
         "both directions; ** = all"},
        {"auth-public-publish", K_PATH, OFF(auth_public_publish), 0, 0,
         "patterns anyone may publish without a token"},
        {"auth-public-subscribe", K_PATH, OFF(auth_public_subscribe), 0, 0,
         "patterns anyone may subscribe to without a token"},
        {"auth-url", K_PATH, OFF(auth_url), 0, 0,
         "auth server asked per session (moq-relay's contract): http://loopback, "
         "unix:///path.sock or https://"},
        {"auth-tls-root", K_PATH, OFF(auth_tls_root), 0, 0,
         "CA file (PEM) an https:// --auth-url is verified with (default: the system's)"},
        /* relay-to-relay (dpdk_app/cluster.h); moq-relay's names */
        {"cluster-connect", K_PATH, OFF(cluster_connect), 0, 0,
         "peer relays to dial, comma-separated moql:// or https:// URLs (kernel backend)"},
        {"cluster-token", K_PATH, OFF(cluster_token), 0, 0,
         "file holding the JWT sent to peers (lite-05 SETUP path ?jwt=)"},
        {"cluster-ca", K_PATH, OFF(cluster_ca), 0, 0,
         "CA file (PEM) peers' certificates are verified with; \"insecure\" = none"},
        {"cluster-name", K_PATH, OFF(cluster_name), 0, 0,
         "name peers' certificates must carry (default: each URL's host; give it when the "
         "URLs are IP addresses)"},
        /* lite-06 7.3.4: a Route Cost is a varint; a u32 is room enough */
        {"route-cost", K_U32, OFF(route_cost), 0, UINT32_MAX,
         "lite-06 SETUP Cost this relay declares on every lite-06 session (what "
         "subscribing from it costs, Route Cost units; 0 = free; default 1, not sent)"},
        /* 600 s: far beyond a viewer's reconnect */
        {"upstream-hold", K_DUR, OFF(upstream_hold_us), 0, 600 * US,
         "upstream subscription kept after its last subscriber left (default 2s with "
         "--cluster-connect, else 0)"},
        /* Admission (issue 13): 99 at most, a worker is never more than
	 * 100 % busy; off by default (docs/DEPLOY.md, Admission) */
        {"admit-busy", K_U32, OFF(admit_busy), 0, 99,
         "admit new subscribers only while the worker was busy less than this percent of "
         "its last 100 ms; 0 = off (default 0)"},
        {"admit-refuse", K_ADMIT, OFF(admit_goaway), 0, 0,
         "how --admit-busy refuses: bounds (SUBSCRIBE reset 11) or goaway=URL (also "
         "GOAWAY naming another relay; default bounds)"},
        /* issue 15: the TCP side (web/web.h; BINDINGS.md, sections 2 and 3) */
        {"tcp", K_U32, OFF(tcp), 0, 1,
         "1: HTTP/1.1 + WebSocket (qmux) on TCP --port of the --listen addresses, plain "
         "and TLS (dpdk backend: through a net_tap exception port, IPv4; default 0)"},
        {"max-tcp-conns", K_U32, OFF(max_tcp_conns), 1, 1000000,
         "TCP connections per worker with --tcp 1; beyond: refused (default 1024)"},
        {"web-root", K_PATH, OFF(web_root), 0, 0,
         "directory served under /demo/ with --tcp 1 (scripts/demo --browser); default none"},
        /* issue 22, item 14: common/moq_origin.h (h3/ and web/) */
        {"allowed-origins", K_PATH, OFF(allowed_origins), 0, 0,
         "origins (comma-separated, e.g. https://app.example.com) a browser's WebTransport "
         "CONNECT or WebSocket upgrade may come from; others get 403; \"\" or * = any "
         "(default any)"},
        /* issue 23: quic/handoff.c, fastpath/ */
        {"fastpath", K_ONOFF, OFF(fastpath), 0, 0,
         "on: subscriber connections leave ngtcp2 for the 1-RTT fast path once set up and "
         "quiet; off: everything stays on ngtcp2 (default on)"},
        {"fastpath-conns", K_U32, OFF(fastpath_conns), 1, 10000000,
         "connections per worker the fast path holds (its pools, ~15 KiB a connection, are "
         "allocated at start); beyond, connections stay on ngtcp2 (default 4096)"},
        {"fastpath-gcm", K_ONOFF, OFF(fastpath_gcm), 0, 0,
         "on: the fast path seals and opens with its own AES-128-GCM (fastpath/gcm.c, VAES + "
         "VPCLMULQDQ on AVX-512) where the CPU has them, else with wolfCrypt; off: wolfCrypt "
         "always (default on)"},
};

#define NB_KEYS (sizeof(keys) / sizeof(keys[0]))

/* --state-dir's default: systemd's StateDirectory= ($STATE_DIRECTORY, the
 * first of a colon-separated list), /var/lib/moqdp for root, else the XDG
 * state home (XDG Base Directory Specification 0.8). */
static void default_state_dir(char *out, size_t len)
{
	const char *sd = getenv("STATE_DIRECTORY"), *x = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");

	if (sd != NULL && sd[0] != '\0')
		snprintf(out, len, "%.*s", (int)strcspn(sd, ":"), sd);
	else if (geteuid() == 0)
		snprintf(out, len, "/var/lib/moqdp");
	else if (x != NULL && x[0] == '/')
		snprintf(out, len, "%s/moqdp", x);
	else if (home != NULL && home[0] == '/')
		snprintf(out, len, "%s/.local/state/moqdp", home);
	else
		out[0] = '\0'; /* nowhere known: nothing kept */
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
		/* one line, whatever the user typed: control characters shown as '?' */
		for (char *p = err; *p != '\0'; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '?';
	}
	return MOQ_ERR_CONFIG;
}

/* --allowed-origins: "", or comma-separated entries each "*" or an origin,
 * scheme "://" host [":" port] (RFC 6454, 6.2; h3.h, moq_h3_origin_allowed),
 * a trailing '/' tolerated. */
static int origins_ok(const char *v)
{
	while (*v) {
		size_t n, e, s;

		v += strspn(v, " \t,");
		n = strcspn(v, ",");
		e = n;
		while (e > 0 && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e > 1 && v[e - 1] == '/')
			e--;
		if (e > 0 && !(e == 1 && v[0] == '*')) {
			const char *sep = strstr(v, "://");

			if (sep == NULL || sep == v || (size_t)(sep - v) + 3 >= e)
				return 0;
			for (s = 0; v + s < sep; s++)
				if (!isalpha((unsigned char)v[s]) && v[s] != '+' && v[s] != '-' &&
				    v[s] != '.')
					return 0;
			for (s = (size_t)(sep - v) + 3; s < e; s++)
				if (strchr("/?#@ \t\\", v[s]) != NULL ||
				    (unsigned char)v[s] < 0x21 || (unsigned char)v[s] > 0x7e)
					return 0;
		}
		v += n;
	}
	return 1;
}

void moq_pmd_config_defaults(struct moq_pmd_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->listen[0].family = AF_INET; /* 0.0.0.0: any address (kernel backend) */
	cfg->listen[0].prefixlen = 0;
	cfg->nb_listen = 1;
	cfg->udp_port = 4443;
	cfg->mtu = 1500;
	default_state_dir(cfg->state_dir, sizeof(cfg->state_dir));
	cfg->cache_budget = 1ull << 30;
	cfg->max_latency_us = 5 * US; /* moq-lite: a track's default max latency */
	cfg->max_connections = 100000;
	/* viewers behind one NAT (an office, a campus, carrier-grade NAT) share an
	 * address: 1024 lets that many in while one host still cannot take more
	 * than ~1 % of a worker's --max-connections (quic/'s own default, 64,
	 * refused the 65th viewer behind a NAT) */
	cfg->max_conns_per_addr = 1024;
	cfg->max_subscribers = 100000;
	cfg->max_streams = 1000;
	cfg->max_tracks = 10000;
	cfg->idle_timeout_us = 30 * US;
	cfg->fastpath = 1;
	cfg->fastpath_conns = 4096;
	cfg->fastpath_gcm = 1;
	cfg->backend = MOQ_CFG_BACKEND_DPDK;
	cfg->redirect_ring = 1024;
	snprintf(cfg->profile, sizeof(cfg->profile), "auto");
	cfg->stats_interval_us = 5 * US;
	snprintf(cfg->mgmt, sizeof(cfg->mgmt), "127.0.0.1:9464");
	cfg->drain_timeout_us = 10 * US;
	cfg->max_broadcasts = 16384;          /* MOQ_DEFAULT_MAX_BROADCASTS */
	cfg->max_session_broadcasts = 1024;   /* MOQ_DEFAULT_MAX_SESSION_BROADCASTS */
	cfg->max_announce_requests = 16;      /* moq_node_create's default */
	cfg->route_cost = 1;                  /* lite-06 7.3.4's default */
	cfg->max_session_subscriptions = 256; /* moq_node_create's default */
	cfg->max_session_fetches = 16;        /* MOQ_DEFAULT_MAX_FETCHES */
	cfg->link_max_subscriptions = 65536;  /* MOQ_DEFAULT_LINK_MAX_SUBSCRIPTIONS */
	cfg->link_max_broadcasts = 16384;     /* MOQ_DEFAULT_LINK_MAX_SESSION_BROADCASTS */
	cfg->max_broadcast_name = 1024;       /* MOQ_DEFAULT_MAX_BROADCAST_NAME */
	cfg->max_track_name = 256;            /* MOQ_DEFAULT_MAX_TRACK_NAME */
	cfg->max_tcp_conns = 1024;
	cfg->max_message = 4096; /* moq_node_create's default */
}

/* Splits "<number><unit>" and returns the number; *end is the unit. */
static int parse_num(const char *s, uint64_t *v, const char **unit)
{
	char *end;

	if (s == NULL || !isdigit((unsigned char)*s))
		return MOQ_ERR_INVAL;
	errno = 0;
	*v = strtoull(s, &end, 10);
	if (errno != 0)
		return MOQ_ERR_TOO_LARGE;
	*unit = end;
	return 0;
}

static int mul_check(uint64_t v, uint64_t m, uint64_t *out)
{
	if (m != 0 && v > UINT64_MAX / m)
		return MOQ_ERR_TOO_LARGE;
	*out = v * m;
	return 0;
}

int moq_pmd_parse_duration(const char *s, uint64_t *us)
{
	static const struct {
		const char *u;
		uint64_t mul, div;
	} units[] = {
	        {"ns", 1, 1000}, {"us", 1, 1},      {"ms", 1000, 1},
	        {"s", US, 1},    {"m", 60 * US, 1}, {"h", 3600 * US, 1},
	};
	const char *unit;
	uint64_t v;
	int rc = parse_num(s, &v, &unit);

	if (rc != 0)
		return rc == MOQ_ERR_TOO_LARGE ? rc : MOQ_ERR_INVAL;
	if (*unit == '\0')
		return v == 0 ? (*us = 0, 0) : MOQ_ERR_INVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(unit, units[i].u) == 0) {
			rc = mul_check(v, units[i].mul, us);
			if (rc == 0)
				*us /= units[i].div;
			return rc;
		}
	}
	return MOQ_ERR_INVAL;
}

int moq_pmd_parse_size(const char *s, uint64_t *bytes)
{
	static const struct {
		const char *u;
		uint64_t mul;
	} units[] = {
	        {"", 1},
	        {"B", 1},
	        {"k", 1000},
	        {"K", 1000},
	        {"KB", 1000},
	        {"kB", 1000},
	        {"M", 1000000},
	        {"MB", 1000000},
	        {"G", 1000000000ull},
	        {"GB", 1000000000ull},
	        {"T", 1000000000000ull},
	        {"TB", 1000000000000ull},
	        {"KiB", 1ull << 10},
	        {"MiB", 1ull << 20},
	        {"GiB", 1ull << 30},
	        {"TiB", 1ull << 40},
	};
	const char *unit;
	uint64_t v;
	int rc = parse_num(s, &v, &unit);

	if (rc != 0)
		return rc == MOQ_ERR_TOO_LARGE ? rc : MOQ_ERR_INVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(unit, units[i].u) == 0)
			return mul_check(v, units[i].mul, bytes);
	return MOQ_ERR_INVAL;
}

/* Reads an unsigned decimal of at most @max; advances *p. */
static int read_uint(const char **p, uint64_t max, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;

	while (*s == ' ')
		s++;
	if (!isdigit((unsigned char)*s))
		return MOQ_ERR_INVAL;
	while (isdigit((unsigned char)*s)) {
		x = x * 10 + (uint64_t)(*s - '0');
		if (x > max)
			return MOQ_ERR_INVAL;
		s++;
	}
	while (*s == ' ')
		s++;
	*v = x;
	*p = s;
	return 0;
}

int moq_pmd_parse_queues(const char *s, struct moq_cfg_queue *out, unsigned int cap,
                         unsigned int *n)
{
	const char *p = s;
	unsigned int count = 0;

	while (*p == ' ')
		p++;
	if (*p == '\0')
		return MOQ_ERR_INVAL;
	while (*p != '\0') {
		uint64_t f[3];

		if (*p++ != '(')
			return MOQ_ERR_INVAL;
		for (int i = 0; i < 3; i++) {
			/* RTE_MAX_ETHPORTS / queues / RTE_MAX_LCORE all fit in 16 bits */
			if (read_uint(&p, UINT16_MAX, &f[i]) != 0)
				return MOQ_ERR_INVAL;
			if (*p++ != (i < 2 ? ',' : ')'))
				return MOQ_ERR_INVAL;
		}
		if (count >= cap)
			return MOQ_ERR_LIMIT;
		out[count].port = (uint16_t)f[0];
		out[count].queue = (uint16_t)f[1];
		out[count].lcore = (uint16_t)f[2];
		count++;
		while (*p == ' ')
			p++;
		if (*p == ',') {
			p++;
			while (*p == ' ')
				p++;
			if (*p == '\0')
				return MOQ_ERR_INVAL;
		} else if (*p != '\0') {
			return MOQ_ERR_INVAL;
		}
	}
	*n = count;
	return 0;
}

int moq_pmd_parse_addr(const char *s, struct moq_cfg_addr *out)
{
	char buf[INET6_ADDRSTRLEN + 8];
	struct moq_cfg_addr a = {0};
	char *slash;
	uint64_t plen;

	if (s == NULL || strlen(s) >= sizeof(buf))
		return MOQ_ERR_INVAL;
	snprintf(buf, sizeof(buf), "%s", s);
	slash = strchr(buf, '/');
	if (slash != NULL)
		*slash++ = '\0';
	if (inet_pton(AF_INET, buf, a.addr) == 1) {
		a.family = AF_INET;
		a.prefixlen = 32;
	} else if (inet_pton(AF_INET6, buf, a.addr) == 1) {
		a.family = AF_INET6;
		a.prefixlen = 128;
	} else {
		return MOQ_ERR_INVAL;
	}
	if (slash != NULL) {
		const char *p = slash;

		if (read_uint(&p, a.prefixlen, &plen) != 0 || *p != '\0')
			return MOQ_ERR_INVAL;
		a.prefixlen = (uint8_t)plen;
	}
	*out = a;
	return 0;
}

static const struct key *find_key(const char *name)
{
	char norm[64];
	size_t i;

	for (i = 0; name[i] != '\0' && i + 1 < sizeof(norm); i++)
		norm[i] = name[i] == '_' ? '-' : (char)tolower((unsigned char)name[i]);
	if (name[i] != '\0')
		return NULL;
	norm[i] = '\0';
	for (i = 0; i < NB_KEYS; i++)
		if (strcmp(keys[i].name, norm) == 0)
			return &keys[i];
	return NULL;
}

/* "--name", "MOQDP_NAME" or "file:line: name": how the user wrote it. */
static void opt_label(char *buf, size_t len, const char *source, const char *name)
{
	if (source == NULL || strcmp(source, "--") == 0) {
		snprintf(buf, len, "--%s", name);
	} else if (strcmp(source, "MOQDP_") == 0) {
		size_t n = (size_t)snprintf(buf, len, "MOQDP_");
		for (size_t i = 0; name[i] != '\0' && n + 1 < len; i++, n++)
			buf[n] = name[i] == '-' ? '_' : (char)toupper((unsigned char)name[i]);
		buf[n < len ? n : len - 1] = '\0';
	} else {
		snprintf(buf, len, "%s: %s", source, name);
	}
}

static int set_value(struct moq_pmd_config *cfg, const struct key *k, const char *v,
                     const char *lbl, char *err, size_t errlen)
{
	char *field = (char *)cfg + k->off;
	uint64_t x;
	int rc;

	switch (k->type) {
	case K_ADDRS: {
		struct moq_cfg_addr list[MOQ_CFG_MAX_LISTEN];
		unsigned int n = 0;
		char buf[512], *save = NULL, *tok;

		if (strlen(v) >= sizeof(buf))
			return fail(err, errlen, "%s: value too long", lbl);
		snprintf(buf, sizeof(buf), "%s", v);
		for (tok = strtok_r(buf, ", ", &save); tok != NULL;
		     tok = strtok_r(NULL, ", ", &save)) {
			if (n == MOQ_CFG_MAX_LISTEN)
				return fail(err, errlen, "%s: more than %d addresses", lbl,
				            MOQ_CFG_MAX_LISTEN);
			if (moq_pmd_parse_addr(tok, &list[n]) != 0)
				return fail(err, errlen, "%s: '%s' is not an IP address[/prefix]",
				            lbl, tok);
			n++;
		}
		if (n == 0)
			return fail(err, errlen, "%s: at least one address is needed", lbl);
		memcpy(cfg->listen, list, n * sizeof(list[0]));
		cfg->nb_listen = n;
		return 0;
	}
	case K_ADDR: {
		struct moq_cfg_addr a;
		int want = k->off == OFF(gateway6) ? AF_INET6 : AF_INET;

		if (moq_pmd_parse_addr(v, &a) != 0 || a.family != want)
			return fail(err, errlen, "%s: '%s' is not an %s address", lbl, v,
			            want == AF_INET ? "IPv4" : "IPv6");
		memcpy(field, &a, sizeof(a));
		return 0;
	}
	case K_U16:
	case K_U32: {
		const char *p = v;

		if (read_uint(&p, k->max, &x) != 0 || *p != '\0' || x < k->min)
			return fail(err, errlen,
			            "%s: '%s' is not an integer in [%" PRIu64 ", %" PRIu64 "]", lbl,
			            v, k->min, k->max);
		if (k->type == K_U16)
			*(uint16_t *)(void *)field = (uint16_t)x;
		else
			*(uint32_t *)(void *)field = (uint32_t)x;
		if (k->off == OFF(redirect_ring) && (x & (x - 1)) != 0)
			return fail(err, errlen, "%s: %s is not a power of 2", lbl, v);
		return 0;
	}
	case K_SIZE:
		rc = moq_pmd_parse_size(v, &x);
		if (rc != 0)
			return fail(err, errlen, "%s: '%s' is not a size (e.g. 512MiB, 8GiB)", lbl,
			            v);
		if (x < k->min || x > k->max)
			return fail(err, errlen,
			            "%s: %s is out of range [%" PRIu64 " B, %" PRIu64 " B]", lbl, v,
			            k->min, k->max);
		*(uint64_t *)(void *)field = x;
		return 0;
	case K_DUR:
		rc = moq_pmd_parse_duration(v, &x);
		if (rc != 0)
			return fail(err, errlen, "%s: '%s' is not a duration (e.g. 500ms, 30s)",
			            lbl, v);
		if (x < k->min || x > k->max)
			return fail(err, errlen,
			            "%s: %s is out of range [%" PRIu64 "us, %" PRIu64 "us]", lbl, v,
			            k->min, k->max);
		*(uint64_t *)(void *)field = x;
		if (k->off == OFF(upstream_hold_us))
			cfg->upstream_hold_set = 1;
		return 0;
	case K_PATH: {
		size_t cap = k->off == OFF(cluster_connect) ? sizeof(cfg->cluster_connect)
		                                            : MOQ_CFG_PATH_MAX;

		if (strlen(v) >= cap)
			return fail(err, errlen, "%s: path longer than %zu bytes", lbl, cap - 1);
		if (k->off == OFF(allowed_origins) && !origins_ok(v))
			return fail(err, errlen,
			            "%s: '%s' is not a list of origins (https://host[:port], or *)",
			            lbl, v);
		snprintf(field, cap, "%s", v);
		if (k->off == OFF(auth_public))
			cfg->auth_public_set = 1; /* "" is a value: every path */
		return 0;
	}
	case K_ADMIT:
		if (strcmp(v, "bounds") == 0) {
			cfg->admit_goaway[0] = '\0';
			return 0;
		}
		if (strncmp(v, "goaway=", 7) == 0 && v[7] != '\0' &&
		    strlen(v + 7) < sizeof(cfg->admit_goaway)) {
			snprintf(cfg->admit_goaway, sizeof(cfg->admit_goaway), "%s", v + 7);
			return 0;
		}
		return fail(err, errlen, "%s: '%s' is not bounds or goaway=URL", lbl, v);
	case K_ONOFF:
		if (strcmp(v, "on") == 0 || strcmp(v, "off") == 0) {
			memcpy(field, &(uint32_t){strcmp(v, "on") == 0}, sizeof(uint32_t));
			return 0;
		}
		return fail(err, errlen, "%s: '%s' is not on or off", lbl, v);
	case K_BACKEND:
		if (strcmp(v, "dpdk") == 0)
			cfg->backend = MOQ_CFG_BACKEND_DPDK;
		else if (strcmp(v, "kernel") == 0)
			cfg->backend = MOQ_CFG_BACKEND_KERNEL;
		else
			return fail(err, errlen, "%s: '%s' is not a backend (dpdk, kernel)", lbl,
			            v);
		return 0;
	case K_QUEUES: {
		static struct moq_cfg_queue q[MOQ_CFG_MAX_QUEUES];
		unsigned int n = 0;

		rc = moq_pmd_parse_queues(v, q, MOQ_CFG_MAX_QUEUES, &n);
		if (rc == MOQ_ERR_LIMIT)
			return fail(err, errlen, "%s: more than %d (port,queue,lcore) triples", lbl,
			            MOQ_CFG_MAX_QUEUES);
		if (rc != 0)
			return fail(err, errlen,
			            "%s: '%s' is not a list of (port,queue,lcore), e.g. "
			            "(0,0,1),(0,1,2)",
			            lbl, v);
		memcpy(cfg->queues, q, n * sizeof(q[0]));
		cfg->nb_queues = n;
		return 0;
	}
	case K_MASK: {
		char *end;

		errno = 0;
		x = strtoull(v, &end, 16);
		if (*v == '\0' || *v == '-' || *end != '\0' || errno != 0 || x == 0)
			return fail(err, errlen, "%s: '%s' is not a non-zero hex port mask", lbl,
			            v);
		cfg->portmask = x;
		return 0;
	}
	case K_PROFILE:
		if (strcmp(v, "auto") != 0 && moq_pmd_profile_by_name(v) == NULL)
			return fail(err, errlen,
			            "%s: unknown profile '%s' (auto, tap, af_packet, memif, ring, "
			            "mlx5, "
			            "ice, i40e, virtio, generic)",
			            lbl, v);
		snprintf(cfg->profile, sizeof(cfg->profile), "%s", v);
		return 0;
	case K_HOSTPORT: {
		const char *colon = strrchr(v, ':'), *orig = v;
		struct moq_cfg_addr a;
		char host[INET6_ADDRSTRLEN + 2];
		size_t hl;
		const char *p;

		if (*v == '\0') {
			cfg->mgmt[0] = '\0';
			return 0;
		}
		if (colon == NULL || strlen(v) >= sizeof(cfg->mgmt))
			return fail(err, errlen, "%s: '%s' is not host:port", lbl, v);
		hl = (size_t)(colon - v);
		if (hl >= 2 && v[0] == '[' && v[hl - 1] == ']') {
			v++;
			hl -= 2;
		}
		if (hl >= sizeof(host))
			return fail(err, errlen, "%s: '%s' is not host:port", lbl, v);
		memcpy(host, v, hl);
		host[hl] = '\0';
		p = colon + 1;
		if (moq_pmd_parse_addr(host, &a) != 0 || strchr(host, '/') != NULL ||
		    read_uint(&p, 65535, &x) != 0 || *p != '\0' || x == 0)
			return fail(err, errlen, "%s: '%s' is not host:port", lbl, v);
		snprintf(cfg->mgmt, sizeof(cfg->mgmt), "%s", orig);
		return 0;
	}
	}
	return fail(err, errlen, "%s: internal error", lbl);
}

int moq_pmd_config_set(struct moq_pmd_config *cfg, const char *key, const char *value,
                       const char *source, char *err, size_t errlen)
{
	const struct key *k = find_key(key);
	struct moq_pmd_config tmp;
	char lbl[96];
	int rc;

	opt_label(lbl, sizeof(lbl), source, key);
	if (k == NULL)
		return fail(err, errlen, "%s: unknown option", lbl);
	if (value == NULL)
		return fail(err, errlen, "%s: a value is required", lbl);
	tmp = *cfg;
	rc = set_value(&tmp, k, value, lbl, err, errlen);
	if (rc == 0)
		*cfg = tmp;
	return rc;
}

static int read_file(struct moq_pmd_config *cfg, const char *path, char *err, size_t errlen)
{
	char line[1024], src[MOQ_CFG_PATH_MAX + 16];
	FILE *f = fopen(path, "r");
	unsigned int lineno = 0;
	int rc = 0;

	if (f == NULL)
		return fail(err, errlen, "--config: cannot open '%s': %s", path, strerror(errno));
	while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
		char *p = line, *eq, *k, *v, *e;

		lineno++;
		snprintf(src, sizeof(src), "%s:%u", path, lineno);
		if (strchr(line, '\n') == NULL && !feof(f)) {
			rc = fail(err, errlen, "%s: line longer than %zu bytes", src,
			          sizeof(line) - 2);
			break;
		}
		/* '#' starts a comment unless it is inside double quotes */
		for (int inq = 0; *p != '\0'; p++) {
			if (*p == '"')
				inq = !inq;
			else if (*p == '#' && !inq) {
				*p = '\0';
				break;
			}
		}
		p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (*p == '\0')
			continue;
		eq = strchr(p, '=');
		if (eq == NULL) {
			rc = fail(err, errlen, "%s: expected 'key = value'", src);
			break;
		}
		k = p;
		for (e = eq; e > k && isspace((unsigned char)e[-1]); e--)
			;
		*e = '\0';
		v = eq + 1;
		while (isspace((unsigned char)*v))
			v++;
		for (e = v + strlen(v); e > v && isspace((unsigned char)e[-1]); e--)
			;
		*e = '\0';
		if (e - v >= 2 && v[0] == '"' && e[-1] == '"') {
			e[-1] = '\0';
			v++;
		}
		if (*k == '\0') {
			rc = fail(err, errlen, "%s: expected 'key = value'", src);
			break;
		}
		if (find_key(k) != NULL && find_key(k)->off == OFF(config)) {
			rc = fail(err, errlen, "%s: config: not allowed inside a config file", src);
			break;
		}
		rc = moq_pmd_config_set(cfg, k, v, src, err, errlen);
	}
	fclose(f);
	return rc;
}

/* For "MOQDP_X=v": the key part after MOQDP_, or NULL if not ours. */
static int env_key(const char *kv, char *key, size_t keylen, const char **val)
{
	const char *eq;
	size_t n;

	if (strncmp(kv, "MOQDP_", 6) != 0)
		return 0;
	eq = strchr(kv, '=');
	if (eq == NULL)
		return 0;
	n = (size_t)(eq - kv - 6);
	if (n >= keylen)
		n = keylen - 1;
	memcpy(key, kv + 6, n);
	key[n] = '\0';
	*val = eq + 1;
	return 1;
}

/*
 * MOQDP_* environment variables that are not relay options, so the relay
 * started with them set does not refuse to run (see pmd_config.h):
 *   EAL            the EAL arguments of dpdk_app/moqdp-relay.service
 *                  (ExecStart=moqdp-relay $MOQDP_EAL --);
 *   BUILD_DIR, FUZZ_BUILD_DIR, FUZZ_RUNS, DEPS_ROOT, DEPS_PREFIX, PATCH_DIR,
 *   HUGEPAGES      read by scripts/ (test, fuzz, setup), which start relays;
 *   TEST_*         the test harness.
 * Any other MOQDP_<KEY> must be a key of keys[].
 */
static const char *const env_not_options[] = {
        "EAL",       "BUILD_DIR",   "FUZZ_BUILD_DIR", "FUZZ_RUNS",
        "DEPS_ROOT", "DEPS_PREFIX", "PATCH_DIR",      "HUGEPAGES",
};

static int env_ignored(const char *key)
{
	for (size_t i = 0; i < sizeof(env_not_options) / sizeof(env_not_options[0]); i++)
		if (strcmp(key, env_not_options[i]) == 0)
			return 1;
	return strncmp(key, "TEST_", 5) == 0;
}

int moq_pmd_config_parse(struct moq_pmd_config *cfg, int argc, char *const *argv, char *const *envp,
                         char *err, size_t errlen)
{
	const char *cfgfile = NULL;
	char key[64];
	const char *val;
	int rc, i;

	moq_pmd_config_defaults(cfg);
	if (envp == NULL)
		envp = environ;

	/* the config file: from the command line, else from MOQDP_CONFIG */
	for (i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			cfgfile = argv[i + 1];
		else if (strncmp(argv[i], "--config=", 9) == 0)
			cfgfile = argv[i] + 9;
	}
	for (char *const *e = envp; cfgfile == NULL && e && *e; e++)
		if (env_key(*e, key, sizeof(key), &val) && strcmp(key, "CONFIG") == 0)
			cfgfile = val;
	if (cfgfile != NULL && *cfgfile != '\0') {
		rc = read_file(cfg, cfgfile, err, errlen);
		if (rc != 0)
			return rc;
		snprintf(cfg->config, sizeof(cfg->config), "%s", cfgfile);
	}

	for (char *const *e = envp; e && *e; e++) {
		if (!env_key(*e, key, sizeof(key), &val) || env_ignored(key))
			continue;
		rc = moq_pmd_config_set(cfg, key, val, "MOQDP_", err, errlen);
		if (rc != 0)
			return rc;
	}

	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *eq;
		char name[64];

		if (strncmp(a, "--", 2) != 0 || a[2] == '\0')
			return fail(err, errlen, "'%s': expected --option value", a);
		a += 2;
		eq = strchr(a, '=');
		if (eq != NULL) {
			size_t n = (size_t)(eq - a);

			if (n >= sizeof(name))
				return fail(err, errlen, "--%.40s: unknown option", a);
			memcpy(name, a, n);
			name[n] = '\0';
			val = eq + 1;
		} else {
			snprintf(name, sizeof(name), "%s", a);
			if (find_key(name) == NULL)
				return fail(err, errlen, "--%.60s: unknown option", a);
			if (i + 1 >= argc)
				return fail(err, errlen, "--%s: a value is required", name);
			val = argv[++i];
		}
		rc = moq_pmd_config_set(cfg, name, val, "--", err, errlen);
		if (rc != 0)
			return rc;
	}
	return moq_pmd_config_check(cfg, err, errlen);
}

int moq_pmd_config_check(const struct moq_pmd_config *cfg, char *err, size_t errlen)
{
	if (cfg->auth_key[0] != '\0' && cfg->auth_key_dir[0] != '\0')
		return fail(err, errlen, "--auth-key-dir: cannot be combined with --auth-key");
	/* moq-relay: exactly one of --auth-url and the static rules */
	if (cfg->auth_url[0] != '\0' &&
	    (cfg->auth_key[0] || cfg->auth_key_dir[0] || cfg->auth_public_set ||
	     cfg->auth_public_publish[0] || cfg->auth_public_subscribe[0]))
		return fail(err, errlen, "--auth-url: cannot be combined with %s",
		            cfg->auth_key[0]              ? "--auth-key"
		            : cfg->auth_key_dir[0]        ? "--auth-key-dir"
		            : cfg->auth_public_set        ? "--auth-public"
		            : cfg->auth_public_publish[0] ? "--auth-public-publish"
		                                          : "--auth-public-subscribe");
	if (cfg->auth_tls_root[0] != '\0' && strncmp(cfg->auth_url, "https://", 8) != 0)
		return fail(err, errlen, "--auth-tls-root: only with an https:// --auth-url");
	if ((cfg->cert[0] != '\0') != (cfg->key[0] != '\0'))
		return fail(err, errlen, "%s: required when %s is given",
		            cfg->cert[0] ? "--key" : "--cert", cfg->cert[0] ? "--cert" : "--key");
	if (cfg->state_dir[0] != '\0' && cfg->state_dir[0] != '/')
		return fail(err, errlen, "--state-dir: '%s' is not an absolute path",
		            cfg->state_dir);
	for (unsigned int i = 0; i < cfg->nb_queues; i++)
		for (unsigned int j = 0; j < i; j++)
			if (cfg->queues[i].port == cfg->queues[j].port &&
			    cfg->queues[i].queue == cfg->queues[j].queue)
				return fail(err, errlen,
				            "--queues: (port %u, queue %u) is given twice",
				            cfg->queues[i].port, cfg->queues[i].queue);
	for (unsigned int i = 0; i < cfg->nb_queues; i++) {
		unsigned int first = 1, n = 0;

		for (unsigned int j = 0; j < cfg->nb_queues; j++)
			if (cfg->queues[j].lcore == cfg->queues[i].lcore) {
				first &= j >= i;
				n++;
			}
		if (first && n > MOQ_CFG_MAX_LCORE_QUEUES)
			return fail(err, errlen, "--queues: lcore %u polls %u queues (at most %d)",
			            cfg->queues[i].lcore, n, MOQ_CFG_MAX_LCORE_QUEUES);
	}
	for (unsigned int i = 0; i < cfg->nb_queues; i++) {
		if (cfg->portmask != 0 &&
		    (cfg->queues[i].port >= 64 || !(cfg->portmask & (1ull << cfg->queues[i].port))))
			return fail(err, errlen, "--queues: port %u is not in --portmask",
			            cfg->queues[i].port);
	}
	if (cfg->cluster_connect[0] != '\0' && cfg->cluster_ca[0] == '\0')
		return fail(err, errlen,
		            "--cluster-ca: required with --cluster-connect (a CA file, or "
		            "\"insecure\" for no verification)");
	if (cfg->cluster_connect[0] == '\0' &&
	    (cfg->cluster_token[0] != '\0' || cfg->cluster_ca[0] != '\0' ||
	     cfg->cluster_name[0] != '\0'))
		return fail(err, errlen, "%s: only with --cluster-connect",
		            cfg->cluster_token[0] ? "--cluster-token"
		            : cfg->cluster_ca[0]  ? "--cluster-ca"
		                                  : "--cluster-name");
	if (cfg->cluster_name[0] != '\0' && strcmp(cfg->cluster_ca, "insecure") == 0)
		return fail(err, errlen,
		            "--cluster-name: needs a CA file in --cluster-ca (\"insecure\" checks "
		            "no name)");
	if (!cfg->tcp && cfg->web_root[0])
		return fail(err, errlen, "--web-root: needs --tcp 1");
	if (cfg->backend == MOQ_CFG_BACKEND_DPDK) {
		for (unsigned int i = 0; i < cfg->nb_listen; i++) {
			static const uint8_t zero[16];
			size_t alen = cfg->listen[i].family == AF_INET ? 4 : 16;

			if (memcmp(cfg->listen[i].addr, zero, alen) == 0 && cfg->nb_listen > 1)
				return fail(
				        err, errlen,
				        "--listen: the any address cannot be combined with others");
		}
	}
	return 0;
}

const char *moq_pmd_config_usage(void)
{
	static char buf[8192];
	size_t n = 0;

	if (buf[0] != '\0')
		return buf;
	n += (size_t)snprintf(buf + n, sizeof(buf) - n,
	                      "relay options (also MOQDP_<KEY> and 'key = value' in --config):\n");
	for (size_t i = 0; i < NB_KEYS && n < sizeof(buf); i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "  --%-16s %s\n", keys[i].name,
		                      keys[i].help);
	return buf;
}
