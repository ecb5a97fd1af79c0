/*
 * Launching and supervising tasks. A group is one attempt's part on this
 * node: tasks_per_node processes, each in its own session and process group
 * (so a stop reaches everything it started), with the launch environment of
 * DESIGN.md section 3, in the submitter's folder, output appended to the
 * job's output file.
 *
 * Stopping is SIGTERM to every task's group, then SIGKILL after the job's
 * grace period. When a task's main process exits, whatever it left behind in
 * its process group is killed too.
 *
 * A group lives until its tasks have exited, their events are acknowledged
 * by the server, and the server no longer lists it; only then is it
 * forgotten, so a late or repeated work answer can never start it twice.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void group_closed_one(uv_handle_t *h);

bool group_done(const struct group *g)
{
	return g->nrunning == 0;
}

/* Reports that task t started (type STARTED) or ended. */
static void emit(struct group *g, const struct task *t, enum task_event_type type, int code,
		 int sig, enum exit_cause cause, const char *detail)
{
	struct task_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.job = g->job;
	ev.attempt = g->attempt;
	ev.rank = t->rank;
	ev.type = type;
	ev.at_ms = tk_wall_ms();
	ev.exit_code = code;
	ev.signal = sig;
	ev.cause = cause;
	snprintf(ev.detail, sizeof(ev.detail), "%s", detail ? detail : "");
	g->unacked++;
	agent_queue_event(g->a, &ev);
}

/* Every task is gone: the timers are no longer needed. */
static void group_finish(struct group *g)
{
	if (g->timers_closing)
		return;
	g->timers_closing = true;
	uv_timer_stop(&g->limit_timer);
	uv_timer_stop(&g->kill_timer);
	uv_close((uv_handle_t *)&g->limit_timer, group_closed_one);
	uv_close((uv_handle_t *)&g->kill_timer, group_closed_one);
}

void group_maybe_free(struct group *g)
{
	if (g->nrunning || g->unacked || g->listed || g->open)
		return;
	struct agent *a = g->a;
	tk_map_del(&a->groups, g->key);
	a->ngroups_open--;
	free(g->tasks);
	free(g);
}

static void group_closed_one(uv_handle_t *h)
{
	struct group *g = h->data;
	g->open--;
	group_maybe_free(g);
}

void group_set_listed(struct group *g, bool listed)
{
	g->listed = listed;
	group_maybe_free(g);
}

void group_acked(struct group *g, int nevents)
{
	g->unacked -= nevents;
	if (g->unacked < 0)
		g->unacked = 0;
	group_maybe_free(g);
}

static void signal_all(struct group *g, int sig)
{
	for (int i = 0; i < g->ntasks; i++)
		if (g->tasks[i].running && g->tasks[i].pid > 0)
			kill(-g->tasks[i].pid, sig);
}

static void kill_timer_cb(uv_timer_t *t)
{
	struct group *g = t->data;
	log_info("job %lld.%d: grace period over, killing", (long long)g->job, g->attempt);
	signal_all(g, SIGKILL);
}

void group_stop(struct group *g, enum exit_cause cause, const char *detail)
{
	if (g->stopping || g->nrunning == 0)
		return;
	g->stopping = true;
	g->stop_cause = cause;
	snprintf(g->stop_detail, sizeof(g->stop_detail), "%s", detail);
	log_debug("job %lld.%d: stopping (%s%s%s)", (long long)g->job, g->attempt,
		  exit_cause_name(cause), *detail ? ": " : "", detail);
	uv_timer_stop(&g->limit_timer);
	if (g->grace_ms <= 0) {
		signal_all(g, SIGKILL);
		return;
	}
	signal_all(g, SIGTERM);
	uv_timer_start(&g->kill_timer, kill_timer_cb, (uint64_t)g->grace_ms, 0);
}

static void limit_timer_cb(uv_timer_t *t)
{
	struct group *g = t->data;
	log_info("job %lld.%d: time limit reached", (long long)g->job, g->attempt);
	group_stop(g, EXIT_TIMEOUT, "");
}

static void proc_closed(struct proc *p)
{
	struct task *t = p->data;
	struct group *g = t->g;
	g->open--;
	group_maybe_free(g);
}

static void task_ended(struct task *t)
{
	struct group *g = t->g;
	t->running = false;
	t->exited = true;
	if (--g->nrunning == 0)
		group_finish(g);
}

static void task_exit_cb(struct proc *p, int64_t status, int sig)
{
	struct task *t = p->data;
	struct group *g = t->g;
	/* whatever it left in its process group goes with it */
	if (t->pid > 0)
		kill(-t->pid, SIGKILL);
	int code = sig ? 128 + sig : (int)status;
	if (g->stopping)
		emit(g, t, TASK_EVENT_EXITED, code, sig, g->stop_cause, g->stop_detail);
	else
		emit(g, t, TASK_EVENT_EXITED, code, sig, sig ? EXIT_SIGNALLED : EXIT_EXITED, "");
	proc_close(p, proc_closed);
	task_ended(t);
	log_debug("job %lld.%d task %d exited %d", (long long)g->job, g->attempt, t->rank, code);
}

/* ---- the launch environment --------------------------------------------------------- */

static void env_add(char ***env, size_t *n, size_t *alloc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void env_add(char ***env, size_t *n, size_t *alloc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	xgrow(env, alloc, *n + 2, sizeof(char *));
	(*env)[(*n)++] = strbuf_detach(&sb);
	(*env)[*n] = NULL;
}

static void free_strv(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

/* Names tenk sets itself: the job's environment cannot override them. */
static bool reserved(const char *key, size_t len, bool fraction)
{
	static const char *const names[] = {
		"MASTER_ADDR", "MASTER_PORT",	       "WORLD_SIZE",	    "RANK",
		"LOCAL_RANK",  "LOCAL_WORLD_SIZE",     "NODE_RANK",	    "GROUP_RANK",
		"NNODES",      "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", NULL,
	};
	if (len > 5 && strncmp(key, "TENK_", 5) == 0)
		return true;
	/* a fraction's share of the device is tenk's to set */
	if (fraction && len > 9 && strncmp(key, "CUDA_MPS_", 9) == 0)
		return true;
	for (const char *const *p = names; *p; p++)
		if (strlen(*p) == len && strncmp(*p, key, len) == 0)
			return true;
	return false;
}

static char **build_env(struct group *g, const struct work_spec *spec, const struct task *t,
			const char *ckpt)
{
	int milli = spec->milli;
	bool fraction = milli > 0 && milli < MODEL_MILLI;
	char **env = NULL;
	size_t n = 0, alloc = 0;
	bool have_path = false;
	for (int i = 0; i < spec->nenv; i++) {
		const char *kv = spec->env[i];
		size_t klen = (size_t)(strchr(kv, '=') - kv);
		/* a validation run's token is the server's to give */
		bool token =
			spec->system && klen == 19 && strncmp(kv, "TENK_VALIDATE_TOKEN", 19) == 0;
		if (!token && reserved(kv, klen, fraction))
			continue;
		if (klen == 4 && strncmp(kv, "PATH", 4) == 0)
			have_path = true;
		env_add(&env, &n, &alloc, "%s", kv);
	}
	if (!have_path)
		env_add(&env, &n, &alloc, "PATH=/usr/local/bin:/usr/bin:/bin");
	int ndevs;
	const int *devs = work_spec_devices(spec, t->local_rank, &ndevs);
	struct strbuf cvd;
	strbuf_init(&cvd);
	for (int i = 0; i < ndevs; i++)
		strbuf_addf(&cvd, "%s%d", i ? "," : "", devs[i]);
	env_add(&env, &n, &alloc, "MASTER_ADDR=%s", spec->master_addr);
	env_add(&env, &n, &alloc, "MASTER_PORT=%d", spec->master_port);
	env_add(&env, &n, &alloc, "WORLD_SIZE=%d", g->world_size);
	env_add(&env, &n, &alloc, "RANK=%d", t->rank);
	env_add(&env, &n, &alloc, "LOCAL_RANK=%d", t->local_rank);
	env_add(&env, &n, &alloc, "LOCAL_WORLD_SIZE=%d", g->tpn);
	env_add(&env, &n, &alloc, "NODE_RANK=%d", g->node_rank);
	env_add(&env, &n, &alloc, "GROUP_RANK=%d", g->node_rank);
	env_add(&env, &n, &alloc, "NNODES=%d", g->nnodes);
	env_add(&env, &n, &alloc, "CUDA_DEVICE_ORDER=PCI_BUS_ID");
	env_add(&env, &n, &alloc, "CUDA_VISIBLE_DEVICES=%s", cvd.buf);
	env_add(&env, &n, &alloc, "TENK_JOB_ID=%lld", (long long)g->job);
	env_add(&env, &n, &alloc, "TENK_ATTEMPT=%d", g->attempt);
	env_add(&env, &n, &alloc, "TENK_JOB_NAME=%s", spec->name);
	env_add(&env, &n, &alloc, "TENK_NODE_NAME=%s", g->a->inv.name);
	env_add(&env, &n, &alloc, "TENK_CHECKPOINT_DIR=%s", ckpt);
	/* marks the task as this agent's, for the next agent to clean up after a crash */
	env_add(&env, &n, &alloc, "TENK_AGENT_DIR=%s", g->a->cfg.work_dir);
	env_add(&env, &n, &alloc, "TENK_AGENT_ID=%s", g->a->agent_id);
	env_add(&env, &n, &alloc, "TENK_SERVER=%s", g->a->cfg.server_url);
	if (fraction) {
		env_add(&env, &n, &alloc, "TENK_GPU_FRACTION=%.3f", milli / (double)MODEL_MILLI);
		/* where CUDA MPS runs, hold the task to its share of the device */
		const char *pipe = getenv("CUDA_MPS_PIPE_DIRECTORY");
		if (!pipe)
			pipe = "/tmp/nvidia-mps";
		_cleanup_free_ char *control = xasprintf("%s/control", pipe);
		int dev = ndevs > 0 ? devs[0] : -1;
		if (access(control, F_OK) == 0 && dev >= 0 && dev < g->a->inv.naccel) {
			env_add(&env, &n, &alloc, "CUDA_MPS_PIPE_DIRECTORY=%s", pipe);
			env_add(&env, &n, &alloc, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d",
				(milli + 9) / 10);
			env_add(&env, &n, &alloc, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%lldM",
				(long long)(g->a->inv.accel[dev].mem_mib * milli / MODEL_MILLI));
		}
	}
	strbuf_release(&cvd);
	return env;
}

/* Expands %j (job), %a (attempt), %t (task rank), %n (node rank), %% in an
 * output pattern, relative to cwd. */
static char *output_path(const struct group *g, const struct task *t, const char *pattern,
			 const char *cwd)
{
	struct strbuf sb;
	strbuf_init(&sb);
	if (pattern[0] != '/')
		strbuf_addf(&sb, "%s/", cwd);
	for (const char *p = pattern; *p; p++) {
		if (*p != '%' || !p[1]) {
			strbuf_addch(&sb, *p);
			continue;
		}
		switch (*++p) {
		case 'j':
			strbuf_addf(&sb, "%lld", (long long)g->job);
			break;
		case 'a':
			strbuf_addf(&sb, "%d", g->attempt);
			break;
		case 't':
			strbuf_addf(&sb, "%d", t->rank);
			break;
		case 'n':
			strbuf_addf(&sb, "%d", g->node_rank);
			break;
		case '%':
			strbuf_addch(&sb, '%');
			break;
		default:
			strbuf_addch(&sb, '%');
			strbuf_addch(&sb, *p);
		}
	}
	return strbuf_detach(&sb);
}

/* ---- starting ---------------------------------------------------------------------- */

static void spawn_task(struct group *g, struct task *t, const struct work_spec *spec,
		       const char *ckpt)
{
	const char *cwd = spec->cwd;
	/* the server's own work runs (and writes its output) in the agent's folder */
	if (spec->system)
		cwd = g->a->cfg.work_dir;
	_cleanup_free_ char *out = output_path(g, t, spec->output, cwd);
	char reason[MODEL_REASON_MAX];
	int fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0644);
	if (fd < 0) {
		snprintf(reason, sizeof(reason), "cannot open output file %s: %s", out,
			 strerror(errno));
		emit(g, t, TASK_EVENT_EXITED, 127, 0, EXIT_LAUNCH_FAILED, reason);
		t->exited = true;
		return;
	}
	char **argv = xcalloc((size_t)spec->argc + 1, sizeof(char *));
	for (int i = 0; i < spec->argc; i++)
		argv[i] = spec->argv[i];
	/* the server's own work runs this agent's binary, whatever PATH holds */
	char self[MODEL_MAX_PATH];
	if (spec->system && strcmp(argv[0], "tenk") == 0) {
		ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (len > 0) {
			self[len] = '\0';
			argv[0] = self;
		}
	}
	char **env = build_env(g, spec, t, ckpt);
	t->proc.data = t;
	int r = proc_spawn(g->a->loop, &t->proc, argv, env, cwd, fd, task_exit_cb);
	close(fd);
	free(argv);
	free_strv(env);
	if (r < 0) {
		int code = r == -EACCES ? 126 : 127;
		if (access(cwd, X_OK) < 0)
			snprintf(reason, sizeof(reason), "cannot enter folder %s: %s", cwd,
				 strerror(errno));
		else if (r == -ENOENT)
			snprintf(reason, sizeof(reason), "command not found: %s", spec->argv[0]);
		else
			snprintf(reason, sizeof(reason), "cannot start %s: %s", spec->argv[0],
				 strerror(-r));
		emit(g, t, TASK_EVENT_EXITED, code, 0, EXIT_LAUNCH_FAILED, reason);
		t->exited = true;
		return;
	}
	t->spawned = true;
	g->open++;
	t->pid = t->proc.pid;
	t->running = true;
	g->nrunning++;
	emit(g, t, TASK_EVENT_STARTED, 0, 0, EXIT_EXITED, NULL);
}

struct group *group_start(struct agent *a, int64_t job, int attempt, const struct work_spec *spec)
{
	struct group *g = xcalloc(1, sizeof(*g));
	g->a = a;
	g->job = job;
	g->attempt = attempt;
	snprintf(g->key, sizeof(g->key), "%lld.%d", (long long)job, attempt);
	g->node_rank = spec->node_rank;
	g->nnodes = spec->nnodes;
	g->tpn = spec->tasks_per_node;
	g->world_size = spec->world_size;
	g->grace_ms = spec->grace_s * 1000;
	g->limit_ms = spec->time_limit_s * 1000;
	g->listed = true;
	g->ntasks = g->tpn;
	g->tasks = xcalloc((size_t)g->ntasks, sizeof(*g->tasks));
	uv_timer_init(a->loop, &g->limit_timer);
	uv_timer_init(a->loop, &g->kill_timer);
	g->limit_timer.data = g->kill_timer.data = g;
	g->open = 2;
	tk_map_put(&a->groups, g->key, g);
	a->ngroups_open++;

	_cleanup_free_ char *ckpt =
		xasprintf("%s/checkpoints/%lld", a->cfg.work_dir, (long long)job);
	int r = tk_mkdir_p(ckpt, 0700);
	if (r < 0)
		log_warn("job %lld: cannot create checkpoint folder %s: %s", (long long)job, ckpt,
			 strerror(-r));
	log_debug("job %lld.%d: starting %d task(s), node rank %d", (long long)job, attempt,
		  g->ntasks, g->node_rank);
	for (int i = 0; i < g->ntasks; i++) {
		struct task *t = &g->tasks[i];
		t->g = g;
		t->local_rank = i;
		t->rank = g->node_rank * g->tpn + i;
		spawn_task(g, t, spec, ckpt);
	}
	if (g->nrunning == 0) {
		group_finish(g);
	} else {
		if (g->limit_ms > 0)
			uv_timer_start(&g->limit_timer, limit_timer_cb, (uint64_t)g->limit_ms, 0);
		/* a task that failed to start ends the whole gang */
		for (int i = 0; i < g->ntasks; i++)
			if (g->tasks[i].exited) {
				group_stop(g, EXIT_CANCELLED, "a task failed to start");
				break;
			}
	}
	return g;
}

#define CKPT_SCAN_MAX 4096 /* entries looked at in one checkpoint folder */

int64_t group_newest_checkpoint(const struct group *g)
{
	_cleanup_free_ char *dir =
		xasprintf("%s/checkpoints/%lld", g->a->cfg.work_dir, (long long)g->job);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int64_t newest = 0;
	int seen = 0;
	struct dirent *de;
	while ((de = readdir(d)) && seen++ < CKPT_SCAN_MAX) {
		if (de->d_name[0] == '.')
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		int64_t ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
		newest = MAX(newest, ms);
	}
	closedir(d);
	return newest;
}

int64_t group_grace_ms(const struct group *g)
{
	return g->grace_ms;
}

void group_free_now(struct group *g)
{
	free(g->tasks);
	free(g);
}

int agent_running_groups(struct agent *a)
{
	int n = 0;
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v))
		if (((struct group *)v)->nrunning > 0)
			n++;
	return n;
}
