/*
 * The simulator's engine: a discrete-event loop with a virtual clock that
 * drives the production scheduler. Events are arrivals, finishes (and time
 * limits), device failures and repairs, and samples of the cluster's state;
 * after the events of one instant, a scheduling pass runs (at most once per
 * pass interval, as a busy server coalesces them) and its decisions are
 * applied: starts take resources, preempted jobs stop at once and go back to
 * the queue, jobs that can never fit are dropped.
 *
 * Work and checkpoints: a job needs work_ms of running to complete. An
 * attempt after the first spends restart_cost_ms restoring first; then it
 * works in periods of its checkpoint interval, each ended by a checkpoint
 * that blocks it checkpoint_cost_ms. When it is stopped early (preempted, or
 * a device under it failed) it keeps the work up to its last checkpoint and
 * loses the rest; device-time spent on lost work, restarts and checkpoints
 * is what the effective training time leaves out.
 *
 * Failures are a Poisson process per device (rate 1/MTBF), drawn for the
 * whole cluster at rate devices/MTBF and thinned: a draw that lands on a
 * device already down is skipped, which is exact for independent devices.
 *
 * Restarts in place and spares, as the server decides them (DESIGN.md §4;
 * sched_replace, sched_pool_refill): a gang whose device failed keeps its
 * other nodes and starts its next attempt at once, the failed node's share
 * taken by one of its own spares, the cluster's spare pool or a free node;
 * where none can, it waits in its queue. A gang with spares holds them
 * (charged to its queue, idle device-time that keeps no work) and tops
 * them up from free nodes.
 */
#include "sim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum ev_type { EV_FINISH, EV_REPAIR, EV_FAIL, EV_ARRIVE, EV_SAMPLE, EV_PASS, EV_LEVEL };

struct ev {
	int64_t t;
	int type;
	int a, b;
	uint64_t seq;
};

enum jst { J_FUTURE, J_PENDING, J_RUNNING, J_ENDED };

struct jstate {
	enum jst st;
	int slot; /* in run[] while running */
	int attempt;
	int64_t remaining_ms; /* work still to do */
	int64_t start_ms;     /* of the current attempt */
	int64_t pend_since;
	int64_t milli;	 /* devices held, milli */
	int64_t ckpt_ms; /* its checkpoint interval (0: never) */
	/* least attained service: its configured class, the service it has
	 * received (accelerator-seconds, every attempt since it last went back
	 * to the first level), how long it has run (every attempt) */
	int base;
	double service;
	int64_t ran_ms;
	double received; /* accelerator-seconds over its attempts, never forgotten */
	double gittins;	 /* its index during a pass; -1: none */
	struct sched_assign *a;
	int na;
	/* its spares (sim_options.spares): held idle since sp_since */
	struct sched_assign *sp;
	int nsp;
	int64_t sp_milli, sp_since;
	bool drop; /* marked during a pass */
};

struct eng {
	const struct sim_cluster *cl;
	const struct sim_trace *tr;
	const struct sim_options *o;
	struct sim_result *res;
	/* the cluster */
	struct sched_node *nodes;
	struct sched_dev *devs;
	int *dev_off;
	bool *failed;
	int ndev;
	struct sched_cluster *scl;
	struct sched_shapes *shapes; /* every trace job's request, filed once */
	struct sched_keep *keep;     /* the passes' large arrays, kept */
	int64_t alloc_milli;	     /* held by jobs */
	/* per pool (the last: nodes in none), held by jobs, time-weighted */
	int64_t pool_hold[MODEL_MAX_POOLS + 1];
	double pool_int[MODEL_MAX_POOLS + 1];
	double pool_arr_int[MODEL_MAX_POOLS + 1];
	int busy; /* devices with something on them */
	/* jobs */
	struct sched_job *sj;
	const char **type_ptrs;
	struct jstate *js;
	int *pend;
	int npend;
	size_t pend_alloc;
	const struct sched_job **pend_ptrs;
	size_t pend_ptrs_alloc;
	struct sched_running *run;
	int nrun;
	int *run_job;
	int arrivals_left;
	/* classes (levels of "las" classes expanded) and queues */
	struct sched_class classes[MODEL_MAX_CLASSES];
	int nclasses;
	struct sched_las las[MODEL_MAX_CLASSES]; /* per configured class */
	int first[MODEL_MAX_CLASSES];		 /* its first pass class */
	bool any_las;
	/* finished jobs' service by kind (Gittins index); NULL: no class asks */
	struct sched_las_history *hist;
	struct sched_las_place *places; /* gittins_order's */
	int *was;
	size_t places_alloc, was_alloc;
	int *porder;	  /* the pending jobs in the order the pass is given them */
	int64_t level_at; /* a pass is queued then for a running job's next level (0: none) */
	struct sched_queue *queues;
	double *qusage; /* decayed milli-seconds, as the server keeps it */
	int64_t *quse;	/* milli held now */
	double *qused;	/* milli-ms used, for the shares */
	int64_t usage_at;
	/* events */
	struct ev *heap;
	int nheap;
	size_t heap_alloc;
	uint64_t seq;
	int64_t now;
	bool want_pass, pass_queued;
	int64_t last_pass;
	int repairs_pending;
	bool fail_queued;
	uint64_t rng;
	/* restarts in place: the cluster's spare pool, and scratch */
	bool *pool, *out, *scratch;
	int *changed;
	/* the mix for the fragmentation measure */
	struct sched_mix_item *fmix;
	int nfmix;
	/* accounting */
	int64_t last_t;
	double alloc_int, busy_int; /* integrals over time, milli-ms and device-ms */
	double frag_sum;
	int frag_n;
	double used, lost; /* milli-ms */
	double saving;	   /* ... of lost: writing periodic checkpoints */
	double spare_held; /* milli-ms held idle as spares (in used and lost) */
	int64_t first_submit, last_end;
	int64_t last_submit;
	double alloc_arr_int; /* alloc_int up to the last submission */
	int64_t sample_dt;
	size_t series_alloc;
	struct strbuf sb;
};

/* ---- events ------------------------------------------------------------------------------ */

static bool ev_less(const struct ev *x, const struct ev *y)
{
	if (x->t != y->t)
		return x->t < y->t;
	if (x->type != y->type)
		return x->type < y->type;
	return x->seq < y->seq;
}

static void push(struct eng *e, int64_t t, int type, int a, int b)
{
	xgrow(&e->heap, &e->heap_alloc, (size_t)e->nheap + 1, sizeof(*e->heap));
	int i = e->nheap++;
	struct ev v = {t, type, a, b, e->seq++};
	while (i > 0 && ev_less(&v, &e->heap[(i - 1) / 2])) {
		e->heap[i] = e->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	e->heap[i] = v;
}

static struct ev pop(struct eng *e)
{
	struct ev top = e->heap[0];
	struct ev last = e->heap[--e->nheap];
	int i = 0;
	for (;;) {
		int c = 2 * i + 1;
		if (c >= e->nheap)
			break;
		if (c + 1 < e->nheap && ev_less(&e->heap[c + 1], &e->heap[c]))
			c++;
		if (!ev_less(&e->heap[c], &last))
			break;
		e->heap[i] = e->heap[c];
		i = c;
	}
	if (e->nheap > 0)
		e->heap[i] = last;
	return top;
}

static uint64_t rng_next(struct eng *e)
{
	uint64_t z = (e->rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double rng_unit(struct eng *e)
{
	return (double)(rng_next(e) >> 11) * (1.0 / 9007199254740992.0);
}

static void next_failure(struct eng *e);

/* The restore an attempt of j spends before it works. */
static int64_t restart_of(const struct eng *e, int j)
{
	return e->js[j].attempt > 1 ? e->o->restart_cost_ms : 0;
}

/* How long j's current attempt runs to do `work`: its restart, then
 * periods of work each ended by a checkpoint, the last without one. */
static int64_t wall_for(const struct eng *e, int j, int64_t work)
{
	int64_t t = e->js[j].ckpt_ms, c = e->o->checkpoint_cost_ms;
	int64_t k = t > 0 && work > 0 ? (work - 1) / t : 0;
	return restart_of(e, j) + work + k * c;
}

/* Of `ran` ms of j's current attempt: the work done, and (*kept) the work
 * its last checkpoint holds. */
static int64_t work_of(const struct eng *e, int j, int64_t ran, int64_t *kept)
{
	int64_t t = e->js[j].ckpt_ms, c = e->o->checkpoint_cost_ms;
	int64_t u = MAX(0, ran - restart_of(e, j));
	if (t <= 0) {
		*kept = 0;
		return u;
	}
	int64_t k = u / (t + c);
	*kept = k * t;
	return k * t + MIN(u - k * (t + c), t);
}

/* Of `ran` ms of j's current attempt: the time its periodic checkpoints
 * took (those it finished). */
static int64_t saves_of(const struct eng *e, int j, int64_t ran)
{
	int64_t t = e->js[j].ckpt_ms, c = e->o->checkpoint_cost_ms;
	int64_t u = MAX(0, ran - restart_of(e, j));
	return t > 0 ? u / (t + c) * c : 0;
}

/* A job's checkpoint interval: the one given, or with checkpoint_auto
 * Young/Daly's sqrt(2 C M) for its own mean time between failures M (one
 * device's over the devices it holds, a fraction counting as one). */
static int64_t checkpoint_interval(const struct sim_options *o, const struct sched_job *j)
{
	if (!o->checkpoint_auto)
		return o->checkpoint_s * 1000;
	int64_t per_task = (j->gpu_milli + MODEL_MILLI - 1) / MODEL_MILLI;
	int64_t devs = MAX(1, (int64_t)j->nodes * j->tasks_per_node * per_task);
	if (o->mtbf_gpu_h <= 0 || o->checkpoint_cost_ms <= 0)
		return 0;
	double m = o->mtbf_gpu_h * 3600e3 / (double)devs;
	return MAX(1000, (int64_t)llround(sqrt(2.0 * (double)o->checkpoint_cost_ms * m)));
}

/* ---- resources --------------------------------------------------------------------------- */

/* The spares job j holds (0: none): a gang that restarts in place. */
static int spares_wanted(const struct eng *e, int j)
{
	return e->o->restart != RESTART_REQUEUE && e->tr->jobs[j].nodes > 1 ? e->o->spares : 0;
}

/* Does j's next attempt start in place after a failure (as the server's
 * default: for gangs of several nodes or with spares)? */
static bool wants_inplace(const struct eng *e, int j)
{
	switch (e->o->restart) {
	case RESTART_IN_PLACE:
		return true;
	case RESTART_REQUEUE:
		return false;
	default:
		return e->tr->jobs[j].nodes > 1;
	}
}

/* milli held (or given back) on a node of these pools. */
static void pools_hold(struct eng *e, uint64_t pools, int64_t milli)
{
	int np = e->o->sched.npools;
	if (!np || !milli)
		return;
	for (int p = 0; p < np; p++)
		if (pools & (1ULL << p))
			e->pool_hold[p] += milli;
	if (pools & MODEL_POOL_NONE)
		e->pool_hold[np] += milli;
}

static void hold(struct eng *e, const struct sched_assign *a, int n, int sign)
{
	for (int i = 0; i < n; i++) {
		struct sched_node *node = &e->nodes[a[i].node];
		node->cpus_free -= sign * a[i].cpus;
		node->mem_free_mib -= sign * a[i].mem_mib;
		for (int k = 0; k < a[i].ndev; k++) {
			struct sched_dev *d = &e->devs[e->dev_off[a[i].node] + a[i].devs[k]];
			bool was_busy = d->free_milli < MODEL_MILLI;
			d->free_milli -= sign * a[i].milli;
			bool is_busy = d->free_milli < MODEL_MILLI;
			e->busy += (int)is_busy - (int)was_busy;
			e->alloc_milli += sign * a[i].milli;
		}
		pools_hold(e, node->pools, sign * (int64_t)a[i].ndev * a[i].milli);
	}
}

/* The idle device-time j's spares were held up to now: used, and lost. */
static void spares_account(struct eng *e, int j)
{
	struct jstate *s = &e->js[j];
	double held = (double)(e->now - s->sp_since) * (double)s->sp_milli;
	e->used += held;
	e->lost += held;
	e->spare_held += held;
	e->qused[e->sj[j].queue] += held;
	s->sp_since = e->now;
}

static void spares_take(struct eng *e, int j, const struct sched_assign *a, int n)
{
	struct jstate *s = &e->js[j];
	if (n <= 0)
		return;
	spares_account(e, j);
	s->sp = xrealloc(s->sp, sizeof(*a) * (size_t)(s->nsp + n));
	memcpy(&s->sp[s->nsp], a, sizeof(*a) * (size_t)n);
	s->nsp += n;
	hold(e, a, n, +1);
	for (int i = 0; i < n; i++) {
		s->sp_milli += (int64_t)a[i].ndev * a[i].milli;
		e->quse[e->sj[j].queue] += (int64_t)a[i].ndev * a[i].milli;
	}
}

/* Gives back j's spares [from, nsp). */
static void spares_give(struct eng *e, int j, int from)
{
	struct jstate *s = &e->js[j];
	if (from >= s->nsp)
		return;
	spares_account(e, j);
	hold(e, &s->sp[from], s->nsp - from, -1);
	for (int i = from; i < s->nsp; i++) {
		s->sp_milli -= (int64_t)s->sp[i].ndev * s->sp[i].milli;
		e->quse[e->sj[j].queue] -= (int64_t)s->sp[i].ndev * s->sp[i].milli;
	}
	s->nsp = from;
	e->want_pass = true;
}

/* Gives back j's spare k (the last takes its place). */
static void spare_drop(struct eng *e, int j, int k)
{
	struct jstate *s = &e->js[j];
	spares_account(e, j);
	hold(e, &s->sp[k], 1, -1);
	int64_t milli = (int64_t)s->sp[k].ndev * s->sp[k].milli;
	s->sp_milli -= milli;
	e->quse[e->sj[j].queue] -= milli;
	s->sp[k] = s->sp[--s->nsp];
	e->want_pass = true;
}

static int cmp_pend(const struct eng *e, int x, int y)
{
	const struct sched_job *a = &e->sj[x], *b = &e->sj[y];
	int pa = e->classes[a->cls].priority, pb = e->classes[b->cls].priority;
	if (pa != pb)
		return pa > pb ? -1 : 1;
	if (a->submit_ms != b->submit_ms)
		return a->submit_ms < b->submit_ms ? -1 : 1;
	return x < y ? -1 : x > y;
}

static void enqueue(struct eng *e, int j)
{
	int lo = 0, hi = e->npend;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (cmp_pend(e, e->pend[mid], j) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	xgrow(&e->pend, &e->pend_alloc, (size_t)e->npend + 1, sizeof(int));
	memmove(&e->pend[lo + 1], &e->pend[lo], sizeof(int) * (size_t)(e->npend - lo));
	e->pend[lo] = j;
	e->npend++;
	e->js[j].st = J_PENDING;
	e->js[j].pend_since = e->now;
	e->want_pass = true;
}

static void end_job(struct eng *e, int j, enum sim_job_state how)
{
	e->js[j].st = J_ENDED;
	e->res->jobs[j].state = how;
	if (how == SIM_DONE || how == SIM_TIMEOUT) {
		e->res->jobs[j].end_ms = e->now;
		e->last_end = MAX(e->last_end, e->now);
	}
}

static void describe_devices(struct eng *e, int j)
{
	struct jstate *s = &e->js[j];
	strbuf_reset(&e->sb);
	for (int i = 0; i < s->na; i++) {
		const struct sched_assign *a = &s->a[i];
		strbuf_addf(&e->sb, "%s%s:", i ? ";" : "", e->nodes[a->node].name);
		for (int k = 0; k < a->ndev; k++)
			strbuf_addf(&e->sb, "%s%d", k ? "," : "", a->devs[k]);
		if (a->milli < MODEL_MILLI && a->ndev)
			strbuf_addf(&e->sb, "@%d", a->milli);
	}
	free(e->res->jobs[j].devices);
	e->res->jobs[j].devices = xstrdup(e->sb.buf);
}

static void start(struct eng *e, int j, const struct sched_assign *a, int n)
{
	struct jstate *s = &e->js[j];
	/* a gang with spares is placed with them beside it, as in the server */
	int nn = e->tr->jobs[j].nodes;
	if (n > nn) {
		spares_take(e, j, a + nn, n - nn);
		n = nn;
	}
	struct sim_job_result *r = &e->res->jobs[j];
	s->a = xmalloc(sizeof(*a) * (size_t)n);
	memcpy(s->a, a, sizeof(*a) * (size_t)n);
	s->na = n;
	hold(e, a, n, +1);
	s->st = J_RUNNING;
	s->attempt++;
	s->start_ms = e->now;
	s->milli = 0;
	for (int i = 0; i < n; i++)
		s->milli += (int64_t)a[i].ndev * a[i].milli;
	r->attempts = s->attempt;
	r->wait_ms += e->now - s->pend_since;
	if (r->start_ms < 0)
		r->start_ms = e->now;
	const struct sched_job *sj = &e->sj[j];
	e->quse[sj->queue] += s->milli;
	/* its slot among the running */
	s->slot = e->nrun;
	struct sched_running *ru = &e->run[e->nrun];
	e->run_job[e->nrun++] = j;
	*ru = (struct sched_running){.id = sj->id,
				     .cls = sj->cls,
				     .queue = sj->queue,
				     .start_ms = e->now,
				     .time_limit_s = sj->time_limit_s,
				     .nnodes = n,
				     .nodes = s->a};
	int64_t run_for =
		s->remaining_ms == SIM_FOREVER ? SIM_FOREVER : wall_for(e, j, s->remaining_ms);
	if (sj->time_limit_s && run_for > sj->time_limit_s * 1000)
		run_for = sj->time_limit_s * 1000;
	if (run_for != SIM_FOREVER)
		push(e, e->now + run_for, EV_FINISH, j, s->attempt);
	if (e->o->keep_devices)
		describe_devices(e, j);
	next_failure(e);
}

/* Takes a running job off its devices; returns how long it ran. */
static int64_t stop(struct eng *e, int j)
{
	struct jstate *s = &e->js[j];
	hold(e, s->a, s->na, -1);
	int64_t ran = e->now - s->start_ms;
	s->service += (double)ran * (double)s->milli / 1e6;
	s->received += (double)ran * (double)s->milli / 1e6;
	s->ran_ms += ran;
	e->used += (double)ran * (double)s->milli;
	e->qused[e->sj[j].queue] += (double)ran * (double)s->milli;
	e->quse[e->sj[j].queue] -= s->milli;
	/* out of run[]: the last one takes its slot */
	int last = e->nrun - 1;
	if (s->slot != last) {
		e->run[s->slot] = e->run[last];
		e->run_job[s->slot] = e->run_job[last];
		e->js[e->run_job[s->slot]].slot = s->slot;
	}
	e->nrun--;
	free(s->a);
	s->a = NULL;
	s->na = 0;
	e->want_pass = true;
	return ran;
}

/* Stops a job early: it keeps the work to its last checkpoint (all of it
 * when it saves as it stops, paying a checkpoint's cost). */
static void stop_early(struct eng *e, int j, bool saves)
{
	struct jstate *s = &e->js[j];
	int64_t milli = s->milli;
	int64_t ran = stop(e, j);
	int64_t kept;
	int64_t work = work_of(e, j, ran, &kept);
	if (saves) {
		kept = work;
		e->lost += (double)e->o->checkpoint_cost_ms * (double)milli;
	}
	if (s->remaining_ms != SIM_FOREVER)
		s->remaining_ms -= kept;
	e->lost += (double)(ran - kept) * (double)milli;
	e->saving += (double)saves_of(e, j, ran) * (double)milli;
}

/* Stops a job early and it waits again, its spares given back. */
static void interrupt(struct eng *e, int j, bool saves)
{
	stop_early(e, j, saves);
	spares_give(e, j, 0);
	e->res->requeues++;
	enqueue(e, j);
}

static int64_t last_checkpoint(const struct eng *e, int j)
{
	int64_t t = e->js[j].ckpt_ms, c = e->o->checkpoint_cost_ms;
	if (t <= 0)
		return 0;
	int64_t r = restart_of(e, j);
	int64_t u = e->now - e->js[j].start_ms - r;
	int64_t k = u > 0 ? u / (t + c) : 0;
	return k > 0 ? e->js[j].start_ms + r + k * (t + c) : 0;
}

/* ---- the pass ---------------------------------------------------------------------------- */

static void update_usage(struct eng *e)
{
	double dt = (double)(e->now - e->usage_at) / 1000.0;
	double hl = (double)e->o->sched.half_life_s;
	for (int q = 0; q < e->tr->nqueues; q++) {
		e->qusage[q] = sched_usage_age(e->qusage[q], e->quse[q], dt, hl);
		e->queues[q].recent_milli = sched_usage_recent(e->qusage[q], hl);
	}
	e->usage_at = e->now;
}

/* The accelerator-seconds running job j has had by now, this attempt too. */
static double served(const struct eng *e, int j)
{
	const struct jstate *s = &e->js[j];
	return s->service + (double)(e->now - s->start_ms) * (double)s->milli / 1e6;
}

/* Within each level, the jobs whose class orders by the Gittins index by
 * it, highest first (submission order among equals, and for jobs with no
 * index, after those with one). porder[from, to) is one level of one
 * priority. */
static void gittins_order(struct eng *e, int from, int to)
{
	bool sorted = true; /* already: all alike, most often */
	for (int x = from; x < to; x++) {
		int j = e->porder[x];
		struct jstate *s = &e->js[j];
		double g;
		s->gittins = sched_las_history_index(e->hist, &e->las[s->base], s->base,
						     (uint32_t)e->sj[j].queue, s->service, &g)
				     ? g
				     : -1;
		sorted &= x == from || s->gittins <= e->js[e->porder[x - 1]].gittins;
	}
	if (sorted)
		return;
	int n = to - from;
	xgrow(&e->places, &e->places_alloc, (size_t)n, sizeof(*e->places));
	xgrow(&e->was, &e->was_alloc, (size_t)n, sizeof(*e->was));
	for (int x = 0; x < n; x++) {
		e->was[x] = e->porder[from + x];
		e->places[x] = (struct sched_las_place){0, e->js[e->was[x]].gittins, x};
	}
	sched_las_places_sort(e->places, n);
	for (int x = 0; x < n; x++)
		e->porder[from + x] = e->was[e->places[x].pos];
}

/* Least attained service: each job's level as a pass class (a waiting job
 * promoted back to the first level forgets its service), and the pending
 * jobs in the pass's order: classes and levels by rank, each in submission
 * order (e->pend is by priority, then submission, so a stable bucketing by
 * level within each priority keeps it), or by the Gittins index. */
static void las_levels(struct eng *e)
{
	e->porder = xrealloc(e->porder, sizeof(int) * ((size_t)e->npend + 1));
	if (!e->any_las) {
		memcpy(e->porder, e->pend, sizeof(int) * (size_t)e->npend);
		return;
	}
	for (int i = 0; i < e->npend; i++) {
		struct jstate *s = &e->js[e->pend[i]];
		const struct sched_las *l = &e->las[s->base];
		if (s->service > 0 && sched_las_promoted(l, s->ran_ms, e->now - s->pend_since))
			s->service = 0;
		e->sj[e->pend[i]].cls = e->first[s->base] + sched_las_level(l, s->service);
	}
	for (int i = 0; i < e->nrun; i++) {
		const struct jstate *s = &e->js[e->run_job[i]];
		e->run[i].cls = e->first[s->base] +
				sched_las_level(&e->las[s->base], served(e, e->run_job[i]));
	}
	/* within each run of one priority, by level (a stable counting sort) */
	int k = 0;
	for (int i = 0; i < e->npend;) {
		int prio = e->classes[e->sj[e->pend[i]].cls].priority, end = i;
		while (end < e->npend && e->classes[e->sj[e->pend[end]].cls].priority == prio)
			end++;
		for (int lv = 0; lv < SCHED_LAS_MAX_LEVELS; lv++) {
			int from = k;
			for (int x = i; x < end; x++)
				if (e->classes[e->sj[e->pend[x]].cls].las_level == lv)
					e->porder[k++] = e->pend[x];
			if (e->hist && k > from)
				gittins_order(e, from, k);
		}
		i = end;
	}
}

/* Does a job whose class bounds a preemption's loss at bound_ms (< 0:
 * none) save in its grace when preempted, and so lose only the save and
 * its restore (--checkpoint-on-preempt, when those fit the bound)? */
static bool saves_in_grace(const struct eng *e, int64_t bound_ms)
{
	return e->o->checkpoint_on_preempt &&
	       (bound_ms < 0 || e->o->checkpoint_cost_ms + e->o->restart_cost_ms <= bound_ms);
}

/* While jobs wait, a running job that reaches its next level, or has
 * worked its minimum there, may be preempted then: a pass is queued for
 * the first of those moments. */
static void las_next_level(struct eng *e)
{
	if (!e->any_las || !e->npend)
		return;
	int64_t at = INT64_MAX;
	for (int i = 0; i < e->nrun; i++) {
		int j = e->run_job[i];
		const struct jstate *s = &e->js[j];
		const struct sched_las *l = &e->las[s->base];
		int64_t next =
			sched_las_next_change(l, served(e, j), s->milli, s->start_ms, e->now);
		/* past what the loss bound allows it stays, without a
		 * checkpoint to come (the server's commit queues a pass; the
		 * simulator's periodic ones are no events: woken as before) */
		struct sched_running r = {
			.start_ms = s->start_ms,
			.restore_ms = e->o->restart_cost_ms,
			.preempt_any = e->o->checkpoint_on_preempt
					       ? saves_in_grace(e, sched_las_rule_of(l).max_loss_ms)
					       : s->ckpt_ms > 0};
		if (next > sched_las_takeable_until(l, &r))
			next = INT64_MAX;
		at = MIN(at, next);
	}
	if (at == INT64_MAX || (e->level_at && e->level_at <= at))
		return;
	e->level_at = at;
	push(e, at, EV_LEVEL, 0, 0);
}

static int pass(struct eng *e, bool *preempted)
{
	*preempted = false;
	update_usage(e);
	las_levels(e);
	xgrow(&e->pend_ptrs, &e->pend_ptrs_alloc, (size_t)e->npend + 1, sizeof(*e->pend_ptrs));
	for (int i = 0; i < e->npend; i++)
		e->pend_ptrs[i] = &e->sj[e->porder[i]];
	/* what each would lose, preempted now: its work since its last
	 * checkpoint and the restore; saving in its grace, only the save and
	 * the restore (within the bound, it may be taken whenever; its last
	 * periodic checkpoint still orders the victims, as before) */
	for (int i = 0; i < e->nrun; i++) {
		struct sched_running *r = &e->run[i];
		r->last_checkpoint_ms = r->last_commit_ms = last_checkpoint(e, e->run_job[i]);
		r->restore_ms = e->o->restart_cost_ms;
		r->preempt_any = saves_in_grace(e, e->classes[r->cls].las_max_loss_ms);
	}
	struct sched_snapshot snap = {.nodes = e->nodes,
				      .nnodes = e->cl->n,
				      .jobs = e->pend_ptrs,
				      .njobs = e->npend,
				      .running = e->run,
				      .nrunning = e->nrun,
				      .classes = e->classes,
				      .nclasses = e->nclasses,
				      .queues = e->queues,
				      .nqueues = e->tr->nqueues,
				      .mix = e->o->mix,
				      .nmix = e->o->nmix,
				      .cluster = e->scl,
				      .shapes = e->shapes,
				      .keep = e->keep,
				      .given_order = e->hist != NULL};
	struct sched_decisions d;
	int r = sched_pass(&snap, e->now, &e->o->policy, &d);
	if (r < 0)
		return r;
	e->res->passes++;
	e->last_pass = e->now;
	e->want_pass = false;
	int ndrop = 0;
	for (int i = 0; i < d.nstarts; i++) {
		int j = e->porder[d.starts[i].job];
		start(e, j, d.starts[i].nodes, d.starts[i].nnodes);
		e->js[j].drop = true;
		ndrop++;
	}
	for (int i = 0; i < d.nwaits; i++) {
		int j = e->porder[d.waits[i].job];
		if (d.waits[i].reason == SCHED_WAIT_NEVER_FITS || e->o->drop_unplaced) {
			end_job(e, j,
				d.waits[i].reason == SCHED_WAIT_NEVER_FITS ? SIM_NEVER_FITS
									   : SIM_UNPLACED);
			e->js[j].drop = true;
			ndrop++;
		}
	}
	if (ndrop) {
		int k = 0;
		for (int i = 0; i < e->npend; i++) {
			int j = e->pend[i];
			if (e->js[j].drop)
				e->js[j].drop = false;
			else
				e->pend[k++] = j;
		}
		e->npend = k;
	}
	/* victims stop at once and wait again; their preemptor starts in the next pass */
	for (int i = 0; i < d.npreempts; i++) {
		int j = (int)(d.preempts[i].victim - 1);
		if (e->js[j].st != J_RUNNING)
			continue;
		interrupt(e, j, e->o->checkpoint_on_preempt);
		e->res->preemptions++;
		*preempted = true;
	}
	sched_decisions_release(&d);
	return 0;
}

/* ---- failures ---------------------------------------------------------------------------- */

static void next_failure(struct eng *e)
{
	if (e->o->mtbf_gpu_h <= 0 || e->ndev == 0 || e->fail_queued)
		return;
	/* failures matter while jobs run; when none runs the process pauses (it
	 * is memoryless) and the next start resumes it */
	if (!e->nrun)
		return;
	e->fail_queued = true;
	double rate = e->ndev / (e->o->mtbf_gpu_h * 3600e3); /* per ms */
	double dt = -log(1 - rng_unit(e)) / rate;
	push(e, e->now + MAX(1, llround(dt)), EV_FAIL, 0, 0);
}

/* The cluster's spare pool takes work from restarts in place, not from
 * passes: its nodes are schedulable only while one is being decided. */
static void pool_view(struct eng *e, bool with_pool)
{
	if (!e->o->sched.nspare_pool)
		return;
	for (int n = 0; n < e->cl->n; n++)
		e->nodes[n].schedulable = with_pool || !e->pool[n];
}

/* Keeps the spare pool at its size (sched_pool_refill, as the server). */
static void pool_refill(struct eng *e)
{
	if (!e->o->sched.nspare_pool)
		return;
	pool_view(e, true);
	if (sched_pool_refill(e->nodes, e->cl->n, &e->o->sched, e->pool, NULL, e->changed,
			      e->cl->n))
		e->want_pass = true;
	pool_view(e, false);
}

/* The trace's word k (a job's pool, spread or within); NULL: none. */
static const char *word(const struct sim_trace *tr, int k)
{
	return k >= 0 && k < tr->nwords ? tr->words[k] : NULL;
}

/* What j's share `a` needs of a node that takes its place. */
static struct sched_share share_of(const struct eng *e, int j, const struct sched_assign *a)
{
	const struct sched_job *sj = &e->sj[j];
	const struct sched_node *n = &e->nodes[a->node];
	return (struct sched_share){
		.ndev = a->ndev,
		.milli = a->milli,
		.model = a->ndev ? n->devs[a->devs[0]].model : NULL,
		.models = sj->gpu_types,
		.nmodels = sj->ngpu_types,
		.cpus = a->cpus,
		.mem_mib = a->mem_mib,
		.alone = a->alone,
		.max_switches = sj->max_switches,
		.constraint = sj->constraint,
		.tolerate = sj->tolerate,
		.pools = sj->pools,
		.within_depth = sj->within_depth,
		.spread_depth = sj->spread_depth,
		.spread_max = sj->spread_max,
	};
}

/* Tops up the spares of running gangs short of them from free nodes (not
 * the pool's), each like its attempt's first share, the best fit. */
static void spares_refill(struct eng *e)
{
	if (e->o->spares <= 0)
		return;
	for (int r = 0; r < e->nrun; r++) {
		int j = e->run_job[r];
		struct jstate *s = &e->js[j];
		int want = spares_wanted(e, j);
		if (s->nsp >= want || !s->na)
			continue;
		for (int n = 0; n < e->cl->n; n++)
			e->scratch[n] =
				e->nodes[n].schedulable && !(e->o->sched.nspare_pool && e->pool[n]);
		for (int k = 0; k < s->na; k++)
			e->scratch[s->a[k].node] = false;
		for (int k = 0; k < s->nsp; k++)
			e->scratch[s->sp[k].node] = false;
		struct sched_share w = share_of(e, j, &s->a[0]);
		int with[MODEL_MAX_NODES];
		w.nwith = 0;
		for (int k = 0; k < s->na && w.nwith < MODEL_MAX_NODES; k++)
			with[w.nwith++] = s->a[k].node;
		w.with = with;
		while (s->nsp < want) {
			struct sched_assign pick;
			int best = sched_share_best(e->nodes, e->cl->n, e->scratch, &w, &pick);
			if (best < 0)
				break;
			spares_take(e, j, &pick, 1);
			e->scratch[best] = false;
		}
	}
}

/* Starts j's next attempt at once on its attempt's nodes `old` but the
 * failed one, that one's share taken by what sched_replace chooses; or,
 * where nothing can take it, j waits in its queue. */
static void restart_in_place(struct eng *e, int j, const struct sched_assign *old, int n,
			     int failed_node)
{
	struct jstate *s = &e->js[j];
	/* its spares given back, to be held again where unused */
	int nsp = s->nsp;
	struct sched_assign *sp = xmalloc(sizeof(*sp) * ((size_t)nsp + 1));
	if (nsp)
		memcpy(sp, s->sp, sizeof(*sp) * (size_t)nsp);
	spares_give(e, j, 0);
	pool_view(e, true);
	memset(e->out, 0, sizeof(bool) * (size_t)e->cl->n);
	for (int k = 0; k < n; k++)
		e->out[old[k].node] = true;
	for (int k = 0; k < nsp; k++)
		e->out[sp[k].node] = true;
	struct sched_assign *as = xmalloc(sizeof(*as) * (size_t)n);
	/* the nodes it keeps first, then a place for each of the others, the
	 * gang's nodes so far beside it (--switches) */
	bool *kept = xcalloc((size_t)n, sizeof(bool));
	int *with = xcalloc((size_t)n + 1, sizeof(int)), nwith = 0;
	for (int k = 0; k < n; k++) {
		struct sched_share w = share_of(e, j, &old[k]);
		as[k] = old[k];
		if (old[k].node != failed_node &&
		    sched_share_free(&e->nodes[old[k].node], &w, &old[k])) {
			kept[k] = true;
			with[nwith++] = old[k].node;
		}
	}
	int next = 0;
	bool ok = true;
	for (int k = 0; k < n && ok; k++) {
		if (kept[k])
			continue;
		struct sched_share w = share_of(e, j, &old[k]);
		w.with = with;
		w.nwith = nwith;
		int used;
		enum sched_from from =
			sched_replace(e->nodes, e->cl->n, e->o->sched.nspare_pool ? e->pool : NULL,
				      e->out, &w, sp + next, nsp - next, &used, e->scratch, &as[k]);
		switch (from) {
		case SCHED_FROM_NONE:
			ok = false;
			continue;
		case SCHED_FROM_SPARE:
			next += used + 1;
			e->res->spare_swaps++;
			break;
		case SCHED_FROM_POOL:
			e->pool[as[k].node] = false;
			e->res->pool_swaps++;
			break;
		case SCHED_FROM_FREE:
			break;
		}
		e->out[as[k].node] = true;
		with[nwith++] = as[k].node;
	}
	free(kept);
	free(with);
	pool_view(e, false);
	if (ok) {
		s->pend_since = e->now;
		start(e, j, as, n);
		spares_take(e, j, sp + next, nsp - next);
		e->res->restarts_in_place++;
	} else {
		e->res->requeues++;
		enqueue(e, j);
	}
	free(as);
	free(sp);
}

static void fail_device(struct eng *e)
{
	int g = (int)(rng_next(e) % (uint64_t)e->ndev);
	if (e->failed[g])
		return; /* thinning: that device is down already */
	int node = 0;
	int lo = 0, hi = e->cl->n - 1;
	while (lo <= hi) { /* the node whose devices include g */
		int mid = (lo + hi) / 2;
		if (e->dev_off[mid] <= g) {
			node = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	while (node + 1 < e->cl->n && e->dev_off[node + 1] <= g)
		node++;
	int d = g - e->dev_off[node];
	e->res->failures++;
	/* the gangs that restart in place once the device is out: each one's
	 * attempt as it was */
	int nin = 0;
	struct {
		int j, n;
		struct sched_assign *a;
	} *in = NULL;
	for (int i = 0; i < e->nrun;) {
		int j = e->run_job[i];
		struct jstate *s = &e->js[j];
		for (int k = 0; k < s->nsp; k++) /* a spare on it: given back */
			for (int x = 0; x < s->sp[k].ndev; x++)
				if (s->sp[k].node == node && s->sp[k].devs[x] == d) {
					spare_drop(e, j, k--);
					break;
				}
		bool on = false;
		for (int k = 0; k < s->na && !on; k++)
			if (s->a[k].node == node)
				for (int x = 0; x < s->a[k].ndev && !on; x++)
					on = s->a[k].devs[x] == d;
		if (!on) {
			i++;
			continue;
		}
		if (wants_inplace(e, j)) {
			in = xrealloc(in, sizeof(*in) * (size_t)(nin + 1));
			in[nin].j = j;
			in[nin].n = s->na;
			in[nin].a = xmalloc(sizeof(*s->a) * (size_t)s->na);
			memcpy(in[nin].a, s->a, sizeof(*s->a) * (size_t)s->na);
			nin++;
			stop_early(e, j, false);
		} else {
			interrupt(e, j, false);
		}
		/* run[i] now holds another job: look again */
	}
	e->failed[g] = true;
	e->devs[g].free_milli = 0;
	e->repairs_pending++;
	push(e, e->now + MAX(1, llround(e->o->repair_h * 3600e3)), EV_REPAIR, g, 0);
	for (int i = 0; i < nin; i++) {
		restart_in_place(e, in[i].j, in[i].a, in[i].n, node);
		free(in[i].a);
	}
	free(in);
}

/* ---- samples ----------------------------------------------------------------------------- */

static void sample(struct eng *e)
{
	double frag = -1;
	if (e->nfmix) {
		double f = 0, free_total = 0;
		int freev[MODEL_MAX_ACCELS];
		const char *model[MODEL_MAX_ACCELS];
		for (int n = 0; n < e->cl->n; n++) {
			const struct sched_node *node = &e->nodes[n];
			if (!node->ndev)
				continue;
			for (int k = 0; k < node->ndev; k++) {
				freev[k] = node->devs[k].free_milli;
				model[k] = node->devs[k].model;
				free_total += freev[k];
			}
			f += sched_node_fragmentation(node->ndev, freev, model, node->cpus_free,
						      node->mem_free_mib, e->fmix, e->nfmix);
		}
		frag = free_total > 0 ? f / free_total : 0;
		e->frag_sum += frag;
		e->frag_n++;
	}
	struct sim_result *r = e->res;
	xgrow(&r->series, &e->series_alloc, (size_t)r->nseries + 1, sizeof(*r->series));
	double cap = (double)r->total_milli;
	r->series[r->nseries++] = (struct sim_point){
		.t_ms = e->now,
		.alloc = cap > 0 ? (double)e->alloc_milli / cap : 0,
		.busy = e->ndev ? (double)e->busy / e->ndev : 0,
		.frag = frag,
		.pending = e->npend,
		.running = e->nrun,
	};
}

/* ---- set-up ------------------------------------------------------------------------------ */

static int setup(struct eng *e, struct tk_error *err)
{
	const struct sim_cluster *cl = e->cl;
	const struct sim_trace *tr = e->tr;
	const struct sim_options *o = e->o;
	e->dev_off = xcalloc((size_t)cl->n + 1, sizeof(int));
	for (int n = 0; n < cl->n; n++) {
		e->dev_off[n] = e->ndev;
		e->ndev += cl->nodes[n].gpus;
	}
	e->dev_off[cl->n] = e->ndev;
	e->devs = xcalloc((size_t)e->ndev + 1, sizeof(*e->devs));
	e->failed = xcalloc((size_t)e->ndev + 1, sizeof(bool));
	e->nodes = xcalloc((size_t)cl->n + 1, sizeof(*e->nodes));
	for (int n = 0; n < cl->n; n++) {
		const struct sim_node *sn = &cl->nodes[n];
		struct sched_node *node = &e->nodes[n];
		node->name = sn->name;
		node->topology = sn->topology[0] ? sn->topology : NULL;
		node->labels = sn->labels;
		node->domain = sn->domain[0] ? sn->domain : NULL;
		node->pools = sched_config_pool_node(&o->sched, sn->labels);
		for (int p = 0; p <= o->sched.npools && o->sched.npools; p++)
			if (p < o->sched.npools ? node->pools & (1ULL << p)
						: node->pools == MODEL_POOL_NONE)
				e->res->pool_milli[p] += (int64_t)sn->gpus * MODEL_MILLI;
		node->schedulable = true;
		node->cpus_total = node->cpus_free = (int)sn->cpu_milli;
		node->mem_total_mib = node->mem_free_mib =
			sn->mem_mib ? sn->mem_mib : MODEL_MAX_MEM_MIB;
		node->ndev = sn->gpus;
		node->devs = &e->devs[e->dev_off[n]];
		for (int d = 0; d < sn->gpus; d++)
			e->devs[e->dev_off[n] + d] = (struct sched_dev){
				sn->model, MODEL_MILLI, d / 8, sn->gpu_mem_mib, sn->tflops};
	}
	e->res->total_milli = (int64_t)e->ndev * MODEL_MILLI;
	e->scl = sched_cluster_new(e->nodes, cl->n);
	e->pool = xcalloc((size_t)cl->n + 1, sizeof(bool));
	e->out = xcalloc((size_t)cl->n + 1, sizeof(bool));
	e->scratch = xcalloc((size_t)cl->n + 1, sizeof(bool));
	e->changed = xcalloc((size_t)cl->n + 1, sizeof(int));
	/* classes, by the configuration file's names; the levels of "las" ones */
	e->nclasses = sched_classes_of_config(&o->sched, e->classes, e->las, e->first);
	if (e->nclasses < 0)
		return tk_errorf(err, e->nclasses,
				 "the classes and their levels are more than %d in all",
				 MODEL_MAX_CLASSES);
	for (int c = 0; c < o->sched.nclasses; c++) {
		e->any_las |= e->las[c].nlevels > 1;
		if (e->las[c].nlevels > 1 && e->las[c].gittins && !e->hist)
			e->hist = sched_las_history_new();
	}
	int *cls_of = xcalloc((size_t)tr->nclasses + 1, sizeof(int));
	for (int c = 0; c < tr->nclasses; c++) {
		cls_of[c] = sched_config_class(&o->sched, tr->classes[c]);
		if (cls_of[c] < 0) {
			int line = 0;
			for (int i = 0; i < tr->n && !line; i++)
				if (tr->jobs[i].cls == c)
					line = tr->jobs[i].line;
			free(cls_of);
			return tk_errorf(err, -EINVAL,
					 "line %d: class \"%s\" is not in the configuration", line,
					 tr->classes[c]);
		}
	}
	/* queues: the trace's, with quotas and weights where the options name them */
	e->queues = xcalloc((size_t)tr->nqueues + 1, sizeof(*e->queues));
	for (int q = 0; q < tr->nqueues; q++) {
		e->queues[q] = (struct sched_queue){tr->queues[q], -1, -1, 1, 0, 0, NULL};
		for (int k = 0; k < o->nqueues; k++)
			if (strcmp(o->queues[k].name, tr->queues[q]) == 0) {
				e->queues[q].quota_milli = o->queues[k].quota_milli;
				e->queues[q].borrow_milli = o->queues[k].borrow_milli;
				e->queues[q].weight = o->queues[k].weight;
			}
	}
	e->qusage = xcalloc((size_t)tr->nqueues + 1, sizeof(double));
	e->quse = xcalloc((size_t)tr->nqueues + 1, sizeof(int64_t));
	e->qused = xcalloc((size_t)tr->nqueues + 1, sizeof(double));
	/* jobs */
	e->type_ptrs = xcalloc(tr->nrefs + 1, sizeof(char *));
	for (size_t i = 0; i < tr->nrefs; i++)
		e->type_ptrs[i] = tr->types[tr->type_refs[i]];
	e->sj = xcalloc((size_t)tr->n + 1, sizeof(*e->sj));
	e->shapes = sched_shapes_new();
	e->keep = sched_keep_new();
	e->js = xcalloc((size_t)tr->n + 1, sizeof(*e->js));
	e->run = xcalloc((size_t)tr->n + 1, sizeof(*e->run));
	e->run_job = xcalloc((size_t)tr->n + 1, sizeof(int));
	e->first_submit = tr->n ? INT64_MAX : 0;
	for (int i = 0; i < tr->n; i++) {
		const struct sim_job *j = &tr->jobs[i];
		struct sched_job *s = &e->sj[i];
		int base = j->cls >= 0 ? cls_of[j->cls] : o->sched.default_class;
		e->js[i].base = base;
		*s = (struct sched_job){
			.id = i + 1,
			.cls = e->first[base],
			.queue = j->queue,
			.nodes = j->nodes,
			.tasks_per_node = j->tasks_per_node,
			.gpu_milli = j->gpu_milli,
			.cpus_per_task = j->cpu_milli,
			.mem_mib = j->mem_mib,
			.ngpu_types = j->ntypes,
			.gpu_types = j->ntypes ? &e->type_ptrs[j->types_off] : NULL,
			.time_limit_s = j->time_limit_s,
			.submit_ms = j->submit_ms,
		};
		/* the pools that take it (it names none: the open ones, and nodes
		 * in none) */
		struct job_request req = {.nodes = s->nodes,
					  .tasks_per_node = s->tasks_per_node,
					  .gpu_milli = s->gpu_milli,
					  .time_limit_s = s->time_limit_s,
					  .pool = (char *)word(tr, j->pool)};
		s->pools = sched_config_pool_job(&o->sched, &req, NULL, 0);
		s->pool = req.pool;
		sched_job_domains(s, &o->sched, word(tr, j->spread), word(tr, j->within));
		e->js[i].ckpt_ms = checkpoint_interval(o, s);
		s->nodes += spares_wanted(e, i); /* its spares beside it, alike */
		s->shape = sched_job_shape(s);
		s->shape_id = sched_shapes_add(e->shapes, s); /* < 0: the pass refuses it */
		e->js[i].remaining_ms = j->work_ms;
		e->res->jobs[i] = (struct sim_job_result){SIM_UNFINISHED, -1, -1, 0, 0, NULL};
		e->first_submit = MIN(e->first_submit, j->submit_ms);
		push(e, j->submit_ms, EV_ARRIVE, i, 0);
	}
	free(cls_of);
	e->arrivals_left = tr->n;
	/* the fragmentation measure plans for the trace's own mix, or the one given */
	if (o->mix) {
		e->fmix = xcalloc((size_t)o->nmix + 1, sizeof(*e->fmix));
		memcpy(e->fmix, o->mix, sizeof(*e->fmix) * (size_t)o->nmix);
		e->nfmix = o->nmix;
	} else {
		e->nfmix = sim_trace_mix(tr, 0.95, &e->fmix);
	}
	/* samples: about series_points over the trace's span and a typical run */
	int64_t last_submit = 0, works = 0;
	int nworks = 0;
	for (int i = 0; i < tr->n; i++) {
		last_submit = MAX(last_submit, tr->jobs[i].submit_ms);
		if (tr->jobs[i].work_ms != SIM_FOREVER && nworks < 100000) {
			works += tr->jobs[i].work_ms / 1000;
			nworks++;
		}
	}
	int points = o->series_points > 0 ? o->series_points : 200;
	int64_t span = last_submit - (tr->n ? e->first_submit : 0) +
		       (nworks ? works / nworks * 1000 * 2 : 0);
	e->sample_dt = MAX(1, span / points);
	e->now = tr->n ? e->first_submit : 0;
	e->last_t = e->now;
	e->last_submit = tr->n ? last_submit : 0;
	e->usage_at = e->now;
	e->rng = o->seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
	push(e, e->now, EV_SAMPLE, 0, 0);
	next_failure(e);
	return 0;
}

static void teardown(struct eng *e)
{
	for (int i = 0; i < e->tr->n && e->js; i++) {
		free(e->js[i].a);
		free(e->js[i].sp);
	}
	free(e->pool);
	free(e->out);
	free(e->scratch);
	free(e->changed);
	free(e->js);
	free(e->sj);
	free(e->type_ptrs);
	free(e->pend);
	free(e->porder);
	free(e->places);
	free(e->was);
	sched_las_history_free(e->hist);
	free(e->pend_ptrs);
	free(e->run);
	free(e->run_job);
	free(e->queues);
	free(e->qusage);
	free(e->quse);
	free(e->qused);
	free(e->heap);
	free(e->nodes);
	free(e->devs);
	free(e->dev_off);
	free(e->failed);
	free(e->fmix);
	sched_cluster_free(e->scl);
	sched_shapes_free(e->shapes);
	sched_keep_free(e->keep);
	strbuf_release(&e->sb);
}

/* ---- results ----------------------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static struct sim_stats stats_of(int64_t *v, int n)
{
	struct sim_stats s = {0, 0, 0};
	if (n == 0)
		return s;
	qsort(v, (size_t)n, sizeof(*v), cmp_i64);
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += (double)v[i];
	s.mean = sum / n / 1000.0;
	s.p50 = (double)v[(n - 1) / 2] / 1000.0;
	s.p99 = (double)v[(int)((n - 1) * 0.99)] / 1000.0;
	return s;
}

/* Where the free devices lie at the end (struct sim_result). */
static void free_at_end(struct eng *e)
{
	struct sim_result *r = e->res;
	for (int i = 0; i < e->ndev; i++) {
		int f = e->devs[i].free_milli;
		if (e->failed[i] || f <= 0)
			continue;
		if (f >= MODEL_MILLI)
			r->end_whole_free++;
		else
			r->end_part_milli[f / 100] += f;
	}
}

static void summarize(struct eng *e)
{
	free_at_end(e);
	struct sim_result *r = e->res;
	const struct sim_trace *tr = e->tr;
	int64_t *jct = xcalloc((size_t)tr->n + 1, sizeof(int64_t));
	int64_t *wait = xcalloc((size_t)tr->n + 1, sizeof(int64_t));
	int nj = 0;
	for (int i = 0; i < tr->n; i++) {
		struct sim_job_result *jr = &r->jobs[i];
		switch (jr->state) {
		case SIM_DONE:
			r->done++;
			break;
		case SIM_TIMEOUT:
			r->timeout++;
			break;
		case SIM_NEVER_FITS:
			r->never_fits++;
			break;
		case SIM_UNPLACED:
			r->unplaced++;
			break;
		case SIM_UNFINISHED:
			r->unfinished++;
			if (e->js[i].st == J_PENDING)
				jr->wait_ms += e->now - e->js[i].pend_since;
			break;
		}
		if (jr->state == SIM_DONE || jr->state == SIM_TIMEOUT) {
			jct[nj] = jr->end_ms - tr->jobs[i].submit_ms;
			wait[nj++] = jr->wait_ms;
		}
	}
	r->jct_s = stats_of(jct, nj);
	r->wait_s = stats_of(wait, nj);
	free(jct);
	free(wait);
	r->end_ms = e->now;
	r->makespan_ms = e->last_end > e->first_submit ? e->last_end - e->first_submit : 0;
	double span = (double)((r->unfinished ? e->now : e->last_end) - e->first_submit);
	r->alloc_mean =
		span > 0 && r->total_milli ? e->alloc_int / span / (double)r->total_milli : 0;
	r->busy_mean = span > 0 && e->ndev ? e->busy_int / span / e->ndev : 0;
	double arr = (double)(e->last_submit - e->first_submit);
	r->alloc_arriving = arr > 0 && r->total_milli
				    ? e->alloc_arr_int / arr / (double)r->total_milli
				    : r->alloc_mean;
	r->frag_mean = e->frag_n ? e->frag_sum / e->frag_n : -1;
	r->npools = e->o->sched.npools;
	for (int p = 0; p < r->npools; p++)
		snprintf(r->pool_names[p], MODEL_NAME_MAX, "%s", e->o->sched.pools[p].name);
	for (int p = 0; r->npools && p <= r->npools; p++) {
		r->pool_alloc[p] = span > 0 && r->pool_milli[p]
					   ? e->pool_int[p] / span / (double)r->pool_milli[p]
					   : 0;
		r->pool_alloc_arriving[p] =
			arr > 0 && r->pool_milli[p]
				? e->pool_arr_int[p] / arr / (double)r->pool_milli[p]
				: r->pool_alloc[p];
	}
	/* what still runs at the end counts as used, and kept so far */
	for (int i = 0; i < e->nrun; i++) {
		int j = e->run_job[i];
		spares_account(e, j);
		double ran = (double)(e->now - e->js[j].start_ms);
		e->used += ran * (double)e->js[j].milli;
		e->qused[e->sj[j].queue] += ran * (double)e->js[j].milli;
	}
	r->device_h_used = e->used / MODEL_MILLI / 3600e3;
	r->device_h_lost = e->lost / MODEL_MILLI / 3600e3;
	r->device_h_saving = e->saving / MODEL_MILLI / 3600e3;
	r->device_h_spare = e->spare_held / MODEL_MILLI / 3600e3;
	r->effective = e->used > 0 ? (e->used - e->lost) / e->used : 1;
	r->queue_share = xcalloc((size_t)tr->nqueues + 1, sizeof(double));
	for (int q = 0; q < tr->nqueues; q++)
		r->queue_share[q] = e->used > 0 ? e->qused[q] / e->used : 0;
}

/* ---- the loop ---------------------------------------------------------------------------- */

int sim_run(const struct sim_cluster *cl, const struct sim_trace *tr, const struct sim_options *o,
	    struct sim_result *ret, struct tk_error *err)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(ret, 0, sizeof(*ret));
	if (!tr->timed && !o->drop_unplaced)
		return tk_errorf(err, -EINVAL,
				 "this trace has no submission or run times (an untimed openb pod "
				 "list): use it with --experiment fgd");
	ret->n = tr->n;
	ret->jobs = xcalloc((size_t)tr->n + 1, sizeof(*ret->jobs));
	struct eng e;
	memset(&e, 0, sizeof(e));
	e.cl = cl;
	e.tr = tr;
	e.o = o;
	e.res = ret;
	e.last_pass = INT64_MIN / 2;
	strbuf_init(&e.sb);
	int r = setup(&e, err);
	while (r == 0 && e.nheap > 0) {
		int64_t t = e.heap[0].t;
		if (o->end_ms && t > o->end_ms)
			break;
		/* time-weighted sums up to this instant */
		e.alloc_int += (double)e.alloc_milli * (double)(t - e.last_t);
		for (int p = 0; o->sched.npools && p <= o->sched.npools; p++) {
			e.pool_int[p] += (double)e.pool_hold[p] * (double)(t - e.last_t);
			if (MIN(t, e.last_submit) > e.last_t)
				e.pool_arr_int[p] += (double)e.pool_hold[p] *
						     (double)(MIN(t, e.last_submit) - e.last_t);
		}
		if (MIN(t, e.last_submit) > e.last_t)
			e.alloc_arr_int +=
				(double)e.alloc_milli * (double)(MIN(t, e.last_submit) - e.last_t);
		e.busy_int += (double)e.busy * (double)(t - e.last_t);
		e.last_t = t;
		e.now = t;
		bool pass_due = false;
		while (e.nheap > 0 && e.heap[0].t == t) {
			struct ev v = pop(&e);
			switch (v.type) {
			case EV_ARRIVE:
				e.arrivals_left--;
				enqueue(&e, v.a);
				break;
			case EV_FINISH: {
				struct jstate *s = &e.js[v.a];
				if (s->st != J_RUNNING || s->attempt != v.b)
					break; /* an attempt that was stopped before */
				int64_t milli = s->milli;
				int64_t ran = stop(&e, v.a), kept;
				int64_t work = work_of(&e, v.a, ran, &kept);
				bool done = s->remaining_ms <= work;
				work = MIN(work, s->remaining_ms);
				s->remaining_ms -= work;
				/* its restart and checkpoints did no work */
				e.lost += (double)(ran - work) * (double)milli;
				e.saving += (double)saves_of(&e, v.a, ran) * (double)milli;
				spares_give(&e, v.a, 0);
				if (done && e.hist)
					sched_las_history_add(e.hist, s->base,
							      (uint32_t)e.sj[v.a].queue,
							      s->received);
				end_job(&e, v.a, done ? SIM_DONE : SIM_TIMEOUT);
				break;
			}
			case EV_FAIL:
				e.fail_queued = false;
				fail_device(&e);
				next_failure(&e);
				break;
			case EV_REPAIR:
				e.failed[v.a] = false;
				e.devs[v.a].free_milli = MODEL_MILLI;
				e.repairs_pending--;
				e.want_pass = true;
				pool_refill(&e);
				break;
			case EV_SAMPLE:
				sample(&e);
				if (e.nheap > 0)
					push(&e, t + e.sample_dt, EV_SAMPLE, 0, 0);
				break;
			case EV_PASS:
				e.pass_queued = false;
				pass_due = true;
				break;
			case EV_LEVEL:
				if (v.t == e.level_at) {
					e.level_at = 0;
					e.want_pass = true;
				}
				break;
			}
		}
		if (!e.want_pass)
			continue;
		if (!pass_due && o->pass_interval_ms > 0 && t < e.last_pass + o->pass_interval_ms) {
			if (!e.pass_queued) {
				push(&e, e.last_pass + o->pass_interval_ms, EV_PASS, 0, 0);
				e.pass_queued = true;
			}
			continue;
		}
		/* victims leave at once: their preemptors start in a pass at the same instant */
		bool again = true;
		for (int k = 0; k < 8 && again && r == 0; k++)
			r = pass(&e, &again);
		las_next_level(&e);
		spares_refill(&e);
		pool_refill(&e);
		if (r < 0)
			r = tk_errorf(err, r,
				      "the scheduler refused the simulator's snapshot at %lld ms",
				      (long long)t);
	}
	if (r == 0) {
		summarize(&e);
		sample(&e);
	}
	teardown(&e);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ret->wall_s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (r < 0)
		sim_result_release(ret);
	return r;
}

void sim_result_release(struct sim_result *r)
{
	for (int i = 0; i < r->n && r->jobs; i++)
		free(r->jobs[i].devices);
	free(r->jobs);
	free(r->series);
	free(r->queue_share);
	memset(r, 0, sizeof(*r));
}
