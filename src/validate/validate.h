/*
 * validate: proving nodes and the cluster healthy, layer by layer (DESIGN.md
 * section 6). So far: `tenk bench`, the collective benchmarks over coll.
 */
#pragma once

#include <jansson.h>

#include "coll/coll.h"
#include "util/util.h"

/* tenk bench COLLECTIVE [OPTIONS]; argv[0] is "bench". */
int bench_main(int argc, char **argv);
/* tenk validate [OPTIONS]; argv[0] is "validate". */
int validate_main(int argc, char **argv);

enum vverdict { V_PASS, V_FAIL, V_SKIP };

/* One check: its figure, the threshold it is held to, and a verdict. */
struct vcheck {
	char layer[16];
	char name[32];
	char unit[16];
	double figure;
	double threshold;
	char threshold_from[48]; /* "floor", "95% of the baseline", ...; "" when none */
	bool higher_is_better;
	enum vverdict verdict;
	char detail[320];
};

void vcheck_set(struct vcheck *c, const char *layer, const char *name, const char *unit,
		bool higher_is_better);
/* Holds the figure to a threshold; a failing figure fails the check. */
void vcheck_judge(struct vcheck *c, double threshold, const char *from);

int check_gpu_stack(struct vcheck *c);
int check_shm(struct vcheck *c, double min_mib);
int check_nofile(struct vcheck *c, double min);
int check_cpu_gemm(struct vcheck *c, int threads, int n, int reps);
int check_gpu_gemm(struct vcheck *c);
int check_host_memory(struct vcheck *c, int threads, size_t mib);
int check_allreduce_local(struct vcheck *c, int ranks, size_t bytes, int port);
int check_storage(struct vcheck *w, struct vcheck *r, const char *dir, int writers, size_t mib);
int check_workload(struct vcheck *c, int ranks, int port);
