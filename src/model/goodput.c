/*
 * Goodput: where a job's time went, over all its attempts, from what its
 * record holds (each attempt's start, end, restore and failure times, the
 * times its training lines were written, the checkpoint each restored).
 * Every millisecond from submission to its end (or now) is in exactly one
 * part:
 *
 *   submit   start1  restore  first line            failure  end1    start2 ...
 *     |queued  |restoring|starting|productive |lost   |detecting|placing|
 *                                 (less checkpointing: its saves)
 *                                         ^ the step attempt 2 restored
 *
 * An attempt's training is productive up to the step the next attempt
 * restored, when that checkpoint was its own, and lost after it (all of
 * it when the next restored an older one, or none); the last attempt's
 * training is productive unless the job failed. Where an attempt wrote no
 * lines there is no starting part, and the step the next restored is
 * placed at its checkpoint's commit. A failure is counted from when it
 * was said to happen (a node's last word, the first task to fail), but
 * not before the attempt's last line, or, where its lines stopped long
 * before that (ten steps, five seconds at least), from its last line: a
 * hang's time is detection's.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* When attempt a reached step k, from its lines' history (interpolated
 * between the points either side); -1 where its lines do not say. */
static int64_t step_time(const struct attempt *a, int64_t k)
{
	const struct train_metrics *m = a->train;
	if (!m)
		return -1;
	int prev = -1;
	for (int h = 0; h < m->nhist; h++) {
		if (!m->hist_ms[h])
			continue;
		if (m->hist_step[h] >= k) {
			if (prev < 0 || m->hist_step[h] == m->hist_step[prev])
				return m->hist_ms[h];
			double f = (double)(k - m->hist_step[prev]) /
				   (double)(m->hist_step[h] - m->hist_step[prev]);
			return m->hist_ms[prev] +
			       (int64_t)(f * (double)(m->hist_ms[h] - m->hist_ms[prev]));
		}
		prev = h;
	}
	return -1;
}

/* When attempt a's first line was written; -1: none known. */
static int64_t first_line(const struct attempt *a)
{
	const struct train_metrics *m = a->train;
	for (int h = 0; m && h < m->nhist; h++)
		if (m->hist_ms[h])
			return m->hist_ms[h];
	return -1;
}

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return a < b ? -1 : a > b;
}

/* Attempt a's median time a step, from its lines' times (0: not known). */
static int64_t step_ms(const struct attempt *a)
{
	const struct train_metrics *m = a->train;
	int64_t per[MODEL_TRAIN_HISTORY];
	int n = 0;
	for (int h = 1; m && h < m->nhist; h++)
		if (m->hist_ms[h] && m->hist_ms[h - 1] && m->hist_step[h] > m->hist_step[h - 1])
			per[n++] = (m->hist_ms[h] - m->hist_ms[h - 1]) /
				   (m->hist_step[h] - m->hist_step[h - 1]);
	if (!n)
		return 0;
	qsort(per, (size_t)n, sizeof(per[0]), cmp_i64);
	return per[n / 2];
}

/* Lines that stopped this long before a failure was said stopped for a
 * hang: ten times the attempt's median time a step, and at least
 * GOODPUT_HANG_MIN_MS (lines are read each second). */
#define GOODPUT_HANG_MIN_MS 5000
static int64_t hang_ms(const struct attempt *a)
{
	return MAX(10 * step_ms(a), GOODPUT_HANG_MIN_MS);
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* When the checkpoint next restored was committed; -1: not known. */
static int64_t commit_time(const struct job *j, const struct attempt *next)
{
	for (int i = 0; i < j->nckpts; i++)
		if (strcmp(j->ckpts[i].tag, next->restore_tag) == 0 &&
		    j->ckpts[i].attempt == next->restore_attempt)
			return j->ckpts[i].at_ms;
	return -1;
}

/* Sums the parts of every attempt (only < 0), or of attempt index only
 * (the wait before it and, for the last, what follows it). */
static void walk(const struct job *j, int64_t now, int only, struct goodput *g)
{
	memset(g, 0, sizeof(*g));
	bool final = job_state_final(j->state);
	int64_t end = final && j->end_ms ? j->end_ms : now;
	end = MAX(end, j->submit_ms);
	g->wall_ms = end - j->submit_ms;
	int64_t prev = j->submit_ms;
	int last = -1;
	for (int i = 0; i < j->nattempts; i++) {
		const struct attempt *a = &j->attempts[i];
		if (!a->start_ms)
			continue;
		struct goodput p = {0};
		int64_t start = clamp(a->start_ms, prev, end);
		int64_t a_end = clamp(a->ended && a->end_ms ? a->end_ms : end, start, end);
		if (last < 0)
			p.queued_ms = start - prev;
		else
			p.placing_ms = start - prev;
		last = i;
		/* restoring: to every node's go, or all of it while it waits */
		int64_t restored = a->restore_go       ? clamp(start + a->restore_ms, start, a_end)
				   : a->restore_tag[0] ? a_end
						       : start;
		p.restoring_ms = restored - start;
		int64_t first = first_line(a);
		first = first < 0 ? restored : clamp(first, restored, a_end);
		p.starting_ms = first - restored;
		/* a failure: when it was said to happen, or when its lines stopped
		 * where that was long before (a hang); not before its last line
		 * (a node's last word may be a heartbeat older than it) */
		int64_t fail = a->fail_ms, line = a->train ? a->train->last.at_ms : 0;
		if (fail && line && line < fail - hang_ms(a))
			fail = line;
		else if (fail && line)
			fail = MAX(fail, line);
		fail = fail ? clamp(fail, first, a_end) : a_end;
		p.detecting_ms = a_end - fail;
		/* what of its training was kept */
		int64_t kept;
		const struct attempt *next = i + 1 < j->nattempts ? &j->attempts[i + 1] : NULL;
		if (!next) {
			kept = final && j->state == JOB_FAILED ? first : fail;
		} else if (next->restore_tag[0] && next->restore_attempt == a->number) {
			int64_t t = step_time(a, next->restore_step);
			if (t < 0)
				t = commit_time(j, next);
			kept = t < 0 ? fail : clamp(t, first, fail);
			if (a->train && a->train->last.step > next->restore_step)
				p.steps_lost = a->train->last.step - next->restore_step;
		} else {
			kept = first;
			if (a->train && a->train->last.step > 0)
				p.steps_lost = a->train->last.step - next->restore_step;
		}
		p.productive_ms = kept - first;
		p.lost_ms = fail - kept;
		/* saving its committed checkpoints: kept training's time */
		p.checkpointing_ms = MIN(a->ckpt_ms, p.productive_ms);
		p.productive_ms -= p.checkpointing_ms;
		if (next || (final && j->state != JOB_COMPLETED && j->state != JOB_CANCELLED))
			p.failures = a->end != ATTEMPT_END_COMPLETED;
		prev = a_end;
		if (only >= 0 && only != i)
			continue;
		g->queued_ms += p.queued_ms;
		g->placing_ms += p.placing_ms;
		g->restoring_ms += p.restoring_ms;
		g->starting_ms += p.starting_ms;
		g->productive_ms += p.productive_ms;
		g->checkpointing_ms += p.checkpointing_ms;
		g->lost_ms += p.lost_ms;
		g->detecting_ms += p.detecting_ms;
		g->steps_lost += p.steps_lost;
		g->failures += p.failures;
	}
	/* after the last attempt: waiting to be placed again, or its end */
	if (only < 0 || only == last) {
		if (last < 0)
			g->queued_ms += end - prev;
		else if (final)
			g->detecting_ms += end - prev;
		else
			g->placing_ms += end - prev;
	}
	int64_t ran = g->placing_ms + g->restoring_ms + g->starting_ms + g->productive_ms +
		      g->checkpointing_ms + g->lost_ms + g->detecting_ms;
	if (only >= 0)
		g->wall_ms = ran + g->queued_ms;
	g->ratio = last >= 0 && ran > 0 ? (double)g->productive_ms / (double)ran : -1;
}

void goodput_of(const struct job *j, int64_t now, struct goodput *g)
{
	walk(j, now, -1, g);
}

void goodput_attempt(const struct job *j, int index, int64_t now, struct goodput *g)
{
	walk(j, now, index, g);
}

/* The newest value of metric name in attempt a's lines; NAN: none. */
static double metric(const struct attempt *a, const char *name)
{
	for (int i = 0; a->train && i < a->train->last.n; i++)
		if (strcmp(a->train->last.name[i], name) == 0)
			return a->train->last.value[i];
	return NAN;
}

double goodput_flops(const struct attempt *a)
{
	static const char *const rates[][2] = {
		{"tokens_per_s", "flops_per_token"},
		{"samples_per_s", "flops_per_sample"},
	};
	for (size_t k = 0; k < ARRAY_SIZE(rates); k++) {
		double r = metric(a, rates[k][0]), f = metric(a, rates[k][1]);
		if (isfinite(r) && isfinite(f) && r > 0 && f > 0)
			return r * f;
	}
	/* FLOPs a step, over its median time a step (from the lines' times) */
	double per_step = metric(a, "model_flops");
	int64_t ms = step_ms(a);
	return isfinite(per_step) && per_step > 0 && ms > 0 ? per_step / ((double)ms / 1000.0) : -1;
}

json_t *goodput_pack(const struct goodput *g)
{
	json_t *o = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:I}", "wall_s",
			      g->wall_ms / 1000.0, "queued_s", g->queued_ms / 1000.0, "placing_s",
			      g->placing_ms / 1000.0, "restoring_s", g->restoring_ms / 1000.0,
			      "starting_s", g->starting_ms / 1000.0, "productive_s",
			      g->productive_ms / 1000.0, "checkpointing_s",
			      g->checkpointing_ms / 1000.0, "lost_s", g->lost_ms / 1000.0,
			      "detecting_s", g->detecting_ms / 1000.0, "failures", g->failures,
			      "steps_lost", (json_int_t)g->steps_lost);
	json_object_set_new(o, "effective_ratio",
			    g->ratio >= 0 ? json_real(g->ratio) : json_null());
	return o;
}
