/* openwrt-wolf footprint smoke test for wolfSSL: a SHA-256 of argv[1], a TLS client context
 * and session, a P-256 key pair with a signature that verifies. */
#include <wolfssl/options.h>
#include <stdio.h>
#include <string.h>
#include <wolfssl/ssl.h>
#include <wolfssl/wolfcrypt/ecc.h>
#include <wolfssl/wolfcrypt/random.h>
#include <wolfssl/wolfcrypt/sha256.h>

int main(int argc, char **argv)
{
	const char *msg = argc > 1 ? argv[1] : "";
	unsigned char digest[WC_SHA256_DIGEST_SIZE];
	int fails = 0;

	if (wc_Sha256Hash((const byte *)msg, (word32)strlen(msg), digest) == 0) {
		printf("sha256 ");
		for (int i = 0; i < WC_SHA256_DIGEST_SIZE; i++)
			printf("%02x", digest[i]);
		printf("\n");
	} else {
		printf("sha256 failed\n");
		fails++;
	}

	/* the calls ustream-ssl's native backend makes (wolfSSL_Init, wolfTLS_client_method):
	 * the minimal library exports only what its consumers import */
	wolfSSL_Init();
	WOLFSSL_CTX *ctx = wolfSSL_CTX_new(wolfTLS_client_method());
	WOLFSSL *ssl = ctx ? wolfSSL_new(ctx) : NULL;
	printf("tls_context %s\n", ssl ? "ok" : "failed");
	fails += ssl == NULL;
	if (ssl)
		wolfSSL_free(ssl);
	if (ctx)
		wolfSSL_CTX_free(ctx);

	WC_RNG rng;
	ecc_key key;
	byte sig[ECC_MAX_SIG_SIZE];
	word32 siglen = sizeof(sig);
	int verified = 0;
	int ret = wc_InitRng(&rng);
	if (ret == 0)
		ret = wc_ecc_init(&key);
	if (ret == 0)
		ret = wc_ecc_make_key_ex(&rng, 32, &key, ECC_SECP256R1);
	if (ret == 0)
		ret = wc_ecc_sign_hash(digest, sizeof(digest), sig, &siglen, &rng, &key);
	if (ret == 0)
		ret = wc_ecc_verify_hash(sig, siglen, digest, sizeof(digest), &verified, &key);
	printf("p256_key %s\n", ret == 0 && verified == 1 ? "ok" : "failed");
	fails += !(ret == 0 && verified == 1);
	wc_ecc_free(&key);
	wc_FreeRng(&rng);
	return fails ? 1 : 0;
}
