/* Private to src/cli. */
#pragma once

#include <jansson.h>

#include "cli.h"
#include "model/model.h"
