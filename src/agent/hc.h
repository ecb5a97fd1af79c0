/*
 * Private to src/agent: an asynchronous HTTP client on the agent's libuv
 * loop, built on libcurl's multi interface. Connections are kept alive and
 * reused; every request has a timeout; no proxy is ever used.
 */
#pragma once

#include <uv.h>

#define HC_MAX_RESPONSE (64 * 1024 * 1024)

struct hc;
struct hc_req;

/* Called once per request from the loop. status is the HTTP status, or 0 on
 * a transport failure, with `error` saying what failed. body is borrowed. */
typedef void (*hc_done_cb)(void *arg, long status, const char *body, size_t len, const char *error);

struct hc *agent__hc_create(uv_loop_t *loop);
/* HTTPS is verified against the CA of ca_file (NULL: the system's). */
void agent__hc_set_ca(struct hc *hc, const char *ca_file);
/* How long a connection may take to open (default 10 s). */
void agent__hc_set_connect_timeout(struct hc *hc, long ms);
/* At most n connections to one server at once (0: no limit); requests
 * beyond wait for one to be free. */
void agent__hc_set_max_connections(struct hc *hc, long n);
/* Starts a request. body (may be NULL) is copied. The returned handle stays
 * valid until cb runs or agent__hc_cancel is called. */
struct hc_req *agent__hc_request(struct hc *c, const char *method, const char *url,
				 const char *token, const char *body, long timeout_ms,
				 hc_done_cb cb, void *arg);
/* agent__hc_request from the local address `from` (NULL: any). */
struct hc_req *agent__hc_request_from(struct hc *c, const char *from, const char *method,
				      const char *url, const char *token, const char *body,
				      long timeout_ms, hc_done_cb cb, void *arg);
/* Abandons a request; its callback will not run. */
void agent__hc_cancel(struct hc_req *r);
/* Cancels everything and closes the client's handles; closed_cb runs when
 * the memory is gone. */
void agent__hc_destroy(struct hc *c, void (*closed_cb)(void *arg), void *arg);
