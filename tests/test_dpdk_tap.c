/* SPDX-License-Identifier: MIT */
/*
 * test_dpdk_tap.c: the relay's worker iteration on a real PMD (net_tap)
 * against the Linux kernel on the other side of the tap interface:
 *   - the kernel resolves us (ARP) and pings us (ICMP echo);
 *   - we resolve the kernel;
 *   - kernel UDP reaches the QUIC layer (its checksums verify); off-port
 *     datagrams and IP fragments are dropped and counted;
 *   - a QUIC handshake from a kernel-socket client completes (our UDP
 *     checksums verify in the kernel);
 *   - sustained ingest with a small pool: the pool's in-use count returns to
 *     its idle level after every iteration and rx_nombuf stays 0.
 * The kernel end of the tap lives in a network namespace the test creates
 * (moqdp-tap-<pid>): once the relay has started the port, the interface is
 * moved there (net_tap keeps its file descriptor) and its addresses are set
 * inside it, so the test's 10.213.x.x / 2001:db8:: subnet never appears in
 * the root namespace. Every kernel-side socket is opened in that namespace
 * (ns_socket: a thread that setns(2)es, since a socket stays in the
 * namespace it was created in); commands run with `ip -n` / `ip netns exec`.
 * Needs root (net_tap creates a kernel interface); the interface and the
 * namespace are removed at the end. Each wait is bounded.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* setns */
#endif
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "moq_err.h"
#include "net.h"
#include "proc.h"
#include "pmd_config.h"
#include "quic.h"
#include "relay.h"

static struct moq_relay *relay;
static char ifname[32], vdev[96];
static struct proc_netns ns = {.fd = -1}; /* the kernel end's namespace (proc.h) */
static uint8_t net_id;
static uint16_t tap_port;
static char kip[32], rip[32];   /* kernel side / relay side addresses */
static char kip6[48], rip6[48]; /* the same in IPv6 */

/* A socket in the kernel end's namespace (proc.h). */
static int ns_socket(int domain, int type, int protocol)
{
	int fd = proc_netns_socket(&ns, domain, type, protocol);

	ck_assert_msg(fd >= 0, "socket in namespace %s: %s", ns.name, strerror(errno));
	return fd;
}

static struct moq_net *rnet(void)
{
	return moq_relay_net(relay, 0, 0);
}

static void poll_for(unsigned int ms)
{
	uint64_t end = proc_now_ms() + ms;

	while (proc_now_ms() < end)
		moq_relay_poll(relay, 0);
}

static void setup(void)
{
	struct moq_pmd_config cfg;
	char err[MOQ_CFG_ERR_MAX], arg[128];
	char *argv[16];
	int argc = 0;

	snprintf(ifname, sizeof(ifname), "moqt%d", (int)getpid() % 100000);
	snprintf(vdev, sizeof(vdev), "net_tap_t%d", (int)getpid() % 100000);
	net_id = (uint8_t)(20 + getpid() % 200);
	snprintf(kip, sizeof(kip), "10.213.%u.1", net_id);
	snprintf(rip, sizeof(rip), "10.213.%u.2", net_id);
	snprintf(kip6, sizeof(kip6), "2001:db8:%x::1", net_id);
	snprintf(rip6, sizeof(rip6), "2001:db8:%x::2", net_id);
	ck_assert_int_eq(proc_netns_create(&ns, "moqdp-tap"), 0);
	{
		char args[64];

		snprintf(args, sizeof(args), "iface=%s", ifname);
		ck_assert_int_eq(rte_eal_hotplug_add("vdev", vdev, args), 0);
	}
	ck_assert_int_eq(rte_eth_dev_get_port_by_name(vdev, &tap_port), 0);

	argv[argc++] = "--listen";
	snprintf(arg, sizeof(arg), "%s/24,%s/64", rip, rip6);
	argv[argc++] = arg;
	argv[argc++] = "--portmask";
	{
		static char mask[24];

		snprintf(mask, sizeof(mask), "%llx", 1ull << tap_port);
		argv[argc++] = mask;
	}
	argv[argc++] = "--mgmt";
	argv[argc++] = "";
	argv[argc++] = "--stats-interval";
	argv[argc++] = "0";
	/* a deliberately small pool: 512 RX descriptors + 512 spare */
	argv[argc++] = "--rx-desc";
	argv[argc++] = "512";
	argv[argc++] = "--pool-mbufs";
	argv[argc++] = "1024";
	ck_assert_int_eq(moq_pmd_config_parse(&cfg, argc, argv, (char *[]){NULL}, err, sizeof(err)),
	                 0);
	relay = moq_relay_create(&cfg, err, sizeof(err));
	ck_assert_msg(relay != NULL, "relay: %s", err);
	ck_assert_uint_eq(moq_relay_port_id(relay, 0), tap_port);
	/* the kernel side, moved into the namespace once the port is started
	 * (net_tap brings the interface up by name in the root namespace):
	 * an address on the subnet, and up */
	ck_assert_int_eq(proc_sh("ip link set %s netns %s", ifname, ns.name), 0);
	ck_assert_int_eq(proc_sh("ip -n %s addr add %s/24 dev %s && ip -n %s link set %s up",
	                         ns.name, kip, ifname, ns.name, ifname),
	                 0);
	proc_sh("ip netns exec %s sysctl -qw net.ipv6.conf.%s.disable_ipv6=0 >/dev/null 2>&1",
	        ns.name, ifname);
	ck_assert_int_eq(proc_sh("ip -n %s -6 addr add %s/64 dev %s nodad", ns.name, kip6, ifname),
	                 0);
	/* nothing of it is left in the root namespace */
	ck_assert_int_ne(proc_sh("ip link show %s >/dev/null 2>&1", ifname), 0);
	ck_assert_int_ne(proc_sh("ip -o addr show to %s | grep -q .", kip), 0);
}

static void teardown(void)
{
	moq_relay_destroy(relay);
	relay = NULL;
	rte_eal_hotplug_remove("vdev", vdev); /* closes the tap: the interface goes */
	proc_sh("ip -n %s link del %s >/dev/null 2>&1", ns.name, ifname);
	proc_netns_delete(&ns);
}

/* ICMP checksum (RFC 1071). */
static uint16_t csum(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

START_TEST(kernel_pings_relay)
{
	struct sockaddr_in to = {.sin_family = AF_INET};
	uint8_t req[64] = {8, 0, 0, 0, 0x4d, 0x51, 0, 1}, buf[256];
	int fd = ns_socket(AF_INET, SOCK_RAW | SOCK_NONBLOCK, IPPROTO_ICMP), got = 0;
	uint64_t end;
	uint16_t c;

	ck_assert_int_ge(fd, 0);
	inet_pton(AF_INET, rip, &to.sin_addr);
	for (int i = 8; i < 64; i++)
		req[i] = (uint8_t)i;
	c = csum(req, sizeof(req));
	req[2] = (uint8_t)(c >> 8);
	req[3] = (uint8_t)c;
	ck_assert_int_eq(sendto(fd, req, sizeof(req), 0, (struct sockaddr *)&to, sizeof(to)), 64);
	for (end = proc_now_ms() + 3000; !got && proc_now_ms() < end;) {
		ssize_t n;

		moq_relay_poll(relay, 0);
		n = recv(fd, buf, sizeof(buf), 0);
		/* IPv4 header (20) + ICMP: an echo reply with our id, seq and data */
		if (n == 20 + 64 && buf[20] == 0 && buf[24] == 0x4d && buf[25] == 0x51 &&
		    memcmp(buf + 28, req + 8, 56) == 0 && csum(buf + 20, 64) == 0)
			got = 1;
	}
	close(fd);
	ck_assert_msg(got, "no echo reply from the relay");
	ck_assert_uint_ge(rnet()->stats.rx_arp, 1); /* the kernel asked for our MAC */
	ck_assert_uint_ge(rnet()->stats.rx_echo, 1);
	ck_assert_uint_ge(rnet()->stats.tx_replies, 2); /* ARP reply + echo reply */
}
END_TEST

START_TEST(kernel_pings_relay_v6)
{
	struct sockaddr_in6 to = {.sin6_family = AF_INET6};
	uint8_t req[40] = {128, 0, 0, 0, 0x36, 0x36, 0, 2}, buf[256];
	int fd = ns_socket(AF_INET6, SOCK_RAW | SOCK_NONBLOCK, IPPROTO_ICMPV6), got = 0;
	struct moq_net_stats before = rnet()->stats;
	uint64_t end;

	ck_assert_int_ge(fd, 0);
	inet_pton(AF_INET6, rip6, &to.sin6_addr);
	for (int i = 8; i < 40; i++)
		req[i] = (uint8_t)(i * 3);
	/* the kernel fills in the ICMPv6 checksum of raw ICMPv6 sockets */
	ck_assert_int_eq(sendto(fd, req, sizeof(req), 0, (struct sockaddr *)&to, sizeof(to)), 40);
	for (end = proc_now_ms() + 4000; !got && proc_now_ms() < end;) {
		ssize_t n;

		moq_relay_poll(relay, 0);
		n = recv(fd, buf, sizeof(buf), 0); /* ICMPv6 without the IPv6 header */
		if (n == 40 && buf[0] == 129 && buf[4] == 0x36 && buf[5] == 0x36 &&
		    memcmp(buf + 8, req + 8, 32) == 0)
			got = 1;
	}
	close(fd);
	ck_assert_msg(got, "no ICMPv6 echo reply from the relay");
	/* the kernel had to solicit our MAC first (RFC 4861) */
	ck_assert_uint_gt(rnet()->stats.rx_nd, before.rx_nd);
	ck_assert_uint_gt(rnet()->stats.rx_echo, before.rx_echo);
	ck_assert_uint_ge(rnet()->stats.tx_replies, before.tx_replies + 2); /* NA + echo reply */
	/* and UDP over IPv6 reaches the QUIC layer, its checksum verified */
	{
		struct sockaddr_in6 u = {.sin6_family = AF_INET6, .sin6_port = htons(4443)};
		uint8_t d[1200] = {0};
		int ufd = ns_socket(AF_INET6, SOCK_DGRAM, 0);

		u.sin6_addr = to.sin6_addr;
		before = rnet()->stats;
		ck_assert_int_eq(sendto(ufd, d, sizeof(d), 0, (struct sockaddr *)&u, sizeof(u)),
		                 1200);
		close(ufd);
		for (end = proc_now_ms() + 2000;
		     rnet()->stats.rx_udp == before.rx_udp && proc_now_ms() < end;)
			moq_relay_poll(relay, 0);
		ck_assert_uint_eq(rnet()->stats.rx_udp, before.rx_udp + 1);
		ck_assert_uint_eq(rnet()->stats.drop[MOQ_NET_DROP_UDP_CSUM], 0);
	}
}
END_TEST

START_TEST(relay_resolves_kernel)
{
	uint8_t ip[4], mac[6], req[128], kmac[6];
	size_t req_len = 0;
	struct rte_mbuf *m;
	char cmd[160];
	FILE *f;
	int rc = MOQ_ERR_AGAIN;
	uint64_t end;

	inet_pton(AF_INET, kip, ip);
	/* the interface's sysfs is the namespace's: read it from inside */
	snprintf(cmd, sizeof(cmd), "ip netns exec %s cat /sys/class/net/%s/address", ns.name,
	         ifname);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &kmac[0], &kmac[1], &kmac[2],
	                        &kmac[3], &kmac[4], &kmac[5]),
	                 6);
	pclose(f);
	for (end = proc_now_ms() + 3000; rc != 0 && proc_now_ms() < end;) {
		rc = moq_net_resolve(rnet(), 4, ip, (uint64_t)proc_now_ms() * 1000000, mac, req,
		                     sizeof(req), &req_len);
		if (req_len > 0) {
			m = rte_pktmbuf_alloc(moq_relay_pool(relay, 0));
			ck_assert_ptr_nonnull(m);
			memcpy(rte_pktmbuf_append(m, (uint16_t)req_len), req, req_len);
			ck_assert_uint_eq(rte_eth_tx_burst(tap_port, 0, &m, 1), 1);
		}
		moq_relay_poll(relay, 0);
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(memcmp(mac, kmac, 6), 0);
}
END_TEST

static int udp_to_relay(uint16_t port, const uint8_t *data, size_t len)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
	int fd = ns_socket(AF_INET, SOCK_DGRAM, 0);
	ssize_t n;

	inet_pton(AF_INET, rip, &to.sin_addr);
	n = sendto(fd, data, len, 0, (struct sockaddr *)&to, sizeof(to));
	close(fd);
	return (int)n;
}

/* Our software UDP checksum, judged by the kernel: a datagram built with
 * moq_net_udp_build (no offload) arrives at a kernel socket; the same with
 * one checksum bit flipped does not. */
START_TEST(software_udp_to_kernel)
{
	struct sockaddr_in la = {.sin_family = AF_INET};
	socklen_t alen = sizeof(la);
	uint8_t kb[4], mac[6], req[128], pl[300], buf[512];
	size_t req_len;
	int fd = ns_socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0), got = 0;
	const struct moq_net_iface *ifc = rnet()->iface;
	uint64_t end;

	inet_pton(AF_INET, kip, kb);
	inet_pton(AF_INET, kip, &la.sin_addr);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&la, sizeof(la)), 0);
	getsockname(fd, (struct sockaddr *)&la, &alen);
	for (end = proc_now_ms() + 3000; proc_now_ms() < end;) {
		if (moq_net_resolve(rnet(), 4, kb, (uint64_t)proc_now_ms() * 1000000, mac, req,
		                    sizeof(req), &req_len) == 0)
			break;
		if (req_len > 0) {
			struct rte_mbuf *m = rte_pktmbuf_alloc(moq_relay_pool(relay, 0));

			memcpy(rte_pktmbuf_append(m, (uint16_t)req_len), req, req_len);
			ck_assert_uint_eq(rte_eth_tx_burst(tap_port, 0, &m, 1), 1);
		}
		moq_relay_poll(relay, 0);
	}
	for (int i = 0; i < 300; i++)
		pl[i] = (uint8_t)(i * 13 + 1);
	for (int bad = 0; bad < 2; bad++) {
		struct rte_mbuf *m = rte_pktmbuf_alloc(moq_relay_pool(relay, 0));
		uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, 42 + 300);
		int hl = moq_net_udp_build(ifc, f, 4, mac, kb, 4443, ntohs(la.sin_port), 0, pl, 300,
		                           0);

		ck_assert_int_eq(hl, 42);
		memcpy(f + 42, pl, 300);
		if (bad)
			f[40] ^= 0x01;
		ck_assert_uint_eq(rte_eth_tx_burst(tap_port, 0, &m, 1), 1);
		got = 0;
		for (end = proc_now_ms() + 500; !got && proc_now_ms() < end;) {
			ssize_t n = recv(fd, buf, sizeof(buf), 0);

			got = n == 300 && memcmp(buf, pl, 300) == 0;
			usleep(1000);
		}
		ck_assert_int_eq(got, !bad);
	}
	close(fd);
}
END_TEST

START_TEST(kernel_udp_in)
{
	static uint8_t d[3000];
	struct moq_net_stats before;
	uint64_t end;

	/* make sure the kernel knows us, then take a baseline */
	udp_to_relay(4443, d, 100);
	poll_for(300);
	before = rnet()->stats;
	ck_assert_int_eq(udp_to_relay(4443, d, 1200), 1200); /* a QUIC-sized datagram */
	ck_assert_int_eq(udp_to_relay(9, d, 50), 50);        /* another port */
	/* 3000 bytes on a 1500 MTU link: the kernel fragments it (DF clear) */
	{
		struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(4443)};
		int fd = ns_socket(AF_INET, SOCK_DGRAM, 0), pmtu = IP_PMTUDISC_DONT;

		setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
		inet_pton(AF_INET, rip, &to.sin_addr);
		ck_assert_int_eq(sendto(fd, d, sizeof(d), 0, (struct sockaddr *)&to, sizeof(to)),
		                 3000);
		close(fd);
	}
	for (end = proc_now_ms() + 2000; proc_now_ms() < end;) {
		moq_relay_poll(relay, 0);
		if (rnet()->stats.rx_udp > before.rx_udp &&
		    rnet()->stats.drop[MOQ_NET_DROP_UDP_PORT] >
		            before.drop[MOQ_NET_DROP_UDP_PORT] &&
		    rnet()->stats.drop[MOQ_NET_DROP_IP4_FRAG] >=
		            before.drop[MOQ_NET_DROP_IP4_FRAG] + 2)
			break;
	}
	ck_assert_uint_eq(rnet()->stats.rx_udp, before.rx_udp + 1);
	ck_assert_uint_eq(rnet()->stats.rx_udp_bytes, before.rx_udp_bytes + 1200);
	ck_assert_uint_eq(rnet()->stats.drop[MOQ_NET_DROP_UDP_PORT],
	                  before.drop[MOQ_NET_DROP_UDP_PORT] + 1);
	ck_assert_uint_eq(rnet()->stats.drop[MOQ_NET_DROP_IP4_FRAG],
	                  before.drop[MOQ_NET_DROP_IP4_FRAG] + 3); /* 1480 + 1480 + 48 */
	ck_assert_uint_eq(rnet()->stats.drop[MOQ_NET_DROP_UDP_CSUM], 0);
}
END_TEST

/* QUIC client over a kernel socket, for the handshake test. */
static int established;

static int on_established(struct moq_quic_conn *c, void *user, const char *alpn)
{
	(void)c;
	(void)user;
	established = strcmp(alpn, "moq-lite-05") == 0 ? 1 : -1;
	return 0;
}

/* _i == 0: IPv4, 1: IPv6 */
START_TEST(quic_handshake_over_tap)
{
	static const char *const alpn[] = {"moq-lite-05"};
	static const struct moq_quic_callbacks cb = {.established = on_established};
	struct moq_quic_config qc = {0};
	struct moq_quic_endpoint *cl;
	struct moq_quic_addr local, remote;
	socklen_t alen = sizeof(local.u);
	uint8_t buf[2048], pkt_buf[8][1500];
	struct moq_quic_pkt pk[8];
	struct moq_relay_stats st;
	int v6 = _i, fd, err = 0;
	uint64_t end, conns0;

	moq_relay_stats(relay, &st);
	conns0 = st.conns_total;
	qc.role = MOQ_QUIC_CLIENT;
	qc.alpn = alpn;
	qc.alpn_count = 1;
	qc.cb = &cb;
	cl = moq_quic_endpoint_new(&qc, &err);
	ck_assert_msg(cl != NULL, "client endpoint: %s", moq_err_str(err));
	memset(&local, 0, sizeof(local));
	memset(&remote, 0, sizeof(remote));
	if (v6) {
		local.u.in6.sin6_family = AF_INET6;
		inet_pton(AF_INET6, kip6, &local.u.in6.sin6_addr);
		remote.u.in6.sin6_family = AF_INET6;
		remote.u.in6.sin6_port = htons(4443);
		inet_pton(AF_INET6, rip6, &remote.u.in6.sin6_addr);
		remote.len = sizeof(remote.u.in6);
	} else {
		local.u.in4.sin_family = AF_INET;
		inet_pton(AF_INET, kip, &local.u.in4.sin_addr);
		remote.u.in4.sin_family = AF_INET;
		remote.u.in4.sin_port = htons(4443);
		inet_pton(AF_INET, rip, &remote.u.in4.sin_addr);
		remote.len = sizeof(remote.u.in4);
	}
	fd = ns_socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	ck_assert_int_eq(bind(fd, &local.u.sa, v6 ? sizeof(local.u.in6) : sizeof(local.u.in4)), 0);
	getsockname(fd, &local.u.sa, &alen);
	local.len = alen;
	established = 0;
	ck_assert_ptr_nonnull(moq_quic_connect(cl, &local, &remote, NULL,
	                                       (uint64_t)proc_now_ms() * 1000000, &err));
	for (end = proc_now_ms() + 5000; established == 0 && proc_now_ms() < end;) {
		uint64_t t = (uint64_t)proc_now_ms() * 1000000;
		int n;
		ssize_t r;

		for (int i = 0; i < 8; i++) {
			pk[i].data = pkt_buf[i];
			pk[i].cap = sizeof(pkt_buf[i]);
		}
		n = moq_quic_endpoint_send(cl, pk, 8, t);
		for (int i = 0; i < n; i++)
			sendto(fd, pk[i].data, pk[i].len, 0, &pk[i].remote.u.sa, pk[i].remote.len);
		moq_relay_poll(relay, 0);
		while ((r = recv(fd, buf, sizeof(buf), 0)) > 0)
			moq_quic_endpoint_recv(cl, buf, (size_t)r, &local, &remote, t);
		moq_quic_endpoint_timers(cl, t);
	}
	ck_assert_msg(established == 1, "no handshake over IPv%d", v6 ? 6 : 4);
	poll_for(150); /* the workers publish endpoint counters at 10 Hz */
	moq_relay_stats(relay, &st);
	ck_assert_uint_eq(st.conns_total, conns0 + 1);
	ck_assert_uint_ge(st.tx_pkts, 2);
	moq_quic_endpoint_free(cl);
	close(fd);
}
END_TEST

/* Sustained ingest: a kernel thread sends datagrams as fast as it can. */
static volatile int sender_done;
static unsigned long sender_sent;

static void *sender(void *arg)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(4443)};
	uint8_t d[1200];
	int fd = ns_socket(AF_INET, SOCK_DGRAM, 0);
	uint64_t end = proc_now_ms() + 1500;

	(void)arg;
	memset(d, 0x40, sizeof(d)); /* short header, fixed bit: unknown DCID to QUIC */
	inet_pton(AF_INET, rip, &to.sin_addr);
	while (proc_now_ms() < end && sender_sent < 30000) {
		if (sendto(fd, d, sizeof(d), 0, (struct sockaddr *)&to, sizeof(to)) == sizeof(d))
			sender_sent++;
		if (sender_sent % 64 == 0)
			usleep(200); /* let the single shared core poll too */
	}
	close(fd);
	sender_done = 1;
	return NULL;
}

START_TEST(mbuf_recycling)
{
	struct rte_mempool *pool = moq_relay_pool(relay, 0);
	struct rte_eth_stats es;
	pthread_t th;
	unsigned int idle, iters = 0, busy_iters = 0, worst = 0;
	uint64_t rx0, end;

	udp_to_relay(4443, (const uint8_t *)"warm", 4); /* ARP done before the baseline */
	poll_for(300);
	idle = rte_mempool_in_use_count(pool);
	rx0 = rnet()->stats.rx_udp;
	ck_assert_uint_eq(rte_mempool_avail_count(pool) + idle, 1024);
	sender_done = 0;
	sender_sent = 0;
	ck_assert_int_eq(pthread_create(&th, NULL, sender, NULL), 0);
	for (end = proc_now_ms() + 5000; proc_now_ms() < end;) {
		int work = moq_relay_poll(relay, 0);
		unsigned int used = rte_mempool_in_use_count(pool);

		iters++;
		busy_iters += work > 0;
		if (used != idle && used - idle > worst)
			worst = used - idle;
		ck_assert_msg(used == idle, "iteration %u: %u mbufs in use, idle level %u", iters,
		              used, idle);
		if (sender_done && work == 0) {
			poll_for(100);
			break;
		}
	}
	pthread_join(th, NULL);
	ck_assert_int_eq(rte_eth_stats_get(tap_port, &es), 0);
	ck_assert_uint_eq(es.rx_nombuf, 0);
	ck_assert_uint_eq(rte_mempool_in_use_count(pool), idle);
	ck_assert_uint_gt(rnet()->stats.rx_udp - rx0, 1000);
	fprintf(stderr,
	        "mbuf_recycling: sent %lu, received %" PRIu64 " datagrams in %u iterations "
	        "(%u busy); pool 1024, idle in-use %u, max above idle %u, rx_nombuf %" PRIu64 "\n",
	        sender_sent, rnet()->stats.rx_udp - rx0, iters, busy_iters, idle, worst,
	        es.rx_nombuf);
}
END_TEST

Suite *dpdk_tap_suite(void);

Suite *dpdk_tap_suite(void)
{
	Suite *s = suite_create("dpdk_tap");
	TCase *tc = tcase_create("tap");

	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, kernel_pings_relay);
	tcase_add_test(tc, kernel_pings_relay_v6);
	tcase_add_test(tc, relay_resolves_kernel);
	tcase_add_test(tc, software_udp_to_kernel);
	tcase_add_test(tc, kernel_udp_in);
	tcase_add_loop_test(tc, quic_handshake_over_tap, 0, 2);
	tcase_add_test(tc, mbuf_recycling);
	suite_add_tcase(s, tc);
	return s;
}
