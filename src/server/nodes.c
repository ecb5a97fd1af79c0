/*
 * Nodes: what agents report of them, what is allocated on each (parts of
 * attempts, master ports), their liveness, and the state the API shows
 * (model.h draws it). When what a node should run changes its work_gen
 * advances and the node waits in a list for state_flush_work.
 */
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct snode *state_node(struct state *s, const char *name)
{
	return tk_map_get(&s->node_by_name, name);
}

enum node_state state_node_state(const struct state *s, const struct snode *n)
{
	if (n->live == NODE_LIVE_UNKNOWN)
		return NODE_UNKNOWN;
	if (n->live == NODE_LIVE_DOWN)
		return NODE_DOWN;
	if (n->live == NODE_LIVE_UNREACHABLE)
		return NODE_UNREACHABLE;
	if (n->rec.drained)
		return n->nparts ? NODE_DRAINING : NODE_DRAINED;
	if (n->held_by)
		return NODE_VALIDATING;
	if (!valid_node_open(s, n))
		return NODE_UNVALIDATED;
	return NODE_UP;
}

/* ---- work and resources ------------------------------------------------------------ */

static void node_bump(struct state *s, struct snode *n)
{
	n->work_gen++;
	if (!n->wake_queued) {
		n->wake_queued = true;
		n->wake_next = s->wake_nodes;
		s->wake_nodes = n;
	}
}

void state_node_work_changed(struct state *s, struct snode *n)
{
	node_bump(s, n);
}

void state_services_set(struct state *s, struct wire_service *v, int n)
{
	wire_services_free(s->services, s->nservices);
	s->services = v;
	s->nservices = n;
	s->services_on = true;
	for (int i = 0; i < s->nnodes; i++)
		node_bump(s, s->nodes[i]);
}

void state_flush_work(struct state *s)
{
	while (s->wake_nodes) {
		struct snode *n = s->wake_nodes;
		s->wake_nodes = n->wake_next;
		n->wake_queued = false;
		n->wake_next = NULL;
		state_raise(s, &(struct state_event){.kind = STATE_EV_WORK_CHANGED, .node = n});
	}
}

void state_node_sync_devs(struct snode *n)
{
	for (int d = 0; d < n->rec.inv.naccel; d++) {
		n->sdev[d].model = n->rec.inv.accel[d].model;
		n->sdev[d].nvlink_domain = n->rec.inv.accel[d].nvlink_domain;
		n->sdev[d].mem_mib = n->rec.inv.accel[d].mem_mib;
		n->sdev[d].tflops = n->rec.inv.accel[d].tflops;
		n->sdev[d].free_milli = MAX(0, MODEL_MILLI - n->dev_used[d]);
	}
}

int state_node_port_find(const struct state *s, const struct snode *n)
{
	int first = s->cfg.master_port_first;
	for (int i = 0; i < STATE_PORT_COUNT; i++)
		if (!(n->ports[i / 8] & (1u << (i % 8))))
			return first + i;
	log_warn("node %s: all %d master ports in use; reusing %d", n->rec.inv.name,
		 STATE_PORT_COUNT, first);
	return first;
}

/* A port outside the range (a job started under another --master-ports)
 * is not kept. */
static void port_free(const struct state *s, struct snode *n, int port)
{
	int i = port - s->cfg.master_port_first;
	if (i >= 0 && i < STATE_PORT_COUNT)
		n->ports[i / 8] &= (uint8_t) ~(1u << (i % 8));
}

static void port_mark(const struct state *s, struct snode *n, int port)
{
	int i = port - s->cfg.master_port_first;
	if (i >= 0 && i < STATE_PORT_COUNT)
		n->ports[i / 8] |= (uint8_t)(1u << (i % 8));
}

/* What a job's share of node n holds there (sign +1) or gives back (-1):
 * what it asked for, or, alone on the node (--exclusive), all of it. */
static void part_hold(struct snode *n, const struct sjob *j, const struct attempt_node *an,
		      int sign)
{
	const struct job_request *r = &j->job.req;
	if (r->exclusive) {
		n->cpus_used += sign * n->rec.inv.cpus;
		n->mem_used += sign * n->rec.inv.mem_mib;
		for (int d = 0; d < n->rec.inv.naccel && d < MODEL_MAX_ACCELS; d++)
			n->dev_used[d] += sign * MODEL_MILLI;
		return;
	}
	n->cpus_used += sign * r->tasks_per_node * r->cpus_per_task;
	n->mem_used += sign * r->mem_mib;
	for (int d = 0; d < an->ndev; d++)
		if (an->devs[d] < MODEL_MAX_ACCELS)
			n->dev_used[an->devs[d]] += sign * an->milli;
}

/* What j's share an on node n counts for its queue: accelerators, units. */
static void queue_hold(struct state *s, const struct snode *n, struct sjob *j,
		       const struct attempt_node *an, int sign)
{
	j->queue->use_milli += sign * (int64_t)an->ndev * an->milli;
	for (int d = 0; d < an->ndev; d++)
		if (an->devs[d] < n->rec.inv.naccel)
			j->queue->use_units +=
				sign * an->milli *
				state_model_weight(s, n->rec.inv.accel[an->devs[d]].model);
}

void state_part_add(struct state *s, struct snode *n, struct sjob *j, const struct attempt *a,
		    int node_index)
{
	const struct attempt_node *an = &a->nodes[node_index];
	xgrow(&n->parts, &n->parts_alloc, (size_t)n->nparts + 1, sizeof(*n->parts));
	n->parts[n->nparts++] = (struct part){j, a->number, node_index, 0};
	part_hold(n, j, an, +1);
	queue_hold(s, n, j, an, 1);
	if (node_index == 0) {
		port_mark(s, n, a->master_port);
		j->queue->nrunning++;
	}
	state_node_sync_devs(n);
	node_bump(s, n);
	n->parts[n->nparts - 1].gen_added = n->work_gen;
}

void state_part_remove(struct state *s, struct snode *n, struct sjob *j, int attempt)
{
	for (int i = 0; i < n->nparts; i++) {
		struct part *p = &n->parts[i];
		if (p->job != j || p->attempt != attempt)
			continue;
		const struct attempt *a = &j->job.attempts[attempt - 1];
		const struct attempt_node *an = &a->nodes[p->node_index];
		/* a gang restarting in place keeps its share here for the next
		 * attempt (inplace.c) */
		if (!state_inplace_keeps(j, attempt, p->node_index)) {
			part_hold(n, j, an, -1);
			queue_hold(s, n, j, an, -1);
		}
		if (p->node_index == 0) {
			port_free(s, n, a->master_port);
			j->queue->nrunning--;
		}
		n->parts[i] = n->parts[--n->nparts];
		state_node_sync_devs(n);
		node_bump(s, n);
		state_want_pass(s);
		/* a borrowed spare is held for its job again at once */
		if ((j->borrowed_from || j->borrowed_pool) &&
		    strcmp(j->borrowed_node, n->rec.inv.name) == 0)
			state_spare_returned(s, n, j, s->now_ms);
		return;
	}
}

void state_node_hold(struct state *s, struct snode *n, struct sjob *j,
		     const struct attempt_node *an, int sign)
{
	part_hold(n, j, an, sign);
	queue_hold(s, n, j, an, sign);
	state_node_sync_devs(n);
	node_bump(s, n);
	state_want_pass(s);
}

void state_node_hold_quiet(struct state *s, struct snode *n, struct sjob *j,
			   const struct attempt_node *an, int sign)
{
	part_hold(n, j, an, sign);
	queue_hold(s, n, j, an, sign);
	state_node_sync_devs(n);
}

void state_attempt_bump_nodes(struct state *s, const struct attempt *a)
{
	for (int i = 0; i < a->nnodes; i++) {
		struct snode *n = state_node(s, a->nodes[i].name);
		if (n)
			node_bump(s, n);
	}
}

/* ---- liveness --------------------------------------------------------------------- */

/* Is part p one of the attempts in keep? */
static bool part_kept(const struct part *p, const struct wire_attempt_ref *keep, int nkeep)
{
	for (int k = 0; k < nkeep; k++)
		if (keep[k].job == p->job->job.id && keep[k].attempt == p->attempt)
			return true;
	return false;
}

void state_job_fence(struct state *s, struct sjob *j, const char *node, int64_t until)
{
	if (until <= j->fenced_until)
		return;
	if (!j->fenced_until) {
		xgrow(&s->fenced, &s->fenced_alloc, (size_t)s->nfenced + 1, sizeof(*s->fenced));
		s->fenced[s->nfenced++] = j;
	}
	j->fenced_until = until;
	snprintf(j->fenced_node, sizeof(j->fenced_node), "%s", node);
}

/* Marks every task of every part on n lost but those of the attempts in
 * keep, requeueing or failing the jobs whose current attempt that ends.
 * Where their tasks may still run (a shim the node's new agent did not
 * find), fence_until (mono) is when their lease surely ended: no job of
 * them starts again before. */
static void lose_parts(struct state *s, struct snode *n, const char *why,
		       const struct wire_attempt_ref *keep, int nkeep, int64_t fence_until,
		       int64_t now)
{
	/* settling a part swaps the last one into its place: one already seen */
	for (int i = n->nparts - 1; i >= 0; i = MIN(i - 1, n->nparts - 1)) {
		struct part p = n->parts[i];
		if (part_kept(&p, keep, nkeep))
			continue;
		struct sjob *j = p.job;
		struct attempt *a = &j->job.attempts[p.attempt - 1];
		int tpn = j->job.req.tasks_per_node;
		for (int t = p.node_index * tpn; t < (p.node_index + 1) * tpn; t++) {
			struct task_status *ts = &a->tasks[t];
			if (state_task_done(ts))
				continue;
			ts->state = TASK_LOST;
			ts->end_ms = now;
		}
		if (fence_until)
			state_job_fence(s, j, n->rec.inv.name, fence_until);
		if (state_attempt_is_current(j, a))
			/* (its last word: a node silent for the timeout failed then) */
			state_job_lost(s, j, a, n->rec.inv.name, why,
				       now - MAX(tk_mono_ms() - n->last_seen_ms, 0), now);
		state_attempt_settle(s, j, a, p.node_index, now);
		state_part_remove(s, n, j, p.attempt); /* settled already, or now */
		state_job_dirty(s, j);
	}
}

void state_node_lost(struct state *s, struct snode *n, const char *why, int64_t now)
{
	if (n->live != NODE_LIVE_DOWN)
		log_warn("node %s is DOWN: %s", n->rec.inv.name, why);
	n->live = NODE_LIVE_DOWN;
	/* (a node lost with work is a failure of its own) */
	if (n->nparts)
		state_node_event(s, n, NODE_EV_TASKS_LOST, n->parts[0].job->job.id,
				 n->parts[0].attempt, why, now);
	/* silent for the node timeout: every lease it granted has ended */
	lose_parts(s, n, why, NULL, 0, 0, now);
	state_want_pass(s);
}

void state_node_fault(struct state *s, struct snode *n, const char *fault, int64_t now)
{
	/* known: its jobs went when the first fault drained it, and a node
	 * drained takes no new work (a fault repeats with every heartbeat) */
	if (n->rec.drain_source == DRAIN_FAULT)
		return;
	char why[MODEL_REASON_MAX];
	snprintf(why, sizeof(why), "fault: %.240s", fault);
	log_warn("node %s reports a %s", n->rec.inv.name, why);
	/* in its history (the lemon rule may drain it for it now: that says
	 * more; a node drained as a lemon before is drained for the fault) */
	bool lemon_before = n->rec.drain_source == DRAIN_LEMON;
	state_node_event(s, n, NODE_EV_FAULT, 0, 0, fault, now);
	if (lemon_before || n->rec.drain_source != DRAIN_LEMON)
		state_drain(s, n, DRAIN_FAULT, why);
	/* its jobs go elsewhere now, not after the node timeout: each attempt
	 * on it ends, its tasks are stopped (the next attempt waits for them) */
	char lost[MODEL_REASON_MAX];
	snprintf(lost, sizeof(lost), "it reported a %.200s", why);
	int np = n->nparts;
	struct part *parts = xmalloc(sizeof(*parts) * (size_t)(np + 1));
	if (np)
		memcpy(parts, n->parts, sizeof(*parts) * (size_t)np);
	for (int i = 0; i < np; i++) {
		struct attempt *a = &parts[i].job->job.attempts[parts[i].attempt - 1];
		if (state_attempt_is_current(parts[i].job, a))
			state_job_lost(s, parts[i].job, a, n->rec.inv.name, lost, now, now);
	}
	free(parts);
	state_want_pass(s);
}

static uint64_t fault_digest(const char *f)
{
	uint64_t d = 1469598103934665603ULL; /* FNV-1a */
	for (const char *p = f; *p; p++)
		d = (d ^ (unsigned char)*p) * 1099511628211ULL;
	return d;
}

static bool waived(const struct snode *n, uint64_t d)
{
	for (int i = 0; i < n->nwaived; i++)
		if (n->waived[i] == d)
			return true;
	return false;
}

void state_node_fault_reported(struct state *s, struct snode *n, const char *fault, int64_t now)
{
	if (!waived(n, fault_digest(fault)))
		state_node_fault(s, n, fault, now);
}

/* The limits the cluster requires ("require_limits") that n reports it
 * cannot enforce, as a fault (false: none). */
static bool limits_fault(const struct state *s, const struct snode *n, char *buf, size_t len)
{
	unsigned miss = s->sched.require_limits & n->rec.inv.unenforced;
	if (!n->rec.inv.isolation_known || !miss)
		return false;
	size_t l = (size_t)snprintf(buf, len, "it cannot enforce");
	const char *sep = " ";
	for (unsigned b = 1; b <= NODE_LIMIT_DEVICES && l < len; b <<= 1)
		if (miss & b) {
			l += (size_t)snprintf(buf + l, len - l, "%s%s", sep, node_limit_name(b));
			sep = ", ";
		}
	if (l < len)
		snprintf(buf + l, len - l,
			 " limits (cgroup v%d), which \"require_limits\" in config.json requires",
			 n->rec.inv.cgroup_version);
	return true;
}

void state_node_faults(struct state *s, struct snode *n, const char (*faults)[WIRE_FAULT_MAX],
		       int nfaults, int64_t now, int64_t mono)
{
	n->nfaults_now = 0;
	n->fault_first[0] = '\0';
	n->faults_at = mono;
	char limits[WIRE_FAULT_MAX];
	bool lf = limits_fault(s, n, limits, sizeof(limits));
	for (int i = 0; i < nfaults + lf && i < WIRE_MAX_FAULTS; i++) {
		const char *fault = i < nfaults ? faults[i] : limits;
		uint64_t d = fault_digest(fault);
		n->faults_now[n->nfaults_now++] = d;
		if (waived(n, d))
			continue;
		if (!n->fault_first[0])
			snprintf(n->fault_first, sizeof(n->fault_first), "%s", fault);
		state_node_fault(s, n, fault, now);
	}
	/* a waived fault no longer reported is forgotten: back, it drains */
	int k = 0;
	for (int i = 0; i < n->nwaived; i++)
		for (int f = 0; f < n->nfaults_now; f++)
			if (n->faults_now[f] == n->waived[i]) {
				n->waived[k++] = n->waived[i];
				break;
			}
	n->nwaived = k;
}

int state_node_faults_unwaived(const struct snode *n, const char **first)
{
	int c = 0;
	for (int i = 0; i < n->nfaults_now; i++)
		c += !waived(n, n->faults_now[i]);
	if (first)
		*first = n->fault_first;
	return c;
}

void state_waive_faults(struct snode *n)
{
	for (int i = 0; i < n->nfaults_now; i++)
		if (!waived(n, n->faults_now[i]) && n->nwaived < WIRE_MAX_FAULTS)
			n->waived[n->nwaived++] = n->faults_now[i];
	n->fault_first[0] = '\0';
}

void state_node_seen(struct state *s, struct snode *n, int64_t mono)
{
	n->last_seen_ms = mono;
	fence_member_heard(&n->fence, &s->fence, INT64_MIN, mono);
	if (n->live != NODE_LIVE_UP) {
		log_info("node %s is UP%s", n->rec.inv.name,
			 n->live == NODE_LIVE_DOWN ? " again" : "");
		n->live = NODE_LIVE_UP;
		state_want_pass(s);
	}
}

void state_node_acked(struct state *s, struct snode *n, int64_t acked_ms, int64_t mono)
{
	fence_member_heard(&n->fence, &s->fence, acked_ms, mono);
}

/* Nodes in order of their topology (then name), so that a group shares
 * fate: a rack, a leaf switch. */
static int by_topology(const void *x, const void *y)
{
	const struct snode *a = *(struct snode *const *)x, *b = *(struct snode *const *)y;
	int c = strcmp(a->rec.inv.topology, b->rec.inv.topology);
	return c ? c : strcmp(a->rec.inv.name, b->rec.inv.name);
}

static void group_name(struct state *s, struct sgroup *g);

void state_groups_assign(struct state *s)
{
	s->groups_stale = false;
	free(s->groups);
	free(s->group_nodes);
	s->groups = NULL;
	s->group_nodes = NULL;
	s->ngroups = 0;
	if (!s->nnodes)
		return;
	struct snode **order = xmalloc(sizeof(*order) * (size_t)s->nnodes);
	memcpy(order, s->nodes, sizeof(*order) * (size_t)s->nnodes);
	qsort(order, (size_t)s->nnodes, sizeof(*order), by_topology);
	/* a small cluster is one group; a larger one, groups of 5 to 9 in
	 * topology order, as even as they come */
	int ng = s->nnodes <= FENCE_MAX_GROUP ? 1 : (s->nnodes + 6) / 7;
	s->ngroups = ng;
	s->groups = xcalloc((size_t)ng, sizeof(*s->groups));
	s->group_nodes = xmalloc(sizeof(int) * (size_t)s->nnodes);
	for (int g = 0, k = 0; g < ng; g++) {
		int end = (int)((int64_t)s->nnodes * (g + 1) / ng);
		s->groups[g].first = k;
		for (; k < end; k++) {
			s->group_nodes[k] = order[k]->index;
			order[k]->group = g;
		}
		s->groups[g].n = end - s->groups[g].first;
		group_name(s, &s->groups[g]);
	}
	free(order);
}

/* A group's id, of its members' names, and its key, derived from the
 * server's secret and the id: the same group gets the same key from
 * every run of the server, so members told by different runs still know
 * each other. */
static void group_name(struct state *s, struct sgroup *g)
{
	struct strbuf b;
	strbuf_init(&b);
	strbuf_addstr(&b, "tenk witness group");
	for (int i = 0; i < g->n; i++)
		strbuf_addf(&b, "\n%s", s->nodes[s->group_nodes[g->first + i]]->rec.inv.name);
	char hex[65];
	tk_sha256_hex(b.buf, b.len, hex);
	snprintf(g->id, sizeof(g->id), "%.16s", hex);
	const char *secret = s->cfg.secret ? s->cfg.secret : "";
	char what[64];
	int n = snprintf(what, sizeof(what), "witness group key %s", g->id);
	tk_hmac_sha256_hex(secret, strlen(secret), what, (size_t)n, g->key);
	strbuf_release(&b);
}

/* The group g as a node record keeps it. */
static void witness_of(const struct state *s, const struct sgroup *g, struct node_witness *w)
{
	memset(w, 0, sizeof(*w));
	snprintf(w->id, sizeof(w->id), "%s", g->id);
	for (int i = 0; i < g->n && i < MODEL_WITNESS_MAX; i++)
		snprintf(w->member[w->n++], MODEL_NAME_MAX, "%s",
			 s->nodes[s->group_nodes[g->first + i]]->rec.inv.name);
}

const struct wire_group *state_node_witness(struct state *s, struct snode *n,
					    const struct wire_heartbeat *m, bool may_send,
					    struct wire_group *ret)
{
	if (s->groups_stale)
		state_groups_assign(s);
	/* a beat older than one already taken (it waited somewhere) says
	 * what its agent held before: it changes nothing, and gets nothing */
	if (m->witness_seq && m->witness_seq <= n->witness_seq)
		return NULL;
	n->witness_seq = m->witness_seq;
	n->witness_port = m->witness_port;
	const struct sgroup *g = &s->groups[n->group];
	/* what the agent holds: its members as the server sent them, or as
	 * they are now; an id the server never sent, not known */
	struct node_witness *acked = &n->rec.witness_acked;
	if (strcmp(acked->id, m->group_id) != 0) {
		if (strcmp(n->rec.witness_sent.id, m->group_id) == 0) {
			*acked = n->rec.witness_sent;
		} else if (strcmp(g->id, m->group_id) == 0) {
			witness_of(s, g, acked);
		} else {
			memset(acked, 0, sizeof(*acked));
			snprintf(acked->id, sizeof(acked->id), "%s", m->group_id);
			acked->n = m->group_id[0] ? -1 : 0;
		}
		state_node_dirty(s, n);
	}
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->id, sizeof(ret->id), "%s", g->id);
	snprintf(ret->key, sizeof(ret->key), "%s", g->key);
	struct strbuf b;
	strbuf_init(&b);
	strbuf_addstr(&b, g->id);
	for (int i = 0; i < g->n; i++) {
		const struct snode *o = s->nodes[s->group_nodes[g->first + i]];
		struct wire_peer *p = &ret->members[ret->n++];
		snprintf(p->node, sizeof(p->node), "%s", o->rec.inv.name);
		snprintf(p->addr, sizeof(p->addr), "%s", o->rec.inv.addr);
		p->port = o->witness_port;
		strbuf_addf(&b, "\n%s %s %d", p->node, p->addr, p->port);
	}
	char hex[65];
	tk_sha256_hex(b.buf, b.len, hex);
	strbuf_release(&b);
	snprintf(ret->tag, sizeof(ret->tag), "%.16s", hex);
	/* sent only in an answer that waits for the store: the record says
	 * so before the agent can hold it */
	if (strcmp(ret->tag, m->group_tag) == 0 || !may_send)
		return NULL;
	if (strcmp(n->rec.witness_sent.id, g->id) != 0) {
		witness_of(s, g, &n->rec.witness_sent);
		state_node_dirty(s, n);
	}
	return ret;
}

/* May the server declare x DOWN by the witness group w (a node record's)?
 * Its members that are no longer nodes count as not in touch. */
static bool may_by(struct state *s, const struct snode *x, const struct node_witness *w,
		   int64_t mono, bool power, int *in_touch, int *group_n)
{
	if (w->n < 0)
		return false; /* not known: hold */
	struct fence_member m[MODEL_WITNESS_MAX];
	int k = 0, xi = -1;
	for (int i = 0; i < w->n; i++) {
		const struct snode *o = tk_map_get(&s->node_by_name, w->member[i]);
		if (o == x)
			xi = k;
		if (o)
			m[k] = o->fence;
		else
			fence_member_init(&m[k], INT64_MIN / 4);
		k++;
	}
	if (xi < 0)
		return false;
	*group_n = k;
	return power ? fence_may_power_off(m, k, xi, &s->fence, mono, in_touch)
		     : fence_may_declare_down(m, k, xi, &s->fence, mono, in_touch);
}

/* May node n be declared DOWN now (fence.h)? By every witness group its
 * agent may hold: the one it said it holds and the last sent it (with
 * no beat in between, it holds one of the two); by the group it is in
 * now when it was never sent one (it renews nothing by peers). *in_touch:
 * how many of the others of the group weighed last the server knows hear
 * it; *unknown: its agent holds a group the server does not know. */
static bool may_declare_down(struct state *s, const struct snode *n, int64_t mono, bool power,
			     int *in_touch, int *group_n, bool *unknown)
{
	const struct node_witness *sent = &n->rec.witness_sent, *acked = &n->rec.witness_acked;
	*unknown = acked->n < 0;
	if (sent->id[0] || acked->id[0]) {
		bool ok = true;
		if (acked->id[0])
			ok = may_by(s, n, acked, mono, power, in_touch, group_n);
		if (ok && sent->id[0] && strcmp(sent->id, acked->id) != 0)
			ok = may_by(s, n, sent, mono, power, in_touch, group_n);
		return ok;
	}
	struct node_witness cur;
	witness_of(s, &s->groups[n->group], &cur);
	return may_by(s, n, &cur, mono, power, in_touch, group_n);
}

/* Power fencing (config.json's "power_fence"; fence.h): a node with work
 * that has been silent for power_after while its group hears the server
 * is powered off by the operator's command, which the shell runs
 * (STATE_EV_POWER_FENCE). */
static void check_power(struct state *s, struct snode *n, int64_t mono)
{
	int in_touch = 0, gn = 1;
	bool unknown = false;
	/* no sooner than its own margin and power_after (fence_power_after
	 * asks more: the group's margins) */
	if (!s->fence.power || n->power_fencing || !n->nparts ||
	    mono - n->last_seen_ms <
		    MAX(s->fence.power_after_ms, fence_margin(&n->fence, &s->fence)) ||
	    mono < n->power_retry_mono ||
	    !may_declare_down(s, n, mono, true, &in_touch, &gn, &unknown))
		return;
	n->power_fencing = true;
	n->power_silent_ms = mono - n->last_seen_ms;
	log_warn("node %s: silent for %.1fs (it beats every %.1fs) while %d of the %d others of "
		 "its witness group hear the server: powering it off (power_fence), so that its "
		 "jobs can move now",
		 n->rec.inv.name, (double)(mono - n->last_seen_ms) / 1000.0,
		 (double)fence_beat(&n->fence, &s->fence) / 1000.0, in_touch, gn - 1);
	state_raise(s, &(struct state_event){.kind = STATE_EV_POWER_FENCE, .node = n});
}

void state_node_powered_off(struct state *s, const char *name, bool ok, const char *detail,
			    int64_t now, int64_t mono)
{
	struct snode *n = state_node(s, name);
	if (!n || !n->power_fencing)
		return;
	n->power_fencing = false;
	if (!ok) {
		n->power_retry_mono = mono + 60000;
		log_err("node %s: power_fence failed (%s); its jobs wait for the node timeout, "
			"and the command is tried again in a minute",
			name, detail);
		return;
	}
	if (n->live == NODE_LIVE_DOWN)
		return;
	char why[MODEL_REASON_MAX];
	snprintf(why, sizeof(why), "powered off by power_fence after %.1fs of silence",
		 (double)n->power_silent_ms / 1000.0);
	state_node_lost(s, n, why, now);
}

/* One line for a group whose nodes the server holds: an outage of the
 * control plane says so once per group, not once per node. */
static void say_held(struct state *s, struct sgroup *g)
{
	g->news = false;
	struct strbuf b;
	strbuf_init(&b);
	int held = 0;
	const char *one = "";
	for (int i = 0; i < g->n; i++) {
		const struct snode *o = s->nodes[s->group_nodes[g->first + i]];
		if (o->live != NODE_LIVE_UNREACHABLE)
			continue;
		if (held < 8)
			strbuf_addf(&b, "%s%s", held ? ", " : "", o->rec.inv.name);
		else if (held == 8)
			strbuf_addstr(&b, ", ...");
		one = o->rec.inv.name;
		held++;
	}
	const char *topo = s->nodes[s->group_nodes[g->first]]->rec.inv.topology;
	log_warn("lost contact with %d of %d nodes of witness group %s%s%s%s (%s): holding their "
		 "jobs, which run on by their peers if the control plane is what is cut off "
		 "(tenk nodes down %s, for a node known dead)",
		 held, g->n, g->id, topo[0] ? " (" : "", topo, topo[0] ? ")" : "", b.buf, one);
	strbuf_release(&b);
}

void state_check_nodes(struct state *s, int64_t now, int64_t mono)
{
	if (s->groups_stale)
		state_groups_assign(s);
	for (int i = 0; i < s->nnodes; i++) {
		struct snode *n = s->nodes[i];
		if (n->live == NODE_LIVE_DOWN)
			continue;
		if (mono - n->last_seen_ms <= s->cfg.node_timeout_ms) {
			check_power(s, n, mono);
			continue;
		}
		int in_touch = 0, gn = 1;
		bool unknown = false;
		if (may_declare_down(s, n, mono, false, &in_touch, &gn, &unknown)) {
			char why[128];
			snprintf(why, sizeof(why), "no heartbeat from its agent for %llds",
				 (long long)(s->cfg.node_timeout_ms / 1000));
			state_node_lost(s, n, why, now);
		} else if (n->live != NODE_LIVE_UNREACHABLE) {
			/* its group is not enough in touch to know it fences itself:
			 * the control plane may be what is cut off */
			n->live = NODE_LIVE_UNREACHABLE;
			s->groups[n->group].news = true;
			if (unknown)
				log_info("node %s is UNREACHABLE: silent for %llds, and its agent "
					 "holds a witness group this server never sent",
					 n->rec.inv.name,
					 (long long)(s->cfg.node_timeout_ms / 1000));
			else
				log_info("node %s is UNREACHABLE: silent for %llds, and %d of the "
					 "%d others of its witness group hear the server (%d "
					 "needed)",
					 n->rec.inv.name,
					 (long long)(s->cfg.node_timeout_ms / 1000), in_touch,
					 gn - 1, gn > 1 ? (gn + 1) / 2 : 1);
			state_want_pass(s);
		}
	}
	for (int g = 0; g < s->ngroups; g++)
		if (s->groups[g].news)
			say_held(s, &s->groups[g]);
	for (int i = 0; i < s->nfenced; i++) {
		struct sjob *j = s->fenced[i];
		if (mono < j->fenced_until)
			continue;
		j->fenced_until = 0;
		s->fenced[i--] = s->fenced[--s->nfenced];
		if (j->pending)
			state_want_pass(s);
	}
	state_check_failures(s, now, mono);
}

/* ---- registration and operators ---------------------------------------------------- */

struct snode *state_node_insert(struct state *s, const struct node_record *rec)
{
	struct snode *n = xcalloc(1, sizeof(*n));
	n->rec = *rec;
	fence_member_init(&n->fence, s->mono_ms);
	s->groups_stale = true;
	xgrow(&s->nodes, &s->nodes_alloc, (size_t)s->nnodes + 1, sizeof(*s->nodes));
	n->index = s->nnodes;
	s->nodes[s->nnodes++] = n;
	s->nodes_gen++;
	tk_map_put(&s->node_by_name, n->rec.inv.name, n);
	if (n->rec.cred_sha256[0])
		tk_map_put(&s->node_by_cred, n->rec.cred_sha256, n);
	state_node_sync_devs(n);
	state_node_labels_sync(s, n);
	return n;
}

void state_node_labels_sync(struct state *s, struct snode *n)
{
	char was[MODEL_LABELS_MAX];
	snprintf(was, sizeof(was), "%s", n->labels);
	char gpu[MODEL_LABELS_MAX], base[MODEL_LABELS_MAX];
	node_labels_with_gpu(n->rec.inv.labels,
			     n->rec.inv.naccel ? n->rec.inv.accel[0].model : NULL, gpu,
			     sizeof(gpu));
	node_labels_beneath(gpu, "fabric", node_fabric_of(&n->rec.inv), base, sizeof(base));
	node_labels_merge(base, n->rec.labels_set, n->labels, sizeof(n->labels));
	uint64_t pools = sched_config_pool_node(&s->sched, n->labels);
	if (strcmp(was, n->labels) != 0 || pools != n->pools) {
		n->pools = pools;
		s->nodes_gen++; /* what could ever run where changed */
		node_bump(s, n);
		state_want_pass(s);
	}
}

void state_node_credential(struct state *s, struct snode *n, const char *sha256)
{
	if (n->rec.cred_sha256[0])
		tk_map_del(&s->node_by_cred, n->rec.cred_sha256);
	snprintf(n->rec.cred_sha256, sizeof(n->rec.cred_sha256), "%s", sha256 ? sha256 : "");
	if (sha256) {
		tk_map_put(&s->node_by_cred, n->rec.cred_sha256, n);
		n->rec.admit = n->rec.revoked = false; /* an agent joined with it */
	}
	state_node_dirty(s, n);
}

void state_node_admit(struct state *s, struct snode *n)
{
	n->rec.admit = true;
	state_node_dirty(s, n);
}

void state_node_revoke(struct state *s, struct snode *n)
{
	state_node_credential(s, n, NULL);
	n->rec.revoked = true;
	n->rec.admit = false;
}

void state_agent_stopping(struct state *s, struct snode *n)
{
	if (n->agent_stopping)
		return;
	/* its jobs go on in their shims; nothing new is placed here until an
	 * agent registers again */
	log_info("node %s: its agent is stopping", n->rec.inv.name);
	n->agent_stopping = true;
	state_want_pass(s);
}

/* n's stack is now what its agent said, where it had said one before
 * (old): a change is in its history, and drops its validation (which the
 * caller starts again, valid_node_registered, where the cluster requires
 * it). */
static void stack_changed(struct state *s, struct snode *n, const struct node_stack *old,
			  int64_t now)
{
	char what[MODEL_NODE_EVENT_DETAIL];
	if (!node_stack_diff(old, &n->rec.inv.stack, what, sizeof(what)))
		return;
	struct node_event ev = {.at_ms = now, .kind = NODE_EV_STACK_CHANGED};
	snprintf(ev.detail, sizeof(ev.detail), "%s", what);
	node_record_event(&n->rec, &ev);
	n->stack_gen++;
	log_info("node %s: its software stack changed: %s", n->rec.inv.name, what);
	if (n->rec.verdict != VERDICT_NONE) {
		log_info("node %s: its validation of %lld no longer holds%s", n->rec.inv.name,
			 (long long)n->rec.verdict_job,
			 s->sched.require_validation ? "; it takes no work until it passes again"
						     : "");
		valid_verdict_put(s, n, VERDICT_NONE, 0, 0);
	}
	state_node_dirty(s, n);
	state_want_pass(s);
}

void state_node_stack(struct state *s, struct snode *n, const struct node_stack *st, int64_t now)
{
	if (n->rec.inv.has_stack && node_stack_same(&n->rec.inv.stack, st))
		return;
	struct node_stack old = n->rec.inv.stack;
	bool had = n->rec.inv.has_stack;
	n->rec.inv.stack = *st;
	n->rec.inv.has_stack = true;
	state_node_dirty(s, n);
	if (had) {
		stack_changed(s, n, &old, now);
		valid_node_registered(s, n, now);
	}
}

struct snode *state_register(struct state *s, const struct node_inventory *inv,
			     const char *agent_id, const struct wire_attempt_ref *kept, int nkept,
			     int64_t now, int64_t mono)
{
	struct snode *n = state_node(s, inv->name);
	if (!n) {
		struct node_record rec;
		memset(&rec, 0, sizeof(rec));
		rec.inv = *inv;
		rec.joined_ms = now;
		n = state_node_insert(s, &rec);
		log_info("node %s joined: %d CPUs, %lld MiB, %d accelerators", inv->name, inv->cpus,
			 (long long)inv->mem_mib, inv->naccel);
	} else {
		/* a shim of the old agent that the new one did not find may run
		 * on until the lease the old one last got from us ends */
		if (strcmp(n->rec.agent_id, agent_id) != 0 && n->nparts > 0)
			lose_parts(s, n, "its agent restarted and no longer runs them", kept, nkept,
				   n->last_seen_ms + s->cfg.node_timeout_ms, now);
		/* the name is the map's key: it does not change */
		struct node_stack old = n->rec.inv.stack;
		bool had = n->rec.inv.has_stack;
		n->rec.inv = *inv;
		if (had && inv->has_stack)
			stack_changed(s, n, &old, now);
		if (n->live != NODE_LIVE_UP)
			log_info("node %s is UP", inv->name);
	}
	snprintf(n->rec.agent_id, sizeof(n->rec.agent_id), "%s", agent_id);
	n->witness_seq = 0; /* a new agent counts its beats from 1 */
	n->rec.registered_ms = now;
	n->agent_stopping = false;
	n->live = NODE_LIVE_UP;
	n->last_seen_ms = mono;
	fence_member_heard(&n->fence, &s->fence, INT64_MIN, mono);
	state_node_sync_devs(n);
	state_node_labels_sync(s, n);
	s->nodes_gen++; /* its inventory may differ */
	node_bump(s, n);
	state_node_dirty(s, n);
	state_want_pass(s);
	valid_node_registered(s, n, now);
	/* limits the cluster requires and it cannot enforce: drained before
	 * any pass, not at its first beat */
	state_node_faults(s, n, NULL, 0, now, mono);
	return n;
}

void state_drain(struct state *s, struct snode *n, enum drain_source source, const char *reason)
{
	assert(source != DRAIN_NONE && source < DRAIN_SOURCE_MAX);
	n->rec.drained = true;
	n->rec.drain_source = source;
	snprintf(n->rec.drain_reason, sizeof(n->rec.drain_reason), "%s", reason);
	state_node_dirty(s, n);
	log_info("node %s drained: %s", n->rec.inv.name, reason);
}

void state_resume(struct state *s, struct snode *n)
{
	n->rec.drained = false;
	n->rec.drain_source = DRAIN_NONE;
	n->rec.drain_reason[0] = '\0';
	state_node_dirty(s, n);
	state_want_pass(s);
	log_info("node %s resumed", n->rec.inv.name);
}

/* ---- images (tenk images) ---------------------------------------------------------- */

void state_node_images(struct state *s, struct snode *n, struct wire_heartbeat *m)
{
	free(n->images);
	n->images = m->images; /* taken */
	n->nimages = m->nimages;
	m->images = NULL;
	m->nimages = 0;
	n->images_known = true;
	for (int i = 0; i < n->npulls; i++) {
		struct wire_pull *p = &n->pulls[i];
		for (int k = 0; k < m->npulls && p->state == PULL_RUNNING; k++)
			if (strcmp(m->pulls[k].ref, p->ref) == 0 &&
			    m->pulls[k].state != PULL_RUNNING) {
				p->state = m->pulls[k].state;
				snprintf(p->detail, sizeof(p->detail), "%s", m->pulls[k].detail);
			}
	}
}

double state_attempt_peak_flops(struct state *s, const struct attempt *a)
{
	double peak = 0;
	for (int k = 0; k < a->nnodes; k++) {
		const struct snode *n = state_node(s, a->nodes[k].name);
		for (int d = 0; n && d < a->nodes[k].ndev; d++)
			for (int i = 0; i < n->rec.inv.naccel; i++)
				if (n->rec.inv.accel[i].index == a->nodes[k].devs[d])
					peak += n->rec.inv.accel[i].tflops * 1e12 *
						(double)a->nodes[k].milli / MODEL_MILLI;
	}
	return peak;
}

bool state_job_mfu(struct state *s, const struct sjob *j, double *ratio, double *achieved,
		   double *peak)
{
	const struct attempt *a = j->job.nattempts ? job_current_attempt(&j->job) : NULL;
	*achieved = a ? goodput_flops(a) : -1;
	*peak = *achieved > 0 ? state_attempt_peak_flops(s, a) : 0;
	if (*achieved <= 0 || *peak <= 0)
		return false;
	*ratio = *achieved / *peak;
	return true;
}

json_t *state_mfu_pack(struct state *s, const struct sjob *j)
{
	double ratio, achieved, peak;
	if (!state_job_mfu(s, j, &ratio, &achieved, &peak))
		return NULL;
	return json_pack("{s:f, s:f, s:f}", "ratio", ratio, "achieved_tflops", achieved / 1e12,
			 "peak_tflops", peak / 1e12);
}

void state_node_gpus(struct state *s, struct snode *n, const struct wire_heartbeat *m, int64_t now)
{
	if (!m->ngpus && !n->ngpus)
		return;
	if (m->ngpus != n->ngpus)
		n->gpus = xrealloc(n->gpus, sizeof(*n->gpus) * (size_t)(m->ngpus + 1));
	memcpy(n->gpus, m->gpus, sizeof(*n->gpus) * (size_t)m->ngpus);
	n->ngpus = m->ngpus;
	n->gpus_mono = tk_mono_ms();
	n->gpus_ms = now;
}

const struct wire_gpu *state_node_gpu(const struct state *s, const struct snode *n, int dev)
{
	/* fresh: within a third of the node timeout (three beats at least) */
	if (n->live != NODE_LIVE_UP ||
	    s->mono_ms - n->gpus_mono > MAX(s->cfg.node_timeout_ms / 3, 1))
		return NULL;
	for (int i = 0; i < n->ngpus; i++)
		if (n->gpus[i].index == dev)
			return &n->gpus[i];
	return NULL;
}

void state_node_pull(struct state *s, struct snode *n, const char *ref)
{
	struct wire_pull *p = NULL;
	for (int i = 0; i < n->npulls && !p; i++)
		if (strcmp(n->pulls[i].ref, ref) == 0)
			p = &n->pulls[i];
	if (!p) {
		if (n->npulls >= WIRE_MAX_IMAGES) {
			/* the oldest goes */
			memmove(n->pulls, n->pulls + 1,
				sizeof(*n->pulls) * (size_t)(n->npulls - 1));
			n->npulls--;
		}
		n->pulls = xrealloc(n->pulls, sizeof(*n->pulls) * (size_t)(n->npulls + 1));
		p = &n->pulls[n->npulls++];
		memset(p, 0, sizeof(*p));
		snprintf(p->ref, sizeof(p->ref), "%s", ref);
	}
	p->state = PULL_RUNNING;
	p->detail[0] = '\0';
	node_bump(s, n);
}

json_t *state_node_images_pack(const struct snode *n)
{
	return json_pack("{s:s, s:o, s:o}", "name", n->rec.inv.name, "images",
			 n->images_known ? wire_images_pack(n->images, n->nimages) : json_null(),
			 "pulls", wire_pulls_pack(n->pulls, n->npulls));
}
