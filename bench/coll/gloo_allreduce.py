"""PyTorch's Gloo all_reduce on float sums, timed as tenk bench times its own
(warm-up runs, then the mean of timed runs, the slowest rank's). Prints one
JSON object per size on rank 0. Rank, size and rendezvous come from RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
Usage: gloo_allreduce.py MINBYTES MAXBYTES FACTOR ITERS WARMUP"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    minb, maxb, f, iters, warm = (int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]),
                                  int(sys.argv[4]), int(sys.argv[5]))
    dist.init_process_group("gloo")
    n = dist.get_world_size()
    size = float(minb)
    while size <= maxb:
        count = int(size) // 4
        t = torch.zeros(count, dtype=torch.float32)
        for _ in range(warm):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        us = torch.tensor([(time.perf_counter() - t0) / iters * 1e6], dtype=torch.float64)
        dist.all_reduce(us, op=dist.ReduceOp.MAX)
        if dist.get_rank() == 0:
            algbw = count * 4 / (us.item() * 1e3)
            print(json.dumps({"size": count * 4, "time_us": round(us.item(), 2),
                              "busbw_gbs": round(algbw * 2 * (n - 1) / n, 4)}), flush=True)
        size *= f
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
