"""HTTPS: the server with a certificate of its own CA (the default) or of
one of the test's making (openssl), the CLI and the agent verifying it, what
fails without it, and plain HTTP only when asked for."""
import os
import time
import shutil
import subprocess

import pytest

from conftest import BIN, Daemon, Tenk, root_jobs_config, wait_for

pytestmark = pytest.mark.skipif(not shutil.which("openssl"), reason="openssl")


def make_certs(d):
    """A CA, and a certificate for 127.0.0.1 it signed."""
    def ssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d)
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=tenk test CA")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=127.0.0.1")
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName = IP:127.0.0.1, DNS:localhost\n")
    ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "san.ext")
    return {k: os.path.join(d, k) for k in ("ca.pem", "server.pem", "server.key")}


def test_https_end_to_end(workdir, procs):
    certs = make_certs(workdir)
    data = os.path.join(workdir, "data")
    root_jobs_config(data)
    srv = Daemon(["server", "--data", data, "--listen", "127.0.0.1:0", "--tls-cert",
                  certs["server.pem"], "--tls-key", certs["server.key"]], workdir, "server")
    procs.append(srv)
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")) or not srv.alive(), 20,
             "the server")
    assert srv.alive(), srv.output()
    t = Tenk(workdir, data, network=True)
    assert t.url.startswith("https://127.0.0.1:"), t.url
    ag = Daemon(["agent", "--server", t.url, "--token-file", os.path.join(data, "agent.token"),
                 "--name", "n1", "--fake-gpus", "1xH100", "--work-dir",
                 os.path.join(workdir, "agent"), "--stop-jobs", "--ca-file", certs["ca.pem"]],
                workdir, "agent")
    procs.append(ag)
    env = dict(t.env(), TENK_CA=certs["ca.pem"])
    wait_for(lambda: "node n1 joined" in srv.output(), 20, "the agent over HTTPS")
    jid = t.run("submit", "--", "sh", "-c", "echo $TENK_CA", env=env).stdout.strip()
    p = t.run("wait", jid, env=env, timeout=60)
    assert "COMPLETED" in p.stdout
    # the task's TENK_CA: the agent's copy of the CA, where the job's user can read it
    task_ca = open(os.path.join(workdir, f"tenk-{jid}.out")).read().strip()
    assert task_ca == os.path.join(workdir, "agent", "server-ca.pem"), task_ca
    assert open(task_ca).read() == open(certs["ca.pem"]).read()
    assert os.stat(task_ca).st_mode & 0o777 == 0o644
    # curl with the CA, as any client
    p = subprocess.run(["curl", "-sS", "--cacert", certs["ca.pem"], "-H",
                        "Authorization: Bearer " + t.token, t.url + "/v1/nodes"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and '"n1"' in p.stdout, p.stderr
    # without the CA, nothing is sent: the certificate is not one the system trusts
    p = subprocess.run([BIN, "queue"], env=dict(t.env()), capture_output=True, text=True,
                       timeout=30)
    assert p.returncode != 0 and "certificate" in p.stderr.lower(), p.stderr
    p = subprocess.run([BIN, "queue", "--ca-file", certs["ca.pem"]], env=dict(t.env()),
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([BIN, "queue", "--ca-file", "/nonexistent"], env=dict(t.env()),
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "--ca-file: cannot read /nonexistent" in p.stderr, p.stderr
    # plain HTTP to the HTTPS port gets no answer
    p = subprocess.run([BIN, "queue"], env=dict(env, TENK_SERVER=t.url.replace("https", "http")),
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    # a key that is not the certificate's: the server says so and does not start
    bad = Daemon(["server", "--data", os.path.join(workdir, "d2"), "--listen", "127.0.0.1:0",
                  "--tls-cert", certs["server.pem"], "--tls-key", os.path.join(workdir, "ca.key")],
                 workdir, "bad")
    procs.append(bad)
    wait_for(lambda: not bad.alive(), 20, "the refusal")
    assert "do not match" in bad.output() or "TLS" in bad.output(), bad.output()


def start_server(workdir, procs, data, *extra, wrap=None, name="server"):
    if os.path.exists(os.path.join(data, "server.url")):
        os.remove(os.path.join(data, "server.url"))
    srv = Daemon(["server", "--data", data, *extra], workdir, name, wrap=wrap)
    procs.append(srv)
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")) or not srv.alive(), 20,
             "the server")
    assert srv.alive(), srv.output()
    return srv


def test_tls_by_default(workdir, procs):
    """A server given no certificate makes a CA in DATA/tls and serves HTTPS
    with a certificate of it; the CLI finds ./tenk-data/tls/ca.pem, an agent
    the ca.pem beside its token file; a restart keeps the CA."""
    data = os.path.join(workdir, "tenk-data")
    root_jobs_config(data)
    srv = start_server(workdir, procs, data, "--listen", "127.0.0.1:0")
    t = Tenk(workdir, data, network=True)
    assert t.url.startswith("https://127.0.0.1:"), t.url
    tls = os.path.join(data, "tls")
    ca = os.path.join(tls, "ca.pem")
    assert os.stat(os.path.join(tls, "ca.key")).st_mode & 0o777 == 0o600
    assert os.stat(tls).st_mode & 0o777 == 0o700
    assert f"made a cluster CA: {ca}" in srv.output()
    p = subprocess.run(["openssl", "verify", "-CAfile", ca, "-purpose", "sslserver",
                        os.path.join(tls, "server.pem")], capture_output=True, text=True)
    assert p.returncode == 0 and ": OK" in p.stdout, p.stdout + p.stderr
    # any client with the CA; none without it
    p = subprocess.run(["curl", "-sS", "--cacert", ca, "-H", "Authorization: Bearer " + t.token,
                        t.url + "/v1/nodes"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and '"nodes"' in p.stdout, p.stderr
    p = subprocess.run(["curl", "-sS", t.url + "/v1/health"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode != 0 and "certificate" in p.stderr.lower(), p.stderr
    # the agent: no --ca-file, no TENK_CA; the CA beside agent.token
    env = {k: v for k, v in os.environ.items() if k != "TENK_CA"}
    ag = Daemon(["agent", "--server", t.url, "--token-file", os.path.join(data, "agent.token"),
                 "--name", "n1", "--fake-gpus", "1xH100", "--work-dir",
                 os.path.join(workdir, "agent"), "--stop-jobs"], workdir, "agent", env=env)
    procs.append(ag)
    t.wait_nodes_up(1)
    # the CLI in the folder of tenk-data: its URL, token and CA, nothing else given
    bare = {k: v for k, v in os.environ.items() if not k.startswith("TENK_")}
    jid = t.run("submit", "--", "sh", "-c", "cat $TENK_CA", env=bare).stdout.strip()
    assert "COMPLETED" in t.run("wait", jid, env=bare, timeout=60).stdout
    with open(ca) as f:
        ca_text = f.read()
    with open(os.path.join(workdir, f"tenk-{jid}.out")) as f:
        assert f.read() == ca_text  # the task verifies the server as the agent does
    # a restart: the same CA, a fresh certificate; the agent goes on
    with open(os.path.join(tls, "server.pem")) as f:
        first = f.read()
    srv.stop()
    srv = start_server(workdir, procs, data, "--listen", "127.0.0.1:0", name="again")
    with open(ca) as f:
        assert f.read() == ca_text
    with open(os.path.join(tls, "server.pem")) as f:
        assert f.read() != first
    assert "made a cluster CA" not in srv.output()
    assert "n1" in t.run("nodes", env=bare).stdout
    # a CA without its key is not replaced behind the clients' backs
    srv.stop()
    os.rename(os.path.join(tls, "ca.key"), os.path.join(workdir, "ca.key"))
    p = subprocess.run([BIN, "server", "--data", data, "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "has ca.pem but not ca.key" in p.stderr, p.stderr
    ag.stop()


def test_insecure_http_is_asked_for(workdir, procs):
    """--insecure-http serves plain HTTP and makes no CA; on loopback the CLI
    needs nothing more; --tls-cert with it is refused."""
    data = os.path.join(workdir, "data")
    root_jobs_config(data)
    start_server(workdir, procs, data, "--listen", "127.0.0.1:0", "--insecure-http")
    t = Tenk(workdir, data, network=True)
    assert t.url.startswith("http://127.0.0.1:"), t.url
    assert not os.path.exists(os.path.join(data, "tls"))
    assert t.json("nodes")["nodes"] == []
    p = subprocess.run([BIN, "server", "--data", os.path.join(workdir, "d2"), "--listen",
                        "127.0.0.1:0", "--insecure-http", "--tls-cert", "x", "--tls-key", "y"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "--insecure-http and --tls-cert" in p.stderr, p.stderr


def test_no_token_in_clear_to_another_host(workdir, procs, hosts3):
    """Across hosts: the server's own certificate names its address, and an
    agent given a copy of agent.token with tls/ca.pem beside it joins over
    HTTPS; to a plain-HTTP server on another host, neither the CLI nor an
    agent sends its token unless told --insecure-http."""
    h = hosts3
    data = os.path.join(workdir, "data")
    root_jobs_config(data)
    start_server(workdir, procs, data, "--listen", f"{h.addrs[0]}:7480", wrap=h.cmd(0, []))
    t = Tenk(workdir, data, network=True)
    assert t.url == f"https://{h.addrs[0]}:7480", t.url
    join = os.path.join(workdir, "join")  # what an operator copies to a new node
    os.makedirs(os.path.join(join, "tls"))
    shutil.copy(os.path.join(data, "agent.token"), join)
    shutil.copy(os.path.join(data, "tls", "ca.pem"), os.path.join(join, "tls"))
    env = {k: v for k, v in os.environ.items() if k != "TENK_CA"}
    procs.append(Daemon(["agent", "--server", t.url, "--token-file",
                         os.path.join(join, "agent.token"), "--name", "host1", "--fake-gpus",
                         "1xH100", "--work-dir", os.path.join(workdir, "a1"), "--stop-jobs"],
                        workdir, "agent1", wrap=h.cmd(1, []), env=env))
    wait_for(lambda: [n for n in Tenk(workdir, data, wrap=h.cmd(2, [])).json("nodes")["nodes"]
                      if n["state"] == "UP"], 30, "host1 UP, seen from host2 over HTTPS")
    # a plain server on host 0
    plain = os.path.join(workdir, "plain")
    root_jobs_config(plain)
    start_server(workdir, procs, plain, "--listen", f"{h.addrs[0]}:7481", "--insecure-http",
                 wrap=h.cmd(0, []), name="plain")
    tp = Tenk(workdir, plain, wrap=h.cmd(1, []))
    assert tp.url == f"http://{h.addrs[0]}:7481"
    p = tp.run("nodes", check=False)
    assert p.returncode != 0, p.stdout
    assert f"refusing to send the token over plain HTTP to {tp.url}" in p.stderr, p.stderr
    p = tp.run("nodes", check=False, env=dict(tp.env(), TENK_INSECURE_HTTP="0"))
    assert p.returncode != 0 and "refusing" in p.stderr
    assert tp.json("nodes", "--insecure-http")["nodes"] == []
    ag = Daemon(["agent", "--server", tp.url, "--token-file", os.path.join(plain, "agent.token"),
                 "--name", "host1", "--fake-gpus", "1xH100", "--work-dir",
                 os.path.join(workdir, "p1")], workdir, "refused", wrap=h.cmd(1, []))
    procs.append(ag)
    wait_for(lambda: not ag.alive(), 20, "the agent's refusal")
    assert "refusing to send the join token over plain HTTP" in ag.output(), ag.output()
    assert "--insecure-http" in ag.output()
    procs.append(Daemon(["agent", "--server", tp.url, "--token-file",
                         os.path.join(plain, "agent.token"), "--name", "host1", "--fake-gpus",
                         "1xH100", "--work-dir", os.path.join(workdir, "p2"), "--stop-jobs",
                         "--insecure-http"], workdir, "plain-agent", wrap=h.cmd(1, [])))
    wait_for(lambda: [n for n in tp.json("nodes", "--insecure-http")["nodes"]
                      if n["state"] == "UP"], 30, "the plain agent UP")


def test_server_gone_mid_call(workdir):
    """A server that dies after the handshake, the request unread (its
    kernel answers with a reset, as after kill -9): the CLI says it cannot
    reach it, for a read and for a write. (A reset can also meet a write
    the CLI makes after the error was read; that one raised SIGPIPE, about
    once in 35,000 calls under kill -9: test_multinode's
    test_server_sigkill_during_multinode_jobs is where it showed.)"""
    import socket
    import ssl
    import struct
    import threading
    certs = make_certs(workdir)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs["server.pem"], certs["server.key"])
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    lsock.settimeout(30)
    port = lsock.getsockname()[1]
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                s, _ = lsock.accept()
            except OSError:
                return
            try:
                t = ctx.wrap_socket(s, server_side=True)
                time.sleep(0.2)  # the request arrives, unread
                t.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                t.close()  # unread bytes and linger 0: a reset
            except OSError:
                s.close()

    th = threading.Thread(target=serve)
    th.start()
    try:
        env = dict(os.environ, TENK_SERVER=f"https://127.0.0.1:{port}", TENK_TOKEN="x",
                   TENK_CA=certs["ca.pem"])
        for args in (["queue"], ["submit", "--", "true"], ["nodes"]):
            p = subprocess.run([BIN, *args], env=env, capture_output=True, text=True,
                               timeout=60)
            assert p.returncode > 0, (args, p.returncode, p.stderr)
            assert "cannot reach the tenk server" in p.stderr, (args, p.stderr)
    finally:
        stop.set()
        lsock.close()
        th.join(30)
