/* openwrt-wolf footprint smoke test for OpenSSL: a SHA-256 of argv[1], a TLS client context
 * and session, a P-256 key pair. */
#include <stdio.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

int main(int argc, char **argv)
{
	const char *msg = argc > 1 ? argv[1] : "";
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	int fails = 0;

	if (EVP_Digest(msg, strlen(msg), digest, &len, EVP_sha256(), NULL) == 1) {
		printf("sha256 ");
		for (unsigned int i = 0; i < len; i++)
			printf("%02x", digest[i]);
		printf("\n");
	} else {
		printf("sha256 failed\n");
		fails++;
	}

	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = ctx ? SSL_new(ctx) : NULL;
	printf("tls_context %s\n", ssl ? "ok" : "failed");
	fails += ssl == NULL;
	SSL_free(ssl);
	SSL_CTX_free(ctx);

	EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	printf("p256_key %s\n", key ? "ok" : "failed");
	fails += key == NULL;
	EVP_PKEY_free(key);
	return fails ? 1 : 0;
}
