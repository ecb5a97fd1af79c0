/*
 * Prometheus' text exposition format (version 0.0.4): families with HELP
 * and TYPE, samples with escaped labels, histograms from fixed buckets.
 */
#include "util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void tk_hist_observe(struct tk_hist *h, const double *bounds, int nbounds, double v)
{
	int i = 0;
	while (i < nbounds && i < TK_HIST_MAX && v > bounds[i])
		i++;
	if (i < nbounds && i < TK_HIST_MAX)
		h->counts[i]++;
	h->count++;
	h->sum += v;
}

void prom_labels_init(struct prom_labels *l)
{
	l->text[0] = 0;
	l->len = 0;
}

static void put(struct prom_labels *l, char c)
{
	if (l->len + 1 < sizeof(l->text)) {
		l->text[l->len++] = c;
		l->text[l->len] = 0;
	}
}

void prom_label(struct prom_labels *l, const char *name, const char *value)
{
	/* a label cut short would be malformed: leave it out whole */
	size_t need = strlen(name) + 4 + (l->len ? 1 : 0);
	for (const char *p = value; *p; p++)
		need += (*p == '\\' || *p == '"' || *p == '\n') ? 2 : 1;
	if (l->len + need >= sizeof(l->text))
		return;
	if (l->len)
		put(l, ',');
	for (const char *p = name; *p; p++)
		put(l, *p);
	put(l, '=');
	put(l, '"');
	for (const char *p = value; *p; p++) {
		if (*p == '\\' || *p == '"' || *p == '\n') {
			put(l, '\\');
			put(l, *p == '\n' ? 'n' : *p);
		} else {
			put(l, *p);
		}
	}
	put(l, '"');
}

void prom_labelf(struct prom_labels *l, const char *name, const char *fmt, ...)
{
	char v[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	prom_label(l, name, v);
}

void prom_family(struct strbuf *b, const char *name, const char *type, const char *help)
{
	strbuf_addf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void value(struct strbuf *b, double v)
{
	if (isnan(v))
		strbuf_addstr(b, "NaN");
	else if (isinf(v))
		strbuf_addstr(b, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 9e15)
		strbuf_addf(b, "%.0f", v);
	else
		strbuf_addf(b, "%.15g", v);
}

void prom_sample(struct strbuf *b, const char *name, const struct prom_labels *l, double v)
{
	strbuf_addstr(b, name);
	if (l && l->len)
		strbuf_addf(b, "{%s}", l->text);
	strbuf_addch(b, ' ');
	value(b, v);
	strbuf_addch(b, '\n');
}

void prom_hist(struct strbuf *b, const char *name, const struct prom_labels *l,
	       const struct tk_hist *h, const double *bounds, int nbounds)
{
	const char *sep = l && l->len ? "," : "";
	const char *lt = l && l->len ? l->text : "";
	uint64_t cum = 0;
	for (int i = 0; i < nbounds && i < TK_HIST_MAX; i++) {
		cum += h->counts[i];
		strbuf_addf(b, "%s_bucket{%s%sle=\"", name, lt, sep);
		value(b, bounds[i]);
		strbuf_addf(b, "\"} %llu\n", (unsigned long long)cum);
	}
	strbuf_addf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, lt, sep,
		    (unsigned long long)h->count);
	strbuf_addf(b, "%s_sum", name);
	if (*lt)
		strbuf_addf(b, "{%s}", lt);
	strbuf_addch(b, ' ');
	value(b, h->sum);
	strbuf_addf(b, "\n%s_count", name);
	if (*lt)
		strbuf_addf(b, "{%s}", lt);
	strbuf_addf(b, " %llu\n", (unsigned long long)h->count);
}
