/*
 * `tenk sim`: the simulator's command line, for the program's command table
 * (src/main.c). The simulator itself, which tests and benchmarks link, is
 * sim.h; this header holds only the command, so that the library's
 * interface carries no command-line entry.
 */
#pragma once

#include "util/util.h"

/* tenk sim [OPTIONS]; argv[0] is "sim". Returns the exit status. */
int sim_main(const struct tk_command *cmd, int argc, char **argv);
