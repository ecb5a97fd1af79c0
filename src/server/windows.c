/*
 * Windows in which nodes are kept (tenk reserve): for maintenance, or for
 * some users or one queue. Each node a window names carries it in its
 * record (stored, copied to a standby with the node); the server gathers
 * them into one list per pass for the scheduler (which keeps other jobs
 * off their nodes when they would still run at the start), drains a
 * maintenance window's nodes at its start and resumes them at its end,
 * when every window leaves the records that carried it.
 */
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static struct swindow *find(struct state *s, const char *name)
{
	for (int i = 0; i < s->nwins; i++)
		if (strcmp(s->wins[i].w.name, name) == 0)
			return &s->wins[i];
	return NULL;
}

static int cmp_win(const void *a, const void *b)
{
	const struct swindow *x = a, *y = b;
	if (x->w.start_ms != y->w.start_ms)
		return x->w.start_ms < y->w.start_ms ? -1 : 1;
	return strcmp(x->w.name, y->w.name);
}

void state_windows_collect(struct state *s)
{
	for (int i = 0; i < s->nwins; i++)
		s->wins[i].nnodes = 0;
	int n = s->wins_made;
	s->nwins = 0;
	/* what the nodes carry, by name, keeping the node arrays grown before */
	for (int i = 0; i < s->nnodes; i++) {
		const struct node_record *r = &s->nodes[i]->rec;
		for (int k = 0; k < r->nwindows; k++) {
			struct swindow *w = find(s, r->windows[k].name);
			if (!w) {
				if (s->nwins == n) {
					xgrow(&s->wins, &s->wins_alloc, (size_t)n + 1,
					      sizeof(*s->wins));
					memset(&s->wins[n], 0, sizeof(s->wins[n]));
					n++;
				}
				w = &s->wins[s->nwins++];
				w->w = r->windows[k];
				w->nnodes = 0;
			}
			xgrow(&w->nodes, &w->alloc, (size_t)w->nnodes + 1, sizeof(int));
			w->nodes[w->nnodes++] = i;
		}
	}
	/* the spare entries' arrays stay past nwins, for the next */
	s->wins_made = n;
	if (s->nwins > 1)
		qsort(s->wins, (size_t)s->nwins, sizeof(*s->wins), cmp_win);
	s->win_bits = 0;
	for (int i = 0, bit = 0; i < s->nwins; i++) {
		struct swindow *w = &s->wins[i];
		w->bit = node_window_maint(&w->w) || bit >= 32 ? -1 : bit++;
		if (w->bit >= 0)
			s->win_bits |= 1u << w->bit;
	}
}

/* Is j one of the jobs w is for (its owner among the users, or its queue)? */
static bool window_for(const struct swindow *w, const struct sjob *j)
{
	const char *owner = j->job.owner;
	if (w->w.users[0] && model_names_has(w->w.users, owner, strlen(owner)))
		return true;
	return w->w.queue[0] && j->queue && strcmp(w->w.queue, j->queue->spec.name) == 0;
}

uint32_t state_windows_of_job(const struct state *s, const struct sjob *j)
{
	uint32_t m = 0;
	if (!s->win_bits)
		return 0;
	for (int i = 0; i < s->nwins; i++)
		if (s->wins[i].bit >= 0 && window_for(&s->wins[i], j))
			m |= 1u << s->wins[i].bit;
	return m;
}

struct sched_window *state_windows_sched(const struct state *s)
{
	struct sched_window *v = xcalloc((size_t)s->nwins + 1, sizeof(*v));
	for (int i = 0; i < s->nwins; i++) {
		const struct swindow *w = &s->wins[i];
		v[i] = (struct sched_window){w->w.name, w->w.start_ms, w->bit, w->nnodes, w->nodes};
	}
	return v;
}

bool state_window_in_way(const struct state *s, const struct swindow *w, const struct sjob *j,
			 int64_t now)
{
	struct sched_window sw = {w->w.name, w->w.start_ms, window_for(w, j) ? 0 : -1, 0, NULL};
	return sched_window_in_way(&sw, now, s->sched.maint_lookahead_s * 1000,
				   j->job.req.time_limit_s, sw.bit >= 0 ? 1 : 0);
}

/* The running jobs on w's nodes that will still run at its start (by
 * their time limits; all of those not its own once it has started). */
static json_t *jobs_in_way(struct state *s, const struct swindow *w)
{
	json_t *a = json_array();
	for (int i = 0; i < w->nnodes && json_array_size(a) < 100; i++) {
		const struct snode *n = s->nodes[w->nodes[i]];
		for (int p = 0; p < n->nparts; p++) {
			const struct sjob *j = n->parts[p].job;
			const struct attempt *at = &j->job.attempts[n->parts[p].attempt - 1];
			int64_t lim = j->job.req.time_limit_s;
			if (at->ended || window_for(w, j) ||
			    (lim && at->start_ms + lim * 1000 <= w->w.start_ms))
				continue;
			bool seen = false;
			for (size_t k = 0; k < json_array_size(a) && !seen; k++)
				seen = json_integer_value(json_array_get(a, k)) == j->job.id;
			if (!seen)
				json_array_append_new(a, json_integer(j->job.id));
		}
	}
	return a;
}

json_t *state_window_pack(struct state *s, const struct swindow *w, int64_t now)
{
	json_t *o = node_window_pack(&w->w);
	json_t *nodes = json_array();
	for (int i = 0; i < w->nnodes; i++)
		json_array_append_new(nodes, json_string(s->nodes[w->nodes[i]]->rec.inv.name));
	json_object_set_new(o, "nodes", nodes);
	json_object_set_new(o, "kind",
			    json_string(node_window_maint(&w->w) ? "maintenance" : "reserved"));
	json_object_set_new(o, "state", json_string(now >= w->w.start_ms ? "active" : "waiting"));
	json_object_set_new(o, "jobs_in_the_way", jobs_in_way(s, w));
	return o;
}

json_t *state_windows_pack(struct state *s, int64_t now)
{
	state_windows_collect(s);
	json_t *a = json_array();
	for (int i = 0; i < s->nwins; i++)
		json_array_append_new(a, state_window_pack(s, &s->wins[i], now));
	return a;
}

const struct swindow *state_window(struct state *s, const char *name)
{
	state_windows_collect(s);
	return find(s, name);
}

int state_window_add(struct state *s, const struct node_window *w, struct snode **nodes, int n,
		     struct strbuf *why)
{
	state_windows_collect(s);
	if (find(s, w->name)) {
		strbuf_addf(why, "a reservation named %s exists; choose another name", w->name);
		return -EEXIST;
	}
	if (!node_window_maint(w) && s->win_bits == UINT32_MAX) {
		strbuf_addstr(why, "32 reservations for users or queues exist, as many as may; "
				   "delete one that is no longer needed");
		return -ENOSPC;
	}
	for (int i = 0; i < n; i++) {
		const struct node_record *r = &nodes[i]->rec;
		if (r->nwindows >= MODEL_NODE_WINDOWS) {
			strbuf_addf(why, "node %s is in %d reservations, as many as a node may be",
				    r->inv.name, r->nwindows);
			return -ENOSPC;
		}
		for (int k = 0; k < r->nwindows; k++) {
			const struct node_window *o = &r->windows[k];
			if (o->start_ms < w->end_ms && w->start_ms < o->end_ms) {
				strbuf_addf(
					why,
					"node %s is in reservation %s, which overlaps this one; "
					"a node's reservations may not overlap",
					r->inv.name, o->name);
				return -EBUSY;
			}
		}
	}
	for (int i = 0; i < n; i++) {
		struct node_record *r = &nodes[i]->rec;
		int at = r->nwindows;
		while (at > 0 && r->windows[at - 1].start_ms > w->start_ms) {
			r->windows[at] = r->windows[at - 1];
			at--;
		}
		r->windows[at] = *w;
		r->nwindows++;
		state_node_dirty(s, nodes[i]);
	}
	state_windows_collect(s);
	state_want_pass(s);
	return 0;
}

/* Takes window k out of node n's record; a maintenance drain it made ends
 * with it, unless another maintenance window of the node holds now. */
static void drop(struct state *s, struct snode *n, int k, int64_t now)
{
	struct node_record *r = &n->rec;
	memmove(&r->windows[k], &r->windows[k + 1],
		sizeof(r->windows[0]) * (size_t)(r->nwindows - k - 1));
	r->nwindows--;
	state_node_dirty(s, n);
	state_want_pass(s);
	bool maint = false;
	for (int i = 0; i < r->nwindows; i++)
		maint |= node_window_maint(&r->windows[i]) && r->windows[i].start_ms <= now &&
			 now < r->windows[i].end_ms;
	if (!maint && r->drained && r->drain_source == DRAIN_MAINT)
		state_resume(s, n);
}

int state_window_delete(struct state *s, const char *name, int64_t now)
{
	int found = 0;
	for (int i = 0; i < s->nnodes; i++) {
		struct snode *n = s->nodes[i];
		for (int k = 0; k < n->rec.nwindows; k++)
			if (strcmp(n->rec.windows[k].name, name) == 0) {
				drop(s, n, k, now);
				found++;
				break;
			}
	}
	state_windows_collect(s);
	return found;
}

void state_set_weights(struct state *s, const struct catalogue *c)
{
	free(s->weights);
	free(s->weight_names);
	s->nweights = (int)c->n;
	s->weights = xcalloc(c->n + 1, sizeof(*s->weights));
	s->weight_names = xcalloc(c->n + 1, sizeof(*s->weight_names));
	for (size_t i = 0; i < c->n; i++) {
		snprintf(s->weight_names[i], MODEL_NAME_MAX, "%s", c->entries[i].name);
		s->weights[i] = (struct sched_model_weight){s->weight_names[i],
							    catalogue_weight(&c->entries[i])};
	}
}

double state_model_weight(const struct state *s, const char *model)
{
	for (int i = 0; i < s->nweights; i++)
		if (strcasecmp(s->weights[i].model, model) == 0)
			return s->weights[i].weight;
	return 1;
}

void state_windows_tick(struct state *s, int64_t now)
{
	for (int i = 0; i < s->nnodes; i++) {
		struct snode *n = s->nodes[i];
		struct node_record *r = &n->rec;
		if (!r->nwindows)
			continue;
		for (int k = r->nwindows - 1; k >= 0; k--)
			if (r->windows[k].end_ms <= now) {
				log_info("node %s: reservation %s ended", r->inv.name,
					 r->windows[k].name);
				drop(s, n, k, now);
			}
		for (int k = 0; k < r->nwindows; k++) {
			const struct node_window *w = &r->windows[k];
			if (!node_window_maint(w) || now < w->start_ms || r->drained)
				continue;
			char why[MODEL_REASON_MAX];
			snprintf(why, sizeof(why), "maintenance %.63s: %.170s", w->name, w->reason);
			state_drain(s, n, DRAIN_MAINT, why);
			state_want_pass(s);
		}
	}
}
