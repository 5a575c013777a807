/* server.c - listening, accepting within max_connections, h2o's limits.
 * See server.h. */
#include "server.h"

#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct handler {
	h2o_handler_t super;
	struct http_app *app;
};

static struct http_app *the_app; /* the accept callback's: one app per process */

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
	return http_api_on_req(((struct handler *)self)->app, req);
}

static void on_close(void *data)
{
	struct http_app *app = data;
	app->metrics.conn_open--;
}

static void refused_written(h2o_socket_t *sock, const char *err)
{
	(void)err;
	h2o_socket_close(sock);
}

static void on_accept(h2o_socket_t *listener, const char *err)
{
	struct http_app *app = the_app;
	if (err)
		return;
	h2o_socket_t *sock = h2o_evloop_socket_accept(listener);
	if (!sock)
		return;
	if (app->metrics.conn_open >= app->conf.max_connections) {
		/* over max_connections: a 503 written whole, then close */
		static char msg[256];
		static int len;
		if (!len) {
			static const char body[] = "{\"error\": \"too many connections (max_connections)\", "
						   "\"code\": \"busy\", \"status\": 503}\n";
			len = snprintf(msg, sizeof msg,
				       "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
				       "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
				       sizeof body - 1, body);
		}
		h2o_iovec_t b = h2o_iovec_init(msg, (size_t)len);
		app->metrics.conn_refused++;
		app->metrics.status[5]++;
		app->metrics.errors++;
		h2o_socket_write(sock, &b, 1, refused_written);
		return;
	}
	app->metrics.conn_open++;
	app->metrics.conn_total++;
	sock->on_close.cb = on_close;
	sock->on_close.data = app;
	h2o_accept(&app->accept, sock);
}

static int bind_listen(const struct http_conf *c, unsigned *port, char *why, size_t why_len)
{
	struct sockaddr_storage ss = {0};
	socklen_t sl;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, c->listen_host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)c->port);
		sl = sizeof *a4;
	} else if (inet_pton(AF_INET6, c->listen_host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)c->port);
		sl = sizeof *a6;
	} else {
		snprintf(why, why_len, "listen: \"%s\" is not a numeric address", c->listen_host);
		return -EINVAL;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
	/* TCP_NODELAY on the listener: h2o's accept4 takes it to be inherited;
	 * without it Nagle holds a response's last segment for an ACK (p99
	 * in milliseconds) */
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) ||
	    bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, SOMAXCONN) ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl)) {
		int e = -errno;
		snprintf(why, why_len, "listen on %s port %u: %s", c->listen_host, c->port, strerror(-e));
		if (fd >= 0)
			close(fd);
		return e;
	}
	*port = ntohs(ss.ss_family == AF_INET ? a4->sin_port : a6->sin6_port);
	return fd;
}

/* A listening socket passed by systemd (socket activation: LISTEN_PID is
 * ours, LISTEN_FDS 1, the socket at fd 3): the fd, 0 when none was passed,
 * or -EINVAL with why. The variables are removed so that nothing started
 * later takes them for its own. */
static int activated(unsigned *port, char *why, size_t why_len)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	if (!pid || !fds || atol(pid) != (long)getpid())
		return 0;
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	int fd = 3, listening = 0, type = 0;
	socklen_t l = sizeof listening;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (strcmp(fds, "1") || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l) || !listening ||
	    (l = sizeof type, getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l)) || type != SOCK_STREAM ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)) {
		snprintf(why, why_len, "socket activation: LISTEN_FDS=%s: expected one listening TCP socket "
			 "(ListenStream= once in the .socket unit)", fds);
		return -EINVAL;
	}
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	int one = 1; /* as bind_listen's, whether or not the unit says NoDelay=yes */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	*port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					     : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

static int write_port(const char *path, unsigned port, char *why, size_t why_len)
{
	char tmp[300], text[16];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int n = snprintf(text, sizeof text, "%u\n", port);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, (size_t)n) != n || close(fd) || rename(tmp, path)) {
		int e = -errno;
		snprintf(why, why_len, "port_file %s: %s", path, strerror(-e));
		return e;
	}
	return 0;
}

int http_server_start(struct http_app *app, h2o_loop_t **loopp, char *why, size_t why_len)
{
	unsigned port = 0;
	SSL_CTX *ssl = NULL;
	if (!!app->conf.tls_cert[0] != !!app->conf.tls_key[0]) {
		snprintf(why, why_len, "tls_cert and tls_key go together: give both or neither");
		return -EINVAL;
	}
	if (app->conf.tls_cert[0]) {
		int err = http_tls_ctx(&app->conf, &ssl, why, why_len);
		if (err)
			return err;
	}
	int fd = activated(&port, why, why_len);
	if (fd == 0)
		fd = bind_listen(&app->conf, &port, why, why_len);
	if (fd < 0) {
		SSL_CTX_free(ssl);
		return fd;
	}
	h2o_config_init(&app->h2o);
	/* no "server: h2o/VERSION" header: it names the library's version to
	 * every client, and its sprintf was a tenth of a GET's instructions */
	app->h2o.server_name = h2o_iovec_init(H2O_STRLIT(""));
	app->h2o.max_request_entity_size = app->conf.max_body;
	app->h2o.http1.req_timeout = app->conf.request_timeout_ms;
	app->h2o.http2.idle_timeout = app->conf.request_timeout_ms;
	h2o_hostconf_t *host = h2o_config_register_host(&app->h2o, h2o_iovec_init(H2O_STRLIT("default")), 65535);
	h2o_pathconf_t *path = h2o_config_register_path(host, "/", 0);
	struct handler *h = (struct handler *)h2o_create_handler(path, sizeof *h);
	h->super.on_req = on_req;
	h->app = app;
	h2o_loop_t *loop = h2o_evloop_create();
	h2o_context_init(&app->ctx, loop, &app->h2o);
	h2o_timeout_init(loop, &app->write_timeout, app->conf.write_timeout_ms);
	app->accept.ctx = &app->ctx;
	app->accept.hosts = app->h2o.hosts;
	app->accept.ssl_ctx = ssl; /* NULL: plain HTTP */
	the_app = app;
	h2o_socket_t *ls = h2o_evloop_socket_create(loop, fd, H2O_SOCKET_FLAG_DONT_READ);
	h2o_socket_read_start(ls, on_accept);
	app->listener = ls;
	if (app->conf.port_file[0]) {
		int err = write_port(app->conf.port_file, port, why, why_len);
		if (err)
			return err;
	}
	app->listening = 1;
	*loopp = loop;
	fprintf(stderr, "shmkv-http: listening on %s port %u (%s), root %s\n", app->conf.listen_host, port,
		ssl ? "TLS" : "plain HTTP", app->conf.root);
	return 0;
}

void http_server_run(struct http_app *app, h2o_loop_t *loop, volatile sig_atomic_t *stop)
{
	while (!*stop)
		h2o_evloop_run(loop, 500);
	/* stop accepting; the close completes on the loop's next turn */
	h2o_socket_read_stop(app->listener);
	h2o_socket_close(app->listener);
	h2o_evloop_run(loop, 0);
}
