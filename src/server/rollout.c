/*
 * Rollouts (tenk rollout; issue 44, point 2): a change of the fleet's
 * software taken in stages, each stage a set of nodes chosen across fault
 * domains, drained (jobs finish, or are stopped and requeued from their
 * checkpoints), proven, then given work again and watched for a soak
 * before the next stage starts.
 *
 * Two kinds. An image rollout (--image REF) proves the cluster's next
 * default image: each stage's nodes run the validation inside it, and once
 * every stage has passed the configuration's "default_image" becomes REF
 * (a version by the rollout, which `tenk rollout rollback` takes back). A
 * stack rollout (--stack driver=560.28,...) follows a change an operator
 * makes by their own means: each stage's nodes are drained and wait until
 * their agents report the stack the label names, then pass a validation on
 * it, and only then take work.
 *
 * A stage fails where a node fails its validation, goes down, or is
 * drained by a fault, a lemon rule or a failed validation while it soaks;
 * the rollout then stops and rolls back by itself: the nodes it drained
 * take work again (an image's failed verdicts are its own, not the nodes':
 * their verdicts before it are put back), and the reason, naming the node
 * and the check, is in its record. One rollout runs at a time; its record
 * is in the store (meta "rollouts"), so a restart of the server goes on
 * from where it was (a validation the restart ended is run again).
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROLLOUT_VALID_TRIES 3 /* validations of a stage a restart may end */
#define ROLLOUT_KEEP 32	      /* ended rollouts kept, newest */

static const char *const kind_names[ROLLOUT_KIND_MAX] = {
	[ROLLOUT_IMAGE] = "image", [ROLLOUT_STACK] = "stack"};
static const char *const state_names[ROLLOUT_STATE_MAX] = {
	[ROLLOUT_RUNNING] = "running", [ROLLOUT_PAUSED] = "paused",
	[ROLLOUT_DONE] = "done",       [ROLLOUT_FAILED] = "failed",
	[ROLLOUT_ABORTED] = "aborted", [ROLLOUT_ROLLED_BACK] = "rolled_back"};
static const char *const phase_names[ROLLOUT_PHASE_MAX] = {[ROLLOUT_PICK] = "pick",
							   [ROLLOUT_DRAINING] = "draining",
							   [ROLLOUT_BASELINE] = "baseline",
							   [ROLLOUT_WAIT_STACK] =
								   "waiting_for_stack",
							   [ROLLOUT_VALIDATING] = "validating",
							   [ROLLOUT_SOAKING] = "soaking",
							   [ROLLOUT_FINISHED] = "finished"};
static const char *const policy_names[ROLLOUT_DRAIN_MAX] = {
	[ROLLOUT_DRAIN_WAIT] = "wait", [ROLLOUT_DRAIN_REQUEUE] = "requeue"};

static int name_index(const char *const *names, int n, const char *s)
{
	for (int i = 0; s && i < n; i++)
		if (names[i] && strcmp(names[i], s) == 0)
			return i;
	return -1;
}

static bool ended(const struct rollout *ro)
{
	return ro->state != ROLLOUT_RUNNING && ro->state != ROLLOUT_PAUSED;
}

/* ---- the record ------------------------------------------------------------------ */

static void note(struct server *s, struct rollout *ro, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void note(struct server *s, struct rollout *ro, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (!ro->events)
		ro->events = json_array();
	json_array_append_new(ro->events, json_pack("{s:I, s:s}", "at_ms",
						    (json_int_t)server_now_ms(s), "what", text));
	/* the newest 200 */
	while (json_array_size(ro->events) > 200)
		json_array_remove(ro->events, 0);
	log_info("rollout %s: %s", ro->name, text);
}

static json_t *stage_pack(const struct rollout_stage *st)
{
	json_t *nodes = json_array();
	for (int i = 0; i < st->nnodes; i++) {
		const struct rollout_node *n = &st->nodes[i];
		json_t *o =
			json_pack("{s:s, s:s, s:I, s:s, s:I, s:I, s:s}", "name", n->name, "state",
				  n->state, "validation_job", (json_int_t)n->vjob, "verdict_before",
				  verdict_name(n->verdict_before), "verdict_job_before",
				  (json_int_t)n->verdict_job_before, "verdict_ms_before",
				  (json_int_t)n->verdict_ms_before, "verdict_reason", n->reason);
		if (n->reference)
			json_object_set(o, "reference", n->reference);
		if (n->equivalence)
			json_object_set(o, "equivalence", n->equivalence);
		json_array_append_new(nodes, o);
	}
	return json_pack("{s:s, s:o, s:I, s:I, s:I, s:i, s:I, s:i}", "want", st->want, "nodes",
			 nodes, "started_ms", (json_int_t)st->started_ms, "soak_until_ms",
			 (json_int_t)st->soak_until_ms, "validation_job", (json_int_t)st->vjob,
			 "validation_tries", st->vtries, "baseline_job", (json_int_t)st->bjob,
			 "baseline_tries", st->btries);
}

static json_t *rollout_pack(const struct rollout *ro)
{
	json_t *stages = json_array();
	for (int i = 0; i < ro->nstages; i++)
		json_array_append_new(stages, stage_pack(&ro->stages[i]));
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:I, s:s, s:I, s:I, s:o, s:s, s:I, s:I}",
		"name", ro->name, "kind", kind_names[ro->kind], "target", ro->target, "state",
		state_names[ro->state], "phase", phase_names[ro->phase], "drain_policy",
		policy_names[ro->policy], "stage", ro->stage, "reason", ro->reason, "soak_s",
		(json_int_t)(ro->soak_ms / 1000), "by", ro->by, "created_ms",
		(json_int_t)ro->created_ms, "ended_ms", (json_int_t)ro->ended_ms, "stages", stages,
		"image_before", ro->image_before, "config_before", (json_int_t)ro->config_before,
		"config_after", (json_int_t)ro->config_after);
	json_object_set_new(o, "events", ro->events ? json_incref(ro->events) : json_array());
	json_object_set_new(o, "reference", json_string(ro->reference[0] ? ro->reference : "tenk"));
	json_object_set_new(o, "tolerance", json_real(ro->tolerance));
	json_object_set_new(o, "step_slack", json_real(ro->step_slack));
	json_object_set_new(o, "baselines",
			    ro->baselines ? json_incref(ro->baselines) : json_object());
	return o;
}

static void save(struct server *s)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < s->rollouts.n; i++)
		json_array_append_new(arr, rollout_pack(s->rollouts.v[i]));
	server_meta_list_save(s, "rollouts", arr);
}

static void rollout_free(struct rollout *ro)
{
	if (!ro)
		return;
	for (int i = 0; i < ro->nstages; i++) {
		for (int k = 0; k < ro->stages[i].nnodes; k++) {
			json_decref(ro->stages[i].nodes[k].reference);
			json_decref(ro->stages[i].nodes[k].equivalence);
		}
		free(ro->stages[i].nodes);
	}
	json_decref(ro->events);
	json_decref(ro->baselines);
	free(ro);
}

static int stage_unpack(json_t *j, struct rollout_stage *st)
{
	const char *want = json_string_value(json_object_get(j, "want"));
	snprintf(st->want, sizeof(st->want), "%s", want ? want : "all");
	st->started_ms = json_integer_value(json_object_get(j, "started_ms"));
	st->soak_until_ms = json_integer_value(json_object_get(j, "soak_until_ms"));
	st->vjob = json_integer_value(json_object_get(j, "validation_job"));
	st->vtries = (int)json_integer_value(json_object_get(j, "validation_tries"));
	st->bjob = json_integer_value(json_object_get(j, "baseline_job"));
	st->btries = (int)json_integer_value(json_object_get(j, "baseline_tries"));
	json_t *nodes = json_object_get(j, "nodes");
	st->nnodes = (int)json_array_size(nodes);
	st->nodes = xcalloc((size_t)st->nnodes + 1, sizeof(*st->nodes));
	size_t i;
	json_t *n;
	json_array_foreach (nodes, i, n) {
		struct rollout_node *rn = &st->nodes[i];
		const char *name = json_string_value(json_object_get(n, "name")),
			   *state = json_string_value(json_object_get(n, "state")),
			   *vb = json_string_value(json_object_get(n, "verdict_before")),
			   *why = json_string_value(json_object_get(n, "verdict_reason"));
		if (!name)
			return -EBADMSG;
		snprintf(rn->name, sizeof(rn->name), "%s", name);
		snprintf(rn->state, sizeof(rn->state), "%s", state ? state : "");
		snprintf(rn->reason, sizeof(rn->reason), "%s", why ? why : "");
		rn->vjob = json_integer_value(json_object_get(n, "validation_job"));
		int v = name_index((const char *const[]){"", "pass", "fail"}, 3, vb);
		rn->verdict_before = v > 0 ? (enum verdict)v : VERDICT_NONE;
		rn->verdict_job_before =
			json_integer_value(json_object_get(n, "verdict_job_before"));
		rn->verdict_ms_before = json_integer_value(json_object_get(n, "verdict_ms_before"));
		rn->reference = json_incref(json_object_get(n, "reference"));
		rn->equivalence = json_incref(json_object_get(n, "equivalence"));
	}
	return 0;
}

static struct rollout *rollout_unpack(json_t *j)
{
	struct rollout *ro = xcalloc(1, sizeof(*ro));
	const char *name = json_string_value(json_object_get(j, "name"));
	int kind = name_index(kind_names, ROLLOUT_KIND_MAX,
			      json_string_value(json_object_get(j, "kind")));
	int state = name_index(state_names, ROLLOUT_STATE_MAX,
			       json_string_value(json_object_get(j, "state")));
	int phase = name_index(phase_names, ROLLOUT_PHASE_MAX,
			       json_string_value(json_object_get(j, "phase")));
	int policy = name_index(policy_names, ROLLOUT_DRAIN_MAX,
				json_string_value(json_object_get(j, "drain_policy")));
	json_t *stages = json_object_get(j, "stages");
	if (!name || kind < 0 || state < 0 || phase < 0 || policy < 0 ||
	    json_array_size(stages) < 1 || json_array_size(stages) > ROLLOUT_MAX_STAGES) {
		rollout_free(ro);
		return NULL;
	}
	snprintf(ro->name, sizeof(ro->name), "%s", name);
	ro->kind = (enum rollout_kind)kind;
	ro->state = (enum rollout_state)state;
	ro->phase = (enum rollout_phase)phase;
	ro->policy = (enum rollout_drain)policy;
	const char *target = json_string_value(json_object_get(j, "target")),
		   *reason = json_string_value(json_object_get(j, "reason")),
		   *by = json_string_value(json_object_get(j, "by")),
		   *before = json_string_value(json_object_get(j, "image_before"));
	snprintf(ro->target, sizeof(ro->target), "%s", target ? target : "");
	snprintf(ro->reason, sizeof(ro->reason), "%s", reason ? reason : "");
	snprintf(ro->by, sizeof(ro->by), "%s", by ? by : "");
	snprintf(ro->image_before, sizeof(ro->image_before), "%s", before ? before : "");
	ro->stage = (int)json_integer_value(json_object_get(j, "stage"));
	ro->soak_ms = json_integer_value(json_object_get(j, "soak_s")) * 1000;
	ro->created_ms = json_integer_value(json_object_get(j, "created_ms"));
	ro->ended_ms = json_integer_value(json_object_get(j, "ended_ms"));
	ro->config_before = json_integer_value(json_object_get(j, "config_before"));
	ro->config_after = json_integer_value(json_object_get(j, "config_after"));
	ro->events = json_incref(json_object_get(j, "events"));
	/* (a rollout of before the equivalence check: none) */
	const char *ref = json_string_value(json_object_get(j, "reference"));
	snprintf(ro->reference, sizeof(ro->reference), "%s",
		 !ref			    ? "none"
		 : strcmp(ref, "tenk") == 0 ? ""
					    : ref);
	ro->tolerance = json_number_value(json_object_get(j, "tolerance"));
	ro->step_slack = json_number_value(json_object_get(j, "step_slack"));
	json_t *bl = json_object_get(j, "baselines");
	ro->baselines = json_is_object(bl) ? json_incref(bl) : json_object();
	size_t i;
	json_t *st;
	json_array_foreach (stages, i, st) {
		ro->nstages++;
		if (stage_unpack(st, &ro->stages[i]) < 0) {
			rollout_free(ro);
			return NULL;
		}
	}
	if (ro->stage < 0 || ro->stage >= ro->nstages) {
		rollout_free(ro);
		return NULL;
	}
	return ro;
}

int rollout_load(struct server *s, struct tk_error *err)
{
	rollout_release(s);
	json_t *arr;
	int r = server_meta_list_load(s, "rollouts", &arr, err);
	if (r < 0)
		return r;
	size_t i;
	json_t *j;
	json_array_foreach (arr, i, j) {
		struct rollout *ro = rollout_unpack(j);
		if (!ro) {
			log_err("a stored rollout does not decode; it is left out");
			continue;
		}
		xgrow(&s->rollouts.v, &s->rollouts.alloc, s->rollouts.n + 1,
		      sizeof(*s->rollouts.v));
		s->rollouts.v[s->rollouts.n++] = ro;
	}
	json_decref(arr);
	return 0;
}

void rollout_release(struct server *s)
{
	for (size_t i = 0; i < s->rollouts.n; i++)
		rollout_free(s->rollouts.v[i]);
	free(s->rollouts.v);
	memset(&s->rollouts, 0, sizeof(s->rollouts));
}

static struct rollout *rollout_find(struct server *s, const char *name)
{
	for (size_t i = 0; i < s->rollouts.n; i++)
		if (strcmp(s->rollouts.v[i]->name, name) == 0)
			return s->rollouts.v[i];
	return NULL;
}

/* ---- stages ---------------------------------------------------------------------- */

/* "2", "10%", "all": 0, or -EINVAL. */
static int want_check(const char *w)
{
	int64_t v;
	if (strcmp(w, "all") == 0)
		return 0;
	size_t len = strlen(w);
	if (len > 1 && w[len - 1] == '%') {
		char num[16];
		if (len - 1 >= sizeof(num))
			return -EINVAL;
		memcpy(num, w, len - 1);
		num[len - 1] = '\0';
		return tk_parse_int64(num, 1, 100, &v);
	}
	return tk_parse_int64(w, 1, MODEL_MAX_NODES, &v);
}

/* The nodes a stage wanting w ends with in all (of total, done so far). */
static int want_total(const char *w, int total, int done)
{
	if (strcmp(w, "all") == 0)
		return total;
	int64_t v = 0;
	size_t len = strlen(w);
	if (w[len - 1] == '%') {
		char num[16];
		snprintf(num, sizeof(num), "%.*s", (int)(len - 1), w);
		tk_parse_int64(num, 1, 100, &v);
		return MIN(total, MAX(done + 1, (int)ceil((double)total * (double)v / 100.0)));
	}
	tk_parse_int64(w, 1, MODEL_MAX_NODES, &v);
	return MIN(total, done + (int)v);
}

static bool in_earlier(const struct rollout *ro, const char *name)
{
	for (int i = 0; i <= ro->stage; i++)
		for (int k = 0; k < ro->stages[i].nnodes; k++)
			if (strcmp(ro->stages[i].nodes[k].name, name) == 0)
				return true;
	return false;
}

/* A node a stage may take, and how many nodes earlier stages took from
 * its fault domain (its whole path: the finest domains there are). */
struct cand {
	struct snode *n;
	int used;
};

/* by that count, then domain, then name: a domain's nodes lie together */
static int cand_cmp(const void *x, const void *y)
{
	const struct cand *a = x, *b = y;
	if (a->used != b->used)
		return a->used < b->used ? -1 : 1;
	int c = strcmp(a->n->rec.inv.domain, b->n->rec.inv.domain);
	return c ? c : strcmp(a->n->rec.inv.name, b->n->rec.inv.name);
}

/* The stage's nodes: as many more as it wants, taken one a fault domain in
 * turn (name order within each), from the nodes up and in no earlier stage;
 * a domain an earlier stage took from goes after those it did not. */
static void pick(struct server *s, struct rollout *ro, int64_t now)
{
	struct state *st = &s->st;
	struct rollout_stage *sg = &ro->stages[ro->stage];
	int total = 0, done = 0;
	for (int i = 0; i < st->nnodes; i++)
		total += !st->nodes[i]->rec.revoked;
	for (int i = 0; i < ro->stage; i++)
		done += ro->stages[i].nnodes;
	int want = want_total(sg->want, total, done) - done;
	struct cand *cand = xcalloc((size_t)st->nnodes + 1, sizeof(*cand));
	int nc = 0;
	struct strbuf out;
	strbuf_init(&out);
	for (int i = 0; i < st->nnodes; i++) {
		struct snode *n = st->nodes[i];
		if (n->rec.revoked || in_earlier(ro, n->rec.inv.name))
			continue;
		if (n->live == NODE_LIVE_UP)
			cand[nc++].n = n;
		else
			strbuf_addf(&out, "%s%s", out.len ? ", " : "", n->rec.inv.name);
	}
	if (out.len && strcmp(sg->want, "all") == 0)
		note(s, ro, "stage %d: left out, not up: %s", ro->stage + 1, out.buf);
	strbuf_release(&out);
	for (int i = 0; i < nc; i++)
		for (int g = 0; g < ro->stage; g++)
			for (int k = 0; k < ro->stages[g].nnodes; k++) {
				const struct snode *e = state_node(st, ro->stages[g].nodes[k].name);
				cand[i].used += e && strcmp(e->rec.inv.domain,
							    cand[i].n->rec.inv.domain) == 0;
			}
	qsort(cand, (size_t)nc, sizeof(*cand), cand_cmp);
	free(sg->nodes); /* (none: a stage is picked once) */
	sg->nnodes = 0;
	sg->nodes = xcalloc((size_t)MAX(want, 0) + 1, sizeof(*sg->nodes));
	bool *taken = xcalloc((size_t)nc + 1, sizeof(*taken));
	while (sg->nnodes < want) {
		/* one from each domain in turn: the first not taken of each */
		const char *last = NULL;
		int got = 0;
		for (int i = 0; i < nc && sg->nnodes < want; i++) {
			const struct snode *n = cand[i].n;
			if (taken[i] || (last && strcmp(n->rec.inv.domain, last) == 0))
				continue;
			last = n->rec.inv.domain;
			taken[i] = true;
			struct rollout_node *rn = &sg->nodes[sg->nnodes++];
			snprintf(rn->name, sizeof(rn->name), "%s", n->rec.inv.name);
			snprintf(rn->state, sizeof(rn->state), "draining");
			rn->verdict_before = n->rec.verdict;
			rn->verdict_job_before = n->rec.verdict_job;
			rn->verdict_ms_before = n->rec.verdict_ms;
			got++;
		}
		if (!got)
			break; /* fewer up than it wants */
	}
	free(taken);
	free(cand);
	sg->started_ms = now;
	struct strbuf names;
	strbuf_init(&names);
	for (int i = 0; i < sg->nnodes; i++)
		strbuf_addf(&names, "%s%s", i ? ", " : "", sg->nodes[i].name);
	if (!sg->nnodes) {
		note(s, ro, "stage %d (%s): no node left to take", ro->stage + 1, sg->want);
		ro->phase = ROLLOUT_FINISHED; /* (the next tick moves on) */
		strbuf_release(&names);
		return;
	}
	note(s, ro, "stage %d (%s): %s", ro->stage + 1, sg->want, names.buf);
	strbuf_release(&names);
	char why[MODEL_REASON_MAX];
	snprintf(why, sizeof(why), "rollout %s, stage %d", ro->name, ro->stage + 1);
	for (int i = 0; i < sg->nnodes; i++) {
		struct snode *n = state_node(st, sg->nodes[i].name);
		if (!n->rec.drained)
			state_drain(st, n, DRAIN_ROLLOUT, why);
		if (ro->policy != ROLLOUT_DRAIN_REQUEUE)
			continue;
		/* stopped now (their grace to checkpoint), and back in the queue */
		for (int k = n->nparts - 1; k >= 0; k--) {
			if (k >= n->nparts)
				continue;
			struct sjob *j = n->parts[k].job;
			struct tk_error err;
			if (!j->job.system && state_requeue(st, j, ro->name, now, &err) < 0)
				log_warn("rollout %s: job %lld: %s", ro->name, (long long)j->job.id,
					 err.text);
		}
	}
	ro->phase = ROLLOUT_DRAINING;
}

/* ---- failing and going back ----------------------------------------------------------- */

/* The nodes of every stage so far take work again where the rollout drained
 * them; an image's verdicts are put back as they were before it. */
static void give_back(struct server *s, struct rollout *ro)
{
	struct state *st = &s->st;
	for (int i = 0; i <= ro->stage && i < ro->nstages; i++) {
		struct rollout_stage *sg = &ro->stages[i];
		for (int k = 0; k < sg->nnodes; k++) {
			struct rollout_node *rn = &sg->nodes[k];
			struct snode *n = state_node(st, rn->name);
			if (!n)
				continue;
			bool own = ro->kind == ROLLOUT_IMAGE && rn->vjob &&
				   n->rec.verdict_job == rn->vjob;
			if (own)
				valid_verdict_put(st, n, rn->verdict_before, rn->verdict_job_before,
						  rn->verdict_ms_before);
			if (n->rec.drained && (n->rec.drain_source == DRAIN_ROLLOUT ||
					       (own && n->rec.drain_source == DRAIN_VALIDATION)))
				state_resume(st, n);
		}
	}
}

static void cancel_validation(struct server *s, struct rollout_stage *sg)
{
	int64_t ids[2] = {sg->vjob, sg->bjob};
	for (int i = 0; i < 2; i++) {
		struct sjob *j = ids[i] ? state_job(&s->st, ids[i]) : NULL;
		struct tk_error err;
		if (j && !job_state_final(j->job.state))
			state_cancel(&s->st, j, server_now_ms(s), &err);
	}
}

static void finish(struct server *s, struct rollout *ro, enum rollout_state to, const char *why)
{
	if (ro->phase < ROLLOUT_FINISHED)
		cancel_validation(s, &ro->stages[ro->stage]);
	if (to != ROLLOUT_DONE)
		give_back(s, ro);
	ro->state = to;
	ro->ended_ms = server_now_ms(s);
	if (why)
		snprintf(ro->reason, sizeof(ro->reason), "%s", why);
	note(s, ro, "%s%s%s", state_names[to], why ? ": " : "", why ? why : "");
	state_want_pass(&s->st);
}

static void fail(struct server *s, struct rollout *ro, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void fail(struct server *s, struct rollout *ro, const char *fmt, ...)
{
	char why[MODEL_REASON_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	char full[MODEL_REASON_MAX + 64];
	snprintf(full, sizeof(full), "stage %d: %s; rolled back", ro->stage + 1, why);
	finish(s, ro, ROLLOUT_FAILED, full);
}

/* ---- the equivalence check ------------------------------------------------------------- */

static bool checks_equivalence(const struct rollout *ro)
{
	return strcmp(ro->reference, "none") != 0;
}

/* The accelerator model a node's reference is held to: its first
 * accelerator's, or "cpu". */
static const char *model_of(const struct snode *n)
{
	return n->rec.inv.naccel > 0 && n->rec.inv.accel[0].model[0] ? n->rec.inv.accel[0].model
								     : "cpu";
}

/* base's arguments and the reference's into args (room for nbase + 2). */
static int ref_args(const struct rollout *ro, const char *const *base, int nbase, const char **args)
{
	int n = 0;
	for (int i = 0; i < nbase; i++)
		args[n++] = base[i];
	if (!checks_equivalence(ro))
		return n;
	if (ro->reference[0]) {
		args[n++] = "--reference-cmd";
		args[n++] = ro->reference;
	} else {
		args[n++] = "--reference";
	}
	return n;
}

/* Whether a node of the stage has a model no baseline was taken for. */
static bool needs_baseline(struct server *s, const struct rollout *ro,
			   const struct rollout_stage *sg)
{
	if (!checks_equivalence(ro))
		return false;
	for (int i = 0; i < sg->nnodes; i++) {
		const struct snode *n = state_node(&s->st, sg->nodes[i].name);
		if (n && !json_object_get(ro->baselines, model_of(n)))
			return true;
	}
	return false;
}

static struct rollout_node *stage_node(struct rollout_stage *sg, const char *name)
{
	for (int i = 0; i < sg->nnodes; i++)
		if (strcmp(sg->nodes[i].name, name) == 0)
			return &sg->nodes[i];
	return NULL;
}

void rollout_reference(struct server *s, struct sjob *j, const char *node, json_t *record)
{
	for (size_t i = 0; i < s->rollouts.n; i++) {
		struct rollout *ro = s->rollouts.v[i];
		struct rollout_stage *sg = &ro->stages[ro->stage];
		bool base = sg->bjob == j->job.id, after = sg->vjob == j->job.id;
		if (ended(ro) || (!base && !after))
			continue;
		struct rollout_node *rn = stage_node(sg, node);
		struct snode *n = state_node(&s->st, node);
		struct svalid *v = j->valid;
		if (!rn || !n || !v || !json_is_object(record))
			return;
		for (int k = 0; k < v->nnodes; k++)
			if (v->nodes[k] == n && v->stack_gen[k] != n->stack_gen) {
				note(s, ro,
				     "node %s: its stack changed while its reference ran: not kept",
				     node);
				return;
			}
		struct reference r;
		struct tk_error err;
		json_t *keep = NULL;
		struct node_stack want;
		if (base && ro->kind == ROLLOUT_STACK &&
		    node_stack_label_parse(ro->target, &want, &err) == 0 && n->rec.inv.has_stack &&
		    node_stack_has(&n->rec.inv.stack, &want)) {
			/* not the old stack: another node's is taken */
			keep = json_pack("{s:s++}", "error", "it reports ", ro->target,
					 " already: its reference is not the old stack's (put "
					 "the old one back, or leave it out of the rollout)");
		} else if (json_object_get(record, "error")) {
			keep = json_incref(record);
		} else if (reference_unpack(record, &r, &err) < 0) {
			keep = json_pack("{s:s++}", "error", "its record: ", err.text);
		} else {
			const char *model = model_of(n);
			if (!base) {
				keep = json_incref(record);
			} else if (!json_object_get(ro->baselines, model)) {
				char dig[17];
				reference_digest(&r, dig);
				json_object_set_new(ro->baselines, model,
						    json_pack("{s:s, s:I, s:s, s:O}", "node", node,
							      "job", (json_int_t)j->job.id,
							      "digest", dig, "record", record));
				note(s, ro,
				     "the reference on the old stack (%s, node %s): %d steps, loss "
				     "%.6g -> %.6g, %d parameters, digest %s",
				     model, node, r.nloss, r.loss[0], r.loss[r.nloss - 1],
				     r.nparams, dig);
			}
			reference_release(&r);
		}
		if (keep) {
			json_decref(rn->reference);
			rn->reference = keep;
		}
		save(s);
		return;
	}
}

/* The stage's nodes' references on the new stack against the old's: true
 * when every one computes the same (within the tolerance, its steps within
 * the slack); else the stage fails, naming the node and where it differs. */
static bool equivalent(struct server *s, struct rollout *ro, struct rollout_stage *sg)
{
	int same = 0;
	double worst = 0, slowest = 0;
	for (int i = 0; i < sg->nnodes; i++) {
		struct rollout_node *rn = &sg->nodes[i];
		struct snode *n = state_node(&s->st, rn->name);
		const char *model = n ? model_of(n) : "cpu";
		json_t *b = json_object_get(ro->baselines, model);
		const char *error = json_string_value(json_object_get(rn->reference, "error"));
		struct reference before, after;
		struct tk_error err;
		char why[MODEL_REASON_MAX];
		if (!rn->reference || error)
			snprintf(why, sizeof(why), "%s",
				 error ? error : "it sent no reference record");
		else if (!b || reference_unpack(json_object_get(b, "record"), &before, &err) < 0)
			snprintf(why, sizeof(why), "no reference of the old stack for %s", model);
		else if (reference_unpack(rn->reference, &after, &err) < 0)
			snprintf(why, sizeof(why), "its record: %.200s", err.text),
				reference_release(&before);
		else
			why[0] = '\0';
		if (why[0]) {
			snprintf(rn->reason, sizeof(rn->reason), "reference: %.200s", why);
			snprintf(rn->state, sizeof(rn->state), "failed");
			fail(s, ro, "node %s: the reference on the new stack: %s", rn->name, why);
			return false;
		}
		/* tenk's own steps are its own code on the processor: their time
		 * says nothing of the stack (and is noise, at microseconds) */
		struct ref_compare c;
		reference_compare(&before, &after, ro->tolerance,
				  ro->reference[0] ? ro->step_slack : 0, &c);
		char da[17], db[17];
		reference_digest(&before, da);
		reference_digest(&after, db);
		json_t *eq = reference_compare_pack(&c);
		json_object_set_new(eq, "digest_before", json_string(da));
		json_object_set_new(eq, "digest_after", json_string(db));
		json_object_set_new(eq, "baseline_node", json_incref(json_object_get(b, "node")));
		json_object_set_new(eq, "steps", json_integer(after.nloss));
		json_object_set_new(eq, "params", json_integer(after.nparams));
		json_object_set_new(eq, "loss_last_before",
				    json_real(before.loss[before.nloss - 1]));
		json_object_set_new(eq, "loss_last_after", json_real(after.loss[after.nloss - 1]));
		json_object_set_new(eq, "step_s_before", json_real(before.step_s));
		json_object_set_new(eq, "step_s_after", json_real(after.step_s));
		json_decref(rn->equivalence);
		rn->equivalence = eq;
		/* its numbers are in the comparison now */
		json_decref(rn->reference);
		rn->reference = NULL;
		reference_release(&before);
		reference_release(&after);
		if (c.verdict != REF_SAME && c.verdict != REF_WITHIN) {
			snprintf(rn->reason, sizeof(rn->reason), "reference: %.200s", c.text);
			snprintf(rn->state, sizeof(rn->state), "failed");
			fail(s, ro, "node %s %s the old stack: %s", rn->name,
			     c.verdict == REF_SLOWER ? "is slower than" : "does not compute as",
			     c.text);
			return false;
		}
		same += c.verdict == REF_SAME;
		worst = fmax(worst, fmax(c.loss_diff, c.param_diff));
		slowest = fmax(slowest, c.step_ratio);
	}
	if (same == sg->nnodes)
		note(s, ro,
		     "stage %d: the reference on the new stack is the old one's bit for bit on "
		     "every node%s%.2f%s",
		     ro->stage + 1, slowest > 0 ? " (steps " : "", slowest > 0 ? slowest : 0.0,
		     slowest > 0 ? "x the old at most)" : "");
	else
		note(s, ro,
		     "stage %d: the reference on the new stack is within %.3g of the old one "
		     "on every node (%d of %d bit for bit; largest difference %.3g)",
		     ro->stage + 1, ro->tolerance, same, sg->nnodes, worst);
	return true;
}

static void start_baseline(struct server *s, struct rollout *ro, struct snode **nodes, int n,
			   int64_t now)
{
	struct rollout_stage *sg = &ro->stages[ro->stage];
	static const char *const base[] = {"--quick", "--layers", "system"};
	const char *args[8];
	int nargs = ref_args(ro, base, 3, args);
	/* an image's old stack is the default image now (or none) */
	const char *image = ro->kind == ROLLOUT_IMAGE && s->config.n
				    ? json_string_value(json_object_get(
					      s->config.v[s->config.n - 1].config, "default_image"))
				    : NULL;
	struct sjob *j;
	struct tk_error err;
	char owner[MODEL_NAME_MAX];
	snprintf(owner, sizeof(owner), "rollout:%.40s", ro->name);
	if (valid_create(&s->st, nodes, n, args, nargs, image, owner, now, &j, &err) < 0) {
		note(s, ro, "stage %d: cannot take the reference yet: %s", ro->stage + 1, err.text);
		return;
	}
	sg->bjob = j->job.id;
	sg->btries++;
	struct strbuf names;
	strbuf_init(&names);
	for (int k = 0; k < n; k++) {
		struct rollout_node *rn = stage_node(sg, nodes[k]->rec.inv.name);
		if (!rn)
			continue;
		snprintf(rn->state, sizeof(rn->state), "baseline");
		json_decref(rn->reference);
		rn->reference = NULL;
		strbuf_addf(&names, "%s%s", k ? ", " : "", rn->name);
	}
	note(s, ro, "stage %d: the reference on the old stack%s%s, validation job %lld on %s",
	     ro->stage + 1, image ? " in " : "", image ? image : "", (long long)j->job.id,
	     names.buf);
	strbuf_release(&names);
}

/* What follows the drain, or the baseline. */
static void after_baseline(struct rollout *ro, struct rollout_stage *sg)
{
	ro->phase = ro->kind == ROLLOUT_STACK ? ROLLOUT_WAIT_STACK : ROLLOUT_VALIDATING;
	sg->vjob = 0;
	for (int i = 0; i < sg->nnodes; i++)
		snprintf(sg->nodes[i].state, sizeof(sg->nodes[i].state), "%s",
			 ro->kind == ROLLOUT_STACK ? "waiting_for_stack" : "drained");
}

/* ---- the steps -------------------------------------------------------------------- */

static void start_validation(struct server *s, struct rollout *ro, struct snode **nodes, int n,
			     int64_t now)
{
	struct state *st = &s->st;
	struct rollout_stage *sg = &ro->stages[ro->stage];
	const char *vargs[MODEL_MAX_VALIDATION_ARGS], *args[MODEL_MAX_VALIDATION_ARGS + 2];
	for (int i = 0; i < st->sched.nvalidation_args; i++)
		vargs[i] = st->sched.validation_args[i];
	int nargs = ref_args(ro, vargs, st->sched.nvalidation_args, args);
	struct sjob *j;
	struct tk_error err;
	char owner[MODEL_NAME_MAX];
	snprintf(owner, sizeof(owner), "rollout:%.40s", ro->name);
	if (valid_create(st, nodes, n, args, nargs, ro->kind == ROLLOUT_IMAGE ? ro->target : NULL,
			 owner, now, &j, &err) < 0) {
		note(s, ro, "stage %d: cannot start a validation yet: %s", ro->stage + 1, err.text);
		return;
	}
	sg->vjob = j->job.id;
	sg->vtries++;
	j->valid->image_on_trial = ro->kind == ROLLOUT_IMAGE;
	for (int i = 0; i < sg->nnodes; i++)
		for (int k = 0; k < n; k++)
			if (strcmp(sg->nodes[i].name, nodes[k]->rec.inv.name) == 0) {
				sg->nodes[i].vjob = j->job.id;
				json_decref(sg->nodes[i].reference);
				sg->nodes[i].reference = NULL;
				snprintf(sg->nodes[i].state, sizeof(sg->nodes[i].state),
					 "validating");
			}
	note(s, ro, "stage %d: validation job %lld%s%s", ro->stage + 1, (long long)j->job.id,
	     ro->kind == ROLLOUT_IMAGE ? " in " : "", ro->kind == ROLLOUT_IMAGE ? ro->target : "");
	ro->phase = ROLLOUT_VALIDATING;
}

/* A node of the stage that can no longer go on (down; drained for a
 * fault, as a lemon, or by a failed validation other than the stage's own,
 * whose verdict the stage reads itself): why, or NULL. */
static const char *node_trouble(const struct snode *n, int64_t vjob, char *buf, size_t len)
{
	if (!n)
		return "is gone";
	if (n->live == NODE_LIVE_DOWN || n->live == NODE_LIVE_UNREACHABLE)
		return "went down";
	enum drain_source d = n->rec.drain_source;
	if (n->rec.drained && (d == DRAIN_FAULT || d == DRAIN_LEMON ||
			       (d == DRAIN_VALIDATION && (!vjob || n->rec.verdict_job != vjob)))) {
		snprintf(buf, len, "was drained (%s: %.200s)",
			 drain_source_name(n->rec.drain_source), n->rec.drain_reason);
		return buf;
	}
	return NULL;
}

static void step(struct server *s, struct rollout *ro, int64_t now)
{
	struct state *st = &s->st;
	struct rollout_stage *sg = &ro->stages[ro->stage];
	char buf[MODEL_REASON_MAX];
	if (ro->phase == ROLLOUT_PICK) {
		pick(s, ro, now);
		save(s);
		return;
	}
	if (ro->phase == ROLLOUT_FINISHED) {
		if (ro->stage + 1 < ro->nstages) {
			ro->stage++;
			ro->phase = ROLLOUT_PICK;
			save(s);
			return;
		}
		int proven = 0;
		for (int i = 0; i < ro->nstages; i++)
			proven += ro->stages[i].nnodes;
		if (!proven) {
			fail(s, ro, "no node was up to prove it on");
			save(s);
			return;
		}
		if (ro->kind == ROLLOUT_IMAGE) {
			/* every stage proved it: the cluster's default from now on */
			const struct config_version *was = &s->config.v[s->config.n - 1];
			ro->config_before = was->version;
			const char *old =
				json_string_value(json_object_get(was->config, "default_image"));
			snprintf(ro->image_before, sizeof(ro->image_before), "%s", old ? old : "");
			json_t *cfg = json_deep_copy(was->config), *ans = NULL;
			json_object_set_new(cfg, "default_image", json_string(ro->target));
			char who[MODEL_NAME_MAX], why[128];
			snprintf(who, sizeof(who), "rollout:%.40s", ro->name);
			snprintf(why, sizeof(why), "rollout %s: every stage passed", ro->name);
			struct tk_error err;
			if (config_apply(s, cfg, who, why, &ans, &err) < 0) {
				fail(s, ro, "the default image could not be set: %s", err.text);
				save(s);
				return;
			}
			ro->config_after = json_integer_value(json_object_get(ans, "version"));
			json_decref(ans);
		}
		finish(s, ro, ROLLOUT_DONE, NULL);
		save(s);
		return;
	}
	/* every phase between: a node that went down or was drained for a
	 * fault fails the stage */
	for (int i = 0; i < sg->nnodes; i++) {
		struct snode *n = state_node(st, sg->nodes[i].name);
		const char *t = node_trouble(n, sg->vjob, buf, sizeof(buf));
		if (t) {
			fail(s, ro, "node %s %s", sg->nodes[i].name, t);
			save(s);
			return;
		}
	}
	bool changed = false;
	if (ro->phase == ROLLOUT_DRAINING) {
		bool empty = true, base = needs_baseline(s, ro, sg);
		for (int i = 0; i < sg->nnodes; i++) {
			struct snode *n = state_node(st, sg->nodes[i].name);
			bool e = n->nparts == 0 && !n->held_by;
			empty &= e;
			if (e && strcmp(sg->nodes[i].state, "draining") == 0) {
				/* a stack is installed once the old one's reference is
				 * taken */
				snprintf(sg->nodes[i].state, sizeof(sg->nodes[i].state), "%s",
					 ro->kind == ROLLOUT_STACK && !base ? "waiting_for_stack"
									    : "drained");
				changed = true;
			}
		}
		if (empty) {
			if (base) {
				ro->phase = ROLLOUT_BASELINE;
				sg->bjob = 0;
			} else {
				after_baseline(ro, sg);
			}
			note(s, ro, "stage %d: its nodes are empty%s", ro->stage + 1,
			     base			 ? "; the reference on the old stack first"
			     : ro->kind == ROLLOUT_STACK ? "; waiting for them to report the stack"
							 : "");
			changed = true;
		}
	} else if (ro->phase == ROLLOUT_BASELINE) {
		struct sjob *j = sg->bjob ? state_job(st, sg->bjob) : NULL;
		if (!j || job_state_final(j->job.state)) {
			struct snode **lack = xcalloc((size_t)sg->nnodes + 1, sizeof(*lack));
			int nl = 0;
			bool free_all = true;
			const struct rollout_node *erred = NULL;
			for (int i = 0; i < sg->nnodes; i++) {
				struct snode *n = state_node(st, sg->nodes[i].name);
				if (json_object_get(ro->baselines, model_of(n)))
					continue;
				lack[nl++] = n;
				free_all &= !n->held_by;
				if (!erred && json_object_get(sg->nodes[i].reference, "error"))
					erred = &sg->nodes[i];
			}
			if (!nl) {
				note(s, ro, "stage %d: the old stack's reference is taken%s",
				     ro->stage + 1,
				     ro->kind == ROLLOUT_STACK
					     ? "; waiting for its nodes to report "
					       "the stack"
					     : "");
				after_baseline(ro, sg);
			} else if (erred || sg->btries >= ROLLOUT_VALID_TRIES) {
				if (erred)
					fail(s, ro,
					     "no reference on the old stack: node %s: %.300s",
					     erred->name,
					     json_string_value(
						     json_object_get(erred->reference, "error")));
				else
					fail(s, ro,
					     "no reference on the old stack for %s: validation job "
					     "%lld ended without one, %d times",
					     model_of(lack[0]), (long long)sg->bjob, sg->btries);
				free(lack);
				save(s);
				return;
			} else if (free_all) {
				start_baseline(s, ro, lack, nl, now);
			}
			free(lack);
			changed = true;
		}
	} else if (ro->phase == ROLLOUT_WAIT_STACK) {
		bool all = true;
		struct node_stack want;
		struct tk_error err;
		node_stack_label_parse(ro->target, &want, &err); /* (checked at its creation) */
		for (int i = 0; i < sg->nnodes; i++) {
			struct snode *n = state_node(st, sg->nodes[i].name);
			bool has = n->rec.inv.has_stack && node_stack_has(&n->rec.inv.stack, &want);
			all &= has;
			if (has && strcmp(sg->nodes[i].state, "waiting_for_stack") == 0) {
				snprintf(sg->nodes[i].state, sizeof(sg->nodes[i].state),
					 "stack_ready");
				changed = true;
			}
		}
		if (all) {
			note(s, ro, "stage %d: every node reports %s", ro->stage + 1, ro->target);
			ro->phase = ROLLOUT_VALIDATING;
			sg->vjob = 0;
			changed = true;
		}
	} else if (ro->phase == ROLLOUT_VALIDATING) {
		struct sjob *j = sg->vjob ? state_job(st, sg->vjob) : NULL;
		if (!sg->vjob || (j && job_state_final(j->job.state)) || !j) {
			/* its verdicts, where the run gave them */
			int passed = 0;
			for (int i = 0; i < sg->nnodes && sg->vjob; i++) {
				struct snode *n = state_node(st, sg->nodes[i].name);
				if (n->rec.verdict_job != sg->vjob)
					continue;
				if (n->rec.verdict == VERDICT_FAIL) {
					snprintf(sg->nodes[i].reason, sizeof(sg->nodes[i].reason),
						 "%.24s%s%.200s", n->rec.verdict_layer,
						 n->rec.verdict_layer[0] ? ": " : "",
						 n->rec.verdict_reason);
					snprintf(sg->nodes[i].state, sizeof(sg->nodes[i].state),
						 "failed");
					fail(s, ro, "node %s failed validation job %lld: %s",
					     sg->nodes[i].name, (long long)sg->vjob,
					     sg->nodes[i].reason);
					save(s);
					return;
				}
				passed += n->rec.verdict == VERDICT_PASS;
			}
			if (sg->vjob && passed == sg->nnodes && checks_equivalence(ro) &&
			    !equivalent(s, ro, sg)) {
				save(s);
				return;
			}
			if (sg->vjob && passed == sg->nnodes) {
				/* proven: its nodes take work, watched for the soak */
				for (int i = 0; i < sg->nnodes; i++) {
					struct snode *n = state_node(st, sg->nodes[i].name);
					snprintf(sg->nodes[i].state, sizeof(sg->nodes[i].state),
						 "soaking");
					if (n->rec.drained && n->rec.drain_source == DRAIN_ROLLOUT)
						state_resume(st, n);
				}
				sg->soak_until_ms = now + ro->soak_ms;
				ro->phase = ROLLOUT_SOAKING;
				note(s, ro,
				     "stage %d: validation job %lld passed on every node; soaking "
				     "%llds",
				     ro->stage + 1, (long long)sg->vjob,
				     (long long)(ro->soak_ms / 1000));
				save(s);
				return;
			}
			if (sg->vjob && sg->vtries >= ROLLOUT_VALID_TRIES) {
				fail(s, ro,
				     "validation job %lld ended without a verdict on every node, "
				     "%d times",
				     (long long)sg->vjob, sg->vtries);
				save(s);
				return;
			}
			struct snode **nodes = xcalloc((size_t)sg->nnodes, sizeof(*nodes));
			bool free_all = true;
			for (int i = 0; i < sg->nnodes; i++) {
				nodes[i] = state_node(st, sg->nodes[i].name);
				free_all &= !nodes[i]->held_by;
			}
			if (free_all)
				start_validation(s, ro, nodes, sg->nnodes, now);
			free(nodes);
			changed = true;
		}
	} else if (ro->phase == ROLLOUT_SOAKING) {
		for (int i = 0; i < sg->nnodes; i++) {
			struct snode *n = state_node(st, sg->nodes[i].name);
			if (n->rec.verdict == VERDICT_FAIL) {
				fail(s, ro,
				     "node %s failed validation job %lld while it soaked: %s",
				     sg->nodes[i].name, (long long)n->rec.verdict_job,
				     n->rec.verdict_reason);
				save(s);
				return;
			}
		}
		if (now >= sg->soak_until_ms) {
			for (int i = 0; i < sg->nnodes; i++)
				snprintf(sg->nodes[i].state, sizeof(sg->nodes[i].state), "done");
			note(s, ro, "stage %d: soaked with no fault", ro->stage + 1);
			ro->phase = ROLLOUT_FINISHED;
			changed = true;
		}
	}
	if (changed)
		save(s);
}

void rollout_tick(struct server *s, int64_t now)
{
	for (size_t i = 0; i < s->rollouts.n; i++) {
		struct rollout *ro = s->rollouts.v[i];
		/* a few steps a tick: a stage that needs no waiting moves on */
		for (int k = 0; k < 4 && ro->state == ROLLOUT_RUNNING; k++) {
			enum rollout_phase was = ro->phase;
			int stage = ro->stage;
			step(s, ro, now);
			if (ro->phase == was && ro->stage == stage)
				break;
		}
	}
}

/* ---- the API ---------------------------------------------------------------------- */

static void reply_rollout(struct request *r, const struct rollout *ro)
{
	reply_json(r, 200, rollout_pack(ro));
}

/* POST /v1/rollouts {"name", "image" | "stack", "stages": ["2", "50%",
 * "all"], "soak_s", "drain_policy": "wait" | "requeue", "reference":
 * "tenk" | "none" | COMMAND, "tolerance": 0..1, "step_slack": 0..10} */
void rollout_h_create(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	const char *name = json_string_value(json_object_get(body, "name")),
		   *image = json_string_value(json_object_get(body, "image")),
		   *stack = json_string_value(json_object_get(body, "stack")),
		   *policy = json_string_value(json_object_get(body, "drain_policy"));
	json_t *stages = json_object_get(body, "stages"), *soak = json_object_get(body, "soak_s");
	struct tk_error err;
	char reference[1024] = "";
	double tolerance = 0, slack = 0.1;
	if (mj_strbuf(body, "reference", false, true, reference, sizeof(reference), &err) < 0 ||
	    mj_num(body, "tolerance", false, 0, 1, 0, &tolerance, &err) < 0 ||
	    mj_num(body, "step_slack", false, 0, 10, 0.1, &slack, &err) < 0) {
		reply_error(r, 400,
			    "%s (reference: \"tenk\", \"none\" or a command; tolerance: how far "
			    "the reference's numbers may differ, relative, 0 for bit for bit; "
			    "step_slack: how much slower its steps may be, 0.1 for 10%%)",
			    err.text);
		return;
	}
	if (!name || !model_name_valid(name) || strlen(name) > 40) {
		reply_error(r, 400,
			    "name: a rollout's name, up to 40 letters, digits, '.', '_', '-'");
		return;
	}
	if (rollout_find(s, name)) {
		reply_error(r, 409, "rollout %s exists; name this one otherwise", name);
		return;
	}
	for (size_t i = 0; i < s->rollouts.n; i++)
		if (!ended(s->rollouts.v[i])) {
			reply_error_with(
				r, 409, json_pack("{s:s}", "reason", "busy"),
				"rollout %s is %s: one rollout at a time (tenk rollout abort "
				"%s, or wait for it)",
				s->rollouts.v[i]->name, state_names[s->rollouts.v[i]->state],
				s->rollouts.v[i]->name);
			return;
		}
	if (!image == !stack) {
		reply_error(r, 400,
			    "image (the next default image) or stack (FIELD=VALUE,...): "
			    "give one");
		return;
	}
	if (image && !model_image_valid(image)) {
		reply_error(r, 400, "image: \"%.200s\" is not an image reference", image);
		return;
	}
	struct node_stack want;
	if (stack && node_stack_label_parse(stack, &want, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	int pol = policy ? name_index(policy_names, ROLLOUT_DRAIN_MAX, policy) : ROLLOUT_DRAIN_WAIT;
	if (pol < 0) {
		reply_error(r, 400,
			    "drain_policy: \"wait\" (jobs finish) or \"requeue\" (stopped "
			    "with their grace, requeued from their checkpoints)");
		return;
	}
	if ((soak && (!json_is_integer(soak) || json_integer_value(soak) < 0 ||
		      json_integer_value(soak) > 30LL * 86400)) ||
	    (stages && (!json_is_array(stages) || json_array_size(stages) < 1 ||
			json_array_size(stages) > ROLLOUT_MAX_STAGES))) {
		reply_error(r, 400,
			    "soak_s: seconds, up to 30 days; stages: 1 to %d of \"N\", "
			    "\"P%%\" or \"all\"",
			    ROLLOUT_MAX_STAGES);
		return;
	}
	struct rollout *ro = xcalloc(1, sizeof(*ro));
	size_t i;
	json_t *w;
	json_array_foreach (stages, i, w) {
		const char *t = json_string_value(w);
		if (!t || strlen(t) >= sizeof(ro->stages[0].want) || want_check(t) < 0) {
			reply_error(r, 400,
				    "stages[%zu]: a count of nodes (2), a share of the fleet "
				    "(10%%) or \"all\"",
				    i);
			rollout_free(ro);
			return;
		}
		snprintf(ro->stages[ro->nstages++].want, sizeof(ro->stages[0].want), "%s", t);
	}
	if (!ro->nstages)
		snprintf(ro->stages[ro->nstages++].want, sizeof(ro->stages[0].want), "all");
	if (strcmp(ro->stages[ro->nstages - 1].want, "all") != 0 &&
	    ro->nstages < ROLLOUT_MAX_STAGES)
		snprintf(ro->stages[ro->nstages++].want, sizeof(ro->stages[0].want), "all");
	snprintf(ro->name, sizeof(ro->name), "%s", name);
	ro->kind = image ? ROLLOUT_IMAGE : ROLLOUT_STACK;
	snprintf(ro->target, sizeof(ro->target), "%s", image ? image : stack);
	ro->policy = (enum rollout_drain)pol;
	ro->soak_ms = (soak ? json_integer_value(soak) : 3600) * 1000;
	snprintf(ro->reference, sizeof(ro->reference), "%s",
		 strcmp(reference, "tenk") == 0 ? "" : reference);
	ro->tolerance = tolerance;
	ro->step_slack = slack;
	ro->baselines = json_object();
	ro->state = ROLLOUT_RUNNING;
	ro->phase = ROLLOUT_PICK;
	snprintf(ro->by, sizeof(ro->by), "%s", r->user);
	ro->created_ms = server_now_ms(s);
	/* the ended ones kept: the newest */
	for (size_t k = 0; s->rollouts.n >= ROLLOUT_KEEP && k < s->rollouts.n; k++)
		if (ended(s->rollouts.v[k])) {
			rollout_free(s->rollouts.v[k]);
			memmove(&s->rollouts.v[k], &s->rollouts.v[k + 1],
				(s->rollouts.n - k - 1) * sizeof(*s->rollouts.v));
			s->rollouts.n--;
			break;
		}
	xgrow(&s->rollouts.v, &s->rollouts.alloc, s->rollouts.n + 1, sizeof(*s->rollouts.v));
	s->rollouts.v[s->rollouts.n++] = ro;
	char eq[320], within[48] = "bit for bit";
	if (ro->tolerance > 0)
		snprintf(within, sizeof(within), "within %.3g", ro->tolerance);
	if (!checks_equivalence(ro))
		snprintf(eq, sizeof(eq), "no equivalence check");
	else if (!ro->reference[0])
		snprintf(eq, sizeof(eq), "reference tenk's own, %s", within);
	else
		snprintf(eq, sizeof(eq), "reference %.200s, %s, steps %.0f%% slower at most",
			 ro->reference, within, ro->step_slack * 100);
	note(s, ro, "created by %s: %s %s, stages %d, soak %llds, drain %s; %s", ro->by,
	     kind_names[ro->kind], ro->target, ro->nstages, (long long)(ro->soak_ms / 1000),
	     policy_names[ro->policy], eq);
	rollout_tick(s, ro->created_ms);
	save(s);
	reply_rollout(r, ro);
}

/* GET /v1/rollouts */
void rollout_h_list(struct request *r, const char *param, json_t *body)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < r->s->rollouts.n; i++)
		json_array_append_new(arr, rollout_pack(r->s->rollouts.v[i]));
	reply_json(r, 200, json_pack("{s:o}", "rollouts", arr));
}

static struct rollout *named(struct request *r, const char *param)
{
	struct rollout *ro = rollout_find(r->s, param);
	if (!ro)
		reply_error(r, 404, "no rollout %.64s (tenk rollout status lists them)", param);
	return ro;
}

/* GET /v1/rollouts/{name} */
void rollout_h_show(struct request *r, const char *param, json_t *body)
{
	struct rollout *ro = named(r, param);
	if (ro)
		reply_rollout(r, ro);
}

/* POST /v1/rollouts/{name}/{pause,resume,abort,rollback} */
static void act(struct request *r, const char *param, const char *what)
{
	struct server *s = r->s;
	struct rollout *ro = named(r, param);
	if (!ro)
		return;
	bool rollback = strcmp(what, "rollback") == 0;
	if (strcmp(what, "pause") == 0 || strcmp(what, "resume") == 0) {
		enum rollout_state from = what[0] == 'p' ? ROLLOUT_RUNNING : ROLLOUT_PAUSED;
		if (ro->state != from) {
			reply_error(r, 409, "rollout %s is %s: only a %s one can be %sd", ro->name,
				    state_names[ro->state], state_names[from], what);
			return;
		}
		ro->state = what[0] == 'p' ? ROLLOUT_PAUSED : ROLLOUT_RUNNING;
		note(s, ro, "%sd by %s", what, r->user);
		if (ro->state == ROLLOUT_RUNNING)
			rollout_tick(s, server_now_ms(s));
	} else if (!ended(ro)) {
		char why[128];
		snprintf(why, sizeof(why), "%s by %s", rollback ? "rolled back" : "aborted",
			 r->user);
		finish(s, ro, rollback ? ROLLOUT_ROLLED_BACK : ROLLOUT_ABORTED, why);
	} else if (rollback && ro->state == ROLLOUT_DONE) {
		if (ro->kind == ROLLOUT_IMAGE) {
			/* the default image it set goes back; the rest of the
			 * configuration as it is now */
			json_t *cfg = json_deep_copy(s->config.v[s->config.n - 1].config),
			       *ans = NULL;
			if (ro->image_before[0])
				json_object_set_new(cfg, "default_image",
						    json_string(ro->image_before));
			else
				json_object_del(cfg, "default_image");
			char who[MODEL_NAME_MAX], why[128];
			snprintf(who, sizeof(who), "%s", r->user);
			snprintf(why, sizeof(why), "rollout %s rolled back", ro->name);
			struct tk_error err;
			if (config_apply(s, cfg, who, why, &ans, &err) < 0) {
				reply_error(r, 409,
					    "rollout %s: the default image cannot go back: %s",
					    ro->name, err.text);
				return;
			}
			json_decref(ans);
		}
		ro->state = ROLLOUT_ROLLED_BACK;
		ro->ended_ms = server_now_ms(s);
		snprintf(ro->reason, sizeof(ro->reason), "rolled back by %s after it was done",
			 r->user);
		note(s, ro, "%s%s", ro->reason,
		     ro->kind == ROLLOUT_STACK ? " (a stack goes back by the operator's own means; "
						 "tenk re-validates each node that changes)"
					       : "");
	} else {
		reply_error(r, 409, "rollout %s is %s already", ro->name, state_names[ro->state]);
		return;
	}
	save(s);
	reply_rollout(r, ro);
}

void rollout_h_pause(struct request *r, const char *param, json_t *body)
{
	act(r, param, "pause");
}

void rollout_h_resume(struct request *r, const char *param, json_t *body)
{
	act(r, param, "resume");
}

void rollout_h_abort(struct request *r, const char *param, json_t *body)
{
	act(r, param, "abort");
}

void rollout_h_rollback(struct request *r, const char *param, json_t *body)
{
	act(r, param, "rollback");
}
