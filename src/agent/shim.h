/*
 * What the shim and the agent share (the shim's library, shim_lib, which
 * the agent links): the plan an agent writes for a shim, the statuses a
 * shim sends back and the commands it takes, both sides' one JSON form
 * (shimwire.c); the attempt's cgroup; how a task is started; containers.
 * The shim itself (shim.c, `tenk-shim DIR`) includes nothing else of the
 * agent's, so that starting one stays cheap.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "agent.h"
#include "model/model.h"
#include "model/wire.h"
#include "util/util.h"

/* ---- the shim and its protocol with the agent (shim.c, shimwire.c) ---------------- */

/*
 * One shim per attempt and node (as slurmstepd, conmon, containerd's shim):
 * a process of its own session, started by the agent, parent and subreaper
 * of the attempt's tasks. It reads what to run from DIR/plan.json, starts
 * each task as the plan's user, enforces the time limit and the grace
 * period of a stop, and writes every change of its tasks to
 * DIR/status.json (atomically) and to the agent connected to its socket
 * DIR/shim.sock, one JSON line a message. It keeps the statuses until the
 * agent releases it.
 */
/* The shim protocol's version (plan.json, statuses, commands): an agent
 * adopts the shims an agent of the version before left, and either side
 * ignores keys it does not know; a shim refuses a plan newer than itself
 * (the agent and tenk-shim come from one installation). 1: before
 * versions were said. */
#define SHIM_PROTOCOL 2
#define SHIM_DIR "shims"	    /* under the agent's run folder */
#define SHIM_MAX_LINE (1024 * 1024) /* one message on the socket */
#define SHIM_MAX_GROUPS 1024	    /* supplementary groups of a task's user */

/* ---- cgroup.c: one cgroup per attempt and node --------------------------------------- */

enum cg_ctrl { CG_MEMORY, CG_CPUSET, CG_PIDS, CG_DEVICES, CG_CPUACCT, CG_CTRL_MAX };
#define CG_MAX_DENY 64	      /* device rules of one attempt */
#define CG_PIDS_PER_TASK 4096 /* processes one task may have */

/* What an attempt may use on this node. */
struct cg_limits {
	int64_t mem_mib;  /* 0: no limit */
	char cpus[256];	  /* "0-3,8": its CPUs; "": the node's */
	int64_t pids_max; /* 0: no limit */
	int ndeny;
	char deny[CG_MAX_DENY][32]; /* v1 devices.deny rules: "c 195:1 rwm" */
	/* one path in every hierarchy (v1), the memory controller's, for a
	 * container runtime to make its cgroups in (--cgroup-parent) */
	bool nest;
};

struct cgroup {
	int version;		/* 1, 2, or 0: none on this host */
	char *rel;		/* its path from each hierarchy's root */
	char *dir[CG_CTRL_MAX]; /* the attempt's folder, per controller */
	int ndirs;
	char *dirs[CG_CTRL_MAX]; /* the distinct ones among dir[] */
	/* bits (1 << enum cg_ctrl) of the limits it cannot hold: a controller
	 * the host has not, or has not delegated to the caller's cgroup (v2);
	 * device rules on v2 where no BPF program could be attached; all where
	 * the host has no cgroups */
	unsigned missing;
	int64_t oom_base; /* the OOM kills its memory controller counted before it was ours */
	int slot;	  /* v1: the slot whose spare it is kept as once empty; -1: none */
};

/* Creates cgroup NAME under the caller's own cgroup, in a level of the
 * node's own (tenk-NODE), with lim; the host is described by mountinfo and
 * proc_cgroup (normally /proc/self/mountinfo and /proc/self/cgroup).
 * Returns the version (1 or 2, 0 where the host has none) or -errno with
 * err saying what failed; cg_destroy it either way. */
int cg_create(struct cgroup *cg, const char *mountinfo, const char *proc_cgroup, const char *node,
	      const char *name, const struct cg_limits *lim, struct tk_error *err);
/* cg_create in two steps: the host read once (cg_host_load: 0 or -errno
 * with err), then any number of cgroups made on it (cg_create_on, which
 * returns as cg_create; h NULL: this process's, read now). The shims'
 * launcher reads it once for all the shims it forks, which are in its
 * cgroups. slot (0 and up; -1: none): on
 * v1, the folders are the slot's spares where it has them, and are kept
 * as its spares by cg_destroy once empty. */
struct cg_host;
int cg_host_load(const char *mountinfo, const char *proc_cgroup, struct cg_host **ret,
		 struct tk_error *err);
void cg_host_free(struct cg_host *h);
int cg_create_on(struct cgroup *cg, const struct cg_host *h, const char *node, const char *name,
		 int slot, const struct cg_limits *lim, struct tk_error *err);
/* What cg_create would hold an attempt of node NODE to on this host: its
 * version (as cg_create's) and *missing (struct cgroup's); makes the node's
 * level and a folder it removes again. */
int cg_probe(const char *mountinfo, const char *proc_cgroup, const char *node, unsigned *missing,
	     struct tk_error *err);
/* cgroup v2's device rules (devbpf.c): attaches to the cgroup folder dir
 * a BPF program that refuses lim's deny[] devices and allows the rest.
 * 0, or -errno with why. */
int cg_v2_deny_devices(const char *dir, const struct cg_limits *lim, char *why, size_t n);
/* Moves process pid into the cgroup (every controller's folder). */
int cg_attach(const struct cgroup *cg, int pid);
/* Sends sig to every process in it and in the cgroups below it; returns
 * how many got it. */
int cg_signal(const struct cgroup *cg, int sig);
/* Kills every process in it and below, over and over until none is left
 * (bounded: about two seconds). Returns how many were still there at the
 * last look (0: it is empty). */
int cg_kill(const struct cgroup *cg);
/* Has the kernel killed a process of it for going over its memory? */
bool cg_oom_killed(const struct cgroup *cg);
/* CPU time used and the most memory held, so far. */
void cg_usage(const struct cgroup *cg, int64_t *cpu_ms, int64_t *mem_peak_mib, int64_t *mem_mib);
/* Removes its folders (once empty) and frees it. */
void cg_destroy(struct cgroup *cg);

/* Who the tasks run as, resolved on this node (getpwnam, getgrouplist). */
struct shim_user {
	char name[MODEL_NAME_MAX];
	uint32_t uid, gid;
	int ngroups;
	uint32_t groups[SHIM_MAX_GROUPS];
};

/* One task, as the agent prepared it: everything is final. */
struct shim_task {
	int rank;
	int argc;
	char **argv;
	int nenv;
	char **env; /* "KEY=VALUE" */
	char *cwd;
	char *output; /* opened by the task as its user, appended to */
	char *error;  /* its stderr, likewise; NULL: into output */
	int ncdi;
	char **cdi; /* in a container: its devices by CDI name ("nvidia.com/gpu=UUID") */
};

/* An image job's container (container.c): every task is a `podman run`. */
struct shim_container {
	char podman[MODEL_MAX_PATH];  /* the program, an absolute path */
	char conf[MODEL_MAX_PATH];    /* CONTAINERS_CONF for it; "": podman's own */
	char root[MODEL_MAX_PATH];    /* its store (DIR/storage, DIR/run); "": podman's own */
	char image[MODEL_DIGEST_MAX]; /* what runs: the image's ID, as every node resolved it */
	char ref[MODEL_IMAGE_MAX];    /* what the job named, for people */
	int nmounts;
	char **mounts; /* "SRC:DST[:ro]", the checkpoint folder among them */
};

struct shim_plan {
	int64_t job;
	int attempt;
	int64_t grace_ms;
	int64_t limit_ms; /* 0: none */
	/* the tasks get signal_no signal_ms after they start (0: none) */
	int signal_no;
	int64_t signal_ms;
	/* the lease (wire.h): the first one's end, on this host's monotonic
	 * clock; how long one lasts; the most grace a fenced task gets */
	int64_t lease_until_ms;
	int64_t lease_ms;
	int64_t fence_grace_ms;
	bool as_user; /* false: the shim's own identity (system work, a non-root agent) */
	struct shim_user user;
	bool allow_root; /* the user may be uid 0 (the cluster allows root jobs) */
	bool cgroup;	 /* the attempt gets a cgroup (the agent is root) */
	int cg_slot;	 /* its slot among the agent's running attempts (cg_create_on); -1 */
	char node[MODEL_NAME_MAX];
	struct cg_limits limits;
	/* the tasks run in containers of ctr; NULL: on the host (a plan without
	 * one is 6.7 KiB, not 19.3: less for each shim to write) */
	struct shim_container *ctr;
	/* the one task's stdin, stdout and stderr are a pseudo-terminal; the
	 * shim serves it on DIR/pty.sock (SHIM_PTY_* frames in, output out) */
	bool pty;
	/* an attempt after the first begins each output file with a line
	 * "--- tenk: attempt N on NODE at TIME ---" (the job did not say
	 * --no-attempt-marks) */
	bool marks;
	/* a command run (as root, in the attempt's cgroup) before the tasks
	 * start: the GPUs' quick check (tenk validate --device-check). One
	 * that fails or hangs fails every task as the node's fault, without
	 * starting any. check_argc 0: none. */
	char **check_argv, **check_env;
	int check_argc, check_nenv;
	int ntasks;
	struct shim_task *tasks;
};

json_t *shim_plan_pack(const struct shim_plan *p);
int shim_plan_unpack(json_t *j, struct shim_plan *ret, struct tk_error *err);
void shim_plan_release(struct shim_plan *p);

enum shim_task_state { SHIM_TASK_WAITING, SHIM_TASK_RUNNING, SHIM_TASK_EXITED };

struct shim_task_status {
	int rank;
	enum shim_task_state state;
	int pid;
	int64_t start_ms, end_ms; /* wall clock */
	int exit_code;		  /* exited: the code, or 128 + signal */
	int signal;
	enum exit_cause cause;
	char detail[MODEL_REASON_MAX];
	/* where this attempt began in its output and error files: their
	 * sizes when it started (earlier attempts' output comes before) */
	int64_t out_from, err_from;
	bool node_fault; /* it never ran for the node's fault (its device check) */
};

/* What the shim tells the agent: every task's state, whole each time. */
struct shim_status {
	int protocol; /* the shim's (1 when it does not say) */
	int64_t job;
	int attempt;
	int shim_pid;
	int64_t cpu_ms; /* what the attempt's cgroup used so far */
	int64_t mem_peak_mib;
	int64_t mem_mib; /* ... and uses now */
	int ntasks;
	struct shim_task_status *tasks;
};

json_t *shim_status_pack(const struct shim_status *s);
int shim_status_unpack(json_t *j, struct shim_status *ret, struct tk_error *err);
void shim_status_release(struct shim_status *s);

/* What the agent tells the shim. */
enum shim_cmd_type {
	SHIM_CMD_STOP,	  /* stop the tasks: SIGTERM, the grace period, SIGKILL */
	SHIM_CMD_RENEW,	  /* the agent is in touch with the server: the lease goes on */
	SHIM_CMD_RELEASE, /* every exit is reported: exit */
	SHIM_CMD_LIMIT,	  /* the time limit is now limit_ms after the tasks started */
	SHIM_CMD_SIGNAL,  /* a task of the gang failed: signal every task, once, to
			   * checkpoint (--ckpt-signal; an older shim ignores it) */
	SHIM_CMD_MAX
};

struct shim_cmd {
	enum shim_cmd_type type;
	enum exit_cause cause; /* STOP: what the tasks' exits are put down to */
	char detail[64];
	int64_t until_ms; /* RENEW: the lease's new end, monotonic */
	int64_t limit_ms; /* LIMIT: 0 for none */
	int signal;	  /* SIGNAL: which */
};

json_t *shim_cmd_pack(const struct shim_cmd *c);
int shim_cmd_unpack(json_t *j, struct shim_cmd *ret, struct tk_error *err);

/* Splits buf's complete lines off and hands each to line_cb; keeps a
 * partial one. Returns -E2BIG when a line passes SHIM_MAX_LINE. */
int shim_lines(struct strbuf *buf, const char *data, size_t n,
	       void (*line_cb)(void *arg, const char *line, size_t len), void *arg);

/* spawn.c: starts task t of plan in a new session, as the plan's user when
 * it says so (groups, gid, uid; root cannot be regained), in its folder, its
 * output opened as that user. Returns the pid, or -1 with *ret_code (126 or
 * 127) and detail saying why the task could not start. Blocks until the
 * task has exec'd: for the shim, whose loop has nothing else to do. The
 * child joins cg (when it has a version) before it gives up root. */
/* tty: the terminal its stdin, stdout and stderr are (NULL: /dev/null and
 * its output files). */
/* ts: where its output and error files stood when it started (out_from,
 * err_from), the child's own look; each gets the attempt's mark after
 * that where shim_task_marks says. */
int shim_task_fork(const struct shim_plan *plan, const struct cgroup *cg, const struct shim_task *t,
		   const char *tty, struct shim_task_status *ts, int *ret_code, char *detail,
		   size_t n);
/* Does task t (one of plan's) begin its output (error: its error) file
 * with the attempt's mark? Only after a first attempt, and only the first
 * of the plan's tasks that writes that file. */
bool shim_task_marks(const struct shim_plan *plan, const struct shim_task *t, bool error);
/* Writes "--- tenk: attempt N on NODE at TIME ---" to fd. */
void shim_write_mark(int fd, const struct shim_plan *plan);
/* Opens a task's output (or error) file at path for appending (and
 * reading, when read_too and it may), created 0600, never through a
 * symbolic link as its last part. Returns the descriptor, or -errno with
 * why saying what is wrong (a link: that it is one, and what to do). */
int shim_output_open(const char *path, bool read_too, char *why, size_t n);
/* What a container task execs instead (container.c prepared it): argv and
 * env, and out_fd, its output, as root keeps the identity it needs. */
struct task_exec {
	char **argv;
	char **env;
	int out_fd;
};
int shim_task_fork_exec(const struct cgroup *cg, const struct task_exec *ex, int *ret_code,
			char *detail, size_t n);

/* ---- shimlauncher.c: the agent's resident starter of shims ---- */

/* The launcher's answer to a request (the shim's folder, its listening
 * socket attached): the shim's pid, or -1 and err (an errno); a pidfd of
 * the shim is attached where the kernel has them. */
struct launcher_reply {
	int32_t pid;
	int32_t err;
};
/* How much room the launcher's argument area leaves a shim's command line
 * (LAUNCHER_PAD characters as its last argument). */
#define LAUNCHER_PAD (MODEL_MAX_PATH + 64)
/* `tenk-shim --launcher PAD`: serves the agent on descriptor 3 until its
 * end closes; the children are shims (shim_run). */
int shim_launcher_run(int argc, char **argv);
/* The host's cgroups as the launcher read them, for the shims it forks. */
void shim_set_host(const struct cg_host *h);

/* ---- shimpty.c (in the shim): an interactive task's terminal ---- */

struct shim_pty;
/* A pseudo-terminal, its slave's name in tty (given to uid, -1: kept),
 * served on DIR/pty.sock; NULL with why. */
struct shim_pty *shim_pty_open(uv_loop_t *loop, const char *dir, int uid, char *tty, size_t n,
			       char *why, size_t wn);
void shim_pty_close(struct shim_pty *p);

/* ---- container.c (in the shim) ---- */
/* Checks, as the task's owner, every folder to mount and the task's own,
 * and opens its output (*ret_out) as the owner. A job run as its owner has
 * each folder to mount opened as the owner, and that very folder (not its
 * path, which the owner could change) bound on DIR/mnt.RANK.I for podman.
 * Returns 0, or < 0 with why. */
int ctr_prepare(const struct shim_plan *p, const struct shim_task *t, const char *dir, int *ret_out,
		char *why, size_t n);
/* Undoes ctr_prepare's mounts under DIR: task rank's, or every task's
 * (rank < 0). Never removes anything but the empty places of mounts. */
void ctr_unstage(const char *dir, int rank);
/* Writes the task's environment for podman's --env-file (0600). */
int ctr_env_file(const char *path, const struct shim_task *t, char *why, size_t n);
/* The `podman run` of task t, NULL-terminated; ctr_env, podman's
 * environment (with conf as its CONTAINERS_CONF). */
char **ctr_argv(const struct shim_plan *p, const struct cgroup *cg, const struct shim_task *t,
		const char *dir, const char *env_file);
char **ctr_env(const char *conf);
/* Podman's first arguments: the program, and its store when root is set. */
void ctr_podman_head(const char *podman, const char *root, char ***argv, int *n, size_t *alloc);
/* What podman (or the init before a container's command) said: the last
 * line of out, its "Error: " off; none when it said nothing. */
void ctr_podman_said(const char *out, char *buf, size_t n, const char *none);
/* A task's podman exited with code: where podman itself failed (125) or
 * the command could not run (126, 127, or its init could not exec it),
 * detail gets the last line it wrote to the output (out_fd). True when
 * the task never ran. */
bool ctr_failure(int out_fd, int code, char *detail, size_t n);
/* Removes task rank's container, in the background (a killed podman
 * leaves it). */
void ctr_remove(const struct shim_plan *p, int rank);
/* Appends s (may be NULL, to end the array) to a growing array of strings. */
void shim_strv_push(char ***v, int *n, size_t *alloc, char *s);
void shim_strv_release(char **v);
