/*
 * Windows (tenk reserve): nodes kept from a start on, for maintenance or
 * for some users. A job that is not a window's own is kept off its nodes
 * when it would still run at the start: by its time limit, or, without
 * one, once the start is within the policy's lookahead. The job's node
 * filter (req.node_ok) carries that, so that every way the pass places it
 * (in what is free, by preemption, in a reservation's shadow) keeps off.
 */
#include "pass.h"

#include <string.h>

bool sched_window_in_way(const struct sched_window *w, int64_t now_ms, int64_t lookahead_ms,
			 int64_t time_limit_s, uint32_t own)
{
	if (w->bit >= 0 && w->bit < 32 && (own >> w->bit & 1))
		return false;
	if (time_limit_s <= 0)
		return w->start_ms - now_ms <= lookahead_ms;
	return now_ms + time_limit_s * 1000 > w->start_ms;
}

bool sched__window_in_way(const struct st *st, const struct sched_window *w, int64_t time_limit_s,
			  uint32_t own)
{
	const struct sched_policy *pol = st->p.policy;
	return sched_window_in_way(w, st->p.now, pol ? pol->maint_lookahead_ms : 0, time_limit_s,
				   own);
}

uint64_t sched__windows_in_way(const struct st *st, int64_t time_limit_s, uint32_t own, bool all)
{
	const struct sched_snapshot *s = st->p.snap;
	uint64_t m = 0;
	bool last_all = true, last_any = false;
	for (int i = 0; i < s->nwindows; i++) {
		bool in = sched__window_in_way(st, &s->windows[i], time_limit_s, own);
		if (i < 63) {
			m |= (uint64_t)in << i;
			continue;
		}
		last_all &= in;
		last_any |= in;
	}
	if (s->nwindows > 63 && (all ? last_all : last_any))
		m |= 1ULL << 63;
	return m;
}

bool sched__windows_apply(struct st *st, struct req *rq)
{
	const struct sched_snapshot *s = st->p.snap;
	const struct sched_job *j = rq->j;
	bool any = false;
	for (int i = 0; i < s->nwindows; i++) {
		const struct sched_window *w = &s->windows[i];
		if (!sched__window_in_way(st, w, j->time_limit_s, j->windows))
			continue;
		if (!any) {
			int nn = st->p.nn;
			if (!st->win_ok)
				st->win_ok = sched__keep_alloc(st->p.keep, (size_t)nn + 1);
			if (rq->node_ok)
				memcpy(st->win_ok, rq->node_ok, (size_t)nn);
			else
				memset(st->win_ok, 1, (size_t)nn);
			any = true;
		}
		for (int k = 0; k < w->nnodes; k++)
			st->win_ok[w->nodes[k]] = false;
	}
	if (!any)
		return false;
	rq->windowed = true;
	rq->shape_node_ok = rq->node_ok;
	rq->node_ok = st->win_ok;
	rq->memo = NULL; /* its scores are the shape's, on every node */
	return true;
}

void sched__windows_clear(struct st *st, struct req *rq)
{
	(void)st;
	if (!rq->windowed)
		return;
	rq->node_ok = rq->shape_node_ok;
	rq->shape_node_ok = NULL;
	rq->windowed = false;
}

void sched__window_detail(const struct st *st, const struct sched_job *j, struct strbuf *sb)
{
	const struct sched_snapshot *s = st->p.snap;
	const struct sched_window *w = NULL;
	for (int i = 0; i < s->nwindows && !w; i++)
		if (sched__window_in_way(st, &s->windows[i], j->time_limit_s, j->windows))
			w = &s->windows[i];
	if (!w)
		return;
	int64_t ahead = w->start_ms - st->p.now;
	const char *name = w->name ? w->name : "?";
	if (ahead <= 0) {
		strbuf_addf(sb, "the nodes it needs are kept for reservation %s", name);
		return;
	}
	if (j->time_limit_s > 0) {
		strbuf_addf(sb,
			    "would still run when reservation %s starts on nodes it needs, in "
			    "about ",
			    name);
		sched__fmt_wait_time(ahead, sb);
	} else {
		strbuf_addf(sb,
			    "has no time limit, and reservation %s starts on nodes it needs in "
			    "about ",
			    name);
		sched__fmt_wait_time(ahead, sb);
	}
	strbuf_addstr(sb, "; a time limit (--time) under that would let it start now");
}
