"""The commands a Slurm user reaches for every day, against the real server
and agent: arrays with a cap on how many run at once, dependency chains
(and one that can never be met), hold and release, update, requeue, a
script's #TENK and #SBATCH lines, --slurm-env, --begin, --error and
--signal."""
import json
import os
import stat
import time

from conftest import start_up, wait_for
from test_jobs import parse_env


def elements(t, aid, state=None):
    path = f"/v1/jobs?array={aid}&limit=1000" + (f"&state={state}" if state else "")
    status, ans = t.api("GET", path)
    assert status == 200, ans
    return ans["jobs"]


def test_array_runs_under_its_cap_and_is_one_job(cluster, workdir):
    t = cluster
    # each element notes when it runs; the cap is 3 of 12
    script = ("echo start $(date +%s%N) >> log-$TENK_ARRAY_INDEX; sleep 0.4; "
              "echo end $(date +%s%N) >> log-$TENK_ARRAY_INDEX")
    aid = t.submit("--array", "0-11%3", "-o", "arr-%A_%a.out", "--", "sh", "-c",
                   script + "; echo idx=$TENK_ARRAY_INDEX arr=$TENK_ARRAY_JOB_ID")
    most = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        running = elements(t, aid, "STARTING,RUNNING")
        most = max(most, len(running))
        assert len(running) <= 3, [j["id"] for j in running]
        if not elements(t, aid, "active"):
            break
        time.sleep(0.05)
    assert most >= 2, "the cap let elements run side by side"
    # the tasks' own record: never more than three at once
    spans = []
    for i in range(12):
        lines = open(os.path.join(workdir, f"log-{i}")).read().split()
        spans.append((int(lines[1]), int(lines[3])))
    for s, _ in spans:
        assert sum(1 for a, b in spans if a <= s < b) <= 3
    for i in range(12):
        out = open(os.path.join(workdir, f"arr-{aid}_{i}.out")).read()
        assert f"idx={i} arr={aid}" in out
    p = t.run("wait", aid)
    assert "COMPLETED" in p.stdout
    show = t.run("show", aid).stdout
    assert f"Array {aid}_[0-11%3]: 12 element(s): 12 COMPLETED" in show, show
    assert f"({aid}_7)" in t.run("show", f"{aid}_7").stdout
    status, ans = t.api("GET", f"/v1/jobs/{aid}_12")
    assert status == 404 and f"array {aid} has no index 12" in ans["error"]

    # a waiting array is one line in the queue, and one cancel
    t.run("drain", "node1", "--reason", "hold the array back")
    a2 = t.submit("--array", "1,3,5-9", "--", "true")
    q = t.run("queue").stdout
    assert f"{a2}_[1,3,5-9]" in q, q
    assert f"{a2}_[1,3,5-9]" not in t.run("queue", "-o", "wide").stdout
    p = t.run("cancel", a2)
    assert f"cancelled 7 element(s) of array {a2}" in p.stdout
    assert {j["state"] for j in elements(t, a2)} == {"CANCELLED"}
    t.run("resume", "node1")

    bad = t.run("submit", "--array", "3-1", "--", "true", check=False)
    assert bad.returncode == 2 and "the range ends before it starts" in bad.stderr
    bad = t.run("submit", "--array", "1,1", "--", "true", check=False)
    assert bad.returncode == 2 and "index 1 is listed twice" in bad.stderr


def test_dependencies_hold_release_update_requeue(cluster, workdir):
    t = cluster
    # the first job fails once the test lets it (a file "go", or 20 s)
    first = t.submit("--", "sh", "-c",
                     "for i in $(seq 200); do [ -e go ] && break; sleep 0.1; done; exit 3")
    ok_next = t.submit("--after", f"{first}:ok", "--", "true")
    fail_next = t.submit("-d", f"afternotok:{first}", "--", "true")
    any_next = t.submit("--after", f"{first}:any", "--", "true")
    after_ok = t.submit("--after", str(ok_next), "--", "true")
    j = t.job(ok_next)
    assert j["state"] == "PENDING" and j["reason"] == f"waiting for job {first} to complete", \
        (j["reason"], j["request"])
    open(os.path.join(workdir, "go"), "w").close()
    assert t.wait_state(fail_next, "COMPLETED", 30)
    assert t.wait_state(any_next, "COMPLETED", 30)
    j = t.wait_state(ok_next, "CANCELLED", 30)
    assert j["reason"] == f"dependency never satisfied (job {first} FAILED)", j
    j = t.wait_state(after_ok, "CANCELLED", 30)
    assert j["reason"] == f"dependency never satisfied (job {ok_next} CANCELLED)", j
    bad = t.run("submit", "--after", "999999", "--", "true", check=False)
    assert bad.returncode != 0 and "after[0]: no job 999999" in bad.stderr

    # hold and release
    held = t.submit("--hold", "--", "true")
    time.sleep(0.5)
    j = t.job(held)
    assert j["state"] == "PENDING" and j["held"] and j["reason"].startswith("held"), j
    t.run("release", held)
    t.wait_state(held, "COMPLETED")
    t.run("drain", "node1", "--reason", "keep it waiting")
    w = t.submit("-t", "10", "--", "true")
    t.run("hold", w)
    assert t.job(w)["held"]
    # update a waiting job: what it waits for and what it is
    t.run("update", w, "--time", "2h", "--name", "renamed", "-G", "2", "--comment", "moved")
    j = t.job(w)
    r = j["request"]
    assert (r["time_limit_s"], j["name"], r["gpus_per_task"], r["comment"]) == \
        (7200, "renamed", 2, "moved")
    assert "time 02:00:00 (7200 s)" in t.run("show", w).stdout
    bad = t.run("update", w, "--image", "x", check=False)
    assert bad.returncode == 2 and "--image: is fixed once submitted" in bad.stderr
    bad = t.run("update", w, "--class", "nosuch", check=False)
    assert bad.returncode == 2 and "no class \"nosuch\"" in bad.stderr
    assert t.job(w)["request"]["time_limit_s"] == 7200, "a refused update changes nothing"
    t.run("release", w)
    t.run("resume", "node1")
    t.wait_state(w, "COMPLETED")
    bad = t.run("update", w, "--time", "1h", check=False)
    assert bad.returncode == 1 and "only a waiting job's request is changed" in bad.stderr

    # a running job's time limit: down by its owner, up only by an operator
    tok = t.json("users", "add", "bob", "--unix-user", "nobody")["token"]
    bob = dict(t.env(), TENK_TOKEN=tok)
    long = t.submit("-t", "10", "-D", "/tmp", "-o", "/dev/null", "--", "sleep", "600", env=bob)
    t.wait_state(long, "RUNNING")
    bad = t.run("update", long, "--time", "20", env=bob, check=False)
    assert bad.returncode == 1 and "goes up only by an operator" in bad.stderr
    bad = t.run("update", long, "-G", "2", env=bob, check=False)
    assert bad.returncode == 1 and "only the time limit" in bad.stderr
    t.run("update", long, "--time", "0:03", env=bob)
    j = t.wait_state(long, "TIMEOUT", 30)
    a = j["attempts"][0]
    took = (a["tasks"][0]["end_ms"] - a["tasks"][0]["start_ms"]) / 1000
    assert 2.5 <= took < 15, took
    up = t.submit("-t", "0:03", "-D", "/tmp", "-o", "/dev/null", "--", "sleep", "600", env=bob)
    t.wait_state(up, "RUNNING")
    t.run("update", up, "--time", "1")  # the admin: a minute
    time.sleep(5)
    assert t.job(up)["state"] == "RUNNING", "past its first limit, within the new one"
    t.run("cancel", up)
    bad = t.run("hold", w, check=False)
    assert bad.returncode == 1 and "only a waiting job is held" in bad.stderr

    # requeue: the running job stops and runs again, as attempt 2
    r = t.submit("--", "sh", "-c", "echo attempt $TENK_ATTEMPT; sleep 600")
    t.wait_state(r, "RUNNING")
    t.run("requeue", r)
    j = wait_for(lambda: (lambda j: j if len(j["attempts"]) == 2 and
                          j["state"] == "RUNNING" else None)(t.job(r)), 30, "attempt 2")
    assert j["attempts"][0]["reason"] == "requeued by admin", j["attempts"][0]
    t.run("cancel", r)


def test_sbatch_script_slurm_env_begin_error_signal(cluster, workdir):
    t = cluster
    script = os.path.join(workdir, "train.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n"
                "#SBATCH --job-name=slurmy --ntasks=2\n"
                "#SBATCH -t 5 --mail-type=END --account lab\n"
                "#SBATCH --output=sb-%j-%t.out --mem=100\n"
                "#TENK --slurm-env\n"
                "echo procid=$SLURM_PROCID ntasks=$SLURM_NTASKS jobid=$SLURM_JOB_ID "
                "nodes=$SLURM_JOB_NUM_NODES localid=$SLURM_LOCALID\n"
                "#SBATCH --nodes=9\n")  # after the first command: not an option
    os.chmod(script, 0o755)
    p = t.run("submit", "train.sh")
    jid = int(p.stdout)
    assert "ignoring #SBATCH options tenk does not share with Slurm: --mail-type, " \
           "--account" in p.stderr, p.stderr
    t.run("wait", jid)
    j = t.job(jid)
    r = j["request"]
    assert (j["name"], r["nodes"], r["tasks_per_node"], r["time_limit_s"], r["mem_mib"]) == \
        ("slurmy", 1, 2, 300, 100), r
    for rank in range(2):
        e = parse_env(open(os.path.join(workdir, f"sb-{jid}-{rank}.out")).read()
                      .replace(" ", "\n"))
        assert e["procid"] == str(rank) and e["ntasks"] == "2" and e["jobid"] == str(jid)
        assert e["nodes"] == "1" and e["localid"] == str(rank)
    # the command line wins over the script
    jid = t.submit("-J", "mine", "train.sh")
    assert t.job(jid)["name"] == "mine"
    t.run("wait", jid)

    # a script that is not executable runs through its #! line, as sbatch's;
    # one that is not there, or has no #! line, is refused at submit
    with open(os.path.join(workdir, "plain.sh"), "w") as f:
        f.write("#!/bin/sh -e\n#SBATCH -o plain-%j.out\necho plain $0 $1 $-\n")
    os.chmod(os.path.join(workdir, "plain.sh"), 0o644)
    jid = t.submit("plain.sh", "arg1")
    t.run("wait", jid)
    assert t.job(jid)["request"]["command"][:2] == ["/bin/sh", "-e"]
    out = open(os.path.join(workdir, f"plain-{jid}.out")).read().split()
    assert out[:3] == ["plain", os.path.join(workdir, "plain.sh"), "arg1"] and "e" in out[3]
    for name, why in (("nonexist.sh", "nonexist.sh: no such file in"),
                      ("./jobs/none", "./jobs/none: no such file in")):
        p = t.run("submit", name, check=False)
        assert p.returncode == 2 and why in p.stderr, p.stderr
    with open(os.path.join(workdir, "bare.sh"), "w") as f:
        f.write("echo no interpreter\n")
    p = t.run("submit", "bare.sh", check=False)
    assert p.returncode == 2 and "has no #! line" in p.stderr, p.stderr
    n = len(t.json("queue", "--all")["jobs"])
    p = t.run("submit", "--", "python3", "-c", "pass")  # a command, not a script
    assert len(t.json("queue", "--all")["jobs"]) == n + 1

    # --begin: waits, and starts once the time comes
    b = t.submit("--begin", "now+3", "--", "true")
    j = t.job(b)
    assert j["state"] == "PENDING" and j["reason"].startswith("waiting to begin at"), j
    t.wait_state(b, "COMPLETED", 30)
    assert t.job(b)["attempts"][0]["start_ms"] >= j["request"]["begin_ms"]

    # -e: stderr apart; --signal: the warning before the limit
    e = t.submit("-e", "err-%j.txt", "-o", "out-%j.txt", "--", "sh", "-c",
                 "echo to-out; echo to-err >&2")
    t.run("wait", e)
    assert open(os.path.join(workdir, f"out-{e}.txt")).read() == "to-out\n"
    assert open(os.path.join(workdir, f"err-{e}.txt")).read() == "to-err\n"
    s = t.submit("-t", "0:04", "--signal", "USR1@2", "--", "sh", "-c",
                 "trap 'echo warned; exit 0' USR1; sleep 30 & wait")
    p = t.run("wait", s, check=False)
    assert p.returncode == 0, "the job ended on its warning, before the limit"
    assert open(os.path.join(workdir, f"tenk-{s}.out")).read() == "warned\n"
    bad = t.run("submit", "--signal", "USR1@2", "--", "true", check=False)
    assert bad.returncode == 2 and "add --time" in bad.stderr
    bad = t.run("submit", "--begin", "yesterday-ish", "--", "true", check=False)
    assert bad.returncode == 2 and "--begin: expected" in bad.stderr


def test_cli_errors_as_json_nodes_by_name_and_help(cluster, workdir):
    t = cluster
    p = t.run("show", "999", "--json", check=False)
    assert p.returncode == 1
    e = json.loads(p.stdout)
    assert e["error"] == "no job 999" and e["status"] == 404 and e["exit"] == 1, e
    # the server's own refusal of a bad request is a usage error: exit 2
    p = t.run("submit", "--class", "nosuch", "--json", "--", "true", check=False)
    assert p.returncode == 2 and json.loads(p.stdout)["status"] == 400
    p = t.run("queue", "--json", "--bogus", check=False)
    assert p.returncode == 2 and "unknown option --bogus" in json.loads(p.stdout)["error"]
    p = t.run("nodes", "node1")
    assert "Node node1  UP" in p.stdout and "GPU 7:" in p.stdout, p.stdout
    assert t.json("nodes", "node1")[0]["name"] == "node1"
    p = t.run("nodes", "ghost", check=False)
    assert p.returncode == 1 and 'no node "ghost"' in p.stderr
    for args in (["--help"], ["help"], ["submit", "--help"], ["run", "--help"],
                 ["logs", "--help"], ["update", "--help"], ["bench", "--help"]):
        p = t.run(*args, check=False)
        assert p.returncode == 0, (args, p.stderr)


def test_local_socket_without_tls(cluster, workdir):
    """The API on DATA/api.sock, for this machine's clients: no TLS, the
    same tokens; the CLI takes it when TENK_SERVER names it, or by itself
    from a folder holding tenk-data."""
    t = cluster
    sock = os.path.join(t.data, "api.sock")
    st = os.stat(sock)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    env = dict(t.env(), TENK_SERVER="unix:" + sock)
    env.pop("TENK_CA", None)
    jid = t.submit("--", "true", env=env)
    p = t.run("wait", jid, env=env)
    assert "COMPLETED" in p.stdout
    env["TENK_TOKEN"] = "nope"
    p = t.run("queue", env=env, check=False)
    assert p.returncode == 1 and "invalid token" in p.stderr
    # no TENK_SERVER, TENK_TOKEN: ./tenk-data is found, its socket first
    bare = {k: v for k, v in t.env().items() if not k.startswith("TENK_")}
    p = t.run("show", jid, env=bare, cwd=workdir)
    assert f"Job {jid}" in p.stdout
    rows = t.json("audit", "--user", "admin")["rows"]
    assert any(r["addr"] == "local" for r in rows), rows[-3:]


def test_run_dir_holds_shims_and_metrics(workdir):
    """--run-dir (a tmpfs on a busy node) holds the shims' folders and the
    metrics files; the checkpoint folders stay in the work folder."""
    run = os.path.join(workdir, "run")
    t, d = start_up(workdir, "--run-dir", run)
    try:
        jid = t.submit("--", "sh", "-c", "echo m=$TENK_METRICS c=$TENK_CHECKPOINT_DIR; sleep 30")
        t.wait_state(jid, "RUNNING")
        shim = os.path.join(run, "shims", f"{jid}.1")
        wait_for(lambda: os.path.exists(os.path.join(shim, "status.json")), 20, "the shim")
        assert stat.S_IMODE(os.stat(run).st_mode) == 0o711
        out = wait_for(lambda: open(os.path.join(workdir, f"tenk-{jid}.out")).read() or None,
                       20, "the job's line")
        assert f"m={run}/metrics/{jid}.1" in out, out
        assert f"c={t.data}-work/checkpoints/{jid}" in out, out
        t.run("cancel", jid)
        wait_for(lambda: not os.path.exists(shim), 30, "the shim's folder gone")
    finally:
        d.stop()


def test_nodelist_exclude_exclusive(workdir, procs):
    """-w, -x and --exclusive on three nodes: the listed node, never the
    excluded ones, and a node that holds an exclusive job takes nothing
    else until it ends; unknown names and a short list are refused."""
    from conftest import Daemon
    t, d = start_up(workdir, fake="2xH100")
    for name in ("node2", "node3"):
        a = Daemon(["agent", "--server", t.url, "--token-file",
                    os.path.join(t.data, "agent.token"), "--name", name, "--fake-gpus", "2xH100",
                    "--work-dir", os.path.join(workdir, name), "--stop-jobs"], workdir, name)
        procs.append(a)
    t.wait_nodes_up(3)
    gate = os.path.join(workdir, "gate")
    hold = ["--", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.1; done"]

    def node_of(jid):
        return t.job(jid)["attempts"][-1]["nodes"][0]["name"]

    a = t.submit("-w", "node3", "-G", "1", *hold)
    b = t.submit("-x", "node[1,3]", "-G", "1", *hold)
    t.wait_state(a, ("RUNNING",))
    t.wait_state(b, ("RUNNING",))
    assert node_of(a) == "node3" and node_of(b) == "node2"
    # node1 is the only one with nothing on it: the exclusive job goes there
    c = t.submit("--exclusive", "-G", "1", *hold)
    t.wait_state(c, ("RUNNING",))
    assert node_of(c) == "node1"
    assert "Where:    alone on each node (exclusive)" in t.run("show", c).stdout
    # nothing else goes on node1 now, not even work that reserves nothing
    w = t.submit("-w", "node1", "--", "true")
    wait_for(lambda: "among node1" in t.job(w)["reason"], 20, "a reason naming node1")
    assert t.job(w)["state"] == "PENDING"
    show = t.run("show", w).stdout
    assert "Where:    only on node1" in show, show
    # a free device on node3 is taken by a plain job, not by an exclusive one
    e = t.submit("--exclusive", "-x", "node2", *hold)
    wait_for(lambda: "alone on each" in t.job(e)["reason"], 20, "the exclusive job's reason")
    assert t.job(e)["state"] == "PENDING"
    # -w without -N: every node named
    g = t.submit("-w", "node[2-3]", "--", "true")
    assert t.job(g)["request"]["nodes"] == 2
    # refused, saying why
    bad = t.run("submit", "-w", "node9", "--", "true", check=False)
    assert bad.returncode == 2 and "nodelist[0]: no node node9 in this cluster" in bad.stderr
    bad = t.run("submit", "-w", "node1", "-N", "2", "--", "true", check=False)
    assert bad.returncode == 2 and "names 1 node, but the job asks for 2" in bad.stderr
    bad = t.run("submit", "-w", "node[3-1]", "--", "true", check=False)
    assert bad.returncode == 2 and "ends before it starts" in bad.stderr
    bad = t.run("submit", "-w", "node1", "-x", "node1", "--", "true", check=False)
    assert bad.returncode == 2 and "nodelist and exclude both name node1" in bad.stderr
    # a script's #SBATCH lines say the same
    script = os.path.join(workdir, "job.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n#SBATCH -w node2\n#SBATCH --exclusive\nhostname\n")
    os.chmod(script, 0o755)
    s = t.submit(script)
    req = t.job(s)["request"]
    assert req["nodelist"] == ["node2"] and req["exclusive"] is True, req
    # the gate opens: the exclusive job ends, and what waited for node1 runs
    open(gate, "w").close()
    for jid in (a, b, c, w, e, g, s):
        assert "COMPLETED" in t.run("wait", jid, timeout=60).stdout
    assert node_of(w) == "node1" and node_of(e) in ("node1", "node3")
    assert node_of(s) == "node2"
    d.stop()


def test_cancel_as_scancel(cluster):
    """tenk cancel takes scancel's forms: ranges of ids (the ids in it that
    are no job pass in silence), and -u, -t, -n filters, alone or to narrow
    the ids named."""
    t = cluster
    a1 = t.submit("-H", "-J", "alpha", "--", "true")
    b1 = t.submit("-H", "-J", "beta", "--", "true")
    a2 = t.submit("-H", "-J", "alpha", "--", "true")
    run = t.submit("-J", "alpha", "--", "sleep", "600")
    t.wait_state(run, "RUNNING")
    out = t.run("cancel", "-n", "alpha", "-t", "PENDING").stdout
    assert f"cancelled job {a1}" in out and f"cancelled job {a2}" in out, out
    states = {j: t.job(j)["state"] for j in (a1, b1, a2, run)}
    assert states == {a1: "CANCELLED", b1: "PENDING", a2: "CANCELLED", run: "RUNNING"}, states
    # a range past the last job: the ids that are jobs, and no complaint
    c1 = t.submit("-H", "--", "true")
    c2 = t.submit("-H", "--", "true")
    p = t.run("cancel", f"{c1}-{c2 + 5}")
    assert f"cancelled job {c1}" in p.stdout and f"cancelled job {c2}" in p.stdout, p.stdout
    assert t.job(c2)["state"] == "CANCELLED"
    # -u: that user's waiting and running jobs
    p = t.run("cancel", "-u", "admin")
    assert f"cancelled job {b1}" in p.stdout and f"cancelled job {run}" in p.stdout, p.stdout
    assert "no job matches" in t.run("cancel", "-u", "admin").stdout
    for bad, why in ((["cancel"], "name the jobs"), (["cancel", "9-3"], "a range is FIRST-LAST"),
                     (["cancel", "-t", "DONE"], "--state: PENDING or RUNNING")):
        p = t.run(*bad, check=False)
        assert p.returncode == 2 and why in p.stderr, (bad, p.stderr)


def test_queue_format_letters_and_start(cluster):
    """tenk queue -o takes squeue's format letters (widths, right alignment
    with a dot); --start lists waiting jobs with when each is expected to
    start: the first of its class at its reservation's time, worked out
    from the running job's time limit, the rest N/A."""
    t = cluster
    run = t.submit("-J", "big-run", "-G", "8", "-t", "30", "--", "sleep", "600")
    t.wait_state(run, "RUNNING")
    head = t.submit("-J", "next", "-G", "8", "-t", "10", "--", "true")
    later = t.submit("-J", "after", "-G", "8", "--", "true")
    started = t.job(run)["attempts"][-1]["start_ms"]
    # the pass that files the reservation comes within a few seconds
    wait_for(lambda: "expected_start_ms" in t.job(head), 20, "an expected start")
    assert abs(t.job(head)["expected_start_ms"] - (started + 30 * 60_000)) < 5_000
    assert "expected_start_ms" not in t.job(later)
    lines = t.run("queue", "-o", "%i|%j|%u|%T|%t|%l|%D|%C|%b|%P|%q|%R").stdout.splitlines()
    assert lines[0] == ("JOBID|NAME|USER|STATE|ST|TIME_LIMIT|NODES|CPUS|TRES_PER_NODE"
                        "|PARTITION|QOS|NODELIST(REASON)"), lines
    rows = {int(r.split("|")[0]): r.split("|") for r in lines[1:]}
    assert rows[run][1:11] == ["big-run", "admin", "RUNNING", "R", "30:00", "1", "1",
                               "gres/gpu:8", "default", rows[run][10]], rows[run]
    assert rows[run][11] == "node1"
    assert rows[head][3:5] == ["PENDING", "PD"] and rows[head][5] == "10:00"
    assert rows[head][11].startswith("(waiting for resources") and rows[head][11].endswith(")")
    assert rows[later][5] == "UNLIMITED"
    # widths pad and cut; a dot aligns right; %% is a percent sign
    lines = t.run("queue", "-o", "%.6A %-4j %5t %%").stdout.splitlines()
    assert lines[0] == " JOBID NAME ST    %", lines
    assert f"{run:>6} big- R     %" in lines, lines
    # squeue --start: waiting jobs only, the head's time, N/A for the rest
    lines = t.run("queue", "--start").stdout.splitlines()
    assert lines[0].split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "START_TIME",
                                "NODES", "NODELIST(REASON)"], lines
    rows = {int(r.split()[0]): r.split() for r in lines[1:]}
    assert set(rows) == {head, later}, lines
    assert rows[head][5].startswith(time.strftime("%Y-", time.localtime(started / 1000)))
    assert "T" in rows[head][5] and rows[later][5] == "N/A", rows
    for bad, why in ((["-o", "%i %Y"], '"%Y" is not a field tenk knows; the fields: %i job id'),
                     (["-o", "%.i"], "a dot (align right) needs a width"),
                     (["-o", "tall"], "table, wide, json or squeue's letters"),
                     (["--start", "-o", "wide"], "--start: prints its own columns")):
        p = t.run("queue", *bad, check=False)
        assert p.returncode == 2 and why in p.stderr, (bad, p.stderr)
    t.run("cancel", run, head, later)


def test_update_array_throttle(cluster):
    """tenk update ARRAY --array-throttle N: from then on at most N of its
    elements run at once (scontrol's ArrayTaskThrottle), every element not
    ended takes it, and the queue's line says the new cap."""
    t = cluster
    aid = t.submit("--array", "0-7%2", "--", "sleep", "60")

    def running():
        return sum(e["state"] in ("STARTING", "RUNNING") for e in elements(t, aid))

    wait_for(lambda: running() == 2, 30, "two elements running")
    time.sleep(2)  # passes come and go: the cap holds
    assert running() == 2
    out = t.run("update", str(aid), "--array-throttle", "5").stdout
    assert out.strip() == f"array {aid}: at most 5 of its elements at once (8 changed)", out
    wait_for(lambda: running() == 5, 30, "five elements running")
    time.sleep(2)
    assert running() == 5
    assert all(e["array"]["cap"] == 5 for e in elements(t, aid))
    assert f"{aid}_[5-7%5]" in t.run("queue").stdout
    # an element's id names its array; 0 lifts the cap
    out = t.run("update", f"{aid}_7", "--array-throttle", "0").stdout
    assert "no cap" in out, out
    wait_for(lambda: running() == 8, 30, "every element running")
    for bad, why in ((["--array-throttle", "x"], "an integer from 0 (no cap)"),
                     (["--array-throttle", "2", "--time", "5"], "changes alone (--time")):
        p = t.run("update", str(aid), *bad, check=False)
        assert p.returncode == 2 and why in p.stderr, (bad, p.stderr)
    single = t.submit("-H", "--", "true")
    p = t.run("update", str(single), "--array-throttle", "2", check=False)
    assert p.returncode == 2 and f"job {single} is not an array's element" in p.stderr, p.stderr
    p = t.run("submit", "--array-throttle", "2", "--", "true", check=False)
    assert p.returncode == 2 and "--array-throttle: is for tenk update" in p.stderr
    t.run("cancel", str(aid), str(single))


def test_gpus_mean_what_they_mean_in_slurm(cluster, workdir):
    """-G is the accelerators in all, on the command line as in an #SBATCH
    line (Slurm's -G/--gpus); --gpus-per-task and --gpus-per-node are
    Slurm's too. Where the reading before 0.2.0 (-G per task) would differ,
    a note says so."""
    t = cluster

    def per_task(*args, script=None):
        p = t.run("submit", "-H", *args, *(script or ["--", "true"]))
        jid = int(p.stdout)
        return t.job(jid)["request"]["gpus_per_task"], p.stderr, jid

    jobs = []
    g, note, jid = per_task("-G", "4", "-n", "2")
    jobs.append(jid)
    assert g == 2, g
    assert ("note: -G 4 is the accelerators in all, as Slurm's -G: 2 for each of 2 tasks "
            "(until 0.2.0, -G was per task: --gpus-per-task 4 for that)") in note, note
    # (noted: -G typed, more than one task)
    for args, want, noted in ((["--gpus-per-task", "4", "-n", "2"], 4, False),
                              (["--gpus", "4", "-n", "2"], 2, False),
                              (["-G", "2"], 2, False),
                              (["-G4", "--tasks-per-node", "2"], 2, True),
                              (["--gpus-per-node", "4", "--tasks-per-node", "2"], 2, False),
                              (["-G", "0.5"], 0.5, False)):
        g, note, jid = per_task(*args)
        jobs.append(jid)
        assert g == want, (args, g)
        assert ("note: -G" in note) == noted, (args, note)
    # a script's lines as sbatch reads them: -G in all, no note
    path = os.path.join(workdir, "g.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n#SBATCH -G 4\n#SBATCH --ntasks=2\ntrue\n")
    g, note, jid = per_task(script=[path])
    jobs.append(jid)
    assert g == 2 and "note" not in note, (g, note)
    p = t.run("submit", "-G", "3", "-n", "2", "--", "true", check=False)
    assert p.returncode == 2 and "--gpus 3 does not share out evenly over 2 task(s)" in p.stderr
    p = t.run("submit", "-G", "1", "-n", "2", "--", "true", check=False)
    assert p.returncode == 2 and "a fractional accelerator (0.5) is for single-node, " \
        "single-task jobs" in p.stderr, p.stderr
    t.run("cancel", *jobs)
