/* SPDX-License-Identifier: MIT */
/*
 * pmd_port.h: setting a DPDK port up from what its PMD reports. The plan step
 * reads rte_eth_dev_info and decides queue counts, descriptor counts (clamped
 * to the device's limits), RSS hash types (the UDP 4-tuple masked by
 * flow_type_rss_offloads), checksum offloads and fast mbuf free (only when the
 * device has them), scatter for jumbo MTUs; the start step configures the
 * port with that plan. Mempools are per NUMA socket and sized from queues x
 * descriptors x lcores (as DPDK's l3fwd sizes NB_MBUF).
 *
 * Needs EAL. Start-up code only: nothing here is called per packet.
 */
#ifndef MOQ_PMD_CONFIG_PMD_PORT_H
#define MOQ_PMD_CONFIG_PMD_PORT_H

#include <stddef.h>
#include <stdint.h>

#include <rte_ether.h>
#include <rte_mempool.h>

#include "pmd_config.h"
#include "pmd_profile.h"

/* Packets per rx_burst / tx_burst: the DPDK examples' MAX_PKT_BURST. */
#define MOQ_PMD_BURST 32
/* Per-lcore mempool cache: l3fwd's MEMPOOL_CACHE_SIZE. */
#define MOQ_PMD_POOL_CACHE 256
/* The smallest pool l3fwd makes (8192 mbufs): below this, short bursts of
 * TX retention exhaust it. */
#define MOQ_PMD_POOL_MIN 8192

/* The plan for one port (filled by moq_pmd_port_plan, used by _start). */
struct moq_pmd_port {
	uint16_t port_id;
	int socket; /* NUMA socket of the device; SOCKET_ID_ANY mapped to 0 */
	const struct moq_pmd_profile *profile;
	char driver[32];
	uint16_t nb_rxq, nb_txq;
	uint16_t nb_rxd, nb_txd; /* after clamping to the device's limits */
	uint64_t rss_hf;         /* hash types actually requested (0: no RSS) */
	uint64_t rx_offloads, tx_offloads;
	/* What the data path may rely on (derived from the offloads). */
	unsigned int rx_ip_csum : 1;  /* RX IPv4 checksum reported in ol_flags */
	unsigned int rx_l4_csum : 1;  /* RX UDP checksum reported in ol_flags */
	unsigned int tx_ip_csum : 1;  /* TX IPv4 header checksum offload */
	unsigned int tx_udp_csum : 1; /* TX UDP checksum offload */
	unsigned int fast_free : 1;   /* MBUF_FAST_FREE: one pool, refcnt 1 */
	unsigned int scatter : 1;     /* multi-segment RX for the MTU */
	unsigned int started : 1;
	uint16_t mtu;
	struct rte_ether_addr mac;
};

/*
 * moq_pmd_port_plan: read what port @port_id's PMD reports and fill @p for
 * @nb_rxq RX and @nb_txq TX queues with the descriptors, MTU and profile of
 * @cfg (profile "auto" picks it from the driver name). @data_room is the mbuf
 * data room of the pool it will use (for the scatter decision).
 *
 * Returns 0, MOQ_ERR_NOTFOUND (no such port) or MOQ_ERR_CONFIG with one line
 * in @err (too many queues for the device, an MTU the device cannot take).
 */
int moq_pmd_port_plan(uint16_t port_id, const struct moq_pmd_config *cfg, uint16_t nb_rxq,
                      uint16_t nb_txq, uint16_t data_room, struct moq_pmd_port *p, char *err,
                      size_t errlen);

/*
 * moq_pmd_port_start: configure port @p->port_id as planned, set up every RX
 * queue with mbufs from @pool (not owned) and every TX queue, start it and
 * read its MAC address into @p->mac. Returns 0, or MOQ_ERR_IO with one line in
 * @err naming the step that failed (the port is left stopped).
 */
int moq_pmd_port_start(struct moq_pmd_port *p, struct rte_mempool *pool, char *err, size_t errlen);

/* moq_pmd_port_stop: stop and close a started port. */
void moq_pmd_port_stop(struct moq_pmd_port *p);

/*
 * moq_pmd_pool_size: mbufs for a socket serving @rx_desc RX and @tx_desc TX
 * descriptors in total and @nb_lcores lcores each holding a burst and a cache,
 * plus @extra (TX data in flight): l3fwd's NB_MBUF formula, at least
 * MOQ_PMD_POOL_MIN.
 */
unsigned int moq_pmd_pool_size(unsigned int rx_desc, unsigned int tx_desc, unsigned int nb_lcores,
                               unsigned int extra);

/*
 * moq_pmd_pool_create: a packet mbuf pool "moqdp_mb_<tag>_s<socket>" of @n
 * mbufs with @data_room bytes of data room on @socket. Returns the pool (the
 * caller frees it with rte_mempool_free) or NULL with rte_errno set.
 */
struct rte_mempool *moq_pmd_pool_create(const char *tag, int socket, unsigned int n,
                                        uint16_t data_room);

#endif /* MOQ_PMD_CONFIG_PMD_PORT_H */
