/* Private to src/coll. */
#pragma once

#include "coll.h"

#define COLL_MAGIC 0x74656e6bu /* "tenk" */
#define COLL_VERSION 1
#define COLL_HOST_ID 64
#define COLL_SHM_NAME 64
#define COLL_MAX_RANKS 4096
#define COLL_MAX_CONNS 16

struct shm;

struct coll_comm {
	int rank, size;
	struct coll_opts o;
	int *fds; /* [peer * K + k]; -1 for self */
	int K;
	struct shm *shm; /* all ranks on one host: the collectives run here */
	uint8_t *tmp;
	size_t tmp_size;
	int64_t deadline; /* of the call in progress (monotonic ms) */
	bool broken;
};

/* shm.c */
int coll__shm_create(struct coll_comm *c, char *name, size_t n, struct tk_error *err);
int coll__shm_attach(struct coll_comm *c, const char *name, struct tk_error *err);
void coll__shm_release(struct coll_comm *c);
int coll__shm_allreduce(struct coll_comm *c, const void *send, void *recv, size_t count,
			enum coll_dtype t, enum coll_op op, struct tk_error *err);
int coll__shm_reduce_scatter(struct coll_comm *c, const void *send, void *recv, size_t count,
			     enum coll_dtype t, enum coll_op op, struct tk_error *err);
int coll__shm_allgather(struct coll_comm *c, const void *send, void *recv, size_t bytes,
			struct tk_error *err);
int coll__shm_broadcast(struct coll_comm *c, void *buf, size_t bytes, int root,
			struct tk_error *err);
int coll__shm_barrier(struct coll_comm *c, struct tk_error *err);
