/*
 * Node labels and job constraints (DESIGN.md §2's node labels): a node
 * carries labels KEY=VALUE (`tenk agent --labels tier=top,fabric=ib`),
 * kept as one canonical string, sorted by key ("fabric=ib,tier=top"); a
 * job may ask for nodes whose labels satisfy a constraint in Slurm's
 * feature syntax: terms joined by `&` (and) and `|` (or, binding less),
 * each `KEY=VALUE`, `KEY!=VALUE` or a bare `KEY` (the node has that label,
 * whatever its value). "fabric=ib&rack!=r07", "gpu=h100|gpu=h200".
 */
#include "model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-' || c == '/';
}

/* A key or value of [A-Za-z0-9._/-], 1 to MODEL_LABEL_PART_MAX characters
 * (a value may be empty): its length, or -1. */
static int part_len(const char *s, size_t n, bool may_be_empty)
{
	if ((!n && !may_be_empty) || n > MODEL_LABEL_PART_MAX)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!label_char(s[i]))
			return -1;
	return (int)n;
}

struct kv {
	const char *k, *v;
	size_t kn, vn;
};

static int cmp_kv(const void *a, const void *b)
{
	const struct kv *x = a, *y = b;
	size_t n = x->kn < y->kn ? x->kn : y->kn;
	int c = strncmp(x->k, y->k, n);
	return c ? c : (x->kn > y->kn) - (x->kn < y->kn);
}

size_t model_list_item(const char *p, const char **next)
{
	const char *end = strchr(p, ',');
	size_t len = end ? (size_t)(end - p) : strlen(p);
	*next = end ? end + 1 : p + len;
	return len;
}

int node_labels_parse(const char *text, char *out, size_t outn, struct tk_error *err)
{
	struct kv kv[MODEL_MAX_LABELS];
	int n = 0;
	for (const char *p = text, *next; *p; p = next) {
		size_t len = model_list_item(p, &next);
		const char *eq = memchr(p, '=', len);
		if (!eq)
			return tk_errorf(err, -EINVAL,
					 "labels: \"%.*s\" is not KEY=VALUE (such as tier=top)",
					 (int)len, p);
		if (n == MODEL_MAX_LABELS)
			return tk_errorf(err, -E2BIG, "labels: at most %d on a node",
					 MODEL_MAX_LABELS);
		kv[n] = (struct kv){p, eq + 1, (size_t)(eq - p), len - (size_t)(eq - p) - 1};
		if (part_len(kv[n].k, kv[n].kn, false) < 0 || part_len(kv[n].v, kv[n].vn, true) < 0)
			return tk_errorf(
				err, -EINVAL,
				"labels: \"%.*s\": a key (and its value) of letters, digits, "
				"'.', '_', '-', '/', %d characters at most",
				(int)len, p, MODEL_LABEL_PART_MAX);
		n++;
		if (!*next && next != p + len)
			return tk_errorf(err, -EINVAL, "labels: a trailing ','");
	}
	qsort(kv, (size_t)n, sizeof(*kv), cmp_kv);
	size_t l = 0;
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (i && cmp_kv(&kv[i - 1], &kv[i]) == 0)
			return tk_errorf(err, -EINVAL, "labels: %.*s is given twice", (int)kv[i].kn,
					 kv[i].k);
		int w = snprintf(out + l, outn - l, "%s%.*s=%.*s", i ? "," : "", (int)kv[i].kn,
				 kv[i].k, (int)kv[i].vn, kv[i].v);
		if (w < 0 || (size_t)w >= outn - l)
			return tk_errorf(err, -E2BIG, "labels: %zu characters at most in all",
					 outn - 1);
		l += (size_t)w;
	}
	return n;
}

const char *node_labels_get(const char *labels, const char *key, size_t keyn, size_t *valn)
{
	for (const char *p = labels ? labels : "", *next; *p; p = next) {
		size_t len = model_list_item(p, &next);
		const char *eq = memchr(p, '=', len);
		if (eq && (size_t)(eq - p) == keyn && strncmp(p, key, keyn) == 0) {
			*valn = len - keyn - 1;
			return eq + 1;
		}
	}
	return NULL;
}

/* One term of a constraint, [s, s + n): whether the labels satisfy it
 * (check only: whether it is well formed, into err). */
static int term(const char *s, size_t n, const char *labels, struct tk_error *err)
{
	const char *eq = memchr(s, '=', n);
	bool neg = eq && eq > s && eq[-1] == '!';
	size_t kn = eq ? (size_t)(eq - s) - neg : n;
	const char *v = eq ? eq + 1 : NULL;
	size_t vn = eq ? n - (size_t)(eq - s) - 1 : 0;
	if (part_len(s, kn, false) < 0 || (v && part_len(v, vn, true) < 0))
		return tk_errorf(err, -EINVAL,
				 "constraint: \"%.*s\" is not KEY, KEY=VALUE or KEY!=VALUE (of "
				 "letters, digits, '.', '_', '-', '/')",
				 (int)n, s);
	size_t have_n;
	const char *have = node_labels_get(labels, s, kn, &have_n);
	if (!v)
		return have != NULL;
	bool same = have && have_n == vn && strncmp(have, v, vn) == 0;
	return neg ? !same : same;
}

/* Evaluates expr: an OR of ANDs. < 0: malformed. */
static int eval(const char *expr, const char *labels, struct tk_error *err)
{
	if (!*expr)
		return tk_errorf(err, -EINVAL, "constraint: empty (such as fabric=ib&rack!=r07)");
	if (strlen(expr) > MODEL_CONSTRAINT_MAX - 1)
		return tk_errorf(err, -E2BIG, "constraint: %d characters at most",
				 MODEL_CONSTRAINT_MAX - 1);
	bool any = false;
	const char *p = expr;
	for (;;) {
		const char *bar = strchr(p, '|');
		size_t alt = bar ? (size_t)(bar - p) : strlen(p);
		bool all = true;
		const char *q = p;
		while (q <= p + alt) {
			const char *amp = memchr(q, '&', (size_t)(p + alt - q));
			size_t tn = amp ? (size_t)(amp - q) : (size_t)(p + alt - q);
			int t = term(q, tn, labels, err);
			if (t < 0)
				return t;
			all &= t == 1;
			if (!amp)
				break;
			q = amp + 1;
		}
		any |= all;
		if (!bar)
			break;
		p = bar + 1;
	}
	return any;
}

void node_labels_merge(const char *base, const char *over, char *out, size_t outn)
{
	struct strbuf sb;
	strbuf_init(&sb);
	for (const char *p = base ? base : "", *next; *p; p = next) {
		size_t len = model_list_item(p, &next);
		const char *eq = memchr(p, '=', len);
		size_t vn;
		if (eq && !node_labels_get(over, p, (size_t)(eq - p), &vn))
			strbuf_addf(&sb, "%s%.*s", sb.len ? "," : "", (int)len, p);
	}
	if (over && *over)
		strbuf_addf(&sb, "%s%s", sb.len ? "," : "", over);
	struct tk_error err;
	if (node_labels_parse(sb.buf, out, outn, &err) < 0) /* over the limits: over's alone */
		snprintf(out, outn, "%s", over ? over : "");
	strbuf_release(&sb);
}

void node_labels_beneath(const char *labels, const char *key, const char *value, char *out,
			 size_t outn)
{
	char kv[2 * MODEL_NAME_MAX + 8], canon[2 * MODEL_NAME_MAX + 8];
	snprintf(kv, sizeof(kv), "%s=%s", key, value ? value : "");
	if (!value || !*value || node_labels_parse(kv, canon, sizeof(canon), NULL) < 0)
		snprintf(out, outn, "%s", labels ? labels : "");
	else
		node_labels_merge(canon, labels, out, outn);
}

void node_labels_with_gpu(const char *labels, const char *model, char *out, size_t outn)
{
	node_labels_beneath(labels, "gpu", model, out, outn);
}

int job_constraint_with_fabric(const char *expr, const char *kind, char *out, size_t outn,
			       struct tk_error *err)
{
	static const char *const kinds[][2] = {
		{"ib", "fabric=ib"}, {"roce", "fabric=roce"}, {"rdma", "fabric=ib|fabric=roce"}};
	const char *alts = NULL;
	for (size_t k = 0; k < ARRAY_SIZE(kinds); k++)
		if (strcmp(kind, kinds[k][0]) == 0)
			alts = kinds[k][1];
	if (!alts)
		return tk_errorf(err, -EINVAL,
				 "fabric: expected ib (InfiniBand), roce or rdma (either), got "
				 "\"%.40s\"",
				 kind);
	struct strbuf sb;
	strbuf_init(&sb);
	/* & binds before |: each alternative of expr, with each kind's */
	const char *p = expr && *expr ? expr : NULL;
	do {
		const char *bar = p ? strchr(p, '|') : NULL;
		size_t len = p ? (bar ? (size_t)(bar - p) : strlen(p)) : 0;
		for (const char *a = alts;;) {
			const char *abar = strchr(a, '|');
			size_t alen = abar ? (size_t)(abar - a) : strlen(a);
			strbuf_addf(&sb, "%s%.*s%s%.*s", sb.len ? "|" : "", (int)len, p ? p : "",
				    len ? "&" : "", (int)alen, a);
			if (!abar)
				break;
			a = abar + 1;
		}
		p = bar ? bar + 1 : NULL;
	} while (p);
	int r = 0;
	if (sb.len >= outn)
		r = tk_errorf(err, -EINVAL, "constraint: too long with --fabric %s", kind);
	else
		snprintf(out, outn, "%s", sb.buf);
	strbuf_release(&sb);
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int model_names_parse(const char *what, const char *text, char *out, size_t outn,
		      struct tk_error *err)
{
	char buf[MODEL_LABELS_MAX];
	if (strlen(text) >= sizeof(buf))
		return tk_errorf(err, -E2BIG, "%s: %zu characters at most", what, sizeof(buf) - 1);
	snprintf(buf, sizeof(buf), "%s", text);
	char *v[MODEL_MAX_LABELS];
	int n = 0;
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (n == MODEL_MAX_LABELS)
			return tk_errorf(err, -E2BIG, "%s: at most %d", what, MODEL_MAX_LABELS);
		if (part_len(t, strlen(t), false) < 0)
			return tk_errorf(
				err, -EINVAL,
				"%s: \"%s\": a name of letters, digits, '.', '_', '-', '/', "
				"%d characters at most",
				what, t, MODEL_LABEL_PART_MAX);
		v[n++] = t;
	}
	if (text[0] && (text[0] == ',' || text[strlen(text) - 1] == ',' || strstr(text, ",,")))
		return tk_errorf(err, -EINVAL, "%s: an empty name in \"%s\"", what, text);
	qsort(v, (size_t)n, sizeof(*v), cmp_str);
	size_t l = 0;
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (i && strcmp(v[i - 1], v[i]) == 0)
			continue;
		int w = snprintf(out + l, outn - l, "%s%s", l ? "," : "", v[i]);
		if (w < 0 || (size_t)w >= outn - l)
			return tk_errorf(err, -E2BIG, "%s: too long", what);
		l += (size_t)w;
	}
	return n;
}

bool model_names_has(const char *names, const char *name, size_t n)
{
	for (const char *p = names ? names : "", *next; *p; p = next) {
		size_t len = model_list_item(p, &next);
		if (len == n && strncmp(p, name, n) == 0)
			return true;
	}
	return false;
}

bool node_taints_tolerated(const char *taints, const char *tolerate)
{
	for (const char *p = taints ? taints : "", *next; *p; p = next) {
		size_t len = model_list_item(p, &next);
		if (!model_names_has(tolerate, p, len))
			return false;
	}
	return true;
}

bool model_domain_valid(const char *path)
{
	int comps = 0;
	for (const char *p = path;; p++) {
		const char *end = strchr(p, '/');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char name[MODEL_NAME_MAX];
		if (len == 0 || len >= sizeof(name) || ++comps > 8)
			return false;
		memcpy(name, p, len);
		name[len] = '\0';
		if (!model_name_valid(name))
			return false;
		if (!end)
			return true;
		p = end;
	}
}

int job_spread_parse(const char *text, char *level, size_t n, int *max, struct tk_error *err)
{
	const char *what = max ? "spread" : "within";
	const char *colon = strchr(text, ':');
	size_t len = colon ? (size_t)(colon - text) : strlen(text);
	char *end = NULL;
	long cap = colon ? strtol(colon + 1, &end, 10) : 1;
	if (len == 0 || len >= n || len >= MODEL_NAME_MAX || (colon && !max) ||
	    (colon && (end == colon + 1 || *end || cap < 1 || cap > MODEL_MAX_NODES)))
		return tk_errorf(
			err, -EINVAL,
			"%s: expected a fault-domain level's name%s, such as \"rack\"%s; got "
			"\"%.64s\"",
			what, max ? " and at most how many nodes in each" : "",
			max ? " or \"rack:2\"" : "", text);
	memcpy(level, text, len);
	level[len] = '\0';
	if (!model_name_valid(level))
		return tk_errorf(err, -EINVAL, "%s: \"%s\" is not a level's name", what, level);
	if (max)
		*max = (int)cap;
	return 0;
}

int job_constraint_check(const char *expr, struct tk_error *err)
{
	int r = eval(expr, "", err);
	return r < 0 ? r : 0;
}

bool job_constraint_match(const char *expr, const char *labels)
{
	struct tk_error err;
	return !expr || eval(expr, labels, &err) == 1;
}
