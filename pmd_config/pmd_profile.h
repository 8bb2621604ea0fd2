/* SPDX-License-Identifier: MIT */
/*
 * pmd_profile.h: what each poll-mode driver needs from the relay: the EAL
 * arguments to create/bind it, descriptor counts that suit it and the quirks
 * the network stack must know (e.g. af_packet hands kernel-sent UDP up with a
 * partial checksum). One table; docs/DEPLOY.md shows the same table and a test
 * keeps the two in step. EAL-free.
 */
#ifndef MOQ_PMD_CONFIG_PMD_PROFILE_H
#define MOQ_PMD_CONFIG_PMD_PROFILE_H

#include <stdint.h>

/* Quirks (moq_pmd_profile.flags). */
#define MOQ_PMD_F_VIRTUAL (1u << 0) /* a vdev: no PCI, works with --no-huge */
#define MOQ_PMD_F_L4_PARTIAL                                                                       \
	(1u << 1) /* RX UDP may carry a partial (unfolded pseudo-header) checksum */
#define MOQ_PMD_F_NO_RSS       (1u << 2) /* one RX queue per port is all that spreads traffic */
#define MOQ_PMD_F_KERNEL_IFACE (1u << 3) /* creates or uses a kernel interface (needs root) */
#define MOQ_PMD_F_NEEDS_PEER   (1u << 4) /* needs a peer process (memif) */
#define MOQ_PMD_F_BIFURCATED   (1u << 5) /* kernel driver stays bound (mlx5): no vfio-pci */

struct moq_pmd_profile {
	const char *name;     /* profile name used by --profile */
	const char *driver;   /* rte_eth_dev_info.driver_name it applies to */
	const char *eal_args; /* typical EAL arguments */
	uint16_t rx_desc;     /* default descriptors per RX queue */
	uint16_t tx_desc;     /* default descriptors per TX queue */
	uint32_t flags;       /* MOQ_PMD_F_* */
	const char *tuning;   /* one line of advice, shown in DEPLOY.md */
};

/*
 * moq_pmd_profile_by_name: the profile called @name ("tap", "mlx5", ...), or
 * NULL. Static storage.
 */
const struct moq_pmd_profile *moq_pmd_profile_by_name(const char *name);

/*
 * moq_pmd_profile_by_driver: the profile for the PMD @driver_name (as
 * reported by rte_eth_dev_info_get), or the generic profile when none
 * matches. Never NULL. Static storage.
 */
const struct moq_pmd_profile *moq_pmd_profile_by_driver(const char *driver_name);

/*
 * moq_pmd_profile_at: the @i-th profile of the table, or NULL past its end
 * (to list them all).
 */
const struct moq_pmd_profile *moq_pmd_profile_at(unsigned int i);

#endif /* MOQ_PMD_CONFIG_PMD_PROFILE_H */
