"""The overload scenario (issue 14): one user with many waiting jobs and
32 parallel listers of them, against a node on the lowest node timeout a
test can use. Used by test_overload.py (no node may go DOWN) and by
bench/overload/run (the figures)."""
import json
import statistics
import threading
import time

from conftest import server_and_agent


def start(workdir, procs, jobs, node_timeout="2s"):
    return server_and_agent(workdir, procs, node_timeout, log_level="info",
                            max_pending_per_user=jobs + 10, max_pending_mib_per_user=4096,
                            submit_rate_per_user=0)


class Client:
    def __init__(self, t, token):
        self.conn = t.connection(timeout=120)
        self.h = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}

    def call(self, method, path, body=None):
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None,
                          headers=self.h)
        r = self.conn.getresponse()
        return r.status, r.read()


def run(t, seconds, jobs=20000, listers=32):
    """Submits `jobs` waiting jobs as one user, then lists them from
    `listers` threads for `seconds`. Returns the figures."""
    p = t.run("users", "add", "flood", "--unix-user", "nobody", "--json")
    token = json.loads(p.stdout)["token"]
    body = {"command": ["true"], "cwd": "/tmp", "nodes": 2,  # two nodes: it waits
            "accept_impossible": True}
    per = jobs // 16
    errors = []

    def submit():
        c = Client(t, token)
        for _ in range(per):
            st, _ = c.call("POST", "/v1/jobs", body)
            if st != 201:
                errors.append(st)
    ths = [threading.Thread(target=submit) for _ in range(16)]
    t0 = time.monotonic()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    submit_s = time.monotonic() - t0
    lat = []
    stop = time.monotonic() + seconds

    def lister():
        c = Client(t, token)
        while time.monotonic() < stop:
            a = time.monotonic()
            st, _ = c.call("GET", "/v1/jobs")
            lat.append((time.monotonic() - a) * 1000)
            if st != 200:
                errors.append(st)
    ths = [threading.Thread(target=lister) for _ in range(listers)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    lat.sort()
    return {"jobs": per * 16, "listers": listers, "seconds": seconds, "errors": len(errors),
            "submit_s": round(submit_s, 2), "lists": len(lat),
            "list_p50_ms": round(statistics.median(lat), 1),
            "list_p99_ms": round(lat[min(len(lat) - 1, len(lat) * 99 // 100)], 1)}


def heartbeats(agent_output):
    """The agent's summary of its heartbeats' round trips (logged at stop)."""
    for line in agent_output.splitlines():
        if "heartbeats:" in line and "round trip" in line:
            words = line.replace(",", "").split()
            i = words.index("p50")
            return {"hb_p50_ms": float(words[i + 1]), "hb_p99_ms": float(words[i + 4]),
                    "hb_max_ms": float(words[i + 7])}
    return {}
