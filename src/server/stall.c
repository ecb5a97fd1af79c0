/*
 * Stalled jobs: a running attempt that wrote training lines
 * ($TENK_METRICS, train.c in the agent) and then wrote none for its
 * window is stalled, the quiet failure of a collective that hangs with
 * every accelerator held. The window is the job's stall_after_s, else the
 * cluster's "stall_after", else 10 times the attempt's median time between
 * lines and at least "stall_min" (5 min). Found stalled, the job says so
 * with the evidence (its record's "stalled", tenk show, the web page),
 * /metrics says tenk_job_stalled 1, and its on_stall is done: nothing
 * more (notify), its attempt stopped and the job requeued from its last
 * checkpoint, or the job cancelled. A line that comes after ends the
 * stall.
 *
 * Stalled is a condition of a RUNNING job, not a state of it: its tasks
 * still run, and what ends them is on_stall's, through the usual
 * transitions. What is known here is in memory only: a server restarted
 * starts each attempt's clock again at its next line.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* times between lines kept for the median */
#define STALL_GAPS 32

struct sstall {
	int attempt;	   /* the attempt these are of */
	int64_t line_mono; /* when its newest line came, by this server's clock */
	int64_t line_ms;   /* ... by the wall clock of the node that read it */
	int64_t step;	   /* the newest line's step (-1: none said) */
	/* the lines of one read of the file share its time: the time between
	 * reads over the lines read, a gap each */
	int64_t read_ms;
	int lines_in_read;
	int64_t gaps_ms[STALL_GAPS];
	int ngaps, gap_next;
	int64_t stalled_ms; /* when it was found stalled (wall clock; 0: it is not) */
	int64_t window_ms;  /* the window it was found stalled by */
	char why[MODEL_REASON_MAX];
};

void state_stall_forget(struct sjob *j)
{
	free(j->stall);
	j->stall = NULL;
}

void state_stall_line(struct state *s, struct sjob *j, const struct attempt *a,
		      const struct train_point *p)
{
	struct sstall *t = j->stall;
	if (!t || t->attempt != a->number) {
		if (!t)
			t = j->stall = xmalloc(sizeof(*t));
		memset(t, 0, sizeof(*t));
		t->attempt = a->number;
		t->step = -1;
		t->read_ms = p->at_ms;
	}
	if (p->at_ms > t->read_ms && t->lines_in_read > 0) {
		int64_t gap = (p->at_ms - t->read_ms) / t->lines_in_read;
		for (int k = 0; k < t->lines_in_read && k < STALL_GAPS; k++) {
			t->gaps_ms[t->gap_next] = gap;
			t->gap_next = (t->gap_next + 1) % STALL_GAPS;
			if (t->ngaps < STALL_GAPS)
				t->ngaps++;
		}
		t->read_ms = p->at_ms;
		t->lines_in_read = 0;
	}
	t->lines_in_read++;
	t->line_mono = s->mono_ms;
	t->line_ms = p->at_ms;
	t->step = p->step;
	if (t->stalled_ms) {
		log_info("job %lld: a training line again (step %lld): no longer stalled",
			 (long long)j->job.id, (long long)p->step);
		t->stalled_ms = 0;
		t->why[0] = '\0';
		state_job_dirty(s, j); /* (its record, as clients see it, changed) */
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* The median time between lines; 0 while fewer than three are known. */
static int64_t median_gap(const struct sstall *t)
{
	if (t->ngaps < 3)
		return 0;
	int64_t g[STALL_GAPS];
	memcpy(g, t->gaps_ms, sizeof(g[0]) * (size_t)t->ngaps);
	qsort(g, (size_t)t->ngaps, sizeof(g[0]), cmp_i64);
	return g[t->ngaps / 2];
}

/* How long j's attempt may go without a line. */
static int64_t window_ms(const struct state *s, const struct sjob *j, const struct sstall *t)
{
	if (j->job.req.stall_after_s)
		return j->job.req.stall_after_s * 1000;
	if (s->sched.stall_after_s)
		return s->sched.stall_after_s * 1000;
	return MAX(10 * median_gap(t), s->sched.stall_min_s * 1000);
}

/* "1h02m", "4m10s", "12s": a span for people. */
static void span(char *buf, size_t n, int64_t ms)
{
	int64_t sec = ms / 1000;
	if (sec >= 3600)
		snprintf(buf, n, "%lldh%02lldm", (long long)(sec / 3600),
			 (long long)(sec % 3600 / 60));
	else if (sec >= 60)
		snprintf(buf, n, "%lldm%02llds", (long long)(sec / 60), (long long)(sec % 60));
	else
		snprintf(buf, n, "%llds", (long long)sec);
}

static void stalled(struct state *s, struct sjob *j, struct sstall *t, int64_t win, int64_t now)
{
	char quiet[32], med[32] = "";
	span(quiet, sizeof(quiet), s->mono_ms - t->line_mono);
	int64_t m = median_gap(t);
	if (m)
		snprintf(med, sizeof(med), "; a line every %.1f s before", (double)m / 1000);
	char step[40] = "";
	if (t->step >= 0)
		snprintf(step, sizeof(step), " (step %lld)", (long long)t->step);
	snprintf(t->why, sizeof(t->why), "no training line for %s since the last%s%s", quiet, step,
		 med);
	t->stalled_ms = now;
	t->window_ms = win;
	log_warn("job %lld stalled: %s; on_stall %s", (long long)j->job.id, t->why,
		 stall_action_name(j->job.req.on_stall));
	state_job_dirty(s, j);
	char reason[MODEL_REASON_MAX];
	struct tk_error err;
	switch (j->job.req.on_stall) {
	case STALL_REQUEUE:
		snprintf(reason, sizeof(reason), "tenk: stalled, %.200s", t->why);
		state_requeue(s, j, reason, now, &err);
		break;
	case STALL_CANCEL:
		snprintf(reason, sizeof(reason), "stalled: %.200s", t->why);
		state_job_finish(s, j, JOB_CANCELLED, j->job.exit_code, reason, now);
		break;
	default:
		break;
	}
}

void state_check_stalls(struct state *s, int64_t now)
{
	for (int i = 0; i < s->nnodes; i++) {
		struct snode *n = s->nodes[i];
		for (int k = 0; k < n->nparts; k++) {
			struct sjob *j = n->parts[k].job;
			struct sstall *t = j->stall;
			if (n->parts[k].node_index != 0 || !t || t->stalled_ms ||
			    j->job.state != JOB_RUNNING || n->parts[k].attempt != t->attempt)
				continue;
			const struct attempt *a = job_current_attempt(&j->job);
			if (!a || a->number != t->attempt || a->ended)
				continue;
			int64_t win = window_ms(s, j, t);
			if (s->mono_ms - t->line_mono > win) {
				stalled(s, j, t, win, now);
				return; /* (parts may have changed: the next tick goes on) */
			}
		}
	}
}

/* What is known of j's running attempt's lines; NULL: nothing. */
static const struct sstall *current(const struct sjob *j)
{
	const struct attempt *a = job_current_attempt(&j->job);
	return j->stall && a && j->stall->attempt == a->number && j->job.state == JOB_RUNNING
		       ? j->stall
		       : NULL;
}

json_t *state_stall_pack(const struct sjob *j)
{
	const struct sstall *t = current(j);
	if (!t || !t->stalled_ms)
		return NULL;
	return json_pack("{s:I, s:I, s:I, s:I, s:s, s:s}", "since_ms", (json_int_t)t->stalled_ms,
			 "last_line_ms", (json_int_t)t->line_ms, "last_step", (json_int_t)t->step,
			 "window_s", (json_int_t)(t->window_ms / 1000), "why", t->why, "on_stall",
			 stall_action_name(j->job.req.on_stall));
}

bool state_job_stalled(const struct sjob *j)
{
	const struct sstall *t = current(j);
	return t && t->stalled_ms;
}

bool state_job_trains(const struct sjob *j)
{
	return current(j) != NULL;
}
