"""The store never starts empty by mistake: a used folder with an empty or
missing tenk.db is refused, a row that does not decode is named (and set
aside when asked), an id beyond what the server holds is refused, a store
the server cannot write is found at start, and tenk backup copies it while
the server runs."""
import json
import os
import shutil
import sqlite3
import subprocess

import pytest

from conftest import BIN, start_up


def server_once(data, *extra):
    """`tenk server` that is expected to refuse to start: its exit and output."""
    p = subprocess.run([BIN, "server", "--data", data, "--listen", "127.0.0.1:0", *extra],
                       capture_output=True, text=True, timeout=30)
    return p.returncode, p.stderr + p.stdout


def used_cluster(workdir, jobs=2):
    """A folder a cluster ran in, with jobs in its store; the server stopped."""
    t, d = start_up(workdir)
    ids = [t.submit("--", "true") for _ in range(jobs)]
    for j in ids:
        t.run("wait", j, timeout=60)
    d.stop()
    return t, ids


def remove_db(data):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(os.path.join(data, "tenk.db" + suffix)):
            os.remove(os.path.join(data, "tenk.db" + suffix))


def test_a_used_folder_with_no_store_is_refused(workdir):
    t, ids = used_cluster(workdir)
    remove_db(t.data)
    rc, out = server_once(t.data)
    assert rc == 1 and "tenk.db is missing but" in out and "held a cluster; restore it" in out \
        and "--init" in out, out
    assert not os.path.exists(os.path.join(t.data, "tenk.db")), "nothing created"
    open(os.path.join(t.data, "tenk.db"), "w").close()
    rc, out = server_once(t.data)
    assert rc == 1 and "tenk.db is empty but" in out, out
    # with --init, a new cluster: ids start again
    t2, d2 = start_up(workdir, "--init")
    try:
        assert t2.submit("--", "true") == 1
    finally:
        d2.stop()


def test_a_bad_row_is_named_then_set_aside(workdir):
    t, ids = used_cluster(workdir, jobs=3)
    db = os.path.join(t.data, "tenk.db")
    with sqlite3.connect(db) as c:
        # a settled job is read whole only when asked for: it is named then
        c.execute("UPDATE jobs SET doc = '{\"id\": 3, \"bogus\": true}' WHERE id = 3")
    t3, d3 = start_up(workdir)
    try:
        st, ans = t3.api("GET", "/v1/jobs/3")
        assert st == 500 and "job 3 cannot be read back from the store" in ans["error"] \
            and "bogus" in ans["error"], ans
        assert "job 3: cannot read it back from the store" in d3.output()
        assert "bogus" in d3.output()
        assert t3.job(ids[0])["state"] == "COMPLETED"
    finally:
        d3.stop()
    with sqlite3.connect(db) as c:
        c.execute("DELETE FROM jobs WHERE id = 3")
        # one not settled is read at the start: its row stops it
        c.execute("UPDATE jobs SET doc = '{\"id\": 1, \"bogus\": true}', settled_ms = 0 "
                  "WHERE id = 1")
        doc = c.execute("SELECT doc FROM jobs WHERE id = 2").fetchone()[0]
        # an id no server could index
        big = json.loads(doc)
        big["id"] = 4000000000
        c.execute("INSERT INTO jobs (id, state, doc) VALUES (4000000000, 'COMPLETED', ?)",
                  (json.dumps(big),))
    rc, out = server_once(t.data)
    assert rc == 1 and "store: job 1 does not decode" in out and \
        "start with --quarantine-bad-rows to set it aside" in out, out
    with sqlite3.connect(db) as c:
        c.execute("DELETE FROM jobs WHERE id = 1")
    rc, out = server_once(t.data)
    assert rc == 1 and "job 4000000000 does not decode: id 4000000000 is beyond what this " \
        "server holds" in out, out
    with sqlite3.connect(db) as c:
        c.execute("UPDATE jobs SET doc = '[1, 2]', settled_ms = 0 WHERE id = 2")
    t2, d2 = start_up(workdir, "--quarantine-bad-rows")
    try:
        st, _ = t2.api("GET", "/v1/jobs/2")
        assert st == 404
        assert "set aside" in d2.output()
    finally:
        d2.stop()
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT kind, key, reason FROM quarantine ORDER BY seq").fetchall()
        assert [(k, key) for k, key, _ in rows] == [("job", "2"), ("job", "4000000000")], rows
        assert c.execute("SELECT count(*) FROM jobs WHERE id IN (2, 4000000000)").fetchone() \
            == (0,)
    # the next start is clean, the set-aside rows stay where they are
    t3, d3 = start_up(workdir)
    d3.stop()


@pytest.mark.skipif(not shutil.which("chattr"), reason="chattr")
def test_a_store_that_cannot_be_written_is_found_at_start(workdir):
    t, ids = used_cluster(workdir)
    db = os.path.join(t.data, "tenk.db")
    # root writes any file; an immutable one it cannot
    if subprocess.run(["chattr", "+i", db], capture_output=True).returncode != 0:
        pytest.skip("this file system has no immutable files")
    try:
        rc, out = server_once(t.data)
    finally:
        subprocess.run(["chattr", "-i", db], capture_output=True)
    assert rc == 1 and "tenk.db cannot be written" in out, out


def test_backup_while_running_and_restore(workdir):
    t, d = start_up(workdir)
    ids = [t.submit("--", "true") for _ in range(3)]
    for j in ids:
        t.run("wait", j, timeout=60)
    copy = os.path.join(workdir, "backup.db")
    p = subprocess.run([BIN, "backup", copy, "--data", t.data], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert oct(os.stat(copy).st_mode & 0o777) == "0o600"
    p = subprocess.run([BIN, "backup", copy, "--data", t.data], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 1 and "File exists" in p.stderr, "never over a file"
    later = t.submit("--", "true")
    t.run("wait", later, timeout=60)
    d.stop()
    with sqlite3.connect(copy) as c:
        assert [r[0] for r in c.execute("SELECT id FROM jobs ORDER BY id")] == ids
    # restore: the copy in place of tenk.db; the job after it is gone
    remove_db(t.data)
    shutil.copy(copy, os.path.join(t.data, "tenk.db"))
    t2, d2 = start_up(workdir)
    try:
        assert sorted(j["id"] for j in t2.json("queue", "--all")["jobs"]) == ids
        assert t2.api("GET", f"/v1/jobs/{later}")[0] == 404
    finally:
        d2.stop()
