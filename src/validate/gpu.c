/*
 * The GPU checks: a cuBLAS matrix product (bf16 in, f32 out) checked
 * against exact integer arithmetic, device-to-device copy bandwidth, and an
 * NCCL all-reduce over the node's GPUs. The CUDA driver API (libcuda, which
 * comes with the driver), cuBLAS and NCCL are loaded with dlopen, so the one
 * binary runs on every node; where they or a GPU are missing each check
 * says "skipped: ..." and passes nothing off as measured.
 *
 * Every device is checked; a check's figure is the slowest device's, and its
 * detail lists them all, so one slow card shows.
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

/* Constants of the CUDA, cuBLAS and NCCL headers (stable across versions). */
#define CU_OK 0
#define CUBLAS_OP_N 0
#define CUDA_R_32F 0
#define CUDA_R_16BF 14
#define CUBLAS_COMPUTE_32F 68
#define CUBLAS_GEMM_DEFAULT (-1)
#define NCCL_FLOAT32 7
#define NCCL_SUM 0
#define GPU_MAX 64

typedef unsigned long long cu_ptr;
struct nccl_id {
	char internal[128]; /* NCCL_UNIQUE_ID_BYTES */
};

struct gpu {
	void *cu, *blas, *nccl;
	int ndev;
	void *ctx[GPU_MAX]; /* primary contexts retained so far */
	int dev[GPU_MAX];
	int (*init)(unsigned);
	int (*count)(int *);
	int (*get)(int *, int);
	int (*name)(char *, int, int);
	int (*total_mem)(size_t *, int);
	int (*retain)(void **, int);
	int (*release)(int);
	int (*set_current)(void *);
	int (*sync)(void);
	int (*alloc)(cu_ptr *, size_t);
	int (*free)(cu_ptr);
	int (*htod)(cu_ptr, const void *, size_t);
	int (*dtoh)(void *, cu_ptr, size_t);
	int (*dtod)(cu_ptr, cu_ptr, size_t);
	int (*memset32)(cu_ptr, unsigned, size_t);
	/* cuBLAS */
	int (*blas_create)(void **);
	int (*blas_destroy)(void *);
	int (*gemm)(void *, int, int, int, int, int, const void *, const void *, int, int,
		    const void *, int, int, const void *, void *, int, int, int, int);
	/* NCCL */
	int (*nccl_init_all)(void **, int, const int *);
	int (*nccl_destroy)(void *);
	int (*nccl_allreduce)(const void *, void *, size_t, int, int, void *, void *);
	int (*nccl_group_start)(void);
	int (*nccl_group_end)(void);
	int (*nccl_unique_id)(void *);
	int (*nccl_init_rank)(void **, int, struct nccl_id, int);
};

static void *first_lib(const char *const *names)
{
	for (; *names; names++) {
		void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
		if (h)
			return h;
	}
	return NULL;
}

static bool load(void *lib, const char *name, void *fn)
{
	void *p = lib ? dlsym(lib, name) : NULL;
	memcpy(fn, &p, sizeof(p)); /* POSIX's way from a data pointer to a function's */
	return p != NULL;
}

static void gpu_close(struct gpu *g)
{
	for (int i = 0; i < g->ndev; i++)
		if (g->ctx[i])
			g->release(g->dev[i]);
	if (g->nccl)
		dlclose(g->nccl);
	if (g->blas)
		dlclose(g->blas);
	if (g->cu)
		dlclose(g->cu);
	memset(g, 0, sizeof(*g));
}

/* Loads the driver API and counts the GPUs; 0 with `why` when there are none. */
static int gpu_open(struct gpu *g, char *why, size_t n)
{
	static const char *const cu[] = {"libcuda.so.1", NULL};
	static const char *const blas[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
					   NULL};
	static const char *const nccl[] = {"libnccl.so.2", "libnccl.so", NULL};
	memset(g, 0, sizeof(*g));
	g->cu = first_lib(cu);
	bool ok = load(g->cu, "cuInit", &g->init) && load(g->cu, "cuDeviceGetCount", &g->count) &&
		  load(g->cu, "cuDeviceGet", &g->get) && load(g->cu, "cuDeviceGetName", &g->name) &&
		  load(g->cu, "cuDeviceTotalMem_v2", &g->total_mem) &&
		  load(g->cu, "cuDevicePrimaryCtxRetain", &g->retain) &&
		  load(g->cu, "cuDevicePrimaryCtxRelease_v2", &g->release) &&
		  load(g->cu, "cuCtxSetCurrent", &g->set_current) &&
		  load(g->cu, "cuCtxSynchronize", &g->sync) &&
		  load(g->cu, "cuMemAlloc_v2", &g->alloc) &&
		  load(g->cu, "cuMemFree_v2", &g->free) &&
		  load(g->cu, "cuMemcpyHtoD_v2", &g->htod) &&
		  load(g->cu, "cuMemcpyDtoH_v2", &g->dtoh) &&
		  load(g->cu, "cuMemcpyDtoD_v2", &g->dtod) &&
		  load(g->cu, "cuMemsetD32_v2", &g->memset32);
	int count = 0;
	if (!ok || g->init(0) != CU_OK || g->count(&count) != CU_OK || count <= 0) {
		snprintf(why, n, "skipped: no GPU");
		gpu_close(g);
		return 0;
	}
	g->ndev = MIN(count, GPU_MAX);
	g->blas = first_lib(blas);
	if (!(load(g->blas, "cublasCreate_v2", &g->blas_create) &&
	      load(g->blas, "cublasDestroy_v2", &g->blas_destroy) &&
	      load(g->blas, "cublasGemmEx", &g->gemm))) {
		if (g->blas)
			dlclose(g->blas);
		g->blas = NULL;
	}
	g->nccl = first_lib(nccl);
	if (g->nccl) /* its log says which transports it chose (net.c) */
		validate__nccl_log_start();
	if (!(load(g->nccl, "ncclCommInitAll", &g->nccl_init_all) &&
	      load(g->nccl, "ncclCommDestroy", &g->nccl_destroy) &&
	      load(g->nccl, "ncclAllReduce", &g->nccl_allreduce) &&
	      load(g->nccl, "ncclGroupStart", &g->nccl_group_start) &&
	      load(g->nccl, "ncclGroupEnd", &g->nccl_group_end))) {
		if (g->nccl)
			dlclose(g->nccl);
		g->nccl = NULL;
	}
	/* between nodes only; without them that check says so */
	if (g->nccl && !(load(g->nccl, "ncclGetUniqueId", &g->nccl_unique_id) &&
			 load(g->nccl, "ncclCommInitRank", &g->nccl_init_rank)))
		g->nccl_unique_id = NULL;
	return g->ndev;
}

/* Makes device i's primary context current (retained once, released by
 * gpu_close). */
static int use_device(struct gpu *g, int i)
{
	if (!g->ctx[i] &&
	    (g->get(&g->dev[i], i) != CU_OK || g->retain(&g->ctx[i], g->dev[i]) != CU_OK)) {
		g->ctx[i] = NULL;
		return -EIO;
	}
	return g->set_current(g->ctx[i]) == CU_OK ? 0 : -EIO;
}

/* The smallest device's memory: work is sized to a quarter of it at most. */
static size_t device_bytes(struct gpu *g)
{
	size_t least = 0;
	for (int i = 0; i < g->ndev; i++) {
		int dev;
		size_t mem = 0;
		if (g->get(&dev, i) == CU_OK && g->total_mem(&mem, dev) == CU_OK &&
		    (least == 0 || mem < least))
			least = mem;
	}
	return least;
}

static size_t cap_bytes(struct gpu *g, size_t want)
{
	size_t quarter = device_bytes(g) / 4;
	size_t b = MIN(want, quarter);
	return b < (1u << 20) ? (1u << 20) : b & ~(size_t)4095;
}

/* The catalogue's peak for device i, 0 when its model is not there. */
static double catalogue_tflops(struct gpu *g, int dev, char *model, size_t n)
{
	char name[128] = "";
	size_t mem = 0;
	g->name(name, sizeof(name), dev);
	g->total_mem(&mem, dev);
	struct catalogue cat;
	catalogue_init(&cat);
	const struct catalogue_entry *e = catalogue_match(&cat, name, (int64_t)(mem >> 20));
	double t = e ? e->tflops : 0;
	snprintf(model, n, "%s", e ? e->name : name);
	catalogue_release(&cat);
	return t;
}

/* Small integers: every product and sum is exact in bf16 inputs and f32 sums. */
static int a_val(size_t i, size_t k)
{
	return (int)((i * 3 + k * 7) % 5) - 2;
}

static int b_val(size_t k, size_t j)
{
	return (int)((k * 5 + j * 3) % 5) - 2;
}

/* NVML, for the power a device draws under the GEMM: its energy counter's
 * difference over the run, or its power reading at the end where the
 * counter does not move. Device i of CUDA is NVML's i (PCI bus order). */
struct power {
	void *lib;
	int (*handle)(unsigned, void **);
	int (*energy)(void *, unsigned long long *);
	int (*power)(void *, unsigned *);
};

static void power_open(struct power *p)
{
	memset(p, 0, sizeof(*p));
	p->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	int (*init)(void) = NULL;
	if (p->lib) {
		*(void **)&init = dlsym(p->lib, "nvmlInit_v2");
		*(void **)&p->handle = dlsym(p->lib, "nvmlDeviceGetHandleByIndex_v2");
		*(void **)&p->energy = dlsym(p->lib, "nvmlDeviceGetTotalEnergyConsumption");
		*(void **)&p->power = dlsym(p->lib, "nvmlDeviceGetPowerUsage");
	}
	if (p->lib && (!init || !p->handle || init() != 0)) {
		dlclose(p->lib);
		p->lib = NULL;
	}
}

static void power_close(struct power *p)
{
	if (p->lib)
		dlclose(p->lib);
	p->lib = NULL;
}

/* The device's energy counter now (mJ); false without one. */
static bool power_energy(struct power *p, int i, unsigned long long *mj)
{
	void *h;
	return p->lib && p->energy && p->handle((unsigned)i, &h) == 0 && p->energy(h, mj) == 0;
}

/* Watts drawn over secs, from the counter's start value e0 (or now). */
static double power_watts(struct power *p, int i, bool have_e0, unsigned long long e0, double secs)
{
	unsigned long long e1;
	if (have_e0 && secs > 0 && power_energy(p, i, &e1) && e1 > e0)
		return (double)(e1 - e0) / 1000.0 / secs;
	void *h;
	unsigned mw;
	if (p->lib && p->power && p->handle((unsigned)i, &h) == 0 && p->power(h, &mw) == 0)
		return mw / 1000.0;
	return 0;
}

/* One device's GEMM rate (TFLOP/s) and how many sampled entries were wrong. */
#define GEMM_MAX_REPS 20000
#define GEMM_POWER_MIN_S 0.5 /* a shorter run's power is not told */

static int gemm_one(struct gpu *g, struct power *pw, int i, int n, int reps, double min_s,
		    double *tflops, double *watts, int *wrong)
{
	unsigned long long e0 = 0;
	bool have_e0 = false;
	if (use_device(g, i) < 0)
		return -EIO;
	size_t nn = (size_t)n * (size_t)n;
	uint16_t *ha = xmalloc(nn * 2), *hb = xmalloc(nn * 2);
	float *hc = xmalloc(nn * 4);
	/* column-major, as cuBLAS has it: A[i + k n] */
	for (size_t k = 0; k < (size_t)n; k++)
		for (size_t r = 0; r < (size_t)n; r++) {
			ha[r + k * (size_t)n] = coll_float_to_bf16((float)a_val(r, k));
			hb[k + r * (size_t)n] = coll_float_to_bf16((float)b_val(k, r));
		}
	cu_ptr a = 0, b = 0, c = 0;
	void *h = NULL;
	int rc = -EIO;
	float alpha = 1, beta = 0;
	int64_t t0 = 0;
	if (g->alloc(&a, nn * 2) != CU_OK || g->alloc(&b, nn * 2) != CU_OK ||
	    g->alloc(&c, nn * 4) != CU_OK || g->htod(a, ha, nn * 2) != CU_OK ||
	    g->htod(b, hb, nn * 2) != CU_OK || g->blas_create(&h) != 0)
		goto out;
	double secs = 0;
	/* timed again with more products while the run is shorter than
	 * min_s: the figure steadies, and NVML's energy counter (which moves
	 * every few tens of milliseconds) sees the device under load, not the
	 * ramp (on an H200, 20 products took 28 ms and read 131-145 W where a
	 * sustained run draws 430) */
	for (int round = 0; round < 3; round++) {
		for (int r = round ? 0 : -1; r < reps; r++) {
			if (r == 0) {
				if (g->sync() != CU_OK)
					goto out;
				have_e0 = power_energy(pw, i, &e0);
				t0 = tk_mono_us();
			}
			if (g->gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha,
				    (void *)(uintptr_t)a, CUDA_R_16BF, n, (void *)(uintptr_t)b,
				    CUDA_R_16BF, n, &beta, (void *)(uintptr_t)c, CUDA_R_32F, n,
				    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != 0)
				goto out;
		}
		if (g->sync() != CU_OK)
			goto out;
		secs = (double)(tk_mono_us() - t0) / 1e6;
		if (secs >= min_s || reps >= GEMM_MAX_REPS)
			break;
		double more = secs > 0 ? min_s / secs * 1.1 : 100;
		reps = (int)MIN((double)GEMM_MAX_REPS, reps * MAX(2.0, more));
	}
	*tflops = secs > 0 ? 2.0 * n * (double)n * n * reps / secs / 1e12 : 0;
	/* under half a second the energy counter's steps swamp the difference
	 * (a quick run on an H200 read 13 kW): no figure rather than a wrong one */
	*watts = secs >= GEMM_POWER_MIN_S ? power_watts(pw, i, have_e0, e0, secs) : 0;
	if (g->dtoh(hc, c, nn * 4) != CU_OK)
		goto out;
	*wrong = 0;
	for (int s = 0; s < 256; s++) {
		size_t r = (size_t)(s * 7919) % (size_t)n, col = (size_t)(s * 104729) % (size_t)n;
		long long want = 0;
		for (size_t k = 0; k < (size_t)n; k++)
			want += (long long)a_val(r, k) * b_val(k, col);
		*wrong += hc[r + col * (size_t)n] != (float)want;
	}
	rc = 0;
out:
	if (h)
		g->blas_destroy(h);
	if (a)
		g->free(a);
	if (b)
		g->free(b);
	if (c)
		g->free(c);
	free(ha);
	free(hb);
	free(hc);
	return rc;
}

int validate__check_gpu_gemm(struct vcheck *c, bool quick)
{
	validate__vcheck_set(c, "compute", "gpu_gemm", "TFLOP/s", true);
	struct gpu g;
	if (!gpu_open(&g, c->detail, sizeof(c->detail))) {
		c->verdict = V_SKIP;
		return 0;
	}
	if (!g.blas) {
		c->verdict = V_SKIP;
		snprintf(c->detail, sizeof(c->detail), "skipped: %d GPUs but no cuBLAS", g.ndev);
		gpu_close(&g);
		return 0;
	}
	struct strbuf sb, per;
	strbuf_init(&sb);
	strbuf_init(&per);
	double slowest = 0, floor = 0, least_per_watt = 0;
	int wrong = 0;
	char model[128] = "";
	struct power pw;
	power_open(&pw);
	/* n x n: two bf16 inputs and an f32 output, 8 n^2 bytes, in a quarter
	 * of the memory at most (8192 fits any data-centre GPU) */
	int n = quick ? 4096 : 8192;
	while (n > 256 && (size_t)8 * (size_t)n * (size_t)n > device_bytes(&g) / 4)
		n /= 2;
	for (int i = 0; i < g.ndev; i++) {
		double t = 0;
		int w = 0, dev = 0;
		double peak = g.get(&dev, i) == CU_OK
				      ? catalogue_tflops(&g, dev, model, sizeof(model))
				      : 0;
		double watts = 0;
		if (gemm_one(&g, &pw, i, n, quick ? 5 : 20, quick ? 0 : 1.0, &t, &watts, &w) < 0) {
			c->verdict = V_FAIL;
			strbuf_addf(&sb, "%sGPU %d: CUDA or cuBLAS call failed", i ? ", " : "", i);
			continue;
		}
		wrong += w;
		if (i == 0 || t < slowest)
			slowest = t;
		if (peak > 0 && (floor == 0 || 0.5 * peak < floor))
			floor = 0.5 * peak;
		strbuf_addf(&sb, "%s%d: %.3g", i ? ", " : "", i, t);
		if (watts > 0) {
			double pwr = t / watts;
			if (!least_per_watt || pwr < least_per_watt)
				least_per_watt = pwr;
			strbuf_addf(&per, "%s%d: %.3g at %.0f W", per.len ? ", " : "", i, pwr,
				    watts);
		}
	}
	power_close(&pw);
	c->figure = slowest;
	c->per_watt = least_per_watt;
	char from[160];
	snprintf(from, sizeof(from), floor > 0 ? "50%% of the catalogue's %s" : "floor", model);
	enum vverdict was = c->verdict;
	validate__vcheck_judge(c, floor > 0 ? floor : 1, from);
	c->broken = was == V_FAIL || wrong;
	if (c->broken)
		c->verdict = V_FAIL;
	snprintf(c->detail, sizeof(c->detail), "bf16 GEMM %dx%d, %d wrong; %.140s%s%.110s", n, n,
		 wrong, sb.buf, per.len ? "; TFLOP/s per W " : "", per.buf);
	strbuf_release(&sb);
	strbuf_release(&per);
	gpu_close(&g);
	return 0;
}

int validate__check_gpu_copy(struct vcheck *c, bool quick)
{
	validate__vcheck_set(c, "memory", "gpu_copy", "GB/s", true);
	struct gpu g;
	if (!gpu_open(&g, c->detail, sizeof(c->detail))) {
		c->verdict = V_SKIP;
		return 0;
	}
	size_t bytes = cap_bytes(&g, quick ? (256u << 20) : (1u << 30));
	int reps = 10;
	struct strbuf sb;
	strbuf_init(&sb);
	double slowest = 0;
	for (int i = 0; i < g.ndev; i++) {
		cu_ptr a = 0, b = 0;
		double gbs = -1;
		if (use_device(&g, i) == 0 && g.alloc(&a, bytes) == CU_OK &&
		    g.alloc(&b, bytes) == CU_OK && g.memset32(a, 0x3f800000u, bytes / 4) == CU_OK &&
		    g.dtod(b, a, bytes) == CU_OK && g.sync() == CU_OK) {
			int64_t t0 = tk_mono_us();
			bool ok = true;
			for (int r = 0; r < reps && ok; r++)
				ok = g.dtod(r % 2 ? a : b, r % 2 ? b : a, bytes) == CU_OK;
			ok = ok && g.sync() == CU_OK;
			double secs = (double)(tk_mono_us() - t0) / 1e6;
			/* a copy reads and writes every byte */
			if (ok && secs > 0)
				gbs = 2.0 * (double)bytes * reps / secs / 1e9;
		}
		if (a)
			g.free(a);
		if (b)
			g.free(b);
		if (gbs < 0) {
			c->verdict = V_FAIL;
			strbuf_addf(&sb, "%sGPU %d: CUDA call failed", i ? ", " : "", i);
			continue;
		}
		if (i == 0 || gbs < slowest)
			slowest = gbs;
		strbuf_addf(&sb, "%s%d: %.0f", i ? ", " : "", i, gbs);
	}
	c->figure = slowest;
	enum vverdict was = c->verdict;
	validate__vcheck_judge(c, 100, "floor");
	c->broken = was == V_FAIL;
	if (c->broken)
		c->verdict = V_FAIL;
	snprintf(c->detail, sizeof(c->detail), "device to device, %zu MiB; %.250s", bytes >> 20,
		 sb.buf);
	strbuf_release(&sb);
	gpu_close(&g);
	return 0;
}

/* Sums ones over every GPU of the group: each GPU's buffer then holds `want`
 * everywhere; then times `reps` all-reduces. Returns seconds, < 0 on error. */
static double nccl_run(struct gpu *g, void **comms, cu_ptr *buf, int n, size_t count, int reps,
		       float want, int *wrong)
{
	double secs = 0;
	bool ok = true;
	for (int r = -1; r < reps && ok; r++) {
		int64_t t0 = tk_mono_us();
		ok = g->nccl_group_start() == 0;
		for (int i = 0; i < n && ok; i++)
			ok = use_device(g, i) == 0 &&
			     g->nccl_allreduce((void *)(uintptr_t)buf[i], (void *)(uintptr_t)buf[i],
					       count, NCCL_FLOAT32, NCCL_SUM, comms[i], NULL) == 0;
		ok = ok && g->nccl_group_end() == 0;
		for (int i = 0; i < n && ok; i++)
			ok = use_device(g, i) == 0 && g->sync() == CU_OK;
		if (r >= 0)
			secs += (double)(tk_mono_us() - t0) / 1e6;
		if (r == -1 && ok) {
			float head[256];
			for (int i = 0; i < n && ok; i++) {
				ok = use_device(g, i) == 0 &&
				     g->dtoh(head, buf[i], sizeof(head)) == CU_OK;
				for (size_t k = 0; k < ARRAY_SIZE(head); k++)
					*wrong += head[k] != want;
			}
			/* zeros, so that the timed sums stay finite */
			for (int i = 0; i < n && ok; i++)
				ok = use_device(g, i) == 0 &&
				     g->memset32(buf[i], 0, count) == CU_OK;
		}
	}
	return ok ? secs : -1;
}

int validate__check_nccl_in_node(struct vcheck *c, bool quick)
{
	validate__vcheck_set(c, "interconnect", "nccl_allreduce", "GB/s", true);
	struct gpu g;
	if (!gpu_open(&g, c->detail, sizeof(c->detail))) {
		c->verdict = V_SKIP;
		return 0;
	}
	if (!g.nccl || g.ndev < 2) {
		c->verdict = V_SKIP;
		snprintf(c->detail, sizeof(c->detail), "skipped: %s",
			 g.nccl ? "one GPU, nothing to reduce with" : "no NCCL");
		gpu_close(&g);
		return 0;
	}
	int n = g.ndev, devs[GPU_MAX], reps = quick ? 5 : 20;
	size_t bytes = cap_bytes(&g, quick ? (64u << 20) : (256u << 20)), count = bytes / 4;
	void *comms[GPU_MAX] = {0};
	cu_ptr buf[GPU_MAX] = {0};
	bool ok = true;
	for (int i = 0; i < n; i++)
		devs[i] = i;
	for (int i = 0; i < n && ok; i++)
		ok = use_device(&g, i) == 0 && g.alloc(&buf[i], bytes) == CU_OK &&
		     g.memset32(buf[i], 0x3f800000u, count) == CU_OK; /* 1.0f */
	ok = ok && g.nccl_init_all(comms, n, devs) == 0;
	int wrong = 0;
	double secs = ok ? nccl_run(&g, comms, buf, n, count, reps, (float)n, &wrong) : -1;
	ok = secs >= 0;
	for (int i = 0; i < n; i++) {
		if (comms[i])
			g.nccl_destroy(comms[i]);
		if (buf[i] && use_device(&g, i) == 0)
			g.free(buf[i]);
	}
	if (!ok) {
		c->verdict = V_FAIL;
		snprintf(c->detail, sizeof(c->detail), "a CUDA or NCCL call failed on %d GPUs", n);
	} else {
		c->figure = secs > 0 ? (double)bytes * reps / secs / 1e9 * 2 * (n - 1) / n : 0;
		validate__vcheck_judge(c, 1, "floor");
		if (wrong)
			c->verdict = V_FAIL;
		snprintf(c->detail, sizeof(c->detail), "%d GPUs, %zu MiB, bus bandwidth, %d wrong",
			 n, bytes >> 20, wrong);
	}
	gpu_close(&g);
	return 0;
}

int validate__check_nccl_across(struct vcheck *c, struct coll_comm *comm, bool quick,
				struct tk_error *err)
{
	validate__vcheck_set(c, "interconnect", "nccl_allreduce_nodes", "GB/s", true);
	struct gpu g;
	char why[200] = "";
	int local = gpu_open(&g, why, sizeof(why));
	if (local && (!g.nccl || !g.nccl_unique_id)) {
		snprintf(why, sizeof(why), "skipped: %s",
			 g.nccl ? "this NCCL cannot join nodes" : "no NCCL");
		local = 0;
	}
	/* every node learns how many GPUs each brings; all go on, or none */
	int size = coll_size(comm), me = coll_rank(comm);
	int *counts = xcalloc((size_t)size, sizeof(int));
	int rc = coll_allgather(comm, &local, counts, sizeof(int), err);
	int total = 0, off = 0, none = -1;
	for (int r = 0; r < size && rc >= 0; r++) {
		if (counts[r] == 0 && none < 0)
			none = r;
		if (r < me)
			off += counts[r];
		total += counts[r];
	}
	free(counts);
	if (rc < 0 || none >= 0) {
		c->verdict = V_SKIP;
		if (rc >= 0)
			snprintf(c->detail, sizeof(c->detail), "skipped: %s",
				 none == me ? (why[0] ? why + 9 : "no NCCL")
					    : "a node without GPUs or NCCL");
		gpu_close(&g);
		return rc;
	}
	struct nccl_id id;
	memset(&id, 0, sizeof(id));
	bool ok = me != 0 || g.nccl_unique_id(&id) == 0;
	/* the id goes to everyone even when making it failed: nobody waits */
	rc = coll_broadcast(comm, &id, sizeof(id), 0, err);
	int reps = quick ? 5 : 20;
	/* every node reduces the same count: the smallest GPU's size decides */
	double want = (double)cap_bytes(&g, quick ? (64u << 20) : (256u << 20));
	if (rc >= 0)
		rc = coll_allreduce(comm, &want, &want, 1, COLL_F64, COLL_MIN, err);
	size_t bytes = (size_t)want, count = bytes / 4;
	void *comms[GPU_MAX] = {0};
	cu_ptr buf[GPU_MAX] = {0};
	for (int i = 0; i < local && ok && rc >= 0; i++)
		ok = use_device(&g, i) == 0 && g.alloc(&buf[i], bytes) == CU_OK &&
		     g.memset32(buf[i], 0x3f800000u, count) == CU_OK; /* 1.0f */
	if (ok && rc >= 0) {
		ok = g.nccl_group_start() == 0;
		for (int i = 0; i < local && ok; i++)
			ok = use_device(&g, i) == 0 &&
			     g.nccl_init_rank(&comms[i], total, id, off + i) == 0;
		ok = g.nccl_group_end() == 0 && ok;
	}
	int wrong = 0;
	double secs = ok && rc >= 0
			      ? nccl_run(&g, comms, buf, local, count, reps, (float)total, &wrong)
			      : -1;
	for (int i = 0; i < local; i++) {
		if (comms[i])
			g.nccl_destroy(comms[i]);
		if (buf[i] && use_device(&g, i) == 0)
			g.free(buf[i]);
	}
	if (rc >= 0 && secs < 0) {
		c->verdict = V_FAIL;
		snprintf(c->detail, sizeof(c->detail),
			 "a CUDA or NCCL call failed (%d GPUs on %d nodes)", total, size);
	} else if (rc >= 0) {
		c->figure =
			secs > 0 ? (double)bytes * reps / secs / 1e9 * 2 * (total - 1) / total : 0;
		validate__vcheck_judge(c, 1, "floor");
		if (wrong)
			c->verdict = V_FAIL;
		snprintf(c->detail, sizeof(c->detail), "%d GPUs on %d nodes, %zu MiB, %d wrong",
			 total, size, bytes >> 20, wrong);
	}
	gpu_close(&g);
	return rc;
}

/* ---- the reference on a GPU ------------------------------------------------------------ */

/* tenk's own reference where the node has a GPU and cuBLAS (reference.c):
 * least squares on GPU 0, its two products a step (the predictions X w,
 * the gradient X^T e) by cublasGemmEx in bf16 with f32 sums, as a
 * training's matrix products are; a new cuBLAS whose kernels sum in
 * another order gives other bits. The data are multiples of 1/8, exact in
 * bf16. */
#define GR_ROWS 256
#define GR_DIM 64
#define GR_STEPS 40

static double gr_x(int r, int k)
{
	return (double)((r * 31 + k * 17) % 23 - 11) / 8.0;
}

/* out (m, f32) = A (m x k, bf16, on the device) times v (k, bf16, copied
 * from the host), back on the host. */
static int gr_matvec(struct gpu *g, void *h, int m, int k, cu_ptr a, cu_ptr dv, const uint16_t *v,
		     cu_ptr dout, float *out)
{
	float one = 1, zero = 0;
	if (g->htod(dv, v, 2 * (size_t)k) != CU_OK ||
	    g->gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, 1, k, &one, (void *)(uintptr_t)a, CUDA_R_16BF,
		    m, (void *)(uintptr_t)dv, CUDA_R_16BF, k, &zero, (void *)(uintptr_t)dout,
		    CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != 0 ||
	    g->sync() != CU_OK || g->dtoh(out, dout, 4 * (size_t)m) != CU_OK)
		return -EIO;
	return 0;
}

int validate__reference_gpu(struct reference *ref, char *why, size_t n)
{
	struct gpu g;
	if (!gpu_open(&g, why, n))
		return 0;
	if (!g.blas) {
		snprintf(why, n, "%d GPUs but no cuBLAS", g.ndev);
		gpu_close(&g);
		return 0;
	}
	uint16_t *x = xcalloc(GR_ROWS * GR_DIM, 2), *xt = xcalloc(GR_ROWS * GR_DIM, 2);
	uint16_t *wb = xcalloc(GR_DIM, 2), *eb = xcalloc(GR_ROWS, 2);
	float *pred = xcalloc(GR_ROWS, 4), *grad = xcalloc(GR_DIM, 4);
	double y[GR_ROWS], w[GR_DIM] = {0}, steps[GR_STEPS];
	/* column-major: X is ROWS x DIM, X^T DIM x ROWS */
	for (int r = 0; r < GR_ROWS; r++) {
		y[r] = 0.1;
		for (int k = 0; k < GR_DIM; k++) {
			uint16_t v = coll_float_to_bf16((float)gr_x(r, k));
			x[r + k * GR_ROWS] = v;
			xt[k + r * GR_DIM] = v;
			y[r] += gr_x(r, k) * (double)((k % 5) - 2) / 16.0;
		}
	}
	memset(ref, 0, sizeof(*ref));
	ref->source = REF_SOURCE_TENK;
	ref->nloss = GR_STEPS;
	ref->loss = xcalloc(GR_STEPS, sizeof(double));
	cu_ptr dx = 0, dxt = 0, dw = 0, de = 0, dp = 0, dg = 0;
	void *h = NULL;
	int rc = -EIO;
	if (use_device(&g, 0) < 0 || g.alloc(&dx, sizeof(uint16_t) * GR_ROWS * GR_DIM) != CU_OK ||
	    g.alloc(&dxt, sizeof(uint16_t) * GR_ROWS * GR_DIM) != CU_OK ||
	    g.alloc(&dw, 2 * GR_DIM) != CU_OK || g.alloc(&de, 2 * GR_ROWS) != CU_OK ||
	    g.alloc(&dp, 4 * GR_ROWS) != CU_OK || g.alloc(&dg, 4 * GR_DIM) != CU_OK ||
	    g.htod(dx, x, sizeof(uint16_t) * GR_ROWS * GR_DIM) != CU_OK ||
	    g.htod(dxt, xt, sizeof(uint16_t) * GR_ROWS * GR_DIM) != CU_OK || g.blas_create(&h) != 0)
		goto out;
	for (int s = 0; s < GR_STEPS; s++) {
		int64_t t0 = tk_mono_us();
		for (int k = 0; k < GR_DIM; k++)
			wb[k] = coll_float_to_bf16((float)w[k]);
		if (gr_matvec(&g, h, GR_ROWS, GR_DIM, dx, dw, wb, dp, pred) < 0)
			goto out;
		double loss = 0;
		for (int r = 0; r < GR_ROWS; r++) {
			double e = (double)pred[r] - y[r];
			loss += e * e / GR_ROWS;
			eb[r] = coll_float_to_bf16((float)e);
		}
		if (gr_matvec(&g, h, GR_DIM, GR_ROWS, dxt, de, eb, dg, grad) < 0)
			goto out;
		for (int k = 0; k < GR_DIM; k++)
			w[k] -= 0.01 * 2 * (double)grad[k] / GR_ROWS;
		ref->loss[s] = loss;
		steps[s] = (double)(tk_mono_us() - t0) / 1e6;
	}
	ref->nparams = GR_DIM;
	ref->params = xcalloc(GR_DIM, sizeof(double));
	memcpy(ref->params, w, sizeof(w));
	ref->step_s = reference_median(steps, GR_STEPS);
	char name[96] = "";
	g.name(name, sizeof(name), g.dev[0]);
	snprintf(why, n, "GPU 0 (%s)", name);
	rc = 1;
out:
	if (rc < 0) {
		snprintf(why, n, "a CUDA or cuBLAS call failed on GPU 0");
		reference_release(ref);
	}
	if (h)
		g.blas_destroy(h);
	cu_ptr all[] = {dx, dxt, dw, de, dp, dg};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i])
			g.free(all[i]);
	free(x);
	free(xt);
	free(wb);
	free(eb);
	free(pred);
	free(grad);
	gpu_close(&g);
	return rc;
}
