/*
 * Placement: where one job goes, given what is free in a view.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int model_index(const struct pass *p, const char *name)
{
	int lo = 0, hi = p->nmodels - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		int c = strcmp(p->models[mid], name);
		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/* ---- topology -------------------------------------------------------------------- */

/* Splits every node's path into levels and numbers the distinct prefixes at
 * each level, in order of node names, so ids do not depend on node order. */
static void topo_init(struct pass *p)
{
	const struct sched_snapshot *s = p->snap;
	int nn = p->nn;
	int depth = 1;
	for (int n = 0; n < nn; n++) {
		const char *t = s->nodes[n].topology;
		int d = 1;
		for (; t && *t; t++)
			if (*t == '/')
				d++;
		depth = MAX(depth, d);
	}
	p->depth = depth;
	p->topo_group = xcalloc((size_t)depth * (size_t)nn + 1, sizeof(int));
	p->ngroups = xcalloc((size_t)depth, sizeof(int));
	/* nodes by name */
	int *byname = p->order;
	for (int n = 0; n < nn; n++)
		byname[n] = n;
	/* insertion of names into a sorted order: qsort on pointers to names */
	const char **names = xcalloc((size_t)nn + 1, sizeof(char *));
	for (int n = 0; n < nn; n++)
		names[n] = s->nodes[n].name;
	qsort(names, (size_t)nn, sizeof(char *), cmp_str);
	struct tk_map byn;
	tk_map_init(&byn);
	for (int n = 0; n < nn; n++)
		tk_map_put(&byn, s->nodes[n].name, (void *)&s->nodes[n]);
	for (int k = 0; k < nn; k++) {
		const struct sched_node *node = tk_map_get(&byn, names[k]);
		byname[k] = (int)(node - s->nodes);
		p->name_rank[byname[k]] = k;
	}
	tk_map_release(&byn);
	free(names);
	struct strbuf sb;
	strbuf_init(&sb);
	for (int level = 0; level < depth; level++) {
		struct tk_map ids;
		tk_map_init(&ids);
		char **keys = xcalloc((size_t)nn + 1, sizeof(char *));
		int nkeys = 0;
		for (int k = 0; k < nn; k++) {
			int n = byname[k];
			const char *t = s->nodes[n].topology ? s->nodes[n].topology : "";
			/* the prefix of level+1 components (or all there are) */
			int comps = 0;
			const char *end = t;
			while (*end) {
				if (*end == '/' && ++comps == level + 1)
					break;
				end++;
			}
			strbuf_reset(&sb);
			strbuf_add(&sb, t, (size_t)(end - t));
			void *v = tk_map_get(&ids, sb.buf);
			int id;
			if (v) {
				id = (int)(intptr_t)v - 1;
			} else {
				id = nkeys;
				keys[nkeys++] = xstrdup(sb.buf);
				tk_map_put(&ids, keys[id], (void *)(intptr_t)(id + 1));
			}
			p->topo_group[level * nn + n] = id;
		}
		p->ngroups[level] = nkeys;
		for (int i = 0; i < nkeys; i++)
			free(keys[i]);
		free(keys);
		tk_map_release(&ids);
	}
	strbuf_release(&sb);
}

int sched_switches_spanned(const struct sched_node *nodes, const int *idx, int n)
{
	if (n <= 0)
		return 0;
	/* the longest common prefix, in components */
	const char *first = nodes[idx[0]].topology ? nodes[idx[0]].topology : "";
	size_t lcp = strlen(first);
	for (int i = 1; i < n; i++) {
		const char *t = nodes[idx[i]].topology ? nodes[idx[i]].topology : "";
		size_t k = 0;
		while (k < lcp && t[k] && t[k] == first[k])
			k++;
		lcp = k;
	}
	/* cut back to a whole component */
	bool all_same = true;
	for (int i = 0; i < n; i++) {
		const char *t = nodes[idx[i]].topology ? nodes[idx[i]].topology : "";
		if (strlen(t) != lcp || strncmp(t, first, lcp) != 0)
			all_same = false;
	}
	if (all_same)
		return 1;
	while (lcp > 0 && first[lcp] != '/')
		lcp--;
	/* every distinct prefix below the common one is a switch, plus the common one */
	struct tk_map seen;
	tk_map_init(&seen);
	char **owned = xcalloc((size_t)n * 8 + 1, sizeof(char *));
	size_t nowned = 0, cap = (size_t)n * 8;
	int count = 0;
	for (int i = 0; i < n; i++) {
		const char *t = nodes[idx[i]].topology ? nodes[idx[i]].topology : "";
		for (size_t k = lcp + 1; k <= strlen(t); k++) {
			if (t[k] != '/' && t[k] != '\0')
				continue;
			char *pre = xstrndup(t, k);
			if (tk_map_get(&seen, pre)) {
				free(pre);
				continue;
			}
			if (nowned == cap) {
				cap *= 2;
				owned = xrealloc(owned, cap * sizeof(char *));
			}
			owned[nowned++] = pre;
			tk_map_put(&seen, pre, pre);
			count++;
		}
	}
	for (size_t i = 0; i < nowned; i++)
		free(owned[i]);
	free(owned);
	tk_map_release(&seen);
	return count + 1;
}

/* ---- set-up ------------------------------------------------------------------------ */

static void lists_init(struct pass *p);

/* What follows from the node list alone: device offsets, models, name order,
 * topology groups, the nodes of each model. */
static void statics_compute(struct pass *p)
{
	const struct sched_snapshot *s = p->snap;
	int nn = s->nnodes;
	p->nn = nn;
	p->dev_off = xcalloc((size_t)nn + 1, sizeof(int));
	int ndev = 0;
	for (int n = 0; n < nn; n++) {
		p->dev_off[n] = ndev;
		ndev += s->nodes[n].ndev;
	}
	p->dev_off[nn] = ndev;
	p->ndev = ndev;
	p->models = xcalloc((size_t)ndev + 1, sizeof(char *));
	int nm = 0;
	for (int n = 0; n < nn; n++)
		for (int d = 0; d < s->nodes[n].ndev; d++)
			p->models[nm++] = s->nodes[n].devs[d].model;
	qsort(p->models, (size_t)nm, sizeof(char *), cmp_str);
	int u = 0;
	for (int i = 0; i < nm; i++)
		if (u == 0 || strcmp(p->models[u - 1], p->models[i]) != 0)
			p->models[u++] = p->models[i];
	p->nmodels = u;
	p->dev_model = xcalloc((size_t)ndev + 1, sizeof(int));
	for (int n = 0; n < nn; n++)
		for (int d = 0; d < s->nodes[n].ndev; d++)
			p->dev_model[p->dev_off[n] + d] = model_index(p, s->nodes[n].devs[d].model);
	p->model_tflops = xcalloc((size_t)p->nmodels + 1, sizeof(double));
	for (int n = 0; n < nn; n++)
		for (int d = 0; d < s->nodes[n].ndev; d++)
			p->model_tflops[p->dev_model[p->dev_off[n] + d]] =
				MAX(p->model_tflops[p->dev_model[p->dev_off[n] + d]],
				    s->nodes[n].devs[d].tflops);
	p->name_rank = xcalloc((size_t)nn + 1, sizeof(int));
	p->order = xcalloc((size_t)nn + 1, sizeof(int));
	topo_init(p);
	/* the nodes that have each model, for scans that need every candidate */
	p->model_nodes_off = xcalloc((size_t)p->nmodels + 2, sizeof(int));
	p->model_nodes = xcalloc((size_t)ndev + 1, sizeof(int));
	int k = 0;
	for (int m = 0; m < p->nmodels; m++) {
		p->model_nodes_off[m] = k;
		for (int n = 0; n < nn; n++)
			for (int d = 0; d < s->nodes[n].ndev; d++)
				if (p->dev_model[p->dev_off[n] + d] == m) {
					p->model_nodes[k++] = n;
					break;
				}
	}
	p->model_nodes_off[p->nmodels] = k;
}

static void statics_release(struct pass *p)
{
	free(p->dev_off);
	free(p->models);
	free(p->dev_model);
	free(p->model_tflops);
	free(p->name_rank);
	free(p->topo_group);
	free(p->ngroups);
	free(p->model_nodes);
	free(p->model_nodes_off);
}

/* ---- what a caller may keep across passes ------------------------------------------ */

struct sched_cluster {
	struct pass p; /* only the statics are filled */
	char **model_names;
	char **node_names;
	char **topologies;
	int *ndev;
};

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

struct sched_cluster *sched_cluster_new(const struct sched_node *nodes, int n)
{
	struct sched_cluster *c = xcalloc(1, sizeof(*c));
	struct sched_snapshot snap = {.nodes = nodes, .nnodes = n};
	c->p.snap = &snap;
	statics_compute(&c->p);
	c->p.snap = NULL;
	/* keep copies of the strings the statics point into */
	c->model_names = xcalloc((size_t)c->p.nmodels + 1, sizeof(char *));
	for (int m = 0; m < c->p.nmodels; m++) {
		c->model_names[m] = xstrdup(c->p.models[m]);
		c->p.models[m] = c->model_names[m];
	}
	c->node_names = xcalloc((size_t)n + 1, sizeof(char *));
	c->topologies = xcalloc((size_t)n + 1, sizeof(char *));
	c->ndev = xcalloc((size_t)n + 1, sizeof(int));
	for (int i = 0; i < n; i++) {
		c->node_names[i] = xstrdup(nodes[i].name);
		c->topologies[i] = nodes[i].topology ? xstrdup(nodes[i].topology) : NULL;
		c->ndev[i] = nodes[i].ndev;
	}
	return c;
}

void sched_cluster_free(struct sched_cluster *c)
{
	if (!c)
		return;
	for (int m = 0; m < c->p.nmodels; m++)
		free(c->model_names[m]);
	for (int i = 0; i < c->p.nn; i++) {
		free(c->node_names[i]);
		free(c->topologies[i]);
	}
	free(c->model_names);
	free(c->node_names);
	free(c->topologies);
	free(c->ndev);
	free(c->p.order);
	statics_release(&c->p);
	free(c);
}

bool sched_cluster_matches(const struct sched_cluster *c, const struct sched_node *nodes, int n)
{
	if (!c || c->p.nn != n)
		return false;
	for (int i = 0; i < n; i++) {
		if (nodes[i].ndev != c->ndev[i] || !same_str(nodes[i].name, c->node_names[i]) ||
		    !same_str(nodes[i].topology, c->topologies[i]))
			return false;
		for (int d = 0; d < nodes[i].ndev; d++) {
			int m = c->p.dev_model[c->p.dev_off[i] + d];
			if (m < 0 || strcmp(nodes[i].devs[d].model, c->p.models[m]) != 0 ||
			    nodes[i].devs[d].tflops > c->p.model_tflops[m])
				return false;
		}
	}
	return true;
}

/* Takes the statics from a cluster the caller keeps. The cheap checks run on
 * every pass (counts); sched_cluster_matches is the caller's full check. */
static bool statics_borrow(struct pass *p)
{
	const struct sched_snapshot *s = p->snap;
	const struct sched_cluster *c = s->cluster;
	if (!c || c->p.nn != s->nnodes)
		return false;
	for (int n = 0; n < s->nnodes; n++)
		if (s->nodes[n].ndev != c->ndev[n])
			return false;
	const struct pass *q = &c->p;
	p->nn = q->nn;
	p->ndev = q->ndev;
	p->dev_off = q->dev_off;
	p->models = q->models;
	p->nmodels = q->nmodels;
	p->dev_model = q->dev_model;
	p->model_tflops = q->model_tflops;
	p->name_rank = q->name_rank;
	p->depth = q->depth;
	p->topo_group = q->topo_group;
	p->ngroups = q->ngroups;
	p->model_nodes = q->model_nodes;
	p->model_nodes_off = q->model_nodes_off;
	p->order = xcalloc((size_t)p->nn + 1, sizeof(int));
	p->borrowed = true;
	return true;
}

void place_init(struct pass *p)
{
	const struct sched_snapshot *s = p->snap;
	if (!statics_borrow(p))
		statics_compute(p);
	int nn = p->nn, ndev = p->ndev;
	struct view *views[] = {&p->free, &p->scratch, &p->total};
	/* every view is written in full before it is read (scratch by a copy) */
	for (size_t i = 0; i < ARRAY_SIZE(views); i++) {
		views[i]->cpus = xmalloc(sizeof(int) * ((size_t)nn + 1));
		views[i]->mem = xmalloc(sizeof(int64_t) * ((size_t)nn + 1));
		views[i]->dev = xmalloc(sizeof(int) * ((size_t)ndev + 1));
	}
	for (int n = 0; n < nn; n++) {
		const struct sched_node *node = &s->nodes[n];
		p->free.cpus[n] = node->cpus_free;
		p->free.mem[n] = node->mem_free_mib;
		p->total.cpus[n] = node->cpus_total;
		p->total.mem[n] = node->mem_total_mib;
		for (int d = 0; d < node->ndev; d++) {
			p->free.dev[p->dev_off[n] + d] = node->devs[d].free_milli;
			p->total.dev[p->dev_off[n] + d] = MODEL_MILLI;
		}
	}
	p->cands = xmalloc(sizeof(struct cand) * ((size_t)nn + 1));
	p->model_scratch = xcalloc((size_t)p->nmodels + 1, sizeof(int));
	p->model_scratch2 = xcalloc((size_t)p->nmodels + 1, sizeof(int));
	p->touch_mark = xcalloc((size_t)nn + 1, sizeof(int));
	p->touched = xmalloc(sizeof(int) * ((size_t)nn + 1));
	p->frag_before = xmalloc(sizeof(double) * ((size_t)nn + 1)); /* read once frag_valid */
	p->frag_valid = xcalloc((size_t)nn + 1, sizeof(bool));
	p->node_ver = xcalloc((size_t)nn + 1, sizeof(uint32_t));
	p->max_ndev = 0;
	for (int n = 0; n < nn; n++) {
		p->node_ver[n] = 1;
		p->max_ndev = MAX(p->max_ndev, s->nodes[n].ndev);
	}
	p->model_exclusive = xcalloc((size_t)p->nmodels + 1, sizeof(int));
	/* the capacity index over `free` */
	p->cap = xcalloc((size_t)(p->nmodels + 1) * (MODEL_MAX_ACCELS + 1), sizeof(int));
	p->node_whole = xcalloc((size_t)nn * (size_t)(p->nmodels + 1) + 1, sizeof(int));
	for (int n = 0; n < nn; n++) {
		if (!s->nodes[n].schedulable)
			continue;
		int *w = &p->node_whole[n * p->nmodels];
		for (int d = 0; d < s->nodes[n].ndev; d++)
			if (p->free.dev[p->dev_off[n] + d] == MODEL_MILLI)
				w[p->dev_model[p->dev_off[n] + d]]++;
		for (int m = 0; m < p->nmodels; m++)
			p->cap[m * (MODEL_MAX_ACCELS + 1) + w[m]]++;
	}
	lists_init(p);
}

void place_release(struct pass *p)
{
	struct view *views[] = {&p->free, &p->scratch, &p->total};
	for (size_t i = 0; i < ARRAY_SIZE(views); i++) {
		free(views[i]->cpus);
		free(views[i]->mem);
		free(views[i]->dev);
	}
	if (!p->borrowed)
		statics_release(p);
	free(p->order);
	free(p->cands);
	free(p->cap);
	free(p->node_whole);
	free(p->mix);
	free(p->model_scratch);
	free(p->model_scratch2);
	free(p->total_hist);
	free(p->touch_mark);
	free(p->touched);
	free(p->wb_head);
	free(p->wb_next);
	free(p->wb_prev);
	free(p->fb_head);
	free(p->fb_next);
	free(p->fb_prev);
	free(p->node_room);
	free(p->cb_head);
	free(p->cb_next);
	free(p->cb_prev);
	free(p->cpu_key);
	free(p->frag_before);
	free(p->frag_valid);
	free(p->node_ver);
	free(p->model_exclusive);
}

void scratch_from_free(struct pass *p)
{
	view_copy(p, &p->scratch, &p->free);
	p->delta = true;
	p->touch_gen++;
	p->ntouched = 0;
}

void scratch_touch(struct pass *p, int node)
{
	if (p->touch_mark[node] != p->touch_gen) {
		p->touch_mark[node] = p->touch_gen;
		p->touched[p->ntouched++] = node;
	}
}

void scratch_apply(struct pass *p, const struct sched_assign *a, int n, int sign)
{
	view_apply(p, &p->scratch, a, n, sign);
	for (int i = 0; i < n; i++)
		scratch_touch(p, a[i].node);
}

void view_copy(struct pass *p, struct view *dst, const struct view *src)
{
	if (dst == &p->scratch)
		p->delta = false; /* a plain copy: no longer known to differ little */
	memcpy(dst->cpus, src->cpus, sizeof(int) * (size_t)p->nn);
	memcpy(dst->mem, src->mem, sizeof(int64_t) * (size_t)p->nn);
	memcpy(dst->dev, src->dev, sizeof(int) * (size_t)p->ndev);
}

void view_apply(struct pass *p, struct view *v, const struct sched_assign *a, int n, int sign)
{
	for (int i = 0; i < n; i++) {
		int node = a[i].node;
		v->cpus[node] += sign * a[i].cpus;
		v->mem[node] += sign * a[i].mem_mib;
		for (int k = 0; k < a[i].ndev; k++)
			v->dev[p->dev_off[node] + a[i].devs[k]] += sign * a[i].milli;
	}
}

/* ---- candidate lists: nodes by what they have free, per model ---------------------- */

#define FRAC_BUCKET(milli) ((milli) / 50) /* 0..20 */
#define FRAC_BUCKETS 21
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

/* CPU work goes to nodes without accelerators first, then to the fewest free
 * CPUs that suffice: nodes are listed by (accelerators, free CPUs). */
static int cpu_bucket(const struct pass *p, int cpus)
{
	return (int)((int64_t)cpus * p->cpu_buckets / ((int64_t)p->max_cpus + 1));
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

void cap_update_node(struct pass *p, int n)
{
	const struct sched_node *node = &p->snap->nodes[n];
	p->frag_valid[n] = false;
	p->node_ver[n]++;
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
static void lists_init(struct pass *p)
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
	p->cb_next = xmalloc(sizeof(int) * ((size_t)nn + 1));
	p->cb_prev = xmalloc(sizeof(int) * ((size_t)nn + 1));
	p->cpu_key = xmalloc(sizeof(int) * ((size_t)nn + 1)); /* set for schedulable nodes */
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
	p->wb_next = xmalloc(sizeof(int) * cells);
	p->wb_prev = xmalloc(sizeof(int) * cells);
	p->fb_next = xmalloc(sizeof(int) * cells);
	p->fb_prev = xmalloc(sizeof(int) * cells);
	p->node_room = xmalloc(sizeof(int) * cells);
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

bool room_for_fraction(const struct pass *p, int m, int milli)
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

bool cap_maybe_fits(struct pass *p, const struct req *rq)
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

void req_init(struct pass *p, const struct sched_job *j, struct req *rq, bool *model_ok)
{
	memset(rq, 0, sizeof(*rq));
	rq->j = j;
	rq->cpus = j->tasks_per_node * j->cpus_per_task;
	rq->mem = j->mem_mib;
	if (j->gpu_milli >= MODEL_MILLI)
		rq->whole = j->tasks_per_node * (j->gpu_milli / MODEL_MILLI);
	else if (j->gpu_milli > 0)
		rq->frac = j->gpu_milli;
	if (model_ok) {
		rq->model_ok = model_ok; /* computed before for the same shape */
		return;
	}
	rq->model_ok = xcalloc((size_t)p->nmodels + 1, sizeof(bool));
	rq->owns_models = true;
	for (int m = 0; m < p->nmodels; m++) {
		bool ok = j->ngpu_types == 0;
		for (int t = 0; t < j->ngpu_types; t++)
			if (strcasecmp(j->gpu_types[t], p->models[m]) == 0)
				ok = true;
		rq->model_ok[m] = ok;
	}
}

void req_release(struct req *rq)
{
	if (rq->owns_models)
		free(rq->model_ok);
	rq->model_ok = NULL;
}

/* ---- fragmentation ------------------------------------------------------------------- */

/* The free share that one request kind could not use on a node. */
static double frag_one(int ndev, const int *free, int cpus_free, const struct sched_mix_item *k)
{
	double all = 0;
	int whole = 0, fits = 0;
	double partial = 0, small = 0;
	for (int d = 0; d < ndev; d++) {
		all += free[d];
		if (free[d] == MODEL_MILLI)
			whole++;
		else
			partial += free[d];
		if (k->devices == 0 && free[d] >= k->milli)
			fits++;
		else if (k->devices == 0)
			small += free[d];
	}
	if (cpus_free < k->cpus)
		return all;
	if (k->devices > 0)
		return whole >= k->devices ? partial : all;
	return fits ? small : all;
}

double sched_node_fragmentation(int ndev, const int *free_milli, int cpus_free,
				const struct sched_mix_item *mix, int nmix)
{
	double f = 0;
	for (int i = 0; i < nmix; i++)
		f += mix[i].p * frag_one(ndev, free_milli, cpus_free, &mix[i]);
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

static enum sched_frac_policy policy_of(const struct pass *p)
{
	return p->policy ? p->policy->frac : SCHED_FRAC_FGD;
}

/* With policy.score_every_node, single-node requests of every kind are
 * scored by the policy on each candidate node (fragmentation, or best fit
 * over CPUs and devices together); otherwise only fractions are, and whole
 * devices go by tightness. Gangs always go by tightness. */
static bool scored(const struct pass *p, const struct req *rq)
{
	return rq->j->nodes == 1 && policy_of(p) != SCHED_FRAC_PACK && p->policy &&
	       p->policy->score_every_node;
}

bool place_scores(const struct pass *p, const struct req *rq)
{
	return scored(p, rq) || (rq->frac && policy_of(p) == SCHED_FRAC_FGD);
}

static double frag_now(struct pass *p, const struct view *v, int n)
{
	const struct sched_node *node = &p->snap->nodes[n];
	if (v == &p->free && p->frag_valid[n])
		return p->frag_before[n];
	double f = sched_node_fragmentation(node->ndev, &v->dev[p->dev_off[n]], v->cpus[n], p->mix,
					    p->nmix);
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
	const struct sched_node *node = &p->snap->nodes[n];
	int64_t dev_left = -take_milli;
	for (int d = 0; d < node->ndev; d++)
		dev_left += v->dev[p->dev_off[n] + d];
	double cpu = p->max_cpus > 0 ? (double)(v->cpus[n] - rq->cpus) / p->max_cpus : 0;
	double dev = p->max_ndev > 0 ? (double)dev_left / ((double)p->max_ndev * MODEL_MILLI) : 0;
	return llround((0.5 * cpu + 0.5 * dev) * 1e6) * SCORE_TIE;
}

/* Fragmentation deltas closer than this (milli-devices, 2.5% of a device)
 * count as equal, and best fit over CPUs and devices decides between them:
 * an exact delta alone overrates differences the request mix cannot tell
 * apart (on Alibaba's openb trace this gains about a point of allocation). */
#define FGD_EQUAL_MILLI 25.0
/* A scored single-node request looks at the tightest candidates (by free
 * devices, room on a device, or free CPUs) until it has this many, so a
 * placement costs the same on ten thousand nodes as on a thousand. */
#define SCORED_CANDIDATES 1024
#define BEST_FIT_RANGE (1000001LL * SCORE_TIE)

static int64_t fgd_score(const struct pass *p, const struct req *rq, const struct view *v, int n,
			 double delta, int take_milli, int tie)
{
	return (int64_t)floor(delta / FGD_EQUAL_MILLI) * BEST_FIT_RANGE +
	       best_fit_score(p, rq, v, n, take_milli) + tie;
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
			sc = sched_node_fragmentation(node->ndev, after, v->cpus[n] - rq->cpus,
						      p->mix, p->nmix) -
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
	if (policy_of(p) == SCHED_FRAC_BESTFIT)
		return best_fit_score(p, rq, v, n, rq->whole * MODEL_MILLI) + left;
	double before = frag_now(p, v, n);
	int after[MODEL_MAX_ACCELS];
	const int *free = &v->dev[p->dev_off[n]];
	memcpy(after, free, sizeof(int) * (size_t)node->ndev);
	for (int d = 0, need = rq->whole; d < node->ndev && need > 0; d++)
		if (after[d] == MODEL_MILLI && dev_usable(p, rq, n, d, model)) {
			after[d] = 0;
			need--;
		}
	double delta = sched_node_fragmentation(node->ndev, after, v->cpus[n] - rq->cpus, p->mix,
						p->nmix) -
		       before;
	return fgd_score(p, rq, v, n, delta, rq->whole * MODEL_MILLI, left);
}

/* Could node n hold one node's share of rq on devices of `model` (-1: any
 * acceptable model)? Fills c on success. */
static bool node_fits_now(struct pass *p, const struct req *rq, const struct view *v, int n,
			  int model, struct cand *c)
{
	const struct sched_node *node = &p->snap->nodes[n];
	if (!node->schedulable || v->cpus[n] < rq->cpus || v->mem[n] < rq->mem)
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
		have = p->node_whole[n * p->nmodels + model]; /* kept by cap_update_node */
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

/* node_fits_now, remembered per node in `free` for the request's shape until
 * the node changes: a pass that places many jobs of one shape scores each
 * node once, not once per job. */
static bool node_fits(struct pass *p, const struct req *rq, const struct view *v, int n, int model,
		      struct cand *c)
{
	if (!rq->memo || v != &p->free)
		return node_fits_now(p, rq, v, n, model, c);
	struct node_memo *m = &rq->memo[n];
	if (m->ver == p->node_ver[n] && m->model == model) {
		*c = m->c;
		return m->fits;
	}
	m->fits = node_fits_now(p, rq, v, n, model, &m->c);
	m->ver = p->node_ver[n];
	m->model = model;
	*c = m->c;
	return m->fits;
}

/* Could node n hold a share at all (no scoring)? */
static bool node_can(const struct pass *p, const struct req *rq, const struct view *v, int n,
		     int model)
{
	const struct sched_node *node = &p->snap->nodes[n];
	if (!node->schedulable || v->cpus[n] < rq->cpus || v->mem[n] < rq->mem)
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

bool node_can_public(const struct pass *p, const struct req *rq, const struct view *v, int n,
		     int model)
{
	return node_can(p, rq, v, n, model);
}

bool could_ever(struct pass *p, const struct req *rq)
{
	/* whole devices and nothing else asked: the nodes' device counts decide */
	if (rq->whole && !rq->cpus && !rq->mem && !rq->j->gpu_mem_mib && rq->j->gpu_tflops <= 0 &&
	    !rq->j->mixed_types && !rq->j->max_switches) {
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
	/* enough nodes that could each hold a share on the empty cluster (under
	 * one model, unless mixing is allowed), counted until there are; with a
	 * switch limit the caller places for real */
	bool ok = false;
	if ((rq->whole || rq->frac) && !rq->j->mixed_types) {
		for (int m = 0; m < p->nmodels && !ok; m++) {
			if (!rq->model_ok[m])
				continue;
			int cnt = 0;
			for (int k = p->model_nodes_off[m]; k < p->model_nodes_off[m + 1] && !ok;
			     k++)
				ok = node_can(p, rq, &p->total, p->model_nodes[k], m) &&
				     ++cnt >= rq->j->nodes;
		}
	} else {
		int cnt = 0;
		for (int n = 0; n < p->nn && !ok; n++)
			ok = node_can(p, rq, &p->total, n, -1) && ++cnt >= rq->j->nodes;
	}
	if (ok && rq->j->max_switches) {
		struct placement pl;
		struct place_fail why;
		pl.nodes = xcalloc((size_t)rq->j->nodes, sizeof(*pl.nodes));
		ok = place(p, rq, &p->total, &pl, &why);
		free(pl.nodes);
	}
	return ok;
}

void fit_init(struct pass *p, struct fitcount *fc, const struct req *rq, const struct view *v)
{
	bool devices = rq->whole || rq->frac;
	fc->rq = rq;
	fc->ngroups = devices && !rq->j->mixed_types ? p->nmodels : 1;
	fc->count = xcalloc((size_t)fc->ngroups, sizeof(int));
	fc->fit = xcalloc((size_t)p->nn * (size_t)fc->ngroups + 1, 1);
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
		fit_update(p, fc, v, n);
}

void fit_update(struct pass *p, struct fitcount *fc, const struct view *v, int n)
{
	const struct req *rq = fc->rq;
	bool devices = rq->whole || rq->frac;
	if (devices && !rq->j->mixed_types && fc->ngroups > 1) {
		/* by model: only the node's own models can hold it; the others'
		 * entries stay false (fit_init never set them) */
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

bool fit_enough(const struct fitcount *fc)
{
	for (int g = 0; g < fc->ngroups; g++)
		if (fc->count[g] >= fc->rq->j->nodes)
			return true;
	return false;
}

void fit_release(struct fitcount *fc)
{
	free(fc->count);
	free(fc->fit);
}

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

/* group first (ids follow node-name order), then tightness */
static int cmp_cand_group(const void *a, const void *b, void *arg)
{
	const struct cand *x = a, *y = b;
	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	return cmp_cand(a, b, arg);
}

/* Picks `need` free whole devices on node n, preferring one NVLink domain (the
 * one with the fewest free devices that suffices). */
static void pick_devices(const struct pass *p, const struct req *rq, const struct view *v, int n,
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

/* Chooses the gang's nodes among nc candidates: the deepest topology group
 * that has enough, its tightest nodes. */
static void choose_nodes(struct pass *p, const struct req *rq, int nc, struct choice *ch)
{
	struct cand *c = p->cands;
	int need = rq->j->nodes;
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
	for (int level = p->depth - 1; level >= -1 && !ch->ok; level--) {
		for (int i = 0; i < nc; i++)
			c[i].group = level >= 0 ? p->topo_group[level * p->nn + c[i].node] : 0;
		qsort_r(c, (size_t)nc, sizeof(*c), cmp_cand_group, snap);
		int *tmp = p->order;
		for (int i = 0; i < nc;) {
			int k = i;
			while (k < nc && c[k].group == c[i].group)
				k++;
			if (k - i >= need) {
				/* the tightest nodes of this group */
				int64_t spare = 0;
				for (int x = 0; x < need; x++) {
					tmp[x] = c[i + x].node;
					spare += c[i + x].spare;
				}
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
	}
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
		if (node_fits(p, rq, v, n, model, &p->cands[nc])) {
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
	for (int k = rq->whole; k <= MODEL_MAX_ACCELS; k++) {
		if (rq->j->nodes == 1 && nc > 0 && !score && k - rq->whole > min_spare)
			break;
		if (score && nc >= SCORED_CANDIDATES)
			break;
		for (int x = p->wb_head[model * (MODEL_MAX_ACCELS + 1) + k]; x >= 0;
		     x = p->wb_next[x]) {
			int n = x / nm;
			if (delta && p->touch_mark[n] == p->touch_gen)
				continue;
			if (node_fits(p, rq, &p->free, n, model, &p->cands[nc])) {
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
	bool score = scored(p, rq);
	for (int b = FRAC_BUCKET(rq->frac); b < FRAC_BUCKETS && !(score && nc >= SCORED_CANDIDATES);
	     b++)
		for (int x = p->fb_head[model * FRAC_BUCKETS + b]; x >= 0; x = p->fb_next[x]) {
			int n = x / nm;
			if (delta && p->touch_mark[n] == p->touch_gen)
				continue;
			if (node_fits(p, rq, &p->free, n, model, &p->cands[nc]))
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
	for (int a = 0; a <= MODEL_MAX_ACCELS; a++) {
		if (nc > 0 && (a == 1 || !score))
			break; /* a node without accelerators holds it */
		int want = a > 0 && score ? SCORED_CANDIDATES : 1;
		if (nc >= want)
			break;
		for (int b = rq->cpus > p->max_cpus ? p->cpu_buckets
						    : cpu_bucket(p, MAX(rq->cpus, 0));
		     b < p->cpu_buckets && nc < want; b++)
			for (int n = p->cb_head[a * p->cpu_buckets + b]; n >= 0; n = p->cb_next[n])
				if (node_fits(p, rq, v, n, -1, &p->cands[nc]))
					nc++;
	}
	return nc;
}

/* Every node with devices of `model`, judged on v. */
static int cands_model(struct pass *p, const struct req *rq, const struct view *v, int model)
{
	int nc = 0;
	for (int k = p->model_nodes_off[model]; k < p->model_nodes_off[model + 1]; k++)
		if (node_fits(p, rq, v, p->model_nodes[k], model, &p->cands[nc]))
			nc++;
	return nc;
}

/* Every node, judged on v. */
static int cands_all(struct pass *p, const struct req *rq, const struct view *v)
{
	int nc = 0;
	for (int n = 0; n < p->nn; n++)
		if (node_fits(p, rq, v, n, -1, &p->cands[nc]))
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
		a->ndev = 0;
		if (rq->frac) {
			struct cand c;
			node_fits(p, rq, v, n, best->model, &c);
			a->ndev = 1;
			a->devs[0] = c.dev;
			a->milli = rq->frac;
		} else if (rq->whole) {
			pick_devices(p, rq, v, n, best->model, a);
		}
	}
}

bool place(struct pass *p, const struct req *rq, const struct view *v, struct placement *out,
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
		int nc = gather(p, rq, v, model);
		why->could = MAX(why->could, nc);
		if (nc < j->nodes)
			continue;
		choose_nodes(p, rq, nc, &cur);
		if (!cur.ok)
			continue;
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
