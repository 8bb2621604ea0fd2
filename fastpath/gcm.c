/* SPDX-License-Identifier: MIT */
/*
 * gcm.c: AES-128-GCM (NIST SP 800-38D) for the fast path's 1-RTT packets,
 * four blocks per instruction with VAES and VPCLMULQDQ on 512-bit vectors.
 *
 * Why not wolfCrypt here: its AVX2 one-shot (AES_GCM_encrypt_avx2) costs
 * ~2,600 instructions per 1,200-byte packet (2.2 per byte) and recomputes
 * the powers of H on every call; AES-GCM was 57% of a fanout worker's
 * instructions (bench_moq_fanout --scale 4, callgrind). Here the round keys
 * and H^1..H^16 are computed once per key and the packet is walked twice in
 * L1: CTR (11 VAES per 64 bytes), then GHASH (4 VPCLMULQDQ per 64 bytes,
 * one reduction per 16 blocks). Used only when the CPU has every feature
 * (fp_gcm_usable); crypto.c keeps wolfCrypt otherwise, and the tests check
 * one against the other.
 *
 * GHASH works on byte-reflected blocks with the shift-and-reduce of Intel's
 * carry-less multiplication white paper (Gueron, Kounavis, rev. 2.02,
 * figure 5): the sum of unreduced products of up to 16 blocks with their
 * powers of H is reduced once.
 */
#include "fp_int.h"
#include "aesni.h"

#include <cpuid.h>
#include <immintrin.h>

/* The 512-bit code, and the 128-bit code (and every helper both use: a
 * helper compiled for AVX-512 could carry EVEX encodings into the 128-bit
 * path, which must run on any CPU with AES-NI and under valgrind) */
#define GCM_TARGET                                                                                 \
	__attribute__((target("aes,pclmul,ssse3,sse4.1,avx2,avx512f,avx512bw,avx512vl,vaes,"       \
	                      "vpclmulqdq")))
#define XMM_TARGET __attribute__((target("aes,pclmul,ssse3,sse4.1,avx")))

/* CPUID and XGETBV (the OS saves the opmask and ZMM state): clang 14's
 * __builtin_cpu_supports knows neither "vaes" nor "vpclmulqdq". 2: the
 * 512-bit code runs here, 1: the 128-bit one (AES-NI, PCLMULQDQ, AVX), 0:
 * neither. */
static int cpu_level(void)
{
	unsigned a, b, c, d, lo, hi;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_AES) || !(c & bit_PCLMUL) ||
	    !(c & bit_SSSE3) || !(c & bit_SSE4_1) || !(c & bit_AVX) || !(c & bit_OSXSAVE))
		return 0;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	(void)hi;
	if ((lo & 0x06) != 0x06) /* the OS saves SSE and AVX state */
		return 0;
	if ((lo & 0xe6) != 0xe6) /* and opmask, ZMM_Hi256, Hi16_ZMM */
		return 1;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return 1;
	return (b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512VL) && (c & bit_VAES) &&
	                       (c & bit_VPCLMULQDQ)
	               ? 2
	               : 1;
}

int fp_gcm_usable(void)
{
	static int v = -1;

	if (v < 0)
		v = cpu_level();
	return v;
}

XMM_TARGET static inline __m128i bswap128(__m128i x)
{
	return _mm_shuffle_epi8(x,
	                        _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

GCM_TARGET static inline __m512i bswap512(__m512i x)
{
	return _mm512_shuffle_epi8(x,
	                           _mm512_broadcast_i32x4(_mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
	                                                               10, 11, 12, 13, 14, 15)));
}

/* The 256-bit product hi:lo of two reflected elements, shifted left by one
 * and reduced modulo x^128 + x^7 + x^2 + x + 1 (white paper, figure 5). */
XMM_TARGET static inline __m128i gf_reduce(__m128i lo, __m128i hi)
{
	__m128i t2, t4, t5, t7, t8, t9;

	t7 = _mm_srli_epi32(lo, 31);
	t8 = _mm_srli_epi32(hi, 31);
	lo = _mm_slli_epi32(lo, 1);
	hi = _mm_slli_epi32(hi, 1);
	t9 = _mm_srli_si128(t7, 12);
	t8 = _mm_slli_si128(t8, 4);
	t7 = _mm_slli_si128(t7, 4);
	lo = _mm_or_si128(lo, t7);
	hi = _mm_or_si128(hi, t8);
	hi = _mm_or_si128(hi, t9);
	t7 = _mm_slli_epi32(lo, 31);
	t8 = _mm_slli_epi32(lo, 30);
	t9 = _mm_slli_epi32(lo, 25);
	t7 = _mm_xor_si128(_mm_xor_si128(t7, t8), t9);
	t8 = _mm_srli_si128(t7, 4);
	t7 = _mm_slli_si128(t7, 12);
	lo = _mm_xor_si128(lo, t7);
	t2 = _mm_srli_epi32(lo, 1);
	t4 = _mm_srli_epi32(lo, 2);
	t5 = _mm_srli_epi32(lo, 7);
	t2 = _mm_xor_si128(_mm_xor_si128(t2, t4), _mm_xor_si128(t5, t8));
	lo = _mm_xor_si128(lo, t2);
	return _mm_xor_si128(hi, lo);
}

XMM_TARGET static __m128i gf_mul(__m128i a, __m128i b)
{
	__m128i lo = _mm_clmulepi64_si128(a, b, 0x00), hi = _mm_clmulepi64_si128(a, b, 0x11);
	__m128i mid =
	        _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x10), _mm_clmulepi64_si128(a, b, 0x01));

	lo = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
	hi = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));
	return gf_reduce(lo, hi);
}

GCM_TARGET static inline __m128i hxor512(__m512i z)
{
	__m256i y = _mm256_xor_si256(_mm512_castsi512_si256(z), _mm512_extracti64x4_epi64(z, 1));
	return _mm_xor_si128(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
}

XMM_TARGET void fp_gcm_key(struct fp_gcm *g, const uint8_t key[16], int wide)
{
	__m128i h, p;
	int i;

	g->wide = wide && fp_gcm_usable() == 2;
	fp_aes128_schedule(g->rk, key);
	h = bswap128(fp_aes128_enc(g->rk, _mm_setzero_si128()));
	/* hpow[i] = H^(16 - i): block j of a run of m multiplies hpow[16 - m + j] */
	p = h;
	_mm_store_si128((__m128i *)(g->hpow + 16 * 15), p);
	for (i = 14; i >= 0; i--) {
		p = gf_mul(p, h);
		_mm_store_si128((__m128i *)(g->hpow + 16 * i), p);
	}
}

/*
 * GHASH(H, A, C) (SP 800-38D, 6.4 and 7.1 step 5): the blocks of A and C,
 * each zero-padded, then the length block, taken as one sequence cut into
 * runs of at most 16 blocks (the first run the shorter one). In a run of m,
 * block j is multiplied by H^(m - j), the running Y added to its first
 * block; the products are summed unreduced and reduced once per run. Loads
 * are masked: a source's last block comes zero-padded, nothing past its end
 * is read.
 */
GCM_TARGET __attribute__((noinline)) static __m128i
ghash_z(const struct fp_gcm *g, const uint8_t *aad, size_t alen, const uint8_t *c, size_t clen)
{
	uint64_t lb[2] = {__builtin_bswap64((uint64_t)alen * 8),
	                  __builtin_bswap64((uint64_t)clen * 8)};
	const uint8_t *src[3] = {aad, c, (const uint8_t *)lb};
	size_t len[3] = {alen, clen, 16};
	size_t total = (alen + 15) / 16 + (clen + 15) / 16 + 1;
	unsigned left = total % 16 ? (unsigned)(total % 16) : 16, first = 1, s;
	__m512i lo = _mm512_setzero_si512(), hi = lo, mid = lo;
	__m128i y = _mm_setzero_si128();

	for (s = 0; s < 3; s++) {
		const uint8_t *p = src[s];
		size_t rest = len[s];
		while (rest > 0) {
			size_t nb = (rest + 15) / 16, bytes;
			unsigned k = nb < 4 ? (unsigned)nb : 4;
			__m512i x, h;
			if (k > left)
				k = left;
			bytes = rest < 16u * k ? rest : 16u * k;
			x = bswap512(_mm512_maskz_loadu_epi8(
			        bytes == 64 ? ~(__mmask64)0 : ((__mmask64)1 << bytes) - 1, p));
			h = _mm512_maskz_loadu_epi64((__mmask8)((1u << (2 * k)) - 1),
			                             g->hpow + 16 * (16 - left));
			if (first)
				x = _mm512_xor_si512(x, _mm512_zextsi128_si512(y));
			first = 0;
			lo = _mm512_xor_si512(lo, _mm512_clmulepi64_epi128(x, h, 0x00));
			hi = _mm512_xor_si512(hi, _mm512_clmulepi64_epi128(x, h, 0x11));
			mid = _mm512_ternarylogic_epi64(mid, _mm512_clmulepi64_epi128(x, h, 0x01),
			                                _mm512_clmulepi64_epi128(x, h, 0x10), 0x96);
			p += bytes;
			rest -= bytes;
			left -= k;
			if (left == 0) {
				__m128i l = hxor512(lo), hh = hxor512(hi), md = hxor512(mid);
				l = _mm_xor_si128(l, _mm_slli_si128(md, 8));
				hh = _mm_xor_si128(hh, _mm_srli_si128(md, 8));
				y = gf_reduce(l, hh);
				lo = hi = mid = _mm512_setzero_si512();
				left = 16;
				first = 1;
			}
		}
	}
	return y;
}

/*
 * The plaintext as a list of pieces (fp_gcm_sealv: the STREAM frame's
 * header in the packet, then the cache's blocks), read in units of the
 * CTR loop: a unit inside one piece is read where it is, one across pieces
 * (two or three a packet) is gathered into @tmp first.
 */
struct rd {
	const struct fp_iov *v;
	unsigned n, i;
	size_t off;
};

static inline const uint8_t *rd_get(struct rd *r, uint8_t *tmp, size_t u)
{
	size_t got = 0;

	while (r->i < r->n && r->off == r->v[r->i].len) {
		r->i++;
		r->off = 0;
	}
	if (r->i < r->n && r->v[r->i].len - r->off >= u) {
		const uint8_t *p = r->v[r->i].base + r->off;
		r->off += u;
		return p;
	}
	while (got < u && r->i < r->n) {
		size_t m = r->v[r->i].len - r->off;
		if (m > u - got)
			m = u - got;
		memcpy(tmp + got, r->v[r->i].base + r->off, m);
		got += m;
		r->off += m;
		if (r->off == r->v[r->i].len) {
			r->i++;
			r->off = 0;
		}
	}
	return tmp;
}

/* CTR from the counter block after J0 (@j0r, J0 byte-reflected), 512 bits
 * at a time: @len bytes of the pieces at @r XOR the key stream into @out
 * (a piece may be @out itself, read before it is written). */
GCM_TARGET __attribute__((noinline)) static void ctr_z(const struct fp_gcm *g, __m128i j0r,
                                                       struct rd *r, uint8_t *out, size_t len)
{
	uint8_t tmp[256] __attribute__((aligned(64)));
	__m512i rk[11], ctr,
	        four = _mm512_set_epi32(0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4);
	const uint8_t *in;
	int i;

	for (i = 0; i < 11; i++)
		rk[i] = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(g->rk + 16 * i)));
	/* lanes 0..3: J0 + 1..4 (inc32: the low word only) */
	ctr = _mm512_add_epi32(_mm512_broadcast_i32x4(j0r),
	                       _mm512_set_epi32(0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 1));
	/* 16 blocks in flight: four independent chains of AESENC hide its
	 * latency (~4 cycles a round on Zen 4) */
	while (len >= 256) {
		__m512i m0, m1, m2, m3;
		m0 = _mm512_xor_si512(bswap512(ctr), rk[0]);
		ctr = _mm512_add_epi32(ctr, four);
		m1 = _mm512_xor_si512(bswap512(ctr), rk[0]);
		ctr = _mm512_add_epi32(ctr, four);
		m2 = _mm512_xor_si512(bswap512(ctr), rk[0]);
		ctr = _mm512_add_epi32(ctr, four);
		m3 = _mm512_xor_si512(bswap512(ctr), rk[0]);
		ctr = _mm512_add_epi32(ctr, four);
		for (i = 1; i < 10; i++) {
			m0 = _mm512_aesenc_epi128(m0, rk[i]);
			m1 = _mm512_aesenc_epi128(m1, rk[i]);
			m2 = _mm512_aesenc_epi128(m2, rk[i]);
			m3 = _mm512_aesenc_epi128(m3, rk[i]);
		}
		m0 = _mm512_aesenclast_epi128(m0, rk[10]);
		m1 = _mm512_aesenclast_epi128(m1, rk[10]);
		m2 = _mm512_aesenclast_epi128(m2, rk[10]);
		m3 = _mm512_aesenclast_epi128(m3, rk[10]);
		in = rd_get(r, tmp, 256);
		_mm512_storeu_si512(out, _mm512_xor_si512(m0, _mm512_loadu_si512(in)));
		_mm512_storeu_si512(out + 64, _mm512_xor_si512(m1, _mm512_loadu_si512(in + 64)));
		_mm512_storeu_si512(out + 128, _mm512_xor_si512(m2, _mm512_loadu_si512(in + 128)));
		_mm512_storeu_si512(out + 192, _mm512_xor_si512(m3, _mm512_loadu_si512(in + 192)));
		out += 256;
		len -= 256;
	}
	while (len > 0) {
		__m512i m = _mm512_xor_si512(bswap512(ctr), rk[0]);
		size_t u = len < 64 ? len : 64;
		__mmask64 k = u == 64 ? ~(__mmask64)0 : ((__mmask64)1 << u) - 1;
		for (i = 1; i < 10; i++)
			m = _mm512_aesenc_epi128(m, rk[i]);
		m = _mm512_aesenclast_epi128(m, rk[10]);
		ctr = _mm512_add_epi32(ctr, four);
		in = rd_get(r, tmp, u);
		_mm512_mask_storeu_epi8(out, k,
		                        _mm512_xor_si512(m, _mm512_maskz_loadu_epi8(k, in)));
		out += u;
		len -= u;
	}
}

/* The same 128 bits at a time (AES-NI, eight blocks in flight). */
XMM_TARGET static void ctr_x(const struct fp_gcm *g, __m128i j0r, struct rd *r, uint8_t *out,
                             size_t len)
{
	uint8_t tmp[128] __attribute__((aligned(16)));
	__m128i rk[11], ctr = j0r, one = _mm_set_epi32(0, 0, 0, 1);
	const uint8_t *in;
	int i;

	for (i = 0; i < 11; i++)
		rk[i] = _mm_load_si128((const __m128i *)(g->rk + 16 * i));
	while (len >= 128) {
		/* eight named chains: an array of them is kept in memory at -O2 */
		__m128i m0, m1, m2, m3, m4, m5, m6, m7;
#define CTR_NEXT(m)                                                                                \
	do {                                                                                       \
		ctr = _mm_add_epi32(ctr, one);                                                     \
		m = _mm_xor_si128(bswap128(ctr), rk[0]);                                           \
	} while (0)
		CTR_NEXT(m0);
		CTR_NEXT(m1);
		CTR_NEXT(m2);
		CTR_NEXT(m3);
		CTR_NEXT(m4);
		CTR_NEXT(m5);
		CTR_NEXT(m6);
		CTR_NEXT(m7);
#undef CTR_NEXT
#pragma GCC unroll 9
		for (i = 1; i < 10; i++) {
			m0 = _mm_aesenc_si128(m0, rk[i]);
			m1 = _mm_aesenc_si128(m1, rk[i]);
			m2 = _mm_aesenc_si128(m2, rk[i]);
			m3 = _mm_aesenc_si128(m3, rk[i]);
			m4 = _mm_aesenc_si128(m4, rk[i]);
			m5 = _mm_aesenc_si128(m5, rk[i]);
			m6 = _mm_aesenc_si128(m6, rk[i]);
			m7 = _mm_aesenc_si128(m7, rk[i]);
		}
		in = rd_get(r, tmp, 128);
#define CTR_OUT(m, b)                                                                              \
	_mm_storeu_si128((__m128i *)(out + 16 * (b)),                                              \
	                 _mm_xor_si128(_mm_aesenclast_si128(m, rk[10]),                            \
	                               _mm_loadu_si128((const __m128i *)(in + 16 * (b)))))
		CTR_OUT(m0, 0);
		CTR_OUT(m1, 1);
		CTR_OUT(m2, 2);
		CTR_OUT(m3, 3);
		CTR_OUT(m4, 4);
		CTR_OUT(m5, 5);
		CTR_OUT(m6, 6);
		CTR_OUT(m7, 7);
#undef CTR_OUT
		out += 128;
		len -= 128;
	}
	while (len > 0) {
		size_t u = len < 16 ? len : 16;
		uint8_t blk[16] __attribute__((aligned(16)));
		__m128i m;
		ctr = _mm_add_epi32(ctr, one);
		m = fp_aes128_enc(g->rk, bswap128(ctr));
		in = rd_get(r, tmp, u);
		if (u == 16) {
			_mm_storeu_si128((__m128i *)out,
			                 _mm_xor_si128(m, _mm_loadu_si128((const __m128i *)in)));
		} else {
			_mm_store_si128((__m128i *)blk, m);
			for (i = 0; i < (int)u; i++)
				out[i] = (uint8_t)(in[i] ^ blk[i]);
		}
		out += u;
		len -= u;
	}
}

/* ghash_z 128 bits at a time: the same runs of <= 16 blocks, one
 * reduction each, four blocks a step where a run and its source have them. */
XMM_TARGET static __m128i ghash_x(const struct fp_gcm *g, const uint8_t *aad, size_t alen,
                                  const uint8_t *c, size_t clen)
{
	uint64_t lb[2] = {__builtin_bswap64((uint64_t)alen * 8),
	                  __builtin_bswap64((uint64_t)clen * 8)};
	const uint8_t *src[3] = {aad, c, (const uint8_t *)lb};
	size_t len[3] = {alen, clen, 16};
	size_t total = (alen + 15) / 16 + (clen + 15) / 16 + 1;
	unsigned left = total % 16 ? (unsigned)(total % 16) : 16, s;
	__m128i lo = _mm_setzero_si128(), hi = lo, mid = lo, y = lo;

/* block x times power h into the sums */
#define MUL_ADD(x, h)                                                                              \
	do {                                                                                       \
		lo = _mm_xor_si128(lo, _mm_clmulepi64_si128(x, h, 0x00));                          \
		hi = _mm_xor_si128(hi, _mm_clmulepi64_si128(x, h, 0x11));                          \
		mid = _mm_xor_si128(mid, _mm_xor_si128(_mm_clmulepi64_si128(x, h, 0x01),           \
		                                       _mm_clmulepi64_si128(x, h, 0x10)));         \
	} while (0)
	for (s = 0; s < 3; s++) {
		const uint8_t *p = src[s];
		size_t rest = len[s];
		while (rest > 0) {
			const __m128i *hp = (const __m128i *)(g->hpow + 16 * (16 - left));
			/* a run's first block carries the Y so far (0 before the
			 * first run, which may be shorter) */
			__m128i y0 = left == 16 ? y : _mm_setzero_si128();
			if (rest >= 64 && left >= 4) {
				MUL_ADD(_mm_xor_si128(bswap128(_mm_loadu_si128((const __m128i *)p)),
				                      y0),
				        _mm_load_si128(hp));
				MUL_ADD(bswap128(_mm_loadu_si128((const __m128i *)(p + 16))),
				        _mm_load_si128(hp + 1));
				MUL_ADD(bswap128(_mm_loadu_si128((const __m128i *)(p + 32))),
				        _mm_load_si128(hp + 2));
				MUL_ADD(bswap128(_mm_loadu_si128((const __m128i *)(p + 48))),
				        _mm_load_si128(hp + 3));
				p += 64;
				rest -= 64;
				left -= 4;
			} else {
				size_t step = rest < 16 ? rest : 16;
				__m128i x;
				if (step == 16) {
					x = _mm_loadu_si128((const __m128i *)p);
				} else {
					uint8_t t[16] __attribute__((aligned(16))) = {0};
					memcpy(t, p, step);
					x = _mm_load_si128((const __m128i *)t);
				}
				MUL_ADD(_mm_xor_si128(bswap128(x), y0), _mm_load_si128(hp));
				p += step;
				rest -= step;
				left--;
			}
			if (left == 0) {
				lo = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
				hi = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));
				y = gf_reduce(lo, hi);
				lo = hi = mid = _mm_setzero_si128();
				left = 16;
			}
		}
	}
#undef MUL_ADD
	return y;
}

XMM_TARGET static __m128i j0_of(const uint8_t nonce[12])
{
	uint8_t b[16] __attribute__((aligned(16)));

	memcpy(b, nonce, 12);
	b[12] = b[13] = b[14] = 0;
	b[15] = 1;
	return _mm_load_si128((const __m128i *)b);
}

/* The tag: E(K, J0) XOR GHASH(A, C, len(A) || len(C)). */
XMM_TARGET static __m128i tag_of(const struct fp_gcm *g, __m128i j0, const uint8_t *aad,
                                 size_t aadlen, const uint8_t *ct, size_t len)
{
	__m128i y = g->wide ? ghash_z(g, aad, aadlen, ct, len) : ghash_x(g, aad, aadlen, ct, len);
	return _mm_xor_si128(bswap128(y), fp_aes128_enc(g->rk, j0));
}

XMM_TARGET void fp_gcm_sealv(const struct fp_gcm *g, const uint8_t nonce[12], const uint8_t *aad,
                             size_t aadlen, const struct fp_iov *v, unsigned n, uint8_t *out,
                             size_t len, uint8_t tag[16])
{
	__m128i j0 = j0_of(nonce);
	struct rd r = {v, n, 0, 0};

	if (g->wide)
		ctr_z(g, bswap128(j0), &r, out, len);
	else
		ctr_x(g, bswap128(j0), &r, out, len);
	_mm_storeu_si128((__m128i *)tag, tag_of(g, j0, aad, aadlen, out, len));
}

XMM_TARGET void fp_gcm_seal(const struct fp_gcm *g, const uint8_t nonce[12], const uint8_t *aad,
                            size_t aadlen, const uint8_t *in, size_t len, uint8_t *out,
                            uint8_t tag[16])
{
	struct fp_iov v = {in, len};

	fp_gcm_sealv(g, nonce, aad, aadlen, &v, 1, out, len, tag);
}

XMM_TARGET int fp_gcm_open(const struct fp_gcm *g, const uint8_t nonce[12], const uint8_t *aad,
                           size_t aadlen, const uint8_t *in, size_t len, uint8_t *out,
                           const uint8_t tag[16])
{
	__m128i j0 = j0_of(nonce);
	__m128i d = _mm_xor_si128(tag_of(g, j0, aad, aadlen, in, len),
	                          _mm_loadu_si128((const __m128i *)tag));
	struct fp_iov v = {in, len};
	struct rd r = {&v, 1, 0, 0};

	/* constant time: all 16 bytes compared before the answer */
	if (!_mm_testz_si128(d, d))
		return MOQ_ERR_CRYPTO;
	if (g->wide)
		ctr_z(g, bswap128(j0), &r, out, len);
	else
		ctr_x(g, bswap128(j0), &r, out, len);
	return 0;
}
