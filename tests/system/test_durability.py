"""Crashes: the server killed with SIGKILL at random moments loses no
acknowledged job and never starts a task twice; a restarted agent's lost
tasks are requeued; a clean restart keeps everything."""
import http.client
import os
import random
import signal
import socket
import threading
import time

from conftest import (Daemon, Tenk, alive, children, root_jobs_config, run_dirs, shim_pids, start_up,
                      wait_for)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def healthy(t):
    try:
        return t.api("GET", "/v1/health", token=None)[0] == 200
    except (OSError, http.client.HTTPException):
        return False


def start_server(workdir, data, port, procs, name="server"):
    root_jobs_config(data)
    d = Daemon(["server", "--data", data, "--listen", f"127.0.0.1:{port}",
                "--node-timeout", "60s"], workdir, name)
    procs.append(d)
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")) or not d.alive(),
             20, "the server to listen")
    assert d.alive(), d.output()
    return d


def start_agent(workdir, t, procs, name="a1", fake="8xH100"):
    d = Daemon(["agent", "--server", t.url, "--token-file", os.path.join(t.data, "agent.token"),
                "--name", name, "--fake-gpus", fake, "--stop-jobs",
                "--work-dir", os.path.join(workdir, f"agent-{name}")], workdir, f"agent-{name}")
    procs.append(d)
    return d


def test_server_sigkill_loses_nothing_acknowledged(workdir, procs):
    data = os.path.join(workdir, "data")
    port = free_port()
    server = start_server(workdir, data, port, procs)
    t = Tenk(workdir, data)
    agent = start_agent(workdir, t, procs)
    t.wait_nodes_up(1)
    runlog = os.path.join(workdir, "started.log")
    body = {"command": ["sh", "-c", f'echo "$TENK_JOB_ID $TENK_ATTEMPT" >> {runlog}; sleep 0.05'],
            "cwd": workdir, "gpus_per_task": 1}
    acked, stop = [], threading.Event()

    def submitter():
        while not stop.is_set():
            try:
                st, res = t.api("POST", "/v1/jobs", body)
            except (OSError, http.client.HTTPException):  # killed mid-answer
                time.sleep(0.01)
                continue
            if st == 201:
                acked.append(res["id"])

    th = threading.Thread(target=submitter)
    th.start()
    rnd = random.Random(7)
    kills = 0
    try:
        for _ in range(6):
            time.sleep(rnd.uniform(0.2, 0.7))
            server.kill9()
            kills += 1
            time.sleep(rnd.uniform(0.0, 0.3))
            server.start()
            wait_for(lambda: healthy(t), 20, "the restarted server")
    finally:
        stop.set()
        th.join()
    assert kills == 6 and len(acked) > 20, f"too little happened: {len(acked)} jobs"

    def all_done():
        q = t.json("queue", "--all", "--limit", "100000")
        done = {j["id"]: j for j in q["jobs"]}
        return done if all(done.get(i, {}).get("state") == "COMPLETED" for i in acked) else None
    jobs = wait_for(all_done, 120, "every acknowledged job to complete", interval=0.5)
    for i in acked:
        assert i in jobs, f"acknowledged job {i} was lost"
    starts = [tuple(map(int, line.split())) for line in open(runlog)]
    ids = [s[0] for s in starts]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    assert not dup, f"jobs started more than once: {dup}"
    for i in acked:
        assert i in ids, f"job {i} completed without running"
        assert len(jobs[i]["attempts"]) == 1
    # no job the server holds ran twice either, acknowledged or not
    assert set(ids) <= set(jobs)
    agent.stop()
    server.stop()


def test_agent_restart_keeps_its_jobs(workdir, procs):
    """An agent killed and started again finds the shim of its running
    job: the same attempt, the same process, one run to completion."""
    data = os.path.join(workdir, "data")
    server = start_server(workdir, data, free_port(), procs)
    t = Tenk(workdir, data)
    agent = start_agent(workdir, t, procs)
    t.wait_nodes_up(1)
    pidfile = os.path.join(workdir, "pid")
    go = os.path.join(workdir, "go")
    runs = os.path.join(workdir, "runs")
    jid = t.submit("-G", "8", "--", "sh", "-c",
                   f'echo $$ > {pidfile}; echo run >> {runs}; '
                   f'while [ ! -e {go} ]; do sleep 0.05; done')
    t.wait_state(jid, "RUNNING")
    wait_for(lambda: os.path.exists(pidfile), what="the task to start")
    task = int(open(pidfile).read())
    agent.kill9()
    assert os.path.exists(f"/proc/{task}"), "the task lives on in its shim"
    agent2 = start_agent(workdir, t, procs)
    wait_for(lambda: "found 1 attempt(s) an earlier agent left running" in agent2.output(),
             20, "the new agent to find the shim")
    # the server has heard the new agent (its registration is in its log)
    wait_for(lambda: "registered with" in agent2.output(), 20, "the new agent to register")
    time.sleep(1)
    j = t.job(jid)
    assert j["state"] == "RUNNING" and len(j["attempts"]) == 1, j
    assert os.path.exists(f"/proc/{task}"), "the new agent left the task alone"
    open(go, "w").close()
    t.run("wait", jid)
    j = t.job(jid)
    assert j["state"] == "COMPLETED" and len(j["attempts"]) == 1, j
    assert open(runs).read() == "run\n", "the job ran once"
    assert j["failures"] == 0
    agent2.stop()
    server.stop()


def test_clean_restart_keeps_state(workdir):
    t, d = start_up(workdir)
    # tenk up says where its web page is, with the link that logs its admin in
    wait_for(lambda: f"web:  {t.url}/#token={t.token}" in d.output(), 10, "the web link")
    done = t.submit("--", "true")
    t.run("wait", done)
    waiting = t.submit("--hold-if-impossible", "-G", "64", "--", "true")
    t.run("drain", "node1", "--reason", "maintenance")
    d.stop()
    t2, d2 = start_up(workdir)
    assert t2.job(done)["state"] == "COMPLETED"
    assert t2.job(waiting)["state"] == "PENDING"
    n = t2.json("nodes")["nodes"][0]
    assert n["state"] == "DRAINED" and n["reason"] == "maintenance"
    nxt = t2.submit("--", "true")
    assert nxt == waiting + 1, "job ids are never reused"
    # a second server on the same data folder is refused
    other = Daemon(["server", "--data", t.data, "--listen", "127.0.0.1:0"], workdir, "second")
    assert other.proc.wait(timeout=20) == 1
    assert "another tenk server is using" in other.output()
    for name in ("admin.token", "agent.token"):
        assert os.stat(os.path.join(t.data, name)).st_mode & 0o777 == 0o600
    t2.run("cancel", waiting, nxt)
    d2.stop()


def interrupt(d):
    """Ctrl-C on `tenk up`: it must stop cleanly."""
    d.proc.send_signal(signal.SIGINT)
    d.proc.wait(timeout=60)
    d.stop()


def test_ctrl_c_leaves_jobs_to_their_shims(workdir):
    t, d = start_up(workdir, stop_jobs=False)
    go, runs = os.path.join(workdir, "go"), os.path.join(workdir, "runs")
    jid = t.submit("--", "sh", "-c",
                   f'echo $$ >> {runs}; while [ ! -e {go} ]; do sleep 0.05; done')
    t.wait_state(jid, "RUNNING")
    wait_for(lambda: os.path.exists(runs), what="the task to start")
    task = int(open(runs).read())
    interrupt(d)
    assert "1 attempt(s) go on in their shims" in d.output()
    assert alive(task), "the job goes on while tenk is down"
    t2, d2 = start_up(workdir)
    j = t2.job(jid)
    assert j["state"] == "RUNNING" and len(j["attempts"]) == 1, j
    open(go, "w").close()
    t2.run("wait", jid)
    j = t2.job(jid)
    assert j["state"] == "COMPLETED" and len(j["attempts"]) == 1, j
    assert open(runs).read().split() == [str(task)], "it ran once"
    d2.stop()


def argv_of(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode() for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def ppid_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def launchers(agent_pid):
    return [k for k in children(agent_pid) if argv_of(k)[:2] == ["tenk-shim", "--launcher"]]


def test_shims_come_from_a_launcher_that_may_die(workdir):
    """The agent has its shims forked by a resident launcher (cheaper than
    starting a program): each shim reads as `tenk-shim DIR`, in a session
    of its own, its folder in the agent's run folder in memory. The launcher
    killed takes no job with it and is started again for the next shim; the
    agent's stop ends it."""
    t, d = start_up(workdir)
    go, pidfile = os.path.join(workdir, "go"), os.path.join(workdir, "pid")
    held = t.submit("--", "sh", "-c",
                    f'echo $$ > {pidfile}; while [ ! -e {go} ]; do sleep 0.05; done')
    t.wait_state(held, "RUNNING")
    wait_for(lambda: os.path.exists(pidfile) and open(pidfile).read().strip(), 20,
             "the task to start")
    task = int(open(pidfile).read())
    first = launchers(d.proc.pid)
    assert len(first) == 1, [argv_of(k) for k in children(d.proc.pid)]
    shims = shim_pids(workdir)
    assert len(shims) == 1, shims
    shim = shims[0]
    assert ppid_of(shim) == first[0], "the launcher forked it"
    assert os.getsid(shim) == shim, "a session of its own"
    runs = run_dirs(workdir)
    assert len(runs) == 1 and runs[0].startswith(("/run/tenk/", "/dev/shm/tenk/")), runs
    assert argv_of(shim) == ["tenk-shim", os.path.join(runs[0], "shims", f"{held}.1")]
    os.kill(first[0], signal.SIGKILL)
    wait_for(lambda: first[0] not in children(d.proc.pid), 10, "the agent to reap its launcher")
    assert alive(task) and alive(shim), "the launcher's end is not the job's"
    quick = t.submit("--", "true")
    t.run("wait", quick)
    assert t.job(quick)["state"] == "COMPLETED"
    again = launchers(d.proc.pid)
    assert len(again) == 1 and again != first, again
    assert "the shims' launcher exited" in d.output()
    open(go, "w").close()
    t.run("wait", held)
    j = t.job(held)
    assert j["state"] == "COMPLETED" and len(j["attempts"]) == 1, j
    d.stop()
    wait_for(lambda: not alive(again[0]), 10, "the launcher to end with the agent")
    assert not os.path.exists(runs[0]), "the run folder goes with the agent, empty"


def test_an_upgraded_agent_finds_shims_in_the_work_folder(workdir):
    """Agents before the run folder in memory kept their shims in the work
    folder (as --run-dir WORK does): one that starts without --run-dir
    finds them there, and its next start goes to memory."""
    work = os.path.join(workdir, "tenk-data-work")
    t, d = start_up(workdir, "--run-dir", work, stop_jobs=False)
    go, runs = os.path.join(workdir, "go"), os.path.join(workdir, "runs")
    jid = t.submit("--", "sh", "-c",
                   f'echo $$ >> {runs}; while [ ! -e {go} ]; do sleep 0.05; done')
    t.wait_state(jid, "RUNNING")
    wait_for(lambda: os.path.exists(runs), what="the task to start")
    assert os.listdir(os.path.join(work, "shims")) == [f"{jid}.1"]
    interrupt(d)
    t2, d2 = start_up(workdir)
    wait_for(lambda: "found 1 attempt(s) an earlier agent left running" in d2.output(), 20,
             "the new agent to find the shim")
    assert not os.path.islink(os.path.join(work, "run")), "the work folder, this time"
    open(go, "w").close()
    t2.run("wait", jid)
    j = t2.job(jid)
    assert j["state"] == "COMPLETED" and len(j["attempts"]) == 1, j
    assert len(open(runs).read().split()) == 1, "it ran once"
    d2.stop()
    t3, d3 = start_up(workdir)
    assert os.path.islink(os.path.join(work, "run")), "memory, once the old shims are gone"
    d3.stop()


def test_stop_jobs_requeues_rather_than_fails(workdir):
    t, d = start_up(workdir)  # --stop-jobs
    runs = os.path.join(workdir, "runs")
    jid = t.submit("--requeue", "0", "--", "sh", "-c",
                   f'echo $$ >> {runs}; test "$TENK_ATTEMPT" = 2 || sleep 300')
    t.wait_state(jid, "RUNNING")
    wait_for(lambda: os.path.exists(runs), what="the task to start")
    task = int(open(runs).read())
    interrupt(d)
    assert not alive(task), "--stop-jobs ends the job's tasks"
    t2, d2 = start_up(workdir)
    t2.run("wait", jid, timeout=60)
    j = t2.job(jid)
    assert j["state"] == "COMPLETED" and len(j["attempts"]) == 2, j
    assert j["attempts"][0]["reason"] == "node node1 lost: its agent stopped with --stop-jobs", \
        j["attempts"][0]
    assert j["failures"] == 0
    d2.stop()


def test_shim_sigkill_rounds_never_overlap_attempts(workdir):
    """Crash rounds of the shims, the agent and server alive: each killed
    attempt's tasks end before it is told over, so a job's next attempt
    never runs beside its last (each holds the job's lock, and the next
    one that cannot take it says so), and every job completes."""
    from conftest import shim_pids
    t, d = start_up(workdir)
    try:
        log = os.path.join(workdir, "runs.log")
        body = ('flock -n "$0/lock-$TENK_JOB_ID" sh -c \'echo "$TENK_JOB_ID $TENK_ATTEMPT '
                'start" >> "$1"; sleep 2.5\' inner "$1" || echo "$TENK_JOB_ID $TENK_ATTEMPT '
                'OVERLAP" >> "$1"')
        ids = [t.submit("-G", "1", "--", "sh", "-c", body, workdir, log) for _ in range(24)]
        rnd = random.Random(11)
        kills = 0
        hit = {}  # job id -> its shims killed: fewer than the server's 5 lost nodes

        def job_of(pid):  # its folder is WORK/shims/JOB.ATTEMPT
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    return int(os.path.basename(f.read().split(b"\0")[1]).split(b".")[0])
            except (OSError, IndexError, ValueError):
                return None
        # rounds while the jobs run (24 of 2.5 s on 8 devices), from their
        # first shim on, until 8 shims were killed (bounded in rounds and
        # time: a killed attempt's devices stay fenced until its lease ends,
        # so under load there may be no shim to kill for seconds)
        wait_for(lambda: shim_pids(workdir), 30, "the first shims")
        deadline = time.monotonic() + 30
        for _ in range(120):
            if kills >= 8 or time.monotonic() > deadline:
                break
            time.sleep(rnd.uniform(0.2, 0.5))
            for _ in range(3):  # (a shim may end by itself between list and kill)
                shims = [p for p in shim_pids(workdir) if hit.get(job_of(p), 0) < 3]
                if not shims:
                    break
                pid = rnd.choice(shims)
                job = job_of(pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                    kills += 1
                    hit[job] = hit.get(job, 0) + 1
                    break
                except ProcessLookupError:
                    continue
        assert kills >= 6, kills

        def all_done():
            jobs = [t.job(i) for i in ids]
            bad = [(j["id"], j["state"], j["reason"]) for j in jobs
                   if j["state"] not in ("PENDING", "STARTING", "RUNNING", "COMPLETED")]
            assert not bad, bad
            return all(j["state"] == "COMPLETED" for j in jobs) or None
        wait_for(all_done, 120, "every job to complete", interval=0.5,
                 show=lambda: {i: (t.job(i)["state"], t.job(i)["reason"]) for i in ids})
        runs = [line.split() for line in open(log)]
        assert not [r for r in runs if r[2] == "OVERLAP"], runs
        again = [i for i in ids if len(t.job(i)["attempts"]) > 1]
        assert again, "no shim's job was requeued: the rounds killed nothing that ran"
        for i in again:
            assert t.job(i)["attempts"][0]["end"] == "node_lost"
    finally:
        d.stop()


def test_removed_wal_stops_the_server_and_loses_nothing(workdir, procs):
    """`rm DATA/tenk.db-wal` under a running server (the restore steps
    done in the wrong order): the next write finds it, saves what the
    removed file held into the database, and the server stops, loudly;
    nothing it acknowledged is lost across a kill, and no id is reused."""
    data = os.path.join(workdir, "data")
    port = free_port()
    server = start_server(workdir, data, port, procs)
    t = Tenk(workdir, data)
    acked = [t.submit("--hold", "--", "true") for _ in range(5)]
    os.remove(os.path.join(data, "tenk.db-wal"))
    for _ in range(3):
        try:
            st, res = t.api("POST", "/v1/jobs", {"command": ["true"], "cwd": "/tmp"})
        except (OSError, http.client.HTTPException):
            continue  # the server went
        if st == 201:
            acked.append(res["id"])
    wait_for(lambda: not server.alive(), 20, "the server to stop")
    assert "tenk.db-wal was removed while the server ran" in server.output(), server.output()
    assert len(acked) == 5, acked  # nothing more was acknowledged
    server.start()
    wait_for(lambda: healthy(t), 20, "the restarted server")
    for i in acked:
        assert t.job(i)["id"] == i
    new = t.submit("--hold", "--", "true")
    assert new > max(acked) + 1, (new, acked)  # the one written but not told stays
    server.stop()


def test_a_store_that_goes_back_never_gives_an_id_twice(workdir, procs):
    """The store restored from a copy older than the jobs it acknowledged
    since (or a journal lost with its tail): the ids reserved in
    DATA/tenk.ids are past every id given, so none is given again; a clean
    stop gives back what it reserved, so ids go on one after another."""
    data = os.path.join(workdir, "data")
    port = free_port()
    server = start_server(workdir, data, port, procs)
    t = Tenk(workdir, data)
    first = [t.submit("--hold", "--", "true") for _ in range(3)]
    server.stop()
    assert open(os.path.join(data, "tenk.ids")).read() == f"reserved {first[-1]}\n"
    old = open(os.path.join(data, "tenk.db"), "rb").read()
    server.start()
    wait_for(lambda: healthy(t), 20, "the restarted server")
    later = [t.submit("--hold", "--", "true") for _ in range(5)]
    assert later == list(range(first[-1] + 1, first[-1] + 6)), (first, later)
    server.kill9()
    # the operator restores the old copy
    for name in ("tenk.db-wal", "tenk.db-shm"):
        if os.path.exists(os.path.join(data, name)):
            os.remove(os.path.join(data, name))
    with open(os.path.join(data, "tenk.db"), "wb") as f:
        f.write(old)
    server.start()
    wait_for(lambda: healthy(t), 20, "the server on the old store")
    new = t.submit("--hold", "--", "true")
    assert new > max(later), (new, later)
    assert "were reserved before the last stop" in server.output(), server.output()
    st, res = t.api("GET", f"/v1/jobs/{max(later)}")
    assert st == 404, (st, res)  # lost with the copy, and its id not given again
    server.stop()
