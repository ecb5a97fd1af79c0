/*
 * A scheduling pass, as the server runs it: build the scheduler's snapshot
 * of the state (snapshot_build), call the pure sched_pass, apply what it
 * decided (decisions_apply), release the snapshot. The snapshot borrows the
 * state's strings and device arrays; nothing of it outlives the pass but
 * what the scheduler's kept tables (sched_cluster, sched_shapes) hold.
 */
#include "state.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct snapshot {
	struct sched_snapshot snap;
	struct sched_node *nodes; /* node i is state->nodes[i] */
	struct sched_queue *queues;
	const struct sched_job **jobs; /* pending, classes by priority, then submission */
	struct sched_key *keys;	       /* what the pass reads of jobs[i] */
	struct sjob **byindex;	       /* the job of jobs[i] */
	int njobs;
	int cls_from[MODEL_MAX_CLASSES], cls_to[MODEL_MAX_CLASSES]; /* each class's jobs */
	struct sched_running *running; /* one per attempt that holds resources */
	struct sched_assign *assigns;  /* their parts, side by side */
	int nrunning;
	struct sched_window *windows; /* state->wins as the pass takes them */
	struct sched_qdim *qdims;     /* the queues' limits beyond accelerators */
};

/* The scheduler's view of the nodes: node i is state->nodes[i]; a node
 * of the spare pool is schedulable only with `pool` (restarts in place
 * may take it, passes may not). */
static struct sched_node *view_build(const struct state *s, bool pool)
{
	struct sched_node *v = xcalloc((size_t)s->nnodes + 1, sizeof(*v));
	for (int i = 0; i < s->nnodes; i++) {
		struct snode *n = s->nodes[i];
		struct sched_node *x = &v[i];
		n->index = i;
		x->name = n->rec.inv.name;
		x->topology = n->rec.inv.topology;
		x->labels = n->labels;
		x->taints = n->rec.taints;
		x->pools = n->pools;
		x->domain = n->rec.inv.domain[0] ? n->rec.inv.domain : NULL;
		x->schedulable = state_node_state(s, n) == NODE_UP && !n->agent_stopping &&
				 (pool || !n->pool_spare);
		x->cpus_total = n->rec.inv.cpus;
		x->cpus_free = n->rec.inv.cpus - n->cpus_used;
		x->mem_total_mib = n->rec.inv.mem_mib;
		x->mem_free_mib = n->rec.inv.mem_mib - n->mem_used;
		x->ndev = n->rec.inv.naccel;
		x->devs = n->sdev;
	}
	return v;
}

struct sched_node *state_sched_view(const struct state *s)
{
	return view_build(s, true);
}

static void nodes_build(const struct state *s, struct snapshot *sn)
{
	sn->nodes = view_build(s, false);
}

bool state_request_possible(struct state *s, const struct job_request *r, struct strbuf *why)
{
	if (!s->nnodes)
		return true;
	struct sched_job sj;
	memset(&sj, 0, sizeof(sj));
	state_request_sched(&s->sched, r, &sj);
	if (s->possible_gen != s->nodes_gen) {
		/* a node joined or changed: what was known no longer holds */
		memset(s->possible, 0, sizeof(s->possible));
		s->possible_gen = s->nodes_gen;
	}
	size_t slot = (size_t)(sj.shape % ARRAY_SIZE(s->possible));
	bool ok;
	if (s->possible[slot].used && s->possible[slot].shape == sj.shape) {
		ok = s->possible[slot].ok;
	} else {
		struct snapshot sn;
		memset(&sn, 0, sizeof(sn));
		nodes_build(s, &sn);
		ok = sched_could_ever_hold(sn.nodes, s->nnodes, &sj);
		free(sn.nodes);
		s->possible[slot].shape = sj.shape;
		s->possible[slot].used = true;
		s->possible[slot].ok = ok;
	}
	if (!ok) {
		strbuf_addstr(why, "needs ");
		sched_describe_need(&sj, why);
		strbuf_addf(why, "; no set of this cluster's %d node%s could ever hold that",
			    s->nnodes, s->nnodes == 1 ? "" : "s");
	}
	return ok;
}

void state_queue_dims(const struct queue_spec *qs, struct sched_qdim *ret)
{
	for (int k = 0; k < qs->ndims; k++) {
		const struct queue_dim *d = &qs->dims[k];
		ret[k] = (struct sched_qdim){strcmp(d->name, "units") == 0     ? SCHED_QDIM_UNITS
					     : strcmp(d->name, "cpus") == 0    ? SCHED_QDIM_CPUS
					     : strcmp(d->name, "mem_mib") == 0 ? SCHED_QDIM_MEM
									       : SCHED_QDIM_MODEL,
					     d->name, d->quota,
					     d->borrow < 0 ? INT64_MAX / 4 : d->quota + d->borrow};
	}
}

static void queues_build(const struct state *s, struct snapshot *sn)
{
	sn->queues = xcalloc((size_t)s->nqueues + 1, sizeof(*sn->queues));
	int ndims = 0;
	for (int q = 0; q < s->nqueues; q++)
		ndims += s->queues[q]->spec.ndims;
	sn->qdims = ndims ? xcalloc((size_t)ndims, sizeof(*sn->qdims)) : NULL;
	for (int q = 0, at = 0; q < s->nqueues; q++) {
		const struct queue_spec *qs = &s->queues[q]->spec;
		sn->queues[q] = (struct sched_queue){
			qs->name,
			qs->quota_milli,
			qs->borrow_milli,
			qs->weight,
			sched_usage_recent(qs->usage, (double)s->sched.half_life_s),
			qs->ndims,
			qs->ndims ? sn->qdims + at : NULL};
		if (qs->ndims)
			state_queue_dims(qs, sn->qdims + at);
		at += qs->ndims;
	}
}

/* ---- least attained service ---------------------------------------------------- */

/* The milli-accelerators attempt a holds on all its nodes. */
static int64_t attempt_milli(const struct attempt *a)
{
	int64_t milli = 0;
	for (int k = 0; k < a->nnodes; k++)
		milli += (int64_t)a->nodes[k].ndev * a->nodes[k].milli;
	return milli;
}

/* Accelerator-seconds attempt a has run (to now while it runs). */
static double attempt_service(const struct attempt *a, int64_t now)
{
	int64_t end = a->ended ? a->end_ms : now;
	return end > a->start_ms ? (double)(end - a->start_ms) * (double)attempt_milli(a) / 1e6 : 0;
}

double state_job_received_gpu_s(const struct sjob *j, int64_t now)
{
	double got = 0;
	for (int i = 0; i < j->job.nattempts; i++)
		got += attempt_service(&j->job.attempts[i], now);
	return got;
}

uint32_t state_las_queue_key(const char *queue)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (const char *p = queue ? queue : ""; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h;
}

void state_las_history_note(struct state *s, const struct sjob *j, int64_t now)
{
	const struct sched_las *l = &s->las[j->cls];
	if (j->job.system || l->nlevels < 2 || !l->gittins)
		return;
	double got = state_job_received_gpu_s(j, now);
	if (got > 0)
		sched_las_history_add(s->las_hist, j->cls,
				      state_las_queue_key(j->queue ? j->queue->spec.name : ""),
				      got);
}

/* The accelerator-seconds a job's attempts have run (the current one to
 * now), from its las_from attempt on. */
static double job_service(const struct sjob *j, int64_t now)
{
	double got = 0;
	for (int i = 0; i < j->job.nattempts; i++)
		if (j->job.attempts[i].number >= j->job.las_from)
			got += attempt_service(&j->job.attempts[i], now);
	return got;
}

static void wake_at(struct state *s, int64_t at)
{
	if (!s->wake_ms || at < s->wake_ms)
		s->wake_ms = at;
}

/* How long j's attempts have run, every one (the running one to now). */
static int64_t job_ran_ms(const struct sjob *j, int64_t now)
{
	int64_t ran = 0;
	for (int i = 0; i < j->job.nattempts; i++) {
		const struct attempt *a = &j->job.attempts[i];
		int64_t end = a->ended ? a->end_ms : now;
		if (a->start_ms && end > a->start_ms)
			ran += end - a->start_ms;
	}
	return ran;
}

/* A waiting job's level in its class's order: by the service it has had,
 * unless it has waited since its last attempt "las_max_stretch" times as
 * long as it has run so far, to go back to the first level (which it
 * keeps, stored, until it runs again: its service counts from its next
 * attempt); and its Gittins index there. */
static int pending_level(struct state *s, struct sjob *j, int64_t now)
{
	const struct sched_las *l = &s->las[j->cls];
	if (l->nlevels < 2)
		return 0;
	const struct attempt *last = job_current_attempt(&j->job);
	if (last && last->ended && last->number >= j->job.las_from) {
		int64_t ran = job_ran_ms(j, now), waited = now - last->end_ms;
		if (sched_las_promoted(l, ran, waited)) {
			j->job.las_from = last->number + 1;
			state_job_dirty(s, j);
			log_info("job %lld: waited %lld s after running %lld s: back to the first "
				 "level of class %s",
				 (long long)j->job.id, (long long)(waited / 1000),
				 (long long)(ran / 1000), s->classes[j->cls].spec.name);
		} else if (l->max_stretch > 0 && ran > 0) {
			wake_at(s, last->end_ms + (int64_t)ceil(l->max_stretch * (double)ran));
		}
	}
	j->las_service = job_service(j, now);
	j->las_level = sched_las_level(l, j->las_service);
	j->las_indexed = sched_las_history_index(
		s->las_hist, l, j->cls, state_las_queue_key(j->queue ? j->queue->spec.name : ""),
		j->las_service, &j->las_index);
	return j->las_level;
}

/* Puts jobs[from, to) (and byindex alike) in level order, each level by
 * the Gittins index where the class has it, else in the order it had: the
 * pass takes a class's levels as classes in a row. */
static void by_level(struct snapshot *sn, const struct state *s, int from, int to)
{
	int n = to - from;
	if (n < 2)
		return;
	struct sched_las_place *o = xmalloc(sizeof(*o) * (size_t)n);
	for (int i = 0; i < n; i++) {
		const struct sjob *j = sn->byindex[from + i];
		o[i] = (struct sched_las_place){s->pass_classes[sn->jobs[from + i]->cls].las_level,
						j->las_indexed ? j->las_index : -1, from + i};
	}
	sched_las_places_sort(o, n);
	const struct sched_job **jobs = xmalloc(sizeof(*jobs) * (size_t)n);
	struct sjob **idx = xmalloc(sizeof(*idx) * (size_t)n);
	struct sched_key *keys = xmalloc(sizeof(*keys) * (size_t)n);
	for (int k = 0; k < n; k++) {
		jobs[k] = sn->jobs[o[k].pos];
		keys[k] = sn->keys[o[k].pos];
		idx[k] = sn->byindex[o[k].pos];
	}
	memcpy(&sn->jobs[from], jobs, sizeof(*jobs) * (size_t)n);
	memcpy(&sn->keys[from], keys, sizeof(*keys) * (size_t)n);
	memcpy(&sn->byindex[from], idx, sizeof(*idx) * (size_t)n);
	free(o);
	free(jobs);
	free(keys);
	free(idx);
}

void state_held_reason(const struct sjob *j, char *buf, size_t n)
{
	snprintf(buf, n, "held (tenk release %lld lets it go)", (long long)j->job.id);
}

/* Why j waits where no pass may place it (its request refused by the
 * shape table, its last attempt not over): the reason, or NULL when the
 * pass may take it. */
static const char *held_back(struct state *s, struct sjob *j, int64_t now, char *buf, size_t n,
			     bool *never)
{
	*never = false;
	if (j->sj.shape_id < 0)
		return "the scheduler cannot take this request";
	if (j->job.held) {
		state_held_reason(j, buf, n);
		return buf;
	}
	if (j->job.req.begin_ms > now) {
		time_t t = (time_t)(j->job.req.begin_ms / 1000);
		struct tm tm;
		gmtime_r(&t, &tm);
		char when[32];
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		snprintf(buf, n, "waiting to begin at %s", when);
		wake_at(s, j->job.req.begin_ms);
		return buf;
	}
	if (j->job.req.nafter) {
		int d = state_job_deps_state(s, j, buf, n);
		if (d <= 0) {
			*never = d < 0;
			return buf;
		}
	}
	if (j->queue && j->queue->budget_spent) {
		char spent[32], budget[32];
		model_fmt_amount(j->queue->spent, spent, sizeof(spent));
		model_fmt_amount(j->queue->spec.budget, budget, sizeof(budget));
		bool day = strcmp(j->queue->spec.budget_period, "day") == 0;
		snprintf(buf, n, "budget of queue %s spent: %s of %s %s%s", j->queue->spec.name,
			 spent, budget, day ? "today" : "this ",
			 day ? "" : j->queue->spec.budget_period);
		return buf;
	}
	if (j->inplace) {
		snprintf(buf, n, "%s", j->inplace->why);
		return buf;
	}
	/* two attempts of one job never run at once: the next one waits until
	 * every task of the last is gone, or surely fenced */
	if (j->fenced_until) {
		snprintf(buf, n,
			 "waiting until the lease of its last attempt's tasks on %s has run out "
			 "(its agent restarted without them)",
			 j->fenced_node);
		return buf;
	}
	const struct attempt *last = job_current_attempt(&j->job);
	if (last && !last->ended) {
		snprintf(buf, n, "waiting for its attempt %d to end (its tasks are being stopped)",
			 last->number);
		return buf;
	}
	return NULL;
}

/* May one more element of j's array go to this pass (mark)? At most its
 * cap run at once, those this pass was given counted. */
static const char *array_capped(struct state *s, struct sjob *j, uint64_t mark, char *buf, size_t n)
{
	if (!j->job.array_cap)
		return NULL;
	struct sjob *first = state_job(s, j->job.array_job);
	if (!first)
		return NULL;
	if (first->array_mark != mark) {
		first->array_mark = mark;
		first->array_admitted = 0;
	}
	if (first->array_active + first->array_admitted >= j->job.array_cap) {
		snprintf(buf, n, "array %lld runs %d of its elements at once (%%%d)",
			 (long long)first->job.id, j->job.array_cap, j->job.array_cap);
		return buf;
	}
	first->array_admitted++;
	return NULL;
}

/* The pending jobs, classes by priority (sorted when the configuration was
 * loaded), each in submission order; those held back wait with that said
 * and are not given to the pass. */
static void jobs_build(struct state *s, uint64_t mark, int64_t now, struct snapshot *sn)
{
	sn->jobs = xcalloc((size_t)s->npending + 1, sizeof(*sn->jobs));
	sn->keys = xmalloc(sizeof(*sn->keys) * ((size_t)s->npending + 1));
	sn->byindex = xcalloc((size_t)s->npending + 1, sizeof(*sn->byindex));
	char buf[MODEL_REASON_MAX];
	struct sjob **never = NULL;
	size_t nnever = 0, never_alloc = 0;
	s->wake_ms = 0;
	bool budgets = false;
	for (int q = 0; q < s->nqueues; q++)
		budgets |= s->queues[q]->budget_spent;
	for (int k = 0; k < s->sched.nclasses; k++) {
		int c = s->class_order[k], from = sn->njobs;
		struct sclass *cl = &s->classes[c];
		size_t kept = 0;
		for (size_t i = 0; i < cl->norder; i++) {
			struct pend_entry e = cl->order[i];
			if (!e.job)
				continue; /* it left since: the hole closes */
			cl->order[kept++] = e;
			struct sjob *j = e.job;
			/* a plain one goes on unread, unless its queue's budget holds
			 * it back */
			struct sched_key *key = &sn->keys[sn->njobs];
			*key = (struct sched_key){e.id,
						  e.submit_ms,
						  e.time_limit_s,
						  s->las_first[c],
						  e.queue,
						  e.shape_id,
						  0};
			/* a window for users or a queue: which are its own */
			if (s->win_bits)
				key->windows = j->sj.windows = state_windows_of_job(s, j);
			if (!e.plain || (budgets && s->queues[e.queue]->budget_spent)) {
				bool no;
				const char *why = held_back(s, j, now, buf, sizeof(buf), &no);
				if (!why)
					why = array_capped(s, j, mark, buf, sizeof(buf));
				if (no) {
					xgrow(&never, &never_alloc, nnever + 1, sizeof(*never));
					never[nnever++] = j;
				}
				if (why) {
					snprintf(j->job.reason, sizeof(j->job.reason), "%s", why);
					j->reason_from = 0;
					j->reason_pass = mark;
					continue;
				}
				j->sj.queue = j->queue->index;
				j->sj.cls = s->las_first[c] + pending_level(s, j, now);
				j->sj.windows = key->windows;
				*key = sched_key_of(&j->sj);
			}
			sn->jobs[sn->njobs] = &j->sj;
			sn->byindex[sn->njobs++] = j;
		}
		cl->norder = kept;
		assert(kept == (size_t)cl->npending);
		sn->cls_from[c] = from;
		sn->cls_to[c] = sn->njobs;
		if (s->las[c].nlevels > 1)
			by_level(sn, s, from, sn->njobs);
	}
	/* a dependency that can no longer be met ends the job (what waits on
	 * it is judged in the next pass) */
	for (size_t i = 0; i < nnever; i++) {
		char why[MODEL_REASON_MAX];
		snprintf(why, sizeof(why), "%s", never[i]->job.reason);
		log_info("job %lld: %s", (long long)never[i]->job.id, why);
		state_job_finish(s, never[i], JOB_CANCELLED, -1, why, now);
	}
	free(never);
}

/* Attempts by (job, attempt number), open-addressed: the index of each
 * attempt's sched_running, so that parts on many nodes find their attempt. */
struct attempt_index {
	uint64_t *key; /* 0: empty */
	int *val;
	size_t cap; /* a power of two, at least twice the parts */
};

static void attempt_index_init(struct attempt_index *ix, size_t nparts)
{
	ix->cap = 16;
	while (ix->cap < nparts * 2)
		ix->cap *= 2;
	ix->key = xcalloc(ix->cap, sizeof(uint64_t));
	ix->val = xmalloc(sizeof(int) * ix->cap);
}

/* The slot of (job, attempt): *ret_new says whether it was empty (and is
 * now the key's, for the caller to fill). */
static size_t attempt_index_slot(struct attempt_index *ix, int64_t job, int attempt, bool *ret_new)
{
	uint64_t key = (uint64_t)job << 24 | (uint32_t)attempt;
	size_t h = (key * 0x9e3779b97f4a7c15ULL) & (ix->cap - 1);
	while (ix->key[h] && ix->key[h] != key)
		h = (h + 1) & (ix->cap - 1);
	*ret_new = !ix->key[h];
	ix->key[h] = key;
	return h;
}

static void attempt_index_release(struct attempt_index *ix)
{
	free(ix->key);
	free(ix->val);
}

/* What holds resources: every part of every attempt not yet ended, grouped
 * by attempt. One walk counts each attempt's parts, a second fills them in,
 * so that an attempt's parts lie side by side. */
static void running_build(struct state *s, struct snapshot *sn, int64_t now)
{
	/* a running job of a "las" class that reaches its next level while
	 * jobs wait may be preempted then: a pass is due */
	bool las_waiting = false;
	for (int c = 0; c < s->sched.nclasses; c++)
		las_waiting |= s->las[c].nlevels > 1 && s->classes[c].npending > 0;
	size_t nparts = 0;
	for (int i = 0; i < s->nnodes; i++)
		nparts += (size_t)s->nodes[i]->nparts;
	sn->running = xcalloc(nparts + 1, sizeof(*sn->running));
	sn->assigns = xcalloc(nparts + 1, sizeof(*sn->assigns));
	struct attempt_index ix;
	attempt_index_init(&ix, nparts);
	int *part_run = xmalloc(sizeof(int) * (nparts + 1)); /* each part's attempt */
	int *count = xcalloc(nparts + 1, sizeof(int));
	size_t np = 0;
	for (int i = 0; i < s->nnodes; i++) {
		struct snode *n = s->nodes[i];
		for (int k = 0; k < n->nparts; k++) {
			struct part *pt = &n->parts[k];
			struct sjob *j = pt->job;
			bool fresh;
			size_t h = attempt_index_slot(&ix, j->job.id, pt->attempt, &fresh);
			if (fresh) {
				const struct attempt *a = &j->job.attempts[pt->attempt - 1];
				struct sched_running *r = &sn->running[sn->nrunning];
				const struct sched_las *l = &s->las[j->cls];
				int lv = 0;
				r->id = j->job.id;
				r->queue = j->queue->index;
				r->start_ms = a->start_ms;
				r->time_limit_s = j->job.req.time_limit_s;
				r->last_checkpoint_ms = j->last_ckpt_ms;
				r->last_commit_ms = state_attempt_commit_ms(j, a);
				r->restore_ms = state_job_restore_ms(j);
				r->preempt_any = j->job.req.preemptible_any;
				if (l->nlevels > 1) {
					double got = job_service(j, now);
					lv = sched_las_level(l, got);
					j->las_service = got;
					j->las_level = lv;
					/* a pass when it reaches its next level, unless
					 * the loss bound spares it by then (a commit
					 * queues one: commit() in ckpt.c) */
					int64_t next = sched_las_next_change(
						l, got, attempt_milli(a), a->start_ms, now);
					if (next > sched_las_takeable_until(l, r))
						next = INT64_MAX;
					if (las_waiting && next != INT64_MAX &&
					    state_attempt_is_current(j, a))
						wake_at(s, next);
				}
				r->cls = s->las_first[j->cls] + lv;
				r->stopping = !state_attempt_is_current(j, a);
				r->held_for = j->held_attempt == a->number ? j->held_for : 0;
				ix.val[h] = sn->nrunning++;
			}
			part_run[np++] = ix.val[h];
			count[ix.val[h]]++;
		}
	}
	size_t off = 0;
	for (int k = 0; k < sn->nrunning; k++) {
		sn->running[k].nodes = &sn->assigns[off];
		off += (size_t)count[k];
	}
	np = 0;
	for (int i = 0; i < s->nnodes; i++) {
		struct snode *n = s->nodes[i];
		for (int k = 0; k < n->nparts; k++) {
			struct part *pt = &n->parts[k];
			struct sjob *j = pt->job;
			struct sched_running *r = &sn->running[part_run[np++]];
			const struct attempt_node *an =
				&j->job.attempts[pt->attempt - 1].nodes[pt->node_index];
			struct sched_assign *as = (struct sched_assign *)&r->nodes[r->nnodes++];
			as->node = n->index;
			if (j->job.req.exclusive) {
				/* alone there: it holds the whole node (part_hold) */
				as->ndev = MIN(n->rec.inv.naccel, MODEL_MAX_ACCELS);
				for (int d = 0; d < as->ndev; d++)
					as->devs[d] = d;
				as->milli = MODEL_MILLI;
				as->cpus = n->rec.inv.cpus;
				as->mem_mib = n->rec.inv.mem_mib;
				as->alone = true;
				continue;
			}
			as->ndev = an->ndev;
			memcpy(as->devs, an->devs, sizeof(int) * (size_t)an->ndev);
			as->milli = an->milli;
			as->cpus = j->job.req.tasks_per_node * j->job.req.cpus_per_task;
			as->mem_mib = j->job.req.mem_mib;
		}
	}
	attempt_index_release(&ix);
	free(part_run);
	free(count);
}

static void snapshot_build(struct state *s, uint64_t mark, int64_t now, struct snapshot *sn)
{
	memset(sn, 0, sizeof(*sn));
	nodes_build(s, sn);
	queues_build(s, sn);
	state_windows_collect(s);
	if (s->nwins)
		sn->windows = state_windows_sched(s);
	jobs_build(s, mark, now, sn);
	running_build(s, sn, now);
	/* what follows from the node list alone is kept until the nodes change */
	if (!sched_cluster_matches(s->sched_cluster, sn->nodes, s->nnodes)) {
		sched_cluster_free(s->sched_cluster);
		s->sched_cluster = sched_cluster_new(sn->nodes, s->nnodes);
	}
	/* the passes' large arrays are kept from one to the next (one at a time) */
	if (!s->sched_keep)
		s->sched_keep = sched_keep_new();
	sn->snap = (struct sched_snapshot){.nodes = sn->nodes,
					   .nnodes = s->nnodes,
					   .jobs = sn->jobs,
					   .njobs = sn->njobs,
					   .running = sn->running,
					   .nrunning = sn->nrunning,
					   .classes = s->pass_classes,
					   .nclasses = s->npass_classes,
					   .queues = sn->queues,
					   .nqueues = s->nqueues,
					   .cluster = s->sched_cluster,
					   .shapes = s->sched_shapes,
					   .keys = sn->keys,
					   .keep = s->sched_keep,
					   .windows = sn->windows,
					   .nwindows = s->nwins,
					   .weights = s->weights,
					   .nweights = s->nweights,
					   .given_order = true};
}

static void snapshot_release(struct snapshot *sn)
{
	free(sn->jobs);
	free(sn->keys);
	free(sn->byindex);
	free(sn->running);
	free(sn->assigns);
	free(sn->queues);
	free(sn->nodes);
	free(sn->windows);
	free(sn->qdims);
	memset(sn, 0, sizeof(*sn));
}

/* Why each job waits (kept for state_job_pack to show), then the starts,
 * then the preemptions. */
static void decisions_apply(struct state *s, const struct snapshot *sn,
			    const struct sched_decisions *d, uint64_t mark, int64_t now)
{
	/* a wait that shares another job's reason goes in the pass's table
	 * (a million waiting jobs are not written to); one with its own
	 * reason, or in a class the pass reorders, is written to the job */
	struct pass_waits *pw = &s->waits;
	if ((size_t)sn->njobs + 1 > pw->alloc) {
		/* an eighth more: a queue that grows by a few jobs a pass is
		 * not moved and grown on every pass */
		pw->alloc = (size_t)sn->njobs + 1 + (size_t)sn->njobs / 8;
		pw->ids = xrealloc(pw->ids, sizeof(*pw->ids) * pw->alloc);
		pw->from = xrealloc(pw->from, sizeof(*pw->from) * pw->alloc);
	}
	for (int i = 0; i < sn->njobs; i++) {
		pw->ids[i] = (uint32_t)sn->keys[i].id;
		pw->from[i] = 0;
	}
	for (int c = 0; c < MODEL_MAX_CLASSES; c++) {
		bool in = c < s->sched.nclasses;
		pw->cls_from[c] = in ? sn->cls_from[c] : 0;
		pw->cls_to[c] = !in || s->las[c].nlevels > 1 ? pw->cls_from[c] : sn->cls_to[c];
	}
	for (int i = 0; i < d->nwaits; i++) {
		const struct sched_wait *w = &d->waits[i];
		/* (the pass's class, from the key: the job is not read) */
		bool reordered = s->pass_classes[sn->keys[w->job].cls].las_family != 0;
		if (w->detail || reordered) {
			struct sjob *j = sn->byindex[w->job];
			j->reason_pass = mark;
			if (w->until_ms > 0) {
				j->start_ms = w->until_ms;
				j->start_pass = mark;
			}
			if (w->detail) {
				snprintf(j->job.reason, sizeof(j->job.reason), "%s", w->detail);
				j->reason_from = 0;
			} else {
				j->reason_from = sn->byindex[w->same_as]->job.id;
			}
			pw->from[w->job] = WAIT_OWN;
		} else {
			pw->from[w->job] = (uint32_t)sn->byindex[w->same_as]->job.id;
		}
	}
	pw->n = sn->njobs;
	pw->mark = mark;
	s->resource_waits = 0;
	for (int i = 0; i < d->nwaits; i++) {
		enum sched_wait_reason r = d->waits[i].reason;
		s->resource_waits += r == SCHED_WAIT_RESOURCES || r == SCHED_WAIT_RESERVED ||
				     r == SCHED_WAIT_PREEMPTING || r == SCHED_WAIT_SWITCHES ||
				     r == SCHED_WAIT_PASS_LIMIT;
	}
	for (int i = 0; i < d->nstarts; i++)
		state_apply_start(s, sn->byindex[d->starts[i].job], &d->starts[i], -1, s->nodes,
				  now);
	for (int i = 0; i < d->npreempts; i++)
		state_preempt(s, state_job(s, d->preempts[i].victim),
			      sn->byindex[d->preempts[i].job], now);
	/* elastic gangs take what no one waits for, once every decision holds */
	for (int i = 0; i < d->nstarts; i++)
		state_elastic_started(s, sn->byindex[d->starts[i].job], now);
	/* idle spares are lent to preemptible jobs that wait for accelerators */
	if ((s->nspared || s->sched.nspare_pool) && s->resource_waits) {
		struct sjob **waiting = xcalloc((size_t)d->nwaits + 1, sizeof(*waiting));
		int n = 0;
		for (int i = 0; i < d->nwaits; i++)
			if (d->waits[i].reason == SCHED_WAIT_RESOURCES)
				waiting[n++] = sn->byindex[d->waits[i].job];
		state_spares_lend(s, waiting, n, now);
		free(waiting);
	}
	s->stats.passes++;
	s->stats.placements += (uint64_t)d->placements_tried;
}

/* Could one node's share of j fit on node n as it is now, models and
 * topology aside? Errs towards yes. */
static bool share_fits(const struct state *s, const struct snode *n, const struct sched_job *j)
{
	if (state_node_state(s, n) != NODE_UP || n->agent_stopping || n->pool_spare)
		return false;
	if (n->rec.inv.cpus - n->cpus_used < j->tasks_per_node * j->cpus_per_task)
		return false;
	int whole = 0, room = 0;
	for (int d = 0; d < n->rec.inv.naccel; d++) {
		whole += n->sdev[d].free_milli == MODEL_MILLI;
		room = MAX(room, n->sdev[d].free_milli);
	}
	if (j->gpu_milli >= MODEL_MILLI)
		return whole * MODEL_MILLI >= j->tasks_per_node * j->gpu_milli;
	return j->gpu_milli == 0 || room >= j->gpu_milli;
}

/* Might a pass start j now, or preempt for it? No when its class preempts
 * nobody (not may_preempt, not least attained service), its queue has no
 * guarantee left to reclaim, and fewer nodes than it asks for could hold a
 * share of it in what is free: then a pass would decide nothing new for it
 * (the last one decided the rest, and nothing else changed). */
static bool might_start(const struct state *s, const struct sjob *j)
{
	const struct sclass *c = &s->classes[j->cls];
	if (c->spec.may_preempt || s->las[j->cls].nlevels > 1)
		return true;
	const struct squeue *q = j->queue;
	int64_t need = (int64_t)j->sj.nodes * j->sj.tasks_per_node * j->sj.gpu_milli;
	if (q && q->spec.quota_milli >= 0 && q->use_milli + need <= q->spec.quota_milli)
		return true;
	int nodes = 0;
	for (int i = 0; i < s->nnodes && nodes < j->sj.nodes; i++)
		nodes += share_fits(s, s->nodes[i], &j->sj);
	return nodes >= j->sj.nodes;
}

void state_judge_arrivals(struct state *s, int64_t now)
{
	if (!s->sched_needed) {
		size_t waiting = 0;
		for (size_t i = 0; i < s->narrived && !s->sched_needed; i++) {
			const struct sjob *j = state_job(s, s->arrived[i]);
			/* a job submitted held changes nothing a pass decides */
			if (!j || j->job.state != JOB_PENDING || j->job.held)
				continue;
			waiting++;
			if (might_start(s, j))
				state_want_pass(s);
		}
		if (!s->sched_needed && waiting) {
			s->arrivals.deferred += waiting;
			s->pass_deferred = true;
		}
		s->narrived = 0;
	}
	if (s->pass_deferred && now - s->last_pass_ms >= STATE_DEFER_MS)
		state_want_pass(s);
}

bool state_schedule(struct state *s, int64_t now)
{
	uint64_t mark = ++s->pass_no;
	s->sched_needed = false;
	s->pass_deferred = false;
	s->narrived = 0;
	s->last_pass_ms = now;
	valid_tick(s, now);
	/* restarts in place go first, on the nodes they held, without the pass */
	state_inplace_tick(s, now);
	struct snapshot sn;
	int64_t t0 = tk_mono_us();
	snapshot_build(s, mark, now, &sn);
	struct sched_policy policy;
	sched_policy_of_config(&s->sched, &policy);
	struct sched_decisions d;
	int64_t t1 = tk_mono_us();
	int r = sched_pass(&sn.snap, now, &policy, &d);
	int64_t t2 = tk_mono_us();
	if (r < 0)
		log_err("scheduling pass refused its snapshot: %s", strerror(-r));
	else
		decisions_apply(s, &sn, &d, mark, now);
	s->stats.snapshot_us = t1 - t0;
	s->stats.decide_us = t2 - t1;
	s->stats.apply_us = tk_mono_us() - t2;
	/* it stopped at the pass limit: the rest in the next, as soon as what
	 * waits has been answered */
	bool more = r == 0 && policy.max_starts > 0 && d.nstarts >= policy.max_starts;
	if (more) {
		s->stats.limited++;
		state_want_pass(s);
	}
	sched_decisions_release(&d);
	snapshot_release(&sn);
	return more;
}
