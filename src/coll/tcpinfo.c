/* A communicator's TCP counters per peer (coll.h), from the kernel's
 * TCP_INFO: the kernel's own struct, which has the segments sent and the
 * duplicates the peer reported that glibc's lacks (Linux 4.19 or later; in
 * a file of its own: the two headers clash). */
#include "internal.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>

int coll_peer_tcp(const struct coll_comm *c, int peer, int64_t *segs_out, int64_t *retrans)
{
	*segs_out = *retrans = 0;
	if (c->shm || !c->fds || peer < 0 || peer >= c->size || peer == c->rank)
		return -1;
	for (int k = 0; k < c->K; k++) {
		int fd = c->fds[peer * c->K + k];
		struct tcp_info ti;
		socklen_t len = sizeof(ti);
		if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
		    len < offsetof(struct tcp_info, tcpi_dsack_dups) + sizeof(ti.tcpi_dsack_dups))
			return -1;
		*segs_out += ti.tcpi_segs_out;
		/* those the peer said it had already (DSACK): sent again for a
		 * late acknowledgement (a busy receiver, a tail loss probe), not
		 * for a loss */
		*retrans += (int64_t)ti.tcpi_total_retrans - ti.tcpi_dsack_dups;
	}
	return 0;
}
