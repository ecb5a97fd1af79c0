/*
 * The commands of nodes: nodes, drain, resume.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

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

CLI_COMMAND(cli_nodes, CLI_OPTS(cli_plain_opts), false, 0, 0, run_nodes)

/* ---- drain, resume ---------------------------------------------------------------------- */

enum { D_REASON = O_FIRST_OWN };
static const struct tk_option drain_opts[] = {
	COMMON_OPTS,
	{"reason", 'r', "TEXT", "why (required; shown in tenk nodes)"},
};

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

CLI_COMMAND(cli_drain, CLI_OPTS(drain_opts), false, 1, -1, run_drain)

static int run_resume(struct ctx *c)
{
	return node_action(c, "resume", NULL);
}

CLI_COMMAND(cli_resume, CLI_OPTS(cli_plain_opts), false, 1, -1, run_resume)
