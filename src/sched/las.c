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
	if (!las || las->nlevels < 2 || las->promote <= 0 || ran_ms <= 0)
		return false;
	return (double)waited_ms >= las->promote * (double)ran_ms;
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
		l->promote = cs->las_promote;
		l->min_run_s = (double)cs->las_min_run_s;
		l->max_loss_s = (double)cs->las_max_loss_s;
	}
	return sched_classes_expand(base, ret_las, cfg->nclasses, ret, ret_first);
}
