/* SPDX-License-Identifier: MIT */
/*
 * ietf_run.c: moqdp-load --protocol ietf-NN (ietf_run.h): loadgen/ietf.c's
 * publisher and subscribers on kernel UDP sockets (net/'s kernel I/O), the
 * media of media.h (one track), JSON lines of moq_lg_report_json each
 * second and a final one, as moqdp-load's moq-lite mode writes them
 * (scripts/bench-fanout reads subs_ready and the counts).
 */
#include "ietf_run.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "ietf.h"
#include "ietf_codec.h"
#include "moq_err.h"
#include "net.h"

#define TX_BATCH 64
#define MAX_SOCKS 256

struct run {
	const struct moq_lg_ietf_run_cfg *cfg;
	struct moq_quic_endpoint *ep;
	struct moq_lg_ietf *lg;
	struct moq_net_ksock socks[MAX_SOCKS];
	unsigned nsocks, last; /* last: the socket sock_of found last */
	int epfd;
	struct moq_net_kbuf *kb;
	uint64_t rx_pkts, tx_pkts, rx_bytes, tx_bytes, tx_drops;
	struct moq_lg_hist hist;
	struct moq_lg_gen gen;
	uint8_t *fbuf;
	uint32_t connected;
	uint64_t *t_conn; /* per subscriber: when it connected */
	uint64_t pub_frames, pub_bytes, pub_groups;
};

static int addr_eq(const struct moq_quic_addr *a, const struct moq_quic_addr *b)
{
	if (a->u.sa.sa_family != b->u.sa.sa_family)
		return 0;
	if (a->u.sa.sa_family == AF_INET6)
		return a->u.in6.sin6_port == b->u.in6.sin6_port &&
		       !memcmp(&a->u.in6.sin6_addr, &b->u.in6.sin6_addr, 16);
	return a->u.in4.sin_port == b->u.in4.sin_port &&
	       a->u.in4.sin_addr.s_addr == b->u.in4.sin_addr.s_addr;
}

/* The socket bound to local address @l (address and port: an IPv6 /128
 * is one address on every socket); nsocks when none. */
static unsigned sock_of(struct run *r, const struct moq_quic_addr *l)
{
	if (r->last < r->nsocks && addr_eq(&r->cfg->locals[r->last], l))
		return r->last;
	for (unsigned i = 0; i < r->nsocks; i++)
		if (addr_eq(&r->cfg->locals[i], l))
			return r->last = i;
	return r->nsocks;
}

static void rx_all(struct run *r, unsigned i)
{
	struct moq_net_kdgram d[MOQ_NET_KIO_BURST];

	for (;;) {
		int n = moq_net_krecv(r->kb, r->socks[i].fd, d);
		uint64_t now = moq_lg_now_ns();
		for (int j = 0; j < n; j++) {
			struct moq_quic_addr remote;
			memset(&remote, 0, sizeof(remote));
			remote.len = d[j].addrlen <= sizeof(remote.u) ? d[j].addrlen
			                                              : (socklen_t)sizeof(remote.u);
			memcpy(&remote.u, d[j].addr, remote.len);
			moq_quic_endpoint_recv(r->ep, d[j].data, d[j].len, &r->cfg->locals[i], &remote,
			                       now);
			r->rx_bytes += d[j].len;
		}
		r->rx_pkts += n > 0 ? (uint64_t)n : 0;
		if (n < MOQ_NET_KIO_BURST)
			break;
	}
}

static void tx_all(struct run *r)
{
	static uint8_t bufs[TX_BATCH][MOQ_QUIC_MAX_UDP_PAYLOAD];
	struct moq_quic_pkt pkts[TX_BATCH];

	for (int round = 0; round < 16 && moq_quic_endpoint_pending(r->ep); round++) {
		int n, j = 0;
		for (int k = 0; k < TX_BATCH; k++) {
			pkts[k].data = bufs[k];
			pkts[k].cap = sizeof(bufs[k]);
		}
		n = moq_quic_endpoint_send(r->ep, pkts, TX_BATCH, moq_lg_now_ns());
		if (n <= 0)
			break;
		while (j < n) {
			unsigned s = sock_of(r, &pkts[j].local);
			struct moq_net_kdgram d[MOQ_NET_KIO_BURST];
			int m = 0, sent;
			while (j + m < n && m < MOQ_NET_KIO_BURST &&
			       (m == 0 || addr_eq(&pkts[j + m].local, &pkts[j].local))) {
				d[m].data = pkts[j + m].data;
				d[m].len = pkts[j + m].len;
				d[m].addr = &pkts[j + m].remote.u.sa;
				d[m].addrlen = pkts[j + m].remote.len;
				r->tx_bytes += pkts[j + m].len;
				m++;
			}
			sent = s < r->nsocks ? moq_net_ksend(r->kb, &r->socks[s], d, m, NULL) : 0;
			r->tx_pkts += (uint64_t)sent;
			r->tx_drops += (uint64_t)(m - sent);
			j += m;
		}
		if (n < TX_BATCH)
			break;
	}
}

static void report(struct run *r, uint64_t now, uint64_t t0, int final, struct moq_lg_report *out,
                   struct moq_lg_ietf_counts *ic)
{
	memset(out, 0, sizeof(*out));
	moq_lg_ietf_counts(r->lg, ic, &out->c, final);
	out->t_s = (double)(now - t0) / 1e9;
	out->subs_target = r->cfg->subscribers;
	out->subs_connected = r->connected;
	out->subs_ready = ic->subs_ok;
	out->subs_closed = ic->subs_closed;
	out->pub_frames = ic->pub_objects;
	out->pub_bytes = ic->pub_bytes;
	out->pub_groups = ic->pub_groups;
	out->hist = &r->hist;
	out->rx_bytes_wire = r->rx_bytes;
	out->tx_bytes_wire = r->tx_bytes;
	out->rx_pkts = r->rx_pkts;
	out->tx_pkts = r->tx_pkts;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The median handshake (connect to established) of the subscribers, us. */
static double handshake_p50_us(struct run *r)
{
	uint64_t *v = malloc(sizeof(*v) * (r->cfg->subscribers + 1));
	size_t n = 0;
	double p = 0;

	if (!v)
		return 0;
	for (uint32_t i = 0; i < r->cfg->subscribers; i++) {
		uint64_t e = moq_lg_ietf_sub_established(r->lg, i);
		if (e && r->t_conn[i] && e >= r->t_conn[i])
			v[n++] = e - r->t_conn[i];
	}
	if (n) {
		qsort(v, n, sizeof(*v), cmp_u64);
		p = (double)v[n / 2] / 1e3;
	}
	free(v);
	return p;
}

static void json_line(struct run *r, FILE *f, const struct moq_lg_report *rep,
                      const struct moq_lg_report *prev, const struct moq_lg_ietf_counts *ic,
                      int final)
{
	char buf[4096];
	int n = moq_lg_report_json(rep, prev, buf, sizeof(buf));

	if (!f || n <= 1)
		return;
	buf[n - 1] = 0;
	fprintf(f,
	        "%s,\"protocol\":\"%s\",\"subs_failed\":%" PRIu64 ",\"subs_stalled\":0"
	        ",\"handshake_p50_us\":%.1f,\"wire_rx_bytes\":%" PRIu64
	        ",\"sub_refused\":%" PRIu64 ",\"ietf_errors\":%" PRIu64 ",\"tx_drops\":%" PRIu64
	        "%s}\n",
	        buf, moq_ietf_alpn((enum moq_ietf_draft)r->cfg->draft), ic->subs_closed,
	        final ? handshake_p50_us(r) : 0.0, rep->rx_bytes_wire, ic->subs_refused,
	        ic->errors, r->tx_drops, final ? ",\"final\":true" : "");
	fflush(f);
}

int moq_lg_ietf_run(const struct moq_lg_ietf_run_cfg *cfg, volatile sig_atomic_t *quit,
                    volatile sig_atomic_t *mark)
{
	struct run r;
	struct moq_lg_ietf_cfg ic = {0};
	struct moq_quic_config qc = {0};
	const char *alpn[1];
	struct moq_lg_report rep, prev;
	struct moq_lg_ietf_counts cnt;
	FILE *json = NULL;
	uint64_t t0, next_tick, next_open, end, stop_at = 0, warm;
	uint32_t next_sub = 0;
	int have_prev = 0, rc = 1, err = 0, pub_started = 0;

	memset(&r, 0, sizeof(r));
	r.cfg = cfg;
	r.epfd = -1;
	if (cfg->nlocals > MAX_SOCKS || !cfg->nlocals)
		return 2;
	moq_lg_hist_reset(&r.hist);
	ic.draft = cfg->draft;
	ic.subscribers = cfg->subscribers;
	snprintf(ic.broadcast, sizeof(ic.broadcast), "%s", cfg->broadcast);
	snprintf(ic.track, sizeof(ic.track), "%s", cfg->track.name);
	ic.verify = 1;
	ic.track_id = cfg->track.id;
	ic.hist = &r.hist;
	ic.use_publish = cfg->use_publish;
	r.lg = moq_lg_ietf_new(&ic);
	alpn[0] = moq_ietf_alpn((enum moq_ietf_draft)cfg->draft);
	qc.role = MOQ_QUIC_CLIENT;
	qc.alpn = alpn;
	qc.alpn_count = 1;
	qc.max_conns = cfg->subscribers + 16;
	qc.max_half_open = cfg->subscribers + 16;
	qc.max_conns_per_addr = cfg->subscribers + 16;
	qc.max_streams_uni = 10000;
	qc.cb = moq_lg_ietf_callbacks();
	r.ep = r.lg ? moq_quic_endpoint_new(&qc, &err) : NULL;
	r.fbuf = malloc(MOQ_LG_FRAME_MAX);
	r.kb = calloc(1, moq_net_kbuf_size());
	r.t_conn = calloc(cfg->subscribers + 1, sizeof(*r.t_conn));
	r.epfd = epoll_create1(0);
	if (!r.lg || !r.ep || !r.fbuf || !r.kb || !r.t_conn || r.epfd < 0) {
		fprintf(stderr, "moqdp-load: --protocol: set-up failed: %s\n", moq_err_str(err));
		goto out;
	}
	for (unsigned i = 0; i < cfg->nlocals; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
		socklen_t sl = cfg->locals[i].len;
		if (moq_net_ksock_open(&r.socks[i], &cfg->locals[i].u.sa, cfg->locals[i].len, 0,
		                       4 << 20, &cfg->locals[i].u.sa, &sl) < 0) {
			fprintf(stderr, "moqdp-load: bind local address %u failed\n", i);
			goto out;
		}
		r.nsocks++;
		epoll_ctl(r.epfd, EPOLL_CTL_ADD, r.socks[i].fd, &ev);
	}
	if (cfg->json[0]) {
		json = !strcmp(cfg->json, "-") ? stdout : fopen(cfg->json, "w");
		if (!json) {
			fprintf(stderr, "moqdp-load: --json %s: cannot open\n", cfg->json);
			goto out;
		}
	}
	t0 = moq_lg_now_ns();
	next_tick = t0 + 1000000000ull;
	next_open = t0;
	end = cfg->duration_s > 0 ? t0 + (uint64_t)(cfg->duration_s * 1e9) : UINT64_MAX;
	warm = cfg->warmup_s > 0 ? t0 + (uint64_t)(cfg->warmup_s * 1e9) : 0;
	if (cfg->publish && moq_lg_ietf_connect(r.lg, r.ep, -1, &cfg->locals[0], &cfg->relay, t0) < 0)
		goto out;
	fprintf(stderr,
	        "moqdp-load: kernel mode, %s, %s%u subscriber(s) at %.0f/s, broadcast '%s', "
	        "track %s\n",
	        alpn[0], cfg->publish ? "publisher + " : "", cfg->subscribers, cfg->ramp_per_s,
	        cfg->broadcast, cfg->track.name);
	for (;;) {
		uint64_t now = moq_lg_now_ns();
		struct epoll_event evs[64];
		int ne, timeout = 1;

		if ((*quit || now >= end) && !stop_at) {
			report(&r, now, t0, 1, &rep, &cnt);
			json_line(&r, json, &rep, NULL, &cnt, 1);
			{
				uint64_t errs = moq_lg_counts_errors(&rep.c) + cnt.errors;
				fprintf(stderr,
				        "moqdp-load: summary after %.1f s (%s)\n"
				        "  publisher   %" PRIu64 " objects, %" PRIu64 " groups\n"
				        "  subscribers %" PRIu64 " of %u subscribed, %" PRIu64
				        " refused, %" PRIu64 " closed\n"
				        "  delivered   %" PRIu64 " objects verified (%.2f MB), %" PRIu64
				        " groups complete, %" PRIu64 " reset, %" PRIu64 " missing\n"
				        "  errors      %" PRIu64 "\n"
				        "  latency     p50 %.3f ms, p99 %.3f ms\n",
				        rep.t_s, alpn[0], cnt.pub_objects, cnt.pub_groups, cnt.subs_ok,
				        cfg->subscribers, cnt.subs_refused, cnt.subs_closed,
				        rep.c.frames_ok, (double)rep.c.bytes_ok / 1e6, rep.c.groups_ok,
				        rep.c.groups_reset, rep.c.groups_missing, errs,
				        (double)moq_lg_hist_pct(&r.hist, 50) / 1e6,
				        (double)moq_lg_hist_pct(&r.hist, 99) / 1e6);
				if (cnt.subs_closed)
					fprintf(stderr,
					        "  last close  code 0x%" PRIx64 " by the %s (%s)\n",
					        cnt.close_code,
					        cnt.close_local ? "client" : "relay",
					        cnt.close_what ? cnt.close_what : "-");
				rc = errs || (cfg->subscribers && (!rep.c.frames_ok ||
				                                   cnt.subs_ok < cfg->subscribers))
				             ? 1
				             : 0;
			}
			moq_lg_ietf_close(r.lg);
			stop_at = now + 300000000ull;
		}
		if (stop_at && now >= stop_at)
			break;
		if ((warm && now >= warm) || *mark) {
			moq_lg_hist_reset(&r.hist);
			warm = 0;
			*mark = 0;
		}
		/* the ramp: one subscriber per 1/ramp s, each from its local
		 * address (conns_per_addr to an address, after the publisher's) */
		while (!stop_at && next_sub < cfg->subscribers && now >= next_open &&
		       (!cfg->publish || moq_lg_ietf_pub_announced(r.lg))) {
			unsigned li = 1 + next_sub / cfg->conns_per_addr;
			if (li >= cfg->nlocals)
				li = cfg->nlocals - 1;
			moq_lg_ietf_set_now(r.lg, now);
			r.t_conn[next_sub] = now;
			if (moq_lg_ietf_connect(r.lg, r.ep, (int)next_sub, &cfg->locals[li],
			                        &cfg->relay, now) == 0)
				r.connected++;
			next_sub++;
			next_open = cfg->ramp_per_s > 0 ? next_open + (uint64_t)(1e9 / cfg->ramp_per_s)
			                                : now;
		}
		/* the publisher's due objects, once the relay subscribed */
		if (cfg->publish && !stop_at && moq_lg_ietf_pub_ready(r.lg)) {
			if (!pub_started) {
				moq_lg_gen_init(&r.gen, &cfg->track, now, 0);
				pub_started = 1;
			}
			while (moq_lg_gen_next(&r.gen) <= now) {
				struct moq_lg_frame_info fi;
				int n = moq_lg_gen_frame(&r.gen, now, r.fbuf, MOQ_LG_FRAME_MAX, &fi);
				if (n < 0)
					break;
				if (moq_lg_ietf_pub_object(r.lg, fi.group, fi.index, r.fbuf,
				                           (size_t)n, fi.last) < 0)
					break;
			}
		}
		if (!moq_quic_endpoint_pending(r.ep)) {
			uint64_t w = moq_quic_endpoint_next_expiry(r.ep);
			uint64_t ms = w <= now ? 0 : (w - now) / 1000000 + 1; /* w may be UINT64_MAX */
			timeout = ms > 5 ? 5 : (int)ms;
		} else {
			timeout = 0;
		}
		ne = epoll_wait(r.epfd, evs, 64, timeout);
		moq_lg_ietf_set_now(r.lg, moq_lg_now_ns());
		for (int i = 0; i < ne; i++)
			rx_all(&r, evs[i].data.u32);
		now = moq_lg_now_ns();
		moq_quic_endpoint_timers(r.ep, now);
		tx_all(&r);
		if (now >= next_tick && !stop_at) {
			report(&r, now, t0, 0, &rep, &cnt);
			json_line(&r, json, &rep, have_prev ? &prev : NULL, &cnt, 0);
			prev = rep;
			have_prev = 1;
			next_tick += 1000000000ull;
		}
	}
out:
	if (json && json != stdout)
		fclose(json);
	if (r.ep)
		moq_quic_endpoint_free(r.ep);
	moq_lg_ietf_free(r.lg);
	for (unsigned i = 0; i < r.nsocks; i++)
		moq_net_ksock_close(&r.socks[i]);
	if (r.epfd >= 0)
		close(r.epfd);
	free(r.kb);
	free(r.fbuf);
	free(r.t_conn);
	return rc;
}
