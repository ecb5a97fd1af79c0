/*
 * Open MPI's MPI_Allreduce on float sums, timed as tenk bench times its own:
 * warm-up runs, then the mean of timed runs, the slowest rank's. Prints one
 * JSON object per size on rank 0.
 * Usage: mpi_allreduce MINBYTES MAXBYTES FACTOR ITERS WARMUP
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (argc != 6) {
		if (rank == 0)
			fprintf(stderr,
				"usage: mpi_allreduce MINBYTES MAXBYTES FACTOR ITERS WARMUP\n");
		MPI_Finalize();
		return 2;
	}
	size_t minb = strtoull(argv[1], NULL, 10), maxb = strtoull(argv[2], NULL, 10);
	double f = atof(argv[3]);
	int iters = atoi(argv[4]), warm = atoi(argv[5]);
	float *buf = calloc(maxb / 4 + 1, 4);
	for (double sz = (double)minb; sz <= (double)maxb; sz *= f) {
		int count = (int)(sz / 4);
		for (int i = 0; i < warm; i++)
			MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int i = 0; i < iters; i++)
			MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		double us = (MPI_Wtime() - t0) / iters * 1e6, mx;
		MPI_Reduce(&us, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			double algbw = (double)count * 4 / (mx * 1e3);
			printf("{\"size\": %zu, \"time_us\": %.2f, \"busbw_gbs\": %.4f}\n",
			       (size_t)count * 4, mx, algbw * 2.0 * (n - 1) / n);
			fflush(stdout);
		}
	}
	free(buf);
	MPI_Finalize();
	return 0;
}
