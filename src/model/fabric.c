/*
 * A node's fabric as its agent reads it from sysfs (agent nic.c): its
 * network interfaces and its RDMA devices' ports, in its inventory, so that
 * the server shows them (tenk nodes NAME, GET /v1/nodes) and keeps them,
 * and as tenk validate's network layer reads it.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- reading sysfs ------------------------------------------------------------------- */

bool model_sysfs_line(const char *path, char *buf, size_t n)
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

bool model_sysfs_num(const char *path, double *ret)
{
	char buf[64], *end;
	if (!model_sysfs_line(path, buf, sizeof(buf)))
		return false;
	double v = strtod(buf, &end);
	if (end == buf)
		return false;
	*ret = v;
	return true;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char **model_sysfs_list(const char *dir, size_t *ret_n)
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

void model_sysfs_list_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* ---- the fabric ---------------------------------------------------------------------- */

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
	return model_sysfs_num(path, &v) ? (int)v : def;
}

void node_fabric_read(struct node_inventory *inv, const char *sys)
{
	_cleanup_free_ char *dir = xasprintf("%s/class/net", sys);
	size_t n;
	char **names = model_sysfs_list(dir, &n);
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
		c->up = model_sysfs_line(path, text, sizeof(text)) && strcmp(text, "up") == 0;
		double v;
		snprintf(path, sizeof(path), "%s/%s/speed", dir, names[i]);
		c->speed_mbps = model_sysfs_num(path, &v) && v >= 0 ? (int64_t)v : -1;
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
		char **ib = model_sysfs_list(path, &nib);
		if (nib)
			set_str(c->rdma, sizeof(c->rdma), ib[0]);
		model_sysfs_list_free(ib, nib);
	}
	model_sysfs_list_free(names, n);

	_cleanup_free_ char *ibdir = xasprintf("%s/class/infiniband", sys);
	char **devs = model_sysfs_list(ibdir, &n);
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
		char **ports = model_sysfs_list(pdir, &nport);
		for (size_t p = 0; p < nport && inv->nrdma < MODEL_MAX_RDMA_PORTS; p++) {
			struct rdma_port *r = &inv->rdma[inv->nrdma++];
			memset(r, 0, sizeof(*r));
			snprintf(r->dev, sizeof(r->dev), "%s", devs[d]);
			r->port = atoi(ports[p]);
			set_str(r->pci, sizeof(r->pci), pci);
			r->numa = numa;
			snprintf(path, sizeof(path), "%s/%s/link_layer", pdir, ports[p]);
			r->ethernet = model_sysfs_line(path, text, sizeof(text)) &&
				      strcmp(text, "Ethernet") == 0;
			snprintf(path, sizeof(path), "%s/%s/state", pdir, ports[p]);
			if (model_sysfs_line(path, text, sizeof(text))) { /* "4: ACTIVE" */
				const char *colon = strchr(text, ':');
				const char *st = colon ? colon + 1 + strspn(colon + 1, " ") : text;
				set_str(r->state, sizeof(r->state), st);
				r->active = strcmp(st, "ACTIVE") == 0;
			}
			snprintf(path, sizeof(path), "%s/%s/rate", pdir, ports[p]);
			if (model_sysfs_line(path, text, sizeof(text))) /* "200 Gb/sec (4X HDR)" */
				r->rate_gbps = strtod(text, NULL);
			snprintf(path, sizeof(path), "%s/%s/gids", pdir, ports[p]);
			size_t ngid;
			char **gids = model_sysfs_list(path, &ngid);
			r->gids = (int)ngid;
			model_sysfs_list_free(gids, ngid);
		}
		model_sysfs_list_free(ports, nport);
	}
	model_sysfs_list_free(devs, n);
}

static const char *const nic_kinds[NIC_KIND_MAX] = {"ethernet", "infiniband", "other"};

const char *node_nic_kind_name(enum nic_kind k)
{
	return (unsigned)k < NIC_KIND_MAX ? nic_kinds[k] : "other";
}

json_t *node_network_pack(const struct node_inventory *inv)
{
	if (!inv->nnics && !inv->nrdma)
		return NULL;
	json_t *ifs = json_array(), *ports = json_array();
	for (int i = 0; i < inv->nnics; i++) {
		const struct nic *n = &inv->nics[i];
		json_t *o = json_pack("{s:s, s:s, s:b, s:b, s:i}", "name", n->name, "kind",
				      node_nic_kind_name(n->kind), "virtual", n->virt, "up", n->up,
				      "mtu", n->mtu);
		if (n->speed_mbps >= 0)
			json_object_set_new(o, "speed_mbps", json_integer(n->speed_mbps));
		if (n->driver[0])
			json_object_set_new(o, "driver", json_string(n->driver));
		if (n->pci[0])
			json_object_set_new(o, "pci", json_string(n->pci));
		if (n->numa >= 0)
			json_object_set_new(o, "numa", json_integer(n->numa));
		if (n->rdma[0])
			json_object_set_new(o, "rdma", json_string(n->rdma));
		json_array_append_new(ifs, o);
	}
	for (int i = 0; i < inv->nrdma; i++) {
		const struct rdma_port *p = &inv->rdma[i];
		json_t *o = json_pack(
			"{s:s, s:i, s:s, s:s, s:b, s:f, s:i}", "device", p->dev, "port", p->port,
			"link_layer", p->ethernet ? "Ethernet" : "InfiniBand", "state", p->state,
			"active", p->active, "rate_gbps", p->rate_gbps, "gids", p->gids);
		if (p->pci[0])
			json_object_set_new(o, "pci", json_string(p->pci));
		if (p->numa >= 0)
			json_object_set_new(o, "numa", json_integer(p->numa));
		json_array_append_new(ports, o);
	}
	return json_pack("{s:o, s:o}", "interfaces", ifs, "rdma", ports);
}

static int nic_unpack(json_t *j, struct nic *n, struct tk_error *err)
{
	static const char *const keys[] = {"name",   "kind", "virtual", "up",	"mtu", "speed_mbps",
					   "driver", "pci",  "numa",	"rdma", NULL};
	char kind[16] = "";
	int64_t mtu, speed, numa;
	int r;
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(j, "name", true, true, n->name, sizeof(n->name), err)) < 0 ||
	    (r = mj_strbuf(j, "kind", true, true, kind, sizeof(kind), err)) < 0 ||
	    (r = mj_bool(j, "virtual", false, false, &n->virt, err)) < 0 ||
	    (r = mj_bool(j, "up", false, false, &n->up, err)) < 0 ||
	    (r = mj_int(j, "mtu", false, 0, 1 << 20, 0, &mtu, err)) < 0 ||
	    (r = mj_int(j, "speed_mbps", false, -1, INT64_MAX / 2, -1, &speed, err)) < 0 ||
	    (r = mj_strbuf(j, "driver", false, true, n->driver, sizeof(n->driver), err)) < 0 ||
	    (r = mj_strbuf(j, "pci", false, true, n->pci, sizeof(n->pci), err)) < 0 ||
	    (r = mj_int(j, "numa", false, -1, 4096, -1, &numa, err)) < 0 ||
	    (r = mj_strbuf(j, "rdma", false, true, n->rdma, sizeof(n->rdma), err)) < 0)
		return r;
	n->kind = NIC_OTHER; /* a newer agent's kind */
	for (int k = 0; k < NIC_KIND_MAX; k++)
		if (strcmp(kind, nic_kinds[k]) == 0)
			n->kind = (enum nic_kind)k;
	n->mtu = (int)mtu;
	n->speed_mbps = speed;
	n->numa = (int)numa;
	return 0;
}

static int port_unpack(json_t *j, struct rdma_port *p, struct tk_error *err)
{
	static const char *const keys[] = {"device",	"port", "link_layer", "state", "active",
					   "rate_gbps", "gids", "pci",	      "numa",  NULL};
	char layer[16] = "";
	int64_t port, gids, numa;
	double rate;
	int r;
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(j, "device", true, true, p->dev, sizeof(p->dev), err)) < 0 ||
	    (r = mj_int(j, "port", true, 0, 255, 0, &port, err)) < 0 ||
	    (r = mj_strbuf(j, "link_layer", false, true, layer, sizeof(layer), err)) < 0 ||
	    (r = mj_strbuf(j, "state", false, true, p->state, sizeof(p->state), err)) < 0 ||
	    (r = mj_bool(j, "active", false, false, &p->active, err)) < 0 ||
	    (r = mj_num(j, "rate_gbps", false, 0, 1e6, 0, &rate, err)) < 0 ||
	    (r = mj_int(j, "gids", false, 0, 1 << 20, 0, &gids, err)) < 0 ||
	    (r = mj_strbuf(j, "pci", false, true, p->pci, sizeof(p->pci), err)) < 0 ||
	    (r = mj_int(j, "numa", false, -1, 4096, -1, &numa, err)) < 0)
		return r;
	p->port = (int)port;
	p->ethernet = strcmp(layer, "Ethernet") == 0;
	p->rate_gbps = rate;
	p->gids = (int)gids;
	p->numa = (int)numa;
	return 0;
}

int node_network_unpack(json_t *j, struct node_inventory *inv, struct tk_error *err)
{
	static const char *const keys[] = {"interfaces", "rdma", NULL};
	int r;
	inv->nnics = inv->nrdma = 0;
	if (!j)
		return 0;
	if ((r = mj_link_keys(j, "network", keys, err)) < 0)
		return r;
	json_t *ifs = json_object_get(j, "interfaces"), *ports = json_object_get(j, "rdma"), *x;
	if ((ifs && !json_is_array(ifs)) || (ports && !json_is_array(ports)))
		return tk_errorf(err, -EINVAL, "network: interfaces and rdma must be arrays");
	size_t i;
	/* more than fit: the first ones (sysfs' order, by name) */
	json_array_foreach (ifs, i, x) {
		if (i >= MODEL_MAX_NICS)
			break;
		if ((r = nic_unpack(x, &inv->nics[i], err)) < 0) {
			mj_prefix(err, "network.interfaces[%zu]", i);
			return r;
		}
		inv->nnics = (int)i + 1;
	}
	json_array_foreach (ports, i, x) {
		if (i >= MODEL_MAX_RDMA_PORTS)
			break;
		if ((r = port_unpack(x, &inv->rdma[i], err)) < 0) {
			mj_prefix(err, "network.rdma[%zu]", i);
			return r;
		}
		inv->nrdma = (int)i + 1;
	}
	return 0;
}

const char *node_fabric_of(const struct node_inventory *inv)
{
	bool roce = false;
	for (int i = 0; i < inv->nrdma; i++) {
		if (!inv->rdma[i].active)
			continue;
		if (!inv->rdma[i].ethernet)
			return "ib";
		roce = true;
	}
	return roce ? "roce" : NULL;
}
