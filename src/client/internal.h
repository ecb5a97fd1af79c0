/*
 * Private to src/client: the TLS layer (tls.c), GnuTLS loaded on first use.
 */
#pragma once

#include <sys/types.h>

#include "client.h"

struct tls;

/* Where a URL points: http, https or unix, the host (or the socket's
 * path) and the port. */
struct target {
	bool tls, unix_socket;
	char host[256];
	char port[8];
	char path[4096];
};
int client_parse_url(const char *url, struct target *t, struct tk_error *err);
/* A chunked body, decoded in place: its length; -EAGAIN while short of its
 * last chunk, -EBADMSG when it is not chunked encoding. */
ssize_t client_unchunk(char *body, size_t n);

/* A TLS session over connected socket fd with server host (its name, or
 * its address), verified against the CA file ca (NULL: the system's). */
int tls_open(int fd, const char *host, const char *ca, int timeout_ms, struct tls **ret,
	     struct tk_error *err);
/* Like send and recv: bytes moved, 0 at the end, or < 0 (-ETIMEDOUT). */
ssize_t tls_send(struct tls *t, const void *buf, size_t n);
ssize_t tls_recv(struct tls *t, void *buf, size_t n);
/* Bytes received and decrypted, not yet taken by tls_recv. */
size_t tls_pending(struct tls *t);
void tls_close(struct tls *t);
