/*
 * Private to src/server (and its unit tests): the server's state machine.
 *
 * Everything the cluster is lives here: jobs and their attempts, nodes and
 * what is allocated on them, queues, users, validation runs, the
 * scheduler's kept tables. The state machine answers no request and reads
 * no clock: each entry point takes the time (`now`, wall milliseconds, and
 * `mono` for node liveness) as an argument, and whatever a caller waits for
 * is told as an event (struct state_event) through the callback the shell
 * installs. api.c turns events into answers; tests/unit/server drive it
 * with no HTTP around it.
 *
 * Durability: each change marks what it touched dirty and advances
 * seq_applied. The shell (server.c) writes dirty objects in one batch per
 * loop iteration and holds every answer until what it reports is durable.
 *
 * A job's attempt holds resources on each of its nodes as a `part`. The
 * part is released when every task of the attempt on that node has exited
 * or been lost, not when the job ends: a cancelled job's processes still
 * hold their devices until the agent reports them gone, so nothing is
 * given twice.
 *
 * What an agent should run is derived, never queued: the parts on its node
 * whose job is STARTING or RUNNING in that same attempt. When that set
 * changes the node's work_gen advances; state_flush_work raises one
 * STATE_EV_WORK_CHANGED per such node at the end of a loop iteration.
 */
#pragma once

#include <stdbool.h>

#include "model/model.h"
#include "model/wire.h"
#include "fence/fence.h"
#include "sched/sched.h"

#define STATE_PORT_BASE 29500 /* MASTER_PORT range on each node, by default */
#define STATE_PORT_COUNT 512

struct state;
struct sjob;
struct snode;
struct svalid;

/* ---- what the state machine holds ---------------------------------------------- */

/* A job as the server holds it. */
struct sjob {
	struct job job;
	struct sched_job sj; /* the scheduler's view, kept in step with job.req */
	int cls;	     /* index into state->classes */
	struct squeue *queue;
	struct sjob *pend_prev, *pend_next; /* in its class's pending list, in order */
	bool pending;
	int64_t req_bytes; /* about what its request weighs (the per-user cap) */
	bool dirty;
	struct sjob *dirty_next;
	uint64_t written_seq; /* the write that last took it (history.c) */
	uint64_t reason_pass; /* the pass that wrote job.reason while pending */
	int64_t reason_from;  /* that pass said: as job reason_from (0: its own) */
	/* when pass start_pass expects it to start (a class's first waiting
	 * job, its reservation's time, from the running jobs' limits) */
	int64_t start_ms;
	uint64_t start_pass;
	int node_losses;      /* requeues spent on lost nodes */
	int preemptions;      /* times preempted */
	int64_t held_for;     /* its stopping attempt was preempted for this job */
	int held_attempt;     /* ... that attempt's number */
	int64_t last_ckpt_ms; /* newest checkpoint its current attempt wrote */
	struct svalid *valid; /* a system job: the validation run it is */
	/* monotonic: tasks of its last attempt may run until then on node
	 * fenced_node, whose new agent did not find them (their shim's lease
	 * ends by then); it starts no new attempt before. 0: none */
	int64_t fenced_until;
	char fenced_node[MODEL_NAME_MAX];
	/* a task of its multi-node attempt failed (fail_ev): judged once every
	 * node of the attempt has been heard since (fail_seen: each one's
	 * last_seen_ms then), or a node timeout after the first check
	 * (fail_check_mono), for a peer that died makes the others fail first
	 * and is then a lost node, not the job's own failure. NULL: none */
	struct task_event *fail_ev;
	int64_t *fail_seen;
	int64_t fail_check_mono;
	/* --ckpt-signal: the failing attempt's other tasks were signalled and
	 * go on until then (monotonic) for a checkpoint, or until one commits
	 * (jit_done); 0: no such wait */
	int64_t jit_until;
	bool jit_done;
	/* the first element of an array: how many of its elements are
	 * STARTING or RUNNING, and how many pass array_mark gave the
	 * scheduler besides (so a pass never starts more than its cap) */
	int array_active;
	uint64_t array_mark;
	int array_admitted;
	/* least attained service, as the last pass saw it: its level and the
	 * accelerator-seconds that put it there */
	int las_level;
	double las_service;
	/* ... and its Gittins index in its level, per accelerator-second, where
	 * its class orders by it and its kind's history is enough */
	bool las_indexed;
	double las_index;
	/* its running attempt's training lines, for finding it stalled
	 * (stall.c); NULL: none came */
	struct sstall *stall;
	/* it restarts in place (inplace.c); NULL: not */
	struct inplace *inplace;
	/* the nodes held idle for it (--spares; inplace.c): each one's share,
	 * as one of its attempt's nodes has */
	struct attempt_node *spares;
	int nspares;
	int64_t spares_since; /* charged to its newest attempt up to then */
	/* each spare's borrower: a preemptible job that runs on it until the
	 * spare is claimed (inplace.c); 0: none. Parallel to spares */
	int64_t *spares_lent;
	/* a borrower's: whose spare it runs on, where; 0: none (or the
	 * cluster's pool's, borrowed_pool) */
	int64_t borrowed_from;
	bool borrowed_pool;
	char borrowed_node[MODEL_NAME_MAX];
};

/* ---- inplace.c: restarts in place ---------------------------------------------------- */

/* A gang restarting in place after attempt `from`: for each of that
 * attempt's nodes (by node rank), whether it is to be replaced (its task
 * failed for the node's fault, or the node was lost) and whether its share
 * is held for the job (its tasks there ended; the share stays used). */
struct inplace {
	int from;
	int nnodes;
	bool *bad;
	bool *held;
	int grow;		    /* an elastic gang's: nodes to take beside these, where free */
	char why[MODEL_REASON_MAX]; /* what it waits for, for its reason */
};

/* ---- windows.c: windows in which nodes are kept (tenk reserve) ------------------------ */

/* One window as the nodes that carry it say (state_windows_collect). */
struct swindow {
	struct node_window w;
	int bit; /* its users' or queue's jobs' (sched_window.bit); -1: maintenance */
	int nnodes;
	int *nodes; /* indices into state->nodes */
	size_t alloc;
};

/* Gathers the windows the node records carry into state->wins, soonest
 * first, with bits for those for users or a queue. */
void state_windows_collect(struct state *s);
/* The windows (bits, as of the last collect) whose nodes are j's own. */
uint32_t state_windows_of_job(const struct state *s, const struct sjob *j);
/* The windows as the pass takes them (borrowing state->wins); the
 * caller frees the array. */
struct sched_window *state_windows_sched(const struct state *s);
/* Does w keep j off its nodes now (sched_window_in_way)? */
bool state_window_in_way(const struct state *s, const struct swindow *w, const struct sjob *j,
			 int64_t now);
json_t *state_window_pack(struct state *s, const struct swindow *w, int64_t now);
json_t *state_windows_pack(struct state *s, int64_t now);
const struct swindow *state_window(struct state *s, const char *name);
/* Puts w on nodes[0..n): 0, or -EEXIST (its name is taken), -ENOSPC (too
 * many), -EBUSY (it overlaps another on a node), with why. */
int state_window_add(struct state *s, const struct node_window *w, struct snode **nodes, int n,
		     struct strbuf *why);
/* Takes the window of that name off every node (and the drains it made);
 * how many nodes carried it. */
int state_window_delete(struct state *s, const char *name, int64_t now);
/* Windows that ended leave; maintenance drains at a start, resumes at
 * an end. */
void state_windows_tick(struct state *s, int64_t now);

/* A queue's limits beyond accelerators as the pass takes them (ret holds
 * qs->ndims; names borrowed). */
void state_queue_dims(const struct queue_spec *qs, struct sched_qdim *ret);
/* The catalogue's weights, for queues' units (copied). */
void state_set_weights(struct state *s, const struct catalogue *c);
/* One accelerator's weight, by its model's name (1: not in the catalogue). */
double state_model_weight(const struct state *s, const char *model);

/* ---- lemon.c: nodes that keep failing -------------------------------------------------- */

/* Something happened to node n (for job's attempt; job 0: none): kept in
 * its history; a failure of its own may drain it by the lemon rule. */
void state_node_event(struct state *s, struct snode *n, enum node_event_kind kind, int64_t job,
		      int attempt, const char *detail, int64_t now);

/* ---- stall.c: jobs whose training lines stopped ---------------------------------------- */

struct sstall;
/* A training line of j's attempt a came (the heartbeat that carried it). */
void state_stall_line(struct state *s, struct sjob *j, const struct attempt *a,
		      const struct train_point *p);
/* From the cron: finds running attempts stalled, and does their on_stall. */
void state_check_stalls(struct state *s, int64_t now);
/* "stalled" of j's record: the evidence, while it is; NULL: it is not. */
json_t *state_stall_pack(const struct sjob *j);
/* "straggler" of j's record: the rank named, its node, its time a step and
 * the gang's median; NULL: none. */
json_t *state_straggler_pack(const struct sjob *j);
/* The straggler of j's running attempt: its rank and node; false: none. */
bool state_job_straggler(const struct sjob *j, int *rank, const char **node);
/* Whether j's running attempt is stalled; whether it writes training lines. */
bool state_job_stalled(const struct sjob *j);
bool state_job_trains(const struct sjob *j);
void state_stall_forget(struct sjob *j);

/* A settled job out of memory (history.c): its row in the store holds it
 * whole; this is what lists, dependencies, counts and accounting windows
 * ask of it without reading it. */
struct sgone {
	uint32_t owner;	    /* index into state->owners */
	uint32_t settled_s; /* when it settled, epoch seconds */
	uint8_t state;	    /* its final job_state + 1; 0: not a job out of memory */
	/* retention took its document (keep_jobs): only its accounting
	 * records are left, and it is no longer shown */
	uint8_t removed;
};

/* A waiting job as the pass takes it from its class (state.c). plain: no
 * hold-back can apply to it but its queue's budget (not held, no begin
 * time, dependency, array cap, earlier attempt or levels of least attained
 * service; a request the scheduler takes), so the pass gives it on without
 * reading the job; the others are judged each pass. */
struct pend_entry {
	struct sjob *job;
	/* what the pass reads of every waiting job (its sched_key), kept here
	 * so that a plain job goes to it unread */
	int64_t submit_ms;
	uint32_t id;
	int32_t shape_id;
	uint32_t time_limit_s; /* the job's, at most UINT32_MAX */
	uint16_t queue;
	uint8_t plain;
};

/* A settled job's write, in the order written (history.c). */
struct settled_entry {
	int64_t id;
	uint64_t seq;
	int64_t mono;
};

/* Why the jobs of the last applied pass wait, without writing to a million
 * jobs: for each job given to the pass, in its order, its id and the job
 * whose reason it shares (WAIT_OWN: the reason is its own, written to it;
 * 0: it started). Each class's jobs lie together, by id, in [cls_from[c],
 * cls_to[c]) (classes ordered by least attained service, whose jobs the
 * pass reorders, have their reasons written to them instead: empty). */
#define WAIT_OWN UINT32_MAX
struct pass_waits {
	uint64_t mark; /* the pass (0: none yet) */
	uint32_t *ids, *from;
	int n;
	size_t alloc;
	int cls_from[MODEL_MAX_CLASSES], cls_to[MODEL_MAX_CLASSES];
};

/* A priority class, with the jobs of it that wait. */
struct sclass {
	struct class_spec spec;
	struct sjob *pend_head, *pend_tail;
	int npending;
	/* the same jobs kept for the pass, in order (state.c): a job that left
	 * is a hole (job NULL) until the next pass closes it */
	struct pend_entry *order;
	size_t norder, order_alloc;
};

/* Someone with a token. */
struct suser {
	struct user_record rec;
	bool dirty;
	bool deleted; /* to be removed from the store, then freed */
	struct suser *dirty_next;
};

/* A queue with what it uses now. */
struct squeue {
	struct queue_spec spec;
	int index;	   /* in state->queues; queues are never removed */
	int64_t use_milli; /* accelerators held by its running attempts */
	double use_units;  /* ... in weighted milli units (catalogue_weight) */
	int npending;
	int nrunning;
	bool dirty;
	struct squeue *dirty_next;
	int64_t written_ms; /* when its usage was last stored */
	/* its budget (acct.c): spent in the period so far; its new jobs wait
	 * once it is all spent */
	double spent;
	bool budget_spent;
	/* what its jobs out of memory spent in the period that began at
	 * gone_from (0: not yet summed) */
	double spent_gone;
	int64_t gone_from;
};

/* What the heartbeats say of a node. */
/* UNREACHABLE: silent for the node timeout, but its witness group is not
 * enough in touch for the server to know it fences itself (fence.h): its
 * jobs are held, nothing of it moves, until it or its group is back or an
 * operator says it is down. */
enum node_live {
	NODE_LIVE_UNKNOWN,
	NODE_LIVE_UP,
	NODE_LIVE_DOWN,
	NODE_LIVE_UNREACHABLE,
	NODE_LIVE_MAX
};

/* One node's part of a running attempt. */
struct part {
	struct sjob *job;
	int attempt;	/* number */
	int node_index; /* in the attempt's node list (the node rank) */
	uint64_t gen_added;
};

struct snode {
	struct node_record rec;
	int index; /* in state->nodes */
	enum node_live live;
	int64_t last_seen_ms; /* monotonic */
	/* fencing (fence.h): what the server knows of its hearing, and its
	 * witness group (an index into state->groups) */
	struct fence_member fence;
	int group;
	int witness_port;     /* its agent's witness endpoint, as its last beat said (0: none) */
	uint64_t witness_seq; /* the newest beat of its agent whose witness part was taken */
	bool dirty;
	struct snode *dirty_next;
	/* what is allocated */
	int cpus_used;
	int64_t mem_used;
	int dev_used[MODEL_MAX_ACCELS]; /* milli */
	struct sched_dev sdev[MODEL_MAX_ACCELS];
	uint8_t ports[STATE_PORT_COUNT / 8];
	/* parts of attempts that hold resources here */
	struct part *parts;
	int nparts;
	size_t parts_alloc;
	/* work for the agent */
	uint64_t work_gen;
	bool wake_queued; /* STATE_EV_WORK_CHANGED is due at the next flush */
	struct snode *wake_next;
	struct svalid *held_by; /* a validation run holds it: no other work starts */
	uint32_t stack_gen;	/* counts the changes of its software stack */
	bool pool_spare;	/* held idle in the cluster's spare pool (inplace.c) */
	int64_t pool_lent_to;	/* that spare's borrower (a preemptible job); 0: none */
	/* power fencing (nodes.c): the command runs; when it may run again
	 * after one failed (monotonic) */
	bool power_fencing;
	int64_t power_silent_ms; /* its silence when the command began */
	int64_t power_retry_mono;
	/* its labels: its agent's, with an operator's over them */
	char labels[MODEL_LABELS_MAX];
	uint64_t pools; /* the pools its labels put it in (sched_config_pool_node) */
	/* the faults its last beat reported (digests of their texts; the
	 * first's text; when), and those an operator resumed it despite (it
	 * is not drained again for them while they last) */
	uint64_t faults_now[WIRE_MAX_FAULTS];
	int nfaults_now;
	int64_t faults_at; /* monotonic */
	char fault_first[WIRE_FAULT_MAX];
	uint64_t waived[WIRE_MAX_FAULTS];
	int nwaived;
	bool agent_stopping; /* its agent said it stops: no new work until one registers */
	/* its Podman store as its agent last said (tenk images), once it has;
	 * the pulls asked of it (tenk images pull), with how each went */
	bool images_known;
	int nimages;
	struct wire_image *images;
	int npulls;
	struct wire_pull *pulls;
	/* its accelerators as its agent's newest beat read them (none: no
	 * NVML there, or an agent that does not say), and when it came (the
	 * monotonic and the wall clock) */
	int ngpus;
	struct wire_gpu *gpus;
	int64_t gpus_mono, gpus_ms;
};

/* What one owner's waiting jobs number and weigh (the per-user caps). */
struct owner_pending {
	char owner[MODEL_NAME_MAX]; /* the map's key */
	int64_t jobs;
	int64_t bytes;
};

/* A validation run (tenk validate --nodes): one system job with a task on
 * each of its nodes. The nodes take no new work from the moment it is asked
 * for; preemptible jobs on them are stopped, others are waited for; when all
 * are empty the server starts the job there itself, on every device. */
struct svalid {
	struct sjob *job;
	int nnodes;
	struct snode **nodes;
	bool *reported;
	/* reports of nodes whose steps with the others failed: applied when the
	 * run ends with every node heard from, dropped when one was lost (the
	 * lost one is the cause, and fails with "no report") */
	json_t **held;
	/* each node's stack_gen when the run started: a node whose stack
	 * changed since gets no verdict from it, and another run */
	uint32_t *stack_gen;
	bool preempted; /* preemptible jobs on its nodes were told to stop */
	/* the run proves its image, not its nodes (a rollout's): a node that
	 * fails it is not drained for it, and its history does not count it
	 * (the lemon rule) */
	bool image_on_trial;
	struct svalid *prev, *next;
};

/* ---- events: what the state machine tells the shell ------------------------------ */

enum state_event_kind {
	STATE_EV_JOB_ENDED,    /* job reached a final state: its waits can be answered */
	STATE_EV_WORK_CHANGED, /* node's work changed: its agent's long-polls can be answered */
	STATE_EV_POWER_FENCE,  /* node is to be powered off (power_fence): run the command */
	STATE_EV_MAX
};

struct state_event {
	enum state_event_kind kind;
	struct sjob *job;   /* JOB_ENDED */
	struct snode *node; /* WORK_CHANGED, POWER_FENCE */
};

/* Called on the caller's thread, from inside the state machine; it must not
 * change the state (it may read it, and pack it). */
typedef void (*state_event_cb)(void *arg, const struct state_event *ev);
#define STATE_MAX_JOB_ID (1LL << 26) /* jobs are indexed by id */

/* Reads the stored document of job id, out of memory: *ret_doc (the
 * caller frees it) of *ret_len bytes, or < 0 with err (-ENOENT: none). The
 * shell hands the state one (its store), as it hands it the events'. */
typedef int (*state_read_cb)(void *arg, int64_t id, char **ret_doc, size_t *ret_len,
			     struct tk_error *err);

struct state_config {
	int64_t node_timeout_ms; /* an agent silent this long is DOWN */
	int max_node_requeues;	 /* requeues of a job for lost nodes */
	int64_t keep_settled_ms; /* how long a settled job stays held */
	int master_port_first;	 /* MASTER_PORTs: STATE_PORT_COUNT from here (0: the default) */
	const char *epoch;	 /* borrowed: differs on every server start */
	const char *secret;	 /* borrowed: what validation runs' tokens derive from */
};

/* A witness group (fence.h): nodes next to each other by topology. */
struct sgroup {
	int first, n;		      /* its nodes: group_nodes[first .. first + n) */
	char id[WIRE_GROUP_ID_MAX];   /* of its members' names (wire.h) */
	char key[WIRE_GROUP_KEY_MAX]; /* derived from cfg.secret and id */
	bool news;		      /* nodes of it became UNREACHABLE: say so */
};

struct state {
	struct state_config cfg;
	/* fencing across outages (fence.h; nodes.c): the decisions' figures,
	 * and the nodes' witness groups (recomputed when nodes joined) */
	struct fence_params fence;
	struct sgroup *groups;
	int ngroups;
	int *group_nodes;
	bool groups_stale;
	state_event_cb event_cb;
	void *event_arg;

	/* jobs by id: jobs[id - 1]; ids are dense and never reused. A settled
	 * job may be out of memory: jobs[id - 1] NULL, gone[id - 1] says what
	 * it is (history.c) */
	struct sjob **jobs;
	size_t njobs;
	size_t jobs_alloc;
	int npending;
	struct sgone *gone;
	int64_t ngone, gone_by_state[JOB_STATE_MAX];
	char **owners; /* the owners of jobs out of memory, interned */
	int nowners;
	size_t owners_alloc;
	struct tk_map owner_index;
	/* reads a job out of memory back (the shell's store; NULL: none) */
	state_read_cb read;
	void *read_arg;
	struct tk_error read_err; /* why the last read back failed */
	struct settled_entry *settled;
	size_t settled_head, nsettled, settled_alloc;
	/* the clocks as of the server's last look (epoch ms, monotonic ms) */
	int64_t now_ms, mono_ms;

	/* scheduling configuration; classes in class_order are by priority, highest first */
	struct sched_config sched;
	struct sclass classes[MODEL_MAX_CLASSES];
	int class_order[MODEL_MAX_CLASSES];
	struct squeue **queues;
	int nqueues;
	size_t queues_alloc;
	struct tk_map queue_by_name;

	/* users: by name, and by the SHA-256 of their token */
	struct tk_map user_by_name;
	struct tk_map user_by_hash;

	/* nodes */
	struct snode **nodes;
	int nnodes;
	size_t nodes_alloc;
	struct tk_map node_by_name;
	struct tk_map node_by_cred;	/* a node's credential's SHA-256 -> struct snode */
	struct tk_map pending_by_owner; /* owner -> struct owner_pending: what waits */

	/* what changed and is not yet written (server.c writes it) */
	struct sjob *dirty_jobs;
	size_t ndirty_jobs;
	struct snode *dirty_nodes;
	struct squeue *dirty_queues;
	struct suser *dirty_users;
	uint64_t seq_applied; /* advances with every change */

	struct snode *wake_nodes; /* whose work changed since the last flush */
	/* the services' table every node's work answer carries (services_on:
	 * since one was set), and whether a replica's readiness changed since
	 * the server last made it (services.c) */
	bool services_on, services_dirty;
	/* a service waits for its newest replica's place to make the next:
	 * the controller runs again after the pass */
	bool services_more;
	int nservices;
	struct wire_service *services;
	struct sjob **fenced; /* jobs whose fenced_until is set */
	int nfenced;
	size_t fenced_alloc;
	struct sjob **restarting; /* jobs whose inplace is set */
	int nrestarting;
	size_t restarting_alloc;
	struct sjob **spared; /* running jobs that asked for spares */
	int nspared;
	size_t spared_alloc;
	struct sjob **failing; /* jobs whose fail_ev is set */
	int nfailing;
	size_t failing_alloc;
	struct svalid *valids; /* validation runs not yet ended */

	/* scheduling */
	bool sched_needed;
	/* jobs submitted while nothing else asked for a pass: one runs at once
	 * if one of them might start (or preempt); otherwise the pass is
	 * deferred, to run within STATE_DEFER_MS of the last (their reasons) */
	int64_t *arrived;
	size_t narrived, arrived_alloc;
	bool pass_deferred;
	int64_t last_pass_ms;
	struct {
		uint64_t deferred; /* submissions judged unable to start at once */
	} arrivals;
	/* a pass is due then (a job's begin time, a promotion, a running job
	 * reaching its next level of least attained service); 0: none */
	int64_t wake_ms;
	/* the classes as the scheduler sees them: the levels of "las" classes
	 * expanded (sched_classes_of_config); per configured class, its levels
	 * and the scheduler's class of its first */
	struct sched_class pass_classes[MODEL_MAX_CLASSES];
	int npass_classes;
	struct sched_las las[MODEL_MAX_CLASSES];
	int las_first[MODEL_MAX_CLASSES];
	/* the service finished jobs of its classes received, by class and
	 * queue (snapshot.c): the jobs that end, the ended ones loaded and the
	 * accounting records of the newest settled ones (acct.c) */
	struct sched_las_history *las_hist;
	uint64_t pass_no;
	struct sched_cluster *sched_cluster; /* kept while the nodes stay the same */
	/* whether a request could ever start, by its shape (state_request_possible),
	 * kept while no node joins or changes: a direct-mapped cache */
	struct {
		uint64_t shape;
		bool used, ok;
	} possible[256];
	uint64_t nodes_gen, possible_gen;
	/* the windows of the node records, as of the last collect (windows.c) */
	struct swindow *wins;
	int nwins, wins_made; /* entries in use, entries with their arrays */
	size_t wins_alloc;
	uint32_t win_bits; /* the bits in use */
	/* the models' weights (state_set_weights), for units */
	struct sched_model_weight *weights;
	char (*weight_names)[MODEL_NAME_MAX];
	int nweights;
	struct pass_waits waits; /* why the last pass's jobs wait (snapshot.c) */
	int resource_waits; /* of them, how many wait for accelerators (no elastic growth then) */
	struct sched_shapes *sched_shapes; /* the waiting jobs' requests, filed */
	struct sched_keep *sched_keep;	   /* the passes' large arrays, kept */
	struct {
		uint64_t passes, placements;
		uint64_t limited; /* passes that stopped at max_starts_per_pass */
		/* the last pass's parts, microseconds: building the snapshot,
		 * deciding, applying the decisions */
		int64_t snapshot_us, decide_us, apply_us;
	} stats;
};

/* ---- state.c: life, durability, events, the job state gate ------------------------ */

/* An empty state with the scheduling configuration sched (copied) and the
 * default queue; release it with state_release. */
void state_init(struct state *s, const struct state_config *cfg, const struct sched_config *sched,
		state_event_cb cb, void *cb_arg);
/* Whether the state can take the scheduling configuration next: -EBUSY
 * with why where a class it lacks holds jobs not ended. */
int state_config_check(const struct state *s, const struct sched_config *next, struct strbuf *why);
/* Takes next (checked) as the scheduling configuration, while jobs wait
 * and run: each job's class, pools and domains found again, the waiting
 * ones back in their classes in the same order, each node's pools, a pass
 * wanted. True where the classes are others than before: the service of
 * finished jobs by class (the Gittins index's history) is learnt again
 * from the ended jobs in memory, and the caller adds those out of it. */
bool state_config_swap(struct state *s, const struct sched_config *next, int64_t now);
/* How jobs out of memory are read back (none until it is set). */
void state_set_reader(struct state *s, state_read_cb read, void *arg);
void state_release(struct state *s);
/* Marks a job, node, queue or user changed: it goes in the next batch. */
void state_job_dirty(struct state *s, struct sjob *j);
/* What an attempt's tasks on node n wrote to $TENK_METRICS: kept with the
 * attempt, if it is the job's current one and runs on n. */
void state_train_metrics(struct state *s, struct snode *n, const struct wire_train *t);
/* What NCCL's log of an attempt's tasks on node n says (--nccl-check):
 * kept on the attempt's node; connections between nodes over sockets on a
 * node with an ACTIVE RDMA port are its fallback, said once in the log. */
void state_nccl_seen(struct state *s, struct snode *n, const struct wire_nccl *w);
void state_node_dirty(struct state *s, struct snode *n);
void state_queue_dirty(struct state *s, struct squeue *q);
void state_user_dirty(struct state *s, struct suser *u);
/* Asks for a scheduling pass before the next flush. */
void state_want_pass(struct state *s);
/* A job was submitted: a pass before the next flush if it might start now,
 * within STATE_DEFER_MS otherwise (state_judge_arrivals decides). */
void state_job_arrived(struct state *s, struct sjob *j);
#define STATE_DEFER_MS 1000
void state_raise(struct state *s, const struct state_event *ev);

/*
 * The one gate of every job state change (the diagram is in model.h):
 *
 *   from \ to  PENDING  STARTING  RUNNING  COMPLETED FAILED CANCELLED TIMEOUT
 *   PENDING       -      start       -         -      sys      yes       -
 *   STARTING    requeue    -      all up      exit    exit     yes      exit
 *   RUNNING     requeue    -         -        exit    exit     yes      exit
 *   final          -       -         -         -       -        -        -
 *
 * (sys: a validation run whose node went down before it started.) It moves
 * the job in and out of its class's pending list, tells the nodes of an
 * attempt that stops being current, stamps a final state's end and raises
 * STATE_EV_JOB_ENDED, records reason (NULL: kept), and checks the job's
 * invariants (assert_job_state) after every change. Returns 0, or -EINVAL
 * for a change the table does not allow, with nothing changed.
 */
int state_job_set_state(struct state *s, struct sjob *j, enum job_state to, const char *reason,
			int64_t now);
bool state_job_transition_allowed(enum job_state from, enum job_state to);
/* Puts a waiting job in its class's pending list, in id order (a requeued
 * job keeps its place), and files its request for the scheduler: for a new
 * job and one loaded PENDING, which enter waiting without a change. */
void state_job_enqueue(struct state *s, struct sjob *j);
/* Judges again whether a waiting job is plain (struct pend_entry): after a
 * change of what holds it back outside its request (held). */
void state_job_refile(struct state *s, struct sjob *j);
/* The job's invariants against its state; aborts when one does not hold. */
void assert_job_state(const struct sjob *j);

/* ---- jobs.c ------------------------------------------------------------------------- */

struct sjob *state_job(struct state *s, int64_t id);
/* Finds a job's class and queue and makes its scheduler's view. */
void state_job_attach(struct state *s, struct sjob *j, int64_t now);
/* The scheduler's view of a request's shape (jobs.c); id, class, queue and
 * submission left to the caller. */
void state_request_sched(const struct sched_config *c, const struct job_request *r,
			 struct sched_job *sj);
/* Could any set of the nodes that exist (down or drained ones too: they
 * may come back) ever hold a job of request r? Yes with no node at all (a
 * cluster being brought up). No: why, in why, as a waiting job's reason
 * says what it needs (snapshot.c). */
bool state_request_possible(struct state *s, const struct job_request *r, struct strbuf *why);
/* Takes ownership of req (its class and queue already checked); returns the
 * new job, PENDING, held (tenk submit --hold) or not. */
struct sjob *state_submit(struct state *s, struct job_request *req, const char *owner,
			  const char *run_as, bool held, int64_t now);
/* Element id of an array whose first element is (or will be) job first. */
struct sjob *state_submit_array(struct state *s, struct job_request *req, const char *owner,
				const char *run_as, bool held, int64_t now, int64_t id,
				int64_t first, int index, int cap, int count);
/* A system job (no place in the scheduler's queue), owned by `owner`. */
struct sjob *state_submit_system(struct state *s, struct job_request *req, const char *owner,
				 int64_t now);
int state_cancel(struct state *s, struct sjob *j, int64_t now, struct tk_error *err);
/* Ends a job in a final state with exit_code. */
void state_job_finish(struct state *s, struct sjob *j, enum job_state st, int exit_code,
		      const char *reason, int64_t now);
/* An agent says a task started or exited. Unknown or stale ones are ignored. */
void state_task_started(struct state *s, const struct task_event *ev, int64_t now);
void state_task_exited(struct state *s, const struct task_event *ev, int64_t now);
/* An image job's node pulls its image, or has it (model/wire.h): the job
 * says so while it waits; once every node has it, at one digest, its tasks
 * start there, and at different ones the job fails, naming them. */
void state_task_image(struct state *s, const struct task_event *ev, int64_t now);
/* Judges the failures waiting to hear every node of their attempt (from the
 * cron, after the nodes' liveness). */
void state_check_failures(struct state *s, int64_t now, int64_t mono);
/* A failure to judge: the task of rank `rank` of j's current attempt ended
 * as ev says (load.c restores them so after a restart). */
void state_failure_wait(struct state *s, struct sjob *j, const struct task_event *ev);
/* Whether j's failing attempt still runs for a just-in-time checkpoint
 * (--ckpt-signal): its nodes keep it, signalled, and a tag of it commits
 * on the parts that came. */
bool state_jit_waits(const struct state *s, const struct sjob *j);
/* ckpt.c: a node's part of a checkpoint uploaded (committed once every
 * node's is); a node's restore done or failed; the restore a new attempt
 * starts with (the newest committed tag, where the cluster has a store) */
void state_task_checkpoint(struct state *s, const struct task_event *ev, int64_t now);
void state_task_restored(struct state *s, const struct task_event *ev, int64_t now);
/* A replica's probe passed (TASK_EVENT_READY: in rotation) or failed
 * (UNREADY: out of it). Unknown or stale ones are ignored. */
void state_task_ready(struct state *s, const struct task_event *ev, int64_t now);
void state_restore_plan(struct state *s, struct sjob *j, struct attempt *a);
/* What restoring j would cost its next attempt: as long as its last
 * restore took (0: none yet). */
int64_t state_job_restore_ms(const struct sjob *j);
/* The accelerator-seconds j's attempts received, every one (the running
 * one to now). */
double state_job_received_gpu_s(const struct sjob *j, int64_t now);
/* The number a queue's name is known by in s->las_hist. */
uint32_t state_las_queue_key(const char *queue);
/* An ended job's service into s->las_hist, where its class orders by the
 * Gittins index. */
void state_las_history_note(struct state *s, const struct sjob *j, int64_t now);
/* When the work that attempt a's newest committed checkpoint holds was
 * saved (its commit less its upload), 0: a committed none; what a
 * restart would resume from, for the loss a preemption weighs. */
int64_t state_attempt_commit_ms(const struct sjob *j, const struct attempt *a);
/* A heartbeat's images and pulls (has_images): what node n holds now. */
void state_node_images(struct state *s, struct snode *n, struct wire_heartbeat *m);
/* The software stack n's agent reports (at a beat): a change from the one
 * it reported before is in n's history and drops its validation. */
void state_node_stack(struct state *s, struct snode *n, const struct node_stack *st, int64_t now);
/* The peak FLOP/s (dense bf16, the catalogue's) of the accelerators
 * attempt a holds, in their shares; 0: none, or nodes no longer known. */
double state_attempt_peak_flops(struct state *s, const struct attempt *a);
/* A job's model FLOPs utilisation now (its newest attempt's lines over
 * that peak), with both; false where its lines do not say. */
bool state_job_mfu(struct state *s, const struct sjob *j, double *ratio, double *achieved,
		   double *peak);
/* ... as {"ratio", "achieved_tflops", "peak_tflops"}; NULL where not said. */
json_t *state_mfu_pack(struct state *s, const struct sjob *j);
/* What a beat said of the node's accelerators. */
void state_node_gpus(struct state *s, struct snode *n, const struct wire_heartbeat *m, int64_t now);
/* What the node's device index dev read at its newest beat, where that is
 * fresh (a few beats old at most); NULL: not known. */
const struct wire_gpu *state_node_gpu(const struct state *s, const struct snode *n, int dev);
/* Asks node n to pull ref (again). */
void state_node_pull(struct state *s, struct snode *n, const char *ref);
/* `tenk images`: node n's images and pulls. */
json_t *state_node_images_pack(const struct snode *n);
/* Attempt node an: node n's share as (a pass's or a restart's). */
void state_attempt_node_set(struct attempt_node *an, const struct snode *n,
			    const struct sched_assign *as);
/* An elastic gang grows: its attempt ends (resized), and it starts again
 * in place on its nodes and up to grow free ones (inplace.c). */
void state_job_resize(struct state *s, struct sjob *j, int grow, int64_t now);
/* Lends idle spares (jobs' and the cluster's pool's) to preemptible jobs
 * that wait for accelerators (waiting: the last pass's, in its order): each
 * runs on a spare's devices until a restart in place needs it (inplace.c). */
void state_spares_lend(struct state *s, struct sjob *const *waiting, int nwaiting, int64_t now);
/* Borrower j's part on node n is gone: the spare is its owner's (or the
 * pool's) again. */
void state_spare_returned(struct state *s, struct snode *n, struct sjob *j, int64_t now);
/* Elastic gangs (inplace.c): j's attempt, just started by a pass, takes
 * free nodes up to its request's nodes_max where no job waits for them. */
void state_elastic_started(struct state *s, struct sjob *j, int64_t now);
/* A checkpoint of j's attempt a committed: an elastic gang short of its
 * nodes_max grows where nodes are free and no job waits for them. */
void state_elastic_commit(struct state *s, struct sjob *j, const struct attempt *a, int64_t now);
/* Starts attempt st of j on nodes (what a pass or a validation run
 * decided, or a restart in place): on the first nn of st's nodes, the
 * rest its spares (-1: as many as the request's nodes, where the pass
 * placed its spares after them). */
void state_apply_start(struct state *s, struct sjob *j, const struct sched_start *st, int nn,
		       struct snode *const *nodes, int64_t now);
/* Sends borrower b back to its queue: the spare it runs on is claimed. */
void state_preempt_for_spare(struct state *s, struct sjob *b, const char *reason, int64_t now);
/* Sends a running job back to its queue for `for_job`. */
void state_preempt(struct state *s, struct sjob *victim, struct sjob *for_job, int64_t now);
/* Is a the attempt its job runs now? */
bool state_attempt_is_current(const struct sjob *j, const struct attempt *a);
bool state_task_done(const struct task_status *t);
/* The current attempt a of j ended with node `node` (lost, or its agent
 * gone) at about fail_ms (its last word; 0: now): requeued while it has
 * node requeues left, else failed. */
void state_job_lost(struct state *s, struct sjob *j, struct attempt *a, const char *node,
		    const char *why, int64_t fail_ms, int64_t now);
/* Sends an active job back to the queue for another attempt. */
void state_job_requeue(struct state *s, struct sjob *j, const char *reason, int64_t now);
/* Finds the class and queue a job names and fills its scheduler's view. */
struct sjob *state_job_add(struct state *s, struct job *job, int64_t now);
/* Frees an attempt's part on the node of node_index once all its tasks
 * there are done, and ends the attempt once all its tasks are. */
void state_attempt_settle(struct state *s, struct sjob *j, struct attempt *a, int node_index,
			  int64_t at_ms);

/* ---- nodes.c ------------------------------------------------------------------------ */

struct snode *state_node(struct state *s, const char *name);
/* Registers (or re-registers) a node from its agent's report. A new agent
 * process on a known node keeps the attempts it names in kept (their shims
 * outlived the last one); the node's other attempts are lost. */
struct snode *state_register(struct state *s, const struct node_inventory *inv,
			     const char *agent_id, const struct wire_attempt_ref *kept, int nkept,
			     int64_t now, int64_t mono);
/* Drains n for source, with reason for people. */
void state_drain(struct state *s, struct snode *n, enum drain_source source, const char *reason);
/* Its agent reports a fault (a full disk, ECC errors): the node is drained
 * for it (the fault as the reason) and its jobs are requeued at once. A node
 * drained for a fault already takes the next ones as known. */
void state_node_fault(struct state *s, struct snode *n, const char *fault, int64_t now);
/* n reported fault outside its heartbeat (an attempt's end that says so):
 * as state_node_fault unless the operator waived it. */
void state_node_fault_reported(struct state *s, struct snode *n, const char *fault, int64_t now);
/* The faults of n's beat (every beat says all it has): each drains it, but
 * one an operator resumed it despite (state_resume with force). */
void state_node_faults(struct state *s, struct snode *n, const char (*faults)[WIRE_FAULT_MAX],
		       int nfaults, int64_t now, int64_t mono);
/* How many of the faults n's last beat reported still drain it (not
 * waived); the first's text in *first (may be NULL). */
int state_node_faults_unwaived(const struct snode *n, const char **first);
void state_resume(struct state *s, struct snode *n);
/* To o, j packed (state_job_pack) and waiting in a class ordered by least
 * attained service: the running job of a later level that the class's
 * "las_max_loss_s" spares and j waits behind ("las": {"behind": ...}); a
 * walk over the running parts, for one job's page only. */
void state_job_las_behind(struct state *s, struct sjob *j, json_t *o);
/* An operator takes n back despite the faults it reports now: they no
 * longer drain it while it reports them (a new fault does). */
void state_waive_faults(struct snode *n);
/* n's labels again from its agent's and an operator's (after either changed). */
void state_node_labels_sync(struct state *s, struct snode *n);
/* The node's agent was heard from: it is alive (UP). */
void state_node_seen(struct state *s, struct snode *n, int64_t mono);
/* A heartbeat of n acknowledged the answer the server sent at acked_ms
 * (its own monotonic time, this run's): fence.h's proof it hears. */
void state_node_acked(struct state *s, struct snode *n, int64_t acked_ms, int64_t mono);
/* The witness groups, again (nodes.c; after nodes joined). */
void state_groups_assign(struct state *s);
/* A heartbeat m of node n said its witness endpoint's port and the group
 * it holds (id and tag; "": none). Returns the group to send it in the
 * answer, filled into *ret, when what it holds is not its group now and
 * may_send (the answer waits for the store); else NULL. */
const struct wire_group *state_node_witness(struct state *s, struct snode *n,
					    const struct wire_heartbeat *m, bool may_send,
					    struct wire_group *ret);
/* Marks a node DOWN and ends the parts of attempts it held. */
void state_node_lost(struct state *s, struct snode *n, const char *why, int64_t now);
/* Holds j back from a new attempt until mono time `until`: tasks of its
 * last one may still run on node `node` until then. */
void state_job_fence(struct state *s, struct sjob *j, const char *node, int64_t until);
/* Marks DOWN every node not heard from for the node timeout, and lets
 * fenced jobs start again once their fence is over (mono). */
void state_check_nodes(struct state *s, int64_t now, int64_t mono);
/* The power_fence command for node `name` ended: ok (it exited 0) says the
 * node is off, so its work moves now, its lease not waited for; else
 * detail says why, and it is tried again after a minute while the node is
 * still silent. */
void state_node_powered_off(struct state *s, const char *name, bool ok, const char *detail,
			    int64_t now, int64_t mono);
/* The node's state as the API shows it (model.h draws the diagram). */
enum node_state state_node_state(const struct state *s, const struct snode *n);
/* Raises STATE_EV_WORK_CHANGED for every node whose work changed. */
void state_flush_work(struct state *s);
/* Takes and gives back the resources of attempt a's node_index-th node on n. */
void state_part_add(struct state *s, struct snode *n, struct sjob *j, const struct attempt *a,
		    int node_index);
void state_part_remove(struct state *s, struct snode *n, struct sjob *j, int attempt);
/* What owner's jobs wait (never NULL). */
const struct owner_pending *state_owner_pending(struct state *s, const char *owner);
/* Node n's credential becomes the one of SHA-256 sha256 (NULL: none); a
 * new one (an agent joined with it) ends an admit and a revocation. */
void state_node_credential(struct state *s, struct snode *n, const char *sha256);
/* An admin lets the next agent that joins as n in (tenk nodes admit). */
void state_node_admit(struct state *s, struct snode *n);
/* n's credential ends; only an admit lets an agent of it in again. */
void state_node_revoke(struct state *s, struct snode *n);
/* n's agent said it stops: nothing new is placed there until an agent
 * registers again. */
void state_agent_stopping(struct state *s, struct snode *n);
/* An agent says when a running attempt last wrote a checkpoint (what
 * preemption weighs as work that would be lost). */
void state_checkpoint_seen(struct state *s, const struct wire_checkpoint *c);
/* What node n runs changed in place (an attempt's digest): its agent is told. */
void state_node_work_changed(struct state *s, struct snode *n);
/* The services' table every node's work answer carries from now (v taken;
 * the one before freed): every node's work changed. */
void state_services_set(struct state *s, struct wire_service *v, int n);
/* Every node holding a part of attempt a learns its work changed. */
void state_attempt_bump_nodes(struct state *s, const struct attempt *a);
/* As state_node_hold, for a look at what n would have free without the
 * hold (and putting it back): no pass is asked for, its agent not woken. */
void state_node_hold_quiet(struct state *s, struct snode *n, struct sjob *j,
			   const struct attempt_node *an, int sign);
/* Holds (sign +1) or gives back (-1) an attempt's share an of node n, as
 * its part did: the node's resources and j's queue's use. */
void state_node_hold(struct state *s, struct snode *n, struct sjob *j,
		     const struct attempt_node *an, int sign);

/* Attempt a of j failed (a task failed, or bad_node, when not NULL, was
 * lost or is at fault) and j may go again: when its restart policy says in
 * place, its nodes' shares are held for it from now as its tasks end, bar
 * bad_node's. Called again with the failing node once known. */
void state_inplace_begin(struct state *s, struct sjob *j, const struct attempt *a,
			 const char *bad_node);
/* Does j keep the share of node rank k of its attempt `attempt` as the
 * part there goes (and is it now held)? */
bool state_inplace_keeps(struct sjob *j, int attempt, int k);
/* Releases what j holds for a restart in place and forgets it. */
void state_inplace_drop(struct state *s, struct sjob *j);
/* Starts, on their held nodes, the restarts in place whose last attempt
 * has ended; falls back to the queue where no node can replace one. Then
 * tops up the spares of running jobs short of them. */
void state_inplace_tick(struct state *s, int64_t now);
/* Holds node n's share as (a pass's start) as a spare of j. */
void state_spare_take(struct state *s, struct sjob *j, struct snode *n,
		      const struct sched_assign *as, int64_t now);
/* Gives back every spare j holds. */
void state_spares_release(struct state *s, struct sjob *j, int64_t now);
/* The milli-device-ms and node-ms j's spares were held idle while a was
 * its newest attempt, to now. */
void state_spare_held(const struct sjob *j, const struct attempt *a, int64_t now, int64_t *mdev_ms,
		      int64_t *node_ms);
/* The jobs node n is a spare of, as a JSON array of ids (NULL: none). */
json_t *state_node_spare_for(const struct state *s, const struct snode *n);
/* The jobs a spare on n is lent to (NULL: none). */
json_t *state_node_spare_lent(const struct state *s, const struct snode *n);
/* A MASTER_PORT no other attempt led from n uses. */
int state_node_port_find(const struct state *s, const struct snode *n);
void state_node_sync_devs(struct snode *n);
/* The scheduler's view of every node (node i is s->nodes[i]), a node
 * schedulable where it takes work, the spare pool's too; the caller frees
 * it. It borrows the nodes' names and device arrays. */
struct sched_node *state_sched_view(const struct state *s);
struct snode *state_node_insert(struct state *s, const struct node_record *rec);

/* ---- queues.c: queues and users -------------------------------------------------- */

struct squeue *state_queue(struct state *s, const char *name);
/* Creates a queue with no quota, weight 1. */
struct squeue *state_queue_add(struct state *s, const char *name, int64_t now);
struct squeue *state_queue_insert(struct state *s, const struct queue_spec *spec);
/* Brings every queue's decayed usage up to now. */
void state_queues_age(struct state *s, int64_t now);
/* Adds the user of rec (its name, admin, unix_user, roles) with a fresh
 * token (written into token_out, 65 bytes). */
struct suser *state_user_add(struct state *s, const struct user_record *rec, char *token_out,
			     int64_t now);
struct suser *state_user_insert(struct state *s, const struct user_record *rec);
void state_user_del(struct state *s, struct suser *u);

/* ---- jobs.c: what users change of a job ------------------------------------------ */

/* The element of the array whose first element is `first` with index
 * `index`; NULL when it has none. */
struct sjob *state_array_element(struct state *s, const struct sjob *first, int index);
/* Is j the first element of an array of more than one (its id names the
 * whole array)? */
bool state_job_is_array_head(const struct sjob *j);
/* How j's dependencies stand: 1 all met; 0 one still waits, -1 one never
 * will be met (why in buf either way). */
int state_job_deps_state(struct state *s, const struct sjob *j, char *buf, size_t n);
/* Holds a waiting job back, or lets it go. -EBUSY: it is not waiting. */
int state_hold(struct state *s, struct sjob *j, bool hold, struct tk_error *err);
/* A new cap on how many of its array's elements run at once (0: none),
 * for j, a non-final element; the caller does every element. */
int state_array_throttle(struct state *s, struct sjob *j, int cap, struct tk_error *err);
/* Stops an active job's attempt and puts it back in its queue. */
int state_requeue(struct state *s, struct sjob *j, const char *who, int64_t now,
		  struct tk_error *err);
/* A waiting job's request becomes req (taken): its class, queue and shape
 * are worked out again. */
void state_job_set_request(struct state *s, struct sjob *j, struct job_request *req, int64_t now);
/* A running job's time limit is now limit_s (0: none); its nodes are told. */
void state_job_set_limit(struct state *s, struct sjob *j, int64_t limit_s);
/* Takes j out of its class's pending list (state.c). */
void state_job_dequeue(struct state *s, struct sjob *j);

/* ---- snapshot.c: a scheduling pass ----------------------------------------------- */

/* Runs one scheduling pass at now and applies its decisions. True when it
 * stopped at the pass limit (another pass is wanted at once). */
bool state_schedule(struct state *s, int64_t now);
/* Before a loop iteration's pass: when only submissions asked for one,
 * runs it only if one of them might start or preempt now, and otherwise
 * defers it; when a deferred pass is due (now, wall clock), asks for it. */
void state_judge_arrivals(struct state *s, int64_t now);
/* The waiting reason of a job held (tenk hold, or submitted held). */
void state_held_reason(const struct sjob *j, char *buf, size_t n);

/* ---- pack.c: JSON for agents and users ------------------------------------------- */

/* A node's desired work, as the agent's long-poll answer. */
json_t *state_work_pack(struct state *s, struct snode *n, uint64_t since_gen, int protocol);
/* The answer to a long-poll that waited out with nothing new. */
json_t *state_work_unchanged_pack(struct state *s, struct snode *n);
json_t *state_node_pack(struct state *s, const struct snode *n);
/* A job's JSON, with its waiting reason brought up to date. */
json_t *state_job_pack(struct state *s, struct sjob *j);
json_t *state_queue_pack(struct state *s, const struct squeue *q);

/* ---- history.c: settled jobs out of memory --------------------------------------- */

/* Makes room for ids up to n (jobs[] and gone[] zeroed) and raises njobs. */
void state_slots_reserve(struct state *s, size_t n);
/* When j settled (final, every attempt ended), epoch ms; 0: not settled. */
int64_t state_job_settled_ms(const struct sjob *j);
/* Job id, settled, is out of memory: the start found it so (removed:
 * only its row and accounting records are left). */
void state_gone_add(struct state *s, int64_t id, enum job_state st, const char *owner,
		    int64_t settled_ms, bool removed);
/* What a job out of memory is; NULL when id is held, no job, or removed. */
const struct sgone *state_gone(const struct state *s, int64_t id);
/* The same, a removed job's too (its accounting records are kept). */
const struct sgone *state_gone_record(const struct state *s, int64_t id);
/* Retention: job id (out of memory) is removed, its record only kept; or
 * forgotten altogether (its id stays given). */
void state_gone_remove(struct state *s, int64_t id);
void state_gone_forget(struct state *s, int64_t id);
/* Is there a job id (held or not)? */
bool state_job_known(const struct state *s, int64_t id);
/* Reads job id from the store into *ret, not held: the caller releases
 * ret->job (job_release). */
int state_job_read(struct state *s, int64_t id, struct sjob *ret, struct tk_error *err);
/* The job, read back and held again when it was out of memory; NULL when
 * there is none, or its row cannot be read (logged; then state_gone(id)
 * still says it is, and read_err why). */
struct sjob *state_job_get(struct state *s, int64_t id);
/* Write seq took j (server.c): once durable, a settled j may leave. */
void state_job_written(struct state *s, struct sjob *j, uint64_t seq, int64_t mono);
/* The next settled job that may leave memory now (written durably by
 * seq_durable, settled keep_settled_ms), or NULL; then state_evict(j). */
struct sjob *state_evict_next(struct state *s, uint64_t seq_durable, int64_t mono);
void state_evict(struct state *s, struct sjob *j);

/* ---- valid.c: validation runs --------------------------------------------------------- */

/* Starts a validation run on nodes with `tenk validate` options args. */
int valid_create(struct state *s, struct snode *const *nodes, int n, const char *const *args,
		 int nargs, const char *image, const char *owner, int64_t now, struct sjob **ret,
		 struct tk_error *err);
/* Moves runs on: stops preemptible work on their nodes, starts those whose
 * nodes are empty, fails those with a node down. Before every pass. */
void valid_tick(struct state *s, int64_t now);
/* A system job reached a final state: nodes that did not report fail. */
void valid_job_ended(struct state *s, struct sjob *j, int64_t now);
/* May the scheduler place work on n? (not held by a run; validated when
 * the configuration requires it) */
bool valid_node_open(const struct state *s, const struct snode *n);
/* A node's agent registered; with require_validation, a node never
 * validated gets a run. */
void valid_node_registered(struct state *s, struct snode *n, int64_t now);
/* n's verdict is v, of validation job `job` at ms, with no layer, reason or
 * checks: one dropped (VERDICT_NONE), or one put back (a rollout's). */
void valid_verdict_put(struct state *s, struct snode *n, enum verdict v, int64_t job, int64_t ms);
void valid_release(struct state *s);
/* The token validation job `job`'s tasks report with (65 bytes). */
void valid_token(const struct state *s, int64_t job, char out[65]);
/* One node's report: verdict "pass" or "fail" with the failing layer and
 * reason, and its checks (borrowed). held: its steps with the others
 * failed, and whose fault that was is known when the run ends (the report
 * is kept till then). Returns 0, or -errno with err saying what is wrong
 * (-ENOENT: not one of its nodes; -EALREADY: reported before; -EINVAL: a
 * failing verdict without a reason). */
int valid_report(struct state *s, struct sjob *j, const char *node, bool pass, const char *layer,
		 const char *reason, json_t *checks, bool held, int64_t now, struct tk_error *err);
