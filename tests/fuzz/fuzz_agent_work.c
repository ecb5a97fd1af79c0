/* The server's answer to a work long-poll, as an agent reads it. */
#include "fuzz.h"

#include <stdio.h>

#include "model/wire.h"

FUZZ_WIRE_ROUND_TRIP(wire_work, wire_work_release)
