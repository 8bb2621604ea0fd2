/* SPDX-License-Identifier: MIT */
/*
 * fuzz_web_qmux.c: libFuzzer target for web/qmux.c (and the WebSocket
 * subprotocol choice of web/ws.c). The input is a series of records, each
 * a 2-byte length and its bytes, fed to a server engine (the first one is
 * usually its peer's transport parameters); the engine's callbacks answer
 * like a moq-lite session would (write on the streams it hears of, reset
 * what is stopped), and every record it builds is checked against the
 * peer's max_record_size and then "written".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "web.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct moq_qmux *Q;
static uint8_t payload[70000];
/* streams the harness opened this input: bounded like a session's group
 * streams (moq.h, max_group_streams), else every record_done opens one and
 * the stream table, not the engine, is what gets fuzzed */
static unsigned opened;

static void check(int cond)
{
	if (!cond)
		abort();
}

static void f_data(void *u, int64_t sid, const uint8_t *d, size_t len, int fin)
{
	struct iovec v = {payload, len % sizeof(payload)};

	(void)u, (void)d, (void)fin;
	moq_qmux_stream_write(Q, sid, &v, 1, fin);
}

static void f_stop(void *u, int64_t sid, uint64_t code)
{
	(void)u;
	moq_qmux_stream_reset(Q, sid, code);
}

static void f_closed(void *u, uint64_t code, int app, int local)
{
	(void)u, (void)code, (void)app, (void)local;
}

static void f_writable(void *u)
{
	int64_t sid;
	struct iovec v = {payload, 3000};

	(void)u;
	if (opened < 64 && moq_qmux_stream_open(Q, 0, &sid) == 0) {
		opened++;
		moq_qmux_stream_write(Q, sid, &v, 1, 1);
	}
}

static const struct moq_qmux_callbacks cb = {
        .stream_data = f_data,
        .stream_stop_sending = f_stop,
        .writable = f_writable,
        .closed = f_closed,
};

static void drain(void)
{
	struct iovec iov[80];
	size_t len;
	const struct moq_qmux_params *pp = moq_qmux_peer_params(Q);
	uint64_t max = pp ? pp->max_record_size : MOQ_QMUX_MIN_RECORD;

	for (int i = 0; i < 64; i++) {
		int n = moq_qmux_next_record(Q, iov, 80, &len);
		size_t sum = 0;

		check(n >= 0);
		if (n == 0)
			return;
		for (int k = 0; k < n; k++)
			sum += iov[k].iov_len;
		check(sum == len && len <= max && len <= MOQ_QMUX_MAX_SEND_RECORD);
		moq_qmux_record_done(Q, 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct moq_qmux_cfg c;
	const char *name;

	memset(&c, 0, sizeof(c));
	c.server = 1;
	c.cb = &cb;
	opened = 0;
	Q = moq_qmux_new(&c, 0);
	check(Q != NULL);
	while (size >= 2) {
		size_t n = (size_t)data[0] << 8 | data[1];
		int rc;

		data += 2;
		size -= 2;
		if (n > size)
			n = size;
		rc = moq_qmux_recv_record(Q, data, n, 1);
		check(rc == 0 || rc == MOQ_ERR_PROTO || rc == MOQ_ERR_CLOSED);
		check(rc != MOQ_ERR_PROTO || moq_qmux_closing(Q));
		drain();
		moq_qmux_timers(Q, 2);
		data += n;
		size -= n;
	}
	moq_qmux_free(Q);
	/* the rest as an offered Sec-WebSocket-Protocol list */
	moq_ws_select((const char *)data, size, &name);
	return 0;
}
