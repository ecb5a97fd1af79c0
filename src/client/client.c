/*
 * The HTTP client: blocking libcurl calls to the server's API (client.h).
 */
#include "client.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CLIENT_MAX_RESPONSE (256 * 1024 * 1024)

static size_t write_cb(char *data, size_t size, size_t n, void *userp)
{
	struct strbuf *sb = userp;
	if (sb->len + size * n > CLIENT_MAX_RESPONSE)
		return 0;
	strbuf_add(sb, data, size * n);
	return size * n;
}

static char *read_small(const char *path)
{
	char *text = NULL;
	if (tk_read_file(path, 4096, &text, NULL) < 0)
		return NULL;
	tk_strip(text);
	return text;
}

int client_init(struct client *c, const char *server, const char *token, const char *token_file,
		struct tk_error *err)
{
	memset(c, 0, sizeof(*c));
	/* once per client, before its first call (the CLI has no threads) */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	c->curl_inited = true;
	const char *url = server ? server : getenv("TENK_SERVER");
	if (url && *url) {
		c->url = xstrdup(url);
	} else {
		c->url = read_small("tenk-data/server.url");
		if (!c->url)
			return tk_errorf(err, -EINVAL,
					 "no server given: set TENK_SERVER (or pass --server URL); "
					 "`tenk up` prints it");
	}
	size_t n = strlen(c->url);
	while (n && c->url[n - 1] == '/')
		c->url[--n] = '\0';
	const char *ca = getenv("TENK_CA");
	if (ca && *ca)
		c->ca = xstrdup(ca);
	else if (access("tenk-data/tls/ca.pem", R_OK) == 0)
		c->ca = xstrdup("tenk-data/tls/ca.pem");
	const char *plain = getenv("TENK_INSECURE_HTTP");
	c->insecure_http = plain && strcmp(plain, "1") == 0;
	if (token && *token) {
		c->token = xstrdup(token);
	} else if (token_file) {
		c->token = read_small(token_file);
		if (!c->token)
			return tk_errorf(err, -EINVAL, "cannot read the token file %s", token_file);
	} else if (getenv("TENK_TOKEN") && *getenv("TENK_TOKEN")) {
		c->token = xstrdup(getenv("TENK_TOKEN"));
	} else {
		c->token = read_small("tenk-data/admin.token");
		if (!c->token)
			return tk_errorf(err, -EINVAL,
					 "no token given: set TENK_TOKEN (or pass --token or "
					 "--token-file); the admin token is in the server's data "
					 "folder, admin.token");
	}
	return 0;
}

int client_set_ca(struct client *c, const char *ca_file, struct tk_error *err)
{
	if (access(ca_file, R_OK) < 0)
		return tk_errorf(err, -errno, "--ca-file: cannot read %s: %s", ca_file,
				 strerror(errno));
	free(c->ca);
	c->ca = xstrdup(ca_file);
	return 0;
}

void client_release(struct client *c)
{
	free(c->url);
	free(c->token);
	free(c->ca);
	if (c->curl_inited)
		curl_global_cleanup();
	memset(c, 0, sizeof(*c));
}

int client_call(struct client *c, const char *method, const char *path, json_t *body,
		long timeout_ms, json_t **ret, long *ret_status, struct tk_error *err)
{
	c->last_status = 0;
	if (!c->insecure_http && tk_url_plain_remote(c->url))
		return tk_errorf(err, -EPERM,
				 "refusing to send the token over plain HTTP to %s, which is not "
				 "this machine: use its https:// URL, or give --insecure-http",
				 c->url);
	CURL *e = curl_easy_init();
	if (!e)
		return tk_errorf(err, -ENOMEM, "cannot start an HTTP client");
	char *url = xasprintf("%s%s", c->url, path);
	char *auth = xasprintf("Authorization: Bearer %s", c->token);
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	struct curl_slist *h = curl_slist_append(NULL, auth);
	h = curl_slist_append(h, "Expect:");
	if (text)
		h = curl_slist_append(h, "Content-Type: application/json");
	struct strbuf resp;
	strbuf_init(&resp);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	if (c->ca)
		curl_easy_setopt(e, CURLOPT_CAINFO, c->ca);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &resp);
	if (text)
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, text);
	CURLcode rc = curl_easy_perform(e);
	long status = 0;
	int r = 0;
	if (rc != CURLE_OK) {
		r = tk_errorf(err, -EIO, "cannot reach the tenk server at %s: %s", c->url,
			      curl_easy_strerror(rc));
		goto out;
	}
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	json_error_t jerr;
	json_t *j = json_loadb(resp.buf, resp.len, 0, &jerr);
	if (!j) {
		r = tk_errorf(err, -EBADMSG,
			      "the server at %s answered %ld with something that is "
			      "not JSON",
			      c->url, status);
		goto out;
	}
	if (status >= 400) {
		const char *msg = json_string_value(json_object_get(j, "error"));
		r = tk_errorf(err, -EPROTO, "%s", msg ? msg : "the server refused the request");
		json_decref(j);
		goto out;
	}
	*ret = j;
out:
	c->last_status = status;
	if (ret_status)
		*ret_status = status;
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	free(url);
	free(auth);
	free(text);
	strbuf_release(&resp);
	return r;
}
