"""A job's output from anywhere: `tenk logs` reads it through the server
from the agents of its nodes (no shared folder read by the CLI), follows it
across a requeue, and `tenk run` streams every task's output as it is
written, forwards Ctrl-C (through a real pseudo-terminal) as a cancel, and
exits with the job's status."""
import base64
import os
import pty
import re
import select
import subprocess
import time

from conftest import BIN, wait_for

GATE = "for i in $(seq 300); do [ -e {f} ] && break; sleep 0.1; done"


def read_until(fd, want, timeout=30):
    """Reads a pty or pipe until `want` shows up; returns all read."""
    buf = b""
    deadline = time.monotonic() + timeout
    while want.encode() not in buf:
        left = deadline - time.monotonic()
        assert left > 0, f"no {want!r} in {buf!r}"
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
    return buf.decode(errors="replace")


def test_run_streams_and_exits_with_the_job(cluster, workdir):
    t = cluster
    gate = os.path.join(workdir, "go")
    p = subprocess.Popen([BIN, "run", "--", "sh", "-c",
                          "echo first; echo oops >&2; " + GATE.format(f=gate) +
                          "; echo second; exit 3"],
                         cwd=workdir, env=t.env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        # the first line arrives while the job still runs (it waits on the gate)
        got = read_until(p.stdout.fileno(), "first")
        assert "second" not in got
        open(gate, "w").close()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    out = got + out.decode()
    assert p.returncode == 3, (p.returncode, out, err)
    assert out.index("first") < out.index("oops") < out.index("second"), out
    assert "tenk run: job" in err.decode()

    # every task's lines, each after its rank
    p = t.run("run", "--tasks-per-node", "3", "-l", "--", "sh", "-c",
              "echo rank $RANK; echo bye $RANK")
    lines = set(p.stdout.splitlines())
    for r in range(3):
        assert f"{r}: rank {r}" in lines and f"{r}: bye {r}" in lines, p.stdout

    # tenk logs: the whole output, one task's, the last lines
    jid = t.submit("--tasks-per-node", "2", "-o", "lg-%j-%t.txt", "--", "sh", "-c",
                   "for i in 1 2 3 4 5; do echo t$RANK line $i; done")
    t.run("wait", jid)
    out = t.run("logs", jid, "--task", "1").stdout
    assert out == "".join(f"t1 line {i}\n" for i in range(1, 6)), out
    out = t.run("logs", jid, "--task", "0", "--tail", "2").stdout
    assert out == "t0 line 4\nt0 line 5\n", out
    out = t.run("logs", jid, "-l").stdout
    assert "0: t0 line 1" in out and "1: t1 line 5" in out
    # what the API answers: base64 data, offsets, the file's size
    st, ans = t.api("GET", f"/v1/jobs/{jid}/logs?task=1&offset=10&max=8")
    assert st == 200, ans
    e = ans["tasks"][0]
    assert base64.b64decode(e["data"]) == b"t1 line " and e["offset"] == 10 and e["size"] == 50
    st, ans = t.api("GET", f"/v1/jobs/{jid}/logs?task=7")
    assert st == 400 and "task: a rank from 0 to 1" in ans["error"]
    # a file that is not the job's account's is not read
    victim = os.path.join(workdir, f"lg-{jid}-1.txt")
    os.chown(victim, 65534, 65534)
    out = t.run("logs", jid, "--task", "1")
    assert out.stdout == "" and "not a file of the job's account" in out.stderr, out.stderr


def follow_across_requeue(t, workdir, jid, first, then):
    """tenk logs -f JID: reads until `first`, requeues the job, reads until
    `then`, cancels it; (all it printed, its stderr, its exit status)."""
    f = subprocess.Popen([BIN, "logs", "-f", str(jid)], cwd=workdir, env=t.env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        got = read_until(f.stdout.fileno(), first)
        t.run("requeue", jid)
        got += read_until(f.stdout.fileno(), then)
        t.run("cancel", jid)
        tail, err = f.communicate(timeout=30)
    finally:
        if f.poll() is None:
            f.kill()
    return got + tail.decode(errors="replace"), err.decode(errors="replace"), f.returncode


def test_logs_follow_across_requeue_and_ctrl_c(cluster, workdir):
    t = cluster
    jid = t.submit("--", "sh", "-c", "echo attempt $TENK_ATTEMPT; sleep 600")
    _, err, rc = follow_across_requeue(t, workdir, jid, "attempt 1", "attempt 2")
    assert rc == 130, "it exits with the job's status: cancelled"
    assert f"job {jid}: attempt 2" in err
    # an attempt it never had is an error that says so
    p = t.run("logs", jid, "--attempt", "9", check=False)
    assert p.returncode == 1 and f"job {jid} has 2 attempts; there is no attempt 9" in \
        p.stderr, (p.returncode, p.stderr)
    assert "attempt 1" in t.run("logs", jid, "--attempt", "1").stdout

    # Ctrl-C at a terminal cancels the job, and tenk run exits 130
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(workdir)
        os.execve(BIN, [BIN, "run", "--", "sh", "-c", "echo started; sleep 600"], t.env())
    try:
        read_until(fd, "started")
        os.write(fd, b"\x03")
        out = read_until(fd, "cancelling job")
        _, status = os.waitpid(pid, 0)
    finally:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 130, (status, out)
    jobs = t.json("queue", "--all")["jobs"]
    assert jobs[-1]["state"] == "CANCELLED"
    wait_for(lambda: not t.json("queue")["jobs"], 30, "nothing left running")


def test_attempts_are_marked_and_logs_start_at_their_own(cluster, workdir):
    """Attempts append to one output file: each after the first begins with
    a line that says which, where and when; tenk logs of an attempt shows
    that attempt's part alone, and logs -f goes on across requeues without
    repeating an attempt's output. --no-attempt-marks writes no line, and
    the logs still start where each attempt began."""
    t = cluster
    script = "echo attempt-$TENK_ATTEMPT; sleep 600"
    jid = t.submit("-o", "out-%j.txt", "--", "sh", "-c", script)
    out = os.path.join(workdir, f"out-{jid}.txt")

    def has(text):
        return os.path.exists(out) and text in open(out).read()

    def started(attempt):
        """The server heard attempt's task start (and where it began)."""
        a = t.job(jid)["attempts"]
        return len(a) >= attempt and a[attempt - 1]["tasks"][0]["state"] != "WAITING"

    wait_for(lambda: has("attempt-1\n"), 30, "attempt 1's output")
    t.run("requeue", jid)
    wait_for(lambda: has("attempt-2\n") and started(2), 30, "attempt 2's output")
    text = open(out).read()
    first, rest = text.split("\n", 1)
    assert first == "attempt-1", text
    mark, second = rest.split("\n", 1)
    assert re.fullmatch(r"--- tenk: attempt 2 on node1 at "
                        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ---", mark), text
    assert second == "attempt-2\n", text
    assert t.job(jid)["attempts"][1]["tasks"][0]["out_from"] == len("attempt-1\n")
    # each attempt's logs are its own part of the file
    assert t.run("logs", jid).stdout == rest
    assert t.run("logs", jid, "--attempt", "1").stdout == "attempt-1\n"
    assert t.run("logs", jid, "--attempt", "2").stdout == rest
    # following from attempt 2 across a second requeue: nothing twice
    got, _, _ = follow_across_requeue(t, workdir, jid, "attempt-2\n", "attempt-3\n")
    assert got.count("attempt-2\n") == 1 and "attempt-1" not in got, got
    assert got.count("--- tenk: attempt 3 on node1 at ") == 1, got
    assert got.endswith(" ---\nattempt-3\n"), got
    assert open(out).read().startswith(text)
    # without marks
    jid = t.submit("-o", "plain-%j.txt", "--no-attempt-marks", "--", "sh", "-c", script)
    out = os.path.join(workdir, f"plain-{jid}.txt")
    wait_for(lambda: has("attempt-1\n"), 30, "attempt 1's output")
    t.run("requeue", jid)
    wait_for(lambda: has("attempt-2\n") and started(2), 30, "attempt 2's output")
    assert open(out).read() == "attempt-1\nattempt-2\n"
    assert t.job(jid)["request"]["attempt_marks"] is False
    assert t.run("logs", jid).stdout == "attempt-2\n"
    t.run("cancel", jid)


def test_run_pty_is_a_terminal_on_the_node(cluster, workdir):
    """tenk run --pty joins this terminal to the task's: a real tty there,
    this one's size (and its changes), keys as typed (Ctrl-C to the task's
    own foreground job), and the task's exit status as tenk run's."""
    import fcntl
    import signal
    import struct
    import termios
    t = cluster
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(workdir)
        os.execve(BIN, [BIN, "run", "--pty", "--", "sh"], t.env())
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
        os.write(fd, b"tty; stty size; echo pid-$((6*7))\n")
        out = read_until(fd, "pid-42")
        assert "/dev/pts/" in out and "33 101" in out, out
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        os.kill(pid, signal.SIGWINCH)
        time.sleep(0.2)
        os.write(fd, b"stty size\n")
        read_until(fd, "40 120")
        os.write(fd, b"sleep 600\n")
        time.sleep(0.5)
        os.write(fd, b"\x03")
        os.write(fd, b"echo after-$((1+1))\n")
        read_until(fd, "after-2")
        os.write(fd, b"exit 3\n")
        deadline = time.monotonic() + 30
        status = None
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    os.read(fd, 4096)
                except OSError:
                    pass
            got, st = os.waitpid(pid, os.WNOHANG)
            if got:
                status = st
                break
    finally:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    assert status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3, status
    jobs = t.json("queue", "--all")["jobs"]
    assert jobs[-1]["state"] == "FAILED" and jobs[-1]["exit_code"] == 3, jobs[-1]

    # without a terminal, or more than one task, there is none
    p = t.run("run", "--pty", "--", "sh", check=False)
    assert p.returncode == 2 and "--pty: needs a terminal on stdin" in p.stderr
    status, ans = t.api("POST", "/v1/jobs", {"command": ["sh"], "cwd": workdir, "pty": True,
                                             "nodes": 1, "tasks_per_node": 2})
    assert status == 400 and "one task on one node" in ans["error"], ans
    jid = t.submit("--", "sleep", "30")
    t.wait_state(jid, "RUNNING")
    status, ans = t.api("GET", f"/v1/jobs/{jid}/pty")
    assert status == 400 and "expected an upgrade" in ans["error"], ans
    # another user's job is not someone else's terminal: seen in the queue,
    # refused with whose it is
    tok = t.json("users", "add", "eve", "--unix-user", "nobody")["token"]
    owner = t.job(jid)["owner"]
    status, ans = t.api("GET", f"/v1/jobs/{jid}/pty", token=tok,
                        headers={"Connection": "Upgrade", "Upgrade": "tenk-pty"})
    assert status == 403 and f"job {jid} is {owner}'s" in ans["error"], ans
    t.run("cancel", jid)


def test_follow_says_an_unreadable_output_whatever_its_name(cluster, workdir):
    """What the agent could read travels as a status, not in its words:
    following a job whose output the agent may not read says so, even when
    the file's name holds the words of a file not written yet."""
    import pwd
    t = cluster
    out = os.path.join(workdir, "no output yet.out")
    with open(out, "w"):
        pass
    nobody = pwd.getpwnam("nobody")
    os.chown(out, nobody.pw_uid, nobody.pw_gid)  # not the job's account's (root's)
    os.chmod(out, 0o666)
    jid = t.submit("-o", out, "--", "sh", "-c", "echo hi; sleep 2")
    f = subprocess.run([BIN, "logs", "-f", str(jid)], cwd=workdir, env=t.env(),
                       capture_output=True, text=True, timeout=60)
    assert "not a file of the job's account" in f.stderr, (f.returncode, f.stderr)
    st, res = t.api("GET", f"/v1/jobs/{jid}/logs")
    assert st == 200 and res["tasks"][0]["status"] == "unreadable", res


def test_logs_are_read_as_the_jobs_account(cluster, workdir):
    """The agent opens a task's output as the job's account: an output
    named inside a folder the account cannot search reads as refused,
    whether the file there exists or not (read as root, the answer told
    which)."""
    import json
    import shutil
    import tempfile
    t = cluster
    p = t.run("users", "add", "bob", "--unix-user", "nobody", "--json")
    bob = dict(t.env(), TENK_TOKEN=json.loads(p.stdout)["token"])
    base = tempfile.mkdtemp(prefix="tenk-logs-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        private = os.path.join(base, "root-only")
        os.mkdir(private, 0o700)
        with open(os.path.join(private, "there.out"), "w") as f:
            f.write("root's\n")
        said = {}
        for name in ("there.out", "missing.out"):
            jid = int(t.run("submit", "-o", os.path.join(private, name), "--", "true",
                            env=bob, cwd="/tmp").stdout)
            t.run("wait", jid, check=False, env=bob)
            st, ans = t.api("GET", f"/v1/jobs/{jid}/logs", token=bob["TENK_TOKEN"])
            assert st == 200, ans
            part = ans["tasks"][0]
            said[name] = (part["status"], part["error"].replace(name, "NAME"))
        assert said["there.out"] == said["missing.out"], said
        assert said["there.out"][0] == "unreadable" and "Permission denied" in \
            said["there.out"][1], said
    finally:
        shutil.rmtree(base)


def test_run_hung_up_or_terminated_ends_its_job(cluster, workdir):
    """tenk run whose terminal hangs up (SIGHUP, an ssh drop) cancels its
    running job; terminated (SIGTERM) while its job waits, cancels it too;
    each exits 128 + the signal. With --keep the job is left as it is."""
    import signal
    t = cluster

    def run(*args):
        return subprocess.Popen([BIN, "run", *args], cwd=workdir, env=t.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def job_of(p):
        line = read_until(p.stderr.fileno(), "\n")
        assert line.startswith("tenk run: job "), line
        return int(line.split()[3])

    # SIGHUP while it runs
    p = run("--", "sh", "-c", "echo started; sleep 600")
    jid = job_of(p)
    read_until(p.stdout.fileno(), "started")
    p.send_signal(signal.SIGHUP)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGHUP, (p.returncode, err)
    assert f"hung up: cancelled job {jid}" in err.decode(), err
    t.wait_state(jid, "CANCELLED")
    # SIGTERM while it waits behind a job that holds every accelerator
    hog = t.submit("-G", "8", "--", "sleep", "600")
    t.wait_state(hog, "RUNNING")
    p = run("-G", "1", "--", "true")
    jid = job_of(p)
    wait_for(lambda: t.job(jid)["reason"], 30, "its reason")
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGTERM, (p.returncode, err)
    assert t.job(jid)["state"] == "CANCELLED", t.job(jid)
    t.run("cancel", hog)
    # --keep: the job goes on
    p = run("--keep", "--", "sh", "-c", "echo started; sleep 600")
    jid = job_of(p)
    read_until(p.stdout.fileno(), "started")
    p.send_signal(signal.SIGHUP)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGHUP and "leaving (--keep)" in err.decode(), err
    assert t.job(jid)["state"] == "RUNNING"
    t.run("cancel", jid)
    p = subprocess.run([BIN, "submit", "--keep", "--", "true"], cwd=workdir, env=t.env(),
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--keep: is for tenk run" in p.stderr, p.stderr
