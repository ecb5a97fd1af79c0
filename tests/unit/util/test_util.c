/* Unit tests of src/util: parsers, strbuf, map, options, files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "util/util.h"

static void test_parse_int64(void **state)
{
	struct {
		const char *in;
		int64_t min, max;
		int rc;
		int64_t want;
	} cases[] = {
		{"0", 0, 10, 0, 0},	   {"10", 0, 10, 0, 10},
		{"11", 0, 10, -ERANGE, 0}, {"-1", 0, 10, -ERANGE, 0},
		{"-5", -10, 10, 0, -5},	   {"", 0, 10, -EINVAL, 0},
		{"1x", 0, 10, -EINVAL, 0}, {" 1", 0, 10, -EINVAL, 0},
		{"+3", 0, 10, 0, 3},	   {"99999999999999999999", 0, INT64_MAX, -ERANGE, 0},
		{"-", 0, 1, -EINVAL, 0},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int64_t v = -777;
		int rc = tk_parse_int64(cases[i].in, cases[i].min, cases[i].max, &v);
		assert_int_equal(rc, cases[i].rc);
		if (rc == 0)
			assert_int_equal(v, cases[i].want);
		else
			assert_int_equal(v, -777); /* untouched on failure */
	}
}

static void test_parse_size(void **state)
{
	struct {
		const char *in;
		int rc;
		int64_t mib;
	} cases[] = {
		{"80G", 0, 81920},     {"80GB", 0, 81920},
		{"80GiB", 0, 81920},   {"512M", 0, 512},
		{"512", 0, 512},       {"1T", 0, 1048576},
		{"1.5G", 0, 1536},     {"1K", 0, 1},
		{"0", 0, 0},	       {"g", -EINVAL, 0},
		{"10X", -EINVAL, 0},   {"", -EINVAL, 0},
		{"-1G", -EINVAL, 0},   {"1.2345G", -EINVAL, 0},
		{"1..2G", -EINVAL, 0},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int64_t v = 0;
		int rc = tk_parse_size_mib(cases[i].in, &v);
		assert_int_equal(rc, cases[i].rc);
		if (rc == 0)
			assert_int_equal(v, cases[i].mib);
	}
}

static void test_parse_duration(void **state)
{
	struct {
		const char *in;
		int rc;
		int64_t s;
	} cases[] = {
		{"90", 0, 90},		 {"90s", 0, 90},
		{"10m", 0, 600},	 {"2h", 0, 7200},
		{"1d", 0, 86400},	 {"1h30m", 0, 5400},
		{"1d2h3m4s", 0, 93784},	 {"30:00", 0, 1800},
		{"01:30:00", 0, 5400},	 {"2-00:00:00", 0, 172800},
		{"1-12:00", 0, 129600},	 {"1h30", -EINVAL, 0},
		{"30m1h", -EINVAL, 0},	 {"1h1h", -EINVAL, 0},
		{"", -EINVAL, 0},	 {"abc", -EINVAL, 0},
		{"1:60:00", -ERANGE, 0}, {"10:75", -ERANGE, 0},
		{"-5", -EINVAL, 0},	 {"99999999999999999999", -ERANGE, 0},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int64_t v = 0;
		int rc = tk_parse_duration(cases[i].in, &v);
		if (rc != cases[i].rc)
			fail_msg("\"%s\": rc %d, want %d", cases[i].in, rc, cases[i].rc);
		if (rc == 0 && v != cases[i].s)
			fail_msg("\"%s\": %lld s, want %lld", cases[i].in, (long long)v,
				 (long long)cases[i].s);
	}
	/* a job's time limit as Slurm reads it */
	struct {
		const char *in;
		int rc;
		int64_t s;
	} limits[] = {
		{"90", 0, 5400},
		{"0", 0, 0},
		{"90s", 0, 90},
		{"2h", 0, 7200},
		{"30:00", 0, 1800},
		{"01:30:00", 0, 5400},
		{"2-12", 0, 216000},
		{"2-12:30", 0, 217800},
		{"1-00:00:01", 0, 86401},
		{"1-24", -ERANGE, 0},
		{"1-", -EINVAL, 0},
		{"90x", -EINVAL, 0},
		{"", -EINVAL, 0},
		{"1:2:3:4", -EINVAL, 0},
		{"999999999999999999999", -ERANGE, 0},
	};
	for (size_t i = 0; i < ARRAY_SIZE(limits); i++) {
		int64_t v = 0;
		int rc = tk_parse_time_limit(limits[i].in, &v);
		if (rc != limits[i].rc)
			fail_msg("limit \"%s\": rc %d, want %d", limits[i].in, rc, limits[i].rc);
		if (rc == 0 && v != limits[i].s)
			fail_msg("limit \"%s\": %lld s, want %lld", limits[i].in, (long long)v,
				 (long long)limits[i].s);
	}
	char buf[32];
	tk_format_clock(217800, buf, sizeof(buf));
	assert_string_equal(buf, "2-12:30:00");
	tk_format_clock(5400, buf, sizeof(buf));
	assert_string_equal(buf, "01:30:00");
	tk_format_duration(93784, buf, sizeof(buf));
	assert_string_equal(buf, "1d02h");
	tk_format_duration(75, buf, sizeof(buf));
	assert_string_equal(buf, "1m15s");
}

static void test_base64(void **state)
{
	const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	const char *coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	for (size_t i = 0; i < ARRAY_SIZE(plain); i++) {
		char *e = tk_base64_encode(plain[i], strlen(plain[i]));
		assert_string_equal(e, coded[i]);
		void *d;
		size_t n;
		assert_int_equal(tk_base64_decode(e, &d, &n), 0);
		assert_int_equal(n, strlen(plain[i]));
		assert_memory_equal(d, plain[i], n);
		free(d);
		free(e);
	}
	unsigned char bytes[256];
	for (int i = 0; i < 256; i++)
		bytes[i] = (unsigned char)i;
	char *e = tk_base64_encode(bytes, sizeof(bytes));
	void *d;
	size_t n;
	assert_int_equal(tk_base64_decode(e, &d, &n), 0);
	assert_int_equal(n, 256);
	assert_memory_equal(d, bytes, 256);
	free(d);
	free(e);
	const char *bad[] = {"Z", "Zm9", "Zm=v", "Z===", "Zm9v!A==", "=Zm9"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (tk_base64_decode(bad[i], &d, &n) == 0)
			fail_msg("\"%s\" decoded", bad[i]);
}

static void test_begin_and_signal(void **state)
{
	/* a fixed "now": 2026-12-01 10:00:00 local time */
	struct tm tm = {.tm_year = 126, .tm_mon = 11, .tm_mday = 1, .tm_hour = 10, .tm_isdst = -1};
	int64_t now = (int64_t)mktime(&tm), at;
	assert_int_equal(tk_parse_begin("now", now, &at), 0);
	assert_int_equal(at, now);
	assert_int_equal(tk_parse_begin("now+90", now, &at), 0); /* Slurm's: seconds */
	assert_int_equal(at, now + 90);
	assert_int_equal(tk_parse_begin("now+2h", now, &at), 0);
	assert_int_equal(at, now + 7200);
	assert_int_equal(tk_parse_begin("16:30", now, &at), 0);
	assert_int_equal(at, now + 6 * 3600 + 1800);
	assert_int_equal(tk_parse_begin("09:00:00", now, &at), 0); /* passed: tomorrow */
	assert_int_equal(at, now + 23 * 3600);
	assert_int_equal(tk_parse_begin("2026-12-24T08:15", now, &at), 0);
	struct tm want = {.tm_year = 126,
			  .tm_mon = 11,
			  .tm_mday = 24,
			  .tm_hour = 8,
			  .tm_min = 15,
			  .tm_isdst = -1};
	assert_int_equal(at, (int64_t)mktime(&want));
	assert_int_equal(tk_parse_begin("tomorrow", now, &at), 0);
	assert_int_equal(at, now + 14 * 3600);
	const char *bad[] = {"",      "now-1h",	 "now+",	 "25:00", "2026-13-01",
			     "12:61", "noonish", "2026-12-01T8", "nowish"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (tk_parse_begin(bad[i], now, &at) == 0)
			fail_msg("begin \"%s\" accepted", bad[i]);
	int sig;
	assert_int_equal(tk_parse_signal("USR1", &sig), 0);
	assert_int_equal(sig, SIGUSR1);
	assert_int_equal(tk_parse_signal("sigterm", &sig), 0);
	assert_int_equal(sig, SIGTERM);
	assert_int_equal(tk_parse_signal("12", &sig), 0);
	assert_int_equal(sig, 12);
	assert_true(tk_parse_signal("USR3", &sig) < 0);
	assert_true(tk_parse_signal("0", &sig) < 0);
}

static void test_strbuf(void **state)
{
	struct strbuf sb;
	strbuf_init(&sb);
	assert_string_equal(sb.buf, "");
	for (int i = 0; i < 1000; i++)
		strbuf_addf(&sb, "%d,", i);
	assert_int_equal(sb.len, strlen(sb.buf));
	assert_memory_equal(sb.buf, "0,1,2,", 6);
	strbuf_reset(&sb);
	strbuf_addstr(&sb, "x");
	strbuf_addch(&sb, 'y');
	char *s = strbuf_detach(&sb);
	assert_string_equal(s, "xy");
	assert_string_equal(sb.buf, "");
	free(s);
	strbuf_release(&sb);
}

static void test_map(void **state)
{
	struct tk_map m;
	tk_map_init(&m);
	enum { N = 5000 };
	static char keys[N][16];
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		assert_null(tk_map_put(&m, keys[i], keys[i]));
	}
	assert_int_equal(m.len, N);
	for (int i = 0; i < N; i += 2)
		assert_ptr_equal(tk_map_del(&m, keys[i]), keys[i]);
	assert_int_equal(m.len, N / 2);
	for (int i = 0; i < N; i++)
		assert_ptr_equal(tk_map_get(&m, keys[i]), i % 2 ? keys[i] : NULL);
	/* reinsert after tombstones, then count by iteration */
	for (int i = 0; i < N; i += 2)
		tk_map_put(&m, keys[i], keys[i]);
	size_t pos = 0, count = 0;
	const char *k;
	void *v;
	while (tk_map_next(&m, &pos, &k, &v)) {
		assert_ptr_equal(k, v);
		count++;
	}
	assert_int_equal(count, N);
	tk_map_release(&m);
}

static void test_opts(void **state)
{
	static const struct tk_option opts[] = {
		{"nodes", 'N', "N", ""},
		{"json", 0, NULL, ""},
		{"name", 'J', "NAME", ""},
	};
	const char *v[3];
	char **pos;
	int npos;
	struct tk_error err;
	char *argv1[] = {"submit", "-N", "2", "--json", "--name=x", "python", "-N", "9", NULL};
	assert_int_equal(tk_opts_parse(opts, 3, 8, argv1, true, v, &pos, &npos, &err), 0);
	assert_string_equal(v[0], "2");
	assert_string_equal(v[1], "");
	assert_string_equal(v[2], "x");
	assert_int_equal(npos, 3); /* python -N 9: the command's own flags pass through */
	assert_string_equal(pos[0], "python");
	free(pos);
	char *argv2[] = {"cancel", "3", "--json", "4", NULL};
	assert_int_equal(tk_opts_parse(opts, 3, 4, argv2, false, v, &pos, &npos, &err), 0);
	assert_int_equal(npos, 2);
	assert_non_null(v[1]);
	free(pos);
	char *argv3[] = {"x", "--bogus", NULL};
	assert_int_equal(tk_opts_parse(opts, 3, 2, argv3, false, v, &pos, &npos, &err), -EINVAL);
	assert_string_equal(err.text, "unknown option --bogus");
	char *argv4[] = {"x", "-N", NULL};
	assert_int_equal(tk_opts_parse(opts, 3, 2, argv4, false, v, &pos, &npos, &err), -EINVAL);
	assert_non_null(strstr(err.text, "needs a value"));
	char *argv5[] = {"x", "--json=1", NULL};
	assert_int_equal(tk_opts_parse(opts, 3, 2, argv5, false, v, &pos, &npos, &err), -EINVAL);
	char *argv6[] = {"x", "-N4", "--", "-N", NULL};
	assert_int_equal(tk_opts_parse(opts, 3, 4, argv6, false, v, &pos, &npos, &err), 0);
	assert_string_equal(v[0], "4");
	assert_int_equal(npos, 1);
	assert_string_equal(pos[0], "-N");
	free(pos);
}

/* A folder of our own where others may create names first (a sticky,
 * world-writable /dev/shm): made when missing, refused when it is a link,
 * not a folder, or writable by others; on a tmpfs when asked. */
static void test_private_dir(void **state)
{
	char dir[] = "/tmp/tenk-test-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char *mine = xasprintf("%s/mine", dir);
	assert_int_equal(tk_private_dir(mine, 0711, false), 0);
	struct stat st;
	assert_int_equal(stat(mine, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0711);
	assert_int_equal(tk_private_dir(mine, 0711, false), 0); /* there already: fine */
	char *link = xasprintf("%s/link", dir);
	assert_int_equal(symlink(mine, link), 0);
	assert_int_equal(tk_private_dir(link, 0711, false), -ELOOP);
	char *file = xasprintf("%s/file", dir);
	assert_int_equal(tk_write_file(file, "x", 1, 0600), 0);
	assert_int_equal(tk_private_dir(file, 0711, false), -ENOTDIR);
	char *open_ = xasprintf("%s/open", dir);
	assert_int_equal(mkdir(open_, 0700), 0);
	assert_int_equal(chmod(open_, 01777), 0);
	assert_int_equal(tk_private_dir(open_, 0711, false), -EPERM);
	char *nowhere = xasprintf("%s/no/such", dir);
	assert_int_equal(tk_private_dir(nowhere, 0711, false), -ENOENT);
	/* on a tmpfs: /dev/shm is one wherever this runs, and a folder
	 * under /tmp is not one here (where /tmp is a tmpfs, skip that) */
	struct statfs fs;
	if (statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
		char shm[] = "/dev/shm/tenk-test-XXXXXX";
		assert_non_null(mkdtemp(shm));
		char *sub = xasprintf("%s/run", shm);
		assert_int_equal(tk_private_dir(sub, 0711, true), 0);
		rmdir(sub);
		rmdir(shm);
		free(sub);
	}
	if (statfs(dir, &fs) == 0 && fs.f_type != TMPFS_MAGIC) {
		assert_int_equal(tk_private_dir(mine, 0711, true), -EXDEV);
		/* and nothing is made on the disk */
		char *other = xasprintf("%s/other", dir);
		assert_int_equal(tk_private_dir(other, 0711, true), -EXDEV);
		assert_int_equal(access(other, F_OK), -1);
		free(other);
	}
	unlink(link);
	unlink(file);
	rmdir(open_);
	rmdir(mine);
	rmdir(dir);
	free(mine);
	free(link);
	free(file);
	free(open_);
	free(nowhere);
}

static void test_files(void **state)
{
	char dir[] = "/tmp/tenk-test-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char *sub = xasprintf("%s/a/b/c", dir);
	assert_int_equal(tk_mkdir_p(sub, 0700), 0);
	char *f = xasprintf("%s/file", sub);
	assert_int_equal(tk_write_file(f, "hello\n", 6, 0600), 0);
	char *text;
	size_t len;
	assert_int_equal(tk_read_file(f, 100, &text, &len), 0);
	assert_int_equal(len, 6);
	tk_strip(text);
	assert_string_equal(text, "hello");
	free(text);
	assert_int_equal(tk_read_file(f, 3, &text, &len), -EFBIG);
	char *missing = xasprintf("%s/none", dir);
	assert_int_equal(tk_read_file(missing, 3, &text, &len), -ENOENT);
	char hex[65];
	assert_int_equal(tk_random_hex(hex, 32), 0);
	assert_int_equal(strlen(hex), 64);
	/* a program as $PATH finds it: only an executable file counts */
	char *prog = xasprintf("%s/a/prog", dir);
	assert_int_equal(tk_write_file(prog, "#!/bin/sh\n", 10, 0700), 0);
	char *oldpath = getenv("PATH") ? xstrdup(getenv("PATH")) : NULL;
	char *path = xasprintf("%s:%s/a/b/c:%s/a", dir, dir, dir);
	setenv("PATH", path, 1);
	char *found = tk_which("prog", NULL);
	assert_string_equal(found, prog);
	free(found);
	assert_null(tk_which("file", NULL)); /* not executable */
	unsetenv("PATH");
	assert_null(tk_which("prog", NULL));
	found = tk_which("prog", path);
	assert_string_equal(found, prog);
	free(found);
	if (oldpath)
		setenv("PATH", oldpath, 1);
	free(oldpath);
	free(path);
	unlink(prog);
	free(prog);
	unlink(f);
	char *cmd = xasprintf("rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	free(cmd);
	free(missing);
	free(f);
	free(sub);
}

static void test_errorf(void **state)
{
	struct tk_error e;
	assert_int_equal(tk_errorf(&e, -EINVAL, "nodes: must be %d..%d, got \"%s\"", 1, 8, "12"),
			 -EINVAL);
	assert_string_equal(e.text, "nodes: must be 1..8, got \"12\"");
	assert_int_equal(tk_errorf(NULL, -5, "x"), -5);
	/* two deep paths and the advice after them are all kept */
	char path[241];
	memset(path, 'p', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	tk_errorf(&e, -ENOENT, "%s/tenk.db is missing but %s held a cluster; start with --init",
		  path, path);
	assert_non_null(strstr(e.text, "start with --init"));
	char small[4];
	assert_int_equal(tk_strlcpy(small, "abcd", sizeof(small)), -ENAMETOOLONG);
	assert_int_equal(tk_strlcpy(small, "abc", sizeof(small)), 0);
}

static void test_sha256(void **state)
{
	char out[65];
	tk_sha256_hex("", 0, out);
	assert_string_equal(out,
			    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	tk_sha256_hex("abc", 3, out);
	assert_string_equal(out,
			    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	tk_sha256_hex(two, strlen(two), out);
	assert_string_equal(out,
			    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	char *big = xmalloc(1000000);
	memset(big, 'a', 1000000);
	tk_sha256_hex(big, 1000000, out);
	assert_string_equal(out,
			    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(big);
}

/* RFC 4231's test cases 1, 2 and 6 (a key longer than a block) */
static void test_hmac_sha256(void **state)
{
	char out[65];
	unsigned char k1[20];
	memset(k1, 0x0b, sizeof(k1));
	tk_hmac_sha256_hex(k1, sizeof(k1), "Hi There", 8, out);
	assert_string_equal(out,
			    "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	const char *m2 = "what do ya want for nothing?";
	tk_hmac_sha256_hex("Jefe", 4, m2, strlen(m2), out);
	assert_string_equal(out,
			    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	unsigned char k6[131];
	memset(k6, 0xaa, sizeof(k6));
	const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
	tk_hmac_sha256_hex(k6, sizeof(k6), m6, strlen(m6), out);
	assert_string_equal(out,
			    "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

static void test_url_plain_remote(void **state)
{
	(void)state;
	assert_false(tk_url_plain_remote("https://10.0.0.1:7480"));
	assert_false(tk_url_plain_remote("http://127.0.0.1:7480"));
	assert_false(tk_url_plain_remote("http://127.9.1.1/v1"));
	assert_false(tk_url_plain_remote("HTTP://localhost:7480"));
	assert_false(tk_url_plain_remote("http://[::1]:7480"));
	assert_true(tk_url_plain_remote("http://10.0.0.1:7480"));
	assert_true(tk_url_plain_remote("http://128.0.0.1"));
	assert_true(tk_url_plain_remote("http://[::2]:7480"));
	assert_true(tk_url_plain_remote("http://localhost.example:7480"));
	assert_true(tk_url_plain_remote("http://node7:7480"));
	assert_true(tk_url_plain_remote("http://[::1"));
	assert_true(tk_url_plain_remote("http://"));
}

/* Standby servers' URLs: split on commas, spaces and trailing slashes
 * gone; an empty entry is refused. */
static void test_url_list(void **state)
{
	(void)state;
	char **u;
	int n;
	assert_int_equal(tk_url_list("https://a:7480/, https://b:7480", &u, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(u[0], "https://a:7480");
	assert_string_equal(u[1], "https://b:7480");
	for (int i = 0; i < n; i++)
		free(u[i]);
	free(u);
	assert_int_equal(tk_url_list("unix:/run/tenk/api.sock", &u, &n), 0);
	assert_int_equal(n, 1);
	free(u[0]);
	free(u);
	assert_int_equal(tk_url_list("https://a:7480,,https://b", &u, &n), -EINVAL);
	assert_int_equal(tk_url_list("", &u, &n), -EINVAL);
	assert_int_equal(tk_url_list("https://a,", &u, &n), -EINVAL);
}

/* Prometheus' text: labels escaped, left out whole when they would not
 * fit, histograms cumulative with +Inf, sums and counts. */
static void test_prom(void **state)
{
	struct strbuf b;
	strbuf_init(&b);
	struct prom_labels l;
	prom_labels_init(&l);
	prom_label(&l, "node", "a\"b\\c\nd");
	prom_labelf(&l, "gpu", "%d", 3);
	prom_sample(&b, "tenk_x", &l, 1.5);
	prom_sample(&b, "tenk_y", NULL, 42);
	assert_string_equal(b.buf, "tenk_x{node=\"a\\\"b\\\\c\\nd\",gpu=\"3\"} 1.5\ntenk_y 42\n");
	char big[1000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	prom_label(&l, "huge", big);
	assert_null(strstr(l.text, "huge"));
	strbuf_reset(&b);
	static const double bounds[] = {0.1, 1};
	struct tk_hist h = {0};
	tk_hist_observe(&h, bounds, 2, 0.05);
	tk_hist_observe(&h, bounds, 2, 0.5);
	tk_hist_observe(&h, bounds, 2, 7);
	prom_labels_init(&l);
	prom_label(&l, "route", "/v1/jobs");
	prom_hist(&b, "tenk_h", &l, &h, bounds, 2);
	assert_string_equal(b.buf, "tenk_h_bucket{route=\"/v1/jobs\",le=\"0.1\"} 1\n"
				   "tenk_h_bucket{route=\"/v1/jobs\",le=\"1\"} 2\n"
				   "tenk_h_bucket{route=\"/v1/jobs\",le=\"+Inf\"} 3\n"
				   "tenk_h_sum{route=\"/v1/jobs\"} 7.55\n"
				   "tenk_h_count{route=\"/v1/jobs\"} 3\n");
	strbuf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_int64),
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_parse_duration),
		cmocka_unit_test(test_strbuf),
		cmocka_unit_test(test_map),
		cmocka_unit_test(test_opts),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_errorf),
		cmocka_unit_test(test_sha256),
		cmocka_unit_test(test_hmac_sha256),
		cmocka_unit_test(test_url_plain_remote),
		cmocka_unit_test(test_url_list),
		cmocka_unit_test(test_prom),
		cmocka_unit_test(test_begin_and_signal),
		cmocka_unit_test(test_base64),
		cmocka_unit_test(test_private_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
