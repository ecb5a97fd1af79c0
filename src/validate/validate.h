/*
 * validate: proving nodes and the cluster healthy, layer by layer (DESIGN.md
 * section 6). So far: `tenk bench`, the collective benchmarks over coll.
 */
#pragma once

#include <jansson.h>

#include "coll/coll.h"
#include "util/util.h"

/* tenk bench COLLECTIVE [OPTIONS]; argv[0] is "bench". */
int bench_main(int argc, char **argv);
