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

#include <cpuid.h>
#include <immintrin.h>

#define GCM_TARGET                                                                                 \
	__attribute__((target("aes,pclmul,ssse3,sse4.1,avx2,avx512f,avx512bw,avx512vl,vaes,"       \
	                      "vpclmulqdq")))

/* CPUID and XGETBV (the OS saves the opmask and ZMM state): clang 14's
 * __builtin_cpu_supports knows neither "vaes" nor "vpclmulqdq". */
static int cpu_has_all(void)
{
	unsigned a, b, c, d, lo, hi;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_AES) || !(c & bit_PCLMUL) ||
	    !(c & bit_OSXSAVE))
		return 0;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	(void)hi;
	if ((lo & 0xe6) != 0xe6) /* SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM */
		return 0;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return 0;
	return (b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512VL) && (c & bit_VAES) &&
	       (c & bit_VPCLMULQDQ);
}

int fp_gcm_usable(void)
{
	static int v = -1;

	if (v < 0)
		v = cpu_has_all();
	return v;
}

GCM_TARGET static inline __m128i bswap128(__m128i x)
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
GCM_TARGET static inline __m128i gf_reduce(__m128i lo, __m128i hi)
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

GCM_TARGET static __m128i gf_mul(__m128i a, __m128i b)
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

/* One AES-128 block with the 11 round keys at @rk. */
GCM_TARGET static inline __m128i aes_block(const uint8_t *rk, __m128i m)
{
	int i;

	m = _mm_xor_si128(m, _mm_load_si128((const __m128i *)rk));
	for (i = 1; i < 10; i++)
		m = _mm_aesenc_si128(m, _mm_load_si128((const __m128i *)(rk + 16 * i)));
	return _mm_aesenclast_si128(m, _mm_load_si128((const __m128i *)(rk + 160)));
}

GCM_TARGET void fp_gcm_key(struct fp_gcm *g, const uint8_t key[16])
{
	__m128i h, p;
	int i;

	fp_aes128_schedule(g->rk, key);
	h = bswap128(aes_block(g->rk, _mm_setzero_si128()));
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
GCM_TARGET static __m128i ghash_ac(const struct fp_gcm *g, const uint8_t *aad, size_t alen,
                                   const uint8_t *c, size_t clen)
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

/* CTR from the counter block after J0: @len bytes of @in XOR the key
 * stream into @out (in == out allowed). @j0r is J0 byte-reflected. */
GCM_TARGET static void ctr_xor(const struct fp_gcm *g, __m128i j0r, const uint8_t *in, uint8_t *out,
                               size_t len)
{
	__m512i rk[11], ctr,
	        four = _mm512_set_epi32(0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4);
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
		_mm512_storeu_si512(out, _mm512_xor_si512(m0, _mm512_loadu_si512(in)));
		_mm512_storeu_si512(out + 64, _mm512_xor_si512(m1, _mm512_loadu_si512(in + 64)));
		_mm512_storeu_si512(out + 128, _mm512_xor_si512(m2, _mm512_loadu_si512(in + 128)));
		_mm512_storeu_si512(out + 192, _mm512_xor_si512(m3, _mm512_loadu_si512(in + 192)));
		in += 256;
		out += 256;
		len -= 256;
	}
	while (len > 0) {
		__m512i m = _mm512_xor_si512(bswap512(ctr), rk[0]);
		for (i = 1; i < 10; i++)
			m = _mm512_aesenc_epi128(m, rk[i]);
		m = _mm512_aesenclast_epi128(m, rk[10]);
		ctr = _mm512_add_epi32(ctr, four);
		if (len >= 64) {
			_mm512_storeu_si512(out, _mm512_xor_si512(m, _mm512_loadu_si512(in)));
			in += 64;
			out += 64;
			len -= 64;
		} else {
			__mmask64 k = ((__mmask64)1 << len) - 1;
			_mm512_mask_storeu_epi8(
			        out, k, _mm512_xor_si512(m, _mm512_maskz_loadu_epi8(k, in)));
			len = 0;
		}
	}
}

GCM_TARGET static __m128i j0_of(const uint8_t nonce[12])
{
	uint8_t b[16] __attribute__((aligned(16)));

	memcpy(b, nonce, 12);
	b[12] = b[13] = b[14] = 0;
	b[15] = 1;
	return _mm_load_si128((const __m128i *)b);
}

/* The tag: E(K, J0) XOR GHASH(A, C, len(A) || len(C)). */
GCM_TARGET static __m128i tag_of(const struct fp_gcm *g, __m128i j0, const uint8_t *aad,
                                 size_t aadlen, const uint8_t *ct, size_t len)
{
	return _mm_xor_si128(bswap128(ghash_ac(g, aad, aadlen, ct, len)), aes_block(g->rk, j0));
}

GCM_TARGET void fp_gcm_seal(const struct fp_gcm *g, const uint8_t nonce[12], const uint8_t *aad,
                            size_t aadlen, const uint8_t *in, size_t len, uint8_t *out,
                            uint8_t tag[16])
{
	__m128i j0 = j0_of(nonce);

	ctr_xor(g, bswap128(j0), in, out, len);
	_mm_storeu_si128((__m128i *)tag, tag_of(g, j0, aad, aadlen, out, len));
}

GCM_TARGET int fp_gcm_open(const struct fp_gcm *g, const uint8_t nonce[12], const uint8_t *aad,
                           size_t aadlen, const uint8_t *in, size_t len, uint8_t *out,
                           const uint8_t tag[16])
{
	__m128i j0 = j0_of(nonce);
	__m128i d = _mm_xor_si128(tag_of(g, j0, aad, aadlen, in, len),
	                          _mm_loadu_si128((const __m128i *)tag));

	/* constant time: all 16 bytes compared before the answer */
	if (!_mm_testz_si128(d, d))
		return MOQ_ERR_CRYPTO;
	ctr_xor(g, bswap128(j0), in, out, len);
	return 0;
}
