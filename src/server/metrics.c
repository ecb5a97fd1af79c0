/*
 * GET /metrics: the server in Prometheus' text format. Names are tenk_* in
 * base units (seconds, bytes), counters end in _total, latencies are
 * histograms, and no label is called job or instance (Prometheus' own).
 * Rendered on the loop from the state as it is; the render's own time is
 * a histogram too, so the scrape's cost to the loop is measured.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

const double metrics_pass_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
				      0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5};
const int metrics_pass_nbounds = (int)ARRAY_SIZE(metrics_pass_bounds);
const double metrics_http_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
				      0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
				      1,      2.5,     5,      10,    30,     60};
const int metrics_http_nbounds = (int)ARRAY_SIZE(metrics_http_bounds);
const double metrics_commit_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
					0.05,	0.1,	 0.25,	 0.5,	1,	2.5,   5};
const int metrics_commit_nbounds = (int)ARRAY_SIZE(metrics_commit_bounds);

void metrics_init(struct server *s)
{
	s->metrics.http = xcalloc(api_nroutes + 1, sizeof(*s->metrics.http));
	s->metrics.started_ms = server_now_ms(s);
}

void metrics_release(struct server *s)
{
	free(s->metrics.http);
	s->metrics.http = NULL;
	free(s->metrics.samples);
	s->metrics.samples = NULL;
}

void metrics_answered(struct server *s, const struct request *r)
{
	if (!s->metrics.http)
		return;
	double took = (double)(tk_mono_us() - r->started_us) / 1e6;
	tk_hist_observe(&s->metrics.http[r->route], metrics_http_bounds, metrics_http_nbounds,
			took);
	unsigned cls = r->status / 100;
	s->metrics.by_status[cls < 6 ? cls : 0]++;
}

/* A gauge family whose samples were gathered in `samples` (released). */
static void family_of(struct strbuf *b, const char *name, const char *help, struct strbuf *samples)
{
	prom_family(b, name, "gauge", help);
	strbuf_add(b, samples->buf, samples->len);
	strbuf_release(samples);
}

static void jobs(struct server *s, struct strbuf *b)
{
	struct state *st = &s->st;
	int64_t by_state[JOB_STATE_MAX] = {0};
	/* one pass over the jobs: counts by state, and the running attempts'
	 * training metrics, kept aside until their family's turn */
	struct strbuf train, stalled, stragglers, goodput, mfus, sockets;
	strbuf_init(&sockets);
	strbuf_init(&goodput);
	strbuf_init(&mfus);
	int64_t gnow = server_now_ms(s);
	strbuf_init(&train);
	strbuf_init(&stalled);
	strbuf_init(&stragglers);
	for (size_t i = 0; i < st->njobs; i++) {
		const struct sjob *j = st->jobs[i];
		if (!j)
			continue;
		by_state[j->job.state]++;
		if (j->job.state != JOB_RUNNING || !j->job.nattempts)
			continue;
		const struct attempt *a = &j->job.attempts[j->job.nattempts - 1];
		if (!j->job.system) {
			struct goodput g;
			goodput_of(&j->job, gnow, &g);
			struct prom_labels l;
			prom_labels_init(&l);
			prom_labelf(&l, "job_id", "%lld", (long long)j->job.id);
			prom_label(&l, "owner", j->job.owner);
			if (g.ratio >= 0)
				prom_sample(&goodput, "tenk_job_goodput_ratio", &l, g.ratio);
			double mfu, achieved, peak;
			if (state_job_mfu(st, j, &mfu, &achieved, &peak))
				prom_sample(&mfus, "tenk_job_mfu_ratio", &l, mfu);
		}
		if (state_job_trains(j)) {
			struct prom_labels l;
			prom_labels_init(&l);
			prom_labelf(&l, "job_id", "%lld", (long long)j->job.id);
			prom_label(&l, "owner", j->job.owner);
			prom_sample(&stalled, "tenk_job_stalled", &l, state_job_stalled(j) ? 1 : 0);
			int rank;
			const char *node;
			if (state_job_straggler(j, &rank, &node)) {
				prom_labels_init(&l);
				prom_labelf(&l, "job_id", "%lld", (long long)j->job.id);
				prom_labelf(&l, "rank", "%d", rank);
				prom_label(&l, "node", node);
				prom_sample(&stragglers, "tenk_job_straggler", &l, 1);
			}
		}
		for (int k = 0; k < a->nnodes; k++) {
			if (!a->nodes[k].nccl_fallback)
				continue;
			struct prom_labels l;
			prom_labels_init(&l);
			prom_labelf(&l, "job_id", "%lld", (long long)j->job.id);
			prom_label(&l, "node", a->nodes[k].name);
			prom_sample(&sockets, "tenk_job_nccl_socket_connections", &l,
				    a->nodes[k].nccl[NCCL_TR_SOCKET]);
		}
		for (int k = 0; a->train && k < a->train->last.n; k++) {
			struct prom_labels l;
			prom_labels_init(&l);
			prom_labelf(&l, "job_id", "%lld", (long long)j->job.id);
			prom_labelf(&l, "attempt", "%d", a->number);
			prom_label(&l, "name", a->train->last.name[k]);
			prom_sample(&train, "tenk_job_metric", &l, a->train->last.value[k]);
		}
	}
	prom_family(b, "tenk_jobs", "gauge", "Jobs the server knows, by state.");
	int64_t held = 0;
	for (int k = 0; k < JOB_STATE_MAX; k++) {
		struct prom_labels l;
		prom_labels_init(&l);
		prom_label(&l, "state", job_state_name((enum job_state)k));
		held += by_state[k];
		prom_sample(b, "tenk_jobs", &l, (double)(by_state[k] + st->gone_by_state[k]));
	}
	prom_family(b, "tenk_jobs_in_memory", "gauge",
		    "Jobs held in memory: all but those settled a while ago, which the store "
		    "answers for.");
	prom_sample(b, "tenk_jobs_in_memory", NULL, (double)held);
	family_of(b, "tenk_job_metric",
		  "The newest value of each training metric a running attempt wrote to "
		  "$TENK_METRICS.",
		  &train);
	family_of(b, "tenk_job_stalled",
		  "1 when a running job that writes training lines has written none for its "
		  "stall window (tenk show says why), else 0.",
		  &stalled);
	family_of(b, "tenk_job_straggler",
		  "1 for a running job's rank whose time a step is over 1.5 times its gang's "
		  "median (its lines say their rank), with its node.",
		  &stragglers);
	family_of(b, "tenk_job_nccl_socket_connections",
		  "A running job's NCCL connections between nodes over sockets on a node with an "
		  "ACTIVE RDMA port, as its NCCL log says (--nccl-check): a silent fall back.",
		  &sockets);
	family_of(b, "tenk_job_goodput_ratio",
		  "A running job's effective training time: the time its kept training took "
		  "over the time since it first started (tenk show has the breakdown).",
		  &goodput);
	family_of(b, "tenk_job_mfu_ratio",
		  "A running job's model FLOPs utilisation: the FLOP/s its training lines say "
		  "(tokens_per_s x flops_per_token, ...) over the peak of the cards it holds.",
		  &mfus);
	prom_family(b, "tenk_jobs_submitted_total", "counter", "Jobs submitted (the newest id).");
	prom_sample(b, "tenk_jobs_submitted_total", NULL, (double)st->njobs);

	/* waiting jobs by queue and class: the class lists hold only those */
	prom_family(b, "tenk_jobs_pending", "gauge", "Jobs waiting to start, by queue and class.");
	int64_t *count = xcalloc((size_t)st->nqueues + 1, sizeof(*count));
	int64_t *oldest = xcalloc((size_t)st->nqueues + 1, sizeof(*oldest));
	struct strbuf age;
	strbuf_init(&age);
	int64_t now = server_now_ms(s);
	for (int c = 0; c < st->sched.nclasses; c++) {
		memset(count, 0, sizeof(*count) * ((size_t)st->nqueues + 1));
		memset(oldest, 0, sizeof(*oldest) * ((size_t)st->nqueues + 1));
		for (struct sjob *j = st->classes[c].pend_head; j; j = j->pend_next) {
			int q = j->queue ? j->queue->index : st->nqueues;
			count[q]++;
			if (!oldest[q] || j->job.submit_ms < oldest[q])
				oldest[q] = j->job.submit_ms;
		}
		for (int q = 0; q <= st->nqueues; q++) {
			if (!count[q] && q == st->nqueues)
				continue;
			struct prom_labels l;
			prom_labels_init(&l);
			prom_label(&l, "queue", q < st->nqueues ? st->queues[q]->spec.name : "");
			prom_label(&l, "class", st->classes[c].spec.name);
			prom_sample(b, "tenk_jobs_pending", &l, (double)count[q]);
			if (count[q]) {
				strbuf_addf(&age, "tenk_jobs_pending_oldest_age_seconds{%s} ",
					    l.text);
				strbuf_addf(&age, "%.3f\n", (double)(now - oldest[q]) / 1000.0);
			}
		}
	}
	prom_family(b, "tenk_jobs_pending_oldest_age_seconds", "gauge",
		    "How long the longest-waiting job of each queue and class has waited.");
	strbuf_add(b, age.buf, age.len);
	strbuf_release(&age);
	free(count);
	free(oldest);
}

static void queues(struct server *s, struct strbuf *b)
{
	struct state *st = &s->st;
	prom_family(
		b, "tenk_queue_accelerators_in_use", "gauge",
		"Accelerators held by each queue's running attempts (fractions count as such).");
	for (int q = 0; q < st->nqueues; q++) {
		struct prom_labels l;
		prom_labels_init(&l);
		prom_label(&l, "queue", st->queues[q]->spec.name);
		prom_sample(b, "tenk_queue_accelerators_in_use", &l,
			    (double)st->queues[q]->use_milli / MODEL_MILLI);
	}
	prom_family(b, "tenk_queue_budget", "gauge",
		    "Each queue's budget for its period (queues with one), in the catalogue's "
		    "currency.");
	prom_family(b, "tenk_queue_spent", "gauge",
		    "What each queue with a budget has spent in its period so far.");
	prom_family(b, "tenk_queue_budget_state", "gauge",
		    "Each budget: 0 within it, 1 at 80% or more, 2 spent (new jobs wait).");
	for (int q = 0; q < st->nqueues; q++) {
		if (st->queues[q]->spec.budget <= 0)
			continue;
		struct prom_labels l;
		prom_labels_init(&l);
		prom_label(&l, "queue", st->queues[q]->spec.name);
		prom_label(&l, "period", st->queues[q]->spec.budget_period);
		const struct squeue *sq = st->queues[q];
		prom_sample(b, "tenk_queue_budget", &l, sq->spec.budget);
		prom_sample(b, "tenk_queue_spent", &l, sq->spent);
		prom_sample(b, "tenk_queue_budget_state", &l,
			    sq->budget_spent			 ? 2
			    : sq->spent >= 0.8 * sq->spec.budget ? 1
								 : 0);
	}
	prom_family(b, "tenk_queue_quota_accelerators", "gauge",
		    "Each queue's guaranteed accelerators (queues with a quota).");
	for (int q = 0; q < st->nqueues; q++) {
		if (st->queues[q]->spec.quota_milli < 0)
			continue;
		struct prom_labels l;
		prom_labels_init(&l);
		prom_label(&l, "queue", st->queues[q]->spec.name);
		prom_sample(b, "tenk_queue_quota_accelerators", &l,
			    (double)st->queues[q]->spec.quota_milli / MODEL_MILLI);
	}
}

/* The accelerators of one model on nodes in one state: held, and not. */
struct model_count {
	char model[MODEL_NAME_MAX];
	double allocated, idle, unavailable;
};

static void nodes(struct server *s, struct strbuf *b)
{
	struct state *st = &s->st;
	int64_t by_state[NODE_STATE_MAX] = {0};
	int64_t mono = tk_mono_ms();
	struct model_count *models = NULL;
	size_t nmodels = 0, alloc = 0;
	prom_family(b, "tenk_node_heartbeat_age_seconds", "gauge",
		    "Time since each node's agent was last heard from.");
	/* each node's state, kept aside until its family's turn */
	struct strbuf states;
	strbuf_init(&states);
	for (int i = 0; i < st->nnodes; i++) {
		const struct snode *n = st->nodes[i];
		enum node_state ns = state_node_state(st, n);
		by_state[ns]++;
		/* (the nodes that take work are most, and need no series each:
		 * tenk_nodes counts them) */
		if (ns != NODE_UP || n->rec.drained) {
			struct prom_labels sl;
			prom_labels_init(&sl);
			prom_label(&sl, "node", n->rec.inv.name);
			prom_label(&sl, "state", node_state_name(ns));
			prom_label(&sl, "drained_by", drain_source_name(n->rec.drain_source));
			prom_sample(&states, "tenk_node_state", &sl, 1);
		}
		if (n->last_seen_ms > 0) {
			struct prom_labels l;
			prom_labels_init(&l);
			prom_label(&l, "node", n->rec.inv.name);
			prom_sample(b, "tenk_node_heartbeat_age_seconds", &l,
				    (double)(mono - n->last_seen_ms) / 1000.0);
		}
		bool usable = ns == NODE_UP;
		for (int d = 0; d < n->rec.inv.naccel; d++) {
			const char *model = n->rec.inv.accel[d].model;
			size_t m = 0;
			while (m < nmodels && strcmp(models[m].model, model) != 0)
				m++;
			if (m == nmodels) {
				xgrow(&models, &alloc, nmodels + 1, sizeof(*models));
				memset(&models[m], 0, sizeof(*models));
				snprintf(models[m].model, sizeof(models[m].model), "%s", model);
				nmodels++;
			}
			double used = n->dev_used[d] / (double)MODEL_MILLI;
			models[m].allocated += used;
			if (usable)
				models[m].idle += 1 - used;
			else
				models[m].unavailable += 1 - used;
		}
	}
	prom_family(b, "tenk_node_state", "gauge",
		    "Each node that does not take work: its state and what drained it "
		    "(drained_by: operator, fault, validation, lemon; empty when not drained). "
		    "Nodes UP and not drained have none.");
	strbuf_add(b, states.buf, states.len);
	strbuf_release(&states);
	prom_family(b, "tenk_nodes", "gauge", "Nodes by state.");
	for (int k = 0; k < NODE_STATE_MAX; k++) {
		struct prom_labels l;
		prom_labels_init(&l);
		prom_label(&l, "state", node_state_name((enum node_state)k));
		prom_sample(b, "tenk_nodes", &l, (double)by_state[k]);
	}
	prom_family(b, "tenk_accelerators", "gauge",
		    "Accelerators by model: allocated, idle on nodes that take work, and "
		    "unavailable (on nodes down, drained or being validated).");
	for (size_t m = 0; m < nmodels; m++) {
		static const char *const what[] = {"allocated", "idle", "unavailable"};
		double v[] = {models[m].allocated, models[m].idle, models[m].unavailable};
		for (int k = 0; k < 3; k++) {
			struct prom_labels l;
			prom_labels_init(&l);
			prom_label(&l, "model_name", models[m].model);
			prom_label(&l, "state", what[k]);
			prom_sample(b, "tenk_accelerators", &l, v[k]);
		}
	}
	free(models);
}

static void timings(struct server *s, struct strbuf *b)
{
	prom_family(b, "tenk_server_loop_busy_seconds", "histogram",
		    "The server loop's iterations: time each held the loop (everything but "
		    "waiting for I/O); heartbeats and answers wait behind it.");
	prom_hist(b, "tenk_server_loop_busy_seconds", NULL, &s->metrics.loop_busy,
		  metrics_pass_bounds, metrics_pass_nbounds);
	prom_family(b, "tenk_store_writable", "gauge",
		    "1 while the store takes writes; 0 while it fails them (changes are "
		    "refused with 503 and the write is tried again each second).");
	prom_sample(b, "tenk_store_writable", NULL, s->store_down ? 0 : 1);
	prom_family(b, "tenk_store_write_failures_total", "counter",
		    "Writes of the store that failed and were put back to try again.");
	prom_sample(b, "tenk_store_write_failures_total", NULL, (double)s->store_failures);
	prom_family(b, "tenk_store_jobs_removed_total", "counter",
		    "Settled jobs whose documents retention removed (keep_jobs) since the start.");
	prom_sample(b, "tenk_store_jobs_removed_total", NULL, (double)s->retain_removed);
	prom_family(b, "tenk_store_jobs_forgotten_total", "counter",
		    "Settled jobs whose rows and accounting records retention removed "
		    "(keep_accounting) since the start.");
	prom_sample(b, "tenk_store_jobs_forgotten_total", NULL, (double)s->retain_forgotten);
	prom_family(b, "tenk_server_loop_busy_max_seconds", "gauge",
		    "The longest one iteration of the server loop held it since the start.");
	prom_sample(b, "tenk_server_loop_busy_max_seconds", NULL,
		    (double)s->metrics.loop_busy_max_ns / 1e9);
	prom_family(b, "tenk_scheduler_pass_duration_seconds", "histogram",
		    "Scheduling passes: snapshot, placement and applying the decisions.");
	prom_hist(b, "tenk_scheduler_pass_duration_seconds", NULL, &s->metrics.pass,
		  metrics_pass_bounds, metrics_pass_nbounds);
	prom_family(b, "tenk_scheduler_placements_total", "counter", "Attempts placed.");
	prom_sample(b, "tenk_scheduler_placements_total", NULL, (double)s->st.stats.placements);
	prom_family(b, "tenk_scheduler_deferred_submissions_total", "counter",
		    "Submissions that could not start at once, judged without a pass (the "
		    "deferred pass gives their reasons).");
	prom_sample(b, "tenk_scheduler_deferred_submissions_total", NULL,
		    (double)s->st.arrivals.deferred);
	prom_family(b, "tenk_scheduler_limited_passes_total", "counter",
		    "Passes that started max_starts_per_pass jobs and left the rest to the next.");
	prom_sample(b, "tenk_scheduler_limited_passes_total", NULL, (double)s->st.stats.limited);

	struct tk_hist commit;
	uv_mutex_lock(&s->wq.mu);
	commit = s->wq.commit_hist;
	uv_mutex_unlock(&s->wq.mu);
	prom_family(b, "tenk_store_commit_duration_seconds", "histogram",
		    "Store transactions (group commits), each with its fsync.");
	prom_hist(b, "tenk_store_commit_duration_seconds", NULL, &commit, metrics_commit_bounds,
		  metrics_commit_nbounds);

	prom_family(b, "tenk_http_request_duration_seconds", "histogram",
		    "API requests from their headers to their answer (long-polls include their "
		    "wait), by route.");
	for (size_t i = 0; i <= api_nroutes; i++) {
		if (!s->metrics.http[i].count)
			continue;
		struct prom_labels l;
		prom_labels_init(&l);
		prom_label(&l, "method", i ? api_routes[i - 1].method : "");
		prom_label(&l, "route", i ? api_routes[i - 1].pattern : "unmatched");
		prom_hist(b, "tenk_http_request_duration_seconds", &l, &s->metrics.http[i],
			  metrics_http_bounds, metrics_http_nbounds);
	}
	prom_family(b, "tenk_http_responses_total", "counter", "API answers by status class.");
	for (int c = 1; c < 6; c++) {
		struct prom_labels l;
		prom_labels_init(&l);
		prom_labelf(&l, "code", "%dxx", c);
		prom_sample(b, "tenk_http_responses_total", &l, (double)s->metrics.by_status[c]);
	}
	prom_family(b, "tenk_http_connections", "gauge", "Open API connections.");
	prom_sample(b, "tenk_http_connections", NULL, (double)s->nconns);

	prom_family(b, "tenk_metrics_render_duration_seconds", "histogram",
		    "This endpoint's renders: what a scrape costs the server's loop.");
	prom_hist(b, "tenk_metrics_render_duration_seconds", NULL, &s->metrics.render,
		  metrics_pass_bounds, metrics_pass_nbounds);
}

void metrics_role(struct server *s, struct strbuf *b)
{
	prom_family(b, "tenk_server_active", "gauge",
		    "1 on the active server; 0 on a standby, which waits for the store's lease "
		    "(PostgreSQL).");
	prom_sample(b, "tenk_server_active", NULL, s->role.standby ? 0 : 1);
	if (!s->role.standby && !s->role.leased)
		return;
	prom_family(b, "tenk_server_lease_term", "gauge",
		    "The term of the store's lease: raised at every takeover.");
	prom_sample(b, "tenk_server_lease_term", NULL,
		    (double)(s->role.standby ? s->role.seen.term : s->role.term));
	prom_family(b, "tenk_server_role_seconds", "gauge",
		    "How long this server has been in its role (active, or standby).");
	prom_sample(b, "tenk_server_role_seconds", NULL,
		    (double)(tk_mono_ms() - s->role.since_mono) / 1000.0);
}

void h_metrics(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	int64_t t0 = tk_mono_us();
	struct strbuf b;
	strbuf_init(&b);
	prom_family(&b, "tenk_build_info", "gauge", "The server's version.");
	struct prom_labels l;
	prom_labels_init(&l);
	prom_label(&l, "version", TENK_VERSION);
	prom_sample(&b, "tenk_build_info", &l, 1);
	prom_family(&b, "tenk_server_start_time_seconds", "gauge",
		    "When the server started, in seconds since the epoch.");
	prom_sample(&b, "tenk_server_start_time_seconds", NULL,
		    (double)s->metrics.started_ms / 1000.0);
	/* what a certificate that runs out would stop: every client and agent */
	prom_family(&b, "tenk_server_certificate_expiry_timestamp_seconds", "gauge",
		    "When the certificate the server serves (cert=\"server\"), and the cluster CA "
		    "it made (cert=\"ca\"), stop being valid, in seconds since the epoch.");
	const int64_t expiry[] = {s->tls_not_after, s->tls_ca_not_after};
	for (int k = 0; k < 2; k++) {
		if (!expiry[k])
			continue;
		prom_labels_init(&l);
		prom_label(&l, "cert", k ? "ca" : "server");
		prom_sample(&b, "tenk_server_certificate_expiry_timestamp_seconds", &l,
			    (double)expiry[k]);
	}
	metrics_role(s, &b);
	jobs(s, &b);
	queues(s, &b);
	nodes(s, &b);
	timings(s, &b);
	tk_hist_observe(&s->metrics.render, metrics_pass_bounds, metrics_pass_nbounds,
			(double)(tk_mono_us() - t0) / 1e6);
	reply_text(r, 200, strbuf_detach(&b), "text/plain; version=0.0.4; charset=utf-8");
}
