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

#include <stdint.h>

#include "model/model.h"

/* Limits on trace input. */
#define SIM_MAX_LINE (64 * 1024)
#define SIM_MAX_NODES 200000
#define SIM_MAX_FIELDS 64

struct sim_node {
	char name[MODEL_NAME_MAX];
	char model[MODEL_NAME_MAX]; /* "" for a CPU-only node */
	int gpus;
	int cpus;	  /* whole CPUs */
	int64_t mem_mib;  /* 0: not given */
	double tflops;	  /* from the catalogue, 0 when unknown */
	int64_t gpu_mem_mib;
	char topology[MODEL_TOPO_MAX];
};

struct sim_cluster {
	struct sim_node *nodes;
	int n;
	int gpus;
};

/* Reads a node list. The format is known by its header:
 *   gpu_model,gpu_capacity_num,cpu_num,node_name   (Alibaba spot-gpu 2026)
 *   sn,cpu_milli,memory_mib,gpu,model              (Alibaba openb 2023)
 *   name,model,gpus,cpus,mem_mib,topology          (tenk's own)
 * Model names are matched to the catalogue ("A100-SXM4-80GB" -> A100-80GB);
 * unknown ones are kept as they are. */
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
