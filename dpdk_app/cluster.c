/* SPDX-License-Identifier: MIT */
/*
 * cluster.c: the relay's links to peer relays (cluster.h): dialling,
 * keeping each link up, and the figures /metrics shows.
 */
#include "cluster.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "h3.h"
#include "moq_err.h"
#include "net.h"
#include "quic.h"

/* AUTH-CLUSTER.md, Relay-to-relay (moq-relay's cluster.rs): reconnect after
 * 1 s, doubling to 10 s, jittered; back to 1 s after a session lasted 10 s. */
#define BACKOFF_MIN_NS   1000000000ull
#define BACKOFF_MAX_NS   10000000000ull
#define BACKOFF_RESET_NS 10000000000ull
/* A link carries a few control streams and the upstream data; it pings
 * every second so a lost peer is noticed after LINK_IDLE_NS (not after the
 * relay's 30 s client idle timeout) and its subscriptions fail over. */
#define LINK_KEEPALIVE_NS 1000000000ull
#define LINK_IDLE_NS      5000000000ull
#define LINK_HANDSHAKE_NS 5000000000ull
/* A ready session counts as up once the peer asked for our announcements
 * (a relay that accepted us does at once), or after this long without being
 * closed (a peer whose token grants no put asks nothing): a peer refusing
 * us (6) closes the session right after SETUP. */
#define LINK_ACCEPT_NS 1000000000ull
/* moq-lite's default port for raw QUIC URLs without one (moq-relay: 443). */
#define LINK_DEFAULT_PORT 443
/* The SETUP path with its ?jwt= query: with everything else a lite-05
 * SETUP message stays well under a packet. */
#define LINK_PATH_MAX 1024

struct link {
	struct moq_cluster *c;
	char url[256]; /* shown: scheme://host:port/path, no query */
	char host[256];
	char path[LINK_PATH_MAX]; /* the SETUP path (with ?jwt=) */
	char authority[272];      /* https: the CONNECT's :authority, host:port */
	int wt;                   /* https:// : WebTransport (ALPN h3, h3.h) */
	struct moq_quic_addr remote, local;
	struct moq_net_ksock ks;
	struct moq_quic_endpoint *ep;
	struct moq_session *s;
	/* https: the connection of the current attempt, from the dial until
	 * it ended (its session exists only once the CONNECT succeeded) */
	struct moq_quic_conn *qc;
	int state;
	uint64_t backoff_ns, next_try, up_since, next_expiry, ready_at;
	uint64_t attempts;
	/* cluster.h, moq_cluster_link_info: written here, read by any thread */
	uint64_t rtt_ns, upstream_subs, bytes_sent, bytes_recv, connects, failures;
	uint64_t peer_origin;
	uint64_t done_sent, done_recv; /* bytes of connections that ended */
	uint64_t last_info;
};

struct moq_cluster {
	unsigned int nb;
	struct link l[MOQ_CLUSTER_MAX_LINKS];
	struct moq_node *node;
	struct moq_net_kbuf *kb;
	uint64_t rnd;
	uint64_t now;
	int draining; /* moq_cluster_drain: no more dials */
	int has_io;   /* moq_cluster_set_io: the DPDK backend's I/O, no sockets */
	struct moq_cluster_io io;
	uint8_t tx[MOQ_NET_KIO_BURST][MOQ_QUIC_MAX_UDP_PAYLOAD];
};

#define SET(f, v) __atomic_store_n(&(f), (v), __ATOMIC_RELAXED)
#define GET(f)    __atomic_load_n(&(f), __ATOMIC_RELAXED)

static int cfail(char *err, size_t errlen, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static int cfail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return MOQ_ERR_CONFIG;
}

/* xorshift64*: jitter only, not a secret. */
static uint64_t rnd_next(struct moq_cluster *c)
{
	c->rnd ^= c->rnd >> 12;
	c->rnd ^= c->rnd << 25;
	c->rnd ^= c->rnd >> 27;
	return c->rnd * 0x2545F4914F6CDD1Dull;
}

/* Read the token file: its first line, surrounding white space removed. */
static int read_token(const char *file, char *out, size_t cap, char *err, size_t errlen)
{
	FILE *f = fopen(file, "r");
	size_t n, b = 0;

	if (f == NULL)
		return cfail(err, errlen, "--cluster-token: cannot read %s: %s", file,
		             strerror(errno));
	n = fread(out, 1, cap - 1, f);
	fclose(f);
	out[n] = '\0';
	while (b < n && isspace((unsigned char)out[b]))
		b++;
	memmove(out, out + b, n - b + 1);
	n -= b;
	for (size_t i = 0; i < n; i++)
		if (isspace((unsigned char)out[i])) {
			n = i;
			break;
		}
	out[n] = '\0';
	if (n == 0)
		return cfail(err, errlen, "--cluster-token: %s holds no token", file);
	if (n == cap - 1)
		return cfail(err, errlen, "--cluster-token: the token in %s is too long", file);
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)out[i]) && out[i] != '-' && out[i] != '_' &&
		    out[i] != '.')
			return cfail(err, errlen, "--cluster-token: %s is not a compact JWT", file);
	return 0;
}

/* One URL of --cluster-connect into @l (and its address, resolved now). */
static int parse_url(struct link *l, const char *u, const char *token, char *err, size_t errlen)
{
	const char *p, *hs, *he, *path;
	unsigned long port = LINK_DEFAULT_PORT;
	struct addrinfo hints, *ai = NULL;
	char portstr[8];
	int rc;

	if (strncmp(u, "https://", 8) == 0) { /* WebTransport (BINDINGS.md 1) */
		l->wt = 1;
		p = u + 8;
	} else if (strncmp(u, "moql://", 7) == 0 || strncmp(u, "moqt://", 7) == 0)
		p = u + 7;
	else
		return cfail(err, errlen,
		             "--cluster-connect: '%s' is not a moql://host:port/ or "
		             "https://host:port/ URL",
		             u);
	hs = p;
	if (*p == '[') { /* [v6]:port */
		he = strchr(p, ']');
		if (he == NULL)
			return cfail(err, errlen, "--cluster-connect: '%s': bad IPv6 host", u);
		hs = p + 1;
		p = he + 1;
	} else {
		while (*p && *p != ':' && *p != '/' && *p != '?')
			p++;
		he = p;
	}
	if (he == hs || (size_t)(he - hs) >= sizeof(l->host))
		return cfail(err, errlen, "--cluster-connect: '%s': no host", u);
	memcpy(l->host, hs, (size_t)(he - hs));
	l->host[he - hs] = '\0';
	if (*p == ':') {
		char *end;
		port = strtoul(p + 1, &end, 10);
		if (end == p + 1 || port == 0 || port > 65535)
			return cfail(err, errlen, "--cluster-connect: '%s': bad port", u);
		p = end;
	}
	if (*p && *p != '/' && *p != '?')
		return cfail(err, errlen, "--cluster-connect: '%s': bad host:port", u);
	path = p;
	/* shown without the query: a ?jwt= in the URL stays out of /metrics */
	snprintf(l->url, sizeof(l->url), "%.*s", (int)(strcspn(u, "?")), u);
	/* the SETUP path: the URL's path and query, plus ?jwt= of
	 * --cluster-token when the URL carries none (as moq-relay) */
	if (*path == '/')
		path++;
	rc = snprintf(l->path, sizeof(l->path), "%s", path);
	if (token[0] != '\0' && strstr(path, "jwt=") == NULL)
		rc = snprintf(l->path, sizeof(l->path), "%s%sjwt=%s", path,
		              strchr(path, '?') ? "&" : "?", token);
	if (rc < 0 || (size_t)rc >= sizeof(l->path))
		return cfail(err, errlen, "--cluster-connect: '%s': path and token too long", u);
	/* https: the CONNECT's :authority (the :path is "/" + l->path) */
	{
		char auth[sizeof(l->authority)];
		int v6 = strchr(l->host, ':') != NULL;

		snprintf(auth, sizeof(auth), "%s%s%s:%lu", v6 ? "[" : "", l->host, v6 ? "]" : "",
		         port);
		memcpy(l->authority, auth, sizeof(auth));
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_DGRAM;
	snprintf(portstr, sizeof(portstr), "%lu", port);
	if (getaddrinfo(l->host, portstr, &hints, &ai) != 0 || ai == NULL)
		return cfail(err, errlen, "--cluster-connect: '%s': cannot resolve %s", u, l->host);
	memset(&l->remote, 0, sizeof(l->remote));
	memcpy(&l->remote.u, ai->ai_addr, ai->ai_addrlen);
	l->remote.len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

struct moq_cluster *moq_cluster_create(const struct moq_pmd_config *cfg, char *err, size_t errlen)
{
	char list[sizeof(cfg->cluster_connect)], *save = NULL, *tok;
	char token[LINK_PATH_MAX] = "";
	struct moq_cluster *c;

	err[0] = '\0';
	if (cfg->cluster_connect[0] == '\0')
		return NULL;
	if (cfg->cluster_token[0] != '\0' &&
	    read_token(cfg->cluster_token, token, sizeof(token), err, errlen) != 0)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		cfail(err, errlen, "--cluster-connect: out of memory");
		return NULL;
	}
	snprintf(list, sizeof(list), "%s", cfg->cluster_connect);
	for (tok = strtok_r(list, ", ", &save); tok != NULL; tok = strtok_r(NULL, ", ", &save)) {
		struct link *l;

		if (c->nb == MOQ_CLUSTER_MAX_LINKS) {
			cfail(err, errlen, "--cluster-connect: more than %d peers",
			      MOQ_CLUSTER_MAX_LINKS);
			goto fail;
		}
		l = &c->l[c->nb];
		l->c = c;
		l->ks.fd = -1;
		if (parse_url(l, tok, token, err, errlen) != 0)
			goto fail;
		c->nb++;
	}
	if (c->nb == 0) {
		cfail(err, errlen, "--cluster-connect: no peer URL");
		goto fail;
	}
	return c;
fail:
	free(c);
	return NULL;
}

void moq_cluster_set_io(struct moq_cluster *c, const struct moq_cluster_io *io)
{
	c->io = *io;
	c->has_io = 1;
}

int moq_cluster_input(struct moq_cluster *c, const uint8_t *data, size_t len,
                      const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                      uint64_t now)
{
	uint16_t port;
	struct link *l;

	if (c == NULL || !c->has_io ||
	    (local->u.sa.sa_family != AF_INET && local->u.sa.sa_family != AF_INET6))
		goto other;
	port = ntohs(local->u.sa.sa_family == AF_INET ? local->u.in4.sin_port
	                                              : local->u.in6.sin6_port);
	if (!moq_cluster_port(c->io.port_lo, c->nb, port))
		goto other;
	l = &c->l[(uint16_t)(port - c->io.port_lo)];
	if (l->ep == NULL || l->local.u.sa.sa_family != local->u.sa.sa_family)
		goto other;
	/* the link's own local address (the port's), whichever of ours the
	 * peer sent to */
	moq_quic_endpoint_recv(l->ep, data, len, &l->local, remote, now);
	return 0;
other:
	return MOQ_ERR_NOTFOUND;
}

int moq_cluster_attach(struct moq_cluster *c, struct moq_node *node,
                       const struct moq_pmd_config *cfg, char *err, size_t errlen)
{
	struct timespec ts;

	c->node = node;
	c->kb = calloc(1, moq_net_kbuf_size());
	if (c->kb == NULL)
		return cfail(err, errlen, "--cluster-connect: out of memory");
	moq_net_kbuf_init(c->kb, MOQ_NET_KIO_RX_MAX);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	c->rnd = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ moq_node_origin(node);
	if (c->rnd == 0)
		c->rnd = 1;
	for (unsigned int i = 0; i < c->nb; i++) {
		struct link *l = &c->l[i];
		struct moq_quic_config qc;
		struct moq_quic_addr any;
		socklen_t blen = sizeof(l->local.u);
		size_t nalpn;
		int qerr = 0;

		memset(&any, 0, sizeof(any));
		any.u.sa.sa_family = l->remote.u.sa.sa_family;
		any.len = l->remote.len;
		if (c->has_io) {
			/* the DPDK backend: the data port's address, the link's
			 * port of the range its network layer takes */
			uint16_t lport = (uint16_t)(c->io.port_lo + i);

			if (c->io.local_addr(c->io.ctx, &l->remote, &l->local) != 0)
				return cfail(err, errlen,
				             "--cluster-connect: %s: no --listen address of its "
				             "family (IPv%d) to dial from",
				             l->url, l->remote.u.sa.sa_family == AF_INET6 ? 6 : 4);
			if (l->local.u.sa.sa_family == AF_INET)
				l->local.u.in4.sin_port = htons(lport);
			else
				l->local.u.in6.sin6_port = htons(lport);
		} else if (moq_net_ksock_open(&l->ks, &any.u.sa, any.len, 0, 0, &l->local.u.sa,
		                              &blen) != 0) {
			/* the address the kernel uses: the wildcard, an
			 * ephemeral port */
			return cfail(err, errlen,
			             "--cluster-connect: %s: cannot open a UDP socket: %s", l->url,
			             strerror(errno));
		} else {
			l->local.len = blen;
		}
		memset(&qc, 0, sizeof(qc));
		qc.role = MOQ_QUIC_CLIENT;
		if (l->wt) { /* HTTP/3 only: the CONNECT picks the moq-lite version */
			static const char *const h3_alpns[] = {MOQ_H3_ALPN};

			qc.alpn = h3_alpns;
			qc.alpn_count = 1;
		} else {
			/* lite-06 first (routes with costs, draft 7.3), then 05,
			 * 04, 03: a peer without lite-06 keeps today's link */
			qc.alpn = moq_node_alpns_all(&nalpn);
			qc.alpn_count = nalpn;
		}
		qc.cb = moq_node_quic_callbacks();
		qc.user = node;
		/* SNI, and with a CA file the name the peer's certificate must
		 * carry (quic.h): --cluster-name, else the URL's host */
		qc.server_name = cfg->cluster_name[0] ? cfg->cluster_name : l->host;
		qc.ca_file = strcmp(cfg->cluster_ca, "insecure") == 0 ? NULL : cfg->cluster_ca;
		qc.max_conns = 4;
		qc.max_streams_uni = cfg->max_streams;
		qc.max_streams_bidi = cfg->max_streams;
		qc.idle_timeout_ns = LINK_IDLE_NS;
		qc.handshake_timeout_ns = LINK_HANDSHAKE_NS;
		qc.keep_alive_ns = LINK_KEEPALIVE_NS;
		qc.max_udp_payload = (size_t)cfg->mtu - 48 < MOQ_QUIC_MAX_UDP_PAYLOAD
		                             ? (size_t)cfg->mtu - 48
		                             : MOQ_QUIC_MAX_UDP_PAYLOAD;
		l->ep = moq_quic_endpoint_new(&qc, &qerr);
		if (l->ep == NULL)
			return cfail(
			        err, errlen, "--cluster-connect: %s: cannot set up QUIC (%s)%s",
			        l->url, moq_err_str(qerr),
			        qerr == MOQ_ERR_IO || qerr == MOQ_ERR_CRYPTO ? " (--cluster-ca)"
			                                                     : "");
		l->backoff_ns = BACKOFF_MIN_NS;
	}
	return 0;
}

/* The link's session ended (or never started): dial again after the
 * backoff (cluster.h). */
/* The link's current QUIC connection, NULL without. */
static struct moq_quic_conn *link_conn(const struct link *l)
{
	if (l->wt)
		return l->qc;
	return l->s != NULL ? moq_session_conn(l->s) : NULL;
}

static void link_down(struct link *l, uint64_t now)
{
	struct moq_quic_conn_info qi;

	if (link_conn(l) != NULL) {
		moq_quic_conn_get_info(link_conn(l), &qi);
		l->done_sent += qi.bytes_sent;
		l->done_recv += qi.bytes_recv;
	}
	if (l->state == MOQ_CLUSTER_UP && now - l->up_since >= BACKOFF_RESET_NS)
		l->backoff_ns = BACKOFF_MIN_NS;
	l->s = NULL;
	l->qc = NULL;
	l->ready_at = 0;
	SET(l->state, MOQ_CLUSTER_DOWN);
	SET(l->failures, l->failures + 1);
	SET(l->upstream_subs, 0);
	SET(l->rtt_ns, 0);
	/* jitter: 75..125 % of the backoff */
	l->next_try = now + l->backoff_ns / 4 * 3 + rnd_next(l->c) % (l->backoff_ns / 2 + 1);
	l->backoff_ns = l->backoff_ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : l->backoff_ns * 2;
}

static struct link *link_of(struct moq_cluster *c, struct moq_session *s)
{
	void *u = moq_session_user(s);

	for (unsigned int i = 0; c != NULL && i < c->nb; i++) {
		struct link *l = &c->l[i];

		if (u != l)
			continue;
		if (l->s == s)
			return l;
		/* https: the session began with the CONNECT's response, after
		 * the dial; it is the current attempt's while that is on */
		if (l->wt && l->s == NULL && l->qc != NULL &&
		    GET(l->state) == MOQ_CLUSTER_CONNECTING) {
			l->s = s;
			return l;
		}
	}
	return NULL;
}

static void on_ready(struct moq_session *s, void *user)
{
	struct link *l = link_of(user, s);

	if (l == NULL)
		return;
	l->ready_at = l->c->now ? l->c->now : 1;
	/* issue 22: the peer is held to what our token lets us do there (its
	 * announces under its get, its requests under its put) */
	if (strstr(l->path, "jwt=") != NULL &&
	    moq_session_peer_token(s, l->path, strlen(l->path)) != 0)
		fprintf(stderr,
		        "moqdp-relay: cluster: %s: the token's claims do not parse; the peer's "
		        "grants are not narrowed\n",
		        l->url);
	/* AUTH-CLUSTER.md: the subscribing side asks for every broadcast of
	 * the peer; the peer (a relay) asks for ours on its side. */
	if (moq_session_announce_request(s, "", 0) != 0)
		moq_session_close(s, 0);
}

static void on_closed(struct moq_session *s, void *user, uint64_t code, int local)
{
	struct link *l = link_of(user, s);

	(void)local;
	if (l == NULL)
		return;
	if (code != 0)
		fprintf(stderr, "moqdp-relay: cluster: %s: session closed (%" PRIu64 ")\n", l->url,
		        code);
	link_down(l, l->c->now);
}

const struct moq_node_callbacks *moq_cluster_node_callbacks(void)
{
	static const struct moq_node_callbacks cb = {
	        .session_ready = on_ready,
	        .session_closed = on_closed,
	};
	return &cb;
}

/* https: the attempt's connection ended before its session began
 * (handshake, certificate, CONNECT refused). */
static void wt_failed(void *user)
{
	struct link *l = user;

	if (l->qc == NULL || l->s != NULL || GET(l->state) != MOQ_CLUSTER_CONNECTING)
		return; /* not the current attempt's */
	fprintf(stderr, "moqdp-relay: cluster: %s: WebTransport session not established\n", l->url);
	link_down(l, l->c->now);
}

/* https: dial @l with ALPN h3 and CONNECT https://authority/path, the
 * moq-lite session on WebTransport (h3.h, as moqdp-load --transport wt). */
static int dial_wt(struct link *l, uint64_t now)
{
	char path[LINK_PATH_MAX + 2];
	int err = 0;

	snprintf(path, sizeof(path), "/%s", l->path);
	l->qc = moq_wt_dial(l->ep, &l->local, &l->remote, l->c->node, l->authority, path,
	                    MOQ_ROLE_BOTH, l, wt_failed, now, &err);
	return l->qc ? 0 : err;
}

static void dial(struct link *l, uint64_t now)
{
	int err = 0;

	SET(l->attempts, l->attempts + 1); /* after the first: reconnects */
	SET(l->state, MOQ_CLUSTER_CONNECTING);
	if (l->wt) {
		l->s = NULL;
		err = dial_wt(l, now);
		if (err != 0) {
			fprintf(stderr, "moqdp-relay: cluster: %s: cannot dial (%s)\n", l->url,
			        moq_err_str(err));
			link_down(l, now);
		}
		return;
	}
	l->s = moq_node_connect(l->c->node, l->ep, &l->local, &l->remote,
	                        l->path[0] ? l->path : NULL, MOQ_ROLE_BOTH, l, now, &err);
	if (l->s == NULL) {
		fprintf(stderr, "moqdp-relay: cluster: %s: cannot dial (%s)\n", l->url,
		        moq_err_str(err));
		link_down(l, now);
	}
}

static int link_poll(struct link *l, uint64_t now)
{
	struct moq_cluster *c = l->c;
	struct moq_net_kdgram d[MOQ_NET_KIO_BURST];
	int n, work = 0;

	n = c->has_io ? 0 : moq_net_krecv(c->kb, l->ks.fd, d);
	for (int i = 0; i < n; i++) {
		struct moq_quic_addr from;

		memset(&from, 0, sizeof(from));
		memcpy(&from.u, d[i].addr, d[i].addrlen);
		from.len = d[i].addrlen;
		moq_quic_endpoint_recv(l->ep, d[i].data, d[i].len, &l->local, &from, now);
	}
	work += n > 0 ? n : 0;
	if (now >= l->next_expiry)
		work += moq_quic_endpoint_timers(l->ep, now);
	if (l->state == MOQ_CLUSTER_DOWN && now >= l->next_try && !c->draining)
		dial(l, now);
	if (l->state == MOQ_CLUSTER_CONNECTING && l->s != NULL && l->ready_at &&
	    (moq_session_announce_requests(l->s) > 0 || now - l->ready_at >= LINK_ACCEPT_NS)) {
		SET(l->state, MOQ_CLUSTER_UP);
		l->up_since = now;
		SET(l->connects, l->connects + 1);
		SET(l->peer_origin, moq_session_peer_origin(l->s));
	}
	if (c->has_io) /* the DPDK backend's TX path (worker 0's) */
		work += moq_quic_endpoint_pending(l->ep) ? c->io.send(c->io.ctx, l->ep, now) : 0;
	for (int b = 0; b < 4 && !c->has_io && moq_quic_endpoint_pending(l->ep); b++) {
		struct moq_quic_pkt pk[MOQ_NET_KIO_BURST];
		struct moq_net_kdgram o[MOQ_NET_KIO_BURST];
		uint64_t gso = 0;
		int k;

		for (int i = 0; i < MOQ_NET_KIO_BURST; i++) {
			pk[i].data = c->tx[i];
			pk[i].cap = sizeof(c->tx[i]);
		}
		k = moq_quic_endpoint_send(l->ep, pk, MOQ_NET_KIO_BURST, now);
		if (k <= 0)
			break;
		for (int i = 0; i < k; i++) {
			o[i].data = pk[i].data;
			o[i].len = pk[i].len;
			o[i].addr = &pk[i].remote.u.sa;
			o[i].addrlen = pk[i].remote.len;
		}
		/* what the socket does not take is lost: QUIC sends it again */
		moq_net_ksend(c->kb, &l->ks, o, k, &gso);
		work += k;
		if (k < MOQ_NET_KIO_BURST)
			break;
	}
	l->next_expiry = moq_quic_endpoint_next_expiry(l->ep);
	if (now - l->last_info >= 100000000ull) { /* 10 Hz: the figures others read */
		struct moq_quic_conn *qc = link_conn(l);

		l->last_info = now;
		if (qc != NULL) {
			struct moq_quic_conn_info qi;

			moq_quic_conn_get_info(qc, &qi);
			SET(l->rtt_ns, qi.smoothed_rtt_ns);
			SET(l->bytes_sent, l->done_sent + qi.bytes_sent);
			SET(l->bytes_recv, l->done_recv + qi.bytes_recv);
			SET(l->upstream_subs, l->s ? moq_session_upstreams(l->s) : 0);
		} else {
			SET(l->bytes_sent, l->done_sent);
			SET(l->bytes_recv, l->done_recv);
		}
	}
	return work;
}

int moq_cluster_poll(struct moq_cluster *c, uint64_t now)
{
	int work = 0;

	c->now = now;
	for (unsigned int i = 0; i < c->nb; i++)
		work += link_poll(&c->l[i], now);
	return work;
}

int moq_cluster_drain(struct moq_cluster *c)
{
	int n = 0;

	if (c == NULL)
		return 0;
	c->draining = 1;
	for (unsigned int i = 0; i < c->nb; i++) {
		struct moq_quic_conn *qc = link_conn(&c->l[i]);

		/* RFC 9000, 10.2: CONNECTION_CLOSE, application code 0 */
		if (qc != NULL && moq_quic_conn_close(qc, 0, "relay draining") == 0)
			n++;
	}
	return n;
}

void moq_cluster_close(struct moq_cluster *c)
{
	if (c == NULL)
		return;
	for (unsigned int i = 0; i < c->nb; i++) {
		struct link *l = &c->l[i];

		moq_quic_endpoint_free(l->ep); /* closes the session (moq.h) */
		l->ep = NULL;
		l->s = NULL;
		l->qc = NULL;
		moq_net_ksock_close(&l->ks);
	}
}

void moq_cluster_destroy(struct moq_cluster *c)
{
	if (c == NULL)
		return;
	free(c->kb);
	free(c);
}

unsigned int moq_cluster_links(const struct moq_cluster *c)
{
	return c ? c->nb : 0;
}

int moq_cluster_link_info(const struct moq_cluster *c, unsigned int i,
                          struct moq_cluster_link_info *out)
{
	const struct link *l;

	if (c == NULL || i >= c->nb)
		return MOQ_ERR_INVAL;
	l = &c->l[i];
	memset(out, 0, sizeof(*out));
	snprintf(out->url, sizeof(out->url), "%s", l->url);
	out->state = GET(l->state);
	out->rtt_ns = GET(l->rtt_ns);
	out->upstream_subs = GET(l->upstream_subs);
	out->bytes_sent = GET(l->bytes_sent);
	out->bytes_recv = GET(l->bytes_recv);
	out->connects = GET(l->connects);
	out->failures = GET(l->failures);
	out->reconnects = GET(l->attempts);
	out->reconnects = out->reconnects ? out->reconnects - 1 : 0;
	out->peer_origin = GET(l->peer_origin);
	return 0;
}
