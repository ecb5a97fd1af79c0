/* Private to src/validate (and its unit tests): the checks, their verdicts,
 * a run's layers, and what nodes of a cluster run tell each other. */
#pragma once

#include <jansson.h>

#include "coll/coll.h"
#include "model/model.h"
#include "util/util.h"
#include "validate.h"

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
	double per_watt; /* the figure per watt drawn meanwhile (NVML); 0: not known */
	bool broken;	 /* a call failed or a result was wrong: not a matter of speed */
};

void validate__vcheck_set(struct vcheck *c, const char *layer, const char *name, const char *unit,
			  bool higher_is_better);
/* Holds the figure to a threshold; a failing figure fails the check. */
void validate__vcheck_judge(struct vcheck *c, double threshold, const char *from);

/* What the GPU software stack is, each "none" where absent. */
struct gpu_stack {
	char driver[80];
	char cuda[16];
	char nccl[32];
	int gpus;
};
void validate__gpu_stack_probe(struct gpu_stack *st);
int validate__check_gpu_stack(struct vcheck *c);
int validate__check_shm(struct vcheck *c, double min_mib);
int validate__check_nofile(struct vcheck *c, double min);
/* Inside an image (TENK_IMAGE, TENK_IMAGE_DIGEST from the agent, or from
 * tenk validate --image): which, for the record; false when on the host. */
bool validate__check_image(struct vcheck *c);
int validate__check_cpu_gemm(struct vcheck *c, int threads, int n, int reps);
/* gpu.c: every GPU of the node, through dlopen; "skipped: no GPU" without */
int validate__check_gpu_gemm(struct vcheck *c, bool quick);
int validate__check_gpu_copy(struct vcheck *c, bool quick);
int validate__check_nccl_in_node(struct vcheck *c, bool quick);
/* NCCL all-reduce over every GPU of every node of comm (one rank per node):
 * skipped on all when any node lacks GPUs or NCCL. Errors are comm's. */
int validate__check_nccl_across(struct vcheck *c, struct coll_comm *comm, bool quick,
				struct tk_error *err);
int validate__check_host_memory(struct vcheck *c, int threads, size_t mib);
int validate__check_allreduce_local(struct vcheck *c, int ranks, size_t bytes, int port);
int validate__check_storage(struct vcheck *w, struct vcheck *r, const char *dir, int writers,
			    size_t mib);
int validate__check_workload(struct vcheck *c, int ranks, int port);
/* tenk's own reference: the workload's training on one rank (checks.c). */
void validate__reference_own(struct reference *r);
/* tenk's own on GPU 0 where there is one and cuBLAS (gpu.c): 1, where (in
 * where); 0: no GPU or no cuBLAS (why); -EIO: a call failed (why). */
int validate__reference_gpu(struct reference *r, char *where, size_t n);
/* The reference (reference.c): tenk's own (cmd NULL) or a site's command;
 * its record into *out where out is not NULL (to decref; {"error"} where
 * the command gave none). */
int validate__check_reference(struct vcheck *c, const char *cmd, json_t **out);

/* net.c: the network layer, from the node's fabric (validate__fabric:
 * sysfs, or TENK_SYSFS's tree). */
void validate__fabric(struct node_inventory *inv);
void validate__check_net_links(struct vcheck *c, const struct node_inventory *inv);
void validate__check_rdma(struct vcheck *c, const struct node_inventory *inv);
void validate__check_nccl_env(struct vcheck *c, const struct node_inventory *inv);
/* NCCL's log into a file of ours (NCCL_DEBUG=INFO), once per process,
 * before NCCL's first call, unless the environment sets NCCL_DEBUG; then
 * the transports the all-reduce between the nodes chose (nccl_ran: it
 * ran), judged as validate__nccl_transport_judge. */
void validate__nccl_log_start(void);
void validate__check_nccl_transport(struct vcheck *c, const struct node_inventory *inv,
				    bool nccl_ran);
void validate__nccl_transport_judge(struct vcheck *c, const struct nccl_log *l,
				    const struct node_inventory *inv);
void validate__check_net_mtu(struct vcheck *c);
/* the speed of the interface to the peers, and the slowest ACTIVE RDMA
 * port's rate: held to the peers' (cluster.c) */
void validate__check_net_speed(struct vcheck *c, const struct node_inventory *inv);
void validate__check_rdma_rate(struct vcheck *c, const struct node_inventory *inv);
/* RoCE's PFC and ECN at its notification and reaction points (the figure:
 * bit k for priority k): alike on the node's RoCE interfaces; skipped
 * where none says. */
void validate__check_roce_pfc(struct vcheck *c, const struct node_inventory *inv);
void validate__check_roce_ecn(struct vcheck *np, struct vcheck *rp,
			      const struct node_inventory *inv);
/* A roce_* figure for people: "PFC on priority 3", "ECN np off". */
void validate__qos_text(const char *check, double figure, char *out, size_t n);
/* The interface (and its address) the node reaches its peers by: the
 * route to MASTER_ADDR. 0, or -1 with none. */
int validate__peer_route(char *ifname, size_t n, char *addr, size_t an);
/* The packets and errors plus drops of interface ifname (this network
 * namespace's /proc/net/dev); dev: read. */
struct vnet_counters {
	bool dev;
	int64_t packets, faults;
};
void validate__net_counters(const char *ifname, struct vnet_counters *c);
/* The same from /proc/net/dev's text (changed: its lines cut). */
void validate__net_dev_parse(char *text, const char *ifname, struct vnet_counters *c);
/* Judged over the interconnect layer's traffic between nodes: the share
 * of TCP segments sent again to each peer (pct[i], -1: not measured; how
 * many in resent[i]; the peers' names), and the interface's errors with
 * drops; each over 0.1% fails. A link that sent fewer than
 * VRESENT_MIN segments again lost one burst at most (a queue that
 * overflowed once), too few in a short run to call it lossy. */
#define VRESENT_MIN 32
void validate__check_tcp_retransmits(struct vcheck *c, const double *pct, const double *resent,
				     const char *const *peer, int n, int me);
void validate__check_net_errors(struct vcheck *c, const char *ifname,
				const struct vnet_counters *before,
				const struct vnet_counters *after);

void validate__vcheck_raise(struct vcheck *c, double th, const char *from);
const char *validate__vverdict_name(enum vverdict v);
json_t *validate__vcheck_pack(const struct vcheck *c);
void validate__vchecks_print(const struct vcheck *checks, int n);

/* ---- a run ----------------------------------------------------------------------- */

/* The layers, bottom-up (validate__layers names them). */
enum {
	VL_SYSTEM,
	VL_NETWORK,
	VL_COMPUTE,
	VL_MEMORY,
	VL_INTERCONNECT,
	VL_STORAGE,
	VL_WORKLOAD,
	VLAYERS
};
#define VMAX_CHECKS 48
extern const char *const validate__layers[VLAYERS]; /* bottom-up */
int validate__vlayer_index(const char *name);

struct vrun {
	bool want[VLAYERS];
	bool all, quick, progress;
	const char *dir;     /* storage checks; NULL: $TMPDIR or /tmp */
	json_t *base;	     /* a baseline's figures, or NULL */
	double tolerance;    /* below the peers' median by more than this fails */
	double clock_max_ms; /* largest clock offset from the first node */
	int rdma_peers;	     /* peers each node meets over RDMA (0: the default) */
	/* the reference, in the workload layer (--reference, --reference-cmd):
	 * its record into *reference_out where that is not NULL */
	bool reference;
	const char *reference_cmd;
	json_t **reference_out;
};

/* This node's checks, layer by layer; returns how many were filled. */
int validate_local(const struct vrun *o, struct vcheck *checks, int max);

/* ---- cluster.c: through the server ----------------------------------------------- */

/* tenk validate --nodes SPEC: asks the server, waits, prints each node's verdict. */
int validate_cluster(const char *spec, const char *image, int argc, char **argv, bool json,
		     bool no_wait);
/* tenk validate --image REF on this node: the same run, in a container of
 * the image (image.c). */
int validate_in_image(const char *ref, int argc, char **argv);
/* argv[1..] less the options named in own (each "--x" or "--x=V"; with
 * takes_value[k], "--x V" too). */
json_t *validate__vargs_without(int argc, char **argv, const char *const *own,
				const bool *takes_value, size_t nown);
/* tenk validate --member: one node's part of a validation job. */
int validate_member(const struct vrun *o);

/* What each node tells the others. */
#define VPEER_CHECKS 28 /* every check a node makes alone */
#define VRAILS 16	/* RDMA ports a node is measured on (MODEL_MAX_RDMA_PORTS) */
struct vpeer {
	char node[64];
	/* the kernel's boot id: members alike share one machine's processors,
	 * so figures those processors make are not held to each other */
	char machine[40];
	char stack[192];    /* "driver X, CUDA Y, NCCL Z, tenk V" */
	double clock_ms;    /* its clock minus the first node's */
	double pair_gbs;    /* its links to the others (upper median of its pairs); 0: none */
	double pair_lat_us; /* a small exchange with the others (lower median); 0: none */
	/* RDMA (rdma.c): where its peers reach it (the source of its route to
	 * the first node), its rails (its ACTIVE RDMA ports, "mlx5_0:1", in
	 * the inventory's order), the slowest one's rate; whether perftest is
	 * on its PATH; its pairs' figures (filled in after the pairs) */
	char addr[48];
	int nrails;
	char rails[VRAILS][MODEL_NIC_NAME_MAX + 8];
	double rail_gbps;
	bool perftest;
	double rdma_gbits;  /* the upper median of its pairs' weakest rails; 0: failed */
	double rdma_lat_us; /* the lower median of its pairs' slowest rails; 0: none */
	int rdma_pairs;	    /* pairs measured (or tried and failed) */
	int nchecks;
	struct vpeer_check {
		char name[32];
		double figure;
		int verdict; /* enum vverdict */
	} checks[VPEER_CHECKS];
};

/* The median of v[0..n); n > 0. Sorts v. */
double validate__median(double *v, int n);
/* The median of a node's figures to its peers (row[i] to node i; those
 * not over floor left out: not measured): the upper one, or the lower. */
double validate__vpair_median(const double *row, int n, int me, double floor, bool upper);
/* The upper median of row[0..n) leaving out row[me]: a node's figure from
 * its pairs, so that with three nodes one slow link does not sink both ends. */
double validate__vpair_figure(const double *row, int n, int me);
/* The lower median of a node's pair latencies (row[i] µs to node i, 0
 * where not measured): a node with one slow peer is not slow itself. */
double validate__vpair_latency(const double *row, int n, int me);
/* The pair_latency check of node me (interconnect): held to its peers'
 * median from above; returns 1 (the check made). */
int validate__pair_latency_judge(const struct vpeer *all, int n, int me, struct vcheck *c);
/* Round r of the round-robin tournament over m (even) players: p's
 * partner (m - 1 rounds; each pair meets once). */
int validate__partner(int round, int p, int m);

/* ---- rdma.c: the pairs over RDMA, with perftest ---------------------------------- */

/* The figure in column `column` ("average[Gb/sec]", "t_typical[usec]") of
 * the first row of perftest's table in out (the row after the "#bytes"
 * header); -1 where there is none. */
double validate__perftest_figure(const char *out, const char *column);
/* This node's rails (ACTIVE RDMA ports of inv), their slowest rate, and
 * whether perftest is on its PATH, into me. */
void validate__rdma_rails(struct vpeer *me, const struct node_inventory *inv);
/* What this node saw of its own pairs, for its checks' details. */
struct rdma_note {
	char weakest[96]; /* "mlx5_3 to host2" */
	double weakest_gbits;
	char slowest[96]; /* the latency's */
	double slowest_us;
	char why[200]; /* the first failure: "ib_write_bw on mlx5_0 to host2: ..." */
};
/* Pairs of nodes that both have rails, in the TCP pairs' rounds (the
 * first `peers` of them, 0: the default, 8 or 4 with quick; each round a
 * peer more for every node):
 * ib_write_bw then ib_send_lat on every rail the two have (rail k to rail
 * k), all at once. Row j of this node: bw[j] the weakest rail's Gb/s (0:
 * a rail failed; -1: not measured), lat[j] the slowest rail's µs (-1:
 * none). all[]: every node's vpeer, as allgathered. */
int validate__rdma_pairs(struct coll_comm *c, const struct vpeer *all, bool quick, int peers,
			 double *bw, double *lat, struct rdma_note *note, struct tk_error *err);
/* The checks rdma_pair_bandwidth and rdma_pair_latency of node me
 * (interconnect), from every node's rdma_* figures; returns 2. */
int validate__rdma_judge(const struct vpeer *all, int n, int me, const struct vrun *o,
			 const struct rdma_note *note, struct vcheck *c);
/* Holds node `me` to its peers: raises its checks' thresholds to
 * (1 - tolerance) x the others' median (given two or more others), and adds
 * the system checks of consistency (software stack, clock) and the pair
 * check. Returns the new number of checks. */
int validate__vpeer_judge(const struct vpeer *all, int n, int me, const struct vrun *o,
			  struct vcheck *checks, int nchecks, int max);
/* The first failing layer and why, from checks; false when all pass. */
bool validate__vverdict_of(const struct vcheck *checks, int n, char *layer, size_t layer_n,
			   char *reason, size_t reason_n);
