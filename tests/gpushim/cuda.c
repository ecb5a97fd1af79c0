/*
 * A stand-in for the CUDA driver (libcuda.so.1) for tests on machines without
 * a GPU: "devices" are host memory, so tenk's GPU checks (src/validate/gpu.c)
 * run their real code paths: loading, contexts, allocations, copies, the
 * checks on results. It is never installed; a test points LD_LIBRARY_PATH
 * at it. TENK_FAKE_GPUS sets the number of devices (default 2); each has
 * 4 MiB, so the checks size their work down.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

int shim_ndev(void)
{
	const char *e = getenv("TENK_FAKE_GPUS");
	int n = e ? atoi(e) : 2;
	return n < 0 ? 0 : n > 16 ? 16 : n;
}

static _Thread_local int current = -1;

int cuInit(unsigned flags)
{
	(void)flags;
	return 0;
}

int cuDriverGetVersion(int *v)
{
	*v = 12040;
	return 0;
}

int cuDeviceGetCount(int *n)
{
	*n = shim_ndev();
	return 0;
}

int cuDeviceGet(int *dev, int ordinal)
{
	if (ordinal < 0 || ordinal >= shim_ndev())
		return 101; /* CUDA_ERROR_INVALID_DEVICE */
	*dev = ordinal;
	return 0;
}

int cuDeviceGetName(char *name, int len, int dev)
{
	snprintf(name, (size_t)len, "NVIDIA H100 80GB HBM3 (stand-in %d)", dev);
	return 0;
}

int cuDeviceTotalMem_v2(size_t *bytes, int dev)
{
	(void)dev;
	*bytes = SHIM_DEVICE_BYTES;
	return 0;
}

int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
	*ctx = (void *)(intptr_t)(dev + 1);
	return 0;
}

int cuDevicePrimaryCtxRelease_v2(int dev)
{
	(void)dev;
	return 0;
}

int cuCtxSetCurrent(void *ctx)
{
	current = (int)(intptr_t)ctx - 1;
	return 0;
}

int cuCtxSynchronize(void)
{
	return current >= 0 ? 0 : 201; /* CUDA_ERROR_INVALID_CONTEXT */
}

int cuMemAlloc_v2(unsigned long long *p, size_t n)
{
	if (current < 0)
		return 201;
	if (n > SHIM_DEVICE_BYTES)
		return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
	void *m = malloc(n);
	if (!m)
		return 2;
	*p = (unsigned long long)(uintptr_t)m;
	return 0;
}

int cuMemFree_v2(unsigned long long p)
{
	free((void *)(uintptr_t)p);
	return 0;
}

int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n)
{
	memcpy((void *)(uintptr_t)dst, src, n);
	return 0;
}

int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n)
{
	memcpy(dst, (const void *)(uintptr_t)src, n);
	return 0;
}

int cuMemcpyDtoD_v2(unsigned long long dst, unsigned long long src, size_t n)
{
	memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
	return 0;
}

int cuMemsetD32_v2(unsigned long long dst, unsigned v, size_t n)
{
	unsigned *d = (unsigned *)(uintptr_t)dst;
	for (size_t i = 0; i < n; i++)
		d[i] = v;
	return 0;
}
