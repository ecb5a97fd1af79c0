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
#include <sys/stat.h>
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

/* The priorities whose file DIR/IF/ecn/POINT/enable/K says 1 (MLNX_OFED's
 * and DOCA's mlx5 make them, priorities 0 to 7); -1 where none exists. */
static int ecn_bits(const char *dir, const char *ifname, const char *point)
{
	int bits = -1;
	for (int k = 0; k < 8; k++) {
		char path[700];
		snprintf(path, sizeof(path), "%s/%s/ecn/%s/enable/%d", dir, ifname, point, k);
		int v = read_int(path, -1);
		if (v >= 0)
			bits = (bits < 0 ? 0 : bits) | (v ? 1 << k : 0);
	}
	return bits;
}

bool node_nic_is_roce(const struct nic *n)
{
	return n->kind == NIC_ETHERNET && !n->virt && n->rdma[0];
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
		c->pfc = c->ecn_np = c->ecn_rp = -1;
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
		if (node_nic_is_roce(c)) {
			c->ecn_np = ecn_bits(dir, c->name, "roce_np");
			c->ecn_rp = ecn_bits(dir, c->name, "roce_rp");
		}
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
	node_gpu_places_read(inv, sys);
}

/* ---- accelerators and their nearest RDMA port ------------------------------------------- */

struct pci_fn {
	char addr[MODEL_NIC_NAME_MAX];
	char *path; /* under sys/devices, resolved */
};

static int cmp_fn(const void *a, const void *b)
{
	return strcmp(((const struct pci_fn *)a)->addr, ((const struct pci_fn *)b)->addr);
}

/* NVIDIA's display and 3D controllers under dir (the root complexes'
 * "pci*" and PCI functions only, depth bounded), into *fns. */
static void find_gpus(const char *dir, int depth, struct pci_fn **fns, size_t *n, size_t *alloc)
{
	size_t k;
	char **names = model_sysfs_list(dir, &k);
	for (size_t i = 0; i < k; i++) {
		bool root = depth == 0 && strncmp(names[i], "pci", 3) == 0;
		if (!root && !pci_address(names[i]))
			continue;
		char path[1024], text[32];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		struct stat st;
		if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		double vendor, cls;
		char vp[1100], cp[1100];
		snprintf(vp, sizeof(vp), "%s/vendor", path);
		snprintf(cp, sizeof(cp), "%s/class", path);
		if (!root && model_sysfs_line(vp, text, sizeof(text)) &&
		    (vendor = strtod(text, NULL)) == 0x10de && model_sysfs_num(cp, &cls) &&
		    ((int)cls >> 16) == 0x03 && *n < MODEL_MAX_ACCELS * 4) {
			xgrow(fns, alloc, *n + 1, sizeof(**fns));
			set_str((*fns)[*n].addr, sizeof((*fns)[*n].addr), names[i]);
			(*fns)[*n].path = realpath(path, NULL);
			if ((*fns)[*n].path)
				(*n)++;
		}
		if (depth < 8)
			find_gpus(path, depth + 1, fns, n, alloc);
	}
	model_sysfs_list_free(names, k);
}

/* The PCI bridges two functions' paths share ("/sys/devices/pci0000:15/
 * 0000:15:01.0/0000:16:00.0/..."): -1 on different root complexes. */
static int shared_bridges(const char *a, const char *b)
{
	const char *pa = strstr(a, "/devices/"), *pb = strstr(b, "/devices/");
	if (!pa || !pb)
		return -1;
	pa += 9, pb += 9;
	int depth = -1; /* the root complex is no bridge */
	for (;;) {
		size_t la = strcspn(pa, "/"), lb = strcspn(pb, "/");
		if (la != lb || strncmp(pa, pb, la) != 0 || !pa[la] || !pb[lb])
			return depth;
		depth++;
		pa += la + 1, pb += lb + 1;
	}
}

void node_gpu_places_read(struct node_inventory *inv, const char *sys)
{
	inv->ngpu_places = 0;
	if (!inv->naccel)
		return;
	_cleanup_free_ char *devices = xasprintf("%s/devices", sys);
	struct pci_fn *fns = NULL;
	size_t n = 0, alloc = 0;
	find_gpus(devices, 0, &fns, &n, &alloc);
	if (n)
		qsort(fns, n, sizeof(*fns), cmp_fn);
	/* the ACTIVE ports' functions */
	char *port_path[MODEL_MAX_RDMA_PORTS] = {0};
	for (int p = 0; p < inv->nrdma; p++) {
		if (!inv->rdma[p].active)
			continue;
		_cleanup_free_ char *link =
			xasprintf("%s/class/infiniband/%s/device", sys, inv->rdma[p].dev);
		port_path[p] = realpath(link, NULL);
	}
	for (size_t i = 0; i < n && (int)i < inv->naccel; i++) {
		struct gpu_place *g = &inv->gpu_places[inv->ngpu_places++];
		memset(g, 0, sizeof(*g));
		g->index = inv->accel[i].index;
		set_str(g->pci, sizeof(g->pci), fns[i].addr);
		char numa[1100];
		snprintf(numa, sizeof(numa), "%s/numa_node", fns[i].path);
		g->numa = read_int(numa, -1);
		/* the deepest shared bridge; on none, the same NUMA node */
		int best = -1, best_score = -2;
		for (int p = 0; p < inv->nrdma; p++) {
			if (!port_path[p])
				continue;
			int s = shared_bridges(fns[i].path, port_path[p]);
			if (s < 0 && g->numa >= 0 && inv->rdma[p].numa == g->numa)
				s = -1; /* the same socket beats the other one */
			else if (s < 0)
				s = -2;
			if (s > best_score)
				best = p, best_score = s;
		}
		g->shared = best_score;
		if (best >= 0 && best_score > -2) {
			char dev[MODEL_NIC_NAME_MAX];
			set_str(dev, sizeof(dev), inv->rdma[best].dev);
			snprintf(g->hca, sizeof(g->hca), "%s:%d", dev, inv->rdma[best].port);
		}
	}
	for (int p = 0; p < inv->nrdma; p++)
		free(port_path[p]);
	for (size_t i = 0; i < n; i++)
		free(fns[i].path);
	free(fns);
}

bool node_hca_of(const struct node_inventory *inv, const int *devs, int n, char *out, size_t outn)
{
	size_t len = 0;
	out[0] = 0;
	for (int k = 0; k < n; k++) {
		const struct gpu_place *g = NULL;
		for (int i = 0; i < inv->ngpu_places && !g; i++)
			if (inv->gpu_places[i].index == devs[k])
				g = &inv->gpu_places[i];
		if (!g || !g->hca[0])
			continue;
		/* each port once, in the order of the devices */
		bool seen = false;
		for (int j = 0; j < k && !seen; j++)
			for (int i = 0; i < inv->ngpu_places; i++)
				if (inv->gpu_places[i].index == devs[j] &&
				    strcmp(inv->gpu_places[i].hca, g->hca) == 0)
					seen = true;
		if (seen)
			continue;
		int w = snprintf(out + len, outn - len, "%s%s", len ? "," : "=", g->hca);
		if (w < 0 || (size_t)w >= outn - len) {
			out[len] = 0;
			break;
		}
		len += (size_t)w;
	}
	return len > 0;
}

static const char *const nic_kinds[NIC_KIND_MAX] = {"ethernet", "infiniband", "other"};

const char *node_nic_kind_name(enum nic_kind k)
{
	return (unsigned)k < NIC_KIND_MAX ? nic_kinds[k] : "other";
}

/* Priorities' bits as the list of them: 0x08 is [3]. */
static json_t *bits_pack(int bits)
{
	json_t *a = json_array();
	for (int k = 0; k < 8; k++)
		if (bits & 1 << k)
			json_array_append_new(a, json_integer(k));
	return a;
}

/* j[key], a list of priorities 0-7, into *ret's bits; -1 where absent. */
static int bits_unpack(json_t *j, const char *key, int *ret, struct tk_error *err)
{
	json_t *a = json_object_get(j, key);
	*ret = -1;
	if (!a)
		return 0;
	if (!json_is_array(a))
		return tk_errorf(err, -EINVAL, "%s: want a list of priorities (0 to 7)", key);
	size_t i;
	json_t *x;
	*ret = 0;
	json_array_foreach (a, i, x) {
		if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 7)
			return tk_errorf(err, -EINVAL, "%s[%zu]: want a priority, 0 to 7", key, i);
		*ret |= 1 << json_integer_value(x);
	}
	return 0;
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
		if (n->pfc >= 0)
			json_object_set_new(o, "pfc", bits_pack(n->pfc));
		if (n->ecn_np >= 0)
			json_object_set_new(o, "ecn_np", bits_pack(n->ecn_np));
		if (n->ecn_rp >= 0)
			json_object_set_new(o, "ecn_rp", bits_pack(n->ecn_rp));
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
	json_t *o = json_pack("{s:o, s:o}", "interfaces", ifs, "rdma", ports);
	if (inv->ngpu_places) {
		json_t *gpus = json_array();
		for (int i = 0; i < inv->ngpu_places; i++) {
			const struct gpu_place *g = &inv->gpu_places[i];
			json_t *x = json_pack("{s:i, s:s}", "index", g->index, "pci", g->pci);
			if (g->numa >= 0)
				json_object_set_new(x, "numa", json_integer(g->numa));
			if (g->hca[0]) {
				json_object_set_new(x, "hca", json_string(g->hca));
				json_object_set_new(x, "shared_bridges", json_integer(g->shared));
			}
			json_array_append_new(gpus, x);
		}
		json_object_set_new(o, "gpus", gpus);
	}
	return o;
}

static int place_unpack(json_t *j, struct gpu_place *g, struct tk_error *err)
{
	static const char *const keys[] = {"index", "pci", "numa", "hca", "shared_bridges", NULL};
	int64_t index, numa, shared;
	int r;
	memset(g, 0, sizeof(*g));
	if ((r = mj_link_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_int(j, "index", true, 0, MODEL_MAX_ACCELS - 1, 0, &index, err)) < 0 ||
	    (r = mj_strbuf(j, "pci", true, true, g->pci, sizeof(g->pci), err)) < 0 ||
	    (r = mj_int(j, "numa", false, -1, 1 << 16, -1, &numa, err)) < 0 ||
	    (r = mj_strbuf(j, "hca", false, true, g->hca, sizeof(g->hca), err)) < 0 ||
	    (r = mj_int(j, "shared_bridges", false, -2, 64, 0, &shared, err)) < 0)
		return r;
	g->index = (int)index;
	g->numa = (int)numa;
	g->shared = (int)shared;
	return 0;
}

static int nic_unpack(json_t *j, struct nic *n, struct tk_error *err)
{
	static const char *const keys[] = {"name",	 "kind",   "virtual", "up",   "mtu",
					   "speed_mbps", "driver", "pci",     "numa", "rdma",
					   "pfc",	 "ecn_np", "ecn_rp",  NULL};
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
	    (r = mj_strbuf(j, "rdma", false, true, n->rdma, sizeof(n->rdma), err)) < 0 ||
	    (r = bits_unpack(j, "pfc", &n->pfc, err)) < 0 ||
	    (r = bits_unpack(j, "ecn_np", &n->ecn_np, err)) < 0 ||
	    (r = bits_unpack(j, "ecn_rp", &n->ecn_rp, err)) < 0)
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
	static const char *const keys[] = {"interfaces", "rdma", "gpus", NULL};
	int r;
	inv->nnics = inv->nrdma = inv->ngpu_places = 0;
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
	json_t *gpus = json_object_get(j, "gpus");
	if (gpus && !json_is_array(gpus))
		return tk_errorf(err, -EINVAL, "network.gpus: must be an array");
	json_array_foreach (gpus, i, x) {
		if (i >= MODEL_MAX_ACCELS)
			break;
		if ((r = place_unpack(x, &inv->gpu_places[i], err)) < 0) {
			mj_prefix(err, "network.gpus[%zu]", i);
			return r;
		}
		inv->ngpu_places = (int)i + 1;
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
