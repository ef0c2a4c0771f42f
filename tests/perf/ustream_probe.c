/* A ustream-ssl client that does not require validation (as uclient-fetch
 * --no-check-certificate): it connects, lets the handshake finish and prints
 * what the backend reports, so a test can check valid_cert/valid_cn against
 * what the certificate is. Usage: ustream_probe CA-FILE HOST PORT NAME */

#include <fcntl.h>
#include <stdio.h>

#include <libubox/uloop.h>
#include <libubox/usock.h>
#include <libubox/ustream.h>

#include "ustream-ssl.h"

static struct ustream_ssl ssl;
static struct uloop_timeout timeout;

static void on_connected(struct ustream_ssl *us)
{
	printf("connected valid_cert=%d valid_cn=%d\n", us->valid_cert, us->valid_cn);
	uloop_end();
}

static void on_error(struct ustream_ssl *us, int error, const char *str)
{
	printf("error %d: %s\n", error, str);
	uloop_end();
}

static void on_verify_error(struct ustream_ssl *us, int error, const char *str)
{
	printf("verify_error: %s\n", str);
}

static void on_timeout(struct uloop_timeout *t)
{
	printf("timeout\n");
	uloop_end();
}

int main(int argc, char **argv)
{
	struct ustream_ssl_ctx *ctx;
	int fd;

	if (argc != 5)
		return 2;

	ctx = ustream_ssl_context_new(false);
	if (!ctx || ustream_ssl_context_add_ca_crt_file(ctx, argv[1]) ||
	    ustream_ssl_context_set_require_validation(ctx, false))
		return 2;

	fd = usock(USOCK_TCP, argv[2], argv[3]);
	if (fd < 0)
		return 2;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

	uloop_init();
	ssl.notify_connected = on_connected;
	ssl.notify_error = on_error;
	ssl.notify_verify_error = on_verify_error;
	ssl.server_name = argv[4];
	ustream_ssl_ops.init_fd(&ssl, fd, ctx, false);
	ustream_ssl_set_peer_cn(&ssl, argv[4]);
	timeout.cb = on_timeout;
	uloop_timeout_set(&timeout, 20000);
	uloop_run();
	fflush(stdout);
	return 0;
}
