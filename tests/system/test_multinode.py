"""Gang jobs across hosts made of network namespaces: one launch for every
node, torchrun-compatible environments, real PyTorch training, the gang
failing together, node loss and server crashes."""
import glob
import json
import os
import socket
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import MultiHost, alive, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable  # the Python that has torch, whatever PATH says

# Every rank records its environment; rank 0 listens on MASTER_ADDR:MASTER_PORT
# and the others connect to it, proving the address is reachable from every
# host and the port free.
RENDEZVOUS = r"""
import os, socket, sys, time
e = os.environ
keys = "RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE NODE_RANK NNODES MASTER_ADDR MASTER_PORT CUDA_VISIBLE_DEVICES TENK_NODE_NAME TENK_ATTEMPT".split()
print(" ".join(f"{k}={e.get(k, '')}" for k in keys), flush=True)
addr, port, rank, world = e["MASTER_ADDR"], int(e["MASTER_PORT"]), int(e["RANK"]), int(e["WORLD_SIZE"])
if rank == 0:
    s = socket.socket(); s.bind((addr, port)); s.listen(); seen = set()
    s.settimeout(60)
    while len(seen) < world - 1:
        c, _ = s.accept(); seen.add(int(c.recv(16))); c.close()
    print("RENDEZVOUS", sorted(seen), flush=True)
else:
    for _ in range(600):
        try:
            c = socket.create_connection((addr, port), timeout=2); c.sendall(str(rank).encode()); c.close(); break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit(9)
"""


def parse(line):
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def test_gang_environment_across_hosts(hosts3, workdir, kill_all):
    c = MultiHost(workdir, hosts3)
    kill_all += c.daemons
    jid = c.submit("-N", "2", "--tasks-per-node", "2", "--gpus-per-task", "1", "-o",
                   "rank-%t.out", "--", PY, "-c", RENDEZVOUS)
    c.run("wait", jid, timeout=120)
    job = c.job(jid)
    assert job["state"] == "COMPLETED", job
    envs = [parse(open(os.path.join(workdir, f"rank-{r}.out")).readline()) for r in range(4)]
    assert sorted(int(e["RANK"]) for e in envs) == [0, 1, 2, 3]
    assert {e["WORLD_SIZE"] for e in envs} == {"4"}
    assert {e["NNODES"] for e in envs} == {"2"} and {e["LOCAL_WORLD_SIZE"] for e in envs} == {"2"}
    nodes = [n["name"] for n in job["attempts"][0]["nodes"]]
    addr = {f"host{h}": hosts3.addrs[h] for h in range(1, 3)}
    assert len({e["MASTER_ADDR"] for e in envs}) == 1
    assert envs[0]["MASTER_ADDR"] == addr[nodes[0]], "the address of node rank 0"
    assert len({e["MASTER_PORT"] for e in envs}) == 1
    for node_rank in (0, 1):
        mine = [e for e in envs if e["NODE_RANK"] == str(node_rank)]
        assert {e["TENK_NODE_NAME"] for e in mine} == {nodes[node_rank]}
        assert sorted(e["LOCAL_RANK"] for e in mine) == ["0", "1"]
        assert len({e["CUDA_VISIBLE_DEVICES"] for e in mine}) == 2, "distinct within a node"
    assert "RENDEZVOUS [1, 2, 3]" in open(os.path.join(workdir, "rank-0.out")).read()
    c.stop_all()


def check_training(out, world):
    results = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "result-*.json")))]
    assert sorted(r["rank"] for r in results) == list(range(world))
    for r in results:
        assert r["world"] == world and r["same"], r
        assert r["last"] < r["first"] * 0.2, f"loss did not fall: {r}"
    assert len({r["node"] for r in results}) == 2, "the ranks ran on two hosts"
    return results


@pytest.mark.parametrize("how", ["task-per-rank", "torchrun"])
def test_pytorch_ddp_two_hosts(hosts3, workdir, kill_all, how):
    c = MultiHost(workdir, hosts3)
    kill_all += c.daemons
    out = os.path.join(workdir, "ddp")
    os.mkdir(out)
    env = c.env()
    env["OMP_NUM_THREADS"] = "1"
    script = os.path.join(HERE, "ddp_train.py")
    if how == "task-per-rank":
        env["GLOO_SOCKET_IFNAME"] = "eth0"  # the hosts' only interface besides lo
        jid = c.submit("-N", "2", "--tasks-per-node", "2", "--gpus-per-task", "1", "--", PY, script,
                       out, env=env)
    else:
        # a plain torchrun once per node: tenk's PET_* give it the nodes, the
        # ranks per node and the job's own rendezvous, and tenk points gloo
        # at the interface toward the master, for these hosts' name
        # resolves to a loopback address (the test sets no GLOO_SOCKET_IFNAME)
        hostname = socket.gethostname()
        assert socket.gethostbyname(hostname).startswith("127."), "the case under test"
        env.pop("GLOO_SOCKET_IFNAME", None)
        cmd = f"exec torchrun --redirects 1 --tee 1 {script} {out}"
        jid = c.submit("-N", "2", "--tasks-per-node", "1", "--gpus-per-task", "2", "--", "sh",
                       "-c", cmd, env=env)
    p = c.run("wait", jid, check=False, timeout=300)
    job = c.job(jid)
    if job["state"] != "COMPLETED":
        logs = "".join(open(f).read()[-2000:] for f in glob.glob(os.path.join(workdir, "*.out")))
        raise AssertionError(f"{job['state']} {job['reason']}\n{logs}")
    assert p.returncode == 0
    results = check_training(out, 4)
    if how == "torchrun":
        assert sorted(r["local_rank"] for r in results) == [0, 0, 1, 1]
    c.stop_all()


def hung_torch_report(workdir, jobs):
    """What the jobs' processes were doing, for a run that did not end: their
    list, then each Python's stacks (SIGABRT with PYTHONFAULTHANDLER set makes
    it print them into the job's output) and the jobs' outputs."""
    ps = subprocess.run(["ps", "-eo", "pid,ppid,stat,etime,wchan:20,args"],
                        capture_output=True, text=True).stdout
    mine = [l for l in ps.splitlines() if workdir in l]
    for line in mine:
        if "python" in line or "torchrun" in line:
            try:
                os.kill(int(line.split()[0]), signal.SIGABRT)
            except ProcessLookupError:
                pass
    time.sleep(3)
    outs = "".join(f"== {f}\n" + open(f, errors="replace").read()[-6000:]
                   for f in sorted(glob.glob(os.path.join(workdir, "tr*-*.out"))))
    return (json.dumps([{k: j[k] for k in ("id", "state", "reason", "attempts")} for j in jobs],
                       indent=1)[:4000] + "\n" + "\n".join(mine) + "\n" + outs)


def test_two_plain_torchruns_at_once_on_one_node(cluster, workdir):
    """Two jobs of a plain `torchrun train.py` side by side on one node:
    each takes its own rendezvous port from tenk (PET_MASTER_PORT), so they
    do not collide on torchrun's 29500."""
    env = cluster.env()
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"  # SIGABRT prints where each thread is
    script = os.path.join(HERE, "ddp_train.py")
    jobs = []
    for k in range(2):
        out = os.path.join(workdir, f"ddp{k}")
        os.mkdir(out)
        cmd = f"exec torchrun --redirects 1 --tee 1 {script} {out}"
        jobs.append(cluster.submit("-G", "2", "-o", f"tr{k}-%t.out", "--", "sh", "-c", cmd,
                                   env=env))
    for jid in jobs:
        cluster.run("wait", "--timeout", "240s", jid, check=False, timeout=300)
    done = [cluster.job(j) for j in jobs]
    for k, job in enumerate(done):
        if job["state"] != "COMPLETED":
            raise AssertionError(f"job {job['id']}: {job['state']} {job['reason']}\n" +
                                 hung_torch_report(workdir, done))
        res = [json.load(open(p)) for p in glob.glob(os.path.join(workdir, f"ddp{k}", "*.json"))]
        assert sorted(r["local_rank"] for r in res) == [0, 1] and all(r["same"] for r in res)
    a, b = (j["attempts"][0] for j in done)
    assert a["master_port"] != b["master_port"]
    assert a["start_ms"] < b["end_ms"] and b["start_ms"] < a["end_ms"], "they ran at once"


GANG = r"""
import os, signal, sys, time
rank, out = int(os.environ["RANK"]), sys.argv[1]
def term(*_):
    open(f"{out}/term-{rank}-{os.environ['TENK_ATTEMPT']}", "w").close(); sys.exit(143)
signal.signal(signal.SIGTERM, term)
open(f"{out}/pid-{rank}-{os.environ['TENK_ATTEMPT']}", "w").write(str(os.getpid()))
if os.environ["TENK_ATTEMPT"] == "2":
    sys.exit(0)
if rank == 3:
    while len([f for f in os.listdir(out) if f.startswith("pid-")]) < 4:
        time.sleep(0.05)
    sys.exit(3)
while True:
    time.sleep(0.1)
"""


@pytest.mark.parametrize("requeue", [0, 1])
def test_gang_fails_together(hosts3, workdir, kill_all, requeue):
    c = MultiHost(workdir, hosts3)
    kill_all += c.daemons
    out = os.path.join(workdir, "gang")
    os.mkdir(out)
    jid = c.submit("-N", "2", "--tasks-per-node", "2", "--grace", "3s", "--requeue", requeue,
                   "--", PY, "-c", GANG, out)
    p = c.run("wait", jid, check=False, timeout=120)
    job = c.job(jid)
    first = job["attempts"][0]
    assert "task 3 on" in first["reason"] and "exited with code 3" in first["reason"]
    pids = [int(open(f"{out}/pid-{r}-1").read()) for r in range(4)]
    wait_for(lambda: not any(alive(p_) for p_ in pids), 10, "every rank of the gang to end")
    for r in range(3):
        assert os.path.exists(f"{out}/term-{r}-1"), f"rank {r} got SIGTERM first"
    ends = [t["end_ms"] for t in first["tasks"]]
    wait_for(lambda: c.job(jid)["attempts"][0]["ended"], 10, "the attempt to end")
    ends = [t["end_ms"] for t in c.job(jid)["attempts"][0]["tasks"]]
    assert max(ends) - min(ends) < 3000 + 2000, "within the grace period"
    if requeue == 0:
        assert job["state"] == "FAILED" and job["exit_code"] == 3 and p.returncode == 3
        assert len(job["attempts"]) == 1
    else:
        assert job["state"] == "COMPLETED" and p.returncode == 0
        assert len(job["attempts"]) == 2 and job["failures"] == 1
    text = c.run("show", jid).stdout
    assert "Attempt 1:" in text and "task 3 EXITED with code 3" in text
    c.stop_all()


def test_server_sigkill_during_multinode_jobs(hosts3, workdir, kill_all):
    c = MultiHost(workdir, hosts3)
    kill_all += c.daemons
    log = os.path.join(workdir, "starts.log")
    script = f'echo "$TENK_JOB_ID $TENK_ATTEMPT $RANK" >> {log}; sleep 0.3'
    acked, stop = [], threading.Event()
    errors = []

    def submitter():
        while not stop.is_set():
            p = c.run("submit", "-N", "2", "--tasks-per-node", "2", "--gpus-per-task", "1", "--",
                      "sh", "-c", script, check=False)
            if p.returncode == 0:
                acked.append(int(p.stdout))
            elif "cannot reach" not in p.stderr and "Server returned nothing" not in p.stderr:
                errors.append((p.returncode, p.stderr))
            time.sleep(0.05)

    th = threading.Thread(target=submitter)
    th.start()
    rnd = random.Random(3)
    try:
        for _ in range(4):
            time.sleep(rnd.uniform(0.5, 1.2))
            c.server.kill9()
            time.sleep(rnd.uniform(0.1, 0.5))
            c.server.start()
            wait_for(lambda: c.run("nodes", check=False).returncode == 0, 20, "the server")
    finally:
        stop.set()
        th.join()
    assert not errors, errors
    assert len(acked) >= 5

    def settled():
        jobs = {j["id"]: j for j in c.json("queue", "--all", "--limit", "100000")["jobs"]}
        return jobs if all(jobs.get(i, {}).get("state") == "COMPLETED" for i in acked) else None
    jobs = wait_for(settled, 180, "every acknowledged job to complete", interval=0.5)
    starts = [tuple(map(int, line.split())) for line in open(log)]
    assert len(starts) == len(set(starts)), "a rank of an attempt started twice"
    for i in acked:
        for a in jobs[i]["attempts"]:
            ranks = sorted(r for (j, att, r) in starts if j == i and att == a["number"])
            if jobs[i]["state"] == "COMPLETED" and a["number"] == len(jobs[i]["attempts"]):
                assert ranks == [0, 1, 2, 3], (i, a["number"], ranks)
    c.stop_all()
