/*
 * `tenk sim`: replays a job trace on a cluster description through the
 * production scheduler and reports what happened. `tenk sim --experiment
 * fgd` runs the ATC'23 fragmentation experiment instead
 * (experiments/fgd.c).
 */
#include "cmd.h"
#include "internal.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	O_CLUSTER,
	O_TRACE,
	O_SYNTHETIC,
	O_LOAD,
	O_HEAVY,
	O_SAMPLE,
	O_CONFIG,
	O_QUEUES,
	O_POLICY,
	O_SEED,
	O_MTBF,
	O_REPAIR,
	O_CKPT,
	O_CKPT_COST,
	O_RESTART_COST,
	O_PASS,
	O_UNTIL,
	O_NO_PREEMPT,
	O_NO_BACKFILL,
	O_NO_RESV,
	O_PATIENCE,
	O_TIME_LIMITS,
	O_PLACEMENT,
	O_ORDER,
	O_LAS_LIMITS,
	O_LAS_MAX_STRETCH,
	O_LAS_MIN_RUN,
	O_LAS_MAX_LOSS,
	O_LAS_INDEX,
	O_CKPT_PREEMPT,
	O_RESTART,
	O_SPARES,
	O_JSON,
	O_SVG,
	O_JOBS,
	O_EXPERIMENT,
	O_HELP,
	O_N
};

static const struct tk_option opts[] = {
	{"cluster", 0, "FILE", "node list (openb, spot-GPU 2026 or tenk format)"},
	{"trace", 0, "FILE", "job trace (openb pod list or tenk's job history)"},
	{"synthetic", 0, "N", "instead of --trace: N synthetic jobs"},
	{"load", 0, "F",
	 "devices asked for, as a share of the cluster (synthetic: default 0.9); with --trace, "
	 "its arrivals are drawn again (Poisson at that load), shapes and run times kept"},
	{"heavy-tail", 0, NULL,
	 "synthetic: a research cluster's run times (median 30 minutes, sigma 2, at most 30 "
	 "days) instead of median 40 minutes, sigma 1, at most a day"},
	{"sample", 0, "N",
	 "with --trace and --load: N jobs drawn from the trace at random, for a longer stream "
	 "shaped like it"},
	{"config", 0, "FILE", "the server's config.json (classes); default: the built-in classes"},
	{"queues", 0, "FILE", "JSON list of queues with quotas: [{\"name\", \"gpus\", ...}]"},
	{"policy", 0, "NAME",
	 "placement: fgd (default), bestfit, pack, or the paper's baselines random, dotprod, "
	 "clustering"},
	{"seed", 0, "N", "seed for failures and synthetic jobs (default 1)"},
	{"mtbf-gpu", 0, "HOURS", "mean time between failures of one device (default: none)"},
	{"repair", 0, "HOURS", "how long a failed device is out (default 4)"},
	{"checkpoint-interval", 0, "DURATION",
	 "jobs checkpoint this often, \"auto\": Young/Daly's sqrt(2 C M) for each job's "
	 "MTBF M, or \"none\" (default: none)"},
	{"checkpoint-cost", 0, "DURATION", "training time one checkpoint blocks (default 0)"},
	{"restart-cost", 0, "DURATION",
	 "restore and start again, at each attempt after the first (default 0)"},
	{"pass-interval", 0, "DURATION",
	 "scheduling passes at most this often (default 0: "
	 "after every event)"},
	{"until", 0, "DURATION", "stop at this virtual time after the first submission"},
	{"no-preemption", 0, NULL, "never preempt"},
	{"no-backfill", 0, NULL, "strict order: nothing overtakes a waiting job of its class"},
	{"no-reservations", 0, NULL,
	 "greedy: a job that cannot start holds nothing; any later one that fits starts"},
	{"resv-patience", 0, "DURATION",
	 "a first waiting job whose start is unknown (running jobs without time limits in its "
	 "way) holds idle resources only once it has waited this long (0: at once; default: "
	 "never)"},
	{"time-limits", 0, "trace|none|estimated",
	 "the jobs' time limits: as the trace (or synthetic stream) gives them, none at all, or "
	 "as users estimate them (round values, mostly far over the run time)"},
	{"placement", 0, "dense|fastest",
	 "single-node jobs of every kind where they least fragment what is left, or on the "
	 "fastest model that fits first (only fractions scored); default: the configuration's "
	 "(dense)"},
	{"order", 0, "fifo|las",
	 "every class's order: by submission, or by least attained service (Tiresias' 2D-LAS: "
	 "levels by accelerator-hours received, preemptive within the class); default: the "
	 "configuration's"},
	{"las-limits", 0, "H,H,...",
	 "with las: the levels' limits in accelerator-hours, ascending (default 1,16,128)"},
	{"las-max-stretch", 0, "K",
	 "with las: a job waiting K times as long as it has run so far goes back to the "
	 "first level (default 4; 0: never)"},
	{"las-min-run", 0, "DURATION",
	 "with las: a running job is preempted for an earlier level only after its attempt ran "
	 "this long (default 1h)"},
	{"las-max-loss", 0, "DURATION|none",
	 "with las: ... and only while it would lose at most this (its work since its last "
	 "checkpoint, and its restore; default 10m; none: whatever it loses)"},
	{"las-index", 0, "gittins|levels",
	 "with las: within a level, waiting jobs by the Gittins index of their service under "
	 "the finished jobs of their kind (class, queue, accelerators), where 30 or more have "
	 "finished (default), or by submission (levels)"},
	{"checkpoint-on-preempt", 0, NULL,
	 "a preempted job saves its state in its grace period: it keeps all its work and pays "
	 "one --checkpoint-cost"},
	{"restart", 0, "auto|in-place|requeue",
	 "after a failure, the next attempt: in place (healthy nodes kept, the failed one "
	 "swapped) for gangs of several nodes (auto, the server's default), for every job, or "
	 "none (back to the queue)"},
	{"spares", 0, "N",
	 "each gang that restarts in place holds N idle nodes like its own to swap in (as "
	 "tenk submit --spares); the config's \"spares\" is the cluster's pool"},
	{"json", 0, NULL, "print the summary as JSON"},
	{"svg", 0, "FILE", "draw utilization and queue length over time to FILE"},
	{"jobs", 0, "FILE", "write each job's wait, start, end and devices to FILE (CSV)"},
	{"experiment", 0, "NAME",
	 "run an experiment instead: fgd or ckpt (see --experiment NAME --help)"},
	{"help", 'h', NULL, "show this help"},
};

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "tenk sim: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: tenk sim --cluster FILE (--trace FILE | --synthetic N) [OPTIONS] "
			"(see tenk sim --help)\n");
	return 2;
}

static char *read_file(const char *path, struct tk_error *err)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		tk_errorf(err, -errno, "%s: %s", path, strerror(errno));
		return NULL;
	}
	struct strbuf sb;
	strbuf_init(&sb);
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		if (sb.len + n > (1u << 20)) {
			fclose(f);
			strbuf_release(&sb);
			tk_errorf(err, -E2BIG, "%s: larger than 1 MiB", path);
			return NULL;
		}
		strbuf_add(&sb, buf, n);
	}
	fclose(f);
	return strbuf_detach(&sb);
}

static int load_queues(const char *path, struct queue_spec **ret, int *n, struct tk_error *err)
{
	char *text = read_file(path, err);
	if (!text)
		return -EINVAL;
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	free(text);
	if (!j)
		return tk_errorf(err, -EINVAL, "%s:%d:%d: %s", path, je.line, je.column, je.text);
	if (!json_is_array(j) || json_array_size(j) > MODEL_MAX_QUEUES) {
		json_decref(j);
		return tk_errorf(err, -EINVAL, "%s: expected a JSON list of at most %d queues",
				 path, MODEL_MAX_QUEUES);
	}
	*n = (int)json_array_size(j);
	*ret = xcalloc((size_t)*n + 1, sizeof(**ret));
	for (int i = 0; i < *n; i++) {
		struct tk_error e2;
		if (queue_spec_unpack(json_array_get(j, (size_t)i), &(*ret)[i], &e2) < 0) {
			json_decref(j);
			free(*ret);
			*ret = NULL;
			return tk_errorf(err, -EINVAL, "%s: queue %d: %s", path, i + 1, e2.text);
		}
	}
	json_decref(j);
	return 0;
}

static int duration_ms(const char *name, const char *v, int64_t *ret)
{
	int64_t s;
	if (tk_parse_duration(v, &s) < 0)
		return usage("--%s: expected a duration such as 30m or 1h, got \"%s\"", name, v);
	*ret = s * 1000;
	return 0;
}

static int number(const char *name, const char *v, double lo, double hi, double *ret)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (!*v || *end || errno || !isfinite(x) || x < lo || x > hi)
		return usage("--%s: expected a number from %g to %g, got \"%s\"", name, lo, hi, v);
	*ret = x;
	return 0;
}

/* --order, --las-limits, --las-max-stretch, --las-min-run, --las-max-loss and
 * --las-index over the configuration's classes. */
static int order_options(const char *order, const char *limits, const char *stretch,
			 const char *min_run, const char *max_loss, const char *index,
			 struct sched_config *c)
{
	if (order && strcmp(order, "fifo") != 0 && strcmp(order, "las") != 0)
		return usage("--order: expected fifo or las, got \"%s\"", order);
	if (index && strcmp(index, "gittins") != 0 && strcmp(index, "levels") != 0)
		return usage("--las-index: expected gittins or levels, got \"%s\"", index);
	int r;
	bool any = false;
	for (int k = 0; k < c->nclasses; k++) {
		struct class_spec *cs = &c->classes[k];
		if (order && strcmp(order, "fifo") == 0) {
			cs->las = false;
		} else if (order && !cs->las) {
			static const double def[] = MODEL_LAS_DEFAULT_LIMITS;
			cs->las = true;
			cs->las_nlimits = MODEL_LAS_DEFAULT_NLIMITS;
			memcpy(cs->las_limit_gpu_h, def, sizeof(def));
			cs->las_max_stretch = MODEL_LAS_DEFAULT_MAX_STRETCH;
			cs->las_min_run_s = MODEL_LAS_DEFAULT_MIN_RUN_S;
			cs->las_max_loss_s = MODEL_LAS_DEFAULT_MAX_LOSS_S;
			cs->las_gittins = MODEL_LAS_DEFAULT_GITTINS;
		}
		any |= cs->las;
	}
	if ((limits || stretch || min_run || max_loss || index) && !any)
		return usage("--las-limits, --las-max-stretch, --las-min-run, --las-max-loss and "
			     "--las-index need --order las");
	int64_t min_ms = 0, loss_ms = -1000;
	if (min_run && (r = duration_ms("las-min-run", min_run, &min_ms)))
		return r;
	if (max_loss && strcmp(max_loss, "none") != 0 &&
	    (r = duration_ms("las-max-loss", max_loss, &loss_ms)))
		return r;
	double lim[MODEL_LAS_MAX_LEVELS - 1];
	int n = 0;
	for (const char *p = limits; p && *p;) {
		char *end;
		errno = 0;
		double x = strtod(p, &end);
		if (end == p || errno || !(x > 0 && x <= 1e9) || (n && x <= lim[n - 1]) ||
		    n == MODEL_LAS_MAX_LEVELS - 1 || (*end && *end != ','))
			return usage("--las-limits: expected 1 to %d ascending accelerator-hours "
				     "such as 1,16, got \"%s\"",
				     MODEL_LAS_MAX_LEVELS - 1, limits);
		lim[n++] = x;
		p = *end ? end + 1 : end;
	}
	if (limits && !n)
		return usage("--las-limits: expected accelerator-hours such as 1,16");
	double k = 0;
	if (stretch && (r = number("las-max-stretch", stretch, 0, 1e6, &k)))
		return r;
	int levels = 0;
	for (int i = 0; i < c->nclasses; i++) {
		struct class_spec *cs = &c->classes[i];
		if (cs->las && n) {
			memcpy(cs->las_limit_gpu_h, lim, sizeof(double) * (size_t)n);
			cs->las_nlimits = n;
		}
		if (cs->las && stretch)
			cs->las_max_stretch = k;
		if (cs->las && min_run)
			cs->las_min_run_s = min_ms / 1000;
		if (cs->las && max_loss)
			cs->las_max_loss_s = loss_ms / 1000;
		if (cs->las && index)
			cs->las_gittins = strcmp(index, "gittins") == 0;
		levels += class_spec_levels(cs);
	}
	if (levels > MODEL_MAX_CLASSES)
		return usage("--order las: %d classes and levels in all, at most %d", levels,
			     MODEL_MAX_CLASSES);
	return 0;
}

int sim_main(const struct tk_command *cmd, int argc, char **argv)
{
	/* a pass allocates and frees the same large arrays thousands of times:
	 * keep them in the heap instead of mapping fresh zeroed pages each time */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--experiment") == 0 ||
		    strncmp(argv[i], "--experiment=", 13) == 0) {
			const char *name = argv[i][12] == '=' ? argv[i] + 13
					   : i + 1 < argc     ? argv[i + 1]
							      : "";
			if (strcmp(name, "ckpt") == 0)
				return sim_ckpt_main(argc, argv);
			if (strcmp(name, "fgd") != 0)
				return usage("--experiment: the experiments are fgd and ckpt, got "
					     "\"%s\"",
					     name);
			return sim_fgd_main(argc, argv);
		}
	const char *v[O_N] = {0};
	char **pos;
	int npos;
	struct tk_error err;
	if (tk_opts_parse(opts, O_N, argc, argv, false, v, &pos, &npos, &err) < 0)
		return usage("%s", err.text);
	free(pos);
	if (npos)
		return usage("unexpected argument");
	if (v[O_HELP]) {
		tk_opts_usage(
			opts, O_N,
			"usage: tenk sim --cluster FILE (--trace FILE | --synthetic N) "
			"[OPTIONS]\nReplays a job trace on a cluster through tenk's scheduler "
			"with a virtual\nclock and reports waits, completion times, "
			"utilization, fragmentation and\neach queue's share.");
		return 0;
	}
	if (!v[O_CLUSTER])
		return usage("--cluster FILE is required");
	if (!v[O_TRACE] == !v[O_SYNTHETIC])
		return usage("give one of --trace FILE and --synthetic N");
	if (v[O_HEAVY] && !v[O_SYNTHETIC])
		return usage("--heavy-tail: only with --synthetic");
	int64_t sample = 0;
	if (v[O_SAMPLE] && (!v[O_TRACE] || !v[O_LOAD]))
		return usage("--sample: only with --trace and --load");
	if (v[O_SAMPLE] && tk_parse_int64(v[O_SAMPLE], 1, SIM_MAX_JOBS, &sample) < 0)
		return usage("--sample: expected a number of jobs from 1 to %d, got \"%s\"",
			     SIM_MAX_JOBS, v[O_SAMPLE]);
	struct sim_options o;
	memset(&o, 0, sizeof(o));
	sched_config_default(&o.sched);
	o.repair_h = 4;
	o.seed = 1;
	o.keep_devices = v[O_JOBS] != NULL;
	int r;
	int64_t synth = 0;
	double load = 0.9;
	if (v[O_SYNTHETIC] && tk_parse_int64(v[O_SYNTHETIC], 1, SIM_MAX_JOBS, &synth) < 0)
		return usage("--synthetic: expected a number of jobs from 1 to %d, got \"%s\"",
			     SIM_MAX_JOBS, v[O_SYNTHETIC]);
	if (v[O_LOAD] && (r = number("load", v[O_LOAD], 0.01, 100, &load)))
		return r;
	if (v[O_SEED]) {
		int64_t s;
		if (tk_parse_int64(v[O_SEED], 0, INT64_MAX, &s) < 0)
			return usage("--seed: expected a non-negative integer, got \"%s\"",
				     v[O_SEED]);
		o.seed = (uint64_t)s;
	}
	if (v[O_MTBF] && (r = number("mtbf-gpu", v[O_MTBF], 0.001, 1e9, &o.mtbf_gpu_h)))
		return r;
	if (v[O_REPAIR] && (r = number("repair", v[O_REPAIR], 0, 1e6, &o.repair_h)))
		return r;
	int64_t ms = 0;
	if (v[O_CKPT] && strcmp(v[O_CKPT], "auto") == 0) {
		o.checkpoint_auto = true;
	} else if (v[O_CKPT] && strcmp(v[O_CKPT], "none") != 0) {
		if ((r = duration_ms("checkpoint-interval", v[O_CKPT], &ms)))
			return r;
		if (ms <= 0)
			return usage("--checkpoint-interval: must be more than 0");
		o.checkpoint_s = ms / 1000;
	}
	if (v[O_CKPT_COST] &&
	    (r = duration_ms("checkpoint-cost", v[O_CKPT_COST], &o.checkpoint_cost_ms)))
		return r;
	if (v[O_RESTART_COST] &&
	    (r = duration_ms("restart-cost", v[O_RESTART_COST], &o.restart_cost_ms)))
		return r;
	if (o.checkpoint_auto && (o.mtbf_gpu_h <= 0 || o.checkpoint_cost_ms <= 0))
		return usage("--checkpoint-interval auto: needs --mtbf-gpu and --checkpoint-cost");
	if (v[O_PASS] && (r = duration_ms("pass-interval", v[O_PASS], &o.pass_interval_ms)))
		return r;
	int64_t until = 0;
	if (v[O_UNTIL] && (r = duration_ms("until", v[O_UNTIL], &until)))
		return r;
	if (v[O_POLICY]) {
		if (strcmp(v[O_POLICY], "fgd") == 0)
			o.policy.frac = SCHED_FRAC_FGD;
		else if (strcmp(v[O_POLICY], "bestfit") == 0)
			o.policy.frac = SCHED_FRAC_BESTFIT;
		else if (strcmp(v[O_POLICY], "pack") == 0)
			o.policy.frac = SCHED_FRAC_PACK;
		else if (strcmp(v[O_POLICY], "random") == 0)
			o.policy.frac = SCHED_FRAC_RANDOM;
		else if (strcmp(v[O_POLICY], "dotprod") == 0)
			o.policy.frac = SCHED_FRAC_DOTPROD;
		else if (strcmp(v[O_POLICY], "clustering") == 0)
			o.policy.frac = SCHED_FRAC_CLUSTER;
		else
			return usage("--policy: expected fgd, bestfit, pack, random, dotprod or "
				     "clustering, got \"%s\"",
				     v[O_POLICY]);
	}
	o.policy.no_preemption = v[O_NO_PREEMPT] != NULL;
	o.policy.no_backfill = v[O_NO_BACKFILL] != NULL;
	o.policy.no_reservations = v[O_NO_RESV] != NULL;
	if (v[O_PATIENCE]) {
		int64_t pat = 0;
		if ((r = duration_ms("resv-patience", v[O_PATIENCE], &pat)))
			return r;
		o.policy.resv_patience_ms = pat > 0 ? pat : -1;
	}
	const char *tl = v[O_TIME_LIMITS] ? v[O_TIME_LIMITS] : "trace";
	if (strcmp(tl, "trace") != 0 && strcmp(tl, "none") != 0 && strcmp(tl, "estimated") != 0)
		return usage("--time-limits: expected trace, none or estimated, got \"%s\"", tl);
	const char *pl = v[O_PLACEMENT];
	bool fastest = false;
	if (pl && sched_config_placement_parse(pl, &fastest) < 0)
		return usage("--placement: expected dense or fastest, got \"%s\"", pl);
	if (v[O_CONFIG]) {
		char *text = read_file(v[O_CONFIG], &err);
		if (!text || sched_config_load_json(&o.sched, text, &err) < 0) {
			free(text);
			fprintf(stderr, "tenk sim: %s%s%s\n", text ? v[O_CONFIG] : "",
				text ? ": " : "", err.text);
			return 1;
		}
		free(text);
	}
	if (pl)
		o.sched.placement_fastest = fastest;
	/* what the flags leave open is the configuration's */
	struct sched_policy from;
	sched_policy_of_config(&o.sched, &from);
	if (!v[O_PATIENCE])
		o.policy.resv_patience_ms = from.resv_patience_ms;
	o.policy.score_every_node = from.score_every_node;
	o.policy.score_before_speed = from.score_before_speed;
	if ((r = order_options(v[O_ORDER], v[O_LAS_LIMITS], v[O_LAS_MAX_STRETCH], v[O_LAS_MIN_RUN],
			       v[O_LAS_MAX_LOSS], v[O_LAS_INDEX], &o.sched)))
		return r;
	o.checkpoint_on_preempt = v[O_CKPT_PREEMPT] != NULL;
	if (v[O_RESTART] && restart_mode_parse(v[O_RESTART], &o.restart) < 0)
		return usage("--restart: expected auto, in-place or requeue, got \"%s\"",
			     v[O_RESTART]);
	if (v[O_SPARES]) {
		int64_t n;
		if (tk_parse_int64(v[O_SPARES], 0, MODEL_MAX_NODES - 1, &n) < 0)
			return usage(
				"--spares: expected a number of nodes from 0 to %d, got \"%s\"",
				MODEL_MAX_NODES - 1, v[O_SPARES]);
		if (n && o.restart == RESTART_REQUEUE)
			return usage("--spares: spares take a failed node's place in a restart in "
				     "place; --restart requeue has none");
		o.spares = (int)n;
	}
	struct queue_spec *queues = NULL;
	if (v[O_QUEUES]) {
		if (load_queues(v[O_QUEUES], &queues, &o.nqueues, &err) < 0) {
			fprintf(stderr, "tenk sim: %s\n", err.text);
			return 1;
		}
		o.queues = queues;
	}
	struct catalogue cat;
	catalogue_init(&cat);
	struct sim_cluster cl;
	struct sim_trace tr;
	memset(&tr, 0, sizeof(tr));
	int rc = 1;
	if (sim_cluster_load(v[O_CLUSTER], &cat, &cl, &err) < 0) {
		fprintf(stderr, "tenk sim: %s\n", err.text);
		goto out_cat;
	}
	if (v[O_TRACE]) {
		if (sim_trace_load(v[O_TRACE], &tr, &err) < 0) {
			fprintf(stderr, "tenk sim: %s\n", err.text);
			goto out_cl;
		}
	} else {
		sim_trace_synthetic(&tr, (int)synth, o.seed, &cl, load, v[O_HEAVY] != NULL);
	}
	if (v[O_TRACE] && v[O_LOAD]) {
		if (!tr.timed) {
			fprintf(stderr, "tenk sim: %s: --load needs a trace with run times\n",
				v[O_TRACE]);
			goto out_tr;
		}
		if (sample)
			sim_trace_sample(&tr, (int)sample, o.seed);
		sim_trace_retime(&tr, load, &cl, o.seed);
	}
	if (strcmp(tl, "none") == 0)
		for (int i = 0; i < tr.n; i++)
			tr.jobs[i].time_limit_s = 0;
	else if (strcmp(tl, "estimated") == 0)
		sim_trace_estimate_limits(&tr, o.seed);
	if (until) {
		int64_t first = INT64_MAX;
		for (int i = 0; i < tr.n; i++)
			first = MIN(first, tr.jobs[i].submit_ms);
		o.end_ms = first + until;
	}
	struct sim_result res;
	if (sim_run(&cl, &tr, &o, &res, &err) < 0) {
		fprintf(stderr, "tenk sim: %s%s%s\n", v[O_TRACE] ? v[O_TRACE] : "",
			v[O_TRACE] ? ": " : "", err.text);
		goto out_tr;
	}
	rc = 0;
	if (v[O_JSON]) {
		char *text = sim_report_json(&res, &tr);
		puts(text);
		free(text);
	} else {
		sim_report_table(&res, &tr, stdout);
	}
	if (v[O_SVG]) {
		char title[256];
		snprintf(title, sizeof(title), "tenk sim: %d jobs on %d nodes, %d devices", tr.n,
			 cl.n, cl.gpus);
		if (sim_report_svg(&res, title, v[O_SVG], &err) < 0) {
			fprintf(stderr, "tenk sim: %s\n", err.text);
			rc = 1;
		}
	}
	if (v[O_JOBS] && sim_report_jobs_csv(&res, &tr, v[O_JOBS], &err) < 0) {
		fprintf(stderr, "tenk sim: %s\n", err.text);
		rc = 1;
	}
	sim_result_release(&res);
out_tr:
	sim_trace_release(&tr);
out_cl:
	sim_cluster_release(&cl);
out_cat:
	catalogue_release(&cat);
	free(queues);
	return rc;
}
