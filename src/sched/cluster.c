/*
 * What a pass works out from the node list alone (device models in name
 * order, each device's model, topology groups, name ranks: the statics),
 * which a caller may keep across passes as a sched_cluster; a pass's views
 * of what is free, set up and released; the scratch view and its deltas.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

int sched__cmp_str(const void *a, const void *b)
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

/* ---- set-up ------------------------------------------------------------------------ */

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
	qsort(p->models, (size_t)nm, sizeof(char *), sched__cmp_str);
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
	sched__topo_init(p);
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
	char **labels;
	int *ndev;
	/* which nodes satisfy each constraint met so far (lists.c), kept while
	 * the node list (labels included) matches */
	struct tk_map cons;
	int ncons;
};

struct tk_map *sched__cluster_cons(const struct sched_cluster *c, int **count)
{
	struct sched_cluster *m = (struct sched_cluster *)c; /* its cache alone changes */
	*count = &m->ncons;
	return &m->cons;
}

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
	c->labels = xcalloc((size_t)n + 1, sizeof(char *));
	c->ndev = xcalloc((size_t)n + 1, sizeof(int));
	tk_map_init(&c->cons);
	for (int i = 0; i < n; i++) {
		c->node_names[i] = xstrdup(nodes[i].name);
		c->topologies[i] = nodes[i].topology ? xstrdup(nodes[i].topology) : NULL;
		c->labels[i] = nodes[i].labels ? xstrdup(nodes[i].labels) : NULL;
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
		free(c->labels[i]);
	}
	sched__cons_clear(&c->cons);
	tk_map_release(&c->cons);
	free(c->model_names);
	free(c->node_names);
	free(c->topologies);
	free(c->labels);
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
		    !same_str(nodes[i].topology, c->topologies[i]) ||
		    !same_str(nodes[i].labels, c->labels[i]))
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

void sched__place_init(struct pass *p)
{
	const struct sched_snapshot *s = p->snap;
	if (!statics_borrow(p))
		statics_compute(p);
	int nn = p->nn, ndev = p->ndev;
	struct view *views[] = {&p->free, &p->scratch, &p->total};
	/* every view is written in full before it is read (scratch by a copy) */
	for (size_t i = 0; i < ARRAY_SIZE(views); i++) {
		views[i]->cpus = sched__keep_alloc(p->keep, sizeof(int) * ((size_t)nn + 1));
		views[i]->mem = sched__keep_alloc(p->keep, sizeof(int64_t) * ((size_t)nn + 1));
		views[i]->dev = sched__keep_alloc(p->keep, sizeof(int) * ((size_t)ndev + 1));
		views[i]->alone = sched__keep_zalloc(p->keep, (size_t)nn + 1, sizeof(int));
	}
	for (int r = 0; r < s->nrunning; r++)
		for (int k = 0; k < s->running[r].nnodes; k++)
			if (s->running[r].nodes[k].alone)
				p->free.alone[s->running[r].nodes[k].node]++;
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
	p->cands = sched__keep_alloc(p->keep, sizeof(struct cand) * ((size_t)nn + 1));
	p->model_scratch = xcalloc((size_t)p->nmodels + 1, sizeof(int));
	p->model_scratch2 = xcalloc((size_t)p->nmodels + 1, sizeof(int));
	p->touch_mark = sched__keep_zalloc(p->keep, (size_t)nn + 1, sizeof(int));
	p->touched = sched__keep_alloc(p->keep, sizeof(int) * ((size_t)nn + 1));
	/* read once frag_valid */
	p->frag_before = sched__keep_alloc(p->keep, sizeof(double) * ((size_t)nn + 1));
	p->frag_valid = sched__keep_zalloc(p->keep, (size_t)nn + 1, sizeof(bool));
	p->node_ver = sched__keep_zalloc(p->keep, (size_t)nn + 1, sizeof(uint32_t));
	p->model_ver = xcalloc((size_t)p->nmodels + 1, sizeof(uint64_t));
	for (int m = 0; m < p->nmodels; m++)
		p->model_ver[m] = 1;
	p->max_ndev = 0;
	for (int n = 0; n < nn; n++) {
		p->node_ver[n] = 1;
		p->max_ndev = MAX(p->max_ndev, s->nodes[n].ndev);
	}
	p->model_exclusive = xcalloc((size_t)p->nmodels + 1, sizeof(int));
	/* the capacity index over `free` */
	p->cap = xcalloc((size_t)(p->nmodels + 1) * (MODEL_MAX_ACCELS + 1), sizeof(int));
	p->node_whole =
		sched__keep_zalloc(p->keep, (size_t)nn * (size_t)(p->nmodels + 1) + 1, sizeof(int));
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
	sched__lists_init(p);
}

void sched__place_release(struct pass *p)
{
	struct view *views[] = {&p->free, &p->scratch, &p->total};
	for (size_t i = 0; i < ARRAY_SIZE(views); i++) {
		sched__keep_release(p->keep, views[i]->cpus);
		sched__keep_release(p->keep, views[i]->mem);
		sched__keep_release(p->keep, views[i]->dev);
		sched__keep_release(p->keep, views[i]->alone);
	}
	if (!p->borrowed)
		statics_release(p);
	free(p->order);
	sched__keep_release(p->keep, p->cands);
	free(p->cap);
	sched__keep_release(p->keep, p->node_whole);
	free(p->mix);
	free(p->mix_ok);
	free(p->model_scratch);
	free(p->model_scratch2);
	free(p->total_hist);
	sched__keep_release(p->keep, p->touch_mark);
	sched__keep_release(p->keep, p->touched);
	free(p->wb_head);
	sched__keep_release(p->keep, p->wb_next);
	sched__keep_release(p->keep, p->wb_prev);
	free(p->fb_head);
	sched__keep_release(p->keep, p->fb_next);
	sched__keep_release(p->keep, p->fb_prev);
	sched__keep_release(p->keep, p->node_room);
	free(p->cb_head);
	sched__keep_release(p->keep, p->cb_next);
	sched__keep_release(p->keep, p->cb_prev);
	sched__keep_release(p->keep, p->cpu_key);
	sched__keep_release(p->keep, p->frag_before);
	sched__keep_release(p->keep, p->frag_valid);
	sched__keep_release(p->keep, p->node_ver);
	free(p->model_ver);
	free(p->model_exclusive);
	free(p->same_count);
}

void sched__scratch_from_free(struct pass *p)
{
	sched__view_copy(p, &p->scratch, &p->free);
	p->delta = true;
	p->touch_gen++;
	p->ntouched = 0;
}

void sched__scratch_touch(struct pass *p, int node)
{
	if (p->touch_mark[node] != p->touch_gen) {
		p->touch_mark[node] = p->touch_gen;
		p->touched[p->ntouched++] = node;
	}
}

void sched__scratch_apply(struct pass *p, const struct sched_assign *a, int n, int sign)
{
	sched__view_apply(p, &p->scratch, a, n, sign);
	for (int i = 0; i < n; i++)
		sched__scratch_touch(p, a[i].node);
}

void sched__view_copy(struct pass *p, struct view *dst, const struct view *src)
{
	if (dst == &p->scratch)
		p->delta = false; /* a plain copy: no longer known to differ little */
	memcpy(dst->cpus, src->cpus, sizeof(int) * (size_t)p->nn);
	memcpy(dst->mem, src->mem, sizeof(int64_t) * (size_t)p->nn);
	memcpy(dst->dev, src->dev, sizeof(int) * (size_t)p->ndev);
	memcpy(dst->alone, src->alone, sizeof(int) * (size_t)p->nn);
}

void sched__view_apply(struct pass *p, struct view *v, const struct sched_assign *a, int n,
		       int sign)
{
	for (int i = 0; i < n; i++) {
		int node = a[i].node;
		v->cpus[node] += sign * a[i].cpus;
		v->mem[node] += sign * a[i].mem_mib;
		for (int k = 0; k < a[i].ndev; k++)
			v->dev[p->dev_off[node] + a[i].devs[k]] += sign * a[i].milli;
		v->alone[node] -= sign * a[i].alone; /* taking (-1) makes it held alone */
	}
}
