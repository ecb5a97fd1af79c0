/*
 * Accounting: one record per attempt, its fields named after sacct's, made
 * from the jobs' records (each attempt keeps its nodes, devices and their
 * model, the CPU time and peak memory of its cgroups, its accelerators'
 * energy and busy time): GET /v1/accounting (tenk acct), and the sums of
 * GET /v1/usage (tenk usage, sreport's habit). Cost is GPU-hours times the
 * catalogue's price of the model, plus allocated CPUs and memory at the
 * configured rates.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* What an attempt is, as sacct would say it. */
static const char *attempt_state(const struct sjob *j, const struct attempt *a)
{
	const struct job *job = &j->job;
	bool last = a->number == job->nattempts;
	if (!a->ended)
		return job->state == JOB_STARTING ? "STARTING" : "RUNNING";
	if (last && job_state_final(job->state))
		return job_state_name(job->state);
	switch (a->end) {
	case ATTEMPT_END_PREEMPTED:
		return "PREEMPTED";
	case ATTEMPT_END_NODE_LOST:
		return "NODE_FAIL";
	default:
		return "REQUEUED";
	}
}

/* The attempt's exit: its first task to fail, by when it ended (not by
 * rank: the others of a gang are stopped after it, by a signal); the
 * job's own code for its last attempt. */
static void attempt_exit(const struct sjob *j, const struct attempt *a, int *code, int *sig)
{
	*code = *sig = 0;
	const struct task_status *first = NULL;
	for (int t = 0; t < a->ntasks; t++) {
		const struct task_status *x = &a->tasks[t];
		if (x->state == TASK_EXITED && (x->exit_code != 0 || x->signal != 0) &&
		    (!first || x->end_ms < first->end_ms))
			first = x;
	}
	if (first) {
		*code = first->exit_code;
		*sig = first->signal;
	}
	if (a->number == j->job.nattempts && job_state_final(j->job.state) &&
	    j->job.exit_code > 0 && j->job.exit_code != *code) {
		*code = j->job.exit_code;
		*sig = 0;
	}
}

struct acct {
	double hours;	   /* wall time */
	double gpus;	   /* allocated, fractions as such */
	double gpu_hours;  /* gpus x hours */
	double busy_hours; /* utilization x time, from telemetry */
	double energy_j;   /* -1: unknown */
	double cost;	   /* accelerators, CPUs, memory */
	char model[MODEL_NAME_MAX];
	struct goodput good; /* where its time went (goodput.c) */
	double good_hours;   /* gpus x its kept training */
	double spare_hours;  /* its job's spares held idle (in gpu_hours and cost) */
};

static void figures(struct server *s, const struct sjob *j, const struct attempt *a, int64_t now,
		    struct acct *f)
{
	memset(f, 0, sizeof(*f));
	f->energy_j = -1;
	int64_t end = a->ended ? a->end_ms : now;
	f->hours = a->start_ms && end > a->start_ms ? (double)(end - a->start_ms) / 3.6e6 : 0;
	for (int i = 0; i < a->nnodes; i++) {
		const struct attempt_node *n = &a->nodes[i];
		double g = n->ndev * (n->milli / (double)MODEL_MILLI);
		f->gpus += g;
		const struct catalogue_entry *e =
			n->model[0] ? catalogue_find(&s->cat, n->model) : NULL;
		f->cost += g * f->hours * (e ? e->price_per_hour : 0);
		f->busy_hours += (double)n->gpu_busy_ms / 3.6e6;
		if (n->energy_mj >= 0)
			f->energy_j = MAX(f->energy_j, 0) + (double)n->energy_mj / 1000.0;
		if (!f->model[0] && n->model[0])
			snprintf(f->model, sizeof(f->model), "%s", n->model);
		else if (n->model[0] && strcmp(f->model, n->model) != 0)
			snprintf(f->model, sizeof(f->model), "mixed");
	}
	f->gpu_hours = f->gpus * f->hours;
	/* the spares held for it, idle, are charged as held: their devices
	 * at its model's price, each one's CPUs and memory (a node's share) */
	int64_t mdev_ms, node_ms;
	state_spare_held(j, a, now, &mdev_ms, &node_ms);
	f->spare_hours = (double)mdev_ms / MODEL_MILLI / 3.6e6;
	if (f->spare_hours > 0) {
		const char *model = j->nspares ? j->spares[0].model : f->model;
		const struct catalogue_entry *e = model[0] ? catalogue_find(&s->cat, model) : NULL;
		f->gpu_hours += f->spare_hours;
		f->cost += f->spare_hours * (e ? e->price_per_hour : 0);
	}
	double spare_node_h = (double)node_ms / 3.6e6;
	goodput_attempt(&j->job, (int)(a - j->job.attempts), now, &f->good);
	f->good_hours = f->gpus * (double)f->good.productive_ms / 3.6e6;
	const struct job_request *rq = &j->job.req;
	double cpus = (double)rq->tasks_per_node * rq->cpus_per_task * a->nnodes;
	double mem_gib = (double)rq->mem_mib / 1024.0 * a->nnodes;
	f->cost += cpus * f->hours * s->st.sched.cpu_price_per_hour;
	f->cost += mem_gib * f->hours * s->st.sched.mem_price_per_gib_hour;
	f->cost += (double)rq->tasks_per_node * rq->cpus_per_task * spare_node_h *
		   s->st.sched.cpu_price_per_hour;
	f->cost += (double)rq->mem_mib / 1024.0 * spare_node_h * s->st.sched.mem_price_per_gib_hour;
}

/* An attempt as accounting reads it: from its job held in memory, or
 * from its record in the store (a job settled and out of memory). */
struct arec {
	const char *owner, *queue, *state, *model;
	const char *service;	  /* "": none */
	int64_t start_ms, end_ms; /* start 0: never started */
	bool ended;
	double gpu_hours, busy_hours, cost;
	double energy_j;   /* < 0: unknown */
	double good_hours; /* < 0: unknown */
};

/* Attempt a of held job j; *f holds what r's model points into. */
static void arec_held(struct server *s, const struct sjob *j, const struct attempt *a, int64_t now,
		      struct acct *f, struct arec *r)
{
	figures(s, j, a, now, f);
	*r = (struct arec){.owner = j->job.owner,
			   .service = j->job.req.service ? j->job.req.service : "",
			   .queue = j->queue ? j->queue->spec.name : "",
			   .state = attempt_state(j, a),
			   .model = f->model,
			   .start_ms = a->start_ms,
			   .end_ms = a->end_ms,
			   .ended = a->ended,
			   .gpu_hours = f->gpu_hours,
			   .busy_hours = f->busy_hours,
			   .cost = f->cost,
			   .energy_j = f->energy_j,
			   .good_hours = f->good_hours};
}

static void arec_stored(const struct store_acct *row, struct arec *r)
{
	*r = (struct arec){.owner = row->owner,
			   .service = row->service ? row->service : "",
			   .queue = row->queue,
			   .state = row->state,
			   .model = row->model,
			   .start_ms = row->start_ms,
			   .end_ms = row->end_ms,
			   .ended = true,
			   .gpu_hours = row->gpu_hours,
			   .busy_hours = row->busy_hours,
			   .cost = row->cost,
			   .energy_j = row->energy_j,
			   .good_hours = row->good_hours};
}

/* The share of attempt r (ending at now if it runs) inside [from, to]. */
static double share_inside(const struct arec *r, int64_t from, int64_t to, int64_t now)
{
	int64_t end = r->ended ? r->end_ms : now;
	if (end <= r->start_ms)
		return 0;
	double in = (double)(MIN(end, to) - MAX(r->start_ms, from));
	return MAX(in, 0) / (double)(end - r->start_ms);
}

static json_t *row(struct server *s, const struct sjob *j, const struct attempt *a, int64_t now)
{
	struct acct f;
	figures(s, j, a, now, &f);
	int code, sig;
	attempt_exit(j, a, &code, &sig);
	int64_t cpu_ms = 0, mem_peak = 0;
	struct strbuf nodes;
	strbuf_init(&nodes);
	for (int i = 0; i < a->nnodes; i++) {
		cpu_ms += a->nodes[i].cpu_ms;
		mem_peak = MAX(mem_peak, a->nodes[i].mem_peak_mib);
		strbuf_addf(&nodes, "%s%s", i ? "," : "", a->nodes[i].name);
	}
	const struct job_request *rq = &j->job.req;
	int64_t end = a->ended ? a->end_ms : 0;
	json_t *o = json_pack(
		"{s:I, s:i, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:I, s:f, s:i, s:s, s:f, "
		"s:s, s:I, s:f, s:I, s:f, s:f, s:f}",
		"job_id", (json_int_t)j->job.id, "attempt", a->number, "user", j->job.owner,
		"queue", j->queue ? j->queue->spec.name : "", "class",
		s->st.classes[j->cls].spec.name, "name", rq->name ? rq->name : "", "state",
		attempt_state(j, a), "exit_code", code, "signal", sig, "submit_ms",
		(json_int_t)j->job.submit_ms, "start_ms", (json_int_t)a->start_ms, "end_ms",
		(json_int_t)end, "elapsed_s", f.hours * 3600, "nnodes", a->nnodes, "nodelist",
		nodes.buf, "gpus", f.gpus, "gpu_model", f.model, "cpus",
		(json_int_t)rq->tasks_per_node * rq->cpus_per_task * a->nnodes, "cpu_s",
		(double)cpu_ms / 1000.0, "mem_peak_mib", (json_int_t)mem_peak, "gpu_hours",
		f.gpu_hours, "gpu_busy_hours", f.busy_hours, "cost", f.cost);
	json_object_set_new(o, "energy_j", f.energy_j >= 0 ? json_real(f.energy_j) : json_null());
	/* its share of the job's goodput: the wait before it, its parts */
	json_object_set_new(o, "goodput", goodput_pack(&f.good));
	json_object_set_new(o, "good_gpu_hours", json_real(f.good_hours));
	/* an array's element: sacct's 16_0 (ArrayJobID, ArrayTaskID) */
	if (j->job.array_job)
		json_object_set_new(o, "array",
				    json_pack("{s:I, s:i}", "job", (json_int_t)j->job.array_job,
					      "index", j->job.array_index));
	/* work per energy: GPU-hours per kWh */
	json_object_set_new(
		o, "gpu_hours_per_kwh",
		f.energy_j > 0 ? json_real((f.gpu_hours - f.spare_hours) / (f.energy_j / 3.6e6))
			       : json_null());
	if (f.spare_hours > 0)
		json_object_set_new(o, "spare_gpu_hours", json_real(f.spare_hours));
	if (rq->service)
		json_object_set_new(o, "service", json_string(rq->service));
	strbuf_release(&nodes);
	return o;
}

/* The attempts that ran in [from, to] (0: open): each job's newest, or
 * all of them. */
struct filter {
	const char *user, *queue;
	char states[16][16];
	int nstates;
	int64_t from, to;
	bool all;
	int64_t after, limit; /* a page: jobs after this id; records, 0: all */
};

static bool wanted(const struct filter *f, const struct arec *r, int64_t now)
{
	if (!r->start_ms)
		return false;
	if (f->user && strcmp(f->user, r->owner) != 0)
		return false;
	if (f->queue && (!r->queue[0] || strcmp(f->queue, r->queue) != 0))
		return false;
	int64_t end = r->ended ? r->end_ms : now;
	if ((f->to && r->start_ms > f->to) || (f->from && end < f->from))
		return false;
	if (f->nstates) {
		bool ok = false;
		for (int i = 0; i < f->nstates; i++)
			ok |= strcasecmp(f->states[i], r->state) == 0;
		if (!ok)
			return false;
	}
	return true;
}

static int parse_filter(struct request *r, struct filter *f)
{
	memset(f, 0, sizeof(*f));
	f->user = request_arg(r, "user");
	f->queue = request_arg(r, "queue");
	const char *from = request_arg(r, "from"), *to = request_arg(r, "to");
	const char *all = request_arg(r, "all"), *states = request_arg(r, "state");
	if (from && tk_parse_int64(from, 0, INT64_MAX, &f->from) < 0) {
		reply_error(r, 400, "from: milliseconds since the epoch, got \"%.32s\"", from);
		return -1;
	}
	if (to && tk_parse_int64(to, 0, INT64_MAX, &f->to) < 0) {
		reply_error(r, 400, "to: milliseconds since the epoch, got \"%.32s\"", to);
		return -1;
	}
	if (f->from && f->to && f->to < f->from) {
		reply_error(r, 400, "to: before from");
		return -1;
	}
	f->all = all && strcmp(all, "0") != 0;
	if (states) {
		static const char *const known[] = {
			"PENDING", "STARTING",	"RUNNING",   "COMPLETED", "FAILED", "CANCELLED",
			"TIMEOUT", "PREEMPTED", "NODE_FAIL", "REQUEUED",  NULL};
		_cleanup_free_ char *copy = xstrdup(states);
		char *save = NULL;
		for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
			bool ok = false;
			for (int i = 0; known[i]; i++)
				ok |= strcasecmp(known[i], w) == 0;
			if (!ok || f->nstates == 16) {
				reply_error(r, 400,
					    "state: expected a comma-separated list of COMPLETED, "
					    "FAILED, CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, "
					    "REQUEUED, RUNNING, STARTING; got \"%.64s\"",
					    w);
				return -1;
			}
			snprintf(f->states[f->nstates++], sizeof(f->states[0]), "%s", w);
		}
	}
	return 0;
}

/* Did job g (out of memory) settle before ms? Then every attempt of it
 * ended before. */
static bool settled_before(const struct sgone *g, int64_t ms)
{
	return (int64_t)g->settled_s * 1000 + 999 < ms;
}

/* Does the store hold job id's accounting records? Every job settled since
 * it keeps them does, and those before once filled (acct_fill_work). */
static bool acct_filled(const struct server *s, int64_t id)
{
	return id < s->fill.done || id > s->fill.to;
}

/* ---- accounting and usage: a scan over every job ------------------------------ */

struct group {
	char name[MODEL_NAME_MAX];
	double gpu_hours, busy_hours, cost, energy_j;
	/* GPU-hours of kept training, and the GPU-hours of the records that
	 * say it (older ones do not) */
	double good_hours, good_of_hours;
	int64_t attempts;
	int64_t from_ms; /* by time: where its step begins */
};

/* by=time: steps over the window, at most this many */
#define USAGE_MAX_STEPS 2000

/* An answer of /v1/accounting (by NULL) or /v1/usage, built a slice at a
 * time between the loop's other work (api_lists_work): a job held is read
 * from memory, one out of memory from its accounting records (or, not yet
 * filled, its whole document) in the store. */
struct acct_scan {
	struct server *s;
	struct filter f;
	const char *by;
	int64_t step_ms; /* by time: each group is a step of the window, in order */
	bool newest;	 /* each job's newest attempt only */
	int64_t now, from, to;
	size_t next; /* the next job's index */
	json_t *rows;
	struct group *g, total;
	size_t ng, alloc;
	struct store_acct_cursor *cur;
	/* the newest record of the job being read, when newest */
	struct {
		bool have;
		struct arec r;
		int attempt;
		struct strbuf owner, queue, state, model, doc;
	} last;
};

void acct_scan_free(struct request *r)
{
	struct acct_scan *sc = r->acct;
	if (!sc)
		return;
	json_decref(sc->rows);
	free(sc->g);
	store_acct_cursor_destroy(sc->cur);
	strbuf_release(&sc->last.owner);
	strbuf_release(&sc->last.queue);
	strbuf_release(&sc->last.state);
	strbuf_release(&sc->last.model);
	strbuf_release(&sc->last.doc);
	free(sc);
	r->acct = NULL;
}

/* One attempt inside a usage window, added to its group and the total. */
/* by=time: what of attempt r falls in each step of the window, to it */
static void usage_add_steps(struct acct_scan *sc, const struct arec *r)
{
	int64_t end = r->ended ? r->end_ms : sc->now;
	int64_t lo = MAX(r->start_ms, sc->from), hi = MIN(end, sc->to);
	if (hi <= lo)
		return;
	size_t first = (size_t)((lo - sc->from) / sc->step_ms);
	for (size_t m = first; m < sc->ng && sc->g[m].from_ms < hi; m++) {
		int64_t to = MIN(sc->g[m].from_ms + sc->step_ms, sc->to);
		double frac = share_inside(r, sc->g[m].from_ms, to, sc->now);
		sc->g[m].gpu_hours += r->gpu_hours * frac;
		sc->g[m].busy_hours += r->busy_hours * frac;
		sc->g[m].cost += r->cost * frac;
		sc->g[m].energy_j += MAX(r->energy_j, 0) * frac;
		if (r->good_hours >= 0) {
			sc->g[m].good_hours += r->good_hours * frac;
			sc->g[m].good_of_hours += r->gpu_hours * frac;
		}
		sc->g[m].attempts++;
	}
	double frac = share_inside(r, sc->from, sc->to, sc->now);
	sc->total.gpu_hours += r->gpu_hours * frac;
	sc->total.busy_hours += r->busy_hours * frac;
	sc->total.cost += r->cost * frac;
	sc->total.energy_j += MAX(r->energy_j, 0) * frac;
	if (r->good_hours >= 0) {
		sc->total.good_hours += r->good_hours * frac;
		sc->total.good_of_hours += r->gpu_hours * frac;
	}
	sc->total.attempts++;
}

static void usage_add(struct acct_scan *sc, const struct arec *r)
{
	if (sc->step_ms) {
		usage_add_steps(sc, r);
		return;
	}
	double frac = share_inside(r, sc->from, sc->to, sc->now);
	const char *key = strcmp(sc->by, "user") == 0	   ? r->owner
			  : strcmp(sc->by, "model") == 0   ? r->model
			  : strcmp(sc->by, "service") == 0 ? r->service
							   : r->queue;
	if (strcmp(sc->by, "service") == 0 && !key[0])
		return; /* jobs of no service */
	size_t m = 0;
	while (m < sc->ng && strcmp(sc->g[m].name, key) != 0)
		m++;
	if (m == sc->ng) {
		xgrow(&sc->g, &sc->alloc, sc->ng + 1, sizeof(*sc->g));
		memset(&sc->g[m], 0, sizeof(*sc->g));
		snprintf(sc->g[m].name, sizeof(sc->g[m].name), "%s", key);
		sc->ng++;
	}
	struct group *t[] = {&sc->g[m], &sc->total};
	for (int q = 0; q < 2; q++) {
		t[q]->gpu_hours += r->gpu_hours * frac;
		t[q]->busy_hours += r->busy_hours * frac;
		t[q]->cost += r->cost * frac;
		t[q]->energy_j += MAX(r->energy_j, 0) * frac;
		if (r->good_hours >= 0) {
			t[q]->good_hours += r->good_hours * frac;
			t[q]->good_of_hours += r->gpu_hours * frac;
		}
		t[q]->attempts++;
	}
}

/* The attempts of held job j the scan wants, summed or listed. */
static void scan_held(struct server *s, struct acct_scan *sc, const struct sjob *j)
{
	int n = j->job.nattempts;
	for (int k = sc->newest ? n - 1 : 0; k >= 0 && k < n; k++) {
		const struct attempt *a = &j->job.attempts[k];
		struct acct f;
		struct arec r;
		arec_held(s, j, a, sc->now, &f, &r);
		if (!wanted(&sc->f, &r, sc->now))
			continue;
		if (sc->by)
			usage_add(sc, &r);
		else
			json_array_append_new(sc->rows, row(s, j, a, sc->now));
	}
}

/* Job id read back whole from the store into *tmp (the caller releases
 * it); false, said with `what`, when it cannot be read, and false for a
 * system job, which accounting leaves out. */
static bool read_whole(struct state *st, int64_t id, struct sjob *tmp, const char *what)
{
	struct tk_error err;
	if (state_job_read(st, id, tmp, &err) < 0) {
		log_warn("%s: %s", what, err.text);
		return false;
	}
	if (tmp->job.system) {
		job_release(&tmp->job);
		return false;
	}
	return true;
}

/* Attempt `attempt` of job id, made from the job read whole: for a record
 * whose stored document does not decode. */
static void record_from_job(struct acct_scan *sc, int64_t id, int attempt)
{
	struct sjob tmp;
	if (!read_whole(&sc->s->st, id, &tmp, "accounting"))
		return;
	for (int k = 0; k < tmp.job.nattempts; k++)
		if (tmp.job.attempts[k].number == attempt)
			json_array_append_new(sc->rows,
					      row(sc->s, &tmp, &tmp.job.attempts[k], sc->now));
	job_release(&tmp.job);
}

/* A stored record of job id the scan may want, with its document. */
static void scan_record(struct acct_scan *sc, const struct arec *r, int64_t id, int attempt,
			const char *doc)
{
	if (!wanted(&sc->f, r, sc->now))
		return;
	if (sc->by) {
		usage_add(sc, r);
		return;
	}
	json_error_t jerr;
	json_t *o = json_loads(doc, 0, &jerr);
	if (json_is_object(o)) {
		json_array_append_new(sc->rows, o);
		return;
	}
	json_decref(o);
	log_warn("accounting: job %lld attempt %d: its stored record does not decode (%s); "
		 "made again from the job",
		 (long long)id, attempt, o ? "not an object" : jerr.text);
	record_from_job(sc, id, attempt);
}

static void keep_str(struct strbuf *sb, const char *v)
{
	strbuf_reset(sb);
	strbuf_addstr(sb, v);
}

static int record_cb(void *ctx, const struct store_acct *row)
{
	struct acct_scan *sc = ctx;
	struct arec r;
	arec_stored(row, &r);
	if (!sc->newest) {
		scan_record(sc, &r, row->job_id, row->attempt, row->doc);
		return 0;
	}
	/* records come in attempt order: the newest is the last */
	keep_str(&sc->last.owner, row->owner);
	keep_str(&sc->last.queue, row->queue);
	keep_str(&sc->last.state, row->state);
	keep_str(&sc->last.model, row->model);
	keep_str(&sc->last.doc, row->doc);
	r.owner = sc->last.owner.buf;
	r.queue = sc->last.queue.buf;
	r.state = sc->last.state.buf;
	r.model = sc->last.model.buf;
	sc->last.r = r;
	sc->last.attempt = row->attempt;
	sc->last.have = true;
	return 0;
}

/* Job id, out of memory, from its records. A store that fails is said
 * once (with the job it failed on) and the jobs after are read whole. */
static void scan_stored(struct acct_scan *sc, int64_t id)
{
	struct tk_error err;
	sc->last.have = false;
	if (store_acct_job(sc->cur, id, record_cb, sc, &err) < 0) {
		log_warn("accounting: job %lld: %s; reading whole jobs instead", (long long)id,
			 err.text);
		store_acct_cursor_destroy(sc->cur);
		sc->cur = NULL;
		return;
	}
	if (sc->last.have)
		scan_record(sc, &sc->last.r, id, sc->last.attempt, sc->last.doc.buf);
}

/* Job index i for the scan: held, out of memory with its records, or read
 * back whole (not filled yet). */
static void scan_job(struct server *s, struct acct_scan *sc, size_t i)
{
	struct state *st = &s->st;
	const struct filter *f = &sc->f;
	int64_t id = (int64_t)i + 1;
	if (st->jobs[i]) {
		if (!st->jobs[i]->job.system)
			scan_held(s, sc, st->jobs[i]);
		return;
	}
	const struct sgone *g = state_gone_record(st, id); /* a removed job's records count */
	if (!g || (f->from && settled_before(g, f->from)) ||
	    (f->user && strcmp(f->user, st->owners[g->owner]) != 0))
		return;
	if (sc->cur && acct_filled(s, id)) {
		scan_stored(sc, id);
		return;
	}
	struct sjob tmp;
	if (!read_whole(st, id, &tmp, "accounting"))
		return;
	scan_held(s, sc, &tmp);
	job_release(&tmp.job);
}

static void usage_reply(struct request *r, struct acct_scan *sc)
{
	struct server *s = r->s;
	/* the cluster: accelerators of the nodes it has now, over the part of
	 * the window since each joined (one whose join is not known: all of it) */
	int64_t gpus = 0;
	double capacity = 0;
	for (int i = 0; i < s->st.nnodes; i++) {
		const struct node_record *rec = &s->st.nodes[i]->rec;
		int64_t from = MAX(sc->from, rec->joined_ms);
		gpus += rec->inv.naccel;
		if (sc->to > from)
			capacity += (double)rec->inv.naccel * (double)(sc->to - from) / 3.6e6;
	}
	json_t *groups = json_array();
	for (size_t m = 0; m <= sc->ng; m++) {
		const struct group *x = m < sc->ng ? &sc->g[m] : &sc->total;
		json_t *o = json_pack("{s:s, s:f, s:f, s:f, s:f, s:I, s:f}", "name", x->name,
				      "gpu_hours", x->gpu_hours, "gpu_busy_hours", x->busy_hours,
				      "cost", x->cost, "energy_j", x->energy_j, "attempts",
				      (json_int_t)x->attempts, "percent",
				      capacity > 0 ? 100.0 * x->gpu_hours / capacity : 0.0);
		/* goodput: the share of the GPU-hours whose training was kept */
		json_object_set_new(o, "good_gpu_hours", json_real(x->good_hours));
		json_object_set_new(o, "goodput",
				    x->good_of_hours > 0
					    ? json_real(x->good_hours / x->good_of_hours)
					    : json_null());
		if (m < sc->ng && sc->step_ms) {
			/* a step: its start, and the accelerators allocated on average */
			int64_t len = MIN(x->from_ms + sc->step_ms, sc->to) - x->from_ms;
			json_object_set_new(o, "from_ms", json_integer(x->from_ms));
			json_object_set_new(
				o, "gpus",
				json_real(len > 0 ? x->gpu_hours * 3.6e6 / (double)len : 0));
		}
		if (m < sc->ng) {
			json_array_append_new(groups, o);
			continue;
		}
		json_object_set_new(o, "capacity_gpu_hours", json_real(capacity));
		json_object_set_new(o, "idle_gpu_hours",
				    json_real(MAX(capacity - x->gpu_hours, 0)));
		reply_json(r, 200,
			   json_pack("{s:s, s:I, s:I, s:I, s:o, s:o, s:s}", "by", sc->by, "from",
				     (json_int_t)sc->from, "to", (json_int_t)sc->to, "gpus",
				     (json_int_t)gpus, "groups", groups, "total", o, "currency",
				     s->st.sched.currency));
	}
}

/* Goes on with r's scan until until_us; true once it has answered. */
static bool acct_work(struct request *r, int64_t until_us)
{
	struct server *s = r->s;
	struct acct_scan *sc = r->acct;
	int64_t more = 0; /* a page ended at this job; the next begins after it */
	while (sc->next < s->st.njobs) {
		if ((sc->next & 63) == 0 && tk_mono_us() >= until_us) {
			if (sc->cur) /* the next slice sees what committed meanwhile */
				store_acct_cursor_pause(sc->cur);
			return false;
		}
		scan_job(s, sc, sc->next++);
		if (sc->f.limit && (int64_t)json_array_size(sc->rows) >= sc->f.limit) {
			if (sc->next < s->st.njobs)
				more = (int64_t)sc->next; /* index + 1 */
			break;
		}
	}
	if (sc->by)
		usage_reply(r, sc);
	else
		reply_json(r, 200,
			   json_pack("{s:O, s:s, s:o}", "records", sc->rows, "currency",
				     s->st.sched.currency, "next",
				     more ? json_integer(more) : json_null()));
	acct_scan_free(r);
	return true;
}

static void scan_start(struct request *r, const struct filter *f, const char *by, int64_t now)
{
	struct acct_scan *sc = xcalloc(1, sizeof(*sc));
	sc->s = r->s;
	sc->f = *f;
	sc->by = by;
	sc->newest = !by && !f->all;
	sc->next = (size_t)MIN(f->after, (int64_t)r->s->st.njobs);
	struct tk_error err;
	if (r->s->reader && store_acct_cursor_new(r->s->reader, &sc->cur, &err) < 0)
		log_warn("accounting: %s; reading whole jobs instead", err.text);
	strbuf_init(&sc->last.owner);
	strbuf_init(&sc->last.queue);
	strbuf_init(&sc->last.state);
	strbuf_init(&sc->last.model);
	strbuf_init(&sc->last.doc);
	sc->now = now;
	sc->from = f->from;
	sc->to = f->to;
	sc->rows = json_array();
	snprintf(sc->total.name, sizeof(sc->total.name), "total");
	r->acct = sc;
	api_list_park(r, acct_work);
}

void h_accounting(struct request *r, const char *param, json_t *body)
{
	struct filter f;
	if (parse_filter(r, &f) < 0)
		return;
	const char *lim = request_arg(r, "limit"), *after = request_arg(r, "after");
	f.limit = ACCT_MAX_PAGE;
	if (lim && tk_parse_int64(lim, 1, ACCT_MAX_PAGE, &f.limit) < 0) {
		reply_error(r, 400, "limit: must be an integer from 1 to %d, got \"%.32s\"",
			    ACCT_MAX_PAGE, lim);
		return;
	}
	if (after && tk_parse_int64(after, 0, INT64_MAX, &f.after) < 0) {
		reply_error(r, 400,
			    "after: must be a job id (the last answer's \"next\"), got \"%.32s\"",
			    after);
		return;
	}
	scan_start(r, &f, NULL, server_now_ms(r->s));
}

void h_usage(struct request *r, const char *param, json_t *body)
{
	struct filter f;
	if (parse_filter(r, &f) < 0)
		return;
	const char *by = request_arg(r, "by");
	if (!by)
		by = "queue";
	if (strcmp(by, "queue") != 0 && strcmp(by, "user") != 0 && strcmp(by, "model") != 0 &&
	    strcmp(by, "service") != 0 && strcmp(by, "time") != 0) {
		reply_error(r, 400, "by: queue, user, model, service or time, got \"%.32s\"", by);
		return;
	}
	int64_t now = server_now_ms(r->s);
	int64_t to = f.to ? MIN(f.to, now) : now;
	int64_t from = f.from ? f.from : to - 86400000; /* default: the last day */
	f.from = from;
	f.to = to;
	f.all = true;
	/* by time: steps of `step` seconds (default a 96th of the window) */
	const char *step = request_arg(r, "step");
	int64_t step_s = MAX(1, (to - from) / 96000);
	if (step && (strcmp(by, "time") != 0 || tk_parse_int64(step, 1, INT32_MAX, &step_s) < 0)) {
		reply_error(r, 400, "step: with by=time, whole seconds, got \"%.32s\"", step);
		return;
	}
	if (strcmp(by, "time") == 0 && to > from &&
	    (to - from) / (step_s * 1000) >= USAGE_MAX_STEPS) {
		reply_error(r, 400,
			    "step: %lld s makes more than %d steps of the window: a longer step, "
			    "or a shorter window",
			    (long long)step_s, USAGE_MAX_STEPS);
		return;
	}
	scan_start(r, &f, by, now);
	if (strcmp(by, "time") == 0) {
		struct acct_scan *sc = r->acct;
		sc->step_ms = step_s * 1000;
		for (int64_t t = from; t < to; t += sc->step_ms) {
			xgrow(&sc->g, &sc->alloc, sc->ng + 1, sizeof(*sc->g));
			struct group *g = &sc->g[sc->ng++];
			memset(g, 0, sizeof(*g));
			g->from_ms = t;
			snprintf(g->name, sizeof(g->name), "%lld", (long long)t);
		}
	}
}

/* ---- budgets --------------------------------------------------------------------- */

/* What attempt r cost inside [from, now]. */
static double cost_since(const struct arec *r, int64_t from, int64_t now)
{
	int64_t end = r->ended ? r->end_ms : now;
	if (!r->start_ms || end < from)
		return 0;
	return r->cost * share_inside(r, from, now, now);
}

/* What j's attempts cost inside [from, now]. */
static double period_cost(struct server *s, const struct sjob *j, int64_t from, int64_t now)
{
	double c = 0;
	for (int k = 0; k < j->job.nattempts; k++) {
		struct acct f;
		struct arec r;
		arec_held(s, j, &j->job.attempts[k], now, &f, &r);
		c += cost_since(&r, from, now);
	}
	return c;
}

/* Does q count spending against a budget, and since when? */
static bool budgeted(const struct squeue *q, int64_t now, int64_t *from)
{
	if (q->spec.budget <= 0)
		return false;
	*from = queue_budget_period_start(&q->spec, now);
	return true;
}

void acct_job_leaves(struct server *s, const struct sjob *j)
{
	struct squeue *q = j->queue;
	int64_t now = server_now_ms(s), from;
	if (q && !j->job.system && budgeted(q, now, &from) && q->gone_from == from)
		q->spent_gone += period_cost(s, j, from, now);
}

/* Which queues sum_gone sums, and when. */
struct gone_sum {
	struct state *st;
	const bool *sum;
	int64_t now;
};

static int gone_record_cb(void *ctx, const struct store_acct *row)
{
	struct gone_sum *gs = ctx;
	struct squeue *q = state_queue(gs->st, row->queue);
	if (q && gs->sum[q->index]) {
		struct arec r;
		arec_stored(row, &r);
		q->spent_gone += cost_since(&r, q->gone_from, gs->now);
	}
	return 0;
}

/* Sums again what jobs out of memory spent in their queue's period, for
 * queues whose period began since the last sum (or never summed): the
 * accounting records of each such job settled inside the period (or the
 * job itself, read back, when not filled yet), once. */
static void sum_gone(struct server *s, int64_t now)
{
	struct state *st = &s->st;
	int64_t oldest = INT64_MAX;
	bool *sum = xcalloc((size_t)st->nqueues + 1, sizeof(*sum));
	for (int q = 0; q < st->nqueues; q++) {
		struct squeue *sq = st->queues[q];
		int64_t from;
		if (!budgeted(sq, now, &from)) {
			sq->gone_from = 0; /* its jobs leaving are not counted */
			continue;
		}
		if (sq->gone_from == from)
			continue;
		sq->spent_gone = 0;
		sq->gone_from = from;
		sum[q] = true;
		oldest = MIN(oldest, from);
	}
	struct store_acct_cursor *cur = NULL;
	struct tk_error err;
	if (oldest != INT64_MAX && s->reader && store_acct_cursor_new(s->reader, &cur, &err) < 0)
		log_warn("budgets: %s; reading whole jobs instead", err.text);
	struct gone_sum gs = {.st = st, .sum = sum, .now = now};
	for (size_t i = 0; oldest != INT64_MAX && i < st->njobs; i++) {
		const struct sgone *g = &st->gone[i];
		if (!g->state || settled_before(g, oldest))
			continue;
		int64_t id = (int64_t)i + 1;
		if (cur && acct_filled(s, id)) {
			/* a store that fails is said once; the jobs after are read whole */
			if (store_acct_job(cur, id, gone_record_cb, &gs, &err) < 0) {
				log_warn("budgets: job %lld: %s; reading whole jobs instead",
					 (long long)id, err.text);
				store_acct_cursor_destroy(cur);
				cur = NULL;
			}
			continue;
		}
		struct sjob tmp;
		if (!read_whole(st, id, &tmp, "budgets"))
			continue;
		struct squeue *q = tmp.queue;
		if (q && sum[q->index])
			q->spent_gone += period_cost(s, &tmp, q->gone_from, now);
		job_release(&tmp.job);
	}
	store_acct_cursor_destroy(cur);
	free(sum);
}

void acct_budgets(struct server *s)
{
	struct state *st = &s->st;
	int64_t now = server_now_ms(s);
	bool any = false;
	for (int q = 0; q < st->nqueues; q++) {
		st->queues[q]->spent = 0;
		any |= st->queues[q]->spec.budget > 0;
	}
	if (!any)
		return;
	sum_gone(s, now);
	for (int q = 0; q < st->nqueues; q++)
		st->queues[q]->spent = st->queues[q]->spent_gone;
	for (size_t i = 0; i < st->njobs; i++) {
		const struct sjob *j = st->jobs[i];
		struct squeue *q = j ? j->queue : NULL;
		int64_t from;
		if (q && !j->job.system && budgeted(q, now, &from))
			q->spent += period_cost(s, j, from, now);
	}
	for (int k = 0; k < st->nqueues; k++) {
		struct squeue *q = st->queues[k];
		bool spent = q->spec.budget > 0 && q->spent >= q->spec.budget;
		if (spent == q->budget_spent)
			continue;
		q->budget_spent = spent;
		char a[32], b[32];
		model_fmt_amount(q->spent, a, sizeof(a));
		model_fmt_amount(q->spec.budget, b, sizeof(b));
		if (spent)
			log_warn("queue %s: budget spent (%s of %s this %s); its new jobs wait",
				 q->spec.name, a, b, q->spec.budget_period);
		else
			log_info("queue %s: within its budget again (%s of %s)", q->spec.name, a,
				 b);
		state_want_pass(st);
	}
}

/* ---- the records in the store ------------------------------------------------ */

void acct_put(struct server *s, const struct sjob *j, struct store_batch *b)
{
	int n = j->job.nattempts;
	struct store_acct *rows = xcalloc((size_t)MAX(n, 1), sizeof(*rows));
	struct acct *f = xcalloc((size_t)MAX(n, 1), sizeof(*f));
	for (int k = 0; k < n; k++) {
		const struct attempt *a = &j->job.attempts[k];
		struct arec r;
		arec_held(s, j, a, s->st.now_ms, &f[k], &r);
		json_t *o = row(s, j, a, s->st.now_ms);
		rows[k] = (struct store_acct){
			.job_id = j->job.id,
			.attempt = a->number,
			.owner = r.owner,
			.service = r.service,
			.queue = r.queue,
			.state = r.state,
			.model = r.model,
			.start_ms = r.start_ms,
			.end_ms = r.end_ms,
			.gpu_hours = r.gpu_hours,
			.busy_hours = r.busy_hours,
			.cost = r.cost,
			.energy_j = r.energy_j,
			.good_hours = r.good_hours,
			/* as the API answers it: one rounding */
			.doc = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(15))};
		json_decref(o);
	}
	store_batch_set_acct(b, j->job.id, rows, n);
	for (int k = 0; k < n; k++)
		free((char *)rows[k].doc);
	free(rows);
	free(f);
}

static int meta_id(struct server *s, const char *key, int64_t *ret, struct tk_error *err)
{
	_cleanup_free_ char *v = NULL;
	int r = store_meta_get(s->store, key, &v, err);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (tk_parse_int64(v, 0, STATE_MAX_JOB_ID + 1, ret) < 0)
		return tk_errorf(err, -EBADMSG, "store: metadata %s: not a job id: \"%.32s\"", key,
				 v);
	return 0;
}

int acct_fill_load(struct server *s, struct tk_error *err)
{
	s->fill.next = 1;
	int r;
	if ((r = meta_id(s, "acct_fill_to", &s->fill.to, err)) < 0 ||
	    (r = meta_id(s, "acct_fill_next", &s->fill.next, err)) < 0)
		return r;
	s->fill.done = s->fill.next;
	if (s->fill.next <= s->fill.to)
		log_info("accounting: the records of jobs %lld-%lld (settled before the store kept "
			 "them) are filled in the background",
			 (long long)s->fill.next, (long long)s->fill.to);
	return 0;
}

void acct_fill_work(struct server *s)
{
	struct state *st = &s->st;
	if (s->fill.seq && s->seq_durable >= s->fill.seq) {
		s->fill.done = s->fill.done_next;
		s->fill.seq = 0;
		if (s->fill.done > s->fill.to)
			log_info("accounting: every settled job's records are in the store");
	}
	if (s->fill.next > s->fill.to)
		return;
	int64_t until = tk_mono_us() + ACCT_FILL_SLICE_US, id = s->fill.next;
	for (; id <= s->fill.to && ((id & 63) != 0 || tk_mono_us() < until); id++) {
		const struct sjob *held = state_job(st, id);
		if (held) { /* one not settled gets its records when it settles */
			if (!held->job.system && state_job_settled_ms(held))
				acct_put(s, held, s->fill.batch);
			continue;
		}
		if (!state_gone(st, id))
			continue;
		struct sjob tmp;
		if (!read_whole(st, id, &tmp, "accounting"))
			continue;
		acct_put(s, &tmp, s->fill.batch);
		job_release(&tmp.job);
	}
	s->fill.next = id;
	char v[24];
	snprintf(v, sizeof(v), "%lld", (long long)id);
	store_batch_put_meta(s->fill.batch, "acct_fill_next", v);
	/* queries trust the records below id once this write is durable */
	s->fill.seq = ++st->seq_applied;
	s->fill.done_next = id;
	server_kick(s);
}

/* ---- the Gittins index's history ------------------------------------------------ */

/* One job's records: its class (from the first record) and queue, and the
 * accelerator-hours of all of them. */
struct las_job {
	struct state *st;
	int cls;
	uint32_t queue;
	double gpu_hours;
};

static int las_record_cb(void *ctx, const struct store_acct *row)
{
	struct las_job *lj = ctx;
	if (lj->cls == -2) {
		json_t *o = row->doc ? json_loads(row->doc, 0, NULL) : NULL;
		const char *c = o ? json_string_value(json_object_get(o, "class")) : NULL;
		lj->cls = c ? sched_config_class(&lj->st->sched, c) : -1;
		lj->queue = state_las_queue_key(row->queue);
		json_decref(o);
	}
	lj->gpu_hours += row->gpu_hours;
	return 0;
}

void acct_las_history_load(struct server *s)
{
	struct state *st = &s->st;
	bool any = false;
	for (int c = 0; c < st->sched.nclasses; c++)
		any |= st->las[c].nlevels > 1 && st->las[c].gittins;
	if (!any || !s->reader)
		return;
	/* the newest jobs out of memory, at most what the history keeps of
	 * a class, oldest first into it (it keeps the newest) */
	enum { MOST = SCHED_GITTINS_KEEP };
	struct las_job *got = xcalloc(MOST, sizeof(*got));
	struct store_acct_cursor *cur = NULL;
	struct tk_error err;
	if (store_acct_cursor_new(s->reader, &cur, &err) < 0) {
		log_warn("the Gittins index: %s; it learns from the jobs that end", err.text);
		free(got);
		return;
	}
	int n = 0;
	for (size_t i = st->njobs; i-- > 0 && n < MOST;) {
		int64_t id = (int64_t)i + 1;
		if (!st->gone[i].state || !acct_filled(s, id))
			continue;
		struct las_job lj = {.st = st, .cls = -2};
		if (store_acct_job(cur, id, las_record_cb, &lj, &err) < 0) {
			log_warn(
				"the Gittins index: job %lld: %s; it learns from the jobs that end",
				(long long)id, err.text);
			break;
		}
		if (lj.cls >= 0 && st->las[lj.cls].nlevels > 1 && st->las[lj.cls].gittins &&
		    lj.gpu_hours > 0)
			got[n++] = lj;
	}
	store_acct_cursor_destroy(cur);
	for (int k = n; k-- > 0;)
		sched_las_history_add(st->las_hist, got[k].cls, got[k].queue,
				      got[k].gpu_hours * 3600);
	if (n)
		log_info("the Gittins index: %d finished jobs' service from the accounting records",
			 n);
	free(got);
}
