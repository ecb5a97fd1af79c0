/*
 * Logging to stderr with a level, a wall-clock stamp and the daemon's name.
 * One line per call, written with one write(2) so lines from the server and
 * agent of `tenk up` never interleave mid-line.
 */
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum tk_log_level max_level = TK_LOG_INFO;
static const char *log_prefix = "tenk";

static const char *const level_names[TK_LOG_MAX] = {
	[TK_LOG_ERR] = "error",
	[TK_LOG_WARN] = "warn",
	[TK_LOG_INFO] = "info",
	[TK_LOG_DEBUG] = "debug",
};

void tk_log_set_level(enum tk_log_level level)
{
	max_level = level;
}

void tk_log_set_prefix(const char *prefix)
{
	log_prefix = prefix;
}

void tk_log(enum tk_log_level level, const char *fmt, ...)
{
	if (level > max_level)
		return;
	char line[1024];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line),
			 "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: ", tm.tm_year + 1900,
			 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			 ts.tv_nsec / 1000000, log_prefix, level_names[level]);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(line))
		n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}
