/* SPDX-License-Identifier: MIT */
/*
 * auth.c: JWT (compact JWS) verification as moq-relay does it: JWK keys,
 * claims, path narrowing, public prefixes, and the key set swapped on reload
 * (auth.h). The reference is github moq-dev/moq: rs/moq-token/src/{key,
 * claims,path,key_id}.rs and rs/moq-relay/src/auth.rs.
 */
#include "auth.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/asn_public.h>
#include <wolfssl/wolfcrypt/ecc.h>
#include <wolfssl/wolfcrypt/hash.h>
#include <wolfssl/wolfcrypt/hmac.h>
#include <wolfssl/wolfcrypt/rsa.h>
#ifdef HAVE_ED25519
#include <wolfssl/wolfcrypt/ed25519.h>
#endif

#include <jansson.h>

#include "moq_err.h"
#include "authurl.h"
#include "moq_pct.h"
#include "moq_path.h"
#include "pattern.h"

/* ------------------------------------------------------------ algorithms */

/* moq-token, algorithm.rs: the algorithms a JWK's `alg` may name. */
enum alg {
	ALG_NONE = 0,
	ALG_HS256,
	ALG_HS384,
	ALG_HS512,
	ALG_ES256,
	ALG_ES384,
	ALG_RS256,
	ALG_RS384,
	ALG_RS512,
	ALG_PS256,
	ALG_PS384,
	ALG_PS512,
	ALG_EDDSA,
};

static const char *const alg_names[] = {
        [ALG_HS256] = "HS256", [ALG_HS384] = "HS384", [ALG_HS512] = "HS512", [ALG_ES256] = "ES256",
        [ALG_ES384] = "ES384", [ALG_RS256] = "RS256", [ALG_RS384] = "RS384", [ALG_RS512] = "RS512",
        [ALG_PS256] = "PS256", [ALG_PS384] = "PS384", [ALG_PS512] = "PS512", [ALG_EDDSA] = "EdDSA",
};

static enum alg alg_of(const char *s)
{
	for (int i = 1; i < (int)(sizeof(alg_names) / sizeof(alg_names[0])); i++)
		if (strcmp(s, alg_names[i]) == 0)
			return (enum alg)i;
	return ALG_NONE;
}

/* The hash of an algorithm (RFC 7518, 3.1: the digit is the SHA-2 size). */
static enum wc_HashType alg_hash(enum alg a)
{
	switch (a) {
	case ALG_HS256:
	case ALG_ES256:
	case ALG_RS256:
	case ALG_PS256:
		return WC_HASH_TYPE_SHA256;
	case ALG_HS384:
	case ALG_ES384:
	case ALG_RS384:
	case ALG_PS384:
		return WC_HASH_TYPE_SHA384;
	case ALG_HS512:
	case ALG_RS512:
	case ALG_PS512:
		return WC_HASH_TYPE_SHA512;
	default:
		return WC_HASH_TYPE_NONE;
	}
}

/* ------------------------------------------------------------------ keys */

enum kty { KTY_OCT = 1, KTY_EC, KTY_OKP, KTY_RSA };

/* moq-token, key.rs: the decoded JWK. Key material is kept raw and imported
 * into a wolfCrypt key on the verifying thread's stack (wolfCrypt key
 * objects are not meant to be shared between threads). */
struct key {
	char kid[MOQ_AUTH_MAX_KID + 1]; /* key directory: the file's stem */
	enum alg alg;
	enum kty kty;
	uint8_t verify; /* key_ops include "verify" (default: sign + verify) */
	uint8_t *a, *b; /* oct: k; EC: x, y; OKP: x; RSA: n, e */
	size_t alen, blen;
	/* optional scope: what tokens of this key may grant */
	uint8_t has_scope;
	char *scope_root;
	uint32_t scope_nput, scope_nget;
	char **scope_put, **scope_get;
};

struct keyset {
	int dir; /* keys come from a directory: tokens must carry a kid */
	uint32_t nkeys;
	struct key *keys;
};

struct moq_auth {
	char *key_file, *key_dir;
	/* public grants (no token): pattern texts rooted at "" */
	uint32_t npub_put, npub_get;
	char **pub_put, **pub_get;
	uint64_t (*clock)(void *ctx);
	void *clock_ctx;
	struct moq_auth_url *url; /* --auth-url */
	_Atomic(struct keyset *) cur;
	_Atomic uint32_t users; /* verifications in progress (moq_auth_reload waits) */
	_Atomic uint64_t accepted, refused, reloads, reload_failed;
};

static int cfg_fail(char *err, size_t errlen, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static int cfg_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
		for (char *p = err; *p; p++) /* one line */
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '?';
	}
	return MOQ_ERR_CONFIG;
}

/* --------------------------------------------------------------- base64url */

static int b64_val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

/*
 * RFC 4648, 5: base64url. The JWS parts have no padding (RFC 7515, 2);
 * JWK members may be padded (moq-token accepts both). Non-zero trailing bits
 * are refused, as the base64 crate does. Returns the decoded length or -1.
 */
static long b64url_decode(const char *in, size_t len, uint8_t *out, size_t cap, int allow_pad)
{
	size_t o = 0, i, pad = 0;
	uint32_t acc = 0;
	int bits = 0;

	if (allow_pad) {
		/* padded: whole quanta, '=' only where the data ends short */
		if (len % 4 != 0)
			return -1;
		while (pad < 2 && len > pad && in[len - pad - 1] == '=')
			pad++;
		len -= pad;
		if ((pad == 1 && len % 4 != 3) || (pad == 2 && len % 4 != 2))
			return -1;
	}
	if (len % 4 == 1)
		return -1;
	for (i = 0; i < len; i++) {
		int v = b64_val((unsigned char)in[i]);
		if (v < 0)
			return -1;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o >= cap)
				return -1;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	if (bits && (acc & ((1u << bits) - 1)))
		return -1; /* non-canonical trailing bits */
	return (long)o;
}

/* Decode a JWK member into a new buffer (padded or not). */
static uint8_t *b64_member(json_t *o, const char *name, size_t *len)
{
	json_t *v = json_object_get(o, name);
	const char *s;
	size_t sl;
	uint8_t *buf;
	long n;

	if (!json_is_string(v))
		return NULL;
	s = json_string_value(v);
	sl = json_string_length(v);
	buf = malloc(sl * 3 / 4 + 3);
	if (!buf)
		return NULL;
	n = b64url_decode(s, sl, buf, sl * 3 / 4 + 3, 0);
	if (n < 0)
		n = b64url_decode(s, sl, buf, sl * 3 / 4 + 3, 1);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	*len = (size_t)n;
	return buf;
}

/* ------------------------------------------------------------------ paths */

/* moq-token, path.rs: normalise (drop empty segments) into a new string,
 * with moq/'s routing's normaliser (moq_path.h; no segment bound here: a
 * path routing refuses is never reached) */
static char *norm_dup(const char *p, size_t len, size_t *out_len)
{
	char *d = malloc(len + 1);
	long o;

	if (!d)
		return NULL;
	o = moq_path_normalise(d, len, p, len, (size_t)-1);
	if (o < 0) { /* cannot happen: never longer than @p */
		free(d);
		return NULL;
	}
	d[o] = 0;
	if (out_len)
		*out_len = (size_t)o;
	return d;
}

/* path.rs, strip_prefix: @path below @prefix on whole segments; returns the
 * rest's offset in @path, or -1. Both normalised. */
static long strip_prefix(const char *path, size_t len, const char *prefix, size_t plen)
{
	if (plen == 0)
		return 0;
	if (len < plen || memcmp(path, prefix, plen) != 0)
		return -1;
	if (len == plen)
		return (long)len;
	return path[plen] == '/' ? (long)plen + 1 : -1;
}

static bool has_prefix(const char *path, size_t len, const char *prefix, size_t plen)
{
	return strip_prefix(path, len, prefix, plen) >= 0;
}

/* path.rs, join: two normalised paths into a new one. */
static char *join_dup(const char *a, size_t al, const char *b, size_t bl, size_t *out_len)
{
	char *d = malloc(al + bl + 2);
	size_t o = 0;

	if (!d)
		return NULL;
	memcpy(d, a, al);
	o = al;
	if (al && bl)
		d[o++] = '/';
	memcpy(d + o, b, bl);
	o += bl;
	d[o] = 0;
	*out_len = o;
	return d;
}

static void strv_free(char **v, uint32_t n)
{
	for (uint32_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

/* ------------------------------------------------------------------- JWK */

static void key_clear(struct key *k)
{
	free(k->a);
	free(k->b);
	free(k->scope_root);
	strv_free(k->scope_put, k->scope_nput);
	strv_free(k->scope_get, k->scope_nget);
	memset(k, 0, sizeof(*k));
}

static void keyset_free(struct keyset *ks)
{
	if (!ks)
		return;
	for (uint32_t i = 0; i < ks->nkeys; i++)
		key_clear(&ks->keys[i]);
	free(ks->keys);
	free(ks);
}

// One grant of a token or scope as a pattern text (pattern.h), appended to
// *@out: the older dialect's put/get path @old (normalised; a prefix, so
// "p" is "p/**" and "" is "**": auth.md, Claims), or a publish/subscribe
// pattern, parsed strictly. A string with a NUL, an older path holding a
// '*' (moq-relay reads it as a literal subtree, which cannot hold one) or
// a bad pattern is refused. Returns NULL or why not.
static const char *pat_add(const char *s, size_t l, int old, char ***out, uint32_t *n)
{
	char **nv, *t;

	if (memchr(s, 0, l))
		return "holds a NUL";
	if (*n >= MOQ_AUTH_MAX_GRANTS)
		return "has too many paths";
	if (old) {
		size_t nl;
		char *np = norm_dup(s, l, &nl);
		if (!np)
			return "out of memory";
		if (memchr(np, '*', nl)) {
			free(np);
			return "is a path holding '*' (write publish/subscribe patterns)";
		}
		t = malloc(nl + 4);
		if (t)
			snprintf(t, nl + 4, nl ? "%s/**" : "**", np);
		free(np);
	} else {
		struct moq_pattern pt;
		if (moq_pattern_parse(&pt, s, l) != 0)
			return "is not a pattern";
		t = strndup(s, l);
	}
	if (!t)
		return "out of memory";
	nv = realloc(*out, (*n + 2) * sizeof(char *));
	if (!nv) {
		free(t);
		return "out of memory";
	}
	*out = nv;
	nv[(*n)++] = t;
	nv[*n] = NULL;
	return NULL;
}

/* A string or an array of strings (claims.rs, OneOrMany), appended as
 * patterns (pat_add). Absent: nothing. */
static const char *str_array(json_t *v, int old, char ***out, uint32_t *n)
{
	size_t i;
	json_t *e;
	const char *why;

	if (!v)
		return NULL;
	if (json_is_string(v))
		return pat_add(json_string_value(v), json_string_length(v), old, out, n);
	if (!json_is_array(v))
		return "is not an array of strings";
	if (json_array_size(v) > MOQ_AUTH_MAX_GRANTS)
		return "has too many paths";
	json_array_foreach(v, i, e)
	{
		if (!json_is_string(e))
			return "is not an array of strings";
		why = pat_add(json_string_value(e), json_string_length(e), old, out, n);
		if (why)
			return why;
	}
	return NULL;
}

static bool is_kid(const char *s, size_t len)
{
	if (len == 0 || len > MOQ_AUTH_MAX_KID)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return false;
	}
	return true;
}

/* Check that the material imports into wolfCrypt (a point on the curve, an
 * RSA modulus of at least 2048 bits). Returns NULL or why not. */
static const char *key_check(const struct key *k)
{
	switch (k->kty) {
	case KTY_OCT:
		return NULL;
	case KTY_EC: {
		ecc_key e;
		int rc;
		if (wc_ecc_init(&e) != 0)
			return "wolfCrypt ECC init failed";
		rc = wc_ecc_import_unsigned(&e, k->a, k->b, NULL,
		                            k->alg == ALG_ES256 ? ECC_SECP256R1 : ECC_SECP384R1);
		if (rc == 0)
			rc = wc_ecc_check_key(&e);
		wc_ecc_free(&e);
		return rc == 0 ? NULL : "x, y is not a point of the curve";
	}
	case KTY_RSA: {
		RsaKey r;
		int rc, bits = 0;
		if (wc_InitRsaKey(&r, NULL) != 0)
			return "wolfCrypt RSA init failed";
		rc = wc_RsaPublicKeyDecodeRaw(k->a, (word32)k->alen, k->b, (word32)k->blen, &r);
		if (rc == 0)
			bits = wc_RsaEncryptSize(&r) * 8;
		wc_FreeRsaKey(&r);
		if (rc != 0)
			return "n, e is not an RSA public key";
		/* RFC 7518, 3.3: a key of 2048 bits or larger MUST be used */
		return bits >= 2048 ? NULL : "RSA modulus shorter than 2048 bits";
	}
	case KTY_OKP:
#ifdef HAVE_ED25519
	{
		ed25519_key e;
		int rc;
		if (wc_ed25519_init(&e) != 0)
			return "wolfCrypt Ed25519 init failed";
		rc = wc_ed25519_import_public(k->a, (word32)k->alen, &e);
		wc_ed25519_free(&e);
		return rc == 0 ? NULL : "x is not an Ed25519 public key";
	}
#else
		return "EdDSA: this build's wolfSSL has no Ed25519 (--enable-ed25519)";
#endif
	}
	return "unknown key type";
}

/* moq-token, key.rs: parse the JWK in @text into @k. Returns NULL or why not. */
static const char *jwk_parse(const char *text, size_t len, struct key *k)
{
	static char why[160];
	char *buf = NULL;
	json_t *o, *v;
	json_error_t je;
	const char *kty, *e = NULL;
	size_t n = len;

	memset(k, 0, sizeof(*k));
	/* key.rs, from_str: trimmed; JSON, or base64url (no padding) of it */
	while (n && (*text == ' ' || *text == '\t' || *text == '\n' || *text == '\r')) {
		text++;
		n--;
	}
	while (n && (text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\n' ||
	             text[n - 1] == '\r'))
		n--;
	if (n && text[0] != '{') {
		long dl;
		buf = malloc(n);
		if (!buf)
			return "out of memory";
		dl = b64url_decode(text, n, (uint8_t *)buf, n, 0);
		if (dl < 0) {
			free(buf);
			return "neither JSON nor base64url of JSON";
		}
		text = buf;
		n = (size_t)dl;
	}
	o = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
	free(buf);
	if (!o) {
		snprintf(why, sizeof(why), "not JSON (%.100s)", je.text);
		return why;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		return "not a JSON object";
	}
	/* key.rs: kty defaults to "oct" (keys of an older moq-token) */
	v = json_object_get(o, "kty");
	if (v && !json_is_string(v)) {
		e = "kty is not a string";
		goto out;
	}
	kty = v ? json_string_value(v) : "oct";
	v = json_object_get(o, "alg");
	if (!json_is_string(v)) {
		e = "no alg";
		goto out;
	}
	k->alg = alg_of(json_string_value(v));
	if (k->alg == ALG_NONE) {
		e = "unknown alg";
		goto out;
	}
	k->verify = 1;
	v = json_object_get(o, "key_ops");
	if (v) {
		size_t i;
		json_t *op;
		if (!json_is_array(v)) {
			e = "key_ops is not an array";
			goto out;
		}
		k->verify = 0;
		json_array_foreach(v, i, op)
		{
			const char *s = json_string_value(op);
			if (!s || (strcmp(s, "sign") && strcmp(s, "verify") &&
			           strcmp(s, "decrypt") && strcmp(s, "encrypt"))) {
				e = "unknown key_ops entry";
				goto out;
			}
			if (strcmp(s, "verify") == 0)
				k->verify = 1;
		}
	}
	v = json_object_get(o, "kid");
	if (v && (!json_is_string(v) || !is_kid(json_string_value(v), json_string_length(v)))) {
		e = "kid is not 1-128 of [A-Za-z0-9_-]";
		goto out;
	}
	if (strcmp(kty, "oct") == 0) {
		k->kty = KTY_OCT;
		k->a = b64_member(o, "k", &k->alen);
		if (!k->a) {
			e = "oct: no base64url k";
			goto out;
		}
		/* key.rs: MIN_OCT_SECRET_BYTES */
		if (k->alen < 32) {
			e = "secret shorter than 32 bytes";
			goto out;
		}
		if (alg_hash(k->alg) == WC_HASH_TYPE_NONE || k->alg > ALG_HS512) {
			e = "an oct key needs alg HS256, HS384 or HS512";
			goto out;
		}
	} else if (strcmp(kty, "EC") == 0) {
		const char *crv = json_string_value(json_object_get(o, "crv"));
		size_t want;
		k->kty = KTY_EC;
		if (!crv || (strcmp(crv, "P-256") && strcmp(crv, "P-384"))) {
			e = "EC: crv is not P-256 or P-384";
			goto out;
		}
		want = strcmp(crv, "P-256") == 0 ? 32 : 48;
		if (k->alg != (want == 32 ? ALG_ES256 : ALG_ES384)) {
			e = want == 32 ? "P-256 needs alg ES256" : "P-384 needs alg ES384";
			goto out;
		}
		k->a = b64_member(o, "x", &k->alen);
		k->b = b64_member(o, "y", &k->blen);
		if (!k->a || !k->b || k->alen != want || k->blen != want) {
			e = "EC: x or y missing or of the wrong length";
			goto out;
		}
	} else if (strcmp(kty, "OKP") == 0) {
		const char *crv = json_string_value(json_object_get(o, "crv"));
		k->kty = KTY_OKP;
		if (!crv || strcmp(crv, "Ed25519")) {
			e = "OKP: crv is not Ed25519";
			goto out;
		}
		if (k->alg != ALG_EDDSA) {
			e = "Ed25519 needs alg EdDSA";
			goto out;
		}
		k->a = b64_member(o, "x", &k->alen);
		if (!k->a || k->alen != 32) {
			e = "OKP: x missing or not 32 bytes";
			goto out;
		}
	} else if (strcmp(kty, "RSA") == 0) {
		k->kty = KTY_RSA;
		if (k->alg < ALG_RS256 || k->alg > ALG_PS512) {
			e = "an RSA key needs alg RS256..512 or PS256..512";
			goto out;
		}
		k->a = b64_member(o, "n", &k->alen);
		k->b = b64_member(o, "e", &k->blen);
		if (!k->a || !k->b) {
			e = "RSA: n or e missing";
			goto out;
		}
	} else {
		e = "kty is not oct, EC, OKP or RSA";
		goto out;
	}
	v = json_object_get(o, "scope");
	if (v && !json_is_null(v)) {
		json_t *r = json_object_get(v, "root");
		if (!json_is_object(v) || (r && !json_is_string(r))) {
			e = "scope is not {root, put, get}";
			goto out;
		}
		k->has_scope = 1;
		k->scope_root = norm_dup(r ? json_string_value(r) : "",
		                         r ? json_string_length(r) : 0, NULL);
		if (!k->scope_root) {
			e = "out of memory";
			goto out;
		}
		e = str_array(json_object_get(v, "put"), 1, &k->scope_put, &k->scope_nput);
		if (!e)
			e = str_array(json_object_get(v, "get"), 1, &k->scope_get, &k->scope_nget);
		if (!e)
			e = str_array(json_object_get(v, "publish"), 0, &k->scope_put,
			              &k->scope_nput);
		if (!e)
			e = str_array(json_object_get(v, "subscribe"), 0, &k->scope_get,
			              &k->scope_nget);
		if (e)
			goto out;
		/* claims.rs, Scope::validate */
		if (!k->scope_nput && !k->scope_nget) {
			e = "scope grants neither put nor get";
			goto out;
		}
	}
	e = key_check(k);
out:
	json_decref(o);
	if (e)
		key_clear(k);
	return e;
}

/* Read @path whole (at most MOQ_AUTH_MAX_KEY_FILE bytes). */
static char *slurp(const char *path, size_t *len, const char **why)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	if (!f) {
		*why = strerror(errno);
		return NULL;
	}
	buf = malloc(MOQ_AUTH_MAX_KEY_FILE + 1);
	if (!buf) {
		fclose(f);
		*why = "out of memory";
		return NULL;
	}
	n = fread(buf, 1, MOQ_AUTH_MAX_KEY_FILE + 1, f);
	fclose(f);
	if (n > MOQ_AUTH_MAX_KEY_FILE) {
		free(buf);
		*why = "larger than 64 KiB";
		return NULL;
	}
	buf[n] = 0;
	*len = n;
	return buf;
}

static int key_load(const char *opt, const char *path, struct key *k, char *err, size_t errlen)
{
	const char *why = NULL;
	size_t len;
	char *text = slurp(path, &len, &why);

	if (!text)
		return cfg_fail(err, errlen, "%s: %s: %s", opt, path, why);
	why = jwk_parse(text, len, k);
	free(text);
	if (why)
		return cfg_fail(err, errlen, "%s: %s: %s", opt, path, why);
	if (!k->verify && strcmp(opt, "--auth-key") == 0) {
		key_clear(k); /* parsed, so its buffers are ours (LeakSanitizer) */
		return cfg_fail(err, errlen, "%s: %s: key_ops do not include verify", opt, path);
	}
	return 0;
}

static int cmp_kid(const void *x, const void *y)
{
	return strcmp(((const struct key *)x)->kid, ((const struct key *)y)->kid);
}

/* Build a key set from the files of @a. */
static struct keyset *keyset_load(const struct moq_auth *a, char *err, size_t errlen)
{
	struct keyset *ks = calloc(1, sizeof(*ks));

	if (!ks) {
		cfg_fail(err, errlen, "auth: out of memory");
		return NULL;
	}
	if (a->key_file) {
		ks->keys = calloc(1, sizeof(*ks->keys));
		if (!ks->keys || key_load("--auth-key", a->key_file, &ks->keys[0], err, errlen)) {
			if (!ks->keys)
				cfg_fail(err, errlen, "--auth-key: out of memory");
			keyset_free(ks);
			return NULL;
		}
		ks->nkeys = 1;
	} else if (a->key_dir) {
		DIR *d = opendir(a->key_dir);
		struct dirent *de;
		uint32_t cap = 0;

		ks->dir = 1;
		if (!d) {
			cfg_fail(err, errlen, "--auth-key-dir: %s: %s", a->key_dir,
			         strerror(errno));
			keyset_free(ks);
			return NULL;
		}
		while ((de = readdir(d)) != NULL) {
			size_t nl = strlen(de->d_name);
			char path[4096];
			struct key *k;

			/* auth.rs, KeyResolver: the kid names the file {kid}.jwk */
			if (nl < 5 || strcmp(de->d_name + nl - 4, ".jwk") != 0 ||
			    !is_kid(de->d_name, nl - 4))
				continue;
			if (ks->nkeys == MOQ_AUTH_MAX_KEYS) {
				cfg_fail(err, errlen, "--auth-key-dir: %s: more than %u keys",
				         a->key_dir, MOQ_AUTH_MAX_KEYS);
				goto dir_fail;
			}
			if (ks->nkeys == cap) {
				struct key *nk;
				cap = cap ? cap * 2 : 16;
				nk = realloc(ks->keys, cap * sizeof(*nk));
				if (!nk) {
					cfg_fail(err, errlen, "--auth-key-dir: out of memory");
					goto dir_fail;
				}
				ks->keys = nk;
			}
			snprintf(path, sizeof(path), "%s/%s", a->key_dir, de->d_name);
			k = &ks->keys[ks->nkeys];
			if (key_load("--auth-key-dir", path, k, err, errlen))
				goto dir_fail;
			memcpy(k->kid, de->d_name, nl - 4);
			k->kid[nl - 4] = 0;
			ks->nkeys++;
		}
		closedir(d);
		if (ks->nkeys > 1)
			qsort(ks->keys, ks->nkeys, sizeof(*ks->keys), cmp_kid);
		return ks;
	dir_fail:
		closedir(d);
		keyset_free(ks);
		return NULL;
	}
	return ks;
}

/* ------------------------------------------------------------ the holder */

static uint64_t realtime_ns(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t moq_auth_now_ns(const struct moq_auth *a)
{
	return a->clock(a->clock_ctx);
}

/*
 * Public grants from @list (comma-separated; NULL: none) into the publish
 * (@dirs bit 0) and subscribe (bit 1) lists: older prefixes (@old: "" is
 * every path) or patterns that must hold a wildcard (auth.md, Anonymous
 * access: "a pattern with no wildcard, such as anon, refuses to start").
 */
static int public_list(struct moq_auth *a, const char *list, int old, int dirs, const char *opt,
                       char *err, size_t errlen)
{
	const char *p = list;

	if (!list)
		return 0;
	for (;;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		const char *why = NULL;
		if (!old) {
			struct moq_pattern pt;
			int rc = moq_pattern_parse(&pt, p, l);
			if (rc)
				return cfg_fail(err, errlen, "%s: %.*s: not a pattern (%s)", opt,
				                (int)l, p, moq_pattern_error_str(rc));
			if (!moq_pattern_has_wildcard(&pt))
				return cfg_fail(err, errlen,
				                "%s: '%.*s' has no wildcard and would name one "
				                "broadcast (write '%.*s%s**' for the subtree)",
				                opt, (int)l, p, (int)l, p, l ? "/" : "");
		}
		if (dirs & 1)
			why = pat_add(p, l, old, &a->pub_put, &a->npub_put);
		if (!why && (dirs & 2))
			why = pat_add(p, l, old, &a->pub_get, &a->npub_get);
		if (why)
			return cfg_fail(err, errlen, "%s: %.*s %s", opt, (int)l, p, why);
		if (!c)
			return 0;
		p = c + 1;
	}
}

struct moq_auth *moq_auth_create(const struct moq_auth_cfg *cfg, char *err, size_t errlen)
{
	struct moq_auth *a;
	struct keyset *ks;

	if (cfg && cfg->url &&
	    (cfg->key || cfg->key_dir || cfg->public_prefixes || cfg->public_both ||
	     cfg->public_publish || cfg->public_subscribe)) {
		/* auth.md: "Setting both ... fails at startup"; the anonymous
		 * rules live on the server then */
		cfg_fail(err, errlen,
		         "--auth-url: cannot be combined with %s (the auth server "
		         "decides; its anonymous rules live there)",
		         cfg->key                ? "--auth-key"
		         : cfg->key_dir          ? "--auth-key-dir"
		         : cfg->public_publish   ? "--auth-public-publish"
		         : cfg->public_subscribe ? "--auth-public-subscribe"
		                                 : "--auth-public");
		return NULL;
	}
	if (!cfg || (!cfg->key && !cfg->key_dir && !cfg->public_prefixes && !cfg->public_both &&
	             !cfg->public_publish && !cfg->public_subscribe && !cfg->url)) {
		cfg_fail(err, errlen, "--auth-key: no key, key directory or public prefix");
		return NULL;
	}
	if (cfg->key && cfg->key_dir) {
		cfg_fail(err, errlen, "--auth-key-dir: cannot be combined with --auth-key");
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		cfg_fail(err, errlen, "auth: out of memory");
		return NULL;
	}
	json_object_seed(0); /* jansson: seed its hash before workers parse */
	a->clock = cfg->clock ? cfg->clock : realtime_ns;
	a->clock_ctx = cfg->clock_ctx;
	if ((cfg->key && !(a->key_file = strdup(cfg->key))) ||
	    (cfg->key_dir && !(a->key_dir = strdup(cfg->key_dir))))
		goto nomem;
	if (public_list(a, cfg->public_prefixes, 1, 3, "--auth-public", err, errlen) ||
	    public_list(a, cfg->public_both, 0, 3, "--auth-public", err, errlen) ||
	    public_list(a, cfg->public_publish, 0, 1, "--auth-public-publish", err, errlen) ||
	    public_list(a, cfg->public_subscribe, 0, 2, "--auth-public-subscribe", err, errlen)) {
		moq_auth_destroy(a);
		return NULL;
	}
	if (cfg->url) {
		struct moq_auth_url_cfg uc = {.url = cfg->url,
		                              .ca = cfg->url_tls_root,
		                              .node = cfg->url_node,
		                              .timeout_ns = cfg->url_timeout_ns,
		                              .clock = a->clock,
		                              .clock_ctx = a->clock_ctx};
		a->url = moq_auth_url_create(&uc, err, errlen);
		if (!a->url) {
			moq_auth_destroy(a);
			return NULL;
		}
	}
	ks = keyset_load(a, err, errlen);
	if (!ks) {
		moq_auth_destroy(a);
		return NULL;
	}
	atomic_store(&a->cur, ks);
	return a;
nomem:
	cfg_fail(err, errlen, "auth: out of memory");
	moq_auth_destroy(a);
	return NULL;
}

int moq_auth_reload(struct moq_auth *a, char *err, size_t errlen)
{
	struct keyset *ks = keyset_load(a, err, errlen), *old;

	if (!ks) {
		atomic_fetch_add(&a->reload_failed, 1);
		return MOQ_ERR_CONFIG;
	}
	old = atomic_exchange(&a->cur, ks);
	/* A verification that loaded @old incremented users before loading
	 * it (both sequentially consistent): once users reads 0 after the
	 * exchange, none can still hold @old. Verifications are short and
	 * happen at session set-up only. */
	while (atomic_load(&a->users))
		sched_yield();
	keyset_free(old);
	atomic_fetch_add(&a->reloads, 1);
	return 0;
}

void moq_auth_destroy(struct moq_auth *a)
{
	if (!a)
		return;
	moq_auth_url_destroy(a->url);
	keyset_free(atomic_load(&a->cur));
	strv_free(a->pub_put, a->npub_put);
	strv_free(a->pub_get, a->npub_get);
	free(a->key_file);
	free(a->key_dir);
	free(a);
}

void moq_auth_get_stats(const struct moq_auth *a, struct moq_auth_stats *out)
{
	struct moq_auth *m = (struct moq_auth *)a;
	struct keyset *ks;

	memset(out, 0, sizeof(*out));
	out->accepted = atomic_load(&m->accepted);
	out->refused = atomic_load(&m->refused);
	out->reloads = atomic_load(&m->reloads);
	out->reload_failed = atomic_load(&m->reload_failed);
	atomic_fetch_add(&m->users, 1);
	ks = atomic_load(&m->cur);
	out->keys = ks ? ks->nkeys : 0;
	atomic_fetch_sub(&m->users, 1);
}

const char *moq_auth_result_str(int r)
{
	switch (r) {
	case MOQ_AUTH_OK:
		return "ok";
	case MOQ_AUTH_NO_TOKEN:
		return "no_token";
	case MOQ_AUTH_MALFORMED:
		return "malformed";
	case MOQ_AUTH_NO_KEY:
		return "no_key";
	case MOQ_AUTH_NO_KID:
		return "no_kid";
	case MOQ_AUTH_UNKNOWN_KID:
		return "unknown_kid";
	case MOQ_AUTH_WRONG_ALG:
		return "wrong_alg";
	case MOQ_AUTH_BAD_SIGNATURE:
		return "bad_signature";
	case MOQ_AUTH_EXPIRED:
		return "expired";
	case MOQ_AUTH_USELESS:
		return "useless";
	case MOQ_AUTH_SCOPE:
		return "scope";
	case MOQ_AUTH_ROOT:
		return "root";
	case MOQ_AUTH_KEY_OPS:
		return "key_ops";
	case MOQ_AUTH_NOT_YET:
		return "not yet valid";
	case MOQ_AUTH_REFUSED:
		return "refused by the auth server";
	case MOQ_AUTH_UNAVAILABLE:
		return "auth server unavailable";
	case MOQ_AUTH_NOMEM:
		return "nomem";
	default:
		return "unknown";
	}
}

/* ------------------------------------------------------------- signatures */

static int hash_len(enum wc_HashType h)
{
	return wc_HashGetDigestSize(h);
}

/* Constant time: a MAC compare must not leak where it differs. */
static bool ct_equal(const uint8_t *x, const uint8_t *y, size_t n)
{
	uint8_t d = 0;

	for (size_t i = 0; i < n; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}

/* RFC 7515, 5.2: the signature over the ASCII of header.payload. */
static bool sig_ok(const struct key *k, const uint8_t *msg, size_t mlen, const uint8_t *sig,
                   size_t slen)
{
	enum wc_HashType h = alg_hash(k->alg);
	uint8_t dg[WC_MAX_DIGEST_SIZE];
	int hl = h != WC_HASH_TYPE_NONE ? hash_len(h) : 0;
	bool ok = false;

	if (k->kty != KTY_OKP && (hl <= 0 || wc_Hash(h, msg, (word32)mlen, dg, (word32)hl) != 0))
		return false;
	switch (k->kty) {
	case KTY_OCT: {
		/* RFC 7518, 3.2: HMAC with SHA-2 */
		Hmac mac;
		uint8_t out[WC_MAX_DIGEST_SIZE];
		int type = h == WC_HASH_TYPE_SHA256   ? WC_SHA256
		           : h == WC_HASH_TYPE_SHA384 ? WC_SHA384
		                                      : WC_SHA512;
		if (slen != (size_t)hl || wc_HmacInit(&mac, NULL, INVALID_DEVID) != 0)
			return false;
		if (wc_HmacSetKey(&mac, type, k->a, (word32)k->alen) == 0 &&
		    wc_HmacUpdate(&mac, msg, (word32)mlen) == 0 && wc_HmacFinal(&mac, out) == 0)
			ok = ct_equal(out, sig, slen);
		wc_HmacFree(&mac);
		return ok;
	}
	case KTY_EC: {
		/* RFC 7518, 3.4: r || s, each the curve's size, big-endian;
		 * wolfCrypt verifies the DER SEQUENCE of the two */
		size_t half = k->alen;
		uint8_t der[2 * 48 + 16];
		word32 dlen = sizeof(der);
		ecc_key e;
		int res = 0;
		if (slen != 2 * half || wc_ecc_init(&e) != 0)
			return false;
		if (wc_ecc_import_unsigned(&e, k->a, k->b, NULL,
		                           half == 32 ? ECC_SECP256R1 : ECC_SECP384R1) == 0 &&
		    wc_ecc_rs_raw_to_sig(sig, (word32)half, sig + half, (word32)half, der, &dlen) ==
		            0 &&
		    wc_ecc_verify_hash(der, dlen, dg, (word32)hl, &res, &e) == 0)
			ok = res == 1;
		wc_ecc_free(&e);
		return ok;
	}
	case KTY_RSA: {
		RsaKey r;
		uint8_t *buf, *out = NULL;
		int n;
		if (wc_InitRsaKey(&r, NULL) != 0)
			return false;
		if (wc_RsaPublicKeyDecodeRaw(k->a, (word32)k->alen, k->b, (word32)k->blen, &r) !=
		            0 ||
		    slen != (size_t)wc_RsaEncryptSize(&r) || !(buf = malloc(slen))) {
			wc_FreeRsaKey(&r);
			return false;
		}
		memcpy(buf, sig, slen);
		if (k->alg <= ALG_RS512) {
			/* RFC 7518, 3.3: RSASSA-PKCS1-v1_5: the DigestInfo */
			uint8_t want[WC_MAX_DIGEST_SIZE + 32];
			word32 wl = wc_EncodeSignature(want, dg, (word32)hl, wc_GetCTC_HashOID(h));
			n = wc_RsaSSL_VerifyInline(buf, (word32)slen, &out, &r);
			ok = n > 0 && (word32)n == wl && ct_equal(out, want, wl);
		} else {
			/* RFC 7518, 3.5: RSASSA-PSS, MGF1 with the same hash,
			 * salt as long as the hash */
			int mgf = h == WC_HASH_TYPE_SHA256   ? WC_MGF1SHA256
			          : h == WC_HASH_TYPE_SHA384 ? WC_MGF1SHA384
			                                     : WC_MGF1SHA512;
			n = wc_RsaPSS_VerifyCheckInline(buf, (word32)slen, &out, dg, (word32)hl, h,
			                                mgf, &r);
			ok = n >= 0;
		}
		free(buf);
		wc_FreeRsaKey(&r);
		return ok;
	}
	case KTY_OKP:
#ifdef HAVE_ED25519
	{
		/* RFC 8037, 3.1: Ed25519 over the message itself */
		ed25519_key e;
		int res = 0;
		if (slen != 64 || wc_ed25519_init(&e) != 0)
			return false;
		if (wc_ed25519_import_public(k->a, (word32)k->alen, &e) == 0 &&
		    wc_ed25519_verify_msg(sig, 64, msg, (word32)mlen, &res, &e) == 0)
			ok = res == 1;
		wc_ed25519_free(&e);
		return ok;
	}
#else
		return false; /* not loadable (key_check) */
#endif
	}
	return false;
}

/* ----------------------------------------------------------------- claims */

struct claims {
	char *root;
	size_t rootlen;
	uint32_t nput, nget;
	char **put, **get; /* pattern texts relative to root (pat_add) */
	uint8_t has_exp, has_nbf, has_iat;
	int64_t exp, nbf, iat;
};

static void claims_clear(struct claims *c)
{
	free(c->root);
	strv_free(c->put, c->nput);
	strv_free(c->get, c->nget);
	memset(c, 0, sizeof(*c));
}

/* claims.rs: put / get (the older dialect) and publish / subscribe are one
 * string or an array of strings (OneOrMany); both dialects may appear, and
 * a token grants their union. */
static int one_or_many(json_t *v, int old, char ***out, uint32_t *n)
{
	const char *why = str_array(v, old, out, n);

	if (!why)
		return 0;
	return strcmp(why, "out of memory") == 0 ? MOQ_AUTH_NOMEM : MOQ_AUTH_MALFORMED;
}

/* serde_with TimestampSeconds<i64> in an Option: an integer or null. */
static int timestamp(json_t *v, uint8_t *has, int64_t *t)
{
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v))
		return MOQ_AUTH_MALFORMED;
	*has = 1;
	*t = (int64_t)json_integer_value(v);
	return 0;
}

/* auth.md, Claims: what a token may carry. iss, sub and jti are read and
 * ignored; any other claim refuses the token (an unknown claim may narrow
 * the grant, and a misspelled root would widen it). */
static bool claim_known(const char *k)
{
	static const char *const known[] = {"root", "put", "get", "publish", "subscribe", "exp",
	                                    "iat",  "nbf", "iss", "sub",     "jti"};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(k, known[i]) == 0)
			return true;
	return false;
}

static int claims_parse(const uint8_t *text, size_t len, struct claims *c)
{
	json_t *o = json_loadb((const char *)text, len, JSON_REJECT_DUPLICATES, NULL), *v;
	const char *key;
	int rc = MOQ_AUTH_MALFORMED;

	memset(c, 0, sizeof(*c));
	if (!o || !json_is_object(o))
		goto out;
	json_object_foreach(o, key, v)
	{
		if (!claim_known(key))
			goto out;
		/* a string claim holding a NUL would mean one thing here and
		 * another to a C string reader */
		if (json_is_string(v) && memchr(json_string_value(v), 0, json_string_length(v)))
			goto out;
	}
	v = json_object_get(o, "root");
	if (v && !json_is_string(v))
		goto out;
	c->root =
	        norm_dup(v ? json_string_value(v) : "", v ? json_string_length(v) : 0, &c->rootlen);
	if (!c->root) {
		rc = MOQ_AUTH_NOMEM;
		goto out;
	}
	rc = one_or_many(json_object_get(o, "put"), 1, &c->put, &c->nput);
	if (!rc)
		rc = one_or_many(json_object_get(o, "get"), 1, &c->get, &c->nget);
	if (!rc)
		rc = one_or_many(json_object_get(o, "publish"), 0, &c->put, &c->nput);
	if (!rc)
		rc = one_or_many(json_object_get(o, "subscribe"), 0, &c->get, &c->nget);
	if (!rc)
		rc = timestamp(json_object_get(o, "exp"), &c->has_exp, &c->exp);
	if (!rc)
		rc = timestamp(json_object_get(o, "iat"), &c->has_iat, &c->iat);
	if (!rc)
		rc = timestamp(json_object_get(o, "nbf"), &c->has_nbf, &c->nbf);
out:
	json_decref(o);
	if (rc)
		claims_clear(c);
	return rc;
}

/* key.rs, validate_scope: every requested pattern (under the claims' root)
 * lies inside a pattern of the scope (under the scope's root). */
static bool covers(const char *sroot, char **granted, uint32_t ng, const char *croot, char **req,
                   uint32_t nr)
{
	for (uint32_t i = 0; i < nr; i++) {
		size_t rl, gl;
		char *r = join_dup(croot, strlen(croot), req[i], strlen(req[i]), &rl);
		struct moq_pattern rp, gp;
		bool ok = false;
		if (!r)
			return false;
		if (moq_pattern_parse(&rp, r, rl) == 0)
			for (uint32_t j = 0; j < ng && !ok; j++) {
				char *g = join_dup(sroot, strlen(sroot), granted[j],
				                   strlen(granted[j]), &gl);
				ok = g && moq_pattern_parse(&gp, g, gl) == 0 &&
				     moq_pattern_contains(&gp, &rp);
				free(g);
			}
		free(r);
		if (!ok)
			return false;
	}
	return true;
}

/* One entry of a grant from absolute pattern text @t (@tl bytes, taken). */
static int path_set(struct moq_auth_path *p, char *t, size_t tl)
{
	struct moq_pattern *pp = malloc(sizeof(*pp));
	size_t h;

	if (!pp) {
		free(t);
		return MOQ_AUTH_NOMEM;
	}
	if (moq_pattern_parse(pp, t, tl) != 0) {
		/* a root and pattern together past MOQ_PATTERN_MAX_SEGMENTS */
		free(pp);
		free(t);
		return MOQ_AUTH_MALFORMED;
	}
	h = moq_pattern_head(pp);
	p->p = malloc(h + 1);
	p->len = h;
	if (p->p) {
		memcpy(p->p, t, h);
		p->p[h] = 0;
	}
	if (!p->p) {
		free(pp);
		free(t);
		return MOQ_AUTH_NOMEM;
	}
	if (moq_pattern_is_subtree(pp)) {
		// "<p>/**": everything under p, matched as a prefix
		free(pp);
		free(t);
		return 0;
	}
	p->pat = t;
	p->pat_len = tl;
	pp->text = t;
	p->pattern = pp;
	return 0;
}

struct rebase_ctx {
	const char *text, *path;
	size_t plen;
	struct moq_auth_path *out;
	uint32_t *nout, cap;
	int rc;
};

static void rebase_one(void *ctx, size_t off)
{
	struct rebase_ctx *r = ctx;
	size_t tl;
	char *t;

	if (r->rc || *r->nout >= r->cap) {
		r->rc = r->rc ? r->rc : MOQ_AUTH_MALFORMED;
		return;
	}
	t = join_dup(r->path, r->plen, r->text + off, strlen(r->text + off), &tl);
	if (!t) {
		r->rc = MOQ_AUTH_NOMEM;
		return;
	}
	r->rc = path_set(&r->out[*r->nout], t, tl);
	if (!r->rc)
		(*r->nout)++;
}

/*
 * claims.rs, authorize, with moq-pattern's rebase (auth.md, Path
 * matching): narrow the patterns to connection path @path. If the path
 * extends the root by @suffix, each pattern becomes what it names beyond
 * the path (none: dropped); if the root extends the path, the patterns stay
 * at the root (the difference @prefix is prepended). The result is absolute
 * (joined to @path) in @out.
 */
static int narrow(char **grants, uint32_t n, const char *suffix, size_t sl, const char *prefix,
                  size_t pl, const char *path, size_t plen, struct moq_auth_path **out,
                  uint32_t *nout)
{
	/* a pattern with a globstar rebases to at most two */
	uint32_t cap = 2 * n + 1;

	*out = calloc(cap, sizeof(**out));
	*nout = 0;
	if (!*out)
		return MOQ_AUTH_NOMEM;
	for (uint32_t i = 0; i < n; i++) {
		size_t gl;
		char *g = join_dup(prefix, pl, grants[i], strlen(grants[i]), &gl);
		struct moq_pattern pt;
		struct rebase_ctx r = {g, path, plen, *out, nout, cap, 0};
		if (!g)
			return MOQ_AUTH_NOMEM;
		if (moq_pattern_parse(&pt, g, gl) != 0) {
			free(g);
			return MOQ_AUTH_MALFORMED;
		}
		moq_pattern_rebase(&pt, suffix, sl, rebase_one, &r);
		free(g);
		if (r.rc)
			return r.rc;
	}
	return 0;
}

void moq_auth_grant_free(struct moq_auth_grant *g)
{
	if (!g)
		return;
	for (uint32_t i = 0; g->put && i < g->nput; i++) {
		free(g->put[i].p);
		free(g->put[i].pat);
		free(g->put[i].pattern);
	}
	for (uint32_t i = 0; g->get && i < g->nget; i++) {
		free(g->get[i].p);
		free(g->get[i].pat);
		free(g->get[i].pattern);
	}
	free(g->put);
	free(g->get);
	free(g->root);
	free(g);
}

static int authorize(const struct claims *c, const char *path, size_t plen,
                     struct moq_auth_grant **out)
{
	struct moq_auth_grant *g;
	const char *suffix = "", *prefix = "";
	size_t sl = 0, pl = 0;
	long off;
	int rc;

	off = strip_prefix(path, plen, c->root, c->rootlen);
	if (off >= 0) {
		suffix = path + off;
		sl = plen - (size_t)off;
	} else if ((off = strip_prefix(c->root, c->rootlen, path, plen)) >= 0) {
		prefix = c->root + off;
		pl = c->rootlen - (size_t)off;
	} else {
		return MOQ_AUTH_ROOT;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return MOQ_AUTH_NOMEM;
	g->root = join_dup(path, plen, "", 0, &g->rootlen);
	rc = g->root ? 0 : MOQ_AUTH_NOMEM;
	if (!rc)
		rc = narrow(c->put, c->nput, suffix, sl, prefix, pl, path, plen, &g->put, &g->nput);
	if (!rc)
		rc = narrow(c->get, c->nget, suffix, sl, prefix, pl, path, plen, &g->get, &g->nget);
	if (!rc && !g->nput && !g->nget)
		rc = MOQ_AUTH_ROOT; /* claims.rs: NoAccess */
	if (rc) {
		moq_auth_grant_free(g);
		return rc;
	}
	g->has_exp = c->has_exp;
	g->exp = c->exp;
	*out = g;
	return 0;
}

static const struct key *key_find(const struct keyset *ks, const char *kid)
{
	size_t lo = 0, hi = ks->nkeys;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(kid, ks->keys[mid].kid);
		if (c == 0)
			return &ks->keys[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* The token's claims, verified against @ks (auth.rs, verify; key.rs). */
static int token_claims(const struct moq_auth *a, const struct keyset *ks, const char *jwt,
                        size_t jlen, struct claims *c)
{
	const char *d1, *d2;
	uint8_t hdr[MOQ_AUTH_MAX_TOKEN], body[MOQ_AUTH_MAX_TOKEN], sig[MOQ_AUTH_MAX_TOKEN];
	long hl, bl, sl;
	json_t *h;
	const char *alg, *kid;
	const struct key *k;
	int rc;

	if (!ks->nkeys && !ks->dir)
		return MOQ_AUTH_NO_KEY; /* auth.rs: UnexpectedToken */
	if (jlen > MOQ_AUTH_MAX_TOKEN)
		return MOQ_AUTH_MALFORMED;
	/* RFC 7515, 7.1: BASE64URL(header) . BASE64URL(payload) . BASE64URL(sig) */
	d1 = memchr(jwt, '.', jlen);
	d2 = d1 ? memchr(d1 + 1, '.', jlen - (size_t)(d1 + 1 - jwt)) : NULL;
	if (!d2 || memchr(d2 + 1, '.', jlen - (size_t)(d2 + 1 - jwt)))
		return MOQ_AUTH_MALFORMED;
	hl = b64url_decode(jwt, (size_t)(d1 - jwt), hdr, sizeof(hdr), 0);
	bl = b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), body, sizeof(body), 0);
	sl = b64url_decode(d2 + 1, jlen - (size_t)(d2 + 1 - jwt), sig, sizeof(sig), 0);
	if (hl < 0 || bl < 0 || sl < 0)
		return MOQ_AUTH_MALFORMED;
	h = json_loadb((const char *)hdr, (size_t)hl, JSON_REJECT_DUPLICATES, NULL);
	if (!h || !json_is_object(h) || !json_is_string(json_object_get(h, "alg")) ||
	    (json_object_get(h, "kid") && !json_is_string(json_object_get(h, "kid")))) {
		json_decref(h);
		return MOQ_AUTH_MALFORMED;
	}
	alg = json_string_value(json_object_get(h, "alg"));
	kid = json_string_value(json_object_get(h, "kid"));
	if (ks->dir) {
		/* auth.rs, KeyResolver::Dir: the kid names the key */
		if (!kid || !is_kid(kid, strlen(kid))) {
			json_decref(h);
			return MOQ_AUTH_NO_KID;
		}
		k = key_find(ks, kid);
	} else {
		k = &ks->keys[0];
	}
	rc = !k           ? MOQ_AUTH_UNKNOWN_KID
	     : !k->verify ? MOQ_AUTH_KEY_OPS
	     /* jsonwebtoken Validation::new(key.alg): the header must name it */
	     : alg_of(alg) != k->alg ? MOQ_AUTH_WRONG_ALG
	                             : 0;
	json_decref(h);
	if (rc)
		return rc;
	if (!sig_ok(k, (const uint8_t *)jwt, (size_t)(d2 - jwt), sig, (size_t)sl))
		return MOQ_AUTH_BAD_SIGNATURE;
	rc = claims_parse(body, (size_t)bl, c);
	if (rc)
		return rc;
	/* auth.md, Claims: refused from its exp on, and before its nbf; an
	 * iat in the future is refused too. No leeway. */
	if (c->has_exp && (c->exp < 0 || ((uint64_t)c->exp <= UINT64_MAX / 1000000000ull &&
	                                  (uint64_t)c->exp * 1000000000ull <= moq_auth_now_ns(a))))
		rc = MOQ_AUTH_EXPIRED;
	else if ((c->has_nbf && c->nbf > 0 &&
	          (uint64_t)c->nbf > moq_auth_now_ns(a) / 1000000000ull) ||
	         (c->has_iat && c->iat > 0 &&
	          (uint64_t)c->iat > moq_auth_now_ns(a) / 1000000000ull))
		rc = MOQ_AUTH_NOT_YET;
	/* claims.rs, validate */
	else if (!c->nput && !c->nget)
		rc = MOQ_AUTH_USELESS;
	/* key.rs, validate_scope */
	else if (k->has_scope &&
	         (!covers(k->scope_root, k->scope_put, k->scope_nput, c->root, c->put, c->nput) ||
	          !covers(k->scope_root, k->scope_get, k->scope_nget, c->root, c->get, c->nget)))
		rc = MOQ_AUTH_SCOPE;
	if (rc)
		claims_clear(c);
	return rc;
}

int moq_auth_verify(struct moq_auth *a, const char *path, size_t plen, const char *jwt, size_t jlen,
                    struct moq_auth_grant **out)
{
	struct claims c;
	size_t nl;
	char *np = norm_dup(path ? path : "", path ? plen : 0, &nl);
	int rc, pub = 0;

	*out = NULL;
	if (!np)
		return MOQ_AUTH_NOMEM;
	if (memchr(np, 0, nl)) {
		/* a connection path holding a NUL: grants are C strings */
		free(np);
		atomic_fetch_add(&a->refused, 1);
		return MOQ_AUTH_MALFORMED;
	}
	memset(&c, 0, sizeof(c));
	if (jwt && jlen) {
		struct keyset *ks;
		atomic_fetch_add(&a->users, 1);
		ks = atomic_load(&a->cur);
		rc = token_claims(a, ks, jwt, jlen, &c);
		atomic_fetch_sub(&a->users, 1);
	} else {
		/* auth.md, Anonymous access: without a token, the public
		 * patterns, as a token rooted at "" */
		rc = a->npub_put || a->npub_get ? 0 : MOQ_AUTH_NO_TOKEN;
		if (!rc) {
			c.root = norm_dup("", 0, &c.rootlen);
			rc = c.root ? 0 : MOQ_AUTH_NOMEM;
			for (uint32_t i = 0; !rc && i < a->npub_put; i++)
				if (pat_add(a->pub_put[i], strlen(a->pub_put[i]), 0, &c.put,
				            &c.nput))
					rc = MOQ_AUTH_NOMEM;
			for (uint32_t i = 0; !rc && i < a->npub_get; i++)
				if (pat_add(a->pub_get[i], strlen(a->pub_get[i]), 0, &c.get,
				            &c.nget))
					rc = MOQ_AUTH_NOMEM;
		}
		pub = 1;
	}
	if (!rc)
		rc = authorize(&c, np, nl, out);
	if (pub && rc == MOQ_AUTH_ROOT)
		rc = MOQ_AUTH_NO_TOKEN; /* no public pattern reaches the path */
	claims_clear(&c);
	free(np);
	atomic_fetch_add(rc ? &a->refused : &a->accepted, 1);
	return rc;
}

/* application/x-www-form-urlencoded (common/pct.c, the decoder web/ reads
 * queries with): '+' is a space, %XX a byte, a bad escape kept as it is (as
 * the url crate does). Returns the length. */
static size_t form_decode(const char *in, size_t len, char *out)
{
	memcpy(out, in, len);
	return (size_t)moq_pct_decode(out, len, 1);
}

int moq_auth_split_query(const char *in, size_t len, size_t *pathlen, char *jwt, size_t cap,
                         size_t *jwtlen)
{
	const char *q = memchr(in, '?', len), *end = in + len;

	*pathlen = q ? (size_t)(q - in) : len;
	*jwtlen = 0;
	if (cap)
		jwt[0] = 0;
	if (!q)
		return 0;
	/* auth.rs, from_path_query: the last non-empty jwt wins */
	for (const char *p = q + 1; p < end;) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *pe = amp ? amp : end;
		const char *eq = memchr(p, '=', (size_t)(pe - p));
		char kbuf[24];

		if (eq && (size_t)(eq - p) < sizeof(kbuf) &&
		    form_decode(p, (size_t)(eq - p), kbuf) == 3 && memcmp(kbuf, "jwt", 3) == 0 &&
		    pe > eq + 1) {
			if ((size_t)(pe - eq - 1) >= cap)
				return MOQ_AUTH_MALFORMED;
			*jwtlen = form_decode(eq + 1, (size_t)(pe - eq - 1), jwt);
			jwt[*jwtlen] = 0;
		}
		p = amp ? amp + 1 : end;
	}
	return 0;
}

int moq_auth_connect(struct moq_auth *a, const char *setup_path, size_t len,
                     struct moq_auth_grant **out)
{
	char jwt[MOQ_AUTH_MAX_TOKEN + 1];
	size_t pl, jl;
	int rc;

	*out = NULL;
	rc = moq_auth_split_query(setup_path ? setup_path : "", setup_path ? len : 0, &pl, jwt,
	                          sizeof(jwt), &jl);
	if (rc) {
		atomic_fetch_add(&a->refused, 1);
		return rc;
	}
	return moq_auth_verify(a, setup_path, pl, jl ? jwt : NULL, jl, out);
}

int moq_auth_peek(const char *setup_path, size_t len, struct moq_auth_grant **out)
{
	char jwt[MOQ_AUTH_MAX_TOKEN + 1];
	uint8_t body[MOQ_AUTH_MAX_TOKEN];
	size_t pl, jl, nl;
	const char *d1, *d2;
	struct claims c;
	char *np;
	long bl;
	int rc;

	*out = NULL;
	rc = moq_auth_split_query(setup_path, len, &pl, jwt, sizeof(jwt), &jl);
	if (rc)
		return rc;
	if (!jl)
		return MOQ_AUTH_NO_TOKEN;
	/* RFC 7515, 7.1: the payload is the second part */
	d1 = memchr(jwt, '.', jl);
	d2 = d1 ? memchr(d1 + 1, '.', jl - (size_t)(d1 + 1 - jwt)) : NULL;
	if (!d2)
		return MOQ_AUTH_MALFORMED;
	bl = b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), body, sizeof(body), 0);
	if (bl < 0)
		return MOQ_AUTH_MALFORMED;
	memset(&c, 0, sizeof(c));
	rc = claims_parse(body, (size_t)bl, &c);
	if (!rc && !c.nput && !c.nget)
		rc = MOQ_AUTH_USELESS;
	np = rc ? NULL : norm_dup(setup_path, pl, &nl);
	if (!rc && !np)
		rc = MOQ_AUTH_NOMEM;
	if (!rc && memchr(np, 0, nl))
		rc = MOQ_AUTH_MALFORMED;
	if (!rc)
		rc = authorize(&c, np, nl, out);
	claims_clear(&c);
	free(np);
	return rc;
}

static bool entry_allows(const struct moq_auth_path *e, const char *path, size_t len)
{
	return e->pattern ? moq_pattern_match(e->pattern, path, len)
	                  : has_prefix(path, len, e->p, e->len);
}

bool moq_auth_grant_allows(const struct moq_auth_grant *g, int put, const char *path, size_t len)
{
	const struct moq_auth_path *v = put ? g->put : g->get;
	uint32_t n = put ? g->nput : g->nget;

	for (uint32_t i = 0; i < n; i++)
		if (entry_allows(&v[i], path, len))
			return true;
	return false;
}

bool moq_auth_grant_overlaps(const struct moq_auth_grant *g, int put, const char *prefix,
                             size_t len)
{
	const struct moq_auth_path *v = put ? g->put : g->get;
	uint32_t n = put ? g->nput : g->nget;

	for (uint32_t i = 0; i < n; i++)
		if (v[i].pattern ? moq_pattern_overlaps_subtree(v[i].pattern, prefix, len)
		                 : (has_prefix(prefix, len, v[i].p, v[i].len) ||
		                    has_prefix(v[i].p, v[i].len, prefix, len)))
			return true;
	return false;
}

int moq_auth_grant_build(const char *root, size_t rlen, const char *const *publish, uint32_t np,
                         const char *const *subscribe, uint32_t ns, int has_exp, int64_t exp,
                         struct moq_auth_grant **out)
{
	struct claims c;
	const char *why = NULL;
	int rc;

	*out = NULL;
	memset(&c, 0, sizeof(c));
	c.root = norm_dup(root ? root : "", root ? rlen : 0, &c.rootlen);
	if (!c.root)
		return MOQ_AUTH_NOMEM;
	if (memchr(c.root, 0, c.rootlen)) {
		free(c.root);
		return MOQ_AUTH_MALFORMED;
	}
	for (uint32_t i = 0; i < np && !why; i++)
		why = pat_add(publish[i], strlen(publish[i]), 0, &c.put, &c.nput);
	for (uint32_t i = 0; i < ns && !why; i++)
		why = pat_add(subscribe[i], strlen(subscribe[i]), 0, &c.get, &c.nget);
	if (why)
		rc = strcmp(why, "out of memory") == 0 ? MOQ_AUTH_NOMEM : MOQ_AUTH_MALFORMED;
	else if (!c.nput && !c.nget)
		rc = MOQ_AUTH_USELESS;
	else
		rc = authorize(&c, c.root, c.rootlen, out);
	if (!rc && has_exp) {
		(*out)->has_exp = 1;
		(*out)->exp = exp;
	}
	claims_clear(&c);
	return rc;
}

struct moq_auth_url *moq_auth_url_client(const struct moq_auth *a)
{
	return a ? a->url : NULL;
}

struct moq_auth_grant *moq_auth_grant_dup(const struct moq_auth_grant *g)
{
	struct moq_auth_grant *d;

	if (!g)
		return NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->root = strndup(g->root ? g->root : "", g->rootlen);
	d->rootlen = g->rootlen;
	d->has_exp = g->has_exp;
	d->exp = g->exp;
	d->put = calloc(g->nput + 1, sizeof(*d->put));
	d->get = calloc(g->nget + 1, sizeof(*d->get));
	if (!d->root || !d->put || !d->get)
		goto bad;
	for (int dir = 0; dir < 2; dir++) {
		const struct moq_auth_path *s = dir ? g->get : g->put;
		struct moq_auth_path *o = dir ? d->get : d->put;
		uint32_t n = dir ? g->nget : g->nput;

		for (uint32_t i = 0; i < n; i++) {
			o[i].p = malloc(s[i].len + 1);
			if (!o[i].p)
				goto bad;
			memcpy(o[i].p, s[i].p, s[i].len + 1);
			o[i].len = s[i].len;
			if (dir)
				d->nget++;
			else
				d->nput++;
			if (!s[i].pat)
				continue;
			/* the parsed pattern borrows its text: parse the copy */
			o[i].pat = strndup(s[i].pat, s[i].pat_len);
			o[i].pat_len = s[i].pat_len;
			o[i].pattern = malloc(sizeof(*o[i].pattern));
			if (!o[i].pat || !o[i].pattern ||
			    moq_pattern_parse(o[i].pattern, o[i].pat, o[i].pat_len) != 0)
				goto bad;
		}
	}
	return d;
bad:
	moq_auth_grant_free(d);
	return NULL;
}

bool moq_auth_grant_covers_all(const struct moq_auth_grant *g, int put)
{
	const struct moq_auth_path *v = put ? g->put : g->get;
	uint32_t n = put ? g->nput : g->nget;

	for (uint32_t i = 0; i < n; i++)
		if (v[i].len == 0 && (!v[i].pattern || moq_pattern_is_subtree(v[i].pattern)))
			return true;
	return false;
}
