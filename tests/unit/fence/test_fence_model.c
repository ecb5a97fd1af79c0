/*
 * The fencing protocol (src/fence) in a deterministic model: one server
 * and a few nodes in witness groups, each with its own clock (an offset and
 * a rate within FENCE_DRIFT), messages that take their time or are lost,
 * on a virtual clock, driven by a random schedule per seed. The agents and
 * the server run the real decisions of fence.c; the model only carries
 * messages and time.
 *
 * Checked after every step:
 *   A  a node the server declared DOWN (its job moved) has no live lease:
 *      two attempts of one job never run at once. In every schedule:
 *      server stops and restarts, node crashes, links cut one way or both
 *      between any two parties, whole groups cut from the server, delays
 *      up to twice the node timeout.
 *   B  in schedules where only the control plane fails (the server stops,
 *      or whole groups are cut from it; messages within the stated bound):
 *      no lease runs out and no node is declared DOWN.
 *   L  a node that crashed while the rest of its group hears the server is
 *      declared DOWN within the node timeout plus a step, and so its job
 *      moves (the protocol is not safe by never acting); with power
 *      fencing, within its fence_power_after, a delay and a tick.
 * Half the seeds fence by power (fence_may_power_off: the server has a
 * silent node powered off, which ends its tasks at once, and moves its
 * work without waiting for the lease); A and B are checked with it. The
 * nodes' heartbeats differ by seed: every one at a tenth of the node
 * timeout, every one at a fortieth (a second at 40 s), or each its own
 * between the two, some of them (agents of before) not saying it, so that
 * the server holds them to the longest.
 * And the checks fail when the rules are weakened by one: a round that
 * counts a majority one member short, a server that moves work with one
 * member too few in touch, power fencing that does not ask the members'
 * requests to have come without a gap (a margin of a hundred node
 * timeouts), power fencing that waits for the node's own margins alone
 * (not the slowest of its group's as well), power fencing that waits for
 * one of the node's own margins (not two). Half the cuts of a schedule
 * are blips, shorter than a beat and a delay: long enough to take a beat,
 * too short for a member's run to show.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fence/fence.h"

#define T 4000		/* the node timeout, ms */
#define HB (T / 10)	/* the longest heartbeat period (under half of quiet: the proofs join up) */
#define DMAX (T / 64)	/* B's bound on a message's delay */
#define MAXN 10		/* nodes */
#define SRV MAXN	/* the server's endpoint */
#define RUN_MS (24 * T) /* one schedule's length */
#define MAXEV (1 << 16) /* events pending at once */

/* EV_HB: a node's time to send a heartbeat; EV_HB_IN: one reaches the server */
enum ev_kind { EV_HB, EV_HB_IN, EV_ANSWER, EV_QUERY, EV_REPLY, EV_WAKE, EV_SRV_TICK, EV_FAULT };
enum fault { F_SRV_STOP, F_SRV_START, F_CRASH, F_BOOT, F_CUT, F_MEND, F_GROUP_CUT, F_GROUP_MEND };

struct ev {
	int64_t at; /* global ms */
	uint64_t seq;
	enum ev_kind kind;
	int from, to;
	int64_t a, b; /* payload: sent time, acked time, round... */
	int c;	      /* epoch, silent, generation, fault */
};

enum mode { MODE_CHAOS, MODE_OUTAGE, MODE_CRASH };

struct sim {
	uint64_t rng;
	enum mode mode;
	struct fence_params p;
	int n, ngroups;
	int group_of[MAXN], idx_in_group[MAXN];
	int gsize[MAXN], gmem[MAXN][FENCE_MAX_GROUP];
	/* clocks: local = offset + rate * global */
	double rate[MAXN + 1];
	int64_t offset[MAXN + 1];
	/* the server */
	bool srv_up;
	int epoch;
	struct fence_member mem[MAXN];
	bool down[MAXN], moved[MAXN];
	int64_t moved_at[MAXN];
	/* the nodes */
	bool up[MAXN];
	struct fence_agent ag[MAXN];
	int64_t acked[MAXN]; /* the server time of the newest answer received */
	int acked_epoch[MAXN];
	bool attempt[MAXN]; /* its job's attempt runs here (until its lease runs out) */
	int wake_gen[MAXN];
	int64_t crashed_at[MAXN];
	int64_t beat[MAXN]; /* its heartbeat period (its own clock) */
	bool says[MAXN];    /* and its heartbeats say it (else: an agent of before) */
	/* the network: cut[a][b], a's messages to b are lost */
	bool cut[MAXN + 1][MAXN + 1];
	int64_t max_delay;
	/* events */
	struct ev *heap;
	int nheap;
	uint64_t seq;
	int64_t now;
	/* what happened */
	int trace; /* FENCE_TRACE=SEED: say what happens (1 + node to follow) */
	int violations_a, violations_b;
	char why[256];
	int expired, declared, powered_off;
};

static uint64_t rnd(struct sim *s)
{
	uint64_t z = (s->rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int64_t rnd_in(struct sim *s, int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rnd(s) % (uint64_t)(hi - lo + 1));
}

static bool chance(struct sim *s, int pct)
{
	return (int)(rnd(s) % 100) < pct;
}

static int64_t local(const struct sim *s, int who, int64_t global)
{
	return s->offset[who] + (int64_t)(s->rate[who] * (double)global);
}

/* The global time at which who's clock reads l (at or after now). */
static int64_t global_at(const struct sim *s, int who, int64_t l)
{
	int64_t g = (int64_t)((double)(l - s->offset[who]) / s->rate[who]);
	while (local(s, who, g) < l)
		g++;
	return g < s->now ? s->now : g;
}

static void push(struct sim *s, struct ev e)
{
	e.seq = s->seq++;
	assert_true(s->nheap < MAXEV);
	int i = s->nheap++;
	while (i > 0) {
		int up = (i - 1) / 2;
		struct ev *u = &s->heap[up];
		if (u->at < e.at || (u->at == e.at && u->seq < e.seq))
			break;
		s->heap[i] = *u;
		i = up;
	}
	s->heap[i] = e;
}

static struct ev pop(struct sim *s)
{
	struct ev top = s->heap[0], last = s->heap[--s->nheap];
	int i = 0;
	for (;;) {
		int c = 2 * i + 1;
		if (c >= s->nheap)
			break;
		if (c + 1 < s->nheap &&
		    (s->heap[c + 1].at < s->heap[c].at ||
		     (s->heap[c + 1].at == s->heap[c].at && s->heap[c + 1].seq < s->heap[c].seq)))
			c++;
		if (last.at < s->heap[c].at ||
		    (last.at == s->heap[c].at && last.seq < s->heap[c].seq))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	s->heap[i] = last;
	return top;
}

/* A message from `from` to `to`: lost on a cut link, else delayed. */
static void send(struct sim *s, enum ev_kind kind, int from, int to, int64_t a, int64_t b, int c)
{
	if (s->cut[from][to])
		return;
	int64_t d = chance(s, 90) ? rnd_in(s, 0, DMAX) : rnd_in(s, 0, s->max_delay);
	push(s, (struct ev){.at = s->now + d,
			    .kind = kind,
			    .from = from,
			    .to = to,
			    .a = a,
			    .b = b,
			    .c = c});
}

static void fail_a(struct sim *s, int x, const char *what)
{
	if (!s->violations_a++)
		snprintf(s->why, sizeof(s->why), "A: node %d at %lld: %s", x, (long long)s->now,
			 what);
}

/* The lease of x, looked at before anything happens at x: once it ran out
 * the attempt's tasks are stopped for good. */
static void settle_lease(struct sim *s, int x)
{
	if (!s->up[x] || !s->attempt[x])
		return;
	if (!fence_agent_alive(&s->ag[x], local(s, x, s->now))) {
		s->attempt[x] = false;
		s->expired++;
		if (s->mode == MODE_OUTAGE && !s->violations_b++)
			snprintf(s->why, sizeof(s->why),
				 "B: node %d's lease ran out at %lld with only the control plane "
				 "failing",
				 x, (long long)s->now);
	}
	if (s->attempt[x] && s->moved[x])
		fail_a(s, x, "its attempt runs, and its job was moved");
}

static void wake(struct sim *s, int x)
{
	int64_t l = fence_agent_next(&s->ag[x], &s->p, local(s, x, s->now));
	push(s, (struct ev){
			.at = global_at(s, x, l), .kind = EV_WAKE, .to = x, .c = ++s->wake_gen[x]});
}

static void round_end(struct sim *s, int x)
{
	int64_t l = local(s, x, s->now);
	bool r = fence_agent_round_end(&s->ag[x], &s->p, l);
	if (s->trace == x + 1)
		print_message(
			"# %8lld node %d round: %d of %d silent, renewed %d, lease left %lld\n",
			(long long)s->now, x, s->ag[x].silent, s->ag[x].group_size, r,
			(long long)(s->ag[x].lease_until_ms - l));
	wake(s, x);
}

static void node_boot(struct sim *s, int x, bool first)
{
	s->up[x] = true;
	fence_agent_init(&s->ag[x], s->gsize[s->group_of[x]], local(s, x, s->now));
	s->acked[x] = INT64_MIN;
	s->acked_epoch[x] = -1;
	if (first) {
		/* the job starts with a lease from the server's first answer */
		s->ag[x].lease_until_ms = local(s, x, 0) + s->p.lease_ms;
		s->ag[x].heard_ms = local(s, x, 0);
		s->attempt[x] = true;
	}
	push(s,
	     (struct ev){
		     .at = s->now + rnd_in(s, 0, s->beat[x]), .kind = EV_HB, .from = x, .to = SRV});
	wake(s, x);
}

static void server_start(struct sim *s)
{
	s->srv_up = true;
	s->epoch++;
	int64_t l = local(s, SRV, s->now);
	for (int x = 0; x < s->n; x++)
		fence_member_init(&s->mem[x], l);
}

static void declare_down(struct sim *s, int x)
{
	s->down[x] = true;
	s->declared++;
	if (s->mode == MODE_OUTAGE && !s->violations_b++)
		snprintf(s->why, sizeof(s->why), "B: node %d declared DOWN at %lld in an outage", x,
			 (long long)s->now);
	if (!s->moved[x]) {
		s->moved[x] = true;
		s->moved_at[x] = s->now;
	}
	settle_lease(s, x); /* its lease must be over by now */
}

static void server_tick(struct sim *s)
{
	if (s->srv_up) {
		int64_t l = local(s, SRV, s->now);
		for (int x = 0; x < s->n; x++) {
			if (s->down[x])
				continue;
			int g = s->group_of[x];
			struct fence_member grp[FENCE_MAX_GROUP];
			for (int i = 0; i < s->gsize[g]; i++)
				grp[i] = s->mem[s->gmem[g][i]];
			if (fence_may_declare_down(grp, s->gsize[g], s->idx_in_group[x], &s->p, l,
						   NULL)) {
				declare_down(s, x);
			} else if (fence_may_power_off(grp, s->gsize[g], s->idx_in_group[x], &s->p,
						       l, NULL)) {
				/* the command says it is off: its tasks went with it */
				if (s->up[x]) {
					s->up[x] = false;
					s->attempt[x] = false;
				}
				s->powered_off++;
				declare_down(s, x);
			}
		}
	}
	push(s, (struct ev){.at = s->now + 100, .kind = EV_SRV_TICK});
}

static void fault(struct sim *s, const struct ev *e)
{
	int x = (int)e->a, y = (int)e->b;
	if (s->trace)
		print_message("# %8lld fault %d x=%d y=%d\n", (long long)s->now, e->c, x, y);
	switch ((enum fault)e->c) {
	case F_SRV_STOP:
		s->srv_up = false;
		break;
	case F_SRV_START:
		if (!s->srv_up)
			server_start(s);
		break;
	case F_CRASH:
		if (s->up[x]) {
			settle_lease(s, x);
			s->up[x] = false;
			s->attempt[x] = false; /* the machine went, its tasks with it */
			s->crashed_at[x] = s->now;
		}
		break;
	case F_BOOT:
		if (!s->up[x])
			node_boot(s, x, false);
		break;
	case F_CUT:
		s->cut[x][y] = true;
		break;
	case F_MEND:
		s->cut[x][y] = false;
		break;
	case F_GROUP_CUT:
	case F_GROUP_MEND:
		for (int i = 0; i < s->gsize[x]; i++) {
			int m = s->gmem[x][i];
			s->cut[m][SRV] = s->cut[SRV][m] = e->c == F_GROUP_CUT;
		}
		break;
	}
}

static void at(struct sim *s, int64_t t, enum fault f, int x, int y)
{
	push(s, (struct ev){.at = t, .kind = EV_FAULT, .a = x, .b = y, .c = (int)f});
}

/* The schedule of faults of a seed. */
static void schedule(struct sim *s)
{
	if (s->mode == MODE_CRASH) {
		int x = (int)rnd_in(s, 0, s->n - 1);
		at(s, rnd_in(s, 2 * T, 6 * T), F_CRASH, x, 0);
		return;
	}
	int nfaults = (int)rnd_in(s, 1, 8);
	for (int k = 0; k < nfaults; k++) {
		int64_t t0 = rnd_in(s, T, RUN_MS - 6 * T), len = rnd_in(s, T / 8, 5 * T);
		if (chance(s, 50)) /* a blip: shorter than a beat and a delay */
			len = rnd_in(s, T / 64, T / 6);
		int pick = (int)rnd_in(s, 0, s->mode == MODE_OUTAGE ? 1 : 5);
		int x = (int)rnd_in(s, 0, s->n - 1), y = (int)rnd_in(s, 0, s->n);
		switch (pick) {
		case 0: /* the server stops (or is killed) and comes back */
			at(s, t0, F_SRV_STOP, 0, 0);
			at(s, t0 + len, F_SRV_START, 0, 0);
			break;
		case 1: /* a whole group cut from the server */
			x = s->group_of[x];
			at(s, t0, F_GROUP_CUT, x, 0);
			at(s, t0 + len, F_GROUP_MEND, x, 0);
			break;
		case 2: /* a node crashes, and perhaps boots again */
			at(s, t0, F_CRASH, x, 0);
			if (chance(s, 70))
				at(s, t0 + len, F_BOOT, x, 0);
			break;
		case 3: /* a link cut one way */
			if (y == x)
				y = SRV;
			at(s, t0, F_CUT, x, y);
			at(s, t0 + len, F_MEND, x, y);
			break;
		default: /* a node cut from the server both ways, or from a peer */
			if (y == x)
				y = SRV;
			at(s, t0, F_CUT, x, y);
			at(s, t0, F_CUT, y, x);
			at(s, t0 + len, F_MEND, x, y);
			at(s, t0 + len, F_MEND, y, x);
			break;
		}
	}
}

/* Node x sends a heartbeat: its send time, and the newest answer it
 * received (the server's time in it, and that run's epoch). */
static void heartbeat(struct sim *s, int x)
{
	if (!s->up[x])
		return;
	settle_lease(s, x);
	int64_t l = local(s, x, s->now);
	send(s, EV_HB_IN, x, SRV, l, s->acked[x], s->acked_epoch[x]);
	push(s,
	     (struct ev){
		     .at = global_at(s, x, l + s->beat[x]), .kind = EV_HB, .from = x, .to = SRV});
}

static void run_event(struct sim *s, struct ev e)
{
	s->now = e.at;
	switch (e.kind) {
	case EV_FAULT:
		fault(s, &e);
		break;
	case EV_SRV_TICK:
		server_tick(s);
		break;
	case EV_HB:
		heartbeat(s, e.from);
		break;
	case EV_HB_IN: /* a heartbeat reaches the server */
		if (s->srv_up) {
			int64_t l = local(s, SRV, s->now);
			int x = e.from;
			fence_member_beats(&s->mem[x], s->says[x] ? s->beat[x] : 0);
			fence_member_heard(&s->mem[x], &s->p, e.c == s->epoch ? e.b : INT64_MIN, l);
			if (s->down[x])
				s->down[x] = false; /* it is back: its old attempt is over */
			send(s, EV_ANSWER, SRV, x, e.a, l, s->epoch);
		}
		break;
	case EV_ANSWER: { /* the server's answer reaches the node */
		int x = e.to;
		if (!s->up[x])
			break;
		settle_lease(s, x);
		fence_agent_answered(&s->ag[x], &s->p, e.a, local(s, x, s->now));
		if (e.c > s->acked_epoch[x] || (e.c == s->acked_epoch[x] && e.b > s->acked[x])) {
			s->acked[x] = e.b; /* the newest it has */
			s->acked_epoch[x] = e.c;
		}
		settle_lease(s, x);
		wake(s, x);
		break;
	}
	case EV_WAKE: {
		int x = e.to;
		if (!s->up[x] || e.c != s->wake_gen[x])
			break;
		settle_lease(s, x);
		int64_t l = local(s, x, s->now);
		struct fence_agent *a = &s->ag[x];
		if (a->round_start_ms != INT64_MIN && l >= a->round_start_ms + s->p.round_ms) {
			round_end(s, x);
			break;
		}
		if (fence_agent_tick(a, &s->p, l)) {
			int g = s->group_of[x];
			for (int i = 0; i < s->gsize[g]; i++)
				if (s->gmem[g][i] != x)
					send(s, EV_QUERY, x, s->gmem[g][i], a->round_start_ms, 0,
					     0);
			if (s->gsize[g] == 1) {
				round_end(s, x);
				break;
			}
		}
		wake(s, x);
		break;
	}
	case EV_QUERY: {
		int y = e.to;
		if (!s->up[y])
			break;
		settle_lease(s, y);
		bool silent = fence_agent_silent(&s->ag[y], &s->p, local(s, y, s->now));
		send(s, EV_REPLY, y, e.from, e.a, 0, silent);
		break;
	}
	case EV_REPLY: {
		int x = e.to;
		if (!s->up[x])
			break;
		settle_lease(s, x);
		struct fence_agent *a = &s->ag[x];
		fence_agent_round_answer(a, e.a, e.c);
		if (a->round_start_ms != INT64_MIN && a->answered == a->group_size)
			round_end(s, x);
		break;
	}
	}
}

/* Runs one seed; returns the sim for the checks (the caller frees heap). */
static void run(struct sim *s, uint64_t seed, enum mode mode, int agent_adj, int server_adj,
		int64_t power_margin, bool own_margins, bool one_margin)
{
	memset(s, 0, sizeof(*s));
	s->heap = calloc(MAXEV, sizeof(*s->heap));
	s->rng = seed * 0x2545f4914f6cdd1dULL + (uint64_t)mode;
	s->mode = mode;
	const char *tr = getenv("FENCE_TRACE");
	if (tr && (uint64_t)atoll(tr) == seed && getenv("FENCE_NODE"))
		s->trace = 1 + atoi(getenv("FENCE_NODE"));
	fence_params_of(T, &s->p);
	s->p.agent_quorum_adjust = agent_adj;
	s->p.server_quorum_adjust = server_adj;
	/* half the seeds fence by power, after the least silence that is
	 * safe (fence_power_after; a margin given: all of them) */
	s->p.power = seed % 2;
	if (power_margin >= 0 || own_margins || one_margin) { /* the mutants: every seed */
		s->p.power_margin_ms = power_margin >= 0 ? power_margin : 0;
		s->p.power_own_margins_only = own_margins;
		s->p.power_one_own_margin = one_margin;
		s->p.power = true;
	}
	s->n = (int)rnd_in(s, 2, MAXN);
	int plan = (int)rnd_in(s, 0, 3);
	for (int x = 0; x < s->n; x++) {
		s->beat[x] = plan == 0 ? HB : plan == 1 ? T / 40 : rnd_in(s, T / 40, HB);
		s->says[x] = plan < 3 || chance(s, 70);
	}
	/* groups of 1 to 5, in order */
	for (int x = 0; x < s->n;) {
		int g = s->ngroups++, size = (int)rnd_in(s, 1, 5);
		for (int i = 0; i < size && x < s->n; i++, x++) {
			s->group_of[x] = g;
			s->idx_in_group[x] = s->gsize[g];
			s->gmem[g][s->gsize[g]++] = x;
		}
	}
	for (int w = 0; w <= MAXN; w++) {
		s->rate[w] = 1.0 + FENCE_DRIFT * ((double)rnd_in(s, -1000, 1000) / 1000.0);
		s->offset[w] = rnd_in(s, 0, 1000000);
	}
	s->max_delay = mode == MODE_CHAOS ? 2 * T : DMAX;
	server_start(s);
	for (int x = 0; x < s->n; x++)
		node_boot(s, x, true);
	push(s, (struct ev){.at = 0, .kind = EV_SRV_TICK});
	schedule(s);
	while (s->nheap && s->heap[0].at <= RUN_MS)
		run_event(s, pop(s));
	s->now = RUN_MS;
	for (int x = 0; x < s->n; x++)
		settle_lease(s, x);
	free(s->heap);
	s->heap = NULL;
}

/* seeds per check (fewer under the sanitizers, which the same schedules
 * would take five times as long; the plain build runs them all);
 * FENCE_SEEDS=N for a longer run by hand */
static int seeds(void)
{
	const char *e = getenv("FENCE_SEEDS");
	if (e && atoi(e) > 0)
		return atoi(e);
#ifdef __SANITIZE_ADDRESS__
	return 400;
#else
	return 1500;
#endif
}

static void test_a_holds_in_any_schedule(void **state)
{
	struct sim s;
	int moved = 0, expired = 0, powered = 0;
	for (uint64_t seed = 1; seed <= (uint64_t)seeds(); seed++) {
		run(&s, seed, MODE_CHAOS, 0, 0, -1, false, false);
		if (s.violations_a)
			fail_msg("seed %llu: %s", (unsigned long long)seed, s.why);
		moved += s.declared;
		expired += s.expired;
		powered += s.powered_off;
	}
	/* the schedules did cut nodes off: leases ran out, work moved, nodes
	 * were powered off */
	assert_true(moved > seeds() / 4 && expired > seeds() / 4 && powered > seeds() / 8);
	print_message("# A: %d seeds, %d nodes declared DOWN (%d of them powered off), %d leases "
		      "ran out\n",
		      seeds(), moved, powered, expired);
}

static void test_b_holds_when_only_the_control_plane_fails(void **state)
{
	struct sim s;
	for (uint64_t seed = 1; seed <= (uint64_t)seeds(); seed++) {
		run(&s, seed, MODE_OUTAGE, 0, 0, -1, false, false);
		if (s.violations_a || s.violations_b)
			fail_msg("seed %llu: %s", (unsigned long long)seed, s.why);
	}
}

static void test_a_crashed_node_is_declared_down(void **state)
{
	struct sim s;
	int checked = 0, fast = 0;
	int64_t worst = 0, worst_fast = 0, least_after = INT64_MAX;
	for (uint64_t seed = 1; seed <= (uint64_t)seeds() / 3; seed++) {
		run(&s, seed, MODE_CRASH, 0, 0, -1, false, false);
		if (s.violations_a)
			fail_msg("seed %llu: %s", (unsigned long long)seed, s.why);
		for (int x = 0; x < s.n; x++) {
			if (!s.crashed_at[x] || s.gsize[s.group_of[x]] < 2)
				continue; /* a group of one is never declared DOWN by itself */
			checked++;
			int64_t took = s.moved_at[x] - s.crashed_at[x];
			int64_t bound = T + T / 4 + 2 * HB;
			if (s.p.power) {
				/* its last beat arrives a delay after the crash at
				 * most; the server looks every 100 ms */
				int g = s.group_of[x];
				struct fence_member grp[FENCE_MAX_GROUP];
				for (int i = 0; i < s.gsize[g]; i++)
					grp[i] = s.mem[s.gmem[g][i]];
				int64_t after =
					fence_power_after(grp, s.gsize[g], s.idx_in_group[x], &s.p);
				fast++;
				bound = after + DMAX + 2 * 100;
				if (after < least_after)
					least_after = after;
				if (s.moved[x] && took > worst_fast)
					worst_fast = took;
			} else if (s.moved[x] && took > worst) {
				worst = took;
			}
			if (!s.moved[x] || took > bound)
				fail_msg("seed %llu: node %d crashed at %lld, %s",
					 (unsigned long long)seed, x, (long long)s.crashed_at[x],
					 s.moved[x] ? "declared DOWN too late"
						    : "never declared DOWN");
		}
	}
	assert_true(checked > seeds() / 6 && fast > seeds() / 20);
	print_message("# L: %d crashed nodes declared DOWN, at most %lld ms after the crash (node "
		      "timeout %d ms); %d of them powered off, at most %lld ms after (after %lld "
		      "ms of silence at least)\n",
		      checked, (long long)worst, T, fast, (long long)worst_fast,
		      (long long)least_after);
}

/* A power fencing rule weakened (power_margin, own_margins, one_margin as
 * run takes them) breaks B in some outage's schedule. */
static void power_mutant_breaks_b(const char *what, int64_t power_margin, bool own_margins,
				  bool one_margin)
{
	struct sim s;
	int found = 0;
	uint64_t seed;
	for (seed = 1; seed <= 20 * (uint64_t)seeds() && !found; seed++) {
		run(&s, seed, MODE_OUTAGE, 0, 0, power_margin, own_margins, one_margin);
		found = s.violations_b;
	}
	print_message("# power fencing %s: B broken at seed %llu (%s)\n", what,
		      (unsigned long long)(seed - 1), found ? s.why : "never");
	assert_true(found);
}

/* Weakened by one, each rule lets two attempts run at once in some
 * schedule: the checks can fail. */
static void test_weakened_rules_are_caught(void **state)
{
	struct sim s;
	int adj[][2] = {{-1, 0}, {0, -1}};
	for (size_t k = 0; k < 2; k++) {
		int found = 0;
		uint64_t seed;
		for (seed = 1; seed <= 4 * (uint64_t)seeds() && !found; seed++) {
			run(&s, seed, MODE_CHAOS, adj[k][0], adj[k][1], -1, false, false);
			found = s.violations_a;
		}
		print_message("# %s rule weakened: A broken at seed %llu (%s)\n",
			      k ? "the server's" : "the agent's", (unsigned long long)(seed - 1),
			      found ? s.why : "never");
		assert_true(found);
	}
	/* power fencing that takes members heard before and after a cut of
	 * their group for a group in touch: a node of it is powered off */
	power_mutant_breaks_b("without its run of requests", 100 * T, false, false);
	/* power fencing that waits for x's own margins alone: a cut shorter
	 * than its peers' margins (and a delay) breaks no run, and costs x the
	 * cut and two margins */
	power_mutant_breaks_b("by a node's own margins alone", -1, true, false);
	/* power fencing that asks one of x's margins, not two: a blip of its
	 * group's link that takes the beat after x's last word and ends just
	 * before its next costs x more than the blip and one margin */
	power_mutant_breaks_b("with one of a node's margins", -1, false, true);
}

/* The silence power fencing asks: the slowest other member's margin and
 * two of the node's own (a beat and a delay), at 30 s. */
static void test_power_after_follows_the_beats(void **state)
{
	struct fence_params p;
	fence_params_of(30000, &p);
	p.power = true;
	struct fence_member g[3];
	for (int i = 0; i < 3; i++) {
		fence_member_init(&g[i], 0);
		fence_member_beats(&g[i], 1000);
	}
	assert_int_equal(fence_margin(&g[0], &p), 1750);
	/* beats of a second: the others' margin and two of its own */
	assert_int_equal(fence_power_after(g, 3, 0, &p), 5250);
	fence_member_beats(&g[2], 0); /* an agent of before: held to T/10 */
	assert_int_equal(fence_beat(&g[2], &p), 3000);
	assert_int_equal(fence_power_after(g, 3, 0, &p), 3750 + 2 * 1750);
	assert_int_equal(fence_power_after(g, 3, 2, &p), 1750 + 2 * 3750);
	fence_member_beats(&g[1], 60000); /* never more than T/10 */
	assert_int_equal(fence_beat(&g[1], &p), 3000);
	p.power_after_ms = 8000; /* the operator's "after": at least that */
	assert_int_equal(fence_power_after(g, 3, 0, &p), 8000);
	/* silent that long, its group heard without a gap and in touch */
	for (int i = 0; i < 3; i++)
		fence_member_beats(&g[i], 1000);
	p.power_after_ms = 0;
	for (int64_t t = 0; t <= 20000; t += 1000)
		for (int i = 1; i < 3; i++)
			fence_member_heard(&g[i], &p, t, t);
	fence_member_heard(&g[0], &p, 14000, 14000);
	assert_false(fence_may_power_off(g, 3, 0, &p, 19200, NULL));
	for (int i = 1; i < 3; i++)
		fence_member_heard(&g[i], &p, 19500, 19500);
	assert_true(fence_may_power_off(g, 3, 0, &p, 19500, NULL));
	p.power = false;
	assert_false(fence_may_power_off(g, 3, 0, &p, 19500, NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_power_after_follows_the_beats),
		cmocka_unit_test(test_a_holds_in_any_schedule),
		cmocka_unit_test(test_b_holds_when_only_the_control_plane_fails),
		cmocka_unit_test(test_a_crashed_node_is_declared_down),
		cmocka_unit_test(test_weakened_rules_are_caught),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
