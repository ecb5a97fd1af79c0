/*
 * coll in shared memory, for ranks that all run on one host. One segment:
 * a header with a barrier, one slot per rank, and a result area. A
 * collective goes through it in blocks of at most a slot: every rank copies
 * its block in, each reduces its own share of the block across the slots
 * into the result area, everyone copies the result out. Memory traffic per
 * rank is about three times the message, and no byte crosses a socket.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SLOT (1u << 20)

struct shm_hdr {
	_Atomic uint32_t arrived;
	_Atomic uint32_t sense;
	_Atomic uint32_t sleepers; /* ranks asleep on sense, to be woken */
	uint32_t magic;
	uint32_t size;
};

struct shm {
	void *base;
	size_t len;
	struct shm_hdr *hdr;
	uint8_t *slots;	 /* size * SLOT */
	uint8_t *result; /* SLOT */
	uint32_t sense;
};

static size_t seg_len(size_t n)
{
	return 4096 + (n + 1) * (size_t)SLOT;
}

static int map(struct coll_comm *c, int fd, size_t n, struct tk_error *err)
{
	struct shm *s = xcalloc(1, sizeof(*s));
	s->len = seg_len(n);
	s->base = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s->base == MAP_FAILED) {
		int e = errno;
		free(s);
		return tk_errorf(err, -e, "shared memory: mmap: %s", strerror(e));
	}
	s->hdr = s->base;
	s->slots = (uint8_t *)s->base + 4096;
	s->result = s->slots + n * (size_t)SLOT;
	c->shm = s;
	return 0;
}

int coll__shm_create(struct coll_comm *c, char *name, size_t n, struct tk_error *err)
{
	uint64_t r = (uint64_t)tk_mono_ms() ^ ((uint64_t)getpid() << 20);
	snprintf(name, COLL_SHM_NAME, "/tenk-coll-%d-%llx", (int)getpid(), (unsigned long long)r);
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return tk_errorf(err, -errno, "shared memory %s: %s", name, strerror(errno));
	if (ftruncate(fd, (off_t)seg_len(n)) < 0) {
		int e = errno;
		close(fd);
		shm_unlink(name);
		return tk_errorf(err, -e,
				 "shared memory: %zu MiB for %zu ranks do not fit /dev/shm: %s",
				 seg_len(n) >> 20, n, strerror(e));
	}
	int rc = map(c, fd, n, err);
	close(fd);
	if (rc < 0) {
		shm_unlink(name);
		return rc;
	}
	c->shm->hdr->magic = COLL_MAGIC;
	c->shm->hdr->size = (uint32_t)n;
	return 0;
}

int coll__shm_attach(struct coll_comm *c, const char *name, struct tk_error *err)
{
	int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return tk_errorf(err, -errno, "shared memory %s: %s", name, strerror(errno));
	int rc = map(c, fd, (size_t)c->size, err);
	close(fd);
	if (rc == 0 && (c->shm->hdr->magic != COLL_MAGIC || c->shm->hdr->size != (uint32_t)c->size))
		rc = tk_errorf(err, -EPROTO, "shared memory %s: not this communicator's", name);
	return rc;
}

void coll__shm_release(struct coll_comm *c)
{
	if (!c->shm)
		return;
	munmap(c->shm->base, c->shm->len);
	free(c->shm);
	c->shm = NULL;
}

/* Sleeps on a word of the shared segment while it holds `old`, for at most
 * `ms`: a futex shared between processes (not FUTEX_PRIVATE). */
static void sleep_while(_Atomic uint32_t *word, uint32_t old, int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, old, &ts, NULL, 0);
}

/* A sense-reversing barrier. A waiter spins a little (the others are
 * usually a few microseconds behind), yields a little, then sleeps on the
 * sense word: where ranks outnumber free cores (a node shared with other
 * work, several validations at once), spinning and yielding ranks would
 * take the cores from the ones still copying. The last to arrive wakes the
 * sleepers; sleeps are short, so the deadline is still seen. */
int coll__shm_barrier(struct coll_comm *c, struct tk_error *err)
{
	struct shm *s = c->shm;
	struct shm_hdr *h = s->hdr;
	s->sense ^= 1u;
	if (atomic_fetch_add(&h->arrived, 1) == (uint32_t)c->size - 1) {
		atomic_store(&h->arrived, 0);
		atomic_store(&h->sense, s->sense);
		/* seq_cst: a sleeper counted after this load saw the new sense */
		if (atomic_load(&h->sleepers))
			syscall(SYS_futex, (uint32_t *)&h->sense, FUTEX_WAKE, INT32_MAX, NULL, NULL,
				0);
		return 0;
	}
	for (unsigned spin = 0; atomic_load(&h->sense) != s->sense; spin++) {
		if (spin < 1000)
			continue;
		if (spin < 1064) {
			sched_yield();
			continue;
		}
		atomic_fetch_add(&h->sleepers, 1);
		sleep_while(&h->sense, s->sense ^ 1u, 20);
		atomic_fetch_sub(&h->sleepers, 1);
		if (spin % 16 == 0 && tk_mono_ms() > c->deadline) {
			c->broken = true;
			return tk_errorf(
				err, -ETIMEDOUT,
				"rank %d: timed out after %d ms at a shared-memory barrier "
				"(a rank died or stalled)",
				c->rank, c->o.timeout_ms);
		}
	}
	return 0;
}

static uint8_t *slot(struct coll_comm *c, int r)
{
	return c->shm->slots + (size_t)r * SLOT;
}

/* Reduces a block of `count` elements that every rank put in its slot:
 * each rank takes its share, across the slots in rank order, into result. */
static void reduce_share(struct coll_comm *c, size_t count, enum coll_dtype t, enum coll_op op)
{
	size_t es = coll_dtype_size(t), n = (size_t)c->size;
	size_t base = count / n, extra = count % n, r = (size_t)c->rank;
	size_t off = base * r + MIN(r, extra), len = base + (r < extra ? 1 : 0);
	uint8_t *res = c->shm->result + off * es;
	memcpy(res, slot(c, 0) + off * es, len * es);
	for (int k = 1; k < c->size; k++)
		coll_reduce(res, slot(c, k) + off * es, len, t, op);
}

int coll__shm_allreduce(struct coll_comm *c, const void *send, void *recv, size_t count,
			enum coll_dtype t, enum coll_op op, struct tk_error *err)
{
	size_t es = coll_dtype_size(t), per = SLOT / es;
	const uint8_t *in = send;
	uint8_t *out = recv;
	int rc;
	for (size_t done = 0; done < count; done += per) {
		size_t n = MIN(per, count - done);
		memcpy(slot(c, c->rank), in + done * es, n * es);
		if ((rc = coll__shm_barrier(c, err)) < 0)
			return rc;
		reduce_share(c, n, t, op);
		if ((rc = coll__shm_barrier(c, err)) < 0)
			return rc;
		memcpy(out + done * es, c->shm->result, n * es);
		if ((rc = coll__shm_barrier(c, err)) < 0)
			return rc;
	}
	return 0;
}

int coll__shm_reduce_scatter(struct coll_comm *c, const void *send, void *recv, size_t count,
			     enum coll_dtype t, enum coll_op op, struct tk_error *err)
{
	/* block r of every rank's input reduced: rank r's output. Slot k holds
	 * rank k's piece of the block in hand; the owner reduces it. */
	size_t es = coll_dtype_size(t), per = SLOT / es;
	const uint8_t *in = send;
	uint8_t *out = recv;
	int rc;
	for (int b = 0; b < c->size; b++)
		for (size_t done = 0; done < count; done += per) {
			size_t n = MIN(per, count - done);
			memcpy(slot(c, c->rank), in + ((size_t)b * count + done) * es, n * es);
			if ((rc = coll__shm_barrier(c, err)) < 0)
				return rc;
			if (b == c->rank) {
				memcpy(out + done * es, slot(c, 0), n * es);
				for (int k = 1; k < c->size; k++)
					coll_reduce(out + done * es, slot(c, k), n, t, op);
			}
			if ((rc = coll__shm_barrier(c, err)) < 0)
				return rc;
		}
	return 0;
}

int coll__shm_allgather(struct coll_comm *c, const void *send, void *recv, size_t bytes,
			struct tk_error *err)
{
	const uint8_t *in = send;
	uint8_t *out = recv;
	int rc;
	for (size_t done = 0; done < bytes; done += SLOT) {
		size_t n = MIN((size_t)SLOT, bytes - done);
		memcpy(slot(c, c->rank), in + done, n);
		if ((rc = coll__shm_barrier(c, err)) < 0)
			return rc;
		for (int k = 0; k < c->size; k++)
			memcpy(out + (size_t)k * bytes + done, slot(c, k), n);
		if ((rc = coll__shm_barrier(c, err)) < 0)
			return rc;
	}
	return 0;
}

int coll__shm_broadcast(struct coll_comm *c, void *buf, size_t bytes, int root,
			struct tk_error *err)
{
	uint8_t *b = buf;
	int rc;
	for (size_t done = 0; done < bytes; done += SLOT) {
		size_t n = MIN((size_t)SLOT, bytes - done);
		if (c->rank == root)
			memcpy(c->shm->result, b + done, n);
		if ((rc = coll__shm_barrier(c, err)) < 0)
			return rc;
		if (c->rank != root)
			memcpy(b + done, c->shm->result, n);
		if ((rc = coll__shm_barrier(c, err)) < 0)
			return rc;
	}
	return 0;
}
