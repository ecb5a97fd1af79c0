/*
 * The HTTP client (client.h): one blocking HTTP/1.1 exchange per call, over
 * TCP, TLS (GnuTLS, loaded on the first https:// call: tls.c) or the
 * server's local socket (unix:PATH), with a deadline on the whole of it.
 * Its own code rather than libcurl's, whose 30-odd libraries took ten
 * milliseconds of every command to load.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define CLIENT_MAX_RESPONSE (256 * 1024 * 1024)
#define CLIENT_MAX_HEADERS (64 * 1024)
#define CLIENT_CONNECT_TIMEOUT_MS 10000
/* Calls of one request to several servers, at most; after a round of
 * them each waits CLIENT_FAILOVER_WAIT_MS (a standby takes over within
 * seconds) */
#define CLIENT_FAILOVER_TRIES 64
#define CLIENT_FAILOVER_WAIT_MS 250
#define CLIENT_FAILOVER_CONNECT_MS 2000 /* with several servers, per server */

static char *read_small(const char *path)
{
	char *text = NULL;
	if (tk_read_file(path, 4096, &text, NULL) < 0)
		return NULL;
	tk_strip(text);
	return text;
}

int client_init(struct client *c, const char *server, const char *token, const char *token_file,
		struct tk_error *err)
{
	memset(c, 0, sizeof(*c));
	const char *url = server ? server : getenv("TENK_SERVER");
	const char *pick = getenv("TENK_CLUSTER");
	struct client_ctx ctx = {0};
	bool from_ctx = false;
	int r;
	if ((!url || !*url) && pick && *pick) {
		/* a cluster named: that one, whatever this folder holds */
		if ((r = client_context(pick, &ctx, err)) < 0)
			return r;
		from_ctx = true;
	} else if (url && *url) {
		c->url = xstrdup(url);
	} else if (access("tenk-data/api.sock", F_OK) == 0) {
		/* the server of this folder's cluster, on this machine: no TLS */
		char *abs = realpath("tenk-data/api.sock", NULL);
		c->url = abs ? xasprintf("unix:%s", abs) : NULL;
		free(abs);
	}
	if (!c->url && !from_ctx)
		c->url = read_small("tenk-data/server.url");
	if (!c->url && !from_ctx) {
		/* the current cluster of the CLI's configuration */
		if ((r = client_context(NULL, &ctx, err)) < 0)
			return r;
		from_ctx = r > 0;
	}
	if (from_ctx)
		c->url = xstrdup(ctx.server);
	if (!c->url)
		return tk_errorf(err, -EINVAL,
				 "no server given: set TENK_SERVER (or pass --server URL), or "
				 "pick a cluster (tenk config use-cluster NAME); `tenk up` "
				 "prints its URL and makes itself the CLI's cluster");
	char *given = c->url;
	r = tk_url_list(given, &c->urls, &c->nurls);
	if (r < 0) {
		r = tk_errorf(err, -EINVAL, "server: expected URL[,URL...], got \"%s\"", given);
		free(given);
		c->url = NULL;
		client_ctx_release(&ctx);
		return r;
	}
	free(given);
	c->url = c->urls[0];
	const char *ca = getenv("TENK_CA");
	if (ca && *ca)
		c->ca = xstrdup(ca);
	else if (from_ctx && ctx.ca)
		c->ca = xstrdup(ctx.ca);
	else if (!from_ctx && access("tenk-data/tls/ca.pem", R_OK) == 0)
		c->ca = xstrdup("tenk-data/tls/ca.pem");
	const char *plain = getenv("TENK_INSECURE_HTTP");
	c->insecure_http = plain && strcmp(plain, "1") == 0;
	r = 0;
	if (token && *token) {
		c->token = xstrdup(token);
	} else if (token_file) {
		c->token = read_small(token_file);
		if (!c->token)
			r = tk_errorf(err, -EINVAL, "cannot read the token file %s", token_file);
	} else if (getenv("TENK_TOKEN") && *getenv("TENK_TOKEN")) {
		c->token = xstrdup(getenv("TENK_TOKEN"));
	} else if (from_ctx && ctx.token_file) {
		c->token = read_small(ctx.token_file);
		if (!c->token)
			r = tk_errorf(err, -EINVAL, "cluster %s: cannot read its token file %s",
				      ctx.name, ctx.token_file);
	} else if (from_ctx) {
		r = tk_errorf(err, -EINVAL,
			      "cluster %s names no token file: set TENK_TOKEN, pass --token, or "
			      "tenk config set-cluster %s --token-file FILE",
			      ctx.name, ctx.name);
	} else {
		c->token = read_small("tenk-data/admin.token");
		if (!c->token)
			r = tk_errorf(err, -EINVAL,
				      "no token given: set TENK_TOKEN (or pass --token or "
				      "--token-file); the admin token is in the server's data "
				      "folder, admin.token");
	}
	client_ctx_release(&ctx);
	return r;
}

int client_set_ca(struct client *c, const char *ca_file, struct tk_error *err)
{
	if (access(ca_file, R_OK) < 0)
		return tk_errorf(err, -errno, "--ca-file: cannot read %s: %s", ca_file,
				 strerror(errno));
	free(c->ca);
	c->ca = xstrdup(ca_file);
	return 0;
}

void client_release(struct client *c)
{
	for (int i = 0; i < c->nurls; i++)
		free(c->urls[i]);
	free(c->urls);
	free(c->token);
	free(c->ca);
	memset(c, 0, sizeof(*c));
}

int client_parse_url(const char *url, struct target *t, struct tk_error *err)
{
	memset(t, 0, sizeof(*t));
	if (strncmp(url, "unix:", 5) == 0) {
		const char *p = url + 5;
		while (p[0] == '/' && p[1] == '/')
			p++; /* unix:///path and unix:/path alike */
		if (p[0] != '/' || strlen(p) >= sizeof(t->path) || strlen(strrchr(p, '/')) > 64)
			return tk_errorf(err, -EINVAL,
					 "server %s: unix: takes an absolute path to a socket",
					 url);
		t->unix_socket = true;
		snprintf(t->path, sizeof(t->path), "%s", p);
		return 0;
	}
	const char *h;
	if (strncasecmp(url, "https://", 8) == 0) {
		t->tls = true;
		h = url + 8;
	} else if (strncasecmp(url, "http://", 7) == 0) {
		h = url + 7;
	} else {
		return tk_errorf(err, -EINVAL,
				 "server %s: expected https://HOST:PORT, http://HOST:PORT or "
				 "unix:PATH",
				 url);
	}
	const char *end;
	if (*h == '[') {
		end = strchr(++h, ']');
		if (!end)
			return tk_errorf(err, -EINVAL, "server %s: no ']' after the address", url);
	} else {
		end = h + strcspn(h, ":/");
	}
	size_t n = (size_t)(end - h);
	if (n == 0 || n >= sizeof(t->host))
		return tk_errorf(err, -EINVAL, "server %s: no host", url);
	memcpy(t->host, h, n);
	const char *p = *end == ']' ? end + 1 : end;
	if (*p == ':') {
		size_t k = strspn(p + 1, "0123456789");
		if (k == 0 || k > 5 || (p[1 + k] && p[1 + k] != '/'))
			return tk_errorf(err, -EINVAL, "server %s: the port must be a number", url);
		memcpy(t->port, p + 1, k);
		int64_t num;
		if (tk_parse_int64(t->port, 1, 65535, &num) < 0)
			return tk_errorf(err, -EINVAL,
					 "server %s: the port must be from 1 to 65535", url);
	} else {
		snprintf(t->port, sizeof(t->port), "%s", t->tls ? "443" : "80");
	}
	return 0;
}

struct conn {
	int fd;
	struct tls *tls;
	int64_t deadline; /* monotonic ms */
};

static int left_ms(const struct conn *k)
{
	int64_t left = k->deadline - tk_mono_ms();
	return left > 0 ? (int)MIN(left, INT32_MAX) : 0;
}

/* Waits until fd is ready for events, or the deadline: 0, or -ETIMEDOUT. */
static int wait_fd(const struct conn *k, short events)
{
	for (;;) {
		struct pollfd p = {.fd = k->fd, .events = events};
		int left = left_ms(k);
		if (left == 0)
			return -ETIMEDOUT;
		int r = poll(&p, 1, left);
		if (r > 0)
			return 0;
		if (r == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static int connect_tcp(const struct target *t, struct conn *k, int64_t connect_deadline)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
	int r = getaddrinfo(t->host, t->port, &hints, &res);
	if (r != 0)
		return r == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	int last = -ECONNREFUSED;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			last = -errno;
			continue;
		}
		k->fd = fd;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
			last = -errno;
		} else {
			struct conn w = {.fd = fd, .deadline = MIN(k->deadline, connect_deadline)};
			int e = 0;
			socklen_t len = sizeof(e);
			if ((last = wait_fd(&w, POLLOUT)) == 0 &&
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 && e == 0) {
				int one = 1;
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				freeaddrinfo(res);
				return 0;
			}
			if (e)
				last = -e;
		}
		close(fd);
		k->fd = -1;
	}
	freeaddrinfo(res);
	return last;
}

static int conn_open(struct client *c, const struct target *t, struct conn *k, struct tk_error *err)
{
	int r;
	if (t->unix_socket) {
		/* through its folder's descriptor: a deep path fits the 108 bytes */
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		const char *slash = strrchr(t->path, '/');
		_cleanup_free_ char *dir = xstrndup(t->path, (size_t)(slash - t->path) + 1);
		int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dfd, slash + 1);
		k->fd = dfd < 0 ? -1
				: socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		r = k->fd < 0 || connect(k->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno
											: 0;
		if (dfd >= 0)
			close(dfd);
	} else {
		r = connect_tcp(t, k,
				tk_mono_ms() + (c->nurls > 1 ? CLIENT_FAILOVER_CONNECT_MS
							     : CLIENT_CONNECT_TIMEOUT_MS));
	}
	if (r < 0)
		return tk_errorf(err, -EIO, "cannot reach the tenk server at %s: %s", c->url,
				 r == -EHOSTUNREACH ? "unknown host" : strerror(-r));
	if (!t->tls)
		return 0;
	/* GnuTLS blocks; the socket's timeouts bound each of its calls */
	fcntl(k->fd, F_SETFL, fcntl(k->fd, F_GETFL) & ~O_NONBLOCK);
	int left = left_ms(k);
	struct timeval tv = {left / 1000, (left % 1000) * 1000};
	setsockopt(k->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(k->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (tls_open(k->fd, t->host, c->ca, left, &k->tls, err) < 0) {
		char why[sizeof(err->text)];
		snprintf(why, sizeof(why), "%s", err->text);
		return tk_errorf(err, -EIO, "cannot reach the tenk server at %s: %s", c->url, why);
	}
	return 0;
}

static void conn_close(struct conn *k)
{
	tls_close(k->tls);
	if (k->fd >= 0)
		close(k->fd);
}

static int send_all(struct conn *k, const char *buf, size_t n)
{
	while (n) {
		ssize_t w;
		if (k->tls) {
			w = tls_send(k->tls, buf, n);
		} else {
			int r = wait_fd(k, POLLOUT);
			if (r < 0)
				return r;
			w = send(k->fd, buf, n, MSG_NOSIGNAL);
			if (w < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (w < 0)
				w = -errno;
		}
		if (w < 0)
			return (int)w;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Some more of the answer into sb: bytes read, 0 at its end, or < 0. */
static ssize_t recv_some(struct conn *k, struct strbuf *sb)
{
	char buf[65536];
	for (;;) {
		ssize_t r;
		if (k->tls) {
			r = tls_recv(k->tls, buf, sizeof(buf));
		} else {
			int w = wait_fd(k, POLLIN);
			if (w < 0)
				return w;
			r = recv(k->fd, buf, sizeof(buf), 0);
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (r < 0)
				r = -errno;
		}
		if (r > 0) {
			if (sb->len + (size_t)r > CLIENT_MAX_RESPONSE)
				return -E2BIG;
			strbuf_add(sb, buf, (size_t)r);
		}
		return r;
	}
}

/* The value of header name in the block [h, end), or NULL. */
static const char *header(const char *h, const char *end, const char *name, size_t *ret_len)
{
	size_t n = strlen(name);
	for (const char *l = h; l < end;) {
		const char *eol = memchr(l, '\n', (size_t)(end - l));
		if (!eol)
			eol = end;
		if ((size_t)(eol - l) > n && strncasecmp(l, name, n) == 0 && l[n] == ':') {
			const char *v = l + n + 1;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			const char *ve = eol;
			while (ve > v && (ve[-1] == '\r' || ve[-1] == ' '))
				ve--;
			*ret_len = (size_t)(ve - v);
			return v;
		}
		l = eol + 1;
	}
	return NULL;
}

ssize_t client_unchunk(char *body, size_t n)
{
	size_t in = 0, out = 0;
	for (;;) {
		char *end;
		if (in >= n)
			return -EAGAIN;
		unsigned long long size = strtoull(body + in, &end, 16);
		char *eol = memchr(body + in, '\n', n - in);
		if (!eol || end == body + in)
			return eol ? -EBADMSG : -EAGAIN;
		in = (size_t)(eol - body) + 1;
		if (size == 0)
			return (ssize_t)out;
		if (size > n - in || n - in - size < 2)
			return -EAGAIN;
		memmove(body + out, body + in, size);
		out += size;
		in += size + 2; /* and its CRLF */
	}
}

/* Reads the whole answer: its status, and its body (from body_off in sb,
 * *body_len long). */
static int read_answer(struct conn *k, struct strbuf *sb, long *status, size_t *body_off,
		       size_t *body_len)
{
	char *hend = NULL;
	while (!(hend = sb->len ? strstr(sb->buf, "\r\n\r\n") : NULL)) {
		if (sb->len > CLIENT_MAX_HEADERS)
			return -EBADMSG;
		ssize_t r = recv_some(k, sb);
		if (r <= 0)
			return r < 0 ? (int)r : -EPIPE;
	}
	size_t hlen = (size_t)(hend - sb->buf) + 4;
	int major, minor, code;
	if (sscanf(sb->buf, "HTTP/%d.%d %d", &major, &minor, &code) != 3)
		return -EBADMSG;
	*status = code;
	if (code == 101) { /* what follows is the new protocol's */
		*body_off = hlen;
		*body_len = 0;
		return 0;
	}
	size_t vlen;
	const char *cl = header(sb->buf, hend, "Content-Length", &vlen);
	const char *te = header(sb->buf, hend, "Transfer-Encoding", &vlen);
	bool chunked = te && vlen >= 7 && strncasecmp(te, "chunked", 7) == 0;
	unsigned long long want = cl ? strtoull(cl, NULL, 10) : 0;
	if (want > CLIENT_MAX_RESPONSE)
		return -E2BIG;
	for (;;) {
		size_t have = sb->len - hlen;
		if (cl && !chunked && have >= want) {
			*body_off = hlen;
			*body_len = (size_t)want;
			return 0;
		}
		if (chunked) {
			/* decoded on a copy: more may be needed */
			char *copy = xmalloc(have + 1);
			memcpy(copy, sb->buf + hlen, have);
			ssize_t n = client_unchunk(copy, have);
			if (n >= 0) {
				memcpy(sb->buf + hlen, copy, (size_t)n);
				free(copy);
				*body_off = hlen;
				*body_len = (size_t)n;
				return 0;
			}
			free(copy);
			if (n != -EAGAIN)
				return (int)n;
		}
		ssize_t r = recv_some(k, sb);
		if (r < 0)
			return (int)r;
		if (r == 0) {
			if (cl || chunked)
				return -EPIPE; /* shorter than it said */
			*body_off = hlen;      /* to the end of the connection */
			*body_len = sb->len - hlen;
			return 0;
		}
	}
}

/* Where c's server is, unless the token would travel in the clear to
 * another machine. */
static int target_of(const struct client *c, struct target *t, struct tk_error *err)
{
	if (!c->insecure_http && tk_url_plain_remote(c->url))
		return tk_errorf(err, -EPERM,
				 "refusing to send the token over plain HTTP to %s, which is not "
				 "this machine: use its https:// URL, or give --insecure-http",
				 c->url);
	return client_parse_url(c->url, t, err);
}

/* One exchange with c->url: the answer's status and JSON (*ret, even for
 * an error), or -EIO, *reached saying whether the request went out. */
static int call_once(struct client *c, const char *method, const char *path, const char *text,
		     int64_t deadline, json_t **ret, long *ret_status, bool *reached,
		     struct tk_error *err)
{
	*reached = false;
	struct target t;
	int r = target_of(c, &t, err);
	if (r < 0)
		return r;
	struct conn k = {.fd = -1, .deadline = deadline};
	struct strbuf req, resp;
	strbuf_init(&req);
	strbuf_init(&resp);
	if ((r = conn_open(c, &t, &k, err)) < 0)
		goto out;
	strbuf_addf(&req,
		    "%s %s HTTP/1.1\r\nHost: %s%s%s\r\nAuthorization: Bearer %s\r\n"
		    "Connection: close\r\n",
		    method, path, t.unix_socket ? "localhost" : t.host, t.unix_socket ? "" : ":",
		    t.unix_socket ? "" : t.port, c->token);
	if (text)
		strbuf_addf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
			    strlen(text));
	else if (strcmp(method, "POST") == 0)
		strbuf_addstr(&req, "Content-Length: 0\r\n");
	strbuf_addstr(&req, "\r\n");
	if (text)
		strbuf_addstr(&req, text);
	long status = 0;
	size_t off = 0, len = 0;
	*reached = true;
	if ((r = send_all(&k, req.buf, req.len)) < 0 ||
	    (r = read_answer(&k, &resp, &status, &off, &len)) < 0) {
		r = tk_errorf(err, -EIO, "cannot reach the tenk server at %s: %s", c->url,
			      r == -ETIMEDOUT ? "no answer in time"
			      : r == -EBADMSG ? "not an HTTP answer"
			      : r == -EPIPE   ? "the connection closed before the answer"
					      : strerror(-r));
		goto out;
	}
	json_error_t jerr;
	*ret = json_loadb(resp.buf + off, len, 0, &jerr);
	*ret_status = status;
	if (!*ret)
		r = tk_errorf(err, -EBADMSG,
			      "the server at %s answered %ld with something that is "
			      "not JSON",
			      c->url, status);
out:
	conn_close(&k);
	strbuf_release(&req);
	strbuf_release(&resp);
	return r;
}

/* Which server to ask after c->url did not take the call (a standby's
 * answer, or none): the active one it names when it is in the list, else
 * the next. */
static void next_server(struct client *c, json_t *answer)
{
	const char *active = json_string_value(json_object_get(answer, "active"));
	int cur = 0;
	for (int i = 0; i < c->nurls; i++)
		if (c->urls[i] == c->url)
			cur = i;
	int next = (cur + 1) % c->nurls;
	for (int i = 0; active && i < c->nurls; i++)
		if (strcmp(c->urls[i], active) == 0)
			next = i;
	c->url = c->urls[next];
}

/* Calls each of several servers in turn until the active one answers:
 * one that cannot be reached, or a standby (307: it names the active; 503:
 * none is active yet) sends the call to the next. A request that went out
 * unanswered goes again only when it changes nothing (GET). */
int client_call(struct client *c, const char *method, const char *path, json_t *body,
		long timeout_ms, json_t **ret, long *ret_status, struct tk_error *err)
{
	c->last_status = 0;
	if (ret_status)
		*ret_status = 0;
	int64_t deadline = tk_mono_ms() + timeout_ms;
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	bool get = strcmp(method, "GET") == 0;
	int r = 0;
	json_t *j = NULL;
	long status = 0;
	for (int tries = 0;; tries++) {
		bool reached;
		status = 0;
		j = NULL;
		r = call_once(c, method, path, text, deadline, &j, &status, &reached, err);
		bool standby =
			j && (status == 307 || (status == 503 && json_object_get(j, "role")));
		bool again = c->nurls > 1 && tries < CLIENT_FAILOVER_TRIES &&
			     tk_mono_ms() + CLIENT_FAILOVER_WAIT_MS < deadline &&
			     ((r == -EIO && (!reached || get)) || standby);
		if (!again)
			break;
		if (tries + 1 >= c->nurls)
			usleep(CLIENT_FAILOVER_WAIT_MS * 1000);
		next_server(c, j);
		json_decref(j);
	}
	free(text);
	if (r < 0) {
		json_decref(j);
		return r;
	}
	c->last_status = status;
	if (ret_status)
		*ret_status = status;
	if (status >= 300) {
		const char *msg = json_string_value(json_object_get(j, "error"));
		const char *active = json_string_value(json_object_get(j, "active"));
		if (status < 400 && active)
			r = tk_errorf(err, -EPROTO, "%s at %s (TENK_SERVER may list several: A,B)",
				      msg ? msg : "ask another server", active);
		else
			r = tk_errorf(err, -EPROTO, "%s",
				      msg ? msg : "the server refused the request");
		json_decref(j);
		return r;
	}
	*ret = j;
	return 0;
}

/* ---- upgraded connections ------------------------------------------------------------- */

struct client_stream {
	struct conn k;
	struct strbuf early; /* what came with the 101, not yet taken */
	size_t early_off;
};

int client_upgrade(struct client *c, const char *path, const char *proto, long timeout_ms,
		   struct client_stream **ret, struct tk_error *err)
{
	struct target t;
	int r = target_of(c, &t, err);
	if (r < 0)
		return r;
	struct client_stream *s = xcalloc(1, sizeof(*s));
	s->k.fd = -1;
	s->k.deadline = tk_mono_ms() + timeout_ms;
	strbuf_init(&s->early);
	struct strbuf req;
	strbuf_init(&req);
	if ((r = conn_open(c, &t, &s->k, err)) < 0)
		goto fail;
	strbuf_addf(&req,
		    "GET %s HTTP/1.1\r\nHost: %s%s%s\r\nAuthorization: Bearer %s\r\n"
		    "Connection: Upgrade\r\nUpgrade: %s\r\n\r\n",
		    path, t.unix_socket ? "localhost" : t.host, t.unix_socket ? "" : ":",
		    t.unix_socket ? "" : t.port, c->token, proto);
	long status = 0;
	size_t off = 0, len = 0;
	if ((r = send_all(&s->k, req.buf, req.len)) < 0 ||
	    (r = read_answer(&s->k, &s->early, &status, &off, &len)) < 0) {
		r = tk_errorf(err, -EIO, "cannot reach the tenk server at %s: %s", c->url,
			      r == -ETIMEDOUT ? "no answer in time" : strerror(-r));
		goto fail;
	}
	c->last_status = status;
	if (status != 101) {
		json_t *j = json_loadb(s->early.buf + off, len, 0, NULL);
		const char *msg = json_string_value(json_object_get(j, "error"));
		r = tk_errorf(err, -EPROTO, "%s", msg ? msg : "the server did not open the stream");
		json_decref(j);
		goto fail;
	}
	s->early_off = off;
	/* from now on no deadline: the stream lasts as long as its ends want */
	s->k.deadline = INT64_MAX / 2;
	if (s->k.tls) {
		struct timeval tv = {0, 0};
		setsockopt(s->k.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	strbuf_release(&req);
	*ret = s;
	return 0;
fail:
	strbuf_release(&req);
	client_stream_close(s);
	return r;
}

int client_stream_fd(const struct client_stream *s)
{
	return s->k.fd;
}

bool client_stream_buffered(const struct client_stream *s)
{
	return s->early_off < s->early.len || (s->k.tls && tls_pending(s->k.tls) > 0);
}

ssize_t client_stream_recv(struct client_stream *s, void *buf, size_t n)
{
	if (s->early_off < s->early.len) {
		size_t k = MIN(n, s->early.len - s->early_off);
		memcpy(buf, s->early.buf + s->early_off, k);
		s->early_off += k;
		return (ssize_t)k;
	}
	if (s->k.tls)
		return tls_recv(s->k.tls, buf, n);
	ssize_t r;
	do
		r = recv(s->k.fd, buf, n, MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return r;
}

int client_stream_send(struct client_stream *s, const void *buf, size_t n)
{
	return send_all(&s->k, buf, n);
}

void client_stream_close(struct client_stream *s)
{
	if (!s)
		return;
	conn_close(&s->k);
	strbuf_release(&s->early);
	free(s);
}
