"""Jobs outlive the control plane (DESIGN.md §5, witness groups): an outage
of the server, however long, stops no task; only a node cut off from a
working server fences itself (test_fencing.py: one node's link cut, its
job runs again elsewhere with no overlap).

Three agents, each a network-namespace host, one witness group; the server
in a host of its own. Every task holds the attempt's flock (the checker of
test_fencing.py), writes its pid once, and rank 0 writes a training line a
second to $TENK_METRICS."""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

from conftest import MultiHost, fence_script, root_jobs_config, wait_for

PY = sys.executable
NODE_TIMEOUT_S = 6

JOB = r"""
import fcntl, os, sys, time
out = sys.argv[1]
attempt, rank = int(os.environ["TENK_ATTEMPT"]), int(os.environ["RANK"])
mine = open(f"{out}/attempt-{attempt}", "a")
fcntl.flock(mine, fcntl.LOCK_SH)
if attempt > 1:
    turn = open(f"{out}/turn-{attempt}", "a")
    fcntl.flock(turn, fcntl.LOCK_EX)
    prev = open(f"{out}/attempt-{attempt - 1}", "a")
    try:
        fcntl.flock(prev, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(prev, fcntl.LOCK_UN)
    except BlockingIOError:
        open(f"{out}/OVERLAP", "a").write(f"{attempt} {rank}\n")
    fcntl.flock(turn, fcntl.LOCK_UN)
with open(f"{out}/pid-{rank}-{attempt}", "w") as f:
    f.write(f"{os.getpid()}\n")
metrics = os.environ.get("TENK_METRICS") if rank == 0 else None
step = 0
while not os.path.exists(f"{out}/go"):
    step += 1
    if metrics:
        with open(metrics, "a") as m:
            m.write(f"step={step} loss={1.0 / step:.6f}\n")
        with open(f"{out}/step.new", "w") as s:  # whole, for the test that reads it
            s.write(f"{step}\n")
        os.replace(f"{out}/step.new", f"{out}/step")
    time.sleep(1.0)
"""


def pids(out):
    files = glob.glob(f"{out}/pid-*")
    got = {os.path.basename(f): open(f).read() for f in files}
    return {k: int(v) for k, v in got.items() if v.endswith("\n")}


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def start_job(c, out):
    os.mkdir(out)
    jid = c.submit("-N", "3", "--gpus-per-task", "4", "--", PY, "-c", JOB, out)
    c.wait_state(jid, "RUNNING")
    wait_for(lambda: len(pids(out)) == 3, 30, "the three ranks' pids")
    # rank 0 writes its first step just after its pid: the outages that
    # follow read how far it got (seen once under load: not yet written)
    wait_for(lambda: os.path.exists(f"{out}/step"), 30, "the first step")
    return jid, pids(out)


def steps(c, jid):
    m = c.job(jid)["attempts"][0].get("metrics") or {}
    return m.get("history", {}).get("steps", [])


def check_untouched(c, jid, out, first, what):
    """The same attempt, the same processes, all alive, nothing twice."""
    job = c.job(jid)
    assert job["state"] == "RUNNING" and len(job["attempts"]) == 1, (what, job)
    assert pids(out) == first, (what, pids(out), first)
    dead = [p for p in first.values() if not alive(p)]
    assert not dead, (what, dead)
    assert not os.path.exists(f"{out}/OVERLAP"), what


def written(out):
    return int(open(f"{out}/step").read() or 0)


def groups_ready(workdir):
    """Every agent holds its group, with every member's endpoint."""
    for h in (1, 2, 3):
        try:
            w = json.load(open(os.path.join(workdir, f"agent{h}", "witness.json")))
        except (OSError, ValueError):
            return False
        g = w.get("group") or {}
        if len(g.get("members", [])) != 3 or not all(m["port"] for m in g["members"]):
            return False
    return True


def nodes_state(c):
    """{} while the server does not answer."""
    p = c.run("nodes", "--json", check=False)
    if p.returncode != 0:
        return {}
    return {n["name"]: n["state"] for n in json.loads(p.stdout)["nodes"]}


def outage_cluster(hosts, workdir, kill_all):
    """The server and three agents, the job running on all three, every
    agent holding its group with every member's endpoint. The cluster
    powers silent nodes off ("power_fence"), which no outage of the
    control plane may set off: finish() checks that it never did. It
    waits the least silence that is safe (three beats of 0.6 s and their
    delays of 0.15 s: 2.25 s at this node timeout)."""
    script, _ = fence_script(workdir, hosts)
    root_jobs_config(os.path.join(workdir, "data"),
                     power_fence={"command": [script, "{node}", "{addr}"]})
    c = MultiHost(workdir, hosts, node_timeout=f"{NODE_TIMEOUT_S}s")
    kill_all += c.daemons
    out = os.path.join(workdir, "check")
    jid, first = start_job(c, out)
    wait_for(lambda: groups_ready(workdir), 20, "the agents' witness groups")
    return c, out, jid, first


def finish(c, jid, out):
    """Every line written is in the history once, in order; the job ends
    with its one attempt."""
    last = written(out)
    wait_for(lambda: last in steps(c, jid), 60, f"step {last} in the history",
             show=lambda: steps(c, jid)[-5:])
    got = steps(c, jid)
    upto = [s for s in got if s <= last]
    assert upto == list(range(1, last + 1)), got
    open(f"{out}/go", "w").close()
    c.run("wait", jid, timeout=60)
    job = c.job(jid)
    assert job["state"] == "COMPLETED" and len(job["attempts"]) == 1, job
    assert not os.path.exists(f"{out}/OVERLAP")
    fenced = os.path.join(c.workdir, "fenced")
    assert not os.path.exists(fenced), "powered off in an outage: " + open(fenced).read()


def test_jobs_run_through_server_outages(hosts4, workdir, kill_all):
    """The server stopped for two and a half node timeouts (an agent
    restarted meanwhile), killed and kept down for one and a half, and cut
    from every node for one and a half: every task runs on, with the same
    attempt and pids, and the training lines written meanwhile reach the
    history once."""
    T = NODE_TIMEOUT_S
    c, out, jid, first = outage_cluster(hosts4, workdir, kill_all)

    # 1. SIGSTOP for 2.5T; an agent restarted in the middle of it
    c.server.proc.send_signal(signal.SIGSTOP)
    before = written(out)
    try:
        time.sleep(T * 1.0)
        c.agents[1].kill9()
        kill_all.append(c.start_agent(1, stop_jobs=False))
        time.sleep(T * 1.5)
        assert all(alive(p) for p in first.values()), "a task died in the pause"
        # the agent's /metrics says which case it is in (read in its host)
        text = subprocess.run(c.hosts.cmd(2, ["curl", "-sf", "http://127.0.0.1:9400/metrics"]),
                              capture_output=True, text=True, timeout=30, check=True).stdout
        assert re.search(r'tenk_agent_fence_state\{[^}]*state="control_plane_away"[^}]*\} 1',
                         text), text
        silent = re.search(r"tenk_agent_server_silent_seconds\{[^}]*\} (\S+)", text)
        assert silent and float(silent.group(1)) >= T * 2, text
    finally:
        c.server.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: set(nodes_state(c).values()) == {"UP"}, 30, "the nodes UP again")
    # every agent in touch again before the next outage: a server back for
    # a moment, heard by two of a group and not by the third, leaves the
    # third unable to prove the control plane away until its peers' proof
    # of hearing the server runs out (a quarter of the node timeout), and
    # its lease may end first (a limitation, noted for the protocol)
    wait_for(lambda: all("the server answers again" in c.agents[h].output() for h in (1, 2, 3)),
             30, "every agent to hear the server again")
    # and to have renewed its shims' leases by the server's answers: an
    # agent restarted in the pause registers again first, and a server
    # killed between its first answer and the next beat's left its shims
    # on the lease its peers last gave them (seen once, under load: it ran
    # out 0.2 s before the peers' proof of the outage came)
    time.sleep(T / 2)
    check_untouched(c, jid, out, first, "after the pause")
    assert written(out) >= before + 2 * T, "the job went on in the pause"
    for h in (2, 3):
        assert "the control plane is away, jobs go on" in c.agents[h].output()
    assert "the control plane is away, jobs go on" in c.agents[1].output(), \
        "the restarted agent renews its shims by its peers"

    # 2. kill -9, down for 1.5T, started again on its data
    c.server.kill9()
    time.sleep(T * 1.5)
    assert all(alive(p) for p in first.values()), "a task died while the server was down"
    c.server.start()
    wait_for(lambda: c.server.alive() and set(nodes_state(c).values()) == {"UP"}, 40,
             "the server back, the nodes UP")
    check_untouched(c, jid, out, first, "after the restart")

    # 3. the server's host cut from every node for 1.5T
    c.hosts.link(0, False)
    try:
        time.sleep(T * 1.5)
        assert all(alive(p) for p in first.values()), "a task died while the server was cut"
    finally:
        c.hosts.link(0, True)
    wait_for(lambda: set(nodes_state(c).values()) == {"UP"}, 40, "the nodes UP again")
    check_untouched(c, jid, out, first, "after the cut")
    finish(c, jid, out)
    c.stop_all()


def test_two_of_three_cut_hold(hosts4, workdir, kill_all):
    """Two of the group's three nodes cut from the server but not from each
    other: they find a majority that hears nothing and run on; the server,
    which sees only the third, holds them UNREACHABLE and moves nothing;
    everything runs on when the links come back."""
    T = NODE_TIMEOUT_S
    c, out, jid, first = outage_cluster(hosts4, workdir, kill_all)
    # the server's host drops what hosts 1 and 2 send it
    rules = [["iptables", "-I", "INPUT", "-s", c.hosts.addrs[h], "-j", "DROP"] for h in (1, 2)]
    for r in rules:
        subprocess.run(c.hosts.cmd(0, r), check=True)
    try:
        wait_for(lambda: nodes_state(c).get("host1") == "UNREACHABLE" and
                 nodes_state(c).get("host2") == "UNREACHABLE", T * 3, "the two held")
        time.sleep(T * 2)
        check_untouched(c, jid, out, first, "two cut")
        st = nodes_state(c)
        assert st["host3"] == "UP" and st["host1"] == st["host2"] == "UNREACHABLE", st
        # /metrics says so too (read from the server's host)
        ca = os.path.join(c.data, "tls", "ca.pem")
        text = subprocess.run(c.hosts.cmd(0, ["curl", "-sf", "--cacert", ca, "-H",
                                              f"Authorization: Bearer {c.token}",
                                              f"{c.url}/metrics"]),
                              capture_output=True, text=True, timeout=30, check=True).stdout
        assert 'tenk_nodes{state="UNREACHABLE"} 2' in text, text
    finally:
        for r in rules:
            subprocess.run(c.hosts.cmd(0, ["iptables", "-D"] + r[2:]), check=False)
    wait_for(lambda: set(nodes_state(c).values()) == {"UP"}, 40, "the nodes UP again")
    check_untouched(c, jid, out, first, "after the cut")
    for h in (1, 2):
        assert "the control plane is away, jobs go on" in c.agents[h].output()
    assert "lost contact with 2 of 3 nodes of witness group" in c.server.output()
    finish(c, jid, out)
    c.stop_all()
