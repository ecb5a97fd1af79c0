"""Rollouts (tenk rollout; issue 44, point 2): a change of the fleet's
software in stages across namespace hosts, each stage's nodes drained (their
jobs requeued and moved), waiting for the new stack, validated on it, then
given work and soaked; a stage that fails stops the rollout, which rolls
back by itself and says why."""
import json
import os
import time

import pytest

from conftest import MultiHost, root_jobs_config, wait_for


@pytest.fixture
def hosts5():
    from netns import Hosts
    h = Hosts(5)
    yield h
    h.destroy()


def write_stack(path, driver):
    with open(path, "w") as f:
        json.dump({"kernel": "6.1.0-18-amd64", "driver": driver}, f)


def start(workdir, hosts, n, kill_all, node_timeout="30s"):
    data = os.path.join(workdir, "data")
    root_jobs_config(data, validation_args=["--quick", "--layers", "system"])
    stacks = {h: os.path.join(workdir, f"stack{h}.json") for h in range(1, n + 1)}
    for p in stacks.values():
        write_stack(p, "550.54.15")
    # two racks: host1 and host2 in one, host3 and host4 in the other
    c = MultiHost(workdir, hosts, node_timeout=node_timeout,
                  agent_args_of={h: ["--fake-stack", p, "--domain",
                                     "dc1/rack" + ("A" if h <= 2 else "B")]
                                 for h, p in stacks.items()})
    kill_all.extend(c.daemons)
    return c, stacks


def rollout(c, name):
    return c.json("rollout", "status", name)


def node(c, name):
    return next(n for n in c.json("nodes")["nodes"] if n["name"] == name)


def test_stack_rollout_in_stages_with_jobs_moved(hosts5, workdir, kill_all):
    c, stacks = start(workdir, hosts5, 4, kill_all)
    try:
        # work on every node: four whole-node jobs that checkpoint nothing
        # but are requeued whole when their node's stage comes
        jobs = [c.submit("-G", "4", "--requeue", "3", "--", "sleep", "600") for _ in range(4)]
        for j in jobs:
            c.wait_state(j, "RUNNING", timeout=60)
        p = c.run("rollout", "create", "drv", "--stack", "driver=560.28", "--canary", "1",
                  "--then", "1", "--then", "all", "--soak", "2s", "--drain-policy", "requeue")
        assert "drv: stack driver=560.28, running (stage 1 of 3" in p.stdout, p.stdout
        # one at a time is refused while it runs
        p = c.run("rollout", "create", "other", "--stack", "driver=1", check=False)
        assert p.returncode != 0 and "one rollout at a time" in p.stderr, p.stderr
        began = time.monotonic()
        installed = set()

        def operator():
            """Installs the driver on nodes waiting for it, as an operator
            would; the rollout is over when it says so."""
            ro = rollout(c, "drv")
            for st in ro["stages"]:
                for n in st["nodes"]:
                    if n["state"] == "waiting_for_stack" and n["name"] not in installed:
                        write_stack(stacks[int(n["name"][4:])], "560.28")
                        installed.add(n["name"])
            return ro if ro["state"] != "running" else None
        ro = wait_for(operator, 240, "the rollout to end", interval=0.5)
        took = time.monotonic() - began
        assert ro["state"] == "done", json.dumps(ro, indent=1)
        sizes = [len(st["nodes"]) for st in ro["stages"]]
        assert sizes == [1, 1, 2], ro["stages"]
        # each stage across the racks: the second from the rack the canary
        # was not in, the last one from each
        names = [[n["name"] for n in st["nodes"]] for st in ro["stages"]]
        assert names == [["host1"], ["host3"], ["host2", "host4"]], names
        for st in ro["stages"]:
            for n in st["nodes"]:
                assert n["state"] == "done" and n["validation_job"] > 0, st
                nd = node(c, n["name"])
                assert nd["validation"]["verdict"] == "pass", nd
                assert nd["validation"]["job"] == n["validation_job"], nd
                assert nd["stack"]["driver"] == "560.28" and nd["state"] == "UP", nd
                # tenk's own reference computed the same bit for bit on the
                # new stack as on the old
                eq = n["equivalence"]
                assert eq["verdict"] == "same" and eq["bitwise"], eq
                assert eq["digest_before"] == eq["digest_after"] and eq["steps"] == 60, eq
        # the old stack's reference: taken once, on the canary
        assert [b["node"] for b in ro["baselines"].values()] == ["host1"], ro["baselines"]
        # the jobs were moved, never killed: requeued, running again
        for j in jobs:
            job = c.job(j)
            assert job["state"] in ("RUNNING", "PENDING", "STARTING"), job
        moved = [j for j in jobs if len(c.job(j)["attempts"]) > 1]
        assert moved, [c.job(j)["attempts"] for j in jobs]
        text = c.run("rollout", "status", "drv").stdout
        assert "stage 3 (all): " in text and "done" in text, text
        print(f"rollout of 4 nodes in stages 1, 1, 2 with 2 s soaks: {took:.1f} s")
        for j in jobs:
            c.run("cancel", j)
    finally:
        c.stop_all()


def test_rollout_stops_and_rolls_back_by_itself(hosts5, workdir, kill_all):
    c, stacks = start(workdir, hosts5, 4, kill_all, node_timeout="6s")
    try:
        # an image no node can run: the canary's validation in it fails
        c.run("rollout", "create", "bad", "--image", "registry.invalid/ml/none:1",
              "--canary", "1", "--then", "all", "--soak", "1s")
        ro = wait_for(lambda: (lambda r: r if r["state"] != "running" else None)(
            rollout(c, "bad")), 120, "the rollout to stop", interval=0.5)
        assert ro["state"] == "failed", json.dumps(ro, indent=1)
        canary = ro["stages"][0]["nodes"]
        assert len(canary) == 1 and canary[0]["state"] == "failed", canary
        assert ro["reason"].startswith(f"stage 1: node {canary[0]['name']} failed validation "
                                       f"job {canary[0]['validation_job']}: "), ro["reason"]
        assert ro["reason"].endswith("; rolled back"), ro["reason"]
        assert ro["stages"][1]["nodes"] == []  # the next stage never began
        # the image's failure is not the node's: it takes work again, its
        # verdict as before, and the default image is unchanged
        nd = node(c, canary[0]["name"])
        assert nd["state"] == "UP" and not nd.get("drained"), nd
        assert nd["validation"] is None, nd
        # nor in its history, which the lemon rule counts
        kinds = [e["kind"] for e in c.json("nodes", "history", canary[0]["name"])]
        assert "validation_failed" not in kinds, kinds
        assert "default_image" not in c.json("config", "show")["config"]
        # pause, resume and abort, by the operator
        c.run("rollout", "create", "drv", "--stack", "driver=560.28", "--canary", "1",
              "--soak", "1s")
        out = c.run("rollout", "pause", "drv").stdout
        assert "paused" in out, out
        p = c.run("rollout", "pause", "drv", check=False)
        assert p.returncode != 0 and "only a running one can be paused" in p.stderr, p.stderr
        c.run("rollout", "resume", "drv")
        ro = wait_for(lambda: (lambda r: r if r["phase"] == "waiting_for_stack" else None)(
            rollout(c, "drv")), 60, "the canary to wait for its stack", interval=0.5)
        first = ro["stages"][0]["nodes"][0]["name"]
        assert node(c, first)["drain_source"] == "rollout", node(c, first)
        out = c.run("rollout", "abort", "drv").stdout
        assert "aborted" in out, out
        nd = node(c, first)
        assert nd["state"] == "UP", nd
        # a node that goes down while it soaks fails its stage
        c.run("rollout", "create", "drv2", "--stack", "driver=560.28", "--canary", "1",
              "--soak", "10m")

        def operator():
            ro = rollout(c, "drv2")
            for n in ro["stages"][0]["nodes"]:
                if n["state"] == "waiting_for_stack":
                    write_stack(stacks[int(n["name"][4:])], "560.28")
            return ro if ro["phase"] == "soaking" else None
        ro = wait_for(operator, 120, "the canary to soak", interval=0.5)
        h = int(ro["stages"][0]["nodes"][0]["name"][4:])
        c.agents[h].kill9()
        ro = wait_for(lambda: (lambda r: r if r["state"] != "running" else None)(
            rollout(c, "drv2")), 120, "the stage to fail", interval=0.5)
        assert ro["state"] == "failed" and f"node host{h} went down" in ro["reason"], ro
        rows = [r for r in c.json("audit")["rows"] if "/v1/rollouts" in r["path"]]
        assert [r["status"] for r in rows].count(200) >= 5, rows
    finally:
        c.stop_all()


# A site's reference: a fixed-seed least-squares training in plain Python
# that prints its record last. Its "driver" (the node's fake stack) picks
# the order it sums the rows in, as another library's kernel would: a
# driver of 565 sums them backwards, which changes the last bits.
REFERENCE = r"""
import json, os, time
node = os.environ["TENK_NODE_NAME"]
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "stack" + node[4:] + ".json")) as f:
    driver = json.load(f)["driver"]
rows = [[((r * 31 + k * 17) % 23 - 11) / 11.0 for k in range(8)] for r in range(64)]
ys = [sum(x[k] * ((k % 5) - 2) / 4.0 for k in range(8)) + 0.1 for x in rows]
w = [0.0] * 8
loss, steps = [], []
for s in range(30):
    t0 = time.monotonic()
    g = [0.0] * 8
    ls = 0.0
    for r in (reversed(range(64)) if driver.startswith("565") else range(64)):
        e = sum(w[k] * rows[r][k] for k in range(8)) - ys[r]
        for k in range(8):
            g[k] += 2 * e * rows[r][k] / 64
        ls += e * e / 64
    w = [w[k] - 0.05 * g[k] for k in range(8)]
    loss.append(ls)
    steps.append(time.monotonic() - t0)
print("training done")
print(json.dumps({"loss": loss, "params": w, "step_s": steps}))
"""


def test_rollout_equivalence_of_a_sites_reference(hosts5, workdir, kill_all):
    """The equivalence check with a site's command: its record on the old
    stack (taken on each stage's nodes before the operator installs the
    new one) against the new stack's, bit for bit by default; a stack that
    sums in another order fails at the canary, naming the step where the
    loss first differs, and passes with a tolerance; the figures are in
    the rollout's record."""
    c, stacks = start(workdir, hosts5, 4, kill_all)
    ref = os.path.join(workdir, "ref.py")
    with open(ref, "w") as f:
        f.write(REFERENCE)
    cmd = f"python3 {ref}"
    installed = {}

    def operator(name, driver):
        """Installs the driver on the nodes that wait for it; the rollout's
        record once it has ended."""
        def step():
            ro = rollout(c, name)
            for st in ro["stages"]:
                for n in st["nodes"]:
                    if n["state"] == "waiting_for_stack" and \
                            installed.get(n["name"]) != driver:
                        write_stack(stacks[int(n["name"][4:])], driver)
                        installed[n["name"]] = driver
            return ro if ro["state"] != "running" else None
        return wait_for(step, 180, f"rollout {name} to end", interval=0.5)
    try:
        # a driver that computes the same: every node bit for bit
        c.run("rollout", "create", "same", "--stack", "driver=560.28", "--canary", "1",
              "--soak", "1s", "--reference-cmd", cmd)
        ro = operator("same", "560.28")
        assert ro["state"] == "done", json.dumps(ro, indent=1)
        assert ro["reference"] == cmd and ro["tolerance"] == 0, ro
        (model, base), = ro["baselines"].items()
        assert base["node"] == "host1" and len(base["record"]["loss"]) == 30, base
        for st in ro["stages"]:
            for n in st["nodes"]:
                eq = n["equivalence"]
                assert eq["verdict"] == "same" and eq["bitwise"], eq
                assert eq["digest_after"] == base["digest"] and eq["steps"] == 30, eq
                assert eq["params"] == 8 and eq["loss_diff"] == 0, eq
        text = c.run("rollout", "status", "same").stdout
        assert f"equivalence: reference {cmd}, bit for bit" in text, text
        assert f"old stack's reference, {model}: node host1" in text, text
        assert "bit for bit on every node" in text, text
        # a driver that sums the other way: the canary's loss differs in
        # its last bits, which is not bit for bit
        c.run("rollout", "create", "order", "--stack", "driver=565.1", "--canary", "1",
              "--soak", "1s", "--reference-cmd", cmd)
        ro = operator("order", "565.1")
        assert ro["state"] == "failed", json.dumps(ro, indent=1)
        canary = ro["stages"][0]["nodes"][0]
        assert canary["state"] == "failed", canary
        eq = canary["equivalence"]
        assert eq["verdict"] == "different" and not eq["bitwise"], eq
        assert 0 < eq["loss_diff"] < 1e-12 and eq["first_step"] >= 1, eq
        assert ro["reason"].startswith(f"stage 1: node {canary['name']} does not compute as "
                                       f"the old stack: loss differs from step "
                                       f"{eq['first_step']} ("), ro["reason"]
        assert ro["reason"].endswith("no tolerance given; rolled back"), ro["reason"]
        assert ro["stages"][1]["nodes"] == []  # no further
        # the node is not to blame: it takes work again
        nd = node(c, canary["name"])
        assert nd["state"] == "UP" and not nd.get("drained"), nd
        # the operator puts the old driver back on the canary, and tries
        # again with a tolerance of a billionth of the numbers' scale
        write_stack(stacks[int(canary["name"][4:])], "560.28")
        installed.pop(canary["name"])
        wait_for(lambda: node(c, canary["name"])["stack"]["driver"] == "560.28", 30,
                 "the old driver back")
        c.run("rollout", "create", "order2", "--stack", "driver=565.1", "--soak", "1s",
              "--reference-cmd", cmd, "--tolerance", "1e-9")
        ro = operator("order2", "565.1")
        assert ro["state"] == "done", json.dumps(ro, indent=1)
        eqs = [n["equivalence"] for n in ro["stages"][0]["nodes"]]
        assert len(eqs) == 4 and all(e["verdict"] == "within_tolerance" for e in eqs), eqs
        assert all(0 < e["loss_diff"] <= 1e-9 for e in eqs), eqs
        assert any("within 1e-09 of the old one on every node" in e["what"]
                   for e in ro["events"]), ro["events"]
    finally:
        c.stop_all()
