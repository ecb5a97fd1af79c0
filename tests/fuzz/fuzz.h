/* The entry point every fuzz target defines (libFuzzer's convention). */
#pragma once

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
