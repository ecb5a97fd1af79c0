"""Checkpoints through tenk's protocol: a tag marked complete is frozen,
hashed, uploaded to the cluster's store and committed; a new attempt
restores it wherever it lands, before its tasks start; hostile and torn
tags are refused; a damaged store falls back to the commit before; a
zombie attempt's upload is refused; and a real PyTorch DDP job that loses
its rank-0 host twice resumes from its last commit, the first time on a
host that never held it, ending bit for bit where an uninterrupted run
ends, and says its goodput."""
import glob
import json
import os
import re
import signal
import sys
import time
import urllib.request

import pytest

from conftest import BIN as TENK
from conftest import (Daemon, MultiHost, Tenk, children, end_shims, root_jobs_config, shim_pids,
                      start_up, wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable


@pytest.fixture
def ckpt(workdir):
    """`tenk up` whose cluster has a checkpoint store (WORKDIR/store); its
    jobs run as root. Stopped (and checked for sanitizer reports) after."""
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    data = os.path.join(workdir, "tenk-data")
    root_jobs_config(data, admin_unix_user="root", checkpoint_store=store)
    t, d = start_up(workdir)
    yield t, d, store
    if d.alive():
        d.stop()


def checkpoints(t, jid):
    """GET /v1/jobs/JOB/checkpoints, through `tenk ckpt ls --json` (which
    runs where the cluster's CLI runs: in host 0 for several hosts)."""
    return t.json("ckpt", "ls", jid)


def test_commit_upload_and_restore_elsewhere(workdir, ckpt):
    """Attempt 1 commits a tag and deletes its own copy before failing;
    attempt 2 gets it back from the store, TENK_RESTORE_TAG/STEP set."""
    t, d, store = ckpt
    script = (
        'echo "attempt=$TENK_ATTEMPT tag=[$TENK_RESTORE_TAG] step=[$TENK_RESTORE_STEP]"; '
        'C=$TENK_CHECKPOINT_DIR; if [ "$TENK_ATTEMPT" = 1 ]; then '
        'mkdir -p $C/step-7/sub && echo weights > $C/step-7/sub/w.bin && sleep 1 && '
        f'{TENK} ckpt commit step-7 --step 7 && '
        f'while [ ! -s {store}/$TENK_JOB_ID/step-7/a1/n0/manifest.json ]; do sleep 0.1; done; '
        'sleep 1; rm -rf $C/step-7; exit 3; fi; cat $C/step-7/sub/w.bin')
    jid = t.submit("--requeue", "1", "--", "sh", "-c", script)
    p = t.run("wait", jid, check=False, timeout=60)
    out = open(os.path.join(workdir, f"tenk-{jid}.out")).read()
    assert p.returncode == 0, out + d.output()[-3000:]
    assert "attempt=1 tag=[] step=[]" in out
    assert "attempt=2 tag=[step-7] step=[7]" in out, out + d.output()[-4000:]
    assert out.strip().endswith("weights")
    # the store: fenced by attempt and node rank, the manifest last
    part = os.path.join(store, str(jid), "step-7", "a1", "n0")
    m = json.load(open(os.path.join(part, "manifest.json")))
    assert m["tag"] == "step-7" and m["step"] == 7 and m["attempt"] == 1
    assert sorted(f["path"] for f in m["files"]) == [".tenk-commit", "sub/w.bin"]
    assert open(os.path.join(part, "sub", "w.bin")).read() == "weights\n"
    res = checkpoints(t, jid)
    assert [(c["tag"], c["step"], c["attempt"]) for c in res["checkpoints"]] == \
        [("step-7", 7, 1)]
    assert res["checkpoints"][0]["manifests"][0].startswith("sha256:")
    # how long the job took to write it (its first file's birth to the
    # marker): training time spent saving, in its goodput
    w = res["checkpoints"][0]["write_ms"]
    assert 900 <= w < 5000, res["checkpoints"][0]  # (the sleep; timestamps are coarse)
    g = t.job(jid)["goodput"]
    assert abs(g["checkpointing_s"] - w / 1000) < 0.01 and g["failures"] == 1, g
    a = res["attempt"]
    assert a["number"] == 2 and a["restore_tag"] == "step-7" and a["restore_go"]
    assert a["nodes"][0]["restore"] == "done" and a["nodes"][0]["bytes"] > 0, (a, d.output()[-2000:])
    ls = t.run("ckpt", "ls", jid).stdout
    assert "step-7" in ls and "attempt 2 restores step-7 (step 7), done" in ls
    show = t.run("show", jid).stdout
    assert "Checkpoint step-7: step 7 of attempt 1" in show
    assert "restores checkpoint step-7 (step 7, attempt 1), restored" in show


def test_hostile_and_torn_tags(workdir, ckpt):
    """Nothing of a tag with a link in it, of one marked while a file is
    still being written, or of one never marked reaches the store; a good
    tag after them is committed."""
    t, d, store = ckpt
    go = os.path.join(workdir, "go")
    script = (
        'C=$TENK_CHECKPOINT_DIR; '
        'mkdir -p $C/evil && ln -s /etc/shadow $C/evil/shadow && '
        f'{TENK} ckpt commit evil --step 1; '
        f'while [ ! -e {go}1 ]; do sleep 0.1; done; '
        f'mkdir -p $C/busy && (exec 3>$C/busy/w.bin; echo part >&3; while [ ! -e {go}2 ]; '
        'do sleep 0.1; done) & '
        f'sleep 0.2; {TENK} ckpt commit busy --step 2; '
        f'while [ ! -e {go}2 ]; do sleep 0.1; done; '
        'mkdir -p $C/torn && echo half > $C/torn/w.bin; '
        'mkdir -p $C/good && echo ok > $C/good/w.bin && '
        f'{TENK} ckpt commit good --step 3; '
        f'while [ ! -s {store}/$TENK_JOB_ID/good/a1/n0/manifest.json ]; do sleep 0.1; done; '
        'sleep 1; wait')
    jid = t.submit("--", "sh", "-c", script)
    wait_for(lambda: "evil/shadow is a symbolic link" in d.output(), 30, "the link refused")
    open(go + "1", "w").close()
    wait_for(lambda: "busy/w.bin is still open for writing" in d.output(), 30,
             "the tag being written refused")
    open(go + "2", "w").close()
    t.run("wait", jid, timeout=60)
    assert sorted(os.listdir(os.path.join(store, str(jid)))) == ["good"]
    assert [c["tag"] for c in checkpoints(t, jid)["checkpoints"]] == ["good"]
    # the tenk ckpt commit of a tag that is no folder, or a bad step
    env = dict(t.env(), TENK_CHECKPOINT_DIR=workdir)
    p = t.run("ckpt", "commit", "nope", "--step", "1", env=env, check=False)
    assert p.returncode != 0 and "nope: No such file or directory" in p.stderr, p.stderr
    p = t.run("ckpt", "commit", "../x", "--step", "1", env=env, check=False)
    assert p.returncode == 2 and "is not a tag" in p.stderr
    p = t.run("ckpt", "commit", "good", "--step", "-1", env=env, check=False)
    assert p.returncode == 2 and "--step" in p.stderr


def test_damaged_store_falls_back(workdir, ckpt):
    """The newest commit's copy in the store is damaged: the restore says
    so and every node goes back to the commit before."""
    t, d, store = ckpt
    script = (
        'C=$TENK_CHECKPOINT_DIR; S=' + store + '/$TENK_JOB_ID; '
        'echo "attempt=$TENK_ATTEMPT tag=[$TENK_RESTORE_TAG]"; '
        'if [ "$TENK_ATTEMPT" = 1 ]; then for s in 1 2; do '
        'mkdir -p $C/step-$s && echo w$s > $C/step-$s/w.bin && '
        f'{TENK} ckpt commit step-$s --step $s && '
        'while [ ! -s $S/step-$s/a1/n0/manifest.json ]; do sleep 0.1; done; sleep 1; done; '
        'echo rot > $S/step-2/a1/n0/w.bin; rm -rf $C/step-*; exit 3; fi; '
        'cat $C/$TENK_RESTORE_TAG/w.bin')
    jid = t.submit("--requeue", "1", "--", "sh", "-c", script)
    t.run("wait", jid, timeout=60)
    out = open(os.path.join(workdir, f"tenk-{jid}.out")).read()
    assert "attempt=2 tag=[step-1]" in out and out.strip().endswith("w1"), out
    log = d.output()
    assert "restore of step-2 failed on node1" in log and "does not match its hash" in log, \
        log[-3000:]
    assert "restoring step-1" in log


def test_zombie_attempt_is_refused(hosts3, workdir, kill_all):
    """A node cut off from the server uploads a tag after its attempt was
    replaced elsewhere: its report is refused once it is heard again."""
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    root_jobs_config(os.path.join(workdir, "data"), checkpoint_store=store)
    c = MultiHost(workdir, hosts3, node_timeout="4s")
    kill_all += c.daemons
    trigger = os.path.join(workdir, "trigger")
    script = (
        'C=$TENK_CHECKPOINT_DIR; if [ "$TENK_ATTEMPT" = 1 ]; then '
        f'while [ ! -e {trigger} ]; do sleep 0.1; done; '
        f'mkdir -p $C/zombie && echo z > $C/zombie/w.bin && {TENK} ckpt commit zombie --step 9; '
        'sleep 60; fi; '
        f'mkdir -p $C/fresh && echo f > $C/fresh/w.bin && {TENK} ckpt commit fresh --step 20; '
        f'while [ ! -s {store}/$TENK_JOB_ID/fresh/a2/n0/manifest.json ]; do sleep 0.1; done; '
        'sleep 1')
    jid = c.submit("--", "sh", "-c", script)
    job = c.wait_state(jid, "RUNNING", timeout=30)
    first = job["attempts"][0]["nodes"][0]["name"]
    h = int(first.replace("host", ""))
    c.hosts.link(h, False)  # cut off: it goes on uploading, and cannot say so
    open(trigger, "w").close()
    part = os.path.join(store, str(jid), "zombie", "a1", "n0", "manifest.json")
    wait_for(lambda: os.path.exists(part), 30, "the zombie's upload")
    wait_for(lambda: c.job(jid)["state"] in ("COMPLETED", "FAILED"), 90, "attempt 2 to finish")
    c.hosts.link(h, True)
    wait_for(lambda: "checkpoint zombie of attempt 1 refused" in c.server.output(), 30,
             "the zombie's report, refused")
    res = checkpoints(c, jid)
    assert [(k["tag"], k["attempt"]) for k in res["checkpoints"]] == [("fresh", 2)]
    assert c.job(jid)["state"] == "COMPLETED"
    c.stop_all()


def final(out):
    with open(os.path.join(out, "final.hex")) as f:
        return f.read()


def steps(out):
    rows = []
    for path in glob.glob(os.path.join(out, "steps-*.log")):
        for line in open(path):
            t, attempt, step, loss = line.split()
            rows.append((float(t), int(attempt), int(step), os.path.basename(path)))
    return rows


def test_ddp_killed_resumes_elsewhere_and_says_its_goodput(hosts4, workdir, kill_all):
    """Two of three hosts train a DDP job; the host of node rank 0 is killed
    whole (agent and ranks at once) 20 steps after the attempt's
    checkpoint. The job goes on from that step in place, a host that never
    held it taking the lost one's rank (its part from the store), and it
    ends with the parameters an uninterrupted run ends with, bit for bit.
    Its goodput's parts add up to its wall time, its lost time is the steps
    run again times the step time the job itself logged (within 10%), and
    tenk show and tenk usage say it. (test_restart.py restarts a job in
    place twice.)"""
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    root_jobs_config(os.path.join(workdir, "data"), checkpoint_store=store)
    c = MultiHost(workdir, hosts4, fake="1xH100", node_timeout="4s")
    kill_all += c.daemons
    env = dict(c.env(), GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1")
    script = os.path.join(HERE, "ckpt_train.py")
    total = 24
    # the reference: uninterrupted, the same seed
    ref = os.path.join(workdir, "ref")
    os.mkdir(ref)
    rid = c.submit("-N", "2", "--", PY, script, ref, total, 10, env=env)
    assert "COMPLETED" in c.run("wait", rid, timeout=300, check=False).stdout, \
        c.job(rid)["reason"]
    # the interrupted run: attempt 1 saves at step 3 and is killed 20 steps
    # later; attempt 2 (from 3) runs to the end
    out = os.path.join(workdir, "run")
    os.mkdir(out)
    jid = c.submit("-N", "2", "--gpus-per-node", "1", "--", PY, script, out, total, "1:3",
                   "0.5", env=env)
    killed_at = {}
    for attempt, saved in ((1, 3),):
        wait_for(lambda: [k for k in checkpoints(c, jid)["checkpoints"]
                          if k["step"] == saved], 120, f"attempt {attempt}'s commit")
        wait_for(lambda: max([r[2] for r in steps(out) if r[1] == attempt] or [0]) >=
                 saved + 20, 60, f"attempt {attempt} 20 steps on")
        job = c.job(jid)
        held = {n["name"] for n in job["attempts"][attempt - 1]["nodes"]}
        rank0 = job["attempts"][attempt - 1]["nodes"][0]["name"]
        h = int(rank0.replace("host", ""))
        # the host dies: its ranks and its agent at once
        ranks = [k for shim in shim_pids(os.path.join(workdir, f"agent{h}"))
                 for k in children(shim)]
        killed_at[attempt] = time.time()
        # (its agent first: ranks its agent saw die would be the job's own
        # failure, on a host kept for the next attempt)
        c.agents[h].kill9()
        for k in ranks:
            os.kill(k, signal.SIGKILL)
        end_shims(os.path.join(workdir, f"agent{h}"))
        wait_for(lambda: len(c.job(jid)["attempts"]) > attempt and
                 c.job(jid)["state"] == "RUNNING", 60, f"attempt {attempt + 1} running")
        nxt = c.job(jid)["attempts"][attempt]
        names = {n["name"] for n in nxt["nodes"]}
        assert rank0 not in names, (rank0, names)
        # in place: the surviving node keeps its rank, a free host takes
        # the lost one's
        assert nxt["in_place"] and nxt["replaced"] == rank0, nxt
        assert nxt["nodes"][1]["name"] == job["attempts"][attempt - 1]["nodes"][1]["name"]
        if attempt == 1:
            # the host that never held it gets its part from the store
            fresh = names - held
            assert len(fresh) == 1, (held, names)
            wait_for(lambda: checkpoints(c, jid)["attempt"]["restore_go"], 60, "the restore")
            by_node = {n["node"]: n for n in checkpoints(c, jid)["attempt"]["nodes"]}
            assert by_node[fresh.pop()]["bytes"] > 0, by_node
    p = c.run("wait", jid, timeout=300, check=False)
    job = c.job(jid)
    assert job["state"] == "COMPLETED" and len(job["attempts"]) == 2, (job["reason"], p.stdout)
    assert "lost" in job["attempts"][0]["reason"], job["attempts"]
    rows = steps(out)
    restored = {a["number"]: a["restore"]["step"] for a in job["attempts"]
                if a.get("restore", {}).get("tag")}
    assert restored == {2: 3}, restored
    for a in (2,):
        resumed = sorted(r[2] for r in rows if r[1] == a)
        assert resumed[0] == restored[a] + 1, resumed[:5]
    assert final(out) == final(ref), "the resumed run ended elsewhere than the uninterrupted one"

    g = job["goodput"]
    parts = ("queued_s", "placing_s", "restoring_s", "starting_s", "productive_s",
             "checkpointing_s", "lost_s", "detecting_s")
    assert abs(sum(g[k] for k in parts) - g["wall_s"]) < 1, g
    assert abs(g["wall_s"] - (job["end_ms"] - job["submit_ms"]) / 1000) < 1, g
    assert g["failures"] == 1, g
    # the job's own log: the steps the killed attempt ran past the step the
    # next restored (and the one it was in when its host died), and its
    # time a step (rank 0's, between steps)
    rerun = max(r[2] for r in rows if r[1] == 1) - restored[2]
    times = sorted(r[0] for r in rows if r[3] == "steps-0.log" and r[1] == 2)
    gaps = sorted(b - a for a, b in zip(times, times[1:]))
    step_s = gaps[len(gaps) // 2]
    expected = (rerun + 1) * step_s
    assert abs(g["lost_s"] - expected) <= 0.1 * expected, (g, rerun, step_s)
    # (the steps its lines told: a dead host's last second of lines is unread)
    assert rerun - 6 <= g["steps_lost"] <= rerun, (g, rerun)
    assert 0 < g["effective_ratio"] < 1 and g["detecting_s"] > 0, g
    show = c.run("show", jid).stdout
    assert re.search(r"Goodput:  \d+\.\d% effective training time \(1 failure\(s\)", show), show
    # each attempt's share, in the API and in tenk show: they add up
    shares = [a["goodput"] for a in job["attempts"]]
    for k in ("lost_s", "detecting_s", "wall_s"):
        assert abs(sum(x[k] for x in shares) - g[k]) < 0.01, (k, shares, g)
    assert len(re.findall(r"^    cost: .* s starting; its end: [\d.]+ s lost \(\d+ step\(s\) "
                          r"done again\), [\d.]+ s detecting$", show, re.M)) == 1, show
    # tenk usage: the job's GPU-hours of kept training (two GPUs)
    u = c.json("usage", "--by", "queue", "--from", "now-1h")
    assert abs(u["total"]["good_gpu_hours"] - 2 * g["productive_s"] / 3600) < 1e-3, (u, g)
    assert 0 < u["total"]["goodput"] < 1, u
    # what the first failure cost, for the record: the time from the kill to
    # the first new step (detection: the attempt ends; placement: the next
    # starts; restore; start: its ranks' first step)
    a1, a2 = job["attempts"][0], job["attempts"][1]
    first_new = min(r[0] for r in rows if r[1] == 2)
    restored_at = a2["start_ms"] / 1000 + a2["restore"]["ms"] / 1000
    print(f"\ngoodput: {g}; steps run again {rerun}, a step {step_s:.3f} s; first failure: "
          f"kill to first new step {first_new - killed_at[1]:.1f} s: detection "
          f"{a1['end_ms'] / 1000 - killed_at[1]:.1f} s, placement "
          f"{(a2['start_ms'] - a1['end_ms']) / 1000:.1f} s, restore "
          f"{a2['restore']['ms'] / 1000:.2f} s, start {first_new - restored_at:.1f} s")
    c.stop_all()


def test_preempted_job_checkpoints_in_its_grace(workdir, ckpt):
    """A batch job preempted by a prod job writes and marks a tag in its
    grace period and exits; the agent uploads it after the tasks have
    ended, the server commits it, and the job's next attempt resumes it."""
    t, d, store = ckpt
    script = (
        'C=$TENK_CHECKPOINT_DIR; echo "attempt=$TENK_ATTEMPT tag=[$TENK_RESTORE_TAG]"; '
        'if [ -n "$TENK_RESTORE_TAG" ]; then cat $C/$TENK_RESTORE_TAG/w.bin; exit 0; fi; '
        "trap 'mkdir -p $C/grace && echo saved > $C/grace/w.bin && "
        f"{TENK} ckpt commit grace --step 42; exit 0' TERM; "
        'while true; do sleep 0.1; done')
    batch = t.submit("--class", "batch", "-G", "8", "--grace", "10s", "--", "sh", "-c", script)
    t.wait_state(batch, "RUNNING")
    prod = t.submit("--class", "prod", "-G", "8", "--", "sleep", "1")
    t.run("wait", prod, timeout=60)
    t.run("wait", batch, timeout=60)
    out = open(os.path.join(workdir, f"tenk-{batch}.out")).read()
    assert "attempt=2 tag=[grace]" in out and out.strip().endswith("saved"), \
        out + d.output()[-3000:]
    res = checkpoints(t, batch)
    assert [(k["tag"], k["step"], k["attempt"]) for k in res["checkpoints"]] == \
        [("grace", 42, 1)]


def split_cluster(workdir, procs, store, port=None):
    """A server and agents of its own (so that either can be killed alone)."""
    data = os.path.join(workdir, "data")
    root_jobs_config(data, checkpoint_store=store)

    def server(name="server"):
        if os.path.exists(os.path.join(data, "server.url")):
            os.remove(os.path.join(data, "server.url"))
        listen = f"127.0.0.1:{port}" if port else "127.0.0.1:0"
        s = Daemon(["server", "--data", data, "--listen", listen, "--node-timeout", "20s"],
                   workdir, name)
        procs.append(s)
        wait_for(lambda: os.path.exists(os.path.join(data, "server.url")) or not s.alive(), 20,
                 "the server")
        assert s.alive(), s.output()
        return s

    def agent(t, name, log=None, extra=()):
        a = Daemon(["agent", "--server", t.url, "--token-file", os.path.join(data, "agent.token"),
                    "--name", name, "--fake-gpus", "1xH100", "--work-dir",
                    os.path.join(workdir, name), "--stop-jobs", *extra], workdir, log or name)
        procs.append(a)
        return a
    return data, server, agent


def test_agent_restart_resumes_an_upload(workdir, procs):
    """The agent is killed while it uploads a large tag; the next agent of the
    node (the shims kept the job running) uploads it again, skipping what the
    store already holds whole, and the tag is committed."""
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    data, server, agent = split_cluster(workdir, procs, store)
    srv = server()
    t = Tenk(workdir, data)
    slow = ["--checkpoint-upload-rate", "20",  # MiB/s: the kill lands mid-upload
            "--metrics-listen", "127.0.0.1:0"]
    a = agent(t, "n1", extra=slow)
    t.wait_nodes_up(1)
    size = 20 * 1000 * 1000
    script = ('C=$TENK_CHECKPOINT_DIR; mkdir -p $C/big && for i in 1 2 3 4 5 6; do '
              f'head -c {size} /dev/urandom > $C/big/part-$i; done && '
              f'{TENK} ckpt commit big --step 1; sleep 600')
    jid = t.submit("--", "sh", "-c", script)
    part = os.path.join(store, str(jid), "big", "a1", "n0")
    wait_for(lambda: os.path.exists(os.path.join(part, "part-2")), 120, "the upload under way")
    assert not os.path.exists(os.path.join(part, "manifest.json"))
    # the agent's /metrics: how long the tag has waited for the store
    url = open(os.path.join(workdir, "n1", "metrics.url")).read().strip()

    def backlog():
        with urllib.request.urlopen(url, timeout=10) as r:
            m = re.search(r'^tenk_checkpoint_upload_backlog_seconds\{[^}]*job_id="%d"[^}]*\} '
                          r'(\S+)$' % jid, r.read().decode(), re.M)
        return float(m.group(1)) if m else None
    wait_for(lambda: (backlog() or 0) >= 0.5, 30, "the backlog said")
    a.kill9()
    whole = sorted(f for f in os.listdir(part) if not f.endswith(".tenk-tmp"))
    agent(t, "n1", log="again", extra=slow)
    wait_for(lambda: [k for k in checkpoints(t, jid)["checkpoints"] if k["tag"] == "big"], 120,
             "the commit")
    m = json.load(open(os.path.join(part, "manifest.json")))
    assert len(m["files"]) == 7 and all(f["size"] == size for f in m["files"]
                                        if f["path"].startswith("part-"))
    k = checkpoints(t, jid)["checkpoints"][0]
    # what was whole before the kill moved once: the second upload wrote less
    assert whole and k["bytes"] < 6 * size, (whole, k)
    url = open(os.path.join(workdir, "n1", "metrics.url")).read().strip()
    wait_for(lambda: backlog() == 0, 30, "no backlog once it is uploaded")
    t.run("cancel", jid)
    assert srv.alive()


def test_server_restart_mid_commit_loses_nothing(workdir, procs):
    """One node has uploaded its part, the other not yet, when the server is
    killed; the restarted server still has the first part and commits the
    tag when the second arrives."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    data, server, agent = split_cluster(workdir, procs, store, port=port)
    srv = server()
    t = Tenk(workdir, data)
    agent(t, "n1")
    agent(t, "n2")
    t.wait_nodes_up(2)
    go = os.path.join(workdir, "go")
    script = ('C=$TENK_CHECKPOINT_DIR; mkdir -p $C/s5 && echo $NODE_RANK > $C/s5/w.bin; '
              f'if [ "$NODE_RANK" = 1 ]; then while [ ! -e {go} ]; do sleep 0.1; done; fi; '
              f'{TENK} ckpt commit s5 --step 5; sleep 600')
    jid = t.submit("-N", "2", "--", "sh", "-c", script)
    wait_for(lambda: checkpoints(t, jid).get("attempt", {}).get("pending"), 30,
             "node 0's part, waiting for node 1's")
    srv.kill9()
    srv = server("again")
    pend = checkpoints(t, jid)["attempt"]["pending"]
    assert [p["tag"] for p in pend] == ["s5"] and pend[0]["manifests"][0] and \
        not pend[0]["manifests"][1], pend
    open(go, "w").close()
    wait_for(lambda: checkpoints(t, jid)["checkpoints"], 30, "the commit")
    k = checkpoints(t, jid)["checkpoints"][0]
    assert k["tag"] == "s5" and all(m.startswith("sha256:") for m in k["manifests"])
    t.run("cancel", jid)


def test_deepspeed_and_megatron_pointers(workdir, ckpt):
    """--ckpt-marker deepspeed: the tag `latest` names is complete; megatron:
    iter_NNNNNNN of latest_checkpointed_iteration.txt. A restore writes the
    pointer again, so the framework's own resume finds the tag."""
    t, d, store = ckpt
    cases = {
        "deepspeed": ("global_step10", 10, "latest", "global_step10"),
        "megatron": ("iter_0000020", 20, "latest_checkpointed_iteration.txt", "20"),
    }
    for marker, (tag, step, pointer, text) in cases.items():
        script = (
            'C=$TENK_CHECKPOINT_DIR; if [ "$TENK_ATTEMPT" = 1 ]; then '
            f'mkdir -p $C/{tag} && echo w > $C/{tag}/model.pt && echo {text} > $C/{pointer}; '
            f'while [ ! -s {store}/$TENK_JOB_ID/{tag}/a1/n0/manifest.json ]; do sleep 0.1; '
            f'done; sleep 1; rm -rf $C/{tag} $C/{pointer}; exit 3; fi; '
            f'echo "tag=[$TENK_RESTORE_TAG] step=[$TENK_RESTORE_STEP] '
            f'pointer=[$(cat $C/{pointer})]"; cat $C/{tag}/model.pt')
        jid = t.submit("--requeue", "1", "--ckpt-marker", marker, "--", "sh", "-c", script)
        t.run("wait", jid, timeout=60)
        out = open(os.path.join(workdir, f"tenk-{jid}.out")).read()
        assert f"tag=[{tag}] step=[{step}] pointer=[{text}]" in out, out + d.output()[-2000:]
        assert out.strip().endswith("w")
        assert t.job(jid)["request"]["ckpt_marker"] == marker
    p = t.run("submit", "--ckpt-marker", "orbax", "--", "true", check=False)
    assert p.returncode == 2 and "--ckpt-marker: tenk, dcp, deepspeed or megatron" in p.stderr


def test_dcp_marks_on_one_node(workdir, procs):
    """DCP's coordinator writes TAG/.metadata on node 0 only: node 1's part
    is uploaded once the server says node 0's is, the tag commits, and a
    restore gives node 1 the .metadata too."""
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    data, server, agent = split_cluster(workdir, procs, store)
    server()
    t = Tenk(workdir, data)
    agent(t, "n1")
    agent(t, "n2")
    t.wait_nodes_up(2)
    tag = "step-000030"
    script = (
        'C=$TENK_CHECKPOINT_DIR; echo "rank=$NODE_RANK tag=[$TENK_RESTORE_TAG]"; '
        'if [ "$TENK_ATTEMPT" = 1 ]; then '
        f'mkdir -p $C/{tag} && echo shard$NODE_RANK > $C/{tag}/__$NODE_RANK.distcp; '
        f'if [ "$NODE_RANK" = 0 ]; then echo meta > $C/{tag}/.metadata; fi; '
        f'while [ ! -s {store}/$TENK_JOB_ID/{tag}/a1/n1/manifest.json ] || '
        f'[ ! -s {store}/$TENK_JOB_ID/{tag}/a1/n0/manifest.json ]; do sleep 0.1; done; '
        'sleep 1; rm -rf $C/*; exit 3; fi; '
        f'cat $C/{tag}/.metadata $C/{tag}/__$NODE_RANK.distcp')
    jid = t.submit("-N", "2", "--requeue", "1", "--ckpt-marker", "dcp", "-o", "out-%n.txt",
                   "--", "sh", "-c", script)
    t.run("wait", jid, timeout=90)
    res = checkpoints(t, jid)
    assert [k["tag"] for k in res["checkpoints"]] == [tag]
    assert len(res["checkpoints"][0]["manifests"]) == 2
    for rank in (0, 1):
        out = open(os.path.join(workdir, f"out-{rank}.txt")).read()
        assert f"rank={rank} tag=[{tag}]" in out and f"meta\nshard{rank}" in out, out


def test_store_keeps_what_commits_need(workdir, ckpt):
    """With checkpoint_keep 2 the store ends with the two newest commits:
    an older attempt's parts and the current attempt's dropped steps go."""
    t, d, store = ckpt
    script = (
        'C=$TENK_CHECKPOINT_DIR; S=' + store + '/$TENK_JOB_ID; '
        'if [ "$TENK_ATTEMPT" = 1 ]; then set -- 1 2; else set -- 3 4; fi; '
        'for s in "$@"; do mkdir -p $C/s$s && echo $s > $C/s$s/w.bin && '
        f'{TENK} ckpt commit s$s --step $s && '
        'while [ ! -s $S/s$s/a$TENK_ATTEMPT/n0/manifest.json ]; do sleep 0.1; done; '
        'sleep 1.5; done; [ "$TENK_ATTEMPT" = 1 ] && exit 3; sleep 120')
    jid = t.submit("--requeue", "1", "--", "sh", "-c", script)
    jdir = os.path.join(store, str(jid))

    def parts():
        if not os.path.isdir(jdir):
            return []
        return sorted(f"{tag}/{a}" for tag in os.listdir(jdir)
                      for a in os.listdir(os.path.join(jdir, tag)))
    wait_for(lambda: [(k["tag"], k["attempt"]) for k in checkpoints(t, jid)["checkpoints"]] ==
             [("s3", 2), ("s4", 2)], 90, "the commits of attempt 2")
    wait_for(lambda: parts() == ["s3/a2", "s4/a2"], 90, "the store down to the kept commits")
    wait_for(lambda: "checkpoint part(s) no commit needs removed from the store" in d.output(),
             10, "the agent's word of it")
    t.run("cancel", jid)
