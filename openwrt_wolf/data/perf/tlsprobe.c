/* tlsprobe: the performance lab's HTTPS client on the host (built against the footprint lab's
 * OpenSSL 3.5 build for the host, so it can offer X25519MLKEM768; the host's OpenSSL 3.0
 * cannot).
 *
 * Opens N connections to a server, -j at a time (one thread each), offering only the groups
 * of -g, the signature algorithms of -S and the TLS 1.3 cipher suites of -c, verifying the server's certificate against -A
 * for the name -s. Per connection it times the TCP connect plus the TLS handshake
 * (CLOCK_MONOTONIC) and, unless -k, sends "GET <path> HTTP/1.0" and reads the response to its
 * end. With -b the threads wait for each other after their handshakes (a barrier), so -j
 * connections are open at the server at the same moment before any request is sent.
 *
 * One line per connection, as it ends, from the session itself:
 *   conn i=<n> ok=1 ms=<handshake ms> version=<TLSv1.3> group=<name> sig=<sigalg> bytes=<n>
 *        cipher=<suite>
 *   conn i=<n> ok=0 error=<what>
 * and at the end: done ok=<n> failed=<n>. Exit status 0 only if every connection succeeded.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *host = "127.0.0.1", *name = "localhost", *ca, *groups, *sigalgs, *suites, *path = "/";
static int port, count = 1, jobs = 1, handshake_only, barrier_on, tls12;
static SSL_CTX *ctx;
static int next_index, ok_count, failed_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t barrier;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void say(const char *line)
{
	pthread_mutex_lock(&lock);
	fputs(line, stdout);
	fflush(stdout);
	pthread_mutex_unlock(&lock);
}

static void fail(int i, const char *what)
{
	char line[512], err[256] = "";
	unsigned long e = ERR_get_error();
	if (e)
		ERR_error_string_n(e, err, sizeof(err));
	snprintf(line, sizeof(line), "conn i=%d ok=0 error=%s%s%s\n", i, what, *err ? ":" : "", err);
	say(line);
	pthread_mutex_lock(&lock);
	failed_count++;
	pthread_mutex_unlock(&lock);
}

static const char *sig_name(SSL *ssl, char *buf, size_t n)
{
	int type = 0, hash = 0;
	if (!SSL_get_peer_signature_type_nid(ssl, &type) || !SSL_get_peer_signature_nid(ssl, &hash))
		return "none";
	snprintf(buf, n, "%s+%s", OBJ_nid2sn(type), OBJ_nid2sn(hash));
	return buf;
}

/* one connection; returns 0 when the handshake (and the request) succeeded */
static int one(int i, int wait_at_barrier)
{
	struct sockaddr_in sa;
	char line[512], sig[128], buf[16384], req[512];
	long got = 0;
	int fd, n, rc = -1;
	double t0, ms;
	SSL *ssl = NULL;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	inet_pton(AF_INET, host, &sa.sin_addr);
	t0 = now_ms();
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fail(i, "connect");
		if (wait_at_barrier)
			pthread_barrier_wait(&barrier);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	ssl = SSL_new(ctx);
	SSL_set_fd(ssl, fd);
	SSL_set_tlsext_host_name(ssl, name);
	SSL_set1_host(ssl, name);
	if (SSL_connect(ssl) != 1) {
		fail(i, "handshake");
		if (wait_at_barrier)
			pthread_barrier_wait(&barrier);
		goto out;
	}
	ms = now_ms() - t0;
	if (wait_at_barrier)
		pthread_barrier_wait(&barrier);
	if (!handshake_only) {
		snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, name);
		if (SSL_write(ssl, req, (int)strlen(req)) <= 0) {
			fail(i, "write");
			goto out;
		}
		while ((n = SSL_read(ssl, buf, sizeof(buf))) > 0) {
			if (!got && (n < 12 || memcmp(buf + 9, "200", 3) != 0)) {
				fail(i, "status-not-200");
				goto out;
			}
			got += n;
		}
		/* the server may close without close_notify (ustream-ssl's quiet shutdown) */
		if (!got) {
			fail(i, "no-response");
			goto out;
		}
	}
	snprintf(line, sizeof(line), "conn i=%d ok=1 ms=%.3f version=%s group=%s sig=%s bytes=%ld cipher=%s\n",
		 i, ms, SSL_get_version(ssl), SSL_group_to_name(ssl, SSL_get_negotiated_group(ssl)),
		 sig_name(ssl, sig, sizeof(sig)), got, SSL_get_cipher_name(ssl));
	say(line);
	pthread_mutex_lock(&lock);
	ok_count++;
	pthread_mutex_unlock(&lock);
	rc = 0;
	if (handshake_only)
		SSL_shutdown(ssl);
out:
	SSL_free(ssl);
	close(fd);
	return rc;
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		int i;
		pthread_mutex_lock(&lock);
		i = next_index < count ? next_index++ : -1;
		pthread_mutex_unlock(&lock);
		if (i < 0)
			return NULL;
		one(i, barrier_on);
	}
}

static void usage(void)
{
	fputs("usage: tlsprobe -p PORT -A CA [-h IP] [-s NAME] [-g GROUPS] [-S SIGALGS] [-n N] [-j J]\n"
	      "       [-c SUITES] [-b] [-k] [-r PATH] [-2]\n",
	      stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	pthread_t threads[64];
	char line[128];
	int c, t;
	while ((c = getopt(argc, argv, "h:p:s:A:g:S:c:n:j:bkr:2")) != -1) {
		switch (c) {
		case 'h': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 's': name = optarg; break;
		case 'A': ca = optarg; break;
		case 'g': groups = optarg; break;
		case 'S': sigalgs = optarg; break;
		case 'c': suites = optarg; break;
		case 'n': count = atoi(optarg); break;
		case 'j': jobs = atoi(optarg); break;
		case 'b': barrier_on = 1; break;
		case 'k': handshake_only = 1; break;
		case 'r': path = optarg; break;
		case '2': tls12 = 1; break;
		default: usage();
		}
	}
	if (!port || !ca || count < 1 || jobs < 1 || jobs > 64)
		usage();
	if (barrier_on && count % jobs)
		usage(); /* every round of the barrier needs all -j threads */
	ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_min_proto_version(ctx, tls12 ? TLS1_2_VERSION : TLS1_3_VERSION);
	SSL_CTX_set_max_proto_version(ctx, tls12 ? TLS1_2_VERSION : TLS1_3_VERSION);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF); /* every handshake is full */
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	if (!SSL_CTX_load_verify_locations(ctx, ca, NULL)) {
		fprintf(stderr, "tlsprobe: cannot read CA %s\n", ca);
		return 2;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (groups && !SSL_CTX_set1_groups_list(ctx, groups)) {
		fprintf(stderr, "tlsprobe: this OpenSSL does not know the groups %s\n", groups);
		return 3;
	}
	if (sigalgs && !SSL_CTX_set1_sigalgs_list(ctx, sigalgs)) {
		fprintf(stderr, "tlsprobe: this OpenSSL does not know the sigalgs %s\n", sigalgs);
		return 3;
	}
	if (suites && !SSL_CTX_set_ciphersuites(ctx, suites)) {
		fprintf(stderr, "tlsprobe: this OpenSSL does not know the cipher suites %s\n", suites);
		return 3;
	}
	if (jobs > count)
		jobs = count;
	if (barrier_on)
		pthread_barrier_init(&barrier, NULL, (unsigned)jobs);
	for (t = 0; t < jobs; t++)
		pthread_create(&threads[t], NULL, worker, NULL);
	for (t = 0; t < jobs; t++)
		pthread_join(threads[t], NULL);
	snprintf(line, sizeof(line), "done ok=%d failed=%d\n", ok_count, failed_count);
	say(line);
	SSL_CTX_free(ctx);
	return failed_count ? 1 : 0;
}
