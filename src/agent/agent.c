/*
 * The agent's conversation with the server. Four exchanges, all opened by
 * the agent:
 *
 *   register   on start and whenever the server says it does not know us;
 *   work       a long-poll that returns the full set of tasks this node
 *              should run (new ones with their spec) whenever it changes;
 *   heartbeat  every few seconds, so the server can tell a dead node;
 *   events     task starts and exits, batched, retried until acknowledged.
 *
 * Work is level-triggered: the answer is the whole desired set, so a lost or
 * repeated answer does no harm. A task group is started only the first time
 * its (job, attempt) appears, and stopped when it disappears.
 *
 * Every answer of the server renews the lease of the shims (wire.h): it
 * proves the server heard this agent when the request was sent.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <sys/file.h>
#include <unistd.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static void do_register(struct agent *a);
static void hb_timer_cb(uv_timer_t *t);
static void do_poll(struct agent *a);
static void do_events(struct agent *a);
static void maybe_stop_done(struct agent *a);
static void poll_timer_cb(uv_timer_t *t);

void agent_config_init(struct agent_config *c)
{
	memset(c, 0, sizeof(*c));
	c->data_dir = "tenk-data";
	c->heartbeat_ms = 5000;
	c->min_free_mib = 1024;
	c->job_disk_limit_pct = 50;
	c->health_check_interval_ms = 60000;
}

static int backoff_next(int *b)
{
	int cur = *b ? *b : AGENT_BACKOFF_MIN_MS;
	*b = MIN(cur * 2, AGENT_BACKOFF_MAX_MS);
	return cur;
}

/* Parses an answer body; NULL (and a log line) when it is not a JSON object. */
static json_t *parse_body(const char *what, const char *body, size_t len)
{
	json_error_t jerr;
	json_t *j = json_loadb(body, len, 0, &jerr);
	if (!j || !json_is_object(j)) {
		log_warn("%s: the server's answer is not a JSON object: %s", what,
			 j ? "wrong type" : jerr.text);
		json_decref(j);
		return NULL;
	}
	return j;
}

/* Talks to servers[i] from now on. */
static void use_server(struct agent *a, int i)
{
	const char *base = a->servers[i];
	a->server = i;
	char **urls[] = {&a->url_register, &a->url_heartbeat, &a->url_events, &a->url_work,
			 &a->url_logs};
	static const char *const paths[] = {"register", "heartbeat", "events", "work", "logs"};
	for (size_t k = 0; k < ARRAY_SIZE(urls); k++) {
		free(*urls[k]);
		*urls[k] = xasprintf("%s/v1/agent/%s", base, paths[k]);
	}
}

/* A request to the server failed: with several servers, the active one a
 * standby names (307 or 503 with "active"), else the next in the list.
 * Returns how long to wait before asking again (a standby takes over
 * within seconds: not the doubling backoff, which would wait seconds past
 * it), or -1: the usual backoff. */
static int server_failed(struct agent *a, long status, const char *body, size_t len)
{
	if (a->nservers < 2 || (status != 0 && status != 307 && status != 502 && status != 503))
		return -1;
	int next = (a->server + 1) % a->nservers;
	json_t *j = status ? json_loadb(body, len, 0, NULL) : NULL;
	const char *active = j ? json_string_value(json_object_get(j, "active")) : NULL;
	const char *role = j ? json_string_value(json_object_get(j, "role")) : NULL;
	bool standby = role && strcmp(role, "standby") == 0;
	for (int i = 0; active && i < a->nservers; i++)
		if (strcmp(a->servers[i], active) == 0)
			next = i;
	json_decref(j);
	if (next != a->server) {
		log_info("talking to %s now (%s)", a->servers[next],
			 active ? "the active server, which a standby named" : "the next server");
		use_server(a, next);
		if (a->poll_req) {
			/* a long-poll to a server that died without a word (its
			 * host gone) would wait out its whole time */
			agent__hc_cancel(a->poll_req);
			a->poll_req = NULL;
			uv_timer_start(&a->poll_timer, poll_timer_cb, AGENT_BACKOFF_MIN_MS, 0);
		}
	}
	/* (spread over a little time: every node of the cluster asks at once) */
	return standby	     ? AGENT_STANDBY_RETRY_MS + (int)(tk_mono_us() % AGENT_STANDBY_RETRY_MS)
	       : status == 0 ? AGENT_BACKOFF_MIN_MS
			     : -1;
}

/* The "error" of a server's answer into buf ("" when it has none), and
 * (when why) its "refusal". */
static void answer_error_why(const char *body, size_t len, char *buf, size_t n,
			     enum wire_refusal *why)
{
	json_t *j = body ? json_loadb(body, len, 0, NULL) : NULL;
	const char *msg = json_string_value(json_object_get(j, "error"));
	snprintf(buf, n, "%s", msg ? msg : "");
	if (why)
		*why = wire_refusal_parse(json_string_value(json_object_get(j, "refusal")));
	json_decref(j);
}

static void answer_error(const char *body, size_t len, char *buf, size_t n)
{
	answer_error_why(body, len, buf, n, NULL);
}

static void log_http_error(const char *what, long status, const char *body, size_t len,
			   const char *error)
{
	if (status == 0) {
		log_warn("%s: cannot reach the server: %s", what, error);
		return;
	}
	char msg[512];
	answer_error(body, len, msg, sizeof(msg));
	log_warn("%s: server answered %ld: %s", what, status, *msg ? msg : "(no message)");
}

/* The server answered a request sent at sent_ms (monotonic): it heard this
 * agent no earlier, so the shims may hold their tasks until one lease
 * after it. Renewed every eighth of a lease at most. */
static void touched(struct agent *a, int64_t sent_ms)
{
	if (sent_ms <= a->touch_ms)
		return;
	a->touch_ms = sent_ms;
	int64_t until = 0;
	if (a->lease.lease_ms && a->touch_ms - a->renewed_ms >= a->lease.lease_ms / 8) {
		a->renewed_ms = a->touch_ms;
		until = a->touch_ms + a->lease.lease_ms;
		size_t pos = 0;
		void *v;
		while (tk_map_next(&a->groups, &pos, NULL, &v))
			group_renew(v, until);
	}
	agent__witness_answered(a, sent_ms, until);
}

/* The server no longer knows this agent (it lost its state or another process
 * took the name): start over with registration. */
static void need_register(struct agent *a)
{
	a->registered = false;
	if (a->poll_req) {
		agent__hc_cancel(a->poll_req);
		a->poll_req = NULL;
	}
	uv_timer_stop(&a->poll_timer);
	if (!a->registering && !a->stopping)
		do_register(a);
}

/* ---- register ------------------------------------------------------------------ */

static void reg_timer_cb(uv_timer_t *t)
{
	do_register(t->data);
}

#define CREDENTIAL_FILE "node.credential"

/* The node's own credential, kept in WORK/node.credential (0600): what
 * every call after the first registration carries. */
static int keep_credential(struct agent *a, const char *cred)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", a->cfg.work_dir, CREDENTIAL_FILE);
	char line[WIRE_CREDENTIAL_MAX + 1];
	int n = snprintf(line, sizeof(line), "%s\n", cred);
	int r = tk_replace_file(path, line, (size_t)n, 0600);
	if (r < 0) {
		log_err("cannot keep this node's credential in %s: %s", path, strerror(-r));
		return r;
	}
	snprintf(a->cred, sizeof(a->cred), "%s", cred);
	log_info("this node has its own credential now (%s)", path);
	return 0;
}

/* The credential an earlier agent of this node kept, if any. */
static void load_credential(struct agent *a)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", a->cfg.work_dir, CREDENTIAL_FILE);
	char *text = NULL;
	if (tk_read_file(path, 4096, &text, NULL) < 0)
		return;
	tk_strip(text);
	if (strlen(text) == WIRE_CREDENTIAL_MAX - 1)
		snprintf(a->cred, sizeof(a->cred), "%s", text);
	else
		log_warn("%s is not a credential; joining with the join token", path);
	free(text);
}

/* A 0.1.0 server's refusal of the "protocol" key: its words, frozen with
 * that release (the only server that answers so). */
static bool refused_protocol_key(const char *body, size_t len)
{
	char e[64];
	answer_error(body, len, e, sizeof(e));
	return strcmp(e, "protocol: unknown field") == 0;
}

static void reg_done(void *arg, long status, const char *body, size_t len, const char *error)
{
	struct agent *a = arg;
	a->reg_req = NULL;
	a->registering = false;
	if (status == 400 && !a->speak_v1 && refused_protocol_key(body, len)) {
		log_warn("register: the server is of protocol 1 (0.1.0); registering as "
			 "protocol 1 (upgrade the servers first: standbys, then the active)");
		a->speak_v1 = true;
		if (!a->stopping)
			uv_timer_start(&a->reg_timer, reg_timer_cb, 0, 0);
		return;
	}
	a->speak_v1 = false; /* try its own protocol again next time */
	if (status == 403) {
		/* no retry soon changes that: an operator must act, or, where
		 * nothing on the server's side lifts it, this agent's owner */
		char e[512];
		enum wire_refusal why;
		answer_error_why(body, len, e, sizeof(e), &why);
		bool final = why == WIRE_REFUSAL_FINAL;
		char then[128];
		if (final)
			snprintf(then, sizeof(then),
				 "not asking again: fix this agent's --name or "
				 "credential file and start it again");
		else
			snprintf(then, sizeof(then), "asking again every %ds",
				 AGENT_REFUSED_RETRY_MS / 1000);
		if (final || !a->refused)
			log_err("register: the server refuses this node%s: %s; %s (a second agent "
				"on this machine needs --name and --work-dir of its own)",
				final ? " for good" : "", *e ? e : "403", then);
		a->refused = true;
		if (!final && !a->stopping)
			uv_timer_start(&a->reg_timer, reg_timer_cb, AGENT_REFUSED_RETRY_MS, 0);
		return;
	}
	if (status != 200) {
		log_http_error("register", status, body, len, error);
		int soon = server_failed(a, status, body, len);
		if (status == 401 && a->cred[0]) {
			/* the server does not know this credential (revoked, or a store
			 * restored from before it): join again, which an admin may
			 * have to admit */
			log_warn("the server refused this node's credential; joining with the "
				 "join token");
			a->cred[0] = '\0';
		}
		if (soon >= 0)
			a->reg_backoff = 0;
		if (!a->stopping)
			uv_timer_start(&a->reg_timer, reg_timer_cb,
				       (uint64_t)(soon >= 0 ? soon : backoff_next(&a->reg_backoff)),
				       0);
		return;
	}
	json_t *j = parse_body("register", body, len);
	struct wire_registered ans;
	struct tk_error err;
	if (!j || wire_registered_unpack(j, &ans, &err) < 0) {
		if (j)
			log_warn("register: the server's answer is malformed: %s", err.text);
		json_decref(j);
		if (!a->stopping)
			uv_timer_start(&a->reg_timer, reg_timer_cb,
				       (uint64_t)backoff_next(&a->reg_backoff), 0);
		return;
	}
	json_decref(j);
	if (ans.protocol > WIRE_PROTOCOL + 1) {
		/* a server of its own version or the next (wire.h) */
		log_err("register: the server speaks protocol %d, this agent %d: upgrade the "
			"agent",
			ans.protocol, WIRE_PROTOCOL);
		if (!a->stopping)
			uv_timer_start(&a->reg_timer, reg_timer_cb, AGENT_BACKOFF_MAX_MS * 6, 0);
		return;
	}
	if (ans.credential[0] && keep_credential(a, ans.credential) < 0) {
		if (!a->stopping)
			uv_timer_start(&a->reg_timer, reg_timer_cb,
				       (uint64_t)backoff_next(&a->reg_backoff), 0);
		return;
	}
	if (ans.addr[0])
		snprintf(a->inv.addr, sizeof(a->inv.addr), "%s", ans.addr);
	a->server_protocol = ans.protocol;
	if (!a->speak_v1) /* the stack went with the registration */
		a->stack_sent_gen = MAX(a->stack_sent_gen, a->reg_stack_gen);
	/* the cluster's thresholds for its accelerators (a server that says
	 * none: the defaults) */
	if (!ans.has_gpu_health)
		sched_config_gpu_default(&ans.gpu_health);
	agent__health_limits(a, &ans.gpu_health);
	/* and how long an idle one keeps its power limit (none said: 10 min) */
	a->idle_power_after_ms = ans.idle_power_after_ms >= 0 ? ans.idle_power_after_ms : 600000;
	/* beat four times a lease at least, so that lost beats are no death,
	 * and as often as the server asks (its power fencing finds a dead
	 * node in three beats and their delays) */
	int64_t want = a->cfg.heartbeat_ms;
	if (ans.heartbeat_ms > 0 && ans.heartbeat_ms < want)
		want = ans.heartbeat_ms;
	int64_t was = a->lease.heartbeat_ms;
	wire_lease_of(ans.node_timeout_ms, want, &a->lease);
	if (a->lease.heartbeat_ms != was)
		log_info("beating every %lldms (node timeout %lldms%s)",
			 (long long)a->lease.heartbeat_ms, (long long)ans.node_timeout_ms,
			 ans.heartbeat_ms > 0 ? ", as the server asks" : "");
	agent__witness_params(a, ans.node_timeout_ms);
	uint64_t beat = (uint64_t)a->lease.heartbeat_ms;
	uv_timer_start(&a->hb_timer, hb_timer_cb, beat, beat);
	a->renewed_ms = 0; /* the lease may have changed: renew now */
	touched(a, a->reg_sent_ms);
	a->reg_backoff = 0;
	if (a->refused)
		log_info("register: the server takes this node now");
	a->refused = false;
	a->registered = true;
	a->gen = 0;
	a->epoch[0] = '\0';
	/* a server that restarted knows nothing of the node's images */
	a->images_sent_gen = 0;
	if (!a->images_gen)
		agent__images_refresh(a);
	log_info("registered with %s as node %s (%s), %d accelerators", a->servers[a->server],
		 a->inv.name, a->inv.addr[0] ? a->inv.addr : "address as seen by the server",
		 a->inv.naccel);
	if (a->stopping)
		return;
	do_poll(a);
	do_events(a);
}

static void do_register(struct agent *a)
{
	if (a->registering || a->stopping)
		return;
	a->registering = true;
	struct wire_register *m = xcalloc(1, sizeof(*m));
	snprintf(m->agent_id, sizeof(m->agent_id), "%s", a->agent_id);
	m->protocol = a->speak_v1 ? 1 : WIRE_PROTOCOL;
	m->inv = a->inv;
	m->inv.has_stack = a->inv.has_stack && !a->speak_v1; /* protocol 1 refuses it */
	a->reg_stack_gen = a->stack_gen;
	/* every attempt it has a shim of: the server keeps them here */
	m->kept = xcalloc(a->groups.len + 1, sizeof(*m->kept));
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		const struct taskgroup *g = v;
		m->kept[m->nkept++] = (struct wire_attempt_ref){g->job, g->attempt};
	}
	json_t *body = wire_register_pack(m);
	wire_register_release(m);
	free(m);
	a->reg_sent_ms = tk_mono_ms();
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	a->reg_req =
		agent__hc_request(a->hc, "POST", a->url_register,
				  a->cred[0] ? a->cred : a->cfg.token, text, 10000, reg_done, a);
	free(text);
}

/* ---- work ---------------------------------------------------------------------- */

static void apply_work(struct agent *a, const struct wire_work *w)
{
	/* every group is unlisted unless the answer names it */
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v))
		((struct taskgroup *)v)->mark = false;
	bool missing_spec = false;
	for (int i = 0; i < w->nitems; i++) {
		const struct work_item *it = &w->items[i];
		char key[48];
		snprintf(key, sizeof(key), "%lld.%d", (long long)it->job, it->attempt);
		struct taskgroup *g = tk_map_get(&a->groups, key);
		if (!g) {
			if (!it->spec) {
				missing_spec = true;
				continue;
			}
			if (a->stopping)
				continue;
			g = agent__group_start(a, it, it->spec);
		}
		g->mark = true;
		group_set_limit(g, it->limit_s);
		group_signal_now(g, it->signal_now);
		if (it->digest[0])
			group_image_go(g, it->digest);
		agent__ckpt_item(g, it);
		agent__probe_item(g, it);
	}
	/* stop what is no longer wanted; forget what is finished and reported */
	pos = 0;
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		struct taskgroup *g = v;
		if (!g->mark)
			group_stop(g, EXIT_CANCELLED, "stopped");
	}
	pos = 0;
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		struct taskgroup *g = v;
		/* may free g: the map tolerates deletion while iterating */
		group_set_listed(g, g->mark);
	}
	agent__images_apply_pulls(a, w);
	snprintf(a->epoch, sizeof(a->epoch), "%s", w->epoch);
	a->gen = missing_spec ? 0 : w->gen;
	do_events(a);
}

static void poll_timer_cb(uv_timer_t *t)
{
	do_poll(t->data);
}

static void poll_done(void *arg, long status, const char *body, size_t len, const char *error)
{
	struct agent *a = arg;
	a->poll_req = NULL;
	if (a->stopping)
		return;
	if (status == 409 || status == 401) {
		log_http_error("work", status, body, len, error);
		need_register(a);
		return;
	}
	if (status != 200) {
		log_http_error("work", status, body, len, error);
		int soon = server_failed(a, status, body, len);
		if (soon >= 0)
			a->poll_backoff = 0;
		uv_timer_start(&a->poll_timer, poll_timer_cb,
			       (uint64_t)(soon >= 0 ? soon : backoff_next(&a->poll_backoff)), 0);
		return;
	}
	a->poll_backoff = 0;
	touched(a, a->poll_sent_ms);
	json_t *j = parse_body("work", body, len);
	struct wire_work w;
	struct tk_error err;
	if (j && wire_work_unpack(j, &w, &err) < 0) {
		/* nothing of it is started: ask again from scratch */
		log_warn("work: malformed answer, ignored: %s", err.text);
		a->gen = 0;
	} else if (j) {
		if (!w.unchanged)
			apply_work(a, &w);
		if (w.has_services && !a->stopping)
			agent__forward_table(a, w.services, w.nservices);
		if (w.nlogs)
			agent_serve_logs(a, w.logs, w.nlogs);
		if (w.nptys)
			agent_serve_ptys(a, w.ptys, w.nptys);
		wire_work_release(&w);
	}
	json_decref(j);
	do_poll(a);
}

static void do_poll(struct agent *a)
{
	if (a->poll_req || !a->registered || a->stopping)
		return;
	char url[1024];
	/* its protocol: what the work answer may hold (a 0.1.0 server reads
	 * only the arguments it knows) */
	snprintf(url, sizeof(url),
		 "%s?node=%s&agent_id=%s&epoch=%s&gen=%llu&wait_ms=%d&protocol=%d", a->url_work,
		 a->inv.name, a->agent_id, a->epoch[0] ? a->epoch : "none",
		 (unsigned long long)a->gen, AGENT_POLL_WAIT_MS, a->speak_v1 ? 1 : WIRE_PROTOCOL);
	a->poll_sent_ms = tk_mono_ms();
	a->poll_req = agent__hc_request(a->hc, "GET", url, a->cred, NULL,
					AGENT_POLL_WAIT_MS + 15000, poll_done, a);
}

/* ---- heartbeat ----------------------------------------------------------------- */

static void hb_done(void *arg, long status, const char *body, size_t len, const char *error)
{
	struct agent *a = arg;
	a->hb_req = NULL;
	if (status == 200) {
		a->hb_failing = 0;
		touched(a, a->hb_sent_ms);
		agent__health_told(a);
		agent__train_delivered(a);
		struct wire_group g;
		struct tk_error err;
		int r = wire_beat_answer_take(body, len, a->acked_epoch, &a->acked_at_ms, &g, &err);
		if (r > 0)
			agent__witness_group(a, &g);
		else if (r < 0)
			log_warn("heartbeat: the server's witness group is malformed, ignored: %s",
				 err.text);
		a->images_sent_gen = MAX(a->images_sent_gen, a->hb_images_gen);
		a->stack_sent_gen = MAX(a->stack_sent_gen, a->hb_stack_gen);
		if (!a->hb_rtt)
			a->hb_rtt = xcalloc(AGENT_HB_SAMPLES, sizeof(*a->hb_rtt));
		a->hb_rtt[a->hb_n++ % AGENT_HB_SAMPLES] = (float)(tk_mono_ms() - a->hb_sent_ms);
	}
	if ((status == 409 || status == 401) && !a->stopping) {
		log_http_error("heartbeat", status, body, len, error);
		need_register(a);
	} else if (status != 200 && !a->stopping) {
		server_failed(a, status, body, len);
		/* said at once, then once a minute while it lasts: an outage of
		 * the server is long, and the witness group says what matters */
		int64_t now = tk_mono_ms();
		if (!a->hb_failing || now - a->hb_fail_said_ms >= 60000) {
			if (a->hb_failing)
				log_warn("heartbeat: %llu failed since the last answer",
					 (unsigned long long)a->hb_failing);
			log_http_error("heartbeat", status, body, len, error);
			a->hb_fail_said_ms = now;
		}
		a->hb_failing++;
	}
	maybe_stop_done(a); /* the last beat may be what a stop waits for */
	if (a->hb_again) {
		a->hb_again = false;
		agent_beat_now(a);
	}
}

/* One beat; with it, when each running job last wrote a checkpoint (what
 * preemption weighs as work that would be lost), and whether this is the
 * last (the agent stops). */
static void send_heartbeat(struct agent *a, bool stopping)
{
	struct wire_heartbeat m = {.stopping = stopping, .acked_at_ms = a->acked_at_ms};
	snprintf(m.acked_epoch, sizeof(m.acked_epoch), "%s", a->acked_epoch);
	snprintf(m.node, sizeof(m.node), "%s", a->inv.name);
	snprintf(m.agent_id, sizeof(m.agent_id), "%s", a->agent_id);
	m.checkpoints = xcalloc(a->groups.len + 1, sizeof(*m.checkpoints));
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		const struct taskgroup *g = v;
		int64_t at = group_running(g) ? agent__group_newest_checkpoint(g) : 0;
		if (at > 0 && m.ncheckpoints < WIRE_MAX_CHECKPOINTS)
			m.checkpoints[m.ncheckpoints++] =
				(struct wire_checkpoint){g->job, g->attempt, at};
	}
	agent__images_for_heartbeat(a, &m, &a->hb_images_gen);
	agent__stack_read(a, false);
	a->hb_stack_gen = a->stack_gen;
	if (a->stack_gen != a->stack_sent_gen && a->server_protocol >= 2) {
		m.has_stack = true;
		m.stack = a->inv.stack;
	}
	agent__witness_for_heartbeat(a, &m);
	m.nfaults = agent__health_faults(a, m.faults, WIRE_MAX_FAULTS);
	if (a->server_protocol >= 2) { /* a protocol-1 server refuses the keys */
		m.ngpus = agent__health_for_heartbeat(a, m.gpus, MODEL_MAX_ACCELS);
		m.beat_ms = a->lease.heartbeat_ms;
	}
	m.ntrain = agent__train_for_heartbeat(a, &m.train);
	if (a->server_protocol >= 2)
		m.nnccl = agent__nccl_for_heartbeat(a, &m.nccl);
	if (a->fwd) { /* (only a server that sent services' table knows the key) */
		m.has_serve = true;
		m.nserve = agent__forward_load(a, &m.serve);
	}
	for (int i = 0; i < m.nfaults; i++)
		if (!a->fault_said || strcmp(a->fault_last, m.faults[i]) != 0) {
			log_warn("fault on this node, told to the server: %s", m.faults[i]);
			snprintf(a->fault_last, sizeof(a->fault_last), "%s", m.faults[i]);
			a->fault_said = true;
		}
	json_t *body = wire_heartbeat_pack(&m);
	m.images = NULL; /* the agent's */
	m.pulls = NULL;
	wire_heartbeat_release(&m);
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	/* one that hangs must not hold back the next for long */
	long timeout = (long)MAX(a->lease.lease_ms / 2, 1000);
	a->hb_sent_ms = tk_mono_ms();
	a->hb_req = agent__hc_request(a->hc, "POST", a->url_heartbeat, a->cred, text, timeout,
				      hb_done, a);
	free(text);
}

static void hb_timer_cb(uv_timer_t *t)
{
	struct agent *a = t->data;
	if (!a->registered || a->hb_req || a->stopping)
		return;
	send_heartbeat(a, false);
}

void agent_beat_now(struct agent *a)
{
	if (!a->registered || a->stopping)
		return;
	if (a->hb_req) {
		a->hb_again = true;
		return;
	}
	send_heartbeat(a, false);
}

/* ---- events -------------------------------------------------------------------- */

void agent_queue_event(struct agent *a, const struct task_event *ev)
{
	xgrow(&a->events, &a->events_alloc, a->nevents + 1, sizeof(*a->events));
	a->events[a->nevents++] = (struct agent_event){*ev, EV_QUEUED};
	do_events(a);
	maybe_stop_done(a);
}

static void ev_timer_cb(uv_timer_t *t)
{
	struct agent *a = t->data;
	uv_timer_stop(t);
	do_events(a);
}

/* Acknowledges events[lo, hi): their groups may now be forgotten. */
static void events_acked(struct agent *a, uint64_t lo, uint64_t hi)
{
	for (uint64_t q = lo; q < hi; q++) {
		struct agent_event *e = &a->events[q - a->events_base];
		e->state = EV_ACKED;
		char key[48];
		snprintf(key, sizeof(key), "%lld.%d", (long long)e->ev.job, e->ev.attempt);
		struct taskgroup *g = tk_map_get(&a->groups, key);
		if (g)
			group_acked(g, 1);
	}
	size_t k = 0;
	while (k < a->nevents && a->events[k].state == EV_ACKED)
		k++;
	memmove(a->events, a->events + k, (a->nevents - k) * sizeof(*a->events));
	a->nevents -= k;
	a->events_base += k;
}

static void events_done(void *arg, long status, const char *body, size_t len, const char *error)
{
	struct ev_batch *b = arg;
	struct agent *a = b->a;
	uint64_t lo = b->lo, hi = b->hi;
	b->req = NULL;
	a->nbatches--;
	if (status == 200) {
		a->ev_backoff = 0;
		touched(a, b->sent_ms);
		events_acked(a, lo, hi);
		do_events(a);
		maybe_stop_done(a);
		return;
	}
	log_http_error("events", status, body, len, error);
	if (status >= 400 && status < 500 && status != 408 && status != 409 && status != 429) {
		/* the server refuses them for good: keeping them would block the rest */
		log_err("events: dropping %llu events the server refused",
			(unsigned long long)(hi - lo));
		events_acked(a, lo, hi);
	} else {
		for (uint64_t q = lo; q < hi; q++)
			a->events[q - a->events_base].state = EV_QUEUED;
	}
	if (status == 409 || status == 401) {
		need_register(a);
		return;
	}
	uv_timer_start(&a->ev_timer, ev_timer_cb, (uint64_t)backoff_next(&a->ev_backoff), 0);
}

/* Sends queued events, several reports in flight at once: an exit need not
 * wait for the acknowledgement of the start before it. */
static void do_events(struct agent *a)
{
	/* (once a stop has finished, the HTTP client is on its way out) */
	while (a->registered && !a->stop_reported && a->nbatches < AGENT_EVENT_PIPELINE &&
	       !uv_is_active((uv_handle_t *)&a->ev_timer)) {
		size_t first = 0;
		while (first < a->nevents && a->events[first].state != EV_QUEUED)
			first++;
		if (first == a->nevents)
			return;
		size_t end = first;
		while (end < a->nevents && end - first < AGENT_MAX_EVENTS_SENT &&
		       a->events[end].state == EV_QUEUED)
			end++;
		struct wire_events m = {.nevents = (int)(end - first)};
		snprintf(m.node, sizeof(m.node), "%s", a->inv.name);
		snprintf(m.agent_id, sizeof(m.agent_id), "%s", a->agent_id);
		m.events = xcalloc(end - first, sizeof(*m.events));
		for (size_t i = first; i < end; i++) {
			a->events[i].state = EV_SENT;
			m.events[i - first] = a->events[i].ev;
			if (a->speak_v1) { /* a 0.1.0 server knows no such keys */
				m.events[i - first].out_from = 0;
				m.events[i - first].write_ms = 0;
				m.events[i - first].err_from = 0;
				m.events[i - first].node_fault = false;
				m.events[i - first].fault_reported = false;
			}
		}
		json_t *body = wire_events_pack(&m);
		wire_events_release(&m);
		char *text = json_dumps(body, JSON_COMPACT);
		json_decref(body);
		struct ev_batch *b = a->batches;
		while (b->req)
			b++;
		a->nbatches++;
		b->a = a;
		b->lo = a->events_base + first;
		b->hi = a->events_base + end;
		b->sent_ms = tk_mono_ms();
		b->req = agent__hc_request(a->hc, "POST", a->url_events, a->cred, text, 10000,
					   events_done, b);
		free(text);
	}
}

/* ---- life ---------------------------------------------------------------------- */

static void copy_cfg(struct agent_config *dst, const struct agent_config *src)
{
	*dst = *src;
#define DUP(f) dst->f = src->f ? xstrdup(src->f) : NULL
	DUP(server_url);
	DUP(token);
	DUP(name);
	DUP(fake_gpus);
	DUP(fake_stack);
	DUP(addr);
	DUP(topology);
	DUP(labels);
	DUP(domain);
	DUP(data_dir);
	DUP(work_dir);
	DUP(run_dir);
	DUP(podman);
	DUP(containers_conf);
	DUP(podman_root);
	DUP(cdi_dir);
	DUP(ca_file);
	DUP(health_check);
	DUP(metrics_listen);
#undef DUP
}

static void free_cfg(struct agent_config *c)
{
	free((char *)c->server_url);
	free((char *)c->token);
	free((char *)c->name);
	free((char *)c->fake_gpus);
	free((char *)c->fake_stack);
	free((char *)c->addr);
	free((char *)c->topology);
	free((char *)c->labels);
	free((char *)c->domain);
	free((char *)c->data_dir);
	free((char *)c->work_dir);
	free((char *)c->run_dir);
	free((char *)c->podman);
	free((char *)c->containers_conf);
	free((char *)c->podman_root);
	free((char *)c->cdi_dir);
	free((char *)c->ca_file);
	free((char *)c->health_check);
	free((char *)c->metrics_listen);
}

/* The CA the server is verified with, copied into the work folder where a
 * job's own user can read it (the original may sit in a folder of root's
 * alone, as DATA/tls does under `tenk up`): tasks get its path as TENK_CA. */
static int task_ca(struct agent *a, struct tk_error *err)
{
	char *text = NULL;
	size_t len;
	int r = tk_read_file(a->cfg.ca_file, 1 << 20, &text, &len);
	if (r < 0)
		return tk_errorf(err, r, "--ca-file: cannot read %s: %s", a->cfg.ca_file,
				 strerror(-r));
	char *copy = xasprintf("%s/server-ca.pem", a->cfg.work_dir);
	r = tk_replace_file(copy, text, len, 0644);
	free(text);
	if (r < 0) {
		r = tk_errorf(err, r, "cannot write %s: %s", copy, strerror(-r));
		free(copy);
		return r;
	}
	free((char *)a->cfg.ca_file);
	a->cfg.ca_file = copy;
	return 0;
}

/* The podman image jobs run with: cfg.podman, found on PATH when it has
 * no '/'. Where there is none, an image job fails to launch saying so. */
static void find_podman(struct agent *a)
{
	const char *want = a->cfg.podman ? a->cfg.podman : "podman";
	snprintf(a->podman, sizeof(a->podman), "%s", want);
	if (strchr(want, '/'))
		return;
	_cleanup_free_ char *f = tk_which(want, "/usr/bin:/bin");
	if (f)
		snprintf(a->podman, sizeof(a->podman), "%s", f);
}

static void handle_closed(uv_handle_t *h)
{
	struct agent *a = h->data;
	a->open_handles--;
	maybe_stop_done(a);
}

/* Whether DIR/shims holds an attempt's folder. */
static bool shims_in(const char *dir)
{
	_cleanup_free_ char *base = xasprintf("%s/%s", dir, SHIM_DIR);
	DIR *d = opendir(base);
	bool any = false;
	for (struct dirent *e; d && !any && (e = readdir(d));)
		any = e->d_name[0] != '.';
	if (d)
		closedir(d);
	return any;
}

/* Where shims' folders go when --run-dir is not given: as root, a folder
 * of this agent's own in memory, RUN_BASE/HASH (HASH: of the work folder's
 * path, so that agents of one machine never share one and the next agent
 * in this work folder finds it again), whose path the link WORK/run keeps;
 * /run/tenk where /run is a tmpfs, else /dev/shm/tenk. NULL: none of them
 * (not root, no tmpfs, a folder there not our own): the work folder. */
static char *default_run_dir(const char *work_dir)
{
	static const char *const bases[] = {"/run/tenk", "/dev/shm/tenk"};
	if (geteuid() != 0)
		return NULL;
	char hash[65];
	tk_sha256_hex(work_dir, strlen(work_dir), hash);
	hash[16] = '\0';
	_cleanup_free_ char *link = xasprintf("%s/run", work_dir);
	char was[MODEL_MAX_PATH];
	ssize_t n = readlink(link, was, sizeof(was) - 1);
	was[n > 0 ? n : 0] = '\0';
	int r = -ENOENT;
	char *dir = NULL;
	/* the one the agent before this one used first: its shims are there */
	for (int pass = 0; pass < 2 && r < 0; pass++)
		for (size_t i = 0; i < ARRAY_SIZE(bases) && r < 0; i++) {
			free(dir);
			dir = xasprintf("%s/%s", bases[i], hash);
			if (pass == 0 && strcmp(dir, was) != 0)
				continue;
			r = tk_private_dir(bases[i], 0711, true);
			if (r == 0)
				r = tk_private_dir(dir, 0711, true);
			if (r < 0 && r != -ENOENT && r != -EXDEV)
				log_warn("not keeping the shims' folders in %s: %s", dir,
					 r == -EPERM ? "another user's, or writable by others"
						     : strerror(-r));
		}
	if (r < 0) {
		free(dir);
		return NULL;
	}
	if (strcmp(dir, was) != 0) {
		unlink(link);
		if (symlink(dir, link) < 0)
			log_warn("cannot link %s to %s: %s", link, dir, strerror(errno));
	}
	return dir;
}

int agent_create(uv_loop_t *loop, const struct agent_config *cfg, struct agent **ret,
		 struct tk_error *err)
{
	struct agent *a = xcalloc(1, sizeof(*a));
	a->loop = loop;
	a->lock_fd = -1;
	a->launcher_fd = -1;
	copy_cfg(&a->cfg, cfg);
	catalogue_init(&a->cat);
	tk_map_init(&a->groups);
	int r;
	if (!cfg->server_url || !cfg->token) {
		r = tk_errorf(err, -EINVAL, "the agent needs a server URL and a token");
		goto fail;
	}
	if ((r = agent__inventory_detect(&a->cfg, &a->cat, &a->inv, err)) < 0)
		goto fail;
	agent__isolation_detect(&a->inv);
	agent__fabric_detect(&a->inv);
	agent__health_init(a);
	agent__stack_read(a, true);
	if ((r = tk_random_hex(a->agent_id, 16)) < 0) {
		r = tk_errorf(err, r, "cannot read random bytes");
		goto fail;
	}
	const char *data = a->cfg.data_dir ? a->cfg.data_dir : "tenk-data";
	bool in_data = !a->cfg.work_dir;
	if (in_data)
		a->cfg.work_dir = xasprintf("%s/agent", data);
	if ((r = tk_mkdir_p(a->cfg.work_dir, 0700)) < 0) {
		r = tk_errorf(err, r, "cannot create the agent's folder %s: %s", a->cfg.work_dir,
			      strerror(-r));
		goto fail;
	}
	if (in_data) {
		/* the jobs' users reach their checkpoint folders and metrics
		 * files through DATA: passable (not readable) by all, unless it
		 * is a server's too, which stays its own */
		_cleanup_free_ char *db = xasprintf("%s/tenk.db", data);
		if (access(db, F_OK) == 0)
			log_warn("%s is a server's data folder too, which nobody else may pass "
				 "through: only root's jobs can use $TENK_CHECKPOINT_DIR and "
				 "$TENK_METRICS here; give the agent a --work-dir of its own",
				 data);
		else if (geteuid() == 0 && chmod(data, 0711) < 0)
			log_warn("cannot make %s passable for the jobs' users: %s", data,
				 strerror(errno));
	}
	char *abs = realpath(a->cfg.work_dir, NULL);
	if (!abs) {
		r = tk_errorf(err, -errno, "cannot resolve %s: %s", a->cfg.work_dir,
			      strerror(errno));
		goto fail;
	}
	free((char *)a->cfg.work_dir);
	a->cfg.work_dir = abs;
	/* two agents on one folder would take each other's shims */
	char *lock = xasprintf("%s/agent.lock", a->cfg.work_dir);
	a->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	r = a->lock_fd < 0 || flock(a->lock_fd, LOCK_EX | LOCK_NB) < 0 ? -errno : 0;
	free(lock);
	if (r < 0) {
		r = tk_errorf(err, r,
			      r == -EWOULDBLOCK ? "another tenk agent is using %s"
						: "cannot lock %s: %s",
			      a->cfg.work_dir, strerror(-r));
		goto fail;
	}
	find_podman(a);
	load_credential(a);
	/* podman's settings, whatever folder it runs in */
	if (a->cfg.containers_conf && (abs = realpath(a->cfg.containers_conf, NULL))) {
		free((char *)a->cfg.containers_conf);
		a->cfg.containers_conf = abs;
	}
	if (a->cfg.podman_root && tk_mkdir_p(a->cfg.podman_root, 0700) == 0 &&
	    (abs = realpath(a->cfg.podman_root, NULL))) {
		free((char *)a->cfg.podman_root);
		a->cfg.podman_root = abs;
	}
	/* the CPUs jobs may be held to: those this agent may run on */
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int c = 0; c < CPU_SETSIZE && a->ncpus < AGENT_MAX_CPUS; c++)
			if (CPU_ISSET(c, &set))
				a->cpu_id[a->ncpus++] = c;
	agent__cpu_numa_detect(a);
	if (!a->cfg.run_dir && shims_in(a->cfg.work_dir)) {
		/* an agent of an older version left its shims there: this one
		 * finds them, and the next start goes to memory */
		a->cfg.run_dir = xstrdup(a->cfg.work_dir);
	} else if (!a->cfg.run_dir && (a->cfg.run_dir = default_run_dir(a->cfg.work_dir))) {
		a->run_dir_own = true;
	} else if (!a->cfg.run_dir) {
		a->cfg.run_dir = xstrdup(a->cfg.work_dir);
	} else if ((r = tk_mkdir_p(a->cfg.run_dir, 0711)) < 0) {
		r = tk_errorf(err, r, "cannot create the run folder %s: %s", a->cfg.run_dir,
			      strerror(-r));
		goto fail;
	} else {
		/* the jobs' users reach their metrics files through it */
		chmod(a->cfg.run_dir, 0711);
		char *rabs = realpath(a->cfg.run_dir, NULL);
		if (rabs) {
			free((char *)a->cfg.run_dir);
			a->cfg.run_dir = rabs;
		}
	}
	/* the jobs an agent before this one left to their shims */
	int found = agent__shims_adopt(a);
	if (found > 0)
		log_info("found %d attempt(s) an earlier agent left running in %s", found,
			 a->cfg.run_dir);
	if (geteuid() != 0) {
		struct passwd *pw = getpwuid(geteuid());
		log_warn("not running as root: every job runs as %s (uid %u)",
			 pw ? pw->pw_name : "this user", (unsigned)geteuid());
	}
	if ((r = tk_url_list(a->cfg.server_url, &a->servers, &a->nservers)) < 0) {
		r = tk_errorf(err, r, "--server: expected URL[,URL...], got \"%s\"",
			      a->cfg.server_url);
		goto fail;
	}
	for (int i = 0; i < a->nservers; i++)
		if (tk_url_plain_remote(a->servers[i]) && !a->cfg.insecure_http) {
			r = tk_errorf(
				err, -EPERM,
				"refusing to send the join token over plain HTTP to %s, which "
				"is not this machine: serve HTTPS (the server's default), or "
				"give --insecure-http",
				a->servers[i]);
			goto fail;
		}
	use_server(a, 0);
	if ((r = agent__metrics_start(a, err)) < 0)
		goto fail;
	a->hc = agent__hc_create(loop);
	if (!a->cfg.ca_file && getenv("TENK_CA") && *getenv("TENK_CA"))
		a->cfg.ca_file = xstrdup(getenv("TENK_CA"));
	if (a->cfg.ca_file && (r = task_ca(a, err)) < 0)
		goto fail;
	if (a->cfg.ca_file)
		agent__hc_set_ca(a->hc, a->cfg.ca_file);
	if (a->nservers > 1) /* (one that does not answer: ask the next soon) */
		agent__hc_set_connect_timeout(a->hc, AGENT_FAILOVER_CONNECT_MS);
	if ((r = agent__witness_open(a, err)) < 0)
		goto fail;
	uv_timer_t *timers[] = {&a->hb_timer, &a->reg_timer,  &a->poll_timer,
				&a->ev_timer, &a->stop_timer, &a->ckpt_timer};
	for (size_t i = 0; i < ARRAY_SIZE(timers); i++) {
		uv_timer_init(loop, timers[i]);
		timers[i]->data = a;
		a->open_handles++;
	}
	uv_timer_start(&a->hb_timer, hb_timer_cb, (uint64_t)a->cfg.heartbeat_ms,
		       (uint64_t)a->cfg.heartbeat_ms);
	agent__ckpt_start(a);
	agent__probe_start(a);
	agent__health_start(a);
	agent__metrics_watch(a);
	do_register(a);
	*ret = a;
	return 0;
fail:
	agent_destroy(a);
	return r;
}

static void hc_closed(void *arg)
{
	struct agent *a = arg;
	a->hc = NULL;
	a->open_handles--;
	maybe_stop_done(a);
}

/* Ends the stop: every task has exited and is reported (or time ran out). */
static int cmp_float(const void *x, const void *y)
{
	float a = *(const float *)x, b = *(const float *)y;
	return a < b ? -1 : a > b;
}

/* How long the server took to answer heartbeats: what an overloaded
 * server costs its nodes. */
static void log_heartbeats(struct agent *a)
{
	size_t n = MIN(a->hb_n, (size_t)AGENT_HB_SAMPLES);
	if (!n)
		return;
	float *v = xmalloc(n * sizeof(*v));
	memcpy(v, a->hb_rtt, n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_float);
	log_info("heartbeats: %zu answered, round trip p50 %.0f ms, p99 %.0f ms, max %.0f ms",
		 a->hb_n, (double)v[n / 2], (double)v[MIN(n - 1, n * 99 / 100)], (double)v[n - 1]);
	free(v);
}

static void finish_stop(struct agent *a)
{
	if (a->stop_reported)
		return;
	a->stop_reported = true;
	log_heartbeats(a);
	if (a->nevents)
		log_warn("stopping with %zu task events the server has not acknowledged",
			 a->nevents);
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v))
		group_close(v);
	agent__probe_stop(a);
	agent__forward_stop(a);
	agent__idle_power_restore(a);
	agent__cmds_stop(a);
	agent__launcher_stop(a);
	agent__health_stop(a);
	agent__metrics_stop(a);
	agent__witness_close(a);
	uv_timer_t *timers[] = {&a->hb_timer, &a->reg_timer,  &a->poll_timer,
				&a->ev_timer, &a->stop_timer, &a->ckpt_timer};
	for (size_t i = 0; i < ARRAY_SIZE(timers); i++) {
		uv_timer_stop(timers[i]);
		uv_close((uv_handle_t *)timers[i], handle_closed);
	}
	a->reg_req = a->poll_req = a->hb_req = NULL;
	for (int i = 0; i < AGENT_EVENT_PIPELINE; i++)
		a->batches[i].req = NULL;
	a->nbatches = 0;
	a->open_handles++;
	agent__hc_destroy(a->hc, hc_closed, a);
}

void agent_handle_gone(struct agent *a)
{
	a->open_handles--;
	maybe_stop_done(a);
}

void agent_stop_check(struct agent *a)
{
	maybe_stop_done(a);
}

static void maybe_stop_done(struct agent *a)
{
	if (!a->stopping)
		return;
	if (!a->stop_reported) {
		/* a checkpoint upload under way ends first: its report is
		 * what the next attempt restores from */
		if ((!a->cfg.stop_jobs || agent_running_groups(a) == 0) &&
		    (a->nevents == 0 || !a->registered) && !a->hb_req && !a->ckpt_busy)
			finish_stop(a);
		return;
	}
	if (a->open_handles == 0 && a->stop_cb) {
		void (*cb)(void *) = a->stop_cb;
		a->stop_cb = NULL;
		cb(a->stop_arg);
	}
}

static void stop_timer_cb(uv_timer_t *t)
{
	struct agent *a = t->data;
	if (agent_running_groups(a) > 0) {
		/* the grace periods are over; nothing may outlive the agent */
		size_t pos = 0;
		void *v;
		while (tk_map_next(&a->groups, &pos, NULL, &v))
			agent__group_kill(v);
		uv_timer_start(&a->stop_timer, stop_timer_cb, 200, 0);
		return;
	}
	finish_stop(a);
}

void agent_stop(struct agent *a, void (*done_cb)(void *arg), void *arg)
{
	if (a->stopping)
		return;
	a->stopping = true;
	a->stop_cb = done_cb;
	a->stop_arg = arg;
	int running = agent_running_groups(a);
	if (!running)
		log_info("stopping");
	else if (a->cfg.stop_jobs)
		log_info("stopping: ending the tasks of this node first (--stop-jobs)");
	else
		log_info("stopping: %d attempt(s) go on in their shims, for %llds unless an agent "
			 "comes back",
			 running, (long long)(a->lease.lease_ms / 1000));
	if (a->poll_req) {
		agent__hc_cancel(a->poll_req);
		a->poll_req = NULL;
	}
	/* the server places nothing new here from now on */
	if (a->registered) {
		if (a->hb_req)
			agent__hc_cancel(a->hb_req);
		a->hb_req = NULL;
		send_heartbeat(a, true);
	}
	int64_t longest_grace = 0;
	size_t pos = 0;
	void *v;
	while (a->cfg.stop_jobs && tk_map_next(&a->groups, &pos, NULL, &v)) {
		longest_grace = MAX(longest_grace, agent__group_grace_ms(v));
		group_stop(v, EXIT_LOST, "its agent stopped with --stop-jobs");
	}
	/* tasks get their grace period, then the exits get a few seconds to be
	 * reported; after that we stop regardless */
	uv_timer_start(&a->stop_timer, stop_timer_cb,
		       (uint64_t)(longest_grace + AGENT_STOP_REPORT_MS), 0);
	maybe_stop_done(a);
}

void agent_destroy(struct agent *a)
{
	if (!a)
		return;
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v))
		group_destroy(v);
	tk_map_release(&a->groups);
	/* a run folder of our own in memory goes where nothing is left in it
	 * (the shims that go on keep theirs) */
	static const char *const subs[] = {SHIM_DIR, "metrics", "nccl"};
	for (size_t i = 0; a->run_dir_own && i < ARRAY_SIZE(subs); i++) {
		_cleanup_free_ char *sub = xasprintf("%s/%s", a->cfg.run_dir, subs[i]);
		rmdir(sub);
	}
	if (a->run_dir_own)
		rmdir(a->cfg.run_dir);
	if (a->lock_fd >= 0)
		close(a->lock_fd);
	if (a->launcher_fd >= 0)
		close(a->launcher_fd);
	free(a->events);
	for (int i = 0; i < a->nservers; i++)
		free(a->servers[i]);
	free(a->servers);
	free(a->url_register);
	free(a->url_heartbeat);
	free(a->url_events);
	free(a->url_work);
	free(a->url_logs);
	catalogue_release(&a->cat);
	agent__images_release(a);
	agent__metrics_stop(a);
	agent__health_release(a);
	agent__witness_free(a);
	free(a->hb_rtt);
	free_cfg(&a->cfg);
	free(a);
}
