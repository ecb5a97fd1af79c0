/*
 * Validation runs (DESIGN.md section 6): `tenk validate --nodes SPEC` asks the
 * server to prove nodes healthy. The server holds the nodes (no new work
 * lands on them), stops the preemptible jobs there and waits for the others,
 * then starts one system job with a task on each node that sees every
 * device: `tenk validate --member`, which checks its node, compares it with
 * its peers and posts a report here. A failing node is drained with the
 * layer and the reason; a node that passes and was drained by an earlier
 * validation is resumed. With "require_validation" in the configuration, a
 * node takes no work until it has passed, and a joining node is validated
 * without being asked.
 *
 * The task proves who it is with a token derived from the admin token and
 * the job id, which it gets in its environment; it allows nothing but
 * reporting on the nodes of that run while the run lasts.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define VALID_TIME_LIMIT_S 3600
#define VALID_MAX_CHECKS 64
#define VALID_QUEUE "system"

static void token_of(const struct server *s, int64_t job, char out[65])
{
	char buf[160];
	int n = snprintf(buf, sizeof(buf), "%s:validate:%lld", s->admin_token, (long long)job);
	tk_sha256_hex(buf, (size_t)n, out);
}

static bool same_secret(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned diff = la != lb;
	for (size_t i = 0; i < la && i < lb; i++)
		diff |= (unsigned)(a[i] ^ b[i]);
	return diff == 0;
}

/* The class a system job is shown in: the one of highest priority. */
static const char *top_class(const struct server *s)
{
	int best = 0;
	for (int c = 1; c < s->sched.nclasses; c++)
		if (s->sched.classes[c].priority > s->sched.classes[best].priority)
			best = c;
	return s->sched.classes[best].name;
}

int valid_create(struct server *s, struct snode *const *nodes, int n, const char *const *args,
		 int nargs, const char *owner, struct sjob **ret, struct tk_error *err)
{
	if (n < 1 || n > MODEL_MAX_NODES)
		return tk_errorf(err, -EINVAL, "nodes: from 1 to %d, got %d", MODEL_MAX_NODES, n);
	for (int i = 0; i < n; i++) {
		if (nodes[i]->held_by)
			return tk_errorf(
				err, -EBUSY, "node %s: validation job %lld runs there already",
				nodes[i]->rec.inv.name, (long long)nodes[i]->held_by->job->job.id);
		if (nodes[i]->live != NODE_UP)
			return tk_errorf(err, -EHOSTDOWN, "node %s is %s", nodes[i]->rec.inv.name,
					 node_live_name(nodes[i]->live));
		for (int k = 0; k < i; k++)
			if (nodes[k] == nodes[i])
				return tk_errorf(err, -EINVAL, "node %s is named twice",
						 nodes[i]->rec.inv.name);
	}
	struct job_request req;
	memset(&req, 0, sizeof(req));
	req.name = xstrdup("validate");
	req.argc = 3 + nargs;
	req.argv = xcalloc((size_t)req.argc + 1, sizeof(char *));
	req.argv[0] = xstrdup("tenk"); /* the agent runs its own binary */
	req.argv[1] = xstrdup("validate");
	req.argv[2] = xstrdup("--member");
	for (int i = 0; i < nargs; i++)
		req.argv[3 + i] = xstrdup(args[i]);
	req.cwd = xstrdup("/tmp");
	req.output = xstrdup("tenk-validate-%j.%n.out");
	req.nodes = n;
	req.tasks_per_node = 1;
	req.cpus_per_task = 1;
	req.time_limit_s = VALID_TIME_LIMIT_S;
	req.grace_s = 10;
	req.cls = xstrdup(top_class(s));
	req.queue = xstrdup(VALID_QUEUE);
	struct sjob *j = state_submit_system(s, &req, owner);
	char tok[65];
	token_of(s, j->job.id, tok);
	j->job.req.nenv = 1;
	j->job.req.env = xcalloc(2, sizeof(char *));
	j->job.req.env[0] = xasprintf("TENK_VALIDATE_TOKEN=%s", tok);
	struct svalid *v = xcalloc(1, sizeof(*v));
	v->job = j;
	v->nnodes = n;
	v->nodes = xcalloc((size_t)n, sizeof(*v->nodes));
	v->reported = xcalloc((size_t)n, sizeof(*v->reported));
	v->held = xcalloc((size_t)n, sizeof(*v->held));
	for (int i = 0; i < n; i++) {
		v->nodes[i] = nodes[i];
		nodes[i]->held_by = v;
	}
	v->next = s->valids;
	if (s->valids)
		s->valids->prev = v;
	s->valids = v;
	j->valid = v;
	snprintf(j->job.reason, sizeof(j->job.reason), "validation: waiting for its nodes");
	log_info("validation job %lld on %d node%s, first %s", (long long)j->job.id, n,
		 n == 1 ? "" : "s", nodes[0]->rec.inv.name);
	*ret = j;
	return 0;
}

static void run_free(struct server *s, struct svalid *v)
{
	for (int i = 0; i < v->nnodes; i++)
		if (v->nodes[i]->held_by == v)
			v->nodes[i]->held_by = NULL;
	if (v->prev)
		v->prev->next = v->next;
	else
		s->valids = v->next;
	if (v->next)
		v->next->prev = v->prev;
	if (v->job)
		v->job->valid = NULL;
	for (int i = 0; i < v->nnodes; i++)
		json_decref(v->held[i]);
	free(v->nodes);
	free(v->reported);
	free(v->held);
	free(v);
}

static void start(struct server *s, struct svalid *v)
{
	struct sched_assign *as = xcalloc((size_t)v->nnodes, sizeof(*as));
	for (int i = 0; i < v->nnodes; i++) {
		struct snode *n = v->nodes[i];
		as[i].node = n->index;
		as[i].ndev = n->rec.inv.naccel;
		for (int d = 0; d < as[i].ndev; d++)
			as[i].devs[d] = d;
		as[i].milli = MODEL_MILLI;
		as[i].cpus = 1;
	}
	struct sched_start st = {.job = 0, .nnodes = v->nnodes, .nodes = as};
	state_apply_start(s, v->job, &st, s->nodes);
	free(as);
	log_info("validation job %lld starts", (long long)v->job->job.id);
}

void valid_tick(struct server *s)
{
	struct svalid *next;
	for (struct svalid *v = s->valids; v; v = next) {
		next = v->next;
		struct sjob *j = v->job;
		if (j->job.state != JOB_PENDING)
			continue;
		struct snode *down = NULL, *busy = NULL;
		for (int i = 0; i < v->nnodes; i++) {
			struct snode *n = v->nodes[i];
			if (n->live == NODE_DOWN && !down)
				down = n;
			if (n->nparts > 0 && !busy)
				busy = n;
		}
		if (down) {
			char why[MODEL_REASON_MAX];
			snprintf(why, sizeof(why),
				 "node %s went down before the validation started",
				 down->rec.inv.name);
			state_job_finish(s, j, JOB_FAILED, -1, why); /* frees v */
			continue;
		}
		if (!busy) {
			start(s, v);
			continue;
		}
		/* what may be preempted goes now, once; the rest is waited for */
		if (!v->preempted) {
			v->preempted = true;
			for (int i = 0; i < v->nnodes; i++) {
				struct snode *n = v->nodes[i];
				for (int k = n->nparts - 1; k >= 0; k--) {
					if (k >= n->nparts)
						continue;
					struct sjob *o = n->parts[k].job;
					if (!o->job.system && s->classes[o->cls].spec.preemptible)
						state_preempt(s, o, j);
				}
			}
		}
		struct strbuf sb;
		strbuf_init(&sb);
		for (int k = 0; k < busy->nparts && k < 4; k++)
			strbuf_addf(&sb, "%s%lld", k ? ", " : "",
				    (long long)busy->parts[k].job->job.id);
		snprintf(j->job.reason, sizeof(j->job.reason),
			 "validation: waiting for node %s to empty (job%s %s%s)",
			 busy->rec.inv.name, busy->nparts > 1 ? "s" : "", sb.buf,
			 busy->nparts > 4 ? ", ..." : "");
		strbuf_release(&sb);
	}
}

/* Records a verdict on n and acts on it. */
static void set_verdict(struct server *s, struct snode *n, int64_t job, bool pass,
			const char *layer, const char *reason, json_t *checks)
{
	struct node_record *r = &n->rec;
	snprintf(r->verdict, sizeof(r->verdict), "%s", pass ? "pass" : "fail");
	snprintf(r->verdict_layer, sizeof(r->verdict_layer), "%s", pass ? "" : layer);
	snprintf(r->verdict_reason, sizeof(r->verdict_reason), "%s", pass ? "" : reason);
	r->verdict_ms = server_now_ms(s);
	r->verdict_job = job;
	json_decref(r->verdict_checks);
	r->verdict_checks = json_incref(checks);
	server_node_dirty(s, n);
	if (!pass) {
		char why[MODEL_REASON_MAX];
		snprintf(why, sizeof(why), "validate: %s%s%.200s", layer, layer[0] ? ": " : "",
			 reason);
		state_drain(s, n, why);
	} else if (r->drained && strncmp(r->drain_reason, "validate:", 9) == 0) {
		state_resume(s, n);
	} else {
		server_want_pass(s);
	}
	log_info("node %s: validation %s%s%s", n->rec.inv.name, pass ? "passed" : "FAILED",
		 pass ? "" : ": ", pass ? "" : reason);
}

void valid_job_ended(struct server *s, struct sjob *j)
{
	struct svalid *v = j->valid;
	if (!v)
		return;
	/* a node without a report is to blame when its own task failed, was
	 * lost, or hung to the time limit; one whose task was still running
	 * when another's failure ended the job is not */
	const struct attempt *a = job_current_attempt(&j->job);
	int culprits = 0;
	for (int i = 0; i < v->nnodes; i++) {
		if (v->reported[i] || j->job.state == JOB_CANCELLED)
			continue;
		const struct task_status *t = a && i < a->ntasks ? &a->tasks[i] : NULL;
		bool blame = !t || j->job.state == JOB_TIMEOUT || t->state == TASK_LOST ||
			     t->state == TASK_EXITED;
		if (!blame) {
			log_info("node %s: no verdict from validation job %lld: %s",
				 v->nodes[i]->rec.inv.name, (long long)j->job.id, j->job.reason);
			continue;
		}
		culprits++;
		char why[MODEL_REASON_MAX];
		snprintf(why, sizeof(why), "no report from the node (%.200s)",
			 t && t->state == TASK_EXITED && t->exit_code == 0
				 ? "its task ended without one"
				 : j->job.reason);
		set_verdict(s, v->nodes[i], j->job.id, false, "", why, NULL);
	}
	int missing = culprits;
	for (int i = 0; i < v->nnodes; i++) {
		json_t *h = v->held[i];
		if (!h)
			continue;
		if (missing == 0 && j->job.state != JOB_CANCELLED)
			set_verdict(s, v->nodes[i], j->job.id, false,
				    json_string_value(json_object_get(h, "layer")),
				    json_string_value(json_object_get(h, "reason")),
				    json_object_get(h, "checks"));
		else
			log_info("node %s: no verdict from validation job %lld: %s",
				 v->nodes[i]->rec.inv.name, (long long)j->job.id,
				 missing ? "another of its nodes was lost" : "cancelled");
	}
	run_free(s, v);
	server_want_pass(s);
}

bool valid_node_open(const struct server *s, const struct snode *n)
{
	if (n->held_by)
		return false;
	return !s->sched.require_validation || strcmp(n->rec.verdict, "pass") == 0;
}

const char *valid_node_state(const struct server *s, const struct snode *n)
{
	if (n->held_by)
		return "VALIDATING";
	if (s->sched.require_validation && strcmp(n->rec.verdict, "pass") != 0)
		return "UNVALIDATED";
	return NULL;
}

void valid_node_registered(struct server *s, struct snode *n)
{
	if (!s->sched.require_validation || n->held_by || n->rec.verdict[0])
		return;
	const char *args[MODEL_MAX_VALIDATION_ARGS];
	for (int i = 0; i < s->sched.nvalidation_args; i++)
		args[i] = s->sched.validation_args[i];
	struct sjob *j;
	struct tk_error err;
	struct snode *one[1] = {n};
	if (valid_create(s, one, 1, args, s->sched.nvalidation_args, "tenk", &j, &err) < 0)
		log_warn("node %s: cannot start its validation: %s", n->rec.inv.name, err.text);
}

void valid_release(struct server *s)
{
	while (s->valids)
		run_free(s, s->valids);
}

/* ---- the API -------------------------------------------------------------------- */

/* POST /v1/validations {"nodes": ["n1", ...] | "all", "args": ["--quick", ...]} */
void h_validate_create(struct request *r, const char *param, json_t *body)
{
	static const char *const keys[] = {"nodes", "args", NULL};
	struct server *s = r->s;
	struct tk_error err;
	if (mj_check_keys(body, NULL, keys, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	json_t *jn = json_object_get(body, "nodes"), *ja = json_object_get(body, "args");
	const char *args[MODEL_MAX_VALIDATION_ARGS];
	int nargs = 0;
	if (ja && (!json_is_array(ja) || json_array_size(ja) > MODEL_MAX_VALIDATION_ARGS)) {
		reply_error(r, 400, "args: must be an array of at most %d strings",
			    MODEL_MAX_VALIDATION_ARGS);
		return;
	}
	size_t i;
	json_t *a;
	json_array_foreach (ja, i, a) {
		const char *t = json_string_value(a);
		if (!t || !*t || strlen(t) >= MODEL_NAME_MAX || strchr(t, '\n')) {
			reply_error(r, 400,
				    "args[%zu]: must be a string of 1 to %d bytes (an option "
				    "of tenk validate)",
				    i, MODEL_NAME_MAX - 1);
			return;
		}
		if (strcmp(t, "--member") == 0 || strcmp(t, "--nodes") == 0) {
			reply_error(r, 400, "args[%zu]: %s is not for a validation run", i, t);
			return;
		}
		args[nargs++] = t;
	}
	struct snode **nodes = xcalloc((size_t)MAX(s->nnodes, MODEL_MAX_NODES) + 1, sizeof(*nodes));
	int n = 0;
	if (json_is_string(jn) && strcmp(json_string_value(jn), "all") == 0) {
		for (int k = 0; k < s->nnodes; k++)
			if (s->nodes[k]->live == NODE_UP && !s->nodes[k]->held_by)
				nodes[n++] = s->nodes[k];
		if (n == 0) {
			reply_error(r, 409, "nodes: no node is up and free of other validations");
			goto out;
		}
	} else if (json_is_array(jn) && json_array_size(jn) >= 1 &&
		   json_array_size(jn) <= MODEL_MAX_NODES) {
		json_array_foreach (jn, i, a) {
			const char *name = json_string_value(a);
			struct snode *nd = name ? state_node(s, name) : NULL;
			if (!nd) {
				reply_error(r, name ? 404 : 400, "nodes[%zu]: %s%.64s%s", i,
					    name ? "no node \"" : "must be a node's name",
					    name ? name : "", name ? "\"" : "");
				goto out;
			}
			nodes[n++] = nd;
		}
	} else {
		reply_error(r, 400, "nodes: must be \"all\" or an array of 1 to %d node names",
			    MODEL_MAX_NODES);
		goto out;
	}
	struct sjob *j;
	int rc = valid_create(s, nodes, n, args, nargs, r->user[0] ? r->user : "admin", &j, &err);
	if (rc < 0) {
		reply_error(r, rc == -EINVAL ? 400 : 409, "%s", err.text);
		goto out;
	}
	json_t *names = json_array();
	for (int k = 0; k < n; k++)
		json_array_append_new(names, json_string(nodes[k]->rec.inv.name));
	reply_json(r, 201, json_pack("{s:I, s:o}", "job", (json_int_t)j->job.id, "nodes", names));
out:
	free(nodes);
}

/* POST /v1/validations/JOB/report {"token", "node", "verdict", "layer",
 * "reason", "checks": [...]}: one node's result, from its task. */
void h_validate_report(struct request *r, const char *param, json_t *body)
{
	static const char *const keys[] = {"token",  "node",   "verdict",    "layer",
					   "reason", "checks", "peer_error", NULL};
	struct server *s = r->s;
	struct tk_error err;
	char token[80] = "", node[MODEL_NAME_MAX] = "", verdict[8] = "", layer[16] = "";
	char reason[MODEL_REASON_MAX] = "";
	bool peer_error = false;
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    mj_bool(body, "peer_error", false, false, &peer_error, &err) < 0 ||
	    mj_strbuf(body, "token", true, true, token, sizeof(token), &err) < 0 ||
	    mj_strbuf(body, "node", true, true, node, sizeof(node), &err) < 0 ||
	    mj_strbuf(body, "verdict", true, true, verdict, sizeof(verdict), &err) < 0 ||
	    mj_strbuf(body, "layer", false, true, layer, sizeof(layer), &err) < 0 ||
	    mj_strbuf(body, "reason", false, false, reason, sizeof(reason), &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	int64_t id;
	if (tk_parse_int64(param, 1, INT64_MAX, &id) < 0) {
		reply_error(r, 400, "job id must be a positive integer, got \"%.64s\"", param);
		return;
	}
	char want[65];
	token_of(s, id, want);
	if (!same_secret(token, want)) {
		reply_error(r, 403, "token: not the token of validation job %lld", (long long)id);
		return;
	}
	struct sjob *j = state_job(s, id);
	if (!j || !j->valid) {
		reply_error(r, 409, "validation job %lld is not running", (long long)id);
		return;
	}
	bool pass = strcmp(verdict, "pass") == 0;
	if (!pass && strcmp(verdict, "fail") != 0) {
		reply_error(r, 400, "verdict: must be \"pass\" or \"fail\", got \"%s\"", verdict);
		return;
	}
	json_t *checks = json_object_get(body, "checks");
	if (checks && (!json_is_array(checks) || json_array_size(checks) > VALID_MAX_CHECKS)) {
		reply_error(r, 400, "checks: must be an array of at most %d", VALID_MAX_CHECKS);
		return;
	}
	json_t *c;
	size_t i;
	json_array_foreach (checks, i, c)
		if (!json_is_object(c)) {
			reply_error(r, 400, "checks[%zu]: must be an object", i);
			return;
		}
	struct svalid *v = j->valid;
	int k;
	for (k = 0; k < v->nnodes; k++)
		if (strcmp(v->nodes[k]->rec.inv.name, node) == 0)
			break;
	if (k == v->nnodes) {
		reply_error(r, 404, "node: \"%s\" is not one of validation job %lld's nodes", node,
			    (long long)id);
		return;
	}
	if (v->reported[k]) {
		reply_error(r, 409, "node %s already reported for validation job %lld", node,
			    (long long)id);
		return;
	}
	if (!pass && !reason[0]) {
		reply_error(r, 400, "reason: a failing verdict must say why");
		return;
	}
	v->reported[k] = true;
	if (peer_error && !pass) {
		/* whose fault it was is known when the run ends */
		json_object_set_new(body, "layer", json_string(layer));
		json_object_set_new(body, "reason", json_string(reason));
		v->held[k] = json_incref(body);
		reply_json(r, 200, json_pack("{s:s, s:s}", "node", node, "verdict", "held"));
		return;
	}
	set_verdict(s, v->nodes[k], id, pass, layer, reason, checks);
	reply_json(r, 200, json_pack("{s:s, s:s}", "node", node, "verdict", verdict));
}
