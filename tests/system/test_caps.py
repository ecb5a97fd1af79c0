"""Limits: a user's waiting jobs are capped (429, naming the limit), job
lists come in pages from the head of the queue with a cursor, and the
token is checked before the route."""
import json
import os

from conftest import root_jobs_config, start_up


def test_pending_caps_and_pages(workdir):
    data = os.path.join(workdir, "tenk-data")
    root_jobs_config(data, max_pending_per_user=5, max_pending_mib_per_user=1)
    t, d = start_up(workdir)
    try:
        p = t.run("users", "add", "bob", "--unix-user", "nobody", "--json")
        bob = dict(t.env(), TENK_TOKEN=json.loads(p.stdout)["token"])
        # two nodes' worth on a one-node cluster: taken as asked, they wait
        ids = [int(t.run("submit", "--hold-if-impossible", "-N", "2", "--", "true", env=bob).stdout) for _ in range(5)]
        p = t.run("submit", "--hold-if-impossible", "-N", "2", "--", "true", env=bob, check=False)
        assert p.returncode == 1 and "max_pending_per_user: bob has 5 pending job(s)" in \
            p.stderr and "the limit is 5 jobs" in p.stderr, p.stderr
        t.run("cancel", ids[0], env=bob)
        ids[0] = int(t.run("submit", "--hold-if-impossible", "-N", "2", "--", "true", env=bob).stdout)
        # the weight: big environments reach the MiB cap first
        for j in ids:
            t.run("cancel", j, env=bob)
        big = dict(bob, BLOB_A="x" * 120000, BLOB_B="y" * 120000)
        for _ in range(4):
            t.run("submit", "--hold-if-impossible", "-N", "2", "--", "true", env=big)
        p = t.run("submit", "--hold-if-impossible", "-N", "2", "--", "true", env=big, check=False)
        assert p.returncode == 1 and "max_pending_mib_per_user: bob has" in p.stderr, p.stderr
        # a small one still fits the weight, and is the fifth
        small = {"command": ["true"], "cwd": "/tmp", "nodes": 2, "accept_impossible": True}
        st, res = t.api("POST", "/v1/jobs", small, token=bob["TENK_TOKEN"])
        assert st == 201, res
        st, res = t.api("POST", "/v1/jobs", small, token=bob["TENK_TOKEN"])
        assert st == 429 and res["error"].startswith("max_pending_per_user: bob"), res
        # the admin is not held to them; lists come in pages from the head
        for _ in range(20):
            t.submit("--hold-if-impossible", "-N", "2", "--", "true")
        st, p1 = t.api("GET", "/v1/jobs?state=PENDING&limit=10")
        pend = [j["id"] for j in json.loads(t.run("queue", "--all", "--json").stdout)["jobs"]
                if j["state"] == "PENDING"]
        assert st == 200 and [j["id"] for j in p1["jobs"]] == pend[:10] and \
            p1["total"] == len(pend) and p1["next"] == pend[9], p1
        st, p2 = t.api("GET", f"/v1/jobs?state=PENDING&limit=10&after={p1['next']}")
        assert [j["id"] for j in p2["jobs"]] == pend[10:20]
        got = [j["id"] for j in p1["jobs"] + p2["jobs"]]
        after = p2["next"]
        while after:
            st, pn = t.api("GET", f"/v1/jobs?state=PENDING&limit=10&after={after}")
            got += [j["id"] for j in pn["jobs"]]
            after = pn["next"]
        assert got == pend, "every page, each job once"
        out = t.run("queue", "--limit", "10").stdout
        assert f"showing 10 of {len(pend)} from the head of the queue" in out, out
        assert str(pend[0]) in out.split("\n")[1], "the head of the queue first"
        st, res = t.api("GET", "/v1/jobs?limit=100000")
        assert st == 400 and "limit: must be an integer from 1 to 1000" in res["error"]
    finally:
        d.stop()


def test_the_token_comes_before_the_route(cluster):
    st, res = cluster.api("GET", "/v1/no-such-thing", token=None)
    assert st == 401, res
    st, res = cluster.api("DELETE", "/v1/jobs", token=None)
    assert st == 401, res
    st, res = cluster.api("GET", "/v1/no-such-thing")
    assert st == 404
    st, res = cluster.api("DELETE", "/v1/jobs")
    assert st == 405
    st, res = cluster.api("GET", "/v1/health", token=None)
    assert st == 200


def test_a_pass_starts_at_most_max_starts_per_pass(workdir):
    """With "max_starts_per_pass": 2, eight jobs that fit at once start over
    passes of at most two starts each (counted as limited passes), the next
    pass following at once, and none is left behind."""
    data = os.path.join(workdir, "tenk-data")
    root_jobs_config(data, max_starts_per_pass=2)
    t, d = start_up(workdir)
    try:
        def limited():
            st, h = t.api("GET", "/v1/health")
            assert st == 200, h
            return h["scheduler"]["limited_passes"]

        hog = t.submit("-G", "8", "--", "sleep", "300")
        t.wait_state(hog, "RUNNING")
        ids = [t.submit("-G", "1", "--", "sleep", "300") for _ in range(8)]
        before = limited()
        t.run("cancel", hog)
        for jid in ids:
            t.wait_state(jid, "RUNNING", timeout=60)
        # eight starts at two a pass: four passes stopped at the limit
        assert limited() - before >= 4, (before, limited())
        st, metrics = t.api("GET", "/metrics")
        assert st == 200, metrics
        assert "tenk_scheduler_limited_passes_total" in metrics
        t.run("cancel", *ids)
    finally:
        d.stop()


def test_submission_rate_per_user(workdir):
    """A user submits at most submit_rate_per_user jobs a second after a
    burst of submit_burst_per_user: then 429, naming the limit, with the
    wait in Retry-After; after it, one more goes in. Admins are not held
    to it."""
    import time
    data = os.path.join(workdir, "tenk-data")
    root_jobs_config(data, submit_rate_per_user=0.5, submit_burst_per_user=5)
    t, d = start_up(workdir)
    try:
        p = t.run("users", "add", "bob", "--unix-user", "nobody", "--json")
        tok = json.loads(p.stdout)["token"]
        body = json.dumps({"command": ["true"], "cwd": "/tmp", "nodes": 2,
                           "accept_impossible": True})

        def submit(token):
            c = t.connection()
            c.request("POST", "/v1/jobs", body=body, headers={
                "Authorization": "Bearer " + token, "Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, json.loads(r.read()), r.getheader("Retry-After")
        got = [submit(tok)[0] for _ in range(5)]
        assert got == [201] * 5, got
        st, res, after = submit(tok)
        assert st == 429, (st, res)
        assert res["error"].startswith("submit_rate_per_user: bob submits at most 0.5 jobs a "
                                       "second (bursts of 5); try again in "), res
        assert after and 1 <= int(after) <= 2, after
        assert submit(t.token)[0] == 201  # the admin
        time.sleep(int(after))
        assert submit(tok)[0] == 201
    finally:
        d.stop()
