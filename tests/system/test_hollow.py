"""Hollow nodes (`tenk agent --hollow N`) beside a real agent, against the
real server: they register, take work (a gang across them too), report
exits as their commands say, stop what is cancelled, and when their process
dies they are UNREACHABLE (most of their witness group is silent) and
their jobs held until an operator says a node is down; the real node's jobs
run as before beside them."""
import os

from conftest import Daemon, start_up, wait_for


def test_hollow_nodes_beside_a_real_one(workdir, procs):
    t, d = start_up(workdir, "--node-timeout", "4s", fake="2xH100")
    h = Daemon(["agent", "--server", t.url, "--token-file",
                os.path.join(t.data, "agent.token"), "--hollow", "3", "--fake-gpus",
                "8xH100", "--name", "hol"], workdir, "hollow")
    procs.append(h)
    t.wait_nodes_up(4)
    nodes = {n["name"]: n for n in t.json("nodes")["nodes"]}
    assert set(nodes) == {"node1", "hol-00000", "hol-00001", "hol-00002"}, nodes
    assert len(nodes["hol-00002"]["accelerators"]) == 8

    gang = t.submit("-N", "3", "--gpus-per-task", "8", "--", "sleep", "0.5")
    fail = t.submit("-w", "hol-00001", "--", "false")
    real = t.submit("-w", "node1", "--", "sh", "-c", "echo on-the-real-node")
    for jid, state in ((gang, "COMPLETED"), (fail, "FAILED"), (real, "COMPLETED")):
        t.run("wait", jid, check=False, timeout=60)
        assert t.job(jid)["state"] == state, t.job(jid)
    att = t.job(gang)["attempts"][0]
    assert sorted(n["name"] for n in att["nodes"]) == ["hol-00000", "hol-00001", "hol-00002"]
    assert t.job(fail)["exit_code"] == 1
    out = open(os.path.join(workdir, f"tenk-{real}.out")).read()
    assert "on-the-real-node" in out

    # cancelled while it "runs": it ends, and the node is free again
    long = t.submit("-x", "node1", "-G", "8", "--", "sleep", "600")
    t.wait_state(long, "RUNNING")
    t.run("cancel", long)
    t.wait_state(long, "CANCELLED")
    wait_for(lambda: all(not n["jobs"] for n in t.json("nodes")["nodes"]), 20, "nodes free")

    # the hollow process dies: three of the four nodes of the one witness
    # group fall silent, which the server cannot tell from its own cut, so
    # they are UNREACHABLE and what ran there is held (fence.h)
    again = t.submit("-x", "node1", "-G", "8", "--requeue", "1", "--", "sleep", "600")
    t.wait_state(again, "RUNNING")
    where = t.job(again)["attempts"][0]["nodes"][0]["name"]
    h.kill9()
    wait_for(lambda: all(n["state"] == "UNREACHABLE" for n in t.json("nodes")["nodes"]
                         if n["name"].startswith("hol-")), 30, "hollow nodes UNREACHABLE")
    assert t.job(again)["state"] == "RUNNING"
    # an operator who knows better says it is dead: now its job moves
    p = t.run("nodes", "down", where, check=False)
    assert p.returncode == 2 and "say --yes when you know it is dead" in p.stderr, p.stderr
    p = t.run("nodes", "down", "node1", "--yes", check=False)
    assert p.returncode == 1 and "not known dead" in p.stderr, p.stderr
    t.run("nodes", "down", where, "--yes")
    j = t.wait_state(again, "PENDING")
    assert "lost" in j["attempts"][0]["reason"], j["attempts"][0]
    assert {n["name"]: n["state"] for n in t.json("nodes")["nodes"]}["node1"] == "UP"
    t.run("cancel", again)

    # a clean stop of another hollow process: it exits 0, nothing leaks
    h2 = Daemon(["agent", "--server", t.url, "--token-file",
                 os.path.join(t.data, "agent.token"), "--hollow", "2", "--fake-gpus",
                 "4xA100-80GB", "--name", "hb"], workdir, "hollow2")
    procs.append(h2)
    wait_for(lambda: sum(n["state"] == "UP" for n in t.json("nodes")["nodes"]
                         if n["name"].startswith("hb-")) == 2, 20, "hb nodes UP")
    ok = t.submit("-x", "node1", "--", "sleep", "0.2")
    t.run("wait", ok, timeout=60)
    h2.stop()
    # refused, saying why
    for args, want in ((["--hollow", "0", "--fake-gpus", "8xH100"], "--hollow: a number"),
                       (["--hollow", "2"], "give the nodes' devices with --fake-gpus")):
        p = t.run(*(["agent", "--server", t.url, "--token-file",
                     os.path.join(t.data, "agent.token")] + args), check=False, timeout=20)
        assert p.returncode == 2 and want in p.stderr, (p.returncode, p.stderr)
    d.stop()


def test_heartbeat_interval(workdir, procs):
    """--heartbeat sets how often a node reports, an eighth of the node
    timeout at most; a bad one is refused with what is wrong."""
    t, d = start_up(workdir, "--node-timeout", "80s", fake="1xH100")

    def beats():
        status, text = t.api("GET", "/metrics")
        assert status == 200
        for line in text.splitlines():
            if line.startswith("tenk_http_request_duration_seconds_count") and \
                    'route="/v1/agent/heartbeat"' in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    h = Daemon(["agent", "--server", t.url, "--token-file",
                os.path.join(t.data, "agent.token"), "--hollow", "4", "--fake-gpus",
                "8xH100", "--name", "hb", "--heartbeat", "1s"], workdir, "hollow")
    procs.append(h)
    t.wait_nodes_up(5)
    b0 = beats()
    wait_for(lambda: beats() - b0 >= 16, 6, "four nodes beating every second")
    bad = t.run("agent", "--server", t.url, "--token-file",
                os.path.join(t.data, "agent.token"), "--hollow", "1", "--fake-gpus",
                "1xH100", "--heartbeat", "soon", check=False)
    assert bad.returncode != 0
    assert '--heartbeat: expected a duration from 1s to 1h such as 10s, got "soon"' \
        in bad.stderr
