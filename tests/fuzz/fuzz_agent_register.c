/* What an agent sends when it registers (POST /v1/agent/register). */
#include "fuzz.h"

#include <stdio.h>

#include "model/wire.h"

FUZZ_WIRE_ROUND_TRIP(wire_register, wire_register_release)
