"""Retention (issue 34, point 8): a job settled more than keep_jobs ago
leaves the store but for its row, which keeps its accounting records; after
keep_accounting those go too; audit rows go keep_audit after they were
written. A removed job is not shown; its id is never given again; all of it
holds across a restart."""
import os
import sqlite3
import time

from conftest import root_jobs_config, start_up, wait_for


def records(t, jid):
    return [r for r in t.json("acct", "-D", "-S", "2000-01-01")["records"] if r["job_id"] == jid]


def test_finished_jobs_leave_the_store(workdir):
    data = os.path.join(workdir, "tenk-data")
    root_jobs_config(data, keep_jobs="3s", keep_accounting="8s", keep_audit="5s")
    t, d = start_up(workdir, "--keep-finished", "0")
    try:
        old = [t.submit("--", "true") for _ in range(3)]
        t.run("wait", *old, timeout=60)
        assert all(records(t, j) for j in old)
        first_audit = min(r["at_ms"] for r in t.json("audit")["rows"])
        # after keep_jobs: no longer shown, its accounting kept, its id not given again
        wait_for(lambda: t.api("GET", f"/v1/jobs/{old[0]}")[0] == 404, 20,
                 "the first job to leave the store")
        st, res = t.api("GET", f"/v1/jobs/{old[0]}")
        assert res["error"] == f"no job {old[0]}", res
        assert old[0] not in [j["id"] for j in t.json("queue", "--all")["jobs"]]
        assert records(t, old[0]), "its accounting records stay"
        new = t.submit("--", "true")
        assert new == old[-1] + 1, (new, old)
        with sqlite3.connect(os.path.join(data, "tenk.db")) as db:
            assert db.execute("SELECT length(doc) FROM jobs WHERE id = ?",
                              (old[0],)).fetchone() == (0,)
    finally:
        d.stop()
    # a restart knows the removed jobs' records and that they are removed
    t, d = start_up(workdir, "--keep-finished", "0")
    try:
        assert t.api("GET", f"/v1/jobs/{old[0]}")[0] == 404
        assert records(t, old[0])
        # after keep_accounting: the records go; audit rows older than keep_audit go
        wait_for(lambda: not records(t, old[0]), 20, "the first job's records to go")
        wait_for(lambda: all(r["at_ms"] > first_audit for r in t.json("audit")["rows"]), 30,
                 "the oldest audit rows to go")
        assert all(r["at_ms"] >= int(time.time() * 1000) - 5000 - 15000
                   for r in t.json("audit")["rows"])
        st, text = t.api("GET", "/metrics")
        assert "tenk_store_jobs_forgotten_total" in text
        last = t.submit("--", "true")
        assert last > new
        assert [r for r in t.json("audit")["rows"] if r["result"] == f"job {last}"]
    finally:
        d.stop()
    with sqlite3.connect(os.path.join(data, "tenk.db")) as db:
        assert db.execute("SELECT count(*) FROM jobs WHERE id = ?", (old[0],)).fetchone() == (0,)
