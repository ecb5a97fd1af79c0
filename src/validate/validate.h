/*
 * validate: proving nodes and the cluster healthy, layer by layer (DESIGN.md
 * section 6): `tenk validate` on one node (validate.c, checks.c), on a set of
 * nodes through the server (cluster.c), and `tenk bench`, the collective
 * benchmarks over coll (bench.c).
 */
#pragma once

#include "util/util.h"

/* tenk bench COLLECTIVE [OPTIONS]; argv[0] is "bench". */
int validate_bench_main(const struct tk_command *cmd, int argc, char **argv);
/* tenk validate [OPTIONS]; argv[0] is "validate". */
int validate_main(const struct tk_command *cmd, int argc, char **argv);
