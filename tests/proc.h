/* SPDX-License-Identifier: MIT */
/*
 * proc.h: what the suites that run programs share (tests/proc.c): shell
 * commands, child processes (moqdp-relay, moqdp-load) with bounded waits,
 * the network namespaces a test creates for its kernel-side traffic, and
 * EAL's runtime directories. No Check: each call returns what happened and
 * the suite asserts. Not thread-safe except proc_netns_socket.
 */
#ifndef MOQ_TESTS_PROC_H
#define MOQ_TESTS_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t proc_now_ms(void);

/* system(3) of the printf-formatted command; its exit status. */
int proc_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The first 64 KiB of file @path in a static buffer ("" when unreadable):
 * valid until the next call. */
char *proc_slurp(const char *path);

/* The value of a "--file-prefix=" argument in @args (NULL-terminated), ""
 * without one. */
const char *proc_file_prefix(const char *const *args);

/* Remove EAL's /var/run/dpdk/<@prefix> (4-12 MB with --no-huge) once its
 * process is gone; "" or a prefix with '/' or '.' is left alone. */
void proc_rm_runtime_dir(const char *prefix);

/* A network namespace the test made: "<prefix>-<pid>", its loopback up. */
struct proc_netns {
	char name[32];
	int fd; /* /var/run/netns/<name>, -1: none */
};

/* Make @ns (a stale one of the same name is deleted first). 0, or -1 with
 * @ns->name "" (ip netns failed). */
int proc_netns_create(struct proc_netns *ns, const char *prefix);

/* Delete @ns (what is left in it goes with it); a no-op when it has none. */
void proc_netns_delete(struct proc_netns *ns);

/* A socket in @ns (socket(2) from a short thread that setns(2)es into it:
 * setns changes only the calling thread's namespace, and a socket stays in
 * the one it was made in); in this process's namespace when @ns is NULL or
 * has none. -1 with errno on failure. */
int proc_netns_socket(const struct proc_netns *ns, int domain, int type, int protocol);

/* Delete the namespaces "<prefix>-<pid>" whose process is gone (a failed
 * assertion exits before its case's teardown). */
void proc_netns_sweep(const char *prefix);

/* Start @prog with @args (NULL-terminated, without argv[0]) in namespace
 * @netns when not NULL or "" (`ip netns exec`, which execs @prog: the pid
 * is @prog's), stdout to @out and stderr to @err (NULL: /dev/null; files
 * truncated). Returns the pid, or -1 with errno. */
pid_t proc_spawn(const char *prog, const char *const *args, const char *netns, const char *out,
                 const char *err);

/* Wait up to @ms for @pid: its exit code, 128 + the signal that ended it,
 * or -1 when it did not end in time (it is then killed and reaped). */
int proc_wait(pid_t pid, unsigned int ms);

/* proc_http_get: GET @path from 127.0.0.1:@port inside @ns (NULL: this
 * process's namespace); the whole response in a static buffer, or NULL when
 * nothing listens. */
char *proc_http_get(const struct proc_netns *ns, unsigned int port, const char *path);

/* proc_read_all: read @fd to its end (at most @cap - 1 bytes, then a NUL)
 * into @buf, and close it. */
void proc_read_all(int fd, char *buf, size_t cap);

/* proc_metric: the value of metric @name (with its labels) in a /metrics
 * body, or -1. */
long long proc_metric(const char *body, const char *name);

#endif /* MOQ_TESTS_PROC_H */
