/*
 * What a user changes of a job once it is in: tenk cancel, hold, release
 * and requeue (tenk update is beside submit, whose options it shares).
 */
#include "internal.h"

#include <stdio.h>

/* POST /v1/jobs/JOB/ACTION for every job named; "done" says what happened.
 * With --json, each answer as the API gave it. */
static int job_action(struct ctx *c, const char *action, const char *done)
{
	for (int i = 0; i < c->npos; i++)
		if (cli__job_ref_check(c, c->pos[i]))
			return CLI_EXIT_USAGE;
	int rc = CLI_EXIT_OK;
	for (int i = 0; i < c->npos; i++) {
		_cleanup_free_ char *path = xasprintf("/v1/jobs/%s/%s", c->pos[i], action);
		json_t *j;
		struct tk_error err;
		if (client_call(&c->client, "POST", path, NULL, CALL_TIMEOUT_MS, &j, NULL, &err) <
		    0) {
			rc = cli__api_error(c, &err);
			continue;
		}
		if (c->json)
			cli__print_json(j);
		else if (json_object_get(j, "changed"))
			printf("%s %lld element(s) of array %s\n", done,
			       (long long)cli__jint(j, "changed"), c->pos[i]);
		else
			printf("%s job %s\n", done, c->pos[i]);
		json_decref(j);
	}
	return rc;
}

static int run_cancel(struct ctx *c)
{
	return job_action(c, "cancel", "cancelled");
}

static int run_hold(struct ctx *c)
{
	return job_action(c, "hold", "held");
}

static int run_release(struct ctx *c)
{
	return job_action(c, "release", "released");
}

static int run_requeue(struct ctx *c)
{
	return job_action(c, "requeue", "requeued");
}

CLI_COMMAND(cli_cancel, CLI_OPTS(cli_plain_opts), false, 1, -1, run_cancel)
CLI_COMMAND(cli_hold, CLI_OPTS(cli_plain_opts), false, 1, -1, run_hold)
CLI_COMMAND(cli_release, CLI_OPTS(cli_plain_opts), false, 1, -1, run_release)
CLI_COMMAND(cli_requeue, CLI_OPTS(cli_plain_opts), false, 1, -1, run_requeue)
