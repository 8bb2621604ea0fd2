/* SPDX-License-Identifier: MIT */
/*
 * aesni.h: one AES-128 block with AES-NI, for header protection (crypto.c)
 * and gcm.c's key setup, tag and CTR tail. Inline: its callers' targets
 * include "aes,sse2".
 */
#ifndef MOQDP_FP_AESNI_H
#define MOQDP_FP_AESNI_H

#include <immintrin.h>
#include <stdint.h>

/* FIPS 197, 5.1: @m encrypted with the 11 round keys at @rk (16-aligned). */
__attribute__((target("aes,sse2"))) static inline __m128i fp_aes128_enc(const uint8_t *rk,
                                                                        __m128i m)
{
	int i;

	m = _mm_xor_si128(m, _mm_load_si128((const __m128i *)rk));
	for (i = 1; i < 10; i++)
		m = _mm_aesenc_si128(m, _mm_load_si128((const __m128i *)(rk + 16 * i)));
	return _mm_aesenclast_si128(m, _mm_load_si128((const __m128i *)(rk + 160)));
}

#endif
