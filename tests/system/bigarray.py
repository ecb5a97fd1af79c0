"""A large array against a live node (issue 34, point 5): one server and
one agent on a short node timeout; a probe asks GET /v1/health over a
kept connection every few milliseconds while an array of N held jobs is
submitted, then cancelled. Used by test_bigarray.py (no lease lost, the
probe answered while the array grows) and bench/loop/run (the figures)."""
import json
import threading
import time

from conftest import server_and_agent


def start(workdir, procs, node_timeout="8s", listen="127.0.0.1:0"):
    return server_and_agent(workdir, procs, node_timeout, listen=listen, log_level="info")


class Probe:
    """GET /v1/health in a loop on one connection; each answer's time."""

    def __init__(self, t):
        self.t = t
        self.lat = []  # (sent at, ms)
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.run)
        self.th.start()

    def run(self):
        c = self.t.connection(timeout=120)
        while not self.stop.is_set():
            a = time.monotonic()
            c.request("GET", "/v1/health")
            c.getresponse().read()
            self.lat.append((a, (time.monotonic() - a) * 1000))
            time.sleep(0.005)

    def end(self):
        self.stop.set()
        self.th.join()
        return self.lat


def pct(xs, p):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, len(xs) * p // 100)], 1) if xs else None


def loop_busy(t):
    """The server's loop histogram: {le: count}, and the max, in ms."""
    st, text = t.api("GET", "/metrics")
    assert st == 200, st
    buckets, top = {}, None
    for line in text.splitlines():
        if line.startswith("tenk_server_loop_busy_seconds_bucket"):
            le = line.split('le="')[1].split('"')[0]
            buckets[float("inf") if le == "+Inf" else float(le) * 1000] = float(line.split()[-1])
        elif line.startswith("tenk_server_loop_busy_max_seconds"):
            top = float(line.split()[-1]) * 1000
    return buckets, top


def busy_between(before, after, p):
    """The bound (ms) under which p% of the iterations between two looks
    held the loop, and how many there were."""
    d = {le: after[le] - before.get(le, 0) for le in after}
    n = d[float("inf")]
    for le in sorted(d):
        if d[le] >= n * p / 100:
            return le, int(n)
    return float("inf"), int(n)


def run(t, n):
    """Submits an array of n held jobs as the admin and cancels it, the
    probe running. Returns the figures and the probe's samples."""
    h = {"Authorization": "Bearer " + t.token, "Content-Type": "application/json"}
    body = {"command": ["true"], "cwd": "/tmp", "array": f"0-{n - 1}", "hold": True}
    c = t.connection(timeout=600)
    probe = Probe(t)
    time.sleep(0.3)
    before, _ = loop_busy(t)
    a = time.monotonic()
    c.request("POST", "/v1/jobs", body=json.dumps(body), headers=h)
    r = c.getresponse()
    res = json.loads(r.read())
    b = time.monotonic()
    assert r.status == 201, (r.status, res)
    first = res["id"]
    c.request("POST", f"/v1/jobs/{first}/cancel", body="{}", headers=h)
    r = c.getresponse()
    cres = r.read()
    cend = time.monotonic()
    time.sleep(0.3)
    lat = probe.end()
    after, top = loop_busy(t)
    p99, iterations = busy_between(before, after, 99) if after else (None, 0)
    during = [ms for at, ms in lat if a <= at <= cend]
    return {"array": n, "submit_s": round(b - a, 2), "cancel_s": round(cend - b, 2),
            "cancel_status": r.status, "changed": json.loads(cres).get("changed"),
            "probes_during": len(during), "probe_p50_ms": pct(during, 50),
            "probe_p99_ms": pct(during, 99), "probe_max_ms": pct(during, 100),
            "loop_iterations": iterations, "loop_busy_p99_le_ms": p99,
            "loop_busy_max_ms": round(top, 1) if top is not None else None}, first, (a, b, cend), lat
