/*
 * The HTTP/JSON API under /v1: one table of routes and a handler for each.
 * Handlers check everything that came from outside (path parameters, query
 * arguments, the body) before touching state, so a bad request changes
 * nothing; they answer through reply_* in http.c, which holds the answer
 * until what it reports is durable.
 */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define LIST_DEFAULT_LIMIT 1000
#define WAIT_MAX_S 300

static int parse_job_id(struct request *r, const char *param, struct sjob **ret)
{
	int64_t id;
	if (tk_parse_int64(param, 1, INT64_MAX, &id) < 0) {
		reply_error(r, 400, "job id must be a positive integer, got \"%.64s\"", param);
		return -EINVAL;
	}
	struct sjob *j = state_job(r->s, id);
	if (!j) {
		reply_error(r, 404, "no job %lld", (long long)id);
		return -ENOENT;
	}
	if (r->role != ROLE_ADMIN && strcmp(j->job.owner, r->user) != 0) {
		reply_error(r, 404, "no job %lld", (long long)id);
		return -ENOENT;
	}
	*ret = j;
	return 0;
}

static struct snode *find_node(struct request *r, const char *name)
{
	struct snode *n = state_node(r->s, name);
	if (!n)
		reply_error(r, 404, "no node \"%.64s\"", name);
	return n;
}

/* ---- general ------------------------------------------------------------------ */

static void h_health(struct request *r, const char *param, json_t *body)
{
	const struct server *s = r->s;
	/* what the scheduler costs: its passes, the last one's time (building
	 * the snapshot, deciding and applying), what waits and in how many
	 * distinct requests */
	json_t *sched = json_pack("{s:I, s:f, s:I, s:i}", "passes", (json_int_t)s->stats.passes,
				  "last_pass_ms", s->last_pass_us / 1000.0, "pending",
				  (json_int_t)s->npending, "shapes",
				  s->sched_shapes ? sched_shapes_live(s->sched_shapes) : 0);
	reply_json(r, 200,
		   json_pack("{s:b, s:s, s:o}", "ok", 1, "epoch", s->epoch, "scheduler", sched));
}

static void h_catalogue(struct request *r, const char *param, json_t *body)
{
	reply_json(r, 200, json_pack("{s:o}", "models", catalogue_pack(&r->s->cat)));
}

/* ---- jobs --------------------------------------------------------------------- */

static void h_submit(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct job_request req;
	struct tk_error err;
	if (job_request_unpack(body, &req, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	for (int i = 0; i < req.ngpu_types; i++) {
		if (!catalogue_find(&s->cat, req.gpu_types[i])) {
			struct strbuf names;
			strbuf_init(&names);
			catalogue_names(&s->cat, &names);
			reply_error(r, 400, "gpu_types[%d]: unknown model \"%s\"; known: %s", i,
				    req.gpu_types[i], names.buf);
			strbuf_release(&names);
			job_request_release(&req);
			return;
		}
	}
	if (req.cls && sched_config_class(&s->sched, req.cls) < 0) {
		struct strbuf names;
		strbuf_init(&names);
		for (int c = 0; c < s->sched.nclasses; c++)
			strbuf_addf(&names, "%s%s", c ? ", " : "", s->sched.classes[c].name);
		reply_error(r, 400, "class: no class \"%s\"; classes: %s", req.cls, names.buf);
		strbuf_release(&names);
		job_request_release(&req);
		return;
	}
	const char *qname = req.queue ? req.queue : "default";
	struct squeue *q = state_queue(s, qname);
	if (!q) {
		reply_error(r, 400,
			    "queue: no queue \"%s\"; an admin creates it with `tenk queues "
			    "set %s --gpus N`",
			    qname, qname);
		job_request_release(&req);
		return;
	}
	if (r->role != ROLE_ADMIN && !queue_spec_allows(&q->spec, r->user)) {
		reply_error(r, 403, "queue: user \"%s\" may not submit to queue \"%s\"", r->user,
			    qname);
		job_request_release(&req);
		return;
	}
	struct sjob *j = state_submit(s, &req, r->user);
	reply_json(r, 201, state_job_pack(s, j));
}

static void h_classes(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	json_t *arr = json_array();
	for (int c = 0; c < s->sched.nclasses; c++) {
		json_t *o = class_spec_pack(&s->classes[c].spec);
		json_object_set_new(o, "default", json_boolean(c == s->sched.default_class));
		json_object_set_new(o, "pending", json_integer(s->classes[c].npending));
		json_array_append_new(arr, o);
	}
	reply_json(r, 200,
		   json_pack("{s:o, s:I}", "classes", arr, "fair_share_half_life_s",
			     (json_int_t)s->sched.half_life_s));
}

static void h_queues(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	state_queues_age(s);
	json_t *arr = json_array();
	for (int i = 0; i < s->nqueues; i++)
		json_array_append_new(arr, state_queue_pack(s, s->queues[i]));
	reply_json(r, 200, json_pack("{s:o}", "queues", arr));
}

static void h_queue_set(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	if (!model_name_valid(param)) {
		reply_error(r, 400, "queue name \"%.64s\": use letters, digits, '.', '_', '-'",
			    param);
		return;
	}
	struct squeue *q = state_queue(s, param);
	struct queue_spec *next = xmalloc(sizeof(*next));
	if (q) {
		*next = q->spec;
	} else {
		memset(next, 0, sizeof(*next));
		snprintf(next->name, sizeof(next->name), "%s", param);
		next->quota_milli = next->borrow_milli = -1;
		next->weight = 1;
		next->usage_at_ms = server_now_ms(s);
	}
	struct tk_error err;
	if (queue_spec_update(next, body, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		free(next);
		return;
	}
	if (!q)
		q = state_queue_add(s, param);
	q->spec = *next;
	free(next);
	server_queue_dirty(s, q);
	server_want_pass(s);
	log_info("queue %s set by %s", q->spec.name, r->user);
	reply_json(r, 200, state_queue_pack(s, q));
}

/* Parses "PENDING,RUNNING" into a mask of states. */
static int parse_states(const char *text, unsigned *ret)
{
	_cleanup_free_ char *copy = xstrdup(text);
	char *save = NULL;
	unsigned mask = 0;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		enum job_state st;
		if (strcasecmp(t, "active") == 0) {
			mask |= 1u << JOB_PENDING | 1u << JOB_STARTING | 1u << JOB_RUNNING;
			continue;
		}
		if (job_state_parse(t, &st) < 0)
			return -EINVAL;
		mask |= 1u << st;
	}
	if (!mask)
		return -EINVAL;
	*ret = mask;
	return 0;
}

static void h_jobs_list(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	unsigned mask = ~0u;
	int64_t limit = LIST_DEFAULT_LIMIT;
	const char *state = request_arg(r, "state");
	const char *lim = request_arg(r, "limit");
	if (state && parse_states(state, &mask) < 0) {
		reply_error(r, 400,
			    "state: expected a comma-separated list of PENDING, STARTING, RUNNING, "
			    "COMPLETED, FAILED, CANCELLED, TIMEOUT or active; got \"%.64s\"",
			    state);
		return;
	}
	if (lim && tk_parse_int64(lim, 1, SERVER_MAX_LIST, &limit) < 0) {
		reply_error(r, 400, "limit: must be an integer from 1 to %d, got \"%.32s\"",
			    SERVER_MAX_LIST, lim);
		return;
	}
	/* the newest `limit` matching jobs, listed oldest first */
	size_t start = s->njobs;
	int64_t count = 0, total = 0;
	for (size_t i = s->njobs; i-- > 0;) {
		struct sjob *j = s->jobs[i];
		if (!j || !(mask & (1u << j->job.state)))
			continue;
		if (r->role != ROLE_ADMIN && strcmp(j->job.owner, r->user) != 0)
			continue;
		total++;
		if (count < limit) {
			count++;
			start = i;
		}
	}
	json_t *arr = json_array();
	for (size_t i = start; i < s->njobs && (int64_t)json_array_size(arr) < count; i++) {
		struct sjob *j = s->jobs[i];
		if (!j || !(mask & (1u << j->job.state)))
			continue;
		if (r->role != ROLE_ADMIN && strcmp(j->job.owner, r->user) != 0)
			continue;
		json_t *o = state_job_pack(s, j);
		/* lists leave out each job's environment; GET /v1/jobs/ID has it */
		json_object_del(json_object_get(o, "request"), "env");
		json_array_append_new(arr, o);
	}
	reply_json(r, 200, json_pack("{s:o, s:I}", "jobs", arr, "total", (json_int_t)total));
}

static void h_job_show(struct request *r, const char *param, json_t *body)
{
	struct sjob *j;
	if (parse_job_id(r, param, &j) < 0)
		return;
	const char *w = request_arg(r, "wait");
	int64_t wait_s = 0;
	if (w && tk_parse_int64(w, 0, WAIT_MAX_S, &wait_s) < 0) {
		reply_error(r, 400, "wait: must be whole seconds from 0 to %d, got \"%.32s\"",
			    WAIT_MAX_S, w);
		return;
	}
	if (wait_s == 0 || job_state_final(j->job.state)) {
		reply_json(r, 200, state_job_pack(r->s, j));
		return;
	}
	r->wait_job = j;
	req_list_push(&j->waiters, r);
	request_park(r, WAIT_JOB, tk_mono_ms() + wait_s * 1000);
}

static void h_job_cancel(struct request *r, const char *param, json_t *body)
{
	struct sjob *j;
	if (parse_job_id(r, param, &j) < 0)
		return;
	struct tk_error err;
	if (state_cancel(r->s, j, &err) < 0) {
		reply_error(r, 409, "%s", err.text);
		return;
	}
	reply_json(r, 200, state_job_pack(r->s, j));
}

/* ---- nodes -------------------------------------------------------------------- */

static void h_nodes_list(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	const char *checks = request_arg(r, "checks");
	if (checks && strcmp(checks, "0") != 0 && strcmp(checks, "1") != 0) {
		reply_error(r, 400, "checks: must be 0 or 1, got \"%.32s\"", checks);
		return;
	}
	bool with_checks = checks && strcmp(checks, "1") == 0;
	json_t *arr = json_array();
	for (int i = 0; i < s->nnodes; i++) {
		json_t *n = state_node_pack(s, s->nodes[i]);
		/* each validation's checks only when asked: at 10,000 nodes they
		 * would be most of the answer */
		if (!with_checks)
			json_object_del(json_object_get(n, "validation"), "checks");
		json_array_append_new(arr, n);
	}
	reply_json(r, 200, json_pack("{s:o}", "nodes", arr));
}

static void h_node_show(struct request *r, const char *param, json_t *body)
{
	struct snode *n = find_node(r, param);
	if (n)
		reply_json(r, 200, state_node_pack(r->s, n));
}

static void h_node_drain(struct request *r, const char *param, json_t *body)
{
	static const char *const keys[] = {"reason", NULL};
	struct tk_error err;
	char reason[MODEL_REASON_MAX] = "";
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    mj_strbuf(body, "reason", true, true, reason, 200, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	if (!reason[0]) {
		reply_error(r, 400, "reason: must say why the node is drained");
		return;
	}
	struct snode *n = find_node(r, param);
	if (!n)
		return;
	state_drain(r->s, n, reason);
	reply_json(r, 200, state_node_pack(r->s, n));
}

static void h_node_resume(struct request *r, const char *param, json_t *body)
{
	struct snode *n = find_node(r, param);
	if (!n)
		return;
	state_resume(r->s, n);
	reply_json(r, 200, state_node_pack(r->s, n));
}

/* ---- agents ------------------------------------------------------------------- */

/* Finds the node an agent names, answering 409 when the agent must register
 * (again) first. */
static struct snode *agent_node(struct request *r, const char *name, const char *agent_id)
{
	struct snode *n = state_node(r->s, name);
	if (!n) {
		reply_error(r, 409, "node \"%.64s\" is not registered; register first", name);
		return NULL;
	}
	if (agent_id && strcmp(n->rec.agent_id, agent_id) != 0) {
		reply_error(r, 409,
			    "node \"%.64s\" is registered by another agent process; register "
			    "again",
			    name);
		return NULL;
	}
	return n;
}

static void h_agent_register(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct tk_error err;
	struct wire_register *m = xmalloc(sizeof(*m));
	if (wire_register_unpack(body, m, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		goto out;
	}
	struct node_inventory *inv = &m->inv;
	if (!inv->addr[0]) {
		/* the address the agent reached us from is how peers reach it */
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (ci && ci->client_addr->sa_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)ci->client_addr)->sin_addr,
				  inv->addr, sizeof(inv->addr));
		else if (ci && ci->client_addr->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ci->client_addr)->sin6_addr,
				  inv->addr, sizeof(inv->addr));
	}
	struct snode *n = state_register(s, inv, m->agent_id);
	struct wire_registered ans = {.node_timeout_ms = s->cfg.node_timeout_ms};
	snprintf(ans.node, sizeof(ans.node), "%s", n->rec.inv.name);
	snprintf(ans.addr, sizeof(ans.addr), "%s", n->rec.inv.addr);
	snprintf(ans.epoch, sizeof(ans.epoch), "%s", s->epoch);
	reply_json(r, 200, wire_registered_pack(&ans));
out:
	free(m);
}

static void h_agent_heartbeat(struct request *r, const char *param, json_t *body)
{
	struct tk_error err;
	struct wire_heartbeat m;
	if (wire_heartbeat_unpack(body, &m, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	struct snode *n = agent_node(r, m.node, m.agent_id);
	if (n) {
		state_node_seen(r->s, n);
		for (int i = 0; i < m.ncheckpoints; i++) {
			const struct wire_checkpoint *c = &m.checkpoints[i];
			struct sjob *j = state_job(r->s, c->job);
			const struct attempt *a = j ? job_current_attempt(&j->job) : NULL;
			if (a && a->number == c->attempt)
				j->last_ckpt_ms = MAX(j->last_ckpt_ms, c->at_ms);
		}
		reply_json(r, 200, json_pack("{s:b}", "ok", 1));
	}
	wire_heartbeat_release(&m);
}

static void h_agent_work(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	const char *node = request_arg(r, "node");
	const char *epoch = request_arg(r, "epoch");
	const char *gen = request_arg(r, "gen");
	const char *wait = request_arg(r, "wait_ms");
	int64_t g = 0, wait_ms = 0;
	if (!node) {
		reply_error(r, 400, "node: required query argument is missing");
		return;
	}
	if (gen && tk_parse_int64(gen, 0, INT64_MAX, &g) < 0) {
		reply_error(r, 400, "gen: must be a non-negative integer");
		return;
	}
	if (wait && tk_parse_int64(wait, 0, 600000, &wait_ms) < 0) {
		reply_error(r, 400, "wait_ms: must be an integer from 0 to 600000");
		return;
	}
	struct snode *n = agent_node(r, node, request_arg(r, "agent_id"));
	if (!n)
		return;
	state_node_seen(s, n);
	bool same_epoch = epoch && strcmp(epoch, s->epoch) == 0;
	uint64_t since = same_epoch ? (uint64_t)g : 0;
	if (!same_epoch || since < n->work_gen || wait_ms == 0) {
		reply_json(r, 200, state_work_pack(s, n, since));
		return;
	}
	snprintf(r->agent_epoch, sizeof(r->agent_epoch), "%s", s->epoch);
	r->agent_gen = since;
	r->wait_node = n;
	req_list_push(&n->pollers, r);
	request_park(r, WAIT_WORK, tk_mono_ms() + MIN(wait_ms, s->cfg.longpoll_ms));
}

static void h_agent_events(struct request *r, const char *param, json_t *body)
{
	struct tk_error err;
	struct wire_events m;
	if (wire_events_unpack(body, &m, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	struct snode *sn = agent_node(r, m.node, m.agent_id);
	if (sn) {
		state_node_seen(r->s, sn);
		for (int i = 0; i < m.nevents; i++) {
			const struct task_event *ev = &m.events[i];
			if (ev->type == TASK_EVENT_EXITED)
				state_task_exited(r->s, ev);
			else
				state_task_started(r->s, ev->job, ev->attempt, ev->rank, ev->at_ms);
		}
		reply_json(r, 200, json_pack("{s:I}", "acked", (json_int_t)m.nevents));
	}
	wire_events_release(&m);
}

void api_longpoll_expired(struct request *r)
{
	struct server *s = r->s;
	if (r->wait == WAIT_WORK) {
		struct snode *n = r->wait_node;
		struct wire_work w = {.gen = n->work_gen, .unchanged = true};
		snprintf(w.epoch, sizeof(w.epoch), "%s", s->epoch);
		reply_json(r, 200, wire_work_pack(&w));
	} else if (r->wait == WAIT_JOB) {
		reply_json(r, 200, state_job_pack(s, r->wait_job));
	}
}

/* ---- users ------------------------------------------------------------------------ */

static void h_users(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	json_t *arr = json_array();
	size_t pos = 0;
	void *v;
	while (tk_map_next(&s->user_by_name, &pos, NULL, &v)) {
		const struct suser *u = v;
		json_array_append_new(arr, json_pack("{s:s, s:b, s:I}", "name", u->rec.name,
						     "admin", u->rec.admin, "created_ms",
						     (json_int_t)u->rec.created_ms));
	}
	reply_json(r, 200, json_pack("{s:o}", "users", arr));
}

static void h_user_add(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	static const char *const keys[] = {"name", "admin", NULL};
	struct tk_error err;
	char name[MODEL_NAME_MAX] = "";
	bool admin;
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    mj_strbuf(body, "name", true, true, name, sizeof(name), &err) < 0 ||
	    mj_bool(body, "admin", false, false, &admin, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	if (!model_name_valid(name) || !strcmp(name, "admin") || !strcmp(name, "agent")) {
		reply_error(r, 400,
			    "name: \"%s\" is not a user name one may add (letters, digits, "
			    "'.', '_', '-'; not admin or agent)",
			    name);
		return;
	}
	if (tk_map_get(&s->user_by_name, name)) {
		reply_error(r, 409, "user \"%s\" exists; remove it first to issue a new token",
			    name);
		return;
	}
	char token[65];
	state_user_add(s, name, admin, token);
	reply_json(r, 201,
		   json_pack("{s:s, s:b, s:s}", "name", name, "admin", admin, "token", token));
}

static void h_user_del(struct request *r, const char *param, json_t *body)
{
	struct suser *u = tk_map_get(&r->s->user_by_name, param);
	if (!u) {
		reply_error(r, 404, "no user \"%.64s\"", param);
		return;
	}
	state_user_del(r->s, u);
	reply_json(r, 200, json_pack("{s:s}", "removed", param));
}

const struct route api_routes[] = {
	{"GET", "/v1/health", ROLE_NONE, h_health, false},
	{"GET", "/v1/catalogue", ROLE_USER, h_catalogue, false},
	{"GET", "/v1/classes", ROLE_USER, h_classes, false},
	{"GET", "/v1/queues", ROLE_USER, h_queues, false},
	{"PUT", "/v1/queues/{}", ROLE_ADMIN, h_queue_set, true},
	{"GET", "/v1/users", ROLE_ADMIN, h_users, false},
	{"POST", "/v1/users", ROLE_ADMIN, h_user_add, true},
	{"DELETE", "/v1/users/{}", ROLE_ADMIN, h_user_del, false},
	{"POST", "/v1/jobs", ROLE_USER, h_submit, true},
	{"GET", "/v1/jobs", ROLE_USER, h_jobs_list, false},
	{"GET", "/v1/jobs/{}", ROLE_USER, h_job_show, false},
	{"POST", "/v1/jobs/{}/cancel", ROLE_USER, h_job_cancel, false},
	{"GET", "/v1/nodes", ROLE_USER, h_nodes_list, false},
	{"GET", "/v1/nodes/{}", ROLE_USER, h_node_show, false},
	{"POST", "/v1/nodes/{}/drain", ROLE_ADMIN, h_node_drain, true},
	{"POST", "/v1/nodes/{}/resume", ROLE_ADMIN, h_node_resume, false},
	{"POST", "/v1/validations", ROLE_ADMIN, h_validate_create, true},
	/* its own token (the run's), checked by the handler */
	{"POST", "/v1/validations/{}/report", ROLE_NONE, h_validate_report, true},
	{"POST", "/v1/agent/register", ROLE_AGENT, h_agent_register, true},
	{"POST", "/v1/agent/heartbeat", ROLE_AGENT, h_agent_heartbeat, true},
	{"GET", "/v1/agent/work", ROLE_AGENT, h_agent_work, false},
	{"POST", "/v1/agent/events", ROLE_AGENT, h_agent_events, true},
};

const size_t api_nroutes = ARRAY_SIZE(api_routes);
