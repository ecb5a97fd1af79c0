/*
 * The messages between an agent and its shims (internal.h): the plan the
 * agent writes for a shim, the status the shim reports, the commands the
 * agent sends, each with the one pack and unpack both sides use. Both sides
 * are this binary, but a shim outlives the agent that started it, so what
 * it reads is checked as strictly as anything from outside.
 */
#include "shim.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define SHIM_MAX_TASKS MODEL_MAX_TASKS_PER_NODE

static json_t *strv(char *const *v, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static void strv_free(char **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* obj[key]: an array of 1..max strings (0..max when !nonempty) of which none
 * holds a NUL. */
static int strv_unpack(json_t *obj, const char *key, bool nonempty, size_t max, char ***ret,
		       int *ret_n, struct tk_error *err)
{
	json_t *a = json_object_get(obj, key);
	*ret = NULL;
	*ret_n = 0;
	if (!json_is_array(a) || json_array_size(a) > max || (nonempty && !json_array_size(a)))
		return tk_errorf(err, -EINVAL, "%s: must be an array of %s%zu strings", key,
				 nonempty ? "1 to " : "at most ", max);
	size_t n = json_array_size(a), i;
	json_t *v;
	json_array_foreach (a, i, v)
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return tk_errorf(err, -EINVAL, "%s[%zu]: must be a string without NUL", key,
					 i);
	char **out = xcalloc(n + 1, sizeof(char *));
	json_array_foreach (a, i, v)
		out[i] = xstrdup(json_string_value(v));
	*ret = out;
	*ret_n = (int)n;
	return 0;
}

/* ---- the plan ----------------------------------------------------------------------- */

json_t *shim_plan_pack(const struct shim_plan *p)
{
	json_t *tasks = json_array();
	for (int i = 0; i < p->ntasks; i++) {
		const struct shim_task *t = &p->tasks[i];
		json_t *tj = json_pack("{s:i, s:o, s:o, s:s, s:s}", "rank", t->rank, "argv",
				       strv(t->argv, t->argc), "env", strv(t->env, t->nenv), "cwd",
				       t->cwd, "output", t->output);
		if (t->error)
			json_object_set_new(tj, "error", json_string(t->error));
		if (p->ctr)
			json_object_set_new(tj, "cdi", strv(t->cdi, t->ncdi));
		json_array_append_new(tasks, tj);
	}
	json_t *o = json_pack("{s:I, s:i, s:I, s:I, s:I, s:I, s:I, s:o}", "job", (json_int_t)p->job,
			      "attempt", p->attempt, "grace_ms", (json_int_t)p->grace_ms,
			      "limit_ms", (json_int_t)p->limit_ms, "lease_until_ms",
			      (json_int_t)p->lease_until_ms, "lease_ms", (json_int_t)p->lease_ms,
			      "fence_grace_ms", (json_int_t)p->fence_grace_ms, "tasks", tasks);
	json_object_set_new(o, "protocol", json_integer(SHIM_PROTOCOL));
	if (p->signal_no)
		json_object_set_new(o, "signal",
				    json_pack("{s:i, s:I}", "number", p->signal_no, "after_ms",
					      (json_int_t)p->signal_ms));
	if (p->cgroup) {
		json_t *deny = json_array();
		for (int i = 0; i < p->limits.ndeny; i++)
			json_array_append_new(deny, json_string(p->limits.deny[i]));
		json_object_set_new(o, "cgroup",
				    json_pack("{s:s, s:I, s:s, s:I, s:o}", "node", p->node,
					      "mem_mib", (json_int_t)p->limits.mem_mib, "cpus",
					      p->limits.cpus, "pids_max",
					      (json_int_t)p->limits.pids_max, "deny", deny));
		if (p->cg_slot >= 0)
			json_object_set_new(json_object_get(o, "cgroup"), "slot",
					    json_integer(p->cg_slot));
	}
	if (p->ctr) {
		const struct shim_container *c = p->ctr;
		json_object_set_new(o, "container",
				    json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "podman", c->podman,
					      "conf", c->conf, "root", c->root, "image", c->image,
					      "ref", c->ref, "mounts",
					      strv(c->mounts, c->nmounts)));
	}
	if (p->limits.nest)
		json_object_set_new(json_object_get(o, "cgroup"), "nest", json_true());
	if (p->pty)
		json_object_set_new(o, "pty", json_true());
	if (p->marks)
		json_object_set_new(o, "marks", json_true());
	if (p->check_argc)
		json_object_set_new(o, "device_check",
				    json_pack("{s:o, s:o}", "argv",
					      strv(p->check_argv, p->check_argc), "env",
					      strv(p->check_env, p->check_nenv)));
	if (p->as_user) {
		json_t *groups = json_array();
		for (int i = 0; i < p->user.ngroups; i++)
			json_array_append_new(groups, json_integer(p->user.groups[i]));
		json_object_set_new(o, "user",
				    json_pack("{s:s, s:I, s:I, s:o, s:b}", "name", p->user.name,
					      "uid", (json_int_t)p->user.uid, "gid",
					      (json_int_t)p->user.gid, "groups", groups,
					      "allow_root", p->allow_root));
	}
	return o;
}

static int user_unpack(json_t *j, struct shim_user *u, bool *allow_root, struct tk_error *err)
{
	static const char *const keys[] = {"name", "uid", "gid", "groups", "allow_root", NULL};
	int64_t uid, gid;
	int r;
	if ((r = mj_link_keys(j, "user", keys, err)) < 0 ||
	    (r = mj_strbuf(j, "name", true, true, u->name, sizeof(u->name), err)) < 0 ||
	    (r = mj_int(j, "uid", true, 0, UINT32_MAX - 1, 0, &uid, err)) < 0 ||
	    (r = mj_int(j, "gid", true, 0, UINT32_MAX - 1, 0, &gid, err)) < 0 ||
	    (r = mj_bool(j, "allow_root", false, false, allow_root, err)) < 0)
		return r;
	u->uid = (uint32_t)uid;
	u->gid = (uint32_t)gid;
	json_t *g = json_object_get(j, "groups");
	if (!json_is_array(g) || json_array_size(g) > SHIM_MAX_GROUPS)
		return tk_errorf(err, -EINVAL, "user.groups: must be an array of at most %d",
				 SHIM_MAX_GROUPS);
	size_t i;
	json_t *v;
	json_array_foreach (g, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) >= UINT32_MAX)
			return tk_errorf(err, -EINVAL, "user.groups[%zu]: must be a group id", i);
		u->groups[i] = (uint32_t)json_integer_value(v);
	}
	u->ngroups = (int)json_array_size(g);
	return 0;
}

static int container_unpack(json_t *j, struct shim_container *c, struct tk_error *err)
{
	static const char *const keys[] = {"podman", "conf",   "root", "image",
					   "ref",    "mounts", NULL};
	int r;
	if ((r = mj_link_keys(j, "container", keys, err)) < 0 ||
	    (r = mj_strbuf(j, "podman", true, true, c->podman, sizeof(c->podman), err)) < 0 ||
	    (r = mj_strbuf(j, "conf", false, true, c->conf, sizeof(c->conf), err)) < 0 ||
	    (r = mj_strbuf(j, "root", false, true, c->root, sizeof(c->root), err)) < 0 ||
	    (r = mj_strbuf(j, "image", true, true, c->image, sizeof(c->image), err)) < 0 ||
	    (r = mj_strbuf(j, "ref", true, true, c->ref, sizeof(c->ref), err)) < 0 ||
	    (r = strv_unpack(j, "mounts", false, MODEL_MAX_MOUNTS + 1, &c->mounts, &c->nmounts,
			     err)) < 0) {
		mj_prefix(err, "container");
		return r;
	}
	if (c->podman[0] != '/')
		return tk_errorf(err, -EINVAL, "container.podman: must be an absolute path");
	for (int i = 0; i < c->nmounts; i++) {
		struct mount_spec m;
		if ((r = model_mount_parse(c->mounts[i], false, &m, err)) < 0) {
			mj_prefix(err, "container.mounts[%d]", i);
			return r;
		}
	}
	return 0;
}

static int cgroup_unpack(json_t *j, struct shim_plan *p, struct tk_error *err)
{
	static const char *const keys[] = {"node", "mem_mib", "cpus", "pids_max",
					   "deny", "nest",    "slot", NULL};
	struct cg_limits *l = &p->limits;
	int64_t slot;
	int r;
	if ((r = mj_link_keys(j, "cgroup", keys, err)) < 0 ||
	    (r = mj_strbuf(j, "node", true, true, p->node, sizeof(p->node), err)) < 0 ||
	    (r = mj_int(j, "mem_mib", true, 0, MODEL_MAX_MEM_MIB, 0, &l->mem_mib, err)) < 0 ||
	    (r = mj_strbuf(j, "cpus", true, true, l->cpus, sizeof(l->cpus), err)) < 0 ||
	    (r = mj_int(j, "pids_max", true, 0, INT32_MAX, 0, &l->pids_max, err)) < 0 ||
	    (r = mj_bool(j, "nest", false, false, &l->nest, err)) < 0 ||
	    (r = mj_int(j, "slot", false, 0, INT32_MAX, -1, &slot, err)) < 0)
		return r;
	p->cg_slot = (int)slot;
	if (!model_name_valid(p->node))
		return tk_errorf(err, -EINVAL, "cgroup.node: not a node name");
	for (const char *c = l->cpus; *c; c++)
		if (!((*c >= '0' && *c <= '9') || *c == ',' || *c == '-'))
			return tk_errorf(err, -EINVAL, "cgroup.cpus: not a list of CPUs");
	json_t *deny = json_object_get(j, "deny");
	if (!json_is_array(deny) || json_array_size(deny) > CG_MAX_DENY)
		return tk_errorf(err, -EINVAL, "cgroup.deny: must be an array of at most %d",
				 CG_MAX_DENY);
	size_t i;
	json_t *d;
	json_array_foreach (deny, i, d) {
		const char *rule = json_string_value(d);
		if (!rule || strlen(rule) >= sizeof(l->deny[0]))
			return tk_errorf(err, -EINVAL, "cgroup.deny[%zu]: must be a device rule",
					 i);
		snprintf(l->deny[i], sizeof(l->deny[i]), "%s", rule);
	}
	l->ndeny = (int)json_array_size(deny);
	p->cgroup = true;
	return 0;
}

int shim_plan_unpack(json_t *j, struct shim_plan *ret, struct tk_error *err)
{
	static const char *const keys[] = {"job",
					   "attempt",
					   "grace_ms",
					   "limit_ms",
					   "lease_until_ms",
					   "lease_ms",
					   "fence_grace_ms",
					   "tasks",
					   "user",
					   "cgroup",
					   "container",
					   "signal",
					   "pty",
					   "protocol",
					   "marks",
					   "device_check",
					   NULL};
	static const char *const tkeys[] = {"rank",   "argv", "env",   "cwd",
					    "output", "cdi",  "error", NULL};
	struct shim_plan p = {.cg_slot = -1};
	int64_t attempt, protocol;
	int r;
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_int(j, "protocol", false, 1, INT32_MAX, 1, &protocol, err)) < 0)
		return r;
	if (protocol > SHIM_PROTOCOL)
		return tk_errorf(
			err, -EPROTO,
			"protocol: the plan is of shim protocol %lld, newer than this "
			"shim's %d: the agent and tenk-shim must come from one installation",
			(long long)protocol, SHIM_PROTOCOL);
	if ((r = mj_int(j, "job", true, 1, INT64_MAX, 0, &p.job, err)) < 0 ||
	    (r = mj_int(j, "attempt", true, 1, MODEL_MAX_ATTEMPTS, 0, &attempt, err)) < 0 ||
	    (r = mj_int(j, "grace_ms", true, 0, MODEL_MAX_GRACE_S * 1000, 0, &p.grace_ms, err)) <
		    0 ||
	    (r = mj_int(j, "limit_ms", true, 0, MODEL_MAX_TIME_LIMIT_S * 1000, 0, &p.limit_ms,
			err)) < 0 ||
	    (r = mj_int(j, "lease_until_ms", true, 0, INT64_MAX / 2, 0, &p.lease_until_ms, err)) <
		    0 ||
	    (r = mj_int(j, "lease_ms", true, 1, INT32_MAX, 0, &p.lease_ms, err)) < 0 ||
	    (r = mj_int(j, "fence_grace_ms", true, 0, INT32_MAX, 0, &p.fence_grace_ms, err)) < 0 ||
	    (r = mj_bool(j, "pty", false, false, &p.pty, err)) < 0 ||
	    (r = mj_bool(j, "marks", false, false, &p.marks, err)) < 0)
		return r;
	p.attempt = (int)attempt;
	json_t *sg = json_object_get(j, "signal");
	if (sg) {
		static const char *const skeys[] = {"number", "after_ms", NULL};
		int64_t num;
		if ((r = mj_link_keys(sg, "signal", skeys, err)) < 0 ||
		    (r = mj_int(sg, "number", true, 1, 64, 0, &num, err)) < 0 ||
		    (r = mj_int(sg, "after_ms", true, 0, MODEL_MAX_TIME_LIMIT_S * 1000, 0,
				&p.signal_ms, err)) < 0) {
			mj_prefix(err, "signal");
			return r;
		}
		p.signal_no = (int)num;
	}
	json_t *user = json_object_get(j, "user");
	if (user && (r = user_unpack(user, &p.user, &p.allow_root, err)) < 0)
		return r;
	p.as_user = user != NULL;
	json_t *cg = json_object_get(j, "cgroup");
	if (cg && (r = cgroup_unpack(cg, &p, err)) < 0)
		return r;
	json_t *ctr = json_object_get(j, "container");
	if (ctr) {
		p.ctr = xcalloc(1, sizeof(*p.ctr));
		if ((r = container_unpack(ctr, p.ctr, err)) < 0) {
			shim_plan_release(&p);
			return r;
		}
	}
	json_t *tasks = json_object_get(j, "tasks");
	if (!json_is_array(tasks) || json_array_size(tasks) < 1 ||
	    json_array_size(tasks) > SHIM_MAX_TASKS) {
		shim_plan_release(&p);
		return tk_errorf(err, -EINVAL, "tasks: must be an array of 1 to %d tasks",
				 SHIM_MAX_TASKS);
	}
	p.tasks = xcalloc(json_array_size(tasks), sizeof(*p.tasks));
	size_t i;
	json_t *tj;
	json_array_foreach (tasks, i, tj) {
		struct shim_task *t = &p.tasks[i];
		int64_t rank;
		p.ntasks = (int)i + 1;
		if ((r = mj_link_keys(tj, NULL, tkeys, err)) < 0 ||
		    (r = mj_int(tj, "rank", true, 0, MODEL_MAX_NODES * MODEL_MAX_TASKS_PER_NODE, 0,
				&rank, err)) < 0 ||
		    (r = strv_unpack(tj, "argv", true, MODEL_MAX_ARGS, &t->argv, &t->argc, err)) <
			    0 ||
		    (r = strv_unpack(tj, "env", false, MODEL_MAX_ENV + 64, &t->env, &t->nenv,
				     err)) < 0 ||
		    (r = mj_str(tj, "cwd", true, MODEL_MAX_PATH, false, NULL, &t->cwd, err)) < 0 ||
		    (r = mj_str(tj, "output", true, MODEL_MAX_PATH, false, NULL, &t->output, err)) <
			    0 ||
		    (r = mj_str(tj, "error", false, MODEL_MAX_PATH, false, NULL, &t->error, err)) <
			    0 ||
		    (p.ctr && (r = strv_unpack(tj, "cdi", false, MODEL_MAX_ACCELS, &t->cdi,
					       &t->ncdi, err)) < 0)) {
			mj_prefix(err, "tasks[%zu]", i);
			shim_plan_release(&p);
			return r;
		}
		t->rank = (int)rank;
	}
	json_t *dc = json_object_get(j, "device_check");
	if (dc) {
		static const char *const dkeys[] = {"argv", "env", NULL};
		if ((r = mj_link_keys(dc, "device_check", dkeys, err)) < 0 ||
		    (r = strv_unpack(dc, "argv", true, MODEL_MAX_ARGS, &p.check_argv, &p.check_argc,
				     err)) < 0 ||
		    (r = strv_unpack(dc, "env", false, MODEL_MAX_ENV + 64, &p.check_env,
				     &p.check_nenv, err)) < 0) {
			mj_prefix(err, "device_check");
			shim_plan_release(&p);
			return r;
		}
	}
	*ret = p;
	return 0;
}

void shim_plan_release(struct shim_plan *p)
{
	for (int i = 0; i < p->ntasks; i++) {
		struct shim_task *t = &p->tasks[i];
		strv_free(t->argv, t->argc);
		strv_free(t->env, t->nenv);
		free(t->cwd);
		free(t->output);
		free(t->error);
		strv_free(t->cdi, t->ncdi);
	}
	free(p->tasks);
	if (p->ctr)
		strv_free(p->ctr->mounts, p->ctr->nmounts);
	free(p->ctr);
	strv_free(p->check_argv, p->check_argc);
	strv_free(p->check_env, p->check_nenv);
	memset(p, 0, sizeof(*p));
}

/* ---- the status --------------------------------------------------------------------- */

static const char *const task_state_names[] = {
	[SHIM_TASK_WAITING] = "waiting",
	[SHIM_TASK_RUNNING] = "running",
	[SHIM_TASK_EXITED] = "exited",
};

json_t *shim_status_pack(const struct shim_status *s)
{
	json_t *tasks = json_array();
	for (int i = 0; i < s->ntasks; i++) {
		const struct shim_task_status *t = &s->tasks[i];
		json_t *o = json_pack("{s:i, s:s, s:i, s:I, s:I}", "rank", t->rank, "state",
				      task_state_names[t->state], "pid", t->pid, "start_ms",
				      (json_int_t)t->start_ms, "end_ms", (json_int_t)t->end_ms);
		if (t->state == SHIM_TASK_EXITED) {
			json_object_set_new(o, "exit_code", json_integer(t->exit_code));
			json_object_set_new(o, "signal", json_integer(t->signal));
			json_object_set_new(o, "cause", json_string(exit_cause_name(t->cause)));
			json_object_set_new(o, "detail", json_string(t->detail));
		}
		if (t->out_from)
			json_object_set_new(o, "out_from", json_integer(t->out_from));
		if (t->err_from)
			json_object_set_new(o, "err_from", json_integer(t->err_from));
		if (t->node_fault)
			json_object_set_new(o, "node_fault", json_true());
		json_array_append_new(tasks, o);
	}
	return json_pack("{s:i, s:I, s:i, s:i, s:I, s:I, s:I, s:o}", "protocol", SHIM_PROTOCOL,
			 "job", (json_int_t)s->job, "attempt", s->attempt, "shim_pid", s->shim_pid,
			 "cpu_ms", (json_int_t)s->cpu_ms, "mem_peak_mib",
			 (json_int_t)s->mem_peak_mib, "mem_mib", (json_int_t)s->mem_mib, "tasks",
			 tasks);
}

static int task_status_unpack(json_t *j, struct shim_task_status *t, struct tk_error *err)
{
	static const char *const keys[] = {
		"rank",	 "state",  "pid",      "start_ms", "end_ms",	 "exit_code", "signal",
		"cause", "detail", "out_from", "err_from", "node_fault", NULL};
	char state[16] = "", cause[24] = "exited";
	int64_t rank, pid, code, sig;
	int r;
	memset(t, 0, sizeof(*t));
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_int(j, "rank", true, 0, MODEL_MAX_NODES * MODEL_MAX_TASKS_PER_NODE, 0, &rank,
			err)) < 0 ||
	    (r = mj_strbuf(j, "state", true, true, state, sizeof(state), err)) < 0 ||
	    (r = mj_int(j, "pid", true, 0, INT32_MAX, 0, &pid, err)) < 0 ||
	    (r = mj_int(j, "start_ms", true, 0, INT64_MAX, 0, &t->start_ms, err)) < 0 ||
	    (r = mj_int(j, "end_ms", true, 0, INT64_MAX, 0, &t->end_ms, err)) < 0 ||
	    (r = mj_int(j, "exit_code", false, 0, 255, 0, &code, err)) < 0 ||
	    (r = mj_int(j, "signal", false, 0, 128, 0, &sig, err)) < 0 ||
	    (r = mj_strbuf(j, "cause", false, true, cause, sizeof(cause), err)) < 0 ||
	    (r = mj_strbuf(j, "detail", false, true, t->detail, sizeof(t->detail), err)) < 0 ||
	    (r = mj_int(j, "out_from", false, 0, INT64_MAX, 0, &t->out_from, err)) < 0 ||
	    (r = mj_int(j, "err_from", false, 0, INT64_MAX, 0, &t->err_from, err)) < 0 ||
	    (r = mj_bool(j, "node_fault", false, false, &t->node_fault, err)) < 0)
		return r;
	int k;
	for (k = 0; k <= SHIM_TASK_EXITED; k++)
		if (strcmp(state, task_state_names[k]) == 0)
			break;
	if (k > SHIM_TASK_EXITED)
		return tk_errorf(err, -EINVAL, "state: must be waiting, running or exited");
	if (exit_cause_parse(cause, &t->cause) < 0)
		return tk_errorf(err, -EINVAL, "cause: unknown exit cause \"%s\"", cause);
	t->state = (enum shim_task_state)k;
	t->rank = (int)rank;
	t->pid = (int)pid;
	t->exit_code = (int)code;
	t->signal = (int)sig;
	return 0;
}

int shim_status_unpack(json_t *j, struct shim_status *ret, struct tk_error *err)
{
	static const char *const keys[] = {"job",    "attempt",	     "shim_pid",
					   "cpu_ms", "mem_peak_mib", "mem_mib",
					   "tasks",  "protocol",     NULL};
	struct shim_status s = {0};
	int64_t attempt, pid, protocol;
	int r;
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_int(j, "protocol", false, 1, INT32_MAX, 1, &protocol, err)) < 0 ||
	    (r = mj_int(j, "job", true, 1, INT64_MAX, 0, &s.job, err)) < 0 ||
	    (r = mj_int(j, "attempt", true, 1, MODEL_MAX_ATTEMPTS, 0, &attempt, err)) < 0 ||
	    (r = mj_int(j, "shim_pid", true, 1, INT32_MAX, 0, &pid, err)) < 0 ||
	    (r = mj_int(j, "cpu_ms", false, 0, INT64_MAX, 0, &s.cpu_ms, err)) < 0 ||
	    (r = mj_int(j, "mem_peak_mib", false, 0, INT64_MAX, 0, &s.mem_peak_mib, err)) < 0 ||
	    (r = mj_int(j, "mem_mib", false, 0, INT64_MAX, 0, &s.mem_mib, err)) < 0)
		return r;
	json_t *tasks = json_object_get(j, "tasks");
	if (!json_is_array(tasks) || json_array_size(tasks) > SHIM_MAX_TASKS)
		return tk_errorf(err, -EINVAL, "tasks: must be an array of at most %d",
				 SHIM_MAX_TASKS);
	s.attempt = (int)attempt;
	s.shim_pid = (int)pid;
	s.protocol = (int)protocol;
	s.tasks = xcalloc(json_array_size(tasks) + 1, sizeof(*s.tasks));
	size_t i;
	json_t *t;
	json_array_foreach (tasks, i, t) {
		if ((r = task_status_unpack(t, &s.tasks[i], err)) < 0) {
			mj_prefix(err, "tasks[%zu]", i);
			free(s.tasks);
			return r;
		}
	}
	s.ntasks = (int)json_array_size(tasks);
	*ret = s;
	return 0;
}

void shim_status_release(struct shim_status *s)
{
	free(s->tasks);
	s->tasks = NULL;
	s->ntasks = 0;
}

/* ---- commands ----------------------------------------------------------------------- */

static const char *const cmd_names[SHIM_CMD_MAX] = {
	[SHIM_CMD_STOP] = "stop",   [SHIM_CMD_RENEW] = "renew",	  [SHIM_CMD_RELEASE] = "release",
	[SHIM_CMD_LIMIT] = "limit", [SHIM_CMD_SIGNAL] = "signal",
};

json_t *shim_cmd_pack(const struct shim_cmd *c)
{
	json_t *o = json_pack("{s:s}", "type", cmd_names[c->type]);
	if (c->type == SHIM_CMD_STOP) {
		json_object_set_new(o, "cause", json_string(exit_cause_name(c->cause)));
		json_object_set_new(o, "detail", json_string(c->detail));
	} else if (c->type == SHIM_CMD_RENEW) {
		json_object_set_new(o, "until_ms", json_integer(c->until_ms));
	} else if (c->type == SHIM_CMD_LIMIT) {
		json_object_set_new(o, "limit_ms", json_integer(c->limit_ms));
	} else if (c->type == SHIM_CMD_SIGNAL) {
		json_object_set_new(o, "signal", json_integer(c->signal));
	}
	return o;
}

int shim_cmd_unpack(json_t *j, struct shim_cmd *ret, struct tk_error *err)
{
	static const char *const keys[] = {"type",     "cause",	 "detail", "until_ms",
					   "limit_ms", "signal", NULL};
	char type[16] = "", cause[24] = "cancelled";
	int64_t sig;
	int r;
	memset(ret, 0, sizeof(*ret));
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(j, "type", true, true, type, sizeof(type), err)) < 0 ||
	    (r = mj_strbuf(j, "cause", false, true, cause, sizeof(cause), err)) < 0 ||
	    (r = mj_strbuf(j, "detail", false, true, ret->detail, sizeof(ret->detail), err)) < 0 ||
	    (r = mj_int(j, "until_ms", false, 0, INT64_MAX / 2, 0, &ret->until_ms, err)) < 0 ||
	    (r = mj_int(j, "limit_ms", false, 0, MODEL_MAX_TIME_LIMIT_S * 1000, 0, &ret->limit_ms,
			err)) < 0 ||
	    (r = mj_int(j, "signal", false, 0, 64, 0, &sig, err)) < 0)
		return r;
	ret->signal = (int)sig;
	int k;
	for (k = 0; k < SHIM_CMD_MAX; k++)
		if (strcmp(type, cmd_names[k]) == 0)
			break;
	if (k == SHIM_CMD_MAX)
		return tk_errorf(err, -EINVAL, "type: unknown command \"%s\"", type);
	if (exit_cause_parse(cause, &ret->cause) < 0)
		return tk_errorf(err, -EINVAL, "cause: unknown exit cause \"%s\"", cause);
	ret->type = (enum shim_cmd_type)k;
	return 0;
}

int shim_lines(struct strbuf *buf, const char *data, size_t n,
	       void (*line_cb)(void *arg, const char *line, size_t len), void *arg)
{
	strbuf_add(buf, data, n);
	size_t start = 0;
	for (size_t i = buf->len - n; i < buf->len; i++) {
		if (buf->buf[i] != '\n')
			continue;
		buf->buf[i] = '\0';
		line_cb(arg, buf->buf + start, i - start);
		start = i + 1;
	}
	if (start) {
		memmove(buf->buf, buf->buf + start, buf->len - start);
		buf->len -= start;
		buf->buf[buf->len] = '\0';
	}
	return buf->len > SHIM_MAX_LINE ? -E2BIG : 0;
}
