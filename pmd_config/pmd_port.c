/* SPDX-License-Identifier: MIT */
/*
 * pmd_port.c: port set-up from rte_eth_dev_info, after examples/l3fwd
 * (RSS masked by flow_type_rss_offloads, descriptors adjusted to the device,
 * offloads only when the capability bits say so).
 */
#include "pmd_port.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "moq_err.h"

/* The hash types the relay wants: UDP 4-tuple, and the addresses for
 * anything else (fragments, ICMP) so it still spreads. */
#define WANT_RSS                                                                                   \
	(RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_NONFRAG_IPV6_UDP | RTE_ETH_RSS_IPV4 |          \
	 RTE_ETH_RSS_IPV6)

static int pfail(char *err, size_t errlen, int rc, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static int pfail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Clamp @n into the device's [min, max] and round to its alignment, as
 * rte_eth_dev_adjust_nb_rx_tx_desc does. */
static uint16_t clamp_desc(uint16_t n, const struct rte_eth_desc_lim *lim)
{
	uint32_t v = n;

	if (lim->nb_max != 0 && v > lim->nb_max)
		v = lim->nb_max;
	if (v < lim->nb_min)
		v = lim->nb_min;
	if (lim->nb_align > 1)
		v = (v + lim->nb_align - 1) / lim->nb_align * lim->nb_align;
	if (lim->nb_max != 0 && v > lim->nb_max)
		v -= lim->nb_align;
	return (uint16_t)v;
}

int moq_pmd_port_plan(uint16_t port_id, const struct moq_pmd_config *cfg, uint16_t nb_rxq,
                      uint16_t nb_txq, uint16_t data_room, struct moq_pmd_port *p, char *err,
                      size_t errlen)
{
	struct rte_eth_dev_info info;
	uint32_t frame;
	int rc, sock;

	if (!rte_eth_dev_is_valid_port(port_id))
		return pfail(err, errlen, MOQ_ERR_NOTFOUND, "port %u: no such port", port_id);
	rc = rte_eth_dev_info_get(port_id, &info);
	if (rc != 0)
		return pfail(err, errlen, MOQ_ERR_CONFIG, "port %u: cannot read device info: %s",
		             port_id, rte_strerror(-rc));
	memset(p, 0, sizeof(*p));
	p->port_id = port_id;
	snprintf(p->driver, sizeof(p->driver), "%s", info.driver_name ? info.driver_name : "");
	if (strcmp(cfg->profile, "auto") == 0)
		p->profile = moq_pmd_profile_by_driver(p->driver);
	else
		p->profile = moq_pmd_profile_by_name(cfg->profile);
	if (p->profile == NULL)
		return pfail(err, errlen, MOQ_ERR_CONFIG, "--profile: unknown profile '%s'",
		             cfg->profile);
	sock = rte_eth_dev_socket_id(port_id);
	p->socket = sock < 0 ? 0 : sock;

	if (nb_rxq == 0 || nb_rxq > info.max_rx_queues)
		return pfail(err, errlen, MOQ_ERR_CONFIG,
		             "--queues: port %u (%s) has %u RX queues, %u requested", port_id,
		             p->driver, info.max_rx_queues, nb_rxq);
	if (nb_txq == 0 || nb_txq > info.max_tx_queues)
		return pfail(err, errlen, MOQ_ERR_CONFIG,
		             "--queues: port %u (%s) has %u TX queues, %u needed (one per lcore)",
		             port_id, p->driver, info.max_tx_queues, nb_txq);
	p->nb_rxq = nb_rxq;
	p->nb_txq = nb_txq;
	p->nb_rxd =
	        clamp_desc(cfg->rx_desc ? cfg->rx_desc : p->profile->rx_desc, &info.rx_desc_lim);
	p->nb_txd =
	        clamp_desc(cfg->tx_desc ? cfg->tx_desc : p->profile->tx_desc, &info.tx_desc_lim);

	/* RSS only helps with more than one queue; ask for what the device has. */
	if (nb_rxq > 1)
		p->rss_hf = WANT_RSS & info.flow_type_rss_offloads;

	/* MTU: the device's range; scatter when a frame exceeds one mbuf. */
	if ((info.min_mtu && cfg->mtu < info.min_mtu) || (info.max_mtu && cfg->mtu > info.max_mtu))
		return pfail(err, errlen, MOQ_ERR_CONFIG,
		             "--mtu: port %u (%s) takes %u..%u, not %u", port_id, p->driver,
		             info.min_mtu, info.max_mtu, cfg->mtu);
	p->mtu = cfg->mtu;
	frame = (uint32_t)cfg->mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + 8; /* + 2 VLAN tags */
	if (frame > (uint32_t)data_room - RTE_PKTMBUF_HEADROOM) {
		if (!(info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER))
			return pfail(
			        err, errlen, MOQ_ERR_CONFIG,
			        "--mtu: port %u (%s) cannot receive %u-byte frames: no scatter "
			        "and %u-byte mbufs",
			        port_id, p->driver, frame, data_room);
		p->rx_offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
		p->scatter = 1;
		if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
			p->tx_offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	}

	/* Checksums: RX reports in ol_flags, TX computes; only when present. */
	if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) {
		p->rx_offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
		p->rx_ip_csum = 1;
	}
	if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM) {
		p->rx_offloads |= RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
		p->rx_l4_csum = 1;
	}
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) {
		p->tx_offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
		p->tx_ip_csum = 1;
	}
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) {
		p->tx_offloads |= RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
		p->tx_udp_csum = 1;
	}
	/* Fast free: every TX mbuf comes from one pool with refcnt 1 and no
	 * indirect mbufs, which holds for the relay's TX path. */
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE) {
		p->tx_offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
		p->fast_free = 1;
	}
	return 0;
}

int moq_pmd_port_start(struct moq_pmd_port *p, struct rte_mempool *pool, char *err, size_t errlen)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	struct rte_eth_rxconf rxc;
	struct rte_eth_txconf txc;
	uint16_t q, nb_rxd = p->nb_rxd, nb_txd = p->nb_txd;
	int rc;

	memset(&conf, 0, sizeof(conf));
	conf.rxmode.mtu = p->mtu;
	conf.rxmode.offloads = p->rx_offloads;
	conf.txmode.offloads = p->tx_offloads;
	if (p->rss_hf != 0) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_key = NULL; /* the PMD's default key */
		conf.rx_adv_conf.rss_conf.rss_hf = p->rss_hf;
	}
	rc = rte_eth_dev_configure(p->port_id, p->nb_rxq, p->nb_txq, &conf);
	if (rc != 0)
		return pfail(err, errlen, MOQ_ERR_IO, "port %u: rte_eth_dev_configure: %s",
		             p->port_id, rte_strerror(-rc));
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(p->port_id, &nb_rxd, &nb_txd);
	if (rc != 0)
		goto fail_configured;
	p->nb_rxd = nb_rxd;
	p->nb_txd = nb_txd;
	rc = rte_eth_dev_info_get(p->port_id, &info);
	if (rc != 0)
		goto fail_configured;
	rxc = info.default_rxconf;
	rxc.offloads = conf.rxmode.offloads;
	for (q = 0; q < p->nb_rxq; q++) {
		rc = rte_eth_rx_queue_setup(p->port_id, q, p->nb_rxd, (unsigned int)p->socket, &rxc,
		                            pool);
		if (rc != 0) {
			pfail(err, errlen, MOQ_ERR_IO, "port %u: RX queue %u setup: %s", p->port_id,
			      q, rte_strerror(-rc));
			goto fail_queues;
		}
	}
	txc = info.default_txconf;
	txc.offloads = conf.txmode.offloads;
	for (q = 0; q < p->nb_txq; q++) {
		rc = rte_eth_tx_queue_setup(p->port_id, q, p->nb_txd, (unsigned int)p->socket,
		                            &txc);
		if (rc != 0) {
			pfail(err, errlen, MOQ_ERR_IO, "port %u: TX queue %u setup: %s", p->port_id,
			      q, rte_strerror(-rc));
			goto fail_queues;
		}
	}
	rc = rte_eth_dev_start(p->port_id);
	if (rc != 0) {
		pfail(err, errlen, MOQ_ERR_IO, "port %u: rte_eth_dev_start: %s", p->port_id,
		      rte_strerror(-rc));
		goto fail_queues;
	}
	rte_eth_macaddr_get(p->port_id, &p->mac);
	p->started = 1;
	return 0;

fail_configured:
	pfail(err, errlen, MOQ_ERR_IO, "port %u: descriptor set-up: %s", p->port_id,
	      rte_strerror(-rc));
fail_queues:
	rte_eth_dev_stop(p->port_id);
	return MOQ_ERR_IO;
}

void moq_pmd_port_stop(struct moq_pmd_port *p)
{
	if (!p->started)
		return;
	rte_eth_dev_stop(p->port_id);
	rte_eth_dev_close(p->port_id);
	p->started = 0;
}

unsigned int moq_pmd_pool_size(unsigned int rx_desc, unsigned int tx_desc, unsigned int nb_lcores,
                               unsigned int extra)
{
	unsigned long n = (unsigned long)rx_desc + tx_desc +
	                  (unsigned long)nb_lcores * (MOQ_PMD_BURST + MOQ_PMD_POOL_CACHE) + extra;

	if (n < MOQ_PMD_POOL_MIN)
		n = MOQ_PMD_POOL_MIN;
	return n > UINT32_MAX ? UINT32_MAX : (unsigned int)n;
}

struct rte_mempool *moq_pmd_pool_create(const char *tag, int socket, unsigned int n,
                                        uint16_t data_room)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	unsigned int cache = MOQ_PMD_POOL_CACHE;

	snprintf(name, sizeof(name), "moqdp_mb_%s_s%d", tag, socket);
	/* The cache may hold at most n / 1.5 (rte_mempool_create's rule). */
	if (cache > RTE_MEMPOOL_CACHE_MAX_SIZE || cache * 3 / 2 > n)
		cache = n * 2 / 3 < RTE_MEMPOOL_CACHE_MAX_SIZE ? n * 2 / 3
		                                               : RTE_MEMPOOL_CACHE_MAX_SIZE;
	return rte_pktmbuf_pool_create(name, n, cache, 0, data_room, socket);
}
