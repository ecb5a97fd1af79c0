/* An agent's report of task starts and exits (POST /v1/agent/events). */
#include "fuzz.h"

#include <stdio.h>

#include "model/wire.h"

FUZZ_WIRE_ROUND_TRIP(wire_events, wire_events_release)
