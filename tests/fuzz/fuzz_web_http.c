/* SPDX-License-Identifier: MIT */
/*
 * fuzz_web_http.c: libFuzzer target for web/http.c's request handling:
 * http_parser with the header capture, the WebSocket upgrade checks, the
 * route decisions (/announced, /fetch path and group parsing, percent
 * decoding), run dry (moq_web_req_parse: no node, no socket). The answer
 * must be a status code, or 0 for an incomplete request.
 */
#include <stdint.h>
#include <stdlib.h>

#include "web.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int code = moq_web_req_parse(data, size);

	if (code != 0 && (code < 100 || code > 599))
		abort();
	return 0;
}
