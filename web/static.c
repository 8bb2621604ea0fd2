/* SPDX-License-Identifier: MIT */
/*
 * static.c: GET /demo/<file>: the files of cfg.static_dir (scripts/demo
 * --browser), streamed from their descriptor.
 */
#include "web_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* /demo/<name>: a file of cfg.static_dir (names of [A-Za-z0-9._-], not
 * starting with '.'), streamed from its descriptor. */
void web_serve_file(struct wconn *c, const char *name, size_t n)
{
	static const struct {
		const char *ext, *type;
	} types[] = {{".html", "text/html; charset=utf-8"},
	             {".js", "text/javascript; charset=utf-8"},
	             {".css", "text/css"},
	             {".map", "application/json"}};
	const char *type = "application/octet-stream";
	char path[4200], h[512];
	struct stat sb;
	int fd, hl;

	if (n == 0) {
		name = "index.html";
		n = 10;
	}
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
		      (name[i] >= '0' && name[i] <= '9') || name[i] == '.' || name[i] == '_' ||
		      name[i] == '-') ||
		    name[0] == '.') {
			web_respond_text(c, 404, "Not Found", "not found\n");
			return;
		}
	snprintf(path, sizeof(path), "%s/%.*s", c->w->cfg.static_dir, (int)n, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		if (fd >= 0)
			close(fd);
		web_respond_text(c, 404, "Not Found", "not found\n");
		return;
	}
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		size_t el = strlen(types[i].ext);

		if (n > el && memcmp(name + n - el, types[i].ext, el) == 0)
			type = types[i].type;
	}
	hl = snprintf(h, sizeof(h),
	              "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %lld\r\n"
	              "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
	              type, (long long)sb.st_size);
	web_out_put(c, h, (size_t)hl);
	c->file_fd = fd;
	c->st = C_FILE;
}

void web_file_step(struct wconn *c)
{
	while (web_out_room(c) >= 16384) {
		ssize_t r;

		if (c->outoff == c->outlen && c->tls_pend == 0)
			c->outoff = c->outlen = 0;
		r = read(c->file_fd, c->out + c->outlen, (size_t)web_out_room(c));
		if (r <= 0) {
			close(c->file_fd);
			c->file_fd = -1;
			c->close_after = 1;
			c->st = C_DONE;
			return;
		}
		c->outlen += (size_t)r;
	}
}
