/* The client's own HTTP: server URLs and chunked bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "client/internal.h"

static void test_urls(void **state)
{
	struct target t;
	struct tk_error err;
	assert_int_equal(client_parse_url("https://gpu-ctl.example:7480", &t, &err), 0);
	assert_true(t.tls);
	assert_string_equal(t.host, "gpu-ctl.example");
	assert_string_equal(t.port, "7480");
	assert_int_equal(client_parse_url("http://10.0.0.1", &t, &err), 0);
	assert_false(t.tls);
	assert_string_equal(t.port, "80");
	assert_int_equal(client_parse_url("https://[::1]:8443/", &t, &err), 0);
	assert_string_equal(t.host, "::1");
	assert_string_equal(t.port, "8443");
	assert_int_equal(client_parse_url("HTTPS://h", &t, &err), 0);
	assert_string_equal(t.port, "443");
	assert_int_equal(client_parse_url("unix:/var/lib/tenk/api.sock", &t, &err), 0);
	assert_true(t.unix_socket);
	assert_string_equal(t.path, "/var/lib/tenk/api.sock");
	assert_int_equal(client_parse_url("unix:///run/x.sock", &t, &err), 0);
	assert_string_equal(t.path, "/run/x.sock");
	const char *bad[] = {"ftp://h",	     "h:7480",	      "https://",
			     "https://:80",  "https://h:",    "https://h:x",
			     "https://[::1", "unix:rel.sock", "https://h:123456"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (client_parse_url(bad[i], &t, &err) == 0)
			fail_msg("\"%s\" accepted", bad[i]);
	assert_true(client_parse_url("ftp://h", &t, &err) < 0);
	assert_non_null(strstr(err.text, "expected https://HOST:PORT"));
}

static void test_chunked(void **state)
{
	char body[] = "4\r\nWiki\r\n6\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\n\r\n";
	ssize_t n = client_unchunk(body, strlen(body));
	assert_int_equal(n, 24);
	assert_memory_equal(body, "Wikipedia in \r\n\r\nchunks.", 24);
	char part[] = "4\r\nWiki\r\n6\r\nped";
	assert_int_equal(client_unchunk(part, strlen(part)), -EAGAIN);
	char nolast[] = "4\r\nWiki\r\n";
	assert_int_equal(client_unchunk(nolast, strlen(nolast)), -EAGAIN);
	char bad[] = "zz\r\nWiki\r\n0\r\n\r\n";
	assert_int_equal(client_unchunk(bad, strlen(bad)), -EBADMSG);
	char empty[] = "0\r\n\r\n";
	assert_int_equal(client_unchunk(empty, strlen(empty)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_urls),
		cmocka_unit_test(test_chunked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
