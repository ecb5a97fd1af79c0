/*
 * tenk bench allreduce|allgather|reducescatter|broadcast: the table
 * nccl-tests prints, over coll. Every rank runs it; rank 0 prints. Ranks
 * come from --rank/--size/--root, or from the environment tenk (and
 * torchrun) give a job: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
 *
 * For each size: warm-up runs, then timed runs; the time is the slowest
 * rank's mean. algbw = size / time; busbw applies nccl-tests' factors:
 * 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter, 1 for
 * broadcast. Then one run on known values is checked element by element;
 * #wrong is the number of wrong elements over all ranks.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -e's largest size: two buffers of it per rank (nccl-tests runs to 8G) */
#define BENCH_MAX_BYTES (16ull << 30)

enum bench_coll { B_ALLREDUCE, B_ALLGATHER, B_REDUCESCATTER, B_BROADCAST };

static const char *const coll_names[] = {"allreduce", "allgather", "reducescatter", "broadcast"};

enum {
	O_BEGIN,
	O_END,
	O_FACTOR,
	O_ITERS,
	O_WARMUP,
	O_TYPE,
	O_OP,
	O_ROOT_RANK,
	O_CHECK,
	O_RANK,
	O_SIZE,
	O_ROOT,
	O_CONNS,
	O_NO_SHM,
	O_TIMEOUT,
	O_JSON,
	O_HELP,
	O_N
};

static const struct tk_option opts[] = {
	{"minbytes", 'b', "SIZE", "smallest size (default 8)"},
	{"maxbytes", 'e', "SIZE", "largest size (default 32M)"},
	{"stepfactor", 'f', "F", "multiply the size by F each step (default 2)"},
	{"iters", 'n', "N", "timed runs per size (default 20)"},
	{"warmup_iters", 'w', "N", "untimed runs first (default 5)"},
	{"datatype", 'd', "TYPE", "float, double or bfloat16 (default float)"},
	{"op", 'o', "OP", "sum, max or min (default sum)"},
	{"root", 'r', "RANK", "broadcast root (default 0)"},
	{"check", 'c', "0|1", "check the result of a run on known values (default 1)"},
	{"rank", 0, "R", "this rank (default $RANK)"},
	{"size", 0, "N", "number of ranks (default $WORLD_SIZE)"},
	{"rendezvous", 0, "HOST:PORT", "rank 0's address (default $MASTER_ADDR:$MASTER_PORT)"},
	{"conns", 0, "N", "TCP connections per pair of ranks (default 4)"},
	{"no-shm", 0, NULL, "never use shared memory between ranks on one host"},
	{"timeout", 0, "DURATION", "give up on a stalled peer after this long (default 60s)"},
	{"json", 0, NULL, "print the rows as JSON"},
	{"help", 'h', NULL, "show this help"},
};

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "tenk bench: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: tenk bench allreduce|allgather|reducescatter|broadcast [OPTIONS] "
			"(see tenk bench --help)\n");
	return 2;
}

/* "8", "1K", "32M", "1G" in bytes */
static int parse_bytes(const char *s, size_t *ret)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s || errno)
		return -EINVAL;
	unsigned long long mul = 1;
	if (*end == 'K' || *end == 'k')
		mul = 1ULL << 10;
	else if (*end == 'M' || *end == 'm')
		mul = 1ULL << 20;
	else if (*end == 'G' || *end == 'g')
		mul = 1ULL << 30;
	else if (*end)
		return -EINVAL;
	if (*end && end[1])
		return -EINVAL;
	if (v > (16ULL << 30) / mul)
		return -ERANGE;
	*ret = (size_t)(v * mul);
	return 0;
}

struct run {
	enum bench_coll which;
	struct coll_comm *c;
	enum coll_dtype t;
	enum coll_op op;
	int root;
	void *in, *out;
	size_t count; /* elements: per rank's block for all-gather and reduce-scatter */
};

static int once(struct run *r, struct tk_error *err)
{
	size_t es = coll_dtype_size(r->t);
	switch (r->which) {
	case B_ALLREDUCE:
		return coll_allreduce(r->c, r->in, r->out, r->count, r->t, r->op, err);
	case B_ALLGATHER:
		return coll_allgather(r->c, r->in, r->out, r->count * es, err);
	case B_REDUCESCATTER:
		return coll_reduce_scatter(r->c, r->in, r->out, r->count, r->t, r->op, err);
	default:
		return coll_broadcast(r->c, r->in, r->count * es, r->root, err);
	}
}

/* Wrong elements after one run on known values, on this rank. */
static int64_t checked(struct run *r, struct tk_error *err, int *rc)
{
	int n = coll_size(r->c), me = coll_rank(r->c);
	size_t cnt = r->count;
	int64_t wrong = 0;
	switch (r->which) {
	case B_ALLREDUCE:
		coll_pattern_fill(r->in, cnt, r->t, me, 0);
		if ((*rc = once(r, err)) < 0)
			return 0;
		for (size_t i = 0; i < cnt; i++)
			wrong += coll_element(r->out, i, r->t) != coll_pattern_reduced(n, i, r->op);
		break;
	case B_ALLGATHER:
		coll_pattern_fill(r->in, cnt, r->t, me, 0);
		if ((*rc = once(r, err)) < 0)
			return 0;
		for (int k = 0; k < n; k++)
			for (size_t i = 0; i < cnt; i++)
				wrong += coll_element(r->out, (size_t)k * cnt + i, r->t) !=
					 coll_pattern(k, i);
		break;
	case B_REDUCESCATTER:
		coll_pattern_fill(r->in, cnt * (size_t)n, r->t, me, 0);
		if ((*rc = once(r, err)) < 0)
			return 0;
		for (size_t i = 0; i < cnt; i++)
			wrong += coll_element(r->out, i, r->t) !=
				 coll_pattern_reduced(n, (size_t)me * cnt + i, r->op);
		break;
	default:
		coll_pattern_fill(r->in, cnt, r->t, me == r->root ? r->root : n + 1, 0);
		if ((*rc = once(r, err)) < 0)
			return 0;
		for (size_t i = 0; i < cnt; i++)
			wrong += coll_element(r->in, i, r->t) != coll_pattern(r->root, i);
	}
	*rc = 0;
	return wrong;
}

int validate_bench_main(const struct tk_command *cmd, int argc, char **argv)
{
	if (argc < 2 || argv[1][0] == '-') {
		if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
			tk_opts_usage(
				opts, O_N,
				"usage: tenk bench allreduce|allgather|reducescatter|broadcast "
				"[OPTIONS]\nMeasures a collective across ranks (as nccl-tests "
				"does) and checks its results.");
			return 0;
		}
		return usage("name a collective");
	}
	int which = -1;
	for (int i = 0; i < 4; i++)
		if (strcmp(argv[1], coll_names[i]) == 0 ||
		    (strncmp(argv[1], coll_names[i], strlen(coll_names[i])) == 0 &&
		     strcmp(argv[1] + strlen(coll_names[i]), "_perf") == 0))
			which = i;
	if (which < 0)
		return usage("unknown collective \"%s\"", argv[1]);
	const char *v[O_N] = {0};
	char **pos;
	int npos;
	struct tk_error err;
	if (tk_opts_parse(opts, O_N, argc - 1, argv + 1, false, v, &pos, &npos, &err) < 0)
		return usage("%s", err.text);
	free(pos);
	if (npos)
		return usage("unexpected argument");
	size_t minb = 8, maxb = 32u << 20;
	/* -e, from the user: its buffers are allocated whole, twice */
	double factor = 2;
	int64_t iters = 20, warm = 5, root_rank = 0, check = 1, rank, size, conns = 0;
	if ((v[O_BEGIN] && parse_bytes(v[O_BEGIN], &minb) < 0) ||
	    (v[O_END] && parse_bytes(v[O_END], &maxb) < 0) || minb == 0 || maxb < minb)
		return usage("-b/-e: sizes such as 8, 64K or 256M with -b <= -e");
	if (maxb > BENCH_MAX_BYTES)
		return usage("-e: at most %lluG, got \"%s\"",
			     (unsigned long long)(BENCH_MAX_BYTES >> 30), v[O_END]);
	if (v[O_FACTOR]) {
		char *end;
		factor = strtod(v[O_FACTOR], &end);
		if (*end || !(factor > 1 && factor <= 1024))
			return usage("-f: a factor above 1, got \"%s\"", v[O_FACTOR]);
	}
	if ((v[O_ITERS] && tk_parse_int64(v[O_ITERS], 1, 1000000, &iters) < 0) ||
	    (v[O_WARMUP] && tk_parse_int64(v[O_WARMUP], 0, 1000000, &warm) < 0) ||
	    (v[O_CHECK] && tk_parse_int64(v[O_CHECK], 0, 1, &check) < 0) ||
	    (v[O_CONNS] && tk_parse_int64(v[O_CONNS], 1, 16, &conns) < 0))
		return usage("-n, -w, -c or --conns out of range");
	enum coll_dtype t = COLL_F32;
	if (v[O_TYPE]) {
		if (strcmp(v[O_TYPE], "float") == 0)
			t = COLL_F32;
		else if (strcmp(v[O_TYPE], "double") == 0)
			t = COLL_F64;
		else if (strcmp(v[O_TYPE], "bfloat16") == 0)
			t = COLL_BF16;
		else
			return usage("-d: float, double or bfloat16, got \"%s\"", v[O_TYPE]);
	}
	enum coll_op op = COLL_SUM;
	if (v[O_OP]) {
		if (strcmp(v[O_OP], "sum") == 0)
			op = COLL_SUM;
		else if (strcmp(v[O_OP], "max") == 0)
			op = COLL_MAX;
		else if (strcmp(v[O_OP], "min") == 0)
			op = COLL_MIN;
		else
			return usage("-o: sum, max or min, got \"%s\"", v[O_OP]);
	}
	const char *rs = v[O_RANK] ? v[O_RANK] : getenv("RANK");
	const char *ns = v[O_SIZE] ? v[O_SIZE] : getenv("WORLD_SIZE");
	if (!rs && !ns) { /* outside a job: one rank, on its own */
		rs = "0";
		ns = "1";
	}
	if (!rs || !ns || tk_parse_int64(ns, 1, 4096, &size) < 0 ||
	    tk_parse_int64(rs, 0, size - 1, &rank) < 0)
		return usage(
			"--rank and --size (or RANK and WORLD_SIZE) must give a rank below the "
			"number of ranks");
	if (v[O_ROOT_RANK] && tk_parse_int64(v[O_ROOT_RANK], 0, size - 1, &root_rank) < 0)
		return usage("-r: a rank from 0 to %lld", (long long)size - 1);
	char root[300];
	if (v[O_ROOT]) {
		snprintf(root, sizeof(root), "%s", v[O_ROOT]);
	} else if (getenv("MASTER_ADDR") && getenv("MASTER_PORT")) {
		snprintf(root, sizeof(root), "%s:%s", getenv("MASTER_ADDR"), getenv("MASTER_PORT"));
	} else if (size == 1) {
		snprintf(root, sizeof(root), "127.0.0.1:1");
	} else {
		return usage("--rendezvous HOST:PORT (or MASTER_ADDR and MASTER_PORT) is required");
	}
	struct coll_opts co = {.conns_per_peer = (int)conns, .no_shm = v[O_NO_SHM] != NULL};
	if (v[O_TIMEOUT]) {
		int64_t s;
		if (tk_parse_duration(v[O_TIMEOUT], &s) < 0 || s < 1 || s > 86400)
			return usage("--timeout: a duration such as 30s, got \"%s\"", v[O_TIMEOUT]);
		co.timeout_ms = (int)(s * 1000);
	}
	struct coll_comm *c;
	if (coll_init(&c, (int)rank, (int)size, root, &co, &err) < 0) {
		fprintf(stderr, "tenk bench: %s\n", err.text);
		return 1;
	}
	int n = (int)size;
	bool lead = rank == 0;
	size_t es = coll_dtype_size(t);
	/* the largest buffers any size needs */
	size_t in_max = maxb + (size_t)n * es + 64, out_max = maxb + (size_t)n * es + 64;
	void *in = xmalloc(in_max), *out = xmalloc(out_max);
	memset(in, 0, in_max);
	memset(out, 0, out_max);
	double busf = which == B_ALLREDUCE   ? 2.0 * (n - 1) / n
		      : which == B_BROADCAST ? 1.0
					     : (double)(n - 1) / n;
	json_t *rows = json_array();
	if (lead && !v[O_JSON]) {
		printf("# tenk bench %s: %d ranks over %s%s\n#\n", coll_names[which], n,
		       coll_transport(c),
		       strcmp(coll_transport(c), "tcp") == 0 ? "" : " (one host)");
		printf("# %10s %12s %9s %7s %6s %10s %8s %8s %7s\n", "size", "count", "type",
		       "redop", "root", "time", "algbw", "busbw", "#wrong");
		printf("# %10s %12s %9s %7s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "",
		       "", "(us)", "(GB/s)", "(GB/s)", "");
	}
	int rc = 0;
	int64_t total_wrong = 0;
	for (double sz = (double)minb; sz <= (double)maxb * 1.0000001 && rc == 0; sz *= factor) {
		/* whole elements, and for the sharded collectives a multiple of n */
		size_t unit = which == B_ALLREDUCE || which == B_BROADCAST ? es : es * (size_t)n;
		size_t bytes = (size_t)sz / unit * unit;
		if (bytes == 0)
			continue;
		struct run r = {(enum bench_coll)which,
				c,
				t,
				op,
				(int)root_rank,
				in,
				out,
				which == B_ALLREDUCE || which == B_BROADCAST
					? bytes / es
					: bytes / es / (size_t)n};
		for (int64_t i = 0; i < warm && rc == 0; i++)
			rc = once(&r, &err);
		if (rc == 0)
			rc = coll_barrier(c, &err);
		int64_t t0 = tk_mono_us();
		for (int64_t i = 0; i < iters && rc == 0; i++)
			rc = once(&r, &err);
		double us = (double)(tk_mono_us() - t0) / (double)iters;
		/* the slowest rank's time, and the wrong elements of all */
		int64_t wrong = 0;
		if (rc == 0 && check)
			wrong = checked(&r, &err, &rc);
		double agg[2] = {us, (double)wrong};
		double mx[1] = {us};
		if (rc == 0)
			rc = coll_allreduce(c, mx, mx, 1, COLL_F64, COLL_MAX, &err);
		if (rc == 0)
			rc = coll_allreduce(c, &agg[1], &agg[1], 1, COLL_F64, COLL_SUM, &err);
		if (rc < 0)
			break;
		us = mx[0];
		wrong = (int64_t)agg[1];
		total_wrong += wrong;
		double algbw = (double)bytes / (us * 1e3), busbw = algbw * busf;
		size_t count = bytes / es;
		if (lead && v[O_JSON]) {
			json_array_append_new(
				rows,
				json_pack("{s:I, s:I, s:s, s:s, s:i, s:f, s:f, s:f, s:I}", "size",
					  (json_int_t)bytes, "count", (json_int_t)count, "type",
					  coll_dtype_name(t), "redop",
					  which == B_ALLREDUCE || which == B_REDUCESCATTER
						  ? coll_op_name(op)
						  : "none",
					  "root", which == B_BROADCAST ? (int)root_rank : -1,
					  "time_us", us, "algbw_gbs", algbw, "busbw_gbs", busbw,
					  "wrong", (json_int_t)(check ? wrong : -1)));
		} else if (lead) {
			char wr[24];
			snprintf(wr, sizeof(wr), check ? "%lld" : "N/A", (long long)wrong);
			printf("  %10zu %12zu %9s %7s %6d %10.1f %8.2f %8.2f %7s\n", bytes, count,
			       coll_dtype_name(t),
			       which == B_ALLREDUCE || which == B_REDUCESCATTER ? coll_op_name(op)
										: "none",
			       which == B_BROADCAST ? (int)root_rank : -1, us, algbw, busbw, wr);
			fflush(stdout);
		}
	}
	if (rc < 0)
		fprintf(stderr, "tenk bench: %s\n", err.text);
	if (lead && rc == 0 && v[O_JSON]) {
		json_t *o = json_pack("{s:s, s:i, s:s, s:o}", "collective", coll_names[which],
				      "ranks", n, "transport", coll_transport(c), "rows", rows);
		char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		puts(text);
		free(text);
		json_decref(o);
	} else {
		json_decref(rows);
	}
	if (lead && rc == 0 && !v[O_JSON])
		printf("# wrong elements in all: %lld\n", (long long)total_wrong);
	free(in);
	free(out);
	coll_destroy(c);
	return rc < 0 ? 1 : total_wrong ? 3 : 0;
}
