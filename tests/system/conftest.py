"""System tests: the real tenk binary, started in temporary folders, spoken
to over real HTTP on loopback and through the real CLI.

TENK_BIN names the binary under test (default: build/tenk). Under
AddressSanitizer every daemon must also stop cleanly on SIGTERM with no leak
and no sanitizer report; Daemon.stop() checks that.
"""
import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.parse

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.abspath(os.environ.get("TENK_BIN", os.path.join(ROOT, "build", "tenk")))
# the CLI that wait_for's polls run (scripts/check: the normal build's, in the
# sanitizer build's pass, where a call costs four times the CPU and the polls
# took most of the machine); every other call runs BIN
POLL_BIN = os.path.abspath(os.environ.get("TENK_POLL_BIN") or BIN)
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
# LeakSanitizer's scan at exit reads the blocks of dynamic TLS that glibc
# hands out (the TLS libraries' own), and, where a block happens to lie at
# an offset it takes for glibc 2.19's header, reads a bad range and dies
# ("Tracer caught signal 11"; google/sanitizers issue 1322): it depends on
# where malloc put things, so one CLI call in a given state fails every
# time. Not scanning those blocks loses nothing of tenk's own (its TLS is
# static); every process of the tests runs so.
ASAN_BASE = "intercept_tls_get_addr=0"


_OWN_CGROUPS = []


def pytest_sessionstart(session):
    """Each process that runs tests (a pytest-xdist worker, or pytest
    itself when alone) in cgroups of its own: see owncg.py."""
    import owncg
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker or not getattr(session.config.option, "numprocesses", None):
        _OWN_CGROUPS.extend(owncg.enter())
    # the CLI's clusters (tenk config), which every `tenk up` writes: the
    # session's own, never the home folder's of whoever runs the tests
    import tempfile
    os.environ["ASAN_OPTIONS"] = ":".join(
        x for x in (os.environ.get("ASAN_OPTIONS"), ASAN_BASE) if x)
    os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="tenk-test-config-")
    # jobs' MASTER_PORTs: a range of each worker's own, since every worker's
    # nodes listen on this machine's loopback (the servers read it)
    if worker and worker.startswith("gw") and worker[2:].isdigit() and int(worker[2:]) > 0:
        first = int(os.environ.get("TENK_MASTER_PORTS") or 29500)
        os.environ["TENK_MASTER_PORTS"] = str(first + 1024 * int(worker[2:]))


def pytest_sessionfinish(session):
    import owncg
    owncg.leave(_OWN_CGROUPS)
    _OWN_CGROUPS.clear()
    conf = os.environ.get("XDG_CONFIG_HOME", "")
    if os.path.basename(conf).startswith("tenk-test-config-"):
        shutil.rmtree(conf, ignore_errors=True)


# > 0 while wait_for polls: the CLI calls it makes then skip LeakSanitizer's
# scan at exit (about 40 ms of CPU a call under ASan, where each poll burned
# most of a core); every other call of the CLI keeps it
_POLLING = [0]


def wait_for(pred, timeout=20.0, what="condition", interval=0.02, show=None):
    """Polls pred() until it returns something true; fails after timeout,
    saying what show() returns then (when given) beside pred's last. The
    pause between polls grows from interval to a tenth of a second (or
    stays at interval, when that is longer)."""
    deadline = time.monotonic() + timeout
    last = None
    pause = interval
    while time.monotonic() < deadline:
        _POLLING[0] += 1
        try:
            last = pred()
        finally:
            _POLLING[0] -= 1
        if last:
            return last
        time.sleep(pause)
        pause = min(pause * 1.5, max(interval, 0.1))
    seen = f"; {show()!r}" if show else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r}{seen})")


def alive(pid):
    """Is process pid running (not gone, not a zombie)?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def connect(url, ca=None, timeout=30):
    """An http.client connection to url's server: HTTPS verified against the
    CA file ca (the system's when None), or plain HTTP."""
    u = urllib.parse.urlparse(url)
    if u.scheme == "https":
        ctx = ssl.create_default_context(cafile=ca)
        return http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout, context=ctx)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)


_STARTED = []  # every Daemon of the running test (see reap_daemons)


@pytest.fixture(autouse=True)
def reap_daemons():
    """Kills what daemons a test left running (one that failed before its
    own stop), so that none outlives it and loads the tests after."""
    first = len(_STARTED)
    yield
    for d in _STARTED[first:]:
        if d.alive():
            d.proc.kill()
            d.proc.wait()
    del _STARTED[first:]


class Daemon:
    """One tenk daemon process (up, server or agent) that the test owns."""

    def __init__(self, args, cwd, name, wrap=None, env=None, program=None):
        self.args = list(wrap or []) + [program or BIN] + args
        self.extra_env = dict(env or {})
        self.cwd = cwd
        self.name = name
        self.log_path = os.path.join(cwd, f"{name}.log")
        self.proc = None
        self.start()

    def start(self):
        self.log = open(self.log_path, "ab")
        env = dict(os.environ)
        env.setdefault("TENK_LOG_LEVEL", "debug")
        env["ASAN_OPTIONS"] = ASAN_BASE + ":detect_leaks=1:abort_on_error=0:exitcode=99"
        env.update(self.extra_env)
        self.proc = subprocess.Popen(self.args, cwd=self.cwd, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=env)
        _STARTED.append(self)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def output(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def kill9(self):
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.log.close()

    def stop(self, timeout=60):
        """SIGTERM, then insist on a clean exit with nothing from sanitizers."""
        if not self.alive():
            code = self.proc.returncode
        else:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"{self.name} did not stop within {timeout}s:\n"
                                     + self.output()[-3000:])
        self.log.close()
        out = self.output()
        for mark in SANITIZER_MARKS:
            assert mark not in out, f"{self.name}: sanitizer report:\n{out[-6000:]}"
        assert code == 0, f"{self.name} exited {code}:\n{out[-3000:]}"


class Tenk:
    """A tenk cluster's front door: the CLI and raw HTTP."""

    def __init__(self, workdir, data, wrap=None, network=None):
        self.workdir = workdir
        self.data = data
        self.daemons = []
        self.wrap = list(wrap or [])  # e.g. run inside a network namespace
        self.cli = BIN  # the tenk that run() calls
        # run()'s CLI speaks to the server as a client on its machine does,
        # over DATA/api.sock, where there is one (a CLI call over HTTPS costs
        # it and a sanitized server 20 ms more CPU: the TLS handshake); over
        # the network (server.url) when network is true or the CLI runs
        # inside a namespace (a user on another host). api() and the agents
        # always speak over the network.
        self.network = bool(self.wrap) if network is None else network

    @property
    def url(self):
        with open(os.path.join(self.data, "server.url")) as f:
            return f.read().strip()

    @property
    def token(self):
        with open(os.path.join(self.data, "admin.token")) as f:
            return f.read().strip()

    @property
    def ca(self):
        """The CA the server's own certificate is issued by (DATA/tls/ca.pem),
        or None when it serves plain HTTP or a certificate it was given."""
        path = os.path.join(self.data, "tls", "ca.pem")
        return path if self.url.startswith("https:") and os.path.exists(path) else None

    def connection(self, timeout=30):
        """An HTTP(S) connection to the server, verifying its certificate."""
        return connect(self.url, self.ca, timeout)

    def env(self):
        env = dict(os.environ)
        sock = os.path.join(self.data, "api.sock")
        if not self.network and os.path.exists(sock):
            env["TENK_SERVER"] = "unix:" + sock
        else:
            env["TENK_SERVER"] = self.url
            if self.ca:
                env["TENK_CA"] = self.ca
        env["TENK_TOKEN"] = self.token
        env.pop("TENK_LOG_LEVEL", None)
        return env

    def run(self, *args, check=True, cwd=None, timeout=120, env=None):
        """Runs `tenk ARGS`; returns the CompletedProcess."""
        env = env or self.env()
        cli = self.cli
        if _POLLING[0]:
            env = dict(env, ASAN_OPTIONS=ASAN_BASE + ":detect_leaks=0")
            cli = POLL_BIN if cli == BIN else cli
        p = subprocess.run(self.wrap + [cli] + [str(a) for a in args],
                           cwd=cwd or self.workdir,
                           env=env, capture_output=True, text=True,
                           timeout=timeout)
        for mark in SANITIZER_MARKS:
            assert mark not in p.stderr, f"tenk {args}: sanitizer report:\n{p.stderr}"
        if check and p.returncode != 0:
            raise AssertionError(f"tenk {' '.join(map(str, args))} exited {p.returncode}:\n"
                                 f"{p.stdout}\n{p.stderr}")
        return p

    def json(self, *args):
        return json.loads(self.run(*args, "--json").stdout)

    def submit(self, *args, **kw):
        return int(self.run("submit", *args, **kw).stdout.strip())

    def job(self, jid):
        return self.json("show", jid)

    def wait_state(self, jid, states, timeout=30):
        if isinstance(states, str):
            states = (states,)
        return wait_for(lambda: (lambda j: j if j["state"] in states else None)(self.job(jid)),
                        timeout, f"job {jid} in {states}")

    def api(self, method, path, body=None, token="admin", raw=None, headers=None):
        """One HTTP request; returns (status, decoded JSON or text)."""
        c = self.connection()
        h = dict(headers or {})
        if token == "admin":
            h["Authorization"] = "Bearer " + self.token
        elif token:
            h["Authorization"] = "Bearer " + token
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if data is not None:
            h.setdefault("Content-Type", "application/json")
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text

    def wait_nodes_up(self, n=1, timeout=30):
        def up():
            nodes = self.json("nodes")["nodes"]
            ready = [x for x in nodes if x["state"] in ("UP", "DRAINED", "DRAINING", "VALIDATING",
                                                      "UNVALIDATED")]
            return ready if len(ready) >= n else None
        return wait_for(up, timeout, f"{n} node(s) UP")


def root_jobs_config(data, **extra):
    """The configuration of a test cluster whose admin runs its jobs as
    root, as `tenk up` writes for a root user; `tenk server` has no such
    default. Merged into data/config.json with extra keys."""
    os.makedirs(data, exist_ok=True)
    path = os.path.join(data, "config.json")
    cfg = {}
    if os.path.exists(path):
        with open(path) as f:
            cfg = json.load(f)
    cfg.update({"allow_root_jobs": True}, **extra)
    with open(path, "w") as f:
        json.dump(cfg, f)


def server_and_agent(workdir, procs, node_timeout, data=None, work=None, agent_args=(),
                     listen="127.0.0.1:0", log_level=None, server_args=(), **config):
    """A `tenk server` on DATA (WORKDIR/data) and one `tenk agent` n1 of 8
    fake H100s working in WORK (WORKDIR/agent), with --stop-jobs, the node
    up; config merged into config.json. Returns (tenk, server, agent)."""
    data = data or os.path.join(workdir, "data")
    work = work or os.path.join(workdir, "agent")
    root_jobs_config(data, **config)
    env = dict(os.environ, TENK_LOG_LEVEL=log_level) if log_level else None
    server = Daemon(["server", "--data", data, "--listen", listen, "--node-timeout",
                     node_timeout, *server_args], workdir, "server", env=env)
    procs.append(server)
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")) or not server.alive(), 20,
             "the server")
    assert server.alive(), server.output()
    t = Tenk(workdir, data)
    agent = Daemon(["agent", "--server", t.url, "--token-file", os.path.join(data, "agent.token"),
                    "--name", "n1", "--fake-gpus", "8xH100", "--work-dir", work, "--stop-jobs",
                    *agent_args], workdir, "agent", env=env)
    procs.append(agent)
    t.wait_nodes_up(1)
    return t, server, agent


def run_dirs(under):
    """The run folders in memory that agents with a work folder under
    `under` chose (each keeps the link WORK/run to its own)."""
    found = []
    for root, dirs, _files in os.walk(under):
        for name in dirs:
            path = os.path.join(root, name)
            if name == "run" and os.path.islink(path):
                found.append(os.path.realpath(path))
    return found


def shim_pids(under):
    """The tenk-shim processes whose folder is under `under`, or under the
    run folder of an agent whose work folder is (not a shim's child between
    its fork and its task's exec, which shows the shim's command line
    too)."""
    unders = tuple(os.path.realpath(d) + "/" for d in [under] + run_dirs(under))
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if len(argv) >= 2 and os.path.basename(argv[0]) == b"tenk-shim" and \
                os.path.realpath(argv[1].decode(errors="replace")).startswith(unders):
            found[int(pid)] = ppid
    return [pid for pid, ppid in found.items() if ppid not in found]


def children(pid):
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(k) for k in f.read().split()]
    except OSError:
        pass
    return kids


def fence_script(workdir, hosts):
    """A power_fence command for namespace hosts: it "powers off" node $1
    by killing every process in its network namespace (agent, shims,
    tasks), and notes each call; while WORKDIR/fence-fails exists it fails
    as a BMC that does not answer would."""
    log = os.path.join(workdir, "fenced")
    path = os.path.join(workdir, "fence-node")
    cases = "\n".join(f"host{h}) ns={hosts.names[h]} ;;" for h in range(1, len(hosts.names)))
    with open(path, "w") as f:
        f.write(f"""#!/bin/sh
echo "$1 $2" >> {log}
if [ -e {workdir}/fence-fails ]; then echo "the BMC of $1 does not answer"; exit 1; fi
case "$1" in
{cases}
*) exit 2 ;;
esac
ip netns pids "$ns" | xargs -r kill -9
echo "$1 is off"
""")
    os.chmod(path, 0o755)
    return path, log


def end_shims(under):
    """Kills what shims of agents this test started still run under folder
    `under` (their tasks, each a session of its own, and the shims): their
    lease would end them too, but only later, in another test's time."""
    for shim in shim_pids(under):
        for task in children(shim):
            for sig_target in (lambda: os.killpg(task, signal.SIGKILL),
                               lambda: os.kill(task, signal.SIGKILL)):
                try:
                    sig_target()
                except OSError:
                    pass
        try:
            os.kill(shim, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture
def workdir(tmp_path):
    d = tmp_path / "work"
    d.mkdir()
    yield str(d)
    end_shims(str(d))
    for run in run_dirs(str(d)):
        shutil.rmtree(run, ignore_errors=True)


def start_up(workdir, *extra, fake="8xH100", env=None, stop_jobs=True, wrap=None):
    """`tenk up` in workdir. stop_jobs: its stop ends the jobs (the
    fixtures' default, so that nothing outlives a test); without it they
    go on in their shims, as for an operator."""
    data = os.path.join(workdir, "tenk-data")
    t = Tenk(workdir, data)
    args = ["up", "--data", data, "--listen", "127.0.0.1:0", "--name", "node1"]
    if stop_jobs:
        args.append("--stop-jobs")
    if os.path.exists(os.path.join(data, "server.url")):
        os.remove(os.path.join(data, "server.url"))  # left by an earlier run
    if fake:
        args += ["--fake-gpus", fake]
    d = Daemon(args + list(extra), workdir, "up", env=env, wrap=wrap)
    t.daemons.append(d)
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")) or not d.alive(), 20,
             "server.url")
    assert d.alive(), d.output()
    t.wait_nodes_up(1)
    return t, d


@pytest.fixture
def cluster(workdir):
    """`tenk up` with one node of 8 fake H100s."""
    t, d = start_up(workdir)
    yield t
    if d.alive():
        d.stop()


@pytest.fixture
def procs():
    """Daemons a test starts itself; killed at the end if still running."""
    started = []
    yield started
    for d in started:
        if d.alive():
            d.proc.kill()
            d.proc.wait()


class MultiHost(Tenk):
    """A server in host 0 and an agent in each other host of a netns.Hosts."""

    def __init__(self, workdir, hosts, fake="4xH100", node_timeout="30s", agent_args=(),
                 programs=None, agent_env=None, agent_args_of=None):
        """programs: the tenk binary of host H (0: the server) where it is not
        this build's (an earlier release's); agent_env: host H's agent's
        environment beside this one's; agent_args_of: host H's agent's own
        options, after agent_args."""
        data = os.path.join(workdir, "data")
        root_jobs_config(data)
        super().__init__(workdir, data, wrap=hosts.cmd(0, []))
        self.hosts = hosts
        self.programs = dict(programs or {})
        self.port = 7480
        self.server = Daemon(["server", "--data", data, "--listen",
                              f"{hosts.addrs[0]}:{self.port}", "--node-timeout", node_timeout],
                             workdir, "server", wrap=hosts.cmd(0, []),
                             program=self.programs.get(0))
        self.daemons.append(self.server)
        wait_for(lambda: os.path.exists(os.path.join(data, "server.url")) or
                 not self.server.alive(), 20, "the server to listen")
        assert self.server.alive(), self.server.output()
        self.agents = {}
        self.fake = fake
        self.agent_args = list(agent_args)
        self.agent_env = dict(agent_env or {})
        self.agent_args_of = dict(agent_args_of or {})
        for h in range(1, len(hosts.names)):
            self.start_agent(h)
        self.wait_nodes_up(len(hosts.names) - 1)

    def start_agent(self, h, stop_jobs=True, program=None):
        d = Daemon(["agent", "--server", self.url, "--token-file",
                    os.path.join(self.data, "agent.token"), "--name", f"host{h}",
                    "--fake-gpus", self.fake, "--work-dir",
                    os.path.join(self.workdir, f"agent{h}")] +
                   (["--stop-jobs"] if stop_jobs else []) + self.agent_args +
                   list(self.agent_args_of.get(h, ())),
                   self.workdir, f"agent{h}", wrap=self.hosts.cmd(h, []),
                   program=program or self.programs.get(h), env=self.agent_env.get(h))
        self.agents[h] = d
        self.daemons.append(d)
        return d

    def stop_all(self):
        for h, d in self.agents.items():
            if d.alive():
                d.stop()
        if self.server.alive():
            self.server.stop()


@pytest.fixture
def hosts3():
    from netns import Hosts
    h = Hosts(3)
    yield h
    h.destroy()


@pytest.fixture
def hosts4():
    from netns import Hosts
    h = Hosts(4)
    yield h
    h.destroy()


@pytest.fixture
def postgres():
    """A PostgreSQL of the test's own (scripts/pgtest: initdb and pg_ctl in
    a temporary folder, as the postgres user, on a unix socket): the URL of
    its empty database tenk."""
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="tenk-pg-")
    os.chmod(d, 0o711)
    script = os.path.join(ROOT, "scripts", "pgtest")
    p = subprocess.run([script, "start", os.path.join(d, "pg")], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, f"PostgreSQL did not start: {p.stdout}{p.stderr}"
    try:
        yield p.stdout.strip()
    finally:
        subprocess.run([script, "stop", os.path.join(d, "pg")], timeout=60)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def kill_all():
    """Daemons registered here are killed at the end if still running."""
    daemons = []
    yield daemons
    for d in daemons:
        if d.alive():
            d.proc.kill()
            d.proc.wait()
