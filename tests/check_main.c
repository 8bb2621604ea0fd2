/* SPDX-License-Identifier: MIT */
/*
 * check_main.c: the main of a unit test binary. Runs the one Check suite
 * named by MOQ_SUITE and writes TAP to stdout (meson reads it). Exits nonzero
 * when a test failed.
 */
#include <check.h>
#include <stdlib.h>

#ifndef MOQ_SUITE
#error "MOQ_SUITE must name the suite function"
#endif

Suite *MOQ_SUITE(void);

int main(void)
{
	SRunner *sr = srunner_create(MOQ_SUITE());
	int failed;

	srunner_set_tap(sr, "/dev/stdout");
	srunner_run_all(sr, CK_SILENT);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
