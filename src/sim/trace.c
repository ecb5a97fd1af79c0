/*
 * Job traces for the simulator: Alibaba's openb pod lists as they are,
 * tenk's own job history, and a synthetic stream. Every row is checked; the
 * first bad one stops the load with file, line and column. Nothing is
 * guessed: a value out of range is an error, not a default.
 */
#include "sim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum tformat { T_OPENB, T_OPENB_UNTIMED, T_TENK };

int sim_intern(char ***list, int *n, const char *s)
{
	for (int i = 0; i < *n; i++)
		if (strcmp((*list)[i], s) == 0)
			return i;
	*list = xrealloc(*list, sizeof(char *) * (size_t)(*n + 1));
	(*list)[*n] = xstrdup(s);
	return (*n)++;
}

int64_t sim_job_milli(const struct sim_job *j)
{
	return (int64_t)j->nodes * j->tasks_per_node * j->gpu_milli;
}

static struct sim_job *new_job(struct sim_trace *t)
{
	xgrow(&t->jobs, &t->alloc, (size_t)t->n + 1, sizeof(*t->jobs));
	struct sim_job *j = &t->jobs[t->n++];
	memset(j, 0, sizeof(*j));
	j->nodes = 1;
	j->tasks_per_node = 1;
	j->cls = -1;
	j->pool = j->spread = j->within = -1;
	j->types_off = (int)t->nrefs;
	return j;
}

static void add_type(struct sim_trace *t, struct sim_job *j, const char *name)
{
	int k = sim_intern(&t->types, &t->ntypes, name);
	for (int i = 0; i < j->ntypes; i++)
		if (t->type_refs[j->types_off + i] == k)
			return;
	xgrow(&t->type_refs, &t->refs_alloc, t->nrefs + 1, sizeof(int));
	t->type_refs[t->nrefs++] = k;
	j->ntypes++;
}

/* "A|B" (openb) or "A;B" (tenk): acceptable models. */
static int parse_types(struct sim_trace *t, struct sim_job *j, struct sim_csv *c, int col, char sep,
		       struct tk_error *err)
{
	char *s = c->fields[col];
	while (*s) {
		char *end = strchr(s, sep);
		if (end)
			*end = '\0';
		char name[MODEL_NAME_MAX];
		if (!*s || strlen(s) >= sizeof(name) || !model_name_valid(s))
			return tk_errorf(err, -EINVAL,
					 "%s:%d: column %d (%s): \"%.40s\" is not a model name",
					 c->path, c->lineno, col + 1, c->header[col], s);
		snprintf(name, sizeof(name), "%s", s);
		add_type(t, j, name);
		if (!end)
			break;
		s = end + 1;
	}
	return 0;
}

static int need_columns(struct sim_csv *c, const char *const *names, int *cols,
			struct tk_error *err)
{
	for (int i = 0; names[i]; i++) {
		cols[i] = sim_csv_column(c, names[i]);
		if (cols[i] < 0)
			return tk_errorf(err, -EINVAL, "%s:1: no column \"%s\"", c->path, names[i]);
	}
	return 0;
}

static int plain_name(struct sim_csv *c, int col, char *out, size_t n, struct tk_error *err)
{
	const char *s = c->fields[col];
	if (!*s || strlen(s) >= n || !model_name_valid(s))
		return tk_errorf(err, -EINVAL,
				 "%s:%d: column %d (%s): expected a name of letters, digits, '-', "
				 "'_' or '.', got \"%.40s\"",
				 c->path, c->lineno, col + 1, c->header[col], s);
	snprintf(out, n, "%s", s);
	return 0;
}

enum {
	P_NAME,
	P_CPU,
	P_MEM,
	P_NGPU,
	P_MILLI,
	P_SPEC,
	P_QOS,
	P_PHASE,
	P_CREATE,
	P_DELETE,
	P_SCHED,
	P_N
};
static const char *const openb_cols[] = {
	"name", "cpu_milli", "memory_mib",    "num_gpu",       "gpu_milli",	 "gpu_spec",
	"qos",	"pod_phase", "creation_time", "deletion_time", "scheduled_time", NULL};

#define MAX_TIME_S (100LL * 365 * 86400)

static int openb_row(struct sim_trace *t, struct sim_csv *c, const int *col, bool timed,
		     struct tk_error *err)
{
	struct sim_job *j = new_job(t);
	j->line = c->lineno;
	int64_t cpu, mem, ngpu, milli;
	int r;
	if ((r = sim_csv_int(c, col[P_CPU], 0, 1000LL * MODEL_MAX_CPUS, &cpu, err)) < 0 ||
	    (r = sim_csv_int(c, col[P_MEM], 0, MODEL_MAX_MEM_MIB, &mem, err)) < 0 ||
	    (r = sim_csv_int(c, col[P_NGPU], 0, MODEL_MAX_ACCELS, &ngpu, err)) < 0 ||
	    (r = sim_csv_int(c, col[P_MILLI], 0, MODEL_MILLI, &milli, err)) < 0)
		return r;
	if (!*c->fields[col[P_NAME]])
		return tk_errorf(err, -EINVAL, "%s:%d: column %d (name): empty", c->path, c->lineno,
				 col[P_NAME] + 1);
	if (ngpu > 1 && milli != MODEL_MILLI)
		return tk_errorf(
			err, -EINVAL,
			"%s:%d: column %d (gpu_milli): a pod with %lld GPUs takes them whole "
			"(1000), got %lld",
			c->path, c->lineno, col[P_MILLI] + 1, (long long)ngpu, (long long)milli);
	if (ngpu == 1 && milli == 0)
		return tk_errorf(
			err, -EINVAL,
			"%s:%d: column %d (gpu_milli): a pod with a GPU needs a share of 1 "
			"to 1000, got 0",
			c->path, c->lineno, col[P_MILLI] + 1);
	j->cpu_milli = (int)cpu;
	j->mem_mib = mem;
	j->gpu_milli = ngpu == 0 ? 0 : ngpu == 1 ? (int)milli : (int)ngpu * MODEL_MILLI;
	if (!timed) {
		j->submit_ms = t->n - 1; /* the order given */
		j->work_ms = SIM_FOREVER;
		j->queue = sim_intern(&t->queues, &t->nqueues, "default");
		return 0;
	}
	if (*c->fields[col[P_SPEC]] && (r = parse_types(t, j, c, col[P_SPEC], '|', err)) < 0)
		return r;
	char q[MODEL_NAME_MAX];
	if ((r = plain_name(c, col[P_QOS], q, sizeof(q), err)) < 0)
		return r;
	j->queue = sim_intern(&t->queues, &t->nqueues, q);
	int64_t created, deleted, sched = -1;
	if ((r = sim_csv_int(c, col[P_CREATE], 0, MAX_TIME_S, &created, err)) < 0 ||
	    (r = sim_csv_int(c, col[P_DELETE], 0, MAX_TIME_S, &deleted, err)) < 0)
		return r;
	if (*c->fields[col[P_SCHED]] &&
	    (r = sim_csv_int(c, col[P_SCHED], 0, MAX_TIME_S, &sched, err)) < 0)
		return r;
	if (sched >= 0 && sched < created)
		return tk_errorf(
			err, -EINVAL,
			"%s:%d: column %d (scheduled_time): %lld is before creation_time %lld",
			c->path, c->lineno, col[P_SCHED] + 1, (long long)sched, (long long)created);
	int64_t from = sched >= 0 ? sched : created;
	if (deleted < from)
		return tk_errorf(err, -EINVAL,
				 "%s:%d: column %d (deletion_time): %lld is before %s %lld",
				 c->path, c->lineno, col[P_DELETE] + 1, (long long)deleted,
				 sched >= 0 ? "scheduled_time" : "creation_time", (long long)from);
	j->submit_ms = created * 1000;
	j->work_ms = (deleted - from) * 1000;
	return 0;
}

enum {
	K_ID,
	K_SUBMIT,
	K_RUN,
	K_NODES,
	K_TPN,
	K_GPUS,
	K_CPUS,
	K_MEM,
	K_TYPES,
	K_QUEUE,
	K_CLASS,
	K_LIMIT,
	K_N
};
static const char *const tenk_cols[] = {"id",
					"submit_s",
					"run_s",
					"nodes",
					"tasks_per_node",
					"gpus_per_task",
					"cpus_per_task",
					"mem_mib",
					"gpu_types",
					"queue",
					"class",
					"time_limit_s",
					NULL};

/* The optional columns of tenk's format: pool ("top;general"), spread
 * ("rack:2"), within ("rack"), checked as a request's. */
static int placement_words(struct sim_trace *t, struct sim_job *j, struct sim_csv *c,
			   const int *col, struct tk_error *err)
{
	int *dst[] = {&j->pool, &j->spread, &j->within};
	for (int k = 0; k < 3; k++) {
		int cl = col[K_N + k];
		if (cl < 0 || !*c->fields[cl])
			continue;
		char text[MODEL_LABELS_MAX], out[MODEL_LABELS_MAX], level[MODEL_NAME_MAX];
		struct tk_error e;
		int cap, r;
		snprintf(text, sizeof(text), "%s", c->fields[cl]);
		for (char *p = text; *p; p++)
			if (*p == ';')
				*p = ',';
		r = k == 0 ? model_names_parse("pool", text, out, sizeof(out), &e)
			   : job_spread_parse(text, level, sizeof(level), k == 1 ? &cap : NULL, &e);
		if (r < 0)
			return tk_errorf(err, -EINVAL, "%s:%d: column %d (%s): %s", c->path,
					 c->lineno, cl + 1, c->header[cl], e.text);
		*dst[k] = sim_intern(&t->words, &t->nwords, k == 0 ? out : text);
	}
	return 0;
}

static int tenk_row(struct sim_trace *t, struct sim_csv *c, const int *col, struct tk_error *err)
{
	struct sim_job *j = new_job(t);
	j->line = c->lineno;
	int64_t id, nodes, tpn, cpus, mem, limit;
	double submit, run, gpus;
	int r;
	if ((r = sim_csv_int(c, col[K_ID], 1, INT64_MAX, &id, err)) < 0 ||
	    (r = sim_csv_num(c, col[K_SUBMIT], 0, (double)MAX_TIME_S, &submit, err)) < 0 ||
	    (r = sim_csv_num(c, col[K_RUN], 0, (double)MAX_TIME_S, &run, err)) < 0 ||
	    (r = sim_csv_int(c, col[K_NODES], 1, MODEL_MAX_NODES, &nodes, err)) < 0 ||
	    (r = sim_csv_int(c, col[K_TPN], 1, MODEL_MAX_ACCELS, &tpn, err)) < 0 ||
	    (r = sim_csv_num(c, col[K_GPUS], 0, MODEL_MAX_ACCELS, &gpus, err)) < 0 ||
	    (r = sim_csv_int(c, col[K_CPUS], 0, MODEL_MAX_CPUS, &cpus, err)) < 0 ||
	    (r = sim_csv_int(c, col[K_MEM], 0, MODEL_MAX_MEM_MIB, &mem, err)) < 0 ||
	    (r = sim_csv_int(c, col[K_LIMIT], 0, MAX_TIME_S, &limit, err)) < 0)
		return r;
	double milli = gpus * MODEL_MILLI;
	if (fabs(milli - llround(milli)) > 1e-6 || (gpus > 1 && fmod(gpus, 1.0) != 0))
		return tk_errorf(err, -EINVAL,
				 "%s:%d: column %d (gpus_per_task): a whole number, or a fraction "
				 "below 1 in thousandths, got %g",
				 c->path, c->lineno, col[K_GPUS] + 1, gpus);
	if (tpn * (int64_t)gpus > MODEL_MAX_ACCELS)
		return tk_errorf(err, -EINVAL,
				 "%s:%d: %lld tasks of %g devices do not fit one node", c->path,
				 c->lineno, (long long)tpn, gpus);
	j->submit_ms = llround(submit * 1000);
	j->work_ms = llround(run * 1000);
	j->nodes = (int)nodes;
	j->tasks_per_node = (int)tpn;
	j->gpu_milli = (int)llround(milli);
	j->cpu_milli = (int)cpus * 1000;
	j->mem_mib = mem;
	j->time_limit_s = limit;
	if (*c->fields[col[K_TYPES]] && (r = parse_types(t, j, c, col[K_TYPES], ';', err)) < 0)
		return r;
	char name[MODEL_NAME_MAX];
	if ((r = plain_name(c, col[K_QUEUE], name, sizeof(name), err)) < 0)
		return r;
	j->queue = sim_intern(&t->queues, &t->nqueues, name);
	if (*c->fields[col[K_CLASS]]) {
		if ((r = plain_name(c, col[K_CLASS], name, sizeof(name), err)) < 0)
			return r;
		j->cls = sim_intern(&t->classes, &t->nclasses, name);
	}
	return placement_words(t, j, c, col, err);
}

int sim_trace_load(const char *path, struct sim_trace *ret, struct tk_error *err)
{
	memset(ret, 0, sizeof(*ret));
	struct sim_csv c;
	int r = sim_csv_open(&c, path, err);
	if (r < 0)
		return r;
	enum tformat fmt = T_TENK;
	int col[16];
	if (sim_csv_column(&c, "num_gpu") >= 0) {
		bool timed = sim_csv_column(&c, "creation_time") >= 0 || c.header_n > 5;
		fmt = timed ? T_OPENB : T_OPENB_UNTIMED;
		static const char *const untimed[] = {"name",	 "cpu_milli", "memory_mib",
						      "num_gpu", "gpu_milli", NULL};
		r = need_columns(&c, timed ? openb_cols : untimed, col, err);
	} else if (sim_csv_column(&c, "submit_s") >= 0) {
		fmt = T_TENK;
		r = need_columns(&c, tenk_cols, col, err);
		col[K_N] = sim_csv_column(&c, "pool");
		col[K_N + 1] = sim_csv_column(&c, "spread");
		col[K_N + 2] = sim_csv_column(&c, "within");
	} else {
		r = tk_errorf(err, -EINVAL,
			      "%s:1: not a job trace I know: expected the columns of an openb pod "
			      "list (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,"
			      "pod_phase,creation_time,deletion_time,scheduled_time]) or of tenk's "
			      "job history (id,submit_s,run_s,nodes,tasks_per_node,gpus_per_task,"
			      "cpus_per_task,mem_mib,gpu_types,queue,class,time_limit_s)",
			      path);
	}
	if (r < 0) {
		sim_csv_close(&c);
		return r;
	}
	ret->timed = fmt != T_OPENB_UNTIMED;
	snprintf(ret->source, sizeof(ret->source), "%s",
		 fmt == T_OPENB		  ? "openb"
		 : fmt == T_OPENB_UNTIMED ? "openb-untimed"
					  : "tenk");
	while ((r = sim_csv_next(&c, err)) > 0) {
		if (ret->n == SIM_MAX_JOBS) {
			r = tk_errorf(err, -E2BIG, "%s:%d: more than %d jobs", path, c.lineno,
				      SIM_MAX_JOBS);
			break;
		}
		r = fmt == T_TENK ? tenk_row(ret, &c, col, err)
				  : openb_row(ret, &c, col, fmt == T_OPENB, err);
		if (r < 0)
			break;
	}
	sim_csv_close(&c);
	if (r == 0 && ret->n == 0)
		r = tk_errorf(err, -EINVAL, "%s: no jobs", path);
	if (r < 0) {
		sim_trace_release(ret);
		return r;
	}
	return 0;
}

void sim_trace_release(struct sim_trace *t)
{
	for (int i = 0; i < t->nqueues; i++)
		free(t->queues[i]);
	for (int i = 0; i < t->nclasses; i++)
		free(t->classes[i]);
	for (int i = 0; i < t->ntypes; i++)
		free(t->types[i]);
	for (int i = 0; i < t->nwords; i++)
		free(t->words[i]);
	free(t->words);
	free(t->queues);
	free(t->classes);
	free(t->types);
	free(t->type_refs);
	free(t->jobs);
	memset(t, 0, sizeof(*t));
}

/* ---- a synthetic stream ---------------------------------------------------------------- */

static uint64_t mix_rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double unit(uint64_t *s)
{
	return (double)(mix_rng(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* One job's shape for a node of g devices: fractions and single devices go
 * anywhere; bigger nodes also take 2, 4 or 8 devices and two-node gangs. */
static void synth_shape(struct sim_job *j, int g, uint64_t *s)
{
	double u = unit(s);
	j->gpu_milli = MODEL_MILLI;
	if (g <= 1 || u < 0.3) {
		if (unit(s) < 0.4)
			j->gpu_milli = 250 * (1 + (int)(mix_rng(s) % 3)); /* a quarter to three */
		return;
	}
	int sizes[] = {1, 2, 4, 8};
	int k = (int)(mix_rng(s) % 4);
	while (k > 0 && sizes[k] > g)
		k--;
	j->tasks_per_node = sizes[k];
	if (sizes[k] == g && g >= 8 && unit(s) < 0.15)
		j->nodes = 2;
}

/* Poisson arrivals for t's jobs at the rate that asks for `load` of the
 * devices, drawn from *s. */
static void arrivals(struct sim_trace *t, double load, const struct sim_cluster *cl, uint64_t *s)
{
	double dev_s = 0;
	int n = 0;
	for (int i = 0; i < t->n; i++) {
		if (t->jobs[i].work_ms == SIM_FOREVER)
			continue;
		dev_s += (double)sim_job_milli(&t->jobs[i]) / MODEL_MILLI *
			 (double)t->jobs[i].work_ms / 1000;
		n++;
	}
	/* jobs per second that ask for `load` of the devices on average */
	double rate = n && cl->gpus && dev_s > 0 ? load * cl->gpus / (dev_s / n) : 1;
	double at = 0;
	for (int i = 0; i < t->n; i++) {
		at += -log(1 - unit(s)) / rate;
		t->jobs[i].submit_ms = llround(at * 1000);
	}
}

void sim_trace_sample(struct sim_trace *t, int n, uint64_t seed)
{
	uint64_t s = seed * 0xd1342543de82ef95ULL + 11;
	struct sim_job *jobs = xcalloc((size_t)n + 1, sizeof(*jobs));
	for (int i = 0; i < n && t->n; i++)
		jobs[i] = t->jobs[mix_rng(&s) % (uint64_t)t->n];
	free(t->jobs);
	t->jobs = jobs;
	t->n = t->n ? n : 0;
	t->alloc = (size_t)n + 1;
}

void sim_trace_retime(struct sim_trace *t, double load, const struct sim_cluster *cl, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 7;
	arrivals(t, load, cl, &s);
}

void sim_trace_synthetic(struct sim_trace *ret, int n, uint64_t seed, const struct sim_cluster *cl,
			 double load, bool heavy)
{
	memset(ret, 0, sizeof(*ret));
	ret->timed = true;
	snprintf(ret->source, sizeof(ret->source), "synthetic");
	static const char *const queues[] = {"research", "prod", "interns"};
	for (size_t q = 0; q < ARRAY_SIZE(queues); q++)
		sim_intern(&ret->queues, &ret->nqueues, queues[q]);
	sim_intern(&ret->classes, &ret->nclasses, "prod");
	sim_intern(&ret->classes, &ret->nclasses, "normal");
	sim_intern(&ret->classes, &ret->nclasses, "batch");
	/* shapes follow the nodes: a job is cut for a node drawn by its devices */
	int *gnodes = xcalloc((size_t)cl->n + 1, sizeof(int));
	int ng = 0;
	for (int i = 0; i < cl->n; i++)
		if (cl->nodes[i].gpus)
			gnodes[ng++] = i;
	uint64_t s = seed * 0x2545f4914f6cdd1dULL + 1;
	for (int i = 0; i < n; i++) {
		struct sim_job *j = new_job(ret);
		j->line = i + 1;
		/* log-normal run time: median 40 minutes, at most a day; heavy:
		 * a research cluster's, median 30 minutes, sigma 2, at most 30 days */
		double z = sqrt(-2 * log(1 - unit(&s))) * cos(2 * M_PI * unit(&s));
		j->work_ms =
			heavy ? MIN(30 * 86400000LL, MAX(60000, llround(1800e3 * exp(2.0 * z))))
			      : MIN(86400000LL, MAX(60000, llround(2400e3 * exp(1.0 * z))));
		if (ng) {
			/* a device drawn at random: nodes are drawn by their share of devices */
			const struct sim_node *nd = &cl->nodes[gnodes[mix_rng(&s) % (uint64_t)ng]];
			for (int t = 0; t < 8 && nd->gpus == 1 && unit(&s) < 0.5; t++)
				nd = &cl->nodes[gnodes[mix_rng(&s) % (uint64_t)ng]];
			synth_shape(j, nd->gpus, &s);
			if (unit(&s) < 0.3)
				add_type(ret, j, nd->model);
		}
		j->cpu_milli = 2000;
		j->queue = (int)(mix_rng(&s) % 3);
		j->cls = j->queue == 1 ? 0 : j->queue == 0 ? 1 : 2;
		j->time_limit_s = unit(&s) < 0.7 ? (j->work_ms / 1000) * 2 + 600 : 0;
	}
	free(gnodes);
	/* arrivals: Poisson, at the rate that asks for `load` of the devices */
	arrivals(ret, load, cl, &s);
}

/* ---- the request mix ------------------------------------------------------------------- */

struct shape_count {
	struct sched_mix_item item;
	const int *types; /* indices into the trace's types */
	int count;
};

static int cmp_count(const void *a, const void *b)
{
	const struct shape_count *x = a, *y = b;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if (x->item.milli != y->item.milli)
		return x->item.milli < y->item.milli ? -1 : 1;
	if (x->item.devices != y->item.devices)
		return x->item.devices < y->item.devices ? -1 : 1;
	if (x->item.cpus != y->item.cpus)
		return x->item.cpus < y->item.cpus ? -1 : 1;
	if (x->item.ngpu_types != y->item.ngpu_types)
		return x->item.ngpu_types < y->item.ngpu_types ? -1 : 1;
	for (int t = 0; t < x->item.ngpu_types; t++)
		if (x->types[t] != y->types[t])
			return x->types[t] < y->types[t] ? -1 : 1;
	return 0;
}

int sim_trace_mix(const struct sim_trace *tr, double cover, struct sched_mix_item **ret)
{
	struct shape_count *sc = NULL;
	size_t alloc = 0;
	int n = 0, total = 0;
	for (int i = 0; i < tr->n; i++) {
		const struct sim_job *j = &tr->jobs[i];
		if (j->nodes != 1 || j->gpu_milli == 0)
			continue;
		struct sched_mix_item it =
			sched_mix_item_of(j->tasks_per_node, j->gpu_milli,
					  j->tasks_per_node * j->cpu_milli, j->mem_mib);
		it.ngpu_types = j->ntypes;
		const int *types = j->ntypes ? &tr->type_refs[j->types_off] : NULL;
		int k;
		for (k = 0; k < n; k++)
			if (sc[k].item.milli == it.milli && sc[k].item.devices == it.devices &&
			    sc[k].item.cpus == it.cpus && sc[k].item.mem_mib == it.mem_mib &&
			    sc[k].item.ngpu_types == it.ngpu_types &&
			    (!it.ngpu_types ||
			     memcmp(sc[k].types, types, sizeof(int) * (size_t)it.ngpu_types) == 0))
				break;
		if (k == n) {
			xgrow(&sc, &alloc, (size_t)n + 1, sizeof(*sc));
			sc[n++] = (struct shape_count){it, types, 0};
		}
		sc[k].count++;
		total++;
	}
	if (n) /* qsort may not be given NULL */
		qsort(sc, (size_t)n, sizeof(*sc), cmp_count);
	int keep = 0, covered = 0, names = 0;
	while (keep < n && (keep == 0 || covered < cover * total)) {
		names += sc[keep].item.ngpu_types;
		covered += sc[keep++].count;
	}
	/* one allocation: the items, then their lists of model names (the
	 * names themselves are the trace's) */
	size_t items = sizeof(struct sched_mix_item) * ((size_t)keep + 1);
	struct sched_mix_item *mix = xcalloc(1, items + sizeof(char *) * ((size_t)names + 1));
	const char **name = (const char **)((char *)mix + items);
	for (int i = 0; i < keep; i++) {
		mix[i] = sc[i].item;
		mix[i].p = (double)sc[i].count / covered;
		if (mix[i].ngpu_types) {
			for (int t = 0; t < mix[i].ngpu_types; t++)
				name[t] = tr->types[sc[i].types[t]];
			mix[i].gpu_types = name;
			name += mix[i].ngpu_types;
		}
	}
	free(sc);
	*ret = mix;
	return keep;
}

void sim_trace_estimate_limits(struct sim_trace *t, uint64_t seed)
{
	static const int64_t modal[] = {300,   600,   900,   1800,   3600,   7200,   14400, 28800,
					43200, 64800, 86400, 172800, 259200, 432000, 604800};
	const int nmodal = (int)ARRAY_SIZE(modal);
	uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 0x7f4a7c159e3779b9ULL;
	for (int i = 0; i < t->n; i++) {
		struct sim_job *j = &t->jobs[i];
		if (j->work_ms == SIM_FOREVER) {
			j->time_limit_s = 0;
			continue;
		}
		if (unit(&s) < 0.15) {
			j->time_limit_s = modal[nmodal - 1];
			continue;
		}
		double want = (double)j->work_ms / 1000 * (1 + 19 * unit(&s));
		int k = 0;
		while (k < nmodal - 1 && (double)modal[k] < want)
			k++;
		j->time_limit_s = modal[k];
	}
}
