/*
 * The commands of a job's life: submit, queue, show, cancel, wait.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define WAIT_POLL_S 30 /* one long-poll of tenk wait, at most */

/* ---- submit -------------------------------------------------------------------------- */

enum {
	S_NODES = O_FIRST_OWN,
	S_TPN,
	S_GPUS,
	S_GPU_TYPE,
	S_CPUS,
	S_MEM,
	S_TIME,
	S_NAME,
	S_OUTPUT,
	S_CHDIR,
	S_REQUEUE,
	S_GRACE,
	S_EXPORT,
	S_CLASS,
	S_QUEUE,
	S_GPU_MEM,
	S_GPU_TFLOPS,
	S_SWITCHES,
	S_MIXED,
	S_IMAGE,
	S_MOUNT,
	S_CKPT_MARKER,
};

static const struct tk_option submit_opts[] = {
	COMMON_OPTS,
	{"nodes", 'N', "N", "nodes, all started together (default 1)"},
	{"tasks-per-node", 0, "N", "processes per node (default 1)"},
	{"gpus-per-task", 'G', "G", "accelerators per task; a fraction below 1 shares one"},
	{"gpu-type", 0, "LIST", "acceptable models, e.g. H100,A100-80GB"},
	{"cpus-per-task", 'c', "N", "CPUs reserved per task (default 0: none reserved)"},
	{"mem", 0, "SIZE", "memory reserved per node, e.g. 64G"},
	{"time", 't', "LIMIT",
	 "time limit as Slurm reads it: a bare number is minutes; 90s, 2h, MM:SS, HH:MM:SS, "
	 "D-HH, D-HH:MM:SS"},
	{"name", 'J', "NAME", "job name (default: the command's name)"},
	{"output", 'o', "PATH", "output file; %j job, %t task, %n node rank (default tenk-%j.out)"},
	{"chdir", 'D', "DIR", "working folder (default: this one)"},
	{"requeue", 0, "N", "restart up to N times after a failure (default 0)"},
	{"grace", 0, "TIME", "between SIGTERM and SIGKILL when stopped (default 30s)"},
	{"export", 0, "ALL|NONE", "pass this environment to the job (default ALL)"},
	{"class", 0, "NAME", "priority class, e.g. prod, normal, batch (tenk classes)"},
	{"queue", 'q', "NAME", "the queue whose quota it uses (default: default)"},
	{"gpu-mem", 0, "SIZE", "each accelerator at least this much memory, e.g. 80G"},
	{"gpu-tflops", 0, "N", "each accelerator at least N dense bf16 TFLOP/s"},
	{"switches", 0, "N", "span at most N network switches (1: one leaf)"},
	{"mixed-types", 0, NULL, "let one gang mix accelerator models"},
	{"image", 0, "REF", "run every task in a container of this image (podman)"},
	{"mount", 0, "SRC[:DST][:ro],...",
	 "host folders the container sees (with --image); SRC relative to here"},
	{"ckpt-marker", 0, "NAME",
	 "what marks a checkpoint complete: tenk (TAG/.tenk-commit, the default), dcp, "
	 "deepspeed or megatron"},
};

static int add_int_opt(struct ctx *c, json_t *req, int opt, const char *key, int64_t min,
		       int64_t max)
{
	const char *v = c->v[opt];
	if (!v)
		return 0;
	int64_t x;
	if (tk_parse_int64(v, min, max, &x) < 0)
		return usage_error(c->cmd, "--%s: must be an integer from %lld to %lld, got \"%s\"",
				   submit_opts[opt].name, (long long)min, (long long)max, v);
	json_object_set_new(req, key, json_integer(x));
	return 0;
}

static int add_duration_opt(struct ctx *c, json_t *req, int opt, const char *key)
{
	const char *v = c->v[opt];
	if (!v)
		return 0;
	int64_t s;
	if (opt == S_TIME ? tk_parse_time_limit(v, &s) < 0 : tk_parse_duration(v, &s) < 0)
		return usage_error(c->cmd,
				   opt == S_TIME ? "--%s: expected minutes (90), 90s, 2h, MM:SS, "
						   "HH:MM:SS, D-HH or D-HH:MM:SS, got \"%s\""
						 : "--%s: expected a duration such as 90s, 30m, "
						   "2h, 1d or 1-02:00:00, got \"%s\"",
				   submit_opts[opt].name, v);
	json_object_set_new(req, key, json_integer(s));
	return 0;
}

/* --mount SRC[:DST][:ro],...: SRC made absolute from here, DST SRC's. */
static int add_mounts(struct ctx *c, json_t *req)
{
	if (!c->v[S_IMAGE])
		return usage_error(c->cmd, "--mount: is for a job in an image (add --image)");
	char cwd[4096];
	if (!getcwd(cwd, sizeof(cwd)))
		return usage_error(c->cmd, "cannot read the current folder");
	json_t *list = json_array();
	_cleanup_free_ char *copy = xstrdup(c->v[S_MOUNT]);
	char *save = NULL;
	for (char *m = strtok_r(copy, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(m, ':');
		_cleanup_free_ char *src = colon ? xstrndup(m, (size_t)(colon - m)) : xstrdup(m);
		const char *rest = colon ? colon : "";
		_cleanup_free_ char *abs = NULL;
		if (src[0] != '/') {
			abs = xasprintf("%s%s%s", cwd, strcmp(src, ".") == 0 ? "" : "/",
					strcmp(src, ".") == 0 ? "" : src);
		}
		const char *s = abs ? abs : src;
		/* "SRC:ro" is SRC at SRC, read-only */
		_cleanup_free_ char *full = xasprintf("%s%s", s, rest);
		struct mount_spec ms;
		struct tk_error err;
		if (model_mount_parse(full, false, &ms, &err) < 0) {
			json_decref(list);
			return usage_error(c->cmd, "--mount: %s", err.text);
		}
		json_array_append_new(list, json_string(full));
	}
	json_object_set_new(req, "mounts", list);
	return 0;
}

static int run_submit(struct ctx *c)
{
	json_t *req = json_object();
	json_t *cmd = json_array();
	int r = CLI_EXIT_OK;
	for (int i = 0; i < c->npos; i++)
		json_array_append_new(cmd, json_string(c->pos[i]));
	json_object_set_new(req, "command", cmd);
	char cwd[4096];
	if (c->v[S_CHDIR]) {
		if (c->v[S_CHDIR][0] != '/') {
			if (!getcwd(cwd, sizeof(cwd))) {
				r = usage_error(c->cmd, "cannot read the current folder");
				goto out;
			}
			_cleanup_free_ char *dir = xasprintf("%s/%s", cwd, c->v[S_CHDIR]);
			json_object_set_new(req, "cwd", json_string(dir));
		} else {
			json_object_set_new(req, "cwd", json_string(c->v[S_CHDIR]));
		}
	} else {
		if (!getcwd(cwd, sizeof(cwd))) {
			r = usage_error(c->cmd, "cannot read the current folder; pass --chdir");
			goto out;
		}
		json_object_set_new(req, "cwd", json_string(cwd));
	}
	if ((r = add_int_opt(c, req, S_NODES, "nodes", 1, MODEL_MAX_NODES)) ||
	    (r = add_int_opt(c, req, S_TPN, "tasks_per_node", 1, MODEL_MAX_TASKS_PER_NODE)) ||
	    (r = add_int_opt(c, req, S_CPUS, "cpus_per_task", 0, MODEL_MAX_CPUS)) ||
	    (r = add_int_opt(c, req, S_REQUEUE, "requeue", 0, MODEL_MAX_REQUEUE)) ||
	    (r = add_duration_opt(c, req, S_TIME, "time_limit_s")) ||
	    (r = add_duration_opt(c, req, S_GRACE, "grace_s")))
		goto out;
	if (c->v[S_GPUS]) {
		char *end;
		double g = strtod(c->v[S_GPUS], &end);
		if (!*c->v[S_GPUS] || *end || !(g >= 0 && g <= MODEL_MAX_GPUS_PER_TASK)) {
			r = usage_error(
				c->cmd,
				"--gpus-per-task: must be a number from 0 to %d, got \"%s\"",
				MODEL_MAX_GPUS_PER_TASK, c->v[S_GPUS]);
			goto out;
		}
		json_object_set_new(req, "gpus_per_task",
				    g == floor(g) ? json_integer((json_int_t)g) : json_real(g));
	}
	if (c->v[S_GPU_TYPE]) {
		json_t *types = json_array();
		_cleanup_free_ char *copy = xstrdup(c->v[S_GPU_TYPE]);
		char *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
			json_array_append_new(types, json_string(t));
		json_object_set_new(req, "gpu_types", types);
	}
	if (c->v[S_MEM]) {
		int64_t mib;
		if (tk_parse_size_mib(c->v[S_MEM], &mib) < 0) {
			r = usage_error(
				c->cmd,
				"--mem: expected a size such as 512M, 64G or 1T, got \"%s\"",
				c->v[S_MEM]);
			goto out;
		}
		json_object_set_new(req, "mem_mib", json_integer(mib));
	}
	if (c->v[S_GPU_MEM]) {
		int64_t mib;
		if (tk_parse_size_mib(c->v[S_GPU_MEM], &mib) < 0) {
			r = usage_error(c->cmd,
					"--gpu-mem: expected a size such as 40G or 80G, got \"%s\"",
					c->v[S_GPU_MEM]);
			goto out;
		}
		json_object_set_new(req, "gpu_mem_mib", json_integer(mib));
	}
	if (c->v[S_GPU_TFLOPS]) {
		char *end;
		double tf = strtod(c->v[S_GPU_TFLOPS], &end);
		if (!*c->v[S_GPU_TFLOPS] || *end || !(tf > 0 && tf <= 1e6)) {
			r = usage_error(c->cmd,
					"--gpu-tflops: expected a positive number, got \"%s\"",
					c->v[S_GPU_TFLOPS]);
			goto out;
		}
		json_object_set_new(req, "gpu_tflops", json_real(tf));
	}
	if ((r = add_int_opt(c, req, S_SWITCHES, "switches", 1, MODEL_MAX_SWITCHES)))
		goto out;
	if (c->v[S_MIXED])
		json_object_set_new(req, "mixed_types", json_true());
	if (c->v[S_IMAGE])
		json_object_set_new(req, "image", json_string(c->v[S_IMAGE]));
	if (c->v[S_MOUNT] && (r = add_mounts(c, req)))
		goto out;
	if (c->v[S_CKPT_MARKER]) {
		enum ckpt_marker m;
		if (ckpt_marker_parse(c->v[S_CKPT_MARKER], &m) < 0) {
			r = usage_error(
				c->cmd,
				"--ckpt-marker: tenk, dcp, deepspeed or megatron, got \"%s\"",
				c->v[S_CKPT_MARKER]);
			goto out;
		}
		json_object_set_new(req, "ckpt_marker", json_string(c->v[S_CKPT_MARKER]));
	}
	if (c->v[S_CLASS])
		json_object_set_new(req, "class", json_string(c->v[S_CLASS]));
	if (c->v[S_QUEUE])
		json_object_set_new(req, "queue", json_string(c->v[S_QUEUE]));
	if (c->v[S_NAME])
		json_object_set_new(req, "name", json_string(c->v[S_NAME]));
	if (c->v[S_OUTPUT])
		json_object_set_new(req, "output", json_string(c->v[S_OUTPUT]));
	const char *export = c->v[S_EXPORT] ? c->v[S_EXPORT] : "ALL";
	if (strcasecmp(export, "ALL") != 0 && strcasecmp(export, "NONE") != 0) {
		r = usage_error(c->cmd, "--export: must be ALL or NONE, got \"%s\"", export);
		goto out;
	}
	json_t *env = json_object();
	if (strcasecmp(export, "ALL") == 0) {
		for (char **e = environ; *e; e++) {
			const char *eq = strchr(*e, '=');
			if (!eq || eq == *e)
				continue;
			_cleanup_free_ char *k = xstrndup(*e, (size_t)(eq - *e));
			/* the caller's credentials stay with the caller */
			if (strcmp(k, "TENK_TOKEN") == 0)
				continue;
			json_object_set_new(env, k, json_string(eq + 1));
		}
	}
	json_object_set_new(req, "env", env);
	json_t *job = NULL;
	struct tk_error err;
	if (client_call(&c->client, "POST", "/v1/jobs", req, CALL_TIMEOUT_MS, &job, NULL, &err) <
	    0) {
		r = api_error(c, &err);
		goto out;
	}
	if (c->json)
		print_json(job);
	else
		printf("%lld\n", (long long)jint(job, "id"));
	json_decref(job);
out:
	json_decref(req);
	return r;
}

CLI_COMMAND(cli_submit, CLI_OPTS(submit_opts), true, 1, -1, run_submit)

/* ---- queue ----------------------------------------------------------------------------- */

enum { Q_ALL = O_FIRST_OWN, Q_STATE, Q_LIMIT };
static const struct tk_option queue_opts[] = {
	COMMON_OPTS,
	{"all", 'a', NULL, "include jobs that ended"},
	{"state", 's', "LIST", "only jobs in these states, e.g. PENDING,RUNNING"},
	{"limit", 'n', "N", "show the first N jobs, from the head of the queue (default 1000)"},
};

static double job_gpus(json_t *req)
{
	return (double)jint(req, "nodes") * (double)jint(req, "tasks_per_node") *
	       json_number_value(json_object_get(req, "gpus_per_task"));
}

static void attempt_nodes(json_t *a, char *buf, size_t n)
{
	struct strbuf sb;
	strbuf_init(&sb);
	size_t i;
	json_t *node;
	json_array_foreach (json_object_get(a, "nodes"), i, node) {
		if (i == 3) {
			strbuf_addf(&sb, ",+%zu", json_array_size(json_object_get(a, "nodes")) - 3);
			break;
		}
		strbuf_addf(&sb, "%s%s", i ? "," : "", jstr(node, "name"));
	}
	snprintf(buf, n, "%s", sb.buf);
	strbuf_release(&sb);
}

int fetch_jobs(struct ctx *c, const char *state, int64_t max, json_t **ret, int64_t *total,
	       struct tk_error *err)
{
	json_t *all = json_array();
	int64_t after = 0;
	for (;;) {
		char path[256];
		int64_t want = MIN(1000, max - (int64_t)json_array_size(all));
		int n = snprintf(path, sizeof(path), "/v1/jobs?limit=%lld&after=%lld",
				 (long long)want, (long long)after);
		if (state)
			snprintf(path + n, sizeof(path) - (size_t)n, "&state=%.100s", state);
		json_t *res;
		if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &res, NULL, err) <
		    0) {
			json_decref(all);
			return -1;
		}
		*total = jint(res, "total");
		json_array_extend(all, json_object_get(res, "jobs"));
		json_t *next = json_object_get(res, "next");
		bool more = json_is_integer(next);
		after = more ? json_integer_value(next) : 0;
		json_decref(res);
		if (!more || (int64_t)json_array_size(all) >= max)
			break;
	}
	*ret = all;
	return 0;
}

static int run_queue(struct ctx *c)
{
	const char *state = c->v[Q_STATE] ? c->v[Q_STATE] : (c->v[Q_ALL] ? NULL : "active");
	int64_t limit = 1000;
	if (c->v[Q_LIMIT] && tk_parse_int64(c->v[Q_LIMIT], 1, 1000000, &limit) < 0)
		return usage_error(c->cmd,
				   "--limit: must be an integer from 1 to 1000000, got \"%s\"",
				   c->v[Q_LIMIT]);
	/* the first `limit` jobs from the head of the queue, or every one
	 * with --all */
	json_t *res, *all;
	struct tk_error err;
	int64_t total = 0;
	if (fetch_jobs(c, state, c->v[Q_ALL] && !c->v[Q_LIMIT] ? INT64_MAX : limit, &all, &total,
		       &err) < 0)
		return api_error(c, &err);
	res = json_pack("{s:o, s:I}", "jobs", all, "total", (json_int_t)total);
	if (c->json) {
		print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	printf("%-7s %-16s %-8s %-8s %-10s %-10s %5s %6s %9s  %s\n", "ID", "NAME", "USER", "CLASS",
	       "QUEUE", "STATE", "NODES", "GPUS", "TIME", "NODES/REASON");
	int64_t now = (int64_t)time(NULL) * 1000;
	size_t i;
	json_t *j;
	json_array_foreach (json_object_get(res, "jobs"), i, j) {
		json_t *req = json_object_get(j, "request");
		json_t *atts = json_object_get(j, "attempts");
		json_t *a = json_array_get(atts, json_array_size(atts) - 1);
		const char *st = jstr(j, "state");
		char elapsed[32], where[200];
		int64_t from = a && strcmp(st, "PENDING") != 0 ? jint(a, "start_ms")
							       : jint(j, "submit_ms");
		int64_t to = jint(j, "end_ms") ? jint(j, "end_ms") : now;
		tk_format_duration((to - from) / 1000, elapsed, sizeof(elapsed));
		if (strcmp(st, "PENDING") == 0 || !a)
			snprintf(where, sizeof(where), "%s", jstr(j, "reason"));
		else
			attempt_nodes(a, where, sizeof(where));
		printf("%-7lld %-16.16s %-8.8s %-8.8s %-10.10s %-10s %5lld %6g %9s  %s\n",
		       (long long)jint(j, "id"), jstr(j, "name"), jstr(j, "owner"),
		       jstr(j, "class"), jstr(j, "queue"), st, (long long)jint(req, "nodes"),
		       job_gpus(req), elapsed, where);
	}
	size_t shown = json_array_size(json_object_get(res, "jobs"));
	if ((int64_t)shown < total)
		printf("showing %zu of %lld from the head of the queue (--limit N for more, --all "
		       "for every job)\n",
		       shown, (long long)total);
	json_decref(res);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_queue, CLI_OPTS(queue_opts), false, 0, 0, run_queue)

/* ---- show ------------------------------------------------------------------------------- */

static void show_job(json_t *j)
{
	json_t *req = json_object_get(j, "request");
	char t1[32], t2[32];
	printf("Job %lld \"%s\"  %s", (long long)jint(j, "id"), jstr(j, "name"), jstr(j, "state"));
	if (jint(j, "exit_code") >= 0 && strcmp(jstr(j, "state"), "PENDING") != 0)
		printf(" (exit %lld)", (long long)jint(j, "exit_code"));
	printf("\n");
	if (*jstr(j, "reason"))
		printf("  Reason:   %s\n", jstr(j, "reason"));
	fmt_time(jint(j, "submit_ms"), t1, sizeof(t1));
	printf("  Owner:    %s, submitted %s\n", jstr(j, "owner"), t1);
	printf("  Command: ");
	size_t i;
	json_t *v;
	json_array_foreach (json_object_get(req, "command"), i, v)
		printf(" %s", json_string_value(v));
	printf("\n  Folder:   %s\n  Output:   %s\n", jstr(req, "cwd"), jstr(req, "output"));
	if (*jstr(req, "image")) {
		printf("  Image:    %s", jstr(req, "image"));
		json_array_foreach (json_object_get(req, "mounts"), i, v)
			printf("%s%s", i ? ", " : "; mounts ", json_string_value(v));
		printf("\n");
	}
	printf("  Shape:    %lld node(s) x %lld task(s) x %g accelerator(s)",
	       (long long)jint(req, "nodes"), (long long)jint(req, "tasks_per_node"),
	       json_number_value(json_object_get(req, "gpus_per_task")));
	if (json_array_size(json_object_get(req, "gpu_types"))) {
		printf(" of type");
		json_array_foreach (json_object_get(req, "gpu_types"), i, v)
			printf("%s%s", i ? "|" : " ", json_string_value(v));
	}
	printf("\n");
	char tl[64] = "none";
	if (jint(req, "time_limit_s")) {
		char clock[32];
		tk_format_clock(jint(req, "time_limit_s"), clock, sizeof(clock));
		snprintf(tl, sizeof(tl), "%s (%lld s)", clock,
			 (long long)jint(req, "time_limit_s"));
	}
	printf("  Limits:   time %s, %lld CPU(s) per task, %lld MiB per node, requeue %lld\n", tl,
	       (long long)jint(req, "cpus_per_task"), (long long)jint(req, "mem_mib"),
	       (long long)jint(req, "requeue"));
	json_t *a;
	json_array_foreach (json_object_get(j, "checkpoints"), i, a) {
		fmt_time(jint(a, "at_ms"), t1, sizeof(t1));
		printf("  Checkpoint %s: step %lld of attempt %lld, %lld bytes, committed %s\n",
		       jstr(a, "tag"), (long long)jint(a, "step"), (long long)jint(a, "attempt"),
		       (long long)jint(a, "bytes"), t1);
	}
	json_array_foreach (json_object_get(j, "attempts"), i, a) {
		fmt_time(jint(a, "start_ms"), t1, sizeof(t1));
		fmt_time(jint(a, "end_ms"), t2, sizeof(t2));
		printf("  Attempt %lld: %s .. %s, master %s:%lld%s%s\n",
		       (long long)jint(a, "number"), t1,
		       json_is_true(json_object_get(a, "ended")) ? t2 : "(running)",
		       jstr(a, "master_addr"), (long long)jint(a, "master_port"),
		       *jstr(a, "reason") ? ": " : "", jstr(a, "reason"));
		size_t k;
		json_t *n;
		json_array_foreach (json_object_get(a, "nodes"), k, n) {
			printf("    node %zu %s devices", k, jstr(n, "name"));
			size_t d;
			json_t *dv;
			json_array_foreach (json_object_get(n, "devices"), d, dv)
				printf("%s%lld", d ? "," : " ", (long long)json_integer_value(dv));
			if (!json_array_size(json_object_get(n, "devices")))
				printf(" none");
			if (jint(n, "milli") < 1000)
				printf(" (%.3g of each)", jint(n, "milli") / 1000.0);
			if (*jstr(n, "digest"))
				printf(", image %.19s", jstr(n, "digest"));
			if (*jstr(n, "restore"))
				printf(", restore %s (%lld bytes from the store, %lld ms)",
				       jstr(n, "restore"), (long long)jint(n, "restore_bytes"),
				       (long long)jint(n, "restore_dur_ms"));
			printf("\n");
		}
		json_t *rs = json_object_get(a, "restore");
		if (rs && *jstr(rs, "tag"))
			printf("    restores checkpoint %s (step %lld, attempt %lld)%s\n",
			       jstr(rs, "tag"), (long long)jint(rs, "step"),
			       (long long)jint(rs, "attempt"),
			       json_is_true(json_object_get(rs, "go")) ? ", restored" : "");
		json_t *tm = json_object_get(a, "metrics");
		if (tm) {
			char when[32];
			fmt_time(jint(tm, "at_ms"), when, sizeof(when));
			printf("    metrics");
			if (jint(tm, "step") >= 0)
				printf(" at step %lld", (long long)jint(tm, "step"));
			printf(" (%s):", when);
			const char *name;
			json_t *val;
			json_object_foreach (json_object_get(tm, "values"), name, val)
				printf(" %s=%.6g", name, json_number_value(val));
			printf("\n");
		}
		json_t *t;
		json_array_foreach (json_object_get(a, "tasks"), k, t) {
			printf("    task %zu %s", k, jstr(t, "state"));
			if (strcmp(jstr(t, "state"), "EXITED") == 0) {
				if (jint(t, "signal"))
					printf(" by signal %lld", (long long)jint(t, "signal"));
				else
					printf(" with code %lld", (long long)jint(t, "exit_code"));
			}
			printf("\n");
		}
	}
}

static int run_show(struct ctx *c)
{
	int rc = CLI_EXIT_OK;
	for (int i = 0; i < c->npos; i++) {
		int64_t id;
		if (parse_id(c, c->pos[i], &id))
			return CLI_EXIT_USAGE;
		char path[64];
		snprintf(path, sizeof(path), "/v1/jobs/%lld", (long long)id);
		json_t *j;
		struct tk_error err;
		if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &j, NULL, &err) <
		    0) {
			rc = api_error(c, &err);
			continue;
		}
		if (c->json)
			print_json(j);
		else
			show_job(j);
		json_decref(j);
	}
	return rc;
}

CLI_COMMAND(cli_show, CLI_OPTS(cli_plain_opts), false, 1, -1, run_show)

/* ---- cancel ----------------------------------------------------------------------------- */

static int run_cancel(struct ctx *c)
{
	int rc = CLI_EXIT_OK;
	for (int i = 0; i < c->npos; i++) {
		int64_t id;
		if (parse_id(c, c->pos[i], &id))
			return CLI_EXIT_USAGE;
	}
	for (int i = 0; i < c->npos; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/v1/jobs/%s/cancel", c->pos[i]);
		json_t *j;
		struct tk_error err;
		if (client_call(&c->client, "POST", path, NULL, CALL_TIMEOUT_MS, &j, NULL, &err) <
		    0) {
			rc = api_error(c, &err);
			continue;
		}
		if (c->json)
			print_json(j);
		else
			printf("cancelled job %lld\n", (long long)jint(j, "id"));
		json_decref(j);
	}
	return rc;
}

CLI_COMMAND(cli_cancel, CLI_OPTS(cli_plain_opts), false, 1, -1, run_cancel)

/* ---- wait ------------------------------------------------------------------------------- */

enum { W_TIMEOUT = O_FIRST_OWN };
static const struct tk_option wait_opts[] = {
	COMMON_OPTS,
	{"timeout", 0, "TIME", "give up after this long (exit 75)"},
};

#define WAIT_EXIT_TIMEOUT 75

/* The exit status `tenk wait` gives for a job that ended. */
static int job_exit_status(json_t *j)
{
	const char *st = jstr(j, "state");
	int64_t code = jint(j, "exit_code");
	if (strcmp(st, "COMPLETED") == 0)
		return 0;
	if (strcmp(st, "TIMEOUT") == 0)
		return 124;
	if (strcmp(st, "CANCELLED") == 0)
		return 130;
	return code > 0 && code < 256 ? (int)code : 1;
}

static int run_wait(struct ctx *c)
{
	int64_t limit_s = -1;
	if (c->v[W_TIMEOUT] && tk_parse_duration(c->v[W_TIMEOUT], &limit_s) < 0)
		return usage_error(c->cmd,
				   "--timeout: expected a duration such as 30s or 10m, got "
				   "\"%s\"",
				   c->v[W_TIMEOUT]);
	for (int i = 0; i < c->npos; i++) {
		int64_t id;
		if (parse_id(c, c->pos[i], &id))
			return CLI_EXIT_USAGE;
	}
	int64_t deadline = limit_s >= 0 ? tk_mono_ms() + limit_s * 1000 : INT64_MAX;
	int rc = CLI_EXIT_OK;
	json_t *all = json_array();
	for (int i = 0; i < c->npos; i++) {
		json_t *j = NULL;
		for (;;) {
			int64_t left = (deadline - tk_mono_ms()) / 1000;
			int64_t w = MIN(left, (int64_t)WAIT_POLL_S);
			if (w < 0)
				w = 0;
			char path[96];
			snprintf(path, sizeof(path), "/v1/jobs/%s?wait=%lld", c->pos[i],
				 (long long)w);
			struct tk_error err;
			long status;
			if (client_call(&c->client, "GET", path, NULL, (w + 15) * 1000, &j, &status,
					&err) < 0) {
				if (status == 0 && tk_mono_ms() < deadline) {
					/* the server may be restarting: try again shortly */
					fprintf(stderr, "tenk wait: %s; retrying\n", err.text);
					sleep(1);
					continue;
				}
				json_decref(all);
				return api_error(c, &err);
			}
			const char *st = jstr(j, "state");
			if (strcmp(st, "PENDING") && strcmp(st, "STARTING") &&
			    strcmp(st, "RUNNING"))
				break;
			json_decref(j);
			j = NULL;
			if (tk_mono_ms() >= deadline) {
				fprintf(stderr, "tenk wait: job %s has not ended after %s\n",
					c->pos[i], c->v[W_TIMEOUT]);
				json_decref(all);
				return WAIT_EXIT_TIMEOUT;
			}
		}
		int st = job_exit_status(j);
		if (rc == CLI_EXIT_OK)
			rc = st;
		if (!c->json)
			printf("job %lld %s (exit %lld)\n", (long long)jint(j, "id"),
			       jstr(j, "state"), (long long)jint(j, "exit_code"));
		json_array_append_new(all, j);
	}
	if (c->json)
		print_json(all);
	json_decref(all);
	return rc;
}

CLI_COMMAND(cli_wait, CLI_OPTS(wait_opts), false, 1, -1, run_wait)
