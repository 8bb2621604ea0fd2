/* SPDX-License-Identifier: MIT */
/*
 * proc.c: the suites' shell, child process and network namespace helpers
 * (proc.h), once for test_dpdk_relay.c, test_dpdk_tap.c, test_cluster.c and
 * the loadgen suites.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* setns */
#endif
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Arguments a spawned program gets at most (with `ip netns exec NS`). */
#define PROC_MAX_ARGS 96

uint64_t proc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int proc_sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

char *proc_slurp(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f != NULL) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

const char *proc_file_prefix(const char *const *args)
{
	const char *p = "";

	for (; *args != NULL; args++)
		if (strncmp(*args, "--file-prefix=", 14) == 0)
			p = *args + 14;
	return p;
}

void proc_rm_runtime_dir(const char *prefix)
{
	if (prefix[0] == '\0' || strchr(prefix, '/') != NULL || strchr(prefix, '.') != NULL)
		return;
	if (proc_sh("rm -rf /var/run/dpdk/%s", prefix) != 0)
		fprintf(stderr, "cannot remove /var/run/dpdk/%s\n", prefix);
}

int proc_netns_create(struct proc_netns *ns, const char *prefix)
{
	char path[96];

	ns->fd = -1;
	snprintf(ns->name, sizeof(ns->name), "%s-%d", prefix, (int)getpid());
	proc_sh("ip netns del %s >/dev/null 2>&1", ns->name); /* a stale one of an old pid */
	if (proc_sh("ip netns add %s && ip -n %s link set lo up", ns->name, ns->name) != 0) {
		ns->name[0] = '\0';
		return -1;
	}
	snprintf(path, sizeof(path), "/var/run/netns/%s", ns->name);
	ns->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (ns->fd < 0) {
		proc_netns_delete(ns);
		return -1;
	}
	return 0;
}

void proc_netns_delete(struct proc_netns *ns)
{
	if (ns->fd >= 0)
		close(ns->fd);
	ns->fd = -1;
	if (ns->name[0] != '\0')
		proc_sh("ip netns del %s", ns->name);
	ns->name[0] = '\0';
}

struct ns_sock_req {
	int nsfd, domain, type, protocol, fd, err;
};

static void *ns_sock_thread(void *arg)
{
	struct ns_sock_req *r = arg;

	r->fd = setns(r->nsfd, CLONE_NEWNET) == 0 ? socket(r->domain, r->type, r->protocol) : -1;
	r->err = errno;
	return NULL;
}

int proc_netns_socket(const struct proc_netns *ns, int domain, int type, int protocol)
{
	struct ns_sock_req r = {ns != NULL ? ns->fd : -1, domain, type, protocol, -1, 0};
	pthread_t th;

	if (r.nsfd < 0)
		return socket(domain, type, protocol);
	if (pthread_create(&th, NULL, ns_sock_thread, &r) != 0)
		return -1;
	pthread_join(th, NULL);
	errno = r.err;
	return r.fd;
}

void proc_netns_sweep(const char *prefix)
{
	char names[64][32];
	size_t plen = strlen(prefix);
	struct dirent *e;
	DIR *d = opendir("/var/run/netns");
	int n = 0, pid;
	char c;

	while (d != NULL && n < 64 && (e = readdir(d)) != NULL)
		if (strlen(e->d_name) < sizeof(names[0]) && strncmp(e->d_name, prefix, plen) == 0 &&
		    e->d_name[plen] == '-' && sscanf(e->d_name + plen + 1, "%d%c", &pid, &c) == 1 &&
		    kill(pid, 0) != 0 && errno == ESRCH)
			snprintf(names[n++], sizeof(names[0]), "%s", e->d_name);
	if (d != NULL)
		closedir(d);
	while (n-- > 0)
		proc_sh("ip netns del %s", names[n]);
}

pid_t proc_spawn(const char *prog, const char *const *args, const char *netns, const char *out,
                 const char *err)
{
	posix_spawn_file_actions_t fa;
	char *argv[PROC_MAX_ARGS + 1];
	int n = 0, rc;
	pid_t pid;

	if (netns != NULL && netns[0] != '\0') {
		argv[n++] = "ip";
		argv[n++] = "netns";
		argv[n++] = "exec";
		argv[n++] = (char *)netns;
	}
	argv[n++] = (char *)prog;
	for (; *args != NULL; args++) {
		if (n == PROC_MAX_ARGS) {
			errno = E2BIG;
			return -1;
		}
		argv[n++] = (char *)*args;
	}
	argv[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, out ? out : "/dev/null",
	                                 O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_addopen(&fa, 2, err ? err : "/dev/null",
	                                 O_WRONLY | O_CREAT | O_TRUNC, 0644);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		errno = rc;
		return -1;
	}
	return pid;
}

int proc_wait(pid_t pid, unsigned int ms)
{
	uint64_t end = proc_now_ms() + ms;
	int st;

	for (;;) {
		pid_t p = waitpid(pid, &st, WNOHANG);

		if (p == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (p < 0 || proc_now_ms() >= end)
			break;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

char *proc_http_get(const struct proc_netns *ns, unsigned int port, const char *path)
{
	static char resp[65536];
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	char req[256];
	int fd = proc_netns_socket(ns, AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return NULL;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		return NULL;
	}
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
	if (write(fd, req, strlen(req)) < 0) {
		close(fd);
		return NULL;
	}
	proc_read_all(fd, resp, sizeof(resp));
	return resp;
}

void proc_read_all(int fd, char *buf, size_t cap)
{
	size_t off = 0;
	ssize_t n;

	while (off < cap - 1 && (n = read(fd, buf + off, cap - 1 - off)) > 0)
		off += (size_t)n;
	buf[off] = '\0';
	close(fd);
}

long long proc_metric(const char *body, const char *name)
{
	char key[192];
	const char *p;

	if ((size_t)snprintf(key, sizeof(key), "\n%s ", name) >= sizeof(key))
		return -1; /* no metric has a name that long */
	p = body ? strstr(body, key) : NULL;
	return p ? atoll(p + strlen(key)) : -1;
}
