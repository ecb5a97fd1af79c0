"""Data-parallel training (DistributedDataParallel over Gloo) that
checkpoints through tenk's protocol: every EVERY steps local rank 0 of each
node saves model and optimizer into TENK_CHECKPOINT_DIR/step-NNNNNN/, and
after a barrier of every rank marks the tag complete (.tenk-commit). It
resumes from TENK_RESTORE_TAG when tenk restored one. Each step's batch is
drawn from the step and the rank alone, so a resumed run computes what an
uninterrupted one does. Rank 0 writes the final parameters' bytes (hex) to
OUT/final.hex; every rank appends "time attempt step loss" lines to
OUT/steps-RANK.log, and rank 0 "step=N loss=X" to $TENK_METRICS (what
tenk measures goodput by). EVERY may instead list the steps to save at
by attempt ("1:3,2:6": step 3 in attempt 1, step 6 in attempt 2).

With CKPT_JIT=SIG set (USR2), a rank whose step fails (a peer died) or
that gets SIG writes the state of the last step done on the way out: it
waits up to a minute for SIG (what tenk sends with --ckpt-signal), then
local rank 0 saves that step's tag and marks it with no barrier (the gang
is broken), notes "attempt step signalled" in OUT/jit-RANK and waits to be
stopped. With CKPT_JIT_EXIT=1 as well, a rank whose step fails saves at
once and exits 1 (its exit is what tells tenk of the failure where the
peer's host died and no task of it can).

With CKPT_OVERLAP=DIR set (a folder every host sees), each rank runs the
flock checker of test_fencing.py first: a shared lock on DIR/attempt-N for
its life, and a probe of DIR/attempt-(N-1) that fails while any rank of the
attempt before still lives, noted as a line in DIR/overlaps.

Usage: ckpt_train.py OUT STEPS EVERY [SECONDS_PER_STEP]
"""
import fcntl
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


def overlap_check(d, attempt, rank):
    """Holds this attempt's lock; notes a rank of the last attempt alive."""
    mine = open(f"{d}/attempt-{attempt}", "a")
    fcntl.flock(mine, fcntl.LOCK_SH)
    if attempt > 1:
        turn = open(f"{d}/turn-{attempt}", "a")  # siblings take turns at the probe
        fcntl.flock(turn, fcntl.LOCK_EX)
        prev = open(f"{d}/attempt-{attempt - 1}", "a")
        try:
            fcntl.flock(prev, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(prev, fcntl.LOCK_UN)
        except BlockingIOError:
            with open(f"{d}/overlaps", "a") as f:
                f.write(f"attempt {attempt} rank {rank} started while attempt {attempt - 1} "
                        f"ran\n")
        fcntl.flock(turn, fcntl.LOCK_UN)
    return mine


def save(ckdir, model, opt, step):
    tag = f"step-{step:06d}"
    os.makedirs(os.path.join(ckdir, tag), exist_ok=True)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step},
               os.path.join(ckdir, tag, "state.pt"))
    return tag


def mark(ckdir, tag, step):
    with open(os.path.join(ckdir, tag, ".tenk-commit"), "w") as f:
        json.dump({"step": step}, f)


def on_the_way_out(asked, out, rank, local, attempt, ckdir, model, opt, done, start):
    """The gang is broken: the step done is saved once tenk signals."""
    deadline = time.time() + 60
    now = os.environ.get("CKPT_JIT_EXIT") == "1"
    while not asked and not now and time.time() < deadline:
        time.sleep(0.05)
    if now and local == 0 and done > start:
        mark(ckdir, save(ckdir, model, opt, done), done)
        sys.exit(1)
    if asked and local == 0 and done > start:
        mark(ckdir, save(ckdir, model, opt, done), done)
    with open(os.path.join(out, f"jit-{rank}"), "a") as f:
        f.write(f"{attempt} {done} {int(bool(asked))}\n")
    time.sleep(120)  # until tenk stops the gang
    sys.exit(1)


def main():
    out, steps = sys.argv[1], int(sys.argv[2])
    lock = None
    if os.environ.get("CKPT_OVERLAP"):
        lock = overlap_check(os.environ["CKPT_OVERLAP"], int(os.environ["TENK_ATTEMPT"]),
                             os.environ["RANK"])
    at = {tuple(x.split(":")) for x in sys.argv[3].split(",")} if ":" in sys.argv[3] else None
    every = int(sys.argv[3]) if at is None else 0
    delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    local = int(os.environ["LOCAL_RANK"])
    attempt = os.environ.get("TENK_ATTEMPT", "?")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-2)
    ckdir = os.environ["TENK_CHECKPOINT_DIR"]
    start = 0
    tag = os.environ.get("TENK_RESTORE_TAG", "")
    if tag:
        state = torch.load(os.path.join(ckdir, tag, "state.pt"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
        assert str(start) == os.environ["TENK_RESTORE_STEP"], (start, os.environ)
    asked = []
    jit = os.environ.get("CKPT_JIT")
    if jit:
        signal.signal(getattr(signal, "SIG" + jit), lambda *a: asked.append(time.time()))
    log = open(os.path.join(out, f"steps-{rank}.log"), "a")
    for step in range(start + 1, steps + 1):
        if asked:  # signalled between steps: the last one is done
            on_the_way_out(asked, out, rank, local, attempt, ckdir, model, opt, step - 1, start)
        gen = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(64, 16, generator=gen)
        y = torch.sin(x.sum(1, keepdim=True))
        try:
            loss = ((ddp(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
        except RuntimeError:
            if not jit:
                raise
            # the all-reduce broke before the optimizer's step: the
            # parameters are those of the step before
            on_the_way_out(asked, out, rank, local, attempt, ckdir, model, opt, step - 1, start)
        opt.step()
        log.write(f"{time.time():.3f} {attempt} {step} {loss.item():.6f}\n")
        log.flush()
        if rank == 0 and os.environ.get("TENK_METRICS"):
            with open(os.environ["TENK_METRICS"], "a") as m:
                m.write(f"step={step} loss={loss.item():.6f}\n")
        if ((attempt, str(step)) in at) if at else step % every == 0:
            tag = f"step-{step:06d}"
            if local == 0:
                save(ckdir, model, opt, step)
            dist.barrier()  # every rank's part is written
            if local == 0:
                mark(ckdir, tag, step)
        time.sleep(delay)
    if rank == 0:
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        with open(os.path.join(out, "final.hex"), "w") as f:
            f.write(flat.numpy().tobytes().hex())
    dist.destroy_process_group()
    if lock:
        lock.close()


if __name__ == "__main__":
    main()
