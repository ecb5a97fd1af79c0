/*
 * store: tenk's durable state behind one interface. The server keeps its
 * state in memory and writes every change here before acting on it or
 * answering; at start-up it reads everything back.
 *
 * Writes travel in batches: the server collects the changes of one or more
 * loop iterations into a store_batch and applies it in one transaction
 * (group commit), off the loop thread. Only one thread may use a store at a
 * time; the server guarantees that by having at most one batch in flight.
 *
 * Two implementations, the same schema and guarantees: SQLite in WAL mode
 * with synchronous=FULL (the embedded default, a file), and PostgreSQL
 * through libpq (a URL, postgresql://...; shared by standby servers). When
 * store_apply returns 0 the batch survives a crash of the process or of
 * the machine.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

struct store;
struct store_batch;

enum store_kind { STORE_SQLITE, STORE_POSTGRESQL, STORE_KIND_MAX };

/* Which implementation where names: a postgresql:// (or postgres://) URL,
 * else a file's path. */
enum store_kind store_kind_of(const char *where);
/* "sqlite", "postgresql" */
const char *store_kind_name(enum store_kind k);

/* Opens (creating and migrating when needed) the store where names: a
 * file's path or a PostgreSQL URL. A URL carries no password (the error
 * says to use a password file: PGPASSFILE, or passfile= in the URL). */
int store_open(const char *where, struct store **ret, struct tk_error *err);
/* A second connection to the store a writer opened, for reads only: one
 * thread may read through it while the writer's thread commits. */
int store_open_reader(const char *where, struct store **ret, struct tk_error *err);
void store_destroy(struct store *st);
enum store_kind store_kind(const struct store *st);

/* The schema version the store is at after opening. */
int store_schema_version(const struct store *st);

/* Calls cb for every stored job (in id order) or node (in name order) with
 * its key and JSON document; stops early and returns cb's value if it is
 * negative. */
typedef int (*store_row_cb)(void *ctx, const char *key, const char *doc, size_t len);
/* Jobs: those not settled (settled: final, and every attempt ended),
 * whole; the settled ones by their columns alone; one job's document (*ret
 * the caller's to free; -ENOENT when there is none). */
int store_load_jobs(struct store *st, store_row_cb cb, void *ctx, struct tk_error *err);
/* (the settled ones in no order) stripped: only the job's row is left (its
 * document went, retention) */
typedef int (*store_settled_cb)(void *ctx, int64_t id, const char *state, const char *owner,
				int64_t settled_ms, bool stripped);
int store_load_settled(struct store *st, store_settled_cb cb, void *ctx, struct tk_error *err);
int store_get_job(struct store *st, int64_t id, char **ret, size_t *len, struct tk_error *err);
int store_load_nodes(struct store *st, store_row_cb cb, void *ctx, struct tk_error *err);
int store_load_queues(struct store *st, store_row_cb cb, void *ctx, struct tk_error *err);
int store_load_users(struct store *st, store_row_cb cb, void *ctx, struct tk_error *err);
/* The newest STORE_AUDIT_RECENT audit rows, oldest first (key: their
 * sequence number). */
#define STORE_AUDIT_RECENT 100000
#define STORE_AUDIT_RECENT_S "100000"
int store_load_audit(struct store *st, store_row_cb cb, void *ctx, struct tk_error *err);
/* The cluster's configuration, version by version, oldest first (key: the
 * version's number; the document as store_batch_add_config wrote it). */
int store_load_config(struct store *st, store_row_cb cb, void *ctx, struct tk_error *err);
/* Reads a metadata value; -ENOENT when absent. *ret is the caller's to free. */
int store_meta_get(struct store *st, const char *key, char **ret, struct tk_error *err);

struct store_batch *store_batch_create(void);
void store_batch_destroy(struct store_batch *b);
/* Each takes ownership of doc (a malloc'd NUL-terminated string). */
/* A job with its state, owner and when it settled (0: not settled). */
void store_batch_put_job(struct store_batch *b, int64_t id, const char *state, const char *owner,
			 int64_t settled_ms, char *doc);
void store_batch_put_node(struct store_batch *b, const char *name, char *doc);
void store_batch_del_node(struct store_batch *b, const char *name);
void store_batch_put_queue(struct store_batch *b, const char *name, char *doc);
void store_batch_put_user(struct store_batch *b, const char *name, char *doc);
void store_batch_del_user(struct store_batch *b, const char *name);
void store_batch_put_meta(struct store_batch *b, const char *key, const char *value);
/* An audit row (never rewritten): when, who, and its document. */
void store_batch_add_audit(struct store_batch *b, int64_t at_ms, const char *who, char *doc);
/* A version of the cluster's configuration (never rewritten): its number,
 * when, who, and its document. */
void store_batch_add_config(struct store_batch *b, int64_t version, int64_t at_ms, const char *who,
			    char *doc);
size_t store_batch_len(const struct store_batch *b);
/* Retention: a settled job's document goes, its row (id, state, owner,
 * settled_ms) stays, for its accounting records; or its row goes too. */
void store_batch_strip_job(struct store_batch *b, int64_t id);
void store_batch_del_job(struct store_batch *b, int64_t id);
/* Audit rows written before before_ms go, at most max of them. */
void store_batch_prune_audit(struct store_batch *b, int64_t before_ms, int max);
/* Moves every change of src to the end of dst, leaving src empty. */
void store_batch_move(struct store_batch *dst, struct store_batch *src);

/* ---- accounting: a record per attempt of each settled job --------------------------- */

/* What accounting reads of one attempt without reading its job: written
 * with the job's row once the job settles, so that a job out of memory is
 * summed and listed from these alone. Its strings are the caller's (put)
 * or the store's until the next read (read). */
struct store_acct {
	int64_t job_id;
	int attempt; /* 1..STORE_ACCT_ATTEMPTS-1 */
	const char *owner, *queue, *state, *model;
	int64_t start_ms, end_ms; /* start 0: never started */
	double gpu_hours, busy_hours, cost;
	double energy_j; /* < 0: unknown */
	const char *doc; /* the record as GET /v1/accounting shows it */
	/* the service the job is a replica of ("": none; a record from before
	 * schema 13) */
	const char *service;
	/* GPU-hours of its training that was kept (goodput.c); < 0: not
	 * known (a record from before schema 11) */
	double good_hours;
};
#define STORE_ACCT_ATTEMPTS 1024

/* Replaces every record of job_id by rows[0..n) (n may be 0). */
void store_batch_set_acct(struct store_batch *b, int64_t job_id, const struct store_acct *rows,
			  int n);

/* Reads records job by job. Asked for ids in rising order it reads on
 * through the table, seeking over wide gaps; any order works. */
struct store_acct_cursor;
typedef int (*store_acct_cb)(void *ctx, const struct store_acct *row);
int store_acct_cursor_new(struct store *st, struct store_acct_cursor **ret, struct tk_error *err);
void store_acct_cursor_destroy(struct store_acct_cursor *c);
/* Calls cb for each record of job_id in attempt order; stops early and
 * returns cb's value if it is negative. */
int store_acct_job(struct store_acct_cursor *c, int64_t job_id, store_acct_cb cb, void *ctx,
		   struct tk_error *err);
/* Ends the cursor's read of the table (its snapshot) until its next use:
 * between the slices of a long scan, so each slice sees what is durable. */
void store_acct_cursor_pause(struct store_acct_cursor *c);

/* Whether the store holds nothing at all (a new file, or one emptied). */
int store_is_empty(struct store *st, bool *ret, struct tk_error *err);
/* Moves row key of kind ("job", "node", "queue", "user") into the
 * quarantine table with why, out of the way of the next start. */
int store_quarantine(struct store *st, const char *kind, const char *key, const char *reason,
		     int64_t now_ms, struct tk_error *err);
/* A consistent copy of the store file src into dst (which must not exist),
 * taken while a server may be writing: SQLite's online backup. A
 * PostgreSQL store is backed up by PostgreSQL's tools (-ENOTSUP). */
int store_backup(const char *src, const char *dst, struct tk_error *err);

/* ---- the active server's lease (a store several servers share) ---------------------- */

/* Servers that share a PostgreSQL store take turns: the one holding the
 * lease is active, and the only one whose batches commit. Time is the
 * database's clock, so the servers' clocks need not agree. */
#define STORE_LEASE_STR_MAX 160
struct store_lease {
	char holder[STORE_LEASE_STR_MAX]; /* who holds it: a server's own id */
	char url[STORE_LEASE_STR_MAX];	  /* where that server serves */
	int64_t term;			  /* raised at every change of holder */
	int64_t remaining_ms;		  /* how long it holds still; <= 0: lapsed */
};
/* Who holds it (-ENOENT: nobody ever did; -ENOTSUP: a store of one
 * server, SQLite). */
int store_lease_get(struct store *st, struct store_lease *ret, struct tk_error *err);
/* Takes the lease for holder, serving at url, for ttl_ms when it lapsed or
 * was never taken. *ret is the lease after, whoever holds it; returns 0
 * when holder holds it, -EBUSY when another does. */
int store_lease_take(struct store *st, const char *holder, const char *url, int64_t ttl_ms,
		     struct store_lease *ret, struct tk_error *err);
/* From now on every store_apply through st, even of an empty batch, first
 * renews holder's lease of term for ttl_ms in the batch's own transaction:
 * a batch commits only while holder holds it, and one applied after
 * another server took it over fails with -ENOLCK, writing nothing. */
void store_lease_hold(struct store *st, const char *holder, int64_t term, int64_t ttl_ms);

/* ---- following the active's commits (a warm standby) -------------------------------- */

/* Every row of jobs, nodes, queues and users carries a change mark (a
 * sequence the database raises at each write, whoever writes), and a row
 * deleted leaves a mark of its own for STORE_GONE_KEEP_MS: a standby reads
 * what changed since the last mark it saw and keeps its copy of the state
 * warm. Marks follow the commits' order, since one server writes at a
 * time and each batch holds the lease's row to its commit. */
#define STORE_GONE_KEEP_MS 600000
#define STORE_GONE_KEEP_MS_S "600000"
enum store_row_kind { STORE_ROW_JOB, STORE_ROW_NODE, STORE_ROW_QUEUE, STORE_ROW_USER };
struct store_change {
	enum store_row_kind kind;
	const char *key; /* a job's id in decimal, or a name */
	bool gone;	 /* the row was deleted */
	/* a job's columns */
	int64_t id;
	const char *state, *owner;
	int64_t settled_ms;
	bool stripped;
	/* its document: NULL when gone, and for a settled job (its columns
	 * say all a server holds of it) */
	const char *doc;
	size_t len;
};
typedef int (*store_change_cb)(void *ctx, const struct store_change *c);
/* What the store holds, counted in the same snapshot as the changes. */
struct store_counts {
	int64_t jobs_open, jobs_settled, nodes, queues, users;
};
/* Calls cb for every row changed after *mark (every row when *mark < 0),
 * rows deleted first, all from one snapshot, and sets *mark to the newest
 * mark in it (lower than before: the store is not the one followed, a
 * copy restored, and must be read whole); counts (may be NULL) what the
 * snapshot holds. -ENOTSUP for a store of one server (SQLite). */
int store_changes(struct store *st, int64_t *mark, store_change_cb cb, void *ctx,
		  struct store_counts *counts, struct tk_error *err);

/* What store_copy moved and checked, table by table. */
struct store_copy_table {
	const char *name; /* static */
	int64_t rows;
	char digest[65]; /* SHA-256 of its rows in key order, the same on both sides */
};
struct store_copy_report {
	struct store_copy_table tables[16];
	int ntables;
	int64_t rows;
};
/* Copies every row of the store at from into the empty store at to (either
 * kind; no server may use either meanwhile), then reads both back and
 * compares them row for row. ret (may be NULL) says what moved. */
int store_copy(const char *from, const char *to, struct store_copy_report *ret,
	       struct tk_error *err);

/* Applies every change in b in one transaction, in order. On failure nothing
 * of b is applied and the error names the cause; except -ESTALE: the
 * store's journal file was removed or replaced under it (b and every
 * commit before it were saved into the database), and the writer must stop
 * now, for whatever it writes next has no file that keeps it. */
int store_apply(struct store *st, const struct store_batch *b, struct tk_error *err);
