/*
 * tenk config: the clusters the CLI knows (client/context.c), as kubectl's
 * contexts. `tenk up` adds its own; these list them, pick one, add or
 * change one, remove one. Nothing here talks to a server.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { C_SERVER, C_CA, C_TOKEN_FILE, C_USE, C_JSON, C_HELP, C_COUNT };
static const struct tk_option config_opts[] = {
	{"server", 0, "URL[,URL...]", "set-cluster: its server (or servers: standbys)"},
	{"ca-file", 0, "FILE", "set-cluster: the CA its HTTPS is verified against"},
	{"token-file", 0, "FILE", "set-cluster: the file that holds its API token"},
	{"use", 0, NULL, "set-cluster: make it the current cluster too"},
	{"json", 0, NULL, "list: the configuration as JSON"},
	{"help", 'h', NULL, "show this help"},
};

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "tenk config: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr,
		"\nusage: tenk config [list | current | use-cluster NAME | set-cluster NAME "
		"[--server URL] [--ca-file FILE] [--token-file FILE] [--use] | "
		"delete-cluster NAME]\n       tenk config [show | history | apply FILE | set KEY "
		"VALUE | unset KEY | rollback VERSION|--before TIME] (the cluster's "
		"configuration: tenk config show --help)\n");
	return CLI_EXIT_USAGE;
}

static int failed(const struct tk_error *err)
{
	fprintf(stderr, "tenk config: %s\n", err->text);
	return CLI_EXIT_ERROR;
}

static int list(json_t *cfg, bool as_json)
{
	if (as_json) {
		cli__print_json(cfg);
		return CLI_EXIT_OK;
	}
	_cleanup_free_ char *path = client_config_path();
	const char *cur = json_string_value(json_object_get(cfg, "current"));
	json_t *clusters = json_object_get(cfg, "clusters");
	if (!json_object_size(clusters)) {
		printf("no clusters in %s: tenk up adds its own; tenk config set-cluster NAME "
		       "--server URL adds one\n",
		       path ? path : "the CLI's configuration");
		return CLI_EXIT_OK;
	}
	printf("  %-16s %-32s %-28s %s\n", "CLUSTER", "SERVER", "CA", "TOKEN FILE");
	const char *name;
	json_t *c;
	json_object_foreach (clusters, name, c)
		printf("%s %-16s %-32s %-28s %s\n", cur && strcmp(cur, name) == 0 ? "*" : " ", name,
		       cli__jstr(c, "server"), *cli__jstr(c, "ca") ? cli__jstr(c, "ca") : "-",
		       *cli__jstr(c, "token_file") ? cli__jstr(c, "token_file") : "-");
	printf("(%s; * the current one)\n", path);
	return CLI_EXIT_OK;
}

/* A file named on the command line, kept as an absolute path: the
 * configuration is read from any folder. */
static int set_path(json_t *c, const char *key, const char *opt, const char *file)
{
	char *abs = realpath(file, NULL);
	if (!abs || access(abs, R_OK) < 0) {
		free(abs);
		fprintf(stderr, "tenk config: --%s: cannot read %s\n", opt, file);
		return CLI_EXIT_USAGE;
	}
	json_object_set_new(c, key, json_string(abs));
	free(abs);
	return 0;
}

int cli_config(const struct tk_command *cmd, int argc, char **argv)
{
	/* the verb: the first argument that is neither an option nor the
	 * value of one */
	static const char *const valued[] = {"--server",  "--token", "--token-file", "--ca-file",
					     "--version", "--why",   "--before"};
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (argv[i][0] != '-') {
			if (cli__config_verb_is_server(argv[i]))
				return cli__config_server(argc, argv);
			break;
		}
		for (size_t k = 0; k < ARRAY_SIZE(valued); k++)
			if (strcmp(argv[i], valued[k]) == 0)
				i++;
	}
	const char *v[C_COUNT] = {0};
	char **pos = NULL;
	int npos = 0, rc;
	struct tk_error err;
	if (tk_opts_parse(config_opts, C_COUNT, argc, argv, false, v, &pos, &npos, &err) < 0)
		return usage_error("%s", err.text);
	if (v[C_HELP]) {
		tk_opts_usage(
			config_opts, C_COUNT,
			"usage: tenk config [list | current | use-cluster NAME | set-cluster "
			"NAME [--server URL] [--ca-file FILE] [--token-file FILE] [--use] | "
			"delete-cluster NAME]\n%s: the clusters the CLI knows, kept in "
			"$XDG_CONFIG_HOME/tenk/config.json (else ~/.config/tenk/config.json). "
			"A command uses the current one when no --server, $TENK_SERVER, "
			"$TENK_CLUSTER or ./tenk-data names another.\n"
			"tenk config show | history | apply FILE | set KEY VALUE | unset KEY | "
			"rollback VERSION|--before TIME: the cluster's configuration, versioned by "
			"its server (tenk config show --help)",
			cmd->summary);
		free(pos);
		return CLI_EXIT_OK;
	}
	const char *verb = npos ? pos[0] : "list";
	const char *name = npos > 1 ? pos[1] : NULL;
	bool named = strcmp(verb, "use-cluster") == 0 || strcmp(verb, "set-cluster") == 0 ||
		     strcmp(verb, "delete-cluster") == 0;
	if (strcmp(verb, "list") && strcmp(verb, "current") && !named) {
		rc = usage_error("no such subcommand \"%s\"", verb);
		goto out;
	}
	if (named && !name) {
		rc = usage_error("%s: name the cluster", verb);
		goto out;
	}
	if (npos > (named ? 2 : 1)) {
		rc = usage_error("unexpected argument \"%s\"", pos[named ? 2 : 1]);
		goto out;
	}
	if (name && (!model_name_valid(name) || strlen(name) >= 64)) {
		rc = usage_error("\"%s\" is not a cluster name (letters, digits, '.', '_', '-')",
				 name);
		goto out;
	}
	bool sets = v[C_SERVER] || v[C_CA] || v[C_TOKEN_FILE] || v[C_USE];
	if (sets && strcmp(verb, "set-cluster") != 0) {
		rc = usage_error("--server, --ca-file, --token-file and --use are for %s",
				 "set-cluster");
		goto out;
	}
	json_t *cfg;
	if (client_config_load(&cfg, &err) < 0) {
		rc = failed(&err);
		goto out;
	}
	json_t *clusters = json_object_get(cfg, "clusters");
	if (!clusters) {
		clusters = json_object();
		json_object_set_new(cfg, "clusters", clusters);
	}
	rc = CLI_EXIT_OK;
	if (strcmp(verb, "list") == 0) {
		rc = list(cfg, v[C_JSON] != NULL);
	} else if (strcmp(verb, "current") == 0) {
		const char *cur = json_string_value(json_object_get(cfg, "current"));
		if (cur)
			printf("%s\n", cur);
		else {
			fprintf(stderr, "tenk config: no current cluster (tenk config use-cluster "
					"NAME)\n");
			rc = CLI_EXIT_ERROR;
		}
	} else if (strcmp(verb, "use-cluster") == 0) {
		if (!json_object_get(clusters, name)) {
			fprintf(stderr,
				"tenk config: no cluster \"%s\" (tenk config lists them; tenk "
				"config "
				"set-cluster %s --server URL adds it)\n",
				name, name);
			rc = CLI_EXIT_ERROR;
		} else {
			json_object_set_new(cfg, "current", json_string(name));
			rc = client_config_save(cfg, &err) < 0 ? failed(&err) : CLI_EXIT_OK;
			if (rc == CLI_EXIT_OK)
				printf("using cluster %s\n", name);
		}
	} else if (strcmp(verb, "set-cluster") == 0) {
		json_t *c = json_object_get(clusters, name);
		bool is_new = !c;
		if (is_new && !v[C_SERVER]) {
			rc = usage_error("set-cluster %s: a new cluster needs --server URL", name);
		} else {
			c = is_new ? json_object() : json_incref(c);
			if (v[C_SERVER]) {
				char **urls;
				int n;
				if (tk_url_list(v[C_SERVER], &urls, &n) < 0) {
					rc = usage_error(
						"--server: expected URL[,URL...], got \"%s\"",
						v[C_SERVER]);
				} else {
					for (int i = 0; i < n; i++)
						free(urls[i]);
					free(urls);
					json_object_set_new(c, "server", json_string(v[C_SERVER]));
				}
			}
			if (!rc && v[C_CA])
				rc = set_path(c, "ca", "ca-file", v[C_CA]);
			if (!rc && v[C_TOKEN_FILE])
				rc = set_path(c, "token_file", "token-file", v[C_TOKEN_FILE]);
			if (!rc) {
				json_object_set(clusters, name, c);
				if (v[C_USE] || !json_object_get(cfg, "current"))
					json_object_set_new(cfg, "current", json_string(name));
				rc = client_config_save(cfg, &err) < 0 ? failed(&err) : CLI_EXIT_OK;
			}
			if (rc == CLI_EXIT_OK)
				printf("%s cluster %s%s\n", is_new ? "added" : "changed", name,
				       strcmp(json_string_value(json_object_get(cfg, "current")),
					      name) == 0
					       ? " (the current one)"
					       : "");
			json_decref(c);
		}
	} else { /* delete-cluster */
		if (json_object_del(clusters, name) < 0) {
			fprintf(stderr, "tenk config: no cluster \"%s\"\n", name);
			rc = CLI_EXIT_ERROR;
		} else {
			const char *cur = json_string_value(json_object_get(cfg, "current"));
			if (cur && strcmp(cur, name) == 0)
				json_object_del(cfg, "current");
			rc = client_config_save(cfg, &err) < 0 ? failed(&err) : CLI_EXIT_OK;
			if (rc == CLI_EXIT_OK)
				printf("removed cluster %s\n", name);
		}
	}
	json_decref(cfg);
out:
	free(pos);
	return rc;
}
