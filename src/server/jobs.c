/*
 * Jobs: submission, the attempts a pass starts, what agents report of their
 * tasks, and how a job ends or goes back to its queue. Every change of a
 * job's state goes through state_job_set_state (state.c), which checks it against
 * the table of allowed changes.
 */
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct sjob *state_job(struct state *s, int64_t id)
{
	if (id < 1 || (size_t)id > s->njobs)
		return NULL;
	return s->jobs[id - 1];
}

/* Finds the class and queue a job names; a name the configuration no longer
 * has falls back to the default (and says so in the log). */
static void job_resolve(struct state *s, struct sjob *j, int64_t now)
{
	struct job_request *r = &j->job.req;
	int c = r->cls ? sched_config_class(&s->sched, r->cls) : -1;
	if (c < 0) {
		c = s->sched.default_class;
		if (r->cls)
			log_warn("job %lld: class \"%s\" is no longer configured; using \"%s\"",
				 (long long)j->job.id, r->cls, s->sched.classes[c].name);
		free(r->cls);
		r->cls = xstrdup(s->sched.classes[c].name);
	}
	j->cls = c;
	if (!r->queue)
		r->queue = xstrdup("default");
	j->queue = state_queue(s, r->queue);
	if (!j->queue)
		j->queue = state_queue_add(s, r->queue, now);
}

void state_request_sched(const struct sched_config *c, const struct job_request *r,
			 struct sched_job *sj)
{
	sj->pools = sched_config_pool_job(c, r, NULL, 0);
	sj->pool = r->pool;
	sched_job_domains(sj, c, r->spread, r->within);
	sj->gpu_mem_mib = r->gpu_mem_mib;
	sj->gpu_tflops = r->gpu_tflops;
	sj->max_switches = r->switches;
	sj->mixed_types = r->mixed_types;
	sj->nodes = r->nodes + r->spares; /* its spares beside it, alike */
	sj->tasks_per_node = r->tasks_per_node;
	sj->gpu_milli = r->gpu_milli;
	sj->cpus_per_task = r->cpus_per_task;
	sj->mem_mib = r->mem_mib;
	sj->ngpu_types = r->ngpu_types;
	sj->gpu_types = (const char *const *)r->gpu_types;
	sj->time_limit_s = r->time_limit_s;
	sj->nnodelist = r->nnodelist;
	sj->nodelist = (const char *const *)r->nodelist;
	sj->constraint = r->constraint;
	sj->tolerate = r->tolerate;
	sj->nexclude = r->nexclude;
	sj->exclude = (const char *const *)r->exclude;
	sj->exclusive = r->exclusive;
	sj->shape = sched_job_shape(sj);
}

/* The scheduler's view of the job's request. */
static void job_sync(const struct state *s, struct sjob *j)
{
	j->sj.id = j->job.id;
	j->sj.cls = j->cls;
	j->sj.submit_ms = j->job.submit_ms;
	state_request_sched(&s->sched, &j->job.req, &j->sj);
}

void state_job_attach(struct state *s, struct sjob *j, int64_t now)
{
	j->sj.shape_id = -1;
	job_resolve(s, j, now);
	job_sync(s, j);
}

struct sjob *state_job_add(struct state *s, struct job *job, int64_t now)
{
	struct sjob *j = xcalloc(1, sizeof(*j));
	j->job = *job;
	state_job_attach(s, j, now);
	state_slots_reserve(s, (size_t)job->id);
	s->jobs[job->id - 1] = j;
	/* an element not settled keeps its array's first element held: it
	 * counts the elements that run (an array's first never leaves) */
	struct sjob *first = NULL;
	if (j->job.array_job == j->job.id)
		first = j;
	else if (j->job.array_job && !state_job_settled_ms(j))
		first = state_job_get(s, j->job.array_job);
	if (first && (j->job.state == JOB_STARTING || j->job.state == JOB_RUNNING))
		first->array_active++;
	return j;
}

/* A new job from req (taken), PENDING; its array fields and whether it is
 * held from tmpl (NULL: none, not held). */
static struct sjob *job_new(struct state *s, struct job_request *req, const char *owner,
			    const char *run_as, bool system, int64_t now, const struct job *tmpl)
{
	struct job job;
	memset(&job, 0, sizeof(job));
	if (tmpl) {
		job.array_job = tmpl->array_job;
		job.array_index = tmpl->array_index;
		job.array_cap = tmpl->array_cap;
		job.array_count = tmpl->array_count;
		job.held = tmpl->held;
	}
	job.id = tmpl && tmpl->id ? tmpl->id : (int64_t)s->njobs + 1;
	snprintf(job.owner, sizeof(job.owner), "%s", owner);
	snprintf(job.run_as, sizeof(job.run_as), "%s", run_as);
	job.state = JOB_PENDING;
	job.submit_ms = now;
	job.exit_code = -1;
	job.system = system;
	job.req = *req;
	memset(req, 0, sizeof(*req));
	struct sjob *j = state_job_add(s, &job, now);
	if (!system)
		state_job_enqueue(s, j);
	state_job_dirty(s, j);
	if (system)
		state_want_pass(s);
	else
		state_job_arrived(s, j);
	assert_job_state(j);
	return j;
}

struct sjob *state_submit(struct state *s, struct job_request *req, const char *owner,
			  const char *run_as, bool held, int64_t now)
{
	return job_new(s, req, owner, run_as, false, now, &(struct job){.held = held});
}

struct sjob *state_submit_array(struct state *s, struct job_request *req, const char *owner,
				const char *run_as, bool held, int64_t now, int64_t id,
				int64_t first, int index, int cap, int count)
{
	struct job a = {.id = id,
			.array_job = first,
			.array_index = index,
			.array_cap = cap,
			.array_count = count,
			.held = held};
	return job_new(s, req, owner, run_as, false, now, &a);
}

struct sjob *state_submit_system(struct state *s, struct job_request *req, const char *owner,
				 int64_t now)
{
	return job_new(s, req, owner, "", true, now, NULL);
}

void state_job_finish(struct state *s, struct sjob *j, enum job_state st, int exit_code,
		      const char *reason, int64_t now)
{
	/* callers end only jobs that have not ended */
	assert(job_state_final(st) && state_job_transition_allowed(j->job.state, st));
	j->job.exit_code = exit_code; /* before the gate: the job's waits are answered there */
	state_job_set_state(s, j, st, reason, now);
}

void state_job_requeue(struct state *s, struct sjob *j, const char *reason, int64_t now)
{
	int r = state_job_set_state(s, j, JOB_PENDING, reason, now);
	assert(r == 0); /* only an active job goes back to its queue */
	(void)r;
	log_debug("job %lld requeued: %s", (long long)j->job.id, reason);
}

int state_cancel(struct state *s, struct sjob *j, int64_t now, struct tk_error *err)
{
	if (job_state_final(j->job.state))
		return tk_errorf(err, -EALREADY, "job %lld already ended: %s", (long long)j->job.id,
				 job_state_name(j->job.state));
	state_job_finish(s, j, JOB_CANCELLED, j->job.exit_code, "cancelled by user", now);
	return 0;
}

/* Attempt a ended for cause, said as reason. */
static void attempt_end(struct attempt *a, enum attempt_end cause, const char *reason)
{
	a->end = cause;
	snprintf(a->reason, sizeof(a->reason), "%s", reason);
}

/* What ended the job's current attempt when the job itself ended. */
static enum attempt_end end_of_job(enum job_state st)
{
	switch (st) {
	case JOB_COMPLETED:
		return ATTEMPT_END_COMPLETED;
	case JOB_TIMEOUT:
		return ATTEMPT_END_TIMEOUT;
	case JOB_CANCELLED:
		return ATTEMPT_END_CANCELLED;
	default:
		return ATTEMPT_END_FAILED;
	}
}

bool state_task_done(const struct task_status *t)
{
	return t->state == TASK_EXITED || t->state == TASK_LOST;
}

bool state_attempt_is_current(const struct sjob *j, const struct attempt *a)
{
	return (j->job.state == JOB_STARTING || j->job.state == JOB_RUNNING) &&
	       a == job_current_attempt(&j->job);
}

void state_attempt_settle(struct state *s, struct sjob *j, struct attempt *a, int node_index,
			  int64_t at_ms)
{
	int tpn = j->job.req.tasks_per_node;
	bool node_done = true;
	for (int t = node_index * tpn; t < (node_index + 1) * tpn; t++)
		if (!state_task_done(&a->tasks[t]))
			node_done = false;
	if (node_done) {
		struct snode *n = state_node(s, a->nodes[node_index].name);
		if (n)
			state_part_remove(s, n, j, a->number);
	}
	for (int t = 0; t < a->ntasks; t++)
		if (!state_task_done(&a->tasks[t]))
			return;
	if (!a->ended) {
		a->ended = true;
		a->end_ms = at_ms;
	}
}

/* Looks up attempt `number` of job `id`; NULL when unknown. */
static struct attempt *find_attempt(struct state *s, int64_t id, int number, struct sjob **ret)
{
	struct sjob *j = state_job(s, id);
	if (!j || number < 1 || number > j->job.nattempts)
		return NULL;
	*ret = j;
	return &j->job.attempts[number - 1];
}

void state_task_started(struct state *s, const struct task_event *ev, int64_t now)
{
	struct sjob *j;
	struct attempt *a = find_attempt(s, ev->job, ev->attempt, &j);
	int rank = ev->rank;
	if (!a || rank < 0 || rank >= a->ntasks || a->tasks[rank].state != TASK_WAITING)
		return;
	a->tasks[rank].state = TASK_RUNNING;
	a->tasks[rank].start_ms = ev->at_ms;
	a->tasks[rank].out_from = ev->out_from;
	a->tasks[rank].err_from = ev->err_from;
	if (j->job.state == JOB_STARTING && state_attempt_is_current(j, a)) {
		bool all = true;
		for (int t = 0; t < a->ntasks; t++)
			if (a->tasks[t].state == TASK_WAITING)
				all = false;
		if (all)
			state_job_set_state(s, j, JOB_RUNNING, NULL, now);
	}
	state_job_dirty(s, j);
}

/* The current attempt's task `rank` exited with a code that is not 0: the
 * job fails, or goes back to its queue while it has restarts left. */
static void task_failed(struct state *s, struct sjob *j, struct attempt *a,
			const struct task_event *ev, int64_t now)
{
	char reason[MODEL_REASON_MAX];
	const char *node = a->nodes[ev->rank / j->job.req.tasks_per_node].name;
	struct strbuf sb;
	strbuf_init(&sb);
	if (ev->signal)
		strbuf_addf(&sb, "task %d on %s killed by signal %d", ev->rank, node, ev->signal);
	else
		strbuf_addf(&sb, "task %d on %s exited with code %d", ev->rank, node,
			    ev->exit_code);
	if (ev->detail[0])
		strbuf_addf(&sb, ": %s", ev->detail);
	snprintf(reason, sizeof(reason), "%s", sb.buf);
	strbuf_release(&sb);
	attempt_end(a, ATTEMPT_END_FAILED, reason);
	if (j->job.failures < j->job.req.requeue) {
		j->job.failures++;
		state_inplace_begin(s, j, a, NULL);
		size_t len = strlen(reason);
		snprintf(reason + len, sizeof(reason) - len, "; requeued (restart %d of %d)",
			 j->job.failures, j->job.req.requeue);
		state_job_requeue(s, j, reason, now);
	} else {
		state_job_finish(s, j, JOB_FAILED, ev->exit_code, reason, now);
	}
}

void state_failure_wait(struct state *s, struct sjob *j, const struct task_event *ev)
{
	if (j->fail_ev)
		return; /* the first failure is the one judged */
	const struct attempt *a = job_current_attempt(&j->job);
	j->fail_ev = xmalloc(sizeof(*j->fail_ev));
	*j->fail_ev = *ev;
	j->fail_seen = xcalloc((size_t)a->nnodes + 1, sizeof(*j->fail_seen));
	for (int k = 0; k < a->nnodes; k++) {
		const struct snode *n = state_node(s, a->nodes[k].name);
		j->fail_seen[k] = n ? n->last_seen_ms : 0;
	}
	j->fail_check_mono = 0;
	/* --ckpt-signal: the gang's other tasks get the signal and the time
	 * to write a checkpoint from what they hold (just-in-time) */
	bool others = false;
	for (int t = 0; t < a->ntasks; t++)
		others |= t != ev->rank && a->tasks[t].state == TASK_RUNNING;
	j->jit_done = false;
	j->jit_until = j->job.req.ckpt_signal && s->sched.checkpoint_store[0] && others
			       ? s->mono_ms + j->job.req.ckpt_signal_s * 1000
			       : 0;
	if (j->jit_until)
		log_info("job %lld: task %d failed; signal %d to the others, up to %llds for a "
			 "checkpoint",
			 (long long)j->job.id, ev->rank, j->job.req.ckpt_signal,
			 (long long)j->job.req.ckpt_signal_s);
	xgrow(&s->failing, &s->failing_alloc, (size_t)s->nfailing + 1, sizeof(*s->failing));
	s->failing[s->nfailing++] = j;
	log_debug("job %lld: task %d failed; judged once every node of attempt %d is heard from",
		  (long long)j->job.id, ev->rank, ev->attempt);
	/* where it may go again, its nodes are held for it as the gang stops
	 * (given back if the judgement fails it) */
	if (j->job.failures < j->job.req.requeue || j->node_losses < s->cfg.max_node_requeues)
		state_inplace_begin(s, j, a, NULL);
	/* the gang stops at once, whatever the judgement (after its
	 * checkpoint, with --ckpt-signal: its nodes learn to signal it) */
	state_attempt_bump_nodes(s, job_current_attempt(&j->job));
}

bool state_jit_waits(const struct state *s, const struct sjob *j)
{
	return j->fail_ev && j->jit_until && !j->jit_done && s->mono_ms < j->jit_until;
}

void state_check_failures(struct state *s, int64_t now, int64_t mono)
{
	for (int i = 0; i < s->nfailing; i++) {
		struct sjob *j = s->failing[i];
		struct attempt *a = job_current_attempt(&j->job);
		bool judge = false, drop = !a || !state_attempt_is_current(j, a) ||
					   a->number != j->fail_ev->attempt;
		if (!drop) {
			/* a node not heard since is dead (it goes DOWN, and the
			 * job with it) or slow: wait, at most the node timeout */
			if (!j->fail_check_mono)
				j->fail_check_mono = mono;
			judge = true;
			for (int k = 0; k < a->nnodes && judge; k++) {
				struct snode *n = state_node(s, a->nodes[k].name);
				judge = !n || n->last_seen_ms > j->fail_seen[k];
			}
			judge |= mono - j->fail_check_mono > s->cfg.node_timeout_ms;
			if (j->jit_until && !state_jit_waits(s, j)) {
				/* the checkpoint's time is over: the gang stops now */
				log_info("job %lld: %s", (long long)j->job.id,
					 j->jit_done ? "its checkpoint committed; stopping the gang"
						     : "no checkpoint committed in time; stopping "
						       "the gang");
				j->jit_until = 0;
				state_attempt_bump_nodes(s, a);
			}
			judge &= !state_jit_waits(s, j);
		}
		if (!drop && !judge)
			continue;
		if (judge) {
			task_failed(s, j, a, j->fail_ev, now);
			if (j->jit_done && j->job.nckpts) {
				/* what the next attempt restores */
				const struct ckpt *c = &j->job.ckpts[j->job.nckpts - 1];
				size_t len = strlen(a->reason);
				snprintf(a->reason + len, sizeof(a->reason) - len,
					 "; checkpoint %s (step %lld) written on the way out",
					 c->tag, (long long)c->step);
			}
			state_job_dirty(s, j);
		}
		free(j->fail_ev);
		free(j->fail_seen);
		j->fail_ev = NULL;
		j->fail_seen = NULL;
		j->jit_until = 0;
		j->jit_done = false;
		s->failing[i--] = s->failing[--s->nfailing];
	}
}

void state_job_lost(struct state *s, struct sjob *j, struct attempt *a, const char *node,
		    const char *why, int64_t fail_ms, int64_t now)
{
	/* the node's last word (a beat, up to a tenth of the node timeout
	 * old) is before its death; its peers' tasks, whose connections to it
	 * broke, fail just after it: a failure they reported within two beats
	 * of that word is when it died (the training lines its agent had not
	 * yet sent ran to then). A later one is a peer that hung until its own
	 * timeout: the last word is the nearer. */
	fail_ms = fail_ms > 0 && fail_ms <= now ? fail_ms : now;
	bool peers_saw = a->fail_ms > fail_ms && a->fail_ms - fail_ms <= s->cfg.node_timeout_ms / 5;
	if (!peers_saw)
		a->fail_ms = a->fail_ms ? MIN(a->fail_ms, fail_ms) : fail_ms;
	char reason[MODEL_REASON_MAX];
	snprintf(reason, sizeof(reason), "node %s lost: %s", node, why);
	attempt_end(a, ATTEMPT_END_NODE_LOST, reason);
	size_t len = strlen(reason);
	bool ran = false;
	for (int t = 0; t < a->ntasks; t++)
		ran |= a->tasks[t].start_ms != 0;
	if (!ran && !j->job.system) {
		/* nothing of it ran: going again is no rerun, and costs nothing */
		snprintf(reason + len, sizeof(reason) - len, "; requeued (it had not started)");
		state_inplace_begin(s, j, a, node);
		state_job_requeue(s, j, reason, now);
	} else if (j->node_losses < s->cfg.max_node_requeues && !j->job.system) {
		j->node_losses++;
		snprintf(reason + len, sizeof(reason) - len, "; requeued");
		state_inplace_begin(s, j, a, node);
		state_job_requeue(s, j, reason, now);
	} else {
		snprintf(reason + len, sizeof(reason) - len, "; not requeued after %d lost nodes",
			 j->node_losses);
		state_job_finish(s, j, JOB_FAILED, -1, reason, now);
	}
}

void state_task_exited(struct state *s, const struct task_event *ev, int64_t now)
{
	struct sjob *j;
	struct attempt *a = find_attempt(s, ev->job, ev->attempt, &j);
	int rank = ev->rank;
	if (!a || rank < 0 || rank >= a->ntasks || state_task_done(&a->tasks[rank]))
		return;
	struct task_status *t = &a->tasks[rank];
	if (t->state == TASK_WAITING)
		t->start_ms = ev->at_ms;
	t->state = TASK_EXITED;
	t->exit_code = ev->exit_code;
	t->signal = ev->signal;
	t->end_ms = ev->at_ms;
	struct attempt_node *an = &a->nodes[rank / j->job.req.tasks_per_node];
	an->cpu_ms = MAX(an->cpu_ms, ev->cpu_ms);
	an->mem_peak_mib = MAX(an->mem_peak_mib, ev->mem_peak_mib);
	an->energy_mj = MAX(an->energy_mj, ev->energy_mj);
	an->gpu_busy_ms = MAX(an->gpu_busy_ms, ev->gpu_busy_ms);
	if (state_attempt_is_current(j, a)) {
		const char *node = a->nodes[rank / j->job.req.tasks_per_node].name;
		struct snode *sn = state_node(s, node);
		if (ev->cause == EXIT_LOST || ev->node_fault) {
			/* it ended with its node's agent (stopped, or its lease ran
			 * out), or its node could not start it: the job goes on
			 * elsewhere, as for a lost node; a failure of the node's */
			if (sn)
				state_node_event(s, sn,
						 ev->node_fault ? NODE_EV_LAUNCH_FAILED
								: NODE_EV_TASKS_LOST,
						 j->job.id, a->number, ev->detail, now);
			state_job_lost(s, j, a, node,
				       ev->detail[0] ? ev->detail : "its agent stopped", ev->at_ms,
				       now);
			/* the node's fault, as its next beat will report it: it
			 * is drained now, before the job's next attempt is
			 * placed, whichever of the two requests came first */
			if (sn && ev->node_fault && ev->fault_reported) {
				/* (the agent's words, cut where its are) */
				char full[WIRE_FAULT_MAX + MODEL_REASON_MAX], fault[WIRE_FAULT_MAX];
				snprintf(full, sizeof(full), "job %lld attempt %d: %s",
					 (long long)ev->job, ev->attempt, ev->detail);
				size_t l = strnlen(full, sizeof(fault) - 1);
				memcpy(fault, full, l);
				fault[l] = '\0';
				state_node_fault_reported(s, sn, fault, now);
			}
		} else if (ev->cause == EXIT_TIMEOUT) {
			char reason[MODEL_REASON_MAX];
			snprintf(reason, sizeof(reason), "time limit of %llds reached",
				 (long long)j->job.req.time_limit_s);
			state_job_finish(s, j, JOB_TIMEOUT, ev->exit_code, reason, now);
		} else if (ev->exit_code != 0) {
			if (!a->fail_ms) /* the first task to fail: what goodput counts from */
				a->fail_ms = ev->at_ms;
			/* a gang waits to see whose failure it is; one that
			 * checkpoints on the way out (--ckpt-signal), also
			 * for its other tasks to write it */
			if ((a->nnodes > 1 || (j->job.req.ckpt_signal && a->ntasks > 1)) &&
			    !j->job.system)
				state_failure_wait(s, j, ev);
			else
				task_failed(s, j, a, ev, now);
		} else {
			bool all_ok = true;
			for (int k = 0; k < a->ntasks; k++)
				if (a->tasks[k].state != TASK_EXITED || a->tasks[k].exit_code != 0)
					all_ok = false;
			if (all_ok) {
				attempt_end(a, ATTEMPT_END_COMPLETED,
					    "every task exited with code 0");
				state_job_finish(s, j, JOB_COMPLETED, 0,
						 "every task exited with code 0", now);
			}
		}
	}
	if (a->end == ATTEMPT_END_NONE && job_state_final(j->job.state)) {
		a->end = end_of_job(j->job.state);
		if (!a->reason[0])
			snprintf(a->reason, sizeof(a->reason), "%s", j->job.reason);
	}
	state_attempt_settle(s, j, a, rank / j->job.req.tasks_per_node, ev->at_ms);
	state_job_dirty(s, j);
}

void state_task_image(struct state *s, const struct task_event *ev, int64_t now)
{
	struct sjob *j;
	struct attempt *a = find_attempt(s, ev->job, ev->attempt, &j);
	int tpn = j ? j->job.req.tasks_per_node : 1;
	if (!a || !j->job.req.image || !state_attempt_is_current(j, a) || ev->rank < 0 ||
	    ev->rank >= a->ntasks || a->digest[0])
		return;
	struct attempt_node *an = &a->nodes[ev->rank / tpn];
	if (ev->type == TASK_EVENT_PULLING) {
		snprintf(j->job.reason, sizeof(j->job.reason), "pulling %s on %s", j->job.req.image,
			 an->name);
		state_job_dirty(s, j);
		return;
	}
	snprintf(an->digest, sizeof(an->digest), "%s", ev->digest);
	state_job_dirty(s, j);
	bool same = true;
	for (int i = 0; i < a->nnodes; i++) {
		if (!a->nodes[i].digest[0]) {
			snprintf(j->job.reason, sizeof(j->job.reason), "pulling %s on %s",
				 j->job.req.image, a->nodes[i].name);
			return; /* not every node has it yet */
		}
		same &= strcmp(a->nodes[i].digest, a->nodes[0].digest) == 0;
	}
	if (same || j->job.system) {
		/* a validation run goes on: its system layer finds the odd node */
		snprintf(a->digest, sizeof(a->digest), "%s", a->nodes[0].digest);
		j->job.reason[0] = '\0';
		for (int i = 0; i < a->nnodes; i++) {
			struct snode *n = state_node(s, a->nodes[i].name);
			if (n)
				state_node_work_changed(s, n);
		}
		return;
	}
	/* one tag, two images: the gang would not run one program */
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addf(&sb, "image %s is not the same on every node:", j->job.req.image);
	for (int i = 0; i < a->nnodes; i++)
		strbuf_addf(&sb, "%s %s %.19s", i ? "," : "", a->nodes[i].name, a->nodes[i].digest);
	char reason[MODEL_REASON_MAX];
	snprintf(reason, sizeof(reason), "%s", sb.buf);
	strbuf_release(&sb);
	attempt_end(a, ATTEMPT_END_FAILED, reason);
	state_job_finish(s, j, JOB_FAILED, -1, reason, now);
}

void state_attempt_node_set(struct attempt_node *an, const struct snode *n,
			    const struct sched_assign *as)
{
	memset(an, 0, sizeof(*an));
	snprintf(an->name, sizeof(an->name), "%s", n->rec.inv.name);
	an->ndev = as->ndev;
	memcpy(an->devs, as->devs, sizeof(int) * (size_t)as->ndev);
	an->milli = as->milli;
	an->energy_mj = -1;
	const struct node_inventory *inv = &n->rec.inv;
	for (int d = 0; d < inv->naccel && as->ndev > 0; d++)
		if (inv->accel[d].index == as->devs[0])
			snprintf(an->model, sizeof(an->model), "%s", inv->accel[d].model);
}

void state_apply_start(struct state *s, struct sjob *j, const struct sched_start *st, int nn,
		       struct snode *const *nodes, int64_t now)
{
	struct job *job = &j->job;
	/* a pass places a job's spares after its own nodes */
	if (nn < 0)
		nn = !job->system && job->req.spares > 0 && st->nnodes > job->req.nodes
			     ? job->req.nodes
			     : st->nnodes;
	assert(nn >= 1 && nn <= st->nnodes);
	job->attempts =
		xrealloc(job->attempts, sizeof(*job->attempts) * (size_t)(job->nattempts + 1));
	struct attempt *a = &job->attempts[job->nattempts++];
	memset(a, 0, sizeof(*a));
	a->number = job->nattempts;
	a->start_ms = now;
	a->nnodes = nn;
	a->nodes = xcalloc((size_t)nn, sizeof(*a->nodes));
	a->ntasks = nn * job->req.tasks_per_node;
	a->tasks = xcalloc((size_t)a->ntasks, sizeof(*a->tasks));
	for (int i = 0; i < nn; i++)
		state_attempt_node_set(&a->nodes[i], nodes[st->nodes[i].node], &st->nodes[i]);
	struct snode *head = nodes[st->nodes[0].node];
	snprintf(a->master_addr, sizeof(a->master_addr), "%s",
		 head->rec.inv.addr[0] ? head->rec.inv.addr : "127.0.0.1");
	a->master_port = state_node_port_find(s, head); /* state_part_add marks it taken */
	int r = state_job_set_state(s, j, JOB_STARTING, "", now);
	assert(r == 0); /* a pass and a validation run start only waiting jobs */
	(void)r;
	j->last_ckpt_ms = 0;
	for (int i = 0; i < nn; i++)
		state_part_add(s, nodes[st->nodes[i].node], j, a, i);
	for (int i = nn; i < st->nnodes; i++)
		state_spare_take(s, j, nodes[st->nodes[i].node], &st->nodes[i], now);
	state_restore_plan(s, j, a);
	log_debug("job %lld attempt %d starts on %s%s", (long long)job->id, a->number,
		  a->nodes[0].name, a->nnodes > 1 ? " and others" : "");
}

void state_preempt(struct state *s, struct sjob *victim, struct sjob *for_job, int64_t now)
{
	if (victim->job.state != JOB_STARTING && victim->job.state != JOB_RUNNING)
		return;
	struct attempt *a = job_current_attempt(&victim->job);
	victim->held_for = for_job->job.id;
	victim->held_attempt = a->number;
	victim->preemptions++;
	char reason[MODEL_REASON_MAX];
	snprintf(reason, sizeof(reason), "preempted by job %lld (class %s)",
		 (long long)for_job->job.id, s->classes[for_job->cls].spec.name);
	attempt_end(a, ATTEMPT_END_PREEMPTED, reason);
	log_info("job %lld %s", (long long)victim->job.id, reason);
	state_job_requeue(s, victim, reason, now);
}

void state_preempt_for_spare(struct state *s, struct sjob *b, const char *reason, int64_t now)
{
	struct attempt *a = job_current_attempt(&b->job);
	b->preemptions++;
	attempt_end(a, ATTEMPT_END_PREEMPTED, reason);
	log_info("job %lld %s", (long long)b->job.id, reason);
	state_job_requeue(s, b, reason, now);
}

void state_task_ready(struct state *s, const struct task_event *ev, int64_t now)
{
	struct sjob *j = state_job(s, ev->job);
	if (!j || ev->attempt != j->job.nattempts || !j->job.req.probe)
		return;
	struct attempt *a = &j->job.attempts[ev->attempt - 1];
	if (!state_attempt_is_current(j, a) || a->ended || ev->rank != 0)
		return;
	struct attempt_node *an = &a->nodes[0];
	bool ready = ev->type == TASK_EVENT_READY;
	if (an->ready == ready && an->ready_ms)
		return;
	an->ready = ready;
	an->ready_ms = ev->at_ms ? ev->at_ms : now;
	if (ready)
		j->job.reason[0] = '\0';
	else
		snprintf(j->job.reason, sizeof(j->job.reason), "out of rotation: %.200s",
			 ev->detail[0] ? ev->detail : "its probe failed");
	log_info("job %lld attempt %d on %s: %s", (long long)j->job.id, a->number, an->name,
		 ready ? "its probe passes: in rotation" : j->job.reason);
	state_job_dirty(s, j);
	s->services_dirty = true;
}

void state_train_metrics(struct state *s, struct snode *n, const struct wire_train *t)
{
	for (int i = 0; i < n->nparts; i++) {
		struct sjob *j = n->parts[i].job;
		if (j->job.id != t->job || n->parts[i].attempt != t->attempt)
			continue;
		struct attempt *a = &j->job.attempts[t->attempt - 1];
		if (!state_attempt_is_current(j, a) || a->ended)
			return;
		if (!a->train)
			a->train = xcalloc(1, sizeof(*a->train));
		/* a line sent again (the agent restarted, or its beat's answer
		 * was lost) is taken once */
		if (t->offset && t->offset <= a->train->offset)
			return;
		train_metrics_add(a->train, &t->point);
		if (t->offset)
			a->train->offset = t->offset;
		state_stall_line(s, j, a, &t->point);
		state_job_dirty(s, j);
		return;
	}
}

void state_nccl_seen(struct state *s, struct snode *n, const struct wire_nccl *w)
{
	struct sjob *j = state_job(s, w->job);
	if (!j || w->attempt < 1 || w->attempt > j->job.nattempts)
		return;
	struct attempt *a = &j->job.attempts[w->attempt - 1];
	struct attempt_node *an = NULL;
	for (int i = 0; i < a->nnodes && !an; i++)
		if (strcmp(a->nodes[i].name, n->rec.inv.name) == 0)
			an = &a->nodes[i];
	if (!an || memcmp(an->nccl, w->connections, sizeof(an->nccl)) == 0)
		return;
	memcpy(an->nccl, w->connections, sizeof(an->nccl));
	snprintf(an->nccl_network, sizeof(an->nccl_network), "%s", w->network);
	snprintf(an->nccl_line, sizeof(an->nccl_line), "%s", w->line);
	const char *fabric = node_fabric_of(&n->rec.inv);
	bool fallback = w->connections[NCCL_TR_SOCKET] > 0 && fabric;
	if (fallback && !an->nccl_fallback)
		log_warn("job %lld attempt %d: NCCL on node %s went between nodes over sockets on "
			 "%d of %d connections though the node has RDMA (fabric=%s): \"%s\"",
			 (long long)j->job.id, a->number, n->rec.inv.name,
			 w->connections[NCCL_TR_SOCKET],
			 w->connections[NCCL_TR_SOCKET] + w->connections[NCCL_TR_NET], fabric,
			 w->line);
	an->nccl_fallback = fallback;
	state_job_dirty(s, j);
}

/* ---- what users change ------------------------------------------------------------- */

bool state_job_is_array_head(const struct sjob *j)
{
	return j->job.array_job == j->job.id && j->job.array_count > 1;
}

struct sjob *state_array_element(struct state *s, const struct sjob *first, int index)
{
	if (!first->job.array_job || first->job.array_job != first->job.id)
		return NULL;
	int64_t id = first->job.id;
	/* the elements held first; then those out of memory, read back */
	for (int pass = 0; pass < 2; pass++)
		for (int k = 0; k < first->job.array_count; k++) {
			struct sjob *e = pass ? state_job_get(s, id + k) : state_job(s, id + k);
			if (e && e->job.array_job == id && e->job.array_index == index)
				return e;
		}
	return NULL;
}

/* "41" or, for an element, "41_3". */
static void job_name_of(const struct sjob *j, char *buf, size_t n)
{
	if (j->job.array_job)
		snprintf(buf, n, "%lld_%d", (long long)j->job.array_job, j->job.array_index);
	else
		snprintf(buf, n, "%lld", (long long)j->job.id);
}

/* One job against one dependency: 1 met, 0 not yet, -1 never. */
static int dep_one(const struct sjob *e, enum dep_when when)
{
	bool final = job_state_final(e->job.state);
	bool ok = e->job.state == JOB_COMPLETED;
	switch (when) {
	case DEP_START:
		return e->job.nattempts > 0 ? 1 : final ? -1 : 0;
	case DEP_OK:
		return ok ? 1 : final ? -1 : 0;
	case DEP_FAIL:
		return ok ? -1 : final ? 1 : 0;
	case DEP_ANY:
	default:
		return final ? 1 : 0;
	}
}

int state_job_deps_state(struct state *s, const struct sjob *j, char *buf, size_t n)
{
	static const char *const verbs[DEP_WHEN_MAX] = {"to start", "to complete", "to fail",
							"to end"};
	const struct job_request *r = &j->job.req;
	for (int i = 0; i < r->nafter; i++) {
		const struct job_dep *d = &r->after[i];
		/* one out of memory is read back (and held a while) */
		struct sjob *t = state_job_get(s, d->job);
		if (!t)
			continue; /* checked at submission; or removed long after it ended */
		int count = state_job_is_array_head(t) ? t->job.array_count : 1;
		for (int k = 0; k < count; k++) {
			struct sjob *e = k ? state_job_get(s, t->job.id + k) : t;
			if (!e || (k && e->job.array_job != t->job.id))
				continue;
			int st = dep_one(e, d->when);
			if (st == 1)
				continue;
			char name[48];
			job_name_of(e, name, sizeof(name));
			if (st < 0)
				snprintf(buf, n, "dependency never satisfied (job %s %s)", name,
					 job_state_name(e->job.state));
			else
				snprintf(buf, n, "waiting for job %s %s", name, verbs[d->when]);
			return st;
		}
	}
	return 1;
}

int state_hold(struct state *s, struct sjob *j, bool hold, struct tk_error *err)
{
	if (j->job.state != JOB_PENDING)
		return tk_errorf(err, -EBUSY, "job %lld is %s: only a waiting job is %s",
				 (long long)j->job.id, job_state_name(j->job.state),
				 hold ? "held" : "released");
	if (j->job.held == hold)
		return 0;
	j->job.held = hold;
	state_job_refile(s, j);
	state_job_dirty(s, j);
	state_want_pass(s);
	return 0;
}

int state_array_throttle(struct state *s, struct sjob *j, int cap, struct tk_error *err)
{
	if (job_state_final(j->job.state))
		return tk_errorf(err, -EBUSY, "job %lld is %s", (long long)j->job.id,
				 job_state_name(j->job.state));
	if (j->job.array_cap == cap)
		return 0;
	j->job.array_cap = cap;
	/* its request says the array as submitted, with the new cap: what a
	 * server that loads it makes its missing elements with */
	char *a = j->job.req.array;
	if (a) {
		size_t keep = strcspn(a, "%");
		struct strbuf sb;
		strbuf_init(&sb);
		strbuf_add(&sb, a, keep);
		if (cap)
			strbuf_addf(&sb, "%%%d", cap);
		free(a);
		j->job.req.array = strbuf_detach(&sb);
	}
	state_job_refile(s, j); /* a capped job is not plain to the pass */
	state_job_dirty(s, j);
	state_want_pass(s);
	return 0;
}

void state_job_resize(struct state *s, struct sjob *j, int grow, int64_t now)
{
	struct attempt *a = job_current_attempt(&j->job);
	char why[MODEL_REASON_MAX];
	snprintf(why, sizeof(why),
		 "resized: its elastic gang grows from %d nodes at its checkpoint, as nodes are "
		 "free",
		 a->nnodes);
	attempt_end(a, ATTEMPT_END_RESIZED, why);
	state_inplace_begin(s, j, a, NULL);
	if (j->inplace)
		j->inplace->grow = grow;
	log_info("job %lld %s", (long long)j->job.id, why);
	state_job_requeue(s, j, why, now);
}

int state_requeue(struct state *s, struct sjob *j, const char *who, int64_t now,
		  struct tk_error *err)
{
	if (j->job.state != JOB_STARTING && j->job.state != JOB_RUNNING)
		return tk_errorf(err, -EBUSY, "job %lld is %s: only a running job is requeued",
				 (long long)j->job.id, job_state_name(j->job.state));
	char why[MODEL_REASON_MAX];
	snprintf(why, sizeof(why), "requeued by %s", who);
	struct attempt *a = job_current_attempt(&j->job);
	if (a)
		attempt_end(a, ATTEMPT_END_REQUEUED, why);
	log_info("job %lld %s", (long long)j->job.id, why);
	state_job_requeue(s, j, why, now);
	return 0;
}

void state_job_set_limit(struct state *s, struct sjob *j, int64_t limit_s)
{
	j->job.req.time_limit_s = limit_s;
	j->sj.time_limit_s = limit_s;
	state_job_refile(s, j); /* a waiting job's entry keeps its limit for the pass */
	state_job_dirty(s, j);
	/* its agents see the new limit in their next work answer */
	state_attempt_bump_nodes(s, job_current_attempt(&j->job));
	state_want_pass(s); /* the reservations read running jobs' ends */
}

void state_job_set_request(struct state *s, struct sjob *j, struct job_request *req, int64_t now)
{
	assert(j->job.state == JOB_PENDING);
	state_job_dequeue(s, j);
	job_request_release(&j->job.req);
	j->job.req = *req;
	memset(req, 0, sizeof(*req));
	j->req_bytes = 0;
	job_resolve(s, j, now);
	job_sync(s, j);
	state_job_enqueue(s, j);
	state_job_dirty(s, j);
	state_want_pass(s);
}

void state_checkpoint_seen(struct state *s, const struct wire_checkpoint *c)
{
	struct sjob *j = state_job(s, c->job);
	const struct attempt *a = j ? job_current_attempt(&j->job) : NULL;
	if (a && a->number == c->attempt)
		j->last_ckpt_ms = MAX(j->last_ckpt_ms, c->at_ms);
}
