/* SPDX-License-Identifier: MIT */
/*
 * fuzz_fastpath.c: libFuzzer target for the fast path engine's receive side
 * (fastpath/conn.c). The input is a series of packet payloads (a 2-byte
 * length before each): every one is sealed as a 1-RTT packet of the peer
 * (AES-128-GCM, header protection) and handed to an engine holding one
 * imported connection with an open stream, so the fuzzer reaches the frame
 * parsers, not the AEAD; between packets the engine sends and runs its
 * timers. Whatever the input, the engine must neither crash nor leak, and
 * a closed connection stays closed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fastpath.h"
#include "fp_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int closed;

static int on_data(struct fp_conn *c, void *user, int64_t sid, uint64_t off, const uint8_t *d,
                   size_t n, int fin)
{
	(void)c, (void)user, (void)sid, (void)off, (void)fin;
	if (n > 0 && d == NULL)
		abort();
	return 0;
}

static void on_closed(struct fp_conn *c, void *user, const struct fp_close_info *i)
{
	(void)c, (void)user, (void)i;
	closed++;
}

/* RFC 9221: every byte of a received datagram is read */
static unsigned dsum;
static void on_dgram(struct fp_conn *c, void *user, const uint8_t *d, size_t n)
{
	(void)c, (void)user;
	for (size_t i = 0; i < n; i++)
		dsum += d[i];
}

static const struct fp_callbacks cbs = {
        .datagram = on_dgram,
        .stream_data = on_data,
        .conn_closed = on_closed,
};

static void keys(struct fp_dir_keys *k, uint8_t seed)
{
	memset(k->secret, seed, sizeof(k->secret));
	fp_key_iv(k->secret, k->key, k->iv);
	fp_expand_label(k->hp, 16, k->secret, "quic hp");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t payload[4096] = {0};
	struct fp_engine_config cfg;
	struct fp_import im;
	struct fp_import_stream st;
	struct fp_engine *e;
	struct fp_conn *c;
	struct fp_aes *aead;
	struct fp_hpkey hp;
	struct fp_iov v = {payload, sizeof(payload)};
	static uint8_t bufs[4][1500];
	struct fp_pkt pk[4];
	uint8_t key[16], iv[12], pkt[1500];
	uint64_t now = 1000000000ull, pn = 1;
	int err, i;

	memset(&cfg, 0, sizeof(cfg));
	cfg.max_conns = 2;
	cfg.cb = &cbs;
	e = fp_engine_new(&cfg, &err);
	if (e == NULL)
		return 0;
	memset(&im, 0, sizeof(im));
	im.version = 1;
	im.is_server = 1;
	im.cipher = FP_CIPHER_AES_128_GCM_SHA256;
	keys(&im.tx, 1);
	keys(&im.rx, 2);
	im.nscids = 1;
	im.scids[0].len = 8;
	memset(im.scids[0].id, 0xaa, 8);
	im.dcid.len = 8;
	memset(im.dcid.id, 0xbb, 8);
	im.dcid.has_token = 1;
	memset(im.dcid.token, 0xcc, 16);
	im.tx_pn = 10;
	im.largest_acked = FP_PN_NONE;
	im.rx_largest_pn = FP_PN_NONE;
	im.local_max_data = im.peer_max_data = 1 << 20;
	im.local_max_stream_data_bidi_remote = im.local_max_stream_data_uni = 1 << 16;
	im.local_max_stream_data_bidi_local = 1 << 16;
	im.peer.initial_max_stream_data_bidi_local = 1 << 16;
	im.peer.initial_max_stream_data_bidi_remote = 1 << 16;
	im.peer.initial_max_stream_data_uni = 1 << 16;
	im.local_max_streams_bidi = im.local_max_streams_uni = 8;
	im.peer_max_streams_bidi = im.peer_max_streams_uni = 8;
	im.next_local_bidi = 1;
	im.next_local_uni = 3;
	im.next_remote_bidi = 4;
	im.next_remote_uni = 2;
	im.local_idle_timeout_ns = 30000000000ull;
	im.peer.max_datagram_frame_size = im.local_max_datagram_frame_size = 1200;
	im.path_validated = 1;
	im.local.len = im.remote.len = 16;
	im.remote.b[3] = 1;
	memset(&st, 0, sizeof(st));
	st.id = 0;
	st.send_max = st.recv_max = 1 << 16;
	im.streams = &st;
	im.nstreams = 1;
	c = fp_conn_import(e, &im, now, &err);
	aead = fp_aes_new();
	memset(&hp, 0, sizeof(hp));
	if (c == NULL || aead == NULL)
		abort();
	fp_key_iv(im.rx.secret, key, iv);
	fp_aes_gcm_key(aead, key);
	fp_hp_key(&hp, im.rx.hp, 0);
	fp_stream_write(c, 0, &v, 1, 0);
	for (i = 0; i < 3; i++) {
		struct fp_iov dv = {payload, 300};
		fp_dgram_send(c, NULL, 0, &dv, 1, NULL, NULL);
	}
	for (i = 0; i < 4; i++) {
		pk[i].data = bufs[i];
		pk[i].cap = sizeof(bufs[i]);
	}
	while (size >= 2) {
		size_t n = (size_t)data[0] << 8 | data[1], hl = 1 + 8 + 4;
		uint8_t mask[16];
		data += 2;
		size -= 2;
		if (n > size)
			n = size;
		if (n > sizeof(pkt) - hl - 16)
			n = sizeof(pkt) - hl - 16;
		/* a short header, 4-byte packet number */
		pkt[0] = 0x40 | 0x03;
		memset(pkt + 1, 0xaa, 8);
		pkt[9] = (uint8_t)(pn >> 24);
		pkt[10] = (uint8_t)(pn >> 16);
		pkt[11] = (uint8_t)(pn >> 8);
		pkt[12] = (uint8_t)pn;
		memcpy(pkt + hl, data, n);
		if (n < 4)
			memset(pkt + hl + n, 0, 4 - n), n = 4;
		fp_seal(aead, iv, pn, pkt, hl, pkt + hl, n);
		fp_hp_mask(&hp, pkt + 1 + 8 + 4, mask);
		pkt[0] ^= mask[0] & 0x1f;
		for (i = 0; i < 4; i++)
			pkt[9 + i] ^= mask[1 + i];
		fp_engine_recv(e, pkt, hl + n + 16, &im.local, &im.remote, now);
		data += n > size ? size : n;
		size -= n > size ? size : n;
		pn++;
		now += 7000000;
		fp_engine_send(e, pk, 4, now);
		fp_engine_timers(e, now);
	}
	fp_engine_free(e);
	fp_aes_free(aead);
	fp_hp_free(&hp);
	closed = 0;
	return 0;
}
