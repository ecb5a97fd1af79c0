/*
 * Parsers for the numbers people type: counts, sizes ("80G") and durations
 * ("1h30m", "2-00:00:00"). Each accepts the whole string or fails with
 * -EINVAL (malformed) or -ERANGE (out of bounds); nothing is guessed.
 */
#include "util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <time.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

int tk_parse_int64(const char *s, int64_t min, int64_t max, int64_t *ret)
{
	if (!s || !*s)
		return -EINVAL;
	const char *p = s;
	if (*p == '-' || *p == '+')
		p++;
	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; *p; p++)
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
	errno = 0;
	char *end;
	long long v = strtoll(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (v < min || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

/* Reads digits with an optional fraction into a value scaled by 1000, so
 * "1.5" becomes 1500; at most 3 fraction digits. */
static int parse_milli(const char **sp, int64_t *ret)
{
	const char *s = *sp;
	int64_t whole = 0, frac = 0;
	int nd = 0, nf = 0;
	while (isdigit((unsigned char)*s)) {
		if (whole > INT64_MAX / 10000)
			return -ERANGE;
		whole = whole * 10 + (*s++ - '0');
		nd++;
	}
	if (*s == '.') {
		s++;
		while (isdigit((unsigned char)*s)) {
			if (nf == 3)
				return -EINVAL;
			frac = frac * 10 + (*s++ - '0');
			nf++;
		}
		if (!nf)
			return -EINVAL;
	}
	if (!nd && !nf)
		return -EINVAL;
	while (nf < 3) {
		frac *= 10;
		nf++;
	}
	*ret = whole * 1000 + frac;
	*sp = s;
	return 0;
}

int tk_parse_size_mib(const char *s, int64_t *ret_mib)
{
	if (!s)
		return -EINVAL;
	const char *p = s;
	int64_t milli;
	int r = parse_milli(&p, &milli);
	if (r < 0)
		return r;
	/* scale to KiB*1000 then to MiB */
	int64_t mul_kib;
	switch (toupper((unsigned char)*p)) {
	case 'K':
		mul_kib = 1;
		p++;
		break;
	case 'M':
		mul_kib = 1024;
		p++;
		break;
	case 'G':
		mul_kib = 1024 * 1024;
		p++;
		break;
	case 'T':
		mul_kib = 1024LL * 1024 * 1024;
		p++;
		break;
	case '\0':
		mul_kib = 1024;
		break;
	default:
		return -EINVAL;
	}
	if (*p == 'i')
		p++;
	if (*p == 'B' || *p == 'b')
		p++;
	if (*p)
		return -EINVAL;
	if (milli > INT64_MAX / mul_kib)
		return -ERANGE;
	int64_t kib_milli = milli * mul_kib;
	int64_t per_mib = 1024 * 1000;
	*ret_mib = (kib_milli + per_mib - 1) / per_mib;
	return 0;
}

static int add_checked(int64_t *acc, int64_t v, int64_t mul)
{
	if (v > (INT64_MAX / 4) / mul)
		return -ERANGE;
	*acc += v * mul;
	if (*acc > INT64_MAX / 4)
		return -ERANGE;
	return 0;
}

/* "D-HH:MM:SS", "D-HH:MM", "D-HH", "HH:MM:SS", "MM:SS" (Slurm's forms). */
static int parse_clock(const char *s, int64_t *ret)
{
	int64_t days = 0, parts[3];
	int n = 0;
	const char *p = s;
	const char *dash = strchr(s, '-');
	if (dash) {
		days = 0;
		if (dash == s)
			return -EINVAL;
		for (; p < dash; p++) {
			if (!isdigit((unsigned char)*p) || days > 100000)
				return -EINVAL;
			days = days * 10 + (*p - '0');
		}
		p++;
	}
	while (n < 3) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		int64_t v = 0;
		while (isdigit((unsigned char)*p)) {
			if (v > 1000000000)
				return -ERANGE;
			v = v * 10 + (*p++ - '0');
		}
		parts[n++] = v;
		if (*p == '\0')
			break;
		if (*p != ':')
			return -EINVAL;
		p++;
	}
	if (*p)
		return -EINVAL;
	int64_t h = 0, m = 0, sec = 0;
	if (n == 3) {
		h = parts[0];
		m = parts[1];
		sec = parts[2];
	} else if (n == 2) {
		if (dash) {
			h = parts[0];
			m = parts[1];
		} else {
			m = parts[0];
			sec = parts[1];
		}
	} else if (n == 1 && dash) {
		h = parts[0];
	} else {
		return -EINVAL;
	}
	if (dash && h >= 24)
		return -ERANGE;
	if ((n == 3 || dash) && m >= 60)
		return -ERANGE;
	if (sec >= 60)
		return -ERANGE;
	int64_t acc = 0;
	int r;
	if ((r = add_checked(&acc, days, 86400)) < 0 || (r = add_checked(&acc, h, 3600)) < 0 ||
	    (r = add_checked(&acc, m, 60)) < 0 || (r = add_checked(&acc, sec, 1)) < 0)
		return r;
	*ret = acc;
	return 0;
}

int tk_parse_duration(const char *s, int64_t *ret_seconds)
{
	if (!s || !*s)
		return -EINVAL;
	if (strchr(s, ':') || strchr(s, '-'))
		return parse_clock(s, ret_seconds);
	int64_t acc = 0;
	const char *p = s;
	int units_seen = 0;
	char last_unit = 0;
	while (*p) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		int64_t v = 0;
		while (isdigit((unsigned char)*p)) {
			if (v > 1000000000000LL)
				return -ERANGE;
			v = v * 10 + (*p++ - '0');
		}
		int64_t mul;
		char u = (char)tolower((unsigned char)*p);
		switch (u) {
		case 'd':
			mul = 86400;
			break;
		case 'h':
			mul = 3600;
			break;
		case 'm':
			mul = 60;
			break;
		case 's':
			mul = 1;
			break;
		case '\0':
			if (units_seen)
				return -EINVAL; /* "1h30": ambiguous */
			mul = 1;
			break;
		default:
			return -EINVAL;
		}
		if (u) {
			/* units must descend: 1h30m, not 30m1h or 1h1h */
			static const char order[] = "dhms";
			if (last_unit && strchr(order, u) <= strchr(order, last_unit))
				return -EINVAL;
			last_unit = u;
			p++;
			units_seen++;
		}
		int r = add_checked(&acc, v, mul);
		if (r < 0)
			return r;
	}
	*ret_seconds = acc;
	return 0;
}

int tk_parse_time_limit(const char *s, int64_t *ret_seconds)
{
	/* Slurm's words for no limit */
	if (s && (strcasecmp(s, "UNLIMITED") == 0 || strcasecmp(s, "INFINITE") == 0)) {
		*ret_seconds = 0;
		return 0;
	}
	if (s && *s && strspn(s, "0123456789") == strlen(s)) {
		int64_t min;
		int r = tk_parse_int64(s, 0, INT64_MAX / 60, &min);
		if (r < 0)
			return -ERANGE;
		*ret_seconds = min * 60; /* Slurm's: a bare number is minutes */
		return 0;
	}
	return tk_parse_duration(s, ret_seconds);
}

int tk_parse_begin(const char *s, int64_t now, int64_t *ret)
{
	if (!s || !*s)
		return -EINVAL;
	if (strncasecmp(s, "now", 3) == 0) {
		int64_t d = 0;
		if (s[3] == '+') {
			/* Slurm's bare number is seconds here */
			if (strspn(s + 4, "0123456789") == strlen(s + 4)) {
				if (tk_parse_int64(s + 4, 0, 1LL << 40, &d) < 0)
					return -EINVAL;
			} else if (tk_parse_duration(s + 4, &d) < 0) {
				return -EINVAL;
			}
		} else if (s[3]) {
			return -EINVAL;
		}
		*ret = now + d;
		return 0;
	}
	time_t t = (time_t)now;
	struct tm tm;
	localtime_r(&t, &tm);
	int Y = -1, M = 0, D = 0, h = 0, m = 0, sec = 0, n = 0;
	bool clock = false;
	if (strcasecmp(s, "today") == 0 || strcasecmp(s, "midnight") == 0 ||
	    strcasecmp(s, "tomorrow") == 0) {
		tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
		if (strcasecmp(s, "today") != 0)
			tm.tm_mday++;
	} else if (sscanf(s, "%4d-%2d-%2d%n", &Y, &M, &D, &n) == 3 &&
		   (s[n] == '\0' || s[n] == 'T')) {
		if (s[n] == 'T') {
			int n2 = 0;
			const char *c = s + n + 1;
			if (!(sscanf(c, "%2d:%2d:%2d%n", &h, &m, &sec, &n2) == 3 && !c[n2]) &&
			    !(sec = 0, sscanf(c, "%2d:%2d%n", &h, &m, &n2) == 2 && !c[n2]))
				return -EINVAL;
		}
		tm.tm_year = Y - 1900;
		tm.tm_mon = M - 1;
		tm.tm_mday = D;
		tm.tm_hour = h;
		tm.tm_min = m;
		tm.tm_sec = sec;
		if (M < 1 || M > 12 || D < 1 || D > 31)
			return -EINVAL;
	} else if ((sscanf(s, "%2d:%2d:%2d%n", &h, &m, &sec, &n) == 3 && !s[n]) ||
		   (sec = 0, sscanf(s, "%2d:%2d%n", &h, &m, &n) == 2 && !s[n])) {
		clock = true;
		tm.tm_hour = h;
		tm.tm_min = m;
		tm.tm_sec = sec;
	} else {
		return -EINVAL;
	}
	if (h < 0 || h > 23 || m < 0 || m > 59 || sec < 0 || sec > 60)
		return -EINVAL;
	tm.tm_isdst = -1;
	time_t at = mktime(&tm);
	if (at == (time_t)-1)
		return -EINVAL;
	if (clock && at <= t) {
		tm.tm_mday++;
		tm.tm_isdst = -1;
		at = mktime(&tm);
	}
	*ret = (int64_t)at;
	return 0;
}

int tk_parse_signal(const char *s, int *ret)
{
	static const struct {
		const char *name;
		int no;
	} names[] = {{"HUP", SIGHUP},	{"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ABRT", SIGABRT},
		     {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"ALRM", SIGALRM},
		     {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},
		     {"URG", SIGURG},	{"XCPU", SIGXCPU}, {"PWR", SIGPWR},   {"WINCH", SIGWINCH}};
	int64_t n;
	if (s && tk_parse_int64(s, 1, 64, &n) == 0) {
		*ret = (int)n;
		return 0;
	}
	if (!s)
		return -EINVAL;
	const char *name = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (strcasecmp(name, names[i].name) == 0) {
			*ret = names[i].no;
			return 0;
		}
	return -EINVAL;
}

void tk_format_clock(int64_t seconds, char *buf, size_t n)
{
	if (seconds < 0)
		seconds = 0;
	int64_t d = seconds / 86400, h = seconds / 3600 % 24, m = seconds / 60 % 60,
		s = seconds % 60;
	if (d)
		snprintf(buf, n, "%lld-%02lld:%02lld:%02lld", (long long)d, (long long)h,
			 (long long)m, (long long)s);
	else
		snprintf(buf, n, "%02lld:%02lld:%02lld", (long long)h, (long long)m, (long long)s);
}

void tk_format_duration(int64_t seconds, char *buf, size_t n)
{
	if (seconds < 0)
		seconds = 0;
	int64_t d = seconds / 86400, h = seconds / 3600 % 24, m = seconds / 60 % 60,
		s = seconds % 60;
	if (d)
		snprintf(buf, n, "%lldd%02lldh", (long long)d, (long long)h);
	else if (h)
		snprintf(buf, n, "%lldh%02lldm", (long long)h, (long long)m);
	else if (m)
		snprintf(buf, n, "%lldm%02llds", (long long)m, (long long)s);
	else
		snprintf(buf, n, "%llds", (long long)s);
}

bool tk_url_plain_remote(const char *url)
{
	if (strncasecmp(url, "http://", 7) != 0)
		return false;
	const char *h = url + 7, *end;
	char host[256];
	if (*h == '[') {
		end = strchr(++h, ']');
		if (!end)
			return true;
	} else {
		end = h + strcspn(h, ":/?#");
	}
	size_t n = (size_t)(end - h);
	if (n >= sizeof(host))
		return true;
	memcpy(host, h, n);
	host[n] = '\0';
	if (strcasecmp(host, "localhost") == 0)
		return false;
	unsigned char a[16];
	if (inet_pton(AF_INET, host, a) == 1)
		return a[0] != 127;
	static const unsigned char lo6[16] = {[15] = 1};
	if (inet_pton(AF_INET6, host, a) == 1)
		return memcmp(a, lo6, 16) != 0;
	return true;
}

int tk_url_list(const char *text, char ***ret, int *ret_n)
{
	char **urls = xcalloc(TK_URLS_MAX, sizeof(*urls));
	int n = 0;
	const char *p = text;
	for (;;) {
		const char *end = p + strcspn(p, ",");
		const char *a = p, *b = end;
		while (a < b && *a == ' ')
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '/'))
			b--;
		if (a == b || n == TK_URLS_MAX) {
			for (int i = 0; i < n; i++)
				free(urls[i]);
			free(urls);
			return -EINVAL;
		}
		urls[n++] = xstrndup(a, (size_t)(b - a));
		if (!*end)
			break;
		p = end + 1;
	}
	*ret = urls;
	*ret_n = n;
	return 0;
}
