/* Unit tests of the server's state machine (src/server/state.h), driven with
 * no HTTP and no clock around it: jobs from submission through their
 * attempts to a final state, requeues, node loss, the transition table, and
 * the events the shell would turn into answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/state.h"

#define T0 1800000000000LL /* wall ms */
#define MONO0 1000000LL	   /* monotonic ms */
#define NODE_TIMEOUT_MS 30000

struct world {
	struct state st;
	struct catalogue cat;
	/* events seen */
	int ended[64];
	int nended;
	int work_changed[8];
};

static void on_event(void *arg, const struct state_event *ev)
{
	struct world *w = arg;
	if (ev->kind == STATE_EV_JOB_ENDED) {
		assert_true(job_state_final(ev->job->job.state));
		w->ended[w->nended++] = (int)ev->job->job.id;
	} else {
		assert_int_equal(ev->kind, STATE_EV_WORK_CHANGED);
		w->work_changed[ev->node->index]++;
	}
}

static struct world *world_new(int max_node_requeues)
{
	struct world *w = calloc(1, sizeof(*w));
	struct sched_config sc;
	sched_config_default(&sc);
	struct state_config cfg = {.node_timeout_ms = NODE_TIMEOUT_MS,
				   .max_node_requeues = max_node_requeues,
				   .epoch = "e1",
				   .secret = "s3cret"};
	catalogue_init(&w->cat);
	state_init(&w->st, &cfg, &sc, on_event, w);
	return w;
}

static void world_free(struct world *w)
{
	state_release(&w->st);
	catalogue_release(&w->cat);
	free(w);
}

/* A node n<i> with `gpus` fake H100s, registered by agent id `agent`. */
static struct snode *add_node(struct world *w, int i, int gpus, const char *agent)
{
	struct node_inventory inv;
	memset(&inv, 0, sizeof(inv));
	snprintf(inv.name, sizeof(inv.name), "n%d", i);
	snprintf(inv.addr, sizeof(inv.addr), "10.0.0.%d", i);
	inv.cpus = 64;
	inv.mem_mib = 1 << 20;
	char spec[16];
	snprintf(spec, sizeof(spec), "%dxH100", gpus);
	struct tk_error err;
	assert_int_equal(model_fake_accels(spec, &w->cat, inv.name, inv.accel, MODEL_MAX_ACCELS,
					   &inv.naccel, &err),
			 0);
	return state_register(&w->st, &inv, agent, NULL, 0, T0, MONO0);
}

static struct sjob *submit(struct world *w, const char *json)
{
	json_error_t je;
	json_t *j = json_loads(json, 0, &je);
	assert_non_null(j);
	struct job_request req;
	struct tk_error err;
	if (job_request_unpack(j, &req, &err) < 0)
		fail_msg("bad test request: %s", err.text);
	json_decref(j);
	return state_submit(&w->st, &req, "alice", "alice", false, T0);
}

static void task_event(struct world *w, struct sjob *j, int rank, enum task_event_type type,
		       int code, enum exit_cause cause, int64_t now)
{
	struct task_event ev = {.job = j->job.id,
				.attempt = j->job.nattempts,
				.rank = rank,
				.type = type,
				.at_ms = now,
				.exit_code = code,
				.cause = cause};
	if (type == TASK_EVENT_STARTED)
		state_task_started(&w->st, &ev, now);
	else
		state_task_exited(&w->st, &ev, now);
}

static int dev_used(const struct snode *n)
{
	int sum = 0;
	for (int d = 0; d < n->rec.inv.naccel; d++)
		sum += n->dev_used[d];
	return sum;
}

/* One job's whole life: waiting, placed, started, running, completed; its
 * devices back, its waits answered, its node's agent told at each step. */
static void test_lifecycle(void **state)
{
	struct world *w = world_new(5);
	struct snode *n = add_node(w, 1, 8, "aaaaaaaa");
	state_flush_work(&w->st);
	assert_int_equal(w->work_changed[0], 1); /* its agent learns its (empty) work */
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", "
				   "\"tasks_per_node\": 2, \"gpus_per_task\": 2}");
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_true(w->st.sched_needed);
	assert_int_equal(w->st.npending, 1);
	uint64_t seq = w->st.seq_applied;
	assert_true(seq > 0 && w->st.dirty_jobs == j); /* written before anyone hears of it */

	state_schedule(&w->st, T0 + 10);
	assert_int_equal(j->job.state, JOB_STARTING);
	assert_int_equal(j->job.nattempts, 1);
	assert_int_equal(w->st.npending, 0);
	assert_int_equal(dev_used(n), 4 * MODEL_MILLI);
	assert_string_equal(j->job.attempts[0].nodes[0].name, "n1");
	assert_int_equal(j->job.attempts[0].start_ms, T0 + 10);
	state_flush_work(&w->st);
	assert_int_equal(w->work_changed[0], 2);
	/* what the agent is told to run: the spec, first time only */
	json_t *work = state_work_pack(&w->st, n, 0, WIRE_PROTOCOL);
	struct wire_work ww;
	struct tk_error err;
	assert_int_equal(wire_work_unpack(work, &ww, &err), 0);
	assert_int_equal(ww.nitems, 1);
	assert_non_null(ww.items[0].spec);
	assert_int_equal(ww.items[0].spec->tasks_per_node, 2);
	int nd;
	work_spec_devices(ww.items[0].spec, 1, &nd);
	assert_int_equal(nd, 2);
	wire_work_release(&ww);
	json_decref(work);
	work = state_work_pack(&w->st, n, n->work_gen, WIRE_PROTOCOL);
	assert_int_equal(wire_work_unpack(work, &ww, &err), 0);
	assert_null(ww.items[0].spec);
	wire_work_release(&ww);
	json_decref(work);

	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 20);
	assert_int_equal(j->job.state, JOB_STARTING); /* one of two up */
	task_event(w, j, 1, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 21);
	assert_int_equal(j->job.state, JOB_RUNNING);
	/* a repeated start changes nothing */
	task_event(w, j, 1, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 22);
	assert_int_equal(j->job.state, JOB_RUNNING);

	task_event(w, j, 0, TASK_EVENT_EXITED, 0, EXIT_EXITED, T0 + 30);
	assert_int_equal(j->job.state, JOB_RUNNING);
	assert_int_equal(dev_used(n), 4 * MODEL_MILLI); /* held while a task runs */
	assert_int_equal(w->nended, 0);
	task_event(w, j, 1, TASK_EVENT_EXITED, 0, EXIT_EXITED, T0 + 31);
	assert_int_equal(j->job.state, JOB_COMPLETED);
	assert_int_equal(j->job.exit_code, 0);
	assert_int_equal(j->job.end_ms, T0 + 31);
	assert_true(j->job.attempts[0].ended);
	assert_int_equal(dev_used(n), 0);
	assert_int_equal(n->nparts, 0);
	assert_int_equal(w->nended, 1);
	assert_int_equal(w->ended[0], (int)j->job.id);
	/* an exit repeated after the end changes nothing */
	task_event(w, j, 1, TASK_EVENT_EXITED, 9, EXIT_EXITED, T0 + 40);
	assert_int_equal(j->job.state, JOB_COMPLETED);
	assert_int_equal(w->nended, 1);
	world_free(w);
}

/* A failure with restarts left requeues the job in its place; the next
 * attempt is a new number; without restarts left it fails with the code. */
static void test_requeue(void **state)
{
	struct world *w = world_new(5);
	add_node(w, 1, 8, "aaaaaaaa");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", "
				   "\"gpus_per_task\": 1, \"requeue\": 1}");
	state_schedule(&w->st, T0);
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	task_event(w, j, 0, TASK_EVENT_EXITED, 3, EXIT_EXITED, T0 + 5);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_true(j->pending);
	assert_non_null(strstr(j->job.reason, "task 0 on n1 exited with code 3; requeued "
					      "(restart 1 of 1)"));
	assert_string_equal(j->job.attempts[0].reason, "task 0 on n1 exited with code 3");
	assert_int_equal(w->nended, 0);
	state_schedule(&w->st, T0 + 10);
	assert_int_equal(j->job.state, JOB_STARTING);
	assert_int_equal(j->job.nattempts, 2);
	/* the first attempt's late report changes nothing */
	struct task_event late = {.job = j->job.id,
				  .attempt = 1,
				  .rank = 0,
				  .type = TASK_EVENT_EXITED,
				  .at_ms = T0 + 11,
				  .exit_code = 1};
	state_task_exited(&w->st, &late, T0 + 11);
	assert_int_equal(j->job.state, JOB_STARTING);
	/* a launch failure: the detail is shown, the code ends it */
	struct task_event ev = {.job = j->job.id,
				.attempt = 2,
				.rank = 0,
				.type = TASK_EVENT_EXITED,
				.at_ms = T0 + 12,
				.exit_code = 127,
				.cause = EXIT_LAUNCH_FAILED,
				.detail = "command not found: train"};
	state_task_exited(&w->st, &ev, T0 + 12);
	assert_int_equal(j->job.state, JOB_FAILED);
	assert_int_equal(j->job.exit_code, 127);
	assert_string_equal(j->job.reason, "task 0 on n1 exited with code 127: command not "
					   "found: train");
	assert_int_equal(w->nended, 1);
	world_free(w);
}

/* The order a pass takes waiting jobs in is kept between passes: a job that
 * leaves is a hole the next pass closes, a requeued one goes back to its
 * place, and a hold or release is seen without the job being filed again. */
static void test_pass_order_kept(void **state)
{
	struct world *w = world_new(5);
	add_node(w, 1, 2, "aaaaaaaa");
	const char *one = "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"gpus_per_task\": 1, "
			  "\"requeue\": 1}";
	struct sjob *j1 = submit(w, one), *j2 = submit(w, one), *j3 = submit(w, one),
		    *j4 = submit(w, one);
	struct tk_error err;
	assert_int_equal(state_hold(&w->st, j1, true, &err), 0);
	state_schedule(&w->st, T0);
	assert_int_equal(j1->job.state, JOB_PENDING);
	assert_non_null(strstr(j1->job.reason, "held"));
	assert_int_equal(j2->job.state, JOB_STARTING);
	assert_int_equal(j3->job.state, JOB_STARTING);
	assert_int_equal(j4->job.state, JOB_PENDING);
	/* the two that started are holes until the next pass */
	struct sclass *c = &w->st.classes[j1->cls];
	assert_int_equal(c->norder, 4);
	assert_int_equal(c->order[0].id, 1);
	assert_false(c->order[0].plain);
	assert_null(c->order[1].job);
	assert_null(c->order[2].job);
	assert_int_equal(c->order[3].id, 4);
	assert_true(c->order[3].plain);

	assert_int_equal(state_cancel(&w->st, j4, T0 + 1, &err), 0);
	struct sjob *j5 = submit(w, one);
	assert_int_equal(state_hold(&w->st, j1, false, &err), 0);
	task_event(w, j2, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 2);
	assert_int_equal(state_requeue(&w->st, j2, "alice", T0 + 3, &err), 0);
	/* 1, 2 back in its place (its hole), the holes of 3 and 4, then 5 */
	assert_int_equal(c->norder, 5);
	assert_true(c->order[0].plain); /* released */
	assert_ptr_equal(c->order[1].job, j2);
	assert_false(c->order[1].plain); /* it ran: judged each pass */
	assert_null(c->order[2].job);
	assert_null(c->order[3].job);
	assert_ptr_equal(c->order[4].job, j5);

	/* j3 ends: its device goes to j1, the first that may start; j2's
	 * attempt is not over yet */
	task_event(w, j3, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 4);
	task_event(w, j3, 0, TASK_EVENT_EXITED, 0, EXIT_EXITED, T0 + 5);
	state_schedule(&w->st, T0 + 6);
	assert_int_equal(j1->job.state, JOB_STARTING);
	assert_int_equal(j2->job.state, JOB_PENDING);
	assert_non_null(strstr(j2->job.reason, "waiting for its attempt 1 to end"));
	assert_int_equal(j5->job.state, JOB_PENDING);
	assert_int_equal(c->norder, 3);
	assert_null(c->order[0].job); /* j1, started */
	assert_ptr_equal(c->order[1].job, j2);
	assert_ptr_equal(c->order[2].job, j5);
	assert_int_equal(c->npending, 2);
	world_free(w);
}

/* A new configuration while jobs wait and run (tenk config): classes
 * reordered, renumbered and one gone, pools added. The waiting jobs keep
 * their classes by name and their order; the running one runs on; a
 * class jobs are in cannot go; the next pass follows the new priorities. */
static void test_config_swap(void **state)
{
	struct world *w = world_new(5);
	struct snode *n = add_node(w, 1, 1, "aaaaaaaa");
	const char *fmt = "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"gpus_per_task\": 1, "
			  "\"class\": \"%s\"}";
	char normal[256], batch[256];
	snprintf(normal, sizeof(normal), fmt, "normal");
	snprintf(batch, sizeof(batch), fmt, "batch");
	struct sjob *j1 = submit(w, normal);
	state_schedule(&w->st, T0);
	assert_int_equal(j1->job.state, JOB_STARTING);
	struct sjob *j2 = submit(w, normal), *j3 = submit(w, batch), *j4 = submit(w, normal);
	struct tk_error err;
	assert_int_equal(state_hold(&w->st, j4, true, &err), 0);
	struct sched_config next;
	sched_config_default(&next);
	const char *text = "{\"classes\": [{\"name\": \"batch\", \"priority\": 200}, {\"name\": "
			   "\"urgent\", \"priority\": 300}, {\"name\": \"normal\", \"priority\": "
			   "5}], \"default_class\": \"normal\", \"pools\": {\"a\": {\"selector\": "
			   "\"zone=a\"}}}";
	assert_int_equal(sched_config_load_json(&next, text, &err), 0);
	struct strbuf why;
	strbuf_init(&why);
	assert_int_equal(state_config_check(&w->st, &next, &why), 0);
	/* without "normal": its jobs, the running one first, forbid it */
	struct sched_config lacking;
	sched_config_default(&lacking);
	assert_int_equal(
		sched_config_load_json(&lacking,
				       "{\"classes\": [{\"name\": \"batch\", \"priority\": 1}], "
				       "\"default_class\": \"batch\"}",
				       &err),
		0);
	assert_int_equal(state_config_check(&w->st, &lacking, &why), -EBUSY);
	assert_non_null(strstr(why.buf, "\"normal\""));
	assert_non_null(strstr(why.buf, "3 jobs"));
	assert_non_null(strstr(why.buf, "job 1 first"));
	strbuf_release(&why);
	assert_int_equal(n->pools, 0);
	assert_true(state_config_swap(&w->st, &next, T0 + 1)); /* the classes are others */
	assert_string_equal(w->st.classes[j1->cls].spec.name, "normal");
	assert_string_equal(w->st.classes[j2->cls].spec.name, "normal");
	assert_string_equal(w->st.classes[j3->cls].spec.name, "batch");
	assert_int_equal(j1->job.state, JOB_STARTING);
	assert_int_equal(w->st.npending, 3);
	struct sclass *c = &w->st.classes[j2->cls];
	assert_int_equal(c->npending, 2);
	assert_ptr_equal(c->pend_head, j2);
	assert_ptr_equal(c->pend_tail, j4);
	assert_int_equal(c->norder, 2);
	assert_ptr_equal(c->order[0].job, j2);
	assert_ptr_equal(c->order[1].job, j4);
	assert_int_equal(w->st.classes[j3->cls].npending, 1);
	assert_int_equal(w->st.class_order[0], sched_config_class(&next, "urgent"));
	assert_int_equal(n->pools, MODEL_POOL_NONE); /* in no pool now */
	/* the same classes again: nothing to learn anew */
	assert_false(state_config_swap(&w->st, &next, T0 + 2));
	/* the device frees: batch (now 200) goes before normal's j2 */
	task_event(w, j1, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 3);
	task_event(w, j1, 0, TASK_EVENT_EXITED, 0, EXIT_EXITED, T0 + 4);
	state_schedule(&w->st, T0 + 5);
	assert_int_equal(j3->job.state, JOB_STARTING);
	assert_int_equal(j2->job.state, JOB_PENDING);
	assert_int_equal(j4->job.state, JOB_PENDING);
	world_free(w);
}

/* The time limit travels as a cause, not as text. */
static void test_timeout(void **state)
{
	struct world *w = world_new(5);
	add_node(w, 1, 8, "aaaaaaaa");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", "
				   "\"time_limit_s\": 60}");
	state_schedule(&w->st, T0);
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	task_event(w, j, 0, TASK_EVENT_EXITED, 143, EXIT_TIMEOUT, T0 + 60000);
	assert_int_equal(j->job.state, JOB_TIMEOUT);
	assert_string_equal(j->job.reason, "time limit of 60s reached");
	world_free(w);
}

/* n's agent beats every tenth of the node timeout from `from` to `to`
 * (monotonic), each beat acknowledging the answer to the one before: the
 * server can prove it hears the server (fence.h). */
static void beats(struct world *w, struct snode *n, int64_t from, int64_t to)
{
	int64_t answered = INT64_MIN;
	for (int64_t m = from; m <= to; m += NODE_TIMEOUT_MS / 10) {
		state_node_seen(&w->st, n, m);
		if (answered != INT64_MIN)
			state_node_acked(&w->st, n, answered, m);
		answered = m + 1;
	}
}

/* A node that misses its heartbeats is DOWN: its tasks are lost and the
 * gang requeued; the other node's part is held until its agent reports
 * its task gone. After max_node_requeues the job fails. But while the
 * server cannot prove the rest of the node's witness group hears it, the
 * silent node is UNREACHABLE: nothing of it moves (fence.h). */
static void test_node_loss(void **state)
{
	struct world *w = world_new(1);
	struct snode *a = add_node(w, 1, 8, "aaaaaaaa");
	struct snode *b = add_node(w, 2, 8, "bbbbbbbb");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"nodes\": 2, "
				   "\"gpus_per_task\": 8}");
	state_schedule(&w->st, T0);
	assert_int_equal(j->job.state, JOB_STARTING);
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	task_event(w, j, 1, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	assert_int_equal(j->job.state, JOB_RUNNING);
	struct snode *lost = strcmp(j->job.attempts[0].nodes[0].name, "n1") == 0 ? a : b;
	struct snode *kept = lost == a ? b : a;
	/* the kept node's agent beats on, but acknowledges nothing: the lost
	 * one's silence cannot be told from the server's own */
	state_node_seen(&w->st, kept, MONO0 + NODE_TIMEOUT_MS);
	state_check_nodes(&w->st, T0 + 100, MONO0 + NODE_TIMEOUT_MS / 2);
	assert_int_equal(state_node_state(&w->st, lost), NODE_UP);
	state_check_nodes(&w->st, T0 + 200, MONO0 + NODE_TIMEOUT_MS + 1);
	assert_int_equal(state_node_state(&w->st, lost), NODE_UNREACHABLE);
	assert_int_equal(j->job.state, JOB_RUNNING);
	/* the kept node proves it hears the server, for long enough */
	int64_t t = MONO0 + NODE_TIMEOUT_MS + 1;
	beats(w, kept, t, t + NODE_TIMEOUT_MS * 7 / 10);
	state_check_nodes(&w->st, T0 + 150, t + NODE_TIMEOUT_MS * 3 / 10);
	assert_int_equal(state_node_state(&w->st, lost), NODE_UNREACHABLE); /* not yet */
	state_check_nodes(&w->st, T0 + 200, t + NODE_TIMEOUT_MS * 7 / 10);
	assert_int_equal(state_node_state(&w->st, lost), NODE_DOWN);
	assert_int_equal(state_node_state(&w->st, kept), NODE_UP);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_non_null(strstr(j->job.reason, "lost: no heartbeat from its agent for 30s; "
					      "requeued"));
	assert_int_equal(j->job.attempts[0].tasks[0].state, TASK_LOST);
	assert_int_equal(lost->nparts, 0);
	assert_int_equal(kept->nparts, 1); /* until its task is gone */
	/* nowhere to go: the lost node is down and the kept one still busy */
	state_schedule(&w->st, T0 + 300);
	assert_int_equal(j->job.state, JOB_PENDING);
	task_event(w, j, 1, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 400);
	assert_int_equal(kept->nparts, 0);
	assert_true(j->job.attempts[0].ended);
	/* the node comes back, the job runs again, and loses a node again */
	state_node_seen(&w->st, lost, MONO0 + 2 * NODE_TIMEOUT_MS);
	assert_int_equal(state_node_state(&w->st, lost), NODE_UP);
	state_schedule(&w->st, T0 + 500);
	assert_int_equal(j->job.state, JOB_STARTING);
	assert_int_equal(j->job.nattempts, 2);
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 550);
	state_node_lost(&w->st, kept, "cable cut", T0 + 600);
	assert_int_equal(j->job.state, JOB_FAILED);
	assert_non_null(strstr(j->job.reason, "cable cut; not requeued after 1 lost nodes"));
	assert_int_equal(w->nended, 1);
	/* an agent that registers again with a new id loses what the old one ran */
	world_free(w);
}

/* A new agent process on a known node: what the old one ran is lost. */
static void test_agent_restart(void **state)
{
	struct world *w = world_new(5);
	add_node(w, 1, 8, "aaaaaaaa");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\"}");
	state_schedule(&w->st, T0);
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	struct snode *n = add_node(w, 1, 8, "aaaaaaaa"); /* the same process again */
	assert_int_equal(j->job.state, JOB_RUNNING);
	n = add_node(w, 1, 8, "cccccccc");
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_non_null(strstr(j->job.reason, "its agent restarted and no longer runs them"));
	assert_int_equal(n->nparts, 0);
	assert_int_equal(w->st.nnodes, 1);
	world_free(w);
}

/* A new agent process that found the shims of the old one keeps their
 * attempts running; the node's other attempts are lost. */
static void test_agent_restart_keeps_shims(void **state)
{
	struct world *w = world_new(5);
	struct snode *n = add_node(w, 1, 8, "aaaaaaaa");
	struct sjob *kept = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\"}");
	struct sjob *lost = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\"}");
	struct sjob *done = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\"}");
	state_schedule(&w->st, T0);
	task_event(w, kept, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	task_event(w, lost, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	task_event(w, done, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	assert_int_equal(n->nparts, 3);
	/* the new agent found two shims: one running, one whose task exited
	 * while no agent was there; and it names one the server never had */
	struct node_inventory inv = n->rec.inv;
	const struct wire_attempt_ref refs[] = {
		{kept->job.id, 1}, {done->job.id, 1}, {99, 1}, {lost->job.id, 2}};
	n = state_register(&w->st, &inv, "dddddddd", refs, (int)ARRAY_SIZE(refs), T0 + 5,
			   MONO0 + 5);
	assert_int_equal(kept->job.state, JOB_RUNNING);
	assert_int_equal(done->job.state, JOB_RUNNING);
	assert_int_equal(lost->job.state, JOB_PENDING);
	assert_int_equal(n->nparts, 2);
	assert_int_equal(kept->job.nattempts, 1);
	/* the exit it then reports ends the job as it ended */
	task_event(w, done, 0, TASK_EVENT_EXITED, 0, EXIT_EXITED, T0 + 6);
	assert_int_equal(done->job.state, JOB_COMPLETED);
	assert_int_equal(n->nparts, 1);
	/* the lost one's shim may live on, unfound, until the lease the old
	 * agent last had runs out: no new attempt before */
	state_schedule(&w->st, T0 + 7);
	assert_int_equal(lost->job.nattempts, 1);
	assert_non_null(strstr(lost->job.reason, "waiting until the lease of its last attempt's "
						 "tasks on n1 has run out"));
	state_check_nodes(&w->st, T0 + 8, MONO0 + NODE_TIMEOUT_MS - 1);
	state_schedule(&w->st, T0 + 9);
	assert_int_equal(lost->job.nattempts, 1);
	state_check_nodes(&w->st, T0 + 10, MONO0 + NODE_TIMEOUT_MS);
	assert_true(w->st.sched_needed);
	state_schedule(&w->st, T0 + 11);
	assert_int_equal(lost->job.nattempts, 2);
	assert_int_equal(lost->job.state, JOB_STARTING);
	world_free(w);
}

/* Two attempts of one job never run at once: after rank 0 of a two-node
 * gang fails, the next attempt waits for rank 1's task to be reported gone
 * even while two other nodes stand free (a gang that goes back to its
 * queue; one restarting in place waits the same, below). */
static void test_one_attempt_at_a_time(void **state)
{
	struct world *w = world_new(5);
	for (int i = 1; i <= 4; i++)
		add_node(w, i, 8, "aaaaaaaa");
	struct sjob *j =
		submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"nodes\": 2, "
			  "\"gpus_per_task\": 8, \"requeue\": 2, \"restart\": \"requeue\"}");
	state_schedule(&w->st, T0);
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	task_event(w, j, 1, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	task_event(w, j, 0, TASK_EVENT_EXITED, 1, EXIT_EXITED, T0 + 5);
	/* judged once both nodes are heard from again; its gang stops now */
	assert_int_equal(j->job.state, JOB_RUNNING);
	for (int i = 0; i < j->job.attempts[0].nnodes; i++)
		state_node_seen(&w->st, state_node(&w->st, j->job.attempts[0].nodes[i].name),
				MONO0 + 1);
	state_check_failures(&w->st, T0 + 6, MONO0 + 1);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_int_equal(j->job.failures, 1);
	assert_false(j->job.attempts[0].ended);
	state_schedule(&w->st, T0 + 10);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_int_equal(j->job.nattempts, 1);
	assert_string_equal(j->job.reason, "waiting for its attempt 1 to end (its tasks are "
					   "being stopped)");
	task_event(w, j, 1, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 20);
	assert_true(j->job.attempts[0].ended);
	state_schedule(&w->st, T0 + 30);
	assert_int_equal(j->job.state, JOB_STARTING);
	assert_int_equal(j->job.nattempts, 2);
	world_free(w);
}

/* Judges the failure of j's current attempt, every node heard from. */
static void judge(struct world *w, struct sjob *j, int64_t now, int64_t mono)
{
	const struct attempt *a = job_current_attempt(&j->job);
	for (int i = 0; i < a->nnodes; i++)
		state_node_seen(&w->st, state_node(&w->st, a->nodes[i].name), mono);
	state_check_failures(&w->st, now, mono);
}

/* The attempt of job `id` in node n's work answer (NULL: not listed);
 * *o holds the answer for the caller to free. */
static json_t *work_item_of(struct world *w, const char *node, int64_t id, json_t **o)
{
	*o = state_work_pack(&w->st, state_node(&w->st, node), 0, WIRE_PROTOCOL);
	size_t i;
	json_t *t;
	json_array_foreach (json_object_get(*o, "tasks"), i, t)
		if (json_integer_value(json_object_get(t, "job")) == id)
			return t;
	return NULL;
}

/* --ckpt-signal: when a rank of a gang fails, the others are not stopped
 * but signalled, and go on until a checkpoint commits on the parts of the
 * nodes that wrote it; the next attempt restores it, the node without a
 * part restoring node rank 0's. Without a commit in time the gang stops
 * when the wait runs out. */
static void test_ckpt_signal_waits_for_a_checkpoint(void **state)
{
	struct world *w = world_new(5);
	snprintf(w->st.sched.checkpoint_store, sizeof(w->st.sched.checkpoint_store), "/store");
	w->st.mono_ms = MONO0;
	add_node(w, 1, 8, "aaaaaaaa");
	add_node(w, 2, 8, "bbbbbbbb");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"nodes\": 2, "
				   "\"gpus_per_task\": 8, \"requeue\": 2, \"ckpt_signal\": "
				   "{\"number\": 12, \"wait_s\": 30}}");
	state_schedule(&w->st, T0);
	const char *n0 = j->job.attempts[0].nodes[0].name, *n1 = j->job.attempts[0].nodes[1].name;
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	task_event(w, j, 1, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	json_t *o, *t = work_item_of(w, n0, j->job.id, &o);
	assert_non_null(t);
	assert_null(json_object_get(t, "signal_now"));
	json_decref(o);
	/* rank 1 dies: rank 0 is told to signal, and keeps running past the
	 * judgement every node being heard would give */
	task_event(w, j, 1, TASK_EVENT_EXITED, 137, EXIT_SIGNALLED, T0 + 5);
	t = work_item_of(w, n0, j->job.id, &o);
	assert_non_null(t);
	assert_int_equal(json_integer_value(json_object_get(t, "signal_now")), 12);
	json_decref(o);
	judge(w, j, T0 + 6, MONO0 + 1);
	assert_int_equal(j->job.state, JOB_RUNNING);
	/* node rank 0 uploads its part of a new tag: it commits without rank 1's */
	struct task_event ck = {
		.job = j->job.id,
		.attempt = 1,
		.rank = 0,
		.type = TASK_EVENT_CHECKPOINT,
		.at_ms = T0 + 7,
		.step = 5,
		.bytes = 100,
		.digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123"
			  "456789abcdef"};
	snprintf(ck.tag, sizeof(ck.tag), "step-000005");
	state_task_checkpoint(&w->st, &ck, T0 + 7);
	assert_int_equal(j->job.nckpts, 1);
	assert_string_equal(j->job.ckpts[0].digests[1], "");
	judge(w, j, T0 + 8, MONO0 + 2);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_non_null(strstr(j->job.attempts[0].reason,
			       "checkpoint step-000005 (step 5) written on the way out"));
	/* the gang stops now: rank 0's node no longer lists it */
	assert_null(work_item_of(w, n0, j->job.id, &o));
	json_decref(o);
	task_event(w, j, 0, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 9);
	state_schedule(&w->st, T0 + 10);
	assert_int_equal(j->job.nattempts, 2);
	assert_string_equal(j->job.attempts[1].restore_tag, "step-000005");
	t = work_item_of(w, n1, j->job.id, &o);
	json_t *c = json_object_get(t, "checkpoints");
	assert_int_equal(json_integer_value(json_object_get(c, "restore_node")), 0);
	assert_non_null(json_object_get(c, "restore_node"));
	json_decref(o);
	t = work_item_of(w, n0, j->job.id, &o);
	assert_null(json_object_get(json_object_get(t, "checkpoints"), "restore_node"));
	json_decref(o);

	/* no commit: the gang stops when the wait runs out, not before */
	for (int r = 0; r < 2; r++)
		task_event(w, j, r, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 11);
	w->st.mono_ms = MONO0 + 10;
	task_event(w, j, 0, TASK_EVENT_EXITED, 1, EXIT_EXITED, T0 + 12);
	judge(w, j, T0 + 13, MONO0 + 11);
	w->st.mono_ms = MONO0 + 11 + 29000;
	state_check_failures(&w->st, T0 + 14, w->st.mono_ms);
	assert_int_equal(j->job.state, JOB_RUNNING);
	assert_non_null(work_item_of(w, n1, j->job.id, &o));
	json_decref(o);
	w->st.mono_ms = MONO0 + 10 + 30000;
	state_check_failures(&w->st, T0 + 15, w->st.mono_ms);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_null(strstr(j->job.attempts[1].reason, "on the way out"));
	assert_null(work_item_of(w, n1, j->job.id, &o));
	json_decref(o);
	world_free(w);
}

/* A gang whose rank fails on a healthy node restarts in place: its nodes
 * are held for it while its tasks stop (a waiting job of a higher class
 * does not get them), and its next attempt starts on them, in the same
 * ranks, without a pass; the waiting job still waits. */
static void test_restart_in_place_keeps_its_nodes(void **state)
{
	struct world *w = world_new(5);
	struct snode *n1 = add_node(w, 1, 8, "aaaaaaaa"), *n2 = add_node(w, 2, 8, "bbbbbbbb");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"nodes\": 2, "
				   "\"gpus_per_task\": 8, \"requeue\": 2}");
	state_schedule(&w->st, T0);
	const char *rank0 = j->job.attempts[0].nodes[0].name;
	struct sjob *b = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\", \"nodes\": 1, "
				   "\"gpus_per_task\": 8, \"class\": \"prod\"}");
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	task_event(w, j, 1, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	/* prod may preempt, but normal is not preemptible: it waits */
	state_schedule(&w->st, T0 + 1);
	assert_int_equal(b->job.state, JOB_PENDING);
	task_event(w, j, 1, TASK_EVENT_EXITED, 1, EXIT_EXITED, T0 + 5);
	judge(w, j, T0 + 6, MONO0 + 1);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_non_null(j->inplace);
	/* rank 1's node is free of its tasks, and held for it */
	assert_int_equal(dev_used(n1) + dev_used(n2), 16 * MODEL_MILLI);
	state_schedule(&w->st, T0 + 7);
	assert_int_equal(b->job.state, JOB_PENDING);
	assert_string_equal(j->job.reason, "restarting in place: waiting for attempt 1's tasks to "
					   "stop");
	task_event(w, j, 0, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 8);
	assert_true(j->job.attempts[0].ended);
	assert_int_equal(dev_used(n1) + dev_used(n2), 16 * MODEL_MILLI);
	state_schedule(&w->st, T0 + 9);
	assert_int_equal(j->job.state, JOB_STARTING);
	assert_int_equal(j->job.nattempts, 2);
	const struct attempt *a2 = &j->job.attempts[1];
	assert_true(a2->in_place);
	assert_string_equal(a2->replaced, "");
	assert_string_equal(a2->nodes[0].name, rank0);
	assert_string_equal(a2->master_addr, j->job.attempts[0].master_addr);
	assert_null(j->inplace);
	assert_int_equal(b->job.state, JOB_PENDING);
	assert_int_equal(dev_used(n1) + dev_used(n2), 16 * MODEL_MILLI);
	assert_int_equal(j->queue->use_milli, 16 * MODEL_MILLI);
	/* a task that fails on every node: in place again, then the job fails
	 * after its restarts; what it held goes to the waiting job */
	for (int round = 0; round < 2; round++) {
		for (int r = 0; r < 2; r++)
			task_event(w, j, r, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 10);
		task_event(w, j, 0, TASK_EVENT_EXITED, 3, EXIT_EXITED, T0 + 11);
		task_event(w, j, 1, TASK_EVENT_EXITED, 3, EXIT_EXITED, T0 + 11);
		judge(w, j, T0 + 12, MONO0 + 2 + round);
		state_schedule(&w->st, T0 + 13);
	}
	assert_int_equal(j->job.state, JOB_FAILED);
	assert_int_equal(j->job.nattempts, 3);
	assert_true(j->job.attempts[2].in_place);
	assert_null(j->inplace);
	assert_int_equal(w->st.nrestarting, 0);
	assert_int_equal(j->queue->use_milli, 8 * MODEL_MILLI); /* b's */
	assert_int_equal(b->job.state, JOB_STARTING);
	world_free(w);
}

/* A lost node is swapped for a free one in its rank; the other keeps its
 * own. With no node free to replace it, the gang goes back to its queue
 * and gives back what it held; a cancelled one gives it back too. */
static void test_restart_in_place_replaces_a_lost_node(void **state)
{
	struct world *w = world_new(5);
	for (int i = 1; i <= 3; i++)
		add_node(w, i, 8, "aaaaaaaa");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"nodes\": 2, "
				   "\"gpus_per_task\": 8}");
	state_schedule(&w->st, T0);
	char r0[MODEL_NAME_MAX], r1[MODEL_NAME_MAX];
	snprintf(r0, sizeof(r0), "%s", j->job.attempts[0].nodes[0].name);
	snprintf(r1, sizeof(r1), "%s", j->job.attempts[0].nodes[1].name);
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	task_event(w, j, 1, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	state_node_lost(&w->st, state_node(&w->st, r1), "silent", T0 + 5);
	assert_int_equal(j->job.state, JOB_PENDING);
	state_schedule(&w->st, T0 + 6);
	assert_int_equal(j->job.nattempts, 1); /* rank 0's task still runs */
	task_event(w, j, 0, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 7);
	state_schedule(&w->st, T0 + 8);
	assert_int_equal(j->job.state, JOB_STARTING);
	const struct attempt *a2 = &j->job.attempts[1];
	assert_true(a2->in_place);
	assert_string_equal(a2->nodes[0].name, r0);
	assert_string_not_equal(a2->nodes[1].name, r1);
	assert_string_equal(a2->replaced, r1);
	/* now rank 1's new node is lost too, and none is left to replace it */
	char r1b[MODEL_NAME_MAX];
	snprintf(r1b, sizeof(r1b), "%s", a2->nodes[1].name);
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 9);
	task_event(w, j, 1, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 9);
	state_node_lost(&w->st, state_node(&w->st, r1b), "silent", T0 + 10);
	task_event(w, j, 0, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 11);
	state_schedule(&w->st, T0 + 12);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_int_equal(j->job.nattempts, 2);
	assert_null(j->inplace);
	struct snode *kept = state_node(&w->st, r0);
	assert_int_equal(dev_used(kept), 0);
	assert_int_equal(j->queue->use_milli, 0);
	/* a gang cancelled while it restarts gives back what it held */
	struct sjob *k =
		submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"nodes\": 1, "
			  "\"gpus_per_task\": 8, \"requeue\": 1, \"restart\": \"in-place\"}");
	state_cancel(&w->st, j, T0 + 13, &(struct tk_error){0});
	state_schedule(&w->st, T0 + 14);
	assert_int_equal(k->job.state, JOB_STARTING);
	task_event(w, k, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 15);
	task_event(w, k, 0, TASK_EVENT_EXITED, 1, EXIT_EXITED, T0 + 16);
	assert_int_equal(k->job.state, JOB_PENDING);
	assert_non_null(k->inplace);
	assert_int_equal(dev_used(kept), 8 * MODEL_MILLI);
	state_cancel(&w->st, k, T0 + 17, &(struct tk_error){0});
	assert_null(k->inplace);
	assert_int_equal(dev_used(kept), 0);
	assert_int_equal(k->queue->use_milli, 0);
	world_free(w);
}

/* Node rank k's part of tag `tag` of j's current attempt, uploaded. */
static void ckpt_part(struct world *w, struct sjob *j, int k, const char *tag, int64_t step,
		      int64_t now)
{
	struct task_event ck = {
		.job = j->job.id,
		.attempt = j->job.nattempts,
		.rank = k * j->job.req.tasks_per_node,
		.type = TASK_EVENT_CHECKPOINT,
		.at_ms = now,
		.step = step,
		.bytes = 100,
		.digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123"
			  "456789abcdef"};
	snprintf(ck.tag, sizeof(ck.tag), "%s", tag);
	state_task_checkpoint(&w->st, &ck, now);
}

/* -N 2:3, an elastic gang: it starts on its minimum where a job beside it
 * leaves no more, and on as many as are free where none waits; it grows at
 * a commit once a node frees up (a restart in place onto one node more,
 * restoring that checkpoint), and where a lost node has no replacement it
 * goes on without it, down to its minimum, then back to its queue. */
static void test_elastic_gang(void **state)
{
	struct world *w = world_new(5);
	snprintf(w->st.sched.checkpoint_store, sizeof(w->st.sched.checkpoint_store), "/store");
	for (int i = 1; i <= 3; i++)
		add_node(w, i, 8, "aaaaaaaa");
	struct sjob *b = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\", \"gpus_per_task\": "
				   "8}");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"nodes\": 2, "
				   "\"nodes_max\": 3, \"gpus_per_task\": 8}");
	state_schedule(&w->st, T0);
	assert_int_equal(b->job.state, JOB_STARTING);
	assert_int_equal(j->job.state, JOB_STARTING);
	assert_int_equal(j->job.attempts[0].nnodes, 2);
	assert_int_equal(j->job.attempts[0].ntasks, 2);
	task_event(w, b, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 1);
	for (int r = 0; r < 2; r++)
		task_event(w, j, r, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 1);
	/* b's node frees up: nothing happens before the gang's next commit */
	task_event(w, b, 0, TASK_EVENT_EXITED, 0, EXIT_EXITED, T0 + 2);
	state_schedule(&w->st, T0 + 3);
	assert_int_equal(j->job.state, JOB_RUNNING);
	ckpt_part(w, j, 0, "step-10", 10, T0 + 4);
	assert_int_equal(j->job.state, JOB_RUNNING);
	ckpt_part(w, j, 1, "step-10", 10, T0 + 4);
	assert_int_equal(j->job.nckpts, 1);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_int_equal(j->job.attempts[0].end, ATTEMPT_END_RESIZED);
	assert_non_null(strstr(j->job.attempts[0].reason, "grows from 2 nodes"));
	assert_int_equal(j->job.failures, 0);
	for (int r = 0; r < 2; r++)
		task_event(w, j, r, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 5);
	state_schedule(&w->st, T0 + 6);
	assert_int_equal(j->job.nattempts, 2);
	const struct attempt *a2 = &j->job.attempts[1];
	assert_true(a2->in_place);
	assert_int_equal(a2->nnodes, 3);
	assert_int_equal(a2->ntasks, 3);
	assert_string_equal(a2->nodes[0].name, j->job.attempts[0].nodes[0].name);
	assert_string_equal(a2->nodes[1].name, j->job.attempts[0].nodes[1].name);
	assert_string_equal(a2->restore_tag, "step-10"); /* of two nodes, restored on three */
	json_t *o, *t = work_item_of(w, a2->nodes[2].name, j->job.id, &o);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(t, "checkpoints"),
							    "restore_node")),
			 0);
	json_decref(o);
	assert_int_equal(j->queue->use_milli, 24 * MODEL_MILLI);
	/* node rank 0's host is lost with no node to replace it: the gang goes
	 * on with two, node rank 1 now rank 0 */
	char second[MODEL_NAME_MAX];
	snprintf(second, sizeof(second), "%s", a2->nodes[1].name);
	for (int r = 0; r < 3; r++)
		task_event(w, j, r, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 7);
	state_node_lost(&w->st, state_node(&w->st, a2->nodes[0].name), "silent", T0 + 8);
	for (int r = 1; r < 3; r++)
		task_event(w, j, r, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 9);
	state_schedule(&w->st, T0 + 10);
	assert_int_equal(j->job.nattempts, 3);
	const struct attempt *a3 = &j->job.attempts[2];
	assert_true(a3->in_place);
	assert_int_equal(a3->nnodes, 2);
	assert_string_equal(a3->nodes[0].name, second);
	assert_string_equal(a3->master_addr, state_node(&w->st, second)->rec.inv.addr);
	assert_int_equal(j->queue->use_milli, 16 * MODEL_MILLI);
	/* one more lost: below its minimum, back to its queue */
	for (int r = 0; r < 2; r++)
		task_event(w, j, r, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 11);
	state_node_lost(&w->st, state_node(&w->st, a3->nodes[1].name), "silent", T0 + 12);
	task_event(w, j, 0, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 13);
	state_schedule(&w->st, T0 + 14);
	assert_int_equal(j->job.nattempts, 3);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_null(j->inplace);
	world_free(w);

	/* on free nodes it starts on as many as its maximum; beside a job
	 * that waits for nodes, on its minimum */
	w = world_new(5);
	for (int i = 1; i <= 3; i++)
		add_node(w, i, 8, "aaaaaaaa");
	j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"nodes\": 2, "
		      "\"nodes_max\": 3, \"gpus_per_task\": 4, \"tasks_per_node\": 2}");
	state_schedule(&w->st, T0);
	assert_int_equal(j->job.attempts[0].nnodes, 3);
	assert_int_equal(j->job.attempts[0].ntasks, 6);
	assert_int_equal(j->queue->use_milli, 24 * MODEL_MILLI);
	state_cancel(&w->st, j, T0 + 1, &(struct tk_error){0});
	for (int r = 0; r < 6; r++)
		task_event(w, j, r, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 2);
	assert_int_equal(j->queue->use_milli, 0);
	/* beside a job that waits for nodes, on its minimum: b holds a node
	 * for ten minutes, big waits for all three, the elastic job fits
	 * before big's start on one of the two that are free */
	b = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\", \"gpus_per_task\": 8, "
		      "\"time_limit_s\": 600}");
	state_schedule(&w->st, T0 + 3);
	assert_int_equal(b->job.state, JOB_STARTING);
	struct sjob *big = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\", \"nodes\": 3, "
				     "\"gpus_per_task\": 8, \"time_limit_s\": 60}");
	struct sjob *e = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"nodes\": 1, "
				   "\"nodes_max\": 2, \"gpus_per_task\": 8, \"time_limit_s\": 30}");
	state_schedule(&w->st, T0 + 6);
	assert_int_equal(big->job.state, JOB_PENDING);
	assert_int_equal(e->job.state, JOB_STARTING); /* backfilled before big's start */
	assert_int_equal(e->job.attempts[0].nnodes, 1);
	assert_true(w->st.resource_waits > 0);
	world_free(w);
}

/* A spare idle beside its job is lent to a preemptible job that waits for
 * accelerators: it runs there (charged as itself, the spare's job not
 * charged for it meanwhile) until a restart in place needs the spare; a
 * restart that keeps its nodes leaves it be, one that must replace a node
 * preempts it and waits for it to leave, then takes the spare. */
static void test_spare_lent_to_preemptible_work(void **state)
{
	struct world *w = world_new(5);
	for (int i = 1; i <= 3; i++)
		add_node(w, i, 8, "aaaaaaaa");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", "
				   "\"gpus_per_task\": 8, \"spares\": 1, \"requeue\": 2}");
	struct sjob *x = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\", \"gpus_per_task\": "
				   "8}");
	state_schedule(&w->st, T0);
	assert_int_equal(j->nspares, 1);
	assert_int_equal(x->job.state, JOB_STARTING);
	struct snode *spare = state_node(&w->st, j->spares[0].name);
	struct sjob *p = submit(w, "{\"command\": [\"p\"], \"cwd\": \"/tmp\", \"gpus_per_task\": "
				   "8, \"class\": \"batch\"}");
	/* a job of a class that may not be preempted waits */
	struct sjob *q = submit(w, "{\"command\": [\"q\"], \"cwd\": \"/tmp\", \"gpus_per_task\": "
				   "8}");
	state_schedule(&w->st, T0 + 1);
	assert_int_equal(q->job.state, JOB_PENDING);
	assert_int_equal(p->job.state, JOB_STARTING);
	assert_string_equal(p->job.attempts[0].nodes[0].name, spare->rec.inv.name);
	assert_int_equal(p->borrowed_from, j->job.id);
	assert_int_equal(j->spares_lent[0], p->job.id);
	assert_int_equal(dev_used(spare), 8 * MODEL_MILLI);
	assert_int_equal(j->queue->use_milli, 24 * MODEL_MILLI); /* j, x and p: no spare */
	state_cancel(&w->st, q, T0 + 2, &(struct tk_error){0});
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 2);
	task_event(w, p, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 2);
	/* j fails on its healthy node: in place again, the borrower stays */
	const char *home = j->job.attempts[0].nodes[0].name;
	task_event(w, j, 0, TASK_EVENT_EXITED, 1, EXIT_EXITED, T0 + 3);
	state_schedule(&w->st, T0 + 4);
	assert_int_equal(j->job.nattempts, 2);
	assert_true(j->job.attempts[1].in_place);
	assert_string_equal(j->job.attempts[1].nodes[0].name, home);
	assert_int_equal(p->job.state, JOB_RUNNING);
	assert_int_equal(j->spares_lent[0], p->job.id);
	/* j's node is lost: the borrower is preempted, j waits for it */
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 5);
	state_node_lost(&w->st, state_node(&w->st, home), "silent", T0 + 6);
	state_schedule(&w->st, T0 + 7);
	assert_int_equal(j->job.nattempts, 2);
	assert_int_equal(p->job.state, JOB_PENDING);
	assert_non_null(strstr(p->job.attempts[0].reason, "it ran on a spare of job"));
	assert_non_null(strstr(j->job.reason, "to leave its spare"));
	task_event(w, p, 0, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 8);
	assert_int_equal(p->borrowed_from, 0);
	state_schedule(&w->st, T0 + 9);
	assert_int_equal(j->job.nattempts, 3);
	const struct attempt *a3 = &j->job.attempts[2];
	assert_true(a3->in_place);
	assert_string_equal(a3->nodes[0].name, spare->rec.inv.name);
	assert_int_equal(p->job.state, JOB_PENDING); /* nothing is free for it */
	assert_int_equal(dev_used(spare), 8 * MODEL_MILLI);
	assert_int_equal(j->queue->use_milli, 16 * MODEL_MILLI); /* j and x */
	world_free(w);
}

/* A job with a spare: placed with one node more, held idle and charged to
 * its queue; a lost node is swapped for the spare though no other node is
 * free, the other node keeps its rank, and a node that frees up becomes
 * the next spare. The spares go with the job's end. */
static void test_spare_takes_a_lost_nodes_place(void **state)
{
	struct world *w = world_new(5);
	for (int i = 1; i <= 3; i++)
		add_node(w, i, 8, "aaaaaaaa");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"nodes\": 2, "
				   "\"gpus_per_task\": 8, \"spares\": 1}");
	state_schedule(&w->st, T0);
	assert_int_equal(j->job.state, JOB_STARTING);
	assert_int_equal(j->job.attempts[0].nnodes, 2);
	assert_int_equal(j->job.attempts[0].ntasks, 2);
	assert_int_equal(j->nspares, 1);
	char spare[MODEL_NAME_MAX], r0[MODEL_NAME_MAX], r1[MODEL_NAME_MAX];
	snprintf(spare, sizeof(spare), "%s", j->spares[0].name);
	snprintf(r0, sizeof(r0), "%s", j->job.attempts[0].nodes[0].name);
	snprintf(r1, sizeof(r1), "%s", j->job.attempts[0].nodes[1].name);
	assert_int_equal(dev_used(state_node(&w->st, spare)), 8 * MODEL_MILLI);
	assert_int_equal(state_node(&w->st, spare)->nparts, 0);
	assert_int_equal(j->queue->use_milli, 24 * MODEL_MILLI);
	json_t *sf = state_node_spare_for(&w->st, state_node(&w->st, spare));
	assert_int_equal(json_integer_value(json_array_get(sf, 0)), j->job.id);
	json_decref(sf);
	/* another job waits: nothing is free */
	struct sjob *b = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\", \"nodes\": 1, "
				   "\"gpus_per_task\": 8}");
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	task_event(w, j, 1, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	state_schedule(&w->st, T0 + 1);
	assert_int_equal(b->job.state, JOB_PENDING);
	state_node_lost(&w->st, state_node(&w->st, r0), "silent", T0 + 5);
	task_event(w, j, 1, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 6);
	state_schedule(&w->st, T0 + 7);
	assert_int_equal(j->job.state, JOB_STARTING);
	const struct attempt *a2 = &j->job.attempts[1];
	assert_true(a2->in_place);
	assert_string_equal(a2->nodes[0].name, spare);
	assert_string_equal(a2->nodes[1].name, r1);
	assert_string_equal(a2->replaced, r0);
	assert_int_equal(j->nspares, 0); /* none free to take its place */
	assert_int_equal(b->job.state, JOB_PENDING);
	/* the spare's 8 idle devices, held from the start to the swap, are
	 * attempt 1's to pay */
	int64_t mdev, node_ms;
	assert_int_equal(j->job.attempts[0].spare_mdev_ms, 7 * 8 * MODEL_MILLI);
	assert_int_equal(j->job.attempts[0].spare_node_ms, 7);
	state_spare_held(j, &j->job.attempts[0], T0 + 100, &mdev, &node_ms);
	assert_true(mdev == 7 * 8 * MODEL_MILLI && node_ms == 7);
	state_spare_held(j, a2, T0 + 8, &mdev, &node_ms);
	assert_true(mdev == 0 && node_ms == 0);
	/* the lost node comes back: it is the next spare, not the waiting job's */
	state_register(&w->st, &state_node(&w->st, r0)->rec.inv, "aaaaaaaa", NULL, 0, T0 + 8,
		       MONO0 + 8);
	state_schedule(&w->st, T0 + 9);
	assert_int_equal(j->nspares, 1);
	assert_string_equal(j->spares[0].name, r0);
	assert_int_equal(b->job.state, JOB_PENDING);
	/* ... and the new spare attempt 2's, counted as it is held */
	state_spare_held(j, a2, T0 + 10, &mdev, &node_ms);
	assert_true(mdev == 8 * MODEL_MILLI && node_ms == 1);
	/* it completes: its spare goes, to the waiting job */
	for (int r = 0; r < 2; r++)
		task_event(w, j, r, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 10);
	for (int r = 0; r < 2; r++)
		task_event(w, j, r, TASK_EVENT_EXITED, 0, EXIT_EXITED, T0 + 11);
	assert_int_equal(j->job.state, JOB_COMPLETED);
	assert_int_equal(j->nspares, 0);
	assert_int_equal(w->st.nspared, 0);
	assert_int_equal(j->job.attempts[1].spare_mdev_ms, 2 * 8 * MODEL_MILLI);
	assert_int_equal(j->job.attempts[0].spare_mdev_ms, 7 * 8 * MODEL_MILLI);
	state_schedule(&w->st, T0 + 12);
	assert_int_equal(b->job.state, JOB_STARTING);
	world_free(w);
}

/* A spare pool of one node of n's model ("spares": {"MODEL": 1}). */
static void pool_of_one(struct world *w, const struct snode *n)
{
	w->st.sched.nspare_pool = 1;
	snprintf(w->st.sched.spare_pool[0].model, MODEL_NAME_MAX, "%s", n->rec.inv.accel[0].model);
	w->st.sched.spare_pool[0].nodes = 1;
}

/* The cluster's spare pool: an idle node kept out of the passes (a job
 * waits rather than take it), swapped in for a lost node of a gang, and
 * refilled when a node is idle again; a smaller pool lets it go. */
static void test_pool_spare(void **state)
{
	struct world *w = world_new(5);
	struct snode *n[5];
	for (int i = 1; i <= 4; i++)
		n[i] = add_node(w, i, 8, "aaaaaaaa");
	pool_of_one(w, n[1]);
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"nodes\": 2, "
				   "\"gpus_per_task\": 8}");
	struct sjob *b = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\", \"nodes\": 1, "
				   "\"gpus_per_task\": 8}");
	struct sjob *c = submit(w, "{\"command\": [\"y\"], \"cwd\": \"/tmp\", \"nodes\": 1, "
				   "\"gpus_per_task\": 8}");
	state_schedule(&w->st, T0 + 1);
	assert_true(n[1]->pool_spare);
	assert_int_equal(j->job.state, JOB_STARTING);
	assert_int_equal(b->job.state, JOB_STARTING);
	assert_int_equal(c->job.state, JOB_PENDING); /* the pool's node is not for it */
	assert_int_equal(dev_used(n[1]), 0);
	char r0[MODEL_NAME_MAX], r1[MODEL_NAME_MAX];
	snprintf(r0, sizeof(r0), "%s", j->job.attempts[0].nodes[0].name);
	snprintf(r1, sizeof(r1), "%s", j->job.attempts[0].nodes[1].name);
	for (int r = 0; r < 2; r++)
		task_event(w, j, r, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 2);
	state_node_lost(&w->st, state_node(&w->st, r1), "silent", T0 + 3);
	task_event(w, j, 0, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 4);
	state_schedule(&w->st, T0 + 5);
	assert_int_equal(j->job.state, JOB_STARTING);
	const struct attempt *a2 = &j->job.attempts[1];
	assert_string_equal(a2->nodes[0].name, r0);
	assert_string_equal(a2->nodes[1].name, "n1");
	assert_string_equal(a2->replaced, r1);
	assert_false(n[1]->pool_spare);
	assert_int_equal(c->job.state, JOB_PENDING);
	/* the lost node is back and idle: it is the pool's now, not c's */
	struct snode *back = state_node(&w->st, r1);
	state_register(&w->st, &back->rec.inv, "aaaaaaaa", NULL, 0, T0 + 6, MONO0 + 6);
	state_schedule(&w->st, T0 + 7);
	assert_true(back->pool_spare);
	assert_int_equal(c->job.state, JOB_PENDING);
	/* no pool: the node goes to the waiting job */
	w->st.sched.spare_pool[0].nodes = 0;
	state_schedule(&w->st, T0 + 8);
	state_schedule(&w->st, T0 + 9);
	assert_false(back->pool_spare);
	assert_int_equal(c->job.state, JOB_STARTING);
	world_free(w);
}

/* The pool's idle spare is lent to a preemptible job that waits for
 * accelerators, as a job's own spare is: it stays the pool's (no other
 * idle node joins for it), and a restart in place that finds no other
 * node preempts the borrower, waits for it to leave, and takes it. */
static void test_pool_spare_lent_to_preemptible_work(void **state)
{
	struct world *w = world_new(5);
	struct snode *n[5];
	for (int i = 1; i <= 4; i++)
		n[i] = add_node(w, i, 8, "aaaaaaaa");
	pool_of_one(w, n[1]);
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"nodes\": 2, "
				   "\"gpus_per_task\": 8}");
	struct sjob *x = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\", \"nodes\": 1, "
				   "\"gpus_per_task\": 8}");
	state_schedule(&w->st, T0 + 1);
	assert_true(n[1]->pool_spare);
	assert_int_equal(x->job.state, JOB_STARTING);
	struct sjob *q = submit(w, "{\"command\": [\"q\"], \"cwd\": \"/tmp\", \"gpus_per_task\": "
				   "8}");
	struct sjob *p = submit(w, "{\"command\": [\"p\"], \"cwd\": \"/tmp\", \"gpus_per_task\": "
				   "4, \"class\": \"batch\"}");
	state_schedule(&w->st, T0 + 2);
	assert_int_equal(q->job.state, JOB_PENDING); /* not preemptible: it waits */
	assert_int_equal(p->job.state, JOB_STARTING);
	assert_string_equal(p->job.attempts[0].nodes[0].name, "n1");
	assert_true(p->borrowed_pool);
	assert_int_equal(n[1]->pool_lent_to, p->job.id);
	/* it stays the pool's, lent: no other node joins for it */
	state_schedule(&w->st, T0 + 3);
	assert_true(n[1]->pool_spare);
	int in_pool = 0;
	for (int i = 1; i <= 4; i++)
		in_pool += n[i]->pool_spare;
	assert_int_equal(in_pool, 1);
	for (int r = 0; r < 2; r++)
		task_event(w, j, r, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 3);
	task_event(w, p, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 3);
	/* a node of j is lost: the borrower is preempted, j waits for it */
	char r0[MODEL_NAME_MAX], r1[MODEL_NAME_MAX];
	snprintf(r0, sizeof(r0), "%s", j->job.attempts[0].nodes[0].name);
	snprintf(r1, sizeof(r1), "%s", j->job.attempts[0].nodes[1].name);
	state_node_lost(&w->st, state_node(&w->st, r1), "silent", T0 + 4);
	task_event(w, j, 0, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 5);
	state_schedule(&w->st, T0 + 6);
	assert_int_equal(j->job.nattempts, 1);
	assert_int_equal(p->job.state, JOB_PENDING);
	assert_non_null(strstr(p->job.attempts[0].reason, "a spare of the cluster's pool"));
	assert_non_null(strstr(j->job.reason, "to leave the pool's spare n1"));
	state_schedule(&w->st, T0 + 7);
	assert_int_equal(j->job.nattempts, 1); /* p has not left */
	task_event(w, p, 0, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 8);
	assert_false(p->borrowed_pool);
	assert_int_equal(n[1]->pool_lent_to, 0);
	state_schedule(&w->st, T0 + 9);
	assert_int_equal(j->job.nattempts, 2);
	const struct attempt *a2 = &j->job.attempts[1];
	assert_true(a2->in_place);
	assert_string_equal(a2->nodes[0].name, r0);
	assert_string_equal(a2->nodes[1].name, "n1");
	assert_true(p->job.attempts[0].end_ms <= a2->start_ms);
	assert_false(n[1]->pool_spare);
	assert_int_equal(p->job.state, JOB_PENDING); /* nothing is free for it */
	world_free(w);
}

/* ---- restarts in place under random faults ---------------------------------------- */

static uint64_t rnd_state;
static int rnd(int n)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return (int)(rnd_state % (uint64_t)n);
}

static void attempt_event(struct world *w, struct sjob *j, int attempt, int rank, int code,
			  enum exit_cause cause, int64_t now)
{
	struct task_event ev = {.job = j->job.id,
				.attempt = attempt,
				.rank = rank,
				.type = TASK_EVENT_EXITED,
				.at_ms = now,
				.exit_code = code,
				.cause = cause};
	state_task_exited(&w->st, &ev, now);
}

/* What the state holds against what its parts and holds say: every node's
 * devices and CPUs, every queue's use; no device over full; no attempt
 * running beside a task of an earlier one (invariant A); the list of
 * restarts in place and the jobs' marks agree. */
static void check_world(struct world *w, struct sjob **jobs, int njobs, int seed, int step)
{
	struct state *s = &w->st;
	int64_t use[8] = {0};
	for (int i = 0; i < s->nnodes; i++) {
		struct snode *n = s->nodes[i];
		int dev[MODEL_MAX_ACCELS] = {0};
		int cpus = 0;
		for (int k = 0; k < n->nparts; k++) {
			const struct part *p = &n->parts[k];
			const struct attempt_node *an =
				&p->job->job.attempts[p->attempt - 1].nodes[p->node_index];
			for (int d = 0; d < an->ndev; d++)
				dev[an->devs[d]] += an->milli;
			cpus += p->job->job.req.tasks_per_node * p->job->job.req.cpus_per_task;
		}
		for (int x = 0; x < njobs; x++) {
			for (int k = 0; k < jobs[x]->nspares; k++) {
				const struct attempt_node *an = &jobs[x]->spares[k];
				if (strcmp(an->name, n->rec.inv.name) != 0 ||
				    jobs[x]->spares_lent[k]) /* its borrower's part holds it */
					continue;
				for (int d = 0; d < an->ndev; d++)
					dev[an->devs[d]] += an->milli;
				cpus += jobs[x]->job.req.tasks_per_node *
					jobs[x]->job.req.cpus_per_task;
			}
			const struct inplace *ip = jobs[x]->inplace;
			for (int k = 0; ip && k < ip->nnodes; k++) {
				const struct attempt_node *an =
					&jobs[x]->job.attempts[ip->from - 1].nodes[k];
				if (!ip->held[k] || strcmp(an->name, n->rec.inv.name) != 0)
					continue;
				for (int d = 0; d < an->ndev; d++)
					dev[an->devs[d]] += an->milli;
				cpus += jobs[x]->job.req.tasks_per_node *
					jobs[x]->job.req.cpus_per_task;
			}
		}
		for (int d = 0; d < n->rec.inv.naccel; d++)
			if (dev[d] != n->dev_used[d] || dev[d] > MODEL_MILLI)
				fail_msg("seed %d step %d: node %s device %d: used %d, parts and "
					 "holds %d",
					 seed, step, n->rec.inv.name, d, n->dev_used[d], dev[d]);
		if (cpus != n->cpus_used)
			fail_msg("seed %d step %d: node %s CPUs used %d, parts and holds %d", seed,
				 step, n->rec.inv.name, n->cpus_used, cpus);
		/* the pool's spare is idle, or lent: its borrower's part alone */
		const struct sjob *b = n->pool_lent_to ? state_job(s, n->pool_lent_to) : NULL;
		if (n->pool_lent_to && (!n->pool_spare || !b || !b->borrowed_pool ||
					strcmp(b->borrowed_node, n->rec.inv.name) != 0 ||
					n->nparts > 1 || (n->nparts && n->parts[0].job != b)))
			fail_msg(
				"seed %d step %d: node %s lent by the pool to job %lld, which does "
				"not borrow it alone",
				seed, step, n->rec.inv.name, (long long)n->pool_lent_to);
		if (n->pool_spare && !n->pool_lent_to && (cpus || n->nparts))
			fail_msg("seed %d step %d: node %s is the pool's spare and in use", seed,
				 step, n->rec.inv.name);
	}
	int restarting = 0;
	for (int x = 0; x < njobs; x++) {
		struct sjob *j = jobs[x];
		const struct inplace *ip = j->inplace;
		restarting += ip != NULL;
		const struct attempt *cur = job_current_attempt(&j->job);
		bool active = j->job.state == JOB_STARTING || j->job.state == JOB_RUNNING;
		if (ip && !(j->job.state == JOB_PENDING || (active && cur->number == ip->from)))
			fail_msg("seed %d step %d: job %lld restarts in place while %s", seed, step,
				 (long long)j->job.id, job_state_name(j->job.state));
		for (int a = 0; active && a < j->job.nattempts - 1; a++)
			for (int t = 0; t < j->job.attempts[a].ntasks; t++)
				if (!state_task_done(&j->job.attempts[a].tasks[t]))
					fail_msg("seed %d step %d: job %lld attempt %d runs beside "
						 "task %d of attempt %d",
						 seed, step, (long long)j->job.id, cur->number, t,
						 a + 1);
		if (j->queue->index < 8) {
			for (int a = 0; a < j->job.nattempts; a++)
				for (int i = 0; i < s->nnodes; i++)
					for (int k = 0; k < s->nodes[i]->nparts; k++) {
						const struct part *p = &s->nodes[i]->parts[k];
						if (p->job != j || p->attempt != a + 1)
							continue;
						const struct attempt_node *an =
							&j->job.attempts[a].nodes[p->node_index];
						use[j->queue->index] +=
							(int64_t)an->ndev * an->milli;
					}
			for (int k = 0; k < j->nspares; k++) {
				if (!j->spares_lent[k]) {
					use[j->queue->index] +=
						(int64_t)j->spares[k].ndev * j->spares[k].milli;
					continue;
				}
				/* lent: its borrower holds it, and knows it */
				const struct sjob *b = state_job(s, j->spares_lent[k]);
				if (!b || b->borrowed_from != j->job.id ||
				    strcmp(b->borrowed_node, j->spares[k].name) != 0)
					fail_msg("seed %d step %d: spare %s of job %lld lent to "
						 "job %lld, which does not borrow it",
						 seed, step, j->spares[k].name,
						 (long long)j->job.id,
						 (long long)j->spares_lent[k]);
			}
			if (j->nspares && !(active || ip))
				fail_msg("seed %d step %d: job %lld holds spares while %s", seed,
					 step, (long long)j->job.id, job_state_name(j->job.state));
			for (int k = 0; ip && k < ip->nnodes; k++)
				if (ip->held[k]) {
					const struct attempt_node *an =
						&j->job.attempts[ip->from - 1].nodes[k];
					use[j->queue->index] += (int64_t)an->ndev * an->milli;
				}
		}
	}
	if (restarting != s->nrestarting)
		fail_msg("seed %d step %d: %d jobs restart in place, the list has %d", seed, step,
			 restarting, s->nrestarting);
	for (int q = 0; q < s->nqueues && q < 8; q++)
		if (s->queues[q]->use_milli != use[q])
			fail_msg("seed %d step %d: queue %s uses %lld, parts and holds %lld", seed,
				 step, s->queues[q]->spec.name, (long long)s->queues[q]->use_milli,
				 (long long)use[q]);
}

/* Gangs restarting in place among random task failures, node losses,
 * agents that come back without their tasks, cancels and passes: at every
 * step the books balance and no attempt runs beside its last. Thousands of
 * seeds (INPLACE_SEEDS). */
static void test_restart_in_place_random(void **state)
{
	const char *env = getenv("INPLACE_SEEDS");
	int seeds = env ? atoi(env) : 2000, started_in_place = 0, replaced = 0, fell_back = 0,
	    grew = 0, shrunk = 0, borrowed = 0, claimed = 0, pool_borrowed = 0, pool_claimed = 0;
	for (int seed = 1; seed <= seeds; seed++) {
		rnd_state = 0x9e3779b97f4a7c15ULL * (uint64_t)seed;
		struct world *w = world_new(3);
		for (int i = 1; i <= 4; i++)
			add_node(w, i, 4, "aaaaaaaa");
		if (seed % 3 == 0) { /* a spare pool of one node */
			pool_of_one(w, w->st.nodes[0]);
		}
		struct sjob *jobs[16];
		int njobs = 0;
		static const char *const reqs[] = {
			"{\"command\": [\"t\"], \"cwd\": \"/\", \"nodes\": 2, "
			"\"gpus_per_task\": 4, \"requeue\": 3}",
			"{\"command\": [\"t\"], \"cwd\": \"/\", \"nodes\": 2, "
			"\"gpus_per_task\": 2, \"requeue\": 2, \"queue\": \"q2\"}",
			"{\"command\": [\"t\"], \"cwd\": \"/\", \"nodes\": 1, "
			"\"gpus_per_task\": 4, \"class\": \"prod\"}",
			"{\"command\": [\"t\"], \"cwd\": \"/\", \"nodes\": 1, "
			"\"gpus_per_task\": 2, \"requeue\": 1, \"restart\": \"in-place\"}",
			"{\"command\": [\"t\"], \"cwd\": \"/\", \"nodes\": 1, "
			"\"gpus_per_task\": 2, \"requeue\": 2, \"spares\": 1}",
			"{\"command\": [\"t\"], \"cwd\": \"/\", \"nodes\": 1, \"nodes_max\": 3, "
			"\"gpus_per_task\": 2, \"requeue\": 3}",
			"{\"command\": [\"t\"], \"cwd\": \"/\", \"gpus_per_task\": 2, "
			"\"class\": \"batch\", \"requeue\": 1}",
		};
		/* elastic gangs grow at a commit: the checkpoints are kept */
		if (seed % 2)
			snprintf(w->st.sched.checkpoint_store, sizeof(w->st.sched.checkpoint_store),
				 "/store");
		int ckpts = 0;
		for (int k = 0; k < 7; k++)
			jobs[njobs++] = submit(w, reqs[k]);
		int64_t now = T0, mono = MONO0;
		int agent = 0;
		for (int step = 0; step < 120; step++) {
			now += 100;
			mono += 100;
			struct sjob *j = jobs[rnd(njobs)];
			const struct attempt *a = job_current_attempt(&j->job);
			int action = rnd(10);
			if (action <= 1) {
				state_schedule(&w->st, now);
			} else if (action == 2 && a && !job_state_final(j->job.state)) {
				int t = rnd(a->ntasks);
				if (a->tasks[t].state == TASK_WAITING)
					task_event(w, j, t, TASK_EVENT_STARTED, 0, EXIT_EXITED,
						   now);
			} else if (action == 3 && a &&
				   (j->job.state == JOB_RUNNING || j->job.state == JOB_STARTING)) {
				int t = rnd(a->ntasks);
				if (!state_task_done(&a->tasks[t]))
					task_event(w, j, t, TASK_EVENT_EXITED, rnd(3) ? 1 : 0,
						   EXIT_EXITED, now);
			} else if (action == 4 || action == 5) {
				/* a stopped task of any attempt ends */
				for (int n = 0; n < j->job.nattempts; n++) {
					const struct attempt *b = &j->job.attempts[n];
					bool cur = state_attempt_is_current(j, b);
					int t = rnd(b->ntasks);
					if (!cur && !state_task_done(&b->tasks[t])) {
						attempt_event(w, j, b->number, t, 143,
							      EXIT_CANCELLED, now);
						break;
					}
				}
			} else if (action == 6) {
				for (int i = 0; i < w->st.nnodes; i++)
					state_node_seen(&w->st, w->st.nodes[i], mono);
				state_check_failures(&w->st, now, mono);
				state_check_nodes(&w->st, now, mono);
			} else if (action == 7 && rnd(3) == 0) {
				struct snode *n = w->st.nodes[rnd(w->st.nnodes)];
				if (rnd(2))
					state_node_lost(&w->st, n, "silent", now);
				else if (n->live != NODE_LIVE_DOWN) {
					/* its agent comes back without its tasks */
					char id[24];
					snprintf(id, sizeof(id), "agent%03d", ++agent);
					state_register(&w->st, &n->rec.inv, id, NULL, 0, now, mono);
				}
			} else if (action == 8) {
				struct snode *n = w->st.nodes[rnd(w->st.nnodes)];
				if (n->live == NODE_LIVE_DOWN)
					state_register(&w->st, &n->rec.inv, n->rec.agent_id, NULL,
						       0, now, mono);
			} else if (action == 9 && rnd(8) == 0 && !job_state_final(j->job.state)) {
				state_cancel(&w->st, j, now, &(struct tk_error){0});
				if (njobs < 16)
					jobs[njobs++] = submit(w, reqs[rnd(7)]);
			} else if (action == 9 && a && j->job.state == JOB_RUNNING) {
				/* every node of it uploads its part of a new tag */
				char tag[32];
				snprintf(tag, sizeof(tag), "s-%d", ++ckpts);
				for (int k = 0; k < a->nnodes; k++)
					ckpt_part(w, j, k, tag, ckpts, now);
			}
			check_world(w, jobs, njobs, seed, step);
			for (int x = 0; x < njobs; x++) {
				for (int k = 0; k < jobs[x]->nspares; k++)
					borrowed += jobs[x]->spares_lent[k] != 0;
				pool_borrowed += jobs[x]->borrowed_pool;
			}
		}
		for (int x = 0; x < njobs; x++)
			for (int n = 1; n < jobs[x]->job.nattempts; n++) {
				started_in_place += jobs[x]->job.attempts[n].in_place;
				replaced += jobs[x]->job.attempts[n].replaced[0] != 0;
				fell_back += !jobs[x]->job.attempts[n].in_place;
				const struct attempt *b = &jobs[x]->job.attempts[n];
				grew += b[-1].end == ATTEMPT_END_RESIZED &&
					b->nnodes > b[-1].nnodes;
				shrunk += b->in_place && b->nnodes < b[-1].nnodes;
				claimed += b[-1].end == ATTEMPT_END_PREEMPTED &&
					   strstr(b[-1].reason, "ran on a spare of job") != NULL;
				pool_claimed += b[-1].end == ATTEMPT_END_PREEMPTED &&
						strstr(b[-1].reason, "spare of the cluster's pool");
			}
		world_free(w);
	}
	/* the schedules reach every path */
	print_message("# %d attempts started in place (%d with a node replaced), %d through the "
		      "queue; elastic gangs grew %d times, shrank %d; a spare lent at %d steps, "
		      "%d borrowers preempted for it; the pool's spare lent at %d steps, %d "
		      "borrowers preempted for it\n",
		      started_in_place, replaced, fell_back, grew, shrunk, borrowed, claimed,
		      pool_borrowed, pool_claimed);
	assert_true(started_in_place > seeds / 4 && replaced > seeds / 20 && fell_back > 0);
	assert_true(grew > 0 && shrunk > 0 && borrowed > 0 && claimed > 0);
	assert_true(pool_borrowed > 0 && pool_claimed > 0);
}

/* A rank fails because its peer's node died: that node goes DOWN before
 * the failure is judged, and the job is requeued for a lost node, its
 * restarts untouched. */
static void test_peer_death_is_a_lost_node(void **state)
{
	struct world *w = world_new(1);
	add_node(w, 1, 8, "aaaaaaaa");
	add_node(w, 2, 8, "bbbbbbbb");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", \"nodes\": 2, "
				   "\"gpus_per_task\": 8}");
	state_schedule(&w->st, T0);
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	task_event(w, j, 1, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	struct snode *alive = state_node(&w->st, j->job.attempts[0].nodes[0].name);
	/* rank 0 fails (its peer is gone); rank 1's node is silent from now */
	task_event(w, j, 0, TASK_EVENT_EXITED, 1, EXIT_EXITED, T0 + 5);
	beats(w, alive, MONO0, MONO0 + NODE_TIMEOUT_MS + 1);
	state_check_nodes(&w->st, T0 + 10, MONO0 + NODE_TIMEOUT_MS / 2);
	assert_int_equal(j->job.state, JOB_RUNNING); /* not yet judged */
	state_check_nodes(&w->st, T0 + 20, MONO0 + NODE_TIMEOUT_MS + 1);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_int_equal(j->job.failures, 0);
	assert_int_equal(j->node_losses, 1);
	assert_non_null(strstr(j->job.attempts[0].reason, "lost: no heartbeat"));
	world_free(w);
}

/* A task that ended because its agent stopped (or its lease ran out) is
 * a lost node, not a failure: requeued without spending a restart. */
static void test_task_lost_with_agent(void **state)
{
	struct world *w = world_new(1);
	add_node(w, 1, 8, "aaaaaaaa");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\"}");
	state_schedule(&w->st, T0);
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	struct task_event ev = {.job = j->job.id,
				.attempt = 1,
				.rank = 0,
				.type = TASK_EVENT_EXITED,
				.at_ms = T0 + 5,
				.exit_code = 143,
				.cause = EXIT_LOST,
				.detail = "no lease from its agent for 10s"};
	state_task_exited(&w->st, &ev, T0 + 5);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_int_equal(j->node_losses, 1);
	assert_int_equal(j->job.failures, 0);
	assert_string_equal(j->job.attempts[0].reason,
			    "node n1 lost: no lease from its agent for 10s");
	assert_true(j->job.attempts[0].ended);
	state_schedule(&w->st, T0 + 10);
	assert_int_equal(j->job.nattempts, 2);
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0 + 11);
	ev.attempt = 2;
	ev.detail[0] = 0;
	state_task_exited(&w->st, &ev, T0 + 12);
	assert_int_equal(j->job.state, JOB_FAILED);
	assert_non_null(strstr(j->job.reason, "node n1 lost: its agent stopped; not requeued"));
	world_free(w);
}

/* A node whose agent said it stops takes no new work until an agent
 * registers again. */
static void test_agent_stopping(void **state)
{
	struct world *w = world_new(5);
	struct snode *n = add_node(w, 1, 8, "aaaaaaaa");
	state_agent_stopping(&w->st, n); /* what its last heartbeat says */
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\"}");
	state_schedule(&w->st, T0);
	assert_int_equal(j->job.state, JOB_PENDING);
	n = add_node(w, 1, 8, "bbbbbbbb");
	assert_false(n->agent_stopping);
	state_schedule(&w->st, T0 + 1);
	assert_int_equal(j->job.state, JOB_STARTING);
	world_free(w);
}

/* A job lost before any of its tasks started has not run: it goes again
 * without spending a node requeue, even where none is allowed. */
static void test_lost_before_it_ran(void **state)
{
	struct world *w = world_new(0);
	struct snode *n = add_node(w, 1, 8, "aaaaaaaa");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\"}");
	state_schedule(&w->st, T0);
	assert_int_equal(j->job.state, JOB_STARTING);
	state_node_lost(&w->st, n, "cable cut", T0 + 1);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_int_equal(j->node_losses, 0);
	assert_non_null(strstr(j->job.reason, "cable cut; requeued (it had not started)"));
	world_free(w);
}

/* Cancel: the job ends at once, its devices stay held until its task is
 * reported gone, and cancelling again is refused. */
static void test_cancel_and_drain(void **state)
{
	struct world *w = world_new(5);
	struct snode *n = add_node(w, 1, 8, "aaaaaaaa");
	struct sjob *j = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", "
				   "\"gpus_per_task\": 8}");
	struct sjob *next = submit(w, "{\"command\": [\"train\"], \"cwd\": \"/tmp\", "
				      "\"gpus_per_task\": 8}");
	state_schedule(&w->st, T0);
	assert_int_equal(j->job.state, JOB_STARTING);
	assert_int_equal(next->job.state, JOB_PENDING);
	state_drain(&w->st, n, DRAIN_OPERATOR, "replace fan");
	assert_int_equal(state_node_state(&w->st, n), NODE_DRAINING);
	struct tk_error err;
	assert_int_equal(state_cancel(&w->st, j, T0 + 5, &err), 0);
	assert_int_equal(j->job.state, JOB_CANCELLED);
	assert_int_equal(w->nended, 1);
	assert_int_equal(state_cancel(&w->st, j, T0 + 6, &err), -EALREADY);
	assert_string_equal(err.text, "job 1 already ended: CANCELLED");
	assert_int_equal(dev_used(n), 8 * MODEL_MILLI); /* not given twice */
	task_event(w, j, 0, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 7);
	assert_int_equal(dev_used(n), 0);
	assert_int_equal(state_node_state(&w->st, n), NODE_DRAINED);
	state_schedule(&w->st, T0 + 8);
	assert_int_equal(next->job.state, JOB_PENDING); /* a drained node takes nothing */
	state_resume(&w->st, n);
	assert_int_equal(state_node_state(&w->st, n), NODE_UP);
	state_schedule(&w->st, T0 + 9);
	assert_int_equal(next->job.state, JOB_STARTING);
	/* a waiting job cancelled leaves the queue */
	struct sjob *third = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\"}");
	assert_int_equal(w->st.npending, 1);
	assert_int_equal(state_cancel(&w->st, third, T0 + 10, &err), 0);
	assert_int_equal(w->st.npending, 0);
	assert_false(third->pending);
	world_free(w);
}

/* A passing validation resumes a node that a validation drained, and no
 * other: an operator's reason that reads like a validation's is text. */
static void test_validation_resumes_only_its_own_drains(void **state)
{
	struct world *w = world_new(5);
	struct snode *n = add_node(w, 1, 8, "aaaaaaaa");
	struct tk_error err;
	const char *args[] = {"--quick"};
	/* an operator's drain, worded as a validation's */
	state_drain(&w->st, n, DRAIN_OPERATOR, "validate: recheck");
	struct sjob *v;
	struct snode *one[1] = {n};
	assert_int_equal(valid_create(&w->st, one, 1, args, 1, NULL, "op", T0, &v, &err), 0);
	assert_int_equal(valid_report(&w->st, v, "n1", true, "", "", NULL, false, T0 + 1, &err), 0);
	assert_int_equal(n->rec.verdict, VERDICT_PASS);
	assert_true(n->rec.drained && n->rec.drain_source == DRAIN_OPERATOR);
	assert_string_equal(n->rec.drain_reason, "validate: recheck");
	state_cancel(&w->st, v, T0 + 2, &err);
	valid_job_ended(&w->st, v, T0 + 2);
	/* a validation's own drain: its next pass resumes the node */
	state_resume(&w->st, n);
	assert_int_equal(valid_create(&w->st, one, 1, args, 1, NULL, "op", T0 + 3, &v, &err), 0);
	assert_int_equal(valid_report(&w->st, v, "n1", false, "compute", "cpu_sgemm 0.1 < 0.2",
				      NULL, false, T0 + 4, &err),
			 0);
	assert_true(n->rec.drained && n->rec.drain_source == DRAIN_VALIDATION);
	assert_int_equal(n->rec.verdict, VERDICT_FAIL);
	state_cancel(&w->st, v, T0 + 5, &err);
	valid_job_ended(&w->st, v, T0 + 5);
	assert_int_equal(valid_create(&w->st, one, 1, args, 1, NULL, "op", T0 + 6, &v, &err), 0);
	assert_int_equal(valid_report(&w->st, v, "n1", true, "", "", NULL, false, T0 + 7, &err), 0);
	assert_false(n->rec.drained);
	assert_int_equal(n->rec.drain_source, DRAIN_NONE);
	world_free(w);
}

/* A node whose software stack changes while its validation runs gets no
 * verdict from that run (it ran on the old stack, or on both), and, where
 * the cluster requires validation, another run once it ends. */
static void test_validation_across_a_stack_change(void **state)
{
	struct world *w = world_new(5);
	w->st.sched.require_validation = true;
	struct snode *n = add_node(w, 1, 8, "aaaaaaaa");
	struct tk_error err;
	struct node_stack st;
	memset(&st, 0, sizeof(st));
	node_stack_set(&st, 2, "550.54");
	state_node_stack(&w->st, n, &st, T0); /* the first it says: no change */
	assert_non_null(n->held_by);	      /* the validation a joining node gets */
	struct sjob *v = n->held_by->job;
	valid_tick(&w->st, T0);
	assert_int_equal(v->job.state, JOB_STARTING);
	node_stack_set(&st, 2, "560.28");
	state_node_stack(&w->st, n, &st, T0 + 1);
	assert_ptr_equal(n->held_by->job, v); /* the run goes on */
	assert_int_equal(valid_report(&w->st, v, "n1", true, "", "", NULL, false, T0 + 2, &err), 0);
	assert_int_equal(n->rec.verdict, VERDICT_NONE); /* not kept */
	state_cancel(&w->st, v, T0 + 3, &err);
	valid_job_ended(&w->st, v, T0 + 3);
	assert_non_null(n->held_by); /* another run, on the new stack */
	struct sjob *again = n->held_by->job;
	assert_true(again != v);
	valid_tick(&w->st, T0 + 4);
	assert_int_equal(valid_report(&w->st, again, "n1", true, "", "", NULL, false, T0 + 5, &err),
			 0);
	assert_int_equal(n->rec.verdict, VERDICT_PASS);
	assert_int_equal(n->rec.verdict_job, again->job.id);
	world_free(w);
}

/* A fault requeues the node's jobs even when an operator drained it with
 * the fault's very words; a fault on a node drained for one is known. */
static void test_fault_requeues_whatever_the_operator_wrote(void **state)
{
	struct world *w = world_new(5);
	struct snode *n = add_node(w, 1, 8, "aaaaaaaa");
	struct sjob *j = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\"}");
	state_schedule(&w->st, T0);
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	assert_int_equal(j->job.state, JOB_RUNNING);
	state_drain(&w->st, n, DRAIN_OPERATOR, "fault: disk full");
	state_node_fault(&w->st, n, "disk full", T0 + 1);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_int_equal(j->job.attempts[0].end, ATTEMPT_END_NODE_LOST);
	assert_int_equal(n->rec.drain_source, DRAIN_FAULT);
	/* the same fault in the next heartbeat (or another) changes nothing */
	uint64_t seq = w->st.seq_applied;
	state_node_fault(&w->st, n, "disk full", T0 + 2);
	state_node_fault(&w->st, n, "accelerator 0: Xid 79", T0 + 3);
	assert_int_equal(w->st.seq_applied, seq);
	assert_string_equal(n->rec.drain_reason, "fault: disk full");
	world_free(w);
}

/* An attempt that ends by its node's failed device check drains the node
 * at once, before its heartbeat says so: the job's next attempt, placed in
 * the very next pass, goes elsewhere; the beat's fault then is known. A
 * fault the operator waived does not drain it again. */
static void test_device_check_end_drains_before_the_beat(void **state)
{
	struct world *w = world_new(5);
	struct snode *n1 = add_node(w, 1, 8, "aaaaaaaa");
	struct sjob *j = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\"}");
	state_schedule(&w->st, T0);
	assert_int_equal(j->job.nattempts, 1);
	struct snode *n2 = add_node(w, 2, 8, "bbbbbbbb");
	const char *why = "device check failed: gpu_gemm: bf16 GEMM 3 wrong";
	for (int k = 0; k < 2; k++) {
		struct sjob *jk = k ? submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\"}") : j;
		if (k) { /* the same on n2, whose fault the operator waived */
			state_drain(&w->st, n1, DRAIN_OPERATOR, "kept out");
			state_schedule(&w->st, T0 + 10);
			char fault[WIRE_FAULT_MAX];
			snprintf(fault, sizeof(fault), "job %lld attempt 1: %s",
				 (long long)jk->job.id, why);
			state_node_faults(&w->st, n2, (const char(*)[WIRE_FAULT_MAX]) & fault, 1,
					  T0 + 11, T0 + 11);
			assert_int_equal(n2->rec.drain_source, DRAIN_FAULT);
			state_resume(&w->st, n2);
			state_waive_faults(n2);
		}
		struct snode *on = state_node(&w->st, jk->job.attempts[0].nodes[0].name);
		assert_ptr_equal(on, k ? n2 : n1);
		struct task_event ev = {.job = jk->job.id,
					.attempt = 1,
					.type = TASK_EVENT_EXITED,
					.at_ms = T0 + 20,
					.exit_code = 125,
					.cause = EXIT_LAUNCH_FAILED,
					.node_fault = true,
					.fault_reported = true};
		snprintf(ev.detail, sizeof(ev.detail), "%s", why);
		state_task_exited(&w->st, &ev, T0 + 20);
		assert_int_equal(jk->job.state, JOB_PENDING);
		assert_int_equal(jk->job.attempts[0].end, ATTEMPT_END_NODE_LOST);
		if (!k) {
			assert_true(n1->rec.drained);
			assert_int_equal(n1->rec.drain_source, DRAIN_FAULT);
			char want[MODEL_REASON_MAX];
			snprintf(want, sizeof(want), "fault: job %lld attempt 1: %s",
				 (long long)j->job.id, why);
			assert_string_equal(n1->rec.drain_reason, want);
			state_schedule(&w->st, T0 + 21);
			assert_int_equal(j->job.nattempts, 2);
			assert_string_equal(j->job.attempts[1].nodes[0].name, "n2");
		} else {
			assert_false(n2->rec.drained); /* waived */
		}
	}
	world_free(w);
}

/* The gate: every change the table allows, none it does not; a refused
 * change leaves the job as it was. */
static void test_transition_table(void **state)
{
	static const char *const expect[JOB_STATE_MAX] = {
		/* to:       P S R C F X T   (COMPLETED FAILED CANCELLED TIMEOUT) */
		[JOB_PENDING] = "0100110", [JOB_STARTING] = "1011111",
		[JOB_RUNNING] = "1001111", [JOB_COMPLETED] = "0000000",
		[JOB_FAILED] = "0000000",  [JOB_CANCELLED] = "0000000",
		[JOB_TIMEOUT] = "0000000",
	};
	for (int from = 0; from < JOB_STATE_MAX; from++)
		for (int to = 0; to < JOB_STATE_MAX; to++)
			if (state_job_transition_allowed(from, to) != (expect[from][to] == '1'))
				fail_msg("%s -> %s: the table says %d", job_state_name(from),
					 job_state_name(to),
					 state_job_transition_allowed(from, to));
	assert_false(state_job_transition_allowed(JOB_STATE_MAX, JOB_PENDING));

	struct world *w = world_new(5);
	add_node(w, 1, 8, "aaaaaaaa");
	struct sjob *j = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\"}");
	/* PENDING -> RUNNING skips the start */
	uint64_t seq = w->st.seq_applied;
	assert_int_equal(state_job_set_state(&w->st, j, JOB_RUNNING, "no", T0), -EINVAL);
	assert_int_equal(j->job.state, JOB_PENDING);
	assert_true(j->pending);
	assert_int_equal(w->st.seq_applied, seq);
	assert_int_not_equal(strcmp(j->job.reason, "no"), 0);
	state_schedule(&w->st, T0);
	task_event(w, j, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	task_event(w, j, 0, TASK_EVENT_EXITED, 0, EXIT_EXITED, T0 + 1);
	assert_int_equal(j->job.state, JOB_COMPLETED);
	/* nothing leaves a final state */
	for (int to = 0; to < JOB_STATE_MAX; to++)
		assert_int_equal(state_job_set_state(&w->st, j, to, "again", T0 + 2), -EINVAL);
	assert_int_equal(j->job.state, JOB_COMPLETED);
	assert_int_equal(j->job.end_ms, T0 + 1);
	assert_int_equal(w->nended, 1);
	world_free(w);
}

/* Preemption: a prod job takes a batch job's node; the victim goes back to
 * its queue and its devices go to the prod job once its task is gone. */
static void test_preemption(void **state)
{
	struct world *w = world_new(5);
	struct snode *n = add_node(w, 1, 8, "aaaaaaaa");
	struct sjob *batch = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\", "
				       "\"gpus_per_task\": 8, \"class\": \"batch\"}");
	state_schedule(&w->st, T0);
	task_event(w, batch, 0, TASK_EVENT_STARTED, 0, EXIT_EXITED, T0);
	struct sjob *prod = submit(w, "{\"command\": [\"x\"], \"cwd\": \"/tmp\", "
				      "\"gpus_per_task\": 8, \"class\": \"prod\"}");
	state_schedule(&w->st, T0 + 10);
	assert_int_equal(batch->job.state, JOB_PENDING);
	assert_int_equal(batch->preemptions, 1);
	assert_non_null(strstr(batch->job.reason, "preempted by job 2 (class prod)"));
	assert_int_equal(prod->job.state, JOB_PENDING); /* waits for its victim */
	state_schedule(&w->st, T0 + 11);
	assert_int_equal(prod->job.state, JOB_PENDING);
	task_event(w, batch, 0, TASK_EVENT_EXITED, 143, EXIT_CANCELLED, T0 + 12);
	assert_int_equal(n->nparts, 0);
	state_schedule(&w->st, T0 + 13);
	assert_int_equal(prod->job.state, JOB_STARTING);
	assert_int_equal(batch->job.state, JOB_PENDING);
	world_free(w);
}

int main(void)
{
	tk_log_set_level(TK_LOG_ERR);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lifecycle),
		cmocka_unit_test(test_requeue),
		cmocka_unit_test(test_pass_order_kept),
		cmocka_unit_test(test_config_swap),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_node_loss),
		cmocka_unit_test(test_agent_restart),
		cmocka_unit_test(test_agent_restart_keeps_shims),
		cmocka_unit_test(test_one_attempt_at_a_time),
		cmocka_unit_test(test_restart_in_place_keeps_its_nodes),
		cmocka_unit_test(test_ckpt_signal_waits_for_a_checkpoint),
		cmocka_unit_test(test_elastic_gang),
		cmocka_unit_test(test_spare_lent_to_preemptible_work),
		cmocka_unit_test(test_restart_in_place_replaces_a_lost_node),
		cmocka_unit_test(test_spare_takes_a_lost_nodes_place),
		cmocka_unit_test(test_pool_spare),
		cmocka_unit_test(test_pool_spare_lent_to_preemptible_work),
		cmocka_unit_test(test_restart_in_place_random),
		cmocka_unit_test(test_peer_death_is_a_lost_node),
		cmocka_unit_test(test_task_lost_with_agent),
		cmocka_unit_test(test_lost_before_it_ran),
		cmocka_unit_test(test_agent_stopping),
		cmocka_unit_test(test_cancel_and_drain),
		cmocka_unit_test(test_validation_resumes_only_its_own_drains),
		cmocka_unit_test(test_validation_across_a_stack_change),
		cmocka_unit_test(test_fault_requeues_whatever_the_operator_wrote),
		cmocka_unit_test(test_device_check_end_drains_before_the_beat),
		cmocka_unit_test(test_transition_table),
		cmocka_unit_test(test_preemption),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
