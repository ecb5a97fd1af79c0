/*
 * Restarts in place (DESIGN.md §4): a gang whose task failed, or whose node
 * was lost, keeps its healthy nodes and starts its next attempt there at
 * once, without a pass, a failed node swapped for another with room.
 *
 * From the moment a failure is seen (state_inplace_begin), each node of the
 * failing attempt keeps, as its tasks end there, what the attempt held on
 * it: the node's devices, CPUs and memory stay used and charged to the
 * job's queue (state_inplace_keeps, from state_part_remove), so no pass
 * gives them to another job while the gang stops. Once every task of the
 * attempt has ended, and no fence of it is still running out (invariant A:
 * the next attempt never overlaps the last), state_inplace_tick starts the
 * next attempt on those nodes in their ranks (so MASTER_ADDR stays where
 * node rank 0 survived), with a replacement for a node that failed, was
 * lost, or can no longer take work (drained for a fault, its agent
 * stopping). Where no node can replace one, what was held is given back
 * and the job waits in its queue as any requeued job.
 *
 * The holds live in memory only: after a server restart the job waits in
 * its queue (its place kept), as before restarts in place.
 */
#include "state.h"

#include <stdio.h>
#include <string.h>

static bool wants_inplace(const struct sjob *j, const struct attempt *a)
{
	if (j->job.system || j->job.req.pty)
		return false;
	switch (j->job.req.restart) {
	case RESTART_IN_PLACE:
		return true;
	case RESTART_REQUEUE:
		return false;
	default:
		return a->nnodes > 1;
	}
}

static const struct attempt *from_attempt(const struct sjob *j)
{
	return &j->job.attempts[j->inplace->from - 1];
}

static void unhold(struct state *s, struct sjob *j, int k)
{
	struct inplace *ip = j->inplace;
	if (!ip->held[k])
		return;
	ip->held[k] = false;
	const struct attempt_node *an = &from_attempt(j)->nodes[k];
	struct snode *n = state_node(s, an->name);
	if (n)
		state_node_hold(s, n, j, an, -1);
}

void state_inplace_begin(struct state *s, struct sjob *j, const struct attempt *a,
			 const char *bad_node, int64_t now)
{
	if (!wants_inplace(j, a))
		return;
	if (j->inplace && j->inplace->from != a->number)
		state_inplace_drop(s, j);
	struct inplace *ip = j->inplace;
	if (!ip) {
		ip = xcalloc(1, sizeof(*ip));
		ip->from = a->number;
		ip->nnodes = a->nnodes;
		ip->bad = xcalloc((size_t)a->nnodes, sizeof(bool));
		ip->held = xcalloc((size_t)a->nnodes, sizeof(bool));
		ip->since_ms = now;
		snprintf(ip->why, sizeof(ip->why),
			 "restarting in place: waiting for attempt %d's tasks to stop", a->number);
		j->inplace = ip;
		xgrow(&s->restarting, &s->restarting_alloc, (size_t)s->nrestarting + 1,
		      sizeof(*s->restarting));
		s->restarting[s->nrestarting++] = j;
		log_debug("job %lld: attempt %d restarts in place", (long long)j->job.id,
			  a->number);
	}
	for (int k = 0; bad_node && k < ip->nnodes; k++)
		if (strcmp(a->nodes[k].name, bad_node) == 0) {
			ip->bad[k] = true;
			unhold(s, j, k);
		}
}

bool state_inplace_keeps(struct sjob *j, int attempt, int k)
{
	struct inplace *ip = j->inplace;
	if (!ip || ip->from != attempt || k < 0 || k >= ip->nnodes || ip->bad[k] || ip->held[k])
		return false;
	ip->held[k] = true;
	return true;
}

void state_inplace_drop(struct state *s, struct sjob *j)
{
	struct inplace *ip = j->inplace;
	if (!ip)
		return;
	for (int k = 0; k < ip->nnodes; k++)
		unhold(s, j, k);
	for (int i = 0; i < s->nrestarting; i++)
		if (s->restarting[i] == j) {
			s->restarting[i] = s->restarting[--s->nrestarting];
			break;
		}
	free(ip->bad);
	free(ip->held);
	free(ip);
	j->inplace = NULL;
	state_want_pass(s);
}

/* ---- the next attempt ---------------------------------------------------------------- */

static int node_index(const struct state *s, const struct snode *n)
{
	if (n->index >= 0 && n->index < s->nnodes && s->nodes[n->index] == n)
		return n->index;
	for (int i = 0; i < s->nnodes; i++)
		if (s->nodes[i] == n)
			return i;
	return -1;
}

static bool takes_work(const struct state *s, const struct snode *n)
{
	return state_node_state(s, n) == NODE_UP && !n->agent_stopping;
}

static bool named(char *const *names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

/* Does node n have room now for j's share `an`, on the same devices? */
static bool share_free(const struct state *s, const struct snode *n, const struct sjob *j,
		       const struct attempt_node *an)
{
	const struct job_request *r = &j->job.req;
	if (!takes_work(s, n))
		return false;
	if (r->exclusive) {
		for (int d = 0; d < n->rec.inv.naccel && d < MODEL_MAX_ACCELS; d++)
			if (n->dev_used[d])
				return false;
		return !n->cpus_used && !n->mem_used;
	}
	if (n->rec.inv.cpus - n->cpus_used < r->tasks_per_node * r->cpus_per_task ||
	    n->rec.inv.mem_mib - n->mem_used < r->mem_mib)
		return false;
	for (int d = 0; d < an->ndev; d++)
		if (an->devs[d] >= n->rec.inv.naccel ||
		    MODEL_MILLI - n->dev_used[an->devs[d]] < an->milli)
			return false;
	return true;
}

/* The share on node n like `like` (as many devices, each with milli free,
 * of its model or one the job accepts), into *as; the number of devices
 * that stay free beside it (best fit: fewer is better), or -1. */
static int replacement_fit(const struct state *s, const struct snode *n, const struct sjob *j,
			   const struct attempt_node *like, struct sched_assign *as)
{
	const struct job_request *r = &j->job.req;
	if (!takes_work(s, n) || named(r->exclude, r->nexclude, n->rec.inv.name) ||
	    (r->nnodelist && !named(r->nodelist, r->nnodelist, n->rec.inv.name)))
		return -1;
	if (n->rec.inv.cpus - n->cpus_used < r->tasks_per_node * r->cpus_per_task ||
	    n->rec.inv.mem_mib - n->mem_used < r->mem_mib)
		return -1;
	int got = 0, spare = 0;
	for (int d = 0; d < n->rec.inv.naccel && d < MODEL_MAX_ACCELS; d++) {
		const struct accel *ac = &n->rec.inv.accel[d];
		if (ac->index < 0 || ac->index >= MODEL_MAX_ACCELS)
			continue;
		int free = MODEL_MILLI - n->dev_used[ac->index];
		bool model = r->ngpu_types ? named(r->gpu_types, r->ngpu_types, ac->model)
					   : !like->model[0] || strcmp(ac->model, like->model) == 0;
		if (r->exclusive && n->dev_used[ac->index])
			return -1;
		if (!model || free < like->milli ||
		    (r->gpu_mem_mib && ac->mem_mib < r->gpu_mem_mib))
			continue;
		if (got < like->ndev)
			as->devs[got++] = ac->index;
		else
			spare++;
	}
	if (got < like->ndev || (r->exclusive && (n->cpus_used || n->mem_used)))
		return -1;
	as->ndev = got;
	as->milli = like->milli;
	as->cpus = r->tasks_per_node * r->cpus_per_task;
	as->mem_mib = r->mem_mib;
	as->alone = r->exclusive;
	return spare;
}

static bool in_attempt(const struct attempt *a, const char *name)
{
	for (int k = 0; k < a->nnodes; k++)
		if (strcmp(a->nodes[k].name, name) == 0)
			return true;
	return false;
}

/* Starts j's next attempt in place, or gives up (false: the job waits in
 * its queue, said in *why). What it held is given back either way. */
static bool restart(struct state *s, struct sjob *j, int64_t now, char *why, size_t why_n)
{
	struct inplace *ip = j->inplace;
	const struct attempt *a = from_attempt(j);
	for (int k = 0; k < ip->nnodes; k++)
		unhold(s, j, k);
	struct sched_assign *as = xcalloc((size_t)ip->nnodes, sizeof(*as));
	int *taken = xcalloc((size_t)ip->nnodes, sizeof(int));
	char replaced[MODEL_REASON_MAX] = "";
	bool ok = true;
	for (int k = 0; k < ip->nnodes && ok; k++) {
		const struct attempt_node *an = &a->nodes[k];
		struct snode *n = state_node(s, an->name);
		if (!ip->bad[k] && n && share_free(s, n, j, an)) {
			as[k].node = taken[k] = node_index(s, n);
			as[k].ndev = an->ndev;
			memcpy(as[k].devs, an->devs, sizeof(int) * (size_t)an->ndev);
			as[k].milli = an->milli;
			as[k].cpus = j->job.req.tasks_per_node * j->job.req.cpus_per_task;
			as[k].mem_mib = j->job.req.mem_mib;
			as[k].alone = j->job.req.exclusive;
			continue;
		}
		/* the best fit among the nodes the attempt did not use and this
		 * one has not taken */
		int best = -1, best_spare = 0;
		struct sched_assign try;
		for (int i = 0; i < s->nnodes; i++) {
			struct snode *c = s->nodes[i];
			if (in_attempt(a, c->rec.inv.name))
				continue;
			bool used = false;
			for (int t = 0; t < k; t++)
				used |= taken[t] == i;
			memset(&try, 0, sizeof(try));
			int spare = used ? -1 : replacement_fit(s, c, j, an, &try);
			if (spare >= 0 && (best < 0 || spare < best_spare)) {
				best = i;
				best_spare = spare;
				as[k] = try;
				as[k].node = i;
			}
		}
		if (best < 0) {
			snprintf(why, why_n,
				 "no node is free to take the place of %s (%s): back in its queue",
				 an->name,
				 ip->bad[k] ? "it failed"
				 : n	    ? "it takes no work now"
					    : "it left");
			ok = false;
			break;
		}
		taken[k] = best;
		size_t l = strlen(replaced);
		snprintf(replaced + l, sizeof(replaced) - l, "%s%s by %s", l ? ", " : "", an->name,
			 s->nodes[best]->rec.inv.name);
	}
	if (ok) {
		int from = ip->from;
		char first_replaced[MODEL_NAME_MAX] = "";
		for (int k = 0; k < ip->nnodes && !first_replaced[0]; k++)
			if (strcmp(s->nodes[taken[k]]->rec.inv.name, a->nodes[k].name) != 0)
				snprintf(first_replaced, sizeof(first_replaced), "%s",
					 a->nodes[k].name);
		state_inplace_drop(s, j);
		struct sched_start st = {.nnodes = a->nnodes, .nodes = as};
		state_apply_start(s, j, &st, s->nodes, now);
		struct attempt *b = job_current_attempt(&j->job);
		b->in_place = true;
		snprintf(b->replaced, sizeof(b->replaced), "%s", first_replaced);
		log_info("job %lld: attempt %d starts in place after attempt %d%s%s",
			 (long long)j->job.id, b->number, from, replaced[0] ? ", " : "", replaced);
	}
	free(as);
	free(taken);
	return ok;
}

void state_inplace_tick(struct state *s, int64_t now)
{
	for (int i = 0; i < s->nrestarting; i++) {
		struct sjob *j = s->restarting[i];
		struct inplace *ip = j->inplace;
		const struct attempt *last = job_current_attempt(&j->job);
		bool active = j->job.state == JOB_STARTING || j->job.state == JOB_RUNNING;
		if (active && last && last->number == ip->from)
			continue; /* its failure is still being judged */
		if (j->job.state != JOB_PENDING || j->job.held || !last ||
		    last->number != ip->from) {
			state_inplace_drop(s, j);
			i--;
			continue;
		}
		if (j->fenced_until) {
			snprintf(ip->why, sizeof(ip->why),
				 "restarting in place: waiting until the lease of attempt %d's "
				 "tasks on %s has run out",
				 ip->from, j->fenced_node);
			continue;
		}
		if (!last->ended) {
			snprintf(ip->why, sizeof(ip->why),
				 "restarting in place: waiting for attempt %d's tasks to stop",
				 ip->from);
			continue;
		}
		char why[MODEL_REASON_MAX] = "";
		if (!restart(s, j, now, why, sizeof(why))) {
			log_info("job %lld: %s", (long long)j->job.id, why);
			snprintf(j->job.reason, sizeof(j->job.reason), "%s", why);
			state_inplace_drop(s, j);
			state_job_dirty(s, j);
		}
		/* it left the list, started or back in its queue: the one moved
		 * into its place is next */
		i--;
	}
}
