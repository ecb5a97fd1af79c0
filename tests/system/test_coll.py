"""tenk bench over coll across hosts made of network namespaces: 2 and 4
hosts standalone, a dead rank, and the same benchmark as a tenk gang job."""
import json
import os
import subprocess
import time

import pytest

from conftest import BIN, SANITIZER_MARKS, MultiHost


def bench_procs(hosts, n, args, port=29400):
    root = f"{hosts.addrs[0]}:{port}"
    procs = []
    for r in range(n):
        argv = hosts.cmd(r, [BIN, "bench", *args, "--rank", str(r), "--size", str(n),
                             "--rendezvous", root, "--timeout", "20s", "--json"])
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        for mark in SANITIZER_MARKS:
            assert mark not in err, err
        outs.append((p.returncode, out, err))
    return outs


@pytest.mark.parametrize("n", [2, 4])
def test_allreduce_across_hosts(n, request):
    hosts = request.getfixturevalue("hosts4")
    outs = bench_procs(hosts, n, ["allreduce", "-b", "4", "-e", "8M", "-f", "8", "-n", "3",
                                  "-w", "1"])
    for rc, out, err in outs:
        assert rc == 0, err
    res = json.loads(outs[0][1])
    assert res["ranks"] == n and res["transport"] == "tcp"
    assert [r["size"] for r in res["rows"]] == [4, 32, 256, 2048, 16384, 131072, 1048576,
                                               8388608]
    assert all(r["wrong"] == 0 for r in res["rows"])
    assert all(r["busbw_gbs"] > 0 for r in res["rows"])
    # other collectives, types and operations, checked the same way
    for args in (["allgather", "-e", "1M", "-f", "32"], ["reducescatter", "-e", "1M", "-f", "32",
                 "-d", "double", "-o", "max"], ["broadcast", "-e", "4M", "-f", "16", "-r", "1"],
                 ["allreduce", "-e", "1M", "-f", "32", "-d", "bfloat16", "-o", "min"]):
        outs = bench_procs(hosts, n, args + ["-n", "2", "-w", "1"], port=29401)
        for rc, out, err in outs:
            assert rc == 0, (args, err)
        assert all(r["wrong"] == 0 for r in json.loads(outs[0][1])["rows"]), args


def test_dead_rank_gives_an_error(hosts3):
    root = f"{hosts3.addrs[0]}:29402"
    procs = [subprocess.Popen(hosts3.cmd(r, [BIN, "bench", "allreduce", "--rank", str(r), "--size",
                                             "3", "--rendezvous", root, "--timeout", "5s",
                                             "-b", "64M", "-e", "64M", "-n", "1000"]),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(3)]
    time.sleep(2)
    procs[2].kill()
    t0 = time.monotonic()
    for p in procs[:2]:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 1, err
        assert "rank" in err and ("rank gone" in err or "timed out" in err), err
    procs[2].wait()
    assert time.monotonic() - t0 < 30


def test_bench_as_a_tenk_job(hosts3, workdir, kill_all):
    c = MultiHost(workdir, hosts3)
    kill_all.extend(c.daemons)
    jid = c.submit("-N", "2", "--tasks-per-node", "1", "-o", "bench-%t.out", "--", BIN, "bench",
                   "allreduce", "-b", "1K", "-e", "1M", "-f", "32", "-n", "2", "--json",
                   cwd=workdir)
    p = c.run("wait", jid, timeout=180)
    assert "COMPLETED" in p.stdout, p.stdout + open(os.path.join(workdir, "bench-1.out")).read()
    res = json.load(open(os.path.join(workdir, "bench-0.out")))
    assert res["ranks"] == 2 and res["transport"] == "tcp"
    assert all(r["wrong"] == 0 for r in res["rows"]) and len(res["rows"]) == 3
    c.stop_all()


def test_bench_outside_a_job_runs_one_rank():
    """The README's `tenk bench allreduce -b 8 -e 256M`, run as written on
    a machine with no job around it: one rank, the table, exit 0."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    p = subprocess.run([BIN, "bench", "allreduce", "-b", "8", "-e", "64K"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "1 ranks" in p.stdout and "65536" in p.stdout, p.stdout
    for mark in SANITIZER_MARKS:
        assert mark not in p.stderr
    env["RANK"] = "0"  # half a job is still an error
    p = subprocess.run([BIN, "bench", "allreduce"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "--rank and --size" in p.stderr

