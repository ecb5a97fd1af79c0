/*
 * Table-driven option parsing, so every command's flags, its errors and its
 * help text come from one static table (after git's parse-options and
 * curl's option table).
 */
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int find_long(const struct tk_option *opts, size_t n, const char *name, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
			return (int)i;
	return -1;
}

static int find_short(const struct tk_option *opts, size_t n, char c)
{
	for (size_t i = 0; i < n; i++)
		if (opts[i].short_name && opts[i].short_name == c)
			return (int)i;
	return -1;
}

int tk_opts_parse(const struct tk_option *opts, size_t n, int argc, char **argv,
		  bool stop_at_positional, const char **values, char ***ret_pos, int *ret_npos,
		  struct tk_error *err)
{
	char **pos = xcalloc((size_t)argc + 1, sizeof(char *));
	int npos = 0;
	for (size_t i = 0; i < n; i++)
		values[i] = NULL;
	bool options_done = false;
	for (int i = 1; i < argc; i++) {
		char *a = argv[i];
		if (options_done || a[0] != '-' || a[1] == '\0') {
			pos[npos++] = a;
			if (stop_at_positional)
				options_done = true;
			continue;
		}
		if (strcmp(a, "--") == 0) {
			options_done = true;
			continue;
		}
		int k;
		const char *val = NULL;
		char shown[80];
		if (a[1] == '-') {
			const char *name = a + 2;
			const char *eq = strchr(name, '=');
			size_t len = eq ? (size_t)(eq - name) : strlen(name);
			k = find_long(opts, n, name, len);
			snprintf(shown, sizeof(shown), "--%.*s", (int)MIN(len, 64), name);
			if (k < 0) {
				free(pos);
				return tk_errorf(err, -EINVAL, "unknown option %s", shown);
			}
			if (eq) {
				if (!opts[k].arg) {
					free(pos);
					return tk_errorf(err, -EINVAL, "option %s takes no value",
							 shown);
				}
				val = eq + 1;
			}
		} else {
			k = find_short(opts, n, a[1]);
			snprintf(shown, sizeof(shown), "-%c", a[1]);
			if (k < 0) {
				free(pos);
				return tk_errorf(err, -EINVAL, "unknown option %s", shown);
			}
			if (a[2]) {
				if (!opts[k].arg) {
					free(pos);
					return tk_errorf(err, -EINVAL, "option %s takes no value",
							 shown);
				}
				val = a + 2;
			}
		}
		if (opts[k].arg && !val) {
			if (i + 1 >= argc) {
				free(pos);
				return tk_errorf(err, -EINVAL, "option %s needs a value (%s)",
						 shown, opts[k].arg);
			}
			val = argv[++i];
		}
		values[k] = opts[k].arg ? val : "";
	}
	*ret_pos = pos;
	*ret_npos = npos;
	return 0;
}

void tk_opts_help(const struct tk_option *opts, size_t n, struct strbuf *sb)
{
	for (size_t i = 0; i < n; i++) {
		char left[64];
		if (opts[i].short_name)
			snprintf(left, sizeof(left), "-%c, --%s%s%s", opts[i].short_name,
				 opts[i].name, opts[i].arg ? " " : "",
				 opts[i].arg ? opts[i].arg : "");
		else
			snprintf(left, sizeof(left), "    --%s%s%s", opts[i].name,
				 opts[i].arg ? " " : "", opts[i].arg ? opts[i].arg : "");
		strbuf_addf(sb, "  %-28s %s\n", left, opts[i].help);
	}
}

void tk_opts_usage(const struct tk_option *opts, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	struct strbuf sb;
	strbuf_init(&sb);
	tk_opts_help(opts, n, &sb);
	printf("\n\noptions:\n%s", sb.buf);
	strbuf_release(&sb);
}
