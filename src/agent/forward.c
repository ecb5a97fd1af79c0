/*
 * A service's address on every node (tenk serve --port): the agent listens
 * on the service's port and forwards each connection to one of its
 * endpoints, the replicas in rotation, as the server's work answers list
 * them (wire_service). It is a TCP forwarder (kube-proxy's userspace mode,
 * HAProxy's mode tcp): bytes both ways, each side's end passed on as a
 * shutdown, a side that writes faster than the other reads held back.
 *
 * Which endpoint: the one with the fewest connections open through this
 * agent (least outstanding work), the next after the last one chosen
 * among equals. An endpoint that refuses a connection is passed over for
 * FWD_DOWN_MS and the connection tries the next, so that a replica that
 * just died costs its clients nothing while the server's table catches
 * up. A connection that finds no endpoint waits for one (FWD_HOLD_MS): a
 * service scaled to zero, or whose replicas are starting, holds its first
 * clients rather than refusing them.
 *
 * Lifetimes: a service removed from the table closes its listener and is
 * freed once its last connection is; a connection is freed once each of
 * its handles is closed.
 */
#include "internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FWD_TICK_MS 100	       /* waiting connections and listeners looked at */
#define FWD_DOWN_MS 1000       /* an endpoint that refused is passed over this long */
#define FWD_HOLD_MS 30000      /* a connection waits for an endpoint at most this long */
#define FWD_BIND_RETRY_MS 5000 /* a port that was taken is tried again after */
#define FWD_BUF 32768	       /* each direction's buffer */
#define FWD_MAX_CONNS 65536    /* open through one service at once */
#define FWD_BUSY_MS 1000       /* a connection answered this lately is still busy */

struct fwd_end {
	struct wire_endpoint ep;
	int active;	       /* connections open to it through this agent */
	int64_t down_until_ms; /* monotonic: refused, passed over until */
};

struct fwd_conn;

struct fwd_service {
	struct agent *a;
	struct fwd_service *next;
	char name[MODEL_NAME_MAX];
	int port;
	uv_tcp_t listener;
	bool listening, listener_open;
	int64_t bind_next_ms;
	bool bind_said;
	int nends;
	struct fwd_end *ends;
	int rr;
	bool gone; /* out of the table: freed once its connections are */
	int conns;
	struct fwd_conn *all;	  /* its connections, open or closing */
	struct fwd_conn *waiting; /* no endpoint yet, oldest first */
	bool held_said;		  /* the server was told some wait (until none does) */
	bool keep;		  /* scratch while a table is applied */
	uint64_t forwarded, refused;
};

struct fwd_conn {
	struct fwd_service *sv;
	struct fwd_conn *next, *prev; /* in sv->all */
	struct fwd_conn *wait_next;
	uv_tcp_t client;
	uv_tcp_t *backend; /* NULL until one is tried */
	uv_connect_t connect;
	int handles;		 /* open, to be closed before it is freed */
	struct wire_endpoint ep; /* the endpoint it goes to ("": none yet) */
	bool counted;		 /* ep's active counts it */
	int tries;
	int64_t since_ms;
	bool waiting, connected, closing;
	uint64_t up_ms, down_ms; /* the loop's time of its last bytes each way */
	bool eof[2];		 /* client, backend: its side ended */
	bool held[2];		 /* reading that side waits while what it read is written */
	char *buf[2];		 /* what was read from each side (FWD_BUF each) */
	uv_write_t wr[2];	 /* ... written to the other, where it did not go at once */
};

struct fwd_shutdown {
	uv_shutdown_t req;
	struct fwd_conn *c;
};

static struct fwd_end *end_of(struct fwd_service *sv, const struct wire_endpoint *ep)
{
	for (int i = 0; i < sv->nends; i++)
		if (sv->ends[i].ep.port == ep->port && strcmp(sv->ends[i].ep.addr, ep->addr) == 0)
			return &sv->ends[i];
	return NULL;
}

static void service_maybe_free(struct fwd_service *sv)
{
	if (!sv->gone || sv->conns || sv->listener_open)
		return;
	struct agent *a = sv->a;
	for (struct fwd_service **pp = &a->fwd; *pp; pp = &(*pp)->next)
		if (*pp == sv) {
			*pp = sv->next;
			break;
		}
	free(sv->ends);
	free(sv);
}

/* ---- a connection's end -------------------------------------------------------------- */

/* One of c's handles closed: c goes with the last. */
static void conn_unref(struct fwd_conn *c)
{
	if (--c->handles)
		return;
	struct fwd_service *sv = c->sv;
	struct agent *a = sv->a;
	free(c->buf[0]);
	free(c->buf[1]);
	if (c->prev)
		c->prev->next = c->next;
	else
		sv->all = c->next;
	if (c->next)
		c->next->prev = c->prev;
	sv->conns--;
	free(c);
	agent_handle_gone(a);
	service_maybe_free(sv);
}

static void conn_handle_closed(uv_handle_t *h)
{
	struct fwd_conn *c = h->data;
	if (h != (uv_handle_t *)&c->client)
		free(h); /* a backend handle */
	conn_unref(c);
}

static void unwait(struct fwd_conn *c)
{
	if (!c->waiting)
		return;
	c->waiting = false;
	for (struct fwd_conn **pp = &c->sv->waiting; *pp; pp = &(*pp)->wait_next)
		if (*pp == c) {
			*pp = c->wait_next;
			break;
		}
	if (!c->sv->waiting)
		c->sv->held_said = false;
}

static void uncount(struct fwd_conn *c)
{
	if (!c->counted)
		return;
	c->counted = false;
	struct fwd_end *e = end_of(c->sv, &c->ep);
	if (e && e->active > 0)
		e->active--;
}

static void conn_close(struct fwd_conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	unwait(c);
	uncount(c);
	uv_close((uv_handle_t *)&c->client, conn_handle_closed);
	if (c->backend && !uv_is_closing((uv_handle_t *)c->backend))
		uv_close((uv_handle_t *)c->backend, conn_handle_closed);
}

/* ---- bytes both ways ----------------------------------------------------------------- */

static uv_stream_t *side(struct fwd_conn *c, int i)
{
	return i == 0 ? (uv_stream_t *)&c->client : (uv_stream_t *)c->backend;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct fwd_conn *c = h->data;
	int from = h == (uv_handle_t *)&c->client ? 0 : 1;
	if (!c->buf[from])
		c->buf[from] = xmalloc(FWD_BUF);
	buf->base = c->buf[from];
	buf->len = FWD_BUF;
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

/* What side `from` read went to the other: it reads again. */
static void write_cb(uv_write_t *req, int status)
{
	struct fwd_conn *c = req->data;
	int from = req == &c->wr[0] ? 0 : 1;
	if (c->closing)
		return;
	if (status < 0) {
		conn_close(c);
		return;
	}
	c->held[from] = false;
	if (!c->eof[from] && uv_read_start(side(c, from), alloc_cb, read_cb) < 0)
		conn_close(c);
}

static void shutdown_cb(uv_shutdown_t *req, int status)
{
	struct fwd_shutdown *sd = (struct fwd_shutdown *)req;
	struct fwd_conn *c = sd->c;
	free(sd);
	if (!c->closing && (status < 0 || (c->eof[0] && c->eof[1])))
		conn_close(c);
}

/* Bytes read from one side go to the other at once where its socket takes
 * them; what it does not take is queued, and the side that read them reads
 * no more until it has (one buffer a direction, no copy). */
static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct fwd_conn *c = s->data;
	int from = s == (uv_stream_t *)&c->client ? 0 : 1, to = 1 - from;
	if (n == 0 || c->closing)
		return;
	if (n < 0) {
		if (n != UV_EOF) {
			conn_close(c);
			return;
		}
		/* its side ended: the other's writing end follows, once what
		 * is queued to it is written */
		c->eof[from] = true;
		uv_read_stop(s);
		struct fwd_shutdown *sd = xmalloc(sizeof(*sd));
		sd->c = c;
		if (uv_shutdown(&sd->req, side(c, to), shutdown_cb) < 0) {
			free(sd);
			conn_close(c);
		}
		return;
	}
	if (from == 0)
		c->up_ms = uv_now(c->sv->a->loop);
	else
		c->down_ms = uv_now(c->sv->a->loop);
	uv_buf_t b = uv_buf_init(buf->base, (unsigned)n);
	int w = uv_try_write(side(c, to), &b, 1);
	if (w == n)
		return;
	if (w < 0 && w != UV_EAGAIN) {
		conn_close(c);
		return;
	}
	if (w > 0)
		b = uv_buf_init(buf->base + w, (unsigned)(n - w));
	c->held[from] = true;
	uv_read_stop(s);
	c->wr[from].data = c;
	if (uv_write(&c->wr[from], side(c, to), &b, 1, write_cb) < 0)
		conn_close(c);
}

/* ---- to an endpoint ------------------------------------------------------------------ */

static void try_endpoint(struct fwd_conn *c);

/* The endpoint with the fewest connections, not refused lately, after the
 * last one chosen among equals; NULL: none. */
static struct fwd_end *pick(struct fwd_service *sv, int64_t now)
{
	struct fwd_end *best = NULL;
	for (int k = 0; k < sv->nends; k++) {
		struct fwd_end *e = &sv->ends[(sv->rr + k) % sv->nends];
		if (e->down_until_ms > now)
			continue;
		if (!best || e->active < best->active)
			best = e;
	}
	if (best)
		sv->rr = (int)(best - sv->ends + 1) % sv->nends;
	return best;
}

static void hold(struct fwd_conn *c)
{
	if (c->waiting)
		return;
	c->waiting = true;
	c->wait_next = NULL;
	struct fwd_conn **pp = &c->sv->waiting;
	while (*pp)
		pp = &(*pp)->wait_next;
	*pp = c;
	/* the first one held: the server hears of it now (the beat counts
	 * it), not at the next beat (a service at zero starts a replica) */
	if (!c->sv->held_said) {
		c->sv->held_said = true;
		agent_beat_now(c->sv->a);
	}
}

static void backend_closed_for_retry(uv_handle_t *h)
{
	struct fwd_conn *c = h->data;
	free(h);
	if (c->closing) { /* conn_close ran meanwhile */
		conn_unref(c);
		return;
	}
	c->handles--;
	try_endpoint(c);
}

static void connect_cb(uv_connect_t *req, int status)
{
	struct fwd_conn *c = req->data;
	if (c->closing)
		return;
	if (status < 0) {
		/* refused (a replica just gone): passed over a while; the next */
		struct fwd_end *e = end_of(c->sv, &c->ep);
		if (e)
			e->down_until_ms = tk_mono_ms() + FWD_DOWN_MS;
		uncount(c);
		uv_close((uv_handle_t *)c->backend, backend_closed_for_retry);
		c->backend = NULL;
		return;
	}
	c->connected = true;
	c->sv->forwarded++;
	if (uv_read_start((uv_stream_t *)&c->client, alloc_cb, read_cb) < 0 ||
	    uv_read_start((uv_stream_t *)c->backend, alloc_cb, read_cb) < 0)
		conn_close(c);
}

static void try_endpoint(struct fwd_conn *c)
{
	struct fwd_service *sv = c->sv;
	int64_t now = tk_mono_ms();
	struct fwd_end *e = c->tries < 2 * sv->nends + 1 ? pick(sv, now) : NULL;
	if (!e) {
		if (now - c->since_ms >= FWD_HOLD_MS || sv->gone) {
			sv->refused++;
			conn_close(c);
		} else {
			hold(c);
		}
		return;
	}
	c->tries++;
	c->ep = e->ep;
	e->active++;
	c->counted = true;
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	if (uv_ip4_addr(e->ep.addr, e->ep.port, sin) < 0 &&
	    uv_ip6_addr(e->ep.addr, e->ep.port, sin6) < 0) {
		e->down_until_ms = now + FWD_DOWN_MS;
		uncount(c);
		try_endpoint(c);
		return;
	}
	c->backend = xmalloc(sizeof(*c->backend));
	uv_tcp_init(sv->a->loop, c->backend);
	c->backend->data = c;
	c->handles++;
	uv_tcp_nodelay(c->backend, 1);
	c->connect.data = c;
	if (uv_tcp_connect(&c->connect, c->backend, (const struct sockaddr *)&ss, connect_cb) < 0) {
		e->down_until_ms = now + FWD_DOWN_MS;
		uncount(c);
		uv_close((uv_handle_t *)c->backend, backend_closed_for_retry);
		c->backend = NULL;
	}
}

static void accept_cb(uv_stream_t *l, int status)
{
	struct fwd_service *sv = l->data;
	if (status < 0)
		return;
	struct fwd_conn *c = xcalloc(1, sizeof(*c));
	c->sv = sv;
	uv_tcp_init(sv->a->loop, &c->client);
	c->client.data = c;
	c->handles = 1;
	c->next = sv->all;
	if (sv->all)
		sv->all->prev = c;
	sv->all = c;
	sv->conns++;
	sv->a->open_handles++;
	c->since_ms = tk_mono_ms();
	if (uv_accept(l, (uv_stream_t *)&c->client) < 0 || sv->conns > FWD_MAX_CONNS) {
		conn_close(c);
		return;
	}
	uv_tcp_nodelay(&c->client, 1);
	try_endpoint(c);
}

/* ---- the table ----------------------------------------------------------------------- */

static void listener_closed(uv_handle_t *h)
{
	struct fwd_service *sv = h->data;
	struct agent *a = sv->a;
	sv->listener_open = sv->listening = false;
	service_maybe_free(sv);
	agent_handle_gone(a);
}

static void listen_try(struct fwd_service *sv, int64_t now)
{
	/* (a listener that failed is closing until its callback) */
	if (sv->listening || sv->gone || sv->listener_open || now < sv->bind_next_ms)
		return;
	struct agent *a = sv->a;
	uv_tcp_init(a->loop, &sv->listener);
	sv->listener.data = sv;
	sv->listener_open = true;
	a->open_handles++;
	struct sockaddr_in sin;
	uv_ip4_addr("0.0.0.0", sv->port, &sin);
	int r = uv_tcp_bind(&sv->listener, (const struct sockaddr *)&sin, 0);
	if (r == 0)
		r = uv_listen((uv_stream_t *)&sv->listener, 1024, accept_cb);
	if (r < 0) {
		if (!sv->bind_said)
			log_warn("service %s: cannot listen on port %d (%s); trying again every "
				 "%d s",
				 sv->name, sv->port, uv_strerror(r), FWD_BIND_RETRY_MS / 1000);
		sv->bind_said = true;
		sv->bind_next_ms = now + FWD_BIND_RETRY_MS;
		/* a failed bind leaves the handle unusable: a new one next time */
		uv_close((uv_handle_t *)&sv->listener, listener_closed);
		return;
	}
	sv->listening = true;
	if (sv->bind_said)
		log_info("service %s: listening on port %d", sv->name, sv->port);
	sv->bind_said = false;
}

static void service_drop(struct fwd_service *sv)
{
	sv->gone = true;
	while (sv->waiting) {
		struct fwd_conn *c = sv->waiting;
		conn_close(c); /* takes it out of the list */
	}
	if (sv->listener_open && !uv_is_closing((uv_handle_t *)&sv->listener))
		uv_close((uv_handle_t *)&sv->listener, listener_closed);
	service_maybe_free(sv);
}

static void dispatch_waiting(struct fwd_service *sv)
{
	/* each tries once more; one that finds none waits again at the end */
	struct fwd_conn *list = sv->waiting;
	sv->waiting = NULL;
	while (list) {
		struct fwd_conn *c = list;
		list = c->wait_next;
		c->waiting = false;
		c->tries = 0;
		try_endpoint(c);
	}
	if (!sv->waiting)
		sv->held_said = false;
}

void agent__forward_table(struct agent *a, const struct wire_service *v, int n)
{
	for (struct fwd_service *sv = a->fwd; sv; sv = sv->next)
		sv->keep = false;
	int64_t now = tk_mono_ms();
	for (int i = 0; i < n; i++) {
		struct fwd_service *sv = a->fwd;
		while (sv &&
		       (sv->gone || strcmp(sv->name, v[i].name) != 0 || sv->port != v[i].port))
			sv = sv->next;
		if (!sv) {
			sv = xcalloc(1, sizeof(*sv));
			sv->a = a;
			snprintf(sv->name, sizeof(sv->name), "%s", v[i].name);
			sv->port = v[i].port;
			sv->next = a->fwd;
			a->fwd = sv;
			log_info("service %s: its address is port %d here", sv->name, sv->port);
		}
		sv->keep = true;
		/* the endpoints, each keeping what this agent counted of it */
		struct fwd_end *ends = xcalloc((size_t)v[i].nends + 1, sizeof(*ends));
		for (int k = 0; k < v[i].nends; k++) {
			ends[k].ep = v[i].ends[k];
			const struct fwd_end *old = end_of(sv, &v[i].ends[k]);
			if (old) {
				ends[k].active = old->active;
				ends[k].down_until_ms = old->down_until_ms;
			}
		}
		free(sv->ends);
		sv->ends = ends;
		sv->nends = v[i].nends;
		sv->rr = sv->nends ? sv->rr % sv->nends : 0;
		listen_try(sv, now);
		if (sv->nends)
			dispatch_waiting(sv);
	}
	for (struct fwd_service *sv = a->fwd, *next; sv; sv = next) {
		next = sv->next;
		if (!sv->keep && !sv->gone) {
			log_info("service %s: no longer here (port %d closed)", sv->name, sv->port);
			service_drop(sv); /* may free it */
		}
	}
	if (a->fwd && !a->fwd_timer_on) {
		uv_timer_init(a->loop, &a->fwd_timer);
		a->fwd_timer.data = a;
		a->fwd_timer_on = true;
		a->open_handles++;
		uv_timer_start(&a->fwd_timer, agent__forward_tick, FWD_TICK_MS, FWD_TICK_MS);
	}
}

void agent__forward_tick(uv_timer_t *t)
{
	struct agent *a = t->data;
	int64_t now = tk_mono_ms();
	for (struct fwd_service *sv = a->fwd; sv; sv = sv->next) {
		listen_try(sv, now);
		/* waiting ones: an endpoint back from being passed over, or too long */
		if (sv->waiting)
			dispatch_waiting(sv);
	}
}

int agent__forward_load(struct agent *a, struct wire_serve_load **ret)
{
	int n = 0;
	for (struct fwd_service *sv = a->fwd; sv; sv = sv->next)
		n += !sv->gone;
	struct wire_serve_load *v = xcalloc((size_t)n + 1, sizeof(*v));
	uint64_t now = uv_now(a->loop);
	n = 0;
	for (struct fwd_service *sv = a->fwd; sv; sv = sv->next) {
		if (sv->gone)
			continue;
		struct wire_serve_load *l = &v[n++];
		snprintf(l->name, sizeof(l->name), "%s", sv->name);
		for (struct fwd_conn *c = sv->all; c; c = c->next) {
			if (c->closing)
				continue;
			if (c->waiting)
				l->held++;
			else if (c->connected &&
				 (c->up_ms > c->down_ms || now - c->down_ms < FWD_BUSY_MS))
				l->busy++;
		}
	}
	*ret = v;
	return n;
}

void agent__forward_metrics(struct agent *a, struct strbuf *b)
{
	if (!a->fwd)
		return;
	strbuf_addf(b, "# HELP tenk_agent_service_connections_total Connections this agent "
		       "forwarded to a service's replicas.\n"
		       "# TYPE tenk_agent_service_connections_total counter\n");
	for (struct fwd_service *sv = a->fwd; sv; sv = sv->next)
		if (!sv->gone)
			strbuf_addf(b,
				    "tenk_agent_service_connections_total{service=\"%s\"} %llu\n",
				    sv->name, (unsigned long long)sv->forwarded);
	strbuf_addf(b, "# HELP tenk_agent_service_refused_total Connections to a service "
		       "closed for want of a replica in rotation.\n"
		       "# TYPE tenk_agent_service_refused_total counter\n");
	for (struct fwd_service *sv = a->fwd; sv; sv = sv->next)
		if (!sv->gone)
			strbuf_addf(b, "tenk_agent_service_refused_total{service=\"%s\"} %llu\n",
				    sv->name, (unsigned long long)sv->refused);
}

static void timer_closed(uv_handle_t *h)
{
	agent_handle_gone(h->data);
}

void agent__forward_stop(struct agent *a)
{
	for (struct fwd_service *sv = a->fwd, *next; sv; sv = next) {
		next = sv->next;
		/* open connections end with the agent */
		for (struct fwd_conn *c = sv->all; c; c = c->next)
			conn_close(c);
		if (!sv->gone)
			service_drop(sv); /* may free it */
	}
	if (a->fwd_timer_on) {
		a->fwd_timer_on = false;
		uv_timer_stop(&a->fwd_timer);
		uv_close((uv_handle_t *)&a->fwd_timer, timer_closed);
	}
}
