/* SPDX-License-Identifier: MIT */
/*
 * http.c: a connection's HTTP/1.1 request (web.h; BINDINGS.md, sections 2
 * and 3): parsed by http_parser (Debian's libhttp-parser), one request per
 * connection (Connection: close), routed to /health, /certificate.sha256,
 * /announced, /fetch (fetch.c), /demo/ (static.c), or the WebSocket upgrade
 * to qmux-01 (ws.c, binding.c); the query and path decoding they share.
 */
#define _GNU_SOURCE
#include "web_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "auth.h"
#include "authurl.h"
#include "moq.h"
#include "moq_origin.h"
#include "moq_pct.h"

/* --- requests ------------------------------------------------------------ */

enum { H_NONE, H_UPGRADE, H_KEY, H_VERSION, H_PROTO, H_ORIGIN, H_AUTHZ, H_HOST };

static void hcopy(char *dst, size_t cap, size_t *len, const char *p, size_t n)
{
	if (*len + n >= cap)
		n = *len < cap - 1 ? cap - 1 - *len : 0;
	memcpy(dst + *len, p, n);
	*len += n;
	dst[*len] = 0;
}

static int hp_url(http_parser *p, const char *at, size_t n)
{
	struct wconn *c = p->data;

	if (c->urllen + n >= sizeof(c->url)) {
		c->urllen = sizeof(c->url) - 1; /* too long: the parser stops, 414 */
		c->url[c->urllen] = 0;
		return 1;
	}
	memcpy(c->url + c->urllen, at, n);
	c->urllen += n;
	c->url[c->urllen] = 0;
	return 0;
}

static int hp_field(http_parser *p, const char *at, size_t n)
{
	struct wconn *c = p->data;

	if (c->last_was_value) {
		c->fieldlen = 0;
		c->last_was_value = 0;
	}
	hcopy(c->field, sizeof(c->field), &c->fieldlen, at, n);
	return 0;
}

static int hp_value(http_parser *p, const char *at, size_t n)
{
	struct wconn *c = p->data;

	if (!c->last_was_value) {
		c->last_was_value = 1;
		c->hdr = strcasecmp(c->field, "upgrade") == 0                  ? H_UPGRADE
		         : strcasecmp(c->field, "sec-websocket-key") == 0      ? H_KEY
		         : strcasecmp(c->field, "sec-websocket-version") == 0  ? H_VERSION
		         : strcasecmp(c->field, "sec-websocket-protocol") == 0 ? H_PROTO
		         : strcasecmp(c->field, "origin") == 0                 ? H_ORIGIN
		         : strcasecmp(c->field, "authorization") == 0          ? H_AUTHZ
		         : strcasecmp(c->field, "host") == 0                   ? H_HOST
		                                                               : H_NONE;
		if (c->hdr == H_ORIGIN && c->has_origin++ > 0) /* a second Origin: */
			hcopy(c->origin, sizeof(c->origin), &c->originlen, ",", 1); /* no match */
		/* RFC 7230, 3.2.2: several lines of a list header are one list */
		if (c->hdr == H_PROTO && c->protolen > 0)
			hcopy(c->proto, sizeof(c->proto), &c->protolen, ",", 1);
	}
	switch (c->hdr) {
	case H_UPGRADE:
		hcopy(c->upgrade, sizeof(c->upgrade), &c->upgradelen, at, n);
		break;
	case H_KEY:
		hcopy(c->key, sizeof(c->key), &c->keylen, at, n);
		break;
	case H_VERSION:
		hcopy(c->version, sizeof(c->version), &c->versionlen, at, n);
		break;
	case H_PROTO:
		hcopy(c->proto, sizeof(c->proto), &c->protolen, at, n);
		break;
	case H_ORIGIN:
		hcopy(c->origin, sizeof(c->origin), &c->originlen, at, n);
		break;
	case H_AUTHZ:
		hcopy(c->authz, sizeof(c->authz), &c->authzlen, at, n);
		break;
	case H_HOST:
		hcopy(c->host, sizeof(c->host), &c->hostlen, at, n);
		break;
	default:
		break;
	}
	return 0;
}

static int hp_done(http_parser *p)
{
	struct wconn *c = p->data;

	c->req_done = 1;
	return 0;
}

static const http_parser_settings hp_settings = {
        .on_url = hp_url,
        .on_header_field = hp_field,
        .on_header_value = hp_value,
        .on_message_complete = hp_done,
};

int web_query_get(const char *q, size_t qn, const char *k, char *out, size_t cap)
{
	size_t kl = strlen(k);
	int found = -1;

	for (size_t i = 0; i < qn;) {
		const char *p = q + i, *amp = memchr(p, '&', qn - i);
		size_t pl = amp ? (size_t)(amp - p) : qn - i;
		const char *eq = memchr(p, '=', pl);
		char kb[32];

		i += pl + 1;
		/* auth.c, moq_auth_split_query: `key=value`, the key decoded,
		 * the last non-empty value wins */
		if (eq == NULL || eq + 1 == p + pl || (size_t)(eq - p) >= sizeof(kb))
			continue;
		memcpy(kb, p, (size_t)(eq - p));
		if ((size_t)web_pct_decode(kb, (size_t)(eq - p), 1) != kl || memcmp(kb, k, kl) != 0)
			continue;
		if ((size_t)(p + pl - eq - 1) >= cap)
			return MOQ_ERR_TOO_LARGE;
		memcpy(out, eq + 1, (size_t)(p + pl - eq - 1));
		found = web_pct_decode(out, (size_t)(p + pl - eq - 1), 1);
		out[found] = 0;
	}
	return found;
}

int web_pct_decode(char *s, size_t n, int form)
{
	return moq_pct_decode(s, n, form); /* common/pct.c: the tree's one decoder */
}

/* The token of an `Authorization: Bearer <token>` header (RFC 6750, 2.1;
 * the scheme case-insensitive), its length in *@n; NULL without one, or
 * when the value was cut at the buffer (too long: refused, never read as
 * a shorter token). */
static const char *bearer(const struct wconn *c, size_t *n)
{
	size_t i = 7;

	if (c->authzlen < 8 || c->authzlen + 1 >= sizeof(c->authz) ||
	    strncasecmp(c->authz, "bearer ", 7) != 0)
		return NULL;
	while (i < c->authzlen && c->authz[i] == ' ')
		i++;
	*n = c->authzlen - i;
	while (*n > 0 && c->authz[i + *n - 1] == ' ')
		(*n)--;
	return *n ? c->authz + i : NULL;
}

static int url_mode(const struct wconn *c)
{
	return c->w->cfg.auth != NULL && moq_auth_url_client(c->w->cfg.auth) != NULL;
}

int web_auth_grant(struct wconn *c, const char *path, size_t plen, const char *query, size_t qn,
                   struct moq_auth_grant **g)
{
	char target[3072], *jwt;
	const char *bt;
	size_t pl, jl = 0, bl = 0;
	int rc;

	*g = NULL;
	if (url_mode(c)) {
		/* --auth-url: the grant the auth server gave this request
		 * (web_http_auth_step), used once */
		*g = c->agrant;
		c->agrant = NULL;
		c->anon = 0;
		return *g != NULL;
	}
	/* as a lite-05 SETUP Path "path?query": auth.c reads its `jwt` */
	rc = snprintf(target, sizeof(target), "%.*s%s%.*s", (int)plen, path, qn ? "?" : "", (int)qn,
	              query);
	if (rc < 0 || (size_t)rc >= sizeof(target))
		return 0;
	jwt = malloc(MOQ_AUTH_MAX_TOKEN + 1);
	if (jwt == NULL ||
	    moq_auth_split_query(target, (size_t)rc, &pl, jwt, MOQ_AUTH_MAX_TOKEN + 1, &jl) != 0)
		jl = 1; /* not anonymous: refused below, or a grant */
	free(jwt);
	bt = bearer(c, &bl);
	if (c->authzlen > 0 && bt == NULL)
		bl = 1; /* an Authorization that is no Bearer token: not anonymous */
	c->anon = c->w->cfg.auth == NULL || (jl == 0 && bl == 0);
	if (c->w->cfg.auth == NULL)
		return 1;
	if (jl == 0 && bt != NULL) /* the header's token when the query has none */
		return moq_auth_verify(c->w->cfg.auth, path, plen, bt, bl, g) == MOQ_AUTH_OK;
	if (jl == 0 && bl != 0)
		return 0;
	return moq_auth_connect(c->w->cfg.auth, target, (size_t)rc, g) == MOQ_AUTH_OK;
}

/* --- --auth-url admission of /announced, /fetch, /status/metrics --------- */

/* The path a request is admitted at (request.rs `path`, what the grant's
 * patterns are relative to): "/" and the prefix of /announced/<prefix>, the
 * broadcast of /fetch/<broadcast>/<track>, "/" for /status/metrics; decoded
 * and normalised as routing reads them (moq_path_norm). Returns its length,
 * or -1 when the route is not admitted here (other routes; a path the
 * handler answers 400). */
static int admit_path(const char *path, size_t pl, char *out, size_t cap)
{
	char buf[2048];
	size_t n;
	int k;

	if (pl == 15 && memcmp(path, "/status/metrics", 15) == 0) {
		snprintf(out, cap, "/");
		return 1;
	}
	if ((pl == 10 && memcmp(path, "/announced", 10) == 0) ||
	    (pl > 10 && memcmp(path, "/announced/", 11) == 0)) {
		n = pl - 10;
		memcpy(buf, path + 10, n);
	} else if (pl > 7 && memcmp(path, "/fetch/", 7) == 0) {
		char *sl;

		n = pl - 7;
		memcpy(buf, path + 7, n);
		k = web_pct_decode(buf, n, 0);
		if (k < 0)
			return -1;
		n = (size_t)k;
		while (n > 0 && buf[n - 1] == '/')
			n--;
		sl = memrchr(buf, '/', n);
		if (sl == NULL || sl == buf)
			return -1;
		n = (size_t)(sl - buf);
		out[0] = '/';
		k = moq_path_norm(out + 1, cap - 2, buf, n);
		if (k <= 0)
			return -1;
		out[k + 1] = 0;
		return k + 1;
	} else {
		return -1;
	}
	k = web_pct_decode(buf, n, 0);
	if (k < 0)
		return -1;
	out[0] = '/';
	k = moq_path_norm(out + 1, cap - 2, buf, (size_t)k);
	if (k < 0)
		return -1;
	out[k + 1] = 0;
	return k + 1;
}

/* "ip:port" / "[ip6]:port" of @fd's peer (@peer) or its own address. */
static const char *sock_addr(int fd, int peer, char *out, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN];

	if (fd < 0 || (peer ? getpeername(fd, (struct sockaddr *)&ss, &sl)
	                    : getsockname(fd, (struct sockaddr *)&ss, &sl)) != 0)
		return NULL;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		snprintf(out, cap, "%s:%u", ip, ntohs(a->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		snprintf(out, cap, "[%s]:%u", ip, ntohs(a->sin6_port));
	} else {
		return NULL;
	}
	return out;
}

int web_conn_addrs(const struct wconn *c, char *remote, char *local, size_t cap,
                   const char **rp, const char **lp)
{
	*rp = sock_addr(c->fd, 1, remote, cap);
	*lp = sock_addr(c->fd, 0, local, cap);
	return 0;
}

const char *web_conn_server_name(const struct wconn *c, char *out, size_t cap)
{
	/* request.rs server_name: the SNI, else the request's authority */
	if (c->ssl != NULL) {
		void *sni = NULL;
		unsigned short n = wolfSSL_SNI_GetRequest(c->ssl, WOLFSSL_SNI_HOST_NAME, &sni);

		if (n > 0 && sni != NULL && n < cap) {
			memcpy(out, sni, n);
			out[n] = 0;
			return out;
		}
	}
	if (c->hostlen > 0 && c->hostlen + 1 < sizeof(c->host) && c->hostlen < cap) {
		memcpy(out, c->host, c->hostlen);
		out[c->hostlen] = 0;
		return out;
	}
	return NULL;
}

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void web_auth_cache_clear(struct moq_web *w)
{
	for (unsigned i = 0; i < AUTH_CACHE_N; i++) {
		free(w->acache[i].key);
		moq_auth_grant_free(w->acache[i].grant);
		w->acache[i].key = NULL;
		w->acache[i].grant = NULL;
	}
}

/* The cache key of @c's request admitted at @ap: what the server's answer
 * depends on (the path, the raw query, the presented token). */
static char *cache_key(const struct wconn *c, const char *ap, const char *query, size_t qn)
{
	size_t n = strlen(ap) + qn + c->authzlen + 3;
	char *k = malloc(n);

	if (k != NULL)
		snprintf(k, n, "%s?%.*s\n%.*s", ap, (int)qn, query, (int)c->authzlen, c->authz);
	return k;
}

static struct moq_auth_grant *cache_get(struct moq_web *w, const char *key, uint64_t now)
{
	for (unsigned i = 0; i < AUTH_CACHE_N; i++) {
		struct web_auth_entry *e = &w->acache[i];

		if (e->key == NULL)
			continue;
		if (now >= e->until) { /* its lifetime is over: asked again */
			free(e->key);
			moq_auth_grant_free(e->grant);
			e->key = NULL;
			e->grant = NULL;
			continue;
		}
		if (strcmp(e->key, key) == 0) {
			w->st.auth_cache_hits++;
			return moq_auth_grant_dup(e->grant);
		}
	}
	return NULL;
}

/* Keep @g (copied) under @key for its lifetime: until its `expires`, its
 * revalidate cadence @reval_ns, at most AUTH_CACHE_MAX_NS. */
static void cache_put(struct moq_web *w, char *key, const struct moq_auth_grant *g,
                      uint64_t reval_ns, uint64_t now)
{
	uint64_t ttl = AUTH_CACHE_MAX_NS;
	struct web_auth_entry *e = NULL;

	if (reval_ns && reval_ns < ttl)
		ttl = reval_ns;
	if (g->has_exp) {
		uint64_t wall = moq_auth_now_ns(w->cfg.auth);
		uint64_t at = g->exp > 0 ? (uint64_t)g->exp * 1000000000ull : 0;

		if (at <= wall) {
			free(key);
			return;
		}
		if (at - wall < ttl)
			ttl = at - wall;
	}
	for (unsigned i = 0; i < AUTH_CACHE_N && e == NULL; i++)
		if (w->acache[i].key == NULL || now >= w->acache[i].until)
			e = &w->acache[i];
	if (e == NULL) { /* full: the one that ends first goes */
		e = &w->acache[0];
		for (unsigned i = 1; i < AUTH_CACHE_N; i++)
			if (w->acache[i].until < e->until)
				e = &w->acache[i];
	}
	free(e->key);
	moq_auth_grant_free(e->grant);
	e->grant = moq_auth_grant_dup(g);
	e->key = e->grant ? key : NULL;
	if (e->grant == NULL)
		free(key);
	e->until = now + ttl;
}

static void request(struct wconn *c, uint64_t now);

/* Ask the auth server about @c's request (admitted at @ap), or take a
 * cached answer. The request is parked (C_AUTH) until it comes; the poll
 * loop goes on (web_http_auth_step). */
static void http_admit(struct wconn *c, const char *ap, const char *query, size_t qn,
                       uint64_t now)
{
	struct moq_auth_url_info info = {.transport = "http", .path = ap, .role = "subscriber"};
	char remote[64], local[64], sni[256], *q = NULL, *key;
	size_t bl = 0;

	key = cache_key(c, ap, query, qn);
	if (key == NULL) {
		web_respond_text(c, 503, "Service Unavailable", "out of memory\n");
		return;
	}
	c->agrant = cache_get(c->w, key, now);
	free(key);
	if (c->agrant != NULL) {
		c->aust = 2;
		request(c, now);
		return;
	}
	web_conn_addrs(c, remote, local, sizeof(remote), &info.remote, &info.local);
	info.server_name = web_conn_server_name(c, sni, sizeof(sni));
	if (qn > 0 && (q = strndup(query, qn)) == NULL) {
		web_respond_text(c, 503, "Service Unavailable", "out of memory\n");
		return;
	}
	info.query = q;
	info.token = bearer(c, &bl);
	info.token_len = bl;
	c->areq = moq_auth_url_connect(moq_auth_url_client(c->w->cfg.auth), &info);
	free(q);
	if (c->areq == NULL) {
		web_respond_text(c, 503, "Service Unavailable", "out of memory\n");
		return;
	}
	c->w->st.auth_asked++;
	c->aust = 1;
	c->at0_real = real_ns();
	c->adeadline = now + MOQ_AUTH_URL_TIMEOUT_NS + AUTH_PARK_SLACK_NS;
	c->st = C_AUTH;
}

void web_http_auth_step(struct wconn *c, uint64_t now)
{
	struct moq_auth_grant *g = NULL;
	int fresh = 0, result = MOQ_AUTH_UNAVAILABLE;
	char why[200] = "";

	if (c->aust != 1 || c->areq == NULL)
		return;
	if (moq_auth_req_poll(c->areq, &fresh, &g, &result, why, sizeof(why)) ==
	    MOQ_AUTH_REQ_PENDING) {
		if (now < c->adeadline)
			return;
		/* the auth client's own deadline passed and more: fail closed */
		c->aust = 2;
		c->aresult = MOQ_AUTH_UNAVAILABLE;
		c->st = C_HTTP;
		moq_auth_req_end(c->areq, "refused", 0, 0, 0);
		c->areq = NULL;
		web_respond_text(c, 504, "Gateway Timeout", "the auth server did not answer\n");
		return;
	}
	if (!fresh)
		return;
	c->aust = 2;
	c->aresult = g ? MOQ_AUTH_OK : result;
	c->st = C_HTTP;
	if (g == NULL) {
		/* moq-relay: a refusal is 401, a server that is down or answers
		 * nonsense 502 (auth.rs, Error -> StatusCode); nothing is cached */
		moq_auth_req_end(c->areq, "refused", 0, 0, 0);
		c->areq = NULL;
		if (result == MOQ_AUTH_REFUSED)
			web_respond_text(c, 401, "Unauthorized", "unauthorized\n");
		else
			web_respond_text(c, 502, "Bad Gateway", "auth server unavailable\n");
		return;
	}
	{
		char ap[2100], *qm = memchr(c->url, '?', c->urllen);
		size_t pl = qm ? (size_t)(qm - c->url) : c->urllen;
		int n = admit_path(c->url, pl, ap, sizeof(ap));
		char *key = n >= 0 ? cache_key(c, ap, qm ? qm + 1 : "", qm ? c->urllen - pl - 1 : 0)
		                   : NULL;

		if (key != NULL)
			cache_put(c->w, key, g, moq_auth_req_revalidate_ns(c->areq), now);
	}
	c->agrant = g;
	request(c, now);
}

void web_http_auth_release(struct wconn *c)
{
	moq_auth_grant_free(c->agrant);
	c->agrant = NULL;
	if (c->areq != NULL) {
		/* admitted and ended within the request (request.rs, Http) */
		moq_auth_req_end(c->areq, "disconnected", c->wout, c->req_bytes,
		                 real_ns() - c->at0_real);
		c->areq = NULL;
	}
}

/* What may leave for another origin's page: an answer made without a
 * token (public data only; with cfg.auth, the public prefixes). An answer
 * to a token is for the page that holds it, served same-origin (the
 * relay's /demo/) or by a client that is not a browser. */
const char *web_cors(const struct wconn *c)
{
	return c->anon ? "Access-Control-Allow-Origin: *\r\n" : "";
}

static void serve_ws(struct wconn *c, uint64_t now)
{
	const char *name = NULL;
	char accept[29], h[512];
	int v, n;

	/* RFC 6455, 4.2.1 */
	if (strcasestr(c->upgrade, "websocket") == NULL || c->keylen == 0 ||
	    strcmp(c->version, "13") != 0 || moq_ws_accept_key(c->key, c->keylen, accept) != 0) {
		web_respond_text(c, 400, "Bad Request", "not a WebSocket upgrade\n");
		return;
	}
	/* --allowed-origins, as for a WebTransport CONNECT (RFC 6455, 4.2.2 /
	 * 10.2: a server may refuse an Origin it does not accept); a value
	 * cut at the buffer's size is compared as empty: it matches no entry */
	if (c->has_origin &&
	    !moq_origin_allowed(c->w->cfg.allowed_origins, c->origin,
	                        c->originlen + 1 < sizeof(c->origin) ? c->originlen : 0)) {
		c->w->st.refused_origin++;
		web_respond_text(c, 403, "Forbidden", "Origin not allowed\n");
		return;
	}
	v = moq_ws_select(c->proto, c->protolen, &name);
	if (v < 0) { /* BINDINGS.md, section 2: 400 when nothing offered matches */
		web_respond_text(c, 400, "Bad Request",
		                 "no supported subprotocol (qmux-01.moq-lite-05)\n");
		return;
	}
	{
		char *qm = memchr(c->url, '?', c->urllen);
		size_t pl = qm ? (size_t)(qm - c->url) : c->urllen;

		struct moq_auth_grant *g = NULL;
		/* --auth-url: the session asks the auth server once upgraded
		 * (moq/access.c) and closes with 6 when refused */
		int ok = (c->w->cfg.auth && moq_auth_url_client(c->w->cfg.auth)) ||
		         web_auth_grant(c, c->url, pl, qm ? qm + 1 : "",
		                        qm ? c->urllen - pl - 1 : 0, &g);

		moq_auth_grant_free(g);
		if (!ok) {
			web_respond_text(c, 401, "Unauthorized", "unauthorized\n");
			return;
		}
	}
	if (c->w->dry) {
		web_respond_text(c, 101, "Switching Protocols", "");
		return;
	}
	if (wslay_frame_context_init(&c->wsf, &web_wsl_cb, c) != 0 ||
	    (c->ssl != NULL && (c->tlsrec = malloc(REC_OUT_CAP)) == NULL)) {
		web_respond_text(c, 503, "Service Unavailable", "out of memory\n");
		return;
	}
	if (web_qmux_start(c, 1, now) != 0) {
		web_respond_text(c, 503, "Service Unavailable", "out of memory\n");
		return;
	}
	c->ws_version = v; /* the session starts with the client's parameters */
	n = snprintf(h, sizeof(h),
	             "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	             "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n"
	             "Sec-WebSocket-Protocol: %s\r\n\r\n",
	             accept, name);
	web_out_put(c, h, (size_t)n);
	c->st = C_WS;
	c->w->st.ws_sessions++;
	c->w->st.ws_open++;
	/* our transport parameters go out at once (qmux-01, 4.2) */
	web_mark(c);
}

static void hexfp(const uint8_t fp[32], char out[65])
{
	static const char hx[] = "0123456789abcdef";

	for (int i = 0; i < 32; i++) {
		out[2 * i] = hx[fp[i] >> 4];
		out[2 * i + 1] = hx[fp[i] & 15];
	}
	out[64] = 0;
}

static void request(struct wconn *c, uint64_t now)
{
	char *path = c->url, *qm = memchr(c->url, '?', c->urllen);
	size_t pl = qm ? (size_t)(qm - c->url) : c->urllen;
	const char *query = qm ? qm + 1 : "";
	size_t qn = qm ? c->urllen - pl - 1 : 0;

	if (c->aust == 0)
		c->w->st.requests++;
	if (c->hp.method != HTTP_GET) {
		web_respond_text(c, 405, "Method Not Allowed", "GET only\n");
		return;
	}
	if (c->urllen == 0 || c->url[0] != '/') {
		web_respond_text(c, 400, "Bad Request", "bad request target\n");
		return;
	}
	if (c->hp.upgrade || c->upgradelen > 0) {
		serve_ws(c, now);
		return;
	}
	if (c->aust == 0 && url_mode(c) && !c->w->dry) {
		/* --auth-url: /announced, /fetch and /status/metrics are admitted
		 * by the auth server first (transport "http") */
		char ap[2100];

		if (admit_path(path, pl, ap, sizeof(ap)) >= 0) {
			http_admit(c, ap, query, qn, now);
			return;
		}
	}
	if (pl == 7 && memcmp(path, "/health", 7) == 0) {
		if (c->w->draining)
			web_respond_text(c, 503, "Service Unavailable", "draining\n");
		else
			web_respond_text(c, 200, "OK", "ok\n");
	} else if (pl == 19 && memcmp(path, "/certificate.sha256", 19) == 0) {
		char hex[65];

		if (!c->w->has_fp) {
			web_respond_text(c, 404, "Not Found", "no certificate\n");
			return;
		}
		hexfp(c->w->fp, hex);
		web_respond(c, 200, "OK", "text/plain", hex, 64);
	} else if ((pl == 10 && memcmp(path, "/announced", 10) == 0) ||
	           (pl > 10 && memcmp(path, "/announced/", 11) == 0)) {
		char pre[2048];
		int n;

		memcpy(pre, path + 10, pl - 10);
		n = web_pct_decode(pre, pl - 10, 0);
		if (n < 0) {
			web_respond_text(c, 400, "Bad Request", "bad prefix\n");
			return;
		}
		web_serve_announced(c, pre, (size_t)n, query, qn);
	} else if (c->w->cfg.static_dir != NULL && !c->w->dry && pl >= 6 &&
	           memcmp(path, "/demo/", 6) == 0) {
		web_serve_file(c, path + 6, pl - 6);
	} else if (pl > 7 && memcmp(path, "/fetch/", 7) == 0) {
		char rest[2048];

		memcpy(rest, path + 7, pl - 7);
		web_serve_fetch(c, rest, pl - 7, query, qn, now);
	} else if (web_serve_status(c, path, pl, query, qn)) { /* /status, /status/...: status.c */
	} else {
		web_respond_text(c, 404, "Not Found", "not found\n");
	}
}

/* --- connections --------------------------------------------------------- */

/* Parse what c->in holds of the request; answer once it is complete (or
 * bad). Returns 1 when answered, 0 when more is needed. */
int web_http_feed(struct wconn *c, uint64_t now)
{
	size_t n = c->inlen - c->inoff, done;

	done = http_parser_execute(&c->hp, &hp_settings, (const char *)c->in + c->inoff, n);
	c->req_bytes += done;
	c->inoff += done;
	if (c->urllen + 1 >= sizeof(c->url)) {
		web_respond_text(c, 414, "URI Too Long", "request target too long\n");
		return 1;
	}
	if (HTTP_PARSER_ERRNO(&c->hp) != HPE_OK && !c->req_done) {
		web_respond_text(c, 400, "Bad Request", "malformed request\n");
		return 1;
	}
	if (c->req_bytes > REQ_MAX) {
		web_respond_text(c, 431, "Request Header Fields Too Large", "request too large\n");
		return 1;
	}
	if (!c->req_done)
		return 0;
	request(c, now);
	return 1;
}

int moq_web_req_parse(const uint8_t *d, size_t n)
{
	struct moq_web *w = calloc(1, sizeof(*w));
	struct wconn *c = calloc(1, sizeof(*c));
	int code = 0;

	if (w == NULL || c == NULL) {
		free(w);
		free(c);
		return MOQ_ERR_NOMEM;
	}
	w->dry = 1;
	w->has_fp = 1;
	c->w = w;
	c->fd = -1;
	c->file_fd = -1;
	c->st = C_HTTP;
	http_parser_init(&c->hp, HTTP_REQUEST);
	c->hp.data = c;
	while (n > 0 && c->st == C_HTTP) {
		size_t k = n < IN_CAP - c->inlen ? n : IN_CAP - c->inlen;

		memcpy(c->in + c->inlen, d, k);
		c->inlen += k;
		d += k;
		n -= k;
		if (web_http_feed(c, 0))
			break;
		if (c->inoff == c->inlen)
			c->inoff = c->inlen = 0;
		else if (c->inlen == IN_CAP)
			break;
	}
	if (c->outlen >= 12 && memcmp(c->out, "HTTP/1.1 ", 9) == 0)
		code = (c->out[9] - '0') * 100 + (c->out[10] - '0') * 10 + (c->out[11] - '0');
	free(c);
	free(w);
	return code;
}
