/*
 * Private to src/server: the shell around the state machine (state.h): the
 * HTTP requests, the API's handlers, the writer, the loop's handles.
 * Nothing outside src/server includes this.
 *
 * Durability works as a gate on every answer. Each change of the state
 * marks its job or node dirty and advances st.seq_applied. Once per loop
 * iteration the dirty objects are written as one batch, in libuv's thread
 * pool; when it commits, seq_durable catches up. A reply (an API answer, or
 * work handed to an agent) records the seq_applied it saw and is held until
 * seq_durable reaches it, so nothing is acknowledged or acted on before it
 * is on disk.
 */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <uv.h>

#include "model/model.h"
#include "model/wire.h"
#include "server.h"
#include "state.h"
#include "store/store.h"

#define SERVER_MAX_BODY (1024 * 1024) /* request body limit */
#define SERVER_MAX_CONNECTIONS 60000  /* agents hold a few each */
/* of every connection allowed, the last quarter is kept for the addresses
 * nodes' agents call from: a flood of other clients never shuts nodes out */
#define SERVER_NODE_RESERVE_DIV 4
/* one address may not take them all (agents behind one NAT hold ~4 each) */
#define SERVER_MAX_CONNS_PER_IP 4096
#define SERVER_CONN_MEMORY (16 * 1024) /* MHD's pool for one connection */
#define SERVER_LOOP_WARN_MS 250	       /* an iteration that holds the loop longer is logged */
#define SERVER_STORE_RETRY_MS 1000     /* a failing store is tried again this often */
#define SERVER_CRON_MS 500	       /* periodic work: liveness, long-poll deadlines */
/* standby servers (standby.c): the active's lease lasts this long by the
 * database's clock, renewed by every batch (an empty one a third of it
 * after the last); a standby asks for it this often */
#define SERVER_LEASE_MS 3000
#define SERVER_STANDBY_POLL_MS 250
#define SERVER_BUDGET_MS 5000	    /* queues' spend against their budgets, this often */
#define SERVER_EVICT_PER_TICK 20000 /* settled jobs leaving memory, at most a tick */
#define SERVER_EVICT_BUDGET_US 5000 /* and for about this long */
/* a cron tick's filling of older jobs' accounting records, at most */
#define ACCT_FILL_SLICE_US 40000
/* accounting records in one page (a page ends with a job's last record,
 * and a cursor goes on) */
#define ACCT_MAX_PAGE 10000
#define SERVER_MAX_LIST 1000 /* jobs in one page of a list (a cursor for more) */

/* Who a request is, by its token; the people's roles in rising order (a
 * route's role is the least it takes), then agents, apart. */
enum role { ROLE_NONE, ROLE_VIEWER, ROLE_USER, ROLE_OPERATOR, ROLE_ADMIN, ROLE_AGENT, ROLE_MAX };

struct request;
struct warm;

/* A list of requests that wait for something (a long-poll, the commit). */
struct req_list {
	struct request *head;
	struct request *tail;
};

enum wait_kind { WAIT_NONE, WAIT_WORK, WAIT_JOB, WAIT_LIST, WAIT_LOGS, WAIT_ARRAY };

/* One open connection (http.c): where its current request stands, and
 * since when, for the deadlines on a request's headers and body. */
enum hconn_state { HC_IDLE, HC_BODY, HC_BUSY };
struct hconn {
	struct hconn *prev, *next;
	struct MHD_Connection *c;
	enum hconn_state state;
	int64_t since_ms; /* accepted, the last answer sent, or the headers read */
	bool upgraded;	  /* a terminal session's (pty.c): no deadline */
};

struct request {
	struct server *s;
	struct MHD_Connection *conn;
	struct hconn *hc;   /* its connection */
	const char *method; /* borrowed from MHD for the request's life */
	const char *url;
	struct strbuf body;
	bool too_big;
	bool dispatched;
	int route;	    /* api_routes' index + 1; 0: none matched */
	int64_t started_us; /* monotonic: its headers were read */
	bool suspended;
	bool finished; /* MHD completed it while we still held it */
	/* its answer tells nothing of the state and goes at once, durable or
	 * not: the store is failing, and it is a heartbeat, health or metrics */
	bool ungated;
	/* the answer, once decided */
	unsigned status;
	struct MHD_Response *resp;
	uint64_t need_seq; /* answer only when seq_durable >= need_seq */
	struct request *gate_next;
	/* authentication */
	enum role role;
	char user[MODEL_NAME_MAX];
	bool audited;
	/* an agent: with a node's own credential, that node; with the join
	 * token, NULL (it may only register) */
	struct snode *node;
	/* long-polls: on the list of a job (WAIT_JOB) or a node (WAIT_WORK) */
	enum wait_kind wait;
	int64_t deadline_ms;
	int64_t wait_job;		       /* its id */
	int wait_node;			       /* its index */
	struct request *wait_prev, *wait_next; /* in the node's or job's list */
	struct request *lp_prev, *lp_next;     /* in the server's list of all long-polls */
	char agent_epoch[40];
	uint64_t agent_gen;
	int agent_protocol; /* what the polling agent speaks (1 where it does not say) */
	/* a job list waiting its turn (WAIT_LIST): what it asked */
	unsigned list_mask;
	int64_t list_limit, list_after;
	int64_t list_array;  /* only this array's elements (0: every job) */
	char list_owner[64]; /* only this user's jobs ("": everyone's) */
	/* newest first (a page of ids below list_before, 0: from the newest);
	 * only jobs named list_name ("": any name) */
	bool list_newest;
	int64_t list_before;
	char list_name[MODEL_NAME_MAX];
	/* a long answer built a slice at a time while on the lists (NULL: a
	 * job list): true once it has answered; acct its state (acct.c) */
	bool (*list_work)(struct request *r, int64_t until_us);
	struct acct_scan *acct;
	struct log_wait *logw;	  /* WAIT_LOGS: a task output it waits for (logs.c) */
	struct array_work *array; /* WAIT_ARRAY: the array work it waits for (arrays.c) */
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
	struct array_work *arrays;    /* arrays.c: work on arrays, in turn */
	struct tk_map submit_buckets; /* api.c: user name -> struct submit_bucket */
	/* retain.c: the cursor over job ids, when audit rows were last
	 * pruned, and what went (for /metrics) */
	size_t retain_next;
	int64_t retain_audit_mono;
	uint64_t retain_removed, retain_forgotten;
	uv_idle_t arrays_idle;
	int64_t ids_reserved; /* ids.c: job ids up to this are reserved in DATA/tenk.ids */
	struct catalogue cat;
	struct store *store;
	struct store *reader; /* a second connection: reads what left memory back */

	/* the state machine: jobs, nodes, queues, users, validation runs */
	struct state st;

	/* task output asked of the agents (logs.c), oldest first */
	struct log_fetch *log_fetches;
	struct pty_session *ptys;     /* pty.c */
	struct power_run *power_runs; /* power.c: power_fence commands running */
	uint64_t log_next_id;

	/* long-polls waiting on it: `tenk wait` by job id, agents' work by node index */
	struct req_list *job_waits;
	size_t job_waits_alloc;
	struct req_list *node_polls;
	size_t node_polls_alloc;

	/* durability: see server.c */
	uint64_t seq_durable;
	/* the store failed a write (server.c): changes are refused (503) and
	 * the writer retries, every SERVER_STORE_RETRY_MS, until it takes them */
	bool store_down;
	/* standby.c: several servers on one PostgreSQL store. standby: this
	 * one waits for the lease, loads nothing and redirects every request
	 * to the active; leased: it holds the lease (term), which every batch
	 * renews; lease_beat_mono: when the writer last started a batch */
	struct {
		bool standby, leased;
		int64_t term;
		struct store_lease seen; /* the lease as last read */
		int64_t since_mono;	 /* standby since, or active since */
		int64_t lease_beat_mono;
		uv_timer_t poll;
		bool poll_init;
		char *where; /* the store: a file, or PostgreSQL's URL */
		char tokens_sha256[65];
		int (*activate)(struct server *s, struct warm *warm, struct tk_error *err);
		struct warm *warm; /* a standby's copy of the state (warm.c) */
		bool warm_failing; /* its last read failed (said once) */
	} role;
	char store_down_why[1024];
	int64_t store_down_mono;
	uint64_t store_failures;
	uv_timer_t store_retry;
	struct req_list gate; /* answers held until durable */
	struct {
		uv_mutex_t mu;
		struct pending *queued, *queued_tail; /* for the writer */
		struct pending *done;		      /* committed, for the loop */
		bool active;			      /* a writer work item runs */
		bool failed;
		int failed_code;
		bool failed_retry; /* a write failed and was put back, to try again */
		struct tk_error err;
		uv_async_t async;
		int outstanding; /* batches handed over and not yet reported */
		uint64_t stats_commits, stats_commit_us;
		struct tk_hist commit_hist; /* seconds per commit (metrics.c) */
	} wq;

	int64_t last_pass_us; /* the last scheduling pass, with its snapshot and applying */
	/* what GET /metrics tells beyond the state (metrics.c): scheduling
	 * passes, answers by route (api_routes' index + 1; 0: none matched),
	 * answers by status class, the renders themselves */
	struct {
		struct tk_hist pass, render;
		/* the loop's iterations: time busy (not waiting for I/O), each */
		struct tk_hist loop_busy;
		uint64_t loop_last_ns, loop_last_idle_ns, loop_busy_max_ns;
		struct tk_hist *http;
		uint64_t by_status[6];
		int64_t started_ms;
		int64_t budgets_mono; /* when acct_budgets last ran */
		/* the cluster's allocation over time (ui.c), a ring */
		struct ui_sample {
			int64_t at_ms;
			float allocated, usable, total;
		} * samples;
		size_t nsamples, sample_head;
		int64_t sample_mono;
	} metrics;

	/* http */
	struct MHD_Daemon *mhd;
	uv_poll_t mhd_poll;
	/* DATA/api.sock: the same API for this machine's own clients, over a
	 * local socket, without TLS (the folder's 0700 keeps others out) */
	struct MHD_Daemon *mhd_local;
	uv_poll_t local_poll;
	char *local_path;
	uv_timer_t mhd_timer;
	bool mhd_resumed;	   /* a connection was resumed since run_mhd's MHD_run began */
	struct request *longpolls; /* every waiting long-poll */
	/* every open connection; beyond node_budget only the addresses in
	 * node_ips (where nodes' agents have called from) are accepted */
	struct hconn *hconns;
	int nconns, max_conns, node_budget;
	struct tk_map node_ips;
	int64_t refused_logged_ms;
	uv_timer_t sweep;

	/* accounting records of the jobs settled before the store kept them
	 * (acct.c): filled from next up to to, a slice a tick; the ids below
	 * done have theirs durable (done rises to done_next once seq is) */
	struct {
		int64_t next, to, done, done_next;
		uint64_t seq;
		struct store_batch *batch; /* records not yet taken into a write */
	} fill;

	/* the audit trail (audit.c): the newest rows, a ring of JSON documents
	 * oldest first from audit_head; rows not yet in a batch */
	json_t **audit;
	size_t audit_n, audit_head;
	struct audit_pending {
		int64_t at_ms;
		char who[MODEL_NAME_MAX];
		char *doc;
	} * audit_new;
	size_t audit_nnew, audit_new_alloc;

	/* the cluster's configuration, version by version, oldest first
	 * (config.c); the last is the one in force */
	struct {
		struct config_version *v;
		size_t n, alloc;
		json_t *at_start; /* the one in force at the start: what only a start takes */
	} config;
	uv_signal_t hup; /* SIGHUP: config.json read again */
	/* rollouts (rollout.c), oldest first; at most one not ended */
	struct {
		struct rollout **v;
		size_t n, alloc;
	} rollouts;
	/* services (services.c), in the order they were made */
	struct {
		struct service **v;
		size_t n, alloc;
	} services;

	char *tls_cert_pem, *tls_key_pem; /* what MHD serves TLS with, kept till it stops */
	char *tls_ca_path;		  /* DATA/tls/ca.pem when the server made its own */
	/* when the certificate it serves, and the CA it made, stop being
	 * valid (seconds since the epoch; 0: none, or not readable) */
	int64_t tls_not_after, tls_ca_not_after;
	/* job lists wait here and are built a few milliseconds' worth each loop
	 * iteration, so that agents' calls between them are never held up */
	struct req_list lists;
	uv_idle_t lists_idle;
	/* keeps the loop from blocking until check_cb has run: started by what
	 * runs outside the poll phase (timers) and may have changed state */
	uv_idle_t kick_idle;

	uv_check_t check;
	uv_timer_t cron;
	bool stopping;
	bool stop_finished;
	int open_handles;
	void (*stop_cb)(void *arg);
	void *stop_arg;
};

/* ---- metrics.c: GET /metrics ------------------------------------------------- */

extern const double metrics_pass_bounds[], metrics_http_bounds[], metrics_commit_bounds[];
extern const int metrics_pass_nbounds, metrics_http_nbounds, metrics_commit_nbounds;
void metrics_init(struct server *s);
void metrics_release(struct server *s);
/* An answer is on its way: how long the request took, by route. */
void metrics_answered(struct server *s, const struct request *r);
void h_metrics(struct request *r, const char *param, json_t *body);

/* ---- ui.c: the web page ------------------------------------------------------------ */

#define UI_COOKIE "tenk_session"
#define UI_SAMPLES 8640	   /* utilization samples kept: a day's */
#define UI_SAMPLE_MS 10000 /* one each this often */
/* Sets r's role and user from a token, as the Authorization header does. */
void request_auth_token(struct request *r, const char *tok);
/* Adds a header to the answer r was given. */
void reply_header(struct request *r, const char *name, const char *value);
void h_ui(struct request *r, const char *param, json_t *body);
void h_login(struct request *r, const char *param, json_t *body);
void h_logout(struct request *r, const char *param, json_t *body);
void h_utilization(struct request *r, const char *param, json_t *body);
/* Notes the cluster's allocation now, for the page's plot over time. */
void ui_sample(struct server *s);

/* ---- acct.c: accounting records and usage ---------------------------------------- */

void h_accounting(struct request *r, const char *param, json_t *body);
void h_usage(struct request *r, const char *param, json_t *body);
/* Each queue's spend in its budget period; a queue whose budget is spent
 * holds its waiting jobs (the scheduler skips them, saying why). */
void acct_budgets(struct server *s);
/* Frees what an accounting answer in progress holds (its request left). */
void acct_scan_free(struct request *r);
/* A settled job leaves memory: what it spent in its queue's budget period
 * is kept with the queue. */
void acct_job_leaves(struct server *s, const struct sjob *j);
/* The accounting records of a settled job, replacing what b's store has. */
void acct_put(struct server *s, const struct sjob *j, struct store_batch *b);
/* Where filling the records of jobs settled before the store kept them
 * stands, from the store's metadata (at the start). */
int acct_fill_load(struct server *s, struct tk_error *err);
/* The Gittins index's history (state->las_hist) from the accounting
 * records of the newest jobs out of memory, where a class orders by it. */
void acct_las_history_load(struct server *s);
/* A slice of that filling (the cron's). */
void acct_fill_work(struct server *s);

/* ---- server.c --------------------------------------------------------------- */

/* The wall clock, for the state machine's entry points. */
/* ids.c: job ids never given twice. After state_load: the next id is
 * past the reservation DATA/tenk.ids keeps. */
int server_ids_load(struct server *s, struct tk_error *err);
/* Before n more jobs are submitted: reserves their ids durably. */
int server_ids_reserve(struct server *s, int64_t n, struct tk_error *err);
/* At a clean stop, everything durable: the reservation goes back to the
 * last id given. */
void server_ids_close(struct server *s);

int64_t server_now_ms(const struct server *s);
/* A list of records kept whole under a meta key (rollouts, services):
 * *ret the JSON array the store holds (the caller's; an empty one where the
 * key is not there), or < 0 with err; and the list written in the loop's
 * batch (arr taken), an answer that tells of it waiting for the write. */
int server_meta_list_load(struct server *s, const char *key, json_t **ret, struct tk_error *err);
void server_meta_list_save(struct server *s, const char *key, json_t *arr);
/* Close callback for the server's handles (data = the server): the last one
 * closed at stop calls the stop callback. */
void server_handle_closed(uv_handle_t *h);
/* power.c: runs the power_fence command for node n; the state machine
 * hears its end (state_node_powered_off). server_power_stop kills those
 * that run (a stop). */
void server_power_fence(struct server *s, struct snode *n);
void server_power_stop(struct server *s);

/* ---- http.c ------------------------------------------------------------------ */

int http_start(struct server *s, const char *listen, struct tk_error *err);

/* tls.c: a certificate for the server, issued by the cluster CA of
 * DATA/tls (made on first use) for the addresses of host/ss (every address
 * of this host for a wildcard); PEM text the caller frees. */
/* When the first certificate of a PEM text stops being valid (seconds
 * since the epoch); 0 where it is not one. */
int64_t server_tls_not_after(const char *pem);
int server_tls_self_issue(const char *data_dir, const char *host, const struct sockaddr_storage *ss,
			  char **ret_cert, char **ret_key, struct tk_error *err);
/* Answers every held request with 503 and stops the daemon. */
void http_stop(struct server *s);
/* Sets the answer: a JSON body (taken) with status. The request is answered
 * once everything changed so far is durable. */
void reply_json(struct request *r, unsigned status, json_t *body);
/* An error answer {"error": text, "status": status}. */
void reply_error(struct request *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The same with the keys of extra (taken; NULL: none) beside them, for
 * meaning a caller reads as an enum rather than from the words. */
void reply_error_with(struct request *r, unsigned status, json_t *extra, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Answers with text (taken, malloc'd) of the given content type. */
void reply_text(struct request *r, unsigned status, char *text, const char *type);
/* 101: the connection becomes a stream of WIRE_PTY_PROTOCOL, handed to
 * handler (with cls) once the answer is sent. */
void reply_upgrade(struct request *r, MHD_UpgradeHandler handler, void *cls);
/* c is upgraded: no request deadline applies to it. */
void http_mark_upgraded(struct server *s, struct MHD_Connection *c);
/* MHD runs soon (what upgraded sockets hold moves). */
void server_kick_mhd(struct server *s);
/* Keeps the request waiting (a long-poll) until a reply_* call or its
 * deadline; the caller has put it on a wait list. */
void request_park(struct request *r, enum wait_kind kind, int64_t deadline_ms);
/* Releases answers whose changes are now durable. */
void http_release_gate(struct server *s);
/* Compares two secrets in time that does not depend on where they differ. */
bool secret_equal(const char *a, const char *b);
/* Looks up a query argument; NULL when absent. */
const char *request_arg(struct request *r, const char *key);
void req_list_push(struct req_list *l, struct request *r);
void req_list_remove(struct req_list *l, struct request *r);

/* ---- config.c: the cluster's configuration, versioned ---------------------------- */

#define CONFIG_WHY_MAX 256
struct config_version {
	int64_t version;
	int64_t at_ms;
	char who[MODEL_NAME_MAX];
	char why[CONFIG_WHY_MAX];
	json_t *config;	 /* config.json's object */
	json_t *changed; /* its top-level keys that differ from the version before */
	json_t *later;	 /* [{"key", "when": "start"}]: what waits for a start */
};

/* Where the configuration's file is: --config, else DATA/config.json (in
 * buf, of n bytes, where that is the one). */
const char *config_file_path(const struct server *s, char *buf, size_t n);
/* At activation, before the state loads: the store's versions and the
 * file put together (the newest of either in force; the first version
 * recorded on a store that has none). */
int config_start(struct server *s, struct tk_error *err);
/* cfg (taken) as the next version, by who for why: checked whole, then
 * applied, stored and written to the file; *ret: the version's summary
 * (with "unchanged" where cfg is the one in force). -EINVAL (a bad
 * setting) or -EBUSY (a class jobs are in would go) with err, nothing
 * changed. */
int config_apply(struct server *s, json_t *cfg, const char *who, const char *why, json_t **ret,
		 struct tk_error *err);
/* SIGHUP: the file read again and applied; a broken one changes nothing
 * (logged and audited either way). */
void config_reload(struct server *s);
void config_release(struct server *s);
void config_h_show(struct request *r, const char *param, json_t *body);
void config_h_history(struct request *r, const char *param, json_t *body);
void config_h_apply(struct request *r, const char *param, json_t *body);
void config_h_change(struct request *r, const char *param, json_t *body);
void config_h_rollback(struct request *r, const char *param, json_t *body);
/* power_fence.after against the heartbeats it must outlast (a start's
 * check, and every version's). */
int server_power_fence_check(const struct server_config *cfg, const struct sched_config *sched,
			     struct tk_error *err);

/* ---- services.c: long-running replicas (tenk serve) ------------------------------ */

struct service;
/* The services of the store (at activation, once the jobs are loaded). */
int services_load(struct server *s, struct tk_error *err);
void services_release(struct server *s);
/* Keeps each service's replicas live, as many as it asks (the cron). */
void services_tick(struct server *s, int64_t now);
/* What node's forwarder carries of each service (a heartbeat's): what
 * scaling with load reads; a service at zero that holds a connection
 * gets a replica at once. */
void services_heard(struct server *s, const char *node, const struct wire_serve_load *v, int n);
/* Makes the table of services with a port of their own and their
 * endpoints again, and gives it to every node where it changed. */
void services_sync(struct server *s);
void services_h_create(struct request *r, const char *param, json_t *body);
void services_h_list(struct request *r, const char *param, json_t *body);
void services_h_show(struct request *r, const char *param, json_t *body);
void services_h_endpoints(struct request *r, const char *param, json_t *body);
void services_h_scale(struct request *r, const char *param, json_t *body);
void services_h_update(struct request *r, const char *param, json_t *body);
void services_h_delete(struct request *r, const char *param, json_t *body);

/* ---- rollout.c: staged changes of the fleet's software --------------------------- */

#define ROLLOUT_MAX_STAGES 8
enum rollout_kind { ROLLOUT_IMAGE, ROLLOUT_STACK, ROLLOUT_KIND_MAX };
enum rollout_state {
	ROLLOUT_RUNNING,
	ROLLOUT_PAUSED,
	ROLLOUT_DONE,
	ROLLOUT_FAILED, /* a check failed: it rolled back by itself */
	ROLLOUT_ABORTED,
	ROLLOUT_ROLLED_BACK,
	ROLLOUT_STATE_MAX
};
/* A stage's steps, in order. */
enum rollout_phase {
	ROLLOUT_PICK,	    /* its nodes to be chosen (and drained) */
	ROLLOUT_DRAINING,   /* until they are empty */
	ROLLOUT_BASELINE,   /* the reference on the old stack, where no node of
			     * their model ran it yet */
	ROLLOUT_WAIT_STACK, /* a stack's: until their agents report it */
	ROLLOUT_VALIDATING, /* a validation of them, on the new stack or in the image */
	ROLLOUT_SOAKING,    /* taking work, watched */
	ROLLOUT_FINISHED,   /* the stage is over */
	ROLLOUT_PHASE_MAX
};
enum rollout_drain { ROLLOUT_DRAIN_WAIT, ROLLOUT_DRAIN_REQUEUE, ROLLOUT_DRAIN_MAX };

struct rollout_node {
	char name[MODEL_NAME_MAX];
	char state[24]; /* draining, drained, waiting_for_stack, validating, soaking, ... */
	int64_t vjob;	/* its validation in the stage */
	char reason[MODEL_REASON_MAX];
	/* its verdict before the stage: an image's verdicts go back to it */
	enum verdict verdict_before;
	int64_t verdict_job_before, verdict_ms_before;
	/* the reference's record on the new stack (until compared), and the
	 * comparison with the old's (ref_compare_pack, and the digests) */
	json_t *reference, *equivalence;
};

struct rollout_stage {
	char want[16]; /* "2", "10%", "all" */
	int nnodes;
	struct rollout_node *nodes;
	int64_t started_ms, soak_until_ms;
	int64_t vjob; /* the stage's validation job */
	int vtries;
	int64_t bjob; /* its reference on the old stack */
	int btries;
};

struct rollout {
	char name[MODEL_NAME_MAX];
	enum rollout_kind kind;
	char target[MODEL_IMAGE_MAX]; /* the image, or the stack's FIELD=VALUE,... */
	enum rollout_state state;
	enum rollout_phase phase;
	enum rollout_drain policy;
	int64_t soak_ms;
	int nstages, stage;
	struct rollout_stage stages[ROLLOUT_MAX_STAGES];
	char reason[MODEL_REASON_MAX + 64]; /* why it ended */
	char by[MODEL_NAME_MAX];
	int64_t created_ms, ended_ms;
	/* an image's: the default before it, the configuration's versions
	 * before and after it set the new one */
	char image_before[MODEL_IMAGE_MAX];
	int64_t config_before, config_after;
	json_t *events; /* [{"at_ms", "what"}], the newest */
	/* the equivalence check: the reference ("": tenk's own; "none": no
	 * check; else a site's command), how far its numbers may differ (0:
	 * bit for bit) and its steps slow down; the old stack's records, one
	 * per accelerator model ({"MODEL": {"node", "job", "digest",
	 * "record"}}) */
	char reference[1024];
	double tolerance, step_slack;
	json_t *baselines;
};

/* The rollouts of the store (at activation, once the nodes are loaded). */
int rollout_load(struct server *s, struct tk_error *err);
void rollout_release(struct server *s);
/* Moves running rollouts on (the cron). */
void rollout_tick(struct server *s, int64_t now);
void rollout_h_create(struct request *r, const char *param, json_t *body);
void rollout_h_list(struct request *r, const char *param, json_t *body);
void rollout_h_show(struct request *r, const char *param, json_t *body);
void rollout_h_pause(struct request *r, const char *param, json_t *body);
void rollout_h_resume(struct request *r, const char *param, json_t *body);
void rollout_h_abort(struct request *r, const char *param, json_t *body);
void rollout_h_rollback(struct request *r, const char *param, json_t *body);
/* A validation job's node sent the reference's record (or {"error"}): a
 * rollout whose baseline or stage validation that job is keeps it. Called
 * while the job's run is still held (j->valid). */
void rollout_reference(struct server *s, struct sjob *j, const char *node, json_t *record);

/* ---- audit.c ----------------------------------------------------------------- */

/* The call r changes state (any but GET, and not an agent's): who, from
 * where, when, what and the result (status and what the answer said) go
 * to the audit table in the batch that writes the change. answer: the
 * reply's JSON (borrowed), or NULL. */
void audit_reply(struct request *r, unsigned status, json_t *answer);
/* A row for what no request did (SIGHUP): who, from where, what, on
 * what, its status and result. */
void audit_note(struct server *s, const char *who, const char *addr, const char *method,
		const char *path, unsigned status, const char *result);
/* Puts the rows not yet written into b. */
void audit_take(struct server *s, struct store_batch *b);
bool audit_waiting(const struct server *s);
/* The rows kept from an earlier run (the newest ones). */
int audit_load(struct server *s, struct tk_error *err);
/* GET /v1/audit?since_ms=&user=&limit= */
void audit_list(struct request *r);
void audit_release(struct server *s);
/* The rows in memory written before ms go (retention). */
void audit_forget_before(struct server *s, int64_t ms);

/* ---- retain.c: the store's retention, from the cron ---- */
void server_retain_tick(struct server *s);

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
/* A job as r may see it (its environment's values its owner's alone). */
json_t *api_job_for(const struct request *r, struct sjob *j);
/* What a submission of req by r's user must pass before it is taken (its
 * pool's defaults put in, its class and queue allowed, its image, its Unix
 * account into run_as, some set of nodes could hold it); < 0 with the
 * refusal answered. */
int api_request_checks(struct request *r, struct job_request *req, char run_as[MODEL_NAME_MAX]);
/* 0 where r may read what job j runs and writes (its `what`: "logs",
 * "checkpoints"); else answers 403 naming the owner. */
int api_job_inside(struct request *r, const struct sjob *j, const char *what);

/* ---- arrays.c: work that grows with a request, in slices ---- */

/* What a change of one job does (cancel, hold, release, requeue, a new
 * throttle), asked by user; arg: the change's value where it has one. */
typedef int (*api_change_fn)(struct server *s, const char *user, struct sjob *j, int64_t arg,
			     struct tk_error *err);
/* Makes the nidx elements of an array of req (taken, as idx) in slices,
 * then answers r with the first; the ids are taken now. */
void api_array_submit(struct request *r, struct job_request *req, int *idx, int nidx, int cap,
		      const char *run_as, bool held);
/* Applies fn to every element of the array whose first element is first,
 * in slices, then answers r with the first and how many changed. */
void api_array_change(struct request *r, struct sjob *first, api_change_fn fn, int64_t arg);
/* Does array work for about budget_us; true while some is left. */
bool api_arrays_work(struct server *s, int64_t budget_us);
/* The writer committed: array work waiting for it goes on. */
void api_arrays_kick(struct server *s);
/* r goes before its array work is done: the work goes on, unanswered. */
void api_array_forget(struct request *r);
void api_arrays_release(struct server *s);
/* Builds the answers of waiting job lists for about budget_us; returns
 * whether any still wait. */
bool api_lists_work(struct server *s, int64_t budget_us);
/* Parks r on the lists: its answer is built there (work; NULL: a job list). */
void api_list_park(struct request *r, bool (*work)(struct request *r, int64_t until_us));
/* The list of `tenk wait` long-polls of job id, and of work long-polls of
 * node index: grown on first use. */
struct req_list *api_job_waits(struct server *s, int64_t id);
/* The job a path names ("12", "12_7"; *whole: an array named as one),
 * as r may see it; answers 400/404 itself and returns < 0. */
int api_job_ref(struct request *r, const char *param, struct sjob **ret, bool *whole);
/* The node an agent's call is for, checked against its credential and
 * agent id; answers the refusal itself and returns NULL. */
struct snode *api_agent_node(struct request *r, const char *name, const char *agent_id);

/* server.c: check_cb (a pass, the flush, the gate) runs in this loop
 * iteration, not after the poll phase's wait. */
void server_kick(struct server *s);
/* An empty batch to the writer (it renews the lease). */
void server_write_empty(struct server *s);

/* ---- standby.c: standby servers on a shared store ------------------------------ */

/* Takes the lease, or becomes a standby: 1 active (load and serve), 0
 * standby (load nothing; s->role.activate when it takes over). */
int server_role_start(struct server *s, struct tk_error *err);
/* From the cron: an empty batch renews the lease when nothing did lately. */
void server_role_beat(struct server *s, bool writer_idle);
/* A standby's answer to any request (true), or false: the active's work. */
bool server_standby_answer(struct request *r);
/* tenk_server_active and the lease's figures, for both roles' /metrics. */
void metrics_role(struct server *s, struct strbuf *b);

/* ---- logs.c: task output, served by the agents --------------------------------------- */

/* GET /v1/jobs/ID/logs and POST /v1/agent/logs. */
void h_job_logs(struct request *r, const char *param, json_t *body);
void h_agent_logs(struct request *r, const char *param, json_t *body);
/* What node n's agent is to read for users, attached to its work answer
 * (and marked sent); NULL when nothing is asked. */
json_t *logs_for_node(struct server *s, const struct snode *n);
/* A log request that ended (answered, timed out, its client gone). */
void logs_forget(struct server *s, struct request *r);
/* Its wait ran out: answer with what the nodes sent. */
void logs_expired(struct request *r);
/* What users ask of node n now (output to read, terminals to join), as
 * the work answer's "logs" and "ptys" (each marked told); NULL: nothing. */
json_t *api_node_asks(struct server *s, const struct snode *n);
/* Wakes node n's parked work long-poll: its answer carries those asks. */
void api_wake_node(struct server *s, struct snode *n);

/* ---- pty.c: terminals users attach to ------------------------------------------------- */

/* GET /v1/jobs/ID/pty and GET /v1/agent/pty, each upgraded to a stream. */
void h_job_pty(struct request *r, const char *param, json_t *body);
void h_agent_pty(struct request *r, const char *param, json_t *body);
/* The sessions node n's agent is to join, for its work answer (and marked
 * told); NULL when none. */
json_t *ptys_for_node(struct server *s, const struct snode *n);
/* Ends sessions the node did not join in time (from the cron). */
void ptys_sweep(struct server *s, int64_t mono);
void ptys_close_all(struct server *s);
struct req_list *api_node_polls(struct server *s, int index);
/* Turns the state machine's events into answers (state_event_cb). */
void api_state_event(void *arg, const struct state_event *ev);

/* ---- load.c: the store into the state, at start
 * --------------------------------------------------------------------------- */

struct warm;
/* Loads what store holds into an empty state at start-up, then ends what
 * cannot go on (attempts whose nodes are gone, validation runs). A row
 * that does not decode stops it, named, unless quarantine: then the row is
 * moved to the store's quarantine table and the load goes on. With warm
 * (a standby's copy, up to date: warm_ready) the rows are read from it,
 * its jobs taken, and bad rows set aside in store all the same. */
int state_load(struct state *s, struct store *store, struct warm *warm, int64_t now, int64_t mono,
	       bool quarantine, struct tk_error *err);
/* A job's stored document (its row's key) decoded as a load decodes it: 0,
 * or -EBADMSG with why (MODEL_REASON_MAX) saying what is wrong. */
int state_job_decode(const char *key, const char *doc, size_t len, struct job *ret, char *why);

/* ---- warm.c: a standby's copy of the state, kept as the active commits ------------ */

struct warm *warm_create(void);
void warm_destroy(struct warm *w);
/* Reads what changed in st since the copy's newest mark (everything, the
 * first time) into it; counts (may be NULL) as store_changes. */
int warm_follow(struct warm *w, struct store *st, struct store_counts *counts,
		struct tk_error *err);
/* Whether the copy holds what the store does (n: its counts, read with the
 * last changes); else false, and why. */
bool warm_ready(const struct warm *w, const struct store_counts *n, char *why, size_t size);
/* Jobs it holds; how long since it was last brought up to date (-1: never). */
int64_t warm_jobs(const struct warm *w);
int64_t warm_age_ms(const struct warm *w);
/* Its rows, for load.c, in the store's orders: documents of nodes, queues
 * or users by name; settled jobs' columns; jobs not settled by id, each
 * decoded (cb takes job, to keep or release) or not (job NULL, why). */
int warm_each_doc(struct warm *w, enum store_row_kind kind, store_row_cb cb, void *ctx);
int warm_each_settled(struct warm *w, store_settled_cb cb, void *ctx);
typedef int (*warm_job_cb)(void *ctx, const char *key, struct job *job, const char *why);
int warm_each_job(struct warm *w, warm_job_cb cb, void *ctx);
