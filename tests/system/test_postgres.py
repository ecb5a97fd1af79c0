"""The server on PostgreSQL: the same state and guarantees as on SQLite
(jobs, users, accounting and audit survive a kill -9 of the server, and a
running job goes on through it), a URL with a password refused, and tenk
store copy moving a cluster from SQLite to PostgreSQL and back, row for
row."""
import json
import os
import shutil
import subprocess
import time

from conftest import BIN, Daemon, Tenk, root_jobs_config, server_and_agent, wait_for


def sh(*args, timeout=120):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def start_server(workdir, procs, data, store, listen="127.0.0.1:0"):
    if os.path.exists(os.path.join(data, "server.url")):
        os.remove(os.path.join(data, "server.url"))
    log = os.path.join(workdir, "server.log")  # (each start appends to it)
    before = open(log, errors="replace").read().count("serving ") if os.path.exists(log) else 0
    d = Daemon(["server", "--data", data, "--listen", listen, "--node-timeout", "30s",
                *(["--store", store] if store else [])], workdir, "server")
    procs.append(d)
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")) or not d.alive(), 30,
             "the server")
    assert d.alive(), d.output()
    # its "serving ... (store: ...)" line comes just after server.url: this
    # start's, not one of a server before in the same log
    wait_for(lambda: d.output().count("serving ") > before or not d.alive(), 10,
             "the server's first line")
    return d


def test_a_cluster_on_postgresql_survives_its_server(workdir, procs, postgres):
    t, server, agent = server_and_agent(workdir, procs, "30s", server_args=["--store", postgres])
    assert f"(store: {postgres})" in server.output()
    t.run("users", "add", "ann", "--role", "admin", "--unix-user", "root")
    done = [t.submit("--", "true") for _ in range(3)]
    for j in done:
        t.run("wait", j, timeout=60)
    long = t.submit("--", "sleep", "600")
    t.wait_state(long, "RUNNING")
    attempt = t.job(long)["attempts"][-1]
    where = t.url.split("//")[1]
    server.kill9()
    procs.remove(server)
    server = start_server(workdir, procs, t.data, postgres, listen=where)
    # (a standby until the dead one's lease lapses, a few seconds)
    wait_for(lambda: t.api("GET", "/v1/health")[1].get("role") == "active", 30, "active again")
    wait_for(lambda: t.job(long)["state"] == "RUNNING", 30, "the long job known again")
    wait_for(lambda: t.json("nodes")["nodes"][0]["state"] == "UP", 30, "the node back")
    # the same attempt goes on: the store had everything, the agent its task
    assert t.job(long)["attempts"][-1]["start_ms"] == attempt["start_ms"]
    assert len(t.job(long)["attempts"]) == 1
    for j in done:
        assert t.job(j)["state"] == "COMPLETED"
    assert "ann" in t.run("users").stdout
    # the settled jobs' accounting now comes from the store's records
    acct = t.json("acct")
    assert {r["job_id"] for r in acct["records"]} >= set(done), acct
    audit = t.json("audit", "--since", "1h")
    assert "ann" in json.dumps(audit), audit
    # ids go on past the last (a kill -9 skips the rest of a reserved block)
    assert t.submit("--", "true") > long
    t.run("cancel", long)
    t.wait_state(long, "CANCELLED")
    agent.stop()
    server.stop()


def test_a_standby_whose_copy_missed_a_write_loads_the_store(workdir, procs, postgres):
    """A standby keeps a copy of the state as the active commits (change
    marks the database sets); a write it could not see (the marks turned
    off by hand) makes its copy count other than the store at the
    takeover, and it loads the store instead: nothing is lost."""
    t, a, agent = server_and_agent(workdir, procs, "30s", server_args=["--store", postgres])
    b_data = os.path.join(workdir, "b")
    os.makedirs(os.path.join(b_data, "tls"), mode=0o700)
    for f in ("admin.token", "agent.token", "config.json", "tls/ca.pem", "tls/ca.key"):
        shutil.copy(os.path.join(t.data, f), os.path.join(b_data, f))
    b = Daemon(["server", "--data", b_data, "--listen", "127.0.0.1:0", "--node-timeout", "30s",
                "--store", postgres], workdir, "standby")
    procs.append(b)
    wait_for(lambda: ("its copy of the state holds" in b.output() and
                      os.path.exists(os.path.join(b_data, "server.url"))) or not b.alive(), 30,
             "the standby's copy")
    tb = Tenk(workdir, b_data)
    assert tb.api("GET", "/v1/health")[1]["role"] == "standby"
    seen = t.submit("--", "true")
    wait_for(lambda: t.job(seen)["state"] == "COMPLETED", 30, "a job")
    # the standby's copy follows: it holds the job, read within a second
    wait_for(lambda: tb.api("GET", "/v1/health")[1]["copy"]["jobs"] >= 1, 10, "the copy")
    assert tb.api("GET", "/v1/health")[1]["copy"]["age_ms"] < 1000
    subprocess.run(["psql", "-qAt", postgres, "-c",
                    "ALTER TABLE jobs DISABLE TRIGGER jobs_chg; "
                    "ALTER TABLE users DISABLE TRIGGER users_chg"], check=True, timeout=30)
    t.run("users", "add", "zed", "--unix-user", "root")
    unseen = t.submit("--hold", "--", "true")
    time.sleep(1)  # (polls of the standby, which see neither)
    a.kill9()
    procs.remove(a)
    wait_for(lambda: tb.api("GET", "/v1/health")[1].get("role") == "active", 30, "b active")
    out = b.output()
    assert "its copy of the state is not used (it counts" in out, out[-3000:]
    assert "from the store" in out
    assert "zed" in tb.run("users").stdout
    assert tb.job(unseen)["state"] == "PENDING"
    assert tb.job(seen)["state"] == "COMPLETED"
    agent.stop()
    b.stop()


def test_a_password_in_the_url_is_refused(workdir):
    data = os.path.join(workdir, "data")
    rc, out = sh("server", "--data", data, "--listen", "127.0.0.1:0", "--store",
                 "postgresql://tenk:secret@127.0.0.1/tenk")
    assert rc != 0 and "password file" in out and "secret" not in out.split("--store")[0], out


def test_store_copy_from_sqlite_to_postgresql_and_back(workdir, procs, postgres):
    t, server, agent = server_and_agent(workdir, procs, "30s")
    ids = [t.submit("--", "true") for _ in range(5)]
    for j in ids:
        t.run("wait", j, timeout=60)
    agent.stop()
    server.stop()
    procs.clear()
    db = os.path.join(t.data, "tenk.db")
    rc, out = sh("store", "copy", db, postgres)
    assert rc == 0 and "every row the same in both" in out and "jobs" in out, out
    # into a store that holds a cluster: refused, nothing changed
    rc, out = sh("store", "copy", db, postgres)
    assert rc == 1 and "already holds a cluster" in out, out
    server = start_server(workdir, procs, t.data, postgres)
    listed = {j["id"]: j["state"] for j in t.json("queue", "--all")["jobs"]}
    assert listed == {j: "COMPLETED" for j in ids}, listed
    new = t.submit("--hold", "--", "true")
    assert new == ids[-1] + 1
    server.stop()
    procs.clear()
    back = os.path.join(workdir, "back.db")
    rc, out = sh("store", "copy", postgres, back)
    assert rc == 0 and "postgresql to sqlite" in out, out
    # (named by config.json this time)
    root_jobs_config(t.data, store=back)
    server = start_server(workdir, procs, t.data, None)
    assert f"(store: {back})" in server.output()
    listed = {j["id"]: j["state"] for j in t.json("queue", "--all")["jobs"]}
    assert listed == {**{j: "COMPLETED" for j in ids}, new: "PENDING"}, listed
    # tenk backup copies the store the server uses, as it finds it
    copy = os.path.join(workdir, "copy.db")
    rc, out = sh("backup", copy, "--data", t.data)
    assert rc == 0 and f"a copy of {back}" in out, out
    rc, out = sh("backup", copy + "2", "--data", t.data, "--store", postgres)
    assert rc == 1 and f"the cluster's store is PostgreSQL ({postgres})" in out and \
        "pg_dump" in out, out
    assert not os.path.exists(copy + "2")
    server.stop()
