/*
 * The simulator's engine and readers on tiny inputs whose every start and
 * end time is worked out by hand, plus the readers' errors on bad traces.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sim/sim.h"

static char dir[64];

static const char *write_file(const char *name, const char *text)
{
	static char path[4][256];
	static int k;
	char *p = path[k++ % 4];
	snprintf(p, 256, "%s/%s", dir, name);
	FILE *f = fopen(p, "we");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return p;
}

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/tenk-test-sim-XXXXXX");
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static void load(const char *nodes, const char *jobs, struct sim_cluster *cl, struct sim_trace *tr)
{
	struct catalogue cat;
	catalogue_init(&cat);
	struct tk_error err;
	int r = sim_cluster_load(write_file("nodes.csv", nodes), &cat, cl, &err);
	if (r < 0)
		fail_msg("%s", err.text);
	r = sim_trace_load(write_file("jobs.csv", jobs), tr, &err);
	if (r < 0)
		fail_msg("%s", err.text);
	catalogue_release(&cat);
}

static void options(struct sim_options *o)
{
	memset(o, 0, sizeof(*o));
	sched_config_default(&o->sched);
	o->keep_devices = true;
	o->repair_h = 1;
	o->seed = 1;
}

#define HEADER                                                                                     \
	"id,submit_s,run_s,nodes,tasks_per_node,gpus_per_task,cpus_per_task,mem_mib,gpu_types,"    \
	"queue,class,time_limit_s\n"

/* Two nodes of 4 GPUs; three jobs:
 *   1: t=0, 4 GPUs for 100 s        -> starts 0 on one node, ends 100
 *   2: t=10, 2 nodes x 4 GPUs, 50 s -> must wait for job 1: starts 100, ends 150
 *   3: t=20, 4 GPUs for 30 s        -> would fit on the free node at 20, but that
 *      node is reserved for job 2 from t=100 and job 3 has no time limit that
 *      ends before it... it has: 30 s ends at 50 < 100, so it backfills: 20-50.
 */
static void test_three_jobs_two_nodes(void **state)
{
	struct sim_cluster cl;
	struct sim_trace tr;
	load("name,model,gpus,cpus\nn1,H100,4,32\nn2,H100,4,32\n",
	     HEADER "1,0,100,1,4,1,0,0,,a,,0\n"
		    "2,10,50,2,4,1,0,0,,a,,0\n"
		    "3,20,30,1,4,1,0,0,,a,,60\n",
	     &cl, &tr);
	struct sim_options o;
	options(&o);
	struct sim_result r;
	struct tk_error err;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.done, 3);
	assert_int_equal(r.jobs[0].start_ms, 0);
	assert_int_equal(r.jobs[0].end_ms, 100000);
	assert_int_equal(r.jobs[1].start_ms, 100000);
	assert_int_equal(r.jobs[1].end_ms, 150000);
	assert_int_equal(r.jobs[1].wait_ms, 90000);
	assert_int_equal(r.jobs[2].start_ms, 20000);
	assert_int_equal(r.jobs[2].end_ms, 50000);
	assert_int_equal(r.makespan_ms, 150000);
	/* 4*100 + 8*50 + 4*30 device-seconds over 8 devices for 150 s */
	assert_true(fabs(r.alloc_mean - (400.0 + 400 + 120) / (8 * 150.0)) < 1e-9);
	assert_true(fabs(r.effective - 1.0) < 1e-12);
	assert_non_null(strstr(r.jobs[1].devices, "n1:0,1,2,3"));
	assert_non_null(strstr(r.jobs[1].devices, "n2:0,1,2,3"));
	/* JCT: 100, 140, 30 */
	assert_true(fabs(r.jct_s.mean - 90.0) < 1e-9);
	assert_true(fabs(r.jct_s.p50 - 100.0) < 1e-9);
	sim_result_release(&r);
	sim_trace_release(&tr);
	sim_cluster_release(&cl);
}

/* The same trace without a time limit on job 1 or 3. Job 2's start is
 * unknown: until it has waited its patience it holds nothing, and job 3
 * runs at once on the idle node, 20-50 (job 2 starts at 100 all the same).
 * Holding at once (the patience negative), job 3 may not overtake job 2's
 * reservation, so it waits for job 2 and runs 150-180. */
static void test_no_backfill_without_a_limit(void **state)
{
	struct sim_cluster cl;
	struct sim_trace tr;
	load("name,model,gpus,cpus\nn1,H100,4,32\nn2,H100,4,32\n",
	     HEADER "1,0,100,1,4,1,0,0,,a,,0\n"
		    "2,10,50,2,4,1,0,0,,a,,0\n"
		    "3,20,30,1,4,1,0,0,,a,,0\n",
	     &cl, &tr);
	struct sim_options o;
	options(&o);
	struct sim_result r;
	struct tk_error err;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.jobs[1].start_ms, 100000);
	assert_int_equal(r.jobs[2].start_ms, 20000);
	assert_int_equal(r.jobs[2].end_ms, 50000);
	sim_result_release(&r);
	o.policy.resv_patience_ms = -1;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.jobs[1].start_ms, 100000);
	assert_int_equal(r.jobs[2].start_ms, 150000);
	assert_int_equal(r.jobs[2].end_ms, 180000);
	sim_result_release(&r);
	/* past its patience (10 s at 20), job 2 holds what is idle */
	o.policy.resv_patience_ms = 10000;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.jobs[2].start_ms, 150000);
	sim_result_release(&r);
	sim_trace_release(&tr);
	sim_cluster_release(&cl);
}

/* A prod job preempts a batch job, which loses the work since its last
 * checkpoint (every 40 s) and finishes the rest later. */
static void test_preemption_loses_work_since_checkpoint(void **state)
{
	struct sim_cluster cl;
	struct sim_trace tr;
	load("name,model,gpus,cpus\nn1,H100,4,32\n",
	     HEADER "1,0,100,1,4,1,0,0,,a,batch,0\n"
		    "2,50,10,1,4,1,0,0,,b,prod,0\n",
	     &cl, &tr);
	struct sim_options o;
	options(&o);
	o.checkpoint_s = 40;
	struct sim_result r;
	struct tk_error err;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.preemptions, 1);
	assert_int_equal(r.jobs[1].start_ms, 50000);
	assert_int_equal(r.jobs[1].end_ms, 60000);
	/* job 1 ran 0-50, kept 40, needs 60 more: 60-120 */
	assert_int_equal(r.jobs[0].attempts, 2);
	assert_int_equal(r.jobs[0].end_ms, 120000);
	/* used: 4*(50+10+60) device-s; lost 4*10 */
	assert_true(fabs(r.device_h_lost - 40.0 / 3600) < 1e-9);
	assert_true(fabs(r.effective - (480.0 - 40) / 480) < 1e-9);
	sim_result_release(&r);
	sim_trace_release(&tr);
	sim_cluster_release(&cl);
}

/* Least attained service on one node of 4 GPUs, its first level ending at
 * 0.1 GPU-hours (90 s of the whole node); preempted jobs save as they stop
 * and restore in 10 s:
 *   1: t=0, 1,000 s -> runs 0-200, preempted by job 2 at 200 (it reached the
 *      second level at 90 s); all 200 s of work kept
 *   2: t=200, 50 s  -> 200-250
 *   3: t=210, 50 s  -> the first level too, but job 2 is not preempted
 *      (same level): 250-300
 *   4: t=290, 50 s  -> the first level: before job 1, 300-350; job 1 then
 *      restores (10 s) and works its 800 s left: 350-1,160.
 * With las_max_stretch 0.4, job 1 has waited 100 s >= 0.4 x 200 s (all it has
 * run) at 300: it is
 * back in the first level, before job 4 (submitted later), 300-390, where
 * its service reaches the limit again and job 4 preempts it: 390-440; job
 * 1 then works what is left (800 - 80 s) from 440 after its restore: 1,170. */
static void test_least_attained_service(void **state)
{
	struct sim_cluster cl;
	struct sim_trace tr;
	load("name,model,gpus,cpus\nn1,H100,4,32\n",
	     HEADER "1,0,1000,1,4,1,0,0,,a,normal,0\n"
		    "2,200,50,1,4,1,0,0,,a,normal,0\n"
		    "3,210,50,1,4,1,0,0,,a,normal,0\n"
		    "4,290,50,1,4,1,0,0,,a,normal,0\n",
	     &cl, &tr);
	struct sim_options o;
	options(&o);
	struct class_spec *n = &o.sched.classes[o.sched.default_class];
	assert_string_equal(n->name, "normal");
	n->las = true;
	n->las_nlimits = 1;
	n->las_limit_gpu_h[0] = 0.1;
	n->las_max_loss_s = MODEL_LAS_DEFAULT_MAX_LOSS_S;
	o.checkpoint_on_preempt = true;
	o.restart_cost_ms = 10000;
	struct sim_result r;
	struct tk_error err;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.preemptions, 1);
	assert_int_equal(r.jobs[1].start_ms, 200000);
	assert_int_equal(r.jobs[1].end_ms, 250000);
	assert_int_equal(r.jobs[2].start_ms, 250000);
	assert_int_equal(r.jobs[2].end_ms, 300000);
	assert_int_equal(r.jobs[3].start_ms, 300000);
	assert_int_equal(r.jobs[0].attempts, 2);
	assert_int_equal(r.jobs[0].end_ms, 1160000);
	assert_true(fabs(r.device_h_lost - 40.0 / 3600) < 1e-9); /* the restore */
	sim_result_release(&r);
	/* the starvation guard */
	n->las_max_stretch = 0.4;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.preemptions, 2);
	assert_int_equal(r.jobs[3].start_ms, 390000);
	assert_int_equal(r.jobs[3].end_ms, 440000);
	assert_int_equal(r.jobs[0].attempts, 3);
	assert_int_equal(r.jobs[0].end_ms, 1170000);
	sim_result_release(&r);
	/* a minimum run: job 1 reaches the second level at 90 s, but is taken
	 * only once its attempt has run 300 s (a pass then, with no event) */
	n->las_max_stretch = 0;
	n->las_min_run_s = 300;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.jobs[1].start_ms, 300000);
	assert_int_equal(r.jobs[1].end_ms, 350000);
	sim_result_release(&r);
	n->las_min_run_s = 0;
	/* without a save in the grace, job 1 would lose all it did: taken at
	 * 200 s, when it has run 200 s (and 10 s of restore), under a bound of
	 * 300 s; with a bound of 100 s, it is left alone and finishes at 1000
	 * s, and the others follow it in their order */
	o.checkpoint_on_preempt = false;
	n->las_max_loss_s = 300;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.preemptions, 1);
	assert_int_equal(r.jobs[1].start_ms, 200000);
	assert_true(fabs(r.device_h_lost - 4 * 200.0 / 3600 - 4 * 10.0 / 3600) < 1e-9);
	sim_result_release(&r);
	n->las_max_loss_s = 100;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.preemptions, 0);
	assert_int_equal(r.jobs[0].end_ms, 1000000);
	assert_int_equal(r.jobs[1].start_ms, 1000000);
	assert_true(r.device_h_lost == 0);
	sim_result_release(&r);
	/* ... unless it checkpoints: every 60 s, its last commit 20 s before
	 * job 1 comes (at 180 s of its run: 20 s lost, 10 s to restore) */
	o.checkpoint_s = 60;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.preemptions, 1);
	assert_int_equal(r.jobs[1].start_ms, 200000);
	sim_result_release(&r);
	o.checkpoint_s = 0;
	o.checkpoint_on_preempt = true;
	n->las_max_loss_s = MODEL_LAS_DEFAULT_MAX_LOSS_S;
	/* first in, first out: one after the other */
	n->las = false;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.preemptions, 0);
	assert_int_equal(r.jobs[0].end_ms, 1000000);
	assert_int_equal(r.jobs[3].end_ms, 1150000);
	sim_result_release(&r);
	/* periodic checkpoints of 5 s every 60 s: job 1's 1,000 s of work
	 * write 16, on 4 devices; the others' 50 s none. All that is lost is
	 * the writing, and the report says which share it is */
	o.checkpoint_s = 60;
	o.checkpoint_cost_ms = 5000;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.jobs[0].end_ms, 1080000);
	assert_true(fabs(r.device_h_saving - 16 * 5 * 4 / 3600.0) < 1e-9);
	assert_true(fabs(r.device_h_lost - r.device_h_saving) < 1e-9);
	sim_result_release(&r);
	o.checkpoint_s = 0;
	o.checkpoint_cost_ms = 0;
	sim_trace_release(&tr);
	sim_cluster_release(&cl);
}

/* Placing jobs in one greedy pass gives what placing them one by one gives
 * (the FGD experiment relies on it). */
static void test_one_pass_equals_one_by_one(void **state)
{
	struct sim_cluster cl;
	struct sim_trace tr;
	struct strbuf jobs;
	strbuf_init(&jobs);
	strbuf_addstr(&jobs, HEADER);
	uint64_t s = 7;
	for (int i = 0; i < 300; i++) {
		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		uint32_t x = (uint32_t)(s >> 33);
		static const char *const g[] = {"0.25", "0.5", "0.3", "1", "2", "0.7"};
		strbuf_addf(&jobs, "%d,%d,%d,1,1,%s,%u,0,,a,,0\n", i + 1, i, 1000000, g[x % 6],
			    1 + x / 7 % 8);
	}
	load("name,model,gpus,cpus\nn1,H100,8,32\nn2,H100,4,16\nn3,A100-80GB,2,24\nn4,A100-80GB,8,"
	     "64\n",
	     jobs.buf, &cl, &tr);
	strbuf_release(&jobs);
	for (int pol = 0; pol < 3; pol++) {
		struct sim_options o;
		options(&o);
		o.policy.frac = (enum sched_frac_policy)pol;
		o.policy.no_reservations = true;
		o.policy.score_before_speed = pol == 1;
		o.policy.score_every_node = pol != 2;
		o.policy.no_preemption = true;
		o.drop_unplaced = true;
		struct sched_mix_item *mix;
		o.nmix = sim_trace_mix(&tr, 1.0, &mix);
		o.mix = mix;
		struct sim_result one, all;
		struct tk_error err;
		assert_int_equal(sim_run(&cl, &tr, &o, &one, &err), 0);
		for (int i = 0; i < tr.n; i++)
			tr.jobs[i].submit_ms = 0;
		assert_int_equal(sim_run(&cl, &tr, &o, &all, &err), 0);
		int placed = 0;
		for (int i = 0; i < tr.n; i++) {
			assert_int_equal(one.jobs[i].state, all.jobs[i].state);
			assert_true(all.jobs[i].start_ms <= 0); /* all placed by the first pass */
			if (one.jobs[i].devices || all.jobs[i].devices)
				assert_string_equal(one.jobs[i].devices, all.jobs[i].devices);
			placed += one.jobs[i].start_ms >= 0;
		}
		assert_true(placed > 20 && placed < tr.n); /* some fit, some do not */
		for (int i = 0; i < tr.n; i++)
			tr.jobs[i].submit_ms = i * 1000;
		sim_result_release(&one);
		sim_result_release(&all);
		free(mix);
	}
	sim_trace_release(&tr);
	sim_cluster_release(&cl);
}

/* Without failures nothing is lost; with them the kept share matches the
 * renewal argument: a checkpoint interval C survives failures at rate l
 * after (e^(lC) - 1) / l of running on average, so the kept share is
 * lC / (e^(lC) - 1). Tolerance: one percentage point (the run has about
 * 2,000 failures; the spread of its estimate is about 0.2 points). */
static void test_failures_and_effective_training(void **state)
{
	struct strbuf nodes, jobs;
	strbuf_init(&nodes);
	strbuf_init(&jobs);
	strbuf_addstr(&nodes, "name,model,gpus,cpus\n");
	for (int i = 0; i < 64; i++)
		strbuf_addf(&nodes, "n%02d,H100,1,8\n", i);
	strbuf_addstr(&jobs, HEADER);
	for (int i = 0; i < 2000; i++)
		strbuf_addf(&jobs, "%d,0,36000,1,1,1,0,0,,a,,0\n", i + 1);
	struct sim_cluster cl;
	struct sim_trace tr;
	load(nodes.buf, jobs.buf, &cl, &tr);
	strbuf_release(&nodes);
	strbuf_release(&jobs);
	struct sim_options o;
	options(&o);
	o.keep_devices = false;
	o.checkpoint_s = 3600;
	struct sim_result r;
	struct tk_error err;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.failures, 0);
	assert_true(r.effective == 1.0);
	sim_result_release(&r);
	o.mtbf_gpu_h = 10;
	o.repair_h = 0.5;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	double lc = 3600.0 / (10 * 3600);
	double expect = lc / (exp(lc) - 1);
	printf("# failures %d, effective %.4f, expected %.4f\n", r.failures, r.effective, expect);
	assert_true(r.failures > 1000);
	assert_int_equal(r.done, 2000);
	assert_true(fabs(r.effective - expect) < 0.01);
	sim_result_release(&r);
	/* deterministic for a seed */
	struct sim_result r2;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(sim_run(&cl, &tr, &o, &r2, &err), 0);
	assert_int_equal(r.failures, r2.failures);
	assert_true(r.effective == r2.effective);
	sim_result_release(&r);
	sim_result_release(&r2);
	sim_trace_release(&tr);
	sim_cluster_release(&cl);
}

/* Restarts in place, as the server decides them (sched_replace): a gang
 * with a spare swaps a failed node for it and never waits in its queue,
 * the spare held idle all along (used and lost device-time, charged); with
 * --restart requeue every failure under it sends it back to its queue; the
 * cluster's spare pool is kept out of the passes and swapped in. */
static void test_restarts_in_place_and_spares(void **state)
{
	struct sim_cluster cl;
	struct sim_trace tr;
	load("name,model,gpus,cpus\nn0,H100,4,8\nn1,H100,4,8\nn2,H100,4,8\nn3,H100,4,8\n"
	     "n4,H100,4,8\nn5,H100,4,8\n",
	     HEADER "1,0,360000,2,4,1,1,0,,a,,0\n", &cl, &tr);
	struct sim_options o;
	options(&o);
	o.checkpoint_s = 3600;
	o.restart_cost_ms = 60000;
	o.mtbf_gpu_h = 100; /* about 8 failures under the job's 8 devices in 100 h */
	o.repair_h = 2;
	o.spares = 1;
	struct sim_result r;
	struct tk_error err;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	printf("# in place: %d failures, %d restarts in place, %d by the spare, %d requeues, "
	       "%.1f spare device-hours, effective %.4f\n",
	       r.failures, r.restarts_in_place, r.spare_swaps, r.requeues, r.device_h_spare,
	       r.effective);
	assert_int_equal(r.done, 1);
	assert_int_equal(r.requeues, 0);
	assert_true(r.restarts_in_place >= 3);
	assert_true(r.spare_swaps >= 1 && r.spare_swaps <= r.restarts_in_place);
	assert_int_equal(r.jobs[0].attempts, r.restarts_in_place + 1);
	/* the spare was held the whole run (refilled at once from free nodes) */
	double span_h = (double)r.makespan_ms / 3600e3;
	assert_true(r.device_h_spare > 0.95 * 4 * span_h && r.device_h_spare <= 4 * span_h + 1e-6);
	assert_true(r.device_h_used > 8 * 100 + r.device_h_spare - 1e-6);
	double effective_spared = r.effective;
	int failures = r.failures;
	sim_result_release(&r);
	/* the same failures without the spare: in place still, on free nodes */
	o.spares = 0;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.requeues, 0);
	assert_int_equal(r.spare_swaps, 0);
	assert_true(r.restarts_in_place >= 3);
	assert_true(r.device_h_spare == 0);
	assert_true(r.effective > effective_spared); /* a spare costs idle device-time */
	sim_result_release(&r);
	/* requeued: back to the queue at every failure under it */
	o.restart = RESTART_REQUEUE;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.restarts_in_place, 0);
	assert_true(r.requeues >= 3);
	assert_int_equal(r.jobs[0].attempts, r.requeues + 1);
	assert_true(r.failures > 0 && failures > 0);
	sim_result_release(&r);
	sim_trace_release(&tr);
	sim_cluster_release(&cl);

	/* the pool: one idle H100 node no pass gives out; a second job that would
	 * fit there waits for the gang to end, and failures under the gang are
	 * swapped for the pool's node */
	load("name,model,gpus,cpus\nn0,H100,4,8\nn1,H100,4,8\nn2,H100,4,8\n",
	     HEADER "1,0,36000,2,4,1,1,0,,a,,0\n2,1,3600,1,4,1,1,0,,a,,0\n", &cl, &tr);
	options(&o);
	o.sched.nspare_pool = 1;
	snprintf(o.sched.spare_pool[0].model, MODEL_NAME_MAX, "H100");
	o.sched.spare_pool[0].nodes = 1;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.done, 2);
	assert_int_equal(r.jobs[1].start_ms, 36000 * 1000);
	sim_result_release(&r);
	o.mtbf_gpu_h = 40;
	o.repair_h = 1;
	o.checkpoint_s = 600;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	printf("# pool: %d failures, %d restarts in place, %d by the pool, %d requeues\n",
	       r.failures, r.restarts_in_place, r.pool_swaps, r.requeues);
	assert_int_equal(r.done, 2);
	assert_true(r.pool_swaps >= 1);
	assert_true(r.restarts_in_place >= r.pool_swaps);
	sim_result_release(&r);
	sim_trace_release(&tr);
	sim_cluster_release(&cl);
}

static void expect_error(const char *text, const char *needle)
{
	struct sim_trace tr;
	struct tk_error err;
	const char *path = write_file("bad.csv", text);
	assert_true(sim_trace_load(path, &tr, &err) < 0);
	if (!strstr(err.text, needle))
		fail_msg("expected \"%s\" in: %s", needle, err.text);
}

/* Pools and fault domains as the server has them: nodes labelled by their
 * row and with gpu=MODEL, in pools by selector; a job runs only in the
 * pools that take it (top: 8 accelerators or more), a gang --spread...
 * (not in traces) keeps to the pool; allocation per pool is reported. */
static void test_pools_and_domains(void **state)
{
	struct sim_cluster cl;
	struct sim_trace tr;
	/* top: n1, n2 (H100, 4 each); general: n3 (A100, 4); n4 in no pool */
	load("name,model,gpus,cpus,mem_mib,topology,labels,domain\n"
	     "n1,H100,4,32,0,,tier=top;fabric=ib,r1\n"
	     "n2,H100,4,32,0,,tier=top,r2\n"
	     "n3,A100-80GB,4,32,0,,,r1\n"
	     "n4,T4,4,32,0,,,r2\n",
	     HEADER "1,0,100,1,4,1,0,0,,a,,0\n"	     /* 4 GPUs: not top, general or none */
		    "2,0,100,2,4,1,0,0,,a,,0\n"	     /* 8 GPUs: top (or general+none) */
		    "3,0,100,1,4,1,0,0,H100,a,,0\n", /* 4 H100: only top, which refuses */
	     &cl, &tr);
	assert_string_equal(cl.nodes[0].labels, "fabric=ib,gpu=H100,tier=top");
	assert_string_equal(cl.nodes[2].labels, "gpu=A100-80GB");
	assert_string_equal(cl.nodes[1].domain, "r2");
	struct sim_options o;
	options(&o);
	struct tk_error err;
	assert_int_equal(
		sched_config_load_json(&o.sched,
				       "{\"pools\": {\"top\": {\"selector\": \"tier=top\", "
				       "\"min_gpus\": 8}, \"general\": {\"selector\": "
				       "\"gpu=A100-80GB\"}}}",
				       &err),
		0);
	struct sim_result r;
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.done, 2);
	assert_int_equal(r.never_fits, 1);
	assert_int_equal(r.jobs[2].state, SIM_NEVER_FITS);
	assert_null(strstr(r.jobs[0].devices, "n1:"));
	assert_null(strstr(r.jobs[0].devices, "n2:"));
	/* the gang: the best fit, both top nodes (one switch, nothing left) */
	assert_non_null(strstr(r.jobs[1].devices, "n1:0,1,2,3"));
	assert_non_null(strstr(r.jobs[1].devices, "n2:0,1,2,3"));
	assert_int_equal(r.npools, 2);
	assert_string_equal(r.pool_names[0], "top");
	assert_int_equal(r.pool_milli[0], 8 * MODEL_MILLI);
	assert_int_equal(r.pool_milli[2], 4 * MODEL_MILLI); /* n4, in none */
	assert_true(fabs(r.pool_alloc[0] - 1.0) < 1e-9);    /* the gang, the whole time */
	assert_true(fabs(r.pool_alloc[0] + r.pool_alloc[1] + r.pool_alloc[2] - 2.0) < 1e-9);
	sim_result_release(&r);
	sim_trace_release(&tr);
	/* a trace's jobs name pools, --spread and --within */
	assert_int_equal(sim_trace_load(write_file("jobs.csv",
						   "id,submit_s,run_s,nodes,tasks_per_node,"
						   "gpus_per_task,cpus_per_task,mem_mib,gpu_types,"
						   "queue,class,time_limit_s,pool,spread,within\n"
						   "1,0,100,2,4,1,0,0,,a,,0,,rack,\n"
						   "2,0,100,1,4,1,0,0,,a,,0,general,,\n"
						   "3,0,100,2,4,1,0,0,,a,,0,,,rack\n"),
					&tr, &err),
			 0);
	assert_int_equal(sim_run(&cl, &tr, &o, &r, &err), 0);
	assert_int_equal(r.done, 2);
	assert_non_null(strstr(r.jobs[1].devices, "n3:"));
	/* 1: two racks; 3: one, where no rack has two nodes of one model (r1
	 * is n1 and n3, r2 n2 and n4): never */
	bool r1 = strstr(r.jobs[0].devices, "n1:") || strstr(r.jobs[0].devices, "n3:");
	bool r2 = strstr(r.jobs[0].devices, "n2:") || strstr(r.jobs[0].devices, "n4:");
	assert_true(r1 && r2);
	assert_int_equal(r.jobs[2].state, SIM_NEVER_FITS);
	sim_result_release(&r);
	sim_trace_release(&tr);
	assert_true(sim_trace_load(write_file("jobs.csv",
					      "id,submit_s,run_s,nodes,tasks_per_node,"
					      "gpus_per_task,cpus_per_task,mem_mib,gpu_types,"
					      "queue,class,time_limit_s,spread\n"
					      "1,0,100,2,4,1,0,0,,a,,0,rack:0\n"),
				   &tr, &err) < 0);
	assert_non_null(strstr(err.text, ":2: column 13 (spread): spread: expected"));
	sim_cluster_release(&cl);
	/* a bad domain or label names the line */
	struct catalogue cat;
	catalogue_init(&cat);
	assert_true(sim_cluster_load(write_file("bad.csv", "name,model,gpus,cpus,domain\n"
							   "n1,H100,4,32,r1//x\n"),
				     &cat, &cl, &err) < 0);
	assert_non_null(strstr(err.text, ":2: domain: \"r1//x\" is not a fault-domain path"));
	assert_true(sim_cluster_load(write_file("bad.csv", "name,model,gpus,cpus,labels\n"
							   "n1,H100,4,32,tier\n"),
				     &cat, &cl, &err) < 0);
	assert_non_null(strstr(err.text, ":2: labels: "));
	catalogue_release(&cat);
}

static void test_bad_traces(void **state)
{
	static const char *const openb =
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
		"deletion_time,scheduled_time\n";
	char buf[1024];
	expect_error("name,cpu_milli\np,1\n", "not a job trace I know");
	expect_error("name,cpu_milli,memory_mib,num_gpu\n", "no column \"gpu_milli\"");
	snprintf(buf, sizeof(buf), "%sp0,1000,100,1,1000,,LS,Running,-5,10,0\n", openb);
	expect_error(buf, "bad.csv:2: column 9 (creation_time): must be from 0");
	snprintf(buf, sizeof(buf), "%sp0,lots,100,1,1000,,LS,Running,0,10,0\n", openb);
	expect_error(buf, "bad.csv:2: column 2 (cpu_milli): not an integer: \"lots\"");
	snprintf(buf, sizeof(buf), "%sp0,1000,100,1,1000,,LS,Running,50,10,50\n", openb);
	expect_error(buf, "column 10 (deletion_time): 10 is before scheduled_time 50");
	snprintf(buf, sizeof(buf), "%sp0,1000,100,2,500,,LS,Running,0,10,0\n", openb);
	expect_error(buf, "a pod with 2 GPUs takes them whole");
	snprintf(buf, sizeof(buf), "%sp0,1000,100,1,1000,,LS,Running,0,10\n", openb);
	expect_error(buf, "bad.csv:2: 10 fields, the header has 11");
	expect_error(HEADER "1,0,100,1,1,0.0005,0,0,,a,,0\n", "column 6 (gpus_per_task)");
	expect_error(HEADER "1,0,-1,1,1,1,0,0,,a,,0\n", "column 3 (run_s): must be from 0");
	expect_error(HEADER "1,0,1,1,1,1,0,0,,bad queue,,0\n", "column 10 (queue)");
	/* a 1 GB line: refused after the limit, without reading it all */
	char path[256];
	snprintf(path, sizeof(path), "%s/huge.csv", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, HEADER, strlen(HEADER)), (ssize_t)strlen(HEADER));
	assert_int_equal(ftruncate(fd, 1LL << 30), 0);
	close(fd);
	struct sim_trace tr;
	struct tk_error err;
	assert_true(sim_trace_load(path, &tr, &err) < 0);
	assert_non_null(strstr(err.text, "huge.csv:2: line longer than"));
	/* an unknown class is named with its line */
	struct sim_cluster cl;
	load("name,model,gpus,cpus\nn1,H100,4,32\n", HEADER "1,0,1,1,1,1,0,0,,a,gold,0\n", &cl,
	     &tr);
	struct sim_options o;
	options(&o);
	struct sim_result r;
	assert_true(sim_run(&cl, &tr, &o, &r, &err) < 0);
	assert_non_null(strstr(err.text, "line 2: class \"gold\" is not in the configuration"));
	sim_trace_release(&tr);
	sim_cluster_release(&cl);
}

int main(int argc, char **argv)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test(test_three_jobs_two_nodes),
		cmocka_unit_test(test_no_backfill_without_a_limit),
		cmocka_unit_test(test_preemption_loses_work_since_checkpoint),
		cmocka_unit_test(test_least_attained_service),
		cmocka_unit_test(test_one_pass_equals_one_by_one),
		cmocka_unit_test(test_failures_and_effective_training),
		cmocka_unit_test(test_restarts_in_place_and_spares),
		cmocka_unit_test(test_pools_and_domains),
		cmocka_unit_test(test_bad_traces),
	};
	/* an argument runs the cases whose names contain it */
	size_t n = 0;
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
		if (argc < 2 || strstr(tests[i].name, argv[1]))
			tests[n++] = tests[i];
	return _cmocka_run_group_tests("sim", tests, n, setup, teardown);
}
