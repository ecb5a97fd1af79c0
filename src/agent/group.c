/*
 * The group state machine (group.h says what it keeps and draws it). It
 * decides, from its state and what its parts report, when a group's shim
 * starts, what its tasks' exits are, and when it may be forgotten; it asks
 * its parts (struct group_ops) for everything that touches a process, a
 * file or the server, so that a unit test drives it with fakes.
 *
 * Invariants (checked by assert_group_state at every change):
 *  1. Before STARTING no shim was started here: every exit is unknown.
 *  2. STARTING, RUNNING and STOPPING have an exit unknown; UPLOADING and
 *     RELEASING none.
 *  3. GONE is reached from RELEASING only with every exit acknowledged, the
 *     group no longer listed and nothing of it open; from DETACHED only
 *     when the agent goes (its shim keeps what the server has not heard).
 *  4. A group enters STARTING once: its shim is never started twice.
 */
#include "group.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static const char *const state_names[GROUP_STATE_MAX] = {
	[GROUP_PREPARING] = "PREPARING", [GROUP_PULLING] = "PULLING",
	[GROUP_RESTORING] = "RESTORING", [GROUP_STARTING] = "STARTING",
	[GROUP_RUNNING] = "RUNNING",	 [GROUP_STOPPING] = "STOPPING",
	[GROUP_UPLOADING] = "UPLOADING", [GROUP_RELEASING] = "RELEASING",
	[GROUP_DETACHED] = "DETACHED",	 [GROUP_GONE] = "GONE",
};

const char *group_state_name(enum group_state s)
{
	return (unsigned)s < GROUP_STATE_MAX ? state_names[s] : "?";
}

#define TO(s) (1u << GROUP_##s)

/* allowed[from] has the bit of every state it may go to. */
static const unsigned allowed[GROUP_STATE_MAX] = {
	[GROUP_PREPARING] =
		TO(PULLING) | TO(RESTORING) | TO(STARTING) | TO(RELEASING) | TO(DETACHED),
	[GROUP_PULLING] = TO(RESTORING) | TO(STARTING) | TO(RELEASING) | TO(DETACHED),
	[GROUP_RESTORING] = TO(STARTING) | TO(RELEASING) | TO(DETACHED),
	[GROUP_STARTING] =
		TO(RUNNING) | TO(STOPPING) | TO(UPLOADING) | TO(RELEASING) | TO(DETACHED),
	[GROUP_RUNNING] = TO(STOPPING) | TO(UPLOADING) | TO(RELEASING) | TO(DETACHED),
	[GROUP_STOPPING] = TO(UPLOADING) | TO(RELEASING) | TO(DETACHED),
	[GROUP_UPLOADING] = TO(RELEASING) | TO(DETACHED),
	[GROUP_RELEASING] = TO(GONE) | TO(DETACHED),
	[GROUP_DETACHED] = TO(GONE),
	[GROUP_GONE] = 0,
};

bool group_transition_allowed(enum group_state from, enum group_state to)
{
	return (unsigned)from < GROUP_STATE_MAX && (unsigned)to < GROUP_STATE_MAX &&
	       (allowed[from] & (1u << to));
}

void assert_group_state(const struct taskgroup *g)
{
	assert((unsigned)g->state < GROUP_STATE_MAX);
	assert(g->nrunning >= 0 && g->nrunning <= g->ntasks);
	assert(g->unacked >= 0 && g->open >= 0);
	switch (g->state) {
	case GROUP_PREPARING:
	case GROUP_PULLING:
	case GROUP_RESTORING:
		assert(g->nrunning == g->ntasks && !g->shim.running && !g->shim.released);
		break;
	case GROUP_STARTING:
	case GROUP_RUNNING:
	case GROUP_STOPPING:
		assert(g->nrunning > 0 && !g->shim.released);
		break;
	case GROUP_UPLOADING:
	case GROUP_RELEASING:
		assert(g->nrunning == 0);
		break;
	case GROUP_GONE:
	case GROUP_DETACHED:
	default:
		break;
	}
}

int group_set_state(struct taskgroup *g, enum group_state to)
{
	if (!group_transition_allowed(g->state, to))
		return -EINVAL;
	/* the exits are the server's before the group is forgotten */
	if (to == GROUP_GONE && g->state == GROUP_RELEASING &&
	    (g->nrunning || g->unacked || g->listed || g->open))
		return -EINVAL;
	log_debug("job %lld.%d: %s -> %s", (long long)g->job, g->attempt,
		  group_state_name(g->state), group_state_name(to));
	g->state = to;
	assert_group_state(g);
	return 0;
}

/* A change the machine itself makes: one its table must allow. */
static void set(struct taskgroup *g, enum group_state to)
{
	int r = group_set_state(g, to);
	assert(r == 0);
	(void)r;
}

void group_init(struct taskgroup *g, const struct group_ops *ops, int64_t job, int attempt,
		int node_rank, int tpn, int64_t grace_ms)
{
	g->ops = ops;
	g->job = job;
	g->attempt = attempt;
	snprintf(g->key, sizeof(g->key), "%lld.%d", (long long)job, attempt);
	g->node_rank = node_rank;
	g->tpn = tpn;
	g->grace_ms = grace_ms;
	g->state = GROUP_PREPARING;
	g->listed = true;
	g->ntasks = tpn;
	g->nrunning = tpn;
	g->tasks = xcalloc((size_t)tpn, sizeof(*g->tasks));
	for (int i = 0; i < tpn; i++)
		g->tasks[i].rank = node_rank * tpn + i;
	assert_group_state(g);
}

/* ---- events for the server ------------------------------------------------------------------ */

void group_emit(struct taskgroup *g, struct task_event *ev)
{
	g->unacked++;
	g->ops->emit(g, ev);
}

static void emit_task(struct taskgroup *g, int rank, enum task_event_type type, int code, int sig,
		      enum exit_cause cause, const char *detail, int64_t at_ms)
{
	struct task_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.job = g->job;
	ev.attempt = g->attempt;
	ev.rank = rank;
	ev.type = type;
	ev.at_ms = at_ms;
	ev.exit_code = code;
	ev.signal = sig;
	ev.cause = cause;
	snprintf(ev.detail, sizeof(ev.detail), "%s", detail ? detail : "");
	ev.energy_mj = -1;
	if (type == TASK_EVENT_EXITED) {
		ev.cpu_ms = g->cpu_ms;
		ev.mem_peak_mib = g->mem_peak_mib;
		ev.node_fault = g->node_fault;
		ev.fault_reported = g->fault_reported;
	}
	group_emit(g, &ev);
}

/* Task i's exit, told once. */
static void task_end(struct taskgroup *g, int i, int code, int sig, enum exit_cause cause,
		     const char *detail, int64_t at_ms)
{
	struct gtask *t = &g->tasks[i];
	if (t->exited)
		return;
	t->exited = true;
	g->nrunning--;
	emit_task(g, t->rank, TASK_EVENT_EXITED, code, sig, cause, detail, at_ms);
}

/* Every task whose exit is not known ends now, so. */
static void end_all(struct taskgroup *g, int code, int sig, enum exit_cause cause, const char *why)
{
	for (int i = 0; i < g->ntasks; i++)
		task_end(g, i, code, sig, cause, why, tk_wall_ms());
}

/* ---- moving on ------------------------------------------------------------------------------- */

static void release(struct taskgroup *g)
{
	if (!g->shim.released && g->ops->shim_send(g, &(struct shim_cmd){.type = SHIM_CMD_RELEASE}))
		g->shim.released = true;
}

/* Moves g on as far as what it knows allows; g may be gone after. */
static void settle(struct taskgroup *g)
{
	switch (g->state) {
	case GROUP_STARTING:
	case GROUP_RUNNING:
	case GROUP_STOPPING:
		if (g->nrunning > 0) {
			bool all = true;
			for (int i = 0; i < g->ntasks && all; i++)
				all = g->tasks[i].started_sent || g->tasks[i].exited;
			if (g->state == GROUP_STARTING && all)
				set(g, GROUP_RUNNING);
			return;
		}
		g->ops->tasks_ended(g); /* its CPUs, for the next attempt here */
		if (g->ops->ckpt_draining(g)) {
			set(g, GROUP_UPLOADING);
			return;
		}
		set(g, GROUP_RELEASING);
		break;
	case GROUP_UPLOADING:
		if (g->ops->ckpt_draining(g))
			return;
		set(g, GROUP_RELEASING);
		break;
	case GROUP_RELEASING:
		break;
	default:
		return;
	}
	if (g->unacked || g->listed)
		return;
	release(g);
	if (g->open)
		return;
	set(g, GROUP_GONE);
	g->ops->forget(g, true);
}

/* A group that never started: every exit is known now (queued), its CPUs
 * go back, and it waits for the server. */
static void end_unstarted(struct taskgroup *g, int code, enum exit_cause cause, const char *why)
{
	end_all(g, code, 0, cause, why);
	g->ops->tasks_ended(g);
	set(g, GROUP_RELEASING);
	settle(g);
}

/* Starts the shim: STARTING, or every task failed to launch. */
static void start(struct taskgroup *g)
{
	char why[MODEL_REASON_MAX];
	if (g->ops->shim_start(g, why, sizeof(why)) < 0) {
		log_err("job %lld.%d: %s", (long long)g->job, g->attempt, why);
		g->node_fault = true; /* (the job's own command never ran) */
		end_unstarted(g, 127, EXIT_LAUNCH_FAILED, why);
		return;
	}
	set(g, GROUP_STARTING);
}

void group_prepared(struct taskgroup *g)
{
	assert(g->state == GROUP_PREPARING);
	if (g->img.ref[0]) {
		set(g, GROUP_PULLING);
		g->ops->image_resolve(g);
	} else if (g->ckpt.hold_restore) {
		set(g, GROUP_RESTORING);
	} else {
		start(g);
	}
}

void group_unlaunchable(struct taskgroup *g, int code, const char *why)
{
	assert(g->state == GROUP_PREPARING);
	end_unstarted(g, code, EXIT_LAUNCH_FAILED, why);
}

/* What a status of the shim's says: each task's start and exit, once. */
static void apply(struct taskgroup *g, const struct shim_status *st)
{
	if (st->cpu_ms >= g->cpu_ms) { /* what its cgroup used so far */
		g->cpu_ms = st->cpu_ms;
		g->mem_peak_mib = MAX(g->mem_peak_mib, st->mem_peak_mib);
		g->mem_mib = st->mem_mib;
	}
	for (int k = 0; k < st->ntasks; k++) {
		const struct shim_task_status *s = &st->tasks[k];
		int i = 0;
		while (i < g->ntasks && g->tasks[i].rank != s->rank)
			i++;
		if (i == g->ntasks || g->tasks[i].exited || s->state == SHIM_TASK_WAITING)
			continue;
		struct gtask *t = &g->tasks[i];
		t->pid = s->pid;
		if (!t->started_sent && s->cause != EXIT_LAUNCH_FAILED) {
			t->started_sent = true;
			struct task_event ev = {.job = g->job,
						.attempt = g->attempt,
						.rank = t->rank,
						.type = TASK_EVENT_STARTED,
						.at_ms = s->start_ms,
						.energy_mj = -1,
						.out_from = s->out_from,
						.err_from = s->err_from};
			group_emit(g, &ev);
		}
		if (s->state == SHIM_TASK_EXITED) {
			g->cpu_ms = st->cpu_ms;
			g->mem_peak_mib = st->mem_peak_mib;
			if (s->node_fault && !g->node_fault) {
				/* its device check failed: the node's fault, which it
				 * reports; the job goes on elsewhere */
				g->node_fault = true;
				g->fault_reported = g->ops->node_fault != NULL;
				if (g->ops->node_fault)
					g->ops->node_fault(g, s->detail);
			}
			task_end(g, i, s->exit_code, s->signal, s->cause, s->detail, s->end_ms);
		}
	}
}

void group_adopted(struct taskgroup *g, const struct shim_status *st)
{
	assert(g->state == GROUP_PREPARING);
	set(g, GROUP_STARTING);
	if (st && st->job == g->job && st->attempt == g->attempt)
		apply(g, st);
	settle(g);
}

/* ---- what its parts report --------------------------------------------------------------------
 */

void group_image_pulling(struct taskgroup *g)
{
	if (g->state != GROUP_PULLING)
		return;
	log_info("job %lld.%d: pulling %s", (long long)g->job, g->attempt, g->img.ref);
	emit_task(g, g->tasks[0].rank, TASK_EVENT_PULLING, 0, 0, EXIT_EXITED, NULL, tk_wall_ms());
}

void group_image_ready(struct taskgroup *g)
{
	if (g->state != GROUP_PULLING || g->img.state != IMG_READY)
		return;
	struct task_event ev = {
		.job = g->job,
		.attempt = g->attempt,
		.rank = g->tasks[0].rank,
		.type = TASK_EVENT_IMAGE,
		.at_ms = tk_wall_ms(),
	};
	snprintf(ev.digest, sizeof(ev.digest), "%s", g->img.digest);
	group_emit(g, &ev);
}

void group_image_failed(struct taskgroup *g, const char *why)
{
	if (g->state != GROUP_PULLING)
		return;
	end_unstarted(g, 125, EXIT_LAUNCH_FAILED, why);
}

void group_image_go(struct taskgroup *g, const char *digest)
{
	if (g->state != GROUP_PULLING || g->img.state != IMG_READY)
		return;
	if (strcmp(digest, g->img.digest) != 0) {
		char why[MODEL_REASON_MAX];
		snprintf(why, sizeof(why), "image %.120s here is %.19s, not the gang's %.19s",
			 g->img.ref, g->img.digest, digest);
		group_image_failed(g, why);
		return;
	}
	if (g->ckpt.hold_restore)
		set(g, GROUP_RESTORING);
	else
		start(g);
}

void group_restore_go(struct taskgroup *g)
{
	g->ckpt.hold_restore = false;
	if (g->state == GROUP_RESTORING)
		start(g);
}

void group_ckpt_news(struct taskgroup *g)
{
	settle(g);
}

void group_status(struct taskgroup *g, const struct shim_status *st)
{
	if (st->job != g->job || st->attempt != g->attempt)
		return;
	if (g->state != GROUP_STARTING && g->state != GROUP_RUNNING && g->state != GROUP_STOPPING)
		return; /* every exit is known already */
	apply(g, st);
	settle(g);
}

void group_shim_gone(struct taskgroup *g, const char *why)
{
	if (g->state != GROUP_STARTING && g->state != GROUP_RUNNING && g->state != GROUP_STOPPING)
		return;
	/* what it did not report is lost with it */
	end_all(g, 137, SIGKILL, EXIT_LOST, why);
	settle(g);
}

void group_hold(struct taskgroup *g)
{
	g->open++;
}

void group_unhold(struct taskgroup *g)
{
	assert(g->open > 0);
	g->open--;
	settle(g);
}

/* ---- what the agent says --------------------------------------------------------------------- */

void group_stop(struct taskgroup *g, enum exit_cause cause, const char *detail)
{
	switch (g->state) {
	case GROUP_PREPARING:
	case GROUP_PULLING:
	case GROUP_RESTORING: {
		char why[MODEL_REASON_MAX];
		snprintf(why, sizeof(why), "stopped before it started (waiting for its %s)",
			 g->state == GROUP_PULLING ? "image" : "checkpoint's restore");
		end_unstarted(g, 128 + SIGTERM, cause, why);
		return;
	}
	case GROUP_STARTING:
	case GROUP_RUNNING:
		break;
	default:
		return; /* stopping, or every exit known */
	}
	g->stop_cause = cause;
	snprintf(g->stop_detail, sizeof(g->stop_detail), "%s", detail);
	log_debug("job %lld.%d: stopping (%s%s%s)", (long long)g->job, g->attempt,
		  exit_cause_name(cause), *detail ? ": " : "", detail);
	set(g, GROUP_STOPPING);
	struct shim_cmd c = {.type = SHIM_CMD_STOP, .cause = cause};
	snprintf(c.detail, sizeof(c.detail), "%s", detail);
	g->ops->shim_send(g, &c);
}

void group_set_listed(struct taskgroup *g, bool listed)
{
	g->listed = listed;
	settle(g);
}

void group_acked(struct taskgroup *g, int n)
{
	g->unacked = MAX(0, g->unacked - n);
	settle(g);
}

void group_close(struct taskgroup *g)
{
	if (g->state == GROUP_DETACHED || g->state == GROUP_GONE)
		return;
	if (g->nrunning == 0 && g->unacked == 0) {
		release(g);
		return;
	}
	/* its shim keeps what the next agent must hear */
	set(g, GROUP_DETACHED);
	g->ops->shim_let_go(g);
}

void group_destroy(struct taskgroup *g)
{
	if (g->state != GROUP_DETACHED)
		set(g, GROUP_DETACHED);
	set(g, GROUP_GONE);
	g->ops->forget(g, false);
}

void group_renew(struct taskgroup *g, int64_t until_ms)
{
	if (group_running(g))
		g->ops->shim_send(g,
				  &(struct shim_cmd){.type = SHIM_CMD_RENEW, .until_ms = until_ms});
}

void group_signal_now(struct taskgroup *g, int sig)
{
	if (!sig || g->signalled || !group_running(g) ||
	    (g->state != GROUP_STARTING && g->state != GROUP_RUNNING))
		return;
	/* one not connected is told with the next work answer; the shim
	 * itself signals once, whatever agents say it again */
	if (g->ops->shim_send(g, &(struct shim_cmd){.type = SHIM_CMD_SIGNAL, .signal = sig}))
		g->signalled = true;
}

void group_set_limit(struct taskgroup *g, int64_t limit_s)
{
	if (limit_s < 0 || limit_s * 1000 == g->limit_ms)
		return;
	/* one not connected is told again with the next work answer */
	if (g->ops->shim_send(
		    g, &(struct shim_cmd){.type = SHIM_CMD_LIMIT, .limit_ms = limit_s * 1000}))
		g->limit_ms = limit_s * 1000;
}
