/*
 * bench/serve's replica: the least HTTP server that keeps connections
 * open (HTTP/1.1 keep-alive), one thread and epoll, answering every
 * request "200 ok" on $PORT, after WORK_US microseconds of the processor's
 * time (a replica's own work on a request; 0, the default: none, so that
 * what is measured is the network's and the forwarder's cost alone).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 256

struct conn {
	int fd;
	char buf[8192];
	size_t n;
};

static long work_us;

/* The request's work: the processor busy for work_us. */
static void work(void)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < work_us);
}

static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

int main(void)
{
	const char *p = getenv("PORT");
	if (!p)
		return 2;
	work_us = getenv("WORK_US") ? atol(getenv("WORK_US")) : 0;
	int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(p))};
	if (bind(l, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(l, 1024) < 0) {
		perror("listen");
		return 1;
	}
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}, evs[MAX_EVENTS];
	epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
	for (;;) {
		int n = epoll_wait(ep, evs, MAX_EVENTS, -1);
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			if (!c) {
				int fd;
				while ((fd = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
					c = calloc(1, sizeof(*c));
					c->fd = fd;
					struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
					epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
				}
				continue;
			}
			ssize_t r = read(c->fd, c->buf + c->n, sizeof(c->buf) - c->n - 1);
			if (r <= 0) {
				if (r < 0 && errno == EAGAIN)
					continue;
				close(c->fd);
				free(c);
				continue;
			}
			c->n += (size_t)r;
			c->buf[c->n] = 0;
			/* every whole request in the buffer gets its answer */
			char *end;
			while ((end = strstr(c->buf, "\r\n\r\n"))) {
				if (work_us)
					work();
				if (write(c->fd, answer, sizeof(answer) - 1) < 0)
					break;
				size_t used = (size_t)(end + 4 - c->buf);
				memmove(c->buf, c->buf + used, c->n - used + 1);
				c->n -= used;
			}
			if (c->n >= sizeof(c->buf) - 1)
				c->n = 0;
		}
	}
}
