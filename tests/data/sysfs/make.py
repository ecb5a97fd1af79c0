#!/usr/bin/python3
"""Writes the recorded sysfs trees of README.md under the folder given
(tests/data/sysfs): python3 tests/data/sysfs/make.py tests/data/sysfs"""
import os, sys
ROOT = sys.argv[1]

def write(root, files, links):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text + "\n")
    for path, target in links.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.lexists(full):
            os.remove(full)
        os.symlink(target, full)

def ib_node(root):
    files, links = {}, {}
    # eight GPU/HCA pairs, each pair behind one PCIe switch (bus numbers
    # as an 8-GPU HGX board lays them out); the first four on NUMA node 0
    hca_bus = [0x18, 0x40, 0x4f, 0x5e, 0x9a, 0xc0, 0xce, 0xdc]
    gpu_bus = [0x1b, 0x43, 0x52, 0x61, 0x9d, 0xc3, 0xd1, 0xdf]
    for i, (hb, gb) in enumerate(zip(hca_bus, gpu_bus)):
        numa = 0 if i < 4 else 1
        rootc = f"pci0000:{hb - 3:02x}"
        up = f"devices/{rootc}/0000:{hb - 3:02x}:01.0/0000:{hb - 2:02x}:00.0"
        hca = f"{up}/0000:{hb - 1:02x}:00.0/0000:{hb:02x}:00.0"
        gpu = f"{up}/0000:{hb - 1:02x}:01.0/0000:{gb:02x}:00.0"
        dev, ifn = f"mlx5_{i}", f"ibp{hb}s0"
        files.update({
            f"{hca}/numa_node": str(numa), f"{hca}/vendor": "0x15b3", f"{hca}/device": "0x1021",
            f"{hca}/class": "0x020700", f"{hca}/infiniband/{dev}/node_type": "1: CA",
            f"{gpu}/numa_node": str(numa), f"{gpu}/vendor": "0x10de", f"{gpu}/device": "0x2330",
            f"{gpu}/class": "0x030200",
            f"class/net/{ifn}/type": "32", f"class/net/{ifn}/operstate": "up",
            f"class/net/{ifn}/speed": "400000", f"class/net/{ifn}/mtu": "4092",
            f"class/infiniband/{dev}/ports/1/link_layer": "InfiniBand",
            f"class/infiniband/{dev}/ports/1/state": "4: ACTIVE",
            f"class/infiniband/{dev}/ports/1/phys_state": "5: LinkUp",
            f"class/infiniband/{dev}/ports/1/rate": "400 Gb/sec (4X NDR)",
        })
        for g in range(8):
            files[f"class/infiniband/{dev}/ports/1/gids/{g}"] = \
                "fe80:0000:0000:0000:a088:c203:00%02x:%04x" % (i, g) if g == 0 else \
                "0000:0000:0000:0000:0000:0000:0000:0000"
        links.update({
            f"class/net/{ifn}/device": f"../../../{hca}",
            f"class/infiniband/{dev}/device": f"../../../{hca}",
            f"{hca}/driver": "../../../../../../bus/pci/drivers/mlx5_core",
            f"{gpu}/driver": "../../../../../../bus/pci/drivers/nvidia",
        })
    mgmt = "devices/pci0000:00/0000:00:1c.4/0000:07:00.0"
    files.update({
        f"{mgmt}/numa_node": "0", f"{mgmt}/vendor": "0x8086", f"{mgmt}/class": "0x020000",
        "class/net/eno1/type": "1", "class/net/eno1/operstate": "up",
        "class/net/eno1/speed": "10000", "class/net/eno1/mtu": "1500",
        "class/net/docker0/type": "1", "class/net/docker0/operstate": "down",
        "class/net/docker0/mtu": "1500",
        "class/net/lo/type": "772", "class/net/lo/operstate": "unknown", "class/net/lo/mtu": "65536",
        # two sockets of 56 cores, two threads each
        "devices/system/node/node0/cpulist": "0-55,112-167",
        "devices/system/node/node1/cpulist": "56-111,168-223",
    })
    links.update({
        "class/net/eno1/device": f"../../../{mgmt}",
        f"{mgmt}/driver": "../../../../bus/pci/drivers/i40e",
    })
    write(root, files, links)

def roce_node(root):
    files, links = {}, {}
    fn = ["devices/pci0000:40/0000:40:01.1/0000:41:00.0",
          "devices/pci0000:40/0000:40:01.1/0000:41:00.1"]
    for i, f in enumerate(fn):
        dev, ifn = f"mlx5_{i}", f"ens1f{i}np{i}"
        files.update({
            f"{f}/numa_node": "1", f"{f}/vendor": "0x15b3", f"{f}/device": "0x101d",
            f"{f}/class": "0x020000", f"{f}/infiniband/{dev}/node_type": "1: CA",
            f"class/net/{ifn}/type": "1", f"class/net/{ifn}/operstate": "up",
            f"class/net/{ifn}/speed": "100000", f"class/net/{ifn}/mtu": "9000",
            f"class/infiniband/{dev}/ports/1/link_layer": "Ethernet",
            f"class/infiniband/{dev}/ports/1/state": "4: ACTIVE",
            f"class/infiniband/{dev}/ports/1/phys_state": "5: LinkUp",
            f"class/infiniband/{dev}/ports/1/rate": "100 Gb/sec (4X EDR)",
        })
        # RoCE's GID table: v1 and v2 entries of the link-local address and
        # of the port's IPv4 address, the rest zero
        gids = ["fe80:0000:0000:0000:0e42:a1ff:fe%02x:%04x" % (i, 0x5a00 + i)] * 2 + \
               ["0000:0000:0000:0000:0000:ffff:0a%02x:%04x" % (i, 0x0007)] * 2 + \
               ["0000:0000:0000:0000:0000:0000:0000:0000"] * 4
        for g, text in enumerate(gids):
            files[f"class/infiniband/{dev}/ports/1/gids/{g}"] = text
        # RoCE ECN as MLNX_OFED's and DOCA's mlx5 expose it, on priority 3
        # (the lossless one of NVIDIA's RoCE guides), both points
        for point in ("roce_np", "roce_rp"):
            for k in range(8):
                files[f"class/net/{ifn}/ecn/{point}/enable/{k}"] = "1" if k == 3 else "0"
        links.update({
            f"class/net/{ifn}/device": f"../../../{f}",
            f"class/infiniband/{dev}/device": f"../../../{f}",
            f"{f}/driver": "../../../../bus/pci/drivers/mlx5_core",
        })
    mgmt = "devices/pci0000:00/0000:00:1c.0/0000:03:00.0"
    files.update({
        f"{mgmt}/numa_node": "0", f"{mgmt}/vendor": "0x8086", f"{mgmt}/class": "0x020000",
        "class/net/eno1/type": "1", "class/net/eno1/operstate": "up",
        "class/net/eno1/speed": "1000", "class/net/eno1/mtu": "1500",
        "class/net/lo/type": "772", "class/net/lo/operstate": "unknown", "class/net/lo/mtu": "65536",
    })
    links.update({
        "class/net/eno1/device": f"../../../{mgmt}",
        f"{mgmt}/driver": "../../../../bus/pci/drivers/igb",
    })
    write(root, files, links)

ib_node(os.path.join(ROOT, "ib-8gpu"))
roce_node(os.path.join(ROOT, "roce"))
