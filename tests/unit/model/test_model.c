/* Unit tests of src/model: validation of requests, JSON round trips, fake
 * devices, the catalogue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <linux/dcbnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <math.h>
#include <sys/socket.h>

#include "model/model.h"
#include "model/wire.h"

static json_t *parse(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, JSON_ALLOW_NUL, &e);
	if (!j)
		fail_msg("bad test JSON: %s: %s", text, e.text);
	return j;
}

#define BASE "\"command\": [\"python\", \"train.py\"], \"cwd\": \"/home/u\""

static void test_request_valid(void **state)
{
	json_t *j = parse("{" BASE ", \"nodes\": 2, \"tasks_per_node\": 4, \"gpus_per_task\": 1,"
			  "\"gpu_types\": [\"H100\"], \"env\": {\"A\": \"1\", \"B\": \"x=y\"},"
			  "\"time_limit_s\": 3600, \"requeue\": 2}");
	struct job_request r;
	struct tk_error err;
	assert_int_equal(job_request_unpack(j, &r, &err), 0);
	assert_string_equal(r.name, "python");
	assert_int_equal(r.argc, 2);
	assert_int_equal(r.nodes, 2);
	assert_int_equal(r.tasks_per_node, 4);
	assert_int_equal(r.gpu_milli, 1000);
	assert_int_equal(r.ngpu_types, 1);
	assert_int_equal(r.nenv, 2);
	assert_int_equal(r.grace_s, MODEL_DEFAULT_GRACE_S);
	assert_string_equal(r.output, MODEL_DEFAULT_OUTPUT);
	/* round trip: pack, unpack, pack again gives the same text */
	json_t *p1 = job_request_pack(&r);
	struct job_request r2;
	assert_int_equal(job_request_unpack(p1, &r2, &err), 0);
	json_t *p2 = job_request_pack(&r2);
	assert_true(json_equal(p1, p2));
	json_decref(p1);
	json_decref(p2);
	job_request_release(&r);
	job_request_release(&r2);
	json_decref(j);

	j = parse("{" BASE ", \"gpus_per_task\": 0.25}");
	assert_int_equal(job_request_unpack(j, &r, &err), 0);
	assert_int_equal(r.gpu_milli, 250);
	p1 = job_request_pack(&r);
	assert_true(json_is_real(json_object_get(p1, "gpus_per_task")));
	json_decref(p1);
	job_request_release(&r);
	json_decref(j);
}

static void test_request_invalid(void **state)
{
	struct {
		const char *body;
		const char *want; /* the error starts with this */
	} cases[] = {
		{"{\"cwd\": \"/x\"}", "command: required field is missing"},
		{"{\"command\": [], \"cwd\": \"/x\"}", "command: must not be empty"},
		{"{\"command\": \"ls\", \"cwd\": \"/x\"}", "command: must be an array of strings"},
		{"{\"command\": [1], \"cwd\": \"/x\"}", "command[0]: must be a string"},
		{"{\"command\": [\"ls\"]}", "cwd: required field is missing"},
		{"{\"command\": [\"ls\"], \"cwd\": \"rel\"}", "cwd: must be an absolute path"},
		{"{" BASE ", \"bogus\": 1}", "bogus: unknown field"},
		{"{" BASE ", \"nodes\": 0}", "nodes: must be an integer from 1 to 4096, got 0"},
		{"{" BASE ", \"nodes\": -3}", "nodes: must be an integer from 1 to 4096, got -3"},
		{"{" BASE ", \"nodes\": 99999999999999}",
		 "nodes: must be an integer from 1 to 4096"},
		{"{" BASE ", \"nodes\": \"2\"}",
		 "nodes: must be an integer from 1 to 4096, got a string"},
		{"{" BASE ", \"nodes\": 1.5}", "nodes: must be an integer"},
		{"{" BASE ", \"tasks_per_node\": 1000}",
		 "tasks_per_node: must be an integer from 1 to 256"},
		{"{" BASE ", \"gpus_per_task\": -1}",
		 "gpus_per_task: must be a number from 0 to 64"},
		{"{" BASE ", \"gpus_per_task\": 65}",
		 "gpus_per_task: must be a number from 0 to 64"},
		{"{" BASE ", \"gpus_per_task\": 1.5}", "gpus_per_task: a fraction must be below 1"},
		{"{" BASE ", \"gpus_per_task\": 0.0001}",
		 "gpus_per_task: must be a whole number or a fraction"},
		{"{" BASE ", \"gpus_per_task\": 0.5, \"nodes\": 2}",
		 "gpus_per_task: a fractional accelerator"},
		{"{" BASE ", \"gpus_per_task\": 8, \"tasks_per_node\": 16}",
		 "gpus_per_task: 16 tasks x 8"},
		{"{" BASE ", \"gpu_types\": [\"H 100\"]}",
		 "gpu_types[0]: \"H 100\" is not a model name"},
		{"{" BASE ", \"env\": [\"A=1\"]}", "env: must be an object of strings"},
		{"{" BASE ", \"env\": {\"A\": 1}}", "env.A: must be a string"},
		{"{" BASE ", \"env\": {\"A=B\": \"1\"}}", "env: variable name \"A=B\""},
		{"{" BASE ", \"time_limit_s\": -1}", "time_limit_s: must be an integer from 0"},
		{"{" BASE ", \"requeue\": 101}", "requeue: must be an integer from 0 to 100"},
		{"{" BASE ", \"name\": \"a\\nb\"}", "name: must not contain control characters"},
		{"{" BASE ", \"name\": \"\"}", "name: must not be empty"},
		{"{\"command\": [\"a\\u0000b\"], \"cwd\": \"/x\"}",
		 "command[0]: must not contain a NUL"},
		{"[1, 2]", "body: must be an object, got an array"},
		{"{" BASE ", \"after\": [{\"job\": 0}]}", "after[0].job: must be an integer"},
		{"{" BASE ", \"after\": [{\"job\": 3, \"when\": \"soon\"}]}",
		 "after[0].when: must be start, ok, fail or any"},
		{"{" BASE ", \"after\": {\"job\": 3}}", "after: must be an array"},
		{"{" BASE ", \"signal\": {\"number\": 99}}", "signal.number: must be an integer"},
		{"{" BASE ", \"array\": \"1,x\"}", "array: \"1,x\" is not a list of indices"},
		{"{" BASE ", \"comment\": 3}", "comment: must be a string"},
		{"{" BASE ", \"nodelist\": [\"a b\"]}", "nodelist[0]: \"a b\" is not a node name"},
		{"{" BASE ", \"nodelist\": [\"n1\", \"n1\"]}", "nodelist: names n1 twice"},
		{"{" BASE ", \"nodelist\": [\"n1\"], \"exclude\": [\"n1\"]}",
		 "nodelist and exclude both name n1"},
		{"{" BASE ", \"nodelist\": [\"n1\"], \"nodes\": 2}",
		 "nodelist: names 1 node, but the job asks for 2 nodes"},
		{"{" BASE ", \"exclusive\": 1}", "exclusive: must be true or false"},
		{"{" BASE ", \"on_stall\": \"kill\"}",
		 "on_stall: must be notify, requeue or cancel"},
		{"{" BASE ", \"stall_after_s\": -5}", "stall_after_s"},
		{"{" BASE ", \"nodes\": 3, \"nodes_max\": 2}",
		 "nodes_max: 2 is fewer than nodes (3)"},
		{"{" BASE ", \"ckpt_signal\": {\"number\": 9}}",
		 "ckpt_signal.number: 9 cannot be caught"},
		{"{" BASE ", \"ckpt_signal\": {\"number\": 12, \"wait_s\": 0}}",
		 "ckpt_signal.wait_s: must be an integer from 1 to 3600"},
		{"{" BASE ", \"spares\": 1, \"restart\": \"requeue\"}",
		 "spares: a job's spares take a failed node's place"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		json_t *j = parse(cases[i].body);
		struct job_request r;
		struct tk_error err = {""};
		int rc = job_request_unpack(j, &r, &err);
		if (rc >= 0)
			fail_msg("case %zu accepted: %s", i, cases[i].body);
		if (strncmp(err.text, cases[i].want, strlen(cases[i].want)) != 0)
			fail_msg("case %zu: got \"%s\", want \"%s...\"", i, err.text,
				 cases[i].want);
		json_decref(j);
	}
}

/* Slurm's hostlists: ranges keep their zero padding, brackets nest with
 * text around them, and what is not a list says why. */
/* Attempt a's lines: steps from..to, one every 100 ms from at_ms. */
static void lines(struct attempt *a, int64_t from, int64_t to, int64_t at_ms)
{
	a->train = xcalloc(1, sizeof(*a->train));
	for (int64_t k = from; k <= to; k++) {
		struct train_point p = {.step = k, .at_ms = at_ms + 100 * (k - from + 1), .n = 1};
		snprintf(p.name[0], sizeof(p.name[0]), "loss");
		p.value[0] = 1.0 / (double)k;
		train_metrics_add(a->train, &p);
	}
}

/* Three attempts: a hang after step 150, a node lost 6 s later (the next
 * restores step 100), a task failure after step 250 (the next restores
 * 200), then to the end;
 * every part by hand, and they add up to the wall time. */
static void test_goodput(void **state)
{
	(void)state;
	struct job j = {.state = JOB_COMPLETED, .submit_ms = 0, .end_ms = 100000, .nattempts = 3};
	j.attempts = xcalloc(3, sizeof(*j.attempts));
	struct attempt *a = j.attempts;
	a[0] = (struct attempt){.number = 1,
				.start_ms = 10000,
				.end_ms = 44000,
				.ended = true,
				.fail_ms = 41000,
				.end = ATTEMPT_END_NODE_LOST};
	lines(&a[0], 1, 150, 20000); /* step 1 at 20.1 s, 100 at 30 s, 150 at 35 s */
	a[0].ckpt_ms = 500;	     /* its commit of step 100 took 0.5 s to write */
	a[1] = (struct attempt){.number = 2,
				.start_ms = 50000,
				.end_ms = 73000,
				.ended = true,
				.fail_ms = 70000,
				.end = ATTEMPT_END_FAILED,
				.restore_step = 100,
				.restore_attempt = 1,
				.restore_go = true,
				.restore_ms = 2000};
	snprintf(a[1].restore_tag, sizeof(a[1].restore_tag), "s-100");
	lines(&a[1], 101, 250, 54900); /* 101 at 55 s, 200 at 64.9 s */
	a[2] = (struct attempt){.number = 3,
				.start_ms = 80000,
				.end_ms = 100000,
				.ended = true,
				.end = ATTEMPT_END_COMPLETED,
				.restore_step = 200,
				.restore_attempt = 2,
				.restore_go = true,
				.restore_ms = 1000};
	snprintf(a[2].restore_tag, sizeof(a[2].restore_tag), "s-200");
	lines(&a[2], 201, 300, 82900);
	struct goodput g;
	goodput_of(&j, 999999, &g);
	assert_int_equal(g.wall_ms, 100000);
	assert_int_equal(g.queued_ms, 10000);
	assert_int_equal(g.placing_ms, 6000 + 7000);
	assert_int_equal(g.restoring_ms, 2000 + 1000);
	assert_int_equal(g.starting_ms, 10100 + 3000 + 2000);
	assert_int_equal(g.productive_ms, 9900 - 500 + 9900 + 17000);
	assert_int_equal(g.checkpointing_ms, 500);
	/* the first failure said 6 s after its last line (over 5 s, ten
	 * steps): a hang, counted from that line; the second as said */
	assert_int_equal(g.lost_ms, 5000 + 5100);
	assert_int_equal(g.detecting_ms, 9000 + 3000);
	assert_int_equal(g.queued_ms + g.placing_ms + g.restoring_ms + g.starting_ms +
				 g.productive_ms + g.checkpointing_ms + g.lost_ms + g.detecting_ms,
			 g.wall_ms);
	assert_int_equal(g.failures, 2);
	assert_int_equal(g.steps_lost, 100);
	assert_true(fabs(g.ratio - 36300.0 / 90000.0) < 1e-9);
	/* attempt by attempt, the same parts */
	struct goodput sum = {0};
	for (int i = 0; i < 3; i++) {
		struct goodput one;
		goodput_attempt(&j, i, 999999, &one);
		sum.wall_ms += one.wall_ms;
		sum.productive_ms += one.productive_ms;
		sum.lost_ms += one.lost_ms;
		sum.failures += one.failures;
	}
	assert_true(sum.wall_ms == g.wall_ms && sum.productive_ms == g.productive_ms &&
		    sum.lost_ms == g.lost_ms && sum.failures == g.failures);
	/* a failure said before the attempt's last line (a node's last
	 * heartbeat before it): counted from that line */
	a[1].fail_ms = 69000;
	struct goodput early;
	goodput_of(&j, 999999, &early);
	assert_int_equal(early.lost_ms, 5000 + 5000);
	assert_int_equal(early.detecting_ms, 9000 + 3100);
	a[1].fail_ms = 70000;
	json_t *o = goodput_pack(&g);
	assert_true(fabs(json_number_value(json_object_get(o, "lost_s")) - 10.1) < 1e-9);
	json_decref(o);
	/* running in its second attempt, the next not yet said: what it ran
	 * so far is productive; then waiting again after it failed: placing */
	j.state = JOB_RUNNING;
	j.nattempts = 2;
	a[1].ended = false;
	a[1].fail_ms = 0;
	goodput_of(&j, 68000, &g);
	assert_int_equal(g.wall_ms, 68000);
	assert_int_equal(g.productive_ms, 9900 - 500 + (68000 - 55000));
	assert_int_equal(g.queued_ms + g.placing_ms + g.restoring_ms + g.starting_ms +
				 g.productive_ms + g.checkpointing_ms + g.lost_ms + g.detecting_ms,
			 g.wall_ms);
	j.state = JOB_PENDING;
	a[1].ended = true;
	a[1].fail_ms = 70000;
	goodput_of(&j, 90000, &g);
	assert_int_equal(g.placing_ms, 6000 + (90000 - 73000));
	assert_int_equal(g.queued_ms + g.placing_ms + g.restoring_ms + g.starting_ms +
				 g.productive_ms + g.checkpointing_ms + g.lost_ms + g.detecting_ms,
			 g.wall_ms);
	/* the lines kept when each was written, through the job's record */
	json_t *tm = train_metrics_pack(a[0].train);
	struct train_metrics back;
	assert_int_equal(train_metrics_unpack(tm, &back, NULL), 0);
	assert_int_equal(back.hist_ms[99], 30000);
	json_decref(tm);
	for (int i = 0; i < 3; i++)
		free(a[i].train);
	free(j.attempts);
	/* model FLOP/s as the lines say: a step's FLOPs over the median time a
	 * step (100 ms), or a rate times its FLOPs; nothing where they do not */
	struct attempt fa = {.number = 1};
	fa.train = xcalloc(1, sizeof(*fa.train));
	for (int k = 1; k <= 20; k++) {
		struct train_point p = {.step = k, .at_ms = 1000 + 100 * k, .n = 1};
		snprintf(p.name[0], sizeof(p.name[0]), "model_flops");
		p.value[0] = 1e12;
		train_metrics_add(fa.train, &p);
	}
	assert_true(fabs(goodput_flops(&fa) - 1e13) < 1);
	struct train_point rate = {.step = 21, .at_ms = 3100, .n = 2};
	snprintf(rate.name[0], sizeof(rate.name[0]), "tokens_per_s");
	snprintf(rate.name[1], sizeof(rate.name[1]), "flops_per_token");
	rate.value[0] = 4000;
	rate.value[1] = 6e9;
	train_metrics_add(fa.train, &rate);
	assert_true(fabs(goodput_flops(&fa) - 2.4e13) < 1);
	free(fa.train);
	fa.train = NULL;
	assert_true(goodput_flops(&fa) < 0);
	/* never started: all of it queued, no ratio */
	struct job w = {.state = JOB_PENDING, .submit_ms = 1000};
	goodput_of(&w, 6000, &g);
	assert_true(g.queued_ms == 5000 && g.wall_ms == 5000 && g.ratio < 0);
}

/* What goodput reads travels whole: a checkpoint event's and a
 * committed checkpoint's write time (absent when not known). */
/* A reference's record: read strictly, compared bit for bit or within a
 * tolerance, and its step time judged. */
static void test_reference_compare(void **state)
{
	(void)state;
	struct tk_error err;
	struct reference a, b;
	json_t *j = json_loads("{\"loss\": [2.5, 1.25, 0.625], \"params\": [0.5, -4.0], "
			       "\"step_s\": [0.02, 0.01, 0.03]}",
			       0, NULL);
	assert_int_equal(reference_unpack(j, &a, &err), 0);
	assert_int_equal(a.nloss, 3);
	assert_int_equal(a.nparams, 2);
	assert_true(a.step_s == 0.02); /* the median */
	assert_int_equal(a.source, REF_SOURCE_COMMAND);
	/* its pack reads back the same bits */
	json_t *p = reference_pack(&a);
	char *text = json_dumps(p, 0);
	json_decref(p);
	p = json_loads(text, 0, NULL);
	free(text);
	assert_int_equal(reference_unpack(p, &b, &err), 0);
	json_decref(p);
	char da[17], db[17];
	reference_digest(&a, da);
	reference_digest(&b, db);
	assert_string_equal(da, db);
	struct ref_compare c;
	reference_compare(&a, &b, 0, 0.1, &c);
	assert_int_equal(c.verdict, REF_SAME);
	assert_true(c.bitwise);
	assert_int_equal(c.first_step, -1);
	/* one ulp at step 2: not bit for bit, and no tolerance */
	b.loss[1] = nextafter(b.loss[1], 2.0);
	reference_digest(&b, db);
	assert_string_not_equal(da, db);
	reference_compare(&a, &b, 0, 0.1, &c);
	assert_int_equal(c.verdict, REF_DIFFERENT);
	assert_false(c.bitwise);
	assert_int_equal(c.first_step, 1);
	assert_non_null(strstr(c.text, "loss differs from step 2 (1.25 before, "
				       "1.2500000000000002 after)"));
	assert_non_null(strstr(c.text, "no tolerance given"));
	/* within a tolerance of 1e-12 of the curve's scale (2.5) */
	reference_compare(&a, &b, 1e-12, 0.1, &c);
	assert_int_equal(c.verdict, REF_WITHIN);
	assert_true(c.loss_diff > 0 && c.loss_diff < 1e-15);
	/* a parameter off by 1e-6 of its scale: over 1e-9, within 1e-5 */
	b.loss[1] = a.loss[1];
	b.params[0] += 4e-6;
	reference_compare(&a, &b, 1e-9, 0.1, &c);
	assert_int_equal(c.verdict, REF_DIFFERENT);
	assert_int_equal(c.first_param, 0);
	assert_non_null(strstr(c.text, "the loss curve is the same, parameter 0 differs"));
	reference_compare(&a, &b, 1e-5, 0.1, &c);
	assert_int_equal(c.verdict, REF_WITHIN);
	/* the same numbers, steps 50% slower: over a slack of 10%, not of 60% */
	b.params[0] = a.params[0];
	a.step_s = 0.02;
	b.step_s = 0.03;
	reference_compare(&a, &b, 0, 0.1, &c);
	assert_int_equal(c.verdict, REF_SLOWER);
	assert_true(c.step_ratio > 1.49 && c.step_ratio < 1.51);
	assert_non_null(strstr(c.text, "50% slower, over the 10% allowed"));
	reference_compare(&a, &b, 0, 0.6, &c);
	assert_int_equal(c.verdict, REF_SAME);
	/* steps under 10 ms are too short to judge */
	a.step_s = 0.005;
	b.step_s = 0.05;
	reference_compare(&a, &b, 0, 0.1, &c);
	assert_int_equal(c.verdict, REF_SAME);
	json_t *cp = reference_compare_pack(&c);
	assert_string_equal(json_string_value(json_object_get(cp, "verdict")), "same");
	json_decref(cp);
	reference_release(&b);
	/* another run: other steps */
	json_t *k = json_loads("{\"loss\": [2.5, 1.25], \"params\": [0.5, -4.0]}", 0, NULL);
	assert_int_equal(reference_unpack(k, &b, &err), 0);
	reference_compare(&a, &b, 0.5, 0.1, &c);
	assert_int_equal(c.verdict, REF_SHAPE);
	assert_non_null(strstr(c.text, "3 steps and 2 parameters on the old stack, 2 and 2"));
	reference_release(&b);
	json_decref(k);
	/* bad records say what is wrong */
	const char *bad[][2] = {
		{"{\"params\": [1]}", "loss: must be an array of 1 to 2000 numbers"},
		{"{\"loss\": [], \"params\": [1]}", "loss: must be an array of 1 to 2000"},
		{"{\"loss\": [1, \"x\"], \"params\": [1]}", "loss[1]: must be a finite number"},
		{"{\"loss\": [1]}", "params: must be an array of 1 to 1024 numbers"},
		{"{\"loss\": [1], \"params\": [1], \"step_s\": -1}", "step_s: must be a number"},
		{"{\"loss\": [1], \"params\": [1], \"lr\": 3}", "lr"},
		{"[1, 2]", "must be a JSON object"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *x = json_loads(bad[i][0], JSON_DECODE_ANY, NULL);
		assert_non_null(x);
		assert_true(reference_unpack(x, &b, &err) < 0);
		if (!strstr(err.text, bad[i][1]))
			fail_msg("%s: %s", bad[i][0], err.text);
		json_decref(x);
	}
	json_t *big = json_pack("{s:[f], s:o}", "loss", 1.0, "params", json_array());
	for (int i = 0; i < REF_MAX_PARAMS + 1; i++)
		json_array_append_new(json_object_get(big, "params"), json_real(i));
	assert_true(reference_unpack(big, &b, &err) < 0);
	assert_non_null(strstr(err.text, "give a summary"));
	json_decref(big);
	reference_release(&a);
	json_decref(j);
}

/* A node's software stack: its fields, what changed, and its way through
 * the inventory and the heartbeat. */
static void test_node_stack(void **state)
{
	(void)state;
	struct node_stack a = {0}, b;
	node_stack_set(&a, 0, "6.1.0-18-amd64");
	node_stack_set(&a, 1, "Debian GNU/Linux 12 (bookworm)");
	node_stack_set(&a, 2, "550.54.15");
	node_stack_set(&a, 3, "12.4");
	node_stack_set(&a, 4, "2.21.5");
	node_stack_set(&a, 5, "96.00.89.00.01");
	node_stack_set(&a, 6, "mlx5_0 28.39.1002");
	node_stack_set(&a, 7, "0.2.0");
	assert_string_equal(node_stack_field_name(6), "nic_fw");
	assert_string_equal(a.driver, "550.54.15");
	/* a value past its field is cut, not overrun */
	node_stack_set(&b, 3, "0123456789abcdefghij");
	assert_int_equal(strlen(b.cuda), sizeof(b.cuda) - 1);
	b = a;
	char d[256];
	assert_true(node_stack_same(&a, &b));
	assert_false(node_stack_diff(&a, &b, d, sizeof(d)));
	assert_string_equal(d, "");
	node_stack_set(&b, 0, "6.1.0-20-amd64");
	node_stack_set(&b, 2, "555.42.02");
	assert_false(node_stack_same(&a, &b));
	assert_true(node_stack_diff(&a, &b, d, sizeof(d)));
	assert_string_equal(d, "kernel 6.1.0-18-amd64 -> 6.1.0-20-amd64; driver 550.54.15 -> "
			       "555.42.02");
	/* a field said for the first time is no change */
	struct node_stack none = {0};
	assert_false(node_stack_diff(&none, &a, d, sizeof(d)));
	/* cut to the room there is */
	char small[12];
	assert_true(node_stack_diff(&a, &b, small, sizeof(small)));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	node_stack_line(&a, d, sizeof(d));
	assert_non_null(strstr(d, "kernel 6.1.0-18-amd64, os Debian GNU/Linux 12 (bookworm)"));
	/* a stack's label (tenk rollout --stack): the fields it names */
	struct node_stack want;
	struct tk_error lerr;
	assert_int_equal(
		node_stack_label_parse("driver=550.54.15,kernel=6.1.0-18-amd64", &want, &lerr), 0);
	assert_true(node_stack_has(&a, &want));
	assert_false(node_stack_has(&b, &want)); /* b's kernel and driver are newer */
	assert_true(node_stack_label_parse("gpu=1", &want, &lerr) < 0);
	assert_non_null(strstr(lerr.text, "no field \"gpu\"; fields: kernel, os"));
	assert_true(node_stack_label_parse("driver", &want, &lerr) < 0);
	assert_non_null(strstr(lerr.text, "is not FIELD=VALUE"));
	assert_true(node_stack_label_parse("", &want, &lerr) < 0);
	/* JSON both ways; an unknown field is a newer agent's, ignored */
	json_t *j = node_stack_pack(&a);
	json_object_set_new(j, "bmc_fw", json_string("1.2"));
	struct node_stack back;
	struct tk_error err;
	assert_int_equal(node_stack_unpack(j, NULL, &back, &err), 0);
	assert_true(node_stack_same(&a, &back));
	json_object_set_new(j, "kernel", json_integer(6));
	assert_true(node_stack_unpack(j, NULL, &back, &err) < 0);
	assert_non_null(strstr(err.text, "kernel"));
	json_decref(j);
	/* through the inventory */
	struct node_inventory inv = {.name = "n1", .cpus = 4, .has_stack = true, .stack = a};
	j = node_inventory_pack(&inv);
	struct node_inventory inv2;
	assert_int_equal(node_inventory_unpack(j, &inv2, &err), 0);
	assert_true(inv2.has_stack && node_stack_same(&inv2.stack, &a));
	json_object_del(j, "stack");
	assert_int_equal(node_inventory_unpack(j, &inv2, &err), 0);
	assert_false(inv2.has_stack);
	json_object_set_new(j, "stack", json_string("6.1"));
	assert_true(node_inventory_unpack(j, &inv2, &err) < 0);
	assert_string_equal(err.text, "stack: must be an object of strings");
	json_decref(j);
	/* and the heartbeat, when it changed */
	struct wire_heartbeat hb = {.node = "n1", .agent_id = "0123456789abcdef"};
	j = wire_heartbeat_pack(&hb);
	assert_null(json_object_get(j, "stack"));
	json_decref(j);
	hb.has_stack = true;
	hb.stack = b;
	j = wire_heartbeat_pack(&hb);
	struct wire_heartbeat hb2;
	assert_int_equal(wire_heartbeat_unpack(j, &hb2, &err), 0);
	assert_true(hb2.has_stack && node_stack_same(&hb2.stack, &b));
	wire_heartbeat_release(&hb2);
	json_decref(j);
}

static void test_goodput_fields(void **state)
{
	(void)state;
	struct task_event ev = {.job = 3,
				.attempt = 1,
				.type = TASK_EVENT_CHECKPOINT,
				.at_ms = 5,
				.step = 7,
				.dur_ms = 40,
				.write_ms = 1234};
	snprintf(ev.tag, sizeof(ev.tag), "step-7");
	snprintf(ev.digest, sizeof(ev.digest), "sha256:%064d", 1);
	json_t *o = task_event_pack(&ev);
	struct task_event back;
	struct tk_error err;
	assert_int_equal(task_event_unpack(o, &back, &err), 0);
	assert_int_equal(back.write_ms, 1234);
	json_object_del(o, "write_ms");
	assert_int_equal(task_event_unpack(o, &back, &err), 0);
	assert_int_equal(back.write_ms, 0);
	json_object_set_new(o, "write_ms", json_integer(-1));
	assert_true(task_event_unpack(o, &back, &err) < 0);
	assert_non_null(strstr(err.text, "write_ms"));
	json_decref(o);
	struct ckpt c = {.step = 7, .attempt = 1, .nnodes = 1, .write_ms = 900};
	snprintf(c.tag, sizeof(c.tag), "step-7");
	c.digests = xcalloc(1, sizeof(*c.digests));
	o = ckpt_pack(&c);
	struct ckpt c2;
	assert_int_equal(ckpt_unpack(o, &c2, &err), 0);
	assert_int_equal(c2.write_ms, 900);
	ckpt_release(&c2);
	ckpt_release(&c);
	json_decref(o);
}

static void test_hostlist(void **state)
{
	char **v;
	int n;
	struct tk_error err;
	assert_int_equal(model_hostlist_parse("gpu[08-10],cpu3,r[1-2]n[1,3]", 100, &v, &n, &err),
			 0);
	const char *want[] = {"gpu08", "gpu09", "gpu10", "cpu3", "r1n1", "r1n3", "r2n1", "r2n3"};
	assert_int_equal(n, 8);
	for (int i = 0; i < n; i++) {
		assert_string_equal(v[i], want[i]);
		free(v[i]);
	}
	free(v);
	struct {
		const char *spec, *want;
	} bad[] = {
		{"a,,b", "\"a,,b\": an empty name"},
		{"n[1-3", "\"n[1-3\": a '[' without its ']'"},
		{"n[3-1]", "\"n[3-1]\": the range 3-1 ends before it starts"},
		{"n[x]", "\"n[x]\": [x] holds something other than numbers"},
		{"n1,n1", "\"n1,n1\" names n1 twice"},
		{"n[0-100]", "\"n[0-100]\" names more than 100 nodes"},
		{"a b", "\"a b\": \"a b\" is not a node name"},
		{"n[]", "\"n[]\": an empty [] range"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_true(model_hostlist_parse(bad[i].spec, 100, &v, &n, &err) < 0);
		if (strncmp(err.text, bad[i].want, strlen(bad[i].want)) != 0)
			fail_msg("\"%s\": got \"%s\"", bad[i].spec, err.text);
	}
	/* a request keeps them through its JSON form */
	json_t *j = parse("{" BASE ", \"nodelist\": [\"n1\", \"n2\"], \"exclude\": [\"n3\"],"
			  "\"exclusive\": true, \"nodes\": 2}");
	struct job_request r, r2;
	assert_int_equal(job_request_unpack(j, &r, &err), 0);
	assert_int_equal(r.nnodelist, 2);
	assert_int_equal(r.nexclude, 1);
	assert_true(r.exclusive);
	json_t *p1 = job_request_pack(&r);
	assert_int_equal(job_request_unpack(p1, &r2, &err), 0);
	json_t *p2 = job_request_pack(&r2);
	assert_true(json_equal(p1, p2));
	assert_true(json_equal(json_object_get(p1, "nodelist"), json_object_get(j, "nodelist")));
	json_decref(p1);
	json_decref(p2);
	json_decref(j);
	job_request_release(&r);
	job_request_release(&r2);
}

/* A request with every field filled (but pty, which goes with no image). */
static json_t *full_request(void)
{
	char name[MODEL_NAME_MAX], big[1001], path[301];
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	memset(path, 'p', sizeof(path) - 1);
	path[sizeof(path) - 1] = 0;
	json_t *j = json_pack(
		"{s:s, s:[s, s, s], s:s+, s:{s:s, s:s}, s:s+, s:i, s:i, s:i, s:[s, s], s:i, s:I,"
		" s:I, s:I, s:i, s:s, s:s, s:I, s:f, s:i, s:b, s:s+, s:[s++], s:s, s:[{s:I, s:s},"
		" {s:I}], s:I, s:s, s:s++, s:b, s:{s:i, s:I}, s:s, s:[s, s, s], s:[s], s:b, s:b,"
		" s:I, s:s, s:s, s:i}",
		"name", name, "command", "python", big, big, "cwd", "/home/u/", path, "env", "A",
		big, "B", path, "output", "/out/", path, "nodes", 2, "tasks_per_node", 4,
		"gpus_per_task", 2, "gpu_types", "H100", "H200", "cpus_per_task", 8, "mem_mib",
		(json_int_t)1000, "time_limit_s", (json_int_t)3600, "grace_s", (json_int_t)30,
		"requeue", 3, "class", "cccccccccccccccccccccccccccccccccccccccccccccccccccccc",
		"queue", "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq",
		"gpu_mem_mib", (json_int_t)80000, "gpu_tflops", 300.5, "switches", 2, "mixed_types",
		1, "image", "localhost/train:", "v1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"mounts", "/data/", path, ":/data:ro", "ckpt_marker", "dcp", "after", "job",
		(json_int_t)4, "when", "any", "job", (json_int_t)5, "begin_ms",
		(json_int_t)1796000000000, "comment", big, "error", "/err/", path, "-%j",
		"slurm_env", 1, "signal", "number", 10, "before_s", (json_int_t)90, "array",
		"0-999%50", "nodelist", "node1", "node2", "node3", "exclude", "node4", "exclusive",
		1, "attempt_marks", 0, "stall_after_s", (json_int_t)600, "on_stall", "requeue",
		"restart", "in-place", "spares", 2);
	assert_non_null(j);
	json_object_set_new(j, "constraint", json_string("fabric=ib&rack!=r07|tier=top"));
	json_object_set_new(j, "tolerate", json_string("inference,dev"));
	json_object_set_new(j, "pool", json_string("general,top"));
	json_object_set_new(j, "spread", json_string("rack:2"));
	json_object_set_new(j, "within", json_string("dc"));
	json_object_set_new(j, "ckpt_signal", json_pack("{s:i, s:i}", "number", 12, "wait_s", 30));
	json_object_set_new(j, "nodes_max", json_integer(4));
	json_object_set_new(j, "nccl_check", json_true());
	json_object_set_new(j, "preemptible_any", json_true());
	json_object_set_new(j, "service", json_string("chat-7b"));
	return j;
}

static size_t json_len(const struct job_request *r)
{
	json_t *p = job_request_pack(r);
	char *text = json_dumps(p, JSON_COMPACT);
	size_t n = strlen(text);
	free(text);
	json_decref(p);
	return n;
}

/* The table of a request's fields (model.h) is the request: the packer
 * writes every key of it, and what a request weighs counts every field,
 * each one about as much as it adds to the packed JSON. */
static void test_request_table(void **state)
{
	json_t *j = full_request();
	struct job_request r;
	struct tk_error err;
	if (job_request_unpack(j, &r, &err) < 0)
		fail_msg("the full request: %s", err.text);
	json_t *p = job_request_pack(&r);
	int n = 0;
	for (const char *const *k = job_request_keys; *k; k++, n++)
		if (strcmp(*k, "pty") != 0 && strcmp(*k, "probe") != 0 && !json_object_get(p, *k))
			fail_msg("the packed request has no \"%s\"", *k);
	assert_int_equal((int)json_object_size(p), n - 2);
	json_decref(p);
	json_t *pty = parse("{" BASE ", \"pty\": true}");
	struct job_request rp;
	assert_int_equal(job_request_unpack(pty, &rp, &err), 0);
	p = job_request_pack(&rp);
	assert_true(json_is_true(json_object_get(p, "pty")));
	json_decref(p);
	json_decref(pty);
	job_request_release(&rp);
	/* a probe: one task on one node; its defaults filled in */
	json_t *pr = parse("{" BASE ", \"probe\": {\"path\": \"/healthz\", \"interval_s\": 1.5}}");
	assert_int_equal(job_request_unpack(pr, &rp, &err), 0);
	assert_non_null(rp.probe);
	assert_string_equal(rp.probe->path, "/healthz");
	assert_int_equal(rp.probe->interval_ms, 1500);
	assert_int_equal(rp.probe->timeout_ms, 750);
	assert_int_equal(rp.probe->threshold, 3);
	assert_int_equal(rp.probe->start_ms, 300000);
	p = job_request_pack(&rp);
	json_t *pp = json_object_get(p, "probe");
	assert_true(json_real_value(json_object_get(pp, "interval_s")) == 1.5);
	assert_true(json_real_value(json_object_get(pp, "timeout_s")) == 0.75);
	assert_int_equal(json_integer_value(json_object_get(pp, "start_s")), 300);
	struct job_request rq;
	assert_int_equal(job_request_unpack(p, &rq, &err), 0);
	assert_memory_equal(rq.probe, rp.probe, sizeof(*rp.probe));
	job_request_release(&rq);
	json_decref(p);
	json_decref(pr);
	job_request_release(&rp);
	static const struct {
		const char *probe, *says;
	} bad[] = {
		{"\"nodes\": 2, \"probe\": {}", "one task on one node"},
		{"\"probe\": {\"path\": \"healthz\"}", "probe.path: must start with '/'"},
		{"\"probe\": {\"path\": \"/a b\"}", "no spaces"},
		{"\"probe\": {\"interval_s\": 2, \"timeout_s\": 2}", "must be under interval_s"},
		{"\"probe\": {\"threshold\": 0}", "threshold"},
		{"\"probe\": {\"every\": 2}", "every"},
		{"\"service\": \"a b\"", "service: \"a b\" is not a valid name"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char text[512];
		snprintf(text, sizeof(text), "{" BASE ", %s}", bad[i].probe);
		json_t *b = parse(text);
		assert_true(job_request_unpack(b, &rp, &err) < 0);
		if (!strstr(err.text, bad[i].says))
			fail_msg("%s: said \"%s\", not \"%s\"", bad[i].probe, err.text,
				 bad[i].says);
		json_decref(b);
	}

	/* the whole: within the struct and a few bytes a field of the JSON */
	int64_t bytes = job_request_bytes(&r), len = (int64_t)json_len(&r);
	const int64_t overhead = (int64_t)sizeof(struct job_request) + 24 * n;
	if (bytes < len - overhead || bytes > len + overhead)
		fail_msg("a full request weighs %lld bytes, its JSON has %lld (at most %lld apart)",
			 (long long)bytes, (long long)len, (long long)overhead);
	/* field by field: leaving one out takes about what its JSON had */
	for (const char *const *k = job_request_keys; *k; k++) {
		if (strcmp(*k, "command") == 0 || strcmp(*k, "cwd") == 0 ||
		    strcmp(*k, "pty") == 0 || strcmp(*k, "probe") == 0)
			continue; /* required, or in a request of its own */
		/* what goes with it: mounts are for an image, and what asks
		 * about accelerators for a job with some */
		static const char *const with[][4] = {
			{"image", "mounts"},
			{"gpus_per_task", "gpu_mem_mib", "gpu_tflops", "mixed_types"},
		};
		json_t *less = json_deep_copy(j);
		json_object_del(less, *k);
		int64_t slack = (int64_t)strlen(*k) + 8 + 8 * 4; /* a key, up to 4 elements */
		for (size_t w = 0; w < ARRAY_SIZE(with); w++)
			for (int d = 1; d < 4 && strcmp(with[w][0], *k) == 0 && with[w][d]; d++) {
				json_object_del(less, with[w][d]);
				slack += (int64_t)strlen(with[w][d]) + 24;
			}
		struct job_request r2;
		if (job_request_unpack(less, &r2, &err) < 0)
			fail_msg("the full request without %s: %s", *k, err.text);
		int64_t dlen = len - (int64_t)json_len(&r2);
		int64_t dbytes = bytes - job_request_bytes(&r2);
		if (dbytes < dlen - slack || dbytes > dlen + slack)
			fail_msg("\"%s\": its JSON has %lld bytes, its weight counts %lld", *k,
				 (long long)dlen, (long long)dbytes);
		job_request_release(&r2);
		json_decref(less);
	}
	/* what update may change, and says it may */
	assert_true(job_request_updatable("time_limit_s") && job_request_updatable("nodelist"));
	assert_false(job_request_updatable("command") || job_request_updatable("image") ||
		     job_request_updatable("nope"));
	assert_non_null(strstr(job_request_updatable_list(), "name, nodes, tasks_per_node"));
	assert_null(strstr(job_request_updatable_list(), "command"));
	job_request_release(&r);
	json_decref(j);
}

static void test_request_daily_fields(void **state)
{
	json_t *j = parse("{" BASE ", \"after\": [{\"job\": 4}, {\"job\": 7, \"when\": \"any\"}],"
			  "\"begin_ms\": 1796000000000, \"comment\": \"c\", \"error\": \"e-%j\","
			  "\"slurm_env\": true, \"signal\": {\"number\": 10, \"before_s\": 90},"
			  "\"ckpt_signal\": {\"number\": 12},"
			  "\"array\": \"0-9:3,20%2\", \"time_limit_s\": 600}");
	struct job_request r, r2;
	struct tk_error err;
	assert_int_equal(job_request_unpack(j, &r, &err), 0);
	assert_int_equal(r.nafter, 2);
	assert_int_equal(r.after[0].job, 4);
	assert_int_equal(r.after[0].when, DEP_OK); /* the default, as afterok */
	assert_int_equal(r.after[1].when, DEP_ANY);
	assert_int_equal(r.signal, 10);
	assert_int_equal(r.signal_before_s, 90);
	assert_int_equal(r.ckpt_signal, 12);
	assert_int_equal(r.ckpt_signal_s, 30); /* the default wait */
	assert_true(r.slurm_env);
	json_t *p1 = job_request_pack(&r);
	assert_int_equal(job_request_unpack(p1, &r2, &err), 0);
	json_t *p2 = job_request_pack(&r2);
	assert_true(json_equal(p1, p2));
	json_decref(p1);
	json_decref(p2);
	job_request_release(&r);
	job_request_release(&r2);
	json_decref(j);

	int *idx, n, cap;
	assert_int_equal(model_array_parse("0-9:3,20%2", &idx, &n, &cap, &err), 0);
	assert_int_equal(n, 5);
	assert_int_equal(cap, 2);
	int want[] = {0, 3, 6, 9, 20};
	for (int i = 0; i < 5; i++)
		assert_int_equal(idx[i], want[i]);
	free(idx);
	assert_int_equal(model_array_parse("7", &idx, &n, &cap, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(idx[0], 7);
	assert_int_equal(cap, 0);
	free(idx);
	assert_true(model_array_parse("1-3,2", &idx, &n, &cap, &err) < 0);
	assert_string_equal(err.text, "array: index 2 is listed twice");
	assert_true(model_array_parse("", &idx, &n, &cap, &err) < 0);
	assert_true(model_array_parse("1,,2", &idx, &n, &cap, &err) < 0);
	assert_true(model_array_parse("3:2", &idx, &n, &cap, &err) < 0);
	struct {
		const char *spec, *want;
	} bad[] = {
		{"5-2", "array: \"5-2\": the range ends"},
		{"1,x", "array: \"x\" is not N, N-M"},
		{"0-3%0", "array: after % comes how many"},
		{"0-200000", "array: more than 100000 elements"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_true(model_array_parse(bad[i].spec, &idx, &n, &cap, &err) < 0);
		if (strncmp(err.text, bad[i].want, strlen(bad[i].want)) != 0)
			fail_msg("\"%s\": got \"%s\"", bad[i].spec, err.text);
	}

	/* a job's hold and array fields round trip through the store's form */
	struct job job = {.id = 12,
			  .state = JOB_PENDING,
			  .exit_code = -1,
			  .held = true,
			  .array_job = 10,
			  .array_index = 2,
			  .array_cap = 5,
			  .array_count = 30};
	snprintf(job.owner, sizeof(job.owner), "alice");
	j = parse("{" BASE "}");
	assert_int_equal(job_request_unpack(j, &job.req, &err), 0);
	json_decref(j);
	p1 = job_pack(&job);
	struct job back;
	assert_int_equal(job_unpack(p1, &back, &err), 0);
	assert_true(back.held);
	assert_int_equal(back.array_job, 10);
	assert_int_equal(back.array_index, 2);
	assert_int_equal(back.array_cap, 5);
	assert_int_equal(back.array_count, 30);
	json_decref(p1);
	job_release(&job);
	job_release(&back);
}

static void test_request_limits(void **state)
{
	/* a command over the total argument limit is refused */
	json_t *j = parse("{\"cwd\": \"/x\"}");
	json_t *cmd = json_array();
	char *big = xmalloc(MODEL_MAX_ARG_BYTES / 2);
	memset(big, 'a', MODEL_MAX_ARG_BYTES / 2 - 1);
	big[MODEL_MAX_ARG_BYTES / 2 - 1] = '\0';
	for (int i = 0; i < 3; i++)
		json_array_append_new(cmd, json_string(big));
	json_object_set_new(j, "command", cmd);
	struct job_request r;
	struct tk_error err;
	assert_int_equal(job_request_unpack(j, &r, &err), -E2BIG);
	assert_non_null(strstr(err.text, "command: at most"));
	free(big);
	json_decref(j);
}

static void test_job_roundtrip(void **state)
{
	json_t *rq = parse("{" BASE ", \"nodes\": 2, \"tasks_per_node\": 2, \"gpus_per_task\": 2}");
	struct job job;
	memset(&job, 0, sizeof(job));
	struct tk_error err;
	assert_int_equal(job_request_unpack(rq, &job.req, &err), 0);
	job.id = 42;
	snprintf(job.owner, sizeof(job.owner), "alice");
	job.state = JOB_RUNNING;
	job.submit_ms = 1000;
	job.exit_code = -1;
	job.nattempts = 1;
	job.attempts = xcalloc(1, sizeof(struct attempt));
	struct attempt *a = &job.attempts[0];
	a->number = 1;
	a->start_ms = 2000;
	snprintf(a->master_addr, sizeof(a->master_addr), "10.0.0.1");
	a->master_port = 29500;
	a->nnodes = 2;
	a->nodes = xcalloc(2, sizeof(*a->nodes));
	snprintf(a->nodes[0].name, sizeof(a->nodes[0].name), "n1");
	snprintf(a->nodes[1].name, sizeof(a->nodes[1].name), "n2");
	for (int n = 0; n < 2; n++) {
		a->nodes[n].ndev = 4;
		a->nodes[n].milli = MODEL_MILLI;
		for (int d = 0; d < 4; d++)
			a->nodes[n].devs[d] = d + 4;
	}
	a->ntasks = 4;
	a->tasks = xcalloc(4, sizeof(*a->tasks));
	a->tasks[2].state = TASK_EXITED;
	a->tasks[2].exit_code = 3;
	/* a committed checkpoint, one half-uploaded, and the restore of the first */
	static const char dg[] =
		"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	struct ckpt c = {.tag = "step-10", .step = 10, .attempt = 1, .nnodes = 2, .bytes = 99};
	c.digests = xcalloc(2, sizeof(*c.digests));
	snprintf(c.digests[0], sizeof(c.digests[0]), "%s", dg);
	snprintf(c.digests[1], sizeof(c.digests[1]), "%s", dg);
	job.ckpts = xcalloc(1, sizeof(*job.ckpts));
	job.nckpts = 1;
	ckpt_copy(&job.ckpts[0], &c);
	snprintf(c.tag, sizeof(c.tag), "step-20");
	c.digests[1][0] = '\0';
	a->pend = xcalloc(1, sizeof(*a->pend));
	a->npend = 1;
	a->pend[0] = c;
	snprintf(a->restore_tag, sizeof(a->restore_tag), "step-10");
	a->restore_step = 10;
	a->restore_attempt = 1;
	a->nodes[1].restore = RESTORE_DONE;
	a->nodes[1].restore_bytes = 7;
	/* --nccl-check: what NCCL's log said on n1 */
	a->nodes[0].nccl[NCCL_TR_SOCKET] = 2;
	a->nodes[0].nccl[NCCL_TR_SHM] = 1;
	a->nodes[0].nccl_fallback = true;
	snprintf(a->nodes[0].nccl_network, sizeof(a->nodes[0].nccl_network), "Socket");
	snprintf(a->nodes[0].nccl_line, sizeof(a->nodes[0].nccl_line), "Channel 00/0 : via x");
	job.las_from = 2; /* promoted while it waited after attempt 1 */
	json_t *p1 = job_pack(&job);
	struct job back;
	assert_int_equal(job_unpack(p1, &back, &err), 0);
	json_t *p2 = job_pack(&back);
	assert_true(json_equal(p1, p2));
	assert_int_equal(back.attempts[0].nodes[1].devs[3], 7);
	assert_int_equal(back.attempts[0].tasks[2].exit_code, 3);
	assert_int_equal(job_current_attempt(&back)->number, 1);
	assert_int_equal(back.nckpts, 1);
	assert_string_equal(back.ckpts[0].digests[1], dg);
	assert_int_equal(back.attempts[0].npend, 1);
	assert_string_equal(back.attempts[0].pend[0].digests[1], "");
	assert_int_equal(back.attempts[0].nodes[1].restore, RESTORE_DONE);
	assert_int_equal(back.attempts[0].nodes[0].restore, RESTORE_WAITING);
	assert_string_equal(back.attempts[0].restore_tag, "step-10");
	assert_int_equal(back.las_from, 2);
	assert_int_equal(back.attempts[0].nodes[0].nccl[NCCL_TR_SOCKET], 2);
	assert_true(back.attempts[0].nodes[0].nccl_fallback);
	assert_string_equal(back.attempts[0].nodes[0].nccl_line, "Channel 00/0 : via x");
	assert_null(json_object_get(
		json_array_get(json_object_get(json_array_get(json_object_get(p2, "attempts"), 0),
					       "nodes"),
			       1),
		"nccl"));
	/* a corrupted document is refused with the field named */
	json_object_set_new(json_array_get(json_object_get(p1, "attempts"), 0), "master_port",
			    json_integer(70000));
	struct job bad;
	assert_true(job_unpack(p1, &bad, &err) < 0);
	assert_string_equal(err.text,
			    "attempts[0].master_port: must be an integer from 0 to 65535, "
			    "got 70000");
	json_decref(p1);
	json_decref(p2);
	job_release(&job);
	job_release(&back);
	json_decref(rq);
}

static void test_states(void **state)
{
	enum job_state s;
	for (int i = 0; i < JOB_STATE_MAX; i++) {
		assert_int_equal(job_state_parse(job_state_name((enum job_state)i), &s), 0);
		assert_int_equal(s, i);
	}
	assert_int_equal(job_state_parse("running", &s), 0);
	assert_int_equal(s, JOB_RUNNING);
	assert_int_equal(job_state_parse("nope", &s), -EINVAL);
	assert_false(job_state_final(JOB_RUNNING));
	assert_true(job_state_final(JOB_TIMEOUT));
}

static void test_fake_accels(void **state)
{
	struct catalogue c;
	catalogue_init(&c);
	struct accel a[MODEL_MAX_ACCELS];
	int n;
	struct tk_error err;
	assert_int_equal(model_fake_accels("8xH100", &c, "n1", a, MODEL_MAX_ACCELS, &n, &err), 0);
	assert_int_equal(n, 8);
	assert_string_equal(a[7].model, "H100");
	assert_int_equal(a[7].index, 7);
	assert_int_equal(a[0].mem_mib, 81559);
	assert_int_equal(
		model_fake_accels("4xa100-80gb,2xT4", &c, "n1", a, MODEL_MAX_ACCELS, &n, &err), 0);
	assert_int_equal(n, 6);
	assert_string_equal(a[0].model, "A100-80GB");
	assert_string_equal(a[5].model, "T4");
	assert_true(model_fake_accels("4xA100", &c, "n1", a, MODEL_MAX_ACCELS, &n, &err) < 0);
	assert_non_null(strstr(err.text, "unknown model \"A100\"; known: "));
	assert_true(model_fake_accels("H100", &c, "n1", a, MODEL_MAX_ACCELS, &n, &err) < 0);
	assert_true(model_fake_accels("0xH100", &c, "n1", a, MODEL_MAX_ACCELS, &n, &err) < 0);
	assert_true(model_fake_accels("65xH100", &c, "n1", a, MODEL_MAX_ACCELS, &n, &err) < 0);
	assert_true(model_fake_accels("40xH100,40xT4", &c, "n1", a, MODEL_MAX_ACCELS, &n, &err) <
		    0);
	catalogue_release(&c);
}

static void test_catalogue(void **state)
{
	struct catalogue c;
	catalogue_init(&c);
	const char *need[] = {"H200", "H100", "H800", "A100-80GB", "A100-40GB", "A800",
			      "L40S", "A10",  "T4",   "V100",	   "P100",	"RTX4090"};
	for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
		const struct catalogue_entry *e = catalogue_find(&c, need[i]);
		assert_non_null(e);
		assert_true(e->mem_mib > 0 && e->tflops > 0 && e->price_per_hour > 0);
	}
	struct tk_error err;
	assert_int_equal(
		catalogue_load_json(&c,
				    "{\"models\": [{\"name\": \"H100\", \"price_per_hour\": "
				    "2.5}, {\"name\": \"X1\", \"mem_mib\": 1024, "
				    "\"tflops\": 10}]}",
				    &err),
		0);
	assert_true(catalogue_find(&c, "H100")->price_per_hour == 2.5);
	assert_int_equal(catalogue_find(&c, "H100")->mem_mib, 81559); /* kept */
	assert_int_equal(catalogue_find(&c, "x1")->mem_mib, 1024);
	size_t n = c.n;
	/* a bad file changes nothing and names the field */
	assert_true(catalogue_load_json(&c,
					"{\"models\": [{\"name\": \"Y\"}, {\"name\": \"Z\", "
					"\"tflops\": \"fast\"}]}",
					&err) < 0);
	assert_string_equal(err.text, "models[1].tflops: must be a number from 0 to 1e+06, got a "
				      "string");
	assert_int_equal(c.n, n);
	assert_null(catalogue_find(&c, "Y"));
	assert_true(catalogue_load_json(&c, "{\"models\": [}", &err) < 0);
	assert_non_null(strstr(err.text, "line 1"));
	/* weights: units in quotas, by default peak rate against an H100's */
	assert_true(catalogue_weight(catalogue_find(&c, "H100")) == 1);
	assert_true(fabs(catalogue_weight(catalogue_find(&c, "A100-80GB")) - 312 / 989.4) < 1e-9);
	assert_int_equal(catalogue_load_json(&c,
					     "{\"models\": [{\"name\": \"T4\", \"weight\": 0.5}, "
					     "{\"name\": \"X1\", \"price_per_hour\": 1}]}",
					     &err),
			 0);
	assert_true(catalogue_weight(catalogue_find(&c, "T4")) == 0.5);
	assert_true(fabs(catalogue_weight(catalogue_find(&c, "X1")) - 10 / 989.4) < 1e-9);
	assert_true(catalogue_load_json(&c, "{\"models\": [{\"name\": \"T4\", \"weight\": 0}]}",
					&err) < 0);
	assert_non_null(strstr(err.text, "models[0].weight"));
	catalogue_release(&c);
	/* a queue's limits beyond accelerators: set, packed, read back, lifted */
	struct queue_spec q;
	memset(&q, 0, sizeof(q));
	snprintf(q.name, sizeof(q.name), "vision");
	q.quota_milli = q.borrow_milli = -1;
	q.weight = 1;
	json_t *ch = json_pack("{s:{s:i, s:f, s:i, s:i}, s:{s:i}}", "limits", "H100", 64, "units",
			       12.5, "cpus", 512, "mem_mib", 1 << 20, "borrow_limits", "H100", 16);
	assert_int_equal(queue_spec_update(&q, ch, &err), 0);
	json_decref(ch);
	assert_int_equal(q.ndims, 4);
	assert_true(q.dims[0].quota == 64000 && q.dims[0].borrow == 16000);
	assert_true(q.dims[1].quota == 12500 && q.dims[2].quota == 512);
	json_t *packed = queue_spec_pack(&q);
	struct queue_spec back;
	assert_int_equal(queue_spec_unpack(packed, &back, &err), 0);
	assert_int_equal(back.ndims, 4);
	assert_memory_equal(back.dims, q.dims, sizeof(q.dims[0]) * 4);
	json_decref(packed);
	ch = json_pack("{s:{s:n}}", "limits", "units");
	assert_int_equal(queue_spec_update(&q, ch, &err), 0);
	json_decref(ch);
	assert_int_equal(q.ndims, 3);
	static const char *const bad[][2] = {
		{"{\"limits\": [1]}", "limits: must be an object"},
		{"{\"limits\": {\"H 100\": 1}}", "limits.H 100: not a model's name"},
		{"{\"limits\": {\"H100\": -1}}", "limits.H100: must be a number from 0"},
		{"{\"borrow_limits\": {\"T4\": 1}}",
		 "borrow_limits.T4: the queue has no limit of T4"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		ch = json_loads(bad[i][0], 0, NULL);
		struct queue_spec was = q;
		assert_true(queue_spec_update(&q, ch, &err) < 0);
		assert_non_null(strstr(err.text, bad[i][1]));
		assert_memory_equal(&was, &q, sizeof(q));
		json_decref(ch);
	}
}

static void test_node_record(void **state)
{
	struct catalogue c;
	catalogue_init(&c);
	struct node_record r;
	memset(&r, 0, sizeof(r));
	snprintf(r.inv.name, sizeof(r.inv.name), "gpu-07");
	snprintf(r.inv.topology, sizeof(r.inv.topology), "spine1/leaf07");
	r.inv.cpus = 96;
	r.inv.mem_mib = 1 << 20;
	struct tk_error err;
	assert_int_equal(model_fake_accels("8xH200", &c, "gpu-07", r.inv.accel, MODEL_MAX_ACCELS,
					   &r.inv.naccel, &err),
			 0);
	r.drained = true;
	r.drain_source = DRAIN_FAULT;
	snprintf(r.drain_reason, sizeof(r.drain_reason), "bad fan");
	json_t *p = node_record_pack(&r);
	struct node_record back;
	assert_int_equal(node_record_unpack(p, &back, &err), 0);
	assert_memory_equal(&r, &back, sizeof(r));
	/* who drained it travels as an enum; one from before sources were
	 * kept is an operator's, whatever its reason says */
	assert_string_equal(json_string_value(json_object_get(p, "drain_source")), "fault");
	json_object_set_new(p, "drain_source", json_string("someone"));
	assert_true(node_record_unpack(p, &back, &err) < 0);
	assert_non_null(strstr(err.text, "drain_source: must be one of \"operator\", \"fault\""));
	json_object_del(p, "drain_source");
	json_object_set_new(p, "drain_reason", json_string("validate: interconnect: slow"));
	assert_int_equal(node_record_unpack(p, &back, &err), 0);
	assert_int_equal(back.drain_source, DRAIN_OPERATOR);
	json_object_set_new(p, "drained", json_false());
	assert_int_equal(node_record_unpack(p, &back, &err), 0);
	assert_int_equal(back.drain_source, DRAIN_NONE);
	json_object_set_new(json_object_get(p, "inventory"), "cpus", json_integer(0));
	assert_true(node_record_unpack(p, &back, &err) < 0);
	assert_string_equal(err.text, "inventory.cpus: must be an integer from 1 to 65536, got 0");
	json_decref(p);
	/* the last validation goes with it */
	r.verdict = VERDICT_FAIL;
	snprintf(r.verdict_layer, sizeof(r.verdict_layer), "interconnect");
	snprintf(r.verdict_reason, sizeof(r.verdict_reason), "pair_bandwidth 0.02 GB/s < 0.9");
	r.verdict_ms = 1700000000000;
	r.verdict_job = 12;
	r.verdict_checks = json_pack("[{s:s}]", "check", "pair_bandwidth");
	p = node_record_pack(&r);
	assert_int_equal(node_record_unpack(p, &back, &err), 0);
	assert_int_equal(back.verdict, VERDICT_FAIL);
	assert_string_equal(back.verdict_layer, "interconnect");
	assert_true(back.verdict_job == 12 && back.verdict_ms == r.verdict_ms);
	assert_true(json_equal(back.verdict_checks, r.verdict_checks));
	node_record_release(&back);
	json_object_set_new(json_object_get(p, "validation"), "verdict", json_string("maybe"));
	assert_true(node_record_unpack(p, &back, &err) < 0);
	assert_non_null(strstr(err.text, "validation.verdict"));
	json_object_set_new(json_object_get(p, "validation"), "verdict", json_string("pass"));
	json_object_set_new(json_object_get(p, "validation"), "checks", json_integer(3));
	assert_true(node_record_unpack(p, &back, &err) < 0);
	assert_non_null(strstr(err.text, "validation.checks"));
	json_decref(p);
	node_record_release(&r);
	/* its history: the newest MODEL_NODE_HISTORY events, oldest first */
	memset(&r.history, 0, sizeof(r.history));
	r.verdict = VERDICT_NONE;
	r.verdict_checks = NULL;
	for (int i = 0; i < MODEL_NODE_HISTORY + 4; i++) {
		struct node_event ev = {.at_ms = 1000 + i,
					.kind = i % 2 ? NODE_EV_TASKS_LOST : NODE_EV_LAUNCH_FAILED,
					.job = 7 + i,
					.attempt = 1 + i % 3};
		snprintf(ev.detail, sizeof(ev.detail), "failure %d", i);
		node_record_event(&r, &ev);
	}
	assert_int_equal(r.nhistory, MODEL_NODE_HISTORY);
	assert_int_equal(r.history[0].at_ms, 1004);
	assert_string_equal(r.history[MODEL_NODE_HISTORY - 1].detail, "failure 19");
	assert_true(node_event_is_failure(NODE_EV_FAULT) && !node_event_is_failure(NODE_EV_LEMON) &&
		    !node_event_is_failure(NODE_EV_RESUMED));
	r.drain_source = DRAIN_LEMON;
	p = node_record_pack(&r);
	assert_string_equal(json_string_value(json_object_get(p, "drain_source")), "lemon");
	assert_int_equal(node_record_unpack(p, &back, &err), 0);
	assert_int_equal(back.nhistory, MODEL_NODE_HISTORY);
	assert_memory_equal(r.history, back.history, sizeof(r.history));
	assert_int_equal(back.drain_source, DRAIN_LEMON);
	json_object_set_new(json_array_get(json_object_get(p, "history"), 2), "kind",
			    json_string("sneezed"));
	assert_true(node_record_unpack(p, &back, &err) < 0);
	assert_non_null(strstr(err.text, "history[2].kind"));
	json_decref(p);
	/* its windows (tenk reserve), with who they are for; a maintenance
	 * drain says so */
	r.nwindows = 2;
	memset(r.windows, 0, sizeof(r.windows));
	r.windows[0] = (struct node_window){.name = "fw", .start_ms = 5000, .end_ms = 9000};
	snprintf(r.windows[0].reason, sizeof(r.windows[0].reason), "firmware");
	r.windows[1] = (struct node_window){.name = "demo",
					    .start_ms = 9000,
					    .end_ms = 12000,
					    .users = "alice,bob",
					    .queue = "vip",
					    .by = "ops",
					    .made_ms = 4000};
	r.drain_source = DRAIN_MAINT;
	assert_true(node_window_maint(&r.windows[0]) && !node_window_maint(&r.windows[1]));
	p = node_record_pack(&r);
	assert_string_equal(json_string_value(json_object_get(p, "drain_source")), "maintenance");
	assert_int_equal(node_record_unpack(p, &back, &err), 0);
	assert_int_equal(back.nwindows, 2);
	assert_memory_equal(r.windows, back.windows, sizeof(r.windows));
	assert_int_equal(back.drain_source, DRAIN_MAINT);
	json_t *w1 = json_array_get(json_object_get(p, "windows"), 1);
	json_object_set_new(w1, "end_ms", json_integer(8000));
	assert_true(node_record_unpack(p, &back, &err) < 0);
	assert_string_equal(err.text, "windows[1].end_ms: must be after start_ms");
	json_object_set_new(w1, "end_ms", json_integer(12000));
	json_object_set_new(w1, "users", json_pack("[s, i]", "alice", 3));
	assert_true(node_record_unpack(p, &back, &err) < 0);
	assert_string_equal(err.text, "windows[1].users[1]: must be a user's name");
	json_decref(p);
	catalogue_release(&c);
}

/* Node labels: parsed, checked, sorted; constraints in Slurm's feature
 * syntax matched against them; the inventory and a request carry them. */
static void test_labels_and_constraints(void **state)
{
	char out[MODEL_LABELS_MAX];
	struct tk_error err;
	assert_int_equal(node_labels_parse("tier=top,fabric=ib,rack=r07", out, sizeof(out), &err),
			 3);
	assert_string_equal(out, "fabric=ib,rack=r07,tier=top");
	assert_int_equal(node_labels_parse("", out, sizeof(out), &err), 0);
	assert_string_equal(out, "");
	assert_int_equal(node_labels_parse("spare=", out, sizeof(out), &err), 1); /* empty value */
	assert_true(node_labels_parse("tier", out, sizeof(out), &err) < 0);
	assert_non_null(strstr(err.text, "\"tier\" is not KEY=VALUE"));
	assert_true(node_labels_parse("a=1,a=2", out, sizeof(out), &err) < 0);
	assert_non_null(strstr(err.text, "a is given twice"));
	assert_true(node_labels_parse("a b=1", out, sizeof(out), &err) < 0);
	assert_true(node_labels_parse("a=1,", out, sizeof(out), &err) < 0);
	assert_non_null(strstr(err.text, "trailing"));
	size_t vn;
	const char *v = node_labels_get("fabric=ib,rack=r07", "rack", 4, &vn);
	assert_true(v && vn == 3 && strncmp(v, "r07", 3) == 0);
	assert_null(node_labels_get("fabric=ib,rack=r07", "rac", 3, &vn));
	const char *L = "fabric=ib,rack=r07,tier=top";
	assert_true(job_constraint_match("fabric=ib", L));
	assert_true(job_constraint_match("fabric", L));
	assert_false(job_constraint_match("fabric=roce", L));
	assert_true(job_constraint_match("fabric=ib&tier=top", L));
	assert_false(job_constraint_match("fabric=ib&rack!=r07", L));
	assert_true(job_constraint_match("fabric=ib&rack!=r08", L));
	assert_true(job_constraint_match("gpu=h200|tier=top", L));
	assert_false(job_constraint_match("gpu=h200|tier=top&rack=r01", L)); /* & binds first */
	assert_true(job_constraint_match("nosuch!=x", L)); /* a label it lacks differs */
	assert_false(job_constraint_match("fabric", ""));
	assert_true(job_constraint_match(NULL, ""));
	assert_int_equal(job_constraint_check("fabric=ib&rack!=r07|tier=top", &err), 0);
	assert_true(job_constraint_check("fabric=ib&", &err) < 0);
	assert_non_null(strstr(err.text, "constraint: \"\" is not KEY"));
	assert_true(job_constraint_check("(a=b)", &err) < 0);
	assert_true(job_constraint_check("", &err) < 0);
	/* the inventory: an object on the wire, canonical in memory */
	struct node_inventory inv;
	memset(&inv, 0, sizeof(inv));
	snprintf(inv.name, sizeof(inv.name), "n1");
	inv.cpus = 4;
	snprintf(inv.labels, sizeof(inv.labels), "%s", L);
	json_t *j = node_inventory_pack(&inv);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(j, "labels"), "rack")), "r07");
	struct node_inventory back;
	assert_int_equal(node_inventory_unpack(j, &back, &err), 0);
	assert_string_equal(back.labels, L);
	json_object_set_new(json_object_get(j, "labels"), "rack", json_integer(7));
	assert_true(node_inventory_unpack(j, &back, &err) < 0);
	assert_non_null(strstr(err.text, "labels.rack: must be a string"));
	json_decref(j);
	/* its fabric round trips; none is no key; a newer agent's kind is other */
	assert_null(node_network_pack(&inv));
	inv.nnics = 1;
	inv.nics[0] = (struct nic){.name = "ib0",
				   .kind = NIC_INFINIBAND,
				   .up = true,
				   .speed_mbps = 400000,
				   .mtu = 4092,
				   .driver = "mlx5_core",
				   .pci = "0000:17:00.0",
				   .numa = 1,
				   .rdma = "mlx5_0"};
	inv.nrdma = 1;
	inv.rdma[0] = (struct rdma_port){.dev = "mlx5_0",
					 .port = 1,
					 .active = true,
					 .state = "ACTIVE",
					 .rate_gbps = 400,
					 .gids = 128,
					 .pci = "0000:17:00.0",
					 .numa = 1};
	j = node_inventory_pack(&inv);
	assert_int_equal(node_inventory_unpack(j, &back, &err), 0);
	assert_int_equal(back.nnics, 1);
	assert_int_equal(back.nics[0].kind, NIC_INFINIBAND);
	assert_int_equal(back.nics[0].speed_mbps, 400000);
	assert_string_equal(back.nics[0].rdma, "mlx5_0");
	assert_int_equal(back.nrdma, 1);
	assert_false(back.rdma[0].ethernet);
	assert_int_equal(back.rdma[0].gids, 128);
	json_t *again = node_inventory_pack(&back);
	assert_true(json_equal(j, again));
	json_decref(again);
	json_t *nic0 =
		json_array_get(json_object_get(json_object_get(j, "network"), "interfaces"), 0);
	json_object_set_new(nic0, "kind", json_string("omnipath"));
	assert_int_equal(node_inventory_unpack(j, &back, &err), 0);
	assert_int_equal(back.nics[0].kind, NIC_OTHER);
	json_object_set_new(nic0, "mtu", json_string("9000"));
	assert_true(node_inventory_unpack(j, &back, &err) < 0);
	assert_non_null(strstr(err.text, "network.interfaces[0]"));
	json_decref(j);
	inv.nnics = inv.nrdma = 0;
	/* taints and tolerations: names, sorted, once each */
	assert_int_equal(
		model_names_parse("taints", "inference,dev,inference", out, sizeof(out), &err), 3);
	assert_string_equal(out, "dev,inference");
	assert_true(model_names_parse("taints", "dev,,x", out, sizeof(out), &err) < 0);
	assert_non_null(strstr(err.text, "taints: an empty name"));
	assert_true(model_names_parse("tolerate", "a b", out, sizeof(out), &err) < 0);
	assert_non_null(strstr(err.text, "tolerate: \"a b\": a name of letters"));
	assert_true(node_taints_tolerated("", NULL));
	assert_true(node_taints_tolerated("dev,inference", "dev,inference,x"));
	assert_false(node_taints_tolerated("dev,inference", "dev"));
	assert_false(node_taints_tolerated("dev", NULL));
	assert_false(node_taints_tolerated("dev", "de"));
	/* an operator's labels are over its agent's, and kept in its record */
	char merged[MODEL_LABELS_MAX];
	node_labels_merge(L, "rack=r09,spare=", merged, sizeof(merged));
	assert_string_equal(merged, "fabric=ib,rack=r09,spare=,tier=top");
	struct node_record rec;
	memset(&rec, 0, sizeof(rec));
	rec.inv = inv;
	snprintf(rec.labels_set, sizeof(rec.labels_set), "rack=r09");
	snprintf(rec.taints, sizeof(rec.taints), "dev,inference");
	json_t *rj = node_record_pack(&rec);
	struct node_record rback;
	assert_int_equal(node_record_unpack(rj, &rback, &err), 0);
	assert_string_equal(rback.labels_set, "rack=r09");
	assert_string_equal(rback.taints, "dev,inference");
	assert_string_equal(rback.inv.labels, L);
	node_record_release(&rback);
	json_decref(rj);
	/* a request's constraint is checked as it is read */
	json_t *rq = json_pack("{s:[s], s:s, s:s}", "command", "true", "cwd", "/", "constraint",
			       "fabric=ib|");
	struct job_request r;
	assert_true(job_request_unpack(rq, &r, &err) < 0);
	assert_non_null(strstr(err.text, "constraint"));
	json_object_set_new(rq, "constraint", json_string("fabric=ib"));
	assert_int_equal(job_request_unpack(rq, &r, &err), 0);
	assert_string_equal(r.constraint, "fabric=ib");
	json_t *packed = job_request_pack(&r);
	assert_string_equal(json_string_value(json_object_get(packed, "constraint")), "fabric=ib");
	json_decref(packed);
	job_request_release(&r);
	json_decref(rq);
}

/* Pools: read from the configuration, checked; which pools a node's labels
 * put it in, and which take a job. */
static void test_pools(void **state)
{
	struct sched_config *c = xmalloc(sizeof(*c));
	struct tk_error err;
	sched_config_default(c);
	assert_int_equal(c->npools, 0);
	assert_int_equal(c->default_pool, -1);
	struct job_request r = {.nodes = 1, .tasks_per_node = 1, .gpu_milli = 8000};
	assert_int_equal(sched_config_pool_job(c, &r, NULL, 0), 0); /* none: anywhere */
	assert_int_equal(sched_config_pool_node(c, "tier=top"), 0);
	assert_int_equal(
		sched_config_load_json(
			c,
			"{\"pools\": {\"top\": {\"selector\": \"tier=top\", \"allow\": "
			"[\"group:llm\"], \"max_time\": \"14d\", \"min_gpus\": 64}, "
			"\"general\": {\"selector\": \"tier=general|tier=dev\"}, "
			"\"ib\": {\"selector\": \"fabric=ib\"}}, \"default_pool\": \"general\"}",
			&err),
		0);
	assert_int_equal(c->npools, 3);
	int top = sched_config_pool(c, "top", 3), gen = sched_config_pool(c, "general", 7),
	    ib = sched_config_pool(c, "ib", 2);
	assert_true(top >= 0 && gen >= 0 && ib >= 0);
	assert_int_equal(sched_config_pool(c, "to", 2), -1);
	assert_int_equal(c->default_pool, gen);
	assert_int_equal(c->pools[top].max_time_s, 14 * 86400);
	assert_int_equal(c->pools[top].min_gpus, 64);
	assert_string_equal(c->pools[top].allow[0], "group:llm");
	/* a node in two pools, one in none */
	assert_true(sched_config_pool_node(c, "fabric=ib,tier=top") ==
		    ((1ULL << top) | (1ULL << ib)));
	assert_true(sched_config_pool_node(c, "tier=dev") == 1ULL << gen);
	assert_true(sched_config_pool_node(c, "rack=r1") == MODEL_POOL_NONE);
	assert_true(sched_config_pool_node(c, NULL) == MODEL_POOL_NONE);
	/* naming none: the open pools and nodes in none */
	char why[256];
	assert_true(sched_config_pool_job(c, &r, why, sizeof(why)) ==
		    (MODEL_POOL_NONE | (1ULL << gen) | (1ULL << ib)));
	/* top takes 64 accelerators or more, time limits of 14d at most */
	r.pool = "ib,top";
	assert_true(sched_config_pool_job(c, &r, why, sizeof(why)) == 1ULL << ib);
	r.pool = "top";
	assert_true(sched_config_pool_job(c, &r, why, sizeof(why)) == MODEL_POOL_NOWHERE);
	assert_non_null(strstr(why, "pool top takes jobs of 64 accelerators or more; this one "
				    "asks for 8"));
	r.nodes = 8;
	assert_true(sched_config_pool_job(c, &r, why, sizeof(why)) == MODEL_POOL_NOWHERE);
	assert_non_null(strstr(why, "time limits of 14d"));
	assert_non_null(strstr(why, "this job's is none"));
	r.time_limit_s = 86400;
	assert_true(sched_config_pool_job(c, &r, why, sizeof(why)) == 1ULL << top);
	r.pool = "gone";
	assert_true(sched_config_pool_job(c, &r, why, sizeof(why)) == MODEL_POOL_NOWHERE);
	assert_non_null(strstr(why, "no pool of this cluster is named gone"));
	/* the API's form */
	json_t *o = sched_config_pool_pack(c, top);
	assert_string_equal(json_string_value(json_object_get(o, "selector")), "tier=top");
	assert_false(json_is_true(json_object_get(o, "default")));
	json_decref(o);
	/* bad configurations name what is wrong; nothing changes */
	static const char *const bad[][2] = {
		{"{\"pools\": []}", "pools: must be an object"},
		{"{\"pools\": {\"a b\": {\"selector\": \"x\"}}}", "not a valid pool name"},
		{"{\"pools\": {\"a\": {}}}", "pools.a.selector: required"},
		{"{\"pools\": {\"a\": {\"selector\": \"x&\"}}}",
		 "pools.a.selector: \"\" is not KEY"},
		{"{\"pools\": {\"a\": {\"selector\": \"x\", \"max_time\": \"soon\"}}}",
		 "pools.a.max_time: expected a duration"},
		{"{\"pools\": {\"a\": {\"selector\": \"x\", \"nodes\": 3}}}", "nodes"},
		{"{\"pools\": {\"a\": {\"selector\": \"x\", \"allow\": [\"\"]}}}", "allow"},
		{"{\"pools\": {\"a\": {\"selector\": \"x\"}}, \"default_pool\": \"b\"}",
		 "default_pool: no pool \"b\""},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_true(sched_config_load_json(c, bad[i][0], &err) < 0);
		if (!strstr(err.text, bad[i][1]))
			fail_msg("%s: %s", bad[i][0], err.text);
	}
	assert_int_equal(c->npools, 3);
	/* the default image: a reference, and allowed */
	assert_int_equal(sched_config_load_json(c,
						"{\"allowed_images\": [\"reg.example/ml/*\"], "
						"\"default_image\": \"reg.example/ml/train:2\"}",
						&err),
			 0);
	assert_string_equal(c->default_image, "reg.example/ml/train:2");
	assert_true(sched_config_load_json(c,
					   "{\"allowed_images\": [\"reg.example/ml/*\"], "
					   "\"default_image\": \"other.example/x:1\"}",
					   &err) < 0);
	assert_non_null(strstr(err.text, "default_image: \"other.example/x:1\" is not among"));
	assert_true(sched_config_load_json(c, "{\"default_image\": \"Bad Ref\"}", &err) < 0);
	assert_non_null(strstr(err.text, "not an image reference"));
	assert_string_equal(c->default_image, "reg.example/ml/train:2");
	free(c);
	/* a request names its pools, kept canonical */
	json_t *rq =
		json_pack("{s:[s], s:s, s:s}", "command", "true", "cwd", "/", "pool", "top,ib,top");
	struct job_request jr;
	assert_int_equal(job_request_unpack(rq, &jr, &err), 0);
	assert_string_equal(jr.pool, "ib,top");
	json_t *packed = job_request_pack(&jr);
	assert_string_equal(json_string_value(json_object_get(packed, "pool")), "ib,top");
	json_decref(packed);
	job_request_release(&jr);
	json_object_set_new(rq, "pool", json_string("a b"));
	assert_true(job_request_unpack(rq, &jr, &err) < 0);
	assert_non_null(strstr(err.text, "pool"));
	json_decref(rq);
}

/* Every node's gpu=MODEL label, beneath the others. */
static void test_gpu_label(void **state)
{
	char out[MODEL_LABELS_MAX];
	node_labels_with_gpu("rack=r1,tier=top", "H100", out, sizeof(out));
	assert_string_equal(out, "gpu=H100,rack=r1,tier=top");
	node_labels_with_gpu("gpu=mine", "H100", out, sizeof(out)); /* the agent's wins */
	assert_string_equal(out, "gpu=mine");
	node_labels_with_gpu("", "A100-80GB", out, sizeof(out));
	assert_string_equal(out, "gpu=A100-80GB");
	node_labels_with_gpu("tier=cpu", NULL, out, sizeof(out));
	assert_string_equal(out, "tier=cpu");
	node_labels_with_gpu(NULL, "no such model", out, sizeof(out)); /* no label's value */
	assert_string_equal(out, "");
	/* fabric=KIND beneath too, from the RDMA ports ACTIVE */
	struct node_inventory inv = {0};
	assert_null(node_fabric_of(&inv));
	inv.nrdma = 2;
	inv.rdma[0] = (struct rdma_port){.ethernet = true, .active = true};
	inv.rdma[1] = (struct rdma_port){.ethernet = false, .active = false};
	assert_string_equal(node_fabric_of(&inv), "roce");
	inv.rdma[1].active = true;
	assert_string_equal(node_fabric_of(&inv), "ib");
	node_labels_beneath("gpu=H100", "fabric", "ib", out, sizeof(out));
	assert_string_equal(out, "fabric=ib,gpu=H100");
	node_labels_beneath("fabric=opa", "fabric", "ib", out, sizeof(out)); /* the agent's wins */
	assert_string_equal(out, "fabric=opa");
	/* --fabric as a constraint: with each alternative of --constraint's */
	struct tk_error err;
	assert_int_equal(job_constraint_with_fabric(NULL, "ib", out, sizeof(out), &err), 0);
	assert_string_equal(out, "fabric=ib");
	assert_int_equal(job_constraint_with_fabric("rack!=r7", "rdma", out, sizeof(out), &err), 0);
	assert_string_equal(out, "rack!=r7&fabric=ib|rack!=r7&fabric=roce");
	assert_int_equal(job_constraint_with_fabric("a|b=1&c", "roce", out, sizeof(out), &err), 0);
	assert_string_equal(out, "a&fabric=roce|b=1&c&fabric=roce");
	assert_true(job_constraint_match(out, "b=1,c=x,fabric=roce"));
	assert_false(job_constraint_match(out, "b=1,c=x,fabric=ib"));
	assert_true(job_constraint_with_fabric(NULL, "opa", out, sizeof(out), &err) < 0);
	assert_non_null(strstr(err.text, "fabric: expected ib (InfiniBand), roce or rdma"));
	assert_true(job_constraint_with_fabric(NULL, "rdma", out, 8, &err) < 0);
}

/* Fault domains: paths checked, --spread and --within parsed, the levels'
 * names configured. */
static void test_fault_domains(void **state)
{
	assert_true(model_domain_valid("dc1/row3/rack07/pdu2"));
	assert_true(model_domain_valid("r1"));
	assert_false(model_domain_valid(""));
	assert_false(model_domain_valid("dc1//r1"));
	assert_false(model_domain_valid("dc1/r1/"));
	assert_false(model_domain_valid("a b"));
	assert_false(model_domain_valid("1/2/3/4/5/6/7/8/9"));
	char level[MODEL_NAME_MAX];
	int cap = 0;
	struct tk_error err;
	assert_int_equal(job_spread_parse("rack", level, sizeof(level), &cap, &err), 0);
	assert_true(strcmp(level, "rack") == 0 && cap == 1);
	assert_int_equal(job_spread_parse("pdu:3", level, sizeof(level), &cap, &err), 0);
	assert_true(strcmp(level, "pdu") == 0 && cap == 3);
	static const char *const bad[] = {"", "rack:", "rack:0", "rack:x", ":2", "ra ck"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_true(job_spread_parse(bad[i], level, sizeof(level), &cap, &err) < 0);
	assert_true(job_spread_parse("rack:2", level, sizeof(level), NULL, &err) < 0);
	assert_non_null(strstr(err.text, "within: expected a fault-domain level's name"));
	struct sched_config *c = xmalloc(sizeof(*c));
	sched_config_default(c);
	assert_int_equal(sched_config_domain_level(c, "rack", 4), 3);
	assert_int_equal(sched_config_domain_level(c, "dc", 2), 1);
	assert_int_equal(sched_config_domain_level(c, "leaf", 4), -1);
	assert_int_equal(
		sched_config_load_json(c, "{\"domain_levels\": [\"rack\", \"pdu\"]}", &err), 0);
	assert_int_equal(sched_config_domain_level(c, "pdu", 3), 2);
	assert_int_equal(sched_config_domain_level(c, "dc", 2), -1);
	assert_true(sched_config_load_json(c, "{\"domain_levels\": [\"rack\", \"rack\"]}", &err) <
		    0);
	assert_non_null(strstr(err.text, "domain_levels[1]"));
	assert_true(sched_config_load_json(c, "{\"domain_levels\": []}", &err) < 0);
	/* how far ahead a window keeps jobs without a time limit off */
	assert_int_equal(c->maint_lookahead_s, 86400);
	assert_int_equal(sched_config_load_json(c, "{\"maint_lookahead\": \"2h\"}", &err), 0);
	assert_int_equal(c->maint_lookahead_s, 7200);
	assert_true(sched_config_load_json(c, "{\"maint_lookahead\": \"soon\"}", &err) < 0);
	assert_non_null(strstr(err.text, "maint_lookahead: expected a duration such as \"24h\""));
	/* idle accelerators' power: 10 min by default, "0" never */
	assert_int_equal(sched_config_load_json(c, "{}", &err), 0);
	assert_int_equal(c->idle_power_after_s, 600);
	assert_int_equal(sched_config_load_json(c, "{\"idle_power_after\": \"0\"}", &err), 0);
	assert_int_equal(c->idle_power_after_s, 0);
	assert_true(sched_config_load_json(c, "{\"idle_power_after\": \"later\"}", &err) < 0);
	assert_non_null(strstr(err.text, "idle_power_after: expected a duration such as \"10m\""));
	/* power fencing: a program by its path, its words, a silence, a timeout */
	assert_int_equal(c->npower_fence, 0);
	assert_int_equal(sched_config_load_json(
				 c,
				 "{\"power_fence\": {\"command\": [\"/sbin/fence\", \"{node}\", "
				 "\"--bmc={addr}\"], \"after\": \"8s\"}}",
				 &err),
			 0);
	assert_int_equal(c->npower_fence, 3);
	assert_string_equal(c->power_fence[2], "--bmc={addr}");
	assert_int_equal(c->power_fence_after_s, 8);
	assert_int_equal(c->power_fence_timeout_s, 60);
	assert_int_equal(c->power_fence_heartbeat_s, 1);
	assert_int_equal(sched_config_load_json(c,
						"{\"power_fence\": {\"command\": [\"/f\"], "
						"\"heartbeat\": \"2s\"}}",
						&err),
			 0);
	assert_int_equal(c->power_fence_heartbeat_s, 2);
	assert_int_equal(c->power_fence_after_s, 0);
	static const char *const bad_fences[][2] = {
		{"{\"power_fence\": [\"/sbin/fence\"]}", "power_fence: must be an object"},
		{"{\"power_fence\": {\"after\": \"8s\"}}", "power_fence.command: must name"},
		{"{\"power_fence\": {\"command\": [\"fence\"]}}", "is not an absolute path"},
		{"{\"power_fence\": {\"command\": [\"/f\"], \"after\": \"0\"}}",
		 "power_fence.after: expected a duration from 1s to 1h"},
		{"{\"power_fence\": {\"command\": [\"/f\"], \"wait\": \"1s\"}}",
		 "power_fence.wait"},
		{"{\"power_fence\": {\"command\": [\"/f\"], \"heartbeat\": \"500ms\"}}",
		 "power_fence.heartbeat: expected a duration from 1s to 1h such as \"1s\""},
	};
	for (size_t k = 0; k < ARRAY_SIZE(bad_fences); k++) {
		assert_true(sched_config_load_json(c, bad_fences[k][0], &err) < 0);
		if (!strstr(err.text, bad_fences[k][1]))
			fail_msg("%s: said %s", bad_fences[k][0], err.text);
	}
	free(c);
	/* a request carries them; bad ones are refused as it is read */
	json_t *rq = json_pack("{s:[s], s:s, s:s, s:s}", "command", "true", "cwd", "/", "spread",
			       "rack:2", "within", "dc");
	struct job_request jr;
	assert_int_equal(job_request_unpack(rq, &jr, &err), 0);
	assert_true(strcmp(jr.spread, "rack:2") == 0 && strcmp(jr.within, "dc") == 0);
	job_request_release(&jr);
	json_object_set_new(rq, "spread", json_string("rack:0"));
	assert_true(job_request_unpack(rq, &jr, &err) < 0);
	assert_non_null(strstr(err.text, "spread:"));
	json_decref(rq);
	/* an inventory carries the node's domain; a bad one is refused */
	struct node_inventory inv = {.cpus = 4};
	snprintf(inv.name, sizeof(inv.name), "n1");
	snprintf(inv.domain, sizeof(inv.domain), "dc1/r7");
	json_t *o = node_inventory_pack(&inv);
	struct node_inventory back;
	assert_int_equal(node_inventory_unpack(o, &back, &err), 0);
	assert_string_equal(back.domain, "dc1/r7");
	json_object_set_new(o, "domain", json_string("dc1//r7"));
	assert_true(node_inventory_unpack(o, &back, &err) < 0);
	assert_non_null(strstr(err.text, "not a fault-domain path"));
	json_decref(o);
}

static void test_config_validation(void **state)
{
	struct sched_config c;
	struct tk_error err;
	sched_config_default(&c);
	assert_false(c.require_validation);
	assert_int_equal(
		sched_config_load_json(&c,
				       "{\"require_validation\": true, \"validation_args\": "
				       "[\"--quick\", \"--layers\", \"system\"]}",
				       &err),
		0);
	assert_true(c.require_validation);
	assert_int_equal(c.nvalidation_args, 3);
	assert_string_equal(c.validation_args[2], "system");
	assert_true(sched_config_load_json(&c, "{\"validation_args\": \"--quick\"}", &err) < 0);
	assert_non_null(strstr(err.text, "validation_args"));
	assert_true(sched_config_load_json(&c, "{\"validation_args\": [\"\"]}", &err) < 0);
	assert_non_null(strstr(err.text, "validation_args[0]"));
	assert_true(sched_config_load_json(&c, "{\"require_validation\": 1}", &err) < 0);
	assert_non_null(strstr(err.text, "require_validation"));
	assert_true(c.require_validation && c.nvalidation_args == 3); /* unchanged on error */
	/* the limits a node must enforce: all, some by name, none */
	assert_int_equal(sched_config_load_json(&c, "{\"require_limits\": true}", &err), 0);
	assert_int_equal(c.require_limits, NODE_LIMIT_ALL);
	assert_int_equal(
		sched_config_load_json(&c, "{\"require_limits\": [\"memory\", \"devices\"]}", &err),
		0);
	assert_int_equal(c.require_limits, NODE_LIMIT_MEMORY | NODE_LIMIT_DEVICES);
	assert_int_equal(sched_config_load_json(&c, "{}", &err), 0);
	assert_int_equal(c.require_limits, 0);
	assert_true(sched_config_load_json(&c, "{\"require_limits\": [\"memory\", \"gpus\"]}",
					   &err) < 0);
	assert_non_null(strstr(err.text, "require_limits[1]: expected true"));
	assert_true(sched_config_load_json(&c, "{\"require_limits\": \"all\"}", &err) < 0);
	assert_non_null(strstr(err.text, "require_limits: expected true"));
	/* the stall window: auto (0) and at least 5m by default */
	assert_true(c.stall_after_s == 0 && c.stall_min_s == 300);
	assert_int_equal(sched_config_load_json(
				 &c, "{\"stall_after\": \"10m\", \"stall_min\": \"1m\"}", &err),
			 0);
	assert_true(c.stall_after_s == 600 && c.stall_min_s == 60);
	assert_int_equal(sched_config_load_json(&c, "{\"stall_after\": \"auto\"}", &err), 0);
	assert_int_equal(c.stall_after_s, 0);
	assert_true(sched_config_load_json(&c, "{\"stall_after\": \"soon\"}", &err) < 0);
	assert_non_null(strstr(err.text, "stall_after: expected a duration such as \"10m\" or"));
	assert_true(sched_config_load_json(&c, "{\"stall_min\": \"0\"}", &err) < 0);
	/* the lemon rule: off by default, a count within a window */
	assert_true(c.lemon_failures == 0 && c.lemon_within_s == 86400);
	assert_int_equal(sched_config_load_json(
				 &c, "{\"lemon\": {\"failures\": 3, \"within\": \"6h\"}}", &err),
			 0);
	assert_true(c.lemon_failures == 3 && c.lemon_within_s == 6 * 3600);
	assert_true(sched_config_load_json(&c, "{\"lemon\": {\"failures\": 3, \"after\": 1}}",
					   &err) < 0);
	assert_non_null(strstr(err.text, "lemon"));
	assert_true(sched_config_load_json(&c, "{\"lemon\": {\"within\": \"1h\"}}", &err) < 0);
	assert_non_null(strstr(err.text, "failures"));
	assert_true(sched_config_load_json(&c, "{\"lemon\": 3}", &err) < 0);
	assert_non_null(strstr(err.text, "lemon: must be an object"));
	/* the spare pool: none by default; nodes by model */
	assert_int_equal(c.nspare_pool, 0);
	assert_int_equal(
		sched_config_load_json(&c, "{\"spares\": {\"H100\": 4, \"A100\": 0}}", &err), 0);
	assert_int_equal(c.nspare_pool, 2);
	assert_true(c.spare_pool[0].nodes + c.spare_pool[1].nodes == 4);
	assert_true(sched_config_load_json(&c, "{\"spares\": {\"H100\": -1}}", &err) < 0);
	assert_non_null(strstr(err.text, "spares.H100: must be a number of nodes from 0"));
	assert_true(sched_config_load_json(&c, "{\"spares\": 4}", &err) < 0);
	assert_non_null(strstr(err.text, "spares: must be an object"));
	assert_int_equal(c.nspare_pool, 2); /* unchanged by a refused file */
	/* the GPU thresholds: the seeds' by default; "for" a duration; 0 off */
	assert_true(c.gpu_health.temp_c == 85 && c.gpu_health.hold_ms == 300000 &&
		    c.gpu_health.throttle && c.gpu_health.pcie && c.gpu_health.rows == 1);
	assert_int_equal(sched_config_load_json(&c,
						"{\"gpu_health\": {\"temp_c\": 80, \"for\": "
						"\"2s\", \"power_low_pct\": 0, \"throttle\": "
						"false}}",
						&err),
			 0);
	assert_true(c.gpu_health.temp_c == 80 && c.gpu_health.hold_ms == 2000 &&
		    c.gpu_health.power_pct == 0 && !c.gpu_health.throttle && c.gpu_health.pcie);
	assert_true(sched_config_load_json(&c, "{\"gpu_health\": {\"for\": \"soon\"}}", &err) < 0);
	assert_non_null(strstr(err.text, "gpu_health"));
	assert_non_null(strstr(err.text, "for: expected a duration"));
	assert_true(sched_config_load_json(&c, "{\"gpu_health\": {\"hold_ms\": 5}}", &err) < 0);
	assert_non_null(strstr(err.text, "hold_ms"));
	assert_true(sched_config_load_json(&c, "{\"gpu_health\": {\"busy_pct\": 0}}", &err) < 0);
	assert_non_null(strstr(err.text, "busy_pct"));
	assert_true(sched_config_load_json(&c, "{\"gpu_health\": 85}", &err) < 0);
	assert_non_null(strstr(err.text, "gpu_health: must be an object"));
	/* the submission rate: a number, 0 for none; a burst of at least 1 */
	assert_true(c.submit_rate_per_user == 50 && c.submit_burst_per_user == 500);
	assert_int_equal(sched_config_load_json(&c,
						"{\"submit_rate_per_user\": 0.5, "
						"\"submit_burst_per_user\": 5}",
						&err),
			 0);
	assert_true(c.submit_rate_per_user == 0.5 && c.submit_burst_per_user == 5);
	assert_true(sched_config_load_json(&c, "{\"submit_rate_per_user\": -1}", &err) < 0);
	assert_non_null(strstr(err.text, "submit_rate_per_user"));
	assert_true(sched_config_load_json(&c, "{\"submit_burst_per_user\": 0}", &err) < 0);
	assert_non_null(strstr(err.text, "submit_burst_per_user"));
	/* who may use a class: users, group:NAME, role:NAME */
	assert_int_equal(
		sched_config_load_json(&c,
				       "{\"classes\": [{\"name\": \"prod\", \"priority\": 1, "
				       "\"allow\": [\"alice\", \"group:ml\", \"role:x\"]}]}",
				       &err),
		0);
	assert_int_equal(c.classes[0].nallow, 3);
	assert_string_equal(c.classes[0].allow[1], "group:ml");
	static const char *const bad[] = {"\"group:\"", "\"group:ML\"", "\"role:a b\"", "\"\"",
					  "3"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char text[256];
		snprintf(text, sizeof(text),
			 "{\"classes\": [{\"name\": \"p\", \"priority\": 1, \"allow\": [%s]}]}",
			 bad[i]);
		assert_true(sched_config_load_json(&c, text, &err) < 0);
		assert_string_equal(err.text, "classes[0].allow[0]: must be a user name, "
					      "group:UNIXGROUP or role:NAME");
	}
	/* a reservation nobody can tell the start of holds nothing idle, or
	 * does after "reservation_patience_s" */
	assert_int_equal(sched_config_load_json(&c, "{}", &err), 0);
	assert_int_equal(c.resv_patience_s, -1);
	assert_int_equal(sched_config_load_json(&c, "{\"reservation_patience_s\": 0}", &err), 0);
	assert_int_equal(c.resv_patience_s, 0);
	assert_true(sched_config_load_json(&c, "{\"reservation_patience_s\": -5}", &err) < 0);
	assert_string_equal(
		err.text, "reservation_patience_s: must be an integer from 0 to 31536000, got -5");
	/* "placement": dense unless the fastest model is to come first */
	assert_int_equal(sched_config_load_json(&c, "{}", &err), 0);
	assert_false(c.placement_fastest);
	assert_int_equal(sched_config_load_json(&c, "{\"placement\": \"fastest\"}", &err), 0);
	assert_true(c.placement_fastest);
	assert_true(sched_config_load_json(&c, "{\"placement\": \"tight\"}", &err) < 0);
	assert_string_equal(err.text, "placement: must be \"dense\" or \"fastest\", got \"tight\"");
	assert_true(c.placement_fastest);
	/* "max_starts_per_pass": bounded by default, 0 for no bound */
	assert_int_equal(sched_config_load_json(&c, "{}", &err), 0);
	assert_int_equal(c.max_starts_per_pass, SCHED_CONFIG_MAX_STARTS);
	assert_int_equal(sched_config_load_json(&c, "{\"max_starts_per_pass\": 0}", &err), 0);
	assert_int_equal(c.max_starts_per_pass, 0);
	assert_true(sched_config_load_json(&c, "{\"max_starts_per_pass\": -1}", &err) < 0);
	assert_string_equal(err.text,
			    "max_starts_per_pass: must be an integer from 0 to 1000000, got -1");
	assert_true(sched_config_load_json(&c, "{\"max_starts_per_pass\": \"many\"}", &err) < 0);
	assert_non_null(strstr(err.text, "max_starts_per_pass"));
	assert_int_equal(c.max_starts_per_pass, 0); /* unchanged on error */
	/* "order": what is wrong is named, and nothing changes */
	static const struct {
		const char *cls, *err;
	} bad_order[] = {
		{"\"order\": \"random\"",
		 "classes[0].order: must be \"fifo\" or \"las\", got \"random\""},
		{"\"las_limits_gpu_h\": [1]", "classes[0].las_limits_gpu_h: only for a class with "
					      "\"order\": \"las\""},
		{"\"order\": \"las\", \"las_limits_gpu_h\": [4, 2]",
		 "classes[0].las_limits_gpu_h[1]: must be above the limit before it (4), got 2"},
		{"\"order\": \"las\", \"las_limits_gpu_h\": [0]",
		 "classes[0].las_limits_gpu_h[0]: must be a number of accelerator-hours above 0"},
		{"\"order\": \"las\", \"las_limits_gpu_h\": [1,2,3,4,5,6,7,8]",
		 "classes[0].las_limits_gpu_h: must be an array of 1 to 7 numbers"},
		{"\"las_min_run_s\": 60", "classes[0].las_min_run_s: only for a class with "
					  "\"order\": \"las\""},
		{"\"order\": \"las\", \"las_min_run_s\": -1",
		 "classes[0].las_min_run_s: must be an integer from 0 to 2592000, got -1"},
		{"\"las_max_loss_s\": 60", "classes[0].las_max_loss_s: only for a class with "
					   "\"order\": \"las\""},
		{"\"order\": \"las\", \"las_max_loss_s\": -2",
		 "classes[0].las_max_loss_s: must be an integer from -1 to 2592000, got -2"},
		{"\"order\": \"las\", \"las_max_stretch\": -1",
		 "classes[0].las_max_stretch: must be a number from 0 to 1e+06, got -1"},
		{"\"order\": \"las\", \"las_promote\": -1",
		 "classes[0].las_promote: must be a number from 0 to 1e+06, got -1"},
		{"\"order\": \"las\", \"las_promote\": 2, \"las_max_stretch\": 3",
		 "classes[0].las_promote: the older name of las_max_stretch; give only one"},
		{"\"las_index\": \"gittins\"", "classes[0].las_index: only for a class with "
					       "\"order\": \"las\""},
		{"\"order\": \"las\", \"las_index\": \"srpt\"",
		 "classes[0].las_index: must be \"gittins\" or \"levels\", got \"srpt\""},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad_order); i++) {
		char text[256];
		snprintf(text, sizeof(text),
			 "{\"classes\": [{\"name\": \"p\", \"priority\": 1, %s}]}",
			 bad_order[i].cls);
		assert_true(sched_config_load_json(&c, text, &err) < 0);
		assert_string_equal(err.text, bad_order[i].err);
		assert_false(c.classes[0].las);
	}
	/* every level is a class of the scheduler's: 32 in all at most */
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addstr(&sb, "{\"classes\": [");
	for (int i = 0; i < 5; i++)
		strbuf_addf(&sb,
			    "%s{\"name\": \"c%d\", \"priority\": %d, \"order\": \"las\", "
			    "\"las_limits_gpu_h\": [1,2,3,4,5,6]}",
			    i ? ", " : "", i, i);
	strbuf_addstr(&sb, "]}");
	assert_true(sched_config_load_json(&c, sb.buf, &err) < 0);
	assert_string_equal(
		err.text,
		"classes: 35 classes and levels of \"order\": \"las\" in all, at most 32");
	strbuf_release(&sb);
	assert_int_equal(
		sched_config_load_json(&c,
				       "{\"classes\": [{\"name\": \"r\", \"priority\": 1, "
				       "\"order\": \"las\", \"las_limits_gpu_h\": [0.5, 10]}]}",
				       &err),
		0);
	assert_true(c.classes[0].las && c.classes[0].las_nlimits == 2);
	assert_true(c.classes[0].las_limit_gpu_h[0] == 0.5 && c.classes[0].las_max_stretch == 4);
	assert_int_equal(c.classes[0].las_max_loss_s, MODEL_LAS_DEFAULT_MAX_LOSS_S);
	assert_true(c.classes[0].las_gittins);
	assert_int_equal(class_spec_levels(&c.classes[0]), 3);
	json_t *cj = class_spec_pack(&c.classes[0]);
	assert_string_equal(json_string_value(json_object_get(cj, "order")), "las");
	assert_int_equal(json_integer_value(json_object_get(cj, "las_max_loss_s")), 600);
	assert_int_equal(json_array_size(json_object_get(cj, "las_limits_gpu_h")), 2);
	assert_string_equal(json_string_value(json_object_get(cj, "las_index")), "gittins");
	json_decref(cj);
	/* the older name, and the levels alone */
	assert_int_equal(sched_config_load_json(&c,
						"{\"classes\": [{\"name\": \"r\", \"priority\": 1, "
						"\"order\": \"las\", \"las_promote\": 6, "
						"\"las_index\": \"levels\"}]}",
						&err),
			 0);
	assert_true(c.classes[0].las_max_stretch == 6 && !c.classes[0].las_gittins);
	/* a user's roles travel with its record, each once */
	struct user_record u = {
		.name = "carol",
		.token_sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		.unix_user = "carol",
		.nroles = 2,
		.roles = {"oncall", "review"}};
	json_t *j = user_record_pack(&u);
	struct user_record back;
	assert_int_equal(user_record_unpack(j, &back, &err), 0);
	assert_int_equal(back.nroles, 2);
	assert_string_equal(back.roles[1], "review");
	json_object_set_new(j, "roles", json_pack("[s, s]", "a", "a"));
	assert_true(user_record_unpack(j, &back, &err) < 0);
	assert_string_equal(err.text, "roles[1]: \"a\" is given twice");
	json_decref(j);
}

/* The agent protocol: what each side packs the other unpacks to the same,
 * and a bad message names its field. */
/* The witness group a beat's answer carries, and what the beat says back:
 * packed and taken whole; malformed groups refused with what is wrong. */
static void test_wire_witness(void **state)
{
	struct wire_group g = {.n = 2};
	snprintf(g.id, sizeof(g.id), "0123456789abcdef");
	snprintf(g.tag, sizeof(g.tag), "fedcba9876543210");
	memset(g.key, 'a', 64);
	snprintf(g.members[0].node, sizeof(g.members[0].node), "n1");
	snprintf(g.members[0].addr, sizeof(g.members[0].addr), "10.0.0.1");
	g.members[0].port = 4711;
	snprintf(g.members[1].node, sizeof(g.members[1].node), "n2");
	snprintf(g.members[1].addr, sizeof(g.members[1].addr), "10.0.0.2");
	json_t *ans = wire_beat_answer_pack("e1", 99, &g);
	char *text = json_dumps(ans, JSON_COMPACT);
	char epoch[WIRE_EPOCH_MAX] = "";
	int64_t at = 0;
	struct wire_group got;
	struct tk_error err;
	assert_int_equal(wire_beat_answer_take(text, strlen(text), epoch, &at, &got, &err), 1);
	assert_string_equal(epoch, "e1");
	assert_int_equal(at, 99);
	assert_memory_equal(&got, &g, sizeof(g));
	free(text);
	/* no group: none taken */
	json_object_del(ans, "group");
	text = json_dumps(ans, JSON_COMPACT);
	assert_int_equal(wire_beat_answer_take(text, strlen(text), epoch, &at, &got, &err), 0);
	free(text);
	/* a key that is not 64 hex digits, a port out of range: refused */
	json_t *gj = wire_group_pack(&g);
	json_object_set_new(gj, "key", json_string("short"));
	assert_true(wire_group_unpack(gj, &got, &err) < 0);
	assert_non_null(strstr(err.text, "key 64 hex digits"));
	json_decref(gj);
	gj = wire_group_pack(&g);
	json_object_set_new(json_array_get(json_object_get(gj, "members"), 1), "port",
			    json_integer(70000));
	assert_true(wire_group_unpack(gj, &got, &err) < 0);
	assert_non_null(strstr(err.text, "group.members[1]"));
	json_object_set_new(ans, "group", gj);
	text = json_dumps(ans, JSON_COMPACT);
	assert_int_equal(wire_beat_answer_take(text, strlen(text), epoch, &at, &got, &err),
			 -EINVAL);
	free(text);
	json_decref(ans);
	/* the beat: its endpoint, the group it holds, how often it beats,
	 * what NCCL's log of an attempt says */
	struct wire_nccl nccl = {
		.job = 3, .attempt = 2, .connections = {[NCCL_TR_NET] = 16}, .network = "IB"};
	struct wire_heartbeat hb = {
		.witness_port = 4711, .beat_ms = 1000, .nnccl = 1, .nccl = &nccl};
	snprintf(hb.node, sizeof(hb.node), "n1");
	snprintf(hb.agent_id, sizeof(hb.agent_id), "abababababababab");
	snprintf(hb.group_id, sizeof(hb.group_id), "%s", g.id);
	snprintf(hb.group_tag, sizeof(hb.group_tag), "%s", g.tag);
	json_t *j = wire_heartbeat_pack(&hb);
	struct wire_heartbeat back;
	assert_int_equal(wire_heartbeat_unpack(j, &back, &err), 0);
	assert_int_equal(back.witness_port, 4711);
	assert_int_equal(back.beat_ms, 1000);
	assert_int_equal(back.nnccl, 1);
	assert_true(back.nccl[0].job == 3 && back.nccl[0].attempt == 2 &&
		    back.nccl[0].connections[NCCL_TR_NET] == 16 &&
		    back.nccl[0].connections[NCCL_TR_SOCKET] == 0);
	assert_string_equal(back.nccl[0].network, "IB");
	wire_heartbeat_release(&back);
	json_object_set_new(json_array_get(json_object_get(j, "nccl"), 0), "connections",
			    parse("{\"socket\": -1}"));
	assert_true(wire_heartbeat_unpack(j, &back, &err) < 0);
	assert_non_null(strstr(err.text, "nccl[0].connections.socket"));
	json_object_del(j, "nccl");
	assert_int_equal(wire_heartbeat_unpack(j, &back, &err), 0);
	assert_string_equal(back.group_id, g.id);
	assert_string_equal(back.group_tag, g.tag);
	wire_heartbeat_release(&back);
	json_object_set_new(j, "beat_ms", json_integer(0));
	assert_true(wire_heartbeat_unpack(j, &back, &err) < 0);
	assert_non_null(strstr(err.text, "beat_ms"));
	json_object_del(j, "beat_ms"); /* an agent of before: not said */
	assert_int_equal(wire_heartbeat_unpack(j, &back, &err), 0);
	assert_int_equal(back.beat_ms, 0);
	wire_heartbeat_release(&back);
	json_object_set_new(json_object_get(j, "witness"), "port", json_integer(-1));
	assert_true(wire_heartbeat_unpack(j, &back, &err) < 0);
	assert_non_null(strstr(err.text, "witness"));
	json_decref(j);
	/* the node record keeps what was sent and acknowledged */
	struct node_record r;
	memset(&r, 0, sizeof(r));
	snprintf(r.inv.name, sizeof(r.inv.name), "n1");
	r.inv.cpus = 1;
	r.inv.mem_mib = 1;
	snprintf(r.witness_sent.id, sizeof(r.witness_sent.id), "%s", g.id);
	r.witness_sent.n = 2;
	snprintf(r.witness_sent.member[0], MODEL_NAME_MAX, "n1");
	snprintf(r.witness_sent.member[1], MODEL_NAME_MAX, "n2");
	/* an id the server never sent: its members are not known */
	snprintf(r.witness_acked.id, sizeof(r.witness_acked.id), "00000000000000ff");
	r.witness_acked.n = -1;
	j = node_record_pack(&r);
	struct node_record rb;
	assert_int_equal(node_record_unpack(j, &rb, &err), 0);
	assert_memory_equal(&rb.witness_sent, &r.witness_sent, sizeof(r.witness_sent));
	assert_string_equal(rb.witness_acked.id, "00000000000000ff");
	assert_int_equal(rb.witness_acked.n, -1);
	node_record_release(&rb);
	json_decref(j);
}

static void test_wire(void **state)
{
	struct tk_error err;
	/* a work spec: devices per task, the launch figures */
	int off[3] = {0, 2, 4}, devs[4] = {3, 1, 0, 2};
	char *argv[] = {"python3", "train.py"}, *env[] = {"A=1", "B=x=y"};
	struct work_spec sp = {.name = "train",
			       .argc = 2,
			       .argv = argv,
			       .cwd = "/home/u",
			       .nenv = 2,
			       .env = env,
			       .output = "o-%j",
			       .node_rank = 1,
			       .nnodes = 2,
			       .tasks_per_node = 2,
			       .world_size = 4,
			       .devs_off = off,
			       .devs = devs,
			       .milli = 1000,
			       .master_addr = "10.0.0.1",
			       .master_port = 29501,
			       .time_limit_s = 60,
			       .grace_s = 5,
			       .run_as = "alice",
			       .image = "registry.example/ml/torch:2.4",
			       .nmounts = 1,
			       .mounts = (char *[]){"/data:/data:ro"}};
	static const char dg[] =
		"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	struct work_item items[2] = {{.job = 7, .attempt = 2, .spec = &sp},
				     {.job = 8, .attempt = 1}};
	snprintf(items[1].digest, sizeof(items[1].digest), "%s", dg);
	/* the checkpoints of item 1: its store and what it restores */
	snprintf(items[1].ckpt_store, sizeof(items[1].ckpt_store), "/ckpt");
	snprintf(items[1].restore_tag, sizeof(items[1].restore_tag), "step-20");
	items[1].restore_step = 20;
	items[1].restore_attempt = 1;
	items[1].restore_from = 1; /* node rank 0's part: its own is not in the tag */
	items[1].signal_now = 12;
	/* item 1 is a service's replica: its probe, at its port */
	items[1].has_probe = true;
	items[1].port = 29512;
	items[1].probe = (struct job_probe){.path = "/healthz",
					    .interval_ms = 5000,
					    .timeout_ms = 1500,
					    .threshold = 4,
					    .start_ms = 60000};
	sp.port = 29500;
	sp.pty = true;
	struct wire_pty ptys[1] = {{.session = "0123abcd", .job = 7, .attempt = 2}};
	struct wire_endpoint ends[2] = {{.addr = "10.0.0.7", .port = 29517},
					{.addr = "10.0.0.8", .port = 29500}};
	struct wire_service svcs[2] = {{.name = "chat", .port = 8000, .nends = 2, .ends = ends},
				       {.name = "idle", .port = 8001}};
	struct wire_work w = {.epoch = "e1",
			      .gen = 9,
			      .nitems = 2,
			      .items = items,
			      .nptys = 1,
			      .ptys = ptys,
			      .has_services = true,
			      .nservices = 2,
			      .services = svcs},
			 back;
	json_t *j = wire_work_pack(&w);
	assert_int_equal(wire_work_unpack(j, &back, &err), 0);
	assert_int_equal(back.nitems, 2);
	assert_int_equal(back.nptys, 1);
	assert_string_equal(back.ptys[0].session, "0123abcd");
	assert_int_equal(back.ptys[0].job, 7);
	assert_int_equal(back.ptys[0].attempt, 2);
	assert_true(back.items[0].spec->pty);
	assert_int_equal(back.gen, 9);
	assert_null(back.items[1].spec);
	const struct work_spec *b = back.items[0].spec;
	assert_non_null(b);
	assert_string_equal(b->argv[1], "train.py");
	assert_string_equal(b->env[1], "B=x=y");
	int n;
	const int *d = work_spec_devices(b, 1, &n);
	assert_int_equal(n, 2);
	assert_int_equal(d[0], 0);
	assert_int_equal(d[1], 2);
	assert_int_equal(b->master_port, 29501);
	assert_string_equal(b->run_as, "alice");
	assert_false(b->allow_root);
	assert_string_equal(b->image, "registry.example/ml/torch:2.4");
	assert_int_equal(b->nmounts, 1);
	assert_string_equal(b->mounts[0], "/data:/data:ro");
	assert_string_equal(back.items[0].digest, "");
	assert_string_equal(back.items[1].digest, dg);
	assert_string_equal(back.items[0].ckpt_store, "");
	assert_string_equal(back.items[1].ckpt_store, "/ckpt");
	assert_string_equal(back.items[1].restore_tag, "step-20");
	assert_int_equal(back.items[1].restore_step, 20);
	assert_int_equal(back.items[1].restore_attempt, 1);
	assert_false(back.items[1].restore_go);
	assert_int_equal(back.items[1].restore_from, 1);
	assert_int_equal(back.items[0].restore_from, 0);
	assert_int_equal(back.items[1].signal_now, 12);
	assert_int_equal(back.items[0].signal_now, 0);
	assert_false(back.items[0].has_probe);
	assert_true(back.items[1].has_probe);
	assert_int_equal(back.items[1].port, 29512);
	assert_memory_equal(&back.items[1].probe, &items[1].probe, sizeof(items[1].probe));
	assert_int_equal(b->port, 29500);
	assert_true(back.has_services);
	assert_int_equal(back.nservices, 2);
	assert_string_equal(back.services[0].name, "chat");
	assert_int_equal(back.services[0].port, 8000);
	assert_int_equal(back.services[0].nends, 2);
	assert_string_equal(back.services[0].ends[1].addr, "10.0.0.8");
	assert_int_equal(back.services[0].ends[1].port, 29500);
	assert_int_equal(back.services[1].nends, 0);
	json_t *again = wire_work_pack(&back);
	assert_true(json_equal(j, again));
	json_decref(again);
	wire_work_release(&back);
	/* a terminal session's id is hex digits, nothing that could reach a URL */
	json_t *bp = parse("{\"epoch\": \"e\", \"gen\": 1, \"unchanged\": true, \"ptys\": "
			   "[{\"session\": \"ab&x=1\", \"job\": 1, \"attempt\": 1}]}");
	assert_true(wire_work_unpack(bp, &back, &err) < 0);
	assert_string_equal(err.text, "ptys[0].session: must be hex digits");
	json_decref(bp);
	/* a service's endpoint is an address and a port */
	bp = parse("{\"epoch\": \"e\", \"gen\": 1, \"tasks\": [], \"services\": [{\"name\": "
		   "\"s\", \"port\": 80, \"endpoints\": [{\"addr\": \"a\", \"port\": 0}]}]}");
	assert_true(wire_work_unpack(bp, &back, &err) < 0);
	assert_non_null(strstr(err.text, "services[0].endpoints[0]"));
	json_decref(bp);
	bp = parse("{\"epoch\": \"e\", \"gen\": 1, \"tasks\": []}");
	assert_int_equal(wire_work_unpack(bp, &back, &err), 0);
	assert_false(back.has_services); /* none said: the agent keeps its table */
	wire_work_release(&back);
	json_decref(bp);
	/* a node rank beyond the gang, a device beyond any node: refused */
	json_object_set_new(json_object_get(json_array_get(json_object_get(j, "tasks"), 0), "spec"),
			    "node_rank", json_integer(2));
	assert_true(wire_work_unpack(j, &back, &err) < 0);
	assert_non_null(strstr(err.text, "tasks[0].spec.node_rank 2 of 2 nodes"));
	json_decref(j);
	json_t *bad = parse(
		"{\"epoch\": \"e\", \"gen\": 1, \"tasks\": [{\"job\": 1, "
		"\"attempt\": 1, \"spec\": {\"name\": \"t\", \"command\": [\"x\"], "
		"\"cwd\": \"/\", \"env\": {}, \"output\": \"o\", \"node_rank\": 0, "
		"\"nnodes\": 1, \"tasks_per_node\": 1, \"world_size\": 1, "
		"\"devices\": [[64]], \"milli\": 1000, \"master_addr\": \"a\", "
		"\"master_port\": 1, \"time_limit_s\": 0, \"grace_s\": 1, \"run_as\": \"u\"}}]}");
	assert_true(wire_work_unpack(bad, &back, &err) < 0);
	assert_non_null(strstr(err.text, "tasks[0].spec.devices[0][0]: must be a device index"));
	/* a job's work names the account it runs as; only the server's own may not */
	json_t *spec = json_object_get(json_array_get(json_object_get(bad, "tasks"), 0), "spec");
	json_array_set_new(json_object_get(spec, "devices"), 0, json_array());
	json_object_del(spec, "run_as");
	assert_true(wire_work_unpack(bad, &back, &err) < 0);
	assert_string_equal(err.text, "tasks[0].spec.run_as: required field is missing");
	json_object_set_new(spec, "run_as", json_string("Alice Smith"));
	assert_true(wire_work_unpack(bad, &back, &err) < 0);
	assert_non_null(strstr(err.text, "is not a Unix account name"));
	json_object_set_new(spec, "run_as", json_string(""));
	json_object_set_new(spec, "system", json_true());
	assert_int_equal(wire_work_unpack(bad, &back, &err), 0);
	wire_work_release(&back);
	assert_true(model_unix_user_valid("alice") && model_unix_user_valid("a_b.c-1"));
	assert_false(model_unix_user_valid("-x") || model_unix_user_valid("Alice") ||
		     model_unix_user_valid("") || model_unix_user_valid("a b") ||
		     model_unix_user_valid("abcdefghijklmnopqrstuvwxyz0123456"));
	json_decref(bad);

	/* events: the cause travels as a word, and an unknown one is refused */
	struct task_event evs[2] = {
		{.job = 3, .attempt = 1, .rank = 0, .type = TASK_EVENT_STARTED, .at_ms = 5},
		{.job = 3,
		 .attempt = 1,
		 .rank = 0,
		 .type = TASK_EVENT_EXITED,
		 .at_ms = 9,
		 .exit_code = 127,
		 .cause = EXIT_LAUNCH_FAILED,
		 .detail = "command not found: x"},
	};
	struct wire_events m = {.node = "n1",
				.agent_id = "abababababababab",
				.nevents = 2,
				.events = evs},
			   mb;
	j = wire_events_pack(&m);
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(json_object_get(j, "events"), 1), "cause")),
			    "launch_failed");
	assert_int_equal(wire_events_unpack(j, &mb, &err), 0);
	assert_int_equal(mb.nevents, 2);
	assert_int_equal(mb.events[1].cause, EXIT_LAUNCH_FAILED);
	assert_string_equal(mb.events[1].detail, "command not found: x");
	assert_int_equal(mb.events[0].type, TASK_EVENT_STARTED);
	assert_false(mb.events[1].node_fault); /* absent: the job's own */
	wire_events_release(&mb);
	/* a launch its node could not make says so (protocol 2) */
	json_decref(j);
	evs[1].node_fault = true;
	j = wire_events_pack(&m);
	assert_true(json_is_true(
		json_object_get(json_array_get(json_object_get(j, "events"), 1), "node_fault")));
	assert_int_equal(wire_events_unpack(j, &mb, &err), 0);
	assert_true(mb.events[1].node_fault);
	assert_false(mb.events[1].fault_reported);
	wire_events_release(&mb);
	/* ... and one the node reports as its fault */
	json_decref(j);
	evs[1].fault_reported = true;
	j = wire_events_pack(&m);
	assert_true(json_is_true(json_object_get(json_array_get(json_object_get(j, "events"), 1),
						 "fault_reported")));
	assert_int_equal(wire_events_unpack(j, &mb, &err), 0);
	assert_true(mb.events[1].node_fault && mb.events[1].fault_reported);
	wire_events_release(&mb);
	/* a replica's probe: out of rotation (how, said), and stopped for it */
	json_decref(j);
	evs[0].type = TASK_EVENT_UNREADY;
	snprintf(evs[0].detail, sizeof(evs[0].detail), "GET /healthz at port 9: HTTP 500");
	evs[1] = (struct task_event){.job = 3,
				     .attempt = 1,
				     .type = TASK_EVENT_EXITED,
				     .at_ms = 9,
				     .signal = 15,
				     .exit_code = 143,
				     .cause = EXIT_UNHEALTHY};
	j = wire_events_pack(&m);
	assert_int_equal(wire_events_unpack(j, &mb, &err), 0);
	assert_int_equal(mb.events[0].type, TASK_EVENT_UNREADY);
	assert_string_equal(mb.events[0].detail, "GET /healthz at port 9: HTTP 500");
	assert_int_equal(mb.events[1].cause, EXIT_UNHEALTHY);
	assert_string_equal(exit_cause_name(EXIT_UNHEALTHY), "unhealthy");
	wire_events_release(&mb);
	json_object_set_new(json_array_get(json_object_get(j, "events"), 1), "cause",
			    json_string("bored"));
	assert_true(wire_events_unpack(j, &mb, &err) < 0);
	assert_non_null(strstr(err.text, "events[1].cause: must be exited, signalled"));
	json_decref(j);
	/* no cause: what the exit itself says */
	j = parse("{\"node\": \"n\", \"agent_id\": \"abababababababab\", \"events\": [{\"job\": 1, "
		  "\"attempt\": 1, \"rank\": 0, \"type\": \"exited\", \"at_ms\": 1, "
		  "\"exit_code\": 137, \"signal\": 9}]}");
	assert_int_equal(wire_events_unpack(j, &mb, &err), 0);
	assert_int_equal(mb.events[0].cause, EXIT_SIGNALLED);
	wire_events_release(&mb);
	json_decref(j);
	for (int c = 0; c < EXIT_CAUSE_MAX; c++) {
		enum exit_cause got;
		assert_int_equal(exit_cause_parse(exit_cause_name((enum exit_cause)c), &got), 0);
		assert_int_equal(got, c);
	}

	/* register and heartbeat: an agent id is hex, checkpoints are named */
	j = parse("{\"agent_id\": \"XYZ12345\", \"inventory\": {\"name\": \"n1\", "
		  "\"cpus\": 1, \"mem_mib\": 1}}");
	struct wire_register *reg = malloc(sizeof(*reg));
	assert_true(wire_register_unpack(j, reg, &err) < 0);
	assert_string_equal(err.text, "agent_id: must be 8 to 63 lowercase hex digits");
	json_object_set_new(j, "agent_id", json_string("0123abcd"));
	assert_int_equal(wire_register_unpack(j, reg, &err), 0);
	assert_string_equal(reg->inv.name, "n1");
	assert_int_equal(reg->nkept, 0);
	/* the attempts an agent found its shims of, each by job and attempt */
	json_object_set_new(j, "kept", parse("[{\"job\": 4, \"attempt\": 2}]"));
	assert_int_equal(wire_register_unpack(j, reg, &err), 0);
	assert_int_equal(reg->nkept, 1);
	assert_int_equal(reg->kept[0].job, 4);
	assert_int_equal(reg->kept[0].attempt, 2);
	json_t *packed = wire_register_pack(reg);
	assert_true(json_equal(json_object_get(packed, "kept"), json_object_get(j, "kept")));
	json_decref(packed);
	wire_register_release(reg);
	/* a newer agent's keys are ignored; a known key malformed is refused */
	json_object_set_new(j, "kept", parse("[{\"job\": 4, \"attempt\": 2, \"x\": 1}]"));
	json_object_set_new(j, "newer", json_true());
	assert_int_equal(wire_register_unpack(j, reg, &err), 0);
	assert_int_equal(reg->nkept, 1);
	assert_int_equal(reg->protocol, 1); /* it said none */
	wire_register_release(reg);
	json_object_set_new(j, "protocol", json_integer(WIRE_PROTOCOL));
	assert_int_equal(wire_register_unpack(j, reg, &err), 0);
	assert_int_equal(reg->protocol, WIRE_PROTOCOL);
	/* what the node's cgroups cannot limit, named; a newer agent's limit
	 * that this server cannot name is left out; a bad version refused */
	assert_false(reg->inv.isolation_known);
	wire_register_release(reg);
	json_object_set_new(json_object_get(j, "inventory"), "isolation",
			    parse("{\"cgroup\": 2, \"unenforced\": [\"processes\", "
				  "\"devices\", \"gpu-clocks\"]}"));
	assert_int_equal(wire_register_unpack(j, reg, &err), 0);
	assert_true(reg->inv.isolation_known);
	assert_int_equal(reg->inv.cgroup_version, 2);
	assert_int_equal(reg->inv.unenforced, NODE_LIMIT_PROCESSES | NODE_LIMIT_DEVICES);
	packed = wire_register_pack(reg);
	json_t *iso = json_object_get(json_object_get(packed, "inventory"), "isolation");
	json_t *want = parse("{\"cgroup\": 2, \"unenforced\": [\"processes\", \"devices\"]}");
	assert_true(json_equal(iso, want));
	json_decref(want);
	json_decref(packed);
	/* to a protocol-1 peer (0.1.0 refuses keys it does not know): no key */
	reg->protocol = 1;
	packed = wire_register_pack(reg);
	assert_null(json_object_get(packed, "protocol"));
	assert_null(json_object_get(json_object_get(packed, "inventory"), "isolation"));
	json_decref(packed);
	wire_register_release(reg);
	json_object_set_new(json_object_get(j, "inventory"), "isolation",
			    parse("{\"cgroup\": 3, \"unenforced\": []}"));
	assert_true(wire_register_unpack(j, reg, &err) < 0);
	assert_non_null(strstr(err.text, "isolation.cgroup"));
	json_object_del(json_object_get(j, "inventory"), "isolation");
	assert_int_equal(wire_register_unpack(j, reg, &err), 0);
	reg->protocol = 1;
	struct wire_registered ans = {.node = "n1", .epoch = "e", .node_timeout_ms = 1000};
	packed = wire_registered_pack(&ans);
	assert_int_equal(json_integer_value(json_object_get(packed, "protocol")), WIRE_PROTOCOL);
	json_decref(packed);
	/* the cluster's GPU thresholds travel to a protocol-2 agent, whole */
	ans.has_gpu_health = true;
	sched_config_gpu_default(&ans.gpu_health);
	ans.gpu_health.temp_c = 90;
	ans.gpu_health.hold_ms = 2000;
	ans.gpu_health.pcie = false;
	ans.heartbeat_ms = 1000; /* power fencing asks beats of a second */
	packed = wire_registered_pack(&ans);
	struct wire_registered got;
	assert_int_equal(wire_registered_unpack(packed, &got, &err), 0);
	assert_int_equal(got.heartbeat_ms, 1000);
	assert_true(got.has_gpu_health && got.gpu_health.temp_c == 90 &&
		    got.gpu_health.hold_ms == 2000 && !got.gpu_health.pcie &&
		    got.gpu_health.throttle && got.gpu_health.rows == 1 &&
		    got.gpu_health.power_pct == 40 && got.gpu_health.busy_pct == 80);
	/* a newer server's key in it is ignored, a known one malformed refused */
	json_object_set_new(json_object_get(packed, "gpu_health"), "newer", json_true());
	assert_int_equal(wire_registered_unpack(packed, &got, &err), 0);
	json_object_set_new(json_object_get(packed, "gpu_health"), "temp_c", json_string("hot"));
	assert_true(wire_registered_unpack(packed, &got, &err) < 0);
	assert_non_null(strstr(err.text, "gpu_health"));
	assert_non_null(strstr(err.text, "temp_c"));
	json_decref(packed);
	/* to a protocol-1 agent: none of these keys */
	ans.protocol = 1;
	packed = wire_registered_pack(&ans);
	assert_null(json_object_get(packed, "protocol"));
	assert_null(json_object_get(packed, "gpu_health"));
	assert_null(json_object_get(packed, "heartbeat_ms"));
	json_decref(packed);
	wire_register_release(reg);
	json_object_set_new(j, "kept", parse("[{\"job\": 4, \"attempt\": \"two\"}]"));
	assert_true(wire_register_unpack(j, reg, &err) < 0);
	assert_non_null(strstr(err.text, "kept[0]"));
	assert_null(reg->kept);
	free(reg);
	json_decref(j);
	j = parse("{\"node\": \"n\", \"agent_id\": \"abababababababab\", \"checkpoints\": "
		  "[{\"job\": 1, \"attempt\": 1, \"at_ms\": 7}, {\"job\": 1, \"attempt\": 0, "
		  "\"at_ms\": 7}]}");
	struct wire_heartbeat hb;
	assert_true(wire_heartbeat_unpack(j, &hb, &err) < 0);
	assert_non_null(strstr(err.text, "checkpoints[1].attempt: must be an integer from 1"));
	json_decref(j);
	/* an agent's last beat says it stops */
	j = parse("{\"node\": \"n\", \"agent_id\": \"abababababababab\", \"stopping\": true}");
	assert_int_equal(wire_heartbeat_unpack(j, &hb, &err), 0);
	assert_true(hb.stopping);
	wire_heartbeat_release(&hb);
	json_object_set_new(j, "stopping", json_string("yes"));
	assert_true(wire_heartbeat_unpack(j, &hb, &err) < 0);
	assert_non_null(strstr(err.text, "stopping"));
	json_decref(j);
	/* what its accelerators read: round trip; what was not read stays -1;
	 * a check this side does not know is skipped, a malformed one refused */
	{
		struct wire_heartbeat g = {.node = "n", .agent_id = "abababababababab", .ngpus = 2};
		g.gpus[0] = (struct wire_gpu){
			0, 95, 71, 650, 700, true, 1u << GPU_CHECK_PCIE | 1u << GPU_CHECK_ROWS};
		g.gpus[1] = (struct wire_gpu){3, -1, -1, -1, -1, false, 0};
		json_t *gp = wire_heartbeat_pack(&g);
		struct wire_heartbeat hb2;
		assert_int_equal(wire_heartbeat_unpack(gp, &hb2, &err), 0);
		assert_int_equal(hb2.ngpus, 2);
		for (int i = 0; i < 2; i++) {
			const struct wire_gpu *x = &hb2.gpus[i], *y = &g.gpus[i];
			assert_true(x->index == y->index && x->util_pct == y->util_pct &&
				    x->temp_c == y->temp_c && x->power_w == y->power_w &&
				    x->power_limit_w == y->power_limit_w &&
				    x->slowed == y->slowed && x->failing == y->failing);
		}
		wire_heartbeat_release(&hb2);
		json_t *f =
			json_object_get(json_array_get(json_object_get(gp, "gpus"), 0), "failing");
		assert_string_equal(json_string_value(json_array_get(f, 0)), "pcie");
		json_array_append_new(f, json_string("newer_check"));
		assert_int_equal(wire_heartbeat_unpack(gp, &hb2, &err), 0);
		assert_int_equal(hb2.gpus[0].failing, g.gpus[0].failing);
		wire_heartbeat_release(&hb2);
		json_array_append_new(f, json_integer(3));
		assert_true(wire_heartbeat_unpack(gp, &hb2, &err) < 0);
		assert_non_null(strstr(err.text, "gpus[0].failing[3]"));
		json_object_set_new(json_array_get(json_object_get(gp, "gpus"), 1), "util_pct",
				    json_integer(101));
		json_array_remove(f, 3);
		assert_true(wire_heartbeat_unpack(gp, &hb2, &err) < 0);
		assert_non_null(strstr(err.text, "gpus[1].util_pct"));
		json_decref(gp);
	}
	/* the node's images and pulls: both or neither, round trip, checked */
	struct wire_image im = {.ref = "reg.example/ml/torch:2.4", .size_mib = 9};
	snprintf(im.digest, sizeof(im.digest), "sha256:%064d", 7);
	struct wire_pull pl = {.ref = "reg.example/x:1", .state = PULL_FAILED, .detail = "nope"};
	struct wire_heartbeat out = {.node = "n",
				     .agent_id = "abababababababab",
				     .has_images = true,
				     .nimages = 1,
				     .images = &im,
				     .npulls = 1,
				     .pulls = &pl};
	j = wire_heartbeat_pack(&out);
	assert_int_equal(wire_heartbeat_unpack(j, &hb, &err), 0);
	assert_true(hb.has_images);
	assert_int_equal(hb.nimages, 1);
	assert_string_equal(hb.images[0].digest, im.digest);
	assert_int_equal(hb.images[0].size_mib, 9);
	assert_int_equal(hb.pulls[0].state, PULL_FAILED);
	assert_string_equal(hb.pulls[0].detail, "nope");
	wire_heartbeat_release(&hb);
	json_object_del(j, "pulls");
	assert_true(wire_heartbeat_unpack(j, &hb, &err) < 0);
	assert_non_null(strstr(err.text, "one comes with the other"));
	json_object_set_new(j, "pulls", json_array());
	json_object_set_new(json_array_get(json_object_get(j, "images"), 0), "digest",
			    json_string("sha256:XYZ"));
	assert_true(wire_heartbeat_unpack(j, &hb, &err) < 0);
	assert_non_null(strstr(err.text, "images[0].digest"));
	json_decref(j);
}

/* Fencing: for every node timeout, the tasks of a node cut off are gone a
 * quarter of it before the server may run them elsewhere, the shim's grace
 * fits in the lease, and four heartbeats fit in one. */
static void test_lease(void **state)
{
	static const int64_t timeouts[] = {1000, 3000, 5000, 7777, 30000, 60000, 86400000};
	for (size_t i = 0; i < ARRAY_SIZE(timeouts); i++) {
		int64_t t = timeouts[i];
		struct wire_lease l;
		wire_lease_of(t, 5000, &l);
		assert_int_equal(l.bound_ms, l.lease_ms + l.fence_grace_ms);
		assert_true(l.bound_ms + t / 4 <= t);
		assert_true(l.lease_ms > 0 && l.fence_grace_ms > 0);
		assert_true(l.fence_grace_ms <= l.lease_ms / 2);
		assert_true(l.heartbeat_ms * 4 <= l.lease_ms);
		assert_true(l.heartbeat_ms <= 5000);
	}
	struct wire_lease l;
	wire_lease_of(30000, 5000, &l);
	assert_int_equal(l.lease_ms, 15000);
	assert_int_equal(l.fence_grace_ms, 7500);
	assert_int_equal(l.heartbeat_ms, 3000); /* a tenth: fence.h's proofs join up */
	wire_lease_of(30000, 1000, &l);
	assert_int_equal(l.heartbeat_ms, 1000); /* more often when asked */
}

/* $TENK_METRICS lines: NAME=NUMBER words, step an integer, the rest
 * skipped; the history halves when full and survives a round trip. */
static void test_train_metrics(void **state)
{
	struct train_point p;
	const char *line = "step=120 loss=2.31 lr=3e-4 tokens_per_s=1.2e5 bad=x =1 9n=2 nan=nan w";
	assert_int_equal(train_line_parse(line, strlen(line), &p), 3);
	assert_int_equal(p.step, 120);
	assert_string_equal(p.name[0], "loss");
	assert_true(p.value[0] == 2.31);
	assert_string_equal(p.name[2], "tokens_per_s");
	assert_int_equal(train_line_parse("hello world", 11, &p), 0);
	assert_int_equal(train_line_parse("step=1.5 loss=1", 15, &p), 1);
	assert_int_equal(p.step, -1);

	struct train_metrics *m = calloc(1, sizeof(*m));
	for (int i = 0; i < MODEL_TRAIN_HISTORY + 10; i++) {
		char l[64];
		snprintf(l, sizeof(l), "step=%d loss=%d", i, 1000 - i);
		train_line_parse(l, strlen(l), &p);
		p.at_ms = 1000 + i;
		train_metrics_add(m, &p);
	}
	assert_int_equal(m->last.step, MODEL_TRAIN_HISTORY + 9);
	assert_true(m->last.value[0] == 1000 - (MODEL_TRAIN_HISTORY + 9));
	assert_int_equal(m->nhist, MODEL_TRAIN_HISTORY / 2 + 10);
	assert_int_equal(m->hist_step[0], 0);
	assert_int_equal(m->hist_step[1], 2); /* every other point went */
	assert_int_equal(m->hist_step[m->nhist - 1], MODEL_TRAIN_HISTORY + 9);
	json_t *j = train_metrics_pack(m);
	struct train_metrics *back = calloc(1, sizeof(*back));
	struct tk_error err;
	assert_int_equal(train_metrics_unpack(j, back, &err), 0);
	assert_int_equal(back->nhist, m->nhist);
	assert_int_equal(back->nplot, 1);
	assert_true(back->hist[5][0] == m->hist[5][0]);
	assert_int_equal(back->last.at_ms, m->last.at_ms);
	json_decref(j);
	j = json_pack("{s:I, s:{s:s}}", "step", (json_int_t)1, "values", "loss", "high");
	assert_true(train_point_unpack(j, &p, &err) < 0);
	assert_non_null(strstr(err.text, "values.loss: must be a finite number"));
	json_decref(j);
	free(m);
	free(back);
}

/* The recorded sysfs trees (tests/data/sysfs/README.md): an 8-GPU
 * InfiniBand node and a RoCE node, read as an agent reads /sys. */
static void test_fabric_of_recorded_trees(void **state)
{
	const char *data = getenv("TENK_TEST_DATA");
	if (!data)
		fail_msg("TENK_TEST_DATA is not set: meson test sets it to tests/data");
	struct node_inventory *inv = xcalloc(1, sizeof(*inv));
	_cleanup_free_ char *ib = xasprintf("%s/sysfs/ib-8gpu", data);
	node_fabric_read(inv, ib);
	/* eight IPoIB interfaces, the management port, the bridge; no loopback */
	assert_int_equal(inv->nnics, 10);
	assert_string_equal(inv->nics[0].name, "docker0");
	assert_true(inv->nics[0].virt && !inv->nics[0].up && inv->nics[0].speed_mbps == -1);
	assert_string_equal(inv->nics[1].name, "eno1");
	assert_string_equal(inv->nics[1].driver, "i40e");
	assert_true(inv->nics[1].speed_mbps == 10000 && inv->nics[1].rdma[0] == 0);
	int ib_ifs = 0;
	for (int i = 0; i < inv->nnics; i++) {
		const struct nic *c = &inv->nics[i];
		if (c->kind != NIC_INFINIBAND)
			continue;
		ib_ifs++;
		assert_true(c->up && c->speed_mbps == 400000 && c->mtu == 4092 && !c->virt);
		assert_string_equal(c->driver, "mlx5_core");
		assert_true(strncmp(c->rdma, "mlx5_", 5) == 0);
	}
	assert_int_equal(ib_ifs, 8);
	const struct nic *first = NULL, *last = NULL;
	for (int i = 0; i < inv->nnics; i++) {
		if (strcmp(inv->nics[i].name, "ibp24s0") == 0)
			first = &inv->nics[i];
		if (strcmp(inv->nics[i].name, "ibp220s0") == 0)
			last = &inv->nics[i];
	}
	assert_non_null(first);
	assert_non_null(last);
	assert_string_equal(first->pci, "0000:18:00.0");
	assert_string_equal(first->rdma, "mlx5_0");
	assert_int_equal(first->numa, 0);
	assert_string_equal(last->pci, "0000:dc:00.0");
	assert_string_equal(last->rdma, "mlx5_7");
	assert_int_equal(last->numa, 1);
	assert_int_equal(inv->nrdma, 8);
	for (int i = 0; i < inv->nrdma; i++) {
		const struct rdma_port *p = &inv->rdma[i];
		assert_true(p->active && !p->ethernet && p->port == 1 && p->rate_gbps == 400.0 &&
			    p->gids == 8);
		assert_string_equal(p->state, "ACTIVE");
	}
	assert_string_equal(inv->rdma[4].dev, "mlx5_4");
	assert_string_equal(inv->rdma[4].pci, "0000:9a:00.0");
	assert_int_equal(inv->rdma[4].numa, 1);
	assert_string_equal(node_fabric_of(inv), "ib");
	assert_int_equal(inv->ngpu_places, 0); /* no accelerator known: none placed */
	/* eight GPUs known (NVML's count, or --fake-gpus): each found on the
	 * PCI tree in address order, its nearest port the HCA behind its switch */
	inv->naccel = 8;
	for (int i = 0; i < 8; i++)
		inv->accel[i].index = i;
	node_fabric_read(inv, ib);
	assert_int_equal(inv->ngpu_places, 8);
	static const char *const gpu_pci[] = {"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0",
					      "0000:61:00.0", "0000:9d:00.0", "0000:c3:00.0",
					      "0000:d1:00.0", "0000:df:00.0"};
	for (int i = 0; i < 8; i++) {
		char want[16];
		snprintf(want, sizeof(want), "mlx5_%d:1", i);
		assert_string_equal(inv->gpu_places[i].pci, gpu_pci[i]);
		assert_string_equal(inv->gpu_places[i].hca, want);
		assert_int_equal(inv->gpu_places[i].shared, 2);
		assert_int_equal(inv->gpu_places[i].numa, i < 4 ? 0 : 1);
	}
	char hca[64];
	int two[] = {3, 2}, same[] = {5, 5}, none[] = {9};
	assert_true(node_hca_of(inv, two, 2, hca, sizeof(hca)));
	assert_string_equal(hca, "=mlx5_3:1,mlx5_2:1");
	assert_true(node_hca_of(inv, same, 2, hca, sizeof(hca)));
	assert_string_equal(hca, "=mlx5_5:1");
	assert_false(node_hca_of(inv, none, 1, hca, sizeof(hca)));
	/* a port down is no GPU's: the next nearest, on its NUMA node */
	inv->rdma[1].active = false;
	node_gpu_places_read(inv, ib);
	assert_int_equal(inv->gpu_places[1].shared, -1);
	assert_true(strcmp(inv->gpu_places[1].hca, "mlx5_0:1") == 0);
	/* and as the API carries them */
	json_t *nj = node_network_pack(inv);
	struct node_inventory *back = xcalloc(1, sizeof(*back));
	struct tk_error err;
	assert_int_equal(node_network_unpack(nj, back, &err), 0);
	assert_int_equal(back->ngpu_places, 8);
	assert_string_equal(back->gpu_places[7].hca, "mlx5_7:1");
	assert_int_equal(back->gpu_places[1].shared, -1);
	json_decref(nj);
	free(back);

	memset(inv, 0, sizeof(*inv));
	_cleanup_free_ char *roce = xasprintf("%s/sysfs/roce", data);
	node_fabric_read(inv, roce);
	assert_int_equal(inv->nnics, 3);
	assert_string_equal(inv->nics[1].name, "ens1f0np0");
	assert_true(inv->nics[1].kind == NIC_ETHERNET && inv->nics[1].mtu == 9000 &&
		    inv->nics[1].speed_mbps == 100000 && inv->nics[1].numa == 1);
	assert_string_equal(inv->nics[1].rdma, "mlx5_0");
	assert_string_equal(inv->nics[2].pci, "0000:41:00.1");
	assert_int_equal(inv->nrdma, 2);
	assert_true(inv->rdma[1].ethernet && inv->rdma[1].active &&
		    inv->rdma[1].rate_gbps == 100.0 && inv->rdma[1].gids == 8);
	assert_string_equal(node_fabric_of(inv), "roce");
	/* RoCE ECN from the driver's ecn/ folders, on priority 3 (bit 3);
	 * PFC is the kernel's DCB netlink's, not the tree's; eno1 has no RDMA */
	assert_int_equal(inv->nics[1].ecn_np, 1 << 3);
	assert_int_equal(inv->nics[2].ecn_rp, 1 << 3);
	assert_int_equal(inv->nics[1].pfc, -1);
	assert_int_equal(inv->nics[0].ecn_np, -1);
	inv->nics[2].pfc = 1 << 3 | 1 << 4;
	/* and as the API shows them */
	json_t *j = node_network_pack(inv);
	json_t *p0 = json_array_get(json_object_get(j, "rdma"), 0);
	assert_string_equal(json_string_value(json_object_get(p0, "link_layer")), "Ethernet");
	json_t *i2 = json_array_get(json_object_get(j, "interfaces"), 2);
	char *text = json_dumps(json_object_get(i2, "pfc"), JSON_COMPACT);
	assert_string_equal(text, "[3,4]");
	free(text);
	assert_null(json_object_get(json_array_get(json_object_get(j, "interfaces"), 0), "pfc"));
	struct node_inventory *again = xcalloc(1, sizeof(*again));
	assert_int_equal(node_network_unpack(j, again, &err), 0);
	assert_int_equal(again->nics[2].pfc, 0x18);
	assert_int_equal(again->nics[1].ecn_rp, 0x08);
	assert_int_equal(again->nics[1].pfc, -1);
	assert_int_equal(again->nics[0].ecn_np, -1);
	/* a priority out of 0-7 is named */
	json_object_set_new(i2, "pfc", json_pack("[i]", 9));
	assert_int_equal(node_network_unpack(j, again, &err), -EINVAL);
	assert_non_null(strstr(err.text, "pfc[0]: want a priority, 0 to 7"));
	free(again);
	json_decref(j);
	free(inv);
}

/* An answer of the kernel's DCB netlink, as net/dcb/dcbnl.c builds one for
 * DCB_CMD_IEEE_GET: the header, struct dcbmsg, DCB_ATTR_IFNAME, then
 * DCB_ATTR_IEEE nesting DCB_ATTR_IEEE_ETS and DCB_ATTR_IEEE_PFC (struct
 * ieee_pfc whole); with_pfc false: a driver without ieee_getpfc. */
static size_t dcb_answer(char *buf, size_t n, bool with_pfc, int pfc_en)
{
	memset(buf, 0, n);
	struct nlmsghdr *nh = (struct nlmsghdr *)buf;
	struct dcbmsg *d = NLMSG_DATA(nh);
	d->dcb_family = AF_UNSPEC;
	d->cmd = DCB_CMD_IEEE_GET;
	size_t off = NLMSG_LENGTH(NLMSG_ALIGN(sizeof(*d)));
	struct nlattr *a = (struct nlattr *)(buf + off);
	a->nla_type = DCB_ATTR_IFNAME;
	a->nla_len = NLA_HDRLEN + sizeof("ens1f0np0");
	memcpy(a + 1, "ens1f0np0", sizeof("ens1f0np0"));
	off += NLA_ALIGN(a->nla_len);
	struct nlattr *ieee = (struct nlattr *)(buf + off);
	ieee->nla_type = DCB_ATTR_IEEE | NLA_F_NESTED;
	size_t in = off + NLA_HDRLEN;
	struct nlattr *ets = (struct nlattr *)(buf + in);
	ets->nla_type = DCB_ATTR_IEEE_ETS;
	ets->nla_len = NLA_HDRLEN + sizeof(struct ieee_ets);
	in += NLA_ALIGN(ets->nla_len);
	if (with_pfc) {
		struct nlattr *p = (struct nlattr *)(buf + in);
		p->nla_type = DCB_ATTR_IEEE_PFC;
		p->nla_len = NLA_HDRLEN + sizeof(struct ieee_pfc);
		struct ieee_pfc pfc = {.pfc_cap = 8, .pfc_en = (__u8)pfc_en};
		pfc.requests[3] = 12;
		memcpy(p + 1, &pfc, sizeof(pfc));
		in += NLA_ALIGN(p->nla_len);
	}
	ieee->nla_len = (unsigned short)(in - off);
	nh->nlmsg_len = (unsigned)in;
	nh->nlmsg_type = RTM_GETDCB;
	return in;
}

static void test_dcb_pfc(void **state)
{
	(void)state;
	_Alignas(8) char buf[1024]; /* as the kernel's answers are read */
	struct node_pfc p;
	size_t n = dcb_answer(buf, sizeof(buf), true, 1 << 3);
	assert_int_equal(node_dcb_pfc_parse(buf, n, &p), 0);
	assert_int_equal(p.en, 1 << 3);
	assert_true(p.requests[3] == 12 && p.indications[3] == 0 && p.requests[0] == 0);
	assert_int_equal(node_dcb_pfc_parse(buf, n - 1, &p), -EBADMSG); /* cut short */
	n = dcb_answer(buf, sizeof(buf), true, 0);
	assert_int_equal(node_dcb_pfc_parse(buf, n, &p), 0); /* PFC off on all eight */
	assert_int_equal(p.en, 0);
	n = dcb_answer(buf, sizeof(buf), false, 0);
	assert_int_equal(node_dcb_pfc_parse(buf, n, &p), -ENODATA);
	/* an attribute longer than its message */
	n = dcb_answer(buf, sizeof(buf), true, 1);
	((struct nlattr *)(buf + NLMSG_LENGTH(NLMSG_ALIGN(sizeof(struct dcbmsg)))))->nla_len = 900;
	assert_int_equal(node_dcb_pfc_parse(buf, n, &p), -EBADMSG);
	/* the kernel's refusal: a driver without DCB */
	memset(buf, 0, sizeof(buf));
	struct nlmsghdr *nh = (struct nlmsghdr *)buf;
	nh->nlmsg_type = NLMSG_ERROR;
	nh->nlmsg_len = NLMSG_LENGTH(sizeof(struct nlmsgerr));
	((struct nlmsgerr *)NLMSG_DATA(nh))->error = -EOPNOTSUPP;
	assert_int_equal(node_dcb_pfc_parse(buf, nh->nlmsg_len, &p), -EOPNOTSUPP);
	assert_int_equal(node_dcb_pfc_parse(buf, 4, &p), -EBADMSG);
	/* and this machine's kernel, asked: loopback has no DCB, and no such
	 * interface is no such device (the request was read: a malformed one
	 * is EINVAL) */
	assert_int_equal(node_pfc_read("lo", &p), -EOPNOTSUPP);
	assert_int_equal(node_pfc_read("tenk-none0", &p), -ENODEV);
	assert_int_equal(node_pfc_read("a-name-longer-than-ifnamsiz", &p), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_valid),
		cmocka_unit_test(test_request_invalid),
		cmocka_unit_test(test_request_limits),
		cmocka_unit_test(test_job_roundtrip),
		cmocka_unit_test(test_states),
		cmocka_unit_test(test_fake_accels),
		cmocka_unit_test(test_catalogue),
		cmocka_unit_test(test_node_record),
		cmocka_unit_test(test_config_validation),
		cmocka_unit_test(test_labels_and_constraints),
		cmocka_unit_test(test_pools),
		cmocka_unit_test(test_fault_domains),
		cmocka_unit_test(test_gpu_label),
		cmocka_unit_test(test_wire),
		cmocka_unit_test(test_wire_witness),
		cmocka_unit_test(test_lease),
		cmocka_unit_test(test_train_metrics),
		cmocka_unit_test(test_request_daily_fields),
		cmocka_unit_test(test_request_table),
		cmocka_unit_test(test_hostlist),
		cmocka_unit_test(test_goodput),
		cmocka_unit_test(test_goodput_fields),
		cmocka_unit_test(test_node_stack),
		cmocka_unit_test(test_reference_compare),
		cmocka_unit_test(test_fabric_of_recorded_trees),
		cmocka_unit_test(test_dcb_pfc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
