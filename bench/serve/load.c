/*
 * bench/serve's client: CONNS keep-alive connections to HOST:PORT, each
 * sending GET / and waiting for its answer before the next (closed loop),
 * for SECONDS; prints requests per second and the latency's p50 and p99
 * in microseconds as JSON. One thread and epoll.
 *
 * Usage: load HOST PORT CONNS SECONDS
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES (1 << 24)

static const char req[] = "GET / HTTP/1.1\r\nHost: bench\r\n\r\n";

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

struct conn {
	int fd;
	int64_t sent_us;
	char buf[4096];
	size_t n;
};

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	int nconn = atoi(argv[3]);
	double secs = atof(argv[4]);
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons((uint16_t)atoi(argv[2]))};
	inet_pton(AF_INET, argv[1], &sin.sin_addr);
	int ep = epoll_create1(0), one = 1;
	struct conn *cs = calloc((size_t)nconn, sizeof(*cs));
	int64_t *lat = malloc(sizeof(int64_t) * MAX_SAMPLES);
	size_t nlat = 0;
	long errors = 0;
	for (int i = 0; i < nconn; i++) {
		cs[i].fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(cs[i].fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
			perror("connect");
			return 1;
		}
		setsockopt(cs[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct epoll_event e = {.events = EPOLLIN, .data.ptr = &cs[i]};
		epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &e);
		cs[i].sent_us = now_us();
		if (write(cs[i].fd, req, sizeof(req) - 1) < 0)
			errors++;
	}
	int64_t start = now_us(), end = start + (int64_t)(secs * 1e6);
	struct epoll_event evs[256];
	while (now_us() < end) {
		int n = epoll_wait(ep, evs, 256, 100);
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			ssize_t r = read(c->fd, c->buf + c->n, sizeof(c->buf) - c->n - 1);
			if (r <= 0) {
				errors++;
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
				continue;
			}
			c->n += (size_t)r;
			c->buf[c->n] = 0;
			/* an answer is whole once its headers and its 2 bytes are in */
			char *h = strstr(c->buf, "\r\n\r\n");
			if (!h || (size_t)(h + 4 - c->buf) + 2 > c->n)
				continue;
			int64_t t = now_us();
			if (strncmp(c->buf, "HTTP/1.1 200", 12) != 0)
				errors++;
			else if (nlat < MAX_SAMPLES)
				lat[nlat++] = t - c->sent_us;
			c->n = 0;
			c->sent_us = t;
			if (write(c->fd, req, sizeof(req) - 1) < 0)
				errors++;
		}
	}
	double took = (double)(now_us() - start) / 1e6;
	qsort(lat, nlat, sizeof(*lat), cmp);
	printf("{\"requests\": %zu, \"seconds\": %.3f, \"rps\": %.1f, \"p50_us\": %lld, "
	       "\"p99_us\": %lld, \"errors\": %ld}\n",
	       nlat, took, (double)nlat / took, nlat ? (long long)lat[nlat / 2] : 0LL,
	       nlat ? (long long)lat[nlat * 99 / 100] : 0LL, errors);
	return 0;
}
