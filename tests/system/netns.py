"""Several hosts on one machine: each a network namespace with one interface
(eth0) on a private bridge that lives in a namespace of its own, so nothing
touches the machine's own network. The server runs in host 0, agents in the
others; everything is torn down even when a test fails.

Namespaces isolate the network only: the hosts share the file system and the
process table, which the tests use to look at what ran where.
"""
import contextlib
import ctypes
import os
import re
import subprocess

SUBNET = "10.231.0"


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def cleanup_stale():
    """Deletes namespaces left by test runs whose process is gone."""
    out = ip("netns", "list", check=False).stdout
    for line in out.splitlines():
        m = re.match(r"(tk(\d+)-\S+)", line)
        if m and not os.path.exists(f"/proc/{m.group(2)}"):
            ip("netns", "del", m.group(1), check=False)


@contextlib.contextmanager
def in_host(name):
    """This thread in host `name`'s network namespace for the block: sockets
    made in it belong to that host (they stay there after)."""
    libc = ctypes.CDLL(None, use_errno=True)
    clone_newnet = 0x40000000
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(there, clone_newnet) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name}")
        try:
            yield
        finally:
            if libc.setns(home, clone_newnet) != 0:
                raise OSError(ctypes.get_errno(), "setns back home")
    finally:
        os.close(there)
        os.close(home)


class Hosts:
    def __init__(self, n):
        cleanup_stale()
        self.prefix = f"tk{os.getpid()}"
        self.switch = f"{self.prefix}-sw"
        self.names = [f"{self.prefix}-h{i}" for i in range(n)]
        self.addrs = [f"{SUBNET}.{i + 1}" for i in range(n)]
        self.created = []
        try:
            self._build()
        except Exception:
            self.destroy()
            raise

    def _build(self):
        ip("netns", "add", self.switch)
        self.created.append(self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        ip("-n", self.switch, "link", "set", "lo", "up")
        for i, ns in enumerate(self.names):
            ip("netns", "add", ns)
            self.created.append(ns)
            # the pair is made inside the switch, then one end moves to the host
            ip("-n", self.switch, "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0",
               "netns", ns)
            ip("-n", self.switch, "link", "set", f"p{i}", "master", "br0")
            ip("-n", self.switch, "link", "set", f"p{i}", "up")
            ip("-n", ns, "addr", "add", f"{self.addrs[i]}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")

    def cmd(self, host, argv):
        """argv run inside host's network namespace. nsenter, not `ip netns
        exec`, which gives the command a mount namespace of its own with a
        fresh /sys, and so no cgroup hierarchy for a container runtime."""
        return ["nsenter", f"--net=/run/netns/{self.names[host]}", "--", *argv]

    def link(self, host, up):
        ip("-n", self.names[host], "link", "set", "eth0", "up" if up else "down")

    def slow(self, host, delay_ms=20, rate_mbit=200):
        """Slows host's link both ways: tc netem delay where the kernel has
        netem, else (kernels built without it) a token bucket at rate_mbit.
        Returns what was used."""
        ends = [(self.names[host], "eth0"), (self.switch, f"p{host}")]
        for ns, dev in ends:
            p = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev,
                                "root", "netem", "delay", f"{delay_ms}ms", "rate",
                                f"{rate_mbit}mbit"], capture_output=True, text=True)
            if p.returncode != 0:
                break
        else:
            return "netem"
        for ns, dev in ends:
            ip("netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
               f"{rate_mbit}mbit", "burst", "64kb", "latency", "50ms")
        return "tbf"

    def lossy(self, host, share=0.02, on=True):
        """Loses that share of the TCP data host sends (segments of 1,000
        bytes or more; acknowledgements pass) on the way, as a bad cable or
        port would: the other hosts drop it as it arrives (netem's loss,
        where the kernel lacks netem; a drop in host's own OUTPUT would
        never leave TCP, which sends it again as new). on=False mends it."""
        rule = ["INPUT", "-s", self.addrs[host], "-p", "tcp", "-m", "length", "--length",
                "1000:65535", "-m", "statistic", "--mode", "random", "--probability",
                str(share), "-j", "DROP"]
        for h, ns in enumerate(self.names):
            if h != host:
                subprocess.run(["ip", "netns", "exec", ns, "iptables", "-A" if on else "-D",
                                *rule], check=True)

    def mend(self, host):
        for ns, dev in ((self.names[host], "eth0"), (self.switch, f"p{host}")):
            ip("netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root", check=False)

    def destroy(self):
        for ns in reversed(self.created):
            ip("netns", "del", ns, check=False)
        self.created = []
