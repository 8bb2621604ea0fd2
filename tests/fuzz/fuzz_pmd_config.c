/* SPDX-License-Identifier: MIT */
/*
 * fuzz_pmd_config.c: libFuzzer target for the relay's option parsers: the
 * input is split at NUL bytes into "--key value" argument pairs (a config
 * file is the same code path per line). A failed parse must leave a one-line
 * error; a successful one a configuration that passes the cross-key checks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pmd_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *noenv[] = {NULL};
	char *buf = malloc(size + 1), *argv[64];
	struct moq_pmd_config cfg;
	char err[MOQ_CFG_ERR_MAX];
	int argc = 0, rc;
	uint64_t v;
	struct moq_cfg_queue q[8];
	unsigned int nq;
	struct moq_cfg_addr a;

	memcpy(buf, data, size);
	buf[size] = '\0';
	/* the single-value parsers on the whole input */
	moq_pmd_parse_duration(buf, &v);
	moq_pmd_parse_size(buf, &v);
	moq_pmd_parse_queues(buf, q, 8, &nq);
	moq_pmd_parse_addr(buf, &a);
	for (size_t i = 0; i <= size && argc < 64;) {
		char *s = buf + i;
		size_t l = strlen(s);

		/* no --config: the fuzzer must not open files */
		if (strstr(s, "config") == NULL)
			argv[argc++] = s;
		i += l + 1;
	}
	err[0] = '\0';
	rc = moq_pmd_config_parse(&cfg, argc, argv, noenv, err, sizeof(err));
	if (rc != 0 && (err[0] == '\0' || strchr(err, '\n') != NULL))
		abort();
	if (rc == 0 && moq_pmd_config_check(&cfg, err, sizeof(err)) != 0)
		abort();
	free(buf);
	return 0;
}
