/* SPDX-License-Identifier: MIT */
/*
 * test_deps.c: the dependencies scripts/setup built are the ones the relay
 * needs: a static wolfSSL configured with QUIC and AES-NI (its configure line
 * is compiled into the library), an ngtcp2 with the wolfSSL crypto backend,
 * and DPDK 22.11.
 */
#include <check.h>
#include <string.h>

#include <rte_version.h>
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>
#include <wolfssl/wolfcrypt/logging.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto_wolfssl.h>

Suite *deps_suite(void);

START_TEST(wolfssl_configured_for_quic_and_aesni)
{
	const char *args = wolfSSL_configure_args();

	ck_assert_ptr_nonnull(args);
	ck_assert_msg(strstr(args, "--enable-quic") != NULL, "configure: %s", args);
	ck_assert_msg(strstr(args, "--enable-aesni") != NULL, "configure: %s", args);
	ck_assert_msg(strstr(args, "--enable-intelasm") != NULL, "configure: %s", args);
	ck_assert_msg(strstr(args, "--enable-opensslall") != NULL, "configure: %s", args);
	ck_assert_str_eq(LIBWOLFSSL_VERSION_STRING, "5.5.4");
}
END_TEST

START_TEST(wolfssl_quic_method_works)
{
	/* A QUIC method can be set on a TLS 1.3 context only when QUIC is built in. */
	WOLFSSL_CTX *ctx = wolfSSL_CTX_new(wolfTLSv1_3_client_method());

	ck_assert_ptr_nonnull(ctx);
	ck_assert_int_eq(ngtcp2_crypto_wolfssl_configure_client_context(ctx), 0);
	wolfSSL_CTX_free(ctx);
}
END_TEST

START_TEST(ngtcp2_version_and_dpdk_version)
{
	const ngtcp2_info *info = ngtcp2_version(0);

	ck_assert_ptr_nonnull(info);
	ck_assert_str_eq(info->version_str, "0.12.1");
	ck_assert_int_eq(RTE_VER_YEAR, 22);
	ck_assert_int_eq(RTE_VER_MONTH, 11);
	ck_assert_ptr_nonnull(strstr(rte_version(), "22.11"));
}
END_TEST

Suite *deps_suite(void)
{
	Suite *s = suite_create("deps");
	TCase *tc = tcase_create("deps");

	tcase_add_test(tc, wolfssl_configured_for_quic_and_aesni);
	tcase_add_test(tc, wolfssl_quic_method_works);
	tcase_add_test(tc, ngtcp2_version_and_dpdk_version);
	suite_add_tcase(s, tc);
	return s;
}
