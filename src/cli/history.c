/*
 * tenk history: the jobs that ran, as a trace for tenk sim.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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
	json_t *jobs;
	struct tk_error err;
	int64_t total;
	if (cli__fetch_jobs(c, "COMPLETED,FAILED,CANCELLED,TIMEOUT", INT64_MAX, &jobs, &total,
			    &err) < 0)
		return cli__api_error(c, &err);
	json_t *res = json_pack("{s:o}", "jobs", jobs);
	FILE *f = stdout;
	if (c->v[H_OUTPUT] && !(f = fopen(c->v[H_OUTPUT], "we"))) {
		fprintf(stderr, "tenk history: cannot write %s: %s\n", c->v[H_OUTPUT],
			strerror(errno));
		json_decref(res);
		return CLI_EXIT_ERROR;
	}
	int64_t first = INT64_MAX;
	size_t i;
	json_t *j;
	json_array_foreach (jobs, i, j)
		first = MIN(first, cli__jint(j, "submit_ms"));
	json_t *rows = json_array();
	json_array_foreach (jobs, i, j) {
		json_t *atts = json_object_get(j, "attempts");
		json_t *a = json_array_get(atts, json_array_size(atts) - 1);
		if (!a || !cli__jint(a, "start_ms") || !cli__jint(a, "end_ms"))
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
		/* its pools with ';' (a CSV's field), --spread, --within */
		char pool[512];
		snprintf(pool, sizeof(pool), "%s", cli__jstr(req, "pool"));
		for (char *p = pool; *p; p++)
			if (*p == ',')
				*p = ';';
		/* milliseconds as seconds, with no float noise in the JSON */
		json_t *row;
		json_array_append_new(
			rows,
			row = json_pack(
				"{s:I, s:f, s:f, s:I, s:I, s:o, s:I, s:I, s:s, s:s, s:s, s:I}",
				"id", (json_int_t)cli__jint(j, "id"), "submit_s",
				(double)(cli__jint(j, "submit_ms") - first) / 1000, "run_s",
				(double)(cli__jint(a, "end_ms") - cli__jint(a, "start_ms")) / 1000,
				"nodes", (json_int_t)cli__jint(req, "nodes"), "tasks_per_node",
				(json_int_t)cli__jint(req, "tasks_per_node"), "gpus_per_task",
				json_real(json_number_value(json_object_get(req, "gpus_per_task"))),
				"cpus_per_task", (json_int_t)cli__jint(req, "cpus_per_task"),
				"mem_mib", (json_int_t)cli__jint(req, "mem_mib"), "gpu_types",
				types, "queue", cli__jstr(j, "queue"), "class",
				cli__jstr(j, "class"), "time_limit_s",
				(json_int_t)cli__jint(req, "time_limit_s")));
		json_object_set_new(row, "pool", json_string(pool));
		json_object_set_new(row, "spread", json_string(cli__jstr(req, "spread")));
		json_object_set_new(row, "within", json_string(cli__jstr(req, "within")));
	}
	int n = (int)json_array_size(rows);
	if (c->json) {
		json_t *out = json_pack("{s:o}", "jobs", rows);
		char *text = json_dumps(out, JSON_INDENT(2) | JSON_REAL_PRECISION(12));
		fprintf(f, "%s\n", text);
		free(text);
		json_decref(out);
	} else {
		fprintf(f, "id,submit_s,run_s,nodes,tasks_per_node,gpus_per_task,cpus_per_task,"
			   "mem_mib,gpu_types,queue,class,time_limit_s,pool,spread,within\n");
		json_t *r;
		json_array_foreach (rows, i, r)
			fprintf(f, "%lld,%.3f,%.3f,%lld,%lld,%g,%lld,%lld,%s,%s,%s,%lld,%s,%s,%s\n",
				(long long)cli__jint(r, "id"),
				json_number_value(json_object_get(r, "submit_s")),
				json_number_value(json_object_get(r, "run_s")),
				(long long)cli__jint(r, "nodes"),
				(long long)cli__jint(r, "tasks_per_node"),
				json_number_value(json_object_get(r, "gpus_per_task")),
				(long long)cli__jint(r, "cpus_per_task"),
				(long long)cli__jint(r, "mem_mib"), cli__jstr(r, "gpu_types"),
				cli__jstr(r, "queue"), cli__jstr(r, "class"),
				(long long)cli__jint(r, "time_limit_s"), cli__jstr(r, "pool"),
				cli__jstr(r, "spread"), cli__jstr(r, "within"));
		json_decref(rows);
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

CLI_COMMAND(cli_history, CLI_OPTS(history_opts), false, 0, 0, run_history)
