/*
 * The network layer of tenk validate (issue 41), between system and
 * compute: the node's fabric as sysfs says it (model fabric.c: TENK_SYSFS
 * for another tree), and the interface its cluster traffic takes.
 *
 *   net_links   its devices' interfaces; one carrying an RDMA device and
 *               down fails (the fabric's port), the others are told
 *   rdma_ports  every RDMA port ACTIVE (none: skipped)
 *   nccl_env    no variable in this environment (the one jobs get, in a
 *               validation job) forces NCCL onto sockets where RDMA is up
 *   net_mtu     the MTU of the interface the node reaches its peers by;
 *               with --nodes held to its peers' (cluster.c): the odd one
 *               out fails, naming it
 *   net_speed   that interface's link speed (sysfs); held to the peers':
 *               one under theirs fails
 *   rdma_rate   the slowest ACTIVE RDMA port's rate (none: skipped); held
 *               to the peers' as net_speed
 *
 * And, read before and after the interconnect layer's traffic between the
 * nodes (cluster.c):
 *   tcp_retransmits  TCP segments sent again to each peer, as a share of
 *                    those sent (TCP_INFO): the lower median of the pairs
 *                    over 0.1% fails (a lossy link, a bad cable, a port),
 *                    where the links over it lost more than one burst
 *   net_errors       errors and drops on the interface to the peers: over
 *                    0.1% of its packets fails
 *
 * And after the interconnect layer's NCCL all-reduce between the nodes,
 * from NCCL's own log (NCCL_DEBUG=INFO into a file of ours, where the
 * environment does not set NCCL_DEBUG; model nccl_log.c):
 *   nccl_transport   the share of its connections between nodes that
 *                    went over sockets: on a node with an ACTIVE RDMA
 *                    port any fails, NCCL's own line quoted
 */
#include "internal.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <stdarg.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <unistd.h>

static void add(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t n, const char *fmt, ...)
{
	size_t l = strlen(buf);
	if (l + 1 >= n)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + l, n - l, fmt, ap);
	va_end(ap);
}

void validate__fabric(struct node_inventory *inv)
{
	memset(inv, 0, sizeof(*inv));
	const char *sys = getenv("TENK_SYSFS");
	node_fabric_read(inv, sys && *sys ? sys : "/sys");
	if (!sys || !*sys) /* a recorded tree is not this machine's */
		node_roce_pfc_read(inv);
}

void validate__check_net_links(struct vcheck *c, const struct node_inventory *inv)
{
	validate__vcheck_set(c, "network", "net_links", "up", true);
	int devs = 0, up = 0;
	char down[160] = "";
	for (int i = 0; i < inv->nnics; i++) {
		const struct nic *n = &inv->nics[i];
		if (n->virt)
			continue;
		devs++;
		up += n->up;
		add(c->detail, sizeof(c->detail), "%s%s %s", devs > 1 ? "; " : "", n->name,
		    n->up ? "up" : "down");
		if (n->up && n->speed_mbps > 0)
			add(c->detail, sizeof(c->detail), " %g Gb/s", (double)n->speed_mbps / 1000);
		add(c->detail, sizeof(c->detail), " MTU %d", n->mtu);
		if (!n->up && n->rdma[0])
			add(down, sizeof(down), "%s%s (%s)", down[0] ? ", " : "", n->name, n->rdma);
	}
	c->figure = up;
	if (!devs) {
		c->verdict = V_SKIP;
		snprintf(c->detail, sizeof(c->detail),
			 "skipped: no network device (%d virtual "
			 "interface%s)",
			 inv->nnics, inv->nnics == 1 ? "" : "s");
		return;
	}
	if (down[0]) {
		c->verdict = V_FAIL;
		char was[sizeof(c->detail)];
		snprintf(was, sizeof(was), "%s", c->detail);
		snprintf(c->detail, sizeof(c->detail),
			 "down, with an RDMA device on it: %.100s; %.180s", down, was);
	}
}

void validate__check_rdma(struct vcheck *c, const struct node_inventory *inv)
{
	validate__vcheck_set(c, "network", "rdma_ports", "active", true);
	if (!inv->nrdma) {
		c->verdict = V_SKIP;
		snprintf(c->detail, sizeof(c->detail), "skipped: no RDMA device");
		return;
	}
	int active = 0;
	char bad[140] = "", good[140] = "";
	for (int i = 0; i < inv->nrdma; i++) {
		const struct rdma_port *p = &inv->rdma[i];
		active += p->active;
		if (p->active)
			add(good, sizeof(good), "%s%s/%d %s %g Gb/s", good[0] ? ", " : "", p->dev,
			    p->port, p->ethernet ? "RoCE" : "IB", p->rate_gbps);
		else
			add(bad, sizeof(bad), "%s%s port %d %s", bad[0] ? ", " : "", p->dev,
			    p->port, p->state[0] ? p->state : "(no state)");
	}
	c->figure = active;
	validate__vcheck_judge(c, inv->nrdma, "every port");
	snprintf(c->detail, sizeof(c->detail), "%s%s%s%s", bad[0] ? "not active: " : "", bad,
		 bad[0] && good[0] ? "; active: " : "", good);
}

/* Does NCCL's environment force sockets? The variable, into what. */
static bool forces_sockets(char *what, size_t n)
{
	const char *ib = getenv("NCCL_IB_DISABLE"), *net = getenv("NCCL_NET");
	if (ib && *ib && strcmp(ib, "0") != 0) {
		snprintf(what, n, "NCCL_IB_DISABLE=%.16s", ib);
		return true;
	}
	if (net && strcasecmp(net, "Socket") == 0) {
		snprintf(what, n, "NCCL_NET=%.16s", net);
		return true;
	}
	return false;
}

void validate__check_nccl_env(struct vcheck *c, const struct node_inventory *inv)
{
	validate__vcheck_set(c, "network", "nccl_env", "forcing", false);
	int active = 0;
	const struct rdma_port *first = NULL;
	for (int i = 0; i < inv->nrdma; i++) {
		if (!inv->rdma[i].active)
			continue;
		if (!first)
			first = &inv->rdma[i];
		active++;
	}
	char what[48] = "";
	bool forced = forces_sockets(what, sizeof(what));
	c->figure = forced;
	const char *ifname = getenv("NCCL_SOCKET_IFNAME");
	if (!active) {
		c->verdict = V_SKIP;
		snprintf(c->detail, sizeof(c->detail),
			 "skipped: no active RDMA port, so NCCL goes between nodes by sockets "
			 "anyway%s%s",
			 forced ? "; " : "", forced ? what : "");
		return;
	}
	validate__vcheck_judge(c, 0, "none on an RDMA node");
	if (forced)
		snprintf(c->detail, sizeof(c->detail),
			 "%s forces NCCL onto sockets though %s port %d is active: unset it", what,
			 first->dev, first->port);
	else
		snprintf(c->detail, sizeof(c->detail),
			 "nothing forces sockets (%d active RDMA port%s)%s%.40s%s", active,
			 active == 1 ? "" : "s", ifname ? "; NCCL_SOCKET_IFNAME=" : "",
			 ifname ? ifname : "", ifname ? " picks the sockets' interface only" : "");
}

/* ---- NCCL's transport -------------------------------------------------------------- */

static char nccl_log_path[256];

static void nccl_log_gone(void)
{
	if (nccl_log_path[0])
		unlink(nccl_log_path);
}

void validate__nccl_log_start(void)
{
	static bool started;
	if (started)
		return;
	started = true;
	const char *set = getenv("NCCL_DEBUG");
	if (set && *set)
		return; /* the operator's: theirs to read */
	const char *tmp = getenv("TMPDIR");
	snprintf(nccl_log_path, sizeof(nccl_log_path), "%s/tenk-nccl-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemp(nccl_log_path);
	if (fd < 0) {
		nccl_log_path[0] = '\0';
		return;
	}
	close(fd);
	atexit(nccl_log_gone);
	/* before NCCL's first call, which reads them once */
	setenv("NCCL_DEBUG", "INFO", 1);
	setenv("NCCL_DEBUG_FILE", nccl_log_path, 1);
	if (!getenv("NCCL_DEBUG_SUBSYS"))
		setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
}

static bool rdma_active(const struct node_inventory *inv, const struct rdma_port **first)
{
	for (int i = 0; i < inv->nrdma; i++)
		if (inv->rdma[i].active) {
			*first = &inv->rdma[i];
			return true;
		}
	return false;
}

void validate__nccl_transport_judge(struct vcheck *c, const struct nccl_log *l,
				    const struct node_inventory *inv)
{
	validate__vcheck_set(c, "interconnect", "nccl_transport", "% sockets", false);
	int between = model_nccl_log_between_nodes(l), socket = l->connections[NCCL_TR_SOCKET];
	if (!between) {
		c->verdict = V_SKIP;
		snprintf(c->detail, sizeof(c->detail),
			 "skipped: NCCL's log names no connection between nodes%s",
			 l->connections[NCCL_TR_P2P] + l->connections[NCCL_TR_SHM]
				 ? " (only P2P and SHM within the node)"
				 : "");
		return;
	}
	c->figure = 100.0 * socket / between;
	const struct rdma_port *port = NULL;
	if (!rdma_active(inv, &port)) {
		c->verdict = socket == between ? V_PASS : V_SKIP;
		snprintf(c->detail, sizeof(c->detail),
			 "%d connections between nodes, %d of them over sockets: no active RDMA "
			 "port here, sockets expected",
			 between, socket);
		return;
	}
	validate__vcheck_judge(c, 0, "none on an RDMA node");
	if (socket)
		snprintf(c->detail, sizeof(c->detail),
			 "NCCL fell back to sockets on %d of %d connections between nodes though "
			 "%s port %d is active%s%s: \"%.120s\"",
			 socket, between, port->dev, port->port, l->ib_no_device ? " (NCCL: " : "",
			 l->ib_no_device ? "NET/IB found no device)" : "", l->socket_line);
	else
		snprintf(c->detail, sizeof(c->detail),
			 "%d connections between nodes, all over NET/%s%s%s", between, l->net,
			 l->network[0] ? "; NCCL uses network " : "", l->network);
}

void validate__check_nccl_transport(struct vcheck *c, const struct node_inventory *inv,
				    bool nccl_ran)
{
	struct nccl_log l;
	memset(&l, 0, sizeof(l));
	char *text = NULL;
	size_t len = 0;
	if (nccl_ran && nccl_log_path[0] &&
	    tk_read_file(nccl_log_path, 64u << 20, &text, &len) >= 0)
		model_nccl_log_text(&l, text, len);
	free(text);
	validate__nccl_transport_judge(c, &l, inv);
	if (c->verdict != V_SKIP || model_nccl_log_between_nodes(&l))
		return;
	const char *set = getenv("NCCL_DEBUG");
	snprintf(c->detail, sizeof(c->detail), "skipped: %s",
		 !nccl_ran	    ? "no NCCL all-reduce ran between the nodes"
		 : nccl_log_path[0] ? "NCCL's log names no connection between nodes"
		 : set && *set	    ? "NCCL_DEBUG is set by the environment: NCCL's log is "
				      "the operator's"
				    : "no file for NCCL's log");
}

/* The interface (name into ifname) and address the route to host takes. */
static int route_to(const char *host, char *ifname, size_t n, char *addr, size_t an)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(9)};
	if (inet_pton(AF_INET, host, &to.sin_addr) != 1)
		return -1;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	int r = fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0 ||
				getsockname(fd, (struct sockaddr *)&me, &ml) < 0
			? -1
			: 0;
	if (fd >= 0)
		close(fd);
	if (r < 0)
		return -1;
	inet_ntop(AF_INET, &me.sin_addr, addr, (socklen_t)an);
	struct ifaddrs *ifs, *i;
	if (getifaddrs(&ifs) < 0)
		return -1;
	r = -1;
	for (i = ifs; i && r < 0; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == me.sin_addr.s_addr) {
			snprintf(ifname, n, "%s", i->ifa_name);
			r = 0;
		}
	freeifaddrs(ifs);
	return r;
}

/* The interface (and address) the node reaches its peers by, into
 * ifname and addr: the route to the first node's address in a validation
 * job, else off the machine (a documentation address: nothing is sent).
 * False, c skipped saying why, where there is none. */
static bool peer_iface(struct vcheck *c, char *ifname, size_t n, char *addr, size_t an)
{
	if (validate__peer_route(ifname, n, addr, an) == 0)
		return true;
	const char *to = getenv("MASTER_ADDR");
	c->verdict = V_SKIP;
	snprintf(c->detail, sizeof(c->detail), "skipped: no IPv4 route to %s",
		 to && *to ? to : "outside this machine");
	return false;
}

void validate__check_net_mtu(struct vcheck *c)
{
	validate__vcheck_set(c, "network", "net_mtu", "bytes", false);
	char ifname[IF_NAMESIZE] = "", addr[INET_ADDRSTRLEN] = "";
	if (!peer_iface(c, ifname, sizeof(ifname), addr, sizeof(addr)))
		return;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	_Static_assert(sizeof(ifr.ifr_name) == sizeof(ifname), "an interface's name");
	memcpy(ifr.ifr_name, ifname, sizeof(ifname));
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && ioctl(fd, SIOCGIFMTU, &ifr) == 0;
	if (fd >= 0)
		close(fd);
	if (!ok) {
		c->verdict = V_SKIP;
		snprintf(c->detail, sizeof(c->detail), "skipped: cannot read %s's MTU", ifname);
		return;
	}
	/* not higher, not lower: alike (cluster.c holds it to its peers'); and
	 * at least IPv6's minimum, below which the interface is broken */
	c->figure = ifr.ifr_mtu;
	c->threshold = 1280;
	snprintf(c->threshold_from, sizeof(c->threshold_from), "IPv6's minimum");
	if (c->figure < 1280)
		c->verdict = V_FAIL;
	snprintf(c->detail, sizeof(c->detail), "%s (%s)", ifname, addr);
}

void validate__check_net_speed(struct vcheck *c, const struct node_inventory *inv)
{
	validate__vcheck_set(c, "network", "net_speed", "Gb/s", true);
	char ifname[IF_NAMESIZE] = "", addr[INET_ADDRSTRLEN] = "";
	if (!peer_iface(c, ifname, sizeof(ifname), addr, sizeof(addr)))
		return;
	const struct nic *nic = NULL;
	for (int i = 0; i < inv->nnics && !nic; i++)
		if (strcmp(inv->nics[i].name, ifname) == 0)
			nic = &inv->nics[i];
	if (!nic || nic->speed_mbps <= 0) {
		c->verdict = V_SKIP;
		snprintf(c->detail, sizeof(c->detail), "skipped: %s (%s) says no speed", ifname,
			 addr);
		return;
	}
	/* no floor of its own: the peers' speed is the rule (cluster.c) */
	c->figure = (double)nic->speed_mbps / 1000;
	snprintf(c->detail, sizeof(c->detail), "%s (%s)", ifname, addr);
}

void validate__check_rdma_rate(struct vcheck *c, const struct node_inventory *inv)
{
	validate__vcheck_set(c, "network", "rdma_rate", "Gb/s", true);
	const struct rdma_port *slow = NULL;
	for (int i = 0; i < inv->nrdma; i++)
		if (inv->rdma[i].active && inv->rdma[i].rate_gbps > 0 &&
		    (!slow || inv->rdma[i].rate_gbps < slow->rate_gbps))
			slow = &inv->rdma[i];
	if (!slow) {
		c->verdict = V_SKIP;
		snprintf(c->detail, sizeof(c->detail), "skipped: no ACTIVE RDMA port with a rate");
		return;
	}
	c->figure = slow->rate_gbps;
	snprintf(c->detail, sizeof(c->detail), "%s port %d, the slowest ACTIVE", slow->dev,
		 slow->port);
}

/* ---- RoCE's lossless settings --------------------------------------------------------- */

static void prio_list(int bits, char *out, size_t n)
{
	out[0] = 0;
	for (int k = 0; k < 8; k++)
		if (bits & 1 << k)
			add(out, n, "%s%d", out[0] ? "," : "", k);
}

void validate__qos_text(const char *check, double figure, char *out, size_t n)
{
	int v = (int)figure;
	char a[24];
	prio_list(v, a, sizeof(a));
	const char *what = strcmp(check, "roce_ecn_np") == 0   ? "ECN np"
			   : strcmp(check, "roce_ecn_rp") == 0 ? "ECN rp"
							       : "PFC";
	if (v)
		snprintf(out, n, "%s on priority %s", what, a);
	else
		snprintf(out, n, "%s off", what);
}

static int nic_pfc(const struct nic *n)
{
	return n->pfc;
}

static int nic_ecn_np(const struct nic *n)
{
	return n->ecn_np;
}

static int nic_ecn_rp(const struct nic *n)
{
	return n->ecn_rp;
}

/* One setting of the node's RoCE interfaces: its figure where they all
 * have it alike (cluster.c holds it to the peers'), a failure naming them
 * where they differ. */
static void roce_alike(struct vcheck *c, const struct node_inventory *inv,
		       int (*get)(const struct nic *), const char *what)
{
	int roce = 0, said = 0, first = -1;
	bool differ = false;
	for (int i = 0; i < inv->nnics; i++) {
		const struct nic *n = &inv->nics[i];
		if (!node_nic_is_roce(n))
			continue;
		roce++;
		int v = get(n);
		if (v < 0)
			continue;
		char t[64];
		validate__qos_text(c->name, v, t, sizeof(t));
		add(c->detail, sizeof(c->detail), "%s%s (%s) %s", said ? "; " : "", n->name,
		    n->rdma, t);
		said++;
		differ |= first >= 0 && v != first;
		if (first < 0)
			first = v;
	}
	if (!roce || !said) {
		c->verdict = V_SKIP;
		if (!roce)
			snprintf(c->detail, sizeof(c->detail), "skipped: no RoCE interface");
		else
			snprintf(c->detail, sizeof(c->detail),
				 "skipped: the driver of %d RoCE interface%s says no %s", roce,
				 roce == 1 ? "" : "s", what);
		return;
	}
	c->figure = first;
	if (differ) {
		c->verdict = V_FAIL;
		char was[sizeof(c->detail)];
		snprintf(was, sizeof(was), "%s", c->detail);
		snprintf(c->detail, sizeof(c->detail), "unlike on one node: %.200s", was);
	}
}

void validate__check_roce_pfc(struct vcheck *c, const struct node_inventory *inv)
{
	validate__vcheck_set(c, "network", "roce_pfc", "bits", false);
	roce_alike(c, inv, nic_pfc, "PFC (no DCB)");
}

void validate__check_roce_ecn(struct vcheck *np, struct vcheck *rp,
			      const struct node_inventory *inv)
{
	validate__vcheck_set(np, "network", "roce_ecn_np", "bits", false);
	roce_alike(np, inv, nic_ecn_np, "ECN (no ecn/ folder)");
	validate__vcheck_set(rp, "network", "roce_ecn_rp", "bits", false);
	roce_alike(rp, inv, nic_ecn_rp, "ECN (no ecn/ folder)");
}

int validate__peer_route(char *ifname, size_t n, char *addr, size_t an)
{
	const char *to = getenv("MASTER_ADDR");
	return route_to(to && *to ? to : "192.0.2.1", ifname, n, addr, an);
}

void validate__net_counters(const char *ifname, struct vnet_counters *c)
{
	memset(c, 0, sizeof(*c));
	char *text = NULL;
	if (!ifname || !*ifname || tk_read_file("/proc/net/dev", 1 << 20, &text, NULL) < 0)
		return;
	validate__net_dev_parse(text, ifname, c);
	free(text);
}

void validate__net_dev_parse(char *text, const char *ifname, struct vnet_counters *c)
{
	memset(c, 0, sizeof(*c));
	/* "  eth0: rx bytes packets errs drop fifo frame compressed multicast
	 * tx bytes packets errs drop ..." */
	size_t il = strlen(ifname);
	for (char *line = text; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next = '\0';
		char *p = line;
		while (*p == ' ')
			p++;
		if (strncmp(p, ifname, il) == 0 && p[il] == ':') {
			long long v[16] = {0};
			int got = sscanf(
				p + il + 1,
				"%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld",
				&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8],
				&v[9], &v[10], &v[11]);
			if (got == 12) {
				c->dev = true;
				c->packets = v[1] + v[9];
				c->faults = v[2] + v[3] + v[10] + v[11];
			}
			break;
		}
		line = next ? next + 1 : NULL;
	}
}

void validate__check_tcp_retransmits(struct vcheck *c, const double *pct, const double *resent,
				     const char *const *peer, int n, int me)
{
	validate__vcheck_set(c, "interconnect", "tcp_retransmits", "%", false);
	int k = 0, worst = -1;
	for (int i = 0; i < n; i++) {
		if (i == me || pct[i] < 0)
			continue;
		k++;
		if (worst < 0 || pct[i] > pct[worst])
			worst = i;
	}
	if (!k) {
		c->verdict = V_SKIP;
		snprintf(c->detail, sizeof(c->detail), "skipped: no pair over TCP measured");
		return;
	}
	/* the lower median of its pairs (those measured: 0% counts): one bad
	 * link (the peer's) does not sink this end, every link bad does */
	c->figure = validate__vpair_median(pct, n, me, -1, false);
	validate__vcheck_judge(c, 0.1, "0.1% of segments sent");
	/* judged as lossy: the links over the rule that lost more than one
	 * burst; the verdict, their lower median as for the figure */
	double *lossy = xcalloc((size_t)n + 1, sizeof(double));
	int bursts = 0;
	for (int i = 0; i < n; i++) {
		lossy[i] = pct[i];
		if (i != me && pct[i] > 0.1 && resent[i] < VRESENT_MIN) {
			lossy[i] = 0;
			bursts++;
		}
	}
	bool one_burst =
		c->verdict == V_FAIL && validate__vpair_median(lossy, n, me, -1, false) <= 0.1;
	free(lossy);
	if (one_burst)
		c->verdict = V_PASS;
	snprintf(c->detail, sizeof(c->detail),
		 "segments sent again to its peers (the lower median of %d); the most: %.3g%% to "
		 "%s (%.0f)",
		 k, pct[worst], peer[worst], resent[worst]);
	for (int i = 0, shown = 0; i < n && shown < 8; i++)
		if (i != me && pct[i] >= 0 && i != worst)
			add(c->detail, sizeof(c->detail), "%s %.3g%% to %s (%.0f)",
			    shown++ ? "," : ";", pct[i], peer[i], resent[i]);
	if (one_burst)
		add(c->detail, sizeof(c->detail),
		    "; passed: %d of the links over the rule sent fewer than %d segments again, "
		    "one "
		    "burst lost (a queue that overflowed once), too few in a run this short to "
		    "call "
		    "them lossy",
		    bursts, VRESENT_MIN);
}

void validate__check_net_errors(struct vcheck *c, const char *ifname,
				const struct vnet_counters *before,
				const struct vnet_counters *after)
{
	validate__vcheck_set(c, "interconnect", "net_errors", "%", false);
	int64_t packets = after->packets - before->packets;
	int64_t faults = after->faults - before->faults;
	if (!before->dev || !after->dev || packets < 1000) {
		c->verdict = V_SKIP;
		snprintf(c->detail, sizeof(c->detail),
			 "skipped: %s: %lld packets, too few to judge", ifname, (long long)packets);
		return;
	}
	c->figure = 100.0 * (double)faults / (double)packets;
	validate__vcheck_judge(c, 0.1, "0.1% of packets");
	snprintf(c->detail, sizeof(c->detail), "%s: %lld errors and drops in %lld packets", ifname,
		 (long long)faults, (long long)packets);
}
