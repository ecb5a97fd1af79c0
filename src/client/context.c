/*
 * The CLI's clusters, as kubectl's contexts: $XDG_CONFIG_HOME/tenk/
 * config.json (else ~/.config/tenk/config.json) names clusters, each its
 * server, CA and token file, and which one is current. `tenk up` writes one
 * for its cluster; `tenk config use-cluster NAME` picks another. A command
 * reads it only when no flag, no environment variable and no ./tenk-data
 * names a server, so what worked before works the same.
 *
 *   {"current": "lab",
 *    "clusters": {"lab": {"server": "https://10.0.0.5:7480",
 *                         "ca": "/home/me/lab-ca.pem",
 *                         "token_file": "/home/me/.tenk-lab-token"}}}
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *client_config_path(void)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	if (xdg && *xdg == '/')
		return xasprintf("%s/tenk/config.json", xdg);
	if (home && *home == '/')
		return xasprintf("%s/.config/tenk/config.json", home);
	return NULL;
}

int client_config_load(json_t **ret, struct tk_error *err)
{
	*ret = NULL;
	_cleanup_free_ char *path = client_config_path();
	char *text = NULL;
	if (!path || tk_read_file(path, 1 << 20, &text, NULL) < 0) {
		*ret = json_object(); /* none yet */
		return 0;
	}
	json_error_t jerr;
	json_t *cfg = json_loads(text, 0, &jerr);
	free(text);
	json_t *clusters = cfg ? json_object_get(cfg, "clusters") : NULL;
	if (!json_is_object(cfg) || (clusters && !json_is_object(clusters))) {
		json_decref(cfg);
		return tk_errorf(err, -EINVAL,
				 "%s: not tenk's configuration (%s): fix or remove it; `tenk "
				 "config set-cluster` writes a new one",
				 path, cfg ? "\"clusters\" is not an object" : jerr.text);
	}
	*ret = cfg;
	return 0;
}

int client_config_save(json_t *cfg, struct tk_error *err)
{
	_cleanup_free_ char *path = client_config_path();
	if (!path)
		return tk_errorf(err, -ENOENT,
				 "no place for the CLI's configuration: set HOME or "
				 "XDG_CONFIG_HOME");
	_cleanup_free_ char *dir = xstrdup(path);
	*strrchr(dir, '/') = '\0';
	if (tk_mkdir_p(dir, 0700) < 0)
		return tk_errorf(err, -errno, "%s: %s", dir, strerror(errno));
	char *text = json_dumps(cfg, JSON_INDENT(2) | JSON_SORT_KEYS);
	/* (it names token files, not tokens; 0600 all the same) */
	int r = tk_write_file(path, text, strlen(text), 0600);
	free(text);
	if (r < 0)
		return tk_errorf(err, r, "%s: %s", path, strerror(-r));
	return 0;
}

int client_context(const char *name, struct client_ctx *ret, struct tk_error *err)
{
	memset(ret, 0, sizeof(*ret));
	json_t *cfg;
	int r = client_config_load(&cfg, err);
	if (r < 0)
		return r;
	const char *cur = json_string_value(json_object_get(cfg, "current"));
	const char *want = name ? name : cur;
	json_t *c = want ? json_object_get(json_object_get(cfg, "clusters"), want) : NULL;
	if (!c) {
		_cleanup_free_ char *path = client_config_path();
		if (name)
			r = tk_errorf(
				err, -ENOENT,
				"no cluster \"%s\" in %s (tenk config lists them; tenk config "
				"set-cluster %s --server URL adds it)",
				name, path ? path : "the CLI's configuration", name);
		json_decref(cfg);
		return r;
	}
	snprintf(ret->name, sizeof(ret->name), "%s", want);
	const char *v;
	if ((v = json_string_value(json_object_get(c, "server"))) && *v)
		ret->server = xstrdup(v);
	if ((v = json_string_value(json_object_get(c, "ca"))) && *v)
		ret->ca = xstrdup(v);
	if ((v = json_string_value(json_object_get(c, "token_file"))) && *v)
		ret->token_file = xstrdup(v);
	json_decref(cfg);
	if (!ret->server) {
		client_ctx_release(ret);
		return tk_errorf(err, -EINVAL,
				 "cluster \"%s\" names no server (tenk config set-cluster %s "
				 "--server URL)",
				 want, want);
	}
	return 1;
}

void client_ctx_release(struct client_ctx *c)
{
	free(c->server);
	free(c->ca);
	free(c->token_file);
	memset(c, 0, sizeof(*c));
}
