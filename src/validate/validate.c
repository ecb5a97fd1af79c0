/*
 * tenk validate: one node, bottom-up, a verdict per layer; it stops at the
 * first failing layer unless --all, because what fails above usually has
 * its cause below. With --nodes, the server runs it on a set of nodes as a
 * system job (cluster.c), where each node is also held to its peers.
 *
 * Thresholds: a floor per check (what no healthy machine of any size does
 * worse than), raised to 95% of a stored baseline (--baseline FILE, written
 * by --save-baseline FILE on a machine known good).
 */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	O_ALL,
	O_JSON,
	O_SAVE,
	O_BASE,
	O_DIR,
	O_QUICK,
	O_LAYERS,
	O_NODES,
	O_TOL,
	O_CLOCK,
	O_RDMA_PEERS,
	O_NOWAIT,
	O_MEMBER,
	O_IMAGE,
	O_DEVICE_CHECK,
	O_REFERENCE,
	O_REFERENCE_CMD,
	O_HELP,
	O_N
};

static const struct tk_option opts[] = {
	{"all", 0, NULL, "run every layer even after one fails"},
	{"json", 0, NULL, "print the checks as JSON"},
	{"save-baseline", 0, "FILE", "write this run's figures to FILE (a machine known good)"},
	{"baseline", 0, "FILE", "hold figures to 95% of those in FILE"},
	{"dir", 0, "DIR", "where the storage checks write (default $TMPDIR or /tmp)"},
	{"quick", 0, NULL, "smaller sizes: seconds, not minutes"},
	{"layers", 0, "LIST", "only these layers, e.g. system,compute"},
	{"nodes", 0, "SPEC",
	 "through the server, on these nodes (node[1-4],gpu7 or all): drains those that fail"},
	{"tolerance", 0, "PCT", "with --nodes: fail a node this far below its peers' median (5)"},
	{"clock-max-ms", 0, "MS", "with --nodes: largest clock offset between nodes (50)"},
	{"rdma-peers", 0, "N|all",
	 "with --nodes: the peers each node is measured against over RDMA, with perftest "
	 "(8, 4 with --quick; all: every pair)"},
	{"no-wait", 0, NULL, "with --nodes: print the validation job's id and return"},
	{"member", 0, NULL, "(run by the server in a validation job, one per node)"},
	{"image", 0, "REF",
	 "every layer inside this container image (podman; with --nodes, on each)"},
	{"device-check", 0, NULL,
	 "only the GPUs' quick health (a small GEMM checked exactly, a copy), as the agent "
	 "runs it before a restart: fails on errors and wrong results, not on speed"},
	{"reference", 0, NULL,
	 "after the layers, tenk's reference training (shown in the workload layer): its "
	 "loss at every step and final parameters, what a rollout compares between stacks"},
	{"reference-cmd", 0, "CMD",
	 "the reference is this command's (sh -c), which prints {\"loss\": [...], "
	 "\"params\": [...], \"step_s\": [...]} as its last line"},
	{"help", 'h', NULL, "show this help"},
};

const char *const validate__layers[VLAYERS] = {
	[VL_SYSTEM] = "system",	   [VL_NETWORK] = "network",	       [VL_COMPUTE] = "compute",
	[VL_MEMORY] = "memory",	   [VL_INTERCONNECT] = "interconnect", [VL_STORAGE] = "storage",
	[VL_WORKLOAD] = "workload"};

int validate__vlayer_index(const char *name)
{
	for (int i = 0; i < VLAYERS; i++)
		if (strcmp(name, validate__layers[i]) == 0)
			return i;
	return -1;
}

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "tenk validate: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see tenk validate --help)\n");
	return 2;
}

const char *validate__vverdict_name(enum vverdict v)
{
	return v == V_PASS ? "pass" : v == V_FAIL ? "FAIL" : "skip";
}

/* The in-node collectives meet on loopback: a port the kernel says is free. */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int port = 0;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port ? port : 20000 + (int)(getpid() % 20000);
}

static void progress(int i, int n, const char *what)
{
	if (!isatty(2))
		return;
	int w = 30, done = n ? i * w / n : w;
	fprintf(stderr, "\r[");
	for (int k = 0; k < w; k++)
		fputc(k < done ? '#' : ' ', stderr);
	fprintf(stderr, "] %d/%d %-24s", i, n, what);
	if (i == n)
		fprintf(stderr, "\n");
	fflush(stderr);
}

static double baseline_of(json_t *base, const char *name)
{
	json_t *v = json_object_get(json_object_get(base, "checks"), name);
	return json_is_number(v) ? json_number_value(v) : 0;
}

static int parse_num(const char *text, double min, double max, double *ret)
{
	char *end;
	errno = 0;
	double d = strtod(text, &end);
	if (errno || end == text || *end || !(d >= min && d <= max))
		return -EINVAL;
	*ret = d;
	return 0;
}

/* Raises c's threshold to `th` (from `from`) when that is stricter, and
 * fails it when its figure falls short. */
void validate__vcheck_raise(struct vcheck *c, double th, const char *from)
{
	if (c->verdict == V_SKIP || !c->higher_is_better || th <= c->threshold)
		return;
	enum vverdict was = c->verdict;
	c->verdict = V_PASS;
	validate__vcheck_judge(c, th, from);
	if (was == V_FAIL)
		c->verdict = V_FAIL;
}

int validate_local(const struct vrun *o, struct vcheck *checks, int max)
{
	const char *dir = o->dir ? o->dir : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	bool quick = o->quick;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int threads = (int)MAX(1, MIN(ncpu, 64));
	int n = 0, port = free_port();
	bool failed = false;
	int nlayers = 0;
	for (int l = 0; l < VLAYERS; l++)
		nlayers += o->want[l];
	int done_layers = 0;
	for (int l = 0; l < VLAYERS && !(failed && !o->all) && n + 9 <= max; l++) {
		if (!o->want[l])
			continue;
		if (o->progress)
			progress(done_layers, nlayers, validate__layers[l]);
		int first = n;
		switch (l) {
		case VL_SYSTEM:
			validate__check_gpu_stack(&checks[n++]);
			if (validate__check_image(&checks[n]))
				n++;
			validate__check_shm(&checks[n++], 256);
			validate__check_nofile(&checks[n++], 4096);
			break;
		case VL_NETWORK: {
			struct node_inventory *inv = xmalloc(sizeof(*inv));
			validate__fabric(inv);
			validate__check_net_links(&checks[n++], inv);
			validate__check_rdma(&checks[n++], inv);
			validate__check_nccl_env(&checks[n++], inv);
			validate__check_net_mtu(&checks[n++]);
			validate__check_net_speed(&checks[n++], inv);
			validate__check_rdma_rate(&checks[n++], inv);
			validate__check_roce_pfc(&checks[n++], inv);
			validate__check_roce_ecn(&checks[n], &checks[n + 1], inv);
			n += 2;
			free(inv);
			break;
		}
		case VL_COMPUTE:
			validate__check_cpu_gemm(&checks[n], threads, quick ? 256 : 768,
						 quick ? 2 : 4);
			validate__vcheck_judge(&checks[n++], 0.2, "floor");
			validate__check_gpu_gemm(&checks[n++], quick);
			break;
		case VL_MEMORY:
			validate__check_host_memory(&checks[n], threads, quick ? 96 : 768);
			validate__vcheck_judge(&checks[n++], 0.5, "floor");
			validate__check_gpu_copy(&checks[n++], quick);
			break;
		case VL_INTERCONNECT:
			validate__check_allreduce_local(&checks[n], MAX(2, MIN(threads, 8)),
							quick ? (4u << 20) : (64u << 20), port);
			/* a healthy node does gigabytes a second; 20 MB/s is broken
			 * even with a shared core and a sanitizer's build (which
			 * measures about 0.09 GB/s, three validations to two cores) */
			validate__vcheck_judge(&checks[n++], 0.02, "floor");
			validate__check_nccl_in_node(&checks[n++], quick);
			break;
		case VL_STORAGE:
			validate__check_storage(&checks[n], &checks[n + 1], dir, MIN(threads, 4),
						quick ? 16 : 256);
			validate__vcheck_judge(&checks[n], 5, "floor");
			validate__vcheck_judge(&checks[n + 1], 5, "floor");
			n += 2;
			break;
		case VL_WORKLOAD:
			validate__check_workload(&checks[n], MAX(2, MIN(threads, 4)), free_port());
			validate__vcheck_judge(&checks[n++], 1, "floor");
			break;
		}
		/* a stored baseline raises the bar to 95% of its figure */
		for (int i = first; i < n && o->base; i++) {
			double b = baseline_of(o->base, checks[i].name);
			if (b > 0)
				validate__vcheck_raise(&checks[i], 0.95 * b, "95% of the baseline");
		}
		for (int i = first; i < n; i++)
			failed |= checks[i].verdict == V_FAIL;
		done_layers++;
	}
	/* the reference, last, whichever layers ran (a rollout's evidence,
	 * shown in the workload layer) */
	if (o->reference && !(failed && !o->all) && n < max)
		validate__check_reference(&checks[n++], o->reference_cmd, o->reference_out);
	if (o->progress)
		progress(nlayers, nlayers, "done");
	return n;
}

json_t *validate__vcheck_pack(const struct vcheck *c)
{
	json_t *o = json_pack("{s:s, s:s, s:f, s:s, s:f, s:s, s:s, s:s}", "layer", c->layer,
			      "check", c->name, "figure", c->figure, "unit", c->unit, "threshold",
			      c->threshold, "threshold_from", c->threshold_from, "verdict",
			      validate__vverdict_name(c->verdict), "detail", c->detail);
	if (c->per_watt > 0)
		json_object_set_new(o, "per_watt", json_real(c->per_watt));
	return o;
}

void validate__vchecks_print(const struct vcheck *checks, int n)
{
	printf("%-13s %-18s %12s %-8s %12s  %-7s %s\n", "LAYER", "CHECK", "FIGURE", "UNIT",
	       "THRESHOLD", "VERDICT", "DETAIL");
	for (int i = 0; i < n; i++) {
		const struct vcheck *c = &checks[i];
		char th[32] = "-";
		if (c->threshold_from[0])
			snprintf(th, sizeof(th), "%s%.4g",
				 c->higher_is_better ? ">= " : "<= ", c->threshold);
		char fig[32];
		snprintf(fig, sizeof(fig), c->figure >= 1000 ? "%.0f" : "%.4g", c->figure);
		printf("%-13s %-18s %12s %-8s %12s  %-7s %s\n", c->layer, c->name, fig, c->unit, th,
		       validate__vverdict_name(c->verdict), c->detail);
	}
}

/* The checks and the verdict, as a table or JSON, on stdout. */
static void print_checks(const struct vcheck *checks, int n, bool failed, bool as_json,
			 json_t *reference)
{
	if (!as_json) {
		validate__vchecks_print(checks, n);
		printf("verdict: %s\n", failed ? "FAIL" : "pass");
		return;
	}
	json_t *arr = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, validate__vcheck_pack(&checks[i]));
	json_t *jo = json_pack("{s:s, s:o}", "verdict", failed ? "fail" : "pass", "checks", arr);
	char *text = json_dumps(jo, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
	if (reference) {
		/* its numbers whole: compared bit for bit */
		free(text);
		json_object_set(jo, "reference", reference);
		text = json_dumps(jo, JSON_INDENT(2));
	}
	puts(text);
	free(text);
	json_decref(jo);
}

/* The check an agent runs on an attempt's GPUs before the attempt starts
 * there (CUDA_VISIBLE_DEVICES: those): every device's GEMM and copy at the
 * quick sizes, failed only by a call that fails or a wrong result. Exit 1
 * then, the first broken check's detail on stderr. */
static int device_check(bool as_json)
{
	struct vcheck checks[3];
	validate__check_gpu_stack(&checks[0]);
	validate__check_gpu_gemm(&checks[1], true);
	validate__check_gpu_copy(&checks[2], true);
	const struct vcheck *broken = NULL;
	for (int i = 0; i < 3; i++) {
		if (checks[i].broken && !broken)
			broken = &checks[i];
		/* speed is validation's to judge, against the node's peers */
		if (!checks[i].broken && checks[i].verdict == V_FAIL)
			checks[i].verdict = V_PASS;
	}
	print_checks(checks, 3, broken != NULL, as_json, NULL);
	fflush(stdout); /* (the last line, where both go to one file, says why) */
	if (broken)
		fprintf(stderr, "%s: %s\n", broken->name, broken->detail);
	return broken ? 1 : 0;
}

int validate_main(const struct tk_command *cmd, int argc, char **argv)
{
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
			"usage: tenk validate [OPTIONS]\nChecks this node layer by layer "
			"(system, network, compute, memory,\ninterconnect, storage, workload): "
			"each "
			"check prints its figure, its threshold and a verdict.\nWith --nodes, "
			"the server checks those nodes as a system job, holds each to\nits "
			"peers (and their links to each other), and drains those that fail.");
		return 0;
	}
	struct vrun o = {.want = {true, true, true, true, true, true, true},
			 .all = v[O_ALL] != NULL,
			 .quick = v[O_QUICK] != NULL,
			 .dir = v[O_DIR],
			 .tolerance = 0.05,
			 .clock_max_ms = 50,
			 .progress = !v[O_MEMBER]};
	if (v[O_LAYERS]) {
		memset(o.want, 0, sizeof(o.want));
		char buf[256], *save = NULL;
		snprintf(buf, sizeof(buf), "%s", v[O_LAYERS]);
		for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			int k = validate__vlayer_index(t);
			if (k < 0)
				return usage(
					"--layers: \"%s\" is not one of system, network, compute, "
					"memory, interconnect, storage, workload",
					t);
			o.want[k] = true;
		}
	}
	o.reference = v[O_REFERENCE] || v[O_REFERENCE_CMD];
	o.reference_cmd = v[O_REFERENCE_CMD];
	if (o.reference_cmd && !o.reference_cmd[0])
		return usage("--reference-cmd: a command to run with sh -c");
	if (v[O_TOL]) {
		double t;
		if (parse_num(v[O_TOL], 0, 100, &t) < 0)
			return usage("--tolerance: a percentage from 0 to 100, got \"%s\"",
				     v[O_TOL]);
		o.tolerance = t / 100;
	}
	if (v[O_CLOCK]) {
		double t;
		if (parse_num(v[O_CLOCK], 0, 1e9, &t) < 0)
			return usage("--clock-max-ms: milliseconds, got \"%s\"", v[O_CLOCK]);
		o.clock_max_ms = t;
	}
	if (v[O_RDMA_PEERS]) {
		double t;
		if (strcmp(v[O_RDMA_PEERS], "all") == 0)
			o.rdma_peers = INT_MAX;
		else if (parse_num(v[O_RDMA_PEERS], 1, 1 << 20, &t) < 0 || t != (int)t)
			return usage("--rdma-peers: a number of peers from 1, or all; got \"%s\"",
				     v[O_RDMA_PEERS]);
		else
			o.rdma_peers = (int)t;
	}
	if (v[O_NODES]) {
		if (v[O_MEMBER] || v[O_SAVE])
			return usage("--nodes does not go with --%s",
				     v[O_MEMBER] ? "member" : "save-baseline");
		return validate_cluster(v[O_NODES], v[O_IMAGE], argc, argv, v[O_JSON] != NULL,
					v[O_NOWAIT] != NULL);
	}
	if (v[O_IMAGE]) {
		if (v[O_MEMBER] || v[O_SAVE] || v[O_BASE])
			return usage("--image does not go with --%s", v[O_MEMBER] ? "member"
								      : v[O_SAVE] ? "save-baseline"
										  : "baseline");
		if (!model_image_valid(v[O_IMAGE]))
			return usage("--image: \"%s\" is not an image reference", v[O_IMAGE]);
		return validate_in_image(v[O_IMAGE], argc, argv);
	}
	if (v[O_NOWAIT])
		return usage("--no-wait goes with --nodes");
	if (v[O_DEVICE_CHECK])
		return device_check(v[O_JSON] != NULL);
	if (v[O_BASE]) {
		json_error_t je;
		o.base = json_load_file(v[O_BASE], 0, &je);
		if (!o.base || !json_is_object(json_object_get(o.base, "checks"))) {
			fprintf(stderr, "tenk validate: %s: %s\n", v[O_BASE],
				o.base ? "no \"checks\" object" : je.text);
			json_decref(o.base);
			return 1;
		}
	}
	if (v[O_MEMBER]) {
		int rc = validate_member(&o);
		json_decref(o.base);
		return rc;
	}
	struct vcheck checks[VMAX_CHECKS];
	json_t *ref = NULL;
	o.reference_out = &ref;
	int n = validate_local(&o, checks, VMAX_CHECKS);
	json_decref(o.base);
	bool failed = false;
	for (int i = 0; i < n; i++)
		failed |= checks[i].verdict == V_FAIL;
	print_checks(checks, n, failed, v[O_JSON] != NULL, ref);
	json_decref(ref);
	if (v[O_SAVE]) {
		json_t *figs = json_object();
		for (int i = 0; i < n; i++)
			if (checks[i].verdict == V_PASS)
				json_object_set_new(figs, checks[i].name,
						    json_real(checks[i].figure));
		json_t *jo = json_pack("{s:o}", "checks", figs);
		if (json_dump_file(jo, v[O_SAVE], JSON_INDENT(2)) < 0) {
			fprintf(stderr, "tenk validate: cannot write %s\n", v[O_SAVE]);
			json_decref(jo);
			return 1;
		}
		json_decref(jo);
	}
	return failed ? 1 : 0;
}
