/* SPDX-License-Identifier: MIT */
/*
 * check_main_eal.c: the main of a unit test binary whose suite needs EAL.
 * EAL initialises once per process, so these suites run without fork, in one
 * process, on virtual devices only: --no-huge, --no-pci, a net_ring port and a
 * file prefix of their own. Extra EAL arguments can be given in
 * MOQDP_TEST_EAL (split on spaces).
 */
#define _GNU_SOURCE /* nftw */
#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_lcore.h>

#ifndef MOQ_SUITE
#error "MOQ_SUITE must name the suite function"
#endif

Suite *MOQ_SUITE(void);

/* A suite that needs more lcores than 0-1 (e.g. several relay workers)
 * defines this and returns an EAL --lcores list; it is weak, so the other
 * suites link without it. */
const char *moq_suite_lcores(void) __attribute__((weak));

#define MAX_EAL_ARGS 32

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int main(int argc, char **argv)
{
	char prefix[64], rundir[256], *eal_argv[MAX_EAL_ARGS];
	int eal_argc = 0, failed;
	char *extra = getenv("MOQDP_TEST_EAL");
	SRunner *sr;

	(void)argc;
	snprintf(prefix, sizeof(prefix), "--file-prefix=moqdp-test-%d", (int)getpid());
	eal_argv[eal_argc++] = argv[0];
	eal_argv[eal_argc++] = "--no-huge";
	eal_argv[eal_argc++] = "-m";
	eal_argv[eal_argc++] = "256";
	eal_argv[eal_argc++] = "--no-pci";
	eal_argv[eal_argc++] = "--no-telemetry";
	eal_argv[eal_argc++] = "--log-level=lib.eal:error";
	if (moq_suite_lcores != NULL) {
		eal_argv[eal_argc++] = "--lcores";
		eal_argv[eal_argc++] = (char *)moq_suite_lcores();
	} else {
		eal_argv[eal_argc++] = "-l";
		eal_argv[eal_argc++] = "0-1";
	}
	eal_argv[eal_argc++] = "--vdev=net_ring0";
	eal_argv[eal_argc++] = prefix;
	if (extra != NULL) {
		for (char *t = strtok(extra, " "); t && eal_argc < MAX_EAL_ARGS;
		     t = strtok(NULL, " "))
			eal_argv[eal_argc++] = t;
	}
	if (rte_eal_init(eal_argc, eal_argv) < 0) {
		/* TAP: a plan of zero and a reason, so meson reports it. */
		printf("1..0 # SKIP EAL could not initialise\n");
		fprintf(stderr, "rte_eal_init failed\n");
		return EXIT_FAILURE;
	}

	sr = srunner_create(MOQ_SUITE());
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_set_tap(sr, "/dev/stdout");
	srunner_run_all(sr, CK_SILENT);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	/* EAL leaves its runtime directory (config, fbarrays) behind: remove it,
	 * or every run of the suite adds one to /var/run/dpdk. */
	snprintf(rundir, sizeof(rundir), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	if (rundir[0] != '\0')
		nftw(rundir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
