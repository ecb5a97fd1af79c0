"""Jobs in container images (Podman): a job sees the image and what it
mounts, not the host; runs as its owner; the cluster's image rules; pulls
from a loopback registry, once per node; one digest across a gang; a gang
in an image across namespace hosts."""
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile

import pytest

import images
from conftest import BIN, MultiHost, root_jobs_config, start_up, wait_for

pytestmark = pytest.mark.skipif(not images.have_podman(), reason="podman, runc, debootstrap")

USER = "tenkimg"


@pytest.fixture
def owner():
    """A Unix account of the test's making (removed after), the admin's
    jobs' owner, and a folder it owns that every account may reach."""
    # one an interrupted run left goes first: the name is this test's
    subprocess.run(["userdel", "-f", USER], capture_output=True)
    subprocess.run(["useradd", "-M", "-N", "-g", "nogroup", "-s", "/bin/sh", USER], check=True,
                   capture_output=True)
    base = tempfile.mkdtemp(prefix="tenk-image-", dir="/tmp")
    os.chmod(base, 0o711)
    pw = pwd.getpwnam(USER)
    home = os.path.join(base, "w")
    os.mkdir(home, 0o755)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    try:
        yield pw, base, home
    finally:
        subprocess.run(["userdel", "-f", USER], capture_output=True)
        images.unmount_under(base)
        shutil.rmtree(base, ignore_errors=True)


def image_up(base, config=None, extra=(), env=None, fake="8xH100"):
    data = os.path.join(base, "tenk-data")
    os.makedirs(data, exist_ok=True)
    cfg = {"admin_unix_user": USER}
    cfg.update(config or {})
    with open(os.path.join(data, "config.json"), "w") as f:
        json.dump(cfg, f)
    t, d = start_up(base, "--containers-conf", images.conf(), *extra, env=env, fake=fake)
    return t, d


def output(home, jid):
    with open(os.path.join(home, f"tenk-{jid}.out")) as f:
        return f.read()


def test_job_sees_the_image_and_its_mounts_only(owner):
    pw, base, home = owner
    ref = images.base_image()
    secret = os.path.join(base, "host-only.txt")
    shared = os.path.join(base, "shared.txt")
    for p, text in ((secret, "host secret\n"), (shared, "shared\n")):
        with open(p, "w") as f:
            f.write(text)
        os.chmod(p, 0o644)
    t, d = image_up(base)
    try:
        script = ("head -1 /etc/os-release; id -u; id -g; cat " + secret + " 2>&1; "
                  "cat /data/shared.txt; (echo x > /data/shared.txt) 2>&1; echo write=$?; "
                  "pwd; echo $TENK_CHECKPOINT_DIR; touch $TENK_CHECKPOINT_DIR/ok && echo ckpt")
        jid = t.submit("--image", ref, "--mount", f".,{shared}:/data/shared.txt:ro", "--",
                       "sh", "-c", script, cwd=home)
        t.run("wait", jid, timeout=60)
        job = t.job(jid)
        assert job["state"] == "COMPLETED", (job, output(home, jid))
        out = output(home, jid).splitlines()
        assert out[0] == 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"'
        assert out[1] == str(pw.pw_uid) and out[2] == str(pw.pw_gid), out
        assert "No such file" in out[3], "a host file not mounted is not there"
        assert out[4] == "shared"
        assert "Read-only file system" in "\n".join(out), out
        assert "write=2" in out or "write=1" in out, out
        assert home in out, "the working folder is mounted where it is, and the task starts there"
        # `--mount .` (no destination) shows the folder's files, not a new empty volume
        for k in range(3):
            with open(os.path.join(home, f"code-{k}.py"), "w") as f:
                f.write("pass\n")
        jid = t.submit("--image", ref, "--mount", ".", "--", "sh", "-c", "ls", cwd=home)
        t.run("wait", jid, timeout=60)
        assert {"code-0.py", "code-1.py", "code-2.py"} <= set(output(home, jid).split()), \
            output(home, jid)
        assert "ckpt" in out
        att = job["attempts"][0]
        assert att["digest"] == images.inspect_id(ref)
        assert att["nodes"][0]["digest"] == att["digest"]
        assert job["request"]["image"] == ref
        # nothing of the container outlives the job
        left = images.podman("ps", "-a", "--filter", "name=tenk-node1-", "--format", "{{.Names}}")
        assert left.stdout.strip() == ""
        # without the working folder mounted, it is not there
        jid = t.submit("--image", ref, "--", "sh", "-c", "pwd; ls " + home + " 2>&1; true", cwd=home)
        t.run("wait", jid, timeout=60)
        out = output(home, jid)
        assert out.splitlines()[0] == "/" and "No such file" in out
        # a command the image has not: the task fails to launch, saying so
        jid = t.submit("--image", ref, "--", "no-such-command", cwd=home)
        t.run("wait", jid, check=False, timeout=60)
        job = t.job(jid)
        assert job["state"] == "FAILED", job
        assert job["reason"].startswith("task 0 on node1 exited with code 1: failed to exec"), \
            job["reason"]
    finally:
        d.stop()


SWAPPER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b = sys.argv[1].encode(), sys.argv[2].encode()
end = time.monotonic() + 120
while time.monotonic() < end:
    for _ in range(1000):
        libc.renameat2(-100, a, -100, b, 2)  # RENAME_EXCHANGE
"""


def test_a_mount_is_what_its_owner_could_reach(owner):
    """The job's owner swaps a folder it mounts for a link into a folder
    only root reads, as fast as it can: a mount is opened as the owner and
    that folder is what podman mounts, so no job ever reads root's file;
    each either sees the owner's own file or is refused, saying why."""
    pw, base, home = owner
    ref = images.base_image()
    private = os.path.join(base, "root-only")
    os.mkdir(private, 0o700)
    inner = os.path.join(private, "inner")
    os.mkdir(inner, 0o755)
    with open(os.path.join(inner, "f"), "w") as f:
        f.write("root's secret\n")
    os.chmod(os.path.join(inner, "f"), 0o644)
    d, link = os.path.join(home, "d"), os.path.join(home, "link")
    os.mkdir(d, 0o755)
    with open(os.path.join(d, "f"), "w") as f:
        f.write("own\n")
    os.symlink(inner, link)
    for p in (d, os.path.join(d, "f")):
        os.chown(p, pw.pw_uid, pw.pw_gid)
    os.lchown(link, pw.pw_uid, pw.pw_gid)
    t, dmn = image_up(base)
    swapper = subprocess.Popen(["python3", "-c", SWAPPER, d, link], user=pw.pw_uid,
                               group=pw.pw_gid)
    try:
        jids = [t.submit("--image", ref, "--mount", f"{d}:/data", "--", "cat", "/data/f",
                         cwd=home) for _ in range(12)]
        for jid in jids:
            t.run("wait", jid, check=False, timeout=120)
    finally:
        swapper.kill()
        swapper.wait()
    seen = {"own": 0, "refused": 0}
    for jid in jids:
        job = t.job(jid)
        path = os.path.join(home, f"tenk-{jid}.out")
        out = open(path).read() if os.path.exists(path) else ""
        assert "secret" not in out, (jid, out)
        if job["state"] == "COMPLETED":
            assert out == "own\n", (jid, out)
            seen["own"] += 1
        else:
            assert "cannot mount" in job["reason"] and "Permission denied" in job["reason"], job
            seen["refused"] += 1
    assert seen["own"] > 0, seen
    # nothing stays mounted on the node once the jobs are over
    with open("/proc/self/mountinfo") as f:
        assert not [line for line in f if "/mnt." in line and base in line]
    dmn.stop()


def test_image_rules_of_the_cluster(owner):
    pw, base, home = owner
    ref = images.base_image()
    t, d = image_up(base, {"require_image": True, "allowed_images": ["localhost/tenk-test:*"],
                           "default_mounts": ["."]}, extra=("--cdi-dir", "/var/empty/cdi"))
    try:
        p = t.run("submit", "--", "true", check=False, cwd=home)
        assert p.returncode != 0 and "this cluster runs jobs in images: add --image" in p.stderr
        p = t.run("submit", "--image", "registry.example/other:1", "--", "true", check=False,
                  cwd=home)
        assert p.returncode != 0
        assert "image registry.example/other:1 is not allowed on this cluster; allowed: " \
            "localhost/tenk-test:*" in p.stderr, p.stderr
        p = t.run("submit", "--mount", "/data", "--", "true", check=False, cwd=home)
        assert "--mount: is for a job in an image" in p.stderr
        st, body = t.api("POST", "/v1/jobs", {"command": ["true"], "cwd": home, "image": ref,
                                              "mounts": ["/a/../etc:/x"]})
        assert st == 400 and "mounts[0]" in body["error"], body
        # GPUs go in by CDI: a node without a CDI spec says so
        jid = t.submit("-G", "1", "--image", ref, "--", "true", cwd=home)
        t.run("wait", jid, check=False, timeout=60)
        job = t.job(jid)
        assert job["state"] == "FAILED", job
        assert "the job has GPUs, but node1 has no CDI spec of them in /var/empty/cdi" in \
            job["reason"], job["reason"]
        # the default mount: the working folder, without --mount
        jid = t.submit("--image", ref, "--", "sh", "-c", "pwd", cwd=home)
        t.run("wait", jid, timeout=60)
        assert output(home, jid).strip() == home
        assert t.job(jid)["request"]["mounts"] == [f"{home}:{home}"]
    finally:
        d.stop()


@pytest.fixture
def registry(tmp_path):
    r = images.Registry(str(tmp_path))
    yield r
    r.close()


def test_pull_once_per_node_and_registry_errors(owner, registry):
    pw, base, home = owner
    ref = registry.push_tiny("tiny", "v1", "one")
    env = dict(os.environ, CONTAINERS_REGISTRIES_CONF=images.registries_conf(base, registry.addr))
    store = os.path.join(base, "store")
    t, d = image_up(base, extra=("--podman-root", store), env=env)
    try:
        # the registry held still: the job waits, saying why
        registry.proc.send_signal(signal.SIGSTOP)
        try:
            jid = t.submit("--image", ref, "--", "cat", "/etc/tenk-tag", cwd=home)
            j = wait_for(lambda: (lambda j: j if j["reason"].startswith("pulling") or
                                  j["state"] not in ("PENDING", "STARTING") else None)(
                t.job(jid)), 30, "the job to say it waits for the pull")
            assert j["state"] == "STARTING" and j["reason"] == f"pulling {ref} on node1", j
        finally:
            registry.proc.send_signal(signal.SIGCONT)
        t.run("wait", jid, timeout=60)
        assert t.job(jid)["state"] == "COMPLETED" and output(home, jid) == "one\n"
        assert images.has_image(ref, store), "pulled into the node's store"
        jid2 = t.submit("--image", ref, "--", "cat", "/etc/tenk-tag", cwd=home)
        t.run("wait", jid2, timeout=60)
        assert output(home, jid2) == "one\n"
        pulls = [ln for ln in d.output().splitlines() if f"pulling {ref}" in ln]
        assert len(pulls) == 1, f"pulled once for two jobs: {pulls}"
        # what the node holds, as tenk images shows it (its agent says so
        # with a heartbeat)
        digest = images.inspect_id(ref, store)
        listed = wait_for(lambda: (lambda r: r if any(
            i["ref"] == ref for i in r["nodes"][0]["images"] or []) else None)(
            t.json("images")), 30, "the node's images")
        assert [i["digest"] for i in listed["nodes"][0]["images"] if i["ref"] == ref] == \
            [digest]
        assert ref in t.run("images", "--nodes", "node1").stdout
        # pulled ahead: tenk images pull waits for every node
        ref2 = registry.push_tiny("tiny", "v2", "two")
        p = t.run("images", "pull", ref2, "--nodes", "all", timeout=120)
        assert p.stdout.strip() == "node1: done", p.stdout
        assert images.has_image(ref2, store)
        jid4 = t.submit("--image", ref2, "--", "cat", "/etc/tenk-tag", cwd=home)
        t.run("wait", jid4, timeout=60)
        assert output(home, jid4) == "two\n"
        assert not [ln for ln in d.output().splitlines() if f"job {jid4}.1: pulling" in ln]
        p = t.run("images", "pull", f"{registry.addr}/tiny:nope", "--nodes", "node1",
                  check=False, timeout=120)
        assert p.returncode == 1 and p.stdout.startswith("node1: failed: ") and \
            "manifest unknown" in p.stdout, p.stdout + p.stderr
        p = t.run("images", "pull", ref2, check=False)
        assert p.returncode == 2 and "--nodes LIST or --nodes all is required" in p.stderr
        p = t.run("images", "pull", ref2, "--nodes", "nosuch", check=False)
        assert p.returncode != 0 and 'no node "nosuch"' in p.stderr, p.stderr
        # a wrong reference fails with the registry's word
        bad = f"{registry.addr}/tiny:nope"
        jid3 = t.submit("--image", bad, "--", "true", cwd=home)
        t.run("wait", jid3, check=False, timeout=60)
        job = t.job(jid3)
        assert job["state"] == "FAILED", job
        assert f"cannot pull {bad} on node1" in job["reason"] and "manifest unknown" in \
            job["reason"], job["reason"]
    finally:
        d.stop()


def test_gang_with_two_digests_does_not_start(owner, registry, procs):
    pw, base, home = owner
    ref = registry.push_tiny("tiny", "v1", "one")
    env = dict(os.environ, CONTAINERS_REGISTRIES_CONF=images.registries_conf(base, registry.addr))
    t, d = image_up(base, extra=("--podman-root", os.path.join(base, "store1")), env=env)
    try:
        # node2 has the old v1 already; then v1 moves to new content
        store2 = os.path.join(base, "store2")
        images.podman("pull", ref, root=store2, env=env)
        old = images.inspect_id(ref, store2)
        registry.push_tiny("tiny", "v1", "two")
        from conftest import Daemon
        a2 = Daemon(["agent", "--server", t.url, "--token-file",
                     os.path.join(t.data, "agent.token"), "--name", "node2", "--fake-gpus",
                     "8xH100", "--work-dir", os.path.join(base, "agent2"), "--stop-jobs",
                     "--containers-conf", images.conf(), "--podman-root", store2],
                    base, "agent2", env=env)
        procs.append(a2)
        t.wait_nodes_up(2)
        jid = t.submit("-N", "2", "--image", ref, "--", "cat", "/etc/tenk-tag", cwd=home)
        t.run("wait", jid, check=False, timeout=90)
        job = t.job(jid)
        assert job["state"] == "FAILED", job
        r = job["reason"]
        assert r.startswith(f"image {ref} is not the same on every node:"), r
        assert "node1 sha256:" in r and "node2 " + old[:19] in r, r
        assert not os.path.exists(os.path.join(home, f"tenk-{jid}.out")), "no task started"
        assert all(task["start_ms"] == 0 or task["state"] == "EXITED"
                   for task in job["attempts"][0]["tasks"])
        a2.stop()
    finally:
        d.stop()


def test_gang_in_image_across_hosts(hosts3, workdir, kill_all):
    """Two namespace hosts run a real collective (tenk bench allreduce),
    each rank in a container of the image, tenk mounted in."""
    ref = images.base_image()
    c = MultiHost(workdir, hosts3, agent_args=["--containers-conf", images.conf()])
    kill_all += c.daemons
    tenk = os.path.realpath(BIN)
    jid = c.submit("-N", "2", "--tasks-per-node", "1", "--image", ref, "--mount",
                   f"{os.path.dirname(tenk)}:/opt/tenk:ro,{workdir}", "-o", "rank-%t.out",
                   "--", "/opt/tenk/" + os.path.basename(tenk), "bench", "allreduce", "-b",
                   "1K", "-e", "1M", "-f", "32", "-n", "2", "--json")
    c.run("wait", jid, check=False, timeout=120)
    job = c.job(jid)
    outs = [open(os.path.join(workdir, f"rank-{r}.out")).read() for r in range(2)]
    assert job["state"] == "COMPLETED", (job["reason"], outs)
    assert {n["name"] for n in job["attempts"][0]["nodes"]} == {"host1", "host2"}
    res = json.loads(outs[0])
    assert res["ranks"] == 2 and res["transport"] == "tcp", res
    assert all(r["wrong"] == 0 for r in res["rows"]) and len(res["rows"]) == 3, res
    assert job["attempts"][0]["digest"] == images.inspect_id(ref)
    c.stop_all()


@pytest.fixture
def hosts5():
    from netns import Hosts
    h = Hosts(5)
    yield h
    h.destroy()


@pytest.fixture
def cdi_spec():
    """A CDI spec of a node's fake GPUs where podman reads specs
    (/var/run/cdi), each device adding TENK_CDI_<index>=<uuid> to the
    container's environment, and "all" (as nvidia-ctk writes it); removed
    after."""
    path = f"/var/run/cdi/tenk-test-{os.getpid()}.json"
    os.makedirs("/var/run/cdi", exist_ok=True)

    def write(node):
        devs = [{"name": a["uuid"], "containerEdits": {"env": [
            f"TENK_CDI_{a['index']}={a['uuid']}"]}} for a in node["accelerators"]]
        devs.append({"name": "all", "containerEdits": {"env": [
            e for dv in devs for e in dv["containerEdits"]["env"]]}})
        with open(path, "w") as f:
            json.dump({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": devs,
                       "containerEdits": {}}, f)
    yield write
    if os.path.exists(path):
        os.remove(path)


def test_gpus_go_in_by_cdi(owner, cdi_spec):
    pw, base, home = owner
    ref = images.base_image()
    t, d = image_up(base, extra=("--cdi-dir", "/var/run/cdi"))
    try:
        node = t.json("nodes")["nodes"][0]
        cdi_spec(node)
        jid = t.submit("-G", "2", "--image", ref, "--", "sh", "-c", "env | grep ^TENK_CDI_",
                       cwd=home)
        t.run("wait", jid, timeout=60)
        job = t.job(jid)
        devs = job["attempts"][0]["nodes"][0]["devices"]
        uuids = {a["index"]: a["uuid"] for a in node["accelerators"]}
        want = sorted(f"TENK_CDI_{i}={uuids[i]}" for i in devs)
        assert sorted(output(home, jid).split()) == want, "the task's devices, and no other"
    finally:
        d.stop()


def validation_checks(t, name):
    st, n = t.api("GET", f"/v1/nodes/{name}?checks=1")
    return n["validation"], {c["check"]: c for c in n["validation"]["checks"]}


def test_validate_in_the_image(owner, cdi_spec):
    pw, base, home = owner
    ref = images.base_image()
    digest = images.inspect_id(ref)
    t, d = image_up(base, extra=("--cdi-dir", "/var/run/cdi"))
    try:
        cdi_spec(t.json("nodes")["nodes"][0])
        # on this node, by hand
        env = dict(t.env(), CONTAINERS_CONF=images.conf())
        p = t.run("validate", "--image", ref, "--quick", "--layers", "system", "--json",
                  env=env, check=False, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        res = json.loads(p.stdout)
        image = [c for c in res["checks"] if c["check"] == "image"]
        assert image and image[0]["detail"] == f"{ref} at {digest}", res
        # through the server, on the node, as a system job in the image
        p = t.run("validate", "--nodes", "node1", "--image", ref, "--quick", "--layers",
                  "system", timeout=300, check=False)
        assert p.returncode == 0, p.stdout + p.stderr
        v, checks = validation_checks(t, "node1")
        assert v["verdict"] == "pass", v
        assert checks["image"]["detail"] == f"{ref} at {digest}", checks
        vjob = t.job(v["job"])
        assert vjob["request"]["image"] == ref and vjob["attempts"][0]["digest"] == digest
        p = t.run("validate", "--image", "bad ref", check=False)
        assert p.returncode == 2 and "is not an image reference" in p.stderr
    finally:
        d.stop()


def test_validate_fails_the_node_whose_image_differs(owner, registry, procs):
    pw, base, home = owner
    env = dict(os.environ, CONTAINERS_REGISTRIES_CONF=images.registries_conf(base, registry.addr))
    store1, store3 = os.path.join(base, "store1"), os.path.join(base, "store3")
    # node1 and node2 share a store that has deb:v1; then v1 moves to another
    # import of the same Debian (a new ID), which node3 pulls
    ref = f"{registry.addr}/deb:v1"
    images.podman("tag", images.base_image(), ref)
    images.podman("push", "--tls-verify=false", ref)
    images.podman("pull", ref, root=store1, env=env)
    images.podman("rmi", ref)
    old = images.inspect_id(ref, store1)
    images.podman("import", "--change", "ENV TENK_VARIANT=2", images.base_tar(), ref,
                  root=store3)
    images.podman("push", "--tls-verify=false", ref, root=store3)
    new = images.inspect_id(ref, store3)
    assert new != old
    t, d = image_up(base, extra=("--podman-root", store1), env=env, fake=None)
    try:
        from conftest import Daemon
        for name, store in (("node2", store1), ("node3", store3)):
            a = Daemon(["agent", "--server", t.url, "--token-file",
                        os.path.join(t.data, "agent.token"), "--name", name,
                        "--work-dir", os.path.join(base, name), "--stop-jobs",
                        "--containers-conf", images.conf(), "--podman-root", store], base,
                       name, env=env)
            procs.append(a)
        t.wait_nodes_up(3)
        p = t.run("validate", "--nodes", "node1,node2,node3", "--image", ref, "--quick",
                  "--layers", "system", timeout=300, check=False)
        assert p.returncode != 0, p.stdout
        v3, c3 = validation_checks(t, "node3")
        assert v3["verdict"] == "fail" and v3["layer"] == "system", v3
        assert c3["stack_consistent"]["verdict"] == "FAIL" and \
            "image " + new[:19] in c3["stack_consistent"]["detail"], c3["stack_consistent"]
        for name in ("node1", "node2"):
            v, c = validation_checks(t, name)
            assert v["verdict"] == "pass", v
        vjob = t.job(v3["job"])
        digests = {n["name"]: n["digest"] for n in vjob["attempts"][0]["nodes"]}
        assert digests == {"node1": old, "node2": old, "node3": new}, digests
    finally:
        d.stop()


# A site's reference in awk (the test image has no Python), on one line: a
# fixed-seed least squares, 30 steps, its record last; the image's
# REF_ORDER says the order it sums the rows in, as another library's
# kernels would.
AWK_REFERENCE = (
    'awk -v o="$REF_ORDER" \'BEGIN{for(r=0;r<64;r++){y[r]=.1;for(k=0;k<8;k++){'
    'x[r,k]=((r*31+k*17)%23-11)/11;y[r]+=x[r,k]*(k%5-2)/4}}printf "{\\"loss\\":[";'
    'for(s=0;s<30;s++){split("",g);l=0;for(i=0;i<64;i++){r=o=="reverse"?63-i:i;e=-y[r];'
    'for(k=0;k<8;k++)e+=w[k]*x[r,k];for(k=0;k<8;k++)g[k]+=e*x[r,k]/32;l+=e*e/64}'
    'for(k=0;k<8;k++)w[k]-=g[k]/20;printf "%s%.17g",s?",":"",l}printf "],\\"params\\":[";'
    'for(k=0;k<8;k++)printf "%s%.17g",k?",":"",w[k]+0;print "]}"}\'')


# A job that checkpoints every half second through tenk's protocol (a
# tag with a .tenk-commit marker) and starts from the step it restores.
CKPT_LOOP = (
    'i=${TENK_RESTORE_STEP:-0}; echo "attempt $TENK_ATTEMPT from $i on $TENK_NODE_NAME"; '
    'C=$TENK_CHECKPOINT_DIR; while true; do i=$((i+1)); mkdir -p $C/s$i; '
    'echo "{\\"step\\": $i}" > $C/s$i/.tenk-commit; sleep 0.5; done')


def test_image_rollout_across_hosts_proves_and_switches(hosts5, workdir, kill_all):
    """An image rollout across four namespace hosts while jobs run: stages
    canary, 50% and all, each stage's nodes drained (their jobs stopped
    with their grace and requeued, restarting elsewhere from their last
    checkpoint), the reference run on the old stack and then the
    validation and the reference in the next image; the image becomes the
    default (a version of the configuration by the rollout, which its
    rollback takes back). Then an image that sums in another order (its
    environment says so, as another library's kernels would) stops at
    the canary on the equivalence check, which names the step and both
    values, and rolls back by itself; the default stays."""
    same, rev = "localhost/tenk-test:same-order", "localhost/tenk-test:reverse-order"
    images.base_image()
    images.podman("import", "--change", "ENV REF_ORDER=forward", images.base_tar(), same)
    images.podman("import", "--change", "ENV REF_ORDER=reverse", images.base_tar(), rev)
    store = os.path.join(workdir, "store")
    os.makedirs(store)
    data = os.path.join(workdir, "data")
    root_jobs_config(data, validation_args=["--quick", "--layers", "system"],
                     checkpoint_store=store)
    # the fake GPUs of every host go into a container by CDI
    cdi = f"/var/run/cdi/tenk-test-{os.getpid()}.json"
    os.makedirs("/var/run/cdi", exist_ok=True)
    c = MultiHost(workdir, hosts5, agent_args=["--containers-conf", images.conf(),
                                               "--cdi-dir", "/var/run/cdi"],
                  agent_args_of={h: ["--domain", "dc1/rack" + ("A" if h <= 2 else "B")]
                                 for h in range(1, 5)})
    kill_all += c.daemons

    def ended(name):
        return wait_for(lambda: (lambda r: r if r["state"] != "running" else None)(
            c.json("rollout", "status", name)), 300, f"rollout {name} to end", interval=0.5)
    try:
        devs = [{"name": a["uuid"], "containerEdits": {"env": [f"TENK_CDI={a['uuid']}"]}}
                for n in c.json("nodes")["nodes"] for a in n["accelerators"]]
        with open(cdi, "w") as f:
            json.dump({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": devs,
                       "containerEdits": {}}, f)
        jobs = [c.submit("-G", "4", "--requeue", "3", "-o", os.path.join(workdir, "j-%j.out"),
                         "--", "sh", "-c", CKPT_LOOP) for _ in range(4)]
        for j in jobs:
            c.wait_state(j, "RUNNING", timeout=60)
        wait_for(lambda: all(checkpoints_of(c, j) for j in jobs), 30, "a checkpoint of each")
        c.run("rollout", "create", "same", "--image", same, "--canary", "1", "--then", "50%",
              "--then", "all", "--soak", "1s", "--drain-policy", "requeue")
        ro = ended("same")
        assert ro["state"] == "done", json.dumps(ro, indent=1)
        sizes = [len(st["nodes"]) for st in ro["stages"]]
        assert sizes == [1, 1, 2], ro["stages"]
        for st in ro["stages"]:
            for n in st["nodes"]:
                eq = n["equivalence"]
                assert n["state"] == "done" and eq["verdict"] == "same" and eq["bitwise"], n
        what = [e["what"] for e in ro["events"]]
        assert any(w.startswith("stage 1: the reference on the old stack, validation job")
                   for w in what), what
        assert sum(w.startswith("stage ") and w.endswith(f" in {same}") for w in what) == 3, what
        cfg = c.json("config", "show")
        assert cfg["config"]["default_image"] == same and cfg["version"] == ro["config_after"]
        # the jobs were moved, never killed, and went on from their checkpoints
        for j in jobs:
            job = c.job(j)
            assert job["state"] in ("RUNNING", "PENDING", "STARTING"), job
        moved = [j for j in jobs if len(c.job(j)["attempts"]) > 1]
        assert moved, [c.job(j)["attempts"] for j in jobs]
        for j in moved:
            lines = open(os.path.join(workdir, f"j-{j}.out")).read().split("\n")
            again = [ln for ln in lines if ln.startswith("attempt 2 from ")]
            assert again and int(again[0].split()[3]) > 0, lines
        for j in jobs:
            c.run("cancel", j)
        # a site's reference: the image that sums backwards differs
        c.run("rollout", "create", "rev", "--image", rev, "--canary", "1", "--then", "all",
              "--soak", "1s", "--reference-cmd", AWK_REFERENCE)
        ro = ended("rev")
        assert ro["state"] == "failed", json.dumps(ro, indent=1)
        (n,) = ro["stages"][0]["nodes"]
        eq = n["equivalence"]
        assert eq["verdict"] == "different" and eq["first_step"] >= 1, eq
        assert ro["reason"].startswith(f"stage 1: node {n['name']} does not compute as the "
                                       f"old stack: loss differs from step {eq['first_step']} "
                                       "("), ro["reason"]
        assert ro["stages"][1]["nodes"] == []
        assert c.json("config", "show")["config"]["default_image"] == same
        nd = next(x for x in c.json("nodes")["nodes"] if x["name"] == n["name"])
        assert not nd.get("drained"), nd
        # the way back: no default image, as before the first rollout
        c.run("rollout", "rollback", "same")
        assert "default_image" not in c.json("config", "show")["config"]
    finally:
        c.stop_all()
        if os.path.exists(cdi):
            os.remove(cdi)
        images.podman("rmi", same, rev, check=False)


def checkpoints_of(c, jid):
    return c.json("ckpt", "ls", jid)
