/* Shared by the stand-ins for the GPU libraries (tests only). */
#pragma once

#define SHIM_DEVICE_BYTES (4u << 20)

int shim_ndev(void);
