/*
 * Hollow nodes (`tenk agent --hollow N`): N node identities in one process
 * that speak the agents' real protocol to the real server (register,
 * heartbeats, the work long-poll, task events) and run nothing: a task
 * "runs" for as long as its command says (`sleep 30`: 30 s; `true`: at
 * once; `false`: at once, exit 1), else for --hollow-run, and exits 0. What
 * kubemark's hollow kubelets are to Kubernetes: one machine drives the
 * server as a large cluster.
 *
 * Each node has its own agent id, credential (from joining with the join
 * token; kept in memory), heartbeat timer, long-poll and event queue; every
 * 32 of them share an HTTP client (libcurl multi, keep-alive) on one loop,
 * with a connection for each long-poll and 8 the others take in turn, so
 * that a node holds little more than one descriptor. An attempt
 * the server stops listing before its tasks "ended" ends them as a stop
 * would (cancelled). Checkpoints, images, logs, terminals, metrics and
 * health checks are not simulated.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define HOLLOW_MAX_NODES 100000
#define HOLLOW_RETRY_MS 1000
/* nodes per HTTP client: libcurl looks for a connection to reuse through
 * all of a client's connections to a host, so thousands of nodes on one
 * client spend their time there */
#define HOLLOW_NODES_PER_CLIENT 32
/* a client's connections: one per node's long-poll, and these for the
 * nodes' heartbeats and events (short requests, in turn) */
#define HOLLOW_SPARE_CONNS 8

struct hollow;

/* One attempt's tasks on a hollow node. */
struct hrun {
	struct hrun *next;
	struct hnode *n;
	int64_t job;
	int attempt;
	int first_rank, ntasks;
	int exit_code;
	bool exited;
	bool marked;
	uv_timer_t timer;
};

struct hnode {
	struct hollow *h;
	struct node_inventory inv;
	char from[24]; /* the local address it calls from ("": any) */
	struct hc *hc; /* its share of the clients */
	char agent_id[33];
	char cred[WIRE_CREDENTIAL_MAX];
	bool registered;
	struct hc_req *reg_req, *poll_req, *hb_req, *ev_req;
	char epoch[WIRE_EPOCH_MAX];
	uint64_t gen;
	int64_t beat_ms;
	/* the newest heartbeat answer, which the next beat acknowledges */
	char acked_epoch[WIRE_EPOCH_MAX];
	int64_t acked_at_ms;
	char group_id[WIRE_GROUP_ID_MAX], group_tag[WIRE_GROUP_ID_MAX]; /* its witness group */
	uint64_t beats;
	uv_timer_t hb_timer, retry_timer;
	struct hrun *runs;
	struct task_event *events;
	size_t nevents, events_alloc, nsent;
};

struct hollow {
	uv_loop_t *loop;
	struct hc **hcs;
	int nhc;
	char *url, *token, *ca;
	char *url_register, *url_heartbeat, *url_events, *url_work;
	int64_t run_ms;	      /* what a task of any other command takes */
	int64_t heartbeat_ms; /* as the real agent's (agent_config), lease permitting */
	int n;
	struct hnode *nodes;
	bool stopping;
	int open_handles;
	void (*done_cb)(void *arg);
	void *done_arg;
};

static void do_register(struct hnode *n);
static void do_poll(struct hnode *n);
static void do_events(struct hnode *n);

static void retry_cb(uv_timer_t *t)
{
	struct hnode *n = t->data;
	if (!n->registered)
		do_register(n);
	else {
		do_poll(n);
		do_events(n);
	}
}

static void retry_later(struct hnode *n)
{
	if (!n->h->stopping)
		uv_timer_start(&n->retry_timer, retry_cb, HOLLOW_RETRY_MS, 0);
}

static void need_register(struct hnode *n)
{
	n->registered = false;
	if (n->poll_req) {
		agent__hc_cancel(n->poll_req);
		n->poll_req = NULL;
	}
	uv_timer_stop(&n->hb_timer);
	retry_later(n);
}

/* Sends body (taken) as JSON from n's address, with token. */
static struct hc_req *post(struct hnode *n, const char *url, const char *token, json_t *body,
			   long timeout_ms, hc_done_cb cb)
{
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	struct hc_req *r = agent__hc_request_from(n->hc, n->from[0] ? n->from : NULL, "POST", url,
						  token, text, timeout_ms, cb, n);
	free(text);
	return r;
}

static json_t *parse(const char *body, size_t len)
{
	json_error_t e;
	return body && len ? json_loadb(body, len, 0, &e) : NULL;
}

/* ---- events --------------------------------------------------------------------- */

static void queue_event(struct hnode *n, const struct hrun *r, int rank, enum task_event_type type,
			int code, enum exit_cause cause)
{
	xgrow(&n->events, &n->events_alloc, n->nevents + 1, sizeof(*n->events));
	struct task_event *e = &n->events[n->nevents++];
	memset(e, 0, sizeof(*e));
	e->job = r->job;
	e->attempt = r->attempt;
	e->rank = rank;
	e->type = type;
	e->at_ms = tk_wall_ms();
	e->exit_code = code;
	e->signal = cause == EXIT_CANCELLED ? 15 : 0;
	e->cause = cause;
	e->energy_mj = -1;
	if (cause == EXIT_CANCELLED)
		snprintf(e->detail, sizeof(e->detail), "stopped");
}

static void events_done(void *arg, long status, const char *body, size_t len, const char *error)
{
	struct hnode *n = arg;
	n->ev_req = NULL;
	if (status == 200) {
		memmove(n->events, n->events + n->nsent,
			(n->nevents - n->nsent) * sizeof(*n->events));
		n->nevents -= n->nsent;
		n->nsent = 0;
		do_events(n);
		return;
	}
	n->nsent = 0;
	if (status == 401 || status == 409)
		need_register(n);
	else
		retry_later(n);
}

static void do_events(struct hnode *n)
{
	if (!n->registered || n->ev_req || !n->nevents || n->h->stopping)
		return;
	n->nsent = MIN(n->nevents, (size_t)AGENT_MAX_EVENTS_SENT);
	struct wire_events m = {.nevents = (int)n->nsent, .events = n->events};
	snprintf(m.node, sizeof(m.node), "%s", n->inv.name);
	snprintf(m.agent_id, sizeof(m.agent_id), "%s", n->agent_id);
	n->ev_req = post(n, n->h->url_events, n->cred, wire_events_pack(&m), 10000, events_done);
}

/* ---- attempts --------------------------------------------------------------------- */

static void run_closed(uv_handle_t *t)
{
	struct hrun *r = t->data;
	struct hollow *h = r->n->h;
	free(r);
	if (--h->open_handles == 0 && h->done_cb)
		h->done_cb(h->done_arg);
}

static void run_free(struct hrun *r)
{
	uv_close((uv_handle_t *)&r->timer, run_closed);
}

static void run_end(struct hrun *r, int code, enum exit_cause cause)
{
	if (r->exited)
		return;
	r->exited = true;
	uv_timer_stop(&r->timer);
	for (int k = 0; k < r->ntasks; k++)
		queue_event(r->n, r, r->first_rank + k, TASK_EVENT_EXITED, code, cause);
	do_events(r->n);
}

static void run_timer_cb(uv_timer_t *t)
{
	struct hrun *r = t->data;
	run_end(r, r->exit_code, EXIT_EXITED);
}

/* How long a task of argv "runs", and how it exits. */
static int64_t run_for(const struct hollow *h, char *const *argv, int argc, int *code)
{
	*code = 0;
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	if (strcmp(base, "true") == 0)
		return 0;
	if (strcmp(base, "false") == 0) {
		*code = 1;
		return 0;
	}
	if (strcmp(base, "sleep") == 0 && argc == 2) {
		char *end;
		double s = strtod(argv[1], &end);
		if (end != argv[1] && !*end && s >= 0 && s < 1e9)
			return (int64_t)(s * 1000);
	}
	return h->run_ms;
}

static void run_start(struct hnode *n, const struct work_item *it)
{
	const struct work_spec *sp = it->spec;
	struct hrun *r = xcalloc(1, sizeof(*r));
	r->n = n;
	r->job = it->job;
	r->attempt = it->attempt;
	r->ntasks = sp->tasks_per_node;
	r->first_rank = sp->node_rank * sp->tasks_per_node;
	r->marked = true;
	uv_timer_init(n->h->loop, &r->timer);
	r->timer.data = r;
	n->h->open_handles++;
	r->next = n->runs;
	n->runs = r;
	for (int k = 0; k < r->ntasks; k++)
		queue_event(n, r, r->first_rank + k, TASK_EVENT_STARTED, 0, EXIT_EXITED);
	int64_t ms = run_for(n->h, sp->argv, sp->argc, &r->exit_code);
	if (it->limit_s > 0 && ms > it->limit_s * 1000)
		ms = it->limit_s * 1000; /* cut at its limit, as a shim would */
	uv_timer_start(&r->timer, run_timer_cb, (uint64_t)ms, 0);
}

static void apply_work(struct hnode *n, const struct wire_work *w)
{
	for (struct hrun *r = n->runs; r; r = r->next)
		r->marked = false;
	for (int i = 0; i < w->nitems; i++) {
		const struct work_item *it = &w->items[i];
		struct hrun *r = n->runs;
		while (r && (r->job != it->job || r->attempt != it->attempt))
			r = r->next;
		if (r)
			r->marked = true;
		else if (it->spec)
			run_start(n, it);
	}
	/* what the server no longer lists is stopped, or forgotten once ended */
	for (struct hrun **pp = &n->runs; *pp;) {
		struct hrun *r = *pp;
		if (r->marked) {
			pp = &r->next;
			continue;
		}
		run_end(r, 128 + 15, EXIT_CANCELLED);
		*pp = r->next;
		run_free(r);
	}
	snprintf(n->epoch, sizeof(n->epoch), "%s", w->epoch);
	n->gen = w->gen;
	do_events(n);
}

/* ---- the work long-poll --------------------------------------------------------------- */

static void poll_done(void *arg, long status, const char *body, size_t len, const char *error)
{
	struct hnode *n = arg;
	n->poll_req = NULL;
	if (n->h->stopping)
		return;
	if (status == 401 || status == 409) {
		need_register(n);
		return;
	}
	if (status != 200) {
		retry_later(n);
		return;
	}
	json_t *j = parse(body, len);
	struct wire_work w;
	struct tk_error err;
	if (j && wire_work_unpack(j, &w, &err) == 0) {
		if (!w.unchanged)
			apply_work(n, &w);
		wire_work_release(&w);
	} else {
		n->gen = 0; /* ask again from scratch */
	}
	json_decref(j);
	do_poll(n);
}

static void do_poll(struct hnode *n)
{
	if (n->poll_req || !n->registered || n->h->stopping)
		return;
	char url[1024];
	snprintf(url, sizeof(url), "%s?node=%s&agent_id=%s&epoch=%s&gen=%llu&wait_ms=%d",
		 n->h->url_work, n->inv.name, n->agent_id, n->epoch[0] ? n->epoch : "none",
		 (unsigned long long)n->gen, AGENT_POLL_WAIT_MS);
	n->poll_req =
		agent__hc_request_from(n->hc, n->from[0] ? n->from : NULL, "GET", url, n->cred,
				       NULL, AGENT_POLL_WAIT_MS + 15000, poll_done, n);
}

/* ---- heartbeats and registration -------------------------------------------------------- */

static void hb_done(void *arg, long status, const char *body, size_t len, const char *error)
{
	struct hnode *n = arg;
	n->hb_req = NULL;
	if (status == 200) {
		/* a hollow node runs no task and renews nothing by its peers:
		 * it acknowledges its witness group and asks no one */
		struct wire_group g;
		struct tk_error err;
		if (wire_beat_answer_take(body, len, n->acked_epoch, &n->acked_at_ms, &g, &err) >
		    0) {
			snprintf(n->group_id, sizeof(n->group_id), "%s", g.id);
			snprintf(n->group_tag, sizeof(n->group_tag), "%s", g.tag);
		}
	}
	if ((status == 401 || status == 409) && !n->h->stopping)
		need_register(n);
}

static void hb_timer_cb(uv_timer_t *t)
{
	struct hnode *n = t->data;
	if (!n->registered || n->hb_req || n->h->stopping)
		return;
	struct wire_heartbeat m = {.acked_at_ms = n->acked_at_ms};
	snprintf(m.acked_epoch, sizeof(m.acked_epoch), "%s", n->acked_epoch);
	snprintf(m.group_id, sizeof(m.group_id), "%s", n->group_id);
	snprintf(m.group_tag, sizeof(m.group_tag), "%s", n->group_tag);
	m.witness_seq = ++n->beats;
	snprintf(m.node, sizeof(m.node), "%s", n->inv.name);
	snprintf(m.agent_id, sizeof(m.agent_id), "%s", n->agent_id);
	n->hb_req = post(n, n->h->url_heartbeat, n->cred, wire_heartbeat_pack(&m),
			 (long)MAX(n->beat_ms * 2, 1000), hb_done);
}

static void reg_done(void *arg, long status, const char *body, size_t len, const char *error)
{
	struct hnode *n = arg;
	n->reg_req = NULL;
	if (n->h->stopping)
		return;
	json_t *j = status == 200 ? parse(body, len) : NULL;
	struct wire_registered ans;
	struct tk_error err;
	if (!j || wire_registered_unpack(j, &ans, &err) < 0) {
		if (status == 401 && n->cred[0])
			n->cred[0] = '\0'; /* join again with the join token */
		if (status != 200 || j)
			log_debug("hollow %s: register: %ld %.*s", n->inv.name, status,
				  (int)MIN(len, 200), body ? body : "");
		json_decref(j);
		retry_later(n);
		return;
	}
	json_decref(j);
	if (ans.credential[0])
		snprintf(n->cred, sizeof(n->cred), "%s", ans.credential);
	struct wire_lease lease;
	wire_lease_of(ans.node_timeout_ms, n->h->heartbeat_ms, &lease);
	n->beat_ms = lease.heartbeat_ms;
	uv_timer_start(&n->hb_timer, hb_timer_cb, (uint64_t)n->beat_ms, (uint64_t)n->beat_ms);
	n->registered = true;
	n->gen = 0;
	n->epoch[0] = '\0';
	do_poll(n);
	do_events(n);
}

static void do_register(struct hnode *n)
{
	if (n->reg_req || n->h->stopping)
		return;
	struct wire_register m = {.inv = n->inv};
	snprintf(m.agent_id, sizeof(m.agent_id), "%s", n->agent_id);
	/* what it still "runs": the server keeps those on the node */
	int count = 0;
	for (struct hrun *r = n->runs; r; r = r->next)
		count++;
	m.kept = xcalloc((size_t)count + 1, sizeof(*m.kept));
	for (struct hrun *r = n->runs; r; r = r->next)
		m.kept[m.nkept++] = (struct wire_attempt_ref){r->job, r->attempt};
	json_t *body = wire_register_pack(&m);
	free(m.kept);
	n->reg_req = post(n, n->h->url_register, n->cred[0] ? n->cred : n->h->token, body, 10000,
			  reg_done);
}

/* ---- life ------------------------------------------------------------------------------ */

/* Enough descriptors for each node's long-poll and each client's spare
 * connections: the soft limit raised to the hard one. */
static void more_descriptors(int n)
{
	struct rlimit rl;
	rlim_t need =
		(rlim_t)n + (rlim_t)(n / HOLLOW_NODES_PER_CLIENT + 1) * HOLLOW_SPARE_CONNS + 64;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max && rl.rlim_cur < need) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int hollow_create(uv_loop_t *loop, const struct agent_config *cfg, int n, int64_t run_ms,
		  struct hollow **ret, struct tk_error *err)
{
	if (n < 1 || n > HOLLOW_MAX_NODES)
		return tk_errorf(err, -EINVAL, "--hollow: from 1 to %d nodes", HOLLOW_MAX_NODES);
	if (!cfg->fake_gpus)
		return tk_errorf(
			err, -EINVAL,
			"--hollow: give the nodes' devices with --fake-gpus (e.g. 8xH100)");
	const char *prefix = cfg->name ? cfg->name : "hollow";
	if (!model_name_valid(prefix) || strlen(prefix) + 7 >= MODEL_NAME_MAX)
		return tk_errorf(err, -EINVAL,
				 "--name \"%s\": the hollow nodes' prefix must be a name of at "
				 "most %d characters",
				 prefix, MODEL_NAME_MAX - 8);
	struct catalogue cat;
	catalogue_init(&cat);
	struct hollow *h = xcalloc(1, sizeof(*h));
	h->loop = loop;
	h->n = n;
	h->run_ms = run_ms;
	h->heartbeat_ms = cfg->heartbeat_ms > 0 ? cfg->heartbeat_ms : 5000;
	h->nodes = xcalloc((size_t)n, sizeof(*h->nodes));
	int r = 0;
	for (int i = 0; i < n && r == 0; i++) {
		struct hnode *x = &h->nodes[i];
		x->h = h;
		snprintf(x->inv.name, sizeof(x->inv.name), "%s-%05d", prefix, i);
		x->inv.cpus = cfg->cpus > 0 ? cfg->cpus : 64;
		x->inv.mem_mib = cfg->mem_mib > 0 ? cfg->mem_mib : 512 * 1024;
		if (cfg->topology)
			snprintf(x->inv.topology, sizeof(x->inv.topology), "%s", cfg->topology);
		r = model_fake_accels(cfg->fake_gpus, &cat, x->inv.name, x->inv.accel,
				      MODEL_MAX_ACCELS, &x->inv.naccel, err);
		if (r == 0)
			r = tk_random_hex(x->agent_id, 16);
	}
	catalogue_release(&cat);
	if (r < 0) {
		if (!err->text[0])
			tk_errorf(err, r, "no randomness for the nodes' agent ids");
		free(h->nodes);
		free(h);
		return r;
	}
	more_descriptors(n);
	/* a server on this machine takes at most SERVER_MAX_CONNS_PER_IP
	 * connections from one address: each client's nodes call from one of
	 * their own in 127/8 (a client's connections are shared by its nodes,
	 * which only works from one address) */
	if (strncmp(cfg->server_url, "https://127.", 12) == 0 ||
	    strncmp(cfg->server_url, "http://127.", 11) == 0 ||
	    strstr(cfg->server_url, "://localhost"))
		for (int i = 0; i < n; i++) {
			int k = i / HOLLOW_NODES_PER_CLIENT;
			snprintf(h->nodes[i].from, sizeof(h->nodes[i].from), "127.%d.%d.%d",
				 1 + k / 62500, 1 + (k / 250) % 250, 2 + k % 250);
		}
	/* (hollow nodes talk to the first server only) */
	h->url = xstrndup(cfg->server_url, strcspn(cfg->server_url, ","));
	h->token = xstrdup(cfg->token);
	h->url_register = xasprintf("%s/v1/agent/register", h->url);
	h->url_heartbeat = xasprintf("%s/v1/agent/heartbeat", h->url);
	h->url_events = xasprintf("%s/v1/agent/events", h->url);
	h->url_work = xasprintf("%s/v1/agent/work", h->url);
	h->nhc = (n + HOLLOW_NODES_PER_CLIENT - 1) / HOLLOW_NODES_PER_CLIENT;
	h->hcs = xcalloc((size_t)h->nhc, sizeof(*h->hcs));
	for (int k = 0; k < h->nhc; k++) {
		h->hcs[k] = agent__hc_create(loop);
		agent__hc_set_max_connections(h->hcs[k],
					      HOLLOW_NODES_PER_CLIENT + HOLLOW_SPARE_CONNS);
		if (cfg->ca_file)
			agent__hc_set_ca(h->hcs[k], cfg->ca_file);
	}
	for (int i = 0; i < n; i++) {
		struct hnode *x = &h->nodes[i];
		x->hc = h->hcs[i / HOLLOW_NODES_PER_CLIENT];
		uv_timer_init(loop, &x->hb_timer);
		uv_timer_init(loop, &x->retry_timer);
		x->hb_timer.data = x->retry_timer.data = x;
		h->open_handles += 2;
		do_register(x);
	}
	log_info("hollow: %d nodes %s-00000 .. %s-%05d of %s joining %s", n, prefix, prefix, n - 1,
		 cfg->fake_gpus, h->url);
	*ret = h;
	return 0;
}

static void node_timer_closed(uv_handle_t *t)
{
	struct hollow *h = ((struct hnode *)t->data)->h;
	if (--h->open_handles == 0 && h->done_cb)
		h->done_cb(h->done_arg);
}

static void hc_gone(void *arg)
{
	struct hollow *h = arg;
	if (--h->open_handles == 0 && h->done_cb)
		h->done_cb(h->done_arg);
}

void hollow_stop(struct hollow *h, void (*done_cb)(void *arg), void *arg)
{
	h->stopping = true;
	h->done_cb = done_cb;
	h->done_arg = arg;
	h->open_handles += h->nhc; /* the clients' */
	for (int i = 0; i < h->n; i++) {
		struct hnode *x = &h->nodes[i];
		uv_close((uv_handle_t *)&x->hb_timer, node_timer_closed);
		uv_close((uv_handle_t *)&x->retry_timer, node_timer_closed);
		while (x->runs) {
			struct hrun *r = x->runs;
			x->runs = r->next;
			run_free(r);
		}
	}
	/* the requests go with the clients; their callbacks do not run */
	for (int k = 0; k < h->nhc; k++)
		agent__hc_destroy(h->hcs[k], hc_gone, h);
}

void hollow_destroy(struct hollow *h)
{
	if (!h)
		return;
	for (int i = 0; i < h->n; i++)
		free(h->nodes[i].events);
	free(h->nodes);
	free(h->hcs);
	free(h->url);
	free(h->token);
	free(h->url_register);
	free(h->url_heartbeat);
	free(h->url_events);
	free(h->url_work);
	free(h);
}
