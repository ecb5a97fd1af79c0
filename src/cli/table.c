/*
 * What every command shares: reading its command line by its own table
 * (cli_main), the usage and API errors, and small printing helpers. Usage
 * errors exit 2, API errors print the server's message and exit 1.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

const struct tk_option cli_plain_opts[O_FIRST_OWN] = {COMMON_OPTS};

/* --json was given: errors are JSON objects on stdout too. */
static bool json_errors;

/* {"error": text, "status": status, "command": name} on stdout. */
static void error_json(const char *cmd, const char *text, long status)
{
	json_t *o = json_pack("{s:s, s:s, s:i}", "error", text, "command", cmd, "exit",
			      status == 400 || status < 0 ? CLI_EXIT_USAGE : CLI_EXIT_ERROR);
	if (status > 0)
		json_object_set_new(o, "status", json_integer(status));
	cli__print_json(o);
	json_decref(o);
}

int cli__usage_error(const struct tk_command *cmd, const char *fmt, ...)
{
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	fprintf(stderr, "tenk %s: %s\nusage: tenk %s [OPTIONS] %s (see tenk %s --help)\n",
		cmd->name, text, cmd->name, cmd->args, cmd->name);
	if (json_errors)
		error_json(cmd->name, text, -1);
	return CLI_EXIT_USAGE;
}

int cli__api_error(const struct ctx *c, const struct tk_error *err)
{
	fprintf(stderr, "tenk %s: %s\n", c->cmd->name, err->text);
	long status = c->client.last_status;
	if (c->json)
		error_json(c->cmd->name, err->text, status);
	/* the server found the request itself wrong: a usage error */
	return status == 400 ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
}

void cli__print_json(json_t *j)
{
	char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
	puts(text);
	free(text);
}

void cli__fmt_time(int64_t ms, char *buf, size_t n)
{
	if (ms <= 0) {
		snprintf(buf, n, "-");
		return;
	}
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}

int64_t cli__jint(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

const char *cli__jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

int cli__call(struct ctx *c, const char *method, const char *path, json_t *body, json_t **ret)
{
	struct tk_error err;
	*ret = NULL;
	int r = client_call(&c->client, method, path, body, CALL_TIMEOUT_MS, ret, NULL, &err);
	json_decref(body);
	return r < 0 ? cli__api_error(c, &err) : 0;
}

int cli__parse_id(struct ctx *c, const char *s, int64_t *ret)
{
	if (tk_parse_int64(s, 1, INT64_MAX, ret) < 0)
		return cli__usage_error(c->cmd, "a job id is a positive integer, got \"%s\"", s);
	return 0;
}

int cli__job_ref_check(struct ctx *c, const char *s)
{
	const char *us = strchr(s, '_');
	int64_t x;
	_cleanup_free_ char *id = us ? xstrndup(s, (size_t)(us - s)) : xstrdup(s);
	if (tk_parse_int64(id, 1, INT64_MAX, &x) < 0 ||
	    (us && tk_parse_int64(us + 1, 0, MODEL_MAX_ARRAY_INDEX, &x) < 0))
		return cli__usage_error(c->cmd,
					"a job is named by its id (12), or an array's element by "
					"ID_INDEX (12_7); got \"%s\"",
					s);
	return 0;
}

int cli_main(const struct tk_command *cmd, const struct cli_spec *spec, int argc, char **argv)
{
	struct ctx c;
	memset(&c, 0, sizeof(c));
	c.cmd = cmd;
	c.argc = argc;
	c.argv = argv;
	struct tk_error err;
	assert(spec->nopts <= ARRAY_SIZE(c.v));
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--json") == 0)
			json_errors = true;
	if (tk_opts_parse(spec->opts, spec->nopts, argc, argv, spec->stop_at_positional, c.v,
			  &c.pos, &c.npos, &err) < 0)
		return cli__usage_error(cmd, "%s", err.text);
	int rc;
	if (c.v[O_HELP]) {
		tk_opts_usage(spec->opts, spec->nopts, "usage: tenk %s [OPTIONS] %s\n%s.",
			      cmd->name, cmd->args, cmd->summary);
		rc = CLI_EXIT_OK;
		goto out;
	}
	if (c.npos < spec->min_args) {
		rc = cli__usage_error(cmd, "missing arguments");
		goto out;
	}
	if (spec->max_args >= 0 && c.npos > spec->max_args) {
		rc = cli__usage_error(cmd, "unexpected argument \"%s\"", c.pos[spec->max_args]);
		goto out;
	}
	c.json = c.v[O_JSON] != NULL;
	if (client_init(&c.client, c.v[O_SERVER], c.v[O_TOKEN], c.v[O_TOKEN_FILE], &err) < 0 ||
	    (c.v[O_CA] && client_set_ca(&c.client, c.v[O_CA], &err) < 0)) {
		fprintf(stderr, "tenk %s: %s\n", cmd->name, err.text);
		rc = CLI_EXIT_USAGE;
		goto out;
	}
	if (c.v[O_INSECURE])
		c.client.insecure_http = true;
	rc = spec->run(&c);
out:
	client_release(&c.client);
	free(c.pos);
	return rc;
}
