"""The CLI's clusters (tenk config), as kubectl's contexts: `tenk up`
writes its own, so tenk works from any folder with no variable set; a
cluster is picked by name; flags, variables and ./tenk-data come first."""
import json
import os
import shutil
import subprocess

from conftest import BIN, SANITIZER_MARKS, start_up


def bare_env(conf):
    """The environment of a new shell: no TENK_* at all, its own config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENK_")}
    env["XDG_CONFIG_HOME"] = conf
    return env


def tenk(env, *args, cwd="/"):
    p = subprocess.run([BIN, *map(str, args)], env=env, cwd=cwd, capture_output=True,
                       text=True, timeout=60)
    for mark in SANITIZER_MARKS:
        assert mark not in p.stderr, f"tenk {args}: sanitizer report:\n{p.stderr}"
    return p


def test_up_writes_a_cluster_the_cli_uses_from_anywhere(workdir):
    conf = os.path.join(workdir, "conf")
    t, d = start_up(workdir, env={"XDG_CONFIG_HOME": conf})
    try:
        path = os.path.join(conf, "tenk", "config.json")
        cfg = json.load(open(path))
        local = cfg["clusters"]["local"]
        data = os.path.join(workdir, "tenk-data")
        assert cfg["current"] == "local", cfg
        assert local["server"] == t.url and local["token_file"] == data + "/admin.token", cfg
        assert local["ca"] == os.path.realpath(t.ca) if t.ca else "ca" not in local
        assert oct(os.stat(path).st_mode & 0o777) == "0o600"
        assert 'cluster "local" in ' in d.output() and "the current one" in d.output()
        # what to type: tenk where the PATH has it, else the tenk it runs beside
        cli = "tenk" if shutil.which("tenk") else os.path.join(os.path.dirname(BIN), "tenk")
        assert f"try:  {cli} submit -- echo hello; {cli} queue --all" in d.output(), \
            d.output()
        assert "try:  export TENK_SERVER" not in d.output()  # nothing to set
        env = bare_env(conf)
        # from another folder, with nothing set: the current cluster
        jid = int(tenk(env, "submit", "-H", "--", "true").stdout)
        q = tenk(env, "queue", "--json")
        assert q.returncode == 0 and [j["id"] for j in json.loads(q.stdout)["jobs"]] == [jid]
        out = tenk(env, "config").stdout
        assert "* local " in out and t.url in out, out
        # another cluster, picked; then back by name
        p = tenk(env, "config", "set-cluster", "far", "--server", "https://127.0.0.1:9")
        assert p.returncode == 0 and p.stdout == "added cluster far\n", p
        p = tenk(env, "config", "use-cluster", "far")
        assert p.returncode == 0 and tenk(env, "config", "current").stdout == "far\n"
        p = tenk(env, "queue")
        assert p.returncode == 2 and "cluster far names no token file" in p.stderr, p.stderr
        p = tenk(env, "config", "set-cluster", "far", "--token-file",
                 os.path.join(data, "admin.token"))
        assert p.returncode == 0 and p.stdout == "changed cluster far (the current one)\n", p
        p = tenk(env, "queue")
        assert p.returncode != 0 and "127.0.0.1:9" in p.stderr, p.stderr
        p = tenk(dict(env, TENK_CLUSTER="local"), "queue")
        assert p.returncode == 0, p.stderr
        # the flag and the variable still come first
        p = tenk(dict(env, TENK_SERVER=t.url, TENK_TOKEN=t.token,
                      **({"TENK_CA": t.ca} if t.ca else {})), "queue")
        assert p.returncode == 0, p.stderr
        tenk(env, "config", "use-cluster", "local")
        assert tenk(env, "queue").returncode == 0
        # what is wrong, said
        for args, code, why in (
                (["config", "use-cluster", "nope"], 1, 'no cluster "nope"'),
                (["config", "set-cluster", "new"], 2, "a new cluster needs --server URL"),
                (["config", "set-cluster", "x", "--server", "https://h:1", "--token-file",
                  "/no/such"], 2, "--token-file: cannot read /no/such"),
                (["config", "frob"], 2, 'no such subcommand "frob"'),
                (["config", "use-cluster"], 2, "use-cluster: name the cluster")):
            p = tenk(env, *args)
            assert p.returncode == code and why in p.stderr, (args, p.returncode, p.stderr)
        p = tenk(dict(env, TENK_CLUSTER="nope"), "queue")
        assert p.returncode == 2 and 'no cluster "nope"' in p.stderr, p.stderr
        assert tenk(env, "config", "delete-cluster", "far").stdout == "removed cluster far\n"
        assert "far" not in json.load(open(path))["clusters"]
        # a configuration that is not tenk's is named, not trusted
        with open(path, "w") as f:
            f.write("[1, 2]")
        p = tenk(env, "queue")
        assert p.returncode == 2 and "not tenk's configuration" in p.stderr, p.stderr
        tenk(dict(env, TENK_SERVER=t.url, TENK_TOKEN=t.token,
                  **({"TENK_CA": t.ca} if t.ca else {})), "cancel", jid)
    finally:
        d.stop()
