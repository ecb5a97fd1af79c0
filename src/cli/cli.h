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

#include "client/client.h"
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
