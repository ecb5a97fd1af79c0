/* Private to src/agent. */
#pragma once

#include <stdbool.h>
#include <uv.h>

#include "agent.h"
#include "group.h"
#include "hc.h"
#include "shim.h"
#include "model/model.h"
#include "model/wire.h"

#define AGENT_POLL_WAIT_MS 25000   /* how long one long-poll may wait */
#define AGENT_MAX_EVENTS_SENT 1000 /* events in one report */
#define AGENT_EVENT_PIPELINE 4	   /* reports in flight at once */
#define AGENT_BACKOFF_MIN_MS 100
#define AGENT_BACKOFF_MAX_MS 5000
#define AGENT_REFUSED_RETRY_MS 10000 /* after a 403 to its registration */
/* with standby servers: asked again this long after a standby's answer
 * (and up to as long again, spread), not after the doubling backoff */
#define AGENT_STANDBY_RETRY_MS 250
/* with standby servers: a connection's time to open, at most (a server
 * whose host is gone answers nothing) */
#define AGENT_FAILOVER_CONNECT_MS 2000
#define AGENT_STOP_REPORT_MS 3000 /* at stop, how long we try to report exits */
#define AGENT_HB_SAMPLES 65536	  /* heartbeat round trips kept for the stop's summary */

/* Starts path with argv and env in a new session, stdin from /dev/null,
 * stdout and stderr the agent's, pass_fd as its descriptor 3 and nothing
 * else open. exit_cb runs once, on the loop, when it exits. Returns 0, or
 * -errno with nothing to close. */
int agent__proc_spawn(uv_loop_t *loop, struct proc *p, const char *path, char *const *argv,
		      char *const *env, int pass_fd, proc_exit_cb exit_cb);
/* Releases the watch of an exited process; close_cb runs when it is gone. */
void agent__proc_close(struct proc *p, void (*close_cb)(struct proc *p));
/* Starts the shim of folder dir, listen_fd its descriptor 3, through the
 * agent's launcher (started on first use, again if it died): as
 * agent__proc_spawn would, but forked from a process already loaded. The
 * exit reaches exit_cb with status 0 (the launcher, its parent, logs a bad
 * one). -errno where the launcher cannot serve: the caller spawns. */
int agent__launcher_spawn(struct agent *a, struct proc *p, const char *shim_path, const char *dir,
			  int listen_fd, proc_exit_cb exit_cb);
/* Lets the launcher go (it ends when its socket closes); at the stop. */
void agent__launcher_stop(struct agent *a);

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
int agent__cmd_run(struct agent *a, char *const *argv, char *const *env, int64_t timeout_ms,
		   cmd_cb done, void *data);
/* The agent stops: its commands are told to end (SIGTERM). */
void agent__cmds_stop(struct agent *a);

/* ---- image.c: podman commands of the agent, an image job's image ---------------------- */

/* Runs the node's podman with args (NULL-terminated), on its store. */
int agent__podcmd_start(struct agent *a, char **args, cmd_cb done, void *data);

/* The node's store as `tenk images` shows it (image.c): listed again after
 * every pull; the pulls the server asks for (a work answer's "pulls") are
 * started once each; what changed goes with the next heartbeat. */
void agent__images_refresh(struct agent *a);
void agent__images_apply_pulls(struct agent *a, const struct wire_work *w);
/* Fills the heartbeat's images and pulls when they changed since the last
 * one the server took (borrowed from a); *gen is what it carries. */
void agent__images_for_heartbeat(struct agent *a, struct wire_heartbeat *m, uint64_t *gen);
void agent__images_release(struct agent *a);

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
	int cpu_numa[AGENT_MAX_CPUS]; /* each one's NUMA node (sysfs); -1: not known */
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
	/* the node's software stack (stack.c, in inv.stack): stack_gen counts
	 * its changes, stack_sent_gen the last the server took (by a beat, or
	 * a registration: reg_stack_gen); the GPU libraries' part is read
	 * again at stack_gpu_next_ms */
	uint64_t stack_gen, stack_sent_gen, hb_stack_gen, reg_stack_gen;
	int64_t stack_gpu_next_ms;
	struct node_stack stack_gpu;
	struct node_stack stack_fake; /* --fake-stack's last good fields */
	bool stack_fake_bad;	      /* ... and its file is wrong now (said) */
	bool listing, list_again;
	struct catalogue cat;
	struct node_inventory inv;
	char agent_id[33];
	struct hc *hc;
	char *url_register, *url_heartbeat, *url_events, *url_work, *url_logs;
	/* the servers it was given (--server A,B: standbys), and the one it
	 * talks to (agent.c: the next when it cannot, the active when a
	 * standby names it) */
	char **servers;
	int nservers, server;

	bool registered;
	bool registering;
	/* the server refused this agent's protocol key (a 0.1.0 server, which
	 * refuses keys it does not know): the next registration says none */
	bool speak_v1;
	int server_protocol; /* the registered server's (wire.h) */
	/* the server refused this node (403: a name known under another
	 * credential, a revoked one): said once; it asks again, slowly, for an
	 * admin's admit */
	bool refused;
	char epoch[40];
	uint64_t gen;

	/* the lease of the shims (wire.h): its figures, from the server's node
	 * timeout; when the last request the server answered was sent; when
	 * the shims were last renewed (all monotonic) */
	struct wire_lease lease;
	int64_t touch_ms;
	int64_t renewed_ms;
	int64_t reg_sent_ms, poll_sent_ms, hb_sent_ms;
	/* the newest heartbeat answer received: its server's epoch and time,
	 * which the next beat acknowledges (fence.h) */
	char acked_epoch[WIRE_EPOCH_MAX];
	int64_t acked_at_ms;
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
	/* beats that failed since the last answer, and when that was last said */
	uint64_t hb_failing;
	int64_t hb_fail_said_ms;
	uv_timer_t hb_timer, reg_timer, poll_timer, ev_timer, stop_timer, ckpt_timer;
	bool ckpt_busy;			 /* a checkpoint upload or restore runs (ckpt.c) */
	struct health *health;		 /* health.c */
	int64_t disk_next_ms;		 /* disk.c: when the jobs' folders are measured next */
	int64_t disk_jobs_bytes;	 /* what they held at the last measure */
	struct nvml *nvml;		 /* NULL: none (nvml.c) */
	struct metrics *metrics;	 /* GET /metrics; NULL: none (metrics.c) */
	struct witness *witness;	 /* witness.c */
	char fault_last[WIRE_FAULT_MAX]; /* the last fault logged */
	bool fault_said;
	int reg_backoff, poll_backoff, ev_backoff;

	/* idlepower.c: the cluster's idle_power_after (ms; 0: never), and per
	 * device (NVML's order): since when no group holds it (monotonic;
	 * 0: one does), whether it was lowered, the limit it had, the draw
	 * before, the energy saved since (mJ) */
	int64_t idle_power_after_ms;
	struct {
		int64_t since_ms, sampled_ms;
		bool lowered;
		unsigned saved_mw, min_mw, before_mw;
		double saved_mj;
	} idle[MODEL_MAX_ACCELS];
	uint64_t idle_lowerings;
	/* forward.c: the services this node is an address of */
	struct fwd_service *fwd;
	uv_timer_t fwd_timer;
	bool fwd_timer_on;
	/* probe.c: the health probes in flight, and their timer */
	struct probe_conn *probes;
	uv_timer_t probe_timer;
	bool probe_timer_on;

	bool stopping;
	bool run_dir_own; /* cfg.run_dir: default_run_dir's, in memory */
	/* the launcher of shims (spawn.c): its socket (-1: none yet) */
	int launcher_fd;
	struct proc launcher;
	bool launcher_running; /* launcher is watched */
	int launcher_failures; /* deaths and bad answers; at 3, shims are spawned */
	bool stop_reported;
	void (*stop_cb)(void *arg);
	void *stop_arg;
	int open_handles;
};

/* ---- witness.c: the witness group (fence.h) -------------------------------------------- */

/* Opens the witness endpoint (UDP) and takes what an agent before this one
 * kept of the group (after the shims are adopted). */
int agent__witness_open(struct agent *a, struct tk_error *err);
/* The server's node timeout, from registration. */
void agent__witness_params(struct agent *a, int64_t node_timeout_ms);
/* The server answered a request sent at sent_ms; the shims were renewed
 * until shims_until_ms (0: not this time). */
void agent__witness_answered(struct agent *a, int64_t sent_ms, int64_t shims_until_ms);
/* A heartbeat's answer carried the node's group. */
void agent__witness_group(struct agent *a, const struct wire_group *g);
/* The beat says the endpoint's port and the group it holds. */
void agent__witness_for_heartbeat(struct agent *a, struct wire_heartbeat *m);
/* The agent's /metrics: the server's silence, the lease, the case it is in. */
void agent__witness_metrics(struct agent *a, struct strbuf *b);
/* nic.c: the network's errors, drops, links, TCP retransmits and
 * InfiniBand ports' counters, for /metrics. */
void agent__nic_metrics(struct agent *a, struct strbuf *b);
/* The node's network interfaces and RDMA ports into inv (sysfs, or
 * TENK_SYSFS's tree). */
void agent__fabric_detect(struct node_inventory *inv);
/* The NUMA node of each of the agent's CPUs (sysfs' nodeN/cpulist). */
void agent__cpu_numa_detect(struct agent *a);
void agent__witness_close(struct agent *a);
void agent__witness_free(struct agent *a);

/* An image job's group: finds its image in the node's store, or pulls it,
 * then tells the group (image.c). */
void agent__image_resolve(struct taskgroup *g);

/* ---- inventory.c ---- */
/* What the shims' cgroups will hold this node's jobs to (inv->isolation_*,
 * unenforced), warning of each limit they cannot. */
void agent__isolation_detect(struct node_inventory *inv);
int agent__inventory_detect(const struct agent_config *cfg, const struct catalogue *cat,
			    struct node_inventory *ret, struct tk_error *err);

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
	GPU_ECC = 64,
	GPU_THROTTLE = 128,
	GPU_POWER_LIMIT = 256,
	GPU_ROWS = 512,
	GPU_PCIE = 1024
};
/* NVML's clock event (throttle) reasons that slow a busy card against its
 * will: heat, the power brake, the hardware's own slowdown */
#define GPU_SLOWDOWN_HW 0x8ULL
#define GPU_SLOWDOWN_SW_THERMAL 0x20ULL
#define GPU_SLOWDOWN_HW_THERMAL 0x40ULL
#define GPU_SLOWDOWN_POWER_BRAKE 0x80ULL
#define GPU_SLOWDOWN_MASK                                                                          \
	(GPU_SLOWDOWN_HW | GPU_SLOWDOWN_SW_THERMAL | GPU_SLOWDOWN_HW_THERMAL |                     \
	 GPU_SLOWDOWN_POWER_BRAKE)
struct gpu_sample {
	unsigned have;
	unsigned util_pct;
	uint64_t mem_used, mem_total; /* bytes */
	unsigned power_mw;
	uint64_t energy_mj; /* since the driver loaded */
	unsigned temp_c;
	unsigned sm_mhz;
	uint64_t ecc_uncorrected;
	uint64_t throttle; /* NVML's clock event reasons, a mask */
	unsigned power_limit_mw;
	/* remapped memory rows (Ampere and later) */
	unsigned rows_corr, rows_unc;
	bool rows_pending, rows_failed;
	/* the PCIe link now and at most (the device and the system) */
	unsigned pcie_width, pcie_width_max, pcie_gen, pcie_gen_max;
};
/* NULL where the node has no NVML (or fake devices). */
struct nvml *agent__nvml_open(const struct agent_config *cfg, const struct node_inventory *inv);
void agent__nvml_close(struct nvml *n);
/* The driver's version, the CUDA it serves and the devices' VBIOS into st
 * (left as they are without NVML). */
void agent__nvml_versions(const struct nvml *n, struct node_stack *st);

/* ---- stack.c: the node's software stack ---- */

/* Reads it into a->inv.stack (the GPU libraries' part too where gpu, or a
 * minute has passed), counting a change in a->stack_gen. */
void agent__stack_read(struct agent *a, bool gpu);
/* The accelerators NVML opened: the inventory's first ones, in its order. */
int agent__nvml_count(const struct nvml *n);
void agent__nvml_read(const struct nvml *n, int i, struct gpu_sample *s);
bool agent__nvml_ecc(const struct nvml *n, int i, uint64_t *count);
/* The next Xid event waiting, without waiting for one: its accelerator
 * (inventory order) and number. */
bool agent__nvml_xid(const struct nvml *n, int *dev, unsigned *xid);
/* Device i's power limit as set (mW) and the least it may be set to;
 * false where NVML cannot read or set it. */
bool agent__nvml_limit(const struct nvml *n, int i, unsigned *ret_mw, unsigned *ret_min);
/* Sets device i's power limit (mW): 0, or -EPERM, -ENOTSUP, -EIO. */
int agent__nvml_set_limit(const struct nvml *n, int i, unsigned mw);

/* ---- idlepower.c: idle accelerators at their lowest power limit ---- */
/* Each second: a device no group holds for the cluster's idle_power_after
 * is set to its lowest limit. */
void agent__idle_power_tick(struct agent *a, int64_t now);
/* Devices (inventory indices) work is about to run on: their limits back,
 * before it starts. */
void agent__idle_power_wake(struct agent *a, const int *devs, int n);
/* Every device's limit back (the agent stops). */
void agent__idle_power_restore(struct agent *a);
/* /metrics: which devices are lowered, and the energy that saved. */
void agent__idle_power_metrics(struct agent *a, struct strbuf *b);

/* ---- health.c ---- */
struct health;
/* Opens NVML (where the node has real accelerators), notes each one's
 * uncorrected ECC count and listens for Xid events. */
/* disk.c: the jobs' checkpoint folders measured (every few seconds, from
 * the health tick, or now); an attempt whose folder is over the limit is
 * stopped */
void agent__disk_tick(struct agent *a, bool now);
/* What one job's folder may hold here (MiB; 0: no limit). */
int64_t agent__disk_limit_mib(const struct agent *a);
/* g's attempt is over: a folder it took over its limit goes. */
void agent__disk_remove(struct taskgroup *g);

void agent__health_init(struct agent *a);
/* Looks at the node every second from now, and runs the operator's health
 * check at its interval; a new fault sends a heartbeat at once. */
void agent__health_start(struct agent *a);
/* The agent stops: its timer goes (the check, a cmd, is stopped with the
 * rest). */
void agent__health_stop(struct agent *a);
void agent__health_release(struct agent *a);
/* The node's faults now, at most max of them, as text, for the heartbeat
 * about to go; agent__health_told when the server has answered it. */
int agent__health_faults(struct agent *a, char (*out)[WIRE_FAULT_MAX], int max);
/* The agent found the node at fault itself (processes it cannot kill): the
 * server hears it with every beat from now on, and drains the node. */
void agent__health_fault(struct agent *a, const char *fault);
void agent__health_told(struct agent *a);
/* Xids of NVML's accelerator i since the agent started, and the last. */
uint64_t agent__health_xids(struct agent *a, int i, unsigned *last);
/* The cluster's thresholds for the accelerators (from registration). */
void agent__health_limits(struct agent *a, const struct gpu_limits *g);
/* Which of accelerator i's checks it fails now (a fault held: 1 << enum
 * gpu_check), and what it last read. */
unsigned agent__health_gpu(struct agent *a, int i, struct gpu_sample *last);
/* What the accelerators last read, for the heartbeat (at most max). */
int agent__health_for_heartbeat(struct agent *a, struct wire_gpu *out, int max);

/* ---- metrics.c: GET /metrics ---- */
struct metrics;
/* Listens on --metrics-listen (or the default, where it is free). */
int agent__metrics_start(struct agent *a, struct tk_error *err);
/* Serves it from the agent's loop, from now on. */
void agent__metrics_watch(struct agent *a);
void agent__metrics_stop(struct agent *a);
/* The text of GET /metrics (the caller frees it). */
char *agent__metrics_render(struct agent *a);

/* ---- usage.c: what an attempt's accelerators used ---- */
/* Notes the energy counters of g's accelerators as it starts. */
void agent__usage_start(struct taskgroup *g);
/* Samples utilization and power of every running attempt's accelerators
 * (each second). */
void agent__usage_tick(struct agent *a);
/* Energy (mJ; -1 where NVML tells neither counter nor power) and busy time
 * (ms) of g's accelerators so far, its share of them. */
void agent__usage_of(const struct taskgroup *g, int64_t *energy_mj, int64_t *busy_ms);

/* ---- nccl.c: NCCL's transports, from its log (--nccl-check) ---- */

/* RUN/nccl/JOB.ATTEMPT, made for the attempt's user (as_user: owned by
 * uid) when its spec asks the check; NULL when not asked or it cannot be
 * made (said in the log). The tasks' NCCL_DEBUG_FILE goes in it. */
char *agent__nccl_setup(struct taskgroup *g, const struct work_spec *spec, bool as_user,
			uint32_t uid, uint32_t gid);
/* Reads what is new in running attempt g's NCCL log (every second). */
void agent__nccl_poll_group(struct taskgroup *g);
/* What they say so far, one entry an attempt that said anything (for the
 * heartbeat; the caller frees *ret). */
int agent__nccl_for_heartbeat(struct agent *a, struct wire_nccl **ret);
/* Forgets g's part; remove: its folder and files too. */
void agent__nccl_release(struct taskgroup *g, bool remove);

/* ---- train.c: training metrics from $TENK_METRICS ---- */
/* Makes the attempt's metrics file (its user's when as_user); returns its
 * path, for TENK_METRICS. */
char *agent__train_setup(struct taskgroup *g, bool as_user, uint32_t uid, uint32_t gid);
/* Reads what running attempt g wrote since the last call (every second). */
void agent__train_poll_group(struct taskgroup *g);
/* The lines the server has not had, each attempt's since the last beat
 * (at most TRAIN_PER_BEAT of them, thinned evenly), for a heartbeat (the
 * caller frees *ret). */
int agent__train_for_heartbeat(struct agent *a, struct wire_train **ret);
/* The group goes: its file is closed, and removed when it is done. */
void agent__train_release(struct taskgroup *g, bool remove);
/* The beat that carried the lines answered: the server has them. */
void agent__train_delivered(struct agent *a);

/* ---- forward.c: a service's address on this node ---- */
/* The services' table of a work answer (borrowed): listens on each one's
 * port, forwards to its endpoints; a service no longer in it closes. */
void agent__forward_table(struct agent *a, const struct wire_service *v, int n);
void agent__forward_tick(uv_timer_t *t);
/* The load of each service here (busy and held connections), for a
 * heartbeat (*ret the caller's to free). Returns how many. */
int agent__forward_load(struct agent *a, struct wire_serve_load **ret);
/* Its connections counted, for /metrics. */
void agent__forward_metrics(struct agent *a, struct strbuf *b);
/* Closes every listener and connection (the agent stops). */
void agent__forward_stop(struct agent *a);

/* ---- probe.c: service replicas' health probes ---- */
/* Starts the probes' timer (the agent's start). */
int agent__probe_start(struct agent *a);
/* Ends the probes in flight, unjudged, and the timer (the agent stops). */
void agent__probe_stop(struct agent *a);
/* What a work answer says of the group's probe (none: not probed). */
void agent__probe_item(struct taskgroup *g, const struct work_item *it);

/* ---- ckpt.c ---- */
/* Scans the running groups' checkpoint folders every second from now. */
void agent__ckpt_start(struct agent *a);
/* What a work answer says of the group's checkpoints: the store, the tag
 * to restore, and whether every node has (group_restore_go then). */
void agent__ckpt_item(struct taskgroup *g, const struct work_item *it);
void agent__ckpt_group_release(struct taskgroup *g);
/* Its tasks have ended, and a checkpoint they marked is not yet uploaded
 * (within the drain time of their end): the group stays until it is. */
bool agent__ckpt_draining(struct taskgroup *g);
/* How long g's checkpoints have waited for the store (ms; 0: none waits
 * now; -1: g has no store to upload to). */
int64_t agent__ckpt_backlog_ms(struct taskgroup *g, int64_t now);

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

/* ---- launch.c: the group's shim, and the group's making and forgetting ---- */
/* What the agent's groups ask of their parts (group.h). */
extern const struct group_ops agent__launch_ops;
/* Starts one attempt's part on this node from the server's spec (borrowed:
 * checked by work_spec_unpack, and not kept). Returns the group,
 * registered in a->groups. */
struct taskgroup *agent__group_start(struct agent *a, const struct work_item *it,
				     const struct work_spec *spec);
/* The grace period is over and the shim did not kill them: the agent does. */
void agent__group_kill(struct taskgroup *g);
int64_t agent__group_grace_ms(const struct taskgroup *g);
/* When the newest entry of the group's checkpoint folder was written (ms), or 0. */
int64_t agent__group_newest_checkpoint(const struct taskgroup *g);
/* Makes again the group of every shim an earlier agent left in the work
 * folder and connects to it. Returns how many. */
int agent__shims_adopt(struct agent *a);
