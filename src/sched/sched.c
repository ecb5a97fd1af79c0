/*
 * One scheduling pass: the order jobs are considered in, quotas, fair share,
 * reservations for backfill, and preemption. Where a job goes is place.c's.
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
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define FOREVER INT64_MAX
#define SHAPE_CACHE_MIN 1024
#define PREFETCH_AHEAD 8

/* A reservation (for a class's first waiting job) or a hold (for a job
 * waiting on its preempted victims: nobody else may use it). */
struct resv {
	int job;
	int64_t until; /* 0: a hold; FOREVER: start time unknown */
	int n;
	struct sched_assign *a; /* the parts free now */
};

enum shape_state { SHAPE_UNKNOWN, SHAPE_FAILS };

/* How a shape's last job came to wait without the full path (over its
 * queue's limit, or fails_as_before()): the next job of the shape, class and
 * queue waits the same while the pass's epoch is the same (every job that
 * takes the full path may change what that depends on). */
struct fast {
	uint64_t epoch;
	int cls, queue;
	bool quota; /* it was the queue's limit (victims held for a job do not matter) */
	enum sched_wait_reason reason;
	int same_as;
};

struct shape {
	uint64_t hash;
	const struct sched_job *j; /* a job with this shape (for comparison) */
	enum shape_state state;
	enum sched_wait_reason reason;
	int detail_job;	 /* the job whose wait says why (-1: none yet) */
	int generic_job; /* the job whose wait has its plain "waiting for resources" text */
	int could;
	int switches;
	int never;		 /* -1 unknown, 0 no, 1 yes */
	uint32_t preempt_failed; /* bit per class index (up to 32): preemption found nothing */
	int resv_n; /* it failed under all of the first resv_n reservations (0: not known) */
	uint64_t reclaim_failed; /* qversion + 1 when reclaiming found nothing for it */
	bool *model_ok;		 /* its acceptable models, once worked out */
	int resv_job;		 /* ... and that job's wait says why */
	int tries;		 /* jobs of this shape placed or tried in this pass */
	int count;		 /* pending jobs of this shape */
	int64_t need;		 /* accelerators a job of it asks for, milli */
	struct fast fast;
	struct node_memo *memo; /* per node, from its second job on (single-node shapes) */
};

/* Node scores remembered per shape take at most this much memory in a pass. */
#define MEMO_MAX_BYTES (64u << 20)

struct qstate {
	int64_t use;		/* milli-accelerators held, including what started this pass */
	int quota_job;		/* a job whose wait says the queue is at its limit (-1: none yet) */
	uint64_t quota_version; /* qversion + 1 when quota_job's text was written */
	int64_t reclaiming;	/* held by its jobs preempted in this pass: soon free */
	double score;		/* fair share: lower goes first */
	double recent;
	int head, tail; /* this segment's jobs of the queue: st->run[head .. tail) */
	int heap_pos;
};

/* What the order and the common path need of each pending job, gathered in
 * one walk so that the pass reads 16 bytes per job, not a scattered job;
 * copied again into the order the jobs are tried in, so that it reads them
 * one after the other. */
struct jrec {
	int ji; /* index into the snapshot's jobs */
	int shape;
	int queue;
	int cls;
};

/* What running jobs that could be released hold, per cell (node * nmodels +
 * model): devices counted in r, and the cells where r > 0 listed. */
struct relset {
	int *r;
	int *cells;
	int ncells;
	uint64_t valid_for; /* reclaimable(): the qversion it was worked out for, + 1 */
};

struct st {
	struct pass p;
	struct sched_decisions *d;
	const struct sched_job *const *jobs;
	int *order;	  /* job indices in class order */
	struct jrec *run; /* a segment's jobs in their queues' runs */
	struct qstate *qs;
	int *heap;
	int nheap;
	struct resv *resv;
	int nresv;
	size_t resv_alloc;
	bool *class_has_resv;
	int blocked_all;      /* with no_backfill: the job everything waits behind, or -1 */
	bool *victim;	      /* running: chosen as a victim in this pass */
	struct shape *shapes; /* every shape among the pending jobs, in order of first job */
	size_t shapes_alloc;
	int nshapes;
	int *shape_slot; /* hash index into shapes: -1 empty */
	size_t slot_cap;
	struct jrec *jrec; /* per pending job: what the walk over them needs */
	struct placement pl;
	int max_nodes;
	struct end_item *end_heap; /* running jobs by static end, once sorted */
	bool end_sorted;
	struct end_item *end_list; /* scratch for one reservation */
	int *preemptible_below;	   /* per class: running jobs it could preempt by class */
	struct relset rel[MODEL_MAX_CLASSES]; /* releasable(): per class, when worked out */
	struct relset recl;		      /* reclaimable(), as of qversion */
	uint64_t qversion; /* changes whenever a queue's use or what it lends changes */
	uint64_t epoch;	   /* changes whenever a job takes the full path (struct fast) */
	int prio_of[MODEL_MAX_CLASSES]; /* each class's priority */
	bool *lends;			/* per queue: uses more than its quota (any_lending) */
	int nlending;
	uint64_t lend_version;	     /* qversion + 1 that lends was worked out for */
	struct victim *victim_order; /* every running job, cheapest victim first */
	bool victim_sorted;
	struct victim *victim_buf; /* scratch for one preemption search */
	int *held; /* running indices sorted by held_for, for jobs waiting on victims */
	int nheld;
	size_t memo_bytes;
	struct strbuf sb;
};

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

/* ---- small helpers ------------------------------------------------------------------- */

static int prio(const struct st *st, int cls)
{
	return st->prio_of[cls];
}

static int64_t job_milli(const struct sched_job *j)
{
	return (int64_t)j->nodes * j->tasks_per_node * j->gpu_milli;
}

static int64_t running_milli(const struct sched_running *r)
{
	int64_t m = 0;
	for (int i = 0; i < r->nnodes; i++)
		m += (int64_t)r->nodes[i].ndev * r->nodes[i].milli;
	return m;
}

static double qscore(const struct st *st, int q)
{
	const struct sched_queue *sq = &st->p.snap->queues[q];
	return ((double)st->qs[q].use + st->qs[q].recent) / (sq->weight > 0 ? sq->weight : 1);
}

static bool q_less(const struct st *st, int a, int b)
{
	double x = st->qs[a].score, y = st->qs[b].score;
	if (x != y)
		return x < y;
	return strcmp(st->p.snap->queues[a].name, st->p.snap->queues[b].name) < 0;
}

static void heap_swap(struct st *st, int i, int k)
{
	int t = st->heap[i];
	st->heap[i] = st->heap[k];
	st->heap[k] = t;
	st->qs[st->heap[i]].heap_pos = i;
	st->qs[st->heap[k]].heap_pos = k;
}

static void heap_fix(struct st *st, int i)
{
	while (i > 0 && q_less(st, st->heap[i], st->heap[(i - 1) / 2])) {
		heap_swap(st, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < st->nheap && q_less(st, st->heap[l], st->heap[m]))
			m = l;
		if (r < st->nheap && q_less(st, st->heap[r], st->heap[m]))
			m = r;
		if (m == i)
			break;
		heap_swap(st, i, m);
		i = m;
	}
}

static void heap_push(struct st *st, int q)
{
	st->heap[st->nheap] = q;
	st->qs[q].heap_pos = st->nheap++;
	heap_fix(st, st->nheap - 1);
}

static void heap_pop(struct st *st)
{
	heap_swap(st, 0, --st->nheap);
	if (st->nheap)
		heap_fix(st, 0);
}

/* ---- decisions ----------------------------------------------------------------------- */

static struct sched_wait *add_wait(struct st *st, int job, enum sched_wait_reason reason,
				   int same_as, int64_t until, const char *detail)
{
	struct sched_decisions *d = st->d;
	if ((size_t)d->nwaits == d->waits_alloc) /* sized for every job at the start */
		xgrow(&d->waits, &d->waits_alloc, (size_t)d->nwaits + 1, sizeof(*d->waits));
	struct sched_wait *w = &d->waits[d->nwaits++];
	w->job = job;
	w->reason = reason;
	w->same_as = same_as;
	w->until_ms = until;
	w->detail = detail ? xstrdup(detail) : NULL;
	return w;
}

/* A wait that says "as job same_as": the one a pass writes for most jobs.
 * The waits were sized for every job at the start. */
static inline void wait_as(struct st *st, int job, enum sched_wait_reason reason, int same_as)
{
	struct sched_decisions *d = st->d;
	d->waits[d->nwaits++] = (struct sched_wait){job, reason, same_as, 0, NULL};
}

static void remember(struct shape *sh, const struct st *st, const struct jrec *jr, bool quota,
		     enum sched_wait_reason reason, int same_as)
{
	sh->fast = (struct fast){st->epoch, jr->cls, jr->queue, quota, reason, same_as};
}

static void describe_need(const struct st *st, const struct sched_job *j, struct strbuf *sb)
{
	strbuf_addf(sb, "%d node%s with ", j->nodes, j->nodes == 1 ? "" : "s");
	bool any = false;
	if (j->gpu_milli > 0) {
		if (j->gpu_milli < MODEL_MILLI)
			strbuf_addf(sb, "%.3g of an accelerator",
				    j->gpu_milli / (double)MODEL_MILLI);
		else {
			int k = j->tasks_per_node * j->gpu_milli / MODEL_MILLI;
			strbuf_addf(sb, "%d accelerator%s", k, k == 1 ? "" : "s");
		}
		if (j->ngpu_types || j->gpu_mem_mib || j->gpu_tflops > 0) {
			strbuf_addstr(sb, " (");
			for (int i = 0; i < j->ngpu_types; i++)
				strbuf_addf(sb, "%s%s", i ? "|" : "", j->gpu_types[i]);
			if (j->gpu_mem_mib)
				strbuf_addf(sb, "%s>= %lld GiB", j->ngpu_types ? ", " : "",
					    (long long)(j->gpu_mem_mib / 1024));
			if (j->gpu_tflops > 0)
				strbuf_addf(sb, "%s>= %g TFLOP/s",
					    j->ngpu_types || j->gpu_mem_mib ? ", " : "",
					    j->gpu_tflops);
			strbuf_addch(sb, ')');
		}
		any = true;
	}
	int64_t cpus = (int64_t)j->tasks_per_node * j->cpus_per_task;
	if (cpus) {
		strbuf_addf(sb, "%s%lld CPU%s", any ? ", " : "", (long long)cpus,
			    cpus == 1 ? "" : "s");
		any = true;
	}
	if (j->mem_mib) {
		strbuf_addf(sb, "%s%lld MiB memory", any ? ", " : "", (long long)j->mem_mib);
		any = true;
	}
	if (!any)
		strbuf_addstr(sb, "no reserved resources");
	strbuf_addstr(sb, j->nodes == 1 ? "" : " each");
	(void)st;
}

static void fmt_wait_time(int64_t ms, struct strbuf *sb)
{
	char buf[32];
	tk_format_duration((ms + 999) / 1000, buf, sizeof(buf));
	strbuf_addstr(sb, buf);
}

/* ---- the shape cache ------------------------------------------------------------------- */

static uint64_t shape_hash(const struct sched_job *j)
{
	return j->shape ? j->shape : sched_job_shape(j);
}

static void slots_grow(struct st *st)
{
	st->slot_cap = st->slot_cap ? st->slot_cap * 2 : SHAPE_CACHE_MIN;
	free(st->shape_slot);
	st->shape_slot = xmalloc(sizeof(int) * st->slot_cap);
	memset(st->shape_slot, 0xff, sizeof(int) * st->slot_cap);
	size_t mask = st->slot_cap - 1;
	for (int k = 0; k < st->nshapes; k++) {
		size_t i = st->shapes[k].hash & mask;
		while (st->shape_slot[i] >= 0)
			i = (i + 1) & mask;
		st->shape_slot[i] = k;
	}
}

/* A new shape, j being the job that stands for it. */
static int shape_new(struct st *st, const struct sched_job *j, uint64_t hash)
{
	xgrow(&st->shapes, &st->shapes_alloc, (size_t)st->nshapes + 1, sizeof(*st->shapes));
	int k = st->nshapes++;
	struct shape *s = &st->shapes[k];
	memset(s, 0, sizeof(*s));
	s->j = j;
	s->hash = hash;
	s->detail_job = -1;
	s->generic_job = -1;
	s->never = -1;
	s->need = job_milli(j);
	return k;
}

/* The index of j's shape, added at its first job. */
static int shape_index(struct st *st, const struct sched_job *j)
{
	uint64_t h = shape_hash(j);
	if ((size_t)st->nshapes * 2 >= st->slot_cap)
		slots_grow(st);
	size_t mask = st->slot_cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		int k = st->shape_slot[i];
		if (k < 0) {
			k = shape_new(st, j, h);
			st->shape_slot[i] = k;
			return k;
		}
		const struct shape *s = &st->shapes[k];
		if (s->hash == h && (s->j == j || shape_same(s->j, j)))
			return k;
	}
}

/* ---- reservations -------------------------------------------------------------------- */

static bool resv_blocks(const struct st *st, const struct resv *r, const struct sched_job *j)
{
	if (r->until == 0 || j->time_limit_s == 0)
		return true;
	return st->p.now + j->time_limit_s * 1000 > r->until;
}

/* Does every reservation block j? (Then only their number decides.) */
static bool blocked_by_all(const struct st *st, const struct sched_job *j)
{
	for (int i = 0; i < st->nresv; i++)
		if (!resv_blocks(st, &st->resv[i], j))
			return false;
	return true;
}

/* Takes the reservations that j must respect out of `free`; the saved values
 * let unblock() restore exactly what was there. */
struct saved {
	int node, cpus;
	int64_t mem;
	int dev_idx[MODEL_MAX_ACCELS];
	int dev_val[MODEL_MAX_ACCELS];
	int ndev;
};

static struct saved *block(struct st *st, const struct sched_job *j, int *ret_n, int *first)
{
	struct pass *p = &st->p;
	struct saved *sv = NULL;
	size_t alloc = 0;
	int n = 0;
	*first = -1;
	for (int i = 0; i < st->nresv; i++) {
		struct resv *r = &st->resv[i];
		if (!resv_blocks(st, r, j))
			continue;
		if (*first < 0)
			*first = i;
		for (int k = 0; k < r->n; k++) {
			const struct sched_assign *a = &r->a[k];
			xgrow(&sv, &alloc, (size_t)n + 1, sizeof(*sv));
			struct saved *s = &sv[n++];
			s->node = a->node;
			s->cpus = p->free.cpus[a->node];
			s->mem = p->free.mem[a->node];
			s->ndev = a->ndev;
			p->free.cpus[a->node] = MAX(0, p->free.cpus[a->node] - a->cpus);
			p->free.mem[a->node] = MAX(0, p->free.mem[a->node] - a->mem_mib);
			for (int d = 0; d < a->ndev; d++) {
				int idx = p->dev_off[a->node] + a->devs[d];
				s->dev_idx[d] = idx;
				s->dev_val[d] = p->free.dev[idx];
				p->free.dev[idx] = MAX(0, p->free.dev[idx] - a->milli);
			}
		}
	}
	*ret_n = n;
	/* keep the capacity index true to what this job may use */
	for (int i = 0; i < n; i++)
		cap_update_node(p, sv[i].node);
	return sv;
}

static void unblock(struct st *st, struct saved *sv, int n)
{
	struct pass *p = &st->p;
	for (int i = n - 1; i >= 0; i--) {
		p->free.cpus[sv[i].node] = sv[i].cpus;
		p->free.mem[sv[i].node] = sv[i].mem;
		for (int d = 0; d < sv[i].ndev; d++)
			p->free.dev[sv[i].dev_idx[d]] = sv[i].dev_val[d];
	}
	for (int i = 0; i < n; i++)
		cap_update_node(p, sv[i].node);
	free(sv);
}

/* Takes what a job waiting on its victims will use out of `free` for the rest
 * of the pass: nobody else may have it, whatever their time limit. */
static void add_hold(struct st *st, const struct placement *pl)
{
	struct pass *p = &st->p;
	for (int i = 0; i < pl->nnodes; i++) {
		const struct sched_assign *a = &pl->nodes[i];
		int n = a->node;
		p->free.cpus[n] -= MIN(a->cpus, p->free.cpus[n]);
		p->free.mem[n] -= MIN(a->mem_mib, p->free.mem[n]);
		for (int d = 0; d < a->ndev; d++) {
			int *f = &p->free.dev[p->dev_off[n] + a->devs[d]];
			*f -= MIN(a->milli, *f);
		}
		cap_update_node(p, n);
	}
}

/* Records a reservation on the parts of placement pl that are free now. */
static void add_resv(struct st *st, int job, int64_t until, const struct placement *pl)
{
	struct pass *p = &st->p;
	xgrow(&st->resv, &st->resv_alloc, (size_t)st->nresv + 1, sizeof(*st->resv));
	struct resv *r = &st->resv[st->nresv++];
	r->job = job;
	r->until = until;
	r->n = pl->nnodes;
	r->a = xcalloc((size_t)pl->nnodes, sizeof(*r->a));
	for (int i = 0; i < pl->nnodes; i++) {
		const struct sched_assign *src = &pl->nodes[i];
		struct sched_assign *a = &r->a[i];
		a->node = src->node;
		a->cpus = MIN(src->cpus, p->free.cpus[src->node]);
		a->mem_mib = MIN(src->mem_mib, p->free.mem[src->node]);
		a->milli = src->milli;
		for (int d = 0; d < src->ndev; d++)
			if (p->free.dev[p->dev_off[src->node] + src->devs[d]] > 0)
				a->devs[a->ndev++] = src->devs[d];
	}
}

/* The end time ignoring this pass's choices: what the sort uses. */
static int64_t static_end(const struct st *st, const struct sched_running *r)
{
	if (r->stopping)
		return st->p.now;
	if (!r->time_limit_s)
		return FOREVER;
	return MAX(st->p.now, r->start_ms + r->time_limit_s * 1000);
}

/* A running job and when it is expected to end, for reservations. */
struct end_item {
	int64_t end;
	int idx;
};

/* Sorts by end, soonest first, every end being at or after `now`. The order
 * among equal ends is not kept: shadow() releases all the jobs of one end
 * before it places. An LSD radix sort on the offset from now, 11 bits a
 * round and only as many rounds as the latest finite end needs (a few for
 * time limits of days); FOREVER goes last. */
static void sort_by_end(struct end_item *a, int n, int64_t now)
{
	int nf = 0;
	uint64_t max = 0;
	for (int i = 0; i < n; i++) {
		if (a[i].end == FOREVER)
			continue;
		struct end_item t = a[nf];
		a[nf] = a[i];
		a[i] = t;
		max = MAX(max, (uint64_t)(a[nf].end - now));
		nf++;
	}
	if (nf < 2 || max == 0)
		return;
	enum { BITS = 11, RADIX = 1 << BITS };
	struct end_item *tmp = xmalloc(sizeof(*tmp) * (size_t)nf), *src = a, *dst = tmp;
	int *count = xmalloc(sizeof(int) * RADIX);
	for (int shift = 0; shift < 64 && max >> shift; shift += BITS) {
		memset(count, 0, sizeof(int) * RADIX);
		for (int i = 0; i < nf; i++)
			count[((uint64_t)(src[i].end - now) >> shift) & (RADIX - 1)]++;
		for (int b = 0, sum = 0; b < RADIX; b++) {
			int c = count[b];
			count[b] = sum;
			sum += c;
		}
		for (int i = 0; i < nf; i++)
			dst[count[((uint64_t)(src[i].end - now) >> shift) & (RADIX - 1)]++] =
				src[i];
		struct end_item *t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, sizeof(*a) * (size_t)nf);
	free(count);
	free(tmp);
}

/* A stable bottom-up merge sort with the comparison inlined: qsort's call
 * per comparison was a tenth of an incremental pass when the pass sorted
 * every running job. LESS(x, y) takes pointers; ctx is passed through to
 * it. */
#define DEFINE_SORT(name, T, LESS)                                                                 \
	static void name(T *a, size_t n, const void *ctx)                                          \
	{                                                                                          \
		(void)ctx;                                                                         \
		if (n < 2)                                                                         \
			return;                                                                    \
		T *tmp = xmalloc(sizeof(T) * n), *src = a, *dst = tmp;                             \
		for (size_t w = 1; w < n; w *= 2) {                                                \
			for (size_t lo = 0; lo < n; lo += 2 * w) {                                 \
				size_t mid = MIN(lo + w, n), hi = MIN(lo + 2 * w, n);              \
				size_t i = lo, k = mid, o = lo;                                    \
				while (i < mid && k < hi)                                          \
					dst[o++] = LESS(&src[k], &src[i]) ? src[k++] : src[i++];   \
				while (i < mid)                                                    \
					dst[o++] = src[i++];                                       \
				while (k < hi)                                                     \
					dst[o++] = src[k++];                                       \
			}                                                                          \
			T *t = src;                                                                \
			src = dst;                                                                 \
			dst = t;                                                                   \
		}                                                                                  \
		if (src != a)                                                                      \
			memcpy(a, src, sizeof(T) * n);                                             \
		free(tmp);                                                                         \
	}

/* The running jobs in order of expected end, for reservations: sorted once a
 * pass by their time limits; jobs chosen as victims since end now, and go
 * first, with the others that end now. Returns the order (the sorted list
 * itself while no victims were chosen), and its length in *n. */
static const struct end_item *end_order(struct st *st, int *ret_n)
{
	const struct sched_snapshot *s = st->p.snap;
	if (!st->end_sorted) {
		struct end_item *h = st->end_heap;
		for (int i = 0; i < s->nrunning; i++)
			h[i] = (struct end_item){static_end(st, &s->running[i]), i};
		sort_by_end(h, s->nrunning, st->p.now);
		st->end_sorted = true;
	}
	const struct end_item *h = st->end_heap;
	*ret_n = s->nrunning;
	if (st->d->npreempts == 0)
		return h;
	struct end_item *out = st->end_list;
	int n = 0, k = 0;
	/* what ends now: the sorted prefix, and the victims */
	while (k < s->nrunning && h[k].end <= st->p.now)
		out[n++] = h[k++];
	for (int i = k; i < s->nrunning; i++)
		if (st->victim[h[i].idx])
			out[n++] = (struct end_item){st->p.now, h[i].idx};
	for (int i = k; i < s->nrunning; i++)
		if (!st->victim[h[i].idx])
			out[n++] = h[i];
	return out;
}

/* When could j start, and where, as running jobs end by their time limits?
 * Running jobs are released in order of expected end until j fits. Fills
 * *until and st->pl; false if not even when all have ended. */
static bool shadow(struct st *st, const struct req *rq, int64_t *until)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	scratch_from_free(p);
	int n;
	const struct end_item *h = end_order(st, &n);
	struct fitcount fc;
	fit_init(p, &fc, rq, &p->scratch);
	struct place_fail why;
	bool ok = false;
	for (int i = 0; i < n && !ok; i++) {
		struct end_item it = h[i];
		if (it.end == FOREVER) {
			/* the rest have no time limit: they all end "at once", at an
			 * unknown time */
			for (; i < n; i++) {
				const struct sched_running *r = &s->running[h[i].idx];
				scratch_apply(p, r->nodes, r->nnodes, +1);
				for (int x = 0; x < r->nnodes; x++)
					fit_update(p, &fc, &p->scratch, r->nodes[x].node);
			}
			i = n - 1;
		} else {
			const struct sched_running *r = &s->running[it.idx];
			scratch_apply(p, r->nodes, r->nnodes, +1);
			for (int x = 0; x < r->nnodes; x++)
				fit_update(p, &fc, &p->scratch, r->nodes[x].node);
		}
		/* place once enough nodes could hold it, at most once per end time */
		if (i + 1 < n && h[i + 1].end == it.end)
			continue;
		if (!fit_enough(&fc))
			continue;
		st->d->placements_tried++;
		if (place(p, rq, &p->scratch, &st->pl, &why)) {
			*until = it.end;
			ok = true;
		}
	}
	fit_release(&fc);
	return ok;
}

/* ---- preemption ---------------------------------------------------------------------- */

struct victim {
	int idx;
	int prio;
	int64_t lost;
	int64_t milli;
	bool chosen;
};

static inline bool victim_less(const struct victim *x, const struct victim *y,
			       const struct sched_snapshot *s)
{
	if (x->prio != y->prio)
		return x->prio < y->prio;
	if (x->lost != y->lost)
		return x->lost < y->lost;
	if (x->milli != y->milli)
		return x->milli < y->milli;
	return s->running[x->idx].id < s->running[y->idx].id;
}

#define VICTIM_LESS(x, y) victim_less((x), (y), (const struct sched_snapshot *)ctx)
DEFINE_SORT(sort_victims, struct victim, VICTIM_LESS)

/* Releases (sign +1) or takes back (-1) victim k's resources on node n only. */
static void apply_on_node(struct pass *p, const struct sched_running *r, int n, int sign)
{
	for (int x = 0; x < r->nnodes; x++)
		if (r->nodes[x].node == n)
			scratch_apply(p, &r->nodes[x], 1, sign);
}

struct node_cost {
	int node;
	int64_t cost; /* the dearest victim needed there, by rank; 0: none needed */
	int nvict;
};

static int cmp_node_cost(const void *a, const void *b, void *arg)
{
	const struct node_cost *x = a, *y = b;
	const int *rank = arg;
	if (x->cost != y->cost)
		return x->cost < y->cost ? -1 : 1;
	if (x->nvict != y->nvict)
		return x->nvict < y->nvict ? -1 : 1;
	return rank[x->node] - rank[y->node];
}

/* Moves the k cheapest of a[0..n) to the front, in no particular order
 * (quickselect). */
static void select_cheapest(struct node_cost *a, int n, int k, void *snap)
{
	int lo = 0, hi = n - 1;
	while (lo < hi && k > 0 && k < n) {
		struct node_cost pivot = a[(lo + hi) / 2];
		int i = lo, j = hi;
		while (i <= j) {
			while (cmp_node_cost(&a[i], &pivot, snap) < 0)
				i++;
			while (cmp_node_cost(&a[j], &pivot, snap) > 0)
				j--;
			if (i <= j) {
				struct node_cost t = a[i];
				a[i++] = a[j];
				a[j--] = t;
			}
		}
		if (k - 1 <= j)
			hi = j;
		else if (k - 1 >= i)
			lo = i;
		else
			break;
	}
}

/* For each node that has `model`, the cheapest victims there whose end lets it
 * hold one node's share of rq; fills out, returns how many nodes could. */
static int node_costs(struct st *st, const struct req *rq, const struct victim *v, const int *head,
		      const int *link_v, const int *link_next, int model, struct node_cost *out)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	int cnt = 0;
	int from = model >= 0 ? p->model_nodes_off[model] : 0;
	int to = model >= 0 ? p->model_nodes_off[model + 1] : p->nn;
	for (int xi = from; xi < to; xi++) {
		int n = model >= 0 ? p->model_nodes[xi] : xi;
		if (!s->nodes[n].schedulable)
			continue;
		int k = 0;
		int64_t cost = 0;
		bool can = node_can_public(p, rq, &p->scratch, n, model);
		for (int l = head[n]; l >= 0 && !can; l = link_next[l]) {
			apply_on_node(p, &s->running[v[link_v[l]].idx], n, +1);
			k++;
			cost = link_v[l] + 1;
			can = node_can_public(p, rq, &p->scratch, n, model);
		}
		for (int l = head[n], x = 0; x < k; l = link_next[l], x++)
			apply_on_node(p, &s->running[v[link_v[l]].idx], n, -1);
		if (can)
			out[cnt++] = (struct node_cost){n, cost, k};
	}
	return cnt;
}

/*
 * Chooses victims among v (sorted cheapest first) so that rq fits in
 * p->scratch. For each node, the cheapest victims there that make it able to
 * hold one node's share; then the cheapest nodes; their victims are released
 * and the gang placed for real. Returns the number chosen (marked in v), with
 * the placement in st->pl and scratch holding the released state; 0 if no
 * set makes room.
 */
static int pick_victims(struct st *st, const struct req *rq, struct victim *v, int nv)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	int nn = p->nn;
	/* the victims on each node, cheapest first */
	int *head = xcalloc((size_t)nn, sizeof(int)), nlinks = 0;
	for (int n = 0; n < nn; n++)
		head[n] = -1;
	int total = 0;
	for (int i = 0; i < nv; i++)
		total += s->running[v[i].idx].nnodes;
	int *link_v = xcalloc((size_t)total + 1, sizeof(int));
	int *link_next = xcalloc((size_t)total + 1, sizeof(int));
	int *tail = xcalloc((size_t)nn, sizeof(int));
	for (int i = 0; i < nv; i++) {
		const struct sched_running *r = &s->running[v[i].idx];
		for (int x = 0; x < r->nnodes; x++) {
			int n = r->nodes[x].node, l = nlinks++;
			link_v[l] = i;
			link_next[l] = -1;
			if (head[n] < 0)
				head[n] = l;
			else
				link_next[tail[n]] = l;
			tail[n] = l;
		}
	}
	bool devices = rq->whole || rq->frac;
	int ngroups = devices && !rq->j->mixed_types ? p->nmodels : 1;
	/* node_costs() writes every entry it counts: no need to clear them */
	struct node_cost *nc = xmalloc(sizeof(*nc) * ((size_t)nn + 1));
	struct node_cost *tmp = xmalloc(sizeof(*nc) * ((size_t)nn + 1));
	int best_group = -1, cnt = 0;
	int64_t best_total = 0;
	int need = rq->j->nodes, chosen = 0;
	for (int g = 0; g < ngroups; g++) {
		int model = devices && !rq->j->mixed_types ? g : -1;
		if (model >= 0 && !rq->model_ok[model])
			continue;
		int c = node_costs(st, rq, v, head, link_v, link_next, model, tmp);
		if (c < need)
			continue;
		/* the dearest victim among the `need` cheapest nodes */
		select_cheapest(tmp, c, need, p->name_rank);
		int64_t t = 0;
		for (int i = 0; i < need; i++)
			t = MAX(t, tmp[i].cost);
		if (best_group < 0 || t < best_total) {
			best_group = g;
			best_total = t;
			struct node_cost *sw = nc;
			nc = tmp;
			tmp = sw;
			cnt = c;
		}
	}
	if (best_group >= 0) {
		/* take nodes cheapest first until the gang can be placed: sort a
		 * generous prefix first, the rest only if that was not enough */
		int prefix = MIN(cnt, need * 2 + 8);
		select_cheapest(nc, cnt, prefix, p->name_rank);
		qsort_r(nc, (size_t)prefix, sizeof(*nc), cmp_node_cost, p->name_rank);
		for (int i = 0; i < cnt; i++) {
			if (i == prefix)
				qsort_r(nc + prefix, (size_t)(cnt - prefix), sizeof(*nc),
					cmp_node_cost, p->name_rank);
			int n = nc[i].node, k = 0;
			for (int l = head[n]; l >= 0 && k < nc[i].nvict; l = link_next[l], k++) {
				struct victim *vi = &v[link_v[l]];
				if (vi->chosen)
					continue;
				vi->chosen = true;
				chosen++;
				const struct sched_running *r = &s->running[vi->idx];
				scratch_apply(p, r->nodes, r->nnodes, +1);
			}
			if (i + 1 < need)
				continue;
			struct place_fail why;
			st->d->placements_tried++;
			if (place(p, rq, &p->scratch, &st->pl, &why))
				goto found;
		}
	}
	/* nothing worked */
	for (int i = 0; i < nv; i++)
		v[i].chosen = false;
	chosen = 0;
	goto done;
found:
	/* keep only the victims on nodes the placement uses */
	for (int i = 0; i < nv; i++) {
		if (!v[i].chosen)
			continue;
		const struct sched_running *r = &s->running[v[i].idx];
		bool used = false;
		for (int x = 0; x < r->nnodes && !used; x++)
			for (int y = 0; y < st->pl.nnodes; y++)
				if (r->nodes[x].node == st->pl.nodes[y].node)
					used = true;
		if (!used) {
			v[i].chosen = false;
			chosen--;
			scratch_apply(p, r->nodes, r->nnodes, -1);
		}
	}
	struct place_fail why2;
	st->d->placements_tried++;
	if (!place(p, rq, &p->scratch, &st->pl, &why2))
		abort(); /* every node of the placement kept what made it fit */
done:
	free(head);
	free(tail);
	free(link_v);
	free(link_next);
	free(nc);
	free(tmp);
	return chosen;
}

/* Finds the cheapest set of running jobs whose end lets j's whole gang start.
 * On success records them, holds the placement, and returns true; nothing is
 * preempted otherwise. */
static void relset_release(struct relset *rs)
{
	free(rs->r);
	free(rs->cells);
	memset(rs, 0, sizeof(*rs));
}

static void relset_add(struct pass *p, struct relset *rs, const struct sched_running *run)
{
	int nm = p->nmodels;
	for (int k = 0; k < run->nnodes; k++) {
		const struct sched_assign *a = &run->nodes[k];
		for (int d = 0; d < a->ndev; d++) {
			int x = a->node * nm + p->dev_model[p->dev_off[a->node] + a->devs[d]];
			if (rs->r[x]++ == 0)
				rs->cells[rs->ncells++] = x;
		}
	}
}

/* A victim's devices, no longer to be released (its cells stay listed). */
static void relset_take(struct pass *p, struct relset *rs, const struct sched_running *run)
{
	int nm = p->nmodels;
	for (int k = 0; k < run->nnodes; k++) {
		const struct sched_assign *a = &run->nodes[k];
		for (int d = 0; d < a->ndev; d++)
			rs->r[a->node * nm + p->dev_model[p->dev_off[a->node] + a->devs[d]]]--;
	}
}

static void relset_init(struct pass *p, struct relset *rs)
{
	size_t cells = (size_t)p->nn * (size_t)p->nmodels + 1;
	if (!rs->r) {
		rs->r = xmalloc(sizeof(int) * cells);
		rs->cells = xmalloc(sizeof(int) * cells);
	}
	memset(rs->r, 0, sizeof(int) * cells);
	rs->ncells = 0;
}

/* Devices that running jobs preemptible by class c hold. Worked out once per
 * class and pass; victims chosen since are taken out as they are chosen. */
static const struct relset *releasable(struct st *st, int c)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	struct relset *rs = &st->rel[c];
	if (rs->r)
		return rs;
	relset_init(p, rs);
	for (int i = 0; i < s->nrunning; i++) {
		const struct sched_running *run = &s->running[i];
		const struct sched_class *rc = &s->classes[run->cls];
		if (run->stopping || run->held_for || st->victim[i] || !rc->preemptible ||
		    rc->priority >= s->classes[c].priority)
			continue;
		relset_add(p, rs, run);
	}
	return rs;
}

/* Like releasable(), for reclaiming: devices held by jobs of queues over
 * their quota; redone when a queue's use changes. */
static const struct relset *reclaimable(struct st *st)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	struct relset *rs = &st->recl;
	if (rs->r && rs->valid_for == st->qversion + 1)
		return rs;
	relset_init(p, rs);
	for (int i = 0; i < s->nrunning; i++) {
		const struct sched_running *run = &s->running[i];
		const struct sched_queue *q = &s->queues[run->queue];
		if (run->stopping || run->held_for || st->victim[i] || q->quota_milli < 0 ||
		    st->qs[run->queue].use - st->qs[run->queue].reclaiming <= q->quota_milli)
			continue;
		relset_add(p, rs, run);
	}
	rs->valid_for = st->qversion + 1;
	return rs;
}

/* Are there enough nodes where what is free in `free` plus what a and b say
 * could be released holds a node's share of rq? Optimistic: false is
 * certain, true worth a search. A fraction needs one device free enough or
 * held by someone who could be released. Nodes with enough free come from
 * the capacity index, the others can only be where something is released:
 * the cost is that of the lists, not of the nodes. */
static bool enough_releasable(struct st *st, const struct req *rq, const struct relset *a,
			      const struct relset *b)
{
	struct pass *p = &st->p;
	int nm = p->nmodels;
	int *cnt = p->model_scratch;
	for (int m = 0; m < nm; m++) {
		cnt[m] = 0;
		if (!rq->model_ok[m])
			continue;
		const int *cap = &p->cap[m * (MODEL_MAX_ACCELS + 1)];
		for (int k = rq->frac ? 1 : rq->whole; k <= MODEL_MAX_ACCELS; k++)
			cnt[m] += cap[k];
		if (cnt[m] >= rq->j->nodes || (rq->frac && room_for_fraction(p, m, rq->frac)))
			return true;
	}
	const struct relset *sets[] = {a, b};
	for (int i = 0; i < 2; i++) {
		if (!sets[i])
			continue;
		const struct relset *rs = sets[i], *other = sets[1 - i];
		for (int c = 0; c < rs->ncells; c++) {
			int x = rs->cells[c], m = x % nm;
			if (!rq->model_ok[m] || !p->snap->nodes[x / nm].schedulable)
				continue;
			/* a cell is counted once: from the first list where it has
			 * something (victims taken out leave their cells listed) */
			if (rs->r[x] <= 0 || (i == 1 && other && other->r[x] > 0))
				continue;
			int more = rs->r[x] + (other ? other->r[x] : 0);
			if (rq->frac && more > 0)
				return true;
			int have = p->node_whole[x] + more;
			if (p->node_whole[x] < rq->whole && have >= rq->whole &&
			    ++cnt[m] >= rq->j->nodes)
				return true;
		}
	}
	return false;
}

/* Could preempting make room for rq: by class (lower classes' preemptible
 * jobs), by reclaiming (jobs of queues over their quota), or both together?
 * Optimistic, as the search that follows would find at best. */
static bool preempt_possible(struct st *st, const struct req *rq, bool by_class, bool by_reclaim)
{
	if ((!rq->whole && !rq->frac) || rq->j->mixed_types)
		return true;
	return enough_releasable(st, rq, by_class ? releasable(st, rq->j->cls) : NULL,
				 by_reclaim ? reclaimable(st) : NULL);
}

static bool try_preempt(struct st *st, int ji, const struct req *rq, bool reclaim, bool by_class_ok)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	const struct sched_job *j = rq->j;
	const struct sched_class *jc = &s->classes[j->cls];
	if (!st->victim_buf)
		st->victim_buf = xmalloc(sizeof(struct victim) * ((size_t)s->nrunning + 1));
	struct victim *v = st->victim_buf;
	int nv = 0;
	if (!st->victim_sorted) {
		/* everyone in victim order, once per pass; each attempt filters */
		st->victim_order = xcalloc((size_t)s->nrunning + 1, sizeof(struct victim));
		for (int i = 0; i < s->nrunning; i++) {
			const struct sched_running *r = &s->running[i];
			int64_t since = MAX(r->start_ms, r->last_checkpoint_ms);
			st->victim_order[i] =
				(struct victim){i, s->classes[r->cls].priority,
						MAX(0, p->now - since), running_milli(r), false};
		}
		sort_victims(st->victim_order, (size_t)s->nrunning, s);
		st->victim_sorted = true;
	}
	for (int o = 0; o < s->nrunning; o++) {
		int i = st->victim_order[o].idx;
		const struct sched_running *r = &s->running[i];
		if (r->stopping || r->held_for || st->victim[i])
			continue;
		const struct sched_class *rc = &s->classes[r->cls];
		const struct sched_queue *rq_ = &s->queues[r->queue];
		bool by_class = by_class_ok && jc->may_preempt && rc->preemptible &&
				rc->priority < jc->priority;
		bool by_reclaim =
			reclaim && r->queue != j->queue && rq_->quota_milli >= 0 &&
			st->qs[r->queue].use - st->qs[r->queue].reclaiming > rq_->quota_milli;
		if (!by_class && !by_reclaim)
			continue;
		v[nv++] = st->victim_order[o];
	}
	bool ok = false;
	if (nv == 0)
		goto out;
	/* resources held for others stay theirs */
	int nsaved, first;
	struct saved *sv = block(st, j, &nsaved, &first);
	scratch_from_free(p);
	for (int i = 0; i < nsaved; i++)
		scratch_touch(p, sv[i].node); /* differs from free once unblocked */
	unblock(st, sv, nsaved);
	int nsel = pick_victims(st, rq, v, nv);
	if (nsel == 0)
		goto out; /* even all of them would not make room: preempt nothing */
	for (int i = 0; i < nv; i++) {
		if (!v[i].chosen)
			continue;
		const struct sched_running *r = &s->running[v[i].idx];
		st->victim[v[i].idx] = true;
		st->qs[r->queue].reclaiming += v[i].milli;
		st->qversion++;
		for (int c = 0; c < s->nclasses; c++)
			if (s->classes[r->cls].preemptible &&
			    s->classes[r->cls].priority < s->classes[c].priority) {
				st->preemptible_below[c]--;
				/* what it holds is no longer there to release */
				if (st->rel[c].r)
					relset_take(p, &st->rel[c], r);
			}
		struct sched_decisions *d = st->d;
		xgrow(&d->preempts, &d->preempts_alloc, (size_t)d->npreempts + 1,
		      sizeof(*d->preempts));
		d->preempts[d->npreempts++] = (struct sched_preempt){r->id, ji};
	}
	add_hold(st, &st->pl);
	ok = true;
out:
	return ok;
}

/* Is some other queue using more than its quota (so that a queue within its
 * own may reclaim)? */
static bool any_lending(struct st *st, int except)
{
	const struct sched_snapshot *s = st->p.snap;
	/* worked out again only when a queue's use or what it lends changed */
	if (!st->lends || st->lend_version != st->qversion + 1) {
		if (!st->lends)
			st->lends = xcalloc((size_t)s->nqueues, sizeof(bool));
		st->nlending = 0;
		for (int q = 0; q < s->nqueues; q++) {
			st->lends[q] =
				s->queues[q].quota_milli >= 0 &&
				st->qs[q].use - st->qs[q].reclaiming > s->queues[q].quota_milli;
			st->nlending += st->lends[q];
		}
		st->lend_version = st->qversion + 1;
	}
	return st->nlending - (st->lends[except] ? 1 : 0) > 0;
}

/* ---- one job --------------------------------------------------------------------------- */

static void start(struct st *st, int ji, const struct placement *pl)
{
	struct pass *p = &st->p;
	const struct sched_job *j = st->jobs[ji];
	struct sched_decisions *d = st->d;
	xgrow(&d->starts, &d->starts_alloc, (size_t)d->nstarts + 1, sizeof(*d->starts));
	struct sched_start *s = &d->starts[d->nstarts++];
	s->job = ji;
	s->nnodes = pl->nnodes;
	s->nodes = xcalloc((size_t)pl->nnodes, sizeof(*s->nodes));
	memcpy(s->nodes, pl->nodes, sizeof(*s->nodes) * (size_t)pl->nnodes);
	view_apply(p, &p->free, pl->nodes, pl->nnodes, -1);
	for (int i = 0; i < pl->nnodes; i++)
		cap_update_node(p, pl->nodes[i].node);
	st->qs[j->queue].use += job_milli(j);
	st->qs[j->queue].score = qscore(st, j->queue);
	st->qversion++;
}

/* Writes the reason a job cannot start now into a wait (or points to an
 * earlier job of the same shape that says it). */
static void wait_resources(struct st *st, int ji, struct shape *sh, const struct req *rq)
{
	const struct sched_job *j = rq->j;
	if (sh->detail_job >= 0 && sh->reason != SCHED_WAIT_RESOURCES) {
		add_wait(st, ji, sh->reason, sh->detail_job, 0, NULL);
		return;
	}
	struct strbuf *sb = &st->sb;
	strbuf_reset(sb);
	enum sched_wait_reason reason = SCHED_WAIT_RESOURCES;
	int64_t until = 0;
	if (sh->never < 0) {
		sh->never = !could_ever(&st->p, rq);
		if (sh->never && j->max_switches) {
			/* only a real placement on the empty cluster can tell switches */
			struct place_fail why;
			st->d->placements_tried++;
			sh->never = !place(&st->p, rq, &st->p.total, &st->pl, &why);
			if (sh->never && why.switches)
				sh->switches = why.switches;
		}
	}
	if (sh->never) {
		if (sh->switches && j->max_switches) {
			reason = SCHED_WAIT_SWITCHES;
			strbuf_addf(sb,
				    "can never start: no placement spans %d switch%s or fewer (the "
				    "nodes that could hold it span %d)",
				    j->max_switches, j->max_switches == 1 ? "" : "es",
				    sh->switches);
		} else {
			reason = SCHED_WAIT_NEVER_FITS;
			strbuf_addstr(sb, "can never start: needs ");
			describe_need(st, j, sb);
			strbuf_addstr(sb, "; no set of schedulable nodes could ever hold that");
		}
		sh->reason = reason;
		sh->detail_job = ji;
		add_wait(st, ji, reason, -1, 0, sb->buf);
		return;
	}
	const struct sched_policy *pol = st->p.policy;
	bool head =
		!st->class_has_resv[j->cls] && !(pol && (pol->no_backfill || pol->no_reservations));
	if (head && shadow(st, rq, &until)) {
		st->class_has_resv[j->cls] = true;
		add_resv(st, ji, until, &st->pl);
		strbuf_addstr(sb, "waiting for resources: needs ");
		describe_need(st, j, sb);
		if (until == FOREVER) {
			strbuf_addstr(sb, "; first in its class, holding a reservation; start time "
					  "unknown, as running jobs in its way have no time limit");
		} else {
			strbuf_addstr(sb, "; first in its class, reserved to start in about ");
			fmt_wait_time(until - st->p.now, sb);
		}
		add_wait(st, ji, SCHED_WAIT_RESOURCES, -1, until == FOREVER ? 0 : until, sb->buf);
		return;
	}
	if (sh->generic_job >= 0) {
		add_wait(st, ji, sh->reason, sh->generic_job, 0, NULL);
		return;
	}
	if (sh->switches && j->max_switches && sh->could >= j->nodes) {
		reason = SCHED_WAIT_SWITCHES;
		strbuf_addf(sb,
			    "waiting for a placement within %d switch%s: the nodes free now span "
			    "%d",
			    j->max_switches, j->max_switches == 1 ? "" : "es", sh->switches);
	} else {
		strbuf_addstr(sb, "waiting for resources: needs ");
		describe_need(st, j, sb);
		strbuf_addf(sb, " free; %d node%s ha%s that now", sh->could,
			    sh->could == 1 ? "" : "s", sh->could == 1 ? "s" : "ve");
	}
	sh->reason = reason;
	sh->detail_job = ji;
	sh->generic_job = ji;
	add_wait(st, ji, reason, -1, 0, sb->buf);
}

/* May j preempt, and is a search for victims still worth trying for its
 * shape? (A search that found nothing is remembered: by class for the pass,
 * as victims only dwindle; by reclaim until a queue's use changes.) */
static void preempt_options(struct st *st, int cls, int queue, const struct shape *sh,
			    bool within_quota, bool *may, bool *by_class, bool *by_reclaim)
{
	const struct sched_snapshot *s = st->p.snap;
	const struct sched_policy *pol = st->p.policy;
	const struct sched_class *c = &s->classes[cls];
	*by_class = *by_reclaim = false;
	*may = (c->may_preempt || within_quota) && !(pol && pol->no_preemption);
	if (!*may)
		return;
	int cap =
		pol && pol->max_preemptions ? pol->max_preemptions : SCHED_DEFAULT_MAX_PREEMPTIONS;
	*may = cap < 0 || st->d->npreempts < cap;
	uint32_t bit = cls < 32 ? 1u << cls : 0;
	*by_class = c->may_preempt && !(sh->preempt_failed & bit) && st->preemptible_below[cls] > 0;
	*by_reclaim =
		within_quota && sh->reclaim_failed != st->qversion + 1 && any_lending(st, queue);
}

/* The first of the jobs preempted for j (st->held is sorted by whom they
 * were preempted for); == st->nheld when none. */
static int first_held(const struct st *st, const struct sched_job *j)
{
	const struct sched_snapshot *s = st->p.snap;
	int lo = 0, hi = st->nheld;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (s->running[st->held[mid]].held_for < j->id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < st->nheld && s->running[st->held[lo]].held_for == j->id ? lo : st->nheld;
}

/* The common case of a busy cluster, made cheap: j's shape already failed to
 * fit in this pass (free resources only shrink), no victims wait for it, no
 * search for victims is left to try, and its class already holds its
 * reservation, so j waits for the reason its shape's first job gave. This is
 * the answer the full path in process() gives, without its set-up. */
static bool fails_as_before(struct st *st, const struct jrec *jr, struct shape *sh,
			    bool within_quota)
{
	int ji = jr->ji;
	if (sh->state != SHAPE_FAILS || (st->nheld && first_held(st, st->jobs[ji]) < st->nheld))
		return false;
	bool may, by_class, by_reclaim;
	preempt_options(st, jr->cls, jr->queue, sh, within_quota, &may, &by_class, &by_reclaim);
	if (may && (by_class || by_reclaim))
		return false;
	int same_as;
	if (sh->detail_job >= 0 && sh->reason != SCHED_WAIT_RESOURCES) {
		same_as = sh->detail_job;
	} else {
		const struct sched_policy *pol = st->p.policy;
		bool head = !st->class_has_resv[jr->cls] &&
			    !(pol && (pol->no_backfill || pol->no_reservations));
		if (head || sh->never != 0 || sh->generic_job < 0 || (pol && pol->no_backfill))
			return false;
		same_as = sh->generic_job;
	}
	remember(sh, st, jr, false, sh->reason, same_as);
	st->d->shape_cache_hits++;
	wait_as(st, ji, sh->reason, same_as);
	return true;
}

/* The shape's last job of the same class and queue waited without the full
 * path, and nothing changed since (no job took the full path: the pass limit
 * and a strict order's block are only ever reached there, and no answer is
 * remembered after them): j waits the same. */
static inline bool waits_as_before(struct st *st, const struct jrec *jr)
{
	const struct fast *f = &st->shapes[jr->shape].fast;
	if (f->epoch != st->epoch || f->cls != jr->cls || f->queue != jr->queue ||
	    (!f->quota && st->nheld && first_held(st, st->jobs[jr->ji]) < st->nheld))
		return false;
	st->d->shape_cache_hits += !f->quota;
	wait_as(st, jr->ji, f->reason, f->same_as);
	return true;
}

static void process(struct st *st, const struct jrec *jr)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	int ji = jr->ji;
	struct shape *sh = &st->shapes[jr->shape];
	const struct sched_policy *pol = p->policy;
	struct strbuf *sb = &st->sb;
	if (pol && pol->max_starts && st->d->nstarts >= pol->max_starts) {
		add_wait(st, ji, SCHED_WAIT_PASS_LIMIT, -1, 0,
			 "waiting for the next scheduling pass");
		return;
	}
	if (st->blocked_all >= 0) {
		wait_as(st, ji, SCHED_WAIT_RESOURCES, st->blocked_all);
		return;
	}
	if (waits_as_before(st, jr))
		return;
	/* the queue's quota and borrow limit */
	const struct sched_queue *q = &s->queues[jr->queue];
	int64_t need = sh->need;
	if (q->quota_milli >= 0 && need > 0) {
		int64_t limit = q->borrow_milli < 0 ? FOREVER : q->quota_milli + q->borrow_milli;
		if (st->qs[jr->queue].use + need > limit) {
			struct qstate *qs = &st->qs[jr->queue];
			if (qs->quota_version == st->qversion + 1) {
				remember(sh, st, jr, true, SCHED_WAIT_QUOTA, qs->quota_job);
				wait_as(st, ji, SCHED_WAIT_QUOTA, qs->quota_job);
				return;
			}
			strbuf_reset(sb);
			strbuf_addf(
				sb,
				"queue \"%s\" is at its limit: %.3g accelerators in use of %.3g "
				"(quota %.3g + borrowable %.3g)",
				q->name, qs->use / 1000.0, limit / 1000.0, q->quota_milli / 1000.0,
				q->borrow_milli / 1000.0);
			add_wait(st, ji, SCHED_WAIT_QUOTA, -1, 0, sb->buf);
			qs->quota_job = ji;
			qs->quota_version = st->qversion + 1;
			remember(sh, st, jr, true, SCHED_WAIT_QUOTA, ji);
			return;
		}
	}
	bool within_quota = q->quota_milli >= 0 && st->qs[jr->queue].use + need <= q->quota_milli;
	if (fails_as_before(st, jr, sh, within_quota))
		return;
	st->epoch++;
	const struct sched_job *j = st->jobs[ji];
	struct req rq;
	if (!sh->model_ok) {
		req_init(p, j, &rq, NULL);
		sh->model_ok = rq.model_ok;
		rq.owns_models = false; /* the shape keeps it for the pass */
	} else {
		req_init(p, j, &rq, sh->model_ok);
	}
	/* a shape placed again and again scores each node once while it is
	 * unchanged (only scoring is worth remembering: tightness is cheap) */
	size_t memo_size = sizeof(struct node_memo) * ((size_t)p->nn + 1);
	if (j->nodes == 1 && place_scores(p, &rq) && sh->tries++ > 0 && !sh->memo &&
	    st->memo_bytes + memo_size <= MEMO_MAX_BYTES) {
		sh->memo = xcalloc((size_t)p->nn + 1, sizeof(struct node_memo));
		st->memo_bytes += memo_size;
	}
	rq.memo = sh->memo;
	struct place_fail why = {0, 0};
	/* waiting for victims preempted for it earlier */
	bool has_victims = false;
	int lo = first_held(st, j);
	for (int k = lo; k < st->nheld && s->running[st->held[k]].held_for == j->id; k++) {
		const struct sched_running *r = &s->running[st->held[k]];
		if (!has_victims)
			scratch_from_free(p);
		has_victims = true;
		scratch_apply(p, r->nodes, r->nnodes, +1);
	}
	if (has_victims) {
		st->d->placements_tried++;
		if (place(p, &rq, &p->free, &st->pl, &why)) {
			start(st, ji, &st->pl);
			goto done;
		}
		st->d->placements_tried++;
		if (place(p, &rq, &p->scratch, &st->pl, &why)) {
			add_hold(st, &st->pl);
			strbuf_reset(sb);
			strbuf_addstr(sb, "waiting for jobs preempted for it to exit:");
			int shown = 0;
			for (int k = lo; k < st->nheld && shown < 8 &&
					 s->running[st->held[k]].held_for == j->id;
			     k++)
				strbuf_addf(sb, "%s %lld", shown++ ? "," : "",
					    (long long)s->running[st->held[k]].id);
			add_wait(st, ji, SCHED_WAIT_PREEMPTING, -1, 0, sb->buf);
			goto done;
		}
	}
	if (sh->state != SHAPE_FAILS && sh->resv_n && sh->resv_n == st->nresv &&
	    blocked_by_all(st, j)) {
		/* the same shape already failed under these same reservations */
		st->d->shape_cache_hits++;
		add_wait(st, ji, SCHED_WAIT_RESERVED, sh->resv_job, 0, NULL);
		goto done;
	}
	if (sh->state != SHAPE_FAILS) {
		if (!cap_maybe_fits(p, &rq)) {
			sh->could = 0;
		} else {
			int nsaved, first;
			struct saved *sv = block(st, j, &nsaved, &first);
			st->d->placements_tried++;
			bool ok = place(p, &rq, &p->free, &st->pl, &why);
			unblock(st, sv, nsaved);
			if (ok) {
				start(st, ji, &st->pl);
				goto done;
			}
			if (first >= 0) {
				/* is it only the reservations in the way? */
				st->d->placements_tried++;
				if (place(p, &rq, &p->free, &st->pl, &why)) {
					const struct resv *r = &st->resv[first];
					strbuf_reset(sb);
					strbuf_addf(
						sb,
						"would delay job %lld, which holds a reservation",
						(long long)st->jobs[r->job]->id);
					if (r->until > 0 && r->until != FOREVER) {
						strbuf_addstr(sb, " starting in about ");
						fmt_wait_time(r->until - p->now, sb);
						strbuf_addstr(sb,
							      "; a time limit (--time) under that "
							      "would let it start now");
					}
					add_wait(st, ji, SCHED_WAIT_RESERVED, -1, 0, sb->buf);
					if (blocked_by_all(st, j)) {
						sh->resv_n = st->nresv;
						sh->resv_job = ji;
					}
					goto done;
				}
			}
			sh->could = why.could;
			sh->switches = why.switches;
		}
		sh->state = SHAPE_FAILS;
	} else {
		st->d->shape_cache_hits++;
	}
	/* it does not fit in what is free: preempt, if it may */
	uint32_t bit = j->cls < 32 ? 1u << j->cls : 0;
	bool may, by_class, by_reclaim;
	preempt_options(st, j->cls, j->queue, sh, within_quota, &may, &by_class, &by_reclaim);
	if (may && (by_class || by_reclaim)) {
		/* what the search would find at best, with what others hold
		 * taken out as the search takes it (a failure here is the
		 * failure the search would have ended in) */
		int nsaved, first;
		struct saved *sv = block(st, j, &nsaved, &first);
		if (!preempt_possible(st, &rq, by_class, by_reclaim)) {
			if (by_class)
				sh->preempt_failed |= bit;
			if (by_reclaim)
				sh->reclaim_failed = st->qversion + 1;
			by_class = by_reclaim = false;
		}
		unblock(st, sv, nsaved);
	}
	if (may && (by_class || by_reclaim)) {
		if (try_preempt(st, ji, &rq, by_reclaim, by_class)) {
			strbuf_reset(sb);
			strbuf_addstr(sb, "preempting lower-priority work to start");
			add_wait(st, ji, SCHED_WAIT_PREEMPTING, -1, 0, sb->buf);
			goto done;
		}
		if (by_class)
			sh->preempt_failed |= bit;
		if (by_reclaim)
			sh->reclaim_failed = st->qversion + 1;
	}
	wait_resources(st, ji, sh, &rq);
	if (pol && pol->no_backfill)
		st->blocked_all = ji;
done:
	req_release(&rq);
}

/* ---- the pass ------------------------------------------------------------------------- */

static bool snapshot_valid(const struct sched_snapshot *s)
{
	if (s->nnodes < 0 || s->njobs < 0 || s->nrunning < 0 || (s->nnodes && !s->nodes) ||
	    (s->njobs && !s->jobs) || (s->nrunning && !s->running) || s->nclasses < 1 ||
	    s->nclasses > MODEL_MAX_CLASSES || !s->classes || s->nqueues < 1 || !s->queues)
		return false;
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
		else if (!r->stopping && s->classes[r->cls].preemptible)
			by_class[r->cls]++;
	}
	for (int c = 0; c < s->nclasses && ok; c++)
		for (int v = 0; v < s->nclasses; v++)
			if (s->classes[v].priority < s->classes[c].priority)
				st->preemptible_below[c] += by_class[v];
	free(by_class);
	return ok;
}

/* One walk over the pending jobs, in the order given: checks each, files it
 * under its shape and fills st->jrec; tells whether they are in class order.
 * False for an invalid job. */
static bool index_jobs(struct st *st, bool *sorted)
{
	const struct sched_snapshot *s = st->p.snap;
	const struct sched_shapes *t = s->shapes;
	/* with the caller's table: the pass's shape of each id in it */
	int *of_id = NULL, nids = t ? shapes_ids(t) : 0;
	if (t) {
		of_id = xmalloc(sizeof(int) * ((size_t)nids + 1));
		memset(of_id, 0xff, sizeof(int) * ((size_t)nids + 1));
	}
	*sorted = true;
	int px = 0;
	const struct sched_job *x = NULL;
	bool ok = true;
	for (int i = 0; i < s->njobs && ok; i++) {
		const struct sched_job *j = s->jobs[i];
		/* the jobs lie wherever the caller keeps them: ask for the ones
		 * a little ahead while this one is read */
		if (i + PREFETCH_AHEAD < s->njobs) {
			const char *ahead = (const char *)s->jobs[i + PREFETCH_AHEAD];
			__builtin_prefetch(ahead);
			if (!t)
				__builtin_prefetch(ahead + 64);
		}
		if (!j || j->cls < 0 || j->cls >= s->nclasses || j->queue < 0 ||
		    j->queue >= s->nqueues) {
			ok = false;
			break;
		}
		int k;
		if (t) {
			if (j->shape_id < 0 || j->shape_id >= nids) {
				ok = false;
				break;
			}
			k = of_id[j->shape_id];
			if (k < 0) {
				const struct sched_job *filed = shapes_get(t, j->shape_id);
				if (!filed) {
					ok = false;
					break;
				}
				k = of_id[j->shape_id] = shape_new(st, filed, filed->shape);
			}
		} else {
			if (j->ngpu_types < 0 || (j->ngpu_types && !j->gpu_types)) {
				ok = false;
				break;
			}
			int n = st->nshapes;
			k = shape_index(st, j);
			if (k == n && !shape_valid(j)) {
				ok = false;
				break;
			}
		}
		st->shapes[k].count++;
		int py = prio(st, j->cls);
		st->jrec[i] = (struct jrec){i, k, j->queue, j->cls};
		if (x && *sorted)
			*sorted = px > py ||
				  (px == py && (x->submit_ms < j->submit_ms ||
						(x->submit_ms == j->submit_ms && x->id < j->id)));
		x = j;
		px = py;
	}
	free(of_id);
	for (int k = 0; k < st->nshapes; k++)
		st->max_nodes = MAX(st->max_nodes, st->shapes[k].j->nodes);
	return ok;
}

/* The request mix for fractional placement, from the shapes: the pending
 * single-node requests grouped by size, each kind in the order of its first
 * job (what placement must keep room for; multi-node gangs want whole
 * nodes, which best fit keeps). Also which models some job can use only. */
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
			int milli = j->gpu_milli < MODEL_MILLI ? j->gpu_milli : 0;
			int devs = j->gpu_milli >= MODEL_MILLI
					   ? j->tasks_per_node * j->gpu_milli / MODEL_MILLI
					   : 0;
			int cpus = j->tasks_per_node * j->cpus_per_task;
			int i = 0;
			while (i < p->nmix &&
			       !(p->mix[i].milli == milli && p->mix[i].devices == devs &&
				 p->mix[i].cpus == cpus))
				i++;
			if (i == p->nmix)
				p->mix[p->nmix++] = (struct sched_mix_item){milli, devs, cpus, 0};
			p->mix[i].p += st->shapes[k].count;
			total += st->shapes[k].count;
		}
		for (int i = 0; i < p->nmix; i++)
			p->mix[i].p /= total;
	}
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
	const struct sched_job *x = st->jobs[*(const int *)a], *y = st->jobs[*(const int *)b];
	int px = prio(st, x->cls), py = prio(st, y->cls);
	if (px != py)
		return px > py ? -1 : 1;
	if (x->submit_ms != y->submit_ms)
		return x->submit_ms < y->submit_ms ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
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
	st.blocked_all = -1;
	st.epoch = 1;
	st.p.snap = snap;
	st.p.policy = policy;
	st.p.now = now_ms;
	for (int c = 0; c < snap->nclasses; c++)
		st.prio_of[c] = snap->classes[c].priority;
	int nj = snap->njobs;
	st.qs = xcalloc((size_t)snap->nqueues, sizeof(*st.qs));
	st.held = xmalloc(sizeof(int) * ((size_t)snap->nrunning + 1));
	st.preemptible_below = xcalloc((size_t)snap->nclasses, sizeof(int));
	st.jrec = xmalloc(sizeof(*st.jrec) * ((size_t)nj + 1));
	bool sorted;
	if (!index_running(&st) || !index_jobs(&st, &sorted)) {
		free(st.qs);
		free(st.held);
		free(st.preemptible_below);
		free(st.jrec);
		free(st.shapes);
		free(st.shape_slot);
		return -EINVAL;
	}
	place_init(&st.p);
	from_shapes(&st);
	strbuf_init(&st.sb);
	st.order = xmalloc(sizeof(int) * ((size_t)nj + 1));
	st.run = xmalloc(sizeof(*st.run) * ((size_t)nj + 1));
	st.heap = xcalloc((size_t)snap->nqueues, sizeof(int));
	st.class_has_resv = xcalloc((size_t)snap->nclasses, sizeof(bool));
	st.victim = xcalloc((size_t)snap->nrunning + 1, sizeof(bool));
	st.end_heap = xmalloc(sizeof(*st.end_heap) * ((size_t)snap->nrunning + 1));
	st.end_list = xmalloc(sizeof(*st.end_list) * ((size_t)snap->nrunning + 1));
	qsort_r(st.held, (size_t)st.nheld, sizeof(int), cmp_held, (void *)snap);
	st.pl.nodes = xcalloc((size_t)st.max_nodes + 1, sizeof(*st.pl.nodes));
	for (int q = 0; q < snap->nqueues; q++)
		st.qs[q].recent = snap->queues[q].recent_milli;
	for (int q = 0; q < snap->nqueues; q++)
		st.qs[q].quota_job = -1;
	/* every job gets a start or a wait: room for them all at once */
	ret->waits = xmalloc(sizeof(*ret->waits) * ((size_t)nj + 1));
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
				heap_push(&st, q);
		}
		while (st.nheap) {
			/* the first queue's jobs go while its share does not change
			 * (only its own starts change it) */
			int q = st.heap[0];
			struct qstate *qs = &st.qs[q];
			double before = qs->score;
			do {
				const struct jrec *jr = &st.run[qs->head++];
				if (!waits_as_before(&st, jr))
					process(&st, jr);
			} while (qs->head < qs->tail && qs->score == before);
			if (qs->head == qs->tail)
				heap_pop(&st);
			else
				heap_fix(&st, 0);
		}
		seg = end;
	}
	for (int i = 0; i < st.nresv; i++)
		free(st.resv[i].a);
	free(st.resv);
	free(st.order);
	free(st.run);
	free(st.qs);
	free(st.heap);
	free(st.class_has_resv);
	free(st.victim);
	free(st.end_heap);
	free(st.end_list);
	free(st.held);
	free(st.preemptible_below);
	for (int c = 0; c < MODEL_MAX_CLASSES; c++)
		relset_release(&st.rel[c]);
	relset_release(&st.recl);
	free(st.victim_order);
	free(st.victim_buf);
	free(st.lends);
	for (int i = 0; i < st.nshapes; i++) {
		free(st.shapes[i].model_ok);
		free(st.shapes[i].memo);
	}
	free(st.shapes);
	free(st.shape_slot);
	free(st.jrec);
	free(st.pl.nodes);
	strbuf_release(&st.sb);
	place_release(&st.p);
	return 0;
}

void sched_decisions_release(struct sched_decisions *d)
{
	for (int i = 0; i < d->nstarts; i++)
		free(d->starts[i].nodes);
	for (int i = 0; i < d->nwaits; i++)
		free(d->waits[i].detail);
	free(d->starts);
	free(d->preempts);
	free(d->waits);
	memset(d, 0, sizeof(*d));
}
