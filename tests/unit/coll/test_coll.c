/*
 * coll against a naive reference: every collective, over TCP (loopback) and
 * shared memory, for 1 to 7 ranks, element counts from 1 to 256 MiB worth,
 * counts that do not divide by the rank count, every type and operation.
 * Ranks are threads, each with its own communicator, as separate processes
 * would have. A dead peer gives an error within the timeout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll/coll.h"

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	close(fd);
	return ntohs(sa.sin_port);
}

struct rank_job {
	int rank, size, port;
	bool no_shm;
	int timeout_ms;
	bool big;     /* the 256 MiB case */
	int die_rank; /* this rank leaves at once (-1: none) */
	char transport[8];
	char failure[sizeof(struct tk_error) + 64]; /* empty: all good */
	int64_t err_ms;				    /* how long the failing call took */
	int err_code;
};

#define FAIL(j, ...)                                                                               \
	do {                                                                                       \
		if (!(j)->failure[0])                                                              \
			snprintf((j)->failure, sizeof((j)->failure), __VA_ARGS__);                 \
	} while (0)

static const size_t counts[] = {1, 2, 3, 7, 100, 1023, 16411, (1u << 20) + 3};

static void run_all(struct rank_job *j, struct coll_comm *c)
{
	struct tk_error err;
	int n = j->size;
	size_t maxc = counts[ARRAY_SIZE(counts) - 1];
	size_t sz = MAX(maxc * 8, ((3u << 20) + 16) * (size_t)n) + 64;
	uint8_t *a = malloc(sz), *b = malloc(sz);
	for (int t = 0; t < COLL_DTYPE_MAX; t++)
		for (int op = 0; op < COLL_OP_MAX; op++)
			for (size_t k = 0; k < ARRAY_SIZE(counts); k++) {
				size_t cnt = counts[k];
				if (t != COLL_F32 && op != COLL_SUM && cnt > 20000)
					continue; /* the largest size once per type is enough */
				coll_pattern_fill(a, cnt, (enum coll_dtype)t, j->rank, 0);
				bool inplace = k % 2;
				if (coll_allreduce(c, a, inplace ? a : b, cnt, (enum coll_dtype)t,
						   (enum coll_op)op, &err) < 0) {
					FAIL(j, "allreduce: %s", err.text);
					goto out;
				}
				const uint8_t *res = inplace ? a : b;
				for (size_t i = 0; i < cnt; i++)
					if (coll_element(res, i, (enum coll_dtype)t) !=
					    coll_pattern_reduced(n, i, (enum coll_op)op)) {
						FAIL(j,
						     "allreduce %s %s count %zu: element %zu is "
						     "%g, not %g",
						     coll_dtype_name(t), coll_op_name(op), cnt, i,
						     coll_element(res, i, (enum coll_dtype)t),
						     coll_pattern_reduced(n, i, (enum coll_op)op));
						goto out;
					}
			}
	/* reduce-scatter: block r of every rank's input */
	for (size_t k = 0; k < 6; k++) {
		size_t cnt = counts[k] * 3;
		coll_pattern_fill(a, cnt * (size_t)n, COLL_F32, j->rank, 0);
		if (coll_reduce_scatter(c, a, b, cnt, COLL_F32, COLL_SUM, &err) < 0) {
			FAIL(j, "reduce_scatter: %s", err.text);
			goto out;
		}
		for (size_t i = 0; i < cnt; i++)
			if (coll_element(b, i, COLL_F32) !=
			    coll_pattern_reduced(n, (size_t)j->rank * cnt + i, COLL_SUM)) {
				FAIL(j, "reduce_scatter count %zu: element %zu wrong", cnt, i);
				goto out;
			}
	}
	/* all-gather, odd byte counts */
	static const size_t gbytes[] = {1, 5, 4099, (3u << 20) + 1};
	for (size_t k = 0; k < ARRAY_SIZE(gbytes); k++) {
		size_t nb = gbytes[k];
		for (size_t i = 0; i < nb; i++)
			a[i] = (uint8_t)(j->rank * 31 + i);
		if (coll_allgather(c, a, b, nb, &err) < 0) {
			FAIL(j, "allgather: %s", err.text);
			goto out;
		}
		for (int r = 0; r < n; r++)
			for (size_t i = 0; i < nb; i++)
				if (b[(size_t)r * nb + i] != (uint8_t)(r * 31 + i)) {
					FAIL(j, "allgather %zu bytes: rank %d's byte %zu wrong", nb,
					     r, i);
					goto out;
				}
	}
	/* broadcast from every root, small and large */
	static const size_t bbytes[] = {1, 333, (3u << 20) + 5};
	for (int root = 0; root < n; root++)
		for (size_t k = 0; k < ARRAY_SIZE(bbytes); k++) {
			size_t nb = bbytes[k];
			for (size_t i = 0; i < nb; i++)
				a[i] = (uint8_t)(j->rank == root ? root * 7 + i : 0xee);
			if (coll_broadcast(c, a, nb, root, &err) < 0) {
				FAIL(j, "broadcast: %s", err.text);
				goto out;
			}
			for (size_t i = 0; i < nb; i++)
				if (a[i] != (uint8_t)(root * 7 + i)) {
					FAIL(j, "broadcast %zu bytes from %d: byte %zu wrong", nb,
					     root, i);
					goto out;
				}
		}
	if (coll_barrier(c, &err) < 0)
		FAIL(j, "barrier: %s", err.text);
	/* point to point: a shift around the ring, then every pair in rounds */
	if (n > 1) {
		size_t len = (1u << 20) + 5;
		int to = (j->rank + 1) % n, from = (j->rank + n - 1) % n;
		for (size_t i = 0; i < len; i++)
			a[i] = (uint8_t)(i * 31 + (size_t)j->rank);
		int rc = coll_sendrecv(c, to, a, len, from, b, len, &err);
		if (strcmp(coll_transport(c), "shm") == 0) {
			if (rc != -ENOTSUP)
				FAIL(j, "sendrecv over shm: %d, not -ENOTSUP", rc);
			goto out;
		}
		if (rc < 0) {
			FAIL(j, "sendrecv: %s", err.text);
			goto out;
		}
		for (size_t i = 0; i < len; i++)
			if (b[i] != (uint8_t)(i * 31 + (size_t)from)) {
				FAIL(j, "sendrecv from %d: byte %zu wrong", from, i);
				goto out;
			}
		/* round-robin rounds: rank p and (round - p) mod m meet */
		int m = n % 2 ? n + 1 : n;
		for (int round = 0; round < m - 1; round++) {
			int p = j->rank, q;
			if (p == m - 1)
				q = round;
			else if (p == round)
				q = m - 1;
			else
				q = ((2 * round - p) % (m - 1) + (m - 1)) % (m - 1);
			if (q >= n || q == p)
				continue;
			memset(b, 0, 64);
			if (coll_sendrecv(c, q, a, 64, q, b, 64, &err) < 0) {
				FAIL(j, "sendrecv round %d with %d: %s", round, q, err.text);
				goto out;
			}
			if (b[1] != (uint8_t)(31 + q))
				FAIL(j, "sendrecv round %d: data from %d wrong", round, q);
		}
		if (coll_sendrecv(c, j->rank, a, 1, -1, NULL, 0, &err) != -EINVAL)
			FAIL(j, "sendrecv to itself was not refused");
	}
out:
	free(a);
	free(b);
}

static void run_big(struct rank_job *j, struct coll_comm *c)
{
	struct tk_error err;
	size_t cnt = (256u << 20) / 4; /* 256 MiB of f32, in place */
	float *a = malloc(cnt * 4);
	coll_pattern_fill(a, cnt, COLL_F32, j->rank, 0);
	if (coll_allreduce(c, a, a, cnt, COLL_F32, COLL_SUM, &err) < 0)
		FAIL(j, "allreduce 256 MiB: %s", err.text);
	for (size_t i = 0; i < cnt && !j->failure[0]; i++)
		if (a[i] != (float)coll_pattern_reduced(j->size, i, COLL_SUM))
			FAIL(j, "allreduce 256 MiB: element %zu wrong", i);
	free(a);
}

static void *rank_main(void *arg)
{
	struct rank_job *j = arg;
	char root[64];
	snprintf(root, sizeof(root), "127.0.0.1:%d", j->port);
	struct coll_opts o = {.timeout_ms = j->timeout_ms, .no_shm = j->no_shm};
	struct coll_comm *c;
	struct tk_error err;
	int64_t t0 = tk_mono_ms();
	if (coll_init(&c, j->rank, j->size, root, &o, &err) < 0) {
		j->err_ms = tk_mono_ms() - t0;
		FAIL(j, "init: %s", err.text);
		return NULL;
	}
	snprintf(j->transport, sizeof(j->transport), "%s", coll_transport(c));
	if (j->die_rank >= 0) {
		if (j->rank == j->die_rank) {
			coll_destroy(c); /* gone: its sockets close */
			return NULL;
		}
		float x[1 << 16] = {0};
		int64_t t1 = tk_mono_ms();
		j->err_code = coll_allreduce(c, x, x, 1 << 16, COLL_F32, COLL_SUM, &err);
		j->err_ms = tk_mono_ms() - t1;
		if (j->err_code < 0)
			snprintf(j->failure, sizeof(j->failure), "%s", err.text);
		/* a broken communicator refuses further calls */
		if (j->err_code < 0 && coll_barrier(c, &err) == 0)
			snprintf(j->failure, sizeof(j->failure),
				 "a barrier after an error succeeded");
		coll_destroy(c);
		return NULL;
	}
	if (j->big)
		run_big(j, c);
	else
		run_all(j, c);
	coll_destroy(c);
	return NULL;
}

static void run(int n, bool no_shm, bool big, int die, int timeout_ms, struct rank_job *jobs)
{
	pthread_t th[16];
	int port = free_port();
	for (int r = 0; r < n; r++) {
		jobs[r] = (struct rank_job){.rank = r,
					    .size = n,
					    .port = port,
					    .no_shm = no_shm,
					    .timeout_ms = timeout_ms,
					    .big = big,
					    .die_rank = die};
		assert_int_equal(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
	}
	for (int r = 0; r < n; r++)
		pthread_join(th[r], NULL);
}

static void check_all(int n, bool no_shm)
{
	struct rank_job jobs[16];
	run(n, no_shm, false, -1, 60000, jobs);
	for (int r = 0; r < n; r++)
		if (jobs[r].failure[0])
			print_message("# %d ranks, rank %d: %s\n", n, r, jobs[r].failure);
	for (int r = 0; r < n; r++) {
		if (jobs[r].failure[0])
			fail_msg("%d ranks (%s), rank %d: %s", n, no_shm ? "tcp" : "shm", r,
				 jobs[r].failure);
		if (n > 1)
			assert_string_equal(jobs[r].transport, no_shm ? "tcp" : "shm");
	}
}

static void test_tcp(void **state)
{
	for (int n = 1; n <= 7; n++)
		check_all(n, true);
}

static void test_shm(void **state)
{
	static const int ns[] = {2, 3, 5};
	for (size_t i = 0; i < ARRAY_SIZE(ns); i++)
		check_all(ns[i], false);
}

static void test_256mib(void **state)
{
	struct rank_job jobs[2];
	for (int shm = 0; shm < 2; shm++) {
		run(2, !shm, true, -1, 120000, jobs);
		for (int r = 0; r < 2; r++)
			if (jobs[r].failure[0])
				fail_msg("rank %d: %s", r, jobs[r].failure);
	}
}

static void test_dead_peer(void **state)
{
	struct rank_job jobs[3];
	for (int shm = 0; shm < 2; shm++) {
		run(3, !shm, false, 2, 1500, jobs);
		for (int r = 0; r < 2; r++) {
			assert_true(jobs[r].err_code < 0);
			if (!strstr(jobs[r].failure, "rank"))
				fail_msg("rank %d: %s", r, jobs[r].failure);
			assert_true(jobs[r].err_ms < 1500 + 1000); /* within the timeout */
		}
	}
	/* a rank that never comes: the rendezvous gives up in time */
	struct rank_job one[2];
	int port = free_port();
	one[0] = (struct rank_job){
		.rank = 0, .size = 2, .port = port, .timeout_ms = 500, .die_rank = -1};
	rank_main(&one[0]);
	assert_non_null(strstr(one[0].failure, "1 of 2 ranks arrived"));
	assert_true(one[0].err_ms < 500 + 1000);
}

static void test_bf16_rounding(void **state)
{
	assert_int_equal(coll_float_to_bf16(1.0f), 0x3f80);
	/* 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties go to even (1) */
	assert_int_equal(coll_float_to_bf16(1.00390625f), 0x3f80);
	assert_int_equal(coll_float_to_bf16(1.01171875f), 0x3f82);
	assert_true(isnan(coll_bf16_to_float(coll_float_to_bf16(NAN))));
	float a = coll_bf16_to_float(coll_float_to_bf16(3.0f));
	assert_true(a == 3.0f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bf16_rounding), cmocka_unit_test(test_tcp),
		cmocka_unit_test(test_shm),	      cmocka_unit_test(test_256mib),
		cmocka_unit_test(test_dead_peer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
