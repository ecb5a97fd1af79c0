/*
 * The PostgreSQL store, through libpq: the same tables, migrations and
 * guarantees as the SQLite store (sqlite.c), for servers that share one
 * database. A batch is one transaction sent as a pipeline (every statement
 * without waiting for the one before, BEGIN to COMMIT), so a batch costs
 * about one round trip and one WAL flush however many rows it holds.
 *
 * The schema's version is the row of tenk_schema; migrations run in one
 * transaction under an advisory lock, so servers starting together migrate
 * once. Key columns compare as bytes (COLLATE "C"), as SQLite's do, so
 * both stores read rows in the same order.
 *
 * A connection that breaks is opened again at the next call; the call that
 * found it broken fails with -EIO, which the server retries. A password
 * never comes in the URL: libpq reads it from PGPASSFILE, or the file
 * passfile= names, or ~/.pgpass.
 *
 * libpq is loaded with dlopen when a PostgreSQL store is first opened, so
 * that tenk-daemon runs without it elsewhere: in a job's image (tenk
 * validate --image), on agents.
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- libpq, loaded when first needed ----------------------------------------------- */

#define PQ_FUNCS(X)                                                                                \
	X(PQclear)                                                                                 \
	X(PQconnectdbParams)                                                                       \
	X(PQconninfoFree)                                                                          \
	X(PQconninfoParse)                                                                         \
	X(PQenterPipelineMode)                                                                     \
	X(PQerrorMessage)                                                                          \
	X(PQexec)                                                                                  \
	X(PQexecPrepared)                                                                          \
	X(PQexitPipelineMode)                                                                      \
	X(PQfinish)                                                                                \
	X(PQflush)                                                                                 \
	X(PQfreemem)                                                                               \
	X(PQgetResult)                                                                             \
	X(PQgetisnull)                                                                             \
	X(PQgetlength)                                                                             \
	X(PQgetvalue)                                                                              \
	X(PQntuples)                                                                               \
	X(PQpipelineSync)                                                                          \
	X(PQprepare)                                                                               \
	X(PQreset)                                                                                 \
	X(PQresultErrorField)                                                                      \
	X(PQresultErrorMessage)                                                                    \
	X(PQresultStatus)                                                                          \
	X(PQsendFlushRequest)                                                                      \
	X(PQsendQueryParams)                                                                       \
	X(PQsendQueryPrepared)                                                                     \
	X(PQsetSingleRowMode)                                                                      \
	X(PQstatus)                                                                                \
	X(PQtransactionStatus)

static struct {
#define X(f) __typeof__(f) *f;
	PQ_FUNCS(X)
#undef X
} pq;

static pthread_once_t pq_once = PTHREAD_ONCE_INIT;
static char pq_error[256];

static void pq_load(void)
{
	void *lib = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(pq_error, sizeof(pq_error),
			 "PostgreSQL's client library is not installed here (libpq.so.5: %s); "
			 "install libpq5",
			 dlerror());
		return;
	}
#define X(f)                                                                                       \
	if (!(*(void **)&pq.f = dlsym(lib, #f)) && !pq_error[0])                                   \
		snprintf(pq_error, sizeof(pq_error),                                               \
			 "libpq.so.5 has no %s: PostgreSQL 14's libpq or newer is needed", #f);
	PQ_FUNCS(X)
#undef X
}

#define PQclear pq.PQclear
#define PQconnectdbParams pq.PQconnectdbParams
#define PQconninfoFree pq.PQconninfoFree
#define PQconninfoParse pq.PQconninfoParse
#define PQenterPipelineMode pq.PQenterPipelineMode
#define PQerrorMessage pq.PQerrorMessage
#define PQexec pq.PQexec
#define PQexecPrepared pq.PQexecPrepared
#define PQexitPipelineMode pq.PQexitPipelineMode
#define PQfinish pq.PQfinish
#define PQflush pq.PQflush
#define PQfreemem pq.PQfreemem
#define PQgetResult pq.PQgetResult
#define PQgetisnull pq.PQgetisnull
#define PQgetlength pq.PQgetlength
#define PQgetvalue pq.PQgetvalue
#define PQntuples pq.PQntuples
#define PQpipelineSync pq.PQpipelineSync
#define PQprepare pq.PQprepare
#define PQreset pq.PQreset
#define PQresultErrorField pq.PQresultErrorField
#define PQresultErrorMessage pq.PQresultErrorMessage
#define PQresultStatus pq.PQresultStatus
#define PQsendFlushRequest pq.PQsendFlushRequest
#define PQsendQueryParams pq.PQsendQueryParams
#define PQsendQueryPrepared pq.PQsendQueryPrepared
#define PQsetSingleRowMode pq.PQsetSingleRowMode
#define PQstatus pq.PQstatus
#define PQtransactionStatus pq.PQtransactionStatus

enum stmt_id {
	P_PUT_JOB,
	P_PUT_NODE,
	P_DEL_NODE,
	P_PUT_META,
	P_GET_META,
	P_LOAD_JOBS,
	P_LOAD_NODES,
	P_PUT_QUEUE,
	P_LOAD_QUEUES,
	P_PUT_USER,
	P_DEL_USER,
	P_LOAD_USERS,
	P_ADD_AUDIT,
	P_LOAD_AUDIT,
	P_LOAD_SETTLED,
	P_GET_JOB,
	P_DEL_ACCT,
	P_PUT_ACCT,
	P_STRIP_JOB,
	P_DEL_JOB,
	P_AUDIT_FLOOR,
	P_PRUNE_AUDIT,
	P_ACCT_FROM,
	P_LEASE_RENEW,
	P_LEASE_GET,
	P_LEASE_TAKE,
	P_ADD_CONFIG,
	P_LOAD_CONFIG,
	P_MAX
};

static const char *const stmt_sql[P_MAX] = {
	[P_PUT_JOB] = "INSERT INTO jobs (id, state, owner, settled_ms, doc) "
		      "VALUES ($1, $2, $3, $4, $5) "
		      "ON CONFLICT (id) DO UPDATE SET state = excluded.state, "
		      "settled_ms = excluded.settled_ms, doc = excluded.doc",
	[P_PUT_NODE] = "INSERT INTO nodes (name, doc) VALUES ($1, $2) "
		       "ON CONFLICT (name) DO UPDATE SET doc = excluded.doc",
	[P_DEL_NODE] = "DELETE FROM nodes WHERE name = $1",
	[P_PUT_META] = "INSERT INTO meta (key, value) VALUES ($1, $2) "
		       "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
	[P_GET_META] = "SELECT value FROM meta WHERE key = $1",
	[P_LOAD_JOBS] = "SELECT id, doc FROM jobs WHERE settled_ms = 0 ORDER BY id",
	[P_LOAD_NODES] = "SELECT name, doc FROM nodes ORDER BY name",
	[P_PUT_QUEUE] = "INSERT INTO queues (name, doc) VALUES ($1, $2) "
			"ON CONFLICT (name) DO UPDATE SET doc = excluded.doc",
	[P_LOAD_QUEUES] = "SELECT name, doc FROM queues ORDER BY name",
	[P_PUT_USER] = "INSERT INTO users (name, doc) VALUES ($1, $2) "
		       "ON CONFLICT (name) DO UPDATE SET doc = excluded.doc",
	[P_DEL_USER] = "DELETE FROM users WHERE name = $1",
	[P_LOAD_USERS] = "SELECT name, doc FROM users ORDER BY name",
	[P_ADD_AUDIT] = "INSERT INTO audit (at_ms, who, doc) VALUES ($1, $2, $3)",
	[P_LOAD_AUDIT] = "SELECT seq, doc FROM (SELECT seq, doc FROM audit ORDER BY seq DESC "
			 "LIMIT " STORE_AUDIT_RECENT_S ") AS recent ORDER BY seq",
	/* (doc = '', not length(doc) = 0, which counts every document's
	 * characters: four times the time of the whole read) */
	[P_LOAD_SETTLED] = "SELECT id, state, owner, settled_ms, doc = '' FROM jobs "
			   "WHERE settled_ms > 0",
	[P_GET_JOB] = "SELECT doc FROM jobs WHERE id = $1",
	[P_DEL_ACCT] = "DELETE FROM acct WHERE key >= $1 AND key < $2",
	[P_PUT_ACCT] = "INSERT INTO acct (key, owner, queue, state, model, start_ms, end_ms, "
		       "gpu_hours, busy_hours, cost, energy_j, doc, good_hours, service) VALUES "
		       "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
	[P_STRIP_JOB] = "UPDATE jobs SET doc = '' WHERE id = $1 AND settled_ms > 0",
	[P_DEL_JOB] = "DELETE FROM jobs WHERE id = $1 AND settled_ms > 0",
	[P_AUDIT_FLOOR] = "INSERT INTO meta (key, value) VALUES ('audit_keep_from', $1) "
			  "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
	[P_PRUNE_AUDIT] = "DELETE FROM audit WHERE seq IN (SELECT seq FROM audit WHERE at_ms < $1 "
			  "ORDER BY seq LIMIT $2)",
	[P_ACCT_FROM] =
		"SELECT key, owner, queue, state, model, start_ms, end_ms, gpu_hours, "
		"busy_hours, cost, energy_j, doc, good_hours, service FROM acct WHERE key >= "
		"$1 ORDER BY key LIMIT $2",
	[P_LEASE_RENEW] = "SELECT tenk_lease_renew($1, $2, $3)",
	[P_LEASE_GET] = "SELECT holder, url, term, expires_ms - tenk_now_ms() FROM lease WHERE "
			"name = 'active'",
	[P_LEASE_TAKE] = "SELECT * FROM tenk_lease_take($1, $2, $3)",
	[P_ADD_CONFIG] = "INSERT INTO config (version, at_ms, who, doc) VALUES ($1, $2, $3, $4)",
	[P_LOAD_CONFIG] = "SELECT version, doc FROM config ORDER BY version",
};

/* Rows the accounting cursor reads at a time: ACCT_FETCH_MIN after a
 * pause (a scan in short slices, each after a pause, would read far more
 * than it uses), doubling to ACCT_FETCH_MAX, more than one job's records
 * ever are, so that a read of the most always covers a job whole. */
#define ACCT_FETCH_MIN 128
#define ACCT_FETCH_MAX 4096
static_assert(ACCT_FETCH_MAX > STORE_ACCT_ATTEMPTS, "a fetch covers a job whole");

/* Statements in flight in a pipeline before their results are read: bounds
 * what either side buffers (both would block writing, otherwise). */
#define PIPE_WINDOW 512

/* A table whose rows carry change marks: its column, index and triggers. */
#define CHG_TABLE(table, kind, key)                                                                \
	"ALTER TABLE " table " ADD COLUMN chg BIGINT NOT NULL DEFAULT 0;"                          \
	"CREATE INDEX " table "_by_chg ON " table " (chg);"                                        \
	"CREATE TRIGGER " table "_chg BEFORE INSERT OR UPDATE ON " table                           \
	" FOR EACH ROW EXECUTE FUNCTION tenk_chg_mark();"                                          \
	"CREATE TRIGGER " table "_gone AFTER DELETE ON " table                                     \
	" FOR EACH ROW EXECUTE FUNCTION tenk_chg_gone('" kind "', '" key "');"

/* Migrations in PostgreSQL's dialect, numbered as sqlite.c's. */
static const char *const migrations[] = {
	"CREATE TABLE jobs (id BIGINT PRIMARY KEY, state TEXT NOT NULL, doc TEXT NOT NULL);"
	"CREATE INDEX jobs_by_state ON jobs (state);"
	"CREATE TABLE nodes (name TEXT COLLATE \"C\" PRIMARY KEY, doc TEXT NOT NULL);"
	"CREATE TABLE meta (key TEXT COLLATE \"C\" PRIMARY KEY, value TEXT NOT NULL);",
	/* 2 */
	"CREATE TABLE queues (name TEXT COLLATE \"C\" PRIMARY KEY, doc TEXT NOT NULL);",
	/* 3 */
	"CREATE TABLE users (name TEXT COLLATE \"C\" PRIMARY KEY, doc TEXT NOT NULL);",
	/* 4 */
	"CREATE TABLE quarantine (seq BIGSERIAL PRIMARY KEY, kind TEXT NOT NULL, "
	"key TEXT NOT NULL, doc TEXT, reason TEXT NOT NULL, at_ms BIGINT NOT NULL);",
	/* 5 */
	"CREATE TABLE audit (seq BIGSERIAL PRIMARY KEY, at_ms BIGINT NOT NULL, "
	"who TEXT NOT NULL, doc TEXT NOT NULL);"
	"CREATE INDEX audit_by_time ON audit (at_ms);"
	"CREATE FUNCTION tenk_audit_kept() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
	"RAISE EXCEPTION 'audit rows are never rewritten'; END $$;"
	"CREATE TRIGGER audit_kept_u BEFORE UPDATE ON audit FOR EACH ROW "
	"EXECUTE FUNCTION tenk_audit_kept();"
	"CREATE TRIGGER audit_kept_d BEFORE DELETE ON audit FOR EACH ROW "
	"EXECUTE FUNCTION tenk_audit_kept();",
	/* 6 */
	"ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE jobs ADD COLUMN settled_ms BIGINT NOT NULL DEFAULT 0;"
	"DROP INDEX jobs_by_state;"
	"CREATE INDEX jobs_by_settled ON jobs (settled_ms, state, owner);",
	/* 7 */
	"CREATE TABLE acct (key BIGINT PRIMARY KEY, owner TEXT NOT NULL, queue TEXT NOT NULL, "
	"state TEXT NOT NULL, model TEXT NOT NULL, start_ms BIGINT NOT NULL, end_ms BIGINT "
	"NOT NULL, gpu_hours DOUBLE PRECISION NOT NULL, busy_hours DOUBLE PRECISION NOT NULL, "
	"cost DOUBLE PRECISION NOT NULL, energy_j DOUBLE PRECISION NOT NULL, doc TEXT NOT "
	"NULL);"
	"INSERT INTO meta (key, value) SELECT 'acct_fill_to', CAST(max(id) AS TEXT) FROM jobs "
	"WHERE settled_ms > 0 HAVING count(*) > 0;",
	/* 8 */
	"DROP TRIGGER audit_kept_d ON audit;"
	"CREATE FUNCTION tenk_audit_kept_d() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
	"IF old.at_ms < coalesce((SELECT CAST(value AS BIGINT) FROM meta WHERE key = "
	"'audit_keep_from'), 0) THEN RETURN old; END IF; "
	"RAISE EXCEPTION 'audit rows are never rewritten'; END $$;"
	"CREATE TRIGGER audit_kept_d BEFORE DELETE ON audit FOR EACH ROW "
	"EXECUTE FUNCTION tenk_audit_kept_d();",
	/* 9: the active server's lease, by the database's clock. A renewal
	 * holds the row's lock to its transaction's end, so no takeover
	 * falls between a batch's check and its commit; a takeover raises
	 * the term, so the old holder's renewals fail from then on */
	"CREATE TABLE IF NOT EXISTS lease (name TEXT PRIMARY KEY, holder TEXT NOT NULL, url "
	"TEXT NOT NULL, "
	"term BIGINT NOT NULL, expires_ms BIGINT NOT NULL);"
	"CREATE OR REPLACE FUNCTION tenk_now_ms() RETURNS BIGINT LANGUAGE sql AS $$ "
	"SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;"
	"CREATE OR REPLACE FUNCTION tenk_lease_renew(p_who TEXT, p_term BIGINT, p_ttl BIGINT) "
	"RETURNS void "
	"LANGUAGE plpgsql AS $$ BEGIN "
	"UPDATE lease SET expires_ms = tenk_now_ms() + p_ttl WHERE name = 'active' AND "
	"holder = p_who AND term = p_term; "
	"IF NOT FOUND THEN RAISE EXCEPTION USING ERRCODE = 'TKL01', MESSAGE = "
	"'another server took over the lease of the active server (this one held term ' "
	"|| p_term || ')'; END IF; END $$;"
	"CREATE OR REPLACE FUNCTION tenk_lease_take(p_who TEXT, p_url TEXT, p_ttl BIGINT) RETURNS "
	"TABLE "
	"(o_holder TEXT, o_url TEXT, o_term BIGINT, o_remaining BIGINT) LANGUAGE plpgsql AS $$ "
	"BEGIN "
	"INSERT INTO lease AS l (name, holder, url, term, expires_ms) VALUES ('active', p_who, "
	"p_url, 1, tenk_now_ms() + p_ttl) ON CONFLICT (name) DO UPDATE SET holder = "
	"excluded.holder, url = excluded.url, term = l.term + 1, expires_ms = "
	"excluded.expires_ms WHERE l.expires_ms <= tenk_now_ms() AND l.holder <> p_who; "
	"RETURN QUERY SELECT l.holder, l.url, l.term, l.expires_ms - tenk_now_ms() FROM lease l "
	"WHERE l.name = 'active'; END $$;",
	/* 10: change marks, which standbys follow (store_changes). The
	 * database sets them, so a server of an earlier release that writes
	 * during an upgrade is followed too; a deleted row leaves its mark
	 * in gone, kept STORE_GONE_KEEP_MS (pruned at each delete) */
	"CREATE SEQUENCE IF NOT EXISTS tenk_chg;"
	"CREATE TABLE gone (chg BIGINT PRIMARY KEY, kind TEXT NOT NULL, key TEXT COLLATE \"C\" "
	"NOT NULL, at_ms BIGINT NOT NULL);"
	"CREATE INDEX gone_by_time ON gone (at_ms);"
	"CREATE FUNCTION tenk_chg_mark() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
	"NEW.chg := nextval('tenk_chg'); RETURN NEW; END $$;"
	"CREATE FUNCTION tenk_chg_gone() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
	"DELETE FROM gone WHERE at_ms < tenk_now_ms() - " STORE_GONE_KEEP_MS_S "; "
	"INSERT INTO gone (chg, kind, key, at_ms) VALUES (nextval('tenk_chg'), TG_ARGV[0], "
	"to_jsonb(OLD) ->> TG_ARGV[1], tenk_now_ms()); RETURN OLD; END $$;" CHG_TABLE(
		"jobs", "job", "id") CHG_TABLE("nodes", "node", "name")
		CHG_TABLE("queues", "queue", "name") CHG_TABLE("users", "user", "name"),
	/* 11: each attempt's GPU-hours of kept training (goodput); -1 for the
	 * records written before */
	"ALTER TABLE acct ADD COLUMN good_hours DOUBLE PRECISION NOT NULL DEFAULT -1;",
	/* 12 */
	"CREATE TABLE IF NOT EXISTS config (version BIGINT PRIMARY KEY, at_ms BIGINT NOT NULL, "
	"who TEXT NOT NULL, doc TEXT NOT NULL);"
	"CREATE OR REPLACE FUNCTION tenk_config_kept() RETURNS trigger LANGUAGE plpgsql AS $$ "
	"BEGIN RAISE EXCEPTION 'configuration versions are never rewritten'; END $$;"
	"DROP TRIGGER IF EXISTS config_kept ON config;"
	"CREATE TRIGGER config_kept BEFORE UPDATE OR DELETE ON config FOR EACH ROW "
	"EXECUTE FUNCTION tenk_config_kept();",
	/* 13: the service a job is a replica of ("" for none and before) */
	"ALTER TABLE acct ADD COLUMN service TEXT NOT NULL DEFAULT '';",
};
static_assert(ARRAY_SIZE(migrations) == STORE_SCHEMA_VERSION, "a migration for every version");

/* The advisory lock migrations take (any number of tenk's own). */
#define MIGRATE_LOCK "7480736"

struct pg {
	struct store base;
	PGconn *conn;
	char *url;
	bool reader;
	bool prepared; /* stmt_sql prepared on this connection */
	/* the lease every batch renews (store_lease_hold), when held */
	char *holder;
	int64_t term, ttl_ms;
};

#define PG(b) ((struct pg *)(b))

static const struct store_ops pg_ops;

/* libpq's message on one line, without its trailing newline. */
static void one_line(char *dst, size_t size, const char *msg)
{
	snprintf(dst, size, "%s", msg ? msg : "");
	for (char *p = dst; *p; p++)
		if (*p == '\n' || *p == '\t')
			*p = ' ';
	size_t n = strlen(dst);
	while (n && dst[n - 1] == ' ')
		dst[--n] = '\0';
}

/* The one place PostgreSQL's errors become -errno and text: by the class
 * of the SQLSTATE (res may be NULL: the connection's error). */
static int fail(struct pg *st, const PGresult *res, struct tk_error *err, const char *what)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	int code = -EIO;
	if (state) {
		if (strncmp(state, "23", 2) == 0)
			code = -EEXIST; /* integrity constraint */
		else if (strcmp(state, "53100") == 0)
			code = -ENOSPC;
		else if (strcmp(state, "53200") == 0)
			code = -ENOMEM;
		else if (strcmp(state, "25006") == 0 || strcmp(state, "42501") == 0 ||
			 strncmp(state, "28", 2) == 0)
			code = -EACCES; /* read-only, privilege, authorization */
		else if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 ||
			 strcmp(state, "55P03") == 0)
			code = -EBUSY; /* serialization, deadlock, lock */
		else if (strcmp(state, "P0001") == 0)
			code = -EPERM; /* a trigger's refusal */
		else if (strcmp(state, "TKL01") == 0)
			code = -ENOLCK; /* the lease went to another server */
		else if (strncmp(state, "42", 2) == 0)
			code = -EPROTO; /* a schema this tenk does not know */
	}
	char msg[200];
	one_line(msg, sizeof(msg),
		 res && PQresultErrorMessage(res)[0] ? PQresultErrorMessage(res)
						     : PQerrorMessage(st->conn));
	return tk_errorf(err, code, "store: %s: %s", what, msg);
}

static int exec_ok(struct pg *st, const char *sql, struct tk_error *err, const char *what)
{
	PGresult *res = PQexec(st->conn, sql);
	ExecStatusType t = PQresultStatus(res);
	int r = t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK ? 0 : fail(st, res, err, what);
	PQclear(res);
	return r;
}

/* What a session of the lease's holder is set to: a transaction left
 * open (a server stopped in the middle of a batch) ends after the lease's
 * time, and with it the lock a takeover waits for. */
static int session_lease(struct pg *st, struct tk_error *err)
{
	if (!st->holder)
		return 0;
	char sql[96];
	snprintf(sql, sizeof(sql), "SET idle_in_transaction_session_timeout = %lld",
		 (long long)st->ttl_ms);
	return exec_ok(st, sql, err, "connecting");
}

/* A prepared statement's name on the connection: "t" and its id, in buf. */
static const char *stmt_name(int id, char buf[static 16])
{
	snprintf(buf, 16, "t%d", id);
	return buf;
}

static int prepare(struct pg *st, struct tk_error *err)
{
	for (int i = 0; i < P_MAX; i++) {
		char name[16];
		PGresult *res = PQprepare(st->conn, stmt_name(i, name), stmt_sql[i], 0, NULL);
		int r = PQresultStatus(res) == PGRES_COMMAND_OK ? 0
								: fail(st, res, err, stmt_sql[i]);
		PQclear(res);
		if (r < 0)
			return r;
	}
	st->prepared = true;
	return 0;
}

/* The connection, opened again when it broke; statements prepared. */
static int conn_ok(struct pg *st, struct tk_error *err)
{
	if (PQstatus(st->conn) != CONNECTION_OK) {
		st->prepared = false;
		PQreset(st->conn);
		if (PQstatus(st->conn) != CONNECTION_OK)
			return fail(st, NULL, err, "connecting again");
		if (st->reader &&
		    exec_ok(st, "SET default_transaction_read_only = on", err, "connecting") < 0)
			return -EIO;
		if (session_lease(st, err) < 0)
			return -EIO;
	}
	return st->prepared ? 0 : prepare(st, err);
}

static int schema_version(struct pg *st, int *ret, struct tk_error *err)
{
	PGresult *res = PQexec(st->conn, "SELECT CASE WHEN to_regclass('tenk_schema') IS NULL "
					 "THEN -1 ELSE (SELECT max(version) FROM tenk_schema) END");
	int r = 0;
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		r = fail(st, res, err, "reading the schema version");
	else
		*ret = PQgetisnull(res, 0, 0) ? 0 : atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	return r;
}

/* Every migration not yet run, in one transaction, under the lock. */
static int migrate(struct pg *st, struct tk_error *err)
{
	int r, v = 0;
	if ((r = exec_ok(st,
			 "BEGIN; SELECT pg_advisory_xact_lock(" MIGRATE_LOCK ");"
			 "CREATE TABLE IF NOT EXISTS tenk_schema (version INTEGER NOT NULL)",
			 err, "migrating")) < 0 ||
	    (r = schema_version(st, &v, err)) < 0)
		goto fail;
	if (v < 0)
		v = 0;
	if (v > STORE_SCHEMA_VERSION) {
		r = tk_errorf(err, -EPROTO,
			      "store: schema version %d is newer than this tenk knows (%d); "
			      "upgrade tenk",
			      v, STORE_SCHEMA_VERSION);
		goto fail;
	}
	for (int i = v; i < STORE_SCHEMA_VERSION; i++) {
		char what[48];
		snprintf(what, sizeof(what), "migrating to schema %d", i + 1);
		if ((r = exec_ok(st, migrations[i], err, what)) < 0)
			goto fail;
	}
	char set[96];
	snprintf(set, sizeof(set), "DELETE FROM tenk_schema; INSERT INTO tenk_schema VALUES (%d)",
		 STORE_SCHEMA_VERSION);
	if (v < STORE_SCHEMA_VERSION && (r = exec_ok(st, set, err, "migrating")) < 0)
		goto fail;
	if ((r = exec_ok(st, "COMMIT", err, "migrating")) < 0)
		goto fail;
	st->base.version = STORE_SCHEMA_VERSION;
	return 0;
fail:
	exec_ok(st, "ROLLBACK", NULL, "");
	return r;
}

/* A URL libpq reads, without a password in it. */
static int check_url(const char *url, struct tk_error *err)
{
	char *msg = NULL;
	PQconninfoOption *opts = PQconninfoParse(url, &msg);
	if (!opts) {
		char line[160];
		one_line(line, sizeof(line), msg ? msg : "out of memory");
		PQfreemem(msg);
		return tk_errorf(err, -EINVAL,
				 "store: \"%.60s\" is not a PostgreSQL URL libpq reads (%s); "
				 "write postgresql://USER@HOST:PORT/DATABASE",
				 url, line);
	}
	bool password = false;
	for (PQconninfoOption *o = opts; o->keyword; o++)
		if (strcmp(o->keyword, "password") == 0 && o->val && o->val[0])
			password = true;
	PQconninfoFree(opts);
	if (password)
		return tk_errorf(
			err, -EINVAL,
			"store: the URL holds a password, which every user of this host "
			"could read on the command line; put it in a password file "
			"(PGPASSFILE, or passfile= in the URL) and take it out of the URL");
	return 0;
}

int store_pg_open(const char *url, bool reader, struct store **ret, struct tk_error *err)
{
	pthread_once(&pq_once, pq_load);
	if (pq_error[0])
		return tk_errorf(err, -ENOTSUP, "store: %s", pq_error);
	int r = check_url(url, err);
	if (r < 0)
		return r;
	struct pg *st = xcalloc(1, sizeof(*st));
	st->base.ops = &pg_ops;
	st->base.kind = STORE_POSTGRESQL;
	st->url = xstrdup(url);
	st->reader = reader;
	/* (the URL's own values win over these: they come after) */
	const char *const keys[] = {"connect_timeout", "application_name", "dbname", NULL};
	/* (which process a session is: its name says, in pg_stat_activity) */
	char app[64];
	snprintf(app, sizeof(app), "tenk-%s-%d", reader ? "reader" : "server", (int)getpid());
	const char *const vals[] = {"5", app, url, NULL};
	st->conn = PQconnectdbParams(keys, vals, 1);
	if (PQstatus(st->conn) != CONNECTION_OK) {
		char msg[200];
		one_line(msg, sizeof(msg), PQerrorMessage(st->conn));
		r = tk_errorf(err, -ECONNREFUSED, "store: cannot connect to PostgreSQL: %s", msg);
		goto fail;
	}
	if ((r = exec_ok(st, "SET client_min_messages = warning", err, "connecting")) < 0)
		goto fail;
	if (reader) {
		int v = 0;
		if ((r = exec_ok(st, "SET default_transaction_read_only = on", err, "connecting")) <
			    0 ||
		    (r = schema_version(st, &v, err)) < 0)
			goto fail;
		if (v != STORE_SCHEMA_VERSION) {
			r = tk_errorf(err, -EPROTO, "store: the database is at schema %d, not %d",
				      v, STORE_SCHEMA_VERSION);
			goto fail;
		}
		st->base.version = v;
	} else if ((r = migrate(st, err)) < 0) {
		goto fail;
	}
	if ((r = prepare(st, err)) < 0)
		goto fail;
	*ret = &st->base;
	return 0;
fail:
	st->base.ops->destroy(&st->base);
	return r;
}

static void pg_destroy(struct store *base)
{
	struct pg *st = PG(base);
	PQfinish(st->conn);
	free(st->url);
	free(st->holder);
	free(st);
}

/* ---- statements with their values as text ------------------------------------------ */

/* Up to TABLE_COLS_MAX values of one statement, formatted in place. */
struct params {
	const char *v[TABLE_COLS_MAX];
	char num[TABLE_COLS_MAX][32];
	int n;
};

static void p_text(struct params *p, const char *text)
{
	p->v[p->n++] = text;
}

static void p_int(struct params *p, int64_t i)
{
	snprintf(p->num[p->n], sizeof(p->num[0]), "%lld", (long long)i);
	p->v[p->n] = p->num[p->n];
	p->n++;
}

static void p_real(struct params *p, double d)
{
	snprintf(p->num[p->n], sizeof(p->num[0]), "%.17g", d);
	p->v[p->n] = p->num[p->n];
	p->n++;
}

static PGresult *run(struct pg *st, enum stmt_id id, const struct params *p)
{
	char name[16];
	return PQexecPrepared(st->conn, stmt_name(id, name), p ? p->n : 0, p ? p->v : NULL, NULL,
			      NULL, 0);
}

/* ---- pipelines: a transaction's statements sent without waiting ------------------- */

struct pipe {
	struct pg *st;
	int pending; /* sent, results not read */
	int r;	     /* the first failure */
	struct tk_error *err;
};

/* Reads the results of every statement sent, keeping the first failure. */
static void pipe_read(struct pipe *p)
{
	for (; p->pending > 0; p->pending--) {
		PGresult *res = PQgetResult(p->st->conn);
		if (!res) {
			if (p->r == 0)
				p->r = fail(p->st, NULL, p->err, "reading a result");
			p->pending = 0;
			return;
		}
		ExecStatusType t = PQresultStatus(res);
		if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK && p->r == 0)
			p->r = t == PGRES_PIPELINE_ABORTED
				       ? tk_errorf(p->err, -EIO, "store: a pipeline was aborted")
				       : fail(p->st, res, p->err, "writing");
		PQclear(res);
		/* the NULL that ends each statement's results */
		while ((res = PQgetResult(p->st->conn)))
			PQclear(res);
	}
}

static int pipe_begin(struct pipe *p, struct pg *st, struct tk_error *err)
{
	*p = (struct pipe){.st = st, .err = err};
	int r = conn_ok(st, err);
	if (r < 0)
		return r;
	if (!PQenterPipelineMode(st->conn))
		return fail(st, NULL, err, "starting a pipeline");
	return 0;
}

/* A statement went out (sent: libpq took it): every PIPE_WINDOW, the
 * results so far are read. */
static void pipe_sent(struct pipe *p, bool sent)
{
	if (sent && ++p->pending < PIPE_WINDOW)
		return;
	if (!sent || !PQsendFlushRequest(p->st->conn) || PQflush(p->st->conn) < 0) {
		p->r = fail(p->st, NULL, p->err, "sending");
		return;
	}
	pipe_read(p);
}

static void pipe_send_sql(struct pipe *p, const char *sql, const struct params *v)
{
	if (p->r == 0)
		pipe_sent(p, PQsendQueryParams(p->st->conn, sql, v ? v->n : 0, NULL,
					       v ? v->v : NULL, NULL, NULL, 0));
}

static void pipe_send(struct pipe *p, enum stmt_id id, const struct params *v)
{
	char name[16];
	if (p->r == 0)
		pipe_sent(p, PQsendQueryPrepared(p->st->conn, stmt_name(id, name), v->n, v->v, NULL,
						 NULL, 0));
}

/* Syncs, reads every result, leaves pipeline mode; a transaction of the
 * pipeline's own (own_txn) left open by a failure is rolled back. */
static int pipe_end(struct pipe *p, bool own_txn)
{
	PGconn *c = p->st->conn;
	if (!PQpipelineSync(c) && p->r == 0)
		p->r = fail(p->st, NULL, p->err, "sending");
	pipe_read(p);
	/* up to the sync's own result */
	for (int i = 0; i < P_MAX + PIPE_WINDOW; i++) {
		PGresult *res = PQgetResult(c);
		if (!res) {
			if (PQstatus(c) != CONNECTION_OK)
				break;
			continue;
		}
		bool sync = PQresultStatus(res) == PGRES_PIPELINE_SYNC;
		PQclear(res);
		if (sync)
			break;
	}
	PQexitPipelineMode(c);
	if (own_txn && PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) != PQTRANS_IDLE)
		exec_ok(p->st, "ROLLBACK", NULL, "");
	return p->r;
}

/* ---- reading -------------------------------------------------------------------------- */

/* Runs a prepared statement row by row (libpq's single-row mode), calling
 * row_fn for each; an early stop still reads the rest (the connection
 * must be clear for the next statement). */
typedef int (*row_fn)(void *ctx, const PGresult *res);

static int each_row(struct pg *st, enum stmt_id id, const char *sql, const struct params *p,
		    row_fn fn, void *ctx, struct tk_error *err, const char *what)
{
	int r = conn_ok(st, err);
	if (r < 0)
		return r;
	char name[16];
	int sent = sql ? PQsendQueryParams(st->conn, sql, 0, NULL, NULL, NULL, NULL, 0)
		       : PQsendQueryPrepared(st->conn, stmt_name(id, name), p ? p->n : 0,
					     p ? p->v : NULL, NULL, NULL, 0);
	if (!sent)
		return fail(st, NULL, err, what);
	PQsetSingleRowMode(st->conn);
	PGresult *res;
	while ((res = PQgetResult(st->conn))) {
		ExecStatusType t = PQresultStatus(res);
		if (t == PGRES_SINGLE_TUPLE) {
			if (r == 0)
				r = fn(ctx, res);
		} else if (t != PGRES_TUPLES_OK && r == 0) {
			r = fail(st, res, err, what);
		}
		PQclear(res);
	}
	return r;
}

struct load_ctx {
	store_row_cb cb;
	void *ctx;
};

static int load_row(void *arg, const PGresult *res)
{
	struct load_ctx *l = arg;
	return l->cb(l->ctx, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
		     (size_t)PQgetlength(res, 0, 1));
}

static int pg_load(struct store *base, enum store_load what, store_row_cb cb, void *ctx,
		   struct tk_error *err)
{
	static const enum stmt_id ids[LOAD_MAX] = {
		[LOAD_JOBS] = P_LOAD_JOBS,     [LOAD_NODES] = P_LOAD_NODES,
		[LOAD_QUEUES] = P_LOAD_QUEUES, [LOAD_USERS] = P_LOAD_USERS,
		[LOAD_AUDIT] = P_LOAD_AUDIT,   [LOAD_CONFIG] = P_LOAD_CONFIG};
	struct load_ctx l = {cb, ctx};
	return each_row(PG(base), ids[what], NULL, NULL, load_row, &l, err, "loading");
}

struct settled_ctx {
	store_settled_cb cb;
	void *ctx;
};

static int settled_row(void *arg, const PGresult *res)
{
	struct settled_ctx *l = arg;
	return l->cb(l->ctx, strtoll(PQgetvalue(res, 0, 0), NULL, 10), PQgetvalue(res, 0, 1),
		     PQgetvalue(res, 0, 2), strtoll(PQgetvalue(res, 0, 3), NULL, 10),
		     PQgetvalue(res, 0, 4)[0] == 't');
}

static int pg_load_settled(struct store *base, store_settled_cb cb, void *ctx, struct tk_error *err)
{
	struct settled_ctx l = {cb, ctx};
	return each_row(PG(base), P_LOAD_SETTLED, NULL, NULL, settled_row, &l, err,
			"loading the settled jobs");
}

static int pg_get_job(struct store *base, int64_t id, char **ret, size_t *len, struct tk_error *err)
{
	struct pg *st = PG(base);
	int r = conn_ok(st, err);
	if (r < 0)
		return r;
	struct params p = {0};
	p_int(&p, id);
	PGresult *res = run(st, P_GET_JOB, &p);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		r = fail(st, res, err, "reading a job");
	} else if (PQntuples(res) == 0) {
		r = tk_errorf(err, -ENOENT, "store: no job %lld", (long long)id);
	} else {
		*len = (size_t)PQgetlength(res, 0, 0);
		*ret = xmalloc(*len + 1);
		memcpy(*ret, PQgetvalue(res, 0, 0), *len + 1);
	}
	PQclear(res);
	return r;
}

static int pg_meta_get(struct store *base, const char *key, char **ret, struct tk_error *err)
{
	struct pg *st = PG(base);
	int r = conn_ok(st, err);
	if (r < 0)
		return r;
	struct params p = {0};
	p_text(&p, key);
	PGresult *res = run(st, P_GET_META, &p);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		r = fail(st, res, err, "reading metadata");
	else if (PQntuples(res) == 0)
		r = -ENOENT;
	else
		*ret = xstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return r;
}

/* ---- writing ------------------------------------------------------------------------- */

static void send_op(struct pipe *pp, const struct op *o)
{
	struct params p = {0};
	switch (o->kind) {
	case OP_PUT_JOB:
		p_int(&p, o->id);
		p_text(&p, o->key);
		p_text(&p, o->key2);
		p_int(&p, o->n);
		p_text(&p, o->doc);
		pipe_send(pp, P_PUT_JOB, &p);
		return;
	case OP_PUT_NODE:
	case OP_PUT_QUEUE:
	case OP_PUT_USER:
	case OP_PUT_META:
		p_text(&p, o->key);
		p_text(&p, o->doc);
		pipe_send(pp,
			  o->kind == OP_PUT_NODE    ? P_PUT_NODE
			  : o->kind == OP_PUT_QUEUE ? P_PUT_QUEUE
			  : o->kind == OP_PUT_USER  ? P_PUT_USER
						    : P_PUT_META,
			  &p);
		return;
	case OP_DEL_NODE:
	case OP_DEL_USER:
		p_text(&p, o->key);
		pipe_send(pp, o->kind == OP_DEL_NODE ? P_DEL_NODE : P_DEL_USER, &p);
		return;
	case OP_ADD_AUDIT:
		p_int(&p, o->id);
		p_text(&p, o->key);
		p_text(&p, o->doc);
		pipe_send(pp, P_ADD_AUDIT, &p);
		return;
	case OP_ADD_CONFIG:
		p_int(&p, o->id);
		p_int(&p, o->n);
		p_text(&p, o->key);
		p_text(&p, o->doc);
		pipe_send(pp, P_ADD_CONFIG, &p);
		return;
	case OP_DEL_ACCT:
		p_int(&p, o->id * STORE_ACCT_ATTEMPTS);
		p_int(&p, (o->id + 1) * STORE_ACCT_ATTEMPTS);
		pipe_send(pp, P_DEL_ACCT, &p);
		return;
	case OP_PUT_ACCT: {
		const struct store_acct *a = o->acct;
		p_int(&p, a->job_id * STORE_ACCT_ATTEMPTS + a->attempt);
		p_text(&p, a->owner);
		p_text(&p, a->queue);
		p_text(&p, a->state);
		p_text(&p, a->model);
		p_int(&p, a->start_ms);
		p_int(&p, a->end_ms);
		p_real(&p, a->gpu_hours);
		p_real(&p, a->busy_hours);
		p_real(&p, a->cost);
		p_real(&p, a->energy_j);
		p_text(&p, a->doc);
		p_real(&p, a->good_hours);
		p_text(&p, a->service ? a->service : "");
		pipe_send(pp, P_PUT_ACCT, &p);
		return;
	}
	case OP_STRIP_JOB:
	case OP_DEL_JOB:
		p_int(&p, o->id);
		pipe_send(pp, o->kind == OP_STRIP_JOB ? P_STRIP_JOB : P_DEL_JOB, &p);
		return;
	case OP_PRUNE_AUDIT: {
		p_int(&p, o->id);
		pipe_send(pp, P_AUDIT_FLOOR, &p);
		struct params q = {0};
		p_int(&q, o->id);
		p_int(&q, o->n);
		pipe_send(pp, P_PRUNE_AUDIT, &q);
		return;
	}
	}
}

static int pg_apply(struct store *base, const struct store_batch *b, struct tk_error *err)
{
	struct pipe p;
	int r = pipe_begin(&p, PG(base), err);
	if (r < 0)
		return r;
	pipe_send_sql(&p, "BEGIN", NULL);
	if (PG(base)->holder) {
		/* first: the lease, renewed and its row locked to the commit */
		struct params q = {0};
		p_text(&q, PG(base)->holder);
		p_int(&q, PG(base)->term);
		p_int(&q, PG(base)->ttl_ms);
		pipe_send(&p, P_LEASE_RENEW, &q);
	}
	for (size_t i = 0; i < b->n; i++)
		send_op(&p, &b->ops[i]);
	pipe_send_sql(&p, "COMMIT", NULL);
	return pipe_end(&p, true);
}

/* ---- reading the accounting records --------------------------------------------------- */

/* Records read ahead: every key in [lo, hi) is in res (rows from first on)
 * or is no record. */
struct pg_cursor {
	struct store_acct_cursor base;
	struct pg *st;
	PGresult *res;
	int64_t lo, hi;
	int want; /* rows the next read asks for */
};

static const struct store_acct_cursor_ops pg_cursor_ops;

#define CUR(b) ((struct pg_cursor *)(b))

static int pg_cursor_new(struct store *base, struct store_acct_cursor **ret, struct tk_error *err)
{
	struct pg_cursor *c = xcalloc(1, sizeof(*c));
	c->base.ops = &pg_cursor_ops;
	c->st = PG(base);
	c->want = ACCT_FETCH_MIN;
	*ret = &c->base;
	return 0;
}

static void pg_cursor_pause(struct store_acct_cursor *base)
{
	struct pg_cursor *c = CUR(base);
	PQclear(c->res);
	c->res = NULL;
	c->want = ACCT_FETCH_MIN;
}

static void pg_cursor_destroy(struct store_acct_cursor *base)
{
	pg_cursor_pause(base);
	free(base);
}

static int64_t key_at(const PGresult *res, int row)
{
	return strtoll(PQgetvalue(res, row, 0), NULL, 10);
}

/* Reads ahead from key lo, want rows (more when they do not cover the
 * job at lo whole). */
static int fetch(struct pg_cursor *c, int64_t lo, struct tk_error *err)
{
	int want = c->want;
	PQclear(c->res);
	c->res = NULL;
	int r = conn_ok(c->st, err);
	if (r < 0)
		return r;
	struct params p = {0};
	p_int(&p, lo);
	p_int(&p, want);
	PGresult *res = run(c->st, P_ACCT_FROM, &p);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		r = fail(c->st, res, err, "reading accounting");
		PQclear(res);
		return r;
	}
	int n = PQntuples(res);
	c->res = res;
	c->lo = lo;
	/* a full read may end inside a job: it covers up to that job */
	c->hi = n < want ? INT64_MAX
			 : key_at(res, n - 1) / STORE_ACCT_ATTEMPTS * STORE_ACCT_ATTEMPTS;
	c->want = MIN(want * 2, ACCT_FETCH_MAX);
	if (c->hi < lo + STORE_ACCT_ATTEMPTS && want < ACCT_FETCH_MAX) {
		c->want = ACCT_FETCH_MAX; /* (one job of many attempts) */
		return fetch(c, lo, err);
	}
	return 0;
}

static int pg_cursor_job(struct store_acct_cursor *base, int64_t job_id, store_acct_cb cb,
			 void *ctx, struct tk_error *err)
{
	struct pg_cursor *c = CUR(base);
	int64_t lo = job_id * STORE_ACCT_ATTEMPTS, hi = lo + STORE_ACCT_ATTEMPTS;
	int r;
	if ((!c->res || lo < c->lo || hi > c->hi) && (r = fetch(c, lo, err)) < 0)
		return r;
	int n = PQntuples(c->res), a = 0, b = n;
	while (a < b) { /* the first row at or after lo */
		int m = (a + b) / 2;
		if (key_at(c->res, m) < lo)
			a = m + 1;
		else
			b = m;
	}
	for (int i = a; i < n; i++) {
		int64_t key = key_at(c->res, i);
		if (key >= hi)
			break;
		const PGresult *q = c->res;
		struct store_acct row = {
			.job_id = job_id,
			.attempt = (int)(key - lo),
			.owner = PQgetvalue(q, i, 1),
			.queue = PQgetvalue(q, i, 2),
			.state = PQgetvalue(q, i, 3),
			.model = PQgetvalue(q, i, 4),
			.start_ms = strtoll(PQgetvalue(q, i, 5), NULL, 10),
			.end_ms = strtoll(PQgetvalue(q, i, 6), NULL, 10),
			.gpu_hours = strtod(PQgetvalue(q, i, 7), NULL),
			.busy_hours = strtod(PQgetvalue(q, i, 8), NULL),
			.cost = strtod(PQgetvalue(q, i, 9), NULL),
			.energy_j = strtod(PQgetvalue(q, i, 10), NULL),
			.doc = PQgetvalue(q, i, 11),
			.good_hours = strtod(PQgetvalue(q, i, 12), NULL),
			.service = PQgetvalue(q, i, 13),
		};
		if ((r = cb(ctx, &row)) < 0)
			return r;
	}
	return 0;
}

/* ---- the store as a whole ------------------------------------------------------------ */

static int pg_is_empty(struct store *base, bool *ret, struct tk_error *err)
{
	struct pg *st = PG(base);
	int r = conn_ok(st, err);
	if (r < 0)
		return r;
	PGresult *res = PQexec(st->conn, "SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) "
					 "FROM nodes) + (SELECT count(*) FROM users) + (SELECT "
					 "count(*) FROM queues) + (SELECT count(*) FROM meta)");
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		r = fail(st, res, err, "counting rows");
	else
		*ret = strcmp(PQgetvalue(res, 0, 0), "0") == 0;
	PQclear(res);
	return r;
}

static int pg_quarantine(struct store *base, const char *kind, const char *key, const char *reason,
			 int64_t now_ms, struct tk_error *err)
{
	struct pg *st = PG(base);
	const char *table = strcmp(kind, "job") == 0	 ? "jobs"
			    : strcmp(kind, "node") == 0	 ? "nodes"
			    : strcmp(kind, "queue") == 0 ? "queues"
			    : strcmp(kind, "user") == 0	 ? "users"
							 : NULL;
	if (!table)
		return tk_errorf(err, -EINVAL, "store: no kind of row \"%s\"", kind);
	const char *col = strcmp(kind, "job") == 0 ? "CAST(id AS TEXT)" : "name";
	_cleanup_free_ char *copy =
		xasprintf("INSERT INTO quarantine (kind, key, doc, reason, at_ms) SELECT $1::text, "
			  "$2::text, doc, $3::text, $4::bigint FROM %s WHERE %s = $2::text",
			  table, col);
	_cleanup_free_ char *del = xasprintf("DELETE FROM %s WHERE %s = $1::text", table, col);
	struct pipe pp;
	int r = pipe_begin(&pp, st, err);
	if (r < 0)
		return r;
	struct params p = {0}, q = {0};
	p_text(&p, kind);
	p_text(&p, key);
	p_text(&p, reason);
	p_int(&p, now_ms);
	p_text(&q, key);
	pipe_send_sql(&pp, "BEGIN", NULL);
	pipe_send_sql(&pp, copy, &p);
	pipe_send_sql(&pp, del, &q);
	pipe_send_sql(&pp, "COMMIT", NULL);
	if ((r = pipe_end(&pp, true)) < 0)
		return tk_errorf(err, r, "store: setting a row aside: %s", err->text);
	return 0;
}

/* ---- whole tables, for tenk store copy ------------------------------------------------ */

static int pg_exec(struct store *base, const char *sql, struct tk_error *err)
{
	struct pg *st = PG(base);
	int r = conn_ok(st, err);
	return r < 0 ? r : exec_ok(st, sql, err, sql);
}

struct dump_ctx {
	const struct table_desc *t;
	store_dump_cb cb;
	void *ctx;
};

static int dump_row(void *arg, const PGresult *res)
{
	struct dump_ctx *d = arg;
	struct store_value row[TABLE_COLS_MAX];
	for (int i = 0; i < d->t->ncols; i++) {
		const char *v = PQgetvalue(res, 0, i);
		row[i] = (struct store_value){0};
		switch (d->t->types[i]) {
		case COL_INT:
			row[i].i = strtoll(v, NULL, 10);
			break;
		case COL_REAL:
			row[i].d = strtod(v, NULL);
			break;
		case COL_TEXT:
		case COL_TEXT_NULL:
			row[i].text = PQgetisnull(res, 0, i) && d->t->types[i] == COL_TEXT_NULL
					      ? NULL
					      : v;
			break;
		}
	}
	return d->cb(d->ctx, row);
}

static int pg_dump(struct store *base, const struct table_desc *t, store_dump_cb cb, void *ctx,
		   struct tk_error *err)
{
	struct strbuf sql;
	strbuf_init(&sql);
	store_table_select(&sql, t);
	struct dump_ctx d = {t, cb, ctx};
	int r = each_row(PG(base), 0, sql.buf, NULL, dump_row, &d, err, t->name);
	strbuf_release(&sql);
	return r;
}

static int pg_insert(struct store *base, const struct table_desc *t, const struct store_value *rows,
		     size_t n, struct tk_error *err)
{
	struct pg *st = PG(base);
	struct strbuf sql;
	strbuf_init(&sql);
	store_table_insert(&sql, t, '$');
	struct pipe pp;
	int r = pipe_begin(&pp, st, err);
	for (size_t k = 0; r == 0 && k < n; k++) {
		const struct store_value *row = &rows[k * (size_t)t->ncols];
		struct params p = {0};
		for (int i = 0; i < t->ncols; i++) {
			if (t->types[i] == COL_INT)
				p_int(&p, row[i].i);
			else if (t->types[i] == COL_REAL)
				p_real(&p, row[i].d);
			else
				p_text(&p, row[i].text);
		}
		pipe_send_sql(&pp, sql.buf, &p);
	}
	if (r == 0 && t->serial) {
		/* the sequence goes on after the rows copied */
		strbuf_reset(&sql);
		strbuf_addf(&sql,
			    "SELECT setval(pg_get_serial_sequence('%s', '%s'), (SELECT max(%s) "
			    "FROM %s))",
			    t->name, t->key, t->key, t->name);
		pipe_send_sql(&pp, sql.buf, NULL);
	}
	strbuf_release(&sql);
	/* (inside the copy's transaction, which the copy ends) */
	return r == 0 ? pipe_end(&pp, false) : r;
}

/* ---- the lease ------------------------------------------------------------------------ */

static void lease_of(const PGresult *res, struct store_lease *ret)
{
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->holder, sizeof(ret->holder), "%s", PQgetvalue(res, 0, 0));
	snprintf(ret->url, sizeof(ret->url), "%s", PQgetvalue(res, 0, 1));
	ret->term = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
	ret->remaining_ms = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
}

static int pg_lease_get(struct store *base, struct store_lease *ret, struct tk_error *err)
{
	struct pg *st = PG(base);
	int r = conn_ok(st, err);
	if (r < 0)
		return r;
	PGresult *res = run(st, P_LEASE_GET, NULL);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		r = fail(st, res, err, "reading the lease");
	else if (PQntuples(res) == 0)
		r = -ENOENT;
	else
		lease_of(res, ret);
	PQclear(res);
	return r;
}

static int pg_lease_take(struct store *base, const char *holder, const char *url, int64_t ttl_ms,
			 struct store_lease *ret, struct tk_error *err)
{
	struct pg *st = PG(base);
	int r = conn_ok(st, err);
	if (r < 0)
		return r;
	/* a holder in the middle of a batch holds the row: wait a little at
	 * most, and try again at the next poll */
	if ((r = exec_ok(st, "SET lock_timeout = 500", err, "taking the lease")) < 0)
		return r;
	struct params p = {0};
	p_text(&p, holder);
	p_text(&p, url);
	p_int(&p, ttl_ms);
	PGresult *res = run(st, P_LEASE_TAKE, &p);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		r = fail(st, res, err, "taking the lease");
	} else {
		lease_of(res, ret);
		r = strcmp(ret->holder, holder) == 0 ? 0 : -EBUSY;
	}
	PQclear(res);
	exec_ok(st, "SET lock_timeout = 0", NULL, "");
	return r;
}

static void pg_lease_hold(struct store *base, const char *holder, int64_t term, int64_t ttl_ms)
{
	struct pg *st = PG(base);
	free(st->holder);
	st->holder = xstrdup(holder);
	st->term = term;
	st->ttl_ms = ttl_ms;
	if (PQstatus(st->conn) == CONNECTION_OK)
		session_lease(st, NULL);
}

/* ---- change marks (store_changes) ------------------------------------------------------- */

struct chg_ctx {
	store_change_cb cb;
	void *ctx;
	enum store_row_kind kind;
};

static int gone_row(void *arg, const PGresult *res)
{
	struct chg_ctx *c = arg;
	static const char *const kinds[] = {[STORE_ROW_JOB] = "job",
					    [STORE_ROW_NODE] = "node",
					    [STORE_ROW_QUEUE] = "queue",
					    [STORE_ROW_USER] = "user"};
	struct store_change ch = {.key = PQgetvalue(res, 0, 1), .gone = true};
	size_t k = 0;
	while (k < ARRAY_SIZE(kinds) && strcmp(kinds[k], PQgetvalue(res, 0, 0)) != 0)
		k++;
	if (k == ARRAY_SIZE(kinds))
		return 0; /* (a kind of a later release: not this one's to follow) */
	ch.kind = (enum store_row_kind)k;
	if (ch.kind == STORE_ROW_JOB)
		ch.id = strtoll(ch.key, NULL, 10);
	return c->cb(c->ctx, &ch);
}

static int job_chg_row(void *arg, const PGresult *res)
{
	struct chg_ctx *c = arg;
	struct store_change ch = {.kind = STORE_ROW_JOB,
				  .key = PQgetvalue(res, 0, 0),
				  .id = strtoll(PQgetvalue(res, 0, 0), NULL, 10),
				  .state = PQgetvalue(res, 0, 1),
				  .owner = PQgetvalue(res, 0, 2),
				  .settled_ms = strtoll(PQgetvalue(res, 0, 3), NULL, 10),
				  .stripped = PQgetvalue(res, 0, 4)[0] == 't'};
	if (!PQgetisnull(res, 0, 5)) {
		ch.doc = PQgetvalue(res, 0, 5);
		ch.len = (size_t)PQgetlength(res, 0, 5);
	}
	return c->cb(c->ctx, &ch);
}

static int named_chg_row(void *arg, const PGresult *res)
{
	struct chg_ctx *c = arg;
	struct store_change ch = {.kind = c->kind,
				  .key = PQgetvalue(res, 0, 0),
				  .doc = PQgetvalue(res, 0, 1),
				  .len = (size_t)PQgetlength(res, 0, 1)};
	return c->cb(c->ctx, &ch);
}

/* The newest change mark of every table, and what store_counts counts. */
#define NEWEST_CHG                                                                                 \
	"coalesce(greatest((SELECT max(chg) FROM jobs), (SELECT max(chg) FROM nodes), (SELECT "    \
	"max(chg) FROM queues), (SELECT max(chg) FROM users), (SELECT max(chg) FROM gone)), 0)"
#define STORE_COUNTS                                                                               \
	"(SELECT count(*) FROM jobs WHERE settled_ms = 0), (SELECT count(*) FROM jobs WHERE "      \
	"settled_ms > 0), (SELECT count(*) FROM nodes), (SELECT count(*) FROM queues), (SELECT "   \
	"count(*) FROM users)"

/* One snapshot (REPEATABLE READ): the newest mark and the counts, then
 * the rows deleted after *mark, then those written. The numbers go into
 * the statements' text, so the planner sees them: a scan of the index for
 * a few changes, of the table for all. */
static int pg_changes(struct store *base, int64_t *mark, store_change_cb cb, void *ctx,
		      struct store_counts *counts, struct tk_error *err)
{
	struct pg *st = PG(base);
	int r = conn_ok(st, err);
	if (r < 0 || (r = exec_ok(st, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", err,
				  "reading the changes")) < 0)
		return r;
	PGresult *res = PQexec(st->conn, counts ? "SELECT " NEWEST_CHG ", " STORE_COUNTS
						: "SELECT " NEWEST_CHG);
	int64_t newest = 0;
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		r = fail(st, res, err, "reading the newest change");
	} else {
		newest = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		if (counts)
			*counts = (struct store_counts){
				.jobs_open = strtoll(PQgetvalue(res, 0, 1), NULL, 10),
				.jobs_settled = strtoll(PQgetvalue(res, 0, 2), NULL, 10),
				.nodes = strtoll(PQgetvalue(res, 0, 3), NULL, 10),
				.queues = strtoll(PQgetvalue(res, 0, 4), NULL, 10),
				.users = strtoll(PQgetvalue(res, 0, 5), NULL, 10)};
	}
	PQclear(res);
	long long since = *mark < 0 ? -1 : (long long)*mark;
	struct chg_ctx c = {cb, ctx, STORE_ROW_JOB};
	char sql[256];
	if (r == 0 && since >= 0 && newest > since) {
		snprintf(sql, sizeof(sql),
			 "SELECT kind, key FROM gone WHERE chg > %lld ORDER BY chg", since);
		r = each_row(st, P_MAX, sql, NULL, gone_row, &c, err, "reading the rows deleted");
	}
	if (r == 0 && newest > since) {
		snprintf(sql, sizeof(sql),
			 "SELECT id, state, owner, settled_ms, doc = '', CASE WHEN settled_ms = 0 "
			 "THEN doc END FROM jobs WHERE chg > %lld",
			 since);
		r = each_row(st, P_MAX, sql, NULL, job_chg_row, &c, err,
			     "reading the jobs changed");
	}
	static const char *const named[] = {[STORE_ROW_NODE] = "nodes",
					    [STORE_ROW_QUEUE] = "queues",
					    [STORE_ROW_USER] = "users"};
	for (int k = STORE_ROW_NODE; r == 0 && newest > since && k <= STORE_ROW_USER; k++) {
		c.kind = (enum store_row_kind)k;
		snprintf(sql, sizeof(sql), "SELECT name, doc FROM %s WHERE chg > %lld", named[k],
			 since);
		r = each_row(st, P_MAX, sql, NULL, named_chg_row, &c, err,
			     "reading the rows changed");
	}
	if (r == 0 && (r = exec_ok(st, "COMMIT", err, "reading the changes")) == 0)
		*mark = newest;
	else
		exec_ok(st, "ROLLBACK", NULL, "");
	return r;
}

static const struct store_ops pg_ops = {
	.destroy = pg_destroy,
	.load = pg_load,
	.load_settled = pg_load_settled,
	.get_job = pg_get_job,
	.meta_get = pg_meta_get,
	.apply = pg_apply,
	.acct_cursor_new = pg_cursor_new,
	.is_empty = pg_is_empty,
	.quarantine = pg_quarantine,
	.exec = pg_exec,
	.dump = pg_dump,
	.insert = pg_insert,
	.lease_get = pg_lease_get,
	.lease_take = pg_lease_take,
	.lease_hold = pg_lease_hold,
	.changes = pg_changes,
};

static const struct store_acct_cursor_ops pg_cursor_ops = {
	.destroy = pg_cursor_destroy,
	.pause = pg_cursor_pause,
	.job = pg_cursor_job,
};
