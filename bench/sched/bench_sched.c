/*
 * bench_sched: the cost of one scheduling pass at ten-thousand-GPU scale.
 *
 * The cluster is the real node list of Alibaba's 2026 spot-GPU trace (4,278
 * nodes, 10,412 GPUs of six models); the trace has no topology, so nodes get
 * a synthetic one (32 nodes per leaf switch, 8 leaves per spine). It is
 * filled to 90% with running jobs of mixed shapes, classes, queues and time
 * limits, and 100,000 pending jobs of mixed shapes and classes wait. Then:
 *
 *   full pass         sched_pass on that state, 100 times;
 *   incremental pass  the state is first run to quiet: passes are applied
 *                     (starts run, preempted jobs exit at once) until a pass
 *                     neither starts nor preempts anything. Then one running
 *                     job ends and a pass runs; 100 times, a different job
 *                     each time, each from the quiet state.
 *
 * Prints p50/p99 of each and the peak resident memory as JSON, and a digest
 * of every decision (two builds that print the same digest decided the
 * same). The caller-kept parts are used as the server uses them: the node
 * statics (sched_cluster), the waiting jobs' shapes (sched_shapes;
 * BENCH_NO_SHAPES=1 leaves the pass to compare requests itself) and their
 * keys in one array (sched_key; BENCH_NO_KEYS=1: the pass reads the jobs).
 * The pass starts at most the server's default max_starts_per_pass jobs
 * (BENCH_MAX_STARTS=N: N; 0 for no limit), as the server's does.
 * BENCH_LAS=1 orders the normal class by least attained service in three
 * levels (1 and 16 accelerator-hours): running jobs take the level of what
 * they have run, waiting ones one drawn at random (half the first), and
 * within each level by the Gittins index (the server's default; BENCH_LAS=
 * levels: by submission) under a history of 2,048 finished jobs (service
 * drawn log-normal, median half an accelerator-hour) per queue, each
 * waiting job's service drawn inside its level: before every pass, each
 * waiting job's index is read and each level sorted by it, as the server's
 * snapshot does, and that time counts in the pass's.
 * BENCH_POOLS=1 carves the cluster as the seeds' three tiers, by the
 * gpu=MODEL label every node has (bench/sim/three-tier.json: the 8-GPU
 * A100, A800 and H800 nodes a top pool for jobs of 8 GPUs or more, the
 * GPU-series nodes general, the A10 nodes inference), labels each node
 * with its rack (32 a rack) too; a third of the waiting jobs name a pool
 * (top for 8 GPUs or more, else general or inference), the others go to
 * the pools open to them, and one in ten asks --constraint rack!=rNNN.
 * BENCH_QUOTAS=1 gives the four queues with quotas limits in what runs out
 * too: 600 of the first model's accelerators, 400 of the second's, 1,500
 * weighted units (each model's peak rate against an H100's), 40,000 CPUs.
 * Usage: bench_sched NODE_LIST [PENDING] [PASSES]
 * Counting instructions of the incremental passes alone (steady where
 * wall-clock time on a shared machine is not):
 *   BENCH_FULL_PASSES=1 valgrind --tool=callgrind --instr-atstart=no \
 *       build/bench/bench_sched NODE_LIST 100000 10
 * and of the full passes alone:
 *   BENCH_COUNT_FULL=1 BENCH_FULL_PASSES=3 BENCH_ONLY_FULL=1 valgrind \
 *       --tool=callgrind --instr-atstart=no build/bench/bench_sched NODE_LIST 100000 3
 */
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "sched/sched.h"
#include "sim/sim.h"

/* Under `valgrind --tool=callgrind --instr-atstart=no`, only the timed
 * incremental passes are counted: instructions, not this machine's noise. */
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

static uint64_t rng = 42;
static uint32_t rnd(uint32_t n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(rng >> 33) % n;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct world {
	struct sched_node *nodes;
	struct sched_dev *devs; /* MODEL_MAX_ACCELS per node */
	char (*topo)[32];
	char (*labels)[64];	 /* BENCH_POOLS: each node's */
	char (*constraints)[16]; /* BENCH_POOLS: each waiting job's */
	int nn;
	struct sched_running *run;
	struct sched_assign *run_nodes; /* 16 per running job */
	int nr, run_alloc;
	struct sched_job *jobs;
	const struct sched_job **ptrs;
	/* each waiting job's key, beside ptrs, as a caller keeps it (NULL with
	 * BENCH_NO_KEYS=1: the pass reads the jobs) */
	struct sched_key *keys;
	int nj;
	struct sched_class classes[MODEL_MAX_CLASSES];
	int nclasses;
	struct sched_las las[3];
	int first[3];
	struct sched_queue queues[8];
	struct sched_qdim qdims[8][4];	       /* BENCH_QUOTAS */
	struct sched_model_weight weights[16]; /* BENCH_QUOTAS */
	int nweights;
	const char **models;
	int nmodels;
	int64_t now;
	struct sched_cluster *cluster;
	struct sched_keep *keep;     /* the passes' large arrays, as the server keeps them */
	struct sched_shapes *shapes; /* NULL: the pass compares the jobs' requests */
	/* BENCH_LAS's Gittins index: the history, each job's service (by id) */
	struct sched_las_history *hist;
	double *attained;
	double order_ms; /* the last order_levels() */
};

static struct sched_dev *dev(struct world *w, int n, int d)
{
	return &w->devs[n * MODEL_MAX_ACCELS + d];
}

static struct sched_running *new_running(struct world *w)
{
	if (w->nr == w->run_alloc) {
		w->run_alloc = w->run_alloc ? w->run_alloc * 2 : 1024;
		w->run = xrealloc(w->run, sizeof(*w->run) * (size_t)w->run_alloc);
		w->run_nodes =
			xrealloc(w->run_nodes, sizeof(*w->run_nodes) * 16 * (size_t)w->run_alloc);
		for (int i = 0; i < w->nr; i++)
			w->run[i].nodes = &w->run_nodes[i * 16];
	}
	struct sched_running *r = &w->run[w->nr];
	memset(r, 0, sizeof(*r));
	r->id = 1000000 + w->nr;
	r->nodes = &w->run_nodes[w->nr * 16];
	uint32_t c = rnd(10);
	r->cls = c < 4 ? 0 : c < 8 ? 1 : 2;
	r->queue = (int)rnd(8);
	r->start_ms = w->now - 1000LL * rnd(36000);
	r->time_limit_s = rnd(5) ? 3600LL * (2 + rnd(22)) : 0;
	r->last_checkpoint_ms = rnd(2) ? w->now - 1000LL * rnd(3600) : 0;
	w->nr++;
	return r;
}

/* Gives a running job k devices (milli each) on node n. */
static void hold(struct world *w, struct sched_running *r, int n, int k, int milli)
{
	struct sched_assign *a = (struct sched_assign *)&r->nodes[r->nnodes++];
	memset(a, 0, sizeof(*a));
	a->node = n;
	a->milli = milli;
	for (int d = 0; d < w->nodes[n].ndev && a->ndev < k; d++)
		if (dev(w, n, d)->free_milli >= milli) {
			dev(w, n, d)->free_milli -= milli;
			a->devs[a->ndev++] = d;
		}
}

/* BENCH_POOLS=1: the three tiers (see the top of this file) */
static const char *const three_tiers =
	"{\"pools\": {\"top\": {\"selector\": \"gpu=A100-80GB|gpu=A800|gpu=H800\", "
	"\"min_gpus\": 8}, \"general\": {\"selector\": \"gpu=GPU-series-1|gpu=GPU-series-2\"}, "
	"\"inference\": {\"selector\": \"gpu=A10\"}}}";

/* With pools (cfg->npools): node i's labels, its rack beside its model,
 * and its pools. */
static void node_pools(const struct sched_config *cfg, const struct sim_node *sn, int i,
		       struct sched_node *n, char *labels, size_t size)
{
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addf(&sb, "%s%srack=r%03d", sn->labels, sn->labels[0] ? "," : "", i / 32);
	if (node_labels_parse(sb.buf, labels, size, NULL) < 0)
		labels[0] = '\0';
	strbuf_release(&sb);
	n->labels = labels;
	n->pools = sched_config_pool_node(cfg, labels);
}

/* With pools: a third of the jobs name one, one in ten a constraint. */
static void job_pools(const struct sched_config *cfg, struct sched_job *j, char *constraint,
		      size_t size)
{
	static const char *const names[] = {"top", "general", "inference"};
	struct job_request r = {.nodes = j->nodes,
				.tasks_per_node = j->tasks_per_node,
				.gpu_milli = j->gpu_milli,
				.time_limit_s = j->time_limit_s};
	if (rnd(3) == 0)
		r.pool = (char *)(j->nodes * j->gpu_milli >= 8 * MODEL_MILLI ? names[0]
									     : names[1 + rnd(2)]);
	j->pools = sched_config_pool_job(cfg, &r, NULL, 0);
	j->pool = r.pool;
	if (rnd(10) == 0 && !getenv("BENCH_NO_CONSTRAINT")) {
		snprintf(constraint, size, "rack!=r%03u", rnd(134));
		j->constraint = constraint;
	}
}

static void build(struct world *w, const struct sim_cluster *cl, int pending,
		  const struct sched_config *cfg)
{
	w->now = 1795000000000LL;
	struct sched_class base[3] = {
		{.name = "batch", .priority = 10, .may_preempt = false, .preemptible = true},
		{.name = "normal", .priority = 50, .may_preempt = false, .preemptible = false},
		{.name = "prod", .priority = 100, .may_preempt = true, .preemptible = false}};
	if (getenv("BENCH_LAS"))
		w->las[1] =
			(struct sched_las){.nlevels = 3,
					   .limit_gpu_s = {3600, 16 * 3600},
					   .min_run_s = MODEL_LAS_DEFAULT_MIN_RUN_S,
					   .max_loss_s = MODEL_LAS_DEFAULT_MAX_LOSS_S,
					   .gittins = strcmp(getenv("BENCH_LAS"), "levels") != 0};
	if (w->las[1].gittins) {
		w->hist = sched_las_history_new();
		for (int q = 0; q < 8; q++)
			for (int i = 0; i < SCHED_GITTINS_KEEP; i++) {
				/* log-normal, sigma 2: Box-Muller from two uniforms */
				double u1 = (rnd(1u << 30) + 1.0) / (1u << 30),
				       u2 = rnd(1u << 30) / (double)(1u << 30);
				double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
				sched_las_history_add(w->hist, 1, (uint32_t)q, 1800 * exp(2 * z));
			}
	}
	w->nclasses = sched_classes_expand(base, w->las, 3, w->classes, w->first);
	static char qnames[8][16];
	for (int q = 0; q < 8; q++) {
		snprintf(qnames[q], sizeof(qnames[q]), "q%d", q);
		w->queues[q] =
			(struct sched_queue){qnames[q], q < 4 ? 1000000 : -1, q < 4 ? 1000000 : -1,
					     1 + q % 2, (double)rnd(500000),  0,
					     NULL};
	}
	w->nn = cl->n;
	w->nodes = xcalloc((size_t)cl->n, sizeof(*w->nodes));
	w->devs = xcalloc((size_t)cl->n * MODEL_MAX_ACCELS, sizeof(*w->devs));
	w->topo = xcalloc((size_t)cl->n, sizeof(*w->topo));
	w->labels = cfg->npools ? xcalloc((size_t)cl->n, sizeof(*w->labels)) : NULL;
	w->constraints = cfg->npools ? xcalloc((size_t)pending, sizeof(*w->constraints)) : NULL;
	w->models = xcalloc(16, sizeof(char *));
	for (int i = 0; i < cl->n; i++) {
		const struct sim_node *sn = &cl->nodes[i];
		struct sched_node *n = &w->nodes[i];
		snprintf(w->topo[i], sizeof(w->topo[i]), "spine%d/leaf%d", i / 256, i / 32);
		n->name = sn->name;
		n->topology = w->topo[i];
		if (cfg->npools)
			node_pools(cfg, sn, i, n, w->labels[i], sizeof(w->labels[i]));
		n->schedulable = true;
		n->cpus_total = n->cpus_free = sn->cpus;
		n->mem_total_mib = n->mem_free_mib = 2LL << 20;
		n->ndev = sn->gpus;
		n->devs = dev(w, i, 0);
		for (int d = 0; d < sn->gpus; d++)
			*dev(w, i, d) = (struct sched_dev){sn->model, MODEL_MILLI, d / 4,
							   sn->gpu_mem_mib, sn->tflops};
		bool known = false;
		for (int m = 0; m < w->nmodels; m++)
			known |= strcmp(w->models[m], sn->model) == 0;
		if (!known && sn->gpus && w->nmodels < 16) {
			w->weights[w->nmodels] = (struct sched_model_weight){
				sn->model, sn->tflops > 0 ? sn->tflops / CATALOGUE_UNIT_TFLOPS : 1};
			w->models[w->nmodels++] = sn->model;
		}
	}
	if (getenv("BENCH_QUOTAS") && w->nmodels >= 2) {
		w->nweights = w->nmodels;
		for (int q = 0; q < 4; q++) {
			struct sched_qdim *d = w->qdims[q];
			d[0] = (struct sched_qdim){SCHED_QDIM_MODEL, w->models[0], 600000, 600000};
			d[1] = (struct sched_qdim){SCHED_QDIM_MODEL, w->models[1], 400000, 400000};
			d[2] = (struct sched_qdim){SCHED_QDIM_UNITS, NULL, 1500000, 1500000};
			d[3] = (struct sched_qdim){SCHED_QDIM_CPUS, NULL, 40000, 40000};
			w->queues[q].ndims = 4;
			w->queues[q].dims = d;
		}
	}
	/* fill to 90% of the GPUs with running jobs, node by node in random order */
	int *order = xcalloc((size_t)cl->n, sizeof(int));
	for (int i = 0; i < cl->n; i++)
		order[i] = i;
	for (int i = cl->n - 1; i > 0; i--) {
		int k = (int)rnd((uint32_t)i + 1), t = order[i];
		order[i] = order[k];
		order[k] = t;
	}
	int64_t target = (int64_t)cl->gpus * MODEL_MILLI * 9 / 10, used = 0;
	for (int k = 0; k < cl->n && used < target; k++) {
		int n = order[k], g = w->nodes[n].ndev;
		if (g == 0)
			continue;
		if (g == 1) {
			if (rnd(4) == 0) {
				hold(w, new_running(w), n, 1, 500);
				hold(w, new_running(w), n, 1, 500);
			} else {
				hold(w, new_running(w), n, 1, MODEL_MILLI);
			}
			used += MODEL_MILLI;
			continue;
		}
		uint32_t shape = rnd(4);
		if (shape == 0 && g == 8 && k + 1 < cl->n && w->nodes[order[k + 1]].ndev == 8) {
			struct sched_running *r = new_running(w); /* a 2-node gang */
			hold(w, r, n, 8, MODEL_MILLI);
			hold(w, r, order[++k], 8, MODEL_MILLI);
			used += 16 * MODEL_MILLI;
		} else if (shape == 1) {
			hold(w, new_running(w), n, g, MODEL_MILLI);
			used += (int64_t)g * MODEL_MILLI;
		} else {
			for (int d = 0; d < g; d += 2) {
				hold(w, new_running(w), n, MIN(2, g - d), MODEL_MILLI);
				used += (int64_t)MIN(2, g - d) * MODEL_MILLI;
			}
		}
	}
	free(order);
	/* each running job's level, by what it has run */
	for (int r = 0; r < w->nr; r++) {
		struct sched_running *run = &w->run[r];
		int64_t milli = 0;
		for (int k = 0; k < run->nnodes; k++)
			milli += (int64_t)run->nodes[k].ndev * run->nodes[k].milli;
		double got = (double)(w->now - run->start_ms) * (double)milli / 1e6;
		run->cls = w->first[run->cls] + sched_las_level(&w->las[run->cls], got);
	}
	/* 100,000 pending jobs of mixed shapes, classes and queues */
	w->jobs = xcalloc((size_t)pending, sizeof(*w->jobs));
	w->ptrs = xcalloc((size_t)pending, sizeof(*w->ptrs));
	w->nj = pending;
	for (int i = 0; i < pending; i++) {
		struct sched_job *j = &w->jobs[i];
		j->id = i + 1;
		j->submit_ms = w->now - 1000LL * (pending - i);
		uint32_t c = rnd(10);
		j->cls = c < 4 ? 0 : c < 9 ? 1 : 2;
		if (w->las[j->cls].nlevels > 1) {
			uint32_t l = rnd(20);
			j->cls = w->first[j->cls] + (l < 10 ? 0 : l < 17 ? 1 : 2);
		} else {
			j->cls = w->first[j->cls];
		}
		j->queue = (int)rnd(8);
		j->nodes = 1;
		j->tasks_per_node = 1;
		uint32_t s = rnd(100);
		if (s < 45)
			j->gpu_milli = MODEL_MILLI;
		else if (s < 55)
			j->gpu_milli = rnd(2) ? 500 : 250;
		else if (s < 70)
			j->gpu_milli = (2 + (int)rnd(3)) * MODEL_MILLI;
		else if (s < 85)
			j->gpu_milli = 8 * MODEL_MILLI;
		else if (s < 95) {
			j->nodes = 2 << rnd(4);
			j->gpu_milli = 8 * MODEL_MILLI;
		} else
			j->cpus_per_task = 4;
		if (j->gpu_milli && rnd(5) == 0) {
			j->ngpu_types = 1;
			j->gpu_types = &w->models[rnd((uint32_t)w->nmodels)];
		}
		j->time_limit_s = rnd(3) ? 600LL * (1 + rnd(48)) : 0;
		if (w->hist && j->cls > w->first[1] - 1 && j->cls < w->first[2]) {
			/* its service, inside its level (half the first level's none) */
			static const double lo[3] = {0, 3600, 16 * 3600},
					    hi[3] = {3600, 16 * 3600, 200 * 3600};
			int lv = j->cls - w->first[1];
			if (!w->attained)
				w->attained = xcalloc((size_t)pending + 1, sizeof(double));
			w->attained[j->id] =
				lv == 0 && rnd(2) ? 0
						  : lo[lv] + (hi[lv] - lo[lv]) * rnd(1000000) / 1e6;
		}
		if (cfg->npools)
			job_pools(cfg, j, w->constraints[i], sizeof(w->constraints[i]));
		j->shape = sched_job_shape(j); /* what the server keeps with each job */
		if (w->shapes)
			j->shape_id = sched_shapes_add(w->shapes, j);
	}
	/* the order the server keeps them in: class priority (a class's levels
	 * in order), then submission; the classes lie in rising priority */
	int k = 0;
	for (int cls = 2; cls >= 0; cls--)
		for (int lv = w->first[cls]; lv < (cls == 2 ? w->nclasses : w->first[cls + 1]);
		     lv++)
			for (int i = 0; i < pending; i++)
				if (w->jobs[i].cls == lv)
					w->ptrs[k++] = &w->jobs[i];
	if (w->shapes && !getenv("BENCH_NO_KEYS")) {
		w->keys = xcalloc((size_t)pending, sizeof(*w->keys));
		for (int i = 0; i < pending; i++)
			w->keys[i] = sched_key_of(w->ptrs[i]);
	}
}

/* Each LAS level's waiting jobs by their Gittins index, as the server's
 * snapshot puts them (w->order_ms: how long it took). */
static void order_levels(struct world *w)
{
	if (!w->hist)
		return;
	double t0 = now_ms();
	static struct sched_las_place *o;
	static const struct sched_job **was;
	static struct sched_key *was_keys;
	static size_t oalloc, walloc, kalloc;
	xgrow(&o, &oalloc, (size_t)w->nj + 1, sizeof(*o));
	xgrow(&was, &walloc, (size_t)w->nj + 1, sizeof(*was));
	if (w->keys)
		xgrow(&was_keys, &kalloc, (size_t)w->nj + 1, sizeof(*was_keys));
	for (int i = 0; i < w->nj;) {
		int c = w->ptrs[i]->cls, end = i;
		while (end < w->nj && w->ptrs[end]->cls == c)
			end++;
		if (w->classes[c].las_family) {
			for (int k = i; k < end; k++) {
				const struct sched_job *j = w->ptrs[k];
				double g;
				if (!sched_las_history_index(w->hist, &w->las[1], 1,
							     (uint32_t)j->queue, w->attained[j->id],
							     &g))
					g = -1;
				o[k - i] = (struct sched_las_place){0, g, k - i};
				was[k - i] = j;
				if (w->keys)
					was_keys[k - i] = w->keys[k];
			}
			sched_las_places_sort(o, end - i);
			for (int k = i; k < end; k++) {
				w->ptrs[k] = was[o[k - i].pos];
				if (w->keys)
					w->keys[k] = was_keys[o[k - i].pos];
			}
		}
		i = end;
	}
	w->order_ms = now_ms() - t0;
}

static struct sched_snapshot snap_of(struct world *w)
{
	return (struct sched_snapshot){.nodes = w->nodes,
				       .nnodes = w->nn,
				       .jobs = w->ptrs,
				       .njobs = w->nj,
				       .running = w->run,
				       .nrunning = w->nr,
				       .classes = w->classes,
				       .nclasses = w->nclasses,
				       .queues = w->queues,
				       .nqueues = 8,
				       .cluster = w->cluster,
				       .shapes = w->shapes,
				       .keys = w->keys,
				       .keep = w->keep,
				       .weights = w->weights,
				       .nweights = w->nweights,
				       .given_order = w->hist != NULL};
}

/* A digest of every decision the benchmark's passes make (starts and where,
 * victims, each wait's reason and text): equal digests from two builds mean
 * they decided the same, whatever their speed. */
static uint64_t digest = 1469598103934665603ULL;
static void dig(uint64_t v)
{
	digest = (digest ^ v) * 1099511628211ULL;
}

static void digest_decisions(const struct world *w, const struct sched_decisions *d)
{
	for (int i = 0; i < d->nstarts; i++) {
		dig((uint64_t)w->ptrs[d->starts[i].job]->id);
		for (int k = 0; k < d->starts[i].nnodes; k++) {
			const struct sched_assign *a = &d->starts[i].nodes[k];
			dig((uint64_t)a->node << 32 | (uint32_t)a->milli);
			for (int x = 0; x < a->ndev; x++)
				dig((uint64_t)a->devs[x]);
		}
	}
	for (int i = 0; i < d->npreempts; i++)
		dig((uint64_t)d->preempts[i].victim << 20 ^ (uint64_t)d->preempts[i].job);
	for (int i = 0; i < d->nwaits; i++) {
		const struct sched_wait *wt = &d->waits[i];
		dig((uint64_t)wt->job << 8 | wt->reason);
		dig((uint64_t)(wt->same_as + 1) ^ (uint64_t)wt->until_ms);
		for (const char *c = wt->detail; c && *c; c++)
			dig((unsigned char)*c);
	}
}

/* Applies a pass's decisions: starts run, victims stop for their preemptor. */
static void apply(struct world *w, const struct sched_decisions *d)
{
	for (int i = 0; i < d->npreempts; i++)
		for (int r = 0; r < w->nr; r++)
			if (w->run[r].id == d->preempts[i].victim) {
				w->run[r].stopping = true;
				w->run[r].held_for = w->ptrs[d->preempts[i].job]->id;
			}
	bool *gone = xcalloc((size_t)w->nj, sizeof(bool));
	for (int i = 0; i < d->nstarts; i++) {
		const struct sched_start *s = &d->starts[i];
		const struct sched_job *j = w->ptrs[s->job];
		gone[s->job] = true;
		struct sched_running *r = new_running(w);
		r->id = j->id;
		r->cls = j->cls;
		r->queue = j->queue;
		r->start_ms = w->now;
		r->time_limit_s = j->time_limit_s;
		for (int k = 0; k < s->nnodes && k < 16; k++) {
			struct sched_assign *a = (struct sched_assign *)&r->nodes[r->nnodes++];
			*a = s->nodes[k];
			for (int x = 0; x < a->ndev; x++)
				dev(w, a->node, a->devs[x])->free_milli -= a->milli;
			w->nodes[a->node].cpus_free -= a->cpus;
			w->nodes[a->node].mem_free_mib -= a->mem_mib;
		}
	}
	int k = 0;
	for (int i = 0; i < w->nj; i++)
		if (!gone[i]) {
			if (w->keys)
				w->keys[k] = w->keys[i];
			w->ptrs[k++] = w->ptrs[i];
		}
	w->nj = k;
	free(gone);
}

static void end_job(struct world *w, int r, bool give_back)
{
	struct sched_running *run = &w->run[r];
	for (int k = 0; k < run->nnodes; k++) {
		const struct sched_assign *a = &run->nodes[k];
		for (int x = 0; x < a->ndev; x++)
			dev(w, a->node, a->devs[x])->free_milli += give_back ? a->milli : -a->milli;
		w->nodes[a->node].cpus_free += give_back ? a->cpus : -a->cpus;
		w->nodes[a->node].mem_free_mib += give_back ? a->mem_mib : -a->mem_mib;
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_sched NODE_LIST [PENDING] [PASSES]\n");
		return 2;
	}
	/* as the server does (src/main.c) */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	int pending = argc > 2 ? atoi(argv[2]) : 100000;
	int passes = argc > 3 ? atoi(argv[3]) : 100;
	/* the server's default policy (BENCH_PLACEMENT=fastest: fastest model
	 * first, fractions alone scored) */
	struct sched_config cfg;
	sched_config_default(&cfg);
	const char *placement = getenv("BENCH_PLACEMENT") ? getenv("BENCH_PLACEMENT") : "dense";
	cfg.placement_fastest = strcmp(placement, "fastest") == 0;
	/* BENCH_MAX_STARTS=N: a pass starts at most N jobs (0: no limit);
	 * else the server's default */
	if (getenv("BENCH_MAX_STARTS"))
		cfg.max_starts_per_pass = atoi(getenv("BENCH_MAX_STARTS"));
	struct sched_policy policy;
	sched_policy_of_config(&cfg, &policy);
	struct catalogue cat;
	catalogue_init(&cat);
	struct sim_cluster cl;
	struct tk_error err;
	if (sim_cluster_load(argv[1], &cat, &cl, &err) < 0) {
		fprintf(stderr, "bench_sched: %s\n", err.text);
		return 1;
	}
	/* BENCH_SCALE=K: the node list K times over (names suffixed), e.g. 10
	 * for about 100,000 GPUs */
	int scale = getenv("BENCH_SCALE") ? atoi(getenv("BENCH_SCALE")) : 1;
	if (scale > 1 && scale <= 100) {
		struct sim_node *nodes = xcalloc((size_t)cl.n * (size_t)scale, sizeof(*nodes));
		for (int k = 0; k < scale; k++)
			for (int i = 0; i < cl.n; i++) {
				struct sim_node *x = &nodes[k * cl.n + i];
				*x = cl.nodes[i];
				snprintf(x->name, sizeof(x->name), "%.40s-%d", cl.nodes[i].name, k);
			}
		free(cl.nodes);
		cl.nodes = nodes;
		cl.n *= scale;
		cl.gpus *= scale;
	}
	static struct world w;
	/* the server files each waiting job's request in a shape table
	 * (BENCH_NO_SHAPES=1: the pass compares the requests itself) */
	if (!getenv("BENCH_NO_SHAPES"))
		w.shapes = sched_shapes_new();
	if (getenv("BENCH_POOLS") && sched_config_load_json(&cfg, three_tiers, &err) < 0) {
		fprintf(stderr, "bench_sched: %s\n", err.text);
		return 1;
	}
	build(&w, &cl, pending, &cfg);
	/* the server keeps what follows from the node list between passes */
	double tc = now_ms();
	w.cluster = sched_cluster_new(w.nodes, w.nn);
	/* BENCH_NO_KEEP=1: each pass allocates its own arrays */
	if (!getenv("BENCH_NO_KEEP"))
		w.keep = sched_keep_new();
	double cluster_ms = now_ms() - tc;
	int64_t held = 0;
	for (int r = 0; r < w.nr; r++)
		for (int k = 0; k < w.run[r].nnodes; k++)
			held += (int64_t)w.run[r].nodes[k].ndev * w.run[r].nodes[k].milli;
	double *full = xcalloc((size_t)passes, sizeof(double));
	double *inc = xcalloc((size_t)passes, sizeof(double));
	struct sched_decisions first = {0};
	/* BENCH_FULL_PASSES=1 measures the incremental passes alone (profiling) */
	int fulls = getenv("BENCH_FULL_PASSES") ? atoi(getenv("BENCH_FULL_PASSES")) : passes;
	bool count_full = getenv("BENCH_COUNT_FULL") != NULL;
	double *order = xcalloc((size_t)passes + (size_t)fulls, sizeof(double));
	int norder = 0;
	for (int i = 0; i < fulls; i++) {
		order_levels(&w);
		order[norder++] = w.order_ms;
		struct sched_snapshot s = snap_of(&w);
		struct sched_decisions d;
		double t0 = now_ms() - w.order_ms;
		if (count_full)
			CALLGRIND_START_INSTRUMENTATION;
		int rc = sched_pass(&s, w.now, &policy, &d);
		if (count_full)
			CALLGRIND_STOP_INSTRUMENTATION;
		if (rc < 0) {
			fprintf(stderr, "bench_sched: the snapshot was refused\n");
			return 1;
		}
		full[i] = now_ms() - t0;
		if (i == 0)
			digest_decisions(&w, &d);
		if (i == 0)
			first = d;
		else
			sched_decisions_release(&d);
	}
	int nstarts = first.nstarts, npre = first.npreempts, tried = first.placements_tried,
	    hits = first.shape_cache_hits;
	/* the first pass finds its memory fresh: faults where later ones have none */
	double first_ms = full[0];
	if (getenv("BENCH_ONLY_FULL")) {
		qsort(full, (size_t)fulls, sizeof(double), cmp_double);
		printf("{\"full_pass_p50_ms\": %.2f, \"full_pass_min_ms\": %.2f, "
		       "\"full_pass_first_ms\": %.2f, \"starts\": %d, "
		       "\"first_pass_digest\": \"%016llx\"}\n",
		       full[fulls / 2], full[0], first_ms, nstarts, (unsigned long long)digest);
		return 0;
	}
	apply(&w, &first);
	sched_decisions_release(&first);
	/* run to quiet: victims exit, passes apply, until nothing changes */
	int rounds = 0;
	for (; rounds < 500; rounds++) {
		for (int r = 0; r < w.nr; r++)
			if (w.run[r].stopping) {
				end_job(&w, r, true);
				w.run[r] = w.run[--w.nr];
				w.run[r].nodes = &w.run_nodes[r * 16];
				memcpy((void *)w.run[r].nodes, w.run_nodes + w.nr * 16,
				       sizeof(*w.run_nodes) * 16);
				r--;
			}
		order_levels(&w);
		struct sched_snapshot s = snap_of(&w);
		struct sched_decisions d;
		/* no preemption cap while converging: quiet sooner */
		struct sched_policy unlimited = policy;
		unlimited.max_preemptions = -1;
		if (sched_pass(&s, w.now, &unlimited, &d) < 0) {
			fprintf(stderr, "bench_sched: snapshot refused after %d rounds\n", rounds);
			return 1;
		}
		bool quiet = d.nstarts == 0 && d.npreempts == 0;
		digest_decisions(&w, &d);
		apply(&w, &d);
		sched_decisions_release(&d);
		if (quiet)
			break;
	}
	int inc_starts = 0, inc_tried = 0, inc_pre = 0;
	for (int i = 0; i < passes; i++) {
		/* one running job (not a victim on its way out) ends */
		int r;
		do
			r = (int)rnd((uint32_t)w.nr);
		while (w.run[r].stopping);
		end_job(&w, r, true);
		/* the running list without it, its allocations side by side as
		 * the server builds them for each pass (copied outside the timing) */
		struct sched_running *rest = xcalloc((size_t)w.nr, sizeof(*rest));
		int nparts = 0;
		for (int k = 0; k < w.nr; k++)
			nparts += w.run[k].nnodes;
		struct sched_assign *parts = xmalloc(sizeof(*parts) * ((size_t)nparts + 1));
		int nrest = 0;
		nparts = 0;
		for (int k = 0; k < w.nr; k++) {
			if (k == r)
				continue;
			rest[nrest] = w.run[k];
			rest[nrest].nodes = &parts[nparts];
			memcpy(&parts[nparts], w.run[k].nodes,
			       sizeof(*parts) * (size_t)w.run[k].nnodes);
			nparts += w.run[k].nnodes;
			nrest++;
		}
		order_levels(&w);
		order[norder++] = w.order_ms;
		struct sched_snapshot s = snap_of(&w);
		s.running = rest;
		s.nrunning = nrest;
		struct sched_decisions d;
		double t0 = now_ms() - w.order_ms;
		CALLGRIND_START_INSTRUMENTATION;
		int rc = sched_pass(&s, w.now, &policy, &d);
		CALLGRIND_STOP_INSTRUMENTATION;
		if (rc < 0) {
			fprintf(stderr, "bench_sched: incremental snapshot %d refused\n", i);
			return 1;
		}
		inc[i] = now_ms() - t0;
		digest_decisions(&w, &d);
		inc_starts += d.nstarts;
		inc_tried += d.placements_tried;
		inc_pre += d.npreempts;
		sched_decisions_release(&d);
		free(rest);
		free(parts);
		end_job(&w, r, false);
	}
	/* BENCH_TIMES=FILE: every pass's time, in order, for bench/sched/run to draw */
	if (getenv("BENCH_TIMES")) {
		FILE *f = fopen(getenv("BENCH_TIMES"), "w");
		if (!f) {
			fprintf(stderr, "bench_sched: cannot write %s\n", getenv("BENCH_TIMES"));
			return 1;
		}
		for (int i = 0; i < fulls; i++)
			fprintf(f, "full %.4f\n", full[i]);
		for (int i = 0; i < passes; i++)
			fprintf(f, "incremental %.4f\n", inc[i]);
		fclose(f);
	}
	for (int i = fulls; i < passes; i++)
		full[i] = full[fulls - 1];
	qsort(full, (size_t)passes, sizeof(double), cmp_double);
	double order_first = norder ? order[0] : 0;
	qsort(order, (size_t)norder, sizeof(double), cmp_double);
	double order_p50 = norder ? order[norder / 2] : 0;
	free(order);
	qsort(inc, (size_t)passes, sizeof(double), cmp_double);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("{\n  \"placement\": \"%s\",\n  \"max_starts_per_pass\": %d,\n"
	       "  \"nodes\": %d,\n  \"gpus\": %d,\n  "
	       "\"running_jobs\": %d,\n"
	       "  \"gpus_held\": %.1f,\n  \"pending_jobs\": %d,\n  \"passes\": %d,\n"
	       "  \"full_pass_p50_ms\": %.2f,\n  \"full_pass_p99_ms\": %.2f,\n"
	       "  \"full_pass_first_ms\": %.2f,\n  \"full_pass_starts\": %d,\n  "
	       "\"full_pass_preemptions\": %d,\n"
	       "  \"full_pass_placements_tried\": %d,\n  \"full_pass_shape_cache_hits\": %d,\n"
	       "  \"incremental_pass_min_ms\": %.2f,\n"
	       "  \"incremental_pass_p50_ms\": %.2f,\n  \"incremental_pass_p99_ms\": %.2f,\n"
	       "  \"incremental_starts_mean\": %.2f,\n"
	       "  \"incremental_preemptions_mean\": %.2f,\n"
	       "  \"incremental_placements_mean\": %.1f,\n  \"rounds_to_quiet\": %d,\n"
	       "  \"pending_when_quiet\": %d,\n  \"cluster_build_ms\": %.2f,\n"
	       "  \"peak_rss_mib\": %.1f,\n  \"las_gittins\": %s,\n"
	       "  \"las_order_p50_ms\": %.2f,\n  \"las_order_first_ms\": %.2f,\n"
	       "  \"decisions_digest\": \"%016llx\"\n}\n",
	       cfg.placement_fastest ? "fastest" : "dense", policy.max_starts, cl.n, cl.gpus, w.nr,
	       held / 1000.0, pending, passes, full[passes / 2], full[(int)(passes * 0.99)],
	       first_ms, nstarts, npre, tried, hits, inc[0], inc[passes / 2],
	       inc[(int)(passes * 0.99)], (double)inc_starts / passes, (double)inc_pre / passes,
	       (double)inc_tried / passes, rounds, w.nj, cluster_ms, ru.ru_maxrss / 1024.0,
	       w.hist ? "true" : "false", order_p50, order_first, (unsigned long long)digest);
	free(full);
	free(inc);
	sim_cluster_release(&cl);
	catalogue_release(&cat);
	sched_cluster_free(w.cluster);
	sched_keep_free(w.keep);
	sched_shapes_free(w.shapes);
	return 0;
}
