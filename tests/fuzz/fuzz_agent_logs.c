/* An agent's answer with task output (POST /v1/agent/logs). */
#include "fuzz.h"

#include <stdio.h>

#include "model/wire.h"

FUZZ_WIRE_ROUND_TRIP(wire_logs, wire_logs_release)
