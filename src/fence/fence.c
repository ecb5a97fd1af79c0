/* The decisions of fence.h. */
#include "fence.h"

#include <stddef.h>

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

void fence_params_of(int64_t node_timeout_ms, struct fence_params *ret)
{
	*ret = (struct fence_params){
		.node_timeout_ms = node_timeout_ms,
		.lease_ms = node_timeout_ms * 3 / 4,
		.quiet_ms = node_timeout_ms / 4,
		.step_ms = node_timeout_ms / 2,
		.round_ms = node_timeout_ms / 32,
		.power_delay_ms = node_timeout_ms / 40,
	};
}

void fence_agent_init(struct fence_agent *a, int group_size, int64_t now)
{
	*a = (struct fence_agent){.heard_ms = now,
				  .lease_until_ms = INT64_MIN,
				  .round_start_ms = INT64_MIN,
				  .next_round_ms = INT64_MIN,
				  .group_size = group_size};
}

void fence_agent_answered(struct fence_agent *a, const struct fence_params *p, int64_t sent_ms,
			  int64_t now)
{
	a->heard_ms = now;
	/* anchored where the request left: the server had not yet heard of
	 * this node's silence when it answered */
	a->lease_until_ms = max64(a->lease_until_ms, sent_ms + p->lease_ms);
	a->round_start_ms = INT64_MIN; /* a round under way is moot */
}

bool fence_agent_silent(const struct fence_agent *a, const struct fence_params *p, int64_t now)
{
	return a->heard_ms == INT64_MIN || now - a->heard_ms >= p->quiet_ms;
}

bool fence_agent_alive(const struct fence_agent *a, int64_t now)
{
	return a->lease_until_ms != INT64_MIN && now < a->lease_until_ms;
}

bool fence_agent_tick(struct fence_agent *a, const struct fence_params *p, int64_t now)
{
	if (a->round_start_ms != INT64_MIN || !fence_agent_silent(a, p, now) ||
	    now < a->next_round_ms)
		return false;
	a->round_start_ms = now;
	a->next_round_ms = now + p->round_ms;
	a->silent = 1; /* itself */
	a->answered = 1;
	return true;
}

void fence_agent_round_answer(struct fence_agent *a, int64_t round, bool silent)
{
	if (a->round_start_ms == INT64_MIN || round != a->round_start_ms)
		return;
	a->answered++;
	a->silent += silent;
}

bool fence_agent_round_end(struct fence_agent *a, const struct fence_params *p, int64_t now)
{
	if (a->round_start_ms == INT64_MIN)
		return false;
	int64_t start = a->round_start_ms;
	a->round_start_ms = INT64_MIN;
	/* a strict majority of the whole group, the silent ones that did not
	 * answer counted as hearing the server */
	bool majority = 2 * (a->silent - p->agent_quorum_adjust) > a->group_size;
	if (!majority || !fence_agent_alive(a, now))
		return false; /* cut off, or its tasks already stopped */
	a->lease_until_ms = max64(a->lease_until_ms, start + p->step_ms);
	return true;
}

int64_t fence_agent_next(const struct fence_agent *a, const struct fence_params *p, int64_t now)
{
	if (a->round_start_ms != INT64_MIN)
		return a->round_start_ms + p->round_ms;
	if (fence_agent_silent(a, p, now))
		return a->next_round_ms > now ? a->next_round_ms : now;
	return a->heard_ms + p->quiet_ms;
}

void fence_member_init(struct fence_member *m, int64_t now)
{
	*m = (struct fence_member){.seen_ms = now,
				   .run_from = now,
				   .proven_from = INT64_MIN,
				   .proven_until = INT64_MIN};
}

/* How long an answer proves its receiver hears the server: quiet, on the
 * member's clock, shortened for drift. */
static int64_t proof_ms(const struct fence_params *p)
{
	return (int64_t)((double)p->quiet_ms * (1.0 - 4 * FENCE_DRIFT));
}

void fence_member_beats(struct fence_member *m, int64_t beat_ms)
{
	m->beat_ms = beat_ms > 0 ? beat_ms : 0;
}

int64_t fence_beat(const struct fence_member *m, const struct fence_params *p)
{
	/* an agent beats every tenth of the node timeout at most
	 * (wire_lease_of), whatever it says */
	int64_t most = p->node_timeout_ms / 10;
	return m->beat_ms > 0 && m->beat_ms < most ? m->beat_ms : most;
}

int64_t fence_margin(const struct fence_member *m, const struct fence_params *p)
{
	if (p->power_margin_ms)
		return p->power_margin_ms;
	return fence_beat(m, p) + p->power_delay_ms;
}

void fence_member_heard(struct fence_member *m, const struct fence_params *p, int64_t acked_ms,
			int64_t now)
{
	if (now - m->seen_ms > fence_margin(m, p))
		m->run_from = now; /* some were lost */
	m->seen_ms = max64(m->seen_ms, now);
	if (acked_ms == INT64_MIN)
		return;
	/* it received the answer before it sent this request: from now until
	 * the answer's time + quiet it cannot tell a peer it is silent */
	int64_t until = acked_ms + proof_ms(p);
	if (until <= now)
		return;
	if (m->proven_until != INT64_MIN && now <= m->proven_until)
		m->proven_until = max64(m->proven_until, until);
	else
		m->proven_from = now, m->proven_until = until;
}

bool fence_member_silent(const struct fence_member *m, const struct fence_params *p, int64_t now)
{
	return now - m->seen_ms >= p->node_timeout_ms;
}

/* How many of x's group (n members) the server proved in touch over the
 * window that fences ask: from now - step (with a margin) until now. */
static int group_in_touch(const struct fence_member *group, int n, int x,
			  const struct fence_params *p, int64_t now, bool run)
{
	/* a round renewing x's lease past now began after now - step (on x's
	 * clock, so with a margin here) and asked its peers before now */
	int64_t from = now - (int64_t)((double)p->step_ms * (1.0 + 4 * FENCE_DRIFT)) - 1;
	int k = 0;
	for (int i = 0; i < n; i++)
		if (i != x && group[i].proven_until != INT64_MIN && group[i].proven_from <= from &&
		    group[i].proven_until >= now &&
		    (!run || (group[i].run_from <= group[x].seen_ms &&
			      now - group[i].seen_ms <= fence_margin(&group[i], p))))
			k++;
	return k;
}

bool fence_may_declare_down(const struct fence_member *group, int n, int x,
			    const struct fence_params *p, int64_t now, int *in_touch)
{
	int k = group_in_touch(group, n, x, p, now, false);
	if (in_touch)
		*in_touch = k;
	int need = (n + 1) / 2 + p->server_quorum_adjust; /* ceil(n/2) */
	return fence_member_silent(&group[x], p, now) && n > 1 && k >= need;
}

int64_t fence_power_after(const struct fence_member *group, int n, int x,
			  const struct fence_params *p)
{
	int64_t widest = 0;
	for (int i = 0; i < n && !p->power_own_margins_only; i++)
		if (i != x)
			widest = max64(widest, fence_beat(&group[i], p) + p->power_delay_ms);
	/* a cut of the group can swallow x's beat just after its last word
	 * and end just before its next one: it costs x the cut and two of its
	 * margins (its last word up to a beat before the cut, its first after
	 * up to a beat and a delay after the mend) */
	int64_t own = fence_beat(&group[x], p) + p->power_delay_ms;
	return max64(p->power_after_ms, widest + (p->power_one_own_margin ? 1 : 2) * own);
}

bool fence_may_power_off(const struct fence_member *group, int n, int x,
			 const struct fence_params *p, int64_t now, int *in_touch)
{
	int k = group_in_touch(group, n, x, p, now, true);
	if (in_touch)
		*in_touch = k;
	int need = (n + 1) / 2 + p->server_quorum_adjust;
	return p->power && n > 1 && now - group[x].seen_ms >= fence_power_after(group, n, x, p) &&
	       k >= need;
}
