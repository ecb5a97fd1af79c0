/*
 * TLS by default: a server given no certificate makes its own. On first
 * start it makes a cluster CA in DATA/tls (ca.pem, and ca.key readable by the
 * server alone); on every start it issues the server a fresh certificate from
 * that CA for the addresses it listens on, so a server moved to another
 * address or name is trusted again by the same ca.pem. Clients verify with
 * ca.pem (`--ca-file`, TENK_CA). GnuTLS, as libmicrohttpd uses it.
 */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CA_DAYS 3650	 /* the cluster CA: ten years */
#define SERVER_DAYS 1825 /* the server's certificate, issued again at each start */
#define MAX_SANS 64

struct sans {
	char dns[MAX_SANS][256];
	size_t ndns;
	unsigned char ip[MAX_SANS][16];
	size_t iplen[MAX_SANS];
	size_t nip;
};

static void san_dns(struct sans *s, const char *name)
{
	if (!*name || strlen(name) >= sizeof(s->dns[0]) || s->ndns == MAX_SANS)
		return;
	for (size_t i = 0; i < s->ndns; i++)
		if (strcmp(s->dns[i], name) == 0)
			return;
	snprintf(s->dns[s->ndns++], sizeof(s->dns[0]), "%s", name);
}

static void san_ip(struct sans *s, const struct sockaddr *sa)
{
	const void *raw;
	size_t len;
	if (sa->sa_family == AF_INET) {
		raw = &((const struct sockaddr_in *)sa)->sin_addr;
		len = 4;
	} else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_LINKLOCAL(a6)) /* needs a scope a URL cannot name portably */
			return;
		raw = a6;
		len = 16;
	} else {
		return;
	}
	if (s->nip == MAX_SANS)
		return;
	for (size_t i = 0; i < s->nip; i++)
		if (s->iplen[i] == len && memcmp(s->ip[i], raw, len) == 0)
			return;
	memcpy(s->ip[s->nip], raw, len);
	s->iplen[s->nip++] = len;
}

static bool wildcard(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
	if (ss->ss_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr);
	return false;
}

/* The names a client may reach the server by: the listen address (and the
 * name it was given as), or for a wildcard every address of this host; the
 * loopback names always, as the URL the server writes may be one. */
static void collect_sans(const char *host, const struct sockaddr_storage *ss, struct sans *s)
{
	struct sockaddr_in lo4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_in6 lo6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	san_dns(s, "localhost");
	san_ip(s, (struct sockaddr *)&lo4);
	san_ip(s, (struct sockaddr *)&lo6);
	if (!wildcard(ss)) {
		struct in6_addr probe;
		if (*host && inet_pton(AF_INET, host, &probe) != 1 &&
		    inet_pton(AF_INET6, host, &probe) != 1)
			san_dns(s, host);
		san_ip(s, (const struct sockaddr *)ss);
		return;
	}
	char name[256];
	if (gethostname(name, sizeof(name)) == 0) {
		name[sizeof(name) - 1] = '\0';
		san_dns(s, name);
	}
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs) == 0) {
		for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
			if (i->ifa_addr)
				san_ip(s, i->ifa_addr);
		freeifaddrs(ifs);
	}
}

/* One GnuTLS call: its failure named for the message. */
#define G(call, what)                                                                              \
	do {                                                                                       \
		int g_ = (call);                                                                   \
		if (g_ < 0) {                                                                      \
			r = tk_errorf(err, -EIO, "TLS: cannot %s: %s", what, gnutls_strerror(g_)); \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

static int new_key(gnutls_x509_privkey_t *key, struct tk_error *err)
{
	int r = 0;
	*key = NULL;
	G(gnutls_x509_privkey_init(key), "make a key");
	G(gnutls_x509_privkey_generate(*key, GNUTLS_PK_ECDSA,
				       GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0),
	  "make an ECDSA P-256 key");
	return 0;
out:
	if (*key)
		gnutls_x509_privkey_deinit(*key);
	*key = NULL;
	return r;
}

/* The fields every certificate here has: a random serial, a validity from an
 * hour ago (clocks disagree a little) for days, a common name and its key. */
static int cert_base(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const char *cn, int days,
		     struct tk_error *err)
{
	int r = 0;
	unsigned char serial[16];
	G(gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial)), "draw a serial number");
	serial[0] &= 0x7f; /* positive */
	serial[0] |= 0x01; /* and of its full length */
	time_t now = time(NULL);
	G(gnutls_x509_crt_set_version(crt, 3), "set the version");
	G(gnutls_x509_crt_set_serial(crt, serial, sizeof(serial)), "set the serial");
	G(gnutls_x509_crt_set_activation_time(crt, now - 3600), "set the start of validity");
	G(gnutls_x509_crt_set_expiration_time(crt, now + (time_t)days * 86400),
	  "set the end of validity");
	G(gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
					(unsigned)strlen(cn)),
	  "set the common name");
	G(gnutls_x509_crt_set_key(crt, key), "set the key");
	unsigned char id[64];
	size_t idlen = sizeof(id);
	G(gnutls_x509_crt_get_key_id(crt, GNUTLS_KEYID_USE_SHA1, id, &idlen), "take the key's id");
	G(gnutls_x509_crt_set_subject_key_id(crt, id, idlen), "set the subject key id");
out:
	return r;
}

static int write_pem(const char *path, const gnutls_datum_t *d, mode_t mode, struct tk_error *err)
{
	int r = tk_write_file(path, d->data, d->size, mode);
	if (r < 0)
		return tk_errorf(err, r, "cannot write %s: %s", path, strerror(-r));
	return 0;
}

static int read_datum(const char *path, char **text, gnutls_datum_t *d, struct tk_error *err)
{
	size_t len;
	int r = tk_read_file(path, 1 << 20, text, &len);
	if (r < 0)
		return tk_errorf(err, r, "cannot read %s: %s", path, strerror(-r));
	d->data = (unsigned char *)*text;
	d->size = (unsigned)len;
	return 0;
}

/* Loads the cluster CA of dir, making it when dir holds none. */
static int load_ca(const char *dir, gnutls_x509_crt_t *crt, gnutls_x509_privkey_t *key,
		   struct tk_error *err)
{
	_cleanup_free_ char *cert_path = xasprintf("%s/ca.pem", dir);
	_cleanup_free_ char *key_path = xasprintf("%s/ca.key", dir);
	bool have_cert = access(cert_path, F_OK) == 0, have_key = access(key_path, F_OK) == 0;
	_cleanup_free_ char *cn = NULL;
	int r = 0;
	char *text = NULL;
	gnutls_datum_t d = {0};
	*crt = NULL;
	*key = NULL;
	if (have_cert != have_key)
		return tk_errorf(err, -ENOENT,
				 "%s has %s but not %s: restore it, or remove both and the server "
				 "makes a new CA (every client then needs the new ca.pem)",
				 dir, have_cert ? "ca.pem" : "ca.key",
				 have_cert ? "ca.key" : "ca.pem");
	G(gnutls_x509_crt_init(crt), "start a certificate");
	if (have_cert) {
		if ((r = read_datum(key_path, &text, &d, err)) < 0)
			goto out;
		G(gnutls_x509_privkey_init(key), "start a key");
		int g = gnutls_x509_privkey_import(*key, &d, GNUTLS_X509_FMT_PEM);
		free(text);
		text = NULL;
		if (g < 0) {
			r = tk_errorf(err, -EINVAL, "%s: not a PEM private key: %s", key_path,
				      gnutls_strerror(g));
			goto out;
		}
		if ((r = read_datum(cert_path, &text, &d, err)) < 0)
			goto out;
		g = gnutls_x509_crt_import(*crt, &d, GNUTLS_X509_FMT_PEM);
		if (g < 0) {
			r = tk_errorf(err, -EINVAL, "%s: not a PEM certificate: %s", cert_path,
				      gnutls_strerror(g));
			goto out;
		}
		free(text);
		return 0;
	}
	if ((r = new_key(key, err)) < 0)
		goto out;
	char hex[9];
	tk_random_hex(hex, 4);
	cn = xasprintf("tenk cluster CA %s", hex);
	if ((r = cert_base(*crt, *key, cn, CA_DAYS, err)) < 0)
		goto out;
	G(gnutls_x509_crt_set_basic_constraints(*crt, 1, 0), "make it a CA");
	G(gnutls_x509_crt_set_key_usage(*crt, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN),
	  "set the CA's key usage");
	G(gnutls_x509_crt_sign2(*crt, *crt, *key, GNUTLS_DIG_SHA256, 0), "sign the CA");
	G(gnutls_x509_privkey_export2(*key, GNUTLS_X509_FMT_PEM, &d), "write the CA's key");
	/* the key first: a ca.pem never stands without its key */
	r = write_pem(key_path, &d, 0600, err);
	gnutls_free(d.data);
	if (r < 0)
		goto out;
	G(gnutls_x509_crt_export2(*crt, GNUTLS_X509_FMT_PEM, &d), "write the CA");
	r = write_pem(cert_path, &d, 0644, err);
	gnutls_free(d.data);
	if (r < 0)
		goto out;
	log_info("made a cluster CA: %s (clients verify the server with it)", cert_path);
	return 0;
out:
	free(text);
	if (*crt)
		gnutls_x509_crt_deinit(*crt);
	if (*key)
		gnutls_x509_privkey_deinit(*key);
	*crt = NULL;
	*key = NULL;
	return r;
}

int64_t server_tls_not_after(const char *pem)
{
	gnutls_x509_crt_t crt;
	if (!pem || gnutls_x509_crt_init(&crt) < 0)
		return 0;
	gnutls_datum_t d = {(unsigned char *)pem, (unsigned)strlen(pem)};
	time_t t = (time_t)-1;
	if (gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM) == 0)
		t = gnutls_x509_crt_get_expiration_time(crt);
	gnutls_x509_crt_deinit(crt);
	return t == (time_t)-1 ? 0 : (int64_t)t;
}

int server_tls_self_issue(const char *data_dir, const char *host, const struct sockaddr_storage *ss,
			  char **ret_cert, char **ret_key, struct tk_error *err)
{
	_cleanup_free_ char *dir = xasprintf("%s/tls", data_dir);
	int r = tk_mkdir_p(dir, 0700);
	if (r < 0)
		return tk_errorf(err, r, "cannot make %s: %s", dir, strerror(-r));
	gnutls_x509_crt_t ca, crt = NULL;
	gnutls_x509_privkey_t ca_key, key = NULL;
	if ((r = load_ca(dir, &ca, &ca_key, err)) < 0)
		return r;
	gnutls_datum_t d = {0};
	char *cert_text = NULL, *key_text = NULL;
	_cleanup_free_ char *cert_path = xasprintf("%s/server.pem", dir);
	struct sans *sans = xcalloc(1, sizeof(*sans));
	collect_sans(host, ss, sans);
	if ((r = new_key(&key, err)) < 0)
		goto out;
	G(gnutls_x509_crt_init(&crt), "start a certificate");
	if ((r = cert_base(crt, key, "tenk server", SERVER_DAYS, err)) < 0)
		goto out;
	for (size_t i = 0; i < sans->ndns; i++)
		G(gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, sans->dns[i],
						       (unsigned)strlen(sans->dns[i]),
						       GNUTLS_FSAN_APPEND),
		  "name the server");
	for (size_t i = 0; i < sans->nip; i++)
		G(gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, sans->ip[i],
						       (unsigned)sans->iplen[i],
						       GNUTLS_FSAN_APPEND),
		  "name the server's addresses");
	G(gnutls_x509_crt_set_basic_constraints(crt, 0, -1), "make it a leaf");
	G(gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE), "set the key usage");
	G(gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0),
	  "make it a server's");
	unsigned char id[64];
	size_t idlen = sizeof(id);
	G(gnutls_x509_crt_get_subject_key_id(ca, id, &idlen, NULL), "take the CA's key id");
	G(gnutls_x509_crt_set_authority_key_id(crt, id, idlen), "set the authority key id");
	G(gnutls_x509_crt_sign2(crt, ca, ca_key, GNUTLS_DIG_SHA256, 0), "sign the certificate");
	G(gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &d), "write the certificate");
	cert_text = xstrndup((const char *)d.data, d.size);
	r = write_pem(cert_path, &d, 0644, err); /* to look at; the server serves from memory */
	gnutls_free(d.data);
	if (r < 0)
		goto out;
	G(gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &d), "write the server's key");
	key_text = xstrndup((const char *)d.data, d.size);
	gnutls_free(d.data);
	*ret_cert = cert_text;
	*ret_key = key_text;
	cert_text = NULL;
	r = 0;
out:
	free(cert_text);
	free(sans);
	if (crt)
		gnutls_x509_crt_deinit(crt);
	if (key)
		gnutls_x509_privkey_deinit(key);
	gnutls_x509_crt_deinit(ca);
	gnutls_x509_privkey_deinit(ca_key);
	return r;
}
