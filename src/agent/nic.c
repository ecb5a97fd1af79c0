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
#include <unistd.h>

static const char *root(const char *env, const char *def)
{
	const char *v = getenv(env);
	return v && *v ? v : def;
}

/* The first line of a file (its newline gone); false when unreadable. */
static bool read_line(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool ok = fgets(buf, (int)n, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = 0;
	return ok;
}

/* A file holding one integer (sysfs' counters); false when unreadable or
 * not a number (a down link's speed reads EINVAL). */
static bool read_num(const char *path, double *ret)
{
	char buf[64], *end;
	if (!read_line(path, buf, sizeof(buf)))
		return false;
	double v = strtod(buf, &end);
	if (end == buf)
		return false;
	*ret = v;
	return true;
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

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in folder dir but "." and "..", sorted (caller frees). */
static char **list_dir(const char *dir, size_t *ret_n)
{
	char **names = NULL;
	size_t n = 0, alloc = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		xgrow(&names, &alloc, n + 1, sizeof(*names));
		names[n++] = xstrdup(e->d_name);
	}
	if (d)
		closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_name);
	*ret_n = n;
	return names;
}

static void free_list(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

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
	char **names = list_dir(dir, &n);
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
			if (read_num(path, &v))
				prom_sample(&f[N_ERRORS].sb, f[N_ERRORS].name, &ld, v);
			snprintf(path, sizeof(path), "%s/%s/statistics/%s_dropped", dir, names[i],
				 pre[k]);
			if (read_num(path, &v))
				prom_sample(&f[N_DROPS].sb, f[N_DROPS].name, &ld, v);
		}
		snprintf(path, sizeof(path), "%s/%s/carrier_changes", dir, names[i]);
		if (read_num(path, &v))
			prom_sample(&f[N_CARRIER].sb, f[N_CARRIER].name, &l, v);
		snprintf(path, sizeof(path), "%s/%s/operstate", dir, names[i]);
		if (read_line(path, state, sizeof(state)))
			prom_sample(&f[N_UP].sb, f[N_UP].name, &l, strcmp(state, "up") == 0);
		snprintf(path, sizeof(path), "%s/%s/speed", dir, names[i]);
		if (read_num(path, &v) && v > 0) /* Mb/s; -1: unknown */
			prom_sample(&f[N_SPEED].sb, f[N_SPEED].name, &l, v * 1e6 / 8);
		snprintf(path, sizeof(path), "%s/%s/mtu", dir, names[i]);
		if (read_num(path, &v))
			prom_sample(&f[N_MTU].sb, f[N_MTU].name, &l, v);
	}
	free_list(names, n);
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
	char **devs = list_dir(dir, &ndev);
	bool any = false;
	for (size_t d = 0; d < ndev; d++) {
		_cleanup_free_ char *pdir = xasprintf("%s/%s/ports", dir, devs[d]);
		size_t nport;
		char **ports = list_dir(pdir, &nport);
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
				if (read_num(path, &v))
					prom_sample(&f[i].sb, f[i].name, &l,
						    v * ib_counters[i].scale);
			}
			snprintf(path, sizeof(path), "%s/%s/link_layer", pdir, ports[p]);
			read_line(path, layer, sizeof(layer));
			snprintf(path, sizeof(path), "%s/%s/state", pdir, ports[p]);
			if (read_line(path, text, sizeof(text))) { /* "4: ACTIVE" */
				struct prom_labels ll = l;
				prom_label(&ll, "link_layer", layer);
				prom_sample(&f[NIB].sb, f[NIB].name, &ll,
					    strstr(text, "ACTIVE") != NULL);
			}
			snprintf(path, sizeof(path), "%s/%s/rate", pdir, ports[p]);
			if (read_line(path, text, sizeof(text)) && (v = strtod(text, NULL)) > 0)
				prom_sample(&f[NIB + 1].sb, f[NIB + 1].name, &l,
					    v * 1e9 / 8); /* "200 Gb/sec (4X HDR)" */
			any = true;
		}
		free_list(ports, nport);
	}
	free_list(devs, ndev);
	if (any) {
		fams_emit(b, f, NIB + 2);
	} else {
		for (size_t i = 0; i < NIB + 2; i++)
			strbuf_release(&f[i].sb);
	}
}

/* ---- the fabric, for the inventory ---------------------------------------------------- */

/* src into dst of n bytes, cut where it is longer (sysfs' names fit). */
static void set_str(char *dst, size_t n, const char *src)
{
	size_t l = strnlen(src, n - 1);
	memcpy(dst, src, l);
	dst[l] = 0;
}

/* The last part of the link at path ("../../bus/pci/drivers/mlx5_core":
 * "mlx5_core"); false when it is no link. */
static bool link_base(const char *path, char *buf, size_t n)
{
	char target[512];
	ssize_t len = readlink(path, target, sizeof(target) - 1);
	if (len <= 0)
		return false;
	target[len] = 0;
	const char *base = strrchr(target, '/');
	set_str(buf, n, base ? base + 1 : target);
	return true;
}

/* A PCI address ("0000:17:00.0"), as the device link of a PCI function ends. */
static bool pci_address(const char *s)
{
	unsigned dom, bus, dev, fn;
	char tail;
	return sscanf(s, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) == 4;
}

static int read_int(const char *path, int def)
{
	double v;
	return read_num(path, &v) ? (int)v : def;
}

void agent__fabric_detect(struct node_inventory *inv)
{
	const char *sys = root("TENK_SYSFS", "/sys");
	_cleanup_free_ char *dir = xasprintf("%s/class/net", sys);
	size_t n;
	char **names = list_dir(dir, &n);
	inv->nnics = 0;
	for (size_t i = 0; i < n && inv->nnics < MODEL_MAX_NICS; i++) {
		char path[700], text[64];
		snprintf(path, sizeof(path), "%s/%s/type", dir, names[i]);
		int type = read_int(path, -1);
		if (type == 772 || strlen(names[i]) >= MODEL_NIC_NAME_MAX)
			continue; /* loopback (ARPHRD_LOOPBACK) */
		struct nic *c = &inv->nics[inv->nnics++];
		memset(c, 0, sizeof(*c));
		snprintf(c->name, sizeof(c->name), "%s", names[i]);
		c->kind = type == 1 ? NIC_ETHERNET : type == 32 ? NIC_INFINIBAND : NIC_OTHER;
		snprintf(path, sizeof(path), "%s/%s/operstate", dir, names[i]);
		c->up = read_line(path, text, sizeof(text)) && strcmp(text, "up") == 0;
		double v;
		snprintf(path, sizeof(path), "%s/%s/speed", dir, names[i]);
		c->speed_mbps = read_num(path, &v) && v >= 0 ? (int64_t)v : -1;
		snprintf(path, sizeof(path), "%s/%s/mtu", dir, names[i]);
		c->mtu = read_int(path, 0);
		snprintf(path, sizeof(path), "%s/%s/device", dir, names[i]);
		char dev[64];
		c->virt = !link_base(path, dev, sizeof(dev));
		c->numa = -1;
		if (c->virt)
			continue;
		if (pci_address(dev))
			set_str(c->pci, sizeof(c->pci), dev);
		snprintf(path, sizeof(path), "%s/%s/device/driver", dir, names[i]);
		link_base(path, c->driver, sizeof(c->driver));
		snprintf(path, sizeof(path), "%s/%s/device/numa_node", dir, names[i]);
		c->numa = read_int(path, -1);
		/* the RDMA device on the same function (RoCE, IPoIB) */
		snprintf(path, sizeof(path), "%s/%s/device/infiniband", dir, names[i]);
		size_t nib;
		char **ib = list_dir(path, &nib);
		if (nib)
			set_str(c->rdma, sizeof(c->rdma), ib[0]);
		free_list(ib, nib);
	}
	free_list(names, n);

	_cleanup_free_ char *ibdir = xasprintf("%s/class/infiniband", sys);
	char **devs = list_dir(ibdir, &n);
	inv->nrdma = 0;
	for (size_t d = 0; d < n; d++) {
		if (strlen(devs[d]) >= MODEL_NIC_NAME_MAX)
			continue;
		char path[700], text[128], pci[64] = "";
		snprintf(path, sizeof(path), "%s/%s/device", ibdir, devs[d]);
		if (!link_base(path, pci, sizeof(pci)) || !pci_address(pci))
			pci[0] = 0;
		snprintf(path, sizeof(path), "%s/%s/device/numa_node", ibdir, devs[d]);
		int numa = read_int(path, -1);
		_cleanup_free_ char *pdir = xasprintf("%s/%s/ports", ibdir, devs[d]);
		size_t nport;
		char **ports = list_dir(pdir, &nport);
		for (size_t p = 0; p < nport && inv->nrdma < MODEL_MAX_RDMA_PORTS; p++) {
			struct rdma_port *r = &inv->rdma[inv->nrdma++];
			memset(r, 0, sizeof(*r));
			snprintf(r->dev, sizeof(r->dev), "%s", devs[d]);
			r->port = atoi(ports[p]);
			set_str(r->pci, sizeof(r->pci), pci);
			r->numa = numa;
			snprintf(path, sizeof(path), "%s/%s/link_layer", pdir, ports[p]);
			r->ethernet = read_line(path, text, sizeof(text)) &&
				      strcmp(text, "Ethernet") == 0;
			snprintf(path, sizeof(path), "%s/%s/state", pdir, ports[p]);
			if (read_line(path, text, sizeof(text))) { /* "4: ACTIVE" */
				const char *colon = strchr(text, ':');
				const char *st = colon ? colon + 1 + strspn(colon + 1, " ") : text;
				set_str(r->state, sizeof(r->state), st);
				r->active = strcmp(st, "ACTIVE") == 0;
			}
			snprintf(path, sizeof(path), "%s/%s/rate", pdir, ports[p]);
			if (read_line(path, text, sizeof(text))) /* "200 Gb/sec (4X HDR)" */
				r->rate_gbps = strtod(text, NULL);
			snprintf(path, sizeof(path), "%s/%s/gids", pdir, ports[p]);
			size_t ngid;
			char **gids = list_dir(path, &ngid);
			r->gids = (int)ngid;
			free_list(gids, ngid);
		}
		free_list(ports, nport);
	}
	free_list(devs, n);
}

void agent__nic_metrics(struct agent *a, struct strbuf *b)
{
	const char *sys = root("TENK_SYSFS", "/sys"), *proc = root("TENK_PROCFS", "/proc");
	interfaces(a, b, sys);
	tcp(a, b, proc);
	infiniband(a, b, sys);
}
