/*
 * The order jobs are tried in: fair share between queues (a heap of the
 * queues of a segment by use plus recent use over weight), and the shape
 * cache that files every pending job under what it asks for.
 */
#include "pass.h"

#include <string.h>

static bool q_less(const struct st *st, int a, int b)
{
	double x = st->qs[a].score, y = st->qs[b].score;
	if (x != y)
		return x < y;
	return strcmp(st->p.snap->queues[a].name, st->p.snap->queues[b].name) < 0;
}

static void heap_swap(struct st *st, int i, int k)
{
	int t = st->heap[i];
	st->heap[i] = st->heap[k];
	st->heap[k] = t;
	st->qs[st->heap[i]].heap_pos = i;
	st->qs[st->heap[k]].heap_pos = k;
}

void sched__heap_fix(struct st *st, int i)
{
	while (i > 0 && q_less(st, st->heap[i], st->heap[(i - 1) / 2])) {
		heap_swap(st, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < st->nheap && q_less(st, st->heap[l], st->heap[m]))
			m = l;
		if (r < st->nheap && q_less(st, st->heap[r], st->heap[m]))
			m = r;
		if (m == i)
			break;
		heap_swap(st, i, m);
		i = m;
	}
}

void sched__heap_push(struct st *st, int q)
{
	st->heap[st->nheap] = q;
	st->qs[q].heap_pos = st->nheap++;
	sched__heap_fix(st, st->nheap - 1);
}

void sched__heap_pop(struct st *st)
{
	heap_swap(st, 0, --st->nheap);
	if (st->nheap)
		sched__heap_fix(st, 0);
}

/* ---- the shape cache ---- */

static uint64_t shape_hash(const struct sched_job *j)
{
	return j->shape ? j->shape : sched_job_shape(j);
}

static void slots_grow(struct st *st)
{
	st->slot_cap = st->slot_cap ? st->slot_cap * 2 : SHAPE_CACHE_MIN;
	sched__keep_release(st->p.keep, st->shape_slot);
	st->shape_slot = sched__keep_alloc(st->p.keep, sizeof(int) * st->slot_cap);
	memset(st->shape_slot, 0xff, sizeof(int) * st->slot_cap);
	size_t mask = st->slot_cap - 1;
	for (int k = 0; k < st->nshapes; k++) {
		size_t i = st->shapes[k].hash & mask;
		while (st->shape_slot[i] >= 0)
			i = (i + 1) & mask;
		st->shape_slot[i] = k;
	}
}

int sched__shape_new(struct st *st, const struct sched_job *j, uint64_t hash)
{
	sched__keep_grow(st->p.keep, &st->shapes, &st->shapes_alloc, (size_t)st->nshapes + 1,
			 sizeof(*st->shapes));
	int k = st->nshapes++;
	struct shape *s = &st->shapes[k];
	memset(s, 0, sizeof(*s));
	s->j = j;
	s->hash = hash;
	s->detail_job = -1;
	s->generic_job = -1;
	s->never = -1;
	s->need = job_milli(j);
	return k;
}

int sched__shape_index(struct st *st, const struct sched_job *j)
{
	uint64_t h = shape_hash(j);
	if ((size_t)st->nshapes * 2 >= st->slot_cap)
		slots_grow(st);
	size_t mask = st->slot_cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		int k = st->shape_slot[i];
		if (k < 0) {
			k = sched__shape_new(st, j, h);
			st->shape_slot[i] = k;
			return k;
		}
		const struct shape *s = &st->shapes[k];
		if (s->hash == h && (s->j == j || sched__shape_same(s->j, j)))
			return k;
	}
}
