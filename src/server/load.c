/*
 * Loading the store into the state at start-up. Every document is decoded
 * as strictly as input from outside; what cannot go on after a restart
 * (attempts whose nodes are gone, validation runs) is ended here, and the
 * node work the loading itself marked changed is forgotten: agents learn
 * their work when they next poll.
 */
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct load_ctx {
	struct state *s;
	int64_t now, mono;
};

/* A stored document as JSON; NULL, said in the log, when it is not. */
static json_t *doc_json(const char *what, const char *key, const char *doc, size_t len)
{
	json_error_t jerr;
	json_t *j = json_loadb(doc, len, 0, &jerr);
	if (!j)
		log_err("store: %s %s: unreadable document: %s", what, key, jerr.text);
	return j;
}

/* A document its unpack refused with r: said in the log, and r. */
static int doc_refused(const char *what, const char *key, int r, const struct tk_error *e)
{
	log_err("store: %s %s: %s", what, key, e->text);
	return r;
}

static int load_node_cb(void *ctx, const char *key, const char *doc, size_t len)
{
	struct load_ctx *lc = ctx;
	struct state *s = lc->s;
	json_t *j = doc_json("node", key, doc, len);
	if (!j)
		return -EBADMSG;
	struct node_record rec;
	struct tk_error e;
	int r = node_record_unpack(j, &rec, &e);
	json_decref(j);
	if (r < 0)
		return doc_refused("node", key, r, &e);
	struct snode *n = node_insert(s, &rec);
	n->live = NODE_LIVE_UNKNOWN;
	n->last_seen_ms = lc->mono; /* its agent has one timeout to come back */
	return 0;
}

static int load_job_cb(void *ctx, const char *key, const char *doc, size_t len)
{
	struct load_ctx *lc = ctx;
	struct state *s = lc->s;
	json_t *jj = doc_json("job", key, doc, len);
	if (!jj)
		return -EBADMSG;
	struct job job;
	struct tk_error e;
	int r = job_unpack(jj, &job, &e);
	json_decref(jj);
	if (r < 0)
		return doc_refused("job", key, r, &e);
	if (!job.system && !job.run_as[0]) {
		/* a job stored before Unix accounts: its owner's, or a safe one */
		const struct suser *u = tk_map_get(&s->user_by_name, job.owner);
		const char *as = u			       ? u->rec.unix_user
				 : s->sched.admin_unix_user[0] ? s->sched.admin_unix_user
				 : s->sched.allow_root_jobs    ? "root"
							       : "nobody";
		snprintf(job.run_as, sizeof(job.run_as), "%s", as);
	}
	struct sjob *j = job_add(s, &job, lc->now);
	if (j->job.state == JOB_PENDING && !j->job.system)
		job_enqueue(s, j);
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
	struct load_ctx *lc = ctx;
	struct state *s = lc->s;
	json_t *j = doc_json("queue", key, doc, len);
	if (!j)
		return -EBADMSG;
	struct queue_spec *q = xmalloc(sizeof(*q));
	struct tk_error e;
	int r = queue_spec_unpack(j, q, &e);
	json_decref(j);
	if (r == 0)
		queue_insert(s, q)->written_ms = lc->now;
	free(q);
	return r < 0 ? doc_refused("queue", key, r, &e) : 0;
}

static int load_user_cb(void *ctx, const char *key, const char *doc, size_t len)
{
	struct load_ctx *lc = ctx;
	struct state *s = lc->s;
	json_t *j = doc_json("user", key, doc, len);
	if (!j)
		return -EBADMSG;
	struct user_record u;
	struct tk_error e;
	int r = user_record_unpack(j, &u, &e);
	json_decref(j);
	if (r < 0)
		return doc_refused("user", key, r, &e);
	user_insert(s, &u);
	return 0;
}

int state_load(struct state *s, struct store *store, int64_t now, int64_t mono,
	       struct tk_error *err)
{
	struct load_ctx lc = {s, now, mono};
	if (store_load_users(store, load_user_cb, &lc, err) < 0)
		return tk_errorf(err, -EBADMSG,
				 "cannot load users from the store (see the log above)");
	int r = store_load_queues(store, load_queue_cb, &lc, err);
	if (r < 0)
		return tk_errorf(err, r, "cannot load queues from the store (see the log above)");
	if (!state_queue(s, "default"))
		state_queue_add(s, "default", now);
	r = store_load_nodes(store, load_node_cb, &lc, err);
	if (r < 0)
		return err && !err->text[0] ? tk_errorf(err, r, "cannot load nodes") : r;
	r = store_load_jobs(store, load_job_cb, &lc, err);
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
				job_requeue(s, j, "its nodes are no longer known", now);
			state_job_dirty(s, j);
		}
	}
	/* a task the server put down as lost less than a node timeout ago may
	 * still run in a shim whose lease is not yet over (the fence of the
	 * server before is not in the store): its job waits that long */
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = s->jobs[i];
		const struct attempt *a = j && j->pending ? job_current_attempt(&j->job) : NULL;
		for (int t = 0; a && t < a->ntasks; t++) {
			int64_t left = a->tasks[t].end_ms + s->cfg.node_timeout_ms - now;
			if (a->tasks[t].state == TASK_LOST && left > 0)
				state_job_fence(s, j, a->nodes[t / j->job.req.tasks_per_node].name,
						mono + left);
		}
	}
	/* a validation run does not survive a restart: its nodes' results would
	 * be partial; it ends, and can be asked for again */
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = s->jobs[i];
		if (j && j->job.system && !job_state_final(j->job.state))
			state_job_finish(s, j, JOB_CANCELLED, j->job.exit_code,
					 "the server restarted during the validation run", now);
	}
	s->wake_nodes = NULL;
	for (int i = 0; i < s->nnodes; i++)
		s->nodes[i]->wake_queued = false;
	return 0;
}
