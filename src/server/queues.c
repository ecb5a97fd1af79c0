/*
 * Queues (a team's share of the cluster, with its decayed usage for fair
 * share) and users (who may call the API, by the SHA-256 of their token).
 */
#include "state.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define QUEUE_WRITE_EVERY_MS 60000 /* a queue's usage is stored this often at most */

struct squeue *state_queue(struct state *s, const char *name)
{
	return tk_map_get(&s->queue_by_name, name);
}

struct squeue *state_queue_insert(struct state *s, const struct queue_spec *spec)
{
	struct squeue *q = xcalloc(1, sizeof(*q));
	q->spec = *spec;
	q->index = s->nqueues;
	xgrow(&s->queues, &s->queues_alloc, (size_t)s->nqueues + 1, sizeof(*s->queues));
	s->queues[s->nqueues++] = q;
	tk_map_put(&s->queue_by_name, q->spec.name, q);
	return q;
}

struct squeue *state_queue_add(struct state *s, const char *name, int64_t now)
{
	struct queue_spec spec;
	memset(&spec, 0, sizeof(spec));
	snprintf(spec.name, sizeof(spec.name), "%s", name);
	spec.quota_milli = spec.borrow_milli = -1;
	spec.weight = 1;
	spec.usage_at_ms = now;
	struct squeue *q = state_queue_insert(s, &spec);
	state_queue_dirty(s, q);
	return q;
}

void state_queues_age(struct state *s, int64_t now)
{
	double hl = (double)s->sched.half_life_s;
	for (int i = 0; i < s->nqueues; i++) {
		struct squeue *q = s->queues[i];
		double dt = (double)(now - q->spec.usage_at_ms) / 1000.0;
		if (dt <= 0)
			continue;
		int64_t use = s->sched.weighted_share ? llround(q->use_units) : q->use_milli;
		q->spec.usage = sched_usage_age(q->spec.usage, use, dt, hl);
		q->spec.usage_at_ms = now;
		if (now - q->written_ms >= QUEUE_WRITE_EVERY_MS) {
			q->written_ms = now;
			state_queue_dirty(s, q);
		}
	}
}

/* ---- users ------------------------------------------------------------------------ */

struct suser *state_user_insert(struct state *s, const struct user_record *rec)
{
	struct suser *u = xcalloc(1, sizeof(*u));
	u->rec = *rec;
	tk_map_put(&s->user_by_name, u->rec.name, u);
	tk_map_put(&s->user_by_hash, u->rec.token_sha256, u);
	return u;
}

struct suser *state_user_add(struct state *s, const struct user_record *in, char *token_out,
			     int64_t now)
{
	struct user_record rec = *in;
	if (tk_random_hex(token_out, 32) < 0)
		abort(); /* the kernel's randomness does not fail once the server is up */
	tk_sha256_hex(token_out, strlen(token_out), rec.token_sha256);
	rec.created_ms = now;
	struct suser *u = state_user_insert(s, &rec);
	state_user_dirty(s, u);
	log_info("user %s added%s, runs as Unix user %s", rec.name, rec.admin ? " (admin)" : "",
		 rec.unix_user);
	return u;
}

void state_user_del(struct state *s, struct suser *u)
{
	tk_map_del(&s->user_by_name, u->rec.name);
	tk_map_del(&s->user_by_hash, u->rec.token_sha256);
	u->deleted = true;
	state_user_dirty(s, u);
	log_info("user %s removed", u->rec.name);
}
