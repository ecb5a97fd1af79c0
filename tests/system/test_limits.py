"""Limits the kernel enforces: each attempt on a node is a cgroup of its own
(v1 here) holding all its processes, with its memory, its CPUs and a number
of processes; stopping it kills the whole cgroup; what it used is
recorded."""
import os
import time

import pytest

from conftest import root_jobs_config, start_up, wait_for

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.isdir("/sys/fs/cgroup/memory"),
    reason="needs root and a cgroup v1 memory hierarchy, as this project's machines have")


def job_file(cluster, jid):
    return os.path.join(cluster.workdir, f"tenk-{jid}.out")


def test_memory_limit_ends_the_job_as_out_of_memory(cluster):
    jid = cluster.submit("--mem", "100M", "--", "python3", "-c",
                         "b = bytearray(300 * 1024 * 1024); print('allocated', len(b))")
    j = cluster.wait_state(jid, ("COMPLETED", "FAILED"), timeout=60)
    assert j["state"] == "FAILED", j
    assert "out of memory (limit 100 MiB)" in j["reason"], j
    assert "allocated" not in open(job_file(cluster, jid)).read()
    # within its limit it runs, and what it used is recorded
    jid = cluster.submit("--mem", "200M", "--", "python3", "-c",
                         "b = bytearray(60 * 1024 * 1024); sum(range(3000000))")
    j = cluster.wait_state(jid, ("COMPLETED", "FAILED"), timeout=60)
    assert j["state"] == "COMPLETED", j
    node = j["attempts"][0]["nodes"][0]
    assert node["mem_peak_mib"] >= 60 and node["cpu_ms"] > 0, node


def test_cpus_and_processes(cluster):
    # every limit has its controller here, and the node says so
    assert cluster.json("nodes", "node1")[0]["isolation"] == {"cgroup": 1, "unenforced": []}
    assert "memory, CPUs, processes and devices enforced" in cluster.run("nodes", "node1").stdout
    jid = cluster.submit("-c", "1", "--", "sh", "-c",
                         "nproc; grep Cpus_allowed_list /proc/self/status; "
                         "cat /sys/fs/cgroup/pids$(grep :pids: /proc/self/cgroup | cut -d: -f3)"
                         "/pids.max")
    j = cluster.wait_state(jid, ("COMPLETED", "FAILED"))
    assert j["state"] == "COMPLETED", j
    lines = open(job_file(cluster, jid)).read().split("\n")
    assert lines[0] == "1", lines
    assert lines[2] == "4096", lines
    # two jobs of one CPU each get different ones
    a = cluster.submit("-c", "1", "--", "sh", "-c", "grep Cpus_allowed_list /proc/self/status; "
                       "sleep 2")
    b = cluster.submit("-c", "1", "--", "sh", "-c", "grep Cpus_allowed_list /proc/self/status; "
                       "sleep 2")
    for x in (a, b):
        cluster.wait_state(x, "COMPLETED")
    cpus = {open(job_file(cluster, x)).read().split()[-1] for x in (a, b)}
    assert len(cpus) == 2, cpus


def test_cancel_kills_what_escaped_the_process_group(cluster):
    pidfile = os.path.join(cluster.workdir, "grandchild.pid")
    jid = cluster.submit("--", "sh", "-c",
                         f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' & sleep 300")
    cluster.wait_state(jid, "RUNNING")
    pid = int(wait_for(lambda: os.path.exists(pidfile) and open(pidfile).read().strip(), 20,
                       "the grandchild"))
    os.kill(pid, 0)  # it runs, in a session of its own
    assert os.getsid(pid) == pid
    cluster.run("cancel", jid)
    cluster.wait_state(jid, "CANCELLED")

    def gone():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] == "Z"
    wait_for(gone, 20, "the grandchild to be killed")


def test_cgroups_are_removed(cluster):
    jid = cluster.submit("--", "true")
    cluster.wait_state(jid, "COMPLETED")
    mine = [line.split(":")[2] for line in open("/proc/self/cgroup") if ":memory:" in line][0]
    base = "/sys/fs/cgroup/memory" + mine.rstrip("\n") + "/tenk-node1"
    wait_for(lambda: not os.path.exists(os.path.join(base, f"{jid}.1")), 20,
             "the attempt's cgroup to go")


def test_a_kept_cgroup_forgets_its_last_attempt(cluster):
    """On v1 an attempt's emptied cgroup is kept as its slot's spare and the
    slot's next attempt takes it under its own name: what the last one
    left (its memory limit, its OOM kill, its peak) is not the next one's."""
    mine = [line.split(":")[2] for line in open("/proc/self/cgroup") if ":memory:" in line][0]
    base = "/sys/fs/cgroup/memory" + mine.rstrip("\n") + "/tenk-node1"
    a = cluster.submit("--mem", "100M", "--", "python3", "-c",
                       "b = bytearray(300 * 1024 * 1024)")
    j = cluster.wait_state(a, ("COMPLETED", "FAILED"), timeout=60)
    assert "out of memory (limit 100 MiB)" in j["reason"], j
    wait_for(lambda: not os.path.exists(f"{base}/{a}.1") and os.path.isdir(f"{base}/spare.0"),
             20, "the attempt's cgroup to be kept as the spare of slot 0")
    # (the kernel's count of OOM kills stays with the folder: one or more)
    oom = open(f"{base}/spare.0/memory.oom_control").read().split("oom_kill ")[-1]
    assert int(oom) >= 1, oom
    # the next one, in slot 0 too: its own name, no limit, fails on its own
    b = cluster.submit("--", "sh", "-c",
                       "grep :memory: /proc/self/cgroup; "
                       "cat /sys/fs/cgroup/memory$(grep :memory: /proc/self/cgroup | cut -d: -f3)"
                       "/memory.limit_in_bytes; exit 3")
    j = cluster.wait_state(b, ("COMPLETED", "FAILED"), timeout=60)
    assert j["state"] == "FAILED" and "out of memory" not in j["reason"], j
    lines = open(job_file(cluster, b)).read().split("\n")
    assert lines[0].endswith(f"/tenk-node1/{b}.1"), lines
    assert int(lines[1]) > 1 << 60, lines  # unlimited
    node = j["attempts"][0]["nodes"][0]
    assert j["exit_code"] == 3 and node["mem_peak_mib"] < 100, (j["exit_code"], node)
    wait_for(lambda: not os.path.exists(f"{base}/{b}.1") and os.path.isdir(f"{base}/spare.0"),
             20, "the cgroup to be kept again")


UNIFIED = "/sys/fs/cgroup/unified"


@pytest.mark.skipif(not os.path.exists(os.path.join(UNIFIED, "cgroup.controllers")),
                    reason="needs the empty cgroup2 hierarchy beside v1's")
def test_cgroup_v2_without_controllers_runs_jobs_and_names_what_it_cannot_limit(workdir):
    """A node whose agent's cgroup was given no controllers (cgroup v2 in a
    container or a VM's sandbox, where the parent delegated none) runs its
    jobs in cgroups that hold and kill their processes, and names the limits
    it cannot enforce rather than failing every job on them. Here: `tenk up`
    in a mount namespace of its own where only cgroup2 is left, which on this
    machine has no controller of ours. (tests/unit/agent/test_shim.c holds
    the device program to a device of this machine.)"""
    script = ("for m in $(grep ' - cgroup ' /proc/self/mountinfo | cut -d' ' -f5); do "
              "umount $m || exit 1; done; exec \"$@\"")
    t, d = start_up(workdir, wrap=["unshare", "-m", "--propagation", "private",
                                   "sh", "-c", script, "sh"])
    # the tests' own cgroup2 folder (conftest), where the agent's level goes
    mine = [x[3:] for x in open("/proc/self/cgroup").read().split("\n")
            if x.startswith("0::")][0].rstrip("/")
    level = mine + "/tenk-node1"
    have = open(UNIFIED + mine + "/cgroup.controllers").read().split()
    # (device rules on v2 are BPF programs, which need no controller)
    want = [n for c, n in (("memory", "memory"), ("cpuset", "cpus"), ("pids", "processes"))
            if c not in have]
    node = t.json("nodes", "node1")[0]
    assert node["isolation"] == {"cgroup": 2, "unenforced": want}
    shown = t.run("nodes", "node1").stdout
    assert "Limits:   cgroup v2; not enforced: " + ", ".join(want) in shown, shown
    assert "cgroup v2: jobs' " + ", ".join(want) + " cannot be limited" in d.output()

    jid = t.submit("--mem", "100M", "-c", "1", "--", "sh", "-c", "grep ^0:: /proc/self/cgroup")
    j = t.wait_state(jid, ("COMPLETED", "FAILED"), timeout=30)
    assert j["state"] == "COMPLETED", j
    out = open(job_file(t, jid)).read()
    assert out.strip() == f"0::{level}/{jid}.1", out

    # a process that leaves the task's process group still goes with the job
    pidfile = os.path.join(workdir, "v2-grandchild.pid")
    jid = t.submit("--", "sh", "-c", f"setsid sleep 300 & echo $! > {pidfile}; wait")
    t.wait_state(jid, "RUNNING")
    wait_for(lambda: os.path.exists(pidfile) and open(pidfile).read().strip(), 20, "pid file")
    pid = int(open(pidfile).read())
    cg = open(f"/proc/{pid}/cgroup").read()
    assert f"0::{level}/{jid}.1" in cg, cg
    t.run("cancel", jid)
    t.wait_state(jid, "CANCELLED")

    def gone():
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split()[2] == "Z"
        except FileNotFoundError:
            return True
    wait_for(gone, 20, "the escaped process to be killed")
    wait_for(lambda: not os.path.exists(f"{UNIFIED}{level}/{jid}.1"), 20,
             "the attempt's cgroup to go")
    d.stop()
    os.rmdir(UNIFIED + level)

    # a cluster that requires every limit keeps such a node out: drained as
    # it registers, naming what it cannot enforce; a resume is refused while
    # that lasts, and --force takes it back
    root_jobs_config(t.data, require_limits=True)
    t, d = start_up(workdir, wrap=["unshare", "-m", "--propagation", "private",
                                   "sh", "-c", script, "sh"])
    node = t.json("nodes", "node1")[0]
    if not want:  # this machine delegated every controller: nothing to hold it to
        assert node["state"] == "UP", node
    else:
        assert node["state"] == "DRAINED", node
        assert node["reason"] == ("fault: it cannot enforce " + ", ".join(want) +
                                  " limits (cgroup v2), which \"require_limits\" in "
                                  "config.json requires"), node
        jid = t.submit("--", "true")
        time.sleep(1)
        assert t.job(jid)["state"] == "PENDING"
        p = t.run("resume", "node1", check=False)
        assert p.returncode != 0 and "still reports a fault" in p.stderr, p.stderr
        t.run("resume", "--force", "node1")
        assert t.wait_state(jid, ("COMPLETED", "FAILED"), timeout=30)["state"] == "COMPLETED"
        assert t.json("nodes", "node1")[0]["state"] == "UP"
    d.stop()
    os.rmdir(UNIFIED + level)
