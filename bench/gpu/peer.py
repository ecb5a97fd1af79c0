#!/usr/bin/env python3
"""The figures tenk validate's GPU checks make, made again by PyTorch on the
same device in the same run (the peer): a bf16 matrix product of 8192 x 8192
x 8192 on tenk's own small-integer data and on random data, and a
device-to-device copy of 1 GiB (bytes read and written counted). Each is the
mean of `reps` after three warm-ups, timed with CUDA events, and also timed
as tenk times it (wall clock around `reps` launches after one warm-up); the
GEMM on tenk's data also sustained for over a second, as tenk validate's
full GEMM runs.
Prints one JSON object; {"skipped": why} without a GPU or PyTorch.

Usage: peer.py [REPS]
"""
import json
import sys
import time


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"skipped": f"no PyTorch: {e}"}))
        return
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "PyTorch sees no GPU"}))
        return
    dev = torch.device("cuda")
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cuda": torch.version.cuda, "reps": reps}

    def events(fn, warm=3):
        for _ in range(warm):
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) / 1e3 / reps

    def wall(fn):
        fn()
        torch.cuda.synchronize()
        t0 = time.monotonic()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        return (time.monotonic() - t0) / reps

    n = 8192
    i = torch.arange(n, device=dev)
    # tenk's data (src/validate/gpu.c): a(r,k) = (3r+7k)%5-2, b(k,j) = (5k+3j)%5-2
    a = ((i[:, None] * 3 + i[None, :] * 7) % 5 - 2).to(torch.bfloat16)
    b = ((i[:, None] * 5 + i[None, :] * 3) % 5 - 2).to(torch.bfloat16)
    c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    flop = 2.0 * n * n * n
    out["gemm_tflops_tenk_data"] = flop / events(lambda: torch.matmul(a, b, out=c)) / 1e12
    out["gemm_tflops_tenk_data_wall"] = flop / wall(lambda: torch.matmul(a, b, out=c)) / 1e12
    # sustained for a second or more, as tenk validate's full GEMM runs now
    # (a short burst runs before the card reaches its power limit)
    n_1s = max(20, int(1.1 * out["gemm_tflops_tenk_data"] * 1e12 / flop))
    torch.cuda.synchronize()
    t0 = time.monotonic()
    for _ in range(n_1s):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    out["gemm_tflops_tenk_data_1s"] = flop * n_1s / (time.monotonic() - t0) / 1e12
    out["gemm_1s_reps"] = n_1s
    # the products are exact: check a few entries against integer sums
    cf = (a.float() @ b.float())
    exact = (a[:64].cpu().to(torch.int64) @ b[:, :64].cpu().to(torch.int64)).float().to(dev)
    out["gemm_wrong_of_4096"] = int((cf[:64, :64] != exact).sum().item())
    ra = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    rb = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    out["gemm_tflops_random"] = flop / events(lambda: torch.matmul(ra, rb, out=c)) / 1e12
    a = b = c = cf = ra = rb = None  # (the GPU memory back for the copy)
    torch.cuda.empty_cache()

    nbytes = 1 << 30
    src = torch.ones(nbytes // 4, device=dev, dtype=torch.float32)
    dst = torch.empty_like(src)
    out["copy_gbs"] = 2.0 * nbytes / events(lambda: dst.copy_(src)) / 1e9
    out["copy_gbs_wall"] = 2.0 * nbytes / wall(lambda: dst.copy_(src)) / 1e9
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
