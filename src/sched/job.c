/*
 * One job's turn in the pass (process): the pass limit and a strict order,
 * the answers remembered for its shape, its queue's limit, then a start in
 * what is free (with victims preempted for it earlier, or around the
 * reservations it must respect), preemption, or a wait with its reason.
 */
#include "pass.h"

#include <string.h>

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
	sched__view_apply(p, &p->free, pl->nodes, pl->nnodes, -1);
	for (int i = 0; i < pl->nnodes; i++) {
		int n = pl->nodes[i].node;
		if (j->exclusive) {
			/* alone there: nothing else fits beside it */
			p->free.cpus[n] = 0;
			p->free.mem[n] = 0;
			for (int k = 0; k < p->snap->nodes[n].ndev; k++)
				p->free.dev[p->dev_off[n] + k] = 0;
		}
		sched__cap_update_node(p, n);
	}
	st->qs[j->queue].use += job_milli(j);
	sched__quota_start(st, j, pl);
	st->qs[j->queue].score = qscore(st, j->queue);
	st->qversion++;
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
	*may = (class_may_take(c) || within_quota) && !(pol && pol->no_preemption);
	if (!*may)
		return;
	int cap =
		pol && pol->max_preemptions ? pol->max_preemptions : SCHED_DEFAULT_MAX_PREEMPTIONS;
	*may = cap < 0 || st->d->npreempts < cap;
	uint32_t bit = cls < 32 ? 1u << cls : 0;
	*by_class =
		class_may_take(c) && !(sh->preempt_failed & bit) && st->preemptible_below[cls] > 0;
	*by_reclaim = within_quota && !stamp_valid(&sh->reclaim_failed, st->qversion) &&
		      sched__any_lending(st, queue);
}

/* The common cases of a busy cluster, made cheap. No victims wait for j,
 * and either its shape fits only where the reservations are, every one of
 * which j would delay (its time limit, if any, runs past them): j waits as
 * the first such job does; or its shape already failed to fit in this pass
 * (free resources only shrink), no search for victims is left to try, and
 * its class already holds its reservation, so j waits for the reason its
 * shape's first job gave. This is the answer the full path in sched__process()
 * gives, without its set-up (and without telling every shape that something
 * changed: at a million waiting, most jobs of a busy cluster wait behind a
 * reservation). */
/* The shape already failed only for the reservations and windows in its
 * way (sh->resv_n), and they are all in this job's way too. */
static bool fails_in_resvs(const struct st *st, const struct shape *sh, int64_t time_limit_s,
			   uint32_t windows)
{
	if (sh->resv_n != st->nresv + 1 || !sched__blocked_by_all(st, time_limit_s) ||
	    (sh->resv_wmask && sh->resv_unlimited != !time_limit_s))
		return false;
	return !sh->resv_wmask || (sched__windows_in_way(st, time_limit_s, windows, true) &
				   sh->resv_wmask) == sh->resv_wmask;
}

static bool fails_as_before(struct st *st, const struct jrec *jr, struct shape *sh,
			    bool within_quota)
{
	int ji = jr->ji;
	if (st->nheld && first_held(st, jrec_id(st, jr)) < st->nheld)
		return false;
	if (sh->state != SHAPE_FAILS) {
		if (!fails_in_resvs(st, sh, jrec_time_limit(st, jr), jrec_windows(st, jr)))
			return false;
		st->d->shape_cache_hits++;
		sched__add_wait(st, ji, SCHED_WAIT_RESERVED, sh->resv_job, 0, NULL);
		return true;
	}
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

/* The queue's quota and borrow limit: true when j waits for them (the first
 * job of the queue to hit its limit while no queue's use changed says why;
 * the others point to it). */
static bool at_queue_limit(struct st *st, const struct jrec *jr, struct shape *sh)
{
	const struct sched_queue *q = &st->p.snap->queues[jr->queue];
	struct qstate *qs = &st->qs[jr->queue];
	int64_t need = sh->need;
	if (st->any_qdims && q->ndims) {
		/* its CPU and memory limits (the shape's job asks what it does) */
		struct sched_job as = *sh->j;
		as.queue = jr->queue;
		int d = sched__quota_over(st, &as);
		if (d >= 0) {
			struct strbuf *sb = &st->sb;
			strbuf_reset(sb);
			sched__quota_describe(st, &as, d, sb);
			sched__add_wait(st, jr->ji, SCHED_WAIT_QUOTA, -1, 0, sb->buf);
			remember(sh, st, jr, true, SCHED_WAIT_QUOTA, jr->ji);
			return true;
		}
	}
	if (q->quota_milli < 0 || need <= 0)
		return false;
	int64_t limit = q->borrow_milli < 0 ? FOREVER : q->quota_milli + q->borrow_milli;
	if (qs->use + need <= limit)
		return false;
	if (stamp_valid(&qs->quota_version, st->qversion)) {
		remember(sh, st, jr, true, SCHED_WAIT_QUOTA, qs->quota_job);
		wait_as(st, jr->ji, SCHED_WAIT_QUOTA, qs->quota_job);
		return true;
	}
	struct strbuf *sb = &st->sb;
	strbuf_reset(sb);
	strbuf_addf(sb,
		    "queue \"%s\" is at its limit: %.3g accelerators in use of %.3g "
		    "(quota %.3g + borrowable %.3g)",
		    q->name, qs->use / 1000.0, limit / 1000.0, q->quota_milli / 1000.0,
		    q->borrow_milli / 1000.0);
	sched__add_wait(st, jr->ji, SCHED_WAIT_QUOTA, -1, 0, sb->buf);
	qs->quota_job = jr->ji;
	stamp_set(&qs->quota_version, st->qversion);
	remember(sh, st, jr, true, SCHED_WAIT_QUOTA, jr->ji);
	return true;
}

/* The request of j as placement sees it, with its shape's acceptable models
 * (worked out once per shape) and, for a single-node shape placed again and
 * again, its remembered node scores (only scoring is worth remembering:
 * tightness is cheap). */
static void shape_req(struct st *st, const struct sched_job *j, struct shape *sh, struct req *rq)
{
	struct pass *p = &st->p;
	if (!sh->model_ok) {
		sched__req_init(p, j, rq, NULL);
		sh->model_ok = rq->model_ok;
		rq->owns_models = false; /* the shape keeps it for the pass */
	} else {
		sched__req_init(p, j, rq, sh->model_ok);
	}
	if (j->nodes == 1 && sched__place_scores(p, rq) && sh->tries++ > 0 && !sh->memo)
		sh->memo = sched__memo_new(p);
	rq->memo = sh->memo;
}

/* Victims preempted for j earlier: it starts where they were once they are
 * gone, or holds what they will free. True when that decided j. */
static bool start_with_victims(struct st *st, int ji, const struct req *rq, struct place_fail *why)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	const struct sched_job *j = rq->j;
	bool has_victims = false;
	int lo = first_held(st, j->id);
	for (int k = lo; k < st->nheld && s->running[st->held[k]].held_for == j->id; k++) {
		const struct sched_running *r = &s->running[st->held[k]];
		if (!has_victims)
			sched__scratch_from_free(p);
		has_victims = true;
		sched__scratch_apply(p, r->nodes, r->nnodes, +1);
	}
	if (!has_victims)
		return false;
	st->d->placements_tried++;
	if (sched__place(p, rq, &p->free, &st->pl, why)) {
		start(st, ji, &st->pl);
		return true;
	}
	st->d->placements_tried++;
	if (!sched__place(p, rq, &p->scratch, &st->pl, why))
		return false;
	sched__add_hold(st, &st->pl);
	struct strbuf *sb = &st->sb;
	strbuf_reset(sb);
	strbuf_addstr(sb, "waiting for jobs preempted for it to exit:");
	int shown = 0;
	for (int k = lo; k < st->nheld && shown < 8 && s->running[st->held[k]].held_for == j->id;
	     k++)
		strbuf_addf(sb, "%s %lld", shown++ ? "," : "",
			    (long long)s->running[st->held[k]].id);
	sched__add_wait(st, ji, SCHED_WAIT_PREEMPTING, -1, 0, sb->buf);
	return true;
}

static bool r_until_known(const struct st *st, int first)
{
	return first >= 0 && st->resv[first].until > 0 && st->resv[first].until != FOREVER;
}

/* A start in what is free, around the reservations j must respect; or, when
 * only they are in its way, a wait that says so. True when that decided j;
 * otherwise the shape is marked as failing for the rest of the pass. */
static bool start_in_free(struct st *st, int ji, struct shape *sh, const struct req *rq,
			  struct place_fail *why)
{
	struct pass *p = &st->p;
	const struct sched_job *j = rq->j;
	if (sh->state == SHAPE_FAILS) {
		st->d->shape_cache_hits++;
		return false;
	}
	if (fails_in_resvs(st, sh, j->time_limit_s, j->windows)) {
		/* the same shape already failed under these same reservations */
		st->d->shape_cache_hits++;
		sched__add_wait(st, ji, SCHED_WAIT_RESERVED, sh->resv_job, 0, NULL);
		return true;
	}
	struct req shaped = *rq; /* its shape's models: what the shape is told */
	if (rq->quota_models)
		shaped.model_ok = rq->shape_model_ok;
	if (!sched__cap_maybe_fits(p, &shaped)) {
		sh->could = 0;
		sh->state = SHAPE_FAILS;
		return false;
	}
	int nsaved, first;
	struct saved *sv = sched__block(st, j, &nsaved, &first);
	st->d->placements_tried++;
	bool ok = sched__place(p, rq, &p->free, &st->pl, why);
	sched__unblock(st, sv, nsaved);
	if (ok) {
		start(st, ji, &st->pl);
		return true;
	}
	if (rq->quota_models) {
		/* is it its queue's limits on models that keep it from the
		 * others? */
		struct req all = *rq;
		all.model_ok = rq->shape_model_ok, all.quota_models = false;
		sv = sched__block(st, j, &nsaved, &first);
		st->d->placements_tried++;
		ok = sched__place(p, &all, &p->free, &st->pl, why);
		sched__unblock(st, sv, nsaved);
		if (ok) {
			struct strbuf *sb = &st->sb;
			strbuf_reset(sb);
			sched__quota_describe(st, j, rq->quota_dim, sb);
			sched__add_wait(st, ji, SCHED_WAIT_QUOTA, -1, 0, sb->buf);
			return true;
		}
	}
	if (first >= 0 || rq->windowed) {
		/* is it only the reservations (and windows) in the way? */
		struct req any = *rq;
		if (rq->windowed)
			any.node_ok = rq->shape_node_ok, any.windowed = false;
		if (rq->quota_models)
			any.model_ok = rq->shape_model_ok, any.quota_models = false;
		st->d->placements_tried++;
		if (sched__place(p, &any, &p->free, &st->pl, why)) {
			struct strbuf *sb = &st->sb;
			strbuf_reset(sb);
			if (rq->windowed) {
				sched__window_detail(st, j, sb);
			} else {
				const struct resv *r = &st->resv[first];
				strbuf_addf(sb, "would delay job %lld, which holds a reservation",
					    (long long)st->jobs[r->job]->id);
			}
			if (!rq->windowed && r_until_known(st, first)) {
				strbuf_addstr(sb, " starting in about ");
				sched__fmt_wait_time(st->resv[first].until - p->now, sb);
				strbuf_addstr(sb, "; a time limit (--time) under that would let it "
						  "start now");
			}
			sched__add_wait(st, ji, SCHED_WAIT_RESERVED, -1, 0, sb->buf);
			if (sched__blocked_by_all(st, j->time_limit_s) && !rq->quota_models) {
				sh->resv_n = st->nresv + 1;
				sh->resv_wmask = sched__windows_in_way(st, j->time_limit_s,
								       j->windows, false);
				sh->resv_unlimited = !j->time_limit_s;
				sh->resv_job = ji;
			}
			return true;
		}
	}
	sh->could = why->could;
	sh->switches = why->switches;
	sh->state = SHAPE_FAILS;
	return false;
}

/* j does not fit in what is free: preempt, if it may and a search could
 * succeed (counted first, with what others hold taken out as the search
 * takes it). A search that finds nothing is remembered for the shape. True
 * when victims were chosen. */
static bool start_by_preempting(struct st *st, int ji, struct shape *sh, const struct req *rq,
				bool within_quota)
{
	const struct sched_job *j = rq->j;
	uint32_t bit = j->cls < 32 ? 1u << j->cls : 0;
	bool may, by_class, by_reclaim;
	preempt_options(st, j->cls, j->queue, sh, within_quota, &may, &by_class, &by_reclaim);
	if (!may || !(by_class || by_reclaim))
		return false;
	int nsaved, first;
	struct saved *sv = sched__block(st, j, &nsaved, &first);
	bool possible = sched__preempt_possible(st, rq, by_class, by_reclaim);
	if (!possible) {
		if (by_class)
			sh->preempt_failed |= bit;
		if (by_reclaim)
			stamp_set(&sh->reclaim_failed, st->qversion);
	}
	sched__unblock(st, sv, nsaved);
	if (!possible)
		return false;
	if (sched__try_preempt(st, ji, rq, by_reclaim, by_class)) {
		sched__add_wait(st, ji, SCHED_WAIT_PREEMPTING, -1, 0,
				"preempting lower-priority work to start");
		return true;
	}
	if (by_class)
		sh->preempt_failed |= bit;
	if (by_reclaim)
		stamp_set(&sh->reclaim_failed, st->qversion);
	return false;
}

void sched__process(struct st *st, const struct jrec *jr)
{
	struct pass *p = &st->p;
	int ji = jr->ji;
	struct shape *sh = &st->shapes[jr->shape];
	const struct sched_policy *pol = p->policy;
	if (pol && pol->max_starts && st->d->nstarts >= pol->max_starts) {
		/* the first says so; the rest (up to a million) point to it */
		if (st->limit_job >= 0) {
			wait_as(st, ji, SCHED_WAIT_PASS_LIMIT, st->limit_job);
			return;
		}
		sched__add_wait(
			st, ji, SCHED_WAIT_PASS_LIMIT, -1, 0,
			"waiting for the next scheduling pass (this one started as many jobs "
			"as one pass may)");
		st->limit_job = ji;
		return;
	}
	if (st->blocked_all >= 0) {
		wait_as(st, ji, SCHED_WAIT_RESOURCES, st->blocked_all);
		return;
	}
	if (waits_as_before(st, jr) || at_queue_limit(st, jr, sh))
		return;
	const struct sched_queue *q = &p->snap->queues[jr->queue];
	bool within_quota =
		q->quota_milli >= 0 && st->qs[jr->queue].use + sh->need <= q->quota_milli;
	if (fails_as_before(st, jr, sh, within_quota))
		return;
	st->epoch++;
	struct req rq;
	shape_req(st, st->jobs[ji], sh, &rq);
	if (p->snap->nwindows)
		sched__windows_apply(st, &rq);
	if (st->any_qdims && sched__quota_models(st, &rq, &rq.quota_dim) < 0) {
		/* none of its models is within its queue's limits */
		struct strbuf *sb = &st->sb;
		strbuf_reset(sb);
		sched__quota_describe(st, rq.j, rq.quota_dim, sb);
		sched__add_wait(st, ji, SCHED_WAIT_QUOTA, -1, 0, sb->buf);
		remember(sh, st, jr, true, SCHED_WAIT_QUOTA, ji);
		sched__windows_clear(st, &rq);
		sched__req_release(&rq);
		return;
	}
	struct place_fail why = {0, 0};
	if (!start_with_victims(st, ji, &rq, &why) && !start_in_free(st, ji, sh, &rq, &why) &&
	    !start_by_preempting(st, ji, sh, &rq, within_quota)) {
		sched__wait_resources(st, ji, sh, &rq);
		if (pol && pol->no_backfill)
			st->blocked_all = ji;
	}
	sched__windows_clear(st, &rq);
	if (rq.quota_models)
		rq.model_ok = rq.shape_model_ok, rq.quota_models = false;
	sched__req_release(&rq);
}
