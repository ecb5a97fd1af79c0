/*
 * Backfill: the first waiting job of each class holds a reservation, worked
 * out from the running jobs' time limits (shadow), and later jobs use what
 * it reserved only if their time limit ends before it starts; a job waiting
 * on the victims preempted for it holds what they free (a hold).
 */
#include "pass.h"

#include <stdlib.h>
#include <string.h>

static bool resv_blocks(const struct st *st, const struct resv *r, int64_t time_limit_s)
{
	if (r->until == 0 || time_limit_s == 0)
		return true;
	return st->p.now + time_limit_s * 1000 > r->until;
}

bool sched__blocked_by_all(const struct st *st, int64_t time_limit_s)
{
	for (int i = 0; i < st->nresv; i++)
		if (!resv_blocks(st, &st->resv[i], time_limit_s))
			return false;
	return true;
}

struct saved {
	int node, cpus;
	int64_t mem;
	int dev_idx[MODEL_MAX_ACCELS];
	int dev_val[MODEL_MAX_ACCELS];
	int ndev;
};

int sched__saved_node(const struct saved *sv, int i)
{
	return sv[i].node;
}

struct saved *sched__block(struct st *st, const struct sched_job *j, int *ret_n, int *first)
{
	struct pass *p = &st->p;
	struct saved *sv = NULL;
	size_t alloc = 0;
	int n = 0;
	*first = -1;
	for (int i = 0; i < st->nresv; i++) {
		struct resv *r = &st->resv[i];
		if (!resv_blocks(st, r, j->time_limit_s))
			continue;
		if (*first < 0)
			*first = i;
		for (int k = 0; k < r->n; k++) {
			const struct sched_assign *a = &r->a[k];
			xgrow(&sv, &alloc, (size_t)n + 1, sizeof(*sv));
			struct saved *s = &sv[n++];
			s->node = a->node;
			s->cpus = p->free.cpus[a->node];
			s->mem = p->free.mem[a->node];
			s->ndev = a->ndev;
			p->free.cpus[a->node] = MAX(0, p->free.cpus[a->node] - a->cpus);
			p->free.mem[a->node] = MAX(0, p->free.mem[a->node] - a->mem_mib);
			for (int d = 0; d < a->ndev; d++) {
				int idx = p->dev_off[a->node] + a->devs[d];
				s->dev_idx[d] = idx;
				s->dev_val[d] = p->free.dev[idx];
				p->free.dev[idx] = MAX(0, p->free.dev[idx] - a->milli);
			}
		}
	}
	*ret_n = n;
	/* keep the capacity index true to what this job may use */
	for (int i = 0; i < n; i++)
		sched__cap_update_node(p, sv[i].node);
	return sv;
}

void sched__unblock(struct st *st, struct saved *sv, int n)
{
	struct pass *p = &st->p;
	for (int i = n - 1; i >= 0; i--) {
		p->free.cpus[sv[i].node] = sv[i].cpus;
		p->free.mem[sv[i].node] = sv[i].mem;
		for (int d = 0; d < sv[i].ndev; d++)
			p->free.dev[sv[i].dev_idx[d]] = sv[i].dev_val[d];
	}
	for (int i = 0; i < n; i++)
		sched__cap_update_node(p, sv[i].node);
	free(sv);
}

void sched__add_hold(struct st *st, const struct placement *pl)
{
	struct pass *p = &st->p;
	for (int i = 0; i < pl->nnodes; i++) {
		const struct sched_assign *a = &pl->nodes[i];
		int n = a->node;
		p->free.cpus[n] -= MIN(a->cpus, p->free.cpus[n]);
		p->free.mem[n] -= MIN(a->mem_mib, p->free.mem[n]);
		for (int d = 0; d < a->ndev; d++) {
			int *f = &p->free.dev[p->dev_off[n] + a->devs[d]];
			*f -= MIN(a->milli, *f);
		}
		sched__cap_update_node(p, n);
	}
}

void sched__add_resv(struct st *st, int job, int64_t until, const struct placement *pl)
{
	struct pass *p = &st->p;
	sched__keep_grow(p->keep, &st->resv, &st->resv_alloc, (size_t)st->nresv + 1,
			 sizeof(*st->resv));
	struct resv *r = &st->resv[st->nresv++];
	r->job = job;
	r->until = until;
	r->n = pl->nnodes;
	r->a = xcalloc((size_t)pl->nnodes, sizeof(*r->a));
	for (int i = 0; i < pl->nnodes; i++) {
		const struct sched_assign *src = &pl->nodes[i];
		struct sched_assign *a = &r->a[i];
		a->node = src->node;
		a->cpus = MIN(src->cpus, p->free.cpus[src->node]);
		a->mem_mib = MIN(src->mem_mib, p->free.mem[src->node]);
		a->milli = src->milli;
		for (int d = 0; d < src->ndev; d++)
			if (p->free.dev[p->dev_off[src->node] + src->devs[d]] > 0)
				a->devs[a->ndev++] = src->devs[d];
	}
}

/* The end time ignoring this pass's choices: what the sort uses. */
static int64_t static_end(const struct st *st, const struct sched_running *r)
{
	if (r->stopping)
		return st->p.now;
	if (!r->time_limit_s)
		return FOREVER;
	return MAX(st->p.now, r->start_ms + r->time_limit_s * 1000);
}

/* Sorts by end, soonest first, every end being at or after `now`. The order
 * among equal ends is not kept: sched__shadow() releases all the jobs of one end
 * before it places. An LSD radix sort on the offset from now, 11 bits a
 * round and only as many rounds as the latest finite end needs (a few for
 * time limits of days); FOREVER goes last. */
static void sort_by_end(struct pass *p, struct end_item *a, int n, int64_t now)
{
	int nf = 0;
	uint64_t max = 0;
	for (int i = 0; i < n; i++) {
		if (a[i].end == FOREVER)
			continue;
		struct end_item t = a[nf];
		a[nf] = a[i];
		a[i] = t;
		max = MAX(max, (uint64_t)(a[nf].end - now));
		nf++;
	}
	if (nf < 2 || max == 0)
		return;
	enum { BITS = 11, RADIX = 1 << BITS };
	struct end_item *tmp = sched__keep_alloc(p->keep, sizeof(*tmp) * (size_t)nf), *src = a,
			*dst = tmp;
	int *count = xmalloc(sizeof(int) * RADIX);
	for (int shift = 0; shift < 64 && max >> shift; shift += BITS) {
		memset(count, 0, sizeof(int) * RADIX);
		for (int i = 0; i < nf; i++)
			count[((uint64_t)(src[i].end - now) >> shift) & (RADIX - 1)]++;
		for (int b = 0, sum = 0; b < RADIX; b++) {
			int c = count[b];
			count[b] = sum;
			sum += c;
		}
		for (int i = 0; i < nf; i++)
			dst[count[((uint64_t)(src[i].end - now) >> shift) & (RADIX - 1)]++] =
				src[i];
		struct end_item *t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, sizeof(*a) * (size_t)nf);
	free(count);
	sched__keep_release(p->keep, tmp);
}

/* The running jobs in order of expected end, for reservations: sorted once a
 * pass by their time limits; jobs chosen as victims since end now, and go
 * first, with the others that end now. Returns the order (the sorted list
 * itself while no victims were chosen), and its length in *n. */
static const struct end_item *end_order(struct st *st, int *ret_n)
{
	const struct sched_snapshot *s = st->p.snap;
	if (!st->end_sorted) {
		struct end_item *h = st->end_heap;
		for (int i = 0; i < s->nrunning; i++)
			h[i] = (struct end_item){static_end(st, &s->running[i]), i};
		sort_by_end(&st->p, h, s->nrunning, st->p.now);
		st->end_sorted = true;
	}
	const struct end_item *h = st->end_heap;
	*ret_n = s->nrunning;
	if (st->d->npreempts == 0)
		return h;
	struct end_item *out = st->end_list;
	int n = 0, k = 0;
	/* what ends now: the sorted prefix, and the victims */
	while (k < s->nrunning && h[k].end <= st->p.now)
		out[n++] = h[k++];
	for (int i = k; i < s->nrunning; i++)
		if (st->victim[h[i].idx])
			out[n++] = (struct end_item){st->p.now, h[i].idx};
	for (int i = k; i < s->nrunning; i++)
		if (!st->victim[h[i].idx])
			out[n++] = h[i];
	return out;
}

/* Free milli-devices on the nodes of a running job (the most on any). */
static int64_t free_near(const struct pass *p, const struct sched_running *r)
{
	int64_t most = 0;
	for (int k = 0; k < r->nnodes; k++) {
		const struct sched_node *node = &p->snap->nodes[r->nodes[k].node];
		int64_t f = 0;
		for (int d = 0; d < node->ndev; d++)
			f += p->free.dev[p->dev_off[r->nodes[k].node] + d];
		most = MAX(most, f);
	}
	return most;
}

struct unknown_end {
	int idx;
	int64_t near;  /* free_near */
	int64_t start; /* later: younger */
};

static int cmp_unknown(const void *a, const void *b, void *arg)
{
	const struct unknown_end *x = a, *y = b;
	const struct sched_snapshot *s = arg;
	if (x->near != y->near)
		return x->near > y->near ? -1 : 1;
	if (x->start != y->start)
		return x->start > y->start ? -1 : 1;
	return s->running[x->idx].id < s->running[y->idx].id ? -1 : 1;
}

/* Placements tried among jobs without time limits, one released at a
 * time, before the rest are released at once. */
#define UNKNOWN_TRIES 16

/* When could j start, and where, as running jobs end by their time limits?
 * Running jobs are released in order of expected end until j fits. Those
 * without a time limit end at an unknown time: they are released one by
 * one, the likeliest to make room first (on the nodes with the most free
 * already, which a reservation that holds keeps free, so that the choice
 * stays where it was from pass to pass; then the youngest, as run times
 * are heavy-tailed: the longer a job has run, the longer it tends to run
 * on), so that what j waits for is as little as can be. Fills *until and
 * st->pl; false if not even when all have ended. */
static bool shadow_unknown(struct st *st, const struct req *rq, const struct end_item *h, int n,
			   struct fitcount *fc)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	struct unknown_end *u = sched__keep_alloc(p->keep, sizeof(*u) * ((size_t)n + 1));
	for (int i = 0; i < n; i++) {
		const struct sched_running *r = &s->running[h[i].idx];
		u[i] = (struct unknown_end){h[i].idx, free_near(p, r), r->start_ms};
	}
	qsort_r(u, (size_t)n, sizeof(*u), cmp_unknown, (void *)s);
	struct place_fail why;
	bool ok = false;
	int tries = 0;
	for (int i = 0; i < n && !ok; i++) {
		const struct sched_running *r = &s->running[u[i].idx];
		sched__scratch_apply(p, r->nodes, r->nnodes, +1);
		for (int x = 0; x < r->nnodes; x++)
			sched__fit_update(p, fc, &p->scratch, r->nodes[x].node);
		/* past the tries, only once every one is released */
		if ((tries >= UNKNOWN_TRIES && i + 1 < n) || !sched__fit_enough(fc))
			continue;
		tries++;
		st->d->placements_tried++;
		ok = sched__place(p, rq, &p->scratch, &st->pl, &why);
	}
	sched__keep_release(p->keep, u);
	return ok;
}

/* How far ahead in the end order sched__shadow() asks for what it will read. */
#define SHADOW_AHEAD 8

bool sched__shadow(struct st *st, const struct req *rq, int64_t *until)
{
	struct pass *p = &st->p;
	const struct sched_snapshot *s = p->snap;
	sched__scratch_from_free(p);
	int n;
	const struct end_item *h = end_order(st, &n);
	struct fitcount fc;
	sched__fit_init(p, &fc, rq, &p->scratch);
	struct place_fail why;
	bool ok = false;
	for (int i = 0; i < n && !ok; i++) {
		struct end_item it = h[i];
		/* the running jobs lie wherever the caller keeps them: ask for
		 * the ones a little ahead, and for their nodes */
		if (i + 2 * SHADOW_AHEAD < n)
			__builtin_prefetch(&s->running[h[i + 2 * SHADOW_AHEAD].idx]);
		if (i + SHADOW_AHEAD < n)
			__builtin_prefetch(s->running[h[i + SHADOW_AHEAD].idx].nodes);
		if (it.end == FOREVER) {
			ok = shadow_unknown(st, rq, &h[i], n - i, &fc);
			if (ok)
				*until = FOREVER;
			break;
		} else {
			const struct sched_running *r = &s->running[it.idx];
			sched__scratch_apply(p, r->nodes, r->nnodes, +1);
			for (int x = 0; x < r->nnodes; x++)
				sched__fit_update(p, &fc, &p->scratch, r->nodes[x].node);
		}
		/* place once enough nodes could hold it, at most once per end time */
		if (i + 1 < n && h[i + 1].end == it.end)
			continue;
		if (!sched__fit_enough(&fc))
			continue;
		st->d->placements_tried++;
		if (sched__place(p, rq, &p->scratch, &st->pl, &why)) {
			*until = it.end;
			ok = true;
		}
	}
	sched__fit_release(p, &fc);
	return ok;
}
