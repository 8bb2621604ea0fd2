/* SPDX-License-Identifier: MIT */
/*
 * kernel.c: the kernel-socket backend (io.h). Each worker binds its own UDP
 * socket to the listen address with SO_REUSEPORT (the kernel spreads flows
 * by 4-tuple, as RSS does), reads and writes bursts of 32 with recvmmsg /
 * sendmmsg (net.h's kernel I/O) and runs the same QUIC endpoint as the DPDK
 * path. A datagram whose CID names another worker is copied into an mbuf
 * and sent to that worker's ring, as on DPDK.
 *
 * With --tcp 1 each worker also listens on TCP --port of the same addresses
 * (web.h: HTTP/1.1, TLS, the WebSocket qmux binding), polled from the same
 * loop after the moq node (epoll, timeout 0): a TCP subscriber's sessions
 * live on the worker's node like its QUIC ones.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "moq_err.h"
#include "moq.h"
#include "web.h"
#include "net.h"
#include "pmd_port.h"
#include "quic.h"
#include "relay.h"
#include "io.h"
#include "h3.h"

/* A socket that did not take a whole burst is asked again after this long
 * (a syscall per retry, not one per loop iteration; the DPDK path waits
 * ~2 us for a full TX ring, a send buffer drains at the kernel's pace). */
#define KSEND_RETRY_NS 20000ull

/* A worker's kernel-socket state (relay_io.priv). */
struct relay_kernel {
	/* this worker's SO_REUSEPORT sockets, one per --listen address */
	struct moq_net_ksock ks[MOQ_CFG_MAX_LISTEN];
	struct moq_quic_addr klocal[MOQ_CFG_MAX_LISTEN]; /* their bound addresses */
	unsigned int nb_ks;
	struct moq_net_kbuf *kb; /* its receive / send bursts (net.h) */
	uint64_t next_expiry;
	/* Backpressure, as on the DPDK path: what the socket did not take
	 * (EAGAIN: its send buffer is full) is held, in order, and sent
	 * first; no new QUIC packets are made while any is held (dropping
	 * them cost a loss, a retransmission and a cwnd cut each). The held
	 * datagrams' bytes stay in tx[] (not reused meanwhile). */
	struct moq_net_kdgram held[MOQ_PMD_BURST];
	struct moq_quic_addr held_to[MOQ_PMD_BURST];
	uint8_t held_sock[MOQ_PMD_BURST]; /* the socket each goes out of */
	int nheld;
	uint64_t retry_ns; /* held: no send before this */
	uint8_t tx[MOQ_PMD_BURST][MOQ_QUIC_MAX_UDP_PAYLOAD];
	struct relay_web web; /* --tcp (io.h) */
};

/* A redirected datagram: this header, then the payload, in one mbuf. */
struct kdgram {
	struct moq_quic_addr local, remote;
	uint16_t len;
};

/* --tcp: the worker's TCP listener on --port of every --listen address
 * (the same addresses as UDP), TLS with the endpoint's certificate. The
 * DPDK backend's exception port (exc.c) uses it too. */
int moq_relay_web_open(struct relay_io *io, struct relay_web *k, const struct moq_pmd_config *cfg,
                       char *err, size_t errlen)
{
	struct moq_quic_addr a[MOQ_CFG_MAX_LISTEN];
	struct moq_web_cfg wc;
	uint8_t fp[32];

	memset(&wc, 0, sizeof(wc));
	for (unsigned int i = 0; i < cfg->nb_listen && i < MOQ_CFG_MAX_LISTEN; i++) {
		moq_relay_addr_from(&a[i], cfg->listen[i].family == AF_INET ? 4 : 6,
		                    cfg->listen[i].addr, cfg->udp_port);
		wc.addr[i] = &a[i].u.sa;
		wc.addrlen[i] = a[i].len;
		wc.naddr = i + 1;
	}
	k->web_tls = moq_web_tls_ctx_new(moq_quic_tls_wolfssl_ctx(io->tls));
	k->web_cert = io->tls;
	if (k->web_tls == NULL) {
		snprintf(err, errlen, "--tcp: cannot make a TLS context from the certificate");
		return MOQ_ERR_CRYPTO;
	}
	moq_quic_tls_fingerprint(io->tls, fp);
	wc.node = io->node;
	wc.cache = io->cache;
	wc.auth = io->auth;
	wc.max_conns = cfg->max_tcp_conns;
	wc.fingerprint = fp;
	wc.tls_ctx = k->web_tls;
	wc.static_dir = cfg->web_root[0] ? cfg->web_root : NULL;
	wc.allowed_origins = cfg->allowed_origins[0] ? cfg->allowed_origins : NULL;
	wc.metrics = moq_relay_metrics_text; /* /status/metrics (mgmt.h) */
	wc.metrics_arg = io->relay;
	wc.port_must_be_free = io->id == 0; /* (workers open in order) */
	k->web = moq_web_create(&wc, err, errlen);
	return k->web != NULL ? 0 : MOQ_ERR_IO;
}

/* SIGHUP: new TLS connections get the new certificate (relay.c moved
 * io->tls); the old context stays with the connections made from it. */
static void web_cert_follow(struct relay_io *io, struct relay_web *k)
{
	void *t;
	uint8_t fp[32];

	if (io->tls == k->web_cert)
		return;
	k->web_cert = io->tls;
	t = moq_web_tls_ctx_new(moq_quic_tls_wolfssl_ctx(io->tls));
	if (t == NULL)
		return; /* keep serving the old one */
	moq_quic_tls_fingerprint(io->tls, fp);
	moq_web_set_tls(k->web, t, fp);
	moq_web_tls_ctx_free(k->web_tls); /* wolfSSL counts the connections' references */
	k->web_tls = t;
}

int moq_relay_web_poll(struct relay_io *w, struct relay_web *kb, uint64_t now)
{
	struct moq_web_stats ws;
	int work;

	if (kb->web == NULL)
		return 0;
	web_cert_follow(w, kb);
	work = moq_web_poll(kb->web, now);
	/* TCP bytes count in the worker's rx / tx bytes (egress in the
	 * stats line, /metrics, bench-fanout's ws case) */
	moq_web_stats(kb->web, &ws);
	w->st->rx_bytes += ws.bytes_in - kb->web_in;
	w->st->tx_bytes += ws.bytes_out - kb->web_out;
	kb->web_in = ws.bytes_in;
	kb->web_out = ws.bytes_out;
	w->st->tcp_conns = ws.conns;
	w->st->tcp_conns_total = ws.conns_total;
	w->st->tcp_refused = ws.conns_refused;
	w->st->ws_sessions = ws.ws_sessions;
	w->st->ws_protocol_closes = ws.closes_protocol;
	w->st->tcp_closes_slow = ws.closes_slow;
	w->st->web_fetches = ws.fetches;
	w->st->web_fetches_refused = ws.fetches_refused;
	w->st->ws_refused_origin = ws.refused_origin;
	return work;
}

int moq_relay_web_drain(struct relay_web *k, int close)
{
	return k->web != NULL ? moq_web_drain(k->web, close) : 0;
}

void moq_relay_web_close(struct relay_web *k)
{
	moq_web_destroy(k->web); /* ends its sessions (moq_binding_closed) */
	moq_web_tls_ctx_free(k->web_tls);
	memset(k, 0, sizeof(*k));
}

/* Whether another process holds UDP @sa: a bind without SO_REUSEPORT
 * fails with EADDRINUSE (ours share the port with SO_REUSEPORT, and so
 * would another relay's, the kernel splitting the flows between the two
 * without a word). Asked before this process binds the address. */
static bool udp_port_taken(const struct sockaddr *sa, socklen_t len)
{
	int fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool taken;

	if (fd < 0)
		return false; /* (the bind that follows reports it) */
	taken = bind(fd, sa, len) != 0 && errno == EADDRINUSE;
	close(fd);
	return taken;
}

static int kernel_open(struct relay_io *io, const struct moq_pmd_config *cfg, char *err,
                       size_t errlen)
{
	/* the largest datagram --mtu carries (IPv4: 20 + 8 bytes of headers),
	 * at least MOQ_NET_KIO_RX_MAX; a longer one is dropped and counted
	 * (net.h, moq_net_krecv), never handed to QUIC cut */
	size_t rx_max = cfg->mtu > 28 ? (size_t)cfg->mtu - 28 : 0;
	struct relay_kernel *k;

	if (rx_max < MOQ_NET_KIO_RX_MAX)
		rx_max = MOQ_NET_KIO_RX_MAX;
	k = rte_zmalloc("moqdp_kbuf", sizeof(*k), RTE_CACHE_LINE_SIZE);
	if (k != NULL)
		k->kb = rte_malloc("moqdp_kbuf", moq_net_kbuf_size_for(rx_max),
		                   RTE_CACHE_LINE_SIZE);
	if (k == NULL || k->kb == NULL) {
		rte_free(k);
		snprintf(err, errlen, "worker %u: out of memory", io->id);
		return MOQ_ERR_NOMEM;
	}
	moq_net_kbuf_init(k->kb, rx_max);
	io->priv = k;
	for (unsigned int i = 0; i < cfg->nb_listen && i < MOQ_CFG_MAX_LISTEN; i++) {
		const struct moq_cfg_addr *a = &cfg->listen[i];
		struct moq_quic_addr bind_to;
		socklen_t len = sizeof(k->klocal[i].u);
		char ip[INET6_ADDRSTRLEN];

		moq_relay_addr_from(&bind_to, a->family == AF_INET ? 4 : 6, a->addr, cfg->udp_port);
		/* the first worker binds first (moq_relay_create opens them in
		 * order): the port must be free of other processes; the other
		 * workers then share it with SO_REUSEPORT */
		if (io->id == 0 && cfg->udp_port != 0 &&
		    udp_port_taken(&bind_to.u.sa, bind_to.len)) {
			snprintf(
			        err, errlen,
			        "--port: UDP %s port %u is in use by another process (the kernel "
			        "backend binds with SO_REUSEPORT: the two would split its traffic)",
			        inet_ntop(a->family, a->addr, ip, sizeof(ip)) ? ip : "?",
			        cfg->udp_port);
			return MOQ_ERR_IO;
		}
		if (moq_net_ksock_open(&k->ks[i], &bind_to.u.sa, bind_to.len,
		                       MOQ_NET_KSOCK_REUSEPORT | MOQ_NET_KSOCK_GSO, 0,
		                       &k->klocal[i].u.sa, &len) != 0) {
			snprintf(err, errlen, "--listen/--port: cannot bind UDP %s port %u: %s",
			         inet_ntop(a->family, a->addr, ip, sizeof(ip)) ? ip : "?",
			         cfg->udp_port, strerror(errno));
			return MOQ_ERR_IO;
		}
		k->klocal[i].len = len;
		k->nb_ks = i + 1;
	}
	if (cfg->tcp) {
		io->web = &k->web;
		return moq_relay_web_open(io, &k->web, cfg, err, errlen);
	}
	return 0;
}

static void kernel_close(struct relay_io *io)
{
	struct relay_kernel *k = io->priv;

	if (k == NULL)
		return;
	io->web = NULL;
	moq_relay_web_close(&k->web);
	for (unsigned int i = 0; i < k->nb_ks; i++)
		moq_net_ksock_close(&k->ks[i]);
	rte_free(k->kb);
	rte_free(k);
	io->priv = NULL;
}

static void from_sockaddr(struct moq_quic_addr *a, const struct sockaddr_storage *ss)
{
	memset(a, 0, sizeof(*a));
	if (ss->ss_family == AF_INET) {
		memcpy(&a->u.in4, ss, sizeof(a->u.in4));
		a->len = sizeof(a->u.in4);
	} else {
		memcpy(&a->u.in6, ss, sizeof(a->u.in6));
		a->len = sizeof(a->u.in6);
	}
}

static void kdeliver(struct relay_io *w, const uint8_t *data, size_t len,
                     const struct moq_quic_addr *local, const struct moq_quic_addr *remote,
                     uint64_t now, int may_redirect)
{
	struct rte_mbuf *m;
	struct kdgram *k;
	int rc, t;

	rc = moq_quic_endpoint_recv(w->ep, data, len, local, remote, now);
	if (rc != MOQ_ERR_NOTFOUND)
		return;
	t = moq_quic_pkt_worker(data, len);
	if (!may_redirect || t < 0 || (unsigned int)t >= w->nb_workers ||
	    (unsigned int)t == w->id) {
		w->st->redirect_drops++;
		return;
	}
	m = rte_pktmbuf_alloc(w->pool);
	if (m == NULL || len + sizeof(*k) > rte_pktmbuf_tailroom(m)) {
		rte_pktmbuf_free(m);
		w->st->redirect_drops++;
		return;
	}
	k = (struct kdgram *)rte_pktmbuf_append(m, (uint16_t)(sizeof(*k) + len));
	k->local = *local;
	k->remote = *remote;
	k->len = (uint16_t)len;
	memcpy(k + 1, data, len);
	if (rte_ring_mp_enqueue(w->rings[t], m) != 0) {
		rte_pktmbuf_free(m);
		w->st->redirect_drops++;
		return;
	}
	w->st->redirected++;
}

/* The socket bound to @local (a connection's local address, as its
 * datagrams arrived: klocal[]). */
static unsigned int ksock_of(const struct relay_kernel *kb, const struct moq_quic_addr *local)
{
	for (unsigned int i = 1; i < kb->nb_ks; i++) {
		const struct moq_quic_addr *b = &kb->klocal[i];

		if (b->u.sa.sa_family != local->u.sa.sa_family)
			continue;
		if (b->u.sa.sa_family == AF_INET
		            ? b->u.in4.sin_addr.s_addr == local->u.in4.sin_addr.s_addr
		            : memcmp(&b->u.in6.sin6_addr, &local->u.in6.sin6_addr, 16) == 0)
			return i;
	}
	return 0;
}

/* moq_net_ksend on the socket of each datagram (@si[]), in runs of one
 * socket; stops at the first run not sent whole (errno from that call).
 * Returns the datagrams sent, the first ones of @d. */
static int ksend_socks(struct relay_kernel *kb, const struct moq_net_kdgram *d, const uint8_t *si,
                       int k, uint64_t *gso_msgs)
{
	int sent = 0;

	while (sent < k) {
		unsigned int s = si[sent];
		int run = 1, n;

		while (sent + run < k && si[sent + run] == s)
			run++;
		errno = 0;
		n = moq_net_ksend(kb->kb, &kb->ks[s], &d[sent], run, gso_msgs);
		if (n < 0)
			n = 0;
		sent += n;
		if (n < run)
			break;
	}
	return sent;
}

/* The socket will take it later: its send buffer is full (EAGAIN), the
 * device queue is (ENOBUFS), GSO was just turned off (EIO, net.h). */
static int send_later(int e)
{
	return e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS || e == EINTR || e == EIO;
}

/*
 * Send @d[0..@n) (the held datagrams, or a new burst) with one sendmmsg
 * (net.h, moq_net_ksend: a run of datagrams to one peer of equal size goes
 * down as one UDP GSO message where the kernel takes it) and hold what the
 * socket did not take (destinations copied). A datagram the kernel refuses
 * for good (EMSGSIZE, EPERM, ...) is dropped and counted, so it cannot hold
 * the worker up. Returns the datagrams sent.
 */
static int kxmit(struct relay_io *w, struct relay_kernel *kb, const struct moq_net_kdgram *d,
                 const uint8_t *si, int n, uint64_t now)
{
	struct moq_net_kdgram keep[MOQ_PMD_BURST];
	struct moq_quic_addr keep_to[MOQ_PMD_BURST];
	uint8_t keep_si[MOQ_PMD_BURST];
	int sent, skip, e;

	sent = ksend_socks(kb, d, si, n, &w->st->gso_msgs);
	e = errno;
	for (int x = 0; x < sent; x++) {
		w->st->tx_pkts++;
		w->st->tx_bytes += d[x].len;
	}
	skip = sent;
	kb->retry_ns = 0;
	if (sent == 0 && n > 0 && !send_later(e)) {
		w->st->tx_drops++; /* this one: the rest right after */
		skip = 1;
	} else if (sent < n) {
		w->st->tx_ring_full++;
		kb->retry_ns = now + KSEND_RETRY_NS;
	}
	for (int i = skip; i < n; i++) { /* @d may be kb->held: copy first */
		keep[i - skip] = d[i];
		keep_si[i - skip] = si[i];
		memcpy(&keep_to[i - skip].u, d[i].addr, d[i].addrlen);
	}
	kb->nheld = n - skip;
	for (int i = 0; i < kb->nheld; i++) {
		kb->held[i] = keep[i];
		kb->held_to[i] = keep_to[i];
		kb->held_sock[i] = keep_si[i];
		kb->held[i].addr = &kb->held_to[i].u.sa;
	}
	return sent;
}

/* Make a burst of QUIC packets and send it (kxmit). Only with nothing held. */
static int ksend(struct relay_io *w, struct relay_kernel *kb, uint64_t now)
{
	struct moq_quic_pkt pk[MOQ_PMD_BURST];
	struct moq_net_kdgram d[MOQ_PMD_BURST];
	uint8_t si[MOQ_PMD_BURST];
	int k;

	for (int i = 0; i < MOQ_PMD_BURST; i++) {
		pk[i].data = kb->tx[i];
		pk[i].cap = sizeof(kb->tx[i]);
	}
	k = moq_quic_endpoint_send(w->ep, pk, MOQ_PMD_BURST, now);
	if (k <= 0)
		return 0;
	for (int i = 0; i < k; i++) {
		d[i].data = pk[i].data;
		d[i].len = pk[i].len;
		d[i].addr = &pk[i].remote.u.sa;
		d[i].addrlen = pk[i].remote.len;
		si[i] = (uint8_t)ksock_of(kb, &pk[i].local);
	}
	kxmit(w, kb, d, si, k, now);
	return k;
}

static int kernel_poll(struct relay_io *w, uint64_t now)
{
	struct relay_kernel *kb = w->priv;
	struct moq_net_kdgram d[MOQ_NET_KIO_BURST];
	struct rte_mbuf *mb[MOQ_PMD_BURST];
	int n, work = 0;

	for (unsigned int s = 0; s < kb->nb_ks; s++) {
		n = moq_net_krecv(kb->kb, kb->ks[s].fd, d);
		if (n > 1) {
			/* the burst's connections load together (quic.h,
			 * moq_quic_endpoint_prefetch), as on the DPDK side */
			const void *hint[MOQ_NET_KIO_BURST];

			for (int i = 0; i < n; i++)
				hint[i] = NULL;
			for (int st = 0; st < MOQ_QUIC_PREFETCH_STAGES; st++)
				for (int i = 0; i < n; i++)
					moq_quic_endpoint_prefetch(w->ep, d[i].data, d[i].len, st,
					                           &hint[i]);
		}
		for (int i = 0; i < n; i++) {
			struct moq_quic_addr remote;

			w->st->rx_pkts++;
			w->st->rx_bytes += d[i].len;
			from_sockaddr(&remote, (const struct sockaddr_storage *)d[i].addr);
			kdeliver(w, d[i].data, d[i].len, &kb->klocal[s], &remote, now, 1);
		}
		work += n > 0 ? n : 0;
	}
	w->st->rx_truncated = moq_net_kbuf_truncated(kb->kb);
	n = (int)rte_ring_sc_dequeue_burst(w->ring, (void **)mb, MOQ_PMD_BURST, NULL);
	for (int i = 0; i < n; i++) {
		const struct kdgram *k = rte_pktmbuf_mtod(mb[i], const struct kdgram *);

		w->st->redirected_in++;
		kdeliver(w, (const uint8_t *)(k + 1), k->len, &k->local, &k->remote, now, 0);
		rte_pktmbuf_free(mb[i]);
	}
	work += n;
	if (now >= kb->next_expiry)
		work += moq_quic_endpoint_timers(w->ep, now);
	/* fanout: pending subscriber data, expiry resets (moq.h) */
	work += moq_node_poll(w->node, now);
	moq_wt_timers(now); /* CONNECTs held for SETTINGS (h3.h) */
	/* the TCP side after the node: what fanout queued goes out now */
	work += moq_relay_web_poll(w, &kb->web, now);
	/* what the socket did not take first; new packets only once it did */
	if (kb->nheld > 0 && now >= kb->retry_ns)
		work += kxmit(w, kb, kb->held, kb->held_sock, kb->nheld, now);
	for (int b = 0; b < 4 && kb->nheld == 0 && moq_quic_endpoint_pending(w->ep); b++) {
		int k = ksend(w, kb, now);

		work += k;
		if (k < MOQ_PMD_BURST)
			break;
	}
	kb->next_expiry = moq_quic_endpoint_next_expiry(w->ep);
	/* relay-added latency (moq.h): what this iteration wrote is sent */
	if (moq_node_latency_pending(w->node) != 0)
		moq_node_latency_commit(w->node, moq_relay_clock_ns(w->relay));
	return work;
}

const struct relay_io_ops moq_relay_kernel_ops = {
        .name = "kernel",
        .open = kernel_open,
        .poll = kernel_poll,
        .close = kernel_close,
};
