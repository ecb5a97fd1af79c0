/*
 * sched: the scheduling decision as a pure function.
 *
 *   sched_pass(snapshot, now, policy) -> decisions
 *
 * The server builds a snapshot of nodes (what is free) and pending jobs (in
 * queue order), calls sched_pass, and applies the decisions; the simulator
 * does the same with a virtual clock. sched reads no clock, does no I/O and
 * keeps no state between calls, so the same input always gives the same
 * decisions, whatever order the nodes are listed in.
 *
 * Version 0 policy: first come, first served. Jobs are taken in queue order;
 * each is placed all at once (every node of a gang, or none) on whole devices
 * by best fit (the nodes left with the fewest free devices, so that whole
 * nodes stay free for whole-node jobs); the first job that does not fit now
 * blocks the ones behind it. A job that could never fit on the schedulable
 * nodes, even empty, waits without blocking anyone, with a reason.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

struct sched_dev {
	const char *model; /* borrowed */
	int free_milli;	   /* 0..MODEL_MILLI */
	int nvlink_domain;
};

struct sched_node {
	const char *name; /* borrowed; unique; breaks every tie */
	bool schedulable; /* up and not drained */
	int cpus_total;
	int cpus_free;
	int64_t mem_total_mib;
	int64_t mem_free_mib;
	int ndev;
	const struct sched_dev *devs; /* borrowed, ndev entries */
};

struct sched_job {
	int64_t id;
	int nodes;
	int tasks_per_node;
	int gpu_milli; /* per task; < MODEL_MILLI is a fraction of one device */
	int cpus_per_task;
	int64_t mem_mib; /* per node */
	int ngpu_types;
	const char *const *gpu_types; /* borrowed; none means any model */
	int64_t time_limit_s;
	int64_t submit_ms;
};

struct sched_snapshot {
	const struct sched_node *nodes;
	int nnodes;
	const struct sched_job *const *jobs; /* pending, in queue order */
	int njobs;
};

struct sched_policy {
	int max_starts; /* jobs started per pass at most; 0: no limit */
};

/* One node's share of a placement. */
struct sched_assign {
	int node; /* index into snapshot->nodes */
	int ndev;
	int devs[MODEL_MAX_ACCELS];
	int milli; /* share of each device: MODEL_MILLI for whole devices */
};

struct sched_start {
	int job; /* index into snapshot->jobs */
	int nnodes;
	struct sched_assign *nodes; /* node rank order; owned by the decisions */
};

enum sched_wait_reason {
	SCHED_WAIT_RESOURCES,	/* would fit the cluster, but not now */
	SCHED_WAIT_NEVER_FITS,	/* more than the schedulable nodes could ever hold */
	SCHED_WAIT_PASS_LIMIT,	/* the pass stopped at policy->max_starts */
	SCHED_WAIT_MAX
};

struct sched_wait {
	int job; /* index into snapshot->jobs */
	enum sched_wait_reason reason;
	char detail[MODEL_REASON_MAX]; /* one line a user understands */
};

/*
 * What a pass decided. Jobs from index `unexamined` on were not looked at:
 * they wait behind job `blocker` (an index, or -1 when the pass stopped for
 * its own limit).
 */
struct sched_decisions {
	struct sched_start *starts;
	int nstarts;
	struct sched_wait *waits;
	int nwaits;
	int unexamined;
	int blocker;
	size_t starts_alloc;
	size_t waits_alloc;
};

/* Decides which jobs start where. Fills *ret, which the caller releases with
 * sched_decisions_release; returns 0, or -EINVAL for an inconsistent
 * snapshot. */
int sched_pass(const struct sched_snapshot *snap, int64_t now_ms, const struct sched_policy *policy,
	       struct sched_decisions *ret);
void sched_decisions_release(struct sched_decisions *d);
