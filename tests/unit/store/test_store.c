/*
 * Unit tests of the store: migrations, batches, reloading, errors, copies;
 * each that both implementations must pass runs against SQLite and against
 * a PostgreSQL the test starts (scripts/pgtest: initdb and pg_ctl in a
 * temporary folder, on a unix socket).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"

static char dir[64];
/* the PostgreSQL the tests started, in dir/pg ("" when none) */
static char pg_host[96];
static int ndb;

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/tenk-store-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	chmod(dir, 0711); /* (the postgres user's server keeps its files in dir/pg) */
	const char *script = getenv("TENK_PGTEST");
	if (!script) {
		printf("# no TENK_PGTEST: the PostgreSQL cases are skipped\n");
		return 0;
	}
	char *cmd = xasprintf("%s start %s/pg", script, dir);
	FILE *f = popen(cmd, "r");
	char url[256] = "";
	bool got = f && fgets(url, sizeof(url), f);
	int rc = f ? pclose(f) : -1;
	free(cmd);
	if (got && rc == 0)
		snprintf(pg_host, sizeof(pg_host), "%s/pg", dir);
	else
		printf("# PostgreSQL did not start (%s exit %d): its cases are skipped\n", script,
		       WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
	return 0;
}

static int teardown(void **state)
{
	if (pg_host[0]) {
		char *stop = xasprintf("%s stop %s", getenv("TENK_PGTEST"), pg_host);
		if (system(stop) != 0)
			printf("# stopping PostgreSQL failed\n");
		free(stop);
	}
	char *cmd = xasprintf("rm -rf %s", dir);
	int r = system(cmd);
	free(cmd);
	return r;
}

enum { SQ, PG };
static const int on_sqlite = SQ, on_pg = PG;

/* SQL run on the database where names, outside the store: 0 or -1. */
static int raw_exec(const char *where, const char *sql)
{
	if (store_kind_of(where) == STORE_SQLITE) {
		sqlite3 *db;
		assert_int_equal(sqlite3_open(where, &db), SQLITE_OK);
		int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
		sqlite3_close(db);
		return rc == SQLITE_OK ? 0 : -1;
	}
	PGconn *c = PQconnectdb(where);
	assert_int_equal(PQstatus(c), CONNECTION_OK);
	PGresult *res = PQexec(c, sql);
	int r = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK
			? 0
			: -1;
	PQclear(res);
	PQfinish(c);
	return r;
}

/* The integer a query of one value gives. */
static int64_t raw_int(const char *where, const char *sql)
{
	if (store_kind_of(where) == STORE_SQLITE) {
		sqlite3 *db;
		sqlite3_stmt *s;
		assert_int_equal(sqlite3_open(where, &db), SQLITE_OK);
		assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
		assert_int_equal(sqlite3_step(s), SQLITE_ROW);
		int64_t n = sqlite3_column_int64(s, 0);
		sqlite3_finalize(s);
		sqlite3_close(db);
		return n;
	}
	PGconn *c = PQconnectdb(where);
	assert_int_equal(PQstatus(c), CONNECTION_OK);
	PGresult *res = PQexec(c, sql);
	assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
	int64_t n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	PQfinish(c);
	return n;
}

/* A new store's location for a test: a file in dir, or a new database of
 * the PostgreSQL (the test is skipped when there is none). */
static char *where(void **state, const char *name)
{
	if (*(const int *)*state == SQ)
		return xasprintf("%s/%s.db", dir, name);
	if (!pg_host[0])
		skip();
	char *admin = xasprintf("postgresql:///tenk?host=%s&user=tenk", pg_host);
	char *sql = xasprintf("CREATE DATABASE t%d", ++ndb);
	assert_int_equal(raw_exec(admin, sql), 0);
	free(sql);
	free(admin);
	return xasprintf("postgresql:///t%d?host=%s&user=tenk", ndb, pg_host);
}

#define BOTH(f)                                                                                    \
	cmocka_unit_test_prestate(f, (void *)&on_sqlite),                                          \
		cmocka_unit_test_prestate(f, (void *)&on_pg)

struct rows {
	struct strbuf sb;
	int n;
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "a;b;" entries in sorted order (what comes in no order). */
static void sort_entries(struct strbuf *sb)
{
	char *copy = xstrdup(sb->buf), *save = NULL, *parts[4096];
	size_t n = 0;
	for (char *p = strtok_r(copy, ";", &save); p && n < 4096; p = strtok_r(NULL, ";", &save))
		parts[n++] = p;
	qsort(parts, n, sizeof(parts[0]), cmp_str);
	strbuf_reset(sb);
	for (size_t i = 0; i < n; i++)
		strbuf_addf(sb, "%s;", parts[i]);
	free(copy);
}

static int collect(void *ctx, const char *key, const char *doc, size_t len)
{
	struct rows *r = ctx;
	assert_int_equal(strlen(doc), len);
	strbuf_addf(&r->sb, "%s=%s;", key, doc);
	r->n++;
	return 0;
}

static int stop_at_two(void *ctx, const char *key, const char *doc, size_t len)
{
	struct rows *r = ctx;
	return ++r->n == 2 ? -ECANCELED : 0;
}

static int stop_acct(void *ctx, const struct store_acct *a)
{
	return -ECANCELED;
}

static void test_roundtrip(void **state)
{
	char *path = where(state, "a");
	struct store *st;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), 0);
	assert_int_equal(store_schema_version(st), 13);
	if (store_kind(st) == STORE_SQLITE) {
		/* the store holds every job's request: its files are the server's alone */
		struct stat sb;
		assert_int_equal(stat(path, &sb), 0);
		assert_int_equal(sb.st_mode & 0777, 0600);
		char *wal = xasprintf("%s-wal", path);
		assert_int_equal(stat(wal, &sb), 0); /* WAL: there from the first write */
		assert_int_equal(sb.st_mode & 0777, 0600);
		free(wal);
	}
	struct store_batch *b = store_batch_create();
	store_batch_put_job(b, 2, "PENDING", "ann", 0, xstrdup("{\"v\":2}"));
	store_batch_put_job(b, 1, "RUNNING", "bob", 0, xstrdup("{\"v\":1}"));
	store_batch_put_job(b, 2, "COMPLETED", "ann", 0, xstrdup("{\"v\":3}")); /* later wins */
	store_batch_put_node(b, "n2", xstrdup("{\"n\":2}"));
	store_batch_put_node(b, "n1", xstrdup("{\"n\":1}"));
	/* names read in byte order in both stores, whatever the locale */
	store_batch_put_node(b, "N3", xstrdup("{\"n\":3}"));
	store_batch_put_node(b, "n-4", xstrdup("{\"n\":4}"));
	store_batch_put_meta(b, "k", "v1");
	assert_int_equal(store_batch_len(b), 8);
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	b = store_batch_create();
	store_batch_del_node(b, "n2");
	store_batch_put_meta(b, "k", "v2");
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	store_destroy(st);

	/* a new process would see exactly this */
	assert_int_equal(store_open(path, &st, &err), 0);
	struct rows r = {0};
	strbuf_init(&r.sb);
	assert_int_equal(store_load_jobs(st, collect, &r, &err), 0);
	assert_string_equal(r.sb.buf, "1={\"v\":1};2={\"v\":3};");
	strbuf_reset(&r.sb);
	assert_int_equal(store_load_nodes(st, collect, &r, &err), 0);
	assert_string_equal(r.sb.buf, "N3={\"n\":3};n-4={\"n\":4};n1={\"n\":1};");
	strbuf_release(&r.sb);
	char *v;
	assert_int_equal(store_meta_get(st, "k", &v, &err), 0);
	assert_string_equal(v, "v2");
	free(v);
	assert_int_equal(store_meta_get(st, "none", &v, &err), -ENOENT);
	struct rows r2 = {0};
	assert_int_equal(store_load_jobs(st, stop_at_two, &r2, &err), -ECANCELED);
	/* the statement is reset after an early stop: loading again works */
	r2.n = -10;
	assert_int_equal(store_load_jobs(st, stop_at_two, &r2, &err), 0);
	store_destroy(st);
	free(path);
}

struct settled {
	struct strbuf sb;
};

static int collect_settled(void *ctx, int64_t id, const char *state, const char *owner,
			   int64_t settled_ms, bool stripped)
{
	struct settled *r = ctx;
	strbuf_addf(&r->sb, "%lld:%s:%s:%lld%s;", (long long)id, state, owner,
		    (long long)settled_ms, stripped ? ":stripped" : "");
	return 0;
}

/* Settled jobs are loaded by their columns, the others whole; a reader
 * reads one back while the writer's connection is open. */
static void test_settled(void **state)
{
	char *path = where(state, "s");
	struct store *st, *rd;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), 0);
	struct store_batch *b = store_batch_create();
	store_batch_put_job(b, 1, "COMPLETED", "ann", 5000, xstrdup("{\"v\":1}"));
	store_batch_put_job(b, 2, "RUNNING", "bob", 0, xstrdup("{\"v\":2}"));
	store_batch_put_job(b, 3, "CANCELLED", "bob", 0, xstrdup("{\"v\":3}"));
	store_batch_put_job(b, 4, "FAILED", "cy", 7000, xstrdup("{\"v\":4}"));
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	struct rows r = {0};
	strbuf_init(&r.sb);
	assert_int_equal(store_load_jobs(st, collect, &r, &err), 0);
	/* 3 is final but not settled (an attempt still ends): read whole */
	assert_string_equal(r.sb.buf, "2={\"v\":2};3={\"v\":3};");
	strbuf_release(&r.sb);
	struct settled g;
	strbuf_init(&g.sb);
	assert_int_equal(store_load_settled(st, collect_settled, &g, &err), 0);
	sort_entries(&g.sb);
	assert_string_equal(g.sb.buf, "1:COMPLETED:ann:5000;4:FAILED:cy:7000;");
	strbuf_release(&g.sb);

	assert_int_equal(store_open_reader(path, &rd, &err), 0);
	char *doc;
	size_t len;
	assert_int_equal(store_get_job(rd, 4, &doc, &len, &err), 0);
	assert_string_equal(doc, "{\"v\":4}");
	assert_int_equal(len, 7);
	free(doc);
	assert_int_equal(store_get_job(rd, 9, &doc, &len, &err), -ENOENT);
	assert_non_null(strstr(err.text, "no job 9"));
	/* the writer goes on; the reader sees what committed */
	b = store_batch_create();
	store_batch_put_job(b, 2, "COMPLETED", "bob", 9000, xstrdup("{\"v\":5}"));
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	assert_int_equal(store_get_job(rd, 2, &doc, &len, &err), 0);
	assert_string_equal(doc, "{\"v\":5}");
	free(doc);
	/* a reader writes nothing */
	b = store_batch_create();
	store_batch_put_meta(b, "k", "v");
	assert_int_not_equal(store_apply(rd, b, &err), 0);
	store_batch_destroy(b);
	/* retention: 1's document goes (its row stays), 4 goes whole; a job
	 * not settled is never touched */
	b = store_batch_create();
	store_batch_strip_job(b, 1);
	store_batch_del_job(b, 4);
	store_batch_del_job(b, 3);
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	strbuf_init(&g.sb);
	assert_int_equal(store_load_settled(st, collect_settled, &g, &err), 0);
	sort_entries(&g.sb);
	assert_string_equal(g.sb.buf, "1:COMPLETED:ann:5000:stripped;2:COMPLETED:bob:9000;");
	strbuf_release(&g.sb);
	strbuf_init(&r.sb);
	assert_int_equal(store_load_jobs(st, collect, &r, &err), 0);
	assert_string_equal(r.sb.buf, "3={\"v\":3};");
	strbuf_release(&r.sb);
	store_destroy(rd);
	store_destroy(st);
	free(path);
}

/* A store of schema 5 (rows without owner and settled_ms) opens migrated:
 * its jobs read whole, as not settled. */
static void test_migrates_jobs(void **state)
{
	char *path = xasprintf("%s/m.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(
		sqlite3_exec(db,
			     "CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL, "
			     "doc TEXT NOT NULL);"
			     "CREATE INDEX jobs_by_state ON jobs (state);"
			     "CREATE TABLE nodes (name TEXT PRIMARY KEY, doc TEXT NOT NULL);"
			     "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
			     "CREATE TABLE queues (name TEXT PRIMARY KEY, doc TEXT NOT NULL);"
			     "CREATE TABLE users (name TEXT PRIMARY KEY, doc TEXT NOT NULL);"
			     "CREATE TABLE quarantine (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
			     "kind TEXT NOT NULL, key TEXT NOT NULL, doc TEXT, reason TEXT NOT "
			     "NULL, at_ms INTEGER NOT NULL);"
			     "CREATE TABLE audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, at_ms "
			     "INTEGER NOT NULL, who TEXT NOT NULL, doc TEXT NOT NULL);"
			     "INSERT INTO jobs VALUES (1, 'COMPLETED', '{\"v\":1}');"
			     "PRAGMA user_version = 5;",
			     NULL, NULL, NULL),
		SQLITE_OK);
	sqlite3_close(db);
	struct store *st;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), 0);
	assert_int_equal(store_schema_version(st), 13);
	struct rows r = {0};
	strbuf_init(&r.sb);
	assert_int_equal(store_load_jobs(st, collect, &r, &err), 0);
	assert_string_equal(r.sb.buf, "1={\"v\":1};");
	strbuf_release(&r.sb);
	/* no job settled as far as it knows: nothing to fill */
	char *v;
	assert_int_equal(store_meta_get(st, "acct_fill_to", &v, &err), -ENOENT);
	store_destroy(st);
	free(path);
}

/* Audit rows older than the floor go, at most so many a batch; no other
 * delete of a row is taken. */
static void test_audit_pruned(void **state)
{
	char *path = where(state, "au");
	struct store *st;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), 0);
	struct store_batch *b = store_batch_create();
	for (int i = 1; i <= 5; i++)
		store_batch_add_audit(b, i * 1000, "ann", xstrdup("{}"));
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	b = store_batch_create();
	store_batch_prune_audit(b, 4000, 2); /* three are older: two go now */
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	assert_int_equal(raw_int(path, "SELECT count(*) FROM audit"), 3);
	b = store_batch_create();
	store_batch_prune_audit(b, 4000, 100);
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	assert_int_equal(raw_int(path, "SELECT min(at_ms) FROM audit"), 4000);
	/* the store refuses a write that rewrites one: nothing of its batch stays */
	b = store_batch_create();
	store_batch_add_audit(b, 9000, "bob", xstrdup("{}"));
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	store_destroy(st);
	assert_int_equal(raw_exec(path, "DELETE FROM audit WHERE at_ms = 5000"), -1);
	assert_int_equal(raw_exec(path, "UPDATE audit SET who = 'x' WHERE at_ms = 4000"), -1);
	assert_int_equal(raw_int(path, "SELECT count(*) FROM audit"), 3);
	free(path);
}

/* The cluster's configuration: versions read back in order, whole; never
 * rewritten; a version written twice fails its batch, which leaves
 * nothing. */
static void test_config_versions(void **state)
{
	char *path = where(state, "cfg");
	struct store *st;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), 0);
	struct store_batch *b = store_batch_create();
	store_batch_add_config(b, 2, 2000, "bob",
			       xstrdup("{\"config\":{\"default_class\":\"x\"}}"));
	store_batch_add_config(b, 1, 1000, "ann", xstrdup("{\"config\":{}}"));
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	struct rows r = {0};
	strbuf_init(&r.sb);
	assert_int_equal(store_load_config(st, collect, &r, &err), 0);
	assert_string_equal(r.sb.buf,
			    "1={\"config\":{}};2={\"config\":{\"default_class\":\"x\"}};");
	b = store_batch_create();
	store_batch_add_config(b, 3, 3000, "ann", xstrdup("{}"));
	store_batch_add_config(b, 2, 3000, "ann", xstrdup("{}"));
	assert_int_equal(store_apply(st, b, &err) < 0, 1);
	store_batch_destroy(b);
	store_destroy(st);
	assert_int_equal(raw_int(path, "SELECT count(*) FROM config"), 2);
	assert_int_equal(raw_exec(path, "DELETE FROM config WHERE version = 1"), -1);
	assert_int_equal(raw_exec(path, "UPDATE config SET who = 'x' WHERE version = 2"), -1);
	assert_int_equal(raw_int(path, "SELECT count(*) FROM config"), 2);
	strbuf_release(&r.sb);
	free(path);
}

/* An attempt's record, as a test writes it. */
static struct store_acct acct_row(int64_t job, int attempt, const char *owner, const char *doc)
{
	return (struct store_acct){.job_id = job,
				   .attempt = attempt,
				   .owner = owner,
				   .queue = "q",
				   .state = "COMPLETED",
				   .model = "H100",
				   .start_ms = job * 10,
				   .end_ms = job * 10 + attempt,
				   .gpu_hours = (double)job / 4,
				   .busy_hours = 0.5,
				   .cost = 1.25 * attempt,
				   .energy_j = -1,
				   .doc = doc,
				   .good_hours = (double)job / 8,
				   .service = attempt == 2 ? "chat" : ""};
}

static int collect_acct(void *ctx, const struct store_acct *a)
{
	struct strbuf *sb = ctx;
	strbuf_addf(sb, "%lld.%d:%s:%s:%s:%s:%lld:%lld:%.17g:%.17g:%.17g:%.17g:%s:%.17g:%s;",
		    (long long)a->job_id, a->attempt, a->owner, a->queue, a->state, a->model,
		    (long long)a->start_ms, (long long)a->end_ms, a->gpu_hours, a->busy_hours,
		    a->cost, a->energy_j, a->doc, a->good_hours, a->service);
	return 0;
}

/* What a cursor reads for job id, compact: "id.attempt:doc;" per record. */
static int docs_of(void *ctx, const struct store_acct *a)
{
	strbuf_addf(ctx, "%lld.%d:%s;", (long long)a->job_id, a->attempt, a->doc);
	return 0;
}

static const char *acct_of(struct store_acct_cursor *c, struct strbuf *sb, int64_t id)
{
	struct tk_error err;
	strbuf_reset(sb);
	assert_int_equal(store_acct_job(c, id, docs_of, sb, &err), 0);
	return sb->buf;
}

/* Accounting records: written and replaced a job at a time, read job by job
 * in any order (on through the table, seeking over wide gaps and back),
 * each slice of a scan seeing what committed since the last. */
static void test_acct(void **state)
{
	char *path = where(state, "acct");
	struct store *st, *rd;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), 0);
	struct store_batch *b = store_batch_create();
	struct store_acct rows[3] = {acct_row(5, 1, "ann", "{\"a\":1}"),
				     acct_row(5, 2, "ann", "{\"a\":2}")};
	store_batch_set_acct(b, 5, rows, 2);
	rows[0] = acct_row(7, 1, "bob", "{\"b\":1}");
	store_batch_set_acct(b, 7, rows, 1);
	for (int64_t id = 100; id < 400; id += 3) {
		rows[0] = acct_row(id, 1, "cy", "{}");
		store_batch_set_acct(b, id, rows, 1);
	}
	rows[0] = acct_row(1000, 999, "dee", "{\"d\":1}");
	store_batch_set_acct(b, 1000, rows, 1);
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);

	assert_int_equal(store_open_reader(path, &rd, &err), 0);
	struct store_acct_cursor *c;
	assert_int_equal(store_acct_cursor_new(rd, &c, &err), 0);
	struct strbuf sb;
	strbuf_init(&sb);
	/* every field as written */
	assert_int_equal(store_acct_job(c, 5, collect_acct, &sb, &err), 0);
	assert_string_equal(sb.buf,
			    "5.1:ann:q:COMPLETED:H100:50:51:1.25:0.5:1.25:-1:{\"a\":1}:0.625:;"
			    "5.2:ann:q:COMPLETED:H100:50:52:1.25:0.5:2.5:-1:{\"a\":2}:0.625:chat;");
	/* on in rising order, with jobs without records between */
	assert_string_equal(acct_of(c, &sb, 6), "");
	assert_string_equal(acct_of(c, &sb, 7), "7.1:{\"b\":1};");
	assert_string_equal(acct_of(c, &sb, 8), "");
	assert_string_equal(acct_of(c, &sb, 103), "103.1:{};");
	assert_string_equal(acct_of(c, &sb, 104), "");
	assert_string_equal(acct_of(c, &sb, 394), "394.1:{};"); /* a wide jump seeks */
	assert_string_equal(acct_of(c, &sb, 999), "");
	assert_string_equal(acct_of(c, &sb, 1000), "1000.999:{\"d\":1};");
	assert_string_equal(acct_of(c, &sb, 1001), "");
	/* and back, and the same job twice */
	assert_string_equal(acct_of(c, &sb, 5), "5.1:{\"a\":1};5.2:{\"a\":2};");
	assert_string_equal(acct_of(c, &sb, 5), "5.1:{\"a\":1};5.2:{\"a\":2};");
	assert_string_equal(acct_of(c, &sb, 100), "100.1:{};");
	/* a job's records replaced whole; a paused cursor sees the commit */
	b = store_batch_create();
	rows[0] = acct_row(5, 3, "ann", "{\"a\":3}");
	store_batch_set_acct(b, 5, rows, 1);
	store_batch_set_acct(b, 7, rows, 0);
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	store_acct_cursor_pause(c);
	assert_string_equal(acct_of(c, &sb, 5), "5.3:{\"a\":3};");
	assert_string_equal(acct_of(c, &sb, 7), "");
	assert_string_equal(acct_of(c, &sb, 100), "100.1:{};");
	/* a callback stops the read */
	assert_int_equal(store_acct_job(c, 5, stop_acct, NULL, &err), -ECANCELED);
	assert_string_equal(acct_of(c, &sb, 5), "5.3:{\"a\":3};");
	strbuf_release(&sb);
	store_acct_cursor_destroy(c);
	store_destroy(rd);
	store_destroy(st);
	free(path);
}

static int count_acct(void *ctx, const struct store_acct *a)
{
	(*(int *)ctx)++;
	return 0;
}

/* Reads that cover a job whole whatever the reader reads at a time: a job
 * of 500 attempts among jobs of one, read on through the table, with
 * pauses as a scan in slices makes them. */
static void test_acct_many(void **state)
{
	char *path = where(state, "acct-many");
	struct store *st;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), 0);
	struct store_batch *b = store_batch_create();
	struct store_acct *rows = xcalloc(500, sizeof(*rows));
	for (int64_t id = 1; id <= 2000; id++) {
		int n = id == 700 ? 500 : 1;
		for (int k = 0; k < n; k++)
			rows[k] = acct_row(id, k + 1, "ann", "{}");
		store_batch_set_acct(b, id, rows, n);
	}
	free(rows);
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	struct store_acct_cursor *c;
	assert_int_equal(store_acct_cursor_new(st, &c, &err), 0);
	int64_t total = 0;
	for (int64_t id = 1; id <= 2001; id++) {
		int n = 0;
		assert_int_equal(store_acct_job(c, id, count_acct, &n, &err), 0);
		assert_int_equal(n, id == 700 ? 500 : id <= 2000 ? 1 : 0);
		total += n;
		if (id % 97 == 0)
			store_acct_cursor_pause(c);
	}
	assert_int_equal(total, 2499);
	/* straight to the job of many, fresh */
	store_acct_cursor_pause(c);
	int n = 0;
	assert_int_equal(store_acct_job(c, 700, count_acct, &n, &err), 0);
	assert_int_equal(n, 500);
	store_acct_cursor_destroy(c);
	store_destroy(st);
	free(path);
}

/* A store of schema 6 with settled jobs opens with the ids up to the
 * newest settled one to fill. */
static void test_acct_fill_marked(void **state)
{
	char *path = xasprintf("%s/f.db", dir);
	struct store *st;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), 0);
	struct store_batch *b = store_batch_create();
	store_batch_put_job(b, 3, "COMPLETED", "ann", 5000, xstrdup("{}"));
	store_batch_put_job(b, 9, "COMPLETED", "ann", 6000, xstrdup("{}"));
	store_batch_put_job(b, 12, "RUNNING", "ann", 0, xstrdup("{}"));
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	store_destroy(st);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
				      "DROP TABLE acct; DROP TABLE lease; DROP TABLE config; "
				      "PRAGMA user_version = 6;",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(store_open(path, &st, &err), 0);
	assert_int_equal(store_schema_version(st), 13);
	char *v;
	assert_int_equal(store_meta_get(st, "acct_fill_to", &v, &err), 0);
	assert_string_equal(v, "9");
	free(v);
	store_destroy(st);
	free(path);
}

static void test_empty_batch(void **state)
{
	char *path = where(state, "b");
	struct store *st;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), 0);
	struct store_batch *b = store_batch_create();
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	store_destroy(st);
	free(path);
}

static void test_newer_schema_refused(void **state)
{
	char *path = xasprintf("%s/c.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	struct store *st;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), -EPROTO);
	assert_non_null(strstr(err.text, "schema version 99 is newer"));
	free(path);
}

static void test_not_a_database(void **state)
{
	char *path = xasprintf("%s/d.db", dir);
	char junk[4096];
	memset(junk, 'x', sizeof(junk));
	assert_int_equal(tk_write_file(path, junk, sizeof(junk), 0600), 0);
	struct store *st;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), -EBADMSG);
	assert_non_null(strstr(err.text, "store: "));
	free(path);
	char *missing = xasprintf("%s/no/such/dir/e.db", dir);
	assert_true(store_open(missing, &st, &err) < 0);
	free(missing);
}

/* Rows of every table, into the store at path. */
static void fill(const char *path)
{
	struct store *st;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), 0);
	struct store_batch *b = store_batch_create();
	for (int i = 1; i <= 50; i++) {
		char *doc = xasprintf("{\"v\":%d,\"text\":\"caf\u00e9 \\\"quoted\\\"\"}", i);
		store_batch_put_job(b, i, i % 3 ? "RUNNING" : "COMPLETED", i % 2 ? "ann" : "bob",
				    i % 3 ? 0 : 1000 + i, doc);
		store_batch_add_audit(b, 100 * i, "ann", xstrdup("{\"what\":\"submit\"}"));
		if (i % 3 == 0) {
			struct store_acct rows[2] = {acct_row(i, 1, "bob", "{\"a\":1}"),
						     acct_row(i, 2, "bob", "{\"a\":2}")};
			rows[1].gpu_hours = 1.0 / 3.0; /* every bit of a double comes across */
			store_batch_set_acct(b, i, rows, 2);
		}
	}
	store_batch_put_node(b, "gpu-b", xstrdup("{}"));
	store_batch_put_node(b, "gpu-A", xstrdup("{}"));
	store_batch_put_queue(b, "default", xstrdup("{\"w\":1}"));
	store_batch_put_user(b, "ann", xstrdup("{\"tokens\":[]}"));
	store_batch_put_meta(b, "next_id", "51");
	store_batch_add_config(b, 1, 700, "ann", xstrdup("{\"config\":{}}"));
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	assert_int_equal(store_quarantine(st, "job", "7", "did not decode", 5, &err), 0);
	assert_int_equal(store_quarantine(st, "node", "gpu-b", "did not decode", 6, &err), 0);
	store_destroy(st);
}

static void dump_all(const char *path, struct strbuf *sb)
{
	struct store *st;
	struct tk_error err;
	struct rows r = {0};
	strbuf_init(&r.sb);
	assert_int_equal(store_open(path, &st, &err), 0);
	assert_int_equal(store_load_jobs(st, collect, &r, &err), 0);
	assert_int_equal(store_load_nodes(st, collect, &r, &err), 0);
	assert_int_equal(store_load_queues(st, collect, &r, &err), 0);
	assert_int_equal(store_load_users(st, collect, &r, &err), 0);
	assert_int_equal(store_load_audit(st, collect, &r, &err), 0);
	assert_int_equal(store_load_config(st, collect, &r, &err), 0);
	struct settled g;
	strbuf_init(&g.sb);
	assert_int_equal(store_load_settled(st, collect_settled, &g, &err), 0);
	sort_entries(&g.sb);
	strbuf_add(&r.sb, g.sb.buf, g.sb.len);
	strbuf_release(&g.sb);
	struct store_acct_cursor *c;
	assert_int_equal(store_acct_cursor_new(st, &c, &err), 0);
	for (int i = 1; i <= 50; i++)
		assert_int_equal(store_acct_job(c, i, collect_acct, &r.sb, &err), 0);
	store_acct_cursor_destroy(c);
	store_destroy(st);
	strbuf_add(sb, r.sb.buf, r.sb.len);
	strbuf_release(&r.sb);
}

/* A cluster moves between the two kinds of store and back, every row the
 * same; a copy into a store in use, or onto itself, is refused. */
static void test_copy(void **state)
{
	char *a = where(state, "copy-a"), *b = where(state, "copy-b");
	char *c = xasprintf("%s/copy-c%d.db", dir, *(const int *)*state);
	fill(a);
	struct store_copy_report rep;
	struct tk_error err;
	assert_int_equal(store_copy(a, b, &rep, &err), 0);
	/* jobs 50 less 7, set aside; 25 audit rows... */
	int64_t rows = 0;
	for (int i = 0; i < rep.ntables; i++)
		rows += rep.tables[i].rows;
	assert_int_equal(rows, rep.rows);
	assert_int_equal(rep.ntables, 9);
	assert_string_equal(rep.tables[8].name, "config");
	assert_int_equal(rep.tables[8].rows, 1);
	assert_string_equal(rep.tables[1].name, "jobs");
	assert_int_equal(rep.tables[1].rows, 49);
	assert_string_equal(rep.tables[5].name, "quarantine");
	assert_int_equal(rep.tables[5].rows, 2);
	assert_int_equal(store_copy(b, c, NULL, &err), 0);
	struct strbuf x, y;
	strbuf_init(&x);
	strbuf_init(&y);
	dump_all(a, &x);
	dump_all(c, &y);
	assert_string_equal(x.buf, y.buf);
	assert_non_null(strstr(x.buf, ":0.33333333333333331:")); /* every bit */
	strbuf_release(&x);
	strbuf_release(&y);
	/* the copies go on: a new audit row after the last copied */
	struct store *st;
	assert_int_equal(store_open(b, &st, &err), 0);
	struct store_batch *batch = store_batch_create();
	store_batch_add_audit(batch, 99999, "cy", xstrdup("{}"));
	assert_int_equal(store_apply(st, batch, &err), 0);
	store_batch_destroy(batch);
	store_destroy(st);
	assert_int_equal(raw_int(b, "SELECT max(seq) FROM audit"), 51);
	/* refused: into a store that holds a cluster, or onto itself */
	assert_int_equal(store_copy(a, c, NULL, &err), -EEXIST);
	assert_non_null(strstr(err.text, "already holds a cluster"));
	assert_int_equal(store_copy(a, a, NULL, &err), -EINVAL);
	free(a);
	free(b);
	free(c);
}

/* PostgreSQL: a password never comes in the URL; a broken connection is
 * opened again; a schema newer than this tenk is refused. */
static void test_pg_connection(void **state)
{
	char *url = where(state, "conn");
	struct store *st;
	struct tk_error err;
	char *pw = xasprintf("postgresql://tenk:secret@localhost/tenk");
	assert_int_equal(store_open(pw, &st, &err), -EINVAL);
	assert_non_null(strstr(err.text, "password file"));
	free(pw);
	pw = xasprintf("%s&password=secret", url);
	assert_int_equal(store_open(pw, &st, &err), -EINVAL);
	free(pw);
	char *none = xasprintf("postgresql:///t%d?host=%s/nowhere&user=tenk", ndb, dir);
	assert_int_equal(store_open(none, &st, &err), -ECONNREFUSED);
	assert_non_null(strstr(err.text, "cannot connect to PostgreSQL"));
	free(none);

	assert_int_equal(store_open(url, &st, &err), 0);
	/* every connection of the store's ends under it */
	assert_int_equal(raw_exec(url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
				       "WHERE application_name LIKE 'tenk-server-%'"),
			 0);
	struct store_batch *b = store_batch_create();
	store_batch_put_meta(b, "k", "v");
	/* (gone once its row is: within 5 s) */
	for (int i = 0; i < 500 && raw_int(url, "SELECT count(*) FROM pg_stat_activity WHERE "
						"application_name LIKE 'tenk-server-%'") > 0;
	     i++)
		usleep(10000);
	/* found broken: -EIO, which the server tries again; then it is opened again */
	assert_int_equal(store_apply(st, b, &err), -EIO);
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	char *v;
	assert_int_equal(store_meta_get(st, "k", &v, &err), 0);
	assert_string_equal(v, "v");
	free(v);
	store_destroy(st);
	assert_int_equal(raw_exec(url, "UPDATE tenk_schema SET version = 99"), 0);
	assert_int_equal(store_open(url, &st, &err), -EPROTO);
	assert_non_null(strstr(err.text, "schema version 99 is newer"));
	free(url);
}

/* A batch is all or nothing on both: a failing statement (a table gone
 * under the store) takes the batch's other changes with it, and the store
 * goes on. */
static void test_batch_atomic(void **state)
{
	char *path = where(state, "atomic");
	struct store *st;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), 0);
	struct store_batch *b = store_batch_create();
	store_batch_put_job(b, 1, "PENDING", "ann", 0, xstrdup("{}"));
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	assert_int_equal(raw_exec(path, "DROP TABLE meta"), 0);
	b = store_batch_create();
	store_batch_put_job(b, 2, "PENDING", "ann", 0, xstrdup("{}"));
	store_batch_put_meta(b, "k", "lost");
	assert_true(store_apply(st, b, &err) < 0);
	assert_non_null(strstr(err.text, "store: "));
	store_batch_destroy(b);
	char *doc;
	size_t len;
	assert_int_equal(store_get_job(st, 2, &doc, &len, &err), -ENOENT);
	assert_int_equal(store_get_job(st, 1, &doc, &len, &err), 0);
	free(doc);
	/* and the store goes on */
	b = store_batch_create();
	store_batch_put_job(b, 3, "PENDING", "ann", 0, xstrdup("{\"v\":3}"));
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	assert_int_equal(store_get_job(st, 3, &doc, &len, &err), 0);
	assert_string_equal(doc, "{\"v\":3}");
	free(doc);
	store_destroy(st);
	free(path);
}

/* Two servers on one PostgreSQL: one holds the lease and its batches
 * commit; when it lapses the other takes it (a new term), and from then
 * on the first's batches fail with -ENOLCK and write nothing. */
static void test_pg_lease(void **state)
{
	char *url = where(state, "lease");
	struct store *a, *b;
	struct store_lease l;
	struct tk_error err;
	assert_int_equal(store_open(url, &a, &err), 0);
	assert_int_equal(store_open(url, &b, &err), 0);
	assert_int_equal(store_lease_get(a, &l, &err), -ENOENT);
	assert_int_equal(store_lease_take(a, "A", "https://a:7480", 400, &l, &err), 0);
	assert_string_equal(l.holder, "A");
	assert_int_equal(l.term, 1);
	assert_true(l.remaining_ms > 0 && l.remaining_ms <= 400);
	assert_int_equal(store_lease_take(b, "B", "https://b:7480", 400, &l, &err), -EBUSY);
	assert_string_equal(l.holder, "A");
	assert_string_equal(l.url, "https://a:7480");
	store_lease_hold(a, "A", 1, 400);
	/* an empty batch renews it too: past the first lapse, still A's */
	struct store_batch *e = store_batch_create();
	for (int i = 0; i < 4; i++) {
		usleep(150000);
		assert_int_equal(store_apply(a, e, &err), 0);
	}
	assert_int_equal(store_lease_take(b, "B", "https://b:7480", 400, &l, &err), -EBUSY);
	/* A goes quiet: B takes over, term 2 */
	usleep(500000);
	assert_int_equal(store_lease_take(b, "B", "https://b:7480", 400, &l, &err), 0);
	assert_int_equal(l.term, 2);
	store_lease_hold(b, "B", 2, 400);
	struct store_batch *w = store_batch_create();
	store_batch_put_meta(w, "written_by", "A");
	assert_int_equal(store_apply(a, w, &err), -ENOLCK);
	assert_non_null(strstr(err.text, "took over the lease"));
	assert_int_equal(store_apply(a, e, &err), -ENOLCK);
	char *v;
	assert_int_equal(store_meta_get(b, "written_by", &v, &err), -ENOENT);
	store_batch_destroy(w);
	w = store_batch_create();
	store_batch_put_meta(w, "written_by", "B");
	assert_int_equal(store_apply(b, w, &err), 0);
	store_batch_destroy(w);
	assert_int_equal(store_meta_get(a, "written_by", &v, &err), 0);
	assert_string_equal(v, "B");
	free(v);
	assert_int_equal(store_lease_get(a, &l, &err), 0);
	assert_string_equal(l.holder, "B");
	/* A, started again, is a standby */
	assert_int_equal(store_lease_take(a, "A2", "https://a:7480", 400, &l, &err), -EBUSY);
	store_batch_destroy(e);
	store_destroy(a);
	store_destroy(b);
	free(url);
}

/* A change as "kind key[ gone][ state settled stripped][=doc];". */
static int collect_change(void *ctx, const struct store_change *c)
{
	struct rows *r = ctx;
	static const char *const kinds[] = {"job", "node", "queue", "user"};
	strbuf_addf(&r->sb, "%s %s", kinds[c->kind], c->key);
	if (c->gone)
		strbuf_addstr(&r->sb, " gone");
	else if (c->kind == STORE_ROW_JOB)
		strbuf_addf(&r->sb, " %s %s %s", c->state, c->settled_ms ? "settled" : "open",
			    c->stripped ? "stripped" : "kept");
	if (c->doc) {
		assert_int_equal(strlen(c->doc), c->len);
		strbuf_addf(&r->sb, "=%s", c->doc);
	}
	strbuf_addch(&r->sb, ';');
	r->n++;
	return 0;
}

/* What a standby follows: every row at first, then what changed since
 * (deletions first), whoever wrote it; counts in the same snapshot. */
static void test_pg_changes(void **state)
{
	char *url = where(state, "changes");
	struct store *st;
	struct tk_error err;
	struct store_counts n;
	struct rows r = {0};
	strbuf_init(&r.sb);
	assert_int_equal(store_open(url, &st, &err), 0);
	int64_t mark = -1;
	assert_int_equal(store_changes(st, &mark, collect_change, &r, &n, &err), 0);
	assert_int_equal(mark, 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(n.jobs_open + n.jobs_settled + n.nodes + n.queues + n.users, 0);

	struct store_batch *b = store_batch_create();
	store_batch_put_job(b, 1, "PENDING", "ann", 0, xstrdup("{\"id\":1}"));
	store_batch_put_job(b, 2, "COMPLETED", "bob", 5, xstrdup("{\"id\":2}"));
	store_batch_put_node(b, "n1", xstrdup("{\"n\":1}"));
	store_batch_put_queue(b, "q", xstrdup("{\"q\":1}"));
	store_batch_put_user(b, "u", xstrdup("{\"u\":1}"));
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	mark = -1;
	assert_int_equal(store_changes(st, &mark, collect_change, &r, &n, &err), 0);
	assert_true(mark > 0);
	sort_entries(&r.sb);
	assert_string_equal(r.sb.buf, "job 1 PENDING open kept={\"id\":1};"
				      "job 2 COMPLETED settled kept;node n1={\"n\":1};"
				      "queue q={\"q\":1};user u={\"u\":1};");
	assert_int_equal(n.jobs_open, 1);
	assert_int_equal(n.jobs_settled, 1);
	assert_int_equal(n.nodes, 1);
	assert_int_equal(n.queues, 1);
	assert_int_equal(n.users, 1);

	/* changes since: the job settled, a node gone and another come, a
	 * document stripped; what did not change is not read again */
	int64_t m1 = mark;
	b = store_batch_create();
	store_batch_put_job(b, 1, "COMPLETED", "ann", 9, xstrdup("{\"id\":1,\"done\":1}"));
	store_batch_del_node(b, "n1");
	store_batch_put_node(b, "n2", xstrdup("{\"n\":2}"));
	store_batch_strip_job(b, 2);
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	strbuf_reset(&r.sb);
	assert_int_equal(store_changes(st, &mark, collect_change, &r, NULL, &err), 0);
	assert_true(mark > m1);
	assert_non_null(strstr(r.sb.buf, "node n1 gone;"));
	assert_true(strncmp(r.sb.buf, "node n1 gone;", 13) == 0); /* deletions first */
	sort_entries(&r.sb);
	assert_string_equal(r.sb.buf, "job 1 COMPLETED settled kept;job 2 COMPLETED settled "
				      "stripped;node n1 gone;node n2={\"n\":2};");
	/* nothing since */
	int64_t m2 = mark;
	strbuf_reset(&r.sb);
	assert_int_equal(store_changes(st, &mark, collect_change, &r, NULL, &err), 0);
	assert_int_equal(mark, m2);
	assert_string_equal(r.sb.buf, "");
	/* a write that knows nothing of marks (an earlier release's) is
	 * followed too; and a job's row deleted */
	assert_int_equal(raw_exec(url, "UPDATE users SET doc = '{\"u\":2}' WHERE name = 'u'"), 0);
	b = store_batch_create();
	store_batch_del_job(b, 2);
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	assert_int_equal(store_changes(st, &mark, collect_change, &r, &n, &err), 0);
	assert_string_equal(r.sb.buf, "job 2 gone;user u={\"u\":2};");
	assert_int_equal(n.jobs_open + n.jobs_settled, 1);
	/* deletion marks older than STORE_GONE_KEEP_MS go at the next delete */
	assert_int_equal(raw_exec(url, "INSERT INTO gone VALUES (-5, 'node', 'old', 1)"), 0);
	b = store_batch_create();
	store_batch_del_node(b, "n2");
	assert_int_equal(store_apply(st, b, &err), 0);
	store_batch_destroy(b);
	assert_int_equal(raw_int(url, "SELECT count(*) FROM gone WHERE chg = -5"), 0);
	/* a mark beyond the store's newest: not the store followed */
	int64_t ahead = mark + 1000;
	assert_int_equal(store_changes(st, &ahead, collect_change, &r, NULL, &err), 0);
	assert_true(ahead < mark + 1000);
	strbuf_release(&r.sb);
	store_destroy(st);
	free(url);
}

/* SQLite is one server's store: no lease. */
static void test_sqlite_has_no_lease(void **state)
{
	char *path = xasprintf("%s/nolease.db", dir);
	struct store *st;
	struct store_lease l;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), 0);
	assert_int_equal(store_lease_get(st, &l, &err), -ENOTSUP);
	assert_int_equal(store_lease_take(st, "A", "u", 1000, &l, &err), -ENOTSUP);
	int64_t mark = -1;
	assert_int_equal(store_changes(st, &mark, NULL, NULL, NULL, &err), -ENOTSUP);
	store_destroy(st);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		BOTH(test_roundtrip),
		BOTH(test_settled),
		cmocka_unit_test(test_migrates_jobs),
		BOTH(test_audit_pruned),
		BOTH(test_config_versions),
		BOTH(test_acct),
		BOTH(test_acct_many),
		cmocka_unit_test(test_acct_fill_marked),
		BOTH(test_empty_batch),
		cmocka_unit_test(test_newer_schema_refused),
		cmocka_unit_test(test_not_a_database),
		BOTH(test_copy),
		BOTH(test_batch_atomic),
		cmocka_unit_test_prestate(test_pg_connection, (void *)&on_pg),
		cmocka_unit_test_prestate(test_pg_lease, (void *)&on_pg),
		cmocka_unit_test_prestate(test_pg_changes, (void *)&on_pg),
		cmocka_unit_test(test_sqlite_has_no_lease),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
