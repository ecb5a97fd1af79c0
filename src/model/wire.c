/*
 * The agent protocol's messages (wire.h): each type's one JSON form. Packing
 * cannot fail; unpacking checks every field as strictly as a user's request
 * is checked, and names the first bad field in its error.
 */
#include "wire.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* "sha256:" and 64 lowercase hex digits. */
static int digest_check(const char *d, const char *what, struct tk_error *err)
{
	if (!model_digest_valid(d))
		return tk_errorf(err, -EINVAL, "%s: \"%.80s\" is not a digest (sha256:HEX)", what,
				 d);
	return 0;
}

static const char *const cause_names[EXIT_CAUSE_MAX] = {
	[EXIT_EXITED] = "exited",
	[EXIT_SIGNALLED] = "signalled",
	[EXIT_TIMEOUT] = "timeout",
	[EXIT_CANCELLED] = "cancelled",
	[EXIT_PREEMPTED] = "preempted",
	[EXIT_LOST] = "lost",
	[EXIT_LAUNCH_FAILED] = "launch_failed",
	[EXIT_OOM] = "oom",
	[EXIT_DISK_LIMIT] = "disk_limit",
	[EXIT_UNHEALTHY] = "unhealthy",
};

const char *exit_cause_name(enum exit_cause c)
{
	return (unsigned)c < EXIT_CAUSE_MAX ? cause_names[c] : "?";
}

int exit_cause_parse(const char *s, enum exit_cause *ret)
{
	for (int i = 0; i < EXIT_CAUSE_MAX; i++)
		if (strcmp(s, cause_names[i]) == 0) {
			*ret = (enum exit_cause)i;
			return 0;
		}
	return -EINVAL;
}

static const char *const log_status_names[LOG_STATUS_MAX] = {
	[LOG_READ] = "read",
	[LOG_NOT_YET] = "not_yet",
	[LOG_UNREADABLE] = "unreadable",
	[LOG_NODE_DOWN] = "node_down",
	[LOG_NO_ANSWER] = "no_answer",
};

const char *log_status_name(enum log_status s)
{
	return (unsigned)s < LOG_STATUS_MAX ? log_status_names[s] : "?";
}

static const char *const refusal_names[WIRE_REFUSAL_MAX] = {
	[WIRE_REFUSAL_NONE] = "",
	[WIRE_REFUSAL_ADMIT] = "admit",
	[WIRE_REFUSAL_FINAL] = "final",
};

const char *wire_refusal_name(enum wire_refusal r)
{
	return (unsigned)r < WIRE_REFUSAL_MAX ? refusal_names[r] : "";
}

enum wire_refusal wire_refusal_parse(const char *s)
{
	for (int r = WIRE_REFUSAL_ADMIT; s && r < WIRE_REFUSAL_MAX; r++)
		if (strcmp(s, refusal_names[r]) == 0)
			return (enum wire_refusal)r;
	return WIRE_REFUSAL_NONE;
}

/* An agent process's id: 8 to 63 lowercase hex digits. */
static int agent_id_unpack(json_t *j, char *buf, struct tk_error *err)
{
	int r = mj_strbuf(j, "agent_id", true, true, buf, WIRE_AGENT_ID_MAX, err);
	if (r < 0)
		return r;
	size_t n = strlen(buf);
	bool ok = n >= 8;
	for (size_t i = 0; i < n && ok; i++)
		ok = (buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f');
	if (!ok)
		return tk_errorf(err, -EINVAL, "agent_id: must be 8 to 63 lowercase hex digits");
	return 0;
}

/* obj[key]: an array of at most max items, in *ret with its size in *ret_n;
 * absent: none (NULL, 0), unless required. */
static int array_of(json_t *obj, const char *key, bool required, size_t max, json_t **ret,
		    size_t *ret_n, struct tk_error *err)
{
	json_t *a = json_object_get(obj, key);
	*ret = a;
	*ret_n = 0;
	if (!a && !required)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > max)
		return tk_errorf(err, -EINVAL, "%s: must be an array of at most %zu", key, max);
	*ret_n = json_array_size(a);
	return 0;
}

/* ---- register ------------------------------------------------------------------- */

json_t *wire_register_pack(const struct wire_register *m)
{
	json_t *kept = json_array();
	for (int i = 0; i < m->nkept; i++)
		json_array_append_new(kept,
				      json_pack("{s:I, s:i}", "job", (json_int_t)m->kept[i].job,
						"attempt", m->kept[i].attempt));
	json_t *o = json_pack("{s:s, s:o, s:o}", "agent_id", m->agent_id, "inventory",
			      node_inventory_pack(&m->inv), "kept", kept);
	if (m->protocol != 1) /* a protocol-1 server refuses the key */
		json_object_set_new(o, "protocol",
				    json_integer(m->protocol ? m->protocol : WIRE_PROTOCOL));
	else /* ... and the inventory's keys it did not have */
		for (const char *const *k =
			     (const char *const[]){"isolation", "labels", "domain", NULL};
		     *k; k++)
			json_object_del(json_object_get(o, "inventory"), *k);
	return o;
}

int wire_register_unpack(json_t *j, struct wire_register *ret, struct tk_error *err)
{
	static const char *const keys[] = {"agent_id", "inventory", "kept", "protocol", NULL};
	static const char *const kkeys[] = {"job", "attempt", NULL};
	int r;
	int64_t protocol;
	memset(ret, 0, sizeof(*ret));
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = agent_id_unpack(j, ret->agent_id, err)) < 0 ||
	    (r = mj_int(j, "protocol", false, 1, INT32_MAX, 1, &protocol, err)) < 0)
		return r;
	ret->protocol = (int)protocol;
	if ((r = node_inventory_unpack(json_object_get(j, "inventory"), &ret->inv, err)) < 0) {
		mj_prefix(err, "inventory");
		return r;
	}
	json_t *kept;
	size_t n;
	if ((r = array_of(j, "kept", false, WIRE_MAX_WORK, &kept, &n, err)) < 0 || !kept)
		return r;
	ret->kept = xcalloc(n ? n : 1, sizeof(*ret->kept));
	size_t i;
	json_t *k;
	json_array_foreach (kept, i, k) {
		int64_t attempt;
		if ((r = mj_link_keys(k, NULL, kkeys, err)) < 0 ||
		    (r = mj_int(k, "job", true, 1, INT64_MAX, 0, &ret->kept[i].job, err)) < 0 ||
		    (r = mj_int(k, "attempt", true, 1, MODEL_MAX_ATTEMPTS, 0, &attempt, err)) < 0) {
			mj_prefix(err, "kept[%zu]", i);
			wire_register_release(ret);
			return r;
		}
		ret->kept[i].attempt = (int)attempt;
	}
	ret->nkept = (int)n;
	return 0;
}

void wire_register_release(struct wire_register *m)
{
	free(m->kept);
	m->kept = NULL;
	m->nkept = 0;
}

json_t *wire_gpu_limits_pack(const struct gpu_limits *g)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:b, s:b, s:I}", "hold_ms", (json_int_t)g->hold_ms,
			 "temp_c", (json_int_t)g->temp_c, "busy_pct", (json_int_t)g->busy_pct,
			 "power_low_pct", (json_int_t)g->power_pct, "throttle", g->throttle, "pcie",
			 g->pcie, "remapped_rows", (json_int_t)g->rows);
}

int wire_gpu_limits_unpack(json_t *j, bool config, struct gpu_limits *ret, struct tk_error *err)
{
	static const char *const ckeys[] = {"for",	"temp_c", "busy_pct",	   "power_low_pct",
					    "throttle", "pcie",	  "remapped_rows", NULL};
	static const char *const wkeys[] = {"hold_ms",	"temp_c", "busy_pct",	   "power_low_pct",
					    "throttle", "pcie",	  "remapped_rows", NULL};
	struct gpu_limits g;
	sched_config_gpu_default(&g);
	int r;
	if (!json_is_object(j))
		return tk_errorf(err, -EINVAL, "must be an object"); /* callers say it first */
	if ((r = config ? mj_check_keys(j, NULL, ckeys, err) : mj_link_keys(j, NULL, wkeys, err)) <
		    0 ||
	    (r = mj_int(j, "temp_c", false, 0, 200, g.temp_c, &g.temp_c, err)) < 0 ||
	    (r = mj_int(j, "busy_pct", false, 1, 100, g.busy_pct, &g.busy_pct, err)) < 0 ||
	    (r = mj_int(j, "power_low_pct", false, 0, 100, g.power_pct, &g.power_pct, err)) < 0 ||
	    (r = mj_bool(j, "throttle", false, g.throttle, &g.throttle, err)) < 0 ||
	    (r = mj_bool(j, "pcie", false, g.pcie, &g.pcie, err)) < 0 ||
	    (r = mj_int(j, "remapped_rows", false, 0, 1000000, g.rows, &g.rows, err)) < 0)
		return r;
	if (!config) {
		if ((r = mj_int(j, "hold_ms", false, 0, 7LL * 86400000, g.hold_ms, &g.hold_ms,
				err)) < 0)
			return r;
	} else {
		char dur[32] = "";
		int64_t s;
		if ((r = mj_strbuf(j, "for", false, true, dur, sizeof(dur), err)) < 0)
			return r;
		if (dur[0] && (tk_parse_duration(dur, &s) < 0 || s < 0 || s > 7 * 86400))
			return tk_errorf(err, -EINVAL,
					 "for: expected a duration of at most 7d such as \"5m\" "
					 "(\"0\": at once), got \"%s\"",
					 dur);
		if (dur[0])
			g.hold_ms = s * 1000;
	}
	*ret = g;
	return 0;
}

json_t *wire_registered_pack(const struct wire_registered *m)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:I}", "node", m->node, "addr", m->addr, "epoch",
			      m->epoch, "node_timeout_ms", (json_int_t)m->node_timeout_ms);
	if (m->credential[0])
		json_object_set_new(o, "credential", json_string(m->credential));
	if (m->protocol != 1) { /* a protocol-1 agent refuses these keys */
		json_object_set_new(o, "protocol",
				    json_integer(m->protocol ? m->protocol : WIRE_PROTOCOL));
		if (m->has_gpu_health)
			json_object_set_new(o, "gpu_health", wire_gpu_limits_pack(&m->gpu_health));
		if (m->heartbeat_ms)
			json_object_set_new(o, "heartbeat_ms", json_integer(m->heartbeat_ms));
		if (m->idle_power_after_ms >= 0)
			json_object_set_new(o, "idle_power_after_ms",
					    json_integer(m->idle_power_after_ms));
	}
	return o;
}

int wire_registered_unpack(json_t *j, struct wire_registered *ret, struct tk_error *err)
{
	static const char *const keys[] = {
		"node",	    "addr",	  "epoch",	  "node_timeout_ms",	 "credential",
		"protocol", "gpu_health", "heartbeat_ms", "idle_power_after_ms", NULL};
	int r;
	int64_t protocol;
	memset(ret, 0, sizeof(*ret));
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(j, "node", true, true, ret->node, sizeof(ret->node), err)) < 0 ||
	    (r = mj_strbuf(j, "addr", false, true, ret->addr, sizeof(ret->addr), err)) < 0 ||
	    (r = mj_strbuf(j, "epoch", true, true, ret->epoch, sizeof(ret->epoch), err)) < 0 ||
	    (r = mj_int(j, "node_timeout_ms", true, 1, INT32_MAX, 0, &ret->node_timeout_ms, err)) <
		    0 ||
	    (r = mj_strbuf(j, "credential", false, true, ret->credential, sizeof(ret->credential),
			   err)) < 0 ||
	    (r = mj_int(j, "protocol", false, 1, INT32_MAX, 1, &protocol, err)) < 0 ||
	    (r = mj_int(j, "heartbeat_ms", false, 1, INT32_MAX, 0, &ret->heartbeat_ms, err)) < 0 ||
	    (r = mj_int(j, "idle_power_after_ms", false, 0, INT64_MAX, -1,
			&ret->idle_power_after_ms, err)) < 0)
		return r;
	ret->protocol = (int)protocol;
	json_t *gpu = json_object_get(j, "gpu_health");
	if (gpu && !json_is_object(gpu))
		return tk_errorf(err, -EINVAL, "gpu_health: must be an object");
	if (gpu) {
		if ((r = wire_gpu_limits_unpack(gpu, false, &ret->gpu_health, err)) < 0) {
			mj_prefix(err, "gpu_health");
			return r;
		}
		ret->has_gpu_health = true;
	}
	if (ret->credential[0] && strlen(ret->credential) != 64)
		return tk_errorf(err, -EINVAL, "credential: must be 64 hex digits");
	return 0;
}

/* ---- fencing by lease ------------------------------------------------------------- */

void wire_lease_of(int64_t node_timeout_ms, int64_t heartbeat_ms, struct wire_lease *ret)
{
	int64_t t = MAX(node_timeout_ms, 8);
	ret->lease_ms = t / 2;
	ret->fence_grace_ms = t / 4;
	ret->bound_ms = ret->lease_ms + ret->fence_grace_ms;
	ret->heartbeat_ms = MAX(MIN(heartbeat_ms, t / 10), 1);
}

/* ---- heartbeat ------------------------------------------------------------------ */

/* ---- witness groups ------------------------------------------------------------------ */

static bool hex_text(const char *s, size_t n)
{
	if (strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

json_t *wire_group_pack(const struct wire_group *g)
{
	json_t *m = json_array();
	for (int i = 0; i < g->n; i++)
		json_array_append_new(m, json_pack("{s:s, s:s, s:i}", "node", g->members[i].node,
						   "addr", g->members[i].addr, "port",
						   g->members[i].port));
	return json_pack("{s:s, s:s, s:s, s:o}", "id", g->id, "tag", g->tag, "key", g->key,
			 "members", m);
}

int wire_group_unpack(json_t *j, struct wire_group *ret, struct tk_error *err)
{
	static const char *const keys[] = {"id", "tag", "key", "members", NULL};
	static const char *const mkeys[] = {"node", "addr", "port", NULL};
	int r;
	memset(ret, 0, sizeof(*ret));
	if (!json_is_object(j))
		return tk_errorf(err, -EINVAL, "group: must be an object");
	if ((r = mj_link_keys(j, "group", keys, err)) < 0 ||
	    (r = mj_strbuf(j, "id", true, true, ret->id, sizeof(ret->id), err)) < 0 ||
	    (r = mj_strbuf(j, "tag", true, true, ret->tag, sizeof(ret->tag), err)) < 0 ||
	    (r = mj_strbuf(j, "key", true, true, ret->key, sizeof(ret->key), err)) < 0)
		return r;
	if (!hex_text(ret->id, WIRE_GROUP_ID_MAX - 1) ||
	    !hex_text(ret->tag, WIRE_GROUP_ID_MAX - 1) ||
	    !hex_text(ret->key, WIRE_GROUP_KEY_MAX - 1))
		return tk_errorf(err, -EINVAL,
				 "group: id and tag must be 16 hex digits, key 64 hex digits");
	json_t *m = json_object_get(j, "members");
	if (!json_is_array(m) || json_array_size(m) < 1 || json_array_size(m) > WIRE_MAX_GROUP)
		return tk_errorf(err, -EINVAL, "group.members: must be an array of 1 to %d members",
				 WIRE_MAX_GROUP);
	size_t i;
	json_t *v;
	json_array_foreach (m, i, v) {
		struct wire_peer *p = &ret->members[i];
		int64_t port;
		if ((r = mj_link_keys(v, NULL, mkeys, err)) < 0 ||
		    (r = mj_strbuf(v, "node", true, true, p->node, sizeof(p->node), err)) < 0 ||
		    (r = mj_strbuf(v, "addr", true, true, p->addr, sizeof(p->addr), err)) < 0 ||
		    (r = mj_int(v, "port", true, 0, 65535, 0, &port, err)) < 0) {
			mj_prefix(err, "group.members[%zu]", i);
			return r;
		}
		p->port = (int)port;
		ret->n = (int)i + 1;
	}
	return 0;
}

/* ---- heartbeat ------------------------------------------------------------------------ */

json_t *wire_beat_answer_pack(const char *epoch, int64_t at_ms, const struct wire_group *g)
{
	json_t *o =
		json_pack("{s:b, s:s, s:I}", "ok", 1, "epoch", epoch, "at_ms", (json_int_t)at_ms);
	if (g)
		json_object_set_new(o, "group", wire_group_pack(g));
	return o;
}

int wire_beat_answer_take(const char *body, size_t len, char *epoch, int64_t *at_ms,
			  struct wire_group *g, struct tk_error *err)
{
	json_t *ans = body && len ? json_loadb(body, len, 0, NULL) : NULL;
	const char *ep = json_string_value(json_object_get(ans, "epoch"));
	json_int_t at = json_integer_value(json_object_get(ans, "at_ms"));
	if (ep && strlen(ep) < WIRE_EPOCH_MAX && (strcmp(ep, epoch) != 0 || at > *at_ms)) {
		snprintf(epoch, WIRE_EPOCH_MAX, "%s", ep);
		*at_ms = at;
	}
	int r = 0;
	json_t *gj = json_object_get(ans, "group");
	if (g && gj)
		r = wire_group_unpack(gj, g, err) < 0 ? -EINVAL : 1;
	json_decref(ans);
	return r;
}

json_t *wire_heartbeat_pack(const struct wire_heartbeat *m)
{
	json_t *c = json_array();
	for (int i = 0; i < m->ncheckpoints; i++) {
		const struct wire_checkpoint *k = &m->checkpoints[i];
		json_array_append_new(c, json_pack("{s:I, s:i, s:I}", "job", (json_int_t)k->job,
						   "attempt", k->attempt, "at_ms",
						   (json_int_t)k->at_ms));
	}
	json_t *o = json_pack("{s:s, s:s, s:o, s:b}", "node", m->node, "agent_id", m->agent_id,
			      "checkpoints", c, "stopping", m->stopping);
	if (m->has_images) {
		json_object_set_new(o, "images", wire_images_pack(m->images, m->nimages));
		json_object_set_new(o, "pulls", wire_pulls_pack(m->pulls, m->npulls));
	}
	if (m->acked_epoch[0])
		json_object_set_new(o, "acked",
				    json_pack("{s:s, s:I}", "epoch", m->acked_epoch, "at_ms",
					      (json_int_t)m->acked_at_ms));
	if (m->witness_port || m->group_id[0])
		json_object_set_new(o, "witness",
				    json_pack("{s:i, s:s, s:s, s:I}", "port", m->witness_port,
					      "group", m->group_id, "tag", m->group_tag, "seq",
					      (json_int_t)m->witness_seq));
	if (m->beat_ms)
		json_object_set_new(o, "beat_ms", json_integer(m->beat_ms));
	if (m->has_stack)
		json_object_set_new(o, "stack", node_stack_pack(&m->stack));
	if (m->nfaults) {
		json_t *f = json_array();
		for (int i = 0; i < m->nfaults; i++)
			json_array_append_new(f, json_string(m->faults[i]));
		json_object_set_new(o, "faults", f);
	}
	if (m->ngpus)
		json_object_set_new(o, "gpus", wire_gpus_pack(m->gpus, m->ngpus));
	if (m->ntrain) {
		json_t *t = json_array();
		for (int i = 0; i < m->ntrain; i++)
			json_array_append_new(t,
					      json_pack("{s:I, s:i, s:o, s:I}", "job",
							(json_int_t)m->train[i].job, "attempt",
							m->train[i].attempt, "point",
							train_point_pack(&m->train[i].point),
							"offset", (json_int_t)m->train[i].offset));
		json_object_set_new(o, "metrics", t);
	}
	if (m->nnccl) {
		json_t *a = json_array();
		for (int i = 0; i < m->nnccl; i++)
			json_array_append_new(a, wire_nccl_pack(&m->nccl[i]));
		json_object_set_new(o, "nccl", a);
	}
	if (m->has_serve) {
		json_t *a = json_array();
		for (int i = 0; i < m->nserve; i++)
			json_array_append_new(
				a, json_pack("{s:s, s:i, s:i}", "name", m->serve[i].name, "busy",
					     m->serve[i].busy, "held", m->serve[i].held));
		json_object_set_new(o, "services", a);
	}
	return o;
}

static int serve_unpack(json_t *j, struct wire_heartbeat *ret, struct tk_error *err)
{
	static const char *const keys[] = {"name", "busy", "held", NULL};
	json_t *arr;
	size_t n, i;
	int r;
	if ((r = array_of(j, "services", false, WIRE_MAX_SERVICES, &arr, &n, err)) < 0 || !arr)
		return r;
	ret->has_serve = true;
	ret->serve = xcalloc(n ? n : 1, sizeof(*ret->serve));
	json_t *v;
	json_array_foreach (arr, i, v) {
		struct wire_serve_load *l = &ret->serve[i];
		int64_t busy, held;
		if ((r = mj_link_keys(v, NULL, keys, err)) < 0 ||
		    (r = mj_strbuf(v, "name", true, true, l->name, sizeof(l->name), err)) < 0 ||
		    (r = mj_int(v, "busy", true, 0, INT32_MAX, 0, &busy, err)) < 0 ||
		    (r = mj_int(v, "held", true, 0, INT32_MAX, 0, &held, err)) < 0) {
			mj_prefix(err, "services[%zu]", i);
			return r;
		}
		l->busy = (int)busy;
		l->held = (int)held;
		ret->nserve = (int)i + 1;
	}
	return 0;
}

json_t *wire_gpus_pack(const struct wire_gpu *g, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++) {
		json_t *o = json_pack("{s:i, s:b}", "index", g[i].index, "slowed", g[i].slowed);
		static const char *const keys[] = {"util_pct", "temp_c", "power_w",
						   "power_limit_w"};
		const int vals[] = {g[i].util_pct, g[i].temp_c, g[i].power_w, g[i].power_limit_w};
		for (int k = 0; k < 4; k++)
			if (vals[k] >= 0)
				json_object_set_new(o, keys[k], json_integer(vals[k]));
		json_t *f = json_array();
		for (int c = 0; c < GPU_CHECK_MAX; c++)
			if (g[i].failing & (1u << c))
				json_array_append_new(
					f, json_string(gpu_check_name((enum gpu_check)c)));
		json_object_set_new(o, "failing", f);
		json_array_append_new(a, o);
	}
	return a;
}

static int gpus_unpack(json_t *j, struct wire_heartbeat *ret, struct tk_error *err)
{
	static const char *const keys[] = {"index",	    "util_pct", "temp_c",  "power_w",
					   "power_limit_w", "slowed",	"failing", NULL};
	json_t *gpus;
	size_t n;
	int r;
	if ((r = array_of(j, "gpus", false, MODEL_MAX_ACCELS, &gpus, &n, err)) < 0 || !gpus)
		return r;
	size_t i;
	json_t *v;
	json_array_foreach (gpus, i, v) {
		struct wire_gpu *g = &ret->gpus[i];
		int64_t x[5];
		if ((r = mj_link_keys(v, NULL, keys, err)) < 0 ||
		    (r = mj_int(v, "index", true, 0, 1 << 20, 0, &x[0], err)) < 0 ||
		    (r = mj_int(v, "util_pct", false, 0, 100, -1, &x[1], err)) < 0 ||
		    (r = mj_int(v, "temp_c", false, 0, 1000, -1, &x[2], err)) < 0 ||
		    (r = mj_int(v, "power_w", false, 0, 1000000, -1, &x[3], err)) < 0 ||
		    (r = mj_int(v, "power_limit_w", false, 0, 1000000, -1, &x[4], err)) < 0 ||
		    (r = mj_bool(v, "slowed", false, false, &g->slowed, err)) < 0) {
			mj_prefix(err, "gpus[%zu]", i);
			return r;
		}
		g->index = (int)x[0];
		g->util_pct = (int)x[1];
		g->temp_c = (int)x[2];
		g->power_w = (int)x[3];
		g->power_limit_w = (int)x[4];
		json_t *f = json_object_get(v, "failing");
		if (f && !json_is_array(f))
			return tk_errorf(err, -EINVAL,
					 "gpus[%zu].failing: must be an array of checks", i);
		size_t k;
		json_t *c;
		json_array_foreach (f, k, c) {
			enum gpu_check gc;
			if (!json_is_string(c))
				return tk_errorf(err, -EINVAL,
						 "gpus[%zu].failing[%zu]: must be a check's name",
						 i, k);
			/* a newer agent's check, unknown here, is skipped */
			if (gpu_check_parse(json_string_value(c), &gc) == 0)
				g->failing |= 1u << gc;
		}
		ret->ngpus = (int)i + 1;
	}
	return 0;
}

json_t *wire_images_pack(const struct wire_image *im, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_pack("{s:s, s:s, s:I}", "ref", im[i].ref, "digest",
						   im[i].digest, "size_mib",
						   (json_int_t)im[i].size_mib));
	return a;
}

json_t *wire_pulls_pack(const struct wire_pull *p, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_pack("{s:s, s:s, s:s}", "ref", p[i].ref, "state",
						   pull_state_name(p[i].state), "detail",
						   p[i].detail));
	return a;
}
static const char *const pull_state_names[PULL_STATE_MAX] = {
	[PULL_RUNNING] = "pulling",
	[PULL_DONE] = "done",
	[PULL_FAILED] = "failed",
};

const char *pull_state_name(enum pull_state s)
{
	return s >= 0 && s < PULL_STATE_MAX ? pull_state_names[s] : "?";
}

/* The heartbeat's "images" and "pulls". */
static int images_unpack(json_t *j, struct wire_heartbeat *ret, struct tk_error *err)
{
	static const char *const ikeys[] = {"ref", "digest", "size_mib", NULL};
	static const char *const pkeys[] = {"ref", "state", "detail", NULL};
	json_t *im, *pl;
	size_t ni, np, i;
	json_t *v;
	int r;
	if ((r = array_of(j, "images", false, WIRE_MAX_IMAGES, &im, &ni, err)) < 0 ||
	    (r = array_of(j, "pulls", false, WIRE_MAX_IMAGES, &pl, &np, err)) < 0)
		return r;
	if (!im && !pl)
		return 0;
	if (!im || !pl)
		return tk_errorf(err, -EINVAL, "images, pulls: one comes with the other");
	ret->has_images = true;
	ret->images = xcalloc(ni ? ni : 1, sizeof(*ret->images));
	ret->pulls = xcalloc(np ? np : 1, sizeof(*ret->pulls));
	json_array_foreach (im, i, v) {
		struct wire_image *w = &ret->images[i];
		ret->nimages = (int)i + 1;
		if ((r = mj_link_keys(v, NULL, ikeys, err)) < 0 ||
		    (r = mj_strbuf(v, "ref", true, true, w->ref, sizeof(w->ref), err)) < 0 ||
		    (r = mj_strbuf(v, "digest", true, true, w->digest, sizeof(w->digest), err)) <
			    0 ||
		    (r = mj_int(v, "size_mib", true, 0, MODEL_MAX_MEM_MIB, 0, &w->size_mib, err)) <
			    0 ||
		    (r = digest_check(w->digest, "digest", err)) < 0) {
			mj_prefix(err, "images[%zu]", i);
			return r;
		}
	}
	json_array_foreach (pl, i, v) {
		struct wire_pull *w = &ret->pulls[i];
		char state[16] = "";
		ret->npulls = (int)i + 1;
		if ((r = mj_link_keys(v, NULL, pkeys, err)) < 0 ||
		    (r = mj_strbuf(v, "ref", true, true, w->ref, sizeof(w->ref), err)) < 0 ||
		    (r = mj_strbuf(v, "state", true, true, state, sizeof(state), err)) < 0 ||
		    (r = mj_strbuf(v, "detail", false, true, w->detail, sizeof(w->detail), err)) <
			    0) {
			mj_prefix(err, "pulls[%zu]", i);
			return r;
		}
		int k = 0;
		while (k < PULL_STATE_MAX && strcmp(state, pull_state_names[k]) != 0)
			k++;
		if (k == PULL_STATE_MAX || !model_image_valid(w->ref))
			return tk_errorf(
				err, -EINVAL,
				"pulls[%zu]: a reference and a state (pulling, done, failed)", i);
		w->state = (enum pull_state)k;
	}
	return 0;
}

int wire_heartbeat_unpack(json_t *j, struct wire_heartbeat *ret, struct tk_error *err)
{
	static const char *const keys[] = {"node",   "agent_id", "checkpoints", "stopping",
					   "images", "pulls",	 "faults",	"metrics",
					   "acked",  "witness",	 "gpus",	"beat_ms",
					   "nccl",   "stack",	 "services",	NULL};
	static const char *const ckeys[] = {"job", "attempt", "at_ms", NULL};
	int r;
	memset(ret, 0, sizeof(*ret));
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(j, "node", true, true, ret->node, sizeof(ret->node), err)) < 0 ||
	    (r = agent_id_unpack(j, ret->agent_id, err)) < 0 ||
	    (r = mj_bool(j, "stopping", false, false, &ret->stopping, err)) < 0 ||
	    (r = mj_int(j, "beat_ms", false, 1, INT32_MAX, 0, &ret->beat_ms, err)) < 0)
		return r;
	json_t *stack = json_object_get(j, "stack");
	if (stack && (r = node_stack_unpack(stack, "stack", &ret->stack, err)) < 0)
		return r;
	ret->has_stack = stack != NULL;
	json_t *acked = json_object_get(j, "acked");
	if (acked) {
		static const char *const akeys[] = {"epoch", "at_ms", NULL};
		if ((r = mj_link_keys(acked, "acked", akeys, err)) < 0 ||
		    (r = mj_strbuf(acked, "epoch", true, true, ret->acked_epoch,
				   sizeof(ret->acked_epoch), err)) < 0 ||
		    (r = mj_int(acked, "at_ms", true, 0, INT64_MAX, 0, &ret->acked_at_ms, err)) <
			    0) {
			mj_prefix(err, "acked");
			return r;
		}
	}
	json_t *wit = json_object_get(j, "witness");
	if (wit) {
		static const char *const wkeys[] = {"port", "group", "tag", "seq", NULL};
		int64_t port, seq;
		if ((r = mj_link_keys(wit, "witness", wkeys, err)) < 0 ||
		    (r = mj_int(wit, "port", true, 0, 65535, 0, &port, err)) < 0 ||
		    (r = mj_strbuf(wit, "group", true, true, ret->group_id, sizeof(ret->group_id),
				   err)) < 0 ||
		    (r = mj_strbuf(wit, "tag", true, true, ret->group_tag, sizeof(ret->group_tag),
				   err)) < 0 ||
		    (r = mj_int(wit, "seq", false, 0, INT64_MAX, 0, &seq, err)) < 0) {
			mj_prefix(err, "witness");
			return r;
		}
		ret->witness_port = (int)port;
		ret->witness_seq = (uint64_t)seq;
	}
	if ((r = images_unpack(j, ret, err)) < 0 || (r = gpus_unpack(j, ret, err)) < 0 ||
	    (r = serve_unpack(j, ret, err)) < 0) {
		wire_heartbeat_release(ret);
		return r;
	}
	json_t *faults = json_object_get(j, "faults");
	if (faults && (!json_is_array(faults) || json_array_size(faults) > WIRE_MAX_FAULTS)) {
		wire_heartbeat_release(ret);
		return tk_errorf(err, -EINVAL, "faults: must be an array of at most %d texts",
				 WIRE_MAX_FAULTS);
	}
	size_t fi;
	json_t *fv;
	json_array_foreach (faults, fi, fv) {
		if ((r = mj_check_string_value(fv, "faults[]", WIRE_FAULT_MAX - 1, true, err)) <
		    0) {
			wire_heartbeat_release(ret);
			return r;
		}
		snprintf(ret->faults[fi], WIRE_FAULT_MAX, "%s", json_string_value(fv));
		ret->nfaults = (int)fi + 1;
	}
	json_t *tm;
	size_t n;
	if ((r = array_of(j, "nccl", false, WIRE_MAX_CHECKPOINTS, &tm, &n, err)) < 0) {
		wire_heartbeat_release(ret);
		return r;
	}
	if (tm) {
		ret->nccl = xcalloc(n ? n : 1, sizeof(*ret->nccl));
		size_t i;
		json_t *v;
		json_array_foreach (tm, i, v) {
			if ((r = wire_nccl_unpack(v, &ret->nccl[i], err)) < 0) {
				mj_prefix(err, "nccl[%zu]", i);
				wire_heartbeat_release(ret);
				return r;
			}
			ret->nnccl = (int)i + 1;
		}
	}
	if ((r = array_of(j, "metrics", false, WIRE_MAX_CHECKPOINTS, &tm, &n, err)) < 0)
		return r;
	if (tm) {
		static const char *const tkeys[] = {"job", "attempt", "point", "offset", NULL};
		ret->train = xcalloc(n ? n : 1, sizeof(*ret->train));
		size_t i;
		json_t *v;
		json_array_foreach (tm, i, v) {
			struct wire_train *w = &ret->train[i];
			int64_t attempt;
			if ((r = mj_link_keys(v, NULL, tkeys, err)) < 0 ||
			    (r = mj_int(v, "job", true, 1, INT64_MAX, 0, &w->job, err)) < 0 ||
			    (r = mj_int(v, "attempt", true, 1, MODEL_MAX_ATTEMPTS, 0, &attempt,
					err)) < 0 ||
			    (r = mj_int(v, "offset", false, 0, INT64_MAX, 0, &w->offset, err)) <
				    0 ||
			    (r = train_point_unpack(json_object_get(v, "point"), &w->point, err)) <
				    0) {
				mj_prefix(err, "metrics[%zu]", i);
				wire_heartbeat_release(ret);
				return r;
			}
			w->attempt = (int)attempt;
			ret->ntrain = (int)i + 1;
		}
	}
	json_t *ckpts;
	if ((r = array_of(j, "checkpoints", false, WIRE_MAX_CHECKPOINTS, &ckpts, &n, err)) < 0 ||
	    !ckpts)
		return r;
	ret->checkpoints = xcalloc(n ? n : 1, sizeof(*ret->checkpoints));
	size_t i;
	json_t *c;
	json_array_foreach (ckpts, i, c) {
		struct wire_checkpoint *k = &ret->checkpoints[i];
		int64_t attempt;
		if ((r = mj_link_keys(c, NULL, ckeys, err)) < 0 ||
		    (r = mj_int(c, "job", true, 1, INT64_MAX, 0, &k->job, err)) < 0 ||
		    (r = mj_int(c, "attempt", true, 1, MODEL_MAX_ATTEMPTS, 0, &attempt, err)) < 0 ||
		    (r = mj_int(c, "at_ms", true, 0, INT64_MAX, 0, &k->at_ms, err)) < 0) {
			mj_prefix(err, "checkpoints[%zu]", i);
			wire_heartbeat_release(ret);
			return r;
		}
		k->attempt = (int)attempt;
	}
	ret->ncheckpoints = (int)n;
	return 0;
}

json_t *wire_nccl_pack(const struct wire_nccl *n)
{
	json_t *c = json_object();
	for (int t = 0; t < NCCL_TR_MAX; t++)
		if (n->connections[t])
			json_object_set_new(c, model_nccl_transport_name((enum nccl_transport)t),
					    json_integer(n->connections[t]));
	json_t *o = json_pack("{s:I, s:i, s:o}", "job", (json_int_t)n->job, "attempt", n->attempt,
			      "connections", c);
	if (n->network[0])
		json_object_set_new(o, "network", json_string(n->network));
	if (n->line[0])
		json_object_set_new(o, "line", json_string(n->line));
	return o;
}

int wire_nccl_unpack(json_t *v, struct wire_nccl *ret, struct tk_error *err)
{
	static const char *const keys[] = {"job",     "attempt", "connections",
					   "network", "line",	 NULL};
	int64_t attempt;
	int r;
	memset(ret, 0, sizeof(*ret));
	if ((r = mj_link_keys(v, NULL, keys, err)) < 0 ||
	    (r = mj_int(v, "job", true, 1, INT64_MAX, 0, &ret->job, err)) < 0 ||
	    (r = mj_int(v, "attempt", true, 1, MODEL_MAX_ATTEMPTS, 0, &attempt, err)) < 0 ||
	    (r = mj_strbuf(v, "network", false, true, ret->network, sizeof(ret->network), err)) <
		    0 ||
	    (r = mj_strbuf(v, "line", false, true, ret->line, sizeof(ret->line), err)) < 0)
		return r;
	ret->attempt = (int)attempt;
	json_t *c = json_object_get(v, "connections");
	if (c && !json_is_object(c))
		return tk_errorf(err, -EINVAL,
				 "connections: must be an object such as "
				 "{\"net\": 16, \"p2p\": 8}");
	for (int t = 0; c && t < NCCL_TR_MAX; t++) {
		int64_t k;
		const char *name = model_nccl_transport_name((enum nccl_transport)t);
		if ((r = mj_int(c, name, false, 0, INT32_MAX, 0, &k, err)) < 0) {
			mj_prefix(err, "connections");
			return r;
		}
		ret->connections[t] = (int)k;
	}
	return 0;
}

void wire_heartbeat_release(struct wire_heartbeat *m)
{
	free(m->serve);
	m->serve = NULL;
	m->nserve = 0;
	free(m->nccl);
	m->nccl = NULL;
	m->nnccl = 0;
	free(m->train);
	m->train = NULL;
	m->ntrain = 0;
	free(m->checkpoints);
	m->checkpoints = NULL;
	m->ncheckpoints = 0;
	free(m->images);
	free(m->pulls);
	m->images = NULL;
	m->pulls = NULL;
	m->nimages = m->npulls = 0;
}

/* ---- work ------------------------------------------------------------------------ */

const int *work_spec_devices(const struct work_spec *s, int t, int *ret_n)
{
	*ret_n = s->devs_off[t + 1] - s->devs_off[t];
	return &s->devs[s->devs_off[t]];
}

json_t *work_spec_pack(const struct work_spec *s)
{
	json_t *devices = json_array();
	for (int t = 0; t < s->tasks_per_node; t++) {
		int n;
		const int *d = work_spec_devices(s, t, &n);
		json_t *a = json_array();
		for (int k = 0; k < n; k++)
			json_array_append_new(a, json_integer(d[k]));
		json_array_append_new(devices, a);
	}
	json_t *o = json_pack("{s:s, s:o, s:s, s:o, s:s, s:i, s:i, s:i, s:i, s:o, s:i, s:s, "
			      "s:i, s:I, s:I}",
			      "name", s->name, "command", mj_strv_pack(s->argv, s->argc), "cwd",
			      s->cwd, "env", mj_env_pack(s->env, s->nenv), "output", s->output,
			      "node_rank", s->node_rank, "nnodes", s->nnodes, "tasks_per_node",
			      s->tasks_per_node, "world_size", s->world_size, "devices", devices,
			      "milli", s->milli, "master_addr", s->master_addr, "master_port",
			      s->master_port, "time_limit_s", (json_int_t)s->time_limit_s,
			      "grace_s", (json_int_t)s->grace_s);
	if (s->system)
		json_object_set_new(o, "system", json_true());
	json_object_set_new(o, "run_as", json_string(s->run_as));
	if (s->owner[0])
		json_object_set_new(o, "owner", json_string(s->owner));
	if (s->queue[0])
		json_object_set_new(o, "queue", json_string(s->queue));
	if (s->cpus)
		json_object_set_new(o, "cpus", json_integer(s->cpus));
	if (s->mem_mib)
		json_object_set_new(o, "mem_mib", json_integer(s->mem_mib));
	if (s->allow_root)
		json_object_set_new(o, "allow_root", json_true());
	if (s->image) {
		json_object_set_new(o, "image", json_string(s->image));
		json_object_set_new(o, "mounts", mj_strv_pack(s->mounts, s->nmounts));
	}
	if (s->ckpt_marker != CKPT_TENK)
		json_object_set_new(o, "ckpt_marker",
				    json_string(ckpt_marker_name(s->ckpt_marker)));
	if (s->error)
		json_object_set_new(o, "error", json_string(s->error));
	if (s->array_job)
		json_object_set_new(o, "array",
				    json_pack("{s:I, s:i, s:i}", "job", (json_int_t)s->array_job,
					      "index", s->array_index, "count", s->array_count));
	if (s->slurm_env)
		json_object_set_new(o, "slurm_env", json_true());
	if (s->nccl_check)
		json_object_set_new(o, "nccl_check", json_true());
	if (s->pty)
		json_object_set_new(o, "pty", json_true());
	if (s->no_marks)
		json_object_set_new(o, "attempt_marks", json_false());
	if (s->port)
		json_object_set_new(o, "port", json_integer(s->port));
	if (s->signal)
		json_object_set_new(o, "signal",
				    json_pack("{s:i, s:I}", "number", s->signal, "before_s",
					      (json_int_t)s->signal_before_s));
	return o;
}

/* A work spec's array and signal, where it has them. */
static int spec_extras_unpack(json_t *j, struct work_spec *s, struct tk_error *err)
{
	json_t *a = json_object_get(j, "array"), *sg = json_object_get(j, "signal");
	int64_t index, count, num;
	int r;
	if (a) {
		static const char *const keys[] = {"job", "index", "count", NULL};
		if ((r = mj_link_keys(a, "array", keys, err)) < 0 ||
		    (r = mj_int(a, "job", true, 1, INT64_MAX, 0, &s->array_job, err)) < 0 ||
		    (r = mj_int(a, "index", true, 0, MODEL_MAX_ARRAY_INDEX, 0, &index, err)) < 0 ||
		    (r = mj_int(a, "count", true, 1, MODEL_MAX_ARRAY, 1, &count, err)) < 0) {
			mj_prefix(err, "array");
			return r;
		}
		s->array_index = (int)index;
		s->array_count = (int)count;
	}
	if (sg) {
		static const char *const keys[] = {"number", "before_s", NULL};
		if ((r = mj_link_keys(sg, "signal", keys, err)) < 0 ||
		    (r = mj_int(sg, "number", true, 1, 64, 0, &num, err)) < 0 ||
		    (r = mj_int(sg, "before_s", true, 0, 65535, 0, &s->signal_before_s, err)) < 0) {
			mj_prefix(err, "signal");
			return r;
		}
		s->signal = (int)num;
	}
	return 0;
}

/* "devices": one array of device indices per task. */
static int devices_unpack(json_t *j, struct work_spec *s, struct tk_error *err)
{
	json_t *devs = json_object_get(j, "devices");
	if (!json_is_array(devs) || json_array_size(devs) != (size_t)s->tasks_per_node)
		return tk_errorf(err, -EINVAL, "devices: must list the devices of every task");
	size_t total = 0, t;
	json_t *a;
	json_array_foreach (devs, t, a) {
		if (!json_is_array(a) || json_array_size(a) > MODEL_MAX_ACCELS)
			return tk_errorf(err, -EINVAL,
					 "devices[%zu]: must be an array of at most %d devices", t,
					 MODEL_MAX_ACCELS);
		total += json_array_size(a);
	}
	s->devs_off = xcalloc((size_t)s->tasks_per_node + 1, sizeof(int));
	s->devs = xcalloc(total ? total : 1, sizeof(int));
	int k = 0;
	json_array_foreach (devs, t, a) {
		size_t i;
		json_t *d;
		s->devs_off[t] = k;
		json_array_foreach (a, i, d) {
			json_int_t v = json_is_integer(d) ? json_integer_value(d) : -1;
			if (v < 0 || v >= MODEL_MAX_ACCELS)
				return tk_errorf(err, -EINVAL,
						 "devices[%zu][%zu]: must be a device index from 0 "
						 "to %d",
						 t, i, MODEL_MAX_ACCELS - 1);
			s->devs[k++] = (int)v;
		}
	}
	s->devs_off[s->tasks_per_node] = k;
	return 0;
}

int work_spec_unpack(json_t *j, struct work_spec *ret, struct tk_error *err)
{
	static const char *const keys[] = {
		"name",	       "command",      "cwd",		"env",
		"output",      "node_rank",    "nnodes",	"tasks_per_node",
		"world_size",  "devices",      "milli",		"master_addr",
		"master_port", "time_limit_s", "grace_s",	"system",
		"run_as",      "allow_root",   "cpus",		"mem_mib",
		"image",       "mounts",       "ckpt_marker",	"owner",
		"queue",       "error",	       "array",		"slurm_env",
		"signal",      "pty",	       "attempt_marks", "nccl_check",
		"port",	       NULL,
	};
	struct work_spec s = {0};
	bool marks = true;
	int64_t nnodes, rank, tpn, world, milli, port, cpus, sport;
	int r;
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_int(j, "nnodes", true, 1, MODEL_MAX_NODES, 1, &nnodes, err)) < 0 ||
	    (r = mj_int(j, "node_rank", true, 0, MODEL_MAX_NODES - 1, 0, &rank, err)) < 0 ||
	    (r = mj_int(j, "tasks_per_node", true, 1, MODEL_MAX_TASKS_PER_NODE, 1, &tpn, err)) <
		    0 ||
	    (r = mj_int(j, "world_size", true, 1, MODEL_MAX_NODES * MODEL_MAX_TASKS_PER_NODE, 1,
			&world, err)) < 0 ||
	    (r = mj_int(j, "milli", true, 0, MODEL_MILLI, 0, &milli, err)) < 0 ||
	    (r = mj_int(j, "master_port", true, 0, 65535, 0, &port, err)) < 0 ||
	    (r = mj_int(j, "time_limit_s", true, 0, MODEL_MAX_TIME_LIMIT_S, 0, &s.time_limit_s,
			err)) < 0 ||
	    (r = mj_int(j, "grace_s", true, 0, MODEL_MAX_GRACE_S, 0, &s.grace_s, err)) < 0 ||
	    (r = mj_bool(j, "system", false, false, &s.system, err)) < 0 ||
	    (r = mj_bool(j, "allow_root", false, false, &s.allow_root, err)) < 0 ||
	    (r = mj_int(j, "cpus", false, 0, MODEL_MAX_CPUS, 0, &cpus, err)) < 0 ||
	    (r = mj_int(j, "mem_mib", false, 0, MODEL_MAX_MEM_MIB, 0, &s.mem_mib, err)) < 0 ||
	    (r = mj_strbuf(j, "run_as", !s.system, true, s.run_as, sizeof(s.run_as), err)) < 0 ||
	    (r = mj_strbuf(j, "owner", false, true, s.owner, sizeof(s.owner), err)) < 0 ||
	    (r = mj_strbuf(j, "queue", false, true, s.queue, sizeof(s.queue), err)) < 0 ||
	    (r = mj_str(j, "name", true, MODEL_NAME_MAX - 1, true, NULL, &s.name, err)) < 0 ||
	    (r = mj_str(j, "cwd", true, MODEL_MAX_PATH, false, NULL, &s.cwd, err)) < 0 ||
	    (r = mj_str(j, "output", true, MODEL_MAX_PATH, false, NULL, &s.output, err)) < 0 ||
	    (r = mj_strbuf(j, "master_addr", true, true, s.master_addr, sizeof(s.master_addr),
			   err)) < 0 ||
	    (r = mj_strv_unpack(j, "command", true, MODEL_MAX_ARGS, MODEL_MAX_ARG_BYTES,
				MODEL_MAX_ARG_BYTES, &s.argv, &s.argc, err)) < 0 ||
	    (r = mj_env_unpack(j, "env", &s.env, &s.nenv, err)) < 0 ||
	    (r = mj_str(j, "image", false, MODEL_IMAGE_MAX - 1, true, NULL, &s.image, err)) < 0 ||
	    (r = mj_strv_unpack(j, "mounts", false, MODEL_MAX_MOUNTS,
				(size_t)MODEL_MAX_MOUNTS * 2 * MODEL_MAX_PATH, 2 * MODEL_MAX_PATH,
				&s.mounts, &s.nmounts, err)) < 0 ||
	    (r = mj_str(j, "error", false, MODEL_MAX_PATH, false, NULL, &s.error, err)) < 0 ||
	    (r = mj_bool(j, "slurm_env", false, false, &s.slurm_env, err)) < 0 ||
	    (r = mj_bool(j, "nccl_check", false, false, &s.nccl_check, err)) < 0 ||
	    (r = mj_bool(j, "pty", false, false, &s.pty, err)) < 0 ||
	    (r = mj_bool(j, "attempt_marks", false, true, &marks, err)) < 0 ||
	    (r = mj_int(j, "port", false, 0, 65535, 0, &sport, err)) < 0 ||
	    (r = spec_extras_unpack(j, &s, err)) < 0)
		goto fail;
	s.no_marks = !marks;
	s.port = (int)sport;
	if (s.image && !model_image_valid(s.image)) {
		r = tk_errorf(err, -EINVAL, "image: \"%.64s\" is not an image reference", s.image);
		goto fail;
	}
	char marker[16] = "";
	if ((r = mj_strbuf(j, "ckpt_marker", false, true, marker, sizeof(marker), err)) < 0)
		goto fail;
	if (marker[0] && ckpt_marker_parse(marker, &s.ckpt_marker) < 0) {
		r = tk_errorf(err, -EINVAL, "ckpt_marker: unknown \"%s\"", marker);
		goto fail;
	}
	for (int i = 0; i < s.nmounts; i++) {
		struct mount_spec m;
		if ((r = model_mount_parse(s.mounts[i], false, &m, err)) < 0) {
			mj_prefix(err, "mounts[%d]", i);
			goto fail;
		}
	}
	if (s.run_as[0] ? !model_unix_user_valid(s.run_as) : !s.system) {
		r = tk_errorf(err, -EINVAL, "run_as: \"%s\" is not a Unix account name", s.run_as);
		goto fail;
	}
	if (!json_is_object(json_object_get(j, "env"))) {
		r = tk_errorf(err, -EINVAL, "env: must be an object");
		goto fail;
	}
	if (rank >= nnodes || world != nnodes * tpn) {
		r = tk_errorf(
			err, -EINVAL,
			"node_rank %lld of %lld nodes, world_size %lld of %lld tasks per node: "
			"they do not agree",
			(long long)rank, (long long)nnodes, (long long)world, (long long)tpn);
		goto fail;
	}
	s.nnodes = (int)nnodes;
	s.node_rank = (int)rank;
	s.tasks_per_node = (int)tpn;
	s.world_size = (int)world;
	s.milli = (int)milli;
	s.master_port = (int)port;
	s.cpus = (int)cpus;
	if ((r = devices_unpack(j, &s, err)) < 0)
		goto fail;
	*ret = s;
	return 0;
fail:
	work_spec_release(&s);
	return r;
}

void work_spec_release(struct work_spec *s)
{
	free(s->name);
	mj_strv_free(s->argv, s->argc);
	free(s->cwd);
	mj_strv_free(s->env, s->nenv);
	free(s->output);
	free(s->error);
	free(s->devs_off);
	free(s->devs);
	free(s->image);
	mj_strv_free(s->mounts, s->nmounts);
	memset(s, 0, sizeof(*s));
}

json_t *wire_ptys_pack(const struct wire_pty *p, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a,
				      json_pack("{s:s, s:I, s:i}", "session", p[i].session, "job",
						(json_int_t)p[i].job, "attempt", p[i].attempt));
	return a;
}

static int ptys_unpack(json_t *a, struct wire_pty **ret, int *ret_n, struct tk_error *err)
{
	static const char *const keys[] = {"session", "job", "attempt", NULL};
	*ret = NULL;
	*ret_n = 0;
	if (!a)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > WIRE_MAX_PTYS)
		return tk_errorf(err, -EINVAL, "ptys: must be an array of at most %d",
				 WIRE_MAX_PTYS);
	struct wire_pty *p = xcalloc(json_array_size(a) + 1, sizeof(*p));
	size_t i;
	json_t *x;
	json_array_foreach (a, i, x) {
		int64_t job, att;
		int r;
		if ((r = mj_link_keys(x, NULL, keys, err)) < 0 ||
		    (r = mj_strbuf(x, "session", true, true, p[i].session, sizeof(p[i].session),
				   err)) < 0 ||
		    (r = mj_int(x, "job", true, 1, INT64_MAX, 1, &job, err)) < 0 ||
		    (r = mj_int(x, "attempt", true, 1, MODEL_MAX_ATTEMPTS, 1, &att, err)) < 0) {
			mj_prefix(err, "ptys[%zu]", i);
			free(p);
			return r;
		}
		if (strspn(p[i].session, "0123456789abcdef") != strlen(p[i].session)) {
			free(p);
			return tk_errorf(err, -EINVAL, "ptys[%zu].session: must be hex digits", i);
		}
		p[i].job = job;
		p[i].attempt = (int)att;
	}
	*ret = p;
	*ret_n = (int)json_array_size(a);
	return 0;
}

json_t *wire_services_pack(const struct wire_service *v, int n)
{
	json_t *arr = json_array();
	for (int i = 0; i < n; i++) {
		json_t *ends = json_array();
		for (int k = 0; k < v[i].nends; k++)
			json_array_append_new(ends,
					      json_pack("{s:s, s:i}", "addr", v[i].ends[k].addr,
							"port", v[i].ends[k].port));
		json_array_append_new(arr, json_pack("{s:s, s:i, s:o}", "name", v[i].name, "port",
						     v[i].port, "endpoints", ends));
	}
	return arr;
}

void wire_services_free(struct wire_service *v, int n)
{
	for (int i = 0; v && i < n; i++)
		free(v[i].ends);
	free(v);
}

int wire_services_unpack(json_t *arr, struct wire_service **ret, int *ret_n, struct tk_error *err)
{
	static const char *const keys[] = {"name", "port", "endpoints", NULL};
	static const char *const ekeys[] = {"addr", "port", NULL};
	if (!json_is_array(arr) || json_array_size(arr) > WIRE_MAX_SERVICES)
		return tk_errorf(err, -EINVAL, "services: a list of at most %d", WIRE_MAX_SERVICES);
	size_t n = json_array_size(arr), i;
	struct wire_service *v = xcalloc(n ? n : 1, sizeof(*v));
	json_t *o;
	int r = 0;
	json_array_foreach (arr, i, o) {
		struct wire_service *sv = &v[i];
		int64_t port;
		json_t *ends = json_object_get(o, "endpoints");
		if ((r = mj_link_keys(o, NULL, keys, err)) < 0 ||
		    (r = mj_strbuf(o, "name", true, true, sv->name, sizeof(sv->name), err)) < 0 ||
		    (r = mj_int(o, "port", true, 1, 65535, 0, &port, err)) < 0) {
			mj_prefix(err, "services[%zu]", i);
			goto fail;
		}
		sv->port = (int)port;
		if (!json_is_array(ends) || json_array_size(ends) > WIRE_MAX_ENDPOINTS) {
			r = tk_errorf(err, -EINVAL, "services[%zu].endpoints: a list of at most %d",
				      i, WIRE_MAX_ENDPOINTS);
			goto fail;
		}
		sv->ends = xcalloc(json_array_size(ends) + 1, sizeof(*sv->ends));
		size_t k;
		json_t *e;
		json_array_foreach (ends, k, e) {
			if ((r = mj_link_keys(e, NULL, ekeys, err)) < 0 ||
			    (r = mj_strbuf(e, "addr", true, true, sv->ends[k].addr,
					   sizeof(sv->ends[k].addr), err)) < 0 ||
			    (r = mj_int(e, "port", true, 1, 65535, 0, &port, err)) < 0) {
				mj_prefix(err, "services[%zu].endpoints[%zu]", i, k);
				goto fail;
			}
			sv->ends[k].port = (int)port;
			sv->nends = (int)k + 1;
		}
	}
	*ret = v;
	*ret_n = (int)n;
	return 0;
fail:
	wire_services_free(v, (int)n);
	return r;
}

/* A work item's "probe": the probe, and the port it is run at. */
static int probe_unpack(json_t *pr, struct work_item *w, struct tk_error *err)
{
	int64_t port;
	int r;
	json_t *copy = json_copy(pr);
	json_object_del(copy, "port");
	r = job_probe_unpack(copy, &w->probe, err);
	json_decref(copy);
	if (r < 0)
		return r;
	if ((r = mj_int(pr, "port", true, 1, 65535, 0, &port, err)) < 0) {
		mj_prefix(err, "probe");
		return r;
	}
	w->port = (int)port;
	w->has_probe = true;
	return 0;
}

json_t *wire_work_pack(const struct wire_work *m)
{
	json_t *o = json_pack("{s:s, s:I}", "epoch", m->epoch, "gen", (json_int_t)m->gen);
	if (m->nlogs)
		json_object_set_new(o, "logs", wire_log_fetches_pack(m->logs, m->nlogs));
	if (m->nptys)
		json_object_set_new(o, "ptys", wire_ptys_pack(m->ptys, m->nptys));
	if (m->unchanged) {
		json_object_set_new(o, "unchanged", json_true());
		return o;
	}
	json_t *tasks = json_array();
	for (int i = 0; i < m->nitems; i++) {
		const struct work_item *w = &m->items[i];
		json_t *t =
			json_pack("{s:I, s:i}", "job", (json_int_t)w->job, "attempt", w->attempt);
		if (w->limit_s >= 0)
			json_object_set_new(t, "limit_s", json_integer(w->limit_s));
		if (w->spec)
			json_object_set_new(t, "spec", work_spec_pack(w->spec));
		if (w->digest[0])
			json_object_set_new(t, "digest", json_string(w->digest));
		if (w->signal_now)
			json_object_set_new(t, "signal_now", json_integer(w->signal_now));
		if (w->has_probe) {
			json_t *pr = job_probe_pack(&w->probe);
			json_object_set_new(pr, "port", json_integer(w->port));
			json_object_set_new(t, "probe", pr);
		}
		if (w->ckpt_store[0]) {
			json_t *ck = json_pack("{s:s, s:s, s:I, s:i, s:b}", "store", w->ckpt_store,
					       "restore_tag", w->restore_tag, "restore_step",
					       (json_int_t)w->restore_step, "restore_attempt",
					       w->restore_attempt, "restore_go", w->restore_go);
			if (w->restore_from > 0)
				json_object_set_new(ck, "restore_node",
						    json_integer(w->restore_from - 1));
			if (w->nmarked) {
				json_t *mk = json_array();
				for (int k = 0; k < w->nmarked; k++)
					json_array_append_new(
						mk,
						json_pack("{s:s, s:I}", "tag", w->marked[k].tag,
							  "step", (json_int_t)w->marked[k].step));
				json_object_set_new(ck, "marked", mk);
			}
			if (w->nkeep) {
				json_t *kp = json_array();
				for (int k = 0; k < w->nkeep; k++)
					json_array_append_new(
						kp,
						json_pack("{s:s, s:I, s:i}", "tag", w->keep[k].tag,
							  "step", (json_int_t)w->keep[k].step,
							  "attempt", w->keep[k].attempt));
				json_object_set_new(ck, "keep", kp);
			}
			json_object_set_new(t, "checkpoints", ck);
		}
		json_array_append_new(tasks, t);
	}
	json_object_set_new(o, "tasks", tasks);
	if (m->has_services)
		json_object_set_new(o, "services", wire_services_pack(m->services, m->nservices));
	if (m->npulls) {
		json_t *pl = json_array();
		for (int i = 0; i < m->npulls; i++)
			json_array_append_new(pl, json_string(m->pulls[i]));
		json_object_set_new(o, "pulls", pl);
	}
	return o;
}

int wire_work_unpack(json_t *j, struct wire_work *ret, struct tk_error *err)
{
	static const char *const keys[] = {"epoch", "gen",  "unchanged", "tasks", "pulls",
					   "logs",  "ptys", "services",	 NULL};
	static const char *const tkeys[] = {"job",	  "attempt",	 "spec",
					    "digest",	  "checkpoints", "limit_s",
					    "signal_now", "probe",	 NULL};
	static const char *const ckeys[] = {
		"store",      "restore_tag", "restore_step", "restore_attempt",
		"restore_go", "marked",	     "keep",	     "restore_node",
		NULL};
	int64_t gen;
	int r;
	memset(ret, 0, sizeof(*ret));
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(j, "epoch", true, true, ret->epoch, sizeof(ret->epoch), err)) < 0 ||
	    (r = mj_int(j, "gen", true, 0, INT64_MAX, 0, &gen, err)) < 0 ||
	    (r = mj_bool(j, "unchanged", false, false, &ret->unchanged, err)) < 0 ||
	    (r = wire_log_fetches_unpack(json_object_get(j, "logs"), &ret->logs, &ret->nlogs,
					 err)) < 0)
		return r;
	if ((r = ptys_unpack(json_object_get(j, "ptys"), &ret->ptys, &ret->nptys, err)) < 0) {
		wire_work_release(ret);
		return r;
	}
	ret->gen = (uint64_t)gen;
	json_t *tasks = json_object_get(j, "tasks");
	if (ret->unchanged) {
		if (tasks)
			return tk_errorf(err, -EINVAL, "tasks: an unchanged answer lists none");
		return 0;
	}
	size_t n;
	if ((r = array_of(j, "tasks", true, WIRE_MAX_WORK, &tasks, &n, err)) < 0)
		return r;
	ret->items = xcalloc(n ? n : 1, sizeof(*ret->items));
	size_t i;
	json_t *t;
	json_array_foreach (tasks, i, t) {
		struct work_item *w = &ret->items[i];
		int64_t attempt, sig;
		if ((r = mj_link_keys(t, NULL, tkeys, err)) < 0 ||
		    (r = mj_int(t, "job", true, 1, INT64_MAX, 0, &w->job, err)) < 0 ||
		    (r = mj_int(t, "attempt", true, 1, MODEL_MAX_ATTEMPTS, 0, &attempt, err)) < 0 ||
		    (r = mj_int(t, "limit_s", false, 0, MODEL_MAX_TIME_LIMIT_S, -1, &w->limit_s,
				err)) < 0 ||
		    (r = mj_strbuf(t, "digest", false, true, w->digest, sizeof(w->digest), err)) <
			    0 ||
		    (w->digest[0] && (r = digest_check(w->digest, "digest", err)) < 0) ||
		    (r = mj_int(t, "signal_now", false, 0, 64, 0, &sig, err)) < 0) {
			mj_prefix(err, "tasks[%zu]", i);
			goto fail;
		}
		w->attempt = (int)attempt;
		w->signal_now = (int)sig;
		ret->nitems = (int)i + 1;
		json_t *pr = json_object_get(t, "probe");
		if (pr && (r = probe_unpack(pr, w, err)) < 0) {
			mj_prefix(err, "tasks[%zu]", i);
			goto fail;
		}
		json_t *ck = json_object_get(t, "checkpoints");
		int64_t ra = 0, rn;
		if (ck) {
			if ((r = mj_link_keys(ck, "checkpoints", ckeys, err)) < 0 ||
			    (r = mj_strbuf(ck, "store", true, true, w->ckpt_store,
					   sizeof(w->ckpt_store), err)) < 0 ||
			    (r = mj_strbuf(ck, "restore_tag", true, true, w->restore_tag,
					   sizeof(w->restore_tag), err)) < 0 ||
			    (r = mj_int(ck, "restore_step", true, 0, INT64_MAX, 0, &w->restore_step,
					err)) < 0 ||
			    (r = mj_int(ck, "restore_attempt", true, 0, MODEL_MAX_ATTEMPTS, 0, &ra,
					err)) < 0 ||
			    (r = mj_bool(ck, "restore_go", true, false, &w->restore_go, err)) < 0 ||
			    (r = mj_int(ck, "restore_node", false, -1, MODEL_MAX_NODES - 1, -1, &rn,
					err)) < 0) {
				mj_prefix(err, "tasks[%zu]", i);
				goto fail;
			}
			w->restore_from = (int)rn + 1;
			json_t *mk = json_object_get(ck, "marked");
			if (mk &&
			    (!json_is_array(mk) || json_array_size(mk) > MODEL_MAX_CKPT_PENDING)) {
				r = tk_errorf(err, -EINVAL,
					      "tasks[%zu].checkpoints.marked: at most %d tags", i,
					      MODEL_MAX_CKPT_PENDING);
				goto fail;
			}
			size_t k;
			json_t *mv;
			json_array_foreach (mk, k, mv) {
				int64_t st;
				if ((r = mj_strbuf(mv, "tag", true, true, w->marked[k].tag,
						   sizeof(w->marked[k].tag), err)) < 0 ||
				    (r = mj_int(mv, "step", true, 0, INT64_MAX, 0, &st, err)) < 0) {
					mj_prefix(err, "tasks[%zu].checkpoints.marked[%zu]", i, k);
					goto fail;
				}
				if (!model_ckpt_tag_valid(w->marked[k].tag)) {
					r = tk_errorf(
						err, -EINVAL,
						"tasks[%zu].checkpoints.marked[%zu]: not a tag", i,
						k);
					goto fail;
				}
				w->marked[k].step = st;
				w->nmarked = (int)k + 1;
			}
			json_t *kp = json_object_get(ck, "keep");
			if (kp && (!json_is_array(kp) || json_array_size(kp) > MODEL_MAX_CKPTS)) {
				r = tk_errorf(err, -EINVAL,
					      "tasks[%zu].checkpoints.keep: at most %d tags", i,
					      MODEL_MAX_CKPTS);
				goto fail;
			}
			json_array_foreach (kp, k, mv) {
				int64_t st, at;
				if ((r = mj_strbuf(mv, "tag", true, true, w->keep[k].tag,
						   sizeof(w->keep[k].tag), err)) < 0 ||
				    (r = mj_int(mv, "step", true, 0, INT64_MAX, 0, &st, err)) < 0 ||
				    (r = mj_int(mv, "attempt", true, 1, MODEL_MAX_ATTEMPTS, 1, &at,
						err)) < 0) {
					mj_prefix(err, "tasks[%zu].checkpoints.keep[%zu]", i, k);
					goto fail;
				}
				if (!model_ckpt_tag_valid(w->keep[k].tag)) {
					r = tk_errorf(err, -EINVAL,
						      "tasks[%zu].checkpoints.keep[%zu]: not a tag",
						      i, k);
					goto fail;
				}
				w->keep[k].step = st;
				w->keep[k].attempt = (int)at;
				w->nkeep = (int)k + 1;
			}
			if (w->ckpt_store[0] != '/' ||
			    (w->restore_tag[0] && !model_ckpt_tag_valid(w->restore_tag))) {
				r = tk_errorf(
					err, -EINVAL,
					"tasks[%zu].checkpoints: needs an absolute store and a "
					"valid tag",
					i);
				goto fail;
			}
		}
		w->restore_attempt = (int)ra;
		json_t *spec = json_object_get(t, "spec");
		if (!spec)
			continue;
		w->spec = xcalloc(1, sizeof(*w->spec));
		if ((r = work_spec_unpack(spec, w->spec, err)) < 0) {
			free(w->spec);
			w->spec = NULL;
			mj_prefix(err, "tasks[%zu].spec", i);
			goto fail;
		}
	}
	json_t *pl;
	size_t np;
	if ((r = array_of(j, "pulls", false, WIRE_MAX_IMAGES, &pl, &np, err)) < 0)
		goto fail;
	ret->pulls = xcalloc(np ? np : 1, sizeof(*ret->pulls));
	json_array_foreach (pl, i, t) {
		const char *ref = json_string_value(t);
		if (!ref || !model_image_valid(ref)) {
			r = tk_errorf(err, -EINVAL, "pulls[%zu]: must be an image reference", i);
			goto fail;
		}
		snprintf(ret->pulls[ret->npulls++], MODEL_IMAGE_MAX, "%s", ref);
	}
	json_t *sv = json_object_get(j, "services");
	if (sv) {
		if ((r = wire_services_unpack(sv, &ret->services, &ret->nservices, err)) < 0)
			goto fail;
		ret->has_services = true;
	}
	return 0;
fail:
	wire_work_release(ret);
	return r;
}

void wire_work_release(struct wire_work *m)
{
	for (int i = 0; i < m->nitems; i++) {
		if (m->items[i].spec) {
			work_spec_release(m->items[i].spec);
			free(m->items[i].spec);
		}
	}
	free(m->items);
	m->items = NULL;
	m->nitems = 0;
	free(m->pulls);
	m->pulls = NULL;
	m->npulls = 0;
	wire_log_fetches_release(m->logs, m->nlogs);
	m->logs = NULL;
	m->nlogs = 0;
	free(m->ptys);
	m->ptys = NULL;
	m->nptys = 0;
	wire_services_free(m->services, m->nservices);
	m->services = NULL;
	m->nservices = 0;
	m->has_services = false;
}

/* ---- events ----------------------------------------------------------------------- */

static const char *const event_type_names[TASK_EVENT_TYPE_MAX] = {
	[TASK_EVENT_STARTED] = "started",	[TASK_EVENT_EXITED] = "exited",
	[TASK_EVENT_PULLING] = "pulling",	[TASK_EVENT_IMAGE] = "image",
	[TASK_EVENT_CHECKPOINT] = "checkpoint", [TASK_EVENT_RESTORED] = "restored",
	[TASK_EVENT_READY] = "ready",		[TASK_EVENT_UNREADY] = "unready",
};

json_t *task_event_pack(const struct task_event *e)
{
	json_t *o = json_pack("{s:I, s:i, s:i, s:s, s:I}", "job", (json_int_t)e->job, "attempt",
			      e->attempt, "rank", e->rank, "type", event_type_names[e->type],
			      "at_ms", (json_int_t)e->at_ms);
	if (e->type == TASK_EVENT_EXITED) {
		json_object_set_new(o, "exit_code", json_integer(e->exit_code));
		json_object_set_new(o, "signal", json_integer(e->signal));
		json_object_set_new(o, "cause", json_string(exit_cause_name(e->cause)));
		if (e->detail[0])
			json_object_set_new(o, "detail", json_string(e->detail));
		if (e->cpu_ms || e->mem_peak_mib) {
			json_object_set_new(o, "cpu_ms", json_integer(e->cpu_ms));
			json_object_set_new(o, "mem_peak_mib", json_integer(e->mem_peak_mib));
		}
		if (e->energy_mj >= 0)
			json_object_set_new(o, "energy_mj", json_integer(e->energy_mj));
		if (e->gpu_busy_ms)
			json_object_set_new(o, "gpu_busy_ms", json_integer(e->gpu_busy_ms));
		if (e->node_fault)
			json_object_set_new(o, "node_fault", json_true());
		if (e->fault_reported)
			json_object_set_new(o, "fault_reported", json_true());
	}
	if (e->type == TASK_EVENT_STARTED && e->out_from)
		json_object_set_new(o, "out_from", json_integer(e->out_from));
	if (e->type == TASK_EVENT_STARTED && e->err_from)
		json_object_set_new(o, "err_from", json_integer(e->err_from));
	if (e->type == TASK_EVENT_IMAGE || e->type == TASK_EVENT_CHECKPOINT)
		json_object_set_new(o, "digest", json_string(e->digest));
	if (e->type == TASK_EVENT_UNREADY && e->detail[0])
		json_object_set_new(o, "detail", json_string(e->detail));
	if (e->type == TASK_EVENT_CHECKPOINT || e->type == TASK_EVENT_RESTORED) {
		json_object_set_new(o, "tag", json_string(e->tag));
		json_object_set_new(o, "step", json_integer(e->step));
		json_object_set_new(o, "bytes", json_integer(e->bytes));
		json_object_set_new(o, "dur_ms", json_integer(e->dur_ms));
		if (e->write_ms)
			json_object_set_new(o, "write_ms", json_integer(e->write_ms));
		if (e->detail[0])
			json_object_set_new(o, "detail", json_string(e->detail));
	}
	return o;
}

int task_event_unpack(json_t *j, struct task_event *ret, struct tk_error *err)
{
	static const char *const keys[] = {
		"job",	    "attempt",	"rank",	      "type",	  "at_ms",	    "exit_code",
		"signal",   "cause",	"detail",     "cpu_ms",	  "mem_peak_mib",   "digest",
		"tag",	    "step",	"bytes",      "dur_ms",	  "energy_mj",	    "gpu_busy_ms",
		"out_from", "err_from", "node_fault", "write_ms", "fault_reported", NULL};
	char type[16] = "", cause[24] = "";
	int64_t attempt, rank, code, sig;
	int r;
	memset(ret, 0, sizeof(*ret));
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_int(j, "job", true, 1, INT64_MAX, 0, &ret->job, err)) < 0 ||
	    (r = mj_int(j, "attempt", true, 1, MODEL_MAX_ATTEMPTS, 0, &attempt, err)) < 0 ||
	    (r = mj_int(j, "rank", true, 0, MODEL_MAX_NODES * MODEL_MAX_TASKS_PER_NODE, 0, &rank,
			err)) < 0 ||
	    (r = mj_strbuf(j, "type", true, true, type, sizeof(type), err)) < 0 ||
	    (r = mj_int(j, "at_ms", true, 0, INT64_MAX, 0, &ret->at_ms, err)) < 0 ||
	    (r = mj_int(j, "exit_code", false, 0, 255, 0, &code, err)) < 0 ||
	    (r = mj_int(j, "signal", false, 0, 128, 0, &sig, err)) < 0 ||
	    (r = mj_strbuf(j, "cause", false, true, cause, sizeof(cause), err)) < 0 ||
	    (r = mj_strbuf(j, "detail", false, true, ret->detail, sizeof(ret->detail), err)) < 0 ||
	    (r = mj_int(j, "cpu_ms", false, 0, INT64_MAX, 0, &ret->cpu_ms, err)) < 0 ||
	    (r = mj_int(j, "mem_peak_mib", false, 0, INT64_MAX, 0, &ret->mem_peak_mib, err)) < 0 ||
	    (r = mj_int(j, "energy_mj", false, 0, INT64_MAX, -1, &ret->energy_mj, err)) < 0 ||
	    (r = mj_int(j, "gpu_busy_ms", false, 0, INT64_MAX, 0, &ret->gpu_busy_ms, err)) < 0 ||
	    (r = mj_strbuf(j, "digest", false, true, ret->digest, sizeof(ret->digest), err)) < 0 ||
	    (r = mj_strbuf(j, "tag", false, true, ret->tag, sizeof(ret->tag), err)) < 0 ||
	    (r = mj_int(j, "step", false, 0, INT64_MAX, 0, &ret->step, err)) < 0 ||
	    (r = mj_int(j, "bytes", false, 0, INT64_MAX, 0, &ret->bytes, err)) < 0 ||
	    (r = mj_int(j, "dur_ms", false, 0, INT64_MAX, 0, &ret->dur_ms, err)) < 0 ||
	    (r = mj_int(j, "write_ms", false, 0, INT64_MAX, 0, &ret->write_ms, err)) < 0 ||
	    (r = mj_int(j, "out_from", false, 0, INT64_MAX, 0, &ret->out_from, err)) < 0 ||
	    (r = mj_int(j, "err_from", false, 0, INT64_MAX, 0, &ret->err_from, err)) < 0 ||
	    (r = mj_bool(j, "node_fault", false, false, &ret->node_fault, err)) < 0 ||
	    (r = mj_bool(j, "fault_reported", false, false, &ret->fault_reported, err)) < 0)
		return r;
	int t = 0;
	while (t < TASK_EVENT_TYPE_MAX && strcmp(type, event_type_names[t]) != 0)
		t++;
	if (t == TASK_EVENT_TYPE_MAX)
		return tk_errorf(err, -EINVAL,
				 "type: must be \"started\", \"exited\", \"pulling\", "
				 "\"image\", \"checkpoint\", \"restored\", \"ready\" or "
				 "\"unready\", got \"%s\"",
				 type);
	ret->type = (enum task_event_type)t;
	if ((ret->type == TASK_EVENT_IMAGE || ret->type == TASK_EVENT_CHECKPOINT) &&
	    (r = digest_check(ret->digest, "digest", err)) < 0)
		return r;
	if ((ret->type == TASK_EVENT_CHECKPOINT || ret->type == TASK_EVENT_RESTORED) &&
	    !model_ckpt_tag_valid(ret->tag))
		return tk_errorf(err, -EINVAL, "tag: \"%.64s\" is not a checkpoint tag", ret->tag);
	if (!cause[0])
		ret->cause = sig ? EXIT_SIGNALLED : EXIT_EXITED;
	else if (exit_cause_parse(cause, &ret->cause) < 0)
		return tk_errorf(err, -EINVAL,
				 "cause: must be exited, signalled, timeout, cancelled, preempted, "
				 "lost, launch_failed, oom, disk_limit or unhealthy, got \"%s\"",
				 cause);
	ret->attempt = (int)attempt;
	ret->rank = (int)rank;
	ret->exit_code = (int)code;
	ret->signal = (int)sig;
	return 0;
}

json_t *wire_events_pack(const struct wire_events *m)
{
	json_t *arr = json_array();
	for (int i = 0; i < m->nevents; i++)
		json_array_append_new(arr, task_event_pack(&m->events[i]));
	return json_pack("{s:s, s:s, s:o}", "node", m->node, "agent_id", m->agent_id, "events",
			 arr);
}

int wire_events_unpack(json_t *j, struct wire_events *ret, struct tk_error *err)
{
	static const char *const keys[] = {"node", "agent_id", "events", NULL};
	int r;
	memset(ret, 0, sizeof(*ret));
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(j, "node", true, true, ret->node, sizeof(ret->node), err)) < 0 ||
	    (r = agent_id_unpack(j, ret->agent_id, err)) < 0)
		return r;
	json_t *events;
	size_t n;
	if ((r = array_of(j, "events", true, WIRE_MAX_EVENTS, &events, &n, err)) < 0)
		return r;
	ret->events = xcalloc(n ? n : 1, sizeof(*ret->events));
	size_t i;
	json_t *e;
	json_array_foreach (events, i, e) {
		if ((r = task_event_unpack(e, &ret->events[i], err)) < 0) {
			mj_prefix(err, "events[%zu]", i);
			wire_events_release(ret);
			return r;
		}
	}
	ret->nevents = (int)n;
	return 0;
}

void wire_events_release(struct wire_events *m)
{
	free(m->events);
	m->events = NULL;
	m->nevents = 0;
}

/* ---- task output, through the server ------------------------------------------------ */

json_t *wire_log_fetches_pack(const struct wire_log_fetch *f, int n)
{
	json_t *arr = json_array();
	for (int i = 0; i < n; i++) {
		json_t *files = json_array();
		for (int k = 0; k < f[i].nfiles; k++) {
			const struct wire_log_file *x = &f[i].files[k];
			json_array_append_new(
				files, json_pack("{s:i, s:s, s:I, s:I, s:i}", "rank", x->rank,
						 "path", x->path, "offset", (json_int_t)x->offset,
						 "max", (json_int_t)x->max, "tail", x->tail));
		}
		json_array_append_new(arr, json_pack("{s:I, s:s, s:o}", "id", (json_int_t)f[i].id,
						     "run_as", f[i].run_as, "files", files));
	}
	return arr;
}

static int log_file_unpack(json_t *j, struct wire_log_file *x, struct tk_error *err)
{
	static const char *const keys[] = {"rank", "path", "offset", "max", "tail", NULL};
	int64_t rank, tail;
	int r;
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_int(j, "rank", true, 0, MODEL_MAX_NODES * MODEL_MAX_TASKS_PER_NODE, 0, &rank,
			err)) < 0 ||
	    (r = mj_str(j, "path", true, MODEL_MAX_PATH, false, NULL, &x->path, err)) < 0 ||
	    (r = mj_int(j, "offset", true, -1, INT64_MAX, 0, &x->offset, err)) < 0 ||
	    (r = mj_int(j, "max", true, 1, WIRE_LOG_MAX_BYTES, 1, &x->max, err)) < 0 ||
	    (r = mj_int(j, "tail", false, 0, 1 << 20, 0, &tail, err)) < 0)
		return r;
	if (x->path[0] != '/')
		return tk_errorf(err, -EINVAL, "path: must be absolute");
	x->rank = (int)rank;
	x->tail = (int)tail;
	return 0;
}

int wire_log_fetches_unpack(json_t *arr, struct wire_log_fetch **ret, int *ret_n,
			    struct tk_error *err)
{
	*ret = NULL;
	*ret_n = 0;
	if (!arr)
		return 0;
	if (!json_is_array(arr) || json_array_size(arr) > WIRE_MAX_LOG_FETCHES)
		return tk_errorf(err, -EINVAL, "logs: must be an array of at most %d",
				 WIRE_MAX_LOG_FETCHES);
	struct wire_log_fetch *f = xcalloc(json_array_size(arr) + 1, sizeof(*f));
	int n = 0, r = 0;
	size_t i;
	json_t *v;
	json_array_foreach (arr, i, v) {
		static const char *const keys[] = {"id", "run_as", "files", NULL};
		int64_t id;
		json_t *files;
		size_t nf;
		n = (int)i + 1;
		if ((r = mj_link_keys(v, NULL, keys, err)) < 0 ||
		    (r = mj_int(v, "id", true, 1, INT64_MAX, 1, &id, err)) < 0 ||
		    (r = mj_strbuf(v, "run_as", true, true, f[i].run_as, sizeof(f[i].run_as),
				   err)) < 0 ||
		    (r = array_of(v, "files", true, WIRE_MAX_LOG_FILES, &files, &nf, err)) < 0)
			break;
		f[i].id = (uint64_t)id;
		f[i].files = xcalloc(nf + 1, sizeof(*f[i].files));
		size_t k;
		json_t *fv;
		json_array_foreach (files, k, fv) {
			f[i].nfiles = (int)k + 1;
			if ((r = log_file_unpack(fv, &f[i].files[k], err)) < 0) {
				mj_prefix(err, "files[%zu]", k);
				break;
			}
		}
		if (r < 0)
			break;
	}
	if (r < 0) {
		mj_prefix(err, "logs[%d]", n - 1);
		wire_log_fetches_release(f, n);
		return r;
	}
	*ret = f;
	*ret_n = n;
	return 0;
}

void wire_log_fetches_release(struct wire_log_fetch *f, int n)
{
	for (int i = 0; f && i < n; i++) {
		for (int k = 0; k < f[i].nfiles; k++)
			free(f[i].files[k].path);
		free(f[i].files);
	}
	free(f);
}

json_t *wire_logs_pack(const struct wire_logs *m)
{
	json_t *answers = json_array();
	for (int i = 0; i < m->nanswers; i++) {
		const struct wire_log_answer *a = &m->answers[i];
		json_t *parts = json_array();
		for (int k = 0; k < a->nparts; k++) {
			const struct wire_log_part *p = &a->parts[k];
			char *b64 = tk_base64_encode(p->data ? p->data : "", p->len);
			json_t *o = json_pack("{s:i, s:I, s:I, s:s}", "rank", p->rank, "offset",
					      (json_int_t)p->offset, "size", (json_int_t)p->size,
					      "data", b64);
			free(b64);
			json_object_set_new(o, "status", json_string(log_status_name(p->status)));
			if (p->error[0])
				json_object_set_new(o, "error", json_string(p->error));
			json_array_append_new(parts, o);
		}
		json_array_append_new(
			answers, json_pack("{s:I, s:o}", "id", (json_int_t)a->id, "parts", parts));
	}
	return json_pack("{s:s, s:s, s:o}", "node", m->node, "agent_id", m->agent_id, "answers",
			 answers);
}

static int log_part_unpack(json_t *j, struct wire_log_part *p, struct tk_error *err)
{
	static const char *const keys[] = {"rank",  "offset", "size", "data",
					   "error", "status", NULL};
	/* what an agent reads: the server's own are not an agent's to say */
	static const char *const agent_says[LOG_STATUS_MAX] = {
		[LOG_READ] = "read", [LOG_NOT_YET] = "not_yet", [LOG_UNREADABLE] = "unreadable"};
	int64_t rank;
	const char *b64;
	int r, status;
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_int(j, "rank", true, 0, MODEL_MAX_NODES * MODEL_MAX_TASKS_PER_NODE, 0, &rank,
			err)) < 0 ||
	    (r = mj_int(j, "offset", true, 0, INT64_MAX, 0, &p->offset, err)) < 0 ||
	    (r = mj_int(j, "size", true, 0, INT64_MAX, 0, &p->size, err)) < 0 ||
	    (r = mj_strbuf(j, "error", false, true, p->error, sizeof(p->error), err)) < 0 ||
	    (r = mj_enum(j, "status", false, agent_says, LOG_STATUS_MAX, -1, &status, err)) < 0)
		return r;
	p->rank = (int)rank;
	/* an agent that does not say: its error is all there is */
	p->status = status >= 0 ? (enum log_status)status : p->error[0] ? LOG_UNREADABLE : LOG_READ;
	json_t *d = json_object_get(j, "data");
	if (!json_is_string(d) || json_string_length(d) > (size_t)WIRE_LOG_MAX_BYTES / 3 * 4 + 4)
		return tk_errorf(err, -EINVAL, "data: must be base64 of at most %d bytes",
				 WIRE_LOG_MAX_BYTES);
	b64 = json_string_value(d);
	void *bytes;
	if (tk_base64_decode(b64, &bytes, &p->len) < 0)
		return tk_errorf(err, -EINVAL, "data: is not base64");
	p->data = bytes;
	return 0;
}

int wire_logs_unpack(json_t *j, struct wire_logs *ret, struct tk_error *err)
{
	static const char *const keys[] = {"node", "agent_id", "answers", NULL};
	int r;
	memset(ret, 0, sizeof(*ret));
	json_t *answers;
	size_t n;
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(j, "node", true, true, ret->node, sizeof(ret->node), err)) < 0 ||
	    (r = agent_id_unpack(j, ret->agent_id, err)) < 0 ||
	    (r = array_of(j, "answers", true, WIRE_MAX_LOG_FETCHES, &answers, &n, err)) < 0)
		return r;
	ret->answers = xcalloc(n + 1, sizeof(*ret->answers));
	size_t i;
	json_t *v;
	json_array_foreach (answers, i, v) {
		static const char *const akeys[] = {"id", "parts", NULL};
		struct wire_log_answer *a = &ret->answers[i];
		int64_t id;
		json_t *parts;
		size_t np;
		ret->nanswers = (int)i + 1;
		if ((r = mj_link_keys(v, NULL, akeys, err)) < 0 ||
		    (r = mj_int(v, "id", true, 1, INT64_MAX, 1, &id, err)) < 0 ||
		    (r = array_of(v, "parts", true, WIRE_MAX_LOG_FILES, &parts, &np, err)) < 0)
			goto fail;
		a->id = (uint64_t)id;
		a->parts = xcalloc(np + 1, sizeof(*a->parts));
		size_t k;
		json_t *pv;
		json_array_foreach (parts, k, pv) {
			a->nparts = (int)k + 1;
			if ((r = log_part_unpack(pv, &a->parts[k], err)) < 0) {
				mj_prefix(err, "parts[%zu]", k);
				goto fail;
			}
		}
	}
	return 0;
fail:
	mj_prefix(err, "answers[%d]", ret->nanswers - 1);
	wire_logs_release(ret);
	return r;
}

void wire_logs_release(struct wire_logs *m)
{
	for (int i = 0; i < m->nanswers; i++) {
		for (int k = 0; k < m->answers[i].nparts; k++)
			free(m->answers[i].parts[k].data);
		free(m->answers[i].parts);
	}
	free(m->answers);
	m->answers = NULL;
	m->nanswers = 0;
}
