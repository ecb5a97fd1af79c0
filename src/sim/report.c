/*
 * What a simulation reports: a table for people, JSON for machines, a
 * picture of the cluster over time, and one CSV row per job.
 */
#include "sim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *state_name(enum sim_job_state s)
{
	switch (s) {
	case SIM_DONE:
		return "done";
	case SIM_TIMEOUT:
		return "timeout";
	case SIM_NEVER_FITS:
		return "never-fits";
	case SIM_UNPLACED:
		return "unplaced";
	case SIM_UNFINISHED:
		break;
	}
	return "unfinished";
}

static void fmt_s(double s, char *buf, size_t n)
{
	if (s < 120)
		snprintf(buf, n, "%.1f s", s);
	else if (s < 7200)
		snprintf(buf, n, "%.1f min", s / 60);
	else if (s < 172800)
		snprintf(buf, n, "%.1f h", s / 3600);
	else
		snprintf(buf, n, "%.1f d", s / 86400);
}

void sim_report_table(const struct sim_result *r, const struct sim_trace *tr, FILE *f)
{
	char a[32], b[32], c[32];
	fprintf(f,
		"jobs            %d: %d done, %d at their time limit, %d never fit, %d unfinished",
		r->n, r->done, r->timeout, r->never_fits, r->unfinished);
	if (r->unplaced)
		fprintf(f, ", %d unplaced", r->unplaced);
	fprintf(f, "\n");
	fmt_s(r->jct_s.mean, a, sizeof(a));
	fmt_s(r->jct_s.p50, b, sizeof(b));
	fmt_s(r->jct_s.p99, c, sizeof(c));
	fprintf(f, "completion time mean %s, p50 %s, p99 %s\n", a, b, c);
	fmt_s(r->wait_s.mean, a, sizeof(a));
	fmt_s(r->wait_s.p50, b, sizeof(b));
	fmt_s(r->wait_s.p99, c, sizeof(c));
	fprintf(f, "wait            mean %s, p50 %s, p99 %s\n", a, b, c);
	fmt_s((double)r->makespan_ms / 1000, a, sizeof(a));
	fprintf(f, "makespan        %s\n", a);
	fprintf(f,
		"allocation      %.1f%% of device capacity (time-weighted), %.1f%% while jobs "
		"arrived\n",
		100 * r->alloc_mean, 100 * r->alloc_arriving);
	fprintf(f, "devices in use  %.1f%%\n", 100 * r->busy_mean);
	if (r->frag_mean >= 0)
		fprintf(f,
			"fragmentation   %.1f%% of free capacity unusable by the typical request\n",
			100 * r->frag_mean);
	fprintf(f, "effective       %.2f%% of device-time kept (%.1f device-hours used, %.1f lost",
		100 * r->effective, r->device_h_used, r->device_h_lost);
	if (r->device_h_saving > 0)
		fprintf(f, ", %.1f of them writing checkpoints", r->device_h_saving);
	fprintf(f, ")\n");
	fprintf(f, "events          %d failures, %d preemptions, %d requeues, %lld passes\n",
		r->failures, r->preemptions, r->requeues, (long long)r->passes);
	if (r->restarts_in_place || r->device_h_spare > 0)
		fprintf(f,
			"in place        %d restarts in place (%d by a job's spare, %d by the "
			"pool's); %.1f device-hours held idle as spares\n",
			r->restarts_in_place, r->spare_swaps, r->pool_swaps, r->device_h_spare);
	if (r->npools) {
		fprintf(f, "pools          ");
		for (int p = 0; p <= r->npools; p++)
			if (p < r->npools || r->pool_milli[p])
				fprintf(f, " %s %.1f%% (%.1f%%) of %lld",
					p < r->npools ? r->pool_names[p] : "(none)",
					100 * r->pool_alloc[p], 100 * r->pool_alloc_arriving[p],
					(long long)(r->pool_milli[p] / MODEL_MILLI));
		fprintf(f, " devices allocated (while jobs arrived)\n");
	}
	fprintf(f, "queue shares   ");
	for (int q = 0; q < tr->nqueues; q++)
		fprintf(f, " %s %.1f%%", tr->queues[q], 100 * r->queue_share[q]);
	fprintf(f, "\nsimulated in    %.2f s\n", r->wall_s);
}

static json_t *stats_json(const struct sim_stats *s)
{
	return json_pack("{s:f, s:f, s:f}", "mean_s", s->mean, "p50_s", s->p50, "p99_s", s->p99);
}

char *sim_report_json(const struct sim_result *r, const struct sim_trace *tr)
{
	json_t *shares = json_object();
	for (int q = 0; q < tr->nqueues; q++)
		json_object_set_new(shares, tr->queues[q], json_real(r->queue_share[q]));
	json_t *series = json_array();
	for (int i = 0; i < r->nseries; i++) {
		const struct sim_point *p = &r->series[i];
		json_array_append_new(series,
				      json_pack("{s:I, s:f, s:f, s:o, s:I, s:I}", "t_s",
						(json_int_t)(p->t_ms / 1000), "alloc", p->alloc,
						"busy", p->busy, "frag",
						p->frag >= 0 ? json_real(p->frag) : json_null(),
						"pending", (json_int_t)p->pending, "running",
						(json_int_t)p->running));
	}
	json_t *o = json_pack(
		"{s:i, s:i, s:i, s:i, s:i, s:i, s:o, s:o, s:f, s:f, s:f, s:o, s:f, s:f, s:f, s:i, "
		"s:i, s:i, s:I, s:o, s:o, s:f}",
		"jobs", r->n, "done", r->done, "timeout", r->timeout, "never_fits", r->never_fits,
		"unplaced", r->unplaced, "unfinished", r->unfinished, "completion",
		stats_json(&r->jct_s), "wait", stats_json(&r->wait_s), "makespan_s",
		(double)r->makespan_ms / 1000, "allocation", r->alloc_mean, "busy", r->busy_mean,
		"fragmentation", r->frag_mean >= 0 ? json_real(r->frag_mean) : json_null(),
		"effective_training", r->effective, "device_hours_used", r->device_h_used,
		"device_hours_lost", r->device_h_lost, "failures", r->failures, "preemptions",
		r->preemptions, "requeues", r->requeues, "passes", (json_int_t)r->passes,
		"queue_share", shares, "series", series, "wall_s", r->wall_s);
	json_object_set_new(o, "allocation_arriving", json_real(r->alloc_arriving));
	json_object_set_new(o, "device_hours_saving", json_real(r->device_h_saving));
	if (r->npools) {
		json_t *pools = json_object();
		for (int p = 0; p <= r->npools; p++)
			json_object_set_new(pools, p < r->npools ? r->pool_names[p] : "(none)",
					    json_pack("{s:I, s:f, s:f}", "devices",
						      (json_int_t)(r->pool_milli[p] / MODEL_MILLI),
						      "allocation", r->pool_alloc[p],
						      "allocation_arriving",
						      r->pool_alloc_arriving[p]));
		json_object_set_new(o, "pools", pools);
	}
	json_object_set_new(o, "restarts_in_place", json_integer(r->restarts_in_place));
	json_object_set_new(o, "spare_swaps", json_integer(r->spare_swaps));
	json_object_set_new(o, "pool_swaps", json_integer(r->pool_swaps));
	json_object_set_new(o, "device_hours_spare", json_real(r->device_h_spare));
	char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
	json_decref(o);
	return text;
}

int sim_report_jobs_csv(const struct sim_result *r, const struct sim_trace *tr, const char *path,
			struct tk_error *err)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return tk_errorf(err, -errno, "%s: %s", path, strerror(errno));
	fprintf(f, "job,line,queue,state,submit_s,start_s,end_s,wait_s,attempts,devices\n");
	for (int i = 0; i < r->n; i++) {
		const struct sim_job_result *j = &r->jobs[i];
		const struct sim_job *sj = &tr->jobs[i];
		fprintf(f, "%d,%d,%s,%s,%.3f,", i + 1, sj->line, tr->queues[sj->queue],
			state_name(j->state), (double)sj->submit_ms / 1000);
		if (j->start_ms >= 0)
			fprintf(f, "%.3f", (double)j->start_ms / 1000);
		fprintf(f, ",");
		if (j->end_ms >= 0)
			fprintf(f, "%.3f", (double)j->end_ms / 1000);
		fprintf(f, ",%.3f,%d,%s\n", (double)j->wait_ms / 1000, j->attempts,
			j->devices ? j->devices : "");
	}
	bool bad = ferror(f) != 0;
	if (fclose(f) != 0 || bad)
		return tk_errorf(err, -EIO, "%s: write error", path);
	return 0;
}

/* ---- the picture ----------------------------------------------------------------------- */

#define W 960
#define H 560
#define PL 70 /* plot left */
#define PR 30
#define PW (W - PL - PR)

static void polyline(FILE *f, const struct sim_result *r, int which, double ymax, int top, int h,
		     const char *color)
{
	if (r->nseries == 0)
		return;
	double t0 = (double)r->series[0].t_ms, t1 = (double)r->series[r->nseries - 1].t_ms;
	double span = t1 > t0 ? t1 - t0 : 1;
	fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
	for (int i = 0; i < r->nseries; i++) {
		const struct sim_point *p = &r->series[i];
		double y = which == 0	? p->alloc
			   : which == 1 ? p->busy
			   : which == 2 ? p->frag
			   : which == 3 ? p->pending
					: p->running;
		if (y < 0)
			continue;
		double px = PL + ((double)p->t_ms - t0) / span * PW;
		double py = top + h - (ymax > 0 ? y / ymax : 0) * h;
		fprintf(f, "%.1f,%.1f ", px, py);
	}
	fprintf(f, "\"/>\n");
}

static void axes(FILE *f, int top, int h, double ymax, const char *unit, double t_span_h)
{
	fprintf(f,
		"<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
		"stroke=\"#888\"/>\n",
		PL, top, PW, h);
	for (int k = 0; k <= 4; k++) {
		double y = top + h - h * k / 4.0;
		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
			PL, y, PL + PW, y);
		fprintf(f,
			"<text x=\"%d\" y=\"%.1f\" font-size=\"11\" "
			"text-anchor=\"end\">%.0f%s</text>\n",
			PL - 6, y + 4, ymax * k / 4, unit);
	}
	for (int k = 0; k <= 6; k++) {
		double x = PL + PW * k / 6.0;
		fprintf(f,
			"<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%.1f "
			"h</text>\n",
			x, top + h + 14, t_span_h * k / 6);
	}
}

int sim_report_svg(const struct sim_result *r, const char *title, const char *path,
		   struct tk_error *err)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return tk_errorf(err, -errno, "%s: %s", path, strerror(errno));
	double span_h =
		r->nseries > 1
			? (double)(r->series[r->nseries - 1].t_ms - r->series[0].t_ms) / 3600e3
			: 0;
	double qmax = 1;
	for (int i = 0; i < r->nseries; i++)
		qmax = MAX(qmax, MAX(r->series[i].pending, r->series[i].running));
	/* a round top for the job axis */
	double step = pow(10, floor(log10(qmax)));
	qmax = ceil(qmax / step) * step;
	fprintf(f,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" "
		"fill=\"white\"/>\n",
		W, H);
	fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"15\">", PL);
	for (const char *p = title; *p; p++) {
		if (*p == '<')
			fputs("&lt;", f);
		else if (*p == '&')
			fputs("&amp;", f);
		else
			fputc(*p, f);
	}
	fprintf(f, "</text>\n");
	/* top: shares of the devices */
	int top1 = 50, h1 = 250;
	axes(f, top1, h1, 100, "%", span_h);
	/* the series hold shares (0..1); draw them in percent */
	polyline(f, r, 0, 1, top1, h1, "#1f77b4");
	polyline(f, r, 1, 1, top1, h1, "#2ca02c");
	polyline(f, r, 2, 1, top1, h1, "#d62728");
	fprintf(f,
		"<text x=\"%d\" y=\"%d\" font-size=\"12\" fill=\"#1f77b4\">allocated "
		"capacity</text>"
		"<text x=\"%d\" y=\"%d\" font-size=\"12\" fill=\"#2ca02c\">devices in use</text>"
		"<text x=\"%d\" y=\"%d\" font-size=\"12\" fill=\"#d62728\">fragmented share of free"
		"</text>\n",
		PL + 10, top1 + 16, PL + 160, top1 + 16, PL + 290, top1 + 16);
	/* bottom: jobs */
	int top2 = 340, h2 = 180;
	axes(f, top2, h2, qmax, "", span_h);
	polyline(f, r, 3, qmax, top2, h2, "#ff7f0e");
	polyline(f, r, 4, qmax, top2, h2, "#9467bd");
	fprintf(f,
		"<text x=\"%d\" y=\"%d\" font-size=\"12\" fill=\"#ff7f0e\">jobs waiting</text>"
		"<text x=\"%d\" y=\"%d\" font-size=\"12\" fill=\"#9467bd\">jobs running</text>\n",
		PL + 10, top2 + 16, PL + 120, top2 + 16);
	fprintf(f,
		"<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">virtual time "
		"since the first submission</text>\n</svg>\n",
		PL + PW / 2, H - 8);
	bool bad = ferror(f) != 0;
	if (fclose(f) != 0 || bad)
		return tk_errorf(err, -EIO, "%s: write error", path);
	return 0;
}
