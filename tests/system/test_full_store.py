"""A full disk under the server (issue 34, point 7): the store's writes
fail, and the server does not stop. It refuses changes with 503 naming the
cause, keeps answering heartbeats (so running jobs keep their leases and
run on), says so in /v1/health and /metrics, tries the write again, and
once there is space it takes changes again; the submission whose write
failed is answered only then, nothing unwritten having been acknowledged."""
import os
import subprocess
import tempfile
import threading
import time

from conftest import end_shims, server_and_agent, wait_for


def test_a_full_store_refuses_changes_and_stops_nothing(workdir, procs):
    data = tempfile.mkdtemp(prefix="tenk-full-data-", dir="/tmp")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", data], check=True)
    work = os.path.join(workdir, "agent")
    filler = os.path.join(data, "filler")
    try:
        t, server, agent = server_and_agent(workdir, procs, "4s", data=data, work=work)
        running = t.submit("--", "sleep", "300")
        t.wait_state(running, "RUNNING")

        def fill_and_submit():
            """The disk fills up; a submission goes in a thread of its own."""
            subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True)
            held = {}

            def submit():
                try:
                    held["answer"] = t.api("POST", "/v1/jobs", {"command": ["true"],
                                                                "cwd": "/tmp"})
                except Exception as e:  # the assertions below show it
                    held["error"] = repr(e)
                held["at"] = time.monotonic()
            th = threading.Thread(target=submit)
            th.start()
            return th, held

        def said(text):
            return server.output().count(text)

        # a write of the server's own (a queue's usage, a job's record) may
        # meet the full disk before the submission's does, which is then
        # refused at once (503, nothing acknowledged): space again, the
        # store mended, and the disk fills again
        for _ in range(3):
            failed = said("the store cannot be written")
            th, held = fill_and_submit()
            wait_for(lambda: said("the store cannot be written") > failed, 20, "the failed write")
            th.join(timeout=2)
            if th.is_alive():
                break
            assert held.get("answer", (0,))[0] == 503, held
            mended = said("the store takes writes again")
            os.remove(filler)
            wait_for(lambda: said("the store takes writes again") > mended, 10, "the mend")
        st, res = t.api("POST", "/v1/jobs", {"command": ["true"], "cwd": "/tmp"})
        assert st == 503 and res["error"].startswith("the server cannot write its store ("), res
        assert "nothing it acknowledged is lost" in res["error"], res
        st, health = t.api("GET", "/v1/health", token=None)
        assert st == 200 and health["store"]["writable"] is False, health
        st, text = t.api("GET", "/metrics")
        assert "tenk_store_writable 0" in text, text[:500]
        # longer than the node timeout: the server lives, the job runs on
        time.sleep(6)
        assert server.alive() and th.is_alive(), ("nothing unwritten is acknowledged", held)
        assert "lease ran out" not in agent.output()
        st, j = t.api("GET", f"/v1/jobs/{running}")
        assert st == 200 and j["state"] == "RUNNING" and len(j["attempts"]) == 1, j
        # space again: the held submission is answered, and changes are taken
        mended = said("the store takes writes again")
        os.remove(filler)
        freed = time.monotonic()
        th.join(timeout=30)
        assert held["answer"][0] == 201 and held["at"] >= freed, held
        wait_for(lambda: said("the store takes writes again") > mended, 10, "the mend")
        st, res = t.api("POST", "/v1/jobs", {"command": ["true"], "cwd": "/tmp"})
        assert st == 201, res
        t.run("wait", res["id"], held["answer"][1]["id"], timeout=60)
        st, j = t.api("GET", f"/v1/jobs/{running}")
        assert j["state"] == "RUNNING" and len(j["attempts"]) == 1, j
        t.run("cancel", running)
        agent.stop()
        server.stop()
    finally:
        end_shims(work)
        subprocess.run(["umount", "-l", data])
        os.rmdir(data)
