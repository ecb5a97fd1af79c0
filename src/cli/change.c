/*
 * What a user changes of a job once it is in: tenk cancel, hold, release
 * and requeue (tenk update is beside submit, whose options it shares).
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define ACTION_MAX_RANGE 100000 /* jobs one range names at most */

/* The jobs named: ids, array elements (12_7), and ranges of ids (4-14), as
 * scancel takes them, into *ret (owned strings); or a usage error. */
static int job_refs(struct ctx *c, char ***ret, int *n)
{
	size_t alloc = 0;
	*ret = NULL;
	*n = 0;
	for (int i = 0; i < c->npos; i++) {
		const char *s = c->pos[i], *dash = strchr(s, '-');
		int64_t a, b;
		if (dash && !strchr(s, '_')) {
			_cleanup_free_ char *lo = xstrndup(s, (size_t)(dash - s));
			if (tk_parse_int64(lo, 1, INT64_MAX, &a) < 0 ||
			    tk_parse_int64(dash + 1, 1, INT64_MAX, &b) < 0 || b < a ||
			    b - a >= ACTION_MAX_RANGE)
				return cli__usage_error(c->cmd,
							"\"%s\": a range is FIRST-LAST, ids in "
							"order, at most %d of them",
							s, ACTION_MAX_RANGE);
			for (int64_t id = a; id <= b; id++) {
				xgrow(ret, &alloc, (size_t)*n + 1, sizeof(**ret));
				(*ret)[(*n)++] = xasprintf("%lld", (long long)id);
			}
			continue;
		}
		if (cli__job_ref_check(c, s))
			return CLI_EXIT_USAGE;
		xgrow(ret, &alloc, (size_t)*n + 1, sizeof(**ret));
		(*ret)[(*n)++] = xstrdup(s);
	}
	return 0;
}

/* POST /v1/jobs/JOB/ACTION for every job named; "done" says what happened.
 * With --json, each answer as the API gave it. A range says nothing of the
 * ids in it that are no job (or none of the caller's to change). */
static int act_on(struct ctx *c, char **refs, int n, bool quiet_missing, const char *action,
		  const char *done)
{
	int rc = CLI_EXIT_OK;
	for (int i = 0; i < n; i++) {
		_cleanup_free_ char *path = xasprintf("/v1/jobs/%s/%s", refs[i], action);
		json_t *j;
		struct tk_error err;
		long status = 0;
		if (client_call(&c->client, "POST", path, NULL, CALL_TIMEOUT_MS, &j, &status,
				&err) < 0) {
			if (!(quiet_missing && status == 404))
				rc = cli__api_error(c, &err);
			continue;
		}
		if (c->json)
			cli__print_json(j);
		else if (json_object_get(j, "changed"))
			printf("%s %lld element(s) of array %s\n", done,
			       (long long)cli__jint(j, "changed"), refs[i]);
		else
			printf("%s job %s\n", done, refs[i]);
		json_decref(j);
	}
	return rc;
}

static int job_action(struct ctx *c, const char *action, const char *done)
{
	char **refs;
	int n;
	int rc = job_refs(c, &refs, &n);
	bool ranged = false;
	for (int i = 0; i < c->npos; i++)
		ranged |= strchr(c->pos[i], '-') != NULL;
	if (!rc)
		rc = act_on(c, refs, n, ranged, action, done);
	for (int i = 0; i < n; i++)
		free(refs[i]);
	free(refs);
	return rc;
}

/* ---- tenk cancel: scancel's filters ------------------------------------------------- */

enum { C_USER = O_FIRST_OWN, C_STATE, C_NAME };
static const struct tk_option cancel_opts[] = {
	COMMON_OPTS,
	{"user", 'u', "USER", "USER's jobs (with ids: only those that are USER's)"},
	{"state", 't', "STATE",
	 "jobs in STATE: PENDING or RUNNING (default both; with ids: only those)"},
	{"name", 'n', "NAME", "jobs named NAME (with ids: only those)"},
};

static int run_cancel(struct ctx *c)
{
	const char *user = c->v[C_USER], *state = c->v[C_STATE], *name = c->v[C_NAME];
	if (!user && !state && !name) {
		if (!c->npos)
			return cli__usage_error(c->cmd, "name the jobs: ids, ranges (4-14), or "
							"-u USER, -t STATE, -n NAME");
		return job_action(c, "cancel", "cancelled");
	}
	if (state && strcmp(state, "PENDING") != 0 && strcmp(state, "RUNNING") != 0)
		return cli__usage_error(c->cmd, "--state: PENDING or RUNNING, got \"%s\"", state);
	char **refs;
	int n;
	if (job_refs(c, &refs, &n))
		return CLI_EXIT_USAGE;
	/* the jobs that match, from the server's list (an array's elements too) */
	json_t *jobs = NULL;
	int64_t total;
	struct tk_error err;
	int rc = cli__fetch_jobs_of(c, user, state ? state : "PENDING,STARTING,RUNNING", INT64_MAX,
				    &jobs, &total, &err);
	if (rc < 0) {
		rc = cli__api_error(c, &err);
		goto out;
	}
	char **pick = xcalloc(json_array_size(jobs) + 1, sizeof(*pick));
	int npick = 0;
	size_t k;
	json_t *j;
	json_array_foreach (jobs, k, j) {
		/* a job by its id; an array's element also by ARRAY_INDEX, and
		 * the array's id names all its elements */
		char id[24], arr[24] = "", elem[48] = "";
		snprintf(id, sizeof(id), "%lld", (long long)cli__jint(j, "id"));
		json_t *a = json_object_get(j, "array");
		if (a) {
			snprintf(arr, sizeof(arr), "%lld", (long long)cli__jint(a, "job"));
			snprintf(elem, sizeof(elem), "%s_%lld", arr,
				 (long long)cli__jint(a, "index"));
		}
		if (name && strcmp(cli__jstr(j, "name"), name) != 0)
			continue;
		bool named = !n;
		for (int i = 0; i < n && !named; i++)
			named = strcmp(refs[i], id) == 0 ||
				(a && (strcmp(refs[i], arr) == 0 || strcmp(refs[i], elem) == 0));
		if (named)
			pick[npick++] = xstrdup(id);
	}
	if (!npick && !c->json)
		printf("no job matches\n");
	rc = act_on(c, pick, npick, true, "cancel", "cancelled");
	for (int i = 0; i < npick; i++)
		free(pick[i]);
	free(pick);
	json_decref(jobs);
out:
	for (int i = 0; i < n; i++)
		free(refs[i]);
	free(refs);
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

CLI_COMMAND(cli_cancel, CLI_OPTS(cancel_opts), false, 0, -1, run_cancel)
CLI_COMMAND(cli_hold, CLI_OPTS(cli_plain_opts), false, 1, -1, run_hold)
CLI_COMMAND(cli_release, CLI_OPTS(cli_plain_opts), false, 1, -1, run_release)
CLI_COMMAND(cli_requeue, CLI_OPTS(cli_plain_opts), false, 1, -1, run_requeue)
