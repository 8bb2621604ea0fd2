/* SPDX-License-Identifier: MIT */
/*
 * ws.c: the WebSocket pieces the relay writes itself (web.h): the opening
 * handshake's accept key and subprotocol choice, and the header of a server
 * frame. Received frames are parsed by wslay (http.c); frames we send are a
 * header we write and a payload we hand to writev as it is (zero copy from
 * the cache: wslay's send path wants the payload in one piece).
 */
#include "web.h"

#include <string.h>

#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/hash.h>
#include <wolfssl/wolfcrypt/sha.h>

#include "codec.h"

/* RFC 6455, 1.3: the GUID appended to Sec-WebSocket-Key. */
static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

static void b64(const uint8_t *in, size_t n, char *out)
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
	b64(h, sizeof(h), out);
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

/* BINDINGS.md, section 2: the relay's preference, qmux-01 with lite-05 first. */
static const struct {
	const char *name;
	int version;
} ws_protos[] = {
        {"qmux-01.moq-lite-05", MOQ_LITE_05},
        {"qmux-01.moq-lite-04", MOQ_LITE_04},
        {"qmux-01.moq-lite-03", MOQ_LITE_03},
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
