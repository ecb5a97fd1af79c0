/*
 * Scheduler version 0: first come, first served, all-or-nothing, best fit.
 *
 * A pass copies what is free out of the snapshot, then walks the pending
 * jobs in order. For each job it tries every acceptable accelerator model
 * (a gang never mixes models), finds the nodes that could hold one node's
 * share, and takes the tightest ones: those that would have the fewest free
 * devices left, then the fewest free CPUs, then the smallest name. The model
 * whose placement leaves the least spare wins. Placed jobs consume the free
 * copy, so later jobs in the same pass see what earlier ones took.
 *
 * Every tie is broken by a node's or model's name, never by its position in
 * the snapshot, which makes the result independent of node order.
 */
#include "sched.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct cand {
	int node;
	int spare;     /* free devices (or milli) left after placing */
	int cpu_spare; /* free CPUs left after placing */
	int dev;       /* for fractions: the device chosen */
};

struct pass {
	const struct sched_snapshot *snap;
	int *cpus_free;
	int64_t *mem_free;
	int *dev_off; /* node n's devices are dev_free[dev_off[n] ...] */
	int *dev_free;
	const char **models; /* distinct device models, sorted by name */
	int nmodels;
	struct cand *cands;
	struct cand *best; /* best candidate set found so far for a job */
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void pass_init(struct pass *p, const struct sched_snapshot *snap)
{
	int nn = snap->nnodes;
	memset(p, 0, sizeof(*p));
	p->snap = snap;
	p->cpus_free = xcalloc((size_t)nn + 1, sizeof(int));
	p->mem_free = xcalloc((size_t)nn + 1, sizeof(int64_t));
	p->dev_off = xcalloc((size_t)nn + 1, sizeof(int));
	int ndev = 0;
	for (int n = 0; n < nn; n++) {
		p->dev_off[n] = ndev;
		ndev += snap->nodes[n].ndev;
	}
	p->dev_off[nn] = ndev;
	p->dev_free = xcalloc((size_t)ndev + 1, sizeof(int));
	p->models = xcalloc((size_t)ndev + 1, sizeof(char *));
	int nm = 0;
	for (int n = 0; n < nn; n++) {
		const struct sched_node *node = &snap->nodes[n];
		p->cpus_free[n] = node->cpus_free;
		p->mem_free[n] = node->mem_free_mib;
		for (int d = 0; d < node->ndev; d++) {
			p->dev_free[p->dev_off[n] + d] = node->devs[d].free_milli;
			p->models[nm++] = node->devs[d].model;
		}
	}
	qsort(p->models, (size_t)nm, sizeof(char *), cmp_str);
	int u = 0;
	for (int i = 0; i < nm; i++)
		if (u == 0 || strcmp(p->models[u - 1], p->models[i]) != 0)
			p->models[u++] = p->models[i];
	p->nmodels = u;
	p->cands = xcalloc((size_t)nn + 1, sizeof(struct cand));
	p->best = xcalloc((size_t)nn + 1, sizeof(struct cand));
}

static void pass_release(struct pass *p)
{
	free(p->cpus_free);
	free(p->mem_free);
	free(p->dev_off);
	free(p->dev_free);
	free(p->models);
	free(p->cands);
	free(p->best);
}

static bool job_accepts(const struct sched_job *j, const char *model)
{
	if (j->ngpu_types == 0)
		return true;
	for (int i = 0; i < j->ngpu_types; i++)
		if (strcasecmp(j->gpu_types[i], model) == 0)
			return true;
	return false;
}

/* Whole devices one node's share needs (0 for CPU-only or fractional jobs). */
static int whole_devs(const struct sched_job *j)
{
	return j->gpu_milli >= MODEL_MILLI ? j->tasks_per_node * (j->gpu_milli / MODEL_MILLI) : 0;
}

static bool fractional(const struct sched_job *j)
{
	return j->gpu_milli > 0 && j->gpu_milli < MODEL_MILLI;
}

/*
 * Can node n hold one node's share of j on devices of `model` (NULL for a job
 * without accelerators)? With `empty`, judge against the node's totals, as if
 * nothing ran. On success fills c.
 */
static bool node_fits(const struct pass *p, int n, const struct sched_job *j, const char *model,
		      bool empty, struct cand *c)
{
	const struct sched_node *node = &p->snap->nodes[n];
	if (!node->schedulable)
		return false;
	int64_t cpus = (int64_t)j->tasks_per_node * j->cpus_per_task;
	int cpu_have = empty ? node->cpus_total : p->cpus_free[n];
	int64_t mem_have = empty ? node->mem_total_mib : p->mem_free[n];
	if (cpus > cpu_have || j->mem_mib > mem_have)
		return false;
	c->node = n;
	c->cpu_spare = (int)(cpu_have - cpus);
	c->dev = -1;
	if (!model) {
		/* CPU-only: prefer nodes without accelerators, keep GPU nodes free */
		c->spare = node->ndev;
		return true;
	}
	const int *free = &p->dev_free[p->dev_off[n]];
	if (fractional(j)) {
		int best = -1, best_free = 0, whole = 0;
		for (int d = 0; d < node->ndev; d++) {
			if (strcmp(node->devs[d].model, model) != 0)
				continue;
			int f = empty ? MODEL_MILLI : free[d];
			if (f == MODEL_MILLI)
				whole++;
			if (f >= j->gpu_milli && (best < 0 || f < best_free)) {
				best = d;
				best_free = f;
			}
		}
		if (best < 0)
			return false;
		/* tightest device first, then the node with fewest whole devices */
		c->dev = best;
		c->spare = (best_free - j->gpu_milli) * (MODEL_MAX_ACCELS + 1) + whole;
		return true;
	}
	int need = whole_devs(j);
	int have = 0;
	for (int d = 0; d < node->ndev; d++)
		if (strcmp(node->devs[d].model, model) == 0 &&
		    (empty || free[d] == MODEL_MILLI))
			have++;
	if (have < need)
		return false;
	c->spare = have - need;
	return true;
}

static int cmp_cand(const void *a, const void *b, void *arg)
{
	const struct cand *x = a, *y = b;
	const struct sched_snapshot *snap = arg;
	if (x->spare != y->spare)
		return x->spare < y->spare ? -1 : 1;
	if (x->cpu_spare != y->cpu_spare)
		return x->cpu_spare < y->cpu_spare ? -1 : 1;
	return strcmp(snap->nodes[x->node].name, snap->nodes[y->node].name);
}

/*
 * Finds the best placement of j. Returns the number of nodes that could hold
 * a share under the best model (>= j->nodes on success, with the chosen set in
 * p->best[0..j->nodes) and its model in *ret_model).
 */
static int find_placement(struct pass *p, const struct sched_job *j, bool empty,
			  const char **ret_model)
{
	int nn = p->snap->nnodes;
	int64_t best_score = -1;
	int most_fit = 0;
	bool needs_dev = j->gpu_milli > 0;
	int nm = needs_dev ? p->nmodels : 1;
	for (int m = 0; m < nm; m++) {
		const char *model = needs_dev ? p->models[m] : NULL;
		if (model && !job_accepts(j, model))
			continue;
		int nc = 0;
		for (int n = 0; n < nn; n++)
			if (node_fits(p, n, j, model, empty, &p->cands[nc]))
				nc++;
		if (nc > most_fit)
			most_fit = nc;
		if (nc < j->nodes)
			continue;
		qsort_r(p->cands, (size_t)nc, sizeof(struct cand), cmp_cand, (void *)p->snap);
		int64_t score = 0;
		for (int i = 0; i < j->nodes; i++)
			score += p->cands[i].spare;
		if (best_score < 0 || score < best_score) {
			best_score = score;
			memcpy(p->best, p->cands, sizeof(struct cand) * (size_t)j->nodes);
			*ret_model = model;
		}
	}
	return best_score < 0 ? most_fit : MAX(most_fit, j->nodes);
}

struct domain_count {
	int domain;
	int nfree;
};

/* Picks `need` free whole devices of `model` on node n, preferring a single
 * NVLink domain (the one with the fewest free devices that suffices). */
static void pick_devices(const struct pass *p, int n, const char *model, int need,
			 struct sched_assign *a)
{
	const struct sched_node *node = &p->snap->nodes[n];
	const int *free = &p->dev_free[p->dev_off[n]];
	struct domain_count doms[MODEL_MAX_ACCELS];
	int ndom = 0;
	for (int d = 0; d < node->ndev; d++) {
		if (free[d] != MODEL_MILLI || strcmp(node->devs[d].model, model) != 0)
			continue;
		int k;
		for (k = 0; k < ndom; k++)
			if (doms[k].domain == node->devs[d].nvlink_domain)
				break;
		if (k == ndom) {
			doms[ndom].domain = node->devs[d].nvlink_domain;
			doms[ndom++].nfree = 0;
		}
		doms[k].nfree++;
	}
	int chosen = -1;
	for (int k = 0; k < ndom; k++)
		if (doms[k].nfree >= need &&
		    (chosen < 0 || doms[k].nfree < doms[chosen].nfree ||
		     (doms[k].nfree == doms[chosen].nfree && doms[k].domain < doms[chosen].domain)))
			chosen = k;
	a->ndev = 0;
	for (int d = 0; d < node->ndev && a->ndev < need; d++) {
		if (free[d] != MODEL_MILLI || strcmp(node->devs[d].model, model) != 0)
			continue;
		if (chosen >= 0 && node->devs[d].nvlink_domain != doms[chosen].domain)
			continue;
		a->devs[a->ndev++] = d;
	}
}

static void describe_need(const struct sched_job *j, struct strbuf *sb)
{
	bool any = false;
	if (j->gpu_milli > 0) {
		if (fractional(j))
			strbuf_addf(sb, "%.3g of an accelerator", j->gpu_milli / (double)MODEL_MILLI);
		else
			strbuf_addf(sb, "%d accelerator%s", whole_devs(j),
				    whole_devs(j) == 1 ? "" : "s");
		if (j->ngpu_types) {
			strbuf_addstr(sb, " of type ");
			for (int i = 0; i < j->ngpu_types; i++)
				strbuf_addf(sb, "%s%s", i ? "|" : "", j->gpu_types[i]);
		}
		any = true;
	}
	int64_t cpus = (int64_t)j->tasks_per_node * j->cpus_per_task;
	if (cpus) {
		strbuf_addf(sb, "%s%lld CPU%s", any ? ", " : "", (long long)cpus, cpus == 1 ? "" : "s");
		any = true;
	}
	if (j->mem_mib) {
		strbuf_addf(sb, "%s%lld MiB memory", any ? ", " : "", (long long)j->mem_mib);
		any = true;
	}
	if (!any)
		strbuf_addstr(sb, "no reserved resources");
}

static void add_wait(struct sched_decisions *d, int job, enum sched_wait_reason reason,
		     const char *text)
{
	xgrow(&d->waits, &d->waits_alloc, (size_t)d->nwaits + 1, sizeof(*d->waits));
	struct sched_wait *w = &d->waits[d->nwaits++];
	w->job = job;
	w->reason = reason;
	snprintf(w->detail, sizeof(w->detail), "%s", text);
}

static void apply(struct pass *p, const struct sched_job *j, const char *model,
		  struct sched_decisions *d, int job_index)
{
	xgrow(&d->starts, &d->starts_alloc, (size_t)d->nstarts + 1, sizeof(*d->starts));
	struct sched_start *s = &d->starts[d->nstarts++];
	s->job = job_index;
	s->nnodes = j->nodes;
	s->nodes = xcalloc((size_t)j->nodes, sizeof(*s->nodes));
	for (int i = 0; i < j->nodes; i++) {
		int n = p->best[i].node;
		struct sched_assign *a = &s->nodes[i];
		a->node = n;
		a->milli = MODEL_MILLI;
		if (fractional(j)) {
			a->ndev = 1;
			a->devs[0] = p->best[i].dev;
			a->milli = j->gpu_milli;
		} else if (model) {
			pick_devices(p, n, model, whole_devs(j), a);
		}
		for (int k = 0; k < a->ndev; k++)
			p->dev_free[p->dev_off[n] + a->devs[k]] -= a->milli;
		p->cpus_free[n] -= j->tasks_per_node * j->cpus_per_task;
		p->mem_free[n] -= j->mem_mib;
	}
}

static bool snapshot_valid(const struct sched_snapshot *snap)
{
	if (snap->nnodes < 0 || snap->njobs < 0 || (snap->nnodes && !snap->nodes) ||
	    (snap->njobs && !snap->jobs))
		return false;
	for (int n = 0; n < snap->nnodes; n++) {
		const struct sched_node *node = &snap->nodes[n];
		if (!node->name || node->ndev < 0 || node->ndev > MODEL_MAX_ACCELS ||
		    (node->ndev && !node->devs))
			return false;
		for (int d = 0; d < node->ndev; d++)
			if (!node->devs[d].model || node->devs[d].free_milli < 0 ||
			    node->devs[d].free_milli > MODEL_MILLI)
				return false;
	}
	for (int i = 0; i < snap->njobs; i++) {
		const struct sched_job *j = snap->jobs[i];
		if (!j || j->nodes < 1 || j->tasks_per_node < 1 || j->gpu_milli < 0 ||
		    j->cpus_per_task < 0 || j->mem_mib < 0 ||
		    (j->gpu_milli > MODEL_MILLI && j->gpu_milli % MODEL_MILLI) ||
		    whole_devs(j) > MODEL_MAX_ACCELS || (j->ngpu_types && !j->gpu_types))
			return false;
	}
	return true;
}

int sched_pass(const struct sched_snapshot *snap, int64_t now_ms, const struct sched_policy *policy,
	       struct sched_decisions *ret)
{
	(void)now_ms; /* v0 needs no clock; backfill will */
	memset(ret, 0, sizeof(*ret));
	ret->blocker = -1;
	ret->unexamined = snap->njobs;
	if (!snapshot_valid(snap))
		return -EINVAL;
	struct pass p;
	pass_init(&p, snap);
	struct strbuf sb;
	strbuf_init(&sb);
	for (int i = 0; i < snap->njobs; i++) {
		const struct sched_job *j = snap->jobs[i];
		if (policy && policy->max_starts && ret->nstarts >= policy->max_starts) {
			add_wait(ret, i, SCHED_WAIT_PASS_LIMIT,
				 "waiting for the next scheduling pass");
			ret->unexamined = i + 1;
			break;
		}
		const char *model = NULL;
		int could = find_placement(&p, j, false, &model);
		if (could >= j->nodes) {
			apply(&p, j, model, ret, i);
			continue;
		}
		strbuf_reset(&sb);
		int ever = find_placement(&p, j, true, &model);
		if (ever < j->nodes) {
			strbuf_addf(&sb, "can never start: needs %d node%s with ", j->nodes,
				    j->nodes == 1 ? "" : "s");
			describe_need(j, &sb);
			strbuf_addf(&sb, " each; %d schedulable node%s could ever hold that", ever,
				    ever == 1 ? "" : "s");
			add_wait(ret, i, SCHED_WAIT_NEVER_FITS, sb.buf);
			continue;
		}
		strbuf_addf(&sb, "waiting for resources: needs %d node%s with ", j->nodes,
			    j->nodes == 1 ? "" : "s");
		describe_need(j, &sb);
		strbuf_addf(&sb, " free; %d ha%s that now", could, could == 1 ? "s" : "ve");
		add_wait(ret, i, SCHED_WAIT_RESOURCES, sb.buf);
		/* first come, first served: nothing overtakes the first job that waits */
		ret->blocker = i;
		ret->unexamined = i + 1;
		break;
	}
	strbuf_release(&sb);
	pass_release(&p);
	return 0;
}

void sched_decisions_release(struct sched_decisions *d)
{
	for (int i = 0; i < d->nstarts; i++)
		free(d->starts[i].nodes);
	free(d->starts);
	free(d->waits);
	memset(d, 0, sizeof(*d));
	d->blocker = -1;
}
