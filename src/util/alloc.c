/*
 * Allocation that never returns NULL, and the error-text helper. Running out
 * of memory in a daemon leaves no sane way on, so we abort loudly at the
 * single place it can happen (the approach of git's wrapper.c).
 */
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void oom(size_t n)
{
	fprintf(stderr, "tenk: out of memory allocating %zu bytes\n", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *xcalloc(size_t count, size_t size)
{
	void *p = calloc(count ? count : 1, size ? size : 1);
	if (!p)
		oom(count * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		oom(n);
	return q;
}

void xgrow(void *p, size_t *alloc, size_t need, size_t size)
{
	void **pp = p;
	if (need <= *alloc)
		return;
	size_t n = *alloc ? *alloc : 8;
	while (n < need)
		n *= 2;
	if (n > SIZE_MAX / size)
		oom(SIZE_MAX);
	*pp = xrealloc(*pp, n * size);
	*alloc = n;
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = xmalloc(len + 1);
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *p = NULL;
	int r = vasprintf(&p, fmt, ap);
	va_end(ap);
	if (r < 0)
		oom(strlen(fmt));
	return p;
}

int tk_strlcpy(char *dst, const char *src, size_t n)
{
	size_t len = strlen(src);
	if (len >= n)
		return -ENAMETOOLONG;
	memcpy(dst, src, len + 1);
	return 0;
}

int tk_errorf(struct tk_error *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->text, sizeof(err->text), fmt, ap);
		va_end(ap);
	}
	return code;
}
