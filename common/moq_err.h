/* SPDX-License-Identifier: MIT */
/*
 * moq_err.h: error codes shared by every moqdp module.
 *
 * Functions return 0 (or a count) on success and one of these negative codes
 * on failure. Codes above MOQ_ERR_FATAL are recoverable for the caller (the
 * operation failed, the object is unchanged); codes at or below it mean the
 * object (connection, session) is unusable and must be closed.
 */
#ifndef MOQ_COMMON_MOQ_ERR_H
#define MOQ_COMMON_MOQ_ERR_H

enum moq_err {
	MOQ_OK = 0,
	/* recoverable: nothing changed */
	MOQ_ERR_INVAL = -1,     /* an argument is out of range */
	MOQ_ERR_NOMEM = -2,     /* an allocation failed */
	MOQ_ERR_AGAIN = -3,     /* no data / no room now; try later */
	MOQ_ERR_LIMIT = -4,     /* a configured bound was reached */
	MOQ_ERR_NOTFOUND = -5,  /* no such object */
	MOQ_ERR_EXISTS = -6,    /* already there */
	MOQ_ERR_TOO_LARGE = -7, /* a size cap was exceeded */
	MOQ_ERR_STATE = -8,     /* the call is not valid in this state */
	MOQ_ERR_ORDER = -9,     /* a sequence went backwards */
	MOQ_ERR_SHORT = -10,    /* more input is needed to decode */
	MOQ_ERR_EVICTED = -11,  /* the data was evicted for the byte budget */
	MOQ_ERR_OLD = -12,      /* the data expired (older than max latency) */
	MOQ_ERR_LAGGED = -13,   /* the reader fell behind the kept window */
	MOQ_ERR_CLOSED = -14,   /* the object was closed / finished */
	MOQ_ERR_CRYPTO = -15,   /* a TLS / crypto failure */
	MOQ_ERR_CONFIG = -16,   /* a configuration value is invalid */
	MOQ_ERR_IO = -17,       /* an I/O call failed */
	MOQ_ERR_DROPPED = -18,  /* the packet/message was dropped (counted) */

	/* fatal for the object the call was made on */
	MOQ_ERR_FATAL = -100,
	MOQ_ERR_DECODE = -101,     /* malformed input */
	MOQ_ERR_PROTO = -102,      /* protocol violation */
	MOQ_ERR_UNEXPECTED = -103, /* unexpected message or stream */
	MOQ_ERR_INTERNAL = -104,   /* a bug: an invariant did not hold */
};

/* moq_err_fatal: nonzero when @err means the object must be closed. */
static inline int moq_err_fatal(int err)
{
	return err <= MOQ_ERR_FATAL;
}

/* moq_err_str: a short constant name for @err ("inval", "nomem", ...). */
static inline const char *moq_err_str(int err)
{
	switch (err) {
	case MOQ_OK:
		return "ok";
	case MOQ_ERR_INVAL:
		return "inval";
	case MOQ_ERR_NOMEM:
		return "nomem";
	case MOQ_ERR_AGAIN:
		return "again";
	case MOQ_ERR_LIMIT:
		return "limit";
	case MOQ_ERR_NOTFOUND:
		return "notfound";
	case MOQ_ERR_EXISTS:
		return "exists";
	case MOQ_ERR_TOO_LARGE:
		return "too_large";
	case MOQ_ERR_STATE:
		return "state";
	case MOQ_ERR_ORDER:
		return "order";
	case MOQ_ERR_SHORT:
		return "short";
	case MOQ_ERR_EVICTED:
		return "evicted";
	case MOQ_ERR_OLD:
		return "old";
	case MOQ_ERR_LAGGED:
		return "lagged";
	case MOQ_ERR_CLOSED:
		return "closed";
	case MOQ_ERR_CRYPTO:
		return "crypto";
	case MOQ_ERR_CONFIG:
		return "config";
	case MOQ_ERR_IO:
		return "io";
	case MOQ_ERR_DROPPED:
		return "dropped";
	case MOQ_ERR_DECODE:
		return "decode";
	case MOQ_ERR_PROTO:
		return "proto";
	case MOQ_ERR_UNEXPECTED:
		return "unexpected";
	case MOQ_ERR_INTERNAL:
		return "internal";
	default:
		return "unknown";
	}
}

#endif /* MOQ_COMMON_MOQ_ERR_H */
