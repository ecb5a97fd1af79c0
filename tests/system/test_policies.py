"""The scheduling policies through the real server and agents: preemption of
a gang, quotas with borrowing and reclaim, backfill, and the explanations."""
import os
import subprocess

from conftest import BIN, Daemon, Tenk, root_jobs_config, start_up, wait_for

TRAPPED = ('trap "echo TERM >> {out}/term-$TENK_JOB_ID-$TENK_ATTEMPT; exit 143" TERM; '
           'while :; do sleep 0.1; done')


def cluster_of(workdir, procs, agents=2, fake="4xH100", labels=None, domains=None,
               agent_args=(), **config):
    data = os.path.join(workdir, "data")
    root_jobs_config(data, **config)
    server = Daemon(["server", "--data", data, "--listen", "127.0.0.1:0"], workdir, "server")
    procs.append(server)
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")), 20, "the server")
    t = Tenk(workdir, data)
    for i in range(agents):
        d = Daemon(["agent", "--server", t.url, "--token-file", os.path.join(data, "agent.token"),
                    "--name", f"n{i}", "--fake-gpus", fake if isinstance(fake, str) else fake[i],
                    "--work-dir", os.path.join(workdir, f"agent{i}")] +
                   (["--labels", labels[i]] if labels else []) +
                   (["--domain", domains[i]] if domains else []) + list(agent_args),
                   workdir, f"agent{i}")
        procs.append(d)
    t.wait_nodes_up(agents)
    return t


def test_prod_gang_preempts_batch_on_two_nodes(workdir, procs):
    t = cluster_of(workdir, procs)
    out = os.path.join(workdir, "marks")
    os.mkdir(out)
    b1 = t.submit("--class", "batch", "-G", "4", "--grace", "2s", "--", "sh", "-c",
                  TRAPPED.format(out=out))
    b2 = t.submit("--class", "batch", "-G", "4", "--grace", "2s", "--", "sh", "-c",
                  TRAPPED.format(out=out))
    t.wait_state(b1, "RUNNING")
    t.wait_state(b2, "RUNNING")
    nodes = {t.job(b)["attempts"][0]["nodes"][0]["name"] for b in (b1, b2)}
    assert nodes == {"n0", "n1"}
    prod = t.submit("--class", "prod", "-N", "2", "--gpus-per-task", "4", "--", "true")
    p = t.run("wait", prod, timeout=60)
    assert p.returncode == 0
    job = t.job(prod)
    assert job["state"] == "COMPLETED" and job["class"] == "prod"
    assert {n["name"] for n in job["attempts"][0]["nodes"]} == {"n0", "n1"}
    for b in (b1, b2):
        j = t.job(b)
        assert f"preempted by job {prod} (class prod)" in j["attempts"][0]["reason"]
        assert j["preemptions"] == 1 and j["failures"] == 0
        assert os.path.exists(f"{out}/term-{b}-1"), "the victim got SIGTERM to checkpoint"
    # the victims come back once the prod gang is done
    for b in (b1, b2):
        wait_for(lambda: len(t.job(b)["attempts"]) == 2, 30, f"job {b} to restart")
    t.run("cancel", b1, b2)


def test_queue_borrows_and_gives_back(workdir):
    t, d = start_up(workdir, fake="8xH100")
    t.run("queues", "set", "lender", "--gpus", "4", "--borrow-limit", "0")
    t.run("queues", "set", "borrower", "--gpus", "4", "--borrow-limit", "4", "--weight", "2")
    q = {x["name"]: x for x in t.json("queues")["queues"]}
    assert q["lender"]["gpus"] == 4 and q["borrower"]["borrow_limit"] == 4
    own = t.submit("--queue", "borrower", "-G", "4", "--grace", "1s", "--", "sleep", "300")
    t.wait_state(own, "RUNNING")
    lent = t.submit("--queue", "borrower", "-G", "4", "--grace", "1s", "--", "sleep", "300")
    t.wait_state(lent, "RUNNING")  # the lender's idle share, borrowed
    q = {x["name"]: x for x in t.json("queues")["queues"]}
    assert q["borrower"]["in_use"] == 8 and q["borrower"]["borrowed"] == 4
    over = t.submit("--queue", "borrower", "-G", "1", "--", "true")
    wait_for(lambda: 'queue "borrower" is at its limit' in t.job(over)["reason"], 20,
             "the borrow limit to show")
    table = t.run("queues").stdout
    assert "borrower" in table and "lender" in table
    # the lender's job arrives: it reclaims what was lent
    mine = t.submit("--queue", "lender", "-G", "4", "--", "sleep", "1")
    t.run("wait", mine, timeout=60)
    assert t.job(mine)["state"] == "COMPLETED"
    j = t.job(lent)
    assert f"preempted by job {mine}" in j["attempts"][0]["reason"]
    assert t.job(own)["state"] == "RUNNING", "work within the quota is not touched"
    t.run("cancel", own, lent)
    # `over` may have borrowed the devices the lender's finished job gave back
    t.run("cancel", over, check=False)
    # bad queue and class names are refused with the names that exist
    p = t.run("submit", "--queue", "nope", "--", "true", check=False)
    assert p.returncode == 2 and 'no queue "nope"' in p.stderr
    p = t.run("submit", "--class", "urgent", "--", "true", check=False)
    assert p.returncode == 2 and "classes: prod, service, normal, batch" in p.stderr
    p = t.run("queues", "set", "x", "--gpus", "many", check=False)
    assert p.returncode == 2
    d.stop()


def test_backfill_does_not_delay_the_reserved_job(workdir):
    t, d = start_up(workdir, fake="8xH100")
    running = t.submit("-G", "4", "--time", "2m", "--", "sleep", "300")
    t.wait_state(running, "RUNNING")
    big = t.submit("-G", "8", "--", "true")
    wait_for(lambda: "reserved to start in about" in t.job(big)["reason"], 20, "a reservation")
    short = t.submit("-G", "2", "--time", "30s", "--", "sleep", "1")
    t.run("wait", short, timeout=60)
    assert t.job(short)["state"] == "COMPLETED", "a short job starts ahead of the big one"
    long_ = t.submit("-G", "2", "--", "sleep", "300")
    wait_for(lambda: f"would delay job {big}" in t.job(long_)["reason"], 20,
             "the long job to be held back")
    assert t.job(long_)["state"] == "PENDING"
    # the scheduler's figures: two jobs wait, with two different requests
    sched = t.api("GET", "/v1/health", token=None)[1]["scheduler"]
    assert sched["pending"] == 2 and sched["shapes"] == 2, sched
    assert sched["passes"] >= 3 and sched["last_pass_ms"] > 0, sched
    parts = sched["last_pass_parts_ms"]
    assert set(parts) == {"snapshot", "decide", "apply"} and parts["decide"] > 0, parts
    assert sum(parts.values()) <= sched["last_pass_ms"] + 0.01, sched
    text = t.run("show", long_).stdout
    assert "a time limit (--time) under that would let it start now" in text
    # when the running job ends, the big one starts first
    t.run("cancel", running)
    t.run("wait", big, timeout=60)
    big_start = t.job(big)["attempts"][0]["start_ms"]
    wait_for(lambda: t.job(long_)["state"] == "RUNNING", 30, "the long job to start after")
    assert t.job(long_)["attempts"][0]["start_ms"] >= big_start
    t.run("cancel", long_)
    # nothing waits: the table of requests is empty again
    wait_for(lambda: t.api("GET", "/v1/health", token=None)[1]["scheduler"]["shapes"] == 0, 20,
             "the scheduler to forget the requests")
    assert t.api("GET", "/v1/health", token=None)[1]["scheduler"]["pending"] == 0
    classes = t.json("classes")["classes"]
    assert [c["name"] for c in classes] == ["prod", "service", "normal", "batch"]
    d.stop()


def test_capability_and_topology_requests(workdir, procs):
    t = cluster_of(workdir, procs, agents=2, fake="2xT4")
    p = t.run("submit", "--gpu-mem", "40G", "-G", "1", "--", "true", check=False)
    assert p.returncode == 1 and ">= 40 GiB" in p.stderr, p.stderr
    p = t.run("submit", "--hold-if-impossible", "--gpu-mem", "40G", "-G", "1", "--", "true")
    jid = int(p.stdout)
    wait_for(lambda: "can never start" in t.job(jid)["reason"], 20, "a reason")
    assert ">= 40 GiB" in t.job(jid)["reason"]
    ok = t.submit("--gpu-tflops", "60", "-G", "1", "--", "true")
    t.run("wait", ok, timeout=60)
    sw = t.submit("-N", "2", "--switches", "1", "--gpus-per-task", "1", "--", "true")
    t.run("wait", sw, timeout=60)  # nodes without topology count as one switch
    t.run("cancel", jid)


def test_labels_and_constraints(workdir, procs):
    """Nodes carry the labels their agents were given; a job's --constraint
    (Slurm's feature syntax) places it on the nodes whose labels satisfy
    it; one that no node could satisfy is refused at submit, saying so;
    a malformed one is refused by the CLI and by the server."""
    t = cluster_of(workdir, procs, agents=2, fake="1xH100",
                   labels=["tier=top,fabric=ib,rack=r07", "tier=general,fabric=roce"])
    n0 = t.json("nodes", "n0")[0]
    # with the label every node has of its accelerators' model
    assert n0["labels"] == {"fabric": "ib", "gpu": "H100", "rack": "r07", "tier": "top"}, n0
    assert "Labels:   fabric=ib gpu=H100 rack=r07 tier=top" in t.run("nodes", "n0").stdout
    on = {}
    for expr in ("fabric=ib", "tier=general|rack=r01", "fabric&rack!=r07&gpu=H100"):
        jid = t.submit("-C", expr, "-G", "1", "--", "true")
        t.run("wait", jid, timeout=60)
        job = t.job(jid)
        assert job["request"]["constraint"] == expr, job["request"]
        on[expr] = job["attempts"][0]["nodes"][0]["name"]
    assert on == {"fabric=ib": "n0", "tier=general|rack=r01": "n1",
                  "fabric&rack!=r07&gpu=H100": "n1"}
    # the same through a batch script's #SBATCH -C (Slurm's --constraint)
    script = os.path.join(workdir, "ib.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n#SBATCH -C fabric=ib --gpus=1\ntrue\n")
    os.chmod(script, 0o755)
    jid = int(t.run("submit", script).stdout)
    t.run("wait", jid, timeout=60)
    job = t.job(jid)
    assert job["request"]["constraint"] == "fabric=ib", job["request"]
    assert job["attempts"][0]["nodes"][0]["name"] == "n0"
    p = t.run("submit", "-C", "fabric=ib&tier=general", "--", "true", check=False)
    assert p.returncode == 1 and "labelled fabric=ib&tier=general" in p.stderr, p.stderr
    assert "could ever hold that" in p.stderr, p.stderr
    p = t.run("submit", "-C", "fabric=ib&", "--", "true", check=False)
    assert p.returncode == 2 and 'constraint: "" is not KEY' in p.stderr, p.stderr
    # an operator's labels: over the agent's, in the node's history and the
    # audit trail; the agent's come back when removed
    p = t.run("nodes", "label", "n1", "fabric=ib", "rack=r09")
    assert p.stdout.strip() == "node n1: fabric=ib gpu=H100 rack=r09 tier=general", p.stdout
    n1 = t.json("nodes", "n1")[0]
    assert n1["labels_set"] == {"fabric": "ib", "rack": "r09"}, n1
    jid = t.submit("-C", "fabric=ib&rack=r09", "-G", "1", "--", "true")
    t.run("wait", jid, timeout=60)
    assert t.job(jid)["attempts"][0]["nodes"][0]["name"] == "n1"
    hist = t.json("nodes", "history", "n1")
    assert any(e["kind"] == "labeled" and " fabric=ib rack=r09" in e.get("detail", "")
               for e in hist), hist
    p = t.run("nodes", "label", "n1", "fabric-")
    assert p.stdout.strip() == "node n1: fabric=roce gpu=H100 rack=r09 tier=general", p.stdout
    audit = t.run("audit").stdout
    assert "/v1/nodes/n1/labels" in audit, audit
    for bad, why in ((["n1"], "name the node and at least one label"),
                     (["n1", "tier"], '"tier": expected KEY=VALUE')):
        p = t.run("nodes", "label", *bad, check=False)
        assert p.returncode == 2 and why in p.stderr, p.stderr
    p = t.run("nodes", "label", "n1", "bad key=x", check=False)
    assert p.returncode == 2 and '"bad key=x": a key (and its value) of letters' in p.stderr, \
        p.stderr
    # a taint keeps what does not tolerate it off the node
    p = t.run("nodes", "taint", "n0", "inference", "dev")
    assert p.stdout.strip() == "node n0: taints dev, inference", p.stdout
    assert t.json("nodes", "n0")[0]["taints"] == ["dev", "inference"]
    assert "Taints:   dev, inference (only jobs that --tolerate each)" in \
        t.run("nodes", "n0").stdout
    jid = t.submit("-G", "1", "--", "true")
    t.run("wait", jid, timeout=60)
    assert t.job(jid)["attempts"][0]["nodes"][0]["name"] == "n1"
    p = t.run("submit", "-C", "rack=r07", "--tolerate", "inference", "--", "true", check=False)
    assert p.returncode == 1 and "tolerating inference" in p.stderr, p.stderr
    jid = t.submit("-C", "rack=r07", "--tolerate", "inference,dev", "--", "true")
    t.run("wait", jid, timeout=60)
    assert t.job(jid)["attempts"][0]["nodes"][0]["name"] == "n0"
    assert t.job(jid)["request"]["tolerate"] == "dev,inference"
    p = t.run("nodes", "taint", "n0", "dev-", "inference-")
    assert p.stdout.strip() == "node n0: taints none", p.stdout
    assert [e["kind"] for e in t.json("nodes", "history", "n0")].count("tainted") == 2
    p = t.run("submit", "--tolerate", "a,,b", "--", "true", check=False)
    assert p.returncode == 2 and "tolerate: an empty name" in p.stderr, p.stderr
    # an agent's bad labels stop it at start, saying what is wrong
    bad = subprocess.run([BIN, "agent", "--server", t.url, "--token-file",
                          os.path.join(t.data, "agent.token"), "--name", "bad",
                          "--work-dir", os.path.join(workdir, "bad"), "--labels", "tier"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and '--labels: "tier" is not KEY=VALUE' in bad.stderr, \
        bad.stderr


def test_pools(workdir, procs):
    """Pools by label selector, like Slurm's partitions: a job goes to the
    default pool unless it names others (-p, #SBATCH -p), runs in the union
    of those it names, is held to their max_time (given it when it has no
    limit) and min_gpus, and may use only those that allow its user; a -p
    that names no pool names the queue, as before pools."""
    pools = {"top": {"selector": "tier=top", "allow": ["role:llm"], "max_time": "1h",
                     "min_gpus": 1},
             "general": {"selector": "tier=general|tier=dev"}}
    t = cluster_of(workdir, procs, agents=2, fake="1xH100",
                   labels=["tier=top,rack=r1", "tier=general,rack=r2"],
                   pools=pools, default_pool="general")
    got = {p["name"]: p for p in t.json("pools")["pools"]}
    assert (got["top"]["nodes"], got["top"]["accelerators"], got["top"]["max_time_s"],
            got["top"]["allow"], got["general"]["default"]) == (1, 1, 3600, ["role:llm"], True), got
    out = t.run("pools").stdout
    assert "role:llm" in out and "(default)" in out and "tier=general|tier=dev" in out, out
    assert "Pools:    top" in t.run("nodes", "n0").stdout
    assert t.json("nodes", "n1")[0]["pools"] == ["general"]
    # tenk nodes -o where: each column as wide as its widest entry
    t.run("nodes", "taint", "n0", "kept-for-the-inference-team")
    lines = t.run("nodes", "-o", "where").stdout.splitlines()
    t.run("nodes", "taint", "n0", "kept-for-the-inference-team-")
    col = lines[0].index("LABELS")
    assert all(row[col - 1] == " " and "=" in row[col:].split(",")[0] for row in lines[1:]), \
        lines
    # no -p: the default pool; -p top: the top pool, with its max_time
    on = {}
    for args in ([], ["-p", "top"]):
        jid = t.submit(*args, "-G", "1", "--", "true")
        t.run("wait", jid, timeout=60)
        job = t.job(jid)
        on[job["request"]["pool"]] = (job["attempts"][0]["nodes"][0]["name"],
                                      job["request"].get("time_limit_s", 0))
    assert on == {"general": ("n1", 0), "top": ("n0", 3600)}, on
    assert "Where:    pools top" in t.run("show", jid).stdout
    # a waiting job moved to the top pool gets its max_time, as at submit
    jid = t.submit("--hold", "-G", "1", "--", "true")
    t.run("update", jid, "-p", "top")
    req = t.job(jid)["request"]
    assert (req["pool"], req.get("time_limit_s")) == ("top", 3600), req
    t.run("cancel", jid)
    # the union of the pools it names: a gang over both nodes
    jid = t.submit("-p", "top,general", "-N", "2", "-G", "2", "-t", "30m", "--", "true")
    t.run("wait", jid, timeout=60)
    assert {n["name"] for n in t.job(jid)["attempts"][0]["nodes"]} == {"n0", "n1"}
    # the same pool through a batch script's #SBATCH -p
    script = os.path.join(workdir, "top.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n#SBATCH -p top --gpus=1\ntrue\n")
    os.chmod(script, 0o755)
    jid = int(t.run("submit", script).stdout)
    t.run("wait", jid, timeout=60)
    assert t.job(jid)["request"]["pool"] == "top"
    assert t.job(jid)["attempts"][0]["nodes"][0]["name"] == "n0"
    # a name that is no pool names the queue, as #SBATCH -p did before pools
    jid = t.submit("-p", "default", "--", "true")
    assert t.job(jid)["request"]["queue"] == "default" and \
        t.job(jid)["request"]["pool"] == "general"
    for args, why in ((["-p", "top", "-t", "2h", "-G", "1"],
                       "pool top takes time limits of 1h00m at most; this job's is 2h00m"),
                      (["-p", "top"], "pool top takes jobs of 1 accelerators or more"),
                      (["-p", "nosuch"], 'queue: no queue "nosuch"'),
                      (["-p", "top", "-N", "2", "-G", "2"], "in pool top")):
        p = t.run("submit", *args, "--", "true", check=False)
        assert p.returncode != 0 and why in p.stderr, (args, p.stderr)
    # who may use a pool: a user without the role gets 403, the pool named
    tok = t.json("users", "add", "alice", "--unix-user", "nobody")["token"]
    p = t.run("submit", "-p", "top", "-G", "1", "--", "true", env=as_user(t, tok), check=False)
    assert p.returncode == 1 and "pool top: alice may not use it" in p.stderr, p.stderr


def test_fault_domains(workdir, procs):
    """Agents report their fault domain (--domain); a gang spreads over
    racks (--spread rack, rack:2) or keeps to one (--within rack); one that
    no set of nodes could hold so is refused saying why, and a level the
    cluster does not name is refused naming those it does."""
    t = cluster_of(workdir, procs, agents=3, fake="1xH100",
                   domains=["row1/r1", "row1/r1", "row1/r2"], domain_levels=["row", "rack"])
    assert "Domain:   row1/r1" in t.run("nodes", "n0").stdout
    assert t.json("nodes", "n2")[0]["domain"] == "row1/r2"
    where = t.run("nodes", "-o", "where").stdout
    assert "DOMAIN" in where and "row1/r2" in where, where

    def nodes_of(*args):
        jid = t.submit(*args, "-G", "2" if "-N" in args else "1", "--", "true")
        t.run("wait", jid, timeout=60)
        return sorted(n["name"] for n in t.job(jid)["attempts"][0]["nodes"]), jid

    spread, jid = nodes_of("-N", "2", "--spread", "rack")
    assert "Where:    spread over rack" in t.run("show", jid).stdout
    assert spread in (["n0", "n2"], ["n1", "n2"]), spread
    assert nodes_of("-N", "2", "--within", "rack")[0] == ["n0", "n1"]
    jid = t.submit("-N", "3", "-G", "3", "--spread", "rack:2", "--", "true")
    t.run("wait", jid, timeout=60)
    assert len(t.job(jid)["attempts"][0]["nodes"]) == 3
    assert t.job(jid)["request"]["spread"] == "rack:2"
    for args, rc, why in ((["-N", "3", "--spread", "rack"], 1, "at most 1 in any rack"),
                          (["-N", "3", "--within", "rack"], 1, "within one rack"),
                          (["--spread", "shelf"], 2,
                           'spread: no fault-domain level "shelf"; levels: row, rack'),
                          (["--spread", "rack:x"], 2, "spread: expected a fault-domain level")):
        p = t.run("submit", *args, "--", "true", check=False)
        assert p.returncode == rc and why in p.stderr, (args, p.stderr)
    bad = subprocess.run([BIN, "agent", "--server", t.url, "--token-file",
                          os.path.join(t.data, "agent.token"), "--name", "bad",
                          "--work-dir", os.path.join(workdir, "bad"), "--domain", "r1//p2"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and '--domain: "r1//p2" is not a fault-domain path' in \
        bad.stderr, bad.stderr


def test_maintenance_window(workdir, procs):
    """tenk reserve keeps nodes from a start on: no job starts there that
    would still run then (by its time limit; without one, once the start is
    within maint_lookahead); at the start its nodes are drained, the jobs
    that started before it was set and still run go on (none is killed),
    and at its end they are resumed and what waited starts. A reservation
    for a queue keeps its nodes for that queue's jobs alone."""
    import time
    t = cluster_of(workdir, procs, agents=2, fake="4xH100", agent_args=["--cpus", "16"])
    # it runs through the window's start (12 s on) and ends in it
    before = t.submit("-w", "n0", "-G", "1", "-t", "5m", "--", "sleep", "18")
    short = t.submit("-w", "n0", "-G", "1", "-t", "1m", "--", "true")
    wait_for(lambda: t.job(before)["state"] == "RUNNING", 30, "the job before the window")
    t.run("wait", short, timeout=60)
    start = time.time() + 12
    made = t.json("reserve", "--nodes", "n0", "--start", f"now+{int(start - time.time())}",
                  "--duration", "4s", "--reason", "firmware")
    assert (made["name"], made["kind"], made["state"], made["nodes"]) == \
        ("resv1", "maintenance", "waiting", ["n0"]), made
    assert made["jobs_in_the_way"] == [before], made
    listed = t.run("reservations").stdout
    assert "resv1" in listed and "maintenance" in listed and "firmware" in listed, listed
    assert "Reserved: resv1" in t.run("nodes", "n0").stdout
    # after it was set: a limit past its start waits; one that ends before
    # runs; none at all waits (the start is within the default 24h)
    late = t.submit("-w", "n0", "-G", "1", "-t", "1m", "--", "true")
    fits = t.submit("-w", "n0", "-G", "1", "-t", "2s", "--", "true")
    unlimited = t.submit("-w", "n0", "-G", "1", "--", "true")
    elsewhere = t.submit("-G", "1", "-t", "1m", "--", "true")
    t.run("wait", fits, elsewhere, timeout=60)
    assert t.job(elsewhere)["attempts"][0]["nodes"][0]["name"] == "n1"
    wait_for(lambda: "would still run when reservation resv1 starts" in
             t.job(late).get("reason", ""), 20, "the late job's reason")
    assert "has no time limit, and reservation resv1 starts" in t.job(unlimited)["reason"]
    assert t.job(late)["state"] == t.job(unlimited)["state"] == "PENDING"
    # bad input is refused, saying what is wrong
    for args, why in ((["--nodes", "n0", "--start", "now+5", "--duration", "1h",
                        "--reason", "x"], "overlaps"),
                      (["--nodes", "n9", "--start", "now", "--duration", "1h", "--reason", "x"],
                       'no node "n9"'),
                      (["--nodes", "n1", "--start", "now", "--duration", "1h", "--reason", "x",
                        "--queue", "nosuch"], 'no queue "nosuch"'),
                      (["--nodes", "n1", "--start", "now", "--reason", "x"],
                       "give --duration or --end")):
        p = t.run("reserve", *args, check=False)
        assert p.returncode != 0 and why in p.stderr, (args, p.stderr)
    # the start: n0 drained for it, the job from before goes on
    wait_for(lambda: t.json("nodes", "n0")[0]["drain_source"] == "maintenance", 30,
             "the window's drain")
    assert t.job(before)["state"] == "RUNNING"
    p = t.run("resume", "n0", check=False)
    assert p.returncode != 0 and "maintenance window resv1" in p.stderr, p.stderr
    # the end: resumed, what waited runs; the job from before was not killed
    wait_for(lambda: not t.json("nodes", "n0")[0]["drained"], 30, "the window's end")
    t.run("wait", late, unlimited, before, timeout=60)
    assert t.job(before)["state"] == "COMPLETED", t.job(before)
    assert "no reservations" in t.run("reservations").stdout
    # kept for a queue: its jobs alone run there
    t.run("queues", "set", "vip")
    made = t.json("reserve", "--nodes", "n1", "--start", "now", "--duration", "1h",
                  "--reason", "demo", "--queue", "vip", "--name", "demo")
    assert (made["name"], made["kind"], made["state"]) == ("demo", "reserved", "active"), made
    other = t.submit("-w", "n1", "-G", "1", "-t", "1m", "--", "true")
    vip = t.submit("-w", "n1", "-G", "1", "--queue", "vip", "--", "true")
    t.run("wait", vip, timeout=60)
    wait_for(lambda: "kept for reservation demo" in t.job(other).get("reason", ""), 20,
             "the other queue's reason")
    assert t.job(other)["state"] == "PENDING"
    assert "deleted reservation demo" in t.run("reservations", "delete", "demo").stdout
    t.run("wait", other, timeout=60)


def test_quotas_in_what_runs_out(workdir, procs):
    """A queue's limits beyond its accelerators: one model's, weighted units
    (an H100 one, an A100 its peak rate against an H100's), CPUs, memory. A
    job over any waits with the dimension named; one that may use either
    model goes to the one still within its limits; other queues are not
    held to them; bad limits are refused saying why."""
    t = cluster_of(workdir, procs, agents=2, fake=["4xH100", "4xA100-80GB"],
                   agent_args=["--cpus", "16"])
    t.run("queues", "set", "vision", "--gpus", "H100=2", "--units", "3", "--cpus", "8",
          "--mem", "1G", "--borrow-limit", "cpus=4")
    q = {x["name"]: x for x in t.json("queues")["queues"]}["vision"]
    assert q["limits"] == {"H100": 2, "units": 3, "cpus": 8, "mem_mib": 1024}, q
    assert q["borrow_limits"] == {"cpus": 4}, q
    weights = {m["name"]: m["weight"] for m in t.json("catalogue")["models"]}
    assert weights["H100"] == 1 and abs(weights["A100-80GB"] - 312 / 989.4) < 1e-6, weights
    assert "A100-80GB" in t.run("catalogue").stdout
    held = t.submit("--queue", "vision", "-G", "2", "--gpu-type", "H100", "--", "sleep", "60")
    wait_for(lambda: t.job(held)["state"] == "RUNNING", 30, "the queue's H100 job")
    over_h100 = t.submit("--queue", "vision", "-G", "1", "--gpu-type", "H100", "--", "true")
    either = t.submit("--queue", "vision", "-G", "2", "--", "sleep", "120")
    t.run("wait", t.submit("-G", "1", "--gpu-type", "H100", "--", "true"), timeout=60)
    wait_for(lambda: t.job(either)["state"] == "RUNNING", 30, "the job of either model")
    assert t.job(either)["attempts"][0]["nodes"][0]["name"] == "n1"  # the A100s
    over_units = t.submit("--queue", "vision", "-G", "4", "--gpu-type", "A100-80GB", "--",
                          "true")
    over_cpus = t.submit("--queue", "vision", "-c", "13", "--", "true")
    over_mem = t.submit("--queue", "vision", "--mem", "2G", "--", "true")
    for jid, why in ((over_h100, 'queue "vision": H100 limit 2 (quota 2), 2 in use; this '
                      'job needs 1 accelerators'),
                     (over_units, 'queue "vision": weighted GPU units limit 3 (quota 3), 2.631 '
                      'in use; this job needs 4 accelerators'),
                     (over_cpus, 'queue "vision": CPUs limit 12 (quota 8), 0 in use; this '
                      'job needs 13'),
                     (over_mem, 'queue "vision": memory (GiB) limit 1 (quota 1), 0 in use; '
                      'this job needs 2')):
        wait_for(lambda: why in t.job(jid).get("reason", ""), 20, f"job {jid}'s reason")
        assert t.job(jid)["state"] == "PENDING"
    listed = t.run("queues").stdout
    assert "limits: H100 2/2" in listed and "cpus 0/8 (+4)" in listed, listed
    used = {x["name"]: x for x in t.json("queues")["queues"]}["vision"]["limits_in_use"]
    assert used["H100"] == 2 and abs(used["units"] - (2 + 2 * 312 / 989.4)) < 1e-3, used
    t.run("cancel", either)
    # bad limits, refused saying why
    for args, why in ((["--gpus", "H10=3"], 'limits.H10: not "units", "cpus", "mem_mib" or '
                       'a model of the catalogue'),
                      (["--borrow-limit", "T4=2"], "borrow_limits.T4: the queue has no limit "
                       "of T4"),
                      (["--mem", "lots"], "--mem: a size such as 4T or none")):
        p = t.run("queues", "set", "vision", *args, check=False)
        assert p.returncode != 0 and why in p.stderr, (args, p.stderr)
    # lifted: what waited runs
    t.run("queues", "set", "vision", "--gpus", "H100=none", "--units", "none", "--cpus", "none",
          "--mem", "none")
    t.run("wait", over_h100, over_units, over_cpus, over_mem, timeout=90)
    t.run("cancel", held)


def as_user(t, token):
    env = t.env()
    env["TENK_TOKEN"] = token
    return env


def test_users_see_their_own_and_queues_limit_them(workdir):
    t, d = start_up(workdir)
    # what they see and may do, not who their jobs run as (test_identity.py):
    # both run as root, which this one-machine cluster allows
    alice = t.run("users", "add", "alice", "--unix-user", "root").stdout.strip()
    bob = t.run("users", "add", "bob", "--unix-user", "root").stdout.strip()
    assert len(alice) == 64 and alice != bob
    t.run("queues", "set", "restricted", "--users", "alice")
    mine = int(t.run("submit", "--queue", "restricted", "--", "sleep", "30",
                     env=as_user(t, alice)).stdout)
    p = t.run("submit", "--queue", "restricted", "--", "true", check=False,
              env=as_user(t, bob))
    assert p.returncode == 1 and 'queue restricted: bob may not use it' in p.stderr
    theirs = int(t.run("submit", "--", "sleep", "30", env=as_user(t, bob)).stdout)
    # each sees every job's summary, as squeue shows a shared queue; what a
    # job runs, where, and what it writes are its owner's (and the admin's)
    listed = json_of(t, "queue", "--all", token=bob)
    assert sorted(j["id"] for j in listed["jobs"]) == sorted([mine, theirs])
    seen = {j["id"]: j for j in listed["jobs"]}
    other, own = seen[mine], seen[theirs]
    assert other["owner"] == "alice" and other["queue"] == "restricted", other
    assert other["state"] in ("PENDING", "STARTING", "RUNNING"), other
    assert other["request"]["nodes"] == 1
    assert other["private"] is True and "command" not in other["request"], other
    assert "cwd" not in other["request"] and "output" not in other["request"], other
    assert own["request"]["command"] == ["sleep", "30"] and "private" not in own
    shown = t.run("show", mine, env=as_user(t, bob)).stdout
    assert "Owner:    alice" in shown and "(alice's to see)" in shown, shown
    assert "sleep 30" not in shown, shown
    assert "sleep 30" in t.run("show", mine, env=as_user(t, alice)).stdout
    assert t.job(mine)["request"]["command"] == ["sleep", "30"]  # the admin's view
    st, ans = t.api("GET", f"/v1/jobs/{mine}/logs", token=bob)
    assert st == 403 and f"job {mine} is alice's: its logs are" in ans["error"], ans
    st, ans = t.api("GET", f"/v1/jobs/{mine}/checkpoints", token=bob)
    assert st == 403 and "its checkpoints are" in ans["error"], ans
    # changing it is the owner's, an operator's or an admin's
    for verb in ("cancel", "hold", "requeue"):
        p = t.run(verb, mine, check=False, env=as_user(t, bob))
        assert p.returncode == 1, p
        assert f"job {mine} is alice's: only its owner, an operator or an admin may {verb} it" \
            in p.stderr, p.stderr
    st, ans = t.api("POST", f"/v1/jobs/{mine}/update", {"time_limit_s": 60}, token=bob)
    assert st == 403 and "may update it" in ans["error"], ans
    assert t.job(mine)["state"] in ("PENDING", "STARTING", "RUNNING")
    assert not t.job(mine).get("held")
    assert {j["owner"] for j in t.json("queue", "--all")["jobs"]} == {"alice", "bob"}
    # users do not run the cluster
    p = t.run("drain", "node1", "--reason", "x", check=False, env=as_user(t, alice))
    assert p.returncode == 1 and "is for an operator" in p.stderr
    p = t.run("users", check=False, env=as_user(t, alice))
    assert p.returncode == 1
    t.run("cancel", mine, env=as_user(t, alice))
    t.run("cancel", theirs)
    t.run("users", "rm", "bob")
    p = t.run("queue", check=False, env=as_user(t, bob))
    assert p.returncode == 1 and "invalid token" in p.stderr
    d.stop()
    # tokens outlive a restart; the store holds only their hashes
    t2, d2 = start_up(workdir)
    assert t2.run("queue", env=as_user(t2, alice)).returncode == 0
    with open(os.path.join(t2.data, "tenk.db"), "rb") as f:
        assert alice.encode() not in f.read()
    d2.stop()


def json_of(t, *args, token):
    import json
    return json.loads(t.run(*args, "--json", env=as_user(t, token)).stdout)


def test_checkpoints_are_reported(workdir):
    t, d = start_up(workdir, "--node-timeout", "3s")
    jid = t.submit("-G", "1", "--", "sh", "-c",
                   'sleep 0.5; echo step1 > "$TENK_CHECKPOINT_DIR/ckpt-1"; sleep 60')
    job = wait_for(lambda: (lambda j: j if j.get("last_checkpoint_ms") else None)(t.job(jid)),
                   30, "a checkpoint to be reported")
    assert job["last_checkpoint_ms"] >= job["attempts"][0]["start_ms"]
    t.run("cancel", jid)
    d.stop()


def test_fraction_gets_mps_limits(workdir):
    pipe = os.path.join(workdir, "mps")
    os.mkdir(pipe)
    open(os.path.join(pipe, "control"), "w").close()
    t, d = start_up(workdir, env={"CUDA_MPS_PIPE_DIRECTORY": pipe})
    jid = t.submit("-G", "0.25", "--", "sh", "-c",
                   "env | grep -E '^(CUDA_MPS|TENK_GPU_FRACTION|CUDA_VISIBLE)' | sort")
    t.run("wait", jid)
    out = open(os.path.join(workdir, f"tenk-{jid}.out")).read()
    assert "TENK_GPU_FRACTION=0.250" in out
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25" in out
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20389M" in out  # a quarter of 81,559 MiB
    assert f"CUDA_MPS_PIPE_DIRECTORY={pipe}" in out
    d.stop()


def test_least_attained_service_preempts_within_its_class(workdir, procs):
    """"order": "las": a job that has had its accelerators longest sinks a
    level, and a newer job of the same class takes them as soon as that
    happens (a pass at that moment, not at the next event); the victim gets
    SIGTERM and comes back, and the level is shown."""
    data = os.path.join(workdir, "data")
    root_jobs_config(data, classes=[
        {"name": "normal", "priority": 50, "order": "las", "las_limits_gpu_h": [0.002],
         "las_min_run_s": 1, "las_max_stretch": 0}])
    t = cluster_of(workdir, procs, agents=1)
    classes = t.run("classes").stdout
    assert "las 0.002" in classes, classes
    out = os.path.join(workdir, "marks")
    os.mkdir(out)
    a = t.submit("-G", "4", "--grace", "2s", "--", "sh", "-c", TRAPPED.format(out=out))
    t.wait_state(a, "RUNNING")
    # 0.002 accelerator-hours is 1.8 s on four: b waits at the same level, then takes them
    b = t.submit("-G", "4", "--", "true")
    p = t.run("wait", b, timeout=60)
    assert p.returncode == 0
    j = t.job(a)
    # b did not take them before a had had its 1.8 s (however slow the
    # machine made the CLI, b may have come after that and started at once)
    started = t.job(b)["attempts"][0]["start_ms"]
    assert started >= j["attempts"][0]["start_ms"] + 1800, (j, t.job(b))
    assert f"preempted by job {b} (class normal)" in j["attempts"][0]["reason"], j
    assert j["preemptions"] == 1 and j["failures"] == 0
    assert os.path.exists(f"{out}/term-{a}-1"), "the victim got SIGTERM to checkpoint"
    wait_for(lambda: len(t.job(a)["attempts"]) == 2, 30, f"job {a} to restart")
    j = t.job(a)
    assert j["las"]["levels"] == 2 and j["las"]["level"] == 1, j
    assert j["las"]["service_gpu_h"] >= 0.002, j
    shown = t.run("show", a).stdout
    assert "least attained service, level 2 of 2" in shown, shown
    t.run("cancel", a)


def test_least_attained_service_spares_work_it_would_throw_away(workdir, procs):
    """"las_max_loss_s": an earlier level takes a running job of its class
    only while that job would lose at most so much (its work since its last
    checkpoint, or its start). A job without a checkpoint past the bound is
    left alone, the newer job waits behind it and `tenk show` says why on
    both; once the running job commits a checkpoint, the newer one takes
    its devices at once (a pass at the commit)."""
    import time
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    t = cluster_of(workdir, procs, agents=1, checkpoint_store=store, admin_unix_user="root",
                   classes=[{"name": "normal", "priority": 50, "order": "las",
                             "las_limits_gpu_h": [0.002], "las_min_run_s": 1,
                             "las_max_stretch": 0, "las_max_loss_s": 4}])
    assert "las 0.002" in t.run("classes").stdout
    out = os.path.join(workdir, "marks")
    os.mkdir(out)
    go = os.path.join(workdir, "go")
    a = t.submit("-G", "4", "--grace", "2s", "--", "sh", "-c",
                 f'trap "echo TERM >> {out}/term-$TENK_JOB_ID-$TENK_ATTEMPT; exit 143" TERM; '
                 f'while [ ! -e {go} ]; do sleep 0.1; done; C=$TENK_CHECKPOINT_DIR; '
                 f'if [ "$TENK_ATTEMPT" = 1 ]; then mkdir -p $C/s1 && echo w > $C/s1/w.bin && '
                 f'{BIN} ckpt commit s1 --step 1; fi; while :; do sleep 0.1; done')
    t.wait_state(a, "RUNNING")
    # past the bound: it has run 5 s (1.8 s make the second level's
    # 0.002 accelerator-hours on four), and has no checkpoint
    started = t.job(a)["attempts"][0]["start_ms"]
    time.sleep(max(0, (started + 5500) / 1000 - time.time()))
    b = t.submit("-G", "4", "--", "true")
    wait_for(lambda: "behind job" in t.run("show", b).stdout, 30, f"job {b} to say why")
    shown = t.run("show", b).stdout
    assert f"behind job {a} (level 2), which would lose " in shown, shown
    assert "since its start (it committed no checkpoint), more than the class's 4s" in shown, \
        shown
    shown = t.run("show", a).stdout
    assert "preempted now, it would lose" in shown and \
        "(the class allows 4s): no earlier level takes it" in shown, shown
    time.sleep(2)  # passes come and go: it stays
    j = t.job(a)
    assert j.get("preemptions", 0) == 0 and j["state"] == "RUNNING", j
    assert t.job(b)["state"] == "PENDING"
    # the commit (stored: judged by commits, not by files in its folder):
    # it would lose nothing but its restore, and is taken
    go_ms = time.time() * 1000
    open(go, "w").close()
    p = t.run("wait", b, timeout=60)
    assert p.returncode == 0
    j = t.job(a)
    assert f"preempted by job {b} (class normal)" in j["attempts"][0]["reason"], j
    assert t.job(b)["attempts"][0]["start_ms"] >= go_ms - 50
    assert [(c["tag"], c["attempt"]) for c in t.json("ckpt", "ls", a)["checkpoints"]] == \
        [("s1", 1)]
    assert os.path.exists(f"{out}/term-{a}-1"), "the victim got SIGTERM"
    wait_for(lambda: len(t.job(a)["attempts"]) == 2, 30, f"job {a} to restart")
    wait_for(lambda: t.json("ckpt", "ls", a)["attempt"].get("restore_tag") == "s1", 30,
             f"job {a} to restore s1")
    t.run("cancel", a)


def test_least_attained_service_orders_a_level_by_the_gittins_index(workdir, procs):
    """"las_index": "gittins" (the default): within a level, waiting jobs go
    by the Gittins index of their service under the finished jobs of their
    class and queue, once 30 have finished; `tenk show` says which order a
    job is in. The finished jobs here all took well under a second of one
    accelerator: a job that has had far more than any of them (requeued)
    ranks last, and a newer job that has had nothing goes before it, where
    submission order would put the older first. After a restart the history
    is there again."""
    import time
    t = cluster_of(workdir, procs, agents=1,
                   classes=[{"name": "normal", "priority": 50, "order": "las",
                             "las_max_stretch": 0}])
    out = os.path.join(workdir, "marks")
    os.mkdir(out)
    a = t.submit("-G", "4", "--grace", "2s", "--", "sh", "-c", TRAPPED.format(out=out))
    t.wait_state(a, "RUNNING")
    go = os.path.join(workdir, "go")
    hold = ["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.1; done"]
    # history too thin: by submission, and said so
    w = t.submit("-G", "1", "--", "true")
    las = t.job(w)["las"]
    assert las["history_jobs"] == 0 and "gittins_per_gpu_h" not in las, las
    shown = t.run("show", w).stdout
    assert "within its level by submission: 0 finished jobs of its class known, 30 needed" \
        in shown, shown
    t.run("cancel", w)
    t.run("cancel", a)
    t.wait_state(a, "CANCELLED")
    first = t.submit("--array", "0-29", "-G", "1", "--", "true")
    assert t.run("wait", first, timeout=120).returncode == 0
    # a has had four accelerators for 3 s, more than any finished job
    a = t.submit("-G", "4", "--grace", "2s", "--", "sh", "-c", TRAPPED.format(out=out))
    t.wait_state(a, "RUNNING")
    time.sleep(3)
    h = t.submit("-G", "4", "--", *hold)
    t.run("requeue", a)
    t.wait_state(h, "RUNNING")
    ja = t.job(a)
    assert ja["state"] == "PENDING" and len(ja["attempts"]) == 1, ja
    las = ja["las"]
    assert las["level"] == 0 and las["history_jobs"] >= 30, las
    assert las["gittins_per_gpu_h"] == 0, las
    b = t.submit("-G", "4", "--", "true")
    lb = t.job(b)["las"]
    assert lb["level"] == 0 and lb["gittins_per_gpu_h"] > 0, lb
    assert "within its level by its Gittins index: 0 per accelerator-hour" in \
        t.run("show", a).stdout
    assert "within its level by its Gittins index: " in t.run("show", b).stdout
    # h, newer than a, went first; so does b
    open(go, "w").close()
    assert t.run("wait", b, timeout=60).returncode == 0
    t.wait_state(a, "RUNNING")
    assert t.job(a)["attempts"][1]["start_ms"] >= t.job(b)["attempts"][0]["end_ms"]
    # the history outlives the server
    os.remove(go)
    h = t.submit("-G", "4", "--", *hold)
    t.run("requeue", a)
    t.wait_state(h, "RUNNING")
    server = next(p for p in procs if p.name == "server")
    server.stop()
    server.start()
    wait_for(lambda: t.run("queue", check=False).returncode == 0, 30, "the server again")
    las = wait_for(lambda: (lambda j: j["las"] if j["state"] == "PENDING" else None)(t.job(a)),
                   30, f"job {a} waiting")
    assert las["history_jobs"] >= 30 and las["gittins_per_gpu_h"] == 0, las
    open(go, "w").close()
    t.run("cancel", a)
