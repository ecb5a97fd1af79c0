/*
 * What the store's implementations share: a batch's operations, the
 * tables as `tenk store copy` sees them, and the table of functions each
 * implementation fills (store.c dispatches the public calls through it).
 */
#pragma once

#include "store.h"

enum op_kind {
	OP_PUT_JOB,
	OP_PUT_NODE,
	OP_DEL_NODE,
	OP_PUT_META,
	OP_PUT_QUEUE,
	OP_PUT_USER,
	OP_DEL_USER,
	OP_ADD_AUDIT,
	OP_DEL_ACCT,
	OP_PUT_ACCT,
	OP_STRIP_JOB,
	OP_DEL_JOB,
	OP_PRUNE_AUDIT,
	OP_ADD_CONFIG
};

struct op {
	enum op_kind kind;
	int64_t id;
	char *key;		 /* node name, meta key, job state, or who */
	char *doc;		 /* document or meta value */
	char *key2;		 /* a job's owner */
	int64_t n;		 /* a job's settled_ms */
	struct store_acct *acct; /* with its strings in the same block */
};

struct store_batch {
	struct op *ops;
	size_t n;
	size_t alloc;
};

/* ---- the tables, for copying and comparing stores whole ---------------------------- */

enum col_type { COL_INT, COL_REAL, COL_TEXT, COL_TEXT_NULL };

#define TABLE_COLS_MAX 14

struct table_desc {
	const char *name;
	const char *key; /* rows are read in this column's order */
	int ncols;
	const char *cols[TABLE_COLS_MAX];
	enum col_type types[TABLE_COLS_MAX];
	bool serial; /* key is a sequence the store hands out */
};

enum table_id {
	T_META,
	T_JOBS,
	T_NODES,
	T_QUEUES,
	T_USERS,
	T_QUARANTINE,
	T_AUDIT,
	T_ACCT,
	T_CONFIG,
	T_MAX
};

extern const struct table_desc store_tables[T_MAX];

/* The SQL both stores run on a whole table: its rows in key order, and
 * one row's insert, its values' placeholders written mark1, mark2, ...
 * (SQLite's ?1, PostgreSQL's $1). Appended to sb. */
void store_table_select(struct strbuf *sb, const struct table_desc *t);
void store_table_insert(struct strbuf *sb, const struct table_desc *t, char mark);

/* One value of a row; text is NULL for SQL's NULL. */
struct store_value {
	int64_t i;
	double d;
	const char *text;
};

typedef int (*store_dump_cb)(void *ctx, const struct store_value *row);

/* ---- an implementation --------------------------------------------------------------- */

/* What store_load_* read (key, document), in key order. */
enum store_load {
	LOAD_JOBS,
	LOAD_NODES,
	LOAD_QUEUES,
	LOAD_USERS,
	LOAD_AUDIT,
	LOAD_CONFIG,
	LOAD_MAX
};

struct store_ops {
	void (*destroy)(struct store *st);
	int (*load)(struct store *st, enum store_load what, store_row_cb cb, void *ctx,
		    struct tk_error *err);
	int (*load_settled)(struct store *st, store_settled_cb cb, void *ctx, struct tk_error *err);
	int (*get_job)(struct store *st, int64_t id, char **ret, size_t *len, struct tk_error *err);
	int (*meta_get)(struct store *st, const char *key, char **ret, struct tk_error *err);
	int (*apply)(struct store *st, const struct store_batch *b, struct tk_error *err);
	int (*acct_cursor_new)(struct store *st, struct store_acct_cursor **ret,
			       struct tk_error *err);
	int (*is_empty)(struct store *st, bool *ret, struct tk_error *err);
	int (*quarantine)(struct store *st, const char *kind, const char *key, const char *reason,
			  int64_t now_ms, struct tk_error *err);
	/* every row of t in its key's order */
	int (*dump)(struct store *st, const struct table_desc *t, store_dump_cb cb, void *ctx,
		    struct tk_error *err);
	/* BEGIN, COMMIT, ROLLBACK (for a copy) */
	int (*exec)(struct store *st, const char *sql, struct tk_error *err);
	/* rows[0..n) into t, each row ncols values, inside a transaction exec
	 * began */
	int (*insert)(struct store *st, const struct table_desc *t, const struct store_value *rows,
		      size_t n, struct tk_error *err);
	/* the lease (NULL: this kind of store has none) */
	int (*lease_get)(struct store *st, struct store_lease *ret, struct tk_error *err);
	int (*lease_take)(struct store *st, const char *holder, const char *url, int64_t ttl_ms,
			  struct store_lease *ret, struct tk_error *err);
	void (*lease_hold)(struct store *st, const char *holder, int64_t term, int64_t ttl_ms);
	/* store_changes (NULL: this kind of store keeps no marks) */
	int (*changes)(struct store *st, int64_t *mark, store_change_cb cb, void *ctx,
		       struct store_counts *counts, struct tk_error *err);
};

struct store {
	const struct store_ops *ops;
	enum store_kind kind;
	int version;
	bool leased; /* store_lease_hold: even an empty batch goes, to renew it */
};

struct store_acct_cursor_ops {
	void (*destroy)(struct store_acct_cursor *c);
	void (*pause)(struct store_acct_cursor *c);
	int (*job)(struct store_acct_cursor *c, int64_t job_id, store_acct_cb cb, void *ctx,
		   struct tk_error *err);
};

struct store_acct_cursor {
	const struct store_acct_cursor_ops *ops;
};

/* The migrations both implementations follow, by number: the schema after
 * migration i is version i + 1. */
#define STORE_SCHEMA_VERSION 13

int store_sqlite_open(const char *path, bool reader, struct store **ret, struct tk_error *err);
int store_sqlite_backup(const char *src, const char *dst, struct tk_error *err);
int store_pg_open(const char *url, bool reader, struct store **ret, struct tk_error *err);
