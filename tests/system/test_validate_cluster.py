"""tenk validate --nodes: the server runs the validation as a system job on
the nodes named, holds each node to its peers, drains those that fail with
the layer and the reason, resumes them when they pass again, and (with
require_validation) keeps a new node from work until it has passed."""
import json
import os

from conftest import MultiHost, root_jobs_config, start_up, wait_for


def validate(c, *args, timeout=300):
    p = c.run("validate", *args, check=False, timeout=timeout)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    return p


def node(c, name):
    return next(n for n in c.json("nodes")["nodes"] if n["name"] == name)


def test_slow_link_drains_that_host(hosts4, workdir, kill_all):
    c = MultiHost(workdir, hosts4)
    kill_all.extend(c.daemons)
    # a preemptible job holds a node: the validation stops it, and it goes
    # back to the queue; the run then has every device of every node
    batch = c.submit("--class", "batch", "-N", "3", "--gpus-per-task", "1", "--", "sleep", "600")
    c.wait_state(batch, "RUNNING", timeout=60)
    # host3's link is slowed both ways (tc netem, or a token bucket where the
    # kernel lacks netem), to 50 Mbit/s: 0.006 GB/s at most. (At 200, host3
    # once measured 0.020 GB/s while its busy peers' links measured only
    # 0.07 and 0.09: 25% of their median, inside the 80% tolerance.)
    hosts4.slow(3, rate_mbit=50)
    # the three hosts share this machine's two cores: their in-node figures
    # differ by tens of percent when it is busy (one measured 53% below its
    # peers), so members on one machine are not held to each other's; the
    # links between them are, and the slowed one differs by far more
    p = validate(c, "--nodes", "host[1-3]", "--quick", "--layers", "system,interconnect",
                 "--tolerance", "80", "--json")
    assert p.returncode == 1, p.stdout + p.stderr
    out = json.loads(p.stdout)
    assert out["state"] == "COMPLETED", out
    verdicts = {n["node"]: n["validation"] for n in out["nodes"]}
    assert set(verdicts) == {"host1", "host2", "host3"}
    assert verdicts["host1"]["verdict"] == "pass", verdicts
    assert verdicts["host2"]["verdict"] == "pass", verdicts
    bad = verdicts["host3"]
    assert bad["verdict"] == "fail" and bad["layer"] == "interconnect", bad
    assert bad["reason"].startswith("pair_bandwidth "), bad
    checks = {k["check"]: k for k in bad["checks"]}
    assert checks["pair_bandwidth"]["verdict"] == "FAIL"
    good = {k["check"]: k for k in verdicts["host1"]["checks"]}
    mine = checks["pair_bandwidth"]["figure"]
    assert 0 < mine < 0.01, checks["pair_bandwidth"]  # under the floor, always
    assert good["pair_bandwidth"]["figure"] > 2 * mine
    # the reason names the higher threshold: 20% of the peers' median, or the
    # floor (0.01 GB/s) where the busy machine's other links measured under
    # 0.05 GB/s (seen under the sanitizers); and it says how far below its
    # peers the node is whenever it is below 20% of them
    med = sum(next(k["figure"] for k in verdicts[h]["checks"] if k["check"] == "pair_bandwidth")
              for h in ("host1", "host2")) / 2
    if 0.2 * med > 1.01 * 0.01:
        assert "(20% of 2 peers' median)" in bad["reason"], (med, bad["reason"])
    elif 0.2 * med < 0.99 * 0.01:
        assert "(floor)" in bad["reason"], (med, bad["reason"])
    if mine < 0.99 * 0.2 * med:
        assert "below the median of 2 peers" in bad["reason"], (med, bad["reason"])
    assert good["stack_consistent"]["verdict"] == "pass"
    assert good["clock_offset"]["verdict"] == "pass" and good["clock_offset"]["figure"] < 50
    assert good["allreduce_ring"]["figure"] > 0
    # the links' traffic counted no retransmits or errors to speak of
    for k in ("tcp_retransmits", "net_errors"):
        assert good[k]["verdict"] in ("pass", "skip"), good[k]
    assert "not held to 2 peers on this machine's processors" in \
        good["allreduce_in_node"]["detail"], good["allreduce_in_node"]
    if not os.path.exists("/dev/nvidia0"):  # the GPU fabric's check is there, skipped
        assert good["nccl_allreduce_nodes"]["verdict"] == "skip"
        assert good["nccl_allreduce_nodes"]["detail"].startswith("skipped: ")
    # the server acted: host3 drained with the reason, the others took work again
    h3 = node(c, "host3")
    assert h3["state"] in ("DRAINED", "DRAINING") and h3["drained"]
    assert h3["reason"].startswith("validate: interconnect: pair_bandwidth"), h3
    assert node(c, "host1")["state"] == "UP"
    assert node(c, "host1")["validation"]["verdict"] == "pass"
    assert "checks" not in node(c, "host1")["validation"]  # only when asked for
    table = c.run("nodes").stdout
    assert "interconnect" in table and "pass" in table, table
    # it ran as a system job on every device, and the batch job was preempted
    job = c.job(out["job"])
    assert job["system"] and job["queue"] == "system" and job["class"] == "prod", job
    assert len(job["attempts"][0]["nodes"]) == 3
    assert all(n["devices"] == [0, 1, 2, 3] for n in job["attempts"][0]["nodes"])
    assert c.job(batch).get("preemptions", 0) >= 1
    # the link is mended; host3 alone is validated again, passes, and is resumed
    hosts4.mend(3)
    p = validate(c, "--nodes", "host3", "--quick", "--layers", "system,interconnect")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "host3" in p.stdout and "pass" in p.stdout
    h3 = node(c, "host3")
    assert h3["state"] in ("UP", "ALLOCATED") and not h3["drained"], h3
    # host3 loses 5% of the data it sends: its retransmits fail it
    hosts4.lossy(3, 0.05)
    p = validate(c, "--nodes", "host[1-3]", "--quick", "--layers", "interconnect",
                 "--tolerance", "80", "--json")
    hosts4.lossy(3, 0.05, on=False)
    assert p.returncode == 1, p.stdout + p.stderr
    verdicts = {n["node"]: n["validation"] for n in json.loads(p.stdout)["nodes"]}
    retrans = {h: {k["check"]: k for k in v["checks"]}["tcp_retransmits"]
               for h, v in verdicts.items()}
    assert retrans["host3"]["verdict"] == "FAIL" and retrans["host3"]["figure"] > 0.1, retrans
    assert retrans["host3"]["detail"].startswith(
        "segments sent again to its peers (the lower median of 2); the most: "), retrans
    assert verdicts["host3"]["verdict"] == "fail", verdicts["host3"]
    for h in ("host1", "host2"):
        assert retrans[h]["verdict"] in ("pass", "skip"), retrans
    c.run("cancel", batch)
    c.stop_all()


def test_new_node_takes_work_only_after_passing(workdir):
    data = os.path.join(workdir, "tenk-data")
    os.makedirs(data)
    root_jobs_config(data, require_validation=True,
                     validation_args=["--quick", "--layers", "system,memory"])
    t, d = start_up(workdir)
    try:
        jid = t.submit("-G", "1", "--", "true")
        # the node joined unvalidated; the server validates it, then the job runs
        j = t.wait_state(jid, "COMPLETED", timeout=120)
        n = node(t, "node1")
        assert n["validation"]["verdict"] == "pass", n
        vjob = t.job(n["validation"]["job"])
        assert vjob["system"] and vjob["owner"] == "tenk" and vjob["state"] == "COMPLETED"
        # the job started only once the node had passed
        assert j["attempts"][0]["start_ms"] >= n["validation"]["at_ms"], (j, n["validation"])
        st, full = t.api("GET", "/v1/nodes/node1")
        names = {k["check"] for k in full["validation"]["checks"]}
        assert {"dev_shm", "host_bandwidth"} <= names and "cpu_sgemm" not in names
    finally:
        d.stop()


def test_a_member_checks_the_node_as_its_agent_sees_it(workdir):
    """A validation member runs with its agent's environment (not in an
    image): the sysfs the agent reads (TENK_SYSFS: an agent in a container
    reads the host's, mounted elsewhere), where its libraries and tools are.
    Here the recorded RoCE node's tree: the member finds its two ports
    ACTIVE and reads their ECN, where the machine's own /sys has neither."""
    tree = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "sysfs",
                        "roce")
    t, d = start_up(workdir, env={"TENK_SYSFS": os.path.normpath(tree)})
    try:
        p = validate(t, "--nodes", "node1", "--quick", "--layers", "system,network")
        assert p.returncode == 0, p.stdout + p.stderr
        st, full = t.api("GET", "/v1/nodes/node1")
        checks = {k["check"]: k for k in full["validation"]["checks"]}
        r = checks["rdma_ports"]
        assert r["verdict"] == "pass" and r["figure"] == 2, r
        e = checks["roce_ecn_np"]
        assert e["verdict"] == "pass", e
        assert e["detail"] == ("ens1f0np0 (mlx5_0) ECN np on priority 3; "
                               "ens1f1np1 (mlx5_1) ECN np on priority 3"), e
    finally:
        d.stop()


def test_rdma_pairs_name_the_slow_node(hosts4, workdir, kill_all):
    """Between nodes with RDMA ports, every pair runs perftest on each rail
    (rail k to rail k, all at once; the lower rank serves, the other
    connects to the address its peers reach it by). Here the agents read
    the recorded RoCE node's tree (two 100 Gb/s ports each) and find a
    stand-in perftest on their PATH (tests/perftest: it meets its peer over
    the namespaces' real links and prints perftest's table). host3's ports
    give 30 Gb/s: its pairs all are slow, the others' one pair each, so
    host3 alone fails, under half its ports' rate, and is drained."""
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.normpath(os.path.join(here, "..", "data", "sysfs", "roce"))
    standin = os.path.normpath(os.path.join(here, "..", "perftest"))
    env = {h: {"TENK_SYSFS": tree, "PATH": standin + ":" + os.environ["PATH"]}
           for h in (1, 2, 3)}
    env[3]["PERFTEST_STANDIN_GBITS"] = "30"
    env[2]["PERFTEST_STANDIN_US"] = "1.9"
    c = MultiHost(workdir, hosts4, fake="1xH100", agent_env=env)
    kill_all.extend(c.daemons)
    # the TCP figures of the same layer, measured alike on every host: each
    # link held to 400 Mbit/s, so that the network, not this machine's two
    # busy cores, sets them (unshaped, a ring starved of processor under the
    # suite's load measured under a quarter of the pairs' and failed every
    # host); and held loosely, as in the test above
    for h in (1, 2, 3):
        hosts4.slow(h, rate_mbit=400)
    p = validate(c, "--nodes", "host[1-3]", "--quick", "--layers", "interconnect",
                 "--tolerance", "80", "--json")
    assert p.returncode == 1, p.stdout + p.stderr
    verdicts = {n["node"]: n["validation"] for n in json.loads(p.stdout)["nodes"]}
    checks = {h: {k["check"]: k for k in v["checks"]} for h, v in verdicts.items()}
    for h in ("host1", "host2"):
        assert verdicts[h]["verdict"] == "pass", (verdicts[h]["reason"], checks[h])
        bw, lat = checks[h]["rdma_pair_bandwidth"], checks[h]["rdma_pair_latency"]
        # the upper median of its two pairs: 93 Gb/s to the other good node
        assert bw["verdict"] == "pass" and bw["figure"] == 93, bw
        assert bw["detail"].startswith(
            "ib_write_bw on 2 rails, the upper median of 2 pairs' weakest; the weakest: "
            "mlx5_0:1 to host3, 30 Gb/s"), bw
        # the slower end of a pair sets its latency: host2's 1.9 us
        assert lat["verdict"] == "pass", lat
    assert checks["host1"]["rdma_pair_latency"]["figure"] == 1.6
    assert checks["host2"]["rdma_pair_latency"]["figure"] == 1.9
    bad = verdicts["host3"]
    assert bad["verdict"] == "fail" and bad["layer"] == "interconnect", bad
    bw = checks["host3"]["rdma_pair_bandwidth"]
    assert bw["verdict"] == "FAIL" and bw["figure"] == 30 and bw["threshold"] >= 50, bw
    assert "rdma_pair_bandwidth" in bad["reason"], bad
    wait_for(lambda: c.json("nodes", "host3")[0]["drain_source"] == "validation", 30,
             "host3 drained")
    assert node(c, "host3")["reason"].startswith("validate: interconnect: rdma_pair_bandwidth")
    c.stop_all()


def test_a_node_whose_stack_changes_takes_work_only_after_passing_again(workdir):
    """The agent reports its node's software stack (kernel, OS, driver,
    CUDA, NCCL, VBIOS, NIC firmware, tenk); an upgrade (here through
    --fake-stack, the agent's stand-in) is in the node's history, drops its
    validation, and with require_validation the node takes no work until
    it has passed again."""
    data = os.path.join(workdir, "tenk-data")
    os.makedirs(data)
    root_jobs_config(data, require_validation=True,
                     validation_args=["--quick", "--layers", "system"])
    stack = os.path.join(workdir, "stack.json")
    with open(stack, "w") as f:
        json.dump({"kernel": "6.1.0-18-amd64", "driver": "550.54.15"}, f)
    t, d = start_up(workdir, "--fake-stack", stack)
    try:
        jid = t.submit("-G", "1", "--", "true")
        t.wait_state(jid, "COMPLETED", timeout=120)
        n = node(t, "node1")
        assert n["validation"]["verdict"] == "pass", n
        first = n["validation"]["job"]
        st = n["stack"]
        assert st["kernel"] == "6.1.0-18-amd64" and st["driver"] == "550.54.15", st
        assert st["tenk"] and st["os"] and st["cuda"] == "none" and st["nic_fw"] == "none", st
        assert "Stack:    kernel 6.1.0-18-amd64, os " in t.run("nodes", "node1").stdout
        # the kernel is upgraded under the agent
        with open(stack, "w") as f:
            json.dump({"kernel": "6.1.0-20-amd64", "driver": "550.54.15"}, f)
        n = wait_for(lambda: (lambda x: x if x["stack"]["kernel"] == "6.1.0-20-amd64" else None)(
            node(t, "node1")), 30, "the new kernel to be reported")
        # (its new validation, of the system layer alone, may be over already)
        assert n["validation"] is None or n["validation"]["job"] != first, n
        assert f"its validation of {first} no longer holds; it takes no work until it " \
            "passes again" in d.output()
        jid = t.submit("-G", "1", "--", "true")
        j = t.wait_state(jid, "COMPLETED", timeout=120)
        n = node(t, "node1")
        assert n["validation"]["verdict"] == "pass" and n["validation"]["job"] != first, n
        assert j["attempts"][0]["start_ms"] >= n["validation"]["at_ms"], (j, n["validation"])
        hist = t.run("nodes", "history", "node1").stdout
        assert "stack_changed" in hist and "kernel 6.1.0-18-amd64 -> 6.1.0-20-amd64" in hist, \
            hist
        shown = t.run("nodes", "-o", "stack").stdout
        assert shown.startswith("1 node: node1\n") and "  kernel   6.1.0-20-amd64\n" in shown, \
            shown
        # a file gone wrong changes nothing: its last good fields stand
        with open(stack, "w") as f:
            f.write("{")
        wait_for(lambda: "its last good fields stand" in d.output(), 30, "the agent to say so")
        n = node(t, "node1")
        assert n["state"] == "UP" and n["stack"]["kernel"] == "6.1.0-20-amd64", n
    finally:
        d.stop()


def test_bad_requests(cluster):
    t = cluster
    st, body = t.api("POST", "/v1/validations", {"nodes": ["node1", "nope"]})
    assert st == 404 and "nope" in body["error"], body
    st, body = t.api("POST", "/v1/validations", {"nodes": "some"})
    assert st == 400 and "nodes" in body["error"], body
    st, body = t.api("POST", "/v1/validations", {"nodes": ["node1"], "args": ["--member"]})
    assert st == 400 and "--member" in body["error"], body
    st, body = t.api("POST", "/v1/validations", {"nodes": ["node1", "node1"]})
    assert st == 400 and "twice" in body["error"], body
    st, body = t.api("POST", "/v1/validations", {"nodes": ["node1"]}, token=None)
    assert st == 401, body
    # a report without the run's token is refused, and changes nothing
    st, body = t.api("POST", "/v1/validations/1/report",
                     {"token": "x" * 64, "node": "node1", "verdict": "fail", "reason": "r"},
                     token=None)
    assert st == 403 and "token" in body["error"], body
    assert node(t, "node1")["validation"] is None
    p = t.run("validate", "--nodes", "n[3-1]", check=False)
    assert p.returncode == 2 and '"3-1" in "n[3-1]"' in p.stderr, p.stderr
    p = t.run("validate", "--nodes", "ghost", check=False)
    assert p.returncode == 1 and "ghost" in p.stderr, p.stderr
    for bad in ("0", "some", "2.5"):
        p = t.run("validate", "--nodes", "node1", "--rdma-peers", bad, check=False)
        assert p.returncode == 2 and "--rdma-peers: a number of peers from 1, or all; " \
            f'got "{bad}"' in p.stderr, p.stderr
    # --no-wait gives the job; a second run on the same node is refused while it lasts
    p = t.run("validate", "--nodes", "node1", "--quick", "--layers", "system", "--no-wait")
    jid = int(p.stdout.split()[2])
    st, body = t.api("POST", "/v1/validations", {"nodes": ["node1"]})
    assert st == 409 and "node1" in body["error"], body
    t.wait_state(jid, "COMPLETED", timeout=120)
    assert node(t, "node1")["validation"]["verdict"] == "pass"
    # the list leaves each validation's checks out unless asked
    assert "checks" not in node(t, "node1")["validation"]
    st, full = t.api("GET", "/v1/nodes?checks=1")
    assert st == 200 and full["nodes"][0]["validation"]["checks"], full
    st, bad = t.api("GET", "/v1/nodes?checks=yes")
    assert st == 400 and "checks" in bad["error"], bad


def member_pid(node_name):
    """The pid of `tenk validate --member` on node_name (started by our agent)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"--member" in cmd and f"TENK_NODE_NAME={node_name}".encode() in env:
            return int(pid)
    return None


def test_node_lost_during_the_run_fails_alone(hosts4, workdir, kill_all):
    c = MultiHost(workdir, hosts4, node_timeout="5s")
    kill_all.extend(c.daemons)
    # long enough (full-size memory and storage checks) to lose a node in it
    p = c.run("validate", "--nodes", "host1,host2,host3", "--layers",
              "system,memory,storage,interconnect", "--no-wait")
    jid = int(p.stdout.split()[2])
    pid = wait_for(lambda: member_pid("host2"), 60, "host2's member to start")
    os.kill(pid, 9)
    j = c.wait_state(jid, ("FAILED", "COMPLETED"), timeout=120)
    assert j["state"] == "FAILED" and "host2" in j["reason"], j
    h2 = node(c, "host2")
    assert h2["validation"]["verdict"] == "fail" and "no report" in h2["validation"]["reason"]
    assert h2["drained"] and h2["reason"].startswith("validate: no report"), h2
    # the others are not blamed: no verdict from this run, not drained
    for name in ("host1", "host3"):
        n = node(c, name)
        assert not n["drained"], (n["reason"], n["validation"])
        assert n["validation"] is None or n["validation"]["job"] != jid, n
    c.stop_all()


def test_server_restart_ends_a_run_without_verdicts(workdir):
    t, d = start_up(workdir)
    # a busy node: the run waits for its (normal-class, not preemptible) job
    busy = t.submit("--", "sleep", "600")
    t.wait_state(busy, "RUNNING")
    p = t.run("validate", "--nodes", "node1", "--quick", "--no-wait")
    jid = int(p.stdout.split()[2])
    j = t.job(jid)
    assert j["state"] == "PENDING" and "waiting for node node1 to empty" in j["reason"], j
    assert str(busy) in j["reason"]
    assert node(t, "node1")["state"] == "VALIDATING"
    d.stop()
    t2, d2 = start_up(workdir)
    try:
        j = t2.job(jid)
        assert j["state"] == "CANCELLED" and "restarted" in j["reason"], j
        n = node(t2, "node1")
        assert n["validation"] is None and n["state"] != "VALIDATING", n
        # the node takes work again
        nxt = t2.submit("--", "true")
        t2.wait_state(nxt, "COMPLETED", timeout=60)
        t2.run("cancel", busy, check=False)
    finally:
        d2.stop()
