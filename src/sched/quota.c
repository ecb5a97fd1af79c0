/*
 * Limits beyond a queue's accelerators (sched_qdim): one model's
 * accelerators, weighted units, CPUs, memory. CPUs and memory are known
 * before placement and a job over them waits; models and units depend on
 * where it goes, so a job that may use several models is kept to those its
 * queue still has room for (its own copy of its shape's models, as a
 * window keeps a job to its own copy of its shape's nodes).
 */
#include "pass.h"

#include <string.h>
#include <strings.h>

static double weight_of(const struct sched_snapshot *s, const char *model)
{
	for (int i = 0; i < s->nweights; i++)
		if (strcasecmp(s->weights[i].model, model) == 0)
			return s->weights[i].weight;
	return 1;
}

/* What assignment a holds counts for queue q: its units, and the dims of
 * its model, CPUs and memory. */
static void count(struct st *st, int q, const struct sched_assign *a, int sign)
{
	struct pass *p = &st->p;
	const struct sched_queue *sq = &p->snap->queues[q];
	for (int d = 0; d < a->ndev; d++) {
		int m = p->dev_model[p->dev_off[a->node] + a->devs[d]];
		st->qs[q].units += sign * (double)a->milli * st->model_w[m];
		for (int k = 0; k < sq->ndims && st->any_qdims; k++)
			if (st->qdim_model[st->qdim_off[q] + k] == m)
				st->qdim_use[st->qdim_off[q] + k] += sign * a->milli;
	}
	for (int k = 0; k < sq->ndims && st->any_qdims; k++) {
		double *use = &st->qdim_use[st->qdim_off[q] + k];
		if (sq->dims[k].kind == SCHED_QDIM_CPUS)
			*use += sign * a->cpus;
		else if (sq->dims[k].kind == SCHED_QDIM_MEM)
			*use += sign * (double)a->mem_mib;
		else if (sq->dims[k].kind == SCHED_QDIM_UNITS)
			for (int d = 0; d < a->ndev; d++)
				*use += sign * (double)a->milli *
					st->model_w[p->dev_model[p->dev_off[a->node] + a->devs[d]]];
	}
}

void sched__quota_init(struct st *st)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	st->model_w = sched__keep_alloc(p->keep, sizeof(double) * ((size_t)p->nmodels + 1));
	for (int m = 0; m < p->nmodels; m++)
		st->model_w[m] = weight_of(s, p->models[m]);
	int total = 0;
	for (int q = 0; q < s->nqueues; q++)
		total += s->queues[q].ndims;
	st->any_qdims = total > 0;
	if (st->any_qdims) {
		st->qdim_off = sched__keep_alloc(p->keep, sizeof(int) * ((size_t)s->nqueues + 1));
		st->qdim_use = sched__keep_zalloc(p->keep, (size_t)total + 1, sizeof(double));
		st->qdim_model = sched__keep_alloc(p->keep, sizeof(int) * ((size_t)total + 1));
		for (int q = 0, at = 0; q < s->nqueues; q++) {
			st->qdim_off[q] = at;
			for (int k = 0; k < s->queues[q].ndims; k++, at++) {
				const struct sched_qdim *d = &s->queues[q].dims[k];
				st->qdim_model[at] = -1;
				for (int m = 0; m < p->nmodels && d->kind == SCHED_QDIM_MODEL; m++)
					if (strcasecmp(p->models[m], d->model) == 0)
						st->qdim_model[at] = m;
			}
		}
	}
	for (int i = 0; i < s->nrunning; i++)
		for (int k = 0; k < s->running[i].nnodes; k++)
			count(st, s->running[i].queue, &s->running[i].nodes[k], 1);
}

void sched__quota_release(struct st *st)
{
	void *arrays[] = {st->model_w, st->qdim_off, st->qdim_use, st->qdim_model, st->quota_ok};
	for (size_t i = 0; i < ARRAY_SIZE(arrays); i++)
		sched__keep_release(st->p.keep, arrays[i]);
}

static double need_of(const struct sched_job *j, const struct sched_qdim *d)
{
	if (d->kind == SCHED_QDIM_CPUS)
		return (double)j->nodes * j->tasks_per_node * j->cpus_per_task;
	if (d->kind == SCHED_QDIM_MEM)
		return (double)j->nodes * (double)j->mem_mib;
	return (double)job_milli(j);
}

static bool over(double use, double need, int64_t limit)
{
	return need > 0 && use + need > (double)limit + 1e-6;
}

int sched__quota_over(const struct st *st, const struct sched_job *j)
{
	if (!st->any_qdims)
		return -1;
	const struct sched_queue *q = &st->p.snap->queues[j->queue];
	for (int k = 0; k < q->ndims; k++) {
		const struct sched_qdim *d = &q->dims[k];
		if ((d->kind == SCHED_QDIM_CPUS || d->kind == SCHED_QDIM_MEM) &&
		    over(st->qdim_use[st->qdim_off[j->queue] + k], need_of(j, d), d->limit))
			return k;
	}
	return -1;
}

int sched__quota_models(struct st *st, struct req *rq, int *dim)
{
	const struct pass *p = &st->p;
	const struct sched_job *j = rq->j;
	const struct sched_queue *q = &p->snap->queues[j->queue];
	*dim = -1;
	if (!st->any_qdims || !j->gpu_milli)
		return 0;
	double need = (double)job_milli(j);
	int off = st->qdim_off[j->queue], kept = 0, ok = 0;
	for (int m = 0; m < p->nmodels; m++) {
		if (!rq->model_ok[m])
			continue;
		int in_way = -1;
		for (int k = 0; k < q->ndims && in_way < 0; k++) {
			const struct sched_qdim *d = &q->dims[k];
			double use = st->qdim_use[off + k];
			if ((d->kind == SCHED_QDIM_MODEL && st->qdim_model[off + k] == m &&
			     over(use, need, d->limit)) ||
			    (d->kind == SCHED_QDIM_UNITS &&
			     over(use, need * st->model_w[m], d->limit)))
				in_way = k;
		}
		if (in_way < 0) {
			ok++;
			continue;
		}
		if (*dim < 0)
			*dim = in_way;
		if (!st->quota_ok)
			st->quota_ok = sched__keep_alloc(p->keep, (size_t)p->nmodels + 1);
		if (!kept++)
			memcpy(st->quota_ok, rq->model_ok, (size_t)p->nmodels);
		st->quota_ok[m] = false;
	}
	if (!kept)
		return 0;
	if (!ok)
		return -1;
	rq->quota_models = true;
	rq->shape_model_ok = rq->model_ok;
	rq->model_ok = st->quota_ok;
	/* its shape's memo holds per model (what a node holds of one, the
	 * node chosen under one): it stands for the models left, but for a
	 * gang that mixes them, judged on all its models at once */
	if (j->mixed_types)
		rq->memo = NULL;
	return 1;
}

void sched__quota_start(struct st *st, const struct sched_job *j, const struct placement *pl)
{
	for (int i = 0; i < pl->nnodes; i++)
		count(st, j->queue, &pl->nodes[i], 1);
}

void sched__quota_describe(const struct st *st, const struct sched_job *j, int dim,
			   struct strbuf *sb)
{
	const struct sched_queue *q = &st->p.snap->queues[j->queue];
	const struct sched_qdim *d = &q->dims[dim];
	double use = st->qdim_use[st->qdim_off[j->queue] + dim], need = need_of(j, d);
	double div = d->kind == SCHED_QDIM_MODEL || d->kind == SCHED_QDIM_UNITS ? MODEL_MILLI
		     : d->kind == SCHED_QDIM_MEM				? 1024
										: 1;
	const char *what = d->kind == SCHED_QDIM_MODEL	 ? d->model
			   : d->kind == SCHED_QDIM_UNITS ? "weighted GPU units"
			   : d->kind == SCHED_QDIM_CPUS	 ? "CPUs"
							 : "memory (GiB)";
	strbuf_addf(sb,
		    "queue \"%s\": %s limit %.4g (quota %.4g), %.4g in use; this job needs %.4g",
		    q->name, what, (double)d->limit / div, (double)d->quota / div, use / div,
		    need / div);
	if (d->kind == SCHED_QDIM_MODEL || d->kind == SCHED_QDIM_UNITS)
		strbuf_addstr(sb, " accelerators, and no model it may use is within the queue's "
				  "limits");
}
