/*
 * Standby servers. Several servers may share one PostgreSQL store; the one
 * holding its lease (store.h: a row, by the database's clock) is active:
 * it loads the state, schedules, answers, and is the only one whose
 * batches commit, for every batch renews the lease in its own transaction
 * and fails, writing nothing, once another server took it over. The
 * others are standbys: they keep a warm copy of the state (warm.c: read
 * whole at start, then what the active committed since, at every poll),
 * answer /v1/health with their role and every other request with a
 * redirect to the active (307; 503 while none is), and ask for the lease
 * every SERVER_STANDBY_POLL_MS. When the active stops renewing (dead,
 * stopped, cut off from the database) its lease lapses after
 * SERVER_LEASE_MS and a standby takes it, reads the last changes, loads
 * the state from its copy (from the store, where the copy does not count
 * as the store does) and schedules.
 *
 *   start --take--> ACTIVE --batch fails -ENOLCK--> exits (75): started
 *     |                ^                            again, a standby
 *     +--busy--> STANDBY --poll: lapsed, taken--+
 *
 * A lease rather than a session's advisory lock: a server that hangs
 * (SIGSTOP, a stalled disk) keeps its session and would keep the lock;
 * its lease lapses. The row's lock, held by each batch's renewal to its
 * commit, is what fences: no takeover falls between a batch's check and
 * its commit.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

static void poll_cb(uv_timer_t *t);

/* The warm copy brought up to date; a failure is said once until a read
 * succeeds again (the copy's age tells the takeover whether to use it). */
static void follow(struct server *s)
{
	struct tk_error err;
	int64_t t0 = tk_mono_ms();
	bool first = warm_age_ms(s->role.warm) < 0;
	if (warm_follow(s->role.warm, s->store, NULL, &err) < 0) {
		if (!s->role.warm_failing)
			log_warn("standby: cannot follow the store's changes: %s", err.text);
		s->role.warm_failing = true;
		return;
	}
	if (s->role.warm_failing || first)
		log_info("standby: its copy of the state holds %lld jobs%s (read in %lld ms)",
			 (long long)warm_jobs(s->role.warm),
			 s->role.warm_failing ? ", following the store again" : "",
			 (long long)(tk_mono_ms() - t0));
	s->role.warm_failing = false;
}

/* The copy, up to date under the lease, to load from; NULL (and said why)
 * when it does not hold what the store does: the store is loaded then. */
static struct warm *warm_for_takeover(struct server *s)
{
	struct warm *w = s->role.warm;
	s->role.warm = NULL;
	struct store_counts n;
	struct tk_error err;
	char why[sizeof(err.text)];
	if (warm_follow(w, s->store, &n, &err) < 0)
		snprintf(why, sizeof(why), "%s", err.text);
	else if (warm_ready(w, &n, why, sizeof(why)))
		return w;
	log_warn("taking over: its copy of the state is not used (%s); loading the store", why);
	warm_destroy(w);
	return NULL;
}

static void become_active(struct server *s, const struct store_lease *l)
{
	s->role.standby = false;
	s->role.leased = true;
	s->role.term = l->term;
	s->role.seen = *l;
	s->role.lease_beat_mono = tk_mono_ms();
	store_lease_hold(s->store, s->epoch, l->term, SERVER_LEASE_MS);
}

int server_role_start(struct server *s, struct tk_error *err)
{
	struct store_lease l;
	int r = store_lease_take(s->store, s->epoch, s->url, SERVER_LEASE_MS, &l, err);
	if (r < 0 && r != -EBUSY)
		return r;
	s->role.since_mono = tk_mono_ms();
	uv_timer_init(s->loop, &s->role.poll);
	s->role.poll.data = s;
	s->role.poll_init = true;
	s->open_handles++;
	if (r == 0) {
		become_active(s, &l);
		log_info("active: this server holds the store's lease (term %lld)",
			 (long long)l.term);
		return 1;
	}
	s->role.standby = true;
	s->role.seen = l;
	log_info("standby: %s is active (term %lld); this server takes over when its lease "
		 "lapses",
		 l.url, (long long)l.term);
	s->role.warm = warm_create();
	follow(s);
	uv_timer_start(&s->role.poll, poll_cb, SERVER_STANDBY_POLL_MS, SERVER_STANDBY_POLL_MS);
	return 0;
}

static void poll_cb(uv_timer_t *t)
{
	struct server *s = t->data;
	if (!s->role.standby || s->stopping)
		return;
	struct store_lease l;
	struct tk_error err;
	int r = store_lease_take(s->store, s->epoch, s->url, SERVER_LEASE_MS, &l, &err);
	if (r == -EBUSY) {
		if (l.term != s->role.seen.term)
			log_info("standby: %s is active now (term %lld)", l.url, (long long)l.term);
		s->role.seen = l;
		follow(s);
		return;
	}
	if (r < 0) {
		log_warn("standby: cannot read the store's lease: %s", err.text);
		return;
	}
	int64_t t0 = tk_mono_ms();
	log_info("taking over: the lease of %s lapsed; this server holds it (term %lld) and loads "
		 "the state",
		 s->role.seen.url[0] ? s->role.seen.url : "the last active server",
		 (long long)l.term);
	uv_timer_stop(&s->role.poll);
	become_active(s, &l);
	struct warm *w = warm_for_takeover(s);
	bool warm = w != NULL;
	r = s->role.activate(s, w, &err);
	warm_destroy(w);
	if (r < 0) {
		/* what it holds is half loaded: it must not serve it */
		log_err("taking over failed: %s; stopping", err.text);
		fflush(stderr);
		_exit(70);
	}
	log_info("active after %lld ms as a standby: %zu jobs and %d nodes loaded in %lld ms "
		 "from %s",
		 (long long)(t0 - s->role.since_mono), s->st.njobs, s->st.nnodes,
		 (long long)(tk_mono_ms() - t0), warm ? "its warm copy" : "the store");
	s->role.since_mono = tk_mono_ms();
}

void server_role_beat(struct server *s, bool writer_idle)
{
	/* an empty batch renews the lease when nothing else did lately */
	if (s->role.leased && writer_idle &&
	    tk_mono_ms() - s->role.lease_beat_mono >= SERVER_LEASE_MS / 3)
		server_write_empty(s);
}

/* "?a=b&c=d" of the request, escaped again. */
static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key,
			       const char *value)
{
	struct strbuf *sb = cls;
	(void)kind;
	strbuf_addch(sb, sb->len ? '&' : '?');
	const char *parts[2] = {key, value};
	for (int i = 0; i < 2 && parts[i]; i++) {
		if (i)
			strbuf_addch(sb, '=');
		for (const unsigned char *p = (const unsigned char *)parts[i]; *p; p++) {
			if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= '0' && *p <= '9') || strchr("-._~", *p))
				strbuf_addch(sb, (char)*p);
			else
				strbuf_addf(sb, "%%%02X", *p);
		}
	}
	return MHD_YES;
}

bool server_standby_answer(struct request *r)
{
	struct server *s = r->s;
	if (!s->role.standby)
		return false;
	r->ungated = true;
	const struct store_lease *l = &s->role.seen;
	/* (an active at this server's own address is a dead one: a lease not
	 * yet lapsed, of the process that served here before) */
	bool known = l->url[0] && l->remaining_ms > 0 && strcmp(l->holder, s->epoch) != 0 &&
		     strcmp(l->url, s->url) != 0;
	if (strcmp(r->url, "/v1/health") == 0 && strcmp(r->method, "GET") == 0) {
		/* its copy of the state: jobs held, ms since it was brought up
		 * to date */
		json_t *copy = s->role.warm
				       ? json_pack("{s:I, s:I}", "jobs",
						   (json_int_t)warm_jobs(s->role.warm), "age_ms",
						   (json_int_t)warm_age_ms(s->role.warm))
				       : NULL;
		reply_json(r, 200,
			   json_pack("{s:s, s:s?, s:I, s:I, s:o?}", "role", "standby", "active",
				     known ? l->url : NULL, "term", (json_int_t)l->term,
				     "standby_ms", (json_int_t)(tk_mono_ms() - s->role.since_mono),
				     "copy", copy));
		return true;
	}
	if (strcmp(r->url, "/metrics") == 0 && strcmp(r->method, "GET") == 0) {
		struct strbuf b;
		strbuf_init(&b);
		metrics_role(s, &b);
		reply_text(r, 200, strbuf_detach(&b), "text/plain; version=0.0.4; charset=utf-8");
		return true;
	}
	if (!known) {
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "this server is a standby and no server is active now; one takes over "
			 "within %d s: try again",
			 SERVER_LEASE_MS / 1000 + 2);
		reply_json(r, 503,
			   json_pack("{s:s, s:i, s:s}", "error", msg, "status", 503, "role",
				     "standby"));
		MHD_add_response_header(r->resp, "Retry-After", "1");
		return true;
	}
	struct strbuf q;
	strbuf_init(&q);
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_arg, &q);
	char *loc = xasprintf("%s%s%s", l->url, r->url, q.len ? q.buf : "");
	strbuf_release(&q);
	reply_json(r, 307,
		   json_pack("{s:s, s:i, s:s, s:s}", "error",
			     "this server is a standby: ask the "
			     "active server",
			     "status", 307, "role", "standby", "active", l->url));
	MHD_add_response_header(r->resp, MHD_HTTP_HEADER_LOCATION, loc);
	free(loc);
	return true;
}
