/*
 * Faults the agent sees on its node, told to the server with the next
 * heartbeat rather than left for the node timeout: a work folder short of
 * space (checkpoints, shims and outputs need it), and accelerators whose
 * uncorrected ECC error count grew since the agent started (NVML, loaded
 * with dlopen; none on a node without NVIDIA's driver or with fake
 * devices). The server drains a node that reports one and requeues its
 * jobs at once.
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_shutdown_fn)(void);
typedef int (*nvml_handle_fn)(unsigned, void **);
typedef int (*nvml_ecc_fn)(void *, int, int, unsigned long long *);

#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0

struct health {
	void *lib;
	nvml_shutdown_fn shutdown;
	nvml_ecc_fn ecc;
	int ndev;
	void *dev[MODEL_MAX_ACCELS];
	unsigned long long ecc_base[MODEL_MAX_ACCELS];
};

static unsigned long long ecc_now(struct health *h, int i)
{
	unsigned long long c = 0;
	if (h->ecc(h->dev[i], NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &c) != 0)
		return 0;
	return c;
}

void health_init(struct agent *a)
{
	struct health *h = xcalloc(1, sizeof(*h));
	a->health = h;
	if (a->cfg.fake_gpus || a->inv.naccel == 0)
		return;
	h->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h->lib)
		return;
	nvml_init_fn init;
	nvml_handle_fn handle;
	*(void **)&init = dlsym(h->lib, "nvmlInit_v2");
	*(void **)&h->shutdown = dlsym(h->lib, "nvmlShutdown");
	*(void **)&handle = dlsym(h->lib, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&h->ecc = dlsym(h->lib, "nvmlDeviceGetTotalEccErrors");
	if (!init || !h->shutdown || !handle || !h->ecc || init() != 0) {
		dlclose(h->lib);
		h->lib = NULL;
		return;
	}
	for (int i = 0; i < a->inv.naccel && i < MODEL_MAX_ACCELS; i++) {
		if (handle((unsigned)a->inv.accel[i].index, &h->dev[i]) != 0)
			break;
		h->ndev = i + 1;
		h->ecc_base[i] = ecc_now(h, i);
	}
}

void health_release(struct agent *a)
{
	struct health *h = a->health;
	if (!h)
		return;
	if (h->lib) {
		h->shutdown();
		dlclose(h->lib);
	}
	free(h);
	a->health = NULL;
}

int health_faults(struct agent *a, char (*out)[WIRE_FAULT_MAX], int max)
{
	struct health *h = a->health;
	int n = 0;
	struct statvfs vfs;
	if (max > n && statvfs(a->cfg.work_dir, &vfs) == 0) {
		int64_t free_mib = (int64_t)((unsigned long long)vfs.f_bavail * vfs.f_frsize >> 20);
		if (free_mib < a->cfg.min_free_mib)
			snprintf(out[n++], WIRE_FAULT_MAX,
				 "disk full: %.160s has %lld MiB free, less than %lld MiB",
				 a->cfg.work_dir, (long long)free_mib,
				 (long long)a->cfg.min_free_mib);
	}
	for (int i = 0; h && h->lib && i < h->ndev && n < max; i++) {
		unsigned long long c = ecc_now(h, i);
		if (c > h->ecc_base[i])
			snprintf(out[n++], WIRE_FAULT_MAX,
				 "accelerator %d (%.80s): %llu uncorrected ECC error(s) since the "
				 "agent started",
				 a->inv.accel[i].index, a->inv.accel[i].uuid, c - h->ecc_base[i]);
	}
	return n;
}
