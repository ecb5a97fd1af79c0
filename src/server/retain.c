/*
 * Retention: the store does not grow without bound. A job settled more
 * than "keep_jobs" ago (default 90 days) leaves the store but for its row
 * (id, state, owner, when it settled), which its accounting records need;
 * after "keep_accounting" (default: forever) the row and the records go
 * too; audit rows go "keep_audit" after they were written (default a
 * year). A job removed is no longer shown or read back (GET /v1/jobs/N
 * says there is no such job), and its id is never given again (ids.c).
 *
 * The work is the cron's, a bounded slice each tick: the settled jobs out
 * of memory are scanned from a cursor (their settling times are in the
 * state, struct sgone), and each removal goes into the next batch.
 */
#include "internal.h"

#define RETAIN_BUDGET_US 2000	    /* a tick's scan, about */
#define RETAIN_SCAN_PER_TICK 262144 /* ids a tick looks at, at most */
#define RETAIN_CHANGES_PER_TICK 2000
#define RETAIN_AUDIT_EVERY_MS 10000
#define RETAIN_AUDIT_MAX 10000 /* audit rows one batch removes, at most */

void server_retain_tick(struct server *s)
{
	struct state *st = &s->st;
	const struct sched_config *c = &st->sched;
	int64_t now_ms = server_now_ms(s), now_s = now_ms / 1000;
	if (c->keep_jobs_s || c->keep_accounting_s) {
		int64_t jobs_before = c->keep_jobs_s ? now_s - c->keep_jobs_s : INT64_MIN;
		int64_t acct_before =
			c->keep_accounting_s ? now_s - c->keep_accounting_s : INT64_MIN;
		int64_t until = tk_mono_us() + RETAIN_BUDGET_US;
		int changes = 0;
		for (int n = 0; n < RETAIN_SCAN_PER_TICK && changes < RETAIN_CHANGES_PER_TICK;
		     n++) {
			if (s->retain_next >= st->njobs) {
				s->retain_next = 0; /* a round a tick at most */
				break;
			}
			size_t i = s->retain_next++;
			const struct sgone *g = &st->gone[i];
			int64_t id = (int64_t)i + 1;
			if (!g->state) {
				/* held in memory, or no job */
			} else if ((int64_t)g->settled_s < acct_before) {
				store_batch_del_job(s->fill.batch, id);
				store_batch_set_acct(s->fill.batch, id, NULL, 0);
				state_gone_forget(st, id);
				s->retain_forgotten++;
				changes++;
			} else if (!g->removed && (int64_t)g->settled_s < jobs_before) {
				store_batch_strip_job(s->fill.batch, id);
				state_gone_remove(st, id);
				s->retain_removed++;
				changes++;
			}
			if ((n & 1023) == 1023 && tk_mono_us() >= until)
				break;
		}
		if (changes)
			server_kick(s); /* written with the next batch */
	}
	int64_t mono = tk_mono_ms();
	if (c->keep_audit_s && mono - s->retain_audit_mono >= RETAIN_AUDIT_EVERY_MS) {
		s->retain_audit_mono = mono;
		int64_t before = now_ms - c->keep_audit_s * 1000;
		store_batch_prune_audit(s->fill.batch, before, RETAIN_AUDIT_MAX);
		audit_forget_before(s, before);
		server_kick(s);
	}
}
