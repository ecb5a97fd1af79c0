"""bench/outage's training job: DistributedDataParallel over Gloo, one
rank a node, a step every STEP_S seconds, until OUT/go exists. Each rank
appends "ATTEMPT RANK what MONOTONIC STEP" lines to OUT/log (start: the
process began; first: its first step done; step lines every 10 steps);
rank 0 writes each step to $TENK_METRICS."""
import os
import sys
import time

import torch
import torch.distributed as dist

STEP_S = 0.2


def main():
    out = sys.argv[1]
    attempt = int(os.environ["TENK_ATTEMPT"])
    log = open(os.path.join(out, "log"), "a")

    def note(what, step=0):
        log.write(f"{attempt} {os.environ['RANK']} {what} {time.monotonic():.3f} {step}\n")
        log.flush()
    note("start")
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 1)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)
    metrics = os.environ.get("TENK_METRICS") if rank == 0 else None
    step = 0
    while True:
        x = torch.randn(32, 64, generator=gen)
        loss = (ddp(x).squeeze(1) - x.sum(1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step == 1:
            note("first", step)
        if step % 10 == 0:
            note("step", step)
        if metrics:
            with open(metrics, "a") as m:
                m.write(f"step={step} loss={loss.item():.5f}\n")
        # every rank stops at the same step: rank 0 says when
        stop = torch.tensor([1.0 if rank == 0 and os.path.exists(f"{out}/go") else 0.0])
        dist.all_reduce(stop)
        if stop.item() > 0:
            break
        time.sleep(STEP_S)
    note("end", step)
    dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    main()
