/* SPDX-License-Identifier: MIT */
/*
 * pmd_profile.c: the per-PMD profile table. Descriptor counts: 1024 RX /
 * 1024 TX is what DPDK's l3fwd uses on physical NICs (RX_DESC_DEFAULT /
 * TX_DESC_DEFAULT); virtual devices that copy through the kernel or shared
 * memory do better with fewer (a smaller pool, same throughput).
 */
#include "pmd_profile.h"

#include <stddef.h>
#include <string.h>

static const struct moq_pmd_profile profiles[] = {
        {"tap", "net_tap", "--vdev=net_tap0,iface=moqdp0 --no-pci", 512, 512,
         MOQ_PMD_F_VIRTUAL | MOQ_PMD_F_KERNEL_IFACE,
         "development and tests; one queue pair per lcore, kernel does the copies"},
        {"af_packet", "net_af_packet",
         "--vdev=net_af_packet0,iface=eth1,qpairs=2,blocksz=4096,framesz=2048,framecnt=512 "
         "--no-pci",
         512, 512, MOQ_PMD_F_VIRTUAL | MOQ_PMD_F_L4_PARTIAL | MOQ_PMD_F_KERNEL_IFACE,
         "any kernel NIC or veth; qpairs = worker lcores; UDP from the same host arrives with a "
         "partial checksum"},
        {"memif", "net_memif",
         "--vdev=net_memif0,role=server,socket=/run/moqdp/memif.sock --no-pci", 1024, 1024,
         MOQ_PMD_F_VIRTUAL | MOQ_PMD_F_NEEDS_PEER | MOQ_PMD_F_NO_RSS,
         "shared-memory link to a local client (load generator); start the relay first"},
        {"ring", "net_ring", "--vdev=net_ring0 --no-pci", 1024, 1024,
         MOQ_PMD_F_VIRTUAL | MOQ_PMD_F_NO_RSS, "in-process loopback for unit tests"},
        {"mlx5", "mlx5_pci", "-a 0000:03:00.0,mprq_en=1,rxqs_min_mprq=1 --socket-mem=2048", 1024,
         1024, MOQ_PMD_F_BIFURCATED,
         "keep the kernel mlx5_core driver bound; Multi-Packet RQ for small packets; queues per "
         "core"},
        {"ice", "net_ice", "-a 0000:5e:00.0 --socket-mem=2048", 1024, 1024, 0,
         "bind to vfio-pci; RSS on the UDP 4-tuple; a DDP package is loaded from /lib/firmware"},
        {"i40e", "net_i40e", "-a 0000:5e:00.0 --socket-mem=2048", 1024, 1024, 0,
         "bind to vfio-pci; RSS on the UDP 4-tuple"},
        {"virtio", "net_virtio", "-a 0000:00:04.0 --socket-mem=1024", 256, 256, 0,
         "cloud VMs; bind to vfio-pci (noiommu if no vIOMMU); queues <= vCPUs; ring sizes are "
         "fixed by the host"},
        {"generic", "", "-a <PCI address>", 1024, 1024, 0,
         "any other PMD: capabilities are read from the device at start"},
};

#define NB_PROFILES (sizeof(profiles) / sizeof(profiles[0]))

const struct moq_pmd_profile *moq_pmd_profile_by_name(const char *name)
{
	for (size_t i = 0; i < NB_PROFILES; i++)
		if (strcmp(profiles[i].name, name) == 0)
			return &profiles[i];
	return NULL;
}

const struct moq_pmd_profile *moq_pmd_profile_by_driver(const char *driver_name)
{
	for (size_t i = 0; i + 1 < NB_PROFILES; i++)
		if (driver_name != NULL && strcmp(profiles[i].driver, driver_name) == 0)
			return &profiles[i];
	return &profiles[NB_PROFILES - 1];
}

const struct moq_pmd_profile *moq_pmd_profile_at(unsigned int i)
{
	return i < NB_PROFILES ? &profiles[i] : NULL;
}
