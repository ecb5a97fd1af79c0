/*
 * Shapes: what a job asks for, apart from who it is, its class, queue and
 * times. A pass files its jobs by shape, since jobs of one shape fit or fail
 * alike; a caller that keeps its jobs from pass to pass may file them once
 * in a struct sched_shapes instead, and the pass trusts the ids.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static uint64_t mix64(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h;
}

uint64_t sched_job_shape(const struct sched_job *j)
{
	uint64_t h = 1469598103934665603ULL;
	h = mix64(h, (uint64_t)j->nodes);
	h = mix64(h, (uint64_t)j->tasks_per_node);
	h = mix64(h, (uint64_t)j->gpu_milli);
	h = mix64(h, (uint64_t)j->cpus_per_task);
	h = mix64(h, (uint64_t)j->mem_mib);
	h = mix64(h, (uint64_t)j->gpu_mem_mib);
	h = mix64(h, (uint64_t)(j->gpu_tflops * 1000));
	h = mix64(h, (uint64_t)j->max_switches);
	h = mix64(h, (uint64_t)j->mixed_types);
	for (int i = 0; i < j->ngpu_types; i++)
		for (const char *c = j->gpu_types[i]; *c; c++)
			h = mix64(h, (uint64_t)(unsigned char)(*c | 0x20));
	h = mix64(h, (uint64_t)j->exclusive);
	for (const char *c = j->constraint; c && *c; c++)
		h = mix64(h, (uint64_t)(unsigned char)*c);
	h = mix64(h, 0x7e);
	for (const char *c = j->tolerate; c && *c; c++)
		h = mix64(h, (uint64_t)(unsigned char)*c);
	if (j->pools) /* as before pools, where none is configured */
		h = mix64(h, j->pools);
	if (j->spread_depth || j->within_depth)
		h = mix64(mix64(mix64(h, (uint64_t)j->spread_depth), (uint64_t)j->spread_max),
			  (uint64_t)j->within_depth);
	for (int w = 0; w < 2; w++) {
		h = mix64(h, (uint64_t)(w ? j->nexclude : j->nnodelist));
		for (int i = 0; i < (w ? j->nexclude : j->nnodelist); i++)
			for (const char *c = w ? j->exclude[i] : j->nodelist[i]; *c; c++)
				h = mix64(h, (uint64_t)(unsigned char)*c);
	}
	return h ? h : 1;
}

static bool names_same(const char *const *a, const char *const *b, int n)
{
	for (int i = 0; a != b && i < n; i++)
		if (a[i] != b[i] && strcmp(a[i], b[i]) != 0)
			return false;
	return true;
}

bool sched__shape_same(const struct sched_job *a, const struct sched_job *b)
{
	if (a->nodes != b->nodes || a->tasks_per_node != b->tasks_per_node ||
	    a->gpu_milli != b->gpu_milli || a->cpus_per_task != b->cpus_per_task ||
	    a->mem_mib != b->mem_mib || a->gpu_mem_mib != b->gpu_mem_mib ||
	    a->gpu_tflops != b->gpu_tflops || a->max_switches != b->max_switches ||
	    a->mixed_types != b->mixed_types || a->ngpu_types != b->ngpu_types ||
	    a->exclusive != b->exclusive || a->nnodelist != b->nnodelist ||
	    a->nexclude != b->nexclude || a->pools != b->pools ||
	    a->spread_depth != b->spread_depth || a->spread_max != b->spread_max ||
	    a->within_depth != b->within_depth)
		return false;
	if (!names_same(a->nodelist, b->nodelist, a->nnodelist) ||
	    !names_same(a->exclude, b->exclude, a->nexclude))
		return false;
	if ((a->constraint != NULL) != (b->constraint != NULL) ||
	    (a->constraint && a->constraint != b->constraint &&
	     strcmp(a->constraint, b->constraint) != 0))
		return false;
	if ((a->tolerate != NULL) != (b->tolerate != NULL) ||
	    (a->tolerate && a->tolerate != b->tolerate && strcmp(a->tolerate, b->tolerate) != 0))
		return false;
	if ((a->pool != NULL) != (b->pool != NULL) ||
	    (a->pool && a->pool != b->pool && strcmp(a->pool, b->pool) != 0))
		return false;
	if (a->gpu_types == b->gpu_types)
		return true;
	for (int i = 0; i < a->ngpu_types; i++)
		if (a->gpu_types[i] != b->gpu_types[i] &&
		    strcasecmp(a->gpu_types[i], b->gpu_types[i]) != 0)
			return false;
	return true;
}

bool sched__shape_valid(const struct sched_job *j)
{
	return j->nodes >= 1 && j->nodes <= MODEL_MAX_NODES && j->tasks_per_node >= 1 &&
	       j->gpu_milli >= 0 && j->cpus_per_task >= 0 && j->mem_mib >= 0 &&
	       !(j->gpu_milli > MODEL_MILLI && j->gpu_milli % MODEL_MILLI) &&
	       (int64_t)j->tasks_per_node * (j->gpu_milli / MODEL_MILLI) <= MODEL_MAX_ACCELS;
}

/* ---- the caller's table ------------------------------------------------------------- */

enum { SLOT_EMPTY = -1, SLOT_GONE = -2 };

struct entry {
	struct sched_job j; /* the shape's fields; gpu_types point at types */
	char **types;
	char **nodelist, **exclude; /* j's, copied */
	char *constraint, *tolerate, *pool, *within, *spread;
	uint64_t hash;
	int refs; /* 0: unused, on the free list */
	int next_free;
};

struct sched_shapes {
	struct entry *e;
	size_t alloc;
	int n;	       /* ids handed out */
	int free_head; /* an unused id, or -1 */
	int live;
	int *slot;   /* open addressing over the live ids: an id, SLOT_EMPTY or SLOT_GONE */
	size_t cap;  /* a power of two */
	size_t used; /* slots not SLOT_EMPTY */
};

static char **names_copy(const char *const *v, int n)
{
	if (!n)
		return NULL;
	char **c = xcalloc((size_t)n, sizeof(char *));
	for (int i = 0; i < n; i++)
		c[i] = xstrdup(v[i]);
	return c;
}

static void entry_names_free(struct entry *e)
{
	for (int k = 0; e->types && k < e->j.ngpu_types; k++)
		free(e->types[k]);
	free(e->types);
	for (int k = 0; e->nodelist && k < e->j.nnodelist; k++)
		free(e->nodelist[k]);
	free(e->nodelist);
	for (int k = 0; e->exclude && k < e->j.nexclude; k++)
		free(e->exclude[k]);
	free(e->exclude);
	free(e->constraint);
	free(e->pool);
	free(e->within);
	free(e->spread);
	free(e->tolerate);
	e->constraint = e->tolerate = e->pool = e->within = e->spread = NULL;
	e->types = e->nodelist = e->exclude = NULL;
	e->j.ngpu_types = e->j.nnodelist = e->j.nexclude = 0;
}

struct sched_shapes *sched_shapes_new(void)
{
	struct sched_shapes *t = xcalloc(1, sizeof(*t));
	t->free_head = -1;
	return t;
}

void sched_shapes_free(struct sched_shapes *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->n; i++)
		entry_names_free(&t->e[i]);
	free(t->e);
	free(t->slot);
	free(t);
}

/* Room for one more shape: the index rebuilt over the live ids, at least
 * twice as large as what it holds. */
static void reindex(struct sched_shapes *t)
{
	if ((t->used + 1) * 2 <= t->cap)
		return;
	size_t cap = 64;
	while (cap < (size_t)(t->live + 1) * 4)
		cap *= 2;
	free(t->slot);
	t->slot = xmalloc(sizeof(int) * cap);
	for (size_t i = 0; i < cap; i++)
		t->slot[i] = SLOT_EMPTY;
	t->cap = cap;
	t->used = (size_t)t->live;
	for (int id = 0; id < t->n; id++) {
		if (t->e[id].refs <= 0)
			continue;
		size_t i = t->e[id].hash & (cap - 1);
		while (t->slot[i] != SLOT_EMPTY)
			i = (i + 1) & (cap - 1);
		t->slot[i] = id;
	}
}

int sched_shapes_add(struct sched_shapes *t, const struct sched_job *j)
{
	if (!sched__shape_valid(j) || j->ngpu_types < 0 || (j->ngpu_types && !j->gpu_types))
		return -EINVAL;
	for (int i = 0; i < j->ngpu_types; i++)
		if (!j->gpu_types[i])
			return -EINVAL;
	if (j->nnodelist < 0 || j->nexclude < 0 || (j->nnodelist && !j->nodelist) ||
	    (j->nexclude && !j->exclude))
		return -EINVAL;
	for (int i = 0; i < j->nnodelist; i++)
		if (!j->nodelist[i])
			return -EINVAL;
	for (int i = 0; i < j->nexclude; i++)
		if (!j->exclude[i])
			return -EINVAL;
	reindex(t);
	uint64_t h = sched_job_shape(j);
	size_t mask = t->cap - 1, i = h & mask, gone = SIZE_MAX;
	for (;; i = (i + 1) & mask) {
		int k = t->slot[i];
		if (k == SLOT_EMPTY)
			break;
		if (k == SLOT_GONE) {
			if (gone == SIZE_MAX)
				gone = i;
			continue;
		}
		if (t->e[k].hash == h && sched__shape_same(&t->e[k].j, j)) {
			t->e[k].refs++;
			return k;
		}
	}
	int id = t->free_head;
	if (id >= 0) {
		t->free_head = t->e[id].next_free;
	} else {
		xgrow(&t->e, &t->alloc, (size_t)t->n + 1, sizeof(*t->e));
		id = t->n++;
	}
	struct entry *e = &t->e[id];
	memset(e, 0, sizeof(*e));
	e->j = *j;
	e->j.id = 0;
	e->j.submit_ms = e->j.time_limit_s = 0;
	e->j.cls = e->j.queue = 0;
	e->j.shape_id = id;
	e->j.shape = h;
	if (j->ngpu_types) {
		e->types = xcalloc((size_t)j->ngpu_types, sizeof(char *));
		for (int k = 0; k < j->ngpu_types; k++)
			e->types[k] = xstrdup(j->gpu_types[k]);
		e->j.gpu_types = (const char *const *)e->types;
	}
	e->nodelist = names_copy(j->nodelist, j->nnodelist);
	e->j.nodelist = (const char *const *)e->nodelist;
	e->exclude = names_copy(j->exclude, j->nexclude);
	e->j.exclude = (const char *const *)e->exclude;
	e->constraint = j->constraint ? xstrdup(j->constraint) : NULL;
	e->j.constraint = e->constraint;
	e->tolerate = j->tolerate ? xstrdup(j->tolerate) : NULL;
	e->j.tolerate = e->tolerate;
	e->pool = j->pool ? xstrdup(j->pool) : NULL;
	e->j.pool = e->pool;
	e->within = j->within ? xstrdup(j->within) : NULL;
	e->j.within = e->within;
	e->spread = j->spread ? xstrdup(j->spread) : NULL;
	e->j.spread = e->spread;
	e->hash = h;
	e->refs = 1;
	t->live++;
	if (gone != SIZE_MAX) {
		t->slot[gone] = id;
	} else {
		t->slot[i] = id;
		t->used++;
	}
	return id;
}

void sched_shapes_drop(struct sched_shapes *t, int id)
{
	if (id < 0 || id >= t->n || t->e[id].refs <= 0)
		return;
	struct entry *e = &t->e[id];
	if (--e->refs > 0)
		return;
	size_t mask = t->cap - 1;
	for (size_t i = e->hash & mask; t->slot[i] != SLOT_EMPTY; i = (i + 1) & mask)
		if (t->slot[i] == id) {
			t->slot[i] = SLOT_GONE;
			break;
		}
	entry_names_free(e);
	e->next_free = t->free_head;
	t->free_head = id;
	t->live--;
}

int sched_shapes_live(const struct sched_shapes *t)
{
	return t->live;
}

const struct sched_job *sched__shapes_get(const struct sched_shapes *t, int id)
{
	return id >= 0 && id < t->n && t->e[id].refs > 0 ? &t->e[id].j : NULL;
}

int sched__shapes_ids(const struct sched_shapes *t)
{
	return t->n;
}
