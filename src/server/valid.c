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
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define VALID_TIME_LIMIT_S 3600
#define VALID_QUEUE "system"

void valid_token(const struct state *s, int64_t job, char out[65])
{
	char buf[160];
	int n = snprintf(buf, sizeof(buf), "%s:validate:%lld", s->cfg.secret, (long long)job);
	tk_sha256_hex(buf, (size_t)n, out);
}

/* The class a system job is shown in: the one of highest priority. */
static const char *top_class(const struct state *s)
{
	int best = 0;
	for (int c = 1; c < s->sched.nclasses; c++)
		if (s->sched.classes[c].priority > s->sched.classes[best].priority)
			best = c;
	return s->sched.classes[best].name;
}

int valid_create(struct state *s, struct snode *const *nodes, int n, const char *const *args,
		 int nargs, const char *image, const char *owner, int64_t now, struct sjob **ret,
		 struct tk_error *err)
{
	if (n < 1 || n > MODEL_MAX_NODES)
		return tk_errorf(err, -EINVAL, "nodes: from 1 to %d, got %d", MODEL_MAX_NODES, n);
	for (int i = 0; i < n; i++) {
		if (nodes[i]->held_by)
			return tk_errorf(
				err, -EBUSY, "node %s: validation job %lld runs there already",
				nodes[i]->rec.inv.name, (long long)nodes[i]->held_by->job->job.id);
		if (nodes[i]->live != NODE_LIVE_UP)
			return tk_errorf(err, -EHOSTDOWN, "node %s is %s", nodes[i]->rec.inv.name,
					 node_state_name(state_node_state(s, nodes[i])));
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
	/* every layer inside the image, proven before the cluster switches to it */
	req.image = image ? xstrdup(image) : NULL;
	struct sjob *j = state_submit_system(s, &req, owner, now);
	char tok[65];
	valid_token(s, j->job.id, tok);
	j->job.req.nenv = 1;
	j->job.req.env = xcalloc(2, sizeof(char *));
	j->job.req.env[0] = xasprintf("TENK_VALIDATE_TOKEN=%s", tok);
	struct svalid *v = xcalloc(1, sizeof(*v));
	v->job = j;
	v->nnodes = n;
	v->nodes = xcalloc((size_t)n, sizeof(*v->nodes));
	v->reported = xcalloc((size_t)n, sizeof(*v->reported));
	v->held = xcalloc((size_t)n, sizeof(*v->held));
	v->stack_gen = xcalloc((size_t)n, sizeof(*v->stack_gen));
	for (int i = 0; i < n; i++) {
		v->nodes[i] = nodes[i];
		v->stack_gen[i] = nodes[i]->stack_gen; /* (again at its start) */
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

static void run_free(struct state *s, struct svalid *v)
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
	free(v->stack_gen);
	free(v);
}

/* Whether the stack node i ran the run on is still its own; says so where
 * it is not. */
static bool stack_holds(const struct svalid *v, int i)
{
	if (v->nodes[i]->stack_gen == v->stack_gen[i])
		return true;
	log_info("node %s: its software stack changed while validation job %lld ran: its "
		 "verdict is not kept",
		 v->nodes[i]->rec.inv.name, (long long)v->job->job.id);
	return false;
}

static void start(struct state *s, struct svalid *v, int64_t now)
{
	struct sched_assign *as = xcalloc((size_t)v->nnodes, sizeof(*as));
	for (int i = 0; i < v->nnodes; i++) {
		struct snode *n = v->nodes[i];
		v->stack_gen[i] = n->stack_gen;
		as[i].node = n->index;
		as[i].ndev = n->rec.inv.naccel;
		for (int d = 0; d < as[i].ndev; d++)
			as[i].devs[d] = d;
		as[i].milli = MODEL_MILLI;
		as[i].cpus = 1;
	}
	struct sched_start st = {.job = 0, .nnodes = v->nnodes, .nodes = as};
	state_apply_start(s, v->job, &st, -1, s->nodes, now);
	free(as);
	log_info("validation job %lld starts", (long long)v->job->job.id);
}

void valid_tick(struct state *s, int64_t now)
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
			if (n->live == NODE_LIVE_DOWN && !down)
				down = n;
			if (n->nparts > 0 && !busy)
				busy = n;
		}
		if (down) {
			char why[MODEL_REASON_MAX];
			snprintf(why, sizeof(why),
				 "node %s went down before the validation started",
				 down->rec.inv.name);
			state_job_finish(s, j, JOB_FAILED, -1, why, now); /* frees v */
			continue;
		}
		if (!busy) {
			start(s, v, now);
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
						state_preempt(s, o, j, now);
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

/* Records a verdict on n and acts on it (of a run whose image is on
 * trial: the verdict alone). */
static void set_verdict(struct state *s, const struct svalid *v, struct snode *n, int64_t job,
			bool pass, const char *layer, const char *reason, json_t *checks,
			int64_t now)
{
	struct node_record *r = &n->rec;
	r->verdict = pass ? VERDICT_PASS : VERDICT_FAIL;
	snprintf(r->verdict_layer, sizeof(r->verdict_layer), "%s", pass ? "" : layer);
	snprintf(r->verdict_reason, sizeof(r->verdict_reason), "%s", pass ? "" : reason);
	r->verdict_ms = now;
	r->verdict_job = job;
	json_decref(r->verdict_checks);
	r->verdict_checks = json_incref(checks);
	state_node_dirty(s, n);
	if (!pass && v->image_on_trial) {
		log_info("node %s: failed validation job %lld in its image (%s%s%s): the image's "
			 "failure, not the node's",
			 n->rec.inv.name, (long long)job, layer, layer[0] ? ": " : "", reason);
		return;
	}
	if (!pass) {
		char why[MODEL_REASON_MAX];
		snprintf(why, sizeof(why), "validate: %s%s%.200s", layer, layer[0] ? ": " : "",
			 reason);
		/* in its history (the lemon rule may drain it for it: that says more) */
		state_node_event(s, n, NODE_EV_VALIDATION_FAILED, job, 1, why, now);
		if (r->drain_source != DRAIN_LEMON)
			state_drain(s, n, DRAIN_VALIDATION, why);
	} else if (r->drain_source == DRAIN_VALIDATION) {
		state_resume(s, n);
	} else {
		state_want_pass(s);
	}
	log_info("node %s: validation %s%s%s", n->rec.inv.name, pass ? "passed" : "FAILED",
		 pass ? "" : ": ", pass ? "" : reason);
}

void valid_job_ended(struct state *s, struct sjob *j, int64_t now)
{
	struct svalid *v = j->valid;
	if (!v)
		return;
	/* a node without a report is to blame when its own task failed, was
	 * lost, or hung to the time limit; one whose task was still running
	 * when another's failure ended the job is not */
	const struct attempt *a = job_current_attempt(&j->job);
	int culprits = 0;
	/* nodes whose stack changed under the run: no verdict, another run */
	int nstale = 0;
	struct snode **stale = xcalloc((size_t)v->nnodes, sizeof(*stale));
	for (int i = 0; i < v->nnodes; i++) {
		if (v->nodes[i]->stack_gen == v->stack_gen[i] ||
		    (!v->reported[i] && stack_holds(v, i)))
			continue;
		stale[nstale++] = v->nodes[i];
		v->reported[i] = true;
		json_decref(v->held[i]);
		v->held[i] = NULL;
	}
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
		set_verdict(s, v, v->nodes[i], j->job.id, false, "", why, NULL, now);
	}
	int missing = culprits;
	for (int i = 0; i < v->nnodes; i++) {
		json_t *h = v->held[i];
		if (!h)
			continue;
		if (missing == 0 && j->job.state != JOB_CANCELLED)
			set_verdict(s, v, v->nodes[i], j->job.id, false,
				    json_string_value(json_object_get(h, "layer")),
				    json_string_value(json_object_get(h, "reason")),
				    json_object_get(h, "checks"), now);
		else
			log_info("node %s: no verdict from validation job %lld: %s",
				 v->nodes[i]->rec.inv.name, (long long)j->job.id,
				 missing ? "another of its nodes was lost" : "cancelled");
	}
	run_free(s, v);
	for (int i = 0; i < nstale; i++)
		valid_node_registered(s, stale[i], now);
	free(stale);
	state_want_pass(s);
}

void valid_verdict_put(struct state *s, struct snode *n, enum verdict v, int64_t job, int64_t ms)
{
	struct node_record *r = &n->rec;
	r->verdict = v;
	r->verdict_job = job;
	r->verdict_ms = ms;
	r->verdict_layer[0] = r->verdict_reason[0] = '\0';
	json_decref(r->verdict_checks);
	r->verdict_checks = NULL;
	state_node_dirty(s, n);
}

bool valid_node_open(const struct state *s, const struct snode *n)
{
	if (n->held_by)
		return false;
	return !s->sched.require_validation || n->rec.verdict == VERDICT_PASS;
}

void valid_node_registered(struct state *s, struct snode *n, int64_t now)
{
	if (!s->sched.require_validation || n->held_by || n->rec.verdict != VERDICT_NONE)
		return;
	const char *args[MODEL_MAX_VALIDATION_ARGS];
	for (int i = 0; i < s->sched.nvalidation_args; i++)
		args[i] = s->sched.validation_args[i];
	struct sjob *j;
	struct tk_error err;
	struct snode *one[1] = {n};
	if (valid_create(s, one, 1, args, s->sched.nvalidation_args, NULL, "tenk", now, &j, &err) <
	    0)
		log_warn("node %s: cannot start its validation: %s", n->rec.inv.name, err.text);
}

void valid_release(struct state *s)
{
	while (s->valids)
		run_free(s, s->valids);
}

int valid_report(struct state *s, struct sjob *j, const char *node, bool pass, const char *layer,
		 const char *reason, json_t *checks, bool held, int64_t now, struct tk_error *err)
{
	struct svalid *v = j->valid;
	int k;
	for (k = 0; k < v->nnodes; k++)
		if (strcmp(v->nodes[k]->rec.inv.name, node) == 0)
			break;
	if (k == v->nnodes)
		return tk_errorf(err, -ENOENT,
				 "node: \"%s\" is not one of validation job %lld's nodes", node,
				 (long long)j->job.id);
	if (v->reported[k])
		return tk_errorf(err, -EALREADY, "node %s already reported for validation job %lld",
				 node, (long long)j->job.id);
	if (!pass && !reason[0])
		return tk_errorf(err, -EINVAL, "reason: a failing verdict must say why");
	v->reported[k] = true;
	if (!stack_holds(v, k))
		return 0; /* (its next run is started when this one ends) */
	if (held && !pass) {
		/* whose fault it was is known when the run ends */
		v->held[k] = json_pack("{s:s, s:s, s:O*}", "layer", layer, "reason", reason,
				       "checks", checks);
		return 0;
	}
	set_verdict(s, v, v->nodes[k], j->job.id, pass, layer, reason, checks, now);
	return 0;
}
