/*
 * The server's life: start-up (data folder, lock, tokens, catalogue, store,
 * listener), the per-iteration check that schedules and group-commits, the
 * periodic cron, and an orderly stop.
 *
 * Group commit: changes accumulate as dirty jobs and nodes. At the end of a
 * loop iteration (uv_check) they are serialised into one store batch and
 * handed to a writer in libuv's thread pool, so the loop never waits for
 * fsync; batches that queue up while a commit runs go in the next one
 * together. Answers wait at the gate in http.c until the batch holding their
 * changes has committed.
 */
#include "internal.h"

#include <signal.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

void server_config_init(struct server_config *c)
{
	memset(c, 0, sizeof(*c));
	c->data_dir = "tenk-data";
	c->listen = "127.0.0.1:7480";
	c->node_timeout_ms = 30000;
	c->longpoll_ms = 25000;
	c->max_node_requeues = 5;
	c->keep_settled_ms = 300000;
	c->request_timeout_ms = 30000;
}

static_assert(SERVER_MASTER_PORTS == STATE_PORT_COUNT, "the range the state keeps");

int server_meta_list_load(struct server *s, const char *key, json_t **ret, struct tk_error *err)
{
	char *text = NULL;
	int r = store_meta_get(s->store, key, &text, err);
	if (r == -ENOENT) {
		*ret = json_array();
		return 0;
	}
	if (r < 0)
		return r;
	json_t *arr = json_loads(text, 0, NULL);
	free(text);
	if (!json_is_array(arr)) {
		json_decref(arr);
		return tk_errorf(err, -EBADMSG, "store: meta \"%s\" is not a JSON list", key);
	}
	*ret = arr;
	return 0;
}

void server_meta_list_save(struct server *s, const char *key, json_t *arr)
{
	char *text = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	store_batch_put_meta(s->fill.batch, key, text);
	free(text);
	s->st.seq_applied++; /* an answer that tells of it waits for its write */
}

int64_t server_now_ms(const struct server *s)
{
	(void)s;
	return tk_wall_ms();
}

/* ---- group commit -------------------------------------------------------------- */

/*
 * The writer. The loop hands each iteration's batch to a queue; one work item
 * in libuv's pool drains it, merging whatever is queued into one transaction,
 * and reports each commit back through an async handle. A new batch never
 * waits for the loop to learn that the previous one committed, so commits run
 * back to back under load.
 */
struct pending {
	struct store_batch *batch;
	uint64_t seq;
	struct pending *next;
};

static void fatal_store(struct server *s)
{
	if (s->wq.failed_code == -ENOLCK) {
		/* another server is active: nothing of this one's was written
		 * since, and nothing it holds may be answered */
		log_err("this server is no longer the active one (%s); it stops at once, having "
			"written nothing since; started again, it is a standby",
			s->wq.err.text);
		fflush(stderr);
		_exit(75);
	}
	/* Memory and disk now disagree; answering anything could acknowledge what
	 * is not durable. Stop at once: a restart reloads the durable state. */
	log_err("store write failed, stopping at once: %s", s->wq.err.text);
	fflush(stderr);
	_exit(70);
}

/* A write that failed for what can mend (a full or read-only disk, a
 * file's permissions, a lock) is tried again; anything else stops the
 * server (a journal removed: store.h's -ESTALE). */
static bool store_retryable(int r)
{
	return r == -ENOSPC || r == -EDQUOT || r == -EIO || r == -EACCES || r == -EROFS ||
	       r == -EBUSY || r == -EAGAIN || r == -ENOMEM;
}

static void writer_work_cb(uv_work_t *w)
{
	struct server *s = w->data;
	for (;;) {
		uv_mutex_lock(&s->wq.mu);
		struct pending *list = s->wq.queued;
		s->wq.queued = s->wq.queued_tail = NULL;
		if (!list)
			s->wq.active = false;
		uv_mutex_unlock(&s->wq.mu);
		if (!list)
			return;
		/* one transaction for everything that queued up meanwhile */
		struct pending *last = list;
		for (struct pending *p = list->next; p; p = p->next) {
			store_batch_move(list->batch, p->batch);
			last = p;
		}
		int64_t t0 = tk_mono_us();
		int r = store_apply(s->store, list->batch, &s->wq.err);
		int64_t took = tk_mono_us() - t0;
		uv_mutex_lock(&s->wq.mu);
		if (r < 0 && store_retryable(r)) {
			/* nothing of it is durable: it goes back first in line, for
			 * the loop to try again (store_failed) */
			s->wq.failed_retry = true;
			last->next = s->wq.queued;
			s->wq.queued = list;
			if (!s->wq.queued_tail)
				s->wq.queued_tail = last;
			s->wq.active = false;
			uv_mutex_unlock(&s->wq.mu);
			uv_async_send(&s->wq.async);
			return;
		}
		if (r < 0) {
			s->wq.failed = true;
			s->wq.failed_code = r;
		}
		s->wq.stats_commits++;
		s->wq.stats_commit_us += (uint64_t)took;
		tk_hist_observe(&s->wq.commit_hist, metrics_commit_bounds, metrics_commit_nbounds,
				(double)took / 1e6);
		last->next = s->wq.done;
		s->wq.done = list; /* reversed order does not matter: seqs are maxed */
		uv_mutex_unlock(&s->wq.mu);
		uv_async_send(&s->wq.async);
	}
}

static void writer_after_cb(uv_work_t *w, int status)
{
	free(w);
}

static void finish_stop(struct server *s);
static void writer_start(struct server *s);

static void store_retry_cb(uv_timer_t *t)
{
	struct server *s = t->data;
	writer_start(s);
}

/* A write failed and was put back: changes are refused until one goes
 * through (http.c), the pass waits, and the writer tries again each
 * SERVER_STORE_RETRY_MS. Running jobs go on: heartbeats are answered. */
static void store_failed(struct server *s, const char *why)
{
	s->store_failures++;
	snprintf(s->store_down_why, sizeof(s->store_down_why), "%s", why);
	if (!s->store_down) {
		s->store_down = true;
		s->store_down_mono = tk_mono_ms();
		log_err("the store cannot be written: %s; changes are refused (503) until it can, "
			"and the write is tried again every %d ms; running jobs go on",
			why, SERVER_STORE_RETRY_MS);
	} else if ((s->store_failures % 60) == 0) {
		log_err("the store still cannot be written after %lld s: %s",
			(long long)((tk_mono_ms() - s->store_down_mono) / 1000), why);
	}
	if (s->stopping) {
		/* a stop does not wait for a disk that may never mend: what
		 * was not written was not acknowledged either */
		log_err("stopping with changes unwritten (none was acknowledged)");
		s->wq.outstanding = 0;
		finish_stop(s);
		return;
	}
	uv_timer_start(&s->store_retry, store_retry_cb, SERVER_STORE_RETRY_MS, 0);
}

static void store_mended(struct server *s)
{
	log_info("the store takes writes again, after %lld s; changes are taken again",
		 (long long)((tk_mono_ms() - s->store_down_mono) / 1000));
	s->store_down = false;
	s->store_down_why[0] = '\0';
	state_want_pass(&s->st);
	server_kick(s);
}

/* Back on the loop: what committed is durable; answers waiting for it go. */
static void writer_done_cb(uv_async_t *h)
{
	struct server *s = h->data;
	uv_mutex_lock(&s->wq.mu);
	struct pending *done = s->wq.done;
	s->wq.done = NULL;
	bool failed = s->wq.failed, retry = s->wq.failed_retry;
	s->wq.failed_retry = false;
	char why[sizeof(s->wq.err.text)];
	snprintf(why, sizeof(why), "%s", s->wq.err.text);
	uv_mutex_unlock(&s->wq.mu);
	if (failed)
		fatal_store(s);
	if (retry)
		store_failed(s, why);
	else if (done && s->store_down)
		store_mended(s);
	while (done) {
		struct pending *p = done;
		done = p->next;
		if (p->seq > s->seq_durable)
			s->seq_durable = p->seq;
		store_batch_destroy(p->batch);
		free(p);
		s->wq.outstanding--;
	}
	api_arrays_kick(s);
	http_release_gate(s);
	if (s->stopping && s->wq.outstanding == 0)
		finish_stop(s);
}

/* Moves every dirty object into a new batch. */
static struct store_batch *take_dirty(struct server *s)
{
	struct store_batch *b = store_batch_create();
	struct state *st = &s->st;
	for (struct sjob *j = st->dirty_jobs, *next; j; j = next) {
		next = j->dirty_next;
		j->dirty = false;
		j->dirty_next = NULL;
		json_t *doc = job_pack(&j->job);
		int64_t settled = state_job_settled_ms(j);
		store_batch_put_job(b, j->job.id, job_state_name(j->job.state), j->job.owner,
				    settled, json_dumps(doc, JSON_COMPACT));
		json_decref(doc);
		if (settled && !j->job.system) /* written with it: read once it leaves */
			acct_put(s, j, b);
		state_job_written(st, j, st->seq_applied, st->mono_ms);
	}
	st->dirty_jobs = NULL;
	st->ndirty_jobs = 0;
	for (struct snode *n = st->dirty_nodes, *next; n; n = next) {
		next = n->dirty_next;
		n->dirty = false;
		n->dirty_next = NULL;
		json_t *doc = node_record_pack(&n->rec);
		store_batch_put_node(b, n->rec.inv.name, json_dumps(doc, JSON_COMPACT));
		json_decref(doc);
	}
	st->dirty_nodes = NULL;
	for (struct squeue *q = st->dirty_queues, *next; q; q = next) {
		next = q->dirty_next;
		q->dirty = false;
		q->dirty_next = NULL;
		json_t *doc = queue_spec_pack(&q->spec);
		store_batch_put_queue(b, q->spec.name, json_dumps(doc, JSON_COMPACT));
		json_decref(doc);
	}
	st->dirty_queues = NULL;
	for (struct suser *u = st->dirty_users, *next; u; u = next) {
		next = u->dirty_next;
		u->dirty = false;
		u->dirty_next = NULL;
		if (u->deleted) {
			store_batch_del_user(b, u->rec.name);
			free(u);
			continue;
		}
		json_t *doc = user_record_pack(&u->rec);
		store_batch_put_user(b, u->rec.name, json_dumps(doc, JSON_COMPACT));
		json_decref(doc);
	}
	st->dirty_users = NULL;
	audit_take(s, b);
	store_batch_move(b, s->fill.batch);
	return b;
}

static bool anything_dirty(const struct server *s)
{
	return s->st.dirty_jobs || s->st.dirty_nodes || s->st.dirty_queues || s->st.dirty_users ||
	       audit_waiting(s) || store_batch_len(s->fill.batch) > 0;
}

static void enqueue(struct server *s, struct store_batch *b)
{
	struct pending *p = xcalloc(1, sizeof(*p));
	p->batch = b;
	p->seq = s->st.seq_applied;
	s->role.lease_beat_mono = tk_mono_ms();
	s->wq.outstanding++;
	uv_mutex_lock(&s->wq.mu);
	if (s->wq.queued_tail)
		s->wq.queued_tail->next = p;
	else
		s->wq.queued = p;
	s->wq.queued_tail = p;
	uv_mutex_unlock(&s->wq.mu);
	if (!s->store_down) /* (a failing store is tried on its timer) */
		writer_start(s);
}

/* Hands what changed to the writer. (What grows with a request changes
 * a bounded number of jobs an iteration, arrays.c, so that packing them
 * here stays short.) */
static void flush_start(struct server *s)
{
	if (anything_dirty(s))
		enqueue(s, take_dirty(s));
}

void server_write_empty(struct server *s)
{
	enqueue(s, store_batch_create());
}

/* Has the writer take what is queued, unless it runs. */
static void writer_start(struct server *s)
{
	uv_mutex_lock(&s->wq.mu);
	bool start = !s->wq.active && s->wq.queued;
	if (start)
		s->wq.active = true;
	uv_mutex_unlock(&s->wq.mu);
	if (start) {
		uv_work_t *w = xcalloc(1, sizeof(*w));
		w->data = s;
		int r = uv_queue_work(s->loop, w, writer_work_cb, writer_after_cb);
		if (r < 0) {
			tk_errorf(&s->wq.err, r, "queueing the write: %s", uv_strerror(r));
			fatal_store(s);
		}
	}
}

/* Writes what is dirty on the calling thread: only when no writer runs. */
static void flush_sync(struct server *s)
{
	if (!anything_dirty(s))
		return;
	struct store_batch *b = take_dirty(s);
	int r = store_apply(s->store, b, &s->wq.err);
	store_batch_destroy(b);
	if (r < 0)
		fatal_store(s);
	s->seq_durable = s->st.seq_applied;
}

/* End of every loop iteration: schedule once for everything that happened,
 * then write it all in one batch. */
static void kick_idle_cb(uv_idle_t *h)
{
	(void)h; /* its being active is the point: the poll phase does not wait */
}

void server_kick(struct server *s)
{
	if (!uv_is_active((uv_handle_t *)&s->kick_idle) && !s->stopping)
		uv_idle_start(&s->kick_idle, kick_idle_cb);
}

/* How long the iteration that ends now held the loop (its time less what
 * it waited for I/O). */
static void loop_busy(struct server *s)
{
	uint64_t now = uv_hrtime(), idle = uv_metrics_idle_time(s->loop);
	if (s->metrics.loop_last_ns) {
		uint64_t all = now - s->metrics.loop_last_ns;
		uint64_t waited = idle - s->metrics.loop_last_idle_ns;
		uint64_t busy = all > waited ? all - waited : 0;
		tk_hist_observe(&s->metrics.loop_busy, metrics_pass_bounds, metrics_pass_nbounds,
				(double)busy / 1e9);
		if (busy > s->metrics.loop_busy_max_ns)
			s->metrics.loop_busy_max_ns = busy;
		if (busy >= SERVER_LOOP_WARN_MS * 1000000ull)
			log_warn("the server's loop was held %llu ms in one iteration",
				 (unsigned long long)(busy / 1000000));
	}
	s->metrics.loop_last_ns = now;
	s->metrics.loop_last_idle_ns = idle;
}

static void check_cb(uv_check_t *h)
{
	struct server *s = h->data;
	loop_busy(s);
	/* (stopped first: a standby kicked by a request would otherwise spin) */
	uv_idle_stop(&s->kick_idle);
	if (s->role.standby)
		return;
	state_judge_arrivals(&s->st, server_now_ms(s));
	if (s->st.sched_needed && !s->stopping && !s->store_down) {
		int64_t t0 = tk_mono_us();
		bool more = state_schedule(&s->st, server_now_ms(s));
		s->last_pass_us = tk_mono_us() - t0;
		if (more)
			server_kick(s);
		tk_hist_observe(&s->metrics.pass, metrics_pass_bounds, metrics_pass_nbounds,
				(double)s->last_pass_us / 1e6);
	}
	if (s->st.services_more && !s->stopping) {
		s->st.services_more = false;
		services_tick(s, server_now_ms(s));
	}
	if (s->st.services_dirty)
		services_sync(s);
	state_flush_work(&s->st);
	if (s->seq_durable == s->st.seq_applied && s->gate.head)
		http_release_gate(s);
	flush_start(s);
}

static void cron_cb(uv_timer_t *t)
{
	struct server *s = t->data;
	if (s->role.standby)
		return;
	uv_mutex_lock(&s->wq.mu);
	bool writer_idle = !s->wq.active && !s->wq.queued;
	uv_mutex_unlock(&s->wq.mu);
	if (!s->store_down && !s->stopping)
		server_role_beat(s, writer_idle);
	int64_t now = server_now_ms(s), mono = tk_mono_ms();
	s->st.now_ms = now;
	s->st.mono_ms = mono;
	/* settled jobs written durably and kept long enough leave memory (a
	 * bounded number a tick: a first start after an upgrade may rewrite
	 * every job at once) */
	struct sjob *j;
	int64_t until = tk_mono_us() + SERVER_EVICT_BUDGET_US;
	for (int n = 0; n < SERVER_EVICT_PER_TICK && (n % 64 || tk_mono_us() < until) &&
			(j = state_evict_next(&s->st, s->seq_durable, mono));
	     n++) {
		acct_job_leaves(s, j);
		state_evict(&s->st, j);
	}
	acct_fill_work(s);
	server_retain_tick(s);
	state_queues_age(&s->st, now);
	state_check_nodes(&s->st, now, mono);
	state_check_stalls(&s->st, now);
	state_windows_tick(&s->st, now);
	rollout_tick(s, now);
	services_tick(s, now);
	if (s->st.wake_ms && now >= s->st.wake_ms) /* a job's begin time came */
		state_want_pass(&s->st);
	state_judge_arrivals(&s->st, now); /* a deferred pass that is due */
	server_kick(s);
	if (!s->metrics.sample_mono || mono - s->metrics.sample_mono >= UI_SAMPLE_MS) {
		s->metrics.sample_mono = mono;
		ui_sample(s);
	}
	if (mono - s->metrics.budgets_mono >= SERVER_BUDGET_MS) {
		s->metrics.budgets_mono = mono;
		acct_budgets(s);
	}
	for (struct request *r = s->longpolls, *next; r; r = next) {
		next = r->lp_next;
		if (r->deadline_ms <= mono)
			api_longpoll_expired(r);
	}
	ptys_sweep(s, mono);
}

/* ---- start-up ---------------------------------------------------------------- */

static int lock_data_dir(struct server *s, struct tk_error *err)
{
	_cleanup_free_ char *path = xasprintf("%s/server.lock", s->data_dir);
	s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (s->lock_fd < 0)
		return tk_errorf(err, -errno, "cannot open %s: %s", path, strerror(errno));
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		return tk_errorf(err, -e,
				 "another tenk server is using %s (%s); stop it or choose another "
				 "--data folder",
				 s->data_dir, strerror(e));
	}
	return 0;
}

/* DATA holds the tokens and every job's request: the server's alone,
 * 0700, and what is in it 0600 (folders 0700), whatever the modes were. */
static void close_data_dir(struct server *s)
{
	struct stat st;
	if (stat(s->data_dir, &st) == 0 && (st.st_mode & 0777) != 0700) {
		log_warn("data folder %s was %03o: now 0700", s->data_dir,
			 (unsigned)(st.st_mode & 0777));
		chmod(s->data_dir, 0700);
	}
	DIR *d = opendir(s->data_dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		mode_t want = S_ISDIR(st.st_mode) ? 0700 : S_ISREG(st.st_mode) ? 0600 : 0;
		if (want && (st.st_mode & 0777) != want && st.st_uid == geteuid())
			fchmodat(dirfd(d), de->d_name, want, 0);
	}
	closedir(d);
}

/* Reads DATA/NAME.token, creating it with a fresh random token first. */
static int load_token(struct server *s, const char *name, char *buf, size_t n, struct tk_error *err)
{
	_cleanup_free_ char *path = xasprintf("%s/%s.token", s->data_dir, name);
	char *text = NULL;
	int r = tk_read_file(path, 4096, &text, NULL);
	if (r == -ENOENT) {
		char tok[65];
		if ((r = tk_random_hex(tok, 32)) < 0)
			return tk_errorf(err, r, "cannot read random bytes: %s", strerror(-r));
		char line[80];
		int len = snprintf(line, sizeof(line), "%s\n", tok);
		if ((r = tk_write_file(path, line, (size_t)len, 0600)) < 0)
			return tk_errorf(err, r, "cannot write %s: %s", path, strerror(-r));
		return tk_strlcpy(buf, tok, n);
	}
	if (r < 0)
		return tk_errorf(err, r, "cannot read %s: %s", path, strerror(-r));
	tk_strip(text);
	if (strlen(text) < 16 || tk_strlcpy(buf, text, n) < 0) {
		free(text);
		return tk_errorf(err, -EINVAL, "%s: a token must be 16 to %zu characters", path,
				 n - 1);
	}
	free(text);
	return 0;
}

static int load_catalogue(struct server *s, struct tk_error *err)
{
	catalogue_init(&s->cat);
	_cleanup_free_ char *fallback = xasprintf("%s/catalogue.json", s->data_dir);
	const char *path = s->cfg.catalogue_path ? s->cfg.catalogue_path : fallback;
	char *text = NULL;
	int r = tk_read_file(path, 1024 * 1024, &text, NULL);
	if (r == -ENOENT && !s->cfg.catalogue_path)
		return 0;
	if (r < 0)
		return tk_errorf(err, r, "cannot read catalogue %s: %s", path, strerror(-r));
	struct tk_error e;
	r = catalogue_load_json(&s->cat, text, &e);
	free(text);
	if (r < 0)
		return tk_errorf(err, r, "catalogue %s: %s", path, e.text);
	log_info("catalogue overrides loaded from %s", path);
	return 0;
}

static int load_config(struct server *s, struct sched_config *sched, struct tk_error *err)
{
	sched_config_default(sched);
	char buf[4096];
	const char *path = config_file_path(s, buf, sizeof(buf));
	char *text = NULL;
	int r = tk_read_file(path, 1024 * 1024, &text, NULL);
	if (r == -ENOENT && !s->cfg.config_path)
		return 0;
	if (r < 0)
		return tk_errorf(err, r, "cannot read configuration %s: %s", path, strerror(-r));
	struct tk_error e;
	r = sched_config_load_json(sched, text, &e);
	free(text);
	if (r < 0)
		return tk_errorf(err, r, "configuration %s: %s", path, e.text);
	log_info("scheduling configuration loaded from %s", path);
	return 0;
}

static int mark_started(struct server *s, const char *db, struct tk_error *err);

/* Opens the store (DATA/tenk.db, or where --store or config.json's
 * "store" says), refusing a missing or empty one when DATA held a cluster
 * (unless cfg.init: the ids would start again at 1 and every job be
 * forgotten), and a store it cannot write, which would start healthy and
 * stop at the first change. */
static int open_store(struct server *s, const char *db, bool used, struct tk_error *err)
{
	struct stat st;
	bool file = store_kind_of(db) == STORE_SQLITE;
	bool missing = file && (stat(db, &st) < 0 || st.st_size == 0);
	if (missing && used && !s->cfg.init)
		return tk_errorf(err, -ENOENT,
				 "%s is %s but %s held a cluster; restore it (tenk backup makes "
				 "copies), or start with --init",
				 db, stat(db, &st) < 0 ? "missing" : "empty", s->data_dir);
	int r = store_open(db, &s->store, err);
	bool empty = false;
	if (r < 0 || (r = store_is_empty(s->store, &empty, err)) < 0)
		return r;
	if (empty && used && !s->cfg.init)
		return tk_errorf(err, -ENOENT,
				 "the store %s is empty but %s held a cluster; restore it (%s), or "
				 "start with --init",
				 db, s->data_dir,
				 file ? "tenk backup makes copies" : "from PostgreSQL's backups");
	return 0;
}

/* Written at once, by the server that will write: proof the store takes
 * writes, and a mark that it is not new. */
static int mark_started(struct server *s, const char *db, struct tk_error *err)
{
	char now[32];
	int r;
	snprintf(now, sizeof(now), "%lld", (long long)server_now_ms(s));
	struct store_batch *b = store_batch_create();
	store_batch_put_meta(b, "started_ms", now);
	if (s->role.tokens_sha256[0])
		store_batch_put_meta(b, "tokens_sha256", s->role.tokens_sha256);
	r = store_apply(s->store, b, err);
	store_batch_destroy(b);
	if (r < 0) {
		char why[sizeof(err->text)];
		snprintf(why, sizeof(why), "%s", err->text);
		return tk_errorf(err, r,
				 "%s cannot be written (%s): fix its permissions or disk "
				 "before the server starts",
				 db, why);
	}
	return 0;
}

/* The state's reader of jobs out of memory: the server's second store. */
static int read_job(void *arg, int64_t id, char **ret_doc, size_t *ret_len, struct tk_error *err)
{
	struct server *s = arg;
	return store_get_job(s->reader, id, ret_doc, ret_len, err);
}

/* Loads the state (from warm, a standby's copy, where not NULL) and
 * schedules: at start, or when a standby takes over. */
static int activate(struct server *s, struct warm *warm, struct tk_error *err)
{
	int r;
	if ((r = mark_started(s, s->role.where, err)) < 0 ||
	    (r = store_open_reader(s->role.where, &s->reader, err)) < 0 ||
	    (r = audit_load(s, err)) < 0 || (r = config_start(s, err)) < 0 ||
	    (r = state_load(&s->st, s->store, warm, server_now_ms(s), tk_mono_ms(),
			    s->cfg.quarantine_bad_rows, err)) < 0 ||
	    (r = server_ids_load(s, err)) < 0 || (r = acct_fill_load(s, err)) < 0 ||
	    (r = rollout_load(s, err)) < 0 || (r = services_load(s, err)) < 0)
		return r;
	acct_las_history_load(s);
	state_want_pass(&s->st);
	return 0;
}

/* Servers that share a store share the tokens too (copies of admin.token
 * and agent.token): the store keeps their digest, and a server with others
 * is refused, at start rather than at its takeover. */
static int same_tokens(struct server *s, struct tk_error *err)
{
	char both[2 * sizeof(s->admin_token) + 2], digest[65];
	snprintf(both, sizeof(both), "%s\n%s", s->admin_token, s->agent_token);
	tk_sha256_hex(both, strlen(both), digest);
	if (store_kind(s->store) != STORE_POSTGRESQL)
		return 0; /* (one server's: its tokens may change with its files) */
	char *had = NULL;
	snprintf(s->role.tokens_sha256, sizeof(s->role.tokens_sha256), "%s", digest);
	int r = store_meta_get(s->store, "tokens_sha256", &had, err);
	if (r == -ENOENT)
		return 0; /* written by the first active (mark_started) */
	if (r < 0)
		return r;
	bool same = strcmp(had, digest) == 0;
	free(had);
	if (!same)
		return tk_errorf(err, -EPERM,
				 "%s/admin.token and agent.token are not the cluster's: servers "
				 "that share a store share them; copy both from the data folder of "
				 "the server that first used this store",
				 s->data_dir);
	return 0;
}

/* SIGHUP: config.json read again (config.c). */
static void hup_cb(uv_signal_t *h, int signum)
{
	struct server *s = h->data;
	if (!s->stopping)
		config_reload(s);
}

int server_power_fence_check(const struct server_config *cfg, const struct sched_config *sched,
			     struct tk_error *err)
{
	/* a node in touch beats every `heartbeat` (a tenth of the node
	 * timeout at most): three beats and three delays, as
	 * fence_power_after asks of a group that beats alike (fence.h) */
	if (sched->npower_fence && sched->power_fence_after_s) {
		struct fence_params fp;
		fence_params_of(cfg->node_timeout_ms, &fp);
		int64_t beat =
			MIN(sched->power_fence_heartbeat_s * 1000, cfg->node_timeout_ms / 10);
		int64_t least = 3 * (beat + fp.power_delay_ms);
		if (sched->power_fence_after_s * 1000 < least) {
			return tk_errorf(
				err, -EINVAL,
				"power_fence.after: %llds is under three heartbeats of %lldms "
				"and their delays (%lldms at a node timeout of %llds): nodes "
				"in touch could be powered off; give %llds or more, or leave "
				"it out (the least that is safe)",
				(long long)sched->power_fence_after_s, (long long)beat,
				(long long)least, (long long)(cfg->node_timeout_ms / 1000),
				(long long)((least + 999) / 1000));
		}
	}
	return 0;
}

int server_create(uv_loop_t *loop, const struct server_config *cfg, struct server **ret,
		  struct tk_error *err)
{
	_cleanup_free_ char *db = NULL, *url_path = NULL, *old_token = NULL;
	bool used = false;
	struct server *s = xcalloc(1, sizeof(*s));
	s->fill.batch = store_batch_create();
	struct sched_config *sched = xmalloc(sizeof(*sched));
	s->loop = loop;
	tk_map_init(&s->submit_buckets);
	uv_loop_configure(loop, UV_METRICS_IDLE_TIME); /* for loop_busy */
	s->cfg = *cfg;
	s->lock_fd = -1;
	s->data_dir = xstrdup(cfg->data_dir);
	metrics_init(s);
	uv_mutex_init(&s->wq.mu);
	uv_async_init(loop, &s->wq.async, writer_done_cb);
	s->wq.async.data = s;
	s->open_handles++;
	int r;
	if ((r = tk_mkdir_p(s->data_dir, 0700)) < 0) {
		r = tk_errorf(err, r, "cannot create data folder %s: %s", s->data_dir,
			      strerror(-r));
		goto fail;
	}
	if ((r = lock_data_dir(s, err)) < 0)
		goto fail;
	close_data_dir(s);
	/* a folder a server ran in before has its tokens */
	old_token = xasprintf("%s/agent.token", s->data_dir);
	used = access(old_token, F_OK) == 0;
	if ((r = load_token(s, "admin", s->admin_token, sizeof(s->admin_token), err)) < 0 ||
	    (r = load_token(s, "agent", s->agent_token, sizeof(s->agent_token), err)) < 0 ||
	    (r = load_catalogue(s, err)) < 0 || (r = load_config(s, sched, err)) < 0)
		goto fail;
	if ((r = server_power_fence_check(cfg, sched, err)) < 0)
		goto fail;
	if ((r = tk_random_hex(s->epoch, 16)) < 0) {
		r = tk_errorf(err, r, "cannot read random bytes");
		goto fail;
	}
	struct state_config scfg = {.node_timeout_ms = cfg->node_timeout_ms,
				    .max_node_requeues = cfg->max_node_requeues,
				    .keep_settled_ms = cfg->keep_settled_ms,
				    .master_port_first = cfg->master_port_first,
				    .epoch = s->epoch,
				    .secret = s->admin_token};
	state_init(&s->st, &scfg, sched, api_state_event, s);
	state_set_weights(&s->st, &s->cat);
	state_set_reader(&s->st, read_job, s); /* (s->reader is open before any read) */
	s->st.now_ms = server_now_ms(s);
	s->st.mono_ms = tk_mono_ms();
	db = cfg->store	       ? xstrdup(cfg->store)
	     : sched->store[0] ? xstrdup(sched->store)
			       : xasprintf("%s/tenk.db", s->data_dir);
	s->role.where = xstrdup(db);
	s->role.activate = activate;
	bool shared = store_kind_of(db) == STORE_POSTGRESQL;
	if ((r = open_store(s, db, used, err)) < 0 || (r = same_tokens(s, err)) < 0 ||
	    (!shared && (r = activate(s, NULL, err)) < 0))
		goto fail;
	if ((r = http_start(s, cfg->listen, err)) < 0)
		goto fail;
	/* on a shared store: active, or a standby until the lease lapses */
	if (shared && (r = server_role_start(s, err)) == 1)
		r = activate(s, NULL, err);
	if (r < 0)
		goto fail_http;
	url_path = xasprintf("%s/server.url", s->data_dir);
	char line[160];
	int len = snprintf(line, sizeof(line), "%s\n", s->url);
	if ((r = tk_write_file(url_path, line, (size_t)len, 0600)) < 0) {
		r = tk_errorf(err, r, "cannot write %s: %s", url_path, strerror(-r));
		goto fail_http;
	}
	uv_check_init(loop, &s->check);
	s->check.data = s;
	uv_check_start(&s->check, check_cb);
	uv_idle_init(loop, &s->lists_idle);
	s->lists_idle.data = s;
	uv_idle_init(loop, &s->kick_idle);
	s->kick_idle.data = s;
	uv_idle_init(loop, &s->arrays_idle);
	s->arrays_idle.data = s;
	uv_timer_init(loop, &s->store_retry);
	s->store_retry.data = s;
	s->open_handles += 4;
	uv_timer_init(loop, &s->cron);
	s->cron.data = s;
	uv_timer_start(&s->cron, cron_cb, SERVER_CRON_MS, SERVER_CRON_MS);
	uv_signal_init(loop, &s->hup);
	s->hup.data = s;
	uv_signal_start(&s->hup, hup_cb, SIGHUP);
	s->open_handles += 3;
	log_info("serving %s %s %zu jobs and %d nodes from %s (store: %s)", s->url,
		 s->role.standby ? "as a standby (loading nothing) of" : "with", s->st.njobs,
		 s->st.nnodes, s->data_dir, db);
	free(sched);
	*ret = s;
	return 0;
fail_http:
	http_stop(s);
fail:
	uv_close((uv_handle_t *)&s->wq.async, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
	free(sched);
	server_destroy(s);
	return r;
}

const char *server_local_socket(const struct server *s)
{
	return s->local_path;
}

const char *server_ca_file(const struct server *s)
{
	return s->tls_ca_path;
}

const char *server_url(const struct server *s)
{
	return s->url;
}

const char *server_agent_token(const struct server *s)
{
	return s->agent_token;
}

/* ---- stop ----------------------------------------------------------------------- */

void server_handle_closed(uv_handle_t *h)
{
	struct server *s = h->data;
	if (--s->open_handles == 0 && s->stop_cb)
		s->stop_cb(s->stop_arg);
}

/* Everything is durable: answer what waits, close the listener and handles. */
static void finish_stop(struct server *s)
{
	if (s->stop_finished)
		return;
	s->stop_finished = true;
	if (s->wq.stats_commits)
		log_info("store: %llu commits, %.2f ms each",
			 (unsigned long long)s->wq.stats_commits,
			 (double)s->wq.stats_commit_us / 1000.0 / (double)s->wq.stats_commits);
	server_ids_close(s);
	http_release_gate(s);
	/* lists still waiting are answered now */
	while (api_lists_work(s, INT64_MAX / 2))
		;
	uv_close((uv_handle_t *)&s->lists_idle, server_handle_closed);
	uv_close((uv_handle_t *)&s->kick_idle, server_handle_closed);
	uv_close((uv_handle_t *)&s->arrays_idle, server_handle_closed);
	uv_close((uv_handle_t *)&s->store_retry, server_handle_closed);
	http_stop(s);
	uv_close((uv_handle_t *)&s->check, server_handle_closed);
	uv_close((uv_handle_t *)&s->cron, server_handle_closed);
	uv_close((uv_handle_t *)&s->hup, server_handle_closed);
	uv_close((uv_handle_t *)&s->wq.async, server_handle_closed);
	if (s->role.poll_init)
		uv_close((uv_handle_t *)&s->role.poll, server_handle_closed);
}

void server_stop(struct server *s, void (*done_cb)(void *arg), void *arg)
{
	if (s->stopping)
		return;
	s->stopping = true;
	s->stop_cb = done_cb;
	s->stop_arg = arg;
	log_info("stopping");
	uv_timer_stop(&s->cron);
	server_power_stop(s);
	/* arrays accepted are made (and changed) whole before the last write */
	while (api_arrays_work(s, INT64_MAX / 2))
		;
	flush_start(s);
	if (s->wq.outstanding == 0)
		finish_stop(s);
}

void server_destroy(struct server *s)
{
	if (!s)
		return;
	api_arrays_release(s);
	if (s->store_down) {
		/* what the store could not take stays unwritten (none of it was
		 * acknowledged) */
		for (struct pending *p = s->wq.queued, *next; p; p = next) {
			next = p->next;
			store_batch_destroy(p->batch);
			free(p);
		}
		s->wq.queued = s->wq.queued_tail = NULL;
		store_destroy(s->store);
		s->store = NULL;
	}
	size_t pos = 0;
	void *v;
	while (tk_map_next(&s->submit_buckets, &pos, NULL, &v))
		free(v);
	tk_map_release(&s->submit_buckets);
	if (s->store && anything_dirty(s))
		flush_sync(s);
	store_batch_destroy(s->fill.batch);
	store_destroy(s->reader);
	warm_destroy(s->role.warm);
	config_release(s);
	rollout_release(s);
	services_release(s);
	state_release(&s->st);
	free(s->job_waits);
	free(s->node_polls);
	store_destroy(s->store);
	audit_release(s);
	free(s->tls_cert_pem);
	free(s->tls_key_pem);
	free(s->tls_ca_path);
	catalogue_release(&s->cat);
	metrics_release(s);
	uv_mutex_destroy(&s->wq.mu);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s->data_dir);
	free(s->role.where);
	free(s);
}
