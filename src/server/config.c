/*
 * The cluster's configuration, versioned (tenk config): every change of
 * config.json's settings, through the API (apply, set, rollback) or by an
 * edit of the file and SIGHUP, is checked whole before anything changes,
 * kept as a new version in the store (who, when, why; never rewritten)
 * in the batch that audits it, written back to the file, and applied to
 * the running server: classes, pools, limits and every other setting at
 * once, with jobs waiting and running. What only a start can take (the
 * store's place, power fencing, the fault-domain levels) is kept as a
 * version, listed as waiting for the next start, and left as it was.
 *
 * At a start the store's versions and the file are put together: a file
 * edited since the server last wrote it (or never seen) is a new version;
 * a file the server wrote and a newer version left behind (a standby's
 * copy, a crash between the commit and the write) gives way to the
 * newest version, and is written again.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define CONFIG_MAX_BYTES (1024 * 1024)

/* What only a start takes, and the settings behind each key. */
static const char *const start_only[] = {"store", "power_fence", "domain_levels"};

const char *config_file_path(const struct server *s, char *buf, size_t n)
{
	if (s->cfg.config_path)
		return s->cfg.config_path;
	snprintf(buf, n, "%s/config.json", s->data_dir);
	return buf;
}

/* DATA/config.version: the version the file held when this server last
 * wrote or read it ("N\n"); 0 when there is none. */
static int64_t side_read(const struct server *s)
{
	_cleanup_free_ char *path = xasprintf("%s/config.version", s->data_dir);
	char *text = NULL;
	int64_t v = 0;
	if (tk_read_file(path, 64, &text, NULL) < 0)
		return 0;
	text[strcspn(text, "\n")] = '\0';
	if (tk_parse_int64(text, 1, INT64_MAX, &v) < 0)
		v = 0;
	free(text);
	return v;
}

static void side_write(const struct server *s, int64_t version)
{
	_cleanup_free_ char *path = xasprintf("%s/config.version", s->data_dir);
	char line[32];
	int len = snprintf(line, sizeof(line), "%lld\n", (long long)version);
	int r = tk_write_file(path, line, (size_t)len, 0600);
	if (r < 0)
		log_warn("cannot write %s: %s", path, strerror(-r));
}

/* The file, as JSON (*ret NULL and 0 where there is none). */
static int file_read(const struct server *s, json_t **ret, struct tk_error *err)
{
	char buf[4096];
	const char *path = config_file_path(s, buf, sizeof(buf));
	char *text = NULL;
	*ret = NULL;
	int r = tk_read_file(path, CONFIG_MAX_BYTES, &text, NULL);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return tk_errorf(err, r, "cannot read %s: %s", path, strerror(-r));
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	free(text);
	if (!json_is_object(j)) {
		json_decref(j);
		return tk_errorf(err, -EINVAL, "%s: line %d: %s", path, je.line,
				 j ? "not a JSON object" : je.text);
	}
	*ret = j;
	return 0;
}

/* Writes cfg to the file (where the server may), and notes its version. */
static void file_write(struct server *s, const json_t *cfg, int64_t version)
{
	char buf[4096];
	const char *path = config_file_path(s, buf, sizeof(buf));
	char *text = json_dumps(cfg, JSON_INDENT(2));
	struct stat st;
	mode_t mode = stat(path, &st) == 0 ? st.st_mode & 0777 : 0600;
	size_t len = strlen(text);
	text = xrealloc(text, len + 2);
	text[len++] = '\n';
	int r = tk_write_file(path, text, len, mode);
	free(text);
	if (r < 0) {
		log_warn("configuration version %lld: cannot write %s: %s; the store holds it, "
			 "and the next start writes it",
			 (long long)version, path, strerror(-r));
		return;
	}
	side_write(s, version);
}

static struct config_version *version_find(struct server *s, int64_t v)
{
	for (size_t i = 0; i < s->config.n; i++)
		if (s->config.v[i].version == v)
			return &s->config.v[i];
	return NULL;
}

static struct config_version *version_latest(struct server *s)
{
	return s->config.n ? &s->config.v[s->config.n - 1] : NULL;
}

static json_t *version_pack(const struct config_version *v, bool whole)
{
	json_t *o = json_pack("{s:I, s:I, s:s, s:s}", "version", (json_int_t)v->version, "at_ms",
			      (json_int_t)v->at_ms, "who", v->who, "why", v->why);
	json_object_set(o, "changed", v->changed);
	json_object_set(o, "later", v->later);
	if (whole)
		json_object_set(o, "config", v->config);
	return o;
}

/* Parses a configuration: the scheduling settings and the checks the
 * server makes of them at a start. */
static int config_parse(const struct server *s, const json_t *cfg, struct sched_config *out,
			struct tk_error *err)
{
	sched_config_default(out);
	char *text = json_dumps(cfg, JSON_COMPACT);
	int r = sched_config_load_json(out, text, err);
	free(text);
	if (r < 0)
		return r;
	return server_power_fence_check(&s->cfg, out, err);
}

/* Whether key k's value differs between a and b (NULL: {}). */
static bool key_differs(const json_t *a, const json_t *b, const char *k)
{
	json_t *x = a ? json_object_get(a, k) : NULL, *y = b ? json_object_get(b, k) : NULL;
	return x ? !y || !json_equal(x, y) : y != NULL;
}

/* The top-level keys whose values differ between a and b (NULL: {}). */
static json_t *keys_changed(const json_t *a, const json_t *b)
{
	json_t *keys = json_array();
	const char *k;
	json_t *v;
	json_object_foreach ((json_t *)a, k, v)
		if (key_differs(a, b, k))
			json_array_append_new(keys, json_string(k));
	json_object_foreach ((json_t *)b, k, v)
		if (!a || !json_object_get(a, k))
			json_array_append_new(keys, json_string(k));
	return keys;
}

/* Into next, what only a start takes, as the running server has it; the
 * keys of those that differ from the start's in later ({"key", "when":
 * "start"}), and gpu_health and idle_power_after where they differ from
 * last's ("when": "registration": each agent's next). */
static json_t *keep_start_only(const struct server *s, const json_t *last, const json_t *cfg,
			       struct sched_config *next)
{
	const json_t *was = s->config.at_start;
	json_t *later = json_array();
	const struct sched_config *now = &s->st.sched;
	for (size_t i = 0; i < ARRAY_SIZE(start_only); i++)
		if (key_differs(was, cfg, start_only[i]))
			json_array_append_new(later, json_pack("{s:s, s:s}", "key", start_only[i],
							       "when", "start"));
	/* the agents hold their accelerators to what they got when they
	 * registered */
	static const char *const at_registration[] = {"gpu_health", "idle_power_after"};
	for (size_t i = 0; i < ARRAY_SIZE(at_registration); i++)
		if (key_differs(last, cfg, at_registration[i]))
			json_array_append_new(later,
					      json_pack("{s:s, s:s}", "key", at_registration[i],
							"when", "registration"));
	memcpy(next->store, now->store, sizeof(next->store));
	next->npower_fence = now->npower_fence;
	memcpy(next->power_fence, now->power_fence, sizeof(next->power_fence));
	next->power_fence_after_s = now->power_fence_after_s;
	next->power_fence_timeout_s = now->power_fence_timeout_s;
	next->power_fence_heartbeat_s = now->power_fence_heartbeat_s;
	next->ndomain_levels = now->ndomain_levels;
	memcpy(next->domain_levels, now->domain_levels, sizeof(next->domain_levels));
	return later;
}

/* The running state takes next (where the classes changed, the finished
 * jobs' service by class is learnt again: from the accounting records for
 * the jobs out of memory). */
static void take(struct server *s, const struct sched_config *next)
{
	if (state_config_swap(&s->st, next, server_now_ms(s)))
		acct_las_history_load(s);
}

/* A new version in memory and in the next batch. */
static struct config_version *version_add(struct server *s, json_t *cfg, const char *who,
					  const char *why, json_t *changed, json_t *later)
{
	int64_t number = s->config.n ? version_latest(s)->version + 1 : 1;
	xgrow(&s->config.v, &s->config.alloc, s->config.n + 1, sizeof(*s->config.v));
	struct config_version *v = &s->config.v[s->config.n++];
	memset(v, 0, sizeof(*v));
	v->version = number;
	v->at_ms = server_now_ms(s);
	snprintf(v->who, sizeof(v->who), "%s", who);
	snprintf(v->why, sizeof(v->why), "%s", why);
	v->config = cfg;
	v->changed = changed;
	v->later = later;
	json_t *doc = version_pack(v, true);
	store_batch_add_config(s->fill.batch, v->version, v->at_ms, v->who,
			       json_dumps(doc, JSON_COMPACT));
	json_decref(doc);
	s->st.seq_applied++; /* an answer that names it waits for its write */
	return v;
}

int config_apply(struct server *s, json_t *cfg, const char *who, const char *why, json_t **ret,
		 struct tk_error *err)
{
	*ret = NULL;
	struct config_version *last = version_latest(s);
	if (last && json_equal(cfg, last->config)) {
		*ret = version_pack(last, false);
		json_object_set_new(*ret, "unchanged", json_true());
		json_decref(cfg);
		return 0;
	}
	struct sched_config *next = xmalloc(sizeof(*next));
	int r = config_parse(s, cfg, next, err);
	struct strbuf why_not;
	strbuf_init(&why_not);
	if (r == 0 && (r = state_config_check(&s->st, next, &why_not)) < 0)
		tk_errorf(err, r, "%s", why_not.buf);
	strbuf_release(&why_not);
	if (r < 0) {
		free(next);
		json_decref(cfg);
		return r;
	}
	json_t *later = keep_start_only(s, last ? last->config : NULL, cfg, next);
	take(s, next);
	free(next);
	struct config_version *v =
		version_add(s, cfg, who, why, keys_changed(last ? last->config : NULL, cfg), later);
	file_write(s, v->config, v->version);
	log_info("configuration version %lld by %s (%s)", (long long)v->version, who, why);
	*ret = version_pack(v, false);
	return 0;
}

/* ---- a start: the store's versions and the file, put together ------------------- */

static int load_row(void *ctx, const char *key, const char *doc, size_t len)
{
	struct server *s = ctx;
	json_t *o = json_loadb(doc, len, 0, NULL);
	json_t *cfg = json_object_get(o, "config");
	int64_t version = 0;
	if (!json_is_object(cfg) || tk_parse_int64(key, 1, INT64_MAX, &version) < 0) {
		log_err("configuration version %s does not decode; it is left out", key);
		json_decref(o);
		return 0;
	}
	xgrow(&s->config.v, &s->config.alloc, s->config.n + 1, sizeof(*s->config.v));
	struct config_version *v = &s->config.v[s->config.n++];
	memset(v, 0, sizeof(*v));
	v->version = version;
	v->at_ms = json_integer_value(json_object_get(o, "at_ms"));
	const char *who = json_string_value(json_object_get(o, "who")),
		   *why = json_string_value(json_object_get(o, "why"));
	snprintf(v->who, sizeof(v->who), "%s", who ? who : "");
	snprintf(v->why, sizeof(v->why), "%s", why ? why : "");
	v->config = json_incref(cfg);
	v->changed = json_incref(json_object_get(o, "changed"));
	v->later = json_incref(json_object_get(o, "later"));
	if (!v->changed)
		v->changed = json_array();
	if (!v->later)
		v->later = json_array();
	json_decref(o);
	return 0;
}

static int config_start_versions(struct server *s, struct tk_error *err);

int config_start(struct server *s, struct tk_error *err)
{
	int r = config_start_versions(s, err);
	if (r == 0)
		s->config.at_start = json_incref(version_latest(s)->config);
	return r;
}

static int config_start_versions(struct server *s, struct tk_error *err)
{
	config_release(s);
	int r = store_load_config(s->store, load_row, s, err);
	json_t *file = NULL;
	if (r < 0 || (r = file_read(s, &file, err)) < 0)
		return r;
	struct config_version *last = version_latest(s);
	if (!last) {
		/* the first: what the server started with */
		json_t *cfg = file ? file : json_object();
		struct config_version *v =
			version_add(s, cfg, "tenk",
				    file ? "the configuration at the first start (config.json)"
					 : "the built-in settings (no config.json)",
				    keys_changed(NULL, cfg), json_array());
		if (file)
			side_write(s, v->version);
		return 0;
	}
	if (file && json_equal(file, last->config)) {
		json_decref(file);
		side_write(s, last->version);
		return 0;
	}
	/* the file as the server left it, or as an older version: a copy the
	 * newest version left behind */
	int64_t side = side_read(s);
	const struct config_version *was = side ? version_find(s, side) : NULL;
	bool stale = !file || (was && json_equal(file, was->config));
	for (size_t i = 0; !stale && !side && i < s->config.n; i++)
		stale = json_equal(file, s->config.v[i].config);
	if (!stale) {
		/* edited by hand while no server ran: the server started with it */
		version_add(s, file, "config.json", "the file, edited; read at a start",
			    keys_changed(last->config, file), json_array());
		side_write(s, version_latest(s)->version);
		return 0;
	}
	json_decref(file);
	struct sched_config *next = xmalloc(sizeof(*next));
	r = config_parse(s, last->config, next, err);
	if (r == 0) {
		log_info("configuration: version %lld (by %s) over %s, which %s",
			 (long long)last->version, last->who,
			 s->cfg.config_path ? s->cfg.config_path : "DATA/config.json",
			 file ? "held an older version" : "is missing");
		take(s, next); /* (nothing of it waits for a start: this is one) */
		s->st.fence.power = next->npower_fence > 0;
		s->st.fence.power_after_ms = next->power_fence_after_s * 1000;
		file_write(s, last->config, last->version);
	} else {
		r = tk_errorf(err, r, "configuration version %lld: %s", (long long)last->version,
			      err->text);
	}
	free(next);
	return r;
}

/* ---- SIGHUP: the file, read again ------------------------------------------------ */

void config_reload(struct server *s)
{
	char buf[4096];
	const char *path = config_file_path(s, buf, sizeof(buf));
	if (s->role.standby) {
		log_info("SIGHUP: a standby takes the active server's configuration at its "
			 "takeover; send it to the active one");
		return;
	}
	json_t *file = NULL, *ans = NULL;
	struct tk_error err;
	int r = file_read(s, &file, &err);
	if (r == 0 && !file)
		r = tk_errorf(&err, -ENOENT, "%s is missing", path);
	if (r == 0)
		r = config_apply(s, file, "SIGHUP", "the file, reloaded", &ans, &err);
	char result[sizeof(err.text)];
	if (r < 0) {
		log_err("SIGHUP: %s; nothing changed, version %lld stands", err.text,
			(long long)(version_latest(s) ? version_latest(s)->version : 0));
		snprintf(result, sizeof(result), "%s", err.text);
	} else if (json_is_true(json_object_get(ans, "unchanged"))) {
		log_info("SIGHUP: %s holds version %lld: nothing to change", path,
			 (long long)json_integer_value(json_object_get(ans, "version")));
		snprintf(result, sizeof(result), "unchanged");
	} else {
		snprintf(result, sizeof(result), "version %lld",
			 (long long)json_integer_value(json_object_get(ans, "version")));
	}
	audit_note(s, "SIGHUP", "local", "SIGHUP", path, r < 0 ? 400 : 200, result);
	json_decref(ans);
}

void config_release(struct server *s)
{
	for (size_t i = 0; i < s->config.n; i++) {
		json_decref(s->config.v[i].config);
		json_decref(s->config.v[i].changed);
		json_decref(s->config.v[i].later);
	}
	free(s->config.v);
	json_decref(s->config.at_start);
	memset(&s->config, 0, sizeof(s->config));
}

/* ---- the API ------------------------------------------------------------------- */

static void reply_refused(struct request *r, int code, const struct tk_error *err)
{
	const char *reason = code == -EBUSY ? "in_use" : "invalid";
	reply_error_with(r, code == -EBUSY ? 409 : 400, json_pack("{s:s}", "reason", reason), "%s",
			 err->text);
}

static const char *why_of(json_t *body, const char *dflt)
{
	const char *why = json_string_value(json_object_get(body, "why"));
	return why && *why ? why : dflt;
}

/* GET /v1/config[?version=N] */
void config_h_show(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	const char *arg = request_arg(r, "version");
	int64_t want = 0;
	if (arg && tk_parse_int64(arg, 1, INT64_MAX, &want) < 0) {
		reply_error(r, 400,
			    "version: a version's number (tenk config history), got \"%.32s\"",
			    arg);
		return;
	}
	const struct config_version *v = want ? version_find(s, want) : version_latest(s);
	if (!v) {
		reply_error(r, 404,
			    "no configuration version %lld (tenk config history lists them)",
			    (long long)want);
		return;
	}
	json_t *o = version_pack(v, true);
	char buf[4096];
	json_object_set_new(o, "path", json_string(config_file_path(s, buf, sizeof(buf))));
	json_object_set_new(o, "latest", json_integer((json_int_t)version_latest(s)->version));
	reply_json(r, 200, o);
}

/* GET /v1/config/history */
void config_h_history(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	json_t *arr = json_array();
	for (size_t i = 0; i < s->config.n; i++)
		json_array_append_new(arr, version_pack(&s->config.v[i], false));
	reply_json(r, 200, json_pack("{s:o}", "versions", arr));
}

static void reply_applied(struct request *r, int code, json_t *ans, const struct tk_error *err)
{
	if (code < 0)
		reply_refused(r, code, err);
	else
		reply_json(r, 200, ans);
}

/* PUT /v1/config {"config": {...}, "why": "..."} */
void config_h_apply(struct request *r, const char *param, json_t *body)
{
	json_t *cfg = json_object_get(body, "config");
	if (!json_is_object(cfg)) {
		reply_error(r, 400, "config: the configuration, a JSON object (config.json's)");
		return;
	}
	json_t *ans = NULL;
	struct tk_error err;
	int code = config_apply(r->s, json_deep_copy(cfg), r->user, why_of(body, "applied"), &ans,
				&err);
	reply_applied(r, code, ans, &err);
}

/* Sets (value not NULL) or removes the value at a dotted path of o. */
static int path_set(json_t *o, const char *path, json_t *value, struct tk_error *err)
{
	_cleanup_free_ char *copy = xstrdup(path);
	char *save = NULL, *part = strtok_r(copy, ".", &save);
	if (!part || path[0] == '.' || path[strlen(path) - 1] == '.' || strstr(path, ".."))
		return tk_errorf(err, -EINVAL,
				 "\"%s\": a key, or keys joined by '.' "
				 "(gpu_health.temp_c)",
				 path);
	for (char *next; (next = strtok_r(NULL, ".", &save)); part = next) {
		json_t *in = json_object_get(o, part);
		if (!in && !value)
			return 0;
		if (in && !json_is_object(in))
			return tk_errorf(err, -EINVAL, "\"%s\": \"%s\" is not an object", path,
					 part);
		if (!in) {
			in = json_object();
			json_object_set_new(o, part, in);
		}
		o = in;
	}
	if (value)
		json_object_set(o, part, value);
	else
		json_object_del(o, part);
	return 0;
}

/* PATCH /v1/config {"set": {"a.b": value}, "unset": ["c"], "why": "..."} */
void config_h_change(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	json_t *set = json_object_get(body, "set"), *unset = json_object_get(body, "unset");
	if ((set && !json_is_object(set)) || (unset && !json_is_array(unset)) ||
	    (!json_object_size(set) && !json_array_size(unset))) {
		reply_error(r, 400,
			    "set: an object of key paths and values, unset: an array of key paths; "
			    "give one or both");
		return;
	}
	json_t *cfg = json_deep_copy(version_latest(s)->config);
	struct tk_error err;
	const char *k;
	json_t *v;
	size_t i;
	int code = 0;
	json_object_foreach (set, k, v)
		if (code == 0)
			code = path_set(cfg, k, v, &err);
	json_array_foreach (unset, i, v) {
		if (code == 0 && !json_is_string(v))
			code = tk_errorf(&err, -EINVAL, "unset: key paths are strings");
		if (code == 0)
			code = path_set(cfg, json_string_value(v), NULL, &err);
	}
	if (code < 0) {
		json_decref(cfg);
		reply_refused(r, code, &err);
		return;
	}
	struct strbuf why;
	strbuf_init(&why);
	json_object_foreach (set, k, v)
		strbuf_addf(&why, "%sset %s", why.len ? ", " : "", k);
	json_array_foreach (unset, i, v)
		strbuf_addf(&why, "%sunset %s", why.len ? ", " : "", json_string_value(v));
	json_t *ans = NULL;
	code = config_apply(s, cfg, r->user, why_of(body, why.buf), &ans, &err);
	strbuf_release(&why);
	reply_applied(r, code, ans, &err);
}

/* POST /v1/config/rollback {"version": N} or {"at_ms": T}: the version of
 * that number, or the one in force at T, as a new version. */
void config_h_rollback(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	json_t *ver = json_object_get(body, "version"), *at = json_object_get(body, "at_ms");
	if (!json_is_integer(ver) == !json_is_integer(at)) {
		reply_error(r, 400,
			    "version (a number from tenk config history) or at_ms (a time): "
			    "give one");
		return;
	}
	const struct config_version *to = NULL;
	if (ver) {
		to = version_find(s, json_integer_value(ver));
		if (!to) {
			reply_error(
				r, 404,
				"no configuration version %lld (tenk config history lists them)",
				(long long)json_integer_value(ver));
			return;
		}
	} else {
		for (size_t i = 0; i < s->config.n; i++)
			if (s->config.v[i].at_ms <= json_integer_value(at))
				to = &s->config.v[i];
		if (!to) {
			char when[32];
			time_t t = (time_t)(s->config.v[0].at_ms / 1000);
			struct tm tm;
			gmtime_r(&t, &tm);
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
			reply_error(r, 404,
				    "no configuration was in force then: the first, version %lld, "
				    "is of %s",
				    (long long)s->config.v[0].version, when);
			return;
		}
	}
	const char *said = why_of(body, NULL);
	char why[CONFIG_WHY_MAX];
	snprintf(why, sizeof(why), "rollback to version %lld%s%s", (long long)to->version,
		 said ? ": " : "", said ? said : "");
	json_t *ans = NULL;
	struct tk_error err;
	int code = config_apply(s, json_deep_copy(to->config), r->user, why, &ans, &err);
	reply_applied(r, code, ans, &err);
}
