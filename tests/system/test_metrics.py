"""GET /metrics on the server and on agents: Prometheus' text format that
promtool accepts, the accelerators' telemetry from NVML (tests/gpushim),
which job holds each card, the job's own training metrics ($TENK_METRICS),
and a real Prometheus scraping them all."""
import json
import os
import re
import socket
import subprocess
import urllib.parse
import urllib.request

from conftest import BIN, Daemon, wait_for
from test_faults import agent, cluster

SHIM = os.path.join(os.path.dirname(BIN), "tests", "gpushim")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, token=None, ca=None):
    import ssl
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    ctx = ssl.create_default_context(cafile=ca) if ca else None
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
        return r.read().decode()


def promtool(text):
    return subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=30)


def sample(text, metric, **labels):
    """The value of the one sample of `metric` whose labels include these."""
    found = []
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != metric:
            continue
        have = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"',
                               m.group(3) or ""))
        if all(have.get(k) == str(v) for k, v in labels.items()):
            found.append(float(m.group(4)))
    assert len(found) == 1, (metric, labels, found)
    return found[0]


def test_metrics_promtool_and_a_real_scrape(workdir, procs):
    s, t = cluster(workdir, procs)
    nvml = os.path.join(workdir, "nvml")
    with open(nvml, "w") as f:
        f.write("0 util 87\n0 mem_used 1073741824\n0 power_mw 412000\n0 energy_mj 5000000\n"
                "0 temp 61\n0 sm_mhz 1755\n1 xid 13\n")
    env = {"LD_LIBRARY_PATH": SHIM, "TENK_FAKE_GPUS": "2", "TENK_FAKE_NVML_FILE": nvml}
    w1, w2 = os.path.join(workdir, "w1"), os.path.join(workdir, "w2")
    agent(t, procs, "n1", w1, "--metrics-listen", "127.0.0.1:0", env=env)
    agent(t, procs, "n2", w2, "--metrics-listen", "127.0.0.1:0", "--dcgm-compat", env=env)
    t.wait_nodes_up(2)
    t.run("drain", "n2", "--reason", "the job goes to n1")
    train = ("for i in 1 2 3 4 5; do echo \"step=$i loss=$((10 - i)).5 lr=3e-4\" >> "
             "$TENK_METRICS; done; echo 'not a metric' >> $TENK_METRICS; "
             "head -c 50000000 /dev/zero | md5sum; sleep 600")
    jid = t.submit("-G", "1", "--", "sh", "-c", train)
    t.wait_state(jid, "RUNNING")
    t.run("resume", "n2")
    url1 = wait_for(lambda: open(os.path.join(w1, "metrics.url")).read().strip()
                    if os.path.exists(os.path.join(w1, "metrics.url")) else None, 10, "n1's url")
    url2 = open(os.path.join(w2, "metrics.url")).read().strip()

    # the agent: telemetry, attribution, the attempt's cgroup
    def complete(url):
        x = get(url)
        return x if ('job_id="%d"' % jid in x and "} 13\n" in x and
                     "tenk_attempt_cpu_seconds_total{" in x) else None
    text = wait_for(lambda: complete(url1), 30, "n1's metrics with the job and the Xid")
    p = promtool(text)
    assert p.returncode == 0, p.stdout + p.stderr
    g0 = dict(node="n1", gpu=0)
    assert sample(text, "tenk_gpu_utilization_ratio", **g0) == 0.87
    assert sample(text, "tenk_gpu_memory_used_bytes", **g0) == 1 << 30
    assert sample(text, "tenk_gpu_power_watts", **g0) == 412
    assert sample(text, "tenk_gpu_energy_joules_total", **g0) == 5000
    assert sample(text, "tenk_gpu_temperature_celsius", **g0) == 61
    assert sample(text, "tenk_gpu_sm_clock_hertz", **g0) == 1755e6
    assert sample(text, "tenk_gpu_xid_errors_total", node="n1", gpu=1) == 1
    assert sample(text, "tenk_gpu_last_xid", node="n1", gpu=1) == 13
    job = t.job(jid)
    dev = job["attempts"][0]["nodes"][0]["devices"][0]
    assert sample(text, "tenk_gpu_allocation_info", node="n1", gpu=dev, job_id=jid, attempt=1,
                  user="admin", queue="default") == 1
    assert "tenk_node_cpu_seconds_total{" in text and "tenk_node_memory_total_bytes{" in text
    assert 'node="n1",job_id="%d",attempt="1"' % jid in text

    # dcgm-exporter's names too; promtool's style lint flags only its
    # camelCase label, as it does for dcgm-exporter itself
    text2 = get(url2)
    assert sample(text2, "DCGM_FI_DEV_GPU_UTIL", gpu=0, Hostname="n2", device="nvidia0") == 87
    assert sample(text2, "DCGM_FI_DEV_FB_USED", gpu=0, Hostname="n2") == 1024
    assert sample(text2, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu=0, Hostname="n2") == 5e6
    p = promtool(text2)
    complaints = [x for x in (p.stdout + p.stderr).splitlines() if x.strip()]
    assert complaints and all("label names should be written in 'snake_case' not "
                              "'camelCase'" in x and x.startswith("DCGM_FI_") for x in
                              complaints), complaints

    # the job's own metrics: kept by the server with the attempt, shown
    m = wait_for(lambda: t.job(jid)["attempts"][0].get("metrics"), 30, "the job's metrics")
    assert m["step"] == 5 and m["values"] == {"loss": 5.5, "lr": 3e-4}, m
    assert m["history"]["names"] == ["loss", "lr"] and m["history"]["steps"] == [1, 2, 3, 4, 5]
    assert [v[0] for v in m["history"]["values"]] == [9.5, 8.5, 7.5, 6.5, 5.5], m
    assert "metrics at step 5" in t.run("show", jid).stdout and "loss=5.5" in \
        t.run("show", jid).stdout

    # the server, with a viewer's token
    out = t.run("users", "add", "prom", "--role", "viewer", "--json").stdout
    token = json.loads(out)["token"]
    ca = os.path.join(t.data, "tls", "ca.pem")
    stext = get(t.url + "/metrics", token, ca)
    p = promtool(stext)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sample(stext, "tenk_jobs", state="RUNNING") == 1
    assert sample(stext, "tenk_nodes", state="UP") == 2
    assert sample(stext, "tenk_accelerators", model_name="H100", state="allocated") == 1
    assert sample(stext, "tenk_scheduler_pass_duration_seconds_count") >= 1
    assert sample(stext, "tenk_http_request_duration_seconds_count", method="POST",
                  route="/v1/jobs") >= 1
    assert sample(stext, "tenk_node_heartbeat_age_seconds", node="n1") < 30
    assert sample(stext, "tenk_node_state", node="n1", state="UP", drained_by="") == 1
    assert sample(stext, "tenk_job_metric", job_id=jid, attempt=1, name="loss") == 5.5

    # a real Prometheus scraping the server (HTTPS, the viewer's token) and the agents
    tokfile = os.path.join(workdir, "prom.token")
    with open(tokfile, "w") as f:
        f.write(token)
    port = free_port()
    cfg = os.path.join(workdir, "prometheus.yml")
    targets = [u.split("/")[2] for u in (url1, url2)]
    with open(cfg, "w") as f:
        f.write(f"""global:
  scrape_interval: 1s
scrape_configs:
  - job_name: tenk-server
    scheme: https
    tls_config:
      ca_file: {ca}
    authorization:
      credentials_file: {tokfile}
    static_configs:
      - targets: ['{t.url.split("/")[2]}']
  - job_name: tenk-agents
    static_configs:
      - targets: {json.dumps(targets)}
""")
    prom = Daemon(["--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(workdir, "tsdb"),
                   "--web.listen-address=127.0.0.1:%d" % port], workdir, "prometheus",
                  program="prometheus")
    procs.append(prom)

    def query(q):
        body = json.loads(get("http://127.0.0.1:%d/api/v1/query?q" % port +
                              "uery=" + urllib.parse.quote(q)))
        return body["data"]["result"]

    def ready():
        try:
            alloc = query('tenk_gpu_allocation_info{job_id="%d"}' % jid)
            running = query('tenk_jobs{state="RUNNING"}')
            ups = query("up == 1")
            return (alloc, running) if alloc and running and len(ups) == 3 else None
        except OSError:
            return None
    alloc, running = wait_for(ready, 60, "Prometheus to have scraped the job")
    assert len(alloc) == 1 and alloc[0]["metric"]["node"] == "n1" and \
        alloc[0]["metric"]["user"] == "admin", alloc
    assert running[0]["value"][1] == "1", running
    ups = query("up")
    assert sorted(u["metric"]["job"] for u in ups) == \
        ["tenk-agents", "tenk-agents", "tenk-server"], ups
    # what contrib/ ships: a scrape configuration promtool accepts, and a
    # dashboard whose every query this Prometheus evaluates
    contrib = os.path.join(os.path.dirname(__file__), "..", "..", "contrib")
    for name in ("tenk-ca.pem", "tenk-viewer.token"):
        open(os.path.join(workdir, name), "w").close()
    with open(os.path.join(contrib, "prometheus.yml")) as src, \
            open(os.path.join(workdir, "contrib.yml"), "w") as dst:
        dst.write(src.read())
    p = subprocess.run(["promtool", "check", "config", "contrib.yml"], cwd=workdir,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(os.path.join(contrib, "grafana-tenk.json")) as f:
        dash = json.load(f)
    exprs = [tg["expr"].replace("$node", ".*") for panel in dash["panels"]
             for tg in panel["targets"]]
    assert len(exprs) >= 10
    for e in exprs:
        query(e)  # an invalid one answers 400
    util = query(dash["panels"][1]["targets"][0]["expr"])
    assert [r["metric"].get("user") for r in util] == ["admin"], util
    t.run("cancel", jid)


def test_training_lines_arrive_once_across_outages(workdir, procs):
    """Each $TENK_METRICS line reaches the job's history once, in order:
    through a pause of the server (the lines written meanwhile are kept
    until a beat carrying them is answered) and a restart of the agent
    (which reads the file again: the server takes each line once, by where
    it ends in the file)."""
    import signal
    import time
    s, t = cluster(workdir, procs)
    a = agent(t, procs, "n1", os.path.join(workdir, "w1"))
    t.wait_nodes_up(1)
    script = ("for i in $(seq 1 60); do echo \"step=$i loss=$i\" >> $TENK_METRICS; "
              "sleep 0.1; done; sleep 600")
    jid = t.submit("--", "sh", "-c", script)
    t.wait_state(jid, "RUNNING")

    def steps():
        m = t.job(jid)["attempts"][0].get("metrics") or {}
        return m.get("history", {}).get("steps", [])
    wait_for(lambda: len(steps()) >= 5, 30, "the first lines")
    s.proc.send_signal(signal.SIGSTOP)
    time.sleep(2.5)
    s.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: len(steps()) >= 35, 30, "lines after the pause")
    a.kill9()
    a.start()
    wait_for(lambda: 60 in steps(), 60, "the last line", show=steps)
    assert steps() == list(range(1, 61)), steps()
    t.run("cancel", jid)
