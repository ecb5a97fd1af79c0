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
