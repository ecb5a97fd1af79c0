/*
 * Work that grows with a request is done in slices between the loop's
 * other work, never in one go: an array's elements made (POST /v1/jobs
 * with "array"), and an array changed as a whole (cancel, hold, release,
 * requeue of its first id). A 100,000-element array held the loop for
 * seconds in one piece, and heartbeats and health checks waited behind it.
 *
 * Each piece of work is the server's, not the request's: the ids of an
 * array are taken when it is accepted (one block, so its elements are
 * consecutive), and its elements are made to the last even when the client
 * goes away; the answer goes once the last is made (and, as every answer,
 * once it is durable). The works are done in turn, a slice of
 * ARRAYS_BUDGET_US each loop iteration.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

#define ARRAYS_BUDGET_US 4000 /* a loop iteration's slice of array work, about */
#define ARRAYS_CHECK_EVERY 32 /* elements between looks at the clock */
/* jobs changed and not yet handed to the writer, at most, for a slice to
 * go on: the loop packs each changed job for the writer (about 20 us), far
 * more than an element costs to make or cancel, so this bounds the
 * iteration's packing as the budget bounds the slice */
#define ARRAYS_MAX_DIRTY 200

struct array_work {
	struct array_work *next;
	struct request *r; /* waiting for the answer; NULL once it went */
	int64_t first;	   /* the array's first id */
	int total, done;
	/* making the elements (fn NULL) */
	struct job_request req; /* the last element takes it */
	int *idx;
	int cap;
	bool held;
	int64_t now;
	char owner[MODEL_NAME_MAX], run_as[MODEL_NAME_MAX];
	/* changing them */
	api_change_fn fn;
	int64_t arg;
	char user[MODEL_NAME_MAX];
	int changed;
	struct tk_error err;
};

/* Is the writer behind? Then array work waits for its next commit
 * (api_arrays_kick): made faster than written, the changes would only
 * queue, and every answer waits for what is before it to be durable. */
static bool writer_behind(const struct server *s)
{
	return s->wq.outstanding > 1;
}

static void idle_cb(uv_idle_t *h)
{
	struct server *s = h->data;
	if (!api_arrays_work(s, ARRAYS_BUDGET_US) || writer_behind(s))
		uv_idle_stop(h);
}

void api_arrays_kick(struct server *s)
{
	if (s->arrays && !writer_behind(s))
		uv_idle_start(&s->arrays_idle, idle_cb);
}

static void push(struct server *s, struct array_work *w, struct request *r)
{
	w->r = r;
	r->wait = WAIT_ARRAY;
	r->array = w;
	struct array_work **pp = &s->arrays;
	while (*pp)
		pp = &(*pp)->next;
	*pp = w;
	uv_idle_start(&s->arrays_idle, idle_cb);
}

void api_array_submit(struct request *r, struct job_request *req, int *idx, int nidx, int cap,
		      const char *run_as, bool held)
{
	struct server *s = r->s;
	struct state *st = &s->st;
	struct array_work *w = xcalloc(1, sizeof(*w));
	w->first = (int64_t)st->njobs + 1;
	/* its ids, one after another, are its own from now on */
	state_slots_reserve(st, (size_t)(w->first - 1 + nidx));
	w->total = nidx;
	w->req = *req;
	memset(req, 0, sizeof(*req));
	w->idx = idx;
	w->cap = cap;
	w->held = held;
	w->now = server_now_ms(s);
	snprintf(w->owner, sizeof(w->owner), "%s", r->user);
	snprintf(w->run_as, sizeof(w->run_as), "%s", run_as);
	log_info("array %lld: %d jobs from %s", (long long)w->first, nidx, r->user);
	push(s, w, r);
}

void api_array_change(struct request *r, struct sjob *first, api_change_fn fn, int64_t arg)
{
	struct array_work *w = xcalloc(1, sizeof(*w));
	w->first = first->job.id;
	w->total = first->job.array_count;
	w->fn = fn;
	w->arg = arg;
	snprintf(w->user, sizeof(w->user), "%s", r->user);
	push(r->s, w, r);
}

/* Makes element w->done. */
static void make_one(struct server *s, struct array_work *w)
{
	struct state *st = &s->st;
	int k = w->done;
	struct job_request el;
	if (k < w->total - 1)
		job_request_copy(&w->req, &el);
	else
		el = w->req, memset(&w->req, 0, sizeof(w->req));
	struct sjob *j = state_submit_array(st, &el, w->owner, w->run_as, w->held, w->now,
					    w->first + k, w->first, w->idx[k], w->cap, w->total);
	/* the array cancelled while it was being made: so is the rest */
	struct sjob *head = k ? state_job(st, w->first) : NULL;
	if (head && head->job.state == JOB_CANCELLED) {
		struct tk_error err;
		state_cancel(st, j, server_now_ms(s), &err);
	}
}

/* Changes element w->done, when it is one of the array's. */
static void change_one(struct server *s, struct array_work *w)
{
	struct sjob *e = state_job_get(&s->st, w->first + w->done);
	if (e && e->job.array_job == w->first && w->fn(s, w->user, e, w->arg, &w->err) == 0)
		w->changed++;
}

/* The answer, once w is done. */
static void answer(struct server *s, struct array_work *w)
{
	struct request *r = w->r;
	if (!r)
		return;
	r->wait = WAIT_NONE;
	r->array = NULL;
	struct sjob *head = state_job_get(&s->st, w->first);
	if (!head) {
		reply_error(r, 500, "array %lld cannot be read back from the store: %s",
			    (long long)w->first, s->st.read_err.text);
		return;
	}
	if (!w->fn) {
		reply_json(r, 201, api_job_for(r, head));
		return;
	}
	if (!w->changed) {
		reply_error(r, 409, "array %lld: none of its %d elements: %s", (long long)w->first,
			    w->total, w->err.text);
		return;
	}
	json_t *o = api_job_for(r, head);
	json_object_set_new(o, "changed", json_integer(w->changed));
	reply_json(r, 200, o);
}

static void work_free(struct array_work *w)
{
	job_request_release(&w->req);
	free(w->idx);
	free(w);
}

bool api_arrays_work(struct server *s, int64_t budget_us)
{
	int64_t until = tk_mono_us() + budget_us;
	while (s->arrays) {
		struct array_work *w = s->arrays;
		while (w->done < w->total) {
			if ((s->st.ndirty_jobs >= ARRAYS_MAX_DIRTY || writer_behind(s)) &&
			    budget_us < INT64_MAX / 4)
				break; /* the writer first */
			if (w->fn)
				change_one(s, w);
			else
				make_one(s, w);
			w->done++;
			if (w->done % ARRAYS_CHECK_EVERY == 0 && tk_mono_us() >= until)
				break;
		}
		if (w->done < w->total) {
			server_kick(s); /* written, and the pass, before the next slice */
			return true;
		}
		s->arrays = w->next;
		answer(s, w);
		work_free(w);
		if (tk_mono_us() >= until)
			break;
	}
	return s->arrays != NULL;
}

void api_array_forget(struct request *r)
{
	/* the work goes on: an array accepted is made whole */
	if (r->array)
		r->array->r = NULL;
	r->array = NULL;
}

void api_arrays_release(struct server *s)
{
	while (s->arrays) {
		struct array_work *w = s->arrays;
		s->arrays = w->next;
		work_free(w);
	}
}
