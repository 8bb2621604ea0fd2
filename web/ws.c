/*
 * ws.c: WebSocket (RFC 6455) on the listener's connections (web.h): the
 * opening handshake's accept key and subprotocol choice, frames in (parsed
 * by wslay's frame layer, no I/O: it is fed the bytes read; each binary
 * message one qmux record), control frames out, and the header and masking
 * of frames we send (a header we write and a payload handed to sendmsg as
 * it is: zero copy from the cache, where wslay's send path wants the
 * payload in one piece).
 */
#include "web_int.h"

#include <stdlib.h>
#include <string.h>

#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/hash.h>
#include <wolfssl/wolfcrypt/sha.h>

#include "codec.h"
#include "ietf_session.h"

/* RFC 6455, 1.3: the GUID appended to Sec-WebSocket-Key. */
static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

void web_b64(const uint8_t *in, size_t n, char *out)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		out[o++] = t[(v >> 18) & 63];
		out[o++] = t[(v >> 12) & 63];
		out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? t[v & 63] : '=';
	}
	out[o] = 0;
}

int moq_ws_accept_key(const char *key, size_t len, char out[29])
{
	uint8_t buf[128], h[WC_SHA_DIGEST_SIZE];

	/* RFC 6455, 4.1: a base64 16-byte nonce (24 characters) */
	if (key == NULL || len == 0 || len + sizeof(ws_guid) > sizeof(buf))
		return MOQ_ERR_INVAL;
	memcpy(buf, key, len);
	memcpy(buf + len, ws_guid, sizeof(ws_guid) - 1);
	if (wc_ShaHash(buf, (word32)(len + sizeof(ws_guid) - 1), h) != 0)
		return MOQ_ERR_INVAL;
	web_b64(h, sizeof(h), out);
	return 0;
}

size_t moq_ws_header(uint8_t out[10], unsigned opcode, uint64_t len)
{
	/* RFC 6455, 5.2: FIN, opcode; a server's frames are not masked */
	out[0] = (uint8_t)(0x80 | (opcode & 0x0f));
	if (len < 126) {
		out[1] = (uint8_t)len;
		return 2;
	}
	if (len <= 0xffff) {
		out[1] = 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		return 4;
	}
	out[1] = 127;
	for (int i = 0; i < 8; i++)
		out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
	return 10;
}

/* BINDINGS.md, section 2: the relay's preference, qmux-01 with lite-06 first
 * (as moq-relay), then lite-05. */
static const struct {
	const char *name;
	int version;
} ws_protos[] = {
        {"qmux-01.moq-lite-06", MOQ_LITE_06},
        {"qmux-01.moq-lite-05", MOQ_LITE_05},
        {"qmux-01.moq-lite-04", MOQ_LITE_04},
        {"qmux-01.moq-lite-03", MOQ_LITE_03},
        /* IETF moq-transport (ietf_session.c), after moq-lite */
        {"qmux-01.moqt-20", MOQ_VERSION_IETF(20)},
        {"qmux-01.moqt-19", MOQ_VERSION_IETF(19)},
        {"qmux-01.moqt-18", MOQ_VERSION_IETF(18)},
        {"qmux-01.moqt-17", MOQ_VERSION_IETF(17)},
        {"qmux-01.moqt-16", MOQ_VERSION_IETF(16)},
        {"qmux-01.moqt-15", MOQ_VERSION_IETF(15)},
        {"qmux-01.moq-00", MOQ_VERSION_IETF(14)},
};

int moq_ws_select(const char *offered, size_t len, const char **name)
{
	for (unsigned int k = 0; k < sizeof(ws_protos) / sizeof(ws_protos[0]); k++) {
		size_t nl = strlen(ws_protos[k].name), i = 0;

		while (i < len) {
			size_t a, b;

			while (i < len &&
			       (offered[i] == ' ' || offered[i] == '\t' || offered[i] == ','))
				i++;
			a = i;
			while (i < len && offered[i] != ',')
				i++;
			b = i;
			while (b > a && (offered[b - 1] == ' ' || offered[b - 1] == '\t'))
				b--;
			if (b - a == nl && memcmp(offered + a, ws_protos[k].name, nl) == 0) {
				*name = ws_protos[k].name;
				return ws_protos[k].version;
			}
		}
	}
	return MOQ_ERR_NOTFOUND;
}

void web_ws_mask(uint8_t *dst, const uint8_t *src, size_t n, const uint8_t k[4], size_t off)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i] ^ k[(off + i) & 3];
}

/* A client's masking key (RFC 6455, 5.3: unpredictable to scripts; this
 * client runs no scripts, a xorshift of the connection's seed will do). */
void web_mask_key(struct wconn *c, uint8_t k[4])
{
	uint32_t x = c->mask_seed;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	c->mask_seed = x;
	memcpy(k, &x, 4);
}

/* A control frame (close, pong) of @n <= 125 bytes, masked by a client. */
void web_ws_ctl(struct wconn *c, unsigned int op, const uint8_t *p, size_t n)
{
	uint8_t f[2 + 4 + 125];
	size_t o = moq_ws_header(f, op, n);

	if (c->client) {
		uint8_t *k = f + o;

		f[1] |= 0x80;
		web_mask_key(c, k);
		o += 4;
		web_ws_mask(f + o, p, n, k, 0);
	} else {
		memcpy(f + o, p, n);
	}
	web_out_put(c, f, o + n);
}

void web_ws_close_frame(struct wconn *c, unsigned int code)
{
	uint8_t f[2];

	if (c->ws_close_sent)
		return;
	c->ws_close_sent = 1;
	/* RFC 6455, 5.5.1: the status code, big-endian */
	f[0] = (uint8_t)(code >> 8);
	f[1] = (uint8_t)code;
	web_ws_ctl(c, 0x8, f, sizeof(f));
	c->close_after = 1;
}

/* --- WebSocket input ----------------------------------------------------- */

static ssize_t wsl_recv(uint8_t *buf, size_t len, int flags, void *user)
{
	struct wconn *c = user;
	size_t n = c->inlen - c->inoff;

	(void)flags;
	if (n == 0)
		return -1; /* WSLAY_ERR_WANT_READ */
	if (n > len)
		n = len;
	memcpy(buf, c->in + c->inoff, n);
	c->inoff += n;
	return (ssize_t)n;
}

static ssize_t wsl_send(const uint8_t *d, size_t len, int flags, void *user)
{
	(void)d, (void)len, (void)flags, (void)user;
	return -1; /* frames out are written by conn_flush */
}

static int wsl_mask(uint8_t *buf, size_t len, void *user)
{
	(void)buf, (void)len, (void)user;
	return -1;
}

const struct wslay_frame_callbacks web_wsl_cb = {wsl_send, wsl_recv, wsl_mask};

/* A WebSocket-level failure: the qmux CONNECTION_CLOSE with @qcode first,
 * then the WebSocket Close with @ws_code (conn_flush). */
static void ws_fail(struct wconn *c, uint64_t qcode, unsigned int ws_code)
{
	c->w->st.closes_protocol++;
	c->ws_code = ws_code;
	if (c->q != NULL)
		moq_qmux_abort(c->q, qcode);
	web_mark(c);
}

void web_ws_input(struct wconn *c, uint64_t now)
{
	struct wslay_frame_iocb io;

	while (!c->dead && !c->close_after && (c->q == NULL || !moq_qmux_closing(c->q))) {
		ssize_t r;

		memset(&io, 0, sizeof(io));
		r = wslay_frame_recv(c->wsf, &io);
		if (r == WSLAY_ERR_WANT_READ)
			break;
		if (r < 0) {
			ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_PROTOCOL);
			return;
		}
		if (c->frame_left == 0) { /* a new frame */
			c->frame_left = io.payload_length;
			c->frame_op = io.opcode;
			c->ctllen = 0;
			/* RFC 6455, 5.1 / 5.2: a client masks; no extensions */
			if (io.mask == c->client || io.rsv != 0) {
				ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_PROTOCOL);
				return;
			}
			if (io.opcode == 0x1) { /* text: not qmux (@moq/qmux: 1003) */
				ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_DATA);
				return;
			}
			if (io.opcode == 0x2 || io.opcode == 0x0) {
				if ((io.opcode == 0x2) == c->in_msg) { /* RFC 6455, 5.4 */
					ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_PROTOCOL);
					return;
				}
				if (io.opcode == 0x2) {
					c->in_msg = 1;
					c->reclen = 0;
				}
				/* qmux-01, 5: a record over our max_record_size */
				if (c->reclen + io.payload_length > REC_CAP) {
					ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_TOO_BIG);
					return;
				}
			} else if (io.opcode < 0x8 || io.payload_length > 125) {
				ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_PROTOCOL);
				return;
			}
		}
		if (io.data_length > c->frame_left) {
			ws_fail(c, MOQ_QMUX_PROTOCOL_VIOLATION, WS_CLOSE_PROTOCOL);
			return;
		}
		c->frame_left -= io.data_length;
		if (c->frame_op == 0x2 || c->frame_op == 0x0) {
			memcpy(c->rec + c->reclen, io.data, io.data_length);
			c->reclen += io.data_length;
		} else {
			memcpy(c->ctl + c->ctllen, io.data, io.data_length);
			c->ctllen += io.data_length;
		}
		if (c->frame_left > 0)
			continue;
		/* the frame is complete */
		if (c->frame_op == 0x9) { /* ping: pong with its payload */
			web_ws_ctl(c, 0xA, c->ctl, c->ctllen);
		} else if (c->frame_op == 0x8) {
			/* the peer closes: the session ends (no qmux close came) */
			if (c->q != NULL && !moq_qmux_closing(c->q))
				moq_qmux_close(c->q, 0);
			c->sclose_local = 0;
			web_ws_close_frame(c, WS_CLOSE_NORMAL);
			return;
		} else if ((c->frame_op == 0x2 || c->frame_op == 0x0) && io.fin) {
			int rc;

			c->in_msg = 0;
			rc = moq_qmux_recv_record(c->q, c->rec, c->reclen, now);
			web_mark(c);
			if (rc == MOQ_ERR_PROTO)
				c->w->st.closes_protocol++;
		}
	}
}

int moq_web_ws_parse(const uint8_t *d, size_t n)
{
	struct moq_web *w = calloc(1, sizeof(*w));
	struct wconn *c = calloc(1, sizeof(*c));
	uint64_t now = 1;
	int rc = 0;

	if (w == NULL || c == NULL)
		goto fail;
	w->dry = 1;
	c->w = w;
	c->fd = -1;
	c->file_fd = -1;
	c->st = C_WS;
	if (wslay_frame_context_init(&c->wsf, &web_wsl_cb, c) != 0 ||
	    web_qmux_start(c, 1, now) != 0)
		goto fail;
	/* the first byte: how the bytes arrive (1..256 per read) */
	while (n > 1 && !c->dead && !c->close_after && !moq_qmux_closing(c->q)) {
		size_t k = (size_t)d[0] + 1;
		struct iovec iov[REC_IOV];
		size_t len;

		if (k > n - 1)
			k = n - 1;
		if (c->inoff == c->inlen)
			c->inoff = c->inlen = 0;
		if (k > IN_CAP - c->inlen)
			k = IN_CAP - c->inlen;
		memcpy(c->in + c->inlen, d + 1, k);
		c->inlen += k;
		d += k;
		n -= k;
		web_ws_input(c, now++);
		/* what would be written: taken at once */
		c->outoff = c->outlen = 0;
		while (moq_qmux_next_record(c->q, iov, REC_IOV, &len) > 0) {
			if (len > MOQ_QMUX_MAX_SEND_RECORD)
				abort();
			moq_qmux_record_done(c->q, now);
		}
	}
	rc = c->w->st.closes_protocol > 0 ? MOQ_ERR_PROTO : 0;
	moq_qmux_free(c->q);
	wslay_frame_context_free(c->wsf);
	free(c);
	free(w);
	return rc;
fail:
	if (c != NULL && c->wsf != NULL)
		wslay_frame_context_free(c->wsf);
	free(c);
	free(w);
	return MOQ_ERR_NOMEM;
}
