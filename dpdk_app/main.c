/* SPDX-License-Identifier: MIT */
/*
 * main.c: moqdp-relay [EAL args] -- [relay args]
 *
 * The relay arguments are parsed first (no EAL needed to reject a bad one),
 * then EAL, then the relay is built and run. SIGINT/SIGTERM stop it,
 * SIGQUIT drains it, SIGHUP reloads the certificate. As in DPDK's examples,
 * rte_exit is used only during start-up.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>

#include "pmd_config.h"
#include "relay.h"

static struct moq_relay *relay;
static volatile sig_atomic_t early_quit;

static void on_signal(int sig)
{
	if (relay == NULL) {
		early_quit = 1;
		return;
	}
	if (sig == SIGQUIT)
		moq_relay_drain(relay);
	else if (sig == SIGHUP)
		moq_relay_reload(relay);
	else
		moq_relay_quit(relay);
}

static void usage(const char *prog)
{
	printf("usage: %s [EAL args] -- [relay args]\n"
	       "  e.g. %s -l 0-1 --vdev=net_tap0,iface=moqdp0 --no-pci -- --listen 10.0.0.2/24\n\n"
	       "%s",
	       prog, prog, moq_pmd_config_usage());
}

int main(int argc, char **argv)
{
	struct moq_pmd_config cfg;
	char err[MOQ_CFG_ERR_MAX];
	struct sigaction sa;
	int dash = argc, ret;

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			dash = i;
			break;
		}
	for (int i = dash + 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(argv[0]);
			return 0;
		}
	if (moq_pmd_config_parse(&cfg, argc - dash - 1 > 0 ? argc - dash - 1 : 0, argv + dash + 1,
	                         NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "moqdp-relay: %s\n", err);
		return 2;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	ret = rte_eal_init(dash, argv);
	if (ret < 0)
		rte_exit(EXIT_FAILURE, "EAL: cannot initialise: %s\n", rte_strerror(rte_errno));

	relay = moq_relay_create(&cfg, err, sizeof(err));
	if (relay == NULL) {
		fprintf(stderr, "moqdp-relay: %s\n", err);
		rte_eal_cleanup();
		return 1;
	}
	{
		struct moq_relay_stats s;
		char fp[100];

		moq_relay_stats(relay, &s);
		moq_relay_fingerprint(relay, fp, sizeof(fp));
		fprintf(stderr,
		        "moqdp-relay: %s backend, %u port(s), %u worker(s), udp port %u, mgmt %s\n"
		        "moqdp-relay: certificate sha-256 %s\n",
		        cfg.backend == MOQ_CFG_BACKEND_DPDK ? "dpdk" : "kernel", s.ports, s.workers,
		        cfg.udp_port, cfg.mgmt[0] ? cfg.mgmt : "off", fp);
		for (unsigned int i = 0; i < s.ports; i++) {
			struct rte_ether_addr mac;
			int pid = moq_relay_port_id(relay, i);

			rte_eth_macaddr_get((uint16_t)pid, &mac);
			fprintf(stderr, "moqdp-relay: port %d mac " RTE_ETHER_ADDR_PRT_FMT "\n",
			        pid, RTE_ETHER_ADDR_BYTES(&mac));
		}
	}
	if (early_quit)
		moq_relay_quit(relay);
	moq_relay_run(relay);
	moq_relay_destroy(relay);
	relay = NULL;
	rte_eal_cleanup();
	return 0;
}
