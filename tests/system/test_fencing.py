"""One job never runs twice at once, whatever happens to a node's agent:
faults across network-namespace hosts with a checker the test owns, and
agent restarts that must keep jobs running rather than rerun them.

The checker: every task holds a shared flock on a file named for its
attempt (every host sees the same folder); a task of attempt N first tries
an exclusive lock on attempt N-1's file, which fails while any task of
that attempt is alive (siblings take turns at it, so that one's probe is
never taken for an old task). Each task logs its start and end with CLOCK_MONOTONIC,
which every namespace host of this machine shares."""
import glob
import os
import random
import shutil
import signal
import socket
import sys
import threading
import time

import pytest

from conftest import Daemon, MultiHost, Tenk, alive, root_jobs_config, shim_pids, wait_for

PY = sys.executable
NODE_TIMEOUT_S = 4

CHECKER = r"""
import fcntl, os, signal, sys, time
out = sys.argv[1]
attempt, rank = int(os.environ["TENK_ATTEMPT"]), os.environ["RANK"]
log = open(f"{out}/log", "a")
def note(what):
    log.write(f"{time.monotonic():.3f} {attempt} {rank} {what} "
              f"{os.environ['TENK_NODE_NAME']} {os.getpid()}\n")
    log.flush()
mine = open(f"{out}/attempt-{attempt}", "a")
fcntl.flock(mine, fcntl.LOCK_SH)
if attempt > 1:
    # siblings take turns, or one's probe would block the other's
    turn = open(f"{out}/turn-{attempt}", "a")
    fcntl.flock(turn, fcntl.LOCK_EX)
    prev = open(f"{out}/attempt-{attempt - 1}", "a")
    try:
        fcntl.flock(prev, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(prev, fcntl.LOCK_UN)
    except BlockingIOError:
        note("OVERLAP")
    fcntl.flock(turn, fcntl.LOCK_UN)
note("start")
def term(*_):
    note("end")
    os._exit(143)
signal.signal(signal.SIGTERM, term)
if attempt > 1:
    note("end")
    sys.exit(0)
while True:
    time.sleep(0.05)
"""


def read_log(out):
    rows = []
    with open(f"{out}/log") as f:
        for line in f:
            t, attempt, rank, what, node, pid = line.split()
            rows.append((float(t), int(attempt), int(rank), what, node, int(pid)))
    return rows


@pytest.mark.parametrize("how", ["sigstop", "sigkill", "link-down"])
def test_a_lost_node_never_runs_a_job_twice(hosts4, workdir, kill_all, how):
    """Stop the agent past the node timeout, kill it and keep it down, or
    cut its link: its shim fences the task before the server runs the next
    attempt elsewhere, and that attempt starts within the node timeout and
    a margin."""
    c = MultiHost(workdir, hosts4, node_timeout=f"{NODE_TIMEOUT_S}s")
    kill_all += c.daemons
    out = os.path.join(workdir, "check")
    os.mkdir(out)
    # a long grace, which a fenced task does not get
    jid = c.submit("-N", "2", "--gpus-per-task", "4", "--grace", "60s", "--requeue", "0", "--",
                   PY, "-c", CHECKER, out)
    c.wait_state(jid, "RUNNING")
    wait_for(lambda: len([r for r in read_log(out) if r[3] == "start"]) == 2
             if os.path.exists(f"{out}/log") else False, 20, "both ranks to start")
    first = {r[4]: r[5] for r in read_log(out) if r[3] == "start"}
    victim_node = sorted(first)[0]
    victim = int(victim_node.replace("host", ""))
    agent = c.agents[victim]
    fault = time.monotonic()
    if how == "sigstop":
        agent.proc.send_signal(signal.SIGSTOP)
    elif how == "sigkill":
        agent.kill9()
    else:
        c.hosts.link(victim, False)
    try:
        c.run("wait", jid, timeout=120)
        rows = read_log(out)
        job = c.job(jid)
    finally:
        if how == "sigstop":
            agent.proc.send_signal(signal.SIGCONT)
    assert not [r for r in rows if r[3] == "OVERLAP"], rows
    assert job["state"] == "COMPLETED" and len(job["attempts"]) == 2, job
    assert job["failures"] == 0, "a lost node does not count against --requeue"
    assert f"node {victim_node} lost" in job["attempts"][0]["reason"]
    second = {n["name"] for n in job["attempts"][1]["nodes"]}
    assert victim_node not in second, "the second attempt avoids the lost node"
    # every task of attempt 1 ended before any of attempt 2 began
    ends1 = [r[0] for r in rows if r[1] == 1 and r[3] == "end"]
    starts2 = [r[0] for r in rows if r[1] == 2 and r[3] == "start"]
    assert len(ends1) == 2 and len(starts2) == 2, rows
    assert max(ends1) < min(starts2), rows
    fenced = [r[0] for r in rows if r[1] == 1 and r[3] == "end" and r[4] == victim_node][0]
    # fenced within the lease and its grace (3/4 of the timeout) of the fault
    assert fenced - fault < NODE_TIMEOUT_S * 0.75 + 1.0, (fenced - fault, rows)
    # and the job went on within the node timeout and a margin
    margin = 3.0
    assert min(starts2) - fault < NODE_TIMEOUT_S + margin, (min(starts2) - fault, rows)
    print(f"{how}: fenced {fenced - fault:.2f}s after the fault, attempt 2 started "
          f"{min(starts2) - fault:.2f}s after it (node timeout {NODE_TIMEOUT_S}s)")
    if how == "sigkill":
        # nothing of the dead agent is left once the node timeout is over
        wait_for(lambda: not shim_pids(os.path.join(workdir, f"agent{victim}")),
                 NODE_TIMEOUT_S + 10, "the dead agent's shim to exit")
        c.start_agent(victim)
        kill_all.append(c.agents[victim])
    elif how == "link-down":
        c.hosts.link(victim, True)
    wait_for(lambda: {n["name"]: n for n in c.json("nodes")["nodes"]}[victim_node]["state"]
             == "UP", 30, "the node to come back")
    c.stop_all()


WAITER = r"""
import os, sys, time
out, rank, attempt = sys.argv[1], os.environ["RANK"], os.environ["TENK_ATTEMPT"]
with open(f"{out}/run-{rank}-{attempt}", "a") as f:
    f.write(f"{os.getpid()}\n")
while not os.path.exists(f"{out}/go"):
    time.sleep(0.05)
"""


def pids_written(out):
    """The ranks' files whose pid line is written out, by path."""
    files = {f: open(f).read() for f in glob.glob(f"{out}/run-*")}
    return {f: text for f, text in files.items() if text.endswith("\n")}


def test_agent_restarts_rerun_nothing(hosts3, workdir, kill_all):
    """A two-node job runs through twenty agent crashes at random instants,
    with short jobs starting and ending all the while: the long job keeps
    its attempt and its processes, and no job runs twice."""
    c = MultiHost(workdir, hosts3, node_timeout="20s")
    kill_all += c.daemons
    out = os.path.join(workdir, "runs")
    os.mkdir(out)
    long = c.submit("-N", "2", "--gpus-per-task", "1", "--", PY, "-c", WAITER, out)
    c.wait_state(long, "RUNNING")
    # a rank's file appears when it opens it and holds its pid once written
    wait_for(lambda: len(pids_written(out)) == 2, 20, "both ranks to write their pids")
    pids = pids_written(out)
    starts = os.path.join(workdir, "starts")
    short = f'echo "$TENK_JOB_ID $TENK_ATTEMPT" >> {starts}; sleep 0.2'
    submitted, stop, errors = [], threading.Event(), []

    def submitter():
        while not stop.is_set():
            p = c.run("submit", "-G", "1", "--", "sh", "-c", short, check=False)
            if p.returncode == 0:
                submitted.append(int(p.stdout))
            else:
                errors.append(p.stderr)
            time.sleep(0.1)

    th = threading.Thread(target=submitter)
    th.start()
    rng = random.Random(20261201)

    def registered(h):
        return c.agents[h].output().count("registered with ")

    # a crash may come at any instant of an agent's life, its start and
    # recovery included, but no host crashes twice before an agent of it
    # has registered in between: an agent that never reaches the server for
    # a lease (half the node timeout, 10 s here) lets the shims stop their
    # tasks, as they must, and a slow machine (sanitizers, a second test
    # worker) would make that the test's doing, not tenk's. The lease runs
    # from when the last registration or heartbeat was sent, so a lease
    # must hold an agent's registration, its kill, and the next agent's
    # start and registration: with the sanitizers and a second worker that
    # took over 5 s (a node timeout of 10 s, its lease 5 s, failed so)
    seen = {h: 0 for h in c.agents}
    try:
        # a submission lands between every two crashes and after the last,
        # however slow the machine makes the CLI; a submitter that stalls
        # fails here
        for k in range(21):
            wait_for(lambda: len(submitted) > k or errors, 60, "a submission between crashes")
            if k == 20:
                break
            time.sleep(rng.uniform(0.05, 0.8))
            h = rng.choice(sorted(c.agents))
            wait_for(lambda: registered(h) > seen[h], 60, f"an agent of host{h} to register")
            seen[h] = registered(h)
            c.agents[h].kill9()
            kill_all.append(c.start_agent(h))
    finally:
        stop.set()
        th.join()
    assert not errors, errors[:3]
    assert len(submitted) > 20, submitted
    open(f"{out}/go", "w").close()
    for j in submitted + [long]:
        c.run("wait", j, timeout=120)
    jobs = {j: c.job(j) for j in submitted + [long]}
    assert all(j["state"] == "COMPLETED" for j in jobs.values()), \
        [(i, j["state"], j["reason"]) for i, j in jobs.items() if j["state"] != "COMPLETED"]
    # the long job: one attempt, the same two processes all along
    assert len(jobs[long]["attempts"]) == 1, jobs[long]
    assert {f: open(f).read() for f in glob.glob(f"{out}/run-*")} == pids
    # no short job ran twice
    ran = [int(line.split()[0]) for line in open(starts)]
    twice = sorted({i for i in ran if ran.count(i) > 1})
    assert not twice, f"jobs run more than once: {twice}"
    assert sorted(ran) == sorted(submitted)
    requeued = [i for i in submitted if len(jobs[i]["attempts"]) > 1]
    print(f"{len(submitted)} jobs through 20 agent crashes; {len(requeued)} needed a second "
          f"attempt without having run")
    c.stop_all()


def test_a_server_restart_keeps_the_fence(workdir, procs):
    """An agent that starts again without the old one's shims (another work
    folder) loses their attempt, and the job waits until the old lease has
    surely run out; a server restarted meanwhile waits as long."""
    data = os.path.join(workdir, "data")
    root_jobs_config(data)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def server():
        if os.path.exists(os.path.join(data, "server.url")):
            os.remove(os.path.join(data, "server.url"))
        d = Daemon(["server", "--data", data, "--listen", f"127.0.0.1:{port}",
                    "--node-timeout", "10s"], workdir, "server")
        procs.append(d)
        wait_for(lambda: os.path.exists(os.path.join(data, "server.url")), 20, "the server")
        return d

    def agent(work):
        d = Daemon(["agent", "--server", f"https://127.0.0.1:{port}", "--token-file",
                    os.path.join(data, "agent.token"), "--name", "n1", "--fake-gpus", "8xH100",
                    "--stop-jobs", "--work-dir", os.path.join(workdir, work)], workdir, work)
        procs.append(d)
        return d

    s1 = server()
    t = Tenk(workdir, data)
    a1 = agent("w1")
    t.wait_nodes_up(1)
    out = os.path.join(workdir, "check")
    os.mkdir(out)
    jid = t.submit("--requeue", "0", "--", PY, "-c", CHECKER, out)
    wait_for(lambda: os.path.exists(f"{out}/log") and read_log(out), 20, "the task to start")
    a1.kill9()
    # the node's credential, but none of w1's shims
    os.mkdir(os.path.join(workdir, "w2"))
    shutil.copy(os.path.join(workdir, "w1", "node.credential"), os.path.join(workdir, "w2"))
    agent("w2")  # finds nothing of w1
    t.wait_state(jid, "PENDING")
    # the reason comes with the next scheduling pass
    wait_for(lambda: "has run out (its agent restarted without them)" in t.job(jid)["reason"],
             20, "the lease's reason")
    s1.kill9()
    server()
    t.run("wait", jid, timeout=60)
    rows = read_log(out)
    assert not [r for r in rows if r[3] == "OVERLAP"], rows
    ends1 = [r[0] for r in rows if r[1] == 1 and r[3] == "end"]
    starts2 = [r[0] for r in rows if r[1] == 2 and r[3] == "start"]
    assert ends1 and starts2 and max(ends1) < min(starts2), rows
    assert t.job(jid)["state"] == "COMPLETED"


SHIM_VICTIM = r"""
import fcntl, os, sys, time
out, attempt = sys.argv[1], int(os.environ["TENK_ATTEMPT"])
def note(what):
    with open(f"{out}/log", "a") as log:
        log.write(f"{time.monotonic():.3f} {attempt} {what} {os.getpid()}\n")
if attempt == 1:
    # a grandchild in a session of its own, out of the task's process group
    # (as a daemonising library leaves one): only the cgroup holds it
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            lock = open(f"{out}/attempt-1", "a")
            fcntl.flock(lock, fcntl.LOCK_SH)
            note("grandchild")
            while True:
                time.sleep(0.05)
        os._exit(0)
    lock = open(f"{out}/attempt-1", "a")
    fcntl.flock(lock, fcntl.LOCK_SH)
    note("start")
    while True:
        time.sleep(0.05)
prev = open(f"{out}/attempt-1", "a")
try:
    fcntl.flock(prev, fcntl.LOCK_EX | fcntl.LOCK_NB)
    note("alone")
except BlockingIOError:
    note("OVERLAP")
"""


def test_a_dead_shim_takes_its_tasks_with_it(cluster, workdir):
    """SIGKILL of a running attempt's shim, its agent alive (the OOM killer,
    a bug, an operator): every process of the attempt, a grandchild that
    left the task's process group among them, is gone before the agent
    tells the attempt over, so the next attempt (on the same node and
    devices) never runs beside it."""
    t = cluster
    out = os.path.join(workdir, "victim")
    os.mkdir(out)
    script = os.path.join(workdir, "victim.py")
    with open(script, "w") as f:
        f.write(SHIM_VICTIM)

    def lines():
        try:
            with open(os.path.join(out, "log")) as f:
                return [line.split() for line in f]
        except FileNotFoundError:
            return []

    jid = t.submit("-G", "8", "--", PY, script, out)
    wait_for(lambda: {w[2] for w in lines()} >= {"start", "grandchild"}, 30,
             "attempt 1's task and its grandchild")
    pids = [int(w[3]) for w in lines() if w[1] == "1"]
    shims = shim_pids(workdir)
    assert len(shims) == 1, shims
    os.kill(shims[0], signal.SIGKILL)
    wait_for(lambda: t.job(jid)["state"] == "COMPLETED", 60, "attempt 2 to end",
             show=lambda: (t.job(jid), lines()))
    seen = [w[2] for w in lines() if w[1] == "2"]
    assert seen == ["alone"], lines()  # attempt 1 held its lock no more
    for pid in pids:
        assert not alive(pid), (pid, lines())
    first, second = t.job(jid)["attempts"]
    assert first["end"] == "node_lost" and "its shim ended" in first["reason"], first
    assert second["end"] == "completed" and second["nodes"][0]["name"] == "node1"
    assert t.json("nodes")["nodes"][0]["state"] == "UP"
