"""Node identity: the agent token only joins; each node gets a credential of
its own that binds every later call to that node; a name already held
needs its own credential or an admin's admit; a revoked credential ends
the node's calls."""
import json
import os
import stat
import time

from conftest import Daemon, Tenk, root_jobs_config, wait_for


def server(workdir, procs, timeout="3s"):
    data = os.path.join(workdir, "data")
    root_jobs_config(data)
    d = Daemon(["server", "--data", data, "--listen", "127.0.0.1:0", "--node-timeout", timeout],
               workdir, "server")
    procs.append(d)
    wait_for(lambda: os.path.exists(os.path.join(data, "server.url")) or not d.alive(), 20,
             "the server")
    assert d.alive(), d.output()
    return Tenk(workdir, data)


def agent(t, procs, name, work):
    d = Daemon(["agent", "--server", t.url, "--token-file", os.path.join(t.data, "agent.token"),
                "--name", name, "--fake-gpus", "2xH100", "--work-dir", work, "--stop-jobs"],
               t.workdir, name)
    procs.append(d)
    return d


def node(t, name):
    return [n for n in t.json("nodes")["nodes"] if n["name"] == name][0]


def test_each_node_has_its_own_credential(workdir, procs):
    t = server(workdir, procs)
    w1, w2 = os.path.join(workdir, "a1"), os.path.join(workdir, "a2")
    agent(t, procs, "n1", w1)
    agent(t, procs, "n2", w2)
    t.wait_nodes_up(2)
    creds = {}
    for name, w in (("n1", w1), ("n2", w2)):
        path = os.path.join(w, "node.credential")
        # the node is UP once the server commits its joining; the agent
        # keeps its credential when the answer reaches it
        wait_for(lambda: os.path.exists(path), 20, f"{name}'s credential file")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        creds[name] = open(path).read().strip()
        assert node(t, name)["credential"] == "issued"
    assert creds["n1"] != creds["n2"]
    assert creds["n1"] not in open(os.path.join(t.data, "tenk.db"), "rb").read().decode(
        errors="replace"), "the server keeps a hash, not the credential"
    jid = t.submit("-N", "1", "--gpus-per-task", "1", "--", "sleep", "60")
    job = t.wait_state(jid, "RUNNING")
    on = job["attempts"][0]["nodes"][0]["name"]
    other = "n2" if on == "n1" else "n1"
    # the other node's credential cannot end it
    ev = {"job": jid, "attempt": 1, "rank": 0, "type": "exited", "at_ms": 1, "exit_code": 0}
    st, res = t.api("POST", "/v1/agent/events",
                    {"node": other, "agent_id": node(t, other)["agent_id"], "events": [ev]},
                    token=creds[other])
    assert st == 403 and f"job {jid} attempt 1 rank 0 does not run on node {other}" in \
        res["error"], res
    # nor speak for the node it runs on
    st, res = t.api("POST", "/v1/agent/events",
                    {"node": on, "agent_id": node(t, on)["agent_id"], "events": [ev]},
                    token=creds[other])
    assert st == 403 and f"this credential is node {other}'s" in res["error"], res
    st, res = t.api("GET", f"/v1/agent/work?node={on}&agent_id={node(t, on)['agent_id']}",
                    token=creds[other])
    assert st == 403
    assert t.job(jid)["state"] == "RUNNING", "the job runs on"
    t.run("cancel", jid)


def test_a_taken_name_needs_an_admit(workdir, procs):
    t = server(workdir, procs)
    a1 = agent(t, procs, "n1", os.path.join(workdir, "a1"))
    t.wait_nodes_up(1)
    first = node(t, "n1")["agent_id"]
    # another agent, no credential, the same name: refused, given no work
    impostor = agent(t, procs, "n1", os.path.join(workdir, "b1"))
    wait_for(lambda: "node n1 is known: its agent registers with its own credential" in
             impostor.output(), 20, "the refusal")
    assert node(t, "n1")["agent_id"] == first
    assert not os.path.exists(os.path.join(workdir, "b1", "node.credential"))
    # said once, with what to do, not at every retry
    time.sleep(2)
    out = impostor.output()
    assert out.count("is known") == 1 and "needs --name and --work-dir" in out, out
    impostor.stop()
    # the machine is rebuilt: the old agent goes, an admin admits the new one
    a1.stop()
    a2 = agent(t, procs, "n1", os.path.join(workdir, "c1"))
    wait_for(lambda: "is known" in a2.output(), 20, "the refusal")
    p = t.run("nodes", "admit", "n1")
    assert p.stdout.strip() == "node n1: credential admitted"
    wait_for(lambda: os.path.exists(os.path.join(workdir, "c1", "node.credential")), 30,
             "the admitted agent's credential")
    wait_for(lambda: node(t, "n1")["state"] == "UP" and node(t, "n1")["agent_id"] != first, 30,
             "n1 up with its new agent")
    assert node(t, "n1")["credential"] == "issued"
    jid = t.submit("--", "true")
    t.run("wait", jid, timeout=60)
    # the old agent's credential no longer speaks for n1
    old = open(os.path.join(workdir, "a1", "node.credential")).read().strip()
    st, res = t.api("POST", "/v1/agent/heartbeat", {"node": "n1", "agent_id": first}, token=old)
    assert st == 401, res


def test_a_revoked_node_is_cut_off(workdir, procs):
    t = server(workdir, procs)
    a1 = agent(t, procs, "n1", os.path.join(workdir, "a1"))
    t.wait_nodes_up(1)
    p = t.run("nodes", "revoke", "n1", "--json")
    assert json.loads(p.stdout)["credential"] == "revoked"
    # silent to the server from now on; alone in its witness group, it is
    # held (UNREACHABLE), not moved: nothing proves it stopped its tasks
    wait_for(lambda: node(t, "n1")["state"] == "UNREACHABLE", 30, "n1 unreachable")
    wait_for(lambda: "its credential was revoked" in a1.output(), 30, "the agent told why")
    p = t.run("nodes", "admit", "ghost", check=False)
    assert p.returncode == 1 and "ghost" in p.stderr
    st, res = t.api("POST", "/v1/nodes/n1/revoke", token=None)
    assert st == 401


def test_a_refusal_nothing_lifts_ends_the_asking(workdir, procs):
    """An agent whose credential is another node's (its --work-dir copied,
    its --name changed) is refused for good: it says why once and does not
    ask again, while a refusal an admit lifts is asked again (above)."""
    t = server(workdir, procs)
    a1 = agent(t, procs, "n1", os.path.join(workdir, "a1"))
    t.wait_nodes_up(1)
    a1.stop()
    wrong = agent(t, procs, "n2", os.path.join(workdir, "a1"))
    wait_for(lambda: "refuses this node for good" in wrong.output(), 20, "the refusal")
    out = wrong.output()
    assert "this credential is node n1's, not \"n2\"'s" in out and "not asking again" in out, out

    # (the agent writes the line at each such answer: a second ask, a second line)
    assert out.count("refuses this node") == 1, out
    time.sleep(12)  # past the 10 s at which a refusal an admit lifts is asked again
    assert wrong.alive() and wrong.output().count("refuses this node") == 1, wrong.output()
    assert "n2" not in [n["name"] for n in t.json("nodes")["nodes"]]  # nothing joined
    wrong.stop()
