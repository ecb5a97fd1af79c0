"""Roles: a viewer reads, a user submits and ends its own jobs, an operator
also drains, resumes, validates, sets queues and ends any job, an admin
also manages users and node credentials."""
import json
import os
import sqlite3

from conftest import start_up


def test_what_each_role_may_do(workdir):
    t, d = start_up(workdir)
    t.network = True  # the audit trail's address of a client over the network
    try:
        tok = {}
        for name, role in (("vic", "viewer"), ("bob", "user"), ("olga", "operator")):
            p = t.run("users", "add", name, "--role", role, "--unix-user", "nobody", "--json")
            res = json.loads(p.stdout)
            assert res["access"] == role
            tok[name] = res["token"]

        def as_(name, *args, check=True):
            return t.run(*args, check=check, env=dict(t.env(), TENK_TOKEN=tok[name]))

        jid = int(as_("bob", "submit", "-D", "/tmp", "-o", "/dev/null", "--", "sleep", "60").stdout)
        t.wait_state(jid, "RUNNING")
        # the viewer sees every job, and changes nothing
        assert jid in [j["id"] for j in json.loads(as_("vic", "queue", "--json").stdout)["jobs"]]
        p = as_("vic", "cancel", str(jid), check=False)
        assert p.returncode == 1 and "is for a user" in p.stderr, p.stderr
        p = as_("vic", "submit", "--", "true", check=False)
        assert p.returncode == 1 and "is for a user" in p.stderr
        # a user may not drain; an operator may, and may end bob's job
        p = as_("bob", "drain", "node1", "--reason", "x", check=False)
        assert p.returncode == 1 and \
            "POST /v1/nodes/node1/drain is for an operator; bob is a user" in p.stderr, p.stderr
        assert "DRAINING" in as_("olga", "drain", "node1", "--reason", "fan").stdout
        assert "UP" in as_("olga", "resume", "node1").stdout
        as_("olga", "cancel", str(jid))
        assert t.job(jid)["state"] == "CANCELLED"
        # users and credentials are the admin's
        p = as_("olga", "users", "add", "eve", check=False)
        assert p.returncode == 1 and "is for an admin" in p.stderr
        p = as_("olga", "nodes", "revoke", "node1", check=False)
        assert p.returncode == 1 and "is for an admin" in p.stderr
        listed = {u["name"]: u["access"] for u in t.json("users")["users"]}
        assert listed == {"vic": "viewer", "bob": "user", "olga": "operator"}
        p = t.run("users", "add", "x", "--role", "king", check=False)
        assert p.returncode == 2 and "access: must be viewer, user, operator or admin" in p.stderr
        # every call that changed something, or tried to, is in the audit trail
        rows = json.loads(t.run("audit", "--json").stdout)["rows"]
        seen = [(r["who"], r["method"], r["path"], r["status"]) for r in rows]
        want = [("admin", "POST", "/v1/users", 201)] * 3 + [
            ("bob", "POST", "/v1/jobs", 201),
            ("vic", "POST", f"/v1/jobs/{jid}/cancel", 403),
            ("vic", "POST", "/v1/jobs", 403),
            ("bob", "POST", "/v1/nodes/node1/drain", 403),
            ("olga", "POST", "/v1/nodes/node1/drain", 200),
            ("olga", "POST", "/v1/nodes/node1/resume", 200),
            ("olga", "POST", f"/v1/jobs/{jid}/cancel", 200),
            ("olga", "POST", "/v1/users", 403),
            ("olga", "POST", "/v1/nodes/node1/revoke", 403),
            ("admin", "POST", "/v1/users", 400)]
        assert seen == want, seen
        assert rows[3]["result"] == f"job {jid}" and rows[0]["result"] == "vic"
        assert "is for a user" in rows[4]["result"] and rows[4]["addr"] == "127.0.0.1"
        mine = json.loads(t.run("audit", "--user", "olga", "--since", "1h", "--json").stdout)
        assert [r["path"] for r in mine["rows"]] == [
            "/v1/nodes/node1/drain", "/v1/nodes/node1/resume", f"/v1/jobs/{jid}/cancel",
            "/v1/users", "/v1/nodes/node1/revoke"], mine
        out = t.run("audit", "--user", "bob").stdout
        assert "POST /v1/jobs" in out and "job %d" % jid in out
        p = as_("olga", "audit", check=False)
        assert p.returncode == 1 and "is for an admin" in p.stderr
    finally:
        d.stop()
    # the rows are in the store, written with their changes, and stay as written
    with sqlite3.connect(os.path.join(t.data, "tenk.db")) as c:
        assert c.execute("SELECT count(*) FROM audit").fetchone()[0] == len(want)
        try:
            c.execute("UPDATE audit SET who = 'nobody'")
            raise AssertionError("an audit row was rewritten")
        except sqlite3.DatabaseError as e:
            assert "audit rows are never rewritten" in str(e)
    t2, d2 = start_up(workdir)
    try:
        rows = json.loads(t2.run("audit", "--json").stdout)["rows"]
        assert [(r["who"], r["status"]) for r in rows] == [(w[0], w[3]) for w in want]
    finally:
        d2.stop()
