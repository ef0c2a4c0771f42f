/* openwrt-wolf footprint smoke test for Mbed TLS: a SHA-256 of argv[1], a TLS client context,
 * a P-256 key pair. Prints one "name value" line per check; exit 0 when all pass. */
#include <stdio.h>
#include <string.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/pk.h>
#include <mbedtls/sha256.h>
#include <mbedtls/ssl.h>
#include <psa/crypto.h>

int main(int argc, char **argv)
{
	const char *msg = argc > 1 ? argv[1] : "";
	unsigned char digest[32];
	int fails = 0;

	if (psa_crypto_init() != PSA_SUCCESS) {
		printf("psa_init failed\n");
		return 1;
	}
	if (mbedtls_sha256((const unsigned char *)msg, strlen(msg), digest, 0) == 0) {
		printf("sha256 ");
		for (int i = 0; i < 32; i++)
			printf("%02x", digest[i]);
		printf("\n");
	} else {
		printf("sha256 failed\n");
		fails++;
	}

	mbedtls_ssl_config conf;
	mbedtls_ssl_context ssl;
	mbedtls_entropy_context entropy;
	mbedtls_ctr_drbg_context drbg;
	mbedtls_ssl_config_init(&conf);
	mbedtls_ssl_init(&ssl);
	mbedtls_entropy_init(&entropy);
	mbedtls_ctr_drbg_init(&drbg);
	int ret = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy, NULL, 0);
	if (ret == 0)
		ret = mbedtls_ssl_config_defaults(&conf, MBEDTLS_SSL_IS_CLIENT,
						  MBEDTLS_SSL_TRANSPORT_STREAM,
						  MBEDTLS_SSL_PRESET_DEFAULT);
	if (ret == 0) {
		mbedtls_ssl_conf_rng(&conf, mbedtls_ctr_drbg_random, &drbg);
		ret = mbedtls_ssl_setup(&ssl, &conf);
	}
	printf("tls_context %s\n", ret == 0 ? "ok" : "failed");
	fails += ret != 0;

	mbedtls_pk_context pk;
	mbedtls_pk_init(&pk);
	ret = mbedtls_pk_setup(&pk, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY));
	if (ret == 0)
		ret = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(pk),
					  mbedtls_ctr_drbg_random, &drbg);
	printf("p256_key %s\n", ret == 0 ? "ok" : "failed");
	fails += ret != 0;

	mbedtls_pk_free(&pk);
	mbedtls_ssl_free(&ssl);
	mbedtls_ssl_config_free(&conf);
	mbedtls_ctr_drbg_free(&drbg);
	mbedtls_entropy_free(&entropy);
	return fails ? 1 : 0;
}
