"""One user with 20,000 waiting jobs (10,000 in the sanitizers' build, which
builds the pages several times slower) and 32 parallel listers: no node
misses its heartbeats for the node timeout (the lowest a test can use)."""
import overload
from conftest import BIN

# the lowest node timeout each build can take: the sanitizers' is several
# times slower at building the pages
TIMEOUT = "8s" if "asan" in BIN else "2s"
JOBS = 10000 if "asan" in BIN else 20000


def test_listers_never_take_a_node_down(workdir, procs):
    t, server, agent = overload.start(workdir, procs, JOBS, node_timeout=TIMEOUT)
    figures = overload.run(t, seconds=8, jobs=JOBS)
    assert figures["errors"] == 0, figures
    assert "is DOWN" not in server.output(), server.output()[-2000:]
    assert [n["state"] for n in t.json("nodes")["nodes"]] == ["UP"]
    agent.stop()
    figures.update(overload.heartbeats(agent.output()))
    print("overload:", figures)
    assert figures["hb_p99_ms"] >= 0
