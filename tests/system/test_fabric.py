"""The network layer (issue 41): each agent reports its fabric from sysfs,
the server keeps and shows it. Read here from a recorded tree of an
InfiniBand node with a RoCE NIC beside it (this machine has no RDMA
device), and from the real veth links of namespace hosts.

The tree's shape follows the kernel's ABI documents
(Documentation/ABI/testing/sysfs-class-net: type, operstate, speed, mtu,
device; sysfs-class-infiniband: ports/N/{link_layer,state,rate,gids}) and
ConnectX-7 nodes as `ls -l /sys/class/net /sys/class/infiniband` shows
them: each interface's `device` a link to its PCI function, whose `driver`
links to the driver and whose `infiniband/` names the RDMA device on it."""
import json
import os
import subprocess

from conftest import BIN, SANITIZER_MARKS, MultiHost, wait_for
from netns import ip
from test_faults import agent, cluster


def write_tree(root, files, links):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text + "\n")
    for path, target in links.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        os.symlink(target, full)


def ib_node_tree(root):
    """ib0 (IPoIB on mlx5_0, InfiniBand NDR), a RoCE port (mlx5_1 on
    enp23s0f1np1, its link down), a management NIC, a veth, loopback."""
    pci_ib, pci_roce, pci_mgmt = ("devices/pci0000:16/0000:16:02.0/0000:17:00.0",
                                  "devices/pci0000:16/0000:16:02.0/0000:17:00.1",
                                  "devices/pci0000:00/0000:00:1c.0/0000:03:00.0")
    files = {
        f"{pci_ib}/numa_node": "0", f"{pci_roce}/numa_node": "0", f"{pci_mgmt}/numa_node": "-1",
        f"{pci_ib}/infiniband/mlx5_0/node_type": "1: CA",
        f"{pci_roce}/infiniband/mlx5_1/node_type": "1: CA",
        # the interfaces
        "class/net/ib0/type": "32", "class/net/ib0/operstate": "up",
        "class/net/ib0/speed": "400000", "class/net/ib0/mtu": "4092",
        "class/net/enp23s0f1np1/type": "1", "class/net/enp23s0f1np1/operstate": "down",
        "class/net/enp23s0f1np1/speed": "-1", "class/net/enp23s0f1np1/mtu": "9000",
        "class/net/eno1/type": "1", "class/net/eno1/operstate": "up",
        "class/net/eno1/speed": "1000", "class/net/eno1/mtu": "1500",
        "class/net/veth9/type": "1", "class/net/veth9/operstate": "up",
        "class/net/veth9/speed": "10000", "class/net/veth9/mtu": "1500",
        "class/net/lo/type": "772", "class/net/lo/operstate": "unknown",
        "class/net/lo/mtu": "65536",
        # the RDMA ports
        "class/infiniband/mlx5_0/ports/1/link_layer": "InfiniBand",
        "class/infiniband/mlx5_0/ports/1/state": "4: ACTIVE",
        "class/infiniband/mlx5_0/ports/1/rate": "400 Gb/sec (4X NDR)",
        "class/infiniband/mlx5_1/ports/1/link_layer": "Ethernet",
        "class/infiniband/mlx5_1/ports/1/state": "1: DOWN",
        "class/infiniband/mlx5_1/ports/1/rate": "100 Gb/sec (2X HDR)",
    }
    # RoCE ECN on priority 3 at both points, as MLNX_OFED's mlx5 says it
    for point in ("roce_np", "roce_rp"):
        for k in range(8):
            files[f"class/net/enp23s0f1np1/ecn/{point}/enable/{k}"] = "1" if k == 3 else "0"
    for dev, n in (("mlx5_0", 128), ("mlx5_1", 255)):
        for g in range(n):
            files[f"class/infiniband/{dev}/ports/1/gids/{g}"] = \
                "fe80:0000:0000:0000:0000:0000:0000:0000"
    links = {
        "class/net/ib0/device": f"../../../{pci_ib}",
        "class/net/enp23s0f1np1/device": f"../../../{pci_roce}",
        "class/net/eno1/device": f"../../../{pci_mgmt}",
        f"{pci_ib}/driver": "../../../../bus/pci/drivers/mlx5_core",
        f"{pci_roce}/driver": "../../../../bus/pci/drivers/mlx5_core",
        f"{pci_mgmt}/driver": "../../../../bus/pci/drivers/igb",
        "class/infiniband/mlx5_0/device": f"../../../{pci_ib}",
        "class/infiniband/mlx5_1/device": f"../../../{pci_roce}",
    }
    write_tree(root, files, links)


def test_fabric_from_a_recorded_tree(workdir, procs):
    """The agent's inventory has every interface but loopback, with kind,
    state, speed, MTU, driver, PCI function, NUMA node and the RDMA device
    on it, and every RDMA port with its link layer, state, rate and GID
    table; tenk nodes NAME shows them."""
    sysfs = os.path.join(workdir, "sys")
    ib_node_tree(sysfs)
    s, t = cluster(workdir, procs)
    agent(t, procs, "n1", os.path.join(workdir, "w1"), "--fake-gpus", "1xH100",
          env={"TENK_SYSFS": sysfs})
    t.wait_nodes_up(1)
    net = t.json("nodes", "n1")[0]["network"]
    ifs = {i["name"]: i for i in net["interfaces"]}
    assert sorted(ifs) == ["eno1", "enp23s0f1np1", "ib0", "veth9"], ifs
    assert ifs["ib0"] == {"name": "ib0", "kind": "infiniband", "virtual": False, "up": True,
                          "mtu": 4092, "speed_mbps": 400000, "driver": "mlx5_core",
                          "pci": "0000:17:00.0", "numa": 0, "rdma": "mlx5_0"}, ifs["ib0"]
    roce = ifs["enp23s0f1np1"]
    assert roce["kind"] == "ethernet" and not roce["up"] and "speed_mbps" not in roce, roce
    assert roce["rdma"] == "mlx5_1" and roce["pci"] == "0000:17:00.1", roce
    # its ECN from the driver's folders; PFC is the kernel's to say (DCB
    # netlink), which a recorded tree is not asked for
    assert roce["ecn_np"] == [3] and roce["ecn_rp"] == [3] and "pfc" not in roce, roce
    assert "ecn_np" not in ifs["ib0"], ifs["ib0"]
    assert ifs["eno1"]["driver"] == "igb" and "numa" not in ifs["eno1"], ifs["eno1"]
    assert ifs["veth9"]["virtual"] and "driver" not in ifs["veth9"], ifs["veth9"]
    ports = {p["device"]: p for p in net["rdma"]}
    assert ports["mlx5_0"] == {"device": "mlx5_0", "port": 1, "link_layer": "InfiniBand",
                               "state": "ACTIVE", "active": True, "rate_gbps": 400.0,
                               "gids": 128, "pci": "0000:17:00.0", "numa": 0}, ports
    assert ports["mlx5_1"]["link_layer"] == "Ethernet" and not ports["mlx5_1"]["active"]
    assert ports["mlx5_1"]["state"] == "DOWN" and ports["mlx5_1"]["gids"] == 255
    shown = t.run("nodes", "n1").stdout
    for line in ("Network:  eno1       ethernet, up, 1 Gb/s, MTU 1500, igb at 0000:03:00.0",
                 "ib0        infiniband, up, 400 Gb/s, MTU 4092, mlx5_core at 0000:17:00.0, "
                 "NUMA 0, RDMA mlx5_0",
                 "veth9      ethernet (virtual), up, 10 Gb/s, MTU 1500",
                 "mlx5_core at 0000:17:00.1, NUMA 0, RDMA mlx5_1, ECN np on 3, ECN rp on 3\n",
                 "RDMA:   mlx5_0 port 1: InfiniBand, ACTIVE, 400 Gb/s, 128 GIDs at "
                 "0000:17:00.0, NUMA 0",
                 "mlx5_1 port 1: RoCE, DOWN, 100 Gb/s, 255 GIDs"):
        assert line in shown, (line, shown)
    # its InfiniBand port is ACTIVE: it carries fabric=ib, a node of TCP
    # alone none; --fabric places by it
    agent(t, procs, "n2", os.path.join(workdir, "w2"), "--fake-gpus", "1xH100")
    t.wait_nodes_up(2)
    labels = {n["name"]: n["labels"] for n in t.json("nodes")["nodes"]}
    assert labels == {"n1": {"fabric": "ib", "gpu": "H100"}, "n2": {"gpu": "H100"}}, labels
    jid = t.submit("--fabric", "ib", "-G", "1", "--", "true")
    assert t.job(jid)["request"]["constraint"] == "fabric=ib"
    t.run("wait", jid, timeout=60)
    assert t.job(jid)["attempts"][0]["nodes"][0]["name"] == "n1"
    jid = t.submit("--fabric", "rdma", "-C", "gpu=H100|gpu=A100", "-G", "1", "--", "true")
    assert t.job(jid)["request"]["constraint"] == \
        "gpu=H100&fabric=ib|gpu=H100&fabric=roce|gpu=A100&fabric=ib|gpu=A100&fabric=roce"
    t.run("wait", jid, timeout=60)
    assert t.job(jid)["attempts"][0]["nodes"][0]["name"] == "n1"
    p = t.run("submit", "--fabric", "opa", "--", "true", check=False)
    assert p.returncode != 0 and "--fabric: expected ib (InfiniBand), roce or rdma" in p.stderr, \
        p.stderr
    nccl_check(t, workdir)


# A job's stand-in for NCCL (no GPU here): it writes, where NCCL_DEBUG_FILE
# says (%h its host, %p its pid), the lines NCCL writes when two nodes'
# ranks connect over sockets, says what it was given, and runs until told.
NCCL_JOB = r"""
import os, socket, sys, time
out = sys.argv[1]
with open(f"{out}/env", "w") as f:
    f.write(f"{os.environ.get('NCCL_DEBUG')} {os.environ.get('NCCL_DEBUG_SUBSYS')} "
            f"{os.environ.get('NCCL_DEBUG_FILE')}\n")
path = os.environ.get("NCCL_DEBUG_FILE")
if path:
    h, p = socket.gethostname(), os.getpid()
    with open(path.replace("%h", h).replace("%p", str(p)), "w") as f:
        for line in ("NET/IB : No device found.", "Using network Socket",
                     "Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
                     "Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
                     "Channel 00 : 1[1] -> 0[0] via SHM/direct/direct"):
            f.write(f"{h}:{p}:{p + 5} [0] NCCL INFO {line}\n")
for _ in range(600):
    if os.path.exists(f"{out}/go"):
        break
    time.sleep(0.1)
"""


def nccl_check(t, workdir):
    """--nccl-check: the agent gives the tasks NCCL_DEBUG=INFO and a file
    of its own, reads what NCCL wrote there and the server keeps it with
    the attempt's node: on n1 (InfiniBand ACTIVE) connections between nodes
    over sockets are a fall back, said in tenk show, /metrics and the
    server's log; on n2 (TCP alone) they are what it has. A job without
    the flag gets no NCCL_DEBUG."""
    import sys
    got = {}
    for node in ("n1", "n2", "plain"):
        out = os.path.join(workdir, f"nccl-{node}")
        os.mkdir(out)
        flags = ["--nccl-check"] if node != "plain" else []
        jid = t.submit("-w", "n1" if node == "plain" else node, "-G", "1", *flags, "--",
                       sys.executable, "-c", NCCL_JOB, out)
        got[node] = (jid, out)
    for node in ("n1", "n2"):
        jid, out = got[node]
        wait_for(lambda: (t.job(jid)["attempts"] or [{}])[0].get("nodes", [{}])[0]
                 .get("nccl"), 30, f"NCCL's transports of the job on {node}")
        nc = t.job(jid)["attempts"][0]["nodes"][0]["nccl"]
        assert nc["connections"] == {"socket": 2, "shm": 1} and nc["network"] == "Socket", nc
        assert nc["line"] == "Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0", nc
        assert nc["fallback"] == (node == "n1"), nc
        env = open(os.path.join(out, "env")).read().split()
        assert env[:2] == ["INFO", "INIT,NET"] and env[2].endswith("/nccl.%h.%p"), env
    jid = got["n1"][0]
    shown = t.run("show", jid).stdout
    assert "NCCL: 2 between nodes (0 over RDMA, 2 over sockets), 0 P2P, 1 SHM; network " \
        "Socket" in shown, shown
    assert 'NCCL FELL BACK TO SOCKETS on an RDMA node: "Channel 00/0 : 0[0] -> 1[0] [send] ' \
        'via NET/Socket/0"' in shown, shown
    assert "FELL BACK" not in t.run("show", got["n2"][0]).stdout
    st, text = t.api("GET", "/metrics")
    assert f'tenk_job_nccl_socket_connections{{job_id="{jid}",node="n1"}} 2' in text, \
        [ln for ln in text.splitlines() if "nccl" in ln]
    assert f"job {jid} attempt 1: NCCL on node n1 went between nodes over sockets on 2 of 2 " \
        "connections though the node has RDMA (fabric=ib)" in open(
            os.path.join(workdir, "server.log")).read()
    # the plain job runs on n1 once the first is done
    for node, (jid, out) in got.items():
        open(os.path.join(out, "go"), "w").close()
        t.run("wait", jid, timeout=60)
        assert t.job(jid)["state"] == "COMPLETED", t.job(jid)
    assert open(os.path.join(got["plain"][1], "env")).read().split() == ["None"] * 3
    assert "nccl" not in t.job(got["plain"][0])["attempts"][0]["nodes"][0]


def test_fabric_of_namespace_hosts(hosts3, workdir, kill_all):
    """On hosts made as network namespaces, each agent reports its own
    veth, up, at its MTU: one set to 1400 says so. (The hosts share this
    machine's mounts, so each gets a sysfs mounted from inside its
    namespace, which shows that namespace's interfaces, as a node's own
    /sys does.)"""
    ip("-n", hosts3.names[2], "link", "set", "eth0", "mtu", "1000")
    mounts = {}
    try:
        for h in (1, 2):
            mounts[h] = os.path.join(workdir, f"sys{h}")
            os.mkdir(mounts[h])
            subprocess.run(hosts3.cmd(h, ["mount", "-t", "sysfs", "sysfs", mounts[h]]),
                           check=True)
        c = MultiHost(workdir, hosts3, fake="1xH100",
                      agent_env={h: {"TENK_SYSFS": m} for h, m in mounts.items()})
        kill_all += c.daemons
        nets = {n["name"]: {i["name"]: i for i in n["network"]["interfaces"]}
                for n in c.json("nodes")["nodes"]}
        c.stop_all()
    finally:
        for m in mounts.values():
            subprocess.run(["umount", m], check=False)
    assert sorted(nets) == ["host1", "host2"], nets
    for h, mtu in (("host1", 1500), ("host2", 1000)):
        eth = nets[h]["eth0"]
        assert eth["kind"] == "ethernet" and eth["virtual"] and eth["up"], eth
        assert eth["mtu"] == mtu, (h, eth)
        assert sorted(nets[h]) == ["eth0"], nets[h]  # its own; no loopback


def validate_network(sysfs, **env):
    p = subprocess.run([BIN, "validate", "--layers", "network,compute", "--quick", "--json"],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, TENK_SYSFS=sysfs, **env))
    for mark in SANITIZER_MARKS:
        assert mark not in p.stderr, p.stderr
    return p, {c["check"]: c for c in json.loads(p.stdout)["checks"]}


def test_network_layer_of_a_recorded_tree(workdir):
    """tenk validate's network layer on the recorded InfiniBand node: the
    RoCE port that is down fails rdma_ports and, with its interface down,
    net_links, naming them; NCCL_IB_DISABLE fails nccl_env there; the layer
    failing, compute is not run. A node whose fabric is all up passes."""
    sysfs = os.path.join(workdir, "sys")
    ib_node_tree(sysfs)
    p, c = validate_network(sysfs, NCCL_IB_DISABLE="1")
    assert p.returncode == 1, p.stdout + p.stderr
    assert [k for k in c if c[k]["layer"] != "network"] == [], c  # stopped before compute
    links = c["net_links"]
    assert links["verdict"] == "FAIL" and links["figure"] == 2, links
    assert links["detail"].startswith("down, with an RDMA device on it: enp23s0f1np1 (mlx5_1)")
    assert "ib0 up 400 Gb/s MTU 4092" in links["detail"], links
    r = c["rdma_ports"]
    assert (r["verdict"], r["figure"], r["threshold"]) == ("FAIL", 1, 2), r
    assert r["detail"] == "not active: mlx5_1 port 1 DOWN; active: mlx5_0/1 IB 400 Gb/s", r
    n = c["nccl_env"]
    assert n["verdict"] == "FAIL", n
    assert n["detail"] == ("NCCL_IB_DISABLE=1 forces NCCL onto sockets though mlx5_0 port 1 "
                           "is active: unset it"), n
    assert c["net_mtu"]["verdict"] in ("pass", "skip"), c["net_mtu"]
    rate = c["rdma_rate"]  # the slowest port ACTIVE: held to the peers' (none here)
    assert (rate["verdict"], rate["figure"]) == ("pass", 400), rate
    assert rate["detail"] == "mlx5_0 port 1, the slowest ACTIVE", rate
    # RoCE's ECN as its driver says it, alike on the node's RoCE ports (one
    # here) and held to the peers' (none here); PFC not said by a tree
    for point in ("np", "rp"):
        ecn = c[f"roce_ecn_{point}"]
        assert (ecn["verdict"], ecn["figure"], ecn["unit"]) == ("pass", 1 << 3, "bits"), ecn
        assert ecn["detail"] == f"enp23s0f1np1 (mlx5_1) ECN {point} on priority 3", ecn
    pfc = c["roce_pfc"]
    assert pfc["verdict"] == "skip", pfc
    assert pfc["detail"] == "skipped: the driver of 1 RoCE interface says no PFC (no DCB)", pfc
    # the RoCE port up: the layer passes, and NCCL's sockets interface alone
    # is no fault
    for path, text in (("class/net/enp23s0f1np1/operstate", "up"),
                       ("class/infiniband/mlx5_1/ports/1/state", "4: ACTIVE")):
        with open(os.path.join(sysfs, path), "w") as f:
            f.write(text + "\n")
    p, c = validate_network(sysfs, NCCL_SOCKET_IFNAME="eno1")
    assert c["net_links"]["verdict"] == "pass" and c["rdma_ports"]["verdict"] == "pass", c
    assert c["nccl_env"]["verdict"] == "pass", c["nccl_env"]
    assert "NCCL_SOCKET_IFNAME=eno1 picks the sockets' interface only" in \
        c["nccl_env"]["detail"], c["nccl_env"]
    assert "cpu_sgemm" in c  # the layer passed: compute ran
    assert c["rdma_rate"]["figure"] == 100, c["rdma_rate"]  # the RoCE port's, now
    # no RDMA at all: those checks are skipped
    os.rename(os.path.join(sysfs, "class", "infiniband"), os.path.join(sysfs, "ib-gone"))
    p, c = validate_network(sysfs, NCCL_IB_DISABLE="1")
    assert c["rdma_ports"]["verdict"] == "skip" and c["nccl_env"]["verdict"] == "skip", c
    assert c["rdma_rate"]["verdict"] == "skip", c


def test_network_layer_names_the_odd_mtu(hosts4, workdir, kill_all):
    """tenk validate --nodes: host3's link at MTU 1000 among 1500s fails the
    network layer there, naming the interface; the others pass; host3 is
    drained for it."""
    ip("-n", hosts4.names[3], "link", "set", "eth0", "mtu", "1000")
    c = MultiHost(workdir, hosts4, fake="1xH100")
    kill_all += c.daemons
    p = c.run("validate", "--nodes", "host[1-3]", "--quick", "--layers", "system,network",
              "--json", check=False, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    out = json.loads(p.stdout)
    verdicts = {n["node"]: n["validation"] for n in out["nodes"]}
    assert verdicts["host1"]["verdict"] == "pass" and verdicts["host2"]["verdict"] == "pass", \
        verdicts
    bad = verdicts["host3"]
    assert bad["verdict"] == "fail" and bad["layer"] == "network", bad
    mtu = {k["check"]: k for k in bad["checks"]}["net_mtu"]
    assert mtu["verdict"] == "FAIL" and mtu["figure"] == 1000, mtu
    assert mtu["detail"].startswith("eth0 (10.") and \
        mtu["detail"].endswith(": MTU 1000; 2 of 3 nodes have 1500"), mtu
    good = {k["check"]: k for k in verdicts["host1"]["checks"]}["net_mtu"]
    assert good["verdict"] == "pass" and good["figure"] == 1500, good
    assert good["detail"].endswith("(as 2 of 3 nodes; 1 differ)"), good
    wait_for(lambda: c.json("nodes", "host3")[0]["drain_source"] == "validation", 30,
             "host3 drained")
    c.stop_all()


HCA_JOB = r"""
import os, sys
with open(os.path.join(sys.argv[1], os.environ["RANK"]), "w") as f:
    f.write(f"{os.environ['CUDA_VISIBLE_DEVICES']} {os.environ.get('NCCL_IB_HCA')}\n")
"""


def test_ranks_get_the_hca_nearest_their_gpus(workdir, procs):
    """On the recorded 8-GPU InfiniBand node (tests/data/sysfs/ib-8gpu)
    with eight GPUs, the agent places each GPU on the PCI tree and finds
    the ACTIVE RDMA port behind the same PCIe switch; each task gets
    NCCL_IB_HCA for its own GPUs' ports (exactly: "=mlx5_3:1"), a job that
    sets NCCL_IB_HCA keeps its own, and tenk nodes NAME shows the places."""
    import sys
    tree = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "data", "sysfs", "ib-8gpu")
    s, t = cluster(workdir, procs)
    agent(t, procs, "n1", os.path.join(workdir, "w1"), "--fake-gpus", "8xH100",
          env={"TENK_SYSFS": tree})
    t.wait_nodes_up(1)
    gpus = t.json("nodes", "n1")[0]["network"]["gpus"]
    assert [g["hca"] for g in gpus] == [f"mlx5_{i}:1" for i in range(8)], gpus
    assert gpus[4] == {"index": 4, "pci": "0000:9d:00.0", "numa": 1, "hca": "mlx5_4:1",
                       "shared_bridges": 2}, gpus[4]
    shown = t.run("nodes", "n1").stdout
    assert "Near:   GPU 0 at 0000:1b:00.0, NUMA 0: mlx5_0:1, behind a PCIe bridge they " \
        "share" in shown, shown
    out = os.path.join(workdir, "hca")
    os.mkdir(out)
    jid = t.submit("-n", "4", "--gpus-per-task", "2", "--", sys.executable, "-c", HCA_JOB, out)
    t.run("wait", jid, timeout=60)
    assert t.job(jid)["state"] == "COMPLETED", t.job(jid)
    for rank in range(4):
        devs, hca = open(os.path.join(out, str(rank))).read().split()
        want = "=" + ",".join(f"mlx5_{d}:1" for d in devs.split(","))
        assert hca == want, (rank, devs, hca)
    own = os.path.join(workdir, "own")
    os.mkdir(own)
    jid = t.submit("-n", "1", "--gpus-per-task", "1", "--", sys.executable, "-c", HCA_JOB, own,
                   env=dict(t.env(), NCCL_IB_HCA="mlx5_7"))
    t.run("wait", jid, timeout=60)
    assert open(os.path.join(own, "0")).read().split()[1] == "mlx5_7"


CPU_JOB = r"""
import os, sys, time
with open(sys.argv[1], "w") as f:
    cpus = [ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("Cpus_allowed_list")]
    f.write(f"{os.environ['CUDA_VISIBLE_DEVICES']} {cpus[0]}\n")
while len(sys.argv) > 2 and not os.path.exists(sys.argv[2]):
    time.sleep(0.1)
"""


def test_cpus_held_near_the_gpus(workdir, procs):
    """A job's reserved CPUs come from its GPUs' NUMA node first: the
    recorded 8-GPU tree, its two NUMA nodes given this machine's CPUs 0 and
    1. With GPUs 0-3 (NUMA 0) held by a job that reserves no CPU, a job on
    GPUs 4-7 (NUMA 1) with one CPU is held to CPU 1, not the first free
    one; then a job on GPUs 0-3 with one CPU gets CPU 0."""
    import shutil
    import sys
    if os.cpu_count() < 2 or not os.path.isdir("/sys/fs/cgroup/cpuset"):
        import pytest
        pytest.skip("needs two CPUs and the cpuset controller (cgroup v1) for the agent's "
                    "cpusets")
    tree = os.path.join(workdir, "sys")
    shutil.copytree(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                 "data", "sysfs", "ib-8gpu"), tree, symlinks=True)
    for node in (0, 1):
        with open(os.path.join(tree, f"devices/system/node/node{node}/cpulist"), "w") as f:
            f.write(f"{node}\n")
    s, t = cluster(workdir, procs)
    agent(t, procs, "n1", os.path.join(workdir, "w1"), "--fake-gpus", "8xH100",
          env={"TENK_SYSFS": tree})
    t.wait_nodes_up(1)
    out = {k: os.path.join(workdir, k) for k in ("first", "near", "again", "go")}
    first = t.submit("-G", "4", "--", sys.executable, "-c", CPU_JOB, out["first"], out["go"])
    wait_for(lambda: os.path.exists(out["first"]), 30, "the first job")
    near = t.submit("-G", "4", "-c", "1", "--", sys.executable, "-c", CPU_JOB, out["near"])
    t.run("wait", near, timeout=60)
    assert open(out["near"]).read().split() == ["4,5,6,7", "1"], open(out["near"]).read()
    assert open(out["first"]).read().split()[0] == "0,1,2,3"
    open(out["go"], "w").close()
    t.run("wait", first, timeout=60)
    again = t.submit("-G", "4", "-c", "1", "-w", "n1", "--", sys.executable, "-c", CPU_JOB,
                     out["again"])
    t.run("wait", again, timeout=60)
    assert open(out["again"]).read().split()[1] == "0", open(out["again"]).read()
