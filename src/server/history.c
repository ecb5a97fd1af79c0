/*
 * Settled jobs (final, every attempt ended) out of memory. Their rows in the
 * store hold them whole; the state keeps per id only what lists,
 * dependencies, counts and accounting windows ask without reading them
 * (struct sgone), and reads a job back through the reader the shell handed
 * it (state_set_reader) when one is asked for by itself. A settled job leaves memory once its last
 * write is durable and it has stayed settled keep_settled_ms, so that the looks at a job just ended
 * (waits, events, the CLI's next question) find it held.
 */
#include "state.h"

#include <errno.h>
#include <string.h>

void state_slots_reserve(struct state *s, size_t n)
{
	size_t had = s->jobs_alloc;
	xgrow(&s->jobs, &s->jobs_alloc, n, sizeof(*s->jobs));
	if (s->jobs_alloc > had) {
		s->gone = xrealloc(s->gone, s->jobs_alloc * sizeof(*s->gone));
		memset(s->jobs + had, 0, (s->jobs_alloc - had) * sizeof(*s->jobs));
		memset(s->gone + had, 0, (s->jobs_alloc - had) * sizeof(*s->gone));
	}
	if (n > s->njobs)
		s->njobs = n;
}

/* The index of an owner's name in s->owners, added when new. */
static uint32_t owner_index(struct state *s, const char *name)
{
	void *v = tk_map_get(&s->owner_index, name);
	if (v)
		return (uint32_t)((uintptr_t)v - 1);
	xgrow(&s->owners, &s->owners_alloc, (size_t)s->nowners + 1, sizeof(*s->owners));
	char *copy = xstrdup(name);
	s->owners[s->nowners] = copy;
	tk_map_put(&s->owner_index, copy, (void *)(uintptr_t)(s->nowners + 1));
	return (uint32_t)s->nowners++;
}

int64_t state_job_settled_ms(const struct sjob *j)
{
	if (!job_state_final(j->job.state))
		return 0;
	int64_t at = MAX(j->job.end_ms, 1);
	for (int k = 0; k < j->job.nattempts; k++) {
		if (!j->job.attempts[k].ended)
			return 0;
		at = MAX(at, j->job.attempts[k].end_ms);
	}
	return at;
}

void state_gone_add(struct state *s, int64_t id, enum job_state st, const char *owner,
		    int64_t settled_ms, bool removed)
{
	assert(id >= 1 && id <= STATE_MAX_JOB_ID && job_state_final(st));
	state_slots_reserve(s, (size_t)id);
	assert(!s->jobs[id - 1] && !s->gone[id - 1].state);
	struct sgone *g = &s->gone[id - 1];
	g->owner = owner_index(s, owner);
	g->settled_s = (uint32_t)MIN(settled_ms / 1000, (int64_t)UINT32_MAX);
	g->state = (uint8_t)(st + 1);
	g->removed = removed;
	s->ngone++;
	s->gone_by_state[st]++;
}

const struct sgone *state_gone_record(const struct state *s, int64_t id)
{
	if (id < 1 || (size_t)id > s->njobs || !s->gone[id - 1].state)
		return NULL;
	return &s->gone[id - 1];
}

const struct sgone *state_gone(const struct state *s, int64_t id)
{
	const struct sgone *g = state_gone_record(s, id);
	return g && !g->removed ? g : NULL;
}

void state_gone_remove(struct state *s, int64_t id)
{
	assert(state_gone(s, id));
	s->gone[id - 1].removed = 1;
}

void state_gone_forget(struct state *s, int64_t id)
{
	const struct sgone *g = state_gone_record(s, id);
	assert(g);
	s->gone_by_state[g->state - 1]--;
	s->ngone--;
	memset(&s->gone[id - 1], 0, sizeof(s->gone[0]));
}

bool state_job_known(const struct state *s, int64_t id)
{
	return id >= 1 && (size_t)id <= s->njobs && (s->jobs[id - 1] || s->gone[id - 1].state);
}

int state_job_read(struct state *s, int64_t id, struct sjob *ret, struct tk_error *err)
{
	if (!s->read)
		return tk_errorf(err, -ENOENT, "job %lld is not held and no store can be read",
				 (long long)id);
	_cleanup_free_ char *doc = NULL;
	size_t len = 0;
	int r = s->read(s->read_arg, id, &doc, &len, err);
	if (r < 0)
		return r;
	json_error_t jerr;
	json_t *jj = json_loadb(doc, len, 0, &jerr);
	if (!jj)
		return tk_errorf(err, -EBADMSG, "store: job %lld: unreadable document: %s",
				 (long long)id, jerr.text);
	memset(ret, 0, sizeof(*ret));
	r = job_unpack(jj, &ret->job, err);
	json_decref(jj);
	if (r < 0)
		return r;
	if (ret->job.id != id) {
		job_release(&ret->job);
		return tk_errorf(err, -EBADMSG, "store: job %lld: its document says id %lld",
				 (long long)id, (long long)ret->job.id);
	}
	state_job_attach(s, ret, s->now_ms);
	return 0;
}

/* A settled job may leave memory after its write at seq is durable and
 * keep_settled_ms has passed since mono. */
static void settled_push(struct state *s, int64_t id, uint64_t seq, int64_t mono)
{
	if (s->settled_head > 0 && s->settled_head == s->nsettled) {
		s->settled_head = s->nsettled = 0;
	} else if (s->settled_head > 4096 && s->settled_head * 2 > s->nsettled) {
		memmove(s->settled, s->settled + s->settled_head,
			(s->nsettled - s->settled_head) * sizeof(*s->settled));
		s->nsettled -= s->settled_head;
		s->settled_head = 0;
	}
	xgrow(&s->settled, &s->settled_alloc, s->nsettled + 1, sizeof(*s->settled));
	s->settled[s->nsettled++] = (struct settled_entry){.id = id, .seq = seq, .mono = mono};
}

struct sjob *state_job_get(struct state *s, int64_t id)
{
	struct sjob *j = state_job(s, id);
	const struct sgone *g = state_gone(s, id);
	if (j || !g)
		return j; /* (a removed job is not read back: none is there) */
	struct sjob tmp;
	if (state_job_read(s, id, &tmp, &s->read_err) < 0) {
		log_err("job %lld: cannot read it back from the store: %s", (long long)id,
			s->read_err.text);
		return NULL;
	}
	s->gone_by_state[g->state - 1]--;
	s->ngone--;
	memset(&s->gone[id - 1], 0, sizeof(s->gone[0]));
	j = state_job_add(s, &tmp.job, s->now_ms);
	j->written_seq = 0; /* as the store has it */
	settled_push(s, id, 0, s->mono_ms);
	return j;
}

void state_job_written(struct state *s, struct sjob *j, uint64_t seq, int64_t mono)
{
	j->written_seq = seq;
	if (state_job_settled_ms(j) && !j->job.system)
		settled_push(s, j->job.id, seq, mono);
}

/* May j leave memory now? Nothing may point at it or wait on it. */
static bool evictable(const struct sjob *j, uint64_t seq)
{
	return !j->dirty && j->written_seq == seq && !j->job.system && !j->pending && !j->fail_ev &&
	       !j->fenced_until && !j->valid && state_job_settled_ms(j) &&
	       !(j->job.array_job == j->job.id && j->job.array_count > 1);
}

struct sjob *state_evict_next(struct state *s, uint64_t seq_durable, int64_t mono)
{
	while (s->settled_head < s->nsettled) {
		const struct settled_entry *e = &s->settled[s->settled_head];
		if (e->seq > seq_durable || mono - e->mono < s->cfg.keep_settled_ms)
			return NULL;
		s->settled_head++;
		struct sjob *j = state_job(s, e->id);
		if (j && evictable(j, e->seq))
			return j; /* else: gone, written again since, or held */
	}
	return NULL;
}

void state_evict(struct state *s, struct sjob *j)
{
	int64_t id = j->job.id;
	s->jobs[id - 1] = NULL;
	state_gone_add(s, id, j->job.state, j->job.owner, state_job_settled_ms(j), false);
	job_release(&j->job);
	free(j->fail_seen);
	state_stall_forget(j);
	free(j);
}
