/*
 * Services (tenk serve; issue 45): long-running sets of replicas beside
 * training, each replica one job of one task on one node, placed by the
 * same pass as every job (in the class "service" where the cluster has
 * one), given a port of its node ($PORT) and a health probe its node's
 * agent runs (job_probe).
 *
 * The idea is Kubernetes' ReplicaSet: the service is a count and a
 * template; a controller (services_tick, in the cron) keeps that many
 * replicas live, making a new job where one ended (it exited, failed its
 * probe, was cancelled) and cancelling the newest where there are too many.
 * A replica that ends soon after it was made (SERVICE_CRASH_MS) counts as
 * a crash, and crashes in a row wait twice as long each before the next
 * replacement (1 s up to SERVICE_BACKOFF_MAX_MS: Kubernetes'
 * CrashLoopBackOff), so that a broken command does not spin the queue.
 * A node lost or a preemption requeues a replica as any job; it stays the
 * same job.
 *
 * The endpoints of a service are its replicas whose current attempt runs
 * and whose probe passed last (attempt_node.ready): the agent takes a
 * replica out at its first failed probe and the server has it with the
 * agent's next events, so an outside load balancer reading
 * GET /v1/services/NAME/endpoints stops sending to it within a probe
 * period and a round trip.
 *
 * The records live in the store (meta "services"), with the ids of their
 * replicas' jobs, so that a restarted server goes on with the same jobs.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SERVICE_MAX 1024		/* services of one cluster */
#define SERVICE_MAX_REPLICAS 1000	/* replicas of one service */
#define SERVICE_CRASH_MS 60000		/* a replica ended sooner crashed */
#define SERVICE_BACKOFF_MAX_MS 300000	/* the longest wait after crashes */
#define SERVICE_MAKE_PER_TICK 64	/* replicas one tick makes, over all services */
#define SERVICE_DEFAULT_CLASS "service" /* the class its replicas get, where there is one */

struct service {
	char name[MODEL_NAME_MAX];
	char owner[MODEL_NAME_MAX];
	char run_as[MODEL_NAME_MAX];
	int replicas;
	int port; /* its address on every node, the agents' forwarder (0: none) */
	struct job_probe probe;
	struct job_request job; /* the template: one task on one node */
	int64_t created_ms;
	/* its replicas' jobs, oldest first: live, or not yet seen to end */
	int njobs;
	int64_t *jobs;
	int made;			 /* replicas made, ever: the next one's index */
	int replaced;			 /* replicas that ended and were made again */
	int crashes;			 /* in a row, each within SERVICE_CRASH_MS of its making */
	int64_t next_ms;		 /* no replica is made before (back-off after crashes) */
	int64_t *made_ms;		 /* when each of jobs was made (parallel to jobs) */
	char last_end[MODEL_REASON_MAX]; /* how the last replica to end ended */
	bool deleting;			 /* deleted: its replicas are cancelled, then it goes */
};

static void service_free(struct service *sv)
{
	if (!sv)
		return;
	job_request_release(&sv->job);
	free(sv->jobs);
	free(sv->made_ms);
	free(sv);
}

/* ---- the record ------------------------------------------------------------------ */

static json_t *record_pack(const struct service *sv)
{
	json_t *jobs = json_array();
	for (int i = 0; i < sv->njobs; i++)
		json_array_append_new(jobs, json_pack("{s:I, s:I}", "job", (json_int_t)sv->jobs[i],
						      "made_ms", (json_int_t)sv->made_ms[i]));
	return json_pack("{s:s, s:s, s:s, s:i, s:i, s:o, s:o, s:I, s:o, s:i, s:i, s:i, s:I, s:s, "
			 "s:b}",
			 "name", sv->name, "owner", sv->owner, "run_as", sv->run_as, "replicas",
			 sv->replicas, "port", sv->port, "probe", job_probe_pack(&sv->probe), "job",
			 job_request_pack(&sv->job), "created_ms", (json_int_t)sv->created_ms,
			 "jobs", jobs, "made", sv->made, "replaced", sv->replaced, "crashes",
			 sv->crashes, "next_ms", (json_int_t)sv->next_ms, "last_end", sv->last_end,
			 "deleting", sv->deleting);
}

static void add_job(struct service *sv, int64_t id, int64_t made_ms)
{
	sv->jobs = xrealloc(sv->jobs, sizeof(*sv->jobs) * (size_t)(sv->njobs + 1));
	sv->made_ms = xrealloc(sv->made_ms, sizeof(*sv->made_ms) * (size_t)(sv->njobs + 1));
	sv->jobs[sv->njobs] = id;
	sv->made_ms[sv->njobs++] = made_ms;
}

static struct service *record_unpack(json_t *o, struct tk_error *err)
{
	struct service *sv = xcalloc(1, sizeof(*sv));
	int64_t replicas, made, replaced, crashes, port;
	json_t *jobs;
	int r;
	if ((r = mj_strbuf(o, "name", true, true, sv->name, sizeof(sv->name), err)) < 0 ||
	    (r = mj_strbuf(o, "owner", true, true, sv->owner, sizeof(sv->owner), err)) < 0 ||
	    (r = mj_strbuf(o, "run_as", true, true, sv->run_as, sizeof(sv->run_as), err)) < 0 ||
	    (r = mj_int(o, "replicas", true, 0, SERVICE_MAX_REPLICAS, 0, &replicas, err)) < 0 ||
	    (r = job_probe_unpack(json_object_get(o, "probe"), &sv->probe, err)) < 0 ||
	    (r = job_request_unpack(json_object_get(o, "job"), &sv->job, err)) < 0) {
		service_free(sv);
		return NULL;
	}
	if ((r = mj_int(o, "port", false, 0, 65535, 0, &port, err)) < 0 ||
	    (r = mj_int(o, "created_ms", false, 0, INT64_MAX, 0, &sv->created_ms, err)) < 0 ||
	    (r = mj_int(o, "made", false, 0, INT32_MAX, 0, &made, err)) < 0 ||
	    (r = mj_int(o, "replaced", false, 0, INT32_MAX, 0, &replaced, err)) < 0 ||
	    (r = mj_int(o, "crashes", false, 0, INT32_MAX, 0, &crashes, err)) < 0 ||
	    (r = mj_int(o, "next_ms", false, 0, INT64_MAX, 0, &sv->next_ms, err)) < 0 ||
	    (r = mj_strbuf(o, "last_end", false, true, sv->last_end, sizeof(sv->last_end), err)) <
		    0 ||
	    (r = mj_bool(o, "deleting", false, false, &sv->deleting, err)) < 0 ||
	    !json_is_array(jobs = json_object_get(o, "jobs"))) {
		if (r == 0)
			tk_errorf(err, -EINVAL, "jobs: must be a list");
		service_free(sv);
		return NULL;
	}
	sv->replicas = (int)replicas;
	sv->port = (int)port;
	sv->made = (int)made;
	sv->replaced = (int)replaced;
	sv->crashes = (int)crashes;
	size_t i;
	json_t *v;
	json_array_foreach (jobs, i, v) {
		int64_t id, at;
		if (mj_int(v, "job", true, 1, INT64_MAX, 0, &id, err) < 0 ||
		    mj_int(v, "made_ms", false, 0, INT64_MAX, 0, &at, err) < 0) {
			service_free(sv);
			return NULL;
		}
		add_job(sv, id, at);
	}
	return sv;
}

static void save(struct server *s)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < s->services.n; i++)
		json_array_append_new(arr, record_pack(s->services.v[i]));
	char *text = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	store_batch_put_meta(s->fill.batch, "services", text);
	free(text);
	s->st.seq_applied++; /* an answer that tells of it waits for its write */
}

int services_load(struct server *s, struct tk_error *err)
{
	services_release(s);
	char *text = NULL;
	int r = store_meta_get(s->store, "services", &text, err);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	json_t *arr = json_loads(text, 0, NULL);
	free(text);
	size_t i;
	json_t *j;
	json_array_foreach (arr, i, j) {
		struct tk_error e;
		struct service *sv = record_unpack(j, &e);
		if (!sv) {
			log_err("a stored service does not decode (%s); it is left out", e.text);
			continue;
		}
		xgrow(&s->services.v, &s->services.alloc, s->services.n + 1,
		      sizeof(*s->services.v));
		s->services.v[s->services.n++] = sv;
	}
	json_decref(arr);
	return 0;
}

void services_release(struct server *s)
{
	for (size_t i = 0; i < s->services.n; i++)
		service_free(s->services.v[i]);
	free(s->services.v);
	memset(&s->services, 0, sizeof(s->services));
}

static struct service *find(struct server *s, const char *name)
{
	for (size_t i = 0; i < s->services.n; i++)
		if (strcmp(s->services.v[i]->name, name) == 0)
			return s->services.v[i];
	return NULL;
}

/* ---- the controller ---------------------------------------------------------------- */

/* A new replica of sv: its job, from the template. Returns false when no id
 * can be had now (the store is failing: the next tick tries again). */
static bool make_replica(struct server *s, struct service *sv, int64_t now)
{
	struct tk_error err;
	if (server_ids_reserve(s, 1, &err) < 0) {
		log_warn("service %s: no replica made now: %s", sv->name, err.text);
		return false;
	}
	struct job_request req;
	job_request_copy(&sv->job, &req);
	free(req.service);
	req.service = xstrdup(sv->name);
	free(req.probe);
	req.probe = xmalloc(sizeof(*req.probe));
	*req.probe = sv->probe;
	struct sjob *j = state_submit(&s->st, &req, sv->owner, sv->run_as, false, now);
	add_job(sv, j->job.id, now);
	sv->made++;
	log_info("service %s: replica job %lld made (%d of %d live)", sv->name,
		 (long long)j->job.id, sv->njobs, sv->replicas);
	return true;
}

/* Takes out of sv the jobs that ended; returns how many. */
static int reap(struct server *s, struct service *sv, int64_t now)
{
	int gone = 0;
	for (int i = 0; i < sv->njobs;) {
		struct sjob *j = state_job(&s->st, sv->jobs[i]);
		if (j && !job_state_final(j->job.state)) {
			i++;
			continue;
		}
		if (j)
			snprintf(sv->last_end, sizeof(sv->last_end), "job %lld %s: %.200s",
				 (long long)j->job.id, job_state_name(j->job.state), j->job.reason);
		else
			snprintf(sv->last_end, sizeof(sv->last_end), "job %lld ended",
				 (long long)sv->jobs[i]);
		if (!sv->deleting) {
			sv->replaced++;
			bool crashed = now - sv->made_ms[i] < SERVICE_CRASH_MS;
			sv->crashes = crashed ? sv->crashes + 1 : 0;
			if (crashed) {
				int64_t wait = 1000;
				for (int k = 1; k < sv->crashes && wait < SERVICE_BACKOFF_MAX_MS;
				     k++)
					wait *= 2;
				sv->next_ms = now + MIN(wait, (int64_t)SERVICE_BACKOFF_MAX_MS);
			}
			log_info("service %s: %s%s", sv->name, sv->last_end,
				 crashed ? " (soon after it was made: the next waits)" : "");
		}
		memmove(&sv->jobs[i], &sv->jobs[i + 1],
			sizeof(*sv->jobs) * (size_t)(sv->njobs - i - 1));
		memmove(&sv->made_ms[i], &sv->made_ms[i + 1],
			sizeof(*sv->made_ms) * (size_t)(sv->njobs - i - 1));
		sv->njobs--;
		gone++;
	}
	return gone;
}

static void cancel(struct server *s, int64_t id, int64_t now)
{
	struct sjob *j = state_job(&s->st, id);
	struct tk_error err;
	if (j && !job_state_final(j->job.state))
		state_cancel(&s->st, j, now, &err);
}

void services_tick(struct server *s, int64_t now)
{
	int budget = SERVICE_MAKE_PER_TICK;
	for (size_t i = 0; i < s->services.n; i++) {
		struct service *sv = s->services.v[i];
		bool changed = reap(s, sv, now) > 0;
		if (sv->deleting) {
			if (sv->njobs == 0) {
				log_info("service %s: deleted, its replicas ended", sv->name);
				service_free(sv);
				memmove(&s->services.v[i], &s->services.v[i + 1],
					sizeof(*s->services.v) * (s->services.n - i - 1));
				s->services.n--;
				i--;
				save(s);
				continue;
			}
			for (int k = 0; k < sv->njobs; k++)
				cancel(s, sv->jobs[k], now);
		} else {
			/* too many (scaled down): the newest go first */
			while (sv->njobs > sv->replicas) {
				cancel(s, sv->jobs[sv->njobs - 1], now);
				sv->njobs--;
				changed = true;
			}
			while (sv->njobs < sv->replicas && now >= sv->next_ms && budget > 0 &&
			       make_replica(s, sv, now)) {
				budget--;
				changed = true;
			}
		}
		if (changed)
			save(s);
	}
	services_sync(s);
}

/* ---- the agents' table ------------------------------------------------------------ */

static bool same_table(const struct wire_service *a, int na, const struct wire_service *b, int nb)
{
	if (na != nb)
		return false;
	for (int i = 0; i < na; i++) {
		if (strcmp(a[i].name, b[i].name) != 0 || a[i].port != b[i].port ||
		    a[i].nends != b[i].nends)
			return false;
		for (int k = 0; k < a[i].nends; k++)
			if (strcmp(a[i].ends[k].addr, b[i].ends[k].addr) != 0 ||
			    a[i].ends[k].port != b[i].ends[k].port)
				return false;
	}
	return true;
}

static const struct attempt *running(const struct sjob *j);
static const char *node_addr(struct server *s, const char *node);

void services_sync(struct server *s)
{
	struct state *st = &s->st;
	st->services_dirty = false;
	struct wire_service *v = xcalloc(s->services.n + 1, sizeof(*v));
	int n = 0;
	for (size_t i = 0; i < s->services.n; i++) {
		const struct service *sv = s->services.v[i];
		if (!sv->port || sv->deleting)
			continue;
		struct wire_service *w = &v[n++];
		snprintf(w->name, sizeof(w->name), "%s", sv->name);
		w->port = sv->port;
		w->ends = xcalloc((size_t)sv->njobs + 1, sizeof(*w->ends));
		for (int k = 0; k < sv->njobs && w->nends < WIRE_MAX_ENDPOINTS; k++) {
			const struct sjob *j = state_job(st, sv->jobs[k]);
			const struct attempt *a = running(j);
			if (!a || j->job.state != JOB_RUNNING || !a->nodes[0].ready)
				continue;
			snprintf(w->ends[w->nends].addr, sizeof(w->ends[w->nends].addr), "%s",
				 node_addr(s, a->nodes[0].name));
			w->ends[w->nends++].port = a->master_port;
		}
	}
	if (same_table(v, n, st->services, st->nservices) && (st->services_on || !n)) {
		wire_services_free(v, n);
		return;
	}
	state_services_set(st, v, n);
}

/* ---- the API ------------------------------------------------------------------------- */

/* The attempt of replica job j that runs now, and its node; NULL: none. */
static const struct attempt *running(const struct sjob *j)
{
	if (!j || (j->job.state != JOB_RUNNING && j->job.state != JOB_STARTING) ||
	    !j->job.nattempts)
		return NULL;
	const struct attempt *a = &j->job.attempts[j->job.nattempts - 1];
	return a->ended || a->nnodes < 1 ? NULL : a;
}

static const char *node_addr(struct server *s, const char *node)
{
	const struct snode *n = state_node(&s->st, node);
	return n && n->rec.inv.addr[0] ? n->rec.inv.addr : "127.0.0.1";
}

static json_t *endpoint_pack(struct server *s, const struct sjob *j, const struct attempt *a)
{
	const char *addr = node_addr(s, a->nodes[0].name);
	return json_pack("{s:I, s:i, s:s, s:s, s:i}", "job", (json_int_t)j->job.id, "attempt",
			 a->number, "node", a->nodes[0].name, "addr", addr, "port", a->master_port);
}

/* Ready replicas as endpoints, into arr; returns how many. */
static int endpoints(struct server *s, const struct service *sv, json_t *arr)
{
	int n = 0;
	for (int i = 0; i < sv->njobs; i++) {
		const struct sjob *j = state_job(&s->st, sv->jobs[i]);
		const struct attempt *a = running(j);
		if (!a || j->job.state != JOB_RUNNING || !a->nodes[0].ready)
			continue;
		json_array_append_new(arr, endpoint_pack(s, j, a));
		n++;
	}
	return n;
}

static json_t *service_pack(struct server *s, const struct service *sv, bool whole)
{
	json_t *ready = json_array();
	int nready = endpoints(s, sv, ready);
	json_t *o =
		json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:I, s:s, s:b, s:o}", "name",
			  sv->name, "owner", sv->owner, "replicas", sv->replicas, "live", sv->njobs,
			  "ready", nready, "made", sv->made, "replaced", sv->replaced, "created_ms",
			  (json_int_t)sv->created_ms, "last_end", sv->last_end, "deleting",
			  sv->deleting, "probe", job_probe_pack(&sv->probe));
	if (sv->port)
		json_object_set_new(o, "port", json_integer(sv->port));
	if (sv->crashes) {
		json_object_set_new(o, "crashes", json_integer(sv->crashes));
		json_object_set_new(o, "next_ms", json_integer(sv->next_ms));
	}
	if (!whole) {
		json_decref(ready);
		return o;
	}
	json_t *reps = json_array();
	for (int i = 0; i < sv->njobs; i++) {
		const struct sjob *j = state_job(&s->st, sv->jobs[i]);
		if (!j)
			continue;
		const struct attempt *a = running(j);
		json_t *r = a ? endpoint_pack(s, j, a)
			      : json_pack("{s:I}", "job", (json_int_t)j->job.id);
		json_object_set_new(r, "state", json_string(job_state_name(j->job.state)));
		json_object_set_new(r, "ready", json_boolean(a && a->nodes[0].ready));
		if (j->job.reason[0])
			json_object_set_new(r, "reason", json_string(j->job.reason));
		json_array_append_new(reps, r);
	}
	json_object_set_new(o, "replica_jobs", reps);
	json_object_set_new(o, "endpoints", ready);
	json_object_set_new(o, "job", job_request_pack(&sv->job));
	return o;
}

/* {"name", "replicas", "probe", "job": a job's request}: the template is
 * checked as a submission is, and must be one task on one node. */
void services_h_create(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	static const char *const keys[] = {"name", "replicas", "port", "probe", "job", NULL};
	struct tk_error err;
	char name[MODEL_NAME_MAX];
	int64_t replicas, port;
	struct job_probe probe;
	json_t *pj = json_object_get(body, "probe");
	json_t *jj = json_object_get(body, "job");
	json_t *none = json_object(); /* no probe given: every default */
	int rc;
	if ((rc = mj_check_keys(body, NULL, keys, &err)) < 0 ||
	    (rc = mj_strbuf(body, "name", true, true, name, sizeof(name), &err)) < 0 ||
	    (rc = mj_int(body, "replicas", false, 0, SERVICE_MAX_REPLICAS, 1, &replicas, &err)) <
		    0 ||
	    (rc = mj_int(body, "port", false, 1, 65535, 0, &port, &err)) < 0 ||
	    (rc = job_probe_unpack(pj ? pj : none, &probe, &err)) < 0)
		reply_error(r, 400, "%s", err.text);
	json_decref(none);
	if (rc < 0)
		return;
	if (!model_name_valid(name)) {
		reply_error(r, 400,
			    "name: \"%s\" is not a valid name (letters, digits, '.', '_', '-')",
			    name);
		return;
	}
	if (!json_is_object(jj)) {
		reply_error(r, 400, "job: must be the replica's request, as POST /v1/jobs takes");
		return;
	}
	static const char *const refused[] = {"service", "probe",     "array",	"after",
					      "pty",	 "nodes_max", "spares", "nodelist"};
	for (size_t i = 0; i < ARRAY_SIZE(refused); i++)
		if (json_object_get(jj, refused[i])) {
			reply_error(r, 400,
				    "job.%s: not for a service's replica (the service sets its "
				    "probe and name; a replica is one task on one node that runs "
				    "until it is replaced)",
				    refused[i]);
			return;
		}
	struct job_request req;
	if (job_request_unpack(jj, &req, &err) < 0) {
		reply_error(r, 400, "job.%s", err.text);
		return;
	}
	if (req.nodes != 1 || req.tasks_per_node != 1 || req.time_limit_s) {
		reply_error(r, 400,
			    req.time_limit_s
				    ? "job.time_limit_s: a replica runs until it is "
				      "replaced; give none"
				    : "job: a replica is one task on one node; got %d node(s) x "
				      "%d task(s)",
			    req.nodes, req.tasks_per_node);
		job_request_release(&req);
		return;
	}
	if (!req.cls && sched_config_class(&s->st.sched, SERVICE_DEFAULT_CLASS) >= 0)
		req.cls = xstrdup(SERVICE_DEFAULT_CLASS);
	char run_as[MODEL_NAME_MAX];
	if (api_request_checks(r, &req, run_as) < 0) {
		job_request_release(&req);
		return;
	}
	if (find(s, name)) {
		reply_error(r, 409, "service %s exists (tenk serve ls lists them)", name);
		job_request_release(&req);
		return;
	}
	for (size_t i = 0; port && i < s->services.n; i++)
		if (s->services.v[i]->port == port) {
			reply_error(r, 409, "port: %d is service %s's address", (int)port,
				    s->services.v[i]->name);
			job_request_release(&req);
			return;
		}
	if (s->services.n >= SERVICE_MAX) {
		reply_error(r, 507, "this cluster holds at most %d services", SERVICE_MAX);
		job_request_release(&req);
		return;
	}
	struct service *sv = xcalloc(1, sizeof(*sv));
	snprintf(sv->name, sizeof(sv->name), "%s", name);
	snprintf(sv->owner, sizeof(sv->owner), "%s", r->user);
	snprintf(sv->run_as, sizeof(sv->run_as), "%s", run_as);
	sv->replicas = (int)replicas;
	sv->port = (int)port;
	sv->probe = probe;
	sv->job = req;
	sv->created_ms = server_now_ms(s);
	xgrow(&s->services.v, &s->services.alloc, s->services.n + 1, sizeof(*s->services.v));
	s->services.v[s->services.n++] = sv;
	log_info("service %s created by %s: %d replica(s)", sv->name, sv->owner, sv->replicas);
	services_tick(s, sv->created_ms);
	save(s);
	reply_json(r, 201, service_pack(s, sv, true));
}

void services_h_list(struct request *r, const char *param, json_t *body)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < r->s->services.n; i++)
		json_array_append_new(arr, service_pack(r->s, r->s->services.v[i], false));
	reply_json(r, 200, json_pack("{s:o}", "services", arr));
}

static struct service *named(struct request *r, const char *param)
{
	struct service *sv = find(r->s, param);
	if (!sv)
		reply_error(r, 404, "no service \"%.64s\" (tenk serve ls lists them)", param);
	return sv;
}

static bool may_change(struct request *r, const struct service *sv, const char *verb)
{
	if (strcmp(sv->owner, r->user) == 0 || r->role == ROLE_OPERATOR || r->role == ROLE_ADMIN)
		return true;
	reply_error(r, 403, "service %s is %s's: only its owner, an operator or an admin may %s it",
		    sv->name, sv->owner, verb);
	return false;
}

void services_h_show(struct request *r, const char *param, json_t *body)
{
	struct service *sv = named(r, param);
	if (sv)
		reply_json(r, 200, service_pack(r->s, sv, true));
}

void services_h_endpoints(struct request *r, const char *param, json_t *body)
{
	struct service *sv = named(r, param);
	if (!sv)
		return;
	json_t *arr = json_array();
	endpoints(r->s, sv, arr);
	reply_json(r, 200, json_pack("{s:s, s:o}", "service", sv->name, "endpoints", arr));
}

void services_h_scale(struct request *r, const char *param, json_t *body)
{
	struct service *sv = named(r, param);
	static const char *const keys[] = {"replicas", NULL};
	struct tk_error err;
	int64_t replicas;
	if (!sv || !may_change(r, sv, "scale"))
		return;
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    mj_int(body, "replicas", true, 0, SERVICE_MAX_REPLICAS, 0, &replicas, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	if (sv->deleting) {
		reply_error(r, 409, "service %s is being deleted", sv->name);
		return;
	}
	sv->replicas = (int)replicas;
	sv->next_ms = 0;
	sv->crashes = 0;
	services_tick(r->s, server_now_ms(r->s));
	save(r->s);
	reply_json(r, 200, service_pack(r->s, sv, true));
}

void services_h_delete(struct request *r, const char *param, json_t *body)
{
	struct service *sv = named(r, param);
	if (!sv || !may_change(r, sv, "delete"))
		return;
	sv->deleting = true;
	json_t *o = json_pack("{s:s, s:i}", "deleted", sv->name, "replicas", sv->njobs);
	services_tick(r->s, server_now_ms(r->s));
	save(r->s);
	reply_json(r, 200, o);
}
