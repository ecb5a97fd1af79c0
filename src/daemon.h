/*
 * The daemons of the tenk program, for its command table (src/main.c):
 * `tenk up` (a server and an agent for this machine), `tenk server` and
 * `tenk agent`. Each runs until SIGINT or SIGTERM and returns the exit
 * status.
 */
#pragma once

#include "util/util.h"

int daemon_up(const struct tk_command *cmd, int argc, char **argv);
int daemon_server(const struct tk_command *cmd, int argc, char **argv);
int daemon_agent(const struct tk_command *cmd, int argc, char **argv);
int daemon_backup(const struct tk_command *cmd, int argc, char **argv);
int daemon_store(const struct tk_command *cmd, int argc, char **argv);
