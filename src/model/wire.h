/*
 * wire: the protocol between the agents and the server (DESIGN.md section
 * 8), one C type per message with the _pack and _unpack that both sides
 * use, so that the two can never read one message two ways. Every exchange
 * is opened by the agent:
 *
 *   POST /v1/agent/register   struct wire_register   -> struct wire_registered
 *   POST /v1/agent/heartbeat  struct wire_heartbeat  -> {"ok": true}
 *   GET  /v1/agent/work?node=&agent_id=&epoch=&gen=&wait_ms=
 *                                                    -> struct wire_work
 *   POST /v1/agent/events     struct wire_events     -> {"acked": N}
 *
 * Meaning travels in enums (the type of an event, the cause of an exit);
 * the only free text is `detail`, which the server shows to people and
 * never compares. Decoding is as strict as for users' input: the server
 * trusts nothing an agent sends, and the agent nothing of the server's.
 */
#pragma once

#include "model.h"

#define WIRE_MAX_EVENTS 4096	  /* events in one report */
#define WIRE_MAX_CHECKPOINTS 4096 /* checkpoint times in one heartbeat */
#define WIRE_MAX_WORK 65536	  /* attempts in one work answer */
#define WIRE_MAX_IMAGES 4096	  /* images of one node's store, pulls asked of it */
#define WIRE_EPOCH_MAX 40	  /* a server epoch, with NUL */
#define WIRE_CREDENTIAL_MAX 65	  /* a node's credential: 64 hex digits, with NUL */
#define WIRE_AGENT_ID_MAX MODEL_NAME_MAX
#define WIRE_MAX_FAULTS 8  /* faults one heartbeat reports */
#define WIRE_FAULT_MAX 256 /* one fault's text, with the NUL */

/* ---- why a task ended ------------------------------------------------------------ */

/*
 * What the agent saw end a task. The server turns it into the job's next
 * state: TIMEOUT ends the job as TIMEOUT, the others fail it (or requeue it)
 * when the code is not 0.
 *   EXITED         its process exited by itself (exit_code)
 *   SIGNALLED      a signal tenk did not send killed it (signal)
 *   TIMEOUT        tenk stopped it at its time limit
 *   CANCELLED      tenk stopped it: the server no longer lists its attempt
 *                  (cancelled, preempted, requeued: the server knows which),
 *                  or another task of its gang failed to start
 *   PREEMPTED      stopped for a preemption the agent was told of (the
 *                  server says so today; agents do not yet send it)
 *   LOST           it ended with its node: the agent itself stopped
 *   LAUNCH_FAILED  it never ran (no such command, no output file, ...)
 *   OOM            its memory limit killed it (room for cgroups)
 *   DISK_LIMIT     its checkpoint folder went over the node's limit
 *   UNHEALTHY      the agent stopped it: its health probe failed (job_probe)
 */
enum exit_cause {
	EXIT_EXITED,
	EXIT_SIGNALLED,
	EXIT_TIMEOUT,
	EXIT_CANCELLED,
	EXIT_PREEMPTED,
	EXIT_LOST,
	EXIT_LAUNCH_FAILED,
	EXIT_OOM,
	EXIT_DISK_LIMIT, /* its checkpoint folder went over the node's limit */
	EXIT_UNHEALTHY,
	EXIT_CAUSE_MAX
};

/* "exited", "signalled", "timeout", ...; "?" for a value out of range. */
const char *exit_cause_name(enum exit_cause c);
int exit_cause_parse(const char *s, enum exit_cause *ret);

/* ---- register ------------------------------------------------------------------- */

/* One attempt's part on a node, by name. */
struct wire_attempt_ref {
	int64_t job;
	int attempt;
};

/*
 * The agent protocol's version. A server serves agents of its own version
 * and the one before; an agent works with a server of its own and the one
 * after; either side ignores keys it does not know (a newer peer's) and
 * refuses known keys that are malformed. So servers are upgraded first
 * (standbys, then the active), then agents node by node. 1: the version
 * before versions were said (0.1.0: no "protocol" key, and every link
 * refused keys it did not know); 2: links ignore unknown keys, the agent
 * says its protocol. Each side writes to a protocol-1 peer only what
 * protocol 1 knows: no "protocol" key.
 */
#define WIRE_PROTOCOL 2

/* Why the server refuses an agent's registration (403), in the answer's
 * "refusal" beside its "error" (protocol 2; absent: not said): whether
 * asking again can ever help. */
enum wire_refusal {
	WIRE_REFUSAL_NONE,  /* not said (a server of 0.1.0) */
	WIRE_REFUSAL_ADMIT, /* "admit": an admin's `tenk nodes admit` lifts it */
	WIRE_REFUSAL_FINAL, /* "final": nothing the server side does lifts it; the
			     * agent's own configuration is wrong */
	WIRE_REFUSAL_MAX
};
const char *wire_refusal_name(enum wire_refusal r);
enum wire_refusal wire_refusal_parse(const char *s); /* NONE for NULL or unknown */

struct wire_register {
	char agent_id[WIRE_AGENT_ID_MAX]; /* 8 to 63 lowercase hex digits: this agent process */
	int protocol; /* the agent's (1 when it does not say; 0 packs WIRE_PROTOCOL) */
	struct node_inventory inv;
	/* the attempts whose shims this agent found when it started, running
	 * or holding exits it has yet to report: the server keeps them on the
	 * node rather than losing them with the agent process that began them */
	int nkept;
	struct wire_attempt_ref *kept; /* owned after unpack; see wire_register_release */
};

json_t *wire_register_pack(const struct wire_register *m);
int wire_register_unpack(json_t *j, struct wire_register *ret, struct tk_error *err);
void wire_register_release(struct wire_register *m);

/* The server's answer: the node's name and address as it knows them. */
struct wire_registered {
	char node[MODEL_NAME_MAX];
	char addr[MODEL_ADDR_MAX];
	char epoch[WIRE_EPOCH_MAX]; /* differs on every server start */
	int64_t node_timeout_ms;    /* a node silent this long is DOWN */
	/* the node's own credential, when it joined with the join token: the
	 * bearer token of every later call; "" when it registered with it */
	char credential[WIRE_CREDENTIAL_MAX];
	int protocol; /* the server's (1 when it does not say; 0 packs WIRE_PROTOCOL,
		       * 1 packs no key: what a protocol-1 agent reads) */
	/* the cluster's "gpu_health" (protocol 2; not packed to a protocol-1
	 * agent); has_gpu_health false: not said, the agent keeps its defaults */
	bool has_gpu_health;
	struct gpu_limits gpu_health;
	/* the heartbeat period the server asks of its agents (protocol 2; 0:
	 * none asked, the agent keeps its own): its "power_fence", which
	 * finds a dead node in three beats and their delays */
	int64_t heartbeat_ms;
	/* the cluster's "idle_power_after" (ms; 0: never; -1: not said, the
	 * agent keeps its default) */
	int64_t idle_power_after_ms;
};

/* "gpu_health" as configured (config: "for" a duration such as "5m") or
 * as sent to an agent ("hold_ms"); what an object leaves out keeps its
 * default. */
json_t *wire_gpu_limits_pack(const struct gpu_limits *g);
int wire_gpu_limits_unpack(json_t *j, bool config, struct gpu_limits *ret, struct tk_error *err);

json_t *wire_registered_pack(const struct wire_registered *m);
int wire_registered_unpack(json_t *j, struct wire_registered *ret, struct tk_error *err);

/* ---- fencing by lease ------------------------------------------------------------- */

/*
 * A node cut off from the server has stopped its tasks before the server,
 * having heard nothing from it for the node timeout T, runs their attempts
 * elsewhere. Both sides take every figure from T, each on its own
 * monotonic clock (only their rates need agree):
 *   - the server notes a node alive when it receives any request of the
 *     node's agent, and declares it DOWN, ending its attempts, once it has
 *     received none for T;
 *   - the agent notes when it sent the last request the server answered
 *     (which the server received no earlier), and grants the shims of the
 *     node a lease to then + lease_ms;
 *   - a shim whose lease ends stops its tasks and kills what is left of
 *     them, its whole cgroup, fence_grace_ms later at the most.
 * So every task is gone bound_ms = 3T/4 after an instant the server heard
 * the agent: a quarter of T before the server may run it elsewhere, the
 * margin for timers that fire late on a loaded node.
 */
struct wire_lease {
	int64_t lease_ms;	/* T/2 */
	int64_t heartbeat_ms;	/* at most T/10 (fence.h: two beats within a quarter) */
	int64_t fence_grace_ms; /* T/4: the longest grace period of a fenced task */
	int64_t bound_ms;	/* lease_ms + fence_grace_ms */
};

/* The lease for node timeout T, with heartbeats no rarer than
 * heartbeat_ms (the agent's setting, or the server's ask when that is
 * shorter). */
void wire_lease_of(int64_t node_timeout_ms, int64_t heartbeat_ms, struct wire_lease *ret);

/* ---- witness groups (fence.h) ---------------------------------------------------- */

#define WIRE_MAX_GROUP 9     /* members of one witness group (FENCE_MAX_GROUP) */
#define WIRE_GROUP_ID_MAX 17 /* 16 hex digits, with NUL */
#define WIRE_GROUP_KEY_MAX 65

/* A member: its node, and where its agent's witness endpoint listens
 * (port 0: not known yet). */
struct wire_peer {
	char node[MODEL_NAME_MAX];
	char addr[MODEL_ADDR_MAX];
	int port;
};

/* The witness group the server put a node in, sent with a heartbeat's
 * answer whenever what the node acknowledges differs. */
struct wire_group {
	char id[WIRE_GROUP_ID_MAX];   /* its members' names: what the server's hold rule weighs */
	char tag[WIRE_GROUP_ID_MAX];  /* its members and their endpoints: resent when it changes */
	char key[WIRE_GROUP_KEY_MAX]; /* 64 hex digits: authenticates members to each other */
	int n;
	struct wire_peer members[WIRE_MAX_GROUP];
};

json_t *wire_group_pack(const struct wire_group *g);
int wire_group_unpack(json_t *j, struct wire_group *ret, struct tk_error *err);

/* ---- heartbeat ------------------------------------------------------------------ */

/* When a running attempt last wrote a checkpoint (what preemption weighs). */
struct wire_checkpoint {
	int64_t job;
	int attempt;
	int64_t at_ms;
};

/* An image in the node's store (`tenk images`). */
struct wire_image {
	char ref[MODEL_IMAGE_MAX];
	char digest[MODEL_DIGEST_MAX];
	int64_t size_mib;
};

/* A pull the server asked for (`tenk images pull`), and how it went. */
enum pull_state { PULL_RUNNING, PULL_DONE, PULL_FAILED, PULL_STATE_MAX };
const char *pull_state_name(enum pull_state s);

struct wire_pull {
	char ref[MODEL_IMAGE_MAX];
	enum pull_state state;
	char detail[MODEL_REASON_MAX]; /* failed: what the registry said */
};

/* What NCCL's log of an attempt's tasks on this node says so far (job
 * --nccl-check; model nccl_log.c): its connections by transport, the
 * network NCCL named, the first connection over sockets in NCCL's words. */
struct wire_nccl {
	int64_t job;
	int attempt;
	int connections[NCCL_TR_MAX];
	char network[32];
	char line[200];
};

struct wire_train {
	int64_t job;
	int attempt;
	struct train_point point;
	/* where the line ends in the attempt's $TENK_METRICS (0: not said): the
	 * server takes each line once, whatever an agent sends again */
	int64_t offset;
};

/* What one accelerator read at the agent's last look (each second), in a
 * heartbeat's "gpus" (protocol 2): the operator's view of the node, and
 * how the server finds a job whose accelerators all sit idle. -1: not
 * read. */
struct wire_gpu {
	int index; /* the inventory's device index */
	int util_pct, temp_c, power_w, power_limit_w;
	bool slowed;	  /* heat or the power brake slows its clocks */
	unsigned failing; /* the checks it fails, 1 << enum gpu_check */
};
json_t *wire_gpus_pack(const struct wire_gpu *g, int n);

/* What a node's forwarder carries of one service (wire_service): its
 * connections busy now (a request sent and not yet answered, or an answer
 * coming) and those held for want of a replica in rotation; what scaling
 * with load reads. */
struct wire_serve_load {
	char name[MODEL_NAME_MAX];
	int busy;
	int held;
};

struct wire_heartbeat {
	char node[MODEL_NAME_MAX];
	char agent_id[WIRE_AGENT_ID_MAX];
	bool stopping; /* the agent's last beat: it stops; place nothing new here */
	int ncheckpoints;
	struct wire_checkpoint *checkpoints; /* owned after unpack; see wire_heartbeat_release */
	/* the node's images and the pulls asked of it, whole, when they changed
	 * since the last beat the server answered (has_images); else absent */
	bool has_images;
	int nimages;
	struct wire_image *images;
	/* the node's software stack, when it changed since the last beat the
	 * server answered (has_stack) */
	bool has_stack;
	struct node_stack stack;
	int npulls;
	struct wire_pull *pulls;
	/* what the agent finds wrong with its node now (a full disk, ECC
	 * errors): the server drains it and requeues its jobs at once */
	int nfaults;
	char faults[WIRE_MAX_FAULTS][WIRE_FAULT_MAX];
	/* the newest line each attempt here wrote to $TENK_METRICS since the
	 * last beat (owned after unpack) */
	int ntrain;
	struct wire_train *train;
	/* NCCL's transports of its attempts with --nccl-check, as their logs
	 * say so far (owned after unpack; a protocol-1 server refuses it) */
	int nnccl;
	struct wire_nccl *nccl;
	/* the newest heartbeat answer the agent received: its server's epoch
	 * and time (that server's monotonic ms); "" and 0: none (fence.h: the
	 * server holds a member in touch by what it proves it heard) */
	char acked_epoch[WIRE_EPOCH_MAX];
	int64_t acked_at_ms;
	/* its witness endpoint's UDP port (0: none), the witness group it
	 * holds now ("": none), by id and tag, and which beat this is */
	int witness_port;
	char group_id[WIRE_GROUP_ID_MAX];
	char group_tag[WIRE_GROUP_ID_MAX];
	uint64_t witness_seq; /* the agent's beats, counted from 1 (0: not said) */
	/* how often it beats (ms; 0: not said, an agent of before): the
	 * server holds it to that (fence.h, power fencing); a protocol-1
	 * server refuses the key */
	int64_t beat_ms;
	/* its accelerators, as NVML read them last (none: no NVML, or a
	 * protocol-1 server, which refuses the key) */
	int ngpus;
	struct wire_gpu gpus[MODEL_MAX_ACCELS];
	/* the load of the services this node is an address of (has_serve:
	 * said; owned after unpack) */
	bool has_serve;
	int nserve;
	struct wire_serve_load *serve;
};

json_t *wire_heartbeat_pack(const struct wire_heartbeat *m);
/* The heartbeat's answer: the server's epoch and its time, which the
 * node's next beat acknowledges (acked_epoch, acked_at_ms). */
json_t *wire_beat_answer_pack(const char *epoch, int64_t at_ms, const struct wire_group *g);
/* Takes what an answer's body says into epoch and *at_ms when it is newer
 * than what they hold (another run of the server, or a later time); and
 * the group it carries into *g (when g is not NULL). Returns 1 when it
 * carried a group, 0 when none, -EINVAL (err says why) when it is
 * malformed. */
int wire_beat_answer_take(const char *body, size_t len, char *epoch, int64_t *at_ms,
			  struct wire_group *g, struct tk_error *err);
/* The heartbeat's "images" and "pulls", which the API shows as they are. */
json_t *wire_images_pack(const struct wire_image *im, int n);
json_t *wire_pulls_pack(const struct wire_pull *p, int n);
int wire_heartbeat_unpack(json_t *j, struct wire_heartbeat *ret, struct tk_error *err);
/* One attempt's NCCL transports (wire_heartbeat.nccl; the job's record
 * keeps the same per node). */
json_t *wire_nccl_pack(const struct wire_nccl *n);
int wire_nccl_unpack(json_t *v, struct wire_nccl *ret, struct tk_error *err);
void wire_heartbeat_release(struct wire_heartbeat *m);

/* ---- work ------------------------------------------------------------------------ */

/*
 * What one node runs of one attempt: the tasks_per_node tasks of node rank
 * node_rank, with the launch environment's figures (DESIGN.md section 3).
 * Task t (local rank) sees the devices devs[devs_off[t] .. devs_off[t+1]).
 * After work_spec_unpack everything is owned (work_spec_release frees it);
 * a spec the server fills to pack may borrow its strings from the job and
 * is then not released.
 */
struct work_spec {
	char *name;
	int argc;
	char **argv;
	char *cwd;
	int nenv;
	char **env; /* "KEY=VALUE" */
	char *output;
	int node_rank;
	int nnodes;
	int tasks_per_node;
	int world_size;
	int *devs_off; /* tasks_per_node + 1 offsets into devs */
	int *devs;     /* device indices on the node */
	int milli;     /* share of each device: MODEL_MILLI for whole ones */
	char master_addr[MODEL_ADDR_MAX];
	int master_port;
	int64_t time_limit_s; /* 0: none */
	int64_t grace_s;
	bool system; /* the server's own work (a validation run): the agent's identity */
	/* the Unix account every task runs as, resolved on the node; "" only for
	 * system work. allow_root: the cluster lets a job run as uid 0 */
	char run_as[MODEL_NAME_MAX];
	bool allow_root;
	/* whose it is and whose queue (for the node's metrics; "": unknown) */
	char owner[MODEL_NAME_MAX];
	char queue[MODEL_NAME_MAX];
	int cpus;	 /* CPUs reserved for it on the node (0: none); a cpuset holds it to them */
	int64_t mem_mib; /* memory it may use on the node (0: no limit) */
	/* its tasks run in containers of this image (NULL: on the host), with
	 * these folders of the host ("SRC:DST[:ro]", model_mount_parse) */
	char *image;
	int nmounts;
	char **mounts;
	enum ckpt_marker ckpt_marker;
	char *error; /* stderr's path pattern; NULL: into output */
	/* an array's element: the array's id (0: none), its index and size */
	int64_t array_job;
	int array_index;
	int array_count;
	bool slurm_env;	 /* Slurm's SLURM_* variables too */
	bool nccl_check; /* NCCL's log into the agent's folder, read (job --nccl-check) */
	/* a warning signal this long before the time limit (0: none) */
	int signal;
	int64_t signal_before_s;
	bool pty; /* its one task's stdin, stdout and stderr are a pseudo-terminal */
	/* no "--- tenk: attempt N ..." line in its output files ("attempt_marks":
	 * false; protocol 2: never sent to an agent of protocol 1, which
	 * writes none) */
	bool no_marks;
	/* a service's replica: the port it serves on ($PORT; 0: none) */
	int port;
};

json_t *work_spec_pack(const struct work_spec *s);
int work_spec_unpack(json_t *j, struct work_spec *ret, struct tk_error *err);
void work_spec_release(struct work_spec *s);
/* Task t's devices: returns the first, *ret_n their number. */
const int *work_spec_devices(const struct work_spec *s, int t, int *ret_n);

/* One attempt the node should run; spec only the first time it is listed. */
struct work_item {
	int64_t job;
	int attempt;
	struct work_spec *spec; /* NULL: the agent knows it already */
	/* the attempt's time limit now (tenk update may move it after the
	 * start): seconds, 0 none, -1 not said */
	int64_t limit_s;
	/* an image job's: the digest every node of the attempt resolved its
	 * image to, listed once all have (TASK_EVENT_IMAGE); its tasks start
	 * then, on that digest. "" till then */
	char digest[MODEL_DIGEST_MAX];
	/* checkpoints (ckpt_store != ""): the attempt's parts go to
	 * STORE/JOB/TAG/aATTEMPT/nRANK/. Before its tasks start every node
	 * restores restore_tag of attempt restore_attempt (""; nothing) and
	 * says so (TASK_EVENT_RESTORED); restore_go once every node has */
	char ckpt_store[MODEL_MAX_PATH];
	char restore_tag[MODEL_CKPT_TAG_MAX];
	int64_t restore_step;
	int restore_attempt;
	bool restore_go;
	/* whose part of restore_tag this node restores: 0, its own; N, node
	 * rank N-1's, where a tag committed without this rank's part (a
	 * just-in-time checkpoint, --ckpt-signal); "restore_node": N-1 */
	int restore_from;
	/* a service's replica: its health probe, at port on this node
	 * (has_probe; sent in every answer, so that an agent that adopts the
	 * attempt probes it too) */
	bool has_probe;
	int port;
	struct job_probe probe;
	/* a task of the gang failed: signal every task here with this now,
	 * once, to write a checkpoint before the gang stops (--ckpt-signal);
	 * 0: none */
	int signal_now;
	/* a DCP job's tags some node has uploaded: complete on every node,
	 * though only one wrote the marker */
	int nmarked;
	struct {
		char tag[MODEL_CKPT_TAG_MAX];
		int64_t step;
	} marked[MODEL_MAX_CKPT_PENDING];
	/* to node rank 0: the job's committed checkpoints, all the store is to
	 * keep of its older attempts and older steps (the rest it removes) */
	int nkeep;
	struct {
		char tag[MODEL_CKPT_TAG_MAX];
		int64_t step;
		int attempt;
	} keep[MODEL_MAX_CKPTS];
};

/*
 * Task output served by the agents (GET /v1/jobs/ID/logs): the server asks
 * the node holding the files in its work answer (wire_log_fetch), and the
 * agent answers with what they hold from an offset (POST /v1/agent/logs).
 */
#define WIRE_MAX_LOG_FETCHES 64
#define WIRE_MAX_LOG_FILES 256
#define WIRE_LOG_MAX_BYTES (4 << 20) /* of one file in one answer */
struct wire_log_file {
	int rank;
	char *path;
	int64_t offset; /* -1: from the end (max bytes, or the last tail lines) */
	int64_t max;
	int tail; /* with offset -1: at most these last lines; 0: max bytes */
};
struct wire_log_fetch {
	uint64_t id;
	char run_as[MODEL_NAME_MAX]; /* the files must be this account's */
	int nfiles;
	struct wire_log_file *files;
};
/* What reading one task's output gave: the agent's part, and each task's
 * entry of GET /v1/jobs/ID/logs ("status"), where the server adds its own. */
enum log_status {
	LOG_READ,	/* data from offset */
	LOG_NOT_YET,	/* no such file: the task has written nothing yet */
	LOG_UNREADABLE, /* the file cannot be read (error says why) */
	LOG_NODE_DOWN,	/* the server's: the node holding it is down */
	LOG_NO_ANSWER,	/* the server's: the node did not answer in time */
	LOG_STATUS_MAX
};
/* "read", "not_yet", "unreadable", "node_down", "no_answer". */
const char *log_status_name(enum log_status s);

struct wire_log_part {
	int rank;
	int64_t offset; /* where data starts in the file */
	int64_t size;	/* the file's size now */
	char *data;
	size_t len;
	enum log_status status;
	char error[MODEL_REASON_MAX]; /* "" or why nothing was read, for people */
};
struct wire_log_answer {
	uint64_t id;
	int nparts;
	struct wire_log_part *parts;
};
struct wire_logs {
	char node[MODEL_NAME_MAX];
	char agent_id[WIRE_AGENT_ID_MAX];
	int nanswers;
	struct wire_log_answer *answers;
};
json_t *wire_log_fetches_pack(const struct wire_log_fetch *f, int n);
int wire_log_fetches_unpack(json_t *arr, struct wire_log_fetch **ret, int *ret_n,
			    struct tk_error *err);
void wire_log_fetches_release(struct wire_log_fetch *f, int n);
json_t *wire_logs_pack(const struct wire_logs *m);
int wire_logs_unpack(json_t *j, struct wire_logs *ret, struct tk_error *err);
void wire_logs_release(struct wire_logs *m);

/*
 * The answer to a work long-poll: the whole set of attempts the node should
 * run (level-triggered: a lost or repeated answer does no harm), or, with
 * `unchanged`, only that nothing changed before the wait ran out.
 */
#define WIRE_PTY_SESSION_MAX 33	     /* 32 hex digits */
#define WIRE_PTY_PROTOCOL "tenk-pty" /* the Upgrade: of a terminal's stream */
/* What the user's side sends down a terminal's stream: frames of a type
 * byte, a 16-bit big-endian length and that many bytes (keystrokes, or
 * the terminal's rows and columns as two 16-bit numbers); what comes up
 * is the terminal's output as it is. */
#define WIRE_PTY_DATA 'd'
#define WIRE_PTY_WINSIZE 'w'
#define WIRE_MAX_PTYS 64
struct wire_pty {
	char session[WIRE_PTY_SESSION_MAX];
	int64_t job;
	int attempt;
};
json_t *wire_ptys_pack(const struct wire_pty *p, int n);

/*
 * The cluster's services with an address of their own (tenk serve --port):
 * every node's agent answers on port and forwards each connection to one
 * of the endpoints, the replicas in rotation. A work answer carries the
 * whole table when the server has one (has_services), and an agent keeps
 * the last it was given.
 */
#define WIRE_MAX_SERVICES 1024
#define WIRE_MAX_ENDPOINTS 1000
struct wire_endpoint {
	char addr[MODEL_ADDR_MAX];
	int port;
};
struct wire_service {
	char name[MODEL_NAME_MAX];
	int port;
	int nends;
	struct wire_endpoint *ends;
};

struct wire_work {
	char epoch[WIRE_EPOCH_MAX];
	uint64_t gen;
	bool unchanged;
	int nitems;
	struct work_item *items;
	/* images the node should pull ahead (`tenk images pull`) */
	int npulls;
	char (*pulls)[MODEL_IMAGE_MAX];
	/* output users asked for, to send with POST /v1/agent/logs */
	int nlogs;
	struct wire_log_fetch *logs;
	/* terminals users attach to: the agent joins each session with GET
	 * /v1/agent/pty (an upgraded connection) to its attempt's shim */
	int nptys;
	struct wire_pty *ptys;
	/* the services' table (owned after unpack) */
	bool has_services;
	int nservices;
	struct wire_service *services;
};

json_t *wire_work_pack(const struct wire_work *m);
/* The table's JSON, and back (*ret owned; wire_services_free). */
json_t *wire_services_pack(const struct wire_service *v, int n);
int wire_services_unpack(json_t *arr, struct wire_service **ret, int *ret_n, struct tk_error *err);
void wire_services_free(struct wire_service *v, int n);
int wire_work_unpack(json_t *j, struct wire_work *ret, struct tk_error *err);
/* Frees the items and the specs they own (after unpack). */
void wire_work_release(struct wire_work *m);

/* ---- events ----------------------------------------------------------------------- */

/*
 * A task's start or exit; for an image job, before any task of a node
 * starts, that node's image: PULLING while the agent pulls it, IMAGE once
 * it has it (digest); a node's checkpoint uploaded (CHECKPOINT) or its
 * restore done (RESTORED); all with the rank of the node's first task.
 */
enum task_event_type {
	TASK_EVENT_STARTED,
	TASK_EVENT_EXITED,
	TASK_EVENT_PULLING,
	TASK_EVENT_IMAGE,
	TASK_EVENT_CHECKPOINT, /* the node's part of tag uploaded: digest, step, bytes, dur_ms */
	TASK_EVENT_RESTORED,   /* the node restored tag (detail: why not), bytes, dur_ms */
	TASK_EVENT_READY,      /* its health probe passed: in rotation */
	TASK_EVENT_UNREADY,    /* its health probe failed (detail: how): out of it */
	TASK_EVENT_TYPE_MAX
};

/* One task's start or exit, or its node's image. */
struct task_event {
	int64_t job;
	int attempt;
	int rank; /* in the attempt's world */
	enum task_event_type type;
	int64_t at_ms;		       /* wall clock of the agent's node */
	int exit_code;		       /* exited: the code, or 128 + signal */
	int signal;		       /* exited by a signal: its number, else 0 */
	enum exit_cause cause;	       /* exited: why */
	char detail[MODEL_REASON_MAX]; /* for people: "command not found: foo"; may be "" */
	/* exited: what the attempt's processes on the node used so far */
	int64_t cpu_ms;
	int64_t mem_peak_mib;
	/* ... and the energy its accelerators used (-1: unknown), their busy time */
	int64_t energy_mj;
	int64_t gpu_busy_ms;
	char digest[MODEL_DIGEST_MAX]; /* IMAGE: "sha256:HEX"; CHECKPOINT: the manifest's */
	/* STARTED: where the attempt began in the task's output and error files
	 * (their sizes then: earlier attempts' output is before); protocol 2 */
	int64_t out_from, err_from;
	/* EXITED: the node could not start it (its shim, its folders): the
	 * node's failure, not the job's; protocol 2 */
	bool node_fault;
	/* EXITED with node_fault: the node reports this end as its own fault
	 * (its device check failed), as its next heartbeat will ("job J
	 * attempt A: DETAIL"): the server drains it on whichever comes first,
	 * so that the job's next attempt never lands there (a server that
	 * does not know the key drains it at the heartbeat) */
	bool fault_reported;
	/* CHECKPOINT, RESTORED */
	char tag[MODEL_CKPT_TAG_MAX];
	int64_t step;
	int64_t bytes;
	int64_t dur_ms;
	/* CHECKPOINT: how long the job took to write the tag here (its files'
	 * first birth to their last change; 0: not known); protocol 2 */
	int64_t write_ms;
};

json_t *task_event_pack(const struct task_event *e);
int task_event_unpack(json_t *j, struct task_event *ret, struct tk_error *err);

struct wire_events {
	char node[MODEL_NAME_MAX];
	char agent_id[WIRE_AGENT_ID_MAX];
	int nevents;
	struct task_event *events; /* owned after unpack; see wire_events_release */
};

json_t *wire_events_pack(const struct wire_events *m);
int wire_events_unpack(json_t *j, struct wire_events *ret, struct tk_error *err);
void wire_events_release(struct wire_events *m);
