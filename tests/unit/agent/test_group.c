/* Unit tests of the agent's group state machine (src/agent/group.h), driven
 * with fake parts and no processes: the transition table and the gate,
 * an image pulled then failed or agreed, a restore then a start, a stop
 * during a restore, a shim lost, a checkpoint drain, and an exit the server
 * has not acknowledged when the agent restarts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "agent/group.h"

/* What the fake parts were asked. */
static struct fake {
	struct task_event ev[64];
	int nev;
	int resolves, starts, start_fails, let_go, tasks_ended;
	struct shim_cmd cmd[16];
	int ncmd;
	bool connected;
	bool draining;
	int forgot, forgot_over;
	int node_faults;
	char fault[256];
} f;

static void fake_emit(struct taskgroup *g, struct task_event *ev)
{
	assert_true(f.nev < 64);
	f.ev[f.nev++] = *ev;
}

static void fake_image_resolve(struct taskgroup *g)
{
	f.resolves++;
	g->img.state = IMG_RESOLVING;
}

static int fake_shim_start(struct taskgroup *g, char *why, size_t n)
{
	if (f.start_fails) {
		snprintf(why, n, "cannot start the shim: no such file");
		return -ENOENT;
	}
	f.starts++;
	f.connected = true;
	group_hold(g); /* its connection */
	return 0;
}

static bool fake_shim_send(struct taskgroup *g, const struct shim_cmd *c)
{
	if (!f.connected)
		return false;
	assert_true(f.ncmd < 16);
	f.cmd[f.ncmd++] = *c;
	return true;
}

static void fake_let_go(struct taskgroup *g)
{
	f.let_go++;
	f.connected = false;
}

static bool fake_draining(struct taskgroup *g)
{
	return f.draining;
}

static void fake_tasks_ended(struct taskgroup *g)
{
	f.tasks_ended++;
}

static void fake_forget(struct taskgroup *g, bool over)
{
	f.forgot++;
	f.forgot_over += over;
	free(g->tasks);
	free(g);
}

static void fake_node_fault(struct taskgroup *g, const char *why)
{
	f.node_faults++;
	snprintf(f.fault, sizeof(f.fault), "%s", why);
}

static const struct group_ops fake_ops = {
	.emit = fake_emit,
	.image_resolve = fake_image_resolve,
	.shim_start = fake_shim_start,
	.shim_send = fake_shim_send,
	.shim_let_go = fake_let_go,
	.ckpt_draining = fake_draining,
	.tasks_ended = fake_tasks_ended,
	.forget = fake_forget,
	.node_fault = fake_node_fault,
};

static struct taskgroup *group(int tpn)
{
	memset(&f, 0, sizeof(f));
	struct taskgroup *g = calloc(1, sizeof(*g));
	group_init(g, &fake_ops, 7, 2, 1, tpn, 5000);
	return g;
}

/* The shim's word: task rank `rank` started, or exited with code. */
static void status(struct taskgroup *g, int rank, enum shim_task_state state, int code)
{
	struct shim_task_status t = {.rank = rank,
				     .state = state,
				     .pid = 100 + rank,
				     .start_ms = 1000,
				     .end_ms = state == SHIM_TASK_EXITED ? 2000 : 0,
				     .exit_code = code,
				     .cause = EXIT_EXITED};
	struct shim_status st = {.job = 7, .attempt = 2, .ntasks = 1, .tasks = &t};
	group_status(g, &st);
}

static int count(enum task_event_type type)
{
	int n = 0;
	for (int i = 0; i < f.nev; i++)
		n += f.ev[i].type == type;
	return n;
}

/* The server hears out every event, and no longer lists the group. */
static void server_done(struct taskgroup *g)
{
	group_acked(g, g->unacked);
	group_set_listed(g, false);
}

/* ---- the table ------------------------------------------------------------------------------ */

static void test_transition_table(void **state)
{
	/* to:  PREP PULL REST STRT RUN STOP UPL REL DET GONE */
	static const char *const want[GROUP_STATE_MAX] = {
		[GROUP_PREPARING] = "0111000110", [GROUP_PULLING] = "0011000110",
		[GROUP_RESTORING] = "0001000110", [GROUP_STARTING] = "0000111110",
		[GROUP_RUNNING] = "0000011110",	  [GROUP_STOPPING] = "0000001110",
		[GROUP_UPLOADING] = "0000000110", [GROUP_RELEASING] = "0000000011",
		[GROUP_DETACHED] = "0000000001",  [GROUP_GONE] = "0000000000",
	};
	for (int from = 0; from < GROUP_STATE_MAX; from++)
		for (int to = 0; to < GROUP_STATE_MAX; to++)
			if (group_transition_allowed(from, to) != (want[from][to] == '1'))
				fail_msg("%s -> %s: the table says %d", group_state_name(from),
					 group_state_name(to), group_transition_allowed(from, to));
	assert_false(group_transition_allowed(GROUP_STATE_MAX, GROUP_GONE));
	assert_false(group_transition_allowed(GROUP_RELEASING, GROUP_STATE_MAX));

	/* a refused change leaves the group as it was */
	struct taskgroup *g = group(2);
	assert_int_equal(group_set_state(g, GROUP_RUNNING), -EINVAL);
	assert_int_equal(g->state, GROUP_PREPARING);
	assert_int_equal(group_set_state(g, GROUP_GONE), -EINVAL);
	assert_int_equal(g->state, GROUP_PREPARING);
	assert_int_equal(f.nev, 0);
	group_destroy(g);
	assert_int_equal(f.forgot, 1);
	assert_int_equal(f.forgot_over, 0); /* the agent went: its shim keeps the rest */
}

/* Every pair of states through the gate: an allowed change is made, any
 * other refused with the group exactly as it was. The group's fields are
 * set to what the target state implies (assert_group_state runs on it). */
static void test_every_transition_through_the_gate(void **state)
{
	for (int from = 0; from < GROUP_STATE_MAX; from++)
		for (int to = 0; to < GROUP_STATE_MAX; to++) {
			struct taskgroup *g = group(2);
			bool ended =
				to == GROUP_UPLOADING || to == GROUP_RELEASING || to == GROUP_GONE;
			if (ended) {
				g->nrunning = 0;
				g->tasks[0].exited = g->tasks[1].exited = true;
			}
			g->listed = false; /* (GONE's conditions, but for the table) */
			g->state = (enum group_state)from;
			struct taskgroup before = *g;
			int r = group_set_state(g, (enum group_state)to);
			if (group_transition_allowed(from, to)) {
				if (r != 0 || g->state != (enum group_state)to)
					fail_msg("%s -> %s: refused", group_state_name(from),
						 group_state_name(to));
			} else {
				if (r != -EINVAL || memcmp(&before, g, sizeof(before)) != 0)
					fail_msg("%s -> %s: not refused as it was",
						 group_state_name(from), group_state_name(to));
			}
			free(g->tasks);
			free(g);
		}
}

/* A group whose exit the server has not acknowledged cannot be forgotten,
 * nor one still listed or with a callback to come. */
static void test_gone_only_when_heard_out(void **state)
{
	struct taskgroup *g = group(1);
	group_prepared(g);
	assert_int_equal(g->state, GROUP_STARTING);
	status(g, 1, SHIM_TASK_EXITED, 0);
	assert_int_equal(g->state, GROUP_RELEASING);
	assert_int_equal(g->unacked, 2); /* its start and its exit */
	assert_int_equal(group_set_state(g, GROUP_GONE), -EINVAL);
	group_set_listed(g, false);
	assert_int_equal(group_set_state(g, GROUP_GONE), -EINVAL);
	assert_int_equal(g->state, GROUP_RELEASING);
	group_acked(g, 1);
	assert_int_equal(group_set_state(g, GROUP_GONE), -EINVAL);
	assert_int_equal(f.forgot, 0);
	group_acked(g, 1);
	/* heard out: its shim is released, and goes once its connection does */
	assert_int_equal(f.ncmd, 1);
	assert_int_equal(f.cmd[0].type, SHIM_CMD_RELEASE);
	assert_int_equal(f.forgot, 0);
	assert_int_equal(g->state, GROUP_RELEASING);
	assert_int_equal(group_set_state(g, GROUP_GONE), -EINVAL); /* its connection is open */
	group_unhold(g);
	assert_int_equal(f.forgot, 1);
	assert_int_equal(f.forgot_over, 1);

	/* nothing open, not listed: an exit not acknowledged alone holds it */
	g = group(1);
	f.start_fails = 1;
	group_prepared(g);
	group_set_listed(g, false);
	assert_int_equal(g->state, GROUP_RELEASING);
	assert_true(g->unacked == 1 && g->open == 0);
	assert_int_equal(group_set_state(g, GROUP_GONE), -EINVAL);
	assert_int_equal(g->state, GROUP_RELEASING);
	group_acked(g, 1);
	assert_int_equal(f.forgot, 1);
}

/* ---- images ------------------------------------------------------------------------------- */

static void test_image_pulled_then_failed(void **state)
{
	struct taskgroup *g = group(2);
	snprintf(g->img.ref, sizeof(g->img.ref), "debian:12");
	group_prepared(g);
	assert_int_equal(g->state, GROUP_PULLING);
	assert_int_equal(f.resolves, 1);
	g->img.state = IMG_PULLING;
	group_image_pulling(g);
	assert_int_equal(count(TASK_EVENT_PULLING), 1);
	group_image_failed(g, "cannot pull debian:12 on n1: manifest unknown");
	assert_int_equal(g->state, GROUP_RELEASING);
	assert_int_equal(f.starts, 0);
	assert_int_equal(f.tasks_ended, 1);
	assert_int_equal(count(TASK_EVENT_EXITED), 2);
	for (int i = 0; i < f.nev; i++)
		if (f.ev[i].type == TASK_EVENT_EXITED) {
			assert_int_equal(f.ev[i].exit_code, 125);
			assert_int_equal(f.ev[i].cause, EXIT_LAUNCH_FAILED);
			assert_string_equal(f.ev[i].detail,
					    "cannot pull debian:12 on n1: manifest unknown");
		}
	/* a late word changes nothing */
	group_image_go(g, "sha256:0000");
	group_image_failed(g, "again");
	assert_int_equal(count(TASK_EVENT_EXITED), 2);
	server_done(g);
	assert_int_equal(f.forgot, 1);
	assert_int_equal(f.forgot_over, 1);
}

static const char *const D1 =
	"sha256:1111111111111111111111111111111111111111111111111111111111111111";
static const char *const D2 =
	"sha256:2222222222222222222222222222222222222222222222222222222222222222";

static void test_image_agreed_starts_once(void **state)
{
	struct taskgroup *g = group(1);
	snprintf(g->img.ref, sizeof(g->img.ref), "debian:12");
	group_prepared(g);
	/* the server's word before the image is here: not yet */
	group_image_go(g, D1);
	assert_int_equal(g->state, GROUP_PULLING);
	g->img.state = IMG_READY;
	snprintf(g->img.digest, sizeof(g->img.digest), "%s", D1);
	group_image_ready(g);
	assert_int_equal(count(TASK_EVENT_IMAGE), 1);
	assert_string_equal(f.ev[0].digest, D1);
	group_image_go(g, D1);
	assert_int_equal(g->state, GROUP_STARTING);
	assert_int_equal(f.starts, 1);
	/* the same answer again (a repeated work answer) starts nothing */
	group_image_go(g, D1);
	group_restore_go(g);
	assert_int_equal(f.starts, 1);
	group_stop(g, EXIT_CANCELLED, "stopped");
	status(g, 1, SHIM_TASK_EXITED, 143);
	server_done(g);
	group_unhold(g);
	assert_int_equal(f.forgot, 1);
}

static void test_image_of_another_digest_fails(void **state)
{
	struct taskgroup *g = group(1);
	snprintf(g->img.ref, sizeof(g->img.ref), "debian:12");
	group_prepared(g);
	g->img.state = IMG_READY;
	snprintf(g->img.digest, sizeof(g->img.digest), "%s", D1);
	group_image_ready(g);
	group_image_go(g, D2);
	assert_int_equal(g->state, GROUP_RELEASING);
	assert_int_equal(f.starts, 0);
	assert_int_equal(f.ev[f.nev - 1].exit_code, 125);
	assert_non_null(strstr(f.ev[f.nev - 1].detail, "not the gang's"));
	group_destroy(g);
}

/* ---- restores ----------------------------------------------------------------------------- */

static void test_restore_then_start(void **state)
{
	struct taskgroup *g = group(2);
	g->ckpt.hold_restore = true;
	group_prepared(g);
	assert_int_equal(g->state, GROUP_RESTORING);
	assert_int_equal(f.starts, 0);
	group_restore_go(g);
	assert_int_equal(g->state, GROUP_STARTING);
	assert_int_equal(f.starts, 1);
	group_restore_go(g); /* again: nothing */
	assert_int_equal(f.starts, 1);
	status(g, 2, SHIM_TASK_RUNNING, 0);
	assert_int_equal(g->state, GROUP_STARTING);
	status(g, 3, SHIM_TASK_RUNNING, 0);
	assert_int_equal(g->state, GROUP_RUNNING);
	assert_int_equal(count(TASK_EVENT_STARTED), 2);
	status(g, 3, SHIM_TASK_RUNNING, 0); /* told again: once is enough */
	assert_int_equal(count(TASK_EVENT_STARTED), 2);
	status(g, 2, SHIM_TASK_EXITED, 0);
	status(g, 3, SHIM_TASK_EXITED, 1);
	assert_int_equal(g->state, GROUP_RELEASING);
	assert_int_equal(count(TASK_EVENT_EXITED), 2);
	status(g, 3, SHIM_TASK_EXITED, 1);
	assert_int_equal(count(TASK_EVENT_EXITED), 2);
	server_done(g);
	group_unhold(g);
	assert_int_equal(f.forgot_over, 1);
}

/* An image job that also restores: the image first, then the restore. */
static void test_image_then_restore(void **state)
{
	struct taskgroup *g = group(1);
	snprintf(g->img.ref, sizeof(g->img.ref), "debian:12");
	g->ckpt.hold_restore = true;
	group_prepared(g);
	g->img.state = IMG_READY;
	snprintf(g->img.digest, sizeof(g->img.digest), "%s", D1);
	group_image_go(g, D1);
	assert_int_equal(g->state, GROUP_RESTORING);
	group_restore_go(g);
	assert_int_equal(f.starts, 1);
	group_destroy(g);

	/* the restore done while it pulls: the image's word starts it */
	g = group(1);
	snprintf(g->img.ref, sizeof(g->img.ref), "debian:12");
	g->ckpt.hold_restore = true;
	group_prepared(g);
	group_restore_go(g);
	assert_int_equal(g->state, GROUP_PULLING);
	g->img.state = IMG_READY;
	snprintf(g->img.digest, sizeof(g->img.digest), "%s", D1);
	group_image_go(g, D1);
	assert_int_equal(g->state, GROUP_STARTING);
	assert_int_equal(f.starts, 1);
	group_destroy(g);
}

static void test_stop_during_restore(void **state)
{
	struct taskgroup *g = group(2);
	g->ckpt.hold_restore = true;
	group_prepared(g);
	group_stop(g, EXIT_CANCELLED, "stopped");
	assert_int_equal(g->state, GROUP_RELEASING);
	assert_int_equal(count(TASK_EVENT_EXITED), 2);
	assert_int_equal(f.ev[0].cause, EXIT_CANCELLED);
	assert_int_equal(f.ev[0].exit_code, 128 + SIGTERM);
	assert_string_equal(f.ev[0].detail,
			    "stopped before it started (waiting for its checkpoint's restore)");
	assert_int_equal(f.tasks_ended, 1);
	/* the restore finishing after starts nothing */
	group_restore_go(g);
	assert_int_equal(f.starts, 0);
	assert_int_equal(g->state, GROUP_RELEASING);
	server_done(g);
	assert_int_equal(f.forgot, 1);
}

/* ---- running ------------------------------------------------------------------------------ */

static void test_stop_while_running(void **state)
{
	struct taskgroup *g = group(1);
	group_prepared(g);
	status(g, 1, SHIM_TASK_RUNNING, 0);
	group_stop(g, EXIT_PREEMPTED, "preempted by job 9");
	assert_int_equal(g->state, GROUP_STOPPING);
	assert_int_equal(f.ncmd, 1);
	assert_int_equal(f.cmd[0].type, SHIM_CMD_STOP);
	assert_int_equal(f.cmd[0].cause, EXIT_PREEMPTED);
	assert_string_equal(f.cmd[0].detail, "preempted by job 9");
	group_stop(g, EXIT_CANCELLED, "again");
	assert_int_equal(f.ncmd, 1);
	group_renew(g, 5000); /* the lease goes on while it stops */
	assert_int_equal(f.cmd[1].type, SHIM_CMD_RENEW);
	status(g, 1, SHIM_TASK_EXITED, 143);
	assert_int_equal(g->state, GROUP_RELEASING);
	group_renew(g, 6000); /* nothing left to hold */
	assert_int_equal(f.ncmd, 2);
	server_done(g);
	group_unhold(g);
	assert_int_equal(f.forgot_over, 1);
}

static void test_shim_lost(void **state)
{
	struct taskgroup *g = group(2);
	group_prepared(g);
	status(g, 2, SHIM_TASK_EXITED, 0);
	group_shim_gone(g, "its shim ended");
	assert_int_equal(g->state, GROUP_RELEASING);
	const struct task_event *last = &f.ev[f.nev - 1];
	assert_int_equal(last->rank, 3);
	assert_int_equal(last->cause, EXIT_LOST);
	assert_int_equal(last->exit_code, 137);
	assert_int_equal(count(TASK_EVENT_EXITED), 2);
	server_done(g);
	assert_int_equal(f.forgot, 0); /* its connection closes still */
	group_unhold(g);
	assert_int_equal(f.forgot, 1);
}

static void test_shim_cannot_start(void **state)
{
	struct taskgroup *g = group(1);
	f.start_fails = 1;
	group_prepared(g);
	assert_int_equal(g->state, GROUP_RELEASING);
	assert_int_equal(f.ev[0].exit_code, 127);
	assert_int_equal(f.ev[0].cause, EXIT_LAUNCH_FAILED);
	assert_string_equal(f.ev[0].detail, "cannot start the shim: no such file");
	assert_true(f.ev[0].node_fault);
	assert_false(f.ev[0].fault_reported); /* not a fault the node reports */
	server_done(g);
	assert_int_equal(f.forgot, 1);
}

/* The shim's device check failed: every task ends unstarted as the node's
 * fault, which the node reports once, and the exits say so. */
static void test_device_check_failed(void **state)
{
	struct taskgroup *g = group(2);
	group_prepared(g);
	assert_int_equal(g->state, GROUP_STARTING);
	struct shim_task_status t[2];
	for (int i = 0; i < 2; i++)
		t[i] = (struct shim_task_status){.rank = 2 + i,
						 .state = SHIM_TASK_EXITED,
						 .start_ms = 1000,
						 .end_ms = 1000,
						 .exit_code = 125,
						 .cause = EXIT_LAUNCH_FAILED,
						 .node_fault = true};
	snprintf(t[0].detail, sizeof(t[0].detail), "device check failed: gpu_gemm: 3 wrong");
	snprintf(t[1].detail, sizeof(t[1].detail), "device check failed: gpu_gemm: 3 wrong");
	struct shim_status st = {.job = 7, .attempt = 2, .ntasks = 2, .tasks = t};
	group_status(g, &st);
	group_status(g, &st); /* said again: nothing new */
	assert_int_equal(f.node_faults, 1);
	assert_string_equal(f.fault, "device check failed: gpu_gemm: 3 wrong");
	assert_int_equal(count(TASK_EVENT_EXITED), 2);
	assert_int_equal(count(TASK_EVENT_STARTED), 0); /* none ran */
	for (int i = 0; i < f.nev; i++)
		if (f.ev[i].type == TASK_EVENT_EXITED)
			assert_true(f.ev[i].node_fault && f.ev[i].fault_reported &&
				    f.ev[i].cause == EXIT_LAUNCH_FAILED);
	assert_int_equal(g->state, GROUP_RELEASING);
	server_done(g);
	group_unhold(g);
	assert_int_equal(f.forgot_over, 1);
}

static void test_checkpoint_drain(void **state)
{
	struct taskgroup *g = group(1);
	group_prepared(g);
	f.draining = true;
	status(g, 1, SHIM_TASK_EXITED, 0);
	assert_int_equal(g->state, GROUP_UPLOADING);
	server_done(g);
	assert_int_equal(g->state, GROUP_UPLOADING);
	assert_int_equal(f.ncmd, 0);
	group_ckpt_news(g);
	assert_int_equal(g->state, GROUP_UPLOADING);
	f.draining = false;
	group_ckpt_news(g);
	assert_int_equal(f.cmd[0].type, SHIM_CMD_RELEASE);
	group_unhold(g);
	assert_int_equal(f.forgot_over, 1);
}

/* The agent restarts with an exit the server has not acknowledged: the
 * group is left to its shim, and the next agent's group, made from what
 * the shim wrote down, tells the exit again. */
static void test_exit_unacked_then_agent_restart(void **state)
{
	struct taskgroup *g = group(1);
	group_prepared(g);
	status(g, 1, SHIM_TASK_EXITED, 3);
	assert_int_equal(g->state, GROUP_RELEASING);
	group_close(g); /* the agent stops */
	assert_int_equal(g->state, GROUP_DETACHED);
	assert_int_equal(f.let_go, 1);
	assert_int_equal(f.ncmd, 0); /* not released: the shim keeps the exit */
	group_acked(g, 2);	     /* (too late: nothing moves it now) */
	assert_int_equal(g->state, GROUP_DETACHED);
	assert_int_equal(f.forgot, 0);
	group_destroy(g);
	assert_int_equal(f.forgot, 1);
	assert_int_equal(f.forgot_over, 0);

	/* the next agent */
	g = group(1);
	group_hold(g); /* connected to the shim */
	f.connected = true;
	struct shim_task_status t = {.rank = 1, .state = SHIM_TASK_EXITED, .exit_code = 3};
	struct shim_status st = {.job = 7, .attempt = 2, .ntasks = 1, .tasks = &t};
	group_adopted(g, &st);
	assert_int_equal(g->state, GROUP_RELEASING);
	assert_int_equal(count(TASK_EVENT_EXITED), 1);
	assert_int_equal(f.ev[f.nev - 1].exit_code, 3);
	assert_int_equal(f.starts, 0); /* found, never started again */
	server_done(g);
	assert_int_equal(f.cmd[0].type, SHIM_CMD_RELEASE);
	group_unhold(g);
	assert_int_equal(f.forgot_over, 1);

	/* the agent stops with every exit heard: the shim is released */
	g = group(1);
	group_prepared(g);
	status(g, 1, SHIM_TASK_EXITED, 0);
	group_acked(g, g->unacked);
	assert_int_equal(f.ncmd, 0); /* still listed */
	group_close(g);
	assert_int_equal(g->state, GROUP_RELEASING);
	assert_int_equal(f.cmd[0].type, SHIM_CMD_RELEASE);
	group_destroy(g);
}

/* A shim found gone by the next agent: the exits it did not see are lost. */
static void test_adopted_shim_gone(void **state)
{
	struct taskgroup *g = group(2);
	struct shim_task_status t[2] = {{.rank = 2, .state = SHIM_TASK_RUNNING, .pid = 40},
					{.rank = 3, .state = SHIM_TASK_EXITED, .exit_code = 0}};
	struct shim_status st = {.job = 7, .attempt = 2, .ntasks = 2, .tasks = t};
	group_adopted(g, &st);
	assert_int_equal(g->state, GROUP_RUNNING);
	assert_int_equal(g->tasks[0].pid, 40);
	group_shim_gone(g, "its shim ended while no agent was there");
	assert_int_equal(g->state, GROUP_RELEASING);
	assert_int_equal(f.ev[f.nev - 1].rank, 2);
	assert_int_equal(f.ev[f.nev - 1].cause, EXIT_LOST);
	server_done(g);
	assert_int_equal(f.forgot_over, 1);
}

static void test_time_limit(void **state)
{
	struct taskgroup *g = group(1);
	group_set_limit(g, 60); /* not connected yet: said again later */
	assert_int_equal(g->limit_ms, 0);
	group_prepared(g);
	group_set_limit(g, 60);
	assert_int_equal(g->limit_ms, 60000);
	assert_int_equal(f.cmd[0].type, SHIM_CMD_LIMIT);
	group_set_limit(g, 60);
	group_set_limit(g, -1);
	assert_int_equal(f.ncmd, 1);
	group_destroy(g);
}

/* --ckpt-signal: the shim is told once, and only while tasks run. */
static void test_signal_now(void **state)
{
	struct taskgroup *g = group(2);
	group_signal_now(g, 12); /* nothing runs yet */
	assert_int_equal(f.ncmd, 0);
	struct shim_task_status t[2] = {{.rank = 2, .state = SHIM_TASK_RUNNING, .pid = 40},
					{.rank = 3, .state = SHIM_TASK_RUNNING, .pid = 41}};
	struct shim_status st = {.job = 7, .attempt = 2, .ntasks = 2, .tasks = t};
	group_adopted(g, &st);
	group_signal_now(g, 12); /* not connected: said with the next answer */
	assert_int_equal(f.ncmd, 0);
	f.connected = true;
	group_signal_now(g, 0);
	assert_int_equal(f.ncmd, 0);
	group_signal_now(g, 12);
	assert_int_equal(f.ncmd, 1);
	assert_int_equal(f.cmd[0].type, SHIM_CMD_SIGNAL);
	assert_int_equal(f.cmd[0].signal, 12);
	group_signal_now(g, 12);
	assert_int_equal(f.ncmd, 1);
	group_destroy(g);
}

int main(void)
{
	tk_log_set_level(TK_LOG_ERR);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_transition_table),
		cmocka_unit_test(test_signal_now),
		cmocka_unit_test(test_every_transition_through_the_gate),
		cmocka_unit_test(test_gone_only_when_heard_out),
		cmocka_unit_test(test_image_pulled_then_failed),
		cmocka_unit_test(test_image_agreed_starts_once),
		cmocka_unit_test(test_image_of_another_digest_fails),
		cmocka_unit_test(test_restore_then_start),
		cmocka_unit_test(test_image_then_restore),
		cmocka_unit_test(test_stop_during_restore),
		cmocka_unit_test(test_stop_while_running),
		cmocka_unit_test(test_shim_lost),
		cmocka_unit_test(test_shim_cannot_start),
		cmocka_unit_test(test_device_check_failed),
		cmocka_unit_test(test_checkpoint_drain),
		cmocka_unit_test(test_exit_unacked_then_agent_restart),
		cmocka_unit_test(test_adopted_shim_gone),
		cmocka_unit_test(test_time_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
