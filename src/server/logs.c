/*
 * Task output, served by the agents through the server (no shared
 * filesystem needed): GET /v1/jobs/ID/logs works out each task's output
 * file from the job's pattern, asks every node that holds some in its
 * next work answer (the agent's long-poll is answered at once), and
 * answers the user when every node has sent what it read (POST
 * /v1/agent/logs), or after LOGS_WAIT_MS with what came and, for the
 * rest, why not.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define LOGS_WAIT_MS 5000
#define LOGS_DEFAULT_MAX (1 << 20)

/* A user's request for output, waiting on its nodes. */
struct log_wait {
	json_t *answer; /* the reply, its "tasks" filled in as nodes answer */
	int outstanding;
};

/* One node's share of a log_wait. */
struct log_fetch {
	struct log_fetch *next;
	struct request *client;
	int node; /* its index in the state */
	bool sent;
	struct wire_log_fetch f;
	json_t **entries; /* f.files[i]'s entry in the answer's "tasks" (borrowed) */
	/* f.files[i]'s end for this attempt: where the next attempt on this
	 * node began in the same file (0: none, read to the file's end) */
	int64_t *until;
};

static void fetch_free(struct log_fetch *lf)
{
	for (int i = 0; i < lf->f.nfiles; i++)
		free(lf->f.files[i].path);
	free(lf->f.files);
	free(lf->entries);
	free(lf->until);
	free(lf);
}

json_t *logs_for_node(struct server *s, const struct snode *n)
{
	int count = 0;
	for (struct log_fetch *lf = s->log_fetches; lf; lf = lf->next)
		if (lf->node == n->index && !lf->sent)
			count++;
	if (!count)
		return NULL;
	struct wire_log_fetch *f = xcalloc((size_t)count, sizeof(*f));
	int k = 0;
	for (struct log_fetch *lf = s->log_fetches; lf && k < WIRE_MAX_LOG_FETCHES; lf = lf->next)
		if (lf->node == n->index && !lf->sent) {
			f[k++] = lf->f;
			lf->sent = true;
		}
	json_t *arr = wire_log_fetches_pack(f, k);
	free(f); /* the files are the fetches' */
	return arr;
}

/* Answers the user's request now, with what it has. */
static void logs_answer(struct request *r)
{
	json_t *ans = json_incref(r->logw->answer);
	reply_json(r, 200, ans); /* unparks: logs_forget frees the wait */
}

void logs_forget(struct server *s, struct request *r)
{
	struct log_fetch **pp = &s->log_fetches;
	while (*pp) {
		struct log_fetch *lf = *pp;
		if (lf->client == r) {
			*pp = lf->next;
			fetch_free(lf);
		} else {
			pp = &lf->next;
		}
	}
	if (r->logw) {
		json_decref(r->logw->answer);
		free(r->logw);
		r->logw = NULL;
	}
}

void logs_expired(struct request *r)
{
	logs_answer(r);
}

json_t *api_node_asks(struct server *s, const struct snode *n)
{
	json_t *logs = logs_for_node(s, n), *ptys = ptys_for_node(s, n);
	if (!logs && !ptys)
		return NULL;
	json_t *o = json_object();
	if (logs)
		json_object_set_new(o, "logs", logs);
	if (ptys)
		json_object_set_new(o, "ptys", ptys);
	return o;
}

void api_wake_node(struct server *s, struct snode *n)
{
	struct req_list *l = api_node_polls(s, n->index);
	struct request *poll = l->head;
	if (!poll)
		return; /* its next poll is answered at once (h_agent_work) */
	json_t *w = state_work_unchanged_pack(&s->st, n);
	json_t *asks = api_node_asks(s, n);
	if (asks)
		json_object_update(w, asks);
	json_decref(asks);
	reply_json(poll, 200, w);
}

/* "0:120,3:55": where each task's reading starts. */
/* Where attempt a's task t stops in its file: where the next attempt's
 * same task began in it, when that ran on the same node (the same file);
 * 0: it goes to the file's end; -1: not known yet (the next attempt's task
 * has not been heard to start: its shim may be writing after a's part
 * already, so nothing past what was read is a's for sure). */
static int64_t attempt_until(const struct sjob *j, const struct attempt *a, int t, int ni,
			     const struct output_names *v, const char *path, bool err_stream)
{
	const struct job_request *req = &j->job.req;
	if (a->number >= j->job.nattempts)
		return 0;
	const struct attempt *b = &j->job.attempts[a->number];
	if (t >= b->ntasks || ni >= b->nnodes || strcmp(a->nodes[ni].name, b->nodes[ni].name) != 0)
		return 0;
	struct output_names vb = *v;
	vb.attempt = b->number;
	_cleanup_free_ char *next = model_output_path(
		err_stream ? req->error : (req->output ? req->output : MODEL_DEFAULT_OUTPUT),
		req->cwd, &vb);
	if (strcmp(next, path) != 0)
		return 0; /* a file of its own (%a in the pattern) */
	if (b->tasks[t].state == TASK_WAITING && !b->ended)
		return -1;
	return err_stream ? b->tasks[t].err_from : b->tasks[t].out_from;
}

/* a task's offset not given: where its attempt began in the file */
#define FROM_ATTEMPT (-2)

static int parse_from(const char *text, int ntasks, int64_t *from)
{
	_cleanup_free_ char *copy = xstrdup(text);
	char *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(t, ':');
		int64_t rank, off;
		if (!colon)
			return -EINVAL;
		*colon = '\0';
		if (tk_parse_int64(t, 0, ntasks - 1, &rank) < 0 ||
		    tk_parse_int64(colon + 1, 0, INT64_MAX, &off) < 0)
			return -EINVAL;
		from[rank] = off;
	}
	return 0;
}

/* GET /v1/jobs/ID/logs?attempt=N&task=N|all&offset=BYTES&from=R:O,...&max=BYTES&tail=LINES
 * &stream=output|error */
void h_job_logs(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct sjob *j;
	if (api_job_ref(r, param, &j, NULL) < 0 || api_job_inside(r, j, "logs") < 0)
		return;
	const struct job_request *req = &j->job.req;
	const char *att = request_arg(r, "attempt"), *task = request_arg(r, "task");
	const char *off = request_arg(r, "offset"), *from_s = request_arg(r, "from");
	const char *mx = request_arg(r, "max"), *tl = request_arg(r, "tail");
	const char *stream = request_arg(r, "stream");
	int64_t number = j->job.nattempts, rank = -1, offset = 0, max = LOGS_DEFAULT_MAX, tail = 0;
	if (att && tk_parse_int64(att, 1, MAX(1, j->job.nattempts), &number) < 0) {
		reply_error(r, 400, "attempt: job %lld has %d attempt(s), got \"%.32s\"",
			    (long long)j->job.id, j->job.nattempts, att);
		return;
	}
	/* an elastic gang's attempts have as many tasks as they had nodes */
	int ntasks = number >= 1 && number <= j->job.nattempts ? j->job.attempts[number - 1].ntasks
							       : req->nodes * req->tasks_per_node;
	if (task && strcmp(task, "all") != 0 && tk_parse_int64(task, 0, ntasks - 1, &rank) < 0) {
		reply_error(r, 400, "task: a rank from 0 to %d, or all; got \"%.32s\"", ntasks - 1,
			    task);
		return;
	}
	if ((off && tk_parse_int64(off, 0, INT64_MAX, &offset) < 0) ||
	    (mx && tk_parse_int64(mx, 1, WIRE_LOG_MAX_BYTES, &max) < 0) ||
	    (tl && tk_parse_int64(tl, 1, 1 << 20, &tail) < 0)) {
		reply_error(r, 400,
			    "offset, max and tail: whole numbers (max at most %d bytes, tail at "
			    "most 1048576 lines)",
			    WIRE_LOG_MAX_BYTES);
		return;
	}
	if (stream && strcmp(stream, "output") != 0 && strcmp(stream, "error") != 0) {
		reply_error(r, 400, "stream: output or error, got \"%.32s\"", stream);
		return;
	}
	bool err_stream = stream && strcmp(stream, "error") == 0;
	if (err_stream && !req->error) {
		reply_error(r, 400,
			    "stream: job %lld has no error file of its own (-e); its "
			    "stderr is in its output",
			    (long long)j->job.id);
		return;
	}
	int64_t *from = xcalloc((size_t)ntasks, sizeof(*from));
	for (int i = 0; i < ntasks; i++)
		from[i] = tail ? -1 : off ? offset : FROM_ATTEMPT;
	if (from_s && parse_from(from_s, ntasks, from) < 0) {
		free(from);
		reply_error(r, 400, "from: RANK:OFFSET,... with ranks from 0 to %d, got \"%.64s\"",
			    ntasks - 1, from_s);
		return;
	}
	json_t *tasks = json_array();
	json_t *ans = json_pack("{s:I, s:s, s:i, s:o}", "job", (json_int_t)j->job.id, "state",
				job_state_name(j->job.state), "attempts", j->job.nattempts, "tasks",
				tasks);
	const struct attempt *a = number ? &j->job.attempts[number - 1] : NULL;
	if (!a) {
		free(from);
		reply_json(r, 200, ans);
		return;
	}
	json_object_set_new(ans, "attempt", json_integer(a->number));
	json_object_set_new(ans, "ended", json_boolean(a->ended));
	struct log_wait *w = xcalloc(1, sizeof(*w));
	w->answer = ans;
	int tpn = req->tasks_per_node;
	struct log_fetch **tail_p = &s->log_fetches;
	while (*tail_p)
		tail_p = &(*tail_p)->next;
	for (int ni = 0; ni < a->nnodes; ni++) {
		const char *node = a->nodes[ni].name;
		struct snode *n = state_node(&s->st, node);
		bool down = !n || state_node_state(&s->st, n) == NODE_DOWN;
		struct log_fetch *lf = down ? NULL : xcalloc(1, sizeof(*lf));
		if (lf) {
			lf->client = r;
			lf->node = n->index;
			lf->f.id = ++s->log_next_id;
			snprintf(lf->f.run_as, sizeof(lf->f.run_as), "%s", j->job.run_as);
			lf->f.files = xcalloc((size_t)tpn, sizeof(*lf->f.files));
			lf->entries = xcalloc((size_t)tpn, sizeof(*lf->entries));
			lf->until = xcalloc((size_t)tpn, sizeof(*lf->until));
		}
		json_t *first = NULL; /* tasks that share a file share an entry */
		char *first_path = NULL;
		for (int t = ni * tpn; t < (ni + 1) * tpn; t++) {
			if (rank >= 0 && t != rank)
				continue;
			struct output_names v = {.job = j->job.id,
						 .array_job = j->job.array_job,
						 .array_index = j->job.array_index,
						 .attempt = a->number,
						 .rank = t,
						 .node_rank = ni,
						 .node = node,
						 .owner = j->job.owner,
						 .name = req->name};
			char *path = model_output_path(
				err_stream ? req->error
					   : (req->output ? req->output : MODEL_DEFAULT_OUTPUT),
				req->cwd, &v);
			if (first && strcmp(path, first_path) == 0) {
				json_array_append_new(json_object_get(first, "ranks"),
						      json_integer(t));
				free(path);
				continue;
			}
			json_t *e = json_pack("{s:i, s:s, s:s, s:I, s:I, s:s, s:[i]}", "task", t,
					      "node", node, "path", path, "offset", (json_int_t)0,
					      "size", (json_int_t)0, "data", "", "ranks", t);
			json_array_append_new(tasks, e);
			if (!first) {
				first = e;
				first_path = xstrdup(path);
			}
			char why[MODEL_REASON_MAX];
			if (down) {
				snprintf(why, sizeof(why),
					 "node %s is down: its output cannot be read", node);
				json_object_set_new(e, "status",
						    json_string(log_status_name(LOG_NODE_DOWN)));
				json_object_set_new(e, "error", json_string(why));
				free(path);
				continue;
			}
			/* a later attempt's task not started yet (as the server
			 * knows): where it begins in a file earlier attempts wrote
			 * is not known, and its output is not there yet */
			if (from[t] == FROM_ATTEMPT && a->number > 1 && t < a->ntasks &&
			    a->tasks[t].state == TASK_WAITING && !a->ended) {
				snprintf(why, sizeof(why),
					 "task %d of attempt %d has not started yet", t, a->number);
				json_object_set_new(e, "status",
						    json_string(log_status_name(LOG_NOT_YET)));
				json_object_set_new(e, "error", json_string(why));
				free(path);
				continue;
			}
			snprintf(why, sizeof(why), "node %s did not answer within %d s", node,
				 LOGS_WAIT_MS / 1000);
			json_object_set_new(e, "status",
					    json_string(log_status_name(LOG_NO_ANSWER)));
			json_object_set_new(e, "error", json_string(why));
			struct wire_log_file *x = &lf->f.files[lf->f.nfiles];
			lf->until[lf->f.nfiles] = attempt_until(j, a, t, ni, &v, path, err_stream);
			/* its end not known yet: not ended for a follower, who asks
			 * again rather than take the next attempt's output as its */
			if (lf->until[lf->f.nfiles] < 0)
				json_object_set_new(ans, "ended", json_false());
			lf->entries[lf->f.nfiles++] = e;
			x->rank = t;
			x->path = path;
			/* from the start: of this attempt, not of the file */
			x->offset = from[t] != FROM_ATTEMPT ? from[t]
				    : t >= a->ntasks	    ? 0
				    : err_stream	    ? a->tasks[t].err_from
							    : a->tasks[t].out_from;
			x->max = max;
			x->tail = (int)tail;
		}
		free(first_path);
		if (!lf)
			continue;
		if (!lf->f.nfiles) {
			fetch_free(lf);
			continue;
		}
		*tail_p = lf;
		tail_p = &lf->next;
		w->outstanding++;
	}
	free(from);
	if (!w->outstanding) {
		json_t *o = w->answer;
		free(w);
		reply_json(r, 200, o);
		return;
	}
	r->logw = w;
	request_park(r, WAIT_LOGS, tk_mono_ms() + LOGS_WAIT_MS);
	for (struct log_fetch *lf = s->log_fetches; lf; lf = lf->next)
		if (lf->client == r)
			api_wake_node(s, s->st.nodes[lf->node]);
}

/* What the agent read: each part into its entry of the user's answer. */
static void fetch_fill(struct log_fetch *lf, const struct wire_log_answer *an)
{
	for (int i = 0; i < an->nparts; i++) {
		const struct wire_log_part *p = &an->parts[i];
		for (int k = 0; k < lf->f.nfiles; k++) {
			if (lf->f.files[k].rank != p->rank)
				continue;
			json_t *e = lf->entries[k];
			/* this attempt's part of a file the next one appended to */
			int64_t until = lf->until[k], size = p->size;
			size_t len = p->len;
			if (until > 0) {
				len = p->offset >= until
					      ? 0
					      : (size_t)MIN((int64_t)len, until - p->offset);
				size = MIN(size, until);
			} else if (until < 0) {
				len = 0;
				size = MIN(size, p->offset);
			}
			char *b64 = tk_base64_encode(p->data ? p->data : "", len);
			json_object_set_new(e, "data", json_string(b64));
			free(b64);
			json_object_set_new(e, "offset", json_integer(p->offset));
			json_object_set_new(e, "size", json_integer(size));
			json_object_set_new(e, "status", json_string(log_status_name(p->status)));
			if (p->error[0])
				json_object_set_new(e, "error", json_string(p->error));
			else
				json_object_del(e, "error");
		}
	}
}

void h_agent_logs(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct wire_logs m;
	struct tk_error err;
	if (wire_logs_unpack(body, &m, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	struct snode *n = api_agent_node(r, m.node, m.agent_id);
	if (!n) {
		wire_logs_release(&m);
		return;
	}
	for (int i = 0; i < m.nanswers; i++) {
		/* only what was asked of this node */
		struct log_fetch *lf = s->log_fetches;
		while (lf && !(lf->f.id == m.answers[i].id && lf->node == n->index))
			lf = lf->next;
		if (!lf)
			continue; /* its user stopped waiting */
		struct request *client = lf->client;
		fetch_fill(lf, &m.answers[i]);
		struct log_fetch **pp = &s->log_fetches;
		while (*pp != lf)
			pp = &(*pp)->next;
		*pp = lf->next;
		fetch_free(lf);
		if (--client->logw->outstanding == 0)
			logs_answer(client);
	}
	wire_logs_release(&m);
	reply_json(r, 200, json_pack("{s:b}", "ok", 1));
}
