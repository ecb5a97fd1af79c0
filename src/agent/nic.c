/*
 * The node's network, for /metrics: each interface's errors, drops,
 * carrier changes, state, speed and MTU (sysfs), the TCP segments sent and
 * retransmitted (/proc/net/snmp: an alert takes their rates' ratio), and
 * every InfiniBand port's error and data counters where
 * /sys/class/infiniband has them. Nothing here needs root or a tool.
 *
 * sysfs and procfs are read where TENK_SYSFS and TENK_PROCFS say (default
 * /sys and /proc): an agent in a container reads the host's mounted
 * elsewhere, and the tests read recorded trees.
 */
#include "internal.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *root(const char *env, const char *def)
{
	const char *v = getenv(env);
	return v && *v ? v : def;
}

/* Families gathered side by side, emitted each under its own head. */
struct fam {
	const char *name, *type, *help;
	struct strbuf sb;
};

static void fams_emit(struct strbuf *b, struct fam *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		prom_family(b, f[i].name, f[i].type, f[i].help);
		strbuf_add(b, f[i].sb.buf, f[i].sb.len);
		strbuf_release(&f[i].sb);
	}
}

enum {
	N_ERRORS,
	N_DROPS,
	N_CARRIER,
	N_UP,
	N_SPEED,
	N_MTU,
	N_MAX,
};

static void interfaces(struct agent *a, struct strbuf *b, const char *sys)
{
	struct fam f[N_MAX] = {
		[N_ERRORS] = {"tenk_node_network_errors_total", "counter",
			      "Errors on each network interface, by direction (sysfs rx_errors, "
			      "tx_errors)."},
		[N_DROPS] = {"tenk_node_network_drops_total", "counter",
			     "Packets each network interface dropped, by direction."},
		[N_CARRIER] = {"tenk_node_network_carrier_changes_total", "counter",
			       "Times each network interface's link went up or down."},
		[N_UP] = {"tenk_node_network_up", "gauge",
			  "1 when the interface's operational state is up."},
		[N_SPEED] = {"tenk_node_network_speed_bytes_per_second", "gauge",
			     "Each network interface's link speed (absent where it reports none)."},
		[N_MTU] = {"tenk_node_network_mtu_bytes", "gauge", "Each network interface's MTU."},
	};
	for (int i = 0; i < N_MAX; i++)
		strbuf_init(&f[i].sb);
	_cleanup_free_ char *dir = xasprintf("%s/class/net", sys);
	size_t n;
	char **names = model_sysfs_list(dir, &n);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(names[i], "lo") == 0)
			continue;
		char path[600], state[32];
		double v;
		struct prom_labels l;
		prom_labels_init(&l);
		prom_label(&l, "node", a->inv.name);
		prom_label(&l, "device", names[i]);
		static const char *const dirs[2] = {"receive", "transmit"};
		static const char *const pre[2] = {"rx", "tx"};
		for (int k = 0; k < 2; k++) {
			struct prom_labels ld = l;
			prom_label(&ld, "direction", dirs[k]);
			snprintf(path, sizeof(path), "%s/%s/statistics/%s_errors", dir, names[i],
				 pre[k]);
			if (model_sysfs_num(path, &v))
				prom_sample(&f[N_ERRORS].sb, f[N_ERRORS].name, &ld, v);
			snprintf(path, sizeof(path), "%s/%s/statistics/%s_dropped", dir, names[i],
				 pre[k]);
			if (model_sysfs_num(path, &v))
				prom_sample(&f[N_DROPS].sb, f[N_DROPS].name, &ld, v);
		}
		snprintf(path, sizeof(path), "%s/%s/carrier_changes", dir, names[i]);
		if (model_sysfs_num(path, &v))
			prom_sample(&f[N_CARRIER].sb, f[N_CARRIER].name, &l, v);
		snprintf(path, sizeof(path), "%s/%s/operstate", dir, names[i]);
		if (model_sysfs_line(path, state, sizeof(state)))
			prom_sample(&f[N_UP].sb, f[N_UP].name, &l, strcmp(state, "up") == 0);
		snprintf(path, sizeof(path), "%s/%s/speed", dir, names[i]);
		if (model_sysfs_num(path, &v) && v > 0) /* Mb/s; -1: unknown */
			prom_sample(&f[N_SPEED].sb, f[N_SPEED].name, &l, v * 1e6 / 8);
		snprintf(path, sizeof(path), "%s/%s/mtu", dir, names[i]);
		if (model_sysfs_num(path, &v))
			prom_sample(&f[N_MTU].sb, f[N_MTU].name, &l, v);
	}
	model_sysfs_list_free(names, n);
	fams_emit(b, f, N_MAX);
}

/* /proc/net/snmp's Tcp lines: a line of names, then one of values. */
static void tcp(struct agent *a, struct strbuf *b, const char *proc)
{
	_cleanup_free_ char *path = xasprintf("%s/net/snmp", proc);
	FILE *fp = fopen(path, "re");
	char names[1024] = "", values[1024] = "", line[1024];
	while (fp && fgets(line, sizeof(line), fp)) {
		if (strncmp(line, "Tcp:", 4) != 0)
			continue;
		if (!names[0])
			snprintf(names, sizeof(names), "%s", line);
		else
			snprintf(values, sizeof(values), "%s", line);
	}
	if (fp)
		fclose(fp);
	double out = -1, retrans = -1;
	char *sn = NULL, *sv = NULL;
	for (char *n = strtok_r(names, " \n", &sn), *v = strtok_r(values, " \n", &sv); n && v;
	     n = strtok_r(NULL, " \n", &sn), v = strtok_r(NULL, " \n", &sv)) {
		if (strcmp(n, "OutSegs") == 0)
			out = strtod(v, NULL);
		else if (strcmp(n, "RetransSegs") == 0)
			retrans = strtod(v, NULL);
	}
	if (out < 0 || retrans < 0)
		return;
	struct prom_labels l;
	prom_labels_init(&l);
	prom_label(&l, "node", a->inv.name);
	prom_family(b, "tenk_node_tcp_segments_sent_total", "counter",
		    "TCP segments the node sent (OutSegs of /proc/net/snmp).");
	prom_sample(b, "tenk_node_tcp_segments_sent_total", &l, out);
	prom_family(b, "tenk_node_tcp_retransmitted_segments_total", "counter",
		    "TCP segments the node sent again (RetransSegs); over OutSegs' rate, the "
		    "share retransmitted.");
	prom_sample(b, "tenk_node_tcp_retransmitted_segments_total", &l, retrans);
}

/* Each InfiniBand (or RoCE) port's counters, by their sysfs names. */
static const struct {
	const char *file, *metric, *help;
	double scale; /* the data counters count 4-byte words */
} ib_counters[] = {
	{"symbol_error", "tenk_node_ib_symbol_errors_total", "Symbol errors on each port.", 1},
	{"link_downed", "tenk_node_ib_link_downed_total",
	 "Times each port's link went down (it failed to recover).", 1},
	{"port_rcv_errors", "tenk_node_ib_receive_errors_total",
	 "Packets with errors each port received.", 1},
	{"excessive_buffer_overrun_errors", "tenk_node_ib_buffer_overruns_total",
	 "Excessive buffer overruns on each port.", 1},
	{"port_xmit_data", "tenk_node_ib_transmit_bytes_total", "Bytes each port sent.", 4},
	{"port_rcv_data", "tenk_node_ib_receive_bytes_total", "Bytes each port received.", 4},
	{"port_xmit_packets", "tenk_node_ib_transmit_packets_total", "Packets each port sent.", 1},
	{"port_rcv_packets", "tenk_node_ib_receive_packets_total", "Packets each port received.",
	 1},
};
#define NIB ARRAY_SIZE(ib_counters)

static void infiniband(struct agent *a, struct strbuf *b, const char *sys)
{
	struct fam f[NIB + 2];
	for (size_t i = 0; i < NIB; i++) {
		f[i].name = ib_counters[i].metric;
		f[i].type = "counter";
		f[i].help = ib_counters[i].help;
	}
	f[NIB].name = "tenk_node_ib_port_active";
	f[NIB].type = "gauge";
	f[NIB].help = "1 when the port's state is ACTIVE; its link layer (InfiniBand, Ethernet "
		      "for RoCE) a label.";
	f[NIB + 1].name = "tenk_node_ib_port_rate_bytes_per_second";
	f[NIB + 1].type = "gauge";
	f[NIB + 1].help = "Each port's rate.";
	for (size_t i = 0; i < NIB + 2; i++)
		strbuf_init(&f[i].sb);
	_cleanup_free_ char *dir = xasprintf("%s/class/infiniband", sys);
	size_t ndev;
	char **devs = model_sysfs_list(dir, &ndev);
	bool any = false;
	for (size_t d = 0; d < ndev; d++) {
		_cleanup_free_ char *pdir = xasprintf("%s/%s/ports", dir, devs[d]);
		size_t nport;
		char **ports = model_sysfs_list(pdir, &nport);
		for (size_t p = 0; p < nport; p++) {
			char path[700], text[128], layer[32] = "";
			double v;
			struct prom_labels l;
			prom_labels_init(&l);
			prom_label(&l, "node", a->inv.name);
			prom_label(&l, "device", devs[d]);
			prom_label(&l, "port", ports[p]);
			for (size_t i = 0; i < NIB; i++) {
				snprintf(path, sizeof(path), "%s/%s/counters/%s", pdir, ports[p],
					 ib_counters[i].file);
				if (model_sysfs_num(path, &v))
					prom_sample(&f[i].sb, f[i].name, &l,
						    v * ib_counters[i].scale);
			}
			snprintf(path, sizeof(path), "%s/%s/link_layer", pdir, ports[p]);
			model_sysfs_line(path, layer, sizeof(layer));
			snprintf(path, sizeof(path), "%s/%s/state", pdir, ports[p]);
			if (model_sysfs_line(path, text, sizeof(text))) { /* "4: ACTIVE" */
				struct prom_labels ll = l;
				prom_label(&ll, "link_layer", layer);
				prom_sample(&f[NIB].sb, f[NIB].name, &ll,
					    strstr(text, "ACTIVE") != NULL);
			}
			snprintf(path, sizeof(path), "%s/%s/rate", pdir, ports[p]);
			if (model_sysfs_line(path, text, sizeof(text)) &&
			    (v = strtod(text, NULL)) > 0)
				prom_sample(&f[NIB + 1].sb, f[NIB + 1].name, &l,
					    v * 1e9 / 8); /* "200 Gb/sec (4X HDR)" */
			any = true;
		}
		model_sysfs_list_free(ports, nport);
	}
	model_sysfs_list_free(devs, ndev);
	if (any) {
		fams_emit(b, f, NIB + 2);
	} else {
		for (size_t i = 0; i < NIB + 2; i++)
			strbuf_release(&f[i].sb);
	}
}

/* Marks the CPUs of a cpulist ("0-55,112-167") as of NUMA node `node`. */
static void mark_cpus(struct agent *a, const char *list, int node)
{
	const char *p = list;
	while (*p) {
		char *end;
		long lo = strtol(p, &end, 10), hi = lo;
		if (end == p)
			return;
		if (*end == '-') {
			p = end + 1;
			hi = strtol(p, &end, 10);
			if (end == p)
				return;
		}
		for (int i = 0; i < a->ncpus; i++)
			if (a->cpu_id[i] >= lo && a->cpu_id[i] <= hi)
				a->cpu_numa[i] = node;
		p = *end == ',' ? end + 1 : end;
		if (*end != ',')
			return;
	}
}

void agent__cpu_numa_detect(struct agent *a)
{
	for (int i = 0; i < a->ncpus; i++)
		a->cpu_numa[i] = -1;
	_cleanup_free_ char *dir = xasprintf("%s/devices/system/node", root("TENK_SYSFS", "/sys"));
	size_t n;
	char **names = model_sysfs_list(dir, &n);
	for (size_t k = 0; k < n; k++) {
		char *end;
		if (strncmp(names[k], "node", 4) != 0)
			continue;
		long node = strtol(names[k] + 4, &end, 10);
		if (end == names[k] + 4 || *end || node < 0 || node > 63)
			continue;
		char path[600], list[4096];
		snprintf(path, sizeof(path), "%s/%s/cpulist", dir, names[k]);
		if (model_sysfs_line(path, list, sizeof(list)))
			mark_cpus(a, list, (int)node);
	}
	model_sysfs_list_free(names, n);
}

void agent__fabric_detect(struct node_inventory *inv)
{
	const char *sys = root("TENK_SYSFS", "/sys");
	node_fabric_read(inv, sys);
	if (strcmp(sys, "/sys") == 0) /* a recorded tree is not this machine's */
		node_roce_pfc_read(inv);
}

/* The pause frames of each priority with PFC on, at each RoCE interface,
 * as the kernel's DCB netlink counts them: growing on one node more than
 * its peers, a congested port or a slow receiver that backs the fabric up. */
static void pfc(struct agent *a, struct strbuf *b)
{
	struct fam f = {.name = "tenk_node_pfc_pause_frames_total",
			.type = "counter",
			.help = "PFC pause frames of each priority with PFC on, at each RoCE "
				"interface (the kernel's DCB netlink): sent, asking the peer to "
				"wait; received, asked to."};
	strbuf_init(&f.sb);
	for (int i = 0; i < a->inv.nnics; i++) {
		const struct nic *c = &a->inv.nics[i];
		struct node_pfc p;
		if (!node_nic_is_roce(c) || node_pfc_read(c->name, &p) < 0)
			continue;
		for (int k = 0; k < 8; k++) {
			if (!(p.en & 1 << k))
				continue;
			struct prom_labels l;
			prom_labels_init(&l);
			prom_label(&l, "node", a->inv.name);
			prom_label(&l, "device", c->name);
			prom_labelf(&l, "priority", "%d", k);
			struct prom_labels sent = l, got = l;
			prom_label(&sent, "direction", "sent");
			prom_label(&got, "direction", "received");
			prom_sample(&f.sb, f.name, &sent, (double)p.requests[k]);
			prom_sample(&f.sb, f.name, &got, (double)p.indications[k]);
		}
	}
	if (f.sb.len)
		fams_emit(b, &f, 1);
	else
		strbuf_release(&f.sb);
}

void agent__nic_metrics(struct agent *a, struct strbuf *b)
{
	const char *sys = root("TENK_SYSFS", "/sys"), *proc = root("TENK_PROCFS", "/proc");
	interfaces(a, b, sys);
	tcp(a, b, proc);
	infiniband(a, b, sys);
	if (strcmp(sys, "/sys") == 0) /* a recorded tree is not this machine's */
		pfc(a, b);
}
