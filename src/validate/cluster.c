/*
 * tenk validate across nodes, through the server.
 *
 * `tenk validate --nodes SPEC` asks the server for a validation run; the
 * server starts a system job with one task per node, each running
 * `tenk validate --member`, and this command waits for it and prints each
 * node's verdict. A member:
 *   1. runs its node's checks (validate_local);
 *   2. meets the others (coll, at the job's MASTER_ADDR:MASTER_PORT);
 *   3. measures its clock against the first node's (NTP's four
 *      timestamps, the sample with the shortest round trip);
 *   4. shares its software stack, clock and figures with everyone;
 *   5. measures every link: all pairs at once in rounds (a round-robin
 *      tournament, so each node is in one pair per round), then the ring
 *      all-reduce over all nodes, then (where every node has GPUs and NCCL)
 *      NCCL's all-reduce over every GPU of every node;
 *   6. holds itself to its peers (validate__vpeer_judge) and posts its report, which
 *      the server acts on (drains the node when it fails).
 * Every node takes part in every collective step whatever its own checks
 * said, so no member waits for one that gave up.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"

#define MEMBER_TIMEOUT_MS 120000
#define CLOCK_SAMPLES 8
#define WAIT_LIMIT_S (4 * 3600)
#define VREASON_MAX 256 /* the server keeps this much of a reason */

/* ---- judging against peers (pure) ------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double validate__median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double validate__vpair_median(const double *row, int n, int me, double floor, bool upper)
{
	double *v = xcalloc((size_t)n + 1, sizeof(double));
	int k = 0;
	for (int i = 0; i < n; i++)
		if (i != me && row[i] > floor)
			v[k++] = row[i];
	double f = 0;
	if (k) {
		qsort(v, (size_t)k, sizeof(double), cmp_double);
		f = v[upper ? k / 2 : (k - 1) / 2];
	}
	free(v);
	return f;
}

double validate__vpair_figure(const double *row, int n, int me)
{
	return validate__vpair_median(row, n, me, 0, true);
}

double validate__vpair_latency(const double *row, int n, int me)
{
	return validate__vpair_median(row, n, me, 0, false);
}

/* Holds checks[i] to the median of the same check on the other nodes. */
static void peer_threshold(const struct vpeer *all, int n, int me, struct vcheck *c, double tol,
			   double mine_override)
{
	/* (a link's speed and a port's rate are what the device says, not a
	 * measure: held_alike holds them) */
	if (c->verdict == V_SKIP || !c->higher_is_better || strcmp(c->name, "net_speed") == 0 ||
	    strcmp(c->name, "rdma_rate") == 0)
		return;
	double *v = xcalloc((size_t)n + 1, sizeof(double));
	int k = 0;
	int shared = 0;
	for (int i = 0; i < n; i++) {
		if (i == me)
			continue;
		if (mine_override < 0 && all[me].machine[0] &&
		    strcmp(all[i].machine, all[me].machine) == 0) {
			shared++;
			continue;
		}
		if (mine_override >= 0) {
			if (all[i].pair_gbs > 0)
				v[k++] = all[i].pair_gbs;
			continue;
		}
		for (int j = 0; j < all[i].nchecks; j++)
			if (strcmp(all[i].checks[j].name, c->name) == 0 &&
			    all[i].checks[j].verdict != V_SKIP)
				v[k++] = all[i].checks[j].figure;
	}
	if (k >= 2) {
		double med = validate__median(v, k);
		char from[48];
		snprintf(from, sizeof(from), "%.0f%% of %d peers' median", (1 - tol) * 100, k);
		bool was_ok = c->verdict != V_FAIL;
		validate__vcheck_raise(c, (1 - tol) * med, from);
		/* below its peers: the detail says how far, in place of what it
		 * said where the peers alone fail it, after it where the node
		 * failed its own threshold too (the higher one is named in the
		 * reason, and which binds depends on how fast the peers were) */
		if (c->figure < (1 - tol) * med) {
			size_t l = was_ok ? 0 : strlen(c->detail);
			snprintf(c->detail + l, sizeof(c->detail) - l,
				 "%s%.1f%% below the median of %d peers (%.4g %s)", l ? "; " : "",
				 (1 - c->figure / med) * 100, k, med, c->unit);
		}
	} else if (shared && c->verdict != V_FAIL) {
		size_t l = strlen(c->detail);
		snprintf(c->detail + l, sizeof(c->detail) - l,
			 "%snot held to %d peer%s on this machine's processors", l ? "; " : "",
			 shared, shared == 1 ? "" : "s");
	}
	free(v);
}

/* c, a check every node makes, held to the nodes' figures: the most
 * common figure (a majority's) is the rule, and a node unlike it fails,
 * naming the figure (with no majority every node unlike its own fails);
 * with lower_only, only a figure under the rule (or, with no majority,
 * under the highest) fails. */
static void held_alike(const struct vpeer *all, int n, struct vcheck *c, bool lower_only,
		       const char *before, const char *after)
{
	bool qos = strncmp(c->name, "roce_", 5) == 0; /* bits of priorities, as words */
	if (c->verdict == V_SKIP)
		return;
	int total = 0, same = 0, best = 0;
	double best_v = c->figure, top = c->figure;
	for (int p = 0; p < n; p++)
		for (int j = 0; j < all[p].nchecks; j++) {
			const struct vpeer_check *x = &all[p].checks[j];
			if (strcmp(x->name, c->name) != 0 || x->verdict == V_SKIP)
				continue;
			total++;
			same += x->figure == c->figure;
			top = fmax(top, x->figure);
			int cnt = 0;
			for (int q = 0; q < n; q++)
				for (int k = 0; k < all[q].nchecks; k++)
					cnt += strcmp(all[q].checks[k].name, c->name) == 0 &&
					       all[q].checks[k].verdict != V_SKIP &&
					       all[q].checks[k].figure == x->figure;
			if (cnt > best || (cnt == best && x->figure == c->figure))
				best = cnt, best_v = x->figure;
		}
	if (total < 2 || same == total)
		return;
	bool majority = 2 * best > total;
	bool odd = lower_only ? c->figure < (majority ? best_v : top)
			      : best_v != c->figure || !majority;
	size_t l = strlen(c->detail);
	if (odd && qos) {
		c->verdict = V_FAIL;
		char theirs[64];
		validate__qos_text(c->name, majority ? best_v : top, theirs, sizeof(theirs));
		snprintf(c->detail + l, sizeof(c->detail) - l, "; %d of %d nodes have %s",
			 majority ? best : 1, total, theirs);
	} else if (odd) {
		c->verdict = V_FAIL;
		snprintf(c->detail + l, sizeof(c->detail) - l, ": %s%g%s; %d of %d nodes have %g%s",
			 before, c->figure, after, majority ? best : 1, total,
			 majority ? best_v : top, after);
	} else if (c->figure == best_v) {
		snprintf(c->detail + l, sizeof(c->detail) - l, " (as %d of %d nodes; %d differ)",
			 same, total, total - same);
	} else {
		snprintf(c->detail + l, sizeof(c->detail) - l, " (over the %g%s of %d of %d nodes)",
			 best_v, after, best, total);
	}
}

int validate__vpeer_judge(const struct vpeer *all, int n, int me, const struct vrun *o,
			  struct vcheck *checks, int nchecks, int max)
{
	const struct vpeer *my = &all[me];
	for (int i = 0; i < nchecks; i++)
		peer_threshold(all, n, me, &checks[i], o->tolerance, -1);
	/* the software stack: the same everywhere, or this node is the odd one */
	if (nchecks < max && o->want[VL_SYSTEM] && n > 1) {
		struct vcheck *c = &checks[nchecks++];
		validate__vcheck_set(c, "system", "stack_consistent", "peers", true);
		int same = 0, best = 0, best_at = me;
		for (int i = 0; i < n; i++) {
			if (i != me && strcmp(all[i].stack, my->stack) == 0)
				same++;
			int cnt = 0;
			for (int j = 0; j < n; j++)
				cnt += strcmp(all[i].stack, all[j].stack) == 0;
			if (cnt > best)
				best = cnt, best_at = i;
		}
		c->figure = same;
		c->threshold = n - 1;
		snprintf(c->threshold_from, sizeof(c->threshold_from), "every peer alike");
		snprintf(c->detail, sizeof(c->detail), "%s", my->stack);
		if (same < n - 1) {
			/* the odd one out fails; with no majority, everyone does */
			bool majority = same + 1 == best && 2 * best > n;
			if (!majority) {
				c->verdict = V_FAIL;
				snprintf(c->detail, sizeof(c->detail),
					 "%.140s; %d of %d peers have %.140s", my->stack, best,
					 n - 1, all[best_at].stack);
			} else {
				snprintf(c->detail, sizeof(c->detail),
					 "%.150s (as most nodes; %d differ)", my->stack,
					 n - 1 - same);
			}
		}
	}
	/* the MTU to the peers alike on every node; the links' speed and the
	 * RDMA ports' rate not under the peers'; RoCE's PFC and ECN alike
	 * (held_alike) */
	for (int i = 0; i < nchecks && n > 1; i++) {
		if (strcmp(checks[i].name, "net_mtu") == 0)
			held_alike(all, n, &checks[i], false, "MTU ", "");
		else if (strcmp(checks[i].name, "net_speed") == 0 ||
			 strcmp(checks[i].name, "rdma_rate") == 0)
			held_alike(all, n, &checks[i], true, "", " Gb/s");
		else if (strncmp(checks[i].name, "roce_", 5) == 0)
			held_alike(all, n, &checks[i], false, "", "");
	}
	if (nchecks < max && o->want[VL_SYSTEM] && n > 1) {
		struct vcheck *c = &checks[nchecks++];
		validate__vcheck_set(c, "system", "clock_offset", "ms", false);
		c->figure = fabs(my->clock_ms);
		validate__vcheck_judge(c, o->clock_max_ms, "largest offset allowed");
		snprintf(c->detail, sizeof(c->detail), "%+.3f ms from %s", my->clock_ms,
			 all[0].node);
	}
	if (nchecks < max && o->want[VL_INTERCONNECT] && n > 1) {
		struct vcheck *c = &checks[nchecks++];
		validate__vcheck_set(c, "interconnect", "pair_bandwidth", "GB/s", true);
		c->figure = my->pair_gbs;
		if (my->pair_gbs <= 0) {
			c->verdict = V_SKIP;
			snprintf(c->detail, sizeof(c->detail),
				 "skipped: the nodes share one host's "
				 "memory, no links between them");
		} else {
			validate__vcheck_judge(c, 0.01, "floor");
			snprintf(c->detail, sizeof(c->detail),
				 "the upper median of its links to %d "
				 "peers",
				 n - 1);
			peer_threshold(all, n, me, c, o->tolerance, my->pair_gbs);
		}
	}
	if (nchecks < max && o->want[VL_INTERCONNECT] && n > 1)
		nchecks += validate__pair_latency_judge(all, n, me, &checks[nchecks]);
	return nchecks;
}

int validate__pair_latency_judge(const struct vpeer *all, int n, int me, struct vcheck *c)
{
	const struct vpeer *my = &all[me];
	validate__vcheck_set(c, "interconnect", "pair_latency", "us", false);
	c->figure = my->pair_lat_us;
	if (my->pair_lat_us <= 0) {
		c->verdict = V_SKIP;
		snprintf(c->detail, sizeof(c->detail),
			 "skipped: the nodes share one host's memory, no links between them");
		return 1;
	}
	/* the peers' median; a node far over it (four times, and by a
	 * millisecond: a VM's jitter is not a slow link) fails */
	double *v = xcalloc((size_t)n + 1, sizeof(double));
	int k = 0;
	for (int i = 0; i < n; i++)
		if (i != me && all[i].pair_lat_us > 0)
			v[k++] = all[i].pair_lat_us;
	if (k < 2) {
		snprintf(c->detail, sizeof(c->detail),
			 "8 bytes each way, the lower median of its pairs (%d peer%s: none to hold "
			 "it to)",
			 n - 1, n == 2 ? "" : "s");
		free(v);
		return 1;
	}
	double med = validate__median(v, k);
	free(v);
	validate__vcheck_judge(c, MAX(4 * med, med + 1000), "4x the peers' median and 1 ms over");
	snprintf(c->detail, sizeof(c->detail),
		 "8 bytes each way, the lower median of its pairs; the peers' median %.0f us", med);
	return 1;
}

bool validate__vverdict_of(const struct vcheck *checks, int n, char *layer, size_t layer_n,
			   char *reason, size_t reason_n)
{
	for (int l = 0; l < VLAYERS; l++)
		for (int i = 0; i < n; i++) {
			const struct vcheck *c = &checks[i];
			if (c->verdict != V_FAIL || strcmp(c->layer, validate__layers[l]) != 0)
				continue;
			snprintf(layer, layer_n, "%s", c->layer);
			if (c->threshold_from[0])
				snprintf(reason, reason_n, "%s %.4g %s %s %.4g (%s)%s%.120s",
					 c->name, c->figure, c->unit,
					 c->higher_is_better ? "<" : ">", c->threshold,
					 c->threshold_from, c->detail[0] ? ": " : "", c->detail);
			else
				snprintf(reason, reason_n, "%s: %.200s", c->name, c->detail);
			return true;
		}
	return false;
}

/* ---- a member ------------------------------------------------------------------------- */

static int64_t real_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* This node's clock minus rank 0's, in ms: the four timestamps of NTP, in
 * turn with each rank, keeping the sample with the shortest round trip. */
static int clock_offset(struct coll_comm *c, double *ret_ms, struct tk_error *err)
{
	int me = coll_rank(c), n = coll_size(c);
	*ret_ms = 0;
	for (int peer = 1; peer < n; peer++) {
		if (me != 0 && me != peer)
			continue;
		double best_rtt = 1e18, best_off = 0;
		for (int s = 0; s < CLOCK_SAMPLES; s++) {
			int64_t t[4];
			int rc;
			if (me == peer) {
				t[0] = real_us();
				if ((rc = coll_sendrecv(c, 0, &t[0], 8, -1, NULL, 0, err)) < 0 ||
				    (rc = coll_sendrecv(c, -1, NULL, 0, 0, &t[1], 16, err)) < 0)
					return rc;
				t[3] = real_us();
				double rtt = (double)((t[3] - t[0]) - (t[2] - t[1]));
				double off = ((double)(t[1] - t[0]) + (double)(t[2] - t[3])) / 2;
				if (rtt < best_rtt)
					best_rtt = rtt, best_off = off;
			} else {
				int64_t t0, tt[2];
				if ((rc = coll_sendrecv(c, -1, NULL, 0, peer, &t0, 8, err)) < 0)
					return rc;
				tt[0] = real_us();
				tt[1] = real_us();
				if ((rc = coll_sendrecv(c, peer, tt, 16, -1, NULL, 0, err)) < 0)
					return rc;
			}
		}
		if (me == peer)
			*ret_ms = -best_off / 1000; /* rank 0's clock minus ours, negated */
	}
	return 0;
}

int validate__partner(int round, int p, int m)
{
	if (p == m - 1)
		return round;
	if (p == round)
		return m - 1;
	return ((2 * round - p) % (m - 1) + (m - 1)) % (m - 1);
}

/* Every pair's bandwidth, GB/s each way while both send: row[j] for this
 * rank's link to j. */
#define LAT_ITERS 31 /* small exchanges per pair; the median is the figure */

static int measure_pairs(struct coll_comm *c, size_t bytes, int iters, double *row, double *retrans,
			 double *resent, double *lat, struct tk_error *err)
{
	int me = coll_rank(c), n = coll_size(c), m = n % 2 ? n + 1 : n;
	uint8_t *s = xmalloc(bytes), *r = xmalloc(bytes);
	for (size_t i = 0; i < bytes; i++)
		s[i] = (uint8_t)(i * 7 + (size_t)me);
	int rc = 0;
	for (int round = 0; round < m - 1 && rc >= 0; round++) {
		int q = validate__partner(round, me, m);
		if ((rc = coll_barrier(c, err)) < 0)
			break;
		if (q >= n)
			continue;
		/* one exchange to warm the connections, then the timed ones */
		if ((rc = coll_sendrecv(c, q, s, bytes, q, r, bytes, err)) < 0)
			break;
		int64_t t0 = tk_mono_us(), segs0, re0, segs1, re1;
		bool tcp = coll_peer_tcp(c, q, &segs0, &re0) == 0;
		for (int k = 0; k < iters && rc >= 0; k++)
			rc = coll_sendrecv(c, q, s, bytes, q, r, bytes, err);
		double secs = (double)(tk_mono_us() - t0) / 1e6;
		/* the segments it sent to q again, of those it sent (too few to
		 * judge: not measured) */
		tcp = tcp && coll_peer_tcp(c, q, &segs1, &re1) == 0 && segs1 - segs0 >= 100;
		retrans[q] = tcp ? 100.0 * (double)(re1 - re0) / (double)(segs1 - segs0) : -1;
		resent[q] = tcp ? (double)(re1 - re0) : -1;
		if (rc >= 0 && r[bytes - 1] != (uint8_t)((bytes - 1) * 7 + (size_t)q))
			rc = tk_errorf(err, -EIO, "the data from rank %d arrived wrong", q);
		row[q] = secs > 0 ? (double)bytes * iters / secs / 1e9 : 0;
		/* the latency: 8 bytes each way at once, timed one by one */
		double us[LAT_ITERS];
		for (int k = 0; k < LAT_ITERS && rc >= 0; k++) {
			int64_t l0 = tk_mono_us();
			rc = coll_sendrecv(c, q, s, 8, q, r, 8, err);
			us[k] = (double)(tk_mono_us() - l0);
		}
		if (rc >= 0) {
			qsort(us, LAT_ITERS, sizeof(double), cmp_double);
			lat[q] = MAX(us[LAT_ITERS / 2], 1.0);
		}
	}
	free(s);
	free(r);
	return rc;
}

/* The ring all-reduce over every node: bus bandwidth, GB/s. */
static int measure_ring(struct coll_comm *c, size_t bytes, int iters, double *ret,
			struct tk_error *err)
{
	size_t count = bytes / 4;
	float *buf = xcalloc(count, sizeof(float));
	int n = coll_size(c), rc = coll_allreduce(c, buf, buf, count, COLL_F32, COLL_SUM, err);
	int64_t t0 = tk_mono_us();
	for (int k = 0; k < iters && rc >= 0; k++)
		rc = coll_allreduce(c, buf, buf, count, COLL_F32, COLL_SUM, err);
	double secs = (double)(tk_mono_us() - t0) / 1e6;
	*ret = rc >= 0 && secs > 0 ? (double)bytes * iters / secs / 1e9 * 2 * (n - 1) / n : 0;
	free(buf);
	return rc;
}

static const char *env_or(const char *name, const char *def)
{
	const char *v = getenv(name);
	return v && *v ? v : def;
}

static void read_boot_id(char *buf, size_t n)
{
	buf[0] = 0;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (!f)
		return;
	if (!fgets(buf, (int)n, f))
		buf[0] = 0;
	buf[strcspn(buf, "\n")] = 0;
	fclose(f);
}

static int post_report(const char *node, const struct vcheck *checks, int n, bool failed,
		       const char *layer, const char *reason, bool peer_error, json_t *reference)
{
	const char *url = getenv("TENK_SERVER"), *tok = getenv("TENK_VALIDATE_TOKEN");
	const char *job = getenv("TENK_JOB_ID");
	if (!url || !tok || !job) {
		fprintf(stderr,
			"tenk validate --member: TENK_SERVER, TENK_VALIDATE_TOKEN and "
			"TENK_JOB_ID must be set (the server's validation job sets them)\n");
		return -EINVAL;
	}
	json_t *arr = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, validate__vcheck_pack(&checks[i]));
	json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "token", tok, "node", node,
				 "verdict", failed ? "fail" : "pass", "layer", layer, "reason",
				 reason, "checks", arr);
	if (peer_error)
		json_object_set_new(body, "peer_error", json_true());
	if (reference)
		json_object_set(body, "reference", reference);
	struct client cl;
	struct tk_error err;
	char path[96];
	snprintf(path, sizeof(path), "/v1/validations/%s/report", job);
	int rc = client_init(&cl, url, tok, NULL, &err);
	/* the server may be restarting: a few tries, a second apart */
	for (int attempt = 0; rc >= 0 && attempt < 30; attempt++) {
		json_t *ans = NULL;
		long status = 0;
		rc = client_call(&cl, "POST", path, body, 30000, &ans, &status, &err);
		json_decref(ans);
		if (rc >= 0 || status != 0)
			break;
		sleep(1);
	}
	if (rc < 0)
		fprintf(stderr, "tenk validate --member: reporting to the server: %s\n", err.text);
	client_release(&cl);
	json_decref(body);
	return rc;
}

int validate_member(const struct vrun *o)
{
	const char *rank_s = getenv("RANK"), *size_s = getenv("WORLD_SIZE");
	int64_t rank, size, port;
	if (!rank_s || !size_s || tk_parse_int64(rank_s, 0, 1 << 20, &rank) < 0 ||
	    tk_parse_int64(size_s, 1, 1 << 20, &size) < 0 || rank >= size ||
	    tk_parse_int64(env_or("MASTER_PORT", ""), 1, 65535, &port) < 0) {
		fprintf(stderr, "tenk validate --member: runs inside a validation job "
				"(RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT unset or wrong)\n");
		return 2;
	}
	char node[64];
	snprintf(node, sizeof(node), "%s", env_or("TENK_NODE_NAME", "?"));
	/* 1. this node */
	struct vcheck checks[VMAX_CHECKS];
	json_t *reference = NULL;
	struct vrun mo = *o;
	mo.reference_out = &reference;
	int n = validate_local(&mo, checks, VMAX_CHECKS - 4);
	/* the reference is a rollout's evidence, judged there against the old
	 * stack: a command that failed is said in its record, not held
	 * against the node */
	for (int i = 0; i < n; i++)
		if (strcmp(checks[i].name, "reference") == 0 && checks[i].verdict == V_FAIL)
			checks[i].verdict = V_SKIP;
	/* 2. the others */
	struct vpeer *all = xcalloc((size_t)size, sizeof(*all));
	struct vpeer me;
	memset(&me, 0, sizeof(me));
	snprintf(me.node, sizeof(me.node), "%s", node);
	read_boot_id(me.machine, sizeof(me.machine));
	struct gpu_stack st;
	validate__gpu_stack_probe(&st);
	/* in an image, its digest is part of the stack: a node whose image
	 * differs from its peers' is the odd one out */
	const char *img = getenv("TENK_IMAGE_DIGEST");
	snprintf(me.stack, sizeof(me.stack), "driver %s, CUDA %s, NCCL %s, tenk %s%s%.19s",
		 st.driver, st.cuda, st.nccl, TENK_VERSION, img && *img ? ", image " : "",
		 img && *img ? img : "");
	/* where its peers reach it, and its rails (the RDMA pairs') */
	char ifname[64] = "", ifaddr[64] = "";
	validate__peer_route(ifname, sizeof(ifname), ifaddr, sizeof(ifaddr));
	snprintf(me.addr, sizeof(me.addr), "%s", ifaddr);
	struct node_inventory *inv = xcalloc(1, sizeof(*inv));
	if (o->want[VL_INTERCONNECT]) {
		validate__fabric(inv);
		validate__rdma_rails(&me, inv);
	}
	for (int i = 0; i < n && i < VPEER_CHECKS; i++) {
		snprintf(me.checks[i].name, sizeof(me.checks[i].name), "%s", checks[i].name);
		me.checks[i].figure = checks[i].figure;
		me.checks[i].verdict = checks[i].verdict;
		me.nchecks = i + 1;
	}
	char root[160], fail_why[VREASON_MAX] = "";
	snprintf(root, sizeof(root), "%s:%lld", env_or("MASTER_ADDR", "127.0.0.1"),
		 (long long)port);
	struct coll_opts co = {.timeout_ms = MEMBER_TIMEOUT_MS};
	struct coll_comm *c = NULL;
	struct tk_error err;
	double ring = 0;
	struct vcheck across, transport;
	memset(&across, 0, sizeof(across));
	memset(&transport, 0, sizeof(transport));
	int rc = coll_init(&c, (int)rank, (int)size, root, &co, &err);
	bool tcp = rc >= 0 && strcmp(coll_transport(c), "tcp") == 0;
	/* 3. the clock */
	if (rc >= 0 && tcp)
		rc = clock_offset(c, &me.clock_ms, &err);
	/* 4. figures for everyone; 5. the links */
	double *rows = xcalloc((size_t)(size * size), sizeof(double));
	double *lats = xcalloc((size_t)(size * size), sizeof(double));
	if (rc >= 0)
		rc = coll_allgather(c, &me, all, sizeof(me), &err);
	/* the counters of the network around the links' traffic */
	struct vnet_counters net0, net1 = {0};
	validate__net_counters(ifname, &net0);
	double *rbw = xcalloc((size_t)(size * size), sizeof(double));
	double *rlat = xcalloc((size_t)(size * size), sizeof(double));
	for (int64_t i = 0; i < size * size; i++)
		rbw[i] = rlat[i] = -1; /* not measured */
	struct rdma_note rnote;
	memset(&rnote, 0, sizeof(rnote));
	double *retrans = xcalloc((size_t)size + 1, sizeof(double));
	double *resent = xcalloc((size_t)size + 1, sizeof(double));
	for (int i = 0; i < size; i++)
		retrans[i] = resent[i] = -1;
	if (rc >= 0 && o->want[VL_INTERCONNECT] && size > 1) {
		if (tcp)
			rc = measure_pairs(c, o->quick ? (4u << 20) : (32u << 20), o->quick ? 3 : 5,
					   rows + rank * size, retrans, resent, lats + rank * size,
					   &err);
		/* the pairs over RDMA, where two nodes or more have it */
		if (rc >= 0 && tcp)
			rc = validate__rdma_pairs(c, all, o->quick, o->rdma_peers,
						  rbw + rank * size, rlat + rank * size, &rnote,
						  &err);
		/* every node's rows of pairs, to everyone */
		double *const rows_of[] = {rows, lats, rbw, rlat};
		for (size_t k = 0; k < sizeof(rows_of) / sizeof(rows_of[0]) && rc >= 0; k++)
			rc = coll_allgather(c, rows_of[k] + rank * size, rows_of[k],
					    sizeof(double) * (size_t)size, &err);
		if (rc >= 0)
			rc = measure_ring(c, o->quick ? (4u << 20) : (64u << 20), o->quick ? 3 : 5,
					  &ring, &err);
		validate__net_counters(ifname, &net1);
		/* the GPUs' own fabric, where every node has GPUs and NCCL */
		if (rc >= 0)
			rc = validate__check_nccl_across(&across, c, o->quick, &err);
		/* and which transports it chose, by NCCL's own log */
		if (rc >= 0)
			validate__check_nccl_transport(&transport, inv, across.verdict != V_SKIP);
	}
	if (rc < 0) {
		snprintf(fail_why, sizeof(fail_why), "%.*s", VREASON_MAX - 1, err.text);
	} else {
		for (int i = 0; i < size; i++) {
			all[i].pair_gbs =
				tcp ? validate__vpair_figure(rows + i * size, (int)size, i) : 0;
			all[i].pair_lat_us =
				tcp ? validate__vpair_latency(lats + i * size, (int)size, i) : 0;
			/* over RDMA: the pairs tried (a failed one counts 0) */
			const double *rb = rbw + i * size;
			all[i].rdma_pairs = 0;
			for (int j = 0; j < size; j++)
				all[i].rdma_pairs += j != i && rb[j] >= 0;
			all[i].rdma_gbits =
				all[i].rdma_pairs
					? validate__vpair_median(rb, (int)size, i, -0.5, true)
					: 0;
			all[i].rdma_lat_us =
				validate__vpair_median(rlat + i * size, (int)size, i, 0, false);
		}
		/* the clock of each came to everyone before it was measured: use ours */
		all[rank].clock_ms = me.clock_ms;
		n = validate__vpeer_judge(all, (int)size, (int)rank, o, checks, n, VMAX_CHECKS - 1);
		if (o->want[VL_INTERCONNECT] && size > 1 && n < VMAX_CHECKS) {
			struct vcheck *k = &checks[n++];
			validate__vcheck_set(k, "interconnect", "allreduce_ring", "GB/s", true);
			k->figure = ring;
			/* the ring is as fast as its slowest link: far slower means
			 * something none of the pairs showed (routing, a switch) */
			double slowest = 0;
			for (int i = 0; i < size; i++)
				if (all[i].pair_gbs > 0 &&
				    (slowest == 0 || all[i].pair_gbs < slowest))
					slowest = all[i].pair_gbs;
			if (slowest > 0)
				validate__vcheck_judge(k, 0.25 * slowest,
						       "25% of the slowest node's links");
			snprintf(k->detail, sizeof(k->detail), "%lld nodes over %s",
				 (long long)size, coll_transport(c));
		}
		if (o->want[VL_INTERCONNECT] && size > 1 && n < VMAX_CHECKS)
			checks[n++] = across;
		if (o->want[VL_INTERCONNECT] && size > 1 && n < VMAX_CHECKS)
			checks[n++] = transport;
		if (o->want[VL_INTERCONNECT] && size > 1 && n + 2 <= VMAX_CHECKS)
			n += validate__rdma_judge(all, (int)size, (int)rank, o, &rnote, &checks[n]);
		if (o->want[VL_INTERCONNECT] && size > 1 && tcp && n + 2 <= VMAX_CHECKS) {
			const char **names = xcalloc((size_t)size + 1, sizeof(char *));
			for (int i = 0; i < size; i++)
				names[i] = all[i].node;
			validate__check_tcp_retransmits(&checks[n++], retrans, resent, names,
							(int)size, (int)rank);
			free(names);
			validate__check_net_errors(&checks[n++], ifname, &net0, &net1);
		}
	}
	coll_destroy(c);
	/* 6. the verdict */
	char layer[16] = "", reason[VREASON_MAX] = "";
	bool failed =
		validate__vverdict_of(checks, n, layer, sizeof(layer), reason, sizeof(reason));
	/* the steps with the others broke: this node, or another, is the cause;
	 * the server decides when the run ends */
	bool peer_error = !failed && fail_why[0];
	if (peer_error) {
		failed = true;
		snprintf(layer, sizeof(layer), "interconnect");
		snprintf(reason, sizeof(reason), "cannot work with the other nodes: %.200s",
			 fail_why);
	}
	printf("node %s (%lld of %lld)\n", node, (long long)rank + 1, (long long)size);
	validate__vchecks_print(checks, n);
	printf("verdict: %s%s%s\n", failed ? "FAIL: " : "pass", layer, failed ? "" : "");
	if (failed)
		printf("reason: %s\n", reason);
	fflush(stdout);
	rc = post_report(node, checks, n, failed, layer, reason, peer_error, reference);
	json_decref(reference);
	free(retrans);
	free(resent);
	free(rows);
	free(lats);
	free(rbw);
	free(rlat);
	free(inv);
	free(all);
	return rc < 0 ? 1 : 0;
}

/* ---- the command ---------------------------------------------------------------------- */

/* Expands "node[1-3,7],gpu[01-02],x" into names; "all" stays "all". */
static int expand_spec(const char *spec, json_t *out, struct tk_error *err)
{
	const char *p = spec;
	while (*p) {
		const char *end = p;
		int depth = 0;
		while (*end && (depth || *end != ',')) {
			depth += *end == '[' ? 1 : *end == ']' ? -1 : 0;
			end++;
		}
		char item[256];
		if ((size_t)(end - p) >= sizeof(item) || end == p)
			return tk_errorf(err, -EINVAL,
					 "--nodes: \"%.*s\" is not a node name or range",
					 (int)MIN(end - p, 64), p);
		memcpy(item, p, (size_t)(end - p));
		item[end - p] = '\0';
		char orig[256];
		memcpy(orig, item, sizeof(orig));
		char *lb = strchr(item, '['), *rb = lb ? strchr(lb, ']') : NULL;
		if (!lb) {
			json_array_append_new(out, json_string(item));
		} else {
			if (!rb || rb[1])
				return tk_errorf(err, -EINVAL,
						 "--nodes: \"%s\": a range is prefix[a-b,c] "
						 "at the end of a name",
						 item);
			*lb = '\0';
			*rb = '\0';
			char *save = NULL;
			for (char *r = strtok_r(lb + 1, ",", &save); r;
			     r = strtok_r(NULL, ",", &save)) {
				char range[64];
				snprintf(range, sizeof(range), "%s", r);
				char *dash = strchr(r, '-');
				int64_t a, b;
				if (dash)
					*dash = '\0';
				if (tk_parse_int64(r, 0, 999999999, &a) < 0 ||
				    tk_parse_int64(dash ? dash + 1 : r, 0, 999999999, &b) < 0 ||
				    b < a || b - a >= 4096)
					return tk_errorf(err, -EINVAL,
							 "--nodes: \"%s\" in \"%s\" is not a "
							 "number or a range a-b with a <= b",
							 range, orig);
				int width = (int)strlen(r);
				for (int64_t k = a; k <= b; k++) {
					char name[300];
					snprintf(name, sizeof(name), "%s%0*lld", item,
						 r[0] == '0' ? width : 1, (long long)k);
					json_array_append_new(out, json_string(name));
					if (json_array_size(out) > 4096)
						return tk_errorf(err, -EINVAL,
								 "--nodes: more than 4096 nodes");
				}
			}
		}
		p = *end ? end + 1 : end;
	}
	if (json_array_size(out) == 0)
		return tk_errorf(err, -EINVAL, "--nodes: no node named");
	return 0;
}

json_t *validate__vargs_without(int argc, char **argv, const char *const *own,
				const bool *takes_value, size_t nown)
{
	json_t *args = json_array();
	for (int i = 1; i < argc; i++) {
		bool skip = false;
		for (size_t k = 0; k < nown && !skip; k++) {
			size_t l = strlen(own[k]);
			if (strncmp(argv[i], own[k], l) != 0 ||
			    (argv[i][l] != '\0' && argv[i][l] != '='))
				continue;
			skip = true;
			if (takes_value[k] && argv[i][l] == '\0')
				i++; /* its value */
		}
		if (!skip && i < argc)
			json_array_append_new(args, json_string(argv[i]));
	}
	return args;
}

/* The options of ours that go to each member: all but the command's own. */
static json_t *member_args(int argc, char **argv)
{
	static const char *const own[] = {"--nodes", "--json", "--no-wait", "--image"};
	static const bool value[] = {true, false, false, true};
	return validate__vargs_without(argc, argv, own, value, ARRAY_SIZE(own));
}

int validate_cluster(const char *spec, const char *image, int argc, char **argv, bool json,
		     bool no_wait)
{
	struct tk_error err;
	json_t *nodes = strcmp(spec, "all") == 0 ? json_string("all") : json_array();
	if (json_is_array(nodes) && expand_spec(spec, nodes, &err) < 0) {
		fprintf(stderr, "tenk validate: %s\n", err.text);
		json_decref(nodes);
		return 2;
	}
	struct client cl;
	if (client_init(&cl, NULL, NULL, NULL, &err) < 0) {
		fprintf(stderr, "tenk validate: %s\n", err.text);
		json_decref(nodes);
		return 1;
	}
	json_t *body = json_pack("{s:o, s:o}", "nodes", nodes, "args", member_args(argc, argv));
	if (image)
		json_object_set_new(body, "image", json_string(image));
	json_t *ans = NULL, *list = NULL;
	long status;
	int rc = client_call(&cl, "POST", "/v1/validations", body, 30000, &ans, &status, &err);
	json_decref(body);
	if (rc < 0) {
		fprintf(stderr, "tenk validate: %s\n", err.text);
		client_release(&cl);
		return 1;
	}
	json_int_t job = json_integer_value(json_object_get(ans, "job"));
	size_t nn = json_array_size(json_object_get(ans, "nodes"));
	if (no_wait) {
		if (json)
			json_dumpf(ans, stdout, JSON_INDENT(2)), putchar('\n');
		else
			printf("validation job %lld on %zu node%s\n", (long long)job, nn,
			       nn == 1 ? "" : "s");
		json_decref(ans);
		client_release(&cl);
		return 0;
	}
	if (!json)
		fprintf(stderr,
			"validation job %lld on %zu node%s: waiting for it (tenk show %lld)\n",
			(long long)job, nn, nn == 1 ? "" : "s", (long long)job);
	char path[96];
	json_t *j = NULL;
	int64_t deadline = tk_mono_ms() + WAIT_LIMIT_S * 1000LL;
	const char *state = "";
	while (tk_mono_ms() < deadline) {
		snprintf(path, sizeof(path), "/v1/jobs/%lld?wait=30", (long long)job);
		json_decref(j);
		j = NULL;
		if (client_call(&cl, "GET", path, NULL, 40000, &j, &status, &err) < 0) {
			if (status)
				break;
			sleep(1); /* the server restarts: try again */
			continue;
		}
		state = json_string_value(json_object_get(j, "state"));
		if (state && strcmp(state, "PENDING") != 0 && strcmp(state, "STARTING") != 0 &&
		    strcmp(state, "RUNNING") != 0)
			break;
		if (!json && isatty(2))
			fprintf(stderr, "\r%-10s %.100s", state ? state : "?",
				json_string_value(json_object_get(j, "reason")));
	}
	if (!json && isatty(2))
		fprintf(stderr, "\n");
	const char *why = json_string_value(json_object_get(j, "reason"));
	if (!why)
		why = "";
	rc = client_call(&cl, "GET", "/v1/nodes?checks=1", NULL, 30000, &list, &status, &err);
	int exit_code = 0;
	json_t *out = json_array();
	if (rc < 0) {
		fprintf(stderr, "tenk validate: %s\n", err.text);
		exit_code = 1;
	}
	size_t i;
	json_t *nd;
	json_array_foreach (json_object_get(list, "nodes"), i, nd) {
		json_t *v = json_object_get(nd, "validation");
		if (json_integer_value(json_object_get(v, "job")) != job)
			continue;
		const char *verdict = json_string_value(json_object_get(v, "verdict"));
		if (!verdict || strcmp(verdict, "pass") != 0)
			exit_code = 1;
		json_array_append_new(
			out, json_pack("{s:O, s:O, s:O}", "node", json_object_get(nd, "name"),
				       "state", json_object_get(nd, "state"), "validation", v));
	}
	if (json_array_size(out) < nn)
		exit_code = 1; /* cancelled, or still running at the limit */
	if (json) {
		json_t *o = json_pack("{s:I, s:s, s:s, s:O}", "job", job, "state",
				      state ? state : "", "reason", why, "nodes", out);
		char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		puts(text);
		free(text);
		json_decref(o);
	} else {
		printf("validation job %lld: %s (%s)\n", (long long)job, state ? state : "?", why);
		printf("%-20s %-8s %-10s %-13s %s\n", "NODE", "VERDICT", "STATE", "LAYER",
		       "REASON");
		json_array_foreach (out, i, nd) {
			json_t *v = json_object_get(nd, "validation");
			printf("%-20s %-8s %-10s %-13s %s\n",
			       json_string_value(json_object_get(nd, "node")),
			       json_string_value(json_object_get(v, "verdict")),
			       json_string_value(json_object_get(nd, "state")),
			       json_string_value(json_object_get(v, "layer"))[0]
				       ? json_string_value(json_object_get(v, "layer"))
				       : "-",
			       json_string_value(json_object_get(v, "reason")));
		}
		if (json_array_size(out) < nn)
			printf("%zu of %zu nodes have no verdict from this job\n",
			       nn - json_array_size(out), nn);
	}
	json_decref(out);
	json_decref(list);
	json_decref(j);
	json_decref(ans);
	client_release(&cl);
	return exit_code;
}
