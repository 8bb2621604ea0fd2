/* SPDX-License-Identifier: MIT */
/*
 * wt.c: one WebTransport session on one QUIC connection (h3.h): the HTTP/3
 * control streams, the extended CONNECT, the stream prefixes, capsules and
 * the moq-lite binding (moq_binding_*) the session runs on.
 *
 * Stream ids are QUIC's. Locally opened streams are the session's, except
 * our control stream (and, on a client, the CONNECT stream); they start
 * with the prefix, written at open from memory in struct moq_wt, and their
 * acknowledged offsets are reported to the session minus that prefix. Peer
 * streams are kept in a small table while their type / prefix is read;
 * after it, a WebTransport stream's bytes go to the session as they come.
 */
#include "h3.h"

#include <stdlib.h>
#include <string.h>

enum wkind {
	K_PENDING = 0, /* type / signal not read yet */
	K_CONTROL,     /* the peer's control stream */
	K_QPACK,       /* the peer's QPACK encoder / decoder stream: read and dropped */
	K_DROP,        /* unknown types: read and dropped */
	K_WT,          /* a WebTransport stream: the session's */
	K_CONNECT,     /* the CONNECT (request) stream */
	K_REJECTED,    /* refused: nothing more is read */
};

/* A peer-opened stream. */
struct wst {
	int64_t sid; /* -1: free slot */
	uint8_t kind;
	uint8_t bidi;
	uint8_t hl;      /* header bytes in hdr */
	uint8_t fin;     /* (client, session not open yet) FIN buffered */
	uint8_t hdr[16]; /* type / signal and session id, while incomplete */
	uint8_t *buf;    /* (client) stream bytes that came before the session */
	uint32_t blen;
};

/* Bytes a client keeps of streams that arrive before the 200 response. */
#define EARLY_MAX (64u * 1024)

enum wstate {
	W_HANDSHAKE = 0, /* client: before the QUIC handshake */
	W_CONNECTING,    /* waiting for the CONNECT (server) / its response (client) */
	W_OPEN,          /* the session runs */
	W_CLOSING,       /* capsule sent or received: the connection closes next */
};

struct moq_wt {
	struct moq_quic_conn *c;
	struct moq_node *n;
	struct moq_session *s;
	struct moq_wt_stats *st;
	struct moq_wt_cfg cfg; /* (server) its strings borrowed */
	int server;
	enum wstate state;
	int role;                   /* client: moq_binding_connect's role */
	void *user;                 /* client: the session's user pointer */
	void (*failed)(void *user); /* client: ended before a session */
	/* inside one of our callbacks (a close there runs conn_closed at
	 * once): freed by the outermost one when dead */
	int depth, dead;
	char *authority, *path;
	int64_t ctl_sid;      /* our control stream */
	int64_t connect_sid;  /* the CONNECT stream = the session id; -1 before */
	uint64_t connect_end; /* bytes we wrote on the CONNECT stream (capsule acked?) */
	int capsule_sent;
	uint64_t close_code; /* moq-lite code the session ends with */
	int close_local;
	int have_close;
	/* Memory streams reference until acknowledged or the connection ends. */
	uint8_t ctl[MOQ_H3_CONTROL_OPEN_MAX];
	size_t ctl_len;
	uint8_t pfx_uni[16], pfx_bidi[16];
	size_t pfx_uni_len, pfx_bidi_len;
	uint8_t *head; /* response (server) / request (client) HEADERS frame */
	size_t head_len;
	uint8_t capsule[1100];
	/* the CONNECT stream's input, frames reassembled */
	uint8_t *crx;
	size_t crx_len;
	int crx_fin;   /* it ended (seen while the request was held) */
	int held;      /* (server) the CONNECT waits in crx for the client's SETTINGS */
	/* ... on this thread's list of held ones until then, at most
	 * MOQ_WT_SETTINGS_WAIT_NS (moq_wt_timers; 0: not set yet) */
	struct moq_wt *held_next;
	uint64_t held_deadline;
	uint8_t *caps; /* DATA payloads: the capsule stream */
	size_t caps_len;
	/* the peer's control stream, read for the whole connection */
	struct moq_h3_control ctlp;
	uint8_t peer_uni; /* PEER_* of the unidirectional streams it opened */
	/* peer streams, open addressing on sid */
	struct wst *tab;
	uint32_t cap, used;
	uint32_t early; /* bytes buffered in tab[].buf */
};

/* The peer's critical streams, each at most once (RFC 9114, 6.2.1; RFC
 * 9204, 4.2). */
#define PEER_CONTROL   1u
#define PEER_QPACK_ENC 2u
#define PEER_QPACK_DEC 4u

static struct moq_wt_stats dummy_stats;

/* The CONNECTs held for their client's SETTINGS on this thread (a worker's
 * connections live on its thread): moq_wt_timers ends the wait. */
static __thread struct moq_wt *held_head;

static void held_unlink(struct moq_wt *w)
{
	for (struct moq_wt **pp = &held_head; *pp; pp = &(*pp)->held_next)
		if (*pp == w) {
			*pp = w->held_next;
			break;
		}
	w->held_next = NULL;
}
static const struct moq_quic_callbacks wt_cbs;
static const struct moq_binding_ops wt_ops;

/* ----------------------------------------------------------- the table */

static uint32_t slot(int64_t sid, uint32_t cap)
{
	return (uint32_t)(((uint64_t)sid >> 2) * 0x9e3779b97f4a7c15ull >> 40) & (cap - 1);
}

static struct wst *tab_get(struct moq_wt *w, int64_t sid)
{
	if (!w->cap)
		return NULL;
	for (uint32_t i = slot(sid, w->cap), n = 0; n < w->cap; i = (i + 1) & (w->cap - 1), n++) {
		if (w->tab[i].sid == sid)
			return &w->tab[i];
		if (w->tab[i].sid == -1)
			return NULL;
	}
	return NULL;
}

static int tab_grow(struct moq_wt *w)
{
	uint32_t ncap = w->cap ? w->cap * 2 : 16;
	struct wst *nt = malloc(sizeof(*nt) * ncap), *old = w->tab;

	if (!nt)
		return MOQ_ERR_NOMEM;
	for (uint32_t i = 0; i < ncap; i++)
		nt[i].sid = -1;
	for (uint32_t i = 0; i < w->cap; i++) {
		if (old[i].sid == -1)
			continue;
		uint32_t j = slot(old[i].sid, ncap);
		while (nt[j].sid != -1)
			j = (j + 1) & (ncap - 1);
		nt[j] = old[i];
	}
	free(old);
	w->tab = nt;
	w->cap = ncap;
	return 0;
}

static struct wst *tab_add(struct moq_wt *w, int64_t sid)
{
	uint32_t i;

	if ((w->used + 1) * 4 > w->cap * 3 && tab_grow(w) < 0)
		return NULL;
	i = slot(sid, w->cap);
	while (w->tab[i].sid != -1)
		i = (i + 1) & (w->cap - 1);
	memset(&w->tab[i], 0, sizeof(w->tab[i]));
	w->tab[i].sid = sid;
	w->used++;
	return &w->tab[i];
}

/* Backward-shift deletion (no tombstones). */
static void tab_del(struct moq_wt *w, struct wst *e)
{
	uint32_t i = (uint32_t)(e - w->tab), j = i;

	if (e->buf) {
		w->early -= e->blen;
		free(e->buf);
	}
	for (;;) {
		uint32_t k;

		w->tab[i].sid = -1;
		for (;;) {
			j = (j + 1) & (w->cap - 1);
			if (w->tab[j].sid == -1) {
				w->used--;
				return;
			}
			k = slot(w->tab[j].sid, w->cap);
			/* can tab[j] move to i? (k cyclically not in (i, j]) */
			if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
				continue;
			break;
		}
		w->tab[i] = w->tab[j];
		i = j;
	}
}

/* ----------------------------------------------------------- helpers */

static int is_local(const struct moq_wt *w, int64_t sid)
{
	return (int)(sid & 1) == (w->server ? 1 : 0);
}

/* A stream of the session's (as opposed to HTTP/3's own). */
static int local_wt(const struct moq_wt *w, int64_t sid)
{
	return is_local(w, sid) && sid != w->ctl_sid && sid != w->connect_sid;
}

static size_t pfx_len(const struct moq_wt *w, int64_t sid)
{
	return (sid & 2) ? w->pfx_uni_len : w->pfx_bidi_len;
}

/* Close the whole connection with an HTTP/3 error (RFC 9114, 8). */
static void h3_fail(struct moq_wt *w, uint64_t h3code, const char *why)
{
	if (w->dead)
		return;
	if (w->state == W_CLOSING && w->capsule_sent)
		return;
	w->st->h3_errors++;
	if (!w->have_close) {
		w->have_close = 1;
		w->close_code = MOQ_CODE_PROTOCOL_VIOLATION;
		w->close_local = 1;
	}
	w->state = W_CLOSING;
	moq_quic_conn_close(w->c, h3code, why);
}

static void reject_stream(struct moq_wt *w, struct wst *e, uint64_t h3code)
{
	if (w->dead)
		return;
	w->st->streams_rejected++;
	e->kind = K_REJECTED;
	moq_quic_stream_stop_sending(w->c, e->sid, h3code);
	if (e->bidi)
		moq_quic_stream_reset(w->c, e->sid, h3code);
}

/* Write @len bytes of @w-owned memory on @sid (they stay until the
 * connection ends). */
static int put(struct moq_wt *w, int64_t sid, const void *p, size_t len, int fin)
{
	struct iovec iov = {.iov_base = (void *)(uintptr_t)p, .iov_len = len};
	long rc;

	if (w->dead)
		return MOQ_ERR_CLOSED;
	rc = moq_quic_stream_write(w->c, sid, &iov, len ? 1 : 0, fin);

	return rc < 0 ? (int)rc : 0;
}

static void set_session_id(struct moq_wt *w, int64_t sid)
{
	w->connect_sid = sid;
	w->pfx_uni_len = moq_h3_stream_prefix(w->pfx_uni, 0, (uint64_t)sid);
	w->pfx_bidi_len = moq_h3_stream_prefix(w->pfx_bidi, 1, (uint64_t)sid);
}

/* Send the close capsule and FIN on the CONNECT stream; the connection is
 * closed when the peer has it (stream_acked) or closes first. */
static void send_close(struct moq_wt *w, uint64_t code, const char *reason)
{
	int n;

	w->state = W_CLOSING;
	if (w->dead)
		return;
	if (w->capsule_sent)
		return;
	w->capsule_sent = 1;
	n = moq_h3_close_capsule(w->capsule, sizeof(w->capsule), (uint32_t)code, reason,
	                         reason ? strlen(reason) : 0);
	if (w->connect_sid < 0 || n < 0 || put(w, w->connect_sid, w->capsule, (size_t)n, 1) < 0) {
		moq_quic_conn_close(w->c, moq_h3_code_to_h3(code), reason);
		return;
	}
	w->connect_end += (uint64_t)n;
}

/* ------------------------------------------------------ binding (ops) */

static int op_stream_open(void *b, int bidi, int64_t *sid)
{
	struct moq_wt *w = b;
	int rc;

	if (w->state != W_OPEN)
		return MOQ_ERR_STATE;
	rc = moq_quic_stream_open(w->c, bidi, sid);
	if (rc < 0)
		return rc;
	/* draft-ietf-webtrans-http3, 4.1 / 4.2: the prefix first */
	rc = bidi ? put(w, *sid, w->pfx_bidi, w->pfx_bidi_len, 0)
	          : put(w, *sid, w->pfx_uni, w->pfx_uni_len, 0);
	if (rc < 0) {
		moq_quic_stream_reset(w->c, *sid, moq_h3_code_to_h3(MOQ_CODE_CANCEL));
		return rc;
	}
	return 0;
}

static long op_stream_write(void *b, int64_t sid, const struct iovec *iov, size_t n, int fin)
{
	struct moq_wt *w = b;

	return moq_quic_stream_write(w->c, sid, iov, n, fin);
}

static int op_stream_reset(void *b, int64_t sid, uint64_t code)
{
	struct moq_wt *w = b;

	return moq_quic_stream_reset(w->c, sid, moq_h3_code_to_h3(code));
}

static int op_stream_stop_sending(void *b, int64_t sid, uint64_t code)
{
	struct moq_wt *w = b;

	return moq_quic_stream_stop_sending(w->c, sid, moq_h3_code_to_h3(code));
}

static void op_close(void *b, uint64_t code)
{
	struct moq_wt *w = b;

	if (!w->have_close) {
		w->have_close = 1;
		w->close_code = code;
		w->close_local = 1;
	}
	send_close(w, code, NULL);
}

static void op_get_info(void *b, struct moq_quic_conn_info *out)
{
	struct moq_wt *w = b;

	moq_quic_conn_get_info(w->c, out);
}

/* lite-05 6.4 over WebTransport: an HTTP/3 datagram (RFC 9297, 2.1) of
 * the session, the Quarter Stream ID before the moq-lite header (both
 * copied by quic/dgram.c; the payload referenced) */
static int op_dgram_send(void *b, const uint8_t *hdr, size_t hdrlen, const struct iovec *iov,
                         size_t iovcnt, void (*release)(void *arg), void *arg)
{
	struct moq_wt *w = b;
	uint8_t h[MOQ_QUIC_DGRAM_HDR_MAX];
	size_t pl;

	if (w->state != W_OPEN || w->connect_sid < 0 || hdrlen + 8 > sizeof(h))
		return MOQ_ERR_STATE;
	pl = moq_h3_datagram_prefix(h, (uint64_t)w->connect_sid);
	memcpy(h + pl, hdr, hdrlen);
	return moq_quic_dgram_send(w->c, h, pl + hdrlen, iov, iovcnt, release, arg);
}

/* --auth-url: the QUIC connection's addresses and SNI (moq/access.c) */
static void op_get_peer(void *b, char *remote, char *local, size_t acap, char *server_name,
                        size_t scap)
{
	struct moq_wt *w = b;

	moq_quic_addr_str(moq_quic_conn_remote(w->c), remote, acap);
	moq_quic_addr_str(moq_quic_conn_local(w->c), local, acap);
	if (!moq_quic_conn_server_name(w->c, server_name, scap))
		server_name[0] = 0;
}

static const struct moq_binding_ops wt_ops = {
        .stream_open = op_stream_open,
        .stream_write = op_stream_write,
        .stream_reset = op_stream_reset,
        .stream_stop_sending = op_stream_stop_sending,
        .close = op_close,
        .get_info = op_get_info,
        .dgram_send = op_dgram_send,
        .get_peer = op_get_peer,
};

/* ------------------------------------------------------- the CONNECT */

/* Server: a complete HEADERS frame on the CONNECT stream. */
static void on_request(struct moq_wt *w, const uint8_t *block, size_t len)
{
	struct moq_h3_request r;
	int rc = moq_h3_connect_parse(w->connect_sid, block, len, &r);

	if (rc == MOQ_ERR_DECODE) {
		h3_fail(w, MOQ_H3_QPACK_DECOMPRESSION_FAILED, "CONNECT: QPACK");
		return;
	}
	if (rc < 0) {
		h3_fail(w, MOQ_H3_INTERNAL_ERROR, "CONNECT: memory");
		return;
	}
	if (r.status == 200 && !moq_h3_origin_allowed(w->cfg.allowed_origins, r.origin,
	                                              r.origin ? strlen(r.origin) : 0)) {
		/* draft-ietf-webtrans-http3, 3.2 / RFC 6454: the operator's
		 * --allowed-origins */
		r.status = 403;
		r.why = "Origin not allowed";
		r.v = 0;
		w->st->refused_origin++;
	}
	if (r.status == 200 && !moq_h3_settings_webtransport(&w->ctlp.settings)) {
		/* draft-ietf-webtrans-http3, 3.1: a client whose SETTINGS do
		 * not enable it speaks no WebTransport we know */
		r.status = 400;
		r.why = "the client's SETTINGS enable no WebTransport / HTTP datagrams";
		r.v = 0;
	}
	/* wt-protocol only for a version the client offered */
	w->head = moq_h3_response_encode(w->connect_sid, r.status, r.negotiated ? r.v : 0,
	                                 &w->head_len);
	if (!w->head) {
		moq_h3_request_free(&r);
		h3_fail(w, MOQ_H3_INTERNAL_ERROR, "CONNECT: memory");
		return;
	}
	if (r.status != 200) {
		/* refused: the status, FIN; the client closes (or idles out) */
		w->st->refused++;
		w->state = W_CLOSING;
		put(w, w->connect_sid, w->head, w->head_len, 1);
		moq_quic_stream_stop_sending(w->c, w->connect_sid, MOQ_H3_REQUEST_REJECTED);
		moq_h3_request_free(&r);
		return;
	}
	if (put(w, w->connect_sid, w->head, w->head_len, 0) < 0) {
		moq_h3_request_free(&r);
		h3_fail(w, MOQ_H3_INTERNAL_ERROR, "CONNECT: response");
		return;
	}
	w->connect_end = w->head_len;
	w->state = W_OPEN;
	w->s = moq_binding_accept(w->n, &wt_ops, w, r.v, r.path, r.path_len);
	moq_h3_request_free(&r);
	if (!w->s) {
		/* the node's bounds refused it */
		w->st->refused++;
		op_close(w, MOQ_CODE_BOUNDS);
		return;
	}
	w->st->sessions++;
	/* the session's set-up is done: quic/ may move the connection to its
	 * fast path once quiet (quic.h; the same calls serve it either way) */
	(void)moq_quic_conn_allow_handoff(w->c);
}

/* Client: the response HEADERS. */
static void on_response(struct moq_wt *w, const uint8_t *block, size_t len)
{
	int status;
	enum moq_version v;

	if (moq_h3_response_parse(w->connect_sid, block, len, &status, &v) < 0) {
		h3_fail(w, MOQ_H3_QPACK_DECOMPRESSION_FAILED, "response: QPACK");
		return;
	}
	if (status < 200)
		return; /* RFC 9114, 4.1: interim responses */
	if (status != 200 || !v) {
		w->st->refused++;
		w->have_close = 1;
		w->close_local = 0;
		w->close_code = status == 200 ? MOQ_CODE_VERSION : MOQ_CODE_UNAUTHORIZED;
		w->state = W_CLOSING;
		moq_quic_conn_close(w->c, MOQ_H3_NO_ERROR, "CONNECT refused");
		return;
	}
	w->state = W_OPEN;
	w->s = moq_binding_connect(w->n, &wt_ops, w, v, NULL, w->role);
	if (!w->s) {
		h3_fail(w, MOQ_H3_INTERNAL_ERROR, "session refused");
		return;
	}
	moq_session_set_user(w->s, w->user);
	w->st->sessions++;
	/* streams that came before the response */
	for (uint32_t i = 0; w->s && i < w->cap; i++) {
		struct wst *e = &w->tab[i];

		if (e->sid == -1 || e->kind != K_WT || (!e->blen && !e->fin))
			continue;
		moq_binding_stream_data(w->s, e->sid, e->buf, e->blen, e->fin);
		w->early -= e->blen;
		free(e->buf);
		e->buf = NULL;
		e->blen = 0;
		e->fin = 0;
	}
}

static void on_capsules(struct moq_wt *w)
{
	size_t off = 0;

	for (;;) {
		uint64_t type;
		const uint8_t *val;
		size_t vlen;
		int n = moq_h3_capsule_get(w->caps + off, w->caps_len - off, &type, &val, &vlen);

		if (n == MOQ_ERR_SHORT)
			break;
		if (n < 0) {
			h3_fail(w, MOQ_H3_MESSAGE_ERROR, "capsule too large");
			return;
		}
		off += (size_t)n;
		if (type == MOQ_H3_CAPSULE_CLOSE_WT) {
			/* draft-ietf-webtrans-http3, 5: u32 code, UTF-8 reason */
			uint64_t code = vlen >= 4
			                        ? (uint64_t)val[0] << 24 | (uint64_t)val[1] << 16 |
			                                  (uint64_t)val[2] << 8 | val[3]
			                        : MOQ_CODE_PROTOCOL_VIOLATION;
			w->st->capsules_close++;
			if (!w->have_close) {
				w->have_close = 1;
				w->close_code = code;
				w->close_local = 0;
			}
			w->state = W_CLOSING;
			moq_quic_conn_close(w->c, moq_h3_code_to_h3(code), NULL);
			return;
		}
		/* DRAIN_WEBTRANSPORT_SESSION and others: ignored (RFC 9297, 3.2) */
	}
	memmove(w->caps, w->caps + off, w->caps_len - off);
	w->caps_len -= off;
}

/* Bytes on the CONNECT stream: HEADERS, then DATA frames with capsules. */
static void connect_data(struct moq_wt *w, const uint8_t *d, size_t len, int fin)
{
	uint8_t *nb;
	size_t off = 0;

	if (w->crx_len + len > MOQ_H3_MAX_FRAME + 32) {
		h3_fail(w, MOQ_H3_FRAME_ERROR, "CONNECT stream frame too large");
		return;
	}
	if (len) {
		nb = realloc(w->crx, w->crx_len + len);
		if (!nb) {
			h3_fail(w, MOQ_H3_INTERNAL_ERROR, "memory");
			return;
		}
		w->crx = nb;
		memcpy(w->crx + w->crx_len, d, len);
		w->crx_len += len;
	}
	while (w->state != W_CLOSING && !w->dead) {
		uint64_t type, flen;
		int h = moq_h3_frame_head(w->crx + off, w->crx_len - off, &type, &flen);

		if (h < 0)
			break;
		if (flen > MOQ_H3_MAX_FRAME) {
			h3_fail(w, MOQ_H3_FRAME_ERROR, "CONNECT stream frame too large");
			return;
		}
		if (w->crx_len - off - (size_t)h < flen)
			break;
		if (type == MOQ_H3_FRAME_HEADERS && w->state == W_CONNECTING && w->server &&
		    !w->ctlp.got_settings) {
			/* draft-ietf-webtrans-http3, 3.1 / 3.2: no WebTransport
			 * request is processed before the client's SETTINGS (they
			 * say which draft it speaks, and whether it may at all).
			 * Held here, in crx (bounded above), until control_data
			 * reads them; a client that never sends them is closed
			 * with H3_MISSING_SETTINGS after MOQ_WT_SETTINGS_WAIT_NS
			 * (moq_wt_timers). */
			if (!w->held) {
				w->held = 1;
				w->st->held++;
				w->held_next = held_head;
				held_head = w;
			}
			break;
		}
		const uint8_t *p = w->crx + off + h;
		off += (size_t)h + (size_t)flen;
		if (type == MOQ_H3_FRAME_HEADERS && w->state == W_CONNECTING) {
			if (w->server)
				on_request(w, p, (size_t)flen);
			else
				on_response(w, p, (size_t)flen);
		} else if (type == MOQ_H3_FRAME_DATA && w->state != W_CONNECTING) {
			nb = realloc(w->caps, w->caps_len + flen + 1);
			if (!nb) {
				h3_fail(w, MOQ_H3_INTERNAL_ERROR, "memory");
				return;
			}
			w->caps = nb;
			memcpy(w->caps + w->caps_len, p, flen);
			w->caps_len += flen;
			on_capsules(w);
		} else if (type == MOQ_H3_FRAME_DATA || type == MOQ_H3_FRAME_SETTINGS ||
		           type == MOQ_H3_FRAME_GOAWAY) {
			/* RFC 9114, 4.1: DATA before HEADERS; control frames on a
			 * request stream */
			h3_fail(w, MOQ_H3_FRAME_UNEXPECTED,
			        "unexpected frame on the CONNECT stream");
			return;
		}
		/* other frames (trailers, unknown, GREASE): skipped */
		if (w->state == W_CLOSING)
			break;
	}
	if (w->dead)
		return;
	if (off) {
		memmove(w->crx, w->crx + off, w->crx_len - off);
		w->crx_len -= off;
	}
	w->crx_fin |= fin;
	if (w->held)
		return; /* the end (if any) is looked at once the request is */
	if (fin && w->state == W_OPEN) {
		/* draft-ietf-webtrans-http3, 5: the CONNECT stream ended
		 * without a capsule: the session closed with code 0 */
		if (!w->have_close) {
			w->have_close = 1;
			w->close_code = 0;
			w->close_local = 0;
		}
		w->state = W_CLOSING;
		moq_quic_conn_close(w->c, MOQ_H3_NO_ERROR, NULL);
	} else if (fin && w->state == W_CONNECTING) {
		h3_fail(w, MOQ_H3_MESSAGE_ERROR, "CONNECT stream ended before the headers");
	}
}

static const char *control_why(uint64_t h3err)
{
	switch (h3err) {
	case MOQ_H3_MISSING_SETTINGS:
		return "control stream without SETTINGS first";
	case MOQ_H3_FRAME_UNEXPECTED:
		return "unexpected frame on the control stream";
	case MOQ_H3_SETTINGS_ERROR:
		return "bad SETTINGS";
	default:
		return "bad frame on the control stream";
	}
}

/* The peer's control stream, frame by frame (h3.h, moq_h3_control). */
static void control_data(struct moq_wt *w, const uint8_t *d, size_t len)
{
	uint64_t h3err = 0;
	int ev = moq_h3_control_feed(&w->ctlp, d, len, &h3err);

	if (ev == MOQ_ERR_NOMEM) {
		h3_fail(w, MOQ_H3_INTERNAL_ERROR, "memory");
		return;
	}
	if (ev < 0) {
		h3_fail(w, h3err, control_why(h3err));
		return;
	}
	if ((ev & MOQ_H3_CTL_SETTINGS) && w->held) {
		/* the CONNECT that waited for them: answered now */
		w->held = 0;
		held_unlink(w);
		connect_data(w, NULL, 0, w->crx_fin);
	}
}

/* A WebTransport stream's payload: to the session, or (client, before
 * the response) kept. */
static void wt_data(struct moq_wt *w, struct wst *e, const uint8_t *d, size_t len, int fin)
{
	if (w->s && w->state != W_CONNECTING) {
		if (len || fin)
			moq_binding_stream_data(w->s, e->sid, d, len, fin);
		return;
	}
	if (w->server || w->early + len > EARLY_MAX) {
		/* draft-ietf-webtrans-http3, 4.6: a stream for a session that
		 * is not open */
		reject_stream(w, e, MOQ_H3_WT_BUFFERED_STREAM_REJECTED);
		return;
	}
	if (len) {
		uint8_t *nb = realloc(e->buf, e->blen + len);
		if (!nb) {
			reject_stream(w, e, MOQ_H3_WT_BUFFERED_STREAM_REJECTED);
			return;
		}
		e->buf = nb;
		memcpy(e->buf + e->blen, d, len);
		e->blen += (uint32_t)len;
		w->early += (uint32_t)len;
	}
	e->fin |= (uint8_t)fin;
}

/* ------------------------------------------------------ QUIC callbacks */

static void start_h3(struct moq_wt *w)
{
	int rc, n;

	/* RFC 9114, 6.2.1: each side opens one control stream, SETTINGS first */
	n = moq_h3_control_open(w->ctl, sizeof(w->ctl), !w->server);
	if (n < 0) {
		h3_fail(w, MOQ_H3_INTERNAL_ERROR, "control stream");
		return;
	}
	w->ctl_len = (size_t)n;
	rc = moq_quic_stream_open(w->c, 0, &w->ctl_sid);
	if (rc == 0)
		rc = put(w, w->ctl_sid, w->ctl, w->ctl_len, 0);
	if (rc < 0) {
		h3_fail(w, MOQ_H3_INTERNAL_ERROR, "control stream");
		return;
	}
	w->state = W_CONNECTING;
	if (!w->server) {
		int64_t sid;

		rc = moq_quic_stream_open(w->c, 1, &sid);
		if (rc < 0) {
			h3_fail(w, MOQ_H3_INTERNAL_ERROR, "CONNECT stream");
			return;
		}
		set_session_id(w, sid);
		w->head = moq_h3_request_encode(sid, w->authority, w->path, &w->head_len);
		if (!w->head || put(w, sid, w->head, w->head_len, 0) < 0) {
			h3_fail(w, MOQ_H3_INTERNAL_ERROR, "CONNECT");
			return;
		}
		w->connect_end = w->head_len;
	}
}

static int in_established(struct moq_quic_conn *c, void *user, const char *alpn)
{
	struct moq_wt *w = user;

	(void)c;
	if (!alpn || strcmp(alpn, MOQ_H3_ALPN) != 0) {
		h3_fail(w, MOQ_H3_GENERAL_PROTOCOL_ERROR, "not h3");
		return 0;
	}
	start_h3(w);
	return 0;
}

/* The first bytes of a peer stream: its type (uni) or signal (bidi), and
 * for WebTransport streams the session id. Returns the bytes consumed of
 * @d, or -1 when the stream was handled (rejected / failed). */
static long stream_head(struct moq_wt *w, struct wst *e, const uint8_t *d, size_t len)
{
	size_t used = 0;

	while (e->kind == K_PENDING && used < len) {
		uint64_t t, id;
		int a, b;

		e->hdr[e->hl++] = d[used++];
		a = moq_h3_varint_get(e->hdr, e->hl, &t);
		if (a < 0)
			continue;
		if (!e->bidi && (t == MOQ_H3_STREAM_CONTROL || t == MOQ_H3_STREAM_QPACK_ENC ||
		                 t == MOQ_H3_STREAM_QPACK_DEC)) {
			unsigned bit = t == MOQ_H3_STREAM_CONTROL     ? PEER_CONTROL
			               : t == MOQ_H3_STREAM_QPACK_ENC ? PEER_QPACK_ENC
			                                              : PEER_QPACK_DEC;

			/* RFC 9114, 6.2.1 / RFC 9204, 4.2: one of each */
			if (w->peer_uni & bit) {
				h3_fail(w, MOQ_H3_STREAM_CREATION_ERROR,
				        "a second control / QPACK stream");
				return -1;
			}
			w->peer_uni |= (uint8_t)bit;
			/* RFC 9204, 4.2: QPACK streams accepted; capacity 0:
			 * nothing in them to use */
			e->kind = t == MOQ_H3_STREAM_CONTROL ? K_CONTROL : K_QPACK;
		} else if ((!e->bidi && t == MOQ_H3_STREAM_WT_UNI) ||
		           (e->bidi && t == MOQ_H3_STREAM_WT_BIDI)) {
			b = moq_h3_varint_get(e->hdr + a, e->hl - (size_t)a, &id);
			if (b < 0) {
				if (e->hl >= sizeof(e->hdr))
					goto bad;
				continue;
			}
			if (w->connect_sid < 0 || id != (uint64_t)w->connect_sid) {
				/* no such session (yet): rejected */
				reject_stream(w, e, MOQ_H3_WT_BUFFERED_STREAM_REJECTED);
				return -1;
			}
			e->kind = K_WT;
			w->st->streams_in++;
		} else if (e->bidi) {
			/* a request stream: the CONNECT (server, first one only) */
			if (!w->server || w->connect_sid >= 0) {
				reject_stream(w, e, MOQ_H3_REQUEST_REJECTED);
				return -1;
			}
			e->kind = K_CONNECT;
			set_session_id(w, e->sid);
			/* the frame type bytes belong to the frame */
			connect_data(w, e->hdr, e->hl, 0);
			e->hl = 0;
		} else if (!e->bidi && t == MOQ_H3_STREAM_PUSH) {
			/* RFC 9114, 6.2.2: a client must not push */
			h3_fail(w, MOQ_H3_STREAM_CREATION_ERROR, "push stream");
			return -1;
		} else {
			/* RFC 9114, 6.2.3: unknown types are read and dropped */
			e->kind = K_DROP;
		}
	}
	return (long)used;
bad:
	reject_stream(w, e, MOQ_H3_FRAME_ERROR);
	return -1;
}

static int in_stream_data(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t offset,
                          const uint8_t *data, size_t len, int fin)
{
	struct moq_wt *w = user;
	struct wst *e;
	long used;

	(void)c;
	(void)offset;
	if (!w)
		return 0;
	if (is_local(w, sid)) {
		if (sid == w->connect_sid)
			connect_data(w, data, len, fin);
		else if (sid != w->ctl_sid && w->s)
			moq_binding_stream_data(w->s, sid, data, len, fin);
		return 0;
	}
	e = tab_get(w, sid);
	if (!e) {
		if (fin && len == 0)
			return 0;
		e = tab_add(w, sid);
		if (!e) {
			h3_fail(w, MOQ_H3_INTERNAL_ERROR, "memory");
			return 0;
		}
		e->bidi = !(sid & 2);
	}
	if (e->kind == K_PENDING) {
		used = stream_head(w, e, data, len);
		if (used < 0 || w->dead)
			return 0;
		data += used;
		len -= (size_t)used;
		if (e->kind == K_PENDING) {
			if (fin)
				e->kind = K_REJECTED; /* ended inside its header */
			return 0;
		}
	}
	switch (e->kind) {
	case K_WT:
		wt_data(w, e, data, len, fin);
		break;
	case K_CONNECT:
		connect_data(w, data, len, fin);
		break;
	case K_CONTROL:
		/* RFC 9114, 6.2.1: closing it is a connection error */
		if (fin) {
			h3_fail(w, MOQ_H3_CLOSED_CRITICAL_STREAM, "control stream closed");
			return 0;
		}
		control_data(w, data, len);
		break;
	case K_QPACK:
		/* RFC 9204, 4.2: so is closing a QPACK stream */
		if (fin)
			h3_fail(w, MOQ_H3_CLOSED_CRITICAL_STREAM, "QPACK stream closed");
		break;
	default:
		break;
	}
	return 0;
}

static void in_stream_acked(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t acked,
                            uint64_t newly)
{
	struct moq_wt *w = user;

	(void)c;
	(void)newly;
	if (!w)
		return;
	if (sid == w->connect_sid) {
		/* the peer has the close capsule: close the connection */
		if (w->capsule_sent && acked >= w->connect_end)
			moq_quic_conn_close(w->c, moq_h3_code_to_h3(w->close_code), NULL);
		return;
	}
	if (!w->s || sid == w->ctl_sid)
		return;
	if (is_local(w, sid)) {
		size_t p = pfx_len(w, sid);
		if (acked > p)
			moq_binding_stream_acked(w->s, sid, acked - p);
	} else {
		struct wst *e = tab_get(w, sid);
		if (e && e->kind == K_WT)
			moq_binding_stream_acked(w->s, sid, acked);
	}
}

/* A peer stream the session knows about (its prefix was read). */
static int peer_wt(struct moq_wt *w, int64_t sid)
{
	struct wst *e = tab_get(w, sid);

	return e && e->kind == K_WT;
}

static void in_stream_reset(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t app_err,
                            uint64_t final_size)
{
	struct moq_wt *w = user;

	(void)c;
	(void)final_size;
	if (!w)
		return;
	if (!is_local(w, sid)) {
		struct wst *e = tab_get(w, sid);
		if (e && (e->kind == K_CONTROL || e->kind == K_QPACK)) {
			h3_fail(w, MOQ_H3_CLOSED_CRITICAL_STREAM, "control / QPACK stream reset");
			return;
		}
		if (e && e->kind == K_CONNECT && w->state == W_OPEN) {
			if (!w->have_close) {
				w->have_close = 1;
				w->close_code = moq_h3_code_from_h3(app_err);
				w->close_local = 0;
			}
			w->state = W_CLOSING;
			moq_quic_conn_close(w->c, MOQ_H3_NO_ERROR, NULL);
			return;
		}
	}
	if (w->s && (local_wt(w, sid) || peer_wt(w, sid)))
		moq_binding_stream_reset(w->s, sid, moq_h3_code_from_h3(app_err));
}

static void in_stream_stop_sending(struct moq_quic_conn *c, void *user, int64_t sid,
                                   uint64_t app_err)
{
	struct moq_wt *w = user;

	(void)c;
	if (w && w->s && (local_wt(w, sid) || peer_wt(w, sid)))
		moq_binding_stream_stop_sending(w->s, sid, moq_h3_code_from_h3(app_err));
}

static void in_stream_closed(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t app_err)
{
	struct moq_wt *w = user;
	struct wst *e;

	(void)c;
	(void)app_err;
	if (!w)
		return;
	if (is_local(w, sid)) {
		if (w->s && local_wt(w, sid))
			moq_binding_stream_closed(w->s, sid);
		return;
	}
	e = tab_get(w, sid);
	if (!e)
		return;
	if (w->s && e->kind == K_WT)
		moq_binding_stream_closed(w->s, sid);
	tab_del(w, e);
}

static void in_writable(struct moq_quic_conn *c, void *user, int64_t sid)
{
	struct moq_wt *w = user;

	(void)c;
	(void)sid;
	if (w && w->s)
		moq_binding_writable(w->s);
}

static void wt_free(struct moq_wt *w)
{
	if (w->held)
		held_unlink(w);
	for (uint32_t i = 0; i < w->cap; i++)
		free(w->tab[i].sid != -1 ? w->tab[i].buf : NULL);
	free(w->tab);
	free(w->crx);
	free(w->caps);
	moq_h3_control_free(&w->ctlp);
	free(w->head);
	free(w->authority);
	free(w->path);
	free(w);
}

static void cb_conn_closed(struct moq_quic_conn *c, void *user,
                           const struct moq_quic_close_info *info)
{
	struct moq_wt *w = user;
	struct moq_session *s;
	uint64_t code;
	int local;

	(void)c;
	if (!w)
		return;
	s = w->s;
	w->s = NULL;
	if (w->have_close) {
		code = w->close_code;
		local = w->close_local;
	} else if (info->kind == MOQ_QUIC_CLOSE_APPLICATION) {
		code = info->code == MOQ_H3_NO_ERROR ? 0 : moq_h3_code_from_h3(info->code);
		local = info->local;
	} else {
		code = MOQ_CODE_TRANSPORT;
		local = info->local;
	}
	if (s)
		moq_binding_closed(s, code, local);
	else if (!w->server && w->failed)
		w->failed(w->user);
	if (w->depth)
		w->dead = 1; /* the callback it ran in frees it (leave) */
	else
		wt_free(w);
}

/* The connection's callbacks run with @w held: a close during one (the
 * peer's capsule, an HTTP/3 error) runs conn_closed at once, and what the
 * callback does after it must still find @w; the outermost frees it. */
static void enter(struct moq_wt *w)
{
	w->depth++;
}

static void leave(struct moq_wt *w)
{
	if (--w->depth == 0 && w->dead)
		wt_free(w);
}

static int cb_established(struct moq_quic_conn *c, void *user, const char *alpn)
{
	struct moq_wt *w = user;
	int rc;

	if (!w)
		return 0;
	enter(w);
	rc = in_established(c, user, alpn);
	leave(w);
	return rc;
}

static int cb_stream_data(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t offset,
                          const uint8_t *data, size_t len, int fin)
{
	struct moq_wt *w = user;
	int rc;

	if (!w || w->dead)
		return 0;
	enter(w);
	rc = in_stream_data(c, user, sid, offset, data, len, fin);
	leave(w);
	return rc;
}

static void cb_stream_acked(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t acked,
                            uint64_t newly, void *app)
{
	(void)app;
	struct moq_wt *w = user;

	if (!w || w->dead)
		return;
	enter(w);
	in_stream_acked(c, user, sid, acked, newly);
	leave(w);
}

static void cb_stream_reset(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t app_err,
                            uint64_t final_size)
{
	struct moq_wt *w = user;

	if (!w || w->dead)
		return;
	enter(w);
	in_stream_reset(c, user, sid, app_err, final_size);
	leave(w);
}

static void cb_stream_stop_sending(struct moq_quic_conn *c, void *user, int64_t sid,
                                   uint64_t app_err)
{
	struct moq_wt *w = user;

	if (!w || w->dead)
		return;
	enter(w);
	in_stream_stop_sending(c, user, sid, app_err);
	leave(w);
}

static void cb_stream_closed(struct moq_quic_conn *c, void *user, int64_t sid, uint64_t app_err,
                             void *app)
{
	(void)app;
	struct moq_wt *w = user;

	if (!w || w->dead)
		return;
	enter(w);
	in_stream_closed(c, user, sid, app_err);
	leave(w);
}

static void cb_writable(struct moq_quic_conn *c, void *user, int64_t sid)
{
	struct moq_wt *w = user;

	if (!w || w->dead)
		return;
	enter(w);
	in_writable(c, user, sid);
	leave(w);
}

/* An HTTP/3 datagram: the session's (its Quarter Stream ID) goes to it
 * without the prefix; others are dropped (counted). */
static void cb_datagram(struct moq_quic_conn *c, void *user, const uint8_t *data, size_t len)
{
	struct moq_wt *w = user;
	uint64_t sid;
	int n;

	(void)c;
	if (!w || w->dead)
		return;
	n = moq_h3_datagram_parse(data, len, &sid);
	if (n < 0 || w->state != W_OPEN || !w->s || w->connect_sid < 0 ||
	    sid != (uint64_t)w->connect_sid) {
		w->st->datagrams_dropped++;
		return;
	}
	enter(w);
	moq_binding_datagram(w->s, data + n, len - (size_t)n);
	leave(w);
}

static const struct moq_quic_callbacks wt_cbs = {
        .established = cb_established,
        .stream_data = cb_stream_data,
        .stream_acked = cb_stream_acked,
        .stream_reset = cb_stream_reset,
        .stream_stop_sending = cb_stream_stop_sending,
        .stream_closed = cb_stream_closed,
        .writable = cb_writable,
        .conn_closed = cb_conn_closed,
        .datagram = cb_datagram,
};

/* ------------------------------------------------------------- public */

static struct moq_wt *wt_new(struct moq_quic_conn *c, struct moq_node *n,
                             struct moq_wt_stats *stats, int server)
{
	struct moq_wt *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->c = c;
	w->n = n;
	w->st = stats ? stats : &dummy_stats;
	w->server = server;
	w->ctl_sid = -1;
	w->connect_sid = -1;
	moq_h3_control_init(&w->ctlp, !server);
	return w;
}

void moq_wt_timers(uint64_t now)
{
	struct moq_wt *w = held_head, *nx;

	for (; w; w = nx) {
		nx = w->held_next;
		if (!w->held_deadline) {
			w->held_deadline = now + MOQ_WT_SETTINGS_WAIT_NS;
			continue;
		}
		if (now < w->held_deadline)
			continue;
		/* RFC 9114, 6.2.1 / draft-ietf-webtrans-http3, 3.1: no SETTINGS,
		 * no request answered; the connection is of no use */
		w->held = 0;
		held_unlink(w);
		enter(w);
		h3_fail(w, MOQ_H3_MISSING_SETTINGS, "no SETTINGS from the client in time");
		leave(w);
	}
}

const struct moq_quic_callbacks *moq_wt_quic_callbacks(void)
{
	return &wt_cbs;
}

struct moq_wt *moq_wt_accept(struct moq_quic_conn *c, struct moq_node *n,
                             struct moq_wt_stats *stats, const struct moq_quic_callbacks *cb,
                             const struct moq_wt_cfg *cfg)
{
	struct moq_wt *w = wt_new(c, n, stats, 1);

	if (!w) {
		moq_quic_conn_close(c, MOQ_H3_INTERNAL_ERROR, "memory");
		return NULL;
	}
	if (cfg)
		w->cfg = *cfg;
	moq_quic_conn_set_callbacks(c, cb ? cb : &wt_cbs, w);
	start_h3(w);
	return w;
}

struct moq_wt *moq_wt_connect(struct moq_quic_conn *c, struct moq_node *n, const char *authority,
                              const char *path, int role, void *user, void (*failed)(void *user))
{
	struct moq_wt *w = wt_new(c, n, NULL, 0);

	if (!w)
		return NULL;
	w->authority = strdup(authority ? authority : "localhost");
	w->path = strdup(path && path[0] == '/' ? path : "/");
	if (!w->authority || !w->path) {
		wt_free(w);
		return NULL;
	}
	w->role = role;
	w->user = user;
	w->failed = failed;
	moq_quic_conn_set_callbacks(c, &wt_cbs, w);
	return w;
}

struct moq_quic_conn *moq_wt_dial(struct moq_quic_endpoint *ep, const struct moq_quic_addr *local,
                                  const struct moq_quic_addr *remote, struct moq_node *n,
                                  const char *authority, const char *path, int role, void *user,
                                  void (*failed)(void *user), uint64_t now, int *err)
{
	int e = 0;
	struct moq_quic_conn *c = moq_quic_connect(ep, local, remote, NULL, now, &e);

	if (!c) {
		*err = e ? e : MOQ_ERR_IO;
		return NULL;
	}
	if (!moq_wt_connect(c, n, authority, path, role, user, failed)) {
		moq_quic_conn_close(c, MOQ_H3_INTERNAL_ERROR, "memory");
		*err = MOQ_ERR_NOMEM;
		return NULL;
	}
	return c;
}

struct moq_session *moq_wt_session(const struct moq_wt *w)
{
	return w ? w->s : NULL;
}

struct moq_session *moq_wt_conn_session(const struct moq_quic_conn *c)
{
	const char *alpn = moq_quic_conn_alpn(c);

	if (!alpn || strcmp(alpn, MOQ_H3_ALPN) != 0)
		return NULL;
	return moq_wt_session(moq_quic_conn_user(c));
}
