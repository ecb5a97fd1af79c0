/* Private to src/agent. */
#pragma once

#include <stdbool.h>
#include <uv.h>

#include "agent.h"
#include "hc.h"
#include "shim.h"
#include "model/model.h"
#include "model/wire.h"

#define AGENT_POLL_WAIT_MS 25000   /* how long one long-poll may wait */
#define AGENT_MAX_EVENTS_SENT 1000 /* events in one report */
#define AGENT_EVENT_PIPELINE 4	   /* reports in flight at once */
#define AGENT_BACKOFF_MIN_MS 100
#define AGENT_BACKOFF_MAX_MS 5000
#define AGENT_STOP_REPORT_MS 3000 /* at stop, how long we try to report exits */
#define AGENT_HB_SAMPLES 65536	  /* heartbeat round trips kept for the stop's summary */

/* A process the agent started (spawn.c): a shim. */
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

/* Starts path with argv and env in a new session, stdin from /dev/null,
 * stdout and stderr the agent's, pass_fd as its descriptor 3 and nothing
 * else open. exit_cb runs once, on the loop, when it exits. Returns 0, or
 * -errno with nothing to close. */
int proc_spawn(uv_loop_t *loop, struct proc *p, const char *path, char *const *argv,
	       char *const *env, int pass_fd, proc_exit_cb exit_cb);
/* Releases the watch of an exited process; close_cb runs when it is gone. */
void proc_close(struct proc *p, void (*close_cb)(struct proc *p));

/* What the agent knows of one task of a group. */
struct gtask {
	int rank;
	bool started_sent; /* its start was queued for the server */
	bool exited;	   /* its exit was queued for the server */
	int pid;
};

/* ---- logs.c: task output the server asks for ------------------------------------------ */

/* Reads what the fetches name and sends it to the server. */
void agent_serve_logs(struct agent *a, const struct wire_log_fetch *f, int n);
/* pty.c: joins each terminal session the server asks for to its shim. */
void agent_serve_ptys(struct agent *a, const struct wire_pty *p, int n);

/* ---- cmd.c: programs the agent runs for itself, their output captured ------------------ */

struct cmd;
typedef void (*cmd_cb)(struct cmd *c, int64_t status, const char *out, const char *err);
struct cmd {
	struct agent *a;
	struct cmd *next, *prev; /* the agent's running ones */
	uv_process_t proc;
	uv_pipe_t pipe, epipe; /* its stdout, its stderr */
	uv_timer_t timer;      /* its deadline */
	struct strbuf out, err;
	int open;
	int64_t status;
	bool timed_out; /* killed at its deadline */
	cmd_cb done;
	void *data;
};

/* Runs argv (argv[0] a path, or a name looked up on PATH) with env, stdin
 * from /dev/null; after timeout_ms (0: none) it is killed. done gets the
 * exit status (128 + signal) and what it printed, once. */
int cmd_run(struct agent *a, char *const *argv, char *const *env, int64_t timeout_ms, cmd_cb done,
	    void *data);
/* The agent stops: its commands are told to end (SIGTERM). */
void cmds_stop(struct agent *a);

/* ---- image.c: podman commands of the agent, an image job's image ---------------------- */

/* Runs the node's podman with args (NULL-terminated), on its store. */
int podcmd_start(struct agent *a, char **args, cmd_cb done, void *data);

/* The node's store as `tenk images` shows it (image.c): listed again after
 * every pull; the pulls the server asks for (a work answer's "pulls") are
 * started once each; what changed goes with the next heartbeat. */
void images_refresh(struct agent *a);
void images_apply_pulls(struct agent *a, const struct wire_work *w);
/* Fills the heartbeat's images and pulls when they changed since the last
 * one the server took (borrowed from a); *gen is what it carries. */
void images_for_heartbeat(struct agent *a, struct wire_heartbeat *m, uint64_t *gen);
void images_release(struct agent *a);

/* Where a group of an image job is, before its shim. */
enum img_state {
	IMG_NONE,      /* no image, or its shim started */
	IMG_RESOLVING, /* looking in the node's store */
	IMG_PULLING,
	IMG_WAITING, /* it has it and said so: the server says when every node has */
};

/* One attempt's part on this node, run by its shim. */
struct taskgroup {
	struct agent *a;
	char key[48];
	int64_t job;
	int attempt;
	int node_rank;
	int nnodes;
	int tpn;
	int world_size;
	int64_t grace_ms;
	int64_t limit_ms; /* the time limit its shim holds (0: none) */
	char *dir;	  /* WORK/shims/JOB.ATTEMPT */
	int dirfd;	  /* names the socket briefly: /proc/self/fd/N/shim.sock */
	/* the shim: its process (started here) and the connection to it */
	struct proc shim;
	bool shim_running; /* spawned here, watched until it exits or we let it go */
	uv_pipe_t conn;
	bool conn_open; /* conn needs closing */
	struct strbuf in;
	bool stop_wanted; /* a stop to send (once connected) */
	bool stop_sent;
	enum exit_cause stop_cause;
	char stop_detail[64];
	bool released;
	int ntasks;
	struct gtask *tasks;
	int nrunning;		      /* tasks whose exit is not yet known */
	int64_t cpu_ms, mem_peak_mib; /* what its cgroup used, as last reported */
	int64_t mem_mib;	      /* ... and uses now */
	/* for the node's metrics: whose it is, and the devices it holds here
	 * (inventory indices; "" and none where the agent found it running) */
	char owner[MODEL_NAME_MAX];
	char queue[MODEL_NAME_MAX];
	int ndevs;
	int devs[MODEL_MAX_ACCELS];
	int milli; /* its share of each */
	/* the interface toward its master where this host's name resolves to
	 * loopback ("": none needed), for GLOO_/NCCL_SOCKET_IFNAME */
	char loop_ifname[64];
	/* what its accelerators used (usage.c): each one's energy counter at
	 * the start (NVML index; -1: none), energy integrated from power where
	 * there is no counter, busy time (utilization times wall time) */
	int nvml_idx[MODEL_MAX_ACCELS];
	uint64_t energy_base_mj[MODEL_MAX_ACCELS];
	bool energy_counter;
	double energy_power_mj;
	double busy_ms;
	int64_t usage_ms; /* monotonic: the last sample */
	/* $TENK_METRICS (train.c): the file held open, the line being read,
	 * the lines the server has not had */
	int train_fd;
	char train_line[MODEL_TRAIN_LINE_MAX];
	size_t train_partial;
	bool train_skip;
	struct train_point *train_pend; /* lines since the last beat (thinned when many) */
	int ntrain_pend;
	int ncpus;
	int *cpus; /* the CPUs held for it (its cpuset), from the agent's */
	int open;  /* handles not yet closed */
	int unacked;
	bool listed;
	bool mark; /* scratch for agent.c while applying a work answer */
	/* an image job's: its image, and the plan that waits on it */
	enum img_state img_state;
	char img_ref[MODEL_IMAGE_MAX];
	char digest[MODEL_DIGEST_MAX];
	struct shim_plan *plan;
	/* checkpoints (ckpt.c): the cluster's store ("" : none) and the job's
	 * folder here, whose files a restore gives the job's user; uploads:
	 * the newest step done, markers older than ckpt_since_ns ignored (an
	 * attempt before this one wrote them); a restore the start waits on */
	char *ckpt_store;
	char *ckpt_dir;
	bool ckpt_chown;
	uint32_t ckpt_uid, ckpt_gid;
	int64_t ckpt_done_step;
	int64_t ckpt_since_ns;
	bool hold_restore;
	bool restore_running;
	bool ckpt_uploading;
	enum ckpt_marker ckpt_marker;
	int nmarked; /* DCP: tags some node of the gang uploaded (the server says) */
	char marked[MODEL_MAX_CKPT_PENDING][MODEL_CKPT_TAG_MAX];
	int64_t marked_step[MODEL_MAX_CKPT_PENDING];
	/* node rank 0: the committed tags the store keeps; when it last swept */
	int nkeep;
	char keep_tag[MODEL_MAX_CKPTS][MODEL_CKPT_TAG_MAX];
	int keep_attempt[MODEL_MAX_CKPTS];
	int64_t keep_step[MODEL_MAX_CKPTS];
	int64_t swept_ms;
	int64_t ckpt_drain_until_ms; /* monotonic; 0 while its tasks run */
	char restore_tag[MODEL_CKPT_TAG_MAX];
	char restored_tag[MODEL_CKPT_TAG_MAX];
	int64_t restore_step;
	int restore_attempt;
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
	int64_t sent_ms; /* monotonic */
};

#define AGENT_MAX_CPUS 4096

struct agent {
	uv_loop_t *loop;
	/* the CPUs this agent may hand out, and which group holds each */
	int ncpus;
	int cpu_id[AGENT_MAX_CPUS];
	struct taskgroup *cpu_holder[AGENT_MAX_CPUS];
	struct agent_config cfg;	/* strings owned (copied) */
	char podman[MODEL_MAX_PATH];	/* cfg.podman found on PATH */
	char cred[WIRE_CREDENTIAL_MAX]; /* the node's own credential; "" until it joined */
	struct cmd *cmds;		/* running (cmd.c) */
	/* the node's images and the pulls asked of it (image.c); images_gen
	 * counts changes, images_sent_gen the last the server took */
	int nimages;
	struct wire_image *images;
	int npulls;
	struct wire_pull *pulls;
	uint64_t images_gen, images_sent_gen, hb_images_gen;
	bool listing, list_again;
	struct catalogue cat;
	struct node_inventory inv;
	char agent_id[33];
	struct hc *hc;
	char *url_register, *url_heartbeat, *url_events, *url_work, *url_logs;

	bool registered;
	bool registering;
	char epoch[40];
	uint64_t gen;

	/* the lease of the shims (wire.h): its figures, from the server's node
	 * timeout; when the last request the server answered was sent; when
	 * the shims were last renewed (all monotonic) */
	struct wire_lease lease;
	int64_t touch_ms;
	int64_t renewed_ms;
	int64_t reg_sent_ms, poll_sent_ms, hb_sent_ms;
	/* heartbeats' round trips (ms), the newest AGENT_HB_SAMPLES: logged at stop */
	float *hb_rtt;
	size_t hb_n;
	int lock_fd; /* holds WORK/agent.lock: one agent per work folder */

	struct tk_map groups; /* "job.attempt" -> struct taskgroup */

	/* events not yet acknowledged, oldest first; events[i] has sequence
	 * number events_base + i */
	struct agent_event *events;
	size_t nevents;
	size_t events_alloc;
	uint64_t events_base;
	struct ev_batch batches[AGENT_EVENT_PIPELINE];
	int nbatches;

	struct hc_req *reg_req, *poll_req, *hb_req;
	bool hb_again; /* another beat is wanted once hb_req is answered */
	uv_timer_t hb_timer, reg_timer, poll_timer, ev_timer, stop_timer, ckpt_timer;
	bool ckpt_busy;			 /* a checkpoint upload or restore runs (ckpt.c) */
	struct health *health;		 /* health.c */
	struct nvml *nvml;		 /* NULL: none (nvml.c) */
	struct metrics *metrics;	 /* GET /metrics; NULL: none (metrics.c) */
	char fault_last[WIRE_FAULT_MAX]; /* the last fault logged */
	bool fault_said;
	int reg_backoff, poll_backoff, ev_backoff;

	bool stopping;
	bool stop_reported;
	void (*stop_cb)(void *arg);
	void *stop_arg;
	int open_handles;
};

/* An image job's group: finds its image in the node's store, or pulls it,
 * then tells the server its digest (image.c). */
void group_image_resolve(struct taskgroup *g);
/* launch.c: what image.c found. */
void group_image_pulling(struct taskgroup *g);
void group_image_ready(struct taskgroup *g);
void group_image_failed(struct taskgroup *g, const char *why);
/* The server says every node has the image at digest: the tasks start. */
void group_image_go(struct taskgroup *g, const char *digest);

/* ---- inventory.c ---- */
int inventory_detect(const struct agent_config *cfg, const struct catalogue *cat,
		     struct node_inventory *ret, struct tk_error *err);

/* ---- launch.c ---- */
/* Starts the tasks of one attempt's part on this node from the server's spec
 * (borrowed: checked by work_spec_unpack, and not kept). Returns the group,
 * registered in a->groups. */
struct taskgroup *group_start(struct agent *a, const struct work_item *it,
			      const struct work_spec *spec);
/* Starts the group's shim from its plan unless it still waits for its
 * image or its restore. */
void group_try_start(struct taskgroup *g);

/* ---- nvml.c: NVML, where the node has it ---- */

struct nvml;
/* What one accelerator reads now; `have` says which fields NVML gave. */
enum {
	GPU_UTIL = 1,
	GPU_MEM = 2,
	GPU_POWER = 4,
	GPU_ENERGY = 8,
	GPU_TEMP = 16,
	GPU_CLOCK = 32,
	GPU_ECC = 64
};
struct gpu_sample {
	unsigned have;
	unsigned util_pct;
	uint64_t mem_used, mem_total; /* bytes */
	unsigned power_mw;
	uint64_t energy_mj; /* since the driver loaded */
	unsigned temp_c;
	unsigned sm_mhz;
	uint64_t ecc_uncorrected;
};
/* NULL where the node has no NVML (or fake devices). */
struct nvml *nvml_open(const struct agent_config *cfg, const struct node_inventory *inv);
void nvml_close(struct nvml *n);
/* The accelerators NVML opened: the inventory's first ones, in its order. */
int nvml_count(const struct nvml *n);
void nvml_read(const struct nvml *n, int i, struct gpu_sample *s);
bool nvml_ecc(const struct nvml *n, int i, uint64_t *count);
/* The next Xid event waiting, without waiting for one: its accelerator
 * (inventory order) and number. */
bool nvml_xid(const struct nvml *n, int *dev, unsigned *xid);

/* ---- health.c ---- */
struct health;
/* Opens NVML (where the node has real accelerators), notes each one's
 * uncorrected ECC count and listens for Xid events. */
void health_init(struct agent *a);
/* Looks at the node every second from now, and runs the operator's health
 * check at its interval; a new fault sends a heartbeat at once. */
void health_start(struct agent *a);
/* The agent stops: its timer goes (the check, a cmd, is stopped with the
 * rest). */
void health_stop(struct agent *a);
void health_release(struct agent *a);
/* The node's faults now, at most max of them, as text, for the heartbeat
 * about to go; health_told when the server has answered it. */
int health_faults(struct agent *a, char (*out)[WIRE_FAULT_MAX], int max);
void health_told(struct agent *a);
/* Xids of NVML's accelerator i since the agent started, and the last. */
uint64_t health_xids(struct agent *a, int i, unsigned *last);

/* ---- metrics.c: GET /metrics ---- */
struct metrics;
/* Listens on --metrics-listen (or the default, where it is free). */
int metrics_start(struct agent *a, struct tk_error *err);
/* Serves it from the agent's loop, from now on. */
void metrics_watch(struct agent *a);
void metrics_stop(struct agent *a);
/* The text of GET /metrics (the caller frees it). */
char *metrics_render(struct agent *a);

/* ---- usage.c: what an attempt's accelerators used ---- */
/* Notes the energy counters of g's accelerators as it starts. */
void usage_start(struct taskgroup *g);
/* Samples utilization and power of every running attempt's accelerators
 * (each second). */
void usage_tick(struct agent *a);
/* Energy (mJ; -1 where NVML tells neither counter nor power) and busy time
 * (ms) of g's accelerators so far, its share of them. */
void usage_of(const struct taskgroup *g, int64_t *energy_mj, int64_t *busy_ms);

/* ---- train.c: training metrics from $TENK_METRICS ---- */
/* Makes the attempt's metrics file (its user's when as_user); returns its
 * path, for TENK_METRICS. */
char *train_setup(struct taskgroup *g, bool as_user, uint32_t uid, uint32_t gid);
/* Reads what each running attempt wrote since the last call. */
void train_poll(struct agent *a);
/* The lines the server has not had, each attempt's since the last beat
 * (at most TRAIN_PER_BEAT of them, thinned evenly), for a heartbeat (the
 * caller frees *ret). */
int train_for_heartbeat(struct agent *a, struct wire_train **ret);
/* The group goes: its file is closed, and removed when it is done. */
void train_release(struct taskgroup *g, bool remove);

/* ---- ckpt.c ---- */
/* Scans the running groups' checkpoint folders every second from now. */
void ckpt_start(struct agent *a);
/* What a work answer says of the group's checkpoints: the store, the tag
 * to restore, and whether every node has (its tasks start then). */
void group_ckpt_item(struct taskgroup *g, const struct work_item *it);
void group_ckpt_release(struct taskgroup *g);
/* Its tasks have ended, and a checkpoint they marked is not yet uploaded
 * (within the drain time of their end): the group stays until it is. */
bool group_ckpt_draining(struct taskgroup *g);
/* Stops a running group: its shim sends SIGTERM now, SIGKILL after the
 * grace period. Its tasks' exits are reported with cause (and detail, for
 * people). */
void group_stop(struct taskgroup *g, enum exit_cause cause, const char *detail);
/* The grace period is over and the shim did not kill them: the agent does. */
void group_kill(struct taskgroup *g);
bool group_done(const struct taskgroup *g);
/* Marks whether the last work answer listed the group; frees groups that are
 * done, reported, and no longer listed. */
void group_set_listed(struct taskgroup *g, bool listed);
void group_maybe_free(struct taskgroup *g);
/* Called when events of the group were acknowledged. */
void group_acked(struct taskgroup *g, int nevents);
/* ---- agent.c ---- */
/* A handle of the agent's own (a podman command's) closed: a stop may be done. */
void agent_handle_gone(struct agent *a);
/* Something a stop may wait for ended (a checkpoint upload): stop if all did. */
void agent_stop_check(struct agent *a);
/* Sends a heartbeat now (or as soon as the one in flight is answered). */
void agent_beat_now(struct agent *a);
/* Queues a task event for the server and sends it when it can. */
void agent_queue_event(struct agent *a, const struct task_event *ev);
/* The number of groups with tasks still running. */
int agent_running_groups(struct agent *a);
int64_t group_grace_ms(const struct taskgroup *g);
/* When the newest entry of the group's checkpoint folder was written (ms), or 0. */
int64_t group_newest_checkpoint(const struct taskgroup *g);
/* The agent stops: a group whose tasks are all done and reported releases
 * its shim; any other lets go of it, which keeps its tasks and statuses
 * for the next agent. */
void group_close(struct taskgroup *g);
/* Frees a group whose handles are all closed (at agent_destroy). */
void group_free_now(struct taskgroup *g);
/* Makes again the group of every shim an earlier agent left in the work
 * folder and connects to it. Returns how many. */
int shims_adopt(struct agent *a);
/* The server answered: the group's shim holds its tasks until until_ms
 * (monotonic). */
/* The attempt's time limit is now limit_s (tenk update): its shim is told.
 * -1: not said. */
void group_set_limit(struct taskgroup *g, int64_t limit_s);
void group_renew(struct taskgroup *g, int64_t until_ms);
