/*
 * What an attempt's accelerators used on this node, for its accounting
 * record: energy as the difference of NVML's total-energy counter from the
 * attempt's start (integrated power where a card has no counter), and busy
 * time as utilization times wall time, sampled each second. A fraction of
 * a card is charged its share of both.
 */
#include "internal.h"

void agent__usage_start(struct taskgroup *g)
{
	struct agent *a = g->a;
	g->usage.energy_counter = g->ndevs > 0 && agent__nvml_count(a->nvml) > 0;
	g->usage.energy_power_mj = -1; /* no power sample yet */
	g->usage.sampled_ms = tk_mono_ms();
	for (int k = 0; k < g->ndevs; k++) {
		g->usage.nvml_idx[k] = -1;
		for (int i = 0; i < agent__nvml_count(a->nvml); i++)
			if (a->inv.accel[i].index == g->devs[k])
				g->usage.nvml_idx[k] = i;
		struct gpu_sample s;
		if (g->usage.nvml_idx[k] >= 0)
			agent__nvml_read(a->nvml, g->usage.nvml_idx[k], &s);
		if (g->usage.nvml_idx[k] < 0 || !(s.have & GPU_ENERGY))
			g->usage.energy_counter = false;
		else
			g->usage.energy_base_mj[k] = s.energy_mj;
	}
}

static double share(const struct taskgroup *g)
{
	return g->milli > 0 ? g->milli / (double)MODEL_MILLI : 1.0;
}

void agent__usage_tick(struct agent *a)
{
	if (!agent__nvml_count(a->nvml))
		return;
	int64_t now = tk_mono_ms();
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		struct taskgroup *g = v;
		if (!g->nrunning || !g->ndevs || !g->usage.sampled_ms)
			continue;
		double dt = (double)(now - g->usage.sampled_ms);
		g->usage.sampled_ms = now;
		for (int k = 0; k < g->ndevs; k++) {
			if (g->usage.nvml_idx[k] < 0)
				continue;
			struct gpu_sample s;
			agent__nvml_read(a->nvml, g->usage.nvml_idx[k], &s);
			if (s.have & GPU_UTIL)
				g->usage.busy_ms += dt * s.util_pct / 100.0 * share(g);
			if (s.have & GPU_POWER)
				g->usage.energy_power_mj = MAX(g->usage.energy_power_mj, 0) +
							   dt / 1000.0 * s.power_mw * share(g);
		}
	}
}

void agent__usage_of(const struct taskgroup *g, int64_t *energy_mj, int64_t *busy_ms)
{
	struct agent *a = g->a;
	*busy_ms = (int64_t)g->usage.busy_ms;
	*energy_mj = -1;
	if (!g->ndevs || !agent__nvml_count(a->nvml))
		return;
	if (!g->usage.energy_counter) {
		*energy_mj = g->usage.energy_power_mj < 0 ? -1 : (int64_t)g->usage.energy_power_mj;
		return;
	}
	double sum = 0;
	for (int k = 0; k < g->ndevs; k++) {
		struct gpu_sample s;
		agent__nvml_read(a->nvml, g->usage.nvml_idx[k], &s);
		if (s.energy_mj >= g->usage.energy_base_mj[k])
			sum += (double)(s.energy_mj - g->usage.energy_base_mj[k]);
	}
	*energy_mj = (int64_t)(sum * share(g));
}
