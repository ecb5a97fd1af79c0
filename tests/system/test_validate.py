"""tenk validate on this node: every layer's figure, threshold and verdict;
GPU checks skipped without a GPU; baselines; stopping at the first failing
layer; clear errors."""
import json
import os
import subprocess

import pytest

from conftest import BIN, SANITIZER_MARKS

LAYERS = ["system", "network", "compute", "memory", "interconnect", "storage", "workload"]


def validate(*args, check=True):
    p = subprocess.run([BIN, "validate", "--quick", *map(str, args)], capture_output=True,
                       text=True, timeout=300)
    for mark in SANITIZER_MARKS:
        assert mark not in p.stderr, p.stderr
    if check:
        assert p.returncode == 0, p.stdout + p.stderr
    return p


def held_to_threshold(c):
    """A check's verdict is what its figure against its threshold says (all
    of these compute right here, so none fails for a wrong result)."""
    assert c["threshold"] > 0 and c["figure"] >= 0, c
    return c["verdict"] == ("pass" if c["figure"] >= c["threshold"] else "FAIL")


def test_every_layer_reports_a_figure_threshold_and_verdict(tmp_path):
    """Every layer runs (--all) and each check says a figure, the threshold it
    was held to and the verdict they give. Whether this machine is fast
    enough is not the test's to say: the other test worker may hold a core."""
    p = validate("--json", "--all", "--dir", tmp_path, check=False)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    out = json.loads(p.stdout)
    checks = {c["check"]: c for c in out["checks"]}
    assert [c["layer"] for c in out["checks"]] == sorted(
        [c["layer"] for c in out["checks"]], key=LAYERS.index)
    assert set(LAYERS) == {c["layer"] for c in out["checks"]}
    for name in ("cpu_sgemm", "host_bandwidth", "allreduce_in_node", "checkpoint_write",
                 "loader_read", "dp_training"):
        c = checks[name]
        assert c["figure"] > 0 and c["threshold_from"], c
        assert held_to_threshold(c), c
    assert out["verdict"] == ("fail" if any(c["verdict"] == "FAIL" for c in out["checks"])
                              else "pass")
    assert (p.returncode == 1) == (out["verdict"] == "fail")
    if not os.path.exists("/dev/nvidia0"):
        assert checks["gpu_gemm"]["verdict"] == "skip"
        assert checks["gpu_gemm"]["detail"].startswith("skipped: no GPU")
    # what is right or wrong does not depend on speed
    assert "0 wrong" in checks["cpu_sgemm"]["detail"]
    assert "one-rank run" in checks["dp_training"]["detail"]
    assert not [f for f in os.listdir(tmp_path) if f.startswith("tenk-validate")]
    table = validate("--all", "--dir", tmp_path, check=False).stdout
    assert "verdict: " in table and "THRESHOLD" in table


def test_save_baseline_keeps_the_figures_that_passed(tmp_path):
    base = tmp_path / "base.json"
    p = validate("--save-baseline", base, "--json", "--all", "--dir", tmp_path, check=False)
    out = json.loads(p.stdout)
    saved = json.load(open(base))["checks"]
    assert set(saved) == {c["check"] for c in out["checks"] if c["verdict"] == "pass"}
    for c in out["checks"]:
        if c["check"] in saved:
            assert saved[c["check"]] == pytest.approx(c["figure"], rel=1e-5)
    assert "gpu_gemm" not in saved


def test_baseline_raises_the_bar_and_stops_at_the_failing_layer(tmp_path):
    # a baseline no machine reaches: compute fails, and nothing above it runs
    base = tmp_path / "base.json"
    json.dump({"checks": {"cpu_sgemm": 1e12}}, open(base, "w"))
    p = validate("--baseline", base, "--json", "--dir", tmp_path, check=False)
    assert p.returncode == 1
    out = json.loads(p.stdout)
    assert out["verdict"] == "fail"
    layers = [c["layer"] for c in out["checks"]]
    assert layers[-1] == "compute" and "memory" not in layers
    bad = [c for c in out["checks"] if c["verdict"] == "FAIL"]
    assert bad[0]["check"] == "cpu_sgemm" and bad[0]["threshold_from"] == "95% of the baseline"
    assert bad[0]["threshold"] == pytest.approx(0.95e12) and bad[0]["figure"] < 0.95e12
    # --all goes on
    out = json.loads(validate("--baseline", base, "--json", "--all", "--dir", tmp_path,
                              check=False).stdout)
    assert {c["layer"] for c in out["checks"]} == set(LAYERS)


def test_storage_errors_name_the_path(tmp_path):
    missing = tmp_path / "no" / "such" / "dir"
    p = validate("--layers", "storage", "--json", "--dir", missing, check=False)
    assert p.returncode == 1
    out = json.loads(p.stdout)
    assert out["checks"][0]["verdict"] == "FAIL" and str(missing) in out["checks"][0]["detail"]


def test_bad_flags():
    p = validate("--layers", "system,bogus", check=False)
    assert p.returncode == 2 and "\"bogus\" is not one of" in p.stderr
    p = validate("--baseline", "/nonexistent/base.json", check=False)
    assert p.returncode == 1 and "/nonexistent/base.json" in p.stderr


def test_gpu_checks_through_stand_in_libraries():
    """The GPU paths (dlopen of the driver, cuBLAS, NVML, NCCL; contexts,
    allocations, copies, a checked GEMM, an in-node all-reduce) run against
    stand-ins built with the tests (tests/gpushim): host memory as devices."""
    shim = os.path.join(os.path.dirname(BIN), "tests", "gpushim")
    assert os.path.exists(os.path.join(shim, "libcuda.so.1")), shim

    def run(gpus, *extra, wrong=False, quick=True):
        env = dict(os.environ, LD_LIBRARY_PATH=shim, TENK_FAKE_GPUS=str(gpus))
        if wrong:
            env["TENK_FAKE_GEMM_WRONG"] = "1"
        p = subprocess.run([BIN, "validate", *(["--quick"] if quick else []), "--all", "--json",
                            *extra],
                           capture_output=True, text=True, timeout=300, env=env)
        for mark in SANITIZER_MARKS:
            assert mark not in p.stderr, p.stderr
        return {c["check"]: c for c in json.loads(p.stdout)["checks"]}

    c = run(2, "--layers", "system,compute,memory,interconnect")
    assert c["gpu_stack"]["figure"] == 2 and c["gpu_stack"]["verdict"] == "pass"
    assert "driver 550.54.15, CUDA 12.4, NCCL 2.21.5" in c["gpu_stack"]["detail"]
    g = c["gpu_gemm"]
    assert g["figure"] > 0 and "0 wrong" in g["detail"], g
    # host memory is no H100: held to half the catalogue's peak, it fails
    assert g["threshold_from"] == "50% of the catalogue's H100" and g["verdict"] == "FAIL"
    assert "0: " in g["detail"] and "1: " in g["detail"]  # every device, named
    # compute per watt, from NVML's power (the stand-in draws 70 W), where
    # the full run's products last a second or more
    g = run(1, "--layers", "compute", quick=False)["gpu_gemm"]
    assert "TFLOP/s per W 0: " in g["detail"] and "at 70 W" in g["detail"], g
    assert abs(g["per_watt"] - g["figure"] / 70) < 1e-3 * g["per_watt"], g
    m = c["gpu_copy"]
    assert m["figure"] > 0 and m["threshold"] == 100 and "device to device" in m["detail"]
    n = c["nccl_allreduce"]
    assert n["figure"] > 0 and "2 GPUs" in n["detail"] and "0 wrong" in n["detail"], n
    # a GEMM that gets an element wrong on each device is caught
    g = run(3, "--layers", "compute", wrong=True)["gpu_gemm"]
    assert g["verdict"] == "FAIL" and "3 wrong" in g["detail"], g
    # one GPU: nothing to all-reduce with
    n = run(1, "--layers", "interconnect")["nccl_allreduce"]
    assert n["verdict"] == "skip" and "one GPU" in n["detail"]


def test_reference_on_the_processor_and_through_stand_in_libraries():
    """tenk's own reference (--reference): on the processor without a GPU,
    on GPU 0 through cuBLAS where there is one (tests/gpushim), the same
    bits run after run; a cuBLAS that gets an element wrong gives other
    bits, which is what a rollout's equivalence check catches."""
    shim = os.path.join(os.path.dirname(BIN), "tests", "gpushim")

    def run(gpu=False, wrong=False):
        env = dict(os.environ)
        if gpu:
            env.update(LD_LIBRARY_PATH=shim, TENK_FAKE_GPUS="1")
        if wrong:
            env["TENK_FAKE_GEMM_WRONG"] = "1"
        p = subprocess.run([BIN, "validate", "--layers", "system", "--reference", "--json"],
                           capture_output=True, text=True, timeout=300, env=env)
        for mark in SANITIZER_MARKS:
            assert mark not in p.stderr, p.stderr
        assert p.returncode == 0, p.stdout + p.stderr
        res = json.loads(p.stdout)
        (check,) = [c for c in res["checks"] if c["check"] == "reference"]
        return check, res["reference"]

    c, cpu = run()
    assert cpu["device"] == "cpu" and len(cpu["loss"]) == 60 and len(cpu["params"]) == 64, cpu
    assert c["layer"] == "workload" and c["detail"].startswith("tenk's own on the processor"), c
    assert cpu["loss"][-1] < cpu["loss"][0] and cpu["digest"] in c["detail"], (c, cpu)
    c, gpu = run(gpu=True)
    assert gpu["device"] == "gpu" and len(gpu["loss"]) == 40, gpu
    assert c["detail"].startswith("tenk's own on GPU 0 (NVIDIA H100"), c
    assert gpu["loss"][-1] < gpu["loss"][0], gpu
    assert run(gpu=True)[1]["digest"] == gpu["digest"]  # the same bits again
    _, bad = run(gpu=True, wrong=True)
    assert bad["digest"] != gpu["digest"], bad
    diff = [i for i, (a, b) in enumerate(zip(gpu["loss"], bad["loss"])) if a != b]
    assert diff and diff[0] == 0, diff  # from the first step's products
