/* SPDX-License-Identifier: MIT */
/*
 * authurl.h: --auth-url, moq-relay's auth server contract (github
 * moq-dev/moq, rs/moq-auth/src/{request,grant}.rs; doc/bin/relay/auth.md,
 * The contract): one JSON POST per session event -- `connect`,
 * `revalidate` on the grant's cadence, `end` with the bytes and duration --
 * answered with a grant: `publish` / `subscribe` pattern lists (pattern.h),
 * an optional `root`, `expires` (Unix s), `revalidate` (s), `tier`, `peer`.
 *
 * The requests run on threads of their own (MOQ_AUTH_URL_THREADS), never
 * on a worker's poll loop: a worker submits one (moq_auth_url_connect) and
 * polls its state at its timer (moq_auth_req_poll) while the session waits
 * with its requests buffered. Each request has a deadline
 * (MOQ_AUTH_URL_TIMEOUT_NS); a server that is down or late, a status other
 * than 2xx / 401 / 403, or a body that is no valid grant refuses the
 * session with a one-line reason (fail closed). 401 / 403 and a grant that
 * names nothing refuse too. A grant is what the session holds until it
 * expires or is revalidated; nothing else is cached.
 *
 * The link (auth.md, The link): `http://` to a loopback host only,
 * `unix:///path/to.sock` (HTTP over the socket; the request path is "/"),
 * `https://` with the certificate chain checked against --auth-tls-root
 * (default: the system bundle) and the host name checked.
 */
#ifndef MOQ_AUTH_AUTHURL_H
#define MOQ_AUTH_AUTHURL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct moq_auth_grant;

/* auth.md: "a timeout ... refuses"; the deadline of one request. */
#define MOQ_AUTH_URL_TIMEOUT_NS (10ull * 1000000000ull)
/* Requests in flight at once (a slow server holds one thread each). */
#define MOQ_AUTH_URL_THREADS 4u
/* An answer larger than this is malformed. */
#define MOQ_AUTH_URL_MAX_BODY 65536u

struct moq_auth_url_cfg {
	const char *url;  /* --auth-url */
	const char *ca;   /* --auth-tls-root: PEM bundle for https; NULL = system */
	const char *node; /* the relay's name in requests (`node`); NULL = hostname */
	/* per-request deadline; 0 = MOQ_AUTH_URL_TIMEOUT_NS */
	uint64_t timeout_ns;
	/* Unix time in ns (expires); NULL = CLOCK_REALTIME */
	uint64_t (*clock)(void *ctx);
	void *clock_ctx;
};

/* What the relay knows about a session (request.rs, Request). Strings are
 * copied; NULL / 0 = absent. */
struct moq_auth_url_info {
	const char *transport;      /* "quic", "websocket", "http", ... */
	const char *remote, *local; /* "203.0.113.9:4433", "[::1]:443" */
	const char *server_name, *alpn;
	const char *path;  /* as dialed, without the query */
	const char *query; /* raw, without '?' */
	const char *role;  /* "publisher", "subscriber"; NULL = both */
	/* request.rs, token: a credential presented outside the query (an HTTP
	 * `Authorization: Bearer`), sent as {"kind": 0, "value": base64url}
	 * (Token Type 0, "negotiated out of band": moq auth serve reads it as a
	 * JWT); NULL = none */
	const char *token;
	size_t token_len;
};

enum moq_auth_req_state {
	MOQ_AUTH_REQ_PENDING = 1, /* the answer is outstanding */
	MOQ_AUTH_REQ_DONE = 0,    /* answered: see moq_auth_req_poll */
};

struct moq_auth_url;
struct moq_auth_req;

/*
 * moq_auth_url_create: check @cfg's URL (one line naming --auth-url in @err
 * otherwise, e.g. "--auth-url: http:// is for a loopback host only") and
 * start the request threads. NULL on error.
 */
struct moq_auth_url *moq_auth_url_create(const struct moq_auth_url_cfg *cfg, char *err,
                                         size_t errlen);

/* moq_auth_url_destroy: stop the threads (a request in flight ends at its
 * deadline at the latest); requests not yet answered are dropped. */
void moq_auth_url_destroy(struct moq_auth_url *u);

/*
 * moq_auth_url_connect: start a session's lifecycle with a `connect`
 * (any thread). Returns its handle (owned by the caller until
 * moq_auth_req_end) or NULL (out of memory: refuse the session).
 */
struct moq_auth_req *moq_auth_url_connect(struct moq_auth_url *u,
                                          const struct moq_auth_url_info *info);

/*
 * moq_auth_req_poll: whether the last event's answer is in (any thread, no
 * lock: an atomic read). When it is (0) and it is new since the last call,
 * *@grant is a new grant for the caller (moq_auth_grant_free), or NULL with
 * *@result the refusal (MOQ_AUTH_REFUSED / MOQ_AUTH_UNAVAILABLE / NOMEM)
 * and @why (@whylen) one line. Returns MOQ_AUTH_REQ_PENDING, or 0 with
 * *@fresh 1 when an answer was taken now.
 */
int moq_auth_req_poll(struct moq_auth_req *r, int *fresh, struct moq_auth_grant **grant,
                      int *result, char *why, size_t whylen);

/* moq_auth_req_revalidate_ns: the cadence of the grant last taken (0 = none). */
uint64_t moq_auth_req_revalidate_ns(const struct moq_auth_req *r);

/* moq_auth_req_peer: the last grant's `peer` flag. */
bool moq_auth_req_peer(const struct moq_auth_req *r);

/* moq_auth_req_id: the session's 128-bit hex id (request.rs, id). */
const char *moq_auth_req_id(const struct moq_auth_req *r);

/*
 * moq_auth_req_revalidate: POST `revalidate` for @r (its answer comes
 * through moq_auth_req_poll). Ignored while an answer is outstanding.
 */
void moq_auth_req_revalidate(struct moq_auth_req *r);

/*
 * moq_auth_req_end: POST `end` (@reason: "disconnected", "expired",
 * "refused", ...; bytes the relay sent and received; how long the session
 * was admitted) and give @r up: the request threads free it once sent.
 * NULL is a no-op.
 */
void moq_auth_req_end(struct moq_auth_req *r, const char *reason, uint64_t sent, uint64_t received,
                      uint64_t duration_ns);

/* Counters (any thread). */
struct moq_auth_url_stats {
	uint64_t requests, admitted, refused, unavailable;
};
void moq_auth_url_get_stats(const struct moq_auth_url *u, struct moq_auth_url_stats *out);

/*
 * moq_auth_grant_build: the grant of patterns @publish / @subscribe (@np,
 * @ns pattern texts relative to root @root, @rlen bytes) for a session at
 * @root, as a token rooted there would give (auth.h). @has_exp / @exp: Unix
 * seconds. Returns 0 with *@out, or MOQ_AUTH_MALFORMED (a bad pattern) /
 * MOQ_AUTH_USELESS / MOQ_AUTH_NOMEM.
 */
int moq_auth_grant_build(const char *root, size_t rlen, const char *const *publish, uint32_t np,
                         const char *const *subscribe, uint32_t ns, int has_exp, int64_t exp,
                         struct moq_auth_grant **out);

#endif /* MOQ_AUTH_AUTHURL_H */
