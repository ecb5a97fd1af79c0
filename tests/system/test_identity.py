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
        assert p.returncode == 2 and '"admin_unix_user"' in p.stderr, p.stderr
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
        # a job's environment values are its owner's alone; the admin sees names
        st, job = t.api("POST", "/v1/jobs", {"command": ["true"], "cwd": "/tmp",
                                             "env": {"API_KEY": "s3cr3t", "MODE": "x"}},
                        token=bob)
        assert st == 201 and job["request"]["env"]["API_KEY"] == "s3cr3t", job
        st, mine = t.api("GET", f"/v1/jobs/{job['id']}", token=bob)
        assert mine["request"]["env"] == {"API_KEY": "s3cr3t", "MODE": "x"}, mine
        st, seen = t.api("GET", f"/v1/jobs/{job['id']}")
        assert st == 200 and seen["request"]["env"] == {"API_KEY": None, "MODE": None}, seen
        assert seen["request"]["env_hidden"] is True
        assert "s3cr3t" not in t.run("show", job["id"], "--json").stdout
        st, res = t.api("POST", f"/v1/jobs/{job['id']}/cancel")
        assert st == 200 and "s3cr3t" not in json.dumps(res)
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


# ---- real Unix accounts ----------------------------------------------------------------

import grp
import pwd
import shutil
import stat
import subprocess
import tempfile

import pytest

from conftest import start_up

ACCOUNTS = ("tenkalice", "tenkbob")
SHARED = "tenkshared"


@pytest.fixture
def accounts():
    """Unix accounts the test makes (and removes): tenkalice and tenkbob, both
    in the supplementary group tenkshared; tenkroot, a second name of uid 0."""
    made = []

    def run(*cmd):
        subprocess.run(cmd, check=True, capture_output=True)

    try:
        run("groupadd", SHARED)
        for name in ACCOUNTS:
            run("useradd", "-M", "-N", "-g", "nogroup", "-G", SHARED, "-s", "/bin/sh", name)
            made.append(name)
        run("useradd", "-M", "-N", "-o", "-u", "0", "-g", "root", "-s", "/bin/sh", "tenkroot")
        made.append("tenkroot")
        yield {name: pwd.getpwnam(name) for name in made}
    finally:
        for name in made:
            subprocess.run(["userdel", "-f", name], capture_output=True)
        subprocess.run(["groupdel", SHARED], capture_output=True)


@pytest.fixture
def open_workdir():
    """A folder every account may reach (the usual temporary folders of the
    tests are root's own)."""
    d = tempfile.mkdtemp(prefix="tenk-identity-", dir="/tmp")
    os.chmod(d, 0o711)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def own_folder(base, account):
    d = os.path.join(base, account.pw_name)
    os.mkdir(d, 0o700)
    os.chown(d, account.pw_uid, account.pw_gid)
    return d


def as_user(t, token):
    return dict(t.env(), TENK_TOKEN=token)


def test_jobs_run_as_their_owner(accounts, open_workdir):
    data = os.path.join(open_workdir, "tenk-data")
    os.makedirs(data)
    # no job as root here: the admin's run as tenkbob
    with open(os.path.join(data, "config.json"), "w") as f:
        json.dump({"admin_unix_user": "tenkbob"}, f)
    t, d = start_up(open_workdir)
    try:
        alice = t.run("users", "add", "alice", "--unix-user", "tenkalice").stdout.strip()
        bob = t.run("users", "add", "bob", "--unix-user", "tenkbob").stdout.strip()
        a, b = accounts["tenkalice"], accounts["tenkbob"]
        adir, bdir = own_folder(open_workdir, a), own_folder(open_workdir, b)
        token_path = os.path.join(data, "admin.token")
        script = ("id -u; id -g; id -G; echo $HOME $USER $LOGNAME $SHELL; "
                  f"cat {token_path} || echo no-token; cat {data}/agent.token || echo no-agent; "
                  'echo step > "$TENK_CHECKPOINT_DIR/ckpt" && echo ckpt-ok; '
                  f"ls {data} || echo no-listing")
        jid = int(t.run("submit", "-o", "out-%j", "--", "sh", "-c", script, cwd=adir,
                        env=as_user(t, alice)).stdout)
        j = t.wait_state(jid, ("COMPLETED", "FAILED"))
        assert j["state"] == "COMPLETED", j
        out = os.path.join(adir, f"out-{jid}")
        st = os.stat(out)
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (a.pw_uid, a.pw_gid, 0o600)
        lines = open(out).read().splitlines()
        assert lines[0] == str(a.pw_uid) and lines[1] == str(a.pw_gid), lines
        assert str(grp.getgrnam(SHARED).gr_gid) in lines[2].split(), lines
        assert "0" not in lines[2].split(), "no group of root is kept"
        assert lines[3].split()[1:] == ["tenkalice", "tenkalice", "/bin/sh"], lines
        assert "no-token" in lines and "no-agent" in lines, lines
        assert "ckpt-ok" in lines and "no-listing" in lines, lines
        assert t.token not in open(out).read()
        # the data folder was made 0755 by this test: the server's alone now
        assert os.stat(data).st_mode & 0o777 == 0o700
        for name in os.listdir(data):
            mode = os.lstat(os.path.join(data, name)).st_mode
            assert mode & 0o777 == (0o700 if stat.S_ISDIR(mode) else 0o600), (name, oct(mode))
        assert {"tenk.db", "tenk.db-wal", "admin.token", "server.url"} <= set(os.listdir(data))
        # bob cannot read alice's output
        jid = int(t.run("submit", "--", "cat", out, cwd=bdir, env=as_user(t, bob)).stdout)
        j = t.wait_state(jid, ("COMPLETED", "FAILED"))
        assert j["state"] == "FAILED", j
        assert "Permission denied" in open(os.path.join(bdir, f"tenk-{jid}.out")).read()
        # the admin's job runs as tenkbob, in a folder it may use
        jid = t.submit("--", "id", "-u", cwd=bdir)
        t.wait_state(jid, "COMPLETED")
        assert open(os.path.join(bdir, f"tenk-{jid}.out")).read().strip() == str(b.pw_uid)
    finally:
        d.stop()


def test_files_as_the_owner(accounts, open_workdir):
    t, d = start_up(open_workdir)
    try:
        alice = t.run("users", "add", "alice", "--unix-user", "tenkalice").stdout.strip()
        adir = own_folder(open_workdir, accounts["tenkalice"])
        # outputs the owner may not write: refused at launch, nothing written
        jid = int(t.run("submit", "-o", "/etc/tenk-test-out", "--", "echo", "x", cwd=adir,
                        env=as_user(t, alice)).stdout)
        j = t.wait_state(jid, ("COMPLETED", "FAILED"))
        assert j["state"] == "FAILED" and j["exit_code"] == 127, j
        assert "cannot open output /etc/tenk-test-out: Permission denied" in j["reason"], j
        assert not os.path.exists("/etc/tenk-test-out")
        victim = os.path.join(open_workdir, "root-owned")
        with open(victim, "w") as f:
            f.write("root's\n")
        os.chmod(victim, 0o644)
        os.symlink(victim, os.path.join(adir, "link"))
        jid = int(t.run("submit", "-o", "link", "--", "echo", "pwned", cwd=adir,
                        env=as_user(t, alice)).stdout)
        j = t.wait_state(jid, ("COMPLETED", "FAILED"))
        assert j["state"] == "FAILED" and "link is a symbolic link" in j["reason"], j
        assert open(victim).read() == "root's\n"
        # a folder the owner cannot enter
        jid = int(t.run("submit", "--chdir", "/root", "--", "true", cwd=adir,
                        env=as_user(t, alice)).stdout)
        j = t.wait_state(jid, ("COMPLETED", "FAILED"))
        assert "cannot enter folder /root: Permission denied" in j["reason"], j
        # an account the node does not have
        carol = t.run("users", "add", "carol", "--unix-user", "tenknosuch").stdout.strip()
        jid = int(t.run("submit", "--", "true", cwd=adir, env=as_user(t, carol)).stdout)
        j = t.wait_state(jid, ("COMPLETED", "FAILED"))
        assert j["state"] == "FAILED", j
        assert "user tenknosuch has no account on node1" in j["reason"], j
    finally:
        d.stop()


def test_no_job_as_root_unless_allowed(accounts, open_workdir):
    data = os.path.join(open_workdir, "tenk-data")
    os.makedirs(data)
    with open(os.path.join(data, "config.json"), "w") as f:
        json.dump({"admin_unix_user": "tenkalice"}, f)
    t, d = start_up(open_workdir)
    try:
        # a second name of uid 0: the server cannot tell, the node refuses it
        ops = t.run("users", "add", "ops", "--unix-user", "tenkroot").stdout.strip()
        jid = int(t.run("submit", "--", "id", "-u", cwd="/tmp", env=as_user(t, ops)).stdout)
        j = t.wait_state(jid, ("COMPLETED", "FAILED"))
        assert j["state"] == "FAILED", j
        assert "user tenkroot is root (uid 0) on node1" in j["reason"], j
    finally:
        d.stop()


def test_who_may_use_a_class_or_queue(accounts, workdir):
    """Allow lists name users, Unix groups (through the user's account) and
    roles; anyone else gets 403 naming the class or queue."""
    subprocess.run(["groupadd", "tenkml"], check=True, capture_output=True)
    try:
        subprocess.run(["usermod", "-aG", "tenkml", "tenkalice"], check=True,
                       capture_output=True)
        t, d = server_only(workdir, {
            "admin_unix_user": "nobody", "default_class": "normal",
            "classes": [{"name": "prod", "priority": 100, "may_preempt": True,
                         "allow": ["group:tenkml", "role:oncall", "dave"]},
                        {"name": "normal", "priority": 50}]})
        try:
            tokens = {}
            for name, unix, extra in (("alice", "tenkalice", []), ("bob", "tenkbob", []),
                                      ("carol", "tenkbob", ["--roles", "oncall,review"]),
                                      ("dave", "tenkbob", [])):
                tokens[name] = t.run("users", "add", name, "--unix-user", unix,
                                     *extra).stdout.strip()
            users = {u["name"]: u for u in t.json("users")["users"]}
            assert users["carol"]["roles"] == ["oncall", "review"]
            assert "oncall,review" in t.run("users").stdout
            classes = {k["name"]: k for k in t.json("classes")["classes"]}
            assert classes["prod"]["allow"] == ["group:tenkml", "role:oncall", "dave"]
            assert classes["normal"]["allow"] == []

            def submit(who, **extra):
                body = dict({"command": ["true"], "cwd": "/tmp"}, **extra)
                return t.api("POST", "/v1/jobs", body,
                             token=tokens[who] if who != "admin" else "admin")

            for who in ("alice", "carol", "dave", "admin"):
                st, res = submit(who, **{"class": "prod"})
                assert st == 201, (who, res)
            st, res = submit("bob", **{"class": "prod"})
            assert st == 403 and res["error"] == "class prod: bob may not use it", res
            p = t.run("submit", "--class", "prod", "--", "true", check=False,
                      env=as_user(t, tokens["bob"]))
            assert p.returncode == 1 and "class prod: bob may not use it" in p.stderr
            st, res = submit("bob")
            assert st == 201, res  # normal: everyone
            # a queue's list takes the same entries
            t.run("queues", "set", "vision", "--users", "group:tenkml,role:review")
            for who, want in (("alice", 201), ("carol", 201), ("bob", 403), ("dave", 403)):
                st, res = submit(who, queue="vision")
                assert st == want, (who, res)
            assert res["error"] == "queue vision: dave may not use it", res
            p = t.run("queues", "set", "vision", "--users", "group:Bad Name", check=False)
            assert p.returncode == 2 and "must be a user name, group:UNIXGROUP or role:NAME" \
                in p.stderr, p.stderr
        finally:
            d.stop()
    finally:
        subprocess.run(["groupdel", "tenkml"], capture_output=True)


def test_output_never_follows_a_link(cluster, workdir):
    """A job's output is opened as its owner, and never through a link: on a
    host that does not protect symbolic links in shared folders, another
    user's link named as bob's output would append bob's job into a file of
    his own that the job never named. The task fails to launch instead,
    saying why."""
    import pwd
    import shutil
    import subprocess
    import tempfile
    user = "tkout-bob"
    subprocess.run(["userdel", "-f", user], capture_output=True)
    subprocess.run(["useradd", "-M", "-N", "-g", "nogroup", "-s", "/bin/sh", user], check=True,
                   capture_output=True)
    base = tempfile.mkdtemp(prefix="tenk-out-", dir="/tmp")
    knob = "/proc/sys/fs/protected_symlinks"
    with open(knob) as f:
        was = f.read().strip()
    try:
        os.chmod(base, 0o711)
        pw = pwd.getpwnam(user)
        home = os.path.join(base, "bob")
        os.mkdir(home, 0o700)
        os.chown(home, pw.pw_uid, pw.pw_gid)
        private = os.path.join(home, "important.txt")
        with open(private, "w") as f:
            f.write("bob's own\n")
        os.chown(private, pw.pw_uid, pw.pw_gid)
        os.chmod(private, 0o600)
        shared = os.path.join(base, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o1777)
        link = os.path.join(shared, "bob.out")
        os.symlink(private, link)
        os.lchown(link, pwd.getpwnam("nobody").pw_uid, -1)  # another user's link
        with open(knob, "w") as f:
            f.write("0")
        p = cluster.run("users", "add", "bob", "--unix-user", user, "--json")
        bob = dict(cluster.env(), TENK_TOKEN=json.loads(p.stdout)["token"])
        jid = int(cluster.run("submit", "-D", "/tmp", "-o", link, "--", "echo", "hijacked",
                              env=bob).stdout)
        wait_for(lambda: cluster.job(jid)["state"] in ("FAILED", "COMPLETED"), 30, "the job",
                 show=lambda: cluster.job(jid))
        with open(private) as f:
            assert f.read() == "bob's own\n"
        job = cluster.job(jid)
        assert job["state"] == "FAILED" and "is a symbolic link" in job["reason"], job
    finally:
        with open(knob, "w") as f:
            f.write(was)
        subprocess.run(["userdel", "-f", user], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_agent_data_folder_lets_jobs_reach_their_folders(workdir):
    """`tenk agent --data DIR` without --work-dir (the README's setup of a
    node): a job of a user but root reaches its $TENK_CHECKPOINT_DIR and
    $TENK_METRICS, which live under DIR."""
    import shutil
    import tempfile
    t, d = server_only(workdir, {"admin_unix_user": "nobody"})
    base = tempfile.mkdtemp(prefix="tenk-node-", dir="/tmp")  # passable, as /var/lib is
    os.chmod(base, 0o711)
    node_data = os.path.join(base, "data")
    a = Daemon(["agent", "--server", t.url, "--token-file", os.path.join(t.data, "agent.token"),
                "--name", "n1", "--data", node_data, "--stop-jobs"], workdir, "agent")
    try:
        t.wait_nodes_up(1)
        jid = t.submit("-D", "/tmp", "-o", "/dev/null", "--", "sh", "-c",
                       'touch "$TENK_CHECKPOINT_DIR/x" && echo step=1 >> "$TENK_METRICS"')
        wait_for(lambda: t.job(jid)["state"] in ("COMPLETED", "FAILED"), 30, "the job",
                 show=lambda: t.job(jid))
        assert t.job(jid)["state"] == "COMPLETED", t.job(jid)
        assert os.stat(node_data).st_mode & 0o777 == 0o711
    finally:
        a.stop()
        d.stop()
        shutil.rmtree(base, ignore_errors=True)
