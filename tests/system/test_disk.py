"""A job's own disk use is the job's (issue 34, point 4): on a node whose
work folder is a small tmpfs, a job that fills its checkpoint folder past
--job-disk-limit fails saying so and its files go; jobs' folders that
bring the free space under --min-free-disk are theirs, not a fault of the
node, so the node stays UP and the other jobs on it run on untouched."""
import json
import os
import shutil
import subprocess
import tempfile

from conftest import end_shims, server_and_agent, wait_for


def test_a_job_that_fills_the_disk_fails_alone(workdir, procs):
    # under /tmp itself: the jobs' users reach their folders in it
    work = tempfile.mkdtemp(prefix="tenk-disk-work-", dir="/tmp")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", work], check=True)
    try:
        t, server, agent = server_and_agent(
            workdir, procs, "8s", work=work,
            agent_args=("--job-disk-limit", "100M", "--min-free-disk", "150M"))
        p = t.run("users", "add", "bob", "--unix-user", "nobody", "--json")
        bob = dict(t.env(), TENK_TOKEN=json.loads(p.stdout)["token"])
        # a job of the admin's, and one that keeps 90 MB (under its limit)
        other = t.submit("--", "sleep", "120", cwd="/tmp")
        keeper = t.submit("--", "sh", "-c",
                          "dd if=/dev/zero of=$TENK_CHECKPOINT_DIR/keep bs=1M count=90 "
                          "status=none && sleep 120", cwd="/tmp")
        for j in (other, keeper):
            t.wait_state(j, "RUNNING")
        wait_for(lambda: os.path.exists(os.path.join(work, "checkpoints", str(keeper), "keep"))
                 and os.path.getsize(os.path.join(work, "checkpoints", str(keeper), "keep"))
                 == 90 << 20, 30, "the keeper's 90 MB")
        # bob's 120 MB: free space goes under 150 MB, and his job over 100 MB
        outdir = tempfile.mkdtemp(prefix="tenk-disk-", dir="/tmp")  # where bob may write
        os.chmod(outdir, 0o777)
        out = os.path.join(outdir, "bob.out")
        filler = int(t.run("submit", "-o", out, "--", "sh", "-c",
                           "dd if=/dev/zero of=$TENK_CHECKPOINT_DIR/fill bs=1M count=120 "
                           "status=none; sleep 120", env=bob, cwd="/tmp").stdout)
        j = wait_for(lambda: (lambda j: j if j["state"] == "FAILED" else None)(t.job(filler)),
                     30, "bob's job to fail", show=lambda: (t.job(filler)["reason"],
                                                           open(out).read()
                                                           if os.path.exists(out) else ""))
        assert "checkpoint folder over its 100 MiB limit" in j["reason"], j
        folder = os.path.join(work, "checkpoints", str(filler))
        wait_for(lambda: not os.path.exists(folder), 30, "the filler's folder to go")
        # the node was never short, and the others run on, first attempts
        node = t.json("nodes")["nodes"][0]
        assert node["state"] == "UP", node
        assert "disk full" not in server.output(), server.output()[-3000:]
        for jid in (other, keeper):
            job = t.job(jid)
            assert job["state"] == "RUNNING" and len(job["attempts"]) == 1, job
        shutil.rmtree(outdir)
        t.run("cancel", other, keeper)
        agent.stop()
        server.stop()
    finally:
        end_shims(work)
        subprocess.run(["umount", "-l", work])
        os.rmdir(work)
