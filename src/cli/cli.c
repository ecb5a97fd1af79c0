/*
 * The user commands. Each is a row of `commands[]`: its options table, how
 * many arguments it takes, and its function. Usage errors (exit 2) and help
 * text are generated from the tables; API errors print the server's message
 * (exit 1).
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define CALL_TIMEOUT_MS 30000L
#define WAIT_POLL_S 30

/* Every command's first options, in this order. */
enum { O_SERVER, O_TOKEN, O_TOKEN_FILE, O_JSON, O_HELP, O_FIRST_OWN };
#define COMMON_OPTS                                                                                \
	{"server", 0, "URL", "the tenk server (default: $TENK_SERVER)"},                           \
		{"token", 0, "TOKEN", "the API token (default: $TENK_TOKEN)"},                     \
		{"token-file", 0, "FILE", "read the API token from FILE"},                         \
		{"json", 0, NULL, "print the API's JSON objects"},                                 \
	{                                                                                          \
		"help", 'h', NULL, "show this help"                                                \
	}

struct ctx;

struct command {
	const char *name;
	const char *args;
	const char *summary;
	const struct tk_option *opts;
	size_t nopts;
	bool stop_at_positional;
	int min_args;
	int max_args; /* -1: any number */
	int (*run)(struct ctx *c);
};

struct ctx {
	const struct command *cmd;
	const char *v[40];
	char **pos;
	int npos;
	struct client client;
	bool json;
};

static int usage_error(const struct command *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int usage_error(const struct command *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "tenk %s: ", cmd->name);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: tenk %s [OPTIONS] %s (see tenk %s --help)\n", cmd->name,
		cmd->args, cmd->name);
	return CLI_EXIT_USAGE;
}

static int api_error(const struct ctx *c, const struct tk_error *err)
{
	fprintf(stderr, "tenk %s: %s\n", c->cmd->name, err->text);
	return CLI_EXIT_ERROR;
}

static void print_json(json_t *j)
{
	char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
	puts(text);
	free(text);
}

static void fmt_time(int64_t ms, char *buf, size_t n)
{
	if (ms <= 0) {
		snprintf(buf, n, "-");
		return;
	}
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}

static int64_t jint(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

static const char *jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

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
};

static const struct tk_option submit_opts[] = {
	COMMON_OPTS,
	{"nodes", 'N', "N", "nodes, all started together (default 1)"},
	{"tasks-per-node", 0, "N", "processes per node (default 1)"},
	{"gpus-per-task", 'G', "G", "accelerators per task; a fraction below 1 shares one"},
	{"gpu-type", 0, "LIST", "acceptable models, e.g. H100,A100-80GB"},
	{"cpus-per-task", 'c', "N", "CPUs reserved per task (default 0: none reserved)"},
	{"mem", 0, "SIZE", "memory reserved per node, e.g. 64G"},
	{"time", 't', "LIMIT", "time limit, e.g. 90m, 2h, 1-00:00:00"},
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
	if (tk_parse_duration(v, &s) < 0)
		return usage_error(c->cmd,
				   "--%s: expected a duration such as 90s, 30m, 2h, 1d or "
				   "1-02:00:00, got \"%s\"",
				   submit_opts[opt].name, v);
	json_object_set_new(req, key, json_integer(s));
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

/* ---- queue ----------------------------------------------------------------------------- */

enum { Q_ALL = O_FIRST_OWN, Q_STATE, Q_LIMIT };
static const struct tk_option queue_opts[] = {
	COMMON_OPTS,
	{"all", 'a', NULL, "include jobs that ended"},
	{"state", 's', "LIST", "only jobs in these states, e.g. PENDING,RUNNING"},
	{"limit", 'n', "N", "show the newest N jobs at most (default 1000)"},
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

static int run_queue(struct ctx *c)
{
	char path[256];
	const char *state = c->v[Q_STATE] ? c->v[Q_STATE] : (c->v[Q_ALL] ? NULL : "active");
	int64_t limit = 1000;
	if (c->v[Q_LIMIT] && tk_parse_int64(c->v[Q_LIMIT], 1, 100000, &limit) < 0)
		return usage_error(c->cmd,
				   "--limit: must be an integer from 1 to 100000, got \"%s\"",
				   c->v[Q_LIMIT]);
	if (state)
		snprintf(path, sizeof(path), "/v1/jobs?limit=%lld&state=%.100s", (long long)limit,
			 state);
	else
		snprintf(path, sizeof(path), "/v1/jobs?limit=%lld", (long long)limit);
	json_t *res;
	struct tk_error err;
	if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &res, NULL, &err) < 0)
		return api_error(c, &err);
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
	json_decref(res);
	return CLI_EXIT_OK;
}

/* ---- show ------------------------------------------------------------------------------- */

static int parse_id(struct ctx *c, const char *s, int64_t *ret)
{
	if (tk_parse_int64(s, 1, INT64_MAX, ret) < 0)
		return usage_error(c->cmd, "a job id is a positive integer, got \"%s\"", s);
	return 0;
}

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
	printf("  Shape:    %lld node(s) x %lld task(s) x %g accelerator(s)",
	       (long long)jint(req, "nodes"), (long long)jint(req, "tasks_per_node"),
	       json_number_value(json_object_get(req, "gpus_per_task")));
	if (json_array_size(json_object_get(req, "gpu_types"))) {
		printf(" of type");
		json_array_foreach (json_object_get(req, "gpu_types"), i, v)
			printf("%s%s", i ? "|" : " ", json_string_value(v));
	}
	printf("\n");
	char tl[32] = "none";
	if (jint(req, "time_limit_s"))
		tk_format_duration(jint(req, "time_limit_s"), tl, sizeof(tl));
	printf("  Limits:   time %s, %lld CPU(s) per task, %lld MiB per node, requeue %lld\n", tl,
	       (long long)jint(req, "cpus_per_task"), (long long)jint(req, "mem_mib"),
	       (long long)jint(req, "requeue"));
	json_t *a;
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

/* ---- nodes -------------------------------------------------------------------------------- */

static void accel_summary(json_t *n, char *buf, size_t len, double *ret_used)
{
	struct strbuf sb;
	strbuf_init(&sb);
	json_t *accels = json_object_get(n, "accelerators");
	const char *model = NULL;
	int count = 0;
	double used = 0;
	size_t i;
	json_t *a;
	json_array_foreach (accels, i, a) {
		used += json_number_value(json_object_get(a, "used"));
		if (model && strcmp(model, jstr(a, "model")) == 0) {
			count++;
			continue;
		}
		if (model)
			strbuf_addf(&sb, "%s%dx%s", sb.len ? "," : "", count, model);
		model = jstr(a, "model");
		count = 1;
	}
	if (model)
		strbuf_addf(&sb, "%s%dx%s", sb.len ? "," : "", count, model);
	snprintf(buf, len, "%s", sb.len ? sb.buf : "-");
	strbuf_release(&sb);
	*ret_used = used;
}

static int run_nodes(struct ctx *c)
{
	json_t *res;
	struct tk_error err;
	if (client_call(&c->client, "GET", "/v1/nodes", NULL, CALL_TIMEOUT_MS, &res, NULL, &err) <
	    0)
		return api_error(c, &err);
	if (c->json) {
		print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	printf("%-16s %-11s %9s %11s %-20s %6s %5s %-18s %s\n", "NAME", "STATE", "CPUS", "MEM(GiB)",
	       "ACCELERATORS", "USED", "JOBS", "VALIDATION", "REASON");
	size_t i;
	json_t *n;
	json_array_foreach (json_object_get(res, "nodes"), i, n) {
		char acc[128], cpus[48], mem[48], val[48] = "-";
		double used;
		accel_summary(n, acc, sizeof(acc), &used);
		snprintf(cpus, sizeof(cpus), "%lld/%lld", (long long)jint(n, "cpus_used"),
			 (long long)jint(n, "cpus"));
		snprintf(mem, sizeof(mem), "%lld/%lld", (long long)(jint(n, "mem_used_mib") / 1024),
			 (long long)(jint(n, "mem_mib") / 1024));
		/* the last validation: its verdict, and the layer that failed */
		json_t *v = json_object_get(n, "validation");
		if (json_is_object(v)) {
			const char *layer = jstr(v, "layer");
			snprintf(val, sizeof(val), "%s%s%s%s", jstr(v, "verdict"),
				 *layer ? " (" : "", layer, *layer ? ")" : "");
		}
		printf("%-16.16s %-11s %9s %11s %-20.20s %6g %5zu %-18s %s\n", jstr(n, "name"),
		       jstr(n, "state"), cpus, mem, acc, used,
		       json_array_size(json_object_get(n, "jobs")), val, jstr(n, "reason"));
	}
	json_decref(res);
	return CLI_EXIT_OK;
}

/* ---- drain, resume ---------------------------------------------------------------------- */

enum { D_REASON = O_FIRST_OWN };
static const struct tk_option drain_opts[] = {
	COMMON_OPTS,
	{"reason", 'r', "TEXT", "why (required; shown in tenk nodes)"},
};
static const struct tk_option plain_opts[] = {COMMON_OPTS};

static int node_action(struct ctx *c, const char *action, json_t *body)
{
	int rc = CLI_EXIT_OK;
	for (int i = 0; i < c->npos; i++) {
		char *path = xasprintf("/v1/nodes/%s/%s", c->pos[i], action);
		json_t *n;
		struct tk_error err;
		int r = client_call(&c->client, "POST", path, body, CALL_TIMEOUT_MS, &n, NULL,
				    &err);
		free(path);
		if (r < 0) {
			rc = api_error(c, &err);
			continue;
		}
		if (c->json)
			print_json(n);
		else
			printf("node %s: %s\n", jstr(n, "name"), jstr(n, "state"));
		json_decref(n);
	}
	return rc;
}

static int run_drain(struct ctx *c)
{
	if (!c->v[D_REASON] || !*c->v[D_REASON])
		return usage_error(c->cmd,
				   "--reason TEXT is required: say why the node is drained");
	json_t *body = json_pack("{s:s}", "reason", c->v[D_REASON]);
	int rc = node_action(c, "drain", body);
	json_decref(body);
	return rc;
}

static int run_resume(struct ctx *c)
{
	return node_action(c, "resume", NULL);
}

/* ---- queues, classes ---------------------------------------------------------------- */

enum { QS_GPUS = O_FIRST_OWN, QS_BORROW, QS_WEIGHT, QS_USERS };
static const struct tk_option queues_opts[] = {
	COMMON_OPTS,
	{"gpus", 0, "N", "with set: the queue's guaranteed accelerators (none: no quota)"},
	{"borrow-limit", 0, "M", "with set: how many more it may borrow when idle (none: any)"},
	{"weight", 0, "W", "with set: its fair share against other queues (default 1)"},
	{"users", 0, "LIST", "with set: who may submit to it (default: everyone)"},
};

static json_t *count_or_null(const char *v, bool *bad)
{
	if (strcmp(v, "none") == 0)
		return json_null();
	char *end;
	double x = strtod(v, &end);
	if (!*v || *end || !(x >= 0 && x <= 1e7)) {
		*bad = true;
		return NULL;
	}
	return x == floor(x) ? json_integer((json_int_t)x) : json_real(x);
}

static void fmt_gpus(json_t *v, char *buf, size_t n)
{
	if (!v || json_is_null(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%g", json_number_value(v));
}

static int run_queues(struct ctx *c)
{
	if (c->npos >= 1 && strcmp(c->pos[0], "set") == 0) {
		if (c->npos != 2)
			return usage_error(c->cmd,
					   "usage: tenk queues set NAME [--gpus N] "
					   "[--borrow-limit M] [--weight W] [--users LIST]");
		json_t *body = json_object();
		bool bad = false;
		if (c->v[QS_GPUS]) {
			json_t *v = count_or_null(c->v[QS_GPUS], &bad);
			if (bad) {
				json_decref(body);
				return usage_error(c->cmd,
						   "--gpus: a number of accelerators or none, "
						   "got \"%s\"",
						   c->v[QS_GPUS]);
			}
			json_object_set_new(body, "gpus", v);
		}
		if (c->v[QS_BORROW]) {
			json_t *v = count_or_null(c->v[QS_BORROW], &bad);
			if (bad) {
				json_decref(body);
				return usage_error(c->cmd,
						   "--borrow-limit: a number of accelerators or "
						   "none, got \"%s\"",
						   c->v[QS_BORROW]);
			}
			json_object_set_new(body, "borrow_limit", v);
		}
		if (c->v[QS_WEIGHT]) {
			char *end;
			double w = strtod(c->v[QS_WEIGHT], &end);
			if (!*c->v[QS_WEIGHT] || *end || !(w > 0)) {
				json_decref(body);
				return usage_error(c->cmd,
						   "--weight: a positive number, got \"%s\"",
						   c->v[QS_WEIGHT]);
			}
			json_object_set_new(body, "weight", json_real(w));
		}
		if (c->v[QS_USERS]) {
			json_t *users = json_array();
			_cleanup_free_ char *copy = xstrdup(c->v[QS_USERS]);
			char *save = NULL;
			for (char *t = strtok_r(copy, ",", &save); t;
			     t = strtok_r(NULL, ",", &save))
				json_array_append_new(users, json_string(t));
			json_object_set_new(body, "users", users);
		}
		char *path = xasprintf("/v1/queues/%s", c->pos[1]);
		json_t *q;
		struct tk_error err;
		int r = client_call(&c->client, "PUT", path, body, CALL_TIMEOUT_MS, &q, NULL, &err);
		free(path);
		json_decref(body);
		if (r < 0)
			return api_error(c, &err);
		if (c->json)
			print_json(q);
		else
			printf("queue %s set\n", jstr(q, "name"));
		json_decref(q);
		return CLI_EXIT_OK;
	}
	if (c->npos)
		return usage_error(c->cmd,
				   "unexpected argument \"%s\" (did you mean `queues set`?)",
				   c->pos[0]);
	json_t *res;
	struct tk_error err;
	if (client_call(&c->client, "GET", "/v1/queues", NULL, CALL_TIMEOUT_MS, &res, NULL, &err) <
	    0)
		return api_error(c, &err);
	if (c->json) {
		print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	printf("%-16s %7s %7s %6s %7s %8s %7s %7s %7s  %s\n", "QUEUE", "QUOTA", "BORROW", "WEIGHT",
	       "IN USE", "BORROWED", "RECENT", "RUNNING", "PENDING", "USERS");
	size_t i;
	json_t *q;
	json_array_foreach (json_object_get(res, "queues"), i, q) {
		char quota[24], borrow[24];
		fmt_gpus(json_object_get(q, "gpus"), quota, sizeof(quota));
		fmt_gpus(json_object_get(q, "borrow_limit"), borrow, sizeof(borrow));
		struct strbuf users;
		strbuf_init(&users);
		size_t k;
		json_t *u;
		json_array_foreach (json_object_get(q, "users"), k, u)
			strbuf_addf(&users, "%s%s", k ? "," : "", json_string_value(u));
		printf("%-16.16s %7s %7s %6g %7g %8g %7.1f %7lld %7lld  %s\n", jstr(q, "name"),
		       quota, borrow, json_number_value(json_object_get(q, "weight")),
		       json_number_value(json_object_get(q, "in_use")),
		       json_number_value(json_object_get(q, "borrowed")),
		       json_number_value(json_object_get(q, "recent")),
		       (long long)jint(q, "running"), (long long)jint(q, "pending"),
		       users.len ? users.buf : "everyone");
		strbuf_release(&users);
	}
	json_decref(res);
	return CLI_EXIT_OK;
}

static int run_classes(struct ctx *c)
{
	json_t *res;
	struct tk_error err;
	if (client_call(&c->client, "GET", "/v1/classes", NULL, CALL_TIMEOUT_MS, &res, NULL, &err) <
	    0)
		return api_error(c, &err);
	if (c->json) {
		print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	printf("%-12s %8s %-12s %-12s %7s\n", "CLASS", "PRIORITY", "MAY PREEMPT", "PREEMPTIBLE",
	       "PENDING");
	size_t i;
	json_t *k;
	json_array_foreach (json_object_get(res, "classes"), i, k)
		printf("%-12s %8lld %-12s %-12s %7lld%s\n", jstr(k, "name"),
		       (long long)jint(k, "priority"),
		       json_is_true(json_object_get(k, "may_preempt")) ? "yes" : "no",
		       json_is_true(json_object_get(k, "preemptible")) ? "yes" : "no",
		       (long long)jint(k, "pending"),
		       json_is_true(json_object_get(k, "default")) ? "  (default)" : "");
	json_decref(res);
	return CLI_EXIT_OK;
}

/* ---- users --------------------------------------------------------------------------- */

enum { U_ADMIN = O_FIRST_OWN };
static const struct tk_option users_opts[] = {
	COMMON_OPTS,
	{"admin", 0, NULL, "with add: the user may do everything an admin may"},
};

static int run_users(struct ctx *c)
{
	json_t *res = NULL;
	struct tk_error err;
	int r;
	if (c->npos == 2 && strcmp(c->pos[0], "add") == 0) {
		json_t *body =
			json_pack("{s:s, s:b}", "name", c->pos[1], "admin", c->v[U_ADMIN] != NULL);
		r = client_call(&c->client, "POST", "/v1/users", body, CALL_TIMEOUT_MS, &res, NULL,
				&err);
		json_decref(body);
		if (r < 0)
			return api_error(c, &err);
		if (c->json)
			print_json(res);
		else
			printf("%s\n", jstr(res, "token")); /* shown once: hand it to the user */
	} else if (c->npos == 2 && strcmp(c->pos[0], "rm") == 0) {
		char *path = xasprintf("/v1/users/%s", c->pos[1]);
		r = client_call(&c->client, "DELETE", path, NULL, CALL_TIMEOUT_MS, &res, NULL,
				&err);
		free(path);
		if (r < 0)
			return api_error(c, &err);
		if (c->json)
			print_json(res);
		else
			printf("removed user %s\n", c->pos[1]);
	} else if (c->npos == 0) {
		if (client_call(&c->client, "GET", "/v1/users", NULL, CALL_TIMEOUT_MS, &res, NULL,
				&err) < 0)
			return api_error(c, &err);
		if (c->json) {
			print_json(res);
		} else {
			size_t i;
			json_t *u;
			printf("%-24s %s\n", "USER", "ADMIN");
			json_array_foreach (json_object_get(res, "users"), i, u)
				printf("%-24s %s\n", jstr(u, "name"),
				       json_is_true(json_object_get(u, "admin")) ? "yes" : "no");
		}
	} else {
		return usage_error(c->cmd, "expected no argument, add NAME or rm NAME");
	}
	json_decref(res);
	return CLI_EXIT_OK;
}

/* ---- history ------------------------------------------------------------------------------ */

enum { H_OUTPUT = O_FIRST_OWN };
static const struct tk_option history_opts[] = {
	COMMON_OPTS,
	{"output", 'o', "FILE", "write to FILE (default: standard output)"},
};

/* Jobs that ran and ended, as a trace `tenk sim --trace` replays: submission
 * times relative to the first, the run time of each job's last attempt, and
 * what it asked for. */
static int run_history(struct ctx *c)
{
	json_t *res;
	struct tk_error err;
	if (client_call(&c->client, "GET",
			"/v1/jobs?limit=100000&state=COMPLETED,FAILED,CANCELLED,TIMEOUT", NULL,
			CALL_TIMEOUT_MS, &res, NULL, &err) < 0)
		return api_error(c, &err);
	FILE *f = stdout;
	if (c->v[H_OUTPUT] && !(f = fopen(c->v[H_OUTPUT], "we"))) {
		fprintf(stderr, "tenk history: cannot write %s: %s\n", c->v[H_OUTPUT],
			strerror(errno));
		json_decref(res);
		return CLI_EXIT_ERROR;
	}
	fprintf(f, "id,submit_s,run_s,nodes,tasks_per_node,gpus_per_task,cpus_per_task,mem_mib,"
		   "gpu_types,queue,class,time_limit_s\n");
	json_t *jobs = json_object_get(res, "jobs");
	int64_t first = INT64_MAX;
	size_t i;
	json_t *j;
	json_array_foreach (jobs, i, j)
		first = MIN(first, jint(j, "submit_ms"));
	int n = 0;
	json_array_foreach (jobs, i, j) {
		json_t *atts = json_object_get(j, "attempts");
		json_t *a = json_array_get(atts, json_array_size(atts) - 1);
		if (!a || !jint(a, "start_ms") || !jint(a, "end_ms"))
			continue; /* never ran */
		json_t *req = json_object_get(j, "request");
		char types[512] = "";
		size_t k;
		json_t *t;
		json_array_foreach (json_object_get(req, "gpu_types"), k, t) {
			size_t len = strlen(types);
			snprintf(types + len, sizeof(types) - len, "%s%s", k ? ";" : "",
				 json_string_value(t) ? json_string_value(t) : "");
		}
		fprintf(f, "%lld,%.3f,%.3f,%lld,%lld,%g,%lld,%lld,%s,%s,%s,%lld\n",
			(long long)jint(j, "id"), (double)(jint(j, "submit_ms") - first) / 1000,
			(double)(jint(a, "end_ms") - jint(a, "start_ms")) / 1000,
			(long long)jint(req, "nodes"), (long long)jint(req, "tasks_per_node"),
			json_number_value(json_object_get(req, "gpus_per_task")),
			(long long)jint(req, "cpus_per_task"), (long long)jint(req, "mem_mib"),
			types, jstr(j, "queue"), jstr(j, "class"),
			(long long)jint(req, "time_limit_s"));
		n++;
	}
	json_decref(res);
	bool bad = ferror(f) != 0;
	if (f != stdout && fclose(f) != 0)
		bad = true;
	if (bad) {
		fprintf(stderr, "tenk history: write error\n");
		return CLI_EXIT_ERROR;
	}
	if (c->v[H_OUTPUT])
		fprintf(stderr, "%d jobs written to %s\n", n, c->v[H_OUTPUT]);
	return CLI_EXIT_OK;
}

/* ---- the table ------------------------------------------------------------------------- */

#define OPTS(t) t, ARRAY_SIZE(t)
static const struct command commands[] = {
	{"submit", "[--] COMMAND [ARGS...]", "submit a job; prints its id", OPTS(submit_opts), true,
	 1, -1, run_submit},
	{"queue", "", "list jobs waiting and running (--all: every job)", OPTS(queue_opts), false,
	 0, 0, run_queue},
	{"show", "JOB...", "show a job: request, attempts, why it waits", OPTS(plain_opts), false,
	 1, -1, run_show},
	{"cancel", "JOB...", "cancel jobs", OPTS(plain_opts), false, 1, -1, run_cancel},
	{"wait", "JOB...", "wait for jobs to end; exits with the first one's status",
	 OPTS(wait_opts), false, 1, -1, run_wait},
	{"nodes", "", "list nodes: state, devices, use", OPTS(plain_opts), false, 0, 0, run_nodes},
	{"drain", "NODE... --reason TEXT", "keep new work off nodes", OPTS(drain_opts), false, 1,
	 -1, run_drain},
	{"resume", "NODE...", "let drained nodes take work again", OPTS(plain_opts), false, 1, -1,
	 run_resume},
	{"queues", "[set NAME]", "list queues: quota, use, borrowed; or set one", OPTS(queues_opts),
	 false, 0, 2, run_queues},
	{"classes", "", "list priority classes", OPTS(plain_opts), false, 0, 0, run_classes},
	{"users", "[add NAME [--admin] | rm NAME]",
	 "list users, add one (prints its token), or "
	 "remove one",
	 OPTS(users_opts), false, 0, 2, run_users},
	{"history", "", "write the jobs that ran as a trace for tenk sim", OPTS(history_opts),
	 false, 0, 0, run_history},
};

static const struct command *find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

bool cli_has(const char *cmd)
{
	return find(cmd) != NULL;
}

void cli_commands_help(struct strbuf *sb)
{
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		strbuf_addf(sb, "  %-8s %s\n", commands[i].name, commands[i].summary);
}

int cli_run(int argc, char **argv)
{
	const struct command *cmd = find(argv[0]);
	assert(cmd);
	struct ctx c;
	memset(&c, 0, sizeof(c));
	c.cmd = cmd;
	struct tk_error err;
	assert(cmd->nopts <= ARRAY_SIZE(c.v));
	if (tk_opts_parse(cmd->opts, cmd->nopts, argc, argv, cmd->stop_at_positional, c.v, &c.pos,
			  &c.npos, &err) < 0)
		return usage_error(cmd, "%s", err.text);
	int rc;
	if (c.v[O_HELP]) {
		tk_opts_usage(cmd->opts, cmd->nopts, "usage: tenk %s [OPTIONS] %s\n%s.", cmd->name,
			      cmd->args, cmd->summary);
		rc = CLI_EXIT_OK;
		goto out;
	}
	if (c.npos < cmd->min_args) {
		rc = usage_error(cmd, "missing arguments");
		goto out;
	}
	if (cmd->max_args >= 0 && c.npos > cmd->max_args) {
		rc = usage_error(cmd, "unexpected argument \"%s\"", c.pos[cmd->max_args]);
		goto out;
	}
	c.json = c.v[O_JSON] != NULL;
	if (client_init(&c.client, c.v[O_SERVER], c.v[O_TOKEN], c.v[O_TOKEN_FILE], &err) < 0) {
		fprintf(stderr, "tenk %s: %s\n", cmd->name, err.text);
		rc = CLI_EXIT_USAGE;
		goto out;
	}
	rc = cmd->run(&c);
out:
	client_release(&c.client);
	free(c.pos);
	return rc;
}
