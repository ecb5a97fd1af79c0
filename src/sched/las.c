/*
 * Least attained service (sched.h says what it is): the levels of a class
 * as classes of their own, a job's level from the service it received, and
 * the starvation guard. The pass needs nothing else of it: a level is a
 * class whose priority sits between its class's and the next lower one's
 * (pass.c), and whose jobs may preempt the later levels of their family
 * (class_takes, pass.h). The caller keeps each job's service, so that the
 * server and the simulator count it the same way through these functions.
 */
#include "pass.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int sched_classes_expand(const struct sched_class *in, const struct sched_las *las, int n,
			 struct sched_class *ret, int *ret_first)
{
	int k = 0;
	for (int c = 0; c < n; c++) {
		int levels = las && las[c].nlevels > 1 ? las[c].nlevels : 1;
		if (k + levels > MODEL_MAX_CLASSES)
			return -E2BIG;
		ret_first[c] = k;
		for (int l = 0; l < levels; l++) {
			ret[k] = in[c];
			ret[k].las_family = levels > 1 ? c + 1 : 0;
			ret[k].las_level = levels > 1 ? l : 0;
			struct sched_las_rule rule = levels > 1 ? sched_las_rule_of(&las[c])
								: (struct sched_las_rule){0};
			ret[k].las_min_run_ms = rule.min_run_ms;
			ret[k].las_max_loss_ms = rule.max_loss_ms;
			k++;
		}
	}
	return k;
}

struct sched_las_rule sched_las_rule_of(const struct sched_las *las)
{
	if (!las || las->nlevels < 2)
		return (struct sched_las_rule){0};
	return (struct sched_las_rule){
		.min_run_ms = llround(las->min_run_s * 1000),
		.max_loss_ms = las->max_loss_s < 0 ? -1 : llround(las->max_loss_s * 1000)};
}

bool sched_las_may_take(struct sched_las_rule rule, const struct sched_running *r, int64_t now,
			int64_t *min_left_ms)
{
	int64_t left = MAX(0, r->start_ms + rule.min_run_ms - now);
	if (min_left_ms)
		*min_left_ms = left;
	if (left)
		return false;
	return r->preempt_any || rule.max_loss_ms < 0 ||
	       sched_run_loss_ms(r, now) <= rule.max_loss_ms;
}

int sched_las_level(const struct sched_las *las, double service_gpu_s)
{
	if (!las || las->nlevels < 2)
		return 0;
	int l = 0;
	while (l < las->nlevels - 1 && service_gpu_s >= las->limit_gpu_s[l])
		l++;
	return l;
}

int64_t sched_las_next_change(const struct sched_las *las, double service_gpu_s, int64_t milli,
			      int64_t started_ms, int64_t now_ms)
{
	if (!las || las->nlevels < 2 || milli <= 0)
		return INT64_MAX;
	int lv = sched_las_level(las, service_gpu_s);
	int64_t at = INT64_MAX;
	if (lv + 1 < las->nlevels) {
		double ms = ceil((las->limit_gpu_s[lv] - service_gpu_s) * 1e6 / (double)milli);
		at = now_ms + MAX(1, (int64_t)ms);
	}
	int64_t worked = started_ms + llround(las->min_run_s * 1000);
	if (lv > 0 && worked > now_ms)
		at = MIN(at, worked);
	return at;
}

int64_t sched_run_loss_ms(const struct sched_running *r, int64_t now)
{
	int64_t since = MAX(r->start_ms, r->last_commit_ms);
	return MAX(0, now - since) + MAX(0, r->restore_ms);
}

int64_t sched_las_takeable_until(const struct sched_las *las, const struct sched_running *r)
{
	if (r->preempt_any || !las || las->max_loss_s < 0)
		return INT64_MAX;
	return MAX(r->start_ms, r->last_commit_ms) + llround(las->max_loss_s * 1000) -
	       MAX(0, r->restore_ms);
}

bool sched_las_promoted(const struct sched_las *las, int64_t ran_ms, int64_t waited_ms)
{
	if (!las || las->nlevels < 2 || las->max_stretch <= 0 || ran_ms <= 0)
		return false;
	return (double)waited_ms >= las->max_stretch * (double)ran_ms;
}

void sched_policy_of_config(const struct sched_config *cfg, struct sched_policy *ret)
{
	memset(ret, 0, sizeof(*ret));
	/* the configuration: absent (-1) never, 0 at once; the policy: 0 never,
	 * negative at once */
	if (cfg->resv_patience_s >= 0)
		ret->resv_patience_ms = cfg->resv_patience_s ? cfg->resv_patience_s * 1000 : -1;
	ret->max_starts = (int)cfg->max_starts_per_pass;
	ret->maint_lookahead_ms = cfg->maint_lookahead_s * 1000;
	ret->weighted_share = cfg->weighted_share;
	ret->score_every_node = !cfg->placement_fastest;
	ret->score_before_speed = !cfg->placement_fastest;
}

int sched_classes_of_config(const struct sched_config *cfg, struct sched_class *ret,
			    struct sched_las *ret_las, int *ret_first)
{
	_Static_assert(SCHED_LAS_MAX_LEVELS == MODEL_LAS_MAX_LEVELS, "one limit of levels");
	struct sched_class base[MODEL_MAX_CLASSES];
	for (int c = 0; c < cfg->nclasses; c++) {
		const struct class_spec *cs = &cfg->classes[c];
		base[c] = (struct sched_class){.name = cs->name,
					       .priority = cs->priority,
					       .may_preempt = cs->may_preempt,
					       .preemptible = cs->preemptible};
		struct sched_las *l = &ret_las[c];
		memset(l, 0, sizeof(*l));
		if (!cs->las)
			continue;
		l->nlevels = cs->las_nlimits + 1;
		for (int k = 0; k < cs->las_nlimits; k++)
			l->limit_gpu_s[k] = cs->las_limit_gpu_h[k] * 3600;
		l->max_stretch = cs->las_max_stretch;
		l->min_run_s = (double)cs->las_min_run_s;
		l->max_loss_s = (double)cs->las_max_loss_s;
		l->gittins = cs->las_gittins;
	}
	return sched_classes_expand(base, ret_las, cfg->nclasses, ret, ret_first);
}

/* ---- the Gittins index ---- */

double sched_gittins_exact(const double *sorted, int n, double a, double quantum)
{
	int i0 = 0;
	while (i0 < n && sorted[i0] <= a)
		i0++;
	if (i0 == n)
		return 0;
	/* d = the quantum, then d at each sample past it: the finished ones
	 * (a < S <= a + d) over the service all of them get, min(S - a, d)
	 * each */
	double best = 0, done_sum = 0;
	int k = i0;
	for (; k < n && sorted[k] - a <= quantum; k++)
		done_sum += sorted[k] - a;
	if (quantum > 0) {
		double spent = done_sum + (double)(n - k) * quantum;
		best = (double)(k - i0) / spent;
	}
	for (; k < n; k++) {
		double d = sorted[k] - a;
		done_sum += d;
		if (k + 1 < n && sorted[k + 1] == sorted[k])
			continue;
		double spent = done_sum + (double)(n - 1 - k) * d;
		double g = spent > 0 ? (double)(k - i0 + 1) / spent : 0;
		if (g > best)
			best = g;
	}
	return best;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void sched_gittins_build(struct sched_gittins *g, double *samples, int n, double quantum)
{
	memset(g, 0, sizeof(*g));
	if (n <= 0)
		return;
	qsort(samples, (size_t)n, sizeof(*samples), cmp_double);
	g->at[0] = 0;
	g->index[0] = sched_gittins_exact(samples, n, 0, quantum);
	g->npoints = 1;
	/* the quantiles, and last the greatest: past it, 0 */
	for (int k = 1; k < SCHED_GITTINS_POINTS; k++) {
		double q = samples[(int64_t)(n - 1) * k / (SCHED_GITTINS_POINTS - 1)];
		if (q <= g->at[g->npoints - 1])
			continue;
		g->at[g->npoints] = q;
		g->index[g->npoints] = sched_gittins_exact(samples, n, q, quantum);
		g->npoints++;
	}
}

double sched_gittins_index(const struct sched_gittins *g, double a)
{
	if (!g->npoints)
		return 0;
	int lo = 0, hi = g->npoints - 1;
	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		if (g->at[mid] <= a)
			lo = mid;
		else
			hi = mid - 1;
	}
	return g->index[lo];
}

struct hkind {
	uint64_t key; /* 0: empty slot */
	double *samples;
	int n, next; /* a ring of SCHED_GITTINS_KEEP */
	int added;   /* since g was built */
	struct sched_gittins g;
};

struct sched_las_history {
	struct hkind *slot;
	size_t cap, used;
};

struct sched_las_history *sched_las_history_new(void)
{
	return xcalloc(1, sizeof(struct sched_las_history));
}

void sched_las_history_free(struct sched_las_history *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->cap; i++)
		free(h->slot[i].samples);
	free(h->slot);
	free(h);
}

/* class (+1) and queue (+1, 0: any) in one key */
static uint64_t kind_key(int cls, bool any_queue, uint32_t queue)
{
	return (uint64_t)(cls + 1) << 40 | (any_queue ? 0 : (uint64_t)queue + 1);
}

static size_t key_hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	return (size_t)k;
}

static struct hkind *kind_find(const struct sched_las_history *h, uint64_t key)
{
	if (!h->cap)
		return NULL;
	for (size_t i = key_hash(key) & (h->cap - 1);; i = (i + 1) & (h->cap - 1)) {
		if (h->slot[i].key == key)
			return &h->slot[i];
		if (!h->slot[i].key)
			return NULL;
	}
}

static struct hkind *kind_get(struct sched_las_history *h, uint64_t key)
{
	struct hkind *k = kind_find(h, key);
	if (k)
		return k;
	if ((h->used + 1) * 2 > h->cap) {
		struct sched_las_history old = *h;
		h->cap = h->cap ? h->cap * 2 : 16;
		h->slot = xcalloc(h->cap, sizeof(*h->slot));
		h->used = 0;
		for (size_t i = 0; i < old.cap; i++)
			if (old.slot[i].key) {
				size_t x = key_hash(old.slot[i].key) & (h->cap - 1);
				while (h->slot[x].key)
					x = (x + 1) & (h->cap - 1);
				h->slot[x] = old.slot[i];
				h->used++;
			}
		free(old.slot);
	}
	size_t x = key_hash(key) & (h->cap - 1);
	while (h->slot[x].key)
		x = (x + 1) & (h->cap - 1);
	h->slot[x].key = key;
	h->used++;
	return &h->slot[x];
}

static void kind_add(struct sched_las_history *h, uint64_t key, double v)
{
	struct hkind *k = kind_get(h, key);
	if (!k->samples)
		k->samples = xmalloc(sizeof(double) * SCHED_GITTINS_KEEP);
	k->samples[k->next] = v;
	k->next = (k->next + 1) % SCHED_GITTINS_KEEP;
	if (k->n < SCHED_GITTINS_KEEP)
		k->n++;
	k->added++;
}

void sched_las_history_add(struct sched_las_history *h, int cls, uint32_t queue,
			   double service_gpu_s)
{
	if (!(service_gpu_s >= 0))
		return;
	kind_add(h, kind_key(cls, false, queue), service_gpu_s);
	kind_add(h, kind_key(cls, true, 0), service_gpu_s);
}

/* k's index table, rebuilt once an eighth of its samples are new */
static const struct sched_gittins *kind_table(struct hkind *k, double quantum)
{
	if (k->n < SCHED_GITTINS_MIN_SAMPLES)
		return NULL;
	if (!k->g.npoints || k->added * 8 >= k->n) {
		double *tmp = xmalloc(sizeof(double) * (size_t)k->n);
		memcpy(tmp, k->samples, sizeof(double) * (size_t)k->n);
		sched_gittins_build(&k->g, tmp, k->n, quantum);
		free(tmp);
		k->added = 0;
	}
	return &k->g;
}

bool sched_las_history_index(struct sched_las_history *h, const struct sched_las *las, int cls,
			     uint32_t queue, double a, double *ret)
{
	*ret = 0;
	if (!h || !las || las->nlevels < 2 || !las->gittins)
		return false;
	/* the quantum: the class's minimum run of one accelerator */
	double quantum = MAX(las->min_run_s, 60);
	uint64_t keys[2] = {kind_key(cls, false, queue), kind_key(cls, true, 0)};
	for (int i = 0; i < 2; i++) {
		struct hkind *k = kind_find(h, keys[i]);
		const struct sched_gittins *g = k ? kind_table(k, quantum) : NULL;
		if (g) {
			*ret = sched_gittins_index(g, a);
			return true;
		}
	}
	return false;
}

int sched_las_history_count(const struct sched_las_history *h, int cls)
{
	const struct hkind *k = kind_find(h, kind_key(cls, true, 0));
	return k ? k->n : 0;
}

static int place_cmp(const void *a, const void *b)
{
	const struct sched_las_place *x = a, *y = b;
	if (x->level != y->level)
		return x->level - y->level;
	if (x->index != y->index)
		return x->index > y->index ? -1 : 1;
	return x->pos - y->pos;
}

void sched_las_places_sort(struct sched_las_place *p, int n)
{
	if (n > 1)
		qsort(p, (size_t)n, sizeof(*p), place_cmp);
}
