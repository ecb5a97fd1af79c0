/* A stand-in for NVML (libnvidia-ml.so.1); see cuda.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ndev(void)
{
	const char *e = getenv("TENK_FAKE_GPUS");
	return e ? atoi(e) : 2;
}

int nvmlInit_v2(void)
{
	return 0;
}

int nvmlSystemGetDriverVersion(char *v, unsigned n)
{
	snprintf(v, n, "550.54.15");
	return 0;
}

int nvmlDeviceGetCount_v2(unsigned *n)
{
	*n = (unsigned)ndev();
	return 0;
}

/* Devices as the inventory reads them: handles are index + 1. */
int nvmlShutdown(void)
{
	return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h)
{
	if ((int)i >= ndev())
		return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	*h = (void *)(unsigned long)(i + 1);
	return 0;
}

int nvmlDeviceGetName(void *h, char *name, unsigned n)
{
	(void)h;
	snprintf(name, n, "NVIDIA H100 80GB HBM3");
	return 0;
}

int nvmlDeviceGetUUID(void *h, char *uuid, unsigned n)
{
	snprintf(uuid, n, "GPU-fa4e0000-0000-0000-0000-%012lu", (unsigned long)h);
	return 0;
}

struct nvml_memory {
	unsigned long long total, free, used;
};

/* What a test sets while the agent runs: the lines "INDEX FIELD VALUE" of
 * $TENK_FAKE_NVML_FILE, read again at every call. Fields: ecc (the
 * uncorrected ECC count), xid (an Xid event: each such line is delivered
 * once, in order), util (percent), mem_used (bytes), power_mw, energy_mj,
 * temp (Celsius), sm_mhz, throttle (NVML's clock event reasons, a mask),
 * power_limit_mw, rows_corr, rows_unc, rows_pending, rows_failed (remapped
 * rows), pcie_width, pcie_width_max, pcie_gen, pcie_gen_max; what the file
 * does not set reads as an idle, healthy H100 SXM would. */
static int field(void *h, const char *name, int nth, unsigned long long *value)
{
	const char *path = getenv("TENK_FAKE_NVML_FILE");
	FILE *f = path ? fopen(path, "r") : NULL;
	if (!f)
		return 0;
	unsigned long idx;
	char key[32];
	unsigned long long v;
	int found = 0, seen = 0;
	while (fscanf(f, "%lu %31s %llu", &idx, key, &v) == 3) {
		if (strcmp(key, name) != 0 || (h && idx + 1 != (unsigned long)h))
			continue;
		if (nth < 0 || seen++ == nth) {
			*value = h ? v : ((unsigned long long)(idx + 1) << 32) | v;
			found = 1;
			if (nth >= 0)
				break;
		}
	}
	fclose(f);
	return found;
}

int nvmlDeviceGetTotalEccErrors(void *h, int type, int counter, unsigned long long *count)
{
	(void)type;
	(void)counter;
	*count = 0;
	field(h, "ecc", -1, count);
	return 0;
}

/* Xid events */
struct nvml_event {
	void *device;
	unsigned long long type, data;
	unsigned gpu_instance, compute_instance;
};

static int event_set;

int nvmlEventSetCreate(void **set)
{
	*set = &event_set;
	return 0;
}

int nvmlEventSetFree(void *set)
{
	(void)set;
	return 0;
}

int nvmlDeviceGetSupportedEventTypes(void *h, unsigned long long *types)
{
	(void)h;
	*types = 0x8 | 0x10; /* Xid, clocks */
	return 0;
}

int nvmlDeviceRegisterEvents(void *h, unsigned long long types, void *set)
{
	(void)h;
	(void)types;
	(void)set;
	return 0;
}

int nvmlEventSetWait_v2(void *set, struct nvml_event *ev, unsigned timeout_ms)
{
	static int delivered;
	(void)set;
	(void)timeout_ms;
	unsigned long long v;
	if (!field(NULL, "xid", delivered, &v))
		return 10; /* NVML_ERROR_TIMEOUT */
	delivered++;
	memset(ev, 0, sizeof(*ev));
	ev->device = (void *)(unsigned long)(v >> 32);
	ev->type = 0x8;
	ev->data = v & 0xffffffffULL;
	return 0;
}

int nvmlDeviceGetMemoryInfo(void *h, struct nvml_memory *m)
{
	unsigned long long used = 0;
	field(h, "mem_used", -1, &used);
	m->total = 80ULL << 30;
	m->used = used;
	m->free = m->total - used;
	return 0;
}

struct nvml_utilization {
	unsigned gpu, memory;
};

int nvmlDeviceGetUtilizationRates(void *h, struct nvml_utilization *u)
{
	unsigned long long v = 0;
	field(h, "util", -1, &v);
	u->gpu = (unsigned)v;
	u->memory = (unsigned)v / 2;
	return 0;
}

int nvmlDeviceGetPowerUsage(void *h, unsigned *mw)
{
	unsigned long long v = 70000;
	field(h, "power_mw", -1, &v);
	*mw = (unsigned)v;
	return 0;
}

int nvmlDeviceGetTotalEnergyConsumption(void *h, unsigned long long *mj)
{
	*mj = 0;
	field(h, "energy_mj", -1, mj);
	return 0;
}

int nvmlDeviceGetTemperature(void *h, int sensor, unsigned *c)
{
	unsigned long long v = 35;
	(void)sensor;
	field(h, "temp", -1, &v);
	*c = (unsigned)v;
	return 0;
}

int nvmlDeviceGetClockInfo(void *h, int clock, unsigned *mhz)
{
	unsigned long long v = 1980;
	(void)clock;
	field(h, "sm_mhz", -1, &v);
	*mhz = (unsigned)v;
	return 0;
}

int nvmlDeviceGetCurrentClocksEventReasons(void *h, unsigned long long *reasons)
{
	*reasons = 0x1; /* idle */
	field(h, "throttle", -1, reasons);
	return 0;
}

/* Power limits the agent sets (idle_power_after), each kept here and
 * written as a line "INDEX power_limit MW" to $TENK_FAKE_NVML_LOG, so that
 * a test sees every call in its order; the least settable is the file's
 * power_min_mw (default 200 W), the most 700 W. */
#define SHIM_MAX_DEVS 64
static unsigned set_limit[SHIM_MAX_DEVS];

int nvmlDeviceGetEnforcedPowerLimit(void *h, unsigned *mw)
{
	unsigned long long v = 700000;
	field(h, "power_limit_mw", -1, &v);
	unsigned long i = (unsigned long)h - 1;
	*mw = i < SHIM_MAX_DEVS && set_limit[i] ? set_limit[i] : (unsigned)v;
	return 0;
}

int nvmlDeviceGetPowerManagementLimit(void *h, unsigned *mw)
{
	return nvmlDeviceGetEnforcedPowerLimit(h, mw);
}

int nvmlDeviceGetPowerManagementLimitConstraints(void *h, unsigned *min, unsigned *max)
{
	unsigned long long v = 200000;
	field(h, "power_min_mw", -1, &v);
	*min = (unsigned)v;
	*max = 700000;
	return 0;
}

int nvmlDeviceSetPowerManagementLimit(void *h, unsigned mw)
{
	unsigned long i = (unsigned long)h - 1;
	if (i >= SHIM_MAX_DEVS || mw < 100000 || mw > 700000)
		return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	set_limit[i] = mw;
	const char *path = getenv("TENK_FAKE_NVML_LOG");
	FILE *f = path ? fopen(path, "a") : NULL;
	if (f) {
		fprintf(f, "%lu power_limit %u\n", i, mw);
		fclose(f);
	}
	return 0;
}

int nvmlDeviceGetRemappedRows(void *h, unsigned *corr, unsigned *unc, unsigned *pending,
			      unsigned *failed)
{
	unsigned long long v[4] = {0, 0, 0, 0};
	field(h, "rows_corr", -1, &v[0]);
	field(h, "rows_unc", -1, &v[1]);
	field(h, "rows_pending", -1, &v[2]);
	field(h, "rows_failed", -1, &v[3]);
	*corr = (unsigned)v[0];
	*unc = (unsigned)v[1];
	*pending = (unsigned)v[2];
	*failed = (unsigned)v[3];
	return 0;
}

static int pcie(void *h, const char *name, unsigned def, unsigned *ret)
{
	unsigned long long v = def;
	field(h, name, -1, &v);
	*ret = (unsigned)v;
	return 0;
}

int nvmlDeviceGetCurrPcieLinkWidth(void *h, unsigned *w)
{
	return pcie(h, "pcie_width", 16, w);
}

int nvmlDeviceGetMaxPcieLinkWidth(void *h, unsigned *w)
{
	return pcie(h, "pcie_width_max", 16, w);
}

int nvmlDeviceGetCurrPcieLinkGeneration(void *h, unsigned *g)
{
	return pcie(h, "pcie_gen", 5, g);
}

int nvmlDeviceGetMaxPcieLinkGeneration(void *h, unsigned *g)
{
	return pcie(h, "pcie_gen_max", 5, g);
}
