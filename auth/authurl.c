/* SPDX-License-Identifier: MIT */
/*
 * authurl.c: the --auth-url client (authurl.h). The reference is github
 * moq-dev/moq, rs/moq-auth/src/{request,grant,client}.rs and
 * doc/bin/relay/auth.md, The contract.
 *
 * A queue of events under a mutex, served by MOQ_AUTH_URL_THREADS threads;
 * each event is one HTTP/1.1 POST on a connection of its own (Connection:
 * close), read to its end or its Content-Length (chunked bodies decoded),
 * with one deadline for the whole exchange. The answer is handed to the
 * worker through the request's atomic state: the worker never blocks.
 */
#include "authurl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include <jansson.h>

#include "auth.h"

#define NS_PER_S 1000000000ull
/* the system CA bundle (Debian's ca-certificates) */
#define SYSTEM_CA "/etc/ssl/certs/ca-certificates.crt"

enum scheme { SCH_HTTP = 1, SCH_HTTPS, SCH_UNIX };
enum event { EV_CONNECT = 1, EV_REVALIDATE, EV_END };

struct moq_auth_req {
	struct moq_auth_url *u;
	char id[33];
	char *transport, *remote, *local, *server_name, *alpn, *path, *query, *role;
	char *token; /* base64url of the presented token (info.token) */
	/* the event queued or in flight (one at a time per session) */
	enum event ev;
	char reason[32];
	uint64_t sent, received, duration_ns;
	struct moq_auth_req *qnext;
	/* the answer: written by a request thread, then state released */
	_Atomic int state;  /* MOQ_AUTH_REQ_PENDING / DONE */
	_Atomic int unread; /* an answer not yet taken by moq_auth_req_poll */
	struct moq_auth_grant *grant;
	int result;
	char why[200];
	uint64_t revalidate_ns;
	bool peer;
	int end_after; /* under mu: moq_auth_req_end came while an event was out */
};

struct moq_auth_url {
	enum scheme sch;
	char host[256], port[8], path[1024], sock[108];
	char node[128];
	uint64_t timeout_ns;
	uint64_t (*clock)(void *ctx);
	void *clock_ctx;
	WOLFSSL_CTX *tls;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct moq_auth_req *qhead, *qtail;
	int stop;
	pthread_t th[MOQ_AUTH_URL_THREADS];
	unsigned nth;
	_Atomic uint64_t requests, admitted, refused, unavailable;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static uint64_t realtime_ns(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static int fail(char *err, size_t errlen, const char *msg, const char *arg)
{
	snprintf(err, errlen, "--auth-url: %s%s%s", arg ? arg : "", arg ? ": " : "", msg);
	return -1;
}

/* http[s]://host[:port][/path] or unix:///path/to.sock */
static int parse_url(struct moq_auth_url *u, const char *url, char *err, size_t errlen)
{
	const char *p, *hs, *he, *ps;

	if (strncmp(url, "unix://", 7) == 0) {
		p = url + 7;
		if (*p != '/' || strlen(p) >= sizeof(u->sock))
			return fail(err, errlen,
			            "unix:// needs an absolute socket path (< 108 bytes)", url);
		u->sch = SCH_UNIX;
		snprintf(u->sock, sizeof(u->sock), "%s", p);
		snprintf(u->path, sizeof(u->path), "/");
		snprintf(u->host, sizeof(u->host), "localhost");
		return 0;
	}
	if (strncmp(url, "http://", 7) == 0) {
		u->sch = SCH_HTTP;
		hs = url + 7;
	} else if (strncmp(url, "https://", 8) == 0) {
		u->sch = SCH_HTTPS;
		hs = url + 8;
	} else {
		return fail(err, errlen, "not http://, https:// or unix://", url);
	}
	ps = strchr(hs, '/');
	he = ps ? ps : hs + strlen(hs);
	if (*hs == '[') {
		const char *rb = memchr(hs, ']', (size_t)(he - hs));
		if (!rb)
			return fail(err, errlen, "unclosed [ in the host", url);
		if ((size_t)(rb - hs - 1) >= sizeof(u->host))
			return fail(err, errlen, "host too long", url);
		memcpy(u->host, hs + 1, (size_t)(rb - hs - 1));
		u->host[rb - hs - 1] = 0;
		p = rb + 1;
	} else {
		const char *c = memchr(hs, ':', (size_t)(he - hs));
		const char *e = c ? c : he;
		if ((size_t)(e - hs) >= sizeof(u->host) || e == hs)
			return fail(err, errlen, "no host, or one too long", url);
		memcpy(u->host, hs, (size_t)(e - hs));
		u->host[e - hs] = 0;
		p = e;
	}
	if (p < he && *p == ':') {
		size_t pl = (size_t)(he - p - 1);
		if (pl == 0 || pl >= sizeof(u->port) || strspn(p + 1, "0123456789") < pl)
			return fail(err, errlen, "bad port", url);
		memcpy(u->port, p + 1, pl);
		u->port[pl] = 0;
	} else if (p < he) {
		return fail(err, errlen, "bad host", url);
	} else {
		snprintf(u->port, sizeof(u->port), "%s", u->sch == SCH_HTTPS ? "443" : "80");
	}
	if (strlen(ps ? ps : "/") >= sizeof(u->path))
		return fail(err, errlen, "path too long", url);
	snprintf(u->path, sizeof(u->path), "%s", ps ? ps : "/");
	if (strpbrk(u->path, " \r\n"))
		return fail(err, errlen, "path holds a space or a line break", url);
	if (u->sch == SCH_HTTP) {
		/* auth.md, The link: "http:// is accepted for a loopback host only" */
		struct in_addr a4;
		struct in6_addr a6;
		bool loop = strcmp(u->host, "localhost") == 0 ||
		            (inet_pton(AF_INET, u->host, &a4) == 1 &&
		             (ntohl(a4.s_addr) >> 24) == 127) ||
		            (inet_pton(AF_INET6, u->host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6));
		if (!loop)
			return fail(err, errlen,
			            "http:// is for a loopback host only (use https:// or unix://)",
			            url);
	}
	return 0;
}

/* -------------------------------------------------------------- request */

static void json_opt(json_t *o, const char *k, const char *v)
{
	if (v)
		json_object_set_new(o, k, json_string(v));
}

/* request.rs: the event's JSON (the same shape for every event; an end adds
 * reason, duration and bytes). */
static char *request_json(const struct moq_auth_url *u, const struct moq_auth_req *r)
{
	json_t *o = json_object();
	char *s;

	json_object_set_new(o, "id", json_string(r->id));
	json_object_set_new(o, "event",
	                    json_string(r->ev == EV_CONNECT      ? "connect"
	                                : r->ev == EV_REVALIDATE ? "revalidate"
	                                                         : "end"));
	if (r->ev == EV_END) {
		json_t *b = json_object();
		json_object_set_new(o, "reason", json_string(r->reason));
		json_object_set_new(o, "duration", json_real((double)r->duration_ns / 1e9));
		json_object_set_new(b, "sent", json_integer((json_int_t)r->sent));
		json_object_set_new(b, "received", json_integer((json_int_t)r->received));
		json_object_set_new(o, "bytes", b);
	}
	json_object_set_new(o, "node", json_string(u->node));
	json_object_set_new(o, "transport", json_string(r->transport ? r->transport : "quic"));
	json_opt(o, "remote", r->remote);
	json_opt(o, "local", r->local);
	json_opt(o, "server_name", r->server_name);
	json_opt(o, "alpn", r->alpn);
	json_object_set_new(o, "path", json_string(r->path ? r->path : ""));
	json_opt(o, "query", r->query);
	json_opt(o, "role", r->role);
	if (r->token) {
		json_t *t = json_object();
		json_object_set_new(t, "kind", json_integer(0));
		json_object_set_new(t, "value", json_string(r->token));
		json_object_set_new(o, "token", t);
	}
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

/* --------------------------------------------------------------- the link */

struct link {
	int fd;
	WOLFSSL *ssl;
	uint64_t deadline; /* monotonic ns */
};

static int remaining_ms(const struct link *l)
{
	uint64_t now = mono_ns();

	return now >= l->deadline ? 0 : (int)((l->deadline - now) / 1000000ull) + 1;
}

static int wait_fd(struct link *l, short ev)
{
	struct pollfd p = {.fd = l->fd, .events = ev};
	int ms = remaining_ms(l), rc;

	if (ms <= 0)
		return -1;
	do
		rc = poll(&p, 1, ms);
	while (rc < 0 && errno == EINTR);
	return rc > 0 ? 0 : -1;
}

/* Connect within the deadline. Returns 0, or -1 with @why. */
static int link_open(struct moq_auth_url *u, struct link *l, char *why, size_t wl)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL, *ai;
	int rc;

	l->fd = -1;
	l->ssl = NULL;
	if (u->sch == SCH_UNIX) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", u->sock);
		l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (l->fd < 0 || connect(l->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			snprintf(why, wl, "connect %s: %s", u->sock, strerror(errno));
			return -1;
		}
		fcntl(l->fd, F_SETFL, O_NONBLOCK);
		return 0;
	}
	rc = getaddrinfo(u->host, u->port, &hints, &res);
	if (rc) {
		snprintf(why, wl, "resolve %.100s: %s", u->host, gai_strerror(rc));
		return -1;
	}
	snprintf(why, wl, "connect %.100s:%s: no address", u->host, u->port);
	for (ai = res; ai; ai = ai->ai_next) {
		int e = 0;
		socklen_t el = sizeof(e);
		l->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (l->fd < 0)
			continue;
		if (connect(l->fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
		    (errno == EINPROGRESS && wait_fd(l, POLLOUT) == 0 &&
		     getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0))
			break;
		snprintf(why, wl, "connect %.100s:%s: %s", u->host, u->port,
		         e                      ? strerror(e)
		         : errno == EINPROGRESS ? "timed out"
		                                : strerror(errno));
		close(l->fd);
		l->fd = -1;
	}
	freeaddrinfo(res);
	if (l->fd < 0)
		return -1;
	if (u->sch == SCH_HTTPS) {
		int r;
		l->ssl = wolfSSL_new(u->tls);
		if (!l->ssl || wolfSSL_set_fd(l->ssl, l->fd) != WOLFSSL_SUCCESS ||
		    wolfSSL_UseSNI(l->ssl, WOLFSSL_SNI_HOST_NAME, u->host,
		                   (unsigned short)strlen(u->host)) != WOLFSSL_SUCCESS ||
		    wolfSSL_check_domain_name(l->ssl, u->host) != WOLFSSL_SUCCESS) {
			snprintf(why, wl, "TLS set-up failed");
			return -1;
		}
		while ((r = wolfSSL_connect(l->ssl)) != WOLFSSL_SUCCESS) {
			int e = wolfSSL_get_error(l->ssl, r);
			if ((e == WOLFSSL_ERROR_WANT_READ && wait_fd(l, POLLIN) == 0) ||
			    (e == WOLFSSL_ERROR_WANT_WRITE && wait_fd(l, POLLOUT) == 0))
				continue;
			if (e == WOLFSSL_ERROR_WANT_READ || e == WOLFSSL_ERROR_WANT_WRITE)
				snprintf(why, wl, "TLS handshake with %.100s timed out", u->host);
			else {
				char es[WOLFSSL_MAX_ERROR_SZ];
				snprintf(why, wl, "TLS handshake with %.100s: %s", u->host,
				         wolfSSL_ERR_error_string((unsigned long)e, es));
			}
			return -1;
		}
	}
	return 0;
}

static void link_close(struct link *l)
{
	if (l->ssl) {
		wolfSSL_free(l->ssl);
		l->ssl = NULL;
	}
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

static int link_write(struct link *l, const char *buf, size_t len)
{
	while (len) {
		ssize_t n;
		if (l->ssl) {
			int r = wolfSSL_write(l->ssl, buf, (int)len), e;
			if (r > 0) {
				n = r;
			} else {
				e = wolfSSL_get_error(l->ssl, r);
				if ((e == WOLFSSL_ERROR_WANT_READ && wait_fd(l, POLLIN) == 0) ||
				    (e == WOLFSSL_ERROR_WANT_WRITE && wait_fd(l, POLLOUT) == 0))
					continue;
				return -1;
			}
		} else {
			n = send(l->fd, buf, len, MSG_NOSIGNAL);
			if (n < 0) {
				if ((errno == EAGAIN || errno == EINTR) && wait_fd(l, POLLOUT) == 0)
					continue;
				return -1;
			}
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read up to @cap; returns bytes (0 at the end), -1 error, -2 deadline. */
static ssize_t link_read(struct link *l, char *buf, size_t cap)
{
	for (;;) {
		if (l->ssl) {
			int r = wolfSSL_read(l->ssl, buf, (int)cap), e;
			if (r > 0)
				return r;
			e = wolfSSL_get_error(l->ssl, r);
			if (e == WOLFSSL_ERROR_ZERO_RETURN ||
			    (r == 0 && e == WOLFSSL_ERROR_SYSCALL))
				return 0;
			if (e == WOLFSSL_ERROR_WANT_READ || e == WOLFSSL_ERROR_WANT_WRITE) {
				if (wait_fd(l, e == WOLFSSL_ERROR_WANT_READ ? POLLIN : POLLOUT) !=
				    0)
					return -2;
				continue;
			}
			return -1;
		} else {
			ssize_t n = recv(l->fd, buf, cap, 0);
			if (n >= 0)
				return n;
			if (errno == EAGAIN || errno == EINTR) {
				if (wait_fd(l, POLLIN) != 0)
					return -2;
				continue;
			}
			return -1;
		}
	}
}

/* RFC 9112, 7.1: a chunked body decoded in place. Returns its length or -1. */
static long dechunk(char *b, size_t len)
{
	size_t i = 0, o = 0;

	for (;;) {
		char *end;
		unsigned long n;
		char *crlf = NULL;
		for (size_t j = i; j + 1 < len && !crlf; j++)
			if (b[j] == '\r' && b[j + 1] == '\n')
				crlf = b + j;
		if (!crlf)
			return -1;
		n = strtoul(b + i, &end, 16);
		if (end == b + i || n > len)
			return -1;
		i = (size_t)(crlf - b) + 2;
		if (n == 0)
			return (long)o;
		if (i + n + 2 > len)
			return -1;
		memmove(b + o, b + i, n);
		o += n;
		i += n + 2;
	}
}

/*
 * One POST of @body. Returns the HTTP status with the body in *@out (new,
 * NUL-terminated), or -1 with @why.
 */
static int http_post(struct moq_auth_url *u, const char *body, char **out, char *why, size_t wl)
{
	struct link l;
	char hdr[1536], *buf = NULL, *he, *p;
	size_t len = 0, cap = MOQ_AUTH_URL_MAX_BODY + 4096, hlen, blen;
	int status;
	long clen = -1;
	bool chunked = false;

	*out = NULL;
	l.deadline = mono_ns() + u->timeout_ns;
	if (link_open(u, &l, why, wl) != 0) {
		link_close(&l);
		return -1;
	}
	snprintf(hdr, sizeof(hdr),
	         "POST %s HTTP/1.1\r\nHost: %s%s%s\r\nContent-Type: application/json\r\n"
	         "Accept: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
	         u->path, u->host, u->sch == SCH_UNIX ? "" : ":", u->sch == SCH_UNIX ? "" : u->port,
	         strlen(body));
	if (link_write(&l, hdr, strlen(hdr)) != 0 || link_write(&l, body, strlen(body)) != 0) {
		snprintf(why, wl, "sending the request failed");
		link_close(&l);
		return -1;
	}
	buf = malloc(cap + 1);
	if (!buf) {
		snprintf(why, wl, "out of memory");
		link_close(&l);
		return -1;
	}
	for (;;) {
		ssize_t n;
		if (len == cap) {
			snprintf(why, wl, "answer larger than %u bytes", MOQ_AUTH_URL_MAX_BODY);
			goto bad;
		}
		n = link_read(&l, buf + len, cap - len);
		if (n == -2) {
			snprintf(why, wl, "no answer within %llu ms",
			         (unsigned long long)(u->timeout_ns / 1000000ull));
			goto bad;
		}
		if (n < 0) {
			snprintf(why, wl, "reading the answer failed");
			goto bad;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		buf[len] = 0;
		/* a Content-Length body that is complete ends the read */
		he = strstr(buf, "\r\n\r\n");
		if (he && clen < 0 && !chunked) {
			for (p = buf; p && p < he; p = strstr(p, "\r\n"), p = p ? p + 2 : NULL) {
				if (strncasecmp(p, "content-length:", 15) == 0)
					clen = strtol(p + 15, NULL, 10);
				if (strncasecmp(p, "transfer-encoding:", 18) == 0 &&
				    strstr(p, "chunked") &&
				    strstr(p, "chunked") < strstr(p, "\r\n"))
					chunked = true;
			}
		}
		if (he && clen >= 0 && len >= (size_t)(he + 4 - buf) + (size_t)clen)
			break;
	}
	buf[len] = 0;
	he = strstr(buf, "\r\n\r\n");
	if (!he || sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
		snprintf(why, wl, "not an HTTP answer");
		goto bad;
	}
	hlen = (size_t)(he + 4 - buf);
	blen = len - hlen;
	if (clen >= 0 && (size_t)clen < blen)
		blen = (size_t)clen;
	memmove(buf, buf + hlen, blen);
	buf[blen] = 0;
	if (chunked) {
		long d = dechunk(buf, blen);
		if (d < 0) {
			snprintf(why, wl, "bad chunked body");
			goto bad;
		}
		buf[d] = 0;
	}
	link_close(&l);
	*out = buf;
	return status;
bad:
	free(buf);
	link_close(&l);
	return -1;
}

/* ---------------------------------------------------------------- grant */

static int str_list(json_t *v, const char ***out, uint32_t *n)
{
	size_t i;
	json_t *e;

	*out = NULL;
	*n = 0;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v) || json_array_size(v) > MOQ_AUTH_MAX_GRANTS)
		return -1;
	*out = calloc(json_array_size(v) + 1, sizeof(char *));
	if (!*out)
		return -1;
	json_array_foreach(v, i, e)
	{
		if (!json_is_string(e) || memchr(json_string_value(e), 0, json_string_length(e)))
			return -1;
		(*out)[(*n)++] = json_string_value(e);
	}
	return 0;
}

/* grant.rs, Grant + validate: the answer @body of a 2xx into @r. */
static void take_grant(struct moq_auth_url *u, struct moq_auth_req *r, const char *body)
{
	json_error_t je;
	json_t *o = json_loads(body, JSON_REJECT_DUPLICATES, &je), *v;
	const char **pub = NULL, **sub = NULL;
	uint32_t np = 0, ns = 0;
	const char *root;
	int64_t expires = 0;
	int has_exp = 0, rc;
	uint64_t now_s = u->clock(u->clock_ctx) / NS_PER_S;

	r->result = MOQ_AUTH_UNAVAILABLE;
	if (!o || !json_is_object(o)) {
		snprintf(r->why, sizeof(r->why), "the answer is not a JSON object%s%.80s",
		         o ? "" : ": ", o ? "" : je.text);
		goto out;
	}
	if (str_list(json_object_get(o, "publish"), &pub, &np) ||
	    str_list(json_object_get(o, "subscribe"), &sub, &ns)) {
		snprintf(r->why, sizeof(r->why), "publish / subscribe is not a list of patterns");
		goto out;
	}
	v = json_object_get(o, "root");
	if (v && !json_is_null(v) && !json_is_string(v)) {
		snprintf(r->why, sizeof(r->why), "root is not a string");
		goto out;
	}
	root = json_is_string(v) ? json_string_value(v) : NULL;
	if (root && memchr(root, 0, json_string_length(v))) {
		snprintf(r->why, sizeof(r->why), "root holds a NUL");
		goto out;
	}
	v = json_object_get(o, "mounts");
	if (v && !(json_is_object(v) && json_object_size(v) == 0) && !json_is_null(v)) {
		/* refused rather than ignored: this relay cannot mount */
		snprintf(r->why, sizeof(r->why), "mounts are not supported by this relay");
		goto out;
	}
	v = json_object_get(o, "tier");
	if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0)) {
		/* grant.rs: "an opaque label handed to stats, so traffic can be
		 * bucketed"; this relay's stats have no tiers, so a grant asking
		 * for one is refused rather than its billing label dropped
		 * (docs/DEPLOY.md); absent or "" is the default tier */
		snprintf(r->why, sizeof(r->why), "tier is not supported by this relay (no per-tier "
		                                 "stats)");
		goto out;
	}
	v = json_object_get(o, "expires");
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v)) {
			snprintf(r->why, sizeof(r->why), "expires is not Unix seconds");
			goto out;
		}
		has_exp = 1;
		expires = (int64_t)json_integer_value(v);
	}
	v = json_object_get(o, "revalidate");
	r->revalidate_ns = 0;
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			snprintf(r->why, sizeof(r->why), "revalidate is not seconds");
			goto out;
		}
		/* grant.rs, validate: ZeroRevalidate, UnboundedRevalidate */
		if (json_integer_value(v) == 0) {
			snprintf(r->why, sizeof(r->why), "invalid grant: revalidate 0");
			goto out;
		}
		if (!has_exp) {
			snprintf(r->why, sizeof(r->why),
			         "invalid grant: revalidate without expires");
			goto out;
		}
		r->revalidate_ns = (uint64_t)json_integer_value(v) * NS_PER_S;
	}
	v = json_object_get(o, "peer");
	if (v && !json_is_boolean(v)) {
		snprintf(r->why, sizeof(r->why), "peer is not a boolean");
		goto out;
	}
	r->peer = v && json_is_true(v);
	/* grant.rs, validate: GrantExpired (exact, no grace) */
	if (has_exp && (expires <= 0 || (uint64_t)expires <= now_s)) {
		snprintf(r->why, sizeof(r->why), "invalid grant: expires already passed");
		goto out;
	}
	if (!np && !ns) {
		/* grant.rs: UselessGrant, a refusal */
		r->result = MOQ_AUTH_REFUSED;
		snprintf(r->why, sizeof(r->why), "the grant names nothing");
		goto out;
	}
	{
		const char *rt = root ? root : r->path ? r->path : "";
		rc = moq_auth_grant_build(rt, strlen(rt), pub, np, sub, ns, has_exp, expires,
		                          &r->grant);
	}
	if (rc) {
		r->result = rc == MOQ_AUTH_NOMEM ? MOQ_AUTH_NOMEM : MOQ_AUTH_UNAVAILABLE;
		snprintf(r->why, sizeof(r->why), "%s",
		         rc == MOQ_AUTH_MALFORMED ? "a pattern of the grant does not parse"
		                                  : moq_auth_result_str(rc));
		goto out;
	}
	r->result = MOQ_AUTH_OK;
	r->why[0] = 0;
out:
	free(pub);
	free(sub);
	json_decref(o);
}

/* A refusal, one line on stderr (the relay's log; never a worker's: this
 * is a request thread), at most MAX_LOG_PER_S a second (a flood of refusals stays bounded). */
#define MAX_LOG_PER_S 50
static void refusal_log(struct moq_auth_url *u, const struct moq_auth_req *r)
{
	static _Atomic uint64_t sec, cnt;
	uint64_t now = mono_ns() / NS_PER_S;

	(void)u;
	if (atomic_exchange(&sec, now) != now)
		atomic_store(&cnt, 0);
	if (atomic_fetch_add(&cnt, 1) >= MAX_LOG_PER_S)
		return;
	fprintf(stderr, "auth-url: session %s path '%.200s' %s: %s: %s\n", r->id,
	        r->path ? r->path : "", r->ev == EV_CONNECT ? "connect" : "revalidate",
	        r->result == MOQ_AUTH_REFUSED ? "refused" : "refused (fail closed)", r->why);
}

/* One event of @r, answered into it. */
static void serve(struct moq_auth_url *u, struct moq_auth_req *r)
{
	char *req = request_json(u, r), *body = NULL;
	int status;

	atomic_fetch_add(&u->requests, 1);
	r->grant = NULL;
	if (!req) {
		r->result = MOQ_AUTH_NOMEM;
		snprintf(r->why, sizeof(r->why), "out of memory");
		return;
	}
	status = http_post(u, req, &body, r->why, sizeof(r->why));
	free(req);
	if (r->ev == EV_END) {
		free(body);
		return; /* nobody waits for the answer to an end */
	}
	if (status < 0) {
		r->result = MOQ_AUTH_UNAVAILABLE;
	} else if (status == 401 || status == 403) {
		r->result = MOQ_AUTH_REFUSED;
		snprintf(r->why, sizeof(r->why), "refused (HTTP %d)", status);
	} else if (status < 200 || status > 299) {
		r->result = MOQ_AUTH_UNAVAILABLE;
		snprintf(r->why, sizeof(r->why), "HTTP %d", status);
	} else {
		take_grant(u, r, body);
	}
	free(body);
	if (r->result != MOQ_AUTH_OK)
		refusal_log(u, r);
	atomic_fetch_add(r->result == MOQ_AUTH_OK        ? &u->admitted
	                 : r->result == MOQ_AUTH_REFUSED ? &u->refused
	                                                 : &u->unavailable,
	                 1);
}

static void req_free(struct moq_auth_req *r)
{
	moq_auth_grant_free(r->grant);
	free(r->transport);
	free(r->remote);
	free(r->local);
	free(r->server_name);
	free(r->alpn);
	free(r->path);
	free(r->query);
	free(r->role);
	free(r->token);
	free(r);
}

static void enqueue_locked(struct moq_auth_url *u, struct moq_auth_req *r);

static void *thread_main(void *arg)
{
	struct moq_auth_url *u = arg;

	pthread_mutex_lock(&u->mu);
	for (;;) {
		struct moq_auth_req *r;
		while (!u->qhead && !u->stop)
			pthread_cond_wait(&u->cv, &u->mu);
		if (u->stop)
			break;
		r = u->qhead;
		u->qhead = r->qnext;
		if (!u->qhead)
			u->qtail = NULL;
		pthread_mutex_unlock(&u->mu);
		serve(u, r);
		if (r->ev == EV_END) {
			req_free(r);
			pthread_mutex_lock(&u->mu);
			continue;
		}
		pthread_mutex_lock(&u->mu);
		if (r->end_after) {
			/* the session ended while this was out: its end now */
			moq_auth_grant_free(r->grant);
			r->grant = NULL;
			r->ev = EV_END;
			enqueue_locked(u, r);
		} else {
			atomic_store(&r->unread, 1);
			atomic_store(&r->state, MOQ_AUTH_REQ_DONE);
		}
	}
	pthread_mutex_unlock(&u->mu);
	return NULL;
}

static void enqueue_locked(struct moq_auth_url *u, struct moq_auth_req *r)
{
	r->qnext = NULL;
	if (u->qtail)
		u->qtail->qnext = r;
	else
		u->qhead = r;
	u->qtail = r;
	pthread_cond_signal(&u->cv);
}

static void enqueue(struct moq_auth_url *u, struct moq_auth_req *r)
{
	pthread_mutex_lock(&u->mu);
	enqueue_locked(u, r);
	pthread_mutex_unlock(&u->mu);
}

/* ------------------------------------------------------------- the API */

struct moq_auth_url *moq_auth_url_create(const struct moq_auth_url_cfg *cfg, char *err,
                                         size_t errlen)
{
	struct moq_auth_url *u = calloc(1, sizeof(*u));

	if (!u) {
		fail(err, errlen, "out of memory", NULL);
		return NULL;
	}
	if (!cfg || !cfg->url || parse_url(u, cfg->url, err, errlen) != 0) {
		if (!cfg || !cfg->url)
			fail(err, errlen, "no URL", NULL);
		free(u);
		return NULL;
	}
	u->timeout_ns = cfg->timeout_ns ? cfg->timeout_ns : MOQ_AUTH_URL_TIMEOUT_NS;
	u->clock = cfg->clock ? cfg->clock : realtime_ns;
	u->clock_ctx = cfg->clock_ctx;
	if (cfg->node)
		snprintf(u->node, sizeof(u->node), "%s", cfg->node);
	else if (gethostname(u->node, sizeof(u->node) - 1) != 0)
		snprintf(u->node, sizeof(u->node), "moqdp");
	if (cfg->ca && u->sch != SCH_HTTPS) {
		snprintf(err, errlen, "--auth-tls-root: only for an https:// --auth-url");
		free(u);
		return NULL;
	}
	if (u->sch == SCH_HTTPS) {
		const char *ca = cfg->ca ? cfg->ca : SYSTEM_CA;
		wolfSSL_Init();
		u->tls = wolfSSL_CTX_new(wolfSSLv23_client_method());
		if (!u->tls ||
		    wolfSSL_CTX_load_verify_locations(u->tls, ca, NULL) != WOLFSSL_SUCCESS) {
			snprintf(err, errlen, "%s: %s: cannot load the CA certificates",
			         cfg->ca ? "--auth-tls-root" : "--auth-url", ca);
			if (u->tls)
				wolfSSL_CTX_free(u->tls);
			free(u);
			return NULL;
		}
		wolfSSL_CTX_set_verify(u->tls, WOLFSSL_VERIFY_PEER, NULL);
	}
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	for (; u->nth < MOQ_AUTH_URL_THREADS; u->nth++)
		if (pthread_create(&u->th[u->nth], NULL, thread_main, u) != 0)
			break;
	if (!u->nth) {
		snprintf(err, errlen, "--auth-url: cannot start a thread");
		moq_auth_url_destroy(u);
		return NULL;
	}
	return u;
}

void moq_auth_url_destroy(struct moq_auth_url *u)
{
	if (!u)
		return;
	pthread_mutex_lock(&u->mu);
	u->stop = 1;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	for (unsigned i = 0; i < u->nth; i++)
		pthread_join(u->th[i], NULL);
	/* ends not yet sent are freed here; other requests belong to their
	 * sessions */
	while (u->qhead) {
		struct moq_auth_req *r = u->qhead;
		u->qhead = r->qnext;
		if (r->ev == EV_END || r->end_after)
			req_free(r);
		else
			atomic_store(&r->state, MOQ_AUTH_REQ_DONE);
	}
	if (u->tls)
		wolfSSL_CTX_free(u->tls);
	pthread_mutex_destroy(&u->mu);
	pthread_cond_destroy(&u->cv);
	free(u);
}

/* RFC 4648, 5, without padding (request.rs: Base64<UrlSafe, Unpadded>) */
static char *b64url(const char *in, size_t n)
{
	static const char t[] =
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const uint8_t *p = (const uint8_t *)in;
	char *o = malloc(n / 3 * 4 + 5), *q = o;

	if (!o)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
		             (i + 2 < n ? p[i + 2] : 0);
		*q++ = t[v >> 18 & 63];
		*q++ = t[v >> 12 & 63];
		if (i + 1 < n)
			*q++ = t[v >> 6 & 63];
		if (i + 2 < n)
			*q++ = t[v & 63];
	}
	*q = 0;
	return o;
}

static char *dup_opt(const char *s, bool *fail_)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*fail_ = true;
	return d;
}

struct moq_auth_req *moq_auth_url_connect(struct moq_auth_url *u,
                                          const struct moq_auth_url_info *info)
{
	struct moq_auth_req *r = calloc(1, sizeof(*r));
	uint8_t rnd[16];
	bool bad = false;
	FILE *f;

	if (!r)
		return NULL;
	r->u = u;
	/* request.rs: "Random 128-bit hex, unique per session" */
	f = fopen("/dev/urandom", "rb");
	if (!f || fread(rnd, 1, sizeof(rnd), f) != sizeof(rnd)) {
		uint64_t t = mono_ns() ^ (uintptr_t)r;
		for (int i = 0; i < 16; i++)
			rnd[i] = (uint8_t)(t >> ((i % 8) * 8)) ^ (uint8_t)i;
	}
	if (f)
		fclose(f);
	for (int i = 0; i < 16; i++)
		snprintf(r->id + 2 * i, 3, "%02x", rnd[i]);
	r->transport = dup_opt(info->transport, &bad);
	r->remote = dup_opt(info->remote, &bad);
	r->local = dup_opt(info->local, &bad);
	r->server_name = dup_opt(info->server_name, &bad);
	r->alpn = dup_opt(info->alpn, &bad);
	r->path = dup_opt(info->path ? info->path : "", &bad);
	r->query = dup_opt(info->query, &bad);
	r->role = dup_opt(info->role, &bad);
	if (info->token) {
		r->token = b64url(info->token, info->token_len);
		bad = bad || !r->token;
	}
	if (bad) {
		req_free(r);
		return NULL;
	}
	r->ev = EV_CONNECT;
	atomic_store(&r->state, MOQ_AUTH_REQ_PENDING);
	enqueue(u, r);
	return r;
}

int moq_auth_req_poll(struct moq_auth_req *r, int *fresh, struct moq_auth_grant **grant,
                      int *result, char *why, size_t whylen)
{
	*fresh = 0;
	*grant = NULL;
	if (atomic_load(&r->state) == MOQ_AUTH_REQ_PENDING)
		return MOQ_AUTH_REQ_PENDING;
	if (atomic_exchange(&r->unread, 0)) {
		*fresh = 1;
		*grant = r->grant;
		r->grant = NULL;
		*result = r->result;
		if (why && whylen)
			snprintf(why, whylen, "%s", r->why);
	}
	return 0;
}

uint64_t moq_auth_req_revalidate_ns(const struct moq_auth_req *r)
{
	return r->revalidate_ns;
}

bool moq_auth_req_peer(const struct moq_auth_req *r)
{
	return r->peer;
}

const char *moq_auth_req_id(const struct moq_auth_req *r)
{
	return r->id;
}

void moq_auth_req_revalidate(struct moq_auth_req *r)
{
	if (atomic_load(&r->state) == MOQ_AUTH_REQ_PENDING || atomic_load(&r->unread))
		return;
	r->ev = EV_REVALIDATE;
	atomic_store(&r->state, MOQ_AUTH_REQ_PENDING);
	enqueue(r->u, r);
}

void moq_auth_req_end(struct moq_auth_req *r, const char *reason, uint64_t sent, uint64_t received,
                      uint64_t duration_ns)
{
	struct moq_auth_url *u;

	if (!r)
		return;
	u = r->u;
	pthread_mutex_lock(&u->mu);
	snprintf(r->reason, sizeof(r->reason), "%s", reason ? reason : "disconnected");
	r->sent = sent;
	r->received = received;
	r->duration_ns = duration_ns;
	if (atomic_load(&r->state) == MOQ_AUTH_REQ_PENDING) {
		/* an event is queued or out: the thread serving it sends the
		 * end after it (never wait here: this is a worker) */
		r->end_after = 1;
	} else {
		moq_auth_grant_free(r->grant);
		r->grant = NULL;
		r->ev = EV_END;
		enqueue_locked(u, r);
	}
	pthread_mutex_unlock(&u->mu);
}

void moq_auth_url_get_stats(const struct moq_auth_url *u, struct moq_auth_url_stats *out)
{
	struct moq_auth_url *m = (struct moq_auth_url *)u;

	out->requests = atomic_load(&m->requests);
	out->admitted = atomic_load(&m->admitted);
	out->refused = atomic_load(&m->refused);
	out->unavailable = atomic_load(&m->unavailable);
}
