/*
 * The SQLite store. One file, WAL journal, synchronous=FULL so a committed
 * batch survives power loss, numbered migrations tracked in user_version,
 * statements prepared once, BEGIN IMMEDIATE for every batch, and one function
 * that turns SQLite's error codes into -errno and text.
 *
 * Each job and node is one row holding its JSON document, plus the columns
 * queries need. The documents are produced and validated by src/model.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum stmt_id {
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_PUT_JOB,
	ST_PUT_NODE,
	ST_DEL_NODE,
	ST_PUT_META,
	ST_GET_META,
	ST_LOAD_JOBS,
	ST_LOAD_NODES,
	ST_PUT_QUEUE,
	ST_LOAD_QUEUES,
	ST_PUT_USER,
	ST_DEL_USER,
	ST_LOAD_USERS,
	ST_ADD_AUDIT,
	ST_LOAD_AUDIT,
	ST_LOAD_SETTLED,
	ST_GET_JOB,
	ST_DEL_ACCT,
	ST_PUT_ACCT,
	ST_STRIP_JOB,
	ST_DEL_JOB,
	ST_AUDIT_FLOOR,
	ST_PRUNE_AUDIT,
	ST_ADD_CONFIG,
	ST_LOAD_CONFIG,
	ST_MAX
};

static const char *const stmt_sql[ST_MAX] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_PUT_JOB] = "INSERT INTO jobs (id, state, owner, settled_ms, doc) "
		       "VALUES (?1, ?2, ?3, ?4, ?5) "
		       "ON CONFLICT(id) DO UPDATE SET state = excluded.state, "
		       "settled_ms = excluded.settled_ms, doc = excluded.doc",
	[ST_PUT_NODE] = "INSERT INTO nodes (name, doc) VALUES (?1, ?2) "
			"ON CONFLICT(name) DO UPDATE SET doc = excluded.doc",
	[ST_DEL_NODE] = "DELETE FROM nodes WHERE name = ?1",
	[ST_PUT_META] = "INSERT INTO meta (key, value) VALUES (?1, ?2) "
			"ON CONFLICT(key) DO UPDATE SET value = excluded.value",
	[ST_GET_META] = "SELECT value FROM meta WHERE key = ?1",
	[ST_LOAD_JOBS] = "SELECT id, doc FROM jobs WHERE settled_ms = 0 ORDER BY id",
	[ST_LOAD_NODES] = "SELECT name, doc FROM nodes ORDER BY name",
	[ST_PUT_QUEUE] = "INSERT INTO queues (name, doc) VALUES (?1, ?2) "
			 "ON CONFLICT(name) DO UPDATE SET doc = excluded.doc",
	[ST_LOAD_QUEUES] = "SELECT name, doc FROM queues ORDER BY name",
	[ST_PUT_USER] = "INSERT INTO users (name, doc) VALUES (?1, ?2) "
			"ON CONFLICT(name) DO UPDATE SET doc = excluded.doc",
	[ST_DEL_USER] = "DELETE FROM users WHERE name = ?1",
	[ST_LOAD_USERS] = "SELECT name, doc FROM users ORDER BY name",
	[ST_ADD_AUDIT] = "INSERT INTO audit (at_ms, who, doc) VALUES (?1, ?2, ?3)",
	[ST_LOAD_AUDIT] = "SELECT seq, doc FROM (SELECT seq, doc FROM audit ORDER BY seq DESC "
			  "LIMIT " STORE_AUDIT_RECENT_S ") ORDER BY seq",
	[ST_LOAD_SETTLED] = "SELECT id, state, owner, settled_ms, doc = '' FROM jobs WHERE "
			    "settled_ms > 0",
	[ST_GET_JOB] = "SELECT doc FROM jobs WHERE id = ?1",
	[ST_DEL_ACCT] = "DELETE FROM acct WHERE key >= ?1 AND key < ?2",
	[ST_PUT_ACCT] = "INSERT INTO acct (key, owner, queue, state, model, start_ms, end_ms, "
			"gpu_hours, busy_hours, cost, energy_j, doc, good_hours, service) VALUES "
			"(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
	[ST_STRIP_JOB] = "UPDATE jobs SET doc = '' WHERE id = ?1 AND settled_ms > 0",
	[ST_DEL_JOB] = "DELETE FROM jobs WHERE id = ?1 AND settled_ms > 0",
	[ST_AUDIT_FLOOR] = "INSERT INTO meta (key, value) VALUES ('audit_keep_from', ?1) "
			   "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
	[ST_PRUNE_AUDIT] = "DELETE FROM audit WHERE seq IN (SELECT seq FROM audit WHERE at_ms < ?1 "
			   "ORDER BY seq LIMIT ?2)",
	[ST_ADD_CONFIG] = "INSERT INTO config (version, at_ms, who, doc) VALUES (?1, ?2, ?3, ?4)",
	[ST_LOAD_CONFIG] = "SELECT version, doc FROM config ORDER BY version",
};

/* Migrations: migrations[i] takes the schema from version i to i+1. */
static const char *const migrations[] = {
	"CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL, doc TEXT NOT NULL);"
	"CREATE INDEX jobs_by_state ON jobs (state);"
	"CREATE TABLE nodes (name TEXT PRIMARY KEY, doc TEXT NOT NULL);"
	"CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
	/* 2: queues with quotas and fair-share usage */
	"CREATE TABLE queues (name TEXT PRIMARY KEY, doc TEXT NOT NULL);",
	/* 3: users and their token hashes */
	"CREATE TABLE users (name TEXT PRIMARY KEY, doc TEXT NOT NULL);",
	/* 4: rows set aside because they did not decode (--quarantine-bad-rows) */
	"CREATE TABLE quarantine (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, "
	"key TEXT NOT NULL, doc TEXT, reason TEXT NOT NULL, at_ms INTEGER NOT NULL);",
	/* 5: the audit trail, written with the change it records, never rewritten */
	"CREATE TABLE audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, at_ms INTEGER NOT NULL, "
	"who TEXT NOT NULL, doc TEXT NOT NULL);"
	"CREATE INDEX audit_by_time ON audit (at_ms);"
	"CREATE TRIGGER audit_kept_u BEFORE UPDATE ON audit BEGIN "
	"SELECT RAISE(ABORT, 'audit rows are never rewritten'); END;"
	"CREATE TRIGGER audit_kept_d BEFORE DELETE ON audit BEGIN "
	"SELECT RAISE(ABORT, 'audit rows are never rewritten'); END;",
	/* 6: a job's owner, and when it settled (final, every attempt ended; 0:
	 * not yet), so that a start reads only the jobs not settled and knows
	 * the others from one index; rows written before say 0 and are read
	 * whole once, then written again with both */
	"ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE jobs ADD COLUMN settled_ms INTEGER NOT NULL DEFAULT 0;"
	"DROP INDEX jobs_by_state;"
	"CREATE INDEX jobs_by_settled ON jobs (settled_ms, state, owner);",
	/* 7: a record per attempt of each settled job, keyed job id x
	 * STORE_ACCT_ATTEMPTS + attempt (so a job's records lie together, in
	 * id order), for accounting without reading the jobs; the jobs
	 * settled before it get theirs from the server, which goes up to
	 * acct_fill_to (from acct_fill_next) in slices */
	"CREATE TABLE acct (key INTEGER PRIMARY KEY, owner TEXT NOT NULL, queue TEXT NOT NULL, "
	"state TEXT NOT NULL, model TEXT NOT NULL, start_ms INTEGER NOT NULL, end_ms INTEGER "
	"NOT NULL, gpu_hours REAL NOT NULL, busy_hours REAL NOT NULL, cost REAL NOT NULL, "
	"energy_j REAL NOT NULL, doc TEXT NOT NULL);"
	"INSERT INTO meta (key, value) SELECT 'acct_fill_to', CAST(max(id) AS TEXT) FROM jobs "
	"WHERE settled_ms > 0 HAVING count(*) > 0;",
	/* 8: retention: audit rows older than keep_audit go, and only they
	 * (the server raises audit_keep_from first; every other delete is
	 * refused as before) */
	"DROP TRIGGER IF EXISTS audit_kept_d;"
	"CREATE TRIGGER audit_kept_d BEFORE DELETE ON audit WHEN old.at_ms >= coalesce((SELECT "
	"CAST(value AS INTEGER) FROM meta WHERE key = 'audit_keep_from'), 0) BEGIN "
	"SELECT RAISE(ABORT, 'audit rows are never rewritten'); END;",
	/* 9: the active server's lease, where servers share the store (only
	 * PostgreSQL's is used; the tables stay alike) */
	"CREATE TABLE IF NOT EXISTS lease (name TEXT PRIMARY KEY, holder TEXT NOT NULL, url "
	"TEXT NOT NULL, "
	"term INTEGER NOT NULL, expires_ms INTEGER NOT NULL);",
	/* 10: the marks of deleted rows standbys follow (only PostgreSQL's are
	 * used, with a change mark in every row; the tables stay alike) */
	"CREATE TABLE IF NOT EXISTS gone (chg INTEGER PRIMARY KEY, kind TEXT NOT NULL, key TEXT "
	"NOT NULL, at_ms INTEGER NOT NULL);",
	/* 11: each attempt's GPU-hours of kept training (goodput); -1 for
	 * the records written before */
	"ALTER TABLE acct ADD COLUMN good_hours REAL NOT NULL DEFAULT -1;",
	/* 12: the cluster's configuration, version by version (tenk config),
	 * never rewritten (a store set back to an earlier version by hand may
	 * have it already, as 9 and 10 may) */
	"CREATE TABLE IF NOT EXISTS config (version INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, "
	"who TEXT NOT NULL, doc TEXT NOT NULL);"
	"CREATE TRIGGER IF NOT EXISTS config_kept_u BEFORE UPDATE ON config BEGIN "
	"SELECT RAISE(ABORT, 'configuration versions are never rewritten'); END;"
	"CREATE TRIGGER IF NOT EXISTS config_kept_d BEFORE DELETE ON config BEGIN "
	"SELECT RAISE(ABORT, 'configuration versions are never rewritten'); END;",
	/* 13: the service a job is a replica of (tenk serve; "" for none and
	 * for the records written before) */
	"ALTER TABLE acct ADD COLUMN service TEXT NOT NULL DEFAULT '';",
};

static_assert(ARRAY_SIZE(migrations) == STORE_SCHEMA_VERSION, "a migration for every version");

struct sq {
	struct store base;
	sqlite3 *db;
	sqlite3_stmt *stmt[ST_MAX];
	/* the writer's journal, PATH-wal, as it was when first seen: a file
	 * removed or replaced under a running writer takes every commit since
	 * its last checkpoint with it, silently (wal_check) */
	char *wal;
	bool wal_seen;
	dev_t wal_dev;
	ino_t wal_ino;
};

/* Is the journal still the file this connection writes? When it was
 * removed (or another put in its place), what it held is copied into the
 * database now, from the file SQLite still has open, and the writer must
 * stop: -ESTALE, saying what happened and what to do. */
static int wal_check(struct sq *st, struct tk_error *err)
{
	if (!st->wal)
		return 0;
	struct stat sb;
	bool there = stat(st->wal, &sb) == 0;
	if (!there && errno != ENOENT)
		return 0; /* cannot tell */
	if (!st->wal_seen) {
		if (there) {
			st->wal_seen = true;
			st->wal_dev = sb.st_dev;
			st->wal_ino = sb.st_ino;
		}
		return 0;
	}
	if (there && sb.st_dev == st->wal_dev && sb.st_ino == st->wal_ino)
		return 0;
	int rc = sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_FULL, NULL, NULL);
	return tk_errorf(err, -ESTALE,
			 "store: %s was %s while the server ran; %s. Stopping: never remove the "
			 "-wal file of a database in use (to go back to a backup, stop the "
			 "server first)",
			 st->wal, there ? "replaced" : "removed",
			 rc == SQLITE_OK ? "every commit it held is now in the database"
					 : "the commits it held could not be saved");
}

/* The one place SQLite's result codes become -errno and text. */
static int fail(struct sq *st, int rc, struct tk_error *err, const char *what)
{
	int code;
	switch (rc & 0xff) {
	case SQLITE_NOMEM:
		code = -ENOMEM;
		break;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		code = -EBUSY;
		break;
	case SQLITE_FULL:
		code = -ENOSPC;
		break;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		code = -EACCES;
		break;
	case SQLITE_CANTOPEN:
		code = -ENOENT;
		break;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		code = -EBADMSG;
		break;
	case SQLITE_CONSTRAINT:
		code = -EEXIST;
		break;
	default:
		code = -EIO;
	}
	const char *msg = st && st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc);
	return tk_errorf(err, code, "store: %s: %s", what, msg);
}

static int exec(struct sq *st, const char *sql, struct tk_error *err)
{
	int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return fail(st, rc, err, sql);
	return 0;
}

static int get_version(struct sq *st, int *ret, struct tk_error *err)
{
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return fail(st, rc, err, "reading the schema version");
	rc = sqlite3_step(s);
	if (rc != SQLITE_ROW) {
		sqlite3_finalize(s);
		return fail(st, rc, err, "reading the schema version");
	}
	*ret = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	return 0;
}

static int migrate(struct sq *st, struct tk_error *err)
{
	int v = 0, r;
	if ((r = get_version(st, &v, err)) < 0)
		return r;
	int latest = (int)ARRAY_SIZE(migrations);
	if (v > latest)
		return tk_errorf(err, -EPROTO,
				 "store: schema version %d is newer than this tenk knows (%d); "
				 "upgrade tenk",
				 v, latest);
	for (; v < latest; v++) {
		char pragma[64];
		snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", v + 1);
		if ((r = exec(st, "BEGIN IMMEDIATE", err)) < 0)
			return r;
		if ((r = exec(st, migrations[v], err)) < 0 || (r = exec(st, pragma, err)) < 0) {
			exec(st, "ROLLBACK", NULL);
			return r;
		}
		if ((r = exec(st, "COMMIT", err)) < 0)
			return r;
	}
	st->base.version = v;
	return 0;
}

static const struct store_ops sq_ops;
static void sq_destroy(struct store *base);

/* (base is each one's first member) */
#define SQ(b) ((struct sq *)(b))

/* The store at path; a reader opens it read-only, after a writer made
 * it (no migration). */
int store_sqlite_open(const char *path, bool reader, struct store **ret, struct tk_error *err)
{
	struct sq *st = xcalloc(1, sizeof(*st));
	st->base.ops = &sq_ops;
	st->base.kind = STORE_SQLITE;
	/* created 0600: SQLite gives its journal files the database's mode */
	int fd = reader ? -1 : open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0)
		close(fd);
	int flags = reader ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	int rc = sqlite3_open_v2(path, &st->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
	int r;
	if (rc != SQLITE_OK) {
		r = fail(st, rc, err, path);
		sq_destroy(&st->base);
		return r;
	}
	sqlite3_extended_result_codes(st->db, 1);
	int latest = STORE_SCHEMA_VERSION;
	if (reader) {
		if ((r = exec(st, "PRAGMA busy_timeout = 5000", err)) == 0 &&
		    (r = get_version(st, &st->base.version, err)) == 0 &&
		    st->base.version != latest)
			r = tk_errorf(err, -EPROTO, "store: %s is at schema %d, not %d", path,
				      st->base.version, latest);
	} else if ((r = exec(st, "PRAGMA journal_mode = WAL", err)) == 0 &&
		   (r = exec(st, "PRAGMA synchronous = FULL", err)) == 0 &&
		   (r = exec(st, "PRAGMA foreign_keys = ON", err)) == 0 &&
		   (r = exec(st, "PRAGMA busy_timeout = 5000", err)) == 0) {
		r = migrate(st, err);
	}
	if (r < 0) {
		sq_destroy(&st->base);
		return r;
	}
	for (int i = 0; i < ST_MAX; i++) {
		rc = sqlite3_prepare_v3(st->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&st->stmt[i], NULL);
		if (rc != SQLITE_OK) {
			r = fail(st, rc, err, stmt_sql[i]);
			sq_destroy(&st->base);
			return r;
		}
	}
	if (!reader) {
		st->wal = xasprintf("%s-wal", path);
		wal_check(st, NULL); /* (notes it: the migration's reads made it) */
	}
	*ret = &st->base;
	return 0;
}

static void sq_destroy(struct store *base)
{
	struct sq *st = SQ(base);
	for (int i = 0; i < ST_MAX; i++)
		sqlite3_finalize(st->stmt[i]);
	sqlite3_close(st->db);
	free(st->wal);
	free(st);
}

static int sq_load(struct store *base, enum store_load what, store_row_cb cb, void *ctx,
		   struct tk_error *err)
{
	static const enum stmt_id ids[LOAD_MAX] = {
		[LOAD_JOBS] = ST_LOAD_JOBS,	[LOAD_NODES] = ST_LOAD_NODES,
		[LOAD_QUEUES] = ST_LOAD_QUEUES, [LOAD_USERS] = ST_LOAD_USERS,
		[LOAD_AUDIT] = ST_LOAD_AUDIT,	[LOAD_CONFIG] = ST_LOAD_CONFIG};
	struct sq *st = SQ(base);
	sqlite3_stmt *s = st->stmt[ids[what]];
	int r = 0, rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *key = (const char *)sqlite3_column_text(s, 0);
		const char *doc = (const char *)sqlite3_column_text(s, 1);
		size_t len = (size_t)sqlite3_column_bytes(s, 1);
		if (!key || !doc) {
			r = tk_errorf(err, -EBADMSG, "store: a row has no key or document");
			break;
		}
		if ((r = cb(ctx, key, doc, len)) < 0)
			break;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = fail(st, rc, err, "loading");
	sqlite3_reset(s);
	return r;
}

static int sq_load_settled(struct store *base, store_settled_cb cb, void *ctx, struct tk_error *err)
{
	struct sq *st = SQ(base);
	sqlite3_stmt *s = st->stmt[ST_LOAD_SETTLED];
	int r = 0, rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *state = (const char *)sqlite3_column_text(s, 1);
		const char *owner = (const char *)sqlite3_column_text(s, 2);
		if (!state || !owner) {
			r = tk_errorf(err, -EBADMSG, "store: job %lld has no state or owner",
				      (long long)sqlite3_column_int64(s, 0));
			break;
		}
		if ((r = cb(ctx, sqlite3_column_int64(s, 0), state, owner,
			    sqlite3_column_int64(s, 3), sqlite3_column_int(s, 4) != 0)) < 0)
			break;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = fail(st, rc, err, "loading the settled jobs");
	sqlite3_reset(s);
	return r;
}

static int sq_get_job(struct store *base, int64_t id, char **ret, size_t *len, struct tk_error *err)
{
	struct sq *st = SQ(base);
	sqlite3_stmt *s = st->stmt[ST_GET_JOB];
	sqlite3_bind_int64(s, 1, id);
	int rc = sqlite3_step(s);
	int r = 0;
	if (rc == SQLITE_ROW) {
		*len = (size_t)sqlite3_column_bytes(s, 0);
		*ret = xmalloc(*len + 1);
		memcpy(*ret, sqlite3_column_text(s, 0), *len);
		(*ret)[*len] = '\0';
	} else if (rc == SQLITE_DONE) {
		r = tk_errorf(err, -ENOENT, "store: no job %lld", (long long)id);
	} else {
		r = fail(st, rc, err, "reading a job");
	}
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return r;
}

static int sq_meta_get(struct store *base, const char *key, char **ret, struct tk_error *err)
{
	struct sq *st = SQ(base);
	sqlite3_stmt *s = st->stmt[ST_GET_META];
	sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
	int rc = sqlite3_step(s);
	int r;
	if (rc == SQLITE_ROW) {
		*ret = xstrdup((const char *)sqlite3_column_text(s, 0));
		r = 0;
	} else if (rc == SQLITE_DONE) {
		r = -ENOENT;
	} else {
		r = fail(st, rc, err, "reading metadata");
	}
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return r;
}

static int step_once(struct sq *st, enum stmt_id id, struct tk_error *err, const char *what)
{
	sqlite3_stmt *s = st->stmt[id];
	int rc = sqlite3_step(s);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	if (rc != SQLITE_DONE)
		return fail(st, rc, err, what);
	return 0;
}

static int apply_op(struct sq *st, const struct op *o, struct tk_error *err)
{
	sqlite3_stmt *s;
	int r;
	switch (o->kind) {
	case OP_PUT_JOB:
		s = st->stmt[ST_PUT_JOB];
		sqlite3_bind_int64(s, 1, o->id);
		sqlite3_bind_text(s, 2, o->key, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 3, o->key2, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 4, o->n);
		sqlite3_bind_text(s, 5, o->doc, -1, SQLITE_STATIC);
		return step_once(st, ST_PUT_JOB, err, "writing a job");
	case OP_PUT_NODE:
		s = st->stmt[ST_PUT_NODE];
		sqlite3_bind_text(s, 1, o->key, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, o->doc, -1, SQLITE_STATIC);
		return step_once(st, ST_PUT_NODE, err, "writing a node");
	case OP_DEL_NODE:
		s = st->stmt[ST_DEL_NODE];
		sqlite3_bind_text(s, 1, o->key, -1, SQLITE_STATIC);
		return step_once(st, ST_DEL_NODE, err, "deleting a node");
	case OP_PUT_QUEUE:
		s = st->stmt[ST_PUT_QUEUE];
		sqlite3_bind_text(s, 1, o->key, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, o->doc, -1, SQLITE_STATIC);
		return step_once(st, ST_PUT_QUEUE, err, "writing a queue");
	case OP_PUT_USER:
		s = st->stmt[ST_PUT_USER];
		sqlite3_bind_text(s, 1, o->key, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, o->doc, -1, SQLITE_STATIC);
		return step_once(st, ST_PUT_USER, err, "writing a user");
	case OP_DEL_USER:
		s = st->stmt[ST_DEL_USER];
		sqlite3_bind_text(s, 1, o->key, -1, SQLITE_STATIC);
		return step_once(st, ST_DEL_USER, err, "deleting a user");
	case OP_ADD_AUDIT:
		s = st->stmt[ST_ADD_AUDIT];
		sqlite3_bind_int64(s, 1, o->id);
		sqlite3_bind_text(s, 2, o->key, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 3, o->doc, -1, SQLITE_STATIC);
		return step_once(st, ST_ADD_AUDIT, err, "writing an audit row");
	case OP_DEL_ACCT:
		s = st->stmt[ST_DEL_ACCT];
		sqlite3_bind_int64(s, 1, o->id * STORE_ACCT_ATTEMPTS);
		sqlite3_bind_int64(s, 2, (o->id + 1) * STORE_ACCT_ATTEMPTS);
		return step_once(st, ST_DEL_ACCT, err, "deleting a job's accounting");
	case OP_PUT_ACCT: {
		const struct store_acct *a = o->acct;
		s = st->stmt[ST_PUT_ACCT];
		sqlite3_bind_int64(s, 1, a->job_id * STORE_ACCT_ATTEMPTS + a->attempt);
		const char *text[] = {a->owner, a->queue, a->state, a->model};
		for (int i = 0; i < 4; i++)
			sqlite3_bind_text(s, 2 + i, text[i], -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 6, a->start_ms);
		sqlite3_bind_int64(s, 7, a->end_ms);
		sqlite3_bind_double(s, 8, a->gpu_hours);
		sqlite3_bind_double(s, 9, a->busy_hours);
		sqlite3_bind_double(s, 10, a->cost);
		sqlite3_bind_double(s, 11, a->energy_j);
		sqlite3_bind_text(s, 12, a->doc, -1, SQLITE_STATIC);
		sqlite3_bind_double(s, 13, a->good_hours);
		sqlite3_bind_text(s, 14, a->service ? a->service : "", -1, SQLITE_STATIC);
		return step_once(st, ST_PUT_ACCT, err, "writing an attempt's accounting");
	}
	case OP_STRIP_JOB:
		s = st->stmt[ST_STRIP_JOB];
		sqlite3_bind_int64(s, 1, o->id);
		return step_once(st, ST_STRIP_JOB, err, "removing a job's record");
	case OP_DEL_JOB:
		s = st->stmt[ST_DEL_JOB];
		sqlite3_bind_int64(s, 1, o->id);
		return step_once(st, ST_DEL_JOB, err, "removing a job");
	case OP_PRUNE_AUDIT: {
		char floor[32];
		snprintf(floor, sizeof(floor), "%lld", (long long)o->id);
		s = st->stmt[ST_AUDIT_FLOOR];
		sqlite3_bind_text(s, 1, floor, -1, SQLITE_TRANSIENT);
		if ((r = step_once(st, ST_AUDIT_FLOOR, err, "raising the audit floor")) < 0)
			return r;
		s = st->stmt[ST_PRUNE_AUDIT];
		sqlite3_bind_int64(s, 1, o->id);
		sqlite3_bind_int64(s, 2, o->n);
		return step_once(st, ST_PRUNE_AUDIT, err, "removing old audit rows");
	}
	case OP_ADD_CONFIG:
		s = st->stmt[ST_ADD_CONFIG];
		sqlite3_bind_int64(s, 1, o->id);
		sqlite3_bind_int64(s, 2, o->n);
		sqlite3_bind_text(s, 3, o->key, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 4, o->doc, -1, SQLITE_STATIC);
		return step_once(st, ST_ADD_CONFIG, err, "writing a configuration version");
	case OP_PUT_META:
		s = st->stmt[ST_PUT_META];
		sqlite3_bind_text(s, 1, o->key, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, o->doc, -1, SQLITE_STATIC);
		return step_once(st, ST_PUT_META, err, "writing metadata");
	}
	return -EINVAL;
}

static int sq_apply(struct store *base, const struct store_batch *b, struct tk_error *err)
{
	struct sq *st = SQ(base);
	int r;
	if ((r = step_once(st, ST_BEGIN, err, "beginning a transaction")) < 0)
		return r;
	for (size_t i = 0; i < b->n; i++)
		if ((r = apply_op(st, &b->ops[i], err)) < 0) {
			step_once(st, ST_ROLLBACK, NULL, "rolling back");
			return r;
		}
	if ((r = step_once(st, ST_COMMIT, err, "committing")) < 0) {
		step_once(st, ST_ROLLBACK, NULL, "rolling back");
		return r;
	}
	/* committed, but to the file that is still there? */
	return wal_check(st, err);
}

/* ---- reading the accounting records ------------------------------------------------- */

/* A statement stepped through the table in key order: every key from next
 * up to cur (the record it stands on, has_row) or to the end is unread and
 * holds no record but cur. */
static const struct store_acct_cursor_ops sq_cursor_ops;

struct sq_cursor {
	struct store_acct_cursor base;
	struct sq *st;
	sqlite3_stmt *q;
	bool open, has_row;
	int64_t next, cur;
};

#define CUR(b) ((struct sq_cursor *)(b))

/* Jumps of more than this many jobs seek rather than step. */
#define ACCT_SEEK_JOBS 64

static int sq_cursor_new(struct store *base, struct store_acct_cursor **ret, struct tk_error *err)
{
	struct sq *st = SQ(base);
	static const char sql[] =
		"SELECT key, owner, queue, state, model, start_ms, end_ms, gpu_hours, busy_hours, "
		"cost, energy_j, doc, good_hours, service FROM acct WHERE key >= ?1 ORDER BY key";
	struct sq_cursor *c = xcalloc(1, sizeof(*c));
	c->base.ops = &sq_cursor_ops;
	c->st = st;
	int rc = sqlite3_prepare_v2(st->db, sql, -1, &c->q, NULL);
	if (rc != SQLITE_OK) {
		free(c);
		return fail(st, rc, err, "reading accounting");
	}
	*ret = &c->base;
	return 0;
}

static void sq_cursor_destroy(struct store_acct_cursor *base)
{
	struct sq_cursor *c = CUR(base);
	sqlite3_finalize(c->q);
	free(c);
}

static void cursor_pause(struct sq_cursor *c)
{
	sqlite3_reset(c->q);
	c->open = c->has_row = false;
}

static int acct_step(struct sq_cursor *c, struct tk_error *err)
{
	if (c->has_row)
		c->next = c->cur + 1;
	int rc = sqlite3_step(c->q);
	c->has_row = rc == SQLITE_ROW;
	if (c->has_row)
		c->cur = sqlite3_column_int64(c->q, 0);
	else if (rc != SQLITE_DONE) {
		int r = fail(c->st, rc, err, "reading accounting");
		cursor_pause(c);
		return r;
	}
	return 0;
}

static int acct_seek(struct sq_cursor *c, int64_t key, struct tk_error *err)
{
	sqlite3_reset(c->q);
	sqlite3_bind_int64(c->q, 1, key);
	c->open = true;
	c->has_row = false;
	c->next = key;
	return acct_step(c, err);
}

static void sq_cursor_pause(struct store_acct_cursor *base)
{
	cursor_pause(CUR(base));
}

static int sq_cursor_job(struct store_acct_cursor *base, int64_t job_id, store_acct_cb cb,
			 void *ctx, struct tk_error *err)
{
	struct sq_cursor *c = CUR(base);
	int64_t lo = job_id * STORE_ACCT_ATTEMPTS, hi = lo + STORE_ACCT_ATTEMPTS;
	int r = 0;
	if (!c->open || lo < c->next)
		r = acct_seek(c, lo, err);
	while (r == 0 && c->has_row && c->cur < lo)
		r = c->cur + ACCT_SEEK_JOBS * STORE_ACCT_ATTEMPTS < lo ? acct_seek(c, lo, err)
								       : acct_step(c, err);
	for (; r == 0 && c->has_row && c->cur < hi; r = acct_step(c, err)) {
		sqlite3_stmt *q = c->q;
		const char *text[5];
		for (int i = 0; i < 4; i++)
			text[i] = (const char *)sqlite3_column_text(q, 1 + i);
		text[4] = (const char *)sqlite3_column_text(q, 11);
		for (int i = 0; i < 5; i++)
			if (!text[i])
				return tk_errorf(err, -EBADMSG,
						 "store: job %lld's accounting has an empty field",
						 (long long)job_id);
		struct store_acct row = {
			.job_id = job_id,
			.attempt = (int)(c->cur - lo),
			.owner = text[0],
			.queue = text[1],
			.state = text[2],
			.model = text[3],
			.start_ms = sqlite3_column_int64(q, 5),
			.end_ms = sqlite3_column_int64(q, 6),
			.gpu_hours = sqlite3_column_double(q, 7),
			.busy_hours = sqlite3_column_double(q, 8),
			.cost = sqlite3_column_double(q, 9),
			.energy_j = sqlite3_column_double(q, 10),
			.doc = text[4],
			.good_hours = sqlite3_column_double(q, 12),
			.service = (const char *)sqlite3_column_text(q, 13),
		};
		if (!row.service)
			row.service = "";
		if ((r = cb(ctx, &row)) < 0)
			return r;
	}
	return r;
}

/* ---- the store as a whole ------------------------------------------------------------ */

static int sq_is_empty(struct store *base, bool *ret, struct tk_error *err)
{
	struct sq *st = SQ(base);
	static const char sql[] = "SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM "
				  "nodes) + (SELECT count(*) FROM users) + (SELECT count(*) FROM "
				  "queues) + (SELECT count(*) FROM meta)";
	sqlite3_stmt *q;
	int rc = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL);
	if (rc != SQLITE_OK)
		return fail(st, rc, err, "counting rows");
	rc = sqlite3_step(q);
	int r = 0;
	if (rc == SQLITE_ROW)
		*ret = sqlite3_column_int64(q, 0) == 0;
	else
		r = fail(st, rc, err, "counting rows");
	sqlite3_finalize(q);
	return r;
}

/* The table of a kind of row, and its key column. */
static const char *kind_table(const char *kind, const char **key_col)
{
	*key_col = strcmp(kind, "job") == 0 ? "id" : "name";
	return strcmp(kind, "job") == 0	    ? "jobs"
	       : strcmp(kind, "node") == 0  ? "nodes"
	       : strcmp(kind, "queue") == 0 ? "queues"
	       : strcmp(kind, "user") == 0  ? "users"
					    : NULL;
}

static int sq_quarantine(struct store *base, const char *kind, const char *key, const char *reason,
			 int64_t now_ms, struct tk_error *err)
{
	struct sq *st = SQ(base);
	const char *col;
	const char *table = kind_table(kind, &col);
	if (!table)
		return tk_errorf(err, -EINVAL, "store: no kind of row \"%s\"", kind);
	_cleanup_free_ char *copy =
		xasprintf("INSERT INTO quarantine (kind, key, doc, reason, at_ms) SELECT ?1, ?2, "
			  "doc, ?3, ?4 FROM %s WHERE %s = ?2",
			  table, col);
	_cleanup_free_ char *del = xasprintf("DELETE FROM %s WHERE %s = ?1", table, col);
	int r = exec(st, "BEGIN IMMEDIATE", err);
	if (r < 0)
		return r;
	sqlite3_stmt *a = NULL, *b = NULL;
	int rc = sqlite3_prepare_v2(st->db, copy, -1, &a, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(st->db, del, -1, &b, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(a, 1, kind, -1, SQLITE_STATIC);
		sqlite3_bind_text(a, 2, key, -1, SQLITE_STATIC);
		sqlite3_bind_text(a, 3, reason, -1, SQLITE_STATIC);
		sqlite3_bind_int64(a, 4, now_ms);
		sqlite3_bind_text(b, 1, key, -1, SQLITE_STATIC);
		rc = sqlite3_step(a);
		if (rc == SQLITE_DONE)
			rc = sqlite3_step(b);
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	sqlite3_finalize(a);
	sqlite3_finalize(b);
	if (rc != SQLITE_OK) {
		r = fail(st, rc, err, "setting a row aside");
		exec(st, "ROLLBACK", NULL);
		return r;
	}
	return exec(st, "COMMIT", err);
}

int store_sqlite_backup(const char *src, const char *dst, struct tk_error *err)
{
	sqlite3 *from = NULL, *to = NULL;
	int rc = sqlite3_open_v2(src, &from, SQLITE_OPEN_READONLY, NULL);
	if (rc != SQLITE_OK) {
		int r = tk_errorf(err, -EIO, "cannot open %s: %s", src,
				  from ? sqlite3_errmsg(from) : sqlite3_errstr(rc));
		sqlite3_close(from);
		return r;
	}
	int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		int e = errno;
		sqlite3_close(from);
		return tk_errorf(err, -e, "cannot create %s: %s", dst, strerror(e));
	}
	close(fd);
	rc = sqlite3_open_v2(dst, &to, SQLITE_OPEN_READWRITE, NULL);
	int r = 0;
	if (rc == SQLITE_OK) {
		/* every page in one step: one read transaction, so one moment */
		sqlite3_backup *b = sqlite3_backup_init(to, "main", from, "main");
		if (!b) {
			rc = sqlite3_errcode(to);
		} else {
			rc = sqlite3_backup_step(b, -1);
			sqlite3_backup_finish(b);
			rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
		}
	}
	if (rc != SQLITE_OK) {
		r = tk_errorf(err, -EIO, "backup of %s to %s: %s", src, dst,
			      to ? sqlite3_errmsg(to) : sqlite3_errstr(rc));
		unlink(dst);
	}
	sqlite3_close(to);
	sqlite3_close(from);
	return r;
}

/* ---- whole tables, for tenk store copy ------------------------------------------------ */

static int sq_exec(struct store *base, const char *sql, struct tk_error *err)
{
	return exec(SQ(base), sql, err);
}

static int sq_dump(struct store *base, const struct table_desc *t, store_dump_cb cb, void *ctx,
		   struct tk_error *err)
{
	struct sq *st = SQ(base);
	struct strbuf sql;
	strbuf_init(&sql);
	store_table_select(&sql, t);
	sqlite3_stmt *q;
	int rc = sqlite3_prepare_v2(st->db, sql.buf, -1, &q, NULL);
	strbuf_release(&sql);
	if (rc != SQLITE_OK)
		return fail(st, rc, err, t->name);
	struct store_value row[TABLE_COLS_MAX];
	int r = 0;
	while (r >= 0 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		for (int i = 0; i < t->ncols; i++) {
			row[i] = (struct store_value){0};
			switch (t->types[i]) {
			case COL_INT:
				row[i].i = sqlite3_column_int64(q, i);
				break;
			case COL_REAL:
				row[i].d = sqlite3_column_double(q, i);
				break;
			case COL_TEXT:
			case COL_TEXT_NULL:
				row[i].text = (const char *)sqlite3_column_text(q, i);
				if (!row[i].text && t->types[i] == COL_TEXT)
					row[i].text = "";
				break;
			}
		}
		r = cb(ctx, row);
	}
	if (r >= 0 && rc != SQLITE_DONE)
		r = fail(st, rc, err, t->name);
	sqlite3_finalize(q);
	return r;
}

static int sq_insert(struct store *base, const struct table_desc *t, const struct store_value *rows,
		     size_t n, struct tk_error *err)
{
	struct sq *st = SQ(base);
	struct strbuf sql;
	strbuf_init(&sql);
	store_table_insert(&sql, t, '?');
	sqlite3_stmt *q;
	int rc = sqlite3_prepare_v2(st->db, sql.buf, -1, &q, NULL);
	strbuf_release(&sql);
	if (rc != SQLITE_OK)
		return fail(st, rc, err, t->name);
	for (size_t k = 0; k < n && rc == SQLITE_OK; k++) {
		const struct store_value *row = &rows[k * (size_t)t->ncols];
		for (int i = 0; i < t->ncols; i++) {
			if (t->types[i] == COL_INT)
				sqlite3_bind_int64(q, i + 1, row[i].i);
			else if (t->types[i] == COL_REAL)
				sqlite3_bind_double(q, i + 1, row[i].d);
			else if (row[i].text)
				sqlite3_bind_text(q, i + 1, row[i].text, -1, SQLITE_STATIC);
			else
				sqlite3_bind_null(q, i + 1);
		}
		rc = sqlite3_step(q);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
		sqlite3_reset(q);
	}
	int r = rc == SQLITE_OK ? 0 : fail(st, rc, err, t->name);
	sqlite3_finalize(q);
	return r;
}

static const struct store_ops sq_ops = {
	.destroy = sq_destroy,
	.load = sq_load,
	.load_settled = sq_load_settled,
	.get_job = sq_get_job,
	.meta_get = sq_meta_get,
	.apply = sq_apply,
	.acct_cursor_new = sq_cursor_new,
	.is_empty = sq_is_empty,
	.quarantine = sq_quarantine,
	.exec = sq_exec,
	.dump = sq_dump,
	.insert = sq_insert,
};

static const struct store_acct_cursor_ops sq_cursor_ops = {
	.destroy = sq_cursor_destroy,
	.pause = sq_cursor_pause,
	.job = sq_cursor_job,
};
