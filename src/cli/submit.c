/*
 * tenk submit: a job's request from the command line, from a script's
 * #TENK lines and from its #SBATCH lines (Slurm's options tenk shares),
 * or an array of them.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---- submit -------------------------------------------------------------------------- */

enum {
	S_NODES = O_FIRST_OWN,
	S_TPN,
	S_GPUS_TOTAL,
	S_GPU_TYPE,
	S_CPUS,
	S_MEM,
	S_TIME,
	S_NAME,
	S_OUTPUT,
	S_CHDIR,
	S_REQUEUE,
	S_GRACE,
	S_EXPORT,
	S_CLASS,
	S_QUEUE,
	S_GPU_MEM,
	S_GPU_TFLOPS,
	S_SWITCHES,
	S_MIXED,
	S_IMAGE,
	S_MOUNT,
	S_CKPT_MARKER,
	S_ARRAY,
	S_AFTER,
	S_DEPENDENCY,
	S_BEGIN,
	S_COMMENT,
	S_ERROR,
	S_SLURM_ENV,
	S_SIGNAL,
	S_HOLD,
	S_GPUS_PER_NODE,
	S_GPUS,
	S_NTASKS_PER_NODE,
	S_NTASKS,
	S_LABEL,
	S_NODELIST,
	S_EXCLUDE,
	S_EXCLUSIVE,
	S_PTY,
	S_KEEP,
	S_IMPOSSIBLE,
	S_THROTTLE,
	S_NO_MARKS,
	S_STALL_AFTER,
	S_ON_STALL,
	S_RESTART,
	S_MAX_RESTARTS,
	S_SPARES,
	S_CONSTRAINT,
	S_FABRIC,
	S_TOLERATE,
	S_PARTITION,
	S_SPREAD,
	S_WITHIN,
	S_CKPT_SIGNAL,
	S_NCCL_CHECK,
	S_PREEMPTIBLE_ANY,
	S_COUNT
};

static const struct tk_option submit_opts[] = {
	COMMON_OPTS,
	{"nodes", 'N', "N|MIN:MAX",
	 "nodes, all started together (default 1); MIN:MAX: an elastic gang that starts on MIN "
	 "or more, grows at a checkpoint as nodes free and shrinks where a lost node has no "
	 "replacement"},
	{"tasks-per-node", 0, "N", "processes per node (default 1)"},
	{"gpus", 'G', "N",
	 "accelerators in all, shared out among the tasks (Slurm's -G; until 0.2.0, -G was per "
	 "task)"},
	{"gpu-type", 0, "LIST", "acceptable models, e.g. H100,A100-80GB"},
	{"cpus-per-task", 'c', "N", "CPUs reserved per task (default 0: none reserved)"},
	{"mem", 0, "SIZE", "memory reserved per node, e.g. 64G"},
	{"time", 't', "LIMIT",
	 "time limit as Slurm reads it: a bare number is minutes; 90s, 2h, MM:SS, HH:MM:SS, "
	 "D-HH, D-HH:MM:SS"},
	{"name", 'J', "NAME", "job name (default: the command's name)"},
	{"output", 'o', "PATH",
	 "output file; %j job, %A array, %a array index, %r attempt, %t task, %n node rank, %N "
	 "node, %u user, %x name (default tenk-%j.out)"},
	{"chdir", 'D', "DIR", "working folder (default: this one)"},
	{"requeue", 0, "N", "restart up to N times after a failure (default 0)"},
	{"grace", 0, "TIME", "between SIGTERM and SIGKILL when stopped (default 30s)"},
	{"export", 0, "ALL|NONE", "pass this environment to the job (default ALL)"},
	{"class", 0, "NAME", "priority class, e.g. prod, service, normal, batch (tenk classes)"},
	{"queue", 'q', "NAME", "the queue whose quota it uses (default: default)"},
	{"gpu-mem", 0, "SIZE", "each accelerator at least this much memory, e.g. 80G"},
	{"gpu-tflops", 0, "N", "each accelerator at least N dense bf16 TFLOP/s"},
	{"switches", 0, "N", "span at most N network switches (1: one leaf)"},
	{"mixed-types", 0, NULL, "let one gang mix accelerator models"},
	{"image", 0, "REF", "run every task in a container of this image (podman)"},
	{"mount", 0, "SRC[:DST][:ro],...",
	 "host folders the container sees (with --image); SRC relative to here"},
	{"ckpt-marker", 0, "NAME",
	 "what marks a checkpoint complete: tenk (TAG/.tenk-commit, the default), dcp, "
	 "deepspeed or megatron"},
	{"array", 'a', "INDICES[%N]",
	 "one job per index (0-999, 1,3,5-9, 0-15:4); %N: at most N run at once"},
	{"after", 0, "JOB[:WHEN],...",
	 "wait for these jobs: WHEN is ok (completed, the default), any (ended), fail, start"},
	{"dependency", 'd', "TYPE:JOB[:JOB],...",
	 "Slurm's form: after, afterok, afternotok, afterany"},
	{"begin", 'b', "TIME", "start no earlier: now+1h, 16:00, 2026-12-24T08:00, tomorrow"},
	{"comment", 0, "TEXT", "a note kept with the job"},
	{"error", 'e', "PATH", "stderr's file (default: with the output); as --output"},
	{"slurm-env", 0, NULL, "also set SLURM_JOB_ID, SLURM_PROCID, ... for Slurm scripts"},
	{"signal", 0, "SIG[@SECONDS]",
	 "send SIG this long before the time limit (default 60 s), e.g. USR1@120"},
	{"hold", 'H', NULL, "submit it held: it waits until tenk release"},
	{"gpus-per-node", 0, "N", "accelerators per node, shared out among its tasks"},
	{"gpus-per-task", 0, "G", "accelerators per task; a fraction below 1 shares one"},
	{"ntasks-per-node", 0, "N", "as --tasks-per-node"},
	{"ntasks", 'n', "N", "tasks in all (with -N or --tasks-per-node: what the other is)"},
	{"label", 'l', NULL, "tenk run: each line of output after its task's rank"},
	{"nodelist", 'w', "LIST",
	 "only on these nodes: node1,node3 or gpu[01-16] (default -N: as many as named)"},
	{"exclude", 'x', "LIST", "never on these nodes (as --nodelist)"},
	{"exclusive", 0, NULL, "alone on each of its nodes: nothing else runs beside it"},
	{"pty", 0, NULL,
	 "tenk run: the one task under a terminal joined to this one (tenk run --pty -- bash)"},
	{"keep", 0, NULL,
	 "tenk run: leave the job when this command is hung up (SIGHUP) or terminated "
	 "(SIGTERM); without it, the job is cancelled"},
	{"hold-if-impossible", 0, NULL,
	 "take it even if no node of the cluster could ever hold it: it waits for nodes yet to "
	 "come (without it, such a job is refused)"},
	{"array-throttle", 0, "N",
	 "tenk update: at most N of the array's elements run at once from now (0: no cap), "
	 "as scontrol's ArrayTaskThrottle"},
	{"no-attempt-marks", 0, NULL,
	 "no \"--- tenk: attempt N on NODE at TIME ---\" line where a restarted attempt begins "
	 "in the output files"},
	{"stall-after", 0, "TIME",
	 "a job writing training lines ($TENK_METRICS) that writes none for this long is "
	 "stalled (default: the cluster's, 10 times its median time between lines, at least "
	 "5m)"},
	{"on-stall", 0, "ACTION",
	 "what is done with it then: notify (the default: it says so, and /metrics), requeue "
	 "(from its last checkpoint) or cancel"},
	{"restart", 0, "in-place|requeue",
	 "when a task fails or a node is lost and it may go again: keep its healthy nodes, swap "
	 "a failed one and start again at once (in-place, the default for several nodes), or go "
	 "back to its queue (requeue, the default for one)"},
	{"max-restarts", 0, "N", "as --requeue: restart up to N times after its own failure"},
	{"spares", 0, "N",
	 "hold N idle nodes beside its own (charged to its queue): a failed node is swapped for "
	 "one when it restarts in place"},
	{"constraint", 'C', "EXPR",
	 "only on nodes whose labels satisfy EXPR (Slurm's feature syntax): KEY, KEY=VALUE or "
	 "KEY!=VALUE, joined by & (and) and | (or), e.g. \"fabric=ib&rack!=r07\""},
	{"fabric", 0, "KIND",
	 "only on nodes of this RDMA fabric: ib (an InfiniBand port ACTIVE), roce, or rdma "
	 "(either); the nodes' fabric= label, with --constraint's"},
	{"tolerate", 0, "TAINT,...",
	 "may run on nodes with these taints (tenk nodes taint): a tainted node takes only jobs "
	 "that tolerate each of its taints"},
	{"partition", 'p', "POOL,...",
	 "run in these pools (tenk pools; default: the cluster's default pool); a name that is "
	 "no pool names the queue, as #SBATCH -p did before pools"},
	{"spread", 0, "LEVEL[:N]",
	 "at most N (default 1) of its nodes in any one fault domain of that level (agents' "
	 "--domain; levels: config.json's domain_levels, by default dc, row, rack, pdu), e.g. "
	 "rack"},
	{"within", 0, "LEVEL", "all its nodes in one fault domain of that level, e.g. rack"},
	{"ckpt-signal", 0, "SIG[@SECONDS]",
	 "when a task fails, send SIG to the others and give them up to SECONDS (default 30) "
	 "to write a checkpoint before the gang stops, e.g. USR2@30; a node that wrote no part "
	 "of it restores another node's (data parallel)"},
	{"nccl-check", 0, NULL,
	 "log NCCL's choices (NCCL_DEBUG=INFO) and say where ranks went between nodes over "
	 "sockets on an RDMA node"},
	{"preemptible-any", 0, NULL,
	 "in a class ordered by least attained service: an earlier level may preempt it "
	 "whatever it would lose (by default, only while it would lose at most the class's "
	 "las_max_loss_s since its last checkpoint)"},
};
_Static_assert(ARRAY_SIZE(submit_opts) == S_COUNT, "one option per enum value");

static int add_int_opt(struct ctx *c, json_t *req, int opt, const char *key, int64_t min,
		       int64_t max)
{
	const char *v = c->v[opt];
	if (!v)
		return 0;
	int64_t x;
	if (tk_parse_int64(v, min, max, &x) < 0)
		return cli__usage_error(c->cmd,
					"--%s: must be an integer from %lld to %lld, got \"%s\"",
					submit_opts[opt].name, (long long)min, (long long)max, v);
	json_object_set_new(req, key, json_integer(x));
	return 0;
}

static int add_duration_opt(struct ctx *c, json_t *req, int opt, const char *key)
{
	const char *v = c->v[opt];
	if (!v)
		return 0;
	int64_t s;
	if (opt == S_TIME ? tk_parse_time_limit(v, &s) < 0 : tk_parse_duration(v, &s) < 0)
		return cli__usage_error(c->cmd,
					opt == S_TIME
						? "--%s: expected minutes (90), 90s, 2h, MM:SS, "
						  "HH:MM:SS, D-HH, D-HH:MM:SS or UNLIMITED, got "
						  "\"%s\""
						: "--%s: expected a duration such as 90s, 30m, "
						  "2h, 1d or 1-02:00:00, got \"%s\"",
					submit_opts[opt].name, v);
	json_object_set_new(req, key, json_integer(s));
	return 0;
}

/* --mount SRC[:DST][:ro],...: SRC made absolute from here, DST SRC's. */
static int add_mounts(struct ctx *c, json_t *req)
{
	if (!c->v[S_IMAGE])
		return cli__usage_error(c->cmd, "--mount: is for a job in an image (add --image)");
	char cwd[4096];
	if (!getcwd(cwd, sizeof(cwd)))
		return cli__usage_error(c->cmd, "cannot read the current folder");
	json_t *list = json_array();
	_cleanup_free_ char *copy = xstrdup(c->v[S_MOUNT]);
	char *save = NULL;
	for (char *m = strtok_r(copy, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(m, ':');
		_cleanup_free_ char *src = colon ? xstrndup(m, (size_t)(colon - m)) : xstrdup(m);
		const char *rest = colon ? colon : "";
		_cleanup_free_ char *abs = NULL;
		if (src[0] != '/') {
			abs = xasprintf("%s%s%s", cwd, strcmp(src, ".") == 0 ? "" : "/",
					strcmp(src, ".") == 0 ? "" : src);
		}
		const char *s = abs ? abs : src;
		/* "SRC:ro" is SRC at SRC, read-only */
		_cleanup_free_ char *full = xasprintf("%s%s", s, rest);
		struct mount_spec ms;
		struct tk_error err;
		if (model_mount_parse(full, false, &ms, &err) < 0) {
			json_decref(list);
			return cli__usage_error(c->cmd, "--mount: %s", err.text);
		}
		json_array_append_new(list, json_string(full));
	}
	json_object_set_new(req, "mounts", list);
	return 0;
}

/* A count option's value (1..max), or def when not given; < 0 after
 * saying what is wrong. */
static int64_t count_opt(struct ctx *c, int opt, int64_t max, int64_t def)
{
	int64_t x;
	if (!c->v[opt])
		return def;
	if (tk_parse_int64(c->v[opt], 1, max, &x) < 0) {
		cli__usage_error(c->cmd, "--%s: must be an integer from 1 to %lld, got \"%s\"",
				 submit_opts[opt].name, (long long)max, c->v[opt]);
		return -1;
	}
	return x;
}

/* Did the command line (not a script's lines) give option -X, before the
 * command it runs? */
static bool typed_short(const struct ctx *c, char x)
{
	for (int i = 1; i < c->argc; i++) {
		const char *a = c->argv[i];
		if (strcmp(a, "--") == 0 || (c->npos && a == c->pos[0]))
			return false;
		if (a[0] == '-' && a[1] == x)
			return true;
	}
	return false;
}

/* Nodes, tasks per node and accelerators per task, from tenk's options or
 * Slurm's (-n, --ntasks-per-node, --gpus-per-node, --gpus). */
static int add_shape(struct ctx *c, json_t *req)
{
	if (c->v[S_TPN] && c->v[S_NTASKS_PER_NODE])
		return cli__usage_error(c->cmd,
					"--tasks-per-node and --ntasks-per-node are one option: "
					"give one");
	int tpn_opt = c->v[S_NTASKS_PER_NODE] ? S_NTASKS_PER_NODE : S_TPN;
	/* -N MIN:MAX (or Slurm's MIN-MAX): an elastic gang */
	const char *nv = c->v[S_NODES], *sep = nv ? strpbrk(nv, ":-") : NULL;
	int64_t nodes_max = 0;
	char min[24];
	if (sep) {
		if ((size_t)(sep - nv) >= sizeof(min) ||
		    tk_parse_int64(sep + 1, 1, MODEL_MAX_NODES, &nodes_max) < 0)
			return cli__usage_error(c->cmd,
						"--nodes: expected N or MIN:MAX such as 2:4, got "
						"\"%s\"",
						nv);
		snprintf(min, sizeof(min), "%.*s", (int)(sep - nv), nv);
		c->v[S_NODES] = min;
	}
	int64_t nodes = count_opt(c, S_NODES, MODEL_MAX_NODES, 0);
	c->v[S_NODES] = nv;
	if (nodes > 0 && nodes_max && nodes_max < nodes)
		return cli__usage_error(c->cmd, "--nodes %s: MAX is fewer than MIN", nv);
	if (nodes_max && c->v[S_NTASKS])
		return cli__usage_error(c->cmd,
					"--ntasks with --nodes %s: an elastic gang's tasks follow "
					"its nodes; give --tasks-per-node",
					nv);
	if (nodes_max)
		json_object_set_new(req, "nodes_max", json_integer(nodes_max));
	int64_t tpn = count_opt(c, tpn_opt, MODEL_MAX_TASKS_PER_NODE, 0);
	int64_t ntasks =
		count_opt(c, S_NTASKS, (int64_t)MODEL_MAX_NODES * MODEL_MAX_TASKS_PER_NODE, 0);
	if (nodes < 0 || tpn < 0 || ntasks < 0)
		return CLI_EXIT_USAGE;
	if (ntasks) {
		if (nodes && tpn && nodes * tpn != ntasks)
			return cli__usage_error(
				c->cmd, "--ntasks %lld is not --nodes %lld x --tasks-per-node %lld",
				(long long)ntasks, (long long)nodes, (long long)tpn);
		if (!nodes && !tpn)
			nodes = 1;
		if (!tpn) {
			if (ntasks % nodes)
				return cli__usage_error(
					c->cmd,
					"--ntasks %lld does not share out evenly over %lld "
					"nodes (tenk gives every node as many tasks)",
					(long long)ntasks, (long long)nodes);
			tpn = ntasks / nodes;
		}
		if (!nodes) {
			if (ntasks % tpn)
				return cli__usage_error(c->cmd,
							"--ntasks %lld is not a multiple of "
							"--tasks-per-node %lld",
							(long long)ntasks, (long long)tpn);
			nodes = ntasks / tpn;
		}
		if (tpn > MODEL_MAX_TASKS_PER_NODE || nodes > MODEL_MAX_NODES)
			return cli__usage_error(c->cmd, "--ntasks %lld: too many tasks per node",
						(long long)ntasks);
	}
	if (nodes)
		json_object_set_new(req, "nodes", json_integer(nodes));
	if (tpn)
		json_object_set_new(req, "tasks_per_node", json_integer(tpn));
	int given = !!c->v[S_GPUS] + !!c->v[S_GPUS_PER_NODE] + !!c->v[S_GPUS_TOTAL];
	if (given > 1)
		return cli__usage_error(c->cmd,
					"give one of --gpus-per-task, --gpus-per-node and --gpus");
	if (!given)
		return 0;
	int opt = c->v[S_GPUS] ? S_GPUS : c->v[S_GPUS_PER_NODE] ? S_GPUS_PER_NODE : S_GPUS_TOTAL;
	const char *v = c->v[opt];
	char *end;
	double g = strtod(v, &end);
	if (opt == S_GPUS && (!*v || *end || !(g >= 0 && g <= MODEL_MAX_GPUS_PER_TASK)))
		return cli__usage_error(c->cmd, "--%s: must be a number from 0 to %d, got \"%s\"",
					submit_opts[opt].name, MODEL_MAX_GPUS_PER_TASK, v);
	/* (in all or per node: what it comes to per task is checked below) */
	if (!*v || *end || !(g >= 0 && g <= 1e9))
		return cli__usage_error(c->cmd,
					"--%s: must be a number of accelerators, got \"%s\"",
					submit_opts[opt].name, v);
	/* shared out: each task gets the same whole number, or one fraction */
	double per = opt == S_GPUS	      ? g
		     : opt == S_GPUS_PER_NODE ? g / (double)(tpn ? tpn : 1)
					      : g / (double)((nodes ? nodes : 1) * (tpn ? tpn : 1));
	if (opt != S_GPUS && per >= 1 && per != floor(per))
		return cli__usage_error(
			c->cmd, "--%s %s does not share out evenly over %lld task(s)%s",
			submit_opts[opt].name, v,
			(long long)(opt == S_GPUS_PER_NODE ? (tpn ? tpn : 1)
							   : (nodes ? nodes : 1) * (tpn ? tpn : 1)),
			opt == S_GPUS_PER_NODE ? " per node" : "");
	if (per > MODEL_MAX_GPUS_PER_TASK)
		return cli__usage_error(c->cmd, "--%s %s: more than %d accelerators per task",
					submit_opts[opt].name, v, MODEL_MAX_GPUS_PER_TASK);
	int64_t tasks = (nodes ? nodes : 1) * (tpn ? tpn : 1);
	if (opt == S_GPUS_TOTAL && tasks > 1 && typed_short(c, 'G'))
		/* for one release: where the old reading differs, say so */
		fprintf(stderr,
			"tenk %s: note: -G %s is the accelerators in all, as Slurm's -G: %g for "
			"each "
			"of %lld tasks (until 0.2.0, -G was per task: --gpus-per-task %s for "
			"that)\n",
			c->cmd->name, v, per, (long long)tasks, v);
	json_object_set_new(req, "gpus_per_task",
			    per == floor(per) ? json_integer((json_int_t)per) : json_real(per));
	return 0;
}

/* One dependency, JOB or JOB_INDEX, as the server names jobs: an
 * element's id is asked of the server. */
static int dep_add(struct ctx *c, json_t *list, const char *ref, const char *when)
{
	int64_t id;
	if (!strchr(ref, '_')) {
		if (tk_parse_int64(ref, 1, INT64_MAX, &id) < 0)
			return cli__usage_error(c->cmd,
						"a dependency names a job (41, or 41_3 in an "
						"array), got \"%s\"",
						ref);
	} else {
		if (cli__job_ref_check(c, ref))
			return CLI_EXIT_USAGE;
		_cleanup_free_ char *path = xasprintf("/v1/jobs/%s", ref);
		json_t *j;
		struct tk_error err;
		if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &j, NULL, &err) < 0)
			return cli__api_error(c, &err);
		id = cli__jint(j, "id");
		json_decref(j);
	}
	json_array_append_new(list, json_pack("{s:I, s:s}", "job", (json_int_t)id, "when", when));
	return 0;
}

/* --after JOB[:WHEN],... and Slurm's --dependency TYPE:JOB[:JOB],... */
static int add_deps(struct ctx *c, json_t *req)
{
	static const struct {
		const char *slurm, *when;
	} types[] = {
		{"after", "start"}, {"afterok", "ok"}, {"afternotok", "fail"}, {"afterany", "any"}};
	json_t *list = json_array();
	int r = 0;
	for (int which = 0; which < 2 && !r; which++) {
		const char *v = c->v[which ? S_DEPENDENCY : S_AFTER];
		if (!v)
			continue;
		if (which && strchr(v, '?')) {
			r = cli__usage_error(c->cmd,
					     "--dependency: '?' (any one of) is not supported; "
					     "list what must all hold with ','");
			break;
		}
		_cleanup_free_ char *copy = xstrdup(v);
		char *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t && !r;
		     t = strtok_r(NULL, ",", &save)) {
			char *colon = strchr(t, ':');
			if (!which) {
				const char *when = "ok";
				if (colon) {
					*colon = '\0';
					when = colon + 1;
					enum dep_when w;
					if (dep_when_parse(when, &w) < 0) {
						r = cli__usage_error(
							c->cmd,
							"--after: %s:%s: after the ':' comes "
							"ok, any, fail or start",
							t, when);
						break;
					}
				}
				r = dep_add(c, list, t, when);
				continue;
			}
			const char *when = NULL;
			if (colon) {
				*colon = '\0';
				for (size_t k = 0; k < ARRAY_SIZE(types); k++)
					if (strcasecmp(t, types[k].slurm) == 0)
						when = types[k].when;
			}
			if (!when) {
				r = cli__usage_error(
					c->cmd,
					"--dependency: \"%s\": expected after, afterok, "
					"afternotok or afterany, then ':' and job ids",
					t);
				break;
			}
			char *save2 = NULL;
			for (char *id = strtok_r(colon + 1, ":", &save2); id && !r;
			     id = strtok_r(NULL, ":", &save2)) {
				char *plus = strchr(id, '+'); /* Slurm's after:JOB+MINUTES */
				if (plus) {
					r = cli__usage_error(c->cmd,
							     "--dependency: \"+MINUTES\" is not "
							     "supported");
					break;
				}
				r = dep_add(c, list, id, when);
			}
		}
	}
	if (!r && json_array_size(list))
		json_object_set_new(req, "after", json_incref(list));
	json_decref(list);
	return r;
}

/* --array, --after/--dependency, --begin, --comment, --error, --slurm-env,
 * --signal, --hold. */
static int add_extras(struct ctx *c, json_t *req, bool update)
{
	int r;
	if (c->v[S_ARRAY]) {
		int *idx, n, cap;
		struct tk_error err;
		if (model_array_parse(c->v[S_ARRAY], &idx, &n, &cap, &err) < 0)
			return cli__usage_error(c->cmd, "--%s", err.text);
		free(idx);
		json_object_set_new(req, "array", json_string(c->v[S_ARRAY]));
	}
	if ((r = add_deps(c, req)))
		return r;
	if (c->v[S_BEGIN]) {
		int64_t at;
		if (tk_parse_begin(c->v[S_BEGIN], (int64_t)time(NULL), &at) < 0)
			return cli__usage_error(
				c->cmd,
				"--begin: expected now+DURATION, HH:MM[:SS], "
				"YYYY-MM-DD[THH:MM[:SS]], today or tomorrow; got \"%s\"",
				c->v[S_BEGIN]);
		json_object_set_new(req, "begin_ms", json_integer(at * 1000));
	}
	if (c->v[S_COMMENT])
		json_object_set_new(req, "comment", json_string(c->v[S_COMMENT]));
	if (c->v[S_ERROR])
		json_object_set_new(req, "error", json_string(c->v[S_ERROR]));
	if (c->v[S_SLURM_ENV])
		json_object_set_new(req, "slurm_env", json_true());
	if (c->v[S_NCCL_CHECK])
		json_object_set_new(req, "nccl_check", json_true());
	if (c->v[S_PREEMPTIBLE_ANY])
		json_object_set_new(req, "preemptible_any", json_true());
	if (c->v[S_SIGNAL]) {
		const char *v = c->v[S_SIGNAL];
		if ((v[0] == 'B' || v[0] == 'R') && v[1] == ':') /* Slurm's: whom; all tasks here */
			v += 2;
		_cleanup_free_ char *copy = xstrdup(v);
		char *at = strchr(copy, '@');
		int64_t before = 60;
		int sig;
		if (at)
			*at = '\0';
		if (tk_parse_signal(copy, &sig) < 0 ||
		    (at && tk_parse_int64(at + 1, 0, 65535, &before) < 0))
			return cli__usage_error(
				c->cmd,
				"--signal: expected SIG[@SECONDS] such as USR1@120, got "
				"\"%s\"",
				c->v[S_SIGNAL]);
		if (!update && !c->v[S_TIME])
			return cli__usage_error(
				c->cmd, "--signal: comes before the time limit: add --time");
		json_object_set_new(
			req, "signal",
			json_pack("{s:i, s:I}", "number", sig, "before_s", (json_int_t)before));
	}
	if (c->v[S_CKPT_SIGNAL]) {
		_cleanup_free_ char *copy = xstrdup(c->v[S_CKPT_SIGNAL]);
		char *at = strchr(copy, '@');
		int64_t wait = 30;
		int sig;
		if (at)
			*at = '\0';
		if (tk_parse_signal(copy, &sig) < 0 ||
		    (at && tk_parse_duration(at + 1, &wait) < 0) || wait < 1 ||
		    wait > MODEL_MAX_CKPT_SIGNAL_S)
			return cli__usage_error(
				c->cmd,
				"--ckpt-signal: expected SIG[@SECONDS] such as USR2@30 "
				"(at most %ds), got \"%s\"",
				MODEL_MAX_CKPT_SIGNAL_S, c->v[S_CKPT_SIGNAL]);
		json_object_set_new(
			req, "ckpt_signal",
			json_pack("{s:i, s:I}", "number", sig, "wait_s", (json_int_t)wait));
	}
	if (c->v[S_HOLD])
		json_object_set_new(req, "hold", json_true());
	for (int w = 0; w < 2; w++) {
		int opt = w ? S_EXCLUDE : S_NODELIST;
		if (!c->v[opt])
			continue;
		char **names;
		int n;
		struct tk_error err;
		if (model_hostlist_parse(c->v[opt], MODEL_MAX_NODES, &names, &n, &err) < 0)
			return cli__usage_error(c->cmd, "--%s: %s", submit_opts[opt].name,
						err.text);
		json_t *list = json_array();
		for (int i = 0; i < n; i++) {
			json_array_append_new(list, json_string(names[i]));
			free(names[i]);
		}
		free(names);
		json_object_set_new(req, w ? "exclude" : "nodelist", list);
		/* Slurm's habit: -w without -N runs on every node named */
		if (!w && !update && !json_object_get(req, "nodes"))
			json_object_set_new(req, "nodes", json_integer(n));
	}
	if (c->v[S_EXCLUSIVE])
		json_object_set_new(req, "exclusive", json_true());
	return 0;
}

/* ---- scripts: #TENK and #SBATCH lines ---------------------------------------------- */

#define SCRIPT_MAX_BYTES (1 << 20)
#define SCRIPT_MAX_TOKENS 512

/* Slurm's options that tenk shares, by Slurm's names, and what tenk
 * calls them. */
static const struct {
	const char *name;
	char short_name;
	const char *tenk; /* NULL: the value needs translating (gres) */
	bool value;
} slurm_opts[] = {
	{"nodes", 'N', "nodes", true},
	{"ntasks", 'n', "ntasks", true},
	{"ntasks-per-node", 0, "ntasks-per-node", true},
	{"cpus-per-task", 'c', "cpus-per-task", true},
	{"mem", 0, "mem", true},
	{"time", 't', "time", true},
	{"job-name", 'J', "name", true},
	{"output", 'o', "output", true},
	{"error", 'e', "error", true},
	{"chdir", 'D', "chdir", true},
	{"partition", 'p', "partition", true},
	{"qos", 'q', "class", true},
	{"array", 'a', "array", true},
	{"dependency", 'd', "dependency", true},
	{"begin", 'b', "begin", true},
	{"comment", 0, "comment", true},
	{"signal", 0, "signal", true},
	{"hold", 'H', "hold", false},
	{"export", 0, "export", true},
	{"gpus", 'G', "gpus", true},
	{"gpus-per-node", 0, "gpus-per-node", true},
	{"gpus-per-task", 0, "gpus-per-task", true},
	{"gres", 0, NULL, true},
	{"nodelist", 'w', "nodelist", true},
	{"exclude", 'x', "exclude", true},
	{"exclusive", 0, "exclusive", false},
	{"constraint", 'C', "constraint", true},
};

struct script {
	const char *path;
	/* a script that is not executable runs through its #! line, as
	 * sbatch's: the interpreter and its one argument, before the path */
	char *interp[2];
	char **tok; /* tenk options, owned */
	int ntok;
	size_t alloc;
	struct strbuf ignored; /* Slurm options tenk does not share */
};

static void script_push(struct script *sc, char *t)
{
	xgrow(&sc->tok, &sc->alloc, (size_t)sc->ntok + 2, sizeof(*sc->tok));
	sc->tok[sc->ntok++] = t;
	sc->tok[sc->ntok] = NULL;
}

/* One line's words, split at blanks; "..." and '...' hold blanks. */
static int split_words(char *line, char **w, int max)
{
	int n = 0;
	for (char *p = line; *p;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p || *p == '#') /* the rest is a comment */
			break;
		if (n == max)
			return -E2BIG;
		char *out = p;
		w[n++] = out;
		while (*p && *p != ' ' && *p != '\t') {
			if (*p == '"' || *p == '\'') {
				char q = *p++;
				while (*p && *p != q)
					*out++ = *p++;
				if (*p)
					p++;
			} else {
				*out++ = *p++;
			}
		}
		if (*p)
			p++;
		*out = '\0';
	}
	return n;
}

/* #SBATCH words into tenk's options; what tenk does not share goes in
 * sc->ignored. */
static int sbatch_words(struct ctx *c, struct script *sc, int line, char **w, int n)
{
	for (int i = 0; i < n; i++) {
		const char *a = w[i];
		const char *val = NULL;
		char name[64] = "";
		int k = -1;
		if (a[0] != '-' || !a[1])
			return cli__usage_error(c->cmd,
						"%s line %d: #SBATCH \"%s\" is not an option",
						sc->path, line, a);
		if (a[1] == '-') {
			const char *eq = strchr(a + 2, '=');
			size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
			snprintf(name, sizeof(name), "%.*s", (int)MIN(len, 60), a + 2);
			val = eq ? eq + 1 : NULL;
			for (size_t s2 = 0; s2 < ARRAY_SIZE(slurm_opts); s2++)
				if (strcmp(slurm_opts[s2].name, name) == 0)
					k = (int)s2;
		} else {
			for (size_t s2 = 0; s2 < ARRAY_SIZE(slurm_opts); s2++)
				if (slurm_opts[s2].short_name == a[1])
					k = (int)s2;
			if (k >= 0)
				snprintf(name, sizeof(name), "%s", slurm_opts[k].name);
			else
				snprintf(name, sizeof(name), "-%c", a[1]);
			val = a[2] ? a + 2 : NULL;
		}
		bool takes =
			k >= 0 ? slurm_opts[k].value : (!val && i + 1 < n && w[i + 1][0] != '-');
		if (takes && !val) {
			if (i + 1 >= n)
				return cli__usage_error(c->cmd,
							"%s line %d: #SBATCH %s needs a value",
							sc->path, line, a);
			val = w[++i];
		}
		if (k < 0) {
			strbuf_addf(&sc->ignored, "%s%s%s", sc->ignored.len ? ", " : "",
				    name[0] == '-' ? "" : "--", name);
			continue;
		}
		if (!slurm_opts[k].tenk) {
			/* --gres=gpu:N or gpu:TYPE:N: accelerators per node */
			char type[64] = "";
			int count = 0, used = 0;
			if (sscanf(val, "gpu:%63[^:]:%d%n", type, &count, &used) == 2 &&
			    !val[used]) {
				script_push(sc, xasprintf("--gpu-type=%s", type));
			} else if (!(sscanf(val, "gpu:%d%n", &count, &used) == 1 && !val[used])) {
				return cli__usage_error(
					c->cmd,
					"%s line %d: #SBATCH --gres=%s: tenk reads gpu:N "
					"and gpu:TYPE:N",
					sc->path, line, val);
			}
			script_push(sc, xasprintf("--gpus-per-node=%d", count));
			continue;
		}
		bool mb =
			strcmp(name, "mem") == 0 && val && strspn(val, "0123456789") == strlen(val);
		if (takes)
			script_push(sc, xasprintf("--%s=%s%s", slurm_opts[k].tenk, val,
						  mb ? "M" : "")); /* Slurm's bare --mem is MB */
		else
			script_push(sc, xasprintf("--%s", slurm_opts[k].tenk));
	}
	return 0;
}

/* Is name a program on $PATH? */
static bool on_path(const char *name)
{
	_cleanup_free_ char *p = tk_which(name, NULL);
	return p != NULL;
}

/* A name that can only be a script read here: a path relative to this
 * folder (./run.sh, jobs/run.sh) or a bare name with a script's suffix. A
 * command that only the nodes have is named by its absolute path. */
static bool names_a_script(const char *cmd)
{
	static const char *const suffixes[] = {".sh", ".bash", ".zsh", ".sbatch", ".slurm"};
	if (cmd[0] == '/')
		return false;
	if (strchr(cmd, '/'))
		return true;
	const char *dot = strrchr(cmd, '.');
	for (size_t i = 0; dot && i < ARRAY_SIZE(suffixes); i++)
		if (strcmp(dot, suffixes[i]) == 0)
			return true;
	return false;
}

/* Its #! line into sc->interp: "#!/usr/bin/env python3" is /usr/bin/env
 * and python3, as the kernel reads it (one argument, the rest of the line). */
static int script_interp(struct ctx *c, struct script *sc, const char *text)
{
	if (strncmp(text, "#!", 2) != 0)
		return cli__usage_error(c->cmd,
					"%s: is not executable and has no #! line to run it by: "
					"chmod +x it, or begin it with #!/bin/bash",
					sc->path);
	const char *p = text + 2, *end = strchr(p, '\n');
	if (!end)
		end = p + strlen(p);
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	const char *q = p;
	while (q < end && *q != ' ' && *q != '\t')
		q++;
	if (q == p || *p != '/')
		return cli__usage_error(c->cmd,
					"%s: its #! line names no interpreter by its absolute path",
					sc->path);
	sc->interp[0] = xstrndup(p, (size_t)(q - p));
	while (q < end && (*q == ' ' || *q == '\t'))
		q++;
	const char *e = end;
	while (e > q && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		e--;
	if (e > q)
		sc->interp[1] = xstrndup(q, (size_t)(e - q));
	return 0;
}

/* The command a script: its path made absolute (a bare name in this folder
 * is found), and its #TENK and #SBATCH lines (the comments before its
 * first command) read into options the command line's own override. A
 * script named that is not here is refused; one that is not executable
 * runs through its #! line. */
static int script_options(struct ctx *c, struct script *sc)
{
	const char *cmd = c->pos[0];
	char cwd[4096];
	if (names_a_script(cmd) && !on_path(cmd) && access(cmd, F_OK) < 0 && errno == ENOENT)
		return cli__usage_error(c->cmd,
					"%s: no such file in %s: a script is read where tenk "
					"submit runs (a command that only the nodes have: give "
					"its absolute path)",
					cmd, getcwd(cwd, sizeof(cwd)) ? cwd : "this folder");
	if (!strchr(cmd, '/') && !on_path(cmd) && getcwd(cwd, sizeof(cwd))) {
		_cleanup_free_ char *here = xasprintf("%s/%s", cwd, cmd);
		struct stat st;
		if (stat(here, &st) == 0 && S_ISREG(st.st_mode)) {
			script_push(sc, xstrdup(here)); /* tok[0]: the path, kept */
			c->pos[0] = sc->tok[0];
		}
	}
	sc->path = c->pos[0];
	char *text = NULL;
	size_t len = 0;
	struct stat st;
	if (stat(sc->path, &st) < 0 || !S_ISREG(st.st_mode) ||
	    tk_read_file(sc->path, SCRIPT_MAX_BYTES, &text, &len) < 0)
		return 0; /* not a script here: the node runs it as it is */
	if (access(sc->path, X_OK) < 0) {
		int r = script_interp(c, sc, text);
		if (r) {
			free(text);
			return r;
		}
	}
	int rc = 0, line = 0;
	int first_opt = sc->ntok;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && !rc;
	     l = strtok_r(NULL, "\n", &save)) {
		line++;
		if (line == 1 && strncmp(l, "#!", 2) == 0)
			continue;
		while (*l == ' ' || *l == '\t')
			l++;
		if (!*l)
			continue;
		if (*l != '#')
			break; /* the first command ends the options, as with sbatch */
		bool tenk = strncmp(l, "#TENK", 5) == 0 && (l[5] == ' ' || l[5] == '\t');
		bool slurm = strncmp(l, "#SBATCH", 7) == 0 && (l[7] == ' ' || l[7] == '\t');
		if (!tenk && !slurm)
			continue;
		char *w[64];
		int n = split_words(l + (tenk ? 5 : 7), w, 64);
		if (n < 0) {
			rc = cli__usage_error(c->cmd, "%s line %d: more than 64 words", sc->path,
					      line);
			break;
		}
		if (sc->ntok + n >= SCRIPT_MAX_TOKENS) {
			rc = cli__usage_error(c->cmd, "%s: more than %d options", sc->path,
					      SCRIPT_MAX_TOKENS);
			break;
		}
		if (slurm) {
			rc = sbatch_words(c, sc, line, w, n);
			continue;
		}
		for (int i = 0; i < n; i++)
			script_push(sc, xstrdup(w[i]));
	}
	free(text);
	if (rc)
		return rc;
	if (sc->ignored.len)
		fprintf(stderr,
			"tenk submit: %s: ignoring #SBATCH options tenk does not share with "
			"Slurm: %s\n",
			sc->path, sc->ignored.buf);
	int nopt = sc->ntok - first_opt;
	if (!nopt)
		return 0;
	/* the script's options, then the command line's over them */
	char **argv = xcalloc((size_t)nopt + 2, sizeof(char *));
	argv[0] = (char *)"tenk submit";
	for (int i = 0; i < nopt; i++)
		argv[i + 1] = sc->tok[first_opt + i];
	const char *v[ARRAY_SIZE(c->v)];
	char **pos = NULL;
	int npos = 0;
	struct tk_error err;
	if (tk_opts_parse(submit_opts, ARRAY_SIZE(submit_opts), nopt + 1, argv, false, v, &pos,
			  &npos, &err) < 0)
		rc = cli__usage_error(c->cmd, "%s: %s", sc->path, err.text);
	else if (npos)
		rc = cli__usage_error(c->cmd, "%s: \"%s\" in a #TENK line is not an option",
				      sc->path, pos[0]);
	for (size_t i = O_FIRST_OWN; !rc && i < ARRAY_SIZE(submit_opts); i++)
		if (!c->v[i] && v[i])
			c->v[i] = v[i];
	free(pos);
	free(argv);
	return rc;
}

/* What placement and the queue read of a request, from the options;
 * update: for `tenk update` (the job has the rest). */
static int request_opts(struct ctx *c, json_t *req, bool update)
{
	int r;
	if ((r = add_shape(c, req)) || (r = add_extras(c, req, update)) ||
	    (r = add_int_opt(c, req, S_CPUS, "cpus_per_task", 0, MODEL_MAX_CPUS)) ||
	    (r = add_int_opt(c, req, S_REQUEUE, "requeue", 0, MODEL_MAX_REQUEUE)) ||
	    (r = add_int_opt(c, req, S_SPARES, "spares", 0, MODEL_MAX_NODES - 1)) ||
	    (r = add_duration_opt(c, req, S_TIME, "time_limit_s")) ||
	    (r = add_duration_opt(c, req, S_GRACE, "grace_s")) ||
	    (r = add_duration_opt(c, req, S_STALL_AFTER, "stall_after_s")))
		return r;
	if (c->v[S_MAX_RESTARTS]) {
		if (c->v[S_REQUEUE] && strcmp(c->v[S_REQUEUE], c->v[S_MAX_RESTARTS]) != 0)
			return cli__usage_error(
				c->cmd,
				"--max-restarts %s and --requeue %s say two things: "
				"give one of them",
				c->v[S_MAX_RESTARTS], c->v[S_REQUEUE]);
		if ((r = add_int_opt(c, req, S_MAX_RESTARTS, "requeue", 0, MODEL_MAX_REQUEUE)))
			return r;
	}
	if (c->v[S_RESTART]) {
		enum restart_mode m;
		if (restart_mode_parse(c->v[S_RESTART], &m) < 0)
			return cli__usage_error(
				c->cmd, "--restart: must be in-place, requeue or auto, got \"%s\"",
				c->v[S_RESTART]);
		json_object_set_new(req, "restart", json_string(c->v[S_RESTART]));
	}
	if (c->v[S_ON_STALL]) {
		enum stall_action a;
		if (stall_action_parse(c->v[S_ON_STALL], &a) < 0)
			return cli__usage_error(
				c->cmd, "--on-stall: must be notify, requeue or cancel, got \"%s\"",
				c->v[S_ON_STALL]);
		json_object_set_new(req, "on_stall", json_string(c->v[S_ON_STALL]));
	}
	if (c->v[S_GPU_TYPE]) {
		json_t *types = json_array();
		_cleanup_free_ char *copy = xstrdup(c->v[S_GPU_TYPE]);
		char *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
			json_array_append_new(types, json_string(t));
		json_object_set_new(req, "gpu_types", types);
	}
	if (c->v[S_MEM]) {
		int64_t mib;
		if (tk_parse_size_mib(c->v[S_MEM], &mib) < 0) {
			return cli__usage_error(
				c->cmd,
				"--mem: expected a size such as 512M, 64G or 1T, got \"%s\"",
				c->v[S_MEM]);
		}
		json_object_set_new(req, "mem_mib", json_integer(mib));
	}
	if (c->v[S_GPU_MEM]) {
		int64_t mib;
		if (tk_parse_size_mib(c->v[S_GPU_MEM], &mib) < 0) {
			return cli__usage_error(
				c->cmd, "--gpu-mem: expected a size such as 40G or 80G, got \"%s\"",
				c->v[S_GPU_MEM]);
		}
		json_object_set_new(req, "gpu_mem_mib", json_integer(mib));
	}
	if (c->v[S_GPU_TFLOPS]) {
		char *end;
		double tf = strtod(c->v[S_GPU_TFLOPS], &end);
		if (!*c->v[S_GPU_TFLOPS] || *end || !(tf > 0 && tf <= 1e6)) {
			return cli__usage_error(
				c->cmd, "--gpu-tflops: expected a positive number, got \"%s\"",
				c->v[S_GPU_TFLOPS]);
		}
		json_object_set_new(req, "gpu_tflops", json_real(tf));
	}
	if ((r = add_int_opt(c, req, S_SWITCHES, "switches", 1, MODEL_MAX_SWITCHES)))
		return r;
	if (c->v[S_CONSTRAINT] || c->v[S_FABRIC]) {
		struct tk_error cerr;
		char expr[MODEL_CONSTRAINT_MAX];
		snprintf(expr, sizeof(expr), "%s", c->v[S_CONSTRAINT] ? c->v[S_CONSTRAINT] : "");
		if (c->v[S_CONSTRAINT] && job_constraint_check(c->v[S_CONSTRAINT], &cerr) < 0)
			return cli__usage_error(c->cmd, "--%s", cerr.text);
		if (c->v[S_FABRIC] && job_constraint_with_fabric(c->v[S_CONSTRAINT], c->v[S_FABRIC],
								 expr, sizeof(expr), &cerr) < 0)
			return cli__usage_error(c->cmd, "--%s", cerr.text);
		json_object_set_new(req, "constraint", json_string(expr));
	}
	if (c->v[S_TOLERATE])
		json_object_set_new(req, "tolerate", json_string(c->v[S_TOLERATE]));
	if (c->v[S_MIXED])
		json_object_set_new(req, "mixed_types", json_true());
	if (c->v[S_CLASS])
		json_object_set_new(req, "class", json_string(c->v[S_CLASS]));
	if (c->v[S_QUEUE])
		json_object_set_new(req, "queue", json_string(c->v[S_QUEUE]));
	if (c->v[S_PARTITION])
		json_object_set_new(req, "partition", json_string(c->v[S_PARTITION]));
	for (int k = 0; k < 2; k++) {
		const char *v = c->v[k ? S_WITHIN : S_SPREAD];
		char level[MODEL_NAME_MAX];
		int cap;
		struct tk_error cerr;
		if (!v)
			continue;
		if (job_spread_parse(v, level, sizeof(level), k ? NULL : &cap, &cerr) < 0)
			return cli__usage_error(c->cmd, "--%s", cerr.text);
		json_object_set_new(req, k ? "within" : "spread", json_string(v));
	}
	if (c->v[S_NAME])
		json_object_set_new(req, "name", json_string(c->v[S_NAME]));
	return 0;
}

/* Submits; with run, streams its output and returns its exit status. */
static int submit_job(struct ctx *c, bool run)
{
	struct script sc = {0};
	strbuf_init(&sc.ignored);
	json_t *req = json_object();
	json_t *cmd = json_array();
	int r = script_options(c, &sc);
	for (int i = 0; i < 2 && sc.interp[i]; i++)
		json_array_append_new(cmd, json_string(sc.interp[i]));
	for (int i = 0; i < c->npos; i++)
		json_array_append_new(cmd, json_string(c->pos[i]));
	json_object_set_new(req, "command", cmd);
	if (!r && c->v[S_LABEL] && !run)
		r = cli__usage_error(c->cmd, "--label: is for tenk run and tenk logs");
	if (!r && c->v[S_PTY] && !run)
		r = cli__usage_error(c->cmd, "--pty: is for tenk run");
	if (!r && c->v[S_KEEP] && !run)
		r = cli__usage_error(c->cmd, "--keep: is for tenk run");
	if (!r && c->v[S_PTY] && !isatty(STDIN_FILENO))
		r = cli__usage_error(c->cmd, "--pty: needs a terminal on stdin");
	if (!r && c->v[S_PTY])
		json_object_set_new(req, "pty", json_true());
	if (!r && c->v[S_IMPOSSIBLE])
		json_object_set_new(req, "accept_impossible", json_true());
	if (!r && c->v[S_NO_MARKS])
		json_object_set_new(req, "attempt_marks", json_false());
	if (!r && c->v[S_THROTTLE])
		r = cli__usage_error(c->cmd, "--array-throttle: is for tenk update; at submit, "
					     "--array 0-99%%N");
	if (r)
		goto out;
	char cwd[4096];
	if (c->v[S_CHDIR]) {
		if (c->v[S_CHDIR][0] != '/') {
			if (!getcwd(cwd, sizeof(cwd))) {
				r = cli__usage_error(c->cmd, "cannot read the current folder");
				goto out;
			}
			_cleanup_free_ char *dir = xasprintf("%s/%s", cwd, c->v[S_CHDIR]);
			json_object_set_new(req, "cwd", json_string(dir));
		} else {
			json_object_set_new(req, "cwd", json_string(c->v[S_CHDIR]));
		}
	} else {
		if (!getcwd(cwd, sizeof(cwd))) {
			r = cli__usage_error(c->cmd,
					     "cannot read the current folder; pass --chdir");
			goto out;
		}
		json_object_set_new(req, "cwd", json_string(cwd));
	}
	if ((r = request_opts(c, req, false)))
		goto out;
	if (c->v[S_IMAGE])
		json_object_set_new(req, "image", json_string(c->v[S_IMAGE]));
	if (c->v[S_MOUNT] && (r = add_mounts(c, req)))
		goto out;
	if (c->v[S_CKPT_MARKER]) {
		enum ckpt_marker m;
		if (ckpt_marker_parse(c->v[S_CKPT_MARKER], &m) < 0) {
			r = cli__usage_error(
				c->cmd,
				"--ckpt-marker: tenk, dcp, deepspeed or megatron, got \"%s\"",
				c->v[S_CKPT_MARKER]);
			goto out;
		}
		json_object_set_new(req, "ckpt_marker", json_string(c->v[S_CKPT_MARKER]));
	}
	if (c->v[S_OUTPUT])
		json_object_set_new(req, "output", json_string(c->v[S_OUTPUT]));
	else if (run) /* each task's own file, so that its lines stay its own */
		json_object_set_new(req, "output", json_string("tenk-%j.%t.out"));
	const char *export = c->v[S_EXPORT] ? c->v[S_EXPORT] : "ALL";
	if (strcasecmp(export, "ALL") != 0 && strcasecmp(export, "NONE") != 0) {
		r = cli__usage_error(c->cmd, "--export: must be ALL or NONE, got \"%s\"", export);
		goto out;
	}
	json_t *env = json_object();
	if (strcasecmp(export, "ALL") == 0) {
		for (char **e = environ; *e; e++) {
			const char *eq = strchr(*e, '=');
			if (!eq || eq == *e)
				continue;
			_cleanup_free_ char *k = xstrndup(*e, (size_t)(eq - *e));
			/* the caller's credentials stay with the caller */
			if (strcmp(k, "TENK_TOKEN") == 0)
				continue;
			json_object_set_new(env, k, json_string(eq + 1));
		}
	}
	json_object_set_new(req, "env", env);
	json_t *job = NULL;
	struct tk_error err;
	if (client_call(&c->client, "POST", "/v1/jobs", req, CALL_TIMEOUT_MS, &job, NULL, &err) <
	    0) {
		r = cli__api_error(c, &err);
		goto out;
	}
	if (run) {
		/* its terminal hung up or it was told to end: so does its job,
		 * as srun's step (--keep leaves it) */
		cli__catch_hangup(true);
		char id[32];
		snprintf(id, sizeof(id), "%lld", (long long)cli__jint(job, "id"));
		json_decref(job);
		fprintf(stderr, "tenk run: job %s\n", id);
		if (c->v[S_PTY]) {
			r = cli__run_pty(c, id, !!c->v[S_KEEP]);
			cli__catch_hangup(false);
			goto out;
		}
		struct follow f = {.job = id,
				   .task = -1,
				   .label = !!c->v[S_LABEL],
				   .run = true,
				   .keep = !!c->v[S_KEEP]};
		r = cli__follow_job(c, &f);
		cli__catch_hangup(false);
		goto out;
	}
	if (c->json)
		cli__print_json(job);
	else
		printf("%lld\n", (long long)cli__jint(job, "id"));
	json_decref(job);
out:
	json_decref(req);
	for (int i = 0; i < sc.ntok; i++)
		free(sc.tok[i]);
	free(sc.tok);
	free(sc.interp[0]);
	free(sc.interp[1]);
	strbuf_release(&sc.ignored);
	return r;
}

static int run_submit(struct ctx *c)
{
	return submit_job(c, false);
}

static int run_run(struct ctx *c)
{
	if (c->v[S_ARRAY])
		return cli__usage_error(c->cmd, "--array: submit an array with tenk submit");
	return submit_job(c, true);
}

CLI_COMMAND(cli_submit, CLI_OPTS(submit_opts), true, 1, -1, run_submit)
CLI_COMMAND(cli_run, CLI_OPTS(submit_opts), true, 1, -1, run_run)

/* ---- update: a waiting job's request ----------------------------------------------- */

/* What a job's request is, fixed at submission. */
static const int fixed_opts[] = {S_OUTPUT,	S_CHDIR,      S_EXPORT,	   S_IMAGE,	S_MOUNT,
				 S_CKPT_MARKER, S_ARRAY,      S_SLURM_ENV, S_HOLD,	S_ERROR,
				 S_LABEL,	S_IMPOSSIBLE, S_NO_MARKS,  S_NCCL_CHECK};

/* tenk update ARRAY --array-throttle N: alone, as the server takes it */
static int update_throttle(struct ctx *c)
{
	int64_t cap;
	for (int i = O_FIRST_OWN; i < S_COUNT; i++)
		if (i != S_THROTTLE && c->v[i])
			return cli__usage_error(c->cmd,
						"--array-throttle: changes alone (--%s in another "
						"tenk update)",
						submit_opts[i].name);
	if (tk_parse_int64(c->v[S_THROTTLE], 0, MODEL_MAX_ARRAY, &cap) < 0)
		return cli__usage_error(c->cmd,
					"--array-throttle: an integer from 0 (no cap) to %d, got "
					"\"%s\"",
					MODEL_MAX_ARRAY, c->v[S_THROTTLE]);
	json_t *body = json_pack("{s:I}", "array_throttle", (json_int_t)cap), *job = NULL;
	struct tk_error err;
	_cleanup_free_ char *upath = xasprintf("/v1/jobs/%s/update", c->pos[0]);
	int r = client_call(&c->client, "POST", upath, body, CALL_TIMEOUT_MS, &job, NULL, &err);
	json_decref(body);
	if (r < 0)
		return cli__api_error(c, &err);
	if (c->json)
		cli__print_json(job);
	else if (cap)
		printf("array %s: at most %lld of its elements at once (%lld changed)\n", c->pos[0],
		       (long long)cap, (long long)cli__jint(job, "changed"));
	else
		printf("array %s: no cap on its elements (%lld changed)\n", c->pos[0],
		       (long long)cli__jint(job, "changed"));
	json_decref(job);
	return CLI_EXIT_OK;
}

static int run_update(struct ctx *c)
{
	if (cli__job_ref_check(c, c->pos[0]))
		return CLI_EXIT_USAGE;
	for (size_t i = 0; i < ARRAY_SIZE(fixed_opts); i++)
		if (c->v[fixed_opts[i]])
			return cli__usage_error(
				c->cmd,
				"--%s: is fixed once submitted (tenk cancel, then submit "
				"again)",
				submit_opts[fixed_opts[i]].name);
	_cleanup_free_ char *path = xasprintf("/v1/jobs/%s", c->pos[0]);
	json_t *job = NULL;
	struct tk_error err;
	char nodes[24], tpn[24];
	if (c->v[S_THROTTLE])
		return update_throttle(c);
	/* accelerators shared out per node or in all need the job's shape */
	if (c->v[S_GPUS_PER_NODE] || c->v[S_GPUS_TOTAL]) {
		if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &job, NULL, &err) <
		    0)
			return cli__api_error(c, &err);
		json_t *rq = json_object_get(job, "request");
		snprintf(nodes, sizeof(nodes), "%lld", (long long)cli__jint(rq, "nodes"));
		snprintf(tpn, sizeof(tpn), "%lld", (long long)cli__jint(rq, "tasks_per_node"));
		if (!c->v[S_NODES] && !c->v[S_NTASKS])
			c->v[S_NODES] = nodes;
		if (!c->v[S_TPN] && !c->v[S_NTASKS_PER_NODE] && !c->v[S_NTASKS])
			c->v[S_TPN] = tpn;
		json_decref(job);
		job = NULL;
	}
	json_t *req = json_object();
	int r = request_opts(c, req, true);
	if (!r && !json_object_size(req))
		r = cli__usage_error(c->cmd,
				     "nothing to change: give the options to change, such as "
				     "--time 4h");
	if (r) {
		json_decref(req);
		return r;
	}
	_cleanup_free_ char *upath = xasprintf("/v1/jobs/%s/update", c->pos[0]);
	r = client_call(&c->client, "POST", upath, req, CALL_TIMEOUT_MS, &job, NULL, &err);
	json_decref(req);
	if (r < 0)
		return cli__api_error(c, &err);
	if (c->json)
		cli__print_json(job);
	else
		printf("updated job %s\n", c->pos[0]);
	json_decref(job);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_update, CLI_OPTS(submit_opts), false, 1, 1, run_update)
