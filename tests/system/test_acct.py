"""Accounting through the real server and an agent on NVML (tests/gpushim):
one record per attempt (a preempted-then-finished job has two), cost as the
catalogue's price times GPU-hours, energy as the difference of the cards'
energy counters over the attempt, and `tenk usage` adding up to the
records; and a queue's budget, once spent, holds its new jobs (saying why
in `tenk queues` and the job's reason) while running ones go on."""
import json
import os
import re

from conftest import BIN, Daemon, Tenk, root_jobs_config, wait_for

SHIM = os.path.join(os.path.dirname(BIN), "tests", "gpushim")
PRICE = 360.0  # per H100-hour: one GPU-second costs 0.1


def test_records_cost_energy_and_usage(workdir, procs):
    data = os.path.join(workdir, "data")
    root_jobs_config(data, currency="EUR")
    cat = os.path.join(workdir, "catalogue.json")
    with open(cat, "w") as f:
        json.dump({"models": [{"name": "H100", "price_per_hour": PRICE}]}, f)
    s = Daemon(["server", "--data", data, "--listen", "127.0.0.1:0", "--catalogue", cat],
               workdir, "server")
    procs.append(s)
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")), 20, "the server")
    t = Tenk(workdir, data)
    nvml = os.path.join(workdir, "nvml")
    with open(nvml, "w") as f:
        f.write("0 energy_mj 1000000\n1 energy_mj 2000000\n")
    env = {"LD_LIBRARY_PATH": SHIM, "TENK_FAKE_GPUS": "2", "TENK_FAKE_NVML_FILE": nvml}
    procs.append(Daemon(["agent", "--server", t.url, "--token-file",
                         os.path.join(data, "agent.token"), "--name", "n1", "--work-dir",
                         os.path.join(workdir, "w1"), "--metrics-listen", "none"],
                        workdir, "agent", env=env))
    t.wait_nodes_up(1)

    # a batch job on both cards; its first attempt runs until preempted
    batch = t.submit("--class", "batch", "-G", "2", "--grace", "2s", "--", "sh", "-c",
                     '[ "$TENK_ATTEMPT" -ge 2 ] || exec sleep 600')
    t.wait_state(batch, "RUNNING")
    with open(nvml, "w") as f:  # the cards used 3 kJ and 1 kJ meanwhile
        f.write("0 energy_mj 4000000\n1 energy_mj 3000000\n")
    prod = t.submit("--class", "prod", "-G", "2", "--", "sleep", "1")
    assert t.run("wait", prod, timeout=60).returncode == 0
    wait_for(lambda: t.job(batch)["state"] == "COMPLETED", 60, "the batch job to finish")

    acct = t.json("acct", "-D")
    assert acct["currency"] == "EUR"
    recs = {(r["job_id"], r["attempt"]): r for r in acct["records"]}
    assert set(recs) == {(batch, 1), (batch, 2), (prod, 1)}, recs.keys()
    first, second = recs[(batch, 1)], recs[(batch, 2)]
    assert first["state"] == "PREEMPTED" and second["state"] == "COMPLETED", acct
    assert recs[(prod, 1)]["state"] == "COMPLETED"
    for r in acct["records"]:
        assert r["gpus"] == 2 and r["gpu_model"] == "H100" and r["nodelist"] == "n1", r
        # cost is the price times GPU-hours, exactly (no CPU or memory rates)
        assert abs(r["cost"] - PRICE * r["gpus"] * r["elapsed_s"] / 3600) < 1e-9, r
        assert abs(r["gpu_hours"] - r["gpus"] * r["elapsed_s"] / 3600) < 1e-12, r
    assert first["elapsed_s"] > 0 and first["cost"] > 0
    assert first["energy_j"] == 4000.0, first  # 3 kJ + 1 kJ, the counters' difference
    assert second["energy_j"] == 0.0 and recs[(prod, 1)]["energy_j"] == 0.0
    per_kwh = first["gpu_hours"] / (4000 / 3.6e6)
    assert abs(first["gpu_hours_per_kwh"] - per_kwh) <= 1e-12 * per_kwh, first

    # without -D: each job's newest attempt; -P: sacct's parsable form
    newest = t.json("acct")["records"]
    assert sorted((r["job_id"], r["attempt"]) for r in newest) == [(batch, 2), (prod, 1)]
    lines = t.run("acct", "-D", "-P", "-o", "JobID,Attempt,State,ExitCode,AllocGPUs,"
                  "ConsumedEnergy").stdout.splitlines()
    assert lines[0] == "JobID|Attempt|State|ExitCode|AllocGPUs|ConsumedEnergy"
    assert f"{batch}|1|PREEMPTED|0:15|2|4000.0J" in lines and \
        f"{batch}|2|COMPLETED|0:0|2|0.0J" in lines, lines
    only = t.json("acct", "-D", "--state", "PREEMPTED")["records"]
    assert [(r["job_id"], r["attempt"]) for r in only] == [(batch, 1)]
    p = t.run("acct", "-o", "JobID,Nope", check=False)
    assert p.returncode == 2 and '--format: no field "Nope"' in p.stderr
    p = t.run("acct", "-S", "yesterdayish", check=False)
    assert p.returncode == 2 and "--starttime: expected" in p.stderr

    # usage adds up to the records
    u = t.json("usage", "--by", "user", "--from", "now-1h")
    tot = u["total"]
    assert abs(tot["gpu_hours"] - sum(r["gpu_hours"] for r in acct["records"])) < 1e-9, u
    assert abs(tot["cost"] - sum(r["cost"] for r in acct["records"])) < 1e-9, u
    assert tot["energy_j"] == 4000.0 and tot["attempts"] == 3
    assert [g["name"] for g in u["groups"]] == ["admin"] and u["gpus"] == 2
    assert abs(tot["idle_gpu_hours"] - (tot["capacity_gpu_hours"] - tot["gpu_hours"])) < 1e-9
    out = t.run("usage", "--unit", "cost").stdout
    assert "TOTAL" in out and "costs in EUR" in out, out
    p = t.run("usage", "--by", "planet", check=False)
    assert p.returncode == 2 and "--by: queue, user, model or service" in p.stderr

    # an array's elements are ARRAY_INDEX, as in sacct; costs name their currency
    arr = t.submit("--array", "0-1", "--", "true")
    assert t.run("wait", arr, timeout=60).returncode == 0
    lines = t.run("acct", "-P", "-o", "JobID,JobIDRaw,ArrayJobID,ArrayTaskID,State").stdout
    lines = lines.splitlines()
    assert lines[0] == "JobID|JobIDRaw|ArrayJobID|ArrayTaskID|State", lines
    assert f"{arr}_0|{arr}|{arr}|0|COMPLETED" in lines, lines
    assert f"{arr}_1|{arr + 1}|{arr}|1|COMPLETED" in lines, lines
    assert f"{batch}|{batch}|||COMPLETED" in lines, lines
    assert [r["array"] for r in t.json("acct")["records"] if r["job_id"] == arr + 1] == \
        [{"job": arr, "index": 1}]
    table = t.run("acct").stdout
    assert table.splitlines()[-1] == "costs in EUR", table
    assert f"{arr}_1 " in table, table
    assert "costs in" not in t.run("acct", "-P").stdout

    # a budget smaller than what the queue spent today: new jobs wait
    spent = tot["cost"]
    assert spent > 0.05, spent
    t.run("queues", "set", "default", "--budget", "0.05/day")
    q = [x for x in t.json("queues")["queues"] if x["name"] == "default"][0]
    assert q["budget"] == {"amount": 0.05, "period": "day"} and q["budget_state"] == "spent", q
    out = t.run("queues").stdout
    assert "SPENT: new jobs wait" in out and " EUR/day SPENT" in out, out
    st, m = t.api("GET", "/metrics")
    assert st == 200 and 'tenk_queue_budget_state{queue="default",period="day"} 2' in m, m
    held = t.submit("--", "true")
    # (the sum may move by a rounding when a job leaves memory for its
    # records, which keep what the API showed)
    why = re.compile(r"budget of queue default spent: ([0-9.]+) of 0\.05 today")
    m = wait_for(lambda: why.search(t.job(held)["reason"]), 20, "the job held by the budget",
                 show=lambda: (t.job(held)["state"], t.job(held)["reason"], t.json("queues")))
    assert abs(float(m.group(1)) - q["spent"]) < 0.011, (m.group(0), q)
    assert t.job(held)["state"] == "PENDING"
    p = t.run("queues", "set", "default", "--budget", "lots", check=False)
    assert p.returncode == 2 and "--budget: AMOUNT/day, /week or /month" in p.stderr
    t.run("queues", "set", "default", "--budget", "1000/month")
    assert t.run("wait", held, timeout=60).returncode == 0


def test_attempt_state_comes_from_why_it_ended_not_its_words(cluster):
    """A requeue by a user whose name reads "lost" is a requeue, not a lost
    node: accounting classes an attempt by its end cause, never by the
    words of its reason (which hold user names and tasks' details)."""
    t = cluster
    p = t.run("users", "add", "lost-preempted", "--unix-user", "nobody", "--json")
    env = dict(t.env(), TENK_TOKEN=json.loads(p.stdout)["token"])
    jid = int(t.run("submit", "-D", "/tmp", "-o", "/dev/null", "--", "sleep", "600",
                    env=env).stdout)
    t.wait_state(jid, "RUNNING")
    t.run("requeue", str(jid), env=env)
    wait_for(lambda: t.job(jid)["state"] == "RUNNING" and len(t.job(jid)["attempts"]) == 2,
             60, "the job's second attempt")
    first = t.job(jid)["attempts"][0]
    assert first["end"] == "requeued" and first["reason"] == "requeued by lost-preempted", first
    t.run("cancel", str(jid), env=env)
    wait_for(lambda: t.job(jid)["attempts"][1].get("end") == "cancelled", 30,
             "the second attempt's end")
    recs = {r["attempt"]: r for r in t.json("acct", "-D")["records"] if r["job_id"] == jid}
    assert recs[1]["state"] == "REQUEUED" and recs[2]["state"] == "CANCELLED", recs


def test_exit_is_the_first_failing_tasks(cluster):
    """A gang whose rank 1 exits 1 and whose rank 0 is then stopped
    (SIGTERM): the job's exit, in tenk show and in accounting alike, is
    rank 1's 1, not rank 0's signal."""
    t = cluster
    jid = t.submit("--tasks-per-node", "2", "--requeue", "0", "--", "sh", "-c",
                   'if [ "$RANK" = 1 ]; then sleep 0.3; exit 1; fi; sleep 600')
    t.wait_state(jid, "FAILED", 60)
    # (the job fails with rank 1; rank 0's stop is heard a moment after)
    j = wait_for(lambda: (lambda x: x if x["attempts"][0]["tasks"][0]["end_ms"] else None)(
        t.job(jid)), 30, "rank 0's end")
    assert j["exit_code"] == 1, j
    tasks = j["attempts"][0]["tasks"]
    assert tasks[0]["signal"] == 15 and tasks[1]["exit_code"] == 1, tasks
    lines = t.run("acct", "-P", "-o", "JobID,State,ExitCode").stdout.splitlines()
    assert f"{jid}|FAILED|1:0" in lines, lines
    assert "exit 1" in t.run("show", jid).stdout or "code 1" in t.run("show", jid).stdout
    # a cluster minutes old has had minutes of capacity, not a day's
    u = t.json("usage", "--from", "now-1d")
    assert u["gpus"] == 8 and 0 < u["total"]["capacity_gpu_hours"] < 8 * 0.5, u
