/*
 * Checkpoints on the server's side: a tag is committed when every node of
 * the job's current attempt has uploaded its part (TASK_EVENT_CHECKPOINT),
 * in the batch that records it; a report of any other attempt is the fence
 * against a zombie and is refused. A new attempt restores the newest
 * committed tag on every node before its tasks start, and falls back to the
 * one before when a node cannot (TASK_EVENT_RESTORED).
 */
#include "state.h"

#include <string.h>

/* Points the attempt at committed checkpoint c (NULL: none), every node to
 * restore it again. */
static void restore_set(struct state *s, struct sjob *j, struct attempt *a, const struct ckpt *c)
{
	for (int i = 0; i < a->nnodes; i++) {
		a->nodes[i].restore = RESTORE_WAITING;
		a->nodes[i].restore_bytes = a->nodes[i].restore_dur_ms = 0;
	}
	if (!c) {
		a->restore_tag[0] = '\0';
		a->restore_step = 0;
		a->restore_attempt = 0;
		a->restore_go = true;
	} else {
		snprintf(a->restore_tag, sizeof(a->restore_tag), "%s", c->tag);
		a->restore_step = c->step;
		a->restore_attempt = c->attempt;
		a->restore_go = false;
		snprintf(j->job.reason, sizeof(j->job.reason),
			 "restoring checkpoint %s (step %lld)", c->tag, (long long)c->step);
	}
	for (int i = 0; i < a->nnodes; i++) {
		struct snode *n = state_node(s, a->nodes[i].name);
		if (n)
			state_node_work_changed(s, n);
	}
}

void state_restore_plan(struct state *s, struct sjob *j, struct attempt *a)
{
	if (!s->sched.checkpoint_store[0] || j->job.system)
		return;
	/* a checkpoint of as many nodes: each node restores its own rank's
	 * part; an elastic gang's of any number, a node beyond it restoring
	 * node rank 0's (its parts are the whole state: data parallel) */
	const struct ckpt *c = NULL;
	for (int i = j->job.nckpts - 1; i >= 0 && !c; i--)
		if (j->job.ckpts[i].nnodes == a->nnodes || j->job.req.nodes_max)
			c = &j->job.ckpts[i];
	restore_set(s, j, a, c);
	if (!c)
		j->job.reason[0] = '\0';
}

/* Keeps the newest `keep` committed tags. */
static void retain(struct job *job, int64_t keep)
{
	int drop = job->nckpts - (int)MIN(keep, MODEL_MAX_CKPTS);
	if (drop <= 0)
		return;
	for (int i = 0; i < drop; i++)
		ckpt_release(&job->ckpts[i]);
	memmove(job->ckpts, job->ckpts + drop, sizeof(*job->ckpts) * (size_t)(job->nckpts - drop));
	job->nckpts -= drop;
}

static void commit(struct state *s, struct sjob *j, struct attempt *a, int k, int64_t now)
{
	struct job *job = &j->job;
	struct ckpt *c = &a->pend[k];
	c->at_ms = now;
	job->ckpts = xrealloc(job->ckpts, sizeof(*job->ckpts) * (size_t)(job->nckpts + 1));
	job->ckpts[job->nckpts++] = *c; /* the digests move along */
	a->ckpt_ms += c->write_ms;	/* (goodput: training spent saving) */
	log_info("job %lld: checkpoint %s (step %lld) of attempt %d committed, %lld bytes",
		 (long long)job->id, c->tag, (long long)c->step, a->number, (long long)c->bytes);
	/* what waits of older steps is of no more use */
	int kept = 0;
	for (int i = 0; i < a->npend; i++) {
		if (i == k)
			continue;
		if (a->pend[i].step <= job->ckpts[job->nckpts - 1].step)
			ckpt_release(&a->pend[i]);
		else
			a->pend[kept++] = a->pend[i];
	}
	a->npend = kept;
	retain(job, s->sched.checkpoint_keep);
	/* what it would lose, preempted, fell: an earlier level of its class
	 * that the loss bound kept off may take it now */
	if (j->las_level > 0)
		state_want_pass(s);
	/* node rank 0 learns what the store keeps now (and tidies it) */
	struct snode *n0 = state_node(s, a->nodes[0].name);
	if (n0)
		state_node_work_changed(s, n0);
	state_elastic_commit(s, j, a, now);
}

void state_task_checkpoint(struct state *s, const struct task_event *ev, int64_t now)
{
	struct sjob *j = state_job(s, ev->job);
	if (!j || ev->attempt < 1 || ev->attempt > j->job.nattempts)
		return;
	struct attempt *a = &j->job.attempts[ev->attempt - 1];
	int tpn = j->job.req.tasks_per_node;
	/* the newest attempt, running or stopped since (a tag written in the
	 * grace period of a preemption is uploaded after its tasks end); any
	 * other is a zombie */
	bool newest = a == job_current_attempt(&j->job) && !job_state_final(j->job.state);
	if (!newest || ev->rank < 0 || ev->rank >= a->ntasks) {
		log_warn("job %lld: checkpoint %s of attempt %d refused: %s", (long long)ev->job,
			 ev->tag, ev->attempt,
			 newest ? "no such rank" : "not the job's newest attempt");
		return;
	}
	int node = ev->rank / tpn;
	for (int i = 0; i < j->job.nckpts; i++)
		if (strcmp(j->job.ckpts[i].tag, ev->tag) == 0 &&
		    j->job.ckpts[i].attempt == a->number)
			return; /* committed already: a report sent again */
	int k;
	for (k = 0; k < a->npend; k++)
		if (strcmp(a->pend[k].tag, ev->tag) == 0)
			break;
	if (k == a->npend) {
		if (j->job.nckpts && ev->step <= j->job.ckpts[j->job.nckpts - 1].step &&
		    j->job.ckpts[j->job.nckpts - 1].attempt == a->number)
			return; /* older than what this attempt committed */
		if (a->npend == MODEL_MAX_CKPT_PENDING) {
			/* the oldest waiting tag gives way */
			int old = 0;
			for (int i = 1; i < a->npend; i++)
				if (a->pend[i].step < a->pend[old].step)
					old = i;
			ckpt_release(&a->pend[old]);
			a->pend[old] = a->pend[--a->npend];
		}
		a->pend = xrealloc(a->pend, sizeof(*a->pend) * (size_t)(a->npend + 1));
		struct ckpt *c = &a->pend[a->npend++];
		memset(c, 0, sizeof(*c));
		snprintf(c->tag, sizeof(c->tag), "%s", ev->tag);
		c->step = ev->step;
		c->attempt = a->number;
		c->nnodes = a->nnodes;
		c->digests = xcalloc((size_t)a->nnodes + 1, sizeof(*c->digests));
		c->at_ms = now;
		/* DCP marked it on this node alone: the others learn it is complete */
		for (int i = 0; j->job.req.ckpt_marker == CKPT_DCP && i < a->nnodes; i++) {
			struct snode *n = state_node(s, a->nodes[i].name);
			if (n)
				state_node_work_changed(s, n);
		}
	}
	struct ckpt *c = &a->pend[k];
	if (c->digests[node][0])
		return;
	snprintf(c->digests[node], sizeof(c->digests[node]), "%s", ev->digest);
	c->bytes += ev->bytes;
	c->upload_ms = MAX(c->upload_ms, ev->dur_ms);
	c->write_ms = MAX(c->write_ms, ev->write_ms);
	state_job_dirty(s, j);
	/* while a failed gang waits for a just-in-time checkpoint
	 * (--ckpt-signal), a tag newer than its last commit commits on the
	 * parts that came: a node that failed writes none, and one without
	 * its part restores another's (the data-parallel case, where every
	 * node's part is the whole) */
	bool jit = state_jit_waits(s, j) && j->fail_ev->attempt == a->number &&
		   (!j->job.nckpts || c->step > j->job.ckpts[j->job.nckpts - 1].step);
	for (int i = 0; i < c->nnodes && !jit; i++)
		if (!c->digests[i][0])
			return;
	if (jit) {
		int have = 0;
		for (int i = 0; i < c->nnodes; i++)
			have += c->digests[i][0] != '\0';
		log_info("job %lld: checkpoint %s (step %lld) written on the way out, by %d of "
			 "%d nodes",
			 (long long)j->job.id, c->tag, (long long)c->step, have, c->nnodes);
		j->jit_done = true;
	}
	commit(s, j, a, k, now);
}

void state_task_restored(struct state *s, const struct task_event *ev, int64_t now)
{
	struct sjob *j = state_job(s, ev->job);
	if (!j || ev->attempt != j->job.nattempts)
		return;
	struct attempt *a = &j->job.attempts[ev->attempt - 1];
	int tpn = j->job.req.tasks_per_node;
	if (!state_attempt_is_current(j, a) || a->restore_go || ev->rank < 0 ||
	    ev->rank >= a->ntasks || strcmp(ev->tag, a->restore_tag) != 0)
		return; /* late, or of a tag given up already */
	struct attempt_node *an = &a->nodes[ev->rank / tpn];
	if (an->restore != RESTORE_WAITING)
		return;
	state_job_dirty(s, j);
	if (ev->detail[0]) {
		/* every node goes back to the commit before */
		an->restore = RESTORE_FAILED;
		const struct ckpt *prev = NULL;
		for (int i = j->job.nckpts - 1; i >= 0 && !prev; i--)
			if (j->job.ckpts[i].step < a->restore_step &&
			    j->job.ckpts[i].nnodes == a->nnodes)
				prev = &j->job.ckpts[i];
		struct strbuf why;
		strbuf_init(&why);
		strbuf_addf(&why, "restore of %s failed on %s (%.120s); %s%s", ev->tag, an->name,
			    ev->detail, prev ? "restoring " : "starting without a checkpoint",
			    prev ? prev->tag : "");
		log_warn("job %lld: %s", (long long)j->job.id, why.buf);
		restore_set(s, j, a, prev);
		snprintf(j->job.reason, sizeof(j->job.reason), "%.*s", MODEL_REASON_MAX - 1,
			 why.buf);
		strbuf_release(&why);
		if (!prev)
			a->restore_ms = now - a->start_ms;
		return;
	}
	an->restore = RESTORE_DONE;
	an->restore_bytes = ev->bytes;
	an->restore_dur_ms = ev->dur_ms;
	for (int i = 0; i < a->nnodes; i++)
		if (a->nodes[i].restore != RESTORE_DONE)
			return;
	a->restore_go = true;
	a->restore_ms = now - a->start_ms;
	log_info("job %lld attempt %d: checkpoint %s restored on every node in %lld ms",
		 (long long)j->job.id, a->number, a->restore_tag, (long long)a->restore_ms);
	if (strncmp(j->job.reason, "restoring checkpoint", 20) == 0)
		j->job.reason[0] = '\0';
	for (int i = 0; i < a->nnodes; i++) {
		struct snode *n = state_node(s, a->nodes[i].name);
		if (n)
			state_node_work_changed(s, n);
	}
}

int64_t state_job_restore_ms(const struct sjob *j)
{
	for (int x = j->job.nattempts - 1; x >= 0; x--)
		if (j->job.attempts[x].restore_ms)
			return j->job.attempts[x].restore_ms;
	return 0;
}

int64_t state_attempt_commit_ms(const struct sjob *j, const struct attempt *a)
{
	for (int i = j->job.nckpts - 1; i >= 0; i--) {
		const struct ckpt *c = &j->job.ckpts[i];
		if (c->attempt == a->number)
			return MAX(a->start_ms, c->at_ms - c->upload_ms);
		if (c->attempt < a->number)
			break;
	}
	return 0;
}
