"""Bad input of every kind gets a clear 4xx that names the problem, changes
nothing, and leaves the server serving."""
import socket
import ssl
import urllib.parse

BODY = {"command": ["true"], "cwd": "/tmp"}


def raw_request(t, head, body_chunks=(), read_first=False, sent=None):
    """Sends a hand-made request to cluster t (over TLS where it serves
    HTTPS); returns the status line and the rest. sent (a list) gets how
    many of body_chunks went before the server closed the connection."""
    u = urllib.parse.urlparse(t.url)
    s = socket.create_connection((u.hostname, u.port), timeout=30)
    if u.scheme == "https":
        s = ssl.create_default_context(cafile=t.ca).wrap_socket(s, server_hostname=u.hostname)
    s.sendall(head.encode())
    got = b""
    if read_first:
        got = s.recv(65536)
    n = 0
    try:
        for chunk in body_chunks:
            s.sendall(chunk)
            n += 1
    except OSError:  # the server closed it (under TLS: an SSL error)
        pass
    if sent is not None:
        sent.append(n)
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
            if b"\r\n\r\n" in got and b"}" in got:
                break
    except OSError:
        pass
    s.close()
    return got.decode(errors="replace")


def test_bad_bodies(cluster):
    cases = [
        (b"{not json", 400, "body: invalid JSON at line 1"),
        (b"", 400, "body: expected a JSON object, got nothing"),
        (b"[1,2]", 400, "body: expected a JSON object"),
        (b'{"command": ["true"], "cwd": "/tmp", "command": ["x"]}', 400, "duplicate"),
    ]
    for raw, status, msg in cases:
        st, res = cluster.api("POST", "/v1/jobs", raw=raw)
        assert st == status, (raw, res)
        assert msg in res["error"], (raw, res)
        assert res["status"] == status
    fields = [
        ({"bogus": 1}, "bogus: unknown field"),
        ({"nodes": -1}, "nodes: must be an integer from 1 to 4096, got -1"),
        ({"nodes": 10**15}, "nodes: must be an integer from 1 to 4096, got 1000000000000000"),
        ({"nodes": 10**30}, "nodes: too big integer"),
        ({"nodes": "2"}, "nodes: must be an integer from 1 to 4096, got a string"),
        ({"gpus_per_task": -0.5}, "gpus_per_task: must be a number from 0 to 64"),
        ({"gpus_per_task": 1e300}, "gpus_per_task: must be a number from 0 to 64"),
        ({"time_limit_s": -5}, "time_limit_s: must be an integer from 0"),
        ({"gpu_types": ["B9000"]}, 'gpu_types[0]: unknown model "B9000"; known: '),
        ({"cwd": "relative"}, "cwd: must be an absolute path"),
        ({"command": []}, "command: must not be empty"),
        ({"env": {"K": 5}}, "env.K: must be a string"),
    ]
    for extra, msg in fields:
        body = dict(BODY, **extra)
        st, res = cluster.api("POST", "/v1/jobs", body)
        assert st == 400, (extra, res)
        assert res["error"].startswith(msg), (extra, res["error"])
    st, res = cluster.api("GET", "/v1/jobs")
    assert st == 200 and res["total"] == 0, "nothing malformed created a job"


def test_oversized_bodies(cluster):
    url = cluster.url
    host = urllib.parse.urlparse(url).netloc
    # announced as 100 MB: refused before a byte of it is read
    head = (f"POST /v1/jobs HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {cluster.token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {100 * 1024 * 1024}\r\n\r\n")
    got = raw_request(cluster, head, read_first=True)
    assert " 413 " in got.split("\r\n")[0], got
    assert "body: larger than the limit" in got
    # sent chunked, 100 MB in all: read up to the limit, refused, and the
    # connection closed then, not read to its end
    head = (f"POST /v1/jobs HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {cluster.token}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = b"x" * (1024 * 1024)
    chunk = b"%x\r\n" % len(piece) + piece + b"\r\n"
    sent = []
    got = raw_request(cluster, head, [chunk] * 100 + [b"0\r\n\r\n"], sent=sent)
    assert sent[0] < 50, f"the server read {sent[0]} MiB of a body over its limit"
    assert got == "" or " 413 " in got.split("\r\n")[0], got[:200]
    st, res = cluster.api("GET", "/v1/health", token=None)
    assert st == 200 and res["ok"]
    assert cluster.api("GET", "/v1/jobs")[1]["total"] == 0


def test_tokens_and_roles(cluster):
    st, res = cluster.api("GET", "/v1/jobs", token=None)
    assert st == 401 and "missing token" in res["error"]
    st, res = cluster.api("GET", "/v1/jobs", token="not-the-token")
    assert st == 401 and res["error"] == "invalid token"
    st, res = cluster.api("GET", "/v1/jobs", headers={"Authorization": "Basic abc"}, token=None)
    assert st == 401
    agent_token = open(cluster.data + "/agent.token").read().strip()
    st, res = cluster.api("GET", "/v1/jobs", token=agent_token)
    assert st == 403 and "is for a viewer" in res["error"]
    st, res = cluster.api("POST", "/v1/agent/register", {"agent_id": "0" * 32})
    assert st == 403 and "is for an agent" in res["error"]
    p = cluster.run("queue", check=False, env=dict(cluster.env(), TENK_TOKEN="wrong"))
    assert p.returncode == 1 and "invalid token" in p.stderr


def test_routes_and_parameters(cluster):
    assert cluster.api("GET", "/v1/nope")[0] == 404
    st, res = cluster.api("DELETE", "/v1/jobs")
    assert st == 405 and "method DELETE is not allowed" in res["error"]
    st, res = cluster.api("GET", "/v1/jobs/abc")
    assert st == 400 and 'job id must be a positive integer or ID_INDEX, got "abc"' in res["error"]
    st, res = cluster.api("GET", "/v1/jobs/99")
    assert st == 404 and res["error"] == "no job 99"
    st, res = cluster.api("GET", "/v1/jobs?state=SLEEPING")
    assert st == 400 and res["error"].startswith("state: expected")
    st, res = cluster.api("GET", "/v1/jobs?limit=0")
    assert st == 400 and res["error"].startswith("limit: must be")
    jid = cluster.submit("--", "true")
    st, res = cluster.api("GET", f"/v1/jobs/{jid}?wait=9999")
    assert st == 400 and res["error"].startswith("wait: must be")
    st, res = cluster.api("POST", "/v1/nodes/node1/drain", {})
    assert st == 400 and res["error"] == "reason: required field is missing"
    st, res = cluster.api("POST", "/v1/nodes/node1/drain", {"reason": ""})
    assert st == 400 and "must say why" in res["error"]
    st, res = cluster.api("POST", "/v1/nodes/ghost/drain", {"reason": "x"})
    assert st == 404 and res["error"] == 'no node "ghost"'
    assert cluster.json("nodes")["nodes"][0]["state"] == "UP"


def test_agent_endpoints_reject_bad_reports(cluster):
    agent = open(cluster.data + "/agent.token").read().strip()
    st, res = cluster.api("POST", "/v1/agent/register",
                          {"agent_id": "ab" * 8, "inventory": {"name": "x y", "cpus": 1,
                                                               "mem_mib": 1}}, token=agent)
    assert st == 400 and res["error"].startswith('inventory.name: "x y" is not a valid node name')
    st, res = cluster.api("POST", "/v1/agent/register",
                          {"agent_id": "ab" * 8, "inventory": {"name": "n2", "cpus": 1,
                                                               "mem_mib": 1,
                                                               "accelerators": [{"index": 5, "uuid": "u",
                                                                                 "model": "H100"}]}},
                          token=agent)
    assert st == 400 and res["error"].startswith("inventory.accelerators[0].index")
    node = cluster.json("nodes")["nodes"][0]
    jid = cluster.submit("--", "sleep", "30")
    cluster.wait_state(jid, "RUNNING")
    # one good event and one bad: nothing is applied
    events = [{"job": jid, "attempt": 1, "rank": 0, "type": "exited", "at_ms": 1, "exit_code": 0},
              {"job": jid, "attempt": 1, "rank": 0, "type": "vanished", "at_ms": 1}]
    st, res = cluster.api("POST", "/v1/agent/events",
                          {"node": "node1", "agent_id": node["agent_id"], "events": events},
                          token=agent)
    assert st == 400 and res["error"].startswith('events[1].type: must be "started", "exited", "pulling", "image", "checkpoint", "restored", "ready" or "unready", got "vanished"')
    assert cluster.job(jid)["state"] == "RUNNING"
    # the join token only registers
    st, res = cluster.api("POST", "/v1/agent/heartbeat",
                          {"node": "node1", "agent_id": node["agent_id"]}, token=agent)
    assert st == 403 and "the join token only registers a node" in res["error"], res
    # an agent that is not the registered one is told to register
    cred = open(cluster.data + "-work/node.credential").read().strip()
    st, res = cluster.api("POST", "/v1/agent/heartbeat",
                          {"node": "node1", "agent_id": "cd" * 8}, token=cred)
    assert st == 409 and "register again" in res["error"]
    assert len(cluster.json("nodes")["nodes"]) == 1
    cluster.run("cancel", jid)


def test_agent_protocol_versions(cluster):
    """A server serves agents of its protocol and the one before (an agent
    that says none is of version 1), refuses a newer one saying to upgrade
    the servers first, and ignores keys it does not know in an agent's
    messages while it refuses known keys that are malformed."""
    agent = open(cluster.data + "/agent.token").read().strip()
    inv = {"name": "vnode", "cpus": 1, "mem_mib": 64}
    st, res = cluster.api("POST", "/v1/agent/register",
                          {"agent_id": "ef" * 8, "inventory": inv, "protocol": 99}, token=agent)
    assert st == 400 and "newer than this server's" in res["error"] and \
        "upgrade the servers first" in res["error"], res
    st, res = cluster.api("POST", "/v1/agent/register",
                          {"agent_id": "ef" * 8, "inventory": inv, "protocol": 0}, token=agent)
    assert st == 400 and res["error"].startswith("protocol: must be an integer from 1"), res
    # a newer agent's keys, at the top and inside the inventory, are ignored
    st, res = cluster.api("POST", "/v1/agent/register",
                          {"agent_id": "ef" * 8, "inventory": dict(inv, gpu_fabric="x"),
                           "next_feature": {"a": 1}}, token=agent)
    assert st == 200 and res["node"] == "vnode", res
    # it said no protocol: the answer holds only what protocol 1 reads
    assert "protocol" not in res, res
    cred = res["credential"]
    st, res2 = cluster.api("POST", "/v1/agent/register",
                           {"agent_id": "ab" * 8, "inventory": dict(inv, name="vnode2"),
                            "protocol": 2}, token=agent)
    assert st == 200 and res2["protocol"] >= 2, res2
    st, res = cluster.api("POST", "/v1/agent/heartbeat",
                          {"node": "vnode", "agent_id": "ef" * 8, "next_feature": True},
                          token=cred)
    assert st == 200, res
    st, res = cluster.api("POST", "/v1/agent/heartbeat",
                          {"node": "vnode", "agent_id": "ef" * 8, "stopping": "yes"}, token=cred)
    assert st == 400 and res["error"].startswith("stopping"), res
    # the build says what it is
    import re
    out = cluster.run("version").stdout.strip()
    assert re.fullmatch(r"tenk \d+\.\d+\.\d+ \(build \S+\)", out), out


def test_cli_usage_errors(cluster):
    cases = [
        (["submit"], "missing arguments"),
        (["submit", "-N", "0", "--", "true"], '--nodes: must be an integer from 1 to 4096, got "0"'),
        (["submit", "--time", "soon", "--", "true"], "--time: expected minutes (90), 90s"),
        (["submit", "-t", "1-24", "--", "true"], "D-HH:MM:SS or UNLIMITED, got \"1-24\""),
        (["submit", "--mem", "lots", "--", "true"], "--mem: expected a size"),
        (["submit", "-G", "x", "--", "true"], '--gpus: must be a number of accelerators, got "x"'),
        (["submit", "--gpus-per-task", "x", "--", "true"],
         '--gpus-per-task: must be a number from 0 to 64, got "x"'),
        (["submit", "--bogus", "--", "true"], "unknown option --bogus"),
        (["submit", "--export", "SOME", "--", "true"], "--export: must be ALL or NONE"),
        (["show", "abc"], 'by ID_INDEX (12_7); got "abc"'),
        (["drain", "node1"], "--reason TEXT is required"),
        (["queue", "extra"], 'unexpected argument "extra"'),
        (["wait", "1", "--timeout", "x"], "--timeout: expected a duration"),
    ]
    for args, msg in cases:
        p = cluster.run(*args, check=False)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert msg in p.stderr, (args, p.stderr)
        assert "usage: tenk" in p.stderr
    p = cluster.run("frobnicate", check=False)
    assert p.returncode == 2 and 'unknown command "frobnicate"' in p.stderr
    p = cluster.run("submit", "--gpus-per-task", "0.5", "-N", "2", "--", "true", check=False)
    assert p.returncode == 2 and "fractional accelerator" in p.stderr
    p = cluster.run("queue", check=False, env={"PATH": "/usr/bin:/bin"}, cwd="/")
    assert p.returncode == 2 and "no server given" in p.stderr
    assert cluster.run("submit", "--help").stdout.startswith("usage: tenk submit")
    # tenk help COMMAND is COMMAND --help
    assert cluster.run("help", "submit").stdout == cluster.run("submit", "--help").stdout
    p = cluster.run("help", "frobnicate", check=False)
    assert p.returncode == 2 and 'tenk help: unknown command "frobnicate"' in p.stderr
    # Slurm's -t UNLIMITED: no time limit
    jid = cluster.submit("-H", "-t", "UNLIMITED", "--", "true")
    assert cluster.job(jid)["request"].get("time_limit_s", 0) == 0
    cluster.run("cancel", jid)
    # numbers without float noise, in the API and under --json
    jid = cluster.submit("-G", "0.3", "--", "true")
    shown = cluster.run("show", jid, "--json").stdout
    assert '"gpus_per_task": 0.3' in shown and "0.2999" not in shown, shown
    # -t as Slurm reads it, and show says what it understood
    for given, want in (("90", "01:30:00 (5400 s)"), ("2-12", "2-12:00:00 (216000 s)")):
        jid = cluster.submit("-t", given, "--", "true")
        assert cluster.job(jid)["request"]["time_limit_s"] == int(want.split("(")[1][:-3])
        assert f"time {want}" in cluster.run("show", jid).stdout
    assert "submit" in cluster.run("help").stdout


def test_catalogue_overrides(workdir):
    import json
    import os
    from conftest import Daemon, start_up
    data = os.path.join(workdir, "tenk-data")
    os.makedirs(data)
    with open(os.path.join(data, "catalogue.json"), "w") as f:
        json.dump({"models": [{"name": "H100", "price_per_hour": 2.25},
                              {"name": "X1", "mem_mib": 1024, "tflops": 10}]}, f)
    t, d = start_up(workdir)
    st, res = t.api("GET", "/v1/catalogue")
    models = {m["name"]: m for m in res["models"]}
    assert models["H100"]["price_per_hour"] == 2.25 and models["H100"]["mem_mib"] == 81559
    assert models["X1"]["tflops"] == 10
    jid = t.submit("--hold-if-impossible", "--gpu-type", "X1", "-G", "1", "--", "true")
    assert t.job(jid)["state"] == "PENDING"
    t.run("cancel", jid)
    d.stop()
    with open(os.path.join(data, "catalogue.json"), "w") as f:
        f.write('{"models": [{"name": "H100", "tflops": -1}]}')
    bad = Daemon(["server", "--data", data, "--listen", "127.0.0.1:0"], workdir, "bad")
    assert bad.proc.wait(timeout=20) == 1
    assert "models[0].tflops: must be a number from 0" in bad.output()
