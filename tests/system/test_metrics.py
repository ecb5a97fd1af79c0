"""GET /metrics on the server and on agents: Prometheus' text format that
promtool accepts, the accelerators' telemetry from NVML (tests/gpushim),
which job holds each card, the job's own training metrics ($TENK_METRICS),
and a real Prometheus scraping them all."""
import json
import os
import re
import socket
import subprocess
import time
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
                "0 temp 61\n0 sm_mhz 1755\n1 xid 13\n0 throttle 4\n1 throttle 128\n"
                "0 power_limit_mw 650000\n0 rows_corr 3\n0 pcie_gen 4\n")
    env = {"LD_LIBRARY_PATH": SHIM, "TENK_FAKE_GPUS": "2", "TENK_FAKE_NVML_FILE": nvml}
    w1, w2 = os.path.join(workdir, "w1"), os.path.join(workdir, "w2")
    agent(t, procs, "n1", w1, "--metrics-listen", "127.0.0.1:0", env=env)
    agent(t, procs, "n2", w2, "--metrics-listen", "127.0.0.1:0", "--dcgm-compat", env=env)
    t.wait_nodes_up(2)
    t.run("drain", "n2", "--reason", "the job goes to n1")
    train = ("for i in 1 2 3 4 5; do echo \"step=$i loss=$((10 - i)).5 lr=3e-4 "
             "tokens_per_s=2000 flops_per_token=5e9\" >> "
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
    # what the GPU health checks read (the node's thresholds: test_faults.py)
    assert sample(text, "tenk_gpu_power_limit_watts", **g0) == 650
    assert sample(text, "tenk_gpu_clock_event_reasons", **g0) == 4  # the power cap: normal
    assert sample(text, "tenk_gpu_clocks_slowed", **g0) == 0
    assert sample(text, "tenk_gpu_clocks_slowed", node="n1", gpu=1) == 1  # the power brake
    assert sample(text, "tenk_gpu_remapped_rows", kind="correctable", **g0) == 3
    assert sample(text, "tenk_gpu_remapped_rows", kind="uncorrectable", **g0) == 0
    assert sample(text, "tenk_gpu_row_remap_pending", **g0) == 0
    assert sample(text, "tenk_gpu_pcie_link_width", **g0) == 16
    assert sample(text, "tenk_gpu_pcie_link_width_max", **g0) == 16
    assert sample(text, "tenk_gpu_pcie_link_generation", **g0) == 4
    assert sample(text, "tenk_gpu_pcie_link_generation_max", **g0) == 5
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
    assert m["step"] == 5 and m["values"] == {"loss": 5.5, "lr": 3e-4, "tokens_per_s": 2000,
                                              "flops_per_token": 5e9}, m
    assert m["history"]["names"] == ["loss", "lr", "tokens_per_s", "flops_per_token"] and \
        m["history"]["steps"] == [1, 2, 3, 4, 5]
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
    # its certificate and the CA it made (five and ten years), for the expiry alert
    left = {c: sample(stext, "tenk_server_certificate_expiry_timestamp_seconds", cert=c) -
            time.time() for c in ("server", "ca")}
    assert abs(left["server"] - 1825 * 86400) < 2 * 86400, left
    assert abs(left["ca"] - 3650 * 86400) < 2 * 86400, left
    # a node that takes work has no state series; one drained has
    assert 'tenk_node_state{node="n1"' not in stext
    t.run("drain", "n1", "--reason", "a look")
    st2 = get(t.url + "/metrics", token, ca)
    assert sample(st2, "tenk_node_state", node="n1", drained_by="operator") == 1
    t.run("resume", "n1")
    assert sample(stext, "tenk_job_metric", job_id=jid, attempt=1, name="loss") == 5.5
    # its goodput, and its model FLOPs utilisation: 2,000 tokens/s of 5 GFLOP
    # each (10 TFLOP/s) over the peak of the card it holds
    assert 0 <= sample(stext, "tenk_job_goodput_ratio", job_id=jid) <= 1
    n1 = [n for n in t.json("nodes")["nodes"] if n["name"] == "n1"][0]
    peak = [a["tflops"] for a in n1["accelerators"] if a["index"] == dev][0]
    mfu = t.job(jid)["mfu"]
    assert abs(mfu["achieved_tflops"] - 10) < 1e-9 and abs(mfu["peak_tflops"] - peak) < 1e-9
    assert abs(sample(stext, "tenk_job_mfu_ratio", job_id=jid) - 10 / peak) < 1e-9
    assert "MFU:      %.1f%% (10.0 of the cards'" % (1000 / peak) in t.run("show", jid).stdout

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


def write_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text + "\n")


def test_nic_counters_from_a_recorded_tree(workdir, procs):
    """An Ethernet NIC with errors and an InfiniBand port, as sysfs shows
    them on a node with an HCA (recorded: this machine has none), and TCP's
    counters from /proc/net/snmp: the agent's /metrics has each, promtool
    clean."""
    sysfs, procfs = os.path.join(workdir, "sys"), os.path.join(workdir, "proc")
    write_tree(sysfs, {
        "class/net/eth9/statistics/rx_errors": "3", "class/net/eth9/statistics/tx_errors": "1",
        "class/net/eth9/statistics/rx_dropped": "7", "class/net/eth9/statistics/tx_dropped": "0",
        "class/net/eth9/carrier_changes": "4", "class/net/eth9/operstate": "up",
        "class/net/eth9/speed": "100000", "class/net/eth9/mtu": "9000",
        # a link down reads its speed as an error, here as nothing to read
        "class/net/ib0/operstate": "down", "class/net/ib0/speed": "", "class/net/ib0/mtu": "4092",
        "class/infiniband/mlx5_0/ports/1/counters/symbol_error": "2",
        "class/infiniband/mlx5_0/ports/1/counters/link_downed": "1",
        "class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors": "5",
        "class/infiniband/mlx5_0/ports/1/counters/excessive_buffer_overrun_errors": "0",
        "class/infiniband/mlx5_0/ports/1/counters/port_xmit_data": "1000",
        "class/infiniband/mlx5_0/ports/1/counters/port_rcv_data": "2000",
        "class/infiniband/mlx5_0/ports/1/counters/port_xmit_packets": "10",
        "class/infiniband/mlx5_0/ports/1/counters/port_rcv_packets": "20",
        "class/infiniband/mlx5_0/ports/1/state": "4: ACTIVE",
        "class/infiniband/mlx5_0/ports/1/rate": "200 Gb/sec (4X HDR)",
        "class/infiniband/mlx5_0/ports/1/link_layer": "InfiniBand",
    })
    write_tree(procfs, {"net/snmp": (
        "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
        "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails "
        "EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n"
        "Tcp: 1 200 120000 -1 10 5 0 0 3 90000 100000 150 0 4 0\n"
        "Udp: InDatagrams\nUdp: 7")})
    s, t = cluster(workdir, procs)
    w = os.path.join(workdir, "w1")
    agent(t, procs, "n1", w, "--fake-gpus", "1xH100", "--metrics-listen", "127.0.0.1:0",
          env={"TENK_SYSFS": sysfs, "TENK_PROCFS": procfs})
    t.wait_nodes_up(1)
    url = wait_for(lambda: open(os.path.join(w, "metrics.url")).read().strip()
                   if os.path.exists(os.path.join(w, "metrics.url")) else None, 10, "the url")
    text = get(url)
    p = promtool(text)
    assert p.returncode == 0, p.stdout + p.stderr
    eth = dict(node="n1", device="eth9")
    assert sample(text, "tenk_node_network_errors_total", direction="receive", **eth) == 3
    assert sample(text, "tenk_node_network_errors_total", direction="transmit", **eth) == 1
    assert sample(text, "tenk_node_network_drops_total", direction="receive", **eth) == 7
    assert sample(text, "tenk_node_network_carrier_changes_total", **eth) == 4
    assert sample(text, "tenk_node_network_up", **eth) == 1
    assert sample(text, "tenk_node_network_speed_bytes_per_second", **eth) == 100e9 / 8
    assert sample(text, "tenk_node_network_mtu_bytes", **eth) == 9000
    assert sample(text, "tenk_node_network_up", node="n1", device="ib0") == 0
    assert 'tenk_node_network_speed_bytes_per_second{node="n1",device="ib0"}' not in text
    assert sample(text, "tenk_node_tcp_segments_sent_total", node="n1") == 100000
    assert sample(text, "tenk_node_tcp_retransmitted_segments_total", node="n1") == 150
    ib = dict(node="n1", device="mlx5_0", port="1")
    assert sample(text, "tenk_node_ib_symbol_errors_total", **ib) == 2
    assert sample(text, "tenk_node_ib_link_downed_total", **ib) == 1
    assert sample(text, "tenk_node_ib_receive_errors_total", **ib) == 5
    assert sample(text, "tenk_node_ib_buffer_overruns_total", **ib) == 0
    assert sample(text, "tenk_node_ib_transmit_bytes_total", **ib) == 4000  # 4-byte words
    assert sample(text, "tenk_node_ib_receive_packets_total", **ib) == 20
    assert sample(text, "tenk_node_ib_port_active", link_layer="InfiniBand", **ib) == 1
    assert sample(text, "tenk_node_ib_port_rate_bytes_per_second", **ib) == 200e9 / 8


def test_nic_counters_of_real_links(workdir, hosts3):
    """Agents in namespace hosts read their own veth links from the real
    sysfs, and their own network namespace's TCP counters."""
    from conftest import MultiHost
    c = MultiHost(workdir, hosts3, fake="1xH100", agent_args=["--metrics-listen",
                                                              "127.0.0.1:0"])
    try:
        w = os.path.join(workdir, "agent1")
        url = wait_for(lambda: open(os.path.join(w, "metrics.url")).read().strip()
                       if os.path.exists(os.path.join(w, "metrics.url")) else None, 10, "url")
        text = subprocess.run(hosts3.cmd(1, ["curl", "-s", "--max-time", "5", url]),
                              capture_output=True, text=True, timeout=30).stdout
        p = promtool(text)
        assert p.returncode == 0, p.stdout + p.stderr
        eth = dict(node="host1", device="eth0")
        assert sample(text, "tenk_node_network_up", **eth) == 1
        # as the namespace's own sysfs says
        def there(attr):
            return subprocess.run(hosts3.cmd(1, ["cat", f"/sys/class/net/eth0/{attr}"]),
                                  capture_output=True, text=True, timeout=30).stdout.strip()
        assert sample(text, "tenk_node_network_mtu_bytes", **eth) == int(there("mtu"))
        speed = there("speed")  # (a veth's reads 10000 once both ends are up, else EINVAL)
        if speed.lstrip("-").isdigit() and int(speed) > 0:
            assert sample(text, "tenk_node_network_speed_bytes_per_second", **eth) == \
                int(speed) * 1e6 / 8
        else:
            assert 'speed_bytes_per_second{node="host1",device="eth0"}' not in text
        assert sample(text, "tenk_node_network_errors_total", direction="receive", **eth) == 0
        assert sample(text, "tenk_node_network_carrier_changes_total", **eth) >= 1
        # the agent talks to the server over TCP in this namespace, and only it
        assert sample(text, "tenk_node_tcp_segments_sent_total", node="host1") > 0
        assert "tenk_node_ib_" not in text
    finally:
        c.stop_all()
