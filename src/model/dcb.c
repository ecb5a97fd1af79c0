/*
 * RoCE's PFC, as the kernel's Data Center Bridging netlink says it: the
 * one read-only interface every driver with DCB answers through (mlx5,
 * bnxt_en, ice, i40e; `dcb pfc show dev IF` and `mlnx_qos -i IF` read the
 * same), where sysfs has nothing. A request is RTM_GETDCB with the command
 * DCB_CMD_IEEE_GET and the interface's name; the answer nests the IEEE
 * 802.1Qaz settings, among them struct ieee_pfc, whose pfc_en has a bit for
 * each priority on which the port pauses instead of dropping. Reading needs
 * no privilege (the kernel asks CAP_NET_ADMIN of RTM_SETDCB only). A driver
 * without DCB (veth, virtio, loopback) answers EOPNOTSUPP.
 */
#include "internal.h"

#include <errno.h>
#include <linux/dcbnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* The attribute of type `type` among [p, end) (its payload, its length). */
static const struct nlattr *attr_find(const char *p, const char *end, int type, size_t *ret_len,
				      bool *bad)
{
	while (p + NLA_HDRLEN <= end) {
		const struct nlattr *a = (const struct nlattr *)p;
		if (a->nla_len < NLA_HDRLEN || a->nla_len > end - p) {
			*bad = true;
			return NULL;
		}
		if ((a->nla_type & NLA_TYPE_MASK) == type) {
			*ret_len = a->nla_len - NLA_HDRLEN;
			return a;
		}
		p += NLA_ALIGN(a->nla_len);
	}
	return NULL;
}

int node_dcb_pfc_parse(const void *msg, size_t len, struct node_pfc *ret)
{
	memset(ret, 0, sizeof(*ret));
	const struct nlmsghdr *nh = msg;
	if (len < sizeof(*nh) || nh->nlmsg_len < sizeof(*nh) || nh->nlmsg_len > len)
		return -EBADMSG;
	if (nh->nlmsg_type == NLMSG_ERROR) {
		if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
			return -EBADMSG;
		const struct nlmsgerr *e = NLMSG_DATA(nh);
		return e->error < 0 ? e->error : -EBADMSG;
	}
	size_t off = NLMSG_LENGTH(NLMSG_ALIGN(sizeof(struct dcbmsg)));
	if (nh->nlmsg_type != RTM_GETDCB || nh->nlmsg_len < off)
		return -EBADMSG;
	const char *base = msg, *end = base + nh->nlmsg_len;
	bool bad = false;
	size_t n;
	const struct nlattr *ieee = attr_find(base + off, end, DCB_ATTR_IEEE, &n, &bad);
	if (!ieee)
		return bad ? -EBADMSG : -ENODATA;
	const char *in = (const char *)ieee + NLA_HDRLEN;
	const struct nlattr *pfc = attr_find(in, in + n, DCB_ATTR_IEEE_PFC, &n, &bad);
	if (!pfc)
		return bad ? -EBADMSG : -ENODATA;
	if (n < offsetof(struct ieee_pfc, pfc_en) + 1)
		return -EBADMSG;
	/* a payload is aligned to 4, the struct to 8: copied out, not read in
	 * place; the counters where the answer has them whole */
	struct ieee_pfc p;
	memset(&p, 0, sizeof(p));
	memcpy(&p, (const char *)pfc + NLA_HDRLEN, MIN(n, sizeof(p)));
	ret->en = p.pfc_en;
	_Static_assert(sizeof(p.requests) == sizeof(ret->requests), "eight priorities");
	if (n >= sizeof(p)) {
		memcpy(ret->requests, p.requests, sizeof(ret->requests));
		memcpy(ret->indications, p.indications, sizeof(ret->indications));
	}
	return 0;
}

int node_pfc_read(const char *ifname, struct node_pfc *ret)
{
	memset(ret, 0, sizeof(*ret));
	size_t nlen = strlen(ifname) + 1;
	if (nlen > IFNAMSIZ)
		return -EINVAL;
	struct {
		struct nlmsghdr nh;
		struct dcbmsg d;
		struct nlattr a;
		char name[IFNAMSIZ];
	} req;
	_Static_assert(offsetof(__typeof__(req), a) ==
			       NLMSG_LENGTH(NLMSG_ALIGN(sizeof(struct dcbmsg))),
		       "the attribute follows the header, aligned");
	memset(&req, 0, sizeof(req));
	req.a.nla_type = DCB_ATTR_IFNAME;
	req.a.nla_len = (unsigned short)(NLA_HDRLEN + nlen);
	memcpy(req.name, ifname, nlen);
	req.nh.nlmsg_len = (unsigned)(offsetof(__typeof__(req), name) + NLA_ALIGN(nlen));
	req.nh.nlmsg_type = RTM_GETDCB;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.nh.nlmsg_seq = 1;
	req.d.dcb_family = AF_UNSPEC;
	req.d.cmd = DCB_CMD_IEEE_GET;

	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	struct timeval tv = {.tv_sec = 1};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct sockaddr_nl to = {.nl_family = AF_NETLINK};
	int r;
	if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	/* the answer: the settings (ETS, PFC, the application table) take
	 * hundreds of bytes; a longer one is cut, and said unreadable */
	_Alignas(8) char buf[8192]; /* headers and attributes read in place */
	ssize_t got;
	do
		got = recv(fd, buf, sizeof(buf), 0);
	while (got < 0 && errno == EINTR);
	r = got < 0 ? -errno : node_dcb_pfc_parse(buf, (size_t)got, ret);
	close(fd);
	return r;
}

void node_roce_pfc_read(struct node_inventory *inv)
{
	for (int i = 0; i < inv->nnics; i++) {
		struct nic *c = &inv->nics[i];
		if (!node_nic_is_roce(c))
			continue;
		struct node_pfc p;
		c->pfc = node_pfc_read(c->name, &p) == 0 ? p.en : -1;
	}
}
