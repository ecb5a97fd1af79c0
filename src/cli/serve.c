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
};
static const struct tk_option serve_opts[] = {
	COMMON_OPTS,
	{"replicas", 'r', "N", "create: replicas kept running (default 1)"},
	{"port", 'p', "PORT",
	 "create: the service's address: every node's agent answers on this port and forwards "
	 "to a replica in rotation (default: none, endpoints only)"},
	{"gpus", 'G', "N", "create: accelerators of each replica (a fraction shares one)"},
	{"gpu-type", 0, "LIST", "create: acceptable models, e.g. H100,L40S"},
	{"cpus", 'c', "N", "create: CPUs reserved for each replica"},
	{"mem", 0, "SIZE", "create: memory reserved for each replica, e.g. 16G"},
	{"image", 0, "REF", "create: run each replica in this image"},
	{"class", 0, "NAME", "create: the replicas' class (default: service, where it exists)"},
	{"queue", 'q', "NAME", "create: the queue whose quota the replicas use"},
	{"output", 'o', "PATH", "create: each replica's output (default tenk-%j.out)"},
	{"health", 0, "PATH", "create: the probe's HTTP path, GET at $PORT (default /)"},
	{"probe-interval", 0, "TIME", "create: between probes (default 5s)"},
	{"probe-timeout", 0, "TIME", "create: for a probe's answer (default 2s)"},
	{"probe-threshold", 0, "N",
	 "create: failed probes in a row that restart a replica (default 3)"},
	{"probe-start", 0, "TIME",
	 "create: how long a new replica has to pass its first probe (default 5m)"},
};

static void print_service(json_t *sv, bool whole)
{
	printf("%s: %lld/%lld ready, %lld live, owner %s", cli__jstr(sv, "name"),
	       (long long)cli__jint(sv, "ready"), (long long)cli__jint(sv, "replicas"),
	       (long long)cli__jint(sv, "live"), cli__jstr(sv, "owner"));
	if (cli__jint(sv, "port"))
		printf(", port %lld on every node", (long long)cli__jint(sv, "port"));
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
	if (*cli__jstr(sv, "last_end"))
		printf("  last ended: %s\n", cli__jstr(sv, "last_end"));
	size_t i;
	json_t *r;
	json_array_foreach (json_object_get(sv, "replica_jobs"), i, r) {
		printf("  job %-8lld %-9s %-5s", (long long)cli__jint(r, "job"),
		       cli__jstr(r, "state"),
		       json_is_true(json_object_get(r, "ready")) ? "ready" : "-");
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

static int create(struct ctx *c, const char *name)
{
	if (c->npos < 3)
		return cli__usage_error(c->cmd, "create: give the replica's command after --");
	char cwd[MODEL_MAX_PATH];
	if (!getcwd(cwd, sizeof(cwd)))
		return cli__usage_error(c->cmd, "create: cannot read the current folder");
	json_t *cmd = json_array();
	for (int i = 2; i < c->npos; i++)
		json_array_append_new(cmd, json_string(c->pos[i]));
	json_t *job = json_pack("{s:o, s:s}", "command", cmd, "cwd", cwd);
	json_t *probe = json_object();
	json_t *body = json_pack("{s:s, s:o, s:o}", "name", name, "job", job, "probe", probe);
	int rc = 0;
	if (c->v[V_REPLICAS]) {
		char *end;
		long n = strtol(c->v[V_REPLICAS], &end, 10);
		if (!*c->v[V_REPLICAS] || *end || n < 0 || n > 1000)
			rc = cli__usage_error(c->cmd, "--replicas: 0 to 1000, got \"%s\"",
					      c->v[V_REPLICAS]);
		json_object_set_new(body, "replicas", json_integer(n));
	}
	if (!rc && c->v[V_PORT]) {
		char *end;
		long n = strtol(c->v[V_PORT], &end, 10);
		if (!*c->v[V_PORT] || *end || n < 1 || n > 65535)
			rc = cli__usage_error(c->cmd, "--port: 1 to 65535, got \"%s\"",
					      c->v[V_PORT]);
		json_object_set_new(body, "port", json_integer(n));
	}
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
	if (!rc && c->v[V_CPUS]) {
		char *end;
		long n = strtol(c->v[V_CPUS], &end, 10);
		if (!*c->v[V_CPUS] || *end || n < 0 || n > MODEL_MAX_CPUS)
			rc = cli__usage_error(c->cmd, "--cpus: a number of CPUs, got \"%s\"",
					      c->v[V_CPUS]);
		json_object_set_new(job, "cpus_per_task", json_integer(n));
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
	if (!rc && c->v[V_THRESHOLD]) {
		char *end;
		long n = strtol(c->v[V_THRESHOLD], &end, 10);
		if (!*c->v[V_THRESHOLD] || *end || n < 1 || n > 100)
			rc = cli__usage_error(c->cmd, "--probe-threshold: 1 to 100, got \"%s\"",
					      c->v[V_THRESHOLD]);
		json_object_set_new(probe, "threshold", json_integer(n));
	}
	if (rc || (rc = seconds_opt(c, V_INTERVAL, probe, "interval_s")) ||
	    (rc = seconds_opt(c, V_TIMEOUT, probe, "timeout_s")) ||
	    (rc = seconds_opt(c, V_START, probe, "start_s"))) {
		json_decref(body);
		return rc;
	}
	return call(c, "POST", "/v1/services", body);
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

static int run_serve(struct ctx *c)
{
	static const char *const verbs[] = {"create",	 "apply", "ls",	    "show",
					    "endpoints", "scale", "delete", NULL};
	const char *verb = c->pos[0], *name = c->npos > 1 ? c->pos[1] : NULL;
	int v = 0;
	while (verbs[v] && strcmp(verbs[v], verb) != 0)
		v++;
	if (!verbs[v])
		return cli__usage_error(c->cmd,
					"no such subcommand \"%s\" (create, apply, ls, show, "
					"endpoints, scale, delete)",
					verb);
	bool creating = v == 0;
	if (v != 2 && !name)
		return cli__usage_error(c->cmd, "%s: name the %s", verb,
					v == 1 ? "file (- for standard input)" : "service");
	if (v != 1 && name && !model_name_valid(name))
		return cli__usage_error(c->cmd, "\"%s\" is not a service's name", name);
	for (int k = V_REPLICAS; k <= V_START && !creating; k++)
		if (c->v[k])
			return cli__usage_error(c->cmd, "--%s is for create", serve_opts[k].name);
	if (!creating && c->npos > (v == 5 ? 3 : 2))
		return cli__usage_error(c->cmd, "%s: too many arguments", verb);
	char path[160];
	switch (v) {
	case 0:
		return create(c, name);
	case 1:
		return apply(c, name);
	case 2:
		return call(c, "GET", "/v1/services", NULL);
	case 3:
		snprintf(path, sizeof(path), "/v1/services/%s", name);
		return call(c, "GET", path, NULL);
	case 4:
		snprintf(path, sizeof(path), "/v1/services/%s/endpoints", name);
		return call(c, "GET", path, NULL);
	case 5: {
		char *end;
		long n = c->npos > 2 ? strtol(c->pos[2], &end, 10) : -1;
		if (c->npos < 3 || !*c->pos[2] || *end || n < 0 || n > 1000)
			return cli__usage_error(c->cmd, "scale NAME N: N replicas, 0 to 1000");
		snprintf(path, sizeof(path), "/v1/services/%s/scale", name);
		return call(c, "POST", path, json_pack("{s:i}", "replicas", (int)n));
	}
	default:
		snprintf(path, sizeof(path), "/v1/services/%s", name);
		return call(c, "DELETE", path, NULL);
	}
}

CLI_COMMAND(cli_serve, CLI_OPTS(serve_opts), false, 1, -1, run_serve)
