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
