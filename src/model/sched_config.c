/*
 * Scheduling configuration: priority classes and queues, their JSON form and
 * validation. The server keeps them; sched receives them in each snapshot.
 */
#include "internal.h"
#include "wire.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void sched_config_default(struct sched_config *c)
{
	memset(c, 0, sizeof(*c));
	c->classes[0] = (struct class_spec){.name = "prod", .priority = 100, .may_preempt = true};
	/* services' replicas (tenk serve): above training, and they take back
	 * what preemptible training borrowed of them */
	c->classes[1] = (struct class_spec){.name = "service", .priority = 80, .may_preempt = true};
	c->classes[2] = (struct class_spec){.name = "normal", .priority = 50};
	c->classes[3] = (struct class_spec){.name = "batch", .priority = 10, .preemptible = true};
	c->nclasses = 4;
	c->default_class = 2;
	c->half_life_s = 7 * 86400;
	c->max_pending_per_user = 10000;
	c->max_pending_mib_per_user = 256;
	c->submit_rate_per_user = 50;
	c->submit_burst_per_user = 500;
	c->keep_jobs_s = 90 * 86400;
	c->stall_min_s = 300;
	c->lemon_within_s = 86400;
	sched_config_gpu_default(&c->gpu_health);
	c->keep_accounting_s = 0;
	c->keep_audit_s = 365 * 86400;
	c->checkpoint_keep = 2;
	c->resv_patience_s = -1;
	c->max_starts_per_pass = SCHED_CONFIG_MAX_STARTS;
	c->default_pool = -1;
	c->maint_lookahead_s = 86400;
	c->idle_power_after_s = 600;
	c->power_fence_timeout_s = 60;
	c->power_fence_heartbeat_s = 1;
	static const char *const levels[] = {"dc", "row", "rack", "pdu"};
	for (size_t i = 0; i < ARRAY_SIZE(levels); i++)
		snprintf(c->domain_levels[i], MODEL_NAME_MAX, "%s", levels[i]);
	c->ndomain_levels = (int)ARRAY_SIZE(levels);
}

int sched_config_domain_rule(const struct sched_config *c, const char *text, int *max)
{
	char level[MODEL_NAME_MAX];
	if (!text || job_spread_parse(text, level, sizeof(level), max, NULL) < 0)
		return -1;
	return sched_config_domain_level(c, level, strlen(level));
}

int sched_config_domain_level(const struct sched_config *c, const char *name, size_t n)
{
	for (int i = 0; i < c->ndomain_levels; i++)
		if (strlen(c->domain_levels[i]) == n && strncmp(c->domain_levels[i], name, n) == 0)
			return i + 1;
	return -1;
}

void sched_config_gpu_default(struct gpu_limits *g)
{
	*g = (struct gpu_limits){.hold_ms = 300000,
				 .temp_c = 85,
				 .busy_pct = 80,
				 .power_pct = 40,
				 .throttle = true,
				 .pcie = true,
				 .rows = 1};
}

static const char *const gpu_checks[] = {
	[GPU_CHECK_TEMPERATURE] = "temperature",
	[GPU_CHECK_THROTTLE] = "throttle",
	[GPU_CHECK_POWER] = "power",
	[GPU_CHECK_PCIE] = "pcie",
	[GPU_CHECK_ROWS] = "remapped_rows",
};

const char *gpu_check_name(enum gpu_check c)
{
	return (unsigned)c < GPU_CHECK_MAX ? gpu_checks[c] : "?";
}

int gpu_check_parse(const char *s, enum gpu_check *ret)
{
	for (int c = 0; c < GPU_CHECK_MAX; c++)
		if (s && strcmp(s, gpu_checks[c]) == 0) {
			*ret = (enum gpu_check)c;
			return 0;
		}
	return -EINVAL;
}

int sched_config_class(const struct sched_config *c, const char *name)
{
	for (int i = 0; i < c->nclasses; i++)
		if (strcmp(c->classes[i].name, name) == 0)
			return i;
	return -1;
}

int class_spec_levels(const struct class_spec *c)
{
	return c->las ? c->las_nlimits + 1 : 1;
}

json_t *class_spec_pack(const struct class_spec *c)
{
	json_t *j = json_pack("{s:s, s:i, s:b, s:b, s:o, s:s}", "name", c->name, "priority",
			      c->priority, "may_preempt", c->may_preempt, "preemptible",
			      c->preemptible, "allow", allow_list_pack(c->allow, c->nallow),
			      "order", c->las ? "las" : "fifo");
	if (c->las) {
		json_t *l = json_array();
		for (int i = 0; i < c->las_nlimits; i++)
			json_array_append_new(l, json_real(c->las_limit_gpu_h[i]));
		json_object_set_new(j, "las_limits_gpu_h", l);
		json_object_set_new(j, "las_max_stretch", json_real(c->las_max_stretch));
		json_object_set_new(j, "las_min_run_s", json_integer(c->las_min_run_s));
		json_object_set_new(j, "las_max_loss_s", json_integer(c->las_max_loss_s));
		json_object_set_new(j, "las_index",
				    json_string(c->las_gittins ? "gittins" : "levels"));
	}
	return j;
}

/* A class's "order", "las_limits_gpu_h", "las_max_stretch", "las_min_run_s",
 * "las_max_loss_s" and "las_index". */
static int class_order_unpack(json_t *cj, struct class_spec *cs, struct tk_error *err)
{
	char order[16] = "fifo";
	int r = mj_strbuf(cj, "order", false, true, order, sizeof(order), err);
	if (r < 0)
		return r;
	if (strcmp(order, "las") != 0 && strcmp(order, "fifo") != 0)
		return tk_errorf(err, -EINVAL, "order: must be \"fifo\" or \"las\", got \"%s\"",
				 order);
	cs->las = strcmp(order, "las") == 0;
	json_t *limits = json_object_get(cj, "las_limits_gpu_h");
	const char *las_only = limits					? "las_limits_gpu_h"
			       : json_object_get(cj, "las_max_stretch") ? "las_max_stretch"
			       : json_object_get(cj, "las_promote")	? "las_promote"
			       : json_object_get(cj, "las_min_run_s")	? "las_min_run_s"
			       : json_object_get(cj, "las_max_loss_s")	? "las_max_loss_s"
			       : json_object_get(cj, "las_index")	? "las_index"
									: NULL;
	if (!cs->las && las_only)
		return tk_errorf(err, -EINVAL, "%s: only for a class with \"order\": \"las\"",
				 las_only);
	if (!cs->las)
		return 0;
	static const double def[] = MODEL_LAS_DEFAULT_LIMITS;
	cs->las_nlimits = MODEL_LAS_DEFAULT_NLIMITS;
	memcpy(cs->las_limit_gpu_h, def, sizeof(def));
	if (limits) {
		if (!json_is_array(limits) || json_array_size(limits) < 1 ||
		    json_array_size(limits) > MODEL_LAS_MAX_LEVELS - 1)
			return tk_errorf(err, -EINVAL,
					 "las_limits_gpu_h: must be an array of 1 to %d numbers",
					 MODEL_LAS_MAX_LEVELS - 1);
		size_t i;
		json_t *v;
		json_array_foreach (limits, i, v) {
			double x = json_is_number(v) ? json_number_value(v) : -1;
			if (!(x > 0 && x <= 1e9))
				return tk_errorf(err, -EINVAL,
						 "las_limits_gpu_h[%zu]: must be a number of "
						 "accelerator-hours above 0",
						 i);
			if (i && x <= cs->las_limit_gpu_h[i - 1])
				return tk_errorf(err, -EINVAL,
						 "las_limits_gpu_h[%zu]: must be above the limit "
						 "before it (%g), got %g",
						 i, cs->las_limit_gpu_h[i - 1], x);
			cs->las_limit_gpu_h[i] = x;
		}
		cs->las_nlimits = (int)json_array_size(limits);
	}
	/* "las_promote" is its older name (then of its last attempt's run) */
	const char *stretch =
		json_object_get(cj, "las_promote") ? "las_promote" : "las_max_stretch";
	if (json_object_get(cj, "las_promote") && json_object_get(cj, "las_max_stretch"))
		return tk_errorf(err, -EINVAL,
				 "las_promote: the older name of las_max_stretch; give only one");
	r = mj_num(cj, stretch, false, 0, 1e6, MODEL_LAS_DEFAULT_MAX_STRETCH, &cs->las_max_stretch,
		   err);
	if (r < 0)
		return r;
	r = mj_int(cj, "las_min_run_s", false, 0, 30LL * 86400, MODEL_LAS_DEFAULT_MIN_RUN_S,
		   &cs->las_min_run_s, err);
	if (r < 0)
		return r;
	r = mj_int(cj, "las_max_loss_s", false, -1, 30LL * 86400, MODEL_LAS_DEFAULT_MAX_LOSS_S,
		   &cs->las_max_loss_s, err);
	if (r < 0)
		return r;
	char index[16] = "";
	r = mj_strbuf(cj, "las_index", false, true, index, sizeof(index), err);
	if (r < 0)
		return r;
	if (*index && strcmp(index, "gittins") != 0 && strcmp(index, "levels") != 0)
		return tk_errorf(err, -EINVAL,
				 "las_index: must be \"gittins\" or \"levels\", got \"%s\"", index);
	cs->las_gittins = *index ? strcmp(index, "gittins") == 0 : MODEL_LAS_DEFAULT_GITTINS;
	return 0;
}

/* ---- allow lists ----------------------------------------------------------------- */

bool model_allow_entry_valid(const char *s)
{
	if (strncmp(s, "group:", 6) == 0)
		return model_unix_user_valid(s + 6);
	if (strncmp(s, "role:", 5) == 0)
		return model_name_valid(s + 5);
	return model_name_valid(s);
}

int allow_list_unpack(json_t *obj, const char *key, char (*out)[MODEL_NAME_MAX], int max, int *n,
		      struct tk_error *err)
{
	json_t *a = json_object_get(obj, key);
	if (!a)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > (size_t)max)
		return tk_errorf(err, -EINVAL,
				 "%s: must be an array of at most %d entries (user names, "
				 "group:NAME, role:NAME)",
				 key, max);
	size_t i;
	json_t *v;
	json_array_foreach (a, i, v) {
		const char *e = json_string_value(v);
		if (!e || strlen(e) >= MODEL_NAME_MAX || !model_allow_entry_valid(e))
			return tk_errorf(err, -EINVAL,
					 "%s[%zu]: must be a user name, group:UNIXGROUP or "
					 "role:NAME",
					 key, i);
	}
	json_array_foreach (a, i, v)
		snprintf(out[i], MODEL_NAME_MAX, "%s", json_string_value(v));
	*n = (int)json_array_size(a);
	return 0;
}

json_t *allow_list_pack(const char (*list)[MODEL_NAME_MAX], int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_string(list[i]));
	return a;
}

/* obj[key], an array of at most max strings shorter than size, into
 * out[i * size]; absent: none. */
static int fixed_list(json_t *obj, const char *key, char *out, size_t size, int max, int *n,
		      struct tk_error *err)
{
	*n = 0;
	json_t *a = json_object_get(obj, key);
	if (!a)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > (size_t)max)
		return tk_errorf(err, -EINVAL, "%s: must be an array of at most %d strings", key,
				 max);
	size_t i;
	json_t *v;
	json_array_foreach (a, i, v) {
		char what[64];
		snprintf(what, sizeof(what), "%s[%zu]", key, i);
		int r = mj_check_string_value(v, what, size - 1, true, err);
		if (r < 0)
			return r;
		snprintf(out + i * size, size, "%s", json_string_value(v));
	}
	*n = (int)json_array_size(a);
	return 0;
}

/* "power_fence": its command, silence and timeout into c. */
static int power_fence_parse(json_t *pf, struct sched_config *c, struct tk_error *err)
{
	static const char *const keys[] = {"command", "after", "timeout", "heartbeat", NULL};
	if (!pf)
		return 0;
	const char *eg = "such as {\"command\": [\"/usr/local/sbin/fence-node\", \"{node}\"], "
			 "\"after\": \"8s\"}";
	if (!json_is_object(pf))
		return tk_errorf(err, -EINVAL, "power_fence: must be an object %s", eg);
	char after[32] = "", timeout[32] = "", beat[32] = "";
	int r;
	if ((r = mj_check_keys(pf, "power_fence", keys, err)) < 0 ||
	    (r = fixed_list(pf, "command", c->power_fence[0], MODEL_FENCE_ARG_MAX,
			    MODEL_MAX_FENCE_ARGS, &c->npower_fence, err)) < 0 ||
	    (r = mj_strbuf(pf, "after", false, true, after, sizeof(after), err)) < 0 ||
	    (r = mj_strbuf(pf, "timeout", false, true, timeout, sizeof(timeout), err)) < 0 ||
	    (r = mj_strbuf(pf, "heartbeat", false, true, beat, sizeof(beat), err)) < 0) {
		mj_prefix(err, "power_fence");
		return r;
	}
	if (!c->npower_fence || !c->power_fence[0][0])
		return tk_errorf(err, -EINVAL,
				 "power_fence.command: must name the program that powers a node "
				 "off, %s",
				 eg);
	if (c->power_fence[0][0] != '/')
		return tk_errorf(err, -EINVAL,
				 "power_fence.command: \"%s\" is not an absolute path (the server "
				 "runs it without a shell or a search path)",
				 c->power_fence[0]);
	const char *words[] = {after, timeout, beat};
	const char *names[] = {"after", "timeout", "heartbeat"}, *eg_of[] = {"8s", "1m", "1s"};
	int64_t *secs[] = {&c->power_fence_after_s, &c->power_fence_timeout_s,
			   &c->power_fence_heartbeat_s};
	for (int k = 0; k < 3; k++) {
		if (!words[k][0])
			continue;
		if (tk_parse_duration(words[k], secs[k]) < 0 || *secs[k] < 1 || *secs[k] > 3600)
			return tk_errorf(
				err, -EINVAL,
				"power_fence.%s: expected a duration from 1s to 1h such as "
				"\"%s\", got \"%s\"",
				names[k], eg_of[k], words[k]);
	}
	return 0;
}

int sched_config_placement_parse(const char *name, bool *ret_fastest)
{
	if (strcmp(name, "dense") != 0 && strcmp(name, "fastest") != 0)
		return -EINVAL;
	*ret_fastest = strcmp(name, "fastest") == 0;
	return 0;
}

/* "require_limits": true, false, or a list of limits by name. */
static int require_limits_parse(json_t *v, unsigned *ret, struct tk_error *err)
{
	static const char *const want =
		"expected true (every limit), false, or a list of \"memory\", \"cpus\", "
		"\"processes\", \"devices\"";
	*ret = 0;
	if (!v || json_is_false(v))
		return 0;
	if (json_is_true(v)) {
		*ret = NODE_LIMIT_ALL;
		return 0;
	}
	if (!json_is_array(v))
		return tk_errorf(err, -EINVAL, "require_limits: %s", want);
	size_t i;
	json_t *x;
	json_array_foreach (v, i, x) {
		unsigned bit = 0;
		for (unsigned b = 1; b <= NODE_LIMIT_DEVICES && json_is_string(x); b <<= 1)
			if (strcmp(json_string_value(x), node_limit_name(b)) == 0)
				bit = b;
		if (!bit)
			return tk_errorf(err, -EINVAL, "require_limits[%zu]: %s", i, want);
		*ret |= bit;
	}
	return 0;
}

/* ---- pools ------------------------------------------------------------------------ */

int sched_config_pool(const struct sched_config *c, const char *name, size_t n)
{
	for (int i = 0; i < c->npools; i++)
		if (strlen(c->pools[i].name) == n && strncmp(c->pools[i].name, name, n) == 0)
			return i;
	return -1;
}

uint64_t sched_config_pool_node(const struct sched_config *c, const char *labels)
{
	uint64_t m = 0;
	for (int i = 0; i < c->npools; i++)
		if (job_constraint_match(c->pools[i].selector, labels))
			m |= 1ULL << i;
	return m || !c->npools ? m : MODEL_POOL_NONE;
}

/* Does pool p take r? Else why not, into why (if still empty). */
static bool pool_takes(const struct pool_spec *p, const struct job_request *r, char *why,
		       size_t whyn)
{
	int64_t milli = (int64_t)r->nodes * r->tasks_per_node * r->gpu_milli;
	char a[32], b[32];
	if (p->min_gpus && milli < p->min_gpus * MODEL_MILLI) {
		if (!why[0])
			snprintf(why, whyn,
				 "pool %s takes jobs of %lld accelerators or more; this one asks "
				 "for %g",
				 p->name, (long long)p->min_gpus, (double)milli / MODEL_MILLI);
		return false;
	}
	if (p->max_time_s && (!r->time_limit_s || r->time_limit_s > p->max_time_s)) {
		tk_format_duration(p->max_time_s, a, sizeof(a));
		tk_format_duration(r->time_limit_s, b, sizeof(b));
		if (!why[0])
			snprintf(why, whyn,
				 "pool %s takes time limits of %s at most; this job's is %s",
				 p->name, a, r->time_limit_s ? b : "none");
		return false;
	}
	return true;
}

uint64_t sched_config_pool_job(const struct sched_config *c, const struct job_request *r, char *why,
			       size_t whyn)
{
	char buf[256] = "";
	if (whyn)
		why[0] = '\0';
	if (!c->npools)
		return 0;
	uint64_t m = r->pool ? 0 : MODEL_POOL_NONE;
	for (int i = 0; i < c->npools; i++) {
		const struct pool_spec *p = &c->pools[i];
		bool named = r->pool ? model_names_has(r->pool, p->name, strlen(p->name))
				     : p->nallow == 0;
		if (named && pool_takes(p, r, buf, sizeof(buf)))
			m |= 1ULL << i;
	}
	if (!m && !buf[0])
		snprintf(buf, sizeof(buf), "no pool of this cluster is named %s", r->pool);
	if (!m && whyn)
		snprintf(why, whyn, "%s", buf);
	return m ? m : MODEL_POOL_NOWHERE;
}

json_t *sched_config_pool_pack(const struct sched_config *c, int i)
{
	const struct pool_spec *p = &c->pools[i];
	return json_pack("{s:s, s:s, s:o, s:I, s:I, s:b}", "name", p->name, "selector", p->selector,
			 "allow", allow_list_pack(p->allow, p->nallow), "max_time_s",
			 (json_int_t)p->max_time_s, "min_gpus", (json_int_t)p->min_gpus, "default",
			 i == c->default_pool);
}

/* A pool's selector: a constraint, its errors named as the selector's. */
static int selector_check(const char *sel, struct tk_error *err)
{
	struct tk_error e;
	int r = job_constraint_check(sel, &e);
	if (r < 0) {
		const char *t = strncmp(e.text, "constraint: ", 12) == 0 ? e.text + 12 : e.text;
		return tk_errorf(err, r, "selector: %s", t);
	}
	return 0;
}

/* "pools" and "default_pool" into next. */
static int pools_unpack(json_t *root, struct sched_config *next, struct tk_error *err)
{
	static const char *const pkeys[] = {"selector", "allow", "max_time", "min_gpus", NULL};
	json_t *pools = json_object_get(root, "pools");
	char def[MODEL_NAME_MAX] = "";
	int r = mj_strbuf(root, "default_pool", false, true, def, sizeof(def), err);
	if (r < 0)
		return r;
	if (pools && (!json_is_object(pools) || json_object_size(pools) > MODEL_MAX_POOLS))
		return tk_errorf(err, -EINVAL,
				 "pools: must be an object of at most %d pools, each such as "
				 "{\"selector\": \"tier=top\", \"allow\": [\"group:llm\"], "
				 "\"max_time\": \"14d\", \"min_gpus\": 64}",
				 MODEL_MAX_POOLS);
	const char *name;
	json_t *pj;
	json_object_foreach (pools, name, pj) {
		struct pool_spec *p = &next->pools[next->npools];
		char dur[32] = "";
		memset(p, 0, sizeof(*p));
		if (!model_name_valid(name))
			return tk_errorf(err, -EINVAL,
					 "pools: \"%.64s\" is not a valid pool name (letters, "
					 "digits, '.', '_', '-')",
					 name);
		snprintf(p->name, sizeof(p->name), "%s", name);
		if (!json_is_object(pj))
			r = tk_errorf(err, -EINVAL,
				      "must be an object such as {\"selector\": \"tier=top\"}");
		else if ((r = mj_check_keys(pj, NULL, pkeys, err)) >= 0 &&
			 (r = mj_strbuf(pj, "selector", true, true, p->selector,
					sizeof(p->selector), err)) >= 0 &&
			 (r = selector_check(p->selector, err)) >= 0 &&
			 (r = allow_list_unpack(pj, "allow", p->allow, MODEL_MAX_POOL_ALLOW,
						&p->nallow, err)) >= 0 &&
			 (r = mj_strbuf(pj, "max_time", false, true, dur, sizeof(dur), err)) >= 0 &&
			 (r = mj_int(pj, "min_gpus", false, 0, 1000000, 0, &p->min_gpus, err)) >=
				 0 &&
			 dur[0] &&
			 (tk_parse_duration(dur, &p->max_time_s) < 0 || p->max_time_s < 1))
			r = tk_errorf(err, -EINVAL,
				      "max_time: expected a duration such as \"14d\", got \"%s\"",
				      dur);
		if (r < 0) {
			mj_prefix(err, "pools.%s", name);
			return r;
		}
		next->npools++;
	}
	next->default_pool = -1;
	if (def[0] && (next->default_pool = sched_config_pool(next, def, strlen(def))) < 0)
		return tk_errorf(err, -EINVAL, "default_pool: no pool \"%.64s\" in \"pools\"", def);
	return 0;
}

int sched_config_load_json(struct sched_config *c, const char *text, struct tk_error *err)
{
	json_error_t jerr;
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return tk_errorf(err, -EINVAL, "line %d column %d: %s", jerr.line, jerr.column,
				 jerr.text);
	static const char *const keys[] = {"classes",
					   "default_class",
					   "fair_share_half_life_s",
					   "require_validation",
					   "require_limits",
					   "validation_args",
					   "allow_root_jobs",
					   "admin_unix_user",
					   "require_image",
					   "default_image",
					   "allowed_images",
					   "default_mounts",
					   "max_pending_per_user",
					   "max_pending_mib_per_user",
					   "submit_rate_per_user",
					   "submit_burst_per_user",
					   "keep_jobs",
					   "keep_accounting",
					   "keep_audit",
					   "max_starts_per_pass",
					   "checkpoint_store",
					   "checkpoint_keep",
					   "cpu_price_per_hour",
					   "mem_price_per_gib_hour",
					   "currency",
					   "reservation_patience_s",
					   "placement",
					   "store",
					   "stall_after",
					   "stall_min",
					   "lemon",
					   "gpu_health",
					   "spares",
					   "pools",
					   "default_pool",
					   "domain_levels",
					   "maint_lookahead",
					   "fair_share",
					   "power_fence",
					   "idle_power_after",
					   NULL};
	static const char *const ckeys[] = {"name",
					    "priority",
					    "may_preempt",
					    "preemptible",
					    "allow",
					    "order",
					    "las_limits_gpu_h",
					    "las_max_stretch",
					    "las_min_run_s",
					    "las_max_loss_s",
					    "las_index",
					    "las_promote",
					    NULL};
	struct sched_config next;
	sched_config_default(&next);
	int r;
	char def[MODEL_NAME_MAX] = "";
	int64_t hl;
	if ((r = mj_check_keys(root, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(root, "default_class", false, true, def, sizeof(def), err)) < 0 ||
	    (r = mj_int(root, "fair_share_half_life_s", false, 1, 10LL * 365 * 86400,
			next.half_life_s, &hl, err)) < 0 ||
	    (r = mj_bool(root, "require_validation", false, false, &next.require_validation, err)) <
		    0 ||
	    (r = require_limits_parse(json_object_get(root, "require_limits"), &next.require_limits,
				      err)) < 0 ||
	    (r = mj_bool(root, "allow_root_jobs", false, false, &next.allow_root_jobs, err)) < 0 ||
	    (r = mj_strbuf(root, "admin_unix_user", false, true, next.admin_unix_user,
			   sizeof(next.admin_unix_user), err)) < 0 ||
	    (r = mj_bool(root, "require_image", false, false, &next.require_image, err)) < 0 ||
	    (r = mj_strbuf(root, "default_image", false, true, next.default_image,
			   sizeof(next.default_image), err)) < 0 ||
	    (r = mj_int(root, "max_pending_per_user", false, 1, 100000000,
			next.max_pending_per_user, &next.max_pending_per_user, err)) < 0 ||
	    (r = mj_int(root, "max_pending_mib_per_user", false, 1, 1 << 20,
			next.max_pending_mib_per_user, &next.max_pending_mib_per_user, err)) < 0 ||
	    (r = mj_num(root, "submit_rate_per_user", false, 0, 1e6, next.submit_rate_per_user,
			&next.submit_rate_per_user, err)) < 0 ||
	    (r = mj_int(root, "submit_burst_per_user", false, 1, 100000000,
			next.submit_burst_per_user, &next.submit_burst_per_user, err)) < 0 ||
	    (r = mj_int(root, "max_starts_per_pass", false, 0, 1000000, SCHED_CONFIG_MAX_STARTS,
			&next.max_starts_per_pass, err)) < 0 ||
	    (r = fixed_list(root, "allowed_images", next.allowed_images[0], MODEL_IMAGE_MAX,
			    MODEL_MAX_ALLOWED_IMAGES, &next.nallowed_images, err)) < 0 ||
	    (r = fixed_list(root, "default_mounts", next.default_mounts[0], MODEL_DEFAULT_MOUNT_MAX,
			    MODEL_MAX_DEFAULT_MOUNTS, &next.ndefault_mounts, err)) < 0 ||
	    (r = mj_strbuf(root, "checkpoint_store", false, true, next.checkpoint_store,
			   sizeof(next.checkpoint_store), err)) < 0 ||
	    (r = mj_strbuf(root, "store", false, true, next.store, sizeof(next.store), err)) < 0 ||
	    (r = mj_int(root, "checkpoint_keep", false, 1, MODEL_MAX_CKPTS, next.checkpoint_keep,
			&next.checkpoint_keep, err)) < 0 ||
	    (r = mj_num(root, "cpu_price_per_hour", false, 0, 1e6, 0, &next.cpu_price_per_hour,
			err)) < 0 ||
	    (r = mj_num(root, "mem_price_per_gib_hour", false, 0, 1e6, 0,
			&next.mem_price_per_gib_hour, err)) < 0 ||
	    (r = mj_strbuf(root, "currency", false, true, next.currency, sizeof(next.currency),
			   err)) < 0 ||
	    (r = mj_int(root, "reservation_patience_s", false, 0, 365LL * 86400, -1,
			&next.resv_patience_s, err)) < 0)
		goto out;
	static const char *const keeps[] = {"keep_jobs", "keep_accounting", "keep_audit",
					    "maint_lookahead"};
	int64_t *keep_s[] = {&next.keep_jobs_s, &next.keep_accounting_s, &next.keep_audit_s,
			     &next.maint_lookahead_s};
	for (int k = 0; k < 4; k++) {
		char dur[32] = "";
		if ((r = mj_strbuf(root, keeps[k], false, true, dur, sizeof(dur), err)) < 0)
			goto out;
		if (!dur[0])
			continue;
		if (tk_parse_duration(dur, keep_s[k]) < 0 || *keep_s[k] < 0) {
			r = tk_errorf(err, -EINVAL,
				      "%s: expected a duration such as %s, got \"%s\"", keeps[k],
				      k < 3 ? "\"90d\" (\"0\": forever)"
					    : "\"24h\" (\"0\": only windows that have started)",
				      dur);
			goto out;
		}
	}
	json_t *lemon = json_object_get(root, "lemon");
	if (lemon) {
		static const char *const lkeys[] = {"failures", "within", NULL};
		char within[32] = "";
		if (!json_is_object(lemon)) {
			r = tk_errorf(
				err, -EINVAL,
				"lemon: must be an object such as {\"failures\": 3, \"within\": "
				"\"24h\"}");
			goto out;
		}
		if ((r = mj_check_keys(lemon, "lemon", lkeys, err)) < 0 ||
		    (r = mj_int(lemon, "failures", true, 0, 1000, 0, &next.lemon_failures, err)) <
			    0 ||
		    (r = mj_strbuf(lemon, "within", false, true, within, sizeof(within), err)) <
			    0) {
			mj_prefix(err, "lemon");
			goto out;
		}
		if (within[0] && (tk_parse_duration(within, &next.lemon_within_s) < 0 ||
				  next.lemon_within_s < 1)) {
			r = tk_errorf(
				err, -EINVAL,
				"lemon.within: expected a duration such as \"24h\", got \"%s\"",
				within);
			goto out;
		}
	}
	if ((r = power_fence_parse(json_object_get(root, "power_fence"), &next, err)) < 0)
		goto out;
	json_t *spares = json_object_get(root, "spares");
	if (spares &&
	    (!json_is_object(spares) || json_object_size(spares) > MODEL_MAX_SPARE_MODELS)) {
		r = tk_errorf(err, -EINVAL,
			      "spares: must be an object of at most %d accelerator models, each "
			      "with its number of spare nodes, such as {\"H100\": 4}",
			      MODEL_MAX_SPARE_MODELS);
		goto out;
	}
	const char *model;
	json_t *count;
	json_object_foreach (spares, model, count) {
		if (!json_is_integer(count) || json_integer_value(count) < 0 ||
		    json_integer_value(count) > MODEL_MAX_NODES || !*model ||
		    strlen(model) >= MODEL_NAME_MAX) {
			r = tk_errorf(
				err, -EINVAL,
				"spares.%.64s: must be a number of nodes from 0 to %d, for an "
				"accelerator model's name (tenk catalogue)",
				model, MODEL_MAX_NODES);
			goto out;
		}
		snprintf(next.spare_pool[next.nspare_pool].model, MODEL_NAME_MAX, "%s", model);
		next.spare_pool[next.nspare_pool++].nodes = (int)json_integer_value(count);
	}
	if ((r = pools_unpack(root, &next, err)) < 0)
		goto out;
	if (json_object_get(root, "domain_levels")) {
		int n = 0;
		if ((r = fixed_list(root, "domain_levels", next.domain_levels[0], MODEL_NAME_MAX,
				    MODEL_MAX_DOMAIN_LEVELS, &n, err)) < 0)
			goto out;
		next.ndomain_levels = n;
		if (!n) {
			r = tk_errorf(err, -EINVAL,
				      "domain_levels: name at least one level, such as [\"rack\"]");
			goto out;
		}
		for (int i = 0; i < n; i++)
			if (!model_name_valid(next.domain_levels[i]) ||
			    sched_config_domain_level(&next, next.domain_levels[i],
						      strlen(next.domain_levels[i])) != i + 1) {
				r = tk_errorf(err, -EINVAL,
					      "domain_levels[%d]: \"%s\" is not a level's name, or "
					      "is given twice",
					      i, next.domain_levels[i]);
				goto out;
			}
	}
	json_t *gpu = json_object_get(root, "gpu_health");
	if (gpu && !json_is_object(gpu)) {
		r = tk_errorf(err, -EINVAL,
			      "gpu_health: must be an object such as {\"temp_c\": 85, \"for\": "
			      "\"5m\"}");
		goto out;
	}
	if (gpu && (r = wire_gpu_limits_unpack(gpu, true, &next.gpu_health, err)) < 0) {
		mj_prefix(err, "gpu_health");
		goto out;
	}
	char idle[32] = "";
	if ((r = mj_strbuf(root, "idle_power_after", false, true, idle, sizeof(idle), err)) < 0)
		goto out;
	if (idle[0] && (tk_parse_duration(idle, &next.idle_power_after_s) < 0 ||
			next.idle_power_after_s < 0)) {
		r = tk_errorf(
			err, -EINVAL,
			"idle_power_after: expected a duration such as \"10m\" (\"0\": never), "
			"got \"%s\"",
			idle);
		goto out;
	}
	static const char *const stalls[] = {"stall_after", "stall_min"};
	int64_t *stall_s[] = {&next.stall_after_s, &next.stall_min_s};
	for (int k = 0; k < 2; k++) {
		char dur[32] = "";
		if ((r = mj_strbuf(root, stalls[k], false, true, dur, sizeof(dur), err)) < 0)
			goto out;
		if (!dur[0] || (k == 0 && strcmp(dur, "auto") == 0))
			continue;
		if (tk_parse_duration(dur, stall_s[k]) < 0 || *stall_s[k] < 1) {
			r = tk_errorf(err, -EINVAL,
				      "%s: expected a duration such as \"10m\"%s, got \"%s\"",
				      stalls[k], k == 0 ? " or \"auto\"" : "", dur);
			goto out;
		}
	}
	if (next.keep_accounting_s &&
	    (!next.keep_jobs_s || next.keep_accounting_s < next.keep_jobs_s)) {
		r = tk_errorf(err, -EINVAL,
			      "keep_accounting: must be at least keep_jobs (a job's accounting "
			      "records outlive its document), or 0 for forever");
		goto out;
	}
	char share[16] = "accelerators";
	if ((r = mj_strbuf(root, "fair_share", false, true, share, sizeof(share), err)) < 0)
		goto out;
	if (strcmp(share, "units") != 0 && strcmp(share, "accelerators") != 0) {
		r = tk_errorf(err, -EINVAL,
			      "fair_share: must be \"accelerators\" (each counts 1) or \"units\" "
			      "(each counts its model's weight), got \"%s\"",
			      share);
		goto out;
	}
	next.weighted_share = strcmp(share, "units") == 0;
	char placement[16] = "dense";
	if ((r = mj_strbuf(root, "placement", false, true, placement, sizeof(placement), err)) < 0)
		goto out;
	if (sched_config_placement_parse(placement, &next.placement_fastest) < 0) {
		r = tk_errorf(err, -EINVAL,
			      "placement: must be \"dense\" or \"fastest\", got \"%s\"", placement);
		goto out;
	}
	if (next.checkpoint_store[0] &&
	    (next.checkpoint_store[0] != '/' || strstr(next.checkpoint_store, "/../") ||
	     strlen(next.checkpoint_store) > 1024)) {
		r = tk_errorf(err, -EINVAL,
			      "checkpoint_store: must be an absolute path of at most 1024 bytes "
			      "without \"..\", got \"%.64s\"",
			      next.checkpoint_store);
		goto out;
	}
	for (int i = 0; i < next.nallowed_images; i++) {
		/* a pattern is a reference with stars */
		char probe[MODEL_IMAGE_MAX];
		snprintf(probe, sizeof(probe), "%s", next.allowed_images[i]);
		for (char *p = probe; *p; p++)
			if (*p == '*')
				*p = 'x';
		if (!model_image_valid(probe)) {
			r = tk_errorf(err, -EINVAL,
				      "allowed_images[%d]: \"%s\" is not an image reference "
				      "pattern (e.g. \"registry.example/ml/*\")",
				      i, next.allowed_images[i]);
			goto out;
		}
	}
	if (next.default_image[0]) {
		bool ok = model_image_valid(next.default_image) && next.nallowed_images == 0;
		for (int i = 0; i < next.nallowed_images && !ok; i++)
			ok = model_image_allowed(next.allowed_images[i], next.default_image);
		if (!ok) {
			r = tk_errorf(
				err, -EINVAL, "default_image: \"%s\" is %s", next.default_image,
				model_image_valid(next.default_image)
					? "not among allowed_images; allow it, or name another"
					: "not an image reference (e.g. \"registry.example/ml/"
					  "train:2\" or one with @sha256:...)");
			goto out;
		}
	}
	for (int i = 0; i < next.ndefault_mounts; i++) {
		struct mount_spec m;
		if ((r = model_mount_parse(next.default_mounts[i], true, &m, err)) < 0) {
			mj_prefix(err, "default_mounts[%d]", i);
			goto out;
		}
	}
	if (next.admin_unix_user[0] && !model_unix_user_valid(next.admin_unix_user)) {
		r = tk_errorf(err, -EINVAL, "admin_unix_user: \"%s\" is not a Unix account name",
			      next.admin_unix_user);
		goto out;
	}
	next.half_life_s = hl;
	json_t *vargs = json_object_get(root, "validation_args");
	if (vargs) {
		if (!json_is_array(vargs) || json_array_size(vargs) > MODEL_MAX_VALIDATION_ARGS) {
			r = tk_errorf(err, -EINVAL,
				      "validation_args: must be an array of at most %d "
				      "strings",
				      MODEL_MAX_VALIDATION_ARGS);
			goto out;
		}
		size_t i;
		json_t *a;
		json_array_foreach (vargs, i, a) {
			const char *t = json_string_value(a);
			if (!t || !*t || strlen(t) >= MODEL_NAME_MAX) {
				r = tk_errorf(err, -EINVAL,
					      "validation_args[%zu]: must be a string "
					      "of 1 to %d bytes (an option of tenk "
					      "validate, e.g. \"--quick\")",
					      i, MODEL_NAME_MAX - 1);
				goto out;
			}
			snprintf(next.validation_args[i], MODEL_NAME_MAX, "%s", t);
		}
		next.nvalidation_args = (int)json_array_size(vargs);
	}
	json_t *classes = json_object_get(root, "classes");
	if (classes) {
		if (!json_is_array(classes) || json_array_size(classes) < 1 ||
		    json_array_size(classes) > MODEL_MAX_CLASSES) {
			r = tk_errorf(err, -EINVAL, "classes: must be an array of 1 to %d classes",
				      MODEL_MAX_CLASSES);
			goto out;
		}
		next.nclasses = 0;
		size_t i;
		json_t *cj;
		json_array_foreach (classes, i, cj) {
			struct class_spec *cs = &next.classes[i];
			int64_t prio;
			if ((r = mj_check_keys(cj, NULL, ckeys, err)) < 0 ||
			    (r = mj_strbuf(cj, "name", true, true, cs->name, sizeof(cs->name),
					   err)) < 0 ||
			    (r = mj_int(cj, "priority", true, -1000000, 1000000, 0, &prio, err)) <
				    0 ||
			    (r = mj_bool(cj, "may_preempt", false, false, &cs->may_preempt, err)) <
				    0 ||
			    (r = mj_bool(cj, "preemptible", false, false, &cs->preemptible, err)) <
				    0 ||
			    (r = allow_list_unpack(cj, "allow", cs->allow, MODEL_MAX_CLASS_ALLOW,
						   &cs->nallow, err)) < 0 ||
			    (r = class_order_unpack(cj, cs, err)) < 0) {
				mj_prefix(err, "classes[%zu]", i);
				goto out;
			}
			cs->priority = (int)prio;
			if (!model_name_valid(cs->name)) {
				r = tk_errorf(err, -EINVAL,
					      "classes[%zu].name: \"%s\" is not a valid name", i,
					      cs->name);
				goto out;
			}
			if (sched_config_class(&next, cs->name) >= 0) {
				r = tk_errorf(err, -EINVAL,
					      "classes[%zu].name: \"%s\" is defined twice", i,
					      cs->name);
				goto out;
			}
			next.nclasses++;
		}
		int levels = 0;
		for (int k = 0; k < next.nclasses; k++)
			levels += class_spec_levels(&next.classes[k]);
		if (levels > MODEL_MAX_CLASSES) {
			r = tk_errorf(
				err, -EINVAL,
				"classes: %d classes and levels of \"order\": \"las\" in all, "
				"at most %d",
				levels, MODEL_MAX_CLASSES);
			goto out;
		}
		if (!def[0])
			snprintf(def, sizeof(def), "%s", next.classes[next.nclasses - 1].name);
	}
	if (def[0]) {
		next.default_class = sched_config_class(&next, def);
		if (next.default_class < 0) {
			r = tk_errorf(err, -EINVAL, "default_class: no class \"%s\"", def);
			goto out;
		}
	}
	*c = next;
	r = 0;
out:
	json_decref(root);
	return r;
}

/* ---- queues ---------------------------------------------------------------------- */

static json_t *gpus_or_null(int64_t milli)
{
	if (milli < 0)
		return json_null();
	if (milli % MODEL_MILLI == 0)
		return json_integer(milli / MODEL_MILLI);
	return json_real(milli / (double)MODEL_MILLI);
}

json_t *queue_spec_pack(const struct queue_spec *q)
{
	json_t *users = allow_list_pack(q->users, q->nusers);
	json_t *o = json_pack("{s:s, s:o, s:o, s:f, s:o, s:f, s:I}", "name", q->name, "gpus",
			      gpus_or_null(q->quota_milli), "borrow_limit",
			      gpus_or_null(q->borrow_milli), "weight", q->weight, "users", users,
			      "usage", q->usage, "usage_at_ms", (json_int_t)q->usage_at_ms);
	json_object_set_new(o, "budget",
			    q->budget > 0 ? json_pack("{s:f, s:s}", "amount", q->budget, "period",
						      q->budget_period)
					  : json_null());
	if (q->ndims) {
		json_t *lim = json_object(), *bor = json_object();
		for (int i = 0; i < q->ndims; i++) {
			const struct queue_dim *d = &q->dims[i];
			json_object_set_new(lim, d->name, queue_dim_value(d, d->quota));
			if (d->borrow)
				json_object_set_new(bor, d->name, queue_dim_value(d, d->borrow));
		}
		json_object_set_new(o, "limits", lim);
		json_object_set_new(o, "borrow_limits", bor);
	}
	return o;
}

/* "budget": {"amount": 5000, "period": "month"}, or null for none. */
static int budget_field(json_t *obj, struct queue_spec *q, struct tk_error *err)
{
	json_t *b = json_object_get(obj, "budget");
	if (!b)
		return 0;
	if (json_is_null(b)) {
		q->budget = 0;
		q->budget_period[0] = 0;
		return 0;
	}
	static const char *const keys[] = {"amount", "period", NULL};
	char period[16] = "";
	double amount;
	int r;
	if (!json_is_object(b))
		return tk_errorf(err, -EINVAL,
				 "budget: must be {\"amount\": N, \"period\": "
				 "\"month\"} or null");
	if ((r = mj_check_keys(b, "budget", keys, err)) < 0 ||
	    (r = mj_num(b, "amount", true, 0.01, 1e12, 0, &amount, err)) < 0 ||
	    (r = mj_strbuf(b, "period", false, true, period, sizeof(period), err)) < 0) {
		mj_prefix(err, "budget");
		return r;
	}
	if (!period[0])
		snprintf(period, sizeof(period), "month");
	if (strcmp(period, "day") != 0 && strcmp(period, "week") != 0 &&
	    strcmp(period, "month") != 0)
		return tk_errorf(err, -EINVAL,
				 "budget.period: must be day, week or month, got \"%s\"", period);
	q->budget = amount;
	tk_strlcpy(q->budget_period, period, sizeof(q->budget_period));
	return 0;
}

void model_fmt_amount(double v, char *buf, size_t n)
{
	if (!(fabs(v) >= 100)) {
		snprintf(buf, n, "%.2f", v);
		return;
	}
	char digits[32];
	snprintf(digits, sizeof(digits), "%.0f", fabs(v));
	size_t len = strlen(digits), k = 0;
	char out[48];
	if (v < 0)
		out[k++] = '-';
	for (size_t i = 0; i < len && k + 2 < sizeof(out); i++) {
		if (i && (len - i) % 3 == 0)
			out[k++] = ',';
		out[k++] = digits[i];
	}
	out[k] = 0;
	snprintf(buf, n, "%s", out);
}

int64_t queue_budget_period_start(const struct queue_spec *q, int64_t now_ms)
{
	time_t t = (time_t)(now_ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	if (strcmp(q->budget_period, "month") == 0)
		tm.tm_mday = 1;
	else if (strcmp(q->budget_period, "week") == 0)
		tm.tm_mday -= (tm.tm_wday + 6) % 7; /* back to Monday */
	return (int64_t)timegm(&tm) * 1000;
}

/* Reads an accelerator count (or null) into milli units. */
static int gpus_field(json_t *obj, const char *key, int64_t *ret, struct tk_error *err)
{
	json_t *v = json_object_get(obj, key);
	if (!v)
		return 0;
	if (json_is_null(v)) {
		*ret = -1;
		return 0;
	}
	double x;
	int r = mj_num(obj, key, true, 0, 1e7, 0, &x, err);
	if (r < 0)
		return r;
	double milli = x * MODEL_MILLI;
	if (fabs(milli - round(milli)) > 1e-6)
		return tk_errorf(err, -EINVAL, "%s: at most three decimals, got %g", key, x);
	*ret = (int64_t)llround(milli);
	return 0;
}

bool queue_dim_milli(const char *name)
{
	return strcmp(name, "cpus") != 0 && strcmp(name, "mem_mib") != 0;
}

json_t *queue_dim_value(const struct queue_dim *d, int64_t v)
{
	if (v < 0)
		return json_null();
	if (!queue_dim_milli(d->name))
		return json_integer(v);
	return v % MODEL_MILLI ? json_real((double)v / MODEL_MILLI) : json_integer(v / MODEL_MILLI);
}

/* "limits": {"H100": 64, "units": 100, "cpus": 512, "mem_mib": N} (null:
 * no longer limited), "borrow_limits": the same (null: no limit; absent:
 * none, the quota is the limit). */
static int dims_field(json_t *obj, struct queue_spec *q, struct tk_error *err)
{
	for (int w = 0; w < 2; w++) {
		const char *key = w ? "borrow_limits" : "limits";
		json_t *o = json_object_get(obj, key);
		if (!o)
			continue;
		if (!json_is_object(o))
			return tk_errorf(err, -EINVAL,
					 "%s: must be an object such as {\"H100\": 64, \"units\": "
					 "100, \"cpus\": 512, \"mem_mib\": 1048576}",
					 key);
		const char *k;
		json_t *v;
		json_object_foreach (o, k, v) {
			if (!model_name_valid(k))
				return tk_errorf(
					err, -EINVAL,
					"%s.%.64s: not a model's name, \"units\", \"cpus\" "
					"or \"mem_mib\"",
					key, k);
			int at = -1;
			for (int i = 0; i < q->ndims && at < 0; i++)
				if (strcmp(q->dims[i].name, k) == 0)
					at = i;
			if (json_is_null(v) && !w) {
				if (at >= 0) /* no longer limited */
					q->dims[at] = q->dims[--q->ndims];
				continue;
			}
			int64_t x = -1;
			if (!json_is_null(v)) {
				int r = queue_dim_milli(k)
						? gpus_field(o, k, &x, err)
						: mj_int(o, k, true, 0, INT64_MAX / 4, 0, &x, err);
				if (r < 0) {
					mj_prefix(err, "%s", key);
					return r;
				}
			}
			if (at < 0 && w)
				return tk_errorf(
					err, -EINVAL,
					"borrow_limits.%.64s: the queue has no limit of %.64s "
					"to borrow beyond; set one in limits first",
					k, k);
			if (at < 0) {
				if (q->ndims == MODEL_MAX_QUEUE_DIMS)
					return tk_errorf(err, -EINVAL,
							 "limits: at most %d of them in a queue",
							 MODEL_MAX_QUEUE_DIMS);
				at = q->ndims++;
				memset(&q->dims[at], 0, sizeof(q->dims[at]));
				snprintf(q->dims[at].name, sizeof(q->dims[at].name), "%s", k);
			}
			if (w)
				q->dims[at].borrow = x;
			else
				q->dims[at].quota = x;
		}
	}
	return 0;
}

static int users_field(json_t *obj, struct queue_spec *q, struct tk_error *err)
{
	return allow_list_unpack(obj, "users", q->users, MODEL_MAX_QUEUE_USERS, &q->nusers, err);
}

int queue_spec_update(struct queue_spec *q, json_t *change, struct tk_error *err)
{
	static const char *const keys[] = {"gpus",   "borrow_limit", "weight",	      "users",
					   "budget", "limits",	     "borrow_limits", NULL};
	struct queue_spec next = *q;
	int r;
	if ((r = mj_check_keys(change, NULL, keys, err)) < 0 ||
	    (r = dims_field(change, &next, err)) < 0 ||
	    (r = gpus_field(change, "gpus", &next.quota_milli, err)) < 0 ||
	    (r = gpus_field(change, "borrow_limit", &next.borrow_milli, err)) < 0 ||
	    (r = mj_num(change, "weight", false, 0.001, 1e6, next.weight, &next.weight, err)) < 0 ||
	    (r = users_field(change, &next, err)) < 0 || (r = budget_field(change, &next, err)) < 0)
		return r;
	*q = next;
	return 0;
}

int queue_spec_unpack(json_t *j, struct queue_spec *ret, struct tk_error *err)
{
	static const char *const keys[] = {
		"name",	       "gpus",	 "borrow_limit", "weight",	  "users", "usage",
		"usage_at_ms", "budget", "limits",	 "borrow_limits", NULL};
	struct queue_spec q;
	memset(&q, 0, sizeof(q));
	q.quota_milli = q.borrow_milli = -1;
	q.weight = 1;
	int64_t at;
	int r;
	if ((r = mj_check_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(j, "name", true, true, q.name, sizeof(q.name), err)) < 0 ||
	    (r = gpus_field(j, "gpus", &q.quota_milli, err)) < 0 ||
	    (r = gpus_field(j, "borrow_limit", &q.borrow_milli, err)) < 0 ||
	    (r = mj_num(j, "weight", false, 0.001, 1e6, 1, &q.weight, err)) < 0 ||
	    (r = users_field(j, &q, err)) < 0 ||
	    (r = mj_num(j, "usage", false, 0, 1e30, 0, &q.usage, err)) < 0 ||
	    (r = mj_int(j, "usage_at_ms", false, 0, INT64_MAX, 0, &at, err)) < 0 ||
	    (r = budget_field(j, &q, err)) < 0 || (r = dims_field(j, &q, err)) < 0)
		return r;
	if (!model_name_valid(q.name))
		return tk_errorf(err, -EINVAL, "name: \"%s\" is not a valid queue name", q.name);
	q.usage_at_ms = at;
	*ret = q;
	return 0;
}

/* ---- users ---------------------------------------------------------------------- */

static const char *const access_names[ACCESS_MAX] = {
	[ACCESS_VIEWER] = "viewer",
	[ACCESS_USER] = "user",
	[ACCESS_OPERATOR] = "operator",
	[ACCESS_ADMIN] = "admin",
};

const char *user_access_name(enum user_access a)
{
	return a >= 0 && a < ACCESS_MAX ? access_names[a] : "?";
}

int user_access_parse(const char *s, enum user_access *ret)
{
	for (int a = 0; a < ACCESS_MAX; a++)
		if (strcmp(s, access_names[a]) == 0) {
			*ret = (enum user_access)a;
			return 0;
		}
	return -EINVAL;
}

json_t *user_record_pack(const struct user_record *u)
{
	return json_pack("{s:s, s:s, s:b, s:s, s:I, s:s, s:o}", "name", u->name, "token_sha256",
			 u->token_sha256, "admin", u->access == ACCESS_ADMIN, "access",
			 user_access_name(u->access), "created_ms", (json_int_t)u->created_ms,
			 "unix_user", u->unix_user, "roles", allow_list_pack(u->roles, u->nroles));
}

int user_access_unpack(json_t *j, struct user_record *u, struct tk_error *err)
{
	char access[16] = "";
	int r;
	if ((r = mj_bool(j, "admin", false, false, &u->admin, err)) < 0 ||
	    (r = mj_strbuf(j, "access", false, true, access, sizeof(access), err)) < 0)
		return r;
	u->access = u->admin ? ACCESS_ADMIN : ACCESS_USER;
	if (access[0] && user_access_parse(access, &u->access) < 0)
		return tk_errorf(err, -EINVAL,
				 "access: must be viewer, user, operator or admin, got \"%s\"",
				 access);
	if (u->admin && u->access != ACCESS_ADMIN)
		return tk_errorf(err, -EINVAL, "admin: true, but access is %s", access);
	u->admin = u->access == ACCESS_ADMIN;
	return 0;
}

int user_roles_unpack(json_t *j, struct user_record *u, struct tk_error *err)
{
	json_t *a = json_object_get(j, "roles");
	if (!a)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > MODEL_MAX_ROLES)
		return tk_errorf(err, -EINVAL, "roles: must be an array of at most %d names",
				 MODEL_MAX_ROLES);
	size_t i;
	json_t *v;
	json_array_foreach (a, i, v) {
		const char *name = json_string_value(v);
		if (!name || !model_name_valid(name))
			return tk_errorf(err, -EINVAL, "roles[%zu]: must be a name", i);
		for (int k = 0; k < u->nroles; k++)
			if (strcmp(u->roles[k], name) == 0)
				return tk_errorf(err, -EINVAL, "roles[%zu]: \"%s\" is given twice",
						 i, name);
		snprintf(u->roles[u->nroles++], MODEL_NAME_MAX, "%s", name);
	}
	return 0;
}

int user_record_unpack(json_t *j, struct user_record *ret, struct tk_error *err)
{
	static const char *const keys[] = {"name",	 "token_sha256", "admin", "access",
					   "created_ms", "unix_user",	 "roles", NULL};
	struct user_record u;
	memset(&u, 0, sizeof(u));
	int64_t created;
	int r;
	if ((r = mj_check_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(j, "name", true, true, u.name, sizeof(u.name), err)) < 0 ||
	    (r = mj_strbuf(j, "token_sha256", true, true, u.token_sha256, sizeof(u.token_sha256),
			   err)) < 0 ||
	    (r = user_access_unpack(j, &u, err)) < 0 ||
	    (r = mj_int(j, "created_ms", false, 0, INT64_MAX, 0, &created, err)) < 0 ||
	    (r = mj_strbuf(j, "unix_user", false, true, u.unix_user, sizeof(u.unix_user), err)) <
		    0 ||
	    (r = user_roles_unpack(j, &u, err)) < 0)
		return r;
	if (!model_name_valid(u.name) || strlen(u.token_sha256) != 64)
		return tk_errorf(err, -EINVAL, "name or token_sha256: malformed user record");
	/* records from before Unix accounts: the user's own name */
	if (!u.unix_user[0])
		snprintf(u.unix_user, sizeof(u.unix_user), "%s", u.name);
	if (!model_unix_user_valid(u.unix_user))
		return tk_errorf(err, -EINVAL, "unix_user: \"%s\" is not a Unix account name",
				 u.unix_user);
	u.created_ms = created;
	*ret = u;
	return 0;
}
