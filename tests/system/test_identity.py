"""Who a job runs as: every tenk user is a Unix account (by default of the
same name); the built-in admin's jobs run as the configuration's
"admin_unix_user"; no job runs as root unless "allow_root_jobs"."""
import json
import os

from conftest import Daemon, Tenk, wait_for


def server_only(workdir, config=None):
    data = os.path.join(workdir, "data")
    os.makedirs(data)
    if config is not None:
        with open(os.path.join(data, "config.json"), "w") as f:
            json.dump(config, f)
    d = Daemon(["server", "--data", data, "--listen", "127.0.0.1:0"], workdir, "server")
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")) or not d.alive(), 20,
             "the server")
    assert d.alive(), d.output()
    return Tenk(workdir, data), d


def test_who_jobs_run_as(workdir):
    t, d = server_only(workdir)
    try:
        # a cluster of several machines has no default for the admin's jobs
        p = t.run("submit", "--", "true", check=False)
        assert p.returncode == 1 and '"admin_unix_user"' in p.stderr, p.stderr
        st, res = t.api("POST", "/v1/users", {"name": "alice"})
        assert st == 201 and res["unix_user"] == "alice"
        st, res = t.api("POST", "/v1/users", {"name": "ops", "unix_user": "root"})
        assert st == 201
        ops = res["token"]
        st, res = t.api("POST", "/v1/users", {"name": "carol", "unix_user": "Carol S"})
        assert st == 400 and res["error"].startswith('unix_user: "Carol S" is not a Unix'), res
        p = t.run("users", "add", "bob", "--unix-user", "bobby")
        bob = p.stdout.strip()
        users = {u["name"]: u for u in t.json("users")["users"]}
        assert users["bob"]["unix_user"] == "bobby" and users["alice"]["unix_user"] == "alice"
        assert "bobby" in t.run("users").stdout
        # a user's job runs as the user's account; root is refused
        st, job = t.api("POST", "/v1/jobs", {"command": ["true"], "cwd": "/tmp"}, token=bob)
        assert st == 201 and job["run_as"] == "bobby", job
        st, res = t.api("POST", "/v1/jobs", {"command": ["true"], "cwd": "/tmp"}, token=ops)
        assert st == 403 and "runs as root" in res["error"], res
    finally:
        d.stop()


def test_admin_account_from_the_config(workdir):
    for cfg, run_as in (({"admin_unix_user": "nobody"}, "nobody"),
                        ({"allow_root_jobs": True}, "root")):
        sub = os.path.join(workdir, run_as)
        os.makedirs(sub)
        t, d = server_only(sub, cfg)
        try:
            jid = t.submit("--", "true")
            assert t.job(jid)["run_as"] == run_as
        finally:
            d.stop()


def test_up_writes_its_own_config(cluster):
    with open(os.path.join(cluster.data, "config.json")) as f:
        cfg = json.load(f)
    assert cfg == {"admin_unix_user": "root", "allow_root_jobs": True}, cfg
    assert os.stat(os.path.join(cluster.data, "config.json")).st_mode & 0o777 == 0o600
    jid = cluster.submit("--", "true")
    assert cluster.wait_state(jid, "COMPLETED")["run_as"] == "root"
