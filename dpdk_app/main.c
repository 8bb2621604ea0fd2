/* SPDX-License-Identifier: MIT */
/*
 * main.c: moqdp-relay [EAL args] -- [relay args]
 *
 * The relay arguments are parsed first (no EAL needed to reject a bad one),
 * then EAL, then the relay is built and run. SIGINT/SIGTERM stop it,
 * SIGQUIT drains it, SIGHUP reloads the certificate. The handlers are in
 * place from the first line: a signal that arrives while the relay starts
 * (EAL, ports, endpoints: hundreds of ms) is kept and acted on once it runs.
 * As in DPDK's examples, rte_exit is used only during start-up.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>

#include "fastpath.h"
#include "pmd_config.h"
#include "relay.h"

/* The relay once it runs (atomic: the handler may run on any thread). */
static struct moq_relay *relay;
/* Signals caught and not yet handed to the relay (PEND_*; atomic). */
static unsigned int pending;
#define PEND_QUIT   1u
#define PEND_DRAIN  2u
#define PEND_RELOAD 4u

/* Hand the pending signals to @r (its flag setters are async-signal-safe). */
static void deliver(struct moq_relay *r)
{
	unsigned int p = __atomic_exchange_n(&pending, 0, __ATOMIC_ACQ_REL);

	if (p & PEND_QUIT)
		moq_relay_quit(r);
	if (p & PEND_DRAIN)
		moq_relay_drain(r);
	if (p & PEND_RELOAD)
		moq_relay_reload(r);
}

/* Every signal is recorded first, then delivered if the relay runs: one
 * that arrives during start-up waits in @pending for main's deliver. */
static void on_signal(int sig)
{
	struct moq_relay *r;

	__atomic_or_fetch(&pending,
	                  sig == SIGQUIT  ? PEND_DRAIN
	                  : sig == SIGHUP ? PEND_RELOAD
	                                  : PEND_QUIT,
	                  __ATOMIC_ACQ_REL);
	r = __atomic_load_n(&relay, __ATOMIC_ACQUIRE);
	if (r != NULL)
		deliver(r);
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
	struct moq_relay *r;
	struct sigaction sa;
	int dash = argc, ret;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

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

	ret = rte_eal_init(dash, argv);
	if (ret < 0)
		rte_exit(EXIT_FAILURE, "EAL: cannot initialise: %s\n", rte_strerror(rte_errno));

	r = moq_relay_create(&cfg, err, sizeof(err));
	if (r == NULL) {
		fprintf(stderr, "moqdp-relay: %s\n", err);
		rte_eal_cleanup();
		return 1;
	}
	{
		struct moq_relay_stats s;
		char fp[100], hex[65];

		moq_relay_stats(r, &s);
		moq_relay_fingerprint(r, fp, sizeof(fp));
		moq_relay_fingerprint_hex(r, hex, sizeof(hex));
		fprintf(stderr,
		        "moqdp-relay: %s backend, %u port(s), %u worker(s), udp port %u, mgmt %s\n"
		        "moqdp-relay: fast path %s, AES-128-GCM of %s\n"
		        "moqdp-relay: certificate sha-256 %s\n"
		        "moqdp-relay: certificate.sha256 %s (WebTransport: ALPN h3 on udp port "
		        "%u)\n",
		        cfg.backend == MOQ_CFG_BACKEND_DPDK ? "dpdk" : "kernel", s.ports, s.workers,
		        cfg.udp_port, cfg.mgmt[0] ? cfg.mgmt : "off", cfg.fastpath ? "on" : "off",
		        fp_aead_name(), fp, hex, cfg.udp_port);
		for (unsigned int i = 0; i < s.ports; i++) {
			struct rte_ether_addr mac;
			int pid = moq_relay_port_id(r, i);

			rte_eth_macaddr_get((uint16_t)pid, &mac);
			fprintf(stderr, "moqdp-relay: port %d mac " RTE_ETHER_ADDR_PRT_FMT "\n",
			        pid, RTE_ETHER_ADDR_BYTES(&mac));
		}
	}
	/* from here the handler delivers itself; what came before, now */
	__atomic_store_n(&relay, r, __ATOMIC_RELEASE);
	deliver(r);
	moq_relay_run(r);
	__atomic_store_n(&relay, NULL, __ATOMIC_RELEASE);
	moq_relay_destroy(r);
	rte_eal_cleanup();
	return 0;
}
