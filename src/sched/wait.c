/*
 * Why a job waits: each wait's reason and the one line a user reads, and
 * the reservation the first waiting job of a class holds.
 */
#include "pass.h"

#include <assert.h>
#include <string.h>

struct sched_wait *sched__add_wait(struct st *st, int job, enum sched_wait_reason reason,
				   int same_as, int64_t until, const char *detail)
{
	struct sched_decisions *d = st->d;
	/* sized for every job at the start (and, from a keep, not to be grown) */
	assert((size_t)d->nwaits < d->waits_alloc);
	struct sched_wait *w = &d->waits[d->nwaits++];
	w->job = job;
	w->reason = reason;
	w->same_as = same_as;
	w->until_ms = until;
	w->detail = detail ? xstrdup(detail) : NULL;
	return w;
}

void sched__describe_need(const struct st *st, const struct sched_job *j, struct strbuf *sb)
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
	if (j->exclusive)
		strbuf_addstr(sb, ", alone on each");
	for (int w = 0; w < 2; w++) {
		int n = w ? j->nexclude : j->nnodelist;
		for (int i = 0; i < n && i < 8; i++)
			strbuf_addf(sb, "%s%s",
				    i	? ","
				    : w ? ", not on "
					: ", among ",
				    w ? j->exclude[i] : j->nodelist[i]);
		if (n > 8)
			strbuf_addf(sb, ",... (%d nodes)", n);
	}
	if (j->constraint)
		strbuf_addf(sb, ", labelled %s", j->constraint);
	if (j->tolerate)
		strbuf_addf(sb, ", tolerating %s", j->tolerate);
	if (j->within_depth)
		strbuf_addf(sb, ", within one %s", j->within ? j->within : "domain");
	if (j->spread_depth)
		strbuf_addf(sb, ", at most %d in any %s", j->spread_max,
			    j->spread ? j->spread : "domain");
	if (j->pool)
		strbuf_addf(sb, ", in pool%s %s", strchr(j->pool, ',') ? "s" : "", j->pool);
	else if (j->pools && j->pools != MODEL_POOL_NONE)
		strbuf_addstr(sb, ", in the open pools or none");
	else if (j->pools)
		strbuf_addstr(sb, ", in no pool");
	(void)st;
}

void sched__fmt_wait_time(int64_t ms, struct strbuf *sb)
{
	char buf[32];
	tk_format_duration((ms + 999) / 1000, buf, sizeof(buf));
	strbuf_addstr(sb, buf);
}

void sched__wait_resources(struct st *st, int ji, struct shape *sh, const struct req *rq)
{
	const struct sched_job *j = rq->j;
	if (sh->detail_job >= 0 && sh->reason != SCHED_WAIT_RESOURCES) {
		sched__add_wait(st, ji, sh->reason, sh->detail_job, 0, NULL);
		return;
	}
	struct strbuf *sb = &st->sb;
	strbuf_reset(sb);
	enum sched_wait_reason reason = SCHED_WAIT_RESOURCES;
	int64_t until = 0;
	/* what could ever be is the shape's: windows keep a job off for a while */
	struct req shaped = *rq;
	if (rq->windowed)
		shaped.node_ok = rq->shape_node_ok, shaped.windowed = false;
	if (rq->quota_models)
		shaped.model_ok = rq->shape_model_ok, shaped.quota_models = false;
	if (sh->never < 0) {
		sh->never = !sched__could_ever(&st->p, &shaped);
		if (sh->never && j->max_switches) {
			/* only a real placement on the empty cluster can tell switches */
			struct place_fail why;
			st->d->placements_tried++;
			sh->never = !sched__place(&st->p, &shaped, &st->p.total, &st->pl, &why);
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
		} else if (sched__could_ever_anywhere(&st->p, &shaped)) {
			/* the nodes that could are down or drained: it waits for them */
			reason = SCHED_WAIT_NODES;
			strbuf_addstr(sb, "waiting for nodes: needs ");
			sched__describe_need(st, j, sb);
			strbuf_addstr(sb, "; only nodes that are down or drained could hold that");
		} else {
			reason = SCHED_WAIT_NEVER_FITS;
			strbuf_addstr(sb, "can never start: needs ");
			sched__describe_need(st, j, sb);
			strbuf_addstr(sb, "; no set of schedulable nodes could ever hold that");
		}
		sh->reason = reason;
		sh->detail_job = ji;
		sched__add_wait(st, ji, reason, -1, 0, sb->buf);
		return;
	}
	const struct sched_policy *pol = st->p.policy;
	bool head =
		!st->class_has_resv[j->cls] && !(pol && (pol->no_backfill || pol->no_reservations));
	if (head && sched__shadow(st, rq, &until)) {
		st->class_has_resv[j->cls] = true;
		/* with its start unknown, it holds what is idle only once it has
		 * waited its patience: before, idle devices go to later jobs */
		int64_t patience = pol && pol->resv_patience_ms ? pol->resv_patience_ms : FOREVER;
		bool holds = until != FOREVER || st->p.now - j->submit_ms >= patience;
		if (holds)
			sched__add_resv(st, ji, until, &st->pl);
		strbuf_addstr(sb, "waiting for resources: needs ");
		sched__describe_need(st, j, sb);
		if (until == FOREVER && holds) {
			strbuf_addstr(sb,
				      "; first in its class, holding a reservation on the nodes "
				      "likeliest to free first; start time unknown, as running "
				      "jobs in its way have no time limit");
		} else if (until == FOREVER) {
			strbuf_addstr(sb,
				      "; first in its class; start time unknown, as running jobs "
				      "in its way have no time limit: it holds nothing idle");
			if (patience != FOREVER) {
				strbuf_addstr(sb, " until it has waited ");
				sched__fmt_wait_time(patience, sb);
			}
		} else {
			strbuf_addstr(sb, "; first in its class, reserved to start in about ");
			sched__fmt_wait_time(until - st->p.now, sb);
		}
		sched__add_wait(st, ji, SCHED_WAIT_RESOURCES, -1, until == FOREVER ? 0 : until,
				sb->buf);
		return;
	}
	if (sh->generic_job >= 0) {
		sched__add_wait(st, ji, sh->reason, sh->generic_job, 0, NULL);
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
		sched__describe_need(st, j, sb);
		strbuf_addf(sb, " free; %d node%s ha%s that now", sh->could,
			    sh->could == 1 ? "" : "s", sh->could == 1 ? "s" : "ve");
	}
	sh->reason = reason;
	sh->detail_job = ji;
	sh->generic_job = ji;
	sched__add_wait(st, ji, reason, -1, 0, sb->buf);
}
