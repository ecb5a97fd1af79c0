/*
 * TLS for the client through GnuTLS, loaded with dlopen on the first
 * https:// call: a command that speaks plain HTTP, or over the server's
 * local socket, never pays for loading it (about 2 ms here), and the CLI's
 * binary links nothing but libc and jansson.
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The part of GnuTLS the client uses, by the ABI of libgnutls.so.30. */
typedef struct gnutls_session_int *gnutls_session_t;
typedef struct gnutls_certificate_credentials_st *gnutls_certificate_credentials_t;
#define GNUTLS_CLIENT (1 << 1)
#define GNUTLS_NO_SIGNAL (1 << 6) /* send with MSG_NOSIGNAL */
#define GNUTLS_CRD_CERTIFICATE 1
#define GNUTLS_NAME_DNS 1
#define GNUTLS_E_AGAIN (-28)
#define GNUTLS_E_INTERRUPTED (-52)
#define GNUTLS_E_PREMATURE_TERMINATION (-110)
#define GNUTLS_SHUT_RDWR 0
#define GNUTLS_DEFAULT_HANDSHAKE_TIMEOUT ((unsigned int)-1)

static struct {
	bool tried, ok;
	char why[200];
	int (*global_init)(void);
	int (*cert_alloc)(gnutls_certificate_credentials_t *);
	void (*cert_free)(gnutls_certificate_credentials_t);
	int (*trust_file)(gnutls_certificate_credentials_t, const char *, int);
	int (*system_trust)(gnutls_certificate_credentials_t);
	int (*init)(gnutls_session_t *, unsigned int);
	void (*deinit)(gnutls_session_t);
	int (*default_priority)(gnutls_session_t);
	int (*credentials_set)(gnutls_session_t, int, void *);
	int (*server_name_set)(gnutls_session_t, int, const void *, size_t);
	void (*verify_cert)(gnutls_session_t, const char *, unsigned);
	void (*transport_int2)(gnutls_session_t, int, int);
	void (*handshake_timeout)(gnutls_session_t, unsigned int);
	int (*handshake)(gnutls_session_t);
	ssize_t (*send)(gnutls_session_t, const void *, size_t);
	ssize_t (*recv)(gnutls_session_t, void *, size_t);
	int (*bye)(gnutls_session_t, int);
	const char *(*strerror)(int);
	size_t (*pending)(gnutls_session_t);
} g;

#define GNUTLS_X509_FMT_PEM 1

static bool load(void)
{
	if (g.tried)
		return g.ok;
	g.tried = true;
	void *h = dlopen("libgnutls.so.30", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(g.why, sizeof(g.why), "cannot load GnuTLS (libgnutls.so.30): %s",
			 dlerror());
		return false;
	}
	struct {
		void **fn;
		const char *name;
	} syms[] = {
		{(void **)&g.global_init, "gnutls_global_init"},
		{(void **)&g.cert_alloc, "gnutls_certificate_allocate_credentials"},
		{(void **)&g.cert_free, "gnutls_certificate_free_credentials"},
		{(void **)&g.trust_file, "gnutls_certificate_set_x509_trust_file"},
		{(void **)&g.system_trust, "gnutls_certificate_set_x509_system_trust"},
		{(void **)&g.init, "gnutls_init"},
		{(void **)&g.deinit, "gnutls_deinit"},
		{(void **)&g.default_priority, "gnutls_set_default_priority"},
		{(void **)&g.credentials_set, "gnutls_credentials_set"},
		{(void **)&g.server_name_set, "gnutls_server_name_set"},
		{(void **)&g.verify_cert, "gnutls_session_set_verify_cert"},
		{(void **)&g.transport_int2, "gnutls_transport_set_int2"},
		{(void **)&g.handshake_timeout, "gnutls_handshake_set_timeout"},
		{(void **)&g.handshake, "gnutls_handshake"},
		{(void **)&g.send, "gnutls_record_send"},
		{(void **)&g.recv, "gnutls_record_recv"},
		{(void **)&g.bye, "gnutls_bye"},
		{(void **)&g.strerror, "gnutls_strerror"},
		{(void **)&g.pending, "gnutls_record_check_pending"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(syms); i++) {
		*syms[i].fn = dlsym(h, syms[i].name);
		if (!*syms[i].fn) {
			snprintf(g.why, sizeof(g.why), "GnuTLS has no %s", syms[i].name);
			return false;
		}
	}
	int r = g.global_init();
	if (r < 0) {
		snprintf(g.why, sizeof(g.why), "GnuTLS: %s", g.strerror(r));
		return false;
	}
	g.ok = true;
	return true;
}

struct tls {
	gnutls_session_t s;
	gnutls_certificate_credentials_t cred;
};

int tls_open(int fd, const char *host, const char *ca, int timeout_ms, struct tls **ret,
	     struct tk_error *err)
{
	*ret = NULL;
	if (!load())
		return tk_errorf(err, -ENOSYS, "%s", g.why);
	struct tls *t = xcalloc(1, sizeof(*t));
	int r = g.cert_alloc(&t->cred);
	if (r >= 0)
		r = ca ? g.trust_file(t->cred, ca, GNUTLS_X509_FMT_PEM) : g.system_trust(t->cred);
	if (r < 0) {
		tk_errorf(err, -EINVAL, "cannot read the CA %s: %s", ca ? ca : "of the system",
			  g.strerror(r));
		goto fail;
	}
	if (ca && r == 0) {
		tk_errorf(err, -EINVAL, "the CA file %s holds no certificate", ca);
		goto fail;
	}
	/* a peer gone mid-call (kill -9 with our bytes unread: a reset) must
	 * be an error, not SIGPIPE ending the CLI without a word */
	if ((r = g.init(&t->s, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL)) < 0 ||
	    (r = g.default_priority(t->s)) < 0 ||
	    (r = g.credentials_set(t->s, GNUTLS_CRD_CERTIFICATE, t->cred)) < 0) {
		tk_errorf(err, -EIO, "TLS: %s", g.strerror(r));
		goto fail;
	}
	/* a name is sent and checked; an address is only checked (the
	 * certificate's IP entries) */
	bool name = strspn(host, "0123456789.:") != strlen(host);
	if (name)
		g.server_name_set(t->s, GNUTLS_NAME_DNS, host, strlen(host));
	g.verify_cert(t->s, host, 0);
	g.transport_int2(t->s, fd, fd);
	g.handshake_timeout(t->s, (unsigned)timeout_ms);
	do
		r = g.handshake(t->s);
	while (r == GNUTLS_E_INTERRUPTED);
	if (r < 0) {
		tk_errorf(err, -EIO, "TLS with %s failed: %s", host, g.strerror(r));
		goto fail;
	}
	*ret = t;
	return 0;
fail:
	tls_close(t);
	return -EIO;
}

/* The socket's SO_RCVTIMEO and SO_SNDTIMEO bound each call: GnuTLS then
 * says GNUTLS_E_AGAIN, a timeout. */
ssize_t tls_send(struct tls *t, const void *buf, size_t n)
{
	ssize_t r;
	do
		r = g.send(t->s, buf, n);
	while (r == GNUTLS_E_INTERRUPTED);
	return r == GNUTLS_E_AGAIN ? -ETIMEDOUT : r < 0 ? -EIO : r;
}

ssize_t tls_recv(struct tls *t, void *buf, size_t n)
{
	ssize_t r;
	do
		r = g.recv(t->s, buf, n);
	while (r == GNUTLS_E_INTERRUPTED);
	if (r == GNUTLS_E_PREMATURE_TERMINATION)
		return 0; /* a peer that closed without a TLS goodbye: the end */
	return r == GNUTLS_E_AGAIN ? -ETIMEDOUT : r < 0 ? -EIO : r;
}

size_t tls_pending(struct tls *t)
{
	return g.pending(t->s);
}

void tls_close(struct tls *t)
{
	if (!t)
		return;
	if (t->s)
		g.deinit(t->s);
	if (t->cred)
		g.cert_free(t->cred);
	free(t);
}
