"""Lemon nodes: each node's record keeps its own failures (here launches it
could not make: its shims' folder broken) and what was done about them;
with the cluster's rule {"failures": 3, "within": "1h"} the third failure
drains it as a lemon, saying which; resumed by hand and failing again
within the window, it is drained again at once. The jobs it could not
start are not failed: they wait for another node."""
import os
import shutil

from conftest import Daemon, run_dirs, server_and_agent, wait_for


def test_three_launch_failures_drain_a_lemon(workdir, procs):
    t, server, agent = server_and_agent(workdir, procs, "10s", admin_unix_user="root",
                                        lemon={"failures": 3, "within": "1h"})
    shims = os.path.join(run_dirs(workdir)[0], "shims")  # the agent's run folder
    ok = t.submit("--", "true")
    t.run("wait", ok, timeout=60)
    assert t.json("nodes", "history", "n1") == []

    def break_shims():
        shutil.rmtree(shims, ignore_errors=True)
        with open(shims, "w") as f:  # a file where the folder was: no shim starts
            f.write("broken\n")

    def mend_shims():
        os.remove(shims)
        os.makedirs(shims, mode=0o700)
    break_shims()
    jid = t.submit("--", "true")  # its launches fail on n1 (each a failure of n1's)
    wait_for(lambda: t.json("nodes", "n1")[0]["drain_source"] == "lemon", 60,
             "n1 drained as a lemon", show=lambda: t.json("nodes", "history", "n1"))
    node = t.json("nodes", "n1")[0]
    assert node["reason"].startswith("lemon: 3 failures within 1h00m (launch_failed: "), node
    hist = t.json("nodes", "history", "n1")
    kinds = [e["kind"] for e in hist]
    assert kinds == ["launch_failed"] * 3 + ["lemon"], hist
    assert all(e["job"] == jid for e in hist[:1]), hist
    # the job was not failed for it: it waits for a node
    job = t.job(jid)
    assert job["state"] == "PENDING" and len(job["attempts"]) == 3, job
    out = t.run("nodes", "history", "n1").stdout
    assert "launch_failed" in out and "lemon: 3 failures" in out, out
    assert "drained_by=\"lemon\"" in t.api("GET", "/metrics")[1]

    # mended and resumed by hand: the job runs
    mend_shims()
    t.run("resume", "n1")
    t.run("wait", jid, timeout=60)
    assert t.job(jid)["state"] == "COMPLETED"
    assert t.json("nodes", "history", "n1")[-1]["kind"] == "resumed"
    # failing again within the window: drained again at once
    break_shims()
    again = t.submit("--", "true")
    wait_for(lambda: t.json("nodes", "n1")[0]["drain_source"] == "lemon", 60, "drained again")
    node = t.json("nodes", "n1")[0]
    assert node["reason"].startswith("lemon: failed again after it was resumed"), node
    assert [e["kind"] for e in t.json("nodes", "history", "n1")][-3:] == \
        ["resumed", "launch_failed", "lemon"]
    # the record is the node's, in the store: a restarted server has it
    mend_shims()
    t.run("cancel", again)
    before = t.json("nodes", "history", "n1")
    agent.stop()
    server.stop()
    os.remove(os.path.join(t.data, "server.url"))
    server = Daemon(["server", "--data", t.data, "--listen", "127.0.0.1:0", "--node-timeout",
                     "10s"], workdir, "server2")
    procs.append(server)
    wait_for(lambda: os.path.exists(os.path.join(t.data, "server.url")), 20, "the server")
    assert t.json("nodes", "history", "n1") == before
    assert t.json("nodes", "n1")[0]["drain_source"] == "lemon"
    server.stop()
