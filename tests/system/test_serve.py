"""Services (tenk serve): replicas of a real HTTP server (Python's
http.server) kept live on their $PORT, probed by the agent, listed as
endpoints once their probe passes; a replica made unhealthy leaves the
endpoints within a probe period and is replaced, one killed is replaced,
scaling down drains the newest, delete ends them all; bad input is named.
Through the service's own address (the agent's forwarder), a client loop
sees no error while replicas fail and are replaced, and a request to a
service at zero replicas waits for one; a rolling update to a new command
refuses no request, and one to a broken command stops at its first
replica and rolls back. Scaled with load, from zero on the first request;
a service takes back a GPU training borrowed, and the job loses nothing;
idle GPUs are set to their lowest power limit and woken before work."""
import http.client
import os
import re
import signal
import threading
import time
import urllib.request

from conftest import BIN, Daemon, Tenk, root_jobs_config, server_and_agent, wait_for
from images import free_port

REPLICA = r'''
import http.server, os, sys
JOB = os.environ["TENK_JOB_ID"]
SICK = os.path.join(sys.argv[1], "sick-" + JOB)
VERSION = sys.argv[2] + " " if len(sys.argv) > 2 else ""
with open(os.path.join(sys.argv[1], "pid-" + JOB), "w") as f:
    f.write(str(os.getpid()))
print("replica of job", JOB, "serving on", os.environ["PORT"], flush=True)

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        sick = self.path == "/healthz" and os.path.exists(SICK)
        body = ("sick" if sick else VERSION + "job=" + JOB).encode()
        self.send_response(500 if sick else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass

http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["PORT"])), H).serve_forever()
'''


def healthy(t):
    try:
        return t.api("GET", "/v1/health", token=None)[0] == 200
    except (OSError, http.client.HTTPException):
        return False


def endpoints(t, name):
    st, body = t.api("GET", f"/v1/services/{name}/endpoints")
    assert st == 200, body
    return body["endpoints"]


def get(ep, path="/"):
    with urllib.request.urlopen(f"http://{ep['addr']}:{ep['port']}{path}", timeout=5) as r:
        return r.status, r.read().decode()


def test_service_replicas_probed_replaced_scaled_deleted(cluster, workdir):
    t = cluster
    script = replica_script(workdir)
    p = t.run("serve", "create", "web", "--replicas", "3", "--health", "/healthz",
              "--probe-interval", "1s", "--probe-threshold", "2", "--", "python3", script,
              workdir)
    assert "web: " in p.stdout, p.stdout
    wait_for(lambda: len(endpoints(t, "web")) == 3, 60, "three replicas in rotation")
    eps = endpoints(t, "web")
    answers = {get(e)[1] for e in eps}
    assert answers == {f"job={e['job']}" for e in eps}, answers
    assert len({e["port"] for e in eps if e["node"] == eps[0]["node"]}) == 3  # a port each
    st, sv = t.api("GET", "/v1/services/web")
    assert st == 200 and sv["ready"] == 3 and sv["live"] == 3, sv
    for e in eps:
        j = t.job(e["job"])
        assert j["request"]["class"] == "service" and j["request"]["service"] == "web", j
    show = t.run("serve", "show", "web").stdout
    assert "web: 3/3 ready" in show and "GET /healthz every 1s" in show, show
    logs = t.run("serve", "logs", "web", "-n", "5").stdout
    for e in eps:
        assert f"==> job {e['job']}, version 1, RUNNING on {e['node']} <==" in logs, logs
        assert f"replica of job {e['job']} serving on {e['port']}" in logs, logs

    # made unhealthy: out of the endpoints within a probe period (and the
    # events' way), stopped after two failures, replaced
    sick = eps[0]["job"]
    open(os.path.join(workdir, f"sick-{sick}"), "w").close()
    t0 = time.monotonic()
    wait_for(lambda: sick not in [e["job"] for e in endpoints(t, "web")], 10,
             "the sick replica out of rotation")
    left = time.monotonic() - t0
    assert left < 3.0, left
    wait_for(lambda: t.job(sick)["state"] == "FAILED", 20, "the sick replica stopped")
    a = t.job(sick)["attempts"][-1]
    assert "unhealthy" in a["reason"] or "probe failed" in a["reason"], a
    wait_for(lambda: len(endpoints(t, "web")) == 3, 60, "a replacement in rotation")
    assert sick not in [e["job"] for e in endpoints(t, "web")]

    # killed: replaced too
    victim = endpoints(t, "web")[0]["job"]
    with open(os.path.join(workdir, f"pid-{victim}")) as f:
        os.kill(int(f.read()), signal.SIGKILL)
    wait_for(lambda: t.job(victim)["state"] in ("FAILED", "COMPLETED"), 20, "the killed one over")
    wait_for(lambda: len(endpoints(t, "web")) == 3 and
             victim not in [e["job"] for e in endpoints(t, "web")], 60, "another replacement")
    st, sv = t.api("GET", "/v1/services/web")
    assert sv["replaced"] == 2 and sv["made"] == 5, sv

    # scaled down: the newest cancelled
    live = [r["job"] for r in sv["replica_jobs"]]
    t.run("serve", "scale", "web", "1")
    wait_for(lambda: len(endpoints(t, "web")) == 1, 20, "one replica left")
    assert endpoints(t, "web")[0]["job"] == live[0]
    wait_for(lambda: all(t.job(j)["state"] == "CANCELLED" for j in live[1:]), 20,
             "the two drained, then cancelled")

    # bad input, named
    base = {"command": ["true"], "cwd": workdir}
    for body, status, says in [
        ({"name": "w2", "job": dict(base, nodes=2)}, 400, "one task on one node"),
        ({"name": "w2", "job": dict(base, time_limit_s=60)}, 400, "runs until it is replaced"),
        ({"name": "w2", "job": dict(base, probe={})}, 400, "job.probe: not for a service"),
        ({"name": "w2", "job": base, "probe": {"path": "x"}}, 400, "probe.path"),
        ({"name": "w2", "job": base, "replicas": 5000}, 400, "replicas"),
        ({"name": "web", "job": base}, 409, "service web exists"),
    ]:
        st, r = t.api("POST", "/v1/services", body)
        assert st == status and says in r["error"], (body, st, r)
    st, r = t.api("POST", "/v1/jobs", dict(base, service="web"))
    assert st == 400 and "tenk serve create" in r["error"], r
    st, r = t.api("GET", "/v1/services/nope")
    assert st == 404 and "no service" in r["error"], r
    p = t.run("serve", "create", "x", check=False)
    assert p.returncode == 2 and "give the replica's command after --" in p.stderr, p.stderr

    # deleted: its replicas end, and it is gone
    t.run("serve", "delete", "web")
    wait_for(lambda: t.api("GET", "/v1/services")[1]["services"] == [], 20, "the service gone")
    assert t.job(live[0])["state"] == "CANCELLED"
    assert "no services" in t.run("serve", "ls").stdout


def replica_script(workdir):
    """REPLICA written in workdir; its path."""
    script = os.path.join(workdir, "replica.py")
    with open(script, "w") as f:
        f.write(REPLICA)
    return script


class Client(threading.Thread):
    """Requests to the service's address one after the other, each on a
    new connection, until stopped: what answered, and every error."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/"
        self.answers, self.errors = [], []
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set() and len(self.answers) + len(self.errors) < 100000:
            try:
                with urllib.request.urlopen(self.url, timeout=10) as r:
                    self.answers.append(r.read().decode())
            except Exception as e:  # noqa: BLE001 (every failure counts)
                self.errors.append(repr(e))

    def stop(self):
        self.halt.set()
        self.join(30)


def test_service_address_forwards_through_failures_and_holds_at_zero(cluster, workdir):
    t = cluster
    script = replica_script(workdir)
    port = free_port()
    t.run("serve", "create", "api", "--replicas", "2", "--port", str(port), "--health",
          "/healthz", "--probe-interval", "1s", "--probe-threshold", "2", "--", "python3",
          script, workdir)
    wait_for(lambda: len(endpoints(t, "api")) == 2, 60, "two replicas in rotation")
    assert f"port {port} on every node" in t.run("serve", "ls").stdout
    c = Client(port)
    c.start()
    try:
        wait_for(lambda: len(set(c.answers)) == 2, 30, "both replicas answering")
        first = [e["job"] for e in endpoints(t, "api")]
        # made unhealthy: out of rotation, stopped, replaced
        open(os.path.join(workdir, f"sick-{first[0]}"), "w").close()
        wait_for(lambda: t.job(first[0])["state"] == "FAILED", 30, "the sick one stopped")
        wait_for(lambda: len(endpoints(t, "api")) == 2, 60, "its replacement in rotation")
        # no request failed while a replica was unhealthy and stopped
        assert c.errors == [], (c.errors[:5], len(c.answers))
        # killed: a request it held then is lost with it (no forwarder can
        # replay one), the next connections go to the other; replaced
        with open(os.path.join(workdir, f"pid-{first[1]}")) as f:
            os.kill(int(f.read()), signal.SIGKILL)
        wait_for(lambda: t.job(first[1])["state"] == "FAILED", 30, "the killed one over")
        wait_for(lambda: len(endpoints(t, "api")) == 2 and
                 not set(first) & {e["job"] for e in endpoints(t, "api")}, 60,
                 "two new replicas in rotation")
        now = {f"job={e['job']}" for e in endpoints(t, "api")}
        n = len(c.answers)
        wait_for(lambda: now <= set(c.answers[n:]), 30, "the new replicas answering")
    finally:
        c.stop()
    assert len(c.errors) <= 1, (c.errors[:5], len(c.answers))
    assert len(set(c.answers)) >= 4 and len(c.answers) > 50, (set(c.answers), len(c.answers))

    # at zero replicas a request waits for one
    t.run("serve", "scale", "api", "0")
    wait_for(lambda: endpoints(t, "api") == [] and
             t.api("GET", "/v1/services/api")[1]["live"] == 0, 20, "no replica")
    held = Client(port)
    held.start()
    time.sleep(1.0)
    assert held.answers == [] and held.errors == [], held.errors
    t.run("serve", "scale", "api", "1")
    wait_for(lambda: held.answers, 60, "the held request answered")
    held.stop()
    assert held.errors == [], held.errors[:3]
    t.run("serve", "delete", "api")


def test_rolling_update_refuses_nothing_and_rolls_back(cluster, workdir):
    t = cluster
    script = replica_script(workdir)
    port = free_port()
    t.run("serve", "create", "roll", "--replicas", "2", "--port", str(port), "--health",
          "/healthz", "--probe-interval", "1s", "--", "python3", script, workdir, "v1")
    wait_for(lambda: len(endpoints(t, "roll")) == 2, 60, "two replicas in rotation")
    c = Client(port)
    c.start()
    try:
        wait_for(lambda: len(set(c.answers)) == 2, 30, "both answering")
        t.run("serve", "update", "roll", "--", "python3", script, workdir, "v2")

        def state():
            return t.api("GET", "/v1/services/roll")[1]

        wait_for(lambda: state()["update"]["state"] == "done", 90, "the update done")
        sv = state()
        assert sv["version"] == 2 and sv["ready"] == 2, sv
        assert all(r["version"] == 2 for r in sv["replica_jobs"]), sv
        n = len(c.answers)
        wait_for(lambda: len(c.answers) > n + 20, 30, "answers after the update")
        assert all(a.startswith("v2 job=") for a in c.answers[n:]), set(c.answers[n:])
        assert c.errors == [], (c.errors[:5], len(c.answers))
        # a command that cannot start: the update stops at its first replica
        p = t.run("serve", "update", "roll", "--", "python3", "-c", "import sys; sys.exit(3)")
        assert "update: rolling, version 3 (from 2)" in p.stdout, p.stdout
        wait_for(lambda: state()["update"]["state"] == "rolled_back", 60, "the roll back")
        sv = state()
        u = sv["update"]
        assert sv["version"] == 2 and u["from_version"] == 3, sv
        assert "of version 3 ended before it passed its probe" in u["reason"], u
        wait_for(lambda: state()["ready"] == 2 and state()["live"] == 2, 30, "two of v2 again")
        assert all(r["version"] == 2 for r in state()["replica_jobs"]), state()
        n = len(c.answers)
        wait_for(lambda: len(c.answers) > n + 20, 30, "answers after the roll back")
    finally:
        c.stop()
    assert c.errors == [], (c.errors[:5], len(c.answers))
    assert all(a.startswith("v2 job=") for a in c.answers[n:]), set(c.answers[n:])
    show = t.run("serve", "show", "roll").stdout
    assert "update: rolled_back, version 2 (from 3)" in show, show
    # bad input, named
    p = t.run("serve", "update", "roll", check=False)
    assert p.returncode == 2 and "say what changes" in p.stderr, p.stderr
    p = t.run("serve", "update", "roll", "--replicas", "3", "--", "x", check=False)
    assert p.returncode == 2 and "tenk serve scale NAME N" in p.stderr, p.stderr
    st, r = t.api("POST", "/v1/services/roll/update", {"job": {"nodes": 2}})
    assert st == 400 and "one task on one node" in r["error"], r
    st, r = t.api("POST", "/v1/services/roll/update", {"job": {}, "max_surge": 0})
    assert st == 400 and "max_unavailable: one must be above 0" in r["error"], r
    st, r = t.api("POST", "/v1/services/roll/update", {"job": {}})
    assert st == 409 and "changes nothing" in r["error"], r
    t.run("serve", "delete", "roll")


def test_a_killed_server_keeps_its_services_and_their_replicas(workdir, procs):
    """The server killed (-9) and started again: the service, its replicas'
    jobs and its address are as they were; none is made again."""
    t, server, agent = server_and_agent(workdir, procs, "30s",
                                        listen=f"127.0.0.1:{free_port()}")
    script = replica_script(workdir)
    port = free_port()
    t.run("serve", "create", "kept", "--replicas", "2", "--port", str(port), "--health",
          "/healthz", "--probe-interval", "1s", "--", "python3", script, workdir)
    wait_for(lambda: len(endpoints(t, "kept")) == 2, 60, "two replicas in rotation")
    before = sorted(e["job"] for e in endpoints(t, "kept"))
    server.kill9()
    server.start()
    wait_for(lambda: healthy(t), 30, "the server back")
    wait_for(lambda: sorted(e["job"] for e in endpoints(t, "kept")) == before, 30,
             "the same replicas in rotation")
    st, sv = t.api("GET", "/v1/services/kept")
    assert sv["made"] == 2 and sv["live"] == 2 and sv["port"] == port, sv
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
        assert r.read().decode() in {f"job={j}" for j in before}
    t.run("serve", "delete", "kept")
    wait_for(lambda: t.api("GET", "/v1/services")[1]["services"] == [], 20, "the service gone")
    agent.stop()
    server.stop()


def test_autoscale_from_zero_with_load_and_back(workdir, procs):
    """--autoscale 0:3 --target-inflight 2: no replica while idle; the first
    request starts one and is answered by it; six clients at once make it
    three; idle again, none."""
    t, server, agent = server_and_agent(workdir, procs, "30s", agent_args=("--heartbeat", "1s"))
    try:
        script = replica_script(workdir)
        port = free_port()
        t.run("serve", "create", "auto", "--autoscale", "0:3", "--target-inflight", "2",
              "--scale-down-after", "3s", "--port", str(port), "--health", "/healthz",
              "--probe-interval", "1s", "--", "python3", script, workdir)

        def state():
            return t.api("GET", "/v1/services/auto")[1]

        time.sleep(1.0)
        assert state()["replicas"] == 0 and state()["live"] == 0, state()
        t0 = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
            assert r.read().decode().startswith("job=")
        first = time.monotonic() - t0
        assert first < 20, first
        assert state()["replicas"] == 1, state()
        clients = [Client(port) for _ in range(6)]
        for c in clients:
            c.start()
        try:
            wait_for(lambda: state()["replicas"] == 3, 30, "three replicas for six clients")
            wait_for(lambda: state()["ready"] == 3, 60, "three in rotation")
            # the load each beat carries: a client between two requests
            # holds no connection at that instant, so a beat may count fewer
            wait_for(lambda: state()["load"]["busy"] >= 3, 20, "three or more busy at a beat")
        finally:
            for c in clients:
                c.stop()
        assert sum(len(c.errors) for c in clients) == 0, [c.errors[:2] for c in clients]
        wait_for(lambda: state()["replicas"] == 0 and state()["live"] == 0, 60,
                 "none once idle")
        show = t.run("serve", "show", "auto").stdout
        assert "autoscaled 0:3 at 2 busy each" in show, show
        p = t.run("serve", "scale", "auto", "--autoscale", "2:1", "--target-inflight", "1",
                  check=False)
        assert p.returncode == 2 and "0 <= MIN <= MAX" in p.stderr, p.stderr
        st, r = t.api("POST", "/v1/services/auto/scale",
                      {"replicas": 1, "autoscale": {"min": 0, "max": 2, "target_inflight": 1}})
        assert st == 400 and "not both" in r["error"], r
        t.run("serve", "delete", "auto")
        print(f"first request to a service at zero answered after {first:.2f} s")
    finally:
        agent.stop()
        server.stop()


def test_a_service_takes_back_what_training_borrowed(workdir, procs):
    """A batch job holds every GPU and checkpoints every 20 steps; a service
    of one GPU preempts it (SIGTERM: it saves its step in its grace); with
    the service scaled to 0 the job resumes from that checkpoint, having
    lost less than one checkpoint interval."""
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    t, server, agent = server_and_agent(workdir, procs, "30s", checkpoint_store=store)
    train = (
        'C=$TENK_CHECKPOINT_DIR; S=${TENK_RESTORE_STEP:-0}; '
        'echo "attempt=$TENK_ATTEMPT restore=[$TENK_RESTORE_TAG] from=$S"; '
        f'save() {{ mkdir -p $C/step-$1 && echo $1 > $C/step-$1/w.bin && '
        f'{BIN} ckpt commit step-$1 --step $1; }}; '
        'trap \'save $S; echo "saved $S on TERM"; exit 143\' TERM; '
        'while [ $S -lt 100000 ]; do S=$((S+1)); echo "step=$S" >> $TENK_METRICS; '
        '[ $((S % 20)) = 0 ] && save $S; sleep 0.05; done')
    job = t.submit("--class", "batch", "-G", "8", "--grace", "30s", "--", "sh", "-c", train)
    t.wait_state(job, "RUNNING")
    wait_for(lambda: t.job(job).get("checkpoints"), 60, "a first checkpoint")
    script = replica_script(workdir)
    t.run("serve", "create", "infer", "-G", "1", "--health", "/healthz", "--probe-interval",
          "1s", "--", "python3", script, workdir)
    wait_for(lambda: len(endpoints(t, "infer")) == 1, 90, "the service's replica in rotation")
    j = t.job(job)
    first = j["attempts"][0]
    assert first["end"] == "preempted" and "class service" in first["reason"], first
    assert j["state"] == "PENDING", j
    out = os.path.join(workdir, f"tenk-{job}.out")
    saved = [line for line in open(out).read().splitlines() if line.startswith("saved ")]
    assert saved, open(out).read()[-2000:]
    saved_at = int(saved[-1].split()[1])
    # (what it saved in its grace uploads after its tasks end)
    wait_for(lambda: any(c["step"] == saved_at for c in t.job(job).get("checkpoints", [])), 60,
             "the checkpoint saved in its grace committed")
    t.run("serve", "scale", "infer", "0")
    wait_for(lambda: t.job(job)["state"] == "RUNNING" and len(t.job(job)["attempts"]) == 2,
             60, "the training job back")
    wait_for(lambda: "attempt=2" in open(out).read(), 30, "its second attempt's first line")
    line = [x for x in open(out).read().splitlines() if x.startswith("attempt=2")][0]
    resumed = int(line.split("from=")[1])
    assert resumed == saved_at, (line, saved)  # saved in its grace: nothing lost
    assert f"restore=[step-{resumed}]" in line, line
    # what the service used, by service (its replica's GPU-seconds)
    st, use = t.api("GET", "/v1/usage?by=service")
    infer = [g for g in use["groups"] if g["name"] == "infer"]
    assert st == 200 and infer and infer[0]["gpu_hours"] > 0, use
    assert all(g["name"] for g in use["groups"]), use  # jobs of no service left out
    assert "infer" in t.run("usage", "--by", "service").stdout
    t.run("cancel", str(job))
    t.run("serve", "delete", "infer")
    agent.stop()
    server.stop()


def test_idle_gpus_sleep_and_wake_before_work(workdir, procs):
    """idle_power_after 2s, through the NVML stand-in (tests/gpushim): each
    idle accelerator is set to its lowest limit, the one a job is placed on
    is set back before the job starts, and lowered again once the job is
    over; /metrics says which are lowered and what that saved."""
    data = os.path.join(workdir, "data")
    root_jobs_config(data, idle_power_after="2s")
    server = Daemon(["server", "--data", data, "--listen", "127.0.0.1:0", "--node-timeout",
                     "60s"], workdir, "server")
    procs.append(server)
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")), 20, "the server")
    t = Tenk(workdir, data)
    log = os.path.join(workdir, "nvml.log")
    nvml = os.path.join(workdir, "nvml")
    with open(nvml, "w") as f:
        f.write("0 power_mw 60000\n1 power_mw 60000\n")
    shim = os.path.join(os.path.dirname(BIN), "tests", "gpushim")
    work = os.path.join(workdir, "w1")
    agent = Daemon(["agent", "--server", t.url, "--token-file", os.path.join(data, "agent.token"),
                    "--name", "n1", "--work-dir", work, "--stop-jobs", "--heartbeat", "1s",
                    "--metrics-listen", "127.0.0.1:0"], workdir, "agent",
                   env={"LD_LIBRARY_PATH": shim, "TENK_FAKE_GPUS": "2",
                        "TENK_FAKE_NVML_FILE": nvml, "TENK_FAKE_NVML_LOG": log})
    procs.append(agent)
    t.wait_nodes_up(1)
    url = wait_for(lambda: open(os.path.join(work, "metrics.url")).read().strip()
                   if os.path.exists(os.path.join(work, "metrics.url")) else None, 20, "the url")

    def lines():
        return open(log).read().splitlines() if os.path.exists(log) else []

    def metrics():
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()

    wait_for(lambda: {"0 power_limit 200000", "1 power_limit 200000"} <= set(lines()), 20,
             "both idle accelerators lowered")
    with open(nvml, "w") as f:  # (the lowered cards draw less)
        f.write("0 power_mw 40000\n1 power_mw 40000\n")
    assert 'tenk_gpu_idle_power_limited{gpu="0"} 1' in metrics()
    job = t.submit("-G", "1", "--", "sh", "-c",
                   f'echo "job started $CUDA_VISIBLE_DEVICES" >> {log}; sleep 300')
    wait_for(lambda: any(x.startswith("job started") for x in lines()), 30, "the job started")
    seq = lines()
    dev = seq[-1].split()[-1]
    back = seq.index(f"{dev} power_limit 700000")
    assert back < seq.index(f"job started {dev}"), seq  # its limit back first
    other = "1" if dev == "0" else "0"
    assert f"{other} power_limit 700000" not in seq, seq  # the other stays low
    m = metrics()
    assert f'tenk_gpu_idle_power_limited{{gpu="{dev}"}} 0' in m, m
    assert f'tenk_gpu_idle_power_limited{{gpu="{other}"}} 1' in m, m
    wait_for(lambda: float(re.search(r'tenk_gpu_idle_power_saved_joules_total\{gpu="%s"\} (\S+)'
                                     % other, metrics()).group(1)) > 20, 20,
             "the energy saved counted (20 W less a second)")
    t.run("cancel", str(job))
    wait_for(lambda: lines().count(f"{dev} power_limit 200000") == 2, 30,
             "lowered again once the job is over")
    agent.stop()
    # the agent stopping sets every limit back
    assert sorted(lines()[-2:]) == ["0 power_limit 700000", "1 power_limit 700000"], lines()
    server.stop()


def test_replicas_spread_over_fault_domains_then_nodes(workdir, procs):
    """Three nodes, two in rack1 and one in rack2: the second replica goes to
    the other rack (best fit alone would put it beside the first); a third,
    with no rack left without one, goes to the node without one; a fourth,
    with no such node left, beside the others, without waiting."""
    t, server, agent = server_and_agent(workdir, procs, "30s",
                                        agent_args=("--domain", "dc1/rack1"))
    for name, domain in (("n2", "dc1/rack1"), ("n3", "dc1/rack2")):
        procs.append(Daemon(["agent", "--server", t.url, "--token-file",
                             os.path.join(t.data, "agent.token"), "--name", name,
                             "--fake-gpus", "8xH100", "--work-dir",
                             os.path.join(workdir, name), "--stop-jobs", "--domain", domain],
                            workdir, name))
    t.wait_nodes_up(3)
    t.run("serve", "create", "wide", "--replicas", "2", "-G", "1", "--", "sleep", "600")

    def nodes():
        st, sv = t.api("GET", "/v1/services/wide")
        return [r.get("node") for r in sv["replica_jobs"]]

    wait_for(lambda: None not in nodes() and len(nodes()) == 2, 30, "two replicas placed")
    rack = {"n1": "rack1", "n2": "rack1", "n3": "rack2"}
    assert {rack[n] for n in nodes()} == {"rack1", "rack2"}, nodes()
    t.run("serve", "scale", "wide", "3")
    wait_for(lambda: None not in nodes() and len(nodes()) == 3, 20, "the third placed")
    assert len(set(nodes())) == 3, nodes()  # a node of its own
    t.run("serve", "scale", "wide", "4")
    wait_for(lambda: None not in nodes() and len(nodes()) == 4, 5, "the fourth placed at once")
    t.run("serve", "delete", "wide")
    agent.stop()
    server.stop()
