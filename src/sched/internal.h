/* Private to src/sched: the state of one pass, shared by pass.c (the pass
 * itself, its order, quotas and reservations), preempt.c, backfill.c,
 * wait.c and place.c (where a job goes). Names every file of it exports
 * to the others begin sched__ (libuv's uv__); sched.h's begin sched_. */
#pragma once

#include "sched.h"

#include <limits.h>

/* What is free, as arrays indexed by node (and by device: node n's devices
 * are dev[dev_off[n] ...]). The pass keeps several: what is free now, a
 * scratch copy for what-ifs, and the nodes' totals. */
struct view {
	int *cpus;
	int64_t *mem;
	int *dev;
	int *alone; /* exclusive jobs holding the node: nothing else goes there */
};

struct cand {
	int node;
	int64_t spare;
	int cpu_spare;
	int dev;   /* fractions: the device chosen */
	int group; /* topology group at the level being tried */
	int wdom;  /* the job's --within domain, --spread domain (ids per placement) */
	int sdom;
};

/* What sched__node_fits found for one node and one request shape, while the node's
 * version is `ver` (24 bytes: a shape's table stays in the cache). */
struct node_memo {
	int key; /* the node + 1; 0: an empty slot */
	uint32_t ver;
	int64_t spare;
	int cpu_spare;
	int16_t dev;
	int8_t model; /* sched__memo_new() refuses more models than this holds */
	bool fits;
};

/* What a single-node shape's gather and choice under one model found in
 * `free`, while that model's nodes were as of `ver` (pass.model_ver). */
struct model_choice {
	uint64_t ver; /* 0: nothing remembered */
	int nc;	      /* the candidates gathered */
	int node;     /* the one chosen (when nc > 0) */
	int64_t spare;
};

struct memo_table {
	struct node_memo *e;
	int cap; /* a power of two */
	int n;
	struct model_choice *choice; /* per model */
};

/* Node scores remembered take at most this much memory in a pass. */
#define MEMO_MAX_BYTES (64u << 20)

/* Defines `static void name(T *a, int n, int k, void *arg)`: moves the k
 * least of a[0..n) by CMP(x, y, arg) (a total order) to the front, in no
 * particular order (quickselect: linear, where sorting all n is not). */
#define DEFINE_SELECT(name, T, CMP)                                                                \
	static void name(T *a, int n, int k, void *arg)                                            \
	{                                                                                          \
		int lo = 0, hi = n - 1;                                                            \
		while (lo < hi && k > 0 && k < n) {                                                \
			T pivot = a[lo + (hi - lo) / 2];                                           \
			int i = lo, j = hi;                                                        \
			while (i <= j) {                                                           \
				while (CMP(&a[i], &pivot, arg) < 0)                                \
					i++;                                                       \
				while (CMP(&a[j], &pivot, arg) > 0)                                \
					j--;                                                       \
				if (i <= j) {                                                      \
					T t = a[i];                                                \
					a[i++] = a[j];                                             \
					a[j--] = t;                                                \
				}                                                                  \
			}                                                                          \
			if (k - 1 <= j)                                                            \
				hi = j;                                                            \
			else if (k - 1 >= i)                                                       \
				lo = i;                                                            \
			else                                                                       \
				break;                                                             \
		}                                                                                  \
	}

/* A request, as placement sees it. */
struct req {
	const struct sched_job *j;
	int whole;	/* whole devices per node; 0 for fractions and CPU-only */
	int frac;	/* milli of one device, for a fraction; else 0 */
	int cpus;	/* per node */
	int64_t mem;	/* per node */
	bool *model_ok; /* per model index: acceptable (types, capability) */
	/* per node: it may go there (the job's node list and exclusions);
	 * NULL: anywhere. Kept in model_ok's allocation, past the models. */
	const bool *node_ok;
	/* windows (sched_window) keep it off some nodes: node_ok is then the
	 * job's own (the pass's scratch), shape_node_ok its shape's */
	bool windowed;
	const bool *shape_node_ok;
	/* its queue's limits keep it to some of its shape's models: model_ok
	 * is then the job's own (st->quota_ok), shape_model_ok its shape's */
	bool quota_models;
	bool *shape_model_ok;
	int quota_dim; /* the first of its queue's dims that keeps a model from it */
	bool owns_models;
	struct memo_table *memo; /* for this shape in `free`; NULL: none */
};

struct placement {
	int nnodes;
	struct sched_assign *nodes; /* room for the pass's largest gang */
	int switches;
	int64_t spare;
};

/* Why a placement failed. */
struct place_fail {
	int could;    /* nodes that could hold a share (under the best model) */
	int switches; /* fewest switches a placement needed, when over the limit */
};

struct pass {
	const struct sched_snapshot *snap;
	bool any_node; /* sched__could_ever_anywhere: unschedulable nodes count */
	int any_taint; /* some node has a taint; -1: not known yet */
	/* each constraint met so far: which nodes satisfy it (bool per node),
	 * by its text; judged once a pass, whatever the jobs' shapes */
	struct tk_map cons;
	bool cons_used;
	struct sched_keep *keep; /* where the large arrays come from (keep.c) */
	const struct sched_policy *policy;
	int64_t now;
	int nn;
	int *dev_off;
	int ndev;
	struct view free, scratch, total;
	/* device models: distinct names, sorted; each device's model index */
	const char **models;
	int nmodels;
	int *dev_model;
	/* topology: each node's path split into levels, by group id per level */
	int depth;
	int *topo_group; /* [level * nn + node]: group id of the path prefix of length level+1 */
	int *ngroups;	 /* per level */
	const char **group_name; /* [level][group] via group_name_off */
	int *group_name_off;
	/* the capacity index: cnt[m * (MODEL_MAX_ACCELS + 1) + k] = schedulable nodes
	 * with exactly k whole free devices of model m, in `free` */
	int *cap;
	int *node_whole; /* [n * nmodels + m]: whole free devices of model m on n */
	/* the request mix for fractions (pass.c works it out from the shapes) */
	struct sched_mix_item *mix;
	int nmix;
	unsigned char *mix_ok; /* [item * nmodels + model]: the kind may use it; NULL: any */
	int *model_scratch;    /* one int per model */
	int *total_hist;       /* sched__could_ever(): nodes with >= k devices per model */
	int *model_scratch2;
	/* candidate lists over `free`, cell x = node * nmodels + model: nodes by
	 * their count of whole free devices of a model (wb), and by the most room
	 * on one of its devices, in steps of 50 milli (fb) */
	int *wb_head, *wb_next, *wb_prev;
	int *fb_head, *fb_next, *fb_prev;
	int *node_room;
	int *cb_head, *cb_next, *cb_prev; /* nodes by (accelerators, free CPUs) */
	int *cpu_key;
	int max_cpus;
	int cpu_buckets;  /* free CPUs are listed in this many buckets of equal width */
	int *model_nodes; /* nodes with devices of model m: [off[m], off[m+1]) */
	bool borrowed;	  /* the statics belong to snap->cluster */
	bool delta;	  /* scratch is free plus changes on the touched nodes */
	int touch_gen;
	int *touch_mark; /* == touch_gen: touched */
	int *touched;
	int ntouched;
	int *model_nodes_off;
	size_t memo_bytes;   /* what the memo tables hold */
	double *frag_before; /* per node: its fragmentation in `free`, when valid */
	bool *frag_valid;
	uint32_t *node_ver; /* per node: changes whenever `free` changes on it */
	/* per model: changes whenever `free` changes on a node that has it */
	uint64_t *model_ver;
	int max_ndev;
	double *model_tflops; /* per model: its devices' rate */
	int *model_exclusive; /* per model: some waiting job can use it only (set by cluster.c) */
	/* SCHED_FRAC_CLUSTER: per node, the running tasks whose request is
	 * same_milli of same_ndev devices (worked out for one request at a time) */
	int *same_count;
	int same_milli, same_ndev;
	/* scratch for placement */
	struct cand *cands;
	int *name_rank; /* each node's place in name order: ties go by it */
	int *order;	/* node indices */
};

/* ---- shared by placement's files ------------------------------------------------------ */

/* The room lists' buckets: the roomiest device's free share in steps of 50
 * milli. */
#define FRAC_BUCKET(milli) ((milli) / 50) /* 0..20 */
#define FRAC_BUCKETS 21

/* A scored single-node request looks at the tightest candidates (by free
 * devices, room on a device, or free CPUs) until it has this many, so a
 * placement costs the same on ten thousand nodes as on a thousand. */
#define SCORED_CANDIDATES 256

/* Does where j's nodes are, together, matter (--switches, --spread,
 * --within)? Then only a real placement tells whether it fits. */
static inline bool sched__grouped(const struct sched_job *j)
{
	return j->max_switches || j->spread_depth || j->within_depth;
}

static inline enum sched_frac_policy policy_of(const struct pass *p)
{
	return p->policy ? p->policy->frac : SCHED_FRAC_FGD;
}

/* Whether mix kind k may use a device of `model` (any, when it names none). */
bool sched__mix_item_allows(const struct sched_mix_item *k, const char *model);

/* The paper's baselines (random, dot product, clustering) are studies, not
 * production policies: they look at every node, as the paper's do. */
static inline int scored_candidates(const struct pass *p)
{
	enum sched_frac_policy f = policy_of(p);
	return f == SCHED_FRAC_RANDOM || f == SCHED_FRAC_DOTPROD || f == SCHED_FRAC_CLUSTER
		       ? INT_MAX
		       : SCORED_CANDIDATES;
}

/* With policy.score_every_node, single-node requests of every kind are
 * scored by the policy on each candidate node (fragmentation, or best fit
 * over CPUs and devices together); otherwise only fractions are, and whole
 * devices go by tightness. Gangs always go by tightness. */
static inline bool scored(const struct pass *p, const struct req *rq)
{
	return rq->j->nodes == 1 && policy_of(p) != SCHED_FRAC_PACK && p->policy &&
	       p->policy->score_every_node;
}

/* CPU work goes to nodes without accelerators first, then to the fewest free
 * CPUs that suffice: nodes are listed by (accelerators, free CPUs). */
static inline int cpu_bucket(const struct pass *p, int cpus)
{
	return (int)((int64_t)cpus * p->cpu_buckets / ((int64_t)p->max_cpus + 1));
}

/* cluster.c: strcmp for qsort of an array of names */
int sched__cmp_str(const void *a, const void *b);
/* topology.c */
void sched__topo_init(struct pass *p);
/* lists.c: builds the index and the lists from `free` */
void sched__lists_init(struct pass *p);
/* fit.c */
/* Is node n as free in v as when empty (for an exclusive job)? */
bool sched__node_empty(const struct pass *p, const struct view *v, int n);
/* Can node n hold one node's share of rq on `model` (-1: any) in v? Fills c
 * with what it would leave; remembered per node for the request's shape. */
struct memo_table *sched__memo_new(struct pass *p); /* NULL when the pass's budget is spent */
void sched__memo_free(struct pass *p, struct memo_table *t);

/* The pass's large arrays (keep.c): taken from k's blocks, or allocated
 * (k NULL: always); sched__keep_zalloc's zeroed. Each goes back with sched__keep_release
 * to the same k (NULL: freed). */
void *sched__keep_alloc(struct sched_keep *k, size_t bytes);
void *sched__keep_zalloc(struct sched_keep *k, size_t n, size_t size);
void sched__keep_release(struct sched_keep *k, void *p);
/* Grows *pp (holding *alloc elements of size `size`, from k) to hold at
 * least need, as xgrow does, keeping what it held. */
void sched__keep_grow(struct sched_keep *k, void *pp, size_t *alloc, size_t need, size_t size);
/* At the end of a pass: blocks no pass took for a while go back. */
void sched__keep_pass_end(struct sched_keep *k);
bool sched__node_fits(struct pass *p, const struct req *rq, const struct view *v, int n, int model,
		      struct cand *c);
/* Picks rq->whole free whole devices on node n, preferring one NVLink domain. */
void sched__pick_devices(const struct pass *p, const struct req *rq, const struct view *v, int n,
			 int model, struct sched_assign *a);

/* place.c */
void sched__place_init(struct pass *p);
void sched__place_release(struct pass *p);
/* Fills rq for job j. With model_ok NULL the acceptable models are worked out
 * (and freed by sched__req_release); else that array (for the same shape) is used. */
void sched__req_init(struct pass *p, const struct sched_job *j, struct req *rq, bool *model_ok);
/* Does a node of the pass carry a taint (every job then filters nodes)? */
bool sched__any_taint(struct pass *p);
/* Frees what the pass kept of constraints (sched__req_init fills it). */
void sched__constraints_release(struct pass *p);
/* Frees a constraint cache's entries (the map stays, empty). */
void sched__cons_clear(struct tk_map *m);
/* The constraint cache a caller's cluster keeps across passes, and the
 * count of its entries (the caller clears it past a bound). */
struct tk_map *sched__cluster_cons(const struct sched_cluster *c, int **count);
void sched__req_release(struct req *rq);
/* Finds the best placement of rq on view v. Returns true and fills out, or
 * false and fills why. */
bool sched__place(struct pass *p, const struct req *rq, const struct view *v, struct placement *out,
		  struct place_fail *why);
/* Does placing rq score candidate nodes (fragmentation or best fit), so
 * that remembering the scores pays? */
bool sched__place_scores(const struct pass *p, const struct req *rq);
/* Takes (sign -1) or gives back (sign +1) an allocation's resources in v. */
void sched__view_apply(struct pass *p, struct view *v, const struct sched_assign *a, int n,
		       int sign);
/* Checks that the capacity index and the candidate lists describe `free`
 * (invariant 3 of pass.h); aborts when they do not. Only in debug builds. */
#ifdef TENK_DEBUG
void assert_place_consistent(const struct pass *p);
#endif
/* Keeps the capacity index in step with `free` on node n. */
void sched__cap_update_node(struct pass *p, int n);
/* Is there a schedulable node with a device of model m that has at least
 * milli free in `free`? */
bool sched__room_for_fraction(const struct pass *p, int m, int milli);
/* A quick, optimistic test: could rq fit in `free` at all? */
bool sched__cap_maybe_fits(struct pass *p, const struct req *rq);
void sched__view_copy(struct pass *p, struct view *dst, const struct view *src);
/* `scratch` as a copy of `free` plus changes on a few nodes: after
 * sched__scratch_from_free, every change goes through sched__scratch_apply (or is marked
 * with sched__scratch_touch), and placements on scratch read the untouched nodes
 * through free's candidate lists instead of scanning every node. */
void sched__scratch_from_free(struct pass *p);
void sched__scratch_apply(struct pass *p, const struct sched_assign *a, int n, int sign);
void sched__scratch_touch(struct pass *p, int node);

/* How many nodes could hold one node's share of a request, per accelerator
 * model, in a view that changes a node at a time: what makes preemption and
 * reservations cost one placement, not one per victim. */
struct fitcount {
	const struct req *rq;
	int ngroups;
	int *count;   /* per group */
	uint8_t *fit; /* [node * ngroups + group] */
};
void sched__fit_init(struct pass *p, struct fitcount *fc, const struct req *rq,
		     const struct view *v);
/* Could rq ever fit, on the schedulable nodes as if empty? */
bool sched__could_ever(struct pass *p, const struct req *rq);
/* Could it, counting the nodes that are down or drained as well? */
bool sched__could_ever_anywhere(struct pass *p, const struct req *rq);
/* Could node n hold one node's share of rq on `model` (-1: any) in v? */
bool sched__node_can_public(const struct pass *p, const struct req *rq, const struct view *v, int n,
			    int model);
void sched__fit_update(struct pass *p, struct fitcount *fc, const struct view *v, int node);
bool sched__fit_enough(const struct fitcount *fc);
void sched__fit_release(struct pass *p, struct fitcount *fc);

/* shapes.c: what a job asks for, compared and checked */
bool sched__shape_same(const struct sched_job *a, const struct sched_job *b);
bool sched__shape_valid(const struct sched_job *j);
/* The request filed under id in t, or NULL if none is; ids run below
 * sched__shapes_ids(t). */
const struct sched_job *sched__shapes_get(const struct sched_shapes *t, int id);
int sched__shapes_ids(const struct sched_shapes *t);
