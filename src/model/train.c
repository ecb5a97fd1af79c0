/*
 * Training metrics: the lines a job writes to $TENK_METRICS
 * ("step=120 loss=2.31 lr=3e-4 tokens_per_s=1.2e5"), what the agent sends
 * of them and what the server keeps per attempt.
 */
#include "model.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool name_char(char c, bool first)
{
	return isalpha((unsigned char)c) || c == '_' ||
	       (!first && (isdigit((unsigned char)c) || c == '.' || c == '/' || c == '-'));
}

static bool name_valid(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= MODEL_TRAIN_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!name_char(s[i], i == 0))
			return false;
	return true;
}

static int find(const struct train_point *p, const char *name)
{
	for (int i = 0; i < p->n; i++)
		if (strcmp(p->name[i], name) == 0)
			return i;
	return -1;
}

static void put(struct train_point *p, const char *name, double v)
{
	int i = find(p, name);
	if (i < 0 && p->n < MODEL_TRAIN_MAX) {
		i = p->n++;
		snprintf(p->name[i], sizeof(p->name[i]), "%s", name);
	}
	if (i >= 0)
		p->value[i] = v;
}

int train_line_parse(const char *line, size_t len, struct train_point *p)
{
	memset(p, 0, sizeof(*p));
	p->step = -1;
	char buf[MODEL_TRAIN_LINE_MAX];
	if (len >= sizeof(buf))
		len = sizeof(buf) - 1;
	memcpy(buf, line, len);
	buf[len] = 0;
	char *save = NULL;
	for (char *w = strtok_r(buf, " \t\r\n,", &save); w; w = strtok_r(NULL, " \t\r\n,", &save)) {
		char *eq = strchr(w, '=');
		if (!eq)
			continue;
		*eq = 0;
		if (!name_valid(w) || !eq[1])
			continue;
		char *end;
		errno = 0;
		double v = strtod(eq + 1, &end);
		if (*end || errno || !isfinite(v))
			continue;
		if (strcmp(w, "step") == 0) {
			if (v >= 0 && v <= 9e15 && v == floor(v))
				p->step = (int64_t)v;
			continue;
		}
		put(p, w, v);
	}
	return p->n;
}

void train_metrics_add(struct train_metrics *m, const struct train_point *p)
{
	if (m->last.n == 0 && m->nhist == 0)
		m->last.step = -1; /* the first */
	for (int i = 0; i < p->n; i++)
		put(&m->last, p->name[i], p->value[i]);
	if (p->step >= 0)
		m->last.step = p->step;
	m->last.at_ms = p->at_ms;
	/* the plotted names: the first ones seen */
	m->nplot = MIN(m->last.n, MODEL_TRAIN_PLOTTED);
	if (m->nhist == MODEL_TRAIN_HISTORY) {
		int k = 0;
		for (int i = 0; i < m->nhist; i += 2, k++) {
			m->hist_step[k] = m->hist_step[i];
			m->hist_ms[k] = m->hist_ms[i];
			memcpy(m->hist[k], m->hist[i], sizeof(m->hist[k]));
		}
		m->nhist = k;
	}
	int h = m->nhist++;
	m->hist_step[h] = p->step >= 0 ? p->step : (h ? m->hist_step[h - 1] + 1 : 0);
	m->hist_ms[h] = p->at_ms;
	for (int c = 0; c < MODEL_TRAIN_PLOTTED; c++) {
		int i = c < m->nplot ? find(p, m->last.name[c]) : -1;
		m->hist[h][c] = i >= 0 ? p->value[i] : NAN;
	}
}

json_t *train_point_pack(const struct train_point *p)
{
	json_t *v = json_object();
	for (int i = 0; i < p->n; i++)
		json_object_set_new(v, p->name[i], json_real(p->value[i]));
	return json_pack("{s:I, s:I, s:o}", "step", (json_int_t)p->step, "at_ms",
			 (json_int_t)p->at_ms, "values", v);
}

int train_point_unpack(json_t *j, struct train_point *p, struct tk_error *err)
{
	static const char *const keys[] = {"step", "at_ms", "values", NULL};
	memset(p, 0, sizeof(*p));
	int r;
	if (!json_is_object(j))
		return tk_errorf(err, -EINVAL, "must be an object with values");
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_int(j, "step", false, -1, INT64_MAX, -1, &p->step, err)) < 0 ||
	    (r = mj_int(j, "at_ms", false, 0, INT64_MAX, 0, &p->at_ms, err)) < 0)
		return r;
	json_t *v = json_object_get(j, "values");
	if (!json_is_object(v) || json_object_size(v) > MODEL_TRAIN_MAX)
		return tk_errorf(err, -EINVAL, "values: must be an object of at most %d numbers",
				 MODEL_TRAIN_MAX);
	const char *k;
	json_t *x;
	json_object_foreach (v, k, x) {
		if (!name_valid(k))
			return tk_errorf(err, -EINVAL, "values: \"%.60s\" is not a metric name", k);
		if (!json_is_number(x) || !isfinite(json_number_value(x)))
			return tk_errorf(err, -EINVAL, "values.%s: must be a finite number", k);
		put(p, k, json_number_value(x));
	}
	return 0;
}

json_t *train_metrics_pack(const struct train_metrics *m)
{
	json_t *o = train_point_pack(&m->last);
	json_t *names = json_array(), *steps = json_array(), *rows = json_array(),
	       *times = json_array();
	for (int c = 0; c < m->nplot; c++)
		json_array_append_new(names, json_string(m->last.name[c]));
	for (int h = 0; h < m->nhist; h++) {
		json_array_append_new(steps, json_integer(m->hist_step[h]));
		json_array_append_new(times, json_integer(m->hist_ms[h]));
		json_t *row = json_array();
		for (int c = 0; c < m->nplot; c++)
			json_array_append_new(row, isnan(m->hist[h][c]) ? json_null()
									: json_real(m->hist[h][c]));
		json_array_append_new(rows, row);
	}
	json_t *hist = json_pack("{s:o, s:o, s:o, s:o}", "names", names, "steps", steps, "values",
				 rows, "times", times);
	if (m->offset)
		json_object_set_new(hist, "offset", json_integer(m->offset));
	json_object_set_new(o, "history", hist);
	return o;
}

int train_metrics_unpack(json_t *j, struct train_metrics *m, struct tk_error *err)
{
	memset(m, 0, sizeof(*m));
	json_t *hist = json_object_get(j, "history");
	json_t *copy = json_copy(j);
	json_object_del(copy, "history");
	int r = train_point_unpack(copy, &m->last, err);
	json_decref(copy);
	if (r < 0)
		return r;
	if (!hist)
		return 0;
	json_t *names = json_object_get(hist, "names");
	json_t *steps = json_object_get(hist, "steps");
	json_t *rows = json_object_get(hist, "values");
	if (!json_is_array(names) || json_array_size(names) > MODEL_TRAIN_PLOTTED ||
	    json_array_size(names) > (size_t)m->last.n || !json_is_array(steps) ||
	    !json_is_array(rows) || json_array_size(steps) != json_array_size(rows) ||
	    json_array_size(steps) > MODEL_TRAIN_HISTORY)
		return tk_errorf(err, -EINVAL, "history: must have names, steps and values alike");
	m->nplot = (int)json_array_size(names);
	for (int c = 0; c < m->nplot; c++) {
		const char *nm = json_string_value(json_array_get(names, (size_t)c));
		if (!nm || strcmp(nm, m->last.name[c]) != 0)
			return tk_errorf(err, -EINVAL,
					 "history.names[%d]: must be the name values "
					 "lists at that place",
					 c);
	}
	json_t *off = json_object_get(hist, "offset");
	if (off && (!json_is_integer(off) || json_integer_value(off) < 0))
		return tk_errorf(err, -EINVAL, "history.offset: must be a byte offset");
	m->offset = off ? json_integer_value(off) : 0;
	/* when each point was written (an earlier release kept none) */
	json_t *times = json_object_get(hist, "times");
	if (times && (!json_is_array(times) || json_array_size(times) != json_array_size(steps)))
		return tk_errorf(err, -EINVAL, "history.times: must be one time for each step");
	m->nhist = (int)json_array_size(steps);
	for (int h = 0; h < m->nhist; h++) {
		json_t *tv = times ? json_array_get(times, (size_t)h) : NULL;
		if (tv && (!json_is_integer(tv) || json_integer_value(tv) < 0))
			return tk_errorf(err, -EINVAL, "history.times[%d]: must be a time in ms",
					 h);
		m->hist_ms[h] = tv ? json_integer_value(tv) : 0;
		json_t *st = json_array_get(steps, (size_t)h);
		json_t *row = json_array_get(rows, (size_t)h);
		if (!json_is_integer(st) || !json_is_array(row) ||
		    json_array_size(row) != (size_t)m->nplot)
			return tk_errorf(err, -EINVAL, "history.values[%d]: must be %d numbers", h,
					 m->nplot);
		m->hist_step[h] = json_integer_value(st);
		for (int c = 0; c < MODEL_TRAIN_PLOTTED; c++) {
			json_t *x = c < m->nplot ? json_array_get(row, (size_t)c) : NULL;
			m->hist[h][c] = json_is_number(x) ? json_number_value(x) : NAN;
		}
	}
	return 0;
}
