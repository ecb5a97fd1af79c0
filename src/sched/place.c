/*
 * Placement: where one job goes, given what is free in a view (the files
 * beside this one keep what it reads: topology.c, cluster.c, lists.c,
 * fit.c).
 *
 * For each acceptable accelerator model (or all of them together when the
 * job allows mixing), the nodes that could hold one node's share become
 * candidates. Single-node jobs take the tightest candidate. Gangs look for
 * the deepest topology group (a leaf switch, then a spine, ...) with enough
 * candidates, so they span the fewest switches, and take its tightest
 * nodes. Models are then compared: fewest switches, not taking a model other
 * waiting jobs can use only, fastest, tightest, by name.
 *
 * Fractions of a device go to the device whose use least raises the node's
 * fragmentation for the request mix (fragmentation gradient descent): the
 * free share a typical request could not use there.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* tightest first, then by name (its rank among the names) */
static int cmp_cand(const void *a, const void *b, void *arg)
{
	const struct cand *x = a, *y = b;
	const int *rank = arg;
	if (x->spare != y->spare)
		return x->spare < y->spare ? -1 : 1;
	if (x->cpu_spare != y->cpu_spare)
		return x->cpu_spare < y->cpu_spare ? -1 : 1;
	return rank[x->node] - rank[y->node];
}

/* the k tightest candidates to the front (cmp_cand is a total order) */
DEFINE_SELECT(select_tightest, struct cand, cmp_cand)

struct choice {
	bool ok;
	int model;
	int switches;
	int64_t spare;
	int excl;  /* the model is one some waiting job can use only */
	double tf; /* the model's speed */
	int nsel;
	int *sel; /* node indices, node rank order */
};

/* Numbers the candidates' fault domains of depth components (their path
 * prefixes) into wdom (within) or sdom (spread), in the prefixes' order (so
 * that ids do not depend on node order); the count. */
static int domain_ids(const struct pass *p, struct cand *c, int nc, int depth, bool spread)
{
	struct tk_map ids;
	tk_map_init(&ids);
	char **keys = xcalloc((size_t)nc + 1, sizeof(char *));
	int *first = xcalloc((size_t)nc + 1, sizeof(int));
	int n = 0;
	for (int i = 0; i < nc; i++) {
		const char *d =
			p->snap->nodes[c[i].node].domain ? p->snap->nodes[c[i].node].domain : "";
		char *k = xstrndup(d, sched_domain_prefix(d, depth));
		void *v = tk_map_get(&ids, k);
		int id;
		if (v) {
			id = (int)(intptr_t)v - 1;
			free(k);
		} else {
			id = n;
			keys[n++] = k;
			tk_map_put(&ids, k, (void *)(intptr_t)(id + 1));
		}
		first[i] = id; /* for now: the id of first appearance */
	}
	/* rank[id]: its prefix's place in order */
	char **sorted = xcalloc((size_t)n + 1, sizeof(char *));
	memcpy(sorted, keys, sizeof(char *) * (size_t)n);
	qsort(sorted, (size_t)n, sizeof(char *), sched__cmp_str);
	int *rank = xcalloc((size_t)n + 1, sizeof(int));
	for (int r = 0; r < n; r++)
		rank[(int)(intptr_t)tk_map_get(&ids, sorted[r]) - 1] = r;
	for (int i = 0; i < nc; i++) {
		int id = rank[first[i]];
		if (spread)
			c[i].sdom = id;
		else
			c[i].wdom = id;
	}
	tk_map_release(&ids);
	for (int i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
	free(sorted);
	free(rank);
	free(first);
	return n;
}

/* need nodes of by[0..n) (tightest first once sorted) into tmp: the
 * tightest, or with --spread the tightest that keep at most spread_max in
 * any domain (cnt: zeroes, one per domain, left zero). Their spare, or -1
 * when there are not enough. */
static int64_t take_tightest(struct pass *p, const struct req *rq, struct cand *by, int n, int need,
			     int *cnt, int *tmp)
{
	void *snap = p->name_rank;
	int64_t spare = 0;
	if (!rq->j->spread_depth) {
		select_tightest(by, n, need, snap);
		qsort_r(by, (size_t)need, sizeof(*by), cmp_cand, snap);
		for (int x = 0; x < need; x++) {
			tmp[x] = by[x].node;
			spare += by[x].spare;
		}
		return spare;
	}
	qsort_r(by, (size_t)n, sizeof(*by), cmp_cand, snap);
	int got = 0;
	for (int x = 0; x < n && got < need; x++) {
		if (cnt[by[x].sdom] >= rq->j->spread_max)
			continue;
		cnt[by[x].sdom]++;
		tmp[got++] = by[x].node;
		spare += by[x].spare;
	}
	for (int x = 0; x < n; x++)
		cnt[by[x].sdom] = 0;
	return got == need ? spare : -1;
}

/* Chooses the gang's nodes among c[0..nc): the deepest topology group
 * that has enough, its tightest nodes (with --spread, as take_tightest). */
static void choose_among(struct pass *p, const struct req *rq, struct cand *c, int nc, int *cnt,
			 struct choice *ch)
{
	int need = rq->j->nodes;
	ch->ok = false;
	struct cand *by = xmalloc(sizeof(*by) * ((size_t)nc + 1));
	int *tmp = xmalloc(sizeof(int) * ((size_t)need + 1));
	for (int level = p->depth - 1; level >= -1 && !ch->ok; level--) {
		/* the candidates by group (ids follow node-name order) */
		int ng = level >= 0 ? p->ngroups[level] : 1;
		int *start = xcalloc((size_t)ng + 1, sizeof(int));
		for (int i = 0; i < nc; i++) {
			c[i].group = level >= 0 ? p->topo_group[level * p->nn + c[i].node] : 0;
			start[c[i].group + 1]++;
		}
		for (int g = 0; g < ng; g++)
			start[g + 1] += start[g];
		for (int i = 0; i < nc; i++)
			by[start[c[i].group]++] = c[i];
		for (int g = 0, i = 0; g < ng; g++) {
			int k = start[g]; /* the group is by[i .. k) */
			int64_t spare =
				k - i >= need ? take_tightest(p, rq, &by[i], k - i, need, cnt, tmp)
					      : -1;
			if (spare >= 0) {
				int sw = sched_switches_spanned(p->snap->nodes, tmp, need);
				if (!ch->ok || sw < ch->switches ||
				    (sw == ch->switches && spare < ch->spare)) {
					ch->ok = true;
					ch->switches = sw;
					ch->spare = spare;
					ch->nsel = need;
					memcpy(ch->sel, tmp, sizeof(int) * (size_t)need);
				}
			}
			i = k;
		}
		free(start);
	}
	free(tmp);
	free(by);
}

/* Chooses the gang's nodes among nc candidates: with --within, the best
 * choice within any one domain (fewest switches, then the least left
 * over); else choose_among over all. */
static void choose_nodes(struct pass *p, const struct req *rq, int nc, struct choice *ch)
{
	struct cand *c = p->cands;
	const struct sched_job *j = rq->j;
	int need = j->nodes;
	void *snap = p->name_rank;
	ch->ok = false;
	if (need == 1) {
		int best = 0;
		for (int i = 1; i < nc; i++)
			if (cmp_cand(&c[i], &c[best], snap) < 0)
				best = i;
		ch->ok = true;
		ch->nsel = 1;
		ch->sel[0] = c[best].node;
		ch->spare = c[best].spare;
		ch->switches = 1;
		return;
	}
	int *cnt = NULL;
	if (j->spread_depth)
		cnt = xcalloc((size_t)domain_ids(p, c, nc, j->spread_depth, true) + 1, sizeof(int));
	if (!j->within_depth) {
		choose_among(p, rq, c, nc, cnt, ch);
	} else {
		int nd = domain_ids(p, c, nc, j->within_depth, false);
		int *start = xcalloc((size_t)nd + 1, sizeof(int));
		struct cand *by = xmalloc(sizeof(*by) * ((size_t)nc + 1));
		for (int i = 0; i < nc; i++)
			start[c[i].wdom + 1]++;
		for (int d = 0; d < nd; d++)
			start[d + 1] += start[d];
		for (int i = 0; i < nc; i++)
			by[start[c[i].wdom]++] = c[i];
		struct choice cur = {.sel = xcalloc((size_t)need, sizeof(int))};
		for (int d = 0, i = 0; d < nd; d++) {
			int k = start[d]; /* the domain is by[i .. k) */
			if (k - i >= need) {
				choose_among(p, rq, &by[i], k - i, cnt, &cur);
				if (cur.ok &&
				    (!ch->ok || cur.switches < ch->switches ||
				     (cur.switches == ch->switches && cur.spare < ch->spare))) {
					int *sel = ch->sel;
					*ch = cur;
					ch->sel = sel;
					memcpy(ch->sel, cur.sel, sizeof(int) * (size_t)need);
				}
			}
			i = k;
		}
		free(cur.sel);
		free(by);
		free(start);
	}
	free(cnt);
	if (!ch->ok)
		return;
	/* node ranks in topology order, so neighbours in a ring share switches */
	for (int a = 1; a < ch->nsel; a++)
		for (int b = a; b > 0; b--) {
			const struct sched_node *x = &p->snap->nodes[ch->sel[b - 1]];
			const struct sched_node *y = &p->snap->nodes[ch->sel[b]];
			int t = strcmp(x->topology ? x->topology : "",
				       y->topology ? y->topology : "");
			if (t < 0 || (t == 0 && strcmp(x->name, y->name) <= 0))
				break;
			int sw = ch->sel[b];
			ch->sel[b] = ch->sel[b - 1];
			ch->sel[b - 1] = sw;
		}
}

/* ---- gathering candidates: one way for each kind of request --------------------------- */

/* With a delta view (scratch as free plus changes on a few nodes), the
 * touched nodes judged on the view itself; the lists give the others.
 * *min_spare gets the tightest fit found. */
static int cands_touched(struct pass *p, const struct req *rq, const struct view *v, int model,
			 int64_t *min_spare)
{
	int nc = 0;
	for (int t = 0; t < p->ntouched; t++) {
		int n = p->touched[t];
		if (sched__node_fits(p, rq, v, n, model, &p->cands[nc])) {
			*min_spare = MIN(*min_spare, p->cands[nc].spare);
			nc++;
		}
	}
	return nc;
}

/* Whole devices of `model`: the nodes listed by their count of whole free
 * devices, from the count asked for up; a single-node request stops at the
 * bucket past the tightest fit found, a scored one at enough candidates. */
static int cands_whole(struct pass *p, const struct req *rq, int model, bool delta, int nc,
		       int64_t min_spare)
{
	int nm = p->nmodels;
	bool score = scored(p, rq);
	int limit = score ? scored_candidates(p) : INT_MAX;
	for (int k = rq->whole; k <= MODEL_MAX_ACCELS && nc < limit; k++) {
		if (rq->j->nodes == 1 && nc > 0 && !score && k - rq->whole > min_spare)
			break;
		for (int x = p->wb_head[model * (MODEL_MAX_ACCELS + 1) + k]; x >= 0 && nc < limit;
		     x = p->wb_next[x]) {
			int n = x / nm;
			if (delta && p->touch_mark[n] == p->touch_gen)
				continue;
			if (sched__node_fits(p, rq, &p->free, n, model, &p->cands[nc])) {
				min_spare = MIN(min_spare, p->cands[nc].spare);
				nc++;
			}
		}
	}
	return nc;
}

/* A fraction of a device of `model`: the nodes listed by the room on their
 * roomiest device, from the share asked for up. */
static int cands_fraction(struct pass *p, const struct req *rq, int model, bool delta, int nc)
{
	int nm = p->nmodels;
	int limit = scored(p, rq) ? scored_candidates(p) : INT_MAX;
	for (int b = FRAC_BUCKET(rq->frac); b < FRAC_BUCKETS && nc < limit; b++)
		for (int x = p->fb_head[model * FRAC_BUCKETS + b]; x >= 0 && nc < limit;
		     x = p->fb_next[x]) {
			int n = x / nm;
			if (delta && p->touch_mark[n] == p->touch_gen)
				continue;
			if (sched__node_fits(p, rq, &p->free, n, model, &p->cands[nc]))
				nc++;
		}
	return nc;
}

/* CPU work on one node: the first (accelerators, free CPUs) list with a fit
 * holds the best fit; when it must go on accelerator nodes and the policy
 * scores, the tightest candidates are scored. */
static int cands_cpu_only(struct pass *p, const struct req *rq, const struct view *v)
{
	int nc = 0;
	bool score = scored(p, rq);
	int limit = score ? scored_candidates(p) : INT_MAX;
	for (int a = 0; a <= MODEL_MAX_ACCELS; a++) {
		if (nc > 0 && (a == 1 || !score))
			break; /* a node without accelerators holds it */
		int want = a > 0 && score ? limit : 1;
		if (nc >= want)
			break;
		for (int b = rq->cpus > p->max_cpus ? p->cpu_buckets
						    : cpu_bucket(p, MAX(rq->cpus, 0));
		     b < p->cpu_buckets && nc < want; b++)
			for (int n = p->cb_head[a * p->cpu_buckets + b]; n >= 0 && nc < limit;
			     n = p->cb_next[n])
				if (sched__node_fits(p, rq, v, n, -1, &p->cands[nc]))
					nc++;
	}
	return nc;
}

/* Every node with devices of `model`, judged on v. */
static int cands_model(struct pass *p, const struct req *rq, const struct view *v, int model)
{
	int nc = 0;
	for (int k = p->model_nodes_off[model]; k < p->model_nodes_off[model + 1]; k++)
		if (sched__node_fits(p, rq, v, p->model_nodes[k], model, &p->cands[nc]))
			nc++;
	return nc;
}

/* Every node, judged on v. */
static int cands_all(struct pass *p, const struct req *rq, const struct view *v)
{
	int nc = 0;
	for (int n = 0; n < p->nn; n++)
		if (sched__node_fits(p, rq, v, n, -1, &p->cands[nc]))
			nc++;
	return nc;
}

/* The nodes that could hold one node's share of rq under `model` (-1: any)
 * in v, into p->cands; returns how many. On `free` (or a delta view of it)
 * the lists give the candidates; on other views every node is judged. */
static int gather(struct pass *p, const struct req *rq, const struct view *v, int model)
{
	bool devices = rq->whole || rq->frac;
	bool delta = v == &p->scratch && p->delta;
	/* a node list: its few nodes judged one by one (node_ok rules out the
	 * rest at once) */
	if (rq->j->nnodelist)
		return model >= 0 ? cands_model(p, rq, v, model) : cands_all(p, rq, v);
	if ((v == &p->free || delta) && model >= 0 && devices) {
		int64_t min_spare = INT64_MAX;
		int nc = delta ? cands_touched(p, rq, v, model, &min_spare) : 0;
		if (rq->whole)
			return cands_whole(p, rq, model, delta, nc, min_spare);
		return cands_fraction(p, rq, model, delta, nc);
	}
	if (v == &p->free && model < 0 && !devices && rq->j->nodes == 1)
		return cands_cpu_only(p, rq, v);
	if (model >= 0)
		return cands_model(p, rq, v, model);
	return cands_all(p, rq, v);
}

/* ---- choosing ----------------------------------------------------------------------- */

/*
 * How two placements of one request, under different models, compare: < 0
 * when a is better. The keys, in DESIGN.md's order (section 4):
 *   1. fewest switches spanned;
 *   2. not taking a model that some waiting job can use only;
 *   3. with score_before_speed, for a request the policy scores: the score
 *      (what is left, or fragmentation), lower first;
 *   4. the fastest model (the one that finishes the job soonest);
 *   5. best fit: the least left over.
 * A tie keeps the earlier (by model order).
 */
static int choice_cmp(const struct pass *p, const struct req *rq, const struct choice *a,
		      const struct choice *b)
{
	if (a->switches != b->switches)
		return a->switches < b->switches ? -1 : 1;
	if (a->excl != b->excl)
		return a->excl < b->excl ? -1 : 1;
	bool by_score = scored(p, rq) && p->policy && p->policy->score_before_speed;
	if (by_score && a->spare != b->spare)
		return a->spare < b->spare ? -1 : 1;
	if (fabs(a->tf - b->tf) > 1e-9)
		return a->tf > b->tf ? -1 : 1;
	if (a->spare != b->spare)
		return a->spare < b->spare ? -1 : 1;
	return 0;
}

/* Is there no chance for `model`: whole devices on `free`, and the index
 * counts fewer nodes with enough of them than the gang needs? */
static bool too_few_nodes(struct pass *p, const struct req *rq, const struct view *v, int model,
			  struct place_fail *why)
{
	if (model < 0 || !rq->whole || v != &p->free)
		return false;
	int cnt = 0;
	for (int k = rq->whole; k <= MODEL_MAX_ACCELS; k++)
		cnt += p->cap[model * (MODEL_MAX_ACCELS + 1) + k];
	if (cnt >= rq->j->nodes)
		return false;
	why->could = MAX(why->could, cnt);
	return true;
}

/* Writes the chosen placement: each node's CPUs, memory and devices. */
static void placement_fill(struct pass *p, const struct req *rq, const struct view *v,
			   const struct choice *best, struct placement *out)
{
	out->nnodes = best->nsel;
	out->switches = best->switches;
	out->spare = best->spare;
	for (int i = 0; i < best->nsel; i++) {
		int n = best->sel[i];
		struct sched_assign *a = &out->nodes[i];
		a->node = n;
		a->milli = MODEL_MILLI;
		a->cpus = rq->cpus;
		a->mem_mib = rq->mem;
		a->alone = rq->j->exclusive;
		a->ndev = 0;
		if (rq->frac) {
			struct cand c;
			sched__node_fits(p, rq, v, n, best->model, &c);
			a->ndev = 1;
			a->devs[0] = c.dev;
			a->milli = rq->frac;
		} else if (rq->whole) {
			sched__pick_devices(p, rq, v, n, best->model, a);
		}
	}
}

bool sched__place(struct pass *p, const struct req *rq, const struct view *v, struct placement *out,
		  struct place_fail *why)
{
	const struct sched_job *j = rq->j;
	bool devices = rq->whole || rq->frac;
	/* a gang of one model tries each model apart; a mixed one, all at once */
	int ngroups = devices && !j->mixed_types ? p->nmodels : 1;
	why->could = 0;
	why->switches = 0;
	struct choice best = {0}, cur = {0};
	best.sel = xcalloc((size_t)j->nodes, sizeof(int));
	cur.sel = xcalloc((size_t)j->nodes, sizeof(int));
	int best_over = -1; /* fewest switches of a placement over the limit */
	for (int g = 0; g < ngroups; g++) {
		int model = devices && !j->mixed_types ? g : -1;
		if ((model >= 0 && !rq->model_ok[model]) || too_few_nodes(p, rq, v, model, why))
			continue;
		/* a single-node shape placed again in `free`: what its gather
		 * and choice found under this model holds while none of the
		 * model's nodes changed */
		struct model_choice *mc = rq->memo && v == &p->free && model >= 0 && j->nodes == 1
						  ? &rq->memo->choice[model]
						  : NULL;
		int nc;
		if (mc && mc->ver == p->model_ver[model]) {
			nc = mc->nc;
			why->could = MAX(why->could, nc);
			if (nc < 1)
				continue;
			cur.ok = true;
			cur.nsel = 1;
			cur.sel[0] = mc->node;
			cur.spare = mc->spare;
			cur.switches = 1;
		} else {
			nc = gather(p, rq, v, model);
			why->could = MAX(why->could, nc);
			if (mc)
				*mc = (struct model_choice){p->model_ver[model], nc, -1, 0};
			if (nc < j->nodes)
				continue;
			choose_nodes(p, rq, nc, &cur);
			if (!cur.ok)
				continue;
			if (mc) {
				mc->node = cur.sel[0];
				mc->spare = cur.spare;
			}
		}
		if (j->max_switches && cur.switches > j->max_switches) {
			if (best_over < 0 || cur.switches < best_over)
				best_over = cur.switches;
			continue;
		}
		cur.model = model;
		cur.excl = model >= 0 && j->ngpu_types != 1 ? p->model_exclusive[model] : 0;
		cur.tf = model >= 0 ? p->model_tflops[model] : 0;
		if (!best.ok || choice_cmp(p, rq, &cur, &best) < 0) {
			struct choice t = best;
			best = cur;
			cur = t;
		}
	}
	free(cur.sel);
	bool ok = best.ok;
	if (ok)
		placement_fill(p, rq, v, &best, out);
	else
		why->switches = best_over > 0 ? best_over : 0;
	free(best.sel);
	return ok;
}
