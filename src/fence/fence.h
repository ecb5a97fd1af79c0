/*
 * Fencing across an outage of the control plane (DESIGN.md §5; issue 35):
 * the decisions, with no I/O and no clock of their own, so that the agent,
 * the server and the deterministic model test (tests/unit/fence) run the
 * same code. Times are each process's own monotonic milliseconds; the only
 * assumptions are that clocks run at the same rate within FENCE_DRIFT and
 * that a message is received after it was sent.
 *
 * The agent holds its shims' lease. An answer of the server to a request
 * sent at s renews it to s + lease. When it has heard nothing for `quiet`,
 * it runs rounds: it asks the other members of its witness group whether
 * they have heard the server within `quiet`; when a strict majority of the
 * group (itself counted) has not, the control plane is what failed, and a
 * lease still alive is renewed to the round's start + `step`. A lease that
 * ran out is never renewed: its tasks were stopped.
 *
 *     server answers ──► lease = sent + lease_ms
 *     silent ≥ quiet ──► round: ask peers ──► > g/2 silent? ──► lease = start + step
 *                                         └─► no: this node is cut off; the lease runs out
 *
 * The server declares a node DOWN (and moves its work) only when it has
 * heard nothing from it for the node timeout and, for the whole of the last
 * `step` (with a margin), at least ceil(g/2) other members of its group were
 * provably hearing the server: each heartbeat acknowledges the newest
 * answer its agent received (the server's own time in that answer), which
 * proves the member heard the server within `quiet` from the time the
 * heartbeat arrived until the answer's time + quiet. A strict majority of
 * silent members and ceil(g/2) members proven in touch cannot both exist
 * over one window, so a node the server declares DOWN cannot be renewing
 * its lease by its peers. A group of one is never declared DOWN
 * automatically; a group of two, when the other member is in touch.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define FENCE_MAX_GROUP 9
/* clocks' rates differ by at most this (0.1%); the windows have margins */
#define FENCE_DRIFT 0.001

struct fence_params {
	int64_t node_timeout_ms; /* the server: silence that makes a node DOWN */
	int64_t lease_ms;	 /* an answer renews the lease this long (3/4 of it) */
	int64_t quiet_ms;	 /* silence that starts rounds (a quarter) */
	int64_t step_ms;	 /* a round renews the lease this long (a quarter) */
	int64_t round_ms;	 /* a round waits for answers this long, then the next */
	/* power fencing (the server's "power_fence"): may the server have a
	 * silent node powered off, and after how long a silence at least (0:
	 * the least that is safe, fence_power_after) */
	bool power;
	int64_t power_after_ms;
	/* what a request's delay may add to a node's silence (T/40): with a
	 * node's heartbeat period it makes the gap between two of its
	 * requests that means some were lost (its margin, fence_margin) */
	int64_t power_delay_ms;
	/* for the model test's mutants only (0 in tenk): added to the number
	 * of silent members a round needs, and to the members the server
	 * needs in touch */
	int agent_quorum_adjust;
	int server_quorum_adjust;
	/* for the model test's mutants only (0 in tenk): every member's
	 * margin; power_after from x's own margins alone, not the others';
	 * power_after with one of x's margins, not two */
	int64_t power_margin_ms;
	bool power_own_margins_only;
	bool power_one_own_margin;
};

void fence_params_of(int64_t node_timeout_ms, struct fence_params *ret);

/* ---- the agent ---- */

struct fence_agent {
	int64_t heard_ms;	/* when the server last answered, or the agent started */
	int64_t lease_until_ms; /* the shims' lease ends (INT64_MIN: none) */
	int64_t round_start_ms; /* the round under way (INT64_MIN: none) */
	int64_t next_round_ms;
	int silent, answered; /* the round's answers: silent ones, all */
	int group_size;	      /* its witness group, itself counted */
};

/* An agent starting now: it claims no silence before it has waited quiet
 * (what it said before a restart, the server may hold it to). */
void fence_agent_init(struct fence_agent *a, int group_size, int64_t now);
/* The server answered a request sent at sent_ms. */
void fence_agent_answered(struct fence_agent *a, const struct fence_params *p, int64_t sent_ms,
			  int64_t now);
/* What this agent tells a peer that asks: has it not heard the server
 * within quiet? */
bool fence_agent_silent(const struct fence_agent *a, const struct fence_params *p, int64_t now);
/* Is the lease alive now (its tasks may run)? */
bool fence_agent_alive(const struct fence_agent *a, int64_t now);
/* Time passed: true when a round starts now (ask every peer, then
 * fence_agent_round_answer for each answer and fence_agent_round_end at
 * round_start + round_ms, or once every peer answered). */
bool fence_agent_tick(struct fence_agent *a, const struct fence_params *p, int64_t now);
/* A peer's answer to the round that started at round (answers to another
 * round are not counted). */
void fence_agent_round_answer(struct fence_agent *a, int64_t round, bool silent);
/* When the agent next has something to decide, if nothing arrives
 * before: its silence reaching quiet, or its next round. */
int64_t fence_agent_next(const struct fence_agent *a, const struct fence_params *p, int64_t now);
/* The round ends: true when it renewed the lease. */
bool fence_agent_round_end(struct fence_agent *a, const struct fence_params *p, int64_t now);

/* ---- the server ---- */

/* What the server knows of one node. */
struct fence_member {
	int64_t seen_ms;  /* the last request from it arrived (or the server started) */
	int64_t run_from; /* its requests came without a gap over its margin since */
	/* its agent's heartbeat period as it said it (0: not said, an agent
	 * of before: the longest any beats at, a tenth of the node timeout) */
	int64_t beat_ms;
	/* proven to hear the server from proven_from until proven_until */
	int64_t proven_from, proven_until;
};

void fence_member_init(struct fence_member *m, int64_t now);
/* Its agent said it beats every beat_ms (at most a tenth of the node
 * timeout; 0: not said). Before fence_member_heard of the same request. */
void fence_member_beats(struct fence_member *m, int64_t beat_ms);
/* The heartbeat period the server holds m to, and the gap between two of
 * its requests that means some were lost: a beat and a delay. */
int64_t fence_beat(const struct fence_member *m, const struct fence_params *p);
int64_t fence_margin(const struct fence_member *m, const struct fence_params *p);
/* A request from the node arrived now, acknowledging the newest answer it
 * had received, sent at acked_ms (the server's time; INT64_MIN: none of
 * this server's run). */
void fence_member_heard(struct fence_member *m, const struct fence_params *p, int64_t acked_ms,
			int64_t now);
/* Silent for the node timeout? */
bool fence_member_silent(const struct fence_member *m, const struct fence_params *p, int64_t now);
/* May the server declare member x of the group (n members) DOWN now? Only
 * when x is silent and enough of the others were proven in touch over the
 * window. *in_touch: how many were (for the log and UNREACHABLE). */
bool fence_may_declare_down(const struct fence_member *group, int n, int x,
			    const struct fence_params *p, int64_t now, int *in_touch);
/* The silence after which member x may be powered off: power_after, and
 * at least the longest margin of the others (a cut of the group that no
 * member's run shows lasts less than that and a delay) and two of x's own
 * (its beat, and its delay: the cut may take the beat after x's last word
 * and end just before the next). Beats of a tenth of the node timeout
 * give three eighths of it (11.25 s at 30 s); beats of a second at 30 s,
 * 5.25 s. */
int64_t fence_power_after(const struct fence_member *group, int n, int x,
			  const struct fence_params *p);
/* May the server have member x powered off now (power fencing, as
 * Pacemaker's STONITH)? Only when power fencing is on, x has been silent
 * for fence_power_after, and its group is in touch as
 * fence_may_declare_down asks, each member counted only when the server
 * has heard it without a gap over its margin from before x's last word
 * until now: then no cut of the group (which shares x's fate) lasted
 * longer than the longest margin and a delay, so it cost x less than that
 * and two of its beats and delays, and a silence of fence_power_after is
 * x's own, not the control plane's (invariant B). Its lease need not have run out: once the
 * command says the node is off, its tasks are gone (invariant A). */
bool fence_may_power_off(const struct fence_member *group, int n, int x,
			 const struct fence_params *p, int64_t now, int *in_touch);
