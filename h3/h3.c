/* SPDX-License-Identifier: MIT */
/*
 * h3.c: the HTTP/3 wire pieces WebTransport needs (h3.h): varints, SETTINGS,
 * frame headers, the extended CONNECT and its response through nghttp3's
 * QPACK, wt-available-protocols, capsules, prefixes and the error-code
 * mapping. No state, no I/O: wt.c drives them per connection.
 */
#include "h3.h"
#include "moq_origin.h"
#include "ietf_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp3/nghttp3.h>

/* ------------------------------------------------------- error codes */

uint64_t moq_h3_code_to_h3(uint64_t c)
{
	c &= 0xffffffffull;
	return MOQ_H3_WT_CODE_FIRST + c + c / 0x1e;
}

uint64_t moq_h3_code_from_h3(uint64_t h)
{
	uint64_t d;

	if (h < MOQ_H3_WT_CODE_FIRST || h > MOQ_H3_WT_CODE_LAST)
		return h;
	d = h - MOQ_H3_WT_CODE_FIRST;
	return d - d / 0x1f;
}

/* ----------------------------------------------------------- settings */

int moq_h3_control_open(uint8_t *buf, size_t cap, int client)
{
	/* BINDINGS.md 1: the server's SETTINGS; a client sends the same
	 * datagram / WebTransport ones (ENABLE_CONNECT_PROTOCOL is a server's
	 * setting, RFC 8441, 3). Chrome 156 speaks draft-02 / -07 (it sends
	 * 0x2b603742 and reads the old codepoints); the -13 / -14 ones are for
	 * clients of the newer drafts, which ignore the old ones. */
	static const uint64_t server[][2] = {
	        {MOQ_H3_SET_ENABLE_CONNECT, 1},
	        {MOQ_H3_SET_H3_DATAGRAM, 1},
	        {MOQ_H3_SET_H3_DATAGRAM_OLD, 1},
	        {MOQ_H3_SET_WT_MAX_SESSIONS, 1},
	        {MOQ_H3_SET_WT_MAX_SESS_OLD, 1},
	        {MOQ_H3_SET_WT_ENABLE_OLD, 1},
	        {MOQ_H3_SET_WT_MAX_SESS_13, 1},
	        {MOQ_H3_SET_WT_ENABLED, 1},
	        {MOQ_H3_SET_WT_INIT_MAX_STREAMS_UNI, MOQ_H3_WT_INIT_STREAMS},
	        {MOQ_H3_SET_WT_INIT_MAX_STREAMS_BIDI, MOQ_H3_WT_INIT_STREAMS},
	        {MOQ_H3_SET_WT_INIT_MAX_DATA, MOQ_H3_WT_INIT_DATA},
	};
	uint8_t body[MOQ_H3_CONTROL_OPEN_MAX];
	size_t bl = 0, n = 0, first = client ? 1 : 0;

	for (size_t i = first; i < sizeof(server) / sizeof(server[0]); i++) {
		bl += moq_h3_varint_put(body + bl, server[i][0]);
		bl += moq_h3_varint_put(body + bl, server[i][1]);
	}
	if (cap < 1 + 1 + moq_h3_varint_len(bl) + bl)
		return MOQ_ERR_TOO_LARGE;
	n += moq_h3_varint_put(buf + n, MOQ_H3_STREAM_CONTROL);
	n += moq_h3_varint_put(buf + n, MOQ_H3_FRAME_SETTINGS);
	n += moq_h3_varint_put(buf + n, bl);
	memcpy(buf + n, body, bl);
	return (int)(n + bl);
}

int moq_h3_settings_decode(const uint8_t *p, size_t len, struct moq_h3_settings *out)
{
	size_t off = 0;
	uint64_t seen = 0; /* bits of the known identifiers, for repeats */

	memset(out, 0, sizeof(*out));
	while (off < len) {
		uint64_t id, val, bit = 0;
		int a = moq_h3_varint_get(p + off, len - off, &id), b;

		if (a < 0)
			return MOQ_ERR_DECODE;
		b = moq_h3_varint_get(p + off + (size_t)a, len - off - (size_t)a, &val);
		if (b < 0)
			return MOQ_ERR_DECODE;
		off += (size_t)a + (size_t)b;
		out->count++;
		/* RFC 9114, 7.2.4.1: HTTP/2's settings are an error here */
		if (id >= 0x02 && id <= 0x05)
			return MOQ_ERR_PROTO;
		switch (id) {
		case MOQ_H3_SET_QPACK_MAX_TABLE:
			out->qpack_max_table = val;
			bit = 1;
			break;
		case MOQ_H3_SET_QPACK_BLOCKED:
			out->qpack_blocked = val;
			bit = 2;
			break;
		case MOQ_H3_SET_MAX_FIELD_SECTION:
			out->max_field_section = val;
			bit = 4;
			break;
		case MOQ_H3_SET_ENABLE_CONNECT:
			out->enable_connect = val;
			bit = 8;
			break;
		case MOQ_H3_SET_H3_DATAGRAM:
		case MOQ_H3_SET_H3_DATAGRAM_OLD:
			if (val)
				out->h3_datagram = val;
			bit = id == MOQ_H3_SET_H3_DATAGRAM ? 16 : 32;
			break;
		case MOQ_H3_SET_WT_MAX_SESSIONS:
		case MOQ_H3_SET_WT_MAX_SESS_OLD:
		case MOQ_H3_SET_WT_MAX_SESS_13:
			if (val)
				out->wt_max_sessions = val;
			bit = id == MOQ_H3_SET_WT_MAX_SESSIONS   ? 64
			      : id == MOQ_H3_SET_WT_MAX_SESS_OLD ? 128
			                                         : 512;
			break;
		case MOQ_H3_SET_WT_ENABLE_OLD:
			out->wt_enable_old = val;
			bit = 256;
			break;
		case MOQ_H3_SET_WT_ENABLED:
			out->wt_enabled = val;
			bit = 1024;
			break;
		case MOQ_H3_SET_WT_INIT_MAX_DATA:
			out->wt_init_max_data = val;
			bit = 2048;
			break;
		case MOQ_H3_SET_WT_INIT_MAX_STREAMS_UNI:
			out->wt_init_max_streams_uni = val;
			bit = 4096;
			break;
		case MOQ_H3_SET_WT_INIT_MAX_STREAMS_BIDI:
			out->wt_init_max_streams_bidi = val;
			bit = 8192;
			break;
		default:
			break; /* RFC 9114, 7.2.4: unknown identifiers are ignored */
		}
		/* RFC 9114, 7.2.4: the same identifier twice is an error */
		if (seen & bit)
			return MOQ_ERR_PROTO;
		seen |= bit;
	}
	return 0;
}

int moq_h3_settings_webtransport(const struct moq_h3_settings *s)
{
	return s->h3_datagram == 1 &&
	       (s->wt_enabled != 0 || s->wt_max_sessions != 0 || s->wt_enable_old == 1);
}

/* ------------------------------------------------------ control stream */

void moq_h3_control_init(struct moq_h3_control *p, int peer_server)
{
	memset(p, 0, sizeof(*p));
	p->peer_server = peer_server;
}

void moq_h3_control_free(struct moq_h3_control *p)
{
	free(p->buf);
	p->buf = NULL;
	p->blen = p->bcap = 0;
}

static int ctl_fail(struct moq_h3_control *p, uint64_t code, uint64_t *h3err)
{
	moq_h3_control_free(p);
	p->failed = code;
	*h3err = code;
	return MOQ_ERR_PROTO;
}

/* A payload made of exactly one varint (RFC 9114, 7.1: more or fewer bytes
 * than the fields is H3_FRAME_ERROR). */
static int one_varint(const uint8_t *b, size_t len, uint64_t *v)
{
	int n = moq_h3_varint_get(b, len, v);

	return n > 0 && (size_t)n == len ? 0 : -1;
}

/* A frame's header is complete: may it come now, and is it kept? Returns
 * 1 (kept: its payload is read), 0 (skipped), or the error. */
static int ctl_head(struct moq_h3_control *p, uint64_t *h3err)
{
	uint64_t t = p->type;

	/* RFC 9114, 6.2.1: SETTINGS first */
	if (!p->got_settings && t != MOQ_H3_FRAME_SETTINGS)
		return ctl_fail(p, MOQ_H3_MISSING_SETTINGS, h3err);
	switch (t) {
	case MOQ_H3_FRAME_SETTINGS:
		/* 7.2.4: once; 7.2.4.2 bounds are ours (moq-relay: 64 KiB) */
		if (p->got_settings)
			return ctl_fail(p, MOQ_H3_FRAME_UNEXPECTED, h3err);
		if (p->left > MOQ_H3_MAX_FRAME)
			return ctl_fail(p, MOQ_H3_FRAME_ERROR, h3err);
		return 1;
	case MOQ_H3_FRAME_DATA:         /* 7.2.1 */
	case MOQ_H3_FRAME_HEADERS:      /* 7.2.2 */
	case MOQ_H3_FRAME_PUSH_PROMISE: /* 7.2.5 */
	case 0x02:                      /* 7.2.8: HTTP/2's PRIORITY, PING, */
	case 0x06:                      /* WINDOW_UPDATE, CONTINUATION */
	case 0x08:
	case 0x09:
		return ctl_fail(p, MOQ_H3_FRAME_UNEXPECTED, h3err);
	case MOQ_H3_FRAME_MAX_PUSH_ID:
		/* 7.2.7: only a client sends it */
		if (p->peer_server)
			return ctl_fail(p, MOQ_H3_FRAME_UNEXPECTED, h3err);
		/* fall through */
	case MOQ_H3_FRAME_GOAWAY:
	case MOQ_H3_FRAME_CANCEL_PUSH:
		/* one varint: at most 8 bytes, at least 1 */
		if (p->left == 0 || p->left > 8)
			return ctl_fail(p, MOQ_H3_FRAME_ERROR, h3err);
		return 1;
	default:
		return 0; /* 9: unknown types (GREASE, extensions) are ignored */
	}
}

/* A kept frame's whole payload @b (@len). Returns its events or the error. */
static int ctl_frame(struct moq_h3_control *p, const uint8_t *b, size_t len, uint64_t *h3err)
{
	uint64_t v;
	int rc;

	switch (p->type) {
	case MOQ_H3_FRAME_SETTINGS:
		rc = moq_h3_settings_decode(b, len, &p->settings);
		if (rc == MOQ_ERR_DECODE) /* 7.1: a truncated pair */
			return ctl_fail(p, MOQ_H3_FRAME_ERROR, h3err);
		if (rc < 0) /* 7.2.4 / 7.2.4.1: repeated, HTTP/2's */
			return ctl_fail(p, MOQ_H3_SETTINGS_ERROR, h3err);
		p->got_settings = 1;
		return MOQ_H3_CTL_SETTINGS;
	case MOQ_H3_FRAME_GOAWAY:
		if (one_varint(b, len, &v) < 0)
			return ctl_fail(p, MOQ_H3_FRAME_ERROR, h3err);
		/* 5.2: a server's names a client bidi stream; ids never grow */
		if ((p->peer_server && (v & 3) != 0) || (p->goaway && v > p->goaway_id))
			return ctl_fail(p, MOQ_H3_ID_ERROR, h3err);
		p->goaway = 1;
		p->goaway_id = v;
		return MOQ_H3_CTL_GOAWAY;
	case MOQ_H3_FRAME_MAX_PUSH_ID:
		if (one_varint(b, len, &v) < 0)
			return ctl_fail(p, MOQ_H3_FRAME_ERROR, h3err);
		/* 7.2.7: it never shrinks */
		if (p->max_push && v + 1 < p->max_push)
			return ctl_fail(p, MOQ_H3_ID_ERROR, h3err);
		p->max_push = v + 1;
		return 0;
	default: /* CANCEL_PUSH */
		if (one_varint(b, len, &v) < 0)
			return ctl_fail(p, MOQ_H3_FRAME_ERROR, h3err);
		/* 7.2.3: a push id above what was allowed (we never allowed
		 * a server any: we send no MAX_PUSH_ID) */
		if (p->peer_server || v >= p->max_push)
			return ctl_fail(p, MOQ_H3_ID_ERROR, h3err);
		return 0;
	}
}

int moq_h3_control_feed(struct moq_h3_control *p, const uint8_t *d, size_t len, uint64_t *h3err)
{
	size_t off = 0;
	int ev = 0, rc;

	if (p->failed) {
		*h3err = p->failed;
		return MOQ_ERR_PROTO;
	}
	while (off < len || (p->in_frame && p->left == 0)) {
		if (!p->in_frame) {
			/* the header: two varints, byte by byte across calls */
			int h;

			p->hdr[p->hl++] = d[off++];
			h = moq_h3_frame_head(p->hdr, p->hl, &p->type, &p->left);
			if (h == MOQ_ERR_SHORT)
				continue;
			p->hl = 0;
			p->in_frame = 1;
			rc = ctl_head(p, h3err);
			if (rc < 0)
				return rc;
			if (rc == 0) {
				p->type = UINT64_MAX; /* skipped: not kept */
				continue;
			}
			if (p->left == 0)
				continue; /* an empty SETTINGS: complete below */
			if ((size_t)p->left <= len - off) {
				/* all of it here: read in place */
				rc = ctl_frame(p, d + off, (size_t)p->left, h3err);
				if (rc < 0)
					return rc;
				ev |= rc;
				off += (size_t)p->left;
				p->left = 0;
				p->in_frame = 0;
				continue;
			}
			p->buf = malloc((size_t)p->left);
			if (!p->buf)
				return MOQ_ERR_NOMEM;
			p->blen = 0;
			p->bcap = (size_t)p->left;
			continue;
		}
		if (p->left) {
			size_t n = len - off < p->left ? len - off : (size_t)p->left;

			if (p->buf) {
				memcpy(p->buf + p->blen, d + off, n);
				p->blen += n;
			}
			off += n;
			p->left -= n;
			if (p->left)
				break;
		}
		/* the frame is complete */
		p->in_frame = 0;
		if (p->type == UINT64_MAX)
			continue;
		rc = ctl_frame(p, p->buf ? p->buf : (const uint8_t *)"", p->blen, h3err);
		moq_h3_control_free(p);
		if (rc < 0)
			return rc;
		ev |= rc;
	}
	return ev;
}

/* ------------------------------------------------------------ frames */

int moq_h3_frame_head(const uint8_t *p, size_t len, uint64_t *type, uint64_t *flen)
{
	int a = moq_h3_varint_get(p, len, type), b;

	if (a < 0)
		return a;
	b = moq_h3_varint_get(p + a, len - (size_t)a, flen);
	if (b < 0)
		return b;
	return a + b;
}

/* ----------------------------------------------------- protocol lists */

static const struct {
	const char *name;
	enum moq_version v;
} versions[] = {
        {MOQ_ALPN_06, MOQ_LITE_06},
        {MOQ_ALPN_05, MOQ_LITE_05},
        {MOQ_ALPN_04, MOQ_LITE_04},
        {MOQ_ALPN_03, MOQ_LITE_03},
        /* IETF moq-transport (moq/ietf_session.c) */
        {"moqt-20", MOQ_VERSION_IETF(20)},
        {"moqt-19", MOQ_VERSION_IETF(19)},
        {"moqt-18", MOQ_VERSION_IETF(18)},
        {"moqt-17", MOQ_VERSION_IETF(17)},
        {"moqt-16", MOQ_VERSION_IETF(16)},
        {"moqt-15", MOQ_VERSION_IETF(15)},
        {"moq-00", MOQ_VERSION_IETF(14)},
};

static enum moq_version version_of(const char *s, size_t len)
{
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		if (strlen(versions[i].name) == len && memcmp(versions[i].name, s, len) == 0)
			return versions[i].v;
	return 0;
}

static const char *version_name(enum moq_version v)
{
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		if (versions[i].v == v)
			return versions[i].name;
	return NULL;
}

static size_t skip_ows(const char *s, size_t i, size_t len)
{
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return i;
}

/* RFC 8941, 3.1 / 3.3.3: a list of sf-strings, each with optional
 * parameters (skipped). The first of ours wins (the client's order). */
int moq_h3_protocols_pick(const char *s, size_t len)
{
	size_t i = skip_ows(s, 0, len);
	enum moq_version best = 0, best_ietf = 0;

	if (i == len)
		return 0; /* an empty list */
	for (;;) {
		char item[64];
		size_t il = 0;
		int too_long = 0;

		if (i >= len || s[i] != '"')
			return MOQ_ERR_DECODE;
		for (i++;; i++) {
			if (i >= len)
				return MOQ_ERR_DECODE;
			if (s[i] == '\\') {
				if (++i >= len || (s[i] != '"' && s[i] != '\\'))
					return MOQ_ERR_DECODE;
			} else if (s[i] == '"') {
				i++;
				break;
			} else if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) {
				return MOQ_ERR_DECODE;
			}
			if (il < sizeof(item))
				item[il++] = s[i];
			else
				too_long = 1;
		}
		/* parameters: ;key[=value] */
		while (i < len && s[i] == ';') {
			i++;
			while (i < len && s[i] != ';' && s[i] != ',' && s[i] != '"')
				i++;
			if (i < len && s[i] == '"')
				return MOQ_ERR_DECODE; /* a quoted parameter value: not ours */
		}
		if (!too_long) {
			enum moq_version v = version_of(item, il);
			/* moq-lite first, then IETF moq-transport: each in the
			 * client's order */
			if (v && MOQ_VERSION_IS_IETF(v)) {
				if (!best_ietf)
					best_ietf = v;
			} else if (!best) {
				best = v;
			}
		}
		i = skip_ows(s, i, len);
		if (i == len)
			break;
		if (s[i] != ',')
			return MOQ_ERR_DECODE;
		i = skip_ows(s, i + 1, len);
		if (i == len)
			return MOQ_ERR_DECODE; /* a trailing comma */
	}
	return (int)(best ? best : best_ietf);
}

/* ------------------------------------------- :authority and Origin */

static int is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* RFC 3986, 2.3 / 2.2: unreserved and sub-delims */
static int reg_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("-._~!$&'()*+,;=", c) != NULL;
}

int moq_h3_authority_ok(const char *a, size_t len)
{
	size_t i = 0;

	if (len == 0)
		return 0;
	if (a[0] == '[') {
		/* RFC 3986, 3.2.2: IP-literal; IPv6 / IPvFuture characters */
		for (i = 1; i < len && a[i] != ']'; i++)
			if (!is_hex(a[i]) && a[i] != ':' && a[i] != '.' && a[i] != 'v' &&
			    a[i] != 'V')
				return 0;
		if (i >= len || i == 1)
			return 0;
		i++;
	} else {
		for (; i < len && a[i] != ':'; i++) {
			if (a[i] == '%') {
				if (i + 2 >= len || !is_hex(a[i + 1]) || !is_hex(a[i + 2]))
					return 0;
				i += 2;
			} else if (a[i] == '\0' || !reg_char(a[i])) {
				return 0; /* '@' (userinfo), '/', space, controls */
			}
		}
		if (i == 0)
			return 0; /* no host */
	}
	if (i == len)
		return 1;
	if (a[i] != ':')
		return 0;
	/* RFC 3986, 3.2.3: port = *DIGIT; we want one, at most 65535 */
	{
		size_t d = len - i - 1;
		unsigned long port = 0;

		if (d == 0 || d > 5)
			return 0;
		for (i++; i < len; i++) {
			if (a[i] < '0' || a[i] > '9')
				return 0;
			port = port * 10 + (unsigned long)(a[i] - '0');
		}
		return port <= 65535;
	}
}

int moq_h3_origin_allowed(const char *list, const char *origin, size_t len)
{
	return moq_origin_allowed(list, origin, len); /* common/moq_origin.h */
}

/* ----------------------------------------------------------- CONNECT */

enum {
	PH_METHOD = 1,
	PH_PROTOCOL = 2,
	PH_SCHEME = 4,
	PH_AUTHORITY = 8,
	PH_PATH = 16,
};

static int eq(const nghttp3_vec *v, const char *s)
{
	return v->len == strlen(s) && memcmp(v->base, s, v->len) == 0;
}

static char *dup_vec(const nghttp3_vec *v)
{
	char *p = malloc(v->len + 1);

	if (p) {
		memcpy(p, v->base, v->len);
		p[v->len] = '\0';
	}
	return p;
}

static int refuse(struct moq_h3_request *r, int status, const char *why)
{
	if (r->status == 200) {
		r->status = status;
		r->why = why;
	}
	return 0;
}

/* One decoded field of the request: check and keep what matters. */
static int request_field(struct moq_h3_request *r, unsigned *seen, int *protos, int *has_protos,
                         const nghttp3_vec *n, const nghttp3_vec *v)
{
	unsigned bit = 0;

	if (n->len > 0 && n->base[0] == ':') {
		/* RFC 9114, 4.3: pseudo-headers first, each once, known ones */
		if (*seen & 0x100)
			return refuse(r, 400, "pseudo-header after a regular field");
		if (eq(n, ":method"))
			bit = PH_METHOD;
		else if (eq(n, ":protocol"))
			bit = PH_PROTOCOL;
		else if (eq(n, ":scheme"))
			bit = PH_SCHEME;
		else if (eq(n, ":authority"))
			bit = PH_AUTHORITY;
		else if (eq(n, ":path"))
			bit = PH_PATH;
		else
			return refuse(r, 400, "unknown pseudo-header");
		if (*seen & bit)
			return refuse(r, 400, "pseudo-header repeated");
		*seen |= bit;
		switch (bit) {
		case PH_METHOD:
			if (!eq(v, "CONNECT"))
				return refuse(r, 400, ":method is not CONNECT");
			break;
		case PH_PROTOCOL:
			if (!eq(v, "webtransport"))
				return refuse(r, 501, ":protocol is not webtransport");
			break;
		case PH_SCHEME:
			if (!eq(v, "https"))
				return refuse(r, 400, ":scheme is not https");
			break;
		case PH_AUTHORITY:
			if (v->len == 0)
				return refuse(r, 400, "empty :authority");
			if (!moq_h3_authority_ok((const char *)v->base, v->len))
				return refuse(r, 400, ":authority is not host[:port]");
			free(r->authority);
			r->authority = dup_vec(v);
			if (!r->authority)
				return MOQ_ERR_NOMEM;
			break;
		case PH_PATH:
			if (v->len == 0 || v->base[0] != '/')
				return refuse(r, 400, ":path does not start with /");
			free(r->path);
			r->path = dup_vec(v);
			if (!r->path)
				return MOQ_ERR_NOMEM;
			r->path_len = v->len;
			break;
		}
		return 0;
	}
	*seen |= 0x100;
	if (eq(n, "origin")) {
		/* RFC 6454, 7.3: one Origin */
		if (r->origin)
			return refuse(r, 400, "Origin repeated");
		r->origin = dup_vec(v);
		if (!r->origin)
			return MOQ_ERR_NOMEM;
		if (memchr(v->base, '\0', v->len))
			return refuse(r, 400, "NUL in Origin");
		return 0;
	}
	if (eq(n, "wt-available-protocols")) {
		int p = moq_h3_protocols_pick((const char *)v->base, v->len);

		*has_protos = 1;
		if (p < 0)
			return refuse(r, 400, "wt-available-protocols is not a list of strings");
		if (!*protos)
			*protos = p;
	}
	return 0;
}

int moq_h3_connect_parse(int64_t sid, const uint8_t *block, size_t len, struct moq_h3_request *out)
{
	const nghttp3_mem *mem = nghttp3_mem_default();
	nghttp3_qpack_decoder *dec = NULL;
	nghttp3_qpack_stream_context *sctx = NULL;
	unsigned seen = 0;
	int protos = 0, has_protos = 0, rv = 0;
	size_t off = 0;

	memset(out, 0, sizeof(*out));
	out->status = 200;
	/* RFC 9204, 3.2.3: our SETTINGS announce capacity 0 and no blocked
	 * streams, so the field section can only use the static table. */
	if (nghttp3_qpack_decoder_new(&dec, 0, 0, mem) != 0)
		return MOQ_ERR_NOMEM;
	if (nghttp3_qpack_stream_context_new(&sctx, sid, mem) != 0) {
		rv = MOQ_ERR_NOMEM;
		goto done;
	}
	for (;;) {
		nghttp3_qpack_nv nv;
		uint8_t flags = 0;
		nghttp3_ssize n = nghttp3_qpack_decoder_read_request(dec, sctx, &nv, &flags,
		                                                     block + off, len - off, 1);

		if (n < 0) {
			rv = n == NGHTTP3_ERR_NOMEM ? MOQ_ERR_NOMEM : MOQ_ERR_DECODE;
			goto done;
		}
		off += (size_t)n;
		if (flags & NGHTTP3_QPACK_DECODE_FLAG_BLOCKED) {
			rv = MOQ_ERR_DECODE; /* refers to a dynamic table we never allowed */
			goto done;
		}
		if (flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT) {
			nghttp3_vec nm = nghttp3_rcbuf_get_buf(nv.name);
			nghttp3_vec vl = nghttp3_rcbuf_get_buf(nv.value);

			rv = request_field(out, &seen, &protos, &has_protos, &nm, &vl);
			nghttp3_rcbuf_decref(nv.name);
			nghttp3_rcbuf_decref(nv.value);
			if (rv < 0)
				goto done;
		}
		if (flags & NGHTTP3_QPACK_DECODE_FLAG_FINAL)
			break;
		if (n == 0 && off >= len) {
			rv = MOQ_ERR_DECODE;
			goto done;
		}
	}
	if (!(seen & PH_METHOD))
		refuse(out, 400, "no :method");
	if (!(seen & PH_PROTOCOL))
		refuse(out, 400, "no :protocol (not an extended CONNECT)");
	if (!(seen & PH_SCHEME))
		refuse(out, 400, "no :scheme");
	if (!(seen & PH_AUTHORITY))
		refuse(out, 400, "no :authority");
	if (!(seen & PH_PATH))
		refuse(out, 400, "no :path");
	if (has_protos && !protos)
		refuse(out, 406, "wt-available-protocols offers no moq-lite version of ours");
	/* no list: the default version, named nowhere (MOQ_H3_DEFAULT_VERSION) */
	out->negotiated = has_protos;
	out->v = out->status != 200 ? 0
	         : has_protos       ? (enum moq_version)protos
	                            : MOQ_H3_DEFAULT_VERSION;
done:
	nghttp3_qpack_stream_context_del(sctx);
	nghttp3_qpack_decoder_del(dec);
	if (rv < 0)
		moq_h3_request_free(out);
	return rv;
}

void moq_h3_request_free(struct moq_h3_request *r)
{
	free(r->path);
	free(r->authority);
	free(r->origin);
	r->path = NULL;
	r->authority = NULL;
	r->origin = NULL;
	r->path_len = 0;
}

static void nv_set(nghttp3_nv *nv, const char *n, const char *v)
{
	nv->name = (uint8_t *)(uintptr_t)n;
	nv->namelen = strlen(n);
	nv->value = (uint8_t *)(uintptr_t)v;
	nv->valuelen = strlen(v);
	nv->flags = NGHTTP3_NV_FLAG_NONE;
}

/* A HEADERS frame holding @nva QPACK-encoded (static table, literals). */
static uint8_t *headers_frame(int64_t sid, const nghttp3_nv *nva, size_t nvlen, size_t *out_len)
{
	const nghttp3_mem *mem = nghttp3_mem_default();
	nghttp3_qpack_encoder *enc = NULL;
	nghttp3_buf pbuf, rbuf, ebuf;
	uint8_t *out = NULL;

	nghttp3_buf_init(&pbuf);
	nghttp3_buf_init(&rbuf);
	nghttp3_buf_init(&ebuf);
	if (nghttp3_qpack_encoder_new(&enc, 0, mem) != 0)
		return NULL;
	if (nghttp3_qpack_encoder_encode(enc, &pbuf, &rbuf, &ebuf, sid, nva, nvlen) == 0) {
		size_t pl = (size_t)(pbuf.last - pbuf.pos), rl = (size_t)(rbuf.last - rbuf.pos);
		size_t bl = pl + rl, n = 0;

		out = malloc(16 + bl);
		if (out) {
			n += moq_h3_varint_put(out + n, MOQ_H3_FRAME_HEADERS);
			n += moq_h3_varint_put(out + n, bl);
			memcpy(out + n, pbuf.pos, pl);
			memcpy(out + n + pl, rbuf.pos, rl);
			*out_len = n + bl;
		}
	}
	nghttp3_buf_free(&pbuf, mem);
	nghttp3_buf_free(&rbuf, mem);
	nghttp3_buf_free(&ebuf, mem);
	nghttp3_qpack_encoder_del(enc);
	return out;
}

uint8_t *moq_h3_response_encode(int64_t sid, int status, enum moq_version v, size_t *out_len)
{
	nghttp3_nv nva[3];
	char st[8], proto[32];
	size_t n = 0;
	const char *name = version_name(v);

	snprintf(st, sizeof(st), "%d", status);
	nv_set(&nva[n++], ":status", st);
	if (status == 200) {
		/* draft-ietf-webtrans-http3-02, 3.3: what Chrome checks */
		nv_set(&nva[n++], "sec-webtransport-http3-draft", "draft02");
		if (name) {
			snprintf(proto, sizeof(proto), "\"%s\"", name);
			nv_set(&nva[n++], "wt-protocol", proto);
		}
	}
	return headers_frame(sid, nva, n, out_len);
}

uint8_t *moq_h3_request_encode(int64_t sid, const char *authority, const char *path,
                               size_t *out_len)
{
	nghttp3_nv nva[7];

	nv_set(&nva[0], ":method", "CONNECT");
	nv_set(&nva[1], ":protocol", "webtransport");
	nv_set(&nva[2], ":scheme", "https");
	nv_set(&nva[3], ":authority", authority);
	nv_set(&nva[4], ":path", path);
	nv_set(&nva[5], "sec-webtransport-http3-draft02", "1");
	nv_set(&nva[6], "wt-available-protocols",
	       "\"" MOQ_ALPN_05 "\", \"" MOQ_ALPN_04 "\", \"" MOQ_ALPN_03 "\"");
	return headers_frame(sid, nva, 7, out_len);
}

int moq_h3_response_parse(int64_t sid, const uint8_t *block, size_t len, int *status,
                          enum moq_version *v)
{
	const nghttp3_mem *mem = nghttp3_mem_default();
	nghttp3_qpack_decoder *dec = NULL;
	nghttp3_qpack_stream_context *sctx = NULL;
	size_t off = 0;
	int rv = MOQ_ERR_DECODE;

	*status = 0;
	*v = 0;
	if (nghttp3_qpack_decoder_new(&dec, 0, 0, mem) != 0)
		return MOQ_ERR_NOMEM;
	if (nghttp3_qpack_stream_context_new(&sctx, sid, mem) != 0) {
		nghttp3_qpack_decoder_del(dec);
		return MOQ_ERR_NOMEM;
	}
	for (;;) {
		nghttp3_qpack_nv nv;
		uint8_t flags = 0;
		nghttp3_ssize n = nghttp3_qpack_decoder_read_request(dec, sctx, &nv, &flags,
		                                                     block + off, len - off, 1);

		if (n < 0 || (flags & NGHTTP3_QPACK_DECODE_FLAG_BLOCKED))
			break;
		off += (size_t)n;
		if (flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT) {
			nghttp3_vec nm = nghttp3_rcbuf_get_buf(nv.name);
			nghttp3_vec vl = nghttp3_rcbuf_get_buf(nv.value);

			if (eq(&nm, ":status") && vl.len == 3)
				*status = (vl.base[0] - '0') * 100 + (vl.base[1] - '0') * 10 +
				          (vl.base[2] - '0');
			else if (eq(&nm, "wt-protocol")) {
				int p = moq_h3_protocols_pick((const char *)vl.base, vl.len);
				*v = p > 0 ? (enum moq_version)p : 0;
			}
			nghttp3_rcbuf_decref(nv.name);
			nghttp3_rcbuf_decref(nv.value);
		}
		if (flags & NGHTTP3_QPACK_DECODE_FLAG_FINAL) {
			rv = *status >= 100 && *status <= 999 ? 0 : MOQ_ERR_DECODE;
			break;
		}
		if (n == 0 && off >= len)
			break;
	}
	nghttp3_qpack_stream_context_del(sctx);
	nghttp3_qpack_decoder_del(dec);
	return rv;
}

/* ---------------------------------------------------------- capsules */

int moq_h3_capsule_get(const uint8_t *p, size_t len, uint64_t *type, const uint8_t **val,
                       size_t *vlen)
{
	uint64_t l;
	int h = moq_h3_frame_head(p, len, type, &l); /* same shape: type, length */

	if (h < 0)
		return h;
	if (l > MOQ_H3_MAX_FRAME)
		return MOQ_ERR_TOO_LARGE;
	if (len - (size_t)h < l)
		return MOQ_ERR_SHORT;
	*val = p + h;
	*vlen = (size_t)l;
	return h + (int)l;
}

int moq_h3_close_capsule(uint8_t *buf, size_t cap, uint32_t code, const char *reason,
                         size_t reason_len)
{
	size_t cl, n = 0;

	if (reason_len > 1024) /* draft-ietf-webtrans-http3, 5: at most 1024 bytes */
		reason_len = 1024;
	cl = 4 + reason_len;
	if (cap < 1 + 8 + 4 + 8 + cl)
		return MOQ_ERR_TOO_LARGE;
	n += moq_h3_varint_put(buf + n, MOQ_H3_FRAME_DATA);
	n += moq_h3_varint_put(buf + n, moq_h3_varint_len(MOQ_H3_CAPSULE_CLOSE_WT) +
	                                        moq_h3_varint_len(cl) + cl);
	n += moq_h3_varint_put(buf + n, MOQ_H3_CAPSULE_CLOSE_WT);
	n += moq_h3_varint_put(buf + n, cl);
	buf[n++] = (uint8_t)(code >> 24);
	buf[n++] = (uint8_t)(code >> 16);
	buf[n++] = (uint8_t)(code >> 8);
	buf[n++] = (uint8_t)code;
	if (reason_len)
		memcpy(buf + n, reason, reason_len);
	return (int)(n + reason_len);
}

/* ----------------------------------------------------------- prefixes */

size_t moq_h3_stream_prefix(uint8_t *buf, int bidi, uint64_t session_id)
{
	size_t n = moq_h3_varint_put(buf, bidi ? MOQ_H3_STREAM_WT_BIDI : MOQ_H3_STREAM_WT_UNI);

	return n + moq_h3_varint_put(buf + n, session_id);
}

size_t moq_h3_datagram_prefix(uint8_t *buf, uint64_t session_id)
{
	/* RFC 9297, 2.1: Quarter Stream ID = the request stream's id / 4 */
	return moq_h3_varint_put(buf, session_id / 4);
}

int moq_h3_datagram_parse(const uint8_t *p, size_t len, uint64_t *session_id)
{
	uint64_t q;
	int n = moq_h3_varint_get(p, len, &q);

	/* RFC 9297, 2.1: at most 2^60 - 1 (the stream id is a 62-bit varint) */
	if (n < 0 || q >= (1ull << 60))
		return MOQ_ERR_DECODE;
	*session_id = q * 4;
	return n;
}
