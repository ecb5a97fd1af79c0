/*
 * Unit tests of the scheduler: a case for each rule, then properties over
 * thousands of random clusters and queues (fixed seeds) that must hold for
 * any input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>

#include "sched/sched.h"

/* ---- a cluster builder -------------------------------------------------------------- */

#define MAXN 64
#define MAXJ 256
#define MAXR 128

struct cluster {
	struct sched_node nodes[MAXN];
	struct sched_dev devs[MAXN][MODEL_MAX_ACCELS];
	char names[MAXN][16];
	char topo[MAXN][32];
	int n;
	struct sched_job jobs[MAXJ];
	const struct sched_job *ptrs[MAXJ];
	int nj;
	struct sched_running run[MAXR];
	struct sched_assign run_nodes[MAXR][8];
	int nr;
	struct sched_class classes[MODEL_MAX_CLASSES];
	int nclasses;
	struct sched_queue queues[4];
	int nqueues;
	struct sched_policy policy;
	int64_t now;
	struct sched_window windows[4];
	int win_nodes[4][MAXN];
	int nwin;
	struct sched_qdim dims[4][4];
	struct sched_model_weight weights[3];
	int nweights;
};

enum { BATCH, NORMAL, PROD };

static void init(struct cluster *c)
{
	memset(c, 0, sizeof(*c));
	c->classes[BATCH] = (struct sched_class){
		.name = "batch", .priority = 10, .may_preempt = false, .preemptible = true};
	c->classes[NORMAL] = (struct sched_class){
		.name = "normal", .priority = 50, .may_preempt = false, .preemptible = false};
	c->classes[PROD] = (struct sched_class){
		.name = "prod", .priority = 100, .may_preempt = true, .preemptible = false};
	c->nclasses = 3;
	c->queues[0] = (struct sched_queue){"default", -1, -1, 1, 0, 0, NULL};
	c->nqueues = 1;
	c->now = 1000000000;
}

static int add_node(struct cluster *c, const char *model, int ndev, int cpus)
{
	int i = c->n++;
	snprintf(c->names[i], sizeof(c->names[i]), "n%02d", i);
	struct sched_node *n = &c->nodes[i];
	memset(n, 0, sizeof(*n));
	n->name = c->names[i];
	n->topology = c->topo[i];
	n->schedulable = true;
	n->cpus_total = n->cpus_free = cpus;
	n->mem_total_mib = n->mem_free_mib = 1 << 20;
	n->ndev = ndev;
	n->devs = c->devs[i];
	for (int d = 0; d < ndev; d++) {
		c->devs[i][d].model = model;
		c->devs[i][d].free_milli = MODEL_MILLI;
		c->devs[i][d].mem_mib =
			strstr(model, "80") || strcmp(model, "H100") == 0 ? 81920 : 16384;
		c->devs[i][d].tflops = strcmp(model, "H100") == 0 ? 989
				       : strcmp(model, "T4") == 0 ? 65
								  : 312;
	}
	return i;
}

static struct sched_job *add_job(struct cluster *c, int nodes, int tpn, int gpu_milli)
{
	int i = c->nj++;
	struct sched_job *j = &c->jobs[i];
	memset(j, 0, sizeof(*j));
	j->id = 100 + i;
	j->cls = NORMAL;
	j->nodes = nodes;
	j->tasks_per_node = tpn;
	j->gpu_milli = gpu_milli;
	j->submit_ms = i;
	c->ptrs[i] = j;
	return j;
}

/* A running job holding `ndev` whole devices (from the first free ones) on
 * each listed node; takes them out of what is free. */
static struct sched_running *add_running(struct cluster *c, int cls, int ndev, int nnodes, ...)
{
	int i = c->nr++;
	struct sched_running *r = &c->run[i];
	memset(r, 0, sizeof(*r));
	r->id = 1 + i;
	r->cls = cls;
	r->start_ms = c->now - 60000;
	r->nnodes = nnodes;
	r->nodes = c->run_nodes[i];
	va_list ap;
	va_start(ap, nnodes);
	for (int k = 0; k < nnodes; k++) {
		int node = va_arg(ap, int);
		struct sched_assign *a = &c->run_nodes[i][k];
		memset(a, 0, sizeof(*a));
		a->node = node;
		a->milli = MODEL_MILLI;
		for (int d = 0; d < c->nodes[node].ndev && a->ndev < ndev; d++)
			if (c->devs[node][d].free_milli == MODEL_MILLI) {
				c->devs[node][d].free_milli = 0;
				a->devs[a->ndev++] = d;
			}
		assert_int_equal(a->ndev, ndev);
	}
	va_end(ap);
	return r;
}

/* Two passes over the same snapshot decided the same: starts and where,
 * victims, each wait's reason, reference and text. */
static void same_decisions(const struct sched_decisions *d, const struct sched_decisions *k)
{
	assert_int_equal(k->nstarts, d->nstarts);
	for (int i = 0; i < d->nstarts; i++) {
		assert_int_equal(k->starts[i].job, d->starts[i].job);
		assert_int_equal(k->starts[i].nnodes, d->starts[i].nnodes);
		assert_memory_equal(k->starts[i].nodes, d->starts[i].nodes,
				    sizeof(*d->starts[i].nodes) * (size_t)d->starts[i].nnodes);
	}
	assert_int_equal(k->npreempts, d->npreempts);
	for (int i = 0; i < d->npreempts; i++) {
		assert_int_equal(k->preempts[i].victim, d->preempts[i].victim);
		assert_int_equal(k->preempts[i].job, d->preempts[i].job);
	}
	assert_int_equal(k->nwaits, d->nwaits);
	for (int i = 0; i < d->nwaits; i++) {
		assert_int_equal(k->waits[i].job, d->waits[i].job);
		assert_int_equal(k->waits[i].reason, d->waits[i].reason);
		assert_int_equal(k->waits[i].same_as, d->waits[i].same_as);
		assert_string_equal(k->waits[i].detail ? k->waits[i].detail : "",
				    d->waits[i].detail ? d->waits[i].detail : "");
	}
}

/* One keep for every pass of every test: a pass takes blocks that passes of
 * other sizes and clusters wrote before it. */
static struct sched_keep *kept;

/* The snapshot of cluster c: its nodes, jobs, running jobs, classes and
 * queues, nothing kept. */
static struct sched_snapshot snapshot_of(struct cluster *c)
{
	return (struct sched_snapshot){.nodes = c->nodes,
				       .nnodes = c->n,
				       .jobs = c->ptrs,
				       .njobs = c->nj,
				       .running = c->run,
				       .nrunning = c->nr,
				       .classes = c->classes,
				       .nclasses = c->nclasses,
				       .queues = c->queues,
				       .nqueues = c->nqueues,
				       .windows = c->windows,
				       .nwindows = c->nwin,
				       .weights = c->weights,
				       .nweights = c->nweights};
}

/* A window on nodes a..b (inclusive), starting `in_s` from now, for the
 * jobs with `bit` (-1: none). */
static struct sched_window *add_window(struct cluster *c, const char *name, int64_t in_s, int bit,
				       int a, int b)
{
	int i = c->nwin++;
	struct sched_window *w = &c->windows[i];
	*w = (struct sched_window){name, c->now + in_s * 1000, bit, 0, c->win_nodes[i]};
	for (int n = a; n <= b; n++)
		c->win_nodes[i][w->nnodes++] = n;
	return w;
}

/* Does window w keep job j off its nodes now (the rule, from its words)? */
static bool window_in_way(const struct cluster *c, const struct sched_window *w,
			  const struct sched_job *j)
{
	if (w->bit >= 0 && (j->windows >> w->bit & 1))
		return false;
	if (!j->time_limit_s)
		return w->start_ms - c->now <= c->policy.maint_lookahead_ms;
	return c->now + j->time_limit_s * 1000 > w->start_ms;
}

static bool in_window(const struct sched_window *w, int node)
{
	for (int k = 0; k < w->nnodes; k++)
		if (w->nodes[k] == node)
			return true;
	return false;
}

static int pass(struct cluster *c, struct sched_decisions *d)
{
	struct sched_snapshot s = snapshot_of(c);
	int r = sched_pass(&s, c->now, &c->policy, d);
	if (r < 0)
		return r;
	/* the same pass with the node statics kept by the caller, again with
	 * the jobs' shapes filed in the caller's table, and again with their
	 * keys kept in one array, and twice more with the caller's memory
	 * kept (the second pass takes the blocks the first wrote), decides
	 * the same */
	s.cluster = sched_cluster_new(c->nodes, c->n);
	assert_true(sched_cluster_matches(s.cluster, c->nodes, c->n));
	struct sched_shapes *t = sched_shapes_new();
	struct sched_key *keys = xcalloc((size_t)c->nj + 1, sizeof(*keys));
	if (!kept)
		kept = sched_keep_new();
	for (int round = 0; round < 5; round++) {
		if (round == 1) {
			for (int i = 0; i < c->nj; i++)
				c->jobs[i].shape_id = sched_shapes_add(t, &c->jobs[i]);
			s.shapes = t;
		}
		if (round == 2) {
			for (int i = 0; i < c->nj; i++)
				keys[i] = sched_key_of(c->ptrs[i]);
			s.keys = keys;
		}
		if (round >= 3)
			s.keep = kept;
		struct sched_decisions k;
		assert_int_equal(sched_pass(&s, c->now, &c->policy, &k), 0);
		same_decisions(d, &k);
		sched_decisions_release(&k);
	}
	free(keys);
	/* jobs of one request share an id; dropped, the table forgets them */
	for (int i = 0; i < c->nj; i++)
		for (int k = 0; k < c->nj; k++)
			if (sched_job_shape(&c->jobs[i]) == sched_job_shape(&c->jobs[k]))
				assert_int_equal(c->jobs[i].shape_id, c->jobs[k].shape_id);
	for (int i = 0; i < c->nj; i++)
		sched_shapes_drop(t, c->jobs[i].shape_id);
	assert_int_equal(sched_shapes_live(t), 0);
	sched_shapes_free(t);
	/* a node list that differs is not taken for it */
	if (c->n > 0) {
		const char *name = c->nodes[0].name;
		c->nodes[0].name = "a-node-of-another-name";
		assert_false(sched_cluster_matches(s.cluster, c->nodes, c->n));
		c->nodes[0].name = name;
	}
	assert_false(sched_cluster_matches(s.cluster, c->nodes, c->n + 1));
	sched_cluster_free((struct sched_cluster *)s.cluster);
	return r;
}

static const struct sched_start *start_of(const struct sched_decisions *d, int job)
{
	for (int i = 0; i < d->nstarts; i++)
		if (d->starts[i].job == job)
			return &d->starts[i];
	return NULL;
}

static const struct sched_wait *wait_of(const struct sched_decisions *d, int job)
{
	for (int i = 0; i < d->nwaits; i++)
		if (d->waits[i].job == job)
			return &d->waits[i];
	return NULL;
}

/* The text that explains a wait, following same_as. */
static const char *why(const struct sched_decisions *d, int job)
{
	const struct sched_wait *w = wait_of(d, job);
	assert_non_null(w);
	while (!w->detail)
		w = wait_of(d, w->same_as);
	return w->detail;
}

static bool preempted(const struct sched_decisions *d, int64_t victim)
{
	for (int i = 0; i < d->npreempts; i++)
		if (d->preempts[i].victim == victim)
			return true;
	return false;
}

/* ---- placement --------------------------------------------------------------------- */

static void test_simple_start(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 64);
	add_job(&c, 1, 2, 2000);
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 1);
	const struct sched_start *s = start_of(&d, 0);
	assert_int_equal(s->nodes[0].ndev, 4);
	for (int k = 0; k < 4; k++)
		assert_int_equal(s->nodes[0].devs[k], k);
	assert_int_equal(d.nwaits, 0);
	sched_decisions_release(&d);
}

static void test_gang_best_fit(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 64);
	add_node(&c, "H100", 8, 64);
	add_node(&c, "H100", 8, 64);
	add_running(&c, NORMAL, 4, 1, 1); /* n01: 4 free */
	add_running(&c, NORMAL, 6, 1, 2); /* n02: 2 free */
	add_job(&c, 2, 1, 4000);
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	const struct sched_start *s = start_of(&d, 0);
	assert_non_null(s);
	/* the tightest nodes: n01 (nothing left) and n00 */
	const char *a = c.nodes[s->nodes[0].node].name, *b = c.nodes[s->nodes[1].node].name;
	assert_true((!strcmp(a, "n00") && !strcmp(b, "n01")) ||
		    (!strcmp(a, "n01") && !strcmp(b, "n00")));
	sched_decisions_release(&d);
}

static void test_never_fits(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 64);
	add_job(&c, 1, 1, 16000);
	add_job(&c, 3, 1, 1000);
	add_job(&c, 1, 1, 1000);
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_non_null(start_of(&d, 2));
	assert_int_equal(wait_of(&d, 0)->reason, SCHED_WAIT_NEVER_FITS);
	assert_string_equal(why(&d, 0), "can never start: needs 1 node with 16 accelerators; no "
					"set of schedulable nodes could ever hold that");
	assert_int_equal(wait_of(&d, 1)->reason, SCHED_WAIT_NEVER_FITS);
	sched_decisions_release(&d);
}

/* What a submission is held to: could the nodes that exist, all up and
 * empty, ever hold it? Busy, drained and down nodes count as empty. */
static void test_could_ever_hold(void **state)
{
	struct cluster c;
	init(&c);
	int a = add_node(&c, "H100", 8, 64);
	add_node(&c, "T4", 4, 16);
	add_running(&c, NORMAL, 8, 1, a); /* all of a is busy: still counts */
	c.nodes[1].schedulable = false;	  /* the T4 node is down: still counts */
	static const char *const h[] = {"H100", "H200"}, *const t4[] = {"T4"};
	static const char *const named[] = {"n01"}, *const nowhere[] = {"n99"};
	struct sched_job *j = add_job(&c, 1, 8, 1000);
	assert_true(sched_could_ever_hold(c.nodes, c.n, j));
	j->nodes = 2; /* 2 nodes with 8 each: the T4 node has 4 */
	assert_false(sched_could_ever_hold(c.nodes, c.n, j));
	j->mixed_types = true; /* not with mixing either: 4 < 8 */
	assert_false(sched_could_ever_hold(c.nodes, c.n, j));
	j->mixed_types = false;
	j->tasks_per_node = 4; /* 4 each on two nodes: only mixing models could */
	assert_false(sched_could_ever_hold(c.nodes, c.n, j));
	j->mixed_types = true;
	assert_true(sched_could_ever_hold(c.nodes, c.n, j));
	j = add_job(&c, 1, 1, 1000);
	j->ngpu_types = 2;
	j->gpu_types = h;
	assert_true(sched_could_ever_hold(c.nodes, c.n, j));
	j->gpu_tflops = 2000;
	assert_false(sched_could_ever_hold(c.nodes, c.n, j));
	j = add_job(&c, 1, 1, 500); /* half a T4, on the node named */
	j->ngpu_types = 1;
	j->gpu_types = t4;
	j->nnodelist = 1;
	j->nodelist = named;
	assert_true(sched_could_ever_hold(c.nodes, c.n, j));
	j->nodelist = nowhere;
	assert_false(sched_could_ever_hold(c.nodes, c.n, j));
	j->nnodelist = 0;
	j->cpus_per_task = 65; /* more CPUs than any node has */
	assert_false(sched_could_ever_hold(c.nodes, c.n, j));
	/* what it needs, as a reason says it */
	struct strbuf sb;
	strbuf_init(&sb);
	j = add_job(&c, 2, 8, 1000);
	j->ngpu_types = 2;
	j->gpu_types = h;
	sched_describe_need(j, &sb);
	assert_string_equal(sb.buf, "2 nodes with 8 accelerators (H100|H200) each");
	strbuf_release(&sb);
}

static void test_types_capabilities_mixing(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 64);
	add_node(&c, "T4", 8, 64);
	add_node(&c, "A100-80GB", 8, 64);
	static const char *const a100[] = {"A100-80GB"};
	struct sched_job *j = add_job(&c, 1, 1, 8000);
	j->ngpu_types = 1;
	j->gpu_types = a100;
	j = add_job(&c, 1, 1, 4000);
	j->gpu_mem_mib = 80 * 1024;  /* T4s are too small; H100 is free and fastest */
	j = add_job(&c, 2, 1, 8000); /* two whole nodes of one model: none left */
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_string_equal(c.nodes[start_of(&d, 0)->nodes[0].node].name, "n02");
	assert_string_equal(c.nodes[start_of(&d, 1)->nodes[0].node].name, "n00");
	assert_null(start_of(&d, 2));
	sched_decisions_release(&d);
	/* with mixing allowed the same gang spans two models */
	init(&c);
	add_node(&c, "H100", 8, 64);
	add_node(&c, "A100-80GB", 8, 64);
	j = add_job(&c, 2, 1, 8000);
	assert_int_equal(pass(&c, &d), 0);
	assert_null(start_of(&d, 0));
	sched_decisions_release(&d);
	j->mixed_types = true;
	assert_int_equal(pass(&c, &d), 0);
	assert_non_null(start_of(&d, 0));
	sched_decisions_release(&d);
	/* by rate: only the H100 is fast enough */
	init(&c);
	add_node(&c, "A100-80GB", 8, 64);
	add_node(&c, "H100", 8, 64);
	j = add_job(&c, 1, 1, 1000);
	j->gpu_tflops = 500;
	assert_int_equal(pass(&c, &d), 0);
	assert_string_equal(c.nodes[start_of(&d, 0)->nodes[0].node].name, "n01");
	sched_decisions_release(&d);
}

static void test_prefers_fast_unless_others_need_it(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "A100-80GB", 8, 64);
	add_node(&c, "H100", 8, 64);
	add_job(&c, 1, 1, 1000);
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_string_equal(c.nodes[start_of(&d, 0)->nodes[0].node].name, "n01"); /* H100 */
	sched_decisions_release(&d);
	/* a waiting job that can use H100s only: leave them to it */
	static const char *const h100[] = {"H100"};
	struct sched_job *j = add_job(&c, 1, 1, 8000);
	j->ngpu_types = 1;
	j->gpu_types = h100;
	j->cls = BATCH; /* considered after job 0 */
	assert_int_equal(pass(&c, &d), 0);
	assert_string_equal(c.nodes[start_of(&d, 0)->nodes[0].node].name, "n00");
	assert_non_null(start_of(&d, 1));
	sched_decisions_release(&d);
}

static void test_topology(void **state)
{
	struct cluster c;
	init(&c);
	for (int i = 0; i < 4; i++) {
		add_node(&c, "H100", 8, 64);
		snprintf(c.topo[i], sizeof(c.topo[i]), "spine1/leaf%d", i < 2 ? 1 : 2);
	}
	add_node(&c, "H100", 8, 64);
	snprintf(c.topo[4], sizeof(c.topo[4]), "spine2/leaf3");
	int idx[] = {0, 1};
	assert_int_equal(sched_switches_spanned(c.nodes, idx, 2), 1);
	int idx2[] = {0, 2};
	assert_int_equal(sched_switches_spanned(c.nodes, idx2, 2), 3);
	int idx3[] = {0, 4};
	assert_int_equal(sched_switches_spanned(c.nodes, idx3, 2), 5);
	/* n00 is fuller, which best fit alone would prefer with n02; topology wins */
	add_running(&c, NORMAL, 2, 1, 0);
	add_running(&c, NORMAL, 2, 1, 2);
	add_job(&c, 2, 1, 4000);
	struct sched_job *j3 = add_job(&c, 3, 1, 4000);
	j3->max_switches = 1;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	const struct sched_start *s = start_of(&d, 0);
	assert_non_null(s);
	int a = s->nodes[0].node, b = s->nodes[1].node;
	assert_true(strcmp(c.topo[a], c.topo[b]) == 0);
	/* three nodes under one leaf do not exist */
	assert_null(start_of(&d, 1));
	assert_int_equal(wait_of(&d, 1)->reason, SCHED_WAIT_SWITCHES);
	assert_non_null(strstr(why(&d, 1), "no placement spans 1 switch"));
	sched_decisions_release(&d);
	/* without the limit it spans a spine, not two spines */
	j3->max_switches = 0;
	assert_int_equal(pass(&c, &d), 0);
	s = start_of(&d, 1);
	assert_non_null(s);
	int sel[3] = {s->nodes[0].node, s->nodes[1].node, s->nodes[2].node};
	assert_int_equal(sched_switches_spanned(c.nodes, sel, 3), 3);
	sched_decisions_release(&d);
}

static void test_nvlink_domain(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 64);
	for (int k = 4; k < 8; k++)
		c.devs[0][k].nvlink_domain = 1;
	add_running(&c, NORMAL, 2, 1, 0); /* devices 0, 1 */
	add_job(&c, 1, 1, 4000);
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	const struct sched_assign *a = &start_of(&d, 0)->nodes[0];
	for (int k = 0; k < 4; k++)
		assert_int_equal(a->devs[k], 4 + k);
	sched_decisions_release(&d);
}

static void test_fractions(void **state)
{
	struct sched_mix_item mix[] = {{.milli = 500, .p = 0.5}, {.devices = 1, .p = 0.5}};
	int free1[] = {500, 1000};
	/* a half request fits both; a whole request fits device 1: the half free
	 * share of device 0 is a fragment for the whole kind only */
	assert_true(fabs(sched_node_fragmentation(2, free1, NULL, 8, 1 << 20, mix, 2) - 250.0) <
		    1e-9);
	int free2[] = {250, 1000};
	/* 250 is too little for a half: fragment for both kinds */
	assert_true(fabs(sched_node_fragmentation(2, free2, NULL, 8, 1 << 20, mix, 2) - 250.0) <
		    1e-9);
	int free3[] = {250, 0};
	assert_true(fabs(sched_node_fragmentation(2, free3, NULL, 8, 1 << 20, mix, 2) - 250.0) <
		    1e-9);
	/* a kind that needs more of the node's memory than is free cannot use
	 * any of its devices, as one that needs more CPUs */
	struct sched_mix_item big[] = {{.devices = 1, .cpus = 4, .mem_mib = 4096, .p = 1}};
	int free4[] = {0, 1000};
	assert_true(fabs(sched_node_fragmentation(2, free4, NULL, 8, 8192, big, 1)) < 1e-9);
	assert_true(fabs(sched_node_fragmentation(2, free4, NULL, 8, 2048, big, 1) - 1000.0) <
		    1e-9);
	assert_true(fabs(sched_node_fragmentation(2, free4, NULL, 2, 8192, big, 1) - 1000.0) <
		    1e-9);

	struct cluster c;
	init(&c);
	add_node(&c, "H100", 2, 64);
	add_node(&c, "H100", 2, 64);
	c.devs[1][1].free_milli = 500; /* n01 device 1 half used */
	add_job(&c, 1, 1, 500);
	add_job(&c, 1, 1, 250);
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	/* the half fills n01's half-used device: whole devices stay whole */
	assert_string_equal(c.nodes[start_of(&d, 0)->nodes[0].node].name, "n01");
	assert_int_equal(start_of(&d, 0)->nodes[0].devs[0], 1);
	assert_int_equal(start_of(&d, 0)->nodes[0].milli, 500);
	sched_decisions_release(&d);
	/* best fit and packing agree here; on a fresh cluster packing fills one
	 * device before touching another */
	init(&c);
	add_node(&c, "H100", 2, 64);
	for (int i = 0; i < 4; i++)
		add_job(&c, 1, 1, 250);
	c.policy.frac = SCHED_FRAC_PACK;
	assert_int_equal(pass(&c, &d), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(start_of(&d, i)->nodes[0].devs[0], 0);
	sched_decisions_release(&d);
}

/* Kinds of the mix that ask for certain models: a device of another model
 * is all fragment to them, and placement keeps their models' devices whole
 * for them (ATC'23's gpuspec lists). */
static void test_typed_fragmentation(void **state)
{
	static const char *const a100[] = {"A100", "a800"};
	struct sched_mix_item mix[] = {{.devices = 1, .p = 1, .gpu_types = a100, .ngpu_types = 2}};
	int free1[] = {1000, 500};
	const char *models[] = {"L40", "A100"};
	/* the whole L40 is no use to the kind, nor is the half A100 */
	assert_true(fabs(sched_node_fragmentation(2, free1, models, 8, 1 << 20, mix, 1) - 1500.0) <
		    1e-9);
	const char *models2[] = {"A800", "L40"};
	/* a whole A800 fits it: the half L40 is the fragment */
	int free2[] = {1000, 500};
	assert_true(fabs(sched_node_fragmentation(2, free2, models2, 8, 1 << 20, mix, 1) - 500.0) <
		    1e-9);
	/* without models every device is the kind's */
	assert_true(fabs(sched_node_fragmentation(2, free2, NULL, 8, 1 << 20, mix, 1) - 500.0) <
		    1e-9);

	/* three one-device nodes of equal speed; a half that any model takes,
	 * then two whole devices that want an A100 or an A800: the half goes to
	 * the L40, so all three start */
	struct cluster c;
	struct sched_decisions d;
	init(&c);
	add_node(&c, "A100", 1, 64);
	add_node(&c, "A800", 1, 64);
	add_node(&c, "L40", 1, 64);
	add_job(&c, 1, 1, 500);
	for (int i = 0; i < 2; i++) {
		struct sched_job *j = add_job(&c, 1, 1, 1000);
		j->gpu_types = a100;
		j->ngpu_types = 2;
	}
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 3);
	assert_string_equal(c.nodes[start_of(&d, 0)->nodes[0].node].name, "n02");
	sched_decisions_release(&d);
}

/* The paper's other baselines: random spreads jobs of one shape (yet decides
 * the same on the same input, which pass() checks); the dot product goes to
 * the node whose use lines up with the request; clustering to the node that
 * runs tasks of the same request. */
static void test_baseline_policies(void **state)
{
	struct cluster c;
	struct sched_decisions d;
	init(&c);
	for (int i = 0; i < 8; i++)
		add_node(&c, "H100", 8, 64);
	for (int i = 0; i < 8; i++)
		add_job(&c, 1, 1, 500);
	c.policy.frac = SCHED_FRAC_RANDOM;
	assert_int_equal(pass(&c, &d), 0);
	bool seen[8] = {false};
	int nodes = 0;
	for (int i = 0; i < 8; i++) {
		int n = start_of(&d, i)->nodes[0].node;
		nodes += !seen[n];
		seen[n] = true;
	}
	assert_true(nodes >= 3);
	sched_decisions_release(&d);
	/* best fit puts them side by side */
	c.policy.frac = SCHED_FRAC_BESTFIT;
	assert_int_equal(pass(&c, &d), 0);
	for (int i = 1; i < 8; i++)
		assert_int_equal(start_of(&d, i)->nodes[0].node, start_of(&d, 0)->nodes[0].node);
	sched_decisions_release(&d);

	init(&c);
	add_node(&c, "H100", 8, 64);
	add_node(&c, "H100", 8, 64);
	add_running(&c, NORMAL, 4, 1, 1); /* n01 half used */
	add_job(&c, 1, 1, 1000);
	c.policy.frac = SCHED_FRAC_DOTPROD;
	c.policy.score_every_node = true;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(start_of(&d, 0)->nodes[0].node, 1);
	sched_decisions_release(&d);

	/* n00 runs a half, n01 a quarter: each request goes to its kind */
	init(&c);
	add_node(&c, "H100", 2, 64);
	add_node(&c, "H100", 2, 64);
	add_running(&c, NORMAL, 1, 1, 0);
	add_running(&c, NORMAL, 1, 1, 1);
	c.run_nodes[0][0].milli = 500;
	c.devs[0][0].free_milli = 500;
	c.run_nodes[1][0].milli = 250;
	c.devs[1][0].free_milli = 750;
	add_job(&c, 1, 1, 250);
	add_job(&c, 1, 1, 500);
	c.policy.frac = SCHED_FRAC_CLUSTER;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(start_of(&d, 0)->nodes[0].node, 1);
	assert_int_equal(start_of(&d, 1)->nodes[0].node, 0);
	sched_decisions_release(&d);
}

/* ---- order, backfill ------------------------------------------------------------------ */

/* -w, -x and --exclusive: only the listed nodes, never the excluded ones,
 * alone on a node (which then holds nothing else); a name the cluster does
 * not have is passed over, and a list of such names can never start. */
/* --constraint: nodes by their labels; two jobs alike but for their
 * constraints are two shapes; one no node satisfies can never start. */
static void test_constraints(void **state)
{
	struct cluster c;
	init(&c);
	for (int i = 0; i < 4; i++)
		add_node(&c, "H100", 4, 32);
	c.nodes[0].labels = "fabric=roce,rack=r01";
	c.nodes[1].labels = "fabric=ib,rack=r07";
	c.nodes[2].labels = "fabric=ib,rack=r08";
	/* n03: no labels */
	struct sched_job *j = add_job(&c, 1, 4, 1000);
	j->constraint = "fabric=ib&rack!=r07";
	j = add_job(&c, 1, 4, 1000);
	j->constraint = "fabric=roce|rack=r07";
	j = add_job(&c, 1, 4, 1000);
	j->constraint = "gpu=h200";
	j = add_job(&c, 1, 4, 1000);
	j->constraint = "rack!=r01&rack!=r07&rack!=r08";
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(start_of(&d, 0)->nodes[0].node, 2);
	int second = start_of(&d, 1)->nodes[0].node;
	assert_true(second == 0 || second == 1);
	assert_null(start_of(&d, 2));
	assert_non_null(strstr(why(&d, 2), "can never start"));
	assert_non_null(strstr(why(&d, 2), "labelled gpu=h200"));
	assert_int_equal(start_of(&d, 3)->nodes[0].node, 3); /* a label it lacks differs */
	sched_decisions_release(&d);
	assert_false(sched_could_ever_hold(c.nodes, c.n, &c.jobs[2]));
	assert_true(sched_could_ever_hold(c.nodes, c.n, &c.jobs[0]));
	assert_true(sched_job_shape(&c.jobs[0]) != sched_job_shape(&c.jobs[1]));

	/* taints: a tainted node takes only what tolerates each of its taints */
	struct cluster t;
	init(&t);
	for (int i = 0; i < 2; i++)
		add_node(&t, "H100", 4, 32);
	t.nodes[0].taints = "inference";
	j = add_job(&t, 1, 4, 1000); /* no toleration: n01 */
	j = add_job(&t, 1, 4, 1000); /* no toleration, n01 taken: waits */
	j = add_job(&t, 1, 4, 1000);
	j->tolerate = "dev,inference";
	assert_int_equal(pass(&t, &d), 0);
	assert_int_equal(start_of(&d, 0)->nodes[0].node, 1);
	assert_null(start_of(&d, 1));
	assert_int_equal(start_of(&d, 2)->nodes[0].node, 0);
	sched_decisions_release(&d);
	struct sched_job two = t.jobs[0];
	two.nodes = 2;
	assert_false(sched_could_ever_hold(t.nodes, t.n, &two));
	assert_true(sched_job_shape(&t.jobs[0]) != sched_job_shape(&t.jobs[2]));
	struct sched_share w = {.ndev = 4, .milli = MODEL_MILLI, .model = "H100", .cpus = 8};
	assert_true(sched_share_fit(&t.nodes[0], &w, &(struct sched_assign){0}) < 0);
	w.tolerate = "inference";
	assert_int_equal(sched_share_fit(&t.nodes[0], &w, &(struct sched_assign){0}), 0);

	/* pools: a job runs on nodes of the pools of its mask, a node of
	 * several pools in each; a node in none (0) only where the job's mask
	 * has MODEL_POOL_NONE */
	struct cluster p;
	init(&p);
	for (int i = 0; i < 3; i++)
		add_node(&p, "H100", 4, 32);
	p.nodes[0].pools = 1;	  /* top */
	p.nodes[1].pools = 1 | 2; /* top and general */
	j = add_job(&p, 1, 4, 1000);
	j->pools = 2, j->pool = "general"; /* n01 only */
	j = add_job(&p, 2, 4, 1000);
	j->pools = 1, j->pool = "top"; /* n00 and n01: n01 taken, waits */
	j = add_job(&p, 1, 4, 1000);
	j->pools = MODEL_POOL_NONE | 2; /* n02, in none */
	j = add_job(&p, 1, 4, 1000);
	j->pools = MODEL_POOL_NOWHERE, j->pool = "gone"; /* no pool takes it */
	assert_int_equal(pass(&p, &d), 0);
	assert_int_equal(start_of(&d, 0)->nodes[0].node, 1);
	assert_null(start_of(&d, 1));
	assert_int_equal(start_of(&d, 2)->nodes[0].node, 2);
	assert_null(start_of(&d, 3));
	assert_non_null(strstr(why(&d, 3), "in pool gone"));
	sched_decisions_release(&d);
	assert_true(sched_could_ever_hold(p.nodes, p.n, &p.jobs[1]));
	assert_false(sched_could_ever_hold(p.nodes, p.n, &p.jobs[3]));
	struct sched_job unpooled = p.jobs[0];
	unpooled.pools = 0, unpooled.pool = NULL;
	assert_true(sched_job_shape(&unpooled) != sched_job_shape(&p.jobs[0]));
	w = (struct sched_share){.ndev = 4, .milli = MODEL_MILLI, .model = "H100", .pools = 2};
	assert_true(sched_share_fit(&p.nodes[0], &w, &(struct sched_assign){0}) < 0);
	assert_int_equal(sched_share_fit(&p.nodes[1], &w, &(struct sched_assign){0}), 0);
}

/* Fault domains: --within keeps a gang in one domain, --spread caps its
 * nodes in any one; a node without a domain is in "". */
static void test_fault_domains(void **state)
{
	static const char *const doms[] = {"dc1/r1/p1", "dc1/r1/p2", "dc1/r2/p1",
					   "dc1/r2/p2", "dc1/r3/p1", NULL};
	struct cluster c;
	init(&c);
	for (int i = 0; i < 6; i++) {
		add_node(&c, "H100", 4, 32);
		c.nodes[i].domain = doms[i];
	}
	/* n00 and n02 fuller: best fit alone would take them */
	add_running(&c, NORMAL, 2, 1, 0);
	add_running(&c, NORMAL, 2, 1, 2);
	struct sched_job *j = add_job(&c, 2, 1, 2000);
	j->within_depth = 2, j->within = "rack"; /* n00 + n01 (r1) */
	j = add_job(&c, 3, 1, 4000);
	j->spread_depth = 2, j->spread_max = 1, j->spread = "rack"; /* r2, r3, "" */
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	const struct sched_start *s = start_of(&d, 0);
	assert_non_null(s);
	assert_true(sched_domain_same(c.nodes[s->nodes[0].node].domain,
				      c.nodes[s->nodes[1].node].domain, 2));
	s = start_of(&d, 1);
	assert_non_null(s);
	for (int a = 0; a < 3; a++)
		for (int b = 0; b < a; b++)
			assert_false(sched_domain_same(c.nodes[s->nodes[a].node].domain,
						       c.nodes[s->nodes[b].node].domain, 2));
	sched_decisions_release(&d);
	/* five racks' worth of nodes do not exist (r1, r2, r3, ""): never */
	struct sched_job five = c.jobs[1];
	five.nodes = 5;
	assert_false(sched_could_ever_hold(c.nodes, c.n, &five));
	five.spread_max = 2; /* two a rack: yes */
	assert_true(sched_could_ever_hold(c.nodes, c.n, &five));
	five.nodes = 3, five.spread_depth = 0, five.within_depth = 2; /* no rack has 3 */
	assert_false(sched_could_ever_hold(c.nodes, c.n, &five));
	five.within_depth = 1; /* dc1 has 5 */
	assert_true(sched_could_ever_hold(c.nodes, c.n, &five));
	assert_true(sched_job_shape(&five) != sched_job_shape(&c.jobs[1]));
	struct strbuf sb;
	strbuf_init(&sb);
	five.within_depth = 0, five.spread_depth = 2, five.spread_max = 1, five.nodes = 5;
	sched_describe_need(&five, &sb);
	assert_non_null(strstr(sb.buf, "at most 1 in any rack"));
	strbuf_release(&sb);
	/* a spread that only drained nodes could give waits for them */
	c.nodes[4].schedulable = c.nodes[5].schedulable = false;
	struct cluster *cp = &c;
	cp->nj = 0;
	j = add_job(cp, 4, 1, 1000);
	j->spread_depth = 2, j->spread_max = 1, j->spread = "rack"; /* r1 r2 r3 "" */
	assert_int_equal(pass(cp, &d), 0);
	assert_null(start_of(&d, 0));
	assert_int_equal(wait_of(&d, 0)->reason, SCHED_WAIT_NODES);
	sched_decisions_release(&d);
	/* prefixes: a shorter path is its whole path */
	assert_int_equal(sched_domain_prefix("dc1/r1/p1", 2), 6);
	assert_int_equal(sched_domain_prefix("dc1", 2), 3);
	assert_int_equal(sched_domain_prefix(NULL, 1), 0);
	assert_true(sched_domain_same(NULL, "", 3));
	assert_false(sched_domain_same("dc1/r1", "dc1/r10", 2));
	/* a replacement keeps the gang's domains */
	int with[] = {1};
	struct sched_share w = {.ndev = 1,
				.milli = MODEL_MILLI,
				.model = "H100",
				.with = with,
				.nwith = 1,
				.within_depth = 2};
	struct sched_assign as;
	bool ok[6] = {true, false, true, true, true, true};
	assert_int_equal(sched_share_best(c.nodes, c.n, ok, &w, &as), 0); /* r1: n00 only */
	w.within_depth = 0, w.spread_depth = 2, w.spread_max = 1;
	ok[2] = false;
	int got = sched_share_best(c.nodes, c.n, ok, &w, &as);
	assert_true(got == 3 || got == 4 || got == 5);
}

/* Windows (tenk reserve): before its start, a job goes on a window's
 * nodes only when its time limit ends by then, or without one while the
 * start is beyond the lookahead; its own jobs any time; once started, only
 * its own. No preemption of what only frees a window's nodes for a job
 * kept off them, and a job kept off for now never "never fits". */
static void test_windows(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 64);
	add_node(&c, "H100", 8, 64);
	add_running(&c, NORMAL, 8, 1, 1); /* n01 full, no end known */
	add_window(&c, "fw", 7200, -1, 0, 0);
	struct sched_job *j0 = add_job(&c, 1, 1, 8000), *j1 = add_job(&c, 1, 1, 8000);
	struct sched_job *j2 = add_job(&c, 1, 1, 8000), *j3 = add_job(&c, 2, 1, 8000);
	j0->time_limit_s = j1->time_limit_s = j3->time_limit_s = 3 * 3600;
	j2->time_limit_s = 3600;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 1);
	assert_int_equal(start_of(&d, 2)->nodes[0].node, 0); /* ends by the start */
	for (int k = 0; k < 2; k++) {
		assert_int_equal(wait_of(&d, k)->reason, SCHED_WAIT_RESERVED);
		assert_non_null(strstr(why(&d, k), "would still run when reservation fw starts"));
		assert_non_null(strstr(why(&d, k), "about 2h"));
	}
	assert_int_not_equal(wait_of(&d, 3)->reason, SCHED_WAIT_NEVER_FITS);
	sched_decisions_release(&d);
	/* without a time limit: kept off once the start is within the lookahead */
	c.nj = 0;
	add_job(&c, 1, 1, 8000);
	c.policy.maint_lookahead_ms = 86400000;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 0);
	assert_non_null(strstr(why(&d, 0), "has no time limit, and reservation fw starts"));
	sched_decisions_release(&d);
	c.policy.maint_lookahead_ms = 3600000;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 1);
	sched_decisions_release(&d);
	/* its own jobs go there whatever their limit; once it has started,
	 * only they do */
	c.windows[0].bit = 3;
	c.jobs[0].time_limit_s = 3 * 3600;
	c.jobs[0].windows = 1u << 3;
	struct sched_job *other = add_job(&c, 1, 1, 8000);
	other->time_limit_s = 600;
	other->submit_ms = -1; /* first: not kept off by job 0 taking n00 */
	c.windows[0].start_ms = c.now - 1000;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 1);
	assert_non_null(start_of(&d, 0));
	assert_non_null(strstr(why(&d, 1), "kept for reservation fw"));
	sched_decisions_release(&d);
	/* a prod job kept off n00 preempts n01's batch job, not n00's
	 * cheaper one, which would free only what it may not use */
	init(&c);
	add_node(&c, "H100", 8, 64);
	add_node(&c, "H100", 8, 64);
	struct sched_running *b0 = add_running(&c, BATCH, 8, 1, 0);
	struct sched_running *b1 = add_running(&c, BATCH, 8, 1, 1);
	b0->last_checkpoint_ms = c.now - 1000;
	add_window(&c, "fw", 7200, -1, 0, 0);
	struct sched_job *p = add_job(&c, 1, 1, 8000);
	p->cls = PROD;
	p->time_limit_s = 3 * 3600;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.npreempts, 1);
	assert_true(preempted(&d, b1->id));
	assert_false(preempted(&d, b0->id));
	sched_decisions_release(&d);
	p->time_limit_s = 600; /* now the cheaper victim is the one */
	assert_int_equal(pass(&c, &d), 0);
	assert_true(preempted(&d, b0->id));
	sched_decisions_release(&d);
	/* a window naming a node that is not there is refused */
	c.win_nodes[0][0] = 7;
	assert_int_equal(pass(&c, &d), -EINVAL);
}

static void test_node_lists_and_exclusive(void **state)
{
	struct cluster c;
	init(&c);
	for (int i = 0; i < 4; i++)
		add_node(&c, "H100", 4, 32);
	static const char *const only2[] = {"n02"}, *const not012[] = {"n00", "n01", "n02"},
				 *const only0[] = {"n00"}, *const nowhere[] = {"n09", "n10"};
	struct sched_job *j = add_job(&c, 1, 1, 1000);
	j->nodelist = only2, j->nnodelist = 1;
	j = add_job(&c, 1, 1, 1000);
	j->exclude = not012, j->nexclude = 3;
	j = add_job(&c, 1, 1, 1000);
	j->exclusive = true;
	j = add_job(&c, 1, 1, 1000);
	j->nodelist = only0, j->nnodelist = 1;
	j = add_job(&c, 1, 1, 1000);
	j->nodelist = nowhere, j->nnodelist = 2;
	j = add_job(&c, 2, 1, 1000);
	j->exclusive = true;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(start_of(&d, 0)->nodes[0].node, 2);
	assert_int_equal(start_of(&d, 1)->nodes[0].node, 3);
	/* the exclusive job takes a node with nothing on it, one device of it */
	const struct sched_start *x = start_of(&d, 2);
	assert_non_null(x);
	assert_true(x->nodes[0].node == 0 || x->nodes[0].node == 1);
	assert_int_equal(x->nodes[0].ndev, 1);
	int held = x->nodes[0].node;
	/* the job that may use only n00 waits if the exclusive job holds n00,
	 * else starts there beside nothing */
	if (held == 0) {
		assert_null(start_of(&d, 3));
		assert_non_null(strstr(why(&d, 3), "among n00"));
	} else {
		assert_int_equal(start_of(&d, 3)->nodes[0].node, 0);
	}
	assert_null(start_of(&d, 4));
	assert_non_null(strstr(why(&d, 4), "can never start"));
	assert_non_null(strstr(why(&d, 4), "among n09,n10"));
	/* two empty nodes are not left for an exclusive gang of two */
	assert_null(start_of(&d, 5));
	assert_non_null(strstr(why(&d, 5), "alone on each"));
	sched_decisions_release(&d);

	/* an exclusive gang of two waits for a running job's end with a
	 * reservation; a plain job beside it starts on what is free */
	init(&c);
	add_node(&c, "H100", 4, 32);
	add_node(&c, "H100", 4, 32);
	add_running(&c, NORMAL, 1, 1, 0)->time_limit_s = 600;
	j = add_job(&c, 2, 1, 1000);
	j->exclusive = true;
	j = add_job(&c, 1, 1, 1000);
	j->time_limit_s = 60;
	assert_int_equal(pass(&c, &d), 0);
	assert_null(start_of(&d, 0));
	assert_non_null(strstr(why(&d, 0), "reserved to start in about"));
	assert_non_null(start_of(&d, 1));
	sched_decisions_release(&d);

	/* a node an exclusive job runs on takes nothing, not even work that
	 * reserves nothing */
	init(&c);
	add_node(&c, "H100", 4, 32);
	add_node(&c, "H100", 4, 32);
	add_running(&c, NORMAL, 4, 1, 0);
	c.run_nodes[0][0].alone = true;
	c.run_nodes[0][0].cpus = 32;
	c.nodes[0].cpus_free = 0;
	add_job(&c, 1, 1, 0)->nodelist = only0;
	c.jobs[0].nnodelist = 1;
	add_job(&c, 1, 1, 0);
	assert_int_equal(pass(&c, &d), 0);
	assert_null(start_of(&d, 0));
	assert_int_equal(start_of(&d, 1)->nodes[0].node, 1);
	sched_decisions_release(&d);
}

static void test_class_order(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 64);
	struct sched_job *b = add_job(&c, 1, 1, 8000);
	b->cls = BATCH; /* submitted first */
	struct sched_job *p = add_job(&c, 1, 1, 8000);
	p->cls = PROD;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_non_null(start_of(&d, 1));
	assert_null(start_of(&d, 0));
	sched_decisions_release(&d);
}

static void test_backfill(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 64);
	struct sched_running *r = add_running(&c, NORMAL, 4, 1, 0);
	r->time_limit_s = 3600;
	r->start_ms = c.now;	 /* ends in an hour */
	add_job(&c, 1, 1, 8000); /* blocked: gets the reservation */
	struct sched_job *short_job = add_job(&c, 1, 1, 2000);
	short_job->time_limit_s = 1800; /* ends before the reservation */
	add_job(&c, 1, 1, 2000);	/* no limit: would delay it */
	struct sched_job *long_job = add_job(&c, 1, 1, 2000);
	long_job->time_limit_s = 7200;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_null(start_of(&d, 0));
	assert_int_equal(wait_of(&d, 0)->until_ms, c.now + 3600 * 1000);
	assert_non_null(strstr(why(&d, 0), "reserved to start in about 1h00m"));
	assert_non_null(start_of(&d, 1));
	assert_int_equal(wait_of(&d, 2)->reason, SCHED_WAIT_RESERVED);
	assert_non_null(strstr(why(&d, 2), "would delay job 100"));
	assert_int_equal(wait_of(&d, 3)->reason, SCHED_WAIT_RESERVED);
	sched_decisions_release(&d);
	/* strict order: nothing overtakes */
	c.policy.no_backfill = true;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 0);
	sched_decisions_release(&d);
}

static void test_fair_share(void **state)
{
	struct cluster c;
	init(&c);
	c.queues[1] = (struct sched_queue){"a", -1, -1, 1, 5000, 0, NULL}; /* used a lot lately */
	c.queues[2] = (struct sched_queue){"b", -1, -1, 1, 0, 0, NULL};
	c.nqueues = 3;
	add_node(&c, "H100", 1, 64);
	struct sched_job *ja = add_job(&c, 1, 1, 1000);
	ja->queue = 1;
	struct sched_job *jb = add_job(&c, 1, 1, 1000);
	jb->queue = 2; /* later, but its queue is owed */
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_non_null(start_of(&d, 1));
	assert_null(start_of(&d, 0));
	sched_decisions_release(&d);
	/* weight counts: a's heavy use over a weight of 10 is less than b's */
	c.queues[1].weight = 10;
	c.queues[2].recent_milli = 1000;
	assert_int_equal(pass(&c, &d), 0);
	assert_non_null(start_of(&d, 0));
	sched_decisions_release(&d);
}

/* ---- quotas ----------------------------------------------------------------------------- */

static void test_quota_and_borrowing(void **state)
{
	struct cluster c;
	init(&c);
	c.queues[1] = (struct sched_queue){"team", 8000, 8000, 1, 0, 0, NULL};
	c.nqueues = 2;
	for (int i = 0; i < 3; i++)
		add_node(&c, "H100", 8, 64);
	for (int i = 0; i < 3; i++) {
		struct sched_job *j = add_job(&c, 1, 1, 8000);
		j->queue = 1;
	}
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_non_null(start_of(&d, 0)); /* its quota */
	assert_non_null(start_of(&d, 1)); /* borrowed */
	assert_null(start_of(&d, 2));	  /* over quota + borrow limit */
	assert_int_equal(wait_of(&d, 2)->reason, SCHED_WAIT_QUOTA);
	assert_string_equal(why(&d, 2), "queue \"team\" is at its limit: 16 accelerators in use "
					"of 16 (quota 8 + borrowable 8)");
	sched_decisions_release(&d);
}

/* Limits beyond accelerators: one model's, weighted units, CPUs, memory;
 * a job that may use several models goes to one still within its queue's
 * limits; one that may use none waits, the dimension named. Weighted fair
 * share orders queues by units. */
static void test_quota_dims(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 64);
	add_node(&c, "A100-80GB", 8, 64);
	c.weights[0] = (struct sched_model_weight){"H100", 1};
	c.weights[1] = (struct sched_model_weight){"A100-80GB", 0.32};
	c.nweights = 2;
	c.queues[1] = (struct sched_queue){"vision", -1, -1, 1, 0, 1, c.dims[1]};
	c.nqueues = 2;
	c.dims[1][0] = (struct sched_qdim){SCHED_QDIM_MODEL, "H100", 4000, 4000};
	add_running(&c, NORMAL, 4, 1, 0)->queue = 1;
	static const char *const h100[] = {"H100"};
	struct sched_job *any = add_job(&c, 1, 1, 4000), *only = add_job(&c, 1, 1, 4000);
	struct sched_job *other = add_job(&c, 1, 1, 4000);
	any->queue = only->queue = 1;
	only->gpu_types = h100, only->ngpu_types = 1;
	other->gpu_types = h100, other->ngpu_types = 1;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(start_of(&d, 0)->nodes[0].node, 1); /* kept to the A100s */
	assert_int_equal(wait_of(&d, 1)->reason, SCHED_WAIT_QUOTA);
	assert_string_equal(why(&d, 1), "queue \"vision\": H100 limit 4 (quota 4), 4 in use; this "
					"job needs 4 accelerators, and no model it may use is "
					"within the queue's limits");
	assert_int_equal(start_of(&d, 2)->nodes[0].node, 0); /* another queue's */
	sched_decisions_release(&d);
	/* weighted units: 5 H100s' worth: eight A100s (2.56) fit, eight H100s
	 * do not */
	c.nr = 0;
	for (int k = 0; k < 8; k++)
		c.devs[0][k].free_milli = MODEL_MILLI;
	c.dims[1][0] = (struct sched_qdim){SCHED_QDIM_UNITS, NULL, 5000, 5000};
	any->gpu_milli = only->gpu_milli = 8000;
	c.nj = 2;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(start_of(&d, 0)->nodes[0].node, 1);
	assert_non_null(strstr(why(&d, 1),
			       "weighted GPU units limit 5 (quota 5), 2.56 in use; this "
			       "job needs 8 accelerators"));
	sched_decisions_release(&d);
	/* CPUs and memory, known before placement */
	c.dims[1][0] = (struct sched_qdim){SCHED_QDIM_CPUS, NULL, 16, 16};
	c.dims[1][1] = (struct sched_qdim){SCHED_QDIM_MEM, NULL, 1024, 2048};
	c.queues[1].ndims = 2;
	any->cpus_per_task = 20;
	only->ngpu_types = 0, only->mem_mib = 4096;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 0);
	assert_string_equal(why(&d, 0),
			    "queue \"vision\": CPUs limit 16 (quota 16), 0 in use; this "
			    "job needs 20");
	assert_string_equal(why(&d, 1), "queue \"vision\": memory (GiB) limit 2 (quota 1), 0 in "
					"use; this job needs 4");
	sched_decisions_release(&d);
	/* weighted share: four A100s (1.28 units) before two H100s (2) */
	init(&c);
	add_node(&c, "H100", 4, 64);
	add_node(&c, "A100-80GB", 8, 64);
	c.weights[0] = (struct sched_model_weight){"H100", 1};
	c.weights[1] = (struct sched_model_weight){"A100-80GB", 0.32};
	c.nweights = 2;
	c.queues[1] = (struct sched_queue){"a", -1, -1, 1, 0, 0, NULL};
	c.queues[2] = (struct sched_queue){"b", -1, -1, 1, 0, 0, NULL};
	c.nqueues = 3;
	add_running(&c, NORMAL, 4, 1, 1)->queue = 1;
	add_running(&c, NORMAL, 2, 1, 0)->queue = 2;
	add_running(&c, NORMAL, 1, 1, 0); /* one H100 free */
	add_running(&c, NORMAL, 4, 1, 1);
	struct sched_job *ja = add_job(&c, 1, 1, 1000), *jb = add_job(&c, 1, 1, 1000);
	ja->queue = 1, jb->queue = 2;
	for (int w = 0; w < 2; w++) {
		c.policy.weighted_share = w;
		assert_int_equal(pass(&c, &d), 0);
		assert_int_equal(d.nstarts, 1);
		assert_non_null(start_of(&d, w ? 0 : 1));
		sched_decisions_release(&d);
	}
}

/* Queue 1 lends (its quota, no borrowing), queue 2 borrows up to 8 more. */
static void lender_and_borrower(struct cluster *c, const char *lender, int64_t borrower_quota)
{
	c->queues[1] = (struct sched_queue){lender, 8000, 0, 1, 0, 0, NULL};
	c->queues[2] = (struct sched_queue){"borrower", borrower_quota, 8000, 1, 0, 0, NULL};
	c->nqueues = 3;
}

static void test_reclaim_lent_capacity(void **state)
{
	struct cluster c;
	init(&c);
	lender_and_borrower(&c, "lender", 8000);
	add_node(&c, "H100", 8, 64);
	add_node(&c, "H100", 8, 64);
	struct sched_running *r1 = add_running(&c, NORMAL, 8, 1, 0);
	r1->queue = 2;
	struct sched_running *r2 = add_running(&c, NORMAL, 8, 1, 1);
	r2->queue = 2;
	r2->start_ms = c.now - 1000; /* less work to lose */
	struct sched_job *j = add_job(&c, 1, 1, 8000);
	j->queue = 1; /* normal class: cannot preempt by class, but reclaims */
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.npreempts, 1);
	assert_true(preempted(&d, r2->id));
	assert_int_equal(wait_of(&d, 0)->reason, SCHED_WAIT_PREEMPTING);
	sched_decisions_release(&d);
	/* over its own quota the lender reclaims nothing */
	j->gpu_milli = 8000;
	j->nodes = 2;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.npreempts, 0);
	sched_decisions_release(&d);
}

/* A prod job within its queue's quota may both preempt by class and reclaim:
 * neither kind of victim alone makes room, the two together do. */
static void test_preempt_and_reclaim_together(void **state)
{
	struct cluster c;
	init(&c);
	lender_and_borrower(&c, "owner", 0);
	add_node(&c, "H100", 8, 64);
	struct sched_running *batch = add_running(&c, BATCH, 4, 1, 0); /* preemptible */
	struct sched_running *lent = add_running(&c, NORMAL, 4, 1, 0); /* borrowed */
	lent->queue = 2;
	struct sched_job *j = add_job(&c, 1, 1, 8000);
	j->cls = PROD;
	j->queue = 1;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.npreempts, 2);
	assert_true(preempted(&d, batch->id) && preempted(&d, lent->id));
	sched_decisions_release(&d);
	/* over its quota it reclaims nothing, and the batch job alone is not room */
	c.queues[1].quota_milli = 4000;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.npreempts, 0);
	sched_decisions_release(&d);
}

/* ---- preemption ---------------------------------------------------------------------- */

static void test_prod_gang_preempts_batch(void **state)
{
	struct cluster c;
	init(&c);
	for (int i = 0; i < 3; i++)
		add_node(&c, "H100", 8, 64);
	struct sched_running *b1 = add_running(&c, BATCH, 8, 1, 0);
	struct sched_running *b2 = add_running(&c, BATCH, 4, 1, 1);
	struct sched_running *n3 = add_running(&c, NORMAL, 8, 1, 2); /* not preemptible */
	struct sched_running *b4 = add_running(&c, BATCH, 4, 1, 1);
	b4->last_checkpoint_ms = c.now - 1000; /* checkpointed a moment ago: cheap */
	struct sched_job *p = add_job(&c, 2, 1, 8000);
	p->cls = PROD;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_null(start_of(&d, 0)); /* the victims have not exited yet */
	assert_true(preempted(&d, b1->id));
	assert_true(preempted(&d, b2->id) && preempted(&d, b4->id));
	assert_false(preempted(&d, n3->id));
	assert_int_equal(d.npreempts, 3);
	sched_decisions_release(&d);
	/* a prod gang that would not fit even so preempts nothing */
	p->nodes = 3;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.npreempts, 0);
	assert_int_equal(wait_of(&d, 0)->reason, SCHED_WAIT_RESOURCES);
	sched_decisions_release(&d);
}

static void test_cheapest_victim(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 64);
	add_node(&c, "H100", 8, 64);
	struct sched_running *old = add_running(&c, BATCH, 8, 1, 0);
	old->start_ms = c.now - 3600000;
	struct sched_running *ckpt = add_running(&c, BATCH, 8, 1, 1);
	ckpt->start_ms = c.now - 3600000;
	ckpt->last_checkpoint_ms = c.now - 60000;
	struct sched_job *p = add_job(&c, 1, 1, 8000);
	p->cls = PROD;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.npreempts, 1);
	assert_true(preempted(&d, ckpt->id)); /* least work lost */
	sched_decisions_release(&d);
}

static void test_waits_for_its_victims(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 64);
	add_node(&c, "H100", 8, 64);
	struct sched_running *v = add_running(&c, BATCH, 8, 1, 0);
	struct sched_running *other = add_running(&c, BATCH, 8, 1, 1);
	struct sched_job *p = add_job(&c, 1, 1, 8000);
	p->cls = PROD;
	v->stopping = true;
	v->held_for = p->id;
	struct sched_job *b = add_job(&c, 1, 1, 8000); /* a lower job may not take it */
	b->cls = BATCH;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.npreempts, 0); /* nothing more: its victim is on its way */
	assert_false(preempted(&d, other->id));
	assert_int_equal(wait_of(&d, 0)->reason, SCHED_WAIT_PREEMPTING);
	assert_non_null(strstr(why(&d, 0), "waiting for jobs preempted for it to exit: 1"));
	sched_decisions_release(&d);
	/* the victim exited: its devices are free and go to the preemptor */
	c.run[0] = c.run[1];
	c.run[0].nodes = c.run_nodes[0];
	memcpy(c.run_nodes[0], c.run_nodes[1], sizeof(c.run_nodes[1]));
	c.nr = 1;
	for (int k = 0; k < 8; k++)
		c.devs[0][k].free_milli = MODEL_MILLI;
	assert_int_equal(pass(&c, &d), 0);
	assert_non_null(start_of(&d, 0));
	assert_null(start_of(&d, 1));
	sched_decisions_release(&d);
}

/* The Gittins index over samples matches its closed form for known
 * distributions (samples at their quantiles' midpoints). */
static void test_gittins_closed_forms(void **state)
{
	(void)state;
	enum { N = 2000 };
	static double s[N];
	/* two points, 1 and 10 alike likely: G(0) = max(p/1, 1/E[S]) = 0.5;
	 * past 1, only 10 is left: 1/(10 - a) */
	for (int i = 0; i < 100; i++)
		s[i] = i < 50 ? 1 : 10;
	assert_true(fabs(sched_gittins_exact(s, 100, 0, 0.5) - 0.5) < 1e-12);
	assert_true(fabs(sched_gittins_exact(s, 100, 2, 0.5) - 1.0 / 8) < 1e-12);
	assert_true(sched_gittins_exact(s, 100, 10, 0.5) == 0); /* outlived them all */
	/* uniform on (0, 100): G(a) = 2/(100 - a), rising: run it to the end */
	for (int i = 0; i < N; i++)
		s[i] = (i + 0.5) / N * 100;
	for (double a = 0; a < 80; a += 25)
		assert_true(fabs(sched_gittins_exact(s, N, a, 1) * (100 - a) / 2 - 1) < 0.005);
	/* exponential, mean 3600: memoryless, G(a) = 1/3600 at every a */
	for (int i = 0; i < N; i++)
		s[i] = -3600 * log(1 - (i + 0.5) / N);
	for (double a = 0; a <= 3600; a += 1800)
		assert_true(fabs(sched_gittins_exact(s, N, a, 600) * 3600 - 1) < 0.01);
	/* Pareto, shape 2 from 3600: the hazard rate, 2/a, falling */
	for (int i = 0; i < N; i++)
		s[i] = 3600 * pow(1 - (i + 0.5) / N, -0.5);
	assert_true(fabs(sched_gittins_exact(s, N, 3600, 60) * 3600 / 2 - 1) < 0.01);
	/* the table: exact at its points, and falling with a as Pareto does */
	struct sched_gittins g;
	static double copy[N];
	memcpy(copy, s, sizeof(s));
	sched_gittins_build(&g, copy, N, 60);
	assert_true(g.npoints > 32);
	assert_true(g.at[0] == 0);
	for (int k = 1; k < g.npoints; k++) {
		assert_true(g.at[k] > g.at[k - 1]);
		assert_true(g.index[k] == sched_gittins_exact(s, N, g.at[k], 60));
		assert_true(sched_gittins_index(&g, g.at[k] + 1e-9) == g.index[k]);
		if (g.at[k - 1] >= 3600)
			assert_true(g.index[k] <= g.index[k - 1] * 1.02);
	}
	assert_true(g.at[g.npoints - 1] == copy[N - 1]);
	assert_true(sched_gittins_index(&g, 1e12) == 0);
}

/* The history by kind: none until a kind has enough finished jobs, then
 * its own distribution, falling back to its class; a queue of short jobs
 * above a queue of long ones, and a job past its whole kind last. */
static void test_las_history(void **state)
{
	(void)state;
	struct sched_las_history *h = sched_las_history_new();
	struct sched_las l60 = {.nlevels = 2, .min_run_s = 60, .gittins = true};
	double g;
	for (int i = 0; i < SCHED_GITTINS_MIN_SAMPLES - 1; i++)
		sched_las_history_add(h, 0, 7, 600 + i);
	assert_false(sched_las_history_index(h, &l60, 0, 7, 0, &g));
	assert_true(g == 0);
	sched_las_history_add(h, 0, 7, 600);
	assert_int_equal(sched_las_history_count(h, 0), SCHED_GITTINS_MIN_SAMPLES);
	assert_true(sched_las_history_index(h, &l60, 0, 7, 0, &g));
	double short_q = g;
	/* another queue: thin there, its class's */
	double other;
	assert_true(sched_las_history_index(h, &l60, 0, 9, 0, &other));
	assert_true(other == short_q);
	/* another class knows nothing; nor a class not ordered by it */
	assert_false(sched_las_history_index(h, &l60, 1, 7, 0, &other));
	struct sched_las lv = l60;
	lv.gittins = false;
	assert_false(sched_las_history_index(h, &lv, 0, 7, 0, &other));
	/* queue 9's jobs run long: once it has enough, they rank below queue
	 * 7's, whose own table stays */
	for (int i = 0; i < 2 * SCHED_GITTINS_MIN_SAMPLES; i++)
		sched_las_history_add(h, 0, 9, 36000.0 + i);
	double long_q;
	assert_true(sched_las_history_index(h, &l60, 0, 9, 0, &long_q));
	assert_true(long_q < short_q / 10);
	assert_true(sched_las_history_index(h, &l60, 0, 7, 0, &g));
	assert_true(g == short_q);
	/* the class's, rebuilt with queue 9's: between the two */
	assert_true(sched_las_history_index(h, &l60, 0, 8, 0, &g));
	assert_true(g < short_q && g > long_q);
	/* a job past everything its kind ever needed: last */
	assert_true(sched_las_history_index(h, &l60, 0, 7, 1e9, &g));
	assert_true(g == 0);
	/* the ring keeps the newest */
	for (int i = 0; i < SCHED_GITTINS_KEEP + 10; i++)
		sched_las_history_add(h, 2, 1, 100);
	assert_int_equal(sched_las_history_count(h, 2), SCHED_GITTINS_KEEP);
	sched_las_history_free(h);
}

/* Least attained service: levels as classes, a level before the later
 * ones, and preemption within a class only from an earlier level. */
static void test_least_attained_service(void **state)
{
	struct cluster c;
	init(&c);
	struct sched_class base[3];
	memcpy(base, c.classes, sizeof(base));
	struct sched_las las[3];
	memset(las, 0, sizeof(las));
	las[NORMAL] = (struct sched_las){.nlevels = 3,
					 .limit_gpu_s = {3600, 16 * 3600},
					 .max_stretch = 8,
					 .max_loss_s = 600};
	int first[3];
	c.nclasses = sched_classes_expand(base, las, 3, c.classes, first);
	assert_int_equal(c.nclasses, 5);
	assert_int_equal(first[BATCH], 0);
	assert_int_equal(first[NORMAL], 1);
	assert_int_equal(first[PROD], 4);
	for (int l = 0; l < 3; l++) {
		assert_string_equal(c.classes[1 + l].name, "normal");
		assert_int_equal(c.classes[1 + l].priority, 50);
		assert_int_equal(c.classes[1 + l].las_family, NORMAL + 1);
		assert_int_equal(c.classes[1 + l].las_level, l);
	}
	assert_int_equal(c.classes[0].las_family, 0);
	assert_int_equal(c.classes[4].las_family, 0);
	assert_int_equal(sched_las_level(&las[NORMAL], 0), 0);
	assert_int_equal(sched_las_level(&las[NORMAL], 3599.9), 0);
	assert_int_equal(sched_las_level(&las[NORMAL], 3600), 1);
	assert_int_equal(sched_las_level(&las[NORMAL], 1e12), 2);
	assert_int_equal(sched_las_level(&las[BATCH], 1e12), 0);
	assert_false(sched_las_promoted(&las[NORMAL], 0, 1000000000));
	assert_false(sched_las_promoted(&las[NORMAL], 3600000, 8 * 3600000 - 1));
	assert_true(sched_las_promoted(&las[NORMAL], 3600000, 8 * 3600000));
	assert_false(sched_las_promoted(&las[BATCH], 3600000, 8 * 3600000));
	/* the next change of a running job: its next level (2 GPUs: 1 GPU-hour in
	 * 30 minutes), or past the first its minimum run, whichever comes first */
	las[NORMAL].min_run_s = 600;
	int64_t t0 = 1000000000;
	assert_true(sched_las_next_change(&las[NORMAL], 0, 2000, t0, t0) == t0 + 1800000);
	assert_true(sched_las_next_change(&las[NORMAL], 3600, 2000, t0, t0 + 1800000) ==
		    t0 + 1800000 + 15 * 3600000LL / 2); /* 15 GPU-hours more on 2 */
	assert_true(sched_las_next_change(&las[NORMAL], 3600, 2000, t0 + 1700000, t0 + 1800000) ==
		    t0 + 1700000 + 600000); /* restarted 100 s ago at level 1 */
	assert_true(sched_las_next_change(&las[NORMAL], 1e9, 2000, t0, t0 + 1) == t0 + 600000);
	assert_true(sched_las_next_change(&las[NORMAL], 1e9, 2000, t0, t0 + 600000) == INT64_MAX);
	assert_true(sched_las_next_change(&las[BATCH], 0, 2000, t0, t0) == INT64_MAX);
	las[NORMAL].min_run_s = 0;
	/* one node of 8 devices, all held by a job of normal's second level */
	add_node(&c, "H100", 8, 64);
	struct sched_running *r = add_running(&c, first[NORMAL] + 1, 8, 1, 0);
	struct sched_job *p = add_job(&c, 1, 1, 8000);
	p->cls = first[NORMAL];
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.npreempts, 1);
	assert_true(preempted(&d, r->id));
	assert_null(start_of(&d, 0));
	sched_decisions_release(&d);
	/* not before its attempt has run the family's minimum (it ran 60 s) */
	for (int l = 0; l < 3; l++)
		c.classes[1 + l].las_min_run_ms = 120000;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.npreempts, 0);
	sched_decisions_release(&d);
	r->start_ms = c.now - 120000;
	assert_int_equal(pass(&c, &d), 0);
	assert_true(preempted(&d, r->id));
	sched_decisions_release(&d);
	/* nor when it would lose more than the family's bound (600 s): its
	 * work since its last checkpoint, or its start, and its restore */
	assert_int_equal(c.classes[first[NORMAL] + 1].las_max_loss_ms, 600000);
	struct {
		int64_t ran_s, ckpt_ago_s, restore_s;
		bool any, taken;
	} loss[] = {
		{600, -1, 0, false, true},	/* 600 s of work: the bound */
		{601, -1, 0, false, false},	/* never committed, past it */
		{7200, -1, 0, false, false},	/* ... long past */
		{7200, 300, 0, false, true},	/* a commit 5 minutes ago */
		{7200, 300, 301, false, false}, /* ... and a restore of 5 minutes */
		{7200, 900, 0, false, false},	/* a commit 15 minutes ago */
		{7200, -1, 0, true, true},	/* --preemptible-any */
	};
	for (size_t k = 0; k < sizeof(loss) / sizeof(loss[0]); k++) {
		r->start_ms = c.now - loss[k].ran_s * 1000;
		r->last_commit_ms = loss[k].ckpt_ago_s < 0 ? 0 : c.now - loss[k].ckpt_ago_s * 1000;
		r->restore_ms = loss[k].restore_s * 1000;
		r->preempt_any = loss[k].any;
		assert_int_equal(sched_run_loss_ms(r, c.now),
				 (loss[k].ckpt_ago_s < 0 ? loss[k].ran_s : loss[k].ckpt_ago_s) *
						 1000 +
					 loss[k].restore_s * 1000);
		assert_int_equal(pass(&c, &d), 0);
		if (preempted(&d, r->id) != loss[k].taken)
			fail_msg("case %zu: preempted %d", k, preempted(&d, r->id));
		if (!loss[k].taken) /* it orders the waiting job still: first in line */
			assert_int_equal(wait_of(&d, 0)->reason, SCHED_WAIT_RESOURCES);
		sched_decisions_release(&d);
	}
	/* until when it may be taken: its checkpoint (or start) plus the
	 * bound, less its restore; always, with --preemptible-any or no bound */
	struct sched_running tr = {
		.start_ms = c.now - 7200000, .last_commit_ms = c.now - 300000, .restore_ms = 60000};
	assert_true(sched_las_takeable_until(&las[NORMAL], &tr) == c.now - 300000 + 600000 - 60000);
	tr.last_commit_ms = 0;
	assert_true(sched_las_takeable_until(&las[NORMAL], &tr) == c.now - 7200000 + 540000);
	tr.preempt_any = true;
	assert_true(sched_las_takeable_until(&las[NORMAL], &tr) == INT64_MAX);
	tr.preempt_any = false;
	las[NORMAL].max_loss_s = -1;
	assert_true(sched_las_takeable_until(&las[NORMAL], &tr) == INT64_MAX);
	las[NORMAL].max_loss_s = 600;
	/* no bound: taken whatever it loses */
	for (int l = 0; l < 3; l++)
		c.classes[1 + l].las_max_loss_ms = -1;
	r->start_ms = c.now - 7200000;
	r->last_commit_ms = r->restore_ms = 0;
	r->preempt_any = false;
	assert_int_equal(pass(&c, &d), 0);
	assert_true(preempted(&d, r->id));
	sched_decisions_release(&d);
	/* the bound back (by class, prod over batch below, it does not count) */
	for (int l = 0; l < 3; l++)
		c.classes[1 + l].las_max_loss_ms = 600000;
	/* the same level, a later one, another class: nothing is taken */
	int pairs[][2] = {{first[NORMAL], first[NORMAL]},
			  {first[NORMAL] + 1, first[NORMAL] + 1},
			  {first[NORMAL], first[NORMAL] + 1},
			  {first[PROD], first[NORMAL]},
			  {first[NORMAL] + 2, first[BATCH]}};
	for (size_t k = 0; k < sizeof(pairs) / sizeof(pairs[0]); k++) {
		r->cls = pairs[k][0];
		p->cls = pairs[k][1];
		assert_int_equal(pass(&c, &d), 0);
		assert_int_equal(d.npreempts, 0);
		assert_int_equal(wait_of(&d, 0)->reason, SCHED_WAIT_RESOURCES);
		sched_decisions_release(&d);
	}
	/* prod may still preempt batch, and a later level of a preemptible
	 * class is a victim of prod's like any batch job */
	r->cls = first[BATCH];
	p->cls = first[PROD];
	assert_int_equal(pass(&c, &d), 0);
	assert_true(preempted(&d, r->id));
	sched_decisions_release(&d);
	/* waiting jobs: the first level goes first, whatever came before */
	c.nr = 0;
	for (int k = 0; k < 8; k++)
		c.devs[0][k].free_milli = MODEL_MILLI;
	p->cls = first[NORMAL] + 1;
	struct sched_job *q = add_job(&c, 1, 1, 8000);
	q->cls = first[NORMAL];
	assert_int_equal(pass(&c, &d), 0);
	assert_non_null(start_of(&d, 1));
	assert_null(start_of(&d, 0));
	sched_decisions_release(&d);
	/* levels past the limit of classes */
	struct sched_class five[5], out[MODEL_MAX_CLASSES];
	struct sched_las l8[5];
	for (int k = 0; k < 5; k++) {
		five[k] = base[0];
		l8[k] = (struct sched_las){.nlevels = 7};
	}
	int f5[5];
	assert_int_equal(sched_classes_expand(five, l8, 4, out, f5), 28);
	assert_int_equal(sched_classes_expand(five, l8, 5, out, f5), -E2BIG);
	/* a class whose level is out of range is refused by the pass */
	c.classes[1].las_level = SCHED_LAS_MAX_LEVELS;
	assert_int_equal(pass(&c, &d), -EINVAL);
	c.classes[1].las_level = 0;
	c.classes[0].las_level = 1; /* a level of no family */
	assert_int_equal(pass(&c, &d), -EINVAL);
}

/* "placement": dense by default (a one-device job takes the last free
 * device of a busy slower node and keeps an empty fast node whole),
 * "fastest" puts it on the fastest model. */
static void test_placement_config(void **state)
{
	struct sched_config cfg;
	sched_config_default(&cfg);
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 64);
	add_node(&c, "A100", 8, 64);
	add_running(&c, NORMAL, 7, 1, 1);
	add_job(&c, 1, 1, 1000);
	struct sched_decisions d;
	sched_policy_of_config(&cfg, &c.policy);
	assert_true(c.policy.score_every_node && c.policy.score_before_speed);
	assert_int_equal(pass(&c, &d), 0);
	assert_string_equal(c.nodes[start_of(&d, 0)->nodes[0].node].name, "n01");
	sched_decisions_release(&d);
	struct tk_error err;
	assert_int_equal(sched_config_load_json(&cfg, "{\"placement\": \"fastest\"}", &err), 0);
	sched_policy_of_config(&cfg, &c.policy);
	assert_false(c.policy.score_every_node || c.policy.score_before_speed);
	assert_int_equal(pass(&c, &d), 0);
	assert_string_equal(c.nodes[start_of(&d, 0)->nodes[0].node].name, "n00");
	sched_decisions_release(&d);
	/* the windows' lookahead: a day unless configured */
	assert_int_equal(c.policy.maint_lookahead_ms, 86400000);
	assert_int_equal(sched_config_load_json(&cfg, "{\"maint_lookahead\": \"2h\"}", &err), 0);
	sched_policy_of_config(&cfg, &c.policy);
	assert_int_equal(c.policy.maint_lookahead_ms, 7200000);
}

/* A configuration's "order": "las" is what the pass is given. */
static void test_las_config(void **state)
{
	struct sched_config cfg;
	sched_config_default(&cfg);
	struct tk_error err;
	assert_int_equal(sched_config_load_json(
				 &cfg,
				 "{\"classes\": [{\"name\": \"prod\", \"priority\": 100},"
				 " {\"name\": \"research\", \"priority\": 50, \"order\": \"las\","
				 " \"las_limits_gpu_h\": [2, 4, 8], \"las_max_stretch\": 3}]}",
				 &err),
			 0);
	struct sched_class out[MODEL_MAX_CLASSES];
	struct sched_las las[MODEL_MAX_CLASSES];
	int first[MODEL_MAX_CLASSES];
	assert_int_equal(sched_classes_of_config(&cfg, out, las, first), 5);
	assert_int_equal(first[1], 1);
	assert_int_equal(las[0].nlevels, 0);
	assert_int_equal(las[1].nlevels, 4);
	assert_true(las[1].limit_gpu_s[0] == 7200 && las[1].limit_gpu_s[2] == 8 * 3600);
	assert_true(las[1].max_stretch == 3);
	assert_true(las[1].min_run_s == MODEL_LAS_DEFAULT_MIN_RUN_S);
	assert_int_equal(out[2].las_min_run_ms, MODEL_LAS_DEFAULT_MIN_RUN_S * 1000);
	assert_int_equal(out[0].las_min_run_ms, 0);
	assert_int_equal(out[4].las_level, 3);
	assert_int_equal(sched_las_level(&las[1], 5 * 3600), 2);
	/* default levels */
	assert_int_equal(sched_config_load_json(&cfg,
						"{\"classes\": [{\"name\": \"a\", \"priority\": 1,"
						" \"order\": \"las\"}]}",
						&err),
			 0);
	assert_int_equal(sched_classes_of_config(&cfg, out, las, first), 4);
	assert_true(las[0].limit_gpu_s[0] == 3600 && las[0].limit_gpu_s[1] == 16 * 3600 &&
		    las[0].limit_gpu_s[2] == 128 * 3600);
	assert_true(las[0].max_stretch == MODEL_LAS_DEFAULT_MAX_STRETCH);
	/* the pass limit: the configuration's, bounded unless set to 0 */
	struct sched_policy pol;
	sched_policy_of_config(&cfg, &pol);
	assert_int_equal(pol.max_starts, SCHED_CONFIG_MAX_STARTS);
	cfg.max_starts_per_pass = 0;
	sched_policy_of_config(&cfg, &pol);
	assert_int_equal(pol.max_starts, 0);
}

/* Past the pass limit, the jobs left wait in the order the pass would have
 * tried them: classes by priority, within one queue by queue in fair-share
 * order (no share changes any more), each queue's oldest first. */
static void test_pass_limit_order(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 64);
	c.queues[0] = (struct sched_queue){"q0", -1, -1, 1, 0, 0, NULL};
	c.queues[1] = (struct sched_queue){"q1", -1, -1, 1, 5e6, 0, NULL};
	c.queues[2] = (struct sched_queue){"q2", -1, -1, 1, 1e6, 0, NULL};
	c.nqueues = 3;
	add_job(&c, 1, 1, 1000)->cls = PROD; /* starts */
	add_job(&c, 1, 1, 1000)->cls = PROD; /* the first left: says why */
	int q[] = {1, 2, 0, 1, 2, 0};
	for (int i = 0; i < 6; i++)
		add_job(&c, 1, 1, 1000)->queue = q[i];
	c.policy.max_starts = 1;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 1);
	assert_int_equal(d.starts[0].job, 0);
	/* q0 first (it holds the start, but 1,000 is under q2's 1e6), then q2, then q1 */
	int want[] = {1, 4, 7, 3, 6, 2, 5};
	assert_int_equal(d.nwaits, 7);
	for (int i = 0; i < 7; i++) {
		assert_int_equal(d.waits[i].job, want[i]);
		assert_int_equal(d.waits[i].reason, SCHED_WAIT_PASS_LIMIT);
		assert_int_equal(d.waits[i].same_as, i == 0 ? -1 : 1);
	}
	sched_decisions_release(&d);
}

/* Passes large enough that their arrays come from the keep's blocks (a
 * record per waiting job: 8,000 jobs are past the smallest block kept):
 * the same decisions as a pass with memory of its own, a second pass of
 * the same size takes no new block, and passes of other sizes in between
 * (larger, smaller: blocks of other classes, blocks written before) change
 * nothing either. Some jobs are of a higher class and preempt, so the
 * victims' arrays come from the keep too. */
static void test_keep_reuses_blocks(void **state)
{
	struct cluster c;
	init(&c);
	for (int i = 0; i < 4; i++)
		add_node(&c, i % 2 ? "A100" : "H100", 8, 64);
	for (int i = 0; i < 4; i++)
		add_running(&c, BATCH, 4, 1, i);
	int sizes[] = {8000, 20000, 8000, 3000, 8000};
	size_t held[5] = {0};
	struct sched_job *jobs = xcalloc(20000, sizeof(*jobs));
	const struct sched_job **ptrs = xcalloc(20000, sizeof(*ptrs));
	for (int i = 0; i < 20000; i++) {
		struct sched_job *j = &jobs[i];
		j->id = 1000 + i;
		j->cls = i % 97 == 5 ? PROD : NORMAL;
		j->nodes = 1;
		j->tasks_per_node = 1;
		j->gpu_milli = i % 3 ? 1000 : 500;
		j->submit_ms = i;
		ptrs[i] = j;
	}
	struct sched_keep *k = sched_keep_new();
	for (int r = 0; r < 5; r++) {
		struct sched_snapshot s = snapshot_of(&c);
		s.jobs = ptrs;
		s.njobs = sizes[r];
		struct sched_decisions own, with;
		assert_int_equal(sched_pass(&s, c.now, &c.policy, &own), 0);
		s.keep = k;
		assert_int_equal(sched_pass(&s, c.now, &c.policy, &with), 0);
		same_decisions(&own, &with);
		assert_int_equal(with.nstarts + with.nwaits, sizes[r]);
		assert_true(with.npreempts > 0);
		sched_decisions_release(&own);
		sched_decisions_release(&with);
		held[r] = sched_keep_bytes(k);
	}
	/* 8,000 records of 16 bytes and more: held; the largest pass's blocks
	 * serve the smaller ones after it (under AddressSanitizer the keep
	 * holds nothing, so that a block used after its free is caught) */
#if defined(__SANITIZE_ADDRESS__)
	assert_true(held[0] == 0 && held[4] == 0);
#else
	assert_true(held[0] >= 8000 * 16);
	assert_true(held[1] > held[0]);
	assert_true(held[2] == held[1] && held[3] == held[1] && held[4] == held[1]);
#endif
	/* passes of 3,000 from now on: a block no pass took for 16 passes goes
	 * back, and those they take stay */
	struct sched_snapshot small = snapshot_of(&c);
	small.jobs = ptrs;
	small.njobs = 3000;
	small.keep = k;
	size_t after[18];
	for (int r = 0; r < 18; r++) {
		struct sched_decisions d;
		assert_int_equal(sched_pass(&small, c.now, &c.policy, &d), 0);
		sched_decisions_release(&d);
		after[r] = sched_keep_bytes(k);
	}
#if defined(__SANITIZE_ADDRESS__)
	assert_true(after[0] == 0 && after[17] == 0);
#else
	/* the 20,000 jobs' blocks were last taken by the keep's second pass:
	 * 16 passes later (the 12th small one) they go; what the small passes
	 * take (their waits: 96 KB) stays */
	assert_true(after[0] == held[4] && after[11] == held[4]);
	assert_true(after[12] < held[4]);
	assert_true(after[17] < after[12] && after[17] >= 3000 * 32);
	assert_true(after[16] == after[17]);
#endif
	sched_keep_free(k);
	sched_keep_free(NULL);
	free(jobs);
	free(ptrs);
}

static void test_limits_and_invalid(void **state)
{
	struct cluster c;
	init(&c);
	add_node(&c, "H100", 8, 16);
	for (int i = 0; i < 5; i++)
		add_job(&c, 1, 1, 1000);
	c.policy.max_starts = 2;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 2);
	/* the first left waiting says why, the others point to it */
	assert_int_equal(wait_of(&d, 2)->reason, SCHED_WAIT_PASS_LIMIT);
	assert_non_null(strstr(wait_of(&d, 2)->detail, "next scheduling pass"));
	for (int i = 3; i < 5; i++) {
		assert_int_equal(wait_of(&d, i)->reason, SCHED_WAIT_PASS_LIMIT);
		assert_int_equal(wait_of(&d, i)->same_as, 2);
		assert_null(wait_of(&d, i)->detail);
	}
	sched_decisions_release(&d);
	c.policy.max_starts = 0;
	c.nodes[0].schedulable = false;
	assert_int_equal(pass(&c, &d), 0);
	/* only a node down or drained could: it waits for nodes, not never */
	assert_int_equal(wait_of(&d, 0)->reason, SCHED_WAIT_NODES);
	assert_non_null(strstr(why(&d, 0), "only nodes that are down or drained"));
	sched_decisions_release(&d);
	c.jobs[0].cpus_per_task = 17; /* more than even that node has */
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(wait_of(&d, 0)->reason, SCHED_WAIT_NEVER_FITS);
	sched_decisions_release(&d);
	c.jobs[0].cpus_per_task = 0;
	c.nodes[0].schedulable = true;
	c.jobs[0].cpus_per_task = 17;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(wait_of(&d, 0)->reason, SCHED_WAIT_NEVER_FITS);
	assert_non_null(strstr(why(&d, 0), "17 CPUs"));
	sched_decisions_release(&d);
	c.jobs[0].cpus_per_task = 0;
	c.jobs[0].nodes = 0;
	assert_int_equal(pass(&c, &d), -EINVAL);
	c.jobs[0].nodes = 1;
	/* a later job, of a shape not seen before or of one seen */
	c.jobs[3].tasks_per_node = 0;
	assert_int_equal(pass(&c, &d), -EINVAL);
	c.jobs[3].tasks_per_node = 1;
	c.jobs[4].ngpu_types = 1;
	assert_int_equal(pass(&c, &d), -EINVAL);
	c.jobs[4].ngpu_types = 0;
	assert_int_equal(pass(&c, &d), 0);
	sched_decisions_release(&d);
	c.jobs[0].queue = 7;
	assert_int_equal(pass(&c, &d), -EINVAL);
	c.jobs[0].queue = 0;
	/* running jobs on a node or a device that is not there */
	struct sched_running *r = add_running(&c, BATCH, 2, 1, 0);
	c.run_nodes[0][0].node = 1;
	assert_int_equal(pass(&c, &d), -EINVAL);
	c.run_nodes[0][0].node = 0;
	c.run_nodes[0][0].devs[1] = 8;
	assert_int_equal(pass(&c, &d), -EINVAL);
	c.run_nodes[0][0].devs[1] = 1;
	r->queue = 3;
	assert_int_equal(pass(&c, &d), -EINVAL);
	r->queue = 0;
	assert_int_equal(pass(&c, &d), 0);
	sched_decisions_release(&d);
	/* a shape table refuses a request that is wrong, and a pass refuses a
	 * job whose shape id is not in the table */
	struct sched_shapes *t = sched_shapes_new();
	c.jobs[0].nodes = 0;
	assert_int_equal(sched_shapes_add(t, &c.jobs[0]), -EINVAL);
	c.jobs[0].nodes = 1;
	for (int i = 0; i < c.nj; i++)
		c.jobs[i].shape_id = sched_shapes_add(t, &c.jobs[i]);
	assert_int_equal(sched_shapes_live(t), 1);
	struct sched_snapshot snap = snapshot_of(&c);
	snap.shapes = t;
	assert_int_equal(sched_pass(&snap, c.now, &c.policy, &d), 0);
	sched_decisions_release(&d);
	c.jobs[2].shape_id = 5;
	assert_int_equal(sched_pass(&snap, c.now, &c.policy, &d), -EINVAL);
	c.jobs[2].shape_id = c.jobs[0].shape_id;
	/* ... and, with the keys kept beside the jobs, a key that is wrong */
	struct sched_key keys[8];
	assert_true(c.nj <= 8);
	for (int i = 0; i < c.nj; i++)
		keys[i] = sched_key_of(c.ptrs[i]);
	snap.keys = keys;
	assert_int_equal(sched_pass(&snap, c.now, &c.policy, &d), 0);
	sched_decisions_release(&d);
	keys[1].shape_id = 5;
	assert_int_equal(sched_pass(&snap, c.now, &c.policy, &d), -EINVAL);
	keys[1].shape_id = c.jobs[0].shape_id;
	keys[1].cls = c.nclasses;
	assert_int_equal(sched_pass(&snap, c.now, &c.policy, &d), -EINVAL);
	keys[1].cls = 0;
	keys[2].queue = -1;
	assert_int_equal(sched_pass(&snap, c.now, &c.policy, &d), -EINVAL);
	snap.keys = NULL;
	for (int i = 0; i < c.nj; i++)
		sched_shapes_drop(t, c.jobs[i].shape_id);
	assert_int_equal(sched_pass(&snap, c.now, &c.policy, &d), -EINVAL);
	/* a dropped id goes to the next new shape */
	c.jobs[1].gpu_milli = 2000;
	assert_int_equal(sched_shapes_add(t, &c.jobs[1]), c.jobs[0].shape_id);
	c.jobs[1].gpu_milli = 1000;
	sched_shapes_free(t);
	c.devs[0][3].free_milli = 1001;
	assert_int_equal(pass(&c, &d), -EINVAL);
	assert_true(fabs(sched_decay(100, 3600, 3600) - 50) < 1e-9);
	assert_true(fabs(sched_decay(100, 0, 3600) - 100) < 1e-9);
	/* fair share's memory: an hour holding 2 devices on top of 100 that halve */
	assert_true(fabs(sched_usage_age(100, 2000, 3600, 3600) - (50 + 2000 * 3600.0)) < 1e-6);
	assert_true(fabs(sched_usage_age(100, 2000, 0, 3600) - 100) < 1e-9);
	assert_true(fabs(sched_usage_age(100, 2000, -5, 3600) - 100) < 1e-9);
	/* held at a steady rate for 33 half-lives, in steps of a sixth of one:
	 * usage settles where a step's decay equals what it adds */
	double u = 0;
	for (int i = 0; i < 200; i++)
		u = sched_usage_age(u, 3000, 600, 3600);
	double settled = 3000 * 600 / (1 - exp2(-600 / 3600.0));
	assert_true(fabs(u - settled) < settled * 1e-9);
	assert_true(fabs(sched_usage_recent(u, 3600) - settled * M_LN2 / 3600) < 1e-6);
}

/* ---- properties ------------------------------------------------------------------------ */

static uint64_t rng;
static uint32_t rnd(uint32_t n);

/* The shape table against a plain count per request, over random adds and
 * drops: one id per request while it has jobs, ids reused, nothing left. */
static void test_shape_table(void **state)
{
	static const char *types[][2] = {{"H100", NULL}, {"h100", NULL}, {"A100", "H100"}};
	struct sched_job req[48];
	int refs[48] = {0}, id[48];
	for (int i = 0; i < 48; i++) {
		memset(&req[i], 0, sizeof(req[i]));
		req[i].nodes = 1 + i % 3;
		req[i].tasks_per_node = 1;
		req[i].gpu_milli = (i / 3 % 4) * 1000;
		int ty = i / 12; /* 0: any; 1, 2: H100 spelt two ways; 3: A100 or H100 */
		req[i].ngpu_types = ty == 3 ? 2 : ty ? 1 : 0;
		req[i].gpu_types = ty ? types[ty - 1] : NULL;
	}
	struct sched_shapes *t = sched_shapes_new();
	rng = 7;
	int max_id = -1;
	for (int op = 0; op < 20000; op++) {
		int i = (int)rnd(48);
		if (refs[i] && rnd(2)) {
			sched_shapes_drop(t, id[i]);
			refs[i]--;
			continue;
		}
		int got = sched_shapes_add(t, &req[i]);
		assert_true(got >= 0);
		max_id = MAX(max_id, got);
		/* "H100" and "h100" ask for the same */
		for (int k = 0; k < 48; k++)
			if (refs[k] &&
			    (k == i || sched_job_shape(&req[k]) == sched_job_shape(&req[i])))
				assert_int_equal(id[k], got);
		id[i] = got;
		refs[i]++;
	}
	int live = 0;
	for (int i = 0; i < 48; i++) {
		bool first = refs[i] > 0;
		for (int k = 0; k < i && first; k++)
			first = !(refs[k] > 0 && id[k] == id[i]);
		live += first;
	}
	assert_int_equal(sched_shapes_live(t), live);
	assert_true(max_id < 48);
	for (int i = 0; i < 48; i++)
		while (refs[i]--)
			sched_shapes_drop(t, id[i]);
	assert_int_equal(sched_shapes_live(t), 0);
	sched_shapes_free(t);
}

static uint32_t rnd(uint32_t n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(rng >> 33) % n;
}

static const char *const models[] = {"H100", "A100-80GB", "T4"};

static void random_cluster(struct cluster *c)
{
	init(c);
	c->queues[1] = (struct sched_queue){
		"qa", 1000 * (int)rnd(16), 1000 * (int)rnd(8), 1 + rnd(3), rnd(4000), 0, NULL};
	c->queues[2] = (struct sched_queue){"qb", -1, -1, 1 + rnd(3), rnd(4000), 0, NULL};
	c->nqueues = 3;
	c->policy.frac = (enum sched_frac_policy)rnd(3);
	c->policy.no_backfill = rnd(8) == 0;
	int nn = 1 + (int)rnd(10);
	for (int i = 0; i < nn; i++) {
		int ndev = rnd(4) == 0 ? 0 : 1 << rnd(4);
		int k = add_node(c, models[rnd(3)], ndev, 8 + (int)rnd(64));
		snprintf(c->topo[k], sizeof(c->topo[k]), "s%u/l%u", rnd(2), rnd(3));
		c->nodes[k].schedulable = rnd(8) != 0;
		c->nodes[k].cpus_free = c->nodes[k].cpus_total - (int)rnd(8);
		c->nodes[k].mem_free_mib = rnd(1 << 20);
		for (int d = 0; d < ndev; d++)
			c->devs[k][d].nvlink_domain = d / 4;
	}
	/* running jobs, each on one or two nodes, taking what they hold */
	int nr = (int)rnd(12);
	for (int i = 0; i < nr; i++) {
		int a = (int)rnd((uint32_t)nn), b = (int)rnd((uint32_t)nn);
		int want = 1 + (int)rnd(4);
		bool ok = true;
		for (int x = 0; x < (a == b ? 1 : 2); x++) {
			int node = x ? b : a, have = 0;
			for (int d = 0; d < c->nodes[node].ndev; d++)
				have += c->devs[node][d].free_milli == MODEL_MILLI;
			ok &= have >= want;
		}
		if (!ok)
			continue;
		struct sched_running *r = a == b ? add_running(c, (int)rnd(3), want, 1, a)
						 : add_running(c, (int)rnd(3), want, 2, a, b);
		r->queue = (int)rnd(3);
		r->time_limit_s = rnd(2) ? 600 * (1 + rnd(10)) : 0;
		r->start_ms = c->now - 1000 * rnd(3600);
		r->last_checkpoint_ms = rnd(2) ? c->now - 1000 * rnd(600) : 0;
		r->stopping = rnd(10) == 0;
	}
	/* fractions in use on some free devices */
	for (int i = 0; i < nn; i++)
		for (int d = 0; d < c->nodes[i].ndev; d++)
			if (c->devs[i][d].free_milli == MODEL_MILLI && rnd(6) == 0)
				c->devs[i][d].free_milli = 250 * (int)rnd(4);
	int nj = 1 + (int)rnd(40);
	for (int i = 0; i < nj; i++) {
		struct sched_job *j;
		if (rnd(4) == 0)
			j = add_job(c, 1, 1, 250 * (1 + (int)rnd(3)));
		else
			j = add_job(c, 1 + (int)rnd(3), 1 + (int)rnd(2), 1000 * (int)rnd(3));
		j->cls = (int)rnd(3);
		j->queue = (int)rnd(3);
		j->cpus_per_task = (int)rnd(4);
		j->mem_mib = rnd(4) ? 0 : rnd(1 << 19);
		j->time_limit_s = rnd(2) ? 300 * (1 + rnd(20)) : 0;
		j->max_switches = rnd(5) == 0 ? 1 + (int)rnd(3) : 0;
		j->mixed_types = rnd(6) == 0 && j->gpu_milli >= 1000;
		if (rnd(3) == 0) {
			j->ngpu_types = 1;
			j->gpu_types = &models[rnd(3)];
		}
	}
	/* labels and taints on some nodes, constraints and tolerations on
	 * some jobs (drawn after the rest: the rest draws as it did) */
	static const char *const labels[] = {"rack=r1", "ib=,rack=r2", "ib=,rack=r1"};
	static const char *const taints[] = {"t1", "t1,t2"};
	static const char *const exprs[] = {"rack=r1", "ib", "rack!=r1", "rack=r2|ib&rack=r1"};
	static const char *const tols[] = {"t1", "t1,t2", "t2"};
	for (int i = 0; i < nn; i++) {
		c->nodes[i].labels = rnd(3) == 0 ? labels[rnd(3)] : NULL;
		c->nodes[i].taints = rnd(8) == 0 ? taints[rnd(2)] : NULL;
	}
	for (int i = 0; i < nj; i++) {
		c->jobs[i].constraint = rnd(5) == 0 ? exprs[rnd(4)] : NULL;
		c->jobs[i].tolerate = rnd(5) == 0 ? tols[rnd(3)] : NULL;
	}
	/* pools: bits 0 and 1 on some nodes (others in none), masks on some
	 * jobs; a node's 0 is in no pool, as the server's MODEL_POOL_NONE */
	static const uint64_t nmasks[] = {1, 2, 3, MODEL_POOL_NONE};
	static const uint64_t jmasks[] = {1, 2, 3, MODEL_POOL_NONE | 1, MODEL_POOL_NOWHERE};
	for (int i = 0; i < nn; i++)
		c->nodes[i].pools = rnd(3) == 0 ? nmasks[rnd(4)] : 0;
	for (int i = 0; i < nj; i++)
		c->jobs[i].pools = rnd(4) == 0 ? jmasks[rnd(5)] : 0;
	/* fault domains on most nodes, --within and --spread on some gangs */
	static const char *const doms[] = {"a/r1", "a/r2", "a/r3", "b/r1", "b"};
	for (int i = 0; i < nn; i++)
		c->nodes[i].domain = rnd(4) ? doms[rnd(5)] : NULL;
	for (int i = 0; i < nj; i++) {
		if (c->jobs[i].nodes < 2 || rnd(3))
			continue;
		if (rnd(2))
			c->jobs[i].within_depth = 1 + (int)rnd(2);
		else
			c->jobs[i].spread_depth = 1 + (int)rnd(2),
			c->jobs[i].spread_max = 1 + (int)rnd(2);
	}
	/* windows on some clusters: one or two, ahead or started, some with
	 * jobs of their own; a lookahead of up to two hours */
	c->policy.maint_lookahead_ms = 3600000LL * rnd(3);
	int nw = rnd(3) == 0 ? 1 + (int)rnd(2) : 0;
	for (int w = 0; w < nw; w++) {
		int a = (int)rnd((uint32_t)nn), b = a + (int)rnd((uint32_t)(nn - a));
		add_window(c, w ? "w1" : "w0", 1800LL * ((int)rnd(8) - 1),
			   rnd(3) ? -1 : (int)rnd(2), a, b);
	}
	for (int i = 0; i < nj; i++)
		c->jobs[i].windows = nw && rnd(4) == 0 ? 1 + rnd(3) : 0;
	/* limits beyond accelerators on some queues (a model's, units, CPUs,
	 * memory), the models' weights, weighted shares */
	c->weights[0] = (struct sched_model_weight){"H100", 1};
	c->weights[1] = (struct sched_model_weight){"A100-80GB", 0.32};
	c->weights[2] = (struct sched_model_weight){"T4", 0.07};
	c->nweights = rnd(2) ? 3 : 0;
	c->policy.weighted_share = rnd(2);
	for (int q = 1; q < 3; q++) {
		if (rnd(3))
			continue;
		c->queues[q].dims = c->dims[q];
		c->queues[q].ndims = 1 + (int)rnd(3);
		for (int k = 0; k < c->queues[q].ndims; k++) {
			struct sched_qdim *d = &c->dims[q][k];
			d->kind = (enum sched_qdim_kind)rnd(4);
			d->model = models[rnd(3)];
			d->limit = d->kind == SCHED_QDIM_CPUS  ? rnd(40)
				   : d->kind == SCHED_QDIM_MEM ? rnd(1 << 20)
							       : 1000 * rnd(12);
			d->quota = d->limit;
		}
	}
	/* queue qa starts within its limit */
	int64_t use = 0;
	for (int i = 0; i < c->nr; i++)
		if (c->run[i].queue == 1)
			for (int k = 0; k < c->run[i].nnodes; k++)
				use += (int64_t)c->run[i].nodes[k].ndev * c->run[i].nodes[k].milli;
	if (use > c->queues[1].quota_milli + c->queues[1].borrow_milli)
		c->queues[1].borrow_milli = use - c->queues[1].quota_milli;
}

static bool accepts(const struct sched_job *j, const char *model)
{
	if (!j->ngpu_types)
		return true;
	for (int i = 0; i < j->ngpu_types; i++)
		if (strcmp(j->gpu_types[i], model) == 0)
			return true;
	return false;
}

static void check_invariants(const struct cluster *c, const struct sched_decisions *d)
{
	static int used[MAXN][MODEL_MAX_ACCELS];
	memset(used, 0, sizeof(used));
	int cpus[MAXN] = {0};
	int64_t mem[MAXN] = {0};
	int64_t qstart[4] = {0};
	bool started[MAXJ] = {false};
	for (int i = 0; i < d->nstarts; i++) {
		const struct sched_start *s = &d->starts[i];
		const struct sched_job *j = c->ptrs[s->job];
		assert_false(started[s->job]);
		started[s->job] = true;
		assert_int_equal(s->nnodes, j->nodes); /* all or nothing */
		const char *model = NULL;
		int sel[8];
		for (int k = 0; k < s->nnodes; k++) {
			const struct sched_assign *a = &s->nodes[k];
			sel[k] = a->node;
			assert_true(c->nodes[a->node].schedulable);
			/* its constraint, and every taint there tolerated */
			assert_true(job_constraint_match(j->constraint, c->nodes[a->node].labels));
			assert_true(node_taints_tolerated(c->nodes[a->node].taints, j->tolerate));
			/* no window keeps it off */
			for (int w = 0; w < c->nwin; w++)
				assert_false(in_window(&c->windows[w], a->node) &&
					     window_in_way(c, &c->windows[w], j));
			/* one of its pools */
			uint64_t np = c->nodes[a->node].pools;
			assert_true(!j->pools || ((np ? np : MODEL_POOL_NONE) & j->pools));
			/* its fault domains: one, or at most spread_max in any */
			int same = 0;
			for (int m = 0; m < s->nnodes; m++) {
				const char *x = c->nodes[a->node].domain;
				const char *y = c->nodes[s->nodes[m].node].domain;
				if (j->within_depth)
					assert_true(sched_domain_same(x, y, j->within_depth));
				same += j->spread_depth && sched_domain_same(x, y, j->spread_depth);
			}
			assert_true(!j->spread_depth || same <= j->spread_max);
			for (int m = 0; m < k; m++)
				assert_int_not_equal(s->nodes[m].node, a->node);
			int want = j->gpu_milli >= MODEL_MILLI
					   ? j->tasks_per_node * j->gpu_milli / MODEL_MILLI
					   : (j->gpu_milli ? 1 : 0);
			assert_int_equal(a->ndev, want);
			for (int x = 0; x < a->ndev; x++) {
				for (int y = 0; y < x; y++)
					assert_int_not_equal(a->devs[x], a->devs[y]);
				const struct sched_dev *dev = &c->nodes[a->node].devs[a->devs[x]];
				assert_true(accepts(j, dev->model));
				if (!model)
					model = dev->model;
				if (!j->mixed_types)
					assert_string_equal(model, dev->model);
				used[a->node][a->devs[x]] += a->milli;
			}
			cpus[a->node] += a->cpus;
			mem[a->node] += a->mem_mib;
		}
		if (j->max_switches)
			assert_true(sched_switches_spanned(c->nodes, sel, s->nnodes) <=
				    j->max_switches);
		qstart[j->queue] += (int64_t)j->nodes * j->tasks_per_node * j->gpu_milli;
	}
	/* nothing given twice, nothing over capacity */
	for (int n = 0; n < c->n; n++) {
		assert_true(cpus[n] <= c->nodes[n].cpus_free);
		assert_true(mem[n] <= c->nodes[n].mem_free_mib);
		for (int k = 0; k < c->nodes[n].ndev; k++)
			assert_true(used[n][k] <= c->devs[n][k].free_milli);
	}
	/* quotas hold, borrowing within its limit */
	for (int q = 0; q < c->nqueues; q++) {
		const struct sched_queue *sq = &c->queues[q];
		if (sq->quota_milli < 0 || !qstart[q])
			continue;
		int64_t use = 0;
		for (int i = 0; i < c->nr; i++)
			if (c->run[i].queue == q)
				for (int k = 0; k < c->run[i].nnodes; k++)
					use += (int64_t)c->run[i].nodes[k].ndev *
					       c->run[i].nodes[k].milli;
		int64_t limit =
			sq->borrow_milli < 0 ? INT64_MAX : sq->quota_milli + sq->borrow_milli;
		assert_true(use + qstart[q] <= limit);
	}
	/* preemption only of what may be preempted, never of one already stopping */
	for (int i = 0; i < d->npreempts; i++) {
		const struct sched_running *v = NULL;
		for (int k = 0; k < c->nr; k++)
			if (c->run[k].id == d->preempts[i].victim)
				v = &c->run[k];
		assert_non_null(v);
		assert_false(v->stopping);
		const struct sched_job *j = c->ptrs[d->preempts[i].job];
		bool by_class = c->classes[j->cls].may_preempt && c->classes[v->cls].preemptible &&
				c->classes[v->cls].priority < c->classes[j->cls].priority;
		bool by_reclaim = c->queues[v->queue].quota_milli >= 0 && v->queue != j->queue;
		const struct sched_class *jc = &c->classes[j->cls], *vc = &c->classes[v->cls];
		bool by_level = jc->las_family && jc->las_family == vc->las_family &&
				vc->las_level > jc->las_level;
		assert_true(by_class || by_reclaim || by_level);
	}
}

/* What assignment a of queue q's job counts in dim d. */
static double dim_amount(const struct cluster *c, const struct sched_qdim *d,
			 const struct sched_assign *a)
{
	if (d->kind == SCHED_QDIM_CPUS)
		return a->cpus;
	if (d->kind == SCHED_QDIM_MEM)
		return (double)a->mem_mib;
	double v = 0;
	for (int x = 0; x < a->ndev; x++) {
		const char *m = c->nodes[a->node].devs[a->devs[x]].model;
		double w = 1;
		for (int k = 0; k < c->nweights; k++)
			if (strcmp(c->weights[k].model, m) == 0)
				w = c->weights[k].weight;
		if (d->kind == SCHED_QDIM_UNITS)
			v += a->milli * w;
		else if (strcmp(d->model, m) == 0)
			v += a->milli;
	}
	return v;
}

/* No queue passes a limit of its dims with what a pass started. */
static void check_dims(const struct cluster *c, const struct sched_decisions *d)
{
	for (int q = 0; q < c->nqueues; q++)
		for (int k = 0; k < c->queues[q].ndims; k++) {
			const struct sched_qdim *dim = &c->queues[q].dims[k];
			double use = 0, start = 0;
			for (int r = 0; r < c->nr; r++)
				for (int m = 0; m < c->run[r].nnodes && c->run[r].queue == q; m++)
					use += dim_amount(c, dim, &c->run[r].nodes[m]);
			for (int s = 0; s < d->nstarts; s++)
				for (int m = 0; m < d->starts[s].nnodes &&
						c->ptrs[d->starts[s].job]->queue == q;
				     m++)
					start += dim_amount(c, dim, &d->starts[s].nodes[m]);
			if (start > 0)
				assert_true(use + start <= (double)dim->limit + 1e-6);
		}
}

/* The oracle for "no preemption that does not let its preemptor start": once
 * its victims are gone, the preemptor starts when it is alone and first. */
static void check_preemptions_useful(const struct cluster *c, const struct sched_decisions *d)
{
	static struct cluster after;
	for (int i = 0; i < d->npreempts; i++) {
		int job = d->preempts[i].job;
		if (i > 0 && d->preempts[i - 1].job == job)
			continue;
		after = *c;
		for (int n = 0; n < after.n; n++) {
			after.nodes[n].name = after.names[n];
			after.nodes[n].topology = after.topo[n];
			after.nodes[n].devs = after.devs[n];
		}
		/* resources of the victims come back; everything else stays */
		after.nr = 0;
		for (int k = 0; k < c->nr; k++) {
			bool victim = false;
			for (int x = 0; x < d->npreempts; x++)
				victim |= d->preempts[x].job == job &&
					  d->preempts[x].victim == c->run[k].id;
			if (!victim)
				continue;
			for (int m = 0; m < c->run[k].nnodes; m++) {
				const struct sched_assign *a = &c->run[k].nodes[m];
				for (int dv = 0; dv < a->ndev; dv++)
					after.devs[a->node][a->devs[dv]].free_milli += a->milli;
			}
		}
		/* what started in the pass before it is taken */
		for (int s = 0; s < d->nstarts; s++)
			for (int m = 0; m < d->starts[s].nnodes; m++) {
				const struct sched_assign *a = &d->starts[s].nodes[m];
				after.nodes[a->node].cpus_free -= a->cpus;
				after.nodes[a->node].mem_free_mib -= a->mem_mib;
				for (int dv = 0; dv < a->ndev; dv++)
					after.devs[a->node][a->devs[dv]].free_milli -= a->milli;
			}
		after.jobs[0] = c->jobs[job];
		after.jobs[0].queue = 0;
		after.ptrs[0] = &after.jobs[0];
		after.nj = 1;
		after.queues[0].quota_milli = -1;
		struct sched_decisions d2;
		assert_int_equal(pass(&after, &d2), 0);
		if (d2.nstarts != 1)
			fail_msg("job %d preempted %d victims and still cannot start: %s", job,
				 d->npreempts, d2.nwaits ? why(&d2, 0) : "?");
		sched_decisions_release(&d2);
	}
}

static void describe(const struct cluster *c, const struct sched_decisions *d, struct strbuf *sb)
{
	for (int i = 0; i < d->nstarts; i++) {
		strbuf_addf(sb, "job%d:", d->starts[i].job);
		for (int k = 0; k < d->starts[i].nnodes; k++) {
			const struct sched_assign *a = &d->starts[i].nodes[k];
			strbuf_addf(sb, " %s[", c->nodes[a->node].name);
			for (int x = 0; x < a->ndev; x++)
				strbuf_addf(sb, "%d,", a->devs[x]);
			strbuf_addf(sb, "]x%d", a->milli);
		}
		strbuf_addch(sb, ';');
	}
	for (int i = 0; i < d->npreempts; i++)
		strbuf_addf(sb, "pre%lld>%d;", (long long)d->preempts[i].victim,
			    d->preempts[i].job);
	for (int i = 0; i < d->nwaits; i++)
		strbuf_addf(sb, "wait%d:%d:%s;", d->waits[i].job, d->waits[i].reason,
			    d->waits[i].detail ? d->waits[i].detail : "=");
}

/* Windows over time: jobs arrive, start where the passes put them and end
 * by their time limits (or, without one, whenever); at a window's start
 * its nodes hold only jobs without a time limit that started while it was
 * further off than the lookahead, and jobs of its own. Virtual clock,
 * random loads, fixed seeds. */
static void test_window_idle_at_start(void **state)
{
	rng = 20261204;
	static struct cluster c;
	int checked = 0, ran_before = 0, kept_off = 0;
	for (int seed = 0; seed < 150; seed++) {
		init(&c);
		for (int i = 0; i < 6; i++)
			add_node(&c, "H100", 4, 32);
		c.policy.maint_lookahead_ms = 3600000LL * rnd(3);
		int64_t t0 = c.now;
		struct sched_window *w = add_window(&c, "fw", 3600LL * (2 + rnd(4)),
						    rnd(3) ? -1 : 0, (int)rnd(3), 3 + (int)rnd(3));
		int64_t end_at[MAXR]; /* each running job's end */
		bool own[MAXR], nolimit[MAXR];
		int64_t started[MAXR];
		int64_t next_id = 1000;
		while (c.now < w->start_ms + 600000) {
			/* arrivals */
			for (int k = (int)rnd(4); k > 0 && c.nj < 32; k--) {
				struct sched_job *j =
					add_job(&c, 1 + (int)rnd(2), 1, 1000 * (1 + (int)rnd(4)));
				j->id = next_id++;
				j->submit_ms = c.now;
				j->cls = (int)rnd(3);
				j->time_limit_s = rnd(3) ? 1800 * (1 + rnd(8)) : 0;
				j->windows = w->bit >= 0 && rnd(4) == 0 ? 1 : 0;
			}
			struct sched_decisions d;
			assert_int_equal(pass(&c, &d), 0);
			/* victims end now */
			for (int i = 0; i < d.npreempts; i++)
				for (int r = 0; r < c.nr; r++)
					if (c.run[r].id == d.preempts[i].victim)
						end_at[r] = c.now;
			/* starts run for up to their limit */
			bool gone[MAXJ] = {false};
			for (int i = 0; i < d.nstarts && c.nr < MAXR; i++) {
				const struct sched_start *s = &d.starts[i];
				const struct sched_job *j = c.ptrs[s->job];
				int r = c.nr++;
				struct sched_running *nr = &c.run[r];
				memset(nr, 0, sizeof(*nr));
				nr->id = j->id;
				nr->cls = j->cls;
				nr->start_ms = c.now;
				nr->time_limit_s = j->time_limit_s;
				nr->nnodes = s->nnodes;
				nr->nodes = c.run_nodes[r];
				memcpy(c.run_nodes[r], s->nodes,
				       sizeof(*s->nodes) * (size_t)s->nnodes);
				for (int k = 0; k < s->nnodes; k++) {
					const struct sched_assign *a = &s->nodes[k];
					for (int x = 0; x < a->ndev; x++)
						c.devs[a->node][a->devs[x]].free_milli -= a->milli;
					c.nodes[a->node].cpus_free -= a->cpus;
					c.nodes[a->node].mem_free_mib -= a->mem_mib;
				}
				int64_t lim = j->time_limit_s ? j->time_limit_s : 6 * 3600;
				end_at[r] = c.now + 1000 * (60 + (int64_t)rnd((uint32_t)lim - 59));
				own[r] = j->windows != 0;
				nolimit[r] = !j->time_limit_s;
				started[r] = c.now;
				gone[s->job] = true;
			}
			for (int i = 0; i < d.nwaits; i++)
				kept_off += d.waits[i].detail &&
					    strstr(d.waits[i].detail, "reservation fw") != NULL;
			sched_decisions_release(&d);
			int keep = 0;
			for (int i = 0; i < c.nj; i++) {
				if (gone[i])
					continue;
				c.jobs[keep] = c.jobs[i];
				c.ptrs[keep] = &c.jobs[keep];
				keep++;
			}
			c.nj = keep;
			/* ten minutes pass; what ended gives back what it held */
			c.now += 600000;
			int kr = 0;
			for (int r = 0; r < c.nr; r++) {
				if (end_at[r] <= c.now) {
					for (int k = 0; k < c.run[r].nnodes; k++) {
						const struct sched_assign *a = &c.run[r].nodes[k];
						for (int x = 0; x < a->ndev; x++)
							c.devs[a->node][a->devs[x]].free_milli +=
								a->milli;
						c.nodes[a->node].cpus_free += a->cpus;
						c.nodes[a->node].mem_free_mib += a->mem_mib;
					}
					continue;
				}
				c.run[kr] = c.run[r];
				memcpy(c.run_nodes[kr], c.run_nodes[r], sizeof(c.run_nodes[r]));
				c.run[kr].nodes = c.run_nodes[kr];
				end_at[kr] = end_at[r], own[kr] = own[r], nolimit[kr] = nolimit[r];
				started[kr] = started[r];
				kr++;
			}
			c.nr = kr;
			if (c.now < w->start_ms)
				continue;
			/* the window has started: who is on its nodes */
			for (int r = 0; r < c.nr; r++) {
				bool on = false;
				for (int k = 0; k < c.run[r].nnodes; k++)
					on |= in_window(w, c.run[r].nodes[k].node);
				if (!on || own[r])
					continue;
				assert_true(nolimit[r]);
				assert_true(w->start_ms - started[r] > c.policy.maint_lookahead_ms);
				assert_true(started[r] < t0 + 6 * 3600000);
				ran_before++;
			}
			checked++;
		}
	}
	assert_true(checked >= 150);
	assert_true(kept_off > 500);
	print_message("windows: %d checks at a start, %d limitless jobs there, %d waits kept off\n",
		      checked, ran_before, kept_off);
}

/* Reservations when nobody's end is known (no time limits): a head that
 * holds (its patience spent) holds only devices free now on the nodes of
 * its placement; pass after pass, while nothing but its own blockers'
 * ages changes and later jobs start elsewhere, it holds the same devices
 * (no device stays reserved and idle for more than one pass unless it is
 * used); and once the jobs on its nodes end, it starts on them. Without a
 * patience it holds nothing. Random clusters, fixed seed. */
static void test_unknown_end_reservations(void **state)
{
	rng = 20261202;
	static struct cluster c;
	int held_cases = 0, started_there = 0;
	for (int iter = 0; iter < 300; iter++) {
		init(&c);
		c.policy.resv_patience_ms = -1;
		int nn = 4 + (int)rnd(8);
		for (int i = 0; i < nn; i++)
			add_node(&c, "H100", 8, 64);
		/* running jobs without limits on every node, some devices left free */
		for (int i = 0; i < nn; i++) {
			int used = 0, room = 8 - (int)rnd(4);
			while (used < room) {
				int k = 1 + (int)rnd((uint32_t)(room - used));
				struct sched_running *r = add_running(&c, NORMAL, k, 1, i);
				r->start_ms = c.now - 1000LL * (1 + rnd(100000));
				used += k;
			}
		}
		/* a gang that must wait for some of them, then jobs that fit now */
		struct sched_job *head = add_job(&c, 2 + (int)rnd(2), 1, 8000);
		for (int k = 0; k < 4; k++)
			add_job(&c, 1, 1, 1000 * (1 + (int)rnd(2)));
		struct sched_decisions d1, d2;
		assert_int_equal(pass(&c, &d1), 0);
		if (start_of(&d1, 0)) {
			sched_decisions_release(&d1);
			continue;
		}
		assert_int_equal(d1.nresvs, 1);
		const struct sched_resv *r1 = &d1.resvs[0];
		assert_int_equal(r1->job, 0);
		assert_true(r1->until_ms == INT64_MAX);
		held_cases++;
		/* what it holds is free now, and each device once */
		bool held[MAXN][MODEL_MAX_ACCELS];
		memset(held, 0, sizeof(held));
		for (int k = 0; k < r1->nnodes; k++)
			for (int x = 0; x < r1->nodes[k].ndev; x++) {
				int n = r1->nodes[k].node, dv = r1->nodes[k].devs[x];
				assert_int_equal(c.devs[n][dv].free_milli, MODEL_MILLI);
				assert_false(held[n][dv]);
				held[n][dv] = true;
			}
		/* its nodes are those likeliest to free first: none outside has
		 * more free than one inside */
		int min_in = 9, max_out = -1;
		bool in[MAXN] = {false};
		for (int k = 0; k < r1->nnodes; k++)
			in[r1->nodes[k].node] = true;
		for (int n = 0; n < c.n; n++) {
			int f = 0;
			for (int dv = 0; dv < 8; dv++)
				f += c.devs[n][dv].free_milli == MODEL_MILLI;
			if (in[n])
				min_in = MIN(min_in, f);
			else
				max_out = MAX(max_out, f);
		}
		if (r1->nnodes == head->nodes)
			assert_true(min_in >= max_out);
		/* the later jobs that started: what they took is gone from the free
		 * devices, and a minute passes */
		for (int i = 0; i < d1.nstarts; i++) {
			const struct sched_start *st = &d1.starts[i];
			for (int k = 0; k < st->nnodes; k++)
				for (int x = 0; x < st->nodes[k].ndev; x++) {
					assert_false(held[st->nodes[k].node][st->nodes[k].devs[x]]);
					c.devs[st->nodes[k].node][st->nodes[k].devs[x]].free_milli =
						0;
				}
			struct sched_running *nr = &c.run[c.nr];
			memset(nr, 0, sizeof(*nr));
			nr->id = 500 + i;
			nr->cls = NORMAL;
			nr->start_ms = c.now;
			nr->nnodes = st->nnodes;
			nr->nodes = c.run_nodes[c.nr];
			memcpy(c.run_nodes[c.nr], st->nodes,
			       sizeof(*st->nodes) * (size_t)st->nnodes);
			c.nr++;
		}
		c.nj = 1; /* the head alone waits now */
		c.now += 60000;
		assert_int_equal(pass(&c, &d2), 0);
		assert_int_equal(d2.nresvs, 1);
		const struct sched_resv *r2 = &d2.resvs[0];
		int same = 0, total = 0;
		for (int k = 0; k < r2->nnodes; k++)
			for (int x = 0; x < r2->nodes[k].ndev; x++, total++)
				same += held[r2->nodes[k].node][r2->nodes[k].devs[x]];
		int before = 0;
		for (int k = 0; k < r1->nnodes; k++)
			before += r1->nodes[k].ndev;
		assert_int_equal(same, before);
		assert_int_equal(total, before);
		/* the jobs on its nodes end: it starts there */
		bool on[MAXN] = {false};
		for (int k = 0; k < r2->nnodes; k++)
			on[r2->nodes[k].node] = true;
		int keep = 0;
		for (int r = 0; r < c.nr; r++) {
			bool there = false;
			for (int k = 0; k < c.run[r].nnodes; k++)
				there |= on[c.run[r].nodes[k].node];
			if (there) {
				for (int k = 0; k < c.run[r].nnodes; k++)
					for (int x = 0; x < c.run[r].nodes[k].ndev; x++)
						c.devs[c.run[r].nodes[k].node]
						      [c.run[r].nodes[k].devs[x]]
							      .free_milli = MODEL_MILLI;
				continue;
			}
			c.run[keep] = c.run[r];
			memcpy(c.run_nodes[keep], c.run_nodes[r], sizeof(c.run_nodes[r]));
			c.run[keep].nodes = c.run_nodes[keep];
			keep++;
		}
		c.nr = keep;
		struct sched_decisions d3;
		assert_int_equal(pass(&c, &d3), 0);
		const struct sched_start *s3 = start_of(&d3, 0);
		if (s3 && r2->nnodes == head->nodes) {
			for (int k = 0; k < s3->nnodes; k++)
				assert_true(on[s3->nodes[k].node]);
			started_there++;
		}
		assert_non_null(s3);
		sched_decisions_release(&d3);
		sched_decisions_release(&d1);
		sched_decisions_release(&d2);
	}
	assert_true(held_cases > 100);
	assert_true(started_there > 50);
	/* no patience: nothing held, the reason says so */
	init(&c);
	add_node(&c, "H100", 8, 64);
	add_node(&c, "H100", 8, 64);
	add_running(&c, NORMAL, 6, 1, 0);
	add_running(&c, NORMAL, 8, 1, 1);
	add_job(&c, 1, 1, 8000);
	add_job(&c, 1, 1, 2000);
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nresvs, 0);
	assert_non_null(start_of(&d, 1)); /* the idle two go to the later job */
	assert_non_null(strstr(why(&d, 0), "start time unknown, as running jobs in its way have "
					   "no time limit: it holds nothing idle"));
	sched_decisions_release(&d);
	c.policy.resv_patience_ms = -1;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nresvs, 1);
	assert_null(start_of(&d, 1));
	assert_non_null(strstr(why(&d, 0), "holding a reservation on the nodes likeliest to free"));
	sched_decisions_release(&d);
}

static void test_properties(void **state)
{
	rng = 20261129;
	static struct cluster c, shuffled;
	int started = 0, waited = 0, preempts = 0;
	for (int iter = 0; iter < 3000; iter++) {
		random_cluster(&c);
		struct sched_decisions d1, d2, d3;
		assert_int_equal(pass(&c, &d1), 0);
		check_invariants(&c, &d1);
		check_dims(&c, &d1);
		check_preemptions_useful(&c, &d1);
		started += d1.nstarts;
		waited += d1.nwaits;
		preempts += d1.npreempts;
		assert_int_equal(d1.nstarts + d1.nwaits, c.nj); /* every job is answered */
		/* same input, same decisions */
		assert_int_equal(pass(&c, &d2), 0);
		struct strbuf a, b, s;
		strbuf_init(&a);
		strbuf_init(&b);
		strbuf_init(&s);
		describe(&c, &d1, &a);
		describe(&c, &d2, &b);
		assert_string_equal(a.buf, b.buf);
		/* node order does not matter: shuffle the nodes, remap what points at them */
		shuffled = c;
		int perm[MAXN];
		for (int i = 0; i < c.n; i++)
			perm[i] = i;
		for (int i = c.n - 1; i > 0; i--) {
			int k = (int)rnd((uint32_t)i + 1);
			int t = perm[i];
			perm[i] = perm[k];
			perm[k] = t;
		}
		int inv[MAXN];
		for (int i = 0; i < c.n; i++) {
			int from = perm[i];
			inv[from] = i;
			shuffled.nodes[i] = c.nodes[from];
			memcpy(shuffled.devs[i], c.devs[from], sizeof(c.devs[from]));
			memcpy(shuffled.names[i], c.names[from], sizeof(c.names[from]));
			memcpy(shuffled.topo[i], c.topo[from], sizeof(c.topo[from]));
			shuffled.nodes[i].name = shuffled.names[i];
			shuffled.nodes[i].topology = shuffled.topo[i];
			shuffled.nodes[i].devs = shuffled.devs[i];
		}
		for (int r = 0; r < c.nr; r++) {
			shuffled.run[r].nodes = shuffled.run_nodes[r];
			for (int k = 0; k < c.run[r].nnodes; k++)
				shuffled.run_nodes[r][k].node = inv[c.run_nodes[r][k].node];
		}
		for (int i = 0; i < c.nj; i++)
			shuffled.ptrs[i] = &shuffled.jobs[i];
		for (int w = 0; w < c.nwin; w++) {
			shuffled.windows[w].nodes = shuffled.win_nodes[w];
			for (int k = 0; k < c.windows[w].nnodes; k++)
				shuffled.win_nodes[w][k] = inv[c.win_nodes[w][k]];
		}
		assert_int_equal(pass(&shuffled, &d3), 0);
		describe(&shuffled, &d3, &s);
		assert_string_equal(a.buf, s.buf);
		strbuf_release(&a);
		strbuf_release(&b);
		strbuf_release(&s);
		sched_decisions_release(&d1);
		sched_decisions_release(&d2);
		sched_decisions_release(&d3);
	}
	/* the generator must exercise every outcome, or the test proves little */
	assert_true(started > 1000);
	assert_true(waited > 1000);
	assert_true(preempts > 50);
}

/* Least attained service on random clusters: the normal class in three
 * levels, its running and waiting jobs at random levels, with random
 * commits, restores, --preemptible-any and rules. No preemption for a
 * level ever costs its victim more than the rule allows (or comes before
 * its minimum run); and the generator reaches both sides of the rule. */
static void test_las_loss_bound_property(void **state)
{
	(void)state;
	rng = 20261205;
	static struct cluster c;
	int taken = 0, spared = 0;
	for (int iter = 0; iter < 3000; iter++) {
		random_cluster(&c);
		struct sched_class base[3];
		memcpy(base, c.classes, sizeof(base));
		struct sched_las las[3] = {{0}};
		las[NORMAL] = (struct sched_las){.nlevels = 3,
						 .limit_gpu_s = {3600, 16 * 3600},
						 .min_run_s = rnd(3) ? 0 : 60.0 * rnd(30),
						 .max_loss_s = rnd(5) == 0 ? -1 : 60.0 * rnd(20)};
		int first[3];
		c.nclasses = sched_classes_expand(base, las, 3, c.classes, first);
		assert_int_equal(c.nclasses, 5);
		struct sched_las_rule rule = sched_las_rule_of(&las[NORMAL]);
		for (int r = 0; r < c.nr; r++) {
			struct sched_running *x = &c.run[r];
			x->cls = first[x->cls] + (x->cls == NORMAL ? (int)rnd(3) : 0);
			x->last_commit_ms = rnd(2) ? x->start_ms + 1000 * rnd(3600) : 0;
			if (x->last_commit_ms > c.now)
				x->last_commit_ms = 0;
			x->restore_ms = rnd(2) ? 1000 * rnd(600) : 0;
			x->preempt_any = rnd(8) == 0;
		}
		for (int i = 0; i < c.nj; i++) {
			struct sched_job *j = &c.jobs[i];
			j->cls = first[j->cls] + (j->cls == NORMAL ? (int)rnd(2) : 0);
		}
		struct sched_decisions d;
		assert_int_equal(pass(&c, &d), 0);
		check_invariants(&c, &d);
		for (int i = 0; i < d.npreempts; i++) {
			const struct sched_running *v = NULL;
			for (int r = 0; r < c.nr; r++)
				if (c.run[r].id == d.preempts[i].victim)
					v = &c.run[r];
			assert_non_null(v);
			const struct sched_class *vc = &c.classes[v->cls],
						 *jc = &c.classes[c.ptrs[d.preempts[i].job]->cls];
			if (!vc->las_family || vc->las_family != jc->las_family)
				continue;
			/* a level's preemption: within the rule */
			assert_true(vc->las_level > jc->las_level);
			if (!sched_las_may_take(rule, v, c.now, NULL))
				fail_msg("iteration %d: job %lld taken, losing %lld ms (rule: %lld "
					 "ms, after %lld ms; any %d)",
					 iter, (long long)v->id,
					 (long long)sched_run_loss_ms(v, c.now),
					 (long long)rule.max_loss_ms, (long long)rule.min_run_ms,
					 v->preempt_any);
			taken++;
		}
		for (int r = 0; r < c.nr; r++)
			if (c.classes[c.run[r].cls].las_level > 0 &&
			    !sched_las_may_take(rule, &c.run[r], c.now, NULL))
				spared++;
		sched_decisions_release(&d);
	}
	assert_true(taken > 50);
	assert_true(spared > 50);
}

/* Who takes a failed node's place (replace.c): the job's own spare that
 * still has room, else the pool's best fit, else any node's best fit; never
 * a node out of bounds, excluded, or of another model; and the pool kept
 * at its size with empty nodes only. */
static void test_replace_and_pool(void **state)
{
	(void)state;
	static struct cluster c;
	init(&c);
	int a0 = add_node(&c, "H100", 8, 64);
	int a1 = add_node(&c, "H100", 8, 64);
	int big = add_node(&c, "H100", 8, 64);
	int tight = add_node(&c, "H100", 4, 64); /* 4 free of 4: the best fit */
	int other = add_node(&c, "A100-80", 8, 64);
	int pooled = add_node(&c, "H100", 8, 64);
	struct sched_share w = {
		.ndev = 4, .milli = MODEL_MILLI, .model = "H100", .cpus = 8, .mem_mib = 1024};
	bool out[MAXN] = {0}, pool[MAXN] = {0}, ok[MAXN];
	out[a0] = out[a1] = true;
	struct sched_assign got;
	int used;
	/* no pool, no spare: the best fit, leaving fewest devices beside it */
	assert_int_equal(sched_replace(c.nodes, c.n, NULL, out, &w, NULL, 0, &used, ok, &got),
			 SCHED_FROM_FREE);
	assert_int_equal(got.node, tight);
	assert_int_equal(got.ndev, 4);
	assert_int_equal(used, -1);
	/* the pool first, though it fits less tightly */
	pool[pooled] = true;
	assert_int_equal(sched_replace(c.nodes, c.n, pool, out, &w, NULL, 0, &used, ok, &got),
			 SCHED_FROM_POOL);
	assert_int_equal(got.node, pooled);
	/* an own spare before both; a spare whose devices are taken is passed over */
	struct sched_assign sp[2] = {{.node = big, .ndev = 4, .devs = {0, 1, 2, 3}},
				     {.node = big, .ndev = 4, .devs = {4, 5, 6, 7}}};
	c.devs[big][1].free_milli = 0;
	assert_int_equal(sched_replace(c.nodes, c.n, pool, out, &w, sp, 2, &used, ok, &got),
			 SCHED_FROM_SPARE);
	assert_int_equal(used, 1);
	assert_int_equal(got.node, big);
	assert_int_equal(got.devs[0], 4);
	assert_int_equal(got.cpus, 8);
	/* a spare on a node that takes no work is passed over too */
	c.nodes[big].schedulable = false;
	assert_int_equal(sched_replace(c.nodes, c.n, pool, out, &w, sp, 2, &used, ok, &got),
			 SCHED_FROM_POOL);
	c.nodes[big].schedulable = true;
	c.devs[big][1].free_milli = MODEL_MILLI;
	/* excluded nodes and other models never; names the job lists only */
	const char *ex[] = {c.names[tight], c.names[pooled]};
	w.exclude = ex;
	w.nexclude = 2;
	assert_int_equal(sched_replace(c.nodes, c.n, pool, out, &w, NULL, 0, &used, ok, &got),
			 SCHED_FROM_FREE);
	assert_int_equal(got.node, big);
	const char *only[] = {c.names[other]};
	w.nodelist = only;
	w.nnodelist = 1;
	assert_int_equal(sched_replace(c.nodes, c.n, pool, out, &w, NULL, 0, &used, ok, &got),
			 SCHED_FROM_NONE);
	/* the job accepts A100s too: the listed node then fits */
	const char *accepted[] = {"H100", "A100-80"};
	w.models = accepted;
	w.nmodels = 2;
	assert_int_equal(sched_replace(c.nodes, c.n, pool, out, &w, NULL, 0, &used, ok, &got),
			 SCHED_FROM_FREE);
	assert_int_equal(got.node, other);
	/* alone (--exclusive): only an empty node */
	struct sched_share alone = {
		.ndev = 1, .milli = MODEL_MILLI, .model = "H100", .alone = true};
	memset(pool, 0, sizeof(pool));
	for (int i = 0; i < c.n; i++)
		out[i] = i != big && i != tight;
	c.devs[tight][3].free_milli = 500;
	assert_int_equal(sched_replace(c.nodes, c.n, pool, out, &alone, NULL, 0, &used, ok, &got),
			 SCHED_FROM_FREE);
	assert_int_equal(got.node, big);
	assert_true(got.alone);
	c.nodes[big].cpus_free--;
	assert_int_equal(sched_replace(c.nodes, c.n, pool, out, &alone, NULL, 0, &used, ok, &got),
			 SCHED_FROM_NONE);
	c.nodes[big].cpus_free++;
	/* --constraint: only a node whose labels satisfy it */
	c.nodes[big].labels = "fabric=ib";
	{
		struct sched_share cw = {
			.ndev = 4, .milli = MODEL_MILLI, .model = "H100", .cpus = 8};
		cw.constraint = "fabric=ib";
		c.devs[tight][3].free_milli = MODEL_MILLI;
		assert_int_equal(sched_replace(c.nodes, c.n, NULL, out,
					       &(struct sched_share){.ndev = 4,
								     .milli = MODEL_MILLI,
								     .model = "H100",
								     .cpus = 8},
					       NULL, 0, &used, ok, &got),
				 SCHED_FROM_FREE);
		assert_int_equal(got.node, tight); /* without it: the tightest fit */
		for (int i = 0; i < c.n; i++)
			out[i] = i != big && i != tight;
		assert_int_equal(
			sched_replace(c.nodes, c.n, NULL, out, &cw, NULL, 0, &used, ok, &got),
			SCHED_FROM_FREE);
		assert_int_equal(got.node, big); /* not the tighter unlabelled one */
		cw.constraint = "fabric=roce";
		assert_int_equal(
			sched_replace(c.nodes, c.n, NULL, out, &cw, NULL, 0, &used, ok, &got),
			SCHED_FROM_NONE);
		c.devs[tight][3].free_milli = 500;
	}
	c.nodes[big].labels = NULL;
	/* --switches: a place beside the gang's other nodes, within its limit,
	 * before a tighter fit on another leaf */
	snprintf(c.topo[a0], sizeof(c.topo[a0]), "spine1/leaf1");
	snprintf(c.topo[big], sizeof(c.topo[big]), "spine1/leaf1");
	snprintf(c.topo[tight], sizeof(c.topo[tight]), "spine1/leaf2");
	snprintf(c.topo[pooled], sizeof(c.topo[pooled]), "spine1/leaf2");
	c.devs[tight][3].free_milli = MODEL_MILLI;
	struct sched_share sw = {.ndev = 4, .milli = MODEL_MILLI, .model = "H100", .cpus = 8};
	int gang[] = {a0};
	sw.with = gang;
	sw.nwith = 1;
	for (int i = 0; i < c.n; i++)
		out[i] = i != big && i != tight;
	assert_int_equal(sched_replace(c.nodes, c.n, NULL, out, &sw, NULL, 0, &used, ok, &got),
			 SCHED_FROM_FREE);
	assert_int_equal(got.node, tight); /* no limit: the tightest fit */
	sw.max_switches = 1;
	assert_int_equal(sched_replace(c.nodes, c.n, NULL, out, &sw, NULL, 0, &used, ok, &got),
			 SCHED_FROM_FREE);
	assert_int_equal(got.node, big); /* its leaf */
	out[big] = true;
	assert_int_equal(sched_replace(c.nodes, c.n, NULL, out, &sw, NULL, 0, &used, ok, &got),
			 SCHED_FROM_NONE); /* leaf2 would span three switches */
	sw.max_switches = 3;
	assert_int_equal(sched_replace(c.nodes, c.n, NULL, out, &sw, NULL, 0, &used, ok, &got),
			 SCHED_FROM_FREE);
	assert_int_equal(got.node, tight);
	for (int i = 0; i < c.n; i++)
		c.topo[i][0] = '\0';
	c.devs[tight][3].free_milli = 500;
	/* the pool: two H100 nodes, empty ones only, the first first */
	struct sched_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.nspare_pool = 1;
	snprintf(cfg.spare_pool[0].model, MODEL_NAME_MAX, "H100");
	cfg.spare_pool[0].nodes = 2;
	memset(pool, 0, sizeof(pool));
	int changed[MAXN];
	c.devs[a0][0].free_milli = 0; /* busy */
	assert_int_equal(sched_pool_refill(c.nodes, c.n, &cfg, pool, NULL, changed, MAXN), 2);
	assert_false(pool[a0]);
	assert_true(pool[a1] && pool[big]);
	assert_false(pool[tight] || pool[other] || pool[pooled]);
	/* a pool node that takes work or is drained leaves; the next empty joins */
	c.nodes[a1].schedulable = false;
	assert_int_equal(sched_pool_refill(c.nodes, c.n, &cfg, pool, NULL, changed, MAXN), 2);
	assert_false(pool[a1]);
	assert_true(pool[big] && pool[pooled]);
	/* fewer asked: the last over the number leaves */
	cfg.spare_pool[0].nodes = 1;
	assert_int_equal(sched_pool_refill(c.nodes, c.n, &cfg, pool, NULL, changed, MAXN), 1);
	assert_int_equal(changed[0], pooled);
	assert_true(pool[big] && !pool[pooled]);
	/* with nothing changed, nothing changes */
	assert_int_equal(sched_pool_refill(c.nodes, c.n, &cfg, pool, NULL, changed, MAXN), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_simple_start),
		cmocka_unit_test(test_keep_reuses_blocks),
		cmocka_unit_test(test_gang_best_fit),
		cmocka_unit_test(test_never_fits),
		cmocka_unit_test(test_could_ever_hold),
		cmocka_unit_test(test_types_capabilities_mixing),
		cmocka_unit_test(test_prefers_fast_unless_others_need_it),
		cmocka_unit_test(test_topology),
		cmocka_unit_test(test_fault_domains),
		cmocka_unit_test(test_nvlink_domain),
		cmocka_unit_test(test_fractions),
		cmocka_unit_test(test_typed_fragmentation),
		cmocka_unit_test(test_baseline_policies),
		cmocka_unit_test(test_node_lists_and_exclusive),
		cmocka_unit_test(test_constraints),
		cmocka_unit_test(test_windows),
		cmocka_unit_test(test_window_idle_at_start),
		cmocka_unit_test(test_replace_and_pool),
		cmocka_unit_test(test_class_order),
		cmocka_unit_test(test_backfill),
		cmocka_unit_test(test_fair_share),
		cmocka_unit_test(test_quota_and_borrowing),
		cmocka_unit_test(test_quota_dims),
		cmocka_unit_test(test_reclaim_lent_capacity),
		cmocka_unit_test(test_preempt_and_reclaim_together),
		cmocka_unit_test(test_prod_gang_preempts_batch),
		cmocka_unit_test(test_cheapest_victim),
		cmocka_unit_test(test_waits_for_its_victims),
		cmocka_unit_test(test_gittins_closed_forms),
		cmocka_unit_test(test_las_history),
		cmocka_unit_test(test_least_attained_service),
		cmocka_unit_test(test_placement_config),
		cmocka_unit_test(test_las_config),
		cmocka_unit_test(test_pass_limit_order),
		cmocka_unit_test(test_limits_and_invalid),
		cmocka_unit_test(test_shape_table),
		cmocka_unit_test(test_unknown_end_reservations),
		cmocka_unit_test(test_properties),
		cmocka_unit_test(test_las_loss_bound_property),
	};
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	sched_keep_free(kept);
	return failed;
}
