/*
 * agent: one per node. It tells the server what the machine has (CPUs,
 * memory, accelerators: real ones through NVML, or fake ones for tests),
 * long-polls the server for the work its node should run, starts and
 * supervises those tasks, and reports when they start and exit. It never
 * decides placement. Every connection is opened by the agent, so only the
 * server's port needs to be reachable.
 *
 * While the server is away the agent keeps its tasks running, holds their
 * exit reports, and reconnects with backoff; the tasks themselves run in
 * shims that outlive the agent and stop them once no agent in touch with
 * the server has renewed their lease.
 */
#pragma once

#include <stdint.h>
#include <uv.h>

#include "util/util.h"

struct agent;

struct agent_config {
	const char *server_url; /* borrowed; e.g. "http://10.0.0.1:7480" */
	const char *token;	/* the agent join token; borrowed */
	const char *name;	/* node name; NULL: the host name */
	const char *fake_gpus;	/* "8xH100": fake devices instead of NVML */
	const char *fake_stack; /* a JSON file over the software stack read (stack.c) */
	const char *addr;	/* how peers reach this node; NULL: as the server sees it */
	const char *topology;	/* "spine1/leaf07" */
	const char *labels;	/* "tier=top,fabric=ib" */
	const char *domain;	/* "dc1/row3/rack07": its fault domain */
	const char *data_dir;	/* the data folder; default ./tenk-data */
	const char *work_dir;	/* local folder for checkpoints; NULL: DATA_DIR/agent */
	/* the shims' folders and the metrics files, which need no disk (a
	 * tmpfs spares it their churn); NULL: work_dir */
	const char *run_dir;
	int cpus;	 /* 0: detect */
	int64_t mem_mib; /* 0: detect */
	int64_t heartbeat_ms;
	bool stop_jobs; /* at stop, end the jobs (they are requeued), not leave them to their shims
			 */
	/* before which attempts the shim checks the attempt's GPUs here
	 * (tenk validate --device-check): those after the first (a restart,
	 * which a failure may have caused), every one, or none */
	enum device_check_when {
		DEVICE_CHECK_RESTARTS,
		DEVICE_CHECK_ALWAYS,
		DEVICE_CHECK_NEVER
	} device_check;
	/* image jobs: the podman program ("podman" on PATH), a containers.conf
	 * for it, its store (DIR/storage, DIR/run; NULL: podman's), and where
	 * the node's CDI specs are (NULL: /etc/cdi) */
	const char *podman;
	const char *containers_conf;
	const char *podman_root;
	const char *cdi_dir;
	const char *ca_file; /* HTTPS to the server is verified against it (NULL: $TENK_CA, or
				the system's) */
	/* the server may be plain HTTP on another machine (the join token and
	 * the credential then travel in the clear) */
	bool insecure_http;
	/* checkpoint uploads go at most this fast (MiB/s; 0: no limit), so
	 * that they leave the job its disk and network */
	int64_t ckpt_upload_mib_s;
	/* less free space in the work folder is a fault the server hears of */
	int64_t min_free_mib;
	/* what one job's checkpoint folder may hold: MiB, or (MiB 0) a percent
	 * of the work folder's file system; both 0: no limit (disk.c) */
	int64_t job_disk_limit_mib;
	int job_disk_limit_pct;
	/* the operator's health check (a program; NULL: none), run every
	 * interval: a fault while it exits non-zero */
	const char *health_check;
	int64_t health_check_interval_ms;
	/* GET /metrics: where (NULL: 127.0.0.1:9400 where it is free; "none":
	 * nowhere), and dcgm-exporter's names too */
	const char *metrics_listen;
	bool dcgm_compat;
	/* the witness endpoint's UDP port (witness.c; 0: the one it had, or
	 * any free one) */
	int witness_port;
};

void agent_config_init(struct agent_config *c);

/* Detects the inventory and starts registering with the server on loop. */
int agent_create(uv_loop_t *loop, const struct agent_config *cfg, struct agent **ret,
		 struct tk_error *err);
/* Leaves every task to its shim, which holds it until the next agent comes
 * (within the lease), or with stop_jobs stops every task (SIGTERM, the
 * job's grace period, SIGKILL); reports what it can if the server answers
 * within a few seconds, closes every handle and then calls done_cb from the
 * loop. */
void agent_stop(struct agent *a, void (*done_cb)(void *arg), void *arg);
void agent_destroy(struct agent *a);

/* Hollow nodes (hollow.c): n node identities named PREFIX-00000 ... (cfg's
 * name, default "hollow"), each with cfg's fake devices, CPUs and memory,
 * speaking the agents' protocol to cfg's server and running nothing: a
 * task lasts as its command says (`sleep S`, `true`, `false`), else run_ms. */
struct hollow;
int hollow_create(uv_loop_t *loop, const struct agent_config *cfg, int n, int64_t run_ms,
		  struct hollow **ret, struct tk_error *err);
void hollow_stop(struct hollow *h, void (*done_cb)(void *arg), void *arg);
void hollow_destroy(struct hollow *h);

/* `tenk-shim DIR`: the supervisor of one attempt's tasks, started by an
 * agent (never by hand); the whole of the tenk-shim program. */
int shim_run(const struct tk_command *cmd, int argc, char **argv);
/* `tenk-shim --launcher PAD` (shimlauncher.c) */
int shim_launcher_run(int argc, char **argv);
