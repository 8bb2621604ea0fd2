/* SPDX-License-Identifier: MIT */
/*
 * test_web_http.c: the HTTP listener (web/http.c) against a real socket on
 * loopback: a relay node with a cache and broadcasts published on it, auth
 * with an HS256 key and public prefixes, and a plain TCP client in the test.
 * Issue 22: /announced and /fetch apply the token's `get` grants as MoQ
 * sessions do (items 4), /fetch streams any frame size and ends a cut-short
 * body without the chunked terminator, /announced has no silent cut (item
 * 5), and a reader that stops reading is closed after the write deadline,
 * concurrent /fetch pins are bounded (item 9).
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/hmac.h>

#include "auth.h"
#include "cache.h"
#include "link.h"
#include "moq.h"
#include "web.h"

#define MS 1000000ull

static const char secret[] = "0123456789abcdef0123456789abcdef-moqdp-web";

static struct {
	struct moq_cache_counting cnt;
	struct moq_cache *cache;
	struct moq_node *node;
	struct moq_auth *auth;
	struct moq_web *web;
	char dir[64];
	unsigned port;
	struct moq_quic_link *lnk; /* pub_up: the relay's node is polled there */
} E;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static size_t b64u(const uint8_t *in, size_t len, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0;

	for (size_t i = 0; i < len; i++) {
		acc = acc << 8 | in[i];
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

/* An HS256 token over @claims (JSON). */
static const char *token(const char *claims)
{
	static char tok[2048];
	static const char hdr[] = "{\"typ\":\"JWT\",\"alg\":\"HS256\"}";
	uint8_t mac[32];
	Hmac h;
	size_t n = b64u((const uint8_t *)hdr, strlen(hdr), tok);

	tok[n++] = '.';
	n += b64u((const uint8_t *)claims, strlen(claims), tok + n);
	ck_assert_int_eq(wc_HmacInit(&h, NULL, INVALID_DEVID), 0);
	ck_assert_int_eq(
	        wc_HmacSetKey(&h, WC_SHA256, (const uint8_t *)secret, (word32)strlen(secret)), 0);
	ck_assert_int_eq(wc_HmacUpdate(&h, (const uint8_t *)tok, (word32)n), 0);
	ck_assert_int_eq(wc_HmacFinal(&h, mac), 0);
	wc_HmacFree(&h);
	tok[n++] = '.';
	b64u(mac, sizeof(mac), tok + n);
	return tok;
}

/* The node, the cache, auth (a key and public prefix "pub") and the
 * listener on 127.0.0.1, an ephemeral port. */
static void env_up(const struct moq_web_cfg *tweak)
{
	struct moq_cache_cfg cc = {0};
	struct moq_node_cfg nc = {0};
	struct moq_auth_cfg ac = {0};
	struct moq_web_cfg wc;
	struct sockaddr_in sa;
	char err[256] = "", path[128], k[128], jwk[256];
	FILE *f;

	memset(&E, 0, sizeof(E));
	moq_cache_counting_init(&E.cnt);
	cc.alloc = moq_cache_counting_alloc(&E.cnt);
	E.cache = moq_cache_create(&cc);
	ck_assert_ptr_nonnull(E.cache);
	nc.cache = E.cache;
	nc.relay = 1;
	nc.origin = 77;
	E.node = moq_node_create(&nc);
	ck_assert_ptr_nonnull(E.node);
	snprintf(E.dir, sizeof(E.dir), "/tmp/moqdp-test-web-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(E.dir));
	snprintf(path, sizeof(path), "%s/key.jwk", E.dir);
	b64u((const uint8_t *)secret, strlen(secret), k);
	snprintf(jwk, sizeof(jwk), "{\"kty\":\"oct\",\"alg\":\"HS256\",\"k\":\"%s\"}", k);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(jwk, f);
	fclose(f);
	ac.key = path;
	ac.public_prefixes = "pub";
	E.auth = moq_auth_create(&ac, err, sizeof(err));
	ck_assert_msg(E.auth != NULL, "%s", err);
	if (tweak)
		wc = *tweak;
	else
		memset(&wc, 0, sizeof(wc));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	wc.node = E.node;
	wc.cache = E.cache;
	wc.auth = E.auth;
	wc.addr[0] = (const struct sockaddr *)&sa;
	wc.addrlen[0] = sizeof(sa);
	wc.naddr = 1;
	E.web = moq_web_create(&wc, err, sizeof(err));
	ck_assert_msg(E.web != NULL, "%s", err);
	E.port = moq_web_port(E.web);
	ck_assert_uint_gt(E.port, 0);
}

static void env_down(void)
{
	char cmd[128];

	moq_web_destroy(E.web);
	moq_node_destroy(E.node);
	moq_cache_destroy(E.cache);
	moq_auth_destroy(E.auth);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", E.dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void poll_some(void)
{
	uint64_t t = now_ns();

	if (E.lnk == NULL)
		moq_node_poll(E.node, t);
	moq_web_poll(E.web, t);
}

/* The payload byte @i of frame @f. */
static uint8_t pat(unsigned f, size_t i)
{
	return (uint8_t)(i * 31 + f * 7 + 1);
}

/* Broadcast @bc published on the node with track "video": group 0 of
 * frames @sizes (@n), finished when @finish; the group stays open (its
 * reference in *@open) otherwise. */
static void publish(const char *bc, const size_t *sizes, unsigned n, int finish,
                    struct moq_cache_group **open)
{
	struct moq_cache_track *t;
	struct moq_cache_group *g;

	ck_assert_int_eq(moq_cache_track_create(E.cache, bc, strlen(bc), "video", 5, NULL, &t), 0);
	ck_assert_int_eq(moq_cache_group_open(t, 0, now_ns(), &g), 0);
	for (unsigned f = 0; f < n; f++) {
		uint8_t *p = malloc(sizes[f]);

		ck_assert_ptr_nonnull(p);
		for (size_t i = 0; i < sizes[f]; i++)
			p[i] = pat(f, i);
		ck_assert_int_eq(moq_cache_write_frame(g, (int64_t)f, p, sizes[f]), 0);
		free(p);
	}
	if (finish) {
		ck_assert_int_eq(moq_cache_group_finish(g), 0);
		moq_cache_group_unref(g);
	} else {
		*open = g;
	}
	moq_cache_track_unref(t);
	ck_assert_int_eq(moq_node_publish(E.node, bc, strlen(bc), 1000), 0);
}

/* One client connection. */
struct cl {
	int fd, eof;
	char *buf;
	size_t len, cap;
};

/* A connection that sends the raw request @req. */
static void cl_open_req(struct cl *c, const char *req, int rcvbuf)
{
	struct sockaddr_in sa;
	int n = (int)strlen(req);

	memset(c, 0, sizeof(*c));
	c->cap = 16u << 20;
	c->buf = malloc(c->cap + 1);
	ck_assert_ptr_nonnull(c->buf);
	c->buf[0] = 0;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ck_assert_int_ge(c->fd, 0);
	if (rcvbuf > 0)
		setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)E.port);
	ck_assert(connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS);
	for (int i = 0; i < 1000; i++) {
		poll_some();
		if (send(c->fd, req, (size_t)n, MSG_NOSIGNAL) == n)
			return;
		usleep(1000);
	}
	ck_abort_msg("cannot send the request");
}

static void cl_open(struct cl *c, const char *target, int rcvbuf)
{
	char req[4096 + 64]; /* a target of the callers' 4096-byte buffers */

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target);
	cl_open_req(c, req, rcvbuf);
}

/* Read what is there (the listener polled first). */
static void cl_read(struct cl *c)
{
	poll_some();
	while (!c->eof && c->len < c->cap) {
		ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);

		if (r > 0) {
			c->len += (size_t)r;
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			c->eof = 1;
		break;
	}
	c->buf[c->len] = 0;
}

/* Until the relay closes the connection (at most @ms). */
static void cl_wait(struct cl *c, unsigned ms)
{
	uint64_t end = now_ns() + ms * MS;

	while (!c->eof && now_ns() < end) {
		cl_read(c);
		usleep(200);
	}
	ck_assert_msg(c->eof, "the response did not end");
}

static void cl_close(struct cl *c)
{
	close(c->fd);
	free(c->buf);
	for (int i = 0; i < 5; i++)
		poll_some();
}

static int status(const struct cl *c)
{
	return c->len >= 12 && memcmp(c->buf, "HTTP/1.1 ", 9) == 0 ? atoi(c->buf + 9) : -1;
}

static const char *body_at(const struct cl *c)
{
	const char *e = strstr(c->buf, "\r\n\r\n");

	ck_assert_ptr_nonnull(e);
	return e + 4;
}

static int has_header(const struct cl *c, const char *h)
{
	const char *e = strstr(c->buf, "\r\n\r\n");
	const char *p = strcasestr(c->buf, h);

	return p != NULL && p < e;
}

/* The body, de-chunked into @out (*@n bytes). Returns 1 when it ended with
 * the terminating chunk, 0 when cut short. */
static int dechunk(const struct cl *c, uint8_t *out, size_t *n)
{
	const char *p = body_at(c), *end = c->buf + c->len;

	*n = 0;
	if (!has_header(c, "\r\nTransfer-Encoding: chunked\r\n")) {
		/* not chunked: whole when the Content-Length says so */
		const char *cl = strcasestr(c->buf, "\r\nContent-Length: ");

		*n = (size_t)(end - p);
		memcpy(out, p, *n);
		return cl != NULL && cl < p && strtoul(cl + 18, NULL, 10) == *n;
	}
	for (;;) {
		char *e;
		unsigned long l;

		if (p >= end || memchr(p, '\n', (size_t)(end - p)) == NULL)
			return 0;
		l = strtoul(p, &e, 16);
		ck_assert(e[0] == '\r' && e[1] == '\n');
		p = e + 2;
		if (l == 0)
			return end - p == 2 && p[0] == '\r' && p[1] == '\n';
		if ((size_t)(end - p) < l + 2) {
			memcpy(out + *n, p, (size_t)(end - p));
			*n += (size_t)(end - p);
			return 0;
		}
		memcpy(out + *n, p, l);
		*n += l;
		p += l;
		ck_assert(p[0] == '\r' && p[1] == '\n');
		p += 2;
	}
}

/* GET @target whole: the client connection, ended. */
static void get(struct cl *c, const char *target)
{
	cl_open(c, target, 0);
	cl_wait(c, 5000);
}

/* The /announced body's lines, as one string "a b c" (sorted by the node's
 * order, as sent). */
static void ann_lines(const struct cl *c, char *out, size_t cap)
{
	static uint8_t b[1 << 20];
	size_t n, o = 0;

	ck_assert_int_eq(dechunk(c, b, &n), 1);
	for (size_t i = 0; i < n && o + 1 < cap; i++)
		out[o++] = b[i] == '\n' ? ' ' : (char)b[i];
	out[o] = 0;
}

static const size_t one[] = {1000};

static void three_broadcasts(void)
{
	publish("room1/cam", one, 1, 1, NULL);
	publish("room2/secret", one, 1, 1, NULL);
	publish("pub/open", one, 1, 1, NULL);
}

static int contains_word(const char *s, const char *w)
{
	size_t l = strlen(w);

	for (const char *p = strstr(s, w); p; p = strstr(p + 1, w))
		if ((p == s || p[-1] == ' ') && (p[l] == ' ' || p[l] == 0))
			return 1;
	return 0;
}

/* issue 22, item 4: /announced lists what the token may get, no more. */
START_TEST(announced_applies_get_grants)
{
	struct cl c;
	char t[4096], lines[4096];

	env_up(NULL);
	three_broadcasts();
	/* a token rooted at room1 that may get everything under it */
	snprintf(t, sizeof(t), "/announced/?jwt=%s", token("{\"root\":\"room1\",\"get\":[\"\"]}"));
	get(&c, t);
	ck_assert_int_eq(status(&c), 200);
	ann_lines(&c, lines, sizeof(lines));
	ck_assert_msg(contains_word(lines, "room1/cam"), "%s", lines);
	ck_assert_msg(!contains_word(lines, "room2/secret"), "%s", lines);
	ck_assert_msg(!contains_word(lines, "pub/open"), "%s", lines);
	/* an answer to a token is not for other origins' pages */
	ck_assert(!has_header(&c, "Access-Control-Allow-Origin"));
	cl_close(&c);
	/* anonymous, with a public prefix: the public broadcasts only */
	get(&c, "/announced/");
	ck_assert_int_eq(status(&c), 200);
	ann_lines(&c, lines, sizeof(lines));
	ck_assert_msg(contains_word(lines, "pub/open"), "%s", lines);
	ck_assert_msg(!contains_word(lines, "room1/cam"), "%s", lines);
	ck_assert_msg(!contains_word(lines, "room2/secret"), "%s", lines);
	ck_assert(has_header(&c, "\r\nAccess-Control-Allow-Origin: *\r\n"));
	cl_close(&c);
	/* anonymous under a private prefix: refused */
	get(&c, "/announced/room2");
	ck_assert_int_eq(status(&c), 401);
	cl_close(&c);
	/* a put-only token may not list */
	snprintf(t, sizeof(t), "/announced/?jwt=%s", token("{\"put\":[\"room2\"]}"));
	get(&c, t);
	ck_assert_int_eq(status(&c), 401);
	cl_close(&c);
	/* a token rooted at "" with get on room2: room2/secret only */
	snprintf(t, sizeof(t), "/announced/?jwt=%s", token("{\"get\":[\"room2\"]}"));
	get(&c, t);
	ck_assert_int_eq(status(&c), 200);
	ann_lines(&c, lines, sizeof(lines));
	ck_assert_msg(contains_word(lines, "room2/secret"), "%s", lines);
	ck_assert_msg(!contains_word(lines, "room1/cam"), "%s", lines);
	cl_close(&c);
	env_down();
}
END_TEST

/* issue 22, item 4: /fetch needs `get` on the broadcast. */
START_TEST(fetch_applies_get_grants)
{
	static uint8_t b[1 << 20];
	struct cl c;
	char t[4096];
	size_t n;

	env_up(NULL);
	three_broadcasts();
	snprintf(t, sizeof(t), "/fetch/room2/secret/video?group=0&jwt=%s",
	         token("{\"put\":[\"room2\"]}"));
	get(&c, t);
	ck_assert_int_eq(status(&c), 401);
	ck_assert_ptr_null(memmem(c.buf, c.len, "\x01\x08", 2)); /* no media */
	cl_close(&c);
	get(&c, "/fetch/room2/secret/video?group=0");
	ck_assert_int_eq(status(&c), 401);
	cl_close(&c);
	snprintf(t, sizeof(t), "/fetch/room2/secret/video?group=0&jwt=%s",
	         token("{\"root\":\"room1\",\"get\":[\"\"]}"));
	get(&c, t);
	ck_assert_int_eq(status(&c), 401);
	cl_close(&c);
	snprintf(t, sizeof(t), "/fetch/room2/secret/video?group=0&jwt=%s",
	         token("{\"get\":[\"room2\"]}"));
	get(&c, t);
	ck_assert_int_eq(status(&c), 200);
	ck_assert_int_eq(dechunk(&c, b, &n), 1);
	ck_assert_uint_eq(n, 1000);
	cl_close(&c);
	get(&c, "/fetch/pub/open/video?group=0");
	ck_assert_int_eq(status(&c), 200);
	ck_assert_int_eq(dechunk(&c, b, &n), 1);
	ck_assert_uint_eq(n, 1000);
	cl_close(&c);
	env_down();
}
END_TEST

static void check_frames(const uint8_t *b, size_t n, const size_t *sizes, unsigned nf)
{
	size_t o = 0;

	for (unsigned f = 0; f < nf; f++)
		for (size_t i = 0; i < sizes[f]; i++, o++) {
			ck_assert_uint_lt(o, n);
			ck_assert_msg(b[o] == pat(f, i), "frame %u byte %zu", f, i);
		}
	ck_assert_uint_eq(o, n);
}

/* issue 22, item 5: frames of any size arrive whole, the body ends with the
 * terminating chunk. */
START_TEST(fetch_streams_any_frame_size)
{
	static const size_t s1[] = {50000, 100000, 1000};
	static const size_t s2[] = {238000};
	uint8_t *b = malloc(8u << 20);
	struct cl c;
	size_t n;

	env_up(NULL);
	publish("pub/a", s1, 3, 1, NULL);
	publish("pub/b", s2, 1, 1, NULL);
	get(&c, "/fetch/pub/a/video?group=0");
	ck_assert_int_eq(status(&c), 200);
	ck_assert_int_eq(dechunk(&c, b, &n), 1);
	check_frames(b, n, s1, 3);
	cl_close(&c);
	get(&c, "/fetch/pub/b/video?group=latest");
	ck_assert_int_eq(status(&c), 200);
	ck_assert_int_eq(dechunk(&c, b, &n), 1);
	check_frames(b, n, s2, 1);
	cl_close(&c);
	free(b);
	env_down();
}
END_TEST

/* issue 22: ?group=N older than the first group the cache holds (a
 * track whose upstream subscription started at group 5): 404 saying so, as
 * moq-relay answers a group its track does not hold; group 5 is served. */
START_TEST(fetch_group_older_than_start)
{
	static const uint8_t frame[] = "five";
	struct moq_cache_track *t;
	struct moq_cache_group *g;
	struct cl c;

	env_up(NULL);
	ck_assert_int_eq(moq_cache_track_create(E.cache, "pub/late", 8, "video", 5, NULL, &t), 0);
	ck_assert_int_eq(moq_cache_group_open(t, 5, now_ns(), &g), 0);
	ck_assert_int_eq(moq_cache_write_frame(g, 0, frame, 4), 0);
	ck_assert_int_eq(moq_cache_group_finish(g), 0);
	moq_cache_group_unref(g);
	moq_cache_track_unref(t);
	ck_assert_int_eq(moq_node_publish(E.node, "pub/late", 8, 1000), 0);
	get(&c, "/fetch/pub/late/video?group=2");
	ck_assert_int_eq(status(&c), 404);
	ck_assert_ptr_nonnull(strstr(c.buf, "no such group in this relay's cache"));
	cl_close(&c);
	get(&c, "/fetch/pub/late/video?group=5");
	ck_assert_int_eq(status(&c), 200);
	ck_assert_ptr_nonnull(strstr(c.buf, "five"));
	cl_close(&c);
	env_down();
}
END_TEST

/* issue 22, item 5: a group that ends without finishing (aborted by its
 * publisher) ends the body without the terminating chunk. */
START_TEST(fetch_cut_short_has_no_terminator)
{
	static const size_t s[] = {3000};
	uint8_t *b = malloc(1 << 20);
	struct moq_cache_group *g = NULL;
	struct cl c;
	size_t n;

	env_up(NULL);
	publish("pub/live", s, 1, 0, &g);
	cl_open(&c, "/fetch/pub/live/video?group=0", 0);
	for (int i = 0; i < 200 && c.len < 3000; i++) {
		cl_read(&c);
		usleep(1000);
	}
	ck_assert_int_eq(c.eof, 0); /* open group: the body goes on */
	ck_assert_int_eq(dechunk(&c, b, &n), 0);
	ck_assert_uint_eq(n, 3000);
	ck_assert_int_eq(moq_cache_group_abort(g), 0);
	moq_cache_group_unref(g);
	cl_wait(&c, 5000);
	ck_assert_int_eq(dechunk(&c, b, &n), 0);
	ck_assert_uint_eq(n, 3000);
	cl_close(&c);
	free(b);
	env_down();
}
END_TEST

/* issue 22, item 5: /announced has no ~64 KiB cut: 800 names of ~100
 * bytes all arrive, and the list ends with the terminating chunk. */
START_TEST(announced_lists_past_64k)
{
	char name[160];
	char *lines = malloc(1 << 20);
	struct cl c;
	unsigned count = 0;

	env_up(NULL);
	for (unsigned i = 0; i < 800; i++) {
		snprintf(name, sizeof(name), "pub/%04u-%0100u", i, i);
		ck_assert_int_eq(moq_node_publish(E.node, name, strlen(name), 1000), 0);
	}
	get(&c, "/announced/pub");
	ck_assert_int_eq(status(&c), 200);
	ann_lines(&c, lines, 1 << 20);
	for (char *p = lines; (p = strchr(p, '-')) != NULL; p++)
		count++;
	ck_assert_uint_eq(count, 800);
	cl_close(&c);
	free(lines);
	env_down();
}
END_TEST

/* issue 22, item 9: a /fetch reader that stops reading is closed after the
 * write deadline (counted); /fetch pins are bounded per listener. */
START_TEST(slow_reader_closed_and_fetch_bounded)
{
	static const size_t s[] = {1u << 20, 1u << 20, 1u << 20, 1u << 20,
	                           1u << 20, 1u << 20, 1u << 20, 1u << 20};
	struct moq_web_cfg wc;
	struct moq_web_stats st;
	struct cl c, d, e;
	uint64_t t0;

	memset(&wc, 0, sizeof(wc));
	wc.write_timeout_ns = 1500 * MS;
	wc.max_fetches = 1;
	env_up(&wc);
	publish("pub/big", s, 8, 1, NULL);
	publish("pub/small", one, 1, 1, NULL);
	/* a reader that reads nothing (a small receive buffer) */
	t0 = now_ns();
	cl_open(&c, "/fetch/pub/big/video?group=0", 4096);
	for (int i = 0; i < 50; i++) {
		poll_some();
		usleep(1000);
	}
	/* the one pin is taken: a second /fetch is refused at once */
	get(&d, "/fetch/pub/big/video?group=0");
	ck_assert_int_eq(status(&d), 503);
	cl_close(&d);
	/* the slow one goes after the deadline, counted */
	for (;;) {
		moq_web_stats(E.web, &st);
		if (st.closes_slow > 0 || now_ns() - t0 > 15000 * MS)
			break;
		poll_some();
		usleep(2000);
	}
	ck_assert_uint_eq(st.closes_slow, 1);
	ck_assert_uint_ge(now_ns() - t0, 1500 * MS);
	ck_assert_uint_eq(st.fetches, 0);
	cl_close(&c);
	/* the pin is free again: a reader that reads gets everything */
	get(&e, "/health");
	ck_assert_int_eq(status(&e), 200);
	cl_close(&e);
	cl_open(&e, "/fetch/pub/small/video?group=0", 0);
	cl_wait(&e, 10000);
	ck_assert_int_eq(status(&e), 200);
	{
		uint8_t b[2000];
		size_t n;

		ck_assert_int_eq(dechunk(&e, b, &n), 1);
		check_frames(b, n, one, 1);
	}
	cl_close(&e);
	env_down();
}
END_TEST

/* A MoQ publisher on its own node (its own cache), connected to the relay's
 * node over an in-memory QUIC link (virtual time): it announces pub/up with
 * track "video" and writes a finished group of frames @sizes every 300 ms. */
static struct {
	struct moq_cache_counting cnt;
	struct moq_cache *cache;
	struct moq_node *node;
	struct moq_quic_endpoint *rep, *cep;
	struct moq_cache_track *vt;
	uint64_t seq, next;
} P;

static void pub_up(void)
{
	struct moq_cache_cfg cc = {0};
	struct moq_node_cfg nc = {0};
	struct moq_quic_config q = {0};
	struct moq_quic_link_config lc = {0};
	struct moq_quic_addr la, ra;
	size_t nalpn;
	int err = 0;

	memset(&P, 0, sizeof(P));
	moq_cache_counting_init(&P.cnt);
	cc.alloc = moq_cache_counting_alloc(&P.cnt);
	P.cache = moq_cache_create(&cc);
	ck_assert_ptr_nonnull(P.cache);
	nc.cache = P.cache;
	nc.origin = 2000;
	P.node = moq_node_create(&nc);
	ck_assert_ptr_nonnull(P.node);
	q.role = MOQ_QUIC_SERVER;
	q.worker_id = 1;
	q.alpn = moq_node_alpns(&nalpn);
	q.alpn_count = nalpn;
	q.retry = MOQ_QUIC_RETRY_NEVER;
	q.max_conns = q.max_conns_per_addr = q.max_half_open = 16;
	q.max_streams_uni = 1000;
	q.cb = moq_node_quic_callbacks();
	q.user = E.node;
	P.rep = moq_quic_endpoint_new(&q, &err);
	ck_assert_msg(P.rep != NULL, "relay endpoint: %s", moq_err_str(err));
	q.role = MOQ_QUIC_CLIENT;
	q.worker_id = 2;
	q.user = P.node;
	P.cep = moq_quic_endpoint_new(&q, &err);
	ck_assert_msg(P.cep != NULL, "client endpoint: %s", moq_err_str(err));
	lc.dir[0].delay_ns = lc.dir[1].delay_ns = 1 * MS;
	lc.max_queue = 1 << 16;
	lc.seed = 7;
	E.lnk = moq_quic_link_new(&lc, P.cep, P.rep);
	ck_assert_ptr_nonnull(E.lnk);
	moq_quic_addr_ip4("10.0.0.1", 20000, &la);
	moq_quic_addr_ip4("10.0.0.2", 4443, &ra);
	ck_assert_ptr_nonnull(moq_node_connect(P.node, P.cep, &la, &ra, NULL, MOQ_ROLE_PUBLISHER,
	                                       NULL, moq_quic_link_now(E.lnk), &err));
	ck_assert_int_eq(moq_cache_track_create(P.cache, "pub/up", 6, "video", 5, NULL, &P.vt), 0);
	ck_assert_int_eq(moq_node_publish(P.node, "pub/up", 6, 1000), 0);
}

static void pub_down(void)
{
	moq_cache_track_unref(P.vt);
	moq_quic_endpoint_free(P.cep);
	moq_quic_endpoint_free(P.rep);
	moq_quic_link_free(E.lnk);
	E.lnk = NULL;
	moq_node_destroy(P.node);
	moq_cache_destroy(P.cache);
}

/* 2 ms of virtual time: the publisher's groups, both nodes, the link. */
static void pub_run(const size_t *sizes, unsigned nf)
{
	uint64_t t = moq_quic_link_now(E.lnk);

	if (t >= P.next) {
		struct moq_cache_group *g;

		ck_assert_int_eq(moq_cache_group_open(P.vt, P.seq++, t, &g), 0);
		for (unsigned f = 0; f < nf; f++) {
			uint8_t *p = malloc(sizes[f]);

			ck_assert_ptr_nonnull(p);
			for (size_t i = 0; i < sizes[f]; i++)
				p[i] = pat(f, i);
			ck_assert_int_eq(moq_cache_write_frame(g, (int64_t)f, p, sizes[f]), 0);
			free(p);
		}
		ck_assert_int_eq(moq_cache_group_finish(g), 0);
		moq_cache_group_unref(g);
		P.next = t + 300 * MS;
	}
	moq_node_poll(P.node, t);
	moq_node_poll(E.node, t);
	moq_quic_link_run(E.lnk, NULL, NULL, 2 * MS);
}

static int pub_announced(void)
{
	struct moq_node_stats st;

	moq_node_stats(E.node, &st);
	return st.broadcasts >= 1;
}

/* issue 22, item 5: /fetch of a track a MoQ publisher announced, with no
 * MoQ subscriber on the relay: the relay subscribes upstream for the fetch
 * and serves the group promptly (not after the 30 s wait), bytes whole. */
START_TEST(fetch_subscribes_upstream)
{
	static const size_t s[] = {3000, 20000, 500};
	uint8_t *b = malloc(1 << 20);
	struct moq_node_stats st;
	struct cl c;
	size_t n;
	uint64_t t0;
	int i;

	env_up(NULL);
	pub_up();
	for (i = 0; i < 1000 && !pub_announced(); i++)
		pub_run(s, 3);
	ck_assert_msg(pub_announced(), "publisher not announced");
	moq_node_stats(E.node, &st);
	ck_assert_uint_eq(st.upstream_subs, 0); /* nobody subscribes yet */
	cl_open(&c, "/fetch/pub/up/video?group=latest", 0);
	/* the listener runs on the real clock, the link on its virtual one:
	 * 2 ms of each per round */
	t0 = now_ns();
	while (!c.eof && now_ns() - t0 < 2000 * MS) {
		pub_run(s, 3);
		cl_read(&c);
		usleep(2000);
	}
	ck_assert_msg(c.eof, "no /fetch answer within 2 s: %.60s", c.buf);
	ck_assert_int_eq(status(&c), 200);
	ck_assert_int_eq(dechunk(&c, b, &n), 1);
	check_frames(b, n, s, 3);
	cl_close(&c);
	/* the fetch's hold is released: the upstream subscription ends */
	for (i = 0; i < 100; i++) {
		pub_run(s, 3);
		poll_some();
	}
	moq_node_stats(E.node, &st);
	ck_assert_uint_eq(st.upstream_subs, 0);
	free(b);
	pub_down();
	env_down();
}
END_TEST

/* --allowed-origins on the WebSocket upgrade, as on a WebTransport
 * CONNECT: an Origin not in the list gets 403 (counted), a listed one
 * (any case, a trailing '/' in the list) and a request without Origin
 * are upgraded. */
static int ws_upgrade_status(const char *origin_line)
{
	struct cl c;
	char req[1024];
	uint64_t end = now_ns() + 2000 * MS;
	int st;

	snprintf(req, sizeof(req),
	         "GET /pub/x HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
	         "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	         "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: qmux-01.moq-lite-05\r\n"
	         "%s\r\n",
	         origin_line);
	cl_open_req(&c, req, 0);
	while (strstr(c.buf, "\r\n\r\n") == NULL && !c.eof && now_ns() < end) {
		cl_read(&c);
		usleep(200);
	}
	st = status(&c);
	cl_close(&c);
	return st;
}

START_TEST(ws_upgrade_applies_allowed_origins)
{
	struct moq_web_cfg wc;
	struct moq_web_stats st;

	memset(&wc, 0, sizeof(wc));
	wc.allowed_origins = "https://app.example.com/, https://example.com:8443";
	env_up(&wc);
	ck_assert_int_eq(ws_upgrade_status("Origin: https://evil.example\r\n"), 403);
	ck_assert_int_eq(ws_upgrade_status("Origin: https://app.example.com.evil\r\n"), 403);
	moq_web_stats(E.web, &st);
	ck_assert_uint_eq(st.refused_origin, 2);
	ck_assert_int_eq(ws_upgrade_status("Origin: https://APP.example.com\r\n"), 101);
	ck_assert_int_eq(ws_upgrade_status("Origin: https://example.com:8443\r\n"), 101);
	ck_assert_int_eq(ws_upgrade_status(""), 101);
	moq_web_stats(E.web, &st);
	ck_assert_uint_eq(st.refused_origin, 2);
	env_down();
	/* no list: every origin */
	env_up(NULL);
	ck_assert_int_eq(ws_upgrade_status("Origin: https://evil.example\r\n"), 101);
	env_down();
}
END_TEST

Suite *web_http_suite(void);

Suite *web_http_suite(void)
{
	Suite *s = suite_create("web_http");
	TCase *t = tcase_create("http");

	tcase_set_timeout(t, 120);
	tcase_add_test(t, announced_applies_get_grants);
	tcase_add_test(t, fetch_applies_get_grants);
	tcase_add_test(t, fetch_streams_any_frame_size);
	tcase_add_test(t, fetch_group_older_than_start);
	tcase_add_test(t, fetch_cut_short_has_no_terminator);
	tcase_add_test(t, announced_lists_past_64k);
	tcase_add_test(t, slow_reader_closed_and_fetch_bounded);
	tcase_add_test(t, fetch_subscribes_upstream);
	tcase_add_test(t, ws_upgrade_applies_allowed_origins);
	suite_add_tcase(s, t);
	return s;
}
