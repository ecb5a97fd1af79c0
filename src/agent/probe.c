/*
 * Health probes of the node's service replicas (model.h, job_probe): an
 * HTTP GET of the probe's path at 127.0.0.1 and the replica's port, on the
 * agent's loop, as Kubernetes' kubelet does for an httpGet probe. A status
 * 200-399 within the timeout passes; anything else (refused, no answer,
 * another status, a line that is not HTTP) fails, said in a few words.
 *
 * What a result does: the first pass puts the replica in rotation (a READY
 * event); after that, the first failure takes it out (UNREADY, with how it
 * failed), so that the endpoints stop naming it within one probe period
 * and the events' round trip; `threshold` failures in a row, or no pass
 * within the probe's start time, stop it as unhealthy (EXIT_UNHEALTHY),
 * and the service makes another. Until its first pass a replica is probed
 * every quarter of a second at most (so that it enters rotation soon after
 * it serves), then every interval.
 *
 * A probe in flight belongs to the agent, not to its group, and finds its
 * group again by key when it ends: a group may be forgotten meanwhile.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_TICK_MS 100     /* how often probes are started and timed out */
#define PROBE_STARTING_MS 250 /* the most between probes before the first pass */
#define PROBE_ANSWER_MAX 255  /* bytes of an answer read: its status line */

struct probe_conn {
	struct agent *a;
	struct probe_conn *next;
	char key[48]; /* its group's */
	uv_tcp_t tcp;
	uv_connect_t connect;
	uv_write_t write;
	char req[MODEL_PROBE_PATH_MAX + 96];
	char buf[PROBE_ANSWER_MAX + 1];
	size_t nbuf;
	int64_t started_ms; /* monotonic */
	int64_t timeout_ms;
	bool done;
};

static void conn_closed(uv_handle_t *h)
{
	struct probe_conn *c = h->data;
	struct agent *a = c->a;
	free(c);
	agent_handle_gone(a);
}

/* The result of the probe of group g (which it changes, and may stop). */
static void result(struct taskgroup *g, bool ok, const char *why)
{
	struct group_probe *p = &g->probe;
	int64_t now = tk_mono_ms();
	int64_t wait =
		p->passed || ok ? p->spec.interval_ms : MIN(p->spec.interval_ms, PROBE_STARTING_MS);
	p->next_ms = now + wait;
	if (!group_running(g) || g->state != GROUP_RUNNING)
		return;
	struct task_event ev = {.job = g->job,
				.attempt = g->attempt,
				.rank = g->node_rank * g->tpn,
				.at_ms = tk_wall_ms(),
				.energy_mj = -1};
	if (ok) {
		p->fails = 0;
		p->passed = true;
		if (!p->ready || !p->said) {
			p->ready = p->said = true;
			ev.type = TASK_EVENT_READY;
			log_info("job %s: its probe (GET %s at port %d) passes: in rotation",
				 g->key, p->spec.path, p->port);
			group_emit(g, &ev);
		}
		return;
	}
	p->fails++;
	snprintf(p->last_why, sizeof(p->last_why), "%s", why);
	if (p->passed && (p->ready || !p->said)) {
		p->ready = false;
		p->said = true;
		ev.type = TASK_EVENT_UNREADY;
		snprintf(ev.detail, sizeof(ev.detail), "GET %.64s at port %d: %.120s", p->spec.path,
			 p->port, why);
		log_warn("job %s: %s: out of rotation", g->key, ev.detail);
		group_emit(g, &ev);
	}
	char detail[96];
	if (p->passed && p->fails >= p->spec.threshold)
		snprintf(detail, sizeof(detail), "probe failed %d times: %.30s", p->fails, why);
	else if (!p->passed && now - p->since_ms >= p->spec.start_ms)
		snprintf(detail, sizeof(detail), "no probe passed in %llds: %.30s",
			 (long long)(p->spec.start_ms / 1000), why);
	else
		return;
	log_warn("job %s: unhealthy, stopped: %s", g->key, detail);
	group_stop(g, EXIT_UNHEALTHY, detail);
}

/* The probe ends (once): its group, if it is still here, has the result
 * (why NULL: none, the agent stops). */
static void conn_end(struct probe_conn *c, bool ok, const char *why)
{
	if (c->done)
		return;
	c->done = true;
	struct taskgroup *g = tk_map_get(&c->a->groups, c->key);
	if (g && g->probe.conn == c) {
		g->probe.conn = NULL;
		if (why)
			result(g, ok, why);
	}
	/* out of the agent's list */
	for (struct probe_conn **pp = &c->a->probes; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	if (!uv_is_closing((uv_handle_t *)&c->tcp))
		uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct probe_conn *c = h->data;
	buf->base = c->buf + c->nbuf;
	buf->len = PROBE_ANSWER_MAX - c->nbuf;
}

/* Judges the status line in c->buf ("HTTP/1.1 200 OK"). */
static void judge(struct probe_conn *c)
{
	c->buf[c->nbuf] = '\0';
	int major, minor, status;
	char why[96];
	if (sscanf(c->buf, "HTTP/%d.%d %d", &major, &minor, &status) != 3) {
		snprintf(why, sizeof(why), "not an HTTP answer: \"%.40s\"", c->buf);
		conn_end(c, false, why);
		return;
	}
	snprintf(why, sizeof(why), "HTTP %d", status);
	conn_end(c, status >= 200 && status < 400, why);
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct probe_conn *c = s->data;
	if (n > 0)
		c->nbuf += (size_t)n;
	if (n == UV_EOF || c->nbuf >= PROBE_ANSWER_MAX || memchr(c->buf, '\n', c->nbuf)) {
		if (c->nbuf)
			judge(c);
		else
			conn_end(c, false, "closed without an answer");
	} else if (n < 0) {
		char why[96];
		snprintf(why, sizeof(why), "read: %s", uv_strerror((int)n));
		conn_end(c, false, why);
	}
}

static void write_cb(uv_write_t *w, int status)
{
	struct probe_conn *c = w->data;
	if (status < 0 && !c->done) {
		char why[96];
		snprintf(why, sizeof(why), "write: %s", uv_strerror(status));
		conn_end(c, false, why);
	}
}

static void connect_cb(uv_connect_t *req, int status)
{
	struct probe_conn *c = req->data;
	if (c->done)
		return;
	if (status < 0) {
		char why[96];
		snprintf(why, sizeof(why), "connect: %s", uv_strerror(status));
		conn_end(c, false, why);
		return;
	}
	uv_buf_t b = uv_buf_init(c->req, (unsigned)strlen(c->req));
	int r;
	if ((r = uv_write(&c->write, (uv_stream_t *)&c->tcp, &b, 1, write_cb)) < 0 ||
	    (r = uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb)) < 0) {
		char why[96];
		snprintf(why, sizeof(why), "send: %s", uv_strerror(r));
		conn_end(c, false, why);
	}
}

static void probe_start(struct agent *a, struct taskgroup *g, int64_t now)
{
	struct probe_conn *c = xcalloc(1, sizeof(*c));
	c->a = a;
	snprintf(c->key, sizeof(c->key), "%s", g->key);
	c->started_ms = now;
	c->timeout_ms = g->probe.spec.timeout_ms;
	snprintf(c->req, sizeof(c->req),
		 "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\nUser-Agent: tenk-probe\r\n"
		 "Connection: close\r\n\r\n",
		 g->probe.spec.path, g->probe.port);
	uv_tcp_init(a->loop, &c->tcp);
	a->open_handles++;
	c->tcp.data = c->connect.data = c->write.data = c;
	c->next = a->probes;
	a->probes = c;
	g->probe.conn = c;
	struct sockaddr_in sin;
	uv_ip4_addr("127.0.0.1", g->probe.port, &sin);
	int r = uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&sin, connect_cb);
	if (r < 0) {
		char why[96];
		snprintf(why, sizeof(why), "connect: %s", uv_strerror(r));
		conn_end(c, false, why);
	}
}

static void tick(uv_timer_t *t)
{
	struct agent *a = t->data;
	int64_t now = tk_mono_ms();
	/* probes that did not answer in time fail */
	for (struct probe_conn *c = a->probes, *next; c; c = next) {
		next = c->next;
		if (now - c->started_ms >= c->timeout_ms) {
			char why[64];
			snprintf(why, sizeof(why), "no answer in %.1f s", c->timeout_ms / 1000.0);
			conn_end(c, false, why);
		}
	}
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		struct taskgroup *g = v;
		struct group_probe *p = &g->probe;
		if (!p->on || p->conn || g->state != GROUP_RUNNING || !group_running(g))
			continue;
		if (!p->since_ms) {
			p->since_ms = now;
			p->next_ms = now + MIN(p->spec.interval_ms, PROBE_STARTING_MS);
		}
		if (now >= p->next_ms)
			probe_start(a, g, now); /* may stop g: the map allows that */
	}
}

void agent__probe_item(struct taskgroup *g, const struct work_item *it)
{
	struct group_probe *p = &g->probe;
	if (!it->has_probe) {
		p->on = false;
		return;
	}
	p->on = true;
	p->port = it->port;
	p->spec = it->probe;
}

int agent__probe_start(struct agent *a)
{
	uv_timer_init(a->loop, &a->probe_timer);
	a->probe_timer.data = a;
	a->probe_timer_on = true;
	a->open_handles++;
	return uv_timer_start(&a->probe_timer, tick, PROBE_TICK_MS, PROBE_TICK_MS);
}

static void timer_closed(uv_handle_t *h)
{
	agent_handle_gone(h->data);
}

void agent__probe_stop(struct agent *a)
{
	while (a->probes)
		conn_end(a->probes, false, NULL);
	if (a->probe_timer_on) {
		a->probe_timer_on = false;
		uv_timer_stop(&a->probe_timer);
		uv_close((uv_handle_t *)&a->probe_timer, timer_closed);
	}
}
