/*
 * tenk acct (sacct's habits: one record per attempt, -S/-E, --format,
 * -P, -D) and tenk usage (sreport's: sums by queue, user, model or service over a
 * window, in hours, cost, energy or percent of the cluster).
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* "now", "now-2h", "today" (midnight), "YYYY-MM-DD[THH:MM[:SS]]" (local
 * time) or milliseconds since the epoch. */
static int parse_when(const char *s, int64_t *ret)
{
	int64_t now = tk_wall_ms();
	if (strcmp(s, "now") == 0) {
		*ret = now;
		return 0;
	}
	if (strncmp(s, "now-", 4) == 0) {
		int64_t d;
		if (tk_parse_duration(s + 4, &d) < 0)
			return -1;
		*ret = now - d * 1000;
		return 0;
	}
	struct tm tm = {0};
	time_t t = (time_t)(now / 1000);
	if (strcmp(s, "today") == 0) {
		localtime_r(&t, &tm);
		tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
		tm.tm_isdst = -1;
		*ret = (int64_t)mktime(&tm) * 1000;
		return 0;
	}
	int y, mo, d, h = 0, mi = 0, sec = 0;
	char tail;
	int n = sscanf(s, "%4d-%2d-%2d%c%2d:%2d:%2d", &y, &mo, &d, &tail, &h, &mi, &sec);
	if ((n == 3 && strlen(s) == 10) || ((n == 6 || n == 7) && (tail == 'T' || tail == ' '))) {
		tm.tm_year = y - 1900;
		tm.tm_mon = mo - 1;
		tm.tm_mday = d;
		tm.tm_hour = h;
		tm.tm_min = mi;
		tm.tm_sec = sec;
		tm.tm_isdst = -1;
		time_t v = mktime(&tm);
		if (v == (time_t)-1 || mo < 1 || mo > 12 || d < 1 || d > 31)
			return -1;
		*ret = (int64_t)v * 1000;
		return 0;
	}
	return tk_parse_int64(s, 0, INT64_MAX, ret);
}

static void fmt_elapsed(double s, char *buf, size_t n)
{
	int64_t t = (int64_t)llround(s);
	int64_t d = t / 86400;
	if (d)
		snprintf(buf, n, "%lld-%02lld:%02lld:%02lld", (long long)d,
			 (long long)(t % 86400 / 3600), (long long)(t % 3600 / 60),
			 (long long)(t % 60));
	else
		snprintf(buf, n, "%02lld:%02lld:%02lld", (long long)(t / 3600),
			 (long long)(t % 3600 / 60), (long long)(t % 60));
}

static double jnum(json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

/* ---- acct ------------------------------------------------------------------------- */

enum field_kind {
	F_INT,
	F_STR,
	F_TIME,
	F_ELAPSED,
	F_NUM,
	F_MONEY,
	F_EXIT,
	F_MIB,
	F_ENERGY,
	F_JOBID,       /* sacct's JobID: 16_0 for an array's element */
	F_ARRAY_JOB,   /* its array's id ("" for a job of no array) */
	F_ARRAY_INDEX, /* its index in the array ("" likewise) */
};
static const struct field {
	const char *name, *alias, *key;
	enum field_kind kind;
	int width;
} fields[] = {
	{"JobID", NULL, "job_id", F_JOBID, 10},
	{"JobIDRaw", NULL, "job_id", F_INT, 8},
	{"ArrayJobID", NULL, "array", F_ARRAY_JOB, 10},
	{"ArrayTaskID", NULL, "array", F_ARRAY_INDEX, 11},
	{"Attempt", NULL, "attempt", F_INT, 7},
	{"User", NULL, "user", F_STR, 10},
	{"Queue", "Account", "queue", F_STR, 10},
	{"Class", "QOS", "class", F_STR, 8},
	{"JobName", NULL, "name", F_STR, 12},
	{"State", NULL, "state", F_STR, 10},
	{"ExitCode", NULL, "exit_code", F_EXIT, 8},
	{"Submit", NULL, "submit_ms", F_TIME, 19},
	{"Start", NULL, "start_ms", F_TIME, 19},
	{"End", NULL, "end_ms", F_TIME, 19},
	{"Elapsed", NULL, "elapsed_s", F_ELAPSED, 10},
	{"NNodes", NULL, "nnodes", F_INT, 6},
	{"NodeList", NULL, "nodelist", F_STR, 16},
	{"AllocGPUs", "GPUs", "gpus", F_NUM, 9},
	{"GPUModel", NULL, "gpu_model", F_STR, 8},
	{"AllocCPUS", NULL, "cpus", F_INT, 9},
	{"TotalCPU", NULL, "cpu_s", F_ELAPSED, 10},
	{"MaxRSS", NULL, "mem_peak_mib", F_MIB, 8},
	{"ConsumedEnergy", "Energy", "energy_j", F_ENERGY, 14},
	{"GPUHours", NULL, "gpu_hours", F_NUM, 9},
	{"GPUBusyHours", NULL, "gpu_busy_hours", F_NUM, 12},
	{"GoodGPUHours", NULL, "good_gpu_hours", F_NUM, 12},
	{"SpareGPUHours", NULL, "spare_gpu_hours", F_NUM, 13},
	{"GPUHoursPerKWh", NULL, "gpu_hours_per_kwh", F_NUM, 14},
	{"Cost", NULL, "cost", F_MONEY, 10},
};
#define DEFAULT_FORMAT                                                                             \
	"JobID,Attempt,User,Queue,State,ExitCode,Start,Elapsed,NNodes,AllocGPUs,GPUModel,"         \
	"ConsumedEnergy,Cost"
#define MAX_FIELDS 32

static void cell(const struct field *f, json_t *r, char *buf, size_t n)
{
	json_t *v = json_object_get(r, f->key);
	switch (f->kind) {
	case F_INT:
		snprintf(buf, n, "%lld", (long long)json_integer_value(v));
		break;
	case F_STR:
		snprintf(buf, n, "%s", json_string_value(v) ? json_string_value(v) : "");
		break;
	case F_TIME:
		cli__fmt_time(json_integer_value(v), buf, n);
		if (strcmp(buf, "-") == 0 && strcmp(f->key, "end_ms") == 0)
			snprintf(buf, n, "Unknown");
		break;
	case F_ELAPSED:
		fmt_elapsed(json_number_value(v), buf, n);
		break;
	case F_NUM:
		if (json_is_null(v) || !v)
			snprintf(buf, n, "-");
		else
			snprintf(buf, n, "%.4g", json_number_value(v));
		break;
	case F_MONEY:
		snprintf(buf, n, "%.4f", json_number_value(v));
		break;
	case F_EXIT: /* sacct's: the code, or 0 and the signal */
		snprintf(buf, n, "%lld:%lld",
			 cli__jint(r, "signal") ? 0LL : (long long)cli__jint(r, "exit_code"),
			 (long long)cli__jint(r, "signal"));
		break;
	case F_MIB:
		snprintf(buf, n, "%lldM", (long long)json_integer_value(v));
		break;
	case F_ENERGY:
		if (json_is_null(v) || !v)
			snprintf(buf, n, "-");
		else
			snprintf(buf, n, "%.1fJ", json_number_value(v));
		break;
	case F_JOBID: {
		json_t *a = json_object_get(r, "array");
		if (a)
			snprintf(buf, n, "%lld_%lld", (long long)cli__jint(a, "job"),
				 (long long)cli__jint(a, "index"));
		else
			snprintf(buf, n, "%lld", (long long)json_integer_value(v));
		break;
	}
	case F_ARRAY_JOB:
	case F_ARRAY_INDEX:
		if (v)
			snprintf(buf, n, "%lld",
				 (long long)cli__jint(v, f->kind == F_ARRAY_JOB ? "job" : "index"));
		else
			snprintf(buf, n, "%s", "");
		break;
	}
}

enum {
	A_USER = O_FIRST_OWN,
	A_QUEUE,
	A_START,
	A_END,
	A_STATE,
	A_FORMAT,
	A_PARSABLE,
	A_DUPLICATES,
	A_ALLUSERS
};
static const struct tk_option acct_opts[] = {
	COMMON_OPTS,
	{"user", 'u', "USER", "only USER's jobs"},
	{"queue", 'q', "QUEUE", "only the jobs of QUEUE"},
	{"starttime", 'S', "TIME",
	 "attempts that ran after TIME: now, now-2h, today, YYYY-MM-DD[THH:MM[:SS]] (default: "
	 "today, midnight)"},
	{"endtime", 'E', "TIME", "... and before TIME (default: now)"},
	{"state", 's', "LIST",
	 "only these states: COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, "
	 "REQUEUED, RUNNING"},
	{"format", 'o', "FIELDS",
	 "the columns, comma-separated (default " DEFAULT_FORMAT "; also Class, JobName, "
	 "Submit, End, NodeList, AllocCPUS, TotalCPU, MaxRSS, GPUHours, GPUBusyHours, "
	 "GoodGPUHours, SpareGPUHours (its spares held idle, in GPUHours and Cost), "
	 "GPUHoursPerKWh)"},
	{"parsable2", 'P', NULL, "fields separated by |, no padding"},
	{"duplicates", 'D', NULL, "every attempt of each job, not only its newest"},
	{"allusers", 'a', NULL, "every user's jobs (the default; for sacct's habit)"},
};

static void print_header(const struct field *const *cols, int ncols, bool parsable)
{
	for (int k = 0; k < ncols; k++) {
		if (parsable)
			printf("%s%s", k ? "|" : "", cols[k]->name);
		else
			printf("%s%-*s", k ? " " : "", cols[k]->width, cols[k]->name);
	}
	printf("\n");
	if (parsable)
		return;
	for (int k = 0; k < ncols; k++) {
		printf("%s", k ? " " : "");
		for (int i = 0; i < cols[k]->width; i++)
			putchar('-');
	}
	printf("\n");
}

static void print_records(const struct field *const *cols, int ncols, bool parsable,
			  json_t *records)
{
	size_t i;
	json_t *rec;
	json_array_foreach (records, i, rec) {
		for (int k = 0; k < ncols; k++) {
			char buf[256];
			cell(cols[k], rec, buf, sizeof(buf));
			if (parsable)
				printf("%s%s", k ? "|" : "", buf);
			else
				printf("%s%-*s", k ? " " : "", cols[k]->width, buf);
		}
		printf("\n");
	}
}

static int run_acct(struct ctx *c)
{
	const struct field *cols[MAX_FIELDS];
	int ncols = 0;
	_cleanup_free_ char *fmt = xstrdup(c->v[A_FORMAT] ? c->v[A_FORMAT] : DEFAULT_FORMAT);
	char *save = NULL;
	for (char *w = strtok_r(fmt, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		const struct field *f = NULL;
		for (size_t i = 0; i < ARRAY_SIZE(fields) && !f; i++)
			if (strcasecmp(w, fields[i].name) == 0 ||
			    (fields[i].alias && strcasecmp(w, fields[i].alias) == 0))
				f = &fields[i];
		if (!f)
			return cli__usage_error(c->cmd, "--format: no field \"%s\"", w);
		if (ncols == MAX_FIELDS)
			return cli__usage_error(c->cmd, "--format: at most %d fields", MAX_FIELDS);
		cols[ncols++] = f;
	}
	int64_t from, to = 0;
	if (parse_when(c->v[A_START] ? c->v[A_START] : "today", &from) < 0)
		return cli__usage_error(c->cmd,
					"--starttime: expected now, now-DURATION, today or "
					"YYYY-MM-DD[THH:MM[:SS]], got \"%s\"",
					c->v[A_START]);
	if (c->v[A_END] && parse_when(c->v[A_END], &to) < 0)
		return cli__usage_error(c->cmd,
					"--endtime: expected now, now-DURATION, today or "
					"YYYY-MM-DD[THH:MM[:SS]], got \"%s\"",
					c->v[A_END]);
	struct strbuf path;
	strbuf_init(&path);
	strbuf_addf(&path, "/v1/accounting?from=%lld", (long long)from);
	if (to)
		strbuf_addf(&path, "&to=%lld", (long long)to);
	if (c->v[A_DUPLICATES])
		strbuf_addstr(&path, "&all=1");
	const char *args[][2] = {
		{"user", c->v[A_USER]}, {"queue", c->v[A_QUEUE]}, {"state", c->v[A_STATE]}};
	for (size_t i = 0; i < ARRAY_SIZE(args); i++) {
		const char *v = args[i][1];
		if (!v)
			continue;
		bool ok = i < 2 ? model_name_valid(v)
				: strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
					    "abcdefghijklmnopqrstuvwxyz_,") == strlen(v);
		if (!ok) {
			strbuf_release(&path);
			return cli__usage_error(c->cmd, "--%s: \"%s\" is not a %s", args[i][0], v,
						i < 2 ? "name" : "list of states");
		}
		strbuf_addf(&path, "&%s=%s", args[i][0], v);
	}
	/* page by page: the header once, each page's rows as they come (with
	 * --json, every record in one answer) */
	json_t *all = c->json ? json_array() : NULL, *currency = NULL;
	bool costs = false; /* a cost column is shown: say its currency after */
	for (int i = 0; i < ncols; i++)
		costs |= cols[i]->kind == F_MONEY;
	int64_t after = 0;
	bool parsable = c->v[A_PARSABLE] != NULL, header = false;
	for (;;) {
		_cleanup_free_ char *page = xasprintf("%s&after=%lld", path.buf, (long long)after);
		json_t *res;
		struct tk_error err;
		if (client_call(&c->client, "GET", page, NULL, CALL_TIMEOUT_MS, &res, NULL, &err) <
		    0) {
			strbuf_release(&path);
			json_decref(all);
			json_decref(currency);
			return cli__api_error(c, &err);
		}
		json_t *records = json_object_get(res, "records");
		if (!currency)
			currency = json_incref(json_object_get(res, "currency"));
		if (all) {
			json_array_extend(all, records);
		} else {
			if (!header)
				print_header(cols, ncols, parsable);
			header = true;
			print_records(cols, ncols, parsable, records);
		}
		json_t *next = json_object_get(res, "next");
		after = json_is_integer(next) ? json_integer_value(next) : 0;
		json_decref(res);
		if (!after)
			break;
	}
	strbuf_release(&path);
	if (all) {
		json_t *out = json_pack("{s:o}", "records", all);
		json_object_set_new(out, "currency", currency ? currency : json_null());
		cli__print_json(out);
		json_decref(out);
		return CLI_EXIT_OK;
	}
	/* (not in -P's output, which scripts read line by line) */
	const char *cur = json_string_value(currency);
	if (costs && !parsable && cur && *cur)
		printf("costs in %s\n", cur);
	json_decref(currency);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_acct, CLI_OPTS(acct_opts), false, 0, 0, run_acct)

/* ---- usage ------------------------------------------------------------------------ */

enum { U_BY = O_FIRST_OWN, U_FROM, U_TO, U_UNIT };
static const struct tk_option usage_opts[] = {
	COMMON_OPTS,
	{"by", 0, "WHAT", "queue, user, model or service (default queue)"},
	{"from", 0, "TIME", "the window's start: now-7d, today, YYYY-MM-DD... (default now-1d)"},
	{"to", 0, "TIME", "its end (default now)"},
	{"unit", 't', "UNIT", "hours, cost, energy or percent (default hours)"},
};

static int run_usage(struct ctx *c)
{
	const char *by = c->v[U_BY] ? c->v[U_BY] : "queue";
	const char *unit = c->v[U_UNIT] ? c->v[U_UNIT] : "hours";
	if (strcmp(by, "queue") != 0 && strcmp(by, "user") != 0 && strcmp(by, "model") != 0 &&
	    strcmp(by, "service") != 0)
		return cli__usage_error(c->cmd, "--by: queue, user, model or service, got \"%s\"",
					by);
	if (strcmp(unit, "hours") != 0 && strcmp(unit, "cost") != 0 &&
	    strcmp(unit, "energy") != 0 && strcmp(unit, "percent") != 0)
		return cli__usage_error(c->cmd,
					"--unit: hours, cost, energy or percent, got \"%s\"", unit);
	int64_t from, to = tk_wall_ms();
	if (parse_when(c->v[U_FROM] ? c->v[U_FROM] : "now-1d", &from) < 0)
		return cli__usage_error(c->cmd,
					"--from: expected now-DURATION, today or a date, got "
					"\"%s\"",
					c->v[U_FROM]);
	if (c->v[U_TO] && parse_when(c->v[U_TO], &to) < 0)
		return cli__usage_error(c->cmd,
					"--to: expected now, now-DURATION, today or a date, "
					"got \"%s\"",
					c->v[U_TO]);
	if (to < from)
		return cli__usage_error(c->cmd, "--to is before --from");
	char path[128];
	snprintf(path, sizeof(path), "/v1/usage?by=%s&from=%lld&to=%lld", by, (long long)from,
		 (long long)to);
	json_t *res;
	struct tk_error err;
	if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &res, NULL, &err) < 0)
		return cli__api_error(c, &err);
	if (c->json) {
		cli__print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	char t1[32], t2[32];
	cli__fmt_time(cli__jint(res, "from"), t1, sizeof(t1));
	cli__fmt_time(cli__jint(res, "to"), t2, sizeof(t2));
	json_t *total = json_object_get(res, "total");
	const char *cur = cli__jstr(res, "currency");
	printf("Usage %s .. %s by %s: %lld accelerators, %.2f GPU-hours of capacity\n", t1, t2, by,
	       (long long)cli__jint(res, "gpus"), jnum(total, "capacity_gpu_hours"));
	const char *head = strcmp(unit, "hours") == 0	 ? "GPU-HOURS       BUSY  GOODPUT"
			   : strcmp(unit, "cost") == 0	 ? "     COST"
			   : strcmp(unit, "energy") == 0 ? "      KWH"
							 : " PERCENT";
	printf("%-16s %s %8s\n",
	       strcmp(by, "queue") == 0	 ? "QUEUE"
	       : strcmp(by, "user") == 0 ? "USER"
					 : "MODEL",
	       head, "ATTEMPTS");
	json_t *rows = json_copy(json_object_get(res, "groups"));
	json_array_append(rows, total);
	size_t i;
	json_t *g;
	json_array_foreach (rows, i, g) {
		const char *name = i + 1 == json_array_size(rows) ? "TOTAL" : cli__jstr(g, "name");
		printf("%-16s ", *name ? name : "(none)");
		if (strcmp(unit, "hours") == 0) {
			/* the share of its GPU-hours whose training was kept */
			char good[16] = "-";
			json_t *gp = json_object_get(g, "goodput");
			if (json_is_number(gp))
				snprintf(good, sizeof(good), "%.1f%%", 100 * json_number_value(gp));
			printf("%9.3f %10.3f %8s", jnum(g, "gpu_hours"), jnum(g, "gpu_busy_hours"),
			       good);
		} else if (strcmp(unit, "cost") == 0)
			printf("%9.2f", jnum(g, "cost"));
		else if (strcmp(unit, "energy") == 0)
			printf("%9.4f", jnum(g, "energy_j") / 3.6e6);
		else
			printf("%7.2f%%", jnum(g, "percent"));
		printf(" %8lld\n", (long long)cli__jint(g, "attempts"));
	}
	printf("idle: %.3f GPU-hours%s%s\n", jnum(total, "idle_gpu_hours"),
	       *cur ? "; costs in " : "", cur);
	json_decref(rows);
	json_decref(res);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_usage, CLI_OPTS(usage_opts), false, 0, 0, run_usage)
