/*
 * sched: the scheduling decision as a pure function.
 *
 *   sched_pass(snapshot, now, policy) -> decisions
 *
 * The server builds a snapshot (nodes and what is free on them, the running
 * allocations, the pending jobs, the priority classes and the queues), calls
 * sched_pass, and applies the decisions; the simulator does the same with a
 * virtual clock. sched reads no clock, does no I/O and keeps nothing between
 * calls: the same input gives the same decisions, whatever order the nodes
 * are listed in (every tie is broken by a name).
 *
 * The policy (DESIGN.md section 4):
 *  - order: priority class first; within a class, fair share between queues
 *    (a queue's running and recently used accelerators against its weight),
 *    then submission time;
 *  - gangs: a job starts on all its nodes at once or not at all;
 *  - quotas: a queue may use its guaranteed accelerators and borrow idle ones
 *    up to its borrow limit; a lender whose jobs wait reclaims what it lent
 *    by preemption;
 *  - preemption: a job of a class that may preempt takes the resources of
 *    preemptible jobs of lower classes, choosing the cheapest victims (lowest
 *    class, least work lost since their last checkpoint), and only when the
 *    victims make room for its whole gang;
 *  - windows: nodes kept from a time on (maintenance, or some users) take
 *    no other job that would still run then;
 *  - backfill: the first job of each class that cannot start gets a
 *    reservation computed from the running jobs' time limits; later jobs
 *    start ahead of it only if they do not delay it;
 *  - placement: fewest switches spanned, then best fit (fewest devices left,
 *    so whole nodes stay whole), one accelerator model per gang unless mixed
 *    types are allowed, devices in one NVLink domain; fractions of a device
 *    go where they fragment the cluster least for the request sizes in the
 *    queue (fragmentation gradient descent, ATC'23).
 *
 * Cost: a pass over 100,000 pending jobs stays cheap because a shape of
 * request that failed to fit is not tried again in the same pass (what is
 * free only shrinks during a pass), a job whose shape's last job waited
 * without the full path waits the same while nothing changed, and a
 * capacity index rejects most impossible requests in constant time. A
 * caller that keeps its jobs between passes also keeps what follows from
 * the node list (sched_cluster) and its jobs' shapes (sched_shapes); the
 * pass then reads a few bytes of each waiting job. Decisions are the same
 * with or without them.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

/* ---- input ---------------------------------------------------------------------- */

struct sched_dev {
	const char *model; /* borrowed */
	int free_milli;	   /* 0..MODEL_MILLI */
	int nvlink_domain;
	int64_t mem_mib;
	double tflops;
};

struct sched_node {
	const char *name;     /* borrowed; unique */
	const char *topology; /* "spine1/leaf07": switches above it, nearest last; may be NULL */
	const char *labels;   /* "fabric=ib,tier=top" (node_labels_parse's form); may be NULL */
	const char *taints;   /* "dev,inference" (model_names_parse's form); may be NULL */
	uint64_t pools;	      /* sched_config_pool_node(): its pools' bits; 0: in none */
	const char *domain;   /* fault domain, "dc1/row3/rack07": widest first; may be NULL */
	bool schedulable;     /* up and not drained */
	int cpus_total;
	int cpus_free;
	int64_t mem_total_mib;
	int64_t mem_free_mib;
	int ndev;
	const struct sched_dev *devs; /* borrowed, ndev entries */
};

struct sched_class {
	const char *name;
	int priority;	  /* higher goes first; within +-SCHED_MAX_PRIORITY */
	bool may_preempt; /* its jobs may preempt lower classes */
	bool preemptible; /* its jobs may be preempted */
	/* a level of a class ordered by least attained service, as
	 * sched_classes_expand makes them: every level of one class has the
	 * same family (> 0) and its number (0 first). A level goes before the
	 * levels after it, and its jobs may preempt running jobs of a later
	 * level of their family, whatever may_preempt and preemptible say.
	 * Family 0: a class of its own. */
	int las_family;
	int las_level;
	int64_t las_min_run_ms; /* a running job of the family works this long before a
				 * job of an earlier level may preempt it */
	/* ... and is preempted for it only while it would lose at most this
	 * much (sched_run_loss_ms()), or asked for it (preempt_any); < 0: no
	 * bound. A job that never commits a checkpoint and has run longer is
	 * left alone: the levels order the waiting jobs only. */
	int64_t las_max_loss_ms;
};

/* A queue's limit in one more dimension than its accelerators: what it
 * may hold at most (its quota and what it may borrow), of one model's
 * accelerators (milli), of weighted accelerator units (milli units: an
 * accelerator of weight w is w units), of CPUs, or of memory (MiB). A job
 * that would pass any of them waits, the dimension named; one that may
 * use several models is kept to those within their limits. */
enum sched_qdim_kind { SCHED_QDIM_MODEL, SCHED_QDIM_UNITS, SCHED_QDIM_CPUS, SCHED_QDIM_MEM };
struct sched_qdim {
	enum sched_qdim_kind kind;
	const char *model; /* SCHED_QDIM_MODEL's */
	int64_t quota;	   /* for people: what it is guaranteed */
	int64_t limit;	   /* the most it may hold; quota plus what it may borrow */
};

struct sched_queue {
	const char *name;
	int64_t quota_milli;  /* guaranteed accelerators, milli units; -1: no quota, no limit */
	int64_t borrow_milli; /* how far beyond its quota it may borrow; -1: no limit */
	double weight;	      /* share against other queues, > 0 */
	double recent_milli;  /* recent use: decayed milli-accelerator-seconds / half-life
			       * (with weighted shares, milli units) */
	int ndims;
	const struct sched_qdim *dims; /* borrowed; ndims of them */
};

/* An accelerator model's weight: how many units one is (an H100 1, by
 * default its peak rate against an H100's); a model not listed weighs 1. */
struct sched_model_weight {
	const char *model;
	double weight;
};

struct sched_job {
	/* what a pass reads of every job comes first, together */
	int64_t id;
	int64_t submit_ms;
	int64_t time_limit_s; /* 0: none */
	int cls;	      /* index into snapshot->classes */
	int queue;	      /* index into snapshot->queues */
	int shape_id;	      /* with snapshot->shapes: sched_shapes_add() of this job */
	int nodes;
	int tasks_per_node;
	int gpu_milli; /* per task; < MODEL_MILLI is a fraction of one device */
	int cpus_per_task;
	int ngpu_types;
	int64_t mem_mib;	      /* per node */
	const char *const *gpu_types; /* acceptable models; none: any */
	int64_t gpu_mem_mib;	      /* each device at least this much memory; 0: any */
	double gpu_tflops;	      /* each device at least this fast; 0: any */
	int max_switches;	      /* span at most this many switches; 0: no limit */
	const char *constraint;	      /* on nodes whose labels satisfy it; NULL: any */
	const char *tolerate;	      /* the taints it tolerates ("dev,inference"); NULL: none */
	uint64_t pools;		      /* on nodes in one of these pools (sched_config_pool_job);
				       * 0: any node */
	const char *pool;	      /* the pools it named, for people; NULL: none */
	/* fault domains: its nodes all in one domain of the first within_depth
	 * components of their paths (--within rack), and at most spread_max
	 * in any domain of spread_depth components (--spread rack:N); 0: no
	 * such rule. A path shorter than the depth is its whole path; nodes
	 * without one share the domain "". spread, within: the request's words,
	 * for people */
	int within_depth, spread_depth, spread_max;
	const char *within, *spread;
	bool mixed_types; /* may mix accelerator models */
	/* the windows (sched_window.bit) whose nodes it may use as their own:
	 * not part of its shape, as its queue is not */
	uint32_t windows;
	uint64_t shape; /* sched_job_shape() of it, kept by the caller; 0: worked out */
	/* where it may go (Slurm's -w, -x): only these nodes (none: any), never
	 * those; names not in the snapshot are passed over */
	int nnodelist;
	const char *const *nodelist;
	int nexclude;
	const char *const *exclude;
	/* alone on each of its nodes (Slurm's --exclusive): it starts only on
	 * nodes with nothing on them and holds them whole while it runs; a
	 * running one's sched_assign is the whole node */
	bool exclusive;
};

/* A window in which some nodes are kept (tenk reserve): from start_ms on,
 * only the jobs it is for run there (a maintenance window is for none: the
 * caller also takes its nodes out of service then, and drops the window at
 * its end). Before its start, a job that is not its own goes there only
 * when its time limit ends by the start, or, without one, while the start
 * is further off than policy->maint_lookahead_ms. */
struct sched_window {
	const char *name; /* for people */
	int64_t start_ms;
	int bit; /* jobs with 1 << bit in sched_job.windows are its own; -1: none */
	int nnodes;
	const int *nodes; /* indices into snapshot->nodes; borrowed */
};

/* Does window w keep a job off its nodes at now_ms: one with this time
 * limit (0: none) and these windows of its own (sched_job.windows), under
 * that lookahead (sched_policy.maint_lookahead_ms)? */
bool sched_window_in_way(const struct sched_window *w, int64_t now_ms, int64_t lookahead_ms,
			 int64_t time_limit_s, uint32_t own);

/* One node's share of an allocation. */
struct sched_assign {
	int node; /* index into snapshot->nodes */
	int ndev;
	int devs[MODEL_MAX_ACCELS];
	int milli; /* share of each device: MODEL_MILLI for whole devices */
	int cpus;
	int64_t mem_mib;
	/* an exclusive job's: nothing else goes on the node while it holds it
	 * (a running one's assign also holds all of the node's resources) */
	bool alone;
};

/* Something that holds resources now: a running job, or one being stopped. */
struct sched_running {
	int64_t id;
	int cls;
	int queue;
	int64_t start_ms;
	int64_t time_limit_s;	    /* 0: none */
	int64_t last_checkpoint_ms; /* 0: none */
	/* when the work its newest committed checkpoint of this attempt holds
	 * was saved (0: none): what a restart would resume from */
	int64_t last_commit_ms;
	int64_t restore_ms; /* what a restart would cost it, restoring (0: unknown) */
	bool preempt_any;   /* it may be preempted whatever it loses (--preemptible-any) */
	bool stopping;	    /* already told to stop: not a victim again */
	int64_t held_for;   /* preempted for this pending job (0: none) */
	int nnodes;
	const struct sched_assign *nodes; /* borrowed */
};

/* One kind of request in the mix that fractional placement guards against
 * fragmenting for: `devices` whole devices, or one device's `milli` share
 * (devices 0), and `cpus` and `mem_mib` of the node, with probability p;
 * on devices of the models named in gpu_types only (borrowed; ngpu_types
 * 0: any model). */
struct sched_mix_item {
	int milli;
	int devices;
	int cpus;
	int64_t mem_mib;
	double p;
	const char *const *gpu_types;
	int ngpu_types;
};

/* The mix item for one node's share of a single-node request: tasks of
 * gpu_milli each (whole devices above MODEL_MILLI, else one device's share),
 * `cpus` and `mem_mib` in all; types and probability left to the caller. */
struct sched_mix_item sched_mix_item_of(int tasks_per_node, int gpu_milli, int cpus,
					int64_t mem_mib);

/* What a pass reads of every waiting job, for a caller that keeps it in one
 * array beside the jobs (sched_key_of()): a pass over a million waiting
 * jobs then reads one array from end to end, not a million jobs wherever
 * they lie, and reads a job itself only when it is placed or says why it
 * waits. */
struct sched_key {
	int64_t id;
	int64_t submit_ms;
	int64_t time_limit_s;
	int cls;
	int queue;
	int shape_id;
	uint32_t windows;
};

struct sched_key sched_key_of(const struct sched_job *j);

struct sched_snapshot {
	const struct sched_node *nodes;
	int nnodes;
	const struct sched_job *const *jobs; /* pending; best in class order, then submission */
	int njobs;
	const struct sched_running *running;
	int nrunning;
	const struct sched_class *classes;
	int nclasses;
	const struct sched_queue *queues;
	int nqueues;
	/* the request mix for fractional placement; NULL: taken from the pending jobs */
	const struct sched_mix_item *mix;
	int nmix;
	/* what the pass would otherwise work out from the node list; NULL: worked out */
	const struct sched_cluster *cluster;
	/* the caller's shape table: each job's shape_id says what it asks for,
	 * and the pass takes that on trust instead of comparing every job's
	 * request with the others'; NULL: compared */
	const struct sched_shapes *shapes;
	/* with shapes: keys[i] is sched_key_of(jobs[i]), taken on trust like
	 * the shape ids; NULL: read from the jobs */
	const struct sched_key *keys;
	/* memory the pass keeps for the next (sched_keep_new); NULL: its own */
	struct sched_keep *keep;
	/* within each level of a class ordered by least attained service,
	 * the jobs are in the order they are to be tried (by the Gittins
	 * index): the pass keeps it; false: by submission, as every other
	 * class */
	bool given_order;
	/* the windows that have not ended (tenk reserve) */
	const struct sched_window *windows;
	int nwindows;
	/* the models' weights, for units (sched_qdim) and weighted shares */
	const struct sched_model_weight *weights;
	int nweights;
};

#define SCHED_DEFAULT_MAX_PREEMPTIONS 128

struct sched_policy {
	int max_starts; /* jobs started per pass at most; 0: no limit */
	/* jobs preempted per pass at most (0: SCHED_DEFAULT_MAX_PREEMPTIONS,
	 * negative: no limit). Victims take their grace period to exit anyway;
	 * the cap bounds how much one pass disrupts, and the next pass goes on. */
	int max_preemptions;
	bool no_backfill; /* strict order: nothing overtakes a waiting job of its class */
	/* greedy: a job that cannot start holds no reservation, so any later job
	 * that fits starts (what Kubernetes' default scheduler does). With it, one
	 * pass over jobs in order places each exactly as if they came one by one. */
	bool no_reservations;
	/* single-node jobs compare the fraction policy's scores before device
	 * speed (by default a faster model wins, as it finishes the job sooner);
	 * for clusters whose models' speeds are unknown or do not matter */
	bool score_before_speed;
	/* score single-node jobs of every kind (whole devices and CPU work too,
	 * not only fractions) by the fraction policy on up to 256 of the
	 * tightest candidate nodes: denser packing, at the cost of scoring them
	 * for every placement */
	bool score_every_node;
	bool no_preemption;
	/* A class's first waiting job whose start time is unknown (running
	 * jobs in its way have no time limit) holds idle resources for itself
	 * only once it has waited this long (since submission), on the nodes
	 * likeliest to free first; before, it holds nothing and later jobs use
	 * what is free, as they would with no reservation at all. 0: never
	 * (what nobody can tell the end of holds nothing idle); negative: at
	 * once. Reservations from time limits are held at once (EASY). */
	int64_t resv_patience_ms;
	/* a job without a time limit goes on a window's nodes only while the
	 * window starts further off than this (sched_window) */
	int64_t maint_lookahead_ms;
	/* fair share counts what a queue holds in weighted units (the
	 * snapshot's weights), not accelerators */
	bool weighted_share;
	enum sched_frac_policy {
		SCHED_FRAC_FGD,	    /* least fragmentation for the queued size mix */
		SCHED_FRAC_BESTFIT, /* the device with least room left */
		SCHED_FRAC_PACK,    /* the most used node, then its most used device */
		/* the ATC'23 paper's other baselines, for comparison (tenk sim):
		 * a node at random (a hash of job and node, so that a pass stays
		 * a function of its input); the most aligned node (Tetris's dot
		 * product of the request and what is free, each as a share of the
		 * node); the node with the most tasks of the same request */
		SCHED_FRAC_RANDOM,
		SCHED_FRAC_DOTPROD,
		SCHED_FRAC_CLUSTER,
	} frac;
};

/* ---- least attained service ------------------------------------------------------ */

/*
 * A class may order its jobs by the accelerator time they have received
 * (Tiresias' discretized two-dimensional least attained service, NSDI '19):
 * service is accelerators held times seconds run, over every attempt; levels
 * cut it at ascending limits, and a job of a lower level goes first and may
 * preempt running jobs of a higher level of its class, which go back to
 * wait and resume from their checkpoints. Within a level, jobs keep their
 * submission order (and fair share between queues). No run time needs to be
 * known: short jobs finish in the first level while long ones sink.
 *
 * The starvation guard, a bound on the tail: a waiting job that has waited
 * `max_stretch` times as long as it has run so far (every attempt) goes
 * back to the first level, its service counted from zero again. Against thrashing: a running job is
 * preempted for an earlier level only once its attempt has run `min_run_s`, so that every restore
 * it pays buys at least that much work.
 *
 * The pass sees each level as a class of its own (sched_classes_expand);
 * the caller keeps each job's service, and gives a job of class c at level
 * k the class first[c] + k, pending and running alike.
 */
#define SCHED_LAS_MAX_LEVELS 8
#define SCHED_MAX_PRIORITY 1000000

struct sched_las {
	int nlevels;				      /* 0 or 1: first in, first out */
	double limit_gpu_s[SCHED_LAS_MAX_LEVELS - 1]; /* level k ends at limit_gpu_s[k] */
	double max_stretch;			      /* 0: never */
	double min_run_s;			      /* 0: preempted at once */
	double max_loss_s; /* preempted only while it loses at most this; < 0: no bound */
	bool gittins;	   /* within a level, by the Gittins index (below) where known */
};

/* What stopping r at now would cost it: its work since its attempt's last
 * committed checkpoint (or its start) and its restore, in milliseconds of
 * its devices' time (every device of it loses the same span). */
int64_t sched_run_loss_ms(const struct sched_running *r, int64_t now);

/* The last moment an earlier level of its family may take running job r
 * under las's bound (its loss grows until its next checkpoint): INT64_MAX
 * when there is no bound or r may be taken whatever it loses. A moment of
 * sched_las_next_change() past it changes nothing a pass can do. */
int64_t sched_las_takeable_until(const struct sched_las *las, const struct sched_running *r);

/* A family's rule for its earlier levels taking its later ones, in
 * milliseconds: a running job works min_run_ms before it may be taken, and
 * is taken only while it would lose at most max_loss_ms (< 0: no bound).
 * Both 0 for a class not ordered by service. */
struct sched_las_rule {
	int64_t min_run_ms;
	int64_t max_loss_ms;
};
struct sched_las_rule sched_las_rule_of(const struct sched_las *las);
/* May an earlier level of its family stop running job r at now under
 * rule? Once r has run the minimum (*min_left_ms: how long until it has; may
 * be NULL), while it loses no more than the bound or asked to be taken
 * whatever it loses. The pass's preemption and `tenk show` both ask it. */
bool sched_las_may_take(struct sched_las_rule rule, const struct sched_running *r, int64_t now,
			int64_t *min_left_ms);

/* The classes a pass is given: each class of in[] whose las[] has two or
 * more levels becomes that many classes in a row (level 0 first), with its
 * name, priority and flags, las_family its index + 1 and las_level the
 * level; the others are copied. ret[] holds MODEL_MAX_CLASSES; ret_first[c]
 * is the index of class c's first level. las may be NULL (all FIFO).
 * Returns how many classes ret holds, or -E2BIG when they would be more
 * than MODEL_MAX_CLASSES (ret is then unspecified). */
int sched_classes_expand(const struct sched_class *in, const struct sched_las *las, int n,
			 struct sched_class *ret, int *ret_first);
/* The level of a job that has received service_gpu_s accelerator-seconds;
 * 0 for a class that is not ordered by service. */
int sched_las_level(const struct sched_las *las, double service_gpu_s);
/* While jobs of its class wait, the next moment a running job of a class
 * ordered by service may change what a pass can do with it: when it
 * reaches its next level, or, past the first level, when its attempt has
 * run the class's min_run_s. service_gpu_s: what it has had by now_ms;
 * milli: what it holds; started_ms: its attempt's start. INT64_MAX: none. */
int64_t sched_las_next_change(const struct sched_las *las, double service_gpu_s, int64_t milli,
			      int64_t started_ms, int64_t now_ms);
/* Is a waiting job, which has run ran_ms so far (every attempt) and waited
 * waited_ms since its last, due to go back to the first level? (Never when
 * it has not run.) */
bool sched_las_promoted(const struct sched_las *las, int64_t ran_ms, int64_t waited_ms);
/* ---- the Gittins index ---- */

/*
 * Within a level, a class ordered by service may order its waiting jobs by
 * the Gittins index of their attained service a under the distribution of
 * the total service S that jobs of their kind received (Tiresias' other
 * variant; the kind: class and queue, from the cluster's own history):
 *
 *   G(a) = max over d > 0 of  P(S - a <= d | S > a) / E[min(S - a, d) | S > a]
 *
 * the chance that it finishes within d more service, per unit of service
 * spent on it: the highest goes first. A kind whose jobs are mostly short
 * ranks above one whose jobs are long; a job that has outlived most of its
 * kind ranks lower (or higher, where its end draws nearer, as under a
 * uniform distribution). With no distribution (history too thin), jobs keep
 * their submission order within their level: the levels alone order.
 */
#define SCHED_GITTINS_POINTS 64
/* a kind's distribution is used from this many finished jobs on */
#define SCHED_GITTINS_MIN_SAMPLES 30
/* and holds its newest this many */
#define SCHED_GITTINS_KEEP 2048

/* G(a) over n samples of S, ascending, per unit of service, for d of at
 * least quantum (a job once started gets at least that much: over samples
 * alone, the nearest sample past a would decide); 0 where no sample
 * exceeds a (the job outlived its whole kind). O(n). */
double sched_gittins_exact(const double *sorted, int n, double a, double quantum);

/* A distribution's index at npoints attained services (at[0] = 0, then the
 * samples' quantiles, the greatest last): G(a) is read at the largest
 * at[k] <= a (0 past the greatest). */
struct sched_gittins {
	int npoints; /* 0: none */
	double at[SCHED_GITTINS_POINTS];
	double index[SCHED_GITTINS_POINTS];
};
/* Builds g from samples (sorted in place). */
void sched_gittins_build(struct sched_gittins *g, double *samples, int n, double quantum);
double sched_gittins_index(const struct sched_gittins *g, double a);

/* The history of finished jobs' service by kind: each job's sample counts
 * for its class and queue, and for its class; a queue with too few falls
 * back to its class. queue: any number the caller gives each queue. (By
 * accelerators asked too was tried and left: bench/sim/resv's stream, whose
 * run times do not depend on the accelerators, then ordered wide jobs last
 * at no gain, design-notes.md.) */
struct sched_las_history;
struct sched_las_history *sched_las_history_new(void);
void sched_las_history_free(struct sched_las_history *h);
void sched_las_history_add(struct sched_las_history *h, int cls, uint32_t queue,
			   double service_gpu_s);
/* The index of a job of that kind with service a, per accelerator-second,
 * its quantum the class's minimum run (at least a minute) of one
 * accelerator; false (and 0) where even its class's history is too thin or
 * las does not order by it. A kind's table is built at its first call, and
 * again once an eighth of its samples are new. */
bool sched_las_history_index(struct sched_las_history *h, const struct sched_las *las, int cls,
			     uint32_t queue, double a, double *ret);
/* A waiting job's place in its class's order under least attained
 * service: its level, its Gittins index (< 0: none), and where it stood
 * (submission order). */
struct sched_las_place {
	int level;
	double index;
	int pos;
};
/* Sorts places by level, then index (highest first, those without one
 * last), then pos: the order in which the server and the simulator give a
 * class's waiting jobs to the pass (sched_snapshot.given_order). */
void sched_las_places_sort(struct sched_las_place *p, int n);
/* How many finished jobs of class cls it holds (up to its keep). */
int sched_las_history_count(const struct sched_las_history *h, int cls);

/* The classes of a configuration as a pass is given them (levels
 * expanded): ret holds MODEL_MAX_CLASSES, ret_las[c] and ret_first[c] are
 * configured class c's levels and first pass class. Names are borrowed
 * from cfg. Returns how many classes ret holds, or -E2BIG. */
int sched_classes_of_config(const struct sched_config *cfg, struct sched_class *ret,
			    struct sched_las *ret_las, int *ret_first);
/* The policy a configuration asks for (its reservation patience and
 * placement), the rest zero. */
void sched_policy_of_config(const struct sched_config *cfg, struct sched_policy *ret);

/* ---- output --------------------------------------------------------------------- */

struct sched_start {
	int job; /* index into snapshot->jobs */
	int nnodes;
	struct sched_assign *nodes; /* node rank order; owned by the decisions */
};

struct sched_preempt {
	int64_t victim; /* a running id */
	int job;	/* the pending job it makes room for */
};

enum sched_wait_reason {
	SCHED_WAIT_RESOURCES,  /* fits the cluster, not now */
	SCHED_WAIT_NEVER_FITS, /* more than the schedulable nodes could ever hold */
	SCHED_WAIT_QUOTA,      /* its queue is at its quota plus borrow limit */
	SCHED_WAIT_RESERVED,   /* would delay a job with a reservation */
	SCHED_WAIT_PREEMPTING, /* waits for jobs preempted for it to exit */
	SCHED_WAIT_SWITCHES,   /* no placement within --switches */
	SCHED_WAIT_PASS_LIMIT, /* the pass stopped at policy->max_starts */
	SCHED_WAIT_NODES,      /* only nodes down or drained could ever hold it */
	SCHED_WAIT_MAX
};

struct sched_wait {
	int job;
	enum sched_wait_reason reason;
	int same_as;	  /* -1, or the index of a job whose detail says why */
	int64_t until_ms; /* for a reservation: when it is expected to start; 0: unknown */
	char *detail;	  /* one line a user understands (NULL with same_as); owned */
};

/* What a class's first waiting job holds for itself: the parts of its
 * placement that are free now (none while it holds nothing). */
struct sched_resv {
	int job;	  /* index into snapshot->jobs */
	int64_t until_ms; /* when it is expected to start; INT64_MAX: unknown */
	int nnodes;
	struct sched_assign *nodes; /* owned by the decisions */
};

struct sched_decisions {
	struct sched_start *starts;
	int nstarts;
	struct sched_preempt *preempts;
	int npreempts;
	struct sched_wait *waits; /* every pending job that did not start */
	int nwaits;
	size_t starts_alloc, preempts_alloc, waits_alloc;
	struct sched_resv *resvs; /* the reservations it held, in the order made */
	int nresvs;
	/* what the pass cost, for metrics */
	int placements_tried;
	int shape_cache_hits;
	struct sched_keep *keep; /* the snapshot's, where waits came from */
};

/* Decides which jobs start where and what is preempted. Fills *ret, which
 * the caller releases with sched_decisions_release; returns 0, or -EINVAL for
 * an inconsistent snapshot (with *ret empty). */
int sched_pass(const struct sched_snapshot *snap, int64_t now_ms, const struct sched_policy *policy,
	       struct sched_decisions *ret);
/* Releases what a pass decided: before its snapshot's keep is freed. */
void sched_decisions_release(struct sched_decisions *d);

/* What a pass works out from the node list alone: device models, the order
 * of names, topology groups. A caller whose nodes stay the same from pass to
 * pass builds it once and puts it in sched_snapshot.cluster; the pass then
 * skips that work and decides exactly as without it. It copies what it needs
 * of `nodes`. It must describe the snapshot's nodes: same order, names,
 * topology, device counts and models; sched_cluster_matches checks that
 * (the pass itself only checks the counts). Rebuild it when nodes come,
 * go or change. */
struct sched_cluster;
struct sched_cluster *sched_cluster_new(const struct sched_node *nodes, int n);
bool sched_cluster_matches(const struct sched_cluster *c, const struct sched_node *nodes, int n);
void sched_cluster_free(struct sched_cluster *c);

/* Memory a caller keeps from pass to pass in sched_snapshot.keep: the
 * pass takes its large working arrays (a record per waiting job, the free
 * views and lists of every node, the victims in cost order) from it instead
 * of from fresh pages, which cost the kernel a fault each (on a virtual
 * machine, as much as 10 us: a pass at a million waiting jobs asks for some
 * 20,000 pages), and the array of its decisions' waits, which goes back
 * with sched_decisions_release. It holds what the passes ask for: a block
 * no pass took for 16 passes goes back to the C library. One pass at a
 * time; decisions are the same with it or without. */
struct sched_keep;
struct sched_keep *sched_keep_new(void);
void sched_keep_free(struct sched_keep *k);
size_t sched_keep_bytes(const struct sched_keep *k); /* what it holds */

/* Shapes (what a job asks for: everything but identity, class, queue and
 * time) filed by the caller. A caller whose jobs wait from pass to pass adds
 * each job's shape once, when the job starts to wait, and drops it when the
 * job stops waiting; a pass then reads 28 bytes of a waiting job instead of
 * its whole request. The ids are small and dense; an id whose last job was
 * dropped is given to the next new shape. */
struct sched_shapes;
struct sched_shapes *sched_shapes_new(void);
void sched_shapes_free(struct sched_shapes *t);
/* The id of j's shape (the same for every job that asks for the same),
 * holding one reference; -EINVAL if what j asks for is invalid. */
int sched_shapes_add(struct sched_shapes *t, const struct sched_job *j);
/* Gives back the reference sched_shapes_add took. */
void sched_shapes_drop(struct sched_shapes *t, int id);
/* Shapes with a reference, for tests and metrics. */
int sched_shapes_live(const struct sched_shapes *t);

/* A hash of what a job asks for (its shape: everything but identity, class,
 * queue and time). Callers that keep jobs across passes store it in
 * sched_job.shape so a pass need not hash 100,000 jobs again. */
uint64_t sched_job_shape(const struct sched_job *j);

/* Exponential decay of a usage figure over dt_s seconds with the given
 * half-life: what fair share uses to forget old usage. */
double sched_decay(double value, double dt_s, double half_life_s);
/* Fair share's memory of a queue (DESIGN.md section 4), kept by the caller
 * between passes. A queue's usage is the decayed integral of what it held
 * (milli-accelerator-seconds). sched_usage_age brings it forward by dt_s
 * seconds during which the queue held use_milli (nothing changes when dt_s
 * <= 0); sched_usage_recent is what sched_queue.recent_milli wants of it:
 * the decayed mean rate, usage x ln 2 / half-life. The server and the
 * simulator both keep usage this way. */
double sched_usage_age(double usage, int64_t use_milli, double dt_s, double half_life_s);
double sched_usage_recent(double usage, double half_life_s);
/* Could these nodes, each of them up and empty, ever hold job j (a pass of
 * it alone places it)? A request that no set of the nodes that exist could
 * hold, drained or down ones included, can never start. */
bool sched_could_ever_hold(const struct sched_node *nodes, int n, const struct sched_job *j);
/* What job j needs, as a waiting job's reason says it: "2 nodes with 8
 * accelerators (H100|H200), 16 CPUs each", into sb (a struct strbuf). */
struct strbuf;
void sched_describe_need(const struct sched_job *j, struct strbuf *sb);
/* The number of switches a set of nodes spans (union of their topology paths
 * up to the lowest common switch); nodes without topology count as one
 * switch. Exposed for tests and the simulator. */
int sched_switches_spanned(const struct sched_node *nodes, const int *idx, int n);
/* The length of a fault-domain path's first depth components (the whole
 * path when it has fewer): two nodes share a domain of that depth when
 * these prefixes are equal. NULL is "". */
size_t sched_domain_prefix(const char *domain, int depth);
/* Do two nodes' paths share their domain of that depth? */
bool sched_domain_same(const char *a, const char *b, int depth);
/* j's --spread and --within (the request's texts; NULL: none) as depths of
 * c's fault-domain levels; a level c does not name is no rule (the server
 * refuses those at submit). */
void sched_job_domains(struct sched_job *j, const struct sched_config *c, const char *spread,
		       const char *within);
/* ---- restarts in place and spare nodes (replace.c) ---- */

/* What one node's share of a gang needs of a node that takes its place:
 * ndev devices with milli free each, of the share's model (NULL or "":
 * any) or, where the job names models, one of those (models, nmodels);
 * dev_mem_mib each at least (0: any); cpus and mem_mib of the node; the
 * whole node (alone, for --exclusive); never a node the job excludes or,
 * where it names nodes (nodelist), one it does not. With max_switches
 * (--switches), the gang's other nodes (with[0..nwith), node indices) and
 * the one chosen span at most that many switches, the fewest first. */
struct sched_share {
	int ndev;
	int milli;
	const char *model;
	const char *const *models;
	int nmodels;
	int64_t dev_mem_mib;
	int cpus;
	int64_t mem_mib;
	bool alone;
	const char *const *exclude;
	int nexclude;
	const char *const *nodelist;
	int nnodelist;
	int max_switches;
	const int *with;
	int nwith;
	const char *constraint; /* the job's --constraint; NULL: any node */
	const char *tolerate;	/* the taints it tolerates; NULL: none */
	uint64_t pools;		/* as sched_job's: on nodes of these pools; 0: any */
	/* as sched_job's, judged against the nodes of `with` */
	int within_depth, spread_depth, spread_max;
};

/* Can node n (schedulable: taking work) hold share w on the very devices of
 * `on` (a node the gang keeps, or one of its spares, given back first)? */
bool sched_share_free(const struct sched_node *n, const struct sched_share *w,
		      const struct sched_assign *on);
/* Share w on node n: the first devices that fit into *as (as->node not
 * set), and the number of fitting devices left beside them (a best fit
 * leaves fewest), or -1 where it does not fit or n takes no work. */
/* Is node n in one of the pools of mask (0: any node is)? A node whose mask
 * is 0 is in no pool. */
static inline bool sched_pools_meet(const struct sched_node *n, uint64_t mask)
{
	return !mask || ((n->pools ? n->pools : MODEL_POOL_NONE) & mask);
}
int sched_share_fit(const struct sched_node *n, const struct sched_share *w,
		    struct sched_assign *as);
/* The best fit for w among nodes i with ok[i] (with max_switches, the
 * fewest switches spanned first; then the fewest fitting devices left,
 * then the first); its index, or -1; the share in *ret. */
int sched_share_best(const struct sched_node *nodes, int n, const bool *ok,
		     const struct sched_share *w, struct sched_assign *ret);

enum sched_from {
	SCHED_FROM_NONE,  /* no node can take its place */
	SCHED_FROM_SPARE, /* one of the job's own spares (*spare_used) */
	SCHED_FROM_POOL,  /* a node of the cluster's spare pool */
	SCHED_FROM_FREE,  /* any other node with room */
};

/* The node that takes the place of a failed share w of a gang: the first
 * of the job's own spares (spares[0..nspares), already given back, so that
 * their nodes count them free) that still holds w on its devices, else the
 * best fit among the pool's nodes (pool[i]; NULL: no pool), else among the
 * others; never a node with out[i] (in the attempt, taken by another of
 * its shares, one of its spares). ok is scratch of n. The share in *ret. */
enum sched_from sched_replace(const struct sched_node *nodes, int n, const bool *pool,
			      const bool *out, const struct sched_share *w,
			      const struct sched_assign *spares, int nspares, int *spare_used,
			      bool *ok, struct sched_assign *ret);

/* Keeps the cluster's spare pool at cfg's sizes ("spares": {"H100": 4}):
 * pool[i] says node i is in it. A pool node that takes no work, is not
 * empty, or is beyond its model's number leaves; empty nodes of a model
 * short of spares join (a node's model: its first device's). A node with
 * lent[i] (NULL: none) is lent to preemptible work until a restart needs
 * it: it stays as if empty. Returns how many changed, their indices in
 * changed[0..nchanged_max). */
int sched_pool_refill(const struct sched_node *nodes, int n, const struct sched_config *cfg,
		      bool *pool, const bool *lent, int *changed, int nchanged_max);

/* The fragmentation of one node (ATC'23): the expected free milli-devices
 * that a request drawn from the mix could not use there, given each device's
 * free share and model (NULL: every kind may use every device) and the
 * node's free CPUs and memory. A device of a model a kind cannot use is
 * all fragment to it, and so is every device of a node without the CPUs or
 * the memory the kind needs. */
double sched_node_fragmentation(int ndev, const int *free_milli, const char *const *dev_model,
				int cpus_free, int64_t mem_free_mib,
				const struct sched_mix_item *mix, int nmix);
