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
 *
 * A running attempt whose accelerators all read under 5% busy (the
 * agents' beats: NVML, each second) for the same window is stalled too,
 * lines or not: a job hung before its first step, or one that writes no
 * lines. Its evidence names them ("GPUs 0-7 on gpu03 under 5% for
 * 12m"), and work on them again ends that stall. A job with no lines and
 * no accelerators, or on nodes without NVML, is not judged.
 *
 * Where lines say their rank ("step=120 rank=3 loss=2.1", each rank its
 * own), each rank's time a step is measured over its newest lines; a rank
 * slower than 1.5 times the gang's median at four checks in a row (two
 * seconds) is named the straggler, with its node (the record's
 * "straggler", tenk show, tenk_job_straggler); a stall says which rank
 * stopped first.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* times between lines kept for the median */
#define STALL_GAPS 32
/* a rank's newest lines kept, for its time a step */
#define RANK_LINES 8
/* a rank slower than this times the gang's median time a step, at this
 * many checks in a row, is named the straggler */
#define STRAGGLER_RATIO 1.5
#define STRAGGLER_CHECKS 4
/* an accelerator under this utilisation is idle */
#define STALL_IDLE_PCT 5

/* What the lines that say their rank ("rank=R") tell of it. */
struct srank {
	int64_t step[RANK_LINES], at_ms[RANK_LINES];
	int n, next;
	int64_t last_mono; /* when its newest line came */
	int strikes;	   /* checks in a row it was slow */
};

enum stall_kind { STALL_BY_NONE, STALL_BY_LINES, STALL_BY_GPUS };

struct sstall {
	int attempt; /* the attempt these are of */
	bool lines;  /* it wrote training lines */
	/* since when every accelerator it holds reads idle (0: not, or not
	 * known), and the most busy one of them read meanwhile */
	int64_t idle_mono;
	int idle_max_pct;
	enum stall_kind kind; /* what it was found stalled by */
	int64_t line_mono;    /* when its newest line came, by this server's clock */
	int64_t line_ms;      /* ... by the wall clock of the node that read it */
	int64_t step;	      /* the newest line's step (-1: none said) */
	/* the lines of one read of the file share its time: the time between
	 * reads over the lines read, a gap each */
	int64_t read_ms;
	int lines_in_read;
	int64_t gaps_ms[STALL_GAPS];
	int ngaps, gap_next;
	int64_t stalled_ms; /* when it was found stalled (wall clock; 0: it is not) */
	int64_t window_ms;  /* the window it was found stalled by */
	char why[MODEL_REASON_MAX];
	/* ranks, where lines say theirs (NULL: none did), and the straggler
	 * named (-1: none): its time a step and the gang's median */
	struct srank *ranks;
	int nranks;
	int straggler;
	double straggler_s, median_s;
	int64_t straggler_ms;
};

void state_stall_forget(struct sjob *j)
{
	if (j->stall)
		free(j->stall->ranks);
	free(j->stall);
	j->stall = NULL;
}

/* The rank a line says it is from ("rank=R"), or -1. */
static int line_rank(const struct train_point *p, int ntasks)
{
	for (int i = 0; i < p->n; i++)
		if (strcmp(p->name[i], "rank") == 0 && p->value[i] >= 0 && p->value[i] < ntasks &&
		    p->value[i] == (int)p->value[i])
			return (int)p->value[i];
	return -1;
}

static void rank_line(struct state *s, struct sstall *t, const struct attempt *a,
		      const struct train_point *p)
{
	int r = line_rank(p, a->ntasks);
	if (r < 0 || p->step < 0)
		return;
	if (!t->ranks) {
		t->nranks = a->ntasks;
		t->ranks = xcalloc((size_t)t->nranks, sizeof(*t->ranks));
	}
	struct srank *k = &t->ranks[r];
	int newest = (k->next + RANK_LINES - 1) % RANK_LINES;
	if (k->n && p->step <= k->step[newest])
		return;
	k->step[k->next] = p->step;
	k->at_ms[k->next] = p->at_ms;
	k->next = (k->next + 1) % RANK_LINES;
	if (k->n < RANK_LINES)
		k->n++;
	k->last_mono = s->mono_ms;
}

/* A rank's time a step over its newest lines; 0: not yet known. */
static double rank_step_s(const struct srank *k)
{
	if (k->n < 3)
		return 0;
	int oldest = (k->next + RANK_LINES - k->n) % RANK_LINES;
	int newest = (k->next + RANK_LINES - 1) % RANK_LINES;
	int64_t steps = k->step[newest] - k->step[oldest];
	int64_t ms = k->at_ms[newest] - k->at_ms[oldest];
	return steps > 0 && ms > 0 ? (double)ms / 1000 / (double)steps : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Names the rank slower than STRAGGLER_RATIO times the gang's median at
 * STRAGGLER_CHECKS checks in a row (the slowest, where several are). */
static void check_straggler(struct state *s, struct sjob *j, struct sstall *t, int64_t now)
{
	double *all = xmalloc(sizeof(*all) * (size_t)t->nranks);
	int n = 0;
	for (int r = 0; r < t->nranks; r++) {
		double v = rank_step_s(&t->ranks[r]);
		if (v > 0)
			all[n++] = v;
	}
	if (n < 2) {
		free(all);
		return;
	}
	qsort(all, (size_t)n, sizeof(*all), cmp_double);
	double median = n % 2 ? all[n / 2] : (all[n / 2 - 1] + all[n / 2]) / 2;
	free(all);
	int worst = -1;
	double worst_s = 0;
	for (int r = 0; r < t->nranks; r++) {
		struct srank *k = &t->ranks[r];
		double v = rank_step_s(k);
		k->strikes = v > STRAGGLER_RATIO * median ? k->strikes + 1 : 0;
		if (k->strikes >= STRAGGLER_CHECKS && v > worst_s) {
			worst = r;
			worst_s = v;
		}
	}
	if (worst != t->straggler) {
		if (worst >= 0)
			log_warn("job %lld: rank %d is a straggler: %.2f s a step, the gang's "
				 "median "
				 "%.2f s",
				 (long long)j->job.id, worst, worst_s, median);
		t->straggler_ms = worst >= 0 ? now : 0;
		state_job_dirty(s, j); /* (its record, as clients see it, changed) */
	}
	t->straggler = worst;
	t->straggler_s = worst_s;
	t->median_s = median;
}

/* What is known of j's attempt a, anew when it is of another attempt. */
static struct sstall *fresh(struct sjob *j, const struct attempt *a)
{
	struct sstall *t = j->stall;
	if (!t || t->attempt != a->number) {
		if (!t)
			t = j->stall = xcalloc(1, sizeof(*t));
		free(t->ranks);
		memset(t, 0, sizeof(*t));
		t->attempt = a->number;
		t->step = -1;
		t->straggler = -1;
	}
	return t;
}

void state_stall_line(struct state *s, struct sjob *j, const struct attempt *a,
		      const struct train_point *p)
{
	struct sstall *t = fresh(j, a);
	if (!t->lines) {
		t->lines = true;
		t->read_ms = p->at_ms;
	}
	rank_line(s, t, a, p);
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
		t->kind = STALL_BY_NONE;
		t->why[0] = '\0';
		state_job_dirty(s, j); /* (its record, as clients see it, changed) */
	}
}

/* Device numbers as ranges: "0-3,6". */
static void devs_text(const int *devs, int n, char *out, size_t len)
{
	size_t at = 0;
	out[0] = 0;
	for (int i = 0; i < n && at < len; i++) {
		int k = i;
		while (k + 1 < n && devs[k + 1] == devs[k] + 1)
			k++;
		at += (size_t)(k > i ? snprintf(out + at, len - at, "%s%d-%d", at ? "," : "",
						devs[i], devs[k])
				     : snprintf(out + at, len - at, "%s%d", at ? "," : "",
						devs[i]));
		i = k;
	}
}

/* Whether every accelerator attempt a holds reads idle at its node's
 * newest beat (1), one is busy (0), or one is not known (-1: it holds
 * none, or a node says nothing of one); with the most busy one's
 * utilisation. */
static int gpus_idle(const struct state *s, const struct attempt *a, int *max_pct)
{
	int seen = 0, idle = 1;
	*max_pct = 0;
	for (int k = 0; k < a->nnodes; k++) {
		const struct snode *n = state_node((struct state *)s, a->nodes[k].name);
		for (int d = 0; d < a->nodes[k].ndev; d++) {
			const struct wire_gpu *g =
				n ? state_node_gpu(s, n, a->nodes[k].devs[d]) : NULL;
			if (!g || g->util_pct < 0)
				return -1;
			if (g->util_pct >= STALL_IDLE_PCT)
				idle = 0;
			*max_pct = MAX(*max_pct, g->util_pct);
			seen++;
		}
	}
	return seen ? idle : -1;
}

/* "GPUs 0-7 on gpu03, 0-7 on gpu04 under 5% for 12m (at most 2%)". */
static void idle_text(const struct state *s, const struct attempt *a, const struct sstall *t,
		      char *out, size_t len)
{
	char dur[32];
	tk_format_duration((s->mono_ms - t->idle_mono) / 1000, dur, sizeof(dur));
	size_t at = (size_t)snprintf(out, len, "GPUs ");
	int listed = 0;
	for (int k = 0; k < a->nnodes && at < len; k++) {
		if (!a->nodes[k].ndev)
			continue;
		if (listed == 2) {
			int more = 0;
			for (int m = k; m < a->nnodes; m++)
				more += a->nodes[m].ndev > 0;
			at += (size_t)snprintf(out + at, len - at, " and %d more node(s)", more);
			break;
		}
		char devs[160];
		devs_text(a->nodes[k].devs, a->nodes[k].ndev, devs, sizeof(devs));
		at += (size_t)snprintf(out + at, len - at, "%s%s on %s", listed ? ", " : "", devs,
				       a->nodes[k].name);
		listed++;
	}
	if (at < len)
		snprintf(out + at, len - at, " under %d%% for %s (at most %d%%)", STALL_IDLE_PCT,
			 dur, t->idle_max_pct);
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

static void act(struct state *s, struct sjob *j, struct sstall *t, int64_t win, int64_t now);

/* Found stalled by its accelerators alone. */
static void stalled_gpus(struct state *s, struct sjob *j, const struct attempt *a, struct sstall *t,
			 int64_t win, int64_t now)
{
	idle_text(s, a, t, t->why, sizeof(t->why));
	t->kind = STALL_BY_GPUS;
	act(s, j, t, win, now);
}

static void stalled(struct state *s, struct sjob *j, struct sstall *t, int64_t win, int64_t now)
{
	char quiet[32], med[32] = "";
	tk_format_duration((s->mono_ms - t->line_mono) / 1000, quiet, sizeof(quiet));
	int64_t m = median_gap(t);
	if (m)
		snprintf(med, sizeof(med), "; a line every %.1f s before", (double)m / 1000);
	char step[40] = "", first[MODEL_NAME_MAX + 40] = "";
	if (t->step >= 0)
		snprintf(step, sizeof(step), " (step %lld)", (long long)t->step);
	/* where ranks say theirs: the one that stopped first, and its node */
	const struct attempt *a = job_current_attempt(&j->job);
	int stopped = -1;
	for (int r = 0; r < t->nranks; r++)
		if (t->ranks[r].n &&
		    (stopped < 0 || t->ranks[r].last_mono < t->ranks[stopped].last_mono))
			stopped = r;
	if (stopped >= 0 && a && a->nnodes)
		snprintf(first, sizeof(first), "; rank %d on %s stopped first", stopped,
			 a->nodes[stopped / MAX(j->job.req.tasks_per_node, 1)].name);
	char idle[MODEL_REASON_MAX / 2] = "";
	if (a && t->idle_mono) {
		idle[0] = ';';
		idle[1] = ' ';
		idle_text(s, a, t, idle + 2, sizeof(idle) - 2);
	}
	char why[512]; /* (cut to the record's size) */
	snprintf(why, sizeof(why), "no training line for %s since the last%s%s%s%s", quiet, step,
		 med, first, idle);
	size_t len = MIN(strlen(why), sizeof(t->why) - 1);
	memcpy(t->why, why, len);
	t->why[len] = '\0';
	t->kind = STALL_BY_LINES;
	act(s, j, t, win, now);
}

/* What a stall found does: says so, and the job's on_stall. */
static void act(struct state *s, struct sjob *j, struct sstall *t, int64_t win, int64_t now)
{
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
			if (n->parts[k].node_index != 0 || j->job.state != JOB_RUNNING)
				continue;
			const struct attempt *a = job_current_attempt(&j->job);
			if (!a || a->number != n->parts[k].attempt || a->ended)
				continue;
			struct sstall *t =
				j->stall && j->stall->attempt == a->number ? j->stall : NULL;
			int max_pct, known = gpus_idle(s, a, &max_pct);
			bool idle = known == 1;
			if (!t && known < 0)
				continue; /* nothing known, nothing to judge */
			if (!t)
				t = fresh(j, a);
			if (!idle) {
				t->idle_mono = 0;
			} else if (!t->idle_mono) {
				t->idle_mono = s->mono_ms;
				t->idle_max_pct = max_pct;
			} else {
				t->idle_max_pct = MAX(t->idle_max_pct, max_pct);
			}
			if (t->stalled_ms) {
				/* work on its accelerators again ends a stall they made */
				if (t->kind == STALL_BY_GPUS && !idle) {
					log_info("job %lld: its accelerators work again: no "
						 "longer stalled",
						 (long long)j->job.id);
					t->stalled_ms = 0;
					t->kind = STALL_BY_NONE;
					t->why[0] = '\0';
					state_job_dirty(s, j);
				}
				continue;
			}
			if (t->ranks)
				check_straggler(s, j, t, now);
			int64_t win = window_ms(s, j, t);
			if (t->lines && s->mono_ms - t->line_mono > win) {
				stalled(s, j, t, win, now);
				return; /* (parts may have changed: the next tick goes on) */
			}
			if (t->idle_mono && s->mono_ms - t->idle_mono > win) {
				stalled_gpus(s, j, a, t, win, now);
				return;
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

bool state_job_straggler(const struct sjob *j, int *rank, const char **node)
{
	const struct sstall *t = current(j);
	const struct attempt *a = job_current_attempt(&j->job);
	if (!t || t->straggler < 0 || !a || !a->nnodes)
		return false;
	*rank = t->straggler;
	*node = a->nodes[t->straggler / MAX(j->job.req.tasks_per_node, 1)].name;
	return true;
}

json_t *state_straggler_pack(const struct sjob *j)
{
	int rank;
	const char *node;
	if (!state_job_straggler(j, &rank, &node))
		return NULL;
	const struct sstall *t = j->stall;
	return json_pack("{s:i, s:s, s:f, s:f, s:I}", "rank", rank, "node", node, "step_s",
			 t->straggler_s, "median_s", t->median_s, "since_ms",
			 (json_int_t)t->straggler_ms);
}

bool state_job_stalled(const struct sjob *j)
{
	const struct sstall *t = current(j);
	return t && t->stalled_ms;
}

bool state_job_trains(const struct sjob *j)
{
	return current(j) != NULL; /* lines, or accelerators watched */
}
