/*
 * A strict CSV reader for traces: plain comma-separated fields (the traces
 * have no quoting), a line limit so a runaway file cannot take the machine's
 * memory, and errors that say file, line and column.
 */
#include "sim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int read_line(struct sim_csv *c, struct tk_error *err)
{
	FILE *f = c->file;
	size_t n = 0;
	int ch;
	while ((ch = getc(f)) != EOF && ch != '\n') {
		if (n + 1 >= SIM_MAX_LINE) {
			return tk_errorf(err, -E2BIG, "%s:%d: line longer than %d bytes", c->path,
					 c->lineno + 1, SIM_MAX_LINE);
		}
		c->line[n++] = (char)ch;
	}
	if (ferror(f))
		return tk_errorf(err, -EIO, "%s:%d: read error", c->path, c->lineno + 1);
	if (ch == EOF && n == 0)
		return 0;
	if (n && c->line[n - 1] == '\r')
		n--;
	c->line[n] = '\0';
	c->lineno++;
	/* split */
	c->nfields = 0;
	char *p = c->line;
	for (;;) {
		if (c->nfields == SIM_MAX_FIELDS)
			return tk_errorf(err, -E2BIG, "%s:%d: more than %d fields", c->path,
					 c->lineno, SIM_MAX_FIELDS);
		c->fields[c->nfields++] = p;
		char *comma = strchr(p, ',');
		if (!comma)
			break;
		*comma = '\0';
		p = comma + 1;
	}
	return 1;
}

int sim_csv_open(struct sim_csv *c, const char *path, struct tk_error *err)
{
	memset(c, 0, sizeof(*c));
	c->path = path;
	c->file = fopen(path, "re");
	if (!c->file)
		return tk_errorf(err, -errno, "%s: %s", path, strerror(errno));
	c->line = xmalloc(SIM_MAX_LINE);
	int r = read_line(c, err);
	if (r == 0)
		r = tk_errorf(err, -EINVAL, "%s: empty file, expected a header", path);
	if (r < 0) {
		sim_csv_close(c);
		return r;
	}
	c->header_n = c->nfields;
	for (int i = 0; i < c->nfields; i++)
		c->header[i] = xstrdup(c->fields[i]);
	return 0;
}

int sim_csv_next(struct sim_csv *c, struct tk_error *err)
{
	for (;;) {
		int r = read_line(c, err);
		if (r <= 0)
			return r;
		if (c->nfields == 1 && c->fields[0][0] == '\0')
			continue; /* blank line */
		if (c->nfields != c->header_n)
			return tk_errorf(err, -EINVAL, "%s:%d: %d fields, the header has %d",
					 c->path, c->lineno, c->nfields, c->header_n);
		return 1;
	}
}

int sim_csv_column(const struct sim_csv *c, const char *name)
{
	for (int i = 0; i < c->header_n; i++)
		if (strcmp(c->header[i], name) == 0)
			return i;
	return -1;
}

int sim_csv_int(struct sim_csv *c, int col, int64_t min, int64_t max, int64_t *ret,
		struct tk_error *err)
{
	int r = tk_parse_int64(c->fields[col], min, max, ret);
	if (r == -ERANGE)
		return tk_errorf(err, r,
				 "%s:%d: column %d (%s): must be from %lld to %lld, got \"%.40s\"",
				 c->path, c->lineno, col + 1, c->header[col], (long long)min,
				 (long long)max, c->fields[col]);
	if (r < 0)
		return tk_errorf(err, r, "%s:%d: column %d (%s): not an integer: \"%.40s\"",
				 c->path, c->lineno, col + 1, c->header[col], c->fields[col]);
	return 0;
}

int sim_csv_num(struct sim_csv *c, int col, double min, double max, double *ret,
		struct tk_error *err)
{
	char *end;
	const char *s = c->fields[col];
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v))
		return tk_errorf(err, -EINVAL, "%s:%d: column %d (%s): not a number: \"%.40s\"",
				 c->path, c->lineno, col + 1, c->header[col], s);
	if (v < min || v > max)
		return tk_errorf(err, -ERANGE,
				 "%s:%d: column %d (%s): must be from %g to %g, got %g", c->path,
				 c->lineno, col + 1, c->header[col], min, max, v);
	*ret = v;
	return 0;
}

void sim_csv_close(struct sim_csv *c)
{
	if (c->file)
		fclose(c->file);
	free(c->line);
	for (int i = 0; i < c->header_n; i++)
		free(c->header[i]);
	memset(c, 0, sizeof(*c));
}
