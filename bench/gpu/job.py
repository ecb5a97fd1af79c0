#!/usr/bin/env python3
"""A GPU job for bench/gpu/run: says which device it was given, then keeps
it busy with bf16 matrix products for SECONDS, so that the node's telemetry
and the attempt's energy have something to show. Exits 0 when every
product checked was exact, 1 otherwise, 2 without a GPU."""
import os
import sys
import time

import torch

secs = float(sys.argv[1]) if len(sys.argv) > 1 else 15
print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"), flush=True)
for line in open("/proc/self/cgroup"):
    if line.startswith("0::"):  # cgroup v2: where the job is, and its memory limit
        path = "/sys/fs/cgroup" + line[3:].strip()
        try:
            limit = open(path + "/memory.max").read().strip()
        except OSError:
            limit = "(no memory controller)"
        print(f"cgroup {line[3:].strip()}, memory.max {limit}", flush=True)
if not torch.cuda.is_available():
    print("no GPU visible to the job", flush=True)
    sys.exit(2)
print("device:", torch.cuda.get_device_name(0), "count:", torch.cuda.device_count(), flush=True)
n = 8192
x = torch.full((n, n), 1.0, device="cuda", dtype=torch.bfloat16)
y = torch.empty_like(x)
steps, t0 = 0, time.monotonic()
while time.monotonic() - t0 < secs:
    for _ in range(50):
        torch.matmul(x, x, out=y)
    torch.cuda.synchronize()
    steps += 50
ok = bool((y == n).all().item())
dt = time.monotonic() - t0
print(f"{steps} products in {dt:.1f} s: {2.0 * n ** 3 * steps / dt / 1e12:.0f} TFLOP/s, exact: {ok}",
      flush=True)
sys.exit(0 if ok else 1)
