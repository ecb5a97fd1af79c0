/*
 * Accelerators and node inventories: what an agent reports about its machine,
 * and the fake-device specs ("8xH100") that let tests and demos run a GPU
 * cluster on machines without GPUs.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int model_fake_accels(const char *spec, const struct catalogue *c, const char *uuid_seed,
		      struct accel *ret, int max, int *ret_n, struct tk_error *err)
{
	_cleanup_free_ char *copy = xstrdup(spec);
	int n = 0;
	char *save = NULL;
	if (!*spec)
		return tk_errorf(err, -EINVAL,
				 "fake devices \"%s\": empty; expected COUNTxMODEL "
				 "such as 8xH100",
				 spec);
	for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *x = strchr(item, 'x');
		if (!x || x == item)
			return tk_errorf(
				err, -EINVAL,
				"fake devices \"%s\": expected COUNTxMODEL such as 8xH100, "
				"got \"%s\"",
				spec, item);
		*x = '\0';
		int64_t count;
		if (tk_parse_int64(item, 1, MODEL_MAX_ACCELS, &count) < 0)
			return tk_errorf(err, -EINVAL,
					 "fake devices \"%s\": count must be 1..%d, got \"%s\"",
					 spec, MODEL_MAX_ACCELS, item);
		const struct catalogue_entry *e = catalogue_find(c, x + 1);
		if (!e) {
			struct strbuf names;
			strbuf_init(&names);
			catalogue_names(c, &names);
			int r = tk_errorf(err, -EINVAL,
					  "fake devices \"%s\": unknown model \"%s\"; known: %s",
					  spec, x + 1, names.buf);
			strbuf_release(&names);
			return r;
		}
		if (n + count > max)
			return tk_errorf(err, -E2BIG,
					 "fake devices \"%s\": at most %d devices on a node", spec,
					 max);
		for (int64_t i = 0; i < count; i++, n++) {
			struct accel *a = &ret[n];
			memset(a, 0, sizeof(*a));
			a->index = n;
			snprintf(a->uuid, sizeof(a->uuid), "GPU-fake-%.32s-%d", uuid_seed, n);
			snprintf(a->model, sizeof(a->model), "%s", e->name);
			a->mem_mib = e->mem_mib;
			a->tflops = e->tflops;
			a->nvlink_domain = 0;
		}
	}
	if (n == 0)
		return tk_errorf(err, -EINVAL,
				 "fake devices \"%s\": no devices; expected COUNTxMODEL such as "
				 "8xH100",
				 spec);
	*ret_n = n;
	return 0;
}

static json_t *accel_pack(const struct accel *a)
{
	return json_pack("{s:i, s:s, s:s, s:I, s:f, s:i}", "index", a->index, "uuid", a->uuid,
			 "model", a->model, "mem_mib", (json_int_t)a->mem_mib, "tflops", a->tflops,
			 "nvlink_domain", a->nvlink_domain);
}

static int accel_unpack(json_t *j, struct accel *a, struct tk_error *err)
{
	static const char *const keys[] = {"index",  "uuid",	      "model", "mem_mib",
					   "tflops", "nvlink_domain", NULL};
	int64_t index, mem, dom;
	double tflops;
	int r;
	memset(a, 0, sizeof(*a));
	if ((r = mj_check_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_int(j, "index", true, 0, MODEL_MAX_ACCELS - 1, 0, &index, err)) < 0 ||
	    (r = mj_strbuf(j, "uuid", true, true, a->uuid, sizeof(a->uuid), err)) < 0 ||
	    (r = mj_strbuf(j, "model", true, true, a->model, sizeof(a->model), err)) < 0 ||
	    (r = mj_int(j, "mem_mib", false, 0, MODEL_MAX_MEM_MIB, 0, &mem, err)) < 0 ||
	    (r = mj_num(j, "tflops", false, 0, 1e6, 0, &tflops, err)) < 0 ||
	    (r = mj_int(j, "nvlink_domain", false, -1, 1 << 20, 0, &dom, err)) < 0)
		return r;
	if (!model_name_valid(a->model))
		return tk_errorf(err, -EINVAL, "model: \"%s\" is not a valid model name", a->model);
	a->index = (int)index;
	a->mem_mib = mem;
	a->tflops = tflops;
	a->nvlink_domain = (int)dom;
	return 0;
}

static const char *const node_state_names[NODE_STATE_MAX] = {
	[NODE_UNKNOWN] = "UNKNOWN",
	[NODE_UP] = "UP",
	[NODE_DOWN] = "DOWN",
	[NODE_DRAINING] = "DRAINING",
	[NODE_DRAINED] = "DRAINED",
	[NODE_VALIDATING] = "VALIDATING",
	[NODE_UNVALIDATED] = "UNVALIDATED",
	[NODE_UNREACHABLE] = "UNREACHABLE",
};

const char *node_state_name(enum node_state s)
{
	return (unsigned)s < NODE_STATE_MAX ? node_state_names[s] : "?";
}

json_t *node_inventory_pack(const struct node_inventory *inv)
{
	json_t *accels = json_array();
	for (int i = 0; i < inv->naccel; i++)
		json_array_append_new(accels, accel_pack(&inv->accel[i]));
	json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:I, s:o}", "name", inv->name, "addr",
			      inv->addr, "topology", inv->topology, "cpus", inv->cpus, "mem_mib",
			      (json_int_t)inv->mem_mib, "accelerators", accels);
	json_t *iso = node_isolation_pack(inv);
	if (iso)
		json_object_set_new(o, "isolation", iso);
	if (inv->domain[0])
		json_object_set_new(o, "domain", json_string(inv->domain));
	if (inv->labels[0])
		json_object_set_new(o, "labels", node_labels_pack(inv->labels));
	json_t *net = node_network_pack(inv);
	if (net)
		json_object_set_new(o, "network", net);
	if (inv->has_stack)
		json_object_set_new(o, "stack", node_stack_pack(&inv->stack));
	return o;
}

json_t *node_labels_pack(const char *labels)
{
	json_t *o = json_object();
	for (const char *p = labels, *next; *p; p = next) {
		size_t len = model_list_item(p, &next);
		const char *eq = memchr(p, '=', len);
		if (eq) {
			char *k = xstrndup(p, (size_t)(eq - p));
			json_object_set_new(o, k, json_stringn(eq + 1, len - (size_t)(eq - p) - 1));
			free(k);
		}
	}
	return o;
}

/* "labels": {"tier": "top"}, into the canonical "tier=top" */
static int labels_unpack(json_t *j, struct node_inventory *inv, struct tk_error *err)
{
	if (!j)
		return 0;
	if (!json_is_object(j))
		return tk_errorf(err, -EINVAL, "labels: must be an object of strings");
	struct strbuf sb;
	strbuf_init(&sb);
	const char *k;
	json_t *v;
	json_object_foreach (j, k, v) {
		if (!json_is_string(v)) {
			strbuf_release(&sb);
			return tk_errorf(err, -EINVAL, "labels.%.64s: must be a string", k);
		}
		strbuf_addf(&sb, "%s%s=%s", sb.len ? "," : "", k, json_string_value(v));
	}
	int r = node_labels_parse(sb.buf, inv->labels, sizeof(inv->labels), err);
	strbuf_release(&sb);
	return r < 0 ? r : 0;
}

json_t *node_isolation_pack(const struct node_inventory *inv)
{
	if (!inv->isolation_known)
		return NULL;
	json_t *un = json_array();
	for (unsigned b = 1; b & NODE_LIMIT_ALL; b <<= 1)
		if (inv->unenforced & b)
			json_array_append_new(un, json_string(node_limit_name(b)));
	return json_pack("{s:i, s:o}", "cgroup", inv->cgroup_version, "unenforced", un);
}

const char *node_limit_name(unsigned bit)
{
	switch (bit) {
	case NODE_LIMIT_MEMORY:
		return "memory";
	case NODE_LIMIT_CPUS:
		return "cpus";
	case NODE_LIMIT_PROCESSES:
		return "processes";
	case NODE_LIMIT_DEVICES:
		return "devices";
	}
	return "?";
}

/* "isolation": {"cgroup": 2, "unenforced": ["processes", "devices"]} */
static int isolation_unpack(json_t *j, struct node_inventory *inv, struct tk_error *err)
{
	static const char *const keys[] = {"cgroup", "unenforced", NULL};
	int64_t v;
	int r;
	if (!j)
		return 0;
	if ((r = mj_link_keys(j, "isolation", keys, err)) < 0)
		return r;
	if ((r = mj_int(j, "cgroup", true, 0, 2, 0, &v, err)) < 0) {
		char was[sizeof(err->text)];
		snprintf(was, sizeof(was), "%s", err->text);
		return tk_errorf(err, r, "isolation.%s", was);
	}
	json_t *un = json_object_get(j, "unenforced"), *x;
	if (un && !json_is_array(un))
		return tk_errorf(err, -EINVAL, "isolation.unenforced: must be an array of names");
	size_t i;
	json_array_foreach (un, i, x) {
		unsigned bit = 0;
		for (unsigned b = 1; b & NODE_LIMIT_ALL; b <<= 1)
			if (json_is_string(x) &&
			    strcmp(json_string_value(x), node_limit_name(b)) == 0)
				bit = b;
		/* a newer agent's limit: not one this server can name */
		inv->unenforced |= bit;
	}
	inv->isolation_known = true;
	inv->cgroup_version = (int)v;
	return 0;
}

int node_inventory_unpack(json_t *j, struct node_inventory *ret, struct tk_error *err)
{
	static const char *const keys[] = {"name",    "addr",	      "topology",  "cpus",
					   "mem_mib", "accelerators", "isolation", "labels",
					   "domain",  "network",      "stack",	   NULL};
	struct node_inventory *inv = ret;
	int64_t cpus, mem;
	int r;
	memset(inv, 0, sizeof(*inv));
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(j, "name", true, true, inv->name, sizeof(inv->name), err)) < 0 ||
	    (r = mj_strbuf(j, "addr", false, true, inv->addr, sizeof(inv->addr), err)) < 0 ||
	    (r = mj_strbuf(j, "topology", false, true, inv->topology, sizeof(inv->topology), err)) <
		    0 ||
	    (r = mj_int(j, "cpus", true, 1, MODEL_MAX_CPUS, 0, &cpus, err)) < 0 ||
	    (r = mj_int(j, "mem_mib", true, 0, MODEL_MAX_MEM_MIB, 0, &mem, err)) < 0 ||
	    (r = isolation_unpack(json_object_get(j, "isolation"), inv, err)) < 0 ||
	    (r = labels_unpack(json_object_get(j, "labels"), inv, err)) < 0 ||
	    (r = mj_strbuf(j, "domain", false, true, inv->domain, sizeof(inv->domain), err)) < 0 ||
	    (r = node_network_unpack(json_object_get(j, "network"), inv, err)) < 0)
		return r;
	json_t *stack = json_object_get(j, "stack");
	if (stack && (r = node_stack_unpack(stack, "stack", &inv->stack, err)) < 0)
		return r;
	inv->has_stack = stack != NULL;
	if (inv->domain[0] && !model_domain_valid(inv->domain))
		return tk_errorf(
			err, -EINVAL,
			"domain: \"%s\" is not a fault-domain path (1 to 8 names of "
			"letters, digits, '.', '_', '-' joined by '/', e.g. dc1/row3/rack07)",
			inv->domain);
	if (!model_name_valid(inv->name))
		return tk_errorf(err, -EINVAL,
				 "name: \"%s\" is not a valid node name (letters, digits, '.', "
				 "'_', '-')",
				 inv->name);
	inv->cpus = (int)cpus;
	inv->mem_mib = mem;
	json_t *accels = json_object_get(j, "accelerators");
	if (accels) {
		if (!json_is_array(accels))
			return tk_errorf(err, -EINVAL, "accelerators: must be an array");
		if (json_array_size(accels) > MODEL_MAX_ACCELS)
			return tk_errorf(err, -E2BIG, "accelerators: at most %d on a node, got %zu",
					 MODEL_MAX_ACCELS, json_array_size(accels));
		size_t i;
		json_t *a;
		json_array_foreach (accels, i, a) {
			if ((r = accel_unpack(a, &inv->accel[i], err)) < 0) {
				mj_prefix(err, "accelerators[%zu]", i);
				return r;
			}
			if (inv->accel[i].index != (int)i)
				return tk_errorf(
					err, -EINVAL,
					"accelerators[%zu].index: must be %zu (devices are "
					"listed in index order)",
					i, i);
		}
		inv->naccel = (int)json_array_size(accels);
	}
	return 0;
}

static const char *const drain_source_names[DRAIN_SOURCE_MAX] = {
	[DRAIN_NONE] = "",	     [DRAIN_OPERATOR] = "operator",
	[DRAIN_FAULT] = "fault",     [DRAIN_VALIDATION] = "validation",
	[DRAIN_LEMON] = "lemon",     [DRAIN_MAINT] = "maintenance",
	[DRAIN_ROLLOUT] = "rollout",
};

static const char *const node_event_names[NODE_EV_KIND_MAX] = {
	[NODE_EV_LAUNCH_FAILED] = "launch_failed",
	[NODE_EV_TASKS_LOST] = "tasks_lost",
	[NODE_EV_FAULT] = "fault",
	[NODE_EV_VALIDATION_FAILED] = "validation_failed",
	[NODE_EV_LEMON] = "lemon",
	[NODE_EV_RESUMED] = "resumed",
	[NODE_EV_LABELED] = "labeled",
	[NODE_EV_TAINTED] = "tainted",
	[NODE_EV_STACK_CHANGED] = "stack_changed",
};

const char *node_event_kind_name(enum node_event_kind k)
{
	return (unsigned)k < NODE_EV_KIND_MAX ? node_event_names[k] : "?";
}

bool node_event_is_failure(enum node_event_kind k)
{
	return k == NODE_EV_LAUNCH_FAILED || k == NODE_EV_TASKS_LOST || k == NODE_EV_FAULT ||
	       k == NODE_EV_VALIDATION_FAILED;
}

void node_record_event(struct node_record *r, const struct node_event *ev)
{
	if (r->nhistory == MODEL_NODE_HISTORY) {
		memmove(&r->history[0], &r->history[1],
			sizeof(r->history[0]) * (MODEL_NODE_HISTORY - 1));
		r->nhistory--;
	}
	r->history[r->nhistory++] = *ev;
}

json_t *node_event_pack(const struct node_event *ev)
{
	json_t *o = json_pack("{s:I, s:s}", "at_ms", (json_int_t)ev->at_ms, "kind",
			      node_event_kind_name(ev->kind));
	if (ev->job)
		json_object_set_new(o, "job", json_integer(ev->job));
	if (ev->attempt)
		json_object_set_new(o, "attempt", json_integer(ev->attempt));
	if (ev->detail[0])
		json_object_set_new(o, "detail", json_string(ev->detail));
	return o;
}

static int history_unpack(json_t *h, struct node_record *r, struct tk_error *err)
{
	static const char *const keys[] = {"at_ms", "kind", "job", "attempt", "detail", NULL};
	if (!json_is_array(h))
		return tk_errorf(err, -EINVAL, "history: must be an array");
	size_t n = json_array_size(h);
	for (size_t i = n > MODEL_NODE_HISTORY ? n - MODEL_NODE_HISTORY : 0; i < n; i++) {
		json_t *e = json_array_get(h, i);
		struct node_event ev = {0};
		int kind, rc;
		int64_t attempt;
		if (!json_is_object(e))
			return tk_errorf(err, -EINVAL, "history[%zu]: must be an object", i);
		if ((rc = mj_check_keys(e, NULL, keys, err)) < 0 ||
		    (rc = mj_int(e, "at_ms", true, 0, INT64_MAX, 0, &ev.at_ms, err)) < 0 ||
		    (rc = mj_enum(e, "kind", true, node_event_names, NODE_EV_KIND_MAX, 0, &kind,
				  err)) < 0 ||
		    (rc = mj_int(e, "job", false, 0, INT64_MAX, 0, &ev.job, err)) < 0 ||
		    (rc = mj_int(e, "attempt", false, 0, MODEL_MAX_ATTEMPTS, 0, &attempt, err)) <
			    0 ||
		    (rc = mj_strbuf(e, "detail", false, false, ev.detail, sizeof(ev.detail), err)) <
			    0) {
			mj_prefix(err, "history[%zu]", i);
			return rc;
		}
		ev.kind = (enum node_event_kind)kind;
		ev.attempt = (int)attempt;
		node_record_event(r, &ev);
	}
	return 0;
}

const char *drain_source_name(enum drain_source d)
{
	return (unsigned)d < DRAIN_SOURCE_MAX ? drain_source_names[d] : "?";
}

static const char *const verdict_names[VERDICT_MAX] = {
	[VERDICT_NONE] = "",
	[VERDICT_PASS] = "pass",
	[VERDICT_FAIL] = "fail",
};

const char *verdict_name(enum verdict v)
{
	return (unsigned)v < VERDICT_MAX ? verdict_names[v] : "?";
}

json_t *node_verdict_pack(const struct node_record *r)
{
	if (r->verdict == VERDICT_NONE)
		return NULL;
	json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I}", "verdict", verdict_name(r->verdict),
			      "layer", r->verdict_layer, "reason", r->verdict_reason, "at_ms",
			      (json_int_t)r->verdict_ms, "job", (json_int_t)r->verdict_job);
	if (r->verdict_checks)
		json_object_set(o, "checks", r->verdict_checks);
	return o;
}

static json_t *witness_pack(const struct node_witness *w)
{
	json_t *o = json_pack("{s:s}", "id", w->id);
	if (w->n >= 0) {
		json_t *m = json_array();
		for (int i = 0; i < w->n; i++)
			json_array_append_new(m, json_string(w->member[i]));
		json_object_set_new(o, "members", m);
	}
	return o;
}

static int witness_unpack(json_t *j, const char *what, struct node_witness *w, struct tk_error *err)
{
	static const char *const keys[] = {"id", "members", NULL};
	int rc;
	memset(w, 0, sizeof(*w));
	if (!j)
		return 0;
	if ((rc = mj_check_keys(j, what, keys, err)) < 0 ||
	    (rc = mj_strbuf(j, "id", true, true, w->id, sizeof(w->id), err)) < 0) {
		mj_prefix(err, "%s", what);
		return rc;
	}
	json_t *m = json_object_get(j, "members");
	if (!m) {
		w->n = w->id[0] ? -1 : 0;
		return 0;
	}
	if (!json_is_array(m) || json_array_size(m) > MODEL_WITNESS_MAX)
		return tk_errorf(err, -EINVAL, "%s.members: must be an array of at most %d names",
				 what, MODEL_WITNESS_MAX);
	size_t i;
	json_t *v;
	json_array_foreach (m, i, v) {
		if ((rc = mj_check_string_value(v, "members[]", MODEL_NAME_MAX - 1, true, err)) <
		    0) {
			mj_prefix(err, "%s", what);
			return rc;
		}
		snprintf(w->member[i], MODEL_NAME_MAX, "%s", json_string_value(v));
		w->n = (int)i + 1;
	}
	return 0;
}

json_t *node_window_pack(const struct node_window *w)
{
	json_t *o = json_pack("{s:s, s:I, s:I, s:s}", "name", w->name, "start_ms",
			      (json_int_t)w->start_ms, "end_ms", (json_int_t)w->end_ms, "reason",
			      w->reason);
	if (w->users[0]) {
		json_t *u = json_array();
		for (const char *p = w->users, *next; *p; p = next) {
			size_t len = model_list_item(p, &next);
			json_array_append_new(u, json_stringn(p, len));
		}
		json_object_set_new(o, "users", u);
	}
	if (w->queue[0])
		json_object_set_new(o, "queue", json_string(w->queue));
	if (w->by[0])
		json_object_set_new(o, "by", json_string(w->by));
	if (w->made_ms)
		json_object_set_new(o, "made_ms", json_integer(w->made_ms));
	return o;
}

int node_window_unpack(json_t *j, struct node_window *ret, struct tk_error *err)
{
	static const char *const keys[] = {"name",  "start_ms", "end_ms",  "reason", "users",
					   "queue", "by",	"made_ms", NULL};
	struct node_window w;
	memset(&w, 0, sizeof(w));
	int rc;
	if (!json_is_object(j))
		return tk_errorf(err, -EINVAL, "must be an object");
	if ((rc = mj_check_keys(j, NULL, keys, err)) < 0 ||
	    (rc = mj_strbuf(j, "name", true, true, w.name, sizeof(w.name), err)) < 0 ||
	    (rc = mj_int(j, "start_ms", true, 0, INT64_MAX, 0, &w.start_ms, err)) < 0 ||
	    (rc = mj_int(j, "end_ms", true, 0, INT64_MAX, 0, &w.end_ms, err)) < 0 ||
	    (rc = mj_strbuf(j, "reason", false, false, w.reason, sizeof(w.reason), err)) < 0 ||
	    (rc = mj_strbuf(j, "queue", false, true, w.queue, sizeof(w.queue), err)) < 0 ||
	    (rc = mj_strbuf(j, "by", false, true, w.by, sizeof(w.by), err)) < 0 ||
	    (rc = mj_int(j, "made_ms", false, 0, INT64_MAX, 0, &w.made_ms, err)) < 0)
		return rc;
	if (w.end_ms <= w.start_ms)
		return tk_errorf(err, -EINVAL, "end_ms: must be after start_ms");
	json_t *u = json_object_get(j, "users");
	if (u) {
		struct strbuf sb;
		strbuf_init(&sb);
		size_t i;
		json_t *v;
		if (!json_is_array(u))
			rc = tk_errorf(err, -EINVAL, "users: must be an array of user names");
		json_array_foreach (u, i, v) {
			if (rc < 0)
				break;
			if (!json_is_string(v) || !json_string_length(v))
				rc = tk_errorf(err, -EINVAL, "users[%zu]: must be a user's name",
					       i);
			else
				strbuf_addf(&sb, "%s%s", sb.len ? "," : "", json_string_value(v));
		}
		if (rc >= 0 && sb.len)
			rc = model_names_parse("users", sb.buf, w.users, sizeof(w.users), err);
		strbuf_release(&sb);
		if (rc < 0)
			return rc;
	}
	*ret = w;
	return 0;
}

json_t *node_record_pack(const struct node_record *r)
{
	json_t *o =
		json_pack("{s:o, s:b, s:s, s:s, s:I}", "inventory", node_inventory_pack(&r->inv),
			  "drained", r->drained, "drain_reason", r->drain_reason, "agent_id",
			  r->agent_id, "registered_ms", (json_int_t)r->registered_ms);
	if (r->joined_ms)
		json_object_set_new(o, "joined_ms", json_integer(r->joined_ms));
	if (r->drained)
		json_object_set_new(o, "drain_source",
				    json_string(drain_source_name(r->drain_source)));
	json_t *v = node_verdict_pack(r);
	if (v)
		json_object_set_new(o, "validation", v);
	if (r->cred_sha256[0])
		json_object_set_new(o, "cred_sha256", json_string(r->cred_sha256));
	if (r->admit)
		json_object_set_new(o, "admit", json_true());
	if (r->revoked)
		json_object_set_new(o, "revoked", json_true());
	if (r->labels_set[0])
		json_object_set_new(o, "labels_set", node_labels_pack(r->labels_set));
	if (r->taints[0])
		json_object_set_new(o, "taints", json_string(r->taints));
	if (r->witness_sent.id[0] || r->witness_acked.id[0])
		json_object_set_new(o, "witness",
				    json_pack("{s:o, s:o}", "sent", witness_pack(&r->witness_sent),
					      "acked", witness_pack(&r->witness_acked)));
	if (r->nhistory) {
		json_t *h = json_array();
		for (int i = 0; i < r->nhistory; i++)
			json_array_append_new(h, node_event_pack(&r->history[i]));
		json_object_set_new(o, "history", h);
	}
	if (r->nwindows) {
		json_t *w = json_array();
		for (int i = 0; i < r->nwindows; i++)
			json_array_append_new(w, node_window_pack(&r->windows[i]));
		json_object_set_new(o, "windows", w);
	}
	return o;
}

void node_record_release(struct node_record *r)
{
	json_decref(r->verdict_checks);
	r->verdict_checks = NULL;
}

static int verdict_unpack(json_t *v, struct node_record *r, struct tk_error *err)
{
	static const char *const keys[] = {"verdict", "layer",	"reason", "at_ms",
					   "job",     "checks", NULL};
	int64_t at, job;
	int rc, verdict;
	/* a validation that is kept has a verdict: "" is not one */
	static const char *const kept[VERDICT_MAX] = {
		[VERDICT_PASS] = "pass", [VERDICT_FAIL] = "fail"};
	if ((rc = mj_check_keys(v, "validation", keys, err)) < 0)
		return rc;
	if ((rc = mj_enum(v, "verdict", true, kept, VERDICT_MAX, 0, &verdict, err)) < 0) {
		mj_prefix(err, "validation");
		return rc;
	}
	if ((rc = mj_strbuf(v, "layer", false, true, r->verdict_layer, sizeof(r->verdict_layer),
			    err)) < 0 ||
	    (rc = mj_strbuf(v, "reason", false, false, r->verdict_reason, sizeof(r->verdict_reason),
			    err)) < 0 ||
	    (rc = mj_int(v, "at_ms", true, 0, INT64_MAX, 0, &at, err)) < 0 ||
	    (rc = mj_int(v, "job", false, 0, INT64_MAX, 0, &job, err)) < 0)
		return rc;
	r->verdict = (enum verdict)verdict;
	json_t *checks = json_object_get(v, "checks");
	if (checks && !json_is_array(checks))
		return tk_errorf(err, -EINVAL, "validation.checks: must be an array");
	r->verdict_ms = at;
	r->verdict_job = job;
	r->verdict_checks = json_incref(checks);
	return 0;
}

int node_record_unpack(json_t *j, struct node_record *ret, struct tk_error *err)
{
	static const char *const keys[] = {
		"inventory",	 "drained",    "drain_reason", "drain_source", "agent_id",
		"registered_ms", "validation", "cred_sha256",  "admit",	       "revoked",
		"witness",	 "joined_ms",  "history",      "labels_set",   "taints",
		"windows",	 NULL};
	static const char *const wkeys[] = {"sent", "acked", NULL};
	struct node_record *r = ret;
	int64_t reg;
	int rc, source;
	memset(r, 0, sizeof(*r));
	if ((rc = mj_check_keys(j, NULL, keys, err)) < 0 ||
	    (rc = mj_bool(j, "drained", true, false, &r->drained, err)) < 0 ||
	    (rc = mj_strbuf(j, "drain_reason", true, false, r->drain_reason,
			    sizeof(r->drain_reason), err)) < 0 ||
	    (rc = mj_strbuf(j, "agent_id", true, true, r->agent_id, sizeof(r->agent_id), err)) <
		    0 ||
	    (rc = mj_int(j, "registered_ms", true, 0, INT64_MAX, 0, &reg, err)) < 0 ||
	    (rc = mj_int(j, "joined_ms", false, 0, INT64_MAX, 0, &r->joined_ms, err)) < 0 ||
	    (rc = mj_strbuf(j, "cred_sha256", false, true, r->cred_sha256, sizeof(r->cred_sha256),
			    err)) < 0 ||
	    (rc = mj_bool(j, "admit", false, false, &r->admit, err)) < 0 ||
	    (rc = mj_bool(j, "revoked", false, false, &r->revoked, err)) < 0 ||
	    /* a drain from before sources were kept is an operator's: only an
	     * operator resumes it */
	    (rc = mj_enum(j, "drain_source", false, drain_source_names + 1, DRAIN_SOURCE_MAX - 1,
			  DRAIN_OPERATOR - 1, &source, err)) < 0)
		return rc;
	json_t *w = json_object_get(j, "witness");
	if (w && ((rc = mj_check_keys(w, "witness", wkeys, err)) < 0 ||
		  (rc = witness_unpack(json_object_get(w, "sent"), "witness.sent", &r->witness_sent,
				       err)) < 0 ||
		  (rc = witness_unpack(json_object_get(w, "acked"), "witness.acked",
				       &r->witness_acked, err)) < 0))
		return rc;
	r->drain_source = r->drained ? (enum drain_source)(source + 1) : DRAIN_NONE;
	if (r->cred_sha256[0] && strlen(r->cred_sha256) != 64)
		return tk_errorf(err, -EINVAL, "cred_sha256: must be 64 hex digits");
	r->registered_ms = reg;
	json_t *ls = json_object_get(j, "labels_set");
	if (ls) {
		struct node_inventory tmp;
		memset(&tmp, 0, sizeof(tmp));
		if ((rc = labels_unpack(ls, &tmp, err)) < 0) {
			char was[sizeof(err->text)];
			snprintf(was, sizeof(was), "%s", err->text);
			return tk_errorf(err, rc, "labels_set: %.*s", (int)sizeof(was) - 16, was);
		}
		snprintf(r->labels_set, sizeof(r->labels_set), "%s", tmp.labels);
	}
	char taints[MODEL_LABELS_MAX] = "";
	if ((rc = mj_strbuf(j, "taints", false, true, taints, sizeof(taints), err)) < 0 ||
	    (rc = model_names_parse("taints", taints, r->taints, sizeof(r->taints), err)) < 0)
		return rc;
	json_t *h = json_object_get(j, "history");
	if (h && (rc = history_unpack(h, r, err)) < 0)
		return rc;
	json_t *wins = json_object_get(j, "windows");
	if (wins && (!json_is_array(wins) || json_array_size(wins) > MODEL_NODE_WINDOWS))
		return tk_errorf(err, -EINVAL, "windows: must be an array of at most %d",
				 MODEL_NODE_WINDOWS);
	for (size_t i = 0; i < json_array_size(wins); i++) {
		if ((rc = node_window_unpack(json_array_get(wins, i), &r->windows[i], err)) < 0) {
			mj_prefix(err, "windows[%zu]", i);
			return rc;
		}
		r->nwindows = (int)i + 1;
	}
	json_t *v = json_object_get(j, "validation");
	if (v && (rc = verdict_unpack(v, r, err)) < 0)
		return rc;
	if ((rc = node_inventory_unpack(json_object_get(j, "inventory"), &r->inv, err)) < 0) {
		mj_prefix(err, "inventory");
		node_record_release(r);
		return rc;
	}
	return 0;
}
