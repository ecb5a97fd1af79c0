"""HTTPS: the server with a certificate, the CLI and the agent verifying it
against a CA of the test's making (openssl), and what fails without it."""
import os
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
    t = Tenk(workdir, data)
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
    assert open(os.path.join(workdir, f"tenk-{jid}.out")).read().strip() == certs["ca.pem"]
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
