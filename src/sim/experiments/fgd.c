/*
 * The "Beware of Fragmentation" (ATC'23) experiment, run through tenk's own
 * scheduler:
 *
 *   1. the cluster is openb_node_list_gpu_node.csv (1,213 nodes, 6,212 GPUs);
 *   2. a pod list is shuffled with the seed;
 *   3. random clones of its pods (same generator) are appended until the
 *      next one would take the GPU request past 130% of capacity;
 *   4. pods arrive one at a time and are never deleted; each gets one
 *      scheduling pass, and a pod that does not fit is dropped;
 *   5. after each pod, the GPU allocation ratio (allocated milli-GPUs over
 *      capacity) is recorded against the GPU request arrived so far, and
 *      the ratios are averaged per whole percent of arrived load, as the
 *      paper's merge_alloc_discrete.py does.
 *
 * The shuffle is not Go's math/rand, so runs are not pod-for-pod the
 * paper's; means over seeds 42-51 are what compare.
 *
 * It is a study of the placement policies, not part of the product: it
 * lives apart from the simulator it drives (src/sim/experiments), reached
 * as `tenk sim --experiment fgd`, and results go in bench/results/fgd.md.
 */
#include "sim/internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define FGD_TUNE 1.3
#define FGD_MAX_LOAD 130
#define FGD_MIX_COVER 1.0

static const char *const all_workloads[] = {
	"default",    "cpu050",	    "cpu100",	   "cpu200",	 "cpu250",     "gpushare40",
	"gpushare60", "gpushare80", "gpushare100", "gpuspec10",	 "gpuspec20",  "gpuspec25",
	"gpuspec33",  "multigpu20", "multigpu30",  "multigpu40", "multigpu50", NULL};

struct policy_name {
	const char *name;
	enum sched_frac_policy frac;
	const char *paper; /* the paper's policy it compares with */
};

static const struct policy_name policies[] = {
	{"random", SCHED_FRAC_RANDOM, "01-Random"},
	{"dotprod", SCHED_FRAC_DOTPROD, "02-DotProd"},
	{"clustering", SCHED_FRAC_CLUSTER, "03-GpuClustering"},
	{"bestfit", SCHED_FRAC_BESTFIT, "05-BestFit"},
	{"pack", SCHED_FRAC_PACK, "04-GpuPacking"},
	{"fgd", SCHED_FRAC_FGD, "06-FGD"},
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t n)
{
	/* unbiased: reject the top sliver */
	uint64_t lim = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;
	do
		x = rng_next(s);
	while (x >= lim);
	return x % n;
}

/* Steps 2 and 3: a new trace of the pods, shuffled and tuned up. */
static void shuffle_and_tune(const struct sim_trace *in, uint64_t seed, int64_t capacity_milli,
			     struct sim_trace *out)
{
	uint64_t s = seed;
	int n = in->n;
	int *order = xcalloc((size_t)n + 1, sizeof(int));
	for (int i = 0; i < n; i++)
		order[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int k = (int)below(&s, (uint64_t)i + 1), t = order[i];
		order[i] = order[k];
		order[k] = t;
	}
	int64_t total = 0;
	for (int i = 0; i < n; i++)
		total += sim_job_milli(&in->jobs[i]);
	int64_t target = (int64_t)llround(FGD_TUNE * (double)capacity_milli);
	int nclones = 0, *clones = NULL;
	size_t calloc_n = 0;
	for (;;) {
		int k = (int)below(&s, (uint64_t)n);
		int64_t m = sim_job_milli(&in->jobs[k]);
		if (total + m > target)
			break;
		total += m;
		xgrow(&clones, &calloc_n, (size_t)nclones + 1, sizeof(int));
		clones[nclones++] = k;
	}
	*out = *in;
	out->jobs = xcalloc((size_t)(n + nclones) + 1, sizeof(*out->jobs));
	out->n = n + nclones;
	out->alloc = (size_t)out->n + 1;
	for (int i = 0; i < out->n; i++) {
		out->jobs[i] = in->jobs[i < n ? order[i] : clones[i - n]];
		out->jobs[i].submit_ms = 0; /* all at once, in order by index */
		out->jobs[i].work_ms = SIM_FOREVER;
		out->jobs[i].queue = 0; /* one queue: the order is the arrival order */
		out->jobs[i].cls = -1;
	}
	free(order);
	free(clones);
}

/* Step 5: allocation ratio (%) per whole percent of arrived load, 0..130. */
static void discretize(const struct sim_trace *t, const struct sim_result *r,
		       int64_t capacity_milli, double *out)
{
	double sum[FGD_MAX_LOAD + 1] = {0};
	int cnt[FGD_MAX_LOAD + 1] = {0};
	int64_t arrived = 0, alloc = 0;
	double cap = (double)capacity_milli;
	for (int i = 0; i < t->n; i++) {
		int64_t m = sim_job_milli(&t->jobs[i]);
		arrived += m;
		if (r->jobs[i].start_ms >= 0)
			alloc += m;
		long k = lround((double)arrived / cap * 100.0);
		if (k >= 0 && k <= FGD_MAX_LOAD) {
			sum[k] += (double)alloc / cap * 100.0;
			cnt[k]++;
		}
	}
	for (int k = 0; k <= FGD_MAX_LOAD; k++) {
		if (cnt[k]) {
			out[k] = sum[k] / cnt[k];
			continue;
		}
		/* no pod landed on this percent: its neighbours' */
		double s = 0;
		int c = 0;
		for (int d = -1; d <= 1; d += 2)
			if (k + d >= 0 && k + d <= FGD_MAX_LOAD && cnt[k + d]) {
				s += sum[k + d];
				c += cnt[k + d];
			}
		out[k] = c ? s / c : NAN;
	}
}

/* The paper's mean and std at 100% and 130% for a workload and policy. */
struct paper_row {
	bool found;
	double mean[FGD_MAX_LOAD + 1], std[FGD_MAX_LOAD + 1];
};

static int load_paper(const char *path, const char *workload, const char *policy,
		      struct paper_row *ret, struct tk_error *err)
{
	memset(ret, 0, sizeof(*ret));
	struct sim_csv c;
	int r = sim_csv_open(&c, path, err);
	if (r < 0)
		return r;
	int cw = sim_csv_column(&c, "workload"), cp = sim_csv_column(&c, "policy");
	if (cw < 0 || cp < 0) {
		sim_csv_close(&c);
		return tk_errorf(err, -EINVAL, "%s:1: expected the columns workload and policy",
				 path);
	}
	char want[96];
	snprintf(want, sizeof(want), "openb_pod_list_%s", workload);
	while ((r = sim_csv_next(&c, err)) > 0) {
		if (strcmp(c.fields[cw], want) != 0 || strcmp(c.fields[cp], policy) != 0)
			continue;
		static const int loads[] = {50, 80, 90, 100, 110, 120, 130};
		for (size_t i = 0; i < ARRAY_SIZE(loads); i++) {
			char name[48];
			int k = loads[i];
			snprintf(name, sizeof(name), "alloc_mean_at_%d", k);
			int cm = sim_csv_column(&c, name);
			snprintf(name, sizeof(name), "alloc_std_at_%d", k);
			int cs = sim_csv_column(&c, name);
			if (cm < 0 || cs < 0) {
				r = tk_errorf(err, -EINVAL, "%s:1: no column %s", path, name);
				break;
			}
			if ((r = sim_csv_num(&c, cm, 0, 100, &ret->mean[k], err)) < 0 ||
			    (r = sim_csv_num(&c, cs, 0, 100, &ret->std[k], err)) < 0)
				break;
		}
		if (r >= 0)
			ret->found = true;
		break;
	}
	sim_csv_close(&c);
	return r < 0 ? r : 0;
}

/* ---- the command ----------------------------------------------------------------------- */

enum {
	F_TRACES,
	F_WORKLOADS,
	F_POLICIES,
	F_SEEDS,
	F_PLACEMENT,
	F_JSON,
	F_OUT,
	F_HELP,
	F_EXPERIMENT,
	F_N
};

static const struct tk_option fgd_opts[] = {
	{"traces", 0, "DIR", "the traces folder (default $TENK_TRACES)"},
	{"workloads", 0, "LIST", "pod lists by suffix, e.g. default,cpu050 (default: all 17)"},
	{"policies", 0, "LIST",
	 "random,dotprod,clustering,pack,bestfit,fgd (default: all six, the paper's)"},
	{"seeds", 0, "A-B", "seeds (default 42-51)"},
	{"placement", 0, "dense|fastest", "the configuration's placement (default: dense)"},
	{"json", 0, NULL, "print the results as JSON"},
	{"out", 'o', "FILE", "also write the comparison table (Markdown) to FILE"},
	{"help", 'h', NULL, "show this help"},
	{"experiment", 0, "NAME", "fgd"},
};

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "tenk sim --experiment fgd: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see tenk sim --experiment fgd --help)\n");
	return 2;
}

static int split_list(char *s, char **out, int max)
{
	int n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(s, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save))
		out[n++] = tok;
	return n;
}

struct cell {
	const char *workload;
	const struct policy_name *pol;
	double ours[FGD_MAX_LOAD + 1]; /* mean over seeds */
	double ours_std[FGD_MAX_LOAD + 1];
	struct paper_row paper;
	double wall_s; /* per seed, mean */
	/* where the free GPUs lie at the end (130%), means over seeds, in
	 * GPUs: wholly free, and what partly taken ones have left by tenths */
	double end_whole, end_part[10];
};

/* Where the GPUs left free at the end lie, for the FGD rows (every row
 * when FGD was not run): what a better placement could still use. */
static void free_table(struct strbuf *sb, const struct cell *cells, int n, int64_t capacity)
{
	bool any_fgd = false;
	for (int i = 0; i < n; i++)
		any_fgd |= cells[i].pol->frac == SCHED_FRAC_FGD;
	strbuf_addf(sb, "\nWhere the GPUs left free at 130%% load lie, in GPUs (mean over "
			"seeds): wholly free ones, and what partly taken ones have left, by how "
			"much a GPU has left\n\n"
			"| workload | policy | free | wholly free | left < 0.1 | 0.1-0.2 | "
			"0.2-0.3 | 0.3-0.5 | 0.5-1 |\n|---|---|---|---|---|---|---|---|---|\n");
	for (int i = 0; i < n; i++) {
		const struct cell *c = &cells[i];
		if (any_fgd && c->pol->frac != SCHED_FRAC_FGD)
			continue;
		double part = 0, mid = c->end_part[3] + c->end_part[4], hi = 0;
		for (int k = 0; k < 10; k++)
			part += c->end_part[k];
		for (int k = 5; k < 10; k++)
			hi += c->end_part[k];
		double gpus = (double)capacity / MODEL_MILLI;
		strbuf_addf(
			sb,
			"| %s | %s | %.1f (%.2f%%) | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
			c->workload, c->pol->name, c->end_whole + part,
			gpus > 0 ? 100.0 * (c->end_whole + part) / gpus : 0.0, c->end_whole,
			c->end_part[0], c->end_part[1], c->end_part[2], mid, hi);
	}
}

int sim_fgd_main(int argc, char **argv)
{
	const char *v[F_N] = {0};
	char **pos;
	int npos;
	struct tk_error err;
	if (tk_opts_parse(fgd_opts, F_N, argc, argv, false, v, &pos, &npos, &err) < 0)
		return usage("%s", err.text);
	free(pos);
	if (npos)
		return usage("unexpected argument");
	if (v[F_HELP]) {
		tk_opts_usage(
			fgd_opts, F_N - 1,
			"usage: tenk sim --experiment fgd [OPTIONS]\n"
			"Runs the ATC'23 fragmentation experiment (Alibaba openb pod lists "
			"on the\n6,212-GPU openb cluster, tuned to 130%% load, pods placed one "
			"by one and\nnever released) with tenk's placement policies and prints "
			"our GPU\nallocation ratios beside the paper's at 100%% and 130%% load.");
		return 0;
	}
	const char *traces = v[F_TRACES] ? v[F_TRACES] : getenv("TENK_TRACES");
	if (!traces || !*traces)
		return usage("where are the traces? give --traces DIR (the folder holding "
			     "alibaba-openb-2023) or set TENK_TRACES");
	char wl_buf[512] = "", pol_buf[128] = "";
	char *wl[32], *pl[8];
	int nwl = 0, npl = 0;
	if (v[F_WORKLOADS]) {
		snprintf(wl_buf, sizeof(wl_buf), "%s", v[F_WORKLOADS]);
		nwl = split_list(wl_buf, wl, 32);
	} else {
		for (; all_workloads[nwl]; nwl++)
			wl[nwl] = (char *)all_workloads[nwl];
	}
	const struct policy_name *pols[8];
	if (v[F_POLICIES]) {
		snprintf(pol_buf, sizeof(pol_buf), "%s", v[F_POLICIES]);
		npl = split_list(pol_buf, pl, 8);
		for (int i = 0; i < npl; i++) {
			pols[i] = NULL;
			for (size_t k = 0; k < ARRAY_SIZE(policies); k++)
				if (strcmp(pl[i], policies[k].name) == 0)
					pols[i] = &policies[k];
			if (!pols[i])
				return usage("--policies: \"%s\" is not random, dotprod, "
					     "clustering, pack, bestfit or fgd",
					     pl[i]);
		}
	} else {
		for (size_t k = 0; k < ARRAY_SIZE(policies); k++)
			pols[npl++] = &policies[k];
	}
	if (nwl == 0 || npl == 0)
		return usage("nothing to run");
	int64_t seed_lo = 42, seed_hi = 51;
	if (v[F_SEEDS]) {
		char a[32] = "", b[32] = "";
		const char *dash = strchr(v[F_SEEDS], '-');
		snprintf(a, sizeof(a), "%.*s", dash ? (int)(dash - v[F_SEEDS]) : 31, v[F_SEEDS]);
		snprintf(b, sizeof(b), "%s", dash ? dash + 1 : a);
		if (tk_parse_int64(a, 0, INT32_MAX, &seed_lo) < 0 ||
		    tk_parse_int64(b, 0, INT32_MAX, &seed_hi) < 0 || seed_hi < seed_lo ||
		    seed_hi - seed_lo >= 1000)
			return usage("--seeds: expected N or A-B (at most 1000 seeds), got \"%s\"",
				     v[F_SEEDS]);
	}
	const char *placement = v[F_PLACEMENT] ? v[F_PLACEMENT] : "dense";
	bool fastest = false;
	if (sched_config_placement_parse(placement, &fastest) < 0)
		return usage("--placement: expected dense or fastest, got \"%s\"", placement);
	int nseeds = (int)(seed_hi - seed_lo + 1);
	struct catalogue cat;
	catalogue_init(&cat);
	char path[4096];
	snprintf(path, sizeof(path), "%s/alibaba-openb-2023/csv/openb_node_list_gpu_node.csv",
		 traces);
	struct sim_cluster cl;
	if (sim_cluster_load(path, &cat, &cl, &err) < 0) {
		fprintf(stderr, "tenk sim: %s\n", err.text);
		catalogue_release(&cat);
		return 1;
	}
	int64_t capacity = (int64_t)cl.gpus * MODEL_MILLI;
	char expected[4096];
	snprintf(expected, sizeof(expected),
		 "%s/alibaba-openb-2023/fgd-expected-results/SUMMARY_alloc_by_workload_policy.csv",
		 traces);
	struct cell *cells = xcalloc((size_t)(nwl * npl) + 1, sizeof(*cells));
	int rc = 0;
	for (int w = 0; w < nwl && rc == 0; w++) {
		snprintf(path, sizeof(path), "%s/alibaba-openb-2023/csv/openb_pod_list_%s.csv",
			 traces, wl[w]);
		struct sim_trace pods;
		if (sim_trace_load(path, &pods, &err) < 0) {
			fprintf(stderr, "tenk sim: %s\n", err.text);
			rc = 1;
			break;
		}
		/* untimed lists have no types or queues: all jobs are plain */
		struct sched_mix_item *mix;
		int nmix = sim_trace_mix(&pods, FGD_MIX_COVER, &mix);
		for (int p = 0; p < npl && rc == 0; p++) {
			struct cell *c = &cells[w * npl + p];
			c->workload = wl[w];
			c->pol = pols[p];
			if (load_paper(expected, wl[w], pols[p]->paper, &c->paper, &err) < 0) {
				fprintf(stderr, "tenk sim: %s\n", err.text);
				rc = 1;
				break;
			}
			double *runs = xcalloc((size_t)nseeds * (FGD_MAX_LOAD + 1), sizeof(double));
			for (int s = 0; s < nseeds && rc == 0; s++) {
				struct sim_trace t;
				shuffle_and_tune(&pods, (uint64_t)(seed_lo + s), capacity, &t);
				struct sim_options o;
				memset(&o, 0, sizeof(o));
				sched_config_default(&o.sched);
				o.sched.placement_fastest = fastest;
				/* the server's defaults, then the experiment's procedure */
				sched_policy_of_config(&o.sched, &o.policy);
				/* the study places every pod it can: no pass stops
				 * short (a job left for the next pass would count as
				 * unplaced) */
				o.policy.max_starts = 0;
				o.policy.frac = pols[p]->frac;
				o.policy.no_preemption = true;
				/* every pod arrives at time 0, in order; with greedy
				 * passes one pass places each as if they came one by one
				 * (tests/unit/sim checks that equivalence) */
				o.policy.no_reservations = true;
				o.drop_unplaced = true;
				o.mix = mix;
				o.nmix = nmix;
				o.seed = (uint64_t)(seed_lo + s);
				o.series_points = 1;
				struct sim_result r;
				if (sim_run(&cl, &t, &o, &r, &err) < 0) {
					fprintf(stderr, "tenk sim: %s: %s\n", wl[w], err.text);
					rc = 1;
				} else {
					discretize(&t, &r, capacity, &runs[s * (FGD_MAX_LOAD + 1)]);
					c->wall_s += r.wall_s / nseeds;
					c->end_whole += (double)r.end_whole_free / nseeds;
					for (int k = 0; k < 10; k++)
						c->end_part[k] += (double)r.end_part_milli[k] /
								  MODEL_MILLI / nseeds;
					sim_result_release(&r);
				}
				free(t.jobs);
			}
			for (int k = 0; k <= FGD_MAX_LOAD && rc == 0; k++) {
				double sum = 0, sq = 0;
				for (int s = 0; s < nseeds; s++)
					sum += runs[s * (FGD_MAX_LOAD + 1) + k];
				double mean = sum / nseeds;
				for (int s = 0; s < nseeds; s++) {
					double d = runs[s * (FGD_MAX_LOAD + 1) + k] - mean;
					sq += d * d;
				}
				c->ours[k] = mean;
				c->ours_std[k] = sqrt(sq / nseeds);
			}
			free(runs);
			if (!v[F_JSON] && rc == 0) {
				fprintf(stderr,
					"%-12s %-8s ours %6.2f%% / %6.2f%%  paper %6.2f%% / %6.2f%%"
					"  (at 100%% / 130%% load, %.2f s per seed)\n",
					wl[w], pols[p]->name, c->ours[100], c->ours[130],
					c->paper.mean[100], c->paper.mean[130], c->wall_s);
			}
		}
		free(mix);
		sim_trace_release(&pods);
	}
	struct strbuf sb;
	strbuf_init(&sb);
	if (rc == 0) {
		strbuf_addf(
			&sb,
			"Placement: the configuration's (\"placement\": \"%s\", the default is "
			"\"dense\"), each "
			"policy in turn; greedy passes, no preemption, a pod that does not fit "
			"dropped.\n\n"
			"GPU allocation ratio (%%) at 100%% and 130%% arrived load, mean over "
			"seeds %lld-%lld (paper: mean over seeds 42-51 of the ATC'23 "
			"simulator)\n\n"
			"| workload | policy | ours @100 | paper @100 | ours @130 | paper @130 | "
			"ours - paper @130 |\n|---|---|---|---|---|---|---|\n",
			placement, (long long)seed_lo, (long long)seed_hi);
		for (int i = 0; i < nwl * npl; i++) {
			const struct cell *c = &cells[i];
			strbuf_addf(&sb,
				    "| %s | %s (%s) | %.2f ± %.2f | %.2f ± %.2f | %.2f ± %.2f | "
				    "%.2f ± %.2f | %+.2f |\n",
				    c->workload, c->pol->name, c->pol->paper, c->ours[100],
				    c->ours_std[100], c->paper.mean[100], c->paper.std[100],
				    c->ours[130], c->ours_std[130], c->paper.mean[130],
				    c->paper.std[130], c->ours[130] - c->paper.mean[130]);
		}
		free_table(&sb, cells, nwl * npl, capacity);
	}
	if (rc == 0 && v[F_JSON]) {
		json_t *arr = json_array();
		for (int i = 0; i < nwl * npl; i++) {
			const struct cell *c = &cells[i];
			json_t *ours = json_object(), *paper = json_object();
			static const int loads[] = {50, 80, 90, 100, 110, 120, 130};
			for (size_t k = 0; k < ARRAY_SIZE(loads); k++) {
				char key[8];
				snprintf(key, sizeof(key), "%d", loads[k]);
				json_object_set_new(ours, key, json_real(c->ours[loads[k]]));
				json_object_set_new(paper, key, json_real(c->paper.mean[loads[k]]));
			}
			json_t *part = json_array();
			double free = c->end_whole;
			for (int k = 0; k < 10; k++) {
				json_array_append_new(part, json_real(c->end_part[k]));
				free += c->end_part[k];
			}
			json_array_append_new(
				arr,
				json_pack("{s:s, s:s, s:s, s:o, s:o, s:f, s:f, s:f, s:{s:f, s:f, "
					  "s:o}}",
					  "workload", c->workload, "policy", c->pol->name,
					  "paper_policy", c->pol->paper, "ours", ours, "paper",
					  paper, "ours_std_130", c->ours_std[130], "paper_std_130",
					  c->paper.std[130], "wall_s_per_seed", c->wall_s,
					  "free_at_end_gpus", "percent",
					  100.0 * free * MODEL_MILLI / (double)capacity, "whole",
					  c->end_whole, "left_by_tenth", part));
		}
		char *text = json_dumps(arr, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		puts(text);
		free(text);
		json_decref(arr);
	} else if (rc == 0) {
		fputs(sb.buf, stdout);
	}
	if (rc == 0 && v[F_OUT]) {
		FILE *f = fopen(v[F_OUT], "we");
		bool ok = f && fputs(sb.buf, f) >= 0;
		if (f && fclose(f) != 0)
			ok = false;
		if (!ok) {
			fprintf(stderr, "tenk sim: cannot write %s: %s\n", v[F_OUT],
				strerror(errno));
			rc = 1;
		}
	}
	strbuf_release(&sb);
	free(cells);
	sim_cluster_release(&cl);
	catalogue_release(&cat);
	return rc;
}
