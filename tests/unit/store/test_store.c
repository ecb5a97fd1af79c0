/* Unit tests of the SQLite store: migrations, batches, reloading, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"

static char dir[64];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/tenk-store-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char *cmd = xasprintf("rm -rf %s", dir);
	int r = system(cmd);
	free(cmd);
	return r;
}

struct rows {
	struct strbuf sb;
	int n;
};

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

static void test_roundtrip(void **state)
{
	char *path = xasprintf("%s/a.db", dir);
	struct store *st;
	struct tk_error err;
	assert_int_equal(store_open(path, &st, &err), 0);
	assert_int_equal(store_schema_version(st), 5);
	/* the store holds every job's request: its files are the server's alone */
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	char *wal = xasprintf("%s-wal", path);
	assert_int_equal(stat(wal, &sb), 0); /* WAL: there from the first write */
	assert_int_equal(sb.st_mode & 0777, 0600);
	free(wal);
	struct store_batch *b = store_batch_create();
	store_batch_put_job(b, 2, "PENDING", xstrdup("{\"v\":2}"));
	store_batch_put_job(b, 1, "RUNNING", xstrdup("{\"v\":1}"));
	store_batch_put_job(b, 2, "COMPLETED", xstrdup("{\"v\":3}")); /* later wins */
	store_batch_put_node(b, "n2", xstrdup("{\"n\":2}"));
	store_batch_put_node(b, "n1", xstrdup("{\"n\":1}"));
	store_batch_put_meta(b, "k", "v1");
	assert_int_equal(store_batch_len(b), 6);
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
	assert_string_equal(r.sb.buf, "n1={\"n\":1};");
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

static void test_empty_batch(void **state)
{
	char *path = xasprintf("%s/b.db", dir);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_empty_batch),
		cmocka_unit_test(test_newer_schema_refused),
		cmocka_unit_test(test_not_a_database),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
