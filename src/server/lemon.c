/*
 * Lemon nodes: a node that keeps failing costs every job that lands on it.
 * Each node's record keeps its history (node_record.history): its own
 * failures (a launch its node could not make, tasks lost with it, a fault
 * its agent reported, a failed validation) and what was done about them
 * (drained as a lemon, resumed by hand). The cluster's rule ("lemon":
 * {"failures": N, "within": "24h"}) drains a node with N failures within
 * the window, saying which; a node resumed by hand after that and failing
 * again within the window is drained again at once, without waiting for
 * the count. `tenk nodes history NAME` lists the record.
 *
 * One failure per attempt and kind: the tasks of one attempt lost
 * together, or a node lost and then its tasks reported lost, count once.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* Whether the record already holds this failure: of its kind for its
 * job's attempt, or (no job) the same said again as its newest event. */
static bool known(const struct node_record *r, const struct node_event *ev)
{
	if (!ev->job)
		return r->nhistory && r->history[r->nhistory - 1].kind == ev->kind &&
		       strcmp(r->history[r->nhistory - 1].detail, ev->detail) == 0;
	for (int i = 0; i < r->nhistory; i++)
		if (r->history[i].kind == ev->kind && r->history[i].job == ev->job &&
		    r->history[i].attempt == ev->attempt)
			return true;
	return false;
}

/* Whether the lemon rule drains a node of record r now (why: which
 * failures). A node drained already is left as it is: its record counts
 * on, for when it is resumed. */
static bool lemon(const struct state *s, const struct node_record *r, int64_t now, char *why,
		  size_t size)
{
	int64_t n = s->sched.lemon_failures, from = now - s->sched.lemon_within_s * 1000;
	if (n <= 0 || r->drained)
		return false;
	int last_lemon = -1, last_resume = -1, count = 0;
	for (int i = 0; i < r->nhistory; i++) {
		const struct node_event *e = &r->history[i];
		if (e->kind == NODE_EV_LEMON && e->at_ms >= from)
			last_lemon = i;
		else if (e->kind == NODE_EV_RESUMED)
			last_resume = i;
	}
	struct strbuf sb;
	strbuf_init(&sb);
	for (int i = r->nhistory - 1; i >= 0; i--) {
		const struct node_event *e = &r->history[i];
		if (!node_event_is_failure(e->kind) || e->at_ms < from)
			continue;
		if (count < 3)
			strbuf_addf(&sb, "%s%s%s%s", count ? "; " : "",
				    node_event_kind_name(e->kind), e->detail[0] ? ": " : "",
				    e->detail);
		count++;
	}
	/* (the failure just recorded is the newest, after any resume) */
	bool again = last_lemon >= 0 && last_resume > last_lemon;
	bool drain = again || count >= n;
	if (drain) {
		char span[32];
		tk_format_duration(s->sched.lemon_within_s, span, sizeof(span));
		if (again)
			snprintf(why, size, "lemon: failed again after it was resumed (%.180s)",
				 sb.buf);
		else
			snprintf(why, size, "lemon: %d failures within %s (%.180s)", count, span,
				 sb.buf);
	}
	strbuf_release(&sb);
	return drain;
}

void state_node_event(struct state *s, struct snode *n, enum node_event_kind kind, int64_t job,
		      int attempt, const char *detail, int64_t now)
{
	struct node_record *r = &n->rec;
	struct node_event ev = {.at_ms = now, .kind = kind, .job = job, .attempt = attempt};
	snprintf(ev.detail, sizeof(ev.detail), "%s", detail ? detail : "");
	if (node_event_is_failure(kind) && known(r, &ev))
		return;
	node_record_event(r, &ev);
	state_node_dirty(s, n);
	char why[MODEL_REASON_MAX];
	if (!node_event_is_failure(kind) || !lemon(s, r, now, why, sizeof(why)))
		return;
	log_warn("node %s drained as a %s", n->rec.inv.name, why);
	state_drain(s, n, DRAIN_LEMON, why);
	struct node_event l = {.at_ms = now, .kind = NODE_EV_LEMON};
	snprintf(l.detail, sizeof(l.detail), "%.*s", (int)sizeof(l.detail) - 1, why);
	node_record_event(r, &l);
}
