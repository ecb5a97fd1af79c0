"""Container images for the tests, made from Debian packages (no public
registry is reachable): a Debian minbase with the libraries the tenk binary
links (so that a job in it can run tenk itself, mounted in), and a tiny
busybox image to push to and pull from a loopback registry. Built once per
machine and cached under /var/tmp; rebuilt only when missing."""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

CACHE = "/var/tmp/tenk-test-images"
# what the tenk binaries (normal and ASan) need at run time
LIBS = ["libuv1", "libjansson4", "libmicrohttpd12", "libcurl4", "libsqlite3-0", "libasan8",
        "libubsan1"]
BASE_REF = "localhost/tenk-test:bookworm-" + hashlib.sha256(",".join(LIBS).encode()).hexdigest()[:8]
CONF = os.path.join(CACHE, "containers.conf")


def have_podman():
    return all(shutil.which(p) for p in ("podman", "runc", "debootstrap"))


def podman(*args, root=None, check=True, timeout=300, **kw):
    cmd = ["podman"]
    if root:
        cmd += ["--root", os.path.join(root, "storage"), "--runroot", os.path.join(root, "run")]
    env = dict(kw.pop("env", None) or os.environ, CONTAINERS_CONF=conf())
    p = subprocess.run(cmd + list(args), timeout=timeout, env=env, capture_output=True,
                       text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd + list(args))} exited {p.returncode}:\n{p.stderr}")
    return p


def conf():
    """A containers.conf this sandbox can run with: no raised ulimits."""
    os.makedirs(CACHE, exist_ok=True)
    if not os.path.exists(CONF):
        with open(CONF + ".tmp", "w") as f:
            f.write('[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n')
        os.rename(CONF + ".tmp", CONF)
    return CONF


def has_image(ref, root=None):
    return podman("image", "exists", ref, root=root, check=False).returncode == 0


def base_tar():
    """The Debian image's root file system as a tar, made once."""
    tar = os.path.join(CACHE, BASE_REF.split(":")[1] + ".tar")
    if not os.path.exists(tar):
        rootfs = tempfile.mkdtemp(dir="/var/tmp", prefix="tenk-rootfs-")
        try:
            subprocess.run(["debootstrap", "--variant=minbase", "--include=" + ",".join(LIBS),
                            "bookworm", rootfs], check=True, timeout=900,
                           capture_output=True)
            subprocess.run(["tar", "-C", rootfs, "-cf", tar + ".tmp", "."], check=True,
                           timeout=300)
            os.rename(tar + ".tmp", tar)
        finally:
            shutil.rmtree(rootfs, ignore_errors=True)
    return tar


def base_image(root=None):
    """The Debian image, in the default store (or root's): its reference."""
    if not has_image(BASE_REF, root):
        podman("import", base_tar(), BASE_REF, root=root)
    return BASE_REF


def tiny_tar(tag):
    """A busybox image's tar whose /etc/tenk-tag says tag (so that two
    tags differ in content, and so in digest)."""
    os.makedirs(CACHE, exist_ok=True)
    tar = os.path.join(CACHE, f"tiny-{tag}.tar")
    if os.path.exists(tar):
        return tar
    d = tempfile.mkdtemp(dir="/var/tmp", prefix="tenk-tiny-")
    try:
        os.makedirs(os.path.join(d, "bin"))
        os.makedirs(os.path.join(d, "etc"))
        os.makedirs(os.path.join(d, "tmp"))
        shutil.copy("/bin/busybox", os.path.join(d, "bin", "busybox"))
        for app in ("sh", "cat", "id", "ls", "echo", "true", "sleep"):
            os.symlink("busybox", os.path.join(d, "bin", app))
        with open(os.path.join(d, "etc", "tenk-tag"), "w") as f:
            f.write(tag + "\n")
        subprocess.run(["tar", "-C", d, "-cf", tar + ".tmp", "."], check=True, timeout=60)
        os.rename(tar + ".tmp", tar)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return tar


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Registry:
    """Debian's docker-registry on a loopback port, storing under dir."""

    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "registry")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        cfg = os.path.join(self.dir, "config.yml")
        with open(cfg, "w") as f:
            f.write("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
                    f"    rootdirectory: {self.dir}/data\nhttp:\n  addr: {self.addr}\n")
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen(["docker-registry", "serve", cfg], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the registry did not listen")

    def push_tiny(self, name, tag, content_tag):
        """Imports a tiny image whose content says content_tag into a scratch
        store and pushes it as ADDR/name:tag; returns the reference."""
        ref = f"{self.addr}/{name}:{tag}"
        if not hasattr(self, "scratch"):
            # short: overlay's mount options hold the store's paths
            self.scratch = tempfile.mkdtemp(dir="/var/tmp", prefix="tk-")
        scratch = self.scratch
        podman("import", tiny_tar(content_tag), ref, root=scratch)
        podman("push", "--tls-verify=false", ref, root=scratch)
        return ref

    def close(self):
        if hasattr(self, "scratch"):
            unmount_under(self.scratch)
            shutil.rmtree(self.scratch, ignore_errors=True)
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def registries_conf(workdir, addr):
    """A registries.conf letting podman pull from the loopback registry
    over plain HTTP (the agent's environment names it)."""
    path = os.path.join(workdir, "registries.conf")
    with open(path, "w") as f:
        f.write(f'[[registry]]\nlocation = "{addr}"\ninsecure = true\n')
    return path


def unmount_under(path):
    """Unmounts what podman left mounted under path (its store's overlay
    folder is a mount of its own), deepest first."""
    path = os.path.realpath(path) + "/"
    with open("/proc/self/mounts") as f:
        points = [ln.split()[1] for ln in f]
    for p in sorted((p for p in points if p.startswith(path)), key=len, reverse=True):
        subprocess.run(["umount", "-l", p], capture_output=True)


def inspect_id(ref, root=None):
    return "sha256:" + json.loads(podman("image", "inspect", ref, root=root).stdout)[0]["Id"]
