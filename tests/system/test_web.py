"""The server's web page in a real headless Chromium: the login takes a token
into a cookie (from the link's fragment), a job submitted through the API
appears on the cluster page, its own page draws its loss curve from the
lines it wrote to $TENK_METRICS, and a viewer sees no secret of it. A
screenshot of the job's page is saved with the test's output."""
import json
import os
import shutil
import ssl
import subprocess
import urllib.request

import pytest

from conftest import wait_for
from test_faults import agent, cluster

CHROMIUM = shutil.which("chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--ignore-certificate-errors", "--virtual-time-budget=8000"]


def browse(workdir, url, *extra):
    """Chromium, fresh each time, on url; the page as its scripts left it
    (or what `extra` asks instead, such as a screenshot)."""
    profile = os.path.join(workdir, "chromium-%d" % len(os.listdir(workdir)))
    p = subprocess.run([CHROMIUM, *FLAGS, "--user-data-dir=" + profile,
                        *(extra or ["--dump-dom"]), url],
                       capture_output=True, text=True, timeout=90)
    shutil.rmtree(profile, ignore_errors=True)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def post(t, path, body, token):
    ctx = ssl.create_default_context(cafile=os.path.join(t.data, "tls", "ca.pem"))
    req = urllib.request.Request(t.url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + token,
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
        return json.loads(r.read())


@pytest.mark.skipif(not CHROMIUM, reason="Debian's chromium is not installed (scripts/deps)")
def test_web_page_in_chromium(workdir, procs):
    s, t = cluster(workdir, procs)
    agent(t, procs, "n1", os.path.join(workdir, "w1"), "--fake-gpus", "2xH100",
          "--metrics-listen", "none")
    t.wait_nodes_up(1)
    admin = open(os.path.join(t.data, "admin.token")).read().strip()
    train = ('for i in 1 2 3 4 5 6; do echo "step=$i loss=$((20 - 3 * i)).25 lr=1e-3" >> '
             '"$TENK_METRICS"; sleep 0.2; done; sleep 600')
    job = post(t, "/v1/jobs", {"name": "web-train", "command": ["sh", "-c", train],
                               "cwd": workdir, "gpus_per_task": 1,
                               "env": {"SECRET": "hunter2"}}, admin)
    jid = job["id"]
    wait_for(lambda: len((t.job(jid)["attempts"][0].get("metrics") or {})
                         .get("history", {}).get("steps", [])) == 6, 30, "six points of loss")

    # the cluster page: the job, the node, the plots
    dom = browse(workdir, f"{t.url}/#token={admin}")
    assert 'data-rendered=' in dom, dom[-3000:]
    assert f'href="#job={jid}"' in dom and "web-train" in dom and ">n1<" in dom, dom[-3000:]
    assert 'id="chart-util"' in dom and 'id="chart-cost"' in dom
    assert admin not in dom  # the token left the address at once

    # the job's page: its loss curve from the six lines
    dom = browse(workdir, f"{t.url}/#token={admin}&job={jid}")
    assert f"Job {jid}: web-train" in dom, dom[-3000:]
    assert 'id="chart-loss"' in dom and 'data-points="6"' in dom, dom[-3000:]
    assert "loss=2.25" in dom  # the newest value
    shot = os.path.join(workdir, "job-page.png")
    browse(workdir, f"{t.url}/#token={admin}&job={jid}", "--screenshot=" + shot,
           "--window-size=1280,1100")
    assert os.path.getsize(shot) > 10000
    print("screenshot:", shot)

    # a viewer: the page, but no secret; a wrong token gets the login form
    out = t.run("users", "add", "vic", "--role", "viewer", "--json").stdout
    viewer = json.loads(out)["token"]
    dom = browse(workdir, f"{t.url}/#token={viewer}&job={jid}")
    assert 'id="chart-loss"' in dom and "hunter2" not in dom, dom[-3000:]
    assert "vic (viewer)" in dom
    dom = browse(workdir, f"{t.url}/#token=0123abcd&job={jid}")
    assert "invalid token" in dom and 'id="chart-loss"' not in dom, dom[-3000:]
    t.run("cancel", jid)
