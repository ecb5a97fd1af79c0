/*
 * Private to src/server: the in-memory state and the functions its files
 * share. Nothing outside src/server includes this.
 *
 * Durability works as a gate on every answer. Each change marks its job or
 * node dirty and advances seq_applied. Once per loop iteration the dirty
 * objects are written as one batch, in libuv's thread pool; when it commits,
 * seq_durable catches up. A reply (an API answer, or work handed to an agent)
 * records the seq_applied it saw and is held until seq_durable reaches it, so
 * nothing is acknowledged or acted on before it is on disk.
 */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <uv.h>

#include "model/model.h"
#include "model/wire.h"
#include "sched/sched.h"
#include "server.h"
#include "store/store.h"

#define SERVER_MAX_BODY (1024 * 1024) /* request body limit */
#define SERVER_PORT_BASE 29500	      /* MASTER_PORT range on each node */
#define SERVER_PORT_COUNT 512
#define SERVER_MAX_CONNECTIONS 60000 /* agents hold a few each */
#define SERVER_CRON_MS 500	     /* periodic work: liveness, long-poll deadlines */
#define SERVER_MAX_LIST 100000	     /* jobs in one list answer */

enum role { ROLE_NONE, ROLE_USER, ROLE_ADMIN, ROLE_AGENT, ROLE_MAX };

struct request;
struct sjob;
struct snode;
struct svalid;

/* A list of requests that wait for something (a long-poll, the commit). */
struct req_list {
	struct request *head;
	struct request *tail;
};

enum wait_kind { WAIT_NONE, WAIT_WORK, WAIT_JOB };

struct request {
	struct server *s;
	struct MHD_Connection *conn;
	const char *method; /* borrowed from MHD for the request's life */
	const char *url;
	struct strbuf body;
	bool too_big;
	bool dispatched;
	bool suspended;
	bool finished; /* MHD completed it while we still held it */
	/* the answer, once decided */
	unsigned status;
	struct MHD_Response *resp;
	uint64_t need_seq; /* answer only when seq_durable >= need_seq */
	struct request *gate_next;
	/* authentication */
	enum role role;
	char user[MODEL_NAME_MAX];
	/* long-polls */
	enum wait_kind wait;
	int64_t deadline_ms;
	struct snode *wait_node;
	struct sjob *wait_job;
	struct request *wait_prev, *wait_next; /* in the node's or job's list */
	struct request *lp_prev, *lp_next;     /* in the server's list of all long-polls */
	char agent_epoch[40];
	uint64_t agent_gen;
};

/* A job as the server holds it. */
struct sjob {
	struct job job;
	struct sched_job sj; /* the scheduler's view, kept in step with job.req */
	int cls;	     /* index into server->classes */
	struct squeue *queue;
	struct sjob *pend_prev, *pend_next; /* in its class's pending list, in order */
	bool pending;
	bool dirty;
	struct sjob *dirty_next;
	uint64_t reason_pass;	 /* the pass that wrote job.reason while pending */
	int64_t reason_from;	 /* that pass said: as job reason_from (0: its own) */
	struct req_list waiters; /* `tenk wait` long-polls */
	int node_losses;	 /* requeues spent on lost nodes */
	int preemptions;	 /* times preempted */
	int64_t held_for;	 /* its stopping attempt was preempted for this job */
	int held_attempt;	 /* ... that attempt's number */
	int64_t last_ckpt_ms;	 /* newest checkpoint its current attempt wrote */
	struct svalid *valid;	 /* a system job: the validation run it is */
};

/* A priority class, with the jobs of it that wait. */
struct sclass {
	struct class_spec spec;
	struct sjob *pend_head, *pend_tail;
	int npending;
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
	int index;	   /* in server->queues; queues are never removed */
	int64_t use_milli; /* accelerators held by its running attempts */
	int npending;
	int nrunning;
	bool dirty;
	struct squeue *dirty_next;
	int64_t written_ms; /* when its usage was last stored */
};

enum node_live { NODE_UNKNOWN, NODE_UP, NODE_DOWN, NODE_LIVE_MAX };

/* One node's part of a running attempt. */
struct part {
	struct sjob *job;
	int attempt;	/* number */
	int node_index; /* in the attempt's node list (the node rank) */
	uint64_t gen_added;
};

struct snode {
	struct node_record rec;
	int index; /* in server->nodes */
	enum node_live live;
	int64_t last_seen_ms; /* monotonic */
	bool dirty;
	struct snode *dirty_next;
	/* what is allocated */
	int cpus_used;
	int64_t mem_used;
	int dev_used[MODEL_MAX_ACCELS]; /* milli */
	struct sched_dev sdev[MODEL_MAX_ACCELS];
	uint8_t ports[SERVER_PORT_COUNT / 8];
	/* parts of attempts that hold resources here */
	struct part *parts;
	int nparts;
	size_t parts_alloc;
	/* work for the agent */
	uint64_t work_gen;
	struct req_list pollers;
	bool wake_queued; /* its pollers get answered at the end of the iteration */
	struct snode *wake_next;
	struct svalid *held_by; /* a validation run holds it: no other work starts */
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
	bool preempted; /* preemptible jobs on its nodes were told to stop */
	struct svalid *prev, *next;
};

struct server {
	uv_loop_t *loop;
	struct server_config cfg;
	char *data_dir;
	char url[200];
	char admin_token[65];
	char agent_token[65];
	char epoch[33]; /* differs on every start */
	int lock_fd;
	struct catalogue cat;
	struct store *store;

	/* jobs by id: jobs[id - 1]; ids are dense and never reused */
	struct sjob **jobs;
	size_t njobs;
	size_t jobs_alloc;
	int npending;

	/* scheduling configuration */
	struct sched_config sched;
	struct sclass classes[MODEL_MAX_CLASSES];
	struct squeue **queues;
	int nqueues;
	size_t queues_alloc;
	struct tk_map queue_by_name;
	struct squeue *dirty_queues;

	/* users: by name, and by the SHA-256 of their token */
	struct tk_map user_by_name;
	struct tk_map user_by_hash;
	struct suser *dirty_users;

	/* nodes */
	struct snode **nodes;
	int nnodes;
	size_t nodes_alloc;
	struct tk_map node_by_name;

	/* durability: see server.c */
	struct sjob *dirty_jobs;
	struct snode *dirty_nodes;
	uint64_t seq_applied;
	uint64_t seq_durable;
	struct req_list gate; /* answers held until durable */
	struct {
		uv_mutex_t mu;
		struct pending *queued, *queued_tail; /* for the writer */
		struct pending *done;		      /* committed, for the loop */
		bool active;			      /* a writer work item runs */
		bool failed;
		struct tk_error err;
		uv_async_t async;
		int outstanding; /* batches handed over and not yet reported */
		uint64_t stats_commits, stats_commit_us;
	} wq;

	struct snode *wake_nodes;
	struct svalid *valids; /* validation runs not yet ended */

	/* scheduling */
	bool sched_needed;
	uint64_t pass_no;
	struct sched_cluster *sched_cluster; /* kept while the nodes stay the same */
	struct sched_shapes *sched_shapes;   /* the waiting jobs' requests, filed */
	int64_t last_pass_us;
	struct {
		uint64_t passes, placements;
	} stats;

	/* http */
	struct MHD_Daemon *mhd;
	uv_poll_t mhd_poll;
	uv_timer_t mhd_timer;
	struct request *longpolls; /* every waiting long-poll */

	uv_check_t check;
	uv_timer_t cron;
	bool stopping;
	bool stop_finished;
	int open_handles;
	void (*stop_cb)(void *arg);
	void *stop_arg;
};

/* ---- server.c --------------------------------------------------------------- */

/* Marks a job or node changed: it will be written in the next batch. */
void server_job_dirty(struct server *s, struct sjob *j);
void server_node_dirty(struct server *s, struct snode *n);
void server_queue_dirty(struct server *s, struct squeue *q);
void server_user_dirty(struct server *s, struct suser *u);
/* Asks for a scheduling pass at the end of this loop iteration. */
void server_want_pass(struct server *s);
int64_t server_now_ms(const struct server *s);
/* Close callback for the server's handles (data = the server): the last one
 * closed at stop calls the stop callback. */
void server_handle_closed(uv_handle_t *h);

/* ---- http.c ------------------------------------------------------------------ */

int http_start(struct server *s, const char *listen, struct tk_error *err);
/* Answers every held request with 503 and stops the daemon. */
void http_stop(struct server *s);
/* Sets the answer: a JSON body (taken) with status. The request is answered
 * once everything changed so far is durable. */
void reply_json(struct request *r, unsigned status, json_t *body);
/* An error answer {"error": text, "status": status}. */
void reply_error(struct request *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Answers with text (taken, malloc'd) of the given content type. */
void reply_text(struct request *r, unsigned status, char *text, const char *type);
/* Keeps the request waiting (a long-poll) until a reply_* call or its
 * deadline; the caller has put it on a wait list. */
void request_park(struct request *r, enum wait_kind kind, int64_t deadline_ms);
/* Releases answers whose changes are now durable. */
void http_release_gate(struct server *s);
/* Looks up a query argument; NULL when absent. */
const char *request_arg(struct request *r, const char *key);
void req_list_push(struct req_list *l, struct request *r);
void req_list_remove(struct req_list *l, struct request *r);

/* ---- api.c ------------------------------------------------------------------- */

struct route {
	const char *method;
	const char *pattern; /* "/v1/jobs/{}": {} matches one path segment */
	enum role role;	     /* the least role allowed */
	void (*handler)(struct request *r, const char *param, json_t *body);
	bool has_body;
};

extern const struct route api_routes[];
extern const size_t api_nroutes;
/* Answers a long-poll whose deadline passed. */
void api_longpoll_expired(struct request *r);

/* ---- state.c ----------------------------------------------------------------- */

struct sjob *state_job(struct server *s, int64_t id);
struct snode *state_node(struct server *s, const char *name);
/* Takes ownership of req (its class and queue already checked); returns the
 * new job. */
struct sjob *state_submit(struct server *s, struct job_request *req, const char *owner);
struct squeue *state_queue(struct server *s, const char *name);
/* Creates a queue with no quota, weight 1. */
struct squeue *state_queue_add(struct server *s, const char *name);
json_t *state_queue_pack(struct server *s, const struct squeue *q);
/* Brings every queue's decayed usage up to now. */
void state_queues_age(struct server *s);
/* Adds a user with a fresh token (written into token_out, 65 bytes). */
struct suser *state_user_add(struct server *s, const char *name, bool admin, char *token_out);
void state_user_del(struct server *s, struct suser *u);
int state_cancel(struct server *s, struct sjob *j, struct tk_error *err);
/* Registers (or re-registers) a node from its agent's report. */
struct snode *state_register(struct server *s, const struct node_inventory *inv,
			     const char *agent_id);
void state_drain(struct server *s, struct snode *n, const char *reason);
void state_resume(struct server *s, struct snode *n);
/* An agent says a task started or exited. Unknown or stale ones are ignored. */
void state_task_started(struct server *s, int64_t job, int attempt, int rank, int64_t at_ms);
void state_task_exited(struct server *s, const struct task_event *ev);
/* The node's agent was heard from: it is alive (UP). */
void state_node_seen(struct server *s, struct snode *n);
/* Marks a node DOWN and ends the parts of attempts it held. */
void state_node_lost(struct server *s, struct snode *n, const char *why);
/* Runs one scheduling pass and applies its decisions. */
void state_schedule(struct server *s);
/* Loads the store into memory at start-up. */
int state_load(struct server *s, struct tk_error *err);
void state_release(struct server *s);
/* A node's desired work, as the agent's long-poll answer. */
json_t *state_work_pack(struct server *s, struct snode *n, uint64_t since_gen);
/* The API's form of a node. */
json_t *state_node_pack(struct server *s, const struct snode *n);
/* A job's JSON, with its waiting reason brought up to date. */
json_t *state_job_pack(struct server *s, struct sjob *j);
const char *node_live_name(enum node_live l);
/* Answers the `wait` long-polls of a job that reached a final state. */
void state_wake_job_waiters(struct server *s, struct sjob *j);
/* Answers the agent long-polls of every node whose work changed. */
void state_wake_pollers(struct server *s);
/* Starts attempt st of j on nodes (what a pass or a validation run decided). */
void state_apply_start(struct server *s, struct sjob *j, const struct sched_start *st,
		       struct snode *const *nodes);
/* Sends a running job back to its queue for `for_job`. */
void state_preempt(struct server *s, struct sjob *victim, struct sjob *for_job);
/* Ends a job in a final state. */
void state_job_finish(struct server *s, struct sjob *j, enum job_state st, int exit_code,
		      const char *reason);
/* A system job (no place in the scheduler's queue), owned by `owner`. */
struct sjob *state_submit_system(struct server *s, struct job_request *req, const char *owner);

/* ---- valid.c ------------------------------------------------------------------ */

/* Starts a validation run on nodes with `tenk validate` options args. */
int valid_create(struct server *s, struct snode *const *nodes, int n, const char *const *args,
		 int nargs, const char *owner, struct sjob **ret, struct tk_error *err);
/* Moves runs on: stops preemptible work on their nodes, starts those whose
 * nodes are empty, fails those with a node down. Before every pass. */
void valid_tick(struct server *s);
/* A system job reached a final state: nodes that did not report fail. */
void valid_job_ended(struct server *s, struct sjob *j);
/* May the scheduler place work on n? (not held by a run; validated when
 * the configuration requires it) */
bool valid_node_open(const struct server *s, const struct snode *n);
/* A node's agent registered; with require_validation, a node never
 * validated gets a run. */
void valid_node_registered(struct server *s, struct snode *n);
/* "VALIDATING" or "UNVALIDATED" when that is what keeps n from work; else NULL. */
const char *valid_node_state(const struct server *s, const struct snode *n);
void valid_release(struct server *s);
void h_validate_create(struct request *r, const char *param, json_t *body);
void h_validate_report(struct request *r, const char *param, json_t *body);
