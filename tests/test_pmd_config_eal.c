/* SPDX-License-Identifier: MIT */
/*
 * test_pmd_config_eal.c: port set-up on a real PMD (net_ring0, created by the
 * EAL test main): the plan follows what the device reports, the port starts,
 * and packets go round its loopback ring.
 */
#include <check.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "moq_err.h"
#include "pmd_port.h"

static uint16_t ring_port(void)
{
	uint16_t pid;

	RTE_ETH_FOREACH_DEV(pid)
	{
		struct rte_eth_dev_info info;

		if (rte_eth_dev_info_get(pid, &info) == 0 &&
		    strcmp(info.driver_name, "net_ring") == 0)
			return pid;
	}
	ck_abort_msg("no net_ring port");
	return 0;
}

START_TEST(plan_follows_device)
{
	struct moq_pmd_config cfg;
	struct moq_pmd_port p;
	struct rte_eth_dev_info info;
	char err[MOQ_CFG_ERR_MAX];
	uint16_t pid = ring_port();

	moq_pmd_config_defaults(&cfg);
	ck_assert_int_eq(rte_eth_dev_info_get(pid, &info), 0);
	ck_assert_int_eq(
	        moq_pmd_port_plan(pid, &cfg, 1, 1, RTE_MBUF_DEFAULT_BUF_SIZE, &p, err, sizeof(err)),
	        0);
	ck_assert_str_eq(p.profile->name, "ring");
	ck_assert_str_eq(p.driver, "net_ring");
	ck_assert_uint_eq(p.nb_rxd, 1024);
	/* net_ring reports no offloads: none may be requested */
	ck_assert_uint_eq(p.rx_offloads & ~info.rx_offload_capa, 0);
	ck_assert_uint_eq(p.tx_offloads & ~info.tx_offload_capa, 0);
	ck_assert_uint_eq(p.rss_hf & ~info.flow_type_rss_offloads, 0);
	ck_assert_uint_eq(p.rss_hf, 0); /* one queue: no RSS */
	ck_assert_uint_eq(p.rx_l4_csum, (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM) != 0);
	ck_assert_uint_eq(p.fast_free,
	                  (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE) != 0);

	/* a profile by name overrides the driver's; descriptors from the config */
	snprintf(cfg.profile, sizeof(cfg.profile), "virtio");
	cfg.rx_desc = 128;
	ck_assert_int_eq(
	        moq_pmd_port_plan(pid, &cfg, 1, 1, RTE_MBUF_DEFAULT_BUF_SIZE, &p, err, sizeof(err)),
	        0);
	ck_assert_str_eq(p.profile->name, "virtio");
	ck_assert_uint_eq(p.nb_rxd, 128);
	ck_assert_uint_eq(p.nb_txd, 256);
}
END_TEST

START_TEST(plan_rejects_what_device_lacks)
{
	struct moq_pmd_config cfg;
	struct moq_pmd_port p;
	struct rte_eth_dev_info info;
	char err[MOQ_CFG_ERR_MAX], want[128];
	uint16_t pid = ring_port();

	moq_pmd_config_defaults(&cfg);
	ck_assert_int_eq(rte_eth_dev_info_get(pid, &info), 0);
	ck_assert_int_eq(moq_pmd_port_plan(pid, &cfg, info.max_rx_queues + 1, 1,
	                                   RTE_MBUF_DEFAULT_BUF_SIZE, &p, err, sizeof(err)),
	                 MOQ_ERR_CONFIG);
	snprintf(want, sizeof(want), "--queues: port %u (net_ring) has %u RX queues, %u requested",
	         pid, info.max_rx_queues, info.max_rx_queues + 1);
	ck_assert_str_eq(err, want);
	ck_assert_int_eq(moq_pmd_port_plan(pid, &cfg, 1, info.max_tx_queues + 1,
	                                   RTE_MBUF_DEFAULT_BUF_SIZE, &p, err, sizeof(err)),
	                 MOQ_ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(err, "TX queues"));
	/* a jumbo MTU on a device without scatter and 2 KiB mbufs */
	cfg.mtu = 9000;
	if (!(info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER)) {
		ck_assert_int_eq(moq_pmd_port_plan(pid, &cfg, 1, 1, RTE_MBUF_DEFAULT_BUF_SIZE, &p,
		                                   err, sizeof(err)),
		                 MOQ_ERR_CONFIG);
		ck_assert_ptr_nonnull(strstr(err, "--mtu:"));
	}
	ck_assert_int_eq(moq_pmd_port_plan(RTE_MAX_ETHPORTS - 1, &cfg, 1, 1,
	                                   RTE_MBUF_DEFAULT_BUF_SIZE, &p, err, sizeof(err)),
	                 MOQ_ERR_NOTFOUND);
}
END_TEST

START_TEST(pool_sizing)
{
	/* l3fwd: rx + tx descriptors + lcores x (burst + cache), at least 8192 */
	ck_assert_uint_eq(moq_pmd_pool_size(0, 0, 1, 0), MOQ_PMD_POOL_MIN);
	ck_assert_uint_eq(moq_pmd_pool_size(4 * 1024, 4 * 1024, 4, 1000),
	                  8192 + 4 * (MOQ_PMD_BURST + MOQ_PMD_POOL_CACHE) + 1000);
}
END_TEST

START_TEST(start_and_loopback)
{
	struct moq_pmd_config cfg;
	struct moq_pmd_port p;
	struct rte_mempool *pool;
	struct rte_mbuf *tx[8], *rx[MOQ_PMD_BURST];
	char err[MOQ_CFG_ERR_MAX];
	uint16_t pid = ring_port(), n;
	unsigned int idle;

	moq_pmd_config_defaults(&cfg);
	cfg.rx_desc = 256;
	ck_assert_int_eq(
	        moq_pmd_port_plan(pid, &cfg, 1, 1, RTE_MBUF_DEFAULT_BUF_SIZE, &p, err, sizeof(err)),
	        0);
	pool = moq_pmd_pool_create("t", p.socket, moq_pmd_pool_size(p.nb_rxd, p.nb_txd, 2, 0),
	                           RTE_MBUF_DEFAULT_BUF_SIZE);
	ck_assert_ptr_nonnull(pool);
	ck_assert_int_eq(moq_pmd_port_start(&p, pool, err, sizeof(err)), 0);
	ck_assert(p.started);
	idle = rte_mempool_in_use_count(pool);
	ck_assert_int_eq(rte_pktmbuf_alloc_bulk(pool, tx, 8), 0);
	for (int i = 0; i < 8; i++) {
		char *d = rte_pktmbuf_append(tx[i], 60);
		memset(d, i, 60);
	}
	ck_assert_uint_eq(rte_eth_tx_burst(pid, 0, tx, 8), 8);
	n = rte_eth_rx_burst(pid, 0, rx, MOQ_PMD_BURST);
	ck_assert_uint_eq(n, 8);
	for (int i = 0; i < n; i++) {
		ck_assert_uint_eq(rte_pktmbuf_pkt_len(rx[i]), 60);
		ck_assert_uint_eq(*rte_pktmbuf_mtod(rx[i], uint8_t *), i);
	}
	rte_pktmbuf_free_bulk(rx, n);
	ck_assert_uint_eq(rte_mempool_in_use_count(pool), idle);
	rte_eth_dev_stop(pid); /* keep the port for other tests: stop, not close */
	p.started = 0;
	rte_mempool_free(pool);
}
END_TEST

Suite *pmd_config_eal_suite(void);

Suite *pmd_config_eal_suite(void)
{
	Suite *s = suite_create("pmd_config_eal");
	TCase *tc = tcase_create("port");

	tcase_add_test(tc, plan_follows_device);
	tcase_add_test(tc, plan_rejects_what_device_lacks);
	tcase_add_test(tc, pool_sizing);
	tcase_add_test(tc, start_and_loopback);
	suite_add_tcase(s, tc);
	return s;
}
