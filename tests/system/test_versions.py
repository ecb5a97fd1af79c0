"""Mixed versions, as a rolling upgrade meets them: an agent of the previous
release beside a current one under a current server, a current agent under
a server of the previous release, and a shim started by the previous agent
adopted by the current one. The previous release is the newest tag before
this tree's commit; it is built once from that tag (git archive, meson,
ninja) into build-release/ and kept there; without a tag, or outside a git
checkout, these tests skip and say why."""
import fcntl
import os
import subprocess
import time

import pytest

from conftest import BIN, MultiHost, shim_pids, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.join(ROOT, "build-release")


def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)


def previous_tag():
    """The newest release tag reachable from HEAD that is not HEAD itself,
    with its commit, or (None, why)."""
    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return None, "not a git checkout: no earlier release to build"
    tip = "HEAD"
    for _ in range(2):
        tag = git("describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", tip)
        if tag.returncode != 0:
            return None, ("no release tag before this commit (git tag v0.1.0 marks the "
                          "first; a shallow clone has none)")
        name = tag.stdout.strip()
        commit = git("rev-parse", name + "^{commit}").stdout.strip()
        if commit != head.stdout.strip():
            return (name, commit), None
        tip = name + "^"
    return None, "no release tag before this commit"


@pytest.fixture(scope="session")
def previous():
    """The previous release's tenk (its tenk-daemon and tenk-shim beside it),
    built once and kept under build-release/TAG-COMMIT."""
    found, why = previous_tag()
    if not found:
        pytest.skip(why)
    tag, commit = found
    here = os.path.join(CACHE, f"{tag}-{commit[:12]}")
    binary = os.path.join(here, "build", "tenk")
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder among the test workers
        if not os.path.exists(os.path.join(here, "built")):
            subprocess.run(["rm", "-rf", here], check=True)
            src = os.path.join(here, "src")
            os.makedirs(src)
            archive = subprocess.Popen(["git", "-C", ROOT, "archive", commit],
                                       stdout=subprocess.PIPE)
            subprocess.run(["tar", "-x", "-C", src], stdin=archive.stdout, check=True)
            assert archive.wait() == 0
            log = open(os.path.join(here, "build.log"), "w")
            for argv in (["meson", "setup", "-Dtests=false", "-Dbuildtype=debugoptimized",
                          os.path.join(here, "build"), src],
                         ["ninja", "-C", os.path.join(here, "build"), "tenk", "tenk-daemon",
                          "tenk-shim"]):
                p = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=900)
                assert p.returncode == 0, f"building {tag}: see {log.name}"
            open(os.path.join(here, "built"), "w").close()
    return tag, binary


def two_node_job(c, out):
    """A job of two nodes, one task each; the nodes it ran on."""
    jid = c.submit("-N", "2", "--tasks-per-node", "1", "-o", os.path.join(out, "r-%t.out"),
                   "--", "sh", "-c", "echo $RANK $TENK_NODE_NAME")
    c.run("wait", jid, timeout=120)
    job = c.job(jid)
    assert job["state"] == "COMPLETED", job
    lines = sorted(open(os.path.join(out, f"r-{r}.out")).read().split() for r in (0, 1))
    assert [r for r, _ in lines] == ["0", "1"], lines
    return {n for _, n in lines}


def test_previous_agent_under_current_server(previous, hosts3, workdir, kill_all):
    """An agent of the previous release joins a current server and runs a
    two-node job with a current agent."""
    tag, old = previous
    c = MultiHost(workdir, hosts3, programs={1: old})
    kill_all += c.daemons
    assert two_node_job(c, workdir) == {"host1", "host2"}
    nodes = {n["name"]: n for n in c.json("nodes")["nodes"]}
    assert nodes["host1"]["state"] == "UP" and nodes["host2"]["state"] == "UP", nodes
    assert "malformed" not in c.agents[1].output(), c.agents[1].output()
    c.stop_all()


def test_current_agent_under_previous_server(previous, hosts3, workdir, kill_all):
    """A current agent joins a server of the previous release (it speaks the
    older protocol to it, and says so) and runs jobs with the older agent."""
    tag, old = previous
    c = MultiHost(workdir, hosts3, programs={0: old, 2: old})
    c.cli = old
    kill_all += c.daemons
    assert two_node_job(c, workdir) == {"host1", "host2"}
    assert "registering as protocol 1" in c.agents[1].output()
    c.stop_all()


def test_previous_shim_adopted(previous, hosts3, workdir, kill_all):
    """A job started by an agent of the previous release goes on when a
    current agent takes its place: the current one adopts the old shim (the
    same process, its task not restarted) and reports the job's end."""
    tag, old = previous
    c = MultiHost(workdir, hosts3, programs={1: old})
    kill_all += c.daemons
    c.agents[1].stop()
    c.start_agent(1, stop_jobs=False)  # the old agent, leaving its jobs when it stops
    c.wait_nodes_up(2)
    log = os.path.join(workdir, "runs.log")
    go = os.path.join(workdir, "go")
    jid = c.submit("-w", "host1", "--", "sh", "-c",
                   f'echo start $$ >> {log}; while [ ! -e {go} ]; do sleep 0.1; done; '
                   f'echo end $$ >> {log}')
    wait_for(lambda: os.path.exists(log), 60, "the task to start")
    shims = shim_pids(os.path.join(workdir, "agent1"))
    assert len(shims) == 1, shims
    c.agents[1].stop()  # SIGTERM: the previous agent leaves, its shim stays
    assert c.job(jid)["state"] == "RUNNING"
    current = c.start_agent(1, program=BIN)
    kill_all.append(current)
    wait_for(lambda: "found its shim, 1 task(s) running" in current.output(), 30,
             "the current agent to adopt the shim", show=current.output)
    assert "speaks shim protocol 1, this agent 2" in current.output(), current.output()
    assert shim_pids(os.path.join(workdir, "agent1")) == shims, "the same shim"
    time.sleep(0.5)
    open(go, "w").close()
    c.run("wait", jid, timeout=60)
    job = c.job(jid)
    assert job["state"] == "COMPLETED" and len(job["attempts"]) == 1, job
    runs = open(log).read().split("\n")
    pid = runs[0].split()[1]
    assert runs[:2] == [f"start {pid}", f"end {pid}"] and len(runs) == 3, runs
    c.stop_all()
