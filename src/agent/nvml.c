/*
 * NVML for the agent's health checks and telemetry, loaded with dlopen (a
 * node without NVIDIA's driver, or with fake devices, has none): the
 * node's accelerators in inventory order, what each reads now, and Xid
 * events polled without waiting.
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define NVML_TEMPERATURE_GPU 0
#define NVML_CLOCK_SM 1
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_AGGREGATE_ECC 1
#define NVML_EVENT_XID 0x8ULL

struct nvml_utilization {
	unsigned gpu, memory; /* percent */
};
struct nvml_memory {
	unsigned long long total, free, used;
};
/* NVML's nvmlEventData_t */
struct nvml_event {
	void *device;
	unsigned long long type;
	unsigned long long data; /* the Xid */
	unsigned gpu_instance, compute_instance;
};

struct nvml {
	void *lib;
	int (*shutdown)(void);
	int (*ecc)(void *, int, int, unsigned long long *);
	int (*util)(void *, struct nvml_utilization *);
	int (*mem)(void *, struct nvml_memory *);
	int (*power)(void *, unsigned *);
	int (*energy)(void *, unsigned long long *);
	int (*temp)(void *, int, unsigned *);
	int (*clock)(void *, int, unsigned *);
	int (*throttle)(void *, unsigned long long *);
	int (*power_limit)(void *, unsigned *);
	int (*limit_get)(void *, unsigned *);		    /* the limit set (not enforced) */
	int (*limit_range)(void *, unsigned *, unsigned *); /* its constraints */
	int (*limit_set)(void *, unsigned);
	int (*rows)(void *, unsigned *, unsigned *, unsigned *, unsigned *);
	int (*pcie_width)(void *, unsigned *), (*pcie_width_max)(void *, unsigned *);
	int (*pcie_gen)(void *, unsigned *), (*pcie_gen_max)(void *, unsigned *);
	int (*wait)(void *, struct nvml_event *, unsigned);
	int (*set_free)(void *);
	int (*driver)(char *, unsigned);
	int (*cuda)(int *);
	int (*vbios)(void *, char *, unsigned);
	void *events; /* the Xid event set; NULL: none */
	int ndev;
	void *dev[MODEL_MAX_ACCELS];
};

#define SYM(n, field, name) (*(void **)&(n)->field = dlsym((n)->lib, name))

/* Xid events on the node's accelerators, where NVML offers them. */
static void open_events(struct nvml *n)
{
	int (*create)(void **);
	int (*supported)(void *, unsigned long long *);
	int (*reg)(void *, unsigned long long, void *);
	*(void **)&create = dlsym(n->lib, "nvmlEventSetCreate");
	*(void **)&supported = dlsym(n->lib, "nvmlDeviceGetSupportedEventTypes");
	*(void **)&reg = dlsym(n->lib, "nvmlDeviceRegisterEvents");
	SYM(n, set_free, "nvmlEventSetFree");
	SYM(n, wait, "nvmlEventSetWait_v2");
	if (!create || !n->set_free || !supported || !reg || !n->wait || create(&n->events) != 0) {
		n->events = NULL;
		return;
	}
	int registered = 0;
	for (int i = 0; i < n->ndev; i++) {
		unsigned long long types = 0;
		if (supported(n->dev[i], &types) == 0 && (types & NVML_EVENT_XID) &&
		    reg(n->dev[i], NVML_EVENT_XID, n->events) == 0)
			registered++;
	}
	if (!registered) {
		n->set_free(n->events);
		n->events = NULL;
	}
}

struct nvml *agent__nvml_open(const struct agent_config *cfg, const struct node_inventory *inv)
{
	if (cfg->fake_gpus || inv->naccel == 0)
		return NULL;
	struct nvml *n = xcalloc(1, sizeof(*n));
	n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!n->lib) {
		free(n);
		return NULL;
	}
	int (*init)(void);
	int (*handle)(unsigned, void **);
	*(void **)&init = dlsym(n->lib, "nvmlInit_v2");
	*(void **)&handle = dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
	SYM(n, shutdown, "nvmlShutdown");
	SYM(n, ecc, "nvmlDeviceGetTotalEccErrors");
	SYM(n, util, "nvmlDeviceGetUtilizationRates");
	SYM(n, mem, "nvmlDeviceGetMemoryInfo");
	SYM(n, power, "nvmlDeviceGetPowerUsage");
	SYM(n, energy, "nvmlDeviceGetTotalEnergyConsumption");
	SYM(n, temp, "nvmlDeviceGetTemperature");
	SYM(n, clock, "nvmlDeviceGetClockInfo");
	/* the clocks' event reasons under their name since CUDA 12.2, else
	 * the older one */
	if (!SYM(n, throttle, "nvmlDeviceGetCurrentClocksEventReasons"))
		SYM(n, throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
	SYM(n, power_limit, "nvmlDeviceGetEnforcedPowerLimit");
	SYM(n, limit_get, "nvmlDeviceGetPowerManagementLimit");
	SYM(n, limit_range, "nvmlDeviceGetPowerManagementLimitConstraints");
	SYM(n, limit_set, "nvmlDeviceSetPowerManagementLimit");
	SYM(n, rows, "nvmlDeviceGetRemappedRows");
	SYM(n, pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
	SYM(n, pcie_width_max, "nvmlDeviceGetMaxPcieLinkWidth");
	SYM(n, pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
	SYM(n, pcie_gen_max, "nvmlDeviceGetMaxPcieLinkGeneration");
	SYM(n, driver, "nvmlSystemGetDriverVersion");
	if (!SYM(n, cuda, "nvmlSystemGetCudaDriverVersion_v2"))
		SYM(n, cuda, "nvmlSystemGetCudaDriverVersion");
	SYM(n, vbios, "nvmlDeviceGetVbiosVersion");
	if (!init || !n->shutdown || !handle || init() != 0) {
		dlclose(n->lib);
		free(n);
		return NULL;
	}
	for (int i = 0; i < inv->naccel && i < MODEL_MAX_ACCELS; i++) {
		if (handle((unsigned)inv->accel[i].index, &n->dev[i]) != 0)
			break;
		n->ndev = i + 1;
	}
	open_events(n);
	return n;
}

void agent__nvml_versions(const struct nvml *n, struct node_stack *st)
{
	if (!n)
		return;
	int v = 0;
	if (n->driver && n->driver(st->driver, sizeof(st->driver)) != 0)
		snprintf(st->driver, sizeof(st->driver), "unreadable");
	if (n->cuda && n->cuda(&v) == 0 && v > 0)
		snprintf(st->cuda, sizeof(st->cuda), "%d.%d", v / 1000, v % 1000 / 10);
	/* the devices' VBIOS: one, or each with how many have it */
	char seen[MODEL_MAX_ACCELS][32];
	int count[MODEL_MAX_ACCELS], nseen = 0;
	for (int i = 0; n->vbios && i < n->ndev; i++) {
		char b[32] = "";
		if (n->vbios(n->dev[i], b, sizeof(b)) != 0)
			snprintf(b, sizeof(b), "unreadable");
		int k = 0;
		while (k < nseen && strcmp(seen[k], b) != 0)
			k++;
		if (k == nseen) {
			snprintf(seen[nseen], sizeof(seen[0]), "%s", b);
			count[nseen++] = 0;
		}
		count[k]++;
	}
	size_t used = 0;
	st->vbios[0] = 0;
	for (int k = 0; k < nseen && used < sizeof(st->vbios); k++)
		used += (size_t)(nseen == 1
					 ? snprintf(st->vbios, sizeof(st->vbios), "%s", seen[0])
					 : snprintf(st->vbios + used, sizeof(st->vbios) - used,
						    "%s%s (%d)", k ? ", " : "", seen[k], count[k]));
}

void agent__nvml_close(struct nvml *n)
{
	if (!n)
		return;
	if (n->events)
		n->set_free(n->events);
	n->shutdown();
	dlclose(n->lib);
	free(n);
}

int agent__nvml_count(const struct nvml *n)
{
	return n ? n->ndev : 0;
}

bool agent__nvml_ecc(const struct nvml *n, int i, uint64_t *count)
{
	unsigned long long c = 0;
	if (!n || i >= n->ndev || !n->ecc ||
	    n->ecc(n->dev[i], NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &c) != 0)
		return false;
	*count = c;
	return true;
}

void agent__nvml_read(const struct nvml *n, int i, struct gpu_sample *s)
{
	memset(s, 0, sizeof(*s));
	if (!n || i >= n->ndev)
		return;
	void *d = n->dev[i];
	struct nvml_utilization u;
	struct nvml_memory m;
	unsigned v;
	unsigned long long e;
	if (n->util && n->util(d, &u) == 0) {
		s->have |= GPU_UTIL;
		s->util_pct = u.gpu;
	}
	if (n->mem && n->mem(d, &m) == 0) {
		s->have |= GPU_MEM;
		s->mem_used = m.used;
		s->mem_total = m.total;
	}
	if (n->power && n->power(d, &v) == 0) {
		s->have |= GPU_POWER;
		s->power_mw = v;
	}
	if (n->energy && n->energy(d, &e) == 0) {
		s->have |= GPU_ENERGY;
		s->energy_mj = e;
	}
	if (n->temp && n->temp(d, NVML_TEMPERATURE_GPU, &v) == 0) {
		s->have |= GPU_TEMP;
		s->temp_c = v;
	}
	if (n->clock && n->clock(d, NVML_CLOCK_SM, &v) == 0) {
		s->have |= GPU_CLOCK;
		s->sm_mhz = v;
	}
	if (agent__nvml_ecc(n, i, &s->ecc_uncorrected))
		s->have |= GPU_ECC;
	if (n->throttle && n->throttle(d, &e) == 0) {
		s->have |= GPU_THROTTLE;
		s->throttle = e;
	}
	if (n->power_limit && n->power_limit(d, &v) == 0 && v > 0) {
		s->have |= GPU_POWER_LIMIT;
		s->power_limit_mw = v;
	}
	unsigned corr, unc, pending, failed;
	if (n->rows && n->rows(d, &corr, &unc, &pending, &failed) == 0) {
		s->have |= GPU_ROWS;
		s->rows_corr = corr;
		s->rows_unc = unc;
		s->rows_pending = pending != 0;
		s->rows_failed = failed != 0;
	}
	if (n->pcie_width && n->pcie_width_max && n->pcie_gen && n->pcie_gen_max &&
	    n->pcie_width(d, &s->pcie_width) == 0 &&
	    n->pcie_width_max(d, &s->pcie_width_max) == 0 && n->pcie_gen(d, &s->pcie_gen) == 0 &&
	    n->pcie_gen_max(d, &s->pcie_gen_max) == 0 && s->pcie_width_max && s->pcie_gen_max)
		s->have |= GPU_PCIE;
}

bool agent__nvml_limit(const struct nvml *n, int i, unsigned *ret_mw, unsigned *ret_min)
{
	unsigned mw, min, max;
	if (!n || i >= n->ndev || !n->limit_get || !n->limit_range || !n->limit_set ||
	    n->limit_get(n->dev[i], &mw) != 0 || n->limit_range(n->dev[i], &min, &max) != 0 ||
	    !min || min > max)
		return false;
	*ret_mw = mw;
	*ret_min = min;
	return true;
}

int agent__nvml_set_limit(const struct nvml *n, int i, unsigned mw)
{
	if (!n || i >= n->ndev || !n->limit_set)
		return -ENOTSUP;
	int r = n->limit_set(n->dev[i], mw);
	return r == 0 ? 0 : r == 4 /* NVML_ERROR_NO_PERMISSION */ ? -EPERM : -EIO;
}

bool agent__nvml_xid(const struct nvml *n, int *dev, unsigned *xid)
{
	if (!n || !n->events)
		return false;
	for (int k = 0; k < 64; k++) { /* events of other kinds are skipped, a few */
		struct nvml_event ev = {0};
		if (n->wait(n->events, &ev, 0) != 0)
			return false; /* NVML_ERROR_TIMEOUT: none waiting */
		if (!(ev.type & NVML_EVENT_XID))
			continue;
		for (int i = 0; i < n->ndev; i++)
			if (n->dev[i] == ev.device) {
				*dev = i;
				*xid = (unsigned)ev.data;
				return true;
			}
	}
	return false;
}
