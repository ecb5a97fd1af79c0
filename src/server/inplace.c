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
		return a->nnodes > 1 || j->job.req.spares > 0;
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
			 const char *bad_node)
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

/* ---- spares ------------------------------------------------------------------------- */

static void spared_add(struct state *s, struct sjob *j)
{
	for (int i = 0; i < s->nspared; i++)
		if (s->spared[i] == j)
			return;
	xgrow(&s->spared, &s->spared_alloc, (size_t)s->nspared + 1, sizeof(*s->spared));
	s->spared[s->nspared++] = j;
}

void state_spare_take(struct state *s, struct sjob *j, struct snode *n,
		      const struct sched_assign *as)
{
	j->spares = xrealloc(j->spares, sizeof(*j->spares) * (size_t)(j->nspares + 1));
	struct attempt_node *sp = &j->spares[j->nspares++];
	memset(sp, 0, sizeof(*sp));
	snprintf(sp->name, sizeof(sp->name), "%s", n->rec.inv.name);
	sp->ndev = as->ndev;
	memcpy(sp->devs, as->devs, sizeof(int) * (size_t)as->ndev);
	sp->milli = as->milli;
	for (int d = 0; d < n->rec.inv.naccel && as->ndev > 0; d++)
		if (n->rec.inv.accel[d].index == as->devs[0])
			snprintf(sp->model, sizeof(sp->model), "%s", n->rec.inv.accel[d].model);
	state_node_hold(s, n, j, sp, +1);
	spared_add(s, j);
	state_job_dirty(s, j);
	log_debug("job %lld holds %s as a spare", (long long)j->job.id, sp->name);
}

/* Gives back spare i of j (its node may be gone). */
static void spare_give_back(struct state *s, struct sjob *j, int i)
{
	struct snode *n = state_node(s, j->spares[i].name);
	if (n)
		state_node_hold(s, n, j, &j->spares[i], -1);
	j->spares[i] = j->spares[--j->nspares];
	state_job_dirty(s, j);
}

void state_spares_release(struct state *s, struct sjob *j)
{
	while (j->nspares)
		spare_give_back(s, j, j->nspares - 1);
	free(j->spares);
	j->spares = NULL;
	for (int i = 0; i < s->nspared; i++)
		if (s->spared[i] == j) {
			s->spared[i] = s->spared[--s->nspared];
			break;
		}
}

json_t *state_node_spare_for(const struct state *s, const struct snode *n)
{
	json_t *ids = NULL;
	for (int i = 0; i < s->nspared; i++)
		for (int k = 0; k < s->spared[i]->nspares; k++)
			if (strcmp(s->spared[i]->spares[k].name, n->rec.inv.name) == 0) {
				if (!ids)
					ids = json_array();
				json_array_append_new(ids, json_integer(s->spared[i]->job.id));
			}
	return ids;
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

/* The node (its index, -1: none) with room for a share like `like`, in the
 * cluster's spare pool or out of it, that the attempt a did not use, that
 * is not among taken[0..ntaken) or j's spares, leaving the fewest devices
 * free beside it; its assignment in *ret. */
static int best_fit(const struct state *s, const struct sjob *j, const struct attempt *a,
		    const struct attempt_node *like, bool pool, const int *taken, int ntaken,
		    struct sched_assign *ret)
{
	int best = -1, best_spare = 0;
	for (int i = 0; i < s->nnodes; i++) {
		const struct snode *c = s->nodes[i];
		bool out = c->pool_spare != pool || in_attempt(a, c->rec.inv.name);
		for (int t = 0; t < ntaken && !out; t++)
			out = taken[t] == i;
		for (int k = 0; k < j->nspares && !out; k++)
			out = strcmp(j->spares[k].name, c->rec.inv.name) == 0;
		struct sched_assign try;
		memset(&try, 0, sizeof(try));
		int spare = out ? -1 : replacement_fit(s, c, j, like, &try);
		if (spare >= 0 && (best < 0 || spare < best_spare)) {
			best = i;
			best_spare = spare;
			*ret = try;
			ret->node = i;
		}
	}
	return best;
}

/* j's share `an` on node n (the same devices) as an assignment; n's index. */
static int assign_share(const struct state *s, const struct snode *n, const struct sjob *j,
			const struct attempt_node *an, struct sched_assign *as)
{
	as->node = node_index(s, n);
	as->ndev = an->ndev;
	memcpy(as->devs, an->devs, sizeof(int) * (size_t)an->ndev);
	as->milli = an->milli;
	as->cpus = j->job.req.tasks_per_node * j->job.req.cpus_per_task;
	as->mem_mib = j->job.req.mem_mib;
	as->alone = j->job.req.exclusive;
	return as->node;
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
			taken[k] = assign_share(s, n, j, an, &as[k]);
			continue;
		}
		/* a spare of its own, where one can still take work */
		bool got = false;
		while (j->nspares && !got) {
			struct attempt_node sp = j->spares[0];
			spare_give_back(s, j, 0);
			struct snode *c = state_node(s, sp.name);
			if (!c || !share_free(s, c, j, &sp))
				continue;
			taken[k] = assign_share(s, c, j, &sp, &as[k]);
			got = true;
			size_t l = strlen(replaced);
			snprintf(replaced + l, sizeof(replaced) - l, "%s%s by spare %s",
				 l ? ", " : "", an->name, sp.name);
		}
		if (got)
			continue;
		/* the best fit among the nodes the attempt did not use and this
		 * one has not taken: the cluster's spare pool first */
		int best = best_fit(s, j, a, an, true, taken, k, &as[k]);
		if (best < 0)
			best = best_fit(s, j, a, an, false, taken, k, &as[k]);
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
		snprintf(replaced + l, sizeof(replaced) - l, "%s%s by %s%s", l ? ", " : "",
			 an->name, s->nodes[best]->pool_spare ? "the pool's spare " : "",
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
		for (int k = 0; k < a->nnodes; k++)
			s->nodes[taken[k]]->pool_spare = false;
		struct sched_start st = {.nnodes = a->nnodes, .nodes = as};
		state_apply_start(s, j, &st, s->nodes, now);
		struct attempt *b = job_current_attempt(&j->job);
		b->in_place = true;
		snprintf(b->replaced, sizeof(b->replaced), "%s", first_replaced);
		log_info("job %lld: attempt %d starts in place after attempt %d%s%s",
			 (long long)j->job.id, b->number, from, replaced[0] ? ", " : "", replaced);
	} else {
		state_spares_release(s, j); /* a pass places it with new ones */
	}
	free(as);
	free(taken);
	return ok;
}

/* Tops up j's spares from free nodes (a spare that can no longer take
 * work is given back first), each with the share its attempt's first node
 * has, the best fit. */
static void spares_refill(struct state *s, struct sjob *j)
{
	const struct attempt *a = job_current_attempt(&j->job);
	for (int i = 0; i < j->nspares; i++) {
		struct snode *n = state_node(s, j->spares[i].name);
		if (!n || !takes_work(s, n)) {
			log_info("job %lld: spare %s can take no work; given back",
				 (long long)j->job.id, j->spares[i].name);
			spare_give_back(s, j, i--);
		}
	}
	while (a && j->nspares < j->job.req.spares) {
		struct sched_assign pick;
		int best = best_fit(s, j, a, &a->nodes[0], false, NULL, 0, &pick);
		if (best < 0)
			return;
		state_spare_take(s, j, s->nodes[best], &pick);
	}
}

static const char *node_model(const struct snode *n)
{
	return n->rec.inv.naccel ? n->rec.inv.accel[0].model : "";
}

static bool idle(const struct snode *n)
{
	if (n->nparts || n->cpus_used || n->mem_used)
		return false;
	for (int d = 0; d < n->rec.inv.naccel && d < MODEL_MAX_ACCELS; d++)
		if (n->dev_used[d])
			return false;
	return true;
}

/* Keeps the cluster's spare pool ("spares" in config.json) at its size:
 * a pool node that can no longer take work, or is over its model's
 * number, goes back to the passes; an idle node of a model short of
 * spares joins it. */
static void pool_refill(struct state *s)
{
	const struct sched_config *c = &s->sched;
	int have[MODEL_MAX_SPARE_MODELS] = {0};
	for (int i = 0; i < s->nnodes; i++) {
		struct snode *n = s->nodes[i];
		if (!n->pool_spare)
			continue;
		int m = -1;
		for (int k = 0; k < c->nspare_pool && m < 0; k++)
			if (strcmp(c->spare_pool[k].model, node_model(n)) == 0)
				m = k;
		if (m < 0 || have[m] >= c->spare_pool[m].nodes || !takes_work(s, n) || !idle(n)) {
			n->pool_spare = false;
			state_want_pass(s);
			log_info("node %s leaves the spare pool", n->rec.inv.name);
			continue;
		}
		have[m]++;
	}
	for (int k = 0; k < c->nspare_pool; k++)
		for (int i = 0; i < s->nnodes && have[k] < c->spare_pool[k].nodes; i++) {
			struct snode *n = s->nodes[i];
			if (n->pool_spare || !takes_work(s, n) || !idle(n) ||
			    strcmp(node_model(n), c->spare_pool[k].model) != 0)
				continue;
			n->pool_spare = true;
			have[k]++;
			log_info("node %s joins the spare pool (%s)", n->rec.inv.name,
				 c->spare_pool[k].model);
		}
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
	for (int i = 0; i < s->nspared; i++) {
		struct sjob *j = s->spared[i];
		if ((j->job.state == JOB_STARTING || j->job.state == JOB_RUNNING) && !j->inplace)
			spares_refill(s, j);
	}
	pool_refill(s);
}
