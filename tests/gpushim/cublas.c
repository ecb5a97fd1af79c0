/*
 * A stand-in for cuBLAS (libcublas.so.13); see cuda.c. cublasGemmEx does
 * what the real one does for the one case tenk asks for (no transposes,
 * bf16 in, f32 out, column-major), on the host. TENK_FAKE_GEMM_WRONG=1 makes
 * it get one element wrong, for the check that catches silent corruption.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static float bf16(uint16_t v)
{
	uint32_t u = (uint32_t)v << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

int cublasCreate_v2(void **h)
{
	*h = malloc(1);
	return *h ? 0 : 3; /* CUBLAS_STATUS_ALLOC_FAILED */
}

int cublasDestroy_v2(void *h)
{
	free(h);
	return 0;
}

int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,
		 int at, int lda, const void *B, int bt, int ldb, const void *beta, void *C, int ct,
		 int ldc, int compute, int algo)
{
	(void)h;
	(void)algo;
	if (ta != 0 || tb != 0 || at != 14 || bt != 14 || ct != 0 || compute != 68)
		return 15; /* CUBLAS_STATUS_NOT_SUPPORTED */
	const uint16_t *a = A, *b = B;
	float *c = C, al = *(const float *)alpha, be = *(const float *)beta;
	float *col = malloc(sizeof(float) * (size_t)m);
	if (!col)
		return 3;
	for (int j = 0; j < n; j++) {
		for (int i = 0; i < m; i++)
			col[i] = 0;
		for (int p = 0; p < k; p++) {
			float bv = bf16(b[p + (size_t)j * (size_t)ldb]);
			const uint16_t *ap = a + (size_t)p * (size_t)lda;
			for (int i = 0; i < m; i++)
				col[i] += bf16(ap[i]) * bv;
		}
		for (int i = 0; i < m; i++) {
			float *cv = &c[i + (size_t)j * (size_t)ldc];
			*cv = al * col[i] + (be != 0 ? be * *cv : 0);
		}
	}
	free(col);
	const char *w = getenv("TENK_FAKE_GEMM_WRONG");
	if (w && *w == '1')
		c[0] += 1;
	return 0;
}
