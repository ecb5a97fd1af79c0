/*
 * The state machine's core (state.h): its life, the marks that make every
 * change durable before anyone hears of it, the events it raises, and the
 * one gate every job state change goes through.
 */
#include "state.h"

#include <errno.h>
#include <string.h>

static void classes_init(struct state *s);

void state_init(struct state *s, const struct state_config *cfg, const struct sched_config *sched,
		state_event_cb cb, void *cb_arg)
{
	memset(s, 0, sizeof(*s));
	s->cfg = *cfg;
	if (!s->cfg.master_port_first)
		s->cfg.master_port_first = STATE_PORT_BASE;
	s->event_cb = cb;
	s->event_arg = cb_arg;
	s->sched = *sched;
	fence_params_of(cfg->node_timeout_ms, &s->fence);
	s->fence.power = sched->npower_fence > 0;
	s->fence.power_after_ms = sched->power_fence_after_s * 1000;
	tk_map_init(&s->node_by_name);
	tk_map_init(&s->node_by_cred);
	tk_map_init(&s->pending_by_owner);
	tk_map_init(&s->queue_by_name);
	tk_map_init(&s->user_by_name);
	tk_map_init(&s->user_by_hash);
	tk_map_init(&s->owner_index);
	classes_init(s);
	s->las_hist = sched_las_history_new();
}

/* The classes of s->sched, with no job waiting in them yet. */
static void classes_init(struct state *s)
{
	for (int c = 0; c < s->sched.nclasses; c++) {
		s->classes[c] = (struct sclass){.spec = s->sched.classes[c]};
		s->class_order[c] = c;
	}
	/* the scheduler's classes: every level of a "las" class one of them
	 * (the configuration was checked to have at most MODEL_MAX_CLASSES) */
	s->npass_classes =
		sched_classes_of_config(&s->sched, s->pass_classes, s->las, s->las_first);
	assert(s->npass_classes > 0);
	/* classes by priority, highest first; equal ones in configuration order */
	for (int a = 1; a < s->sched.nclasses; a++)
		for (int b = a; b > 0 && s->classes[s->class_order[b]].spec.priority >
						 s->classes[s->class_order[b - 1]].spec.priority;
		     b--) {
			int t = s->class_order[b];
			s->class_order[b] = s->class_order[b - 1];
			s->class_order[b - 1] = t;
		}
}

int state_config_check(const struct state *s, const struct sched_config *next, struct strbuf *why)
{
	for (int c = 0; c < s->sched.nclasses; c++) {
		const char *name = s->sched.classes[c].name;
		if (sched_config_class(next, name) >= 0)
			continue;
		int64_t first = 0, n = 0;
		for (size_t i = 0; i < s->njobs; i++) {
			const struct sjob *j = s->jobs[i];
			if (j && j->cls == c && !job_state_final(j->job.state)) {
				n += 1;
				first = first ? first : j->job.id;
			}
		}
		if (n) {
			strbuf_addf(why,
				    "classes: \"%s\" is gone from the new configuration but %lld "
				    "job%s not ended %s it (job %lld first); keep the class until "
				    "they end, or cancel them",
				    name, (long long)n, n == 1 ? "" : "s",
				    n == 1 ? "is in" : "are in", (long long)first);
			return -EBUSY;
		}
	}
	return 0;
}

bool state_config_swap(struct state *s, const struct sched_config *next, int64_t now)
{
	/* the waiting jobs leave their classes, in id order, to come back
	 * into the new ones in the same order */
	size_t nwait = 0, most = (size_t)s->npending;
	struct sjob **wait = xcalloc(most + 1, sizeof(*wait));
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = s->jobs[i];
		if (j && j->pending) {
			assert(nwait < most);
			state_job_dequeue(s, j);
			wait[nwait++] = j;
		}
	}
	bool same = s->sched.nclasses == next->nclasses;
	for (int c = 0; c < s->sched.nclasses; c++) {
		same = same && strcmp(s->sched.classes[c].name, next->classes[c].name) == 0;
		free(s->classes[c].order);
	}
	s->sched = *next;
	classes_init(s);
	/* the service of finished jobs is kept by class: where the classes
	 * are others, it is learnt again from the ended jobs (below; the
	 * caller adds those out of memory) */
	if (!same) {
		sched_las_history_free(s->las_hist);
		s->las_hist = sched_las_history_new();
	}
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = s->jobs[i];
		if (!j)
			continue;
		if (!job_state_final(j->job.state)) {
			state_job_attach(s, j, now); /* its class, pools and domains again */
			continue;
		}
		/* an ended job keeps the name of its class, gone or not */
		int c = j->job.req.cls ? sched_config_class(&s->sched, j->job.req.cls) : -1;
		j->cls = c >= 0 ? c : s->sched.default_class;
		if (!same)
			state_las_history_note(s, j, now);
	}
	for (size_t k = 0; k < nwait; k++)
		state_job_enqueue(s, wait[k]);
	free(wait);
	for (int i = 0; i < s->nnodes; i++)
		s->nodes[i]->pools = sched_config_pool_node(&s->sched, s->nodes[i]->labels);
	/* the last pass's reasons name classes by their old places */
	s->waits.mark = 0;
	s->waits.n = 0;
	state_want_pass(s);
	return !same;
}

void state_set_reader(struct state *s, state_read_cb read, void *arg)
{
	s->read = read;
	s->read_arg = arg;
}

void state_release(struct state *s)
{
	valid_release(s); /* runs point at jobs and nodes */
	wire_services_free(s->services, s->nservices);
	sched_las_history_free(s->las_hist);
	free(s->groups);
	free(s->group_nodes);
	sched_cluster_free(s->sched_cluster);
	sched_shapes_free(s->sched_shapes);
	sched_keep_free(s->sched_keep);
	for (int i = 0; i < s->wins_made; i++)
		free(s->wins[i].nodes);
	free(s->wins);
	free(s->weights);
	free(s->weight_names);
	free(s->waits.ids);
	free(s->waits.from);
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = s->jobs[i];
		if (!j)
			continue;
		job_release(&j->job);
		free(j->fail_ev);
		free(j->fail_seen);
		if (j->inplace) {
			free(j->inplace->bad);
			free(j->inplace->held);
			free(j->inplace);
		}
		free(j->spares);
		free(j->spares_lent);
		state_stall_forget(j);
		free(j);
	}
	free(s->restarting);
	free(s->spared);
	for (int c = 0; c < s->sched.nclasses; c++)
		free(s->classes[c].order);
	free(s->jobs);
	free(s->gone);
	free(s->settled);
	for (int i = 0; i < s->nowners; i++)
		free(s->owners[i]);
	free(s->owners);
	tk_map_release(&s->owner_index);
	free(s->fenced);
	free(s->failing);
	free(s->arrived);
	for (int i = 0; i < s->nnodes; i++) {
		node_record_release(&s->nodes[i]->rec);
		free(s->nodes[i]->parts);
		free(s->nodes[i]->images);
		free(s->nodes[i]->pulls);
		free(s->nodes[i]->gpus);
		free(s->nodes[i]);
	}
	free(s->nodes);
	for (int i = 0; i < s->nqueues; i++)
		free(s->queues[i]);
	free(s->queues);
	/* users being deleted are only in the dirty list now */
	for (struct suser *u = s->dirty_users, *next; u; u = next) {
		next = u->dirty_next;
		if (u->deleted)
			free(u);
	}
	size_t pos = 0;
	void *v;
	while (tk_map_next(&s->user_by_name, &pos, NULL, &v))
		free(v);
	tk_map_release(&s->node_by_name);
	tk_map_release(&s->node_by_cred);
	for (size_t at = 0; tk_map_next(&s->pending_by_owner, &at, NULL, &v);)
		free(v);
	tk_map_release(&s->pending_by_owner);
	tk_map_release(&s->queue_by_name);
	tk_map_release(&s->user_by_name);
	tk_map_release(&s->user_by_hash);
	memset(s, 0, sizeof(*s));
}

/* ---- durability: what changed is written before anyone hears of it ----------------- */

void state_job_dirty(struct state *s, struct sjob *j)
{
	s->seq_applied++;
	if (j->dirty)
		return;
	j->dirty = true;
	s->ndirty_jobs++;
	j->dirty_next = s->dirty_jobs;
	s->dirty_jobs = j;
}

void state_node_dirty(struct state *s, struct snode *n)
{
	s->seq_applied++;
	if (n->dirty)
		return;
	n->dirty = true;
	n->dirty_next = s->dirty_nodes;
	s->dirty_nodes = n;
}

void state_queue_dirty(struct state *s, struct squeue *q)
{
	s->seq_applied++;
	if (q->dirty)
		return;
	q->dirty = true;
	q->dirty_next = s->dirty_queues;
	s->dirty_queues = q;
}

void state_user_dirty(struct state *s, struct suser *u)
{
	s->seq_applied++;
	if (u->dirty)
		return;
	u->dirty = true;
	u->dirty_next = s->dirty_users;
	s->dirty_users = u;
}

void state_want_pass(struct state *s)
{
	s->sched_needed = true;
}

void state_job_arrived(struct state *s, struct sjob *j)
{
	xgrow(&s->arrived, &s->arrived_alloc, s->narrived + 1, sizeof(*s->arrived));
	s->arrived[s->narrived++] = j->job.id;
}

void state_raise(struct state *s, const struct state_event *ev)
{
	if (s->event_cb)
		s->event_cb(s->event_arg, ev);
}

/* ---- the job state gate --------------------------------------------------------------- */

#define P JOB_PENDING
#define S JOB_STARTING
#define R JOB_RUNNING

/* allowed[from][to]; the diagram and who makes each change are in state.h */
static const bool allowed[JOB_STATE_MAX][JOB_STATE_MAX] = {
	[P] = {[S] = true, [JOB_FAILED] = true, [JOB_CANCELLED] = true},
	[S] = {[P] = true,
	       [R] = true,
	       [JOB_COMPLETED] = true,
	       [JOB_FAILED] = true,
	       [JOB_CANCELLED] = true,
	       [JOB_TIMEOUT] = true},
	[R] = {[P] = true,
	       [JOB_COMPLETED] = true,
	       [JOB_FAILED] = true,
	       [JOB_CANCELLED] = true,
	       [JOB_TIMEOUT] = true},
};

#undef P
#undef S
#undef R

bool state_job_transition_allowed(enum job_state from, enum job_state to)
{
	return (unsigned)from < JOB_STATE_MAX && (unsigned)to < JOB_STATE_MAX && allowed[from][to];
}

void assert_job_state(const struct sjob *j)
{
	const struct attempt *a = job_current_attempt(&j->job);
	switch (j->job.state) {
	case JOB_PENDING:
		/* waiting in its class's list; a system job waits for its nodes */
		assert(j->pending == !j->job.system);
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
	(void)a;
}

static struct owner_pending *owner_use(struct state *s, const char *owner)
{
	struct owner_pending *o = tk_map_get(&s->pending_by_owner, owner);
	if (!o) {
		o = xcalloc(1, sizeof(*o));
		snprintf(o->owner, sizeof(o->owner), "%s", owner);
		tk_map_put(&s->pending_by_owner, o->owner, o); /* the map keeps the key's pointer */
	}
	return o;
}

const struct owner_pending *state_owner_pending(struct state *s, const char *owner)
{
	return owner_use(s, owner);
}

/* May no hold-back but its queue's budget apply to j? (struct pend_entry) */
static bool job_plain(const struct state *s, const struct sjob *j)
{
	const struct job_request *r = &j->job.req;
	return j->sj.shape_id >= 0 && !j->job.held && !r->begin_ms && !r->nafter &&
	       !j->job.array_cap && !j->job.nattempts && !j->fenced_until &&
	       s->las[j->cls].nlevels < 2;
}

/* The entry of waiting job id in c's order (by id: holes keep theirs). */
static struct pend_entry *order_find(struct sclass *c, int64_t id)
{
	size_t lo = 0, hi = c->norder;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->order[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->norder && c->order[lo].id == id ? &c->order[lo] : NULL;
}

/* What an entry keeps of its job (all but the job and its id). */
static void pend_fill(const struct state *s, struct pend_entry *e, const struct sjob *j)
{
	e->submit_ms = j->sj.submit_ms;
	e->shape_id = j->sj.shape_id;
	e->time_limit_s = (uint32_t)MIN(MAX(j->sj.time_limit_s, 0), (int64_t)UINT32_MAX);
	e->queue = (uint16_t)j->queue->index;
	e->plain = job_plain(s, j);
}

static void order_add(struct state *s, struct sclass *c, struct sjob *j)
{
	xgrow(&c->order, &c->order_alloc, c->norder + 1, sizeof(*c->order));
	size_t at = c->norder;
	while (at > 0 && c->order[at - 1].id > j->job.id)
		at--; /* a requeued job goes back to its place: rare, and near the end */
	if (at > 0 && c->order[at - 1].id == j->job.id) {
		at--; /* its own hole, not yet closed */
	} else {
		memmove(&c->order[at + 1], &c->order[at], (c->norder - at) * sizeof(*c->order));
		c->norder++;
	}
	c->order[at] = (struct pend_entry){.job = j, .id = (uint32_t)j->job.id};
	pend_fill(s, &c->order[at], j);
	/* what the pass would set each time, set once */
	j->sj.queue = j->queue->index;
	j->sj.cls = s->las_first[j->cls];
}

void state_job_refile(struct state *s, struct sjob *j)
{
	struct pend_entry *e = j->pending ? order_find(&s->classes[j->cls], j->job.id) : NULL;
	if (e)
		pend_fill(s, e, j);
}

void state_job_enqueue(struct state *s, struct sjob *j)
{
	if (!j->req_bytes)
		j->req_bytes = job_request_bytes(&j->job.req);
	struct owner_pending *o = owner_use(s, j->job.owner);
	o->jobs++;
	o->bytes += j->req_bytes;
	struct sclass *c = &s->classes[j->cls];
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
	if (!s->sched_shapes)
		s->sched_shapes = sched_shapes_new();
	j->sj.shape_id = sched_shapes_add(s->sched_shapes, &j->sj);
	if (j->sj.shape_id < 0)
		log_err("job %lld: the scheduler cannot take its request; it waits until cancelled",
			(long long)j->job.id);
	c->npending++;
	s->npending++;
	j->queue->npending++;
	order_add(s, c, j);
}

void state_job_dequeue(struct state *s, struct sjob *j)
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
	struct owner_pending *o = owner_use(s, j->job.owner);
	o->jobs--;
	o->bytes -= j->req_bytes;
	sched_shapes_drop(s->sched_shapes, j->sj.shape_id);
	j->sj.shape_id = -1;
	struct pend_entry *e = order_find(c, j->job.id);
	assert(e && e->job == j);
	e->job = NULL;
	c->npending--;
	s->npending--;
	j->queue->npending--;
}

int state_job_set_state(struct state *s, struct sjob *j, enum job_state to, const char *reason,
			int64_t now)
{
	enum job_state from = j->job.state;
	if (!state_job_transition_allowed(from, to)) {
		log_err("job %lld: refused the change %s -> %s", (long long)j->job.id,
			job_state_name(from), job_state_name(to));
		return -EINVAL;
	}
	bool was_active = from == JOB_STARTING || from == JOB_RUNNING;
	bool active = to == JOB_STARTING || to == JOB_RUNNING;
	if (from == JOB_PENDING)
		state_job_dequeue(s, j);
	/* its agents see the attempt leave their work and stop its tasks */
	if (was_active && !active)
		state_attempt_bump_nodes(s, job_current_attempt(&j->job));
	if (j->job.array_job && was_active != active) {
		struct sjob *first = state_job(s, j->job.array_job);
		if (first)
			first->array_active += active ? 1 : -1;
	}
	j->job.state = to;
	if (reason)
		snprintf(j->job.reason, sizeof(j->job.reason), "%s", reason);
	if (to == JOB_PENDING && !j->job.system) {
		state_job_enqueue(s, j);
		state_want_pass(s);
	}
	state_job_dirty(s, j);
	assert_job_state(j);
	/* spares go with a job that ends or waits in its queue (a pass
	 * places it with new ones); one restarting in place keeps them */
	if (j->job.req.spares && (job_state_final(to) || (to == JOB_PENDING && !j->inplace)))
		state_spares_release(s, j, now);
	if (job_state_final(to)) {
		state_inplace_drop(s, j);
		j->job.end_ms = now;
		log_debug("job %lld %s: %s", (long long)j->job.id, job_state_name(to),
			  j->job.reason);
		state_raise(s, &(struct state_event){.kind = STATE_EV_JOB_ENDED, .job = j});
		state_las_history_note(s, j, now);
		if (j->valid)
			valid_job_ended(s, j, now);
	}
	return 0;
}
