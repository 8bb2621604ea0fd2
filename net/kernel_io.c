/* SPDX-License-Identifier: MIT */
/*
 * kernel_io.c: UDP on kernel sockets in bursts, for the relay's kernel
 * backend (dpdk_app/kernel.c) and moqdp-load --kernel: sockets bound with the
 * options each needs, recvmmsg of a burst into per-thread buffers, sendmmsg
 * of a burst with UDP GSO where the kernel has it.
 */
#define _GNU_SOURCE /* recvmmsg, sendmmsg */
#include "net.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "moq_err.h"

struct moq_net_kbuf {
	size_t rx_max;      /* bytes per datagram buffer; 0: MOQ_NET_KIO_RX_MAX */
	uint64_t truncated; /* moq_net_kbuf_truncated */
	uint8_t cmsg[MOQ_NET_KIO_BURST][CMSG_SPACE(sizeof(uint16_t))];
	struct sockaddr_storage names[MOQ_NET_KIO_BURST];
	struct mmsghdr msgs[MOQ_NET_KIO_BURST];
	struct iovec iov[MOQ_NET_KIO_BURST];
	uint8_t rx[]; /* MOQ_NET_KIO_BURST x rx_max */
};

size_t moq_net_kbuf_size_for(size_t rx_max)
{
	return sizeof(struct moq_net_kbuf) + MOQ_NET_KIO_BURST * rx_max;
}

size_t moq_net_kbuf_size(void)
{
	return moq_net_kbuf_size_for(MOQ_NET_KIO_RX_MAX);
}

void moq_net_kbuf_init(struct moq_net_kbuf *kb, size_t rx_max)
{
	memset(kb, 0, sizeof(*kb));
	kb->rx_max = rx_max;
}

uint64_t moq_net_kbuf_truncated(const struct moq_net_kbuf *kb)
{
	return kb->truncated;
}

int moq_net_ksock_open(struct moq_net_ksock *s, const struct sockaddr *addr, socklen_t addrlen,
                       unsigned int flags, int bufsize, struct sockaddr *bound,
                       socklen_t *bound_len)
{
	int one = 1, fd, e;

	s->fd = -1;
	s->gso = 0;
	fd = socket(addr->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return MOQ_ERR_IO;
	if ((flags & MOQ_NET_KSOCK_REUSEPORT) &&
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0)
		goto fail;
	if (bufsize > 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof(bufsize));
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof(bufsize));
	}
	if (bind(fd, addr, addrlen) != 0)
		goto fail;
	/* probe UDP GSO: setting a segment size of 0 (off) only works where the
	 * kernel knows the option */
	if (flags & MOQ_NET_KSOCK_GSO) {
		int zero = 0;

		s->gso = setsockopt(fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero)) == 0;
	}
	if (bound != NULL)
		getsockname(fd, bound, bound_len);
	s->fd = fd;
	return 0;

fail:
	e = errno;
	close(fd);
	errno = e;
	return MOQ_ERR_IO;
}

void moq_net_ksock_close(struct moq_net_ksock *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

int moq_net_krecv(struct moq_net_kbuf *kb, int fd, struct moq_net_kdgram *d)
{
	size_t max = kb->rx_max != 0 ? kb->rx_max : MOQ_NET_KIO_RX_MAX;
	int n, k = 0;

	for (int i = 0; i < MOQ_NET_KIO_BURST; i++) {
		memset(&kb->msgs[i], 0, sizeof(kb->msgs[i]));
		kb->iov[i].iov_base = kb->rx + (size_t)i * max;
		kb->iov[i].iov_len = max;
		kb->msgs[i].msg_hdr.msg_name = &kb->names[i];
		kb->msgs[i].msg_hdr.msg_namelen = sizeof(kb->names[i]);
		kb->msgs[i].msg_hdr.msg_iov = &kb->iov[i];
		kb->msgs[i].msg_hdr.msg_iovlen = 1;
	}
	n = recvmmsg(fd, kb->msgs, MOQ_NET_KIO_BURST, MSG_DONTWAIT, NULL);
	for (int i = 0; i < n; i++) {
		/* longer than the buffer: the kernel cut it (recvmsg(2)) */
		if (kb->msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
			kb->truncated++;
			continue;
		}
		d[k].data = kb->iov[i].iov_base;
		d[k].len = kb->msgs[i].msg_len;
		d[k].addr = (struct sockaddr *)&kb->names[i];
		d[k].addrlen = kb->msgs[i].msg_hdr.msg_namelen;
		k++;
	}
	return k;
}

/* Same destination: GSO may carry both in one send. */
static int same_dest(const struct moq_net_kdgram *a, const struct moq_net_kdgram *b)
{
	return a->addrlen == b->addrlen && memcmp(a->addr, b->addr, a->addrlen) == 0;
}

int moq_net_ksend(struct moq_net_kbuf *kb, struct moq_net_ksock *s, const struct moq_net_kdgram *pk,
                  int k, uint64_t *gso_msgs)
{
	int nmsg = 0, first[MOQ_NET_KIO_BURST + 1], sent;

	if (k <= 0)
		return 0;
	if (k > MOQ_NET_KIO_BURST)
		k = MOQ_NET_KIO_BURST;
	for (int i = 0; i < k;) {
		struct msghdr *h = &kb->msgs[nmsg].msg_hdr;
		int j = i + 1;

		/* extend the run: same peer, same size, up to a shorter last one */
		if (s->gso)
			while (j < k && same_dest(&pk[i], &pk[j]) && pk[j].len <= pk[i].len &&
			       pk[j - 1].len == pk[i].len && j - i < MOQ_NET_KIO_GSO_MAX_SEGS)
				j++;
		memset(&kb->msgs[nmsg], 0, sizeof(kb->msgs[nmsg]));
		for (int x = i; x < j; x++) {
			kb->iov[x].iov_base = pk[x].data;
			kb->iov[x].iov_len = pk[x].len;
		}
		h->msg_name = pk[i].addr;
		h->msg_namelen = pk[i].addrlen;
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
			if (gso_msgs != NULL)
				(*gso_msgs)++;
		}
		first[nmsg++] = i;
		i = j;
	}
	first[nmsg] = k;
	sent = sendmmsg(s->fd, kb->msgs, (unsigned int)nmsg, MSG_DONTWAIT);
	if (sent < 0) {
		/* e.g. EIO: the route's device cannot do GSO; stop using it */
		if (errno == EIO && s->gso)
			s->gso = 0;
		sent = 0;
	}
	return first[sent];
}
