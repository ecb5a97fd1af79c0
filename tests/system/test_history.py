"""Finished jobs leave the server's memory and the store answers for them: a
job settled (final, every attempt ended) longer than --keep-finished is let
go once its row is durable, and a restart reads only the jobs not settled.
Each is still shown, listed, counted, accounted and depended on as before."""
import json
import os
import re
import sqlite3
import time

from conftest import start_up, wait_for


def sample(text, name, **labels):
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    m = re.search(r"^" + re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else "")
                  + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def metrics(t):
    status, text = t.api("GET", "/metrics")
    assert status == 200, text
    return text


def in_memory(t):
    return sample(metrics(t), "tenk_jobs_in_memory")


def ids_listed(t, query):
    status, ans = t.api("GET", "/v1/jobs?" + query)
    assert status == 200, ans
    return [j["id"] for j in ans["jobs"]], ans["total"], ans["next"]


def default_spent(t):
    return [q for q in t.json("queues")["queues"] if q["name"] == "default"][0]["spent"]


def test_settled_jobs_leave_memory_and_are_still_answered(workdir):
    t, d = start_up(workdir, "--keep-finished", "0")
    try:
        ok = t.submit("-G", "1", "--", "sleep", "0.2")
        bad = t.submit("-G", "1", "--", "sh", "-c", "sleep 0.2; exit 1")
        arr = t.submit("--array", "3,5,7", "--", "true")
        gone_early = t.submit("--hold", "--", "true")
        t.run("cancel", gone_early)
        # enough jobs out of memory that reading them back takes an
        # accounting scan several of the loop's slices
        many = t.submit("--array", "0-1999", "--hold", "--", "true")
        t.run("cancel", many)
        for j in (ok, bad, arr, gone_early):
            t.run("wait", str(j), check=False, timeout=60)
        before = {j: t.job(j) for j in (ok, bad, arr + 1, gone_early)}
        status, acct_before = t.api("GET", "/v1/accounting?from=1&all=1")
        assert status == 200 and len(acct_before["records"]) >= 5, acct_before
        # every job here settled: they all leave memory (the array's first
        # element stays: it counts its elements)
        wait_for(lambda: in_memory(t) == 2, 20, "the settled jobs to leave memory")
        text = metrics(t)
        assert sample(text, "tenk_jobs", state="COMPLETED") == 4, text
        assert sample(text, "tenk_jobs", state="FAILED") == 1
        assert sample(text, "tenk_jobs", state="CANCELLED") == 2001
        # shown as before, read back from the store
        for j, was in before.items():
            now = t.job(j)
            assert now["state"] == was["state"] and now["attempts"] == was["attempts"] and \
                now["request"] == was["request"], (now, was)
        assert t.job(f"{arr}_5")["array"]["index"] == 5
        status, ans = t.api("GET", f"/v1/jobs/{arr}_6")
        assert status == 404 and f"array {arr} has no index 6" in ans["error"], ans
        # listed in id order, by state and owner, paged
        assert ids_listed(t, "state=COMPLETED&limit=100")[0:2] == \
            ([ok, arr, arr + 1, arr + 2], 4)
        assert ids_listed(t, "state=FAILED,CANCELLED&limit=3") == \
            ([bad, gone_early, many], 2002, many)
        assert ids_listed(t, "limit=2&after=" + str(bad)) == ([arr, arr + 1], 2006, arr + 1)
        assert ids_listed(t, f"array={many}&limit=1&after={many + 1500}") == \
            ([many + 1501], 2000, many + 1501)
        assert ids_listed(t, f"array={arr}")[0:2] == ([arr, arr + 1, arr + 2], 3)
        assert ids_listed(t, "user=nobody-here")[0:2] == ([], 0)
        # accounted for as before
        status, acct = t.api("GET", "/v1/accounting?from=1&all=1")
        assert status == 200 and acct["records"] == acct_before["records"], \
            (acct["records"], acct_before["records"])
        status, usage = t.api("GET", "/v1/usage?by=user&from=1")
        assert status == 200 and usage["groups"][-1]["attempts"] == len(acct["records"]), usage
        # and in their queue's budget: what they spent today is summed back
        spent = sum(r["cost"] for r in acct["records"])
        assert spent > 0, acct["records"]
        t.run("queues", "set", "default", "--budget", "1000/day")
        assert abs(default_spent(t) - spent) <= 1e-9 * spent, (default_spent(t), spent)
        # depended on: one that completed, one that failed, one never started
        after_ok = t.submit("--after", f"{ok}:ok", "--", "true")
        after_bad = t.submit("--after", f"{bad}:ok", "--", "true")
        after_start = t.submit("-d", f"after:{gone_early}", "--", "true")
        after_arr = t.submit("-d", f"afterok:{arr}", "--", "true")
        assert t.wait_state(after_ok, "COMPLETED", 30)
        assert t.wait_state(after_arr, "COMPLETED", 30)
        status, acct = t.api("GET", "/v1/accounting?from=1&all=1")
        spent = sum(r["cost"] for r in acct["records"])
        j = t.wait_state(after_bad, "CANCELLED", 30)
        assert j["reason"] == f"dependency never satisfied (job {bad} FAILED)", j
        j = t.wait_state(after_start, "CANCELLED", 30)
        assert j["reason"] == \
            f"dependency never satisfied (job {gone_early} CANCELLED)", j
        last = after_arr
        status, acct_end = t.api("GET", "/v1/accounting?from=1&all=1")
        assert status == 200 and len(acct_end["records"]) == len(acct_before["records"]) + 2, \
            acct_end
    finally:
        d.stop()

    # a restart reads only the jobs not settled: none here
    t, d = start_up(workdir, "--keep-finished", "0")
    try:
        assert in_memory(t) <= 2, metrics(t)
        status, acct = t.api("GET", "/v1/accounting?from=1&all=1")
        assert status == 200 and acct["records"] == acct_end["records"], acct
        wait_for(lambda: abs(default_spent(t) - spent) <= 1e-9 * spent, 20,
                 "the budget's spend summed again at the start")
        assert sample(metrics(t), "tenk_jobs", state="COMPLETED") == 6
        assert t.job(ok)["state"] == "COMPLETED"
        assert t.job(last)["state"] == "COMPLETED"
        new = t.submit("--", "true")
        assert new == last + 1, "ids go on after the settled ones"
        t.run("wait", str(new), timeout=60)
        assert ids_listed(t, "state=COMPLETED&limit=100")[1] == 7
    finally:
        d.stop()


def test_a_finished_job_stays_held_while_kept(workdir):
    t, d = start_up(workdir)  # the default: five minutes
    try:
        j = t.submit("--", "true")
        t.run("wait", str(j), timeout=60)
        time.sleep(1.5)  # three of the server's ticks
        assert in_memory(t) == 1
    finally:
        d.stop()
    t, d = start_up(workdir)
    try:
        assert in_memory(t) == 0, "a restart reads no settled job"
        assert t.job(j)["state"] == "COMPLETED"
        assert in_memory(t) == 1, "one asked for is held again"
    finally:
        d.stop()


def acct_rows(data):
    """The store's accounting records: {(job id, attempt): document}."""
    db = sqlite3.connect(os.path.join(data, "tenk.db"))
    try:
        return {(k // 1024, k % 1024): json.loads(doc)
                for k, doc in db.execute("SELECT key, doc FROM acct")}
    finally:
        db.close()


def test_accounting_is_read_from_the_records_of_settled_jobs(workdir):
    """A job that settles writes a record per attempt beside its row; once it
    leaves memory, accounting, usage and budgets read those records. A store
    from before them has the records filled in by the server as it runs."""
    t, d = start_up(workdir, "--keep-finished", "0")
    data = t.data
    try:
        ok = t.submit("-G", "1", "--", "sleep", "0.2")
        bad = t.submit("-G", "2", "--", "sh", "-c", "sleep 0.1; exit 3")
        arr = t.submit("--array", "0-2", "--", "true")
        for j in (ok, bad, arr, arr + 1, arr + 2):
            t.run("wait", str(j), check=False, timeout=60)
        wait_for(lambda: in_memory(t) == 1, 20, "the settled jobs to leave memory")
        status, acct = t.api("GET", "/v1/accounting?from=1&all=1")
        assert status == 200 and len(acct["records"]) == 5, acct
        status, usage = t.api("GET", "/v1/usage?by=user&from=1")
        assert status == 200 and usage["total"]["attempts"] == 5, usage
        # in pages, a cursor going on after the last job of each
        pages, after = [], 0
        for _ in range(5):
            status, ans = t.api("GET", f"/v1/accounting?from=1&all=1&limit=2&after={after}")
            assert status == 200, ans
            pages.append([r["job_id"] for r in ans["records"]])
            after = ans["next"]
            if after is None:
                break
        assert pages == [[ok, bad], [arr, arr + 1], [arr + 2]], pages
        status, ans = t.api("GET", "/v1/accounting?limit=0")
        assert status == 400 and "limit: must be an integer from 1 to 10000" in ans["error"]
        status, ans = t.api("GET", "/v1/accounting?after=x")
        assert status == 400 and "after: must be a job id" in ans["error"], ans
        # the command line reads every page
        out = t.run("acct", "-S", "2000-01-01", "-D", "--json")
        assert json.loads(out.stdout)["records"] == acct["records"]
    finally:
        d.stop()
    rows = acct_rows(data)
    assert sorted(rows) == [(j, 1) for j in (ok, bad, arr, arr + 1, arr + 2)], rows
    for r in acct["records"]:
        assert rows[(r["job_id"], r["attempt"])] == r, (rows[(r["job_id"], r["attempt"])], r)

    # the records are what is read: one changed in the store shows changed
    db = sqlite3.connect(os.path.join(data, "tenk.db"))
    marked = dict(rows[(bad, 1)], name="from-the-record")
    db.execute("UPDATE acct SET doc = ?, cost = cost + 1000 WHERE key = ?",
               (json.dumps(marked), bad * 1024 + 1))
    # and one that does not decode is made again from its job, and named
    db.execute("UPDATE acct SET doc = 'not json' WHERE key = ?", (ok * 1024 + 1,))
    db.commit()
    db.close()
    t, d = start_up(workdir, "--keep-finished", "0")
    try:
        status, ans = t.api("GET", f"/v1/accounting?from=1&user={acct['records'][0]['user']}")
        assert status == 200 and [r["name"] for r in ans["records"] if r["job_id"] == bad] == \
            ["from-the-record"], ans
        assert [r for r in ans["records"] if r["job_id"] == ok] == [acct["records"][0]], ans
        status, ans = t.api("GET", "/v1/accounting?from=1&all=1")
        assert status == 200 and [r for r in ans["records"] if r["job_id"] == ok] == \
            [acct["records"][0]], ans
        assert f"job {ok} attempt 1: its stored record does not decode" in d.output()
        status, u = t.api("GET", "/v1/usage?by=user&from=1")
        assert status == 200 and abs(u["total"]["cost"] - usage["total"]["cost"] - 1000) < 1e-6, u
    finally:
        d.stop()

    # a store from before the records: the server fills them in, and answers
    # the same before and after
    db = sqlite3.connect(os.path.join(data, "tenk.db"))
    db.execute("DROP TABLE acct")
    db.execute("DELETE FROM meta WHERE key LIKE 'acct_fill_%'")
    db.execute("PRAGMA user_version = 6")
    db.commit()
    db.close()
    t, d = start_up(workdir, "--keep-finished", "0")
    try:
        status, ans = t.api("GET", "/v1/accounting?from=1&all=1")
        assert status == 200 and ans["records"] == acct["records"], ans
        wait_for(lambda: len(acct_rows(data)) == 5, 20, "the records to be filled")
        assert acct_rows(data) == rows
        status, ans = t.api("GET", "/v1/accounting?from=1&all=1")
        assert status == 200 and ans["records"] == acct["records"], ans
        status, u = t.api("GET", "/v1/usage?by=user&from=1")
        assert status == 200 and u["total"] == usage["total"] | {"capacity_gpu_hours": u[
            "total"]["capacity_gpu_hours"], "idle_gpu_hours": u["total"]["idle_gpu_hours"],
            "percent": u["total"]["percent"]}, (u, usage)
        # and a job settled now writes its own
        new = t.submit("--", "true")
        t.run("wait", str(new), timeout=60)
        wait_for(lambda: (new, 1) in acct_rows(data), 20, "the new job's record")
    finally:
        d.stop()
