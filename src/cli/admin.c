/*
 * The commands of who shares the cluster: queues, classes, users.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* "a,b,c" as a JSON array of strings. */
static json_t *split_list(const char *text)
{
	json_t *a = json_array();
	_cleanup_free_ char *copy = xstrdup(text);
	char *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
		json_array_append_new(a, json_string(t));
	return a;
}

/* A JSON array of strings (or numbers) as "a,b,c"; none_text when empty. */
static char *joined(json_t *a, const char *none_text)
{
	struct strbuf sb;
	strbuf_init(&sb);
	size_t i;
	json_t *v;
	json_array_foreach (a, i, v) {
		if (json_is_integer(v))
			strbuf_addf(&sb, "%s%lld", i ? "," : "", (long long)json_integer_value(v));
		else
			strbuf_addf(&sb, "%s%s", i ? "," : "",
				    json_string_value(v) ? json_string_value(v) : "?");
	}
	if (!sb.len)
		strbuf_addstr(&sb, none_text);
	return strbuf_detach(&sb);
}

/* ---- queues, classes ---------------------------------------------------------------- */

enum {
	QS_GPUS = O_FIRST_OWN,
	QS_BORROW,
	QS_WEIGHT,
	QS_USERS,
	QS_BUDGET,
	QS_UNITS,
	QS_CPUS,
	QS_MEM
};
static const struct tk_option queues_opts[] = {
	COMMON_OPTS,
	{"gpus", 0, "N|MODEL=N,...",
	 "with set: the queue's guaranteed accelerators (none: no quota), and of each model named "
	 "(H100=64,A100-80GB=32; MODEL=none: no longer limited)"},
	{"borrow-limit", 0, "M|LIMIT=M,...",
	 "with set: how many more it may borrow when idle (none: any), beyond its accelerators or "
	 "one of its limits (H100=16, units=20, cpus=64, mem=1T; none: any)"},
	{"weight", 0, "W", "with set: its fair share against other queues (default 1)"},
	{"users", 0, "LIST",
	 "with set: who may submit: users, group:UNIXGROUP, role:NAME (default: everyone)"},
	{"budget", 0, "AMOUNT/PERIOD",
	 "with set: what it may spend per day, week or month (UTC), e.g. 5000/month; none: no "
	 "budget. Once spent, its new jobs wait"},
	{"units", 0, "U",
	 "with set: its limit in weighted units, an H100 one (each model's weight: tenk "
	 "catalogue; none: no longer limited)"},
	{"cpus", 0, "N", "with set: its limit in CPUs (none: no longer limited)"},
	{"mem", 0, "SIZE", "with set: its limit in memory, e.g. 4T (none: no longer limited)"},
};

static json_t *count_or_null(const char *v, bool *bad)
{
	if (strcmp(v, "none") == 0)
		return json_null();
	char *end;
	double x = strtod(v, &end);
	if (!*v || *end || !(x >= 0 && x <= 1e7)) {
		*bad = true;
		return NULL;
	}
	return x == floor(x) ? json_integer((json_int_t)x) : json_real(x);
}

/* One limit's value into obj[key]: a number (a size for mem_mib) or none;
 * false when it is neither. */
static bool limit_value(json_t *obj, const char *key, const char *v)
{
	bool bad = false;
	if (strcmp(key, "mem_mib") == 0 && strcmp(v, "none") != 0) {
		int64_t mib;
		if (tk_parse_size_mib(v, &mib) < 0)
			return false;
		json_object_set_new(obj, key, json_integer(mib));
		return true;
	}
	json_t *x = count_or_null(v, &bad);
	if (bad)
		return false;
	json_object_set_new(obj, key, x);
	return true;
}

/* --gpus and --borrow-limit: N (the accelerators) or LIMIT=N items (a
 * model, units, cpus, mem) into body's total and its limits. */
static bool limit_items(json_t *body, const char *text, const char *total, const char *limits)
{
	_cleanup_free_ char *copy = xstrdup(text);
	char *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		if (!eq) {
			if (!limit_value(body, total, t))
				return false;
			continue;
		}
		*eq = '\0';
		json_t *o = json_object_get(body, limits);
		if (!o) {
			o = json_object();
			json_object_set_new(body, limits, o);
		}
		if (!*t || !limit_value(o, strcmp(t, "mem") == 0 ? "mem_mib" : t, eq + 1))
			return false;
	}
	return true;
}

static void fmt_gpus(json_t *v, char *buf, size_t n)
{
	if (!v || json_is_null(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%g", json_number_value(v));
}

static int run_queues(struct ctx *c)
{
	if (c->npos >= 1 && strcmp(c->pos[0], "set") == 0) {
		if (c->npos != 2)
			return cli__usage_error(c->cmd,
						"usage: tenk queues set NAME [--gpus N] "
						"[--borrow-limit M] [--weight W] [--users LIST]");
		json_t *body = json_object();
		if (c->v[QS_GPUS] && !limit_items(body, c->v[QS_GPUS], "gpus", "limits")) {
			json_decref(body);
			return cli__usage_error(c->cmd,
						"--gpus: a number of accelerators or none, and "
						"MODEL=N items, got \"%s\"",
						c->v[QS_GPUS]);
		}
		if (c->v[QS_BORROW] &&
		    !limit_items(body, c->v[QS_BORROW], "borrow_limit", "borrow_limits")) {
			json_decref(body);
			return cli__usage_error(c->cmd,
						"--borrow-limit: a number of accelerators or none, "
						"and LIMIT=N items (a model, units, cpus, mem), "
						"got \"%s\"",
						c->v[QS_BORROW]);
		}
		static const char *const dims[] = {"units", "cpus", "mem_mib"};
		for (int k = 0; k < 3; k++) {
			const char *v = c->v[QS_UNITS + k];
			if (!v)
				continue;
			json_t *o = json_object_get(body, "limits");
			if (!o) {
				o = json_object();
				json_object_set_new(body, "limits", o);
			}
			if (!limit_value(o, dims[k], v)) {
				json_decref(body);
				return cli__usage_error(c->cmd, "--%s: %s or none, got \"%s\"",
							k == 0	 ? "units"
							: k == 1 ? "cpus"
								 : "mem",
							k == 2 ? "a size such as 4T" : "a number",
							v);
			}
		}
		if (c->v[QS_WEIGHT]) {
			char *end;
			double w = strtod(c->v[QS_WEIGHT], &end);
			if (!*c->v[QS_WEIGHT] || *end || !(w > 0)) {
				json_decref(body);
				return cli__usage_error(c->cmd,
							"--weight: a positive number, got \"%s\"",
							c->v[QS_WEIGHT]);
			}
			json_object_set_new(body, "weight", json_real(w));
		}
		if (c->v[QS_USERS])
			json_object_set_new(body, "users", split_list(c->v[QS_USERS]));
		if (c->v[QS_BUDGET] && strcmp(c->v[QS_BUDGET], "none") == 0) {
			json_object_set_new(body, "budget", json_null());
		} else if (c->v[QS_BUDGET]) {
			char *end;
			double amount = strtod(c->v[QS_BUDGET], &end);
			const char *period = *end == '/' ? end + 1 : end;
			if (end == c->v[QS_BUDGET] || !(amount > 0) || (*end && *end != '/') ||
			    (strcmp(period, "day") != 0 && strcmp(period, "week") != 0 &&
			     strcmp(period, "month") != 0)) {
				json_decref(body);
				return cli__usage_error(
					c->cmd,
					"--budget: AMOUNT/day, /week or /month (e.g. "
					"5000/month) or none, got \"%s\"",
					c->v[QS_BUDGET]);
			}
			json_object_set_new(
				body, "budget",
				json_pack("{s:f, s:s}", "amount", amount, "period", period));
		}
		char *path = xasprintf("/v1/queues/%s", c->pos[1]);
		json_t *q;
		struct tk_error err;
		int r = client_call(&c->client, "PUT", path, body, CALL_TIMEOUT_MS, &q, NULL, &err);
		free(path);
		json_decref(body);
		if (r < 0)
			return cli__api_error(c, &err);
		if (c->json)
			cli__print_json(q);
		else
			printf("queue %s set\n", cli__jstr(q, "name"));
		json_decref(q);
		return CLI_EXIT_OK;
	}
	if (c->npos)
		return cli__usage_error(c->cmd,
					"unexpected argument \"%s\" (did you mean `queues set`?)",
					c->pos[0]);
	json_t *res;
	struct tk_error err;
	if (client_call(&c->client, "GET", "/v1/queues", NULL, CALL_TIMEOUT_MS, &res, NULL, &err) <
	    0)
		return cli__api_error(c, &err);
	if (c->json) {
		cli__print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	printf("%-16s %7s %7s %6s %7s %8s %7s %7s %7s  %-28s %s\n", "QUEUE", "QUOTA", "BORROW",
	       "WEIGHT", "IN USE", "BORROWED", "RECENT", "RUNNING", "PENDING", "BUDGET", "USERS");
	size_t i;
	json_t *q;
	json_array_foreach (json_object_get(res, "queues"), i, q) {
		char quota[24], borrow[24];
		fmt_gpus(json_object_get(q, "gpus"), quota, sizeof(quota));
		fmt_gpus(json_object_get(q, "borrow_limit"), borrow, sizeof(borrow));
		_cleanup_free_ char *users = joined(json_object_get(q, "users"), "everyone");
		char budget[128] = "-";
		json_t *b = json_object_get(q, "budget");
		if (json_is_object(b)) {
			char spent[32], amount[32];
			model_fmt_amount(json_number_value(json_object_get(q, "spent")), spent,
					 sizeof(spent));
			model_fmt_amount(json_number_value(json_object_get(b, "amount")), amount,
					 sizeof(amount));
			const char *st = cli__jstr(q, "budget_state");
			const char *cur = cli__jstr(res, "currency");
			snprintf(budget, sizeof(budget), "%s of %s%s%s/%s%s", spent, amount,
				 *cur ? " " : "", cur, cli__jstr(b, "period"),
				 strcmp(st, "spent") == 0     ? " SPENT: new jobs wait"
				 : strcmp(st, "warning") == 0 ? " (80%+)"
							      : "");
		}
		printf("%-16.16s %7s %7s %6g %7g %8g %7.1f %7lld %7lld  %-28s %s\n",
		       cli__jstr(q, "name"), quota, borrow,
		       json_number_value(json_object_get(q, "weight")),
		       json_number_value(json_object_get(q, "in_use")),
		       json_number_value(json_object_get(q, "borrowed")),
		       json_number_value(json_object_get(q, "recent")),
		       (long long)cli__jint(q, "running"), (long long)cli__jint(q, "pending"),
		       budget, users);
		/* its limits beyond accelerators: in use of the limit (+ borrowable) */
		json_t *lim = json_object_get(q, "limits");
		if (json_object_size(lim)) {
			json_t *use = json_object_get(q, "limits_in_use"),
			       *bor = json_object_get(q, "borrow_limits");
			const char *k;
			json_t *v;
			printf("  limits:");
			int n = 0;
			json_object_foreach (lim, k, v) {
				bool mem = strcmp(k, "mem_mib") == 0;
				double div = mem ? 1024 : 1;
				printf("%s %s %g/%g%s", n++ ? "," : "", mem ? "mem" : k,
				       json_number_value(json_object_get(use, k)) / div,
				       json_number_value(v) / div, mem ? "G" : "");
				json_t *more = json_object_get(bor, k);
				if (json_is_null(more))
					printf(" (+any)");
				else if (more)
					printf(" (+%g)", json_number_value(more) / div);
			}
			printf("\n");
		}
	}
	json_decref(res);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_queues, CLI_OPTS(queues_opts), false, 0, 2, run_queues)

static int run_classes(struct ctx *c)
{
	json_t *res;
	struct tk_error err;
	if (client_call(&c->client, "GET", "/v1/classes", NULL, CALL_TIMEOUT_MS, &res, NULL, &err) <
	    0)
		return cli__api_error(c, &err);
	if (c->json) {
		cli__print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	printf("%-12s %8s %-12s %-12s %-16s %7s  %s\n", "CLASS", "PRIORITY", "MAY PREEMPT",
	       "PREEMPTIBLE", "ORDER", "PENDING", "WHO");
	size_t i;
	json_t *k;
	json_array_foreach (json_object_get(res, "classes"), i, k) {
		_cleanup_free_ char *who = joined(json_object_get(k, "allow"), "everyone");
		char order[64] = "fifo";
		json_t *lim = json_object_get(k, "las_limits_gpu_h");
		if (lim) {
			/* the levels' limits in accelerator-hours: las 1/16 */
			int n = snprintf(order, sizeof(order), "las ");
			for (size_t x = 0; x < json_array_size(lim) && n < (int)sizeof(order); x++)
				n += snprintf(order + n, sizeof(order) - (size_t)n, "%s%g",
					      x ? "/" : "",
					      json_number_value(json_array_get(lim, x)));
		}
		printf("%-12s %8lld %-12s %-12s %-16s %7lld  %s%s\n", cli__jstr(k, "name"),
		       (long long)cli__jint(k, "priority"),
		       json_is_true(json_object_get(k, "may_preempt")) ? "yes" : "no",
		       json_is_true(json_object_get(k, "preemptible")) ? "yes" : "no", order,
		       (long long)cli__jint(k, "pending"), who,
		       json_is_true(json_object_get(k, "default")) ? "  (default)" : "");
	}
	json_decref(res);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_classes, CLI_OPTS(cli_plain_opts), false, 0, 0, run_classes)

static int run_pools(struct ctx *c)
{
	json_t *res;
	struct tk_error err;
	if (client_call(&c->client, "GET", "/v1/pools", NULL, CALL_TIMEOUT_MS, &res, NULL, &err) <
	    0)
		return cli__api_error(c, &err);
	if (c->json) {
		cli__print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	json_t *pools = json_object_get(res, "pools");
	if (!json_array_size(pools)) {
		printf("no pools: every job may run on every node (config.json's \"pools\" "
		       "makes them)\n");
		json_decref(res);
		return CLI_EXIT_OK;
	}
	/* the selector last: it is as long as its operator made it */
	printf("%-14s %5s %5s %6s %6s %8s %8s  %-20s %s\n", "POOL", "NODES", "UP", "GPUS", "IDLE",
	       "MAXTIME", "MINGPUS", "WHO", "SELECTOR");
	size_t i;
	json_t *p;
	json_array_foreach (pools, i, p) {
		_cleanup_free_ char *who = joined(json_object_get(p, "allow"), "everyone");
		char max[32] = "-";
		if (cli__jint(p, "max_time_s"))
			tk_format_duration(cli__jint(p, "max_time_s"), max, sizeof(max));
		printf("%-14s %5lld %5lld %6lld %6lld %8s %8lld  %-20s %s%s\n",
		       cli__jstr(p, "name"), (long long)cli__jint(p, "nodes"),
		       (long long)cli__jint(p, "nodes_up"), (long long)cli__jint(p, "accelerators"),
		       (long long)cli__jint(p, "accelerators_idle"), max,
		       (long long)cli__jint(p, "min_gpus"), who, cli__jstr(p, "selector"),
		       json_is_true(json_object_get(p, "default")) ? "  (default)" : "");
	}
	long long alone = (long long)cli__jint(res, "nodes_in_no_pool");
	if (alone)
		printf("%lld node%s in no pool (jobs that name no pool may use them)\n", alone,
		       alone == 1 ? "" : "s");
	json_decref(res);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_pools, CLI_OPTS(cli_plain_opts), false, 0, 0, run_pools)

static int run_catalogue(struct ctx *c)
{
	json_t *res;
	struct tk_error err;
	if (client_call(&c->client, "GET", "/v1/catalogue", NULL, CALL_TIMEOUT_MS, &res, NULL,
			&err) < 0)
		return cli__api_error(c, &err);
	if (c->json) {
		cli__print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	/* the weight: units one counts in queues' limits (an H100 one) */
	printf("%-12s %9s %9s %10s %7s\n", "MODEL", "MEM GIB", "TFLOP/S", "PRICE/H", "WEIGHT");
	size_t i;
	json_t *m;
	json_array_foreach (json_object_get(res, "models"), i, m)
		printf("%-12s %9.0f %9.1f %10.2f %7.3f\n", cli__jstr(m, "name"),
		       (double)cli__jint(m, "mem_mib") / 1024,
		       json_number_value(json_object_get(m, "tflops")),
		       json_number_value(json_object_get(m, "price_per_hour")),
		       json_number_value(json_object_get(m, "weight")));
	json_decref(res);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_catalogue, CLI_OPTS(cli_plain_opts), false, 0, 0, run_catalogue)

/* ---- reservations: windows in which nodes are kept ------------------------------------ */

enum { R_NODES = O_FIRST_OWN, R_START, R_DURATION, R_END, R_REASON, R_NAME, R_USERS, R_QUEUE };
static const struct tk_option reserve_opts[] = {
	COMMON_OPTS,
	{"nodes", 'w', "LIST", "the nodes it keeps: gpu[001-064], or a list (required)"},
	{"start", 's', "TIME", "when it starts: now, now+1h, 16:00, 2026-12-10T02:00 (local time)"},
	{"duration", 'd', "DURATION", "how long it lasts: 4h, 90m, 1d (or --end)"},
	{"end", 'e', "TIME", "when it ends, as --start (or --duration)"},
	{"reason", 'r', "TEXT", "what the nodes are kept for (required)"},
	{"name", 'n', "NAME", "its name (default: resv1, resv2, ...)"},
	{"users", 'u', "LIST",
	 "kept for these users, whose jobs alone run there from its start (without --users and "
	 "--queue: maintenance, its nodes drained from its start to its end)"},
	{"queue", 'q', "NAME", "kept for this queue's jobs, as --users"},
};

/* "2026-12-10 02:00:00 to 2026-12-10 06:00:00 (4h)" */
static void fmt_window(json_t *w, char *buf, size_t n)
{
	char a[32], b[32], len[32];
	int64_t s = cli__jint(w, "start_ms"), e = cli__jint(w, "end_ms");
	cli__fmt_time(s, a, sizeof(a));
	cli__fmt_time(e, b, sizeof(b));
	tk_format_duration((e - s) / 1000, len, sizeof(len));
	snprintf(buf, n, "%s to %s (%s)", a, b, len);
}

static int run_reserve(struct ctx *c)
{
	const char *const *v = (const char *const *)c->v;
	if (!v[R_NODES] || !v[R_START] || !v[R_REASON])
		return cli__usage_error(c->cmd, "--nodes, --start and --reason are required");
	if (!v[R_DURATION] == !v[R_END])
		return cli__usage_error(c->cmd, "give --duration or --end, one of them");
	int64_t now = tk_wall_ms() / 1000, start, end = 0, dur = 0;
	if (tk_parse_begin(v[R_START], now, &start) < 0)
		return cli__usage_error(c->cmd,
					"--start: expected now, now+DURATION, HH:MM[:SS] or "
					"YYYY-MM-DD[THH:MM[:SS]], got \"%s\"",
					v[R_START]);
	if (v[R_END] && tk_parse_begin(v[R_END], now, &end) < 0)
		return cli__usage_error(c->cmd, "--end: expected a time as --start, got \"%s\"",
					v[R_END]);
	if (v[R_DURATION] && (tk_parse_duration(v[R_DURATION], &dur) < 0 || dur <= 0))
		return cli__usage_error(c->cmd,
					"--duration: expected a duration such as 4h, 90m, 1d, got "
					"\"%s\"",
					v[R_DURATION]);
	json_t *body = json_pack("{s:s, s:I, s:s}", "nodes", v[R_NODES], "start_ms",
				 (json_int_t)(start * 1000), "reason", v[R_REASON]);
	if (end)
		json_object_set_new(body, "end_ms", json_integer(end * 1000));
	else
		json_object_set_new(body, "duration_s", json_integer(dur));
	if (v[R_NAME])
		json_object_set_new(body, "name", json_string(v[R_NAME]));
	if (v[R_USERS])
		json_object_set_new(body, "users", split_list(v[R_USERS]));
	if (v[R_QUEUE])
		json_object_set_new(body, "queue", json_string(v[R_QUEUE]));
	json_t *res;
	struct tk_error err;
	int r = client_call(&c->client, "POST", "/v1/reservations", body, CALL_TIMEOUT_MS, &res,
			    NULL, &err);
	json_decref(body);
	if (r < 0)
		return cli__api_error(c, &err);
	if (c->json) {
		cli__print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	char when[128];
	fmt_window(res, when, sizeof(when));
	size_t nn = json_array_size(json_object_get(res, "nodes"));
	printf("reservation %s (%s): %zu node%s, %s\n", cli__jstr(res, "name"),
	       cli__jstr(res, "kind"), nn, nn == 1 ? "" : "s", when);
	json_t *way = json_object_get(res, "jobs_in_the_way");
	if (json_array_size(way)) {
		_cleanup_free_ char *ids = joined(way, "");
		printf("%zu job%s on its nodes would still run at its start: %s (they go on "
		       "running; end or requeue them before it)\n",
		       json_array_size(way), json_array_size(way) == 1 ? "" : "s", ids);
	}
	json_decref(res);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_reserve, CLI_OPTS(reserve_opts), false, 0, 0, run_reserve)

static int run_reservations(struct ctx *c)
{
	json_t *res;
	struct tk_error err;
	if (c->npos == 2 && strcmp(c->pos[0], "delete") == 0) {
		char *path = xasprintf("/v1/reservations/%s", c->pos[1]);
		int r = client_call(&c->client, "DELETE", path, NULL, CALL_TIMEOUT_MS, &res, NULL,
				    &err);
		free(path);
		if (r < 0)
			return cli__api_error(c, &err);
		if (c->json)
			cli__print_json(res);
		else
			printf("deleted reservation %s (%lld nodes)\n", c->pos[1],
			       (long long)cli__jint(res, "nodes"));
		json_decref(res);
		return CLI_EXIT_OK;
	}
	if (c->npos)
		return cli__usage_error(c->cmd, "expected no argument, or delete NAME");
	if (client_call(&c->client, "GET", "/v1/reservations", NULL, CALL_TIMEOUT_MS, &res, NULL,
			&err) < 0)
		return cli__api_error(c, &err);
	if (c->json) {
		cli__print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	json_t *list = json_object_get(res, "reservations");
	if (!json_array_size(list)) {
		printf("no reservations (tenk reserve makes one)\n");
		json_decref(res);
		return CLI_EXIT_OK;
	}
	printf("%-14s %-11s %-7s %-46s %5s  %-16s %-12s %s\n", "NAME", "KIND", "STATE", "WHEN",
	       "NODES", "FOR", "IN THE WAY", "REASON");
	size_t i;
	json_t *w;
	json_array_foreach (list, i, w) {
		char when[128];
		fmt_window(w, when, sizeof(when));
		_cleanup_free_ char *users = joined(json_object_get(w, "users"), "");
		char who[MODEL_NAME_MAX * 2];
		const char *q = cli__jstr(w, "queue");
		snprintf(who, sizeof(who), "%s%s%s%s", users, *users && *q ? "," : "",
			 *q ? "queue:" : "", q);
		size_t way = json_array_size(json_object_get(w, "jobs_in_the_way"));
		char ways[32] = "-";
		if (way)
			snprintf(ways, sizeof(ways), "%zu job%s", way, way == 1 ? "" : "s");
		printf("%-14s %-11s %-7s %-46s %5zu  %-16s %-12s %s\n", cli__jstr(w, "name"),
		       cli__jstr(w, "kind"), cli__jstr(w, "state"), when,
		       json_array_size(json_object_get(w, "nodes")), *who ? who : "-", ways,
		       cli__jstr(w, "reason"));
	}
	json_decref(res);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_reservations, CLI_OPTS(cli_plain_opts), false, 0, 2, run_reservations)

/* ---- users --------------------------------------------------------------------------- */

enum { U_ADMIN = O_FIRST_OWN, U_ROLE, U_UNIX_USER, U_ROLES };
static const struct tk_option users_opts[] = {
	COMMON_OPTS,
	{"admin", 0, NULL, "with add: the user may do everything an admin may (--role admin)"},
	{"role", 0, "ROLE",
	 "add: viewer (reads), user (default), operator (drains, validates, queues), admin"},
	{"unix-user", 0, "NAME", "add: the Unix account its jobs run as (default: NAME)"},
	{"roles", 0, "LIST", "add: roles that classes and queues may allow (role:NAME)"},
};

static int run_users(struct ctx *c)
{
	json_t *res = NULL;
	struct tk_error err;
	int r;
	if (c->npos == 2 && strcmp(c->pos[0], "add") == 0) {
		if (c->v[U_ADMIN] && c->v[U_ROLE] && strcmp(c->v[U_ROLE], "admin") != 0)
			return cli__usage_error(c->cmd, "--admin and --role %s: give one",
						c->v[U_ROLE]);
		json_t *body = json_pack("{s:s, s:s}", "name", c->pos[1], "access",
					 c->v[U_ADMIN]	? "admin"
					 : c->v[U_ROLE] ? c->v[U_ROLE]
							: "user");
		if (c->v[U_UNIX_USER])
			json_object_set_new(body, "unix_user", json_string(c->v[U_UNIX_USER]));
		if (c->v[U_ROLES])
			json_object_set_new(body, "roles", split_list(c->v[U_ROLES]));
		r = client_call(&c->client, "POST", "/v1/users", body, CALL_TIMEOUT_MS, &res, NULL,
				&err);
		json_decref(body);
		if (r < 0)
			return cli__api_error(c, &err);
		if (c->json)
			cli__print_json(res);
		else
			printf("%s\n",
			       cli__jstr(res, "token")); /* shown once: hand it to the user */
	} else if (c->npos == 2 && strcmp(c->pos[0], "rm") == 0) {
		char *path = xasprintf("/v1/users/%s", c->pos[1]);
		r = client_call(&c->client, "DELETE", path, NULL, CALL_TIMEOUT_MS, &res, NULL,
				&err);
		free(path);
		if (r < 0)
			return cli__api_error(c, &err);
		if (c->json)
			cli__print_json(res);
		else
			printf("removed user %s\n", c->pos[1]);
	} else if (c->npos == 0) {
		if (client_call(&c->client, "GET", "/v1/users", NULL, CALL_TIMEOUT_MS, &res, NULL,
				&err) < 0)
			return cli__api_error(c, &err);
		if (c->json) {
			cli__print_json(res);
		} else {
			size_t i;
			json_t *u;
			printf("%-24s %-9s %-16s %s\n", "USER", "ACCESS", "UNIX USER", "ROLES");
			json_array_foreach (json_object_get(res, "users"), i, u) {
				_cleanup_free_ char *roles =
					joined(json_object_get(u, "roles"), "-");
				printf("%-24s %-9s %-16s %s\n", cli__jstr(u, "name"),
				       cli__jstr(u, "access"), cli__jstr(u, "unix_user"), roles);
			}
		}
	} else {
		return cli__usage_error(c->cmd, "expected no argument, add NAME or rm NAME");
	}
	json_decref(res);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_users, CLI_OPTS(users_opts), false, 0, 2, run_users)

/* ---- audit ------------------------------------------------------------------------------ */

enum { A_SINCE = O_FIRST_OWN, A_USER, A_LIMIT };
static const struct tk_option audit_opts[] = {
	COMMON_OPTS,
	{"since", 0, "TIME", "only this recent, e.g. 1h, 2d (default: all kept)"},
	{"user", 'u', "NAME", "only calls by NAME (admin, a user, node:NAME)"},
	{"limit", 'n', "N", "the newest N rows (default 1000)"},
};

static int run_audit(struct ctx *c)
{
	struct strbuf path;
	strbuf_init(&path);
	strbuf_addf(&path, "/v1/audit?limit=%s", c->v[A_LIMIT] ? c->v[A_LIMIT] : "1000");
	if (c->v[A_SINCE]) {
		int64_t s;
		if (tk_parse_duration(c->v[A_SINCE], &s) < 0) {
			strbuf_release(&path);
			return cli__usage_error(c->cmd,
						"--since: expected a duration such as 30m, 1h, 2d, "
						"got \"%s\"",
						c->v[A_SINCE]);
		}
		strbuf_addf(&path, "&since_ms=%lld", (long long)(tk_wall_ms() - s * 1000));
	}
	if (c->v[A_USER]) {
		if (strspn(c->v[A_USER],
			   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			   "._-:") != strlen(c->v[A_USER])) {
			strbuf_release(&path);
			return cli__usage_error(c->cmd, "--user: \"%s\" is not a user name",
						c->v[A_USER]);
		}
		strbuf_addf(&path, "&user=%s", c->v[A_USER]);
	}
	json_t *res;
	struct tk_error err;
	int r = client_call(&c->client, "GET", path.buf, NULL, CALL_TIMEOUT_MS, &res, NULL, &err);
	strbuf_release(&path);
	if (r < 0)
		return cli__api_error(c, &err);
	if (c->json) {
		cli__print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	printf("%-19s %-16s %-15s %-40s %6s %s\n", "TIME", "WHO", "FROM", "CALL", "STATUS",
	       "RESULT");
	size_t i;
	json_t *row;
	json_array_foreach (json_object_get(res, "rows"), i, row) {
		char when[32], call[256];
		cli__fmt_time(cli__jint(row, "at_ms"), when, sizeof(when));
		snprintf(call, sizeof(call), "%s %s", cli__jstr(row, "method"),
			 cli__jstr(row, "path"));
		printf("%-19s %-16.16s %-15.15s %-40.40s %6lld %s\n", when, cli__jstr(row, "who"),
		       cli__jstr(row, "addr"), call, (long long)cli__jint(row, "status"),
		       cli__jstr(row, "result"));
	}
	json_decref(res);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_audit, CLI_OPTS(audit_opts), false, 0, 0, run_audit)
