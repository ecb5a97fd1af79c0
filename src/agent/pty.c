/*
 * Terminals users attach to, the node's part: for each session the work
 * answer names (wire_pty), a thread opens GET /v1/agent/pty?session=ID
 * upgraded to a byte stream (libcurl's CONNECT_ONLY: curl connects and does
 * TLS, the request and the stream are ours) and joins it to the attempt's
 * shim at DIR/pty.sock, copying bytes both ways until either side closes.
 * The bytes are the CLI's and the shim's; the agent reads none of them.
 * A thread per session keeps the agent's loop out of it; each one ends
 * with its session.
 */
#include "internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define PTY_CONNECT_MS 10000
#define PTY_BUF 16384

struct pty_join {
	char *url;   /* the server's base URL */
	char *query; /* /v1/agent/pty?... */
	char *cred;
	char *ca;
	char *dir; /* the attempt's shim folder */
	char session[WIRE_PTY_SESSION_MAX];
};

static void join_free(struct pty_join *j)
{
	free(j->url);
	free(j->query);
	free(j->cred);
	free(j->ca);
	free(j->dir);
	free(j);
}

/* Waits for the connection to be readable (or writable): < 0 after the
 * timeout or an error. */
static int wait_sock(curl_socket_t fd, short ev, int ms)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int r;
	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR);
	return r > 0 ? 0 : -1;
}

static int curl_send_all(CURL *e, curl_socket_t fd, const char *buf, size_t n)
{
	while (n) {
		size_t sent = 0;
		CURLcode c = curl_easy_send(e, buf, n, &sent);
		if (c == CURLE_AGAIN) {
			if (wait_sock(fd, POLLOUT, PTY_CONNECT_MS) < 0)
				return -1;
			continue;
		}
		if (c != CURLE_OK)
			return -1;
		buf += sent;
		n -= sent;
	}
	return 0;
}

/* The upgrade: the request, then the answer's head; what came after it
 * is already the stream's, and goes to the shim (*extra, *nextra). */
static int upgrade(CURL *e, curl_socket_t fd, const struct pty_join *j, char *buf, size_t cap,
		   size_t *extra_off, size_t *nextra)
{
	_cleanup_free_ char *req =
		xasprintf("GET %s HTTP/1.1\r\nHost: tenk\r\nAuthorization: Bearer %s\r\n"
			  "Connection: Upgrade\r\nUpgrade: %s\r\n\r\n",
			  j->query, j->cred, WIRE_PTY_PROTOCOL);
	if (curl_send_all(e, fd, req, strlen(req)) < 0)
		return -1;
	size_t have = 0;
	int64_t deadline = tk_mono_ms() + PTY_CONNECT_MS;
	for (;;) {
		buf[have] = '\0';
		char *end = strstr(buf, "\r\n\r\n");
		if (end) {
			int code = 0;
			if (sscanf(buf, "HTTP/1.1 %d", &code) != 1 || code != 101) {
				log_warn("terminal session %.8s: the server answered: %.200s",
					 j->session, buf);
				return -1;
			}
			*extra_off = (size_t)(end + 4 - buf);
			*nextra = have - *extra_off;
			return 0;
		}
		if (have + 1 >= cap || tk_mono_ms() > deadline)
			return -1;
		size_t got = 0;
		CURLcode c = curl_easy_recv(e, buf + have, cap - 1 - have, &got);
		if (c == CURLE_AGAIN) {
			if (wait_sock(fd, POLLIN, PTY_CONNECT_MS) < 0)
				return -1;
			continue;
		}
		if (c != CURLE_OK || got == 0)
			return -1;
		have += got;
	}
}

static int shim_connect(const char *dir)
{
	int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/pty.sock", dfd);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		fd = -1;
	}
	close(dfd);
	return fd;
}

/* Bytes both ways until either side ends. */
static void relay(CURL *e, curl_socket_t net, int shim, char *buf)
{
	for (;;) {
		struct pollfd p[2] = {{.fd = net, .events = POLLIN},
				      {.fd = shim, .events = POLLIN}};
		int r = poll(p, 2, -1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return;
		if (p[0].revents) {
			/* all that TLS holds, not only what the socket shows */
			for (;;) {
				size_t got = 0;
				CURLcode c = curl_easy_recv(e, buf, PTY_BUF, &got);
				if (c == CURLE_AGAIN)
					break;
				if (c != CURLE_OK || got == 0 || tk_write_all(shim, buf, got) < 0)
					return;
			}
		}
		if (p[1].revents) {
			ssize_t n = read(shim, buf, PTY_BUF);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0 || curl_send_all(e, net, buf, (size_t)n) < 0)
				return;
		}
	}
}

static void *join_main(void *arg)
{
	struct pty_join *j = arg;
	char *buf = xmalloc(PTY_BUF + 1);
	int shim = -1;
	CURL *e = curl_easy_init();
	if (!e)
		goto out;
	curl_easy_setopt(e, CURLOPT_URL, j->url);
	curl_easy_setopt(e, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)PTY_CONNECT_MS);
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	if (j->ca)
		curl_easy_setopt(e, CURLOPT_CAINFO, j->ca);
	CURLcode c = curl_easy_perform(e);
	curl_socket_t net = CURL_SOCKET_BAD;
	if (c != CURLE_OK || curl_easy_getinfo(e, CURLINFO_ACTIVESOCKET, &net) != CURLE_OK ||
	    net == CURL_SOCKET_BAD) {
		log_warn("terminal session %.8s: cannot reach the server: %s", j->session,
			 curl_easy_strerror(c));
		goto out;
	}
	shim = shim_connect(j->dir);
	if (shim < 0) {
		log_warn("terminal session %.8s: no terminal at %s/pty.sock: %s", j->session,
			 j->dir, strerror(errno));
		goto out;
	}
	size_t off = 0, n = 0;
	if (upgrade(e, net, j, buf, PTY_BUF + 1, &off, &n) < 0 ||
	    (n && tk_write_all(shim, buf + off, n) < 0))
		goto out;
	relay(e, net, shim, buf);
out:
	if (shim >= 0)
		close(shim);
	if (e)
		curl_easy_cleanup(e);
	free(buf);
	join_free(j);
	return NULL;
}

void agent_serve_ptys(struct agent *a, const struct wire_pty *p, int n)
{
	for (int i = 0; i < n; i++) {
		char key[48];
		snprintf(key, sizeof(key), "%lld.%d", (long long)p[i].job, p[i].attempt);
		struct taskgroup *g = tk_map_get(&a->groups, key);
		if (!g) {
			log_warn("terminal session %.8s: no attempt %s here", p[i].session, key);
			continue;
		}
		struct pty_join *j = xcalloc(1, sizeof(*j));
		j->url = xstrdup(a->servers[a->server]);
		j->query = xasprintf("/v1/agent/pty?node=%s&agent_id=%s&session=%s", a->inv.name,
				     a->agent_id, p[i].session);
		j->cred = xstrdup(a->cred);
		j->ca = a->cfg.ca_file ? xstrdup(a->cfg.ca_file) : NULL;
		j->dir = xstrdup(g->shim.dir);
		snprintf(j->session, sizeof(j->session), "%s", p[i].session);
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &at, join_main, j) != 0) {
			log_warn("terminal session %.8s: no thread for it", p[i].session);
			join_free(j);
		}
		pthread_attr_destroy(&at);
	}
}
