/*
 * A node's fabric as its agent reads it from sysfs (agent nic.c): its
 * network interfaces and its RDMA devices' ports, in its inventory, so that
 * the server shows them (tenk nodes NAME, GET /v1/nodes) and keeps them.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

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
