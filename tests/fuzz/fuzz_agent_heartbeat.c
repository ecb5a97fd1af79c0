/* An agent's heartbeat (POST /v1/agent/heartbeat). */
#include "fuzz.h"

#include <stdio.h>

#include "model/wire.h"

FUZZ_WIRE_ROUND_TRIP(wire_heartbeat, wire_heartbeat_release)
