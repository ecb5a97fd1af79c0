/*
 * tenk rollout: a change of the fleet's software in stages (server/
 * rollout.c). create NAME --image REF | --stack FIELD=VALUE,...; status
 * [NAME]; pause, resume, abort, rollback NAME.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	R_IMAGE = O_FIRST_OWN,
	R_STACK,
	R_CANARY,
	R_THEN,
	R_SOAK,
	R_DRAIN,
	R_REFCMD,
	R_NOREF,
	R_TOL,
	R_SLACK
};
static const struct tk_option rollout_opts[] = {
	COMMON_OPTS,
	{"image", 0, "REF", "create: the cluster's next default image, proven stage by stage"},
	{"stack", 0, "FIELD=VALUE,...",
	 "create: a stack installed by other means (driver=560.28,kernel=...), which each "
	 "stage's nodes must report"},
	{"canary", 0, "N", "create: the first stage's nodes (default: none, all at once)"},
	{"then", 0, "N|P%|all", "create: the next stage, in all so far (repeat it; all is last)"},
	{"soak", 0, "TIME", "create: how long each stage's nodes take work, watched (default 1h)"},
	{"drain-policy", 0, "wait|requeue",
	 "create: a stage's jobs finish (wait, default), or stop with their grace and are "
	 "requeued from their checkpoints"},
	{"reference-cmd", 0, "CMD",
	 "create: the equivalence check's reference is this command (sh -c, on each node, in "
	 "the image for --image), which prints {\"loss\": [...], \"params\": [...], "
	 "\"step_s\": [...]} last (default: tenk's own)"},
	{"no-reference", 0, NULL, "create: no equivalence check"},
	{"tolerance", 0, "REL",
	 "create: how far the reference's numbers may differ from the old stack's, relative "
	 "to their scale (default 0: bit for bit)"},
	{"step-slack", 0, "PCT",
	 "create: how much slower its steps may be than on the old stack (default 10)"},
};

static void print_rollout(json_t *ro)
{
	char when[32];
	cli__fmt_time(cli__jint(ro, "created_ms"), when, sizeof(when));
	printf("%s: %s %s, %s (stage %lld of %zu, %s), by %s at %s\n", cli__jstr(ro, "name"),
	       cli__jstr(ro, "kind"), cli__jstr(ro, "target"), cli__jstr(ro, "state"),
	       (long long)cli__jint(ro, "stage") + 1,
	       json_array_size(json_object_get(ro, "stages")), cli__jstr(ro, "phase"),
	       cli__jstr(ro, "by"), when);
	if (*cli__jstr(ro, "reason"))
		printf("  %s\n", cli__jstr(ro, "reason"));
	const char *ref = cli__jstr(ro, "reference");
	if (strcmp(ref, "none") != 0) {
		double tol = json_number_value(json_object_get(ro, "tolerance"));
		char within[32] = "bit for bit", steps[48] = "";
		if (tol > 0)
			snprintf(within, sizeof(within), "within %.3g", tol);
		if (strcmp(ref, "tenk") != 0)
			snprintf(steps, sizeof(steps), ", steps %.0f%% slower at most",
				 json_number_value(json_object_get(ro, "step_slack")) * 100);
		printf("  equivalence: reference %s, %s%s\n",
		       strcmp(ref, "tenk") == 0 ? "tenk's own" : ref, within, steps);
		const char *model;
		json_t *b;
		json_object_foreach (json_object_get(ro, "baselines"), model, b)
			printf("  old stack's reference, %s: node %s, validation %lld, digest %s\n",
			       model, cli__jstr(b, "node"), (long long)cli__jint(b, "job"),
			       cli__jstr(b, "digest"));
	}
	size_t i, k;
	json_t *st, *n;
	json_array_foreach (json_object_get(ro, "stages"), i, st) {
		printf("  stage %zu (%s):", i + 1, cli__jstr(st, "want"));
		if (!json_array_size(json_object_get(st, "nodes")))
			printf(" -");
		json_array_foreach (json_object_get(st, "nodes"), k, n) {
			printf(" %s %s", cli__jstr(n, "name"), cli__jstr(n, "state"));
			if (cli__jint(n, "validation_job"))
				printf(" (validation %lld)",
				       (long long)cli__jint(n, "validation_job"));
			json_t *eq = json_object_get(n, "equivalence");
			if (eq && !*cli__jstr(n, "verdict_reason"))
				printf(" [reference %s, digest %s]", cli__jstr(eq, "verdict"),
				       cli__jstr(eq, "digest_after"));
			if (*cli__jstr(n, "verdict_reason"))
				printf(": %s", cli__jstr(n, "verdict_reason"));
			printf("%s",
			       k + 1 < json_array_size(json_object_get(st, "nodes")) ? ";" : "");
		}
		printf("\n");
	}
	json_t *ev = json_object_get(ro, "events");
	size_t from = json_array_size(ev) > 8 ? json_array_size(ev) - 8 : 0;
	for (i = from; i < json_array_size(ev); i++) {
		json_t *e = json_array_get(ev, i);
		cli__fmt_time(cli__jint(e, "at_ms"), when, sizeof(when));
		printf("  %s  %s\n", when, cli__jstr(e, "what"));
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
	} else if (json_object_get(res, "rollouts")) {
		size_t i;
		json_t *ro;
		json_array_foreach (json_object_get(res, "rollouts"), i, ro)
			print_rollout(ro);
		if (!json_array_size(json_object_get(res, "rollouts")))
			printf("no rollouts (tenk rollout create NAME --image REF | --stack "
			       "FIELD=VALUE)\n");
	} else {
		print_rollout(res);
	}
	json_decref(res);
	return CLI_EXIT_OK;
}

static int create(struct ctx *c, const char *name)
{
	if (!c->v[R_IMAGE] == !c->v[R_STACK])
		return cli__usage_error(c->cmd, "create: give --image REF or --stack FIELD=VALUE");
	json_t *stages = json_array();
	if (c->v[R_CANARY])
		json_array_append_new(stages, json_string(c->v[R_CANARY]));
	/* every --then, in order (the option table keeps the last) */
	for (int i = 1; i < c->argc && strcmp(c->argv[i], "--") != 0; i++) {
		if (strcmp(c->argv[i], "--then") == 0 && i + 1 < c->argc)
			json_array_append_new(stages, json_string(c->argv[++i]));
		else if (strncmp(c->argv[i], "--then=", 7) == 0)
			json_array_append_new(stages, json_string(c->argv[i] + 7));
	}
	json_t *body = json_pack("{s:s}", "name", name);
	/* none: every node at once */
	if (json_array_size(stages))
		json_object_set_new(body, "stages", stages);
	else
		json_decref(stages);
	json_object_set_new(body, c->v[R_IMAGE] ? "image" : "stack",
			    json_string(c->v[R_IMAGE] ? c->v[R_IMAGE] : c->v[R_STACK]));
	if (c->v[R_SOAK]) {
		int64_t s;
		if (tk_parse_duration(c->v[R_SOAK], &s) < 0) {
			json_decref(body);
			return cli__usage_error(c->cmd,
						"--soak: a duration such as 30s, 10m, 1h; got "
						"\"%s\"",
						c->v[R_SOAK]);
		}
		json_object_set_new(body, "soak_s", json_integer(s));
	}
	if (c->v[R_DRAIN])
		json_object_set_new(body, "drain_policy", json_string(c->v[R_DRAIN]));
	if (c->v[R_REFCMD] && c->v[R_NOREF]) {
		json_decref(body);
		return cli__usage_error(c->cmd,
					"--reference-cmd and --no-reference: one or neither");
	}
	if (c->v[R_REFCMD] || c->v[R_NOREF])
		json_object_set_new(body, "reference",
				    json_string(c->v[R_NOREF] ? "none" : c->v[R_REFCMD]));
	const char *nums[2] = {c->v[R_TOL], c->v[R_SLACK]};
	for (int i = 0; i < 2; i++) {
		if (!nums[i])
			continue;
		char *end;
		double d = strtod(nums[i], &end);
		if (end == nums[i] || *end || !(d >= 0 && d <= (i ? 1000 : 1))) {
			json_decref(body);
			return cli__usage_error(c->cmd, "--%s: %s, got \"%s\"",
						i ? "step-slack" : "tolerance",
						i ? "a percentage from 0 to 1000"
						  : "a relative difference from 0 to 1 (1e-6: a "
						    "millionth of the numbers' scale)",
						nums[i]);
		}
		json_object_set_new(body, i ? "step_slack" : "tolerance",
				    json_real(i ? d / 100 : d));
	}
	return call(c, "POST", "/v1/rollouts", body);
}

static int run_rollout(struct ctx *c)
{
	const char *verb = c->pos[0], *name = c->npos > 1 ? c->pos[1] : NULL;
	bool creating = strcmp(verb, "create") == 0;
	bool acts = strcmp(verb, "pause") == 0 || strcmp(verb, "resume") == 0 ||
		    strcmp(verb, "abort") == 0 || strcmp(verb, "rollback") == 0;
	if (!creating && !acts && strcmp(verb, "status") != 0)
		return cli__usage_error(c->cmd,
					"no such subcommand \"%s\" (create, status, pause, "
					"resume, abort, rollback)",
					verb);
	if ((creating || acts) && !name)
		return cli__usage_error(c->cmd, "%s: name the rollout", verb);
	if (name && !model_name_valid(name))
		return cli__usage_error(c->cmd, "\"%s\" is not a rollout's name", name);
	for (int k = R_IMAGE; k <= R_SLACK && !creating; k++)
		if (c->v[k])
			return cli__usage_error(c->cmd, "--%s is for create", rollout_opts[k].name);
	if (creating)
		return create(c, name);
	char path[160];
	if (acts) {
		snprintf(path, sizeof(path), "/v1/rollouts/%s/%s", name, verb);
		return call(c, "POST", path, NULL);
	}
	if (name)
		snprintf(path, sizeof(path), "/v1/rollouts/%s", name);
	return call(c, "GET", name ? path : "/v1/rollouts", NULL);
}

CLI_COMMAND(cli_rollout, CLI_OPTS(rollout_opts), false, 1, 2, run_rollout)
