/*
 * `tenk-shim DIR`: the supervisor of one attempt's tasks on this node
 * (shim.h says what it is for). Started by the agent with the socket it
 * listens on as descriptor 3, in a session of its own. It is every task's
 * parent and the subreaper of what they leave behind; it enforces the time
 * limit and the grace period of a stop itself, so that neither depends on
 * the agent; every change is written to DIR/status.json before it is told.
 *
 * It holds its tasks on a lease (wire.h says why and for how long): the
 * plan grants the first, every agent renews it while it is in touch with
 * the server, and when it runs out the shim stops the tasks with cause
 * LOST, giving them at most the fence grace before it kills the cgroup.
 * An agent that restarts connects again; the newest connection wins.
 *
 * Its loop holds: the listening socket, the agent's connection (and old
 * ones closing), a SIGCHLD watch, the time-limit, kill and lease timers.
 * It ends when an agent releases it once every task has exited.
 */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHIM_LISTEN_FD 3

struct shim;

/* One agent's connection. */
struct conn {
	uv_pipe_t pipe;
	struct shim *sh;
	struct strbuf in;
};

struct shim {
	uv_loop_t loop;
	const char *dir;
	char *status_path;
	struct shim_plan plan;
	struct cgroup cg;
	struct shim_status st;
	uv_pipe_t listener;
	struct conn *conn; /* the newest agent's; NULL: none */
	uv_signal_t sigchld;
	uv_timer_t limit_timer, kill_timer, lease_timer, signal_timer;
	int64_t started_mono;	/* the tasks started then (monotonic ms) */
	int64_t lease_until_ms; /* monotonic */
	bool stopping;
	bool signalled; /* SHIM_CMD_SIGNAL came: not again */
	enum exit_cause stop_cause;
	char stop_detail[MODEL_REASON_MAX];
	int nrunning;
	bool released;
	bool disk_stale; /* the last status on disk failed to be written */
	int *out_fds;	 /* container tasks: each one's output, to read podman's failure from */
	struct shim_pty *pty; /* the interactive task's terminal (plan.pty) */
	int check_pid;	      /* the device check's, while it runs (plan.check_argv) */
	uv_timer_t check_timer;
	bool check_hung;
};

/* Where the cgroups are, read by the launcher that forked this shim
 * (NULL: read them here). */
static const struct cg_host *host;

void shim_set_host(const struct cg_host *h)
{
	host = h;
}

static bool all_exited(const struct shim *sh)
{
	for (int i = 0; i < sh->st.ntasks; i++)
		if (sh->st.tasks[i].state != SHIM_TASK_EXITED)
			return false;
	return true;
}

static void write_cb(uv_write_t *w, int status)
{
	free(w->data);
	free(w);
}

/* The status to the agent, if one is there; on disk first (atomically)
 * when it says more than what the cgroup used. usage: what the cgroup used
 * read again first (three files of the cgroup's; a status that only says
 * the tasks started, or says again what was said, keeps the last figures). */
static void send_status(struct shim *sh, bool usage, bool to_disk)
{
	if (usage && sh->cg.version)
		cg_usage(&sh->cg, &sh->st.cpu_ms, &sh->st.mem_peak_mib, &sh->st.mem_mib);
	to_disk |= sh->disk_stale;
	if (!to_disk && !sh->conn)
		return;
	json_t *j = shim_status_pack(&sh->st);
	char *text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	size_t n = strlen(text);
	if (to_disk) {
		int r = tk_replace_file(sh->status_path, text, n, 0600);
		/* a status not on disk is written again with the next one */
		sh->disk_stale = r < 0;
		if (r < 0)
			log_err("cannot write %s: %s", sh->status_path, strerror(-r));
	}
	if (!sh->conn) {
		free(text);
		return;
	}
	text = xrealloc(text, n + 2);
	text[n] = '\n';
	text[n + 1] = '\0';
	uv_write_t *w = xmalloc(sizeof(*w));
	w->data = text;
	uv_buf_t b = uv_buf_init(text, (unsigned)n + 1);
	if (uv_write(w, (uv_stream_t *)&sh->conn->pipe, &b, 1, write_cb) < 0) {
		free(text);
		free(w);
	}
}

/* A change of the tasks' states: on disk, then to the agent. */
static void publish(struct shim *sh, bool usage)
{
	send_status(sh, usage, true);
}

/* Every task's process group, and with a cgroup every process of the
 * attempt (what called setsid or forked twice goes too). */
/* Every process of the tasks once: through the attempt's cgroup, which
 * holds all of them (those that left their process group too), else to
 * each task's process group. (Both would deliver it twice, and a task's
 * trap would run twice.) */
static void signal_tasks(struct shim *sh, int sig)
{
	if (sh->cg.version && sh->cg.ndirs) {
		if (sig == SIGKILL)
			cg_kill(&sh->cg);
		else
			cg_signal(&sh->cg, sig);
		return;
	}
	for (int i = 0; i < sh->st.ntasks; i++) {
		const struct shim_task_status *t = &sh->st.tasks[i];
		if (t->state == SHIM_TASK_RUNNING && t->pid > 0)
			kill(-t->pid, sig);
	}
}

static void kill_timer_cb(uv_timer_t *t)
{
	struct shim *sh = t->data;
	log_info("job %lld.%d: grace period over, killing", (long long)sh->plan.job,
		 sh->plan.attempt);
	signal_tasks(sh, SIGKILL);
}

/* SIGTERM now, SIGKILL after grace_ms; the exits are put down to cause. */
static void stop(struct shim *sh, enum exit_cause cause, const char *detail, int64_t grace_ms)
{
	if (!sh->stopping && sh->check_pid > 0) {
		/* nothing started yet: the check goes, and the tasks end unstarted */
		sh->stopping = true;
		sh->stop_cause = cause;
		snprintf(sh->stop_detail, sizeof(sh->stop_detail), "%s", detail);
		kill(sh->check_pid, SIGKILL);
		return;
	}
	if (sh->stopping || sh->nrunning == 0)
		return;
	sh->stopping = true;
	sh->stop_cause = cause;
	snprintf(sh->stop_detail, sizeof(sh->stop_detail), "%s", detail);
	uv_timer_stop(&sh->limit_timer);
	uv_timer_stop(&sh->signal_timer);
	log_debug("job %lld.%d: stopping (%s%s%s)", (long long)sh->plan.job, sh->plan.attempt,
		  exit_cause_name(cause), *detail ? ": " : "", detail);
	if (grace_ms <= 0) {
		signal_tasks(sh, SIGKILL);
		return;
	}
	signal_tasks(sh, SIGTERM);
	uv_timer_start(&sh->kill_timer, kill_timer_cb, (uint64_t)grace_ms, 0);
}

/* ---- the lease ------------------------------------------------------------------------ */

static void lease_timer_cb(uv_timer_t *t);

/* Wakes at the lease's end while tasks run; once they are all gone, one
 * lease later still, to see whether any agent is left to tell. */
static void lease_arm(struct shim *sh)
{
	int64_t at = sh->lease_until_ms + (sh->nrunning ? 0 : sh->plan.lease_ms);
	int64_t left = at - tk_mono_ms();
	uv_timer_start(&sh->lease_timer, lease_timer_cb, (uint64_t)MAX(left, 0), 0);
}

/* No agent in touch with the server renewed the lease: the server may
 * soon run this attempt elsewhere, so its tasks go now, within the fence
 * grace, even those already stopping with a longer one. */
static void lease_timer_cb(uv_timer_t *t)
{
	struct shim *sh = t->data;
	int64_t now = tk_mono_ms();
	if (sh->nrunning == 0) {
		/* a whole node timeout (two leases) without an agent: the server
		 * has ended the attempt; status.json stays for whoever comes */
		if (now < sh->lease_until_ms + sh->plan.lease_ms || sh->conn) {
			if (now >= sh->lease_until_ms + sh->plan.lease_ms)
				sh->lease_until_ms = now; /* an agent is there: ask later */
			lease_arm(sh);
			return;
		}
		log_info("job %lld.%d: no agent came for its statuses; exiting",
			 (long long)sh->plan.job, sh->plan.attempt);
		uv_stop(&sh->loop);
		return;
	}
	if (now < sh->lease_until_ms) {
		lease_arm(sh); /* the loop's clock ran a little ahead of ours */
		return;
	}
	int64_t grace = MIN(sh->plan.grace_ms, sh->plan.fence_grace_ms);
	log_warn("job %lld.%d: its lease ran out; stopping its tasks", (long long)sh->plan.job,
		 sh->plan.attempt);
	if (!sh->stopping) {
		char detail[MODEL_REASON_MAX];
		snprintf(detail, sizeof(detail),
			 "its lease ran out: no agent in touch with the server for %llds",
			 (long long)(sh->plan.lease_ms / 1000));
		stop(sh, EXIT_LOST, detail, grace);
	} else if (uv_is_active((uv_handle_t *)&sh->kill_timer) &&
		   uv_timer_get_due_in(&sh->kill_timer) > (uint64_t)grace) {
		uv_timer_start(&sh->kill_timer, kill_timer_cb, (uint64_t)grace, 0);
	}
}

/* An agent in touch with the server holds the tasks until until_ms; no
 * renewal reaches further than one lease from now. */
static void lease_renew(struct shim *sh, int64_t until_ms)
{
	until_ms = MIN(until_ms, tk_mono_ms() + sh->plan.lease_ms);
	if (until_ms <= sh->lease_until_ms)
		return;
	sh->lease_until_ms = until_ms;
	lease_arm(sh);
}

static void limit_timer_cb(uv_timer_t *t)
{
	struct shim *sh = t->data;
	log_info("job %lld.%d: time limit reached", (long long)sh->plan.job, sh->plan.attempt);
	stop(sh, EXIT_TIMEOUT, "", sh->plan.grace_ms);
}

static void signal_timer_cb(uv_timer_t *t);

/* Arms the time limit (and its warning) for what is left of it since the
 * tasks started. */
static void arm_limit(struct shim *sh)
{
	uv_timer_stop(&sh->limit_timer);
	uv_timer_stop(&sh->signal_timer);
	if (!sh->nrunning || sh->stopping || sh->plan.limit_ms <= 0)
		return;
	int64_t ran = tk_mono_ms() - sh->started_mono;
	uv_timer_start(&sh->limit_timer, limit_timer_cb, (uint64_t)MAX(0, sh->plan.limit_ms - ran),
		       0);
	if (sh->plan.signal_no && sh->plan.signal_ms > ran)
		uv_timer_start(&sh->signal_timer, signal_timer_cb,
			       (uint64_t)(sh->plan.signal_ms - ran), 0);
}

/* tenk update moved the time limit of running tasks. */
static void set_limit(struct shim *sh, int64_t limit_ms)
{
	if (limit_ms == sh->plan.limit_ms)
		return;
	int64_t before = sh->plan.limit_ms - sh->plan.signal_ms; /* the warning's lead */
	sh->plan.limit_ms = limit_ms;
	if (sh->plan.signal_no)
		sh->plan.signal_ms = MAX(0, limit_ms - before);
	log_info("job %lld.%d: time limit now %lld s", (long long)sh->plan.job, sh->plan.attempt,
		 (long long)(limit_ms / 1000));
	arm_limit(sh);
}

/* --signal: the warning before the time limit, to every task. */
static void signal_timer_cb(uv_timer_t *t)
{
	struct shim *sh = t->data;
	log_info("job %lld.%d: signal %d before the time limit", (long long)sh->plan.job,
		 sh->plan.attempt, sh->plan.signal_no);
	signal_tasks(sh, sh->plan.signal_no);
}

static void maybe_end(struct shim *sh)
{
	if (!sh->released || !all_exited(sh))
		return;
	uv_stop(&sh->loop);
}

/* Task i's podman exited: say what podman said where it failed; a podman
 * killed leaves its container behind, which goes. */
static void container_exited(struct shim *sh, int i, struct shim_task_status *t)
{
	if (!sh->stopping && !t->signal) {
		if (ctr_failure(sh->out_fds[i], t->exit_code, t->detail, sizeof(t->detail)))
			t->cause = EXIT_LAUNCH_FAILED;
	}
	if (t->signal)
		ctr_remove(&sh->plan, t->rank);
	ctr_unstage(sh->dir, t->rank);
	if (sh->out_fds[i] >= 0)
		close(sh->out_fds[i]);
	sh->out_fds[i] = -1;
}

static void check_done(struct shim *sh, int status);

/* Reaps every child that exited: tasks, and orphans reparented to us. */
static void sigchld_cb(uv_signal_t *h, int signum)
{
	struct shim *sh = h->data;
	bool changed = false;
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid <= 0)
			break;
		if (pid == sh->check_pid) {
			check_done(sh, status);
			continue;
		}
		for (int i = 0; i < sh->st.ntasks; i++) {
			struct shim_task_status *t = &sh->st.tasks[i];
			if (t->pid != pid || t->state != SHIM_TASK_RUNNING)
				continue;
			int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
			/* whatever it left in its process group goes with it */
			kill(-pid, SIGKILL);
			t->state = SHIM_TASK_EXITED;
			t->end_ms = tk_wall_ms();
			t->signal = sig;
			t->exit_code = sig ? 128 + sig : WEXITSTATUS(status);
			t->cause = sh->stopping ? sh->stop_cause
				   : sig	? EXIT_SIGNALLED
						: EXIT_EXITED;
			snprintf(t->detail, sizeof(t->detail), "%s",
				 sh->stopping ? sh->stop_detail
					      : ""); /* the kernel killed one of its processes for
						      * its memory: the task itself, or one it
						      * waited for (a shell says 137) */
			if (t->exit_code != 0 && sh->cg.version && cg_oom_killed(&sh->cg)) {
				t->cause = EXIT_OOM;
				snprintf(t->detail, sizeof(t->detail),
					 "out of memory (limit %lld MiB)",
					 (long long)sh->plan.limits.mem_mib);
			} else if (sh->plan.ctr) {
				container_exited(sh, i, t);
			}
			sh->nrunning--;
			changed = true;
			log_debug("job %lld.%d task %d exited %d", (long long)sh->plan.job,
				  sh->plan.attempt, t->rank, t->exit_code);
		}
	}
	if (changed) {
		if (sh->nrunning == 0) {
			uv_timer_stop(&sh->limit_timer);
			uv_timer_stop(&sh->signal_timer);
			uv_timer_stop(&sh->kill_timer);
			lease_arm(sh); /* now for the end of waiting on an agent */
			/* what the tasks left running goes with them */
			if (sh->cg.version)
				cg_kill(&sh->cg);
		}
		publish(sh, true); /* what they used, final once all have exited */
		maybe_end(sh);
	}
}

/* ---- the agent's connection ----------------------------------------------------------- */

static void conn_closed(uv_handle_t *h)
{
	struct conn *c = h->data;
	strbuf_release(&c->in);
	free(c);
}

static void drop_conn(struct conn *c)
{
	if (c->sh->conn == c)
		c->sh->conn = NULL;
	if (!uv_is_closing((uv_handle_t *)&c->pipe))
		uv_close((uv_handle_t *)&c->pipe, conn_closed);
}

static void command(void *arg, const char *line, size_t len)
{
	struct conn *conn = arg;
	struct shim *sh = conn->sh;
	json_error_t jerr;
	json_t *j = json_loadb(line, len, 0, &jerr);
	struct shim_cmd c;
	struct tk_error err;
	if (!j || shim_cmd_unpack(j, &c, &err) < 0) {
		log_warn("job %lld.%d: a malformed command from the agent, ignored: %s",
			 (long long)sh->plan.job, sh->plan.attempt, j ? err.text : jerr.text);
		json_decref(j);
		return;
	}
	json_decref(j);
	if (conn != sh->conn)
		return; /* an agent that another has replaced */
	if (c.type == SHIM_CMD_STOP) {
		stop(sh, c.cause, c.detail, sh->plan.grace_ms);
	} else if (c.type == SHIM_CMD_RENEW) {
		lease_renew(sh, c.until_ms);
		/* what the cgroup uses, for the node's metrics */
		if (sh->nrunning && sh->cg.version)
			send_status(sh, true, false);
	} else if (c.type == SHIM_CMD_RELEASE) {
		sh->released = true;
		maybe_end(sh);
	} else if (c.type == SHIM_CMD_LIMIT) {
		set_limit(sh, c.limit_ms);
	} else if (c.type == SHIM_CMD_SIGNAL && c.signal > 0 && !sh->signalled && !sh->stopping &&
		   sh->nrunning) {
		/* once, whatever agents come and say it again */
		sh->signalled = true;
		log_info("job %lld.%d: signal %d: a task of the gang failed, checkpoint now",
			 (long long)sh->plan.job, sh->plan.attempt, c.signal);
		signal_tasks(sh, c.signal);
	}
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	*buf = uv_buf_init(xmalloc(65536), 65536);
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct conn *c = s->data;
	if (n > 0 && shim_lines(&c->in, buf->base, (size_t)n, command, c) < 0) {
		log_warn("job %lld.%d: the agent sent a line too long; dropping it",
			 (long long)c->sh->plan.job, c->sh->plan.attempt);
		n = UV_EOF;
	}
	free(buf->base);
	if (n < 0)
		drop_conn(c);
}

static void connection_cb(uv_stream_t *server, int status)
{
	struct shim *sh = server->data;
	if (status < 0)
		return;
	struct conn *c = xcalloc(1, sizeof(*c));
	c->sh = sh;
	strbuf_init(&c->in);
	uv_pipe_init(&sh->loop, &c->pipe, 0);
	c->pipe.data = c;
	if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
		uv_close((uv_handle_t *)&c->pipe, conn_closed);
		return;
	}
	/* a new agent: the old connection is stale */
	if (sh->conn)
		drop_conn(sh->conn);
	sh->conn = c;
	uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, read_cb);
	send_status(sh, false, false); /* everything so far (on disk already) */
}

/* ---- start ---------------------------------------------------------------------------- */

/* Every task fails to launch with why. */
/* Every task ends unstarted, with cause and why (the node's fault or not). */
static void end_unstarted(struct shim *sh, int code, enum exit_cause cause, const char *why,
			  bool node_fault)
{
	for (int i = 0; i < sh->plan.ntasks; i++) {
		struct shim_task_status *ts = &sh->st.tasks[i];
		ts->state = SHIM_TASK_EXITED;
		ts->start_ms = ts->end_ms = tk_wall_ms();
		ts->exit_code = code;
		ts->cause = cause;
		ts->node_fault = node_fault;
		snprintf(ts->detail, sizeof(ts->detail), "%s", why);
	}
	publish(sh, false);
}

static void fail_all(struct shim *sh, const char *why)
{
	end_unstarted(sh, 127, EXIT_LAUNCH_FAILED, why, false);
}

/* Starts task i in its container: its environment in DIR/env.RANK, what
 * it names checked as its owner, then podman. */
static int container_fork(struct shim *sh, int i, int *code, char *detail, size_t n)
{
	const struct shim_task *t = &sh->plan.tasks[i];
	_cleanup_free_ char *env_file = xasprintf("%s/env.%d", sh->dir, t->rank);
	int out = -1;
	if (ctr_env_file(env_file, t, detail, n) < 0 ||
	    ctr_prepare(&sh->plan, t, sh->dir, &out, detail, n) < 0) {
		if (out >= 0)
			close(out);
		*code = 127;
		return -1;
	}
	/* where this attempt begins in the file, then its mark there */
	struct stat st;
	sh->st.tasks[i].out_from = fstat(out, &st) == 0 ? (int64_t)st.st_size : 0;
	if (shim_task_marks(&sh->plan, t, false))
		shim_write_mark(out, &sh->plan);
	struct task_exec ex = {
		.argv = ctr_argv(&sh->plan, &sh->cg, t, sh->dir, env_file),
		.env = ctr_env(sh->plan.ctr->conf),
		.out_fd = out,
	};
	int pid = shim_task_fork_exec(&sh->cg, &ex, code, detail, n);
	shim_strv_release(ex.argv);
	shim_strv_release(ex.env);
	if (pid < 0)
		close(out);
	else
		sh->out_fds[i] = out;
	return pid;
}

static void run_tasks(struct shim *sh);

#define CHECK_MAX_MS 120000	     /* a device check that takes longer hangs */
#define CHECK_OUT "device-check.out" /* its output, in the shim's folder */

static void check_timer_cb(uv_timer_t *t)
{
	struct shim *sh = t->data;
	if (sh->check_pid > 0) {
		sh->check_hung = true;
		kill(sh->check_pid, SIGKILL);
	}
}

/* The device check ended: the tasks start, or end unstarted (a stop came
 * meanwhile, or the check failed: the node's fault, its last line why). */
static void check_done(struct shim *sh, int status)
{
	sh->check_pid = 0;
	uv_timer_stop(&sh->check_timer);
	if (sh->stopping) {
		end_unstarted(sh, 0, sh->stop_cause, sh->stop_detail, false);
		return;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		if (tk_mono_ms() >= sh->lease_until_ms) /* the server may have moved on */
			end_unstarted(sh, 0, EXIT_LOST, "its lease ran out during the device check",
				      false);
		else
			run_tasks(sh);
		return;
	}
	char why[MODEL_REASON_MAX];
	_cleanup_free_ char *path = xasprintf("%s/" CHECK_OUT, sh->dir);
	_cleanup_free_ char *text = NULL;
	const char *last = "";
	if (tk_read_file(path, 1 << 20, &text, NULL) == 0) {
		tk_strip(text);
		const char *nl = strrchr(text, '\n');
		last = nl ? nl + 1 : text;
	}
	if (sh->check_hung)
		snprintf(why, sizeof(why), "device check hung (over %d s)", CHECK_MAX_MS / 1000);
	else if (WIFSIGNALED(status))
		snprintf(why, sizeof(why), "device check killed by signal %d", WTERMSIG(status));
	else
		snprintf(why, sizeof(why), "device check failed: %.200s",
			 *last ? last : "no reason given");
	log_err("job %lld.%d: %s", (long long)sh->plan.job, sh->plan.attempt, why);
	end_unstarted(sh, 125, EXIT_LAUNCH_FAILED, why, true);
}

/* The device check, in the attempt's cgroup (so it sees the attempt's
 * devices only), as root, its output in DIR/device-check.out. */
static void start_check(struct shim *sh)
{
	_cleanup_free_ char *path = xasprintf("%s/" CHECK_OUT, sh->dir);
	char why[MODEL_REASON_MAX];
	int out = shim_output_open(path, false, why, sizeof(why));
	if (out < 0) {
		end_unstarted(sh, 125, EXIT_LAUNCH_FAILED, why, true);
		return;
	}
	char detail[MODEL_REASON_MAX];
	int code = 0;
	struct task_exec ex = {
		.argv = sh->plan.check_argv, .env = sh->plan.check_env, .out_fd = out};
	int pid = shim_task_fork_exec(&sh->cg, &ex, &code, detail, sizeof(detail));
	close(out);
	if (pid < 0) {
		snprintf(why, sizeof(why), "device check: %.200s", detail);
		end_unstarted(sh, 125, EXIT_LAUNCH_FAILED, why, true);
		return;
	}
	sh->check_pid = pid;
	uv_timer_start(&sh->check_timer, check_timer_cb, CHECK_MAX_MS, 0);
	log_info("job %lld.%d: device check of its GPUs here before its tasks start",
		 (long long)sh->plan.job, sh->plan.attempt);
}

static void start_tasks(struct shim *sh)
{
	if (sh->plan.cgroup) {
		char name[48];
		snprintf(name, sizeof(name), "%lld.%d", (long long)sh->plan.job, sh->plan.attempt);
		struct tk_error err;
		/* on the host as the launcher read it (NULL: read here) */
		if (cg_create_on(&sh->cg, host, sh->plan.node, name, sh->plan.cg_slot,
				 &sh->plan.limits, &err) < 0) {
			log_err("job %lld.%d: %s", (long long)sh->plan.job, sh->plan.attempt,
				err.text);
			fail_all(sh, err.text);
			return;
		}
	}
	if (sh->plan.check_argc)
		start_check(sh);
	else
		run_tasks(sh);
}

static void run_tasks(struct shim *sh)
{
	bool failed = false;
	char tty[64] = "";
	if (sh->plan.pty && sh->plan.ntasks == 1 && !sh->plan.ctr) {
		char why[MODEL_REASON_MAX];
		sh->pty = shim_pty_open(&sh->loop, sh->dir,
					sh->plan.as_user ? (int)sh->plan.user.uid : -1, tty,
					sizeof(tty), why, sizeof(why));
		if (!sh->pty) {
			log_err("job %lld.%d: %s", (long long)sh->plan.job, sh->plan.attempt, why);
			fail_all(sh, why);
			return;
		}
	}
	sh->out_fds = xcalloc((size_t)sh->plan.ntasks, sizeof(int));
	for (int i = 0; i < sh->plan.ntasks; i++) {
		const struct shim_task *t = &sh->plan.tasks[i];
		struct shim_task_status *ts = &sh->st.tasks[i];
		int code = 127;
		ts->start_ms = tk_wall_ms();
		sh->out_fds[i] = -1;
		int pid = sh->plan.ctr
				  ? container_fork(sh, i, &code, ts->detail, sizeof(ts->detail))
				  : shim_task_fork(&sh->plan, &sh->cg, t, sh->pty ? tty : NULL, ts,
						   &code, ts->detail, sizeof(ts->detail));
		if (pid < 0) {
			ts->state = SHIM_TASK_EXITED;
			ts->end_ms = ts->start_ms;
			ts->exit_code = code;
			ts->cause = EXIT_LAUNCH_FAILED;
			failed = true;
			log_info("job %lld.%d task %d: %s", (long long)sh->plan.job,
				 sh->plan.attempt, t->rank, ts->detail);
			continue;
		}
		ts->pid = pid;
		ts->state = SHIM_TASK_RUNNING;
		sh->nrunning++;
	}
	publish(sh, false); /* started: nothing used yet */
	sh->started_mono = tk_mono_ms();
	arm_limit(sh);
	/* a task that failed to start ends the whole gang */
	if (failed)
		stop(sh, EXIT_CANCELLED, "a task failed to start", sh->plan.grace_ms);
}

static int load_plan(struct shim *sh, struct tk_error *err)
{
	_cleanup_free_ char *path = xasprintf("%s/plan.json", sh->dir);
	char *text;
	int r = tk_read_file(path, 64 * 1024 * 1024, &text, NULL);
	if (r < 0)
		return tk_errorf(err, r, "cannot read %s: %s", path, strerror(-r));
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);
	free(text);
	if (!j)
		return tk_errorf(err, -EBADMSG, "%s: %s", path, jerr.text);
	r = shim_plan_unpack(j, &sh->plan, err);
	json_decref(j);
	if (r < 0)
		mj_prefix(err, "%s", path);
	return r;
}

static void close_walk_cb(uv_handle_t *h, void *arg)
{
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

int shim_run(const struct tk_command *cmd, int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "tenk-shim: started by tenk's agent only (tenk-shim DIR)\n");
		return 2;
	}
	tk_log_set_prefix("shim");
	signal(SIGPIPE, SIG_IGN);
	struct shim *sh = xcalloc(1, sizeof(*sh));
	sh->dir = argv[1];
	sh->status_path = xasprintf("%s/status.json", sh->dir);
	struct tk_error err;
	int rc = 0;
	if (load_plan(sh, &err) < 0) {
		log_err("%s", err.text);
		rc = 1;
		goto out;
	}
	/* orphans of the tasks come to us, not to init: nothing escapes a stop */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	sh->st.job = sh->plan.job;
	sh->st.attempt = sh->plan.attempt;
	sh->st.shim_pid = getpid();
	sh->st.ntasks = sh->plan.ntasks;
	sh->st.tasks = xcalloc((size_t)sh->plan.ntasks, sizeof(*sh->st.tasks));
	for (int i = 0; i < sh->plan.ntasks; i++)
		sh->st.tasks[i].rank = sh->plan.tasks[i].rank;
	uv_loop_init(&sh->loop);
	uv_pipe_init(&sh->loop, &sh->listener, 0);
	sh->listener.data = sh;
	if (uv_pipe_open(&sh->listener, SHIM_LISTEN_FD) < 0 ||
	    uv_listen((uv_stream_t *)&sh->listener, 4, connection_cb) < 0) {
		log_err("job %lld.%d: no socket from the agent", (long long)sh->plan.job,
			sh->plan.attempt);
		rc = 1;
	} else {
		uv_signal_init(&sh->loop, &sh->sigchld);
		sh->sigchld.data = sh;
		uv_signal_start(&sh->sigchld, sigchld_cb, SIGCHLD);
		uv_timer_init(&sh->loop, &sh->limit_timer);
		uv_timer_init(&sh->loop, &sh->kill_timer);
		uv_timer_init(&sh->loop, &sh->lease_timer);
		uv_timer_init(&sh->loop, &sh->signal_timer);
		uv_timer_init(&sh->loop, &sh->check_timer);
		sh->limit_timer.data = sh->kill_timer.data = sh->lease_timer.data = sh;
		sh->signal_timer.data = sh->check_timer.data = sh;
		start_tasks(sh);
		/* the first lease is the plan's */
		sh->lease_until_ms = sh->plan.lease_until_ms;
		lease_arm(sh);
		uv_run(&sh->loop, UV_RUN_DEFAULT);
	}
	if (sh->conn)
		drop_conn(sh->conn);
	shim_pty_close(sh->pty);
	uv_walk(&sh->loop, close_walk_cb, NULL);
	uv_run(&sh->loop, UV_RUN_DEFAULT);
	uv_loop_close(&sh->loop);
	if (sh->cg.version)
		cg_kill(&sh->cg);
	cg_destroy(&sh->cg);
	for (int i = 0; sh->out_fds && i < sh->plan.ntasks; i++)
		if (sh->out_fds[i] >= 0)
			close(sh->out_fds[i]);
	free(sh->out_fds);
	shim_status_release(&sh->st);
out:
	shim_plan_release(&sh->plan);
	free(sh->status_path);
	free(sh);
	return rc;
}
