/*
 * Replacing a node of a gang that restarts in place (DESIGN.md §4), and the
 * cluster's pool of spare nodes: which node takes a failed node's share, in
 * what order (the job's own spares, the cluster's spare pool, then any node
 * with room, each the best fit), and which idle nodes the pool holds. The
 * server (server/inplace.c) and the simulator (sim/engine.c) both decide
 * this here, over the scheduler's node view; they differ only in how they
 * keep the state.
 */
#include "sched.h"

#include <string.h>

static bool named(const char *const *names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

static bool empty(const struct sched_node *n)
{
	if (n->cpus_free != n->cpus_total || n->mem_free_mib != n->mem_total_mib)
		return false;
	for (int d = 0; d < n->ndev; d++)
		if (n->devs[d].free_milli < MODEL_MILLI)
			return false;
	return true;
}

bool sched_share_free(const struct sched_node *n, const struct sched_share *w,
		      const struct sched_assign *on)
{
	if (!n->schedulable)
		return false;
	if (w->alone)
		return empty(n);
	if (n->cpus_free < w->cpus || n->mem_free_mib < w->mem_mib)
		return false;
	for (int k = 0; k < on->ndev; k++)
		if (on->devs[k] < 0 || on->devs[k] >= n->ndev ||
		    n->devs[on->devs[k]].free_milli < w->milli)
			return false;
	return true;
}

int sched_share_fit(const struct sched_node *n, const struct sched_share *w,
		    struct sched_assign *as)
{
	if (!n->schedulable || named(w->exclude, w->nexclude, n->name) ||
	    (w->nnodelist && !named(w->nodelist, w->nnodelist, n->name)) ||
	    !job_constraint_match(w->constraint, n->labels) || !sched_pools_meet(n, w->pools) ||
	    !node_taints_tolerated(n->taints, w->tolerate))
		return -1;
	if (w->alone ? !empty(n) : n->cpus_free < w->cpus || n->mem_free_mib < w->mem_mib)
		return -1;
	int got = 0, left = 0;
	for (int d = 0; d < n->ndev && d < MODEL_MAX_ACCELS; d++) {
		const struct sched_dev *dv = &n->devs[d];
		bool model =
			w->nmodels ? named(w->models, w->nmodels, dv->model)
				   : !w->model || !w->model[0] || strcmp(dv->model, w->model) == 0;
		if (!model || dv->free_milli < w->milli ||
		    (w->dev_mem_mib && dv->mem_mib < w->dev_mem_mib))
			continue;
		if (got < w->ndev)
			as->devs[got++] = d;
		else
			left++;
	}
	if (got < w->ndev)
		return -1;
	as->ndev = got;
	as->milli = w->milli;
	as->cpus = w->cpus;
	as->mem_mib = w->mem_mib;
	as->alone = w->alone;
	return left;
}

/* Would node i keep w's gang (the nodes of `with`) within its --within
 * domain and under its --spread cap? */
static bool domains_kept(const struct sched_node *nodes, int i, const struct sched_share *w)
{
	const char *d = nodes[i].domain;
	if (w->within_depth && w->nwith &&
	    !sched_domain_same(d, nodes[w->with[0]].domain, w->within_depth))
		return false;
	int same = 0;
	for (int k = 0; w->spread_depth && k < w->nwith; k++)
		same += sched_domain_same(d, nodes[w->with[k]].domain, w->spread_depth);
	return !w->spread_depth || same < w->spread_max;
}

int sched_share_best(const struct sched_node *nodes, int n, const bool *ok,
		     const struct sched_share *w, struct sched_assign *ret)
{
	int best = -1, best_left = 0, best_sw = 0;
	int *idx = NULL;
	if (w->max_switches > 0) {
		idx = xcalloc((size_t)w->nwith + 1, sizeof(int));
		memcpy(idx, w->with, sizeof(int) * (size_t)w->nwith);
	}
	for (int i = 0; i < n; i++) {
		if (!ok[i] || !domains_kept(nodes, i, w))
			continue;
		struct sched_assign try;
		memset(&try, 0, sizeof(try));
		int left = sched_share_fit(&nodes[i], w, &try);
		if (left < 0)
			continue;
		int sw = 0;
		if (idx) {
			idx[w->nwith] = i;
			sw = sched_switches_spanned(nodes, idx, w->nwith + 1);
			if (sw > w->max_switches)
				continue;
		}
		if (best < 0 || sw < best_sw || (sw == best_sw && left < best_left)) {
			best = i;
			best_left = left;
			best_sw = sw;
			*ret = try;
			ret->node = i;
		}
	}
	free(idx);
	return best;
}

enum sched_from sched_replace(const struct sched_node *nodes, int n, const bool *pool,
			      const bool *out, const struct sched_share *w,
			      const struct sched_assign *spares, int nspares, int *spare_used,
			      bool *ok, struct sched_assign *ret)
{
	*spare_used = -1;
	for (int i = 0; i < nspares; i++) {
		const struct sched_assign *sp = &spares[i];
		if (sp->node < 0 || sp->node >= n || !sched_share_free(&nodes[sp->node], w, sp))
			continue;
		*ret = *sp;
		ret->milli = w->milli;
		ret->cpus = w->cpus;
		ret->mem_mib = w->mem_mib;
		ret->alone = w->alone;
		*spare_used = i;
		return SCHED_FROM_SPARE;
	}
	/* the cluster's spare pool first, then the other nodes */
	for (int from_pool = 1; from_pool >= 0; from_pool--) {
		for (int i = 0; i < n; i++)
			ok[i] = !out[i] && (pool && pool[i]) == (bool)from_pool;
		if (sched_share_best(nodes, n, ok, w, ret) >= 0)
			return from_pool ? SCHED_FROM_POOL : SCHED_FROM_FREE;
	}
	return SCHED_FROM_NONE;
}

/* A node's model, as the spare pool counts it: its first device's. */
static const char *node_model(const struct sched_node *n)
{
	return n->ndev ? n->devs[0].model : "";
}

int sched_pool_refill(const struct sched_node *nodes, int n, const struct sched_config *cfg,
		      bool *pool, const bool *lent, int *changed, int nchanged_max)
{
	int have[MODEL_MAX_SPARE_MODELS] = {0}, nch = 0;
	for (int i = 0; i < n; i++) {
		if (!pool[i])
			continue;
		int m = -1;
		for (int k = 0; k < cfg->nspare_pool && m < 0; k++)
			if (strcmp(cfg->spare_pool[k].model, node_model(&nodes[i])) == 0)
				m = k;
		if (m < 0 || have[m] >= cfg->spare_pool[m].nodes || !nodes[i].schedulable ||
		    !(empty(&nodes[i]) || (lent && lent[i]))) {
			pool[i] = false;
			if (nch < nchanged_max)
				changed[nch] = i;
			nch++;
			continue;
		}
		have[m]++;
	}
	for (int k = 0; k < cfg->nspare_pool; k++)
		for (int i = 0; i < n && have[k] < cfg->spare_pool[k].nodes; i++) {
			if (pool[i] || !nodes[i].schedulable || !empty(&nodes[i]) ||
			    strcmp(node_model(&nodes[i]), cfg->spare_pool[k].model) != 0)
				continue;
			pool[i] = true;
			have[k]++;
			if (nch < nchanged_max)
				changed[nch] = i;
			nch++;
		}
	return nch;
}
