/*
 * Loading the store into the state at start-up. Every document is decoded
 * as strictly as input from outside; what cannot go on after a restart
 * (attempts whose nodes are gone, validation runs) is ended here, and the
 * node work the loading itself marked changed is forgotten: agents learn
 * their work when they next poll. The shell's part: the state machine
 * itself knows no store.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A row that did not decode, to set aside. */
struct bad_row {
	char kind[8];
	char key[MODEL_NAME_MAX];
	char reason[MODEL_REASON_MAX];
};

struct load_ctx {
	struct state *s;
	int64_t now, mono;
	bool quarantine;
	struct bad_row *bad;
	int nbad;
	struct tk_error *err;
};

/* Row key of kind did not decode (why): with quarantine it is noted to be
 * set aside and the load goes on (0); else the load stops, naming it. */
static int bad_row(struct load_ctx *lc, const char *kind, const char *key, const char *why)
{
	if (!lc->quarantine) {
		log_err("store: %s %s: %s", kind, key, why);
		return tk_errorf(lc->err, -EBADMSG,
				 "store: %s %s does not decode: %s; start with "
				 "--quarantine-bad-rows to set it aside",
				 kind, key, why);
	}
	log_warn("store: %s %s does not decode, set aside: %s", kind, key, why);
	lc->bad = xrealloc(lc->bad, sizeof(*lc->bad) * (size_t)(lc->nbad + 1));
	struct bad_row *b = &lc->bad[lc->nbad++];
	snprintf(b->kind, sizeof(b->kind), "%s", kind);
	snprintf(b->key, sizeof(b->key), "%s", key);
	snprintf(b->reason, sizeof(b->reason), "%s", why);
	return 0;
}

/* A stored document as JSON; NULL, with *r from bad_row, when it is not. */
static json_t *doc_json(struct load_ctx *lc, const char *what, const char *key, const char *doc,
			size_t len, int *r)
{
	json_error_t jerr;
	json_t *j = json_loadb(doc, len, 0, &jerr);
	if (!j || !json_is_object(j)) {
		char why[MODEL_REASON_MAX];
		snprintf(why, sizeof(why), "unreadable document: %s",
			 j ? "not an object" : jerr.text);
		json_decref(j);
		*r = bad_row(lc, what, key, why);
		return NULL;
	}
	return j;
}

/* A document its unpack refused. */
static int doc_refused(struct load_ctx *lc, const char *what, const char *key,
		       const struct tk_error *e)
{
	return bad_row(lc, what, key, e->text);
}

static int load_node_cb(void *ctx, const char *key, const char *doc, size_t len)
{
	struct load_ctx *lc = ctx;
	struct state *s = lc->s;
	int r = 0;
	json_t *j = doc_json(lc, "node", key, doc, len, &r);
	if (!j)
		return r;
	struct node_record rec;
	struct tk_error e;
	r = node_record_unpack(j, &rec, &e);
	json_decref(j);
	if (r < 0)
		return doc_refused(lc, "node", key, &e);
	struct snode *n = state_node_insert(s, &rec);
	n->live = NODE_LIVE_UNKNOWN;
	n->last_seen_ms = lc->mono; /* its agent has one timeout to come back */
	return 0;
}

int state_job_decode(const char *key, const char *doc, size_t len, struct job *ret, char *why)
{
	json_error_t jerr;
	json_t *jj = json_loadb(doc, len, 0, &jerr);
	if (!jj || !json_is_object(jj)) {
		snprintf(why, MODEL_REASON_MAX, "unreadable document: %s",
			 jj ? "not an object" : jerr.text);
		json_decref(jj);
		return -EBADMSG;
	}
	struct tk_error e;
	int r = job_unpack(jj, ret, &e);
	json_decref(jj);
	if (r < 0) {
		snprintf(why, MODEL_REASON_MAX, "%.*s", MODEL_REASON_MAX - 1, e.text);
		return -EBADMSG;
	}
	if (ret->id > STATE_MAX_JOB_ID || strtoll(key, NULL, 10) != ret->id) {
		snprintf(why, MODEL_REASON_MAX,
			 ret->id > STATE_MAX_JOB_ID
				 ? "id %lld is beyond what this server holds (at most %lld)"
				 : "the document says id %lld, not its row's (%lld)",
			 (long long)ret->id,
			 ret->id > STATE_MAX_JOB_ID ? (long long)STATE_MAX_JOB_ID
						    : strtoll(key, NULL, 10));
		job_release(ret);
		return -EBADMSG;
	}
	return 0;
}

/* A decoded job (taken) into the state, or why it did not decode. */
static int load_job_place(void *ctx, const char *key, struct job *jobp, const char *why)
{
	struct load_ctx *lc = ctx;
	struct state *s = lc->s;
	if (!jobp)
		return bad_row(lc, "job", key, why);
	struct job job = *jobp;
	if (state_job_known(s, job.id)) {
		job_release(&job);
		return bad_row(lc, "job", key, "a second row of one job");
	}
	if (!job.system && !job.run_as[0]) {
		/* a job stored before Unix accounts: its owner's, or a safe one */
		const struct suser *u = tk_map_get(&s->user_by_name, job.owner);
		const char *as = u			       ? u->rec.unix_user
				 : s->sched.admin_unix_user[0] ? s->sched.admin_unix_user
				 : s->sched.allow_root_jobs    ? "root"
							       : "nobody";
		snprintf(job.run_as, sizeof(job.run_as), "%s", as);
	}
	struct sjob *j = state_job_add(s, &job, lc->now);
	if (j->job.state == JOB_PENDING && !j->job.system)
		state_job_enqueue(s, j);
	/* settled, but written before the store kept that (or settled since
	 * by this load's end of it): written again, with its columns, it can
	 * leave memory */
	if (state_job_settled_ms(j))
		state_job_dirty(s, j);
	/* an attempt not yet ended still holds its resources */
	for (int k = 0; k < j->job.nattempts; k++) {
		struct attempt *at = &j->job.attempts[k];
		if (at->ended)
			continue;
		int tpn = j->job.req.tasks_per_node;
		for (int i = 0; i < at->nnodes; i++) {
			bool done = true;
			for (int t = i * tpn; t < (i + 1) * tpn; t++)
				if (!state_task_done(&at->tasks[t]))
					done = false;
			if (done)
				continue;
			struct snode *n = state_node(s, at->nodes[i].name);
			if (n) {
				state_part_add(s, n, j, at, i);
			} else {
				for (int t = i * tpn; t < (i + 1) * tpn; t++)
					if (!state_task_done(&at->tasks[t]))
						at->tasks[t].state = TASK_LOST;
			}
		}
	}
	return 0;
}

static int load_job_cb(void *ctx, const char *key, const char *doc, size_t len)
{
	char why[MODEL_REASON_MAX];
	struct job job;
	if (state_job_decode(key, doc, len, &job, why) < 0)
		return load_job_place(ctx, key, NULL, why);
	return load_job_place(ctx, key, &job, NULL);
}

/* A settled job, from its columns: out of memory until asked for. */
static int load_settled_cb(void *ctx, int64_t id, const char *state, const char *owner,
			   int64_t settled_ms, bool stripped)
{
	struct load_ctx *lc = ctx;
	char key[32];
	snprintf(key, sizeof(key), "%lld", (long long)id);
	enum job_state st;
	if (job_state_parse(state, &st) < 0 || !job_state_final(st))
		return bad_row(lc, "job", key, "its state column is not a final state");
	if (id < 1 || id > STATE_MAX_JOB_ID)
		return bad_row(lc, "job", key, "its id is beyond what this server holds");
	if (!model_name_valid(owner))
		return bad_row(lc, "job", key, "its owner column is not a user name");
	state_gone_add(lc->s, id, st, owner, settled_ms, stripped);
	return 0;
}

static int load_queue_cb(void *ctx, const char *key, const char *doc, size_t len)
{
	struct load_ctx *lc = ctx;
	struct state *s = lc->s;
	int r = 0;
	json_t *j = doc_json(lc, "queue", key, doc, len, &r);
	if (!j)
		return r;
	struct queue_spec *q = xmalloc(sizeof(*q));
	struct tk_error e;
	r = queue_spec_unpack(j, q, &e);
	json_decref(j);
	if (r == 0)
		state_queue_insert(s, q)->written_ms = lc->now;
	free(q);
	return r < 0 ? doc_refused(lc, "queue", key, &e) : 0;
}

static int load_user_cb(void *ctx, const char *key, const char *doc, size_t len)
{
	struct load_ctx *lc = ctx;
	struct state *s = lc->s;
	int r = 0;
	json_t *j = doc_json(lc, "user", key, doc, len, &r);
	if (!j)
		return r;
	struct user_record u;
	struct tk_error e;
	r = user_record_unpack(j, &u, &e);
	json_decref(j);
	if (r < 0)
		return doc_refused(lc, "user", key, &e);
	state_user_insert(s, &u);
	return 0;
}

/* Sets aside the rows noted bad (after each kind is read: not while
 * reading it). */
static int set_aside(struct load_ctx *lc, struct store *store, struct tk_error *err)
{
	for (int i = 0; i < lc->nbad; i++) {
		const struct bad_row *b = &lc->bad[i];
		int r = store_quarantine(store, b->kind, b->key, b->reason, lc->now, err);
		if (r < 0)
			return r;
	}
	lc->nbad = 0;
	return 0;
}

/* One kind of row, read (from the store, or warm's copy) and its bad rows
 * set aside. */
static int load_kind(struct load_ctx *lc, struct store *store, struct warm *warm,
		     enum store_row_kind kind, store_row_cb cb, const char *what,
		     struct tk_error *err)
{
	int r;
	if (warm && kind == STORE_ROW_JOB)
		r = warm_each_job(warm, load_job_place, lc);
	else if (warm)
		r = warm_each_doc(warm, kind, cb, lc);
	else
		r = (kind == STORE_ROW_JOB     ? store_load_jobs
		     : kind == STORE_ROW_NODE  ? store_load_nodes
		     : kind == STORE_ROW_QUEUE ? store_load_queues
					       : store_load_users)(store, cb, lc, err);
	if (r < 0 && !err->text[0])
		tk_errorf(err, r, "cannot load %s from the store", what);
	return r < 0 ? r : set_aside(lc, store, err);
}

/* An array is made in slices (arrays.c): a server that stopped in the
 * middle left some of its elements unmade. They are made now, from its
 * first element's request, so that every array is whole. */
static void arrays_complete(struct state *s, int64_t now)
{
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *head = s->jobs[i];
		if (!head || !state_job_is_array_head(head) || !head->job.req.array)
			continue;
		int64_t first = head->job.id;
		int *idx = NULL, nidx = 0, cap = 0, made = 0;
		struct tk_error err;
		if (model_array_parse(head->job.req.array, &idx, &nidx, &cap, &err) < 0 ||
		    nidx != head->job.array_count) {
			free(idx);
			continue;
		}
		for (int k = 1; k < nidx; k++) {
			if (state_job_known(s, first + k))
				continue;
			struct job_request el;
			job_request_copy(&head->job.req, &el);
			struct sjob *j = state_submit_array(
				s, &el, head->job.owner, head->job.run_as, head->job.held, now,
				first + k, first, idx[k], head->job.array_cap, nidx);
			if (head->job.state == JOB_CANCELLED)
				state_cancel(s, j, now, &err);
			made++;
		}
		if (made)
			log_warn(
				"array %lld: %d of its %d elements were not made before the server "
				"stopped; made now",
				(long long)first, made, nidx);
		free(idx);
	}
}

int state_load(struct state *s, struct store *store, struct warm *warm, int64_t now, int64_t mono,
	       bool quarantine, struct tk_error *err)
{
	struct load_ctx lc = {
		.s = s, .now = now, .mono = mono, .quarantine = quarantine, .err = err};
	err->text[0] = '\0';
	int r;
	if ((r = load_kind(&lc, store, warm, STORE_ROW_USER, load_user_cb, "users", err)) < 0 ||
	    (r = load_kind(&lc, store, warm, STORE_ROW_QUEUE, load_queue_cb, "queues", err)) < 0)
		goto out;
	if (!state_queue(s, "default"))
		state_queue_add(s, "default", now);
	if ((r = load_kind(&lc, store, warm, STORE_ROW_NODE, load_node_cb, "nodes", err)) < 0)
		goto out;
	r = warm ? warm_each_settled(warm, load_settled_cb, &lc)
		 : store_load_settled(store, load_settled_cb, &lc, err);
	if (r < 0 && !err->text[0])
		tk_errorf(err, r, "cannot load the settled jobs from the store");
	if (r < 0 || (r = set_aside(&lc, store, err)) < 0 ||
	    (r = load_kind(&lc, store, warm, STORE_ROW_JOB, load_job_cb, "jobs", err)) < 0)
		goto out;
	/* settle attempts whose tasks were all lost with a vanished node; the
	 * ended jobs' service for the Gittins index */
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = s->jobs[i];
		if (j && job_state_final(j->job.state))
			state_las_history_note(s, j, now);
		for (int k = 0; j && k < j->job.nattempts; k++) {
			struct attempt *a = &j->job.attempts[k];
			bool any = false;
			for (int t = 0; t < a->ntasks; t++)
				if (!state_task_done(&a->tasks[t]))
					any = true;
			if (a->ended || any)
				continue;
			bool current = state_attempt_is_current(j, a);
			a->ended = true;
			if (current)
				state_job_requeue(s, j, "its nodes are no longer known", now);
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
	/* a failure that waited to hear every node of its attempt waits again
	 * (the wait is not in the store; the failed task is) */
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = s->jobs[i];
		struct attempt *a = j && !j->job.system ? job_current_attempt(&j->job) : NULL;
		if (!a || a->nnodes < 2 || !state_attempt_is_current(j, a))
			continue;
		for (int t = 0; t < a->ntasks; t++) {
			const struct task_status *ts = &a->tasks[t];
			if (ts->state != TASK_EXITED || ts->exit_code == 0)
				continue;
			struct task_event ev = {.job = j->job.id,
						.attempt = a->number,
						.rank = t,
						.type = TASK_EVENT_EXITED,
						.at_ms = ts->end_ms,
						.exit_code = ts->exit_code,
						.signal = ts->signal,
						.cause = ts->signal ? EXIT_SIGNALLED : EXIT_EXITED,
						.energy_mj = -1};
			state_failure_wait(s, j, &ev);
			break;
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
	arrays_complete(s, now);
	s->wake_nodes = NULL;
	for (int i = 0; i < s->nnodes; i++)
		s->nodes[i]->wake_queued = false;
	r = 0;
out:
	free(lc.bad);
	return r;
}
