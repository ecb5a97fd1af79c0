/*
 * The capacity index and the candidate lists over `free`: schedulable nodes
 * counted and listed, per model, by their whole free devices and by the room
 * on their roomiest device, and by (accelerators, free CPUs); kept in step
 * node by node (sched__cap_update_node), so that placement reads the few nodes
 * that can hold a request, not every node. Also what a request is, as
 * placement sees it.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- candidate lists: nodes by what they have free, per model ---------------------- */

#define CPU_BUCKETS 256

static void list_del(int *head, int *next, int *prev, int h, int x)
{
	if (prev[x] >= 0)
		next[prev[x]] = next[x];
	else
		head[h] = next[x];
	if (next[x] >= 0)
		prev[next[x]] = prev[x];
	next[x] = prev[x] = -1;
}

static void list_add(int *head, int *next, int *prev, int h, int x)
{
	prev[x] = -1;
	next[x] = head[h];
	if (head[h] >= 0)
		prev[head[h]] = x;
	head[h] = x;
}

static int cpu_key(const struct pass *p, int n)
{
	int c = MIN(MAX(p->free.cpus[n], 0), p->max_cpus);
	return p->snap->nodes[n].ndev * p->cpu_buckets + cpu_bucket(p, c);
}

static void cpu_list_update(struct pass *p, int n)
{
	int k = cpu_key(p, n);
	if (k == p->cpu_key[n])
		return;
	list_del(p->cb_head, p->cb_next, p->cb_prev, p->cpu_key[n], n);
	list_add(p->cb_head, p->cb_next, p->cb_prev, k, n);
	p->cpu_key[n] = k;
}

void sched__cap_update_node(struct pass *p, int n)
{
	const struct sched_node *node = &p->snap->nodes[n];
	p->frag_valid[n] = false;
	p->node_ver[n]++;
	for (int d = 0; d < node->ndev; d++)
		p->model_ver[p->dev_model[p->dev_off[n] + d]]++;
	if (!node->schedulable)
		return;
	cpu_list_update(p, n);
	int nm = p->nmodels;
	int *w = &p->node_whole[n * nm];
	int *fresh = p->model_scratch;
	int *room = p->model_scratch2;
	for (int d = 0; d < node->ndev; d++) {
		fresh[p->dev_model[p->dev_off[n] + d]] = 0;
		room[p->dev_model[p->dev_off[n] + d]] = 0;
	}
	for (int d = 0; d < node->ndev; d++) {
		int m = p->dev_model[p->dev_off[n] + d];
		int f = p->free.dev[p->dev_off[n] + d];
		if (f == MODEL_MILLI)
			fresh[m]++;
		room[m] = MAX(room[m], f);
	}
	for (int d = 0; d < node->ndev; d++) {
		int m = p->dev_model[p->dev_off[n] + d];
		int x = n * nm + m;
		if (fresh[m] != w[m]) {
			p->cap[m * (MODEL_MAX_ACCELS + 1) + w[m]]--;
			p->cap[m * (MODEL_MAX_ACCELS + 1) + fresh[m]]++;
			list_del(p->wb_head, p->wb_next, p->wb_prev,
				 m * (MODEL_MAX_ACCELS + 1) + w[m], x);
			list_add(p->wb_head, p->wb_next, p->wb_prev,
				 m * (MODEL_MAX_ACCELS + 1) + fresh[m], x);
			w[m] = fresh[m];
		}
		int b = FRAC_BUCKET(room[m]);
		if (b != p->node_room[x]) {
			list_del(p->fb_head, p->fb_next, p->fb_prev,
				 m * FRAC_BUCKETS + p->node_room[x], x);
			list_add(p->fb_head, p->fb_next, p->fb_prev, m * FRAC_BUCKETS + b, x);
			p->node_room[x] = b;
		}
	}
}

/* Builds the lists from `free`: every schedulable node under each model it has. */
void sched__lists_init(struct pass *p)
{
	int nm = p->nmodels, nn = p->nn;
	p->max_cpus = 0;
	for (int n = 0; n < nn; n++)
		p->max_cpus = MAX(p->max_cpus, p->snap->nodes[n].cpus_total);
	/* buckets of free CPUs: a node in a lower bucket has fewer free CPUs than
	 * any in a higher one, so the first bucket with a fit holds the best fit */
	p->cpu_buckets = MIN(p->max_cpus + 1, CPU_BUCKETS);
	size_t nkeys = (size_t)(MODEL_MAX_ACCELS + 1) * (size_t)p->cpu_buckets;
	p->cb_head = xmalloc(nkeys * sizeof(int));
	for (size_t i = 0; i < nkeys; i++)
		p->cb_head[i] = -1;
	p->cb_next = sched__keep_alloc(p->keep, sizeof(int) * ((size_t)nn + 1));
	p->cb_prev = sched__keep_alloc(p->keep, sizeof(int) * ((size_t)nn + 1));
	/* set for schedulable nodes */
	p->cpu_key = sched__keep_alloc(p->keep, sizeof(int) * ((size_t)nn + 1));
	for (int n = 0; n < nn; n++) {
		if (!p->snap->nodes[n].schedulable)
			continue;
		p->cpu_key[n] = cpu_key(p, n);
		list_add(p->cb_head, p->cb_next, p->cb_prev, p->cpu_key[n], n);
	}
	size_t cells = (size_t)nn * (size_t)nm + 1;
	p->wb_head = xcalloc((size_t)nm * (MODEL_MAX_ACCELS + 1) + 1, sizeof(int));
	p->fb_head = xcalloc((size_t)nm * FRAC_BUCKETS + 1, sizeof(int));
	for (size_t i = 0; i < (size_t)nm * (MODEL_MAX_ACCELS + 1); i++)
		p->wb_head[i] = -1;
	for (size_t i = 0; i < (size_t)nm * FRAC_BUCKETS; i++)
		p->fb_head[i] = -1;
	/* links are read only for cells in a list, rooms only for a node's own
	 * models: set below for every such cell */
	p->wb_next = sched__keep_alloc(p->keep, sizeof(int) * cells);
	p->wb_prev = sched__keep_alloc(p->keep, sizeof(int) * cells);
	p->fb_next = sched__keep_alloc(p->keep, sizeof(int) * cells);
	p->fb_prev = sched__keep_alloc(p->keep, sizeof(int) * cells);
	p->node_room = sched__keep_alloc(p->keep, sizeof(int) * cells);
	for (int n = 0; n < nn; n++) {
		const struct sched_node *node = &p->snap->nodes[n];
		if (!node->schedulable)
			continue;
		int *w = &p->node_whole[n * nm];
		int *room = p->model_scratch2;
		for (int d = 0; d < node->ndev; d++)
			room[p->dev_model[p->dev_off[n] + d]] = -1;
		for (int d = 0; d < node->ndev; d++) {
			int m = p->dev_model[p->dev_off[n] + d];
			room[m] = MAX(room[m], p->free.dev[p->dev_off[n] + d]);
		}
		for (int d = 0; d < node->ndev; d++) {
			int m = p->dev_model[p->dev_off[n] + d];
			int x = n * nm + m;
			if (room[m] < 0)
				continue; /* listed already */
			list_add(p->wb_head, p->wb_next, p->wb_prev,
				 m * (MODEL_MAX_ACCELS + 1) + w[m], x);
			p->node_room[x] = FRAC_BUCKET(room[m]);
			list_add(p->fb_head, p->fb_next, p->fb_prev,
				 m * FRAC_BUCKETS + p->node_room[x], x);
			room[m] = -1;
		}
	}
}

#ifdef TENK_DEBUG
void assert_place_consistent(const struct pass *p)
{
	const struct sched_snapshot *s = p->snap;
	int nm = p->nmodels, nn = p->nn;
	size_t cells = (size_t)nn * (size_t)nm + 1;
	int *whole = xcalloc(cells, sizeof(int)), *room = xmalloc(sizeof(int) * cells);
	bool *has = xcalloc(cells, sizeof(bool));
	for (size_t x = 0; x < cells; x++)
		room[x] = -1;
	for (int n = 0; n < nn; n++)
		for (int d = 0; d < s->nodes[n].ndev; d++) {
			int x = n * nm + p->dev_model[p->dev_off[n] + d];
			int f = p->free.dev[p->dev_off[n] + d];
			has[x] = true;
			whole[x] += f == MODEL_MILLI;
			room[x] = MAX(room[x], f);
		}
	/* every (schedulable node, model it has) once in a whole-devices list
	 * and once in a room list, where `free` puts it; the index counts them */
	int *in_wb = xcalloc(cells, sizeof(int)), *in_fb = xcalloc(cells, sizeof(int));
	for (int m = 0; m < nm; m++) {
		for (int k = 0; k <= MODEL_MAX_ACCELS; k++) {
			int len = 0;
			for (int x = p->wb_head[m * (MODEL_MAX_ACCELS + 1) + k]; x >= 0;
			     x = p->wb_next[x]) {
				assert(x % nm == m && whole[x] == k && p->node_whole[x] == k);
				in_wb[x]++;
				len++;
			}
			/* the index counts schedulable nodes without the model
			 * among those with no whole device of it */
			int lacking = 0;
			for (int n = 0; n < nn && k == 0; n++)
				lacking += s->nodes[n].schedulable && !has[n * nm + m];
			assert(p->cap[m * (MODEL_MAX_ACCELS + 1) + k] == len + lacking);
		}
		for (int b = 0; b < FRAC_BUCKETS; b++)
			for (int x = p->fb_head[m * FRAC_BUCKETS + b]; x >= 0; x = p->fb_next[x]) {
				assert(x % nm == m && FRAC_BUCKET(room[x]) == b &&
				       p->node_room[x] == b);
				in_fb[x]++;
			}
	}
	for (int n = 0; n < nn; n++)
		for (int m = 0; m < nm; m++) {
			int x = n * nm + m;
			bool listed = s->nodes[n].schedulable && has[x];
			assert(in_wb[x] == listed && in_fb[x] == listed);
		}
	/* every schedulable node once in the CPU lists, under its own key */
	int *in_cb = xcalloc((size_t)nn + 1, sizeof(int));
	size_t nkeys = (size_t)(MODEL_MAX_ACCELS + 1) * (size_t)p->cpu_buckets;
	for (size_t key = 0; key < nkeys; key++)
		for (int n = p->cb_head[key]; n >= 0; n = p->cb_next[n]) {
			assert(p->cpu_key[n] == (int)key && cpu_key(p, n) == (int)key);
			in_cb[n]++;
		}
	for (int n = 0; n < nn; n++)
		assert(in_cb[n] == (s->nodes[n].schedulable ? 1 : 0));
	free(in_cb);
	free(in_wb);
	free(in_fb);
	free(has);
	free(whole);
	free(room);
}
#endif

bool sched__room_for_fraction(const struct pass *p, int m, int milli)
{
	/* bucket b holds the nodes whose roomiest device of m has b * 50 to
	 * b * 50 + 49 free: whole buckets above milli, the one with it checked */
	for (int b = FRAC_BUCKETS - 1; b >= 0 && b * 50 + 49 >= milli; b--)
		for (int x = p->fb_head[m * FRAC_BUCKETS + b]; x >= 0; x = p->fb_next[x]) {
			if (b * 50 >= milli)
				return true;
			int n = x / p->nmodels;
			for (int d = 0; d < p->snap->nodes[n].ndev; d++)
				if (p->dev_model[p->dev_off[n] + d] == m &&
				    p->free.dev[p->dev_off[n] + d] >= milli)
					return true;
		}
	return false;
}

bool sched__cap_maybe_fits(struct pass *p, const struct req *rq)
{
	if (!rq->whole)
		return true;
	int need = rq->whole, have = 0;
	for (int m = 0; m < p->nmodels; m++) {
		if (!rq->model_ok[m])
			continue;
		int cnt = 0;
		for (int k = need; k <= MODEL_MAX_ACCELS; k++)
			cnt += p->cap[m * (MODEL_MAX_ACCELS + 1) + k];
		if (rq->j->mixed_types)
			have += cnt; /* optimistic: mixing may combine models on a node */
		else
			have = MAX(have, cnt);
	}
	if (rq->j->mixed_types)
		return true; /* a node may hold a share only across models: do not guess */
	return have >= rq->j->nodes;
}

static const bool *node_filter(struct pass *p, const struct sched_job *j, bool *ok);

bool sched__any_taint(struct pass *p)
{
	if (p->any_taint < 0) {
		p->any_taint = 0;
		for (int n = 0; n < p->nn && !p->any_taint; n++)
			p->any_taint = p->snap->nodes[n].taints && p->snap->nodes[n].taints[0];
	}
	return p->any_taint;
}

void sched__req_init(struct pass *p, const struct sched_job *j, struct req *rq, bool *model_ok)
{
	memset(rq, 0, sizeof(*rq));
	rq->j = j;
	rq->cpus = j->tasks_per_node * j->cpus_per_task;
	rq->mem = j->mem_mib;
	if (j->gpu_milli >= MODEL_MILLI)
		rq->whole = j->tasks_per_node * (j->gpu_milli / MODEL_MILLI);
	else if (j->gpu_milli > 0)
		rq->frac = j->gpu_milli;
	bool filtered = j->nnodelist > 0 || j->nexclude > 0 || j->constraint || j->pools ||
			sched__any_taint(p);
	if (model_ok) {
		rq->model_ok = model_ok; /* computed before for the same shape */
		rq->node_ok = filtered ? model_ok + p->nmodels + 1 : NULL;
		return;
	}
	rq->model_ok =
		xcalloc((size_t)p->nmodels + 1 + (filtered ? (size_t)p->nn : 0), sizeof(bool));
	rq->owns_models = true;
	for (int m = 0; m < p->nmodels; m++) {
		bool ok = j->ngpu_types == 0;
		for (int t = 0; t < j->ngpu_types; t++)
			if (strcasecmp(j->gpu_types[t], p->models[m]) == 0)
				ok = true;
		rq->model_ok[m] = ok;
	}
	if (filtered)
		rq->node_ok = node_filter(p, j, rq->model_ok + p->nmodels + 1);
}

/* The node of that name, by the nodes' name order; -1: none. */
static int node_by_name(const struct pass *p, const int *byname, const char *name)
{
	int lo = 0, hi = p->nn - 1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		int c = strcmp(p->snap->nodes[byname[mid]].name, name);
		if (c == 0)
			return byname[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/* The nodes whose labels satisfy expr (pools NULL), or that are in one of
 * *pools, worked out once a pass. */
static const bool *nodes_meeting(struct pass *p, const char *expr, const uint64_t *pools)
{
	char mask[24];
	if (pools) { /* '#' is in no constraint */
		snprintf(mask, sizeof(mask), "#%016llx", (unsigned long long)*pools);
		expr = mask;
	}
	if (!p->cons_used) {
		tk_map_init(&p->cons);
		p->cons_used = true;
	}
	/* a constraint's verdicts outlive the pass in the caller's cluster */
	struct tk_map *m = &p->cons;
	int *count = NULL;
	if (!pools && p->borrowed)
		m = sched__cluster_cons(p->snap->cluster, &count);
	bool *ok = tk_map_get(m, expr);
	if (ok)
		return ok + sizeof(size_t);
	/* the key lives in the same block, after the verdicts */
	size_t len = strlen(expr);
	ok = xmalloc(sizeof(size_t) + (size_t)p->nn + len + 1);
	memcpy(ok, &len, sizeof(len));
	bool *v = ok + sizeof(size_t);
	for (int n = 0; n < p->nn; n++)
		v[n] = pools ? sched_pools_meet(&p->snap->nodes[n], *pools)
			     : job_constraint_match(expr, p->snap->nodes[n].labels);
	char *key = (char *)(v + p->nn);
	memcpy(key, expr, len + 1);
	if (count && ++*count > 4096) { /* a bound on what it keeps */
		sched__cons_clear(m);
		*count = 1;
	}
	tk_map_put(m, key, ok);
	return v;
}

void sched__cons_clear(struct tk_map *m)
{
	size_t pos = 0;
	const char *k;
	void *v;
	while (tk_map_next(m, &pos, &k, &v))
		free(v);
	tk_map_release(m);
	tk_map_init(m);
}

void sched__constraints_release(struct pass *p)
{
	if (!p->cons_used)
		return;
	sched__cons_clear(&p->cons);
	tk_map_release(&p->cons);
	p->cons_used = false;
}

/* Fills ok (one per node) from j's node list and exclusions. */
static const bool *node_filter(struct pass *p, const struct sched_job *j, bool *ok)
{
	/* its pools and constraint, as the pass worked them out once */
	const bool *meets = j->constraint ? nodes_meeting(p, j->constraint, NULL) : NULL;
	const bool *in = j->pools ? nodes_meeting(p, NULL, &j->pools) : NULL;
	if (meets && in)
		for (int n = 0; n < p->nn; n++)
			ok[n] = meets[n] & in[n];
	else if (meets || in)
		memcpy(ok, meets ? meets : in, (size_t)p->nn);
	else
		memset(ok, 1, (size_t)p->nn);
	if (j->nnodelist || j->nexclude) {
		int *byname = xmalloc(sizeof(int) * ((size_t)p->nn + 1));
		for (int n = 0; n < p->nn; n++)
			byname[p->name_rank[n]] = n;
		if (j->nnodelist) { /* only these */
			bool *listed = xcalloc((size_t)p->nn + 1, sizeof(bool));
			for (int i = 0; i < j->nnodelist; i++) {
				int n = node_by_name(p, byname, j->nodelist[i]);
				if (n >= 0)
					listed[n] = true;
			}
			for (int n = 0; n < p->nn; n++)
				ok[n] = ok[n] & listed[n];
			free(listed);
		}
		for (int i = 0; i < j->nexclude; i++) {
			int n = node_by_name(p, byname, j->exclude[i]);
			if (n >= 0)
				ok[n] = false;
		}
		free(byname);
	}
	for (int n = 0; sched__any_taint(p) && n < p->nn; n++) /* a taint repels */
		ok[n] = ok[n] && node_taints_tolerated(p->snap->nodes[n].taints, j->tolerate);
	return ok;
}

void sched__req_release(struct req *rq)
{
	if (rq->owns_models)
		free(rq->model_ok);
	rq->model_ok = NULL;
	rq->node_ok = NULL;
}
