"""Restarts in place (issue 39), on network-namespace hosts with real
PyTorch DDP (Gloo) jobs: a gang whose rank fails on a healthy node keeps
its nodes and starts again at once, from its checkpoint, ahead of a job of
a higher class that waits for those nodes; then the host of its node rank
0 dies and its spare (--spares 1) takes that rank while the other node
keeps its own; it ends bit for bit where an uninterrupted run ends, and no
two of its attempts overlap (the flock checker of test_fencing.py, in
every rank). A task that fails on every node fails the job after
--max-restarts, each restart in place. A lost host swapped for a free one
(no spare) is test_ckpt.py's killed-host test."""
import glob
import os
import re
import signal
import sys
import time

import pytest

from conftest import (Daemon, MultiHost, children, end_shims, fence_script,
                      root_jobs_config, shim_pids, wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable


def steps(out):
    rows = []
    for path in glob.glob(os.path.join(out, "steps-*.log")):
        for line in open(path):
            t, attempt, step, _ = line.split()
            rows.append((float(t), int(attempt), int(step)))
    return rows


def final(out):
    with open(os.path.join(out, "final.hex")) as f:
        return f.read()


def kill_ranks(workdir, host):
    for shim in shim_pids(os.path.join(workdir, f"agent{host}")):
        for k in children(shim):
            os.kill(k, signal.SIGKILL)


def test_restarts_in_place_keep_the_nodes_and_swap_in_the_spare(hosts4, workdir, kill_all):
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    root_jobs_config(os.path.join(workdir, "data"), checkpoint_store=store)
    c = MultiHost(workdir, hosts4, fake="1xH100", node_timeout="4s")
    kill_all += c.daemons
    overlap = os.path.join(workdir, "overlap")
    os.mkdir(overlap)
    env = dict(c.env(), GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1", CKPT_OVERLAP=overlap)
    script = os.path.join(HERE, "ckpt_train.py")
    total = 16
    ref = os.path.join(workdir, "ref")
    os.mkdir(ref)
    rid = c.submit("-N", "2", "--", PY, script, ref, total, 100, env=dict(env, CKPT_OVERLAP=""))
    assert "COMPLETED" in c.run("wait", rid, timeout=300, check=False).stdout, \
        c.job(rid)["reason"]

    out = os.path.join(workdir, "run")
    os.mkdir(out)
    jid = c.submit("-N", "2", "--gpus-per-node", "1", "--spares", "1", "--max-restarts", "1",
                   "--", PY, script, out, total, "1:3,2:6", "0.4", env=env)
    wait_for(lambda: [k for k in c.json("ckpt", "ls", jid)["checkpoints"] if k["step"] == 3],
             120, "the commit of step 3")
    # a job of a higher class waits for these two nodes (it may not preempt
    # a job of class normal): going back through the queue would give them
    # to it
    waiting = c.submit("--class", "prod", "-N", "2", "--gpus-per-node", "1", "--", "sleep",
                       "600")
    wait_for(lambda: max([r[2] for r in steps(out) if r[1] == 1] or [0]) >= 6, 60,
             "three steps past the commit")
    assert c.job(waiting)["state"] == "PENDING"
    job = c.job(jid)
    held = [n["name"] for n in job["attempts"][0]["nodes"]]
    spare = job["spare_nodes"]
    assert len(spare) == 1 and spare[0] not in held, job
    nodes = {n["name"]: n for n in c.json("nodes")["nodes"]}
    assert nodes[spare[0]]["spare_for"] == [int(jid)] and not nodes[spare[0]]["jobs"], nodes
    table = [ln for ln in c.run("nodes").stdout.splitlines() if ln.startswith(spare[0] + " ")]
    assert table and table[0].endswith(f"spare for job {jid}"), table
    # rank 1's process dies on its healthy node
    kill_ranks(workdir, int(held[1].replace("host", "")))
    wait_for(lambda: len(c.job(jid)["attempts"]) == 2, 60, "attempt 2")
    job = c.job(jid)
    a1, a2 = job["attempts"]
    assert a1["end"] == "failed" and "task 1 on " + held[1] in a1["reason"], a1
    assert a2["in_place"] is True and "replaced" not in a2, a2
    assert [n["name"] for n in a2["nodes"]] == held, a2["nodes"]
    assert a2["master_addr"] == a1["master_addr"]
    assert c.job(waiting)["state"] == "PENDING"
    assert c.job(jid)["spare_nodes"] == spare
    # the host of node rank 0 dies (its ranks and its agent): its spare
    # takes rank 0, the other node keeps rank 1
    wait_for(lambda: [k for k in c.json("ckpt", "ls", jid)["checkpoints"] if k["step"] == 6],
             120, "the commit of step 6")
    wait_for(lambda: max([r[2] for r in steps(out) if r[1] == 2] or [0]) >= 8, 60,
             "two steps past it")
    h = int(held[0].replace("host", ""))
    # (its agent first: killed ranks its agent saw die would end the
    # attempt as the job's own failure on a healthy node)
    c.agents[h].kill9()
    kill_ranks(workdir, h)
    end_shims(os.path.join(workdir, f"agent{h}"))
    wait_for(lambda: len(c.job(jid)["attempts"]) == 3, 60, "attempt 3")
    a3 = c.job(jid)["attempts"][2]
    assert a3["in_place"] and a3["replaced"] == held[0], a3
    assert [n["name"] for n in a3["nodes"]] == [spare[0], held[1]], a3["nodes"]
    assert "lost" in c.job(jid)["attempts"][1]["reason"]
    assert c.job(waiting)["state"] == "PENDING"
    assert "COMPLETED" in c.run("wait", jid, timeout=300, check=False).stdout, \
        c.job(jid)["reason"]
    job = c.job(jid)
    assert "spare_nodes" not in job, job
    assert job["attempts"][1]["restore"]["step"] == 3, job["attempts"][1]
    assert job["attempts"][2]["restore"]["step"] == 6, job["attempts"][2]
    resumed = sorted(r[2] for r in steps(out) if r[1] == 2)
    assert resumed[0] == 4, resumed[:4]
    resumed = sorted(r[2] for r in steps(out) if r[1] == 3)
    assert resumed[0] == 7, resumed[:4]
    assert final(out) == final(ref), "the restarted run ended elsewhere than the uninterrupted one"
    assert not os.path.exists(os.path.join(overlap, "overlaps")), \
        open(os.path.join(overlap, "overlaps")).read()
    assert sorted(glob.glob(os.path.join(overlap, "attempt-*"))) == \
        [os.path.join(overlap, f"attempt-{a}") for a in (1, 2, 3)]
    show = c.run("show", jid).stdout
    assert "started in place, on the nodes its job held\n" in show, show
    assert f"started in place, on the nodes its job held ({held[0]} replaced)" in show, show
    assert "Restart:  in place, 1 spare(s) asked, held: none" in show, show
    # the spare's idle GPU was charged as held, with each attempt it was held
    # for: attempts 1 and 2 (taken in by attempt 3, no free node to refill)
    recs = {r["attempt"]: r for r in c.json("acct", "-D")["records"]
            if r["job_id"] == int(jid)}
    for n in (1, 2):
        held_h = (recs[n]["end_ms"] - recs[n]["start_ms"]) / 3.6e6
        assert 0.5 * held_h < recs[n].get("spare_gpu_hours", 0) < held_h + 0.01, recs[n]
        assert recs[n]["gpu_hours"] >= 2 * held_h + recs[n]["spare_gpu_hours"] - 0.01, recs[n]
    assert "spare_gpu_hours" not in recs[3], recs[3]
    table = c.run("acct", "-D", "-P", "-o", "JobID,Attempt,SpareGPUHours").stdout
    assert f"{jid}|1|" in table and f"{jid}|3|-" in table, table
    # the waiting job gets the nodes once the job is done
    wait_for(lambda: c.job(waiting)["state"] == "RUNNING", 60, "the waiting job")
    c.run("cancel", waiting)

    # a task that fails on every node is no node's fault: in place again and
    # again, then the job fails
    bad = c.submit("-N", "2", "--gpus-per-node", "1", "--max-restarts", "2", "--", "sh", "-c",
                   "sleep 1; exit 3")
    assert "FAILED" in c.run("wait", bad, timeout=120, check=False).stdout
    job = c.job(bad)
    assert len(job["attempts"]) == 3 and job["exit_code"] == 3, job
    first = [n["name"] for n in job["attempts"][0]["nodes"]]
    for a in job["attempts"][1:]:
        assert a["in_place"] and [n["name"] for n in a["nodes"]] == first, a
    assert "exited with code 3" in job["reason"], job["reason"]
    c.stop_all()


def test_ckpt_signal_checkpoints_on_the_way_out(hosts3, workdir, kill_all):
    """--ckpt-signal USR2@20 (just-in-time checkpointing): a rank killed on
    a healthy node breaks the other's all-reduce; tenk does not stop the
    survivor but sends it SIGUSR2, and it writes the step it had done, which
    commits without the dead rank's part. The next attempt (in place)
    restores that step on both nodes, the one without a part from node rank
    0's, so no step done is lost; no two attempts overlap."""
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    root_jobs_config(os.path.join(workdir, "data"), checkpoint_store=store)
    c = MultiHost(workdir, hosts3, fake="1xH100", node_timeout="4s")
    kill_all += c.daemons
    overlap = os.path.join(workdir, "overlap")
    os.mkdir(overlap)
    out = os.path.join(workdir, "run")
    os.mkdir(out)
    env = dict(c.env(), GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1", CKPT_OVERLAP=overlap,
               CKPT_JIT="USR2")
    # no checkpoint of its own in twelve steps: what it restores is the one
    # written on the way out
    jid = c.submit("-N", "2", "--gpus-per-node", "1", "--max-restarts", "1",
                   "--ckpt-signal", "USR2@20", "--", PY, os.path.join(HERE, "ckpt_train.py"),
                   out, 12, 100, "0.3", env=env)
    show = c.run("show", jid).stdout
    assert "on a failure SIGUSR2 to the others, up to 20s for a checkpoint" in show, show
    wait_for(lambda: max([r[2] for r in steps(out) if r[1] == 1] or [0]) >= 4, 120,
             "four steps of attempt 1")
    held = [n["name"] for n in c.job(jid)["attempts"][0]["nodes"]]
    kill_ranks(workdir, int(held[1].replace("host", "")))
    wait_for(lambda: len(c.job(jid)["attempts"]) == 2, 60, "attempt 2")
    a1 = c.job(jid)["attempts"][0]
    done = max(r[2] for r in steps(out) if r[1] == 1)
    assert open(os.path.join(out, "jit-0")).read() == f"1 {done} 1\n"
    assert "task 1 on " + held[1] in a1["reason"], a1
    assert f"checkpoint step-{done:06d} (step {done}) written on the way out" in a1["reason"], a1
    commit = [k for k in c.json("ckpt", "ls", jid)["checkpoints"] if k["step"] == done]
    assert commit and commit[0]["attempt"] == 1, c.json("ckpt", "ls", jid)
    assert "COMPLETED" in c.run("wait", jid, timeout=300, check=False).stdout, \
        c.job(jid)["reason"]
    job = c.job(jid)
    a2 = job["attempts"][1]
    assert a2["in_place"] and [n["name"] for n in a2["nodes"]] == held, a2
    assert a2["restore"]["step"] == done, a2
    # both ranks went on from the step after it: nothing done was lost
    for rank in (0, 1):
        resumed = sorted(r[2] for r in steps(out) if r[1] == 2 and
                         os.path.exists(os.path.join(out, f"steps-{rank}.log")))
        assert resumed[0] == done + 1, resumed[:4]
    again = [ln for ln in open(os.path.join(out, "steps-1.log")) if ln.split()[1] == "2"]
    assert int(again[0].split()[2]) == done + 1, again[:2]
    log = open(os.path.join(workdir, f"agent{held[1].replace('host', '')}.log")).read()
    assert f"step-{done:06d} has no part of node rank 1; restoring node rank 0's" in log
    assert not os.path.exists(os.path.join(overlap, "overlaps")), \
        open(os.path.join(overlap, "overlaps")).read()
    c.stop_all()


def test_elastic_gang_shrinks_and_grows(hosts4, workdir, kill_all):
    """-N 2:3: an elastic PyTorch DDP gang starts on the three free nodes;
    a host dies and no node is free to take its place, so it goes on with
    two (WORLD_SIZE 2, from its last checkpoint); the host's agent comes
    back and at its next commit the gang grows to three again, restoring
    it (the new node from node rank 0's part). No two attempts overlap."""
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    root_jobs_config(os.path.join(workdir, "data"), checkpoint_store=store)
    c = MultiHost(workdir, hosts4, fake="1xH100", node_timeout="4s")
    kill_all += c.daemons
    overlap = os.path.join(workdir, "overlap")
    os.mkdir(overlap)
    out = os.path.join(workdir, "run")
    os.mkdir(out)
    env = dict(c.env(), GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1", CKPT_OVERLAP=overlap)
    for args, said in ((["-N", "3:2"], "--nodes 3:2: MAX is fewer than MIN"),
                       (["-N", "2:x"], "--nodes: expected N or MIN:MAX"),
                       (["-N", "2:3", "-n", "6"], "an elastic gang's tasks follow its nodes"),
                       (["--ckpt-signal", "USR2@0"], "--ckpt-signal: expected SIG[@SECONDS]"),
                       (["--ckpt-signal", "KILL"], "ckpt_signal.number: 9 cannot be caught")):
        p = c.run("submit", *args, "--", "true", check=False)
        assert p.returncode != 0 and said in p.stderr, (args, p.stderr)
    jid = c.submit("-N", "2:3", "--gpus-per-node", "1", "--max-restarts", "3", "--", PY,
                   os.path.join(HERE, "ckpt_train.py"), out, 21, 3, "0.3", env=env)
    show = c.run("show", jid).stdout
    assert "Shape:    2 to 3 node(s) (elastic)" in show, show
    wait_for(lambda: c.job(jid)["state"] == "RUNNING", 60, "the job to run")
    a1 = c.job(jid)["attempts"][0]
    assert len(a1["nodes"]) == 3, a1
    wait_for(lambda: [k for k in c.json("ckpt", "ls", jid)["checkpoints"] if k["step"] >= 3],
             120, "a commit")
    # the host of node rank 2 dies: nothing is free to replace it
    h = int(a1["nodes"][2]["name"].replace("host", ""))
    # (its agent first: killed ranks its agent saw die would end the
    # attempt as the job's own failure on a healthy node)
    c.agents[h].kill9()
    kill_ranks(workdir, h)
    end_shims(os.path.join(workdir, f"agent{h}"))
    wait_for(lambda: len(c.job(jid)["attempts"]) >= 2, 60, "attempt 2")
    a2 = c.job(jid)["attempts"][1]
    assert a2["in_place"] and [n["name"] for n in a2["nodes"]] == \
        [n["name"] for n in a1["nodes"][:2]], a2
    at = a2["restore"]["step"]
    assert at >= 3, a2
    # its agent comes back: the gang grows at its next commit
    c.start_agent(h)
    wait_for(lambda: len(c.job(jid)["attempts"]) >= 3, 120, "attempt 3")
    assert "COMPLETED" in c.run("wait", jid, timeout=300, check=False).stdout, \
        c.job(jid)["reason"]
    job = c.job(jid)
    a2, a3 = job["attempts"][1], job["attempts"][2]
    assert a2["end"] == "resized" and "grows from 2 nodes" in a2["reason"], a2
    assert a3["in_place"] and len(a3["nodes"]) == 3, a3
    assert a3["restore"]["step"] > at, a3
    ranks = {a: sorted({f for _, att, _, f in steps_by_rank(out) if att == a}) for a in (1, 2, 3)}
    assert ranks == {1: [0, 1, 2], 2: [0, 1], 3: [0, 1, 2]}, ranks
    for a, first in ((2, at), (3, a3["restore"]["step"])):
        resumed = sorted(s for _, att, s, _ in steps_by_rank(out) if att == a)
        assert resumed[0] == first + 1, (a, resumed[:4])
    assert not os.path.exists(os.path.join(overlap, "overlaps")), \
        open(os.path.join(overlap, "overlaps")).read()
    c.stop_all()


def steps_by_rank(out):
    rows = []
    for path in glob.glob(os.path.join(out, "steps-*.log")):
        rank = int(os.path.basename(path)[6:-4])
        for line in open(path):
            t, attempt, step, _ = line.split()
            rows.append((float(t), int(attempt), int(step), rank))
    return rows


@pytest.mark.parametrize("whose", ["job", "pool"])
def test_idle_spare_is_lent_to_preemptible_work(hosts4, workdir, kill_all, whose):
    """An idle spare, a job's own (--spares 1) or the cluster's pool's
    ("spares": {"H100": 1}), runs a preemptible job (class batch) that
    waits for an accelerator, until a restart in place needs the spare: the
    job's host dies, the borrower is preempted, and the job's next attempt
    starts in place on the spare once the borrower has left it."""
    pool = whose == "pool"
    root_jobs_config(os.path.join(workdir, "data"), **({"spares": {"H100": 1}} if pool else {}))
    c = MultiHost(workdir, hosts4, fake="1xH100", node_timeout="4s")
    kill_all += c.daemons
    if pool:
        wait_for(lambda: [n for n in c.json("nodes")["nodes"] if n.get("pool_spare")], 30,
                 "the pool's spare")
        spare = [n["name"] for n in c.json("nodes")["nodes"] if n.get("pool_spare")][0]
        jid = c.submit("--gpus-per-node", "1", "--restart", "in-place", "--max-restarts", "2",
                       "--", "sleep", "600")
        wait_for(lambda: c.job(jid)["state"] == "RUNNING", 60, "the job")
        lent_by = "the cluster's pool"
    else:
        jid = c.submit("--gpus-per-node", "1", "--spares", "1", "--restart", "in-place",
                       "--max-restarts", "2", "--", "sleep", "600")
        wait_for(lambda: c.job(jid)["state"] == "RUNNING" and c.job(jid).get("spare_nodes"),
                 60, "the job and its spare")
        spare = c.job(jid)["spare_nodes"][0]
        lent_by = f"job {jid}"
    home = c.job(jid)["attempts"][0]["nodes"][0]["name"]
    other = c.submit("--gpus-per-node", "1", "--", "sleep", "600")
    wait_for(lambda: c.job(other)["state"] == "RUNNING", 60, "the third node's job")
    # a job of a class that is not preemptible waits; one of batch borrows
    waits = c.submit("--gpus-per-node", "1", "--", "sleep", "600")
    borrower = c.submit("--class", "batch", "--gpus-per-node", "1", "--grace", "1s", "--",
                        "sleep", "600")
    wait_for(lambda: c.job(borrower)["state"] == "RUNNING", 60, "the borrower")
    b = c.job(borrower)
    assert b["attempts"][0]["nodes"][0]["name"] == spare, b
    assert b["borrowed_from"] == ({"pool": True, "node": spare} if pool else
                                  {"job": int(jid), "node": spare}), b
    assert c.job(waits)["state"] == "PENDING"
    row = [ln for ln in c.run("nodes").stdout.splitlines() if ln.startswith(spare + " ")]
    said = "spare of the cluster's pool" if pool else f"spare for job {jid}"
    assert row and row[0].endswith(f"{said}, lent to job {borrower}"), row
    until = "until a restart needs it" if pool else "until that job needs it"
    assert f"runs on {spare}, a spare of {lent_by}, {until}" in c.run("show", borrower).stdout
    # the job's host dies: the borrower goes, the job takes the spare
    h = int(home.replace("host", ""))
    # (its agent first: killed ranks its agent saw die would end the
    # attempt as the job's own failure on a healthy node)
    c.agents[h].kill9()
    kill_ranks(workdir, h)
    end_shims(os.path.join(workdir, f"agent{h}"))
    wait_for(lambda: len(c.job(jid)["attempts"]) == 2, 60, "attempt 2")
    a2 = c.job(jid)["attempts"][1]
    assert a2["in_place"] and a2["nodes"][0]["name"] == spare and a2["replaced"] == home, a2
    b = c.job(borrower)
    assert b["state"] == "PENDING" and "borrowed_from" not in b, b
    assert f"it ran on a spare of {lent_by}, which " in b["attempts"][0]["reason"], b
    assert b["attempts"][0]["end"] == "preempted"
    # the borrower ended before the job's next attempt began (invariant A)
    assert b["attempts"][0]["end_ms"] <= a2["start_ms"], (b["attempts"][0], a2)
    for j in (jid, other, waits, borrower):
        c.run("cancel", j, check=False)
    c.stop_all()


def test_power_fence_moves_a_dead_hosts_gang_before_the_node_timeout(hosts4, workdir, kill_all):
    """With "power_fence", a host that dies is powered off by the
    operator's command once it has been silent for "after" while its
    witness group hears the server, and its gang restarts in place at once
    rather than after the node timeout (its tasks' lease is not waited
    for: the command says they are gone). The server asks its agents to
    beat every second (power_fence's "heartbeat") and each says it does, so
    at the default node timeout of 30 s "after" is three beats and their
    delays, 5.25 s, not three eighths of the node timeout. A command that fails
    leaves the node to the node timeout, and says why in the server's
    log."""
    script, log = fence_script(workdir, hosts4)
    # an "after" under three beats and their delays: the server says so and
    # does not start
    bad = os.path.join(workdir, "bad")
    root_jobs_config(bad, power_fence={"command": [script], "after": "2s"})
    srv = Daemon(["server", "--data", bad, "--listen", "127.0.0.1:0", "--node-timeout", "30s"],
                 workdir, "bad")
    kill_all.append(srv)
    wait_for(lambda: not srv.alive(), 20, "the refusal")
    assert ("power_fence.after: 2s is under three heartbeats of 1000ms and their delays "
            "(5250ms at a node timeout of 30s)") in srv.output(), srv.output()
    root_jobs_config(os.path.join(workdir, "data"),
                     power_fence={"command": [script, "{node}", "{addr}"]})
    c = MultiHost(workdir, hosts4, fake="1xH100", node_timeout="30s")
    kill_all += c.daemons
    wait_for(lambda: [n.get("heartbeat_ms") for n in c.json("nodes")["nodes"]] == [1000] * 3,
             30, "every agent beating every second, as the server asks")
    beating = time.monotonic()
    jid = c.submit("-N", "2", "--gpus-per-node", "1", "--restart", "in-place",
                   "--max-restarts", "3", "--", "sleep", "600")
    wait_for(lambda: c.job(jid)["state"] == "RUNNING", 60, "the gang")
    first = [n["name"] for n in c.job(jid)["attempts"][0]["nodes"]]
    # the server powers a node off only once its group has been heard
    # without a gap for half the node timeout: the host dies after that,
    # however fast the gang started, so that its silence alone is timed
    time.sleep(max(0.0, beating + 16 - time.monotonic()))
    # the host of node rank 1 dies: its ranks and its agent; its shims are
    # left, as if the machine hung, for the fence to end
    h = int(first[1].replace("host", ""))
    c.agents[h].kill9()  # (first: ranks its agent saw die would be the job's failure)
    kill_ranks(workdir, h)
    wait_for(lambda: len(c.job(jid)["attempts"]) == 2, 25, "attempt 2 before the node timeout")
    a1, a2 = c.job(jid)["attempts"]
    silent = re.search(r"powered off by power_fence after ([0-9.]+)s of silence", a1["reason"])
    assert silent, a1
    # never before three beats and their delays (1 s and 0.75 s each)
    assert float(silent.group(1)) >= 5.25, a1
    assert a2["in_place"] and a2["replaced"] == first[1], a2
    assert [n["name"] for n in a2["nodes"]][0] == first[0], a2
    with open(log) as f:
        assert f.read().split() == [first[1], hosts4.addrs[h]]
    assert not shim_pids(os.path.join(workdir, f"agent{h}")), "the fence left shims running"
    wait_for(lambda: c.job(jid)["state"] == "RUNNING", 60, "attempt 2 running")
    # the host powered off comes back (its witness group whole again; the
    # server counts a member to prove another's silence only when it has
    # heard it without a gap since before that silence began)
    c.start_agent(h)
    c.wait_nodes_up(3)
    # and is heard without a gap for half the node timeout before it may
    # witness another's silence (as at the start: 3 s was a race it lost)
    time.sleep(16)
    # a command that fails: the next dead host is left to the node timeout
    open(os.path.join(workdir, "fence-fails"), "w").close()
    g = int(first[0].replace("host", ""))
    kill_ranks(workdir, g)
    c.agents[g].kill9()
    wait_for(lambda: f"node {first[0]}: power_fence failed (it exited with 1: the BMC of "
             f"{first[0]} does not answer)" in c.server.output(), 30, "the failure's log line")
    assert len(c.job(jid)["attempts"]) == 2 and not c.job(jid)["attempts"][1].get("ended"), \
        c.job(jid)
    assert [ln.split()[0] for ln in open(log)] == [first[1], first[0]]
    end_shims(os.path.join(workdir, f"agent{g}"))
    c.run("cancel", jid)
    c.stop_all()
