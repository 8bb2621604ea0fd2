/* SPDX-License-Identifier: MIT */
// auth.h: tokens as moq-relay mints them (github moq-dev/moq, rs/moq-token
// and rs/moq-relay/src/auth.rs; ../shared/AUTH-CLUSTER.md, docs/DEPLOY.md,
// Auth): a compact JWS whose claims are `root`, `put` and `get` (a string or
// an array of paths relative to `root`), `exp` and `iat`, checked with a JWK
// (one key file, or a directory of `{kid}.jwk`), plus public prefixes for
// sessions that carry no token.
//
// A struct moq_auth holds the current key set behind an atomic pointer: the
// main thread builds a new one from the files (moq_auth_reload, SIGHUP) and
// swaps it in; workers verify tokens against whichever set is current, at
// session set-up only (never per packet). JSON is parsed with jansson,
// signatures are checked with wolfCrypt (HMAC, ECDSA, RSA PKCS#1 v1.5 / PSS,
// and Ed25519 when the wolfSSL build has it).
//
// A verified token becomes a struct moq_auth_grant: the connection path
// (the session's root) and the paths it may publish (`put`, `publish`) and
// read (`get`, `subscribe`), absolute and normalised, matched on whole
// segments. Both dialects of moq-relay's tokens are read: 0.14's `put` /
// `get` path prefixes and the current `publish` / `subscribe` patterns
// (pattern.h: `*`, `**`, `pre*suf`); a prefix p means the pattern p/**.
// `nbf` and `iat` in the future, claim strings holding a NUL and claims
// other than root, put, get, publish, subscribe, exp, iat, nbf, iss, sub,
// jti refuse the token (doc/bin/relay/auth.md, Claims).
//
// The wall clock is read once per verification (exp); it is a callback so
// tests can move it.
#ifndef MOQ_AUTH_AUTH_H
#define MOQ_AUTH_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A token longer than this is refused (a SETUP message is at most 4 KiB). */
#define MOQ_AUTH_MAX_TOKEN 4096u
/* Paths per direction in one token or public list; more is refused as
 * malformed (moq-relay has no bound; a token needs a handful). */
#define MOQ_AUTH_MAX_GRANTS 64u
/* Key files read from a --auth-key-dir. */
#define MOQ_AUTH_MAX_KEYS 4096u
/* A key file larger than this is refused. */
#define MOQ_AUTH_MAX_KEY_FILE 65536u
/* moq-token: a kid is 1..128 of [A-Za-z0-9_-]. */
#define MOQ_AUTH_MAX_KID 128u

/* Why a token (or its absence) was refused. */
enum moq_auth_result {
	MOQ_AUTH_OK = 0,
	MOQ_AUTH_NO_TOKEN = -1,      /* no token, and no public prefix covers the path */
	MOQ_AUTH_MALFORMED = -2,     /* not a compact JWS, bad base64url, JSON or claim type */
	MOQ_AUTH_NO_KEY = -3,        /* a token, but no key is configured (public only) */
	MOQ_AUTH_NO_KID = -4,        /* key directory: the header has no valid kid */
	MOQ_AUTH_UNKNOWN_KID = -5,   /* key directory: no {kid}.jwk */
	MOQ_AUTH_WRONG_ALG = -6,     /* the header's alg is not the key's */
	MOQ_AUTH_BAD_SIGNATURE = -7, /* the signature does not verify */
	MOQ_AUTH_EXPIRED = -8,       /* exp is in the past (no leeway) */
	MOQ_AUTH_USELESS = -9,       /* the token grants neither put nor get */
	MOQ_AUTH_SCOPE = -10,        /* the token asks for more than its key's scope */
	MOQ_AUTH_ROOT = -11,         /* root unrelated to the path, or nothing left there */
	MOQ_AUTH_KEY_OPS = -12,      /* the key's key_ops do not include verify */
	MOQ_AUTH_NOMEM = -13,
	MOQ_AUTH_NOT_YET = -14,     /* nbf or iat in the future (auth.md, Claims) */
	MOQ_AUTH_REFUSED = -15,     /* --auth-url: the server refused (401/403, empty grant) */
	MOQ_AUTH_UNAVAILABLE = -16, /* --auth-url: down, late, or an answer that is no grant */
};

/* moq_auth_result_str: a short constant name for @r ("expired", ...). */
const char *moq_auth_result_str(int r);

struct moq_auth_cfg {
	const char *key;     /* --auth-key: a JWK file (JSON, or base64url of the JSON) */
	const char *key_dir; /* --auth-key-dir: a directory of {kid}.jwk */
	/* comma-separated path prefixes open without a token (the older
	 * put/get meaning: "anon" is anon and below); "" = every path; NULL =
	 * none */
	const char *public_prefixes;
	// --auth-public, --auth-public-publish, --auth-public-subscribe
	// (moq-relay's, auth.md, Anonymous access): comma-separated patterns
	// (pattern.h) rooted at "", for both directions or one; each needs a
	// wildcard ("anon" would name one broadcast: write anon/**). NULL =
	// none.
	const char *public_both, *public_publish, *public_subscribe;
	/* Unix time in ns (exp); NULL = CLOCK_REALTIME */
	uint64_t (*clock)(void *ctx);
	void *clock_ctx;
	/* --auth-url (authurl.h): sessions are admitted by an auth server;
	 * excludes key, key_dir and every public list (moq-relay: exactly one
	 * of --auth-url and --auth-public). url_tls_root: --auth-tls-root;
	 * url_node: the relay's name in requests; url_timeout_ns: 0 = 10 s. */
	const char *url, *url_tls_root, *url_node;
	uint64_t url_timeout_ns;
};

struct moq_pattern;

// One path of a grant (absolute, normalised, NUL-terminated): everything
// under @p (a put/get prefix, or a pattern "<p>/**"), or, when @pattern is
// set, what pattern @pat names (pattern.h; @p is then its literal head, the
// prefix an announce interest asks for).
struct moq_auth_path {
	char *p;
	size_t len;
	char *pat; /* NULL: the subtree at p */
	size_t pat_len;
	struct moq_pattern *pattern; /* parsed @pat */
};

/* What a session may do. */
struct moq_auth_grant {
	char *root; /* the connection path, normalised */
	size_t rootlen;
	uint32_t nput, nget;
	struct moq_auth_path *put, *get; /* absolute prefixes ("" = everything) */
	uint8_t has_exp;
	int64_t exp; /* Unix seconds */
};

struct moq_auth_stats {
	uint64_t accepted;      /* sessions authorised (token or public) */
	uint64_t refused;       /* sessions refused */
	uint64_t reloads;       /* key sets swapped in by moq_auth_reload */
	uint64_t reload_failed; /* reloads that kept the old set */
	uint64_t keys;          /* keys in the current set */
};

struct moq_auth;

/*
 * moq_auth_create: read the keys of @cfg (copied). At least one of key,
 * key_dir and public_prefixes must be set; key and key_dir exclude each
 * other. Returns NULL with one line in @err (@errlen bytes) naming the
 * option, e.g. "--auth-key: /etc/k.jwk: secret shorter than 32 bytes".
 */
struct moq_auth *moq_auth_create(const struct moq_auth_cfg *cfg, char *err, size_t errlen);

/*
 * moq_auth_reload: read the key files again and swap the new set in (one
 * thread at a time, e.g. the main lcore on SIGHUP). Returns once no worker
 * still uses the old set, which is then freed. On error the old set stays
 * and @err says why. Returns 0 or MOQ_ERR_CONFIG.
 */
int moq_auth_reload(struct moq_auth *a, char *err, size_t errlen);

/* moq_auth_url_client: the --auth-url client of @a, NULL without one. */
struct moq_auth_url *moq_auth_url_client(const struct moq_auth *a);

/* moq_auth_destroy: free @a (no verification may be running). NULL is a no-op. */
void moq_auth_destroy(struct moq_auth *a);

/* moq_auth_now_ns: the configured wall clock (Unix ns). */
uint64_t moq_auth_now_ns(const struct moq_auth *a);

/* moq_auth_get_stats: the counters (atomic reads; any thread). */
void moq_auth_get_stats(const struct moq_auth *a, struct moq_auth_stats *out);

/*
 * moq_auth_verify: authorise a session on connection path @path (@plen
 * bytes, normalised here) with token @jwt (@jlen bytes; NULL or empty = no
 * token). Any thread. On MOQ_AUTH_OK *@out is a new grant the caller frees
 * with moq_auth_grant_free; otherwise *@out is NULL and the result says why
 * (enum moq_auth_result).
 */
int moq_auth_verify(struct moq_auth *a, const char *path, size_t plen, const char *jwt, size_t jlen,
                    struct moq_auth_grant **out);

/*
 * moq_auth_connect: moq_auth_verify for a lite-05 SETUP Path such as
 * "room/1?jwt=eyJ...": the part before '?' is the connection path, the query
 * is form-url-decoded and its last non-empty `jwt` is the token.
 */
int moq_auth_connect(struct moq_auth *a, const char *setup_path, size_t len,
                     struct moq_auth_grant **out);

/*
 * moq_auth_peek: the grant a peer gives the token we present in
 * @setup_path (@len bytes, a SETUP Path such as "room?jwt=eyJ..."; a relay's
 * --cluster-token): the claims are read *without* checking the signature
 * (the token is ours, from our configuration; the peer verifies it) and
 * narrowed to the connection path as moq_auth_verify does; exp is not
 * checked. On MOQ_AUTH_OK *@out is a new grant (moq_auth_grant_free);
 * otherwise NULL: MOQ_AUTH_NO_TOKEN (no jwt), MOQ_AUTH_MALFORMED,
 * MOQ_AUTH_USELESS (grants nothing), MOQ_AUTH_ROOT, MOQ_AUTH_NOMEM.
 */
int moq_auth_peek(const char *setup_path, size_t len, struct moq_auth_grant **out);

/* moq_auth_grant_free: NULL is a no-op. */
void moq_auth_grant_free(struct moq_auth_grant *g);

/* moq_auth_grant_dup: a copy of @g (moq_auth_grant_free), NULL when out of
 * memory or @g is NULL. */
struct moq_auth_grant *moq_auth_grant_dup(const struct moq_auth_grant *g);

/* moq_auth_grant_covers_all: whether @g may put (@put) or get every path:
 * a prefix "" or the pattern "**" from the root "" (an operator's grant). */
bool moq_auth_grant_covers_all(const struct moq_auth_grant *g, int put);

/*
 * moq_auth_grant_allows: whether normalised absolute @path lies under one of
 * @g's put (@put nonzero) or get prefixes, on whole segments.
 */
bool moq_auth_grant_allows(const struct moq_auth_grant *g, int put, const char *path, size_t len);

/*
 * moq_auth_grant_overlaps: whether some path under normalised absolute
 * @prefix may be allowed: a grant lies under @prefix or contains it.
 */
bool moq_auth_grant_overlaps(const struct moq_auth_grant *g, int put, const char *prefix,
                             size_t len);

/*
 * moq_auth_split_query: split @in (@len bytes) at '?' into the path (its
 * length in *@pathlen) and the form-url-decoded value of its last non-empty
 * `jwt` parameter, written to @jwt (@cap bytes, NUL-terminated; *@jwtlen 0
 * when none). Returns 0 or MOQ_AUTH_MALFORMED (a token longer than @cap - 1).
 */
int moq_auth_split_query(const char *in, size_t len, size_t *pathlen, char *jwt, size_t cap,
                         size_t *jwtlen);

#endif /* MOQ_AUTH_AUTH_H */
