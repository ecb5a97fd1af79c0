#!/usr/bin/env python3
"""A job given no GPU tries to open every NVIDIA device of its node: each
should be refused (the attempt's cgroup denies the node's GPUs that are not
its own). Prints one line a device; exits 1 when one opened."""
import glob
import os
import sys

opened = 0
for d in sorted(glob.glob("/dev/nvidia[0-9]*")):
    try:
        os.close(os.open(d, os.O_RDWR))
        print(d, "opened", flush=True)
        opened += 1
    except OSError as e:
        print(d, "refused:", e.strerror, flush=True)
sys.exit(1 if opened else 0)
