/* SPDX-License-Identifier: MIT */
/*
 * test_auth_url.c: the --auth-url client (auth/authurl.h) against a real
 * auth server of the test's own (tests/auth_server.py: python3 http.server
 * on loopback, on a unix socket, and behind TLS with a certificate made
 * here by openssl): admit, refuse, malformed, a grant naming nothing, an
 * expired or unbounded one, 5xx, a slow server (the deadline), a server
 * that is down, revalidate narrowing and widening, end, and the request
 * JSON moq-relay's contract names (rs/moq-auth/src/request.rs).
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "auth.h"
#include "authurl.h"
#include "proc.h"

#ifndef AUTH_SERVER
#error "AUTH_SERVER must name tests/auth_server.py"
#endif

static char dir[64], logp[128];
static pid_t srv = -1;
static char port[16];

/* Start the server with @extra arguments; its port (or socket) in port. */
static void server_start(const char *const *extra)
{
	const char *args[16] = {AUTH_SERVER, "--log", logp};
	char out[160];
	int n = 3;
	uint64_t t0 = proc_now_ms();

	for (; extra && *extra; extra++)
		args[n++] = *extra;
	args[n] = NULL;
	snprintf(out, sizeof(out), "%s/server.out", dir);
	srv = proc_spawn("python3", args, NULL, out, NULL);
	ck_assert_int_gt(srv, 0);
	for (;;) {
		char *s = proc_slurp(out);
		if (sscanf(s, "listening %15s", port) == 1)
			return;
		ck_assert_msg(proc_now_ms() - t0 < 10000, "auth_server.py did not start");
		usleep(20000);
	}
}

static void server_stop(void)
{
	if (srv > 0) {
		kill(srv, SIGTERM);
		proc_wait(srv, 5000);
	}
	srv = -1;
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/moqdp-test-authurl-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(logp, sizeof(logp), "%s/requests.log", dir);
}

static void teardown(void)
{
	server_stop();
	proc_sh("rm -rf %s", dir);
}

static struct moq_auth_url *client(const char *url, const char *ca, uint64_t timeout_ns)
{
	char err[256] = "";
	struct moq_auth_url_cfg c = {
	        .url = url, .ca = ca, .node = "relay-1", .timeout_ns = timeout_ns};
	struct moq_auth_url *u = moq_auth_url_create(&c, err, sizeof(err));

	ck_assert_msg(u != NULL, "%s", err);
	return u;
}

struct answer {
	int result;
	struct moq_auth_grant *g;
	char why[256];
	uint64_t ms; /* from the request to the answer */
};

/* Wait (<= 20 s) for @r's answer. */
static struct answer wait_answer(struct moq_auth_req *r)
{
	struct answer a = {0};
	uint64_t t0 = proc_now_ms();
	int fresh = 0;

	for (;;) {
		int st = moq_auth_req_poll(r, &fresh, &a.g, &a.result, a.why, sizeof(a.why));
		if (st == 0 && fresh)
			break;
		ck_assert_msg(proc_now_ms() - t0 < 20000, "no answer in 20 s");
		usleep(2000);
	}
	a.ms = proc_now_ms() - t0;
	return a;
}

static struct moq_auth_req *connect_at(struct moq_auth_url *u, const char *path)
{
	struct moq_auth_url_info info = {.transport = "quic",
	                                 .remote = "127.0.0.1:40000",
	                                 .local = "127.0.0.1:4443",
	                                 .server_name = "relay.test",
	                                 .alpn = "moq-lite-05",
	                                 .path = path,
	                                 .query = "jwt=abc&x=1",
	                                 .role = "subscriber"};
	struct moq_auth_req *r = moq_auth_url_connect(u, &info);

	ck_assert_ptr_nonnull(r);
	return r;
}

/* The last request the server logged whose event is @ev. */
static json_t *logged(const char *ev)
{
	char *s = proc_slurp(logp), *line, *save = NULL;
	json_t *last = NULL;

	for (line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *o = json_loads(line, 0, NULL);
		if (o && strcmp(json_string_value(json_object_get(o, "event")) ?: "", ev) == 0) {
			json_decref(last);
			last = o;
		} else {
			json_decref(o);
		}
	}
	return last;
}

static const char *jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k)) ?: "(absent)";
}

static struct moq_auth_url *http_client(uint64_t timeout_ns)
{
	char url[64];

	snprintf(url, sizeof(url), "http://127.0.0.1:%s/auth", port);
	return client(url, NULL, timeout_ns);
}

START_TEST(test_admit_and_request)
{
	struct moq_auth_url *u;
	struct moq_auth_req *r;
	struct answer a;
	json_t *o;

	server_start(NULL);
	u = http_client(0);
	r = connect_at(u, "/admit/room");
	a = wait_answer(r);
	ck_assert_msg(a.result == MOQ_AUTH_OK && a.g, "%d %s", a.result, a.why);
	ck_assert_str_eq(a.g->root, "admit/room");
	ck_assert(moq_auth_grant_allows(a.g, 1, "admit/room/x", 12));
	ck_assert(moq_auth_grant_allows(a.g, 0, "admit/room", 10));
	ck_assert(!moq_auth_grant_allows(a.g, 0, "other", 5));
	moq_auth_grant_free(a.g);
	/* request.rs: the request, field by field */
	o = logged("connect");
	ck_assert_ptr_nonnull(o);
	ck_assert_str_eq(jstr(o, "id"), moq_auth_req_id(r));
	ck_assert_int_eq((int)strlen(jstr(o, "id")), 32);
	ck_assert_int_eq((int)strspn(jstr(o, "id"), "0123456789abcdef"), 32);
	ck_assert_str_eq(jstr(o, "node"), "relay-1");
	ck_assert_str_eq(jstr(o, "transport"), "quic");
	ck_assert_str_eq(jstr(o, "remote"), "127.0.0.1:40000");
	ck_assert_str_eq(jstr(o, "local"), "127.0.0.1:4443");
	ck_assert_str_eq(jstr(o, "server_name"), "relay.test");
	ck_assert_str_eq(jstr(o, "alpn"), "moq-lite-05");
	ck_assert_str_eq(jstr(o, "path"), "/admit/room");
	ck_assert_str_eq(jstr(o, "query"), "jwt=abc&x=1");
	ck_assert_str_eq(jstr(o, "role"), "subscriber");
	ck_assert_ptr_null(json_object_get(o, "reason"));
	json_decref(o);
	/* end: reason, duration in seconds, bytes sent and received */
	moq_auth_req_end(r, "disconnected", 10, 20, 1500000000ull);
	{
		uint64_t t0 = proc_now_ms();
		while (!(o = logged("end")) && proc_now_ms() - t0 < 10000)
			usleep(10000);
	}
	ck_assert_ptr_nonnull(o);
	ck_assert_str_eq(jstr(o, "reason"), "disconnected");
	ck_assert(json_real_value(json_object_get(o, "duration")) == 1.5);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(o, "bytes"), "sent")),
	                 10);
	ck_assert_int_eq(
	        json_integer_value(json_object_get(json_object_get(o, "bytes"), "received")), 20);
	ck_assert_str_eq(jstr(o, "path"), "/admit/room");
	json_decref(o);
	moq_auth_url_destroy(u);
}
END_TEST

/* auth.md: "A 401 or 403 refuses. Anything else at connect, a timeout, a
 * 5xx, or an unparseable body, refuses and logs an error" */
START_TEST(test_refusals)
{
	static const struct {
		const char *path;
		int result;
		const char *why;
	} cases[] = {
	        {"/refuse", MOQ_AUTH_REFUSED, "refused (HTTP 403)"},
	        {"/malformed", MOQ_AUTH_UNAVAILABLE, "not a JSON object"},
	        /* "A grant that names nothing refuses" */
	        {"/useless", MOQ_AUTH_REFUSED, "the grant names nothing"},
	        /* "one with revalidate but no expires is refused as invalid, as
	         * is one whose expires is already at or before now" */
	        {"/expired", MOQ_AUTH_UNAVAILABLE, "expires already passed"},
	        {"/unbounded", MOQ_AUTH_UNAVAILABLE, "revalidate without expires"},
	        {"/status500", MOQ_AUTH_UNAVAILABLE, "HTTP 500"},
	        {"/nothing-here", MOQ_AUTH_UNAVAILABLE, "HTTP 404"},
	};
	struct moq_auth_url *u;
	struct moq_auth_url_stats st;

	server_start(NULL);
	u = http_client(0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct moq_auth_req *r = connect_at(u, cases[i].path);
		struct answer a = wait_answer(r);
		ck_assert_msg(a.result == cases[i].result && !a.g && strstr(a.why, cases[i].why),
		              "%s: %s (%d)", cases[i].path, a.why, a.result);
		moq_auth_req_end(r, "refused", 0, 0, 0);
	}
	moq_auth_url_get_stats(u, &st);
	ck_assert_int_eq((int)st.refused, 2);
	ck_assert_int_eq((int)st.unavailable, 5);
	moq_auth_url_destroy(u);
}
END_TEST

/* The deadline: a slow server refuses at the deadline, and asking never
 * blocks the caller (the request runs on the client's threads). */
START_TEST(test_slow_and_down)
{
	const char *slow[] = {"--slow", "3", NULL};
	struct moq_auth_url *u;
	struct moq_auth_req *r, *r2;
	struct answer a;
	uint64_t t0;
	int fresh, res;
	struct moq_auth_grant *g;

	server_start(slow);
	u = http_client(500 * 1000000ull);
	t0 = proc_now_ms();
	r = connect_at(u, "/slow");
	r2 = connect_at(u, "/admit");
	ck_assert_int_eq(moq_auth_req_poll(r, &fresh, &g, &res, NULL, 0), MOQ_AUTH_REQ_PENDING);
	ck_assert_uint_lt(proc_now_ms() - t0, 200); /* submitted, not waited for */
	/* another session's answer does not wait behind the slow one */
	a = wait_answer(r2);
	ck_assert_int_eq(a.result, MOQ_AUTH_OK);
	ck_assert_uint_lt(a.ms, 450);
	moq_auth_grant_free(a.g);
	a = wait_answer(r);
	ck_assert_msg(a.result == MOQ_AUTH_UNAVAILABLE && strstr(a.why, "no answer within 500 ms"),
	              "%s", a.why);
	ck_assert_uint_ge(proc_now_ms() - t0, 450);
	ck_assert_uint_lt(proc_now_ms() - t0, 2500);
	moq_auth_req_end(r, "refused", 0, 0, 0);
	moq_auth_req_end(r2, "disconnected", 0, 0, 0);
	moq_auth_url_destroy(u);
	/* the default deadline is moq-relay's 10 s */
	ck_assert_uint_eq(MOQ_AUTH_URL_TIMEOUT_NS, 10ull * 1000000000ull);
	/* down: nothing listens (the server is gone) */
	server_stop();
	u = http_client(0);
	r = connect_at(u, "/admit");
	a = wait_answer(r);
	ck_assert_msg(a.result == MOQ_AUTH_UNAVAILABLE && strstr(a.why, "Connection refused"), "%s",
	              a.why);
	moq_auth_req_end(r, "refused", 0, 0, 0);
	moq_auth_url_destroy(u);
}
END_TEST

/* auth.md, Revalidate: "its patterns resize the live session in place,
 * narrower or wider" */
START_TEST(test_revalidate)
{
	struct moq_auth_url *u;
	struct moq_auth_req *r;
	struct answer a;

	server_start(NULL);
	u = http_client(0);
	r = connect_at(u, "/narrow");
	a = wait_answer(r);
	ck_assert_int_eq(a.result, MOQ_AUTH_OK);
	ck_assert(moq_auth_grant_allows(a.g, 0, "narrow/a/x", 10));
	ck_assert(moq_auth_grant_allows(a.g, 0, "narrow/b/x", 10));
	ck_assert(a.g->has_exp);
	ck_assert_uint_eq(moq_auth_req_revalidate_ns(r), 1000000000ull);
	moq_auth_grant_free(a.g);
	moq_auth_req_revalidate(r);
	a = wait_answer(r);
	ck_assert_int_eq(a.result, MOQ_AUTH_OK);
	ck_assert(!moq_auth_grant_allows(a.g, 0, "narrow/a/x", 10));
	ck_assert(moq_auth_grant_allows(a.g, 0, "narrow/b/x", 10));
	moq_auth_grant_free(a.g);
	{
		json_t *o = logged("revalidate");
		ck_assert_ptr_nonnull(o);
		ck_assert_str_eq(jstr(o, "id"), moq_auth_req_id(r));
		ck_assert_str_eq(jstr(o, "path"), "/narrow");
		json_decref(o);
	}
	/* an end while a revalidate is out is sent after it, without waiting */
	moq_auth_req_revalidate(r);
	moq_auth_req_end(r, "expired", 1, 2, 3000000000ull);
	{
		json_t *o;
		uint64_t t0 = proc_now_ms();
		while (!(o = logged("end")) && proc_now_ms() - t0 < 10000)
			usleep(10000);
		ck_assert_ptr_nonnull(o);
		ck_assert_str_eq(jstr(o, "reason"), "expired");
		json_decref(o);
	}
	/* widen: what the session did not have comes with the new grant */
	r = connect_at(u, "/widen");
	a = wait_answer(r);
	ck_assert(!moq_auth_grant_allows(a.g, 0, "widen/a", 7));
	moq_auth_grant_free(a.g);
	moq_auth_req_revalidate(r);
	a = wait_answer(r);
	ck_assert(moq_auth_grant_allows(a.g, 0, "widen/a", 7));
	moq_auth_grant_free(a.g);
	moq_auth_req_end(r, "disconnected", 0, 0, 0);
	/* patterns and peer */
	r = connect_at(u, "/pattern");
	a = wait_answer(r);
	ck_assert(moq_auth_grant_allows(a.g, 0, "pattern/live/a", 14));
	ck_assert(!moq_auth_grant_allows(a.g, 0, "pattern/live/a/b", 16));
	moq_auth_grant_free(a.g);
	moq_auth_req_end(r, "disconnected", 0, 0, 0);
	r = connect_at(u, "/peer");
	a = wait_answer(r);
	ck_assert_int_eq(a.result, MOQ_AUTH_OK);
	ck_assert(moq_auth_req_peer(r));
	/* root "replaces the dialed path" */
	ck_assert_str_eq(a.g->root, "pid/room");
	moq_auth_grant_free(a.g);
	moq_auth_req_end(r, "disconnected", 0, 0, 0);
	moq_auth_url_destroy(u);
}
END_TEST

START_TEST(test_unix_socket)
{
	char sock[128], url[160];
	const char *extra[] = {"--unix", sock, NULL};
	struct moq_auth_url *u;
	struct moq_auth_req *r;
	struct answer a;

	snprintf(sock, sizeof(sock), "%s/auth.sock", dir);
	server_start(extra);
	snprintf(url, sizeof(url), "unix://%s", sock);
	u = client(url, NULL, 0);
	r = connect_at(u, "/admit");
	a = wait_answer(r);
	ck_assert_msg(a.result == MOQ_AUTH_OK, "%s", a.why);
	moq_auth_grant_free(a.g);
	moq_auth_req_end(r, "disconnected", 0, 0, 0);
	r = connect_at(u, "/refuse");
	a = wait_answer(r);
	ck_assert_int_eq(a.result, MOQ_AUTH_REFUSED);
	moq_auth_req_end(r, "refused", 0, 0, 0);
	moq_auth_url_destroy(u);
}
END_TEST

/* auth.md, The link: https:// checks the chain and the host name. */
START_TEST(test_https)
{
	char cert[128], key[128], url[128];
	const char *extra[] = {"--cert", cert, "--key", key, "--host", "127.0.0.1", NULL};
	struct moq_auth_url *u;
	struct moq_auth_req *r;
	struct answer a;

	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	ck_assert_int_eq(proc_sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
	                         "-nodes -days 1 -subj /CN=localhost -addext "
	                         "subjectAltName=DNS:localhost -keyout %s -out %s 2>/dev/null",
	                         key, cert),
	                 0);
	server_start(extra);
	/* the certificate names localhost: dialled so, it verifies */
	snprintf(url, sizeof(url), "https://localhost:%s/", port);
	u = client(url, cert, 0);
	r = connect_at(u, "/admit");
	a = wait_answer(r);
	ck_assert_msg(a.result == MOQ_AUTH_OK, "%s", a.why);
	moq_auth_grant_free(a.g);
	moq_auth_req_end(r, "disconnected", 0, 0, 0);
	moq_auth_url_destroy(u);
	/* the same server under another name: the host name check refuses */
	snprintf(url, sizeof(url), "https://127.0.0.1:%s/", port);
	u = client(url, cert, 0);
	r = connect_at(u, "/admit");
	a = wait_answer(r);
	ck_assert_msg(a.result == MOQ_AUTH_UNAVAILABLE && strstr(a.why, "TLS handshake"), "%s",
	              a.why);
	moq_auth_req_end(r, "refused", 0, 0, 0);
	moq_auth_url_destroy(u);
	/* a chain the CA bundle does not hold: refused */
	if (access("/etc/ssl/certs/ca-certificates.crt", R_OK) == 0) {
		snprintf(url, sizeof(url), "https://localhost:%s/", port);
		u = client(url, NULL, 0);
		r = connect_at(u, "/admit");
		a = wait_answer(r);
		ck_assert_msg(a.result == MOQ_AUTH_UNAVAILABLE && strstr(a.why, "TLS handshake"),
		              "%s", a.why);
		moq_auth_req_end(r, "refused", 0, 0, 0);
		moq_auth_url_destroy(u);
	}
}
END_TEST

START_TEST(test_bad_urls)
{
	static const struct {
		const char *url, *err;
	} cases[] = {
	        {"http://10.1.2.3/auth", "--auth-url: http://10.1.2.3/auth: http:// is for a "
	                                 "loopback host only"},
	        {"http://example.com/", "loopback host only"},
	        {"ftp://127.0.0.1/", "not http://, https:// or unix://"},
	        {"unix://relative.sock", "unix:// needs an absolute socket path"},
	        {"http://127.0.0.1:99x/", "bad port"},
	        {"http://:80/", "no host"},
	};
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct moq_auth_url_cfg c = {.url = cases[i].url};
		ck_assert_ptr_null(moq_auth_url_create(&c, err, sizeof(err)));
		ck_assert_msg(strstr(err, cases[i].err), "%s: %s", cases[i].url, err);
	}
	{
		struct moq_auth_url_cfg c = {.url = "http://[::1]:4440/", .ca = "/x.pem"};
		ck_assert_ptr_null(moq_auth_url_create(&c, err, sizeof(err)));
		ck_assert_msg(strstr(err, "--auth-tls-root: only for an https://"), "%s", err);
		c.ca = NULL;
		struct moq_auth_url *u = moq_auth_url_create(&c, err, sizeof(err));
		ck_assert_msg(u != NULL, "%s", err);
		moq_auth_url_destroy(u);
		c.url = "https://localhost/";
		c.ca = "/nonexistent.pem";
		ck_assert_ptr_null(moq_auth_url_create(&c, err, sizeof(err)));
		ck_assert_msg(strstr(err, "--auth-tls-root: /nonexistent.pem"), "%s", err);
	}
}
END_TEST

Suite *auth_url_suite(void);
Suite *auth_url_suite(void)
{
	Suite *s = suite_create("auth_url");
	TCase *tc = tcase_create("client");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_admit_and_request);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_slow_and_down);
	tcase_add_test(tc, test_revalidate);
	tcase_add_test(tc, test_unix_socket);
	tcase_add_test(tc, test_https);
	tcase_add_test(tc, test_bad_urls);
	suite_add_tcase(s, tc);
	return s;
}
