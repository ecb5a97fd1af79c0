/*
 * Preemption: which running jobs a waiting job may stop (lower classes'
 * preemptible jobs, or what queues over their quota borrowed), whether
 * stopping them could make room at all (counted before any search), and
 * the cheapest set whose end lets the whole gang start.
 */
#include "pass.h"

#include <stdlib.h>
#include <string.h>

/* A stable bottom-up merge sort with the comparison inlined: qsort's call
 * per comparison was a tenth of an incremental pass when the pass sorted
 * every running job. LESS(x, y) takes pointers; ctx is passed through to
 * it. Its buffer comes from the pass's keep. */
#define DEFINE_SORT(name, T, LESS)                                                                 \
	static void name(T *a, size_t n, const void *ctx, struct sched_keep *keep)                 \
	{                                                                                          \
		(void)ctx;                                                                         \
		if (n < 2)                                                                         \
			return;                                                                    \
		T *tmp = sched__keep_alloc(keep, sizeof(T) * n), *src = a, *dst = tmp;             \
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
		sched__keep_release(keep, tmp);                                                    \
	}

struct victim {
	int idx;
	int prio;
	int64_t lost;
	int64_t milli;
	int64_t id; /* the running job's (read here, not from the job, to sort) */
	bool chosen;
	uint32_t models; /* its nodes' models (model_bit()) */
	uint64_t pools;	 /* its nodes' pools (MODEL_POOL_NONE for those in none) */
};

static inline bool victim_less(const struct victim *x, const struct victim *y,
			       const struct sched_snapshot *s)
{
	(void)s;
	if (x->prio != y->prio)
		return x->prio < y->prio;
	if (x->lost != y->lost)
		return x->lost < y->lost;
	if (x->milli != y->milli)
		return x->milli < y->milli;
	return x->id < y->id;
}

#define VICTIM_LESS(x, y) victim_less((x), (y), (const struct sched_snapshot *)ctx)
DEFINE_SORT(sort_victims, struct victim, VICTIM_LESS)

/* Releases (sign +1) or takes back (-1) victim k's resources on node n only. */
static void apply_on_node(struct pass *p, const struct sched_running *r, int n, int sign)
{
	for (int x = 0; x < r->nnodes; x++)
		if (r->nodes[x].node == n)
			sched__scratch_apply(p, &r->nodes[x], 1, sign);
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

/* the k cheapest node costs to the front (cmp_node_cost is a total order) */
DEFINE_SELECT(select_cheapest, struct node_cost, cmp_node_cost)

/* For each node that has `model` (among `only` when given), the cheapest
 * victims there whose end lets it hold one node's share of rq; fills out,
 * returns how many nodes could. */
static int node_costs(struct st *st, const struct req *rq, const struct victim *v, const int *head,
		      const int *link_v, const int *link_next, int model, const int *only,
		      int nonly, struct node_cost *out)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	int cnt = 0;
	int from = only ? 0 : model >= 0 ? p->model_nodes_off[model] : 0;
	int to = only ? nonly : model >= 0 ? p->model_nodes_off[model + 1] : p->nn;
	for (int xi = from; xi < to; xi++) {
		int n = only ? only[xi] : model >= 0 ? p->model_nodes[xi] : xi;
		/* (a node without the model: no victims there could make room) */
		if ((only && model >= 0 && !(st->node_models[n] & model_bit(model))) ||
		    !s->nodes[n].schedulable)
			continue;
		int k = 0;
		int64_t cost = 0;
		bool can = sched__node_can_public(p, rq, &p->scratch, n, model);
		for (int l = head[n]; l >= 0 && !can; l = link_next[l]) {
			apply_on_node(p, &s->running[v[link_v[l]].idx], n, +1);
			k++;
			cost = link_v[l] + 1;
			can = sched__node_can_public(p, rq, &p->scratch, n, model);
		}
		for (int l = head[n], x = 0; x < k; l = link_next[l], x++)
			apply_on_node(p, &s->running[v[link_v[l]].idx], n, -1);
		if (can)
			out[cnt++] = (struct node_cost){n, cost, k};
	}
	return cnt;
}

/* Does a search try the models one by one (devices, all of one model), or
 * all nodes as one group (-1)? */
static bool by_model(const struct req *rq)
{
	return (rq->whole || rq->frac) && !rq->j->mixed_types;
}

static int model_groups(const struct pass *p, const struct req *rq)
{
	return by_model(rq) ? p->nmodels : 1;
}

static int group_model(const struct req *rq, int g)
{
	return by_model(rq) ? g : -1;
}

/* The models rq accepts, as bits (model_bit()); 0 when it searches all
 * nodes as one group. */
static uint32_t wanted_models(const struct pass *p, const struct req *rq)
{
	uint32_t bits = 0;
	if (!by_model(rq))
		return 0;
	for (int m = 0; m < p->nmodels; m++)
		if (rq->model_ok[m])
			bits |= model_bit(m);
	return bits;
}

/* Could node n serve a request that wants `models` (wanted_models()) at
 * all? The bits tell, unless models past the 31st share one. */
static bool node_matters(const struct st *st, const struct req *rq, uint32_t models, int n)
{
	const struct pass *p = &st->p;
	if (rq->node_ok && !rq->node_ok[n]) /* not a node it may use */
		return false;
	if (!models)
		return true;
	if (!(st->node_models[n] & models))
		return false;
	if (p->nmodels <= 31)
		return true;
	for (int d = 0; d < p->snap->nodes[n].ndev; d++)
		if (rq->model_ok[p->dev_model[p->dev_off[n] + d]])
			return true;
	return false;
}

/* The victims a job may stop, cheapest first, taken from the pass's victim
 * order as a search asks for them: most searches stop after a few. */
struct feed {
	struct victim *v; /* the ones taken so far: v[0 .. n) */
	int n;
	int o;		 /* where the next lies in st->victim_order */
	uint32_t models; /* the models the search wants (0: any) */
	uint64_t pools;	 /* the pools the job may use (0: any) */
	const struct sched_class *jc;
	int queue;
	bool reclaim, by_class;
};

/* How far ahead in the victim order a search asks for what it will read. */
#define VICTIM_AHEAD 8

/* Adds the next victim the job may stop to f; false when none is left. */
static bool feed_more(struct st *st, struct feed *f)
{
	const struct sched_snapshot *s = st->p.snap;
	while (f->o < st->nvictims) {
		/* the jobs lie wherever the caller keeps them: ask for the ones
		 * the search will read a little ahead, and for their nodes */
		for (int a = 1; a <= 2; a++) {
			int o = f->o + a * VICTIM_AHEAD;
			if (o >= st->nvictims)
				break;
			const struct victim *y = &st->victim_order[o];
			if (f->models && !(y->models & f->models))
				continue;
			if (a == 2)
				__builtin_prefetch(&s->running[y->idx]);
			else
				__builtin_prefetch(s->running[y->idx].nodes);
		}
		const struct victim *x = &st->victim_order[f->o++];
		/* none of its nodes has a model the search wants, or is in a pool
		 * the job may use: stopping it could not help (read from the
		 * order, not from the job) */
		if ((f->models && !(x->models & f->models)) || (f->pools && !(x->pools & f->pools)))
			continue;
		const struct sched_running *r = &s->running[x->idx];
		if (st->victim[x->idx])
			continue; /* (the order holds no job stopping or held for another) */
		const struct sched_queue *q = &s->queues[r->queue];
		bool by_class = f->by_class && may_stop(st, f->jc, &s->classes[r->cls], r);
		bool by_reclaim =
			f->reclaim && r->queue != f->queue && q->quota_milli >= 0 &&
			st->qs[r->queue].use - st->qs[r->queue].reclaiming > q->quota_milli;
		if (by_class || by_reclaim) {
			f->v[f->n++] = *x;
			return true;
		}
	}
	return false;
}

/* Node n can hold a share of the search's request under group g (of ng)
 * without a victim: marked, counted, listed (once); the list's new length. */
static int count_fit(struct st *st, int n, int g, int ng, int *list, int nlist)
{
	st->vfit[(size_t)n * (size_t)ng + (size_t)g] = 1;
	st->vcnt[g]++;
	if (st->vseen[n] != st->vgen) {
		st->vseen[n] = st->vgen;
		list[nlist++] = n;
	}
	return nlist;
}

/* count_fit() for every node that can hold a share of rq (whole devices or
 * a fraction) under `model` in scratch without a victim. Scratch is `free`
 * but on the nodes touched since it was copied: those are judged on their
 * own, the others come from free's lists (a node that can hold a share is
 * in a list from the request's bucket up), as placement gathers them. */
static int fit_without_victims(struct st *st, const struct req *rq, int model, int g, int ng,
			       int *list, int nlist)
{
	struct pass *p = &st->p;
	int nm = p->nmodels;
	for (int t = 0; t < p->ntouched; t++) {
		int n = p->touched[t];
		if ((st->node_models[n] & model_bit(model)) &&
		    sched__node_can_public(p, rq, &p->scratch, n, model))
			nlist = count_fit(st, n, g, ng, list, nlist);
	}
	const int *head = rq->frac ? &p->fb_head[model * FRAC_BUCKETS]
				   : &p->wb_head[model * (MODEL_MAX_ACCELS + 1)];
	const int *next = rq->frac ? p->fb_next : p->wb_next;
	int from = rq->frac ? FRAC_BUCKET(rq->frac) : rq->whole;
	int to = rq->frac ? FRAC_BUCKETS : MODEL_MAX_ACCELS + 1;
	for (int b = from; b < to; b++)
		for (int x = head[b]; x >= 0; x = next[x]) {
			int n = x / nm;
			if (p->touch_mark[n] != p->touch_gen &&
			    sched__node_can_public(p, rq, &p->scratch, n, model))
				nlist = count_fit(st, n, g, ng, list, nlist);
		}
	return nlist;
}

/*
 * How many of the victims (cheapest first) a search needs to look at: v is released
 * in order, each victim on its own nodes, until `need` nodes of one model
 * group could hold a share (counting, for a gang, those that can without
 * any). A node's cost is that of its dearest victim needed, so the cheapest
 * set lies in that prefix: the search need not build every node's costs
 * from every victim (at a hundred thousand running jobs, most of a pass).
 * Returns the prefix's length (taken from the feed as needed), 0 when no
 * victim is needed, -1 when all of them would not do; lists in st->vnodes
 * the nodes where the prefix costs something or nothing is needed (the only
 * ones the cheapest set can use) and leaves scratch as it was. Victims are
 * released only where a model the request accepts is.
 */
static int victims_needed(struct st *st, const struct req *rq, struct feed *fd, int *nnodes)
{
	const struct victim *v = fd->v;
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	int ng = model_groups(p, rq), need = rq->j->nodes;
	if (!st->vfit) {
		st->vfit = sched__keep_zalloc(p->keep, (size_t)p->nn * (size_t)(p->nmodels + 1) + 1,
					      1);
		st->vseen = sched__keep_zalloc(p->keep, (size_t)p->nn + 1, sizeof(int));
		st->vnodes = sched__keep_alloc(p->keep, sizeof(int) * ((size_t)p->nn + 1));
		st->vcnt = sched__keep_alloc(p->keep, sizeof(int) * ((size_t)p->nmodels + 1));
	}
	int *cnt = st->vcnt, *list = st->vnodes, nlist = 0;
	st->vgen++;
	for (int g = 0; g < ng; g++) {
		cnt[g] = 0;
		int model = group_model(rq, g);
		if (model >= 0 && !rq->model_ok[model])
			continue;
		if (need == 1)
			continue;
		/* a gang may use nodes that need no victim */
		if (model >= 0 && p->delta) {
			nlist = fit_without_victims(st, rq, model, g, ng, list, nlist);
			continue;
		}
		int from = model >= 0 ? p->model_nodes_off[model] : 0;
		int to = model >= 0 ? p->model_nodes_off[model + 1] : p->nn;
		for (int xi = from; xi < to; xi++) {
			int n = model >= 0 ? p->model_nodes[xi] : xi;
			if (s->nodes[n].schedulable &&
			    sched__node_can_public(p, rq, &p->scratch, n, model))
				nlist = count_fit(st, n, g, ng, list, nlist);
		}
	}
	int found = -1;
	for (int g = 0; g < ng && found < 0; g++)
		if (need > 1 && cnt[g] >= need)
			found = 0;
	int i = 0;
	for (; found < 0 && (i < fd->n || feed_more(st, fd)); i++) {
		const struct sched_running *r = &s->running[v[i].idx];
		for (int x = 0; x < r->nnodes; x++) {
			int n = r->nodes[x].node;
			if (!node_matters(st, rq, fd->models, n))
				continue; /* none of its devices would do */
			sched__view_apply(p, &p->scratch, &r->nodes[x], 1, +1);
			sched__scratch_touch(p, n);
			if (st->vseen[n] != st->vgen) {
				st->vseen[n] = st->vgen;
				list[nlist++] = n;
			}
			if (!s->nodes[n].schedulable)
				continue;
			for (int g = 0; g < ng; g++) {
				int model = group_model(rq, g);
				unsigned char *f = &st->vfit[(size_t)n * (size_t)ng + (size_t)g];
				/* (a model the node lacks: no share of the request there) */
				if (*f ||
				    (model >= 0 && (!rq->model_ok[model] ||
						    !(st->node_models[n] & model_bit(model)))) ||
				    !sched__node_can_public(p, rq, &p->scratch, n, model))
					continue;
				*f = 1;
				if (++cnt[g] >= need)
					found = i + 1;
			}
		}
	}
	while (i-- > 0) {
		const struct sched_running *r = &s->running[v[i].idx];
		for (int x = 0; x < r->nnodes; x++)
			if (node_matters(st, rq, fd->models, r->nodes[x].node))
				sched__view_apply(p, &p->scratch, &r->nodes[x], 1, -1);
	}
	for (int k = 0; k < nlist; k++)
		memset(&st->vfit[(size_t)list[k] * (size_t)ng], 0, (size_t)ng);
	*nnodes = nlist;
	return found;
}

/*
 * Chooses victims among v (sorted cheapest first) so that rq fits in
 * p->scratch. For each node, the cheapest victims there that make it able to
 * hold one node's share; then the cheapest nodes; their victims are released
 * and the gang placed for real. Returns the number chosen (marked in v), with
 * the placement in st->pl and scratch holding the released state; 0 if no
 * set makes room.
 */
/* (Kept out of line: inlined into its one caller it cost the full pass of
 * bench_sched 1.4M more instructions, counted by callgrind.) */
static __attribute__((noinline)) int pick_victims(struct st *st, const struct req *rq,
						  struct victim *v, int nv, const int *only,
						  int nonly)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	int nn = p->nn;
	struct pick_bufs *b = &st->pick;
	if (!b->head) {
		/* kept for the pass's searches: head stays -1 between them */
		b->head = sched__keep_alloc(p->keep, sizeof(int) * ((size_t)nn + 1));
		for (int n = 0; n < nn; n++)
			b->head[n] = -1;
		b->tail = sched__keep_alloc(p->keep, sizeof(int) * ((size_t)nn + 1));
		b->nc = sched__keep_alloc(p->keep, sizeof(struct node_cost) * ((size_t)nn + 1));
		b->tmp = sched__keep_alloc(p->keep, sizeof(struct node_cost) * ((size_t)nn + 1));
	}
	/* the victims on each node, cheapest first */
	int *head = b->head, *tail = b->tail, nlinks = 0;
	int total = 0;
	for (int i = 0; i < nv; i++)
		total += s->running[v[i].idx].nnodes;
	xgrow(&b->link_v, &b->link_alloc, (size_t)total + 1, sizeof(int));
	b->link_next = xrealloc(b->link_next, sizeof(int) * b->link_alloc);
	int *link_v = b->link_v, *link_next = b->link_next;
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
	int ngroups = model_groups(p, rq);
	/* node_costs() writes every entry it counts: no need to clear them */
	struct node_cost *nc = b->nc, *tmp = b->tmp;
	int best_group = -1, cnt = 0;
	int64_t best_total = 0;
	int need = rq->j->nodes, chosen = 0;
	for (int g = 0; g < ngroups; g++) {
		int model = group_model(rq, g);
		if (model >= 0 && !rq->model_ok[model])
			continue;
		int c = node_costs(st, rq, v, head, link_v, link_next, model, only, nonly, tmp);
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
				sched__scratch_apply(p, r->nodes, r->nnodes, +1);
			}
			if (i + 1 < need)
				continue;
			struct place_fail why;
			st->d->placements_tried++;
			if (sched__place(p, rq, &p->scratch, &st->pl, &why))
				goto found;
		}
	}
	/* nothing worked: scratch as it was, for a search over more victims */
	for (int i = 0; i < nv; i++) {
		if (v[i].chosen) {
			const struct sched_running *r = &s->running[v[i].idx];
			sched__scratch_apply(p, r->nodes, r->nnodes, -1);
		}
		v[i].chosen = false;
	}
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
			sched__scratch_apply(p, r->nodes, r->nnodes, -1);
		}
	}
	struct place_fail why2;
	st->d->placements_tried++;
	if (!sched__place(p, rq, &p->scratch, &st->pl, &why2))
		abort(); /* every node of the placement kept what made it fit */
done:
	for (int i = 0; i < nv; i++) {
		const struct sched_running *r = &s->running[v[i].idx];
		for (int x = 0; x < r->nnodes; x++)
			head[r->nodes[x].node] = -1;
	}
	return chosen;
}

void sched__pick_release(struct pass *p, struct pick_bufs *b)
{
	sched__keep_release(p->keep, b->head);
	sched__keep_release(p->keep, b->tail);
	free(b->link_v);
	free(b->link_next);
	sched__keep_release(p->keep, b->nc);
	sched__keep_release(p->keep, b->tmp);
}

void sched__relset_release(struct pass *p, struct relset *rs)
{
	sched__keep_release(p->keep, rs->r);
	sched__keep_release(p->keep, rs->cells);
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
		rs->r = sched__keep_alloc(p->keep, sizeof(int) * cells);
		rs->cells = sched__keep_alloc(p->keep, sizeof(int) * cells);
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
		if (run->stopping || run->held_for || st->victim[i] ||
		    !may_stop(st, &s->classes[c], rc, run))
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
	if (rs->r && stamp_valid(&rs->valid_for, st->qversion))
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
	stamp_set(&rs->valid_for, st->qversion);
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
		if (cnt[m] >= rq->j->nodes ||
		    (rq->frac && sched__room_for_fraction(p, m, rq->frac)))
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
bool sched__preempt_possible(struct st *st, const struct req *rq, bool by_class, bool by_reclaim)
{
	if ((!rq->whole && !rq->frac) || rq->j->mixed_types)
		return true;
	return enough_releasable(st, rq, by_class ? releasable(st, rq->j->cls) : NULL,
				 by_reclaim ? reclaimable(st) : NULL);
}

bool sched__try_preempt(struct st *st, int ji, const struct req *rq, bool reclaim, bool by_class_ok)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	const struct sched_job *j = rq->j;
	const struct sched_class *jc = &s->classes[j->cls];
	if (!st->victim_buf)
		st->victim_buf = sched__keep_alloc(p->keep, sizeof(struct victim) *
								    ((size_t)s->nrunning + 1));
	struct victim *v = st->victim_buf;
	if (!st->victim_sorted) {
		/* everyone in victim order, once per pass; each attempt filters */
		st->node_models = sched__keep_zalloc(p->keep, (size_t)p->nn + 1, sizeof(uint32_t));
		for (int n = 0; n < p->nn; n++)
			for (int d = 0; d < s->nodes[n].ndev; d++)
				st->node_models[n] |= model_bit(p->dev_model[p->dev_off[n] + d]);
		/* only jobs some class may stop, or whose queue has a quota to
		 * reclaim beyond, can ever be a victim in this pass */
		bool taken[MODEL_MAX_CLASSES] = {false};
		for (int c = 0; c < s->nclasses; c++)
			for (int w = 0; w < s->nclasses; w++)
				taken[w] |= class_takes(&s->classes[c], &s->classes[w]);
		st->victim_order =
			sched__keep_zalloc(p->keep, (size_t)s->nrunning + 1, sizeof(struct victim));
		st->nvictims = 0;
		for (int i = 0; i < s->nrunning; i++) {
			const struct sched_running *r = &s->running[i];
			if (r->stopping || r->held_for ||
			    (!taken[r->cls] && s->queues[r->queue].quota_milli < 0))
				continue;
			int64_t since = MAX(r->start_ms, r->last_checkpoint_ms);
			uint32_t models = 0;
			uint64_t pools = 0;
			for (int x = 0; x < r->nnodes; x++) {
				const struct sched_node *nd = &s->nodes[r->nodes[x].node];
				models |= st->node_models[r->nodes[x].node];
				pools |= nd->pools ? nd->pools : MODEL_POOL_NONE;
			}
			st->victim_order[st->nvictims++] = (struct victim){i,
									   prio(st, r->cls),
									   MAX(0, p->now - since),
									   running_milli(r),
									   r->id,
									   false,
									   models,
									   pools};
		}
		sort_victims(st->victim_order, (size_t)st->nvictims, s, p->keep);
		st->victim_sorted = true;
	}
	struct feed f = {v,  0,	       0,	wanted_models(p, rq), j->pools,
			 jc, j->queue, reclaim, by_class_ok};
	bool ok = false;
	if (!feed_more(st, &f))
		goto out;
	/* resources held for others stay theirs */
	int nsaved, first;
	struct saved *sv = sched__block(st, j, &nsaved, &first);
	sched__scratch_from_free(p);
	for (int i = 0; i < nsaved; i++)
		sched__scratch_touch(
			p, sched__saved_node(sv, i)); /* differs from free once unblocked */
	sched__unblock(st, sv, nsaved);
	/* the cheapest set from the victims it needs at most, on the nodes
	 * they could free (and, for a gang, those that need none: a single node
	 * that needs none would have taken the job without preempting); from
	 * all of them on every node when that fails */
	int nnodes, np = victims_needed(st, rq, &f, &nnodes);
	int nsel = 0;
	if (np > 0)
		nsel = pick_victims(st, rq, v, np, st->vnodes, nnodes);
	if (np == 0 || (np > 0 && nsel == 0)) {
		while (feed_more(st, &f))
			;
		if (np == 0 || np < f.n)
			nsel = pick_victims(st, rq, v, f.n, NULL, 0);
	}
	if (nsel == 0)
		goto out; /* even all of them would not make room: preempt nothing */
	for (int i = 0; i < f.n; i++) {
		if (!v[i].chosen)
			continue;
		const struct sched_running *r = &s->running[v[i].idx];
		st->victim[v[i].idx] = true;
		st->qs[r->queue].reclaiming += v[i].milli;
		st->qversion++;
		for (int c = 0; c < s->nclasses; c++)
			if (class_takes(&s->classes[c], &s->classes[r->cls])) {
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
	sched__add_hold(st, &st->pl);
	ok = true;
out:
	return ok;
}

bool sched__any_lending(struct st *st, int except)
{
	const struct sched_snapshot *s = st->p.snap;
	/* worked out again only when a queue's use or what it lends changed */
	if (!st->lends || !stamp_valid(&st->lend_version, st->qversion)) {
		if (!st->lends)
			st->lends =
				sched__keep_zalloc(st->p.keep, (size_t)s->nqueues, sizeof(bool));
		st->nlending = 0;
		for (int q = 0; q < s->nqueues; q++) {
			st->lends[q] =
				s->queues[q].quota_milli >= 0 &&
				st->qs[q].use - st->qs[q].reclaiming > s->queues[q].quota_milli;
			st->nlending += st->lends[q];
		}
		stamp_set(&st->lend_version, st->qversion);
	}
	return st->nlending - (st->lends[except] ? 1 : 0) > 0;
}
