/* SPDX-License-Identifier: MIT */
/*
 * fuzz_auth.c: libFuzzer target for auth/'s parsers (tokens, JSON, JWK).
 * The first byte picks what the rest is:
 *
 *   0: a lite-05 SETUP Path ("room?jwt=..."), verified as it comes (the
 *      query split, base64url, the header JSON, the signature check);
 *   1: a header and claims JSON separated by a NUL, base64url-encoded and
 *      signed with the target's HS256 key, so the claims parser, expiry,
 *      scope and root narrowing see fuzzed JSON behind a good signature;
 *      the connection path follows a second NUL;
 *   2: a JWK file (JSON or base64url of it), read through a memfd.
 *
 * A verified token must give a grant whose paths are normalised (a path may
 * hold any byte, NUL included: lengths are carried, never strlen).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/hmac.h>

#include "auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char key_json[] = "{\"kty\":\"oct\",\"alg\":\"HS256\",\"kid\":\"fuzz\","
                               "\"k\":\"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY\","
                               "\"scope\":{\"root\":\"\",\"put\":[\"\"],\"get\":[\"a\",\"b/c\"]}}";
static const char secret[] = "0123456789abcdef0123456789abcdef";

static uint64_t fixed_clock(void *ctx)
{
	(void)ctx;
	return 1700000000ull * 1000000000ull;
}

static int memfd_with(const void *p, size_t len, char *path, size_t cap)
{
	int fd = memfd_create("fuzz_auth", 0);

	if (fd < 0)
		return -1;
	if (len && write(fd, p, len) != (ssize_t)len) {
		close(fd);
		return -1;
	}
	snprintf(path, cap, "/proc/self/fd/%d", fd);
	return fd;
}

static struct moq_auth *the_auth(void)
{
	static struct moq_auth *a;
	char path[64], err[256];
	int fd;

	if (a)
		return a;
	fd = memfd_with(key_json, strlen(key_json), path, sizeof(path));
	if (fd < 0)
		abort();
	a = moq_auth_create(&(struct moq_auth_cfg){.key = path,
	                                           .public_prefixes = "pub,x/y",
	                                           .clock = fixed_clock},
	                    err, sizeof(err));
	close(fd);
	if (!a)
		abort();
	return a;
}

static size_t b64u(const uint8_t *in, size_t len, char *out)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0;

	for (size_t i = 0; i < len; i++) {
		acc = (acc << 8) | in[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			out[o++] = t[(acc >> bits) & 63];
		}
	}
	if (bits)
		out[o++] = t[(acc << (6 - bits)) & 63];
	return o;
}

static void check_grant(const struct moq_auth_grant *g)
{
	const struct moq_auth_path *v[2] = {g->put, g->get};
	uint32_t n[2] = {g->nput, g->nget};

	for (int k = 0; k < 2; k++)
		for (uint32_t i = 0; i < n[k]; i++) {
			const char *p = v[k][i].p;
			size_t l = v[k][i].len;
			/* paths may hold any byte but '/' only between segments */
			for (size_t j = 0; j < l; j++)
				if (p[j] == '/' && (j == 0 || j + 1 == l || p[j + 1] == '/'))
					abort();
			if (p[l] != 0)
				abort();
			/* a subtree allows its prefix; a pattern (auth/pattern.h)
			 * its own text read as a path, and its head is a prefix of it */
			if (v[k][i].pat) {
				if (!moq_auth_grant_allows(g, k == 0, v[k][i].pat,
				                           v[k][i].pat_len) ||
				    strncmp(v[k][i].pat, p, l) != 0)
					abort();
			} else if (!moq_auth_grant_allows(g, k == 0, p, l)) {
				abort();
			}
		}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct moq_auth *a = the_auth();
	struct moq_auth_grant *g = NULL;

	if (size < 1 || size > 4096)
		return 0;
	switch (data[0] % 3) {
	case 0:
		if (moq_auth_connect(a, (const char *)data + 1, size - 1, &g) == MOQ_AUTH_OK)
			check_grant(g);
		break;
	case 1: {
		const uint8_t *h = data + 1, *c, *p;
		size_t rest = size - 1, hl, cl, pl;
		char *tok = malloc(2 * size + 64);
		uint8_t mac[32];
		Hmac m;
		size_t n;

		c = memchr(h, 0, rest);
		if (!c || !tok) {
			free(tok);
			break;
		}
		hl = (size_t)(c - h);
		c++;
		p = memchr(c, 0, rest - hl - 1);
		cl = p ? (size_t)(p - c) : rest - hl - 1;
		pl = p ? rest - hl - 1 - cl - 1 : 0;
		n = b64u(h, hl, tok);
		tok[n++] = '.';
		n += b64u(c, cl, tok + n);
		if (wc_HmacInit(&m, NULL, INVALID_DEVID) == 0 &&
		    wc_HmacSetKey(&m, WC_SHA256, (const uint8_t *)secret, 32) == 0 &&
		    wc_HmacUpdate(&m, (const uint8_t *)tok, (word32)n) == 0 &&
		    wc_HmacFinal(&m, mac) == 0) {
			tok[n++] = '.';
			n += b64u(mac, 32, tok + n);
			if (moq_auth_verify(a, p ? (const char *)p + 1 : "", pl, tok, n, &g) ==
			    MOQ_AUTH_OK)
				check_grant(g);
		}
		wc_HmacFree(&m);
		free(tok);
		break;
	}
	default: {
		char path[64], err[256];
		int fd = memfd_with(data + 1, size - 1, path, sizeof(path));
		struct moq_auth *k;

		if (fd < 0)
			break;
		k = moq_auth_create(&(struct moq_auth_cfg){.key = path, .clock = fixed_clock}, err,
		                    sizeof(err));
		close(fd);
		if (!k && (!err[0] || strchr(err, '\n')))
			abort(); /* a refusal is one line */
		moq_auth_destroy(k);
		break;
	}
	}
	moq_auth_grant_free(g);
	return 0;
}
