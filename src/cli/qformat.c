/*
 * tenk queue -o '%i %j %u %T %M %l %D %R': squeue's format letters, so a
 * Slurm user's scripts and habits read tenk's queue. A field is
 * %[.|-][WIDTH]LETTER: WIDTH pads and cuts to that many characters, a dot
 * aligns right; without WIDTH a field is as wide as its value.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct qfield {
	char letter;
	const char *header;
	const char *meaning; /* for the error that lists them */
};

static const struct qfield fields[] = {
	{'i', "JOBID", "job id (ARRAY_INDEX for an array's element)"},
	{'A', "JOBID", "job id, as a number"},
	{'j', "NAME", "name"},
	{'u', "USER", "owner"},
	{'T', "STATE", "state"},
	{'t', "ST", "state, short (PD R CG CD F CA TO)"},
	{'M', "TIME", "time used"},
	{'l', "TIME_LIMIT", "time limit"},
	{'L', "TIME_LEFT", "time left"},
	{'D', "NODES", "nodes"},
	{'C', "CPUS", "CPUs"},
	{'b', "TRES_PER_NODE", "accelerators per node"},
	{'P', "PARTITION", "queue"},
	{'q', "QOS", "class"},
	{'R', "NODELIST(REASON)", "nodes, or why it waits"},
	{'r', "REASON", "why it waits"},
	{'N', "NODELIST", "nodes"},
	{'S', "START_TIME", "start (expected, for a waiting job)"},
	{'V', "SUBMIT_TIME", "submitted"},
	{'e', "END_TIME", "end"},
	{'Z', "WORK_DIR", "folder"},
	{'o', "COMMAND", "command"},
	{'k', "COMMENT", "comment"},
};

static const struct qfield *field_of(char c)
{
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		if (fields[i].letter == c)
			return &fields[i];
	return NULL;
}

/* One field at p (just after its '%'): right, width, letter; returns the
 * characters read, or 0 when it is not one. */
static size_t parse_field(const char *p, bool *right, int *width, char *letter)
{
	const char *q = p;
	*right = *q == '.';
	if (*right || *q == '-') /* '-': left, as without it (printf's habit) */
		q++;
	*width = 0;
	while (*q >= '0' && *q <= '9' && *width < 1000)
		*width = *width * 10 + (*q++ - '0');
	if (!*q)
		return 0;
	*letter = *q++;
	return (size_t)(q - p);
}

bool cli__qformat_is(const char *fmt)
{
	return strchr(fmt, '%') != NULL;
}

int cli__qformat_check(const char *fmt, char *why, size_t n)
{
	for (const char *p = fmt; *p; p++) {
		if (*p != '%')
			continue;
		if (p[1] == '%') {
			p++;
			continue;
		}
		bool right;
		int width;
		char letter;
		size_t k = parse_field(p + 1, &right, &width, &letter);
		if (!k || !field_of(letter)) {
			struct strbuf sb;
			strbuf_init(&sb);
			for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
				strbuf_addf(&sb, "%s%%%c %s", i ? ", " : "", fields[i].letter,
					    fields[i].meaning);
			snprintf(why, n, "\"%.*s\" is not a field tenk knows; the fields: %s",
				 k ? (int)k + 1 : 2, p, sb.buf);
			strbuf_release(&sb);
			return -1;
		}
		if (right && !width) {
			snprintf(why, n, "\"%.*s\": a dot (align right) needs a width, as %%.8%c",
				 (int)k + 1, p, letter);
			return -1;
		}
		p += k;
	}
	return 0;
}

/* Slurm's way of writing a duration: M:SS, H:MM:SS, D-HH:MM:SS. */
static void add_duration(struct strbuf *sb, int64_t s)
{
	if (s < 0)
		s = 0;
	long long d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60;
	if (d)
		strbuf_addf(sb, "%lld-%02lld:%02lld:%02lld", d, h, m, sec);
	else if (h)
		strbuf_addf(sb, "%lld:%02lld:%02lld", h, m, sec);
	else
		strbuf_addf(sb, "%lld:%02lld", m, sec);
}

/* ... and a time: 2026-12-03T22:40:01, local; N/A where there is none */
static void add_time(struct strbuf *sb, int64_t ms)
{
	if (ms <= 0) {
		strbuf_addstr(sb, "N/A");
		return;
	}
	char buf[32];
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	strbuf_addstr(sb, buf);
}

static const char *short_state(const char *st)
{
	static const char *const pairs[][2] = {
		{"PENDING", "PD"}, {"STARTING", "CF"},	{"RUNNING", "R"},  {"COMPLETED", "CD"},
		{"FAILED", "F"},   {"CANCELLED", "CA"}, {"TIMEOUT", "TO"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(pairs); i++)
		if (strcmp(st, pairs[i][0]) == 0)
			return pairs[i][1];
	return st;
}

static void node_list(json_t *a, struct strbuf *sb)
{
	size_t i;
	json_t *node;
	json_array_foreach (json_object_get(a, "nodes"), i, node)
		strbuf_addf(sb, "%s%s", i ? "," : "", cli__jstr(node, "name"));
}

static void value(char letter, const struct qrow *row, int64_t now, struct strbuf *sb)
{
	json_t *j = row->job, *req = json_object_get(j, "request");
	json_t *atts = json_object_get(j, "attempts");
	json_t *a = json_array_get(atts, json_array_size(atts) - 1);
	const char *st = cli__jstr(j, "state");
	bool pending = strcmp(st, "PENDING") == 0;
	int64_t start = a && !pending ? cli__jint(a, "start_ms") : 0;
	int64_t end = cli__jint(j, "end_ms"), limit = cli__jint(req, "time_limit_s");
	int64_t used = start ? ((end ? end : now) - start) / 1000 : 0; /* seconds */
	size_t i;
	json_t *v;
	switch (letter) {
	case 'i':
		strbuf_addstr(sb, row->id);
		break;
	case 'A':
		strbuf_addf(sb, "%lld", (long long)cli__jint(j, "id"));
		break;
	case 'j':
		strbuf_addstr(sb, cli__jstr(j, "name"));
		break;
	case 'u':
		strbuf_addstr(sb, cli__jstr(j, "owner"));
		break;
	case 'T':
		strbuf_addstr(sb, st);
		break;
	case 't':
		strbuf_addstr(sb, short_state(st));
		break;
	case 'M':
		add_duration(sb, used);
		break;
	case 'l': /* the limit, and what is left of it */
	case 'L':
		if (limit <= 0)
			strbuf_addstr(sb, "UNLIMITED");
		else
			add_duration(sb, letter == 'L' ? limit - used : limit);
		break;
	case 'D':
		strbuf_addf(sb, "%lld", (long long)cli__jint(req, "nodes"));
		break;
	case 'C':
		/* a task that asked for none has one, as in Slurm */
		strbuf_addf(sb, "%lld",
			    (long long)(cli__jint(req, "nodes") * cli__jint(req, "tasks_per_node") *
					MAX(1, cli__jint(req, "cpus_per_task"))));
		break;
	case 'b': {
		double g = json_number_value(json_object_get(req, "gpus_per_task")) *
			   (double)cli__jint(req, "tasks_per_node");
		if (g > 0)
			strbuf_addf(sb, "gres/gpu:%g", g);
		else
			strbuf_addstr(sb, "N/A");
		break;
	}
	case 'P':
		strbuf_addstr(sb, cli__jstr(j, "queue"));
		break;
	case 'q':
		strbuf_addstr(sb, cli__jstr(j, "class"));
		break;
	case 'R':
		if (pending || !a)
			strbuf_addf(sb, "(%s)", cli__jstr(j, "reason"));
		else
			node_list(a, sb);
		break;
	case 'r':
		strbuf_addstr(sb, *cli__jstr(j, "reason") ? cli__jstr(j, "reason") : "None");
		break;
	case 'N':
		if (a && !pending)
			node_list(a, sb);
		break;
	case 'S':
		add_time(sb, pending ? cli__jint(j, "expected_start_ms") : start);
		break;
	case 'V':
		add_time(sb, cli__jint(j, "submit_ms"));
		break;
	case 'e':
		add_time(sb, end);
		break;
	case 'Z':
		strbuf_addstr(sb,
			      json_object_get(j, "private") ? "(private)" : cli__jstr(req, "cwd"));
		break;
	case 'o':
		if (json_object_get(j, "private"))
			strbuf_addstr(sb, "(private)");
		else
			json_array_foreach (json_object_get(req, "command"), i, v)
				strbuf_addf(sb, "%s%s", i ? " " : "", json_string_value(v));
		break;
	case 'k':
		strbuf_addstr(sb, cli__jstr(req, "comment"));
		break;
	}
}

/* Writes fmt into out with each field's value (its header where row is
 * NULL). */
static void render(const char *fmt, const struct qrow *row, int64_t now, struct strbuf *out)
{
	for (const char *p = fmt; *p; p++) {
		if (*p != '%') {
			strbuf_addch(out, *p);
			continue;
		}
		if (p[1] == '%') {
			strbuf_addch(out, '%');
			p++;
			continue;
		}
		bool right;
		int width;
		char letter;
		size_t k = parse_field(p + 1, &right, &width, &letter);
		p += k;
		struct strbuf v;
		strbuf_init(&v);
		if (row)
			value(letter, row, now, &v);
		else
			strbuf_addstr(&v, field_of(letter)->header);
		if (!width)
			strbuf_addstr(out, v.buf);
		else if (right)
			strbuf_addf(out, "%*.*s", width, width, v.buf);
		else
			strbuf_addf(out, "%-*.*s", width, width, v.buf);
		strbuf_release(&v);
	}
}

void cli__qformat_print(const char *fmt, const struct qrow *row, int64_t now)
{
	struct strbuf sb;
	strbuf_init(&sb);
	render(fmt, row, now, &sb);
	printf("%s\n", sb.buf);
	strbuf_release(&sb);
}
