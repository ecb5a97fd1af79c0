/*
 * cli: tenk's user commands that speak to the server (submit, queue, show,
 * cancel, wait, nodes, drain, resume, queues, classes, users, history). They
 * call the HTTP/JSON API through src/client, print tables for people, and
 * print the API's own objects with --json. No business logic lives here.
 *
 * Each command is one function for the program's table (src/main.c), which
 * passes the command's own row. The server is found through --server or
 * TENK_SERVER, the token through --token, --token-file or TENK_TOKEN; when
 * none is given, ./tenk-data (what `make up` creates) is tried.
 */
#pragma once

#include "client/client.h"
#include "util/util.h"

/* Exit statuses. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_ERROR 1
#define CLI_EXIT_USAGE 2

/* submit.c */
int cli_submit(const struct tk_command *cmd, int argc, char **argv);
int cli_queue(const struct tk_command *cmd, int argc, char **argv);
int cli_show(const struct tk_command *cmd, int argc, char **argv);
int cli_wait(const struct tk_command *cmd, int argc, char **argv);
/* submit.c */
int cli_update(const struct tk_command *cmd, int argc, char **argv);
int cli_run(const struct tk_command *cmd, int argc, char **argv);
/* logs.c */
int cli_logs(const struct tk_command *cmd, int argc, char **argv);
/* change.c */
int cli_cancel(const struct tk_command *cmd, int argc, char **argv);
int cli_hold(const struct tk_command *cmd, int argc, char **argv);
int cli_release(const struct tk_command *cmd, int argc, char **argv);
int cli_requeue(const struct tk_command *cmd, int argc, char **argv);
/* nodes.c */
int cli_nodes(const struct tk_command *cmd, int argc, char **argv);
int cli_audit(const struct tk_command *cmd, int argc, char **argv);
int cli_rollout(const struct tk_command *cmd, int argc, char **argv);
int cli_serve(const struct tk_command *cmd, int argc, char **argv);
int cli_images(const struct tk_command *cmd, int argc, char **argv);
int cli_drain(const struct tk_command *cmd, int argc, char **argv);
int cli_resume(const struct tk_command *cmd, int argc, char **argv);
/* admin.c */
int cli_queues(const struct tk_command *cmd, int argc, char **argv);
int cli_classes(const struct tk_command *cmd, int argc, char **argv);
int cli_pools(const struct tk_command *cmd, int argc, char **argv);
int cli_catalogue(const struct tk_command *cmd, int argc, char **argv);
int cli_reserve(const struct tk_command *cmd, int argc, char **argv);
int cli_reservations(const struct tk_command *cmd, int argc, char **argv);
int cli_users(const struct tk_command *cmd, int argc, char **argv);
/* history.c */
int cli_history(const struct tk_command *cmd, int argc, char **argv);
int cli_ckpt(const struct tk_command *cmd, int argc, char **argv);
/* acct.c */
int cli_acct(const struct tk_command *cmd, int argc, char **argv);
int cli_config(const struct tk_command *cmd, int argc, char **argv);
int cli_usage(const struct tk_command *cmd, int argc, char **argv);
