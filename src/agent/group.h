/*
 * One attempt's part on this node (a group) as a state machine: the code
 * that keeps "never start an attempt twice" and "never forget an exit
 * before the server has it". Private to src/agent.
 *
 *   PREPARING --an image job--> PULLING --the server: every node has it--> RESTORING
 *       |                          |                                      |
 *       |--a restore held---------------------------------------------->|
 *       |                          |                                      |
 *       +--nothing to wait for--> STARTING <--its restore done----------+
 *                                  |   (group_shim_start: its shim spawned, once)
 *                                  v
 *                               RUNNING (every task seen to start)
 *                                  |
 *            group_stop: STARTING, RUNNING --> STOPPING (SIGTERM, grace, SIGKILL)
 *                                  |
 *        every exit known --> UPLOADING (a checkpoint they marked still to upload)
 *                                  |
 *                                  v
 *                               RELEASING --its exits acknowledged, not listed,
 *                                  |          its shim released, its handles closed--> GONE
 *   any but GONE --the agent stops and leaves it to its shim--> DETACHED --> GONE
 *
 * PREPARING, PULLING and RESTORING have no shim: a stop there, a plan that
 * cannot run, an image that cannot be had, or a shim that cannot start ends
 * every task at once (their exits queued for the server) and the group goes
 * to RELEASING. Every change goes through group_set_state(), which checks
 * the table of allowed (from, to) pairs in group.c and the conditions of
 * GONE (every exit known and acknowledged, not listed, nothing open), so
 * no path frees a group the server has not heard out; assert_group_state()
 * checks what each state implies.
 *
 * The machine does no I/O of its own: it asks its parts through struct
 * group_ops (launch.c: the shim; image.c: the image; ckpt.c: checkpoints;
 * agent.c: the events), and they report back through the group_* calls
 * below. A unit test drives it with fake parts (tests/unit/agent/test_group.c).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "model/model.h"
#include "model/wire.h"
#include "shim.h"

struct agent;
struct taskgroup;

enum group_state {
	GROUP_PREPARING, /* made from the server's spec; its plan written */
	GROUP_PULLING,	 /* an image job's: its image looked up, pulled, and agreed by the gang */
	GROUP_RESTORING, /* its checkpoint restored here, and on every node of the gang */
	GROUP_STARTING,	 /* its shim runs its tasks: not every one is seen to start yet */
	GROUP_RUNNING,	 /* every task seen to start (some may have ended) */
	GROUP_STOPPING,	 /* told to stop: SIGTERM, the grace period, SIGKILL */
	GROUP_UPLOADING, /* every exit known; a checkpoint the tasks marked still uploads */
	GROUP_RELEASING, /* every exit known: until acknowledged and no longer listed */
	GROUP_DETACHED,	 /* the agent stops: its shim keeps the tasks for the next agent */
	GROUP_GONE,	 /* forgotten */
	GROUP_STATE_MAX
};

const char *group_state_name(enum group_state s);
/* Whether the table lets a group go from `from` to `to`. */
bool group_transition_allowed(enum group_state from, enum group_state to);

/* What the agent knows of one task of a group. */
struct gtask {
	int rank;
	bool started_sent; /* its start was queued for the server */
	bool exited;	   /* its exit was queued for the server */
	int pid;
};

/* What the machine asks of its parts. Each is called on the loop. */
struct group_ops {
	/* agent.c: queue ev for the server (ev borrowed; exits get the
	 * group's usage added) */
	void (*emit)(struct taskgroup *g, struct task_event *ev);
	/* image.c: look for the image, pulling it when missing; reports back
	 * with group_image_pulling, _ready or _failed */
	void (*image_resolve)(struct taskgroup *g);
	/* launch.c: write the plan and start the shim, connected; < 0 with
	 * why when it cannot */
	int (*shim_start)(struct taskgroup *g, char *why, size_t n);
	/* launch.c: send c to the shim; false when not connected */
	bool (*shim_send)(struct taskgroup *g, const struct shim_cmd *c);
	/* launch.c: close the connection and stop watching the shim, which
	 * keeps its tasks and their statuses */
	void (*shim_let_go)(struct taskgroup *g);
	/* ckpt.c: a checkpoint the ended tasks marked is still to upload
	 * (within the drain time of their end) */
	bool (*ckpt_draining)(struct taskgroup *g);
	/* launch.c: every exit is known: its CPUs go back to the node */
	void (*tasks_ended)(struct taskgroup *g);
	/* launch.c: forget it: its memory, and when over (not only the agent
	 * going) its shim's folder and files */
	void (*forget)(struct taskgroup *g, bool over);
	/* launch.c: its shim found the node at fault before any task ran (the
	 * device check): the node reports it (optional) */
	void (*node_fault)(struct taskgroup *g, const char *why);
};

/* Where an image job's image is (image.c), while the group is PULLING. */
enum img_state {
	IMG_NONE,      /* no image job, or not yet looked for */
	IMG_RESOLVING, /* looking in the node's store */
	IMG_PULLING,
	IMG_READY, /* here, and said so: the server says when every node has it */
};

/* image.c's part of a group. */
struct group_image {
	enum img_state state;
	char ref[MODEL_IMAGE_MAX];
	char digest[MODEL_DIGEST_MAX];
};

/* A process the agent started (spawn.c): a shim. */
struct proc;
typedef void (*proc_exit_cb)(struct proc *p, int64_t exit_status, int term_signal);
struct proc {
	uv_poll_t poll;	  /* on the pidfd */
	uv_timer_t timer; /* or polling waitpid, without pidfds */
	pid_t pid;
	int pidfd;
	bool watching;
	bool foreign; /* another's child (the launcher's): watched, not reaped */
	proc_exit_cb exit_cb;
	void (*close_cb)(struct proc *p);
	void *data; /* the caller's; kept across agent__proc_spawn */
};

/* launch.c's part: the shim, started here or found, and its connection. */
struct group_shim {
	char *dir; /* RUN/shims/JOB.ATTEMPT */
	int dirfd; /* names the socket briefly: /proc/self/fd/N/shim.sock */
	struct proc proc;
	bool running; /* spawned here, watched until it exits or we let it go */
	uv_pipe_t conn;
	bool conn_open; /* conn needs closing */
	struct strbuf in;
	bool released; /* told it may go */
};

/* ckpt.c's part: the checkpoint work of the attempt here. */
struct group_ckpt {
	/* the cluster's store ("": none) and the job's folder here, whose
	 * files a restore gives the job's user; uploads: the newest step
	 * done, markers older than since_ns ignored (an attempt before this
	 * one wrote them) */
	char *store;
	char *dir;
	bool chown;
	uint32_t uid, gid;
	int64_t done_step;
	int64_t since_ns;
	bool hold_restore; /* the tasks start only once every node has restored */
	bool restore_running;
	bool uploading;
	enum ckpt_marker marker;
	int nmarked; /* DCP: tags some node of the gang uploaded (the server says) */
	char marked[MODEL_MAX_CKPT_PENDING][MODEL_CKPT_TAG_MAX];
	int64_t marked_step[MODEL_MAX_CKPT_PENDING];
	/* node rank 0: the committed tags the store keeps; when it last swept */
	int nkeep;
	char keep_tag[MODEL_MAX_CKPTS][MODEL_CKPT_TAG_MAX];
	int keep_attempt[MODEL_MAX_CKPTS];
	int64_t keep_step[MODEL_MAX_CKPTS];
	int64_t swept_ms;
	int64_t drain_until_ms; /* monotonic; 0 while its tasks run */
	/* since when a committed tag of its has waited for the store or been
	 * uploading, without a moment with none (monotonic; 0: none waits) */
	int64_t backlog_since_ms;
	char restore_tag[MODEL_CKPT_TAG_MAX];
	char restored_tag[MODEL_CKPT_TAG_MAX];
	int64_t restore_step;
	int restore_attempt;
	int restore_node; /* whose part it restores: a node rank; -1: its own */
};

/* usage.c's part: what its accelerators used: each one's energy counter at
 * the start (NVML index; -1: none), energy integrated from power where
 * there is no counter, busy time (utilization times wall time). */
struct group_usage {
	int nvml_idx[MODEL_MAX_ACCELS];
	uint64_t energy_base_mj[MODEL_MAX_ACCELS];
	bool energy_counter;
	double energy_power_mj;
	double busy_ms;
	int64_t sampled_ms; /* monotonic: the last sample */
};

/* train.c's part: $TENK_METRICS, the file held open, the line being
 * read, the lines the server has not had. */
struct group_train {
	int fd;
	char line[MODEL_TRAIN_LINE_MAX];
	size_t partial;
	bool skip;
	/* lines not yet taken by the server, oldest first, each with where it
	 * ends in the file (thinned when many); those up to sent_upto went
	 * with the beat in flight */
	struct train_point *pend;
	int64_t *pend_offset;
	int npend;
	int64_t sent_upto;
	int64_t mtime_ms; /* the file's last change at the last read that found lines */
	int64_t made_ms;  /* when this agent made the file; 0: another did */
};

/* nccl.c's part (--nccl-check): the files of NCCL's log its tasks write
 * in RUN/nccl/JOB.ATTEMPT, read as they grow, and what they say so far. */
#define GROUP_NCCL_FILES 64
struct group_nccl {
	bool probed; /* whether the folder is there was looked at */
	bool on;     /* it is: the attempt asked for the check */
	uint32_t uid;
	int nfiles;
	struct {
		char name[64];
		int64_t off;  /* read up to here */
		size_t npart; /* a line's start, not yet ended */
		char part[512];
	} * files;
	struct nccl_log log;
};

/* probe.c's part (a service's replica): its health probe, where the work
 * answer gives one, and what it found so far. */
struct probe_conn;
struct group_probe {
	bool on;
	int port;
	struct job_probe spec;
	int64_t since_ms; /* monotonic: first seen running here (0: not yet) */
	int64_t next_ms;  /* the next probe is due */
	int fails;	  /* in a row */
	bool passed;	  /* one passed since since_ms */
	bool ready, said; /* what the server was told last, and whether it was */
	char last_why[96];
	struct probe_conn *conn; /* in flight (the agent's; NULL: none) */
};

/* One attempt's part on this node, run by its shim. */
struct taskgroup {
	struct agent *a; /* NULL in unit tests */
	const struct group_ops *ops;
	char key[48]; /* "JOB.ATTEMPT" */
	int64_t job;
	int attempt;
	int node_rank;
	int nnodes;
	int tpn;
	int world_size;
	int64_t grace_ms;
	int64_t limit_ms; /* the time limit its shim holds (0: none) */
	int cg_slot;	  /* the slot its cgroup folders are kept in (cg_create_on); -1: none */
	bool signalled;	  /* its shim was told to signal the tasks (--ckpt-signal) */
	/* its tasks could not start for the node's own failure (its shim did
	 * not start): their exits say so (task_event.node_fault) */
	bool node_fault;
	/* ... which the node reports as its fault (its device check failed):
	 * the exits say so too (task_event.fault_reported) */
	bool fault_reported;
	enum group_state state;
	int ntasks;
	struct gtask *tasks;
	int nrunning; /* tasks whose exit is not yet known */
	int unacked;  /* its events the server has not acknowledged */
	bool listed;  /* the last work answer names it */
	bool mark;    /* scratch for agent.c while applying a work answer */
	int open;     /* callbacks still to come (its shim's handles, a podman command) */
	/* the stop asked of it: what its tasks' exits are put down to */
	enum exit_cause stop_cause;
	char stop_detail[64];
	/* what its cgroup used, as its shim last said, and uses now */
	int64_t cpu_ms, mem_peak_mib, mem_mib;
	/* for the node's metrics: whose it is, and the devices it holds here
	 * (inventory indices; "" and none where the agent found it running) */
	char owner[MODEL_NAME_MAX];
	char queue[MODEL_NAME_MAX];
	int ndevs;
	int devs[MODEL_MAX_ACCELS];
	int milli; /* its share of each */
	int ncpus;
	int *cpus; /* the CPUs held for it (its cpuset), from the agent's */
	/* the interface toward its master where this host's name resolves to
	 * loopback ("": none needed), for GLOO_/NCCL_SOCKET_IFNAME */
	char loop_ifname[64];
	struct shim_plan *plan; /* until its shim starts */
	struct group_shim shim;
	struct group_image img;
	struct group_ckpt ckpt;
	struct group_usage usage;
	struct group_train train;
	struct group_nccl nccl;
	struct group_probe probe;
	/* disk.c: what its checkpoint folder held at the last measure; over
	 * its limit (stopped for it, the folder goes with the attempt) */
	int64_t disk_bytes;
	bool disk_over, disk_cut_said;
};

/* ---- the gate ----------------------------------------------------------------------------- */

/* Moves g to `to` when the table allows it (and, for GONE, when every exit
 * is known and acknowledged, g is not listed and nothing of it is open);
 * returns 0, or -EINVAL with g unchanged. */
int group_set_state(struct taskgroup *g, enum group_state to);
/* Checks what g's state implies (debug builds). */
void assert_group_state(const struct taskgroup *g);

/* ---- what starts it, and what its parts report --------------------------------------------- */

/* Fills a new group of tpn tasks of node rank node_rank, PREPARING, every
 * exit unknown. */
void group_init(struct taskgroup *g, const struct group_ops *ops, int64_t job, int attempt,
		int node_rank, int tpn, int64_t grace_ms);
/* Its plan is ready: it waits for its image (img.ref set), for its restore
 * (ckpt.hold_restore), or starts its shim. */
void group_prepared(struct taskgroup *g);
/* Its plan cannot run here: every task fails to launch with code and why. */
void group_unlaunchable(struct taskgroup *g, int code, const char *why);
/* Found under a shim an earlier agent started: st (NULL: none) is what the
 * shim last wrote down. (A shim found gone: group_shim_gone after.) */
void group_adopted(struct taskgroup *g, const struct shim_status *st);

/* image.c: the image is being pulled; is here (img.digest); cannot be had. */
void group_image_pulling(struct taskgroup *g);
void group_image_ready(struct taskgroup *g);
void group_image_failed(struct taskgroup *g, const char *why);
/* The server says every node has the image at digest: the tasks may start. */
void group_image_go(struct taskgroup *g, const char *digest);
/* ckpt.c: every node restored: the tasks may start. */
void group_restore_go(struct taskgroup *g);
/* ckpt.c: an upload ended (a drain may be over). */
void group_ckpt_news(struct taskgroup *g);

/* launch.c: what the shim says; its connection ended (or it was found
 * gone): the exits it did not report are lost, why. */
void group_status(struct taskgroup *g, const struct shim_status *st);
void group_shim_gone(struct taskgroup *g, const char *why);
/* A callback of g's is still to come; it came. */
void group_hold(struct taskgroup *g);
void group_unhold(struct taskgroup *g);

/* agent.c: the server no longer wants it: stopped with cause (and detail,
 * for people); one that has not started ends at once. */
void group_stop(struct taskgroup *g, enum exit_cause cause, const char *detail);
/* Whether the last work answer listed g. */
void group_set_listed(struct taskgroup *g, bool listed);
/* n events of g were acknowledged. */
void group_acked(struct taskgroup *g, int n);
/* The agent stops: a group whose exits are all known and acknowledged
 * releases its shim; any other is left to its shim (DETACHED). */
void group_close(struct taskgroup *g);
/* The agent goes: g is left to its shim if it was not, and forgotten. */
void group_destroy(struct taskgroup *g);
/* Queues ev of g's for the server (an image's digest, a checkpoint). */
void group_emit(struct taskgroup *g, struct task_event *ev);
/* The shim holds the tasks until until_ms (monotonic); the time limit is
 * now limit_s (-1: not said). */
void group_renew(struct taskgroup *g, int64_t until_ms);
void group_set_limit(struct taskgroup *g, int64_t limit_s);
/* A task of its gang failed: its shim signals the tasks with sig, once
 * (0: nothing asked). */
void group_signal_now(struct taskgroup *g, int sig);

/* Whether its shim was started (it is past waiting for its image and its
 * restore, and not left to its shim). */
static inline bool group_started(const struct taskgroup *g)
{
	return g->state >= GROUP_STARTING && g->state <= GROUP_RELEASING;
}

/* Whether some task's exit is not yet known. */
static inline bool group_running(const struct taskgroup *g)
{
	return g->nrunning > 0;
}
