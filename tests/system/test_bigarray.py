"""An array of 100,000 is made, and cancelled, in slices between the
server loop's other work (issue 34, point 5): a probe asking GET
/v1/health over a kept connection is answered again and again while the
array is being made and while it is cancelled (one piece of work held the
loop for 4.4 s and answered none), the node's leases hold on an 8 s node
timeout, and the array is whole: 100,000 elements, one id after another,
all cancelled. bench/loop/run gives the loop's figures."""
import json
import socket
import threading

import bigarray
from conftest import BIN, wait_for

N = 100000


def within(lat, a, b):
    """Probes both sent and answered between a and b."""
    return [ms for at, ms in lat if at >= a and at + ms / 1000 <= b]


def test_a_large_array_never_holds_the_loop(workdir, procs):
    t, server, agent = bigarray.start(workdir, procs)
    figures, first, (a, b, c), lat = bigarray.run(t, N)
    print("bigarray:", figures)
    # answered while the array was being made, and while it was cancelled
    assert len(within(lat, a, b)) >= 10, figures
    assert len(within(lat, b, c)) >= 5, figures
    assert figures["cancel_status"] == 200, figures
    assert figures["changed"] == N, figures
    st, res = t.api("GET", f"/v1/jobs?array={first}&state=CANCELLED&limit=1")
    assert st == 200 and res["total"] == N, res
    st, last = t.api("GET", f"/v1/jobs/{first + N - 1}")
    assert st == 200 and last["array"]["job"] == first, last
    assert last["array"]["index"] == N - 1 and last["state"] == "CANCELLED", last
    assert [n["state"] for n in t.json("nodes")["nodes"]] == ["UP"]
    assert "is DOWN" not in server.output() and "lease ran out" not in agent.output()
    # the next submission's id comes after the array's
    assert t.submit("--hold", "--", "true") == first + N
    assert "asan" in BIN or figures["loop_iterations"] > 50, figures


def test_an_array_cut_by_a_crash_is_made_whole(workdir, procs):
    """The server killed while an array's elements are being made (its
    answer not yet sent): the restarted server makes the rest from the
    first element's request, so the array is whole, and no id of it goes
    to another job."""
    n = 20000
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    t, server, agent = bigarray.start(workdir, procs, listen=f"127.0.0.1:{port}")
    h = {"Authorization": "Bearer " + t.token, "Content-Type": "application/json"}
    body = {"command": ["true"], "cwd": "/tmp", "array": f"0-{n - 1}", "hold": True}

    def submit():
        try:
            c = t.connection(timeout=60)
            c.request("POST", "/v1/jobs", body=json.dumps(body), headers=h)
            c.getresponse().read()
        except OSError:
            pass  # killed before it answered
    th = threading.Thread(target=submit)
    th.start()
    wait_for(lambda: t.api("GET", "/v1/jobs/1")[0] == 200, 30, "the array's first element")
    server.kill9()
    th.join()
    server.start()
    def up():
        try:
            return t.api("GET", "/v1/health", token=None)[0] == 200
        except OSError:
            return False
    wait_for(up, 30, "the server again")
    st, res = t.api("GET", "/v1/jobs?array=1&limit=1")
    assert st == 200 and res["total"] == n, res
    made = "were not made before the server stopped; made now" in server.output()
    st, last = t.api("GET", f"/v1/jobs/{n}")
    assert st == 200 and last["array"] == {"job": 1, "index": n - 1, "cap": 0, "count": n}, last
    assert t.submit("--hold", "--", "true") > n
    print("made after the restart:", made)
