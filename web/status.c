/* SPDX-License-Identifier: MIT */
/*
 * status.c: GET /status, the relay's live status page (issue 27): its HTML
 * and script (web/status/, embedded at set-up by embed.py, nothing fetched
 * from elsewhere) and /status/metrics, the relay's Prometheus text (the
 * listener's cfg.metrics: the same text as /metrics on --mgmt), which the
 * script polls every second.
 */
#include "web_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "status_files.h"

/* /status/metrics: room for the Prometheus text (mgmt.c's own buffer is
 * 64 KiB; links and workers add series). */
#define STATUS_METRICS_CAP (256 * 1024)

/* /status/metrics is the relay's whole counter set, what /metrics gives on
 * --mgmt (the operator's listener, loopback by default): with --auth-* it
 * answers only a grant that may subscribe to everything (a token or an
 * auth server's grant of `**` from the root, or --auth-public `**`), 401
 * otherwise (docs/DEPLOY.md, The /status page); without --auth-*, as open
 * as /announced. */
static int metrics_allowed(struct wconn *c, const char *query, size_t qn)
{
	struct moq_auth_grant *g = NULL;
	int ok;

	if (c->w->cfg.auth == NULL)
		return 1;
	ok = web_auth_grant(c, "", 0, query, qn, &g) && g != NULL &&
	     moq_auth_grant_covers_all(g, 0);
	moq_auth_grant_free(g);
	return ok;
}

static void serve_metrics(struct wconn *c, const char *query, size_t qn)
{
	char h[256];
	int n;

	if (c->w->cfg.metrics == NULL || c->w->dry) {
		web_respond_text(c, 404, "Not Found", "no metrics\n");
		return;
	}
	if (!metrics_allowed(c, query, qn)) {
		web_respond_text(c, 401, "Unauthorized", "unauthorized\n");
		return;
	}
	c->body = malloc(STATUS_METRICS_CAP);
	if (c->body == NULL) {
		web_respond_text(c, 503, "Service Unavailable", "no memory\n");
		return;
	}
	c->bodycap = STATUS_METRICS_CAP;
	n = c->w->cfg.metrics(c->w->cfg.metrics_arg, (char *)c->body, STATUS_METRICS_CAP);
	if (n < 0) {
		free(c->body);
		c->body = NULL;
		c->bodycap = 0;
		web_respond_text(c, 500, "Internal Server Error", "metrics too large\n");
		return;
	}
	c->bodylen = (size_t)n;
	c->bodyoff = 0;
	c->body_cut = 0;
	n = snprintf(h, sizeof(h),
	             "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
	             "Transfer-Encoding: chunked\r\nCache-Control: no-store\r\n"
	             "Connection: close\r\n\r\n");
	web_out_put(c, h, (size_t)n);
	c->st = C_BODY;
	web_body_step(c);
}

int web_serve_status(struct wconn *c, const char *path, size_t pl, const char *query, size_t qn)
{
	if ((pl == 7 || pl == 8) && memcmp(path, "/status/", pl) == 0)
		web_respond(c, 200, "OK", "text/html; charset=utf-8",
		            (const char *)web_status_status_html, web_status_status_html_len);
	else if (pl == 17 && memcmp(path, "/status/status.js", 17) == 0)
		web_respond(c, 200, "OK", "text/javascript; charset=utf-8",
		            (const char *)web_status_status_js, web_status_status_js_len);
	else if (pl == 15 && memcmp(path, "/status/metrics", 15) == 0)
		serve_metrics(c, query, qn);
	else
		return 0;
	return 1;
}
