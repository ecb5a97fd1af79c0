"""Faults the agent sees on its node reach the server with the next
heartbeat, not after the node timeout: a work folder short of space, and
uncorrected ECC errors on an accelerator (NVML, here tests/gpushim). The
node is drained with the fault as the reason and its job goes on elsewhere
at once."""
import os
import subprocess
import time

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
    a = Daemon(["agent", "--server", t.url, "--token-file", os.path.join(t.data, "agent.token"),
                "--name", name, "--work-dir", work, "--stop-jobs", *extra], t.workdir, name,
               env=env)
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


def moved(t, jid, fault, node):
    started = time.monotonic()
    job = wait_for(lambda: (lambda j: j if len(j["attempts"]) == 2 and
                            j["state"] == "RUNNING" else None)(t.job(jid)), 60,
                   "the job running again elsewhere")
    assert job["attempts"][1]["nodes"][0]["name"] != node
    assert f"node {node} lost: it reported a fault: {fault}" in job["attempts"][0]["reason"], \
        job["attempts"][0]["reason"]
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
    ecc = os.path.join(workdir, "ecc")
    s, t = cluster(workdir, procs)
    env = {"LD_LIBRARY_PATH": shim, "TENK_FAKE_GPUS": "2", "TENK_FAKE_ECC_FILE": ecc}
    agent(t, procs, "n1", os.path.join(workdir, "w1"), env=env)
    agent(t, procs, "n2", os.path.join(workdir, "w2"), "--fake-gpus", "1xH100")
    t.wait_nodes_up(2)
    n1 = [x for x in t.json("nodes")["nodes"] if x["name"] == "n1"][0]
    assert len(n1["accelerators"]) == 2, n1  # from NVML (the stand-in)
    jid = run_on(t, "n1", "n2")
    with open(ecc, "w") as f:
        f.write("1 3\n")
    moved(t, jid, "accelerator 1 (GPU-", "n1")
    assert "3 uncorrected ECC error(s)" in [x for x in t.json("nodes")["nodes"]
                                             if x["name"] == "n1"][0]["reason"]
    t.run("cancel", jid)
