"""Restarts in place (issue 39), on network-namespace hosts with real
PyTorch DDP (Gloo) jobs: a gang whose rank fails on a healthy node keeps
its nodes and starts again at once, from its checkpoint, ahead of a job of
a higher class that waits for those nodes, and ends bit for bit where an
uninterrupted run ends; no two of its attempts overlap (the flock checker
of test_fencing.py, in every rank); a task that fails on every node fails
the job after --max-restarts, each restart in place. A lost host swapped
for a free one is test_ckpt.py's killed-twice test."""
import glob
import os
import signal
import sys

from conftest import MultiHost, children, root_jobs_config, shim_pids, wait_for

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


def test_rank_killed_restarts_in_place_ahead_of_the_queue(hosts3, workdir, kill_all):
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    root_jobs_config(os.path.join(workdir, "data"), checkpoint_store=store)
    c = MultiHost(workdir, hosts3, fake="1xH100")
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
    jid = c.submit("-N", "2", "--gpus-per-node", "1", "--max-restarts", "1", "--", PY, script,
                   out, total, "1:3", "0.4", env=env)
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
    held = [n["name"] for n in c.job(jid)["attempts"][0]["nodes"]]
    # rank 1's process dies on its healthy node
    h = int(held[1].replace("host", ""))
    for shim in shim_pids(os.path.join(workdir, f"agent{h}")):
        for k in children(shim):
            os.kill(k, signal.SIGKILL)
    wait_for(lambda: len(c.job(jid)["attempts"]) == 2, 60, "attempt 2")
    job = c.job(jid)
    a1, a2 = job["attempts"]
    assert a1["end"] == "failed" and "task 1 on " + held[1] in a1["reason"], a1
    assert a2["in_place"] is True and "replaced" not in a2, a2
    assert [n["name"] for n in a2["nodes"]] == held, a2["nodes"]
    assert a2["master_addr"] == a1["master_addr"]
    assert c.job(waiting)["state"] == "PENDING"
    assert "COMPLETED" in c.run("wait", jid, timeout=300, check=False).stdout, \
        c.job(jid)["reason"]
    job = c.job(jid)
    assert job["attempts"][1]["restore"]["step"] == 3, job["attempts"][1]
    resumed = sorted(r[2] for r in steps(out) if r[1] == 2)
    assert resumed[0] == 4, resumed[:4]
    assert final(out) == final(ref), "the restarted run ended elsewhere than the uninterrupted one"
    assert not os.path.exists(os.path.join(overlap, "overlaps")), \
        open(os.path.join(overlap, "overlaps")).read()
    assert sorted(glob.glob(os.path.join(overlap, "attempt-*"))) == \
        [os.path.join(overlap, f"attempt-{a}") for a in (1, 2)]
    show = c.run("show", jid).stdout
    assert "started in place, on the nodes its job held\n" in show, show
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
