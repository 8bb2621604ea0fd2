/* SPDX-License-Identifier: MIT */
/*
 * token.c: moqdp-token, the operator's token tool (moq-relay ships `moq auth
 * generate / sign / verify`, rs/moq-auth; doc/bin/relay/auth.md, Tokens):
 *
 *   moqdp-token generate [--algorithm HS256|ES256|EdDSA] [--out FILE]
 *                        [--public FILE] [--kid ID]
 *   moqdp-token sign --key FILE [--root R] [--publish PAT]... [--subscribe PAT]...
 *                    [--put PATH]... [--get PATH]... [--expires UNIX] [--nbf UNIX]
 *                    [--no-iat]
 *   moqdp-token verify --key FILE [--in FILE] [--path PATH]
 *
 * generate writes a JWK (the private key, or the HS256 secret) to --out
 * (default stdout) and, for ES256 / EdDSA, the public JWK to --public.
 * sign prints a compact JWS of {root, publish, subscribe, put, get, exp,
 * nbf, iat} signed with the key (its alg; its kid in the header). verify
 * reads a token (--in, default stdin), checks it with the relay's own
 * verifier (auth.h, moq_auth_verify) at --path (default: the token's root)
 * and prints its claims and the grant there; exit 1 when refused.
 *
 * Keys come from wolfCrypt's RNG (scripts/setup's wolfSSL has ECC, Ed25519
 * and key generation); JSON is jansson. Only what the relay verifies is
 * made: RSA keys are verified by the relay but not generated here.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/ecc.h>
#include <wolfssl/wolfcrypt/hash.h>
#include <wolfssl/wolfcrypt/hmac.h>
#include <wolfssl/wolfcrypt/random.h>
#ifdef HAVE_ED25519
#include <wolfssl/wolfcrypt/ed25519.h>
#endif

#include <jansson.h>

#include "auth.h"

#define MAX_LIST 64

static const char *prog = "moqdp-token";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* RFC 4648, 5: base64url without padding into a new string. */
static char *b64u(const uint8_t *in, size_t len)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	char *out = malloc(len * 4 / 3 + 4);
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0;

	if (!out)
		die("out of memory");
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
	return out;
}

static int b64v(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '-' || c == '+' ? 62 : c == '_' || c == '/' ? 63 : -1;
}

/* base64url (padding tolerated) into @out (@cap); returns the length or -1. */
static long b64u_dec(const char *in, size_t len, uint8_t *out, size_t cap)
{
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0;

	while (len && in[len - 1] == '=')
		len--;
	for (size_t i = 0; i < len; i++) {
		int v = b64v((unsigned char)in[i]);
		if (v < 0)
			return -1;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o == cap)
				return -1;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	return (long)o;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = path ? fopen(path, "r") : stdin;
	char *buf = NULL;
	size_t n = 0, cap = 0;

	if (!f)
		die("%s: %s", path, strerror(errno));
	for (;;) {
		size_t r;
		if (n + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 8192;
			if (cap > (1u << 20))
				die("%s: larger than 1 MiB", path ? path : "stdin");
			buf = realloc(buf, cap);
			if (!buf)
				die("out of memory");
		}
		r = fread(buf + n, 1, 4096, f);
		n += r;
		if (r == 0)
			break;
	}
	if (path)
		fclose(f);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	buf[n] = 0;
	*len = n;
	return buf;
}

static void write_out(const char *path, const char *text, int secret)
{
	FILE *f = stdout;

	if (path) {
		f = fopen(path, "w");
		if (!f)
			die("%s: %s", path, strerror(errno));
		if (secret)
			(void)chmod(path, 0600);
	}
	fprintf(f, "%s\n", text);
	if (path && fclose(f) != 0)
		die("%s: %s", path, strerror(errno));
}

static void jset_b64(json_t *o, const char *name, const uint8_t *b, size_t n)
{
	char *s = b64u(b, n);

	json_object_set_new(o, name, json_string(s));
	free(s);
}

static char *jdump(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);

	if (!s)
		die("out of memory");
	return s;
}

/* ------------------------------------------------------------- generate */

static int cmd_generate(int argc, char **argv)
{
	const char *alg = "HS256", *out = NULL, *pub = NULL, *kid = NULL;
	json_t *priv = json_object(), *pubk = NULL;
	WC_RNG rng;

	for (int i = 0; i < argc; i++) {
		if (i + 1 >= argc)
			die("generate: %s needs a value", argv[i]);
		if (strcmp(argv[i], "--algorithm") == 0)
			alg = argv[++i];
		else if (strcmp(argv[i], "--out") == 0)
			out = argv[++i];
		else if (strcmp(argv[i], "--public") == 0)
			pub = argv[++i];
		else if (strcmp(argv[i], "--kid") == 0)
			kid = argv[++i];
		else
			die("generate: unknown option %s", argv[i]);
	}
	if (wc_InitRng(&rng) != 0)
		die("wolfCrypt RNG init failed");
	if (strcmp(alg, "HS256") == 0) {
		/* moq-token, key.rs: MIN_OCT_SECRET_BYTES is 32 */
		uint8_t k[32];
		if (pub)
			die("generate: --public: HS256 is symmetric, the secret verifies too");
		if (wc_RNG_GenerateBlock(&rng, k, sizeof(k)) != 0)
			die("wolfCrypt RNG failed");
		json_object_set_new(priv, "kty", json_string("oct"));
		json_object_set_new(priv, "alg", json_string("HS256"));
		jset_b64(priv, "k", k, sizeof(k));
	} else if (strcmp(alg, "ES256") == 0) {
		ecc_key e;
		uint8_t x[32], y[32], d[32];
		word32 xl = 32, yl = 32, dl = 32;
		if (wc_ecc_init(&e) != 0 || wc_ecc_make_key_ex(&rng, 32, &e, ECC_SECP256R1) != 0 ||
		    wc_ecc_export_private_raw(&e, x, &xl, y, &yl, d, &dl) != 0 || xl != 32 ||
		    yl != 32 || dl != 32)
			die("ES256: wolfCrypt key generation failed");
		wc_ecc_free(&e);
		json_object_set_new(priv, "kty", json_string("EC"));
		json_object_set_new(priv, "alg", json_string("ES256"));
		json_object_set_new(priv, "crv", json_string("P-256"));
		jset_b64(priv, "x", x, 32);
		jset_b64(priv, "y", y, 32);
		pubk = json_deep_copy(priv);
		jset_b64(priv, "d", d, 32);
	} else if (strcmp(alg, "EdDSA") == 0) {
#if defined(HAVE_ED25519) && defined(HAVE_ED25519_SIGN) && defined(HAVE_ED25519_KEY_EXPORT)
		ed25519_key e;
		uint8_t x[32], d[32];
		word32 xl = 32, dl = 32;
		if (wc_ed25519_init(&e) != 0 || wc_ed25519_make_key(&rng, 32, &e) != 0 ||
		    wc_ed25519_export_public(&e, x, &xl) != 0 ||
		    wc_ed25519_export_private_only(&e, d, &dl) != 0)
			die("EdDSA: wolfCrypt key generation failed");
		wc_ed25519_free(&e);
		json_object_set_new(priv, "kty", json_string("OKP"));
		json_object_set_new(priv, "alg", json_string("EdDSA"));
		json_object_set_new(priv, "crv", json_string("Ed25519"));
		jset_b64(priv, "x", x, 32);
		pubk = json_deep_copy(priv);
		jset_b64(priv, "d", d, 32);
#else
		die("generate: EdDSA: this build's wolfSSL has no Ed25519 signing "
		    "(scripts/setup: --enable-ed25519)");
#endif
	} else {
		die("generate: --algorithm %s: HS256, ES256 or EdDSA", alg);
	}
	wc_FreeRng(&rng);
	if (kid) {
		json_object_set_new(priv, "kid", json_string(kid));
		if (pubk)
			json_object_set_new(pubk, "kid", json_string(kid));
	}
	if (pubk) {
		json_t *ops = json_array();
		json_array_append_new(ops, json_string("verify"));
		json_object_set_new(pubk, "key_ops", ops);
		if (pub) {
			char *s = jdump(pubk);
			write_out(pub, s, 0);
			free(s);
		}
		json_decref(pubk);
	}
	{
		char *s = jdump(priv);
		write_out(out, s, 1);
		free(s);
	}
	json_decref(priv);
	return 0;
}

/* ----------------------------------------------------------------- sign */

static json_t *load_jwk(const char *path)
{
	size_t n;
	char *t = slurp(path, &n);
	json_t *o;

	if (n && t[0] != '{') {
		/* the reference CLI writes base64url of the JSON */
		uint8_t *d = malloc(n + 1);
		long dl = d ? b64u_dec(t, n, d, n) : -1;
		if (dl < 0)
			die("--key: %s: neither JSON nor base64url of JSON", path);
		o = json_loadb((const char *)d, (size_t)dl, 0, NULL);
		free(d);
	} else {
		o = json_loadb(t, n, 0, NULL);
	}
	free(t);
	if (!json_is_object(o))
		die("--key: %s: not a JWK (JSON object)", path);
	return o;
}

static size_t member(json_t *k, const char *name, uint8_t *out, size_t want, const char *path)
{
	const char *s = json_string_value(json_object_get(k, name));
	long n = s ? b64u_dec(s, strlen(s), out, want) : -1;

	if (n != (long)want)
		die("--key: %s: %s missing or not %zu bytes", path, name, want);
	return (size_t)n;
}

/* The signature over @msg (@ml bytes) with JWK @k: base64url, new. */
static char *sign_with(json_t *k, const char *path, const char *alg, const char *msg, size_t ml)
{
	if (strcmp(alg, "HS256") == 0 || strcmp(alg, "HS384") == 0 || strcmp(alg, "HS512") == 0) {
		const char *ks = json_string_value(json_object_get(k, "k"));
		uint8_t key[512], mac[64];
		int ht = alg[2] == '2' ? WC_SHA256 : alg[2] == '3' ? WC_SHA384 : WC_SHA512;
		int hl = alg[2] == '2' ? 32 : alg[2] == '3' ? 48 : 64;
		long kl = ks ? b64u_dec(ks, strlen(ks), key, sizeof(key)) : -1;
		Hmac h;
		if (kl < 32)
			die("--key: %s: k missing or shorter than 32 bytes", path);
		if (wc_HmacInit(&h, NULL, INVALID_DEVID) != 0 ||
		    wc_HmacSetKey(&h, ht, key, (word32)kl) != 0 ||
		    wc_HmacUpdate(&h, (const uint8_t *)msg, (word32)ml) != 0 ||
		    wc_HmacFinal(&h, mac) != 0)
			die("HMAC failed");
		wc_HmacFree(&h);
		return b64u(mac, (size_t)hl);
	}
	if (strcmp(alg, "ES256") == 0) {
		uint8_t x[32], y[32], d[32], dg[32], der[80], rs[64];
		word32 derl = sizeof(der), rl = 32, sl = 32;
		ecc_key e;
		WC_RNG rng;
		member(k, "x", x, 32, path);
		member(k, "y", y, 32, path);
		if (!json_object_get(k, "d"))
			die("--key: %s: a public key (no d) cannot sign", path);
		member(k, "d", d, 32, path);
		memset(rs, 0, sizeof(rs));
		if (wc_InitRng(&rng) != 0 || wc_ecc_init(&e) != 0 ||
		    wc_ecc_import_unsigned(&e, x, y, d, ECC_SECP256R1) != 0 ||
		    wc_Hash(WC_HASH_TYPE_SHA256, (const uint8_t *)msg, (word32)ml, dg, 32) != 0 ||
		    wc_ecc_sign_hash(dg, 32, der, &derl, &rng, &e) != 0 ||
		    wc_ecc_sig_to_rs(der, derl, rs, &rl, rs + 32, &sl) != 0)
			die("ES256: signing failed");
		/* RFC 7518, 3.4: R and S as 32-byte big-endian each */
		if (rl < 32) {
			memmove(rs + 32 - rl, rs, rl);
			memset(rs, 0, 32 - rl);
		}
		if (sl < 32) {
			memmove(rs + 64 - sl, rs + 32, sl);
			memset(rs + 32, 0, 32 - sl);
		}
		wc_ecc_free(&e);
		wc_FreeRng(&rng);
		return b64u(rs, 64);
	}
	if (strcmp(alg, "EdDSA") == 0) {
#if defined(HAVE_ED25519) && defined(HAVE_ED25519_SIGN) && defined(HAVE_ED25519_KEY_IMPORT)
		uint8_t x[32], d[32], sig[64];
		word32 sl = sizeof(sig);
		ed25519_key e;
		member(k, "x", x, 32, path);
		if (!json_object_get(k, "d"))
			die("--key: %s: a public key (no d) cannot sign", path);
		member(k, "d", d, 32, path);
		if (wc_ed25519_init(&e) != 0 ||
		    wc_ed25519_import_private_key(d, 32, x, 32, &e) != 0 ||
		    wc_ed25519_sign_msg((const uint8_t *)msg, (word32)ml, sig, &sl, &e) != 0)
			die("EdDSA: signing failed");
		wc_ed25519_free(&e);
		return b64u(sig, sl);
#else
		die("sign: EdDSA: this build's wolfSSL has no Ed25519 signing");
#endif
	}
	die("--key: %s: alg %s: this tool signs with HS256/384/512, ES256 or EdDSA", path, alg);
}

static void add_list(json_t *claims, const char *name, char **v, int n)
{
	json_t *a;

	if (!n)
		return;
	a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	json_object_set_new(claims, name, a);
}

static int cmd_sign(int argc, char **argv)
{
	const char *key = NULL, *root = NULL;
	char *pub[MAX_LIST], *sub[MAX_LIST], *put[MAX_LIST], *get[MAX_LIST];
	int npub = 0, nsub = 0, nput = 0, nget = 0, iat = 1;
	long long exp = -1, nbf = -1;
	json_t *k, *hdr, *claims;
	const char *alg, *kid;
	char *h, *c, *hb, *cb, *msg, *sig;

	for (int i = 0; i < argc; i++) {
		const char *o = argv[i];
		if (strcmp(o, "--no-iat") == 0) {
			iat = 0;
			continue;
		}
		if (i + 1 >= argc)
			die("sign: %s needs a value", o);
		if (strcmp(o, "--key") == 0)
			key = argv[++i];
		else if (strcmp(o, "--root") == 0)
			root = argv[++i];
		else if (strcmp(o, "--publish") == 0 && npub < MAX_LIST)
			pub[npub++] = argv[++i];
		else if (strcmp(o, "--subscribe") == 0 && nsub < MAX_LIST)
			sub[nsub++] = argv[++i];
		else if (strcmp(o, "--put") == 0 && nput < MAX_LIST)
			put[nput++] = argv[++i];
		else if (strcmp(o, "--get") == 0 && nget < MAX_LIST)
			get[nget++] = argv[++i];
		else if (strcmp(o, "--expires") == 0 || strcmp(o, "--nbf") == 0) {
			char *end;
			long long v = strtoll(argv[++i], &end, 10);
			if (*end || v < 0)
				die("sign: %s %s: Unix seconds", o, argv[i]);
			*(o[2] == 'e' ? &exp : &nbf) = v;
		} else
			die("sign: unknown option %s (or more than %d of it)", o, MAX_LIST);
	}
	if (!key)
		die("sign: --key FILE is required");
	if (!npub && !nsub && !nput && !nget)
		die("sign: the token would grant nothing (--publish, --subscribe, --put, --get)");
	k = load_jwk(key);
	alg = json_string_value(json_object_get(k, "alg"));
	kid = json_string_value(json_object_get(k, "kid"));
	if (!alg)
		die("--key: %s: no alg", key);
	hdr = json_object();
	json_object_set_new(hdr, "typ", json_string("JWT"));
	json_object_set_new(hdr, "alg", json_string(alg));
	if (kid)
		json_object_set_new(hdr, "kid", json_string(kid));
	claims = json_object();
	if (root)
		json_object_set_new(claims, "root", json_string(root));
	add_list(claims, "publish", pub, npub);
	add_list(claims, "subscribe", sub, nsub);
	add_list(claims, "put", put, nput);
	add_list(claims, "get", get, nget);
	if (exp >= 0)
		json_object_set_new(claims, "exp", json_integer(exp));
	if (nbf >= 0)
		json_object_set_new(claims, "nbf", json_integer(nbf));
	if (iat)
		json_object_set_new(claims, "iat", json_integer((json_int_t)time(NULL)));
	h = jdump(hdr);
	c = jdump(claims);
	hb = b64u((const uint8_t *)h, strlen(h));
	cb = b64u((const uint8_t *)c, strlen(c));
	msg = malloc(strlen(hb) + strlen(cb) + 2);
	if (!msg)
		die("out of memory");
	sprintf(msg, "%s.%s", hb, cb);
	sig = sign_with(k, key, alg, msg, strlen(msg));
	printf("%s.%s\n", msg, sig);
	free(h);
	free(c);
	free(hb);
	free(cb);
	free(msg);
	free(sig);
	json_decref(hdr);
	json_decref(claims);
	json_decref(k);
	return 0;
}

/* --------------------------------------------------------------- verify */

static void print_paths(const char *name, const struct moq_auth_path *v, uint32_t n)
{
	printf("%s:", name);
	for (uint32_t i = 0; i < n; i++)
		printf(" %s%s", v[i].pat ? v[i].pat : v[i].p,
		       v[i].pat   ? ""
		       : v[i].len ? "/**"
		                  : "**");
	if (!n)
		printf(" (nothing)");
	printf("\n");
}

static int cmd_verify(int argc, char **argv)
{
	const char *key = NULL, *in = NULL, *path = NULL;
	char err[512] = "", *tok, *root = NULL;
	size_t tl;
	struct moq_auth *a;
	struct moq_auth_grant *g = NULL;
	int rc;

	for (int i = 0; i < argc; i++) {
		if (i + 1 >= argc)
			die("verify: %s needs a value", argv[i]);
		if (strcmp(argv[i], "--key") == 0)
			key = argv[++i];
		else if (strcmp(argv[i], "--in") == 0)
			in = argv[++i];
		else if (strcmp(argv[i], "--path") == 0)
			path = argv[++i];
		else
			die("verify: unknown option %s", argv[i]);
	}
	if (!key)
		die("verify: --key FILE is required");
	a = moq_auth_create(&(struct moq_auth_cfg){.key = key}, err, sizeof(err));
	if (!a)
		die("%s", err);
	tok = slurp(in, &tl);
	/* the claims, printed as they are (the signature is checked below) */
	{
		const char *d1 = memchr(tok, '.', tl);
		const char *d2 = d1 ? memchr(d1 + 1, '.', tl - (size_t)(d1 + 1 - tok)) : NULL;
		if (d2) {
			uint8_t body[MOQ_AUTH_MAX_TOKEN];
			long bl = b64u_dec(d1 + 1, (size_t)(d2 - d1 - 1), body, sizeof(body));
			json_t *c =
			        bl > 0 ? json_loadb((const char *)body, (size_t)bl, 0, NULL) : NULL;
			if (c) {
				char *s = json_dumps(c, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
				printf("%s\n", s ? s : "");
				free(s);
				if (json_is_string(json_object_get(c, "root")))
					root = strdup(
					        json_string_value(json_object_get(c, "root")));
				json_decref(c);
			}
		}
	}
	if (!path)
		path = root ? root : "";
	rc = moq_auth_verify(a, path, strlen(path), tok, tl, &g);
	if (rc) {
		fprintf(stderr, "%s: refused at path '%s': %s\n", prog, path,
		        moq_auth_result_str(rc));
		moq_auth_destroy(a);
		free(root);
		free(tok);
		return 1;
	}
	printf("valid at path '%s'\n", g->root);
	print_paths("publish", g->put, g->nput);
	print_paths("subscribe", g->get, g->nget);
	if (g->has_exp)
		printf("expires: %lld\n", (long long)g->exp);
	moq_auth_grant_free(g);
	moq_auth_destroy(a);
	free(root);
	free(tok);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: %s generate [--algorithm HS256|ES256|EdDSA] [--out FILE] [--public FILE] "
	        "[--kid ID]\n"
	        "       %s sign --key FILE [--root R] [--publish PAT]... [--subscribe PAT]... "
	        "[--put PATH]... [--get PATH]... [--expires UNIX] [--nbf UNIX] [--no-iat]\n"
	        "       %s verify --key FILE [--in FILE] [--path PATH]\n",
	        prog, prog, prog);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "generate") == 0)
		return cmd_generate(argc - 2, argv + 2);
	if (strcmp(argv[1], "sign") == 0)
		return cmd_sign(argc - 2, argv + 2);
	if (strcmp(argv[1], "verify") == 0)
		return cmd_verify(argc - 2, argv + 2);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}
