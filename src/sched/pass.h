/*
 * Private to src/sched: the state of one pass's order, quotas, reservations
 * and preemption, shared by the files that decide them (pass.c, order.c,
 * job.c, backfill.c, preempt.c, wait.c). Where a job goes is placement's
 * (internal.h, place.c and its neighbours).
 *
 * What a pass keeps within itself, and what must hold of it at the end of
 * every segment (checked there by assert_pass_consistent() in debug builds,
 * as SQLite checks its pager):
 *
 *  1. What is free on a node (CPUs, memory, each device's share) never goes
 *     below zero where the snapshot had it at or above zero.
 *  2. Nothing is given twice: what is free is at most what the snapshot said
 *     was free less what the pass started there. Holds take more away;
 *     sched__block() takes reservations out of `free` only while one job is placed,
 *     and sched__unblock() puts back exactly what it took.
 *  3. The capacity index and the candidate lists describe `free`: every
 *     schedulable node is counted and listed, once under each of its
 *     models, by its whole free devices and the room on its roomiest device,
 *     and once by its accelerators and free CPUs (assert_place_consistent).
 *  4. A queue's use is what its running jobs held when the pass began plus
 *     what the pass started for it; what it reclaims (its victims' share)
 *     is within that.
 *  5. Every job of the segments done has exactly one decision, a start or a
 *     wait, and every wait's `same_as` names a job decided before it.
 *  6. A running job is chosen as a victim at most once, and never while it
 *     is stopping already or held for another job.
 *  7. The remembered answers are stamped: a shape's `fast` answer holds while
 *     the epoch is the one it was taken in, a stamp while the qversion is.
 */
#pragma once

#include "internal.h"

#define FOREVER INT64_MAX

/* When a remembered answer was worked out: the version of what it depends on
 * (the pass's qversion). The stamp holds version + 1, so that a stamp left
 * zero, as every struct of a pass starts, is valid for no version. */
struct stamp {
	uint64_t v;
};

static inline void stamp_set(struct stamp *s, uint64_t version)
{
	s->v = version + 1;
}

static inline bool stamp_valid(const struct stamp *s, uint64_t version)
{
	return s->v == version + 1;
}
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
	/* it failed under all of the first resv_n - 1 reservations (0: not
	 * known), and under the windows of resv_wmask (sched__windows_in_way) */
	int resv_n;
	uint64_t resv_wmask;
	bool resv_unlimited;	     /* ... that job had no time limit (its text says so) */
	struct stamp reclaim_failed; /* when reclaiming last found nothing for it */
	bool *model_ok;		     /* its acceptable models, once worked out */
	int resv_job;		     /* ... and that job's wait says why */
	int tries;		     /* jobs of this shape placed or tried in this pass */
	int count;		     /* pending jobs of this shape */
	int64_t need;		     /* accelerators a job of it asks for, milli */
	struct fast fast;
	struct memo_table *memo; /* from its second job on (single-node shapes) */
};

struct qstate {
	int64_t use;   /* milli-accelerators held, including what started this pass */
	int quota_job; /* a job whose wait says the queue is at its limit (-1: none yet) */
	struct stamp quota_version; /* when quota_job's text was written */
	int64_t reclaiming;	    /* held by its jobs preempted in this pass: soon free */
	double score;		    /* fair share: lower goes first */
	double recent;
	double units;	/* what it holds in weighted milli units (quota.c) */
	int head, tail; /* this segment's jobs of the queue: st->run[head .. tail) */
	int heap_pos;
};

/* What the order and the common paths need of each pending job, gathered in
 * one walk so that the pass reads 16 bytes per job, not a scattered job;
 * copied again into the order the jobs are tried in, so that it reads them
 * one after the other (at a million waiting, a job read where it lies in
 * the queues' order was most of a pass). Its id and time limit, which a
 * few paths read, come from the caller's keys (jrec_id(), jrec_time_limit()). */
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
	struct stamp valid_for; /* when reclaimable() worked it out */
};

/* What a preemption search works in, kept for the pass's searches
 * (preempt.c): per node, the first and last of its victims (head -1
 * between searches), the links, the nodes' costs. */
struct node_cost;
struct pick_bufs {
	int *head, *tail;
	int *link_v, *link_next;
	size_t link_alloc;
	struct node_cost *nc, *tmp;
};

void sched__pick_release(struct pass *p, struct pick_bufs *b);

struct st {
	struct pass p;
	bool placed; /* sched__place_init ran: its release is due */
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
	int limit_job;	      /* the first job the pass limit left waiting, or -1 */
	bool *victim;	      /* running: chosen as a victim in this pass */
	struct shape *shapes; /* every shape among the pending jobs, in order of first job */
	size_t shapes_alloc;
	int nshapes;
	int *shape_slot; /* hash index into shapes: -1 empty */
	size_t slot_cap;
	struct jrec *jrec;	      /* per pending job: what the walk over them needs */
	const struct sched_key *keys; /* the caller's, when the pass takes them */
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
	int prio_of[MODEL_MAX_CLASSES]; /* each class's class_rank() */
	bool *lends; /* per queue: uses more than its quota (sched__any_lending) */
	int nlending;
	struct stamp lend_version;   /* when lends was worked out */
	struct victim *victim_order; /* the running jobs that may be victims, cheapest first */
	int nvictims;
	bool victim_sorted;
	/* per node: its devices' models as bits (model_bit()), for searches
	 * that want some models only; made with victim_order */
	uint32_t *node_models;
	struct victim *victim_buf; /* scratch for one preemption search */
	/* per node and model group: counted as able in a search's walk
	 * (cleared after each); per node: the search that last listed it */
	unsigned char *vfit;
	int *vseen, vgen;
	int *vnodes; /* the nodes a search's walk touched */
	int *vcnt;   /* per model group: nodes counted */
	struct pick_bufs pick;
	bool *win_ok; /* per node: a job's node_ok less the windows in its way */
	/* limits beyond accelerators (quota.c): each queue's use of each of
	 * its dims (qdim_use[qdim_off[q] + d]), each dim's model index (-1:
	 * none in the cluster, or not a model's), each model's weight; a job's
	 * own models (its shape's less those over a limit) */
	bool any_qdims;
	double *qdim_use;
	int *qdim_off;
	int *qdim_model;
	double *model_w;
	bool *quota_ok;
	int *held; /* running indices sorted by held_for, for jobs waiting on victims */
	int nheld;
	struct strbuf sb;
};

/* A running job and when it is expected to end, for reservations. */
struct end_item {
	int64_t end;
	int idx;
};

/* What sched__block() took out of `free`, for sched__unblock() to put back. */
struct saved;

/* A class's place in the order: its priority, and among the levels of a
 * class ordered by least attained service, the level (the first highest). */
static inline int prio(const struct st *st, int cls)
{
	return st->prio_of[cls];
}

static inline int class_rank(const struct sched_class *c)
{
	return c->priority * SCHED_LAS_MAX_LEVELS + (SCHED_LAS_MAX_LEVELS - 1 - c->las_level);
}

/* May a job of class jc stop a running job of class rc? By class: jc may
 * preempt, rc may be preempted and is of a lower priority. By attained
 * service: rc is a later level of jc's own class. */
static inline bool class_takes(const struct sched_class *jc, const struct sched_class *rc)
{
	if (jc->las_family && jc->las_family == rc->las_family)
		return rc->las_level > jc->las_level;
	return jc->may_preempt && rc->preemptible && rc->priority < jc->priority;
}

/* May a job of class jc stop running job r now? class_takes(); for an
 * earlier level's preemption, once r's attempt has run its family's
 * minimum, and while it would lose no more than the family allows. */
static inline bool may_stop(const struct st *st, const struct sched_class *jc,
			    const struct sched_class *rc, const struct sched_running *r)
{
	if (!class_takes(jc, rc))
		return false;
	if (!jc->las_family || jc->las_family != rc->las_family)
		return true;
	struct sched_las_rule rule = {rc->las_min_run_ms, rc->las_max_loss_ms};
	return sched_las_may_take(rule, r, st->p.now, NULL);
}

/* May jobs of class c preempt by class at all? */
static inline bool class_may_take(const struct sched_class *c)
{
	return c->may_preempt || c->las_family;
}

static inline int64_t job_milli(const struct sched_job *j)
{
	return (int64_t)j->nodes * j->tasks_per_node * j->gpu_milli;
}

/* What a running job holds, in milli-accelerators. */
/* A model's bit in a set of models; the models past the 31st share the last
 * bit, so a set tells for sure only what it lacks. */
static inline uint32_t model_bit(int m)
{
	return 1u << MIN(m, 31);
}

static inline int64_t running_milli(const struct sched_running *r)
{
	int64_t m = 0;
	for (int i = 0; i < r->nnodes; i++)
		m += (int64_t)r->nodes[i].ndev * r->nodes[i].milli;
	return m;
}

/* A queue's fair-share score: its use (accelerators, or with weighted
 * shares its units) and recent use over its weight; lower goes first. */
static inline double qscore(const struct st *st, int q)
{
	const struct sched_queue *sq = &st->p.snap->queues[q];
	const struct sched_policy *pol = st->p.policy;
	double use = pol && pol->weighted_share ? st->qs[q].units : (double)st->qs[q].use;
	return (use + st->qs[q].recent) / (sq->weight > 0 ? sq->weight : 1);
}

/* A wait that says "as job same_as": the one a pass writes for most jobs.
 * The waits were sized for every job at the start. */
static inline void wait_as(struct st *st, int job, enum sched_wait_reason reason, int same_as)
{
	struct sched_decisions *d = st->d;
	d->waits[d->nwaits++] = (struct sched_wait){job, reason, same_as, 0, NULL};
}

static inline void remember(struct shape *sh, const struct st *st, const struct jrec *jr,
			    bool quota, enum sched_wait_reason reason, int same_as)
{
	sh->fast = (struct fast){st->epoch, jr->cls, jr->queue, quota, reason, same_as};
}

/* The first of the jobs preempted for j (st->held is sorted by whom they
 * were preempted for); == st->nheld when none. */
static inline int first_held(const struct st *st, int64_t job_id)
{
	const struct sched_snapshot *s = st->p.snap;
	int lo = 0, hi = st->nheld;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (s->running[st->held[mid]].held_for < job_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < st->nheld && s->running[st->held[lo]].held_for == job_id ? lo : st->nheld;
}

/* The id and time limit of a pending job: from the caller's keys, or from
 * the job. */
static inline int64_t jrec_id(const struct st *st, const struct jrec *jr)
{
	return st->keys ? st->keys[jr->ji].id : st->jobs[jr->ji]->id;
}

static inline int64_t jrec_time_limit(const struct st *st, const struct jrec *jr)
{
	return st->keys ? st->keys[jr->ji].time_limit_s : st->jobs[jr->ji]->time_limit_s;
}

static inline uint32_t jrec_windows(const struct st *st, const struct jrec *jr)
{
	return st->keys ? st->keys[jr->ji].windows : st->jobs[jr->ji]->windows;
}

/* The shape's last job of the same class and queue waited without the full
 * path, and nothing changed since (no job took the full path: the pass limit
 * and a strict order's block are only ever reached there, and no answer is
 * remembered after them): j waits the same. */
static inline bool waits_as_before(struct st *st, const struct jrec *jr)
{
	const struct fast *f = &st->shapes[jr->shape].fast;
	if (f->epoch != st->epoch || f->cls != jr->cls || f->queue != jr->queue ||
	    (!f->quota && st->nheld && first_held(st, jrec_id(st, jr)) < st->nheld))
		return false;
	st->d->shape_cache_hits += !f->quota;
	wait_as(st, jr->ji, f->reason, f->same_as);
	return true;
}

/* ---- pass.c ---------------------------------------------------------------------------- */

/* Checks the invariants above once ndone jobs (in order) are decided;
 * aborts on the first that does not hold. Only in debug builds. */
#ifdef TENK_DEBUG
void assert_pass_consistent(const struct st *st, int ndone);
#else
#define assert_pass_consistent(st, ndone) ((void)0)
#endif

/* ---- order.c: fair share between queues, the shape cache ---------------------------- */

void sched__heap_push(struct st *st, int q);
void sched__heap_pop(struct st *st);
void sched__heap_fix(struct st *st, int i);
/* A new shape, j being the job that stands for it. */
int sched__shape_new(struct st *st, const struct sched_job *j, uint64_t hash);
/* The index of j's shape, added at its first job. */
int sched__shape_index(struct st *st, const struct sched_job *j);

/* ---- wait.c: why a job waits ---------------------------------------------------------- */

struct sched_wait *sched__add_wait(struct st *st, int job, enum sched_wait_reason reason,
				   int same_as, int64_t until, const char *detail);
void sched__describe_need(const struct st *st, const struct sched_job *j, struct strbuf *sb);
void sched__fmt_wait_time(int64_t ms, struct strbuf *sb);
/* Writes the reason a job cannot start now into a wait (or points to an
 * earlier job of the same shape that says it); the first of its class that
 * cannot start gets a reservation. */
void sched__wait_resources(struct st *st, int ji, struct shape *sh, const struct req *rq);

/* ---- backfill.c: reservations and holds ----------------------------------------------- */

/* Does every reservation block j? (Then only their number decides.) */
bool sched__blocked_by_all(const struct st *st, int64_t time_limit_s);
/* Does window w keep a job with this time limit and these windows of its
 * own (sched_job.windows) off its nodes now? */
bool sched__window_in_way(const struct st *st, const struct sched_window *w, int64_t time_limit_s,
			  uint32_t own);
/* The windows in the way of such a job, as bits by index; those from the
 * 63rd on share the last bit, set when all of them are in its way (all)
 * or when any is (!all): a mask taken with !all is covered by one taken
 * with all only where each window it names is in the way. */
uint64_t sched__windows_in_way(const struct st *st, int64_t time_limit_s, uint32_t own, bool all);
/* Keeps rq off the nodes of the windows in its job's way (node_ok made
 * the job's own, from st->win_ok, until sched__windows_clear); false when
 * none is. */
bool sched__windows_apply(struct st *st, struct req *rq);
void sched__windows_clear(struct st *st, struct req *rq);
/* "would still run when reservation fw starts on nodes it needs, in about
 * 2h; ..." for the first window in j's way. */
void sched__window_detail(const struct st *st, const struct sched_job *j, struct strbuf *sb);
/* Takes the reservations that j must respect out of `free`; the saved values
 * let sched__unblock() restore exactly what was there. *first: the first of them,
 * or -1. */
struct saved *sched__block(struct st *st, const struct sched_job *j, int *ret_n, int *first);
void sched__unblock(struct st *st, struct saved *sv, int n);
/* The node of the i-th saved entry. */
int sched__saved_node(const struct saved *sv, int i);
/* Takes what a job waiting on its victims will use out of `free` for the rest
 * of the pass: nobody else may have it, whatever their time limit. */
void sched__add_hold(struct st *st, const struct placement *pl);
/* Records a reservation on the parts of placement pl that are free now. */
void sched__add_resv(struct st *st, int job, int64_t until, const struct placement *pl);
/* When could j start, and where, as running jobs end by their time limits?
 * Fills *until and st->pl; false if not even when all have ended. */
bool sched__shadow(struct st *st, const struct req *rq, int64_t *until);

/* ---- preempt.c ---------------------------------------------------------------------- */

/* Could preempting make room for rq: by class, by reclaiming, or both? */
bool sched__preempt_possible(struct st *st, const struct req *rq, bool by_class, bool by_reclaim);
/* Finds the cheapest set of running jobs whose end lets j's whole gang start.
 * On success records them, holds the placement, and returns true; nothing is
 * preempted otherwise. */
bool sched__try_preempt(struct st *st, int ji, const struct req *rq, bool reclaim,
			bool by_class_ok);
/* Is some other queue using more than its quota (so that a queue within its
 * own may reclaim)? */
bool sched__any_lending(struct st *st, int except);
void sched__relset_release(struct pass *p, struct relset *rs);

/* ---- quota.c: limits beyond accelerators -------------------------------------------- */

/* Each queue's use of its dims and units from the running jobs (after
 * placement's init: models known). */
void sched__quota_init(struct st *st);
void sched__quota_release(struct st *st);
/* Would j pass a CPU or memory limit of its queue? The dim's index, or -1. */
int sched__quota_over(const struct st *st, const struct sched_job *j);
/* Keeps rq to the models within its queue's model and unit limits (its
 * model_ok made the job's own, from st->quota_ok); -1 when none of its
 * models is, with the first dim in the way in *dim; 1 when some are kept
 * from it; 0 when none is. */
int sched__quota_models(struct st *st, struct req *rq, int *dim);
/* What j started on counts against its queue's dims and units. */
void sched__quota_start(struct st *st, const struct sched_job *j, const struct placement *pl);
/* "queue \"vision\": H100 limit 64 (quota 64), 64 in use; this job needs 8" */
void sched__quota_describe(const struct st *st, const struct sched_job *j, int dim,
			   struct strbuf *sb);

/* ---- job.c: one job ------------------------------------------------------------------ */

/* Decides job jr: starts it, has it preempt, or says why it waits. */
void sched__process(struct st *st, const struct jrec *jr);
