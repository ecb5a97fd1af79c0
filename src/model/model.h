/*
 * model: tenk's data types (accelerators, nodes, job requests, jobs and their
 * attempts), their JSON form, and the validation of anything that arrives
 * from outside. No I/O, no clocks, no globals besides constant tables: every
 * other part can trust a struct that came out of a model_*_unpack call.
 *
 * JSON decoding is strict: an unknown key, a wrong type or a value out of
 * range is an error whose text starts with the field's path, e.g.
 *   nodes: must be an integer from 1 to 4096, got 0
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/util.h"

/* ---- limits on what may come from outside ------------------------------ */

#define MODEL_NAME_MAX 64	     /* job, node, model, user names, with NUL */
#define MODEL_ADDR_MAX 64	     /* a node's address, with NUL */
#define MODEL_TOPO_MAX 128	     /* "spine1/leaf07", with NUL */
#define MODEL_LABELS_MAX 512	     /* a node's labels, "k=v,k2=v2", with NUL */
#define MODEL_MAX_LABELS 32	     /* labels of one node */
#define MODEL_LABEL_PART_MAX 63	     /* a label's key, or its value */
#define MODEL_CONSTRAINT_MAX 512     /* a job's --constraint, with NUL */
#define MODEL_REASON_MAX 256	     /* why a job waits or ended, with NUL */
#define MODEL_MAX_ACCELS 64	     /* accelerators on one node */
#define MODEL_MAX_NODES 4096	     /* nodes of one job */
#define MODEL_MAX_TASKS_PER_NODE 256 /* tasks of one job on one node */
#define MODEL_MAX_GPUS_PER_TASK 64
#define MODEL_MAX_CPUS 65536
#define MODEL_MAX_MEM_MIB (1LL << 40)
#define MODEL_MAX_ARGS 4096
#define MODEL_MAX_ARG_BYTES (128 * 1024) /* all of a command's arguments */
#define MODEL_MAX_ENV 4096
#define MODEL_MAX_ENV_BYTES (256 * 1024) /* all of a job's environment */
#define MODEL_MAX_PATH 4096
#define MODEL_MAX_GPU_TYPES 16
#define MODEL_MAX_TIME_LIMIT_S (366LL * 86400)
#define MODEL_MAX_GRACE_S 3600
#define MODEL_MAX_CKPT_SIGNAL_S 3600 /* how long a gang waits for a checkpoint on a failure */
#define MODEL_DEFAULT_GRACE_S 30
#define MODEL_MAX_REQUEUE 100
#define MODEL_MAX_ATTEMPTS 1000
#define MODEL_MAX_SWITCHES 64
#define MODEL_MILLI 1000    /* one whole accelerator, in milli-accelerator units */
#define MODEL_IMAGE_MAX 256 /* an image reference, with its NUL */
#define MODEL_DIGEST_MAX 80 /* "sha256:" and 64 hex digits, with the NUL */
#define MODEL_MAX_MOUNTS 32 /* of one job, the cluster's defaults included */

/* ---- strict JSON field access ------------------------------------------- */

/* Each reads obj[key] into *ret. A missing key is an error when `required`,
 * else *ret gets the default. Errors name `key` (prefixed by `path` when not
 * NULL, as in "command[2]"). Strings are returned for the caller to free. */
int mj_check_keys(json_t *obj, const char *path, const char *const *allowed, struct tk_error *err);
/* The same for a message of a link between tenk's own parts (agent and
 * server, agent and shim), which may be of the next version: obj must be
 * an object; keys not in known are a newer peer's, and ignored (DESIGN.md
 * §5, versions). */
int mj_link_keys(json_t *obj, const char *path, const char *const *known, struct tk_error *err);
int mj_int(json_t *obj, const char *key, bool required, int64_t min, int64_t max, int64_t def,
	   int64_t *ret, struct tk_error *err);
int mj_bool(json_t *obj, const char *key, bool required, bool def, bool *ret, struct tk_error *err);
/* A number (integer or real) from obj[key] within [min, max]. */
int mj_num(json_t *obj, const char *key, bool required, double min, double max, double def,
	   double *ret, struct tk_error *err);
/* A string of 1..max_len bytes (0..max_len when allow_empty) with no NUL and
 * no control characters when `printable`. */
int mj_str(json_t *obj, const char *key, bool required, size_t max_len, bool printable,
	   const char *def, char **ret, struct tk_error *err);
/* Like mj_str, into a fixed buffer of size n (max_len is n - 1). */
int mj_strbuf(json_t *obj, const char *key, bool required, bool printable, char *buf, size_t n,
	      struct tk_error *err);
/* An enum by its name, one of names[0..n) (NULL entries never match):
 * obj[key] absent gives def (when not required); a name not among them is
 * an error that lists them. */
int mj_enum(json_t *obj, const char *key, bool required, const char *const *names, int n, int def,
	    int *ret, struct tk_error *err);
/* Prepends "PREFIX." to the error's text, to name a nested field. */
void mj_prefix(struct tk_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A name: 1..MODEL_NAME_MAX-1 bytes of [A-Za-z0-9._-]. */
bool model_name_valid(const char *s);

/* ---- catalogue of accelerator models ------------------------------------ */

struct catalogue_entry {
	char name[MODEL_NAME_MAX];
	int64_t mem_mib;
	double tflops;	       /* peak dense bf16 (fp16 where the card lacks bf16) */
	double price_per_hour; /* in the operator's currency, per device */
	double weight;	       /* units one is worth in quotas (0: catalogue_weight's default) */
};

struct catalogue {
	struct catalogue_entry *entries;
	size_t n;
	size_t alloc;
};

/* Fills c with the built-in models. */
void catalogue_init(struct catalogue *c);
void catalogue_release(struct catalogue *c);
/* Case-insensitive lookup; NULL when unknown. The pointer is borrowed and
 * stays valid until the catalogue changes. */
const struct catalogue_entry *catalogue_find(const struct catalogue *c, const char *name);
/* Adds a model or overrides the one with the same name. */
void catalogue_set(struct catalogue *c, const struct catalogue_entry *e);
/* Applies an operator's overrides:
 *   {"models": [{"name": "H100", "mem_mib": 81559, "tflops": 989,
 *                "price_per_hour": 2.5}, ...]}
 * Fields left out keep the built-in value (or 0 for a new model). On error
 * nothing is changed. */
int catalogue_load_json(struct catalogue *c, const char *text, struct tk_error *err);
/* The catalogue model a device name refers to ("NVIDIA A100-SXM4-80GB" ->
 * A100-80GB): an exact name, else the longest model base name found in it,
 * then the closest memory size. NULL when none matches. */
const struct catalogue_entry *catalogue_match(const struct catalogue *c, const char *device_name,
					      int64_t mem_mib);
/* Makes a valid model name of any text (invalid characters become '-'). */
void model_name_sanitize(const char *in, char *out, size_t n);
/* Writes "H200, H100, ..." into sb: for error messages. */
void catalogue_names(const struct catalogue *c, struct strbuf *sb);
json_t *catalogue_pack(const struct catalogue *c);
/* The units (H100-equivalents) one accelerator of model e is worth in a
 * queue's weighted limits and weighted shares: its weight where set, else
 * its peak rate against an H100's (989.4 TFLOP/s bf16), else 1. */
#define CATALOGUE_UNIT_TFLOPS 989.4
double catalogue_weight(const struct catalogue_entry *e);

/* ---- accelerators and nodes --------------------------------------------- */

struct accel {
	int index;
	char uuid[MODEL_NAME_MAX];
	char model[MODEL_NAME_MAX];
	int64_t mem_mib;
	double tflops;
	int nvlink_domain;
};

/* The limits an agent holds its jobs to through cgroups (DESIGN.md section
 * 8); a node reports, as bits, those it cannot: a controller its cgroup was
 * not given (cgroup v2 hands a child only what its parent delegates), a
 * device program (BPF) cgroup v2 would not take, all where the agent is not
 * root. */
enum node_limit {
	NODE_LIMIT_MEMORY = 1 << 0,
	NODE_LIMIT_CPUS = 1 << 1,      /* cpuset */
	NODE_LIMIT_PROCESSES = 1 << 2, /* pids */
	NODE_LIMIT_DEVICES = 1 << 3,   /* other jobs' GPUs */
};
#define NODE_LIMIT_ALL 0xfu
const char *node_limit_name(unsigned bit);

/* What an agent reports about its machine. */
/* The node's fabric, from sysfs (agent nic.c): its network interfaces and
 * its RDMA devices' ports (node_network_pack). */
#define MODEL_MAX_NICS 16
#define MODEL_MAX_RDMA_PORTS 16
#define MODEL_NIC_NAME_MAX 24
enum nic_kind {
	NIC_ETHERNET,	/* "ethernet": sysfs type 1 */
	NIC_INFINIBAND, /* "infiniband": type 32 (IPoIB) */
	NIC_OTHER,	/* "other" */
	NIC_KIND_MAX
};
const char *node_nic_kind_name(enum nic_kind k);
struct nic {
	char name[MODEL_NIC_NAME_MAX];
	enum nic_kind kind;
	bool virt;	    /* no device under it (veth, bridge, bond) */
	bool up;	    /* operstate "up" */
	int64_t speed_mbps; /* -1: not said (a link down, a virtual one) */
	int mtu;
	char driver[MODEL_NIC_NAME_MAX];
	char pci[MODEL_NIC_NAME_MAX];  /* "0000:17:00.0"; "" none */
	int numa;		       /* -1: none said */
	char rdma[MODEL_NIC_NAME_MAX]; /* the RDMA device on it (RoCE, IPoIB); "" none */
	/* RoCE's lossless settings, bit k for priority k; -1: not said (not a
	 * RoCE interface, or a driver that does not expose it) */
	int pfc;    /* PFC on: the kernel's DCB netlink (node_roce_pfc_read) */
	int ecn_np; /* RoCE ECN's notification point: sysfs ecn/roce_np/enable/K */
	int ecn_rp; /* and its reaction point: ecn/roce_rp/enable/K */
};
struct rdma_port {
	char dev[MODEL_NIC_NAME_MAX]; /* "mlx5_0" */
	int port;
	bool ethernet; /* link layer Ethernet (RoCE); else InfiniBand */
	bool active;   /* state "4: ACTIVE" */
	char state[MODEL_NIC_NAME_MAX];
	double rate_gbps; /* "200 Gb/sec (4X HDR)": 200; 0 not said */
	int gids;	  /* entries of its GID table */
	char pci[MODEL_NIC_NAME_MAX];
	int numa;
};

/* An accelerator's place on the PCI tree (sysfs: NVIDIA's display and 3D
 * controllers in address order, the order CUDA_DEVICE_ORDER=PCI_BUS_ID and
 * NVML count them) and the ACTIVE RDMA port nearest it: the one under the
 * deepest shared PCI bridge (a PCIe switch before the root port, before
 * the other NUMA node), "mlx5_0:1"; "" none. */
struct gpu_place {
	int index; /* the accelerator's */
	char pci[MODEL_NIC_NAME_MAX];
	int numa;
	char hca[MODEL_NIC_NAME_MAX + 16]; /* "mlx5_0:1" */
	int shared; /* PCI bridges it shares with that port (0: the root complex only) */
};

/* A node's software stack as its agent reads it (stack.c): what it runs
 * jobs on, whose change drops the node's validation. "" where its agent
 * did not say (an older one); "none" where the node has none (no GPU
 * driver, no RDMA device). */
struct node_stack {
	char kernel[64]; /* uname's release */
	char os[64];	 /* /etc/os-release's PRETTY_NAME */
	char driver[32]; /* NVIDIA's driver */
	char cuda[16];	 /* the CUDA version the driver serves */
	char nccl[16];	 /* the NCCL the agent's loader finds */
	char vbios[48];	 /* the GPUs' VBIOS: one, or "A (4), B (4)" where they differ */
	char nic_fw[96]; /* the RDMA devices' firmware: "mlx5_0 28.39.1002, ..." */
	char tenk[16];	 /* the agent's version */
};
#define NODE_STACK_FIELDS 8
/* Field k's name ("kernel", "os", ...) and value. */
const char *node_stack_field_name(int k);
const char *node_stack_field(const struct node_stack *s, int k);
/* Sets field k to v (truncated to its size). */
void node_stack_set(struct node_stack *s, int k, const char *v);
bool node_stack_same(const struct node_stack *a, const struct node_stack *b);
json_t *node_stack_pack(const struct node_stack *s);
/* path names it in errors ("stack"; NULL: none). */
int node_stack_unpack(json_t *j, const char *path, struct node_stack *ret, struct tk_error *err);
/* The fields that differ from a to b, for people: "kernel 6.1.0-18 ->
 * 6.1.0-20; driver 550.54 -> 555.42" (truncated to n); false where none
 * does. A field a leaves "" (its agent said nothing) is not a change. */
bool node_stack_diff(const struct node_stack *a, const struct node_stack *b, char *out, size_t n);
/* One line of every field, for grouping nodes by stack. */
void node_stack_line(const struct node_stack *s, char *out, size_t n);
/* A stack's label, "driver=560.28,kernel=6.1.0-20-amd64", as the fields it
 * names (the others ""); -EINVAL with why. */
int node_stack_label_parse(const char *label, struct node_stack *ret, struct tk_error *err);
/* Whether s has every field want names (want's "" fields: any). */
bool node_stack_has(const struct node_stack *s, const struct node_stack *want);

struct node_inventory {
	char name[MODEL_NAME_MAX];
	char addr[MODEL_ADDR_MAX]; /* as other nodes reach it; may be "" */
	char topology[MODEL_TOPO_MAX];
	/* its fault domain, widest first: "dc1/row3/rack07/pdu2" (agent
	 * --domain; model_domain_valid); "": not told */
	char domain[MODEL_TOPO_MAX];
	int cpus;
	int64_t mem_mib;
	int naccel;
	struct accel accel[MODEL_MAX_ACCELS];
	char labels[MODEL_LABELS_MAX]; /* "fabric=ib,tier=top": sorted by key; "" none */
	bool isolation_known;	       /* false: an agent before 0.2.1, or a hollow one */
	int cgroup_version;	       /* 1, 2; 0: none used (no cgroup file system, not root) */
	unsigned unenforced;	       /* enum node_limit bits it cannot enforce */
	/* its fabric (an agent before 0.2.1 says none) */
	int nnics;
	struct nic nics[MODEL_MAX_NICS];
	int nrdma;
	struct rdma_port rdma[MODEL_MAX_RDMA_PORTS];
	int ngpu_places;
	struct gpu_place gpu_places[MODEL_MAX_ACCELS];
	/* its software stack (an agent before 0.2.0 says none: has_stack) */
	bool has_stack;
	struct node_stack stack;
};
/* Reads the fabric into inv from the sysfs tree at sys ("/sys"); with
 * inv->naccel accelerators known, their places too. */
void node_fabric_read(struct node_inventory *inv, const char *sys);
/* Whether n is a RoCE interface: Ethernet, on a device, with an RDMA
 * device on the same function. */
bool node_nic_is_roce(const struct nic *n);
/* Each RoCE interface's PFC (nic.pfc) from the kernel (node_pfc_read). */
void node_roce_pfc_read(struct node_inventory *inv);
/* PFC at an interface, as the kernel's DCB netlink says it (struct
 * ieee_pfc): the priorities with it on, and the pause frames of each. */
struct node_pfc {
	int en;			 /* bit k: priority k pauses instead of dropping */
	uint64_t requests[8];	 /* pause frames sent (the port asked its peer to wait) */
	uint64_t indications[8]; /* pause frames received (its peer asked it to) */
};
/* PFC at interface ifname, as `dcb pfc show` reads it (RTM_GETDCB,
 * DCB_CMD_IEEE_GET): 0, or -EOPNOTSUPP where its driver has no DCB,
 * -ENODATA where it says no PFC, -ENODEV no such interface, another
 * -errno. */
int node_pfc_read(const char *ifname, struct node_pfc *ret);
/* PFC in the kernel's answer msg[0..len), as node_pfc_read; also -EBADMSG
 * for an answer it cannot read. */
int node_dcb_pfc_parse(const void *msg, size_t len, struct node_pfc *ret);
void node_gpu_places_read(struct node_inventory *inv, const char *sys);
/* The nearest ACTIVE RDMA ports of accelerators devs[0..n) (inventory
 * indices), each once, as NCCL_IB_HCA takes them: "=mlx5_0:1,mlx5_3:1"
 * into out; false when none is known. */
bool node_hca_of(const struct node_inventory *inv, const int *devs, int n, char *out, size_t outn);
/* sysfs' files: a file's first line (its newline gone), one number (false
 * when unreadable or none: a down link's speed reads EINVAL), a folder's
 * names but "." ones, sorted (free with model_sysfs_list_free). */
bool model_sysfs_line(const char *path, char *buf, size_t n);
bool model_sysfs_num(const char *path, double *ret);
char **model_sysfs_list(const char *dir, size_t *ret_n);
void model_sysfs_list_free(char **names, size_t n);
/* "network": {"interfaces": [...], "rdma": [...]}; NULL where it has none. */
json_t *node_network_pack(const struct node_inventory *inv);
int node_network_unpack(json_t *j, struct node_inventory *inv, struct tk_error *err);
/* The node's RDMA fabric, the value of its fabric= label: "ib" where an
 * InfiniBand port is ACTIVE, else "roce" where a RoCE port is; NULL where
 * none is (TCP alone). */
const char *node_fabric_of(const struct node_inventory *inv);

/* What NCCL's log (NCCL_DEBUG=INFO) says of the transports it chose
 * (nccl_log.c): its channels' connections by transport. */
enum nccl_transport {
	NCCL_TR_NET,	/* "via NET/IB/0", a plugin's "NET/IBext_v8/2": RDMA between nodes */
	NCCL_TR_SOCKET, /* "via NET/Socket/0": TCP between nodes */
	NCCL_TR_P2P,	/* "via P2P/IPC/read": GPU to GPU in the node */
	NCCL_TR_SHM,	/* "via SHM/direct/direct": through host memory */
	NCCL_TR_OTHER,
	NCCL_TR_MAX
};
const char *model_nccl_transport_name(enum nccl_transport t);
struct nccl_log {
	int connections[NCCL_TR_MAX];
	char network[32];      /* "Using network IB": "IB"; "" not said */
	char net[32];	       /* the first RDMA net's name ("IB", "IBext_v8") */
	bool ib_no_device;     /* "NET/IB : No device found" */
	char socket_line[200]; /* the first NET/Socket connection, NCCL's words */
};
/* One line of the log, or a text of many; a zeroed nccl_log to start. */
void model_nccl_log_line(struct nccl_log *l, const char *line);
void model_nccl_log_text(struct nccl_log *l, const char *text, size_t len);
/* Connections that leave the node (NET/...). */
int model_nccl_log_between_nodes(const struct nccl_log *l);

/* Node labels and job constraints (labels.c). node_labels_parse: "k=v,k2=v2"
 * (checked) into its canonical form, sorted by key; the number of labels.
 * node_labels_get: the value of key (keyn characters) in canonical labels, its
 * length in *valn; NULL when absent. job_constraint_check: is expr a well
 * formed constraint ("fabric=ib&rack!=r07|tier=top")? job_constraint_match:
 * do the labels satisfy it (NULL expr: any labels do)? */
int node_labels_parse(const char *text, char *out, size_t outn, struct tk_error *err);
/* The length of the item of a comma list ("a,b") that starts at p; *next:
 * where the next starts (at the list's end, "" when none follows):
 *   for (const char *p = list, *next; *p; p = next)
 *           len = model_list_item(p, &next); ... */
size_t model_list_item(const char *p, const char **next);
const char *node_labels_get(const char *labels, const char *key, size_t keyn, size_t *valn);
int job_constraint_check(const char *expr, struct tk_error *err);
/* A fault-domain path ("dc1/row3/rack07"): 1 to 8 names of letters, digits,
 * '.', '_', '-' joined by '/'. */
bool model_domain_valid(const char *path);
/* A job's --spread ("rack", "rack:2") or, with max NULL, --within ("rack"):
 * the level's name into level, the cap into *max (1 unless given). */
int job_spread_parse(const char *text, char *level, size_t n, int *max, struct tk_error *err);
/* A list of names ("inference,dev": taints, tolerations), checked as label
 * keys, into its canonical form (sorted, once each); the count. what
 * names it in errors. model_names_has: is name (n characters) in the list?
 * node_taints_tolerated: is every taint in tolerate? */
int model_names_parse(const char *what, const char *text, char *out, size_t outn,
		      struct tk_error *err);
bool model_names_has(const char *names, const char *name, size_t n);
bool node_taints_tolerated(const char *taints, const char *tolerate);
/* labels (canonical) with the label every node has of its accelerators'
 * model, gpu=MODEL (its first's; none for a node without, or a model that
 * is no label's value), beneath them. */
void node_labels_with_gpu(const char *labels, const char *model, char *out, size_t outn);
/* labels (canonical) with key=value beneath them (none where value is
 * NULL or empty, or no label's value): what every node carries of its
 * inventory (fabric=ib). */
void node_labels_beneath(const char *labels, const char *key, const char *value, char *out,
			 size_t outn);
/* --fabric KIND (ib, roce, or rdma: either) as a constraint: expr's (NULL:
 * none) every alternative with fabric=KIND, into out. < 0 with err for a
 * kind that is none of these, or a constraint too long. */
int job_constraint_with_fabric(const char *expr, const char *kind, char *out, size_t outn,
			       struct tk_error *err);
/* over's labels on base's (both canonical): over wins a key both have. */
void node_labels_merge(const char *base, const char *over, char *out, size_t outn);
bool job_constraint_match(const char *expr, const char *labels);

/* Parses a fake-device spec such as "8xH100" or "4xA100-80GB,2xT4" into
 * accelerators named from the catalogue; UUIDs are derived from uuid_seed so
 * they are stable for a node. */
int model_fake_accels(const char *spec, const struct catalogue *c, const char *uuid_seed,
		      struct accel *ret, int max, int *ret_n, struct tk_error *err);

json_t *node_inventory_pack(const struct node_inventory *inv);
/* {"tier": "top"} of canonical labels */
json_t *node_labels_pack(const char *labels);
/* {"cgroup": 2, "unenforced": ["processes"]}; NULL when not reported */
json_t *node_isolation_pack(const struct node_inventory *inv);
int node_inventory_unpack(json_t *j, struct node_inventory *ret, struct tk_error *err);

/* ---- jobs ---------------------------------------------------------------- */

/*
 * A job's life. Each start is an attempt with its own number; the pair (job,
 * attempt) names one allocation everywhere, so a repeated message never starts
 * a job twice.
 *
 *   PENDING --place--> STARTING --all tasks up--> RUNNING --all exit 0--> COMPLETED
 *      ^                  |                          |---- a task fails --> FAILED
 *      |                  |                          |---- time limit ----> TIMEOUT
 *      +--- requeue ------+--------------------------+
 *   (any non-final state) ---- cancel ----> CANCELLED
 */
enum job_state {
	JOB_PENDING,
	JOB_STARTING,
	JOB_RUNNING,
	JOB_COMPLETED,
	JOB_FAILED,
	JOB_CANCELLED,
	JOB_TIMEOUT,
	JOB_STATE_MAX
};

const char *job_state_name(enum job_state s);
int job_state_parse(const char *s, enum job_state *ret);
bool job_state_final(enum job_state s);

/* ---- images and mounts -------------------------------------------------------- */

/* A container image reference as Podman takes it,
 * [REGISTRY[:PORT]/]PATH[:TAG][@sha256:HEX]: 1..MODEL_IMAGE_MAX-1 bytes
 * of [A-Za-z0-9._/:@-], not starting with '-' or ':'. */
bool model_image_valid(const char *ref);
/* Does ref match an "allowed_images" pattern? '*' matches any run of
 * characters (registry.example/ml/ then a star: all below ml/); anything else itself. */
bool model_image_allowed(const char *pattern, const char *ref);

/* A folder of the host in a job's container: "SRC:DST[:ro]" (":rw" too;
 * DST defaults to SRC). Both are absolute paths without ':' or ',' or a
 * ".." part, DST not "/" nor in /proc, /sys or /dev. SRC may be "." (the
 * job's working folder, mounted where it is) where dot is allowed: in the
 * cluster's "default_mounts". */
struct mount_spec {
	char src[MODEL_MAX_PATH];
	char dst[MODEL_MAX_PATH];
	bool ro;
};
int model_mount_parse(const char *text, bool dot, struct mount_spec *ret, struct tk_error *err);
/* Does folder dir hold a CDI spec of NVIDIA GPUs (kind nvidia.com/gpu, as
 * `nvidia-ctk cdi generate` writes it, YAML or JSON)? */
bool model_cdi_has_gpus(const char *dir);

/* How a job says a checkpoint tag is complete: TAG/.tenk-commit ({"step"}),
 * PyTorch DCP's TAG/.metadata (written on one node), DeepSpeed's `latest`
 * (the tag's name) or Megatron's latest_checkpointed_iteration.txt (the
 * step of tag iter_NNNNNNN), the last two beside the tags. */
enum ckpt_marker { CKPT_TENK, CKPT_DCP, CKPT_DEEPSPEED, CKPT_MEGATRON, CKPT_MARKER_MAX };
const char *ckpt_marker_name(enum ckpt_marker m);
int ckpt_marker_parse(const char *s, enum ckpt_marker *ret);
/* The step a framework's tag names: its last run of digits ("global_step500",
 * "iter_0000500", "step-000500"); -1 when it has none. */
int64_t model_ckpt_tag_step(const char *tag);

/* What is done with a job found stalled: said (its record, /metrics), its
 * attempt stopped and the job requeued (from its last checkpoint), or the
 * job cancelled. */
enum stall_action { STALL_NOTIFY, STALL_REQUEUE, STALL_CANCEL, STALL_ACTION_MAX };
const char *stall_action_name(enum stall_action a);
int stall_action_parse(const char *s, enum stall_action *ret);

/* What a gang does when a task fails or a node of it is lost and it may go
 * again: in place for a job of several nodes, else back to its queue
 * (auto); keep its healthy nodes, swap a failed one, and start its next
 * attempt at once, without a pass (in-place); or go back to its queue,
 * its nodes freed (requeue). */
enum restart_mode { RESTART_AUTO, RESTART_IN_PLACE, RESTART_REQUEUE, RESTART_MODE_MAX };
const char *restart_mode_name(enum restart_mode m);
int restart_mode_parse(const char *s, enum restart_mode *ret);

/*
 * A health probe (Kubernetes' httpGet probe), run by the agent of the node
 * a task of one node and one task runs on: an HTTP GET of path on
 * 127.0.0.1, at the port the task gets in $PORT, every interval; an answer
 * 200-399 within the timeout passes. The first pass puts it in rotation;
 * a failure takes it out; threshold failures in a row, or no pass within
 * start_ms of its start, stop it as unhealthy (EXIT_UNHEALTHY).
 */
#define MODEL_PROBE_PATH_MAX 256
struct job_probe {
	char path[MODEL_PROBE_PATH_MAX]; /* starts with '/' */
	int64_t interval_ms;		 /* 1 s .. 1 h, default 5 s */
	int64_t timeout_ms;		 /* under the interval, default 2 s (or under it) */
	int threshold;			 /* 1 .. 100, default 3 */
	int64_t start_ms;		 /* 1 s .. 1 h, default 300 s */
};
/* {"path", "interval_s", "timeout_s", "threshold", "start_s"}, every key
 * but path optional (seconds may have fractions down to a millisecond). */
int job_probe_unpack(json_t *j, struct job_probe *ret, struct tk_error *err);
json_t *job_probe_pack(const struct job_probe *p);

struct job_request {
	char *name;
	int argc;
	char **argv;
	char *cwd; /* absolute */
	int nenv;  /* "KEY=VALUE" strings */
	char **env;
	char *output; /* path pattern: %j job id, %t task rank, %n node rank, %% */
	int nodes;
	int tasks_per_node;
	int gpu_milli; /* accelerators per task in milli units; < 1000 is a fraction */
	int ngpu_types;
	char **gpu_types; /* acceptable models; none means any */
	int cpus_per_task;
	int64_t mem_mib;      /* per node; 0: no reservation */
	int64_t time_limit_s; /* 0: none */
	int64_t grace_s;      /* between SIGTERM and SIGKILL */
	int requeue;	      /* restarts allowed after the job's own failure */
	char *cls;	      /* priority class; NULL: the server's default */
	char *queue;	      /* NULL: the default queue */
	int64_t gpu_mem_mib;  /* each device at least this much memory; 0: any */
	double gpu_tflops;    /* each device at least this fast; 0: any */
	int switches;	      /* span at most this many switches; 0: no limit */
	/* on nodes whose labels satisfy it ("fabric=ib&rack!=r07"; NULL: any) */
	char *constraint;
	/* the taints it tolerates ("inference,dev", canonical; NULL: none) */
	char *tolerate;
	/* the pools it may run in ("top,general", canonical; NULL: none named,
	 * the server's default pool, or any open pool and nodes in none) */
	char *pool;
	/* fault domains by the level names of config.json's "domain_levels":
	 * "rack" or "rack:2", at most that many of its nodes (1) in any one
	 * rack; "rack": all its nodes in one (job_spread_parse) */
	char *spread;
	char *within;
	bool mixed_types; /* a gang may mix accelerator models */
	/* its tasks run in a container of this image (NULL: on the host),
	 * seeing of the host only these folders ("SRC:DST[:ro]", the cluster's
	 * default_mounts added at submission) and the checkpoint folder */
	char *image;
	int nmounts;
	char **mounts;
	enum ckpt_marker ckpt_marker; /* how it marks a checkpoint complete */
	/* it waits until each of these jobs has done as asked (Slurm's
	 * --dependency); an array's first element stands for every element */
	int nafter;
	struct job_dep *after;
	int64_t begin_ms; /* it starts no earlier (epoch ms); 0: any time */
	char *comment;	  /* the user's note; NULL: none */
	char *error;	  /* stderr's path pattern; NULL: into output */
	bool slurm_env;	  /* its tasks also see Slurm's SLURM_* variables */
	/* --nccl-check: its tasks log NCCL's choices (NCCL_DEBUG=INFO into a
	 * file of the agent's), which the agent reads: a rank that went
	 * between nodes over sockets on an RDMA node is said */
	bool nccl_check;
	/* its tasks get this signal signal_before_s before the time limit
	 * (Slurm's --signal); 0: none */
	int signal;
	int64_t signal_before_s;
	/* as submitted: "0-999%50" made one job per index (struct job's array
	 * fields); NULL: not an array */
	char *array;
	/* Slurm's -w, -x and --exclusive: it runs only on these nodes (none:
	 * any), never on those, and alone on each of its nodes */
	int nnodelist;
	char **nodelist;
	int nexclude;
	char **exclude;
	bool exclusive;
	/* one task on one node, its stdin, stdout and stderr a pseudo-terminal
	 * that `tenk run --pty` attaches to (GET /v1/jobs/ID/pty) */
	bool pty;
	/* its output files get no "--- tenk: attempt N on NODE at TIME ---"
	 * line where an attempt after the first begins ("attempt_marks": false) */
	bool no_attempt_marks;
	/* a running attempt that wrote training lines ($TENK_METRICS) and then
	 * none for this long is stalled (0: the cluster's stall_after, by
	 * default 10 times its median time between lines, at least 5 min),
	 * and then on_stall is done */
	int64_t stall_after_s;
	enum stall_action on_stall;
	enum restart_mode restart;
	/* idle nodes held for it beside its own, each with the share one of
	 * its nodes has: what a restart in place swaps a failed node for */
	int spares;
	/* when a task of its gang fails: its other tasks get this signal
	 * first, and the gang goes on up to ckpt_signal_s for a checkpoint
	 * (just-in-time; a tag then commits on the parts the nodes that wrote
	 * it uploaded, and a node without one restores another's); 0: none */
	int ckpt_signal;
	int64_t ckpt_signal_s;
	/* an elastic gang (-N MIN:MAX, torchrun's --nnodes): it starts on
	 * `nodes` or more, up to nodes_max, grows at a checkpoint as nodes
	 * free and shrinks instead of waiting where a lost node has no
	 * replacement; 0: exactly `nodes` */
	int nodes_max;
	/* a job of a class ordered by least attained service that an earlier
	 * level may preempt whatever it would lose (the class's
	 * "las_max_loss_s" spares it otherwise) */
	bool preemptible_any;
	/* a replica of this service (tenk serve; "service", set by the server
	 * only), and the health probe its node's agent runs (NULL: none) */
	char *service;
	struct job_probe *probe;
};

/* What a dependency waits for (Slurm's after, afterok, afternotok, afterany). */
enum dep_when { DEP_START, DEP_OK, DEP_FAIL, DEP_ANY, DEP_WHEN_MAX };
const char *dep_when_name(enum dep_when w);
int dep_when_parse(const char *s, enum dep_when *ret);
struct job_dep {
	int64_t job;
	enum dep_when when;
};
#define MODEL_MAX_AFTER 64
#define MODEL_MAX_COMMENT 1024
#define MODEL_MAX_ARRAY 100000 /* elements of one array */
#define MODEL_MAX_ARRAY_INDEX 10000000

/* Parses an array's indices, Slurm's form: "0-999", "1,3,5-9", "0-15:4",
 * then "%N" for at most N elements running at once. *ret: the indices in
 * the order given (caller frees), *ret_n their number, *ret_cap N or 0. */
int model_array_parse(const char *spec, int **ret, int *ret_n, int *ret_cap, struct tk_error *err);

/* Expands a list of node names, Slurm's hostlist form: "node1,node3",
 * "p[0000-0031]", "gpu[1,3-5]x": *ret the names in the order given
 * (caller frees with each name), *ret_n their number; at most max names. */
int model_hostlist_parse(const char *spec, int max, char ***ret, int *ret_n, struct tk_error *err);

/* What an output pattern's %-codes stand for, for one task. */
struct output_names {
	int64_t job;
	int64_t array_job; /* 0: not in an array (%A is the job, %a 0) */
	int array_index;
	int attempt;
	int rank;
	int node_rank;
	const char *node, *owner, *name;
};
/* The path of an output pattern, relative to cwd: %j job, %A array, %a
 * array index, %r attempt, %t task rank, %n node rank, %N node name, %u
 * owner, %x job name, %% (any other % stays as it is). A new string. */
char *model_output_path(const char *pattern, const char *cwd, const struct output_names *v);

/*
 * Every field of a job request, once (as libuv's UV_HANDLE_TYPE_MAP): its
 * JSON key, how struct job_request holds it, its member (and the member
 * counting it), and whether `tenk update` may change it while the job
 * waits (what placement and the queue read, not what the job is: its
 * command, folder, environment, image). From this table come the keys a
 * request may have, its release, what it weighs (job_request_bytes), what
 * an update may change and the error that lists it; a field added here is
 * everywhere (and a unit test checks the packer and parser have it).
 *
 *   X(KEY, KIND, MEMBER, COUNT, UPDATABLE)
 *   KIND: JR_STR (char *, NULL: absent), JR_STRV (char ** of COUNT),
 *         JR_DEPS (struct job_dep * of COUNT), JR_VALUE (a number, flag
 *         or enum held in the struct; COUNT unused), JR_PTR (one struct
 *         of its own on the heap, NULL: absent; COUNT unused)
 */
#define JOB_REQUEST_FIELDS(X)                                                                      \
	X("name", JR_STR, name, argc, true)                                                        \
	X("command", JR_STRV, argv, argc, false)                                                   \
	X("cwd", JR_STR, cwd, argc, false)                                                         \
	X("env", JR_STRV, env, nenv, false)                                                        \
	X("output", JR_STR, output, argc, false)                                                   \
	X("nodes", JR_VALUE, nodes, argc, true)                                                    \
	X("tasks_per_node", JR_VALUE, tasks_per_node, argc, true)                                  \
	X("gpus_per_task", JR_VALUE, gpu_milli, argc, true)                                        \
	X("gpu_types", JR_STRV, gpu_types, ngpu_types, true)                                       \
	X("cpus_per_task", JR_VALUE, cpus_per_task, argc, true)                                    \
	X("mem_mib", JR_VALUE, mem_mib, argc, true)                                                \
	X("time_limit_s", JR_VALUE, time_limit_s, argc, true)                                      \
	X("grace_s", JR_VALUE, grace_s, argc, true)                                                \
	X("requeue", JR_VALUE, requeue, argc, true)                                                \
	X("class", JR_STR, cls, argc, true)                                                        \
	X("queue", JR_STR, queue, argc, true)                                                      \
	X("gpu_mem_mib", JR_VALUE, gpu_mem_mib, argc, true)                                        \
	X("gpu_tflops", JR_VALUE, gpu_tflops, argc, true)                                          \
	X("switches", JR_VALUE, switches, argc, true)                                              \
	X("constraint", JR_STR, constraint, argc, true)                                            \
	X("tolerate", JR_STR, tolerate, argc, true)                                                \
	X("pool", JR_STR, pool, argc, true)                                                        \
	X("spread", JR_STR, spread, argc, true)                                                    \
	X("within", JR_STR, within, argc, true)                                                    \
	X("mixed_types", JR_VALUE, mixed_types, argc, true)                                        \
	X("image", JR_STR, image, argc, false)                                                     \
	X("mounts", JR_STRV, mounts, nmounts, false)                                               \
	X("ckpt_marker", JR_VALUE, ckpt_marker, argc, false)                                       \
	X("after", JR_DEPS, after, nafter, true)                                                   \
	X("begin_ms", JR_VALUE, begin_ms, argc, true)                                              \
	X("comment", JR_STR, comment, argc, true)                                                  \
	X("error", JR_STR, error, argc, false)                                                     \
	X("slurm_env", JR_VALUE, slurm_env, argc, false)                                           \
	X("nccl_check", JR_VALUE, nccl_check, argc, false)                                         \
	X("signal", JR_VALUE, signal, argc, true)                                                  \
	X("array", JR_STR, array, argc, false)                                                     \
	X("nodelist", JR_STRV, nodelist, nnodelist, true)                                          \
	X("exclude", JR_STRV, exclude, nexclude, true)                                             \
	X("exclusive", JR_VALUE, exclusive, argc, true)                                            \
	X("pty", JR_VALUE, pty, argc, false)                                                       \
	X("attempt_marks", JR_VALUE, no_attempt_marks, argc, false)                                \
	X("stall_after_s", JR_VALUE, stall_after_s, argc, true)                                    \
	X("on_stall", JR_VALUE, on_stall, argc, true)                                              \
	X("restart", JR_VALUE, restart, argc, true)                                                \
	X("spares", JR_VALUE, spares, argc, true)                                                  \
	X("ckpt_signal", JR_VALUE, ckpt_signal, argc, true)                                        \
	X("nodes_max", JR_VALUE, nodes_max, argc, true)                                            \
	X("preemptible_any", JR_VALUE, preemptible_any, argc, true)                                \
	X("service", JR_STR, service, argc, false)                                                 \
	X("probe", JR_PTR, probe, argc, false)

/* The keys of the table, NULL-terminated. */
extern const char *const job_request_keys[];
/* Whether `tenk update` may change key of a waiting job. */
bool job_request_updatable(const char *key);
/* The keys update may change, for an error that lists them ("name,
 * time_limit_s, ..."). */
const char *job_request_updatable_list(void);
/* About what r holds in memory, in bytes: the struct, and every string and
 * list it points to. */
int64_t job_request_bytes(const struct job_request *r);

void job_request_release(struct job_request *r);
/* Returns a new JSON object (caller owns the reference). */
json_t *job_request_pack(const struct job_request *r);
/* Strictly decodes and validates a request from a user. */
int job_request_unpack(json_t *j, struct job_request *ret, struct tk_error *err);
/* A deep copy of r (an array's element); *ret is the caller's to release. */
void job_request_copy(const struct job_request *r, struct job_request *ret);
/* Default output pattern when none is given. */
#define MODEL_DEFAULT_OUTPUT "tenk-%j.out"

/* Status of one task (one process the agent starts) of an attempt. */
enum task_state { TASK_WAITING, TASK_RUNNING, TASK_EXITED, TASK_LOST, TASK_STATE_MAX };
const char *task_state_name(enum task_state s);

struct task_status {
	enum task_state state;
	int exit_code; /* when EXITED: the code, or 128+signal */
	int signal;    /* when EXITED by a signal: its number, else 0 */
	int64_t start_ms;
	int64_t end_ms;
	/* where its attempt began in its output and error files (earlier
	 * attempts' output is before): what its logs start from */
	int64_t out_from, err_from;
};

/* ---- checkpoints (ckpt.c) ------------------------------------------------------ */

#define MODEL_CKPT_TAG_MAX 128 /* a tag's name, with the NUL */
/* jobs one scheduling pass starts at most, by default: the pass at a
 * hundred thousand accelerators and a million waiting stays near 100 ms
 * (bench/sched), so the server answers between passes */
#define SCHED_CONFIG_MAX_STARTS 4096
#define MODEL_MAX_CKPTS 16	 /* committed checkpoints a job's record keeps */
#define MODEL_MAX_CKPT_PENDING 8 /* tags an attempt has uploads of, not yet committed */

/* "sha256:" and 64 lowercase hex digits. */
bool model_digest_valid(const char *d);
/* A tag's name: 1 to 127 of [A-Za-z0-9._-], not starting with '.'. */
bool model_ckpt_tag_valid(const char *tag);

/*
 * A checkpoint of a job: tag TAG written by attempt `attempt`, each of its
 * nnodes nodes' part in the store at STORE/JOB/TAG/aATTEMPT/nRANK/ with the
 * manifest whose SHA-256 is digests[RANK]. Committed once every node's is
 * there ("" while a node's is not, in an attempt's pending list).
 */
struct ckpt {
	char tag[MODEL_CKPT_TAG_MAX];
	int64_t step;
	int attempt;
	int nnodes;
	char (*digests)[MODEL_DIGEST_MAX];
	int64_t bytes;	   /* summed over the nodes */
	int64_t upload_ms; /* the slowest node's upload */
	int64_t write_ms;  /* the slowest node's write of it, by the job (0: not known) */
	int64_t at_ms;	   /* committed (or the first upload, while pending) */
};

void ckpt_release(struct ckpt *c);
json_t *ckpt_pack(const struct ckpt *c);
int ckpt_unpack(json_t *j, struct ckpt *ret, struct tk_error *err);
/* Deep copy. */
void ckpt_copy(struct ckpt *dst, const struct ckpt *src);

/* Where an attempt's restore stands on one node. */
enum restore_state { RESTORE_WAITING, RESTORE_DONE, RESTORE_FAILED, RESTORE_STATE_MAX };
/* "waiting", "done", "failed". */
const char *restore_state_name(enum restore_state r);

/* The part of an attempt on one node: which devices, in which share. */
struct attempt_node {
	char name[MODEL_NAME_MAX];
	int ndev;
	int devs[MODEL_MAX_ACCELS];
	int milli; /* share of each device held, MODEL_MILLI for whole ones */
	/* what its processes used there (from its cgroup): CPU time, the most
	 * memory held; 0 where unknown */
	int64_t cpu_ms;
	int64_t mem_peak_mib;
	/* its accelerators' model (the catalogue's name; "" for none), the
	 * energy they used over the attempt (their share of it; -1: unknown),
	 * and their busy time (utilization times wall time, summed) */
	char model[MODEL_NAME_MAX];
	int64_t energy_mj;
	int64_t gpu_busy_ms;
	/* the image's digest as its agent resolved the job's reference; "" while
	 * not yet known (or for a job on the host) */
	char digest[MODEL_DIGEST_MAX];
	/* the restore of the attempt's checkpoint there */
	enum restore_state restore;
	int64_t restore_bytes;	/* moved from the store (0: its own copy was intact) */
	int64_t restore_dur_ms; /* how long it took */
	/* --nccl-check: what NCCL's log there says of its connections, by
	 * transport (all 0: nothing yet); fallback: some went between nodes
	 * over sockets though the node has an ACTIVE RDMA port; line: the
	 * first of those, NCCL's words */
	int nccl[NCCL_TR_MAX];
	char nccl_network[32];
	char nccl_line[200];
	bool nccl_fallback;
	/* a replica's probe (job_probe): it passed last (in rotation), and
	 * when that last changed (0: never probed) */
	bool ready;
	int64_t ready_ms;
};

/* ---- training metrics: what a job writes to $TENK_METRICS (train.c) ---------- */

#define MODEL_TRAIN_MAX 16	/* names one attempt reports */
#define MODEL_TRAIN_NAME_MAX 48 /* a name, with its NUL */
#define MODEL_TRAIN_LINE_MAX 1024
#define MODEL_TRAIN_PLOTTED 4	/* names whose history is kept: the first ones seen */
#define MODEL_TRAIN_HISTORY 240 /* points of it kept */

/* One line, "step=120 loss=2.31 lr=3e-4": its step (-1: none) and values. */
struct train_point {
	int64_t step;
	int64_t at_ms;
	int n;
	char name[MODEL_TRAIN_MAX][MODEL_TRAIN_NAME_MAX];
	double value[MODEL_TRAIN_MAX];
};
/* What an attempt has reported: the newest value of each name, and a
 * bounded history of the first MODEL_TRAIN_PLOTTED of them (when full,
 * every other point goes, so the curve keeps its shape over the run). */
struct train_metrics {
	struct train_point last;
	int64_t offset; /* the end of the last line taken in its file (0: none said) */
	int nplot;
	int nhist;
	int64_t hist_step[MODEL_TRAIN_HISTORY];
	int64_t hist_ms[MODEL_TRAIN_HISTORY]; /* when each was written (0: not known) */
	double hist[MODEL_TRAIN_HISTORY][MODEL_TRAIN_PLOTTED]; /* NaN: not in that line */
};

/* Parses a line of "NAME=NUMBER" words (NAME [A-Za-z_][A-Za-z0-9_./-]*;
 * "step" an integer); words that are not are skipped. Returns the values
 * found (0: the line says nothing). */
int train_line_parse(const char *line, size_t len, struct train_point *p);
/* Merges p into m: newest values, and a point of history. */
void train_metrics_add(struct train_metrics *m, const struct train_point *p);
json_t *train_point_pack(const struct train_point *p);
int train_point_unpack(json_t *j, struct train_point *p, struct tk_error *err);
json_t *train_metrics_pack(const struct train_metrics *m);
int train_metrics_unpack(json_t *j, struct train_metrics *m, struct tk_error *err);

/* ---- reference runs (reference.c): the same numbers before and after a change --- */

#define REF_MAX_STEPS 2000     /* a loss curve's steps */
#define REF_MAX_PARAMS 1024    /* final parameters, or a summary of them */
#define REF_STEP_JUDGED_S 0.01 /* steps shorter are too short to time well */

enum ref_source { REF_SOURCE_TENK, REF_SOURCE_COMMAND };

/* One run of a reference: the loss at every step, the final parameters,
 * the median step time (0: not said). */
struct reference {
	enum ref_source source;
	char command[1024]; /* the site's command ("" for tenk's own) */
	int nloss, nparams;
	double *loss, *params;
	double step_s;
};

/* {"loss": [...], "params": [...], "step_s": S | [...], "source", "command"}:
 * every number finite, 1..REF_MAX_STEPS losses, 1..REF_MAX_PARAMS
 * parameters; step_s per step gives its median. */
int reference_unpack(json_t *j, struct reference *ret, struct tk_error *err);
json_t *reference_pack(const struct reference *r);
void reference_release(struct reference *r);
/* The (upper) median of v[0..n), which it sorts: a reference's step time. */
double reference_median(double *v, int n);
/* The first 16 hex digits of the SHA-256 of the losses' and parameters'
 * bits: equal digests, the same numbers. */
void reference_digest(const struct reference *r, char out[17]);

enum ref_verdict {
	REF_SAME,      /* bit for bit */
	REF_WITHIN,    /* within the tolerance */
	REF_DIFFERENT, /* over it (or not bit for bit, with none given) */
	REF_SLOWER,    /* the same numbers, its steps slower than the slack allows */
	REF_SHAPE,     /* not the same run: steps or parameters in another number */
	REF_VERDICT_MAX
};
const char *reference_verdict_name(enum ref_verdict v);

struct ref_compare {
	enum ref_verdict verdict;
	bool bitwise;
	/* the largest difference, over the curve's (the parameters') largest
	 * magnitude */
	double loss_diff, param_diff;
	int first_step;	   /* the first step whose loss differs, from 0 (-1: none) */
	int first_param;   /* the first parameter that differs (-1: none) */
	double step_ratio; /* after's step time over before's (0: not known) */
	char text[400];	   /* for people: where it differs, and by how much */
};

/* after against before: the same bits, or (tolerance > 0) every
 * difference within tolerance of its scale; then a step no slower than
 * 1 + step_slack times before's (where before's steps take
 * REF_STEP_JUDGED_S or more; step_slack 0: not judged). */
void reference_compare(const struct reference *before, const struct reference *after,
		       double tolerance, double step_slack, struct ref_compare *ret);
json_t *reference_compare_pack(const struct ref_compare *c);

/* ---- goodput (goodput.c): where a job's time went ---------------------------- */

/* Every ms from submission to the job's end (or now) in one part: before
 * its first start; waiting to be placed again; restoring checkpoints;
 * from each start (and restore) to its first training line; training
 * kept, less the time its committed checkpoints took to write; that
 * time; training thrown away (after the last checkpoint the next attempt
 * restored); from each failure to its attempt's end. */
struct goodput {
	int64_t wall_ms, queued_ms, placing_ms, restoring_ms, starting_ms, productive_ms, lost_ms,
		detecting_ms;
	int64_t checkpointing_ms; /* of the kept training, writing checkpoints */
	int failures;		  /* attempts that ended without finishing the job */
	int64_t steps_lost;	  /* steps done again */
	double ratio; /* effective training time: productive over the time since its first
		       * start (-1: not started) */
};
struct job;
void goodput_of(const struct job *j, int64_t now, struct goodput *g);
/* The parts of attempt index alone (with the wait before it, and for
 * the last what follows it); wall_ms their sum. */
void goodput_attempt(const struct job *j, int index, int64_t now, struct goodput *g);
json_t *goodput_pack(const struct goodput *g);
/* The model FLOP/s attempt a's newest lines say it achieves: tokens_per_s
 * times flops_per_token, samples_per_s times flops_per_sample, or
 * model_flops (a step's) over its median time a step; < 0: they do not
 * say. Over the peak of the cards it holds: its model FLOPs utilisation. */
struct attempt;
double goodput_flops(const struct attempt *a);

/* Why an attempt ended: what accounting classes it by (sacct's PREEMPTED,
 * NODE_FAIL, REQUEUED for one that is not its job's last). Its reason, the
 * words beside it, is for people only. */
enum attempt_end {
	ATTEMPT_END_NONE, /* not ended (or ended before causes were kept) */
	ATTEMPT_END_COMPLETED,
	ATTEMPT_END_FAILED, /* a task failed (the job may have gone again) */
	ATTEMPT_END_TIMEOUT,
	ATTEMPT_END_CANCELLED,
	ATTEMPT_END_PREEMPTED,
	ATTEMPT_END_NODE_LOST, /* a node of it was lost, faulty, or its agent went */
	ATTEMPT_END_REQUEUED,  /* by a user or an operator (tenk requeue) */
	ATTEMPT_END_RESIZED,   /* an elastic gang grew at a checkpoint */
	ATTEMPT_END_MAX
};
/* "", "completed", "failed", "timeout", "cancelled", "preempted",
 * "node_lost", "requeued", "resized". */
const char *attempt_end_name(enum attempt_end e);

struct attempt {
	int number; /* 1, 2, ... */
	int64_t start_ms;
	int64_t end_ms; /* 0 while not ended */
	bool ended;	/* every task exited or was lost; resources are free */
	/* when what ended it happened, as near as the server knows: a node's
	 * last word before it was lost, the first task to fail (0: not a
	 * failure, or as it ended); what goodput counts detection from */
	int64_t fail_ms;
	/* the time its committed checkpoints took the job to write (each the
	 * slowest node's), summed: training time spent saving */
	int64_t ckpt_ms;
	char master_addr[MODEL_ADDR_MAX];
	int master_port;
	int nnodes;
	struct attempt_node *nodes;
	int ntasks; /* nnodes * tasks_per_node; task i runs on node i / tasks_per_node */
	struct task_status *tasks;
	enum attempt_end end;	       /* why it ended */
	char reason[MODEL_REASON_MAX]; /* ... for people */
	/* an image job's: the digest every node resolved the reference to;
	 * its tasks start only once it is set */
	char digest[MODEL_DIGEST_MAX];
	/* the checkpoint it restores before its tasks start ("": none), and
	 * whether every node has (restore_go); restore_ms: from the start to go */
	char restore_tag[MODEL_CKPT_TAG_MAX];
	int64_t restore_step;
	int restore_attempt;
	bool restore_go;
	int64_t restore_ms;
	/* tags some of its nodes have uploaded, waiting for the rest */
	int npend;
	struct ckpt *pend;
	/* what its tasks wrote to $TENK_METRICS; NULL: nothing yet */
	struct train_metrics *train;
	/* it started in place: on the nodes its job held when the attempt
	 * before failed, without a pass; replaced: the node of that attempt
	 * it left for another ("": none) */
	bool in_place;
	char replaced[MODEL_NAME_MAX];
	/* milli-device-milliseconds and node-milliseconds its job's spares
	 * (--spares) were held idle while it was the job's newest attempt:
	 * charged with it (devices, and each spare's CPUs and memory) */
	int64_t spare_mdev_ms;
	int64_t spare_node_ms;
};

struct job {
	int64_t id;
	char owner[MODEL_NAME_MAX];
	enum job_state state;
	int64_t submit_ms;
	int64_t end_ms;
	int exit_code;		       /* final: 0, a task's code, or 128+signal; -1 if none ran */
	int failures;		       /* requeues spent on the job's own failures */
	char reason[MODEL_REASON_MAX]; /* why it waits or why it ended */
	/* the server's own work (a validation run), placed by the server on the
	 * nodes it names rather than by the scheduler */
	bool system;
	/* the Unix account its tasks run as ("" for a system job: the agent's
	 * own); decided at submission from the owner */
	char run_as[MODEL_NAME_MAX];
	struct job_request req;
	int nattempts;
	struct attempt *attempts;
	/* its committed checkpoints, oldest first (at most MODEL_MAX_CKPTS) */
	int nckpts;
	struct ckpt *ckpts;
	bool held; /* held by a user (tenk hold): it waits until released */
	/* an element of an array: its first element's id (0: not in one), its
	 * index, how many elements may run at once (0: any) and how many
	 * there are (ids array_job .. array_job + array_count - 1) */
	int64_t array_job;
	int array_index;
	int array_cap;
	int array_count;
	/* least attained service: the service that orders it counts from
	 * this attempt on (it was promoted back to the first level while
	 * waiting for it); 0: from the first */
	int las_from;
};

void job_release(struct job *j);
void attempt_release(struct attempt *a);
/* The API's and the store's form of a job. */
json_t *job_pack(const struct job *j);
/* Decodes what job_pack wrote (from the store); strict like user input. */
int job_unpack(json_t *j, struct job *ret, struct tk_error *err);
/* Returns the newest attempt, or NULL. Borrowed. */
struct attempt *job_current_attempt(const struct job *j);

/* ---- node states ------------------------------------------------------------ */

/*
 * A node's state, as the API and `tenk nodes` show it. Liveness comes from
 * its agent (register, heartbeats), the rest from operators and validation;
 * only UP takes new work:
 *
 *   UNKNOWN --register--> UP --no heartbeat for the node timeout--> DOWN
 *                         UP <--a heartbeat, or its agent registers-- DOWN
 *   UP --drain--> DRAINING --its last part ends--> DRAINED --resume--> UP
 *                 DRAINING --resume--> UP
 *   UP --tenk validate--> VALIDATING --pass--> UP
 *                                    --fail--> DRAINED ("validate: LAYER: why")
 *   UP --require_validation and no pass yet--> UNVALIDATED --pass--> UP
 *
 * A node that is down is DOWN whatever else holds. The server works the
 * state out of liveness, the drain mark, the work still running there and
 * the node's validation, in one place (state_node_state).
 */
enum node_state {
	NODE_UNKNOWN,	  /* not heard from since the server started */
	NODE_UP,	  /* takes work */
	NODE_DOWN,	  /* its agent missed heartbeats for the node timeout */
	NODE_DRAINING,	  /* drained; work still runs there */
	NODE_DRAINED,	  /* drained and empty */
	NODE_VALIDATING,  /* a validation run holds it */
	NODE_UNVALIDATED, /* the cluster requires a pass it has not had */
	NODE_UNREACHABLE, /* silent, and its witness group too: held, nothing moves */
	NODE_STATE_MAX
};

const char *node_state_name(enum node_state s);

/* ---- node records ---------------------------------------------------------- */

/* Who drained a node, which decides what may resume it: an operator's
 * drain only an operator's resume; a validation's also the node's next
 * passing validation. The reason beside it is for people only. */
enum drain_source {
	DRAIN_NONE,	  /* not drained */
	DRAIN_OPERATOR,	  /* tenk drain (and drains from stores before sources were kept) */
	DRAIN_FAULT,	  /* its agent reported a fault */
	DRAIN_VALIDATION, /* a validation run failed on it */
	DRAIN_LEMON,	  /* it failed as often as the cluster's lemon rule allows */
	DRAIN_MAINT,	  /* a maintenance window (tenk reserve) started */
	DRAIN_ROLLOUT,	  /* a rollout's stage took it (tenk rollout) */
	DRAIN_SOURCE_MAX
};
/* "", "operator", "fault", "validation", "lemon", "maintenance", "rollout". */
const char *drain_source_name(enum drain_source d);

/* A node's last validation verdict. */
enum verdict { VERDICT_NONE, VERDICT_PASS, VERDICT_FAIL, VERDICT_MAX };
/* "", "pass", "fail". */
const char *verdict_name(enum verdict v);

/* What the server keeps about a node across restarts. Liveness (up, down) is
 * not stored: it is learned anew from the agent after every start. */
/* A witness group as a node record keeps it: its id (16 hex digits,
 * wire.h; "": none) and its members' names (n -1: not known, an id the
 * server never sent). */
#define MODEL_WITNESS_MAX 9
struct node_witness {
	char id[17];
	int n;
	char member[MODEL_WITNESS_MAX][MODEL_NAME_MAX];
};

/* What happened to a node, newest last in its record (at most
 * MODEL_NODE_HISTORY kept): its own failures, which the lemon rule counts,
 * and what was done about them. */
enum node_event_kind {
	NODE_EV_LAUNCH_FAILED,	   /* it could not start a job's tasks (its own failure) */
	NODE_EV_TASKS_LOST,	   /* it went down, or its agent lost the tasks */
	NODE_EV_FAULT,		   /* its agent reported a fault (ECC, Xid, disk, health check) */
	NODE_EV_VALIDATION_FAILED, /* a validation run failed on it */
	NODE_EV_LEMON,		   /* drained by the lemon rule */
	NODE_EV_RESUMED,	   /* resumed by an operator */
	NODE_EV_LABELED,	   /* an operator set or removed labels */
	NODE_EV_TAINTED,	   /* an operator added or removed taints */
	NODE_EV_STACK_CHANGED,	   /* its agent reported another software stack */
	NODE_EV_KIND_MAX
};
/* "launch_failed", "tasks_lost", "fault", "validation_failed", "lemon", "resumed". */
const char *node_event_kind_name(enum node_event_kind k);
/* Whether the lemon rule counts it. */
bool node_event_is_failure(enum node_event_kind k);
#define MODEL_NODE_HISTORY 16
#define MODEL_NODE_EVENT_DETAIL 120
struct node_event {
	int64_t at_ms;
	enum node_event_kind kind;
	int64_t job; /* the job it happened to; 0: none */
	int attempt; /* ... its attempt */
	char detail[MODEL_NODE_EVENT_DETAIL];
};

/* A window in which a node is kept (tenk reserve): for maintenance (no
 * users and no queue: the server drains the node at the start and resumes
 * it at the end) or for some users or one queue, whose jobs alone run
 * there from the start. Every node it names carries it; its name is the
 * cluster's only one of that name. */
#define MODEL_NODE_WINDOWS 4
#define MODEL_WINDOW_USERS 256
struct node_window {
	char name[MODEL_NAME_MAX];
	int64_t start_ms, end_ms;
	char reason[MODEL_REASON_MAX];
	char users[MODEL_WINDOW_USERS]; /* "alice,bob" (model_names_parse's form); "": none */
	char queue[MODEL_NAME_MAX];	/* "": none */
	char by[MODEL_NAME_MAX];	/* who made it */
	int64_t made_ms;
};
/* Is it for maintenance (for nobody)? */
static inline bool node_window_maint(const struct node_window *w)
{
	return !w->users[0] && !w->queue[0];
}
json_t *node_window_pack(const struct node_window *w);
int node_window_unpack(json_t *j, struct node_window *ret, struct tk_error *err);

struct node_record {
	struct node_inventory inv;
	bool drained;
	enum drain_source drain_source; /* DRAIN_NONE exactly when not drained */
	char drain_reason[MODEL_REASON_MAX];
	char agent_id[MODEL_NAME_MAX]; /* the agent process last registered */
	int64_t registered_ms;
	int64_t joined_ms; /* when it first joined; 0: before this was kept */
	/* its credential (the SHA-256 of the token its agent was given when it
	 * joined; "" none yet); admit: an admin lets the next agent that joins
	 * under this name in (tenk nodes admit); revoked: its credential was
	 * ended (tenk nodes revoke), and only an admit lets it back */
	char cred_sha256[65];
	bool admit;
	bool revoked;
	/* labels an operator set (tenk nodes label), over its agent's; its
	 * taints ("inference,dev"): only jobs that tolerate each run there */
	char labels_set[MODEL_LABELS_MAX];
	char taints[MODEL_LABELS_MAX];
	/* its last validation (tenk validate --nodes): the verdict (NONE:
	 * never validated); the first failing layer and why */
	enum verdict verdict;
	char verdict_layer[16];
	char verdict_reason[MODEL_REASON_MAX];
	int64_t verdict_ms;
	int64_t verdict_job;	/* the validation job */
	json_t *verdict_checks; /* owned: the checks' figures, thresholds, verdicts; or NULL */
	/* its witness groups (fence.h): the last the server sent its agent, and
	 * the one its agent said it holds. The agent renews its leases by one
	 * of them (fence.h), so the server declares it DOWN only when the hold
	 * rule allows it in each. */
	struct node_witness witness_sent, witness_acked;
	/* its history, oldest first */
	int nhistory;
	struct node_event history[MODEL_NODE_HISTORY];
	/* the windows it is in that have not ended, soonest first */
	int nwindows;
	struct node_window windows[MODEL_NODE_WINDOWS];
};

/* Adds ev to r's history (the oldest goes when it is full). */
void node_record_event(struct node_record *r, const struct node_event *ev);
json_t *node_event_pack(const struct node_event *ev);

json_t *node_record_pack(const struct node_record *r);
int node_record_unpack(json_t *j, struct node_record *ret, struct tk_error *err);
void node_record_release(struct node_record *r);
/* The "validation" object of the API and the store; NULL when never validated. */
json_t *node_verdict_pack(const struct node_record *r);

/* ---- priority classes and queues -------------------------------------------------- */

#define MODEL_MAX_CLASSES 32
#define MODEL_MAX_QUEUES 1024
#define MODEL_MAX_QUEUE_USERS 256
#define MODEL_MAX_CLASS_ALLOW 32
#define MODEL_MAX_ROLES 16

/*
 * Who may use a class or a queue: a list of entries, each a tenk user's
 * name ("alice"), a Unix group ("group:ml": its members, as the server's
 * NSS sees the user's Unix account) or a role ("role:oncall", which tenk
 * users add --roles gives). An empty list: everyone. Admins may use all.
 */
bool model_allow_entry_valid(const char *s);
/* obj[key] (absent: leaves *n alone) as an allow list of at most max. */
int allow_list_unpack(json_t *obj, const char *key, char (*out)[MODEL_NAME_MAX], int max, int *n,
		      struct tk_error *err);
json_t *allow_list_pack(const char (*list)[MODEL_NAME_MAX], int n);

/* A class ordered by least attained service ("order": "las", sched.h) has
 * at most this many levels; without "las_limits_gpu_h", these three limits
 * (accelerator-hours) and this promotion knob (issue 43: on bench/sim/resv's
 * stream, at three seeds, with checkpoints or saving in the grace, each
 * cut the mean by 3-5% of backfill's and the p99 as much or less against
 * 1, 16 and 8; neutral on the spot and openb streams). */
#define MODEL_LAS_MAX_LEVELS 8
#define MODEL_LAS_DEFAULT_LIMITS                                                                   \
	{                                                                                          \
		1.0, 16.0, 128.0                                                                   \
	}
#define MODEL_LAS_DEFAULT_NLIMITS 3
#define MODEL_LAS_DEFAULT_MAX_STRETCH 4.0
#define MODEL_LAS_DEFAULT_MIN_RUN_S 3600
#define MODEL_LAS_DEFAULT_MAX_LOSS_S 600
#define MODEL_LAS_DEFAULT_GITTINS true

struct class_spec {
	char name[MODEL_NAME_MAX];
	int priority;	  /* higher is scheduled first */
	bool may_preempt; /* its jobs may preempt preemptible jobs of lower classes */
	bool preemptible; /* its jobs may be preempted */
	int nallow;	  /* who may submit to it (config "allow"); none: everyone */
	char allow[MODEL_MAX_CLASS_ALLOW][MODEL_NAME_MAX];
	/* "order": "las": its jobs go by least attained service, in levels
	 * cut at "las_limits_gpu_h" (ascending), a waiting job going back to
	 * the first level after waiting "las_max_stretch" times as long as it
	 * has run so far ("las_promote", its older name); "fifo" (default): by
	 * submission */
	bool las;
	int las_nlimits;
	double las_limit_gpu_h[MODEL_LAS_MAX_LEVELS - 1];
	double las_max_stretch;
	int64_t las_min_run_s; /* "las_min_run_s": preempted for an earlier level only after */
	/* "las_max_loss_s": ... and only while it would lose at most this much
	 * (since its last checkpoint, and its restore); -1: no bound */
	int64_t las_max_loss_s;
	/* "las_index": "gittins" (default): within a level, waiting jobs by
	 * the Gittins index of their service under their kind's history
	 * (sched.h), where it has enough; "levels": by submission */
	bool las_gittins;
};

/* The levels a class has in the scheduler's order: 1, or 1 + its limits. */
int class_spec_levels(const struct class_spec *c);

/* The server's scheduling configuration (DATA/config.json):
 *   {"classes": [{"name": "prod", "priority": 100, "may_preempt": true,
 *                 "preemptible": false, "allow": ["group:ml"],
 *                 "order": "fifo" | "las", "las_limits_gpu_h": [1, 16, 128],
 *                 "las_max_stretch": 4, "las_min_run_s": 3600,
 *                 "las_max_loss_s": 600, "las_index": "gittins"}, ...],
 *    "default_class": "normal", "fair_share_half_life_s": 604800,
 *    "require_validation": false, "validation_args": ["--quick"]}
 * Without a file: prod (100, may preempt), normal (50), batch (10,
 * preemptible), default normal, half-life 7 days. */
#define MODEL_MAX_VALIDATION_ARGS 16
#define MODEL_MAX_ALLOWED_IMAGES 32
#define MODEL_MAX_DEFAULT_MOUNTS 16
#define MODEL_DEFAULT_MOUNT_MAX 1024

/*
 * "gpu_health": what the agents hold their accelerators to (the seeds'
 * figures by default). A condition that lasts "for" is a fault of the
 * node, which the server drains with the fault as its reason; remapped
 * rows are faults at once, as ECC errors are. 0 (false) turns a check off.
 */
struct gpu_limits {
	int64_t hold_ms;   /* "for": how long a condition lasts before it is a fault (5 min) */
	int64_t temp_c;	   /* "temp_c": hotter than this (85) */
	int64_t busy_pct;  /* "busy_pct": the utilisation at which a card is busy (80) */
	int64_t power_pct; /* "power_low_pct": drawing under this share of its power
			    * limit while busy (40) */
	bool throttle;	   /* "throttle": clocks slowed for heat or by the power brake
			    * while busy (NVML's reasons; true) */
	bool pcie;	   /* "pcie": a link narrower than its maximum, or slower while
			    * busy (true) */
	int64_t rows;	   /* "remapped_rows": uncorrectable remapped memory rows grown
			    * by this many since the agent started; a remap pending or
			    * failed too (1) */
};

void sched_config_gpu_default(struct gpu_limits *g);

/* The checks an accelerator is held to ("temperature", "throttle",
 * "power", "pcie", "remapped_rows"). */
enum gpu_check {
	GPU_CHECK_TEMPERATURE,
	GPU_CHECK_THROTTLE,
	GPU_CHECK_POWER,
	GPU_CHECK_PCIE,
	GPU_CHECK_ROWS,
	GPU_CHECK_MAX
};
const char *gpu_check_name(enum gpu_check c); /* "?" out of range */
int gpu_check_parse(const char *s, enum gpu_check *ret);

/*
 * A pool ("pools" in config.json): a named set of nodes by label selector
 * (job_constraint_match's syntax), like a Slurm partition, with who may use
 * it ("allow", an allow list), the longest time limit it takes
 * ("max_time"; a job without one gets it) and the fewest accelerators a
 * job must ask for there ("min_gpus"). A node may be in several pools; a
 * job runs in the union of the pools it names that take it. Pools are bits
 * of a mask: MODEL_POOL_NONE marks a node in no pool, MODEL_POOL_NOWHERE a
 * job no pool takes.
 */
#define MODEL_MAX_POOLS 32
#define MODEL_MAX_POOL_ALLOW 16
#define MODEL_POOL_NONE (1ULL << 63)
#define MODEL_POOL_NOWHERE (1ULL << 62)
struct pool_spec {
	char name[MODEL_NAME_MAX];
	char selector[MODEL_CONSTRAINT_MAX];
	int nallow;
	char allow[MODEL_MAX_POOL_ALLOW][MODEL_NAME_MAX];
	int64_t max_time_s; /* 0: any */
	int64_t min_gpus;   /* whole accelerators in all; 0: any */
};

#define MODEL_MAX_SPARE_MODELS 16
#define MODEL_MAX_DOMAIN_LEVELS 8
#define MODEL_MAX_FENCE_ARGS 16 /* power_fence's command: its words */
#define MODEL_FENCE_ARG_MAX 256

struct sched_config {
	struct class_spec classes[MODEL_MAX_CLASSES];
	int nclasses;
	int default_class;
	int64_t half_life_s;
	/* "require_validation": a node that joins, or whose last validation
	 * failed, takes no work until `tenk validate` passes on it; the server
	 * validates a joining node itself, with "validation_args" (options of
	 * tenk validate, e.g. ["--quick"]) */
	bool require_validation;
	/* "require_limits": true (all) or ["memory", "devices", ...]: the
	 * limits (enum node_limit bits) a node must enforce to take work; one
	 * whose agent reports it cannot is drained for it, as for a fault */
	unsigned require_limits;
	int nvalidation_args;
	char validation_args[MODEL_MAX_VALIDATION_ARGS][MODEL_NAME_MAX];
	/* "allow_root_jobs": a job may run as uid 0 (default false: none does);
	 * "admin_unix_user": the account the built-in admin token's jobs run as
	 * ("" : none, and they are refused unless root is allowed) */
	bool allow_root_jobs;
	char admin_unix_user[MODEL_NAME_MAX];
	/* "require_image": every job runs in an image; "allowed_images": the
	 * patterns (model_image_allowed) its image must match, none: any;
	 * "default_mounts": what every image job gets mounted (model_mount_parse,
	 * "." allowed), before its own */
	bool require_image;
	/* "default_image": what a job that names no image runs in ("": none);
	 * it must be allowed (allowed_images) */
	char default_image[MODEL_IMAGE_MAX];
	/* "max_pending_per_user", "max_pending_mib_per_user": what one user's
	 * waiting jobs may number and weigh (their requests); admins are not
	 * held to them */
	int64_t max_pending_per_user;
	int64_t max_pending_mib_per_user;
	/* "submit_rate_per_user", "submit_burst_per_user": submissions (one a
	 * request, an array too) one user may make a second, sustained, and at
	 * once (a token bucket; rate 0: no limit); admins are not held to it */
	double submit_rate_per_user;
	int64_t submit_burst_per_user;
	/* retention, seconds after a job settled (0: forever): "keep_jobs" its
	 * document, "keep_accounting" its row and accounting records; audit
	 * rows "keep_audit" after they were written */
	int64_t keep_jobs_s, keep_accounting_s, keep_audit_s;
	/* a running job that wrote training lines and then none for
	 * "stall_after" is stalled (0, "auto": 10 times its median time between
	 * lines, and at least "stall_min"); a job's own stall_after_s first */
	int64_t stall_after_s, stall_min_s;
	/* "idle_power_after": an accelerator with no work this long is set to
	 * its lowest power limit by its agent, and back before work is placed
	 * on it (0, "0": never) */
	int64_t idle_power_after_s;
	/* "lemon": {"failures": N, "within": "24h"}: a node with N failures of
	 * its own within that time is drained as a lemon (N 0: never) */
	int64_t lemon_failures, lemon_within_s;
	/* "spares": {"H100": 4}: whole idle nodes of each accelerator model
	 * the server keeps out of the passes for restarts in place to swap a
	 * failed node for (a node's model: its first accelerator's) */
	int nspare_pool;
	struct {
		char model[MODEL_NAME_MAX];
		int nodes;
	} spare_pool[MODEL_MAX_SPARE_MODELS];
	struct gpu_limits gpu_health;
	/* jobs one pass starts at most (0: no limit); a pass that reaches it is
	 * followed at once by another, after the server has answered what
	 * waits */
	int64_t max_starts_per_pass;
	int nallowed_images;
	char allowed_images[MODEL_MAX_ALLOWED_IMAGES][MODEL_IMAGE_MAX];
	int ndefault_mounts;
	char default_mounts[MODEL_MAX_DEFAULT_MOUNTS][MODEL_DEFAULT_MOUNT_MAX];
	/* "checkpoint_store": the folder every agent mounts where jobs'
	 * committed checkpoints live ("": none; checkpoints stay on nodes);
	 * "checkpoint_keep": how many committed tags of a job it keeps */
	char checkpoint_store[MODEL_MAX_PATH];
	/* "store": where the server keeps its state, a file or a PostgreSQL
	 * URL (store.h; --store wins over it; read at start only) */
	char store[MODEL_MAX_PATH];
	int64_t checkpoint_keep;
	/* accounting: what an allocated CPU and a GiB of memory cost per hour
	 * ("cpu_price_per_hour", "mem_price_per_gib_hour"; accelerators are
	 * priced in the catalogue), in "currency" (a label, e.g. "USD") */
	double cpu_price_per_hour;
	double mem_price_per_gib_hour;
	char currency[16];
	/* "reservation_patience_s": a class's first waiting job whose start
	 * nobody can tell (running jobs in its way have no time limit) holds
	 * idle resources for itself once it has waited this long (0: at once);
	 * absent (-1): never, later jobs use what is idle */
	int64_t resv_patience_s;
	/* "placement": "dense" (default): single-node jobs of every kind go
	 * where they least fragment what is left, whatever the model's speed;
	 * "fastest": the fastest model that fits first, and only fractions of
	 * a device scored (denser placement costs the fast models' idle time
	 * nothing there, at a measured loss of packing) */
	bool placement_fastest;
	/* "pools": {"top": {"selector": "tier=top", "allow": ["group:llm"],
	 * "max_time": "14d", "min_gpus": 64}}; "default_pool": where a job
	 * that names none goes (absent: to any pool without an allow list,
	 * and to nodes in no pool) */
	int npools;
	int default_pool; /* -1: none */
	struct pool_spec pools[MODEL_MAX_POOLS];
	/* "domain_levels": the names of a fault-domain path's levels, widest
	 * first (default dc, row, rack, pdu): --spread rack means nodes
	 * apart in their paths' first three names */
	int ndomain_levels;
	char domain_levels[MODEL_MAX_DOMAIN_LEVELS][MODEL_NAME_MAX];
	/* "maint_lookahead": a job without a time limit goes on a window's
	 * nodes (tenk reserve) only while the window starts further off than
	 * this (default 24h) */
	int64_t maint_lookahead_s;
	/* "fair_share": "units": a queue's share counts what it holds and
	 * held in weighted units (catalogue_weight), not accelerators */
	bool weighted_share;
	/* "power_fence": {"command": ["fence-node", "{node}"], "after": "8s",
	 * "timeout": "1m", "heartbeat": "1s"}: a node silent for three of
	 * its heartbeats and their delays (fence_power_after; `after` at least)
	 * while its witness group hears the server is powered off by the
	 * command ({node}: its name; {addr}: the address its agent reached
	 * the server from), and its work moves as soon as the command exits
	 * 0, its lease not waited for (fence.h); agents are asked to beat
	 * every `heartbeat` (default 1s). Read at start; none where the
	 * command is empty */
	int npower_fence;
	char power_fence[MODEL_MAX_FENCE_ARGS][MODEL_FENCE_ARG_MAX];
	int64_t power_fence_after_s;	 /* 0: the least that is safe */
	int64_t power_fence_timeout_s;	 /* the command is killed after this */
	int64_t power_fence_heartbeat_s; /* what agents are asked to beat at */
};
/* The depth of the fault-domain level of that name (n characters): 1 for
 * the widest; -1 if none. */
int sched_config_domain_level(const struct sched_config *c, const char *name, size_t n);
/* A job's --spread (max not NULL) or --within text as the depth of one of
 * c's levels (the cap into *max); -1 where it is malformed or names no
 * level. */
int sched_config_domain_rule(const struct sched_config *c, const char *text, int *max);

/* Pools (struct pool_spec). sched_config_pool: the index of the pool of
 * that name (n characters), -1 if none. sched_config_pool_node: the mask of
 * the pools whose selector the labels satisfy (MODEL_POOL_NONE: none; 0
 * where no pool is configured). sched_config_pool_job: the mask of the
 * pools r may run in, by the pools it names (none: the open pools and
 * nodes in no pool) less those that do not take it, by their max_time and
 * min_gpus; MODEL_POOL_NOWHERE when none does, with why (the first pool's
 * reason, for people); 0 where no pool is configured. Who may use a pool
 * is the server's to check. */
int sched_config_pool(const struct sched_config *c, const char *name, size_t n);
uint64_t sched_config_pool_node(const struct sched_config *c, const char *labels);
uint64_t sched_config_pool_job(const struct sched_config *c, const struct job_request *r, char *why,
			       size_t whyn);
json_t *sched_config_pool_pack(const struct sched_config *c, int i);

void sched_config_default(struct sched_config *c);
/* A "placement" value: "dense" or "fastest" (*ret_fastest); -EINVAL for
 * anything else. */
int sched_config_placement_parse(const char *name, bool *ret_fastest);
/* Parses a configuration file's text; on error c is unchanged. */
int sched_config_load_json(struct sched_config *c, const char *text, struct tk_error *err);
/* The index of the class named `name`, or -1. */
int sched_config_class(const struct sched_config *c, const char *name);
json_t *class_spec_pack(const struct class_spec *c);

/* A queue: a team's share of the cluster. */
#define MODEL_MAX_QUEUE_DIMS 8
struct queue_spec {
	char name[MODEL_NAME_MAX];
	int64_t quota_milli;  /* guaranteed accelerators (milli); -1: no quota */
	int64_t borrow_milli; /* beyond the quota, borrowable when idle; -1: unlimited */
	double weight;	      /* fair share against other queues */
	int nusers;	      /* who may submit to it (an allow list); none: everyone */
	char users[MODEL_MAX_QUEUE_USERS][MODEL_NAME_MAX];
	double usage;	     /* decayed milli-accelerator-seconds */
	int64_t usage_at_ms; /* when usage was last brought up to date */
	/* what it may spend per period ("day", "week", "month", UTC; 0: no
	 * budget), in the currency of the catalogue's prices */
	double budget;
	char budget_period[8];
	/* limits in more than accelerators ("limits", "borrow_limits"): one
	 * model's accelerators (its name), weighted units ("units"), CPUs
	 * ("cpus") and memory ("mem_mib"); quota in milli for accelerators and
	 * units; borrow beyond it, 0 by default, -1 without limit */
	int ndims;
	struct queue_dim {
		char name[MODEL_NAME_MAX];
		int64_t quota, borrow;
	} dims[MODEL_MAX_QUEUE_DIMS];
};

json_t *queue_spec_pack(const struct queue_spec *q);
/* Is a limit of that name counted in milli (a model's, "units"), not in
 * CPUs or MiB? Its value for the API (null for -1). */
bool queue_dim_milli(const char *name);
json_t *queue_dim_value(const struct queue_dim *d, int64_t v);
int queue_spec_unpack(json_t *j, struct queue_spec *ret, struct tk_error *err);
/* An amount of money for people: "5,012" (whole units from 100 on), "12.35". */
void model_fmt_amount(double v, char *buf, size_t n);
/* When the budget period holding now_ms began (UTC). */
int64_t queue_budget_period_start(const struct queue_spec *q, int64_t now_ms);
/* Applies a user's change {"gpus", "borrow_limit", "weight", "users",
 * "budget": {"amount", "period"} or null} (any
 * subset; gpus and borrow_limit may be null for none/unlimited). */
int queue_spec_update(struct queue_spec *q, json_t *change, struct tk_error *err);

/* ---- users ------------------------------------------------------------------------ */

/* Someone who may use the API. The token itself is shown once, at creation;
 * only its SHA-256 is kept. */
/* What a user may do: viewer reads everything; user also submits and
 * ends its own jobs; operator also drains, resumes, validates, sets
 * queues and pulls images, and ends any job; admin everything (users,
 * node credentials). */
enum user_access { ACCESS_VIEWER, ACCESS_USER, ACCESS_OPERATOR, ACCESS_ADMIN, ACCESS_MAX };
const char *user_access_name(enum user_access a);
int user_access_parse(const char *s, enum user_access *ret);

struct user_record {
	char name[MODEL_NAME_MAX];
	char token_sha256[65];
	bool admin; /* access == ACCESS_ADMIN */
	enum user_access access;
	int64_t created_ms;
	/* the Unix account its jobs run as on every node (getpwnam there, so a
	 * uid may differ between nodes); default: the same name */
	char unix_user[MODEL_NAME_MAX];
	int nroles; /* roles that allow lists may name ("role:NAME") */
	char roles[MODEL_MAX_ROLES][MODEL_NAME_MAX];
};

/* A Unix account name as tenk takes it: 1..32 bytes of [a-z0-9_.-], not
 * starting with '-' (what useradd accepts, without a trailing '$'). */
bool model_unix_user_valid(const char *s);

json_t *user_record_pack(const struct user_record *u);
/* j["roles"] (absent: none) into u: names, each once. */
/* A user's "admin" (old records) and "access" into u->access and u->admin. */
int user_access_unpack(json_t *j, struct user_record *u, struct tk_error *err);
int user_roles_unpack(json_t *j, struct user_record *u, struct tk_error *err);
int user_record_unpack(json_t *j, struct user_record *ret, struct tk_error *err);
