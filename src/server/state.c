/*
 * The server's state machine: jobs, their attempts, and nodes with what is
 * allocated on them. Every change here marks what it touched dirty (so it is
 * written before anyone hears of it) and, where scheduling could change, asks
 * for a pass.
 *
 * A job's attempt holds resources on each of its nodes as a `part`. The part
 * is released when every task of the attempt on that node has exited or been
 * lost, not when the job ends: a cancelled job's processes still hold their
 * devices until the agent reports them gone, so nothing is given twice.
 *
 * What an agent should run is derived, never queued: the parts on its node
 * whose job is STARTING or RUNNING in that same attempt. When that set
 * changes the node's work_gen advances and its long-polls are answered.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const live_names[NODE_LIVE_MAX] = {
	[NODE_UNKNOWN] = "UNKNOWN",
	[NODE_UP] = "UP",
	[NODE_DOWN] = "DOWN",
};

const char *node_live_name(enum node_live l)
{
	return l < NODE_LIVE_MAX ? live_names[l] : "?";
}

/* Checks the invariants of a job's state against its attempts. */
static void assert_job_state(const struct sjob *j)
{
	const struct attempt *a = job_current_attempt(&j->job);
	switch (j->job.state) {
	case JOB_PENDING:
		assert(j->pending);
		break;
	case JOB_STARTING:
	case JOB_RUNNING:
		assert(!j->pending);
		assert(a && !a->ended);
		break;
	default:
		assert(!j->pending);
		assert(job_state_final(j->job.state));
	}
}

struct sjob *state_job(struct server *s, int64_t id)
{
	if (id < 1 || (size_t)id > s->njobs)
		return NULL;
	return s->jobs[id - 1];
}

struct snode *state_node(struct server *s, const char *name)
{
	return tk_map_get(&s->node_by_name, name);
}

/* ---- the pending queue, in submission order ----------------------------------- */

static void pending_insert(struct server *s, struct sjob *j)
{
	struct sclass *c = &s->classes[j->cls];
	/* requeued jobs keep their place: walk back from the tail to their id */
	struct sjob *after = c->pend_tail;
	while (after && after->job.id > j->job.id)
		after = after->pend_prev;
	j->pend_prev = after;
	j->pend_next = after ? after->pend_next : c->pend_head;
	if (j->pend_next)
		j->pend_next->pend_prev = j;
	else
		c->pend_tail = j;
	if (after)
		after->pend_next = j;
	else
		c->pend_head = j;
	j->pending = true;
	/* its request filed for the scheduler while it waits */
	if (!s->sched_shapes)
		s->sched_shapes = sched_shapes_new();
	j->sj.shape_id = sched_shapes_add(s->sched_shapes, &j->sj);
	if (j->sj.shape_id < 0)
		log_err("job %lld: the scheduler cannot take its request; it waits until cancelled",
			(long long)j->job.id);
	c->npending++;
	s->npending++;
	j->queue->npending++;
}

static void pending_remove(struct server *s, struct sjob *j)
{
	if (!j->pending)
		return;
	struct sclass *c = &s->classes[j->cls];
	if (j->pend_prev)
		j->pend_prev->pend_next = j->pend_next;
	else
		c->pend_head = j->pend_next;
	if (j->pend_next)
		j->pend_next->pend_prev = j->pend_prev;
	else
		c->pend_tail = j->pend_prev;
	j->pend_prev = j->pend_next = NULL;
	j->pending = false;
	sched_shapes_drop(s->sched_shapes, j->sj.shape_id);
	j->sj.shape_id = -1;
	c->npending--;
	s->npending--;
	j->queue->npending--;
}

/* ---- queues --------------------------------------------------------------------------- */

struct squeue *state_queue(struct server *s, const char *name)
{
	return tk_map_get(&s->queue_by_name, name);
}

static struct squeue *queue_insert(struct server *s, const struct queue_spec *spec)
{
	struct squeue *q = xcalloc(1, sizeof(*q));
	q->spec = *spec;
	q->index = s->nqueues;
	xgrow(&s->queues, &s->queues_alloc, (size_t)s->nqueues + 1, sizeof(*s->queues));
	s->queues[s->nqueues++] = q;
	tk_map_put(&s->queue_by_name, q->spec.name, q);
	return q;
}

struct squeue *state_queue_add(struct server *s, const char *name)
{
	struct queue_spec spec;
	memset(&spec, 0, sizeof(spec));
	snprintf(spec.name, sizeof(spec.name), "%s", name);
	spec.quota_milli = spec.borrow_milli = -1;
	spec.weight = 1;
	spec.usage_at_ms = server_now_ms(s);
	struct squeue *q = queue_insert(s, &spec);
	server_queue_dirty(s, q);
	return q;
}

#define QUEUE_WRITE_EVERY_MS 60000

void state_queues_age(struct server *s)
{
	int64_t now = server_now_ms(s);
	double hl = (double)s->sched.half_life_s;
	for (int i = 0; i < s->nqueues; i++) {
		struct squeue *q = s->queues[i];
		double dt = (double)(now - q->spec.usage_at_ms) / 1000.0;
		if (dt <= 0)
			continue;
		q->spec.usage = sched_usage_age(q->spec.usage, q->use_milli, dt, hl);
		q->spec.usage_at_ms = now;
		if (now - q->written_ms >= QUEUE_WRITE_EVERY_MS) {
			q->written_ms = now;
			server_queue_dirty(s, q);
		}
	}
}

json_t *state_queue_pack(struct server *s, const struct squeue *q)
{
	json_t *o = queue_spec_pack(&q->spec);
	json_object_del(o, "usage");
	json_object_del(o, "usage_at_ms");
	double recent = sched_usage_recent(q->spec.usage, (double)s->sched.half_life_s);
	int64_t borrowed =
		q->spec.quota_milli >= 0 ? MAX(0, q->use_milli - q->spec.quota_milli) : 0;
	json_object_set_new(o, "in_use", json_real(q->use_milli / (double)MODEL_MILLI));
	json_object_set_new(o, "borrowed", json_real(borrowed / (double)MODEL_MILLI));
	json_object_set_new(o, "recent", json_real(recent / MODEL_MILLI));
	json_object_set_new(o, "pending", json_integer(q->npending));
	json_object_set_new(o, "running", json_integer(q->nrunning));
	return o;
}

/* ---- nodes: resources and work -------------------------------------------------- */

static void node_bump(struct server *s, struct snode *n)
{
	n->work_gen++;
	if (!n->wake_queued) {
		n->wake_queued = true;
		n->wake_next = s->wake_nodes;
		s->wake_nodes = n;
	}
}

static void node_sync_devs(struct snode *n)
{
	for (int d = 0; d < n->rec.inv.naccel; d++) {
		n->sdev[d].model = n->rec.inv.accel[d].model;
		n->sdev[d].nvlink_domain = n->rec.inv.accel[d].nvlink_domain;
		n->sdev[d].mem_mib = n->rec.inv.accel[d].mem_mib;
		n->sdev[d].tflops = n->rec.inv.accel[d].tflops;
		n->sdev[d].free_milli = MAX(0, MODEL_MILLI - n->dev_used[d]);
	}
}

/* A MASTER_PORT no other attempt led from n uses. */
static int port_find(const struct snode *n)
{
	for (int i = 0; i < SERVER_PORT_COUNT; i++)
		if (!(n->ports[i / 8] & (1u << (i % 8))))
			return SERVER_PORT_BASE + i;
	log_warn("node %s: all %d master ports in use; reusing %d", n->rec.inv.name,
		 SERVER_PORT_COUNT, SERVER_PORT_BASE);
	return SERVER_PORT_BASE;
}

static void port_free(struct snode *n, int port)
{
	int i = port - SERVER_PORT_BASE;
	if (i >= 0 && i < SERVER_PORT_COUNT)
		n->ports[i / 8] &= (uint8_t) ~(1u << (i % 8));
}

static void port_mark(struct snode *n, int port)
{
	int i = port - SERVER_PORT_BASE;
	if (i >= 0 && i < SERVER_PORT_COUNT)
		n->ports[i / 8] |= (uint8_t)(1u << (i % 8));
}

/* Takes the resources of attempt a's node_index-th node on n. */
static void part_add(struct server *s, struct snode *n, struct sjob *j, const struct attempt *a,
		     int node_index)
{
	const struct attempt_node *an = &a->nodes[node_index];
	xgrow(&n->parts, &n->parts_alloc, (size_t)n->nparts + 1, sizeof(*n->parts));
	n->parts[n->nparts++] = (struct part){j, a->number, node_index, 0};
	n->cpus_used += j->job.req.tasks_per_node * j->job.req.cpus_per_task;
	n->mem_used += j->job.req.mem_mib;
	for (int d = 0; d < an->ndev; d++)
		if (an->devs[d] < MODEL_MAX_ACCELS)
			n->dev_used[an->devs[d]] += an->milli;
	j->queue->use_milli += (int64_t)an->ndev * an->milli;
	if (node_index == 0) {
		port_mark(n, a->master_port);
		j->queue->nrunning++;
	}
	node_sync_devs(n);
	node_bump(s, n);
	n->parts[n->nparts - 1].gen_added = n->work_gen;
}

/* Gives back what part_add took. */
static void part_remove(struct server *s, struct snode *n, struct sjob *j, int attempt)
{
	for (int i = 0; i < n->nparts; i++) {
		struct part *p = &n->parts[i];
		if (p->job != j || p->attempt != attempt)
			continue;
		const struct attempt *a = &j->job.attempts[attempt - 1];
		const struct attempt_node *an = &a->nodes[p->node_index];
		n->cpus_used -= j->job.req.tasks_per_node * j->job.req.cpus_per_task;
		n->mem_used -= j->job.req.mem_mib;
		for (int d = 0; d < an->ndev; d++)
			if (an->devs[d] < MODEL_MAX_ACCELS)
				n->dev_used[an->devs[d]] -= an->milli;
		j->queue->use_milli -= (int64_t)an->ndev * an->milli;
		if (p->node_index == 0) {
			port_free(n, a->master_port);
			j->queue->nrunning--;
		}
		n->parts[i] = n->parts[--n->nparts];
		node_sync_devs(n);
		node_bump(s, n);
		server_want_pass(s);
		return;
	}
}

/* Every node holding a part of attempt a learns its work changed. */
static void attempt_bump_nodes(struct server *s, const struct attempt *a)
{
	for (int i = 0; i < a->nnodes; i++) {
		struct snode *n = state_node(s, a->nodes[i].name);
		if (n)
			node_bump(s, n);
	}
}

/* ---- jobs ----------------------------------------------------------------------- */

/* Finds the class and queue a job names; a name the configuration no longer
 * has falls back to the default (and says so in the log). */
static void sjob_resolve(struct server *s, struct sjob *j)
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
		j->queue = state_queue_add(s, r->queue);
}

static void sjob_sync(struct sjob *j)
{
	const struct job_request *r = &j->job.req;
	j->sj.id = j->job.id;
	j->sj.cls = j->cls;
	j->sj.gpu_mem_mib = r->gpu_mem_mib;
	j->sj.gpu_tflops = r->gpu_tflops;
	j->sj.max_switches = r->switches;
	j->sj.mixed_types = r->mixed_types;
	j->sj.nodes = r->nodes;
	j->sj.tasks_per_node = r->tasks_per_node;
	j->sj.gpu_milli = r->gpu_milli;
	j->sj.cpus_per_task = r->cpus_per_task;
	j->sj.mem_mib = r->mem_mib;
	j->sj.ngpu_types = r->ngpu_types;
	j->sj.gpu_types = (const char *const *)r->gpu_types;
	j->sj.time_limit_s = r->time_limit_s;
	j->sj.submit_ms = j->job.submit_ms;
	j->sj.shape = sched_job_shape(&j->sj);
}

static struct sjob *sjob_add(struct server *s, struct job *job)
{
	struct sjob *j = xcalloc(1, sizeof(*j));
	j->job = *job;
	sjob_resolve(s, j);
	sjob_sync(j);
	if ((size_t)job->id > s->jobs_alloc)
		xgrow(&s->jobs, &s->jobs_alloc, (size_t)job->id, sizeof(*s->jobs));
	for (size_t i = s->njobs; i < (size_t)job->id; i++)
		s->jobs[i] = NULL;
	if ((size_t)job->id > s->njobs)
		s->njobs = (size_t)job->id;
	s->jobs[job->id - 1] = j;
	return j;
}

/* A new job from req (taken), PENDING, not yet in any queue. */
static struct sjob *job_new(struct server *s, struct job_request *req, const char *owner,
			    bool system)
{
	struct job job;
	memset(&job, 0, sizeof(job));
	job.id = (int64_t)s->njobs + 1;
	snprintf(job.owner, sizeof(job.owner), "%s", owner);
	job.state = JOB_PENDING;
	job.submit_ms = server_now_ms(s);
	job.exit_code = -1;
	job.system = system;
	job.req = *req;
	memset(req, 0, sizeof(*req));
	struct sjob *j = sjob_add(s, &job);
	server_job_dirty(s, j);
	server_want_pass(s);
	return j;
}

struct sjob *state_submit(struct server *s, struct job_request *req, const char *owner)
{
	struct sjob *j = job_new(s, req, owner, false);
	pending_insert(s, j);
	assert_job_state(j);
	return j;
}

struct sjob *state_submit_system(struct server *s, struct job_request *req, const char *owner)
{
	return job_new(s, req, owner, true);
}

void state_wake_job_waiters(struct server *s, struct sjob *j)
{
	while (j->waiters.head) {
		struct request *r = j->waiters.head;
		reply_json(r, 200, state_job_pack(s, j));
	}
}

/* Ends a job in a final state. Its tasks, if any run, are stopped by their
 * agents, which see the attempt leave their work. */
void state_job_finish(struct server *s, struct sjob *j, enum job_state st, int exit_code,
		      const char *reason)
{
	assert(job_state_final(st));
	bool was_active = j->job.state == JOB_STARTING || j->job.state == JOB_RUNNING;
	pending_remove(s, j);
	j->job.state = st;
	j->job.exit_code = exit_code;
	j->job.end_ms = server_now_ms(s);
	snprintf(j->job.reason, sizeof(j->job.reason), "%s", reason);
	if (was_active)
		attempt_bump_nodes(s, job_current_attempt(&j->job));
	server_job_dirty(s, j);
	assert_job_state(j);
	state_wake_job_waiters(s, j);
	log_debug("job %lld %s: %s", (long long)j->job.id, job_state_name(st), reason);
	if (j->valid)
		valid_job_ended(s, j);
}

/* Sends an active job back to the queue for another attempt. */
static void job_requeue(struct server *s, struct sjob *j, const char *reason)
{
	attempt_bump_nodes(s, job_current_attempt(&j->job));
	j->job.state = JOB_PENDING;
	snprintf(j->job.reason, sizeof(j->job.reason), "%s", reason);
	pending_insert(s, j);
	server_job_dirty(s, j);
	server_want_pass(s);
	assert_job_state(j);
	log_debug("job %lld requeued: %s", (long long)j->job.id, reason);
}

int state_cancel(struct server *s, struct sjob *j, struct tk_error *err)
{
	if (job_state_final(j->job.state))
		return tk_errorf(err, -EALREADY, "job %lld already ended: %s", (long long)j->job.id,
				 job_state_name(j->job.state));
	state_job_finish(s, j, JOB_CANCELLED, j->job.exit_code, "cancelled by user");
	return 0;
}

static bool task_done(const struct task_status *t)
{
	return t->state == TASK_EXITED || t->state == TASK_LOST;
}

/* After a task ended: frees the node's part when its tasks are all done, and
 * ends the attempt when every task is. */
static void attempt_settle(struct server *s, struct sjob *j, struct attempt *a, int node_index,
			   int64_t at_ms)
{
	int tpn = j->job.req.tasks_per_node;
	bool node_done = true;
	for (int t = node_index * tpn; t < (node_index + 1) * tpn; t++)
		if (!task_done(&a->tasks[t]))
			node_done = false;
	if (node_done) {
		struct snode *n = state_node(s, a->nodes[node_index].name);
		if (n)
			part_remove(s, n, j, a->number);
	}
	for (int t = 0; t < a->ntasks; t++)
		if (!task_done(&a->tasks[t]))
			return;
	if (!a->ended) {
		a->ended = true;
		a->end_ms = at_ms;
	}
}

/* Looks up attempt `number` of job `id`; NULL when unknown. */
static struct attempt *find_attempt(struct server *s, int64_t id, int number, struct sjob **ret)
{
	struct sjob *j = state_job(s, id);
	if (!j || number < 1 || number > j->job.nattempts)
		return NULL;
	*ret = j;
	return &j->job.attempts[number - 1];
}

static bool attempt_is_current(const struct sjob *j, const struct attempt *a)
{
	return (j->job.state == JOB_STARTING || j->job.state == JOB_RUNNING) &&
	       a == job_current_attempt(&j->job);
}

void state_task_started(struct server *s, int64_t id, int number, int rank, int64_t at_ms)
{
	struct sjob *j;
	struct attempt *a = find_attempt(s, id, number, &j);
	if (!a || rank < 0 || rank >= a->ntasks || a->tasks[rank].state != TASK_WAITING)
		return;
	a->tasks[rank].state = TASK_RUNNING;
	a->tasks[rank].start_ms = at_ms;
	if (j->job.state == JOB_STARTING && attempt_is_current(j, a)) {
		bool all = true;
		for (int t = 0; t < a->ntasks; t++)
			if (a->tasks[t].state == TASK_WAITING)
				all = false;
		if (all)
			j->job.state = JOB_RUNNING;
	}
	server_job_dirty(s, j);
}

void state_task_exited(struct server *s, const struct task_event *ev)
{
	struct sjob *j;
	int rank = ev->rank, exit_code = ev->exit_code, signal = ev->signal;
	int64_t at_ms = ev->at_ms;
	const char *why = ev->detail;
	struct attempt *a = find_attempt(s, ev->job, ev->attempt, &j);
	if (!a || rank < 0 || rank >= a->ntasks || task_done(&a->tasks[rank]))
		return;
	struct task_status *t = &a->tasks[rank];
	if (t->state == TASK_WAITING)
		t->start_ms = at_ms;
	t->state = TASK_EXITED;
	t->exit_code = exit_code;
	t->signal = signal;
	t->end_ms = at_ms;
	int node_index = rank / j->job.req.tasks_per_node;
	if (attempt_is_current(j, a)) {
		char reason[MODEL_REASON_MAX];
		const char *node = a->nodes[node_index].name;
		if (ev->cause == EXIT_TIMEOUT) {
			snprintf(reason, sizeof(reason), "time limit of %llds reached",
				 (long long)j->job.req.time_limit_s);
			state_job_finish(s, j, JOB_TIMEOUT, exit_code, reason);
		} else if (exit_code != 0) {
			struct strbuf sb;
			strbuf_init(&sb);
			if (signal)
				strbuf_addf(&sb, "task %d on %s killed by signal %d", rank, node,
					    signal);
			else
				strbuf_addf(&sb, "task %d on %s exited with code %d", rank, node,
					    exit_code);
			if (*why)
				strbuf_addf(&sb, ": %s", why);
			snprintf(reason, sizeof(reason), "%s", sb.buf);
			strbuf_release(&sb);
			snprintf(a->reason, sizeof(a->reason), "%s", reason);
			if (j->job.failures < j->job.req.requeue) {
				j->job.failures++;
				size_t len = strlen(reason);
				snprintf(reason + len, sizeof(reason) - len,
					 "; requeued (restart %d of %d)", j->job.failures,
					 j->job.req.requeue);
				job_requeue(s, j, reason);
			} else {
				state_job_finish(s, j, JOB_FAILED, exit_code, reason);
			}
		} else {
			bool all_ok = true;
			for (int k = 0; k < a->ntasks; k++)
				if (a->tasks[k].state != TASK_EXITED || a->tasks[k].exit_code != 0)
					all_ok = false;
			if (all_ok) {
				snprintf(a->reason, sizeof(a->reason),
					 "every task exited with code 0");
				state_job_finish(s, j, JOB_COMPLETED, 0,
						 "every task exited with code 0");
			}
		}
	}
	if (!a->reason[0] && job_state_final(j->job.state))
		snprintf(a->reason, sizeof(a->reason), "%s", j->job.reason);
	attempt_settle(s, j, a, node_index, at_ms);
	server_job_dirty(s, j);
}

/* Marks every task of every part on n lost, requeueing or failing the jobs
 * whose current attempt that ends. */
static void lose_parts(struct server *s, struct snode *n, const char *why)
{
	int64_t now = server_now_ms(s);
	while (n->nparts > 0) {
		struct part p = n->parts[n->nparts - 1];
		struct sjob *j = p.job;
		struct attempt *a = &j->job.attempts[p.attempt - 1];
		int tpn = j->job.req.tasks_per_node;
		for (int t = p.node_index * tpn; t < (p.node_index + 1) * tpn; t++) {
			struct task_status *ts = &a->tasks[t];
			if (task_done(ts))
				continue;
			ts->state = TASK_LOST;
			ts->end_ms = now;
		}
		if (attempt_is_current(j, a)) {
			char reason[MODEL_REASON_MAX];
			snprintf(reason, sizeof(reason), "node %s lost: %s", n->rec.inv.name, why);
			snprintf(a->reason, sizeof(a->reason), "%s", reason);
			if (j->node_losses < s->cfg.max_node_requeues && !j->job.system) {
				j->node_losses++;
				size_t len = strlen(reason);
				snprintf(reason + len, sizeof(reason) - len, "; requeued");
				job_requeue(s, j, reason);
			} else {
				size_t len = strlen(reason);
				snprintf(reason + len, sizeof(reason) - len,
					 "; not requeued after %d lost nodes", j->node_losses);
				state_job_finish(s, j, JOB_FAILED, -1, reason);
			}
		}
		attempt_settle(s, j, a, p.node_index, now);
		/* attempt_settle removed the part; make sure, or stop looping */
		if (n->nparts > 0 && n->parts[n->nparts - 1].job == j &&
		    n->parts[n->nparts - 1].attempt == p.attempt)
			part_remove(s, n, j, p.attempt);
		server_job_dirty(s, j);
	}
}

void state_node_lost(struct server *s, struct snode *n, const char *why)
{
	if (n->live != NODE_DOWN)
		log_warn("node %s is DOWN: %s", n->rec.inv.name, why);
	n->live = NODE_DOWN;
	lose_parts(s, n, why);
	server_want_pass(s);
}

void state_node_seen(struct server *s, struct snode *n)
{
	n->last_seen_ms = tk_mono_ms();
	if (n->live != NODE_UP) {
		log_info("node %s is UP%s", n->rec.inv.name, n->live == NODE_DOWN ? " again" : "");
		n->live = NODE_UP;
		server_want_pass(s);
	}
}

struct snode *state_register(struct server *s, const struct node_inventory *inv,
			     const char *agent_id)
{
	struct snode *n = state_node(s, inv->name);
	if (!n) {
		n = xcalloc(1, sizeof(*n));
		xgrow(&s->nodes, &s->nodes_alloc, (size_t)s->nnodes + 1, sizeof(*s->nodes));
		n->index = s->nnodes;
		s->nodes[s->nnodes++] = n;
		n->rec.inv = *inv;
		tk_map_put(&s->node_by_name, n->rec.inv.name, n);
		log_info("node %s joined: %d CPUs, %lld MiB, %d accelerators", inv->name, inv->cpus,
			 (long long)inv->mem_mib, inv->naccel);
	} else {
		if (strcmp(n->rec.agent_id, agent_id) != 0 && n->nparts > 0)
			lose_parts(s, n, "its agent restarted and no longer runs them");
		/* the name is the map's key: it does not change */
		n->rec.inv = *inv;
		if (n->live != NODE_UP)
			log_info("node %s is UP", inv->name);
	}
	snprintf(n->rec.agent_id, sizeof(n->rec.agent_id), "%s", agent_id);
	n->rec.registered_ms = server_now_ms(s);
	n->live = NODE_UP;
	n->last_seen_ms = tk_mono_ms();
	node_sync_devs(n);
	node_bump(s, n);
	server_node_dirty(s, n);
	server_want_pass(s);
	valid_node_registered(s, n);
	return n;
}

void state_drain(struct server *s, struct snode *n, const char *reason)
{
	n->rec.drained = true;
	snprintf(n->rec.drain_reason, sizeof(n->rec.drain_reason), "%s", reason);
	server_node_dirty(s, n);
	log_info("node %s drained: %s", n->rec.inv.name, reason);
}

void state_resume(struct server *s, struct snode *n)
{
	n->rec.drained = false;
	n->rec.drain_reason[0] = '\0';
	server_node_dirty(s, n);
	server_want_pass(s);
	log_info("node %s resumed", n->rec.inv.name);
}

/* ---- scheduling ----------------------------------------------------------------- */

void state_apply_start(struct server *s, struct sjob *j, const struct sched_start *st,
		       struct snode *const *nodes)
{
	struct job *job = &j->job;
	job->attempts =
		xrealloc(job->attempts, sizeof(*job->attempts) * (size_t)(job->nattempts + 1));
	struct attempt *a = &job->attempts[job->nattempts++];
	memset(a, 0, sizeof(*a));
	a->number = job->nattempts;
	a->start_ms = server_now_ms(s);
	a->nnodes = st->nnodes;
	a->nodes = xcalloc((size_t)st->nnodes, sizeof(*a->nodes));
	a->ntasks = st->nnodes * job->req.tasks_per_node;
	a->tasks = xcalloc((size_t)a->ntasks, sizeof(*a->tasks));
	for (int i = 0; i < st->nnodes; i++) {
		const struct sched_assign *as = &st->nodes[i];
		struct attempt_node *an = &a->nodes[i];
		snprintf(an->name, sizeof(an->name), "%s", nodes[as->node]->rec.inv.name);
		an->ndev = as->ndev;
		memcpy(an->devs, as->devs, sizeof(int) * (size_t)as->ndev);
		an->milli = as->milli;
	}
	struct snode *head = nodes[st->nodes[0].node];
	snprintf(a->master_addr, sizeof(a->master_addr), "%s",
		 head->rec.inv.addr[0] ? head->rec.inv.addr : "127.0.0.1");
	a->master_port = port_find(head); /* part_add marks it taken */
	pending_remove(s, j);
	job->state = JOB_STARTING;
	job->reason[0] = '\0';
	j->last_ckpt_ms = 0;
	for (int i = 0; i < st->nnodes; i++)
		part_add(s, nodes[st->nodes[i].node], j, a, i);
	server_job_dirty(s, j);
	assert_job_state(j);
	log_debug("job %lld attempt %d starts on %s%s", (long long)job->id, a->number,
		  a->nodes[0].name, a->nnodes > 1 ? " and others" : "");
}

/* Sends a running job back to the queue so that `for` can start: its tasks get
 * SIGTERM and their grace period, and its devices go to `for` when they exit. */
void state_preempt(struct server *s, struct sjob *victim, struct sjob *for_job)
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
	snprintf(a->reason, sizeof(a->reason), "%s", reason);
	log_info("job %lld %s", (long long)victim->job.id, reason);
	job_requeue(s, victim, reason);
}

void state_schedule(struct server *s)
{
	int64_t t0 = tk_mono_us();
	uint64_t mark = ++s->pass_no;
	valid_tick(s);
	/* nodes, in server order: node i is s->nodes[i] */
	struct sched_node *snodes = xcalloc((size_t)s->nnodes + 1, sizeof(*snodes));
	for (int i = 0; i < s->nnodes; i++) {
		struct snode *n = s->nodes[i];
		struct sched_node *sn = &snodes[i];
		n->index = i;
		sn->name = n->rec.inv.name;
		sn->topology = n->rec.inv.topology;
		sn->schedulable = n->live == NODE_UP && !n->rec.drained && valid_node_open(s, n);
		sn->cpus_total = n->rec.inv.cpus;
		sn->cpus_free = n->rec.inv.cpus - n->cpus_used;
		sn->mem_total_mib = n->rec.inv.mem_mib;
		sn->mem_free_mib = n->rec.inv.mem_mib - n->mem_used;
		sn->ndev = n->rec.inv.naccel;
		sn->devs = n->sdev;
	}
	/* classes and queues */
	struct sched_class classes[MODEL_MAX_CLASSES];
	for (int c = 0; c < s->sched.nclasses; c++) {
		const struct class_spec *cs = &s->classes[c].spec;
		classes[c] = (struct sched_class){cs->name, cs->priority, cs->may_preempt,
						  cs->preemptible};
	}
	struct sched_queue *queues = xcalloc((size_t)s->nqueues + 1, sizeof(*queues));
	for (int q = 0; q < s->nqueues; q++) {
		const struct queue_spec *qs = &s->queues[q]->spec;
		queues[q] = (struct sched_queue){
			qs->name, qs->quota_milli, qs->borrow_milli, qs->weight,
			sched_usage_recent(qs->usage, (double)s->sched.half_life_s)};
	}
	/* pending jobs: classes by priority, each in submission order */
	const struct sched_job **sjobs = xcalloc((size_t)s->npending + 1, sizeof(*sjobs));
	struct sjob **byindex = xcalloc((size_t)s->npending + 1, sizeof(*byindex));
	int order[MODEL_MAX_CLASSES];
	for (int c = 0; c < s->sched.nclasses; c++)
		order[c] = c;
	for (int a = 1; a < s->sched.nclasses; a++)
		for (int b = a; b > 0 && s->classes[order[b]].spec.priority >
						 s->classes[order[b - 1]].spec.priority;
		     b--) {
			int t = order[b];
			order[b] = order[b - 1];
			order[b - 1] = t;
		}
	int nj = 0;
	for (int k = 0; k < s->sched.nclasses; k++)
		for (struct sjob *j = s->classes[order[k]].pend_head; j; j = j->pend_next) {
			if (j->sj.shape_id < 0) {
				snprintf(j->job.reason, sizeof(j->job.reason), "%s",
					 "the scheduler cannot take this request");
				j->reason_from = 0;
				j->reason_pass = mark;
				continue;
			}
			j->sj.queue = j->queue->index;
			sjobs[nj] = &j->sj;
			byindex[nj++] = j;
		}
	/* what holds resources: every part of every attempt not yet ended */
	size_t nparts = 0;
	for (int i = 0; i < s->nnodes; i++)
		nparts += (size_t)s->nodes[i]->nparts;
	struct sched_running *running = xcalloc(nparts + 1, sizeof(*running));
	struct sched_assign *assigns = xcalloc(nparts + 1, sizeof(*assigns));
	int nrun = 0;
	/* group the parts by attempt: count each attempt's parts, then fill.
	 * Attempts are found by (job, attempt number) in an open-addressed
	 * table; each part remembers its attempt's index for the second walk. */
	size_t cap = 16;
	while (cap < nparts * 2)
		cap *= 2;
	uint64_t *akey = xcalloc(cap, sizeof(uint64_t));
	int *aval = xmalloc(sizeof(int) * cap);
	int *part_run = xmalloc(sizeof(int) * (nparts + 1));
	int *count = xcalloc(nparts + 1, sizeof(int));
	size_t np = 0;
	for (int i = 0; i < s->nnodes; i++) {
		struct snode *n = s->nodes[i];
		for (int k = 0; k < n->nparts; k++) {
			struct part *pt = &n->parts[k];
			struct sjob *j = pt->job;
			uint64_t key = (uint64_t)j->job.id << 24 | (uint32_t)pt->attempt;
			size_t h = (key * 0x9e3779b97f4a7c15ULL) & (cap - 1);
			while (akey[h] && akey[h] != key)
				h = (h + 1) & (cap - 1);
			if (!akey[h]) {
				const struct attempt *a = &j->job.attempts[pt->attempt - 1];
				struct sched_running *r = &running[nrun];
				r->id = j->job.id;
				r->cls = j->cls;
				r->queue = j->queue->index;
				r->start_ms = a->start_ms;
				r->time_limit_s = j->job.req.time_limit_s;
				r->last_checkpoint_ms = j->last_ckpt_ms;
				r->stopping = !attempt_is_current(j, a);
				r->held_for = j->held_attempt == a->number ? j->held_for : 0;
				akey[h] = key;
				aval[h] = nrun++;
			}
			part_run[np++] = aval[h];
			count[aval[h]]++;
		}
	}
	size_t off = 0;
	for (int k = 0; k < nrun; k++) {
		running[k].nodes = &assigns[off];
		off += (size_t)count[k];
	}
	np = 0;
	for (int i = 0; i < s->nnodes; i++) {
		struct snode *n = s->nodes[i];
		for (int k = 0; k < n->nparts; k++) {
			struct part *pt = &n->parts[k];
			struct sjob *j = pt->job;
			struct sched_running *r = &running[part_run[np++]];
			const struct attempt_node *an =
				&j->job.attempts[pt->attempt - 1].nodes[pt->node_index];
			struct sched_assign *as = (struct sched_assign *)&r->nodes[r->nnodes++];
			as->node = n->index;
			as->ndev = an->ndev;
			memcpy(as->devs, an->devs, sizeof(int) * (size_t)an->ndev);
			as->milli = an->milli;
			as->cpus = j->job.req.tasks_per_node * j->job.req.cpus_per_task;
			as->mem_mib = j->job.req.mem_mib;
		}
	}
	free(akey);
	free(aval);
	free(part_run);
	free(count);
	/* what follows from the node list alone is kept until the nodes change */
	if (!sched_cluster_matches(s->sched_cluster, snodes, s->nnodes)) {
		sched_cluster_free(s->sched_cluster);
		s->sched_cluster = sched_cluster_new(snodes, s->nnodes);
	}
	struct sched_snapshot snap = {.nodes = snodes,
				      .nnodes = s->nnodes,
				      .jobs = sjobs,
				      .njobs = nj,
				      .running = running,
				      .nrunning = nrun,
				      .classes = classes,
				      .nclasses = s->sched.nclasses,
				      .queues = queues,
				      .nqueues = s->nqueues,
				      .cluster = s->sched_cluster,
				      .shapes = s->sched_shapes};
	struct sched_policy policy = {0};
	struct sched_decisions d;
	int r = sched_pass(&snap, server_now_ms(s), &policy, &d);
	if (r < 0) {
		log_err("scheduling pass refused its snapshot: %s", strerror(-r));
	} else {
		for (int i = 0; i < d.nwaits; i++) {
			const struct sched_wait *w = &d.waits[i];
			struct sjob *j = byindex[w->job];
			j->reason_pass = mark;
			if (w->detail) {
				snprintf(j->job.reason, sizeof(j->job.reason), "%s", w->detail);
				j->reason_from = 0;
			} else {
				j->reason_from = byindex[w->same_as]->job.id;
			}
		}
		for (int i = 0; i < d.nstarts; i++)
			state_apply_start(s, byindex[d.starts[i].job], &d.starts[i], s->nodes);
		for (int i = 0; i < d.npreempts; i++)
			state_preempt(s, state_job(s, d.preempts[i].victim),
				      byindex[d.preempts[i].job]);
		s->stats.passes++;
		s->stats.placements += (uint64_t)d.placements_tried;
	}
	sched_decisions_release(&d);
	free(sjobs);
	free(byindex);
	free(running);
	free(assigns);
	free(queues);
	free(snodes);
	s->last_pass_us = tk_mono_us() - t0;
}

/* ---- JSON for agents and users ------------------------------------------------- */

/* What node node_index runs of attempt a. The spec borrows the job's strings;
 * the caller frees spec->devs_off and spec->devs. */
static void part_spec(struct sjob *j, const struct attempt *a, int node_index, struct work_spec *sp)
{
	const struct job_request *r = &j->job.req;
	const struct attempt_node *an = &a->nodes[node_index];
	int per = r->gpu_milli >= MODEL_MILLI ? r->gpu_milli / MODEL_MILLI : 0;
	memset(sp, 0, sizeof(*sp));
	sp->devs_off = xcalloc((size_t)r->tasks_per_node + 1, sizeof(int));
	sp->devs = xcalloc((size_t)r->tasks_per_node * (size_t)MAX(an->ndev, 1), sizeof(int));
	int k = 0;
	for (int t = 0; t < r->tasks_per_node; t++) {
		sp->devs_off[t] = k;
		if (j->job.system) {
			/* a validation run: its one task sees every device */
			for (int d = 0; d < an->ndev; d++)
				sp->devs[k++] = an->devs[d];
		} else if (per) {
			for (int d = t * per; d < (t + 1) * per && d < an->ndev; d++)
				sp->devs[k++] = an->devs[d];
		} else if (r->gpu_milli > 0 && an->ndev > 0) {
			sp->devs[k++] = an->devs[0];
		}
	}
	sp->devs_off[r->tasks_per_node] = k;
	sp->name = r->name;
	sp->argc = r->argc;
	sp->argv = r->argv;
	sp->cwd = r->cwd;
	sp->nenv = r->nenv;
	sp->env = r->env;
	sp->output = r->output ? r->output : (char *)MODEL_DEFAULT_OUTPUT;
	sp->node_rank = node_index;
	sp->nnodes = a->nnodes;
	sp->tasks_per_node = r->tasks_per_node;
	sp->world_size = a->ntasks;
	sp->milli = an->milli;
	snprintf(sp->master_addr, sizeof(sp->master_addr), "%s", a->master_addr);
	sp->master_port = a->master_port;
	sp->time_limit_s = r->time_limit_s;
	sp->grace_s = r->grace_s;
	sp->system = j->job.system;
}

json_t *state_work_pack(struct server *s, struct snode *n, uint64_t since_gen)
{
	struct wire_work w = {.gen = n->work_gen};
	snprintf(w.epoch, sizeof(w.epoch), "%s", s->epoch);
	w.items = xcalloc((size_t)n->nparts + 1, sizeof(*w.items));
	struct work_spec *specs = xcalloc((size_t)n->nparts + 1, sizeof(*specs));
	for (int i = 0; i < n->nparts; i++) {
		const struct part *p = &n->parts[i];
		const struct attempt *a = &p->job->job.attempts[p->attempt - 1];
		if (!attempt_is_current(p->job, a))
			continue;
		struct work_item *it = &w.items[w.nitems++];
		it->job = p->job->job.id;
		it->attempt = p->attempt;
		if (p->gen_added > since_gen) {
			it->spec = &specs[i];
			part_spec(p->job, a, p->node_index, it->spec);
		}
	}
	json_t *o = wire_work_pack(&w);
	for (int i = 0; i < n->nparts; i++) {
		free(specs[i].devs_off);
		free(specs[i].devs);
	}
	free(specs);
	free(w.items);
	return o;
}

void state_wake_pollers(struct server *s)
{
	while (s->wake_nodes) {
		struct snode *n = s->wake_nodes;
		s->wake_nodes = n->wake_next;
		n->wake_queued = false;
		n->wake_next = NULL;
		while (n->pollers.head) {
			struct request *r = n->pollers.head;
			uint64_t since = strcmp(r->agent_epoch, s->epoch) == 0 ? r->agent_gen : 0;
			reply_json(r, 200, state_work_pack(s, n, since));
		}
	}
}

json_t *state_node_pack(struct server *s, const struct snode *n)
{
	const struct node_inventory *inv = &n->rec.inv;
	const char *state = node_live_name(n->live);
	if (n->live == NODE_UP && n->rec.drained)
		state = n->nparts ? "DRAINING" : "DRAINED";
	else if (n->live == NODE_UP && valid_node_state(s, n))
		state = valid_node_state(s, n);
	json_t *accels = json_array();
	for (int d = 0; d < inv->naccel; d++) {
		const struct accel *a = &inv->accel[d];
		json_array_append_new(accels,
				      json_pack("{s:i, s:s, s:s, s:I, s:f, s:i, s:f}", "index",
						a->index, "uuid", a->uuid, "model", a->model,
						"mem_mib", (json_int_t)a->mem_mib, "tflops",
						a->tflops, "nvlink_domain", a->nvlink_domain,
						"used", n->dev_used[d] / (double)MODEL_MILLI));
	}
	json_t *jobs = json_array();
	for (int i = 0; i < n->nparts; i++)
		json_array_append_new(jobs, json_integer(n->parts[i].job->job.id));
	json_t *o =
		json_pack("{s:s, s:s, s:b, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:o, s:o, s:s}",
			  "name", inv->name, "state", state, "drained", n->rec.drained, "reason",
			  n->rec.drain_reason, "addr", inv->addr, "topology", inv->topology, "cpus",
			  inv->cpus, "cpus_used", n->cpus_used, "mem_mib", (json_int_t)inv->mem_mib,
			  "mem_used_mib", (json_int_t)n->mem_used, "accelerators", accels, "jobs",
			  jobs, "agent_id", n->rec.agent_id);
	json_t *v = node_verdict_pack(&n->rec);
	json_object_set_new(o, "validation", v ? v : json_null());
	return o;
}

json_t *state_job_pack(struct server *s, struct sjob *j)
{
	if (j->job.state == JOB_PENDING && !j->job.system) {
		if (j->reason_pass == 0) {
			snprintf(j->job.reason, sizeof(j->job.reason),
				 "waiting for the next scheduling pass");
		} else if (j->reason_from) {
			/* the pass said: the same as an earlier job of its shape */
			struct sjob *o = state_job(s, j->reason_from);
			if (o)
				snprintf(j->job.reason, sizeof(j->job.reason), "%s", o->job.reason);
			j->reason_from = 0;
		}
	}
	json_t *o = job_pack(&j->job);
	json_object_set_new(o, "class", json_string(s->classes[j->cls].spec.name));
	json_object_set_new(o, "queue", json_string(j->queue->spec.name));
	if (j->preemptions)
		json_object_set_new(o, "preemptions", json_integer(j->preemptions));
	if (j->last_ckpt_ms)
		json_object_set_new(o, "last_checkpoint_ms", json_integer(j->last_ckpt_ms));
	return o;
}

/* ---- loading and freeing ------------------------------------------------------- */

static int load_node_cb(void *ctx, const char *key, const char *doc, size_t len)
{
	struct server *s = ctx;
	json_error_t jerr;
	json_t *j = json_loadb(doc, len, 0, &jerr);
	struct node_record rec;
	struct tk_error e;
	if (!j) {
		log_err("store: node %s: unreadable document: %s", key, jerr.text);
		return -EBADMSG;
	}
	int r = node_record_unpack(j, &rec, &e);
	json_decref(j);
	if (r < 0) {
		log_err("store: node %s: %s", key, e.text);
		return r;
	}
	struct snode *n = xcalloc(1, sizeof(*n));
	n->rec = rec;
	n->live = NODE_UNKNOWN;
	n->last_seen_ms = tk_mono_ms(); /* its agent has one timeout to come back */
	node_sync_devs(n);
	xgrow(&s->nodes, &s->nodes_alloc, (size_t)s->nnodes + 1, sizeof(*s->nodes));
	n->index = s->nnodes;
	s->nodes[s->nnodes++] = n;
	tk_map_put(&s->node_by_name, n->rec.inv.name, n);
	return 0;
}

static int load_job_cb(void *ctx, const char *key, const char *doc, size_t len)
{
	struct server *s = ctx;
	json_error_t jerr;
	json_t *jj = json_loadb(doc, len, 0, &jerr);
	struct job job;
	struct tk_error e;
	if (!jj) {
		log_err("store: job %s: unreadable document: %s", key, jerr.text);
		return -EBADMSG;
	}
	int r = job_unpack(jj, &job, &e);
	json_decref(jj);
	if (r < 0) {
		log_err("store: job %s: %s", key, e.text);
		return r;
	}
	struct sjob *j = sjob_add(s, &job);
	if (j->job.state == JOB_PENDING && !j->job.system)
		pending_insert(s, j);
	/* an attempt not yet ended still holds its resources */
	for (int k = 0; k < j->job.nattempts; k++) {
		struct attempt *at = &j->job.attempts[k];
		if (at->ended)
			continue;
		int tpn = j->job.req.tasks_per_node;
		for (int i = 0; i < at->nnodes; i++) {
			bool done = true;
			for (int t = i * tpn; t < (i + 1) * tpn; t++)
				if (!task_done(&at->tasks[t]))
					done = false;
			if (done)
				continue;
			struct snode *n = state_node(s, at->nodes[i].name);
			if (n) {
				part_add(s, n, j, at, i);
			} else {
				for (int t = i * tpn; t < (i + 1) * tpn; t++)
					if (!task_done(&at->tasks[t]))
						at->tasks[t].state = TASK_LOST;
			}
		}
	}
	return 0;
}

static int load_queue_cb(void *ctx, const char *key, const char *doc, size_t len)
{
	struct server *s = ctx;
	json_error_t jerr;
	json_t *j = json_loadb(doc, len, 0, &jerr);
	struct queue_spec *q = xmalloc(sizeof(*q));
	struct tk_error e;
	int r = j ? queue_spec_unpack(j, q, &e) : tk_errorf(&e, -EBADMSG, "%s", jerr.text);
	json_decref(j);
	if (r == 0)
		queue_insert(s, q)->written_ms = server_now_ms(s);
	else
		log_err("store: queue %s: %s", key, e.text);
	free(q);
	return r;
}

/* ---- users ------------------------------------------------------------------------ */

static struct suser *user_insert(struct server *s, const struct user_record *rec)
{
	struct suser *u = xcalloc(1, sizeof(*u));
	u->rec = *rec;
	tk_map_put(&s->user_by_name, u->rec.name, u);
	tk_map_put(&s->user_by_hash, u->rec.token_sha256, u);
	return u;
}

struct suser *state_user_add(struct server *s, const char *name, bool admin, char *token_out)
{
	struct user_record rec;
	memset(&rec, 0, sizeof(rec));
	snprintf(rec.name, sizeof(rec.name), "%s", name);
	if (tk_random_hex(token_out, 32) < 0)
		abort(); /* the kernel's randomness does not fail once the server is up */
	tk_sha256_hex(token_out, strlen(token_out), rec.token_sha256);
	rec.admin = admin;
	rec.created_ms = server_now_ms(s);
	struct suser *u = user_insert(s, &rec);
	server_user_dirty(s, u);
	log_info("user %s added%s", name, admin ? " (admin)" : "");
	return u;
}

void state_user_del(struct server *s, struct suser *u)
{
	tk_map_del(&s->user_by_name, u->rec.name);
	tk_map_del(&s->user_by_hash, u->rec.token_sha256);
	u->deleted = true;
	server_user_dirty(s, u);
	log_info("user %s removed", u->rec.name);
}

static int load_user_cb(void *ctx, const char *key, const char *doc, size_t len)
{
	struct server *s = ctx;
	json_error_t jerr;
	json_t *j = json_loadb(doc, len, 0, &jerr);
	struct user_record u;
	struct tk_error e;
	int r = j ? user_record_unpack(j, &u, &e) : tk_errorf(&e, -EBADMSG, "%s", jerr.text);
	json_decref(j);
	if (r < 0) {
		log_err("store: user %s: %s", key, e.text);
		return r;
	}
	user_insert(s, &u);
	return 0;
}

int state_load(struct server *s, struct tk_error *err)
{
	if (store_load_users(s->store, load_user_cb, s, err) < 0)
		return tk_errorf(err, -EBADMSG,
				 "cannot load users from the store (see the log above)");
	int r = store_load_queues(s->store, load_queue_cb, s, err);
	if (r < 0)
		return tk_errorf(err, r, "cannot load queues from the store (see the log above)");
	if (!state_queue(s, "default"))
		state_queue_add(s, "default");
	r = store_load_nodes(s->store, load_node_cb, s, err);
	if (r < 0)
		return err && !err->text[0] ? tk_errorf(err, r, "cannot load nodes") : r;
	r = store_load_jobs(s->store, load_job_cb, s, err);
	if (r < 0)
		return tk_errorf(err, r, "cannot load jobs from the store (see the log above)");
	/* settle attempts whose tasks were all lost with a vanished node */
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = s->jobs[i];
		for (int k = 0; j && k < j->job.nattempts; k++) {
			struct attempt *a = &j->job.attempts[k];
			bool any = false;
			for (int t = 0; t < a->ntasks; t++)
				if (!task_done(&a->tasks[t]))
					any = true;
			if (a->ended || any)
				continue;
			bool current = attempt_is_current(j, a);
			a->ended = true;
			if (current)
				job_requeue(s, j, "its nodes are no longer known");
			server_job_dirty(s, j);
		}
	}
	/* a validation run does not survive a restart: its nodes' results would
	 * be partial; it ends, and can be asked for again */
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = s->jobs[i];
		if (j && j->job.system && !job_state_final(j->job.state))
			state_job_finish(s, j, JOB_CANCELLED, j->job.exit_code,
					 "the server restarted during the validation run");
	}
	s->wake_nodes = NULL;
	for (int i = 0; i < s->nnodes; i++)
		s->nodes[i]->wake_queued = false;
	return 0;
}

void state_release(struct server *s)
{
	valid_release(s); /* runs point at jobs and nodes */
	sched_cluster_free(s->sched_cluster);
	s->sched_cluster = NULL;
	sched_shapes_free(s->sched_shapes);
	s->sched_shapes = NULL;
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = s->jobs[i];
		if (!j)
			continue;
		job_release(&j->job);
		free(j);
	}
	free(s->jobs);
	s->jobs = NULL;
	s->njobs = 0;
	for (int i = 0; i < s->nnodes; i++) {
		node_record_release(&s->nodes[i]->rec);
		free(s->nodes[i]->parts);
		free(s->nodes[i]);
	}
	free(s->nodes);
	s->nodes = NULL;
	s->nnodes = 0;
	for (int i = 0; i < s->nqueues; i++)
		free(s->queues[i]);
	free(s->queues);
	s->queues = NULL;
	s->nqueues = 0;
}
