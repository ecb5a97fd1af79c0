/*
 * tenk serve: long-running services of replicas (server/services.c).
 * create NAME [--replicas N] [-G N] [--image REF] [--health PATH] ... --
 * COMMAND; apply FILE (the API's JSON); ls; show NAME; endpoints NAME;
 * scale NAME N; delete NAME. A replica serves on $PORT.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	V_REPLICAS = O_FIRST_OWN,
	V_PORT,
	V_GPUS,
	V_GPU_TYPE,
	V_CPUS,
	V_MEM,
	V_IMAGE,
	V_CLASS,
	V_QUEUE,
	V_OUTPUT,
	V_HEALTH,
	V_INTERVAL,
	V_TIMEOUT,
	V_THRESHOLD,
	V_START,
	V_SURGE,
	V_UNAVAILABLE,
	V_AUTOSCALE,
	V_TARGET,
	V_DOWN_AFTER,
	V_LINES,
};
static const struct tk_option serve_opts[] = {
	COMMON_OPTS,
	{"replicas", 'r', "N", "create: replicas kept running (default 1)"},
	{"port", 'p', "PORT",
	 "create: the service's address: every node's agent answers on this port and forwards "
	 "to a replica in rotation (default: none, endpoints only)"},
	{"gpus", 'G', "N", "create, update: accelerators of each replica (a fraction shares one)"},
	{"gpu-type", 0, "LIST", "create, update: acceptable models, e.g. H100,L40S"},
	{"cpus", 'c', "N", "create, update: CPUs reserved for each replica"},
	{"mem", 0, "SIZE", "create, update: memory reserved for each replica, e.g. 16G"},
	{"image", 0, "REF", "create, update: run each replica in this image"},
	{"class", 0, "NAME",
	 "create, update: the replicas' class (default: service, where it exists)"},
	{"queue", 'q', "NAME", "create, update: the queue whose quota the replicas use"},
	{"output", 'o', "PATH", "create, update: each replica's output (default tenk-%j.out)"},
	{"health", 0, "PATH", "create, update: the probe's HTTP path, GET at $PORT (default /)"},
	{"probe-interval", 0, "TIME", "create, update: between probes (default 5s)"},
	{"probe-timeout", 0, "TIME", "create, update: for a probe's answer (default 2s)"},
	{"probe-threshold", 0, "N",
	 "create, update: failed probes in a row that restart a replica (default 3)"},
	{"probe-start", 0, "TIME",
	 "create, update: how long a new replica has to pass its first probe (default 5m)"},
	{"max-surge", 0, "N", "update: new replicas made beyond the count at once (default 1)"},
	{"max-unavailable", 0, "N",
	 "update: replicas in rotation it may go below the count by (default 0)"},
	{"autoscale", 0, "MIN:MAX",
	 "create, scale: replicas kept between MIN and MAX by the load the nodes' forwarders "
	 "carry (MIN 0: none while idle, one started by the first request)"},
	{"target-inflight", 0, "N",
	 "create, scale: busy connections each replica should carry (with --autoscale)"},
	{"scale-down-after", 0, "TIME",
	 "create, scale: fewer replicas only once fewer would have done this long (default "
	 "1m)"},
	{"lines", 'n', "N", "logs: each replica's last N lines (default 20)"},
};

static void print_service(json_t *sv, bool whole)
{
	printf("%s: %lld/%lld ready, %lld live, owner %s", cli__jstr(sv, "name"),
	       (long long)cli__jint(sv, "ready"), (long long)cli__jint(sv, "replicas"),
	       (long long)cli__jint(sv, "live"), cli__jstr(sv, "owner"));
	if (cli__jint(sv, "port"))
		printf(", port %lld on every node", (long long)cli__jint(sv, "port"));
	json_t *as = json_object_get(sv, "autoscale");
	if (as)
		printf(", autoscaled %lld:%lld at %lld busy each", (long long)cli__jint(as, "min"),
		       (long long)cli__jint(as, "max"),
		       (long long)cli__jint(as, "target_inflight"));
	if (cli__jint(sv, "replaced"))
		printf(", %lld replaced", (long long)cli__jint(sv, "replaced"));
	if (json_is_true(json_object_get(sv, "deleting")))
		printf(", being deleted");
	printf("\n");
	if (!whole)
		return;
	json_t *p = json_object_get(sv, "probe");
	printf("  probe: GET %s every %gs (timeout %gs, %lld failures restart it, %gs to start)\n",
	       cli__jstr(p, "path"), json_number_value(json_object_get(p, "interval_s")),
	       json_number_value(json_object_get(p, "timeout_s")),
	       (long long)cli__jint(p, "threshold"),
	       json_number_value(json_object_get(p, "start_s")));
	json_t *u = json_object_get(sv, "update");
	if (u) {
		printf("  update: %s, version %lld (from %lld)", cli__jstr(u, "state"),
		       (long long)cli__jint(u, "version"), (long long)cli__jint(u, "from_version"));
		if (*cli__jstr(u, "reason"))
			printf(": %s", cli__jstr(u, "reason"));
		printf("\n");
	}
	if (*cli__jstr(sv, "last_end"))
		printf("  last ended: %s\n", cli__jstr(sv, "last_end"));
	size_t i;
	json_t *r;
	json_array_foreach (json_object_get(sv, "replica_jobs"), i, r) {
		printf("  job %-8lld v%-3lld %-9s %-8s", (long long)cli__jint(r, "job"),
		       (long long)cli__jint(r, "version"), cli__jstr(r, "state"),
		       json_is_true(json_object_get(r, "draining")) ? "draining"
		       : json_is_true(json_object_get(r, "ready"))  ? "ready"
								    : "-");
		if (json_object_get(r, "port"))
			printf(" %s %s:%lld", cli__jstr(r, "node"), cli__jstr(r, "addr"),
			       (long long)cli__jint(r, "port"));
		if (*cli__jstr(r, "reason"))
			printf("  (%s)", cli__jstr(r, "reason"));
		printf("\n");
	}
}

static int call(struct ctx *c, const char *method, const char *path, json_t *body)
{
	json_t *res;
	int rc = cli__call(c, method, path, body, &res);
	if (rc)
		return rc;
	if (c->json) {
		cli__print_json(res);
	} else if (json_object_get(res, "services")) {
		size_t i;
		json_t *sv;
		json_array_foreach (json_object_get(res, "services"), i, sv)
			print_service(sv, false);
		if (!json_array_size(json_object_get(res, "services")))
			printf("no services (tenk serve create NAME -- COMMAND)\n");
	} else if (json_object_get(res, "endpoints") && !json_object_get(res, "replicas")) {
		size_t i;
		json_t *e;
		json_array_foreach (json_object_get(res, "endpoints"), i, e)
			printf("%s:%lld\tjob %lld on %s\n", cli__jstr(e, "addr"),
			       (long long)cli__jint(e, "port"), (long long)cli__jint(e, "job"),
			       cli__jstr(e, "node"));
	} else if (json_object_get(res, "deleted")) {
		printf("service %s deleted: its %lld replica(s) stop\n", cli__jstr(res, "deleted"),
		       (long long)cli__jint(res, "replicas"));
	} else {
		print_service(res, true);
	}
	json_decref(res);
	return CLI_EXIT_OK;
}

static int seconds_opt(struct ctx *c, int opt, json_t *probe, const char *key)
{
	if (!c->v[opt])
		return 0;
	int64_t s;
	if (tk_parse_duration(c->v[opt], &s) < 0 || s < 1)
		return cli__usage_error(c->cmd, "--%s: a duration such as 5s, 2m; got \"%s\"",
					serve_opts[opt].name, c->v[opt]);
	json_object_set_new(probe, key, json_integer(s));
	return 0;
}

static int long_opt(struct ctx *c, int opt, long min, long max, json_t *o, const char *key)
{
	if (!c->v[opt])
		return 0;
	char *end;
	long n = strtol(c->v[opt], &end, 10);
	if (!*c->v[opt] || *end || n < min || n > max)
		return cli__usage_error(c->cmd, "--%s: %ld to %ld, got \"%s\"",
					serve_opts[opt].name, min, max, c->v[opt]);
	json_object_set_new(o, key, json_integer(n));
	return 0;
}

/* --autoscale MIN:MAX --target-inflight N [--scale-down-after TIME] into
 * body's "autoscale". */
static int autoscale_opts(struct ctx *c, json_t *body)
{
	if (!c->v[V_AUTOSCALE] && !c->v[V_TARGET] && !c->v[V_DOWN_AFTER])
		return 0;
	if (!c->v[V_AUTOSCALE] || !c->v[V_TARGET])
		return cli__usage_error(c->cmd,
					"--autoscale MIN:MAX and --target-inflight N go together");
	long min, max, target;
	char *end;
	min = strtol(c->v[V_AUTOSCALE], &end, 10);
	if (end == c->v[V_AUTOSCALE] || *end != ':' || (max = strtol(end + 1, &end, 10), *end) ||
	    min < 0 || max < 1 || min > max || max > 1000)
		return cli__usage_error(c->cmd,
					"--autoscale: MIN:MAX replicas, 0 <= MIN <= MAX <= 1000, "
					"got \"%s\"",
					c->v[V_AUTOSCALE]);
	target = strtol(c->v[V_TARGET], &end, 10);
	if (!*c->v[V_TARGET] || *end || target < 1 || target > 1000000)
		return cli__usage_error(c->cmd,
					"--target-inflight: a number of connections, got "
					"\"%s\"",
					c->v[V_TARGET]);
	json_t *as = json_pack("{s:i, s:i, s:i}", "min", (int)min, "max", (int)max,
			       "target_inflight", (int)target);
	int rc = seconds_opt(c, V_DOWN_AFTER, as, "down_after_s");
	if (rc) {
		json_decref(as);
		return rc;
	}
	json_object_set_new(body, "autoscale", as);
	return 0;
}

/* create NAME ... -- COMMAND (a whole service), or update NAME ... [--
 * COMMAND] (what changes: the keys given over the service's template). */
static int create_or_update(struct ctx *c, const char *name, bool update)
{
	if (!update && c->npos < 3)
		return cli__usage_error(c->cmd, "create: give the replica's command after --");
	json_t *job = json_object(), *probe = json_object();
	json_t *body = update ? json_object() : json_pack("{s:s}", "name", name);
	if (c->npos > 2) {
		json_t *cmd = json_array();
		for (int i = 2; i < c->npos; i++)
			json_array_append_new(cmd, json_string(c->pos[i]));
		json_object_set_new(job, "command", cmd);
	}
	char cwd[MODEL_MAX_PATH];
	if (!update) {
		if (!getcwd(cwd, sizeof(cwd))) {
			json_decref(job);
			json_decref(probe);
			json_decref(body);
			return cli__usage_error(c->cmd, "create: cannot read the current folder");
		}
		json_object_set_new(job, "cwd", json_string(cwd));
	}
	int rc = 0;
	if (!rc && c->v[V_GPUS]) {
		char *end;
		double g = strtod(c->v[V_GPUS], &end);
		if (!*c->v[V_GPUS] || *end || !(g >= 0 && g <= MODEL_MAX_GPUS_PER_TASK))
			rc = cli__usage_error(c->cmd,
					      "--gpus: a number of accelerators, got \"%s\"",
					      c->v[V_GPUS]);
		json_object_set_new(job, "gpus_per_task", json_real(g));
	}
	if (!rc && c->v[V_GPU_TYPE]) {
		json_t *types = json_array();
		_cleanup_free_ char *copy = xstrdup(c->v[V_GPU_TYPE]);
		char *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
			json_array_append_new(types, json_string(t));
		json_object_set_new(job, "gpu_types", types);
	}
	if (!rc && c->v[V_MEM]) {
		int64_t mib;
		if (tk_parse_size_mib(c->v[V_MEM], &mib) < 0)
			rc = cli__usage_error(c->cmd,
					      "--mem: a size such as 512M or 16G, got \"%s\"",
					      c->v[V_MEM]);
		json_object_set_new(job, "mem_mib", json_integer(mib));
	}
	static const struct {
		int opt;
		const char *key;
	} strs[] = {
		{V_IMAGE, "image"}, {V_CLASS, "class"}, {V_QUEUE, "queue"}, {V_OUTPUT, "output"}};
	for (size_t i = 0; i < ARRAY_SIZE(strs); i++)
		if (c->v[strs[i].opt])
			json_object_set_new(job, strs[i].key, json_string(c->v[strs[i].opt]));
	if (c->v[V_HEALTH])
		json_object_set_new(probe, "path", json_string(c->v[V_HEALTH]));
	if (rc || (rc = long_opt(c, V_REPLICAS, 0, 1000, body, "replicas")) ||
	    (rc = long_opt(c, V_PORT, 1, 65535, body, "port")) ||
	    (rc = long_opt(c, V_CPUS, 0, MODEL_MAX_CPUS, job, "cpus_per_task")) ||
	    (rc = long_opt(c, V_THRESHOLD, 1, 100, probe, "threshold")) ||
	    (rc = long_opt(c, V_SURGE, 0, 1000, body, "max_surge")) ||
	    (rc = long_opt(c, V_UNAVAILABLE, 0, 1000, body, "max_unavailable")) ||
	    (rc = seconds_opt(c, V_INTERVAL, probe, "interval_s")) ||
	    (rc = seconds_opt(c, V_TIMEOUT, probe, "timeout_s")) ||
	    (rc = seconds_opt(c, V_START, probe, "start_s")) || (rc = autoscale_opts(c, body))) {
		json_decref(job);
		json_decref(probe);
		json_decref(body);
		return rc;
	}
	if (update && !json_object_size(job) && !json_object_size(probe)) {
		json_decref(job);
		json_decref(probe);
		json_decref(body);
		return cli__usage_error(c->cmd,
					"update: say what changes (--image, -G, ..., or the "
					"command after --)");
	}
	if (json_object_size(job) || !update)
		json_object_set_new(body, "job", job);
	else
		json_decref(job);
	if (json_object_size(probe) || !update)
		json_object_set_new(body, "probe", probe);
	else
		json_decref(probe);
	if (!update)
		return call(c, "POST", "/v1/services", body);
	char path[160];
	snprintf(path, sizeof(path), "/v1/services/%s/update", name);
	return call(c, "POST", path, body);
}

static int apply(struct ctx *c, const char *file)
{
	json_error_t jerr;
	json_t *body = strcmp(file, "-") == 0 ? json_loadf(stdin, 0, &jerr)
					      : json_load_file(file, 0, &jerr);
	if (!body) {
		fprintf(stderr, "tenk serve apply: %s: line %d: %s\n", file, jerr.line, jerr.text);
		return CLI_EXIT_USAGE;
	}
	return call(c, "POST", "/v1/services", body);
}

/* logs NAME: each live replica's last lines, under a line naming it. */
static int logs(struct ctx *c, const char *name)
{
	long lines = 20;
	if (c->v[V_LINES]) {
		char *end;
		lines = strtol(c->v[V_LINES], &end, 10);
		if (!*c->v[V_LINES] || *end || lines < 1 || lines > 100000)
			return cli__usage_error(c->cmd, "--lines: 1 to 100000, got \"%s\"",
						c->v[V_LINES]);
	}
	char path[200];
	snprintf(path, sizeof(path), "/v1/services/%s", name);
	json_t *sv;
	int rc = cli__call(c, "GET", path, NULL, &sv);
	if (rc)
		return rc;
	size_t i;
	json_t *r;
	json_array_foreach (json_object_get(sv, "replica_jobs"), i, r) {
		long long job = (long long)cli__jint(r, "job");
		snprintf(path, sizeof(path), "/v1/jobs/%lld/logs?task=0&tail=%ld", job, lines);
		json_t *ans;
		if (cli__call(c, "GET", path, NULL, &ans)) {
			rc = CLI_EXIT_ERROR; /* (said) */
			continue;
		}
		printf("==> job %lld, version %lld, %s%s%s <==\n", job,
		       (long long)cli__jint(r, "version"), cli__jstr(r, "state"),
		       *cli__jstr(r, "node") ? " on " : "", cli__jstr(r, "node"));
		size_t k;
		json_t *e;
		json_array_foreach (json_object_get(ans, "tasks"), k, e) {
			void *data;
			size_t len;
			if (*cli__jstr(e, "error"))
				printf("(%s)\n", cli__jstr(e, "error"));
			else if (tk_base64_decode(cli__jstr(e, "data"), &data, &len) == 0) {
				fwrite(data, 1, len, stdout);
				if (len && ((char *)data)[len - 1] != '\n')
					putchar('\n');
				free(data);
			}
		}
		json_decref(ans);
	}
	json_decref(sv);
	return rc;
}

/* The verbs, in the order run_serve's switch takes them. */
enum verb { CREATE, UPDATE, APPLY, LS, SHOW, ENDPOINTS, SCALE, LOGS, DELETE, VERB_MAX };
static const char *const verbs[VERB_MAX] = {"create",	 "update", "apply", "ls",    "show",
					    "endpoints", "scale",  "logs",  "delete"};

static int run_serve(struct ctx *c)
{
	const char *verb = c->pos[0], *name = c->npos > 1 ? c->pos[1] : NULL;
	int v = 0;
	while (v < VERB_MAX && strcmp(verbs[v], verb) != 0)
		v++;
	if (v == VERB_MAX)
		return cli__usage_error(c->cmd,
					"no such subcommand \"%s\" (create, update, apply, ls, "
					"show, endpoints, scale, logs, delete)",
					verb);
	if (v != LS && !name)
		return cli__usage_error(c->cmd, "%s: name the %s", verb,
					v == APPLY ? "file (- for standard input)" : "service");
	if (v != APPLY && name && !model_name_valid(name))
		return cli__usage_error(c->cmd, "\"%s\" is not a service's name", name);
	/* which options each verb takes: create the service's, update what
	 * may change and how fast */
	for (int k = V_REPLICAS; k <= V_LINES; k++) {
		bool scaling = k >= V_AUTOSCALE && k <= V_DOWN_AFTER;
		bool ok = k == V_LINES	? v == LOGS
			  : v == CREATE ? k < V_SURGE || scaling
			  : v == UPDATE ? k != V_REPLICAS && k != V_PORT && !scaling
			  : v == SCALE	? scaling
					: false;
		if (c->v[k] && !ok)
			return cli__usage_error(
				c->cmd, "--%s is not for %s%s", serve_opts[k].name, verb,
				k == V_REPLICAS && v == UPDATE ? " (tenk serve scale NAME N)" : "");
	}
	if (v != CREATE && v != UPDATE && c->npos > (v == SCALE ? 3 : 2))
		return cli__usage_error(c->cmd, "%s: too many arguments", verb);
	char path[160];
	switch ((enum verb)v) {
	case CREATE:
	case UPDATE:
		return create_or_update(c, name, v == UPDATE);
	case APPLY:
		return apply(c, name);
	case LS:
		return call(c, "GET", "/v1/services", NULL);
	case SHOW:
		snprintf(path, sizeof(path), "/v1/services/%s", name);
		return call(c, "GET", path, NULL);
	case ENDPOINTS:
		snprintf(path, sizeof(path), "/v1/services/%s/endpoints", name);
		return call(c, "GET", path, NULL);
	case LOGS:
		return logs(c, name);
	case SCALE: {
		snprintf(path, sizeof(path), "/v1/services/%s/scale", name);
		if (c->v[V_AUTOSCALE] || c->v[V_TARGET] || c->v[V_DOWN_AFTER]) {
			if (c->npos > 2)
				return cli__usage_error(c->cmd, "scale: a count N, or --autoscale "
								"MIN:MAX; not both");
			json_t *body = json_object();
			int rc = autoscale_opts(c, body);
			if (rc) {
				json_decref(body);
				return rc;
			}
			return call(c, "POST", path, body);
		}
		char *end;
		long n = c->npos > 2 ? strtol(c->pos[2], &end, 10) : -1;
		if (c->npos < 3 || !*c->pos[2] || *end || n < 0 || n > 1000)
			return cli__usage_error(c->cmd, "scale NAME N: N replicas, 0 to 1000 (or "
							"--autoscale MIN:MAX --target-inflight N)");
		return call(c, "POST", path, json_pack("{s:i}", "replicas", (int)n));
	}
	default:
		snprintf(path, sizeof(path), "/v1/services/%s", name);
		return call(c, "DELETE", path, NULL);
	}
}

CLI_COMMAND(cli_serve, CLI_OPTS(serve_opts), false, 1, -1, run_serve)
