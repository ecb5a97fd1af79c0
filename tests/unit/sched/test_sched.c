/*
 * Unit tests of the scheduler: hand-made cases for each rule, then property
 * tests over thousands of random clusters and queues (fixed seeds) that check
 * what must hold for any input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>

#include "sched/sched.h"

/* ---- a small cluster builder ------------------------------------------------------ */

#define MAXN 64

struct cluster {
	struct sched_node nodes[MAXN];
	struct sched_dev devs[MAXN][MODEL_MAX_ACCELS];
	char names[MAXN][16];
	int n;
	struct sched_job jobs[256];
	const struct sched_job *ptrs[256];
	int nj;
};

static int add_node(struct cluster *c, const char *model, int ndev, int cpus)
{
	int i = c->n++;
	snprintf(c->names[i], sizeof(c->names[i]), "n%02d", i);
	struct sched_node *n = &c->nodes[i];
	memset(n, 0, sizeof(*n));
	n->name = c->names[i];
	n->schedulable = true;
	n->cpus_total = n->cpus_free = cpus;
	n->mem_total_mib = n->mem_free_mib = 1 << 20;
	n->ndev = ndev;
	n->devs = c->devs[i];
	for (int d = 0; d < ndev; d++) {
		c->devs[i][d].model = model;
		c->devs[i][d].free_milli = MODEL_MILLI;
		c->devs[i][d].nvlink_domain = 0;
	}
	return i;
}

static struct sched_job *add_job(struct cluster *c, int nodes, int tpn, int gpu_milli)
{
	int i = c->nj++;
	struct sched_job *j = &c->jobs[i];
	memset(j, 0, sizeof(*j));
	j->id = i + 1;
	j->nodes = nodes;
	j->tasks_per_node = tpn;
	j->gpu_milli = gpu_milli;
	c->ptrs[i] = j;
	return j;
}

static int pass(struct cluster *c, struct sched_decisions *d)
{
	struct sched_snapshot s = {c->nodes, c->n, c->ptrs, c->nj};
	return sched_pass(&s, 0, NULL, d);
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

/* ---- rules ---------------------------------------------------------------------- */

static void test_simple_start(void **state)
{
	struct cluster c = {0};
	add_node(&c, "H100", 8, 64);
	add_job(&c, 1, 2, 2000); /* 2 tasks x 2 GPUs */
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 1);
	const struct sched_start *s = start_of(&d, 0);
	assert_int_equal(s->nnodes, 1);
	assert_int_equal(s->nodes[0].ndev, 4);
	for (int k = 0; k < 4; k++)
		assert_int_equal(s->nodes[0].devs[k], k);
	assert_int_equal(s->nodes[0].milli, MODEL_MILLI);
	sched_decisions_release(&d);
}

static void test_gang_best_fit(void **state)
{
	struct cluster c = {0};
	add_node(&c, "H100", 8, 64); /* n00: 8 free */
	add_node(&c, "H100", 8, 64); /* n01: 4 free */
	add_node(&c, "H100", 8, 64); /* n02: 2 free */
	for (int d = 0; d < 4; d++)
		c.devs[1][d].free_milli = 0;
	for (int d = 0; d < 6; d++)
		c.devs[2][d].free_milli = 0;
	add_job(&c, 2, 1, 4000);
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	const struct sched_start *s = start_of(&d, 0);
	assert_non_null(s);
	assert_int_equal(s->nnodes, 2);
	/* the tightest node first (n01, nothing left), then n00 */
	assert_string_equal(c.nodes[s->nodes[0].node].name, "n01");
	assert_string_equal(c.nodes[s->nodes[1].node].name, "n00");
	assert_int_equal(s->nodes[0].devs[0], 4);
	sched_decisions_release(&d);
}

static void test_fcfs_blocks(void **state)
{
	struct cluster c = {0};
	add_node(&c, "H100", 8, 64);
	for (int d = 0; d < 4; d++)
		c.devs[0][d].free_milli = 0;
	add_job(&c, 1, 1, 8000); /* fits the cluster, not now */
	add_job(&c, 1, 1, 1000); /* would fit now, but waits its turn */
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 0);
	assert_int_equal(d.blocker, 0);
	assert_int_equal(d.unexamined, 1);
	const struct sched_wait *w = wait_of(&d, 0);
	assert_int_equal(w->reason, SCHED_WAIT_RESOURCES);
	assert_string_equal(w->detail, "waiting for resources: needs 1 node with 8 accelerators "
				       "free; 0 have that now");
	sched_decisions_release(&d);
}

static void test_never_fits_does_not_block(void **state)
{
	struct cluster c = {0};
	add_node(&c, "H100", 8, 64);
	add_job(&c, 1, 1, 16000); /* more than any node has */
	add_job(&c, 3, 1, 1000);  /* more nodes than exist */
	add_job(&c, 1, 1, 1000);
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 1);
	assert_non_null(start_of(&d, 2));
	assert_int_equal(wait_of(&d, 0)->reason, SCHED_WAIT_NEVER_FITS);
	assert_string_equal(wait_of(&d, 0)->detail,
			    "can never start: needs 1 node with 16 accelerators each; 0 "
			    "schedulable nodes could ever hold that");
	assert_int_equal(wait_of(&d, 1)->reason, SCHED_WAIT_NEVER_FITS);
	assert_int_equal(d.blocker, -1);
	sched_decisions_release(&d);
}

static void test_types_and_no_mixing(void **state)
{
	struct cluster c = {0};
	add_node(&c, "H100", 8, 64);
	add_node(&c, "A100-80GB", 8, 64);
	static const char *const a100[] = {"A100-80GB"};
	static const char *const both[] = {"H100", "A100-80GB"};
	struct sched_job *j = add_job(&c, 1, 1, 8000);
	j->ngpu_types = 1;
	j->gpu_types = a100;
	j = add_job(&c, 2, 1, 4000); /* two nodes of one model: impossible */
	j->ngpu_types = 2;
	j->gpu_types = both;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	const struct sched_start *s = start_of(&d, 0);
	assert_non_null(s);
	assert_string_equal(c.nodes[s->nodes[0].node].name, "n01");
	assert_int_equal(wait_of(&d, 1)->reason, SCHED_WAIT_NEVER_FITS);
	sched_decisions_release(&d);
}

static void test_cpu_job_avoids_gpu_nodes(void **state)
{
	struct cluster c = {0};
	add_node(&c, "H100", 8, 64);
	add_node(&c, "H100", 0, 64);
	struct sched_job *j = add_job(&c, 1, 4, 0);
	j->cpus_per_task = 8;
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_string_equal(c.nodes[start_of(&d, 0)->nodes[0].node].name, "n01");
	assert_int_equal(start_of(&d, 0)->nodes[0].ndev, 0);
	sched_decisions_release(&d);
}

static void test_cpu_and_memory_limits(void **state)
{
	struct cluster c = {0};
	add_node(&c, "H100", 8, 16);
	struct sched_job *j = add_job(&c, 1, 4, 1000);
	j->cpus_per_task = 4; /* 16 CPUs: fits exactly */
	j = add_job(&c, 1, 1, 1000);
	j->cpus_per_task = 1; /* no CPU left: waits */
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 1);
	assert_int_equal(wait_of(&d, 1)->reason, SCHED_WAIT_RESOURCES);
	sched_decisions_release(&d);
	c.nj = 0;
	j = add_job(&c, 1, 1, 0);
	j->mem_mib = (1 << 20) + 1;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(wait_of(&d, 0)->reason, SCHED_WAIT_NEVER_FITS);
	assert_non_null(strstr(wait_of(&d, 0)->detail, "1048577 MiB memory"));
	sched_decisions_release(&d);
}

static void test_fraction_packs(void **state)
{
	struct cluster c = {0};
	add_node(&c, "H100", 2, 64);
	c.devs[0][1].free_milli = 500; /* half of device 1 in use */
	add_job(&c, 1, 1, 500);
	add_job(&c, 1, 1, 250);
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 2);
	/* the half job fills device 1; the quarter then starts on device 0 */
	assert_int_equal(start_of(&d, 0)->nodes[0].devs[0], 1);
	assert_int_equal(start_of(&d, 0)->nodes[0].milli, 500);
	assert_int_equal(start_of(&d, 1)->nodes[0].devs[0], 0);
	assert_int_equal(start_of(&d, 1)->nodes[0].milli, 250);
	sched_decisions_release(&d);
}

static void test_drained_not_used(void **state)
{
	struct cluster c = {0};
	add_node(&c, "H100", 8, 64);
	c.nodes[0].schedulable = false;
	add_job(&c, 1, 1, 1000);
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	assert_int_equal(d.nstarts, 0);
	assert_int_equal(wait_of(&d, 0)->reason, SCHED_WAIT_NEVER_FITS);
	sched_decisions_release(&d);
}

static void test_nvlink_domain(void **state)
{
	struct cluster c = {0};
	add_node(&c, "H100", 8, 64);
	for (int k = 4; k < 8; k++)
		c.devs[0][k].nvlink_domain = 1;
	c.devs[0][0].free_milli = 0;
	c.devs[0][1].free_milli = 0;
	add_job(&c, 1, 1, 4000);
	struct sched_decisions d;
	assert_int_equal(pass(&c, &d), 0);
	const struct sched_assign *a = &start_of(&d, 0)->nodes[0];
	for (int k = 0; k < 4; k++)
		assert_int_equal(a->devs[k], 4 + k); /* all in domain 1, not 2,3,4,5 */
	sched_decisions_release(&d);
}

static void test_pass_limit_and_invalid(void **state)
{
	struct cluster c = {0};
	add_node(&c, "H100", 8, 64);
	for (int i = 0; i < 5; i++)
		add_job(&c, 1, 1, 1000);
	struct sched_snapshot s = {c.nodes, c.n, c.ptrs, c.nj};
	struct sched_policy p = {.max_starts = 2};
	struct sched_decisions d;
	assert_int_equal(sched_pass(&s, 0, &p, &d), 0);
	assert_int_equal(d.nstarts, 2);
	assert_int_equal(wait_of(&d, 2)->reason, SCHED_WAIT_PASS_LIMIT);
	sched_decisions_release(&d);
	c.jobs[0].nodes = 0;
	assert_int_equal(pass(&c, &d), -EINVAL);
	sched_decisions_release(&d);
	c.jobs[0].nodes = 1;
	c.devs[0][3].free_milli = 1001;
	assert_int_equal(pass(&c, &d), -EINVAL);
	sched_decisions_release(&d);
}

/* ---- properties ------------------------------------------------------------------ */

static uint64_t rng;
static uint32_t rnd(uint32_t n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(rng >> 33) % n;
}

static const char *const models[] = {"H100", "A100-80GB", "T4"};

static void random_cluster(struct cluster *c)
{
	memset(c, 0, sizeof(*c));
	int nn = 1 + (int)rnd(12);
	for (int i = 0; i < nn; i++) {
		int ndev = (int)rnd(4) == 0 ? 0 : 1 << rnd(4);
		int k = add_node(c, models[rnd(3)], ndev, 8 + (int)rnd(64));
		c->nodes[k].schedulable = rnd(8) != 0;
		c->nodes[k].cpus_free = (int)rnd((uint32_t)c->nodes[k].cpus_total + 1);
		c->nodes[k].mem_free_mib = rnd(1 << 20);
		for (int d = 0; d < ndev; d++) {
			uint32_t u = rnd(6);
			c->devs[k][d].free_milli = u < 3 ? MODEL_MILLI : u == 3 ? 0 : 250 * (int)rnd(4);
			c->devs[k][d].nvlink_domain = d / 4;
		}
	}
	int nj = 1 + (int)rnd(40);
	for (int i = 0; i < nj; i++) {
		int shape = (int)rnd(4);
		struct sched_job *j;
		if (shape == 0)
			j = add_job(c, 1, 1, 250 * (1 + (int)rnd(3))); /* fraction */
		else
			j = add_job(c, 1 + (int)rnd(3), 1 + (int)rnd(2), 1000 * (int)rnd(3));
		j->cpus_per_task = (int)rnd(4);
		j->mem_mib = rnd(4) ? 0 : rnd(1 << 19);
		if (rnd(3) == 0) {
			j->ngpu_types = 1;
			j->gpu_types = &models[rnd(3)];
		}
	}
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

/* Checks every invariant of one pass's decisions against its input. */
static void check_invariants(const struct cluster *c, const struct sched_decisions *d)
{
	int used[MAXN][MODEL_MAX_ACCELS] = {{0}};
	int cpus[MAXN] = {0};
	int64_t mem[MAXN] = {0};
	bool seen_job[256] = {false};
	int last_started = -1;
	for (int i = 0; i < d->nstarts; i++) {
		const struct sched_start *s = &d->starts[i];
		const struct sched_job *j = c->ptrs[s->job];
		assert_false(seen_job[s->job]);
		seen_job[s->job] = true;
		assert_true(s->job > last_started); /* decisions in queue order */
		last_started = s->job;
		/* gang: exactly its node count, all distinct, all schedulable */
		assert_int_equal(s->nnodes, j->nodes);
		const char *model = NULL;
		for (int k = 0; k < s->nnodes; k++) {
			const struct sched_assign *a = &s->nodes[k];
			assert_true(c->nodes[a->node].schedulable);
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
				assert_string_equal(model, dev->model); /* never mixed */
				used[a->node][a->devs[x]] += a->milli;
			}
			cpus[a->node] += j->tasks_per_node * j->cpus_per_task;
			mem[a->node] += j->mem_mib;
		}
	}
	/* nothing over capacity */
	for (int n = 0; n < c->n; n++) {
		assert_true(cpus[n] <= c->nodes[n].cpus_free);
		assert_true(mem[n] <= c->nodes[n].mem_free_mib);
		for (int k = 0; k < c->nodes[n].ndev; k++)
			assert_true(used[n][k] <= c->devs[n][k].free_milli);
	}
	/* first come, first served: a job starts only if every earlier job
	 * started or can never fit */
	for (int i = 0; i < d->nstarts; i++)
		for (int e = 0; e < d->starts[i].job; e++)
			if (!seen_job[e]) {
				const struct sched_wait *w = wait_of(d, e);
				assert_non_null(w);
				assert_int_equal(w->reason, SCHED_WAIT_NEVER_FITS);
			}
}

/* The decisions as text naming nodes (not indices), to compare passes over
 * differently ordered node lists. */
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
	for (int i = 0; i < d->nwaits; i++)
		strbuf_addf(sb, "wait%d:%d:%s;", d->waits[i].job, d->waits[i].reason,
			    d->waits[i].detail);
	strbuf_addf(sb, "blocker%d", d->blocker);
}

static void test_properties(void **state)
{
	rng = 20261129;
	static struct cluster c, shuffled;
	int started = 0, waited = 0;
	for (int iter = 0; iter < 3000; iter++) {
		random_cluster(&c);
		struct sched_decisions d1, d2, d3;
		assert_int_equal(pass(&c, &d1), 0);
		check_invariants(&c, &d1);
		started += d1.nstarts;
		waited += d1.nwaits;
		/* same input, same decisions */
		assert_int_equal(pass(&c, &d2), 0);
		struct strbuf a, b, s;
		strbuf_init(&a);
		strbuf_init(&b);
		strbuf_init(&s);
		describe(&c, &d1, &a);
		describe(&c, &d2, &b);
		assert_string_equal(a.buf, b.buf);
		/* the order nodes are listed in does not matter */
		shuffled = c;
		for (int i = 0; i < c.n; i++) {
			shuffled.nodes[i].name = shuffled.names[i];
			shuffled.nodes[i].devs = shuffled.devs[i];
		}
		for (int i = c.n - 1; i > 0; i--) {
			int k = (int)rnd((uint32_t)i + 1);
			struct sched_node tn = shuffled.nodes[i];
			shuffled.nodes[i] = shuffled.nodes[k];
			shuffled.nodes[k] = tn;
		}
		for (int i = 0; i < c.nj; i++)
			shuffled.ptrs[i] = &shuffled.jobs[i];
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
	/* the generator must exercise both outcomes, or the test proves little */
	assert_true(started > 1000);
	assert_true(waited > 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_simple_start),
		cmocka_unit_test(test_gang_best_fit),
		cmocka_unit_test(test_fcfs_blocks),
		cmocka_unit_test(test_never_fits_does_not_block),
		cmocka_unit_test(test_types_and_no_mixing),
		cmocka_unit_test(test_cpu_job_avoids_gpu_nodes),
		cmocka_unit_test(test_cpu_and_memory_limits),
		cmocka_unit_test(test_fraction_packs),
		cmocka_unit_test(test_drained_not_used),
		cmocka_unit_test(test_nvlink_domain),
		cmocka_unit_test(test_pass_limit_and_invalid),
		cmocka_unit_test(test_properties),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
