/* SPDX-License-Identifier: MIT */
/*
 * test_pmd_config.c: the configuration parser without EAL: units, queues,
 * addresses, the three sources and their order, and one bad value per key.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "moq_err.h"
#include "pmd_config.h"
#include "pmd_profile.h"

static char *no_env[] = {NULL};

/* Parse argv (NULL-terminated) with environment @env; returns rc, err in @err. */
static int parse(struct moq_pmd_config *cfg, char **env, char *err, const char *a0, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	const char *a;

	va_start(ap, a0);
	for (a = a0; a != NULL && argc < 31; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	err[0] = '\0';
	return moq_pmd_config_parse(cfg, argc, argv, env, err, MOQ_CFG_ERR_MAX);
}

static char *write_tmp(const char *text)
{
	static char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/moqdp-cfg-%d.conf", (int)getpid());
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return path;
}

START_TEST(defaults)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX];

	ck_assert_int_eq(parse(&c, no_env, err, NULL), 0);
	ck_assert_uint_eq(c.udp_port, 4443);
	ck_assert_uint_eq(c.cache_budget, 1ull << 30);
	ck_assert_uint_eq(c.max_latency_us, 5000000);
	ck_assert_int_eq(c.backend, MOQ_CFG_BACKEND_DPDK);
	ck_assert_uint_eq(c.nb_listen, 1);
	ck_assert_int_eq(c.listen[0].family, AF_INET);
	ck_assert_str_eq(c.profile, "auto");
	ck_assert_str_eq(c.mgmt, "127.0.0.1:9464");
	ck_assert_uint_eq(c.nb_queues, 0);
}
END_TEST

START_TEST(durations)
{
	uint64_t us;

	ck_assert_int_eq(moq_pmd_parse_duration("30s", &us), 0);
	ck_assert_uint_eq(us, 30000000);
	ck_assert_int_eq(moq_pmd_parse_duration("500ms", &us), 0);
	ck_assert_uint_eq(us, 500000);
	ck_assert_int_eq(moq_pmd_parse_duration("250us", &us), 0);
	ck_assert_uint_eq(us, 250);
	ck_assert_int_eq(moq_pmd_parse_duration("2m", &us), 0);
	ck_assert_uint_eq(us, 120000000);
	ck_assert_int_eq(moq_pmd_parse_duration("1h", &us), 0);
	ck_assert_uint_eq(us, 3600000000ull);
	ck_assert_int_eq(moq_pmd_parse_duration("3000ns", &us), 0);
	ck_assert_uint_eq(us, 3);
	ck_assert_int_eq(moq_pmd_parse_duration("0", &us), 0);
	ck_assert_uint_eq(us, 0);
	ck_assert_int_eq(moq_pmd_parse_duration("30", &us), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_duration("30 s", &us), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_duration("s", &us), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_duration("", &us), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_duration("-1s", &us), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_duration("5d", &us), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_duration("99999999999999999h", &us), MOQ_ERR_TOO_LARGE);
	ck_assert_int_eq(moq_pmd_parse_duration("99999999999999999999999s", &us),
	                 MOQ_ERR_TOO_LARGE);
}
END_TEST

START_TEST(sizes)
{
	uint64_t b;

	ck_assert_int_eq(moq_pmd_parse_size("8GiB", &b), 0);
	ck_assert_uint_eq(b, 8ull << 30);
	ck_assert_int_eq(moq_pmd_parse_size("64MiB", &b), 0);
	ck_assert_uint_eq(b, 64ull << 20);
	ck_assert_int_eq(moq_pmd_parse_size("4KiB", &b), 0);
	ck_assert_uint_eq(b, 4096);
	ck_assert_int_eq(moq_pmd_parse_size("1500", &b), 0);
	ck_assert_uint_eq(b, 1500);
	ck_assert_int_eq(moq_pmd_parse_size("1500B", &b), 0);
	ck_assert_uint_eq(b, 1500);
	ck_assert_int_eq(moq_pmd_parse_size("2GB", &b), 0);
	ck_assert_uint_eq(b, 2000000000ull);
	ck_assert_int_eq(moq_pmd_parse_size("10k", &b), 0);
	ck_assert_uint_eq(b, 10000);
	ck_assert_int_eq(moq_pmd_parse_size("8XB", &b), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_size("8 GiB", &b), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_size("GiB", &b), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_size("-1", &b), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_size("1.5GiB", &b), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_size("20000000000TiB", &b), MOQ_ERR_TOO_LARGE);
}
END_TEST

START_TEST(queues)
{
	struct moq_cfg_queue q[4];
	unsigned int n = 0;

	ck_assert_int_eq(moq_pmd_parse_queues("(0,0,1),(0,1,2), (1,0,3)", q, 4, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(q[1].port, 0);
	ck_assert_uint_eq(q[1].queue, 1);
	ck_assert_uint_eq(q[1].lcore, 2);
	ck_assert_uint_eq(q[2].port, 1);
	ck_assert_uint_eq(q[2].lcore, 3);
	ck_assert_int_eq(moq_pmd_parse_queues("( 0 , 0 , 1 )", q, 4, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(moq_pmd_parse_queues("", q, 4, &n), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_queues("(0,0)", q, 4, &n), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_queues("(0,0,1,2)", q, 4, &n), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_queues("(0,0,1)(0,1,2)", q, 4, &n), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_queues("(0,0,1),", q, 4, &n), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_queues("(0,0,x)", q, 4, &n), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_queues("(0,-1,1)", q, 4, &n), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_queues("(0,70000,1)", q, 4, &n), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_queues("0,0,1", q, 4, &n), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_queues("(0,0,1),(0,1,1),(0,2,1),(0,3,1),(0,4,1)", q, 4, &n),
	                 MOQ_ERR_LIMIT);
}
END_TEST

START_TEST(addresses)
{
	struct moq_cfg_addr a;

	ck_assert_int_eq(moq_pmd_parse_addr("10.0.0.2/24", &a), 0);
	ck_assert_int_eq(a.family, AF_INET);
	ck_assert_uint_eq(a.prefixlen, 24);
	ck_assert_uint_eq(a.addr[0], 10);
	ck_assert_uint_eq(a.addr[3], 2);
	ck_assert_int_eq(moq_pmd_parse_addr("10.0.0.2", &a), 0);
	ck_assert_uint_eq(a.prefixlen, 32);
	ck_assert_int_eq(moq_pmd_parse_addr("2001:db8::1/64", &a), 0);
	ck_assert_int_eq(a.family, AF_INET6);
	ck_assert_uint_eq(a.prefixlen, 64);
	ck_assert_uint_eq(a.addr[15], 1);
	ck_assert_int_eq(moq_pmd_parse_addr("10.0.0.2/33", &a), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_addr("2001:db8::1/129", &a), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_addr("10.0.0.256", &a), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_addr("10.0.0.2/", &a), MOQ_ERR_INVAL);
	ck_assert_int_eq(moq_pmd_parse_addr("host.example", &a), MOQ_ERR_INVAL);
}
END_TEST

START_TEST(command_line)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX];

	ck_assert_int_eq(parse(&c, no_env, err, "--port", "8443", "--cache-budget=8GiB",
	                       "--max-latency", "500ms", "--queues", "(0,0,1),(0,1,2)", "--listen",
	                       "10.0.0.2/24,2001:db8::2/64", "--backend", "kernel", "--cert",
	                       "/etc/c.pem", "--key", "/etc/k.pem", "--mgmt", "[::1]:9000",
	                       "--profile", "tap", "--portmask", "0x3", "--stats-interval", "0",
	                       "--max-connections", "42", "--gateway", "10.0.0.1", NULL),
	                 0);
	ck_assert_uint_eq(c.udp_port, 8443);
	ck_assert_uint_eq(c.cache_budget, 8ull << 30);
	ck_assert_uint_eq(c.max_latency_us, 500000);
	ck_assert_uint_eq(c.nb_queues, 2);
	ck_assert_uint_eq(c.queues[1].lcore, 2);
	ck_assert_uint_eq(c.nb_listen, 2);
	ck_assert_int_eq(c.listen[1].family, AF_INET6);
	ck_assert_int_eq(c.backend, MOQ_CFG_BACKEND_KERNEL);
	ck_assert_str_eq(c.cert, "/etc/c.pem");
	ck_assert_str_eq(c.mgmt, "[::1]:9000");
	ck_assert_str_eq(c.profile, "tap");
	ck_assert_uint_eq(c.portmask, 3);
	ck_assert_uint_eq(c.stats_interval_us, 0);
	ck_assert_uint_eq(c.max_connections, 42);
	ck_assert_int_eq(c.gateway4.family, AF_INET);
	/* underscores work as dashes, and "" turns the management listener off */
	ck_assert_int_eq(parse(&c, no_env, err, "--cache_budget", "64MiB", "--mgmt", "", NULL), 0);
	ck_assert_uint_eq(c.cache_budget, 64ull << 20);
	ck_assert_str_eq(c.mgmt, "");
	ck_assert_uint_eq(c.max_conns_per_addr, 1024); /* the default */
	ck_assert_int_eq(parse(&c, no_env, err, "--max-conns-per-addr", "0", NULL), 0);
	ck_assert_uint_eq(c.max_conns_per_addr, 0); /* unlimited */
	ck_assert_int_eq(parse(&c, no_env, err, "--max-conns-per-addr=2", NULL), 0);
	ck_assert_uint_eq(c.max_conns_per_addr, 2);
}
END_TEST

/* 300 bytes: longer than MOQ_CFG_PATH_MAX */
#define LONG_PATH                                                                                  \
	"/"                                                                                        \
	"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"                             \
	"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"                             \
	"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"                             \
	"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"                             \
	"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"

/* One bad value per key: the error names the option, and only it. */
static const struct {
	const char *opt, *val, *want;
} bad[] = {
        {"--listen", "10.0.0.300", "--listen: '10.0.0.300' is not an IP address"},
        {"--listen", "", "--listen: at least one address"},
        {"--listen", "1.1.1.1,1.1.1.2,1.1.1.3,1.1.1.4,1.1.1.5", "--listen: more than 4"},
        {"--port", "0", "--port: '0' is not an integer in [1, 65535]"},
        {"--port", "65536", "--port:"},
        {"--port", "44x", "--port:"},
        {"--gateway", "2001:db8::1", "--gateway: '2001:db8::1' is not an IPv4 address"},
        {"--gateway6", "10.0.0.1", "--gateway6: '10.0.0.1' is not an IPv6 address"},
        {"--mtu", "1279", "--mtu:"},
        {"--mtu", "9001", "--mtu:"},
        {"--cert", "", "--cert: required when --key"},
        {"--state-dir", "var/lib/moqdp", "--state-dir: 'var/lib/moqdp' is not an absolute path"},
        {"--key", "", "--key: required when --cert"},
        {"--cache-budget", "8XB", "--cache-budget: '8XB' is not a size"},
        {"--cache-budget", "1KiB", "--cache-budget: 1KiB is out of range"},
        {"--cache-budget", "8TiB", "--cache-budget: 8TiB is out of range"},
        {"--max-latency", "30", "--max-latency: '30' is not a duration"},
        {"--max-latency", "2h", "--max-latency: 2h is out of range"},
        {"--max-latency", "10us", "--max-latency: 10us is out of range"},
        {"--max-connections", "0", "--max-connections:"},
        {"--max-conns-per-addr", "-1", "--max-conns-per-addr: '-1' is not an integer"},
        {"--max-conns-per-addr", "10000001", "--max-conns-per-addr:"},
        {"--max-subscribers", "-5", "--max-subscribers:"},
        {"--max-streams", "ten", "--max-streams:"},
        {"--max-tracks", "99999999999", "--max-tracks:"},
        {"--idle-timeout", "forever", "--idle-timeout:"},
        {"--backend", "xdp", "--backend: 'xdp' is not a backend"},
        {"--queues", "(0,0)", "--queues: '(0,0)' is not a list of (port,queue,lcore)"},
        {"--queues", "(0,0,1),(0,0,2)", "--queues: (port 0, queue 0) is given twice"},
        {"--portmask", "0", "--portmask:"},
        {"--portmask", "zz", "--portmask:"},
        {"--rx-desc", "16", "--rx-desc:"},
        {"--tx-desc", "40000", "--tx-desc:"},
        {"--redirect-ring", "1000", "--redirect-ring: 1000 is not a power of 2"},
        {"--pool-mbufs", "-1", "--pool-mbufs:"},
        {"--pool-mbufs", "99999999", "--pool-mbufs:"},
        {"--profile", "e1000", "--profile: unknown profile 'e1000'"},
        {"--stats-interval", "5", "--stats-interval:"},
        {"--mgmt", "localhost:80", "--mgmt: 'localhost:80' is not host:port"},
        {"--mgmt", "127.0.0.1", "--mgmt:"},
        {"--mgmt", "127.0.0.1:0", "--mgmt:"},
        {"--drain-timeout", "1h", "--drain-timeout:"},
        {"--config", "/nonexistent/moqdp.conf", "--config: cannot open '/nonexistent/moqdp.conf'"},
        {"--auth-key", LONG_PATH, "--auth-key: path longer than 255 bytes"},
        {"--auth-key-dir", LONG_PATH, "--auth-key-dir: path longer than 255 bytes"},
        {"--auth-public", LONG_PATH, "--auth-public: path longer than 255 bytes"},
        {"--auth-public-publish", LONG_PATH, "--auth-public-publish: path longer than 255 bytes"},
        {"--auth-public-subscribe", LONG_PATH,
         "--auth-public-subscribe: path longer than 255 bytes"},
        {"--auth-url", LONG_PATH, "--auth-url: path longer than 255 bytes"},
        {"--auth-tls-root", "/ca.pem", "--auth-tls-root: only with an https:// --auth-url"},
        {"--bogus", "1", "--bogus: unknown option"},
        {"--max-broadcasts", "0", "--max-broadcasts:"},
        {"--max-session-broadcasts", "many", "--max-session-broadcasts:"},
        {"--link-max-subscriptions", "0", "--link-max-subscriptions:"},
        {"--link-max-broadcasts", "many", "--link-max-broadcasts:"},
        {"--max-announce-requests", "0", "--max-announce-requests:"},
        {"--max-session-subscriptions", "-1", "--max-session-subscriptions:"},
        {"--max-session-fetches", "0", "--max-session-fetches:"},
        {"--max-broadcast-name", "4097", "--max-broadcast-name:"},
        {"--max-track-name", "0", "--max-track-name:"},
        {"--max-message", "63", "--max-message: '63' is not an integer in [64, 4096]"},
        /* relay-to-relay (dpdk_app/cluster.h; URLs are checked at start-up) */
        {"--cluster-connect", "moql://127.0.0.1:4443/",
         "--cluster-ca: required with --cluster-connect"},
        {"--cluster-token", "/tmp/token", "--cluster-token: only with --cluster-connect"},
        {"--cluster-ca", "insecure", "--cluster-ca: only with --cluster-connect"},
        {"--cluster-name", "relay.test", "--cluster-name: only with --cluster-connect"},
        {"--upstream-hold", "1h", "--upstream-hold: 1h is out of range"},
        {"--route-cost", "-1", "--route-cost: '-1' is not an integer in [0, 4294967295]"},
        {"--admit-busy", "100", "--admit-busy: '100' is not an integer in [0, 99]"},
        {"--admit-refuse", "goaway=", "--admit-refuse: 'goaway=' is not bounds or goaway=URL"},
        {"--fastpath", "yes", "--fastpath: 'yes' is not on or off"},
        {"--fastpath-conns", "0", "--fastpath-conns: '0' is not an integer in [1, 10000000]"},
        {"--fastpath-gcm", "yes", "--fastpath-gcm:"},
        /* issue 15: --tcp is 0 or 1 (the dpdk backend's exception port:
         * tcp_on_dpdk below) */
        {"--tcp", "2", "--tcp: '2' is not an integer in [0, 1]"},
        {"--max-tcp-conns", "0", "--max-tcp-conns:"},
        {"--web-root", "/srv", "--web-root: needs --tcp 1"},
        /* issue 22, 14: an origin is scheme://host[:port] (h3.h) */
        {"--allowed-origins", "example.com",
         "--allowed-origins: 'example.com' is not a list of origins"},
};

START_TEST(bad_option)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX];
	const char *opt = bad[_i].opt, *val = bad[_i].val;

	if (strcmp(opt, "--cert") == 0) /* key given, cert empty */
		ck_assert_int_eq(parse(&c, no_env, err, "--key", "/k.pem", opt, val, NULL),
		                 MOQ_ERR_CONFIG);
	else if (strcmp(opt, "--key") == 0)
		ck_assert_int_eq(parse(&c, no_env, err, "--cert", "/c.pem", opt, val, NULL),
		                 MOQ_ERR_CONFIG);
	else
		ck_assert_int_eq(parse(&c, no_env, err, "--port", "5000", opt, val, NULL),
		                 MOQ_ERR_CONFIG);
	ck_assert_msg(strstr(err, bad[_i].want) != NULL, "%s %s: got '%s'", opt, val, err);
	ck_assert_ptr_null(strchr(err, '\n'));
}
END_TEST

START_TEST(every_key_has_a_bad_case)
{
	/* keep the table above complete: each key of the usage text is tested */
	const char *u = moq_pmd_config_usage();
	const char *p = u;
	unsigned int keys = 0;

	while ((p = strstr(p, "\n  --")) != NULL) {
		char name[40];
		int found = 0;

		p += 3;
		sscanf(p, "%39s", name);
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			found |= strcmp(bad[i].opt, name) == 0;
		ck_assert_msg(found, "no bad-value test for %s", name);
		keys++;
	}
	ck_assert_uint_ge(keys, 25);
}
END_TEST

START_TEST(argv_shape)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX];

	ck_assert_int_eq(parse(&c, no_env, err, "--port", NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--port: a value is required");
	ck_assert_int_eq(parse(&c, no_env, err, "4443", NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "'4443': expected --option value");
	ck_assert_int_eq(parse(&c, no_env, err, "--nope=3", NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--nope: unknown option");
	ck_assert_int_eq(parse(&c, no_env, err, "--", NULL), MOQ_ERR_CONFIG);
	ck_assert_int_eq(parse(&c, no_env, err, "--port=", NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--port: '' is not an integer in [1, 65535]");
	/* the error stays one line whatever the value holds (found by fuzz_pmd_config) */
	ck_assert_int_eq(parse(&c, no_env, err, "--port", "1\n2", NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--port: '1?2' is not an integer in [1, 65535]");
	ck_assert_int_eq(parse(&c, no_env, err, "\n", NULL), MOQ_ERR_CONFIG);
	ck_assert_ptr_null(strchr(err, '\n'));
}
END_TEST

START_TEST(set_keeps_config_on_error)
{
	struct moq_pmd_config c, before;
	char err[MOQ_CFG_ERR_MAX];

	moq_pmd_config_defaults(&c);
	ck_assert_int_eq(moq_pmd_config_set(&c, "listen", "10.0.0.2", "--", err, sizeof(err)), 0);
	before = c;
	ck_assert_int_eq(moq_pmd_config_set(&c, "listen", "10.0.0.3,bad", "--", err, sizeof(err)),
	                 MOQ_ERR_CONFIG);
	ck_assert_int_eq(memcmp(&c, &before, sizeof(c)), 0);
	ck_assert_int_eq(moq_pmd_config_set(&c, "queues", "(0,0,1),(x", "--", err, sizeof(err)),
	                 MOQ_ERR_CONFIG);
	ck_assert_int_eq(memcmp(&c, &before, sizeof(c)), 0);
	ck_assert_int_eq(moq_pmd_config_set(&c, "redirect-ring", "1000", "--", err, sizeof(err)),
	                 MOQ_ERR_CONFIG);
	ck_assert_int_eq(memcmp(&c, &before, sizeof(c)), 0);
}
END_TEST

START_TEST(environment)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX];
	char *env[] = {"PATH=/bin", "MOQDP_CACHE_BUDGET=2GiB", "MOQDP_PORT=7000",
	               "MOQDP_TEST_EAL=--foo", NULL};
	char *bad_env[] = {"MOQDP_CACHE_BUGDET=2GiB", NULL};
	char *bad_val[] = {"MOQDP_MAX_LATENCY=30", NULL};

	ck_assert_int_eq(parse(&c, env, err, NULL), 0);
	ck_assert_uint_eq(c.cache_budget, 2ull << 30);
	ck_assert_uint_eq(c.udp_port, 7000);
	/* the command line wins over the environment */
	ck_assert_int_eq(parse(&c, env, err, "--port", "7001", NULL), 0);
	ck_assert_uint_eq(c.udp_port, 7001);
	ck_assert_int_eq(parse(&c, bad_env, err, NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "MOQDP_CACHE_BUGDET: unknown option");
	ck_assert_int_eq(parse(&c, bad_val, err, NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "MOQDP_MAX_LATENCY: '30' is not a duration (e.g. 500ms, 30s)");
}
END_TEST

/* The environment dpdk_app/moqdp-relay.service gives the relay: MOQDP_EAL is
 * the unit's EAL arguments, not a relay option; other unknown MOQDP_* still
 * stop the parse with one line naming them. */
START_TEST(environment_not_options)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX];
	char *unit_env[] = {"MOQDP_EAL=-l 0-2 --socket-mem=2048 --file-prefix=moqdp",
	                    "MOQDP_PORT=7002", NULL};
	char *scripts_env[] = {"MOQDP_BUILD_DIR=build", "MOQDP_DEPS_PREFIX=/opt/moqdp/deps/x",
	                       "MOQDP_FUZZ_RUNS=10", "MOQDP_TEST_EAL=--no-huge", NULL};
	char *bogus[] = {"MOQDP_EAL=-l 0", "MOQDP_BOGUS=1", NULL};
	char *eal_prefix[] = {"MOQDP_EALX=1", NULL};

	ck_assert_msg(parse(&c, unit_env, err, NULL) == 0, "unit environment refused: %s", err);
	ck_assert_uint_eq(c.udp_port, 7002);
	ck_assert_msg(parse(&c, scripts_env, err, NULL) == 0, "scripts' environment refused: %s",
	              err);
	ck_assert_int_eq(parse(&c, bogus, err, NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "MOQDP_BOGUS: unknown option");
	/* the list is of whole names, not prefixes */
	ck_assert_int_eq(parse(&c, eal_prefix, err, NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "MOQDP_EALX: unknown option");
}
END_TEST

START_TEST(config_file)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX], arg[128], want[160];
	char *path = write_tmp("# relay\n"
	                       "cache-budget = 64MiB   # small\n"
	                       "\n"
	                       "max_latency=2s\n"
	                       "  queues = \"(0,0,1),(0,1,1)\"\n"
	                       "mgmt = \"127.0.0.1:9999\"\n"
	                       "port = 6000\n");
	char *env[] = {"MOQDP_PORT=6001", NULL};

	ck_assert_int_eq(parse(&c, no_env, err, "--config", path, NULL), 0);
	ck_assert_uint_eq(c.cache_budget, 64ull << 20);
	ck_assert_uint_eq(c.max_latency_us, 2000000);
	ck_assert_uint_eq(c.nb_queues, 2);
	ck_assert_str_eq(c.mgmt, "127.0.0.1:9999");
	ck_assert_uint_eq(c.udp_port, 6000);
	ck_assert_str_eq(c.config, path);
	/* order: file < environment < command line */
	ck_assert_int_eq(parse(&c, env, err, "--config", path, NULL), 0);
	ck_assert_uint_eq(c.udp_port, 6001);
	ck_assert_int_eq(parse(&c, env, err, "--config", path, "--port", "6002", NULL), 0);
	ck_assert_uint_eq(c.udp_port, 6002);
	/* MOQDP_CONFIG names the file too */
	snprintf(arg, sizeof(arg), "MOQDP_CONFIG=%s", path);
	{
		char *env2[] = {arg, NULL};

		ck_assert_int_eq(parse(&c, env2, err, NULL), 0);
		ck_assert_uint_eq(c.cache_budget, 64ull << 20);
	}

	path = write_tmp("port = 6000\ncache-bugdet = 1GiB\n");
	ck_assert_int_eq(parse(&c, no_env, err, "--config", path, NULL), MOQ_ERR_CONFIG);
	snprintf(want, sizeof(want), "%s:2: cache-bugdet: unknown option", path);
	ck_assert_str_eq(err, want);

	path = write_tmp("port 6000\n");
	ck_assert_int_eq(parse(&c, no_env, err, "--config", path, NULL), MOQ_ERR_CONFIG);
	snprintf(want, sizeof(want), "%s:1: expected 'key = value'", path);
	ck_assert_str_eq(err, want);

	path = write_tmp("= 3\n");
	ck_assert_int_eq(parse(&c, no_env, err, "--config", path, NULL), MOQ_ERR_CONFIG);

	path = write_tmp("max-latency = 30\n");
	ck_assert_int_eq(parse(&c, no_env, err, "--config", path, NULL), MOQ_ERR_CONFIG);
	snprintf(want, sizeof(want), "%s:1: max-latency: '30' is not a duration", path);
	ck_assert_msg(strstr(err, want) == err, "%s", err);

	path = write_tmp("config = /etc/other.conf\n");
	ck_assert_int_eq(parse(&c, no_env, err, "--config", path, NULL), MOQ_ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(err, "not allowed inside a config file"));
	unlink(path);
}
END_TEST

START_TEST(cross_checks)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX];

	ck_assert_int_eq(parse(&c, no_env, err, "--cert", "/c.pem", NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--key: required when --cert is given");
	ck_assert_int_eq(parse(&c, no_env, err, "--portmask", "0x1", "--queues", "(1,0,1)", NULL),
	                 MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--queues: port 1 is not in --portmask");
	ck_assert_int_eq(parse(&c, no_env, err, "--listen", "0.0.0.0,10.0.0.1", NULL),
	                 MOQ_ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(err, "--listen:"));
}
END_TEST

/* issue 15: the dpdk backend takes --tcp 1 (its exception port, exc.c)
 * for IPv4 --listen addresses and refuses it with an IPv6 one. */
/* --allowed-origins (h3.h, moq_wt_cfg): origins or *, "" = any */
START_TEST(allowed_origins)
{
	static const char *const good[] = {"", "*", "https://a.test",
	                                   "https://a.test, https://b.test:8443/, *",
	                                   "http://127.0.0.1:8080"};
	static const char *const nope[] = {"a.test", "https://",    "https://a/b", "https://u@a",
	                                   "://a",   "https://a b", "1x://a"};
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX];

	ck_assert_int_eq(parse(&c, no_env, err, NULL), 0);
	ck_assert_str_eq(c.allowed_origins, "");
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_msg(parse(&c, no_env, err, "--allowed-origins", good[i], NULL) == 0,
		              "%s: %s", good[i], err);
		ck_assert_str_eq(c.allowed_origins, good[i]);
	}
	for (size_t i = 0; i < sizeof(nope) / sizeof(nope[0]); i++)
		ck_assert_msg(parse(&c, no_env, err, "--allowed-origins", nope[i], NULL) ==
		                      MOQ_ERR_CONFIG,
		              "%s accepted", nope[i]);
}
END_TEST

START_TEST(tcp_on_dpdk)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX];

	ck_assert_int_eq(parse(&c, no_env, err, "--tcp", "1", "--listen", "10.0.0.2/24", NULL), 0);
	ck_assert_uint_eq(c.tcp, 1);
	/* issue 26: the exception port carries IPv6 too (tests/test_dpdk_exc.py) */
	ck_assert_int_eq(
	        parse(&c, no_env, err, "--tcp", "1", "--listen", "10.0.0.2/24,fd00::2/64", NULL),
	        0);
	ck_assert_uint_eq(c.nb_listen, 2);
}
END_TEST

/* --auth-key / --auth-key-dir / --auth-public: moq-relay's names, from
 * every source; "" is a value for --auth-public (every path public). */
START_TEST(auth_options)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX];
	char *env[] = {"MOQDP_AUTH_PUBLIC=", "MOQDP_AUTH_KEY_DIR=/etc/moqdp/keys", NULL};
	char *path;

	ck_assert_int_eq(parse(&c, no_env, err, NULL), 0);
	ck_assert_str_eq(c.auth_key, "");
	ck_assert_int_eq(c.auth_public_set, 0);
	ck_assert_int_eq(
	        parse(&c, no_env, err, "--auth-key", "/k.jwk", "--auth-public", "anon,demo", NULL),
	        0);
	ck_assert_str_eq(c.auth_key, "/k.jwk");
	ck_assert_str_eq(c.auth_public, "anon,demo");
	ck_assert_int_eq(c.auth_public_set, 1);
	ck_assert_int_eq(parse(&c, env, err, NULL), 0);
	ck_assert_str_eq(c.auth_key_dir, "/etc/moqdp/keys");
	ck_assert_str_eq(c.auth_public, "");
	ck_assert_int_eq(c.auth_public_set, 1);
	path = write_tmp("auth-key = /a.jwk\nauth-public = \"\"\n");
	ck_assert_int_eq(parse(&c, no_env, err, "--config", path, NULL), 0);
	ck_assert_str_eq(c.auth_key, "/a.jwk");
	ck_assert_int_eq(c.auth_public_set, 1);
	ck_assert_str_eq(c.auth_public, "");
	unlink(path);
	ck_assert_int_eq(parse(&c, env, err, "--auth-key", "/k.jwk", NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--auth-key-dir: cannot be combined with --auth-key");
	/* moq-relay (doc/bin/relay/auth.md): "Setting both ... fails at
	 * startup": --auth-url excludes the keys and the static rules, in one
	 * line naming them */
	ck_assert_int_eq(parse(&c, no_env, err, "--auth-url", "http://127.0.0.1:4440/",
	                       "--auth-public-subscribe", "anon/**", "--auth-tls-root", "/x", NULL),
	                 MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--auth-url: cannot be combined with --auth-public-subscribe");
	ck_assert_int_eq(parse(&c, no_env, err, "--auth-url", "http://127.0.0.1:4440/",
	                       "--auth-key", "/k.jwk", NULL),
	                 MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--auth-url: cannot be combined with --auth-key");
	ck_assert_int_eq(parse(&c, no_env, err, "--auth-url", "http://127.0.0.1:4440/",
	                       "--auth-public", "**", NULL),
	                 MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--auth-url: cannot be combined with --auth-public");
	ck_assert_int_eq(parse(&c, no_env, err, "--auth-url", "https://auth.example/",
	                       "--auth-tls-root", "/ca.pem", NULL),
	                 0);
	ck_assert_str_eq(c.auth_url, "https://auth.example/");
	ck_assert_str_eq(c.auth_tls_root, "/ca.pem");
	ck_assert_int_eq(parse(&c, no_env, err, "--auth-public-publish", "anon/**",
	                       "--auth-public-subscribe", "anon/**,demo/**", NULL),
	                 0);
	ck_assert_str_eq(c.auth_public_subscribe, "anon/**,demo/**");
}
END_TEST

/* An lcore polls at most MOQ_CFG_MAX_LCORE_QUEUES RX queues: more are refused
 * at start-up, naming --queues (the relay's worker used to poll the first 16
 * and leave the rest unpolled). */
START_TEST(queues_per_lcore)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX], q[1024];
	size_t n = 0;

	/* 16 on lcore 1 (port 0), then a 17th (port 1) */
	for (int i = 0; i < MOQ_CFG_MAX_LCORE_QUEUES; i++)
		n += (size_t)snprintf(q + n, sizeof(q) - n, "%s(0,%d,1)", i ? "," : "", i);
	ck_assert_int_eq(parse(&c, no_env, err, "--queues", q, NULL), 0);
	ck_assert_uint_eq(c.nb_queues, MOQ_CFG_MAX_LCORE_QUEUES);
	snprintf(q + n, sizeof(q) - n, ",(1,0,2),(1,1,1)");
	ck_assert_int_eq(parse(&c, no_env, err, "--queues", q, NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--queues: lcore 1 polls 17 queues (at most 16)");
	/* the same 18 queues over two lcores are fine */
	q[n] = '\0';
	snprintf(q + n, sizeof(q) - n, ",(1,0,2),(1,1,2)");
	ck_assert_int_eq(parse(&c, no_env, err, "--queues", q, NULL), 0);
	ck_assert_uint_eq(c.nb_queues, MOQ_CFG_MAX_LCORE_QUEUES + 2);
}
END_TEST

/* docs/DEPLOY.md's PMD table lists every profile of pmd_profile.c. */
START_TEST(profiles_documented)
{
	char path[512], *doc;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s/docs/DEPLOY.md", MOQDP_SOURCE_ROOT);
	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	doc = calloc(1, (size_t)n + 1);
	ck_assert_uint_eq(fread(doc, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	for (unsigned int i = 0; moq_pmd_profile_at(i) != NULL; i++) {
		const struct moq_pmd_profile *p = moq_pmd_profile_at(i);
		char row[64];

		snprintf(row, sizeof(row), "| `%s` |", p->name);
		ck_assert_msg(strstr(doc, row) != NULL, "DEPLOY.md has no row %s", row);
		ck_assert_ptr_eq(moq_pmd_profile_by_name(p->name), p);
	}
	ck_assert_str_eq(moq_pmd_profile_by_driver("net_tap")->name, "tap");
	ck_assert_str_eq(moq_pmd_profile_by_driver("mlx5_pci")->name, "mlx5");
	ck_assert_str_eq(moq_pmd_profile_by_driver("net_e1000_igb")->name, "generic");
	ck_assert_uint_ne(moq_pmd_profile_by_name("af_packet")->flags & MOQ_PMD_F_L4_PARTIAL, 0);
	free(doc);
}
END_TEST

/* The per-peer bounds: defaults as moq.h's MOQ_DEFAULT_* and moq_node_create's,
 * and every one settable. */
START_TEST(bounds_options)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX];

	ck_assert_int_eq(parse(&c, no_env, err, NULL), 0);
	ck_assert_uint_eq(c.max_broadcasts, 16384);
	ck_assert_uint_eq(c.max_session_broadcasts, 1024);
	ck_assert_uint_eq(c.max_announce_requests, 16);
	ck_assert_uint_eq(c.max_session_subscriptions, 256);
	ck_assert_uint_eq(c.max_session_fetches, 16);
	ck_assert_uint_eq(c.max_broadcast_name, 1024);
	ck_assert_uint_eq(c.max_track_name, 256);
	ck_assert_uint_eq(c.max_message, 4096);
	ck_assert_int_eq(parse(&c, no_env, err, "--max-broadcasts", "100",
	                       "--max-session-broadcasts", "10", "--max-announce-requests", "2",
	                       "--max-session-subscriptions", "3", "--max-session-fetches", "4",
	                       "--max-broadcast-name", "64", "--max-track-name", "32",
	                       "--max-message", "512", NULL),
	                 0);
	ck_assert_msg(err[0] == '\0', "%s", err);
	ck_assert_uint_eq(c.max_broadcasts, 100);
	ck_assert_uint_eq(c.max_session_broadcasts, 10);
	ck_assert_uint_eq(c.max_announce_requests, 2);
	ck_assert_uint_eq(c.max_session_subscriptions, 3);
	ck_assert_uint_eq(c.max_session_fetches, 4);
	ck_assert_uint_eq(c.max_broadcast_name, 64);
	ck_assert_uint_eq(c.max_track_name, 32);
	ck_assert_uint_eq(c.max_message, 512);
}
END_TEST

/* Admission (issue 13): --admit-busy and --admit-refuse, honoured or refused
 * with one line naming the option; also as MOQDP_ADMIT_* variables. */
START_TEST(admission_options)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX];
	char *env[] = {"MOQDP_ADMIT_BUSY=75", "MOQDP_ADMIT_REFUSE=goaway=https://b.example/", NULL};

	ck_assert_int_eq(parse(&c, no_env, err, NULL), 0);
	ck_assert_uint_eq(c.admit_busy, 0); /* off */
	ck_assert_uint_eq(c.route_cost, 1); /* lite-06 7.3.4's default: not sent */
	ck_assert_int_eq(parse(&c, no_env, err, "--route-cost", "0", NULL), 0);
	ck_assert_uint_eq(c.route_cost, 0);
	ck_assert_int_eq(parse(&c, no_env, err, "--route-cost", "4294967295", NULL), 0);
	ck_assert_uint_eq(c.route_cost, UINT32_MAX);
	ck_assert_str_eq(c.admit_goaway, "");
	ck_assert_int_eq(parse(&c, no_env, err, "--admit-busy", "85", "--admit-refuse",
	                       "goaway=https://relay2.example:4443/", NULL),
	                 0);
	ck_assert_uint_eq(c.admit_busy, 85);
	ck_assert_str_eq(c.admit_goaway, "https://relay2.example:4443/");
	ck_assert_int_eq(
	        parse(&c, no_env, err, "--admit-busy", "85", "--admit-refuse", "bounds", NULL), 0);
	ck_assert_str_eq(c.admit_goaway, "");
	ck_assert_int_eq(parse(&c, env, err, NULL), 0);
	ck_assert_uint_eq(c.admit_busy, 75);
	ck_assert_str_eq(c.admit_goaway, "https://b.example/");
	ck_assert_int_eq(parse(&c, no_env, err, "--admit-busy", "100", NULL), MOQ_ERR_CONFIG);
	ck_assert_msg(strstr(err, "--admit-busy") != NULL && !strchr(err, '\n'), "%s", err);
	ck_assert_int_eq(parse(&c, no_env, err, "--admit-refuse", "goaway", NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--admit-refuse: 'goaway' is not bounds or goaway=URL");
	ck_assert_int_eq(parse(&c, no_env, err, "--admit-refuse", "goaway=", NULL), MOQ_ERR_CONFIG);
	ck_assert_int_eq(parse(&c, no_env, err, "--admit-refuse", "reset", NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--admit-refuse: 'reset' is not bounds or goaway=URL");
}
END_TEST

/* issue 23: --fastpath on|off, on by default */
START_TEST(fastpath_option)
{
	struct moq_pmd_config c;
	char err[MOQ_CFG_ERR_MAX];

	ck_assert_int_eq(parse(&c, no_env, err, NULL), 0);
	ck_assert_uint_eq(c.fastpath, 1);
	ck_assert_uint_eq(c.fastpath_conns, 4096);
	ck_assert_int_eq(parse(&c, no_env, err, "--fastpath", "on", NULL), 0);
	ck_assert_uint_eq(c.fastpath, 1);
	ck_assert_int_eq(parse(&c, no_env, err, "--fastpath", "on", "--fastpath", "off", NULL), 0);
	ck_assert_uint_eq(c.fastpath, 0);
	ck_assert_int_eq(parse(&c, no_env, err, "--fastpath", "1", NULL), MOQ_ERR_CONFIG);
	ck_assert_str_eq(err, "--fastpath: '1' is not on or off");
}
END_TEST

Suite *pmd_config_suite(void);

Suite *pmd_config_suite(void)
{
	Suite *s = suite_create("pmd_config");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, defaults);
	tcase_add_test(tc, durations);
	tcase_add_test(tc, sizes);
	tcase_add_test(tc, queues);
	tcase_add_test(tc, addresses);
	tcase_add_test(tc, command_line);
	tcase_add_loop_test(tc, bad_option, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, every_key_has_a_bad_case);
	tcase_add_test(tc, argv_shape);
	tcase_add_test(tc, set_keeps_config_on_error);
	tcase_add_test(tc, environment);
	tcase_add_test(tc, environment_not_options);
	tcase_add_test(tc, config_file);
	tcase_add_test(tc, cross_checks);
	tcase_add_test(tc, auth_options);
	tcase_add_test(tc, profiles_documented);
	tcase_add_test(tc, bounds_options);
	tcase_add_test(tc, admission_options);
	tcase_add_test(tc, queues_per_lcore);
	tcase_add_test(tc, tcp_on_dpdk);
	tcase_add_test(tc, allowed_origins);
	tcase_add_test(tc, fastpath_option);
	suite_add_tcase(s, tc);
	return s;
}
