/* SPDX-License-Identifier: MIT */
/*
 * fp_int.h: what the fast path's files share (not installed).
 */
#ifndef MOQ_FASTPATH_FP_INT_H
#define MOQ_FASTPATH_FP_INT_H

#include "fastpath.h"

#include <string.h>

#include "wheel.h"

#define FP_NONE32 UINT32_MAX

/* RFC 9000, 20.1: transport error codes. */
#define FP_E_NO_ERROR            0x0
#define FP_E_INTERNAL            0x1
#define FP_E_FLOW_CONTROL        0x3
#define FP_E_STREAM_LIMIT        0x4
#define FP_E_STREAM_STATE        0x5
#define FP_E_FINAL_SIZE          0x6
#define FP_E_FRAME_ENCODING      0x7
#define FP_E_CONNECTION_ID_LIMIT 0x9
#define FP_E_PROTOCOL_VIOLATION  0xa
#define FP_E_KEY_UPDATE          0xe

/* RFC 9000, 19: frame types. */
#define FT_PADDING              0x00
#define FT_PING                 0x01
#define FT_ACK                  0x02
#define FT_ACK_ECN              0x03
#define FT_RESET_STREAM         0x04
#define FT_STOP_SENDING         0x05
#define FT_CRYPTO               0x06
#define FT_NEW_TOKEN            0x07
#define FT_STREAM               0x08 /* ..0x0f: OFF 0x04, LEN 0x02, FIN 0x01 */
#define FT_MAX_DATA             0x10
#define FT_MAX_STREAM_DATA      0x11
#define FT_MAX_STREAMS_BIDI     0x12
#define FT_MAX_STREAMS_UNI      0x13
#define FT_DATA_BLOCKED         0x14
#define FT_STREAM_DATA_BLOCKED  0x15
#define FT_STREAMS_BLOCKED_BIDI 0x16
#define FT_STREAMS_BLOCKED_UNI  0x17
#define FT_NEW_CONNECTION_ID    0x18
#define FT_RETIRE_CONNECTION_ID 0x19
#define FT_PATH_CHALLENGE       0x1a
#define FT_PATH_RESPONSE        0x1b
#define FT_CLOSE_TRANSPORT      0x1c
#define FT_CLOSE_APP            0x1d
#define FT_HANDSHAKE_DONE       0x1e
#define FT_DATAGRAM             0x30 /* RFC 9221: 0x30, 0x31 */

/* RFC 9001, 5.3 / 5.4.2: AEAD tag and header protection sample. */
#define FP_TAG_LEN    16u
#define FP_SAMPLE_LEN 16u
/* RFC 9000, 17.3.1: short header bits. */
#define HDR_LONG      0x80u
#define HDR_FIXED     0x40u
#define HDR_SPIN      0x20u
#define HDR_RESERVED  0x18u
#define HDR_KEY_PHASE 0x04u
#define HDR_PNLEN     0x03u

/* RFC 9002, 6.1.1 / 6.1.2 / 6.2 / 7: constants. */
#define K_PACKET_THRESHOLD      3
#define K_GRANULARITY_NS        1000000ull
#define K_INITIAL_RTT_NS        333000000ull
#define K_PERSISTENT_CONGESTION 3
/* RFC 9002, 7.2: the minimum window, 2 datagrams. */
#define MIN_CWND_PKTS 2

/* ---- codec (codec.c) ----------------------------------------------------- */

/* RFC 9000, 16: variable-length integers. */
static inline size_t fp_varint_len(uint64_t v)
{
	return v < 64 ? 1 : v < 16384 ? 2 : v < 1073741824 ? 4 : 8;
}
/* fp_varint_put: @v at @p, returns the end. fp_varint_get: decode at *@p
 * (< @end) into *@v and advance; -1 when short. */
static inline uint8_t *fp_varint_put(uint8_t *p, uint64_t v)
{
	if (v < 64) {
		*p++ = (uint8_t)v;
	} else if (v < 16384) {
		*p++ = (uint8_t)(0x40 | (v >> 8));
		*p++ = (uint8_t)v;
	} else if (v < 1073741824) {
		*p++ = (uint8_t)(0x80 | (v >> 24));
		*p++ = (uint8_t)(v >> 16);
		*p++ = (uint8_t)(v >> 8);
		*p++ = (uint8_t)v;
	} else {
		int i;
		*p++ = (uint8_t)(0xc0 | ((v >> 56) & 0x3f));
		for (i = 48; i >= 0; i -= 8)
			*p++ = (uint8_t)(v >> i);
	}
	return p;
}

static inline int fp_varint_get(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
	const uint8_t *p = *pp;
	size_t n, i;
	uint64_t x;

	if (p >= end)
		return -1;
	if (*p < 64) { /* the common case: one byte */
		*v = *p;
		*pp = p + 1;
		return 0;
	}
	n = (size_t)1 << (*p >> 6);
	if ((size_t)(end - p) < n)
		return -1;
	/* whole loads, no byte loop (ACK fields: 2- and 4-byte numbers) */
	if (n == 2) {
		x = ((uint64_t)(p[0] & 0x3f) << 8) | p[1];
	} else if (n == 4) {
		uint32_t w;
		memcpy(&w, p, 4);
		x = __builtin_bswap32(w) & 0x3fffffffu;
	} else {
		uint64_t w;
		memcpy(&w, p, 8);
		x = __builtin_bswap64(w) & 0x3fffffffffffffffull;
	}
	(void)i;
	*v = x;
	*pp = p + n;
	return 0;
}

/* RFC 9000, 17.1 and A.2: bytes for @pn given the peer acknowledged @acked. */
unsigned fp_pn_len(uint64_t pn, uint64_t acked);
/* RFC 9000, A.3: the full packet number from @trunc of @len bytes (inline:
 * every packet received). */
static inline uint64_t fp_pn_decode(uint64_t largest, uint64_t trunc, unsigned len)
{
	uint64_t expected = largest == FP_PN_NONE ? 0 : largest + 1;
	uint64_t win = 1ull << (len * 8), hwin = win / 2, mask = win - 1;
	uint64_t cand = (expected & ~mask) | trunc;

	if (cand + hwin <= expected && cand < (1ull << 62) - win)
		return cand + win;
	if (cand > expected + hwin && cand >= win)
		return cand - win;
	return cand;
}

/* An ACK frame's ranges, newest first (both in codec.c and on receive). */
struct fp_ack {
	uint64_t largest, delay;
	uint32_t n;            /* ranges filled */
	struct fp_range r[32]; /* what we read of one frame (the rest is skipped) */
	uint64_t ecn[3];
	int has_ecn;
};
/* fp_ack_write: an ACK frame of @n ranges (newest first) at @p (room for
 * @cap). Returns its length, 0 when it does not fit. */
size_t fp_ack_write(uint8_t *p, size_t cap, const struct fp_range *r, uint32_t n,
                    uint64_t delay_enc);
/* fp_ack_parse: the ACK frame at *@p (after the type byte) into @a. Ranges
 * beyond 32 are validated and dropped. Returns 0, -1 (encoding error). */
int fp_ack_parse(const uint8_t **p, const uint8_t *end, int ecn, struct fp_ack *a);

/* ---- crypto (crypto.c) ---------------------------------------------------- */

struct fp_aes; /* fp_gcm or a wolfCrypt Aes, opaque outside crypto.c */

/* AES-128-GCM of our own (gcm.c): the round keys and H^16..H^1 (reflected),
 * 448 bytes instead of wolfCrypt's ~1.1 KB Aes. */
struct fp_gcm {
	uint8_t rk[11 * 16] __attribute__((aligned(64)));
	uint8_t hpow[16 * 16] __attribute__((aligned(64)));
	uint32_t wide; /* 1: the 512-bit code (VAES), 0: the 128-bit one */
};

/* fp_gcm_usable: 2 = the CPU has AES-NI, PCLMULQDQ, AVX-512 F/BW/VL, VAES
 * and VPCLMULQDQ (the 512-bit code), 1 = AES-NI, PCLMULQDQ and AVX (the
 * 128-bit code, VEX-encoded; valgrind shows every CPU so), 0 = neither (crypto.c uses
 * wolfCrypt). */
int fp_gcm_usable(void);
/* @wide 1: the 512-bit code where fp_gcm_usable() is 2; 0: the 128-bit. */
void fp_gcm_key(struct fp_gcm *g, const uint8_t key[16], int wide);
/* Seal @len bytes of @in into @out (may be @in), the tag into @tag. */
void fp_gcm_seal(const struct fp_gcm *g, const uint8_t nonce[12], const uint8_t *aad, size_t aadlen,
                 const uint8_t *in, size_t len, uint8_t *out, uint8_t tag[16]);
/* The same from @n pieces (fastpath.h's fp_iov) of @len bytes in all (one may lie in @out ahead
 * of the rest: each byte is read before its place in @out is written). */
void fp_gcm_sealv(const struct fp_gcm *g, const uint8_t nonce[12], const uint8_t *aad,
                  size_t aadlen, const struct fp_iov *v, unsigned n, uint8_t *out, size_t len,
                  uint8_t tag[16]);
/* Open @len bytes of ciphertext @in into @out if @tag is right: 0, or
 * MOQ_ERR_CRYPTO (then nothing is written). */
int fp_gcm_open(const struct fp_gcm *g, const uint8_t nonce[12], const uint8_t *aad, size_t aadlen,
                const uint8_t *in, size_t len, uint8_t *out, const uint8_t tag[16]);
/* FIPS 197 key expansion with AES-NI: the 11 round keys of a 16-byte key. */
void fp_aes128_schedule(uint8_t rk[11 * 16], const uint8_t *key);
/* The AEAD of every fp_aes made (or keyed) from now on: FP_AEAD_AUTO (the
 * default) gcm.c's 512-bit code where fp_gcm_usable() is 2, else wolfCrypt;
 * FP_AEAD_WOLFCRYPT wolfCrypt always; FP_AEAD_128 (tests, benches: the
 * 512-bit path's engine code under valgrind, which has no AVX-512) gcm.c's
 * 128-bit code. Returns the previous mode. */
enum { FP_AEAD_AUTO = 0, FP_AEAD_WOLFCRYPT = 1, FP_AEAD_128 = 2 };
int fp_crypto_force(int mode);

/* One rx key generation. */
struct fp_rxkey {
	struct fp_aes *aead; /* NULL until a packet of the generation comes */
	uint8_t iv[FP_IV_LEN]; /* (with aead: what a packet reads) */
	uint8_t secret[FP_SECRET_LEN];
	uint8_t key[FP_KEY_LEN];
};

/* A header protection key (RFC 9001, 5.4.3): the 11 AES-128 round keys
 * for AES-NI inline (176 bytes instead of a wolfCrypt Aes of ~1.1 KB with
 * its GCM tables), or a wolfCrypt Aes on a CPU without AES-NI. */
struct fp_hpkey {
	struct fp_aes *soft; /* NULL: AES-NI with rk (first: read first) */
	uint8_t rk[11 * 16] __attribute__((aligned(16)));
};

/* The key schedule of one connection (RFC 9001, 5 and 6): cold, touched
 * once per packet for the AEAD only. */
struct fp_keys {
	/* what every packet reads first, together (fp_cold) */
	struct fp_aes *tx_aead;
	uint8_t tx_iv[FP_IV_LEN];
	uint8_t rxc;                /* index of the current generation */
	uint8_t have_prev;          /* rx[(rxc + 2) % 3] still usable */
	uint64_t rx_phase_first_pn; /* first pn received in the current phase */
	uint64_t prev_until;        /* prev keys dropped after this (3 PTO) */
	uint64_t tx_phase_first_pn; /* first pn sent in the current tx phase */
	struct fp_rxkey rx[3];      /* current, next, previous: rx[(rxc + k) % 3] */
	struct fp_hpkey tx_hp, rx_hp;
	uint8_t tx_secret[FP_SECRET_LEN];
};

int fp_crypto_init(void);
struct fp_aes *fp_aes_new(void);
void fp_aes_free(struct fp_aes *a);
int fp_aes_gcm_key(struct fp_aes *a, const uint8_t *key);
/* fp_hp_key: @h from the 16-byte @key; AES-NI when the CPU has it and
 * @soft is 0, else a wolfCrypt Aes. fp_hp_free frees what it holds. */
int fp_hp_key(struct fp_hpkey *h, const uint8_t *key, int soft);
void fp_hp_free(struct fp_hpkey *h);
/* RFC 9001, 5.4.3: mask = AES-ECB(hp, sample), 5 bytes used. */
int fp_hp_mask(const struct fp_hpkey *h, const uint8_t *sample, uint8_t mask[16]);
/* AES-128-GCM seal in place: @len bytes at @p, tag after them. */
int fp_seal(struct fp_aes *a, const uint8_t iv[FP_IV_LEN], uint64_t pn, const uint8_t *aad,
            size_t aadlen, uint8_t *p, size_t len);
/* 1: fp_sealv works on @a (gcm.c's AES-GCM), 0: wolfCrypt's, seal in place. */
int fp_aes_gathers(const struct fp_aes *a);
/* start loading @a's key schedule (fp_conn_prefetch); NULL is ignored */
void fp_aes_prefetch(const struct fp_aes *a);
/* AES-128-GCM seal of @n pieces (@len bytes in all) into @out, the tag
 * after them, without copying the pieces first; MOQ_ERR_INVAL where
 * fp_aes_gathers() is 0. */
int fp_sealv(struct fp_aes *a, const uint8_t iv[FP_IV_LEN], uint64_t pn, const uint8_t *aad,
             size_t aadlen, const struct fp_iov *v, unsigned n, uint8_t *out, size_t len);
/* AES-128-GCM open: @len bytes of ciphertext+tag at @in into @out. */
int fp_open(struct fp_aes *a, const uint8_t iv[FP_IV_LEN], uint64_t pn, const uint8_t *aad,
            size_t aadlen, const uint8_t *in, size_t len, uint8_t *out);
/* RFC 9001, 5.1: HKDF-Expand-Label(secret, label, "", outlen), SHA-256. */
int fp_expand_label(uint8_t *out, size_t outlen, const uint8_t *secret, const char *label);
/* RFC 9001, 6.1: the next generation's secret from @secret; key/iv too. */
int fp_next_secret(uint8_t next[FP_SECRET_LEN], const uint8_t secret[FP_SECRET_LEN]);
int fp_key_iv(const uint8_t secret[FP_SECRET_LEN], uint8_t key[FP_KEY_LEN], uint8_t iv[FP_IV_LEN]);
int fp_keys_setup(struct fp_keys *k, const struct fp_import *imp);
void fp_keys_free(struct fp_keys *k);
/* next rx generation derived into its slot from the current one */
int fp_keys_derive_rx_next(struct fp_keys *k);
/* the Aes of generation @r, made at its first packet (0, or an error) */
int fp_keys_rx_ready(struct fp_rxkey *r);
/* the current rx generation becomes next's; the old current is prev */
int fp_keys_rotate_rx(struct fp_keys *k, uint64_t pn, uint64_t prev_until);
int fp_keys_update_tx(struct fp_keys *k, uint64_t first_pn);
/* the previous rx generation expired: its keys and Aes go */
void fp_keys_drop_prev(struct fp_keys *k);
int fp_random(uint8_t *out, size_t len);

/* ---- state ------------------------------------------------------------- */

/* A queued piece of caller memory (fp_stream_write). */
struct fp_chunk {
	const uint8_t *base;
	uint64_t off; /* stream offset of base[0] */
	uint32_t len;
	uint32_t next;
};

/* An interval set node (acked above the prefix, lost to resend). */
struct fp_ivl {
	uint64_t lo, hi; /* [lo, hi) */
	uint32_t next;
};

/* Reassembly buffer of one stream: offsets [base, base + size). */
struct fp_rbuf {
	uint64_t bits[1]; /* flexible: size / 64 words of presence, then data */
};

/* Stream flags. */
#define SF_LOCAL       0x0001 /* we opened it */
#define SF_UNI         0x0002
#define SF_FIN_QUEUED  0x0004 /* fin written by the caller */
#define SF_FIN_SENT    0x0008
#define SF_FIN_ACKED   0x0010
#define SF_FIN_RECV    0x0020 /* final size known */
#define SF_RECV_DONE   0x0040 /* everything delivered / reset */
#define SF_RESET_SENT  0x0080 /* RESET_STREAM queued or sent */
#define SF_RESET_ACKED 0x0100
#define SF_STOP_SENT   0x0200
#define SF_ON_LIST     0x0400 /* on the connection's send list */
#define SF_CLOSED      0x0800 /* stream_closed reported */
/* per-stream control frames pending */
#define SF_P_RESET  0x1000
#define SF_P_STOP   0x2000
#define SF_P_MSD    0x4000 /* MAX_STREAM_DATA */
#define SF_P_SDB    0x8000 /* STREAM_DATA_BLOCKED */
#define SF_P_MASK   (SF_P_RESET | SF_P_STOP | SF_P_MSD | SF_P_SDB)
#define SF_SDB_DONE 0x10000 /* STREAM_DATA_BLOCKED sent for this limit */

/* One stream: 96 bytes, in the engine's pool. */
struct fp_stream {
	/* what an ACK of its data reads and writes, together (fp_on_ack,
	 * fp_ack_flush): the first 64 bytes (one or two lines, not three) */
	int64_t id;
	uint64_t snd_acked;           /* acknowledged prefix */
	uint64_t head_end;            /* end offset of the first chunk, when there is one */
	void *user;                   /* passed to stream_acked / stream_closed */
	uint32_t chunks, chunks_tail; /* queued caller memory, from snd_acked's */
	uint32_t acked_ivl, lost_ivl; /* interval sets */
	uint32_t refs;                /* sent ranges in flight naming this record */
	uint32_t flags;
	uint32_t cur;       /* the chunk holding snd_off (a cursor), FP_NONE32 */
	uint32_t send_next; /* connection's send list */
	uint64_t snd_off;   /* next byte never sent */
	uint64_t snd_end;   /* bytes written by the caller */
	uint64_t snd_max;   /* the peer's MAX_STREAM_DATA */
	uint64_t rcv_off;   /* delivered prefix */
	uint64_t rcv_max;   /* our MAX_STREAM_DATA */
	uint64_t rcv_final; /* final size, UINT64_MAX until known */
	uint64_t rcv_hi;    /* highest offset received (flow control) */
	uint64_t app_err;   /* of RESET_STREAM / STOP_SENDING we send */
	uint32_t next;      /* connection's stream list */
	uint32_t rbuf;      /* reassembly buffer, FP_NONE32 */
	uint8_t urgency;
	uint8_t inflight; /* sent records naming it (saturating use: held) */
};

/* Range kinds of a sent record (what to do on ack / loss). */
#define RK_DATA  0 /* [off, off + len) (+ FIN when fin) */
#define RK_RESET 1
#define RK_STOP  2
#define RK_MSD   3

/* What a sent packet carried of one stream (extra ones of a packet in the
 * engine's range pool). */
struct fp_srange {
	uint64_t off;
	uint32_t sidx;
	uint16_t len;
	uint8_t kind, fin;
	uint32_t next;
};

/* Sent-packet record flags. */
#define PF_USED     0x01
#define PF_ELICIT   0x02 /* ack-eliciting */
#define PF_INFLIGHT 0x04 /* counts in bytes_in_flight */
#define PF_FIN      0x08 /* the inline range carries FIN */
#define PF_RANGE    0x10 /* the inline range is set */
#define PF_PROBE    0x20
/* the common record, tested with one bit when its ACK is taken: PF_RANGE
 * of RK_DATA without FIN, no further range, no DATAGRAM frame */
#define PF_SIMPLE 0x40

/* Connection-level control frames (ctl bits of a sent record, and
 * pending in fp_conn.ctl). */
#define CF_PING       0x0001
#define CF_MAX_DATA   0x0002
#define CF_MAX_SB     0x0004 /* MAX_STREAMS bidi */
#define CF_MAX_SU     0x0008 /* MAX_STREAMS uni */
#define CF_DBLOCKED   0x0010
#define CF_SB_BIDI    0x0020 /* STREAMS_BLOCKED */
#define CF_SB_UNI     0x0040
#define CF_NEW_CID    0x0080
#define CF_RETIRE_CID 0x0100
#define CF_CHALLENGE  0x0200
#define CF_RESPONSE   0x0400
#define CF_CLOSE      0x0800
#define CF_ACK        0x1000 /* (pending only) an ACK must go now */
#define CF_RESEND     (CF_MAX_DATA | CF_MAX_SB | CF_MAX_SU | CF_NEW_CID | CF_RETIRE_CID | CF_CHALLENGE)
/* (sent records only) how many DATAGRAM frames the packet carried, 0..7
 * (dgram.c: counted acked or lost, never resent) */
#define CF_DG_SHIFT 13
#define CF_DG_MASK  0xe000

/*
 * A sent-packet record: 32 bytes, in a ring per connection indexed by
 * pn & (ring - 1). The slot of pn is free when its pn_lo differs or
 * PF_USED is clear; a send refuses a packet whose slot still holds one in
 * flight (the ring bounds packets in flight).
 */
struct fp_sent {
	uint32_t pn_lo; /* low 32 bits of the packet number */
	uint32_t t_us;  /* time sent, us since the connection's epoch */
	uint64_t off;   /* the inline stream range */
	uint32_t sidx;
	uint16_t len;
	uint16_t size; /* UDP payload bytes (for bytes_in_flight) */
	uint8_t flags; /* PF_* */
	uint8_t kind;  /* RK_* of the inline range */
	uint16_t ctl;  /* CF_* carried */
	uint32_t more; /* further ranges in the range pool, FP_NONE32 */
};

enum fp_state {
	ST_OPEN = 0,
	ST_CLOSING,  /* RFC 9000, 10.2.1: we sent CONNECTION_CLOSE */
	ST_DRAINING, /* 10.2.2: the peer did */
	ST_DEAD,
};

/* Per-connection state beside the hot record: its first lines per packet,
 * the rest on control events. */
struct fp_cold {
	/*
	 * What a packet either way reads or writes, first and together: the
	 * first four cache lines of the record. Spread over it they were ~10
	 * lines a packet, of a record of 37 (callgrind with a 1 MiB last-level
	 * cache, bench_moq_fanout --subs 1000: the ACK a subscriber sends cost
	 * the relay 43 misses; DESIGN.md).
	 */
	uint64_t now;      /* the time of the current engine call */
	uint64_t epoch_ns; /* t_us of sent records counts from here */
	uint64_t idle_ns;
	uint64_t idle_at;   /* idle timeout deadline */
	uint64_t last_tx_t; /* for the keep-alive */
	uint64_t pkts_recv, bytes_recv;
	uint64_t peer_max_ack_delay_ns; /* peer.max_ack_delay_ns, for fp_pto */
	uint64_t pkts_sent, bytes_sent;
	uint64_t path_recv, path_sent; /* bytes on an unvalidated path */
	uint32_t streams;              /* stream list head (pool index) */
	uint8_t busy;                  /* inside an engine call for this conn */
	uint8_t free_pending;          /* freed when the call returns */
	uint8_t refuse_pkt;            /* the packet being read is not acked */
	uint8_t elicit_since_rx;       /* RFC 9000, 10.1 idle timer restart */
	uint8_t grease;                /* the peer may clear the fixed bit */
	uint8_t rx_closed_sent;        /* CONNECTION_CLOSE answers in closing */
	uint8_t ctl_blocked_sent;      /* */
	/* counts of the arrays below, with the other bytes (no padding after
	 * each: 40 B a connection, issue 23 target 5) */
	uint8_t npeer_cids, nretire, nscids, nrx;
	uint8_t peer_ack_delay_exp;         /* peer.ack_delay_exponent */
	uint64_t recv_data, local_max_data; /* connection receive flow control */
	struct fp_addr remote, local;
	struct fp_cid dcid;
	struct fp_range rx_ranges[FP_IMPORT_RANGES]; /* newest first */
	/* the rest: read at key updates and on control events */
	struct fp_keys keys;
	struct fp_cid peer_cids[FP_MAX_PEER_CIDS];
	uint64_t peer_retire_prior_to;
	uint64_t retire_pending[FP_MAX_PEER_CIDS]; /* seqs to RETIRE */
	struct fp_cid scids[FP_MAX_SCIDS];
	uint8_t scid_pending[FP_MAX_SCIDS]; /* NEW_CONNECTION_ID to send */
	uint64_t next_scid_seq;
	uint64_t local_cid_limit;
	struct fp_peer_params peer;
	uint64_t max_ack_delay_ns, ack_delay_exp; /* ours */
	uint64_t local_msd_bidi_local, local_msd_bidi_remote, local_msd_uni;
	uint64_t local_max_sb, local_max_su; /* MAX_STREAMS we allow */
	uint64_t peer_max_sb, peer_max_su;
	int64_t next_local_bidi, next_local_uni, next_remote_bidi, next_remote_uni;
	uint64_t remote_closed_bidi, remote_closed_uni; /* peer streams freed */
	struct fp_addr probe_remote; /* unvalidated new address */
	uint8_t challenge[8], response[8];
	uint8_t challenge_out; /* a challenge awaits its response */
	uint64_t close_code, close_ftype;
	uint8_t close_app;
	uint8_t close_reasonlen;
	uint8_t close_reason[64];
	uint64_t close_sent_at;
	uint64_t dblocked_at, sb_bidi_at, sb_uni_at; /* limits we said we hit */
	uint64_t pkts_lost, key_updates;
	uint32_t cidx;            /* slot in the engine's pool */
	uint32_t close_budget;    /* CONNECTION_CLOSE repeats left */
	uint64_t local_dgram_max; /* our max_datagram_frame_size */
	struct fp_dgq *dq;        /* queued datagrams (dgram.c), or NULL */
} __attribute__((aligned(64)));

/*
 * The hot record of a connection: what a packet sent or an ACK taken
 * touches, <= 256 bytes (a static assert in conn.c).
 */
struct fp_conn {
	struct fp_engine *e;
	void *user;
	struct fp_cold *x;
	struct fp_sent *ring;
	uint64_t tx_pn;
	uint64_t largest_acked; /* FP_PN_NONE */
	uint64_t ring_lo;       /* lowest pn that may be in flight */
	uint64_t rx_largest;    /* FP_PN_NONE */
	uint64_t rx_largest_t;
	uint64_t srtt, rttvar, min_rtt, latest_rtt;
	uint64_t cwnd, ssthresh, inflight;
	uint64_t recovery_start; /* time; packets sent before it do not cut again */
	uint64_t sent_data, peer_max_data;
	uint64_t last_elicit_t; /* last ack-eliciting packet sent */
	uint64_t loss_time;     /* RFC 9002, 6.1.2 timer, 0 = none */
	uint64_t ack_at;        /* delayed ACK due, 0 = none */
	uint64_t pace_t;        /* the pacer lets a packet go at this time */
	uint64_t ca_acc;        /* congestion avoidance byte counter */
	struct fp_tnode tn;     /* the connection's one timer */
	uint32_t send_head, send_tail;
	uint32_t ready_next, ready_prev;
	uint16_t ctl; /* CF_* pending */
	uint16_t ring_mask;
	uint16_t max_pkt; /* UDP payload to build */
	uint8_t state;    /* enum fp_state */
	uint8_t kp;       /* tx key phase bit */
	uint8_t rx_kp;    /* rx key phase bit */
	uint8_t pto_count;
	uint8_t rx_unacked; /* ack-eliciting received since our last ACK */
	uint8_t validated;
	uint8_t dcid_len, scid_len;
	uint8_t cc_blocked; /* a send stopped at cwnd since the last ack */
	uint8_t on_ready;
	uint8_t tx_update; /* our key update awaits its ACK */
	uint8_t is_server;
	uint8_t probes; /* PTO probe packets to send past cwnd */
	uint8_t dg_n;   /* datagrams queued (dgram.c), capped at 255 */
	uint32_t rec_us; /* recovery_start in the records' microseconds */
};

/* The engine (one per lcore). */
struct fp_engine {
	struct fp_engine_config cfg;
	const struct fp_callbacks *cb;
	struct fp_wheel wheel;
	struct fp_conn *conns;
	struct fp_cold *colds;
	struct fp_sent *rings;
	uint32_t free_conn;
	struct fp_stream *streams;
	uint32_t free_stream;
	struct fp_chunk *chunks;
	uint32_t free_chunk;
	struct fp_ivl *ivls;
	uint32_t free_ivl, nivls;
	uint32_t nfree_ivl; /* nodes on free_ivl (fp_ivl_alloc's reserve) */
	struct fp_srange *sranges;
	uint32_t free_srange, nsranges;
	uint8_t *rbufs;
	uint32_t free_rbuf, nrbufs;
	size_t rbuf_bytes;
	/* our CIDs and the peers' tokens: open addressing, conn index + 1 */
	struct fp_hent {
		/* conn index + 1 (0 = empty; fp_tab_del shifts, so no
		 * tombstones) and the key's length, packed: 24 bytes an
		 * entry, not 28 (issue 23 target 5: 105 B a connection) */
		uint32_t conn : 27;
		uint32_t len : 5;
		uint8_t key[FP_CID_MAX];
	} * cid_tab, *tok_tab;
	uint32_t tab_mask;
	uint32_t ready_head, ready_tail;
	uint32_t len_in_use[FP_CID_MAX + 1]; /* our CIDs of each length */
	uint8_t lens[4], nlens;              /* the lengths in use, longest first */
	uint64_t wheel_now;
	/* the stream whose acknowledged prefix one ACK frame is moving
	 * (fp_ack_flush reports it once) */
	struct fp_stream *ackb_s;
	int64_t ackb_sid;
	uint64_t ackb_before;
	int ackb_on;
	uint8_t scratch[2048] __attribute__((aligned(16)));
	struct fp_stats st;
};

/* engine.c */
static inline uint32_t conn_idx(const struct fp_conn *c)
{
	return (uint32_t)(c - c->e->conns);
}
void fp_ready_add(struct fp_conn *c);
void fp_ready_del(struct fp_conn *c);
void fp_conn_timer(struct fp_conn *c);
int fp_tab_add(struct fp_engine *e, struct fp_hent *t, const uint8_t *key, uint8_t len,
               uint32_t conn);
void fp_tab_del(struct fp_engine *e, struct fp_hent *t, const uint8_t *key, uint8_t len);
uint32_t fp_tab_find(const struct fp_engine *e, const struct fp_hent *t, const uint8_t *key,
                     uint8_t len);
void fp_conn_free(struct fp_conn *c);
void fp_len_ref(struct fp_engine *e, uint8_t len, int delta);
uint32_t fp_ivl_alloc(struct fp_engine *e, int holder);
void fp_ivl_free_list(struct fp_engine *e, uint32_t head);

/* Interval node @i back on the free list. */
static inline void fp_ivl_put(struct fp_engine *e, uint32_t i)
{
	e->ivls[i].next = e->free_ivl;
	e->free_ivl = i;
	e->nfree_ivl++;
}

/* RFC 9002, 7.2: initial window 10 datagrams (and at least 14720 bytes). */
#define INIT_CWND_PKTS 10

/* A stream id of ours (RFC 9000, 2.1: bit 0 is the initiator). */
static inline int is_local_sid(const struct fp_conn *c, int64_t sid)
{
	return ((uint64_t)sid & 1) == c->is_server;
}

/* conn.c */
void fp_conn_fire(struct fp_conn *c, uint64_t now);
void fp_notify_closed(struct fp_conn *c, enum fp_close_kind kind, int local, uint64_t code,
                      uint64_t ftype, const char *what, const uint8_t *reason, size_t reasonlen);
int fp_violation(struct fp_conn *c, uint64_t code, uint64_t ftype, const char *what, uint64_t now);
struct fp_ack;
int fp_on_ack(struct fp_conn *c, const struct fp_ack *a, uint64_t now);

/* stream.c */
struct fp_stream *fp_stream_new(struct fp_conn *c, int64_t sid);
void fp_stream_free(struct fp_conn *c, struct fp_stream *s);
void fp_rbuf_free(struct fp_engine *e, struct fp_stream *s);
void fp_on_acked_range(struct fp_conn *c, uint32_t sidx, uint64_t off, uint32_t len, int kind,
                       int fin);
void fp_reset_send(struct fp_conn *c, struct fp_stream *s, uint64_t err);
void fp_ack_flush(struct fp_conn *c);
void fp_conn_stateless_reset(struct fp_conn *c, uint64_t now);
void fp_close_local(struct fp_conn *c, int app, uint64_t code, uint64_t ftype, const char *what,
                    uint64_t now);
struct fp_stream *fp_stream_find(struct fp_conn *c, int64_t sid);
void fp_stream_sendq(struct fp_conn *c, struct fp_stream *s);
void fp_stream_maybe_free(struct fp_conn *c, struct fp_stream *s);
int fp_stream_has_send(const struct fp_conn *c, const struct fp_stream *s);
void fp_ivl_add(struct fp_engine *e, struct fp_stream *s, uint32_t *head, uint64_t lo, uint64_t hi);
void fp_on_lost_range(struct fp_conn *c, uint32_t sidx, uint64_t off, uint32_t len, int kind,
                      int fin);

/* send.c */
int fp_conn_has_send(const struct fp_conn *c, uint64_t now);

/* dgram.c: DATAGRAM frames from the queue at @p (< @end) while they fit
 * (at most 7; the count goes into *@ctl); @empty: nothing is in the packet
 * yet (a datagram that does not fit is dropped then). Returns the end. */
uint8_t *fp_dgram_write(struct fp_conn *c, uint8_t *p, uint8_t *end, int empty, uint16_t *ctl);
/* a DATAGRAM frame of type @ft at *@p: delivered or dropped; -1 closed */
int fp_dgram_recv(struct fp_conn *c, uint64_t ft, const uint8_t **p, const uint8_t *end,
                  uint64_t now);
/* a sent record's datagrams were acknowledged (@lost 0) or lost */
void fp_dgram_done(struct fp_conn *c, uint16_t ctl, int lost);
/* release every queued datagram (closing) and free the queue */
void fp_dgram_free(struct fp_conn *c);

/* RFC 9002, 6.2.1 (inline: a packet received and an ACK taken read it up
 * to four times) */
static inline uint64_t fp_pto(const struct fp_conn *c)
{
	uint64_t v = 4 * c->rttvar;

	if (v < K_GRANULARITY_NS)
		v = K_GRANULARITY_NS;
	return c->srtt + v + c->x->peer_max_ack_delay_ns;
}

/* Leave an engine call on @c: free it if that was asked meanwhile. */
static inline void conn_leave(struct fp_conn *c)
{
	if (--c->x->busy == 0 && c->x->free_pending) {
		c->x->free_pending = 0;
		fp_conn_free(c);
	}
}

#endif /* MOQ_FASTPATH_FP_INT_H */
