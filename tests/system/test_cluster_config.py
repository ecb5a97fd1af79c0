"""The cluster's configuration, versioned (tenk config show | history |
apply | set | unset | rollback; issue 44, point 4): every change checked
whole before anything changes, applied to the running server with jobs
waiting and running, kept with who, when and why, audited, written back to
config.json; SIGHUP reads the file again; a start puts the file and the
store's versions together."""
import json
import os
import signal

from conftest import Daemon, server_and_agent, wait_for


def config_file(t):
    with open(os.path.join(t.data, "config.json")) as f:
        return json.load(f)


def versions(t):
    return t.json("config", "history")["versions"]


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)


URGENT = {"name": "urgent", "priority": 200, "may_preempt": True}
BUILT_IN = [{"name": "prod", "priority": 100, "may_preempt": True},
            {"name": "service", "priority": 80, "may_preempt": True},
            {"name": "normal", "priority": 50},
            {"name": "batch", "priority": 10, "preemptible": True}]


def test_config_versions_apply_set_rollback_and_restart(workdir, procs):
    t, server, agent = server_and_agent(workdir, procs, "30s")
    first = t.json("config", "show")
    assert first["version"] == 1 and first["who"] == "tenk", first
    assert first["config"] == config_file(t) and first["config"]["allow_root_jobs"] is True
    # a class the cluster lacks is refused at submission
    p = t.run("submit", "--class", "urgent", "--", "true", check=False)
    assert p.returncode != 0 and 'no class "urgent"' in p.stderr, p.stderr
    # jobs wait and run while the configuration changes under them
    big = t.submit("-G", "8", "--", "sleep", "300")
    t.wait_state(big, "RUNNING")
    waiting = [t.submit("-G", "4", "--", "true") for _ in range(2)]
    # apply: a new class, the built-in ones kept
    new = dict(first["config"], classes=BUILT_IN + [URGENT], default_class="normal")
    path = os.path.join(workdir, "new.json")
    write_json(path, new)
    out = t.run("config", "apply", path, "--why", "an urgent class").stdout
    assert "configuration version 2 in force (changed: classes, default_class)" in out, out
    assert config_file(t) == new  # the file follows
    with open(os.path.join(t.data, "config.version")) as f:
        assert f.read().strip() == "2"
    for j in waiting:  # still waiting, in their class, in order
        assert t.job(j)["state"] == "PENDING" and t.job(j)["class"] == "normal"
    assert t.job(big)["state"] == "RUNNING"
    urgent = t.submit("--class", "urgent", "-G", "1", "--", "sleep", "300")
    # urgent preempts nothing preemptible here: it waits behind the big job
    assert t.job(urgent)["class"] == "urgent"
    # set: one key, a nested one; its JSON value
    out = t.run("config", "set", "gpu_health.temp_c", "80").stdout
    assert "version 3 in force (changed: gpu_health)" in out, out
    assert "gpu_health: in force in the server; each agent takes it when it next" in out, out
    assert config_file(t)["gpu_health"] == {"temp_c": 80}
    # the same again changes nothing and makes no version
    out = t.run("config", "set", "gpu_health.temp_c", "80").stdout
    assert "no change: version 3" in out, out
    # refused whole, nothing changed: a bad setting, a class in use going
    bad = dict(new, default_class="nope")
    write_json(path, bad)
    p = t.run("config", "apply", path, check=False)
    assert p.returncode != 0 and "nope" in p.stderr, p.stderr
    p = t.run("config", "set", "gpu_health.temp_c", "hot", check=False)
    assert p.returncode != 0 and "temp_c" in p.stderr, p.stderr
    code, ans = t.api("PATCH", "/v1/config", {"set": {"classes": BUILT_IN}})
    assert code == 409 and ans["reason"] == "in_use", ans
    assert 'class "urgent"' not in ans["error"] and '"urgent"' in ans["error"], ans
    assert f"job {urgent}" in ans["error"], ans
    broken = os.path.join(workdir, "broken.json")
    with open(broken, "w") as f:
        f.write('{"classes": [')
    p = t.run("config", "apply", broken, check=False)
    assert p.returncode != 0 and "nothing was sent" in p.stderr, p.stderr
    assert [v["version"] for v in versions(t)] == [1, 2, 3]
    assert config_file(t)["gpu_health"] == {"temp_c": 80}
    # rollback: version 1 again, once the urgent job is gone
    t.run("cancel", urgent)
    t.wait_state(urgent, "CANCELLED")
    p = t.run("config", "rollback", "--before", "1h", check=False)
    assert p.returncode != 0 and "no configuration was in force then" in p.stderr, p.stderr
    out = t.run("config", "rollback", "1", "--why", "back to the start").stdout
    assert "version 4 in force" in out, out
    hist = versions(t)
    assert [v["who"] for v in hist] == ["tenk", "admin", "admin", "admin"], hist
    assert hist[1]["why"] == "an urgent class" and hist[2]["why"] == "set gpu_health.temp_c"
    assert hist[3]["why"] == "rollback to version 1: back to the start", hist
    assert set(hist[3]["changed"]) == {"classes", "default_class", "gpu_health"}, hist
    assert t.json("config", "show")["config"] == first["config"] == config_file(t)
    assert t.json("config", "show", "--version", "2")["config"] == new
    p = t.run("submit", "--class", "urgent", "--", "true", check=False)
    assert p.returncode != 0 and 'no class "urgent"' in p.stderr, p.stderr
    text = t.run("config", "history").stdout
    assert "back to the start" in text and "* 4" in text, text
    # every change audited, with its caller; refusals too
    rows = t.json("audit")["rows"]
    calls = [(r["method"], r["path"], r["status"]) for r in rows if "config" in r["path"]]
    assert ("PUT", "/v1/config", 200) in calls and ("PATCH", "/v1/config", 409) in calls
    assert ("POST", "/v1/config/rollback", 200) in calls, calls
    # jobs never noticed: the big one runs, the waiting ones start once it ends
    assert t.job(big)["state"] == "RUNNING"
    t.run("cancel", big)
    for j in waiting:
        t.wait_state(j, "COMPLETED")
    # a restart keeps the version in force; a file edited while the server
    # is down is a new version, by the file
    server.stop()
    agent.stop()
    assert [v["version"] for v in versions_after_restart(t, workdir, procs)] == [1, 2, 3, 4]
    procs[-1].stop()
    edited = dict(first["config"], classes=BUILT_IN + [URGENT])
    write_json(os.path.join(t.data, "config.json"), edited)
    hist = versions_after_restart(t, workdir, procs)
    assert [v["version"] for v in hist] == [1, 2, 3, 4, 5], hist
    assert hist[-1]["who"] == "config.json" and hist[-1]["changed"] == ["classes"], hist
    t.run("submit", "--class", "urgent", "--hold", "--", "true")
    procs[-1].stop()
    # a file the server wrote, left behind by a newer version (a copy, or a
    # crash between the commit and the write): the newest version wins
    write_json(os.path.join(t.data, "config.json"), new)
    with open(os.path.join(t.data, "config.version"), "w") as f:
        f.write("2\n")
    hist = versions_after_restart(t, workdir, procs)
    assert len(hist) == 5 and config_file(t) == edited, hist
    assert any(c["name"] == "urgent" for c in t.json("classes")["classes"])
    procs[-1].stop()  # cleanly: no leak, no sanitizer report


def versions_after_restart(t, workdir, procs):
    url = os.path.join(t.data, "server.url")
    if os.path.exists(url):
        os.remove(url)
    server = Daemon(["server", "--data", t.data, "--listen", "127.0.0.1:0",
                     "--node-timeout", "30s"], workdir, "server")
    procs.append(server)
    wait_for(lambda: os.path.exists(os.path.join(t.data, "server.url")) or not server.alive(), 20,
             "the server")
    assert server.alive(), server.output()
    return versions(t)


def test_sighup_applies_a_new_class_and_refuses_a_broken_file(workdir, procs):
    t, server, agent = server_and_agent(workdir, procs, "30s")
    path = os.path.join(t.data, "config.json")
    cfg = config_file(t)
    cfg["classes"] = BUILT_IN + [URGENT]
    write_json(path, cfg)
    server.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: len(versions(t)) == 2, 20, "version 2 from SIGHUP")
    v = versions(t)[-1]
    assert v["who"] == "SIGHUP" and v["changed"] == ["classes"], v
    j = t.submit("--class", "urgent", "--", "true")
    t.wait_state(j, "COMPLETED")
    # a broken file changes nothing, and says so
    with open(path, "w") as f:
        f.write('{"classes": [{"name": "x", "priority": "high"}]}')
    server.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "nothing changed, version 2 stands" in server.output(), 20, "the refusal")
    assert "priority" in server.output().split("nothing changed, version 2 stands")[0][-400:]
    assert len(versions(t)) == 2 and server.alive()
    t.wait_state(t.submit("--class", "urgent", "--", "true"), "COMPLETED")
    rows = [r for r in t.json("audit")["rows"] if r["method"] == "SIGHUP"]
    assert [r["status"] for r in rows] == [200, 400], rows
    assert rows[0]["result"] == "version 2" and "priority" in rows[1]["result"], rows
    # the same file again: nothing to change
    write_json(path, cfg)
    server.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "nothing to change" in server.output(), 20, "the unchanged reload")
    assert len(versions(t)) == 2
    agent.stop()
    server.stop()


def test_default_image_goes_back_with_the_configuration(workdir, procs):
    """The cluster's default image is part of its configuration: jobs that
    name none get it, pinned in their request; going back to an earlier
    version takes the image back with the rest, in one command."""
    t, server, agent = server_and_agent(workdir, procs, "30s")
    before = t.submit("--hold", "--", "true")
    assert t.job(before)["request"].get("image") is None
    p = t.run("config", "set", "default_image", "Not An Image", check=False)
    assert p.returncode != 0 and "not an image reference" in p.stderr, p.stderr
    t.run("config", "set", "allowed_images", '["registry.example/ml/*"]')
    p = t.run("config", "set", "default_image", "other.example/x:1", check=False)
    assert p.returncode != 0 and "not among allowed_images" in p.stderr, p.stderr
    t.run("config", "set", "default_image", "registry.example/ml/train:2")
    j = t.submit("--hold", "--", "true")
    assert t.job(j)["request"]["image"] == "registry.example/ml/train:2"
    own = t.submit("--hold", "--image", "registry.example/ml/eval:1", "--", "true")
    assert t.job(own)["request"]["image"] == "registry.example/ml/eval:1"
    t.run("config", "rollback", "1")
    after = t.submit("--hold", "--", "true")
    assert t.job(after)["request"].get("image") is None
    assert t.job(j)["request"]["image"] == "registry.example/ml/train:2"  # its own, kept
    assert "default_image" not in t.json("config", "show")["config"]
    agent.stop()
    server.stop()
