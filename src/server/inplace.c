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
		return a->nnodes > 1 || j->job.req.spares > 0 || j->job.req.nodes_max > 0;
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

/* What its spares hold, those lent out aside (their borrowers pay). */
static int64_t spares_milli(const struct sjob *j, int *nodes)
{
	int64_t milli = 0;
	*nodes = 0;
	for (int i = 0; i < j->nspares; i++)
		if (!j->spares_lent[i]) {
			milli += (int64_t)j->spares[i].ndev * j->spares[i].milli;
			++*nodes;
		}
	return milli;
}

/* Charges the spares' idle devices to j's newest attempt, up to now. */
static void spares_charge(struct sjob *j, int64_t now)
{
	struct attempt *a = job_current_attempt(&j->job);
	if (a && j->spares_since && now > j->spares_since) {
		int nodes;
		a->spare_mdev_ms += (now - j->spares_since) * spares_milli(j, &nodes);
		a->spare_node_ms += (now - j->spares_since) * nodes;
	}
	j->spares_since = now;
}

void state_spare_held(const struct sjob *j, const struct attempt *a, int64_t now, int64_t *mdev_ms,
		      int64_t *node_ms)
{
	*mdev_ms = a->spare_mdev_ms;
	*node_ms = a->spare_node_ms;
	if (a == job_current_attempt(&j->job) && j->spares_since && now > j->spares_since) {
		int nodes;
		*mdev_ms += (now - j->spares_since) * spares_milli(j, &nodes);
		*node_ms += (now - j->spares_since) * nodes;
	}
}

void state_spare_take(struct state *s, struct sjob *j, struct snode *n,
		      const struct sched_assign *as, int64_t now)
{
	spares_charge(j, now);
	j->spares = xrealloc(j->spares, sizeof(*j->spares) * (size_t)(j->nspares + 1));
	j->spares_lent =
		xrealloc(j->spares_lent, sizeof(*j->spares_lent) * (size_t)(j->nspares + 1));
	j->spares_lent[j->nspares] = 0;
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

/* Gives back spare i of j (its node may be gone); one lent out is its
 * borrower's from now on. */
static void spare_give_back(struct state *s, struct sjob *j, int i, int64_t now)
{
	spares_charge(j, now);
	struct snode *n = state_node(s, j->spares[i].name);
	struct sjob *b = j->spares_lent[i] ? state_job(s, j->spares_lent[i]) : NULL;
	if (b)
		b->borrowed_from = 0;
	else if (n)
		state_node_hold(s, n, j, &j->spares[i], -1);
	j->spares[i] = j->spares[--j->nspares];
	j->spares_lent[i] = j->spares_lent[j->nspares];
	state_job_dirty(s, j);
}

void state_spares_release(struct state *s, struct sjob *j, int64_t now)
{
	while (j->nspares)
		spare_give_back(s, j, j->nspares - 1, now);
	free(j->spares);
	j->spares = NULL;
	free(j->spares_lent);
	j->spares_lent = NULL;
	for (int i = 0; i < s->nspared; i++)
		if (s->spared[i] == j) {
			s->spared[i] = s->spared[--s->nspared];
			break;
		}
}

json_t *state_node_spare_lent(const struct state *s, const struct snode *n)
{
	json_t *ids = NULL;
	for (int i = 0; i < s->nspared; i++)
		for (int k = 0; k < s->spared[i]->nspares; k++)
			if (s->spared[i]->spares_lent[k] &&
			    strcmp(s->spared[i]->spares[k].name, n->rec.inv.name) == 0) {
				if (!ids)
					ids = json_array();
				json_array_append_new(ids,
						      json_integer(s->spared[i]->spares_lent[k]));
			}
	return ids;
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

static bool in_attempt(const struct attempt *a, const char *name)
{
	for (int k = 0; k < a->nnodes; k++)
		if (strcmp(a->nodes[k].name, name) == 0)
			return true;
	return false;
}

/* What j's share `an` needs of the node that holds it (sched_replace). */
static struct sched_share share_of(const struct sjob *j, const struct attempt_node *an)
{
	const struct job_request *r = &j->job.req;
	return (struct sched_share){
		.ndev = an->ndev,
		.milli = an->milli,
		.model = an->model,
		.models = (const char *const *)r->gpu_types,
		.nmodels = r->ngpu_types,
		.dev_mem_mib = r->gpu_mem_mib,
		.cpus = r->tasks_per_node * r->cpus_per_task,
		.mem_mib = r->mem_mib,
		.alone = r->exclusive,
		.exclude = (const char *const *)r->exclude,
		.nexclude = r->nexclude,
		.nodelist = (const char *const *)r->nodelist,
		.nnodelist = r->nnodelist,
		.max_switches = r->switches,
		.constraint = r->constraint,
		.tolerate = r->tolerate,
		.pools = j->sj.pools,
		.within_depth = j->sj.within_depth,
		.spread_depth = j->sj.spread_depth,
		.spread_max = j->sj.spread_max,
	};
}

/* j's share `an` on node n (index i; -1: gone) as an assignment. */
static void assign_of(const struct attempt_node *an, int i, struct sched_assign *as)
{
	memset(as, 0, sizeof(*as));
	as->node = i;
	as->ndev = an->ndev;
	memcpy(as->devs, an->devs, sizeof(int) * (size_t)an->ndev);
	as->milli = an->milli;
}

static void add_replaced(char *buf, size_t n, const char *from, const char *how, const char *to)
{
	size_t l = strlen(buf);
	snprintf(buf + l, n - l, "%s%s by %s%s", l ? ", " : "", from, how, to);
}

/* Starts j's next attempt in place, or gives up (false: the job waits in
 * its queue, said in *why). What it held is given back either way. Which
 * node takes a failed one's place is sched_replace's choice, as in the
 * simulator. */
static bool restart(struct state *s, struct sjob *j, int64_t now, char *why, size_t why_n)
{
	struct inplace *ip = j->inplace;
	const struct attempt *a = from_attempt(j);
	for (int k = 0; k < ip->nnodes; k++)
		unhold(s, j, k);
	/* its spares given back, to be taken again where unused */
	/* (those lent out stay so: none of them was needed, or the tick would
	 * have claimed it first) */
	int nsp = 0;
	struct attempt_node *sp = xcalloc((size_t)j->nspares + 1, sizeof(*sp));
	for (int i = j->nspares - 1; i >= 0; i--)
		if (!j->spares_lent[i]) {
			sp[nsp++] = j->spares[i];
			spare_give_back(s, j, i, now);
		}
	struct sched_node *view = state_sched_view(s);
	bool *pool = xcalloc((size_t)s->nnodes + 1, sizeof(bool));
	bool *out = xcalloc((size_t)s->nnodes + 1, sizeof(bool));
	bool *scratch = xcalloc((size_t)s->nnodes + 1, sizeof(bool));
	struct sched_assign *spa = xcalloc((size_t)nsp + 1, sizeof(*spa));
	/* the pool's spares lent out are claimed before (claim_pool), never
	 * shared with their borrowers */
	for (int i = 0; i < s->nnodes; i++) {
		pool[i] = s->nodes[i]->pool_spare && !s->nodes[i]->pool_lent_to;
		out[i] = s->nodes[i]->pool_lent_to != 0;
	}
	for (int k = 0; k < a->nnodes; k++) {
		struct snode *n = state_node(s, a->nodes[k].name);
		if (n)
			out[node_index(s, n)] = true;
	}
	for (int i = 0; i < nsp; i++) {
		struct snode *n = state_node(s, sp[i].name);
		assign_of(&sp[i], n ? node_index(s, n) : -1, &spa[i]);
		if (n)
			out[spa[i].node] = true;
	}
	/* the nodes of windows in its way (tenk reserve): neither kept nor
	 * taken, as a pass would not place it there */
	bool *off = xcalloc((size_t)s->nnodes + 1, sizeof(bool));
	state_windows_collect(s);
	for (int i = 0; i < s->nwins; i++)
		if (state_window_in_way(s, &s->wins[i], j, now))
			for (int k = 0; k < s->wins[i].nnodes; k++)
				off[s->wins[i].nodes[k]] = out[s->wins[i].nodes[k]] = true;
	struct sched_assign *as = xcalloc((size_t)ip->nnodes, sizeof(*as));
	char replaced[MODEL_REASON_MAX] = "";
	bool ok = true;
	int next_sp = 0;
	/* the nodes it keeps first, then a place for each of the others, the
	 * gang's nodes so far beside it (--switches) */
	bool *kept = xcalloc((size_t)ip->nnodes, sizeof(bool));
	int *with = xcalloc((size_t)ip->nnodes + MAX(ip->grow, 0) + 1, sizeof(int)), nwith = 0;
	for (int k = 0; k < ip->nnodes; k++) {
		const struct attempt_node *an = &a->nodes[k];
		struct snode *n = state_node(s, an->name);
		struct sched_share w = share_of(j, an);
		assign_of(an, n ? node_index(s, n) : -1, &as[k]);
		if (!ip->bad[k] && n && !off[as[k].node] &&
		    sched_share_free(&view[as[k].node], &w, &as[k])) {
			as[k].cpus = w.cpus;
			as[k].mem_mib = w.mem_mib;
			as[k].alone = w.alone;
			kept[k] = true;
			with[nwith++] = as[k].node;
		}
	}
	/* an elastic gang goes on without a node nothing replaces, down to
	 * its minimum */
	bool *dropped = xcalloc((size_t)ip->nnodes, sizeof(bool));
	int ndropped = 0;
	for (int k = 0; k < ip->nnodes && ok; k++) {
		if (kept[k])
			continue;
		const struct attempt_node *an = &a->nodes[k];
		struct snode *n = state_node(s, an->name);
		struct sched_share w = share_of(j, an);
		w.with = with;
		w.nwith = nwith;
		int used;
		enum sched_from from = sched_replace(view, s->nnodes, pool, out, &w, spa + next_sp,
						     nsp - next_sp, &used, scratch, &as[k]);
		if (from == SCHED_FROM_NONE && j->job.req.nodes_max &&
		    ip->nnodes - ndropped - 1 >= j->job.req.nodes) {
			dropped[k] = true;
			ndropped++;
			size_t l = strlen(replaced);
			snprintf(replaced + l, sizeof(replaced) - l, "%s%s left out", l ? ", " : "",
				 an->name);
			continue;
		}
		if (from == SCHED_FROM_NONE) {
			snprintf(why, why_n,
				 "no node is free to take the place of %s (%s): back in its queue",
				 an->name,
				 ip->bad[k]		? "it failed"
				 : n && off[as[k].node] ? "a reservation keeps the job off it"
				 : n			? "it takes no work now"
							: "it left");
			ok = false;
			break;
		}
		if (from == SCHED_FROM_SPARE)
			next_sp += used + 1; /* those before it can no longer hold a share */
		out[as[k].node] = true;
		with[nwith++] = as[k].node;
		add_replaced(replaced, sizeof(replaced), an->name,
			     from == SCHED_FROM_SPARE  ? "spare "
			     : from == SCHED_FROM_POOL ? "the pool's spare "
						       : "",
			     s->nodes[as[k].node]->rec.inv.name);
	}
	int grow = ok ? ip->grow : 0;
	if (ok) {
		int from = ip->from;
		char first_replaced[MODEL_NAME_MAX] = "";
		for (int k = 0; k < ip->nnodes && !first_replaced[0]; k++)
			if (dropped[k] ||
			    strcmp(s->nodes[as[k].node]->rec.inv.name, a->nodes[k].name) != 0)
				snprintf(first_replaced, sizeof(first_replaced), "%s",
					 a->nodes[k].name);
		/* the nodes it goes on with, in their ranks; an elastic gang
		 * growing (at a checkpoint) takes free nodes after them */
		int nn = 0;
		as = xrealloc(as, sizeof(*as) * (size_t)(ip->nnodes + MAX(grow, 0) + 1));
		for (int k = 0; k < ip->nnodes; k++)
			if (!dropped[k])
				as[nn++] = as[k];
		struct sched_share w = share_of(j, &a->nodes[0]);
		w.with = with;
		w.nwith = nwith;
		bool *free_ok = xcalloc((size_t)s->nnodes + 1, sizeof(bool));
		for (int i = 0; i < s->nnodes; i++)
			free_ok[i] = !out[i] && !pool[i] && takes_work(s, s->nodes[i]);
		int grown = 0;
		while (grow > 0 && nn < j->job.req.nodes_max) {
			int best = sched_share_best(view, s->nnodes, free_ok, &w, &as[nn]);
			if (best < 0)
				break;
			as[nn].cpus = w.cpus;
			as[nn].mem_mib = w.mem_mib;
			as[nn].alone = w.alone;
			free_ok[best] = false;
			with[nwith++] = best;
			w.nwith = nwith;
			nn++;
			grow--;
			grown++;
		}
		free(free_ok);
		state_inplace_drop(s, j);
		for (int k = 0; k < nn; k++)
			s->nodes[as[k].node]->pool_spare = false;
		struct sched_start st = {.nnodes = nn, .nodes = as};
		int was = a->nnodes;
		a = NULL; /* the job's attempts move */
		state_apply_start(s, j, &st, st.nnodes, s->nodes, now);
		struct attempt *b = job_current_attempt(&j->job);
		b->in_place = true;
		snprintf(b->replaced, sizeof(b->replaced), "%s", first_replaced);
		log_info("job %lld: attempt %d starts in place after attempt %d%s%s",
			 (long long)j->job.id, b->number, from, replaced[0] ? ", " : "", replaced);
		if (nn != was)
			log_info("job %lld: its elastic gang goes on with %d nodes (was %d%s; %d "
				 "to %d)",
				 (long long)j->job.id, nn, was, grown ? ", nodes were free" : "",
				 j->job.req.nodes, j->job.req.nodes_max);
		/* the spares it did not use, held again */
		for (int i = next_sp; i < nsp; i++) {
			struct snode *c = spa[i].node >= 0 ? s->nodes[spa[i].node] : NULL;
			if (c && takes_work(s, c))
				state_spare_take(s, j, c, &spa[i], now);
		}
	} else {
		state_spares_release(s, j, now); /* a pass places it with new ones */
	}
	free(kept);
	free(dropped);
	free(off);
	free(with);
	free(view);
	free(pool);
	free(out);
	free(scratch);
	free(spa);
	free(sp);
	free(as);
	return ok;
}

/* Tops up j's spares from free nodes (a spare that can no longer take
 * work is given back first), each with the share its attempt's first node
 * has, the best fit outside the spare pool. */
static void spares_refill(struct state *s, struct sjob *j, int64_t now)
{
	const struct attempt *a = job_current_attempt(&j->job);
	for (int i = 0; i < j->nspares; i++) {
		struct snode *n = state_node(s, j->spares[i].name);
		if (!n || !takes_work(s, n)) {
			log_info("job %lld: spare %s can take no work; given back",
				 (long long)j->job.id, j->spares[i].name);
			spare_give_back(s, j, i--, now);
		}
	}
	if (!a || j->nspares >= j->job.req.spares)
		return;
	struct sched_node *view = state_sched_view(s);
	bool *ok = xcalloc((size_t)s->nnodes + 1, sizeof(bool));
	for (int i = 0; i < s->nnodes; i++)
		ok[i] = !s->nodes[i]->pool_spare && !in_attempt(a, s->nodes[i]->rec.inv.name);
	for (int i = 0; i < j->nspares; i++) {
		struct snode *n = state_node(s, j->spares[i].name);
		if (n)
			ok[node_index(s, n)] = false;
	}
	/* within --switches of the attempt's nodes */
	int *with = xcalloc((size_t)a->nnodes + 1, sizeof(int)), nwith = 0;
	for (int k = 0; k < a->nnodes; k++) {
		struct snode *n = state_node(s, a->nodes[k].name);
		if (n)
			with[nwith++] = node_index(s, n);
	}
	struct sched_share w = share_of(j, &a->nodes[0]);
	w.with = with;
	w.nwith = nwith;
	while (j->nspares < j->job.req.spares) {
		struct sched_assign pick;
		int best = sched_share_best(view, s->nnodes, ok, &w, &pick);
		if (best < 0)
			break;
		state_spare_take(s, j, s->nodes[best], &pick, now);
		ok[best] = false;
	}
	free(with);
	free(ok);
	free(view);
}

/* Pool spare n leaves the pool: its borrower, if any, is an ordinary job
 * there from now on. */
static void pool_loan_end(struct state *s, struct snode *n)
{
	struct sjob *b = n->pool_lent_to ? state_job(s, n->pool_lent_to) : NULL;
	n->pool_lent_to = 0;
	if (b && b->borrowed_pool) {
		b->borrowed_pool = false;
		b->borrowed_node[0] = '\0';
		state_job_dirty(s, b);
	}
}

/* Keeps the cluster's spare pool ("spares" in config.json) at its size
 * (sched_pool_refill, as the simulator does). */
static void pool_refill(struct state *s)
{
	if (!s->sched.nspare_pool) {
		bool any = false;
		for (int i = 0; i < s->nnodes && !any; i++)
			any = s->nodes[i]->pool_spare;
		if (!any)
			return;
	}
	struct sched_node *view = state_sched_view(s);
	bool *pool = xcalloc((size_t)s->nnodes + 1, sizeof(bool));
	bool *lent = xcalloc((size_t)s->nnodes + 1, sizeof(bool));
	int *changed = xcalloc((size_t)s->nnodes + 1, sizeof(int));
	for (int i = 0; i < s->nnodes; i++) {
		pool[i] = s->nodes[i]->pool_spare;
		lent[i] = s->nodes[i]->pool_lent_to != 0;
	}
	int nch = sched_pool_refill(view, s->nnodes, &s->sched, pool, lent, changed, s->nnodes);
	for (int c = 0; c < nch; c++) {
		struct snode *n = s->nodes[changed[c]];
		n->pool_spare = pool[changed[c]];
		if (n->pool_spare) {
			log_info("node %s joins the spare pool (%s)", n->rec.inv.name,
				 n->rec.inv.naccel ? n->rec.inv.accel[0].model : "");
		} else {
			state_want_pass(s);
			log_info("node %s leaves the spare pool", n->rec.inv.name);
			pool_loan_end(s, n);
		}
	}
	free(changed);
	free(lent);
	free(pool);
	free(view);
}

/* ---- spares lent to preemptible work ------------------------------------------------- */

#define LEND_LOOK 4096 /* waiting jobs a spare looks at for a borrower */

/* What one node of waiting job w needs (sched_replace's share), from its
 * request. */
static struct sched_share share_of_request(const struct sjob *w, struct attempt_node *an)
{
	const struct job_request *r = &w->job.req;
	memset(an, 0, sizeof(*an));
	int64_t per_node = (int64_t)r->tasks_per_node * r->gpu_milli;
	an->ndev = per_node >= MODEL_MILLI ? (int)(per_node / MODEL_MILLI) : per_node ? 1 : 0;
	an->milli = per_node >= MODEL_MILLI ? MODEL_MILLI : (int)per_node;
	return share_of(w, an);
}

/* Could w borrow a spare: a waiting one-node job of a preemptible class,
 * asking nothing a spare's node cannot say yes to alone, that would not
 * hold the node for a restart in place of its own? */
static bool may_borrow(const struct state *s, const struct sjob *w)
{
	const struct job_request *r = &w->job.req;
	return w->job.state == JOB_PENDING && !w->job.held && !w->job.system && !w->inplace &&
	       !w->fenced_until && w->cls >= 0 && s->classes[w->cls].spec.preemptible &&
	       r->nodes == 1 && !r->nodes_max && !r->spares && !r->pty && !r->exclusive &&
	       r->restart != RESTART_IN_PLACE && r->gpu_milli > 0 && !r->ngpu_types;
}

/* The first of the waiting jobs that may borrow node ni (index in view)
 * and fits there, within the devices of `inside` (NULL: any): its share in
 * *as. NULL: none. */
static struct sjob *find_borrower(const struct state *s, const struct sched_node *view, int ni,
				  struct sjob *const *waiting, int nwaiting,
				  const struct attempt_node *inside, struct sched_assign *as)
{
	/* (the first few thousand waiting: a pass's cost bounded) */
	for (int w = 0; w < nwaiting && w < LEND_LOOK; w++) {
		if (!may_borrow(s, waiting[w]))
			continue;
		struct attempt_node an;
		struct sched_share sh = share_of_request(waiting[w], &an);
		if (sched_share_fit(&view[ni], &sh, as) < 0)
			continue;
		/* only the spare's devices: none another job holds */
		bool in_all = true;
		for (int d = 0; inside && d < as->ndev; d++) {
			bool in = false;
			for (int e = 0; e < inside->ndev; e++)
				in |= inside->devs[e] == as->devs[d];
			in_all &= in;
		}
		if (!in_all)
			continue;
		as->node = ni;
		as->cpus = sh.cpus;
		as->mem_mib = sh.mem_mib;
		return waiting[w];
	}
	return NULL;
}

/* b starts on its borrowed node, as a pass would have started it. */
static void lend_start(struct state *s, struct sjob *b, struct snode *n, struct sched_assign *as,
		       int64_t now)
{
	snprintf(b->borrowed_node, sizeof(b->borrowed_node), "%s", n->rec.inv.name);
	struct sched_start st = {.nnodes = 1, .nodes = as};
	state_apply_start(s, b, &st, 1, s->nodes, now);
}

void state_spares_lend(struct state *s, struct sjob *const *waiting, int nwaiting, int64_t now)
{
	for (int i = 0; i < s->nspared && nwaiting; i++) {
		struct sjob *j = s->spared[i];
		if ((j->job.state != JOB_STARTING && j->job.state != JOB_RUNNING) || j->inplace ||
		    j->fail_ev || j->job.req.exclusive)
			continue;
		for (int k = 0; k < j->nspares; k++) {
			struct snode *n = state_node(s, j->spares[k].name);
			if (j->spares_lent[k] || !n || !takes_work(s, n))
				continue;
			/* the spare's devices, free as the borrower would find them */
			state_node_hold_quiet(s, n, j, &j->spares[k], -1);
			struct sched_node *view = state_sched_view(s);
			struct sched_assign as;
			struct sjob *b = find_borrower(s, view, node_index(s, n), waiting, nwaiting,
						       &j->spares[k], &as);
			free(view);
			if (!b) {
				state_node_hold_quiet(s, n, j, &j->spares[k], +1);
				continue;
			}
			spares_charge(j, now);
			j->spares_lent[k] = b->job.id;
			b->borrowed_from = j->job.id;
			lend_start(s, b, n, &as, now);
			log_info(
				"job %lld borrows %s, a spare of job %lld, until that job needs it",
				(long long)b->job.id, n->rec.inv.name, (long long)j->job.id);
			state_job_dirty(s, j);
		}
	}
	/* the cluster's pool's, to one borrower each (the view stays true of
	 * the nodes not lent yet); none while a restart in place may claim
	 * them, lest a borrower it preempted take one again */
	struct sched_node *view = NULL;
	for (int i = 0; i < s->nnodes && nwaiting && s->sched.nspare_pool && !s->nrestarting; i++) {
		struct snode *n = s->nodes[i];
		if (!n->pool_spare || n->pool_lent_to || !takes_work(s, n))
			continue;
		if (!view)
			view = state_sched_view(s);
		struct sched_assign as;
		struct sjob *b = find_borrower(s, view, i, waiting, nwaiting, NULL, &as);
		if (!b)
			continue;
		n->pool_lent_to = b->job.id;
		b->borrowed_pool = true;
		lend_start(s, b, n, &as, now);
		log_info("job %lld borrows %s, a spare of the cluster's pool, until a restart "
			 "needs it",
			 (long long)b->job.id, n->rec.inv.name);
	}
	free(view);
}

void state_spare_returned(struct state *s, struct snode *n, struct sjob *b, int64_t now)
{
	if (b->borrowed_pool) {
		b->borrowed_pool = false;
		b->borrowed_node[0] = '\0';
		if (n->pool_lent_to == b->job.id) {
			n->pool_lent_to = 0;
			log_info("spare %s is the pool's again (job %lld left it)", n->rec.inv.name,
				 (long long)b->job.id);
		}
		return;
	}
	struct sjob *j = state_job(s, b->borrowed_from);
	b->borrowed_from = 0;
	for (int k = 0; j && k < j->nspares; k++) {
		if (j->spares_lent[k] != b->job.id ||
		    strcmp(j->spares[k].name, n->rec.inv.name) != 0)
			continue;
		spares_charge(j, now);
		j->spares_lent[k] = 0;
		state_node_hold(s, n, j, &j->spares[k], +1);
		log_info("spare %s of job %lld is its own again (job %lld left it)",
			 n->rec.inv.name, (long long)j->job.id, (long long)b->job.id);
		state_job_dirty(s, j);
		return;
	}
}

/* Would w's share fit on node v were it empty (its borrower gone)? */
static bool fits_when_empty(const struct sched_node *v, const struct sched_share *w)
{
	struct sched_node e = *v;
	struct sched_dev devs[MODEL_MAX_ACCELS];
	e.ndev = MIN(v->ndev, MODEL_MAX_ACCELS);
	for (int d = 0; d < e.ndev; d++) {
		devs[d] = v->devs[d];
		devs[d].free_milli = MODEL_MILLI;
	}
	e.devs = devs;
	e.cpus_free = e.cpus_total;
	e.mem_free_mib = e.mem_total_mib;
	struct sched_assign as;
	return sched_share_fit(&e, w, &as) >= 0;
}

/* j restarts in place and needs nodes that neither its own spares, the
 * pool's idle spares nor free nodes give: the borrowers of the pool's
 * spares it could take are preempted, as many as it lacks. Returns how
 * many it waits for. */
static int claim_pool(struct state *s, struct sjob *j, int64_t now)
{
	struct inplace *ip = j->inplace;
	const struct attempt *a = from_attempt(j);
	int own = 0;
	for (int k = 0; k < j->nspares; k++)
		own += !j->spares_lent[k];
	bool lent_any = false;
	for (int i = 0; i < s->nnodes && !lent_any; i++)
		lent_any = s->nodes[i]->pool_lent_to != 0;
	if (!lent_any)
		return 0;
	struct sched_node *view = state_sched_view(s);
	bool *pool = xcalloc((size_t)s->nnodes + 1, sizeof(bool));
	bool *out = xcalloc((size_t)s->nnodes + 1, sizeof(bool));
	bool *scratch = xcalloc((size_t)s->nnodes + 1, sizeof(bool));
	for (int i = 0; i < s->nnodes; i++) {
		pool[i] = s->nodes[i]->pool_spare && !s->nodes[i]->pool_lent_to;
		out[i] = s->nodes[i]->pool_lent_to != 0 || in_attempt(a, s->nodes[i]->rec.inv.name);
	}
	for (int k = 0; k < j->nspares; k++) {
		struct snode *n = state_node(s, j->spares[k].name);
		if (n)
			out[node_index(s, n)] = true;
	}
	int waits = 0;
	for (int k = 0; k < ip->nnodes; k++) {
		struct snode *n = state_node(s, a->nodes[k].name);
		if (!ip->bad[k] && n && takes_work(s, n))
			continue;
		if (own) { /* one of its own spares takes this one's place */
			own--;
			continue;
		}
		struct sched_share w = share_of(j, &a->nodes[k]);
		struct sched_assign as;
		int used;
		if (sched_replace(view, s->nnodes, pool, out, &w, NULL, 0, &used, scratch, &as) !=
		    SCHED_FROM_NONE) {
			out[as.node] = true;
			continue;
		}
		for (int i = 0; i < s->nnodes; i++) {
			struct snode *p = s->nodes[i];
			struct sjob *b = p->pool_lent_to ? state_job(s, p->pool_lent_to) : NULL;
			if (!b || !out[i] || !p->pool_spare || !takes_work(s, p) ||
			    in_attempt(a, p->rec.inv.name) || !fits_when_empty(&view[i], &w))
				continue;
			out[i] = false; /* (claimed: not again for another node) */
			pool[i] = false;
			waits++;
			snprintf(ip->why, sizeof(ip->why),
				 "restarting in place: waiting for job %lld to leave the pool's "
				 "spare %s",
				 (long long)b->job.id, p->rec.inv.name);
			if (b->job.state == JOB_STARTING || b->job.state == JOB_RUNNING) {
				char reason[MODEL_REASON_MAX];
				snprintf(
					reason, sizeof(reason),
					"preempted: it ran on a spare of the cluster's pool, which "
					"job %lld needs now",
					(long long)j->job.id);
				state_preempt_for_spare(s, b, reason, now);
			}
			break;
		}
	}
	free(scratch);
	free(out);
	free(pool);
	free(view);
	return waits;
}

/* j restarts in place and needs a node it does not have: its spares'
 * borrowers are preempted, and it waits for them to leave. True while
 * it waits. */
static bool claim_spares(struct state *s, struct sjob *j, int64_t now)
{
	struct inplace *ip = j->inplace;
	const struct attempt *a = from_attempt(j);
	bool needs = false;
	for (int k = 0; k < ip->nnodes && !needs; k++) {
		struct snode *n = state_node(s, a->nodes[k].name);
		needs = ip->bad[k] || !n || !takes_work(s, n);
	}
	int waiting = 0;
	for (int k = 0; needs && k < j->nspares; k++) {
		struct sjob *b = j->spares_lent[k] ? state_job(s, j->spares_lent[k]) : NULL;
		if (!b)
			continue;
		waiting++;
		snprintf(ip->why, sizeof(ip->why),
			 "restarting in place: waiting for job %lld to leave its spare %s",
			 (long long)b->job.id, j->spares[k].name);
		if (b->job.state == JOB_STARTING || b->job.state == JOB_RUNNING) {
			char reason[MODEL_REASON_MAX];
			snprintf(reason, sizeof(reason),
				 "preempted: it ran on a spare of job %lld, which needs it now",
				 (long long)j->job.id);
			state_preempt_for_spare(s, b, reason, now);
		}
	}
	return waiting > 0;
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
		if (claim_spares(s, j, now) || claim_pool(s, j, now))
			continue;
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
			spares_refill(s, j, now);
	}
	pool_refill(s);
}

/* ---- elastic gangs -------------------------------------------------------------------- */

/* Free nodes where one more node of j's attempt a could run, best first,
 * up to want, beside a's nodes and j's spares: the shares in picks.
 * Returns how many. */
static int elastic_free(struct state *s, const struct sjob *j, const struct attempt *a,
			struct sched_assign *picks, int want)
{
	struct sched_node *view = state_sched_view(s);
	bool *ok = xcalloc((size_t)s->nnodes + 1, sizeof(bool));
	for (int i = 0; i < s->nnodes; i++)
		ok[i] = !s->nodes[i]->pool_spare && takes_work(s, s->nodes[i]) &&
			!in_attempt(a, s->nodes[i]->rec.inv.name);
	for (int i = 0; i < j->nspares; i++) {
		struct snode *n = state_node(s, j->spares[i].name);
		if (n)
			ok[node_index(s, n)] = false;
	}
	int *with = xcalloc((size_t)a->nnodes + (size_t)want + 1, sizeof(int)), nwith = 0;
	for (int k = 0; k < a->nnodes; k++) {
		struct snode *n = state_node(s, a->nodes[k].name);
		if (n)
			with[nwith++] = node_index(s, n);
	}
	struct sched_share w = share_of(j, &a->nodes[0]);
	int got = 0;
	while (got < want) {
		w.with = with;
		w.nwith = nwith;
		int best = sched_share_best(view, s->nnodes, ok, &w, &picks[got]);
		if (best < 0)
			break;
		picks[got].cpus = w.cpus;
		picks[got].mem_mib = w.mem_mib;
		picks[got].alone = w.alone;
		ok[best] = false;
		with[nwith++] = best;
		got++;
	}
	free(with);
	free(ok);
	free(view);
	return got;
}

static bool elastic_short(const struct state *s, const struct sjob *j, const struct attempt *a)
{
	return j->job.req.nodes_max > a->nnodes && !j->job.system && s->resource_waits == 0;
}

void state_elastic_started(struct state *s, struct sjob *j, int64_t now)
{
	struct attempt *a = job_current_attempt(&j->job);
	if (!a || j->job.state != JOB_STARTING || !elastic_short(s, j, a))
		return;
	int want = j->job.req.nodes_max - a->nnodes;
	struct sched_assign *picks = xcalloc((size_t)want, sizeof(*picks));
	int got = elastic_free(s, j, a, picks, want);
	if (got) {
		/* nothing of it has reached an agent yet: the attempt is wider */
		int was = a->nnodes, tpn = j->job.req.tasks_per_node;
		a->nodes = xrealloc(a->nodes, sizeof(*a->nodes) * (size_t)(was + got));
		a->tasks = xrealloc(a->tasks, sizeof(*a->tasks) * (size_t)(was + got) * tpn);
		memset(a->tasks + (size_t)was * tpn, 0, sizeof(*a->tasks) * (size_t)got * tpn);
		a->nnodes = was + got;
		a->ntasks = a->nnodes * tpn;
		for (int k = 0; k < got; k++) {
			state_attempt_node_set(&a->nodes[was + k], s->nodes[picks[k].node],
					       &picks[k]);
			state_part_add(s, s->nodes[picks[k].node], j, a, was + k);
		}
		state_restore_plan(s, j, a);
		log_info("job %lld: its elastic gang starts on %d nodes (%d to %d)",
			 (long long)j->job.id, a->nnodes, j->job.req.nodes, j->job.req.nodes_max);
	}
	free(picks);
	(void)now;
}

void state_elastic_commit(struct state *s, struct sjob *j, const struct attempt *a, int64_t now)
{
	if (j->job.state != JOB_RUNNING || j->fail_ev || j->inplace || a->ended ||
	    !state_attempt_is_current(j, a) || !elastic_short(s, j, a))
		return;
	int want = j->job.req.nodes_max - a->nnodes;
	struct sched_assign *picks = xcalloc((size_t)want, sizeof(*picks));
	int got = elastic_free(s, j, a, picks, want);
	free(picks);
	if (got)
		state_job_resize(s, j, got, now);
}
