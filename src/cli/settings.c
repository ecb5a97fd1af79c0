/*
 * tenk config show | history | apply | set | unset | rollback: the
 * cluster's configuration (the server's config.json), versioned by the
 * server (server/config.c). The other verbs of tenk config (config.c)
 * are the CLI's own list of clusters.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { S_VERSION = O_FIRST_OWN, S_WHY, S_BEFORE };
static const struct tk_option settings_opts[] = {
	COMMON_OPTS,
	{"version", 0, "N", "show: that version (default: the one in force)"},
	{"why", 0, "TEXT", "apply, set, unset, rollback: why, kept with the version"},
	{"before", 0, "TIME", "rollback: to the version in force that long ago (1d, 12h, 30m)"},
};

static const struct tk_command settings_cmd = {
	"config",
	"show [--version N] | history | apply FILE | set KEY VALUE | unset KEY | rollback "
	"VERSION|--before TIME",
	"the cluster's configuration (the server's config.json), versioned: show it, list its "
	"versions, change it (checked whole, applied without a restart where the setting "
	"allows, kept with who and when), or go back to an earlier version",
	NULL};

/* What a change answered: its version, what changed, what waits for a
 * start. */
static int print_applied(struct ctx *c, json_t *res)
{
	if (c->json) {
		cli__print_json(res);
		return CLI_EXIT_OK;
	}
	long long v = (long long)cli__jint(res, "version");
	if (json_is_true(json_object_get(res, "unchanged"))) {
		printf("no change: version %lld is in force and says the same\n", v);
		return CLI_EXIT_OK;
	}
	printf("configuration version %lld in force", v);
	size_t i;
	json_t *k;
	json_array_foreach (json_object_get(res, "changed"), i, k)
		printf("%s%s", i ? ", " : " (changed: ", json_string_value(k));
	printf("%s\n", json_array_size(json_object_get(res, "changed")) ? ")" : "");
	json_array_foreach (json_object_get(res, "later"), i, k)
		printf("  %s: %s\n", cli__jstr(k, "key"),
		       strcmp(cli__jstr(k, "when"), "registration") == 0
			       ? "in force in the server; each agent takes it when it next "
				 "registers"
			       : "kept in the version, taken at the server's next start");
	return CLI_EXIT_OK;
}

static int call(struct ctx *c, const char *method, const char *path, json_t *body)
{
	json_t *res;
	int rc = cli__call(c, method, path, body, &res);
	if (rc)
		return rc;
	rc = print_applied(c, res);
	json_decref(res);
	return rc;
}

static json_t *with_why(struct ctx *c, json_t *body)
{
	if (c->v[S_WHY])
		json_object_set_new(body, "why", json_string(c->v[S_WHY]));
	return body;
}

static int show(struct ctx *c)
{
	char path[64] = "/v1/config";
	if (c->v[S_VERSION]) {
		int64_t v;
		if (tk_parse_int64(c->v[S_VERSION], 1, INT64_MAX, &v) < 0)
			return cli__usage_error(c->cmd, "--version: a version's number, got \"%s\"",
						c->v[S_VERSION]);
		snprintf(path, sizeof(path), "/v1/config?version=%lld", (long long)v);
	}
	json_t *res;
	int rc = cli__call(c, "GET", path, NULL, &res);
	if (rc)
		return rc;
	if (c->json) {
		cli__print_json(res);
	} else {
		char when[32];
		cli__fmt_time(cli__jint(res, "at_ms"), when, sizeof(when));
		long long v = (long long)cli__jint(res, "version");
		/* the header to stderr: stdout is the file, to edit and apply */
		fprintf(stderr, "# version %lld%s, by %s at %s: %s\n", v,
			v == cli__jint(res, "latest") ? " (in force)" : "", cli__jstr(res, "who"),
			when, cli__jstr(res, "why"));
		char *text = json_dumps(json_object_get(res, "config"), JSON_INDENT(2));
		printf("%s\n", text);
		free(text);
	}
	json_decref(res);
	return CLI_EXIT_OK;
}

static int history(struct ctx *c)
{
	json_t *res;
	int rc = cli__call(c, "GET", "/v1/config/history", NULL, &res);
	if (rc)
		return rc;
	if (c->json) {
		cli__print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	json_t *all = json_object_get(res, "versions");
	printf("  %-7s %-19s %-16s %-32s %s\n", "VERSION", "TIME", "WHO", "CHANGED", "WHY");
	size_t i;
	json_t *v;
	json_array_foreach (all, i, v) {
		char when[32], changed[256] = "";
		size_t k, off = 0;
		json_t *key;
		cli__fmt_time(cli__jint(v, "at_ms"), when, sizeof(when));
		json_array_foreach (json_object_get(v, "changed"), k, key)
			if (off < sizeof(changed))
				off += (size_t)snprintf(changed + off, sizeof(changed) - off,
							"%s%s", k ? "," : "",
							json_string_value(key));
		printf("%s %-7lld %-19s %-16.16s %-32.32s %s\n",
		       i + 1 == json_array_size(all) ? "*" : " ",
		       (long long)cli__jint(v, "version"), when, cli__jstr(v, "who"),
		       *changed ? changed : "-", cli__jstr(v, "why"));
	}
	printf("(* the version in force)\n");
	json_decref(res);
	return CLI_EXIT_OK;
}

static int apply(struct ctx *c, const char *file)
{
	char *text = NULL;
	int r = tk_read_file(strcmp(file, "-") == 0 ? "/dev/stdin" : file, 1024 * 1024, &text,
			     NULL);
	if (r < 0) {
		fprintf(stderr, "tenk config apply: cannot read %s: %s\n", file, strerror(-r));
		return CLI_EXIT_ERROR;
	}
	json_error_t je;
	json_t *cfg = json_loads(text, 0, &je);
	free(text);
	if (!json_is_object(cfg)) {
		fprintf(stderr, "tenk config apply: %s: line %d: %s; nothing was sent\n", file,
			je.line, cfg ? "not a JSON object" : je.text);
		json_decref(cfg);
		return CLI_EXIT_ERROR;
	}
	return call(c, "PUT", "/v1/config", with_why(c, json_pack("{s:o}", "config", cfg)));
}

/* VALUE as JSON where it is JSON (80, true, ["a"], "x"), else as text. */
static json_t *value_of(const char *text)
{
	json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
	return v ? v : json_string(text);
}

static int run_settings(struct ctx *c)
{
	const char *verb = c->pos[0];
	int want = strcmp(verb, "set") == 0				      ? 3
		   : strcmp(verb, "unset") == 0 || strcmp(verb, "apply") == 0 ? 2
		   : strcmp(verb, "rollback") == 0			      ? -1
									      : 1;
	if (want > 0 && c->npos != want)
		return cli__usage_error(c->cmd, "%s: expected %s", verb,
					want == 3   ? "KEY VALUE"
					: want == 2 ? (verb[0] == 'a' ? "FILE" : "KEY")
						    : "no argument");
	if (c->v[S_VERSION] && strcmp(verb, "show") != 0)
		return cli__usage_error(c->cmd, "--version is for show");
	if (c->v[S_BEFORE] && strcmp(verb, "rollback") != 0)
		return cli__usage_error(c->cmd, "--before is for rollback");
	if (strcmp(verb, "show") == 0)
		return show(c);
	if (strcmp(verb, "history") == 0)
		return history(c);
	if (strcmp(verb, "apply") == 0)
		return apply(c, c->pos[1]);
	if (strcmp(verb, "set") == 0)
		return call(
			c, "PATCH", "/v1/config",
			with_why(c, json_pack("{s:{s:o}}", "set", c->pos[1], value_of(c->pos[2]))));
	if (strcmp(verb, "unset") == 0)
		return call(c, "PATCH", "/v1/config",
			    with_why(c, json_pack("{s:[s]}", "unset", c->pos[1])));
	/* rollback VERSION | --before TIME */
	if ((c->npos == 2) == (c->v[S_BEFORE] != NULL) || c->npos > 2)
		return cli__usage_error(c->cmd, "rollback: give VERSION or --before TIME");
	if (c->v[S_BEFORE]) {
		int64_t ago;
		if (tk_parse_duration(c->v[S_BEFORE], &ago) < 0 || ago <= 0)
			return cli__usage_error(c->cmd,
						"--before: a time ago such as 30m, 12h, 1d; got "
						"\"%s\"",
						c->v[S_BEFORE]);
		return call(c, "POST", "/v1/config/rollback",
			    with_why(c, json_pack("{s:I}", "at_ms",
						  (json_int_t)(tk_wall_ms() - ago * 1000))));
	}
	int64_t v;
	if (tk_parse_int64(c->pos[1], 1, INT64_MAX, &v) < 0)
		return cli__usage_error(c->cmd,
					"rollback: a version's number (tenk config history), got "
					"\"%s\"",
					c->pos[1]);
	return call(c, "POST", "/v1/config/rollback",
		    with_why(c, json_pack("{s:I}", "version", (json_int_t)v)));
}

bool cli__config_verb_is_server(const char *verb)
{
	static const char *const verbs[] = {"show", "history", "apply", "set", "unset", "rollback"};
	for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
		if (strcmp(verb, verbs[i]) == 0)
			return true;
	return false;
}

int cli__config_server(int argc, char **argv)
{
	static const struct cli_spec spec = {CLI_OPTS(settings_opts), false, 1, 3, run_settings};
	return cli_main(&settings_cmd, &spec, argc, argv);
}
