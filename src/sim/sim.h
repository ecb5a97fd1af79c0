/*
 * sim: a discrete-event simulator that drives the production scheduler
 * (src/sched) with recorded traces and a virtual clock. It never has its own
 * copy of a policy: a policy is written once, measured here on real traces at
 * full scale, and run in the server unchanged.
 *
 * This header starts with the readers of cluster descriptions; they check
 * every row and report the file, line and column of the first bad one.
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#include "model/model.h"
#include "sched/sched.h"

/* Limits on trace input. */
#define SIM_MAX_LINE (64 * 1024)
#define SIM_MAX_NODES 200000
#define SIM_MAX_FIELDS 64

struct sim_node {
	char name[MODEL_NAME_MAX];
	char model[MODEL_NAME_MAX]; /* "" for a CPU-only node */
	int gpus;
	int cpus;	   /* whole CPUs */
	int64_t cpu_milli; /* CPUs in thousandths (the openb lists give them so) */
	int64_t mem_mib;   /* 0: not given */
	double tflops;	   /* from the catalogue, 0 when unknown */
	int64_t gpu_mem_mib;
	char topology[MODEL_TOPO_MAX];
	/* its labels (canonical, gpu=MODEL beneath those its row gives) and
	 * fault domain, as a node's agent reports them */
	char labels[MODEL_LABELS_MAX];
	char domain[MODEL_TOPO_MAX];
};

struct sim_cluster {
	struct sim_node *nodes;
	int n;
	int gpus;
};

/* Reads a node list. The format is known by its header:
 *   gpu_model,gpu_capacity_num,cpu_num,node_name   (Alibaba spot-gpu 2026)
 *   sn,cpu_milli,memory_mib,gpu,model              (Alibaba openb 2023)
 *   name,model,gpus,cpus[,mem_mib,topology,labels,domain] (tenk's; labels
 *   "tier=top;fabric=ib", domain "dc1/row3/rack07")
 *   name,model,gpus,cpus,mem_mib,topology          (tenk's own)
 * Model names are matched to the catalogue ("A100-SXM4-80GB" -> A100-80GB);
 * unknown ones are kept as they are. The openb lists keep their own names
 * (V100M16, V100M32, G2, ...), which their pods' gpu_spec refers to. */
int sim_cluster_load(const char *path, const struct catalogue *cat, struct sim_cluster *ret,
		     struct tk_error *err);
void sim_cluster_release(struct sim_cluster *c);

/* ---- CSV, for every trace reader ---- */

struct sim_csv {
	const char *path;
	void *file;
	char *line;
	int lineno;
	int nfields;
	char *fields[SIM_MAX_FIELDS];
	int header_n;
	char *header[SIM_MAX_FIELDS];
};

/* Opens a CSV file and reads its header. */
int sim_csv_open(struct sim_csv *c, const char *path, struct tk_error *err);
/* Reads the next row: 1, 0 at the end, or < 0 with err naming file:line. */
int sim_csv_next(struct sim_csv *c, struct tk_error *err);
/* The index of a header column, or -1. */
int sim_csv_column(const struct sim_csv *c, const char *name);
/* Field `col` of the current row as an integer within [min, max]; the error
 * names file, line and column. */
int sim_csv_int(struct sim_csv *c, int col, int64_t min, int64_t max, int64_t *ret,
		struct tk_error *err);
int sim_csv_num(struct sim_csv *c, int col, double min, double max, double *ret,
		struct tk_error *err);
void sim_csv_close(struct sim_csv *c);

/* ---- job traces ---- */

#define SIM_FOREVER INT64_MAX
#define SIM_MAX_JOBS 10000000

struct sim_job {
	int64_t submit_ms;
	int64_t work_ms; /* run time to completion; SIM_FOREVER: runs to the end */
	int nodes;
	int tasks_per_node;
	int gpu_milli;	      /* per task; < 1000 shares one device */
	int cpu_milli;	      /* per task */
	int64_t mem_mib;      /* per node */
	int64_t time_limit_s; /* 0: none */
	int ntypes;
	int types_off; /* acceptable models: trace->type_refs[types_off ...] */
	int queue;     /* index into trace->queues */
	int cls;       /* index into trace->classes; -1: the default class */
	int line;      /* its line in the trace, for messages */
	/* tenk's format: its pools ("top;general"), --spread and --within,
	 * indices into the trace's words; -1: none */
	int pool, spread, within;
};

struct sim_trace {
	struct sim_job *jobs;
	int n;
	size_t alloc;
	char **queues; /* names, in order of first appearance */
	int nqueues;
	char **classes;
	int nclasses;
	char **types; /* distinct model names */
	int ntypes;
	char **words; /* distinct pools, spread and within texts */
	int nwords;
	int *type_refs; /* per job: indices into types */
	size_t nrefs, refs_alloc;
	bool timed;	 /* has submission times and run times */
	char source[32]; /* "openb", "openb-untimed", "tenk", "synthetic" */
};

/* Reads a job trace. The format is known by its header:
 *   name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
 *     creation_time,deletion_time,scheduled_time      (Alibaba openb 2023)
 *   name,cpu_milli,memory_mib,num_gpu,gpu_milli       (openb, untimed: only
 *                                                     for --experiment fgd)
 *   id,submit_s,run_s,nodes,tasks_per_node,gpus_per_task,cpus_per_task,
 *     mem_mib,gpu_types,queue,class,time_limit_s      (tenk's job history:
 *                                                     what `tenk history` writes)
 * openb pods are single-node jobs; a pod's run time is deletion_time minus
 * scheduled_time (minus creation_time when it never was scheduled); its qos
 * names its queue. Every row is checked; the first bad one stops the load with
 * file, line and column. */
int sim_trace_load(const char *path, struct sim_trace *ret, struct tk_error *err);
/* A synthetic stream of n jobs for a cluster: Poisson arrivals at a rate that
 * keeps about `load` of the devices asked for, a mix of fractions, whole
 * devices and multi-node gangs, log-normal run times, three queues. */
/* Time limits as users give them (after Tsafrir, Etsion and Feitelson,
 * "Modeling User Runtime Estimates", 2005): one of a few round values
 * (5 minutes to 7 days), over the run time by a factor from 1 to 20, and
 * for 15% of the jobs the longest there is; a job longer than its limit
 * is cut there, as users' are. */
void sim_trace_estimate_limits(struct sim_trace *t, uint64_t seed);
/* heavy: run times of a research cluster (log-normal, median 30 minutes,
 * sigma 2, at most 30 days) instead of median 40 minutes, sigma 1, at most
 * a day. */
void sim_trace_synthetic(struct sim_trace *ret, int n, uint64_t seed, const struct sim_cluster *cl,
			 double load, bool heavy);
/* New submission times for a trace's jobs, in their order: Poisson
 * arrivals at the rate that asks for `load` of the cluster's devices on
 * average (their shapes and run times as they are). */
void sim_trace_retime(struct sim_trace *t, double load, const struct sim_cluster *cl,
		      uint64_t seed);
/* Replaces a trace's jobs by n drawn from them at random (with
 * replacement, seeded), for a longer stream shaped like the trace; their
 * submission times are then to be drawn again (sim_trace_retime). */
void sim_trace_sample(struct sim_trace *t, int n, uint64_t seed);
void sim_trace_release(struct sim_trace *t);
/* Milli-devices a job asks for in all. */
int64_t sim_job_milli(const struct sim_job *j);
/* Interns a string into a list (returns its index). */
int sim_intern(char ***list, int *n, const char *s);

/* ---- the engine ---- */

struct sim_options {
	struct sched_config sched; /* classes, default class, fair-share half-life */
	struct sched_policy policy;
	const struct queue_spec *queues; /* quotas and weights; other queues get none */
	int nqueues;
	uint64_t seed;
	double mtbf_gpu_h;    /* mean time between failures of one device; 0: none */
	double repair_h;      /* how long a failed device is out */
	int64_t checkpoint_s; /* a job keeps its work at multiples of this; 0: never */
	/* checkpoint_auto: each job's interval is Young/Daly's sqrt(2 C M), M
	 * its own mean time between failures (mtbf_gpu_h over its devices);
	 * checkpoint_cost_ms (C): training time one checkpoint blocks;
	 * restart_cost_ms: restore and start again, at every attempt after the
	 * first */
	bool checkpoint_auto;
	int64_t checkpoint_cost_ms;
	int64_t restart_cost_ms;
	/* a preempted job saves its state in its grace period (tenk's SIGTERM
	 * and grace): it keeps all its work, and one checkpoint's cost counts
	 * as lost; without it, it keeps the work to its last checkpoint */
	bool checkpoint_on_preempt;
	/* after a failure, a job's next attempt: RESTART_AUTO in place for
	 * gangs of several nodes (the server's default), RESTART_IN_PLACE for
	 * every job, RESTART_REQUEUE none (back to the queue); each gang that
	 * restarts in place holds `spares` idle nodes like its own for it; the
	 * cluster's spare pool is sched.spare_pool ("spares" in config.json) */
	enum restart_mode restart;
	int spares;
	int64_t pass_interval_ms; /* passes at most this often; 0: at every event time */
	bool drop_unplaced;	  /* a job that does not start at once is dropped (FGD procedure) */
	const struct sched_mix_item *mix; /* for fractional placement; NULL: from the queue */
	int nmix;
	int64_t end_ms;	   /* stop here (virtual time); 0: when every job has ended */
	int series_points; /* points in the time series (0: 200) */
	bool keep_devices; /* record each job's devices (for --jobs) */
};

enum sim_job_state {
	SIM_DONE,	/* ran to completion */
	SIM_TIMEOUT,	/* stopped at its time limit */
	SIM_NEVER_FITS, /* asks for more than the cluster has: dropped at arrival */
	SIM_UNPLACED,	/* did not start when it arrived (with drop_unplaced) */
	SIM_UNFINISHED, /* still waiting or running when the simulation stopped */
};

struct sim_job_result {
	enum sim_job_state state;
	int64_t start_ms; /* first start; -1: never */
	int64_t end_ms;	  /* -1: did not end */
	int64_t wait_ms;  /* time pending, over every attempt */
	int attempts;
	char *devices; /* "node:0,1;node2:3" of the last attempt (keep_devices) */
};

struct sim_point {
	int64_t t_ms;
	double alloc;	/* allocated share of device capacity (fractions count) */
	double busy;	/* share of devices with anything on them */
	double frag;	/* fragmented share of free capacity (ATC'23 measure); -1: not sampled */
	double pending; /* jobs waiting */
	double running;
};

struct sim_stats {
	double mean, p50, p99;
};

struct sim_result {
	struct sim_job_result *jobs; /* per trace job */
	int n;
	int done, timeout, never_fits, unplaced, unfinished;
	struct sim_stats jct_s, wait_s;		 /* of the jobs that ended */
	int64_t makespan_ms;			 /* first submission to last end */
	int64_t end_ms;				 /* virtual time when it stopped */
	double alloc_mean, busy_mean, frag_mean; /* time-weighted over the makespan */
	/* time-weighted from the first submission to the last: the figure of a
	 * cluster that jobs keep arriving at, without the drain at the end */
	double alloc_arriving;
	double effective; /* device-time of kept work / device-time used */
	double device_h_used, device_h_lost;
	/* ... of device_h_lost, the periodic checkpoints' writing (the jobs'
	 * own choice; the rest is work thrown away, restores and idle spares) */
	double device_h_saving;
	int failures, preemptions, requeues;
	/* restarts in place; failed shares taken by a job's own spare, by the
	 * cluster's spare pool; device-hours held idle as spares (in used and
	 * lost) */
	int restarts_in_place, spare_swaps, pool_swaps;
	double device_h_spare;
	double *queue_share; /* per trace queue: share of device-time used */
	/* per pool of the configuration ("pools"), and for the nodes in none
	 * (pool_alloc[npools]): its devices, and the share of them held,
	 * time-weighted over the makespan */
	int npools;
	char pool_names[MODEL_MAX_POOLS][MODEL_NAME_MAX];
	int64_t pool_milli[MODEL_MAX_POOLS + 1];
	double pool_alloc[MODEL_MAX_POOLS + 1];
	double pool_alloc_arriving[MODEL_MAX_POOLS + 1]; /* from first submission to last */
	struct sim_point *series;
	int nseries;
	int64_t passes;
	double wall_s;
	int64_t total_milli; /* device capacity */
	/* where the free devices lie when the run stops: those wholly free,
	 * and the milli-devices left on those partly taken, by tenths of a
	 * device left (end_part_milli[k]: k * 100 up to k * 100 + 99 left) */
	int64_t end_whole_free;
	int64_t end_part_milli[10];
};

/* Runs a trace on a cluster through sched_pass with a virtual clock.
 * Deterministic for a given seed. */
int sim_run(const struct sim_cluster *cl, const struct sim_trace *tr, const struct sim_options *o,
	    struct sim_result *ret, struct tk_error *err);
void sim_result_release(struct sim_result *r);

/* The most common request shapes of a trace's device jobs, covering `cover`
 * of them (0..1): the mix fragmentation-aware placement plans for. */
int sim_trace_mix(const struct sim_trace *tr, double cover, struct sched_mix_item **ret);

/* ---- reports ---- */

struct strbuf;
void sim_report_table(const struct sim_result *r, const struct sim_trace *tr, FILE *f);
char *sim_report_json(const struct sim_result *r, const struct sim_trace *tr);
/* Utilization, allocation, fragmentation and queue length over time, as SVG. */
int sim_report_svg(const struct sim_result *r, const char *title, const char *path,
		   struct tk_error *err);
int sim_report_jobs_csv(const struct sim_result *r, const struct sim_trace *tr, const char *path,
			struct tk_error *err);
