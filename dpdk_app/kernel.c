/* SPDX-License-Identifier: MIT */
/*
 * kernel.c: the kernel-socket backend. Each worker binds its own UDP socket
 * to the listen address with SO_REUSEPORT (the kernel spreads flows by
 * 4-tuple, as RSS does), reads and writes bursts of 32 with recvmmsg /
 * sendmmsg and runs the same QUIC endpoint as the DPDK path. A datagram whose
 * CID names another worker is copied into an mbuf and sent to that worker's
 * ring, as on DPDK.
 */
#define _GNU_SOURCE /* recvmmsg, sendmmsg, accept4 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "moq_err.h"
#include "pmd_port.h"
#include "relay_int.h"

#define KBUF_RX 2048 /* larger than any datagram on a 1500/9000 link we accept */

/* Linux: UDP_MAX_SEGMENTS is 64 per GSO send. */
#define KGSO_MAX_SEGS 64

struct relay_kbuf {
	uint8_t rx[MOQ_PMD_BURST][KBUF_RX];
	uint8_t cmsg[MOQ_PMD_BURST][CMSG_SPACE(sizeof(uint16_t))];
	uint8_t tx[MOQ_PMD_BURST][MOQ_QUIC_MAX_UDP_PAYLOAD];
	struct sockaddr_storage names[MOQ_PMD_BURST];
	struct mmsghdr msgs[MOQ_PMD_BURST];
	struct iovec iov[MOQ_PMD_BURST];
};

/* A redirected datagram: this header, then the payload, in one mbuf. */
struct kdgram {
	struct moq_quic_addr local, remote;
	uint16_t len;
};

int moq_relay_kernel_open(struct moq_relay *r, struct relay_worker *w, char *err, size_t errlen)
{
	const struct moq_cfg_addr *a = &r->cfg.listen[0];
	struct moq_quic_addr bind_to;
	int one = 1, fd;
	socklen_t len;

	w->kbuf = rte_zmalloc("moqdp_kbuf", sizeof(*w->kbuf), RTE_CACHE_LINE_SIZE);
	if (w->kbuf == NULL) {
		snprintf(err, errlen, "worker %u: out of memory", w->id);
		return MOQ_ERR_NOMEM;
	}
	moq_relay_addr_from(&bind_to, a->family == AF_INET ? 4 : 6, a->addr, r->cfg.udp_port);
	fd = socket(a->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
	    bind(fd, &bind_to.u.sa, bind_to.len) != 0) {
		snprintf(err, errlen, "--listen/--port: cannot bind UDP port %u: %s",
		         r->cfg.udp_port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return MOQ_ERR_IO;
	}
	/* probe UDP GSO: setting a segment size of 0 (off) only works where the
	 * kernel knows the option */
	{
		int zero = 0;

		w->kgso = setsockopt(fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero)) == 0;
	}
	len = sizeof(w->klocal.u);
	getsockname(fd, &w->klocal.u.sa, &len);
	w->klocal.len = len;
	w->fd = fd;
	return 0;
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

static void kdeliver(struct moq_relay *r, struct relay_worker *w, const uint8_t *data, size_t len,
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
	if (!may_redirect || t < 0 || (unsigned int)t >= r->nb_workers ||
	    (unsigned int)t == w->id) {
		w->st.redirect_drops++;
		return;
	}
	m = rte_pktmbuf_alloc(r->kpool);
	if (m == NULL || len + sizeof(*k) > rte_pktmbuf_tailroom(m)) {
		rte_pktmbuf_free(m);
		w->st.redirect_drops++;
		return;
	}
	k = (struct kdgram *)rte_pktmbuf_append(m, (uint16_t)(sizeof(*k) + len));
	k->local = *local;
	k->remote = *remote;
	k->len = (uint16_t)len;
	memcpy(k + 1, data, len);
	if (rte_ring_mp_enqueue(r->w[t]->ring, m) != 0) {
		rte_pktmbuf_free(m);
		w->st.redirect_drops++;
		return;
	}
	w->st.redirected++;
}

/* Same destination: GSO may carry both in one send. */
static int same_dest(const struct moq_quic_pkt *a, const struct moq_quic_pkt *b)
{
	return a->remote.len == b->remote.len &&
	       memcmp(&a->remote.u, &b->remote.u, a->remote.len) == 0;
}

/*
 * Send a burst. With UDP GSO (Linux 4.18+, UDP_SEGMENT), a run of datagrams
 * to one peer whose sizes are equal (the last may be shorter) goes down as
 * one message, segmented by the kernel (or the NIC): one pass through the
 * stack instead of one per datagram. Without it, one message per datagram.
 */
static int ksend(struct relay_worker *w, uint64_t now)
{
	struct relay_kbuf *kb = w->kbuf;
	struct moq_quic_pkt pk[MOQ_PMD_BURST];
	int k, nmsg = 0, first[MOQ_PMD_BURST + 1], sent;

	for (int i = 0; i < MOQ_PMD_BURST; i++) {
		pk[i].data = kb->tx[i];
		pk[i].cap = sizeof(kb->tx[i]);
	}
	k = moq_quic_endpoint_send(w->ep, pk, MOQ_PMD_BURST, now);
	if (k <= 0)
		return 0;
	for (int i = 0; i < k;) {
		struct msghdr *h = &kb->msgs[nmsg].msg_hdr;
		int j = i + 1;

		/* extend the run: same peer, same size, up to a shorter last one */
		if (w->kgso)
			while (j < k && same_dest(&pk[i], &pk[j]) && pk[j].len <= pk[i].len &&
			       pk[j - 1].len == pk[i].len && j - i < KGSO_MAX_SEGS)
				j++;
		memset(&kb->msgs[nmsg], 0, sizeof(kb->msgs[nmsg]));
		for (int x = i; x < j; x++) {
			kb->iov[x].iov_base = pk[x].data;
			kb->iov[x].iov_len = pk[x].len;
		}
		h->msg_name = &pk[i].remote.u;
		h->msg_namelen = pk[i].remote.len;
		h->msg_iov = &kb->iov[i];
		h->msg_iovlen = (size_t)(j - i);
		if (j - i > 1) {
			struct cmsghdr *c;
			uint16_t seg = (uint16_t)pk[i].len;

			h->msg_control = kb->cmsg[nmsg];
			h->msg_controllen = sizeof(kb->cmsg[nmsg]);
			c = CMSG_FIRSTHDR(h);
			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(seg));
			memcpy(CMSG_DATA(c), &seg, sizeof(seg));
			w->st.gso_msgs++;
		}
		first[nmsg++] = i;
		i = j;
	}
	first[nmsg] = k;
	sent = sendmmsg(w->fd, kb->msgs, (unsigned int)nmsg, MSG_DONTWAIT);
	if (sent < 0) {
		/* e.g. EIO: the route's device cannot do GSO; stop using it */
		if (errno == EIO && w->kgso)
			w->kgso = 0;
		sent = 0;
	}
	for (int m = 0; m < sent; m++)
		for (int x = first[m]; x < first[m + 1]; x++) {
			w->st.tx_pkts++;
			w->st.tx_bytes += pk[x].len;
		}
	w->st.tx_drops += (uint64_t)(k - first[sent]);
	return k;
}

int moq_relay_kernel_poll(struct moq_relay *r, struct relay_worker *w, uint64_t now)
{
	struct relay_kbuf *kb = w->kbuf;
	struct rte_mbuf *mb[MOQ_PMD_BURST];
	int n, work = 0;

	for (int i = 0; i < MOQ_PMD_BURST; i++) {
		memset(&kb->msgs[i], 0, sizeof(kb->msgs[i]));
		kb->iov[i].iov_base = kb->rx[i];
		kb->iov[i].iov_len = KBUF_RX;
		kb->msgs[i].msg_hdr.msg_name = &kb->names[i];
		kb->msgs[i].msg_hdr.msg_namelen = sizeof(kb->names[i]);
		kb->msgs[i].msg_hdr.msg_iov = &kb->iov[i];
		kb->msgs[i].msg_hdr.msg_iovlen = 1;
	}
	n = recvmmsg(w->fd, kb->msgs, MOQ_PMD_BURST, MSG_DONTWAIT, NULL);
	for (int i = 0; i < n; i++) {
		struct moq_quic_addr remote;

		w->st.rx_pkts++;
		w->st.rx_bytes += kb->msgs[i].msg_len;
		from_sockaddr(&remote, &kb->names[i]);
		kdeliver(r, w, kb->rx[i], kb->msgs[i].msg_len, &w->klocal, &remote, now, 1);
	}
	work += n > 0 ? n : 0;
	n = (int)rte_ring_sc_dequeue_burst(w->ring, (void **)mb, MOQ_PMD_BURST, NULL);
	for (int i = 0; i < n; i++) {
		const struct kdgram *k = rte_pktmbuf_mtod(mb[i], const struct kdgram *);

		w->st.redirected_in++;
		kdeliver(r, w, (const uint8_t *)(k + 1), k->len, &k->local, &k->remote, now, 0);
		rte_pktmbuf_free(mb[i]);
	}
	work += n;
	if (now >= w->next_expiry)
		work += moq_quic_endpoint_timers(w->ep, now);
	/* fanout: pending subscriber data, expiry resets (moq.h) */
	work += moq_node_poll(w->node, now);
	for (int b = 0; b < 4 && moq_quic_endpoint_pending(w->ep); b++) {
		int k = ksend(w, now);

		work += k;
		if (k < MOQ_PMD_BURST)
			break;
	}
	w->next_expiry = moq_quic_endpoint_next_expiry(w->ep);
	/* relay-added latency (moq.h): what this iteration wrote is sent */
	if (moq_node_latency_pending(w->node) != 0)
		moq_node_latency_commit(w->node, moq_relay_clock_ns(r));
	return work;
}
