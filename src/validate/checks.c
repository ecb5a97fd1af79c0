/*
 * The checks of one node, layer by layer (DESIGN.md section 6). Each fills a
 * struct vcheck: its figure, the threshold it is held to, and a verdict.
 * GPU paths load their libraries with dlopen; without a GPU they say
 * "skipped: no GPU".
 */
#include "internal.h"

#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

static double now_s(void)
{
	return (double)tk_mono_us() / 1e6;
}

#define CHECK_MAX_THREADS 256

/* Runs fn on each of the n arguments at args (size bytes apart), each in a
 * thread of its own, and waits for them all. Returns 0, or -errno with why
 * filled when a thread could not be started (those that were are waited
 * for: a collective's ranks time out without the missing one). */
static int threads_run(void *(*fn)(void *), void *args, size_t size, int n, char *why, size_t wn)
{
	pthread_t th[CHECK_MAX_THREADS];
	int started = 0, r = 0;
	assert(n <= CHECK_MAX_THREADS);
	for (; started < n; started++) {
		int e = pthread_create(&th[started], NULL, fn,
				       (char *)args + (size_t)started * size);
		if (e != 0) {
			r = -e;
			snprintf(why, wn, "cannot start thread %d of %d: %s", started + 1, n,
				 strerror(e));
			break;
		}
	}
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	return r;
}

void validate__vcheck_set(struct vcheck *c, const char *layer, const char *name, const char *unit,
			  bool higher_is_better)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->layer, sizeof(c->layer), "%s", layer);
	snprintf(c->name, sizeof(c->name), "%s", name);
	snprintf(c->unit, sizeof(c->unit), "%s", unit);
	c->higher_is_better = higher_is_better;
	c->verdict = V_PASS;
}

void validate__vcheck_judge(struct vcheck *c, double threshold, const char *from)
{
	c->threshold = threshold;
	snprintf(c->threshold_from, sizeof(c->threshold_from), "%s", from);
	bool ok = c->higher_is_better ? c->figure >= threshold : c->figure <= threshold;
	if (!ok)
		c->verdict = V_FAIL;
}

/* ---- system ------------------------------------------------------------------------------ */

/* The GPU stack, where there is one: versions from the libraries themselves. */
void validate__gpu_stack_probe(struct gpu_stack *st)
{
	memset(st, 0, sizeof(*st));
	snprintf(st->driver, sizeof(st->driver), "none");
	snprintf(st->cuda, sizeof(st->cuda), "none");
	snprintf(st->nccl, sizeof(st->nccl), "none");
	void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	void *nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
	if (nvml) {
		int (*init)(void), (*drv)(char *, unsigned), (*count)(unsigned *);
		/* POSIX's way to take a function from dlsym without a cast */
		*(void **)&init = dlsym(nvml, "nvmlInit_v2");
		*(void **)&drv = dlsym(nvml, "nvmlSystemGetDriverVersion");
		*(void **)&count = dlsym(nvml, "nvmlDeviceGetCount_v2");
		unsigned n = 0;
		if (init && init() == 0) {
			if (drv)
				drv(st->driver, sizeof(st->driver));
			if (count && count(&n) == 0)
				st->gpus = (int)n;
		}
		dlclose(nvml);
	}
	if (cuda) {
		int (*ver)(int *);
		*(void **)&ver = dlsym(cuda, "cuDriverGetVersion");
		int v = 0;
		if (ver && ver(&v) == 0 && v > 0)
			snprintf(st->cuda, sizeof(st->cuda), "%d.%d", v / 1000, v % 1000 / 10);
		dlclose(cuda);
	}
	if (nccl) {
		int (*ver)(int *);
		*(void **)&ver = dlsym(nccl, "ncclGetVersion");
		int v = 0;
		if (ver && ver(&v) == 0)
			snprintf(st->nccl, sizeof(st->nccl), "%d.%d.%d", v / 10000, v / 100 % 100,
				 v % 100);
		dlclose(nccl);
	}
}

int validate__check_gpu_stack(struct vcheck *c)
{
	validate__vcheck_set(c, "system", "gpu_stack", "", true);
	struct gpu_stack st;
	validate__gpu_stack_probe(&st);
	c->figure = st.gpus;
	snprintf(c->unit, sizeof(c->unit), "GPUs");
	snprintf(c->detail, sizeof(c->detail), "driver %s, CUDA %s, NCCL %s", st.driver, st.cuda,
		 st.nccl);
	if (st.gpus == 0) {
		c->verdict = V_SKIP;
		snprintf(c->detail, sizeof(c->detail), "skipped: no GPU (NCCL %s)", st.nccl);
	}
	return 0;
}

int validate__check_shm(struct vcheck *c, double min_mib)
{
	validate__vcheck_set(c, "system", "dev_shm", "MiB", true);
	struct statvfs st;
	if (statvfs("/dev/shm", &st) < 0) {
		c->verdict = V_FAIL;
		snprintf(c->detail, sizeof(c->detail), "/dev/shm: %s", strerror(errno));
		return 0;
	}
	c->figure = (double)st.f_blocks * (double)st.f_frsize / (1 << 20);
	validate__vcheck_judge(c, min_mib, "minimum for collectives over shared memory");
	return 0;
}

bool validate__check_image(struct vcheck *c)
{
	const char *ref = getenv("TENK_IMAGE"), *digest = getenv("TENK_IMAGE_DIGEST");
	if (!digest || !*digest)
		return false;
	validate__vcheck_set(c, "system", "image", "", true);
	c->figure = 1;
	snprintf(c->detail, sizeof(c->detail), "%.200s at %.80s", ref ? ref : "?", digest);
	return true;
}

int validate__check_nofile(struct vcheck *c, double min)
{
	validate__vcheck_set(c, "system", "open_files", "files", true);
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	c->figure = rl.rlim_cur == RLIM_INFINITY ? 1e9 : (double)rl.rlim_cur;
	validate__vcheck_judge(c, min, "minimum for many ranks and data loaders");
	return 0;
}

/* ---- compute ------------------------------------------------------------------------------ */

/* C = A * B for n x n single precision, blocked for the caches; the inner
 * loop runs along rows so the compiler vectorizes it. */
static void sgemm(int n, const float *a, const float *b, float *cm)
{
	enum { BI = 64, BK = 128 };
	memset(cm, 0, sizeof(float) * (size_t)n * (size_t)n);
	for (int i0 = 0; i0 < n; i0 += BI)
		for (int k0 = 0; k0 < n; k0 += BK)
			for (int i = i0; i < MIN(i0 + BI, n); i++) {
				float *ci = cm + (size_t)i * (size_t)n;
				for (int k = k0; k < MIN(k0 + BK, n); k++) {
					float aik = a[(size_t)i * (size_t)n + (size_t)k];
					const float *bk = b + (size_t)k * (size_t)n;
					for (int j = 0; j < n; j++)
						ci[j] += aik * bk[j];
				}
			}
}

struct gemm_arg {
	int n, reps;
	double gflops;
	int wrong;
};

static void *gemm_thread(void *p)
{
	struct gemm_arg *g = p;
	int n = g->n;
	size_t nn = (size_t)n * (size_t)n;
	float *a = xmalloc(nn * 4), *b = xmalloc(nn * 4), *cm = xmalloc(nn * 4);
	for (size_t i = 0; i < nn; i++) {
		a[i] = (float)((int)(i % 13) - 6) / 8.0f;
		b[i] = (float)((int)(i % 7) - 3) / 4.0f;
	}
	sgemm(n, a, b, cm); /* warm */
	double t0 = now_s();
	for (int r = 0; r < g->reps; r++)
		sgemm(n, a, b, cm);
	double dt = now_s() - t0;
	g->gflops = 2.0 * n * (double)n * n * g->reps / dt / 1e9;
	/* check some entries against double precision */
	for (int s = 0; s < 64; s++) {
		int i = (s * 37) % n, j = (s * 101) % n;
		double ref = 0;
		for (int k = 0; k < n; k++)
			ref += (double)a[(size_t)i * (size_t)n + (size_t)k] *
			       (double)b[(size_t)k * (size_t)n + (size_t)j];
		if (fabs(ref - cm[(size_t)i * (size_t)n + (size_t)j]) > 1e-3 * (fabs(ref) + 1))
			g->wrong++;
	}
	free(a);
	free(b);
	free(cm);
	return NULL;
}

int validate__check_cpu_gemm(struct vcheck *c, int threads, int n, int reps)
{
	validate__vcheck_set(c, "compute", "cpu_sgemm", "GFLOP/s", true);
	struct gemm_arg g[CHECK_MAX_THREADS];
	threads = MAX(1, MIN(threads, CHECK_MAX_THREADS));
	for (int t = 0; t < threads; t++)
		g[t] = (struct gemm_arg){n, reps, 0, 0};
	char why[128];
	if (threads_run(gemm_thread, g, sizeof(g[0]), threads, why, sizeof(why)) < 0) {
		c->verdict = V_FAIL;
		snprintf(c->detail, sizeof(c->detail), "%s", why);
		return 0;
	}
	int wrong = 0;
	for (int t = 0; t < threads; t++) {
		c->figure += g[t].gflops;
		wrong += g[t].wrong;
	}
	snprintf(c->detail, sizeof(c->detail), "%d threads, %dx%d single precision, %d wrong",
		 threads, n, n, wrong);
	if (wrong)
		c->verdict = V_FAIL;
	return 0;
}

/* ---- memory ------------------------------------------------------------------------------- */

struct mem_arg {
	size_t n;
	int reps;
	double gbs;
};

static void *triad_thread(void *p)
{
	struct mem_arg *m = p;
	double *a = xmalloc(m->n * 8), *b = xmalloc(m->n * 8), *cc = xmalloc(m->n * 8);
	for (size_t i = 0; i < m->n; i++) {
		a[i] = 0;
		b[i] = 1;
		cc[i] = 2;
	}
	double best = 1e9;
	for (int r = 0; r < m->reps; r++) {
		double t0 = now_s();
		for (size_t i = 0; i < m->n; i++)
			a[i] = b[i] + 3.0 * cc[i];
		best = MIN(best, now_s() - t0);
	}
	m->gbs = 3.0 * 8 * (double)m->n / best / 1e9;
	if (a[m->n / 2] != 7.0)
		m->gbs = -1; /* wrong arithmetic: fail loudly */
	free(a);
	free(b);
	free(cc);
	return NULL;
}

int validate__check_host_memory(struct vcheck *c, int threads, size_t mib)
{
	validate__vcheck_set(c, "memory", "host_bandwidth", "GB/s", true);
	struct mem_arg m[CHECK_MAX_THREADS];
	threads = MAX(1, MIN(threads, CHECK_MAX_THREADS));
	size_t per = mib * (1u << 20) / 24 / (size_t)threads;
	for (int t = 0; t < threads; t++)
		m[t] = (struct mem_arg){per, 5, 0};
	char why[128];
	if (threads_run(triad_thread, m, sizeof(m[0]), threads, why, sizeof(why)) < 0) {
		c->verdict = V_FAIL;
		snprintf(c->detail, sizeof(c->detail), "%s", why);
		return 0;
	}
	bool bad = false;
	for (int t = 0; t < threads; t++) {
		bad |= m[t].gbs < 0;
		c->figure += MAX(m[t].gbs, 0);
	}
	snprintf(c->detail, sizeof(c->detail), "triad, %d threads, %zu MiB", threads, mib);
	if (bad) {
		c->verdict = V_FAIL;
		snprintf(c->detail, sizeof(c->detail), "triad gave wrong results");
	}
	return 0;
}

/* ---- interconnect -------------------------------------------------------------------------- */

static int cmp_d(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

#define AR_ROUNDS 9

struct ar_arg {
	int rank, size, port;
	size_t bytes;
	double busbw;
	char error[sizeof(struct tk_error)];
};

static void *ar_thread(void *p)
{
	struct ar_arg *a = p;
	char root[64];
	snprintf(root, sizeof(root), "127.0.0.1:%d", a->port);
	struct coll_comm *c;
	struct tk_error err;
	struct coll_opts o = {.timeout_ms = 30000};
	if (coll_init(&c, a->rank, a->size, root, &o, &err) < 0) {
		snprintf(a->error, sizeof(a->error), "%s", err.text);
		return NULL;
	}
	size_t n = a->bytes / 4;
	float *buf = xmalloc(n * 4);
	for (size_t i = 0; i < n; i++)
		buf[i] = (float)(a->rank + 1);
	/* the first all-reduce checks the arithmetic: 1+2+...+n everywhere */
	int rc = coll_allreduce(c, buf, buf, n, COLL_F32, COLL_SUM, &err);
	double expect = a->size * (a->size + 1) / 2.0;
	if (rc == 0 && (buf[0] != (float)expect || buf[n / 3] != (float)expect))
		snprintf(a->error, sizeof(a->error), "all-reduce gave %g, expected %g", buf[n / 3],
			 expect);
	/* then the median of timed rounds: one round that lost its core to
	 * another process (a shared node, several validations at once) does not
	 * make the node look slow, as it would in a mean */
	double rounds[AR_ROUNDS];
	for (int r = 0; r < AR_ROUNDS && rc == 0; r++) {
		double t0 = now_s();
		rc = coll_allreduce(c, buf, buf, n, COLL_F32, COLL_SUM, &err);
		rounds[r] = now_s() - t0;
	}
	double us = 1e6;
	if (rc == 0) {
		qsort(rounds, AR_ROUNDS, sizeof(double), cmp_d);
		us = rounds[AR_ROUNDS / 2] * 1e6;
	} else
		snprintf(a->error, sizeof(a->error), "%s", err.text);
	a->busbw = (double)a->bytes / (us * 1e3) * 2.0 * (a->size - 1) / a->size;
	free(buf);
	coll_destroy(c);
	return NULL;
}

int validate__check_allreduce_local(struct vcheck *c, int ranks, size_t bytes, int port)
{
	validate__vcheck_set(c, "interconnect", "allreduce_in_node", "GB/s", true);
	ranks = MAX(2, MIN(ranks, 64));
	struct ar_arg a[64];
	for (int r = 0; r < ranks; r++)
		a[r] = (struct ar_arg){r, ranks, port, bytes, 0, ""};
	char why[128];
	if (threads_run(ar_thread, a, sizeof(a[0]), ranks, why, sizeof(why)) < 0) {
		c->verdict = V_FAIL;
		snprintf(c->detail, sizeof(c->detail), "%s", why);
		return 0;
	}
	c->figure = a[0].busbw;
	snprintf(c->detail, sizeof(c->detail), "%d ranks, %zu MiB, coll over shared memory", ranks,
		 bytes >> 20);
	for (int r = 0; r < ranks; r++)
		if (a[r].error[0]) {
			c->verdict = V_FAIL;
			snprintf(c->detail, sizeof(c->detail), "rank %d: %.300s", r, a[r].error);
		}
	return 0;
}

/* ---- storage ------------------------------------------------------------------------------- */

struct io_arg {
	char path[512];
	size_t bytes;
	bool write;
	double secs;
	char error[768];
};

static void pattern(uint8_t *buf, size_t n, size_t off, int seed)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)((off + i) * 2654435761u >> 13) ^ (uint8_t)seed;
}

static void *io_thread(void *p)
{
	struct io_arg *a = p;
	size_t chunk = 4u << 20;
	uint8_t *buf = xmalloc(chunk), *want = xmalloc(chunk);
	int seed = (int)(strlen(a->path) * 7);
	double t0 = now_s();
	int fd = open(a->path,
		      a->write ? O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC : O_RDONLY | O_CLOEXEC,
		      0600);
	if (fd < 0) {
		snprintf(a->error, sizeof(a->error), "%.200s: %s", a->path, strerror(errno));
		goto out;
	}
	for (size_t off = 0; off < a->bytes; off += chunk) {
		size_t n = MIN(chunk, a->bytes - off);
		if (a->write) {
			pattern(buf, n, off, seed);
			if (write(fd, buf, n) != (ssize_t)n) {
				snprintf(a->error, sizeof(a->error), "%.200s: write: %s", a->path,
					 strerror(errno));
				break;
			}
		} else {
			if (read(fd, buf, n) != (ssize_t)n) {
				snprintf(a->error, sizeof(a->error), "%.200s: short read", a->path);
				break;
			}
			pattern(want, n, off, seed);
			if (memcmp(buf, want, n) != 0) {
				snprintf(a->error, sizeof(a->error),
					 "%.200s: what was read back differs from what was written "
					 "at "
					 "offset %zu",
					 a->path, off);
				break;
			}
		}
	}
	if (a->write && !a->error[0] && fsync(fd) < 0)
		snprintf(a->error, sizeof(a->error), "%.200s: fsync: %s", a->path, strerror(errno));
	/* what was written leaves the page cache, so reads come from the device */
	if (!a->error[0])
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	a->secs = now_s() - t0;
out:
	free(buf);
	free(want);
	return NULL;
}

static double parallel_io(const char *dir, int files, int threads, size_t bytes, bool write,
			  char *error, size_t errn)
{
	struct io_arg a[64];
	threads = MAX(1, MIN(threads, 64));
	double t0 = now_s();
	for (int i = 0; i < threads; i++) {
		memset(&a[i], 0, sizeof(a[i]));
		snprintf(a[i].path, sizeof(a[i].path), "%s/tenk-validate-%d.%d", dir, (int)getpid(),
			 i % files);
		a[i].bytes = bytes;
		a[i].write = write;
	}
	char why[128];
	if (threads_run(io_thread, a, sizeof(a[0]), threads, why, sizeof(why)) < 0 && !error[0])
		snprintf(error, errn, "%s", why);
	for (int i = 0; i < threads; i++)
		if (a[i].error[0] && !error[0])
			snprintf(error, errn, "%s", a[i].error);
	return (double)bytes * threads / (now_s() - t0) / 1e6; /* MB/s */
}

int validate__check_storage(struct vcheck *w, struct vcheck *r, const char *dir, int writers,
			    size_t mib)
{
	validate__vcheck_set(w, "storage", "checkpoint_write", "MB/s", true);
	validate__vcheck_set(r, "storage", "loader_read", "MB/s", true);
	char error[768] = "";
	writers = MAX(1, MIN(writers, 16));
	w->figure = parallel_io(dir, writers, writers, mib << 20, true, error, sizeof(error));
	snprintf(w->detail, sizeof(w->detail),
		 "%d writers x %zu MiB with fsync, read back verified", writers, mib);
	double best = 0, one = 0;
	int best_n = 1;
	char curve[200] = "";
	for (int n = 1; n <= writers && !error[0]; n *= 2) {
		double mbs = parallel_io(dir, writers, n, mib << 20, false, error, sizeof(error));
		if (n == 1)
			one = mbs;
		if (mbs > best) {
			best = mbs;
			best_n = n;
		}
		size_t len = strlen(curve);
		snprintf(curve + len, sizeof(curve) - len, "%s%d: %.0f", len ? ", " : "", n, mbs);
	}
	r->figure = best;
	snprintf(r->detail, sizeof(r->detail), "MB/s by readers {%s}; best with %d (one: %.0f)",
		 curve, best_n, one);
	for (int i = 0; i < writers; i++) {
		char p[512];
		snprintf(p, sizeof(p), "%s/tenk-validate-%d.%d", dir, (int)getpid(), i);
		unlink(p);
	}
	if (error[0]) {
		w->verdict = V_FAIL;
		snprintf(w->detail, sizeof(w->detail), "%.300s", error);
		r->verdict = V_FAIL;
		snprintf(r->detail, sizeof(r->detail), "%.300s", error);
	}
	return 0;
}

/* ---- workload ------------------------------------------------------------------------------ */

/* Data-parallel least squares: each rank holds a shard of a fixed data set,
 * computes its gradient, the gradients are summed with coll, every rank
 * steps. The loss after the last step is known exactly (the same run on one
 * rank gives it), so silent corruption shows as a different loss. */
#define W_DIM 64
#define W_ROWS 2048
#define W_STEPS 60

static double w_x(int row, int k)
{
	return (double)((row * 31 + k * 17) % 23 - 11) / 11.0;
}

static double w_y(int row)
{
	double y = 0;
	for (int k = 0; k < W_DIM; k++)
		y += w_x(row, k) * (double)((k % 5) - 2) / 4.0;
	return y;
}

struct wl_arg {
	int rank, size, port;
	double loss[W_STEPS];
	double params[W_DIM]; /* the weights after the last step */
	double step_s[W_STEPS];
	char error[sizeof(struct tk_error)];
};

static void *wl_thread(void *p)
{
	struct wl_arg *a = p;
	struct coll_comm *c = NULL;
	struct tk_error err;
	char root[64];
	snprintf(root, sizeof(root), "127.0.0.1:%d", a->port);
	struct coll_opts o = {.timeout_ms = 30000};
	if (a->size > 1 && coll_init(&c, a->rank, a->size, root, &o, &err) < 0) {
		snprintf(a->error, sizeof(a->error), "%s", err.text);
		return NULL;
	}
	double wv[W_DIM] = {0}, g[W_DIM + 1];
	for (int s = 0; s < W_STEPS; s++) {
		double t0 = now_s();
		memset(g, 0, sizeof(g));
		for (int row = a->rank; row < W_ROWS; row += a->size) {
			double e = -w_y(row);
			for (int k = 0; k < W_DIM; k++)
				e += wv[k] * w_x(row, k);
			for (int k = 0; k < W_DIM; k++)
				g[k] += 2 * e * w_x(row, k) / W_ROWS;
			g[W_DIM] += e * e / W_ROWS;
		}
		if (c && coll_allreduce(c, g, g, W_DIM + 1, COLL_F64, COLL_SUM, &err) < 0) {
			snprintf(a->error, sizeof(a->error), "%s", err.text);
			break;
		}
		for (int k = 0; k < W_DIM; k++)
			wv[k] -= 0.05 * g[k];
		a->loss[s] = g[W_DIM];
		a->step_s[s] = now_s() - t0;
	}
	memcpy(a->params, wv, sizeof(wv));
	coll_destroy(c);
	return NULL;
}

void validate__reference_own(struct reference *r)
{
	struct wl_arg *a = xcalloc(1, sizeof(*a));
	a->size = 1;
	wl_thread(a);
	memset(r, 0, sizeof(*r));
	r->source = REF_SOURCE_TENK;
	r->nloss = W_STEPS;
	r->loss = xcalloc(W_STEPS, sizeof(double));
	memcpy(r->loss, a->loss, sizeof(a->loss));
	r->nparams = W_DIM;
	r->params = xcalloc(W_DIM, sizeof(double));
	memcpy(r->params, a->params, sizeof(a->params));
	r->step_s = reference_median(a->step_s, W_STEPS);
	free(a);
}

int validate__check_workload(struct vcheck *c, int ranks, int port)
{
	validate__vcheck_set(c, "workload", "dp_training", "steps/s", true);
	ranks = MAX(1, MIN(ranks, 16));
	struct wl_arg *a = xcalloc((size_t)ranks + 1, sizeof(*a));
	for (int r = 0; r < ranks; r++) {
		a[r].rank = r;
		a[r].size = ranks;
		a[r].port = port;
	}
	char why[128];
	if (threads_run(wl_thread, a, sizeof(a[0]), ranks, why, sizeof(why)) < 0) {
		c->verdict = V_FAIL;
		snprintf(c->detail, sizeof(c->detail), "%s", why);
		free(a);
		return 0;
	}
	/* the reference: the same run on one rank */
	struct wl_arg *ref = xcalloc(1, sizeof(*ref));
	ref->size = 1;
	wl_thread(ref);
	double times[W_STEPS], total = 0;
	for (int s = 0; s < W_STEPS; s++) {
		times[s] = a[0].step_s[s];
		total += times[s];
	}
	qsort(times, W_STEPS, sizeof(double), cmp_d);
	c->figure = W_STEPS / total;
	double spread = times[W_STEPS - 1] / times[W_STEPS / 2];
	double last = a[0].loss[W_STEPS - 1], want = ref->loss[W_STEPS - 1];
	snprintf(c->detail, sizeof(c->detail),
		 "%d ranks, loss %.6g -> %.6g (one-rank run: %.6g), slowest step %.1fx the median",
		 ranks, a[0].loss[0], last, want, spread);
	for (int r = 0; r < ranks; r++)
		if (a[r].error[0]) {
			c->verdict = V_FAIL;
			snprintf(c->detail, sizeof(c->detail), "rank %d: %.300s", r, a[r].error);
		}
	if (c->verdict == V_PASS &&
	    (!(last < a[0].loss[0]) || fabs(last - want) > 1e-9 * (fabs(want) + 1))) {
		c->verdict = V_FAIL;
		snprintf(c->detail, sizeof(c->detail),
			 "loss %.9g differs from the one-rank run's %.9g (or did not fall): silent "
			 "corruption",
			 last, want);
	}
	for (int r = 1; r < ranks && c->verdict == V_PASS; r++)
		if (a[r].loss[W_STEPS - 1] != last) {
			c->verdict = V_FAIL;
			snprintf(c->detail, sizeof(c->detail), "ranks disagree on the loss");
		}
	free(a);
	free(ref);
	return 0;
}
