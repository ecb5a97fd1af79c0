/* What an agent sends when it registers (POST /v1/agent/register). */
#include "fuzz.h"

#include <stdio.h>

#include "model/wire.h"

#define FUZZ_NOTHING(m) ((void)(m)) /* a registration owns nothing */

FUZZ_WIRE_ROUND_TRIP(wire_register, FUZZ_NOTHING)
