/*
 * Idle accelerators at their lowest power limit (issue 45, point 6): a
 * device that no attempt here has held for the cluster's
 * "idle_power_after" (10 min by default, sent at registration; 0: never)
 * is set through NVML to the least limit its constraints allow, and set
 * back to the limit it had before any work is started on it (the agent
 * does that before the attempt's shim starts) and when the agent stops.
 *
 * What that saved is counted as the draw it had when it was lowered less
 * what it draws since, each second, never below zero: the energy an idle
 * card would have spent at its old limit, as near as the agent can tell.
 * A node whose NVML cannot set limits (not root, a driver that refuses)
 * is left as it is, said once.
 */
#include "internal.h"

#include <stdio.h>

/* The NVML position of the device of inventory index idx; -1: none. */
static int nvml_pos(const struct agent *a, int idx)
{
	for (int i = 0; i < a->inv.naccel && i < agent__nvml_count(a->nvml); i++)
		if (a->inv.accel[i].index == idx)
			return i;
	return -1;
}

static bool held(struct agent *a, int idx)
{
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		const struct taskgroup *g = v;
		for (int k = 0; k < g->ndevs; k++)
			if (g->devs[k] == idx)
				return true;
	}
	return false;
}

static void raise_limit(struct agent *a, int i)
{
	if (!a->idle[i].lowered)
		return;
	int r = agent__nvml_set_limit(a->nvml, i, a->idle[i].saved_mw);
	if (r < 0)
		log_warn("accelerator %d: its power limit could not be set back to %u W (%d)",
			 a->inv.accel[i].index, a->idle[i].saved_mw / 1000, r);
	else
		log_info("accelerator %d: power limit back to %u W", a->inv.accel[i].index,
			 a->idle[i].saved_mw / 1000);
	a->idle[i].lowered = false;
}

void agent__idle_power_tick(struct agent *a, int64_t now)
{
	int n = agent__nvml_count(a->nvml);
	for (int i = 0; i < n && i < a->inv.naccel; i++) {
		struct gpu_sample s;
		if (held(a, a->inv.accel[i].index)) {
			a->idle[i].since_ms = 0;
			raise_limit(a, i); /* (wake did, unless it came another way) */
			continue;
		}
		if (!a->idle[i].since_ms)
			a->idle[i].since_ms = now;
		if (a->idle[i].lowered) {
			agent__nvml_read(a->nvml, i, &s);
			if ((s.have & GPU_POWER) && a->idle[i].before_mw > s.power_mw)
				a->idle[i].saved_mj += (double)(a->idle[i].before_mw - s.power_mw) *
						       (double)(now - a->idle[i].sampled_ms) /
						       1000.0;
			a->idle[i].sampled_ms = now;
			continue;
		}
		if (a->idle_power_after_ms <= 0 ||
		    now - a->idle[i].since_ms < a->idle_power_after_ms)
			continue;
		unsigned mw, min;
		if (!agent__nvml_limit(a->nvml, i, &mw, &min) || mw <= min)
			continue;
		int r = agent__nvml_set_limit(a->nvml, i, min);
		if (r < 0) {
			if (!a->idle[i].min_mw)
				log_warn("accelerator %d: idle, but its power limit cannot be set "
					 "(%d); left as it is",
					 a->inv.accel[i].index, r);
			a->idle[i].min_mw = min; /* (said once) */
			continue;
		}
		agent__nvml_read(a->nvml, i, &s);
		a->idle[i].lowered = true;
		a->idle[i].saved_mw = mw;
		a->idle[i].min_mw = min;
		a->idle[i].before_mw = (s.have & GPU_POWER) ? s.power_mw : 0;
		a->idle[i].sampled_ms = now;
		a->idle_lowerings++;
		log_info("accelerator %d: idle for %lld s, power limit %u W (was %u W)",
			 a->inv.accel[i].index, (long long)(now - a->idle[i].since_ms) / 1000,
			 min / 1000, mw / 1000);
	}
}

void agent__idle_power_wake(struct agent *a, const int *devs, int n)
{
	for (int k = 0; k < n; k++) {
		int i = nvml_pos(a, devs[k]);
		if (i >= 0) {
			raise_limit(a, i);
			a->idle[i].since_ms = 0;
		}
	}
}

void agent__idle_power_restore(struct agent *a)
{
	for (int i = 0; i < agent__nvml_count(a->nvml) && i < MODEL_MAX_ACCELS; i++)
		raise_limit(a, i);
}

void agent__idle_power_metrics(struct agent *a, struct strbuf *b)
{
	int n = agent__nvml_count(a->nvml);
	if (!n)
		return;
	strbuf_addf(b, "# HELP tenk_gpu_idle_power_limited 1 while the accelerator, idle, is "
		       "held to its lowest power limit (idle_power_after).\n"
		       "# TYPE tenk_gpu_idle_power_limited gauge\n");
	for (int i = 0; i < n && i < a->inv.naccel; i++)
		strbuf_addf(b, "tenk_gpu_idle_power_limited{gpu=\"%d\"} %d\n",
			    a->inv.accel[i].index, a->idle[i].lowered);
	strbuf_addf(b, "# HELP tenk_gpu_idle_power_saved_joules_total Energy the lowered limit "
		       "saved: the draw when it was lowered less the draw since.\n"
		       "# TYPE tenk_gpu_idle_power_saved_joules_total counter\n");
	for (int i = 0; i < n && i < a->inv.naccel; i++)
		strbuf_addf(b, "tenk_gpu_idle_power_saved_joules_total{gpu=\"%d\"} %.3f\n",
			    a->inv.accel[i].index, a->idle[i].saved_mj / 1000.0);
	strbuf_addf(b,
		    "# HELP tenk_gpu_idle_power_lowerings_total Times an idle accelerator's "
		    "power limit was lowered.\n"
		    "# TYPE tenk_gpu_idle_power_lowerings_total counter\n"
		    "tenk_gpu_idle_power_lowerings_total %llu\n",
		    (unsigned long long)a->idle_lowerings);
}
