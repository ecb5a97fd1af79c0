/*
 * The JSON the state machine is seen through: each node's work for its
 * agent (model/wire.h), and nodes, jobs and queues for the API.
 */
#include "state.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* What node node_index runs of attempt a. The spec borrows the job's strings;
 * the caller frees spec->devs_off and spec->devs. */
static void part_spec(const struct state *s, struct sjob *j, const struct attempt *a,
		      int node_index, struct work_spec *sp)
{
	const struct job_request *r = &j->job.req;
	const struct attempt_node *an = &a->nodes[node_index];
	int per = r->gpu_milli >= MODEL_MILLI ? r->gpu_milli / MODEL_MILLI : 0;
	memset(sp, 0, sizeof(*sp));
	sp->devs_off = xcalloc((size_t)r->tasks_per_node + 1, sizeof(int));
	sp->devs = xcalloc((size_t)r->tasks_per_node * (size_t)MAX(an->ndev, 1), sizeof(int));
	int k = 0;
	for (int t = 0; t < r->tasks_per_node; t++) {
		sp->devs_off[t] = k;
		if (j->job.system) {
			/* a validation run: its one task sees every device */
			for (int d = 0; d < an->ndev; d++)
				sp->devs[k++] = an->devs[d];
		} else if (per) {
			for (int d = t * per; d < (t + 1) * per && d < an->ndev; d++)
				sp->devs[k++] = an->devs[d];
		} else if (r->gpu_milli > 0 && an->ndev > 0) {
			sp->devs[k++] = an->devs[0];
		}
	}
	sp->devs_off[r->tasks_per_node] = k;
	sp->name = r->name;
	sp->argc = r->argc;
	sp->argv = r->argv;
	sp->cwd = r->cwd;
	sp->nenv = r->nenv;
	sp->env = r->env;
	sp->output = r->output ? r->output : (char *)MODEL_DEFAULT_OUTPUT;
	sp->node_rank = node_index;
	sp->nnodes = a->nnodes;
	sp->tasks_per_node = r->tasks_per_node;
	sp->world_size = a->ntasks;
	sp->milli = an->milli;
	snprintf(sp->master_addr, sizeof(sp->master_addr), "%s", a->master_addr);
	sp->master_port = a->master_port;
	sp->time_limit_s = r->time_limit_s;
	sp->grace_s = r->grace_s;
	sp->system = j->job.system;
	snprintf(sp->run_as, sizeof(sp->run_as), "%s", j->job.run_as);
	snprintf(sp->owner, sizeof(sp->owner), "%s", j->job.owner);
	snprintf(sp->queue, sizeof(sp->queue), "%s", j->queue ? j->queue->spec.name : "");
	sp->allow_root = s->sched.allow_root_jobs;
	sp->cpus = r->tasks_per_node * r->cpus_per_task;
	sp->mem_mib = r->mem_mib;
	sp->image = r->image;
	sp->nmounts = r->nmounts;
	sp->mounts = r->mounts;
	sp->ckpt_marker = r->ckpt_marker;
	sp->error = r->error;
	if (j->job.array_job) {
		sp->array_job = j->job.array_job;
		sp->array_index = j->job.array_index;
		sp->array_count = j->job.array_count;
	}
	sp->slurm_env = r->slurm_env;
	sp->nccl_check = r->nccl_check;
	sp->pty = r->pty;
	sp->signal = r->signal;
	sp->signal_before_s = r->signal_before_s;
	/* a probed job (a service's replica) serves on the port its attempt
	 * holds on the node */
	sp->port = r->probe ? a->master_port : 0;
}

/* Whose part of the tag attempt a restores node k restores: 0, its own;
 * 1 + the first node rank that has one, where a just-in-time commit lacks
 * k's (work_item.restore_from). */
static int restore_from(const struct sjob *j, const struct attempt *a, int k)
{
	if (!a->restore_tag[0])
		return 0;
	for (int i = 0; i < j->job.nckpts; i++) {
		const struct ckpt *c = &j->job.ckpts[i];
		if (c->attempt != a->restore_attempt || strcmp(c->tag, a->restore_tag) != 0)
			continue;
		if (k < c->nnodes && c->digests[k][0])
			return 0;
		for (int o = 0; o < c->nnodes; o++)
			if (c->digests[o][0])
				return o + 1;
	}
	return 0;
}

json_t *state_work_pack(struct state *s, struct snode *n, uint64_t since_gen, int protocol)
{
	struct wire_work w = {.gen = n->work_gen};
	snprintf(w.epoch, sizeof(w.epoch), "%s", s->cfg.epoch);
	w.items = xcalloc((size_t)n->nparts + 1, sizeof(*w.items));
	struct work_spec *specs = xcalloc((size_t)n->nparts + 1, sizeof(*specs));
	for (int i = 0; i < n->nparts; i++) {
		const struct part *p = &n->parts[i];
		const struct attempt *a = &p->job->job.attempts[p->attempt - 1];
		/* nor one whose failure waits to be judged: its tasks stop now,
		 * unless they write a checkpoint first (--ckpt-signal) */
		bool failing = p->job->fail_ev && p->job->fail_ev->attempt == a->number;
		if (!state_attempt_is_current(p->job, a) ||
		    (failing && !state_jit_waits(s, p->job)))
			continue;
		struct work_item *it = &w.items[w.nitems++];
		it->job = p->job->job.id;
		it->attempt = p->attempt;
		if (failing)
			it->signal_now = p->job->job.req.ckpt_signal;
		if (p->job->job.req.probe) {
			it->has_probe = true;
			it->port = a->master_port;
			it->probe = *p->job->job.req.probe;
		}
		it->limit_s = p->job->job.req.time_limit_s;
		/* each node of a validation run runs the image it has */
		snprintf(it->digest, sizeof(it->digest), "%s",
			 !a->digest[0]	      ? ""
			 : p->job->job.system ? a->nodes[p->node_index].digest
					      : a->digest);
		if (s->sched.checkpoint_store[0] && !p->job->job.system) {
			snprintf(it->ckpt_store, sizeof(it->ckpt_store), "%s",
				 s->sched.checkpoint_store);
			snprintf(it->restore_tag, sizeof(it->restore_tag), "%s", a->restore_tag);
			it->restore_step = a->restore_step;
			it->restore_attempt = a->restore_attempt;
			it->restore_go = a->restore_go;
			it->restore_from = restore_from(p->job, a, p->node_index);
			/* DCP marks a tag on one node: what any node uploaded is
			 * complete on every node */
			for (int k = 0; p->job->job.req.ckpt_marker == CKPT_DCP && k < a->npend &&
					k < MODEL_MAX_CKPT_PENDING;
			     k++) {
				snprintf(it->marked[it->nmarked].tag, MODEL_CKPT_TAG_MAX, "%s",
					 a->pend[k].tag);
				it->marked[it->nmarked++].step = a->pend[k].step;
			}
			/* node rank 0 keeps the store tidy */
			for (int k = 0; p->node_index == 0 && k < p->job->job.nckpts; k++) {
				const struct ckpt *c = &p->job->job.ckpts[k];
				snprintf(it->keep[it->nkeep].tag, MODEL_CKPT_TAG_MAX, "%s", c->tag);
				it->keep[it->nkeep].step = c->step;
				it->keep[it->nkeep++].attempt = c->attempt;
			}
		}
		if (p->gen_added > since_gen) {
			it->spec = &specs[i];
			part_spec(s, p->job, a, p->node_index, it->spec);
			/* a protocol-1 agent writes no marks, and knows no such key */
			it->spec->no_marks = protocol >= 2 && p->job->job.req.no_attempt_marks;
		}
	}
	w.has_services = s->services_on;
	w.nservices = s->nservices;
	w.services = s->services;
	w.pulls = xcalloc((size_t)n->npulls + 1, sizeof(*w.pulls));
	for (int i = 0; i < n->npulls; i++)
		if (n->pulls[i].state == PULL_RUNNING)
			snprintf(w.pulls[w.npulls++], MODEL_IMAGE_MAX, "%s", n->pulls[i].ref);
	json_t *o = wire_work_pack(&w);
	free(w.pulls);
	for (int i = 0; i < n->nparts; i++) {
		free(specs[i].devs_off);
		free(specs[i].devs);
	}
	free(specs);
	free(w.items);
	return o;
}

json_t *state_work_unchanged_pack(struct state *s, struct snode *n)
{
	struct wire_work w = {.gen = n->work_gen, .unchanged = true};
	snprintf(w.epoch, sizeof(w.epoch), "%s", s->cfg.epoch);
	return wire_work_pack(&w);
}

json_t *state_node_pack(struct state *s, const struct snode *n)
{
	const struct node_inventory *inv = &n->rec.inv;
	const char *state = node_state_name(state_node_state(s, n));
	json_t *accels = json_array();
	for (int d = 0; d < inv->naccel; d++) {
		const struct accel *a = &inv->accel[d];
		json_array_append_new(accels,
				      json_pack("{s:i, s:s, s:s, s:I, s:f, s:i, s:f}", "index",
						a->index, "uuid", a->uuid, "model", a->model,
						"mem_mib", (json_int_t)a->mem_mib, "tflops",
						a->tflops, "nvlink_domain", a->nvlink_domain,
						"used", n->dev_used[d] / (double)MODEL_MILLI));
	}
	json_t *jobs = json_array();
	for (int i = 0; i < n->nparts; i++)
		json_array_append_new(jobs, json_integer(n->parts[i].job->job.id));
	json_t *o =
		json_pack("{s:s, s:s, s:b, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:o, s:o, s:s}",
			  "name", inv->name, "state", state, "drained", n->rec.drained, "reason",
			  n->rec.drain_reason, "addr", inv->addr, "topology", inv->topology, "cpus",
			  inv->cpus, "cpus_used", n->cpus_used, "mem_mib", (json_int_t)inv->mem_mib,
			  "mem_used_mib", (json_int_t)n->mem_used, "accelerators", accels, "jobs",
			  jobs, "agent_id", n->rec.agent_id);
	json_t *iso = node_isolation_pack(inv);
	if (iso) /* what its cgroups cannot limit */
		json_object_set_new(o, "isolation", iso);
	json_object_set_new(o, "labels", node_labels_pack(n->labels));
	if (n->rec.labels_set[0]) /* those an operator set */
		json_object_set_new(o, "labels_set", node_labels_pack(n->rec.labels_set));
	json_object_set_new(o, "domain", json_string(inv->domain));
	json_t *net = node_network_pack(inv);
	if (net) /* its fabric, as its agent read it */
		json_object_set_new(o, "network", net);
	/* its software stack, as its agent read it (null: an older agent) */
	json_object_set_new(o, "stack",
			    inv->has_stack ? node_stack_pack(&inv->stack) : json_null());
	json_t *pools = json_array();
	for (int i = 0; i < s->sched.npools; i++)
		if (n->pools & (1ULL << i))
			json_array_append_new(pools, json_string(s->sched.pools[i].name));
	json_object_set_new(o, "pools", pools);
	json_t *taints = json_array();
	for (const char *p = n->rec.taints, *next; *p; p = next) {
		size_t len = model_list_item(p, &next);
		json_array_append_new(taints, json_stringn(p, len));
	}
	json_object_set_new(o, "taints", taints);
	json_t *wins = json_array();
	for (int i = 0; i < n->rec.nwindows; i++)
		json_array_append_new(wins, node_window_pack(&n->rec.windows[i]));
	json_object_set_new(o, "reservations", wins);
	json_t *v = node_verdict_pack(&n->rec);
	json_object_set_new(o, "validation", v ? v : json_null());
	json_object_set_new(o, "drain_source", json_string(drain_source_name(n->rec.drain_source)));
	json_t *h = json_array();
	for (int i = 0; i < n->rec.nhistory; i++)
		json_array_append_new(h, node_event_pack(&n->rec.history[i]));
	json_object_set_new(o, "history", h);
	json_object_set_new(o, "agent_stopping", json_boolean(n->agent_stopping));
	if (n->fence.beat_ms) /* how often its agent said it beats */
		json_object_set_new(o, "heartbeat_ms", json_integer(n->fence.beat_ms));
	json_t *lent = state_node_spare_lent(s, n);
	if (lent) /* to whom its spare's job lends it meanwhile */
		json_object_set_new(o, "spare_lent_to", lent);
	json_t *spare = state_node_spare_for(s, n);
	if (spare) /* held idle for these jobs (--spares) */
		json_object_set_new(o, "spare_for", spare);
	if (n->pool_spare) /* held idle in the cluster's spare pool */
		json_object_set_new(o, "pool_spare", json_true());
	if (n->pool_lent_to) /* and lent meanwhile to this preemptible job */
		json_object_set_new(o, "pool_lent_to", json_integer(n->pool_lent_to));
	if (n->ngpus) {
		/* what its accelerators read at its newest beat */
		json_object_set_new(o, "gpus", wire_gpus_pack(n->gpus, n->ngpus));
		json_object_set_new(o, "gpus_at_ms", json_integer(n->gpus_ms));
	}
	json_object_set_new(o, "credential",
			    json_string(n->rec.revoked		? "revoked"
					: n->rec.admit		? "admitted"
					: n->rec.cred_sha256[0] ? "issued"
								: "none"));
	return o;
}

/* What the last applied pass said of waiting job j: WAIT_OWN, the job whose
 * reason it shares, or 0 when the pass's table does not hold it (not given
 * to that pass, its class reordered, or held back by a later snapshot). */
static uint32_t pass_wait_from(const struct state *s, const struct sjob *j)
{
	const struct pass_waits *pw = &s->waits;
	if (!pw->mark || j->reason_pass > pw->mark || j->cls >= s->sched.nclasses)
		return 0;
	int lo = pw->cls_from[j->cls], hi = pw->cls_to[j->cls];
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (pw->ids[mid] < (uint32_t)j->job.id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < pw->cls_to[j->cls] && pw->ids[lo] == (uint32_t)j->job.id ? pw->from[lo] : 0;
}

/* j's running attempt as the pass sees it (sched_running), for what a
 * preemption now would cost it; false: j has no started attempt. */
static bool running_as_pass(const struct sjob *j, struct sched_running *ret)
{
	const struct attempt *a = job_current_attempt(&j->job);
	if (j->job.state != JOB_RUNNING || !a || !a->start_ms)
		return false;
	*ret = (struct sched_running){.start_ms = a->start_ms,
				      .last_commit_ms = state_attempt_commit_ms(j, a),
				      .restore_ms = state_job_restore_ms(j),
				      .preempt_any = j->job.req.preemptible_any};
	return true;
}

/* Would the bound spare running j (as the pass sees it, r) from an earlier
 * level of its class now: it has run the minimum (*min_left_ms to go) and
 * would lose more than the bound (*loss_ms now)? */
static bool las_spared(const struct state *s, const struct sjob *j, const struct sched_running *r,
		       int64_t *loss_ms, int64_t *min_left_ms)
{
	*loss_ms = sched_run_loss_ms(r, s->now_ms);
	bool may =
		sched_las_may_take(sched_las_rule_of(&s->las[j->cls]), r, s->now_ms, min_left_ms);
	return j->las_level > 0 && !*min_left_ms && !may;
}

void state_job_las_behind(struct state *s, struct sjob *j, json_t *o)
{
	json_t *las = json_object_get(o, "las");
	if (!las || j->job.state != JOB_PENDING)
		return;
	/* the running jobs of a later level of its class that the bound
	 * spares: the one that would lose least, which it waits behind */
	const struct sjob *best = NULL;
	int64_t best_loss = 0;
	for (int i = 0; i < s->nnodes; i++)
		for (int k = 0; k < s->nodes[i]->nparts; k++) {
			const struct sjob *r = s->nodes[i]->parts[k].job;
			struct sched_running rr;
			int64_t loss, left;
			if (r == best || r->cls != j->cls || r->las_level <= j->las_level ||
			    !running_as_pass(r, &rr) || !las_spared(s, r, &rr, &loss, &left))
				continue;
			if (!best || loss < best_loss)
				best = r, best_loss = loss;
		}
	if (best)
		json_object_set_new(
			las, "behind",
			json_pack("{s:I, s:i, s:I, s:b}", "job", (json_int_t)best->job.id, "level",
				  best->las_level, "loss_s", (json_int_t)(best_loss / 1000),
				  "since_checkpoint",
				  state_attempt_commit_ms(best, job_current_attempt(&best->job)) >
					  0));
}

json_t *state_job_pack(struct state *s, struct sjob *j)
{
	if (j->job.state == JOB_PENDING && !j->job.system) {
		uint32_t from = pass_wait_from(s, j);
		if (from && from != WAIT_OWN) {
			/* the last pass said: the same as an earlier job of its shape */
			struct sjob *o = state_job(s, from);
			if (o)
				snprintf(j->job.reason, sizeof(j->job.reason), "%s", o->job.reason);
		} else if (from == WAIT_OWN) {
			/* its own, written to it */
		} else if (j->reason_pass == 0 && j->job.held) {
			/* submitted held: no pass needs to look at it */
			state_held_reason(j, j->job.reason, sizeof(j->job.reason));
		} else if (j->reason_pass == 0) {
			snprintf(j->job.reason, sizeof(j->job.reason),
				 "waiting for the next scheduling pass");
		} else if (j->reason_from) {
			/* the pass said: the same as an earlier job of its shape */
			struct sjob *o = state_job(s, j->reason_from);
			if (o)
				snprintf(j->job.reason, sizeof(j->job.reason), "%s", o->job.reason);
			j->reason_from = 0;
		}
	}
	json_t *o = job_pack(&j->job);
	json_object_set_new(o, "class", json_string(s->classes[j->cls].spec.name));
	json_object_set_new(o, "queue", json_string(j->queue->spec.name));
	if (j->preemptions)
		json_object_set_new(o, "preemptions", json_integer(j->preemptions));
	if (j->borrowed_from)
		json_object_set_new(o, "borrowed_from",
				    json_pack("{s:I, s:s}", "job", (json_int_t)j->borrowed_from,
					      "node", j->borrowed_node));
	else if (j->borrowed_pool)
		json_object_set_new(o, "borrowed_from",
				    json_pack("{s:b, s:s}", "pool", 1, "node", j->borrowed_node));
	if (j->nspares) {
		json_t *sp = json_array();
		for (int i = 0; i < j->nspares; i++)
			json_array_append_new(sp, json_string(j->spares[i].name));
		json_object_set_new(o, "spare_nodes", sp);
	}
	if (s->las[j->cls].nlevels > 1) {
		json_t *las =
			json_pack("{s:i, s:i, s:f}", "level", j->las_level, "levels",
				  s->las[j->cls].nlevels, "service_gpu_h", j->las_service / 3600);
		/* running: what a preemption would cost it now, and the bound */
		struct sched_running r;
		int64_t loss, left;
		if (running_as_pass(j, &r)) {
			bool spared = las_spared(s, j, &r, &loss, &left);
			json_object_set_new(las, "loss_s", json_integer(loss / 1000));
			json_object_set_new(las, "spared", json_boolean(spared));
			if (left)
				json_object_set_new(las, "min_run_left_s",
						    json_integer((left + 999) / 1000));
		}
		json_object_set_new(las, "max_loss_s",
				    json_integer((json_int_t)s->las[j->cls].max_loss_s));
		/* waiting: its order within its level (its index now, of the
		 * service the last pass counted) */
		double g;
		if (j->job.state == JOB_PENDING && s->las[j->cls].gittins) {
			json_object_set_new(
				las, "history_jobs",
				json_integer(sched_las_history_count(s->las_hist, j->cls)));
			json_object_set_new(las, "history_needed",
					    json_integer(SCHED_GITTINS_MIN_SAMPLES));
			if (sched_las_history_index(
				    s->las_hist, &s->las[j->cls], j->cls,
				    state_las_queue_key(j->queue ? j->queue->spec.name : ""),
				    j->las_service, &g))
				json_object_set_new(las, "gittins_per_gpu_h", json_real(g * 3600));
		}
		json_object_set_new(o, "las", las);
	}
	if (j->last_ckpt_ms)
		json_object_set_new(o, "last_checkpoint_ms", json_integer(j->last_ckpt_ms));
	if (!j->job.system && j->job.nattempts) {
		/* where its time went, over its attempts */
		struct goodput g;
		goodput_of(&j->job, s->now_ms, &g);
		json_object_set_new(o, "goodput", goodput_pack(&g));
		/* each attempt's share: what its start cost, what its end lost */
		size_t i;
		json_t *aj;
		json_array_foreach (json_object_get(o, "attempts"), i, aj) {
			if ((int)i >= j->job.nattempts)
				break;
			struct goodput ga;
			goodput_attempt(&j->job, (int)i, s->now_ms, &ga);
			json_object_set_new(aj, "goodput", goodput_pack(&ga));
		}
		json_t *mfu = state_mfu_pack(s, j);
		if (mfu)
			json_object_set_new(o, "mfu", mfu);
	}
	json_t *stall = state_stall_pack(j), *strag = state_straggler_pack(j);
	if (stall)
		json_object_set_new(o, "stalled", stall);
	if (strag)
		json_object_set_new(o, "straggler", strag);
	if (j->job.state == JOB_PENDING && j->start_pass && j->start_pass == s->waits.mark)
		json_object_set_new(o, "expected_start_ms", json_integer(j->start_ms));
	/* task 0's output file of its newest attempt, its pattern resolved */
	const struct attempt *a = job_current_attempt(&j->job);
	const struct job_request *r = &j->job.req;
	struct output_names v = {.job = j->job.id,
				 .array_job = j->job.array_job,
				 .array_index = j->job.array_index,
				 .attempt = a ? a->number : 1,
				 .node = a && a->nnodes ? a->nodes[0].name : "",
				 .owner = j->job.owner,
				 .name = r->name};
	char *path = model_output_path(r->output ? r->output : MODEL_DEFAULT_OUTPUT, r->cwd, &v);
	json_object_set_new(o, "output_path", json_string(path));
	free(path);
	return o;
}

json_t *state_queue_pack(struct state *s, const struct squeue *q)
{
	json_t *o = queue_spec_pack(&q->spec);
	json_object_del(o, "usage");
	json_object_del(o, "usage_at_ms");
	double recent = sched_usage_recent(q->spec.usage, (double)s->sched.half_life_s);
	int64_t borrowed =
		q->spec.quota_milli >= 0 ? MAX(0, q->use_milli - q->spec.quota_milli) : 0;
	json_object_set_new(o, "in_use", json_real(q->use_milli / (double)MODEL_MILLI));
	json_object_set_new(o, "borrowed", json_real(borrowed / (double)MODEL_MILLI));
	json_object_set_new(o, "recent", json_real(recent / MODEL_MILLI));
	json_object_set_new(o, "pending", json_integer(q->npending));
	json_object_set_new(o, "running", json_integer(q->nrunning));
	json_object_set_new(o, "units_in_use", json_real(q->use_units / MODEL_MILLI));
	if (q->spec.ndims) {
		/* what it holds of each limit, from its attempts' shares */
		struct sched_qdim dims[MODEL_MAX_QUEUE_DIMS];
		double use[MODEL_MAX_QUEUE_DIMS] = {0};
		state_queue_dims(&q->spec, dims);
		for (int i = 0; i < s->nnodes; i++) {
			const struct snode *n = s->nodes[i];
			for (int p = 0; p < n->nparts; p++) {
				const struct sjob *j = n->parts[p].job;
				if (j->queue != q)
					continue;
				const struct attempt *a = &j->job.attempts[n->parts[p].attempt - 1];
				const struct attempt_node *an = &a->nodes[n->parts[p].node_index];
				const struct job_request *rq = &j->job.req;
				for (int k = 0; k < q->spec.ndims; k++) {
					if (dims[k].kind == SCHED_QDIM_CPUS)
						use[k] += rq->tasks_per_node * rq->cpus_per_task;
					else if (dims[k].kind == SCHED_QDIM_MEM)
						use[k] += (double)rq->mem_mib;
					for (int d = 0;
					     d < an->ndev && an->devs[d] < n->rec.inv.naccel; d++) {
						const char *m = n->rec.inv.accel[an->devs[d]].model;
						if (dims[k].kind == SCHED_QDIM_UNITS)
							use[k] += an->milli *
								  state_model_weight(s, m);
						else if (dims[k].kind == SCHED_QDIM_MODEL &&
							 strcasecmp(m, dims[k].model) == 0)
							use[k] += an->milli;
					}
				}
			}
		}
		json_t *u = json_object();
		for (int k = 0; k < q->spec.ndims; k++)
			json_object_set_new(u, q->spec.dims[k].name,
					    json_real(queue_dim_milli(q->spec.dims[k].name)
							      ? use[k] / MODEL_MILLI
							      : use[k]));
		json_object_set_new(o, "limits_in_use", u);
	}
	if (q->spec.budget > 0) {
		json_object_set_new(o, "spent", json_real(q->spent));
		json_object_set_new(o, "budget_state",
				    json_string(q->budget_spent			   ? "spent"
						: q->spent >= 0.8 * q->spec.budget ? "warning"
										   : "ok"));
	}
	return o;
}
