/*
 * server: tenk's controller. One libuv loop owns all state; the HTTP API
 * (libmicrohttpd, driven from the loop) changes it; the pure scheduler
 * decides placements; the store makes every change durable before it is
 * acted on or acknowledged.
 */
#pragma once

#include <stdint.h>
#include <uv.h>

#include "util/util.h"

struct server;

struct server_config {
	const char *data_dir;	    /* borrowed; holds tenk.db and the tokens */
	const char *listen;	    /* "HOST:PORT"; port 0 picks a free one */
	const char *catalogue_path; /* optional JSON overrides; borrowed */
	const char *config_path;    /* scheduling configuration; default DATA/config.json */
	/* the store: a file, or a PostgreSQL URL (store.h); NULL: config.json's
	 * "store", else DATA/tenk.db. Borrowed. */
	const char *store;
	int64_t node_timeout_ms; /* an agent silent this long is DOWN */
	int64_t longpoll_ms;	 /* how long a long-poll waits at most */
	int max_node_requeues;	 /* requeues of a job for lost nodes */
	int64_t keep_settled_ms; /* a settled job stays in memory this long */
	/* a folder that held a cluster starts with an empty or missing store
	 * only when told (init); rows that do not decode are set aside
	 * (quarantine) rather than stopping the start */
	bool init;
	bool quarantine_bad_rows;
	/* TLS: the server's certificate (chain) and key, PEM files; NULL: one
	 * issued by the cluster CA the server keeps in DATA/tls; plain HTTP
	 * only with insecure_http */
	const char *tls_cert;
	const char *tls_key;
	bool insecure_http;
	/* connections at most (0: SERVER_MAX_CONNECTIONS), and how long a
	 * connection may take to send a request's headers (from its opening
	 * or the last answer) and then its body */
	int max_connections;
	int64_t request_timeout_ms;
	/* jobs' MASTER_PORT: one of SERVER_MASTER_PORTS ports from this one on
	 * the head node (several clusters on one machine each take a range);
	 * 0: from 29500 */
	int master_port_first;
};

#define SERVER_MASTER_PORTS 512

/* Fills c with defaults (listen 127.0.0.1:7480, timeout 30 s, ...). */
void server_config_init(struct server_config *c);

/* Opens the store in cfg->data_dir (creating the folder, the database and
 * the tokens on first start), loads the state, and starts listening on loop.
 * The URL it serves is written to DATA_DIR/server.url. */
int server_create(uv_loop_t *loop, const struct server_config *cfg, struct server **ret,
		  struct tk_error *err);

/* The base URL, e.g. "http://127.0.0.1:7480". Borrowed. */
const char *server_url(const struct server *s);
/* DATA/tls/ca.pem when the server serves a certificate of its own CA,
 * else NULL. Borrowed. */
const char *server_ca_file(const struct server *s);
/* The local socket it serves the API on too (absolute; NULL: none). */
const char *server_local_socket(const struct server *s);
/* The token agents join with. Borrowed. */
const char *server_agent_token(const struct server *s);

/* Stops accepting work, makes everything durable, answers waiting
 * long-polls, closes the listener and every handle, then calls done_cb
 * (from the loop). Call server_destroy after. */
void server_stop(struct server *s, void (*done_cb)(void *arg), void *arg);
void server_destroy(struct server *s);
