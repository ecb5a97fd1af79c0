/*
 * Private to src/client: the TLS layer (tls.c), GnuTLS loaded on first use.
 */
#pragma once

#include <sys/types.h>

#include "client.h"

struct tls;

/* A TLS session over connected socket fd with server host (its name, or
 * its address), verified against the CA file ca (NULL: the system's). */
int tls_open(int fd, const char *host, const char *ca, int timeout_ms, struct tls **ret,
	     struct tk_error *err);
/* Like send and recv: bytes moved, 0 at the end, or < 0 (-ETIMEDOUT). */
ssize_t tls_send(struct tls *t, const void *buf, size_t n);
ssize_t tls_recv(struct tls *t, void *buf, size_t n);
void tls_close(struct tls *t);
