/*
 * A stand-in for NCCL (libnccl.so.2) within one process; see cuda.c. A
 * group's all-reduces (float sums) are carried out at ncclGroupEnd over the
 * buffers of all the communicators of one ncclCommInitAll. There is no
 * ncclCommInitRank: between nodes tenk says so and skips.
 */
#include <stdlib.h>
#include <string.h>

struct comm {
	int rank, n;
};

struct call {
	const float *send;
	float *recv;
	size_t count;
	struct comm *c;
};

static struct call calls[64];
static int ncalls, depth;

int ncclGetVersion(int *v)
{
	*v = 22105;
	return 0;
}

int ncclCommInitAll(void **comms, int n, const int *devs)
{
	(void)devs;
	for (int i = 0; i < n; i++) {
		struct comm *c = malloc(sizeof(*c));
		if (!c)
			return 1;
		c->rank = i;
		c->n = n;
		comms[i] = c;
	}
	return 0;
}

int ncclCommDestroy(void *c)
{
	free(c);
	return 0;
}

int ncclGroupStart(void)
{
	depth++;
	return 0;
}

static int run(void)
{
	if (ncalls == 0)
		return 0;
	size_t count = calls[0].count;
	float *sum = calloc(count, sizeof(float));
	if (!sum)
		return 1;
	for (int i = 0; i < ncalls; i++) {
		if (calls[i].count != count)
			return 4; /* ncclInvalidArgument */
		for (size_t k = 0; k < count; k++)
			sum[k] += calls[i].send[k];
	}
	for (int i = 0; i < ncalls; i++)
		memcpy(calls[i].recv, sum, count * sizeof(float));
	free(sum);
	ncalls = 0;
	return 0;
}

int ncclGroupEnd(void)
{
	return --depth == 0 ? run() : 0;
}

int ncclAllReduce(const void *send, void *recv, size_t count, int type, int op, void *comm,
		  void *stream)
{
	(void)stream;
	if (type != 7 || op != 0 || ncalls == 64)
		return 4;
	calls[ncalls++] = (struct call){send, recv, count, comm};
	return depth ? 0 : run();
}
