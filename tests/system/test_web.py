"""The server's web page in a real headless Chromium: the login takes a token
into a cookie (from the link's fragment), a job submitted through the API
appears on the cluster page, its own page draws its loss curve from the
lines it wrote to $TENK_METRICS, and a viewer sees no secret of it. A
screenshot of the job's page is saved with the test's output."""
import json
import os
import re
import shutil
import ssl
import subprocess
import urllib.request

import pytest

from conftest import start_up, wait_for
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
    post(t, "/v1/services", {"name": "svc-web", "replicas": 2, "port": 18391,
                             "job": {"command": ["sleep", "600"], "cwd": workdir}}, admin)
    wait_for(lambda: len((t.job(jid)["attempts"][0].get("metrics") or {})
                         .get("history", {}).get("steps", [])) == 6, 30, "six points of loss")

    # the cluster page: the job, the node, the plots
    dom = browse(workdir, f"{t.url}/#token={admin}")
    assert 'data-rendered=' in dom, dom[-3000:]
    assert f'href="#job={jid}"' in dom and "web-train" in dom and ">n1<" in dom, dom[-3000:]
    assert 'id="chart-util"' in dom and 'id="chart-cost"' in dom
    assert admin not in dom  # the token left the address at once
    # the services: a row each (its replicas never pass a probe: 0 of 2 ready)
    assert "Services (1)" in dom and ">svc-web<" in dom and ">0 of 2<" in dom, dom[-3000:]
    assert "port 18391 on every node" in dom, dom[-3000:]

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


@pytest.mark.skipif(not CHROMIUM, reason="Debian's chromium is not installed (scripts/deps)")
def test_job_list_is_newest_first_in_pages_and_a_job_shows_its_request_and_output(workdir):
    """With 1,200 ended jobs the jobs page shows the newest first, 200 a page
    with the count, pages on to the oldest, and filters by state, user and
    name; a job's page has what tenk show has and the end of its output,
    more on request; dates are written as the CLI writes them."""
    t, d = start_up(workdir)
    try:
        admin = t.token
        old = t.submit("--array", "0-1199", "-H", "-J", "old", "--", "true")
        t.run("cancel", old)
        wait_for(lambda: not t.json("queue")["jobs"], 60, "the array cancelled")
        lines = "for i in $(seq 1 80); do echo line-$i; done"
        newest = t.submit("-J", "the-newest", "--", "sh", "-c", lines)
        assert t.run("wait", newest, timeout=60).returncode == 0
        ended = 1201

        dom = browse(workdir, f"{t.url}/#token={admin}&jobs&state=ended")
        assert f"showing 200 of {ended:,}, the newest first" in dom, dom[-3000:]
        assert dom.index(f'href="#job={newest}"') < dom.index(f'href="#job={newest - 1}"')
        assert f'href="#job={newest - 199}"' in dom and f'href="#job={newest - 200}"' not in dom
        assert 'id="page-older"' in dom and f"before={newest - 199}" in dom
        # the last page: the oldest job
        dom = browse(workdir, f"{t.url}/#token={admin}&jobs&state=ended&before={old + 1}")
        assert f"showing 1 of {ended:,}, older ones first" in dom, dom[-3000:]
        assert f'href="#job={old}"' in dom and 'id="page-older"' not in dom
        # filters: by name, by user, by state
        dom = browse(workdir, f"{t.url}/#token={admin}&jobs&name=the-newest")
        assert "showing 1 named the-newest" in dom and f'href="#job={newest}"' in dom, \
            dom[-3000:]
        dom = browse(workdir, f"{t.url}/#token={admin}&jobs&user=nobody-here")
        assert "showing 0 of 0" in dom, dom[-3000:]
        dom = browse(workdir, f"{t.url}/#token={admin}&jobs&state=COMPLETED")
        assert "showing 1 of 1" in dom and f'href="#job={newest}"' in dom, dom[-3000:]

        # the job's page: its request as tenk show says it, its output's end
        dom = browse(workdir, f"{t.url}/#token={admin}&job={newest}")
        assert 'id="job-request"' in dom, dom[-3000:]
        assert "sh -c 'for i in $(seq 1 80); do echo line-$i; done'" in dom.replace(
            "&amp;", "&"), dom[-4000:]
        out = t.job(newest)["output_path"]
        assert out == os.path.join(workdir, f"tenk-{newest}.out") and out in dom, out
        assert "1 node(s) x 1 task(s) x 0 accelerator(s)" in dom and "time UNLIMITED" in dom
        assert "line-80" in dom and "line-31\n" in dom and "line-30\n" not in dom, dom[-3000:]
        assert 'id="logs-more"' in dom and "the last 500 lines" in dom
        assert re.search(r"submitted \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.", dom), dom[-3000:]

        # the allocation chart comes from the accounting records: a restart
        # of the server keeps it
        gpu = t.submit("--gpus-per-task", "2", "--", "sleep", "1")
        assert t.run("wait", gpu, timeout=60).returncode == 0
        d.stop()
        t, d = start_up(workdir)
        st, use = t.api("GET", "/v1/usage?by=time&step=900")
        assert st == 200 and len(use["groups"]) == 96, use
        assert max(g["gpus"] for g in use["groups"]) > 0, use["groups"][-3:]
        assert abs(sum(g["gpu_hours"] for g in use["groups"]) - use["total"]["gpu_hours"]) \
            < 1e-9, use["total"]
        dom = browse(workdir, f"{t.url}/#token={t.token}")
        assert 'id="chart-util"' in dom and 'data-points="96"' in dom, dom[-3000:]
    finally:
        d.stop()
