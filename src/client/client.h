/*
 * client: the HTTP client of tenk's API that the CLI and `tenk validate
 * --nodes` share. Blocking calls, one at a time, with the server's
 * URL (https://, http:// or unix:PATH) and token found from flags, the
 * environment, or ./tenk-data (what `make up` creates). It knows no command: callers name the
 * method and the path, and get the answer's JSON or the server's error message.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "util/util.h"

struct client {
	char *url; /* the server asked now, one of urls; no trailing slash */
	/* the servers given (TENK_SERVER=A,B: standbys): a call goes to the
	 * next when one cannot be reached, and to the active when a standby
	 * names it */
	char **urls;
	int nurls;
	char *token; /* owned */
	char *ca; /* owned: the CA file HTTPS is verified against ($TENK_CA); NULL: the system's */
	/* plain HTTP to another machine allowed (--insecure-http,
	 * TENK_INSECURE_HTTP=1): the token then travels in the clear */
	bool insecure_http;
	long last_status; /* the last call's HTTP status (0: not reached) */
};

/* Finds the server (server, else $TENK_SERVER, else the cluster
 * $TENK_CLUSTER names, else ./tenk-data's, else the CLI's current cluster:
 * context.c), the token (token, else token_file, else $TENK_TOKEN, else the
 * cluster's token file or ./tenk-data/admin.token) and the CA ($TENK_CA,
 * else the cluster's, else ./tenk-data/tls/ca.pem where it exists).
 * Arguments are borrowed and may be NULL. On error err says what is
 * missing; release c either way. */
int client_init(struct client *c, const char *server, const char *token, const char *token_file,
		struct tk_error *err);
void client_release(struct client *c);

/* ---- the CLI's clusters (context.c) ---- */

/* One cluster of the configuration: its server URL(s), CA file and token
 * file (NULL: not said). */
struct client_ctx {
	char name[64];
	char *server, *ca, *token_file;
};
/* The configuration's file ($XDG_CONFIG_HOME/tenk/config.json, else
 * ~/.config/tenk/config.json; NULL without either). */
char *client_config_path(void);
/* The whole of it (an empty object where there is none yet). */
int client_config_load(json_t **ret, struct tk_error *err);
int client_config_save(json_t *cfg, struct tk_error *err);
/* Cluster name (NULL: the current one) into *ret: 1, 0 when no name was
 * asked and none is current, or < 0 with err (a name it does not hold, a
 * file that is not its). */
int client_context(const char *name, struct client_ctx *ret, struct tk_error *err);
void client_ctx_release(struct client_ctx *c);
/* HTTPS is verified against the CA in ca_file (a readable file). */
int client_set_ca(struct client *c, const char *ca_file, struct tk_error *err);
/* Calls the API; refuses (before any traffic) to send the token over plain
 * HTTP to another machine unless c->insecure_http. On a 2xx answer *ret is its JSON (caller owns
 * it); on an error answer the server's message is in err. *ret_status gets the HTTP status (0 when
 * the server was not reached). */
int client_call(struct client *c, const char *method, const char *path, json_t *body,
		long timeout_ms, json_t **ret, long *ret_status, struct tk_error *err);

/* A connection upgraded to another protocol (GET path with Upgrade: proto,
 * answered 101): bytes both ways, over TLS where the server's URL says
 * https. On another answer err has the server's message. */
struct client_stream;
int client_upgrade(struct client *c, const char *path, const char *proto, long timeout_ms,
		   struct client_stream **ret, struct tk_error *err);
/* Its socket, to poll for reading; and whether bytes wait that a poll
 * would not show (read with the upgrade's answer, or decrypted already). */
int client_stream_fd(const struct client_stream *s);
bool client_stream_buffered(const struct client_stream *s);
/* Some bytes: their number, 0 at the end, -EAGAIN when none are there now,
 * or < 0. */
ssize_t client_stream_recv(struct client_stream *s, void *buf, size_t n);
/* All of buf, or < 0. */
int client_stream_send(struct client_stream *s, const void *buf, size_t n);
void client_stream_close(struct client_stream *s);
