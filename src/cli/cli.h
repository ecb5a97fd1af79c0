/*
 * cli: tenk's user commands (submit, queue, show, cancel, wait, nodes, drain,
 * resume). They speak HTTP/JSON to the server, print tables for people, and
 * print the API's own objects with --json. No business logic lives here.
 *
 * The server is found through --server or TENK_SERVER, the token through
 * --token, --token-file or TENK_TOKEN; when none is given, ./tenk-data (what
 * `make up` creates) is tried.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "util/util.h"

/* Exit statuses. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_ERROR 1
#define CLI_EXIT_USAGE 2

/* True when cmd names a CLI command. */
bool cli_has(const char *cmd);
/* Runs a command; argv[0] is its name. Returns the process exit status. */
int cli_run(int argc, char **argv);
/* Appends "  name   summary" lines for every command to sb. */
void cli_commands_help(struct strbuf *sb);

/* The HTTP client the commands (and tenk validate) use. */
struct client {
	char *url;
	char *token;
};

int client_init(struct client *c, const char *server, const char *token, const char *token_file,
		struct tk_error *err);
void client_release(struct client *c);
/* Calls the API. On a 2xx answer *ret is its JSON (caller owns it); on an
 * error answer the server's message is in err. *ret_status gets the HTTP
 * status (0 when the server was not reached). */
int client_call(struct client *c, const char *method, const char *path, json_t *body,
		long timeout_ms, json_t **ret, long *ret_status, struct tk_error *err);
