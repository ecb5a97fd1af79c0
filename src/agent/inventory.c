/*
 * What this machine has: CPUs (those this process may run on), memory, and
 * accelerators. Accelerators are fake when the operator asks (--fake-gpus),
 * else read from NVML, which is loaded with dlopen so the same binary runs
 * on machines without NVIDIA's driver: there it finds none and the node
 * serves CPU jobs.
 */
#include "internal.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

/* The few NVML entry points we need, by their stable C names. */
struct nvml_memory {
	unsigned long long total, free, used;
};
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_shutdown_fn)(void);
typedef int (*nvml_count_fn)(unsigned *);
typedef int (*nvml_handle_fn)(unsigned, void **);
typedef int (*nvml_name_fn)(void *, char *, unsigned);
typedef int (*nvml_mem_fn)(void *, struct nvml_memory *);

static int nvml_detect(const struct catalogue *cat, struct node_inventory *inv)
{
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return 0;
	nvml_init_fn init;
	nvml_shutdown_fn shutdown;
	nvml_count_fn count;
	nvml_handle_fn handle;
	nvml_name_fn name, uuid;
	nvml_mem_fn mem;
	/* POSIX's way to take a function from dlsym without a cast */
	*(void **)&init = dlsym(lib, "nvmlInit_v2");
	*(void **)&shutdown = dlsym(lib, "nvmlShutdown");
	*(void **)&count = dlsym(lib, "nvmlDeviceGetCount_v2");
	*(void **)&handle = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&name = dlsym(lib, "nvmlDeviceGetName");
	*(void **)&uuid = dlsym(lib, "nvmlDeviceGetUUID");
	*(void **)&mem = dlsym(lib, "nvmlDeviceGetMemoryInfo");
	if (!init || !shutdown || !count || !handle || !name || !uuid || !mem || init() != 0) {
		log_warn("NVML found but unusable; this node reports no accelerators");
		dlclose(lib);
		return 0;
	}
	unsigned n = 0;
	if (count(&n) != 0)
		n = 0;
	for (unsigned i = 0; i < n && inv->naccel < MODEL_MAX_ACCELS; i++) {
		void *h;
		char nm[96] = "", id[96] = "";
		struct nvml_memory m = {0};
		if (handle(i, &h) != 0 || name(h, nm, sizeof(nm)) != 0 ||
		    uuid(h, id, sizeof(id)) != 0 || mem(h, &m) != 0)
			continue;
		struct accel *a = &inv->accel[inv->naccel];
		memset(a, 0, sizeof(*a));
		a->index = inv->naccel;
		snprintf(a->uuid, sizeof(a->uuid), "%.*s", (int)sizeof(a->uuid) - 1, id);
		a->mem_mib = (int64_t)(m.total >> 20);
		const struct catalogue_entry *e = catalogue_match(cat, nm, a->mem_mib);
		if (e) {
			snprintf(a->model, sizeof(a->model), "%s", e->name);
			a->tflops = e->tflops;
		} else {
			model_name_sanitize(nm, a->model, sizeof(a->model));
		}
		inv->naccel++;
	}
	shutdown();
	dlclose(lib);
	return 0;
}

static void default_name(char *buf, size_t n)
{
	char host[256] = "";
	if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
		snprintf(host, sizeof(host), "node");
	char *dot = strchr(host, '.');
	if (dot)
		*dot = '\0';
	for (char *p = host; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
			*p = '-';
	snprintf(buf, n, "%.*s", (int)n - 1, host);
}

int agent__inventory_detect(const struct agent_config *cfg, const struct catalogue *cat,
			    struct node_inventory *ret, struct tk_error *err)
{
	struct node_inventory *inv = ret;
	memset(inv, 0, sizeof(*inv));
	if (cfg->name) {
		if (!model_name_valid(cfg->name))
			return tk_errorf(
				err, -EINVAL,
				"--name \"%s\": use 1 to %d letters, digits, '.', '_', '-'",
				cfg->name, MODEL_NAME_MAX - 1);
		snprintf(inv->name, sizeof(inv->name), "%s", cfg->name);
	} else {
		default_name(inv->name, sizeof(inv->name));
	}
	if (cfg->addr && tk_strlcpy(inv->addr, cfg->addr, sizeof(inv->addr)) < 0)
		return tk_errorf(err, -EINVAL, "--addr: too long");
	if (cfg->topology && tk_strlcpy(inv->topology, cfg->topology, sizeof(inv->topology)) < 0)
		return tk_errorf(err, -EINVAL, "--topology: at most %d characters",
				 MODEL_TOPO_MAX - 1);
	if (cfg->domain && (tk_strlcpy(inv->domain, cfg->domain, sizeof(inv->domain)) < 0 ||
			    !model_domain_valid(inv->domain)))
		return tk_errorf(err, -EINVAL,
				 "--domain: \"%.64s\" is not a fault-domain path: 1 to 8 names of "
				 "letters, digits, '.', '_', '-' joined by '/', widest first, e.g. "
				 "dc1/row3/rack07/pdu2",
				 cfg->domain);
	if (cfg->labels &&
	    node_labels_parse(cfg->labels, inv->labels, sizeof(inv->labels), err) < 0) {
		char was[sizeof(err->text)];
		snprintf(was, sizeof(was), "%s", err->text);
		return tk_errorf(err, -EINVAL, "--%.*s", (int)sizeof(was) - 3, was);
	}
	cpu_set_t set;
	if (cfg->cpus > 0)
		inv->cpus = cfg->cpus;
	else if (sched_getaffinity(0, sizeof(set), &set) == 0)
		inv->cpus = CPU_COUNT(&set);
	else
		inv->cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (inv->cpus < 1)
		inv->cpus = 1;
	struct sysinfo si;
	if (cfg->mem_mib > 0)
		inv->mem_mib = cfg->mem_mib;
	else if (sysinfo(&si) == 0)
		inv->mem_mib = (int64_t)((unsigned long long)si.totalram * si.mem_unit >> 20);
	if (cfg->fake_gpus)
		return model_fake_accels(cfg->fake_gpus, cat, inv->name, inv->accel,
					 MODEL_MAX_ACCELS, &inv->naccel, err);
	return nvml_detect(cat, inv);
}

void agent__isolation_detect(struct node_inventory *inv)
{
	static const struct {
		enum cg_ctrl ctrl;
		unsigned limit;
	} map[] = {{CG_MEMORY, NODE_LIMIT_MEMORY},
		   {CG_CPUSET, NODE_LIMIT_CPUS},
		   {CG_PIDS, NODE_LIMIT_PROCESSES},
		   {CG_DEVICES, NODE_LIMIT_DEVICES}};
	unsigned missing = (1u << CG_CTRL_MAX) - 1;
	struct tk_error err = {0};
	int v = 0;
	/* the shims make cgroups as root only (launch.c) */
	if (geteuid() == 0 && (v = cg_probe("/proc/self/mountinfo", "/proc/self/cgroup", inv->name,
					    &missing, &err)) < 0) {
		log_err("cannot make this node's cgroups (%s): its jobs will fail to start",
			err.text);
		v = 0;
	}
	inv->isolation_known = true;
	inv->cgroup_version = v;
	inv->unenforced = 0;
	for (size_t i = 0; i < ARRAY_SIZE(map); i++)
		if (missing & (1u << map[i].ctrl))
			inv->unenforced |= map[i].limit;
	if (!inv->naccel) /* no devices to keep apart */
		inv->unenforced &= ~(unsigned)NODE_LIMIT_DEVICES;
	if (!inv->unenforced)
		return;
	char names[96] = "";
	for (unsigned b = 1; b & NODE_LIMIT_ALL; b <<= 1)
		if (inv->unenforced & b)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
				 names[0] ? ", " : "", node_limit_name(b));
	if (geteuid() != 0)
		log_warn("the agent is not root: its jobs run as its own user, in no cgroup; "
			 "their %s are not limited",
			 names);
	else if (v == 0)
		log_warn("no cgroup file system: jobs' %s are not limited", names);
	else
		log_warn("cgroup v%d: jobs' %s cannot be limited on this node%s%s", v, names,
			 inv->unenforced & ~(unsigned)NODE_LIMIT_DEVICES
				 ? "; the agent's cgroup was not given those controllers: run it "
				   "in a cgroup of its own that has them (systemd's Delegate=yes)"
				 : "",
			 v == 2 && (inv->unenforced & NODE_LIMIT_DEVICES)
				 ? "; no device program (BPF) could be attached to its cgroups: "
				   "GPUs are kept apart by CUDA_VISIBLE_DEVICES alone"
				 : "");
}
