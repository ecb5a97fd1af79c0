/*
 * The commands of a job's life: queue, show, wait.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define WAIT_POLL_S 30 /* one long-poll of tenk wait, at most */

/* "12_[0-3,7-9]": an array's indices, runs of consecutive ones as ranges. */
static void array_name(int64_t id, const int *idx, size_t n, int cap, char *buf, size_t len)
{
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addf(&sb, "%lld_[", (long long)id);
	for (size_t i = 0; i < n;) {
		size_t k = i;
		while (k + 1 < n && idx[k + 1] == idx[k] + 1)
			k++;
		strbuf_addf(&sb, "%s%d", i ? "," : "", idx[i]);
		if (k > i)
			strbuf_addf(&sb, "-%d", idx[k]);
		i = k + 1;
	}
	if (cap)
		strbuf_addf(&sb, "%%%d", cap);
	strbuf_addch(&sb, ']');
	snprintf(buf, len, "%s", sb.buf);
	strbuf_release(&sb);
}

/* ---- queue ----------------------------------------------------------------------------- */

enum { Q_ALL = O_FIRST_OWN, Q_STATE, Q_LIMIT, Q_USER, Q_FORMAT, Q_WATCH, Q_START };
static const struct tk_option queue_opts[] = {
	COMMON_OPTS,
	{"all", 'a', NULL, "include jobs that ended"},
	{"state", 's', "LIST", "only jobs in these states, e.g. PENDING,RUNNING"},
	{"limit", 'n', "N", "show the first N jobs, from the head of the queue (default 1000)"},
	{"user", 'u', "USER", "only this user's jobs"},
	{"format", 'o', "table|wide|json|'%i %j ...'",
	 "wide: every element of an array on its own line, and more columns; or squeue's "
	 "format letters, as '%.12i %.9P %.16j %.8u %.2t %.10M %.6D %R'"},
	{"watch", 0, "SECONDS", "show it again every SECONDS until Ctrl-C"},
	{"start", 0, NULL,
	 "waiting jobs with when each is expected to start (N/A: not known yet), as squeue "
	 "--start"},
};

/* squeue --start's columns */
#define QUEUE_START_FORMAT "%.12i %.10P %.16j %.8u %.2t %.19S %.6D %R"

static double job_gpus(json_t *req)
{
	return (double)cli__jint(req, "nodes") * (double)cli__jint(req, "tasks_per_node") *
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
		strbuf_addf(&sb, "%s%s", i ? "," : "", cli__jstr(node, "name"));
	}
	snprintf(buf, n, "%s", sb.buf);
	strbuf_release(&sb);
}

static const char *fetch_user; /* tenk queue -u: only this user's jobs */

/* Pages of GET /v1/jobs?FILTER (array: only its elements, 0: any job). */
static int fetch_paged(struct ctx *c, int64_t array, const char *state, int64_t max, json_t **ret,
		       int64_t *total, struct tk_error *err)
{
	json_t *all = json_array();
	int64_t after = 0;
	for (;;) {
		char path[256];
		int64_t want = MIN(1000, max - (int64_t)json_array_size(all));
		int n = snprintf(path, sizeof(path), "/v1/jobs?limit=%lld&after=%lld",
				 (long long)want, (long long)after);
		if (state)
			n += snprintf(path + n, sizeof(path) - (size_t)n, "&state=%.100s", state);
		if (fetch_user)
			n += snprintf(path + n, sizeof(path) - (size_t)n, "&user=%.64s",
				      fetch_user);
		if (array)
			snprintf(path + n, sizeof(path) - (size_t)n, "&array=%lld",
				 (long long)array);
		json_t *res;
		if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &res, NULL, err) <
		    0) {
			json_decref(all);
			return -1;
		}
		*total = cli__jint(res, "total");
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

int cli__fetch_jobs(struct ctx *c, const char *state, int64_t max, json_t **ret, int64_t *total,
		    struct tk_error *err)
{
	return fetch_paged(c, 0, state, max, ret, total, err);
}

int cli__fetch_jobs_of(struct ctx *c, const char *user, const char *state, int64_t max,
		       json_t **ret, int64_t *total, struct tk_error *err)
{
	const char *was = fetch_user;
	fetch_user = user;
	int r = fetch_paged(c, 0, state, max, ret, total, err);
	fetch_user = was;
	return r;
}

static int queue_once(struct ctx *c, int64_t limit, bool wide);

static int run_queue(struct ctx *c)
{
	int64_t limit = 1000, every = 0;
	if (c->v[Q_LIMIT] && tk_parse_int64(c->v[Q_LIMIT], 1, 1000000, &limit) < 0)
		return cli__usage_error(c->cmd,
					"--limit: must be an integer from 1 to 1000000, got \"%s\"",
					c->v[Q_LIMIT]);
	const char *fmt = c->v[Q_FORMAT] ? c->v[Q_FORMAT] : "table";
	char why[2048];
	if (c->v[Q_START] && c->v[Q_FORMAT] && !cli__qformat_is(fmt))
		return cli__usage_error(c->cmd, "--start: prints its own columns; with --format, "
						"give squeue's letters (%%S is the start)");
	if (cli__qformat_is(fmt) && cli__qformat_check(fmt, why, sizeof(why)) < 0)
		return cli__usage_error(c->cmd, "--format: %s", why);
	if (!cli__qformat_is(fmt) && strcmp(fmt, "table") && strcmp(fmt, "wide") &&
	    strcmp(fmt, "json"))
		return cli__usage_error(c->cmd,
					"--format: table, wide, json or squeue's letters "
					"('%%i %%j %%u %%T %%M %%l %%D %%R'), got \"%s\"",
					fmt);
	if (strcmp(fmt, "json") == 0)
		c->json = true;
	if (c->v[Q_USER] && !model_name_valid(c->v[Q_USER]))
		return cli__usage_error(c->cmd, "--user: \"%s\" is not a user name", c->v[Q_USER]);
	if (c->v[Q_WATCH] && tk_parse_int64(c->v[Q_WATCH], 1, 3600, &every) < 0)
		return cli__usage_error(c->cmd, "--watch: whole seconds from 1 to 3600, got \"%s\"",
					c->v[Q_WATCH]);
	fetch_user = c->v[Q_USER];
	if (!every)
		return queue_once(c, limit, strcmp(fmt, "wide") == 0);
	for (;;) { /* until Ctrl-C, as watch(1) */
		if (!c->json)
			printf("\033[H\033[2J");
		int rc = queue_once(c, limit, strcmp(fmt, "wide") == 0);
		fflush(stdout);
		if (rc != CLI_EXIT_OK)
			return rc;
		sleep((unsigned)every);
	}
}

/* Is job j an element of the same array as the row before it, waiting
 * like it? */
static bool same_pending_array(json_t *j, int64_t array)
{
	json_t *a = json_object_get(j, "array");
	return a && array && cli__jint(a, "job") == array &&
	       strcmp(cli__jstr(j, "state"), "PENDING") == 0;
}

static int queue_once(struct ctx *c, int64_t limit, bool wide)
{
	const char *state = c->v[Q_STATE]   ? c->v[Q_STATE]
			    : c->v[Q_START] ? "PENDING"
			    : c->v[Q_ALL]   ? NULL
					    : "active";
	const char *qfmt = c->v[Q_START] && !c->v[Q_FORMAT]		       ? QUEUE_START_FORMAT
			   : c->v[Q_FORMAT] && cli__qformat_is(c->v[Q_FORMAT]) ? c->v[Q_FORMAT]
									       : NULL;
	/* the first `limit` jobs from the head of the queue, or every one
	 * with --all */
	json_t *res, *all;
	struct tk_error err;
	int64_t total = 0;
	if (cli__fetch_jobs(c, state, c->v[Q_ALL] && !c->v[Q_LIMIT] ? INT64_MAX : limit, &all,
			    &total, &err) < 0)
		return cli__api_error(c, &err);
	res = json_pack("{s:o, s:I}", "jobs", all, "total", (json_int_t)total);
	if (c->json) {
		cli__print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	int64_t now = (int64_t)time(NULL) * 1000;
	if (qfmt)
		cli__qformat_print(qfmt, NULL, now);
	else
		printf("%-12s %-16s %-8s %-8s %-10s %-10s %5s %6s %9s  %s\n", "ID", "NAME", "USER",
		       "CLASS", "QUEUE", "STATE", "NODES", "GPUS", "TIME", "NODES/REASON");
	json_t *jobs = json_object_get(res, "jobs");
	size_t njobs = json_array_size(jobs);
	int *idx = xcalloc(njobs + 1, sizeof(int));
	for (size_t i = 0; i < njobs; i++) {
		json_t *j = json_array_get(jobs, i);
		json_t *req = json_object_get(j, "request");
		json_t *atts = json_object_get(j, "attempts");
		json_t *a = json_array_get(atts, json_array_size(atts) - 1);
		const char *st = cli__jstr(j, "state");
		char elapsed[32], where[200];
		int64_t from = a && strcmp(st, "PENDING") != 0 ? cli__jint(a, "start_ms")
							       : cli__jint(j, "submit_ms");
		int64_t to = cli__jint(j, "end_ms") ? cli__jint(j, "end_ms") : now;
		tk_format_duration((to - from) / 1000, elapsed, sizeof(elapsed));
		if (strcmp(st, "PENDING") == 0 || !a)
			snprintf(where, sizeof(where), "%s", cli__jstr(j, "reason"));
		else
			attempt_nodes(a, where, sizeof(where));
		/* an array's elements: those waiting together on one line */
		char id[256];
		json_t *arr = json_object_get(j, "array");
		snprintf(id, sizeof(id), "%lld", (long long)cli__jint(j, "id"));
		if (arr && cli__jint(arr, "count") > 1) {
			int64_t aid = cli__jint(arr, "job");
			size_t n = 0;
			idx[n++] = (int)cli__jint(arr, "index");
			while (!wide && same_pending_array(j, aid) && i + 1 < njobs &&
			       same_pending_array(json_array_get(jobs, i + 1), aid))
				idx[n++] = (int)cli__jint(
					json_object_get(json_array_get(jobs, ++i), "array"),
					"index");
			if (n > 1)
				array_name(aid, idx, n, (int)cli__jint(arr, "cap"), id, sizeof(id));
			else
				snprintf(id, sizeof(id), "%lld_%d", (long long)aid, idx[0]);
		}
		if (qfmt) {
			cli__qformat_print(qfmt, &(struct qrow){j, id}, now);
			continue;
		}
		/* (a running job found stalled says so in its state's place) */
		printf("%-12s %-16.16s %-8.8s %-8.8s %-10.10s %-10s %5lld %6g %9s  %s", id,
		       cli__jstr(j, "name"), cli__jstr(j, "owner"), cli__jstr(j, "class"),
		       cli__jstr(j, "queue"), json_object_get(j, "stalled") ? "STALLED" : st,
		       (long long)cli__jint(req, "nodes"), job_gpus(req), elapsed, where);
		if (wide)
			printf("  [job %lld, submitted by %s%s%s]", (long long)cli__jint(j, "id"),
			       cli__jstr(j, "owner"), *cli__jstr(req, "comment") ? "; " : "",
			       cli__jstr(req, "comment"));
		printf("\n");
	}
	free(idx);
	size_t shown = json_array_size(json_object_get(res, "jobs"));
	if ((int64_t)shown < total)
		printf("showing %zu of %lld from the head of the queue (--limit N for more, --all "
		       "for every job)\n",
		       shown, (long long)total);
	json_decref(res);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_queue, CLI_OPTS(queue_opts), false, 0, 0, run_queue)

/* Where a job's request may run, where it says: its pools, --constraint,
 * --tolerate, --spread and --within. */
static void print_where(json_t *req)
{
	static const char *const keys[] = {"pool", "constraint", "tolerate", "spread", "within"};
	static const char *const says[] = {"pools ", "labels ", "tolerating ", "spread over ",
					   "within one "};
	bool any = false;
	for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
		const char *v = cli__jstr(req, keys[k]);
		if (!*v)
			continue;
		printf("%s%s%s", any ? ", " : "  Where:    ", says[k], v);
		any = true;
	}
	if (any)
		printf("\n");
}

/* ---- show ------------------------------------------------------------------------------- */

/* A word as a shell reads it back: bare when it is plain, else quoted. */
static void print_word(const char *w)
{
	if (*w && strspn(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			    "-_./=:,+@%") == strlen(w)) {
		printf(" %s", w);
		return;
	}
	printf(" '");
	for (const char *p = w; *p; p++)
		if (*p == '\'')
			printf("'\\''");
		else
			putchar(*p);
	printf("'");
}

static void show_job(json_t *j)
{
	json_t *req = json_object_get(j, "request");
	char t1[32], t2[32];
	json_t *arr = json_object_get(j, "array");
	if (arr)
		printf("Job %lld (%lld_%lld) \"%s\"  %s", (long long)cli__jint(j, "id"),
		       (long long)cli__jint(arr, "job"), (long long)cli__jint(arr, "index"),
		       cli__jstr(j, "name"), cli__jstr(j, "state"));
	else
		printf("Job %lld \"%s\"  %s", (long long)cli__jint(j, "id"), cli__jstr(j, "name"),
		       cli__jstr(j, "state"));
	if (json_is_true(json_object_get(j, "held")))
		printf(", held");
	if (cli__jint(j, "exit_code") >= 0 && strcmp(cli__jstr(j, "state"), "PENDING") != 0)
		printf(" (exit %lld)", (long long)cli__jint(j, "exit_code"));
	printf("\n");
	if (*cli__jstr(j, "reason"))
		printf("  Reason:   %s\n", cli__jstr(j, "reason"));
	json_t *stall = json_object_get(j, "stalled");
	if (stall) {
		cli__fmt_time(cli__jint(stall, "since_ms"), t1, sizeof(t1));
		printf("  STALLED:  %s (found %s, window %llds; on stall: %s)\n",
		       cli__jstr(stall, "why"), t1, (long long)cli__jint(stall, "window_s"),
		       cli__jstr(stall, "on_stall"));
	}
	json_t *strag = json_object_get(j, "straggler");
	if (strag)
		printf("  Straggler: rank %lld on %s, %.2f s a step against the gang's median %.2f "
		       "s\n",
		       (long long)cli__jint(strag, "rank"), cli__jstr(strag, "node"),
		       json_number_value(json_object_get(strag, "step_s")),
		       json_number_value(json_object_get(strag, "median_s")));
	json_t *gp = json_object_get(j, "goodput");
	if (gp && json_is_number(json_object_get(gp, "effective_ratio"))) {
		/* where its time went: the parts add up to its wall time */
		static const char *const parts[][2] = {
			{"productive_s", "productive"},
			{"checkpointing_s", "checkpointing"},
			{"lost_s", "lost"},
			{"detecting_s", "detecting"},
			{"placing_s", "placing again"},
			{"restoring_s", "restoring"},
			{"starting_s", "starting"},
			{"queued_s", "queued first"},
		};
		char d[32];
		tk_format_duration((int64_t)json_number_value(json_object_get(gp, "wall_s")), d,
				   sizeof(d));
		printf("  Goodput:  %.1f%% effective training time (%lld failure(s), %lld step(s) "
		       "done again); of %s:\n           ",
		       100 * json_number_value(json_object_get(gp, "effective_ratio")),
		       (long long)cli__jint(gp, "failures"), (long long)cli__jint(gp, "steps_lost"),
		       d);
		for (size_t k = 0; k < ARRAY_SIZE(parts); k++) {
			double v = json_number_value(json_object_get(gp, parts[k][0]));
			if (v < 0.5 && k)
				continue;
			tk_format_duration((int64_t)(v + 0.5), d, sizeof(d));
			printf("%s%s %s", k ? ", " : "", d, parts[k][1]);
		}
		printf("\n");
	}
	json_t *mfu = json_object_get(j, "mfu");
	if (mfu)
		printf("  MFU:      %.1f%% (%.1f of the cards' %.1f TFLOP/s, as its lines say)\n",
		       100 * json_number_value(json_object_get(mfu, "ratio")),
		       json_number_value(json_object_get(mfu, "achieved_tflops")),
		       json_number_value(json_object_get(mfu, "peak_tflops")));
	json_t *las = json_object_get(j, "las");
	if (las) {
		printf("  Order:    least attained service, level %lld of %lld (%.3g "
		       "accelerator-hours received)\n",
		       (long long)cli__jint(las, "level") + 1, (long long)cli__jint(las, "levels"),
		       json_number_value(json_object_get(las, "service_gpu_h")));
		char d[32], m[32];
		tk_format_duration(cli__jint(las, "max_loss_s"), m, sizeof(m));
		json_t *behind = json_object_get(las, "behind");
		if (json_object_get(las, "loss_s") && cli__jint(las, "level") > 0) {
			tk_format_duration(cli__jint(las, "loss_s"), d, sizeof(d));
			bool any = json_is_true(
				json_object_get(json_object_get(j, "request"), "preemptible_any"));
			printf("            preempted now, it would lose %s (the class allows "
			       "%s%s): "
			       "%s\n",
			       d, cli__jint(las, "max_loss_s") < 0 ? "any" : m,
			       any ? "; --preemptible-any: any" : "",
			       json_is_true(json_object_get(las, "spared"))
				       ? "no earlier level takes it"
			       : cli__jint(las, "min_run_left_s")
				       ? "no earlier level takes it before its minimum run"
				       : "an earlier level may take it");
		}
		json_t *g = json_object_get(las, "gittins_per_gpu_h");
		if (g)
			printf("            within its level by its Gittins index: %.3g per "
			       "accelerator-hour (from %lld finished jobs of its class)\n",
			       json_number_value(g), (long long)cli__jint(las, "history_jobs"));
		else if (json_object_get(las, "history_jobs"))
			printf("            within its level by submission: %lld finished jobs of "
			       "its class known, %lld needed for the Gittins index\n",
			       (long long)cli__jint(las, "history_jobs"),
			       (long long)cli__jint(las, "history_needed"));
		if (behind) {
			tk_format_duration(cli__jint(behind, "loss_s"), d, sizeof(d));
			printf("            behind job %lld (level %lld), which would lose %s "
			       "since its "
			       "%s, more than the class's %s\n",
			       (long long)cli__jint(behind, "job"),
			       (long long)cli__jint(behind, "level") + 1, d,
			       json_is_true(json_object_get(behind, "since_checkpoint"))
				       ? "last committed checkpoint"
				       : "start (it committed no checkpoint)",
			       m);
		}
	}
	cli__fmt_time(cli__jint(j, "submit_ms"), t1, sizeof(t1));
	printf("  Owner:    %s, submitted %s\n", cli__jstr(j, "owner"), t1);
	printf("  Queue:    %s, class %s\n", cli__jstr(j, "queue"), cli__jstr(j, "class"));
	print_where(json_object_get(j, "request"));
	size_t i;
	json_t *v;
	if (json_is_true(json_object_get(j, "private"))) {
		/* another user's job: what it runs and writes is theirs */
		printf("  Command:  (%s's to see)\n", cli__jstr(j, "owner"));
	} else {
		printf("  Command: ");
		json_array_foreach (json_object_get(req, "command"), i, v)
			print_word(json_string_value(v) ? json_string_value(v) : "");
		printf("\n  Folder:   %s\n", cli__jstr(req, "cwd"));
		/* task 0's file of its newest attempt, as the server resolved it */
		const char *out = cli__jstr(j, "output_path");
		if (*out && strchr(cli__jstr(req, "output"), '%'))
			printf("  Output:   %s (task 0; %s)\n", out, cli__jstr(req, "output"));
		else
			printf("  Output:   %s\n", out);
	}
	if (*cli__jstr(req, "comment"))
		printf("  Comment:  %s\n", cli__jstr(req, "comment"));
	if (json_array_size(json_object_get(req, "after"))) {
		printf("  After:   ");
		json_array_foreach (json_object_get(req, "after"), i, v)
			printf(" job %lld %s", (long long)cli__jint(v, "job"),
			       cli__jstr(v, "when"));
		printf("\n");
	}
	if (cli__jint(req, "begin_ms")) {
		cli__fmt_time(cli__jint(req, "begin_ms"), t1, sizeof(t1));
		printf("  Begin:    %s\n", t1);
	}
	if (*cli__jstr(req, "error"))
		printf("  Errors:   %s\n", cli__jstr(req, "error"));
	if (*cli__jstr(req, "image")) {
		printf("  Image:    %s", cli__jstr(req, "image"));
		json_array_foreach (json_object_get(req, "mounts"), i, v)
			printf("%s%s", i ? ", " : "; mounts ", json_string_value(v));
		printf("\n");
	}
	char nodes[48];
	if (cli__jint(req, "nodes_max"))
		snprintf(nodes, sizeof(nodes), "%lld to %lld", (long long)cli__jint(req, "nodes"),
			 (long long)cli__jint(req, "nodes_max"));
	else
		snprintf(nodes, sizeof(nodes), "%lld", (long long)cli__jint(req, "nodes"));
	printf("  Shape:    %s node(s)%s x %lld task(s) x %g accelerator(s)", nodes,
	       cli__jint(req, "nodes_max") ? " (elastic)" : "",
	       (long long)cli__jint(req, "tasks_per_node"),
	       json_number_value(json_object_get(req, "gpus_per_task")));
	if (json_array_size(json_object_get(req, "gpu_types"))) {
		printf(" of type");
		json_array_foreach (json_object_get(req, "gpu_types"), i, v)
			printf("%s%s", i ? "|" : " ", json_string_value(v));
	}
	printf("\n");
	/* -w, -x, --exclusive: where it may run */
	bool excl = json_is_true(json_object_get(req, "exclusive"));
	json_t *only = json_object_get(req, "nodelist"), *never = json_object_get(req, "exclude");
	if (excl || json_array_size(only) || json_array_size(never)) {
		const char *sep = "";
		printf("  Where:    ");
		if (json_array_size(only)) {
			printf("only on");
			json_array_foreach (only, i, v)
				printf("%s%s", i ? "," : " ", json_string_value(v));
			sep = "; ";
		}
		if (json_array_size(never)) {
			printf("%snot on", sep);
			json_array_foreach (never, i, v)
				printf("%s%s", i ? "," : " ", json_string_value(v));
			sep = "; ";
		}
		printf("%s%s\n", excl ? sep : "", excl ? "alone on each node (exclusive)" : "");
	}
	char tl[64] = "none";
	if (cli__jint(req, "time_limit_s")) {
		char clock[32];
		tk_format_clock(cli__jint(req, "time_limit_s"), clock, sizeof(clock));
		snprintf(tl, sizeof(tl), "%s (%lld s)", clock,
			 (long long)cli__jint(req, "time_limit_s"));
	}
	printf("  Limits:   time %s, %lld CPU(s) per task, %lld MiB per node, requeue %lld\n", tl,
	       (long long)cli__jint(req, "cpus_per_task"), (long long)cli__jint(req, "mem_mib"),
	       (long long)cli__jint(req, "requeue"));
	/* how it goes on after a failure: in place (several nodes, or asked),
	 * with its spares */
	const char *restart = *cli__jstr(req, "restart") ? cli__jstr(req, "restart") : "auto";
	bool in_place = strcmp(restart, "in-place") == 0 ||
			(strcmp(restart, "auto") == 0 &&
			 (cli__jint(req, "nodes") > 1 || cli__jint(req, "spares") > 0 ||
			  cli__jint(req, "nodes_max") > 0));
	printf("  Restart:  %s", in_place ? "in place" : "through its queue");
	if (cli__jint(req, "spares")) {
		json_t *held = json_object_get(j, "spare_nodes");
		printf(", %lld spare(s) asked, held:", (long long)cli__jint(req, "spares"));
		json_array_foreach (held, i, v)
			printf("%s%s", i ? "," : " ", json_string_value(v));
		if (!json_array_size(held))
			printf(" none");
	}
	json_t *bf = json_object_get(j, "borrowed_from");
	if (bf && json_is_true(json_object_get(bf, "pool")))
		printf("; runs on %s, a spare of the cluster's pool, until a restart needs it",
		       cli__jstr(bf, "node"));
	else if (bf)
		printf("; runs on %s, a spare of job %lld, until that job needs it",
		       cli__jstr(bf, "node"), (long long)cli__jint(bf, "job"));
	json_t *cs = json_object_get(req, "ckpt_signal");
	if (cs) {
		const char *name = sigabbrev_np((int)cli__jint(cs, "number"));
		printf("; on a failure SIG%s to the others, up to %llds for a checkpoint",
		       name ? name : "?", (long long)cli__jint(cs, "wait_s"));
	}
	printf("\n");
	json_t *a;
	json_array_foreach (json_object_get(j, "checkpoints"), i, a) {
		cli__fmt_time(cli__jint(a, "at_ms"), t1, sizeof(t1));
		printf("  Checkpoint %s: step %lld of attempt %lld, %lld bytes, committed %s\n",
		       cli__jstr(a, "tag"), (long long)cli__jint(a, "step"),
		       (long long)cli__jint(a, "attempt"), (long long)cli__jint(a, "bytes"), t1);
	}
	json_array_foreach (json_object_get(j, "attempts"), i, a) {
		cli__fmt_time(cli__jint(a, "start_ms"), t1, sizeof(t1));
		cli__fmt_time(cli__jint(a, "end_ms"), t2, sizeof(t2));
		printf("  Attempt %lld: %s .. %s, master %s:%lld%s%s\n",
		       (long long)cli__jint(a, "number"), t1,
		       json_is_true(json_object_get(a, "ended")) ? t2 : "(running)",
		       cli__jstr(a, "master_addr"), (long long)cli__jint(a, "master_port"),
		       *cli__jstr(a, "reason") ? ": " : "", cli__jstr(a, "reason"));
		if (json_is_true(json_object_get(a, "in_place")))
			printf("    started in place, on the nodes its job held%s%s%s\n",
			       *cli__jstr(a, "replaced") ? " (" : "", cli__jstr(a, "replaced"),
			       *cli__jstr(a, "replaced") ? " replaced)" : "");
		size_t k;
		json_t *n;
		json_array_foreach (json_object_get(a, "nodes"), k, n) {
			printf("    node %zu %s devices", k, cli__jstr(n, "name"));
			size_t d;
			json_t *dv;
			json_array_foreach (json_object_get(n, "devices"), d, dv)
				printf("%s%lld", d ? "," : " ", (long long)json_integer_value(dv));
			if (!json_array_size(json_object_get(n, "devices")))
				printf(" none");
			if (cli__jint(n, "milli") < 1000)
				printf(" (%.3g of each)", cli__jint(n, "milli") / 1000.0);
			if (*cli__jstr(n, "digest"))
				printf(", image %.19s", cli__jstr(n, "digest"));
			if (*cli__jstr(n, "restore"))
				printf(", restore %s (%lld bytes from the store, %lld ms)",
				       cli__jstr(n, "restore"),
				       (long long)cli__jint(n, "restore_bytes"),
				       (long long)cli__jint(n, "restore_dur_ms"));
			printf("\n");
			/* --nccl-check: what NCCL's log there says */
			json_t *nc = json_object_get(n, "nccl");
			json_t *c = json_object_get(nc, "connections");
			if (nc) {
				long long net = cli__jint(c, "net"), sock = cli__jint(c, "socket");
				printf("      NCCL: %lld between nodes (%lld over RDMA, %lld over "
				       "sockets), %lld P2P, %lld SHM%s%s\n",
				       net + sock, net, sock, (long long)cli__jint(c, "p2p"),
				       (long long)cli__jint(c, "shm"),
				       *cli__jstr(nc, "network") ? "; network " : "",
				       cli__jstr(nc, "network"));
				if (json_is_true(json_object_get(nc, "fallback")))
					printf("      NCCL FELL BACK TO SOCKETS on an RDMA node: "
					       "\"%s\"\n",
					       cli__jstr(nc, "line"));
			}
		}
		/* what it cost: from the end of the one before to its first
		 * line, and what its end threw away */
		json_t *ag = json_object_get(a, "goodput");
		if (ag) {
			double place = json_number_value(json_object_get(ag, "queued_s")) +
				       json_number_value(json_object_get(ag, "placing_s"));
			printf("    cost: %.1f s placing, %.1f s restoring, %.1f s starting", place,
			       json_number_value(json_object_get(ag, "restoring_s")),
			       json_number_value(json_object_get(ag, "starting_s")));
			if (json_number_value(json_object_get(ag, "lost_s")) +
				    json_number_value(json_object_get(ag, "detecting_s")) >=
			    0.05) /* (what a printed tenth shows) */
				printf("; its end: %.1f s lost (%lld step(s) done again), %.1f s "
				       "detecting",
				       json_number_value(json_object_get(ag, "lost_s")),
				       (long long)cli__jint(ag, "steps_lost"),
				       json_number_value(json_object_get(ag, "detecting_s")));
			printf("\n");
		}
		json_t *rs = json_object_get(a, "restore");
		if (rs && *cli__jstr(rs, "tag"))
			printf("    restores checkpoint %s (step %lld, attempt %lld)%s\n",
			       cli__jstr(rs, "tag"), (long long)cli__jint(rs, "step"),
			       (long long)cli__jint(rs, "attempt"),
			       json_is_true(json_object_get(rs, "go")) ? ", restored" : "");
		json_t *tm = json_object_get(a, "metrics");
		if (tm) {
			char when[32];
			cli__fmt_time(cli__jint(tm, "at_ms"), when, sizeof(when));
			printf("    metrics");
			if (cli__jint(tm, "step") >= 0)
				printf(" at step %lld", (long long)cli__jint(tm, "step"));
			printf(" (%s):", when);
			const char *name;
			json_t *val;
			json_object_foreach (json_object_get(tm, "values"), name, val)
				printf(" %s=%.6g", name, json_number_value(val));
			printf("\n");
		}
		json_t *t;
		json_array_foreach (json_object_get(a, "tasks"), k, t) {
			printf("    task %zu %s", k, cli__jstr(t, "state"));
			if (strcmp(cli__jstr(t, "state"), "EXITED") == 0) {
				if (cli__jint(t, "signal"))
					printf(" by signal %lld",
					       (long long)cli__jint(t, "signal"));
				else
					printf(" with code %lld",
					       (long long)cli__jint(t, "exit_code"));
			}
			printf("\n");
		}
	}
}

/* The elements of array id (every state), by page. */
static int fetch_array(struct ctx *c, int64_t id, const char *state, json_t **ret,
		       struct tk_error *err)
{
	int64_t total;
	return fetch_paged(c, id, state, INT64_MAX, ret, &total, err);
}

/* An array named as one: how many of its elements are in each state. */
static int show_array(struct ctx *c, json_t *head)
{
	json_t *arr = json_object_get(head, "array"), *all;
	struct tk_error err;
	if (fetch_array(c, cli__jint(arr, "job"), NULL, &all, &err) < 0)
		return cli__api_error(c, &err);
	int64_t count[16] = {0};
	static const char *const states[] = {"PENDING", "STARTING",  "RUNNING", "COMPLETED",
					     "FAILED",	"CANCELLED", "TIMEOUT"};
	size_t i;
	json_t *e;
	int *idx = xcalloc(json_array_size(all) + 1, sizeof(int));
	json_array_foreach (all, i, e) {
		json_t *ea = json_object_get(e, "array");
		idx[i] = (int)cli__jint(ea, "index");
		for (size_t s2 = 0; s2 < ARRAY_SIZE(states); s2++)
			if (strcmp(cli__jstr(e, "state"), states[s2]) == 0)
				count[s2]++;
	}
	char name[256];
	array_name(cli__jint(arr, "job"), idx, json_array_size(all), (int)cli__jint(arr, "cap"),
		   name, sizeof(name));
	free(idx);
	printf("Array %s: %zu element(s):", name, json_array_size(all));
	for (size_t s2 = 0, first = 1; s2 < ARRAY_SIZE(states); s2++)
		if (count[s2]) {
			printf("%s %lld %s", first ? "" : ",", (long long)count[s2], states[s2]);
			first = 0;
		}
	printf("\n  its first element:\n");
	json_decref(all);
	return CLI_EXIT_OK;
}

static int run_show(struct ctx *c)
{
	int rc = CLI_EXIT_OK;
	for (int i = 0; i < c->npos; i++) {
		if (cli__job_ref_check(c, c->pos[i]))
			return CLI_EXIT_USAGE;
		char path[64];
		snprintf(path, sizeof(path), "/v1/jobs/%s", c->pos[i]);
		json_t *j;
		struct tk_error err;
		if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &j, NULL, &err) <
		    0) {
			rc = cli__api_error(c, &err);
			continue;
		}
		json_t *arr = json_object_get(j, "array");
		if (c->json) {
			cli__print_json(j);
		} else {
			if (arr && !strchr(c->pos[i], '_') && cli__jint(arr, "count") > 1 &&
			    show_array(c, j) != CLI_EXIT_OK)
				rc = CLI_EXIT_ERROR;
			show_job(j);
		}
		json_decref(j);
	}
	return rc;
}

CLI_COMMAND(cli_show, CLI_OPTS(cli_plain_opts), false, 1, -1, run_show)

/* ---- wait ------------------------------------------------------------------------------- */

enum { W_TIMEOUT = O_FIRST_OWN };
static const struct tk_option wait_opts[] = {
	COMMON_OPTS,
	{"timeout", 0, "TIME", "give up after this long (exit 75)"},
};

#define WAIT_EXIT_TIMEOUT 75

int cli__job_exit_status(json_t *j)
{
	const char *st = cli__jstr(j, "state");
	int64_t code = cli__jint(j, "exit_code");
	if (strcmp(st, "COMPLETED") == 0)
		return 0;
	if (strcmp(st, "TIMEOUT") == 0)
		return 124;
	if (strcmp(st, "CANCELLED") == 0)
		return 130;
	return code > 0 && code < 256 ? (int)code : 1;
}

/* Waits (until deadline, mono ms) for every element of the array whose
 * first element is head: on each one still active in turn. *ret: the
 * head, with "state" and "exit_code" of the first element that did not
 * complete (the head's own when all did). 1: the deadline came first. */
static int wait_array(struct ctx *c, json_t *head, int64_t deadline, json_t **ret,
		      struct tk_error *err)
{
	int64_t id = cli__jint(head, "id");
	for (;;) {
		char path[160];
		snprintf(path, sizeof(path), "/v1/jobs?array=%lld&state=active&limit=1",
			 (long long)id);
		json_t *res;
		if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &res, NULL, err) <
		    0)
			return -1;
		json_t *first = json_array_get(json_object_get(res, "jobs"), 0);
		int64_t next = first ? cli__jint(first, "id") : 0;
		json_decref(res);
		if (!next)
			break;
		int64_t w = MAX(0, MIN((deadline - tk_mono_ms()) / 1000, (int64_t)WAIT_POLL_S));
		snprintf(path, sizeof(path), "/v1/jobs/%lld?wait=%lld", (long long)next,
			 (long long)w);
		json_t *j;
		if (client_call(&c->client, "GET", path, NULL, (w + 15) * 1000, &j, NULL, err) < 0)
			return -1;
		json_decref(j);
		if (tk_mono_ms() >= deadline)
			return 1;
	}
	json_t *bad;
	if (fetch_array(c, id, "FAILED,CANCELLED,TIMEOUT", &bad, err) < 0)
		return -1;
	json_t *worst = json_array_get(bad, 0);
	*ret = json_deep_copy(worst ? worst : head);
	json_decref(bad);
	return 0;
}

static int run_wait(struct ctx *c)
{
	int64_t limit_s = -1;
	if (c->v[W_TIMEOUT] && tk_parse_duration(c->v[W_TIMEOUT], &limit_s) < 0)
		return cli__usage_error(c->cmd,
					"--timeout: expected a duration such as 30s or 10m, got "
					"\"%s\"",
					c->v[W_TIMEOUT]);
	for (int i = 0; i < c->npos; i++)
		if (cli__job_ref_check(c, c->pos[i]))
			return CLI_EXIT_USAGE;
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
				return cli__api_error(c, &err);
			}
			json_t *arr = json_object_get(j, "array");
			if (arr && cli__jint(arr, "count") > 1 && !strchr(c->pos[i], '_')) {
				json_t *head = j;
				j = NULL;
				int wr = wait_array(c, head, deadline, &j, &err);
				json_decref(head);
				if (wr < 0) {
					json_decref(all);
					return cli__api_error(c, &err);
				}
				if (wr > 0) {
					fprintf(stderr,
						"tenk wait: array %s has not ended after %s\n",
						c->pos[i], c->v[W_TIMEOUT]);
					json_decref(all);
					return WAIT_EXIT_TIMEOUT;
				}
				break;
			}
			const char *st = cli__jstr(j, "state");
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
		int st = cli__job_exit_status(j);
		if (rc == CLI_EXIT_OK)
			rc = st;
		if (!c->json)
			printf("job %lld %s (exit %lld)\n", (long long)cli__jint(j, "id"),
			       cli__jstr(j, "state"), (long long)cli__jint(j, "exit_code"));
		json_array_append_new(all, j);
	}
	if (c->json)
		cli__print_json(all);
	json_decref(all);
	return rc;
}

CLI_COMMAND(cli_wait, CLI_OPTS(wait_opts), false, 1, -1, run_wait)
