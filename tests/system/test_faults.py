"""Faults the agent sees on its node reach the server at once, not after
the node timeout: a work folder short of space, uncorrected ECC errors and
hardware Xid errors on an accelerator (NVML, here tests/gpushim), and the
operator's failing health check. The node is drained with the fault as the
reason and its job goes on elsewhere at once."""
import os
import re
import subprocess
import time
import urllib.request

import pytest

from conftest import BIN, Daemon, Tenk, root_jobs_config, wait_for


def cluster(workdir, procs):
    data = os.path.join(workdir, "data")
    root_jobs_config(data)
    # a node timeout far longer than the test waits: only the fault explains it
    s = Daemon(["server", "--data", data, "--listen", "127.0.0.1:0", "--node-timeout", "120s"],
               workdir, "server")
    procs.append(s)
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")) or not s.alive(), 20,
             "the server")
    assert s.alive(), s.output()
    return s, Tenk(workdir, data)


def agent(t, procs, name, work, *extra, env=None):
    # a beat a second: what the tests wait for comes with the next beat
    a = Daemon(["agent", "--server", t.url, "--token-file", os.path.join(t.data, "agent.token"),
                "--name", name, "--work-dir", work, "--stop-jobs", "--heartbeat", "1s", *extra],
               t.workdir, name, env=env)
    procs.append(a)
    return a


def run_on(t, name, other):
    """A long job on node `name` (the other drained meanwhile)."""
    t.run("drain", other, "--reason", "placing the test's job")
    jid = t.submit("--requeue", "0", "--", "sleep", "600")
    job = t.wait_state(jid, "RUNNING")
    assert job["attempts"][0]["nodes"][0]["name"] == name
    t.run("resume", other)
    return jid


def moved(t, jid, fault, node, attempt=2):
    """The job's attempt `attempt` runs, not on `node`, lost for `fault`."""
    started = time.monotonic()
    job = wait_for(lambda: (lambda j: j if len(j["attempts"]) == attempt and
                            j["state"] == "RUNNING" else None)(t.job(jid)), 60,
                   "the job running again elsewhere")
    assert job["attempts"][-1]["nodes"][0]["name"] != node
    assert f"node {node} lost: it reported a fault: {fault}" in job["attempts"][-2]["reason"], \
        job["attempts"][-2]["reason"]
    n = [x for x in t.json("nodes")["nodes"] if x["name"] == node][0]
    assert n["state"] in ("DRAINING", "DRAINED") and fault in n["reason"], n
    return time.monotonic() - started


@pytest.fixture
def tmpfs(workdir):
    path = os.path.join(workdir, "small")
    os.makedirs(path)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", path], check=True)
    yield path
    subprocess.run(["umount", "-l", path], check=False)


def test_disk_full_drains_and_requeues_at_once(workdir, procs, tmpfs):
    s, t = cluster(workdir, procs)
    a1 = agent(t, procs, "n1", os.path.join(tmpfs, "work"), "--fake-gpus", "1xH100",
               "--min-free-disk", "32M")
    agent(t, procs, "n2", os.path.join(workdir, "w2"), "--fake-gpus", "1xH100")
    t.wait_nodes_up(2)
    jid = run_on(t, "n1", "n2")
    with open(os.path.join(tmpfs, "filler"), "wb") as f:
        f.write(b"\0" * (40 << 20))
    took = moved(t, jid, "disk full", "n1")
    assert took < 60
    assert "fault on this node, told to the server: disk full" in a1.output()
    t.run("cancel", jid)
    a1.stop()  # before the tmpfs goes


def test_ecc_errors_drain_the_node(workdir, procs):
    shim = os.path.join(os.path.dirname(BIN), "tests", "gpushim")
    ecc = os.path.join(workdir, "nvml")
    s, t = cluster(workdir, procs)
    env = {"LD_LIBRARY_PATH": shim, "TENK_FAKE_GPUS": "2", "TENK_FAKE_NVML_FILE": ecc}
    agent(t, procs, "n1", os.path.join(workdir, "w1"), env=env)
    agent(t, procs, "n2", os.path.join(workdir, "w2"), "--fake-gpus", "1xH100")
    t.wait_nodes_up(2)
    n1 = [x for x in t.json("nodes")["nodes"] if x["name"] == "n1"][0]
    assert len(n1["accelerators"]) == 2, n1  # from NVML (the stand-in)
    jid = run_on(t, "n1", "n2")
    with open(ecc, "w") as f:
        f.write("1 ecc 3\n")
    moved(t, jid, "accelerator 1 (GPU-", "n1")
    assert "3 uncorrected ECC error(s)" in [x for x in t.json("nodes")["nodes"]
                                             if x["name"] == "n1"][0]["reason"]
    t.run("cancel", jid)


def test_xid_and_health_check_drain_the_node(workdir, procs):
    """An Xid that implicates the hardware drains its node (one an
    application causes is only counted), once: after the operator resumes
    the node the same Xid does not drain it again. A health check that
    fails drains its node with what the check said; passing again is
    logged."""
    shim = os.path.join(os.path.dirname(BIN), "tests", "gpushim")
    nvml = os.path.join(workdir, "nvml")
    flag = os.path.join(workdir, "broken")
    check = os.path.join(workdir, "check.sh")
    with open(check, "w") as f:
        f.write(f"#!/bin/sh\n[ -e {flag} ] && {{ echo checking >&2; "
                f"echo 'GPU 0: link down' >&2; exit 3; }}\nexit 0\n")
    os.chmod(check, 0o755)
    s, t = cluster(workdir, procs)
    env = {"LD_LIBRARY_PATH": shim, "TENK_FAKE_GPUS": "2", "TENK_FAKE_NVML_FILE": nvml}
    a1 = agent(t, procs, "n1", os.path.join(workdir, "w1"), env=env)
    a2 = agent(t, procs, "n2", os.path.join(workdir, "w2"), "--fake-gpus", "1xH100",
               "--health-check", check, "--health-check-interval", "1s")
    t.wait_nodes_up(2)
    jid = run_on(t, "n1", "n2")
    with open(nvml, "w") as f:
        f.write("0 xid 13\n1 xid 79\n")
    moved(t, jid, "accelerator 1 (GPU-", "n1")
    n1 = [x for x in t.json("nodes")["nodes"] if x["name"] == "n1"][0]
    assert "Xid 79 (fallen off the bus)" in n1["reason"] and "Xid 13" not in n1["reason"], n1
    assert "Xid 13 (counted; not a fault of the node)" in a1.output()
    # the Xid is told once: the node may be resumed once a heartbeat without
    # it came (until then the server refuses: it would drain it again)
    wait_for(lambda: t.run("resume", "n1", check=False).returncode == 0, 20,
             "the resume accepted")
    resumed = time.monotonic()

    # the job is on n2 now; its health check fails
    open(flag, "w").close()
    moved(t, jid, "health check " + check + " failed (exit 3): GPU 0: link down", "n2", 3)
    os.unlink(flag)
    wait_for(lambda: "passes again" in a2.output(), 20, "the check passing again")
    time.sleep(max(0.0, resumed + 3 - time.monotonic()))  # heartbeats (1 s) since
    n1 = [x for x in t.json("nodes")["nodes"] if x["name"] == "n1"][0]
    assert n1["state"] == "UP", n1  # its Xid was told once
    t.run("cancel", jid)


def test_gpu_thresholds_drain_the_node(workdir, procs):
    """Each of the cluster's GPU thresholds ("gpu_health", held 1 s here),
    read through the NVML stand-in, drains the node with the fault as its
    reason and shows in the agent's /metrics while it lasts; a condition
    shorter than the hold, and a busy card drawing its power, are no
    fault."""
    shim = os.path.join(os.path.dirname(BIN), "tests", "gpushim")
    nvml = os.path.join(workdir, "nvml")
    root_jobs_config(os.path.join(workdir, "data"), gpu_health={"for": "1s"})
    s, t = cluster(workdir, procs)
    env = {"LD_LIBRARY_PATH": shim, "TENK_FAKE_GPUS": "2", "TENK_FAKE_NVML_FILE": nvml}
    w1 = os.path.join(workdir, "w1")
    a1 = agent(t, procs, "n1", w1, "--metrics-listen", "127.0.0.1:0", env=env)
    t.wait_nodes_up(1)
    url = wait_for(lambda: open(os.path.join(w1, "metrics.url")).read().strip()
                   if os.path.exists(os.path.join(w1, "metrics.url")) else None, 20, "the url")

    def node():
        return t.json("nodes")["nodes"][0]

    def faults():
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        return set(re.findall(r'tenk_gpu_health_fault\{[^}]*gpu="1"[^}]*check="(\w+)"\} 1',
                              text))

    # a blip shorter than the hold, and a busy card at its power: nothing
    with open(nvml, "w") as f:
        f.write("1 temp 95\n")
    time.sleep(0.3)  # (the agent looks each second: it sees it once at most)
    with open(nvml, "w") as f:
        f.write("1 util 95\n1 power_mw 600000\n")
    time.sleep(3)
    assert node()["state"] == "UP", node()
    busy = "1 util 95\n1 power_mw 600000\n"
    cases = [
        ("temperature", "1 temp 91\n", "91 C, over 85 C, for 1s"),
        ("throttle", busy + "1 throttle 64\n",
         "clocks slowed (hardware thermal slowdown) while busy for 1s"),
        ("power", "1 util 95\n1 power_mw 150000\n",
         "drawing 150 W of its 700 W limit (under 40%) at 95% utilisation for 1s"),
        ("pcie", "1 pcie_width 8\n", "PCIe link x8 gen 5 where it can be x16 gen 5, for 1s"),
        ("pcie", busy + "1 pcie_gen 3\n", "PCIe link x16 gen 3 where it can be x16 gen 5"),
        ("remapped_rows", "1 rows_unc 2\n",
         "2 uncorrectable remapped memory row(s) since the agent started"),
        ("remapped_rows", "1 rows_pending 1\n",
         "a memory row remap is pending (the GPU needs a reset)"),
    ]
    for check, fake, reason in cases:
        with open(nvml, "w") as f:
            f.write(fake)
        n = wait_for(lambda: (lambda n: n if reason in n["reason"] else None)(node()), 30,
                     f"the node drained for {check}")
        assert n["state"] in ("DRAINING", "DRAINED"), n
        assert n["reason"].startswith("fault: accelerator 1 (GPU-"), n
        assert faults() == {check}, (check, faults())
        with open(nvml, "w") as f:
            f.write("")
        wait_for(lambda: not faults(), 20, f"the {check} check passing again")
        # accepted once a heartbeat without the fault came
        wait_for(lambda: t.run("resume", "n1", check=False).returncode == 0, 20,
                 "the resume accepted")
        wait_for(lambda: node()["state"] == "UP", 20, "the node resumed")
    assert "the remapped_rows check passes again" in a1.output()
    kinds = [e["kind"] for e in t.json("nodes", "history", "n1")]
    assert kinds.count("fault") == len(cases), kinds


def test_health_check_flags_are_checked(workdir):
    def agent_with(*flags):
        return subprocess.run([BIN, "agent", "--server", "https://127.0.0.1:1", "--token-file",
                               "/dev/null", *flags], capture_output=True, text=True, timeout=30)
    p = agent_with("--health-check", "check.sh")
    assert p.returncode == 2 and "--health-check: check.sh is not an executable given by " \
        "its full path" in p.stderr, p.stderr
    p = agent_with("--health-check-interval", "0s")
    assert p.returncode == 2 and "--health-check-interval: expected a duration" in p.stderr, \
        p.stderr


def test_device_check_before_a_restart_keeps_a_bad_node_out(workdir, procs):
    """Before an attempt after the first starts on a node, its shim checks
    the attempt's GPUs there (tenk validate --device-check, in the attempt's
    cgroup, as CUDA_VISIBLE_DEVICES says; tests/gpushim as the devices): a
    node whose GEMM comes out wrong runs none of the attempt's tasks and is
    drained for it; the job goes on where the check passes."""
    shim = os.path.join(os.path.dirname(BIN), "tests", "gpushim")
    s, t = cluster(workdir, procs)
    good = {"LD_LIBRARY_PATH": shim, "TENK_FAKE_GPUS": "2"}
    a1 = agent(t, procs, "n1", os.path.join(workdir, "w1"),
               env=dict(good, TENK_FAKE_GEMM_WRONG="1"))
    a2 = agent(t, procs, "n2", os.path.join(workdir, "w2"), env=good)
    t.wait_nodes_up(2)
    # attempt 1 on n1 fails by its own error (a first attempt: no check)
    t.run("drain", "n2", "--reason", "placing the test's job")
    ran = os.path.join(workdir, "ran")
    jid = t.submit("-G", "1", "--requeue", "3", "--", "sh", "-c",
                   f'echo "$TENK_ATTEMPT $CUDA_VISIBLE_DEVICES" >> {ran}; '
                   'test "$TENK_ATTEMPT" -ge 2')
    # attempt 2 lands on n1 again (n2 is drained): its check fails there
    job = wait_for(lambda: (lambda j: j if len(j["attempts"]) >= 2 and
                            j["attempts"][1].get("end") else None)(t.job(jid)), 60,
                   "attempt 2 to end")
    a2nd = job["attempts"][1]
    assert a2nd["nodes"][0]["name"] == "n1", a2nd
    assert "device check failed: gpu_gemm: bf16 GEMM" in a2nd["reason"], a2nd
    assert " wrong" in a2nd["reason"], a2nd
    n1 = wait_for(lambda: (lambda n: n if n["state"] in ("DRAINING", "DRAINED") else None)(
        [x for x in t.json("nodes")["nodes"] if x["name"] == "n1"][0]), 30, "n1 drained")
    assert "fault: job %d attempt 2: device check failed" % jid in n1["reason"], n1
    assert t.job(jid)["state"] == "PENDING"
    # n2 back: attempt 3 passes its check there and runs
    t.run("resume", "n2")
    t.run("wait", jid, timeout=60)
    job = t.job(jid)
    assert job["state"] == "COMPLETED" and len(job["attempts"]) == 3, job
    assert job["attempts"][2]["nodes"][0]["name"] == "n2"
    lines = open(ran).read().split("\n")
    assert [x.split()[0] for x in lines if x] == ["1", "3"], lines  # attempt 2 ran nothing
    assert f"job {jid}.3: device check" in a2.output(), "the check ran before attempt 3"
    assert f"job {jid}.1: device check" not in a1.output(), "no check before a first attempt"
    # n1 still reports its fault (a failed check counts until its agent
    # restarts): resumed, it would be drained again at its next beat, so
    # the operator is told why not; --force takes it back despite the fault
    p = t.run("resume", "n1", check=False)
    assert p.returncode != 0, p.stdout
    assert re.search(r"still reports a fault \(its heartbeat \d+s ago\): job %d attempt 2: "
                     r"device check failed" % jid, p.stderr), p.stderr
    assert "tenk resume --force" in p.stderr, p.stderr
    t.run("resume", "--force", "n1")
    time.sleep(3)  # heartbeats (1 s) that carry the fault again
    n1 = [x for x in t.json("nodes")["nodes"] if x["name"] == "n1"][0]
    assert n1["state"] == "UP", n1
    hist = t.json("nodes", "history", "n1")
    assert any(e["kind"] == "resumed" and "despite its fault: job" in e.get("detail", "")
               for e in hist), hist
