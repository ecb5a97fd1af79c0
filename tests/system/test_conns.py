"""Connections: deadlines for a request's headers and body, and the last
quarter of connections kept for the addresses nodes call from, so that a
flood of other clients never shuts a node out."""
import os
import select
import socket
import ssl
import time
import urllib.parse

from conftest import Daemon, Tenk, root_jobs_config, wait_for
from netns import in_host


def start(workdir, procs, *extra, wrap=None, listen="127.0.0.1:0"):
    data = os.path.join(workdir, "data")
    root_jobs_config(data)
    srv = Daemon(["server", "--data", data, "--listen", listen, *extra], workdir, "server",
                 wrap=wrap)
    procs.append(srv)
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")) or not srv.alive(), 20,
             "the server")
    assert srv.alive(), srv.output()
    return srv, data


def closed_within(sock, seconds):
    """Does the server close sock within seconds (EOF or reset)?"""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r, _, _ = select.select([sock], [], [], 0.2)
        if r:
            try:
                if sock.recv(4096) == b"":
                    return True
            except (ConnectionResetError, ssl.SSLError, OSError):
                return True
    return False


def tls_socket(t):
    u = urllib.parse.urlparse(t.url)
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    return ssl.create_default_context(cafile=t.ca).wrap_socket(s, server_hostname=u.hostname)


def test_request_deadlines(workdir, procs):
    srv, data = start(workdir, procs, "--request-timeout", "2s")
    t = Tenk(workdir, data)
    procs.append(Daemon(["agent", "--server", t.url, "--token-file",
                         os.path.join(data, "agent.token"), "--name", "n1", "--fake-gpus",
                         "1xH100", "--work-dir", os.path.join(workdir, "agent"), "--stop-jobs"],
                        workdir, "agent"))
    t.wait_nodes_up(1)
    u = urllib.parse.urlparse(t.url)
    # a connection that never starts TLS, or never sends a request
    silent = socket.create_connection((u.hostname, u.port), timeout=10)
    idle = tls_socket(t)
    # headers sent a byte at a time, each in time for the idle timeout
    slow_head = tls_socket(t)
    slow_head.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
    # a body announced as 1,000 bytes that trickles in
    slow_body = tls_socket(t)
    slow_body.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                      + t.token.encode() + b"\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n{")
    start_t = time.monotonic()
    open_ = {"silent": silent, "idle": idle, "slow_head": slow_head, "slow_body": slow_body}
    closed = {}
    while open_ and time.monotonic() - start_t < 15:
        for name in list(open_):
            if name in ("slow_head", "slow_body"):
                try:
                    open_[name].sendall(b"X" if name == "slow_head" else b" ")
                except OSError:
                    pass
            if closed_within(open_[name], 0.1):
                closed[name] = round(time.monotonic() - start_t, 1)
                del open_[name]
        time.sleep(0.3)
    assert not open_, f"still open after 15 s: {list(open_)}; closed: {closed}"
    assert all(1.5 <= v <= 6 for v in closed.values()), closed
    for s in (silent, idle, slow_head, slow_body):
        s.close()
    # what outlasts the timeout legitimately: a long-poll, and the agent's
    jid = t.submit("--", "sleep", "5")
    p = t.run("wait", jid, timeout=60)
    assert "COMPLETED" in p.stdout, p.stdout
    assert "is DOWN" not in srv.output()
    assert t.api("GET", "/v1/jobs")[1]["total"] == 1  # the trickled body made no job


def test_nodes_keep_their_reserve(workdir, procs, hosts3):
    h = hosts3
    srv, data = start(workdir, procs, "--max-connections", "40", "--node-timeout", "10s",
                      wrap=h.cmd(0, []), listen=f"{h.addrs[0]}:7480")
    t = Tenk(workdir, data, wrap=h.cmd(1, []))  # a user on the node's host
    procs.append(Daemon(["agent", "--server", t.url, "--token-file",
                         os.path.join(data, "agent.token"), "--name", "host1", "--fake-gpus",
                         "1xH100", "--work-dir", os.path.join(workdir, "a1"), "--stop-jobs"],
                        workdir, "agent1", wrap=h.cmd(1, [])))
    t.wait_nodes_up(1)
    # host 2 opens 60 connections and holds them: it gets what is left
    # below the nodes' reserve (30 of 40), and no more
    flood = []
    with in_host(h.names[2]):
        for _ in range(60):
            flood.append(socket.create_connection((h.addrs[0], 7480), timeout=10))
    time.sleep(2)
    refused = [s for s in flood if closed_within(s, 0.05)]
    held = len(flood) - len(refused)
    assert 20 <= held <= 30, (held, len(refused))
    assert "refusing connections from addresses no node calls from (10.231.0.3" in srv.output()
    # a user elsewhere is shut out meanwhile; the node and its host are not
    other = Tenk(workdir, data, wrap=h.cmd(2, []))
    p = other.run("queue", check=False)
    assert p.returncode != 0, p.stdout
    jid = t.submit("--", "sh", "-c", "sleep 1; echo ran")
    assert "COMPLETED" in t.run("wait", jid, timeout=60).stdout
    time.sleep(3)  # beyond a few heartbeats (every 1.25 s): the node stayed UP
    assert "is DOWN" not in srv.output()
    for s in flood:
        s.close()
    wait_for(lambda: other.run("queue", check=False).returncode == 0, 20,
             "host 2 let in again")
