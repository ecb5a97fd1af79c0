/*
 * One node: whether it can hold one node's share of a request, on which
 * devices, and how good a choice it is (best fit, or the increase of
 * fragmentation for the request mix: fragmentation gradient descent,
 * ATC'23); whether a request could ever fit; how many nodes could hold a
 * share as a view changes a node at a time (fitcount).
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- fragmentation ------------------------------------------------------------------- */

/* The free share that one request kind could not use on a node; usable[d]
 * says whether the kind may use device d (NULL: every device). */
static double frag_one(int ndev, const int *free, int cpus_free, int64_t mem_free,
		       const struct sched_mix_item *k, const bool *usable)
{
	double all = 0;
	int whole = 0, fits = 0;
	double partial = 0, small = 0;
	for (int d = 0; d < ndev; d++) {
		all += free[d];
		if (usable && !usable[d]) {
			partial += free[d];
			small += free[d];
			continue;
		}
		if (free[d] == MODEL_MILLI)
			whole++;
		else
			partial += free[d];
		if (k->devices == 0 && free[d] >= k->milli)
			fits++;
		else if (k->devices == 0)
			small += free[d];
	}
	if (cpus_free < k->cpus || mem_free < k->mem_mib)
		return all;
	if (k->devices > 0)
		return whole >= k->devices ? partial : all;
	return fits ? small : all;
}

struct sched_mix_item sched_mix_item_of(int tasks_per_node, int gpu_milli, int cpus,
					int64_t mem_mib)
{
	return (struct sched_mix_item){
		.milli = gpu_milli < MODEL_MILLI ? gpu_milli : 0,
		.devices = gpu_milli >= MODEL_MILLI ? tasks_per_node * gpu_milli / MODEL_MILLI : 0,
		.cpus = cpus,
		.mem_mib = mem_mib,
	};
}

bool sched__mix_item_allows(const struct sched_mix_item *k, const char *model)
{
	for (int t = 0; t < k->ngpu_types; t++)
		if (model && strcasecmp(k->gpu_types[t], model) == 0)
			return true;
	return k->ngpu_types == 0;
}

double sched_node_fragmentation(int ndev, const int *free_milli, const char *const *dev_model,
				int cpus_free, int64_t mem_free_mib,
				const struct sched_mix_item *mix, int nmix)
{
	double f = 0;
	bool usable[MODEL_MAX_ACCELS];
	ndev = MIN(ndev, MODEL_MAX_ACCELS);
	for (int i = 0; i < nmix; i++) {
		bool typed = mix[i].ngpu_types > 0 && dev_model;
		for (int d = 0; typed && d < ndev; d++)
			usable[d] = sched__mix_item_allows(&mix[i], dev_model[d]);
		f += mix[i].p * frag_one(ndev, free_milli, cpus_free, mem_free_mib, &mix[i],
					 typed ? usable : NULL);
	}
	return f;
}

/* frag_node for a node whose devices are all of one model (or when every
 * kind may use every model): the sums frag_one works out for each kind
 * are the same for all kinds but the fractions' fit, so they are worked
 * out once (in integers: the same values frag_one's doubles hold). */
static double frag_node_one_model(const struct pass *p, int ndev, const int *model, const int *free,
				  int cpus, int64_t mem)
{
	int64_t all = 0, partial;
	int whole = 0;
	for (int d = 0; d < ndev; d++) {
		all += free[d];
		whole += free[d] == MODEL_MILLI;
	}
	partial = all - (int64_t)whole * MODEL_MILLI;
	double f = 0;
	for (int i = 0; i < p->nmix; i++) {
		const struct sched_mix_item *k = &p->mix[i];
		bool usable = !p->mix_ok || ndev == 0 ||
			      p->mix_ok[(size_t)i * (size_t)p->nmodels + (size_t)model[0]];
		int64_t left = all;
		if (usable && cpus >= k->cpus && mem >= k->mem_mib) {
			if (k->devices > 0) {
				left = whole >= k->devices ? partial : all;
			} else {
				int fits = 0;
				int64_t small = 0;
				for (int d = 0; d < ndev; d++) {
					if (free[d] >= k->milli)
						fits++;
					else
						small += free[d];
				}
				left = fits ? small : all;
			}
		}
		f += k->p * (double)left;
	}
	return f;
}

/* Fragmentation of node n with `free`, `cpus` and `mem` free, the models
 * each kind may use as the pass worked them out (mix_ok). */
static double frag_node(const struct pass *p, int n, const int *free, int cpus, int64_t mem)
{
	const struct sched_node *node = &p->snap->nodes[n];
	const int *model = &p->dev_model[p->dev_off[n]];
	bool one_model = true;
	for (int d = 1; d < node->ndev && one_model; d++)
		one_model = model[d] == model[0];
	if (one_model || !p->mix_ok)
		return frag_node_one_model(p, node->ndev, model, free, cpus, mem);
	double f = 0;
	bool usable[MODEL_MAX_ACCELS];
	for (int i = 0; i < p->nmix; i++) {
		const unsigned char *ok = &p->mix_ok[(size_t)i * (size_t)p->nmodels];
		for (int d = 0; d < node->ndev; d++)
			usable[d] = ok[model[d]];
		f += p->mix[i].p * frag_one(node->ndev, free, cpus, mem, &p->mix[i], usable);
	}
	return f;
}

/* ---- one node ------------------------------------------------------------------------ */

static bool dev_usable(const struct pass *p, const struct req *rq, int node, int d, int model)
{
	const struct sched_dev *dev = &p->snap->nodes[node].devs[d];
	int m = p->dev_model[p->dev_off[node] + d];
	if (!rq->model_ok[m] || (model >= 0 && m != model))
		return false;
	if (rq->j->gpu_mem_mib && dev->mem_mib < rq->j->gpu_mem_mib)
		return false;
	if (rq->j->gpu_tflops > 0 && dev->tflops < rq->j->gpu_tflops)
		return false;
	return true;
}

/* Scores encode (policy score, tie-break): lower is better; the tie-break
 * (devices or milli left) stays below SCORE_TIE. */
#define SCORE_TIE 4096

/* ---- the paper's other baselines ----------------------------------------------------- */

/* Random: a number of (job, node, device), the node by its name's rank so
 * that the listing order does not matter. */
static int64_t random_score(const struct pass *p, const struct req *rq, int n, int d)
{
	uint64_t z = (uint64_t)rq->j->id * 0x9e3779b97f4a7c15ULL ^
		     (uint64_t)p->name_rank[n] * 0xbf58476d1ce4e5b9ULL ^ (uint64_t)(d + 1);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (int64_t)((z ^ (z >> 31)) % 1000000) * SCORE_TIE;
}

/* Milli-devices free on node n in view v. */
static int64_t dev_free(const struct pass *p, const struct view *v, int n)
{
	int64_t f = 0;
	for (int d = 0; d < p->snap->nodes[n].ndev; d++)
		f += v->dev[p->dev_off[n] + d];
	return f;
}

/* Dot product: the request and what the node has in use, each resource as
 * a share of the node's capacity; the most aligned node wins (-score). */
static int64_t dotprod_score(const struct pass *p, const struct req *rq, const struct view *v,
			     int n, int take_milli)
{
	const struct sched_node *node = &p->snap->nodes[n];
	double gcap = (double)node->ndev * MODEL_MILLI, ccap = node->cpus_total;
	double gused = gcap - (double)dev_free(p, v, n);
	double dot = (gcap > 0 ? (take_milli / gcap) * (gused / gcap) : 0) +
		     (ccap > 0 ? (rq->cpus / ccap) * ((ccap - v->cpus[n]) / ccap) : 0);
	return -llround(dot * 1e6) * SCORE_TIE;
}

/* Clustering: how many running tasks on node n ask what rq asks. */
static int same_tasks(struct pass *p, const struct req *rq, int n)
{
	int milli = rq->frac ? rq->frac : MODEL_MILLI;
	int ndev = rq->frac ? 1 : rq->whole;
	if (!p->same_count || p->same_milli != milli || p->same_ndev != ndev) {
		if (!p->same_count)
			p->same_count = xcalloc((size_t)p->nn + 1, sizeof(int));
		memset(p->same_count, 0, sizeof(int) * (size_t)p->nn);
		for (int r = 0; r < p->snap->nrunning; r++)
			for (int k = 0; k < p->snap->running[r].nnodes; k++) {
				const struct sched_assign *a = &p->snap->running[r].nodes[k];
				if (a->milli == milli && a->ndev == ndev)
					p->same_count[a->node]++;
			}
		p->same_milli = milli;
		p->same_ndev = ndev;
	}
	return p->same_count[n];
}

bool sched__place_scores(const struct pass *p, const struct req *rq)
{
	/* (a random score is the job's own: nothing to remember for its shape) */
	if (policy_of(p) == SCHED_FRAC_RANDOM)
		return false;
	return scored(p, rq) || (rq->frac && policy_of(p) == SCHED_FRAC_FGD);
}

static double frag_now(struct pass *p, const struct view *v, int n)
{
	if (v == &p->free && p->frag_valid[n])
		return p->frag_before[n];
	double f = frag_node(p, n, &v->dev[p->dev_off[n]], v->cpus[n], v->mem[n]);
	if (v == &p->free) {
		p->frag_before[n] = f;
		p->frag_valid[n] = true;
	}
	return f;
}

/* Best fit over CPUs and devices together: what would be left on the node,
 * each as a share of the largest node's, weighted alike (0: nothing left). */
static int64_t best_fit_score(const struct pass *p, const struct req *rq, const struct view *v,
			      int n, int take_milli)
{
	int64_t dev_left = dev_free(p, v, n) - take_milli;
	double cpu = p->max_cpus > 0 ? (double)(v->cpus[n] - rq->cpus) / p->max_cpus : 0;
	double dev = p->max_ndev > 0 ? (double)dev_left / ((double)p->max_ndev * MODEL_MILLI) : 0;
	return llround((0.5 * cpu + 0.5 * dev) * 1e6) * SCORE_TIE;
}

/* How far a node would be from keeping CPUs for the devices it has left:
 * the share of its devices left free beyond the share of its CPUs (CPUs
 * gone first strand the devices), and, while it has devices left, half of
 * the other way round (CPUs left over are only CPUs; once its devices are
 * all taken, what CPUs it has left is CPU work's). 0 when the two are left
 * alike. */
static double cpu_device_gap(const struct pass *p, const struct req *rq, const struct view *v,
			     int n, int take_milli)
{
	const struct sched_node *node = &p->snap->nodes[n];
	if (node->ndev == 0 || node->cpus_total <= 0)
		return 0;
	int64_t dev_left = dev_free(p, v, n) - take_milli;
	double dev = (double)dev_left / ((double)node->ndev * MODEL_MILLI);
	double cpu = (double)(v->cpus[n] - rq->cpus) / node->cpus_total;
	return fmax(0, dev - cpu) + (dev_left > 0 ? 0.5 * fmax(0, cpu - dev) : 0);
}

/* Fragmentation deltas closer than this (milli-devices, 2.5% of a device)
 * count as equal, and what the placement leaves decides between them: an
 * exact delta alone overrates differences the request mix cannot tell
 * apart (on Alibaba's openb trace this gains about a point of allocation).
 * Between equals, best fit over CPUs and devices, and for a request of a
 * device or less also how evenly the node is left CPUs for its devices
 * (FGD_GAP_WEIGHT of the tie-break): the fragmentation measure sees CPUs
 * only once a kind no longer fits, and by then whole devices sit behind
 * exhausted CPUs (on the GPU-sharing lists of Alibaba's openb trace that
 * is up to 0.75 points of allocation; docs/sim.md).
 * Gangs of several devices a node keep pure best fit, which keeps whole
 * nodes whole. */
#define FGD_EQUAL_MILLI 25.0
#define FGD_GAP_WEIGHT 0.6
#define BEST_FIT_RANGE (1000001LL * SCORE_TIE)

static int64_t fgd_score(const struct pass *p, const struct req *rq, const struct view *v, int n,
			 double delta, int take_milli, int tie)
{
	int64_t fit = best_fit_score(p, rq, v, n, take_milli);
	if (rq->frac > 0 || rq->whole <= 1) {
		double gap = cpu_device_gap(p, rq, v, n, take_milli);
		fit = llround((1 - FGD_GAP_WEIGHT) * (double)(fit / SCORE_TIE) +
			      FGD_GAP_WEIGHT * gap * 1e6) *
		      SCORE_TIE;
	}
	return (int64_t)floor(delta / FGD_EQUAL_MILLI) * BEST_FIT_RANGE + fit + tie;
}

/* Chooses the device for a fraction on node n; -1 when none fits. Fills the
 * score (lower is better) by the pass's fraction policy. */
static int frac_device(struct pass *p, const struct req *rq, const struct view *v, int n, int model,
		       int64_t *score)
{
	const struct sched_node *node = &p->snap->nodes[n];
	const int *free = &v->dev[p->dev_off[n]];
	int best = -1;
	double best_score = 0;
	int used_node = 0;
	for (int d = 0; d < node->ndev; d++)
		used_node += MODEL_MILLI - free[d];
	/* most nodes have no room at all: say so before any arithmetic */
	bool any = false;
	for (int d = 0; d < node->ndev && !any; d++)
		any = free[d] >= rq->frac && dev_usable(p, rq, n, d, model);
	if (!any)
		return -1;
	double before = 0;
	enum sched_frac_policy pol = policy_of(p);
	if (pol == SCHED_FRAC_FGD) {
		before = frag_now(p, v, n);
	}
	int after[MODEL_MAX_ACCELS];
	int seen[MODEL_MAX_ACCELS], nseen = 0;
	for (int d = 0; d < node->ndev; d++) {
		if (free[d] < rq->frac || !dev_usable(p, rq, n, d, model))
			continue;
		double sc;
		switch (pol) {
		case SCHED_FRAC_BESTFIT:
			sc = free[d] - rq->frac;
			break;
		case SCHED_FRAC_RANDOM:
			sc = (double)random_score(p, rq, n, d);
			break;
		case SCHED_FRAC_DOTPROD:
			/* the node by alignment, the device by best fit */
			sc = (double)dotprod_score(p, rq, v, n, rq->frac) + free[d] - rq->frac;
			break;
		case SCHED_FRAC_CLUSTER:
			sc = -(double)same_tasks(p, rq, n) * (MODEL_MILLI + 1) + free[d] - rq->frac;
			break;
		case SCHED_FRAC_PACK:
			/* the most used node, then its most used device */
			sc = -(double)used_node * (MODEL_MILLI + 1) + free[d];
			break;
		default: {
			/* devices with the same room score the same: one evaluation each */
			bool dup = false;
			for (int k = 0; k < nseen && !dup; k++)
				dup = seen[k] == free[d];
			if (dup)
				continue;
			seen[nseen++] = free[d];
			memcpy(after, free, sizeof(int) * (size_t)node->ndev);
			after[d] -= rq->frac;
			sc = frag_node(p, n, after, v->cpus[n] - rq->cpus, v->mem[n] - rq->mem) -
			     before;
		}
		}
		if (best < 0 || sc < best_score - 1e-9 ||
		    (fabs(sc - best_score) <= 1e-9 && free[d] < free[best])) {
			best = d;
			best_score = sc;
		}
	}
	if (best < 0)
		return -1;
	/* ties (most often: no fragmentation either way) go to the device with the
	 * least room left, so whole devices stay whole */
	if (pol == SCHED_FRAC_BESTFIT && scored(p, rq))
		*score = best_fit_score(p, rq, v, n, rq->frac) + (free[best] - rq->frac);
	else if (pol == SCHED_FRAC_RANDOM || pol == SCHED_FRAC_DOTPROD || pol == SCHED_FRAC_CLUSTER)
		*score = (int64_t)best_score;
	else if (pol == SCHED_FRAC_FGD && scored(p, rq))
		*score = fgd_score(p, rq, v, n, best_score, rq->frac, free[best] - rq->frac);
	else
		*score =
			(int64_t)llround(best_score * 1000.0) * SCORE_TIE + (free[best] - rq->frac);
	return best;
}

/* The policy's score for whole devices or CPU work alone on node n, with
 * `left` devices of the model free after it (the tie-break). */
static int64_t node_score(struct pass *p, const struct req *rq, const struct view *v, int n,
			  int model, int left)
{
	const struct sched_node *node = &p->snap->nodes[n];
	switch (policy_of(p)) {
	case SCHED_FRAC_BESTFIT:
		return best_fit_score(p, rq, v, n, rq->whole * MODEL_MILLI) + left;
	case SCHED_FRAC_RANDOM:
		return random_score(p, rq, n, -1);
	case SCHED_FRAC_DOTPROD:
		return dotprod_score(p, rq, v, n, rq->whole * MODEL_MILLI) + left;
	case SCHED_FRAC_CLUSTER:
		return -(int64_t)same_tasks(p, rq, n) * SCORE_TIE + left;
	default:
		break;
	}
	double before = frag_now(p, v, n);
	int after[MODEL_MAX_ACCELS];
	const int *free = &v->dev[p->dev_off[n]];
	memcpy(after, free, sizeof(int) * (size_t)node->ndev);
	for (int d = 0, need = rq->whole; d < node->ndev && need > 0; d++)
		if (after[d] == MODEL_MILLI && dev_usable(p, rq, n, d, model)) {
			after[d] = 0;
			need--;
		}
	double delta = frag_node(p, n, after, v->cpus[n] - rq->cpus, v->mem[n] - rq->mem) - before;
	return fgd_score(p, rq, v, n, delta, rq->whole * MODEL_MILLI, left);
}

/* Could node n hold one node's share of rq on devices of `model` (-1: any
 * acceptable model)? Fills c on success. */
bool sched__node_empty(const struct pass *p, const struct view *v, int n)
{
	if (v->alone[n] || v->cpus[n] != p->total.cpus[n] || v->mem[n] != p->total.mem[n])
		return false;
	for (int d = 0; d < p->snap->nodes[n].ndev; d++)
		if (v->dev[p->dev_off[n] + d] != MODEL_MILLI)
			return false;
	return true;
}

/* What rules node n out for rq whatever its devices: not schedulable, held
 * by an exclusive job, too few CPUs or too little memory, not one of its
 * nodes, not empty for an exclusive job. */
static bool node_ruled_out(const struct pass *p, const struct req *rq, const struct view *v, int n)
{
	return (!p->snap->nodes[n].schedulable && !p->any_node) || v->alone[n] ||
	       v->cpus[n] < rq->cpus || v->mem[n] < rq->mem || (rq->node_ok && !rq->node_ok[n]) ||
	       (rq->j->exclusive && !sched__node_empty(p, v, n));
}

static bool node_fits_now(struct pass *p, const struct req *rq, const struct view *v, int n,
			  int model, struct cand *c)
{
	const struct sched_node *node = &p->snap->nodes[n];
	if (node_ruled_out(p, rq, v, n))
		return false;
	c->node = n;
	c->cpu_spare = v->cpus[n] - rq->cpus;
	c->dev = -1;
	if (rq->frac) {
		c->dev = frac_device(p, rq, v, n, model, &c->spare);
		return c->dev >= 0;
	}
	if (!rq->whole) {
		/* CPU work: keep accelerator nodes free; on one, strand the least */
		c->spare = node->ndev;
		if (node->ndev && scored(p, rq))
			c->spare = node_score(p, rq, v, n, model, node->ndev);
		return true;
	}
	int have = 0;
	if (v == &p->free && model >= 0 && !rq->j->gpu_mem_mib && rq->j->gpu_tflops <= 0) {
		have = p->node_whole[n * p->nmodels + model]; /* kept by sched__cap_update_node */
	} else {
		for (int d = 0; d < node->ndev; d++)
			if (v->dev[p->dev_off[n] + d] == MODEL_MILLI &&
			    dev_usable(p, rq, n, d, model))
				have++;
	}
	if (have < rq->whole)
		return false;
	c->spare = have - rq->whole;
	if (scored(p, rq))
		c->spare = node_score(p, rq, v, n, model, have - rq->whole);
	return true;
}

/* ---- remembered scores ---------------------------------------------------------------- */

#define MEMO_FIRST_CAP 1024

struct memo_table *sched__memo_new(struct pass *p)
{
	size_t bytes = sizeof(struct node_memo) * MEMO_FIRST_CAP;
	if (p->memo_bytes + bytes > MEMO_MAX_BYTES || p->nmodels > INT8_MAX)
		return NULL;
	p->memo_bytes += bytes;
	struct memo_table *t = xcalloc(1, sizeof(*t));
	t->cap = MEMO_FIRST_CAP;
	t->e = sched__keep_zalloc(p->keep, (size_t)t->cap, sizeof(*t->e));
	t->choice = xcalloc((size_t)p->nmodels + 1, sizeof(*t->choice));
	return t;
}

void sched__memo_free(struct pass *p, struct memo_table *t)
{
	if (t) {
		sched__keep_release(p->keep, t->e);
		free(t->choice);
	}
	free(t);
}

static size_t memo_slot(const struct memo_table *t, int n)
{
	size_t mask = (size_t)t->cap - 1, h = ((uint32_t)n * 2654435761u) & mask;
	while (t->e[h].key && t->e[h].key != n + 1)
		h = (h + 1) & mask;
	return h;
}

/* Room for one more entry (at most half full); false when the pass's
 * budget allows no larger table. */
static bool memo_room(struct pass *p, struct memo_table *t)
{
	if ((t->n + 1) * 2 <= t->cap)
		return true;
	size_t bytes = sizeof(struct node_memo) * (size_t)t->cap; /* what doubling adds */
	if (p->memo_bytes + bytes > MEMO_MAX_BYTES)
		return false;
	p->memo_bytes += bytes;
	struct memo_table old = *t;
	t->cap *= 2;
	t->e = sched__keep_zalloc(p->keep, (size_t)t->cap, sizeof(*t->e));
	for (int i = 0; i < old.cap; i++)
		if (old.e[i].key)
			t->e[memo_slot(t, old.e[i].key - 1)] = old.e[i];
	sched__keep_release(p->keep, old.e);
	return true;
}

/* node_fits_now, remembered per node in `free` for the request's shape until
 * the node changes: a pass that places many jobs of one shape scores each
 * node once, not once per job. */
bool sched__node_fits(struct pass *p, const struct req *rq, const struct view *v, int n, int model,
		      struct cand *c)
{
	struct memo_table *t = rq->memo;
	if (!t || v != &p->free)
		return node_fits_now(p, rq, v, n, model, c);
	if (rq->node_ok && !rq->node_ok[n])
		return false; /* not one of its nodes: nothing to remember */
	size_t h = memo_slot(t, n);
	struct node_memo *m = &t->e[h];
	if (m->key) {
		if (m->ver == p->node_ver[n] && m->model == model) {
			*c = (struct cand){.node = n,
					   .spare = m->spare,
					   .cpu_spare = m->cpu_spare,
					   .dev = m->dev};
			return m->fits;
		}
	} else if (!memo_room(p, t)) {
		return node_fits_now(p, rq, v, n, model, c);
	} else {
		m = &t->e[memo_slot(t, n)];
		m->key = n + 1;
		t->n++;
	}
	bool fits = node_fits_now(p, rq, v, n, model, c);
	*m = (struct node_memo){n + 1,		 p->node_ver[n], c->spare, c->cpu_spare,
				(int16_t)c->dev, (int8_t)model,	 fits};
	return fits;
}

/* Could node n hold a share at all (no scoring)? */
static bool node_can(const struct pass *p, const struct req *rq, const struct view *v, int n,
		     int model)
{
	const struct sched_node *node = &p->snap->nodes[n];
	if (node_ruled_out(p, rq, v, n))
		return false;
	if (!rq->whole && !rq->frac)
		return true;
	int have = 0;
	const int *free = &v->dev[p->dev_off[n]];
	for (int d = 0; d < node->ndev; d++) {
		if (!dev_usable(p, rq, n, d, model))
			continue;
		if (rq->frac ? free[d] >= rq->frac : free[d] == MODEL_MILLI)
			if (++have >= (rq->frac ? 1 : rq->whole))
				return true;
	}
	return false;
}

bool sched__node_can_public(const struct pass *p, const struct req *rq, const struct view *v, int n,
			    int model)
{
	return node_can(p, rq, v, n, model);
}

/* Enough nodes that could each hold a share of rq on the empty cluster
 * (under one model, unless mixing is allowed), counted until there are;
 * where its nodes must lie together (--switches, --spread, --within), a
 * real placement tells. Unschedulable nodes count with p->any_node. */
static bool enough_nodes(struct pass *p, const struct req *rq)
{
	bool ok = false;
	if ((rq->whole || rq->frac) && !rq->j->mixed_types) {
		for (int m = 0; m < p->nmodels && !ok; m++) {
			int cnt = 0;
			for (int k = p->model_nodes_off[m];
			     rq->model_ok[m] && k < p->model_nodes_off[m + 1] && !ok; k++)
				ok = node_can(p, rq, &p->total, p->model_nodes[k], m) &&
				     ++cnt >= rq->j->nodes;
		}
	} else {
		int cnt = 0;
		for (int n = 0; n < p->nn && !ok; n++)
			ok = node_can(p, rq, &p->total, n, -1) && ++cnt >= rq->j->nodes;
	}
	if (ok && sched__grouped(rq->j)) {
		struct placement pl;
		struct place_fail why;
		pl.nodes = xcalloc((size_t)rq->j->nodes, sizeof(*pl.nodes));
		ok = sched__place(p, rq, &p->total, &pl, &why);
		free(pl.nodes);
	}
	return ok;
}

bool sched__could_ever(struct pass *p, const struct req *rq)
{
	/* whole devices and nothing else asked: the nodes' device counts decide */
	if (rq->whole && !rq->cpus && !rq->mem && !rq->j->gpu_mem_mib && rq->j->gpu_tflops <= 0 &&
	    !rq->j->mixed_types && !sched__grouped(rq->j) && !rq->node_ok) {
		if (!p->total_hist) {
			/* schedulable nodes with at least k devices of model m */
			int nm = p->nmodels;
			p->total_hist =
				xcalloc((size_t)nm * (MODEL_MAX_ACCELS + 1) + 1, sizeof(int));
			for (int n = 0; n < p->nn; n++) {
				if (!p->snap->nodes[n].schedulable)
					continue;
				int *cnt = p->model_scratch;
				for (int d = 0; d < p->snap->nodes[n].ndev; d++)
					cnt[p->dev_model[p->dev_off[n] + d]] = 0;
				for (int d = 0; d < p->snap->nodes[n].ndev; d++)
					cnt[p->dev_model[p->dev_off[n] + d]]++;
				for (int d = 0; d < p->snap->nodes[n].ndev; d++) {
					int m = p->dev_model[p->dev_off[n] + d];
					for (int k = 1; k <= cnt[m]; k++)
						p->total_hist[m * (MODEL_MAX_ACCELS + 1) + k]++;
					cnt[m] = 0; /* count each model of the node once */
				}
			}
		}
		for (int m = 0; m < p->nmodels; m++)
			if (rq->model_ok[m] &&
			    p->total_hist[m * (MODEL_MAX_ACCELS + 1) + rq->whole] >= rq->j->nodes)
				return true;
		return false;
	}
	return enough_nodes(p, rq);
}

bool sched__could_ever_anywhere(struct pass *p, const struct req *rq)
{
	p->any_node = true; /* the nodes down or drained too */
	bool ok = enough_nodes(p, rq);
	p->any_node = false;
	return ok;
}

void sched__fit_init(struct pass *p, struct fitcount *fc, const struct req *rq,
		     const struct view *v)
{
	bool devices = rq->whole || rq->frac;
	fc->rq = rq;
	fc->ngroups = devices && !rq->j->mixed_types ? p->nmodels : 1;
	fc->count = xcalloc((size_t)fc->ngroups, sizeof(int));
	fc->fit = sched__keep_zalloc(p->keep, (size_t)p->nn * (size_t)fc->ngroups + 1, 1);
	if (fc->ngroups == p->nmodels && devices) {
		/* only nodes with a model can fit under it */
		for (int m = 0; m < p->nmodels; m++) {
			if (!rq->model_ok[m])
				continue;
			for (int k = p->model_nodes_off[m]; k < p->model_nodes_off[m + 1]; k++) {
				int n = p->model_nodes[k];
				bool ok = node_can(p, rq, v, n, m);
				fc->fit[n * fc->ngroups + m] = ok;
				fc->count[m] += ok;
			}
		}
		return;
	}
	for (int n = 0; n < p->nn; n++)
		sched__fit_update(p, fc, v, n);
}

void sched__fit_update(struct pass *p, struct fitcount *fc, const struct view *v, int n)
{
	const struct req *rq = fc->rq;
	bool devices = rq->whole || rq->frac;
	if (devices && !rq->j->mixed_types && fc->ngroups > 1) {
		/* by model: only the node's own models can hold it; the others'
		 * entries stay false (sched__fit_init never set them) */
		const int *dm = &p->dev_model[p->dev_off[n]];
		int ndev = p->snap->nodes[n].ndev;
		for (int d = 0; d < ndev; d++) {
			int m = dm[d];
			bool seen = false;
			for (int e = 0; e < d && !seen; e++)
				seen = dm[e] == m;
			if (seen)
				continue;
			bool ok = rq->model_ok[m] && node_can(p, rq, v, n, m);
			uint8_t *f = &fc->fit[n * fc->ngroups + m];
			if (ok != *f) {
				fc->count[m] += ok ? 1 : -1;
				*f = ok;
			}
		}
		return;
	}
	for (int g = 0; g < fc->ngroups; g++) {
		int model = devices && !rq->j->mixed_types ? g : -1;
		bool ok = (model < 0 || rq->model_ok[model]) && node_can(p, rq, v, n, model);
		uint8_t *f = &fc->fit[n * fc->ngroups + g];
		if (ok != *f) {
			fc->count[g] += ok ? 1 : -1;
			*f = ok;
		}
	}
}

bool sched__fit_enough(const struct fitcount *fc)
{
	for (int g = 0; g < fc->ngroups; g++)
		if (fc->count[g] >= fc->rq->j->nodes)
			return true;
	return false;
}

void sched__fit_release(struct pass *p, struct fitcount *fc)
{
	free(fc->count);
	sched__keep_release(p->keep, fc->fit);
}

/* Picks `need` free whole devices on node n, preferring one NVLink domain (the
 * one with the fewest free devices that suffices). */
void sched__pick_devices(const struct pass *p, const struct req *rq, const struct view *v, int n,
			 int model, struct sched_assign *a)
{
	const struct sched_node *node = &p->snap->nodes[n];
	const int *free = &v->dev[p->dev_off[n]];
	int need = rq->whole;
	int dom_id[MODEL_MAX_ACCELS], dom_free[MODEL_MAX_ACCELS], ndom = 0;
	for (int d = 0; d < node->ndev; d++) {
		if (free[d] != MODEL_MILLI || !dev_usable(p, rq, n, d, model))
			continue;
		int k;
		for (k = 0; k < ndom; k++)
			if (dom_id[k] == node->devs[d].nvlink_domain)
				break;
		if (k == ndom) {
			dom_id[ndom] = node->devs[d].nvlink_domain;
			dom_free[ndom++] = 0;
		}
		dom_free[k]++;
	}
	int chosen = -1;
	for (int k = 0; k < ndom; k++)
		if (dom_free[k] >= need &&
		    (chosen < 0 || dom_free[k] < dom_free[chosen] ||
		     (dom_free[k] == dom_free[chosen] && dom_id[k] < dom_id[chosen])))
			chosen = k;
	a->ndev = 0;
	for (int d = 0; d < node->ndev && a->ndev < need; d++) {
		if (free[d] != MODEL_MILLI || !dev_usable(p, rq, n, d, model))
			continue;
		if (chosen >= 0 && node->devs[d].nvlink_domain != dom_id[chosen])
			continue;
		a->devs[a->ndev++] = d;
	}
}
