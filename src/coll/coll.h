/*
 * coll: collective communication in C, usable on its own (it depends on
 * nothing of tenk's but util).
 *
 * A communicator comes from a rendezvous: every rank knows its rank, the
 * number of ranks and an address of rank 0 (MASTER_ADDR:MASTER_PORT, as tenk
 * and torchrun give it). Rank 0 listens there, learns every rank's address,
 * and tells everyone; then every pair of ranks connects (several TCP
 * connections per pair, so one stream does not cap a fast link). When all
 * ranks run on one host (same boot and network namespace) they use a shared
 * memory segment instead.
 *
 * Collectives: all-reduce (sum, max, min on f32, f64, bf16), reduce-scatter,
 * all-gather, broadcast, barrier. Over TCP, large messages take a ring
 * (bandwidth-optimal: each rank sends and receives 2(n-1)/n of the data),
 * small ones recursive doubling (log n steps); broadcast is a pipelined
 * chain for large messages and a binomial tree for small ones. Every rank
 * ends with bitwise the same result.
 *
 * Nothing blocks without a deadline: a peer that dies or stalls makes the
 * call return an error naming the rank, within the communicator's timeout.
 * After an error the communicator is unusable; destroy it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

enum coll_dtype { COLL_F32, COLL_F64, COLL_BF16, COLL_DTYPE_MAX };
enum coll_op { COLL_SUM, COLL_MAX, COLL_MIN, COLL_OP_MAX };

struct coll_opts {
	int timeout_ms;	    /* per call, and for the rendezvous (0: 60 s) */
	int conns_per_peer; /* TCP connections between two ranks (0: 4) */
	bool no_shm;	    /* never use shared memory, even on one host */
	size_t small_bytes; /* messages up to this take the latency algorithms (0: 64 KiB) */
};

struct coll_comm;

/* Rendezvous. root is "host:port" of rank 0 (rank 0 binds it). */
int coll_init(struct coll_comm **ret, int rank, int size, const char *root,
	      const struct coll_opts *opts, struct tk_error *err);
void coll_destroy(struct coll_comm *c);

int coll_rank(const struct coll_comm *c);
int coll_size(const struct coll_comm *c);
/* "shm" or "tcp": what the collectives run over. */
const char *coll_transport(const struct coll_comm *c);
/* The TCP segments sent to peer so far, and those sent again for a loss
 * (retransmits less those the peer reported as duplicates), over every
 * connection to it (the kernel's TCP_INFO). -1 where not known: shared
 * memory, no such peer, a kernel before 4.19. */
int coll_peer_tcp(const struct coll_comm *c, int peer, int64_t *segs_out, int64_t *retrans);

size_t coll_dtype_size(enum coll_dtype t);
const char *coll_dtype_name(enum coll_dtype t);
const char *coll_op_name(enum coll_op o);

/* recv[i] = op over ranks of send[i], for count elements. send may equal recv. */
int coll_allreduce(struct coll_comm *c, const void *send, void *recv, size_t count,
		   enum coll_dtype t, enum coll_op op, struct tk_error *err);
/* send holds size * count elements; rank r gets the reduction of block r. */
int coll_reduce_scatter(struct coll_comm *c, const void *send, void *recv, size_t count,
			enum coll_dtype t, enum coll_op op, struct tk_error *err);
/* recv gets every rank's `bytes` of send, in rank order. */
int coll_allgather(struct coll_comm *c, const void *send, void *recv, size_t bytes,
		   struct tk_error *err);
/* buf on every rank becomes root's. */
int coll_broadcast(struct coll_comm *c, void *buf, size_t bytes, int root, struct tk_error *err);
int coll_barrier(struct coll_comm *c, struct tk_error *err);
/* Point to point, over TCP only: sends `slen` bytes to rank `to` while
 * receiving `rlen` bytes from rank `from` (either may be -1 for none; the
 * peers must make the matching calls). Ranks that share one host's memory
 * segment have no TCP connections: -ENOTSUP. For measuring one link between
 * two ranks while other pairs measure theirs. */
int coll_sendrecv(struct coll_comm *c, int to, const void *sbuf, size_t slen, int from, void *rbuf,
		  size_t rlen, struct tk_error *err);

/* dst[i] = dst[i] op src[i]: the reduction itself, exposed for tests. */
void coll_reduce(void *dst, const void *src, size_t count, enum coll_dtype t, enum coll_op op);
/* bf16 <-> float, rounding to nearest even. */
float coll_bf16_to_float(uint16_t v);
uint16_t coll_float_to_bf16(float f);

/* A data pattern for checking collectives (tenk bench, the tests): the value
 * rank r holds at element i is a small integer, so sums are exact in every
 * type. coll_pattern_fill writes elements base .. base+count-1 of rank r;
 * coll_element reads element i of buf as a double; coll_pattern_reduced is
 * what element i becomes when n ranks' patterns are reduced with op. */
double coll_pattern(int r, size_t i);
void coll_pattern_fill(void *buf, size_t count, enum coll_dtype t, int r, size_t base);
double coll_element(const void *buf, size_t i, enum coll_dtype t);
double coll_pattern_reduced(int n, size_t i, enum coll_op op);
