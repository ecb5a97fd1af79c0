/*
 * strbuf: a growing byte buffer that is always NUL-terminated, after git's
 * strbuf.h. Used to build JSON-free text: tables, environment blocks, paths.
 */
#include "util.h"

#include <stdio.h>
#include <string.h>

static char empty[1];

void strbuf_init(struct strbuf *sb)
{
	sb->buf = empty;
	sb->len = 0;
	sb->alloc = 0;
}

void strbuf_release(struct strbuf *sb)
{
	if (sb->alloc)
		free(sb->buf);
	strbuf_init(sb);
}

void strbuf_reset(struct strbuf *sb)
{
	sb->len = 0;
	if (sb->alloc)
		sb->buf[0] = '\0';
}

static void grow(struct strbuf *sb, size_t extra)
{
	size_t need = sb->len + extra + 1;
	if (need <= sb->alloc)
		return;
	if (!sb->alloc)
		sb->buf = NULL;
	xgrow(&sb->buf, &sb->alloc, need, 1);
}

void strbuf_add(struct strbuf *sb, const void *data, size_t n)
{
	grow(sb, n);
	memcpy(sb->buf + sb->len, data, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
}

void strbuf_addstr(struct strbuf *sb, const char *s)
{
	strbuf_add(sb, s, strlen(s));
}

void strbuf_addch(struct strbuf *sb, char c)
{
	strbuf_add(sb, &c, 1);
}

void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap)
{
	va_list cp;
	va_copy(cp, ap);
	int n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n <= 0)
		return;
	grow(sb, (size_t)n);
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	sb->len += (size_t)n;
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(sb, fmt, ap);
	va_end(ap);
}

char *strbuf_detach(struct strbuf *sb)
{
	char *p = sb->alloc ? sb->buf : xstrdup("");
	strbuf_init(sb);
	return p;
}
