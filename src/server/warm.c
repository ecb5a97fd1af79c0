/*
 * A standby's warm copy of the state: what a takeover would load from the
 * store, read as the active commits it, so that taking over costs the
 * lease's lapse and little more. The copy follows the store's change
 * marks (store_changes): every row at first, then, at each of the
 * standby's polls, what changed since the newest mark it saw, rows
 * deleted first. The jobs not settled are held decoded (decoding their
 * documents is most of a load's time); the settled ones by their columns,
 * packed; nodes, queues and users as their documents (few, and decoded at
 * the takeover as at a start).
 *
 * At the takeover the last changes are read under the lease, where nobody
 * else commits, with the store's counts from the same snapshot: a copy
 * that does not count as the store does, that read no change for longer
 * than the store keeps deletions' marks, or that met a row it cannot hold
 * (spoiled) is dropped, and the state is loaded from the store as at a
 * start. load.c reads the copy through the same checks as the store's
 * rows.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct warm_job {
	char key[24];
	int64_t id;
	bool bad; /* its document did not decode: why says why */
	char why[MODEL_REASON_MAX];
	struct job job;
};

struct warm_doc {
	char *key;
	char *doc;
	size_t len;
};

/* A settled job's columns; its strings interned. */
struct warm_settled {
	int64_t settled_ms;
	uint32_t owner, state;
	bool present, stripped;
};

enum { WARM_NODES, WARM_QUEUES, WARM_USERS, WARM_NDOCS };

struct warm {
	int64_t mark;	 /* the newest change mark read; -1: none yet */
	int64_t ok_mono; /* when the store was last read whole or since */
	bool spoiled;	 /* a row this copy cannot hold: the takeover loads the store */
	char spoiled_why[MODEL_REASON_MAX];
	struct tk_map jobs; /* open: id -> struct warm_job */
	struct tk_map docs[WARM_NDOCS];
	struct warm_settled *settled; /* by id - 1 */
	size_t settled_alloc;
	int64_t nsettled;
	char **strs; /* interned: owners and states */
	uint32_t nstrs, strs_alloc;
	struct tk_map str_index; /* string -> its index + 1 */
	int64_t changes;	 /* rows applied since the first read */
};

static struct tk_map *docs_of(struct warm *w, enum store_row_kind k)
{
	return &w->docs[k == STORE_ROW_NODE    ? WARM_NODES
			: k == STORE_ROW_QUEUE ? WARM_QUEUES
					       : WARM_USERS];
}

static uint32_t intern(struct warm *w, const char *str)
{
	uintptr_t at = (uintptr_t)tk_map_get(&w->str_index, str);
	if (at)
		return (uint32_t)(at - 1);
	if (w->nstrs == w->strs_alloc) {
		w->strs_alloc = w->strs_alloc ? 2 * w->strs_alloc : 64;
		w->strs = xrealloc(w->strs, sizeof(*w->strs) * w->strs_alloc);
	}
	w->strs[w->nstrs] = xstrdup(str);
	tk_map_put(&w->str_index, w->strs[w->nstrs], (void *)(uintptr_t)(w->nstrs + 1));
	return w->nstrs++;
}

static void spoil(struct warm *w, const char *why)
{
	if (!w->spoiled)
		snprintf(w->spoiled_why, sizeof(w->spoiled_why), "%s", why);
	w->spoiled = true;
}

static void job_drop(struct warm *w, const char *key, int64_t id)
{
	struct warm_job *j = tk_map_del(&w->jobs, key);
	if (j) {
		if (!j->bad)
			job_release(&j->job);
		free(j);
	}
	if (id >= 1 && (size_t)id <= w->settled_alloc && w->settled[id - 1].present) {
		w->settled[id - 1].present = false;
		w->nsettled--;
	}
}

static int apply_job(struct warm *w, const struct store_change *c)
{
	job_drop(w, c->key, c->id);
	if (c->gone)
		return 0;
	if (c->settled_ms > 0) {
		if (c->id < 1 || c->id > STATE_MAX_JOB_ID) {
			spoil(w, "a settled job's id is beyond what a server holds");
			return 0;
		}
		if ((size_t)c->id > w->settled_alloc) {
			size_t n = w->settled_alloc ? w->settled_alloc : 1024;
			while (n < (size_t)c->id)
				n *= 2;
			w->settled = xrealloc(w->settled, sizeof(*w->settled) * n);
			memset(w->settled + w->settled_alloc, 0,
			       sizeof(*w->settled) * (n - w->settled_alloc));
			w->settled_alloc = n;
		}
		w->settled[c->id - 1] = (struct warm_settled){.settled_ms = c->settled_ms,
							      .owner = intern(w, c->owner),
							      .state = intern(w, c->state),
							      .present = true,
							      .stripped = c->stripped};
		w->nsettled++;
		return 0;
	}
	if (!c->doc) {
		spoil(w, "a job not settled came without its document");
		return 0;
	}
	struct warm_job *j = xcalloc(1, sizeof(*j));
	snprintf(j->key, sizeof(j->key), "%s", c->key);
	j->id = c->id;
	if (strlen(c->key) >= sizeof(j->key)) {
		free(j);
		spoil(w, "a job's key is not an id");
		return 0;
	}
	j->bad = state_job_decode(c->key, c->doc, c->len, &j->job, j->why) < 0;
	tk_map_put(&w->jobs, j->key, j);
	return 0;
}

static int apply_cb(void *ctx, const struct store_change *c)
{
	struct warm *w = ctx;
	w->changes++;
	if (c->kind == STORE_ROW_JOB)
		return apply_job(w, c);
	struct tk_map *m = docs_of(w, c->kind);
	struct warm_doc *d = tk_map_del(m, c->key);
	if (d) {
		free(d->key);
		free(d->doc);
		free(d);
	}
	if (c->gone)
		return 0;
	d = xmalloc(sizeof(*d));
	d->key = xstrdup(c->key);
	d->doc = xmalloc(c->len + 1);
	memcpy(d->doc, c->doc, c->len);
	d->doc[c->len] = '\0';
	d->len = c->len;
	tk_map_put(m, d->key, d);
	return 0;
}

struct warm *warm_create(void)
{
	struct warm *w = xcalloc(1, sizeof(*w));
	w->mark = -1;
	tk_map_init(&w->jobs);
	for (int i = 0; i < WARM_NDOCS; i++)
		tk_map_init(&w->docs[i]);
	tk_map_init(&w->str_index);
	return w;
}

/* Empties w: what a read whole starts from. */
static void clear(struct warm *w)
{
	size_t pos = 0;
	const char *key;
	void *v;
	while (tk_map_next(&w->jobs, &pos, &key, &v)) {
		struct warm_job *j = v;
		if (!j->bad)
			job_release(&j->job);
		free(j);
	}
	tk_map_release(&w->jobs);
	tk_map_init(&w->jobs);
	for (int i = 0; i < WARM_NDOCS; i++) {
		pos = 0;
		while (tk_map_next(&w->docs[i], &pos, &key, &v)) {
			struct warm_doc *d = v;
			free(d->key);
			free(d->doc);
			free(d);
		}
		tk_map_release(&w->docs[i]);
		tk_map_init(&w->docs[i]);
	}
	free(w->settled);
	w->settled = NULL;
	w->settled_alloc = 0;
	w->nsettled = 0;
	w->mark = -1;
	w->spoiled = false;
	w->spoiled_why[0] = '\0';
}

void warm_destroy(struct warm *w)
{
	if (!w)
		return;
	clear(w);
	tk_map_release(&w->jobs);
	for (int i = 0; i < WARM_NDOCS; i++)
		tk_map_release(&w->docs[i]);
	for (uint32_t i = 0; i < w->nstrs; i++)
		free(w->strs[i]);
	free(w->strs);
	tk_map_release(&w->str_index);
	free(w);
}

int warm_follow(struct warm *w, struct store *st, struct store_counts *counts, struct tk_error *err)
{
	int64_t before = w->mark;
	int r = store_changes(st, &w->mark, apply_cb, w, counts, err);
	if (r < 0) {
		if (before < 0)
			clear(w); /* (a read whole that failed half way) */
		else
			w->mark = before;
		return r;
	}
	if (before >= 0 && w->mark < before) {
		/* the store's newest mark went back: another store (a copy
		 * restored) now, to be read whole */
		log_warn("standby: the store's newest change (%lld) is older than this copy's "
			 "(%lld); reading it whole",
			 (long long)w->mark, (long long)before);
		clear(w);
		if ((r = store_changes(st, &w->mark, apply_cb, w, counts, err)) < 0) {
			clear(w);
			return r;
		}
	}
	w->ok_mono = tk_mono_ms();
	return 0;
}

bool warm_ready(const struct warm *w, const struct store_counts *n, char *why, size_t size)
{
	struct store_counts have = {.jobs_open = (int64_t)w->jobs.len,
				    .jobs_settled = w->nsettled,
				    .nodes = (int64_t)w->docs[WARM_NODES].len,
				    .queues = (int64_t)w->docs[WARM_QUEUES].len,
				    .users = (int64_t)w->docs[WARM_USERS].len};
	if (w->mark < 0)
		snprintf(why, size, "it was never read");
	else if (w->spoiled)
		snprintf(why, size, "%s", w->spoiled_why);
	else if (tk_mono_ms() - w->ok_mono > STORE_GONE_KEEP_MS / 2)
		snprintf(why, size, "it was last brought up to date %lld s ago",
			 (long long)(tk_mono_ms() - w->ok_mono) / 1000);
	else if (memcmp(&have, n, sizeof(have)) != 0)
		snprintf(why, size,
			 "it counts %lld+%lld jobs, %lld nodes, %lld queues, %lld users; the store "
			 "%lld+%lld, %lld, %lld, %lld",
			 (long long)have.jobs_open, (long long)have.jobs_settled,
			 (long long)have.nodes, (long long)have.queues, (long long)have.users,
			 (long long)n->jobs_open, (long long)n->jobs_settled, (long long)n->nodes,
			 (long long)n->queues, (long long)n->users);
	else
		return true;
	return false;
}

int64_t warm_jobs(const struct warm *w)
{
	return (int64_t)w->jobs.len + w->nsettled;
}

int64_t warm_age_ms(const struct warm *w)
{
	return w->ok_mono ? tk_mono_ms() - w->ok_mono : -1;
}

static int cmp_doc(const void *a, const void *b)
{
	return strcmp((*(struct warm_doc *const *)a)->key, (*(struct warm_doc *const *)b)->key);
}

int warm_each_doc(struct warm *w, enum store_row_kind kind, store_row_cb cb, void *ctx)
{
	struct tk_map *m = docs_of(w, kind);
	struct warm_doc **all = xmalloc(sizeof(*all) * (m->len + 1));
	size_t n = 0, pos = 0;
	const char *key;
	void *v;
	while (tk_map_next(m, &pos, &key, &v))
		all[n++] = v;
	qsort(all, n, sizeof(*all), cmp_doc); /* name order, as the store's (bytes) */
	int r = 0;
	for (size_t i = 0; i < n && r >= 0; i++)
		r = cb(ctx, all[i]->key, all[i]->doc, all[i]->len);
	free(all);
	return r;
}

int warm_each_settled(struct warm *w, store_settled_cb cb, void *ctx)
{
	int r = 0;
	for (size_t i = 0; i < w->settled_alloc && r >= 0; i++) {
		const struct warm_settled *g = &w->settled[i];
		if (g->present)
			r = cb(ctx, (int64_t)i + 1, w->strs[g->state], w->strs[g->owner],
			       g->settled_ms, g->stripped);
	}
	return r;
}

static int cmp_job(const void *a, const void *b)
{
	int64_t x = (*(struct warm_job *const *)a)->id, y = (*(struct warm_job *const *)b)->id;
	return x < y ? -1 : x > y;
}

int warm_each_job(struct warm *w, warm_job_cb cb, void *ctx)
{
	struct warm_job **all = xmalloc(sizeof(*all) * (w->jobs.len + 1));
	size_t n = 0, pos = 0;
	const char *key;
	void *v;
	while (tk_map_next(&w->jobs, &pos, &key, &v))
		all[n++] = v;
	qsort(all, n, sizeof(*all), cmp_job); /* id order, as the store's */
	int r = 0;
	for (size_t i = 0; i < n && r >= 0; i++) {
		struct warm_job *j = all[i];
		if (j->bad) {
			r = cb(ctx, j->key, NULL, j->why);
			continue;
		}
		/* the job goes to cb, whatever it does with it */
		j->bad = true;
		snprintf(j->why, sizeof(j->why), "taken");
		r = cb(ctx, j->key, &j->job, NULL);
	}
	free(all);
	return r;
}
