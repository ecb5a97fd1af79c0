/*
 * coll over TCP: the rendezvous, the mesh of connections, one primitive
 * (exchange: send to one peer while receiving from another, striped over
 * the pair's connections, with a deadline), and the algorithms on it.
 */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- reductions -------------------------------------------------------------------------- */

float coll_bf16_to_float(uint16_t v)
{
	uint32_t u = (uint32_t)v << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

uint16_t coll_float_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
		return (uint16_t)((u >> 16) | 0x0040u); /* a quiet NaN stays a NaN */
	u += 0x7fffu + ((u >> 16) & 1u);		/* round to nearest, ties to even */
	return (uint16_t)(u >> 16);
}

/* max and min that give the same answer whichever operand comes first
 * (NaN wins; +0 beats -0 for max and loses for min), so every rank of a
 * recursive-doubling exchange computes the same bits */
static inline double sym_max(double a, double b)
{
	if (a > b)
		return a;
	if (b > a)
		return b;
	if (isnan(a) || isnan(b))
		return NAN;
	return signbit(a) ? b : a;
}

static inline double sym_min(double a, double b)
{
	if (a < b)
		return a;
	if (b < a)
		return b;
	if (isnan(a) || isnan(b))
		return NAN;
	return signbit(a) ? a : b;
}

#define REDUCE_LOOP(T, EXPR)                                                                       \
	do {                                                                                       \
		T *d = dst;                                                                        \
		const T *s = src;                                                                  \
		for (size_t i = 0; i < count; i++)                                                 \
			d[i] = EXPR;                                                               \
	} while (0)

void coll_reduce(void *dst, const void *src, size_t count, enum coll_dtype t, enum coll_op op)
{
	switch (t) {
	case COLL_F32:
		if (op == COLL_SUM)
			REDUCE_LOOP(float, d[i] + s[i]);
		else if (op == COLL_MAX)
			REDUCE_LOOP(float, (float)sym_max(d[i], s[i]));
		else
			REDUCE_LOOP(float, (float)sym_min(d[i], s[i]));
		break;
	case COLL_F64:
		if (op == COLL_SUM)
			REDUCE_LOOP(double, d[i] + s[i]);
		else if (op == COLL_MAX)
			REDUCE_LOOP(double, sym_max(d[i], s[i]));
		else
			REDUCE_LOOP(double, sym_min(d[i], s[i]));
		break;
	case COLL_BF16: {
		uint16_t *d = dst;
		const uint16_t *s = src;
		for (size_t i = 0; i < count; i++) {
			float a = coll_bf16_to_float(d[i]), b = coll_bf16_to_float(s[i]);
			float r = op == COLL_SUM   ? a + b
				  : op == COLL_MAX ? (float)sym_max(a, b)
						   : (float)sym_min(a, b);
			d[i] = coll_float_to_bf16(r);
		}
		break;
	}
	default:
		break;
	}
}

size_t coll_dtype_size(enum coll_dtype t)
{
	return t == COLL_F64 ? 8 : t == COLL_F32 ? 4 : 2;
}

const char *coll_dtype_name(enum coll_dtype t)
{
	return t == COLL_F64 ? "double" : t == COLL_F32 ? "float" : "bfloat16";
}

const char *coll_op_name(enum coll_op o)
{
	return o == COLL_SUM ? "sum" : o == COLL_MAX ? "max" : "min";
}

int coll_rank(const struct coll_comm *c)
{
	return c->rank;
}

int coll_size(const struct coll_comm *c)
{
	return c->size;
}

const char *coll_transport(const struct coll_comm *c)
{
	return c->shm ? "shm" : "tcp";
}

/* ---- sockets with deadlines --------------------------------------------------------------- */

static int left_ms(int64_t deadline)
{
	int64_t l = deadline - tk_mono_ms();
	return l < 0 ? 0 : l > INT32_MAX ? INT32_MAX : (int)l;
}

static int set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -errno;
	return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) < 0 ? -errno : 0;
}

/* Writes or reads all of buf on a blocking-mode fd, waiting at most until deadline. */
static int io_all(int fd, void *buf, size_t n, bool out, int64_t deadline, const char *what,
		  struct tk_error *err)
{
	uint8_t *p = buf;
	size_t done = 0;
	set_nonblock(fd, true);
	while (done < n) {
		ssize_t r = out ? send(fd, p + done, n - done, MSG_NOSIGNAL)
				: recv(fd, p + done, n - done, 0);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r == 0)
			return tk_errorf(err, -ECONNRESET, "%s: the peer closed the connection",
					 what);
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return tk_errorf(err, -errno, "%s: %s", what, strerror(errno));
		struct pollfd pf = {fd, out ? POLLOUT : POLLIN, 0};
		int l = left_ms(deadline);
		if (l == 0 || poll(&pf, 1, l) == 0)
			return tk_errorf(err, -ETIMEDOUT, "%s: timed out", what);
	}
	return 0;
}

static void tune(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int resolve(const char *hostport, struct sockaddr_in *sa, struct tk_error *err)
{
	char host[256];
	const char *colon = strrchr(hostport, ':');
	int64_t port;
	if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof(host) ||
	    tk_parse_int64(colon + 1, 1, 65535, &port) < 0)
		return tk_errorf(err, -EINVAL,
				 "rendezvous address: expected HOST:PORT, got \"%.80s\"", hostport);
	snprintf(host, sizeof(host), "%.*s", (int)(colon - hostport), hostport);
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	int r = getaddrinfo(host, NULL, &hints, &ai);
	if (r != 0)
		return tk_errorf(err, -EINVAL, "rendezvous address %s: %s", host, gai_strerror(r));
	memcpy(sa, ai->ai_addr, sizeof(*sa));
	sa->sin_port = htons((uint16_t)port);
	freeaddrinfo(ai);
	return 0;
}

static int connect_by(const struct sockaddr_in *sa, int64_t deadline, bool retry,
		      struct tk_error *err)
{
	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return tk_errorf(err, -errno, "socket: %s", strerror(errno));
		int r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
		if (r < 0 && errno == EINPROGRESS) {
			struct pollfd pf = {fd, POLLOUT, 0};
			int so = 0;
			socklen_t sl = sizeof(so);
			if (poll(&pf, 1, left_ms(deadline)) == 1 &&
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) == 0 && so == 0)
				r = 0;
			else
				errno = so ? so : ETIMEDOUT;
		}
		if (r == 0) {
			tune(fd);
			return fd;
		}
		int e = errno;
		close(fd);
		char a[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &sa->sin_addr, a, sizeof(a));
		if (!retry || tk_mono_ms() >= deadline)
			return tk_errorf(err, -e, "cannot connect to %s:%d: %s", a,
					 ntohs(sa->sin_port), strerror(e));
		usleep(20000); /* rank 0 may not listen yet */
	}
}

static int listen_on(struct sockaddr_in *sa, struct tk_error *err)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return tk_errorf(err, -errno, "socket: %s", strerror(errno));
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	socklen_t sl = sizeof(*sa);
	if (bind(fd, (struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(fd, 4096) < 0 ||
	    getsockname(fd, (struct sockaddr *)sa, &sl) < 0) {
		int e = errno;
		close(fd);
		char a[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &sa->sin_addr, a, sizeof(a));
		return tk_errorf(err, -e, "cannot listen on %s:%d: %s", a, ntohs(sa->sin_port),
				 strerror(e));
	}
	return fd;
}

static int accept_by(int lfd, int64_t deadline, struct tk_error *err)
{
	struct pollfd pf = {lfd, POLLIN, 0};
	if (poll(&pf, 1, left_ms(deadline)) != 1)
		return tk_errorf(err, -ETIMEDOUT, "timed out waiting for ranks to connect");
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return tk_errorf(err, -errno, "accept: %s", strerror(errno));
	tune(fd);
	return fd;
}

/* ---- rendezvous ------------------------------------------------------------------------- */

struct hello {
	uint32_t magic, version;
	int32_t rank, size, conns;
	uint32_t port;
	char host_id[COLL_HOST_ID];
};

struct entry {
	uint32_t ip; /* network order */
	uint32_t port;
	char host_id[COLL_HOST_ID];
};

struct link_hello {
	uint32_t magic;
	int32_t rank, conn;
};

/* What tells hosts apart: the boot, and the network namespace (hosts made
 * as namespaces on one machine are different hosts to us). */
static void host_id(char *out)
{
	char boot[64] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (f) {
		if (!fgets(boot, sizeof(boot), f))
			boot[0] = '\0';
		fclose(f);
	}
	boot[strcspn(boot, "\n")] = '\0';
	struct stat st;
	unsigned long long ns =
		stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
	snprintf(out, COLL_HOST_ID, "%.40s/%llu", boot, ns);
}

static int rendezvous(struct coll_comm *c, const char *root, struct entry *table, char *shm_name,
		      int mesh_port, int64_t deadline, struct tk_error *err)
{
	struct sockaddr_in rsa;
	int r = resolve(root, &rsa, err);
	if (r < 0)
		return r;
	char me[COLL_HOST_ID];
	host_id(me);
	if (c->rank != 0) {
		int fd = connect_by(&rsa, deadline, true, err);
		if (fd < 0)
			return fd;
		struct hello h = {COLL_MAGIC, COLL_VERSION,	   c->rank, c->size,
				  c->K,	      (uint32_t)mesh_port, ""};
		memcpy(h.host_id, me, sizeof(h.host_id));
		char what[64];
		snprintf(what, sizeof(what), "rank %d: rendezvous with rank 0", c->rank);
		if ((r = io_all(fd, &h, sizeof(h), true, deadline, what, err)) < 0 ||
		    (r = io_all(fd, table, sizeof(*table) * (size_t)c->size, false, deadline, what,
				err)) < 0 ||
		    (r = io_all(fd, shm_name, COLL_SHM_NAME, false, deadline, what, err)) < 0) {
			close(fd);
			return r;
		}
		close(fd);
		return 0;
	}
	/* rank 0 */
	int lfd = listen_on(&rsa, err);
	if (lfd < 0)
		return lfd;
	int *fds = xcalloc((size_t)c->size, sizeof(int));
	for (int i = 0; i < c->size; i++)
		fds[i] = -1;
	table[0].ip = rsa.sin_addr.s_addr;
	table[0].port = (uint32_t)mesh_port;
	memcpy(table[0].host_id, me, COLL_HOST_ID);
	for (int got = 1; got < c->size && r >= 0; got++) {
		struct sockaddr_in pa;
		socklen_t pl = sizeof(pa);
		struct pollfd pf = {lfd, POLLIN, 0};
		if (poll(&pf, 1, left_ms(deadline)) != 1) {
			r = tk_errorf(err, -ETIMEDOUT,
				      "rendezvous: %d of %d ranks arrived before the timeout", got,
				      c->size);
			break;
		}
		int fd = accept4(lfd, (struct sockaddr *)&pa, &pl, SOCK_CLOEXEC);
		if (fd < 0) {
			r = tk_errorf(err, -errno, "rendezvous: accept: %s", strerror(errno));
			break;
		}
		struct hello h;
		if ((r = io_all(fd, &h, sizeof(h), false, deadline, "rendezvous", err)) < 0) {
			close(fd);
			break;
		}
		if (h.magic != COLL_MAGIC || h.version != COLL_VERSION || h.size != c->size ||
		    h.rank < 1 || h.rank >= c->size || fds[h.rank] >= 0 || h.conns != c->K) {
			r = tk_errorf(
				err, -EPROTO,
				"rendezvous: a rank said rank %d of %d (%d connections per peer); "
				"this is rank 0 of %d (%d), or that rank came twice",
				h.rank, h.size, h.conns, c->size, c->K);
			close(fd);
			break;
		}
		fds[h.rank] = fd;
		table[h.rank].ip = pa.sin_addr.s_addr;
		table[h.rank].port = h.port;
		memcpy(table[h.rank].host_id, h.host_id, COLL_HOST_ID);
		table[h.rank].host_id[COLL_HOST_ID - 1] = '\0';
	}
	close(lfd);
	if (r >= 0) {
		bool one_host = !c->o.no_shm && c->size > 1;
		for (int i = 1; i < c->size; i++)
			one_host &= strcmp(table[i].host_id, table[0].host_id) == 0;
		memset(shm_name, 0, COLL_SHM_NAME);
		if (one_host)
			r = coll__shm_create(c, shm_name, (size_t)c->size, err);
	}
	for (int i = 1; i < c->size && r >= 0; i++)
		if ((r = io_all(fds[i], table, sizeof(*table) * (size_t)c->size, true, deadline,
				"rendezvous", err)) < 0 ||
		    (r = io_all(fds[i], shm_name, COLL_SHM_NAME, true, deadline, "rendezvous",
				err)) < 0)
			break;
	for (int i = 1; i < c->size; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	return r;
}

static int mesh(struct coll_comm *c, int lfd, const struct entry *table, int64_t deadline,
		struct tk_error *err)
{
	int n = c->size, K = c->K;
	/* connect to every higher rank; the lower ones connect to us */
	for (int j = c->rank + 1; j < n; j++)
		for (int k = 0; k < K; k++) {
			struct sockaddr_in sa = {.sin_family = AF_INET,
						 .sin_port = htons((uint16_t)table[j].port),
						 .sin_addr.s_addr = table[j].ip};
			int fd = connect_by(&sa, deadline, false, err);
			if (fd < 0)
				return fd;
			c->fds[j * K + k] = fd;
			struct link_hello h = {COLL_MAGIC, c->rank, k};
			int r = io_all(fd, &h, sizeof(h), true, deadline, "connecting the ranks",
				       err);
			if (r < 0)
				return r;
		}
	for (int got = 0; got < c->rank * K; got++) {
		int fd = accept_by(lfd, deadline, err);
		if (fd < 0)
			return fd;
		struct link_hello h;
		int r = io_all(fd, &h, sizeof(h), false, deadline, "connecting the ranks", err);
		if (r < 0) {
			close(fd);
			return r;
		}
		if (h.magic != COLL_MAGIC || h.rank < 0 || h.rank >= c->rank || h.conn < 0 ||
		    h.conn >= K || c->fds[h.rank * K + h.conn] >= 0) {
			close(fd);
			return tk_errorf(err, -EPROTO,
					 "connecting the ranks: a bad hello (rank %d, "
					 "connection %d)",
					 h.rank, h.conn);
		}
		c->fds[h.rank * K + h.conn] = fd;
	}
	for (int i = 0; i < n * K; i++)
		if (c->fds[i] >= 0)
			set_nonblock(c->fds[i], true);
	return 0;
}

int coll_init(struct coll_comm **ret, int rank, int size, const char *root,
	      const struct coll_opts *opts, struct tk_error *err)
{
	*ret = NULL;
	if (size < 1 || size > COLL_MAX_RANKS || rank < 0 || rank >= size)
		return tk_errorf(err, -EINVAL, "rank %d of %d: ranks are 0 to size-1, size 1 to %d",
				 rank, size, COLL_MAX_RANKS);
	struct coll_comm *c = xcalloc(1, sizeof(*c));
	c->rank = rank;
	c->size = size;
	if (opts)
		c->o = *opts;
	if (c->o.timeout_ms <= 0)
		c->o.timeout_ms = 60000;
	if (c->o.small_bytes == 0)
		c->o.small_bytes = 64 << 10;
	c->K = c->o.conns_per_peer > 0 ? MIN(c->o.conns_per_peer, COLL_MAX_CONNS) : 4;
	c->fds = xmalloc(sizeof(int) * (size_t)size * (size_t)c->K);
	for (int i = 0; i < size * c->K; i++)
		c->fds[i] = -1;
	if (size == 1) {
		*ret = c;
		return 0;
	}
	int64_t deadline = tk_mono_ms() + c->o.timeout_ms;
	/* our own listener for the mesh, on every address */
	struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
	int lfd = listen_on(&any, err);
	if (lfd < 0) {
		coll_destroy(c);
		return lfd;
	}
	struct entry *table = xcalloc((size_t)size, sizeof(*table));
	char shm_name[COLL_SHM_NAME] = "";
	c->deadline = deadline;
	int r = rendezvous(c, root, table, shm_name, ntohs(any.sin_port), deadline, err);
	if (r >= 0 && shm_name[0]) {
		if (rank != 0)
			r = coll__shm_attach(c, shm_name, err);
		if (r >= 0)
			r = coll__shm_barrier(c,
					      err); /* everyone has it mapped: rank 0 unlinks it */
		if (r >= 0 && rank == 0)
			shm_unlink(shm_name);
	} else if (r >= 0) {
		r = mesh(c, lfd, table, deadline, err);
	}
	close(lfd);
	free(table);
	if (r < 0) {
		if (rank == 0 && shm_name[0])
			shm_unlink(shm_name);
		coll_destroy(c);
		return r;
	}
	*ret = c;
	return 0;
}

void coll_destroy(struct coll_comm *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->size * c->K; i++)
		if (c->fds[i] >= 0)
			close(c->fds[i]);
	coll__shm_release(c);
	free(c->fds);
	free(c->tmp);
	free(c);
}

/* ---- the primitive ---------------------------------------------------------------------- */

static uint8_t *tmp_of(struct coll_comm *c, size_t n)
{
	if (c->tmp_size < n) {
		free(c->tmp);
		c->tmp = xmalloc(n);
		c->tmp_size = n;
	}
	return c->tmp;
}

struct stripe {
	int fd;
	size_t off, len, done;
	size_t reduced; /* receive stripes: bytes already reduced into acc */
};

/* Where stripe k of a message of len bytes (in units of `unit` bytes) lies. */
static void stripe_of(size_t len, size_t unit, int K, int k, size_t *off, size_t *n)
{
	size_t units = len / unit;
	size_t a = units * (size_t)k / (size_t)K, b = units * (size_t)(k + 1) / (size_t)K;
	*off = a * unit;
	*n = (k == K - 1 ? len : b * unit) - *off;
}

/* Sends sbuf (slen bytes) to rank `to` while receiving rlen bytes from rank
 * `from` into rbuf; either side may be -1. With acc, what arrives is reduced
 * into acc (acc[i] = acc[i] op rbuf[i]) as it arrives. */
static int exchange(struct coll_comm *c, int to, const void *sbuf, size_t slen, int from,
		    void *rbuf, size_t rlen, void *acc, enum coll_dtype t, enum coll_op op,
		    struct tk_error *err)
{
	int K = c->K;
	/* both sides must cut a message the same way, whatever they know of its
	 * type: stripes break at multiples of 8 bytes, so never inside an element */
	size_t es = acc ? coll_dtype_size(t) : 1, unit = 8;
	struct stripe ss[COLL_MAX_CONNS], rs[COLL_MAX_CONNS];
	struct pollfd pf[2 * COLL_MAX_CONNS];
	int left = 0;
	for (int k = 0; k < K; k++) {
		ss[k] = (struct stripe){-1, 0, 0, 0, 0};
		rs[k] = (struct stripe){-1, 0, 0, 0, 0};
		if (to >= 0 && slen) {
			ss[k].fd = c->fds[to * K + k];
			stripe_of(slen, unit, K, k, &ss[k].off, &ss[k].len);
			left += ss[k].len > 0;
		}
		if (from >= 0 && rlen) {
			rs[k].fd = c->fds[from * K + k];
			stripe_of(rlen, unit, K, k, &rs[k].off, &rs[k].len);
			left += rs[k].len > 0;
		}
	}
	const uint8_t *sp = sbuf;
	uint8_t *rp = rbuf, *ap = acc;
	while (left > 0) {
		int np = 0;
		for (int k = 0; k < K; k++) {
			if (ss[k].done < ss[k].len)
				pf[np++] = (struct pollfd){ss[k].fd, POLLOUT, 0};
			if (rs[k].done < rs[k].len)
				pf[np++] = (struct pollfd){rs[k].fd, POLLIN, 0};
		}
		int l = left_ms(c->deadline);
		int pr = l ? poll(pf, (nfds_t)np, l) : 0;
		if (pr == 0) {
			c->broken = true;
			if (to >= 0 && from >= 0 && to != from)
				return tk_errorf(
					err, -ETIMEDOUT,
					"rank %d: timed out after %d ms exchanging with ranks "
					"%d and %d",
					c->rank, c->o.timeout_ms, to, from);
			return tk_errorf(err, -ETIMEDOUT,
					 "rank %d: timed out after %d ms exchanging with rank %d",
					 c->rank, c->o.timeout_ms, to >= 0 ? to : from);
		}
		if (pr < 0 && errno != EINTR)
			return tk_errorf(err, -errno, "poll: %s", strerror(errno));
		for (int k = 0; k < K; k++) {
			struct stripe *s = &ss[k];
			while (s->done < s->len) {
				ssize_t w = send(s->fd, sp + s->off + s->done, s->len - s->done,
						 MSG_NOSIGNAL | MSG_DONTWAIT);
				if (w > 0) {
					s->done += (size_t)w;
					if (s->done == s->len)
						left--;
					continue;
				}
				if (w < 0 &&
				    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
					break;
				c->broken = true;
				if (w < 0 && errno != EPIPE && errno != ECONNRESET)
					return tk_errorf(err, -errno,
							 "rank %d: sending to rank %d: %s", c->rank,
							 to, strerror(errno));
				return tk_errorf(
					err, -EPIPE,
					"rank %d: sending to rank %d: rank gone (connection "
					"closed)",
					c->rank, to);
			}
			struct stripe *r = &rs[k];
			while (r->done < r->len) {
				ssize_t got = recv(r->fd, rp + r->off + r->done, r->len - r->done,
						   MSG_DONTWAIT);
				if (got > 0) {
					r->done += (size_t)got;
					if (acc) {
						/* reduce what arrived, whole elements */
						size_t upto = r->done / es * es;
						if (upto > r->reduced) {
							coll_reduce(ap + r->off + r->reduced,
								    rp + r->off + r->reduced,
								    (upto - r->reduced) / es, t,
								    op);
							r->reduced = upto;
						}
					}
					if (r->done == r->len)
						left--;
					continue;
				}
				if (got < 0 &&
				    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
					break;
				c->broken = true;
				if (got < 0 && errno != ECONNRESET)
					return tk_errorf(err, -errno,
							 "rank %d: receiving from rank %d: %s",
							 c->rank, from, strerror(errno));
				return tk_errorf(
					err, -ECONNRESET,
					"rank %d: receiving from rank %d: rank gone (connection "
					"closed)",
					c->rank, from);
			}
		}
	}
	return 0;
}

/* ---- algorithms ------------------------------------------------------------------------- */

static int begin(struct coll_comm *c, struct tk_error *err)
{
	if (c->broken)
		return tk_errorf(err, -EPIPE,
				 "rank %d: an earlier call failed; the communicator "
				 "cannot be used",
				 c->rank);
	c->deadline = tk_mono_ms() + c->o.timeout_ms;
	return 0;
}

static size_t chunk_off(size_t count, int n, int i)
{
	size_t base = count / (size_t)n, extra = count % (size_t)n;
	return base * (size_t)i + MIN((size_t)i, extra);
}

static size_t chunk_len(size_t count, int n, int i)
{
	return count / (size_t)n + ((size_t)i < count % (size_t)n ? 1 : 0);
}

static int mod(int a, int n)
{
	return ((a % n) + n) % n;
}

/* Recursive doubling; ranks past the largest power of two fold in first. */
static int allreduce_rd(struct coll_comm *c, void *buf, size_t count, enum coll_dtype t,
			enum coll_op op, struct tk_error *err)
{
	int n = c->size, r = c->rank;
	size_t bytes = count * coll_dtype_size(t);
	/* what arrives, and a copy of what we send (buf changes while it goes) */
	uint8_t *tmp = tmp_of(c, 2 * bytes), *out = tmp + bytes;
	int p2 = 1;
	while (p2 * 2 <= n)
		p2 *= 2;
	int rem = n - p2, vr, rc;
	if (r < 2 * rem) {
		if (r % 2 == 0) {
			/* hand our data to the odd neighbour, take the result back later */
			if ((rc = exchange(c, r + 1, buf, bytes, -1, NULL, 0, NULL, t, op, err)) <
			    0)
				return rc;
			return exchange(c, -1, NULL, 0, r + 1, buf, bytes, NULL, t, op, err);
		}
		if ((rc = exchange(c, -1, NULL, 0, r - 1, tmp, bytes, buf, t, op, err)) < 0)
			return rc;
		vr = r / 2;
	} else {
		vr = r - rem;
	}
	for (int mask = 1; mask < p2; mask <<= 1) {
		int pv = vr ^ mask;
		int peer = pv < rem ? pv * 2 + 1 : pv + rem;
		memcpy(out, buf, bytes);
		if ((rc = exchange(c, peer, out, bytes, peer, tmp, bytes, buf, t, op, err)) < 0)
			return rc;
	}
	if (r < 2 * rem)
		return exchange(c, r - 1, buf, bytes, -1, NULL, 0, NULL, t, op, err);
	return 0;
}

/* Ring: reduce-scatter (rank r ends with chunk r), then all-gather. */
static int allreduce_ring(struct coll_comm *c, void *buf, size_t count, enum coll_dtype t,
			  enum coll_op op, struct tk_error *err)
{
	int n = c->size, r = c->rank, right = mod(r + 1, n), left = mod(r - 1, n), rc;
	size_t es = coll_dtype_size(t);
	uint8_t *b = buf, *tmp = tmp_of(c, chunk_len(count, n, 0) * es);
	for (int s = 0; s < n - 1; s++) {
		int cs = mod(r - 1 - s, n), cr = mod(r - 2 - s, n);
		rc = exchange(c, right, b + chunk_off(count, n, cs) * es,
			      chunk_len(count, n, cs) * es, left, tmp, chunk_len(count, n, cr) * es,
			      b + chunk_off(count, n, cr) * es, t, op, err);
		if (rc < 0)
			return rc;
	}
	for (int s = 0; s < n - 1; s++) {
		int cs = mod(r - s, n), cr = mod(r - s - 1, n);
		rc = exchange(c, right, b + chunk_off(count, n, cs) * es,
			      chunk_len(count, n, cs) * es, left, b + chunk_off(count, n, cr) * es,
			      chunk_len(count, n, cr) * es, NULL, t, op, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static bool valid(struct coll_comm *c, enum coll_dtype t, enum coll_op op, struct tk_error *err)
{
	if ((unsigned)t >= COLL_DTYPE_MAX || (unsigned)op >= COLL_OP_MAX) {
		tk_errorf(err, -EINVAL, "unknown data type or operation");
		return false;
	}
	return true;
}

int coll_allreduce(struct coll_comm *c, const void *send, void *recv, size_t count,
		   enum coll_dtype t, enum coll_op op, struct tk_error *err)
{
	if (!valid(c, t, op, err))
		return -EINVAL;
	int rc = begin(c, err);
	if (rc < 0)
		return rc;
	size_t bytes = count * coll_dtype_size(t);
	if (c->shm)
		return coll__shm_allreduce(c, send, recv, count, t, op, err);
	if (send != recv)
		memmove(recv, send, bytes);
	if (c->size == 1 || count == 0)
		return 0;
	if (bytes <= c->o.small_bytes || count < (size_t)c->size)
		return allreduce_rd(c, recv, count, t, op, err);
	return allreduce_ring(c, recv, count, t, op, err);
}

int coll_reduce_scatter(struct coll_comm *c, const void *send, void *recv, size_t count,
			enum coll_dtype t, enum coll_op op, struct tk_error *err)
{
	if (!valid(c, t, op, err))
		return -EINVAL;
	int rc = begin(c, err);
	if (rc < 0)
		return rc;
	if (c->shm)
		return coll__shm_reduce_scatter(c, send, recv, count, t, op, err);
	int n = c->size, r = c->rank, right = mod(r + 1, n), left = mod(r - 1, n);
	size_t bytes = count * coll_dtype_size(t);
	const uint8_t *in = send;
	if (n == 1 || count == 0) {
		memmove(recv, in, bytes);
		return 0;
	}
	/* cur: the partial sum we pass on; it starts as our own block r-1 */
	uint8_t *both = tmp_of(c, 2 * bytes), *cur = both, *nxt = both + bytes;
	memcpy(cur, in + (size_t)mod(r - 1, n) * bytes, bytes);
	for (int s = 0; s < n - 1; s++) {
		int cr = mod(r - 2 - s, n);
		memcpy(nxt, in + (size_t)cr * bytes, bytes);
		rc = exchange(c, right, cur, bytes, left, recv, bytes, nxt, t, op, err);
		if (rc < 0)
			return rc;
		uint8_t *x = cur;
		cur = nxt;
		nxt = x;
	}
	memcpy(recv, cur, bytes);
	return 0;
}

int coll_allgather(struct coll_comm *c, const void *send, void *recv, size_t bytes,
		   struct tk_error *err)
{
	int rc = begin(c, err);
	if (rc < 0)
		return rc;
	if (c->shm)
		return coll__shm_allgather(c, send, recv, bytes, err);
	int n = c->size, r = c->rank, right = mod(r + 1, n), left = mod(r - 1, n);
	uint8_t *out = recv;
	memmove(out + (size_t)r * bytes, send, bytes);
	for (int s = 0; s < n - 1 && bytes; s++) {
		int cs = mod(r - s, n), cr = mod(r - s - 1, n);
		rc = exchange(c, right, out + (size_t)cs * bytes, bytes, left,
			      out + (size_t)cr * bytes, bytes, NULL, COLL_F32, COLL_SUM, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

#define BCAST_SEGMENT (1u << 20)

int coll_broadcast(struct coll_comm *c, void *buf, size_t bytes, int root, struct tk_error *err)
{
	if (root < 0 || root >= c->size)
		return tk_errorf(err, -EINVAL, "broadcast: root %d is not a rank of %d", root,
				 c->size);
	int rc = begin(c, err);
	if (rc < 0)
		return rc;
	if (c->shm)
		return coll__shm_broadcast(c, buf, bytes, root, err);
	int n = c->size, vr = mod(c->rank - root, n);
	uint8_t *b = buf;
	if (n == 1 || bytes == 0)
		return 0;
	if (bytes <= c->o.small_bytes) {
		/* binomial tree */
		int mask = 1;
		while (mask < n) {
			if (vr & mask) {
				rc = exchange(c, -1, NULL, 0, mod(vr - mask + root, n), b, bytes,
					      NULL, COLL_F32, COLL_SUM, err);
				if (rc < 0)
					return rc;
				break;
			}
			mask <<= 1;
		}
		for (mask >>= 1; mask > 0; mask >>= 1)
			if (vr + mask < n &&
			    (rc = exchange(c, mod(vr + mask + root, n), b, bytes, -1, NULL, 0, NULL,
					   COLL_F32, COLL_SUM, err)) < 0)
				return rc;
		return 0;
	}
	/* a pipelined chain: pass segment i on while segment i+1 arrives */
	int prev = vr > 0 ? mod(c->rank - 1, n) : -1, next = vr < n - 1 ? mod(c->rank + 1, n) : -1;
	size_t nseg = (bytes + BCAST_SEGMENT - 1) / BCAST_SEGMENT;
	for (size_t i = 0; i <= nseg; i++) {
		size_t so = (i - 1) * BCAST_SEGMENT, ro = i * BCAST_SEGMENT;
		size_t sl = i > 0 ? MIN(BCAST_SEGMENT, bytes - so) : 0;
		size_t rl = i < nseg ? MIN(BCAST_SEGMENT, bytes - ro) : 0;
		rc = exchange(c, next, b + (i > 0 ? so : 0), next >= 0 ? sl : 0, prev,
			      b + (i < nseg ? ro : 0), prev >= 0 ? rl : 0, NULL, COLL_F32, COLL_SUM,
			      err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int coll_barrier(struct coll_comm *c, struct tk_error *err)
{
	int rc = begin(c, err);
	if (rc < 0)
		return rc;
	if (c->shm)
		return coll__shm_barrier(c, err);
	int n = c->size, r = c->rank;
	uint8_t out = 1, in = 0;
	for (int k = 1; k < n; k <<= 1)
		if ((rc = exchange(c, mod(r + k, n), &out, 1, mod(r - k, n), &in, 1, NULL, COLL_F32,
				   COLL_SUM, err)) < 0)
			return rc;
	return 0;
}

int coll_sendrecv(struct coll_comm *c, int to, const void *sbuf, size_t slen, int from, void *rbuf,
		  size_t rlen, struct tk_error *err)
{
	int rc = begin(c, err);
	if (rc < 0)
		return rc;
	if (to >= c->size || from >= c->size || to == c->rank || from == c->rank)
		return tk_errorf(err, -EINVAL,
				 "rank %d: send to %d, receive from %d: peers are "
				 "other ranks from 0 to %d",
				 c->rank, to, from, c->size - 1);
	if (c->shm)
		return tk_errorf(err, -ENOTSUP,
				 "rank %d: point to point needs TCP; these ranks "
				 "share one host's memory",
				 c->rank);
	return exchange(c, to, sbuf, to >= 0 ? slen : 0, from, rbuf, from >= 0 ? rlen : 0, NULL,
			COLL_F32, COLL_SUM, err);
}

/* ---- a pattern for checking ----------------------------------------------------------- */

double coll_pattern(int r, size_t i)
{
	return (double)((int)((i * 7 + (size_t)r * 13) % 17) - 8);
}

void coll_pattern_fill(void *buf, size_t count, enum coll_dtype t, int r, size_t base)
{
	for (size_t i = 0; i < count; i++) {
		double v = coll_pattern(r, base + i);
		if (t == COLL_F32)
			((float *)buf)[i] = (float)v;
		else if (t == COLL_F64)
			((double *)buf)[i] = v;
		else
			((uint16_t *)buf)[i] = coll_float_to_bf16((float)v);
	}
}

double coll_element(const void *buf, size_t i, enum coll_dtype t)
{
	if (t == COLL_F32)
		return ((const float *)buf)[i];
	if (t == COLL_F64)
		return ((const double *)buf)[i];
	return coll_bf16_to_float(((const uint16_t *)buf)[i]);
}

double coll_pattern_reduced(int n, size_t i, enum coll_op op)
{
	double a = coll_pattern(0, i);
	for (int r = 1; r < n; r++) {
		double v = coll_pattern(r, i);
		a = op == COLL_SUM ? a + v : op == COLL_MAX ? fmax(a, v) : fmin(a, v);
	}
	return a;
}
