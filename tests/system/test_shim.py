"""tenk-shim on its own, started the way an agent starts it (its plan in a
folder, a listening socket as descriptor 3) with this test as the agent:
the lease that fences its tasks, renewals, a second agent taking over, and
the end of a shim no agent comes back to."""
import json
import os
import signal
import socket
import subprocess
import time

from conftest import BIN, wait_for

SHIM = os.path.join(os.path.dirname(BIN), "tenk-shim")


def mono_ms():
    return int(time.monotonic() * 1000)  # CLOCK_MONOTONIC, as the shim's


class Shim:
    def __init__(self, workdir, command, lease_ms=600, fence_grace_ms=300, grace_ms=30000,
                 lease_until_ms=None):
        self.dir = os.path.join(workdir, "shim")
        os.makedirs(self.dir)
        self.out = os.path.join(workdir, "out")
        plan = {"job": 7, "attempt": 1, "grace_ms": grace_ms, "limit_ms": 0,
                "lease_until_ms": lease_until_ms if lease_until_ms is not None
                else mono_ms() + lease_ms,
                "lease_ms": lease_ms, "fence_grace_ms": fence_grace_ms,
                "tasks": [{"rank": 0, "argv": ["sh", "-c", command], "env": ["PATH=/usr/bin:/bin"],
                           "cwd": workdir, "output": self.out}]}
        with open(os.path.join(self.dir, "plan.json"), "w") as f:
            json.dump(plan, f)
        self.sock_path = os.path.join(self.dir, "shim.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.sock_path)
        listener.listen(4)
        fd = listener.fileno()
        self.log = open(os.path.join(workdir, "shim.log"), "wb")
        self.proc = subprocess.Popen(
            ["tenk-shim", self.dir], executable=SHIM, stdout=self.log, stderr=subprocess.STDOUT,
            pass_fds=(3,), start_new_session=True,
            preexec_fn=None if fd == 3 else (lambda: os.dup2(fd, 3)))
        listener.close()

    def status(self):
        try:
            with open(os.path.join(self.dir, "status.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def task(self):
        st = self.status()
        return st["tasks"][0] if st else None

    def connect(self):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(self.sock_path)
        c.settimeout(10)
        return c

    def end(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        t = self.task()
        if t and t["state"] == "running":
            try:
                os.killpg(t["pid"], signal.SIGKILL)
            except OSError:
                pass
        self.log.close()


def send(c, msg):
    c.sendall((json.dumps(msg) + "\n").encode())


def read_status(c):
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = c.recv(65536)
        assert chunk, "the shim closed the connection"
        buf += chunk
    return json.loads(buf.splitlines()[-1])


def test_lease_runs_out_and_fences(workdir):
    """No agent renews: the task is told to stop when the lease ends, and a
    task that ignores SIGTERM is killed after the fence grace, though the
    job's own grace is 30 s."""
    t0 = mono_ms()
    s = Shim(workdir, 'trap "" TERM; echo up; sleep 60', lease_ms=600, fence_grace_ms=300)
    try:
        wait_for(lambda: (s.task() or {}).get("state") == "running", 10, "the task to start")
        t = wait_for(lambda: (lambda x: x if x and x["state"] == "exited" else None)(s.task()),
                     10, "the task to be fenced")
        took = mono_ms() - t0
        assert t["cause"] == "lost" and "lease ran out" in t["detail"], t
        assert t["signal"] == signal.SIGKILL, t
        # gone after the lease and the fence grace, not the job's 30 s grace
        assert 600 <= took < 600 + 300 + 3000, took
        assert s.proc.poll() is None, "the shim keeps the status for an agent"
    finally:
        s.end()


def test_renewals_hold_the_tasks(workdir):
    s = Shim(workdir, "sleep 60", lease_ms=400, fence_grace_ms=200)
    try:
        c = s.connect()
        assert read_status(c)["tasks"][0]["state"] in ("running", "waiting")
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            send(c, {"type": "renew", "until_ms": mono_ms() + 400})
            time.sleep(0.1)
        assert s.task()["state"] == "running", "renewed, the task runs on past three leases"
        # a renewal cannot reach further than one lease from now
        send(c, {"type": "renew", "until_ms": mono_ms() + 3600 * 1000})
        t = wait_for(lambda: (lambda x: x if x["state"] == "exited" else None)(s.task()),
                     10, "the task to be fenced")
        assert t["cause"] == "lost", t
        c.close()
    finally:
        s.end()


def test_a_new_agent_takes_over(workdir):
    """A second connection replaces the first: it hears everything so far,
    the old one is closed, and its release lets the shim go."""
    s = Shim(workdir, "sleep 0.5; exit 3", lease_ms=5000)
    try:
        old = s.connect()
        read_status(old)
        new = s.connect()
        first = read_status(new)
        assert first["job"] == 7 and first["tasks"][0]["pid"] > 0
        # the old agent's commands are no longer heeded: it is cut off
        try:
            send(old, {"type": "stop", "cause": "cancelled", "detail": "old"})
        except OSError:
            pass
        old.settimeout(5)
        while old.recv(65536):
            pass  # statuses sent before the new agent came, then the end
        st = first
        while st["tasks"][0]["state"] != "exited":
            st = read_status(new)
        assert st["tasks"][0]["exit_code"] == 3 and st["tasks"][0]["cause"] == "exited", st
        send(new, {"type": "release"})
        assert s.proc.wait(timeout=10) == 0
    finally:
        s.end()


def test_no_agent_comes_back(workdir):
    """Tasks done, no agent for a lease after the lease: the shim exits and
    leaves its status for whoever comes."""
    s = Shim(workdir, "exit 0", lease_ms=300)
    try:
        wait_for(lambda: (s.task() or {}).get("state") == "exited", 10, "the task to end")
        assert s.proc.wait(timeout=10) == 0
        assert s.task()["exit_code"] == 0
    finally:
        s.end()


def test_bad_plan_is_refused(workdir):
    s = Shim(workdir, "true", lease_ms=0)
    try:
        assert s.proc.wait(timeout=10) == 1
        s.log.flush()
        with open(os.path.join(workdir, "shim.log")) as f:
            assert "lease_ms: must be an integer from 1" in f.read()
    finally:
        s.end()
