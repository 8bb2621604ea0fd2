/* SPDX-License-Identifier: MIT */
/*
 * exc.c: the DPDK backend's exception port (--tcp 1, docs/DEPLOY.md
 * section 14). The data port's NIC belongs to DPDK, so the kernel never
 * sees TCP to the relay's address. The relay creates a net_tap vdev
 * (rte_eal_hotplug_add, kernel interface "moqx<pid>") with the data port's
 * MAC and brings its kernel side up with the port's --listen IPv4 and
 * IPv6 addresses (ioctl SIOCSIFADDR / SIOCSIFNETMASK / SIOCSIFFLAGS; the
 * IPv6 one without duplicate address detection: it is the relay's). Workers
 * hand it the received frames to our addresses that moq_net did not take
 * and that the relay's TCP side needs: TCP to the relay's own ports
 * (--port, and the --mgmt port when that listener is bound to the data
 * address or to 0.0.0.0), ICMP / ICMPv6 the relay does not answer (errors
 * for those flows), and ARP and neighbour solicitations / advertisements
 * concerning our addresses, so the kernel resolves its neighbours itself. TCP to any other port is dropped and counted (exc_refused):
 * whatever else listens on the relay host (sshd, a test's http.server)
 * stays unreachable from the data network. What the kernel writes on the
 * tap goes out of the data port. Each worker binds its TCP listener (web.h,
 * SO_REUSEPORT) on that address and polls it as the kernel backend does;
 * the kernel spreads the tap's flows over one queue pair per worker.
 *
 * Fast-path cost: none on a UDP frame (handle_frame tests the verdict it
 * already tests); one test of exc_port on every frame moq_net did not
 * deliver, and the tap's RX queue and the TCP listener are polled at most
 * every EXC_POLL_NS while idle (a syscall each).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "moq_err.h"
#include "pmd_port.h"
#include "relay_int.h"

/* An idle exception port / TCP listener is polled again after this long;
 * one that did work at once. */
#define EXC_POLL_NS 100000ull
#define EXC_DESC    256

static int efail(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
	snprintf(err, errlen, fmt, a, b);
	return MOQ_ERR_CONFIG;
}

/* linux/ipv6.h's struct in6_ifreq (glibc has none): SIOCSIFADDR on an
 * AF_INET6 socket */
struct exc_in6_ifreq {
	struct in6_addr addr;
	uint32_t prefixlen;
	int ifindex;
};

static void exc_sysctl(const char *ifname, const char *what, const char *v)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/%s", ifname, what);
	f = fopen(path, "w");
	if (f != NULL) {
		fputs(v, f);
		fclose(f);
	}
}

/* The kernel side's IPv6 address: on, no DAD (the address is the relay's;
 * a tentative one cannot be bound), no autoconfiguration from RAs. */
static int exc_ifup6(const char *ifname, const uint8_t ip6[16], unsigned int prefix, char *err,
                     size_t errlen)
{
	struct exc_in6_ifreq r6;
	int fd, rc = 0;

	exc_sysctl(ifname, "disable_ipv6", "0");
	exc_sysctl(ifname, "accept_dad", "0");
	exc_sysctl(ifname, "accept_ra", "0");
	exc_sysctl(ifname, "autoconf", "0");
	fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return efail(err, errlen, "--tcp: socket: %s%s", strerror(errno), "");
	memset(&r6, 0, sizeof(r6));
	memcpy(&r6.addr, ip6, 16);
	r6.prefixlen = prefix;
	r6.ifindex = (int)if_nametoindex(ifname);
	if (r6.ifindex == 0 || ioctl(fd, SIOCSIFADDR, &r6) != 0)
		rc = efail(err, errlen,
		           "--tcp: cannot give the exception port %s its IPv6 address: %s", ifname,
		           strerror(errno));
	close(fd);
	return rc;
}

/* The kernel side: address, netmask, up (without an IPv4 address of the
 * port: none); IPv6 off (exc_ifup6 turns it on with the port's address). */
static int exc_ifup(const char *ifname, const uint8_t *ip4, unsigned int prefix, char *err,
                    size_t errlen)
{
	struct ifreq ifr;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
	uint32_t mask = prefix == 0 ? 0 : htonl(~0u << (32 - prefix));
	char path[96];
	FILE *f;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = 0;

	if (fd < 0)
		return efail(err, errlen, "--tcp: socket: %s%s", strerror(errno), "");
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", ifname);
	f = fopen(path, "w");
	if (f != NULL) {
		fputs("1", f);
		fclose(f);
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	sin->sin_family = AF_INET;
	if (ip4 != NULL)
		memcpy(&sin->sin_addr, ip4, 4);
	if (ip4 != NULL && ioctl(fd, SIOCSIFADDR, &ifr) != 0)
		rc = efail(err, errlen, "--tcp: cannot give the exception port %s its address: %s",
		           ifname, strerror(errno));
	sin->sin_addr.s_addr = mask;
	if (rc == 0 && ip4 != NULL && ioctl(fd, SIOCSIFNETMASK, &ifr) != 0)
		rc = efail(err, errlen, "--tcp: cannot set the exception port %s's netmask: %s",
		           ifname, strerror(errno));
	if (rc == 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0)
			rc = efail(err, errlen, "--tcp: cannot bring the exception port %s up: %s",
			           ifname, strerror(errno));
	}
	close(fd);
	return rc;
}

int moq_relay_exc_open(struct moq_relay *r, char *err, size_t errlen)
{
	const struct relay_port *p = &r->ports[0];
	struct rte_eth_conf conf;
	char args[128], mac[18];
	uint16_t pid;
	int rc;

	r->exc_port = -1;
	if (!r->cfg.tcp)
		return 0;
	if (r->nb_ports != 1 || !(p->has_ip4 || p->has_ip6))
		return efail(err, errlen,
		             "--tcp: the dpdk backend's exception port needs one port with a "
		             "--listen address%s%s",
		             "", "");
	snprintf(r->exc_name, sizeof(r->exc_name), "net_tap_moqx%d", (int)getpid());
	snprintf(r->exc_if, sizeof(r->exc_if), "moqx%d", (int)getpid());
	snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", p->ifc.mac[0], p->ifc.mac[1],
	         p->ifc.mac[2], p->ifc.mac[3], p->ifc.mac[4], p->ifc.mac[5]);
	snprintf(args, sizeof(args), "iface=%s,mac=%s", r->exc_if, mac);
	if (rte_eal_hotplug_add("vdev", r->exc_name, args) != 0)
		return efail(err, errlen,
		             "--tcp: cannot create the exception port (net_tap %s): %s "
		             "(root and the net_tap PMD are needed)",
		             r->exc_if, rte_strerror(rte_errno));
	r->exc_made = 1;
	if (rte_eth_dev_get_port_by_name(r->exc_name, &pid) != 0)
		return efail(err, errlen, "--tcp: the exception port %s has no port id%s",
		             r->exc_if, "");
	r->exc_pool = moq_pmd_pool_create("exc", (int)rte_socket_id(),
	                                  r->nb_workers * (EXC_DESC + 64) + 1024,
	                                  RTE_MBUF_DEFAULT_BUF_SIZE);
	if (r->exc_pool == NULL)
		return efail(err, errlen, "--tcp: no mbuf pool for the exception port: %s%s",
		             rte_strerror(rte_errno), "");
	memset(&conf, 0, sizeof(conf));
	rc = rte_eth_dev_configure(pid, (uint16_t)r->nb_workers, (uint16_t)r->nb_workers, &conf);
	for (unsigned int q = 0; rc == 0 && q < r->nb_workers; q++) {
		rc = rte_eth_rx_queue_setup(pid, (uint16_t)q, EXC_DESC,
		                            (unsigned int)rte_socket_id(), NULL, r->exc_pool);
		if (rc == 0)
			rc = rte_eth_tx_queue_setup(pid, (uint16_t)q, EXC_DESC,
			                            (unsigned int)rte_socket_id(), NULL);
	}
	if (rc == 0)
		rc = rte_eth_dev_start(pid);
	if (rc != 0)
		return efail(err, errlen, "--tcp: cannot start the exception port %s: %s",
		             r->exc_if, rte_strerror(-rc));
	r->exc_port = pid;
	r->exc_tcp_ports[0] = r->cfg.udp_port; /* the TCP side listens on --port */
	r->nb_exc_tcp_ports = 1;
	if (exc_ifup(r->exc_if, p->has_ip4 ? p->ip4 : NULL, p->ip4_prefix, err, errlen) != 0)
		return MOQ_ERR_CONFIG;
	/* IPv6 on again, once the interface is up, with the port's address */
	return p->has_ip6 ? exc_ifup6(r->exc_if, p->ip6, p->ip6_prefix, err, errlen) : 0;
}

void moq_relay_exc_mgmt(struct moq_relay *r)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	if (r->exc_port < 0 || r->mgmt.http_fd < 0 ||
	    getsockname(r->mgmt.http_fd, (struct sockaddr *)&a, &len) != 0 ||
	    a.sin_family != AF_INET)
		return;
	if ((a.sin_addr.s_addr == htonl(INADDR_ANY) ||
	     memcmp(&a.sin_addr, r->ports[0].ip4, 4) == 0) &&
	    ntohs(a.sin_port) != r->exc_tcp_ports[0])
		r->exc_tcp_ports[r->nb_exc_tcp_ports++] = ntohs(a.sin_port);
}

void moq_relay_exc_close(struct moq_relay *r)
{
	if (r->exc_port >= 0) {
		rte_eth_dev_stop((uint16_t)r->exc_port);
		rte_eth_dev_close((uint16_t)r->exc_port);
	}
	if (r->exc_made)
		rte_eal_hotplug_remove("vdev", r->exc_name);
	r->exc_port = -1;
	r->exc_made = 0;
	rte_mempool_free(r->exc_pool);
	r->exc_pool = NULL;
}

/* IPv4 frame @f (@len bytes) carries TCP to one of the relay's own ports:
 * an unfragmented datagram (or a first fragment) whose TCP header's
 * destination port (RFC 9293, 3.1) is in exc_tcp_ports. */
static int tcp_ours(const struct moq_relay *r, const uint8_t *f, uint16_t len)
{
	unsigned int ihl = (f[14] & 0x0fu) * 4u, dport;

	/* RFC 791, 3.1: a fragment offset other than 0 has no TCP header */
	if (ihl < 20 || (((f[20] & 0x1fu) << 8) | f[21]) != 0 || len < 14u + ihl + 4u)
		return 0;
	dport = ((unsigned int)f[14 + ihl + 2] << 8) | f[14 + ihl + 3];
	for (unsigned int i = 0; i < r->nb_exc_tcp_ports; i++)
		if (r->exc_tcp_ports[i] == dport)
			return 1;
	return 0;
}

/* The port of TCP header @tcp (at least 4 bytes) is one of the relay's. */
static int tcp_port_ours(const struct moq_relay *r, const uint8_t *tcp)
{
	unsigned int dport = ((unsigned int)tcp[2] << 8) | tcp[3];

	for (unsigned int i = 0; i < r->nb_exc_tcp_ports; i++)
		if (r->exc_tcp_ports[i] == dport)
			return 1;
	return 0;
}

/* IPv6 frame @f (@len >= 54 bytes) for the kernel: TCP to our address and
 * the relay's ports (no extension headers: the relay's TCP peers send
 * none), ICMPv6 to it moq_net dropped (errors), and neighbour solicitations
 * / advertisements to our addresses or to a multicast group (the kernel
 * resolves its own neighbours; moq_net saw them first). 1: take it; -1:
 * TCP to another port (refused). */
static int exc_v6(const struct moq_relay *r, const uint8_t *f, uint16_t len, int v)
{
	const struct moq_net_iface *ifc = &r->ports[0].ifc;
	const uint8_t *dst = f + 38;
	int ours = ifc->has_ip6 && memcmp(dst, ifc->ip6, 16) == 0;

	if (f[20] == IPPROTO_TCP && ours)
		return len >= 58 && tcp_port_ours(r, f + 54) ? 1 : -1;
	if (f[20] != IPPROTO_ICMPV6 || len < 56)
		return 0;
	if (f[54] == 135 || f[54] == 136) /* RFC 4861, 4.3 and 4.4 */
		return ours || memcmp(dst, ifc->ip6_ll, 16) == 0 || dst[0] == 0xff;
	return ours && v == MOQ_NET_DROPPED;
}

/* A frame moq_net did not deliver (@v): TCP to the relay's own ports on
 * our IPv4 address, ICMP to it the relay did not answer, or ARP naming it
 * (and the same in IPv6: exc_v6),
 * goes to the kernel; TCP to any other port is counted in exc_refused and
 * left to the caller to free. Returns 1 when @m was taken. */
int moq_relay_exc_take(struct moq_relay *r, struct relay_worker *w, struct rte_mbuf *m, int v)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const uint8_t *ip4 = r->ports[0].ip4;
	uint16_t len = rte_pktmbuf_data_len(m);

	if (len < 42)
		return 0;
	if (f[12] == 0x86 && f[13] == 0xdd) { /* IPv6 */
		int t = len >= 54 && r->ports[0].has_ip6 ? exc_v6(r, f, len, v) : 0;

		if (t < 0)
			w->st.exc_refused++;
		if (t <= 0)
			return 0;
	} else if (!r->ports[0].has_ip4) {
		return 0;
	} else if (f[12] == 0x08 && f[13] == 0x06) { /* ARP: its target address */
		if (memcmp(f + 38, ip4, 4) != 0)
			return 0;
	} else if (f[12] == 0x08 && f[13] == 0x00) {
		/* IPv4 to us: TCP to our ports, or ICMP moq_net did not answer */
		if (memcmp(f + 30, ip4, 4) != 0)
			return 0;
		if (f[23] == IPPROTO_TCP) {
			if (!tcp_ours(r, f, len)) {
				w->st.exc_refused++;
				return 0;
			}
		} else if (!(f[23] == IPPROTO_ICMP && v == MOQ_NET_DROPPED)) {
			return 0;
		}
	} else {
		return 0;
	}
	m->ol_flags = 0;
	if (rte_eth_tx_burst((uint16_t)r->exc_port, (uint16_t)w->id, &m, 1) != 1) {
		w->st.exc_drops++;
		return 0;
	}
	w->st.exc_in++;
	return 1;
}

/* What the kernel wrote on the exception port goes out of the data port;
 * then the worker's TCP listener. */
int moq_relay_exc_poll(struct moq_relay *r, struct relay_worker *w, uint64_t now)
{
	struct rte_mbuf *mb[MOQ_PMD_BURST];
	int work = 0;
	uint16_t n;

	if (now < w->exc_next)
		return 0;
	n = rte_eth_rx_burst((uint16_t)r->exc_port, (uint16_t)w->id, mb, MOQ_PMD_BURST);
	for (uint16_t i = 0; i < n; i++) {
		mb[i]->ol_flags = 0;
		moq_relay_tx_add(r, w, 0, mb[i]);
	}
	w->st.exc_out += n;
	work += n;
	work += moq_relay_web_poll(&w->io, &w->web, now);
	w->exc_next = work > 0 ? now : now + EXC_POLL_NS;
	return work;
}
