/*
 * The checkpoint interval experiment: one large training job on a cluster
 * with spare nodes, devices failing at random (Poisson, one rate per
 * device), the job requeued from its last checkpoint after each failure,
 * paying restart_cost to restore and checkpoint_cost for every checkpoint.
 * It sweeps the checkpoint interval and reports the effective training
 * time (work kept over device-time used) of each, the best one, and
 * Young/Daly's sqrt(2 C M), which `--checkpoint-interval auto` uses.
 * The job restarts in place (its other nodes kept, the failed one swapped
 * for one of its --spares or a free node, as the server does it); with no
 * spare and no free node it waits for a repair.
 *
 * The defaults are Llama 3 405B's pre-training as Meta reported it: 419
 * unexpected interruptions in 54 days on 16,384 GPUs (a job MTBF of 3.09
 * h). `tenk sim --experiment ckpt --help` lists what can be changed.
 */
#include "sim/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	C_GPUS,
	C_SPARE,
	C_SPARES,
	C_RESTART,
	C_MTBF,
	C_WORK,
	C_CKPT_COST,
	C_RESTART_COST,
	C_REPAIR,
	C_SEEDS,
	C_JSON,
	C_HELP,
	C_EXPERIMENT,
	C_N
};

static const struct tk_option opts[] = {
	{"gpus", 0, "N", "the job's GPUs, 8 per node (default 16384)"},
	{"spare-nodes", 0, "N",
	 "free nodes beyond the job's and its spares, for restarts (default 64)"},
	{"spares", 0, "N", "idle nodes the job holds to swap in (tenk submit --spares; default 0)"},
	{"restart", 0, "in-place|requeue",
	 "after a failure: keep the healthy nodes (default), or back to the queue"},
	{"mtbf-job", 0, "HOURS", "the job's mean time between interruptions (default 3.093)"},
	{"work", 0, "DURATION", "training time the job needs (default 54d)"},
	{"checkpoint-cost", 0, "DURATION", "training time one checkpoint blocks (default 60s)"},
	{"restart-cost", 0, "DURATION", "restore and start again after a failure (default 5m)"},
	{"repair", 0, "HOURS", "how long a failed device is out (default 4)"},
	{"seeds", 0, "N", "runs per interval, averaged (default 5)"},
	{"json", 0, NULL, "print the sweep as JSON"},
	{"help", 'h', NULL, "show this help"},
	{"experiment", 0, "NAME", "ckpt"},
};

static int usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "tenk sim --experiment ckpt: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see tenk sim --experiment ckpt --help)\n");
	return 2;
}

static int dur(const char *v, const char *name, int64_t *ms)
{
	int64_t s;
	if (!v)
		return 0;
	if (tk_parse_duration(v, &s) < 0 || s < 0)
		return usage("--%s: expected a duration such as 90s or 2h", name);
	*ms = s * 1000;
	return 0;
}

static int num(const char *v, const char *name, double lo, double *ret)
{
	if (!v)
		return 0;
	char *end;
	double x = strtod(v, &end);
	if (!*v || *end || !isfinite(x) || x < lo)
		return usage("--%s: expected a positive number", name);
	*ret = x;
	return 0;
}

struct point {
	int64_t interval_ms; /* 0: auto (Young/Daly per job) */
	double effective;    /* mean over seeds */
	double hours;	     /* wall time to completion, mean */
	double failures;
	double swaps;	/* failed nodes swapped for a spare */
	double spare_h; /* device-hours held idle as spares */
};

/* One job of gpus on nodes of 8, alone on the cluster, under o. */
static int run_one(const struct sim_cluster *cl, const struct sim_trace *tr,
		   const struct sim_options *o, struct point *p, int seeds, struct tk_error *err)
{
	for (int sd = 0; sd < seeds; sd++) {
		struct sim_options os = *o;
		os.seed = (uint64_t)sd + 1;
		struct sim_result res;
		if (sim_run(cl, tr, &os, &res, err) < 0)
			return -1;
		p->effective += res.effective / seeds;
		p->hours += (double)res.makespan_ms / 3600e3 / seeds;
		p->failures += (double)res.failures / seeds;
		p->swaps += (double)res.spare_swaps / seeds;
		p->spare_h += res.device_h_spare / seeds;
		sim_result_release(&res);
	}
	return 0;
}

int sim_ckpt_main(int argc, char **argv)
{
	const char *v[C_N] = {0};
	char **pos;
	int npos;
	struct tk_error err;
	if (tk_opts_parse(opts, C_N, argc, argv, false, v, &pos, &npos, &err) < 0)
		return usage("%s", err.text);
	free(pos);
	if (npos)
		return usage("%s", "unexpected argument");
	if (v[C_HELP]) {
		tk_opts_usage(opts, C_HELP + 1,
			      "usage: tenk sim --experiment ckpt [OPTIONS]\nOne large job with "
			      "random device failures, restarted from its last checkpoint: the "
			      "effective\ntraining time of each checkpoint interval, the best, and "
			      "Young/Daly's sqrt(2 C M).");
		return 0;
	}
	int64_t gpus = 16384, spare = 64, spares = 0, seeds = 5;
	double mtbf_job = 54.0 * 24 / 419, repair = 4;
	int64_t work = 54LL * 86400 * 1000, cost = 60000, restart = 300000;
	if ((v[C_GPUS] && tk_parse_int64(v[C_GPUS], 8, 8 * 20000, &gpus) < 0) ||
	    (v[C_SPARE] && tk_parse_int64(v[C_SPARE], 0, 20000, &spare) < 0) ||
	    (v[C_SPARES] && tk_parse_int64(v[C_SPARES], 0, 20000, &spares) < 0) ||
	    (v[C_SEEDS] && tk_parse_int64(v[C_SEEDS], 1, 1000, &seeds) < 0))
		return usage("%s", "--gpus (a multiple of 8), --spare-nodes, --spares and --seeds "
				   "take whole numbers");
	enum restart_mode mode = RESTART_IN_PLACE;
	if (v[C_RESTART] && (restart_mode_parse(v[C_RESTART], &mode) < 0 || mode == RESTART_AUTO))
		return usage("--restart: expected in-place or requeue, got \"%s\"", v[C_RESTART]);
	if (spares && mode == RESTART_REQUEUE)
		return usage("%s", "--spares: spares take a failed node's place in a restart in "
				   "place; --restart requeue has none");
	if (gpus % 8)
		return usage("--gpus: a multiple of 8 (nodes of 8), got %s", v[C_GPUS]);
	int r;
	if ((r = num(v[C_MTBF], "mtbf-job", 1e-3, &mtbf_job)) ||
	    (r = num(v[C_REPAIR], "repair", 0, &repair)) || (r = dur(v[C_WORK], "work", &work)) ||
	    (r = dur(v[C_CKPT_COST], "checkpoint-cost", &cost)) ||
	    (r = dur(v[C_RESTART_COST], "restart-cost", &restart)))
		return r;
	if (work <= 0 || cost <= 0)
		return usage("%s", "--work and --checkpoint-cost must be more than 0");
	/* the cluster: the job's nodes, its spares and the free nodes, 8 H100s each */
	struct sim_cluster cl = {.n = (int)(gpus / 8 + spares + spare)};
	cl.nodes = xcalloc((size_t)cl.n, sizeof(*cl.nodes));
	for (int i = 0; i < cl.n; i++) {
		struct sim_node *n = &cl.nodes[i];
		snprintf(n->name, sizeof(n->name), "n%05d", i);
		snprintf(n->model, sizeof(n->model), "H100");
		n->gpus = 8;
		n->cpus = 96;
		n->cpu_milli = 96000;
		cl.gpus += 8;
	}
	struct sim_trace tr;
	memset(&tr, 0, sizeof(tr));
	tr.timed = true;
	snprintf(tr.source, sizeof(tr.source), "synthetic");
	sim_intern(&tr.queues, &tr.nqueues, "default");
	tr.jobs = xcalloc(1, sizeof(*tr.jobs));
	tr.n = 1;
	tr.alloc = 1;
	tr.jobs[0] = (struct sim_job){.work_ms = work,
				      .nodes = (int)(gpus / 8),
				      .tasks_per_node = 8,
				      .gpu_milli = MODEL_MILLI,
				      .cpu_milli = 1000,
				      .cls = -1,
				      .line = 1,
				      .pool = -1,
				      .spread = -1,
				      .within = -1};
	struct sim_options o;
	memset(&o, 0, sizeof(o));
	sched_config_default(&o.sched);
	o.mtbf_gpu_h = mtbf_job * (double)gpus;
	o.repair_h = repair;
	o.checkpoint_cost_ms = cost;
	o.restart_cost_ms = restart;
	o.pass_interval_ms = 0;
	o.restart = mode;
	o.spares = (int)spares;
	double m_ms = mtbf_job * 3600e3;
	int64_t young = llround(sqrt(2.0 * (double)cost * m_ms));
	/* the sweep: geometric from a twentieth of Young/Daly's to twenty times,
	 * then auto */
	enum { NPTS = 25 };
	struct point pts[NPTS + 1];
	memset(pts, 0, sizeof(pts));
	int rc = 0;
	for (int i = 0; i <= NPTS && rc == 0; i++) {
		struct sim_options oi = o;
		if (i == NPTS) {
			oi.checkpoint_auto = true;
		} else {
			double f = pow(20.0, (double)(i - NPTS / 2) / (NPTS / 2));
			pts[i].interval_ms = MAX(1000, llround((double)young * f) / 1000 * 1000);
			oi.checkpoint_s = pts[i].interval_ms / 1000;
		}
		if (run_one(&cl, &tr, &oi, &pts[i], (int)seeds, &err) < 0) {
			fprintf(stderr, "tenk sim --experiment ckpt: %s\n", err.text);
			rc = 1;
		}
	}
	if (rc == 0) {
		int best = 0;
		for (int i = 1; i < NPTS; i++)
			if (pts[i].effective > pts[best].effective)
				best = i;
		if (v[C_JSON]) {
			json_t *sweep = json_array();
			for (int i = 0; i <= NPTS; i++)
				json_array_append_new(
					sweep,
					json_pack(
						"{s:o, s:f, s:f, s:f, s:f, s:f, s:f}", "interval_s",
						i == NPTS ? json_string("auto")
							  : json_integer(pts[i].interval_ms / 1000),
						"effective", pts[i].effective, "hours",
						pts[i].hours, "work_over_wall",
						(double)work / 3600e3 / pts[i].hours, "failures",
						pts[i].failures, "spare_swaps", pts[i].swaps,
						"spare_device_hours", pts[i].spare_h));
			json_t *o2 = json_pack(
				"{s:I, s:f, s:I, s:I, s:I, s:I, s:f, s:I, s:f, s:o}", "gpus",
				(json_int_t)gpus, "mtbf_job_h", mtbf_job, "checkpoint_cost_s",
				(json_int_t)(cost / 1000), "restart_cost_s",
				(json_int_t)(restart / 1000), "young_daly_s",
				(json_int_t)(young / 1000), "best_interval_s",
				(json_int_t)(pts[best].interval_ms / 1000), "best_effective",
				pts[best].effective, "seeds", (json_int_t)seeds, "auto_effective",
				pts[NPTS].effective, "sweep", sweep);
			json_object_set_new(o2, "spares", json_integer(spares));
			json_object_set_new(o2, "free_nodes", json_integer(spare));
			json_object_set_new(o2, "restart", json_string(restart_mode_name(mode)));
			char *text = json_dumps(o2, JSON_INDENT(2));
			puts(text);
			free(text);
			json_decref(o2);
		} else {
			printf("one job of %lld GPUs, MTBF %.2f h (one GPU's %.0f h), checkpoint "
			       "%llds, "
			       "restart %llds (%s), %lld spares, %lld free nodes, %lld seeds\n",
			       (long long)gpus, mtbf_job, o.mtbf_gpu_h, (long long)(cost / 1000),
			       (long long)(restart / 1000), restart_mode_name(mode),
			       (long long)spares, (long long)spare, (long long)seeds);
			printf("%12s %10s %10s %10s %9s %7s\n", "INTERVAL", "EFFECTIVE",
			       "WORK/WALL", "HOURS", "FAILURES", "SWAPS");
			for (int i = 0; i <= NPTS; i++) {
				char iv[32];
				if (i == NPTS)
					snprintf(iv, sizeof(iv), "auto");
				else
					tk_format_duration(pts[i].interval_ms / 1000, iv,
							   sizeof(iv));
				printf("%12s %9.2f%% %9.2f%% %10.1f %9.1f %7.1f%s\n", iv,
				       pts[i].effective * 100,
				       100.0 * (double)work / 3600e3 / pts[i].hours, pts[i].hours,
				       pts[i].failures, pts[i].swaps, i == best ? "  <- best" : "");
			}
			char yd[32];
			tk_format_duration(young / 1000, yd, sizeof(yd));
			printf("Young/Daly sqrt(2 C M) = %s: %.2f%% effective (best %.2f%%)\n", yd,
			       pts[NPTS].effective * 100, pts[best].effective * 100);
		}
	}
	sim_trace_release(&tr);
	free(cl.nodes);
	return rc;
}
