/* A stand-in for NVML (libnvidia-ml.so.1); see cuda.c. */
#include <stdio.h>
#include <stdlib.h>

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

int nvmlDeviceGetMemoryInfo(void *h, struct nvml_memory *m)
{
	(void)h;
	m->total = 80ULL << 30;
	m->free = m->total;
	m->used = 0;
	return 0;
}

/* Uncorrected ECC errors: the lines "INDEX COUNT" of $TENK_FAKE_ECC_FILE,
 * read at every call (a test writes it while the agent runs); 0 otherwise. */
int nvmlDeviceGetTotalEccErrors(void *h, int type, int counter, unsigned long long *count)
{
	(void)type;
	(void)counter;
	*count = 0;
	const char *path = getenv("TENK_FAKE_ECC_FILE");
	FILE *f = path ? fopen(path, "r") : NULL;
	if (!f)
		return 0;
	unsigned long idx;
	unsigned long long c;
	while (fscanf(f, "%lu %llu", &idx, &c) == 2)
		if (idx + 1 == (unsigned long)h)
			*count = c;
	fclose(f);
	return 0;
}
