/*
 * The HTTP/JSON API under /v1: one table of routes and a handler for each.
 * Handlers check everything that came from outside (path parameters, query
 * arguments, the body) before touching state, so a bad request changes
 * nothing; they answer through reply_* in http.c, which holds the answer
 * until what it reports is durable.
 */
#include "internal.h"

#include <arpa/inet.h>
#include <math.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define LIST_DEFAULT_LIMIT 1000
/* lists built in one loop iteration, at most about this long: the calls
 * of agents waiting behind them are served in between */
#define API_LIST_BUDGET_US 5000
/* jobs out of memory one answer of a search by name reads back, at most */
#define LIST_NAME_READS 2000
#define WAIT_MAX_S 300
#define VALID_MAX_CHECKS 64 /* checks in one node's validation report */

/* Everyone who may list jobs sees every job's summary (id, name, owner,
 * queue, class, shape, state, reason), as squeue shows a shared cluster's
 * queue to all: users look at it to see why they wait. What a job runs and
 * writes (command, folder, environment, output, checkpoints, logs) is its
 * owner's, and that of viewers, operators and admins. */
static bool sees_all(const struct request *r)
{
	return r->role == ROLE_VIEWER || r->role == ROLE_OPERATOR || r->role == ROLE_ADMIN;
}

static bool sees_inside(const struct request *r, const char *owner)
{
	return sees_all(r) || strcmp(owner, r->user) == 0;
}

int api_job_inside(struct request *r, const struct sjob *j, const char *what)
{
	if (sees_inside(r, j->job.owner))
		return 0;
	reply_error(r, 403,
		    "job %lld is %s's: its %s are for its owner, a viewer, an operator "
		    "or an admin",
		    (long long)j->job.id, j->job.owner, what);
	return -EACCES;
}

/* Changing a job (cancel, hold, release, requeue, update) is its owner's,
 * an operator's or an admin's. */
static int may_change(struct request *r, const struct sjob *j, const char *verb)
{
	if (strcmp(j->job.owner, r->user) == 0 || r->role == ROLE_OPERATOR || r->role == ROLE_ADMIN)
		return 0;
	reply_error(r, 403, "job %lld is %s's: only its owner, an operator or an admin may %s it",
		    (long long)j->job.id, j->job.owner, verb);
	return -EACCES;
}

/* Takes out of a packed job what only sees_inside() may read. */
static void hide_inside(json_t *o)
{
	static const char *const inside[] = {"command", "cwd",	  "env",     "output",
					     "error",	"mounts", "comment", "slurm_env"};
	json_t *req = json_object_get(o, "request");
	for (size_t i = 0; i < ARRAY_SIZE(inside); i++)
		json_object_del(req, inside[i]);
	json_object_del(o, "checkpoints");
	json_object_del(o, "output_path");
	json_object_set_new(o, "private", json_true());
}

/* A job named on the path: "12", or "12_7" for the element of array 12
 * with index 7. *whole (when not NULL): the name is an array's, not one
 * element's ("12" where 12 is an array's first element). */
int api_job_ref(struct request *r, const char *param, struct sjob **ret, bool *whole)
{
	int64_t id, index = -1;
	char idbuf[32];
	const char *us = strchr(param, '_');
	size_t idlen = us ? (size_t)(us - param) : strlen(param);
	if (idlen == 0 || idlen >= sizeof(idbuf)) {
		reply_error(r, 400, "job id must be a positive integer or ID_INDEX, got \"%.64s\"",
			    param);
		return -EINVAL;
	}
	memcpy(idbuf, param, idlen);
	idbuf[idlen] = '\0';
	if (tk_parse_int64(idbuf, 1, INT64_MAX, &id) < 0 ||
	    (us && tk_parse_int64(us + 1, 0, MODEL_MAX_ARRAY_INDEX, &index) < 0)) {
		reply_error(r, 400, "job id must be a positive integer or ID_INDEX, got \"%.64s\"",
			    param);
		return -EINVAL;
	}
	struct sjob *j = state_job_get(&r->s->st, id);
	if (!j && state_gone(&r->s->st, id)) {
		reply_error(r, 500, "job %lld cannot be read back from the store: %s",
			    (long long)id, r->s->st.read_err.text);
		return -EIO;
	}
	if (j && us) {
		if (j->job.array_job != j->job.id) {
			reply_error(r, 404, "job %lld is not an array", (long long)id);
			return -ENOENT;
		}
		j = state_array_element(&r->s->st, j, (int)index);
		if (!j) {
			reply_error(r, 404, "array %lld has no index %lld", (long long)id,
				    (long long)index);
			return -ENOENT;
		}
	}
	if (!j) {
		reply_error(r, 404, "no job %lld", (long long)id);
		return -ENOENT;
	}
	if (whole)
		*whole = !us && state_job_is_array_head(j);
	*ret = j;
	return 0;
}

static int parse_job_id(struct request *r, const char *param, struct sjob **ret)
{
	return api_job_ref(r, param, ret, NULL);
}

static struct snode *find_node(struct request *r, const char *name)
{
	struct snode *n = state_node(&r->s->st, name);
	if (!n)
		reply_error(r, 404, "no node \"%.64s\"", name);
	return n;
}

/* ---- general ------------------------------------------------------------------ */

static void h_health(struct request *r, const char *param, json_t *body)
{
	const struct server *s = r->s;
	const struct state *st = &s->st;
	/* what the scheduler costs: its passes, the last one's time (building
	 * the snapshot, deciding and applying), what waits and in how many
	 * distinct requests */
	json_t *sched = json_pack(
		"{s:I, s:f, s:{s:f, s:f, s:f}, s:I, s:i, s:I, s:I}", "passes",
		(json_int_t)st->stats.passes, "last_pass_ms", s->last_pass_us / 1000.0,
		"last_pass_parts_ms", "snapshot", st->stats.snapshot_us / 1000.0, "decide",
		st->stats.decide_us / 1000.0, "apply", st->stats.apply_us / 1000.0, "pending",
		(json_int_t)st->npending, "shapes",
		st->sched_shapes ? sched_shapes_live(st->sched_shapes) : 0, "deferred_submissions",
		(json_int_t)st->arrivals.deferred, "limited_passes", (json_int_t)st->stats.limited);
	json_t *store = s->store_down
				? json_pack("{s:b, s:s}", "writable", 0, "error", s->store_down_why)
				: json_pack("{s:b}", "writable", 1);
	if (s->role.leased)
		json_object_set_new(store, "term", json_integer(s->role.term));
	reply_json(r, 200,
		   json_pack("{s:b, s:s, s:s, s:o, s:o}", "ok", 1, "role", "active", "epoch",
			     s->epoch, "scheduler", sched, "store", store));
}

static void h_catalogue(struct request *r, const char *param, json_t *body)
{
	reply_json(r, 200, json_pack("{s:o}", "models", catalogue_pack(&r->s->cat)));
}

/* ---- jobs --------------------------------------------------------------------- */

/* The cluster's rules for images ("default_image", "require_image",
 * "allowed_images"), and
 * its "default_mounts" put ahead of the job's own, "." as its folder.
 * Answers a refusal itself and returns < 0. */
static int image_policy(struct request *r, struct job_request *req)
{
	const struct sched_config *c = &r->s->st.sched;
	if (!req->image && c->default_image[0])
		req->image = xstrdup(c->default_image); /* the cluster's, pinned as the job's own */
	if (!req->image) {
		if (c->require_image) {
			reply_error(r, 400, "this cluster runs jobs in images: add --image");
			return -EINVAL;
		}
		return 0;
	}
	bool ok = c->nallowed_images == 0;
	for (int i = 0; i < c->nallowed_images && !ok; i++)
		ok = model_image_allowed(c->allowed_images[i], req->image);
	if (!ok) {
		struct strbuf list;
		strbuf_init(&list);
		for (int i = 0; i < c->nallowed_images; i++)
			strbuf_addf(&list, "%s%s", i ? ", " : "", c->allowed_images[i]);
		reply_error(r, 403, "image %s is not allowed on this cluster; allowed: %s",
			    req->image, list.buf);
		strbuf_release(&list);
		return -EPERM;
	}
	int n = c->ndefault_mounts + req->nmounts;
	if (n > MODEL_MAX_MOUNTS) {
		reply_error(r, 400, "mounts: at most %d with the cluster's %d default ones",
			    MODEL_MAX_MOUNTS - c->ndefault_mounts, c->ndefault_mounts);
		return -E2BIG;
	}
	if (!c->ndefault_mounts)
		return 0;
	char **all = xcalloc((size_t)n, sizeof(char *));
	for (int i = 0; i < c->ndefault_mounts; i++) {
		struct mount_spec m;
		struct tk_error err;
		model_mount_parse(c->default_mounts[i], true, &m, &err); /* checked at load */
		const char *src = strcmp(m.src, ".") == 0 ? req->cwd : m.src;
		const char *dst = strcmp(m.dst, ".") == 0 ? req->cwd : m.dst;
		all[i] = xasprintf("%s:%s%s", src, dst, m.ro ? ":ro" : "");
		if (model_mount_parse(all[i], false, &m, &err) < 0) {
			reply_error(r, 400, "default_mounts[%d]: %s", i, err.text);
			for (int k = 0; k <= i; k++)
				free(all[k]);
			free(all);
			return -EINVAL;
		}
	}
	for (int i = 0; i < req->nmounts; i++)
		all[c->ndefault_mounts + i] = req->mounts[i];
	free(req->mounts);
	req->mounts = all;
	req->nmounts = n;
	return 0;
}

/* The Unix account a job that r submits runs as: a user's own account; the
 * built-in admin's, the configuration's "admin_unix_user" (or root where
 * root is allowed). No job runs as root unless "allow_root_jobs". Answers
 * the refusal itself and returns < 0. */
static int run_as_of(struct request *r, char out[MODEL_NAME_MAX])
{
	const struct state *st = &r->s->st;
	const struct suser *u = tk_map_get(&st->user_by_name, r->user);
	if (u)
		snprintf(out, MODEL_NAME_MAX, "%s", u->rec.unix_user);
	else if (st->sched.admin_unix_user[0])
		snprintf(out, MODEL_NAME_MAX, "%s", st->sched.admin_unix_user);
	else if (st->sched.allow_root_jobs)
		snprintf(out, MODEL_NAME_MAX, "root");
	else {
		reply_error(r, 400,
			    "the admin token's jobs run as \"admin_unix_user\" of the server's "
			    "config.json, which is not set (and \"allow_root_jobs\" is not true): "
			    "set one, or submit with a user's token (tenk users add NAME)");
		return -EINVAL;
	}
	if (strcmp(out, "root") == 0 && !st->sched.allow_root_jobs) {
		reply_error(r, 403,
			    "user %s runs as root, and this cluster runs no job as root "
			    "(\"allow_root_jobs\" is not true)",
			    r->user);
		return -EPERM;
	}
	return 0;
}

#define API_MAX_GROUPS 1024 /* Unix groups of one account looked at */

/* Is Unix group `group` one of the account's (as this host's NSS says)? */
static bool in_unix_group(const char *account, const char *group)
{
	struct passwd *pw = getpwnam(account);
	struct group *gr = pw ? getgrnam(group) : NULL;
	if (!gr)
		return false;
	gid_t gid = gr->gr_gid, groups[API_MAX_GROUPS];
	int n = API_MAX_GROUPS;
	if (getgrouplist(account, pw->pw_gid, groups, &n) < 0)
		n = API_MAX_GROUPS;
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/* Does an allow list (model.h) let r's user in? Admins always. */
static bool may_use(const struct request *r, const char (*list)[MODEL_NAME_MAX], int n)
{
	if (n == 0 || r->role == ROLE_ADMIN)
		return true;
	const struct suser *u = tk_map_get(&r->s->st.user_by_name, r->user);
	for (int i = 0; i < n; i++) {
		const char *e = list[i];
		if (strncmp(e, "group:", 6) == 0) {
			if (u && in_unix_group(u->rec.unix_user, e + 6))
				return true;
		} else if (strncmp(e, "role:", 5) == 0) {
			for (int k = 0; u && k < u->rec.nroles; k++)
				if (strcmp(u->rec.roles[k], e + 5) == 0)
					return true;
		} else if (strcmp(e, r->user) == 0) {
			return true;
		}
	}
	return false;
}

/* A job as r may see it: the values of its environment (where API keys
 * travel) are its owner's alone; anyone else, admins too, sees the names,
 * each with null. */
json_t *api_job_for(const struct request *r, struct sjob *j)
{
	json_t *o = state_job_pack(&r->s->st, j);
	state_job_las_behind(&r->s->st, j, o);
	if (!sees_inside(r, j->job.owner)) {
		hide_inside(o);
		return o;
	}
	json_t *env = json_object_get(json_object_get(o, "request"), "env");
	if (env && json_object_size(env) && strcmp(j->job.owner, r->user) != 0) {
		const char *k;
		json_t *v;
		json_object_foreach (env, k, v)
			json_object_set_new(env, k, json_null());
		json_object_set_new(json_object_get(o, "request"), "env_hidden", json_true());
	}
	return o;
}

/* The names of the cluster's pools, for an error. */
static void pool_names(const struct sched_config *c, struct strbuf *sb)
{
	for (int i = 0; i < c->npools; i++)
		strbuf_addf(sb, "%s%s", i ? ", " : "", c->pools[i].name);
	if (!c->npools)
		strbuf_addstr(sb, "none (config.json's \"pools\")");
}

/* Whether the pools req names exist, r may use each, and one of them takes
 * req (its max_time, min_gpus): answers the refusal itself and returns < 0. */
static int pools_admissible(struct request *r, const struct job_request *req)
{
	const struct sched_config *c = &r->s->st.sched;
	for (const char *p = req->pool ? req->pool : "", *next; *p; p = next) {
		size_t len = model_list_item(p, &next);
		int i = sched_config_pool(c, p, len);
		if (i < 0) {
			struct strbuf names;
			strbuf_init(&names);
			pool_names(c, &names);
			reply_error(r, 400, "pool: no pool \"%.*s\"; pools: %s", (int)len, p,
				    names.buf);
			strbuf_release(&names);
			return -ENOENT;
		}
		if (!may_use(r, c->pools[i].allow, c->pools[i].nallow)) {
			reply_error(r, 403,
				    "pool %s: %s may not use it; an admin lets them in with its "
				    "\"allow\" in config.json",
				    c->pools[i].name, r->user);
			return -EPERM;
		}
	}
	char why[256];
	if (sched_config_pool_job(c, req, why, sizeof(why)) == MODEL_POOL_NOWHERE) {
		reply_error(r, 400, "%s", why);
		return -EINVAL;
	}
	return 0;
}

/* Whether the fault-domain levels req names (--spread, --within) are the
 * cluster's: answers the refusal itself and returns < 0. */
static int domains_admissible(struct request *r, const struct job_request *req)
{
	const struct sched_config *c = &r->s->st.sched;
	const char *words[] = {req->spread, req->within}, *keys[] = {"spread", "within"};
	for (int k = 0; k < 2; k++) {
		char level[MODEL_NAME_MAX];
		int cap;
		if (!words[k] ||
		    job_spread_parse(words[k], level, sizeof(level), k ? NULL : &cap, NULL) < 0 ||
		    sched_config_domain_level(c, level, strlen(level)) > 0)
			continue;
		struct strbuf names;
		strbuf_init(&names);
		for (int i = 0; i < c->ndomain_levels; i++)
			strbuf_addf(&names, "%s%s", i ? ", " : "", c->domain_levels[i]);
		reply_error(r, 400,
			    "%s: no fault-domain level \"%s\"; levels: %s (config.json's "
			    "\"domain_levels\", widest first)",
			    keys[k], level, names.buf);
		strbuf_release(&names);
		return -EINVAL;
	}
	return 0;
}

/* A request's pools as the cluster's defaults make them: "default_pool"
 * where it names none; without a time limit, the shortest "max_time" of
 * the pools it names where each has one. */
static void pool_defaults(const struct sched_config *c, struct job_request *req)
{
	if (!req->pool && c->default_pool >= 0)
		req->pool = xstrdup(c->pools[c->default_pool].name);
	int64_t limit = 0;
	bool each = req->pool != NULL;
	for (int i = 0; i < c->npools && req->pool && !req->time_limit_s; i++) {
		const struct pool_spec *p = &c->pools[i];
		if (!model_names_has(req->pool, p->name, strlen(p->name)))
			continue;
		each = each && p->max_time_s;
		if (p->max_time_s && (!limit || p->max_time_s < limit))
			limit = p->max_time_s;
	}
	if (!req->time_limit_s && each)
		req->time_limit_s = limit;
}

/* "partition" (Slurm's -p, #SBATCH -p) as "pool" where each of its names is
 * a pool, else as "queue" (what it meant before pools), in body. Answers a
 * refusal itself and returns < 0. */
static int take_partition(struct request *r, json_t *body)
{
	const struct sched_config *c = &r->s->st.sched;
	json_t *v = json_object_get(body, "partition");
	if (!v)
		return 0;
	const char *p = json_string_value(v);
	if (!p || !*p) {
		reply_error(r, 400, "partition: must be a pool's name (tenk pools) or a queue's");
		return -EINVAL;
	}
	bool pools = c->npools > 0;
	for (const char *q = p, *next; pools && *q; q = next) {
		size_t len = model_list_item(q, &next);
		pools = sched_config_pool(c, q, len) >= 0;
	}
	const char *key = pools ? "pool" : "queue";
	if (json_object_get(body, key)) {
		reply_error(r, 400, "partition and %s both given; give one", key);
		return -EINVAL;
	}
	json_object_set(body, key, v);
	json_object_del(body, "partition");
	return 0;
}

/* Whether r may have req run (known models, class and queue, who may use
 * them, their pools, the after list): answers the refusal itself and
 * returns < 0. */
static int request_admissible(struct request *r, const struct job_request *req)
{
	struct server *s = r->s;
	struct state *st = &s->st;
	for (int i = 0; i < req->ngpu_types; i++) {
		if (!catalogue_find(&s->cat, req->gpu_types[i])) {
			struct strbuf names;
			strbuf_init(&names);
			catalogue_names(&s->cat, &names);
			reply_error(r, 400, "gpu_types[%d]: unknown model \"%s\"; known: %s", i,
				    req->gpu_types[i], names.buf);
			strbuf_release(&names);
			return -EINVAL;
		}
	}
	if (req->cls && sched_config_class(&st->sched, req->cls) < 0) {
		struct strbuf names;
		strbuf_init(&names);
		for (int c = 0; c < st->sched.nclasses; c++)
			strbuf_addf(&names, "%s%s", c ? ", " : "", st->sched.classes[c].name);
		reply_error(r, 400, "class: no class \"%s\"; classes: %s", req->cls, names.buf);
		strbuf_release(&names);
		return -EINVAL;
	}
	const char *qname = req->queue ? req->queue : "default";
	struct squeue *q = state_queue(st, qname);
	if (!q) {
		reply_error(r, 400,
			    "queue: no queue \"%s\"; an admin creates it with `tenk queues "
			    "set %s --gpus N`",
			    qname, qname);
		return -EINVAL;
	}
	const struct class_spec *cs =
		&st->sched.classes[req->cls ? sched_config_class(&st->sched, req->cls)
					    : st->sched.default_class];
	if (!may_use(r, cs->allow, cs->nallow)) {
		reply_error(r, 403, "class %s: %s may not use it", cs->name, r->user);
		return -EPERM;
	}
	const struct queue_spec *qs = &q->spec;
	if (!may_use(r, qs->users, qs->nusers)) {
		reply_error(r, 403, "queue %s: %s may not use it", qname, r->user);
		return -EPERM;
	}
	if (pools_admissible(r, req) < 0 || domains_admissible(r, req) < 0)
		return -EPERM;
	for (int i = 0; i < req->nnodelist; i++)
		if (!state_node(st, req->nodelist[i])) {
			reply_error(r, 400, "nodelist[%d]: no node %s in this cluster", i,
				    req->nodelist[i]);
			return -ENOENT;
		}
	for (int i = 0; i < req->nafter; i++)
		if (!state_job_known(st, req->after[i].job)) {
			reply_error(r, 400, "after[%d]: no job %lld", i,
				    (long long)req->after[i].job);
			return -ENOENT;
		}
	return 0;
}

/* One user's submissions: a token bucket (submit_rate_per_user). */
struct submit_bucket {
	char user[MODEL_NAME_MAX]; /* the map's key */
	double tokens;
	int64_t at_us; /* monotonic: when tokens was right */
};

/* May r's user submit now? Takes a token, or answers 429 with the wait
 * (Retry-After) and returns < 0. Admins are not held to it. */
static int submit_rate(struct request *r)
{
	const struct sched_config *c = &r->s->st.sched;
	if (r->role == ROLE_ADMIN || c->submit_rate_per_user <= 0)
		return 0;
	struct tk_map *m = &r->s->submit_buckets;
	struct submit_bucket *b = tk_map_get(m, r->user);
	int64_t now = tk_mono_us();
	double burst = (double)c->submit_burst_per_user;
	if (!b) {
		b = xcalloc(1, sizeof(*b));
		snprintf(b->user, sizeof(b->user), "%s", r->user);
		b->tokens = burst;
		b->at_us = now;
		tk_map_put(m, b->user, b);
	}
	b->tokens =
		MIN(burst, b->tokens + (double)(now - b->at_us) / 1e6 * c->submit_rate_per_user);
	b->at_us = now;
	if (b->tokens >= 1) {
		b->tokens -= 1;
		return 0;
	}
	double wait_s = (1 - b->tokens) / c->submit_rate_per_user;
	char after[32];
	snprintf(after, sizeof(after), "%lld", (long long)ceil(wait_s));
	reply_error(r, 429,
		    "submit_rate_per_user: %s submits at most %g jobs a second (bursts of %lld); "
		    "try again in %.1f s, or submit an array",
		    r->user, c->submit_rate_per_user, (long long)c->submit_burst_per_user, wait_s);
	reply_header(r, "Retry-After", after);
	return -EAGAIN;
}

/* Can r's user have n more jobs of req waiting? Answers the refusal itself
 * and returns < 0. */
static int room_for(struct request *r, const struct job_request *req, int64_t n)
{
	struct state *st = &r->s->st;
	if ((int64_t)st->njobs + n > STATE_MAX_JOB_ID) {
		reply_error(r, 507, "this server holds at most %lld jobs, and has %lld",
			    (long long)STATE_MAX_JOB_ID, (long long)st->njobs);
		return -ENOSPC;
	}
	if (r->role == ROLE_ADMIN)
		return 0;
	/* one user's waiting jobs are bounded: in number, and in weight */
	const struct owner_pending *o = state_owner_pending(st, r->user);
	int64_t mib = (o->bytes + n * job_request_bytes(req) + (1 << 20) - 1) >> 20;
	bool count = o->jobs + n > st->sched.max_pending_per_user;
	if (count || mib > st->sched.max_pending_mib_per_user) {
		reply_error(r, 429,
			    "%s: %s has %lld pending job(s), %lld MiB of requests%s; the limit is "
			    "%lld%s",
			    count ? "max_pending_per_user" : "max_pending_mib_per_user", r->user,
			    (long long)o->jobs, (long long)(o->bytes >> 20),
			    n > 1 ? ", and asks for an array of more" : "",
			    (long long)(count ? st->sched.max_pending_per_user
					      : st->sched.max_pending_mib_per_user),
			    count ? " jobs" : " MiB");
		return -EAGAIN;
	}
	return 0;
}

/* A request that no set of the cluster's nodes, drained or down ones too,
 * could ever hold is refused, as sbatch does, rather than left to wait
 * forever (422). */
static int request_possible(struct request *r, const struct job_request *req)
{
	struct strbuf why;
	strbuf_init(&why);
	int ret = 0;
	if (!state_request_possible(&r->s->st, req, &why)) {
		reply_error(r, 422,
			    "this job can never start: %s (to keep it waiting for nodes yet to "
			    "come: \"accept_impossible\": true, tenk submit --hold-if-impossible)",
			    why.buf);
		ret = -1;
	}
	strbuf_release(&why);
	return ret;
}

/* A submission's flag beside its request: *ret, and the key taken out of
 * body; or the refusal answered and < 0. */
static int take_flag(struct request *r, json_t *body, const char *key, bool *ret)
{
	json_t *v = json_object_get(body, key);
	if (v && !json_is_boolean(v)) {
		reply_error(r, 400, "%s: must be true or false", key);
		return -EINVAL;
	}
	*ret = json_is_true(v);
	if (v)
		json_object_del(body, key);
	return 0;
}

int api_request_checks(struct request *r, struct job_request *req, char run_as[MODEL_NAME_MAX])
{
	pool_defaults(&r->s->st.sched, req);
	if (request_admissible(r, req) < 0 || image_policy(r, req) < 0 ||
	    run_as_of(r, run_as) < 0 || request_possible(r, req) < 0)
		return -EINVAL;
	return 0;
}

static void h_submit(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct state *st = &s->st;
	struct job_request req;
	struct tk_error err;
	/* beside the request proper: "hold", submitted held; and
	 * "accept_impossible", taken even if no node could ever hold it (a
	 * site that adds nodes later) */
	bool held, accept_impossible;
	if (take_flag(r, body, "hold", &held) < 0 ||
	    take_flag(r, body, "accept_impossible", &accept_impossible) < 0 ||
	    take_partition(r, body) < 0)
		return;
	if (job_request_unpack(body, &req, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	if (req.service) {
		reply_error(r, 400,
			    "service: is set by tenk for a service's replicas; make a service "
			    "with POST /v1/services (tenk serve create)");
		job_request_release(&req);
		return;
	}
	pool_defaults(&st->sched, &req);
	int *idx = NULL, nidx = 1, cap = 0;
	if (req.array && model_array_parse(req.array, &idx, &nidx, &cap, &err) < 0) {
		reply_error(r, 400, "%s", err.text); /* unpack checked it */
		job_request_release(&req);
		return;
	}
	char run_as[MODEL_NAME_MAX];
	if (request_admissible(r, &req) < 0 || room_for(r, &req, nidx) < 0 || submit_rate(r) < 0 ||
	    image_policy(r, &req) < 0 || run_as_of(r, run_as) < 0 ||
	    (!accept_impossible && request_possible(r, &req) < 0)) {
		free(idx);
		job_request_release(&req);
		return;
	}
	if (server_ids_reserve(s, nidx, &err) < 0) {
		log_err("%s", err.text);
		reply_error(r, 503, "%s; try again once it can be written", err.text);
		free(idx);
		job_request_release(&req);
		return;
	}
	int64_t now = server_now_ms(s);
	if (!req.array) {
		struct sjob *j = state_submit(st, &req, r->user, run_as, held, now);
		reply_json(r, 201, api_job_for(r, j));
		return;
	}
	/* an array: its elements are made in slices (arrays.c) */
	api_array_submit(r, &req, idx, nidx, cap, run_as, held);
}

/* The cluster's pools, each with its nodes: how many, up, their
 * accelerators and those idle (Slurm's sinfo -s). */
static void h_pools(struct request *r, const char *param, json_t *body)
{
	const struct state *st = &r->s->st;
	const struct sched_config *c = &st->sched;
	json_t *arr = json_array();
	int alone = 0;
	for (int i = 0; i < c->npools; i++) {
		json_t *o = sched_config_pool_pack(c, i);
		int64_t nodes = 0, up = 0, accels = 0, idle = 0;
		for (int k = 0; k < st->nnodes; k++) {
			const struct snode *n = st->nodes[k];
			if (!(n->pools & (1ULL << i)))
				continue;
			bool is_up = state_node_state(st, n) == NODE_UP;
			nodes++;
			up += is_up;
			accels += n->rec.inv.naccel;
			for (int d = 0; is_up && d < n->rec.inv.naccel; d++)
				idle += n->sdev[d].free_milli == MODEL_MILLI;
		}
		json_object_set_new(o, "nodes", json_integer(nodes));
		json_object_set_new(o, "nodes_up", json_integer(up));
		json_object_set_new(o, "accelerators", json_integer(accels));
		json_object_set_new(o, "accelerators_idle", json_integer(idle));
		json_array_append_new(arr, o);
	}
	for (int k = 0; k < st->nnodes; k++)
		alone += c->npools && st->nodes[k]->pools == MODEL_POOL_NONE;
	reply_json(r, 200, json_pack("{s:o, s:i}", "pools", arr, "nodes_in_no_pool", alone));
}

static void h_classes(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct state *st = &s->st;
	json_t *arr = json_array();
	for (int c = 0; c < st->sched.nclasses; c++) {
		json_t *o = class_spec_pack(&st->classes[c].spec);
		json_object_set_new(o, "default", json_boolean(c == st->sched.default_class));
		json_object_set_new(o, "pending", json_integer(st->classes[c].npending));
		json_array_append_new(arr, o);
	}
	reply_json(r, 200,
		   json_pack("{s:o, s:I}", "classes", arr, "fair_share_half_life_s",
			     (json_int_t)st->sched.half_life_s));
}

static void h_queues(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct state *st = &s->st;
	state_queues_age(st, server_now_ms(s));
	acct_budgets(s);
	json_t *arr = json_array();
	for (int i = 0; i < st->nqueues; i++)
		json_array_append_new(arr, state_queue_pack(st, st->queues[i]));
	/* budgets are in the catalogue's currency */
	reply_json(r, 200,
		   json_pack("{s:o, s:s}", "queues", arr, "currency", r->s->st.sched.currency));
}

static void h_queue_set(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct state *st = &s->st;
	if (!model_name_valid(param)) {
		reply_error(r, 400, "queue name \"%.64s\": use letters, digits, '.', '_', '-'",
			    param);
		return;
	}
	struct squeue *q = state_queue(st, param);
	struct queue_spec *next = xmalloc(sizeof(*next));
	if (q) {
		*next = q->spec;
	} else {
		memset(next, 0, sizeof(*next));
		snprintf(next->name, sizeof(next->name), "%s", param);
		next->quota_milli = next->borrow_milli = -1;
		next->weight = 1;
		next->usage_at_ms = server_now_ms(s);
	}
	struct tk_error err;
	if (queue_spec_update(next, body, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		free(next);
		return;
	}
	/* a model's limit names a model the catalogue knows */
	for (int k = 0; k < next->ndims; k++) {
		const char *name = next->dims[k].name;
		if (!queue_dim_milli(name) || strcmp(name, "units") == 0 ||
		    catalogue_find(&s->cat, name))
			continue;
		struct strbuf names;
		strbuf_init(&names);
		catalogue_names(&s->cat, &names);
		reply_error(r, 400,
			    "limits.%.64s: not \"units\", \"cpus\", \"mem_mib\" or a model of the "
			    "catalogue (%s)",
			    name, names.buf);
		strbuf_release(&names);
		free(next);
		return;
	}
	if (!q)
		q = state_queue_add(st, param, server_now_ms(s));
	q->spec = *next;
	free(next);
	state_queue_dirty(st, q);
	acct_budgets(s);
	state_want_pass(st);
	log_info("queue %s set by %s", q->spec.name, r->user);
	reply_json(r, 200, state_queue_pack(st, q));
}

/* Parses "PENDING,RUNNING" into a mask of states. */
static int parse_states(const char *text, unsigned *ret)
{
	_cleanup_free_ char *copy = xstrdup(text);
	char *save = NULL;
	unsigned mask = 0;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		enum job_state st;
		if (strcasecmp(t, "active") == 0) {
			mask |= 1u << JOB_PENDING | 1u << JOB_STARTING | 1u << JOB_RUNNING;
			continue;
		}
		if (job_state_parse(t, &st) < 0)
			return -EINVAL;
		mask |= 1u << st;
	}
	if (!mask)
		return -EINVAL;
	*ret = mask;
	return 0;
}

static void lists_idle_cb(uv_idle_t *h)
{
	struct server *s = h->data;
	if (!api_lists_work(s, API_LIST_BUDGET_US))
		uv_idle_stop(h);
}

static void h_jobs_list(struct request *r, const char *param, json_t *body)
{
	unsigned mask = ~0u;
	int64_t limit = LIST_DEFAULT_LIMIT;
	const char *state = request_arg(r, "state");
	const char *lim = request_arg(r, "limit");
	if (state && parse_states(state, &mask) < 0) {
		reply_error(r, 400,
			    "state: expected a comma-separated list of PENDING, STARTING, RUNNING, "
			    "COMPLETED, FAILED, CANCELLED, TIMEOUT or active; got \"%.64s\"",
			    state);
		return;
	}
	const char *after_s = request_arg(r, "after");
	int64_t after = 0;
	if (lim && tk_parse_int64(lim, 1, SERVER_MAX_LIST, &limit) < 0) {
		reply_error(r, 400, "limit: must be an integer from 1 to %d, got \"%.32s\"",
			    SERVER_MAX_LIST, lim);
		return;
	}
	if (after_s && tk_parse_int64(after_s, 0, INT64_MAX, &after) < 0) {
		reply_error(r, 400,
			    "after: must be a job id (the last answer's \"next\"), got "
			    "\"%.32s\"",
			    after_s);
		return;
	}
	const char *arr = request_arg(r, "array");
	int64_t array = 0;
	if (arr && tk_parse_int64(arr, 1, INT64_MAX, &array) < 0) {
		reply_error(r, 400, "array: must be an array's job id, got \"%.32s\"", arr);
		return;
	}
	const char *owner = request_arg(r, "user");
	if (owner && !model_name_valid(owner)) {
		reply_error(r, 400, "user: \"%.64s\" is not a user name", owner);
		return;
	}
	snprintf(r->list_owner, sizeof(r->list_owner), "%s", owner ? owner : "");
	const char *order = request_arg(r, "order"), *before_s = request_arg(r, "before");
	const char *name = request_arg(r, "name");
	if (order && strcmp(order, "newest") != 0 && strcmp(order, "oldest") != 0) {
		reply_error(r, 400, "order: newest or oldest (the default), got \"%.32s\"", order);
		return;
	}
	r->list_newest = order && strcmp(order, "newest") == 0;
	r->list_before = 0;
	if (before_s &&
	    (!r->list_newest || tk_parse_int64(before_s, 1, INT64_MAX, &r->list_before) < 0)) {
		reply_error(r, 400,
			    "before: with order=newest, a job id (the last answer's \"next\"), "
			    "got \"%.32s\"",
			    before_s);
		return;
	}
	if (after_s && r->list_newest) {
		reply_error(r, 400, "after: is for order=oldest; order=newest pages with before");
		return;
	}
	if (name && (!*name || strlen(name) >= sizeof(r->list_name))) {
		reply_error(r, 400, "name: a job's name, 1 to %d characters",
			    (int)sizeof(r->list_name) - 1);
		return;
	}
	snprintf(r->list_name, sizeof(r->list_name), "%s", name ? name : "");
	/* built later, a few at a time: see api_lists_work */
	r->list_array = array;
	r->list_mask = mask;
	r->list_limit = limit;
	r->list_after = after;
	api_list_park(r, NULL);
}

/* A page of r's list: the first `limit` matching jobs after the cursor,
 * oldest first (the head of the queue) or newest first, and how many
 * match in all. A name filter reads back the jobs out of memory the other
 * filters keep, LIST_NAME_READS at most an answer: past that it answers
 * what it found, "total" null, and "next" where to go on. */
static void list_answer(struct request *r)
{
	struct state *st = &r->s->st;
	unsigned mask = r->list_mask;
	int64_t limit = r->list_limit, after = r->list_after, before = r->list_before;
	bool newest = r->list_newest, by_name = r->list_name[0] != '\0';
	int reads = 0;
	bool cut = false;
	json_t *arr = json_array();
	int64_t total = 0, next = 0;
	size_t from = 0, to = st->njobs;
	if (r->list_array) {
		struct sjob *head = state_job_get(st, r->list_array);
		from = (size_t)r->list_array - 1;
		to = head && head->job.array_job == head->job.id
			     ? MIN(st->njobs, from + (size_t)head->job.array_count)
			     : from;
	}
	for (size_t k = from; k < to; k++) {
		size_t i = newest ? to - 1 - (k - from) : k;
		struct sjob *j = st->jobs[i];
		const struct sgone *g = j ? NULL : state_gone(st, (int64_t)i + 1);
		if (!j && !g)
			continue;
		/* a job out of memory is known by its state and owner (an
		 * array's elements have the ids after its first); read back
		 * only to be shown */
		unsigned state = j ? (unsigned)j->job.state : (unsigned)g->state - 1;
		const char *owner = j ? j->job.owner : st->owners[g->owner];
		if (!(mask & (1u << state)))
			continue;
		if (r->list_array && j && j->job.array_job != r->list_array)
			continue;
		if (r->list_owner[0] && strcmp(owner, r->list_owner) != 0)
			continue;
		int64_t id = (int64_t)i + 1;
		if (newest ? before && id >= before : id <= after) {
			if (!by_name)
				total++; /* (a name is known only by reading) */
			continue;
		}
		bool full = (int64_t)json_array_size(arr) == limit;
		if (full && by_name)
			break; /* a search's page: no total */
		if (full) {
			total++;
			if (!next)
				next = (int64_t)json_integer_value(json_object_get(
					json_array_get(arr, json_array_size(arr) - 1), "id"));
			continue;
		}
		if (by_name && !j && reads == LIST_NAME_READS) {
			cut = true; /* read enough for one answer: go on from here */
			next = id + (newest ? 1 : -1);
			break;
		}
		struct sjob tmp;
		struct tk_error err;
		if (!j && state_job_read(st, id, &tmp, &err) < 0) {
			json_decref(arr);
			reply_error(r, 500, "%s", err.text);
			return;
		}
		reads += !j;
		const char *jname = (j ? j : &tmp)->job.req.name;
		if (by_name && strcmp(jname ? jname : "", r->list_name) != 0) {
			if (!j)
				job_release(&tmp.job);
			continue;
		}
		total++;
		json_t *o = state_job_pack(st, j ? j : &tmp);
		if (!j)
			job_release(&tmp.job);
		if (!sees_inside(r, owner))
			hide_inside(o);
		/* lists leave out each job's environment; GET /v1/jobs/ID has it */
		json_object_del(json_object_get(o, "request"), "env");
		json_array_append_new(arr, o);
	}
	if (by_name && !cut && (int64_t)json_array_size(arr) == limit && !next)
		next = (int64_t)json_integer_value(
			json_object_get(json_array_get(arr, json_array_size(arr) - 1), "id"));
	json_t *ans = json_pack("{s:o}", "jobs", arr);
	/* a search by name counts only what it read */
	json_object_set_new(ans, "total", by_name ? json_null() : json_integer(total));
	json_object_set_new(ans, "next", next ? json_integer(next) : json_null());
	reply_json(r, 200, ans);
}

static void h_job_show(struct request *r, const char *param, json_t *body)
{
	struct sjob *j;
	if (parse_job_id(r, param, &j) < 0)
		return;
	const char *w = request_arg(r, "wait");
	int64_t wait_s = 0;
	if (w && tk_parse_int64(w, 0, WAIT_MAX_S, &wait_s) < 0) {
		reply_error(r, 400, "wait: must be whole seconds from 0 to %d, got \"%.32s\"",
			    WAIT_MAX_S, w);
		return;
	}
	if (wait_s == 0 || job_state_final(j->job.state)) {
		reply_json(r, 200, api_job_for(r, j));
		return;
	}
	r->wait_job = j->job.id;
	req_list_push(api_job_waits(r->s, j->job.id), r);
	request_park(r, WAIT_JOB, tk_mono_ms() + wait_s * 1000);
}

/* GET /v1/jobs/ID/checkpoints: the committed ones, oldest first, and the
 * current attempt's restore and uploads waiting for their other nodes. */
static void h_job_checkpoints(struct request *r, const char *param, json_t *body)
{
	struct sjob *j;
	if (parse_job_id(r, param, &j) < 0 || api_job_inside(r, j, "checkpoints") < 0)
		return;
	json_t *list = json_array();
	for (int i = 0; i < j->job.nckpts; i++)
		json_array_append_new(list, ckpt_pack(&j->job.ckpts[i]));
	json_t *o = json_pack("{s:I, s:o, s:s}", "job", (json_int_t)j->job.id, "checkpoints", list,
			      "store", r->s->st.sched.checkpoint_store);
	const struct attempt *a = job_current_attempt(&j->job);
	if (a) {
		json_t *nodes = json_array();
		for (int i = 0; i < a->nnodes; i++) {
			const struct attempt_node *n = &a->nodes[i];
			json_array_append_new(nodes,
					      json_pack("{s:s, s:s, s:I, s:I}", "node", n->name,
							"restore", restore_state_name(n->restore),
							"bytes", (json_int_t)n->restore_bytes,
							"dur_ms", (json_int_t)n->restore_dur_ms));
		}
		json_t *pend = json_array();
		for (int i = 0; i < a->npend; i++)
			json_array_append_new(pend, ckpt_pack(&a->pend[i]));
		json_object_set_new(
			o, "attempt",
			json_pack("{s:i, s:s, s:I, s:i, s:b, s:I, s:o, s:o}", "number", a->number,
				  "restore_tag", a->restore_tag, "restore_step",
				  (json_int_t)a->restore_step, "restore_attempt",
				  a->restore_attempt, "restore_go", a->restore_go, "restore_ms",
				  (json_int_t)a->restore_ms, "nodes", nodes, "pending", pend));
	}
	reply_json(r, 200, o);
}

/* Applies fn to the job the path names, or to every element of an array
 * named as one (in slices, arrays.c; those it does not apply to are passed
 * over); answers with the job (the array's first element) and, for an
 * array, how many changed. */
static void job_change(struct request *r, const char *param, api_change_fn fn, const char *verb)
{
	struct sjob *j;
	bool whole;
	if (api_job_ref(r, param, &j, &whole) < 0 || may_change(r, j, verb) < 0)
		return;
	struct tk_error err = {0};
	if (whole) {
		api_array_change(r, j, fn, 0);
		return;
	}
	if (fn(r->s, r->user, j, 0, &err) < 0) {
		reply_error(r, 409, "%s", err.text);
		return;
	}
	reply_json(r, 200, api_job_for(r, j));
}

static int do_cancel(struct server *s, const char *user, struct sjob *j, int64_t arg,
		     struct tk_error *err)
{
	return state_cancel(&s->st, j, server_now_ms(s), err);
}

static int do_hold(struct server *s, const char *user, struct sjob *j, int64_t arg,
		   struct tk_error *err)
{
	return state_hold(&s->st, j, true, err);
}

static int do_release(struct server *s, const char *user, struct sjob *j, int64_t arg,
		      struct tk_error *err)
{
	return state_hold(&s->st, j, false, err);
}

static int do_requeue(struct server *s, const char *user, struct sjob *j, int64_t arg,
		      struct tk_error *err)
{
	return state_requeue(&s->st, j, user, server_now_ms(s), err);
}

static void h_job_cancel(struct request *r, const char *param, json_t *body)
{
	job_change(r, param, do_cancel, "cancel");
}

static void h_job_hold(struct request *r, const char *param, json_t *body)
{
	job_change(r, param, do_hold, "hold");
}

static void h_job_release(struct request *r, const char *param, json_t *body)
{
	job_change(r, param, do_release, "release");
}

static void h_job_requeue(struct request *r, const char *param, json_t *body)
{
	job_change(r, param, do_requeue, "requeue");
}

/* A running job: only its time limit moves, down by its owner, up (or
 * away) by an operator or an admin. */
static void update_running(struct request *r, struct sjob *j, json_t *body)
{
	json_t *tl = json_object_get(body, "time_limit_s");
	if (json_object_size(body) != 1 || !tl) {
		reply_error(r, 409,
			    "job %lld is %s: of a running job only the time limit "
			    "(time_limit_s) changes",
			    (long long)j->job.id, job_state_name(j->job.state));
		return;
	}
	int64_t limit;
	struct tk_error err;
	if (mj_int(body, "time_limit_s", true, 0, MODEL_MAX_TIME_LIMIT_S, 0, &limit, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	int64_t old = j->job.req.time_limit_s;
	bool raise = limit == 0 ? old != 0 : old != 0 && limit > old;
	if (raise && r->role != ROLE_OPERATOR && r->role != ROLE_ADMIN) {
		reply_error(r, 403,
			    "job %lld: a running job's time limit goes up only by an operator or "
			    "an admin (it may go down)",
			    (long long)j->job.id);
		return;
	}
	if (limit != old) {
		state_job_set_limit(&r->s->st, j, limit);
		log_info("job %lld: time limit %lld s -> %lld s by %s", (long long)j->job.id,
			 (long long)old, (long long)limit, r->user);
	}
	reply_json(r, 200, api_job_for(r, j));
}

/* POST /v1/jobs/ID/update {KEY: VALUE, ...}: a waiting job's request, each
 * key as at submission (null: back to the default). Checked like a new
 * submission; nothing changes unless all of it is allowed. */
static int do_throttle(struct server *s, const char *user, struct sjob *j, int64_t cap,
		       struct tk_error *err)
{
	return state_array_throttle(&s->st, j, (int)cap, err);
}

/* {"array_throttle": N}: how many of the array's elements run at once, on
 * every element not ended (scontrol's ArrayTaskThrottle); 0: no cap. */
static void update_throttle(struct request *r, struct sjob *j, json_t *body)
{
	json_t *v = json_object_get(body, "array_throttle");
	if (json_object_size(body) != 1) {
		reply_error(r, 400,
			    "array_throttle: changes alone (the request's keys go in another "
			    "update)");
		return;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > MODEL_MAX_ARRAY) {
		reply_error(r, 400, "array_throttle: must be an integer from 0 (no cap) to %d",
			    MODEL_MAX_ARRAY);
		return;
	}
	struct sjob *first = j->job.array_job ? state_job_get(&r->s->st, j->job.array_job) : NULL;
	if (!first) {
		reply_error(r, 400, "array_throttle: job %lld is not an array's element",
			    (long long)j->job.id);
		return;
	}
	log_info("array %lld: at most %lld at once, by %s", (long long)first->job.id,
		 (long long)json_integer_value(v), r->user);
	api_array_change(r, first, do_throttle, json_integer_value(v));
}

static void h_job_update(struct request *r, const char *param, json_t *body)
{
	struct sjob *j;
	if (parse_job_id(r, param, &j) < 0 || may_change(r, j, "update") < 0)
		return;
	if (!json_is_object(body) || !json_object_size(body)) {
		reply_error(r, 400,
			    "update: expected an object of what to change, such as "
			    "{\"time_limit_s\": 3600}");
		return;
	}
	if (json_object_get(body, "array_throttle")) {
		update_throttle(r, j, body);
		return;
	}
	if (take_partition(r, body) < 0)
		return;
	const char *k;
	json_t *v;
	/* what placement and the queue read may change, not what the job is
	 * (its command, folder, environment, image): model.h's table says */
	json_object_foreach (body, k, v) {
		if (!job_request_updatable(k)) {
			reply_error(r, 400,
				    "%.64s: cannot be changed once submitted (what may: %s)", k,
				    job_request_updatable_list());
			return;
		}
	}
	if (j->job.state == JOB_STARTING || j->job.state == JOB_RUNNING) {
		update_running(r, j, body);
		return;
	}
	if (j->job.state != JOB_PENDING) {
		reply_error(r, 409, "job %lld is %s: only a waiting job's request is changed",
			    (long long)j->job.id, job_state_name(j->job.state));
		return;
	}
	json_t *cur = job_request_pack(&j->job.req);
	json_object_foreach (body, k, v) {
		if (json_is_null(v))
			json_object_del(cur, k);
		else
			json_object_set(cur, k, v);
	}
	struct job_request req;
	struct tk_error err;
	int rc = job_request_unpack(cur, &req, &err);
	json_decref(cur);
	if (rc < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	pool_defaults(&r->s->st.sched, &req); /* a pool removed: the default, as at submit */
	for (int i = 0; i < req.nafter; i++)
		if (req.after[i].job == j->job.id) {
			reply_error(r, 400, "after[%d]: a job cannot wait for itself", i);
			job_request_release(&req);
			return;
		}
	if (request_admissible(r, &req) < 0) {
		job_request_release(&req);
		return;
	}
	state_job_set_request(&r->s->st, j, &req, server_now_ms(r->s));
	log_info("job %lld updated by %s", (long long)j->job.id, r->user);
	reply_json(r, 200, api_job_for(r, j));
}

bool api_lists_work(struct server *s, int64_t budget_us)
{
	int64_t until = tk_mono_us() + budget_us;
	while (s->lists.head) {
		struct request *r = s->lists.head;
		req_list_remove(&s->lists, r);
		r->wait = WAIT_NONE;
		if (!r->list_work) {
			list_answer(r);
		} else if (!r->list_work(r, until)) {
			/* its slice is spent: the others' turn, then its own again */
			r->wait = WAIT_LIST;
			req_list_push(&s->lists, r);
			break;
		}
		if (tk_mono_us() >= until)
			break;
	}
	return s->lists.head != NULL;
}

void api_list_park(struct request *r, bool (*work)(struct request *r, int64_t until_us))
{
	struct server *s = r->s;
	r->list_work = work;
	r->wait = WAIT_LIST;
	req_list_push(&s->lists, r);
	uv_idle_start(&s->lists_idle, lists_idle_cb);
}

/* ---- nodes -------------------------------------------------------------------- */

static void h_nodes_list(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct state *st = &s->st;
	const char *checks = request_arg(r, "checks");
	if (checks && strcmp(checks, "0") != 0 && strcmp(checks, "1") != 0) {
		reply_error(r, 400, "checks: must be 0 or 1, got \"%.32s\"", checks);
		return;
	}
	bool with_checks = checks && strcmp(checks, "1") == 0;
	json_t *arr = json_array();
	for (int i = 0; i < st->nnodes; i++) {
		json_t *n = state_node_pack(st, st->nodes[i]);
		/* each validation's checks only when asked: at 10,000 nodes they
		 * would be most of the answer */
		if (!with_checks)
			json_object_del(json_object_get(n, "validation"), "checks");
		json_array_append_new(arr, n);
	}
	reply_json(r, 200, json_pack("{s:o}", "nodes", arr));
}

static void h_node_show(struct request *r, const char *param, json_t *body)
{
	struct snode *n = find_node(r, param);
	if (n)
		reply_json(r, 200, state_node_pack(&r->s->st, n));
}

static void h_node_drain(struct request *r, const char *param, json_t *body)
{
	static const char *const keys[] = {"reason", NULL};
	struct tk_error err;
	char reason[MODEL_REASON_MAX] = "";
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    mj_strbuf(body, "reason", true, true, reason, 200, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	if (!reason[0]) {
		reply_error(r, 400, "reason: must say why the node is drained");
		return;
	}
	struct snode *n = find_node(r, param);
	if (!n)
		return;
	state_drain(&r->s->st, n, DRAIN_OPERATOR, reason);
	reply_json(r, 200, state_node_pack(&r->s->st, n));
}

/* An operator sets labels on a node and removes those it set: {"set":
 * {"tier": "top"}, "remove": ["rack"]}. Its agent's labels stay beneath
 * (an operator's label of the same key is over its agent's). */
static void h_node_labels(struct request *r, const char *param, json_t *body)
{
	static const char *const keys[] = {"set", "remove", NULL};
	struct tk_error err;
	if (mj_check_keys(body, NULL, keys, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	json_t *set = json_object_get(body, "set"), *rm = json_object_get(body, "remove");
	if ((set && !json_is_object(set)) || (rm && !json_is_array(rm)) ||
	    (!json_object_size(set) && !json_array_size(rm))) {
		reply_error(r, 400,
			    "expected {\"set\": {\"KEY\": \"VALUE\", ...}, \"remove\": "
			    "[\"KEY\", ...]} with at least one label");
		return;
	}
	struct snode *n = find_node(r, param);
	if (!n)
		return;
	/* what it had, but what is removed or set again; then what is set */
	struct strbuf sb, what;
	strbuf_init(&sb);
	strbuf_init(&what);
	for (const char *p = n->rec.labels_set, *next; *p; p = next) {
		size_t len = model_list_item(p, &next);
		const char *eq = memchr(p, '=', len);
		bool drop = eq && json_object_getn(set, p, (size_t)(eq - p));
		size_t i;
		json_t *x;
		json_array_foreach (rm, i, x)
			drop |= eq && json_is_string(x) &&
				strlen(json_string_value(x)) == (size_t)(eq - p) &&
				strncmp(json_string_value(x), p, (size_t)(eq - p)) == 0;
		if (!drop)
			strbuf_addf(&sb, "%s%.*s", sb.len ? "," : "", (int)len, p);
	}
	const char *k;
	json_t *v;
	json_object_foreach (set, k, v) {
		if (!json_is_string(v)) {
			reply_error(r, 400, "set.%.64s: must be a string", k);
			goto out;
		}
		strbuf_addf(&sb, "%s%s=%s", sb.len ? "," : "", k, json_string_value(v));
		strbuf_addf(&what, " %s=%s", k, json_string_value(v));
	}
	size_t i;
	json_array_foreach (rm, i, v) {
		if (!json_is_string(v)) {
			reply_error(r, 400, "remove[%zu]: must be a label's key", i);
			goto out;
		}
		strbuf_addf(&what, " -%s", json_string_value(v));
	}
	char next[MODEL_LABELS_MAX];
	if (node_labels_parse(sb.buf, next, sizeof(next), &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		goto out;
	}
	snprintf(n->rec.labels_set, sizeof(n->rec.labels_set), "%s", next);
	state_node_labels_sync(&r->s->st, n);
	char detail[MODEL_REASON_MAX + MODEL_NAME_MAX + 8];
	snprintf(detail, sizeof(detail), "by %s:%.200s", r->user, what.buf);
	state_node_event(&r->s->st, n, NODE_EV_LABELED, 0, 0, detail, server_now_ms(r->s));
	state_node_dirty(&r->s->st, n);
	reply_json(r, 200, state_node_pack(&r->s->st, n));
out:
	strbuf_release(&sb);
	strbuf_release(&what);
}

/* An operator taints a node, or takes taints off: {"add": ["inference"],
 * "remove": ["dev"]}. Only jobs that tolerate each of its taints go there
 * (those running stay). */
static void h_node_taints(struct request *r, const char *param, json_t *body)
{
	static const char *const keys[] = {"add", "remove", NULL};
	struct tk_error err;
	if (mj_check_keys(body, NULL, keys, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	json_t *add = json_object_get(body, "add"), *rm = json_object_get(body, "remove");
	if ((add && !json_is_array(add)) || (rm && !json_is_array(rm)) ||
	    (!json_array_size(add) && !json_array_size(rm))) {
		reply_error(r, 400,
			    "expected {\"add\": [\"TAINT\", ...], \"remove\": [\"TAINT\", ...]} "
			    "with at least one taint");
		return;
	}
	struct snode *n = find_node(r, param);
	if (!n)
		return;
	struct strbuf sb, what;
	strbuf_init(&sb);
	strbuf_init(&what);
	for (int w = 0; w < 2; w++) {
		size_t i;
		json_t *v;
		json_array_foreach (w ? rm : add, i, v) {
			if (!json_is_string(v)) {
				reply_error(r, 400, "%s[%zu]: must be a taint's name",
					    w ? "remove" : "add", i);
				goto out;
			}
			strbuf_addf(&what, " %s%s", w ? "-" : "+", json_string_value(v));
		}
	}
	/* what it had but what is removed, and what is added */
	for (const char *p = n->rec.taints, *next; *p; p = next) {
		size_t len = model_list_item(p, &next);
		bool drop = false;
		size_t i;
		json_t *v;
		json_array_foreach (rm, i, v)
			drop |= strlen(json_string_value(v)) == len &&
				strncmp(json_string_value(v), p, len) == 0;
		if (!drop)
			strbuf_addf(&sb, "%s%.*s", sb.len ? "," : "", (int)len, p);
	}
	size_t i;
	json_t *v;
	json_array_foreach (add, i, v)
		strbuf_addf(&sb, "%s%s", sb.len ? "," : "", json_string_value(v));
	char next[MODEL_LABELS_MAX];
	if (model_names_parse("taints", sb.buf, next, sizeof(next), &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		goto out;
	}
	snprintf(n->rec.taints, sizeof(n->rec.taints), "%s", next);
	char detail[MODEL_REASON_MAX + MODEL_NAME_MAX + 8];
	snprintf(detail, sizeof(detail), "by %s:%.200s", r->user, what.buf);
	state_node_event(&r->s->st, n, NODE_EV_TAINTED, 0, 0, detail, server_now_ms(r->s));
	state_node_dirty(&r->s->st, n);
	r->s->st.nodes_gen++; /* what could ever run where changed */
	state_want_pass(&r->s->st);
	reply_json(r, 200, state_node_pack(&r->s->st, n));
out:
	strbuf_release(&sb);
	strbuf_release(&what);
}

/* An operator says a node that is silent is dead: its jobs move now, as
 * for a node the server declares DOWN (an UNREACHABLE one, whose group the
 * server cannot hear either, is only ever moved so). One heard within the
 * node timeout is not dead. */
static void h_node_down(struct request *r, const char *param, json_t *body)
{
	struct snode *n = find_node(r, param);
	if (!n)
		return;
	struct state *st = &r->s->st;
	int64_t silent = tk_mono_ms() - n->last_seen_ms;
	if (n->live != NODE_LIVE_DOWN && silent <= st->cfg.node_timeout_ms) {
		reply_error(r, 409,
			    "node %s was heard from %llds ago (the node timeout is %llds): it is "
			    "not known dead, and its jobs would run twice",
			    n->rec.inv.name, (long long)(silent / 1000),
			    (long long)(st->cfg.node_timeout_ms / 1000));
		return;
	}
	if (n->live != NODE_LIVE_DOWN) {
		char why[MODEL_REASON_MAX];
		snprintf(why, sizeof(why), "declared down by %s (tenk nodes down)", r->user);
		state_node_lost(st, n, why, server_now_ms(r->s));
	}
	reply_json(r, 200, state_node_pack(st, n));
}

static void h_node_resume(struct request *r, const char *param, json_t *body)
{
	struct snode *n = find_node(r, param);
	if (!n)
		return;
	const char *fa = request_arg(r, "force");
	if (fa && strcmp(fa, "true") != 0 && strcmp(fa, "false") != 0) {
		reply_error(r, 400, "force: expected true or false, got \"%.40s\"", fa);
		return;
	}
	bool force = fa && strcmp(fa, "true") == 0;
	/* a maintenance window drains it again while it lasts */
	int64_t now = server_now_ms(r->s);
	for (int k = 0; k < n->rec.nwindows; k++) {
		const struct node_window *w = &n->rec.windows[k];
		if (!node_window_maint(w) || now < w->start_ms)
			continue;
		char until[32];
		tk_format_duration((w->end_ms - now + 999) / 1000, until, sizeof(until));
		reply_error(r, 409,
			    "node %s is in maintenance window %s for %s more; it resumes when the "
			    "window ends, or now once the window is deleted (tenk reservations "
			    "delete %s)",
			    n->rec.inv.name, w->name, until, w->name);
		return;
	}
	/* a fault it still reports would drain it again at its next beat,
	 * and end whatever started on it meanwhile */
	const char *fault;
	if (state_node_faults_unwaived(n, &fault)) {
		if (!force) {
			reply_error(
				r, 409,
				"node %s still reports a fault (its heartbeat %llds ago): %s; "
				"resumed, it would be drained again at its next heartbeat. Fix "
				"the cause first (a fault counted since its agent started, such "
				"as a failed device check, clears when the agent restarts; one "
				"told once, as an Xid, is gone from the next heartbeat), or resume "
				"with force (tenk resume --force) to give it work despite this "
				"fault",
				n->rec.inv.name,
				(long long)(MAX(0, tk_mono_ms() - n->faults_at) / 1000), fault);
			return;
		}
		char what[MODEL_REASON_MAX + MODEL_NAME_MAX + 64];
		snprintf(what, sizeof(what), "by %s, despite its fault: %.200s", r->user, fault);
		state_node_event(&r->s->st, n, NODE_EV_RESUMED, 0, 0, what, server_now_ms(r->s));
		state_waive_faults(n);
	} else if (n->rec.drained) {
		char who[MODEL_NAME_MAX + 64];
		snprintf(who, sizeof(who), "by %s, drained %s", r->user,
			 drain_source_name(n->rec.drain_source));
		state_node_event(&r->s->st, n, NODE_EV_RESUMED, 0, 0, who, server_now_ms(r->s));
	}
	state_resume(&r->s->st, n);
	reply_json(r, 200, state_node_pack(&r->s->st, n));
}

/* A body's "nodes": "all" (the nodes up, and with free_only not held by a
 * validation) or an array of names, into nodes. Returns how many, or
 * answers the refusal and returns < 0. */
static int nodes_of(struct request *r, json_t *jn, bool free_only, struct snode **nodes)
{
	struct state *st = &r->s->st;
	int n = 0;
	size_t i;
	json_t *a;
	if (json_is_string(jn) && strcmp(json_string_value(jn), "all") == 0) {
		for (int k = 0; k < st->nnodes; k++)
			if (st->nodes[k]->live == NODE_LIVE_UP &&
			    (!free_only || !st->nodes[k]->held_by))
				nodes[n++] = st->nodes[k];
		if (n == 0) {
			reply_error(r, 409, "nodes: no node is up%s",
				    free_only ? " and free of other validations" : "");
			return -ENOENT;
		}
	} else if (json_is_array(jn) && json_array_size(jn) >= 1 &&
		   json_array_size(jn) <= MODEL_MAX_NODES) {
		json_array_foreach (jn, i, a) {
			const char *name = json_string_value(a);
			struct snode *nd = name ? state_node(st, name) : NULL;
			if (!nd) {
				reply_error(r, name ? 404 : 400, "nodes[%zu]: %s%.64s%s", i,
					    name ? "no node \"" : "must be a node's name",
					    name ? name : "", name ? "\"" : "");
				return -ENOENT;
			}
			nodes[n++] = nd;
		}
	} else {
		reply_error(r, 400, "nodes: must be \"all\" or an array of 1 to %d node names",
			    MODEL_MAX_NODES);
		return -EINVAL;
	}
	return n;
}

/* ---- images ------------------------------------------------------------------- */

/* GET /v1/images?nodes=a,b: what each node's store holds, and the pulls
 * asked of it. */
static void h_images(struct request *r, const char *param, json_t *body)
{
	struct state *st = &r->s->st;
	const char *want = request_arg(r, "nodes");
	json_t *arr = json_array();
	if (!want || !*want || strcmp(want, "all") == 0) {
		for (int i = 0; i < st->nnodes; i++)
			json_array_append_new(arr, state_node_images_pack(st->nodes[i]));
	} else {
		_cleanup_free_ char *copy = xstrdup(want);
		char *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			struct snode *n = state_node(st, t);
			if (!n) {
				json_decref(arr);
				reply_error(r, 404, "nodes: no node \"%.64s\"", t);
				return;
			}
			json_array_append_new(arr, state_node_images_pack(n));
		}
	}
	reply_json(r, 200, json_pack("{s:o}", "nodes", arr));
}

/* POST /v1/images/pull {"ref": REF, "nodes": "all" | [names]}: the nodes
 * pull it ahead of the jobs that will run it. */
static void h_images_pull(struct request *r, const char *param, json_t *body)
{
	static const char *const keys[] = {"ref", "nodes", NULL};
	struct state *st = &r->s->st;
	struct tk_error err;
	char ref[MODEL_IMAGE_MAX] = "";
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    mj_strbuf(body, "ref", true, true, ref, sizeof(ref), &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	if (!model_image_valid(ref)) {
		reply_error(r, 400, "ref: \"%.64s\" is not an image reference", ref);
		return;
	}
	struct snode **nodes =
		xcalloc((size_t)MAX(st->nnodes, MODEL_MAX_NODES) + 1, sizeof(*nodes));
	int n = nodes_of(r, json_object_get(body, "nodes"), false, nodes);
	if (n >= 0) {
		json_t *names = json_array();
		for (int k = 0; k < n; k++) {
			state_node_pull(st, nodes[k], ref);
			json_array_append_new(names, json_string(nodes[k]->rec.inv.name));
		}
		log_info("%s asked %d node(s) to pull %s", r->user[0] ? r->user : "admin", n, ref);
		reply_json(r, 202, json_pack("{s:s, s:o}", "ref", ref, "nodes", names));
	}
	free(nodes);
}

/* POST /v1/nodes/NAME/admit: the next agent that joins as NAME with the
 * join token gets its credential (a node rebuilt, or one revoked). */
static void h_node_admit(struct request *r, const char *param, json_t *body)
{
	struct snode *n = find_node(r, param);
	if (!n)
		return;
	state_node_admit(&r->s->st, n);
	log_info("%s admitted a new agent for node %s", r->user, n->rec.inv.name);
	reply_json(r, 200, state_node_pack(&r->s->st, n));
}

/* POST /v1/nodes/NAME/revoke: its credential ends now; only an admit lets
 * an agent of that name in again. */
static void h_node_revoke(struct request *r, const char *param, json_t *body)
{
	struct snode *n = find_node(r, param);
	if (!n)
		return;
	state_node_revoke(&r->s->st, n);
	log_info("%s revoked the credential of node %s", r->user, n->rec.inv.name);
	reply_json(r, 200, state_node_pack(&r->s->st, n));
}

static void h_audit(struct request *r, const char *param, json_t *body)
{
	audit_list(r);
}

/* ---- agents ------------------------------------------------------------------- */

/* Finds the node an agent names, answering 409 when the agent must register
 * (again) first. */
struct snode *api_agent_node(struct request *r, const char *name, const char *agent_id)
{
	if (!r->node) {
		reply_error(r, 403,
			    "the join token only registers a node; send the node's own credential "
			    "(its agent got it when it joined)");
		return NULL;
	}
	if (strcmp(r->node->rec.inv.name, name) != 0) {
		reply_error(r, 403, "this credential is node %s's, not \"%.64s\"'s",
			    r->node->rec.inv.name, name);
		return NULL;
	}
	struct snode *n = state_node(&r->s->st, name);
	if (!n) {
		reply_error(r, 409, "node \"%.64s\" is not registered; register first", name);
		return NULL;
	}
	if (agent_id && strcmp(n->rec.agent_id, agent_id) != 0) {
		reply_error(r, 409,
			    "node \"%.64s\" is registered by another agent process; register "
			    "again",
			    name);
		return NULL;
	}
	return n;
}

static void h_agent_register(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct state *st = &s->st;
	struct tk_error err;
	struct wire_register *m = xmalloc(sizeof(*m));
	if (wire_register_unpack(body, m, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		goto out;
	}
	/* its own version and the one before (wire.h) */
	if (m->protocol > WIRE_PROTOCOL) {
		reply_error(
			r, 400,
			"this agent speaks protocol %d, newer than this server's %d: upgrade "
			"the servers first (standbys, then the active), then agents node by node",
			m->protocol, WIRE_PROTOCOL);
		goto done;
	}
	if (m->protocol < WIRE_PROTOCOL - 1) {
		reply_error(r, 400,
			    "this agent speaks protocol %d; this server serves %d and %d: upgrade "
			    "the agent (its jobs go on: the new agent adopts their shims)",
			    m->protocol, WIRE_PROTOCOL - 1, WIRE_PROTOCOL);
		goto done;
	}
	struct node_inventory *inv = &m->inv;
	if (!inv->addr[0]) {
		/* the address the agent reached us from is how peers reach it */
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (ci && ci->client_addr->sa_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)ci->client_addr)->sin_addr,
				  inv->addr, sizeof(inv->addr));
		else if (ci && ci->client_addr->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ci->client_addr)->sin6_addr,
				  inv->addr, sizeof(inv->addr));
	}
	/* who may register under this name: its own credential, or the join
	 * token for a name not yet held (or one an admin admitted) */
	struct snode *known = state_node(st, inv->name);
	if (r->node && r->node != known) {
		/* "refusal": whether asking again can help (wire.h) */
		reply_error_with(
			r, 403,
			json_pack("{s:s}", "refusal", wire_refusal_name(WIRE_REFUSAL_FINAL)),
			"this credential is node %s's, not \"%s\"'s: an agent's --name and "
			"its credential file go together",
			r->node->rec.inv.name, inv->name);
		goto done;
	}
	bool join = !r->node;
	if (join && known && (known->rec.cred_sha256[0] || known->rec.revoked) &&
	    !known->rec.admit) {
		reply_error_with(
			r, 403,
			json_pack("{s:s}", "refusal", wire_refusal_name(WIRE_REFUSAL_ADMIT)),
			"node %s is known%s: its agent registers with its own credential, "
			"or an admin admits a new one (tenk nodes admit %s)",
			inv->name, known->rec.revoked ? " and its credential was revoked" : "",
			inv->name);
		goto done;
	}
	struct snode *n = state_register(st, inv, m->agent_id, m->kept, m->nkept, server_now_ms(s),
					 tk_mono_ms());
	/* this server's protocol, or to a protocol-1 agent no word of it */
	struct wire_registered ans = {.node_timeout_ms = s->cfg.node_timeout_ms,
				      .protocol = m->protocol < 2 ? 1 : WIRE_PROTOCOL,
				      .has_gpu_health = m->protocol >= 2,
				      .gpu_health = st->sched.gpu_health,
				      .idle_power_after_ms = st->sched.idle_power_after_s * 1000};
	/* power fencing finds a dead node in three beats and their delays:
	 * beats of `heartbeat`, asked of every agent */
	if (st->sched.npower_fence)
		ans.heartbeat_ms = st->sched.power_fence_heartbeat_s * 1000;
	if (join) {
		/* its own credential from now on; the server keeps its hash */
		char sha[65];
		if (tk_random_hex(ans.credential, 32) < 0) {
			reply_error(r, 500, "cannot read random bytes");
			goto done;
		}
		tk_sha256_hex(ans.credential, strlen(ans.credential), sha);
		state_node_credential(st, n, sha);
		log_info("node %s joined and has its own credential", inv->name);
	}
	snprintf(ans.node, sizeof(ans.node), "%s", n->rec.inv.name);
	snprintf(ans.addr, sizeof(ans.addr), "%s", n->rec.inv.addr);
	snprintf(ans.epoch, sizeof(ans.epoch), "%s", s->epoch);
	reply_json(r, 200, wire_registered_pack(&ans));
done:
	wire_register_release(m);
out:
	free(m);
}

static void h_agent_heartbeat(struct request *r, const char *param, json_t *body)
{
	struct tk_error err;
	struct wire_heartbeat m;
	if (wire_heartbeat_unpack(body, &m, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	struct snode *n = api_agent_node(r, m.node, m.agent_id);
	int64_t mono = tk_mono_ms();
	if (n) {
		/* how often it beats, before the gap since its last request is
		 * judged by it */
		fence_member_beats(&n->fence, m.beat_ms);
		state_node_seen(&r->s->st, n, mono);
		/* what it heard of this run of the server proves it hears it */
		if (m.acked_epoch[0] && strcmp(m.acked_epoch, r->s->epoch) == 0)
			state_node_acked(&r->s->st, n, m.acked_at_ms, mono);
		if (m.stopping)
			state_agent_stopping(&r->s->st, n);
		if (m.has_images)
			state_node_images(&r->s->st, n, &m);
		if (m.has_stack)
			state_node_stack(&r->s->st, n, &m.stack, server_now_ms(r->s));
		state_node_faults(&r->s->st, n, (const char(*)[WIRE_FAULT_MAX])m.faults, m.nfaults,
				  server_now_ms(r->s), mono);
		state_node_gpus(&r->s->st, n, &m, server_now_ms(r->s));
		for (int i = 0; i < m.ncheckpoints; i++)
			state_checkpoint_seen(&r->s->st, &m.checkpoints[i]);
		for (int i = 0; i < m.ntrain; i++)
			state_train_metrics(&r->s->st, n, &m.train[i]);
		for (int i = 0; i < m.nnccl; i++)
			state_nccl_seen(&r->s->st, n, &m.nccl[i]);
		if (m.has_serve)
			services_heard(r->s, n->rec.inv.name, m.serve, m.nserve);
		/* the next beat acknowledges this answer: the server's epoch and
		 * time; and the node's witness group, when it holds another */
		struct wire_group gb;
		const struct wire_group *g = state_node_witness(&r->s->st, n, &m, !r->ungated, &gb);
		reply_json(r, 200, wire_beat_answer_pack(r->s->epoch, tk_mono_ms(), g));
	}
	wire_heartbeat_release(&m);
}

static void h_agent_work(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct state *st = &s->st;
	const char *node = request_arg(r, "node");
	const char *epoch = request_arg(r, "epoch");
	const char *gen = request_arg(r, "gen");
	const char *wait = request_arg(r, "wait_ms");
	int64_t g = 0, wait_ms = 0;
	if (!node) {
		reply_error(r, 400, "node: required query argument is missing");
		return;
	}
	if (gen && tk_parse_int64(gen, 0, INT64_MAX, &g) < 0) {
		reply_error(r, 400, "gen: must be a non-negative integer");
		return;
	}
	if (wait && tk_parse_int64(wait, 0, 600000, &wait_ms) < 0) {
		reply_error(r, 400, "wait_ms: must be an integer from 0 to 600000");
		return;
	}
	struct snode *n = api_agent_node(r, node, request_arg(r, "agent_id"));
	if (!n)
		return;
	state_node_seen(st, n, tk_mono_ms());
	bool same_epoch = epoch && strcmp(epoch, s->epoch) == 0;
	uint64_t since = same_epoch ? (uint64_t)g : 0;
	/* protocol 2's agents say theirs (a 0.1.0 agent does not) */
	const char *proto = request_arg(r, "protocol");
	int64_t protocol = 1;
	if (proto && tk_parse_int64(proto, 1, WIRE_PROTOCOL, &protocol) < 0) {
		reply_error(r, 400, "protocol: an integer from 1 to %d", WIRE_PROTOCOL);
		return;
	}
	r->agent_protocol = (int)protocol;
	json_t *asks = api_node_asks(s, n);
	if (!same_epoch || since < n->work_gen || wait_ms == 0 || asks) {
		json_t *w = state_work_pack(st, n, since, r->agent_protocol);
		if (asks)
			json_object_update(w, asks);
		json_decref(asks);
		reply_json(r, 200, w);
		return;
	}
	snprintf(r->agent_epoch, sizeof(r->agent_epoch), "%s", s->epoch);
	r->agent_gen = since;
	r->wait_node = n->index;
	req_list_push(api_node_polls(s, n->index), r);
	request_park(r, WAIT_WORK, tk_mono_ms() + MIN(wait_ms, s->cfg.longpoll_ms));
}

static void h_agent_events(struct request *r, const char *param, json_t *body)
{
	struct tk_error err;
	struct wire_events m;
	if (wire_events_unpack(body, &m, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	struct snode *sn = api_agent_node(r, m.node, m.agent_id);
	for (int i = 0; sn && i < m.nevents; i++) {
		const struct task_event *ev = &m.events[i];
		struct sjob *j = state_job(&r->s->st, ev->job);
		const struct attempt *a = j && ev->attempt >= 1 && ev->attempt <= j->job.nattempts
						  ? &j->job.attempts[ev->attempt - 1]
						  : NULL;
		int tpn = j ? j->job.req.tasks_per_node : 1;
		if (a && ev->rank < a->ntasks &&
		    strcmp(a->nodes[ev->rank / tpn].name, sn->rec.inv.name) != 0) {
			/* a node reports only what runs on it */
			reply_error(
				r, 403,
				"events[%d]: job %lld attempt %d rank %d does not run on node %s",
				i, (long long)ev->job, ev->attempt, ev->rank, sn->rec.inv.name);
			sn = NULL;
		}
	}
	if (sn) {
		struct state *st = &r->s->st;
		int64_t now = server_now_ms(r->s);
		state_node_seen(st, sn, tk_mono_ms());
		for (int i = 0; i < m.nevents; i++) {
			const struct task_event *ev = &m.events[i];
			if (ev->type == TASK_EVENT_EXITED)
				state_task_exited(st, ev, now);
			else if (ev->type == TASK_EVENT_STARTED)
				state_task_started(st, ev, now);
			else if (ev->type == TASK_EVENT_CHECKPOINT)
				state_task_checkpoint(st, ev, now);
			else if (ev->type == TASK_EVENT_RESTORED)
				state_task_restored(st, ev, now);
			else if (ev->type == TASK_EVENT_READY || ev->type == TASK_EVENT_UNREADY)
				state_task_ready(st, ev, now);
			else
				state_task_image(st, ev, now);
		}
		reply_json(r, 200, json_pack("{s:I}", "acked", (json_int_t)m.nevents));
	}
	wire_events_release(&m);
}

void api_longpoll_expired(struct request *r)
{
	struct server *s = r->s;
	struct state *st = &s->st;
	if (r->wait == WAIT_WORK)
		reply_json(r, 200, state_work_unchanged_pack(st, st->nodes[r->wait_node]));
	else if (r->wait == WAIT_JOB)
		reply_json(r, 200, api_job_for(r, state_job_get(st, r->wait_job)));
	else if (r->wait == WAIT_LOGS)
		logs_expired(r);
}

/* Grows a list array to hold index i. */
static struct req_list *list_at(struct req_list **lists, size_t *alloc, size_t i)
{
	if (i >= *alloc) {
		size_t old = *alloc;
		xgrow(lists, alloc, i + 1, sizeof(**lists));
		memset(*lists + old, 0, (*alloc - old) * sizeof(**lists));
	}
	return &(*lists)[i];
}

struct req_list *api_job_waits(struct server *s, int64_t id)
{
	return list_at(&s->job_waits, &s->job_waits_alloc, (size_t)(id - 1));
}

struct req_list *api_node_polls(struct server *s, int index)
{
	return list_at(&s->node_polls, &s->node_polls_alloc, (size_t)index);
}

void api_state_event(void *arg, const struct state_event *ev)
{
	struct server *s = arg;
	struct state *st = &s->st;
	if (ev->kind == STATE_EV_JOB_ENDED) {
		int64_t id = ev->job->job.id;
		if ((size_t)id > s->job_waits_alloc)
			return;
		struct req_list *l = api_job_waits(s, id);
		while (l->head)
			reply_json(l->head, 200, api_job_for(l->head, ev->job));
	} else if (ev->kind == STATE_EV_POWER_FENCE) {
		server_power_fence(s, ev->node);
	} else if (ev->kind == STATE_EV_WORK_CHANGED) {
		struct snode *n = ev->node;
		if ((size_t)n->index >= s->node_polls_alloc)
			return;
		struct req_list *l = api_node_polls(s, n->index);
		while (l->head) {
			struct request *r = l->head;
			uint64_t since = strcmp(r->agent_epoch, s->epoch) == 0 ? r->agent_gen : 0;
			reply_json(r, 200, state_work_pack(st, n, since, r->agent_protocol));
		}
	}
}

/* ---- validation runs -------------------------------------------------------------------- */

/* POST /v1/validations {"nodes": ["n1", ...] | "all", "args": ["--quick", ...],
 * "image": REF} */
static void h_validate_create(struct request *r, const char *param, json_t *body)
{
	static const char *const keys[] = {"nodes", "args", "image", NULL};
	struct server *s = r->s;
	struct state *st = &s->st;
	struct tk_error err;
	char image[MODEL_IMAGE_MAX] = "";
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    mj_strbuf(body, "image", false, true, image, sizeof(image), &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	if (image[0] && !model_image_valid(image)) {
		reply_error(r, 400, "image: \"%.64s\" is not an image reference", image);
		return;
	}
	json_t *jn = json_object_get(body, "nodes"), *ja = json_object_get(body, "args");
	const char *args[MODEL_MAX_VALIDATION_ARGS];
	int nargs = 0;
	if (ja && (!json_is_array(ja) || json_array_size(ja) > MODEL_MAX_VALIDATION_ARGS)) {
		reply_error(r, 400, "args: must be an array of at most %d strings",
			    MODEL_MAX_VALIDATION_ARGS);
		return;
	}
	size_t i;
	json_t *a;
	json_array_foreach (ja, i, a) {
		const char *t = json_string_value(a);
		if (!t || !*t || strlen(t) >= MODEL_NAME_MAX || strchr(t, '\n')) {
			reply_error(r, 400,
				    "args[%zu]: must be a string of 1 to %d bytes (an option "
				    "of tenk validate)",
				    i, MODEL_NAME_MAX - 1);
			return;
		}
		if (strcmp(t, "--member") == 0 || strcmp(t, "--nodes") == 0) {
			reply_error(r, 400, "args[%zu]: %s is not for a validation run", i, t);
			return;
		}
		args[nargs++] = t;
	}
	struct snode **nodes =
		xcalloc((size_t)MAX(st->nnodes, MODEL_MAX_NODES) + 1, sizeof(*nodes));
	int n = nodes_of(r, jn, true, nodes);
	if (n < 0)
		goto out;
	struct sjob *j;
	int rc = valid_create(st, nodes, n, args, nargs, image[0] ? image : NULL,
			      r->user[0] ? r->user : "admin", server_now_ms(s), &j, &err);
	if (rc < 0) {
		reply_error(r, rc == -EINVAL ? 400 : 409, "%s", err.text);
		goto out;
	}
	json_t *names = json_array();
	for (int k = 0; k < n; k++)
		json_array_append_new(names, json_string(nodes[k]->rec.inv.name));
	reply_json(r, 201, json_pack("{s:I, s:o}", "job", (json_int_t)j->job.id, "nodes", names));
out:
	free(nodes);
}

/* POST /v1/validations/JOB/report {"token", "node", "verdict", "layer",
 * "reason", "checks": [...]}: one node's result, from its task. */
static void h_validate_report(struct request *r, const char *param, json_t *body)
{
	static const char *const keys[] = {"token",  "node",	   "verdict",	"layer", "reason",
					   "checks", "peer_error", "reference", NULL};
	struct server *s = r->s;
	struct state *st = &s->st;
	struct tk_error err;
	char token[80] = "", node[MODEL_NAME_MAX] = "", verdict[8] = "", layer[16] = "";
	char reason[MODEL_REASON_MAX] = "";
	bool peer_error = false;
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    mj_bool(body, "peer_error", false, false, &peer_error, &err) < 0 ||
	    mj_strbuf(body, "token", true, true, token, sizeof(token), &err) < 0 ||
	    mj_strbuf(body, "node", true, true, node, sizeof(node), &err) < 0 ||
	    mj_strbuf(body, "verdict", true, true, verdict, sizeof(verdict), &err) < 0 ||
	    mj_strbuf(body, "layer", false, true, layer, sizeof(layer), &err) < 0 ||
	    mj_strbuf(body, "reason", false, false, reason, sizeof(reason), &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	int64_t id;
	if (tk_parse_int64(param, 1, INT64_MAX, &id) < 0) {
		reply_error(r, 400, "job id must be a positive integer, got \"%.64s\"", param);
		return;
	}
	char want[65];
	valid_token(st, id, want);
	if (!secret_equal(token, want)) {
		reply_error(r, 403, "token: not the token of validation job %lld", (long long)id);
		return;
	}
	struct sjob *j = state_job(st, id);
	if (!j || !j->valid) {
		reply_error(r, 409, "validation job %lld is not running", (long long)id);
		return;
	}
	bool pass = strcmp(verdict, "pass") == 0;
	if (!pass && strcmp(verdict, "fail") != 0) {
		reply_error(r, 400, "verdict: must be \"pass\" or \"fail\", got \"%s\"", verdict);
		return;
	}
	json_t *checks = json_object_get(body, "checks");
	if (checks && (!json_is_array(checks) || json_array_size(checks) > VALID_MAX_CHECKS)) {
		reply_error(r, 400, "checks: must be an array of at most %d", VALID_MAX_CHECKS);
		return;
	}
	json_t *c;
	size_t i;
	json_array_foreach (checks, i, c)
		if (!json_is_object(c)) {
			reply_error(r, 400, "checks[%zu]: must be an object", i);
			return;
		}
	/* the reference's record is a rollout's (its numbers are not kept
	 * with the node's verdict) */
	json_t *ref = json_object_get(body, "reference");
	if (ref)
		rollout_reference(s, j, node, ref);
	int rc = valid_report(st, j, node, pass, layer, reason, checks, peer_error,
			      server_now_ms(s), &err);
	if (rc < 0) {
		reply_error(r, rc == -ENOENT ? 404 : rc == -EALREADY ? 409 : 400, "%s", err.text);
		return;
	}
	reply_json(r, 200,
		   json_pack("{s:s, s:s}", "node", node, "verdict",
			     peer_error && !pass ? "held" : verdict));
}

/* ---- users ------------------------------------------------------------------------ */

static void h_users(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct state *st = &s->st;
	json_t *arr = json_array();
	size_t pos = 0;
	void *v;
	while (tk_map_next(&st->user_by_name, &pos, NULL, &v)) {
		const struct suser *u = v;
		json_array_append_new(arr, json_pack("{s:s, s:b, s:s, s:s, s:o, s:I}", "name",
						     u->rec.name, "admin", u->rec.admin, "access",
						     user_access_name(u->rec.access), "unix_user",
						     u->rec.unix_user, "roles",
						     allow_list_pack(u->rec.roles, u->rec.nroles),
						     "created_ms", (json_int_t)u->rec.created_ms));
	}
	reply_json(r, 200, json_pack("{s:o}", "users", arr));
}

static void h_user_add(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct state *st = &s->st;
	static const char *const keys[] = {"name", "admin", "access", "unix_user", "roles", NULL};
	struct tk_error err;
	struct user_record rec;
	memset(&rec, 0, sizeof(rec));
	char *name = rec.name, *unix_user = rec.unix_user;
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    mj_strbuf(body, "name", true, true, name, sizeof(rec.name), &err) < 0 ||
	    user_access_unpack(body, &rec, &err) < 0 ||
	    mj_strbuf(body, "unix_user", false, true, unix_user, sizeof(rec.unix_user), &err) < 0 ||
	    user_roles_unpack(body, &rec, &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	if (!unix_user[0])
		snprintf(unix_user, sizeof(rec.unix_user), "%s", name);
	if (!model_unix_user_valid(unix_user)) {
		reply_error(r, 400,
			    "unix_user: \"%s\" is not a Unix account name (1 to 32 of a-z, "
			    "0-9, '_', '.', '-'); give --unix-user",
			    unix_user);
		return;
	}
	if (!model_name_valid(name) || !strcmp(name, "admin") || !strcmp(name, "agent")) {
		reply_error(r, 400,
			    "name: \"%s\" is not a user name one may add (letters, digits, "
			    "'.', '_', '-'; not admin or agent)",
			    name);
		return;
	}
	if (tk_map_get(&st->user_by_name, name)) {
		reply_error(r, 409, "user \"%s\" exists; remove it first to issue a new token",
			    name);
		return;
	}
	char token[65];
	const struct suser *u = state_user_add(st, &rec, token, server_now_ms(s));
	reply_json(r, 201,
		   json_pack("{s:s, s:b, s:s, s:s, s:o, s:s}", "name", name, "admin", rec.admin,
			     "access", user_access_name(rec.access), "unix_user", unix_user,
			     "roles", allow_list_pack(u->rec.roles, u->rec.nroles), "token",
			     token));
}

/* ---- reservations: windows in which nodes are kept (tenk reserve) --------------- */

static void h_reservations(struct request *r, const char *param, json_t *body)
{
	struct state *st = &r->s->st;
	reply_json(r, 200,
		   json_pack("{s:o}", "reservations", state_windows_pack(st, server_now_ms(r->s))));
}

static void h_reservation_show(struct request *r, const char *param, json_t *body)
{
	struct state *st = &r->s->st;
	const struct swindow *w = state_window(st, param);
	if (!w) {
		reply_error(r, 404, "no reservation \"%.64s\" (tenk reservations lists them)",
			    param);
		return;
	}
	reply_json(r, 200, state_window_pack(st, w, server_now_ms(r->s)));
}

/* {"nodes": "gpu[001-064]" or [...], "start_ms", "end_ms" or "duration_s",
 * "reason", "name", "users": [...], "queue"}: a window on those nodes;
 * for maintenance without users and queue. */
static void h_reservation_create(struct request *r, const char *param, json_t *body)
{
	static const char *const keys[] = {"name",   "nodes", "start_ms", "end_ms", "duration_s",
					   "reason", "users", "queue",	  NULL};
	struct state *st = &r->s->st;
	int64_t now = server_now_ms(r->s);
	struct tk_error err;
	struct node_window w;
	memset(&w, 0, sizeof(w));
	int64_t dur = 0;
	char spec[4096] = "";
	json_t *nodes = json_object_get(body, "nodes");
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    mj_strbuf(body, "name", false, true, w.name, sizeof(w.name), &err) < 0 ||
	    mj_int(body, "start_ms", true, 0, INT64_MAX / 2, 0, &w.start_ms, &err) < 0 ||
	    mj_int(body, "end_ms", false, 0, INT64_MAX / 2, 0, &w.end_ms, &err) < 0 ||
	    mj_int(body, "duration_s", false, 1, 366LL * 86400, 0, &dur, &err) < 0 ||
	    mj_strbuf(body, "reason", true, true, w.reason, 200, &err) < 0 ||
	    mj_strbuf(body, "queue", false, true, w.queue, sizeof(w.queue), &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	if (!w.reason[0]) {
		reply_error(r, 400, "reason: must say what the nodes are kept for");
		return;
	}
	if (!w.end_ms == !dur) {
		reply_error(r, 400,
			    "give its end as end_ms or its length as duration_s, one of them");
		return;
	}
	if (dur)
		w.end_ms = w.start_ms + dur * 1000;
	if (w.end_ms <= w.start_ms || w.end_ms <= now) {
		reply_error(r, 400, "end_ms: the window must end after it starts, and after now");
		return;
	}
	if (json_is_string(nodes)) {
		snprintf(spec, sizeof(spec), "%s", json_string_value(nodes));
	} else if (json_is_array(nodes)) {
		struct strbuf sb;
		strbuf_init(&sb);
		size_t i;
		json_t *v;
		json_array_foreach (nodes, i, v)
			strbuf_addf(&sb, "%s%s", i ? "," : "",
				    json_is_string(v) ? json_string_value(v) : "");
		snprintf(spec, sizeof(spec), "%s", sb.buf);
		strbuf_release(&sb);
	}
	if (!spec[0]) {
		reply_error(r, 400, "nodes: name the nodes, as \"gpu[001-064]\" or a list");
		return;
	}
	json_t *users = json_object_get(body, "users");
	if (users) {
		json_t *tmp = json_pack("{s:s, s:I, s:I, s:O}", "name", "x", "start_ms",
					(json_int_t)w.start_ms, "end_ms", (json_int_t)w.end_ms,
					"users", users);
		struct node_window u;
		int rc = node_window_unpack(tmp, &u, &err);
		json_decref(tmp);
		if (rc < 0) {
			reply_error(r, 400, "%s", err.text);
			return;
		}
		snprintf(w.users, sizeof(w.users), "%s", u.users);
	}
	if (w.queue[0] && !state_queue(st, w.queue)) {
		reply_error(r, 400, "queue: no queue \"%.64s\" (tenk queues lists them)", w.queue);
		return;
	}
	if (w.name[0] && !model_name_valid(w.name)) {
		reply_error(r, 400, "name \"%.64s\": use letters, digits, '.', '_', '-'", w.name);
		return;
	}
	for (int k = 1; !w.name[0]; k++) {
		char name[32];
		snprintf(name, sizeof(name), "resv%d", k);
		if (!state_window(st, name))
			snprintf(w.name, sizeof(w.name), "%s", name);
	}
	snprintf(w.by, sizeof(w.by), "%s", r->user);
	w.made_ms = now;
	char **names = NULL;
	int nnames = 0;
	if (model_hostlist_parse(spec, 100000, &names, &nnames, &err) < 0) {
		reply_error(r, 400, "nodes: %s", err.text);
		return;
	}
	struct snode **on = xcalloc((size_t)nnames + 1, sizeof(*on));
	struct strbuf why;
	strbuf_init(&why);
	int n = 0;
	for (int i = 0; i < nnames; i++) {
		struct snode *x = state_node(st, names[i]);
		if (!x) {
			reply_error(r, 404, "nodes: no node \"%.64s\" (tenk nodes lists them)",
				    names[i]);
			goto out;
		}
		bool dup = false;
		for (int k = 0; k < n && !dup; k++)
			dup = on[k] == x;
		if (!dup)
			on[n++] = x;
	}
	int rc = state_window_add(st, &w, on, n, &why);
	if (rc < 0) {
		reply_error(r, 409, "%s", why.buf);
		goto out;
	}
	log_info("reservation %s by %s: %d node%s, %s", w.name, r->user, n, n == 1 ? "" : "s",
		 w.reason);
	reply_json(r, 201, state_window_pack(st, state_window(st, w.name), now));
out:
	strbuf_release(&why);
	free(on);
	for (int i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
}

static void h_reservation_delete(struct request *r, const char *param, json_t *body)
{
	struct state *st = &r->s->st;
	if (!state_window(st, param)) {
		reply_error(r, 404, "no reservation \"%.64s\" (tenk reservations lists them)",
			    param);
		return;
	}
	int n = state_window_delete(st, param, server_now_ms(r->s));
	reply_json(r, 200, json_pack("{s:s, s:i}", "deleted", param, "nodes", n));
}

static void h_user_del(struct request *r, const char *param, json_t *body)
{
	struct suser *u = tk_map_get(&r->s->st.user_by_name, param);
	if (!u) {
		reply_error(r, 404, "no user \"%.64s\"", param);
		return;
	}
	state_user_del(&r->s->st, u);
	reply_json(r, 200, json_pack("{s:s}", "removed", param));
}

const struct route api_routes[] = {
	{"GET", "/v1/health", ROLE_NONE, h_health, false},
	{"GET", "/", ROLE_NONE, h_ui, false},
	{"GET", "/ui.js", ROLE_NONE, h_ui, false},
	{"GET", "/ui.css", ROLE_NONE, h_ui, false},
	{"POST", "/v1/login", ROLE_NONE, h_login, true},
	{"POST", "/v1/logout", ROLE_NONE, h_logout, false},
	{"GET", "/v1/utilization", ROLE_VIEWER, h_utilization, false},
	{"GET", "/metrics", ROLE_VIEWER, h_metrics, false},
	{"GET", "/v1/accounting", ROLE_VIEWER, h_accounting, false},
	{"GET", "/v1/usage", ROLE_VIEWER, h_usage, false},
	{"GET", "/v1/catalogue", ROLE_VIEWER, h_catalogue, false},
	{"GET", "/v1/classes", ROLE_VIEWER, h_classes, false},
	{"GET", "/v1/pools", ROLE_VIEWER, h_pools, false},
	{"GET", "/v1/queues", ROLE_VIEWER, h_queues, false},
	{"PUT", "/v1/queues/{}", ROLE_OPERATOR, h_queue_set, true},
	{"GET", "/v1/users", ROLE_ADMIN, h_users, false},
	{"GET", "/v1/audit", ROLE_ADMIN, h_audit, false},
	{"GET", "/v1/config", ROLE_VIEWER, config_h_show, false},
	{"GET", "/v1/config/history", ROLE_VIEWER, config_h_history, false},
	{"PUT", "/v1/config", ROLE_ADMIN, config_h_apply, true},
	{"PATCH", "/v1/config", ROLE_ADMIN, config_h_change, true},
	{"POST", "/v1/config/rollback", ROLE_ADMIN, config_h_rollback, true},
	{"GET", "/v1/rollouts", ROLE_VIEWER, rollout_h_list, false},
	{"POST", "/v1/rollouts", ROLE_ADMIN, rollout_h_create, true},
	{"GET", "/v1/rollouts/{}", ROLE_VIEWER, rollout_h_show, false},
	{"POST", "/v1/rollouts/{}/pause", ROLE_ADMIN, rollout_h_pause, false},
	{"POST", "/v1/rollouts/{}/resume", ROLE_ADMIN, rollout_h_resume, false},
	{"POST", "/v1/rollouts/{}/abort", ROLE_ADMIN, rollout_h_abort, false},
	{"POST", "/v1/rollouts/{}/rollback", ROLE_ADMIN, rollout_h_rollback, false},
	{"GET", "/v1/services", ROLE_VIEWER, services_h_list, false},
	{"POST", "/v1/services", ROLE_USER, services_h_create, true},
	{"GET", "/v1/services/{}", ROLE_VIEWER, services_h_show, false},
	{"GET", "/v1/services/{}/endpoints", ROLE_VIEWER, services_h_endpoints, false},
	{"POST", "/v1/services/{}/scale", ROLE_USER, services_h_scale, true},
	{"POST", "/v1/services/{}/update", ROLE_USER, services_h_update, true},
	{"DELETE", "/v1/services/{}", ROLE_USER, services_h_delete, false},
	{"POST", "/v1/users", ROLE_ADMIN, h_user_add, true},
	{"DELETE", "/v1/users/{}", ROLE_ADMIN, h_user_del, false},
	{"POST", "/v1/jobs", ROLE_USER, h_submit, true},
	{"GET", "/v1/jobs", ROLE_VIEWER, h_jobs_list, false},
	{"GET", "/v1/jobs/{}", ROLE_VIEWER, h_job_show, false},
	{"POST", "/v1/jobs/{}/cancel", ROLE_USER, h_job_cancel, false},
	{"POST", "/v1/jobs/{}/hold", ROLE_USER, h_job_hold, false},
	{"POST", "/v1/jobs/{}/release", ROLE_USER, h_job_release, false},
	{"POST", "/v1/jobs/{}/requeue", ROLE_USER, h_job_requeue, false},
	{"POST", "/v1/jobs/{}/update", ROLE_USER, h_job_update, true},
	{"GET", "/v1/jobs/{}/checkpoints", ROLE_VIEWER, h_job_checkpoints, false},
	{"GET", "/v1/jobs/{}/logs", ROLE_VIEWER, h_job_logs, false},
	{"GET", "/v1/jobs/{}/pty", ROLE_USER, h_job_pty, false},
	{"GET", "/v1/nodes", ROLE_VIEWER, h_nodes_list, false},
	{"POST", "/v1/nodes/{}/admit", ROLE_ADMIN, h_node_admit, false},
	{"POST", "/v1/nodes/{}/revoke", ROLE_ADMIN, h_node_revoke, false},
	{"GET", "/v1/images", ROLE_VIEWER, h_images, false},
	{"POST", "/v1/images/pull", ROLE_OPERATOR, h_images_pull, true},
	{"GET", "/v1/nodes/{}", ROLE_VIEWER, h_node_show, false},
	{"POST", "/v1/nodes/{}/drain", ROLE_OPERATOR, h_node_drain, true},
	{"POST", "/v1/nodes/{}/resume", ROLE_OPERATOR, h_node_resume, false},
	{"POST", "/v1/nodes/{}/labels", ROLE_OPERATOR, h_node_labels, true},
	{"POST", "/v1/nodes/{}/taints", ROLE_OPERATOR, h_node_taints, true},
	{"POST", "/v1/nodes/{}/down", ROLE_OPERATOR, h_node_down, false},
	{"GET", "/v1/reservations", ROLE_VIEWER, h_reservations, false},
	{"GET", "/v1/reservations/{}", ROLE_VIEWER, h_reservation_show, false},
	{"POST", "/v1/reservations", ROLE_OPERATOR, h_reservation_create, true},
	{"DELETE", "/v1/reservations/{}", ROLE_OPERATOR, h_reservation_delete, false},
	{"POST", "/v1/validations", ROLE_OPERATOR, h_validate_create, true},
	/* its own token (the run's), checked by the handler */
	{"POST", "/v1/validations/{}/report", ROLE_NONE, h_validate_report, true},
	{"POST", "/v1/agent/register", ROLE_AGENT, h_agent_register, true},
	{"POST", "/v1/agent/heartbeat", ROLE_AGENT, h_agent_heartbeat, true},
	{"GET", "/v1/agent/work", ROLE_AGENT, h_agent_work, false},
	{"POST", "/v1/agent/events", ROLE_AGENT, h_agent_events, true},
	{"POST", "/v1/agent/logs", ROLE_AGENT, h_agent_logs, true},
	{"GET", "/v1/agent/pty", ROLE_AGENT, h_agent_pty, false},
};

const size_t api_nroutes = ARRAY_SIZE(api_routes);
