"""A short data-parallel training run for the multi-host tests: linear
regression with DistributedDataParallel over Gloo, rendezvous by env:// from
the variables tenk sets. Each rank writes result-RANK.json into the folder
given as its argument: first and last loss, and whether every rank ended with
the same parameters."""
import json
import os
import sys

import torch
import torch.distributed as dist


def main():
    out = sys.argv[1]
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    w_true = torch.arange(16, dtype=torch.float32) / 16
    losses = []
    for _ in range(40):
        x = torch.randn(64, 16, generator=gen)
        y = x @ w_true + 0.01 * torch.randn(64, generator=gen)
        loss = ((ddp(x).squeeze(1) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / world)
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    everyone = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat)
    same = all(torch.equal(everyone[0], p) for p in everyone)
    result = {"rank": rank, "world": world, "first": losses[0], "last": losses[-1],
              "same": same, "node": os.environ.get("TENK_NODE_NAME"),
              "local_rank": int(os.environ.get("LOCAL_RANK", -1))}
    with open(os.path.join(out, f"result-{rank}.json"), "w") as f:
        json.dump(result, f)
    # every rank has written; then out without destroy_process_group(),
    # which in Debian's torch 1.13 can wait forever in Gloo's teardown once
    # the other rank has gone (seen with two jobs side by side, both ranks'
    # results written, one rank left in a futex for minutes)
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
