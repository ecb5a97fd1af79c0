/*
 * What a user changes of a job once it is in: tenk hold, release and
 * requeue (tenk update is beside submit, whose options it shares).
 */
#include "internal.h"

#include <stdio.h>

/* POST /v1/jobs/JOB/ACTION for every job named; "done" says what happened. */
static int job_action(struct ctx *c, const char *action, const char *done)
{
	for (int i = 0; i < c->npos; i++)
		if (job_ref_check(c, c->pos[i]))
			return CLI_EXIT_USAGE;
	int rc = CLI_EXIT_OK;
	json_t *all = json_array();
	for (int i = 0; i < c->npos; i++) {
		_cleanup_free_ char *path = xasprintf("/v1/jobs/%s/%s", c->pos[i], action);
		json_t *j;
		struct tk_error err;
		if (client_call(&c->client, "POST", path, NULL, CALL_TIMEOUT_MS, &j, NULL, &err) <
		    0) {
			rc = api_error(c, &err);
			continue;
		}
		if (!c->json && json_object_get(j, "changed"))
			printf("%s %lld of the elements of array %s\n", done,
			       (long long)jint(j, "changed"), c->pos[i]);
		else if (!c->json)
			printf("%s job %s\n", done, c->pos[i]);
		json_array_append_new(all, j);
	}
	if (c->json)
		print_json(all);
	json_decref(all);
	return rc;
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

CLI_COMMAND(cli_hold, CLI_OPTS(cli_plain_opts), false, 1, -1, run_hold)
CLI_COMMAND(cli_release, CLI_OPTS(cli_plain_opts), false, 1, -1, run_release)
CLI_COMMAND(cli_requeue, CLI_OPTS(cli_plain_opts), false, 1, -1, run_requeue)
