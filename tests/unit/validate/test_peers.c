/*
 * Holding a node to its peers: the pair figure (upper median), thresholds
 * from the others' median, the software stack's consistency, the clock, and
 * the verdict naming the first failing layer.
 */
#include <arpa/inet.h>
#include <limits.h>
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

#include "validate/internal.h"

static struct vrun opts(void)
{
	struct vrun o = {.want = {true, true, true, true, true, true},
			 .tolerance = 0.05,
			 .clock_max_ms = 50};
	return o;
}

static void peer(struct vpeer *p, const char *node, const char *stack, double gemm, double pair)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->node, sizeof(p->node), "%s", node);
	snprintf(p->stack, sizeof(p->stack), "%s", stack);
	snprintf(p->checks[0].name, sizeof(p->checks[0].name), "cpu_sgemm");
	p->checks[0].figure = gemm;
	p->checks[0].verdict = V_PASS;
	p->nchecks = 1;
	p->pair_gbs = pair;
}

static int mine(struct vcheck *c, double gemm)
{
	validate__vcheck_set(&c[0], "compute", "cpu_sgemm", "GFLOP/s", true);
	c[0].figure = gemm;
	validate__vcheck_judge(&c[0], 0.2, "floor");
	return 1;
}

static const struct vcheck *find(const struct vcheck *c, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(c[i].name, name) == 0)
			return &c[i];
	fail_msg("no check %s", name);
	abort(); /* fail_msg does not return; said so for the optimiser */
}

static void test_pair_figure(void **state)
{
	/* three nodes, C's link slow: A and B keep their fast pair, C has none */
	double a[] = {0, 1.0, 0.02}, c[] = {0.02, 0.021, 0};
	assert_true(validate__vpair_figure(a, 3, 0) == 1.0);
	assert_true(validate__vpair_figure(c, 3, 2) == 0.021);
	double five[] = {0.9, 0.1, 0, 0.95, 1.0}; /* one bad link of four */
	assert_true(validate__vpair_figure(five, 5, 2) == 0.95);
	double none[] = {0, 0};
	assert_true(validate__vpair_figure(none, 2, 0) == 0);
}

static void test_slow_node_fails_against_peers(void **state)
{
	struct vpeer all[4];
	const char *st = "driver none, CUDA none, NCCL none, tenk 0.1.0";
	peer(&all[0], "a", st, 100, 1.0);
	peer(&all[1], "b", st, 101, 1.0);
	peer(&all[2], "c", st, 99, 0.98);
	peer(&all[3], "d", st, 80, 0.2); /* 20% slower compute, a slow link */
	struct vrun o = opts();
	struct vcheck c[8];
	int n = validate__vpeer_judge(all, 4, 3, &o, c, mine(c, 80), 8);
	const struct vcheck *g = find(c, n, "cpu_sgemm");
	assert_int_equal(g->verdict, V_FAIL);
	assert_true(fabs(g->threshold - 0.95 * 100) < 1e-9);
	assert_non_null(strstr(g->threshold_from, "3 peers' median"));
	assert_int_equal(find(c, n, "pair_bandwidth")->verdict, V_FAIL);
	assert_int_equal(find(c, n, "stack_consistent")->verdict, V_PASS);
	char layer[16], reason[256];
	assert_true(validate__vverdict_of(c, n, layer, sizeof(layer), reason, sizeof(reason)));
	assert_string_equal(layer, "compute"); /* the lowest failing layer names it */
	assert_non_null(strstr(reason, "cpu_sgemm 80"));
	/* a node 4% under the median passes at 5%, fails at 3% */
	n = validate__vpeer_judge(all, 4, 2, &o, c, mine(c, 96), 8);
	assert_int_equal(find(c, n, "cpu_sgemm")->verdict, V_PASS);
	assert_false(validate__vverdict_of(c, n, layer, sizeof(layer), reason, sizeof(reason)));
	o.tolerance = 0.03;
	n = validate__vpeer_judge(all, 4, 2, &o, c, mine(c, 96), 8);
	assert_int_equal(find(c, n, "cpu_sgemm")->verdict, V_FAIL);
}

static void test_floor_binds_when_peers_are_slow(void **state)
{
	/* the node's link at 0.005 GB/s, under the floor (0.01) whatever its
	 * peers measured; the threshold named is the higher of the floor and
	 * 20% of the peers' median, and the detail says how far below its
	 * peers the node is whenever it is under that 20%, whichever binds */
	static const struct {
		double peers;
		const char *from, *below;
	} cases[] = {
		/* a busy machine: 20% of 0.03 is under the floor, which binds */
		{0.03, "floor", "83.3% below the median of 2 peers (0.03 GB/s)"},
		/* fast peers: their median binds */
		{1.0, "20% of 2 peers' median", "99.5% below the median of 2 peers (1 GB/s)"},
		/* near its peers: the floor alone fails it */
		{0.006, "floor", NULL},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct vpeer all[3];
		peer(&all[0], "a", "s", 100, cases[i].peers);
		peer(&all[1], "b", "s", 100, cases[i].peers);
		peer(&all[2], "c", "s", 100, 0.005);
		struct vrun o = opts();
		o.tolerance = 0.8;
		struct vcheck c[8];
		int n = validate__vpeer_judge(all, 3, 2, &o, c, mine(c, 100), 8);
		const struct vcheck *p = find(c, n, "pair_bandwidth");
		assert_int_equal(p->verdict, V_FAIL);
		assert_true(fabs(p->threshold - MAX(0.01, 0.2 * cases[i].peers)) < 1e-12);
		assert_string_equal(p->threshold_from, cases[i].from);
		assert_non_null(strstr(p->detail, "the upper median of its links to 2 peers"));
		if (cases[i].below)
			assert_non_null(strstr(p->detail, cases[i].below));
		else
			assert_null(strstr(p->detail, "below the median"));
	}
}

static void test_two_nodes_have_no_peer_median(void **state)
{
	struct vpeer all[2];
	peer(&all[0], "a", "s", 100, 1.0);
	peer(&all[1], "b", "s", 10, 0.1);
	struct vrun o = opts();
	struct vcheck c[8];
	int n = validate__vpeer_judge(all, 2, 1, &o, c, mine(c, 10), 8);
	/* one peer is no majority: only the floors hold */
	assert_int_equal(find(c, n, "cpu_sgemm")->verdict, V_PASS);
	assert_int_equal(find(c, n, "pair_bandwidth")->verdict, V_PASS);
}

static void test_stack_and_clock(void **state)
{
	struct vpeer all[3];
	peer(&all[0], "a", "driver 550, CUDA 12.4, NCCL 2.21.5, tenk 0.1.0", 100, 1);
	peer(&all[1], "b", "driver 550, CUDA 12.4, NCCL 2.21.5, tenk 0.1.0", 100, 1);
	peer(&all[2], "c", "driver 535, CUDA 12.2, NCCL 2.21.5, tenk 0.1.0", 100, 1);
	all[2].clock_ms = -250;
	struct vrun o = opts();
	struct vcheck c[8];
	int n = validate__vpeer_judge(all, 3, 2, &o, c, mine(c, 100), 8);
	const struct vcheck *s = find(c, n, "stack_consistent");
	assert_int_equal(s->verdict, V_FAIL);
	assert_non_null(strstr(s->detail, "2 of 2 peers have driver 550"));
	const struct vcheck *k = find(c, n, "clock_offset");
	assert_int_equal(k->verdict, V_FAIL);
	assert_true(k->figure == 250);
	char layer[16], reason[256];
	assert_true(validate__vverdict_of(c, n, layer, sizeof(layer), reason, sizeof(reason)));
	assert_string_equal(layer, "system");
	/* the majority passes */
	n = validate__vpeer_judge(all, 3, 0, &o, c, mine(c, 100), 8);
	assert_int_equal(find(c, n, "stack_consistent")->verdict, V_PASS);
	assert_int_equal(find(c, n, "clock_offset")->verdict, V_PASS);
	/* no majority: both of two differing nodes fail */
	struct vpeer two[2];
	peer(&two[0], "a", "x", 1, 1);
	peer(&two[1], "b", "y", 1, 1);
	n = validate__vpeer_judge(two, 2, 0, &o, c, mine(c, 1), 8);
	assert_int_equal(find(c, n, "stack_consistent")->verdict, V_FAIL);
	/* a layer left out adds no check of it */
	o.want[VL_SYSTEM] = false;
	o.want[VL_INTERCONNECT] = false;
	n = validate__vpeer_judge(all, 3, 2, &o, c, mine(c, 100), 8);
	assert_int_equal(n, 1);
}

/* Node `me` of n with MTUs mtu[0..n): its net_mtu check after the judge. */
static struct vcheck mtu_of(int n, const double *mtu, int me)
{
	struct vpeer all[4];
	struct vcheck c[8];
	for (int i = 0; i < n; i++) {
		peer(&all[i], i ? "b" : "a", "s", 100, 1);
		all[i].checks[1] = (struct vpeer_check){.name = "net_mtu", .figure = mtu[i]};
		all[i].nchecks = 2;
	}
	int k = mine(c, 100);
	validate__vcheck_set(&c[k], "network", "net_mtu", "bytes", false);
	c[k].figure = mtu[me];
	snprintf(c[k].detail, sizeof(c[k].detail), "eth0 (10.0.0.%d)", me + 1);
	struct vrun o = opts();
	int nc = validate__vpeer_judge(all, n, me, &o, c, k + 1, 8);
	return *find(c, nc, "net_mtu");
}

/* The MTU to the peers is alike everywhere: the odd one out fails naming its
 * interface, the others say they are as most; with no majority every node
 * fails. */
static void test_mtu_held_to_the_peers(void **state)
{
	const double three[] = {9000, 9000, 1500}, two[] = {9000, 1500}, same[] = {9000, 9000};
	struct vcheck odd = mtu_of(3, three, 2), ok = mtu_of(3, three, 0);
	assert_int_equal(odd.verdict, V_FAIL);
	assert_string_equal(odd.detail, "eth0 (10.0.0.3): MTU 1500; 2 of 3 nodes have 9000");
	assert_int_equal(ok.verdict, V_PASS);
	assert_string_equal(ok.detail, "eth0 (10.0.0.1) (as 2 of 3 nodes; 1 differ)");
	assert_int_equal(mtu_of(2, two, 0).verdict, V_FAIL);
	assert_int_equal(mtu_of(2, two, 1).verdict, V_FAIL);
	ok = mtu_of(2, same, 1);
	assert_int_equal(ok.verdict, V_PASS);
	assert_string_equal(ok.detail, "eth0 (10.0.0.2)");
}

/* RoCE's PFC and ECN: alike on the node's RoCE interfaces, then held alike
 * to the peers', named in words. */
static void test_roce_pfc_and_ecn(void **state)
{
	struct node_inventory *inv = calloc(1, sizeof(*inv));
	assert_non_null(inv);
	inv->nnics = 3;
	for (int i = 0; i < 3; i++) {
		struct nic *n = &inv->nics[i];
		if (i)
			snprintf(n->name, sizeof(n->name), "ens1f%dnp%d", i - 1, i - 1);
		else
			snprintf(n->name, sizeof(n->name), "eno1");
		n->kind = NIC_ETHERNET;
		n->up = true;
		n->pfc = n->ecn_np = n->ecn_rp = -1;
		if (i)
			snprintf(n->rdma, sizeof(n->rdma), "mlx5_%d", i - 1);
	}
	struct vcheck c;
	validate__check_roce_pfc(&c, inv);
	assert_int_equal(c.verdict, V_SKIP);
	assert_string_equal(c.detail,
			    "skipped: the driver of 2 RoCE interfaces says no PFC (no DCB)");
	inv->nics[1].pfc = inv->nics[2].pfc = 1 << 3;
	inv->nics[1].ecn_np = inv->nics[1].ecn_rp = 1 << 3;
	inv->nics[2].ecn_np = inv->nics[2].ecn_rp = 1 << 3;
	validate__check_roce_pfc(&c, inv);
	assert_int_equal(c.verdict, V_PASS);
	assert_true(c.figure == 8);
	assert_string_equal(c.detail, "ens1f0np0 (mlx5_0) PFC on priority 3; "
				      "ens1f1np1 (mlx5_1) PFC on priority 3");
	struct vcheck rp;
	validate__check_roce_ecn(&c, &rp, inv);
	assert_int_equal(c.verdict, V_PASS);
	assert_true(c.figure == 8 && rp.figure == 8);
	assert_string_equal(c.name, "roce_ecn_np");
	assert_string_equal(rp.detail, "ens1f0np0 (mlx5_0) ECN rp on priority 3; "
				       "ens1f1np1 (mlx5_1) ECN rp on priority 3");
	/* one port unlike the other */
	inv->nics[2].pfc = 0;
	inv->nics[2].ecn_rp = 0;
	validate__check_roce_pfc(&c, inv);
	assert_int_equal(c.verdict, V_FAIL);
	assert_string_equal(c.detail, "unlike on one node: ens1f0np0 (mlx5_0) PFC on priority 3; "
				      "ens1f1np1 (mlx5_1) PFC off");
	validate__check_roce_ecn(&c, &rp, inv);
	assert_int_equal(c.verdict, V_PASS);  /* np alike on both */
	assert_int_equal(rp.verdict, V_FAIL); /* rp off on one */
	assert_string_equal(rp.detail, "unlike on one node: ens1f0np0 (mlx5_0) ECN rp on priority "
				       "3; ens1f1np1 (mlx5_1) ECN rp off");
	/* no RoCE: an interface with no device under it is no port */
	inv->nics[1].virt = inv->nics[2].virt = true;
	validate__check_roce_ecn(&c, &rp, inv);
	assert_int_equal(c.verdict, V_SKIP);
	assert_string_equal(c.detail, "skipped: no RoCE interface");
	free(inv);

	/* held to the peers: PFC on 3 at two nodes, off at the third */
	const double fig[] = {8, 8, 0};
	struct vpeer all[3];
	for (int me = 0; me < 3; me += 2) {
		struct vcheck cs[8];
		for (int i = 0; i < 3; i++) {
			peer(&all[i], i ? "b" : "a", "s", 100, 1);
			all[i].checks[1] =
				(struct vpeer_check){.name = "roce_pfc", .figure = fig[i]};
			all[i].nchecks = 2;
		}
		int k = mine(cs, 100);
		validate__vcheck_set(&cs[k], "network", "roce_pfc", "priorities", false);
		cs[k].figure = fig[me];
		validate__qos_text("roce_pfc", fig[me], cs[k].detail, sizeof(cs[k].detail));
		struct vrun o = opts();
		int nc = validate__vpeer_judge(all, 3, me, &o, cs, k + 1, 8);
		const struct vcheck *x = find(cs, nc, "roce_pfc");
		if (me == 2) {
			assert_int_equal(x->verdict, V_FAIL);
			assert_string_equal(x->detail,
					    "PFC off; 2 of 3 nodes have PFC on priority 3");
		} else {
			assert_int_equal(x->verdict, V_PASS);
			assert_string_equal(x->detail,
					    "PFC on priority 3 (as 2 of 3 nodes; 1 differ)");
		}
	}
	char t[64];
	validate__qos_text("roce_ecn_np", 0x18, t, sizeof(t));
	assert_string_equal(t, "ECN np on priority 3,4");
	validate__qos_text("roce_ecn_rp", 0, t, sizeof(t));
	assert_string_equal(t, "ECN rp off");
}

/* Node `me` of n: its check `name` (figures fig[0..n)) after the judge. */
static struct vcheck held_of(const char *name, int n, const double *fig, int me)
{
	struct vpeer all[4];
	struct vcheck c[8];
	for (int i = 0; i < n; i++) {
		peer(&all[i], i ? "b" : "a", "s", 100, 1);
		all[i].checks[1] = (struct vpeer_check){.figure = fig[i]};
		snprintf(all[i].checks[1].name, sizeof(all[i].checks[1].name), "%s", name);
		all[i].nchecks = 2;
	}
	int k = mine(c, 100);
	validate__vcheck_set(&c[k], "network", name, "Gb/s", true);
	c[k].figure = fig[me];
	snprintf(c[k].detail, sizeof(c[k].detail), "eth0 (10.0.0.%d)", me + 1);
	struct vrun o = opts();
	int nc = validate__vpeer_judge(all, n, me, &o, c, k + 1, 8);
	return *find(c, nc, name);
}

/* A link's speed and the RDMA ports' rate are held to the peers' from
 * below only: slower than most fails naming the figures, faster passes;
 * with no majority, under the fastest fails. */
static void test_speed_held_to_the_peers(void **state)
{
	const double three[] = {100, 100, 25}, fast[] = {100, 100, 400}, two[] = {100, 25};
	struct vcheck slow = held_of("net_speed", 3, three, 2);
	assert_int_equal(slow.verdict, V_FAIL);
	assert_string_equal(slow.detail, "eth0 (10.0.0.3): 25 Gb/s; 2 of 3 nodes have 100 Gb/s");
	struct vcheck ok = held_of("net_speed", 3, three, 0);
	assert_int_equal(ok.verdict, V_PASS);
	assert_string_equal(ok.detail, "eth0 (10.0.0.1) (as 2 of 3 nodes; 1 differ)");
	ok = held_of("rdma_rate", 3, fast, 2);
	assert_int_equal(ok.verdict, V_PASS);
	assert_string_equal(ok.detail, "eth0 (10.0.0.3) (over the 100 Gb/s of 2 of 3 nodes)");
	assert_int_equal(held_of("rdma_rate", 2, two, 1).verdict, V_FAIL);
	assert_int_equal(held_of("rdma_rate", 2, two, 0).verdict, V_PASS);
}

/* Retransmits: the lower median of the pairs (one bad link spares its
 * healthy end); errors and drops from /proc/net/dev, as a share of the
 * interface's packets. */
static void test_retransmits_and_errors(void **state)
{
	const char *names[] = {"a", "b", "c", "d"};
	const double one_bad[] = {-1, 0.01, 4.2, 0}, all_bad[] = {3.9, -1, 4.8, 2.5};
	const double one_bad_n[] = {-1, 1, 420, 0}, all_bad_n[] = {390, -1, 480, 250};
	struct vcheck c;
	validate__check_tcp_retransmits(&c, one_bad, one_bad_n, names, 4, 0);
	assert_int_equal(c.verdict, V_PASS);
	assert_true(c.figure == 0.01);
	assert_string_equal(c.detail, "segments sent again to its peers (the lower median of 3); "
				      "the most: 4.2% to c (420); 0.01% to b (1), 0% to d (0)");
	validate__check_tcp_retransmits(&c, all_bad, all_bad_n, names, 4, 1);
	assert_int_equal(c.verdict, V_FAIL);
	assert_true(c.figure == 3.9);
	/* over the rule on every link, but one of the two lost one burst of 16
	 * segments in a short run (a queue that overflowed once, seen between
	 * namespace hosts on a busy machine): the median link is not lossy */
	const double two[] = {-1, 0.188, 2.1}, two_n[] = {-1, 16, 180};
	validate__check_tcp_retransmits(&c, two, two_n, names, 3, 0);
	assert_int_equal(c.verdict, V_PASS);
	assert_true(c.figure == 0.188);
	assert_non_null(strstr(c.detail,
			       "; passed: 1 of the links over the rule sent fewer than 32 "
			       "segments again"));
	/* ... and with both links past the burst, it fails */
	const double two_lossy_n[] = {-1, 40, 180};
	validate__check_tcp_retransmits(&c, two, two_lossy_n, names, 3, 0);
	assert_int_equal(c.verdict, V_FAIL);
	const double none[] = {-1, -1};
	validate__check_tcp_retransmits(&c, none, none, names, 2, 0);
	assert_int_equal(c.verdict, V_SKIP);
	/* /proc/net/dev's lines: eth0 then with 3 errors and 2 drops more in
	 * 1,000 packets */
	char before[] =
		"Inter-|   Receive                                                |  Transmit\n"
		" face |bytes    packets errs drop fifo frame compressed multicast|bytes    "
		"packets errs drop fifo colls carrier compressed\n"
		"    lo:  100 10 0 0 0 0 0 0  100 10 0 0 0 0 0 0\n"
		"  eth0: 5000 600 1 0 0 0 0 0 9000 400 0 0 0 0 0 0\n";
	char after[] = "  eth0: 9000 1100 3 1 0 0 0 0 19000 900 1 1 0 0 0 0\n";
	struct vnet_counters b, a;
	validate__net_dev_parse(before, "eth0", &b);
	validate__net_dev_parse(after, "eth0", &a);
	assert_true(b.dev && a.dev);
	assert_true(b.packets == 1000 && b.faults == 1 && a.packets == 2000 && a.faults == 6);
	validate__check_net_errors(&c, "eth0", &b, &a);
	assert_int_equal(c.verdict, V_FAIL);
	assert_string_equal(c.detail, "eth0: 5 errors and drops in 1000 packets");
	a.faults = 1; /* none more */
	validate__check_net_errors(&c, "eth0", &b, &a);
	assert_int_equal(c.verdict, V_PASS);
	char other[] = "  eth1: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n";
	validate__net_dev_parse(other, "eth0", &a);
	assert_false(a.dev);
	validate__check_net_errors(&c, "eth0", &b, &a);
	assert_int_equal(c.verdict, V_SKIP);
}

static void test_one_machines_members_not_held_to_each_other(void **state)
{
	/* three members on one machine (namespace hosts, agents side by side):
	 * their processors are one, so the compute figure of one is not held to
	 * the others'; the links between them still are */
	struct vpeer all[4];
	peer(&all[0], "a", "s", 100, 1.0);
	peer(&all[1], "b", "s", 100, 1.0);
	peer(&all[2], "c", "s", 20, 0.02);
	peer(&all[3], "d", "s", 100, 1.0);
	for (int i = 0; i < 3; i++)
		snprintf(all[i].machine, sizeof(all[i].machine), "boot-1");
	snprintf(all[3].machine, sizeof(all[3].machine), "boot-2");
	struct vrun o = opts();
	struct vcheck c[8];
	int n = validate__vpeer_judge(all, 4, 2, &o, c, mine(c, 20), 8);
	const struct vcheck *g = find(c, n, "cpu_sgemm");
	assert_int_equal(g->verdict, V_PASS); /* one peer elsewhere: no median */
	assert_non_null(strstr(g->detail, "not held to 2 peers on this machine's processors"));
	assert_int_equal(find(c, n, "pair_bandwidth")->verdict, V_FAIL);
	/* with two peers on other machines, it is held to them */
	snprintf(all[1].machine, sizeof(all[1].machine), "boot-3");
	n = validate__vpeer_judge(all, 4, 2, &o, c, mine(c, 20), 8);
	g = find(c, n, "cpu_sgemm");
	assert_int_equal(g->verdict, V_FAIL);
	assert_non_null(strstr(g->threshold_from, "2 peers' median"));
}

/* pair_latency: each node's lower median over its pairs, held to its
 * peers' median from above (four times, and a millisecond over). */
static void test_latency_held_to_the_peers(void **state)
{
	/* node 3's link is slow: its pairs all are, the others' one pair each */
	double lat[4][4] = {
		{0, 80, 90, 6000}, {80, 0, 85, 6100}, {90, 85, 0, 5900}, {6000, 6100, 5900, 0}};
	struct vpeer all[4];
	memset(all, 0, sizeof(all));
	for (int i = 0; i < 4; i++) {
		snprintf(all[i].node, sizeof(all[i].node), "n%d", i);
		all[i].pair_lat_us = validate__vpair_latency(lat[i], 4, i);
	}
	assert_true(all[0].pair_lat_us == 90 && all[1].pair_lat_us == 85);
	assert_true(all[2].pair_lat_us == 90 && all[3].pair_lat_us == 6000);
	struct vcheck c;
	assert_int_equal(validate__pair_latency_judge(all, 4, 3, &c), 1);
	assert_string_equal(c.name, "pair_latency");
	assert_int_equal(c.verdict, V_FAIL);
	assert_true(c.threshold == 1090); /* the peers' median 90: 90 + 1000 */
	for (int i = 0; i < 3; i++) {
		validate__pair_latency_judge(all, 4, i, &c);
		assert_int_equal(c.verdict, V_PASS);
	}
	/* a VM's jitter: 900 us among 90s is under a millisecond over */
	all[3].pair_lat_us = 900;
	validate__pair_latency_judge(all, 4, 3, &c);
	assert_int_equal(c.verdict, V_PASS);
	/* two nodes: no peers' median to hold one to */
	validate__pair_latency_judge(all, 2, 0, &c);
	assert_int_equal(c.verdict, V_PASS);
	assert_non_null(strstr(c.detail, "none to hold it to"));
	/* no links measured: skipped */
	all[0].pair_lat_us = 0;
	validate__pair_latency_judge(all, 4, 0, &c);
	assert_int_equal(c.verdict, V_SKIP);
}

/* NCCL_DEBUG=INFO lines in the shapes NCCL 2.x writes them (as posted in
 * NVIDIA/nccl issues 226, 952, 1053, 1232, 1814 and nccl-tests issue 166;
 * host names and ids are this test's): IB through the IBext plugin, IB
 * with GPUDirect, sockets, P2P and SHM within a node, an old release's
 * "Ring" lines. */
static const char ib_log[] =
	"gpu07:987:1260 [7] NCCL INFO NET/Plugin : Plugin load returned 2 : libnccl-net.so\n"
	"gpu07:987:1260 [7] NCCL INFO Using network IBext_v8\n"
	"gpu07:987:1260 [7] NCCL INFO Channel 03/0 : 47[7] -> 39[7] [receive] via NET/IBext_v8/2\n"
	"gpu07:987:1260 [7] NCCL INFO Channel 05/0 : 47[7] -> 39[7] [receive] via NET/IBext_v8/2\n"
	"gpu07:986:1254 [6] NCCL INFO Channel 00/0 : 6[6] -> 38[6] [send] via NET/IB/1/GDRDMA\n"
	"gpu07:986:1254 [6] NCCL INFO Channel 00/0 : 14[6] -> 15[7] via P2P/IPC/read\n"
	"gpu07:986:1254 [6] NCCL INFO Connected all rings\n";
static const char socket_log[] =
	"gpu08:919:1150 [0] NCCL INFO NET/IB : No device found.\n"
	"gpu08:919:1150 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.8<0>\n"
	"gpu08:919:1150 [0] NCCL INFO Using network Socket\n"
	"gpu08:919:1150 [0] NCCL INFO Channel 01/0 : 8[0] -> 15[7] via P2P/IPC/read\n"
	"gpu08:926:1151 [7] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3\n"
	"gpu08:926:1151 [7] NCCL INFO Channel 07/0 : 15[7] -> 6[6] [send] via NET/Socket/3\n"
	"[1] gpu08:22555:22555 [0] NCCL INFO Channel 00 : 2[1] -> 0[0] via SHM/direct/direct\n"
	"gpu08:45305:45310 [0] NCCL INFO Ring 00 : 43 -> 44 [receive] via NET/Socket/0\n"
	"gpu08:45305:45310 [0] NCCL WARN Channel 00 : via NET/IB/0 is not a connection line\n";

static void test_nccl_transport_from_its_log(void **state)
{
	struct nccl_log l;
	memset(&l, 0, sizeof(l));
	model_nccl_log_text(&l, ib_log, strlen(ib_log));
	assert_int_equal(l.connections[NCCL_TR_NET], 3);
	assert_int_equal(l.connections[NCCL_TR_SOCKET], 0);
	assert_int_equal(l.connections[NCCL_TR_P2P], 1);
	assert_string_equal(l.net, "IBext_v8");
	assert_string_equal(l.network, "IBext_v8");
	struct nccl_log s;
	memset(&s, 0, sizeof(s));
	model_nccl_log_text(&s, socket_log, strlen(socket_log));
	assert_int_equal(s.connections[NCCL_TR_SOCKET], 3);
	assert_int_equal(s.connections[NCCL_TR_NET], 0);
	assert_int_equal(s.connections[NCCL_TR_P2P], 1);
	assert_int_equal(s.connections[NCCL_TR_SHM], 1);
	assert_true(s.ib_no_device);
	assert_string_equal(s.network, "Socket");
	assert_string_equal(s.socket_line, "Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3");
	assert_int_equal(model_nccl_log_between_nodes(&s), 3);

	/* judged: an RDMA node whose NCCL went by sockets fails, quoting it */
	struct node_inventory *inv = calloc(1, sizeof(*inv));
	inv->nrdma = 1;
	snprintf(inv->rdma[0].dev, sizeof(inv->rdma[0].dev), "mlx5_0");
	inv->rdma[0].port = 1;
	inv->rdma[0].active = true;
	struct vcheck c;
	validate__nccl_transport_judge(&c, &s, inv);
	assert_string_equal(c.name, "nccl_transport");
	assert_int_equal(c.verdict, V_FAIL);
	assert_true(c.figure == 100.0);
	assert_non_null(strstr(c.detail, "fell back to sockets on 3 of 3 connections between "
					 "nodes though mlx5_0 port 1 is active (NCCL: NET/IB found "
					 "no device): \"Channel 03/0 : 15[7] -> 6[6] [send] via "
					 "NET/Socket/3\""));
	validate__nccl_transport_judge(&c, &l, inv);
	assert_int_equal(c.verdict, V_PASS);
	assert_true(c.figure == 0);
	assert_non_null(strstr(c.detail, "3 connections between nodes, all over NET/IBext_v8"));
	/* a node without RDMA: sockets are what it has */
	inv->rdma[0].active = false;
	validate__nccl_transport_judge(&c, &s, inv);
	assert_int_equal(c.verdict, V_PASS);
	assert_non_null(strstr(c.detail, "sockets expected"));
	/* only P2P: nothing between nodes to judge */
	struct nccl_log p;
	memset(&p, 0, sizeof(p));
	model_nccl_log_line(&p, "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read");
	validate__nccl_transport_judge(&c, &p, inv);
	assert_int_equal(c.verdict, V_SKIP);
	assert_non_null(strstr(c.detail, "only P2P and SHM within the node"));
	free(inv);
}

/* perftest's output as its printf formats make it (src/perftest_parameters.h
 * of linux-rdma/perftest: RESULT_FMT_G and REPORT_FMT for the bandwidth,
 * RESULT_FMT_LAT and REPORT_FMT_LAT for the latency; the banner and the
 * parameters' block of src/write_bw.c and src/perftest_parameters.c); a
 * duration run (-D) reports no peak. */
static const char write_bw_client[] =
	"---------------------------------------------------------------------------------------\n"
	"                    RDMA_Write BW Test\n"
	" Dual-port       : OFF\t\tDevice         : mlx5_0\n"
	" Number of qps   : 1\t\tTransport type : IB\n"
	" Connection type : RC\t\tUsing SRQ      : OFF\n"
	" TX depth        : 128\n"
	" Mtu             : 4096[B]\n"
	" Link type       : IB\n"
	"---------------------------------------------------------------------------------------\n"
	" local address: LID 0x0b QPN 0x0a7e PSN 0x5b6f4c RKey 0x1fff00 VAddr 0x007f2c3a5d0000\n"
	" remote address: LID 0x0c QPN 0x0a7f PSN 0x7e8f3d RKey 0x1fff00 VAddr 0x007f81b2e10000\n"
	"---------------------------------------------------------------------------------------\n"
	" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
	" 65536      726456           0.00               190.43\t\t     0.363218\n"
	"---------------------------------------------------------------------------------------\n";
static const char write_bw_server[] =
	"\n************************************\n"
	"* Waiting for client to connect... *\n"
	"************************************\n"
	"---------------------------------------------------------------------------------------\n"
	" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
	"\n"
	" 65536      726456           0.00               190.43\t\t     0.363218\n"
	"---------------------------------------------------------------------------------------\n";
static const char send_lat_client[] =
	"---------------------------------------------------------------------------------------\n"
	"                    Send Latency Test\n"
	" Dual-port       : OFF\t\tDevice         : mlx5_1\n"
	"---------------------------------------------------------------------------------------\n"
	" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
	"t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
	" 2       1000          0.98           4.43         1.02     \t       1.04        \t0.11   "
	"\t\t1.43    \t\t4.43   \n"
	"---------------------------------------------------------------------------------------\n";
static const char write_bw_refused[] =
	" Couldn't connect to 10.0.0.2:18515\n"
	"Unable to open file descriptor for socket connection Unable to init the socket "
	"connection\n";
static const char write_bw_mbs[] =
	" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
	" 65536      5000             23795.12            23794.62\t\t   0.380714\n";

static void test_perftest_table(void **state)
{
	(void)state;
	assert_true(validate__perftest_figure(write_bw_client, "average[Gb/sec]") == 190.43);
	assert_true(validate__perftest_figure(write_bw_server, "average[Gb/sec]") == 190.43);
	assert_true(validate__perftest_figure(write_bw_client, "MsgRate[Mpps]") == 0.363218);
	assert_true(validate__perftest_figure(send_lat_client, "t_typical[usec]") == 1.02);
	assert_true(validate__perftest_figure(send_lat_client, "t_min[usec]") == 0.98);
	/* "99.9% percentile[usec]" is one column, the last */
	assert_true(validate__perftest_figure(send_lat_client, "99.9% percentile[usec]") == 4.43);
	/* no table, another unit, a table without its row */
	assert_true(validate__perftest_figure(write_bw_refused, "average[Gb/sec]") == -1);
	assert_true(validate__perftest_figure(write_bw_mbs, "average[Gb/sec]") == -1);
	assert_true(validate__perftest_figure(" #bytes #iterations t_typical[usec]\n---\n",
					      "t_typical[usec]") == -1);
	assert_true(validate__perftest_figure("", "t_typical[usec]") == -1);
}

static void rdma_peer(struct vpeer *p, const char *node, int rails, double rate, double gbits,
		      double us, int pairs)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->node, sizeof(p->node), "%s", node);
	p->nrails = rails;
	for (int r = 0; r < rails; r++)
		snprintf(p->rails[r], sizeof(p->rails[r]), "mlx5_%d:1", r);
	p->rail_gbps = rate;
	p->perftest = true;
	p->rdma_gbits = gbits;
	p->rdma_lat_us = us;
	p->rdma_pairs = pairs;
}

static void test_rdma_pairs_held_to_the_port_and_the_peers(void **state)
{
	(void)state;
	struct vrun o = opts();
	o.tolerance = 0.2;
	/* node 3's pairs: its weakest rail at 120 Gb/s, the others' 185-190
	 * (the upper median of each row: 188, 185, 185, 120) */
	double bw[4][4] = {
		{-1, 190, 188, 120}, {190, -1, 185, 121}, {188, 185, -1, 119}, {120, 121, 119, -1}};
	struct vpeer all[4];
	for (int i = 0; i < 4; i++) {
		char name[8];
		snprintf(name, sizeof(name), "n%d", i);
		rdma_peer(&all[i], name, 8, 200, validate__vpair_median(bw[i], 4, i, -0.5, true),
			  1.1, 3);
	}
	assert_true(all[0].rdma_gbits == 188 && all[3].rdma_gbits == 120);
	struct rdma_note note;
	memset(&note, 0, sizeof(note));
	snprintf(note.weakest, sizeof(note.weakest), "mlx5_5:1 to n2");
	note.weakest_gbits = 119;
	struct vcheck c[2];
	assert_int_equal(validate__rdma_judge(all, 4, 3, &o, &note, c), 2);
	assert_string_equal(c[0].name, "rdma_pair_bandwidth");
	assert_string_equal(c[0].layer, "interconnect");
	assert_int_equal(c[0].verdict, V_FAIL);
	/* over half the port's 200 Gb/s, but under 80% of the peers' 185 */
	assert_true(fabs(c[0].threshold - 148) < 1e-9);
	assert_non_null(strstr(c[0].detail, "35.1% below the peers' median (185 Gb/s)"));
	assert_non_null(strstr(c[0].detail, "the weakest: mlx5_5:1 to n2, 119 Gb/s"));
	assert_int_equal(c[1].verdict, V_PASS);
	for (int i = 0; i < 3; i++) {
		validate__rdma_judge(all, 4, i, &o, &note, c);
		assert_int_equal(c[0].verdict, V_PASS);
	}
	/* two nodes alike and slow: half the port's rate is the floor */
	rdma_peer(&all[0], "n0", 8, 200, 90, 1.1, 1);
	rdma_peer(&all[1], "n1", 8, 200, 90, 1.1, 1);
	validate__rdma_judge(all, 2, 0, &o, &note, c);
	assert_int_equal(c[0].verdict, V_FAIL);
	assert_true(c[0].threshold == 100);
	assert_string_equal(c[0].threshold_from, "half the port's rate");
	assert_non_null(strstr(c[1].detail, "none to hold it to"));
	/* a pair that failed: 0, with the tool's words */
	all[0].rdma_gbits = 0;
	snprintf(note.why, sizeof(note.why),
		 "ib_write_bw on mlx5_0 to n1: Couldn't connect to 10.0.0.2:18515");
	validate__rdma_judge(all, 2, 0, &o, &note, c);
	assert_int_equal(c[0].verdict, V_FAIL);
	assert_true(c[0].broken);
	assert_string_equal(c[0].detail, note.why);
	/* skipped: no rails, no perftest, no peer */
	all[0].nrails = 0;
	validate__rdma_judge(all, 2, 0, &o, &note, c);
	assert_int_equal(c[0].verdict, V_SKIP);
	assert_string_equal(c[0].detail, "skipped: no ACTIVE RDMA port");
	assert_int_equal(c[1].verdict, V_SKIP);
	all[0].nrails = 8;
	all[0].perftest = false;
	validate__rdma_judge(all, 2, 0, &o, &note, c);
	assert_int_equal(c[0].verdict, V_SKIP);
	assert_non_null(strstr(c[0].detail, "perftest is not installed here"));
	all[0].perftest = true;
	all[0].rdma_pairs = 0;
	validate__rdma_judge(all, 2, 0, &o, &note, c);
	assert_int_equal(c[0].verdict, V_SKIP);
	assert_non_null(strstr(c[0].detail, "no peer on another host with an ACTIVE RDMA port"));
}

static void test_rdma_latency_held_to_the_peers(void **state)
{
	(void)state;
	struct vrun o = opts();
	struct vpeer all[4];
	double us[4] = {1.1, 1.2, 1.0, 3.5};
	for (int i = 0; i < 4; i++) {
		char name[8];
		snprintf(name, sizeof(name), "n%d", i);
		rdma_peer(&all[i], name, 1, 100, 93, us[i], 3);
	}
	struct rdma_note note;
	memset(&note, 0, sizeof(note));
	struct vcheck c[2];
	validate__rdma_judge(all, 4, 3, &o, &note, c);
	assert_string_equal(c[1].name, "rdma_pair_latency");
	assert_int_equal(c[1].verdict, V_FAIL);
	/* the peers' median 1.1: 2 us over it is more than twice it */
	assert_true(fabs(c[1].threshold - 3.1) < 1e-9);
	for (int i = 0; i < 3; i++) {
		validate__rdma_judge(all, 4, i, &o, &note, c);
		assert_int_equal(c[1].verdict, V_PASS);
	}
	/* 3 us among 1.1s is jitter's side of the line */
	all[3].rdma_lat_us = 3.0;
	validate__rdma_judge(all, 4, 3, &o, &note, c);
	assert_int_equal(c[1].verdict, V_PASS);
}

/* Two ranks of one process over coll on loopback, each with the recorded
 * RoCE node's two rails and the stand-in perftest (tests/perftest) on its
 * PATH: the pairs' processes started, met and read. */
struct rdma_rank {
	int rank, size, port, peers;
	struct vpeer all[4];
	double bw[4], lat[4];
	struct rdma_note note;
	char failure[256];
};

static void *rdma_rank_main(void *arg)
{
	struct rdma_rank *j = arg;
	char root[64];
	snprintf(root, sizeof(root), "127.0.0.1:%d", j->port);
	/* (over TCP, as between nodes: pairs need it) */
	struct coll_opts co = {.timeout_ms = 60000, .no_shm = true};
	struct coll_comm *c;
	struct tk_error err;
	if (coll_init(&c, j->rank, j->size, root, &co, &err) < 0) {
		snprintf(j->failure, sizeof(j->failure), "init: %.200s", err.text);
		return NULL;
	}
	if (validate__rdma_pairs(c, j->all, true, j->peers, j->bw, j->lat, &j->note, &err) < 0)
		snprintf(j->failure, sizeof(j->failure), "pairs: %.200s", err.text);
	coll_destroy(c);
	return NULL;
}

static void run_rdma_ranks(struct rdma_rank *jobs, const struct vpeer *all, int n, int peers)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	pthread_t th[4];
	for (int r = 0; r < n; r++) {
		memset(&jobs[r], 0, sizeof(jobs[r]));
		jobs[r].rank = r;
		jobs[r].size = n;
		jobs[r].peers = peers;
		jobs[r].port = ntohs(sa.sin_port);
		memcpy(jobs[r].all, all, sizeof(jobs[r].all[0]) * (size_t)n);
		assert_int_equal(pthread_create(&th[r], NULL, rdma_rank_main, &jobs[r]), 0);
	}
	for (int r = 0; r < n; r++)
		pthread_join(th[r], NULL);
	for (int r = 0; r < n; r++)
		if (jobs[r].failure[0])
			fail_msg("rank %d: %s", r, jobs[r].failure);
}

static void run_rdma_pair(struct rdma_rank *jobs, const struct vpeer *all)
{
	run_rdma_ranks(jobs, all, 2, 0);
}

static void test_rdma_pairs_run_perftest(void **state)
{
	(void)state;
	const char *data = getenv("TENK_TEST_DATA"), *standin = getenv("TENK_TEST_PERFTEST");
	if (!data || !standin)
		fail_msg("TENK_TEST_DATA and TENK_TEST_PERFTEST are not set: meson test sets them");
	char tree[4096], path[8192];
	snprintf(tree, sizeof(tree), "%s/sysfs/roce", data);
	snprintf(path, sizeof(path), "%s:%s", standin,
		 getenv("PATH") ? getenv("PATH") : "/usr/bin");
	char *old_path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	setenv("PATH", path, 1);
	setenv("TENK_SYSFS", tree, 1);
	struct node_inventory *inv = calloc(1, sizeof(*inv));
	validate__fabric(inv);
	struct vpeer all[4];
	for (int r = 0; r < 4; r++) {
		memset(&all[r], 0, sizeof(all[r]));
		snprintf(all[r].node, sizeof(all[r].node), "n%d", r);
		snprintf(all[r].addr, sizeof(all[r].addr), "127.0.0.1");
		validate__rdma_rails(&all[r], inv);
	}
	free(inv);
	assert_int_equal(all[0].nrails, 2);
	assert_string_equal(all[0].rails[0], "mlx5_0:1");
	assert_string_equal(all[0].rails[1], "mlx5_1:1");
	assert_true(all[0].rail_gbps == 100 && all[0].perftest);
	struct rdma_rank jobs[4];
	/* four nodes, a peer each (--rdma-peers 1): one round, a pair each,
	 * the others not measured */
	run_rdma_ranks(jobs, all, 4, 1);
	for (int r = 0; r < 4; r++) {
		int measured = 0;
		for (int q = 0; q < 4; q++)
			measured += jobs[r].bw[q] >= 0;
		assert_int_equal(measured, 1);
	}
	/* all of them: every other node */
	run_rdma_ranks(jobs, all, 4, INT_MAX);
	for (int r = 0; r < 4; r++)
		for (int q = 0; q < 4; q++)
			assert_true(q == r ? jobs[r].bw[q] == -1 : fabs(jobs[r].bw[q] - 93) < 1e-9);
	/* the stand-in's figures: 93% of the ports' 100 Gb/s, 1.6 us */
	run_rdma_pair(jobs, all);
	for (int r = 0; r < 2; r++) {
		assert_true(jobs[r].bw[r] == -1 && jobs[r].lat[r] == -1);
		assert_true(fabs(jobs[r].bw[1 - r] - 93) < 1e-9);
		assert_true(fabs(jobs[r].lat[1 - r] - 1.6) < 1e-9);
		assert_string_equal(jobs[r].note.why, "");
		assert_non_null(strstr(jobs[r].note.weakest, r ? "to n0" : "to n1"));
	}
	/* the second rail of node 1 names a port its tree lacks: that rail
	 * fails, the pair's figure is 0, and why is perftest's own line */
	snprintf(all[1].rails[1], sizeof(all[1].rails[1]), "mlx5_9:1");
	run_rdma_pair(jobs, all);
	for (int r = 0; r < 2; r++)
		assert_true(jobs[r].bw[1 - r] == 0);
	/* node 1 is the client: it could not start; node 0 served and its
	 * client never came (killed when node 1 said so, no figure) */
	assert_string_equal(jobs[1].note.why,
			    "ib_write_bw on mlx5_9 to n0: IB device mlx5_9 not found");
	/* no perftest at node 1: nothing measured, nothing failed */
	snprintf(all[1].rails[1], sizeof(all[1].rails[1]), "mlx5_1:1");
	all[1].perftest = false;
	run_rdma_pair(jobs, all);
	for (int r = 0; r < 2; r++)
		assert_true(jobs[r].bw[1 - r] == -1 && jobs[r].lat[1 - r] == -1);
	setenv("PATH", old_path, 1);
	free(old_path);
	unsetenv("TENK_SYSFS");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pair_figure),
		cmocka_unit_test(test_slow_node_fails_against_peers),
		cmocka_unit_test(test_floor_binds_when_peers_are_slow),
		cmocka_unit_test(test_two_nodes_have_no_peer_median),
		cmocka_unit_test(test_stack_and_clock),
		cmocka_unit_test(test_mtu_held_to_the_peers),
		cmocka_unit_test(test_roce_pfc_and_ecn),
		cmocka_unit_test(test_speed_held_to_the_peers),
		cmocka_unit_test(test_retransmits_and_errors),
		cmocka_unit_test(test_one_machines_members_not_held_to_each_other),
		cmocka_unit_test(test_nccl_transport_from_its_log),
		cmocka_unit_test(test_latency_held_to_the_peers),
		cmocka_unit_test(test_perftest_table),
		cmocka_unit_test(test_rdma_pairs_held_to_the_port_and_the_peers),
		cmocka_unit_test(test_rdma_latency_held_to_the_peers),
		cmocka_unit_test(test_rdma_pairs_run_perftest),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
