"""Jobs through the real server and agent: launch, environment, output, exit
codes, cancel, time limits, waiting for resources."""
import os
import subprocess
import time

from conftest import BIN, start_up, wait_for

ENV_DUMP = ("for v in RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE NODE_RANK NNODES MASTER_ADDR "
            "MASTER_PORT CUDA_VISIBLE_DEVICES TENK_JOB_ID TENK_ATTEMPT TENK_CHECKPOINT_DIR; "
            "do eval echo $v=\\$$v; done; echo PWD=$(pwd); echo MINE=$MINE; "
            "test -d \"$TENK_CHECKPOINT_DIR\" && echo CKPT_DIR=there")


def parse_env(text):
    env = {}
    for line in text.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            env[k] = v
    return env


def test_run_output_and_environment(cluster, workdir):
    sub = os.path.join(workdir, "here")
    os.mkdir(sub)
    env = cluster.env()
    env["MINE"] = "carried"
    jid = cluster.submit("-G", "2", "--", "sh", "-c", ENV_DUMP, cwd=sub, env=env)
    p = cluster.run("wait", jid)
    assert f"job {jid} COMPLETED (exit 0)" in p.stdout
    out = open(os.path.join(sub, f"tenk-{jid}.out")).read()
    e = parse_env(out)
    assert e["RANK"] == "0" and e["WORLD_SIZE"] == "1" and e["LOCAL_RANK"] == "0"
    assert e["NODE_RANK"] == "0" and e["NNODES"] == "1" and e["LOCAL_WORLD_SIZE"] == "1"
    first = int(os.environ.get("TENK_MASTER_PORTS") or 29500)  # a test worker's range
    assert e["MASTER_ADDR"] == "127.0.0.1" and first <= int(e["MASTER_PORT"]) < first + 512
    assert e["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert e["TENK_JOB_ID"] == str(jid) and e["TENK_ATTEMPT"] == "1"
    assert e["CKPT_DIR"] == "there", "the job has its checkpoint folder"
    # an empty one goes with the job, once its node has forgotten the attempt
    wait_for(lambda: not os.path.exists(e["TENK_CHECKPOINT_DIR"]), 20,
             "the empty checkpoint folder gone")
    assert e["PWD"] == sub, "the job runs in the submitter's folder"
    assert e["MINE"] == "carried", "the submitter's environment is passed on"
    j = cluster.job(jid)
    assert j["state"] == "COMPLETED" and j["exit_code"] == 0
    assert j["attempts"][0]["tasks"][0]["state"] == "EXITED"
    assert j["attempts"][0]["nodes"][0]["devices"] == [0, 1]


def test_tasks_per_node_ranks_and_devices(cluster, workdir):
    jid = cluster.submit("--tasks-per-node", "4", "--gpus-per-task", "2", "-o",
                         "out-%j-%t.txt", "--", "sh", "-c", ENV_DUMP)
    cluster.run("wait", jid)
    ranks, cvds = [], []
    for t in range(4):
        e = parse_env(open(os.path.join(workdir, f"out-{jid}-{t}.txt")).read())
        ranks.append(int(e["RANK"]))
        cvds.append(e["CUDA_VISIBLE_DEVICES"])
        assert e["WORLD_SIZE"] == "4" and e["LOCAL_WORLD_SIZE"] == "4"
        assert e["LOCAL_RANK"] == str(t)
    assert sorted(ranks) == [0, 1, 2, 3]
    assert len(set(cvds)) == 4, "every task has its own devices"
    assert sorted(",".join(cvds).split(",")) == [str(d) for d in range(8)]


def test_exit_codes_and_signals(cluster):
    fail = cluster.submit("--", "sh", "-c", "exit 3")
    p = cluster.run("wait", fail, check=False)
    assert p.returncode == 3
    j = cluster.job(fail)
    assert j["state"] == "FAILED" and j["exit_code"] == 3
    assert "exited with code 3" in j["reason"]

    killed = cluster.submit("--", "sh", "-c", "kill -9 $$")
    p = cluster.run("wait", killed, check=False)
    j = cluster.job(killed)
    assert j["state"] == "FAILED" and j["exit_code"] == 137
    assert j["attempts"][0]["tasks"][0]["signal"] == 9
    assert p.returncode == 137

    missing = cluster.submit("--", "no-such-command-xyz")
    cluster.run("wait", missing, check=False)
    j = cluster.job(missing)
    assert j["state"] == "FAILED" and j["exit_code"] == 127
    assert "command not found: no-such-command-xyz" in j["reason"]


def test_requeue_after_failure(cluster, workdir):
    # fails on the first attempt, succeeds on the second
    script = 'test "$TENK_ATTEMPT" = 2 || exit 5'
    jid = cluster.submit("--requeue", "1", "--", "sh", "-c", script)
    p = cluster.run("wait", jid, check=False)
    j = cluster.job(jid)
    assert p.returncode == 0, j
    assert j["state"] == "COMPLETED"
    assert len(j["attempts"]) == 2 and j["failures"] == 1
    assert "exited with code 5" in j["attempts"][0]["reason"]


def test_cancel_running_stops_process_group(cluster, workdir):
    pidfile = os.path.join(workdir, "pids")
    # the job and a child of it both record their pid, then sleep
    jid = cluster.submit("--grace", "5s", "--", "sh", "-c",
                         f"sleep 300 & echo $! >> {pidfile}; echo $$ >> {pidfile}; wait")
    wait_for(lambda: os.path.exists(pidfile) and len(open(pidfile).read().split()) == 2,
             what="the job to start")
    pids = [int(x) for x in open(pidfile).read().split()]
    cluster.wait_state(jid, "RUNNING")
    p = cluster.run("cancel", jid)
    assert f"cancelled job {jid}" in p.stdout
    p = cluster.run("wait", jid, check=False)
    assert p.returncode == 130
    assert cluster.job(jid)["state"] == "CANCELLED"
    for pid in pids:
        wait_for(lambda: not os.path.exists(f"/proc/{pid}") or
                 open(f"/proc/{pid}/stat").read().split()[2] == "Z", 15,
                 f"process {pid} to end")
    # the devices come back once the processes are gone
    wait_for(lambda: cluster.json("nodes")["nodes"][0]["jobs"] == [], 15, "resources freed")
    p = cluster.run("cancel", jid, check=False)
    assert p.returncode == 1 and "already ended" in p.stderr


def test_grace_period_then_sigkill(cluster, workdir):
    marker = os.path.join(workdir, "term")
    ready = os.path.join(workdir, "ready")
    script = f"trap 'echo TERM >> {marker}' TERM; touch {ready}; while :; do sleep 0.1; done"
    jid = cluster.submit("--grace", "1s", "--", "sh", "-c", script)
    wait_for(lambda: os.path.exists(ready), what="the job to start")
    cluster.wait_state(jid, "RUNNING")
    t0 = time.monotonic()
    cluster.run("cancel", jid)
    wait_for(lambda: cluster.json("nodes")["nodes"][0]["jobs"] == [], 20,
             "the job's processes to be gone")
    waited = time.monotonic() - t0
    assert open(marker).read().strip().startswith("TERM"), "SIGTERM came first"
    assert waited >= 0.9, "SIGKILL came only after the grace period"
    j = cluster.job(jid)
    assert j["attempts"][0]["tasks"][0]["signal"] == 9


def test_time_limit(cluster):
    jid = cluster.submit("--time", "1s", "--grace", "1s", "--", "sleep", "60")
    p = cluster.run("wait", jid, check=False)
    assert p.returncode == 124
    j = cluster.job(jid)
    assert j["state"] == "TIMEOUT"
    assert "time limit of 1s reached" in j["reason"]
    a = j["attempts"][0]
    assert a["end_ms"] - a["start_ms"] < 30000


def test_waits_for_resources_and_says_why(cluster):
    # a job no node of the cluster could ever hold is refused, saying why
    n = len(cluster.json("queue", "--all")["jobs"])
    for cmd in (["submit"], ["run"]):
        p = cluster.run(*cmd, "-N", "2", "--tasks-per-node", "8", "--gpus-per-task", "1",
                        "--gpu-type", "H100,H200", "--", "true", check=False)
        assert p.returncode == 1 and "this job can never start: needs 2 nodes with 8 " \
            "accelerators (H100|H200) each" in p.stderr and \
            "no set of this cluster's 1 node could ever hold that" in p.stderr, p.stderr
    status, ans = cluster.api("POST", "/v1/jobs", {"command": ["true"], "cwd": cluster.workdir,
                                                   "gpus_per_task": 9})
    assert status == 422 and "can never start" in ans["error"], ans
    assert len(cluster.json("queue", "--all")["jobs"]) == n, "nothing was stored"
    # unless asked to take it: it waits, saying it can never start
    big = cluster.submit("--hold-if-impossible", "-G", "16", "--", "true")
    j = cluster.job(big)
    assert j["state"] == "PENDING"
    wait_for(lambda: "can never start" in cluster.job(big)["reason"], what="a reason")
    assert "needs 1 node with 16 accelerators" in cluster.job(big)["reason"]
    text = cluster.run("show", big).stdout
    assert "Reason:   can never start" in text

    # a job that fits runs although the impossible one is ahead of it
    hog = cluster.submit("-G", "8", "--", "sleep", "300")
    cluster.wait_state(hog, "RUNNING")
    waiter = cluster.submit("-G", "4", "--", "true")
    wait_for(lambda: "first in its class" in cluster.job(waiter)["reason"], what="a reason")
    assert "start time unknown" in cluster.job(waiter)["reason"], "the hog has no time limit"
    behind = cluster.submit("-G", "1", "--", "true")
    wait_for(lambda: "waiting for resources: needs 1 node with 1 accelerator free; 0 nodes"
             in cluster.job(behind)["reason"], what="the reason of the one behind")
    q = cluster.run("queue").stdout
    assert "can never start" in q and "PENDING" in q
    cluster.run("cancel", hog)
    cluster.run("wait", waiter, behind)
    assert cluster.job(big)["state"] == "PENDING"
    cluster.run("cancel", big)


def test_submissions_that_cannot_start_wait_for_a_deferred_pass(cluster):
    """A submission that nothing free could hold is judged without a pass
    (the server counts it) and gets its reason from the deferred pass; one
    that fits starts at once; freed capacity starts the waiting in order."""
    def health():
        status, body = cluster.api("GET", "/v1/health")
        assert status == 200, body
        return body["scheduler"]

    hog = cluster.submit("-G", "8", "--", "sleep", "300")
    cluster.wait_state(hog, "RUNNING")
    before = health()["deferred_submissions"]
    waiting = [cluster.submit("-G", "2", "--", "true") for _ in range(6)]
    after = health()
    assert after["deferred_submissions"] >= before + 6, (before, after)
    for jid in waiting:
        wait_for(lambda: "waiting for resources" in cluster.job(jid)["reason"]
                 or "first in its class" in cluster.job(jid)["reason"], timeout=10,
                 what="the deferred pass's reason for job %s" % jid)
    # preempting classes and fitting jobs are never deferred
    cluster.run("cancel", hog)
    cluster.run("wait", *waiting, timeout=60)
    assert all(cluster.job(j)["state"] == "COMPLETED" for j in waiting)
    quiet = health()["deferred_submissions"]
    fits = cluster.submit("-G", "1", "--", "true")
    cluster.wait_state(fits, "COMPLETED")
    assert health()["deferred_submissions"] == quiet


def test_drain_keeps_new_work_off(cluster):
    running = cluster.submit("-G", "1", "--", "sleep", "300")
    cluster.wait_state(running, "RUNNING")
    p = cluster.run("drain", "node1", "--reason", "replace fan")
    assert "DRAINING" in p.stdout
    n = cluster.json("nodes")["nodes"][0]
    assert n["state"] == "DRAINING" and n["reason"] == "replace fan"
    new = cluster.submit("-G", "1", "--", "true")
    # it waits for the node, and says so: it could start once the node is back
    wait_for(lambda: "waiting for nodes" in cluster.job(new)["reason"], what="a reason")
    assert cluster.job(new)["reason"] == ("waiting for nodes: needs 1 node with 1 accelerator; "
                                          "only nodes that are down or drained could "
                                          "hold that"), cluster.job(new)["reason"]
    too_big = cluster.submit("--hold-if-impossible", "-G", "16", "--", "true")
    wait_for(lambda: "can never start" in cluster.job(too_big)["reason"], what="a reason")
    cluster.run("cancel", too_big)
    assert cluster.job(new)["state"] == "PENDING"
    assert cluster.job(running)["state"] == "RUNNING", "drain lets running work finish"
    cluster.run("cancel", running)
    wait_for(lambda: cluster.json("nodes")["nodes"][0]["state"] == "DRAINED", what="DRAINED")
    assert "replace fan" in cluster.run("nodes").stdout
    cluster.run("resume", "node1")
    cluster.run("wait", new)
    assert cluster.json("nodes")["nodes"][0]["state"] == "UP"


def test_json_objects(cluster):
    jid = cluster.submit("--name", "hello", "--", "true")
    cluster.run("wait", jid)
    j = cluster.job(jid)
    for key in ("id", "name", "state", "request", "attempts", "exit_code"):
        assert key in j
    assert j["name"] == "hello" and j["request"]["command"] == ["true"]
    q = cluster.json("queue", "--all")
    assert [x["id"] for x in q["jobs"]] == [jid]
    n = cluster.json("nodes")["nodes"][0]
    for key in ("name", "state", "accelerators", "jobs"):
        assert key in n
    assert len(n["accelerators"]) == 8 and n["accelerators"][0]["model"] == "H100"
    w = cluster.json("wait", jid)
    assert w[0]["id"] == jid


def test_many_jobs_all_complete(cluster):
    ids = [cluster.submit("-G", "1", "--", "true") for _ in range(40)]
    p = cluster.run("wait", *ids)
    assert p.stdout.count("COMPLETED") == 40
    q = cluster.json("queue", "--all")
    assert q["total"] == 40


def test_master_ports_are_the_operators(workdir):
    """--master-ports moves the range jobs' MASTER_PORT comes from (two
    clusters on one machine, or a port the site uses for something else);
    a bad one is refused by name, from the flag or the environment."""
    t, d = start_up(workdir, "--master-ports", "31000")
    try:
        a = t.submit("--", "sh", "-c", "echo $MASTER_PORT; sleep 30", cwd=workdir)
        wait_for(lambda: t.job(a)["state"] == "RUNNING", 20, "the first job running")
        b = t.submit("--", "sh", "-c", "echo $MASTER_PORT", cwd=workdir)
        t.run("wait", b, timeout=60)
        assert t.job(a)["attempts"][0]["master_port"] == 31000
        assert t.job(b)["attempts"][0]["master_port"] == 31001, "the first is taken"
        assert open(os.path.join(workdir, f"tenk-{b}.out")).read().strip() == "31001"
        t.run("cancel", a)
    finally:
        d.stop()
    for extra, env, what in (
            (["--master-ports", "80"], {}, "--master-ports: expected the first port, "
             "from 1024 to 65024, got \"80\""),
            ([], {"TENK_MASTER_PORTS": "65500"}, "--master-ports (TENK_MASTER_PORTS): "
             "expected the first port, from 1024 to 65024, got \"65500\"")):
        p = subprocess.run([BIN, "server", "--data", os.path.join(workdir, "x"), "--listen",
                            "127.0.0.1:0", *extra], env=dict(os.environ, **env),
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and what in p.stderr, (p.returncode, p.stderr)


def test_show_says_queue_class_command_and_output(cluster, workdir):
    """tenk show names the job's queue and class, quotes the command as a
    shell reads it back, and resolves its output pattern (task 0)."""
    jid = cluster.submit("-J", "named", "-o", "o-%j-%x.%t.txt", "--", "sh", "-c",
                         "echo 'it''s' done")
    cluster.run("wait", jid)
    text = cluster.run("show", jid).stdout
    job = cluster.job(jid)
    assert f"  Queue:    {job['queue']}, class {job['class']}\n" in text, text
    assert "  Command:  sh -c 'echo '\\''it'\\'''\\''s'\\'' done'\n" in text, text
    out = os.path.join(workdir, f"o-{jid}-named.0.txt")
    assert f"  Output:   {out} (task 0; o-%j-%x.%t.txt)\n" in text, text
    assert open(out).read() == "its done\n"
