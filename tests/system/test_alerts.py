"""Alerts that reach people: contrib/alerts.yml passes promtool's check and
its unit tests (contrib/alerts.test.yml), contrib/alertmanager.yml amtool's
check; and end to end, a real Prometheus loaded with the rules scrapes a
cluster whose job stalls, fires TenkJobStalled, and a real Alertmanager
delivers it to a webhook the test runs."""
import http.server
import json
import os
import shutil
import subprocess
import threading

from conftest import Daemon, server_and_agent, wait_for
from test_metrics import free_port, get

CONTRIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "contrib")


def run(*args, cwd):
    p = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout + p.stderr


def test_rules_and_routes_check(workdir):
    for f in ("alerts.yml", "alerts.test.yml", "alertmanager.yml"):
        shutil.copy(os.path.join(CONTRIB, f), workdir)
    out = run("promtool", "check", "rules", "alerts.yml", cwd=workdir)
    assert "SUCCESS: 27 rules found" in out, out
    out = run("promtool", "test", "rules", "alerts.test.yml", cwd=workdir)
    assert "SUCCESS" in out, out
    run("amtool", "check-config", "alertmanager.yml", cwd=workdir)
    # every rule has its test, and each a runbook
    rules = open(os.path.join(workdir, "alerts.yml")).read()
    tests = open(os.path.join(workdir, "alerts.test.yml")).read()
    names = [line.split(":", 1)[1].strip() for line in rules.splitlines()
             if line.strip().startswith("- alert:")]
    assert len(names) == 27
    for n in names:
        assert f"alertname: {n}\n" in tests, n
    assert rules.count("runbook:") == len(names)


class Hook(http.server.BaseHTTPRequestHandler):
    got = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Hook.got.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_stalled_job_reaches_a_webhook(workdir, procs):
    t, server, agent = server_and_agent(workdir, procs, "10s", admin_unix_user="root")
    hook = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    Hook.got = []
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    try:
        am_port, prom_port = free_port(), free_port()
        with open(os.path.join(workdir, "am.yml"), "w") as f:
            f.write(f"""route:
  receiver: hook
  group_by: [alertname, job_id]
  group_wait: 1s
  group_interval: 1s
receivers:
  - name: hook
    webhook_configs:
      - url: 'http://127.0.0.1:{hook.server_address[1]}/'
""")
        am = Daemon(["--config.file=" + os.path.join(workdir, "am.yml"),
                     "--storage.path=" + os.path.join(workdir, "am"),
                     "--web.listen-address=127.0.0.1:%d" % am_port,
                     "--cluster.listen-address="], workdir, "alertmanager",
                    program="prometheus-alertmanager")
        procs.append(am)
        shutil.copy(os.path.join(CONTRIB, "alerts.yml"), workdir)
        tok = os.path.join(workdir, "prom.token")
        with open(tok, "w") as f:
            f.write(t.token)
        with open(os.path.join(workdir, "prometheus.yml"), "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [alerts.yml]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:{am_port}']
scrape_configs:
  - job_name: tenk-server
    scheme: https
    tls_config:
      ca_file: {t.ca}
    authorization:
      credentials_file: {tok}
    static_configs:
      - targets: ['{t.url.split("/")[2]}']
""")
        prom = Daemon(["--config.file=" + os.path.join(workdir, "prometheus.yml"),
                       "--storage.tsdb.path=" + os.path.join(workdir, "tsdb"),
                       "--web.listen-address=127.0.0.1:%d" % prom_port], workdir,
                      "prometheus", program="prometheus")
        procs.append(prom)
        jid = t.submit("--stall-after", "3s", "--", "sh", "-c",
                       'for i in 1 2 3 4 5; do echo "step=$i loss=0.5" >> $TENK_METRICS; sleep 0.3; done; '
                       "sleep 600")

        def delivered():
            for msg in Hook.got:
                for a in msg.get("alerts", []):
                    if a["labels"].get("alertname") == "TenkJobStalled" and \
                            a["labels"].get("job_id") == str(jid) and a["status"] == "firing":
                        return a
            return None
        def seen():
            out = []
            for q in ("/api/v1/targets", "/api/v1/alerts",
                      "/api/v1/query?query=tenk_job_stalled"):
                try:
                    out.append(get("http://127.0.0.1:%d%s" % (prom_port, q))[-1500:])
                except OSError as e:
                    out.append(str(e))
            j = t.job(jid)
            return [j["state"], j["reason"], j.get("stalled")] + out + [Hook.got[-3:]]
        a = wait_for(delivered, 90, "TenkJobStalled at the webhook", interval=0.2, show=seen)
        assert a["labels"]["severity"] == "warning" and a["labels"]["owner"] == "admin", a
        assert a["annotations"]["summary"] == f"Job {jid} of admin is stalled", a
        assert "stalled" in t.job(jid)
        t.run("cancel", jid)
        prom.stop()
        am.stop()
    finally:
        hook.shutdown()
    agent.stop()
    server.stop()
