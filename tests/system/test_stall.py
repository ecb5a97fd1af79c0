"""Stalled jobs: a running job that wrote training lines ($TENK_METRICS)
and then none for its --stall-after is STALLED, with the evidence in tenk
show, tenk queue and /metrics (tenk_job_stalled 1); a line after ends it.
With --on-stall requeue its attempt is stopped and the job restarts from
its last checkpoint; with --on-stall cancel it is cancelled. The three
jobs run side by side."""
import os
import re
import time

from conftest import BIN, Daemon, Tenk, root_jobs_config, server_and_agent, wait_for


def stalled_metric(t, jid):
    """tenk_job_stalled of job jid in the server's /metrics (None: absent)."""
    st, text = t.api("GET", "/metrics")
    assert st == 200
    m = re.search(r'^tenk_job_stalled\{job_id="%d",[^}]*\} (\S+)$' % jid, text, re.M)
    return float(m.group(1)) if m else None


def test_stalled_said_then_requeued_and_cancelled(workdir, procs):
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    t, server, agent = server_and_agent(workdir, procs, "6s", admin_unix_user="root",
                                        checkpoint_store=store)
    lines = 'for i in $(seq {a} {b}); do echo "step=$i loss=0.5" >> $TENK_METRICS; sleep 0.1; done'
    go = os.path.join(workdir, "go")
    # notify: steps, then quiet until the test says go, then a step again
    quiet = t.submit("--stall-after", "2s", "--", "sh", "-c",
                     lines.format(a=1, b=10) + f"; while [ ! -e {go} ]; do sleep 0.1; done; " +
                     lines.format(a=11, b=11) + "; sleep 600")
    # requeue: attempt 2 restores the checkpoint attempt 1 committed
    script = (
        'C=$TENK_CHECKPOINT_DIR; echo "attempt=$TENK_ATTEMPT tag=[$TENK_RESTORE_TAG]"; '
        'if [ "$TENK_ATTEMPT" = 1 ]; then '
        f'mkdir -p $C/step-5 && echo w > $C/step-5/w.bin && {BIN} ckpt commit step-5 --step 5 '
        f'&& while [ ! -s {store}/$TENK_JOB_ID/step-5/a1/n0/manifest.json ]; do sleep 0.1; done; '
        + lines.format(a=1, b=5) + '; sleep 600; fi; ' + lines.format(a=6, b=8))
    requeued = t.submit("--stall-after", "2s", "--on-stall", "requeue", "--", "sh", "-c", script)
    # cancel
    gone = t.submit("--stall-after", "2s", "--on-stall", "cancel", "--", "sh", "-c",
                    lines.format(a=1, b=3) + "; sleep 600")

    wait_for(lambda: "stalled" in t.job(quiet), 30, "the job stalled")
    s = t.job(quiet)["stalled"]
    assert s["on_stall"] == "notify" and s["last_step"] == 10 and s["window_s"] == 2, s
    assert s["why"].startswith("no training line for ") and "(step 10)" in s["why"], s
    assert t.job(quiet)["state"] == "RUNNING"
    show = t.run("show", quiet).stdout
    assert "STALLED:  no training line for" in show and "on stall: notify" in show, show
    assert re.search(r"^%d\s.*STALLED" % quiet, t.run("queue").stdout, re.M)
    assert stalled_metric(t, quiet) == 1
    # a line again: no longer stalled
    open(go, "w").close()
    wait_for(lambda: "stalled" not in t.job(quiet), 30, "the stall over")
    assert stalled_metric(t, quiet) == 0
    assert t.job(quiet)["state"] == "RUNNING" and len(t.job(quiet)["attempts"]) == 1
    t.run("cancel", quiet)

    p = t.run("wait", requeued, check=False, timeout=90)
    job = t.job(requeued)
    assert p.returncode == 0 and job["state"] == "COMPLETED", (job, server.output()[-3000:])
    assert len(job["attempts"]) == 2
    first = job["attempts"][0]
    assert first["reason"].startswith("requeued by tenk: stalled, no training line"), first
    out = open(os.path.join(workdir, f"tenk-{requeued}.out")).read()
    assert "attempt=1 tag=[]" in out and "attempt=2 tag=[step-5]" in out, out

    wait_for(lambda: t.job(gone)["state"] == "CANCELLED", 30, "the stalled job cancelled")
    assert t.job(gone)["reason"].startswith("stalled: no training line"), t.job(gone)
    # bad input is named
    p = t.run("submit", "--on-stall", "kill", "--", "true", check=False)
    assert p.returncode != 0 and "--on-stall: must be notify, requeue or cancel" in p.stderr
    agent.stop()
    server.stop()


def test_the_slow_rank_is_named_the_straggler(workdir, procs):
    """A 4-rank job whose rank 2 sleeps longer between steps: rank 2 and its
    node are named; then the job stalls, and the stall says which rank
    stopped first."""
    t, server, agent = server_and_agent(workdir, procs, "6s", admin_unix_user="root")
    # ranks 0 and 3: 25 steps of 0.2 s; rank 1 stops after 10 (its newest
    # lines read at steady state, not all in the first read); rank 2: 8 of 1 s
    script = ('n=25; [ "$RANK" = 1 ] && n=10; [ "$RANK" = 2 ] && n=8; '
              'for i in $(seq 1 $n); do echo "step=$i rank=$RANK loss=1" >> $TENK_METRICS; '
              'if [ "$RANK" = 2 ]; then sleep 1; else sleep 0.2; fi; done; sleep 600')
    jid = t.submit("--tasks-per-node", "4", "--stall-after", "3s", "--", "sh", "-c", script)
    s = wait_for(lambda: t.job(jid).get("straggler"), 40, "a straggler named")
    assert s["rank"] == 2 and s["node"] == "n1", s
    assert s["step_s"] > 1.5 * s["median_s"], s
    assert "Straggler: rank 2 on n1" in t.run("show", jid).stdout
    st, text = t.api("GET", "/metrics")
    assert re.search(r'^tenk_job_straggler\{job_id="%d",rank="2",node="n1"\} 1$' % jid, text,
                     re.M), text[-2000:]
    # when rank 2's lines end too, the job stalls: rank 1 stopped first
    st = wait_for(lambda: t.job(jid).get("stalled"), 60, "the job stalled")
    assert "rank 1 on n1 stopped first" in st["why"], st
    t.run("cancel", jid)
    agent.stop()
    server.stop()


def test_idle_gpus_stall_a_job(workdir, procs):
    """A job that holds two accelerators and writes no lines: busy (the
    NVML stand-in says 90%), it is not judged; both under 5% for its
    --stall-after, it is STALLED with the GPUs named; one busy again, the
    stall is over. A job that stops its lines while its GPUs sit idle says
    both."""
    data = os.path.join(workdir, "data")
    nvml = os.path.join(workdir, "nvml")
    with open(nvml, "w") as f:
        f.write("0 util 90\n1 util 90\n")
    root_jobs_config(data, admin_unix_user="root")
    server = Daemon(["server", "--data", data, "--listen", "127.0.0.1:0", "--node-timeout",
                     "6s"], workdir, "server")
    procs.append(server)
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")), 20, "the server")
    t = Tenk(workdir, data)
    shim = os.path.join(os.path.dirname(BIN), "tests", "gpushim")
    agent = Daemon(["agent", "--server", t.url, "--token-file", os.path.join(data, "agent.token"),
                    "--name", "n1", "--work-dir", os.path.join(workdir, "w"), "--stop-jobs"],
                   workdir, "agent", env={"LD_LIBRARY_PATH": shim, "TENK_FAKE_GPUS": "2",
                                          "TENK_FAKE_NVML_FILE": nvml})
    procs.append(agent)
    t.wait_nodes_up(1)
    jid = t.submit("-G", "2", "--stall-after", "2s", "--", "sleep", "600")
    t.wait_state(jid, "RUNNING")
    # the node's accelerators as the agent read them, in the API and -o wide
    n = wait_for(lambda: (lambda n: n if n.get("gpus") else None)(t.json("nodes")["nodes"][0]),
                 20, "the node's GPUs")
    assert [(g["index"], g["util_pct"], g["failing"]) for g in n["gpus"]] == \
        [(0, 90, []), (1, 90, [])], n["gpus"]
    wide = t.run("nodes", "-o", "wide").stdout
    assert re.search(r"^n1\s+\S+\s.*\s90%\s+35C\s+140/1400\s+ok\b", wide, re.M), wide
    time.sleep(4)
    assert "stalled" not in t.job(jid), t.job(jid)
    assert stalled_metric(t, jid) == 0

    with open(nvml, "w") as f:
        f.write("0 util 1\n1 util 3\n")
    s = wait_for(lambda: t.job(jid).get("stalled"), 30, "the job stalled")
    assert re.fullmatch(r"GPUs 0-1 on n1 under 5% for \S+ \(at most 3%\)", s["why"]), s
    assert s["on_stall"] == "notify" and s["window_s"] == 2, s
    assert "STALLED:  GPUs 0-1 on n1 under 5%" in t.run("show", jid).stdout
    assert stalled_metric(t, jid) == 1
    with open(nvml, "w") as f:
        f.write("0 util 60\n1 util 3\n")
    wait_for(lambda: "stalled" not in t.job(jid), 30, "the stall over")
    assert "its accelerators work again" in server.output()
    t.run("cancel", jid)

    # lines that stop, then the GPUs go idle (the job tells the stand-in, a
    # few seconds later, so that the lines' window, from their arrival, ends
    # first): both said
    with open(nvml, "w") as f:
        f.write("0 util 90\n1 util 90\n")
    jid = t.submit("-G", "1", "--stall-after", "5s", "--", "sh", "-c",
                   'for i in 1 2 3; do echo "step=$i loss=1" >> $TENK_METRICS; sleep 0.2; done; '
                   f'sleep 2.5; printf "0 util 0\\n1 util 0\\n" > {nvml}; sleep 600')
    s = wait_for(lambda: t.job(jid).get("stalled"), 30, "the job stalled")
    assert s["why"].startswith("no training line for ") and \
        re.search(r"; GPUs \d on n1 under 5% for ", s["why"]), s
    t.run("cancel", jid)
    agent.stop()
    server.stop()
