/* Private to src/agent. */
#pragma once

#include <stdbool.h>
#include <uv.h>

#include "agent.h"
#include "hc.h"
#include "model/model.h"
#include "model/wire.h"

#define AGENT_POLL_WAIT_MS 25000   /* how long one long-poll may wait */
#define AGENT_MAX_EVENTS_SENT 1000 /* events in one report */
#define AGENT_EVENT_PIPELINE 4	   /* reports in flight at once */
#define AGENT_BACKOFF_MIN_MS 100
#define AGENT_BACKOFF_MAX_MS 5000
#define AGENT_STOP_REPORT_MS 3000 /* at stop, how long we try to report exits */

/* A process the agent started (spawn.c). */
struct proc;
typedef void (*proc_exit_cb)(struct proc *p, int64_t exit_status, int term_signal);
struct proc {
	uv_poll_t poll;	  /* on the pidfd */
	uv_timer_t timer; /* or polling waitpid, without pidfds */
	pid_t pid;
	int pidfd;
	bool watching;
	proc_exit_cb exit_cb;
	void (*close_cb)(struct proc *p);
	void *data; /* the caller's; kept across proc_spawn */
};

/* Starts argv in a new session with env, in cwd, stdin from /dev/null and
 * stdout and stderr to out_fd; argv[0] is looked up on env's PATH. exit_cb
 * runs once, on the loop, when it exits. Returns 0, or -errno (-ENOENT: no
 * such command; -EACCES: not executable) with nothing to close. */
int proc_spawn(uv_loop_t *loop, struct proc *p, char *const *argv, char *const *env,
	       const char *cwd, int out_fd, proc_exit_cb exit_cb);
/* Releases the watch of an exited process; close_cb runs when it is gone. */
void proc_close(struct proc *p, void (*close_cb)(struct proc *p));
/* Kills every process an earlier agent with this work folder left running
 * (they carry TENK_AGENT_DIR and another TENK_AGENT_ID). Returns how many. */
int agent_kill_leftovers(const char *work_dir, const char *agent_id);

/* One task: one process of a group. */
struct task {
	struct group *g;
	struct proc proc;
	int rank;
	int local_rank;
	bool spawned; /* proc needs closing */
	bool running;
	bool exited;
	pid_t pid;
};

struct group {
	struct agent *a;
	char key[48];
	int64_t job;
	int attempt;
	int node_rank;
	int nnodes;
	int tpn;
	int world_size;
	int64_t grace_ms;
	int64_t limit_ms;
	bool stopping;
	enum exit_cause stop_cause; /* what its tasks' exits are put down to */
	char stop_detail[32];
	int nrunning;
	int open; /* handles not yet closed */
	bool timers_closing;
	uv_timer_t limit_timer;
	uv_timer_t kill_timer;
	int unacked;
	bool listed;
	bool mark; /* scratch for agent.c while applying a work answer */
	int ntasks;
	struct task *tasks;
};

/* One task's start or exit, waiting to be reported. */
struct agent_event {
	struct task_event ev;
	enum { EV_QUEUED, EV_SENT, EV_ACKED } state;
};

/* One report in flight: events[lo, hi) by sequence number. */
struct ev_batch {
	struct agent *a;
	uint64_t lo, hi;
	struct hc_req *req;
};

struct agent {
	uv_loop_t *loop;
	struct agent_config cfg; /* strings owned (copied) */
	struct catalogue cat;
	struct node_inventory inv;
	char agent_id[33];
	struct hc *hc;
	char *url_register, *url_heartbeat, *url_events, *url_work;

	bool registered;
	bool registering;
	char epoch[40];
	uint64_t gen;

	struct tk_map groups; /* "job.attempt" -> struct group */
	int ngroups_open;     /* groups whose handles are not all closed */

	/* events not yet acknowledged, oldest first; events[i] has sequence
	 * number events_base + i */
	struct agent_event *events;
	size_t nevents;
	size_t events_alloc;
	uint64_t events_base;
	struct ev_batch batches[AGENT_EVENT_PIPELINE];
	int nbatches;

	struct hc_req *reg_req, *poll_req, *hb_req;
	uv_timer_t hb_timer, reg_timer, poll_timer, ev_timer, stop_timer;
	int reg_backoff, poll_backoff, ev_backoff;

	bool stopping;
	bool stop_reported;
	void (*stop_cb)(void *arg);
	void *stop_arg;
	int open_handles;
};

/* ---- inventory.c ---- */
int inventory_detect(const struct agent_config *cfg, const struct catalogue *cat,
		     struct node_inventory *ret, struct tk_error *err);

/* ---- launch.c ---- */
/* Starts the tasks of one attempt's part on this node from the server's spec
 * (borrowed: checked by work_spec_unpack, and not kept). Returns the group,
 * registered in a->groups. */
struct group *group_start(struct agent *a, int64_t job, int attempt, const struct work_spec *spec);
/* Stops a running group: SIGTERM now, SIGKILL after its grace period. Its
 * tasks' exits are reported with cause (and detail, for people). */
void group_stop(struct group *g, enum exit_cause cause, const char *detail);
bool group_done(const struct group *g);
/* Marks whether the last work answer listed the group; frees groups that are
 * done, reported, and no longer listed. */
void group_set_listed(struct group *g, bool listed);
void group_maybe_free(struct group *g);
/* Called when events of the group were acknowledged. */
void group_acked(struct group *g, int nevents);
/* ---- agent.c ---- */
/* Queues a task event for the server and sends it when it can. */
void agent_queue_event(struct agent *a, const struct task_event *ev);
/* The number of groups with tasks still running. */
int agent_running_groups(struct agent *a);
int64_t group_grace_ms(const struct group *g);
/* When the newest entry of the group's checkpoint folder was written (ms), or 0. */
int64_t group_newest_checkpoint(const struct group *g);
/* Frees a group whose handles are all closed (at agent_destroy). */
void group_free_now(struct group *g);
