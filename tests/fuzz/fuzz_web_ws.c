/* SPDX-License-Identifier: MIT */
/*
 * fuzz_web_ws.c: libFuzzer target for web/http.c's WebSocket framing (RFC
 * 6455, 5): wslay's frame parser as the listener drives it (ws_input: masks,
 * opcodes, fragmentation, control frames, the record size bound) and the
 * qmux records the messages carry, run dry (moq_web_ws_parse: no node, no
 * socket), the bytes arriving in reads of a size the input picks. Every
 * record built must fit MOQ_QMUX_MAX_SEND_RECORD (checked inside).
 */
#include <stdint.h>
#include <stdlib.h>

#include "web.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int rc = moq_web_ws_parse(data, size);

	if (rc != 0 && rc != MOQ_ERR_PROTO)
		abort();
	return 0;
}
