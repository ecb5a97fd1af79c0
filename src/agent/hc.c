/*
 * libcurl's multi interface on libuv: curl tells us which sockets to watch
 * (socket_cb) and when to wake it (timer_cb); we tell curl when a socket is
 * ready (poll_cb) or the timer fires; finished transfers are collected in
 * check_done and handed to their callbacks.
 */
#include "hc.h"

#include <curl/curl.h>
#include <string.h>

#include "util/util.h"

struct hc {
	uv_loop_t *loop;
	CURLM *multi;
	uv_timer_t timer;
	struct hc_req *reqs; /* every request in flight */
	struct sock *socks;  /* every watched socket */
	int open_handles;
	bool closing;
	void (*closed_cb)(void *arg);
	void *closed_arg;
	char *ca;	 /* the CA file HTTPS is verified against; NULL: the system's */
	long connect_ms; /* a connection's time to open, at most */
};

struct hc_req {
	struct hc *c;
	CURL *easy;
	struct curl_slist *headers;
	struct strbuf resp;
	bool too_big;
	hc_done_cb cb;
	void *arg;
	struct hc_req *prev, *next;
};

struct sock {
	uv_poll_t poll;
	curl_socket_t fd;
	struct hc *c;
	bool closing;
	struct sock *prev, *next;
};

static void maybe_closed(struct hc *c)
{
	if (c->closing && c->open_handles == 0) {
		void (*cb)(void *) = c->closed_cb;
		void *arg = c->closed_arg;
		free(c->ca);
		free(c);
		if (cb)
			cb(arg);
	}
}

static void sock_closed(uv_handle_t *h)
{
	struct sock *sk = h->data;
	struct hc *c = sk->c;
	if (sk->prev)
		sk->prev->next = sk->next;
	else
		c->socks = sk->next;
	if (sk->next)
		sk->next->prev = sk->prev;
	free(sk);
	c->open_handles--;
	maybe_closed(c);
}

static void req_free(struct hc_req *r)
{
	struct hc *c = r->c;
	if (r->prev)
		r->prev->next = r->next;
	else
		c->reqs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	curl_multi_remove_handle(c->multi, r->easy);
	curl_easy_cleanup(r->easy);
	curl_slist_free_all(r->headers);
	strbuf_release(&r->resp);
	free(r);
}

static void check_done(struct hc *c)
{
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(c->multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		struct hc_req *r = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		long status = 0;
		char errtext[256] = "";
		if (msg->data.result == CURLE_OK) {
			curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
		} else if (r->too_big) {
			snprintf(errtext, sizeof(errtext), "answer larger than %d bytes",
				 HC_MAX_RESPONSE);
		} else {
			snprintf(errtext, sizeof(errtext), "%s",
				 curl_easy_strerror(msg->data.result));
		}
		hc_done_cb cb = r->cb;
		void *arg = r->arg;
		struct strbuf body = r->resp;
		strbuf_init(&r->resp);
		req_free(r);
		cb(arg, status, body.buf, body.len, errtext);
		strbuf_release(&body);
	}
}

static void poll_cb(uv_poll_t *p, int status, int events)
{
	struct sock *sk = p->data;
	struct hc *c = sk->c;
	int flags = 0;
	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	int running;
	curl_multi_socket_action(c->multi, sk->fd, flags, &running);
	check_done(c);
}

static int socket_cb(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct hc *c = userp;
	struct sock *sk = socketp;
	(void)e;
	if (what == CURL_POLL_REMOVE) {
		if (sk && !sk->closing) {
			sk->closing = true;
			uv_poll_stop(&sk->poll);
			uv_close((uv_handle_t *)&sk->poll, sock_closed);
			curl_multi_assign(c->multi, fd, NULL);
		}
		return 0;
	}
	if (!sk) {
		sk = xcalloc(1, sizeof(*sk));
		sk->fd = fd;
		sk->c = c;
		if (uv_poll_init_socket(c->loop, &sk->poll, fd) < 0) {
			free(sk);
			return -1;
		}
		sk->poll.data = sk;
		sk->next = c->socks;
		if (c->socks)
			c->socks->prev = sk;
		c->socks = sk;
		c->open_handles++;
		curl_multi_assign(c->multi, fd, sk);
	}
	int events = 0;
	if (what & CURL_POLL_IN)
		events |= UV_READABLE;
	if (what & CURL_POLL_OUT)
		events |= UV_WRITABLE;
	uv_poll_start(&sk->poll, events, poll_cb);
	return 0;
}

static void on_timeout(uv_timer_t *t)
{
	struct hc *c = t->data;
	int running;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done(c);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	struct hc *c = userp;
	(void)multi;
	if (timeout_ms < 0)
		uv_timer_stop(&c->timer);
	else
		uv_timer_start(&c->timer, on_timeout, (uint64_t)timeout_ms, 0);
	return 0;
}

static size_t write_cb(char *data, size_t size, size_t n, void *userp)
{
	struct hc_req *r = userp;
	size_t len = size * n;
	if (r->resp.len + len > HC_MAX_RESPONSE) {
		r->too_big = true;
		return 0;
	}
	strbuf_add(&r->resp, data, len);
	return len;
}

void agent__hc_set_ca(struct hc *hc, const char *ca_file)
{
	free(hc->ca);
	hc->ca = ca_file ? xstrdup(ca_file) : NULL;
}

void agent__hc_set_max_connections(struct hc *hc, long n)
{
	curl_multi_setopt(hc->multi, CURLMOPT_MAX_HOST_CONNECTIONS, n);
}

struct hc *agent__hc_create(uv_loop_t *loop)
{
	struct hc *c = xcalloc(1, sizeof(*c));
	c->loop = loop;
	c->multi = curl_multi_init();
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	uv_timer_init(loop, &c->timer);
	c->timer.data = c;
	c->open_handles = 1;
	return c;
}

struct hc_req *agent__hc_request(struct hc *c, const char *method, const char *url,
				 const char *token, const char *body, long timeout_ms,
				 hc_done_cb cb, void *arg)
{
	return agent__hc_request_from(c, NULL, method, url, token, body, timeout_ms, cb, arg);
}

struct hc_req *agent__hc_request_from(struct hc *c, const char *from, const char *method,
				      const char *url, const char *token, const char *body,
				      long timeout_ms, hc_done_cb cb, void *arg)
{
	struct hc_req *r = xcalloc(1, sizeof(*r));
	r->c = c;
	r->cb = cb;
	r->arg = arg;
	strbuf_init(&r->resp);
	r->easy = curl_easy_init();
	if (!r->easy)
		abort();
	CURL *e = r->easy;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, r);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
			 MIN(timeout_ms, c->connect_ms ? c->connect_ms : 10000L));
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	if (from) {
		char local[80];
		snprintf(local, sizeof(local), "host!%s", from); /* an address, not a device */
		curl_easy_setopt(e, CURLOPT_INTERFACE, local);
	}
	if (c->ca)
		curl_easy_setopt(e, CURLOPT_CAINFO, c->ca);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	if (body)
		curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body);
	if (token) {
		char *h = xasprintf("Authorization: Bearer %s", token);
		r->headers = curl_slist_append(r->headers, h);
		free(h);
	}
	if (body) {
		r->headers = curl_slist_append(r->headers, "Content-Type: application/json");
		r->headers = curl_slist_append(r->headers, "Expect:");
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
	r->next = c->reqs;
	if (c->reqs)
		c->reqs->prev = r;
	c->reqs = r;
	curl_multi_add_handle(c->multi, e);
	return r;
}

void agent__hc_cancel(struct hc_req *r)
{
	req_free(r);
}

static void timer_closed(uv_handle_t *h)
{
	struct hc *c = h->data;
	c->open_handles--;
	maybe_closed(c);
}

void agent__hc_destroy(struct hc *c, void (*closed_cb)(void *arg), void *arg)
{
	while (c->reqs)
		req_free(c->reqs);
	c->closing = true;
	c->closed_cb = closed_cb;
	c->closed_arg = arg;
	/* removes the sockets: socket_cb closes their polls */
	curl_multi_cleanup(c->multi);
	c->multi = NULL;
	for (struct sock *sk = c->socks; sk; sk = sk->next)
		if (!sk->closing) {
			sk->closing = true;
			uv_poll_stop(&sk->poll);
			uv_close((uv_handle_t *)&sk->poll, sock_closed);
		}
	uv_timer_stop(&c->timer);
	uv_close((uv_handle_t *)&c->timer, timer_closed);
}

void agent__hc_set_connect_timeout(struct hc *hc, long ms)
{
	hc->connect_ms = ms;
}
