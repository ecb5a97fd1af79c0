/*
 * Services (tenk serve; issue 45): long-running sets of replicas beside
 * training, each replica one job of one task on one node, placed by the
 * same pass as every job (in the class "service" where the cluster has
 * one), given a port of its node ($PORT) and a health probe its node's
 * agent runs (job_probe).
 *
 * The idea is Kubernetes' ReplicaSet and Deployment: the service is a
 * count and a template; a controller (services_tick, in the cron) keeps
 * that many replicas live, making a new job where one ended (it exited,
 * failed its probe, was cancelled) and taking the newest away where there
 * are too many. A replica that ends soon after it was made
 * (SERVICE_CRASH_MS) counts as a crash, and crashes in a row wait twice
 * as long each before the next replacement (1 s up to
 * SERVICE_BACKOFF_MAX_MS: CrashLoopBackOff), so that a broken command
 * does not spin the queue. A node lost or a preemption requeues a replica
 * as any job; it stays the same job.
 *
 * A replica taken away is drained first: out of the endpoints (and so of
 * every node's forwarder) at once, cancelled SERVICE_DRAIN_MS later, so
 * that no new request goes to a replica being stopped.
 *
 * Versions: each template is a generation (gen). An update (tenk serve
 * update) makes the new template the target and replaces the replicas of
 * other generations a few at a time: up to max_surge replicas beyond the
 * count are made of the new one, and an old one is drained only while the
 * replicas in rotation stay at least the count less max_unavailable (1
 * and 0 by default: a new replica is in rotation before an old one goes).
 * A replica of the new generation that ends while the update runs stops it
 * and rolls it back: the template before is the target again, and the same
 * steps replace the new replicas by old ones.
 *
 * The endpoints of a service are its replicas whose current attempt runs,
 * whose probe passed last (attempt_node.ready) and which are not being
 * drained: the agent takes a replica out at its first failed probe and the
 * server has it with the agent's next events.
 *
 * The records live in the store (meta "services"), with their replicas'
 * job ids, so that a restarted server goes on with the same jobs.
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
#define SERVICE_DRAIN_MS 1500		/* out of rotation this long before it is stopped */
#define SERVICE_DEFAULT_CLASS "service" /* the class its replicas get, where there is one */
#define SERVICE_LOAD_FRESH_MS 20000	/* a node's load report counts this long */
#define SERVICE_SPREAD_WAIT_MS 10000	/* a replica kept off its peers waits this long a step */
#define SERVICE_MAX_LOADS 4096		/* nodes whose load one service keeps */

enum update_state { UPD_NONE, UPD_ROLLING, UPD_DONE, UPD_ROLLING_BACK, UPD_ROLLED_BACK, UPD_MAX };
static const char *const update_names[UPD_MAX] = {[UPD_NONE] = "",
						  [UPD_ROLLING] = "rolling",
						  [UPD_DONE] = "done",
						  [UPD_ROLLING_BACK] = "rolling_back",
						  [UPD_ROLLED_BACK] = "rolled_back"};

/* What one node's forwarder last said of a service's connections. */
struct node_load {
	char node[MODEL_NAME_MAX];
	int busy, held;
	int64_t at_ms; /* monotonic */
};

/* How far a new replica is kept from its peers, a step less each time it
 * waits SERVICE_SPREAD_WAIT_MS for a place: off their nodes' fault
 * domains, off their nodes, beside them. */
enum spread { SPREAD_NONE, SPREAD_NODES, SPREAD_DOMAINS };

/* One replica: its job, of which generation, since when it drains, how
 * far it is kept from its peers and since when. */
struct replica {
	int64_t job;
	int64_t made_ms;
	int64_t drain_ms; /* 0: not draining */
	int gen;
	enum spread spread;
	int64_t spread_ms;
};

struct service {
	char name[MODEL_NAME_MAX];
	char owner[MODEL_NAME_MAX];
	char run_as[MODEL_NAME_MAX];
	int replicas;
	/* scaled with load: replicas kept between min and max, target busy
	 * connections each (the forwarders' count), fewer only after the
	 * load has wanted fewer for down_after_ms */
	bool autoscale;
	int min, max, target;
	int64_t down_after_ms;
	int64_t below_since_ms; /* monotonic: since when fewer would do (0: not) */
	int nloads;
	struct node_load *loads;
	int port; /* its address on every node, the agents' forwarder (0: none) */
	/* the target: its template (one task on one node), probe, generation */
	struct job_probe probe;
	struct job_request job;
	int gen;
	/* an update: what it replaces (the template before, for a roll back),
	 * how fast, how it stands and why */
	enum update_state upd;
	int from_gen;
	bool has_prev;
	struct job_probe prev_probe;
	struct job_request prev_job;
	int max_surge, max_unavailable;
	int64_t upd_started_ms, upd_ended_ms;
	char upd_reason[MODEL_REASON_MAX];
	int64_t created_ms;
	/* its replicas, oldest first: live, or not yet seen to end */
	int nrep;
	struct replica *rep;
	int made;			 /* replicas made, ever */
	int replaced;			 /* replicas that ended by themselves and were made again */
	int crashes;			 /* in a row, each within SERVICE_CRASH_MS of its making */
	int64_t next_ms;		 /* no replica is made before (back-off after crashes) */
	char last_end[MODEL_REASON_MAX]; /* how the last replica to end ended */
	bool deleting;			 /* deleted: its replicas are drained, then it goes */
};

static void service_free(struct service *sv)
{
	if (!sv)
		return;
	job_request_release(&sv->job);
	if (sv->has_prev)
		job_request_release(&sv->prev_job);
	free(sv->rep);
	free(sv->loads);
	free(sv);
}

static json_t *autoscale_pack(const struct service *sv)
{
	return json_pack("{s:i, s:i, s:i, s:I}", "min", sv->min, "max", sv->max, "target_inflight",
			 sv->target, "down_after_s", (json_int_t)(sv->down_after_ms / 1000));
}

/* {"min", "max", "target_inflight", "down_after_s"} into sv. */
static int autoscale_unpack(json_t *o, struct service *sv, struct tk_error *err)
{
	static const char *const keys[] = {"min", "max", "target_inflight", "down_after_s", NULL};
	int64_t min, max, target, down;
	int r;
	if ((r = mj_check_keys(o, "autoscale", keys, err)) < 0 ||
	    (r = mj_int(o, "min", true, 0, SERVICE_MAX_REPLICAS, 0, &min, err)) < 0 ||
	    (r = mj_int(o, "max", true, 1, SERVICE_MAX_REPLICAS, 0, &max, err)) < 0 ||
	    (r = mj_int(o, "target_inflight", true, 1, 1000000, 0, &target, err)) < 0 ||
	    (r = mj_int(o, "down_after_s", false, 1, 86400, 60, &down, err)) < 0) {
		mj_prefix(err, "autoscale");
		return r;
	}
	if (min > max)
		return tk_errorf(err, -EINVAL, "autoscale: min (%lld) is above max (%lld)",
				 (long long)min, (long long)max);
	sv->autoscale = true;
	sv->min = (int)min;
	sv->max = (int)max;
	sv->target = (int)target;
	sv->down_after_ms = down * 1000;
	return 0;
}

/* ---- the record ------------------------------------------------------------------ */

static json_t *record_pack(const struct service *sv)
{
	json_t *reps = json_array();
	for (int i = 0; i < sv->nrep; i++)
		json_array_append_new(reps,
				      json_pack("{s:I, s:I, s:I, s:i, s:i, s:I}", "job",
						(json_int_t)sv->rep[i].job, "made_ms",
						(json_int_t)sv->rep[i].made_ms, "drain_ms",
						(json_int_t)sv->rep[i].drain_ms, "gen",
						sv->rep[i].gen, "spread", (int)sv->rep[i].spread,
						"spread_ms", (json_int_t)sv->rep[i].spread_ms));
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:i, s:i, s:o, s:o, s:i, s:I, s:o, s:i, s:i, s:i, s:I, s:s, s:b}",
		"name", sv->name, "owner", sv->owner, "run_as", sv->run_as, "replicas",
		sv->replicas, "port", sv->port, "probe", job_probe_pack(&sv->probe), "job",
		job_request_pack(&sv->job), "gen", sv->gen, "created_ms",
		(json_int_t)sv->created_ms, "jobs", reps, "made", sv->made, "replaced",
		sv->replaced, "crashes", sv->crashes, "next_ms", (json_int_t)sv->next_ms,
		"last_end", sv->last_end, "deleting", sv->deleting);
	if (sv->upd != UPD_NONE)
		json_object_set_new(
			o, "update",
			json_pack("{s:s, s:i, s:i, s:i, s:I, s:I, s:s}", "state",
				  update_names[sv->upd], "from_gen", sv->from_gen, "max_surge",
				  sv->max_surge, "max_unavailable", sv->max_unavailable,
				  "started_ms", (json_int_t)sv->upd_started_ms, "ended_ms",
				  (json_int_t)sv->upd_ended_ms, "reason", sv->upd_reason));
	if (sv->autoscale)
		json_object_set_new(o, "autoscale", autoscale_pack(sv));
	if (sv->has_prev) {
		json_object_set_new(o, "prev_job", job_request_pack(&sv->prev_job));
		json_object_set_new(o, "prev_probe", job_probe_pack(&sv->prev_probe));
	}
	return o;
}

static void add_replica(struct service *sv, int64_t id, int64_t made_ms, int gen)
{
	sv->rep = xrealloc(sv->rep, sizeof(*sv->rep) * (size_t)(sv->nrep + 1));
	sv->rep[sv->nrep++] = (struct replica){.job = id, .made_ms = made_ms, .gen = gen};
}

static int update_unpack(json_t *u, struct service *sv, struct tk_error *err)
{
	char state[16];
	int64_t from, surge, unavail;
	int r;
	if ((r = mj_strbuf(u, "state", true, true, state, sizeof(state), err)) < 0 ||
	    (r = mj_int(u, "from_gen", true, 0, INT32_MAX, 0, &from, err)) < 0 ||
	    (r = mj_int(u, "max_surge", false, 0, SERVICE_MAX_REPLICAS, 1, &surge, err)) < 0 ||
	    (r = mj_int(u, "max_unavailable", false, 0, SERVICE_MAX_REPLICAS, 0, &unavail, err)) <
		    0 ||
	    (r = mj_int(u, "started_ms", false, 0, INT64_MAX, 0, &sv->upd_started_ms, err)) < 0 ||
	    (r = mj_int(u, "ended_ms", false, 0, INT64_MAX, 0, &sv->upd_ended_ms, err)) < 0 ||
	    (r = mj_strbuf(u, "reason", false, true, sv->upd_reason, sizeof(sv->upd_reason), err)) <
		    0)
		return r;
	int k = 1;
	while (k < UPD_MAX && strcmp(update_names[k], state) != 0)
		k++;
	if (k == UPD_MAX)
		return tk_errorf(err, -EINVAL, "update.state: \"%s\" is not one", state);
	sv->upd = (enum update_state)k;
	sv->from_gen = (int)from;
	sv->max_surge = (int)surge;
	sv->max_unavailable = (int)unavail;
	return 0;
}

static struct service *record_unpack(json_t *o, struct tk_error *err)
{
	struct service *sv = xcalloc(1, sizeof(*sv));
	int64_t replicas, made, replaced, crashes, port, gen;
	json_t *jobs, *prev = json_object_get(o, "prev_job"), *u = json_object_get(o, "update");
	int r;
	if ((r = mj_strbuf(o, "name", true, true, sv->name, sizeof(sv->name), err)) < 0 ||
	    (r = mj_strbuf(o, "owner", true, true, sv->owner, sizeof(sv->owner), err)) < 0 ||
	    (r = mj_strbuf(o, "run_as", true, true, sv->run_as, sizeof(sv->run_as), err)) < 0 ||
	    (r = mj_int(o, "replicas", true, 0, SERVICE_MAX_REPLICAS, 0, &replicas, err)) < 0 ||
	    (r = job_probe_unpack(json_object_get(o, "probe"), &sv->probe, err)) < 0 ||
	    (r = job_request_unpack(json_object_get(o, "job"), &sv->job, err)) < 0) {
		free(sv);
		return NULL;
	}
	if (prev) {
		if (job_request_unpack(prev, &sv->prev_job, err) < 0) {
			service_free(sv);
			return NULL;
		}
		sv->has_prev = true;
		if (job_probe_unpack(json_object_get(o, "prev_probe"), &sv->prev_probe, err) < 0) {
			service_free(sv);
			return NULL;
		}
	}
	if ((r = mj_int(o, "port", false, 0, 65535, 0, &port, err)) < 0 ||
	    (r = mj_int(o, "gen", false, 0, INT32_MAX, 1, &gen, err)) < 0 ||
	    (r = mj_int(o, "created_ms", false, 0, INT64_MAX, 0, &sv->created_ms, err)) < 0 ||
	    (r = mj_int(o, "made", false, 0, INT32_MAX, 0, &made, err)) < 0 ||
	    (r = mj_int(o, "replaced", false, 0, INT32_MAX, 0, &replaced, err)) < 0 ||
	    (r = mj_int(o, "crashes", false, 0, INT32_MAX, 0, &crashes, err)) < 0 ||
	    (r = mj_int(o, "next_ms", false, 0, INT64_MAX, 0, &sv->next_ms, err)) < 0 ||
	    (r = mj_strbuf(o, "last_end", false, true, sv->last_end, sizeof(sv->last_end), err)) <
		    0 ||
	    (r = mj_bool(o, "deleting", false, false, &sv->deleting, err)) < 0 ||
	    (u && (r = update_unpack(u, sv, err)) < 0) ||
	    (json_object_get(o, "autoscale") &&
	     (r = autoscale_unpack(json_object_get(o, "autoscale"), sv, err)) < 0) ||
	    !json_is_array(jobs = json_object_get(o, "jobs"))) {
		if (r == 0)
			tk_errorf(err, -EINVAL, "jobs: must be a list");
		service_free(sv);
		return NULL;
	}
	sv->replicas = (int)replicas;
	sv->port = (int)port;
	sv->gen = (int)gen;
	sv->made = (int)made;
	sv->replaced = (int)replaced;
	sv->crashes = (int)crashes;
	size_t i;
	json_t *v;
	json_array_foreach (jobs, i, v) {
		int64_t id, at, drain, g, spread, spread_ms;
		if (mj_int(v, "job", true, 1, INT64_MAX, 0, &id, err) < 0 ||
		    mj_int(v, "made_ms", false, 0, INT64_MAX, 0, &at, err) < 0 ||
		    mj_int(v, "drain_ms", false, 0, INT64_MAX, 0, &drain, err) < 0 ||
		    mj_int(v, "gen", false, 0, INT32_MAX, gen, &g, err) < 0 ||
		    mj_int(v, "spread", false, SPREAD_NONE, SPREAD_DOMAINS, SPREAD_NONE, &spread,
			   err) < 0 ||
		    mj_int(v, "spread_ms", false, 0, INT64_MAX, 0, &spread_ms, err) < 0) {
			service_free(sv);
			return NULL;
		}
		add_replica(sv, id, at, (int)g);
		sv->rep[sv->nrep - 1].drain_ms = drain;
		sv->rep[sv->nrep - 1].spread = (enum spread)spread;
		sv->rep[sv->nrep - 1].spread_ms = spread_ms;
	}
	return sv;
}

static void save(struct server *s)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < s->services.n; i++)
		json_array_append_new(arr, record_pack(s->services.v[i]));
	server_meta_list_save(s, "services", arr);
}

int services_load(struct server *s, struct tk_error *err)
{
	services_release(s);
	json_t *arr;
	int r = server_meta_list_load(s, "services", &arr, err);
	if (r < 0)
		return r;
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

/* ---- a replica's state ------------------------------------------------------------- */

/* The attempt of replica job j that runs now; NULL: none. */
static const struct attempt *running(const struct sjob *j)
{
	if (!j || (j->job.state != JOB_RUNNING && j->job.state != JOB_STARTING) ||
	    !j->job.nattempts)
		return NULL;
	const struct attempt *a = &j->job.attempts[j->job.nattempts - 1];
	return a->ended || a->nnodes < 1 ? NULL : a;
}

/* Replica r in rotation: its attempt runs, its probe passed last, it is not
 * drained. Returns its attempt, or NULL. */
static const struct attempt *in_rotation(struct server *s, const struct replica *r)
{
	const struct sjob *j = state_job(&s->st, r->job);
	const struct attempt *a = running(j);
	if (!a || r->drain_ms || j->job.state != JOB_RUNNING || !a->nodes[0].ready)
		return NULL;
	return a;
}

/* Whether replica job j ever passed its probe. */
static bool ever_ready(const struct sjob *j)
{
	/* (its first change is to ready: a replica is said unready only after) */
	for (int i = 0; j && i < j->job.nattempts; i++)
		if (j->job.attempts[i].nnodes && j->job.attempts[i].nodes[0].ready_ms)
			return true;
	return false;
}

/* ---- the controller ---------------------------------------------------------------- */

static bool named_in(char *const *v, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(v[i], name) == 0)
			return true;
	return false;
}

/* Whether some node up and not excluded by req has room for it now: its
 * accelerators (whole ones free, or a share of one), CPUs and memory. An
 * estimate (pools, labels and the queue's limits are the pass's to judge),
 * so that a replica is not kept off its peers where nothing else could
 * take it. */
static bool room_elsewhere(struct state *st, const struct job_request *req)
{
	int whole = req->gpu_milli >= MODEL_MILLI ? req->gpu_milli / MODEL_MILLI : 0;
	for (int k = 0; k < st->nnodes; k++) {
		const struct snode *n = st->nodes[k];
		if (state_node_state(st, n) != NODE_UP ||
		    named_in(req->exclude, req->nexclude, n->rec.inv.name) ||
		    n->rec.inv.cpus - n->cpus_used < req->cpus_per_task ||
		    (req->mem_mib && n->rec.inv.mem_mib - n->mem_used < req->mem_mib))
			continue;
		int free = 0;
		bool share = false;
		for (int d = 0; d < n->rec.inv.naccel; d++) {
			free += n->sdev[d].free_milli == MODEL_MILLI;
			share |= n->sdev[d].free_milli >= req->gpu_milli;
		}
		if (whole ? free >= whole : !req->gpu_milli || share)
			return true;
	}
	return false;
}

/* A replica's request: sv's template, its service and probe, and kept off
 * the nodes (SPREAD_NODES) or the nodes' fault domains (SPREAD_DOMAINS) of
 * the replicas running now but `self` (its job; 0: a new one), beside the
 * template's own exclusions, where some other node has room (else a step
 * nearer). Returns the level it keeps (none where no peer runs). */
static enum spread replica_request(struct server *s, const struct service *sv, enum spread level,
				   int64_t self, struct job_request *ret)
{
	struct state *st = &s->st;
	job_request_copy(&sv->job, ret);
	free(ret->service);
	ret->service = xstrdup(sv->name);
	free(ret->probe);
	ret->probe = xmalloc(sizeof(*ret->probe));
	*ret->probe = sv->probe;
	if (level == SPREAD_NONE)
		return SPREAD_NONE;
	int added = 0;
	for (int i = 0; i < sv->nrep; i++) {
		if (sv->rep[i].job == self || sv->rep[i].drain_ms)
			continue;
		const struct attempt *a = running(state_job(st, sv->rep[i].job));
		const struct snode *peer = a ? state_node(st, a->nodes[0].name) : NULL;
		if (!peer)
			continue;
		for (int k = 0; k < st->nnodes && ret->nexclude < MODEL_MAX_NODES; k++) {
			const struct snode *n = st->nodes[k];
			bool same =
				n == peer || (level == SPREAD_DOMAINS && n->rec.inv.domain[0] &&
					      strcmp(n->rec.inv.domain, peer->rec.inv.domain) == 0);
			if (!same || named_in(ret->exclude, ret->nexclude, n->rec.inv.name))
				continue;
			ret->exclude = xrealloc(ret->exclude, sizeof(*ret->exclude) *
								      (size_t)(ret->nexclude + 1));
			ret->exclude[ret->nexclude++] = xstrdup(n->rec.inv.name);
			added++;
		}
	}
	if (added && !room_elsewhere(st, ret)) {
		job_request_release(ret);
		return replica_request(s, sv, (enum spread)(level - 1), self, ret);
	}
	return added ? level : SPREAD_NONE;
}

/* A new replica of sv's target: its job, from the template, kept off its
 * peers' fault domains to begin with. Returns false when no id can be had
 * now (the store is failing: the next tick tries again). */
static bool make_replica(struct server *s, struct service *sv, int64_t now)
{
	struct tk_error err;
	if (server_ids_reserve(s, 1, &err) < 0) {
		log_warn("service %s: no replica made now: %s", sv->name, err.text);
		return false;
	}
	struct job_request req;
	enum spread spread = replica_request(s, sv, SPREAD_DOMAINS, 0, &req);
	struct sjob *j = state_submit(&s->st, &req, sv->owner, sv->run_as, false, now);
	add_replica(sv, j->job.id, now, sv->gen);
	sv->rep[sv->nrep - 1].spread = spread;
	sv->rep[sv->nrep - 1].spread_ms = now;
	sv->made++;
	log_info("service %s: replica job %lld made (version %d)", sv->name, (long long)j->job.id,
		 sv->gen);
	return true;
}

/* Whether a replica of sv made lately waits for its place: the next is
 * made once it has one (the server runs the controller again after each
 * pass while one does), so that each new replica is kept away from where
 * the one before went. One that waited two spread steps holds no more. */
static bool placing(struct server *s, const struct service *sv, int64_t now)
{
	for (int i = 0; i < sv->nrep; i++) {
		const struct sjob *j = state_job(&s->st, sv->rep[i].job);
		if (j && j->job.state == JOB_PENDING && !sv->rep[i].drain_ms &&
		    now - sv->rep[i].made_ms < 2 * SERVICE_SPREAD_WAIT_MS) {
			s->st.services_more = true;
			return true;
		}
	}
	return false;
}

/* Replicas that waited SERVICE_SPREAD_WAIT_MS for a place away from their
 * peers go a step nearer: off their nodes only, then beside them (spread
 * is a preference: a service is never held back by it). Returns whether
 * one changed. */
static bool spread_less(struct server *s, struct service *sv, int64_t now)
{
	bool changed = false;
	for (int i = 0; i < sv->nrep; i++) {
		struct replica *r = &sv->rep[i];
		if (r->spread == SPREAD_NONE)
			continue;
		struct sjob *j = state_job(&s->st, r->job);
		if (!j || j->job.state != JOB_PENDING) {
			r->spread = SPREAD_NONE; /* placed (or gone): the job keeps what it has */
			changed = true;
			continue;
		}
		if (now - r->spread_ms < SERVICE_SPREAD_WAIT_MS || r->gen != sv->gen)
			continue;
		struct job_request req;
		r->spread = replica_request(s, sv, (enum spread)(r->spread - 1), r->job, &req);
		r->spread_ms = now;
		state_job_set_request(&s->st, j, &req, now);
		log_info("service %s: replica job %lld waited for a place away from its peers; "
			 "now %s",
			 sv->name, (long long)r->job,
			 r->spread == SPREAD_NODES ? "only off their nodes" : "anywhere");
		changed = true;
	}
	return changed;
}

static void cancel(struct server *s, int64_t id, int64_t now)
{
	struct sjob *j = state_job(&s->st, id);
	struct tk_error err;
	if (j && !job_state_final(j->job.state))
		state_cancel(&s->st, j, now, &err);
}

/* The update fails: the template before is the target again. */
static void roll_back(struct service *sv, const char *why, int64_t now)
{
	snprintf(sv->upd_reason, sizeof(sv->upd_reason), "%s", why);
	log_warn("service %s: the update to version %d fails (%s); rolling back to version %d",
		 sv->name, sv->gen, why, sv->from_gen);
	struct job_request failed = sv->job;
	sv->job = sv->prev_job;
	sv->prev_job = failed;
	struct job_probe p = sv->probe;
	sv->probe = sv->prev_probe;
	sv->prev_probe = p;
	int g = sv->gen;
	sv->gen = sv->from_gen;
	sv->from_gen = g;
	sv->upd = UPD_ROLLING_BACK;
	sv->crashes = 0;
	sv->next_ms = 0;
	(void)now;
}

/* Takes out of sv the jobs that ended; returns how many. */
static int reap(struct server *s, struct service *sv, int64_t now)
{
	int gone = 0;
	for (int i = 0; i < sv->nrep;) {
		struct replica *rp = &sv->rep[i];
		struct sjob *j = state_job(&s->st, rp->job);
		if (j && !job_state_final(j->job.state)) {
			i++;
			continue;
		}
		if (j)
			snprintf(sv->last_end, sizeof(sv->last_end), "job %lld %s: %.200s",
				 (long long)j->job.id, job_state_name(j->job.state), j->job.reason);
		else
			snprintf(sv->last_end, sizeof(sv->last_end), "job %lld ended",
				 (long long)rp->job);
		/* one taken away, or of a service deleted, ended as asked */
		if (!sv->deleting && !rp->drain_ms) {
			sv->replaced++;
			bool crashed = now - rp->made_ms < SERVICE_CRASH_MS;
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
			if (sv->upd == UPD_ROLLING && rp->gen == sv->gen) {
				char why[MODEL_REASON_MAX];
				snprintf(why, sizeof(why),
					 "replica job %lld of version %d %s: %.180s",
					 (long long)rp->job, sv->gen,
					 ever_ready(j) ? "ended"
						       : "ended before it passed its probe",
					 j ? j->job.reason : "");
				roll_back(sv, why, now);
			}
		}
		memmove(rp, rp + 1, sizeof(*rp) * (size_t)(sv->nrep - i - 1));
		sv->nrep--;
		gone++;
	}
	return gone;
}

/* Drains replica r: out of rotation now, cancelled SERVICE_DRAIN_MS on. */
static void drain(struct server *s, struct service *sv, struct replica *r, int64_t now)
{
	if (r->drain_ms)
		return;
	r->drain_ms = now;
	s->st.services_dirty = true;
	log_info("service %s: replica job %lld drains", sv->name, (long long)r->job);
}

/* Of sv's replicas not drained, those of generation gen (old: of any
 * other): how many are live, how many in rotation. */
static void count(struct server *s, const struct service *sv, bool old, int *live, int *ready)
{
	*live = *ready = 0;
	for (int i = 0; i < sv->nrep; i++) {
		if (sv->rep[i].drain_ms || (sv->rep[i].gen != sv->gen) != old)
			continue;
		(*live)++;
		*ready += in_rotation(s, &sv->rep[i]) != NULL;
	}
}

/* The replica to take away first among those not drained (old: of
 * another generation than the target): one not in rotation, else the
 * newest (old: the oldest). NULL: none. */
static struct replica *victim(struct server *s, struct service *sv, bool old)
{
	struct replica *pick = NULL;
	for (int k = 0; k < sv->nrep; k++) {
		int i = old ? k : sv->nrep - 1 - k;
		struct replica *r = &sv->rep[i];
		if (r->drain_ms || (r->gen != sv->gen) != old)
			continue;
		if (!in_rotation(s, r))
			return r;
		if (!pick)
			pick = r;
	}
	return pick;
}

/* One step of a rolling update: new replicas made up to the surge, old
 * ones drained while enough stay in rotation; the update ends when every
 * old one has ended. Returns whether anything changed. */
static bool roll(struct server *s, struct service *sv, int64_t now, int *budget)
{
	bool changed = false;
	int cur, cur_ready, old, old_ready;
	count(s, sv, false, &cur, &cur_ready);
	count(s, sv, true, &old, &old_ready);
	bool left = false; /* an old one drained, not yet ended */
	for (int i = 0; i < sv->nrep; i++)
		left |= sv->rep[i].gen != sv->gen;
	if (!left) {
		bool back = sv->upd == UPD_ROLLING_BACK;
		sv->upd = back ? UPD_ROLLED_BACK : UPD_DONE;
		sv->upd_ended_ms = now;
		if (!back) {
			job_request_release(&sv->prev_job);
			sv->has_prev = false;
		}
		log_info("service %s: %s version %d", sv->name,
			 back ? "rolled back to" : "updated to", sv->gen);
		return true;
	}
	while (cur < sv->replicas && cur + old < sv->replicas + sv->max_surge &&
	       now >= sv->next_ms && *budget > 0 && !placing(s, sv, now) &&
	       make_replica(s, sv, now)) {
		(*budget)--;
		cur++;
		changed = true;
	}
	/* an old one goes while those in rotation stay at least the count
	 * less max_unavailable (one out of rotation goes at once) */
	int floor = MAX(sv->replicas - sv->max_unavailable, 0);
	struct replica *v;
	while (old > 0 && (v = victim(s, sv, true))) {
		bool ready = in_rotation(s, v) != NULL;
		if (ready && cur_ready + old_ready - 1 < floor)
			break;
		drain(s, sv, v, now);
		old--;
		old_ready -= ready;
		changed = true;
	}
	return changed;
}

/* The replicas sv's load asks for: its busy and held connections (the
 * fresh reports' sum) over the target, between min and max; at least one
 * while a connection waits. Up at once, down once fewer would have done
 * for down_after_ms. Returns whether the count changed. */
static bool autoscale(struct service *sv, int64_t mono)
{
	int busy = 0, held = 0;
	for (int i = 0; i < sv->nloads; i++)
		if (mono - sv->loads[i].at_ms < SERVICE_LOAD_FRESH_MS) {
			busy += sv->loads[i].busy;
			held += sv->loads[i].held;
		}
	int want = (busy + held + sv->target - 1) / sv->target;
	if (held && want < 1)
		want = 1;
	want = MAX(sv->min, MIN(sv->max, want));
	if (want > sv->replicas) {
		log_info("service %s: %d busy and %d waiting connections: %d replicas (were %d)",
			 sv->name, busy, held, want, sv->replicas);
		sv->replicas = want;
		sv->below_since_ms = 0;
		return true;
	}
	if (want == sv->replicas) {
		sv->below_since_ms = 0;
		return false;
	}
	if (!sv->below_since_ms)
		sv->below_since_ms = mono;
	if (mono - sv->below_since_ms < sv->down_after_ms)
		return false;
	log_info("service %s: %d busy connections for %lld s: %d replicas (were %d)", sv->name,
		 busy, (long long)(sv->down_after_ms / 1000), want, sv->replicas);
	sv->replicas = want;
	sv->below_since_ms = 0;
	return true;
}

void services_heard(struct server *s, const char *node, const struct wire_serve_load *v, int n)
{
	int64_t mono = tk_mono_ms();
	bool wake = false;
	for (int i = 0; i < n; i++) {
		struct service *sv = find(s, v[i].name);
		if (!sv)
			continue;
		struct node_load *l = NULL;
		for (int k = 0; k < sv->nloads && !l; k++)
			if (strcmp(sv->loads[k].node, node) == 0)
				l = &sv->loads[k];
		if (!l) {
			if (sv->nloads >= SERVICE_MAX_LOADS)
				continue;
			sv->loads =
				xrealloc(sv->loads, sizeof(*sv->loads) * (size_t)(sv->nloads + 1));
			l = &sv->loads[sv->nloads++];
			snprintf(l->node, sizeof(l->node), "%s", node);
		}
		l->busy = v[i].busy;
		l->held = v[i].held;
		l->at_ms = mono;
		wake |= sv->autoscale && v[i].held && sv->replicas == 0;
	}
	/* a connection waits on a service at zero: a replica now, not at the
	 * next tick */
	if (wake)
		services_tick(s, server_now_ms(s));
}

void services_tick(struct server *s, int64_t now)
{
	int budget = SERVICE_MAKE_PER_TICK;
	int64_t mono = tk_mono_ms();
	for (size_t i = 0; i < s->services.n; i++) {
		struct service *sv = s->services.v[i];
		bool changed = reap(s, sv, now) > 0;
		changed |= spread_less(s, sv, now);
		if (sv->autoscale && !sv->deleting)
			changed |= autoscale(sv, mono);
		if (sv->deleting) {
			if (sv->nrep == 0) {
				log_info("service %s: deleted, its replicas ended", sv->name);
				service_free(sv);
				memmove(&s->services.v[i], &s->services.v[i + 1],
					sizeof(*s->services.v) * (s->services.n - i - 1));
				s->services.n--;
				i--;
				save(s);
				continue;
			}
			for (int k = 0; k < sv->nrep; k++)
				if (!sv->rep[k].drain_ms) {
					drain(s, sv, &sv->rep[k], now);
					changed = true;
				}
		} else if (sv->upd == UPD_ROLLING || sv->upd == UPD_ROLLING_BACK) {
			changed |= roll(s, sv, now, &budget);
		} else {
			int live, ready, old, old_ready;
			count(s, sv, false, &live, &ready);
			count(s, sv, true, &old, &old_ready); /* (an update's leftovers) */
			live += old;
			/* too many (scaled down): an old version's first, then one
			 * not in rotation, then the newest */
			struct replica *v;
			while (live > sv->replicas &&
			       ((v = victim(s, sv, true)) || (v = victim(s, sv, false)))) {
				drain(s, sv, v, now);
				live--;
				changed = true;
			}
			while (live < sv->replicas && now >= sv->next_ms && budget > 0 &&
			       !placing(s, sv, now) && make_replica(s, sv, now)) {
				budget--;
				live++;
				changed = true;
			}
		}
		/* the drained go once out of every node's rotation */
		for (int k = 0; k < sv->nrep; k++)
			if (sv->rep[k].drain_ms && now - sv->rep[k].drain_ms >= SERVICE_DRAIN_MS)
				cancel(s, sv->rep[k].job, now);
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

static const char *node_addr(struct server *s, const char *node)
{
	const struct snode *n = state_node(&s->st, node);
	return n && n->rec.inv.addr[0] ? n->rec.inv.addr : "127.0.0.1";
}

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
		w->ends = xcalloc((size_t)sv->nrep + 1, sizeof(*w->ends));
		for (int k = 0; k < sv->nrep && w->nends < WIRE_MAX_ENDPOINTS; k++) {
			const struct attempt *a = in_rotation(s, &sv->rep[k]);
			if (!a)
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

static json_t *endpoint_pack(struct server *s, const struct sjob *j, const struct attempt *a)
{
	const char *addr = node_addr(s, a->nodes[0].name);
	return json_pack("{s:I, s:i, s:s, s:s, s:i}", "job", (json_int_t)j->job.id, "attempt",
			 a->number, "node", a->nodes[0].name, "addr", addr, "port", a->master_port);
}

/* The replicas in rotation as endpoints, into arr; returns how many. */
static int endpoints(struct server *s, const struct service *sv, json_t *arr)
{
	int n = 0;
	for (int i = 0; i < sv->nrep; i++) {
		const struct attempt *a = in_rotation(s, &sv->rep[i]);
		if (!a)
			continue;
		json_array_append_new(arr, endpoint_pack(s, state_job(&s->st, sv->rep[i].job), a));
		n++;
	}
	return n;
}

static json_t *service_pack(struct server *s, const struct service *sv, bool whole)
{
	json_t *ready = json_array();
	int nready = endpoints(s, sv, ready);
	json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:s, s:b, s:o}",
			      "name", sv->name, "owner", sv->owner, "replicas", sv->replicas,
			      "live", sv->nrep, "ready", nready, "made", sv->made, "replaced",
			      sv->replaced, "version", sv->gen, "created_ms",
			      (json_int_t)sv->created_ms, "last_end", sv->last_end, "deleting",
			      sv->deleting, "probe", job_probe_pack(&sv->probe));
	if (sv->port)
		json_object_set_new(o, "port", json_integer(sv->port));
	if (sv->autoscale)
		json_object_set_new(o, "autoscale", autoscale_pack(sv));
	if (sv->nloads) {
		int busy = 0, held = 0;
		int64_t mono = tk_mono_ms();
		for (int i = 0; i < sv->nloads; i++)
			if (mono - sv->loads[i].at_ms < SERVICE_LOAD_FRESH_MS) {
				busy += sv->loads[i].busy;
				held += sv->loads[i].held;
			}
		json_object_set_new(o, "load", json_pack("{s:i, s:i}", "busy", busy, "held", held));
	}
	if (sv->crashes) {
		json_object_set_new(o, "crashes", json_integer(sv->crashes));
		json_object_set_new(o, "next_ms", json_integer(sv->next_ms));
	}
	if (sv->upd != UPD_NONE)
		json_object_set_new(o, "update",
				    json_pack("{s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:s}", "state",
					      update_names[sv->upd], "version", sv->gen,
					      "from_version", sv->from_gen, "max_surge",
					      sv->max_surge, "max_unavailable", sv->max_unavailable,
					      "started_ms", (json_int_t)sv->upd_started_ms,
					      "ended_ms", (json_int_t)sv->upd_ended_ms, "reason",
					      sv->upd_reason));
	if (!whole) {
		json_decref(ready);
		return o;
	}
	json_t *reps = json_array();
	for (int i = 0; i < sv->nrep; i++) {
		const struct sjob *j = state_job(&s->st, sv->rep[i].job);
		if (!j)
			continue;
		const struct attempt *a = running(j);
		json_t *r = a ? endpoint_pack(s, j, a)
			      : json_pack("{s:I}", "job", (json_int_t)j->job.id);
		json_object_set_new(r, "state", json_string(job_state_name(j->job.state)));
		json_object_set_new(r, "version", json_integer(sv->rep[i].gen));
		json_object_set_new(r, "ready", json_boolean(in_rotation(s, &sv->rep[i]) != NULL));
		if (sv->rep[i].drain_ms)
			json_object_set_new(r, "draining", json_true());
		if (j->job.reason[0])
			json_object_set_new(r, "reason", json_string(j->job.reason));
		json_array_append_new(reps, r);
	}
	json_object_set_new(o, "replica_jobs", reps);
	json_object_set_new(o, "endpoints", ready);
	json_object_set_new(o, "job", job_request_pack(&sv->job));
	return o;
}

/* A replica's request from jj (a service's "job"): one task on one node,
 * no time limit, none of what the service sets; checked as a submission
 * is. Returns 0, or < 0 with the refusal answered. */
static int template_of(struct request *r, json_t *jj, struct job_request *ret,
		       char run_as[MODEL_NAME_MAX])
{
	struct tk_error err;
	if (!json_is_object(jj)) {
		reply_error(r, 400, "job: must be the replica's request, as POST /v1/jobs takes");
		return -EINVAL;
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
			return -EINVAL;
		}
	struct job_request req;
	if (job_request_unpack(jj, &req, &err) < 0) {
		reply_error(r, 400, "job.%s", err.text);
		return -EINVAL;
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
		return -EINVAL;
	}
	if (!req.cls && sched_config_class(&r->s->st.sched, SERVICE_DEFAULT_CLASS) >= 0)
		req.cls = xstrdup(SERVICE_DEFAULT_CLASS);
	if (api_request_checks(r, &req, run_as) < 0) {
		job_request_release(&req);
		return -EINVAL;
	}
	*ret = req;
	return 0;
}

/* The probe of body: its keys over def's (NULL: the defaults). Returns 0,
 * or < 0 with the refusal answered. */
static int probe_of(struct request *r, json_t *body, const struct job_probe *def,
		    struct job_probe *ret)
{
	struct tk_error err;
	json_t *pj = json_object_get(body, "probe");
	if (pj && !json_is_object(pj)) {
		reply_error(r, 400, "probe: must be an object");
		return -EINVAL;
	}
	json_t *merged = def ? job_probe_pack(def) : json_object();
	if (pj)
		json_object_update(merged, pj);
	/* a timeout under the new interval when only the interval is given */
	if (def && pj && json_object_get(pj, "interval_s") && !json_object_get(pj, "timeout_s"))
		json_object_del(merged, "timeout_s");
	int rc = job_probe_unpack(merged, ret, &err);
	json_decref(merged);
	if (rc < 0)
		reply_error(r, 400, "%s", err.text);
	return rc;
}

/* {"name", "replicas", "port", "probe", "job": a job's request}. */
void services_h_create(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	static const char *const keys[] = {"name", "replicas",	"port", "probe",
					   "job",  "autoscale", NULL};
	struct tk_error err;
	char name[MODEL_NAME_MAX];
	int64_t replicas, port;
	struct job_probe probe;
	struct service as = {0};
	json_t *aj = json_object_get(body, "autoscale");
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    (aj && autoscale_unpack(aj, &as, &err) < 0) ||
	    mj_strbuf(body, "name", true, true, name, sizeof(name), &err) < 0 ||
	    mj_int(body, "replicas", false, 0, SERVICE_MAX_REPLICAS, 1, &replicas, &err) < 0 ||
	    mj_int(body, "port", false, 1, 65535, 0, &port, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	if (probe_of(r, body, NULL, &probe) < 0)
		return;
	if (!model_name_valid(name)) {
		reply_error(r, 400,
			    "name: \"%s\" is not a valid name (letters, digits, '.', '_', '-')",
			    name);
		return;
	}
	struct job_request req;
	char run_as[MODEL_NAME_MAX];
	if (template_of(r, json_object_get(body, "job"), &req, run_as) < 0)
		return;
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
	if (as.autoscale) {
		sv->autoscale = true;
		sv->min = as.min;
		sv->max = as.max;
		sv->target = as.target;
		sv->down_after_ms = as.down_after_ms;
		/* (the count given, or min, within the two) */
		sv->replicas = json_object_get(body, "replicas")
				       ? MAX(as.min, MIN(as.max, (int)replicas))
				       : as.min;
	}
	sv->port = (int)port;
	sv->probe = probe;
	sv->job = req;
	sv->gen = 1;
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
	static const char *const keys[] = {"replicas", "autoscale", NULL};
	struct tk_error err;
	int64_t replicas;
	struct service as = {0};
	json_t *aj = json_object_get(body, "autoscale");
	if (!sv || !may_change(r, sv, "scale"))
		return;
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    mj_int(body, "replicas", !aj, 0, SERVICE_MAX_REPLICAS, -1, &replicas, &err) < 0 ||
	    (aj && autoscale_unpack(aj, &as, &err) < 0)) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	if (aj && replicas >= 0) {
		reply_error(r, 400,
			    "replicas and autoscale: a fixed count, or a range scaled with load; "
			    "not both");
		return;
	}
	if (sv->deleting) {
		reply_error(r, 409, "service %s is being deleted", sv->name);
		return;
	}
	/* a fixed count ends scaling with load; a range starts it */
	sv->autoscale = as.autoscale;
	sv->min = as.min;
	sv->max = as.max;
	sv->target = as.target;
	sv->down_after_ms = as.down_after_ms;
	sv->below_since_ms = 0;
	if (as.autoscale)
		replicas = MAX(as.min, MIN(as.max, sv->replicas));
	sv->replicas = (int)replicas;
	sv->next_ms = 0;
	sv->crashes = 0;
	services_tick(r->s, server_now_ms(r->s));
	save(r->s);
	reply_json(r, 200, service_pack(r->s, sv, true));
}

/* {"job": {KEY: VALUE, ...} over the template (null: back to the
 * default), "probe"?: {KEY: VALUE, ...} over the probe, "max_surge"?,
 * "max_unavailable"?}: a rolling update to the result. */
void services_h_update(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct service *sv = named(r, param);
	static const char *const keys[] = {"job", "probe", "max_surge", "max_unavailable", NULL};
	struct tk_error err;
	int64_t surge, unavail;
	if (!sv || !may_change(r, sv, "update"))
		return;
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    mj_int(body, "max_surge", false, 0, SERVICE_MAX_REPLICAS, 1, &surge, &err) < 0 ||
	    mj_int(body, "max_unavailable", false, 0, SERVICE_MAX_REPLICAS, 0, &unavail, &err) <
		    0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	if (surge == 0 && unavail == 0) {
		reply_error(r, 400,
			    "max_surge and max_unavailable: one must be above 0, or no replica "
			    "could ever be replaced");
		return;
	}
	json_t *patch = json_object_get(body, "job");
	if (patch && !json_is_object(patch)) {
		reply_error(r, 400, "job: must be an object of the request's keys to change");
		return;
	}
	if (sv->deleting || sv->upd == UPD_ROLLING || sv->upd == UPD_ROLLING_BACK) {
		reply_error(r, 409, "service %s %s", sv->name,
			    sv->deleting ? "is being deleted"
					 : "is being updated (tenk serve show says how far)");
		return;
	}
	struct job_probe probe;
	if (probe_of(r, body, &sv->probe, &probe) < 0)
		return;
	/* the template as it is, with what the body changes */
	json_t *next = job_request_pack(&sv->job);
	if (patch) {
		json_t *v;
		const char *k;
		json_object_foreach (patch, k, v) {
			if (json_is_null(v))
				json_object_del(next, k);
			else
				json_object_set(next, k, v);
		}
	}
	json_t *was = job_request_pack(&sv->job);
	bool same = json_equal(next, was) && !memcmp(&probe, &sv->probe, sizeof(probe));
	json_decref(was);
	if (same) {
		json_decref(next);
		reply_error(r, 409, "service %s: the update changes nothing", sv->name);
		return;
	}
	struct job_request req;
	char run_as[MODEL_NAME_MAX];
	int rc = template_of(r, next, &req, run_as);
	json_decref(next);
	if (rc < 0)
		return;
	if (sv->has_prev)
		job_request_release(&sv->prev_job);
	sv->prev_job = sv->job;
	sv->prev_probe = sv->probe;
	sv->has_prev = true;
	sv->job = req;
	sv->probe = probe;
	snprintf(sv->run_as, sizeof(sv->run_as), "%s", run_as);
	sv->from_gen = sv->gen;
	sv->gen++;
	sv->upd = UPD_ROLLING;
	sv->max_surge = (int)surge;
	sv->max_unavailable = (int)unavail;
	sv->upd_started_ms = server_now_ms(s);
	sv->upd_ended_ms = 0;
	sv->upd_reason[0] = '\0';
	sv->crashes = 0;
	sv->next_ms = 0;
	log_info("service %s: updating to version %d (surge %d, unavailable %d)", sv->name, sv->gen,
		 sv->max_surge, sv->max_unavailable);
	services_tick(s, sv->upd_started_ms);
	save(s);
	reply_json(r, 200, service_pack(s, sv, true));
}

void services_h_delete(struct request *r, const char *param, json_t *body)
{
	struct service *sv = named(r, param);
	if (!sv || !may_change(r, sv, "delete"))
		return;
	sv->deleting = true;
	json_t *o = json_pack("{s:s, s:i}", "deleted", sv->name, "replicas", sv->nrep);
	services_tick(r->s, server_now_ms(r->s));
	save(r->s);
	reply_json(r, 200, o);
}
