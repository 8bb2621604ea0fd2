/* SPDX-License-Identifier: MIT */
/*
 * net.h: the packet layer shared by the relay (dpdk_app/) and the load
 * generator (loadgen/): a small network stack (Ethernet, ARP, IPv4, IPv6
 * with neighbour discovery, UDP and ICMP/ICMPv6 echo) and the kernel-socket
 * I/O (UDP sockets, recvmmsg / sendmmsg bursts, UDP GSO).
 *
 * The stack has two layers:
 *   - byte-buffer functions (moq_net_rx, moq_net_udp_build, the ARP/ND
 *     builders): pure, no EAL, unit tested on plain arrays;
 *   - mbuf functions (moq_net_rx_mbuf, moq_net_udp_encap_mbuf): what workers
 *     call; a multi-segment mbuf is read into the context's scratch buffer.
 *
 * A received UDP datagram is handed up whole (one datagram, which may hold
 * several coalesced QUIC packets; the QUIC endpoint splits them). Anything
 * malformed or unsupported is dropped and counted per reason in
 * moq_net.stats.drop[]. Nothing here allocates, locks, logs or makes a
 * syscall.
 *
 * One struct moq_net per worker lcore (its neighbour cache and counters are
 * that lcore's alone); the interface it points to is shared, read-only.
 * The workers on one link may also share a neighbour table (moq_net_share):
 * RSS delivers every ARP frame (no IP header to hash) to one queue, so what
 * one worker learns from ARP / ND the others must read there.
 */
#ifndef MOQ_NET_NET_H
#define MOQ_NET_NET_H

#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include <rte_common.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#define MOQ_NET_ETH_HDR   14
#define MOQ_NET_IP4_HDR   20
#define MOQ_NET_IP6_HDR   40
#define MOQ_NET_UDP_HDR   8
#define MOQ_NET_UDP4_HDRS (MOQ_NET_ETH_HDR + MOQ_NET_IP4_HDR + MOQ_NET_UDP_HDR) /* 42 */
#define MOQ_NET_UDP6_HDRS (MOQ_NET_ETH_HDR + MOQ_NET_IP6_HDR + MOQ_NET_UDP_HDR) /* 62 */
/* Largest frame handled: 9000-byte jumbo MTU + Ethernet + 2 VLAN tags. */
#define MOQ_NET_FRAME_MAX 9022
/* Neighbour cache: 64 sets of 4 ways (256 entries), oldest way replaced. */
#define MOQ_NET_NEIGH_SETS 64
#define MOQ_NET_NEIGH_WAYS 4
/* Neighbour entries are refreshed by traffic; unconfirmed for this long they
 * are stale and re-resolved (RFC 4861, 10: REACHABLE_TIME is 30 s). */
#define MOQ_NET_NEIGH_TTL_NS (30ull * 1000000000ull)
/* At most one ARP request / NS per unresolved address per second
 * (RFC 1122, 2.3.2.1: "no more than once per second"). */
#define MOQ_NET_RESOLVE_GAP_NS 1000000000ull

/* Why a frame was dropped. */
enum moq_net_drop {
	MOQ_NET_DROP_ETH_SHORT = 0, /* shorter than an Ethernet header */
	MOQ_NET_DROP_ETH_DST,       /* destination MAC is not ours/broadcast/our multicast */
	MOQ_NET_DROP_ETH_TYPE,      /* unsupported EtherType (incl. VLAN) */
	MOQ_NET_DROP_ARP_SHORT,
	MOQ_NET_DROP_ARP_FORMAT, /* not Ethernet/IPv4, bad lengths */
	MOQ_NET_DROP_ARP_OP,     /* neither request nor reply */
	MOQ_NET_DROP_ARP_OTHER,  /* for another host (normal on a LAN) */
	MOQ_NET_DROP_IP4_SHORT,
	MOQ_NET_DROP_IP4_VERSION,
	MOQ_NET_DROP_IP4_HLEN, /* IHL < 5 or beyond the packet */
	MOQ_NET_DROP_IP4_LEN,  /* total length < IHL or > frame */
	MOQ_NET_DROP_IP4_CSUM,
	MOQ_NET_DROP_IP4_FRAG,  /* MF set or fragment offset != 0 */
	MOQ_NET_DROP_IP4_DST,   /* not one of our addresses */
	MOQ_NET_DROP_IP4_SRC,   /* broadcast / multicast / our own source */
	MOQ_NET_DROP_IP4_PROTO, /* not UDP or ICMP */
	MOQ_NET_DROP_IP6_SHORT,
	MOQ_NET_DROP_IP6_VERSION,
	MOQ_NET_DROP_IP6_LEN, /* payload length beyond the frame */
	MOQ_NET_DROP_IP6_DST,
	MOQ_NET_DROP_IP6_SRC,
	MOQ_NET_DROP_IP6_FRAG,  /* a fragment header */
	MOQ_NET_DROP_IP6_PROTO, /* extension headers / other protocols */
	MOQ_NET_DROP_UDP_SHORT,
	MOQ_NET_DROP_UDP_LEN, /* UDP length < 8 or != IP payload length */
	MOQ_NET_DROP_UDP_CSUM,
	MOQ_NET_DROP_UDP_PORT, /* not our UDP port */
	MOQ_NET_DROP_ICMP_SHORT,
	MOQ_NET_DROP_ICMP_CSUM,
	MOQ_NET_DROP_ICMP_TYPE, /* types other than echo request / NS / NA */
	MOQ_NET_DROP_ND_FORMAT, /* hop limit != 255, bad option, bad target */
	MOQ_NET_DROP_NO_ROOM,   /* the reply does not fit the reply buffer / no mbuf */
	MOQ_NET_DROP_RX_TRUNC,  /* kernel sockets: a datagram longer than the receive buffer */
	MOQ_NET_DROP_MAX
};

/* RX hints (from mbuf ol_flags, or the profile). */
#define MOQ_NET_RX_IP_CSUM_GOOD (1u << 0) /* hardware verified the IPv4 checksum */
#define MOQ_NET_RX_IP_CSUM_BAD  (1u << 1)
#define MOQ_NET_RX_L4_CSUM_GOOD (1u << 2) /* hardware verified the UDP checksum */
#define MOQ_NET_RX_L4_CSUM_BAD  (1u << 3)
/* TX offloads (moq_net_udp_build): leave the sum to the NIC. */
#define MOQ_NET_TX_IP_CSUM  (1u << 0) /* IPv4 header checksum left 0 */
#define MOQ_NET_TX_UDP_CSUM (1u << 1) /* UDP checksum holds the pseudo-header sum */

/* The interface: addresses and what the port offloads. Shared, read-only. */
struct moq_net_iface {
	uint8_t mac[6];
	uint8_t has_ip4, has_ip6;
	uint8_t ip4[4];
	uint8_t ip4_prefix;
	uint8_t ip6[16];    /* global (or unique-local) address */
	uint8_t ip6_ll[16]; /* link-local fe80::/64 from the MAC (EUI-64) */
	uint8_t ip6_prefix;
	uint8_t has_gw4, has_gw6;
	uint8_t gw4[4];
	uint8_t gw6[16];
	uint16_t udp_port;    /* host order; 0 = every port */
	/* also ours with udp_port set: the local ports of the connections we
	 * dial (the relay's cluster links), client_port_lo + [0, client_ports) */
	uint16_t client_port_lo, client_ports;
	uint32_t tx_offloads; /* MOQ_NET_TX_* the port does */
	/* The PMD may deliver UDP with a partial checksum (af_packet over veth:
	 * the kernel's CHECKSUM_PARTIAL, only the pseudo-header sum is filled in).
	 * Such a datagram is accepted and counted in rx_l4_partial. */
	uint8_t l4_partial_ok;
};

struct moq_net_stats {
	uint64_t rx_frames;
	uint64_t rx_udp; /* datagrams handed up */
	uint64_t rx_udp_bytes;
	uint64_t rx_arp, rx_nd, rx_echo;
	uint64_t rx_l4_partial; /* accepted with a kernel partial checksum */
	uint64_t rx_scattered;  /* multi-segment frames linearised */
	uint64_t tx_replies;    /* ARP replies, NA, echo replies */
	uint64_t tx_solicits;   /* ARP requests, NS */
	uint64_t neigh_learned, neigh_evicted;
	uint64_t neigh_shared;    /* resolutions taken from the shared table */
	uint64_t resolve_pending; /* datagrams not sent: next hop unresolved */
	uint64_t drop[MOQ_NET_DROP_MAX];
};

struct moq_net_neigh {
	uint8_t addr[16]; /* IPv4 in the first 4 bytes */
	uint8_t family;   /* 0 = free, 4, 6 */
	uint8_t resolved;
	uint8_t mac[6];
	uint64_t seen_ns;  /* last confirmation */
	uint64_t asked_ns; /* last solicitation sent */
	uint32_t gen;      /* the shared table's gen when last compared with it */
};

/*
 * A neighbour table shared by the workers on one link (moq_net_share). It is
 * written rarely: what ARP and ND confirm (replies, announcements, NS with a
 * source link-layer option), and an unresolved mark when a worker solicits
 * (so an NA that RSS hands to another worker finds an entry, RFC 4861
 * 7.2.5). Writers take a spinlock among themselves; readers take none: each
 * entry has a sequence count, odd while written, and a read that saw it
 * change is retried. A worker reads an entry only when its own cache has no
 * fresh one, or once after a MAC changed (gen): per packet it reads only
 * gen. Same geometry as the per-worker cache; zeroed
 * (moq_net_neigh_table_init) before use.
 */
struct moq_net_neigh_shared {
	uint32_t seq; /* even: stable; odd: being written */
	uint8_t family, resolved;
	uint8_t mac[6];
	uint8_t addr[16];
	uint64_t seen_ns; /* last confirmation */
};

struct moq_net_neigh_table {
	uint32_t lock __rte_cache_aligned; /* writers only */
	/* bumped when a resolved entry's MAC changes (a gratuitous ARP, an NA
	 * with Override): each worker compares its entry once more on its
	 * next use; one load per resolution, a line written that rarely */
	uint32_t gen __rte_cache_aligned;
	struct moq_net_neigh_shared e[MOQ_NET_NEIGH_SETS][MOQ_NET_NEIGH_WAYS] __rte_cache_aligned;
};

struct moq_net {
	const struct moq_net_iface *iface;
	struct moq_net_neigh_table *shared; /* NULL: none (moq_net_share) */
	struct moq_net_stats stats;
	struct moq_net_neigh neigh[MOQ_NET_NEIGH_SETS][MOQ_NET_NEIGH_WAYS];
	uint8_t scratch[MOQ_NET_FRAME_MAX]; /* linearised multi-segment frames */
};

/* A received datagram (moq_net_rx's result). Addresses in network order. */
struct moq_net_udp {
	uint8_t family; /* 4 or 6 */
	uint8_t ecn;
	uint16_t sport, dport; /* host order */
	uint8_t src[16], dst[16];
	uint8_t src_mac[6];
	const uint8_t *payload; /* into the frame (or scratch); valid until the next rx */
	uint16_t len;
};

/* moq_net_rx's verdicts. */
enum moq_net_verdict {
	MOQ_NET_DROPPED = 0, /* counted in stats.drop[] */
	MOQ_NET_UDP = 1,     /* *udp describes a datagram for the QUIC layer */
	MOQ_NET_REPLY = 2,   /* a reply frame of *reply_len bytes is in @reply */
	MOQ_NET_DONE = 3,    /* handled, nothing to send (e.g. an ARP reply learned) */
};

/*
 * moq_net_iface_init: fill @ifc for @mac with the given addresses (network
 * order; NULL = none) and UDP port; derives the IPv6 link-local address.
 */
void moq_net_iface_init(struct moq_net_iface *ifc, const uint8_t mac[6], const uint8_t ip4[4],
                        uint8_t ip4_prefix, const uint8_t ip6[16], uint8_t ip6_prefix,
                        uint16_t udp_port);

/* moq_net_init: a per-lcore context on @ifc (not owned) with empty caches
 * and no shared table. */
void moq_net_init(struct moq_net *n, const struct moq_net_iface *ifc);

/* moq_net_neigh_table_init: an empty shared neighbour table. */
void moq_net_neigh_table_init(struct moq_net_neigh_table *t);

/*
 * moq_net_share: make @n (one worker's context on a link) learn into and
 * resolve from @t too (not owned; NULL: none), shared with the other
 * workers' contexts on the same link. Call before the worker runs.
 */
void moq_net_share(struct moq_net *n, struct moq_net_neigh_table *t);

/*
 * moq_net_rx: handle one Ethernet frame @frame of @len bytes received at
 * @now_ns with MOQ_NET_RX_* @hints. ARP and ND requests for our addresses and
 * ICMP echo requests get a reply written to @reply (@reply_cap bytes; the
 * caller sends it). Senders are learned into the neighbour cache.
 * Returns a moq_net_verdict; MOQ_NET_DROPPED has been counted.
 */
enum moq_net_verdict moq_net_rx(struct moq_net *n, const uint8_t *frame, size_t len, uint32_t hints,
                                uint64_t now_ns, struct moq_net_udp *udp, uint8_t *reply,
                                size_t reply_cap, size_t *reply_len);

/*
 * moq_net_resolve: the next-hop MAC for @dst (family 4 or 6) into @mac.
 * Off-link destinations use the gateway when one is set (else the address
 * itself). Returns 0 (@mac set), or MOQ_ERR_AGAIN when unresolved. At most
 * once per MOQ_NET_RESOLVE_GAP_NS per address a solicitation (ARP request /
 * NS) is written to @req (*req_len > 0) for the caller to send: for an
 * unresolved address, and for a stale one (older than MOQ_NET_NEIGH_TTL_NS,
 * still used meanwhile, RFC 4861 7.3.3); *req_len is 0 otherwise.
 * MOQ_ERR_INVAL for a bad family. With a shared table, an address this
 * context has no fresh entry for is looked up there before it is asked for
 * (counted in neigh_shared when that resolves it or brings a newer one).
 */
int moq_net_resolve(struct moq_net *n, int family, const uint8_t *dst, uint64_t now_ns,
                    uint8_t mac[6], uint8_t *req, size_t req_cap, size_t *req_len);

/*
 * moq_net_neigh_learn: insert or refresh @addr -> @mac (bounded cache: the
 * oldest entry of its set is replaced and counted in neigh_evicted), and in
 * the shared table when there is one: a confirmed resolution, as from ARP.
 * (A UDP sender refreshes only the receiving worker's own cache.)
 */
void moq_net_neigh_learn(struct moq_net *n, int family, const uint8_t *addr, const uint8_t mac[6],
                         uint64_t now_ns);

/*
 * moq_net_udp_build: write Ethernet + IP + UDP headers for a @plen-byte
 * @payload into @hdr (MOQ_NET_UDP4_HDRS or MOQ_NET_UDP6_HDRS bytes; the
 * payload need not follow it) from our address for @family to @dst_ip:@dport,
 * next hop @dst_mac, source port @sport, ECN @ecn. With MOQ_NET_TX_* in
 * @offload the checksums are left for the NIC as DPDK expects (IPv4 header
 * sum 0, UDP sum = pseudo-header sum); otherwise computed in software.
 * Returns the header length, MOQ_ERR_INVAL (no address of @family) or
 * MOQ_ERR_TOO_LARGE (@plen over 65507/65527).
 */
int moq_net_udp_build(const struct moq_net_iface *ifc, uint8_t *hdr, int family,
                      const uint8_t dst_mac[6], const uint8_t *dst_ip, uint16_t sport,
                      uint16_t dport, uint8_t ecn, const uint8_t *payload, size_t plen,
                      uint32_t offload);

/*
 * moq_net_arp_build: an ARP frame into @out (>= 42 bytes): @op 1 (request
 * for @tip) or 2 (reply to @tha/@tip); a gratuitous ARP is a request for our
 * own address. Returns the length (42), or MOQ_ERR_INVAL (no IPv4 address).
 */
int moq_net_arp_build(const struct moq_net_iface *ifc, uint8_t *out, size_t cap, int op,
                      const uint8_t tha[6], const uint8_t tip[4]);

/*
 * moq_net_ns_build: a Neighbour Solicitation for @target (RFC 4861, 4.3) to
 * its solicited-node multicast group, into @out (>= 86 bytes). Returns the
 * length, or MOQ_ERR_INVAL.
 */
int moq_net_ns_build(const struct moq_net_iface *ifc, uint8_t *out, size_t cap,
                     const uint8_t target[16]);

/*
 * moq_net_na_build: an unsolicited Neighbour Advertisement for our global
 * address to all-nodes (RFC 4861, 7.2.6), the IPv6 gratuitous ARP. Returns
 * the length, or MOQ_ERR_INVAL.
 */
int moq_net_na_build(const struct moq_net_iface *ifc, uint8_t *out, size_t cap);

/* moq_net_drop_name: "ip4_frag", ... for a moq_net_drop (metrics labels). */
const char *moq_net_drop_name(int reason);

/* moq_net_cksum: the Internet checksum (RFC 1071) of @len bytes, folded and
 * complemented, started from the 32-bit partial @sum. */
uint16_t moq_net_cksum(const void *buf, size_t len, uint32_t sum);

/* mbuf layer ------------------------------------------------------------ */

/*
 * moq_net_rx_mbuf: moq_net_rx on @m (not freed: the caller frees it in the
 * same poll iteration, after the datagram was consumed). Hardware checksum
 * flags in m->ol_flags are honoured. A multi-segment mbuf is copied into
 * n->scratch. A reply is written into a new mbuf from @pool returned in
 * *reply (the caller sends it); no mbuf: counted as NO_ROOM.
 */
enum moq_net_verdict moq_net_rx_mbuf(struct moq_net *n, struct rte_mbuf *m, uint64_t now_ns,
                                     struct moq_net_udp *udp, struct rte_mempool *pool,
                                     struct rte_mbuf **reply);

/*
 * moq_net_udp_encap_mbuf: prepend Ethernet/IP/UDP headers to the UDP
 * payload that @m holds (its whole data) and set the TX offload fields when
 * the interface offloads checksums. Returns 0, MOQ_ERR_AGAIN (next hop not
 * resolved: a solicitation was put in *solicit when due, from @pool; @m is
 * untouched), MOQ_ERR_NOMEM (no headroom) or MOQ_ERR_INVAL.
 */
int moq_net_udp_encap_mbuf(struct moq_net *n, struct rte_mbuf *m, int family, const uint8_t *dst_ip,
                           uint16_t sport, uint16_t dport, uint8_t ecn, uint64_t now_ns,
                           struct rte_mempool *pool, struct rte_mbuf **solicit);

/* kernel sockets (kernel_io.c) ------------------------------------------
 * UDP sockets read and written in bursts with recvmmsg / sendmmsg, and UDP
 * GSO (Linux 4.18+, UDP_SEGMENT) on send: the relay's --backend kernel and
 * moqdp-load --kernel. No EAL; a syscall per burst, none per datagram. */

/* Datagrams per moq_net_krecv / moq_net_ksend: DPDK's burst (MOQ_PMD_BURST). */
#define MOQ_NET_KIO_BURST 32
/* Receive buffer per datagram by default (moq_net_kbuf_size): a 1500-byte
 * link's largest datagram with room to spare. A buffer for jumbo frames is
 * sized with moq_net_kbuf_size_for. */
#define MOQ_NET_KIO_RX_MAX 2048
/* Linux: UDP_MAX_SEGMENTS is 64 per GSO send. */
#define MOQ_NET_KIO_GSO_MAX_SEGS 64

/* moq_net_ksock_open flags. */
#define MOQ_NET_KSOCK_REUSEPORT (1u << 0) /* SO_REUSEPORT: one socket per worker */
#define MOQ_NET_KSOCK_GSO       (1u << 1) /* use UDP GSO when the kernel has it */

/* A bound UDP socket. */
struct moq_net_ksock {
	int fd;  /* non-blocking, close-on-exec; -1 when closed */
	int gso; /* sends may carry several datagrams (UDP_SEGMENT) */
};

/* The buffers and message headers of a burst (kernel_io.c): allocate
 * moq_net_kbuf_size() bytes, zeroed (datagrams of up to MOQ_NET_KIO_RX_MAX
 * bytes), or moq_net_kbuf_size_for(max) bytes passed to moq_net_kbuf_init;
 * one per thread; any socket may use it. */
struct moq_net_kbuf;

/* One datagram: received (data into the kbuf, @addr its source) or to send
 * (@addr its destination). */
struct moq_net_kdgram {
	void *data;
	size_t len;
	struct sockaddr *addr;
	socklen_t addrlen;
};

/*
 * moq_net_ksock_open: a non-blocking UDP socket of @addr's family bound to
 * @addr (@addrlen bytes), with MOQ_NET_KSOCK_* @flags and, when @bufsize > 0,
 * SO_RCVBUF and SO_SNDBUF of @bufsize bytes. With MOQ_NET_KSOCK_GSO, @s->gso
 * says whether the kernel takes UDP_SEGMENT. The bound address is written to
 * @bound (*@bound_len bytes in, its length out) when not NULL. Returns 0, or
 * MOQ_ERR_IO with errno set (@s->fd is -1).
 */
int moq_net_ksock_open(struct moq_net_ksock *s, const struct sockaddr *addr, socklen_t addrlen,
                       unsigned int flags, int bufsize, struct sockaddr *bound,
                       socklen_t *bound_len);

/* moq_net_ksock_close: close @s (nothing when already closed). */
void moq_net_ksock_close(struct moq_net_ksock *s);

/* moq_net_kbuf_size: the bytes a struct moq_net_kbuf takes (datagrams of up
 * to MOQ_NET_KIO_RX_MAX bytes). */
size_t moq_net_kbuf_size(void);

/* moq_net_kbuf_size_for: the bytes of a kbuf that receives datagrams of up
 * to @rx_max bytes (e.g. the link MTU - 28); moq_net_kbuf_init then sets
 * it up. */
size_t moq_net_kbuf_size_for(size_t rx_max);
void moq_net_kbuf_init(struct moq_net_kbuf *kb, size_t rx_max);

/* moq_net_kbuf_truncated: datagrams moq_net_krecv dropped with @kb because
 * they were longer than its buffers (MSG_TRUNC): never handed up cut. */
uint64_t moq_net_kbuf_truncated(const struct moq_net_kbuf *kb);

/*
 * moq_net_krecv: receive up to MOQ_NET_KIO_BURST datagrams from @fd without
 * blocking into @kb and describe each in @d[] (its data and source address
 * point into @kb, valid until the next call with @kb). A datagram longer
 * than @kb's buffers is dropped, not described, and counted
 * (moq_net_kbuf_truncated). Returns how many were described (0 when none
 * was waiting or on an error).
 */
int moq_net_krecv(struct moq_net_kbuf *kb, int fd, struct moq_net_kdgram *d);

/*
 * moq_net_ksend: send @pk[0..@k) (@k <= MOQ_NET_KIO_BURST) on @s with one
 * sendmmsg, without blocking. With @s->gso, a run of datagrams to one peer
 * whose sizes are equal (the last may be shorter) goes down as one message,
 * segmented by the kernel (or the NIC): one pass through the stack instead
 * of one per datagram; each such message adds 1 to *@gso_msgs. EIO (the
 * route's device cannot do GSO) turns @s->gso off. Returns the datagrams
 * sent, always the first ones of @pk: the rest were not.
 */
int moq_net_ksend(struct moq_net_kbuf *kb, struct moq_net_ksock *s, const struct moq_net_kdgram *pk,
                  int k, uint64_t *gso_msgs);

#endif /* MOQ_NET_NET_H */
