/* SPDX-License-Identifier: MIT */
/*
 * fuzz_quic_endpoint: arbitrary datagrams into a server endpoint that has one
 * live connection (real ngtcp2 + wolfSSL handshake over the in-memory link).
 * The first input byte picks the shape: raw bytes, a short header carrying
 * the live connection's CID, or a long header of QUIC v1 / an unknown
 * version. Checks, beside the sanitizers: every reply written to an address
 * the server never validated is at most 3x the datagram that caused it
 * (RFC 9000, 8.1), and the live connection survives (a bad packet is
 * dropped, not fatal).
 */
#include "quic.h"
#include "link.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct moq_quic_endpoint *srv, *cli;
static struct moq_quic_link *lnk;
static struct moq_quic_addr caddr, saddr, stranger;
static struct moq_quic_conn *cconn;
static int est_c, est_s, closed;
static uint8_t live_cid[MOQ_QUIC_CID_LEN];

static int on_est(struct moq_quic_conn *c, void *user, const char *alpn)
{
	(void)c;
	(void)alpn;
	if (user == (void *)1)
		est_s = 1;
	else
		est_c = 1;
	return 0;
}

static void on_closed(struct moq_quic_conn *c, void *user, const struct moq_quic_close_info *i)
{
	(void)c;
	(void)i;
	if (user == (void *)2)
		closed = 1;
}

static const struct moq_quic_callbacks cbs = {.established = on_est, .conn_closed = on_closed};

static int both(void *arg)
{
	(void)arg;
	return est_c && est_s;
}

/* Learn the server's CID from the first short-header packet it sends. */
static int grab_cid(void *arg, int dir, uint8_t *data, size_t *len, uint64_t now)
{
	int *got = arg;

	(void)now;
	if (dir == 1 && !*got && *len > 1 + MOQ_QUIC_CID_LEN && !(data[0] & 0x80)) {
		memcpy(live_cid, data + 1, MOQ_QUIC_CID_LEN);
		*got = 1;
	}
	return 0;
}

static struct moq_quic_addr addr4(const char *ip, uint16_t port)
{
	struct moq_quic_addr a;

	moq_quic_addr_ip4(ip, port, &a);
	return a;
}

static void init(void)
{
	static const char *const alpn[] = {"moq-lite-05"};
	struct moq_quic_config sc, cc;
	int got = 0;

	memset(&sc, 0, sizeof(sc));
	sc.role = MOQ_QUIC_SERVER;
	sc.worker_id = 1;
	sc.alpn = alpn;
	sc.alpn_count = 1;
	sc.retry = MOQ_QUIC_RETRY_NEVER;
	sc.max_conns = 64;
	sc.idle_timeout_ns = 3600ull * 1000000000;
	sc.cb = &cbs;
	sc.user = (void *)1;
	cc = sc;
	cc.role = MOQ_QUIC_CLIENT;
	cc.user = (void *)2;
	srv = moq_quic_endpoint_new(&sc, NULL);
	cli = moq_quic_endpoint_new(&cc, NULL);
	lnk = moq_quic_link_new(NULL, cli, srv);
	caddr = addr4("10.0.0.1", 1000);
	saddr = addr4("10.0.0.2", 443);
	stranger = addr4("10.9.9.9", 5555);
	if (!srv || !cli || !lnk)
		abort();
	cconn = moq_quic_connect(cli, &caddr, &saddr, NULL, moq_quic_link_now(lnk), NULL);
	moq_quic_link_set_filter(lnk, grab_cid, &got);
	if (cconn == NULL || moq_quic_link_run(lnk, both, NULL, 5ull * 1000000000) != 0)
		abort();
	moq_quic_link_run(lnk, NULL, NULL, 200000000ull);
	moq_quic_link_set_filter(lnk, NULL, NULL);
	if (!got)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t pkt[1500];
	struct moq_quic_pkt out[MOQ_QUIC_BURST];
	static uint8_t bufs[MOQ_QUIC_BURST][1500];
	size_t len = 0;
	uint64_t now;
	int n, i;

	if (srv == NULL)
		init();
	if (size < 1 || size > 1400)
		return 0;
	switch (data[0] & 3) {
	case 0: /* raw */
		memcpy(pkt, data + 1, size - 1);
		len = size - 1;
		break;
	case 1: /* short header, live CID */
		pkt[0] = 0x40 | (data[0] & 0x3c);
		memcpy(pkt + 1, live_cid, MOQ_QUIC_CID_LEN);
		memcpy(pkt + 1 + MOQ_QUIC_CID_LEN, data + 1, size - 1);
		len = 1 + MOQ_QUIC_CID_LEN + size - 1;
		break;
	case 2: /* long header, v1 */
	case 3: /* long header, unknown version (padded like an Initial) */
		pkt[0] = 0xc0 | (data[0] & 0x3c);
		pkt[1] = 0;
		pkt[2] = 0;
		pkt[3] = 0;
		pkt[4] = (data[0] & 3) == 2 ? 1 : 0x1a;
		memcpy(pkt + 5, data + 1, size - 1);
		len = 5 + size - 1;
		if ((data[0] & 3) == 3 && len < 1200) {
			memset(pkt + len, 0, 1200 - len);
			len = 1200;
		}
		break;
	}
	if (len == 0)
		return 0;
	now = moq_quic_link_now(lnk);
	/* from an address the server has never seen: stateless replies only */
	moq_quic_endpoint_recv(srv, pkt, len, &saddr, &stranger, now);
	for (i = 0; i < MOQ_QUIC_BURST; i++) {
		out[i].data = bufs[i];
		out[i].cap = sizeof(bufs[i]);
	}
	do {
		n = moq_quic_endpoint_send(srv, out, MOQ_QUIC_BURST, now);
		for (i = 0; i < n; i++) {
			/* RFC 9000, 8.1 */
			if (out[i].remote.u.in4.sin_addr.s_addr == stranger.u.in4.sin_addr.s_addr &&
			    out[i].len > 3 * len) {
				fprintf(stderr, "amplification: %zu bytes for %zu\n", out[i].len,
				        len);
				abort();
			}
		}
	} while (n == MOQ_QUIC_BURST);
	/* the same bytes also reach the server from the live client's address */
	moq_quic_endpoint_recv(srv, pkt, len, &saddr, &caddr, now);
	moq_quic_link_run(lnk, NULL, NULL, 1000000ull);
	if (closed) {
		fprintf(stderr, "a stray datagram closed the live connection\n");
		abort();
	}
	return 0;
}
