/* SPDX-License-Identifier: MIT */
/*
 * test_auth.c: tokens as moq-relay mints them (auth/auth.h) and the checks
 * of every session operation (moq/access.c).
 *
 * Tokens are signed in the test with wolfCrypt (HMAC, ECDSA), by an
 * independent signer (node's crypto: the committed fixtures of
 * tests/fixtures/auth, made by mint.js there; and the openssl CLI at test
 * time when present) to catch encoding mistakes. The session tests run a
 * relay node with cfg.auth and client nodes over real QUIC joined by the
 * in-memory link, in virtual time; the relay's wall clock follows it.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/ecc.h>
#include <wolfssl/wolfcrypt/hmac.h>
#include <wolfssl/wolfcrypt/random.h>
#include <wolfssl/wolfcrypt/sha256.h>

#include "auth.h"
#include "authurl.h"
#include "link.h"
#include "pattern.h"
#include "moq.h"
#include "proc.h"

#ifndef AUTH_FIXTURES
#error "AUTH_FIXTURES must name tests/fixtures/auth"
#endif

#define MS  1000000ull
#define SEC 1000000000ull
/* the fake wall clock: 2023-11-14 22:13:20 UTC plus virtual time */
#define T0 1700000000ull

static const char secret[] = "0123456789abcdef0123456789abcdef-moqdp"; /* >= 32 bytes */
static char dir[64];
static uint64_t wall_ns = T0 * SEC;

static uint64_t fake_clock(void *ctx)
{
	(void)ctx;
	return wall_ns;
}

/* ------------------------------------------------------------- helpers */

static size_t b64u(const uint8_t *in, size_t len, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0;

	for (size_t i = 0; i < len; i++) {
		acc = (acc << 8) | in[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			out[o++] = a[(acc >> bits) & 63];
		}
	}
	if (bits)
		out[o++] = a[(acc << (6 - bits)) & 63];
	out[o] = 0;
	return o;
}

/* A JWS over @hdr and @claims (JSON texts), HMAC-SHA-2 of @hash_type with
 * @key, as moq-token's HS* keys sign. */
static char *mint_hs(const char *hdr, const char *claims, int hash_type, const char *key)
{
	static char tok[4096];
	uint8_t mac[64];
	Hmac h;
	size_t n = b64u((const uint8_t *)hdr, strlen(hdr), tok);
	int ml = hash_type == WC_SHA256 ? 32 : hash_type == WC_SHA384 ? 48 : 64;

	tok[n++] = '.';
	n += b64u((const uint8_t *)claims, strlen(claims), tok + n);
	ck_assert_int_eq(wc_HmacInit(&h, NULL, INVALID_DEVID), 0);
	ck_assert_int_eq(wc_HmacSetKey(&h, hash_type, (const uint8_t *)key, (word32)strlen(key)),
	                 0);
	ck_assert_int_eq(wc_HmacUpdate(&h, (const uint8_t *)tok, (word32)n), 0);
	ck_assert_int_eq(wc_HmacFinal(&h, mac), 0);
	wc_HmacFree(&h);
	tok[n++] = '.';
	b64u(mac, (size_t)ml, tok + n);
	return tok;
}

static char *hs256(const char *claims)
{
	return mint_hs("{\"typ\":\"JWT\",\"alg\":\"HS256\"}", claims, WC_SHA256, secret);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static char *slurp(const char *path)
{
	static char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n;

	ck_assert_msg(f != NULL, "%s", path);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	buf[n] = 0;
	return buf;
}

/* The JWK of the HS256 secret, as JSON. */
static void hs_jwk(char *out, size_t cap, const char *alg, const char *key, const char *extra)
{
	char k[128];

	b64u((const uint8_t *)key, strlen(key), k);
	snprintf(out, cap, "{\"kty\":\"oct\",\"alg\":\"%s\",\"k\":\"%s\"%s}", alg, k,
	         extra ? extra : "");
}

static void mkdirs(void)
{
	snprintf(dir, sizeof(dir), "/tmp/moqdp-test-auth-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void rmdirs(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* An auth with the HS256 key of @jwk in a file (NULL: none) and public
 * prefixes @pub (NULL: none). */
static struct moq_auth *auth_with(const char *jwk, const char *pub)
{
	char path[128], err[256] = "";
	struct moq_auth_cfg c = {.public_prefixes = pub, .clock = fake_clock};
	struct moq_auth *a;

	if (jwk) {
		snprintf(path, sizeof(path), "%s/key.jwk", dir);
		write_file(path, jwk);
		c.key = path;
	}
	a = moq_auth_create(&c, err, sizeof(err));
	ck_assert_msg(a != NULL, "%s", err);
	return a;
}

static struct moq_auth *auth_hs256(void)
{
	char jwk[256];

	hs_jwk(jwk, sizeof(jwk), "HS256", secret, NULL);
	return auth_with(jwk, NULL);
}

static int verify(struct moq_auth *a, const char *path, const char *jwt, struct moq_auth_grant **g)
{
	return moq_auth_verify(a, path, strlen(path), jwt, jwt ? strlen(jwt) : 0, g);
}

/* "put=a,b get=c" of a grant, for comparing in one assertion. */
static const char *grant_str(const struct moq_auth_grant *g)
{
	static char s[512];
	size_t n = 0;

	/* a subtree prints as its prefix, a pattern in brackets */
	n += (size_t)snprintf(s + n, sizeof(s) - n, "put=");
	for (uint32_t i = 0; i < g->nput; i++)
		n += (size_t)snprintf(s + n, sizeof(s) - n, g->put[i].pat ? "%s[%s]" : "%s%s",
		                      i ? "," : "", g->put[i].pat ? g->put[i].pat : g->put[i].p);
	n += (size_t)snprintf(s + n, sizeof(s) - n, " get=");
	for (uint32_t i = 0; i < g->nget; i++)
		n += (size_t)snprintf(s + n, sizeof(s) - n, g->get[i].pat ? "%s[%s]" : "%s%s",
		                      i ? "," : "", g->get[i].pat ? g->get[i].pat : g->get[i].p);
	return s;
}

/* Verify and compare the grant (@want NULL: expect result @rc). */
static void expect(struct moq_auth *a, const char *path, const char *jwt, int rc, const char *want)
{
	struct moq_auth_grant *g = NULL;
	int r = verify(a, path, jwt, &g);

	ck_assert_msg(r == rc, "path '%s': %s, want %s", path, moq_auth_result_str(r),
	              moq_auth_result_str(rc));
	if (rc == 0) {
		ck_assert_str_eq(grant_str(g), want);
		char norm[256];
		size_t o = 0;
		for (const char *p = path; *p; p++)
			if (*p != '/' || (o && norm[o - 1] != '/'))
				norm[o++] = *p;
		if (o && norm[o - 1] == '/')
			o--;
		norm[o] = 0;
		ck_assert_str_eq(g->root, norm);
	} else {
		ck_assert_ptr_null(g);
	}
	moq_auth_grant_free(g);
}

/* ------------------------------------------------------ token unit tests */

START_TEST(test_hs256_claims)
{
	struct moq_auth *a;
	char jwk[256], b64[512];

	mkdirs();
	a = auth_hs256();
	/* moq-relay's auth.rs test: root room/123, get [""], put ["alice"] */
	expect(a, "/room/123", hs256("{\"root\":\"room/123\",\"get\":[\"\"],\"put\":[\"alice\"]}"),
	       0, "put=room/123/alice get=room/123");
	/* put as a string, not an array */
	expect(a, "room/123", hs256("{\"root\":\"room/123\",\"get\":\"\",\"put\":\"alice\"}"), 0,
	       "put=room/123/alice get=room/123");
	/* paths are normalised on both sides */
	expect(a, "//room//123/", hs256("{\"root\":\"/room/123/\",\"put\":[\"/alice//cam/\"]}"), 0,
	       "put=room/123/alice/cam get=");
	/* a token granting nothing is refused; so is put: null */
	expect(a, "room", hs256("{\"root\":\"room\"}"), MOQ_AUTH_USELESS, NULL);
	expect(a, "room", hs256("{\"root\":\"room\",\"put\":[]}"), MOQ_AUTH_USELESS, NULL);
	expect(a, "room", hs256("{\"root\":\"room\",\"put\":null}"), MOQ_AUTH_MALFORMED, NULL);
	expect(a, "room", hs256("{\"root\":7,\"put\":\"\"}"), MOQ_AUTH_MALFORMED, NULL);
	expect(a, "room", hs256("{\"put\":[1]}"), MOQ_AUTH_MALFORMED, NULL);
	expect(a, "room", hs256("[1]"), MOQ_AUTH_MALFORMED, NULL);
	/* unknown claims are ignored; no root = "" */
	expect(a, "room", hs256("{\"get\":[\"room/a\"],\"sub\":\"x\",\"iat\":5}"), 0,
	       "put= get=room/a");
	moq_auth_destroy(a);

	/* the key file as base64url of the JSON (what moq-token's CLI writes) */
	hs_jwk(jwk, sizeof(jwk), "HS256", secret, NULL);
	{
		size_t n = b64u((const uint8_t *)jwk, strlen(jwk), b64);
		b64[n++] = '\n';
		b64[n] = 0;
	}
	a = auth_with(b64, NULL);
	expect(a, "x", hs256("{\"root\":\"x\",\"get\":\"\"}"), 0, "put= get=x");
	moq_auth_destroy(a);
	rmdirs();
}
END_TEST

/* claims.rs, authorize: grants narrowed to the connection path. */
START_TEST(test_root_narrowing)
{
	struct moq_auth *a;
	const char *t = "{\"root\":\"room\",\"put\":[\"alice\"],\"get\":[\"\"]}";

	mkdirs();
	a = auth_hs256();
	/* the path extends the root: grants containing it become the path */
	expect(a, "room/alice", hs256(t), 0, "put=room/alice get=room/alice");
	expect(a, "room/alice/cam", hs256(t), 0, "put=room/alice/cam get=room/alice/cam");
	/* a grant beside the path drops */
	expect(a, "room/bob", hs256(t), 0, "put= get=room/bob");
	/* segments, not bytes: "alice" does not grant "alicex" */
	expect(a, "room/alicex", hs256(t), 0, "put= get=room/alicex");
	/* the path is a parent of the root: the difference is prepended */
	expect(a, "", hs256(t), 0, "put=room/alice get=room");
	/* a grant beyond the path keeps what lies below it */
	expect(a, "room", hs256("{\"root\":\"room\",\"put\":[\"alice/cam\"]}"), 0,
	       "put=room/alice/cam get=");
	expect(a, "room/alice", hs256("{\"root\":\"room\",\"put\":[\"alice/cam\"]}"), 0,
	       "put=room/alice/cam get=");
	/* unrelated root, or nothing left at the path */
	expect(a, "other", hs256(t), MOQ_AUTH_ROOT, NULL);
	expect(a, "roomx", hs256(t), MOQ_AUTH_ROOT, NULL);
	expect(a, "room/bob", hs256("{\"root\":\"room\",\"put\":[\"alice\"]}"), MOQ_AUTH_ROOT,
	       NULL);
	moq_auth_destroy(a);
	rmdirs();
}
END_TEST

START_TEST(test_grant_matching)
{
	struct moq_auth *a;
	struct moq_auth_grant *g;

	mkdirs();
	a = auth_hs256();
	ck_assert_int_eq(verify(a, "", hs256("{\"put\":[\"foo\"],\"get\":[\"a/b\",\"c\"]}"), &g),
	                 0);
	ck_assert(moq_auth_grant_allows(g, 1, "foo", 3));
	ck_assert(moq_auth_grant_allows(g, 1, "foo/bar", 7));
	ck_assert(!moq_auth_grant_allows(g, 1, "foobar", 6));
	ck_assert(!moq_auth_grant_allows(g, 1, "fo", 2));
	ck_assert(!moq_auth_grant_allows(g, 0, "foo", 3));
	ck_assert(moq_auth_grant_allows(g, 0, "c/x", 3));
	ck_assert(!moq_auth_grant_allows(g, 0, "a", 1));
	/* announce interest under "a" may see a/b; under "" everything granted */
	ck_assert(moq_auth_grant_overlaps(g, 0, "a", 1));
	ck_assert(moq_auth_grant_overlaps(g, 0, "", 0));
	ck_assert(moq_auth_grant_overlaps(g, 0, "a/b/c", 5));
	ck_assert(!moq_auth_grant_overlaps(g, 0, "ab", 2));
	ck_assert(!moq_auth_grant_overlaps(g, 0, "foo", 3));
	moq_auth_grant_free(g);
	moq_auth_destroy(a);
	rmdirs();
}
END_TEST

/* auth.md, Claims: "a token is refused from its exp on and before its
 * nbf", with no leeway. */
START_TEST(test_expiry)
{
	struct moq_auth *a;
	struct moq_auth_grant *g;
	char c[128];

	mkdirs();
	a = auth_hs256();
	wall_ns = T0 * SEC - 1;
	snprintf(c, sizeof(c), "{\"get\":\"\",\"exp\":%llu}", (unsigned long long)T0);
	ck_assert_int_eq(verify(a, "", hs256(c), &g), 0); /* 1 ns before exp: valid */
	ck_assert(g->has_exp && g->exp == (int64_t)T0);
	moq_auth_grant_free(g);
	wall_ns = T0 * SEC; /* from its exp on: refused */
	expect(a, "", hs256(c), MOQ_AUTH_EXPIRED, NULL);
	snprintf(c, sizeof(c), "{\"get\":\"\",\"exp\":%llu}", (unsigned long long)T0 + 1);
	expect(a, "", hs256(c), 0, "put= get=");
	expect(a, "", hs256("{\"get\":\"\",\"exp\":-5}"), MOQ_AUTH_EXPIRED, NULL);
	expect(a, "", hs256("{\"get\":\"\",\"exp\":null}"), 0, "put= get=");
	expect(a, "", hs256("{\"get\":\"\",\"exp\":\"soon\"}"), MOQ_AUTH_MALFORMED, NULL);
	expect(a, "", hs256("{\"get\":\"\",\"exp\":1.5}"), MOQ_AUTH_MALFORMED, NULL);
	wall_ns = T0 * SEC;
	moq_auth_destroy(a);
	rmdirs();
}
END_TEST

START_TEST(test_bad_tokens)
{
	struct moq_auth *a;
	const char *claims = "{\"get\":\"\"}";
	char t[4096], *p;

	mkdirs();
	a = auth_hs256();
	/* wrong alg: the header must name the key's */
	expect(a, "", mint_hs("{\"alg\":\"HS384\"}", claims, WC_SHA384, secret), MOQ_AUTH_WRONG_ALG,
	       NULL);
	expect(a, "", mint_hs("{\"alg\":\"none\"}", claims, WC_SHA256, secret), MOQ_AUTH_WRONG_ALG,
	       NULL);
	expect(a, "", mint_hs("{\"alg\":\"ES256\"}", claims, WC_SHA256, secret), MOQ_AUTH_WRONG_ALG,
	       NULL);
	expect(a, "", mint_hs("{\"typ\":\"JWT\"}", claims, WC_SHA256, secret), MOQ_AUTH_MALFORMED,
	       NULL);
	/* another secret */
	expect(a, "",
	       mint_hs("{\"alg\":\"HS256\"}", claims, WC_SHA256,
	               "another secret of 32 bytes!!!!!!"),
	       MOQ_AUTH_BAD_SIGNATURE, NULL);
	/* tampered signature, tampered claims */
	snprintf(t, sizeof(t), "%s", hs256(claims));
	p = strrchr(t, '.') + 5;
	*p = *p == 'A' ? 'B' : 'A';
	expect(a, "", t, MOQ_AUTH_BAD_SIGNATURE, NULL);
	snprintf(t, sizeof(t), "%s", hs256("{\"get\":\"a\"}"));
	{
		/* swap in claims granting everything, keep the signature */
		char forged[4096], body[128];
		const char *d1 = strchr(t, '.'), *d2 = strrchr(t, '.');
		size_t bl = b64u((const uint8_t *)claims, strlen(claims), body);
		snprintf(forged, sizeof(forged), "%.*s.%.*s%s", (int)(d1 - t), t, (int)bl, body,
		         d2);
		expect(a, "", forged, MOQ_AUTH_BAD_SIGNATURE, NULL);
	}
	/* base64url without padding only; not base64 */
	snprintf(t, sizeof(t), "%s", hs256(claims));
	{
		char padded[4096];
		const char *d1 = strchr(t, '.');
		size_t hl = (size_t)(d1 - t);
		snprintf(padded, sizeof(padded), "%.*s%s%s", (int)hl, t,
		         hl % 4 ? "==" + (hl % 4 == 3) : "", d1);
		expect(a, "", padded, hl % 4 ? MOQ_AUTH_MALFORMED : 0, hl % 4 ? NULL : "put= get=");
	}
	snprintf(t, sizeof(t), "%s", hs256(claims));
	for (p = t; *p; p++)
		if (*p == '-' || *p == '_')
			break;
	if (*p) {
		*p = *p == '-' ? '+' : '/';
		expect(a, "", t, MOQ_AUTH_MALFORMED, NULL);
	}
	/* not three parts */
	expect(a, "", "abc", MOQ_AUTH_MALFORMED, NULL);
	expect(a, "", "a.b", MOQ_AUTH_MALFORMED, NULL);
	snprintf(t, sizeof(t), "%s.x", hs256(claims));
	expect(a, "", t, MOQ_AUTH_MALFORMED, NULL);
	/* duplicate members are refused */
	expect(a, "", hs256("{\"get\":\"a\",\"get\":\"\"}"), MOQ_AUTH_MALFORMED, NULL);
	moq_auth_destroy(a);
	rmdirs();
}
END_TEST

/* A key directory: the header's kid names {kid}.jwk. */
START_TEST(test_key_dir)
{
	char kd[128], path[192], jwk[256], err[256] = "", *t;
	struct moq_auth_cfg c = {.clock = fake_clock};
	struct moq_auth *a;

	mkdirs();
	snprintf(kd, sizeof(kd), "%s/keys", dir);
	ck_assert_int_eq(mkdir(kd, 0700), 0);
	hs_jwk(jwk, sizeof(jwk), "HS256", secret, NULL);
	snprintf(path, sizeof(path), "%s/k1.jwk", kd);
	write_file(path, jwk);
	hs_jwk(jwk, sizeof(jwk), "HS512", "the second key, also 32 bytes or more", NULL);
	snprintf(path, sizeof(path), "%s/k-2_b.jwk", kd);
	write_file(path, jwk);
	snprintf(path, sizeof(path), "%s/README", kd); /* not a key: ignored */
	write_file(path, "not a key\n");
	c.key_dir = kd;
	a = moq_auth_create(&c, err, sizeof(err));
	ck_assert_msg(a != NULL, "%s", err);
	expect(a, "",
	       mint_hs("{\"alg\":\"HS256\",\"kid\":\"k1\"}", "{\"get\":\"\"}", WC_SHA256, secret),
	       0, "put= get=");
	t = mint_hs("{\"alg\":\"HS512\",\"kid\":\"k-2_b\"}", "{\"put\":\"x\"}", WC_SHA512,
	            "the second key, also 32 bytes or more");
	expect(a, "", t, 0, "put=x get=");
	/* unknown kid, no kid, a kid that is not a file name */
	expect(a, "",
	       mint_hs("{\"alg\":\"HS256\",\"kid\":\"k3\"}", "{\"get\":\"\"}", WC_SHA256, secret),
	       MOQ_AUTH_UNKNOWN_KID, NULL);
	expect(a, "", mint_hs("{\"alg\":\"HS256\"}", "{\"get\":\"\"}", WC_SHA256, secret),
	       MOQ_AUTH_NO_KID, NULL);
	expect(a, "",
	       mint_hs("{\"alg\":\"HS256\",\"kid\":\"../k1\"}", "{\"get\":\"\"}", WC_SHA256,
	               secret),
	       MOQ_AUTH_NO_KID, NULL);
	/* the right kid with the other key's alg */
	expect(a, "",
	       mint_hs("{\"alg\":\"HS256\",\"kid\":\"k-2_b\"}", "{\"get\":\"\"}", WC_SHA256,
	               secret),
	       MOQ_AUTH_WRONG_ALG, NULL);
	moq_auth_destroy(a);
	rmdirs();
}
END_TEST

/* auth.rs, verify: public prefixes for sessions without a token. */
START_TEST(test_public)
{
	struct moq_auth *a;
	char jwk[256];

	mkdirs();
	a = auth_with(NULL, "anon");
	expect(a, "/anon", NULL, 0, "put=anon get=anon");
	expect(a, "anon/room/123", NULL, 0, "put=anon/room/123 get=anon/room/123");
	expect(a, "", NULL, 0, "put=anon get=anon");
	expect(a, "secret", NULL, MOQ_AUTH_NO_TOKEN, NULL);
	expect(a, "anonymous", NULL, MOQ_AUTH_NO_TOKEN, NULL);
	/* a token with no key configured is refused, even on a public path */
	expect(a, "anon", hs256("{\"get\":\"\"}"), MOQ_AUTH_NO_KEY, NULL);
	moq_auth_destroy(a);
	/* "" = every path; a list */
	a = auth_with(NULL, "");
	expect(a, "any/path", NULL, 0, "put=any/path get=any/path");
	moq_auth_destroy(a);
	a = auth_with(NULL, "a,b/c");
	expect(a, "b", NULL, 0, "put=b/c get=b/c");
	expect(a, "a/x", NULL, 0, "put=a/x get=a/x");
	moq_auth_destroy(a);
	/* keys and public: a present but invalid token never falls back */
	hs_jwk(jwk, sizeof(jwk), "HS256", secret, NULL);
	a = auth_with(jwk, "anon");
	expect(a, "anon", NULL, 0, "put=anon get=anon");
	expect(a, "anon",
	       mint_hs("{\"alg\":\"HS256\"}", "{\"get\":\"\"}", WC_SHA256,
	               "another secret of 32 bytes!!!!!!"),
	       MOQ_AUTH_BAD_SIGNATURE, NULL);
	expect(a, "anon", hs256("{\"root\":\"other\",\"get\":\"\"}"), MOQ_AUTH_ROOT, NULL);
	expect(a, "secret", NULL, MOQ_AUTH_NO_TOKEN, NULL);
	moq_auth_destroy(a);
	rmdirs();
}
END_TEST

/* ------------------------------------------------- patterns (pattern.h) */

/*
 * The golden vectors of moq-dev/moq rs/moq-pattern/tests/pattern.json
 * (shared by its Rust and TypeScript suites), each quoted beside its
 * check: "parse" (text -> segments or error), "matches", "contains",
 * "overlaps", "head" and "rebase".
 */
struct pv_parse {
	const char *text;
	int err;
	const char *kinds; /* L literal, * wildcard, G globstar, P partial */
};

static const struct pv_parse pv_parse[] = {
        {"", 0, ""},                   /* {"text": "", "segments": []} */
        {"a", 0, "L"},                 /* {"text": "a", literal a} */
        {"a/b.hang", 0, "LL"},         /* {"text": "a/b.hang", literal, literal} */
        {"*", 0, "*"},                 /* {"text": "*", wildcard} */
        {"**", 0, "G"},                /* {"text": "**", globstar} */
        {"a/*/**/b", 0, "L*GL"},       // {"text": "a/*" "/**" "/b", canonical a/**" "/*" "/b}
        {"**/transcode.pro", 0, "GL"}, /* {"text": "**" "/transcode.pro"} */
        {"/a", MOQ_PATTERN_EMPTY_SEGMENT, NULL},             /* "error": "empty-segment" */
        {"a/", MOQ_PATTERN_EMPTY_SEGMENT, NULL},             /* "error": "empty-segment" */
        {"a//b", MOQ_PATTERN_EMPTY_SEGMENT, NULL},           /* "error": "empty-segment" */
        {"/", MOQ_PATTERN_EMPTY_SEGMENT, NULL},              /* "error": "empty-segment" */
        {"**/**", MOQ_PATTERN_MULTIPLE_GLOBSTARS, NULL},     /* "multiple-globstars" */
        {"a/**/b/**", MOQ_PATTERN_MULTIPLE_GLOBSTARS, NULL}, /* "multiple-globstars" */
        {"***", MOQ_PATTERN_INVALID_SEGMENT, NULL},          /* "invalid-segment" */
        {"a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/a/b/c/d/e/f", 0,
         "LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL"}, /* 32 segments parse */
        {"a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/a/b/c/d/e/f/g",
         MOQ_PATTERN_TOO_MANY_SEGMENTS, NULL}, /* 33: "too-many-segments" */
        {"a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/a/b/c/d/e/f/g/a*b*c",
         MOQ_PATTERN_TOO_MANY_SEGMENTS, NULL},        /* "too-many-segments" first */
        {"*.hang", 0, "P"},                           /* partial prefix "" suffix ".hang" */
        {"foo*", 0, "P"},                             /* partial prefix "foo" suffix "" */
        {"foo.*.hang", 0, "P"},                       /* partial "foo." ".hang" */
        {"**/*.hang", 0, "GP"},                       /* globstar, partial */
        {"a*b*c", MOQ_PATTERN_INVALID_SEGMENT, NULL}, /* "invalid-segment" */
        {"*a*", MOQ_PATTERN_INVALID_SEGMENT, NULL},   /* "invalid-segment" */
};

struct pv_pair {
	const char *a, *b;
	bool expect;
};

/* "matches": {"pattern", "path", "expect"} */
static const struct pv_pair pv_matches[] = {
        {"", "", true},
        {"", "a", false},
        {"a", "a", true},
        {"a", "/a/", true},
        {"a", "a/b", false},
        {"a", "ab", false},
        {"*", "a", true},
        {"*", "", false},
        {"*", "a/b", false},
        {"**", "", true},
        {"**", "a/b/c", true},
        {"a/**", "a", true},
        {"a/**", "a/b/c", true},
        {"a/**", "b", false},
        {"**/c", "c", true},
        {"**/c", "a/b/c", true},
        {"**/c", "a/c/b", false},
        {"a/**/c", "a/c", true},
        {"a/**/c", "a/x/y/c", true},
        {"a/**/c", "a", false},
        {"a/*/c", "a/x/c", true},
        {"a/*/c", "a/c", false},
        {"a/*/**", "a", false},
        {"a/*/**", "a/b", true},
        {"**/transcode.pro", "pid/foo.hang/transcode.pro", true},
        {"**/transcode.pro", "pid/foo.transcode.pro", false},
        {"pid/*/chat", "pid/room/chat", true},
        {"pid/*/chat", "pid/room/x/chat", false},
        {"**/*.hang", "pid/cam.hang", true},
        {"**/*.hang", ".hang", true},
        {"**/*.hang", "pid/cam.hang/x", false},
        {"foo*", "foo", true},
        {"foo*", "foobar", true},
        {"foo*", "fo", false},
        {"foo.*.hang", "foo..hang", true},
        {"foo.*.hang", "foo.1.hang", true},
        {"foo.*.hang", "foo.hang", false},
        {"a*a", "a", false},
        {"a*a", "aa", true},
};

/* "contains": {"outer", "inner", "expect"} */
static const struct pv_pair pv_contains[] = {
        {"**", "**", true},
        {"**", "", true},
        {"**", "a/*/b", true},
        {"", "**", false},
        {"", "", true},
        {"*", "a", true},
        {"a", "*", false},
        {"a/**", "a", true},
        {"a/**", "a/b/**", true},
        {"a/**", "**", false},
        {"a/**", "**/a", false},
        {"**/a", "a", true},
        {"**/a", "**/b/a", true},
        {"**/a", "a/**", false},
        {"*/**", "**", false},
        {"*/**", "a/**", true},
        {"*/*/**", "a/**", false},
        {"*/*/**", "a/b/**", true},
        {"a/**/c", "a/c", true},
        {"a/**/c", "a/x/c", true},
        {"a/**/c", "a/**/x/c", true},
        {"a/*/**/*", "a/**/b", false},
        {"a/*/c", "a/b/c", true},
        {"a/*/c", "a/**/c", false},
        {"pid/**", "pid/*/chat", true},
        {"pid/**", "**/transcode.pro", false},
        {"*", "*.hang", true},
        {"*.hang", "*", false},
        {"*.hang", "cam.hang", true},
        {"*.hang", "cam.hang2", false},
        {"*.hang", "*.hang", true},
        {"*.hang", "cam*.hang", true},
        {"*.hang", "cam*hang", false},
        {"foo*", "foo.*.hang", true},
        {"foo.*", "foo*", false},
        {"**/*.hang", "pid/*/cam.hang", true},
};

/* "overlaps": {"a", "b", "expect"} */
static const struct pv_pair pv_overlaps[] = {
        {"a", "a", true},           {"a", "b", false},          {"a", "*", true},
        {"a", "a/*", false},        {"a/**", "**/b", true},     {"a/**", "b/**", false},
        {"a/*", "*/b", true},       {"a/*", "b/*", false},      {"*/*", "a/**", true},
        {"*", "a/**", true},        {"*", "a/*/**", false},     {"**", "", true},
        {"a/**/b", "**/c", false},  {"a/**/b", "**/*", true},   {"a/**/b", "x/**", false},
        {"a/**/b", "**/x", false},  {"*.hang", "cam*", true},   {"*.hang", "cam.msf", false},
        {"*.hang", "*.msf", false}, {"foo*", "foo.bar*", true}, {"foo*", "fob*", false},
        {"a*b", "ab", true},        {"ab*", "*ab", true},
};

/* "head": {"pattern", "head"} */
static const struct pv_pair pv_head_dummy[1];
static const char *const pv_head[][2] = {
        {"a/b/*/c", "a/b"}, {"**/a", ""}, {"a/b", "a/b"}, {"", ""}, {"a/**", "a"}, {"a/b*/c", "a"},
};

/* "rebase": {"pattern", "root", "expect": [...]} (the results sorted, ';'
 * between them, "-" for none) */
static const char *const pv_rebase[][3] = {
        {"**", "a", "**"},
        {"**/a", "a", ";**/a"}, /* ["", "**" "/a"] */
        {"a/**", "a", "**"},
        {"a/**", "a/b", "**"},
        {"a/**", "b", "-"},
        {"a/b", "a", "b"},
        {"a/b", "a/b", ""},
        {"a/b", "a/b/c", "-"},
        {"*/b", "a", "b"},
        {"a/*/c", "a/x", "c"},
        {"a/**/b/c", "a/b", "**/b/c;c"},
        {"a/**/b", "a/b/b", ";**/b"},
        {"**/b/c", "b", "**/b/c;c"},
        {"", "", ""},
        {"", "a", "-"},
        {"**", "", "**"},
        {"**", "/a//b/", "**"},
        {"*.hang/**", "cam.hang", "**"},
        {"*.hang/**", "cam.msf", "-"},
        {"**/*.hang", "a.hang", ";**/*.hang"},
};

static struct moq_pattern *pat(const char *t)
{
	static struct moq_pattern ps[2];
	static int k;
	struct moq_pattern *p = &ps[k++ & 1];

	ck_assert_msg(moq_pattern_parse(p, t, strlen(t)) == 0, "parse %s", t);
	return p;
}

struct rb {
	const char *text;
	char out[8][64];
	int n;
};

static void rb_add(void *ctx, size_t off)
{
	struct rb *r = ctx;

	ck_assert_int_lt(r->n, 8);
	snprintf(r->out[r->n++], 64, "%s", r->text + off);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

START_TEST(test_pattern_vectors)
{
	for (size_t i = 0; i < sizeof(pv_parse) / sizeof(pv_parse[0]); i++) {
		const struct pv_parse *v = &pv_parse[i];
		struct moq_pattern p;
		int rc = moq_pattern_parse(&p, v->text, strlen(v->text));
		char k[40] = "";

		ck_assert_msg(rc == v->err, "parse '%s': %s, want %s", v->text,
		              moq_pattern_error_str(rc), moq_pattern_error_str(v->err));
		if (rc)
			continue;
		for (uint32_t j = 0; j < p.n; j++)
			k[j] = "L*GP"[p.seg[j].kind];
		ck_assert_msg(strcmp(k, v->kinds) == 0, "parse '%s': %s", v->text, k);
	}
	for (size_t i = 0; i < sizeof(pv_matches) / sizeof(pv_matches[0]); i++) {
		const struct pv_pair *v = &pv_matches[i];
		ck_assert_msg(moq_pattern_match(pat(v->a), v->b, strlen(v->b)) == v->expect,
		              "matches '%s' '%s' want %d", v->a, v->b, v->expect);
	}
	for (size_t i = 0; i < sizeof(pv_contains) / sizeof(pv_contains[0]); i++) {
		const struct pv_pair *v = &pv_contains[i];
		struct moq_pattern *o = pat(v->a), *in = pat(v->b);
		ck_assert_msg(moq_pattern_contains(o, in) == v->expect,
		              "contains '%s' '%s' want %d", v->a, v->b, v->expect);
	}
	for (size_t i = 0; i < sizeof(pv_overlaps) / sizeof(pv_overlaps[0]); i++) {
		const struct pv_pair *v = &pv_overlaps[i];
		struct moq_pattern *a = pat(v->a), *b = pat(v->b);
		ck_assert_msg(moq_pattern_overlaps(a, b) == v->expect &&
		                      moq_pattern_overlaps(b, a) == v->expect,
		              "overlaps '%s' '%s' want %d", v->a, v->b, v->expect);
	}
	(void)pv_head_dummy;
	for (size_t i = 0; i < sizeof(pv_head) / sizeof(pv_head[0]); i++) {
		struct moq_pattern *p = pat(pv_head[i][0]);
		size_t h = moq_pattern_head(p);
		ck_assert_msg(h == strlen(pv_head[i][1]) && memcmp(p->text, pv_head[i][1], h) == 0,
		              "head '%s'", pv_head[i][0]);
	}
	for (size_t i = 0; i < sizeof(pv_rebase) / sizeof(pv_rebase[0]); i++) {
		struct rb r = {pv_rebase[i][0], {{0}}, 0};
		char got[256] = "";
		unsigned n = moq_pattern_rebase(pat(pv_rebase[i][0]), pv_rebase[i][1],
		                                strlen(pv_rebase[i][1]), rb_add, &r);
		ck_assert_int_eq((int)n, r.n);
		qsort(r.out, (size_t)r.n, sizeof(r.out[0]), cmp_str);
		for (int j = 0; j < r.n; j++)
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", j ? ";" : "",
			         r.out[j]);
		if (!r.n)
			snprintf(got, sizeof(got), "-");
		ck_assert_msg(strcmp(got, pv_rebase[i][2]) == 0, "rebase '%s' at '%s': %s, want %s",
		              pv_rebase[i][0], pv_rebase[i][1], got, pv_rebase[i][2]);
	}
	/* a path of any length matches (the 32-segment bound is the pattern's) */
	{
		char longp[200] = "";
		for (int j = 0; j < 40; j++)
			strcat(longp, j ? "/x" : "x");
		ck_assert(moq_pattern_match(pat("**"), longp, strlen(longp)));
		ck_assert(moq_pattern_match(pat("x/**/x"), longp, strlen(longp)));
		ck_assert(!moq_pattern_match(pat("*/x"), longp, strlen(longp)));
		ck_assert(moq_pattern_overlaps_subtree(pat("x/*/x/**"), longp, strlen(longp)));
		ck_assert(!moq_pattern_overlaps_subtree(pat("x/*/x"), longp, strlen(longp)));
	}
}
END_TEST

/*
 * The current dialect (doc/bin/relay/auth.md, Claims and Path matching):
 * publish / subscribe patterns under root, each of its examples quoted
 * beside its check, and the older put / get beside it.
 */
START_TEST(test_pattern_claims)
{
	struct moq_auth *a;
	struct moq_auth_grant *g;

	mkdirs();
	a = auth_hs256();
	// "For a grant of demo/** from the root: Dialed /demo/bar -> Session
	// root demo/bar, Granted **"
	expect(a, "/demo/bar", hs256("{\"subscribe\":[\"demo/**\"]}"), 0, "put= get=demo/bar");
	/* "/demo -> demo, **" */
	expect(a, "/demo", hs256("{\"subscribe\":[\"demo/**\"]}"), 0, "put= get=demo");
	// "/ -> ``, demo/**"
	expect(a, "/", hs256("{\"subscribe\":[\"demo/**\"]}"), 0, "put= get=demo");
	/* "/other -> refused" */
	expect(a, "/other", hs256("{\"subscribe\":[\"demo/**\"]}"), MOQ_AUTH_ROOT, NULL);
	// "| demo | my-stream/** | ** | demo/my-stream/** | demo/** |"
	expect(a, "demo",
	       hs256("{\"root\":\"demo\",\"publish\":[\"my-stream/**\"],"
	             "\"subscribe\":[\"**\"]}"),
	       0, "put=demo/my-stream get=demo");
	// "| demo | (none) | ** | nothing | demo/** |"
	ck_assert_int_eq(verify(a, "demo", hs256("{\"root\":\"demo\",\"subscribe\":[\"**\"]}"), &g),
	                 0);
	ck_assert_int_eq(g->nput, 0);
	ck_assert(moq_auth_grant_allows(g, 0, "demo/x", 6) &&
	          !moq_auth_grant_allows(g, 1, "demo", 4));
	moq_auth_grant_free(g);
	/* "| "" | ** | ** | everything | everything |" */
	ck_assert_int_eq(verify(a, "",
	                        hs256("{\"root\":\"\",\"publish\":[\"**\"],"
	                              "\"subscribe\":[\"**\"]}"),
	                        &g),
	                 0);
	ck_assert(moq_auth_grant_allows(g, 1, "", 0) && moq_auth_grant_allows(g, 0, "any/x", 5));
	moq_auth_grant_free(g);
	// "moq auth sign --root rooms/123 --publish 'alice/**' --subscribe
	// '**'": "publish under rooms/123/alice and subscribe to anything in
	// rooms/123"
	expect(a, "rooms/123",
	       hs256("{\"root\":\"rooms/123\",\"publish\":[\"alice/**\"],\"subscribe\":[\"**\"]}"),
	       0, "put=rooms/123/alice get=rooms/123");
	/* "a bare foo is that one broadcast": foo, never foo/bar */
	ck_assert_int_eq(verify(a, "", hs256("{\"publish\":[\"foo\"]}"), &g), 0);
	ck_assert_str_eq(grant_str(g), "put=[foo] get=");
	ck_assert(moq_auth_grant_allows(g, 1, "foo", 3));
	ck_assert(!moq_auth_grant_allows(g, 1, "foo/bar", 7));
	/* its announce interest asks for the literal head */
	ck_assert_str_eq(g->put[0].p, "foo");
	moq_auth_grant_free(g);
	// "live/* is every broadcast one segment under live"
	ck_assert_int_eq(verify(a, "", hs256("{\"subscribe\":[\"live/*\"]}"), &g), 0);
	ck_assert(moq_auth_grant_allows(g, 0, "live/a", 6));
	ck_assert(!moq_auth_grant_allows(g, 0, "live", 4));
	ck_assert(!moq_auth_grant_allows(g, 0, "live/a/b", 8));
	ck_assert(moq_auth_grant_overlaps(g, 0, "live", 4));
	ck_assert(moq_auth_grant_overlaps(g, 0, "", 0));
	ck_assert(moq_auth_grant_overlaps(g, 0, "live/a", 6));
	ck_assert(!moq_auth_grant_overlaps(g, 0, "live/a/b", 8));
	ck_assert(!moq_auth_grant_overlaps(g, 0, "other", 5));
	ck_assert_str_eq(g->get[0].p, "live");
	moq_auth_grant_free(g);
	// "room/*" "/chat is each room's chat and nothing beside it"
	ck_assert_int_eq(verify(a, "", hs256("{\"subscribe\":[\"room/*/chat\"]}"), &g), 0);
	ck_assert(moq_auth_grant_allows(g, 0, "room/1/chat", 11));
	ck_assert(!moq_auth_grant_allows(g, 0, "room/1/video", 12));
	ck_assert(!moq_auth_grant_allows(g, 0, "room/1/chat/x", 13));
	moq_auth_grant_free(g);
	/* narrowed at the dialed path, as moq-pattern rebases: a session at
	 * room/1 gets room/1/chat exactly */
	expect(a, "room/1", hs256("{\"subscribe\":[\"room/*/chat\"]}"), 0,
	       "put= get=[room/1/chat]");
	expect(a, "room/1/chat", hs256("{\"subscribe\":[\"room/*/chat\"]}"), 0,
	       "put= get=[room/1/chat]");
	expect(a, "room/1/video", hs256("{\"subscribe\":[\"room/*/chat\"]}"), MOQ_AUTH_ROOT, NULL);
	/* a globstar in the middle rebases to two ("**" "/a" at a is "" and
	 * "**" "/a") */
	expect(a, "a", hs256("{\"subscribe\":[\"**/a\"]}"), 0, "put= get=[a/**/a],[a]");
	// "each put and get prefix p reads as the subtree p/**, and "" as **":
	// the two dialects give the same grant
	{
		const char *old = "{\"root\":\"demo\",\"put\":[\"alice\"],\"get\":[\"\"]}";
		const char *cur =
		        "{\"root\":\"demo\",\"publish\":[\"alice/**\"],\"subscribe\":[\"**\"]}";
		const char *paths[] = {"", "demo", "demo/alice", "demo/alice/cam", "demo/bob"};
		for (size_t i = 0; i < 5; i++) {
			struct moq_auth_grant *g1 = NULL, *g2 = NULL;
			char s1[512];
			ck_assert_int_eq(verify(a, paths[i], hs256(old), &g1), 0);
			ck_assert_int_eq(verify(a, paths[i], hs256(cur), &g2), 0);
			snprintf(s1, sizeof(s1), "%s", grant_str(g1));
			ck_assert_str_eq(s1, grant_str(g2));
			moq_auth_grant_free(g1);
			moq_auth_grant_free(g2);
		}
	}
	/* both dialects in one token: their union */
	expect(a, "", hs256("{\"put\":[\"a\"],\"publish\":[\"b/*\"]}"), 0, "put=a,[b/*] get=");
	/* a string is one pattern (OneOrMany) */
	expect(a, "", hs256("{\"subscribe\":\"x/**\"}"), 0, "put= get=x");
	/* not patterns: refused, not read as something else */
	expect(a, "", hs256("{\"subscribe\":[\"/a\"]}"), MOQ_AUTH_MALFORMED, NULL);
	expect(a, "", hs256("{\"subscribe\":[\"a*b*c\"]}"), MOQ_AUTH_MALFORMED, NULL);
	expect(a, "", hs256("{\"subscribe\":[\"**/**\"]}"), MOQ_AUTH_MALFORMED, NULL);
	/* an older prefix with a '*' is refused (moq-relay reads it as a
	 * literal subtree, which cannot hold one) */
	expect(a, "", hs256("{\"get\":[\"a*\"]}"), MOQ_AUTH_MALFORMED, NULL);
	/* "an empty list is nothing" */
	expect(a, "", hs256("{\"publish\":[],\"subscribe\":[]}"), MOQ_AUTH_USELESS, NULL);
	moq_auth_destroy(a);
	rmdirs();
}
END_TEST

/* auth.md, Claims: nbf and iat, unknown claims, and NUL in strings. */
START_TEST(test_claim_checks)
{
	struct moq_auth *a;
	char c[160];

	mkdirs();
	a = auth_hs256();
	wall_ns = T0 * SEC;
	/* "a token is refused ... before its nbf" */
	snprintf(c, sizeof(c), "{\"get\":\"\",\"nbf\":%llu}", (unsigned long long)T0 + 1);
	expect(a, "", hs256(c), MOQ_AUTH_NOT_YET, NULL);
	snprintf(c, sizeof(c), "{\"get\":\"\",\"nbf\":%llu}", (unsigned long long)T0);
	expect(a, "", hs256(c), 0, "put= get=");
	/* iat in the future: refused (issued by a clock ahead of ours) */
	snprintf(c, sizeof(c), "{\"get\":\"\",\"iat\":%llu}", (unsigned long long)T0 + 60);
	expect(a, "", hs256(c), MOQ_AUTH_NOT_YET, NULL);
	snprintf(c, sizeof(c), "{\"get\":\"\",\"iat\":%llu}", (unsigned long long)T0);
	expect(a, "", hs256(c), 0, "put= get=");
	expect(a, "", hs256("{\"get\":\"\",\"nbf\":\"x\"}"), MOQ_AUTH_MALFORMED, NULL);
	/* "iss, sub, jti: read and ignored" */
	expect(a, "", hs256("{\"get\":\"\",\"iss\":\"i\",\"sub\":\"s\",\"jti\":\"j\"}"), 0,
	       "put= get=");
	/* "Any other claim refuses the token with its name, aud included" */
	expect(a, "", hs256("{\"get\":\"\",\"aud\":\"x\"}"), MOQ_AUTH_MALFORMED, NULL);
	expect(a, "", hs256("{\"get\":\"\",\"roots\":\"x\"}"), MOQ_AUTH_MALFORMED, NULL);
	/* a NUL in any claim string: refused (root, a grant, an ignored claim) */
	expect(a, "", hs256("{\"root\":\"a\\u0000b\",\"get\":\"\"}"), MOQ_AUTH_MALFORMED, NULL);
	expect(a, "", hs256("{\"get\":[\"a\\u0000/b\"]}"), MOQ_AUTH_MALFORMED, NULL);
	expect(a, "", hs256("{\"subscribe\":[\"a/**\\u0000\"]}"), MOQ_AUTH_MALFORMED, NULL);
	expect(a, "", hs256("{\"get\":\"\",\"sub\":\"x\\u0000\"}"), MOQ_AUTH_MALFORMED, NULL);
	/* and a connection path holding one (fuzz_auth: the grant's prefix
	 * was cut at the NUL and read past) */
	{
		struct moq_auth_grant *g = NULL;
		const char *t = hs256("{\"get\":\"\"}");
		ck_assert_int_eq(moq_auth_verify(a, "pub/live\0x", 10, t, strlen(t), &g),
		                 MOQ_AUTH_MALFORMED);
		ck_assert_ptr_null(g);
	}
	moq_auth_destroy(a);
	rmdirs();
}
END_TEST

/* auth.md, Anonymous access: --auth-public, --auth-public-publish and
 * --auth-public-subscribe are patterns rooted at "/". */
START_TEST(test_public_patterns)
{
	struct moq_auth_cfg c = {.clock = fake_clock};
	struct moq_auth *a;
	struct moq_auth_grant *g;
	char err[256];

	// "public = "anon/**" anyone may publish and subscribe under anon/":
	// "anon/** admits a session dialed at /, /anon, or /anon/room,
	// scoped to anon/, and refuses one dialed anywhere else"
	c.public_both = "anon/**";
	a = moq_auth_create(&c, err, sizeof(err));
	ck_assert_msg(a != NULL, "%s", err);
	expect(a, "/", NULL, 0, "put=anon get=anon");
	expect(a, "/anon", NULL, 0, "put=anon get=anon");
	expect(a, "/anon/room", NULL, 0, "put=anon/room get=anon/room");
	expect(a, "/other", NULL, MOQ_AUTH_NO_TOKEN, NULL);
	moq_auth_destroy(a);
	// "public_subscribe = ["anon/**", "demo/**"], public_publish =
	// ["anon/**"]"
	c.public_both = NULL;
	c.public_subscribe = "anon/**,demo/**";
	c.public_publish = "anon/**";
	a = moq_auth_create(&c, err, sizeof(err));
	ck_assert_msg(a != NULL, "%s", err);
	expect(a, "", NULL, 0, "put=anon get=anon,demo");
	expect(a, "demo", NULL, 0, "put= get=demo");
	ck_assert_int_eq(verify(a, "demo/x", NULL, &g), 0);
	ck_assert(!moq_auth_grant_allows(g, 1, "demo/x", 6));
	moq_auth_grant_free(g);
	moq_auth_destroy(a);
	/* "A pattern with no wildcard, such as anon, refuses to start" */
	c.public_subscribe = NULL;
	c.public_publish = "anon";
	ck_assert_ptr_null(moq_auth_create(&c, err, sizeof(err)));
	ck_assert_msg(strstr(err, "--auth-public-publish: 'anon' has no wildcard") &&
	                      strstr(err, "anon/**"),
	              "%s", err);
	c.public_publish = NULL;
	c.public_both = "a/**,/bad";
	ck_assert_ptr_null(moq_auth_create(&c, err, sizeof(err)));
	ck_assert_msg(strstr(err, "--auth-public: /bad: not a pattern (empty-segment)"), "%s", err);
	/* "public = "**" opens everything" */
	c.public_both = "**";
	a = moq_auth_create(&c, err, sizeof(err));
	ck_assert_msg(a != NULL, "%s", err);
	expect(a, "x/y", NULL, 0, "put=x/y get=x/y");
	// "live/*": one segment under live, for both directions
	moq_auth_destroy(a);
	c.public_both = "live/*";
	a = moq_auth_create(&c, err, sizeof(err));
	ck_assert_msg(a != NULL, "%s", err);
	expect(a, "", NULL, 0, "put=[live/*] get=[live/*]");
	expect(a, "live/a", NULL, 0, "put=[live/a] get=[live/a]");
	expect(a, "live/a/b", NULL, MOQ_AUTH_NO_TOKEN, NULL);
	moq_auth_destroy(a);
}
END_TEST

/* claims.rs, Scope::allows: a key's scope bounds what its tokens grant. */
START_TEST(test_scope)
{
	struct moq_auth *a;
	char jwk[320];

	mkdirs();
	hs_jwk(jwk, sizeof(jwk), "HS256", secret,
	       ",\"scope\":{\"root\":\"project\",\"put\":[\"live\"],\"get\":[\"watch\"]}");
	a = auth_with(jwk, NULL);
	expect(a, "project/live/room", hs256("{\"root\":\"project/live/room\",\"put\":[\"\"]}"), 0,
	       "put=project/live/room get=");
	expect(a, "", hs256("{\"put\":[\"project/live/room\"],\"get\":[\"project/watch\"]}"), 0,
	       "put=project/live/room get=project/watch");
	/* a sibling, a role it does not grant, a root above the scope's */
	expect(a, "project/lively", hs256("{\"root\":\"project/lively\",\"put\":[\"\"]}"),
	       MOQ_AUTH_SCOPE, NULL);
	expect(a, "project/live", hs256("{\"root\":\"project/live\",\"get\":[\"\"]}"),
	       MOQ_AUTH_SCOPE, NULL);
	expect(a, "", hs256("{\"put\":[\"\"]}"), MOQ_AUTH_SCOPE, NULL);
	expect(a, "project", hs256("{\"root\":\"project\",\"put\":[\"live/a\",\"other\"]}"),
	       MOQ_AUTH_SCOPE, NULL);
	moq_auth_destroy(a);
	rmdirs();
}
END_TEST

/* Bad keys and options: one line naming the option. */
START_TEST(test_bad_keys)
{
	static const struct {
		const char *jwk, *why;
	} bad[] = {
	        {"{\"kty\":\"oct\",\"alg\":\"HS256\",\"k\":\"c2hvcnQ\"}", "shorter than 32"},
	        {"{\"kty\":\"oct\",\"k\":\"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY\"}",
	         "no alg"},
	        {"{\"kty\":\"oct\",\"alg\":\"XS1\",\"k\":"
	         "\"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY\"}",
	         "unknown alg"},
	        {"{\"kty\":\"oct\",\"alg\":\"ES256\",\"k\":"
	         "\"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY\"}",
	         "oct key needs"},
	        {"{\"kty\":\"EC\",\"alg\":\"ES256\",\"crv\":\"P-256\",\"x\":\"AAAA\",\"y\":"
	         "\"AAAA\"}",
	         "wrong length"},
	        {"{\"kty\":\"oct\",\"alg\":\"HS256\",\"k\":"
	         "\"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY\","
	         "\"key_ops\":[\"sign\"]}",
	         "verify"},
	        {"{\"kty\":\"oct\",\"alg\":\"HS256\",\"k\":"
	         "\"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY\","
	         "\"scope\":{}}",
	         "scope grants neither"},
	        {"{not json", "not JSON"},
	        {"!!!", "neither JSON nor base64url"},
	        {"{\"kty\":\"XYZ\",\"alg\":\"HS256\"}", "kty is not"},
	};
	char path[128], err[256];
	struct moq_auth_cfg c = {.clock = fake_clock};

	mkdirs();
	snprintf(path, sizeof(path), "%s/key.jwk", dir);
	c.key = path;
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_file(path, bad[i].jwk);
		err[0] = 0;
		ck_assert_ptr_null(moq_auth_create(&c, err, sizeof(err)));
		ck_assert_msg(strncmp(err, "--auth-key: ", 12) == 0 && strstr(err, bad[i].why) &&
		                      !strchr(err, '\n'),
		              "case %u: %s", i, err);
	}
	c.key = "/nonexistent/key.jwk";
	ck_assert_ptr_null(moq_auth_create(&c, err, sizeof(err)));
	ck_assert_msg(strstr(err, "--auth-key: /nonexistent/key.jwk"), "%s", err);
	c.key = path;
	c.key_dir = dir;
	ck_assert_ptr_null(moq_auth_create(&c, err, sizeof(err)));
	ck_assert_msg(strstr(err, "--auth-key-dir"), "%s", err);
	c.key = NULL;
	c.key_dir = "/nonexistent";
	ck_assert_ptr_null(moq_auth_create(&c, err, sizeof(err)));
	ck_assert_msg(strstr(err, "--auth-key-dir: /nonexistent"), "%s", err);
	rmdirs();
}
END_TEST

/* ES256 with a key made and a token signed by wolfCrypt (r || s). */
START_TEST(test_es256_wolfcrypt)
{
	WC_RNG rng;
	ecc_key k;
	uint8_t x[32], y[32], der[80], rs[64], dg[32];
	word32 xl = 32, yl = 32, dl = sizeof(der), rl = 32, sl = 32;
	char jwk[256], xs[64], ys[64], tok[1024], *p;
	const char *hdr = "{\"alg\":\"ES256\",\"typ\":\"JWT\"}", *claims = "{\"get\":\"live\"}";
	struct moq_auth *a;
	size_t n;

	mkdirs();
	ck_assert_int_eq(wc_InitRng(&rng), 0);
	ck_assert_int_eq(wc_ecc_init(&k), 0);
	ck_assert_int_eq(wc_ecc_make_key_ex(&rng, 32, &k, ECC_SECP256R1), 0);
	ck_assert_int_eq(wc_ecc_export_public_raw(&k, x, &xl, y, &yl), 0);
	b64u(x, 32, xs);
	b64u(y, 32, ys);
	snprintf(jwk, sizeof(jwk),
	         "{\"kty\":\"EC\",\"alg\":\"ES256\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"}",
	         xs, ys);
	a = auth_with(jwk, NULL);
	n = b64u((const uint8_t *)hdr, strlen(hdr), tok);
	tok[n++] = '.';
	n += b64u((const uint8_t *)claims, strlen(claims), tok + n);
	ck_assert_int_eq(wc_Sha256Hash((const uint8_t *)tok, (word32)n, dg), 0);
	ck_assert_int_eq(wc_ecc_sign_hash(dg, 32, der, &dl, &rng, &k), 0);
	memset(rs, 0, sizeof(rs));
	ck_assert_int_eq(wc_ecc_sig_to_rs(der, dl, rs, &rl, rs + 32, &sl), 0);
	/* left-pad r and s to 32 bytes each */
	if (rl < 32 || sl < 32) {
		uint8_t r2[32] = {0}, s2[32] = {0};
		memcpy(r2 + 32 - rl, rs, rl);
		memcpy(s2 + 32 - sl, rs + 32, sl);
		memcpy(rs, r2, 32);
		memcpy(rs + 32, s2, 32);
	}
	tok[n++] = '.';
	b64u(rs, 64, tok + n);
	expect(a, "", tok, 0, "put= get=live");
	/* the DER form instead of r || s is not a JWS signature */
	{
		char t2[1024];
		memcpy(t2, tok, n);
		b64u(der, dl, t2 + n);
		expect(a, "", t2, MOQ_AUTH_BAD_SIGNATURE, NULL);
	}
	p = tok + n + 10;
	*p = *p == 'A' ? 'B' : 'A';
	expect(a, "", tok, MOQ_AUTH_BAD_SIGNATURE, NULL);
	moq_auth_destroy(a);
	wc_ecc_free(&k);
	wc_FreeRng(&rng);
	rmdirs();
}
END_TEST

/* Fixtures signed by node's crypto (tests/fixtures/auth/mint.js). */
START_TEST(test_independent_signer)
{
	static const char *const names[] = {"hs256", "es256", "es384", "rs256", "ps256", "ps512"};
	char path[256], err[256], tok[1024];
	struct moq_auth_cfg c = {.clock = fake_clock};

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct moq_auth *a;
		snprintf(path, sizeof(path), "%s/%s.jwk", AUTH_FIXTURES, names[i]);
		c.key = path;
		err[0] = 0;
		a = moq_auth_create(&c, err, sizeof(err));
		ck_assert_msg(a != NULL, "%s: %s", names[i], err);
		snprintf(path, sizeof(path), "%s/%s.jwt", AUTH_FIXTURES, names[i]);
		ck_assert_uint_lt(strlen(slurp(path)), sizeof(tok));
		memcpy(tok, slurp(path), strlen(slurp(path)) + 1);
		/* root demo, put [alice], get [""] */
		expect(a, "demo", tok, 0, "put=demo/alice get=demo");
		expect(a, "demo/bob", tok, 0, "put= get=demo/bob");
		tok[strlen(tok) - 3] ^= 1; /* tampered signature */
		expect(a, "demo", tok, MOQ_AUTH_BAD_SIGNATURE, NULL);
		moq_auth_destroy(a);
	}
	/* EdDSA needs a wolfSSL built with Ed25519 */
	snprintf(path, sizeof(path), "%s/eddsa.jwk", AUTH_FIXTURES);
	c.key = path;
	{
		struct moq_auth *a = moq_auth_create(&c, err, sizeof(err));
#ifdef HAVE_ED25519
		ck_assert_msg(a != NULL, "%s", err);
		snprintf(path, sizeof(path), "%s/eddsa.jwt", AUTH_FIXTURES);
		memcpy(tok, slurp(path), strlen(slurp(path)) + 1);
		expect(a, "demo", tok, 0, "put=demo/alice get=demo");
		moq_auth_destroy(a);
#else
		ck_assert_ptr_null(a);
		ck_assert_msg(strstr(err, "Ed25519"), "%s", err);
#endif
	}
}
END_TEST

/* HS256 signed by the openssl CLI at test time (when it is installed). */
START_TEST(test_openssl_signer)
{
	char cmd[1024], path[128], hex[128], *tok;
	const char *h = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"; /* {"alg":"HS256","typ":"JWT"} */
	char body[256], si[128];
	struct moq_auth *a;
	FILE *f;
	size_t n = 0;

	if (system("command -v openssl >/dev/null 2>&1") != 0) {
		fprintf(stderr, "# openssl_signer: no openssl CLI, skipped\n");
		return;
	}
	mkdirs();
	a = auth_hs256();
	{
		const char *cl = "{\"root\":\"r\",\"get\":[\"\"],\"put\":\"p\"}";
		b64u((const uint8_t *)cl, strlen(cl), body);
	}
	for (size_t i = 0; secret[i]; i++)
		n += (size_t)snprintf(hex + n, sizeof(hex) - n, "%02x", (unsigned char)secret[i]);
	snprintf(path, sizeof(path), "%s/tok", dir);
	snprintf(cmd, sizeof(cmd),
	         "printf '%%s' '%s.%s' | openssl dgst -sha256 -mac HMAC -macopt hexkey:%s -binary "
	         "| openssl base64 -A | tr '+/' '-_' | tr -d '=' > %s",
	         h, body, hex, path);
	ck_assert_int_eq(system(cmd), 0);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(si, sizeof(si), f));
	fclose(f);
	si[strcspn(si, "\n")] = 0;
	tok = malloc(1024);
	snprintf(tok, 1024, "%s.%s.%s", h, body, si);
	expect(a, "r", tok, 0, "put=r/p get=r");
	free(tok);
	moq_auth_destroy(a);
	rmdirs();
}
END_TEST

START_TEST(test_split_query)
{
	static const struct {
		const char *in;
		size_t path;
		const char *jwt;
	} cases[] = {
	        {"room/1?jwt=abc", 6, "abc"},
	        {"room/1", 6, ""},
	        {"?jwt=a.b.c", 0, "a.b.c"},
	        {"r?jwt=first&jwt=second", 1, "second"},
	        {"r?jwt=first&jwt=", 1, "first"},
	        {"r?jwt=", 1, ""},
	        {"r?a=1&jwt=ab%20cd+e&b", 1, "ab cd e"},
	        {"r?j%77t=x", 1, "x"},
	        {"r?jwtx=y", 1, ""},
	};
	char jwt[64];
	size_t pl, jl;

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(moq_auth_split_query(cases[i].in, strlen(cases[i].in), &pl, jwt,
		                                      sizeof(jwt), &jl),
		                 0);
		ck_assert_uint_eq(pl, cases[i].path);
		ck_assert_str_eq(jwt, cases[i].jwt);
		ck_assert_uint_eq(jl, strlen(cases[i].jwt));
	}
	ck_assert_int_eq(moq_auth_split_query("r?jwt=0123456789", 16, &pl, jwt, 4, &jl),
	                 MOQ_AUTH_MALFORMED);
}
END_TEST

/* moq_auth_reload (SIGHUP): the new set is used at once, a broken file
 * keeps the old one. */
START_TEST(test_reload)
{
	struct moq_auth *a;
	struct moq_auth_stats st;
	char jwk[256], path[128], err[256];
	const char *other = "a completely different 32-byte secret";
	char *t2;

	mkdirs();
	a = auth_hs256();
	expect(a, "", hs256("{\"get\":\"\"}"), 0, "put= get=");
	hs_jwk(jwk, sizeof(jwk), "HS256", other, NULL);
	snprintf(path, sizeof(path), "%s/key.jwk", dir);
	write_file(path, jwk);
	ck_assert_int_eq(moq_auth_reload(a, err, sizeof(err)), 0);
	expect(a, "", hs256("{\"get\":\"\"}"), MOQ_AUTH_BAD_SIGNATURE, NULL);
	t2 = mint_hs("{\"alg\":\"HS256\"}", "{\"get\":\"\"}", WC_SHA256, other);
	expect(a, "", t2, 0, "put= get=");
	write_file(path, "{broken");
	ck_assert_int_eq(moq_auth_reload(a, err, sizeof(err)), MOQ_ERR_CONFIG);
	ck_assert_msg(strstr(err, "--auth-key"), "%s", err);
	t2 = mint_hs("{\"alg\":\"HS256\"}", "{\"get\":\"\"}", WC_SHA256, other);
	expect(a, "", t2, 0, "put= get=");
	moq_auth_get_stats(a, &st);
	ck_assert_uint_eq(st.reloads, 1);
	ck_assert_uint_eq(st.reload_failed, 1);
	ck_assert_uint_eq(st.keys, 1);
	ck_assert_uint_eq(st.accepted, 3);
	ck_assert_uint_eq(st.refused, 1);
	moq_auth_destroy(a);
	rmdirs();
}
END_TEST

/* ----------------------------------------------- sessions over the link */

struct cl {
	struct moq_session *s;
	int ready, closed;
	uint64_t code;
	int64_t sub_code; /* sub_closed: -2 none */
	uint64_t frames, groups;
	char ann[8][64];
	int nann;
	uint64_t id_frames[8]; /* frames per subscription id (id % 8) */
	int64_t id_code[8];    /* sub_closed code per id; 0 = none yet */
};

static struct {
	struct moq_cache_counting rcnt, pcnt;
	struct moq_cache *rcache, *pcache;
	struct moq_node *relay, *pubnode, *subnode;
	struct moq_quic_endpoint *rep, *cep;
	struct moq_quic_link *lnk;
	struct moq_auth *auth;
	uint16_t port;
	struct moq_cache_track *tracks[8]; /* l_publish's, held while publishing */
	unsigned int ntracks;
} L;

static uint64_t lnow(void)
{
	return moq_quic_link_now(L.lnk);
}

/* The relay's wall clock follows virtual time. */
static uint64_t link_clock(void *ctx)
{
	(void)ctx;
	return T0 * SEC + lnow();
}

static void c_ready(struct moq_session *s, void *u)
{
	(void)u;
	((struct cl *)moq_session_user(s))->ready = 1;
}

static void c_closed(struct moq_session *s, void *u, uint64_t code, int local)
{
	struct cl *c = moq_session_user(s);

	(void)u;
	(void)local;
	c->closed = 1;
	c->code = code;
	c->s = NULL;
}

static void c_announce(struct moq_session *s, void *u, const char *p, size_t len, int active)
{
	struct cl *c = moq_session_user(s);

	(void)u;
	if (active && c->nann < 8)
		snprintf(c->ann[c->nann++], 64, "%.*s", (int)len, p);
}

static void c_sub_closed(struct moq_session *s, void *u, uint64_t id, int64_t code)
{
	(void)u;
	((struct cl *)moq_session_user(s))->sub_code = code;
	((struct cl *)moq_session_user(s))->id_code[id % 8] = code;
}

static void c_frame(struct moq_session *s, void *u, uint64_t id, uint64_t seq, int64_t ts,
                    uint64_t size)
{
	(void)u;
	(void)seq;
	(void)ts;
	(void)size;
	((struct cl *)moq_session_user(s))->frames++;
	((struct cl *)moq_session_user(s))->id_frames[id % 8]++;
}

static void c_group_end(struct moq_session *s, void *u, uint64_t id, uint64_t seq, int64_t code)
{
	(void)u;
	(void)id;
	(void)seq;
	if (code < 0)
		((struct cl *)moq_session_user(s))->groups++;
}

static const struct moq_node_callbacks ccbs = {
        .session_ready = c_ready,
        .session_closed = c_closed,
        .announce = c_announce,
        .sub_closed = c_sub_closed,
        .frame = c_frame,
        .group_end = c_group_end,
};

/* A test's relay settings (NULL: the defaults), applied by l_init. */
static void (*l_relay_cfg)(struct moq_node_cfg *nc);
/* --auth-url instead of the key (NULL: the key), and its deadline */
static const char *l_auth_url;
static uint64_t l_auth_timeout;

/* A relay with --auth-key (HS256 secret) and @pub, and two client nodes;
 * the client endpoint speaks only @alpn (NULL: all). */
static void l_init(const char *pub, const char *alpn)
{
	struct moq_cache_cfg cc = {0};
	struct moq_node_cfg nc = {0};
	struct moq_quic_config q = {0};
	struct moq_quic_link_config lc = {0};
	struct moq_auth_cfg ac = {.public_prefixes = pub, .clock = link_clock};
	char jwk[256], path[128], err[256] = "";
	size_t na;
	int e = 0;

	memset(&L, 0, sizeof(L));
	mkdirs();
	hs_jwk(jwk, sizeof(jwk), "HS256", secret, NULL);
	snprintf(path, sizeof(path), "%s/key.jwk", dir);
	write_file(path, jwk);
	ac.key = path;
	if (l_auth_url) {
		ac.key = NULL;
		ac.url = l_auth_url;
		ac.url_node = "relay-test";
		ac.url_timeout_ns = l_auth_timeout;
	}
	L.auth = moq_auth_create(&ac, err, sizeof(err));
	ck_assert_msg(L.auth != NULL, "%s", err);
	moq_cache_counting_init(&L.rcnt);
	moq_cache_counting_init(&L.pcnt);
	cc.alloc = moq_cache_counting_alloc(&L.rcnt);
	L.rcache = moq_cache_create(&cc);
	cc.alloc = moq_cache_counting_alloc(&L.pcnt);
	L.pcache = moq_cache_create(&cc);
	nc.cache = L.rcache;
	nc.relay = 1;
	nc.origin = 1000;
	nc.auth = L.auth;
	{
		struct moq_node_cfg rc = nc; /* the clients keep the defaults */

		if (l_relay_cfg)
			l_relay_cfg(&rc);
		L.relay = moq_node_create(&rc);
	}
	nc.auth = NULL;
	nc.relay = 0;
	nc.cache = L.pcache;
	nc.origin = 2000;
	nc.cb = &ccbs;
	L.pubnode = moq_node_create(&nc);
	nc.cache = NULL;
	nc.origin = 3000;
	L.subnode = moq_node_create(&nc);
	ck_assert(L.relay && L.pubnode && L.subnode);
	q.role = MOQ_QUIC_SERVER;
	q.worker_id = 1;
	q.alpn = moq_node_alpns(&na);
	q.alpn_count = na;
	q.retry = MOQ_QUIC_RETRY_NEVER;
	q.max_conns = 64;
	q.max_conns_per_addr = 64;
	q.max_half_open = 64;
	q.cb = moq_node_quic_callbacks();
	q.user = L.relay;
	L.rep = moq_quic_endpoint_new(&q, &e);
	ck_assert_ptr_nonnull(L.rep);
	q.role = MOQ_QUIC_CLIENT;
	q.worker_id = 2;
	if (alpn) {
		q.alpn = &alpn;
		q.alpn_count = 1;
	}
	q.user = L.pubnode;
	L.cep = moq_quic_endpoint_new(&q, &e);
	ck_assert_ptr_nonnull(L.cep);
	lc.dir[0].delay_ns = 1 * MS;
	lc.dir[1].delay_ns = 1 * MS;
	lc.max_queue = 1 << 14;
	L.lnk = moq_quic_link_new(&lc, L.cep, L.rep);
	ck_assert_ptr_nonnull(L.lnk);
	L.port = 30000;
}

static void l_fini(void)
{
	moq_quic_endpoint_free(L.cep);
	moq_quic_endpoint_free(L.rep);
	moq_quic_link_free(L.lnk);
	moq_node_destroy(L.subnode);
	moq_node_destroy(L.pubnode);
	moq_node_destroy(L.relay);
	for (unsigned int i = 0; i < L.ntracks; i++)
		moq_cache_track_unref(L.tracks[i]);
	L.ntracks = 0;
	moq_cache_destroy(L.pcache);
	moq_cache_destroy(L.rcache);
	moq_auth_destroy(L.auth);
	rmdirs();
}

static void l_run(uint64_t dt)
{
	uint64_t end = lnow() + dt;

	while (lnow() < end) {
		moq_node_poll(L.pubnode, lnow());
		moq_node_poll(L.subnode, lnow());
		moq_node_poll(L.relay, lnow());
		if (moq_quic_link_run(L.lnk, NULL, NULL, 2 * MS) == 0)
			break; /* idle: nothing will ever happen */
	}
}

/* Connect @c with @role and SETUP Path "@path?jwt=@jwt" (either NULL). */
static void l_connect(struct cl *c, int role, const char *path, const char *jwt)
{
	struct moq_quic_addr la, ra;
	char sp[4200];
	int e = 0;

	memset(c, 0, sizeof(*c));
	c->sub_code = -2;
	snprintf(sp, sizeof(sp), "%s%s%s", path ? path : "", jwt ? "?jwt=" : "", jwt ? jwt : "");
	moq_quic_addr_ip4("10.0.0.1", L.port++, &la);
	moq_quic_addr_ip4("10.0.0.2", 4443, &ra);
	c->s = moq_node_connect(role == MOQ_ROLE_PUBLISHER ? L.pubnode : L.subnode, L.cep, &la, &ra,
	                        path || jwt ? sp : NULL, role, c, lnow(), &e);
	ck_assert_msg(c->s != NULL, "connect: %s", moq_err_str(e));
}

/* Publish @path (track "video") from the publisher node and write one group
 * of 5 frames into it every call. */
static void l_publish(const char *path)
{
	struct moq_cache_track *t;

	ck_assert_int_eq(moq_cache_track_create(L.pcache, path, strlen(path), "video", 5, NULL, &t),
	                 0);
	/* the publisher holds its track while it publishes (a track with no
	 * group and no reference is dropped by the node's expiry timer) */
	ck_assert_uint_lt(L.ntracks, sizeof(L.tracks) / sizeof(L.tracks[0]));
	L.tracks[L.ntracks++] = t;
	ck_assert_int_eq(moq_node_publish(L.pubnode, path, strlen(path), 1000), 0);
}

static void l_group(const char *path, uint64_t seq)
{
	struct moq_cache_track *t =
	        moq_cache_track_lookup(L.pcache, path, strlen(path), "video", 5);
	struct moq_cache_group *g;
	uint8_t buf[300];

	ck_assert_ptr_nonnull(t);
	memset(buf, (int)seq, sizeof(buf));
	ck_assert_int_eq(moq_cache_group_open(t, seq, lnow(), &g), 0);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(moq_cache_write_frame(g, (int64_t)(seq * 5 + (uint64_t)i), buf,
		                                       sizeof(buf)),
		                 0);
	ck_assert_int_eq(moq_cache_group_finish(g), 0);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
}

static int64_t l_subscribe(struct cl *c, const char *path)
{
	struct moq_sub_params p = {1, false, 5000, MOQ_GROUP_NONE, MOQ_GROUP_NONE};
	int64_t id = moq_session_subscribe(c->s, path, strlen(path), "video", 5, &p);

	ck_assert_int_ge(id, 0);
	return id;
}

static uint64_t relay_bcasts(void)
{
	struct moq_node_stats st;

	moq_node_stats(L.relay, &st);
	return st.broadcasts;
}

/* Publish and subscribe with tokens; every operation is checked. */
START_TEST(test_session_checks)
{
	struct cl pub, sub, other, nosub, ann;
	struct moq_node_stats st;
	char *t;

	l_init(NULL, NULL);
	/* the publisher may put under alice only: "bob" never reaches the relay */
	l_publish("alice/cam"); /* under its connection path "room" */
	l_publish("bob/cam");
	t = hs256("{\"root\":\"room\",\"put\":[\"alice\"]}");
	l_connect(&pub, MOQ_ROLE_PUBLISHER, "room", t);
	l_run(300 * MS);
	ck_assert(pub.ready && !pub.closed);
	ck_assert_uint_eq(relay_bcasts(), 1);

	/* a subscriber rooted at "room" with get [""] receives alice's groups */
	l_connect(&sub, MOQ_ROLE_SUBSCRIBER, "room", hs256("{\"root\":\"room\",\"get\":\"\"}"));
	/* one whose token reads only "carol" is refused (reset 6) */
	l_connect(&other, MOQ_ROLE_SUBSCRIBER, "room",
	          hs256("{\"root\":\"room\",\"get\":\"carol\"}"));
	l_run(200 * MS);
	ck_assert(sub.ready && !sub.closed && other.ready && !other.closed);
	l_subscribe(&sub, "alice/cam");
	l_subscribe(&other, "alice/cam");
	l_run(100 * MS);
	for (uint64_t g = 0; g < 3; g++) {
		l_group("alice/cam", g);
		l_run(100 * MS);
	}
	ck_assert_uint_eq(sub.groups, 3);
	ck_assert_uint_eq(sub.frames, 15);
	ck_assert_int_eq(other.sub_code, MOQ_CODE_UNAUTHORIZED);
	ck_assert_uint_eq(other.frames, 0);
	ck_assert(!other.closed); /* the session goes on */
	/* TRACK and FETCH need get too */
	ck_assert_int_eq(moq_session_track(other.s, "alice/cam", 9, "video", 5), 0);
	ck_assert_int_ge(moq_session_fetch(other.s, "alice/cam", 9, "video", 5, 1, 0), 0);
	l_run(100 * MS);
	ck_assert_uint_eq(other.frames, 0);

	/* announce interest: a token reading room/alice sees alice only, a
	 * request outside what it may read is refused */
	l_publish("alice/mic");
	l_run(100 * MS);
	ck_assert_uint_eq(relay_bcasts(), 2);
	l_connect(&ann, MOQ_ROLE_SUBSCRIBER, "",
	          hs256("{\"root\":\"room\",\"get\":[\"alice/cam\",\"dave\"]}"));
	l_run(100 * MS);
	ck_assert_int_eq(moq_session_announce_request(ann.s, "", 0), 0);
	ck_assert_int_eq(moq_session_announce_request(ann.s, "room/bob", 8), 0);
	l_run(100 * MS);
	ck_assert_int_eq(ann.nann, 1);
	ck_assert_str_eq(ann.ann[0], "room/alice/cam");

	/* no token at all: the handshake completes, the session closes with 6 */
	l_connect(&nosub, MOQ_ROLE_SUBSCRIBER, "room", NULL);
	l_run(200 * MS);
	ck_assert(nosub.closed);
	ck_assert_uint_eq(nosub.code, MOQ_CODE_UNAUTHORIZED);

	moq_node_stats(L.relay, &st);
	ck_assert_uint_eq(st.auth_refused, 1);
	ck_assert_uint_ge(st.auth_denied, 4); /* subscribe, track, fetch, announce */
	ck_assert(!pub.closed && !sub.closed && !other.closed && !ann.closed);
	l_fini();
}
END_TEST

/* The lite-05 Role must fit the token; an invalid token never falls back
 * to the public prefixes; a bad signature closes with 6. */
START_TEST(test_session_role_and_public)
{
	struct cl a, b, c, d, e, f;
	char bad[4096];

	l_init("open", NULL);
	l_connect(&a, MOQ_ROLE_PUBLISHER, "room", hs256("{\"root\":\"room\",\"get\":\"\"}"));
	l_connect(&b, MOQ_ROLE_SUBSCRIBER, "room", hs256("{\"root\":\"room\",\"put\":\"\"}"));
	l_connect(&c, MOQ_ROLE_BOTH, "room", hs256("{\"root\":\"room\",\"put\":\"\"}"));
	l_connect(&d, MOQ_ROLE_SUBSCRIBER, "open/x", NULL); /* public */
	snprintf(bad, sizeof(bad), "%s",
	         mint_hs("{\"alg\":\"HS256\"}", "{\"get\":\"\"}", WC_SHA256,
	                 "another secret of 32 bytes!!!!!!"));
	l_connect(&e, MOQ_ROLE_SUBSCRIBER, "open/x", bad); /* no fallback */
	l_connect(&f, MOQ_ROLE_SUBSCRIBER, "closed", NULL);
	l_run(300 * MS);
	ck_assert(a.closed && a.code == MOQ_CODE_UNAUTHORIZED);
	ck_assert(b.closed && b.code == MOQ_CODE_UNAUTHORIZED);
	ck_assert(c.ready && !c.closed);
	ck_assert(d.ready && !d.closed);
	ck_assert(e.closed && e.code == MOQ_CODE_UNAUTHORIZED);
	ck_assert(f.closed && f.code == MOQ_CODE_UNAUTHORIZED);
	l_fini();
}
END_TEST

/* lite-03/04 carry no token: public prefixes only (rooted at ""). */
START_TEST(test_session_lite04_public)
{
	struct cl pub, sub, sub2, sub3;

	l_init("live", MOQ_ALPN_04);
	l_publish("live/a");
	l_publish("private/b");
	l_connect(&pub, MOQ_ROLE_PUBLISHER, NULL, NULL);
	l_connect(&sub, MOQ_ROLE_SUBSCRIBER, NULL, NULL);
	l_connect(&sub2, MOQ_ROLE_SUBSCRIBER, NULL, NULL);
	l_run(300 * MS);
	ck_assert(pub.ready && !pub.closed && sub.ready && !sub.closed);
	ck_assert_uint_eq(relay_bcasts(), 1); /* private/b is not put */
	l_subscribe(&sub, "live/a");
	l_subscribe(&sub2, "private/b");
	l_run(50 * MS);
	l_group("live/a", 0);
	l_run(200 * MS);
	ck_assert_uint_eq(sub.groups, 1);
	ck_assert_int_eq(sub2.sub_code, MOQ_CODE_UNAUTHORIZED);
	l_fini();
	/* without public prefixes a lite-04 session is refused */
	l_init(NULL, MOQ_ALPN_04);
	l_connect(&sub3, MOQ_ROLE_SUBSCRIBER, NULL, NULL);
	l_run(300 * MS);
	ck_assert(sub3.closed && sub3.code == MOQ_CODE_UNAUTHORIZED);
	l_fini();
}
END_TEST

/* exp passes mid-session: that session closes with 6, the others go on. */
START_TEST(test_session_expiry)
{
	struct cl pub, shortlived, longlived;
	char c[160];
	struct moq_node_stats st;

	l_init(NULL, NULL);
	l_publish("live/cam");
	l_connect(&pub, MOQ_ROLE_PUBLISHER, NULL, hs256("{\"put\":\"live\"}"));
	l_run(200 * MS);
	/* exp: 2 s and 100 s from now (the relay's wall clock is T0 + virtual) */
	snprintf(c, sizeof(c), "{\"get\":\"live\",\"exp\":%llu}",
	         (unsigned long long)(T0 + lnow() / SEC + 2));
	l_connect(&shortlived, MOQ_ROLE_SUBSCRIBER, NULL, hs256(c));
	snprintf(c, sizeof(c), "{\"get\":\"live\",\"exp\":%llu}",
	         (unsigned long long)(T0 + lnow() / SEC + 100));
	l_connect(&longlived, MOQ_ROLE_SUBSCRIBER, NULL, hs256(c));
	l_run(200 * MS);
	ck_assert(shortlived.ready && longlived.ready);
	l_subscribe(&shortlived, "live/cam");
	l_subscribe(&longlived, "live/cam");
	for (uint64_t g = 0; g < 30; g++) {
		l_group("live/cam", g);
		l_run(100 * MS);
	}
	ck_assert(shortlived.closed);
	ck_assert_uint_eq(shortlived.code, MOQ_CODE_UNAUTHORIZED);
	ck_assert_uint_ge(shortlived.groups, 5);
	ck_assert_uint_lt(shortlived.groups, 30);
	ck_assert(!longlived.closed && !pub.closed);
	ck_assert_uint_ge(longlived.groups, 28);
	moq_node_stats(L.relay, &st);
	ck_assert_uint_eq(st.auth_expired, 1);
	l_fini();
}
END_TEST

/* ------------------------------------------- hop chains (issue 22, item 8) */

/* A raw lite-05 ANNOUNCE active of @suffix with the hops @hops[0..@nh) on
 * the relay's announce request to @c (its first bidi stream, id 1). */
static void l_raw_announce(struct cl *c, const char *suffix, const uint64_t *hops, uint32_t nh)
{
	struct moq_msg m = {.type = MOQ_MSG_ANNOUNCE};
	uint8_t buf[512];
	int len;

	m.u.announce.status = MOQ_ANNOUNCE_ACTIVE;
	m.u.announce.suffix = (struct moq_str){suffix, strlen(suffix)};
	m.u.announce.hop_count = nh;
	memcpy(m.u.announce.hops, hops, nh * sizeof(hops[0]));
	len = moq_msg_encode(buf, sizeof(buf), MOQ_LITE_05, &m);
	ck_assert_int_gt(len, 0);
	ck_assert_int_eq(moq_session_write_raw_stream(c->s, 1, buf, (size_t)len, 0), 0);
}

/*
 * Only a cluster peer may present hops (issue 22, item 8). A peer (the
 * broad link token) announces room/cam learned through another relay:
 * chain 2000, 5000 (+ its own hop, stamped). A client whose token may only
 * put under "room" announces room/cam claiming the same first hop 2000
 * with a shorter chain: before, it was taken as the same publisher over a
 * better route and silently became the live route. Its chain now starts at
 * this relay (one hop, the relay's hash of its own id), so it is another
 * publisher: by the ownership rules it either waits as a hidden backup or
 * replaces the live one visibly (announce restart, counted), never
 * silently; closing it then fails over only if it was live.
 */
START_TEST(test_session_client_hops)
{
	static const uint64_t far[] = {2000, 5000}, claim[] = {2000};
	struct cl peer, cli, ann;
	struct moq_node_stats st;
	int nann;

	l_init(NULL, NULL);
	l_connect(&peer, MOQ_ROLE_PUBLISHER, "",
	          hs256("{\"root\":\"\",\"put\":[\"\"],\"get\":[\"\"]}"));
	l_connect(&cli, MOQ_ROLE_PUBLISHER, "", hs256("{\"root\":\"\",\"put\":[\"room\"]}"));
	l_connect(&ann, MOQ_ROLE_SUBSCRIBER, "", hs256("{\"root\":\"\",\"get\":[\"\"]}"));
	l_run(300 * MS);
	ck_assert(peer.ready && cli.ready && ann.ready);
	ck_assert(!peer.closed && !cli.closed && !ann.closed);
	ck_assert_int_eq(moq_session_announce_request(ann.s, "room", 4), 0);
	l_raw_announce(&peer, "room/cam", far, 2);
	l_run(200 * MS);
	ck_assert_uint_eq(relay_bcasts(), 1);
	ck_assert_int_eq(ann.nann, 1);
	moq_node_stats(L.relay, &st);
	ck_assert_uint_eq(st.ann_chains_restarted, 0); /* a peer's chain is kept */

	l_raw_announce(&cli, "cam", claim, 1); /* under its request for "room" */
	l_run(200 * MS);
	moq_node_stats(L.relay, &st);
	ck_assert_uint_eq(st.ann_chains_restarted, 1);
	ck_assert_uint_eq(relay_bcasts(), 1);
	ck_assert(!cli.closed && !peer.closed);
	nann = ann.nann;
	/* visible (a restart: a second ACTIVE) exactly when it replaced */
	ck_assert_int_eq(nann, st.bcast_replaced ? 2 : 1);
	moq_session_close(cli.s, 0);
	l_run(300 * MS);
	moq_node_stats(L.relay, &st);
	ck_assert_uint_eq(st.bcast_failovers, st.bcast_replaced);
	ck_assert_uint_eq(relay_bcasts(), 1);
	ck_assert(!peer.closed && !ann.closed);
	l_fini();
}
END_TEST

/* ------------------------------------------- link bounds (issue 22, item 10) */

static void link_bounds_cfg(struct moq_node_cfg *nc)
{
	nc->max_subscriptions = 2;
	nc->max_session_broadcasts = 2;
	nc->link_max_subscriptions = 8;
	nc->link_max_session_broadcasts = 8;
}

/*
 * A cluster link is one session carrying a whole origin: with the
 * per-session bounds at 2, a session with the broad link token announces
 * three broadcasts and subscribes to three tracks (the link bounds, 8),
 * where before the third ANNOUNCE closed it with 11; a client's session
 * (get [""] only) still has the client bound: its third SUBSCRIBE is reset
 * with 11.
 */
START_TEST(test_session_link_bounds)
{
	static const char *const paths[] = {"room/a", "room/b", "room/c"};
	const char *broad = "{\"root\":\"\",\"put\":[\"\"],\"get\":[\"\"]}";
	struct cl pub, link, cli;
	struct moq_node_stats st;

	l_relay_cfg = link_bounds_cfg;
	l_init(NULL, NULL);
	l_relay_cfg = NULL;
	for (int i = 0; i < 3; i++)
		l_publish(paths[i]);
	l_connect(&pub, MOQ_ROLE_PUBLISHER, "", hs256(broad));
	l_connect(&link, MOQ_ROLE_SUBSCRIBER, "", hs256(broad));
	l_connect(&cli, MOQ_ROLE_SUBSCRIBER, "", hs256("{\"root\":\"\",\"get\":[\"\"]}"));
	l_run(300 * MS);
	ck_assert_msg(!pub.closed, "the link was closed with %llu", (unsigned long long)pub.code);
	ck_assert_uint_eq(relay_bcasts(), 3);
	ck_assert(link.ready && cli.ready);
	for (int i = 0; i < 3; i++) {
		l_subscribe(&link, paths[i]);
		l_subscribe(&cli, paths[i]);
	}
	l_run(100 * MS);
	for (uint64_t g = 0; g < 2; g++) {
		for (int i = 0; i < 3; i++)
			l_group(paths[i], g);
		l_run(100 * MS);
	}
	ck_assert_int_eq(link.sub_code, -2); /* none refused */
	ck_assert_uint_eq(link.groups, 6);
	ck_assert_int_eq(cli.sub_code, MOQ_CODE_BOUNDS);
	ck_assert_uint_eq(cli.groups, 4);
	moq_node_stats(L.relay, &st);
	ck_assert_uint_eq(st.subs_refused_session, 1);
	ck_assert_uint_eq(st.ann_refused_session, 0);
	ck_assert(!pub.closed && !link.closed && !cli.closed);
	l_fini();
}
END_TEST

/* ------------------------------------------ sessions admitted by --auth-url */

static uint64_t relay_subs(void)
{
	struct moq_node_stats st;

	moq_node_stats(L.relay, &st);
	return st.subscribers;
}

static pid_t url_srv = -1;
static char url_buf[96], url_log[160];

/* tests/auth_server.py on loopback; l_auth_url names it. */
static void url_server_start(void)
{
	const char *args[] = {AUTH_SERVER, "--log", url_log, "--slow", "3", NULL};
	char out[160], port[16];
	uint64_t t0 = proc_now_ms();

	snprintf(url_log, sizeof(url_log), "/tmp/moqdp-test-auth-url-%d.log", (int)getpid());
	snprintf(out, sizeof(out), "/tmp/moqdp-test-auth-url-%d.out", (int)getpid());
	unlink(url_log);
	url_srv = proc_spawn("python3", args, NULL, out, NULL);
	ck_assert_int_gt(url_srv, 0);
	while (sscanf(proc_slurp(out), "listening %15s", port) != 1) {
		ck_assert_msg(proc_now_ms() - t0 < 10000, "auth_server.py did not start");
		usleep(20000);
	}
	unlink(out);
	snprintf(url_buf, sizeof(url_buf), "http://127.0.0.1:%s/", port);
	l_auth_url = url_buf;
	l_auth_timeout = 500 * MS;
}

static void url_server_stop(void)
{
	l_auth_url = NULL;
	if (url_srv > 0) {
		kill(url_srv, SIGTERM);
		proc_wait(url_srv, 5000);
	}
	url_srv = -1;
	unlink(url_log);
}

/* Run the nodes until @cond or 10 s of real time, virtual time in step
 * with real time (the answers come from the server in real time, and the
 * grant's cadence is on the node's clock). */
#define l_until(cond)                                                                              \
	do {                                                                                       \
		uint64_t t0_ = proc_now_ms();                                                      \
		while (!(cond) && proc_now_ms() - t0_ < 10000) {                                   \
			l_run(1 * MS);                                                             \
			usleep(1000);                                                              \
		}                                                                                  \
	} while (0)

/*
 * auth.md, The contract: a session waits while its connect is out (its
 * requests held, not refused), is admitted by a grant, refused by 403, a
 * malformed answer, a grant naming nothing, a late answer (the deadline)
 * or a server that is down; the others go on. Revalidate narrows in place:
 * "Subscriptions ... outside a narrower grant reset with Unauthorized ...
 * and everything else keeps flowing".
 */
START_TEST(test_session_auth_url)
{
	struct cl pub, sub, ref, mal, use, slow, down, pend;
	struct moq_auth_url_stats st;
	int64_t ida, idb;
	uint64_t fa, fb;

	url_server_start();
	l_init(NULL, NULL);
	/* a publisher admitted at "narrow" (publish **) with a/cam and b/cam */
	l_publish("a/cam");
	l_publish("b/cam");
	l_connect(&pub, MOQ_ROLE_PUBLISHER, "narrow", NULL);
	l_until(relay_bcasts() == 2);
	ck_assert_uint_eq(relay_bcasts(), 2);
	ck_assert(pub.ready && !pub.closed);
	// a subscriber admitted for a/** and b/**: it subscribes before the
	// answer is in; the requests wait and are then served
	l_connect(&sub, MOQ_ROLE_SUBSCRIBER, "narrow", NULL);
	l_run(20 * MS);
	ck_assert(!sub.closed);
	ida = l_subscribe(&sub, "a/cam");
	idb = l_subscribe(&sub, "b/cam");
	l_until(relay_subs() == 2 || sub.closed);
	ck_assert_uint_eq(relay_subs(), 2); /* held while pending, then served */
	for (uint64_t g = 0; g < 2; g++) {
		l_group("a/cam", g);
		l_group("b/cam", g);
		l_run(100 * MS);
	}
	l_until(sub.id_frames[ida % 8] >= 10 && sub.id_frames[idb % 8] >= 10);
	ck_assert_uint_ge(sub.id_frames[ida % 8], 10);
	ck_assert_uint_ge(sub.id_frames[idb % 8], 10);
	/* refusals: each closes with 6; the admitted sessions go on */
	l_connect(&ref, MOQ_ROLE_SUBSCRIBER, "refuse", NULL);
	l_connect(&mal, MOQ_ROLE_SUBSCRIBER, "malformed", NULL);
	l_connect(&use, MOQ_ROLE_SUBSCRIBER, "useless", NULL);
	l_connect(&slow, MOQ_ROLE_SUBSCRIBER, "slow", NULL);
	l_until(ref.closed && mal.closed && use.closed && slow.closed);
	ck_assert(ref.closed && ref.code == MOQ_CODE_UNAUTHORIZED);
	ck_assert(mal.closed && mal.code == MOQ_CODE_UNAUTHORIZED);
	ck_assert(use.closed && use.code == MOQ_CODE_UNAUTHORIZED);
	ck_assert(slow.closed && slow.code == MOQ_CODE_UNAUTHORIZED); /* 500 ms deadline */
	ck_assert(!pub.closed && !sub.closed);
	// narrow: past the 1 s cadence the server grants b/** only; a/cam is
	// reset with 6, b/cam keeps flowing
	l_run(1100 * MS);
	l_until(sub.id_code[ida % 8] != 0);
	ck_assert_int_eq(sub.id_code[ida % 8], MOQ_CODE_UNAUTHORIZED);
	ck_assert_int_eq(sub.id_code[idb % 8], 0);
	fa = sub.id_frames[ida % 8];
	fb = sub.id_frames[idb % 8];
	for (uint64_t g = 2; g < 4; g++) {
		l_group("a/cam", g);
		l_group("b/cam", g);
		l_run(100 * MS);
	}
	l_until(sub.id_frames[idb % 8] >= fb + 10);
	ck_assert_uint_ge(sub.id_frames[idb % 8], fb + 10);
	ck_assert_uint_eq(sub.id_frames[ida % 8], fa);
	/* a new subscription outside the narrower grant is refused */
	ida = l_subscribe(&sub, "a/cam");
	l_until(sub.id_code[ida % 8] != 0);
	ck_assert_int_eq(sub.id_code[ida % 8], MOQ_CODE_UNAUTHORIZED);
	ck_assert(!sub.closed && !pub.closed);
	moq_auth_url_get_stats(moq_auth_url_client(L.auth), &st);
	ck_assert_uint_ge(st.admitted, 3);    /* pub, sub, and the revalidations */
	ck_assert_uint_eq(st.refused, 2);     /* 403, names nothing */
	ck_assert_uint_ge(st.unavailable, 2); /* malformed, late */
	/* the server is down: refused (fail closed) */
	kill(url_srv, SIGTERM);
	proc_wait(url_srv, 5000);
	url_srv = -1;
	l_connect(&down, MOQ_ROLE_SUBSCRIBER, "admit", NULL);
	l_until(down.closed);
	ck_assert(down.closed && down.code == MOQ_CODE_UNAUTHORIZED);
	(void)pend;
	l_fini();
	/* the requests, as the server saw them */
	{
		char *log = proc_slurp(url_log);
		ck_assert_msg(strstr(log, "\"event\": \"connect\"") &&
		                      strstr(log, "\"node\": \"relay-test\"") &&
		                      strstr(log, "\"transport\": \"quic\"") &&
		                      strstr(log, "\"alpn\": \"moq-lite-05\"") &&
		                      strstr(log, "\"remote\": \"10.0.0.1:") &&
		                      strstr(log, "\"path\": \"narrow\"") &&
		                      strstr(log, "\"role\": \"subscriber\"") &&
		                      strstr(log, "\"role\": \"publisher\"") &&
		                      strstr(log, "\"event\": \"revalidate\""),
		              "%s", log);
	}
	url_server_stop();
}
END_TEST

/* auth.md: a grant's root "replaces the dialed path, which is how a slug
 * aliases to a canonical id"; "A changed root ... closes the session with
 * Unauthorized". */
START_TEST(test_session_auth_url_root)
{
	struct cl pub, sub, other, re;

	url_server_start();
	l_init(NULL, NULL);
	l_publish("cam");
	/* dialed "peer", rooted at pid/room by the grant: its cam is
	 * pid/room/cam, which a session aliased the same way reads */
	l_connect(&pub, MOQ_ROLE_PUBLISHER, "peer", NULL);
	l_until(relay_bcasts() == 1);
	ck_assert_uint_eq(relay_bcasts(), 1);
	l_connect(&sub, MOQ_ROLE_SUBSCRIBER, "peer", NULL);
	l_connect(&other, MOQ_ROLE_SUBSCRIBER, "admit", NULL);
	l_until(relay_subs() == 0 && sub.ready && other.ready);
	l_subscribe(&sub, "cam");
	l_subscribe(&other, "cam"); /* admit/cam: nobody publishes it */
	l_until(relay_subs() >= 1);
	l_group("cam", 0);
	l_until(sub.frames >= 5);
	ck_assert_uint_eq(sub.frames, 5);
	ck_assert_uint_eq(other.frames, 0);
	/* a revalidation that changes the root closes the session with 6 */
	l_connect(&re, MOQ_ROLE_SUBSCRIBER, "reroot", NULL);
	l_until(re.closed);
	ck_assert(re.closed && re.code == MOQ_CODE_UNAUTHORIZED);
	ck_assert(!sub.closed && !pub.closed);
	l_fini();
	url_server_stop();
}
END_TEST

// auth.md, Revalidate: "a wider grant brings those paths back": a
// publisher admitted for a/** whose revalidated grant adds b/** is asked
// for its announcements under b, and b/cam reaches the relay.
START_TEST(test_session_auth_url_widen)
{
	struct cl pub;
	uint64_t t0;

	url_server_start();
	l_init(NULL, NULL);
	l_publish("a/cam");
	l_publish("b/cam");
	l_connect(&pub, MOQ_ROLE_PUBLISHER, "widenpub", NULL);
	l_until(relay_bcasts() == 1);
	l_run(300 * MS);
	ck_assert_uint_eq(relay_bcasts(), 1); // b/cam is outside publish a/**
	t0 = proc_now_ms();
	l_until(relay_bcasts() == 2);
	ck_assert_uint_eq(relay_bcasts(), 2); /* after the 1 s revalidate */
	ck_assert_uint_lt(proc_now_ms() - t0, 5000);
	ck_assert(!pub.closed);
	l_fini();
	url_server_stop();
}
END_TEST

/* The end event: posted when an admitted session closes, with its reason,
 * duration and the bytes QUIC moved. */
START_TEST(test_session_auth_url_end)
{
	struct cl sub;
	char *log;
	uint64_t t0;

	url_server_start();
	l_init(NULL, NULL);
	l_connect(&sub, MOQ_ROLE_SUBSCRIBER, "admit", "not-read-by-the-relay");
	l_until(moq_auth_url_client(L.auth) && strstr(proc_slurp(url_log), "connect"));
	l_run(200 * MS);
	ck_assert(!sub.closed);
	moq_session_close(sub.s, 0);
	l_run(300 * MS);
	t0 = proc_now_ms();
	while (!strstr(log = proc_slurp(url_log), "\"event\": \"end\"") &&
	       proc_now_ms() - t0 < 10000)
		usleep(10000);
	ck_assert_msg(strstr(log, "\"event\": \"end\"") &&
	                      strstr(log, "\"reason\": \"disconnected\"") &&
	                      strstr(log, "\"bytes\": {\"sent\": ") &&
	                      strstr(log, "\"query\": \"jwt=not-read-by-the-relay\""),
	              "%s", log);
	/* bytes sent by QUIC are counted, not zero */
	ck_assert_msg(!strstr(log, "\"sent\": 0,"), "%s", log);
	l_fini();
	url_server_stop();
}
END_TEST

Suite *auth_suite(void);
Suite *auth_suite(void)
{
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("tokens");

	tcase_add_test(tc, test_hs256_claims);
	tcase_add_test(tc, test_root_narrowing);
	tcase_add_test(tc, test_grant_matching);
	tcase_add_test(tc, test_expiry);
	tcase_add_test(tc, test_bad_tokens);
	tcase_add_test(tc, test_key_dir);
	tcase_add_test(tc, test_public);
	tcase_add_test(tc, test_pattern_vectors);
	tcase_add_test(tc, test_pattern_claims);
	tcase_add_test(tc, test_claim_checks);
	tcase_add_test(tc, test_public_patterns);
	tcase_add_test(tc, test_scope);
	tcase_add_test(tc, test_bad_keys);
	tcase_add_test(tc, test_es256_wolfcrypt);
	tcase_add_test(tc, test_independent_signer);
	tcase_add_test(tc, test_openssl_signer);
	tcase_add_test(tc, test_split_query);
	tcase_add_test(tc, test_reload);
	suite_add_tcase(s, tc);
	tc = tcase_create("sessions");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_session_checks);
	tcase_add_test(tc, test_session_role_and_public);
	tcase_add_test(tc, test_session_lite04_public);
	tcase_add_test(tc, test_session_expiry);
	tcase_add_test(tc, test_session_client_hops);
	tcase_add_test(tc, test_session_link_bounds);
	tcase_add_test(tc, test_session_auth_url);
	tcase_add_test(tc, test_session_auth_url_end);
	tcase_add_test(tc, test_session_auth_url_root);
	tcase_add_test(tc, test_session_auth_url_widen);
	suite_add_tcase(s, tc);
	return s;
}
