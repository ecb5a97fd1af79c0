/*
 * One scheduling pass (sched_pass): the snapshot checked and indexed, the
 * pending jobs in class order, each priority level a segment whose queues
 * take turns by fair share (order.c), each job decided in its turn (job.c),
 * with reservations for backfill (backfill.c), preemption (preempt.c) and
 * the reasons of waits (wait.c). Where a job goes is placement's (place.c).
 *
 * Jobs arrive sorted by class priority, then submission. Each priority level
 * is a segment; inside it, queues take turns by fair share: the queue whose
 * accelerators in use plus recent use, over its weight, is lowest goes next
 * (a heap), and its oldest job is tried. A job that cannot start:
 *   - may preempt, if its class may or its queue reclaims lent capacity;
 *   - becomes its class's head, with a reservation from the running jobs'
 *     time limits, if its class has none yet;
 *   - otherwise waits, with a reason.
 * Later jobs may use reserved resources only if their time limit ends
 * before the reservation begins (backfill).
 *
 * What is free only shrinks during a pass, so a request shape that failed to
 * fit is not tried again (the shape cache); that keeps a pass over 100,000
 * jobs to a few placements per shape.
 */
#include "pass.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

double sched_decay(double value, double dt_s, double half_life_s)
{
	if (half_life_s <= 0 || dt_s <= 0)
		return value;
	return value * exp2(-dt_s / half_life_s);
}

double sched_usage_age(double usage, int64_t use_milli, double dt_s, double half_life_s)
{
	if (dt_s <= 0)
		return usage;
	return sched_decay(usage, dt_s, half_life_s) + (double)use_milli * dt_s;
}

double sched_usage_recent(double usage, double half_life_s)
{
	return usage * M_LN2 / half_life_s;
}

static bool snapshot_valid(const struct sched_snapshot *s)
{
	if (s->nnodes < 0 || s->njobs < 0 || s->nrunning < 0 || (s->nnodes && !s->nodes) ||
	    (s->njobs && !s->jobs) || (s->nrunning && !s->running) || s->nclasses < 1 ||
	    s->nclasses > MODEL_MAX_CLASSES || !s->classes || s->nqueues < 1 || !s->queues)
		return false;
	for (int c = 0; c < s->nclasses; c++) {
		const struct sched_class *k = &s->classes[c];
		if (k->priority < -SCHED_MAX_PRIORITY || k->priority > SCHED_MAX_PRIORITY ||
		    k->las_level < 0 || k->las_level >= SCHED_LAS_MAX_LEVELS || k->las_family < 0 ||
		    (!k->las_family && k->las_level))
			return false;
	}
	for (int n = 0; n < s->nnodes; n++) {
		const struct sched_node *node = &s->nodes[n];
		if (!node->name || node->ndev < 0 || node->ndev > MODEL_MAX_ACCELS ||
		    (node->ndev && !node->devs))
			return false;
		for (int d = 0; d < node->ndev; d++)
			if (!node->devs[d].model || node->devs[d].free_milli < 0 ||
			    node->devs[d].free_milli > MODEL_MILLI)
				return false;
	}
	if (s->nwindows < 0 || (s->nwindows && !s->windows))
		return false;
	for (int i = 0; i < s->nwindows; i++) {
		const struct sched_window *w = &s->windows[i];
		if (w->bit < -1 || w->bit > 31 || w->nnodes < 0 || (w->nnodes && !w->nodes))
			return false;
		for (int k = 0; k < w->nnodes; k++)
			if (w->nodes[k] < 0 || w->nodes[k] >= s->nnodes)
				return false;
	}
	return true;
}

/* One walk over the running jobs: checks each, adds what it holds to its
 * queue's use, counts the preemptible ones by class (into st->
 * preemptible_below) and lists those held for a pending job. False for an
 * invalid one. */
static bool index_running(struct st *st)
{
	const struct sched_snapshot *s = st->p.snap;
	int *by_class = xcalloc((size_t)s->nclasses, sizeof(int));
	bool ok = true;
	for (int i = 0; i < s->nrunning && ok; i++) {
		const struct sched_running *r = &s->running[i];
		if (r->cls < 0 || r->cls >= s->nclasses || r->queue < 0 || r->queue >= s->nqueues ||
		    r->nnodes < 0 || (r->nnodes && !r->nodes)) {
			ok = false;
			break;
		}
		int64_t milli = 0;
		for (int k = 0; k < r->nnodes && ok; k++) {
			const struct sched_assign *a = &r->nodes[k];
			int ndev =
				a->node >= 0 && a->node < s->nnodes ? s->nodes[a->node].ndev : -1;
			ok = a->ndev >= 0 && a->ndev <= ndev;
			for (int d = 0; d < a->ndev && ok; d++)
				ok = a->devs[d] >= 0 && a->devs[d] < ndev;
			milli += (int64_t)a->ndev * a->milli;
		}
		st->qs[r->queue].use += milli;
		if (r->held_for)
			st->held[st->nheld++] = i;
		else if (!r->stopping)
			by_class[r->cls]++;
	}
	for (int c = 0; c < s->nclasses && ok; c++)
		for (int v = 0; v < s->nclasses; v++)
			if (class_takes(&s->classes[c], &s->classes[v]))
				st->preemptible_below[c] += by_class[v];
	free(by_class);
	return ok;
}

struct sched_key sched_key_of(const struct sched_job *j)
{
	return (struct sched_key){j->id,    j->submit_ms, j->time_limit_s, j->cls,
				  j->queue, j->shape_id,  j->windows};
}

/* The shape of a job by its id in the caller's table: the pass's own, filed
 * on first sight (of_id: the pass's shape of each id, -1 not yet); -1 for an
 * id the table does not hold. */
static int shape_of_id(struct st *st, int *of_id, int nids, int id)
{
	const struct sched_shapes *t = st->p.snap->shapes;
	if (id < 0 || id >= nids)
		return -1;
	if (of_id[id] < 0) {
		const struct sched_job *filed = sched__shapes_get(t, id);
		if (!filed)
			return -1;
		of_id[id] = sched__shape_new(st, filed, filed->shape);
	}
	return of_id[id];
}

/* Are the jobs of pass class c in the order given (sched_snapshot)? */
static bool given_order(const struct st *st, int c)
{
	return st->p.snap->given_order && st->p.snap->classes[c].las_family;
}

/* Whether b comes after a in class order, then submission, then id. */
static bool key_after(int pa, const struct sched_key *a, int pb, const struct sched_key *b)
{
	return pa > pb || (pa == pb && (a->submit_ms < b->submit_ms ||
					(a->submit_ms == b->submit_ms && a->id < b->id)));
}

/* One walk over the pending jobs, in the order given: checks each, files it
 * under its shape and fills st->jrec; tells whether they are in class order.
 * With the caller's keys, the jobs themselves are not read. False for an
 * invalid job. */
static bool index_jobs(struct st *st, bool *sorted)
{
	const struct sched_snapshot *s = st->p.snap;
	const struct sched_shapes *t = s->shapes;
	const struct sched_key *keys = st->keys;
	/* with the caller's table: the pass's shape of each id in it */
	int *of_id = NULL, nids = t ? sched__shapes_ids(t) : 0;
	if (t) {
		of_id = xmalloc(sizeof(int) * ((size_t)nids + 1));
		memset(of_id, 0xff, sizeof(int) * ((size_t)nids + 1));
	}
	*sorted = true;
	int px = 0;
	struct sched_key x = {0}, y;
	bool ok = true;
	for (int i = 0; i < s->njobs && ok; i++) {
		const struct sched_job *j = s->jobs[i];
		/* the jobs lie wherever the caller keeps them: ask for the ones
		 * a little ahead while this one is read */
		if (!keys && i + PREFETCH_AHEAD < s->njobs) {
			const char *ahead = (const char *)s->jobs[i + PREFETCH_AHEAD];
			__builtin_prefetch(ahead);
			if (!t)
				__builtin_prefetch(ahead + 64);
		}
		if (!j) {
			ok = false;
			break;
		}
		y = keys ? keys[i] : sched_key_of(j);
		if (y.cls < 0 || y.cls >= s->nclasses || y.queue < 0 || y.queue >= s->nqueues) {
			ok = false;
			break;
		}
		int k;
		if (t) {
			k = shape_of_id(st, of_id, nids, y.shape_id);
			if (k < 0) {
				ok = false;
				break;
			}
		} else {
			if (j->ngpu_types < 0 || (j->ngpu_types && !j->gpu_types)) {
				ok = false;
				break;
			}
			int n = st->nshapes;
			k = sched__shape_index(st, j);
			if (k == n && !sched__shape_valid(j)) {
				ok = false;
				break;
			}
		}
		st->shapes[k].count++;
		int py = prio(st, y.cls);
		st->jrec[i] = (struct jrec){i, k, y.queue, y.cls};
		if (i > 0 && *sorted)
			*sorted = given_order(st, x.cls) || given_order(st, y.cls)
					  ? px >= py
					  : key_after(px, &x, py, &y);
		x = y;
		px = py;
	}
	free(of_id);
	for (int k = 0; k < st->nshapes; k++)
		st->max_nodes = MAX(st->max_nodes, st->shapes[k].j->nodes);
	return ok;
}

static bool same_types(const char *const *a, int na, const char *const *b, int nb)
{
	if (na != nb)
		return false;
	for (int t = 0; t < na; t++)
		if (a[t] != b[t] && strcasecmp(a[t], b[t]) != 0)
			return false;
	return true;
}

/* Which models each kind of the mix may use, when some kind names any. */
static void mix_models(struct pass *p)
{
	bool typed = false;
	for (int i = 0; i < p->nmix && !typed; i++)
		typed = p->mix[i].ngpu_types > 0;
	if (!typed || p->nmodels == 0)
		return;
	p->mix_ok = xcalloc((size_t)p->nmix * (size_t)p->nmodels, 1);
	for (int i = 0; i < p->nmix; i++) {
		const struct sched_mix_item *k = &p->mix[i];
		for (int m = 0; m < p->nmodels; m++)
			p->mix_ok[(size_t)i * (size_t)p->nmodels + (size_t)m] =
				sched__mix_item_allows(k, p->models[m]);
	}
}

/* The request mix for fractional placement, from the shapes: the pending
 * single-node requests grouped by size and acceptable models, each kind in
 * the order of its first job (what placement must keep room for; multi-node
 * gangs want whole nodes, which best fit keeps). Also which models some job
 * can use only. */
static void from_shapes(struct st *st)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	if (s->mix && s->nmix > 0) {
		p->mix = xcalloc((size_t)s->nmix, sizeof(*p->mix));
		memcpy(p->mix, s->mix, sizeof(*p->mix) * (size_t)s->nmix);
		p->nmix = s->nmix;
	} else {
		p->mix = xcalloc((size_t)st->nshapes + 1, sizeof(*p->mix));
		int total = 0;
		for (int k = 0; k < st->nshapes; k++) {
			const struct sched_job *j = st->shapes[k].j;
			if (j->nodes != 1 || j->gpu_milli == 0)
				continue;
			struct sched_mix_item it =
				sched_mix_item_of(j->tasks_per_node, j->gpu_milli,
						  j->tasks_per_node * j->cpus_per_task, j->mem_mib);
			it.gpu_types = j->gpu_types;
			it.ngpu_types = j->ngpu_types;
			int i = 0;
			while (i < p->nmix &&
			       !(p->mix[i].milli == it.milli && p->mix[i].devices == it.devices &&
				 p->mix[i].cpus == it.cpus && p->mix[i].mem_mib == it.mem_mib &&
				 same_types(p->mix[i].gpu_types, p->mix[i].ngpu_types, it.gpu_types,
					    it.ngpu_types)))
				i++;
			if (i == p->nmix)
				p->mix[p->nmix++] = it;
			p->mix[i].p += st->shapes[k].count;
			total += st->shapes[k].count;
		}
		for (int i = 0; i < p->nmix; i++)
			p->mix[i].p /= total;
	}
	mix_models(p);
	/* whether some waiting job can use a model only: taking it costs them */
	for (int k = 0; k < st->nshapes; k++) {
		const struct sched_job *j = st->shapes[k].j;
		if (j->ngpu_types != 1 || j->gpu_milli <= 0)
			continue;
		/* the last model of that name */
		for (int m = p->nmodels - 1; m >= 0; m--)
			if (strcasecmp(j->gpu_types[0], p->models[m]) == 0) {
				p->model_exclusive[m] = 1;
				break;
			}
	}
}

static int cmp_held(const void *a, const void *b, void *arg)
{
	const struct sched_snapshot *s = arg;
	const struct sched_running *x = &s->running[*(const int *)a],
				   *y = &s->running[*(const int *)b];
	if (x->held_for != y->held_for)
		return x->held_for < y->held_for ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_order(const void *a, const void *b, void *arg)
{
	const struct st *st = arg;
	const struct jrec *x = &st->jrec[*(const int *)a], *y = &st->jrec[*(const int *)b];
	int px = prio(st, x->cls), py = prio(st, y->cls);
	if (px != py)
		return px > py ? -1 : 1;
	if (given_order(st, x->cls) || given_order(st, y->cls))
		return x->ji - y->ji;
	int64_t sx = st->keys ? st->keys[x->ji].submit_ms : st->jobs[x->ji]->submit_ms;
	int64_t sy = st->keys ? st->keys[y->ji].submit_ms : st->jobs[y->ji]->submit_ms;
	if (sx != sy)
		return sx < sy ? -1 : 1;
	int64_t ix = jrec_id(st, x), iy = jrec_id(st, y);
	return ix < iy ? -1 : ix > iy;
}

/* A segment (jobs order[seg .. end), each queue's counted in qs[].tail)
 * that comes after the pass started as many as it may: its jobs wait for
 * the next pass, queue by queue in the order the queues' shares give
 * (which no longer change), each queue's oldest first, written straight
 * to their places among the waits. */
static void past_limit(struct st *st, int seg, int end)
{
	const struct sched_snapshot *snap = st->p.snap;
	struct sched_decisions *d = st->d;
	st->nheap = 0;
	for (int q = 0; q < snap->nqueues; q++) {
		st->qs[q].score = qscore(st, q);
		st->qs[q].head = 0;
		if (st->qs[q].tail)
			sched__heap_push(st, q);
	}
	int at = d->nwaits;
	while (st->nheap) {
		int q = st->heap[0];
		st->qs[q].head = at; /* where its first goes */
		at += st->qs[q].tail;
		sched__heap_pop(st);
	}
	for (int k = seg; k < end; k++) {
		const struct jrec *jr = &st->jrec[st->order[k]];
		d->waits[st->qs[jr->queue].head++] =
			(struct sched_wait){jr->ji, SCHED_WAIT_PASS_LIMIT, st->limit_job, 0, NULL};
	}
	d->nwaits = at;
}

/* Everything the pass took, back: its working arrays to its keep (all of
 * them come from it), then the keep itself when the pass made its own.
 * The one release path, for a pass cut short as for one that ran. */
static void pass_release(struct st *st)
{
	struct sched_keep *k = st->p.keep;
	for (int i = 0; i < st->nresv; i++)
		free(st->resv[i].a);
	void *arrays[] = {
		st->resv,
		st->order,
		st->run,
		st->qs,
		st->heap,
		st->class_has_resv,
		st->victim,
		st->end_heap,
		st->end_list,
		st->held,
		st->preemptible_below,
		st->victim_order,
		st->node_models,
		st->victim_buf,
		st->vfit,
		st->vseen,
		st->vnodes,
		st->vcnt,
		st->lends,
		st->shape_slot,
		st->jrec,
		st->pl.nodes,
		st->win_ok,
	};
	for (size_t i = 0; i < ARRAY_SIZE(arrays); i++)
		sched__keep_release(k, arrays[i]);
	for (int c = 0; c < MODEL_MAX_CLASSES; c++)
		sched__relset_release(&st->p, &st->rel[c]);
	sched__relset_release(&st->p, &st->recl);
	sched__pick_release(&st->p, &st->pick);
	for (int i = 0; i < st->nshapes; i++) {
		free(st->shapes[i].model_ok);
		sched__memo_free(&st->p, st->shapes[i].memo);
	}
	sched__keep_release(k, st->shapes);
	sched__quota_release(st);
	strbuf_release(&st->sb);
	if (st->placed)
		sched__place_release(&st->p);
	sched__constraints_release(&st->p);
	if (st->p.snap->keep)
		sched__keep_pass_end(k);
	else
		sched_keep_free(k);
}

int sched_pass(const struct sched_snapshot *snap, int64_t now_ms, const struct sched_policy *policy,
	       struct sched_decisions *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (!snapshot_valid(snap))
		return -EINVAL;
	struct st st;
	memset(&st, 0, sizeof(st));
	st.d = ret;
	st.jobs = snap->jobs;
	st.keys = snap->shapes ? snap->keys : NULL;
	st.blocked_all = -1;
	st.limit_job = -1;
	st.epoch = 1;
	st.p.snap = snap;
	st.p.any_taint = -1;
	st.p.policy = policy;
	st.p.now = now_ms;
	/* the caller's memory for the large arrays, or one for this pass */
	st.p.keep = snap->keep ? snap->keep : sched_keep_new();
	for (int c = 0; c < snap->nclasses; c++)
		st.prio_of[c] = class_rank(&snap->classes[c]);
	int nj = snap->njobs;
	struct sched_keep *keep = st.p.keep;
	strbuf_init(&st.sb);
	st.qs = sched__keep_zalloc(keep, (size_t)snap->nqueues + 1, sizeof(*st.qs));
	st.held = sched__keep_alloc(keep, sizeof(int) * ((size_t)snap->nrunning + 1));
	st.preemptible_below = sched__keep_zalloc(keep, (size_t)snap->nclasses + 1, sizeof(int));
	st.jrec = sched__keep_alloc(keep, sizeof(*st.jrec) * ((size_t)nj + 1));
	bool sorted;
	if (!index_running(&st) || !index_jobs(&st, &sorted)) {
		pass_release(&st);
		return -EINVAL;
	}
	sched__place_init(&st.p);
	st.placed = true;
	sched__quota_init(&st);
	from_shapes(&st);
	st.order = sched__keep_alloc(keep, sizeof(int) * ((size_t)nj + 1));
	st.run = sched__keep_alloc(keep, sizeof(*st.run) * ((size_t)nj + 1));
	st.heap = sched__keep_zalloc(keep, (size_t)snap->nqueues + 1, sizeof(int));
	st.class_has_resv = sched__keep_zalloc(keep, (size_t)snap->nclasses + 1, sizeof(bool));
	st.victim = sched__keep_zalloc(keep, (size_t)snap->nrunning + 1, sizeof(bool));
	st.end_heap = sched__keep_alloc(keep, sizeof(*st.end_heap) * ((size_t)snap->nrunning + 1));
	st.end_list = sched__keep_alloc(keep, sizeof(*st.end_list) * ((size_t)snap->nrunning + 1));
	qsort_r(st.held, (size_t)st.nheld, sizeof(int), cmp_held, (void *)snap);
	st.pl.nodes = sched__keep_zalloc(keep, (size_t)st.max_nodes + 1, sizeof(*st.pl.nodes));
	for (int q = 0; q < snap->nqueues; q++)
		st.qs[q].recent = snap->queues[q].recent_milli;
	for (int q = 0; q < snap->nqueues; q++)
		st.qs[q].quota_job = -1;
	/* every job gets a start or a wait: room for them all at once */
	ret->keep = snap->keep; /* the caller's, which outlives this pass */
	ret->waits = sched__keep_alloc(ret->keep, sizeof(*ret->waits) * ((size_t)nj + 1));
	ret->waits_alloc = (size_t)nj + 1;
	/* class order, then submission: usually given so; sorted if not */
	for (int i = 0; i < nj; i++)
		st.order[i] = i;
	if (!sorted)
		qsort_r(st.order, (size_t)nj, sizeof(int), cmp_order, &st);
	for (int seg = 0; seg < nj;) {
		/* the segment's jobs, queue by queue, oldest first: counted, then
		 * copied to their queue's run */
		for (int q = 0; q < snap->nqueues; q++)
			st.qs[q].head = st.qs[q].tail = 0;
		int level = prio(&st, st.jrec[st.order[seg]].cls);
		int end = seg;
		for (; end < nj; end++) {
			const struct jrec *jr = &st.jrec[st.order[end]];
			if (prio(&st, jr->cls) != level)
				break;
			st.qs[jr->queue].tail++;
		}
		if (st.limit_job >= 0) {
			past_limit(&st, seg, end);
			seg = end;
			assert_pass_consistent(&st, seg);
			continue;
		}
		for (int q = 0, at = 0; q < snap->nqueues; q++) {
			st.qs[q].head = at;
			at += st.qs[q].tail;
			st.qs[q].tail = st.qs[q].head;
		}
		for (int k = seg; k < end; k++) {
			const struct jrec *jr = &st.jrec[st.order[k]];
			st.run[st.qs[jr->queue].tail++] = *jr;
		}
		st.nheap = 0;
		for (int q = 0; q < snap->nqueues; q++) {
			st.qs[q].score = qscore(&st, q);
			if (st.qs[q].head < st.qs[q].tail)
				sched__heap_push(&st, q);
		}
		while (st.nheap) {
			/* the first queue's jobs go while its share does not change
			 * (only its own starts change it) */
			int q = st.heap[0];
			struct qstate *qs = &st.qs[q];
			double before = qs->score;
			if (st.limit_job >= 0) {
				/* the pass started as many as it may: every job left
				 * waits for the next, as the first such one says (no
				 * share changes any more: each queue goes whole) */
				while (qs->head < qs->tail)
					wait_as(&st, st.run[qs->head++].ji, SCHED_WAIT_PASS_LIMIT,
						st.limit_job);
			} else {
				do {
					const struct jrec *jr = &st.run[qs->head++];
					if (!waits_as_before(&st, jr))
						sched__process(&st, jr);
				} while (qs->head < qs->tail && qs->score == before);
			}
			if (qs->head == qs->tail)
				sched__heap_pop(&st);
			else
				sched__heap_fix(&st, 0);
		}
		seg = end;
		assert_pass_consistent(&st, seg);
	}
	/* the reservations go out with the decisions; holds for victims do not */
	ret->resvs = xcalloc((size_t)st.nresv + 1, sizeof(*ret->resvs));
	for (int i = 0; i < st.nresv; i++) {
		if (st.resv[i].until == 0) {
			free(st.resv[i].a);
			continue;
		}
		ret->resvs[ret->nresvs++] = (struct sched_resv){st.resv[i].job, st.resv[i].until,
								st.resv[i].n, st.resv[i].a};
	}
	st.nresv = 0; /* (what they hold went out with the decisions) */
	pass_release(&st);
	return 0;
}

#ifdef TENK_DEBUG
void assert_pass_consistent(const struct st *st, int ndone)
{
	const struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	const struct sched_decisions *d = st->d;
	/* 1, 2: what is free against the snapshot less the starts */
	int *cpus = xmalloc(sizeof(int) * ((size_t)p->nn + 1));
	int64_t *mem = xmalloc(sizeof(int64_t) * ((size_t)p->nn + 1));
	int *dev = xmalloc(sizeof(int) * ((size_t)p->ndev + 1));
	for (int n = 0; n < p->nn; n++) {
		cpus[n] = s->nodes[n].cpus_free;
		mem[n] = s->nodes[n].mem_free_mib;
		for (int k = 0; k < s->nodes[n].ndev; k++)
			dev[p->dev_off[n] + k] = s->nodes[n].devs[k].free_milli;
	}
	for (int i = 0; i < d->nstarts; i++)
		for (int k = 0; k < d->starts[i].nnodes; k++) {
			const struct sched_assign *a = &d->starts[i].nodes[k];
			cpus[a->node] -= a->cpus;
			mem[a->node] -= a->mem_mib;
			for (int x = 0; x < a->ndev; x++)
				dev[p->dev_off[a->node] + a->devs[x]] -= a->milli;
		}
	for (int n = 0; n < p->nn; n++) {
		assert(p->free.cpus[n] <= cpus[n] && p->free.mem[n] <= mem[n]);
		assert(p->free.cpus[n] >= 0 || s->nodes[n].cpus_free < 0);
		assert(p->free.mem[n] >= 0 || s->nodes[n].mem_free_mib < 0);
		for (int k = 0; k < s->nodes[n].ndev; k++) {
			int x = p->dev_off[n] + k;
			assert(p->free.dev[x] <= dev[x] && dev[x] >= 0 && p->free.dev[x] >= 0);
		}
	}
	free(cpus);
	free(mem);
	free(dev);
	/* 3 */
	assert_place_consistent(p);
	/* 4 */
	int64_t *use = xcalloc((size_t)s->nqueues, sizeof(int64_t));
	int64_t *reclaim = xcalloc((size_t)s->nqueues, sizeof(int64_t));
	for (int i = 0; i < s->nrunning; i++) {
		use[s->running[i].queue] += running_milli(&s->running[i]);
		if (st->victim[i])
			reclaim[s->running[i].queue] += running_milli(&s->running[i]);
	}
	for (int i = 0; i < d->nstarts; i++)
		use[st->jobs[d->starts[i].job]->queue] += job_milli(st->jobs[d->starts[i].job]);
	for (int q = 0; q < s->nqueues; q++) {
		assert(st->qs[q].use == use[q]);
		assert(st->qs[q].reclaiming == reclaim[q] && reclaim[q] <= use[q]);
	}
	free(use);
	free(reclaim);
	/* 5: the decided jobs are the first ndone in order, each once */
	assert(d->nstarts + d->nwaits == ndone);
	int *rank = xmalloc(sizeof(int) * ((size_t)s->njobs + 1));
	for (int i = 0; i < s->njobs; i++)
		rank[i] = -1;
	for (int k = 0; k < ndone; k++)
		rank[st->order[k]] = k;
	bool *seen = xcalloc((size_t)s->njobs + 1, sizeof(bool));
	for (int i = 0; i < d->nstarts; i++) {
		int ji = d->starts[i].job;
		assert(rank[ji] >= 0 && !seen[ji]);
		seen[ji] = true;
	}
	for (int i = 0; i < d->nwaits; i++) {
		const struct sched_wait *w = &d->waits[i];
		assert(rank[w->job] >= 0 && !seen[w->job]);
		seen[w->job] = true;
		assert(w->same_as < 0 ? w->detail != NULL : w->detail == NULL);
		assert(w->same_as < 0 || (rank[w->same_as] >= 0 && seen[w->same_as]));
	}
	free(seen);
	free(rank);
	/* 6 */
	int nvict = 0;
	for (int i = 0; i < s->nrunning; i++)
		if (st->victim[i]) {
			nvict++;
			assert(!s->running[i].stopping && !s->running[i].held_for);
		}
	assert(nvict == d->npreempts);
	(void)rank;
}
#endif

void sched_decisions_release(struct sched_decisions *d)
{
	for (int i = 0; i < d->nstarts; i++)
		free(d->starts[i].nodes);
	for (int i = 0; i < d->nwaits; i++)
		free(d->waits[i].detail);
	for (int i = 0; i < d->nresvs; i++)
		free(d->resvs[i].nodes);
	free(d->resvs);
	free(d->starts);
	free(d->preempts);
	sched__keep_release(d->keep, d->waits);
	memset(d, 0, sizeof(*d));
}

bool sched_could_ever_hold(const struct sched_node *nodes, int n, const struct sched_job *job)
{
	/* every node up and empty; the job alone, in a class and a queue of
	 * its own, without a limit in time or quota */
	struct sched_node *empty = xcalloc((size_t)n + 1, sizeof(*empty));
	int ndev = 0;
	for (int i = 0; i < n; i++)
		ndev += nodes[i].ndev;
	struct sched_dev *devs = xcalloc((size_t)ndev + 1, sizeof(*devs)), *d = devs;
	for (int i = 0; i < n; i++) {
		empty[i] = nodes[i];
		empty[i].schedulable = true;
		empty[i].cpus_free = nodes[i].cpus_total;
		empty[i].mem_free_mib = nodes[i].mem_total_mib;
		empty[i].devs = d;
		for (int k = 0; k < nodes[i].ndev; k++, d++) {
			*d = nodes[i].devs[k];
			d->free_milli = MODEL_MILLI;
		}
	}
	struct sched_job j = *job;
	j.cls = 0;
	j.queue = 0;
	j.shape_id = -1;
	j.time_limit_s = 0;
	const struct sched_job *jobs[1] = {&j};
	struct sched_class cls = {.name = "any"};
	struct sched_queue q = {.name = "any", .quota_milli = -1, .borrow_milli = -1, .weight = 1};
	struct sched_snapshot snap = {.nodes = empty,
				      .nnodes = n,
				      .jobs = jobs,
				      .njobs = 1,
				      .classes = &cls,
				      .nclasses = 1,
				      .queues = &q,
				      .nqueues = 1};
	struct sched_policy policy = {0};
	struct sched_decisions dec;
	/* a snapshot it calls inconsistent proves nothing: not refused */
	bool ok = sched_pass(&snap, j.submit_ms, &policy, &dec) < 0 || dec.nstarts > 0;
	sched_decisions_release(&dec);
	free(devs);
	free(empty);
	return ok;
}

void sched_describe_need(const struct sched_job *j, struct strbuf *sb)
{
	sched__describe_need(NULL, j, sb);
}
