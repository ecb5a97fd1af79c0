#!/usr/bin/python3
"""A stand-in for perftest's ib_write_bw and ib_send_lat, for machines
without an RDMA device (as tests/gpushim stands in for CUDA); run by the
names of its links.

It takes the options tenk gives perftest, checks the device and port in
the sysfs tree the agent reads (TENK_SYSFS), and meets its peer over TCP
as perftest does: the server says it waits and listens on -p, the client
connects to the address it is given. Both print perftest's own table (the
formats of perftest's src/perftest_parameters.h: RESULT_FMT_G and
REPORT_FMT, RESULT_FMT_LAT and REPORT_FMT_LAT), whose figure is the lesser
of the two ends' PERFTEST_STANDIN_GBITS (default 93% of the port's rate)
and, for the latency, the greater of their PERFTEST_STANDIN_US (default
1.6)."""
import json
import os
import socket
import sys

TOOL = os.path.basename(sys.argv[0])
LINE = "-" * 87


def fail(msg):
    print(f" {msg}", flush=True)
    sys.exit(1)


def main():
    args = sys.argv[1:]
    opts, rest = {}, []
    takes = {"-d", "-i", "-p", "-D", "-n", "-s", "-x"}
    i = 0
    while i < len(args):
        a = args[i]
        if a in takes:
            if i + 1 >= len(args):
                fail(f"option {a} needs a value")
            opts[a] = args[i + 1]
            i += 2
        elif a in ("-F", "--report_gbits"):
            opts[a] = True
            i += 1
        elif a.startswith("-"):
            fail(f"{TOOL}: invalid option -- '{a}'")
        else:
            rest.append(a)
            i += 1
    dev, port = opts.get("-d"), opts.get("-i", "1")
    sysfs = os.environ.get("TENK_SYSFS", "/sys")
    pdir = os.path.join(sysfs, "class", "infiniband", dev or "?", "ports", port)
    try:
        state = open(os.path.join(pdir, "state")).read()
        rate = float(open(os.path.join(pdir, "rate")).read().split()[0])
    except OSError:
        fail(f"IB device {dev} not found")
    if "ACTIVE" not in state:
        fail(f"Port number {port} state is {state.strip()}")
    gbits = float(os.environ.get("PERFTEST_STANDIN_GBITS", 0.93 * rate))
    us = float(os.environ.get("PERFTEST_STANDIN_US", 1.6))
    tcp = int(opts.get("-p", 18515))
    mine = json.dumps({"gbits": gbits, "us": us}).encode() + b"\n"
    if rest:  # the client
        try:
            s = socket.create_connection((rest[0], tcp), timeout=30)
        except OSError:
            print(f" Couldn't connect to {rest[0]}:{tcp}")
            fail("Unable to open file descriptor for socket connection "
                 "Unable to init the socket connection")
    else:
        print("\n************************************")
        print("* Waiting for client to connect... *")
        print("************************************", flush=True)
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("0.0.0.0", tcp))
        ls.listen(1)
        ls.settimeout(60)
        try:
            s, _ = ls.accept()
        except OSError:
            fail("Unable to init the socket connection")
        ls.close()
    s.settimeout(30)
    s.sendall(mine)
    got = b""
    while not got.endswith(b"\n"):
        b = s.recv(4096)
        if not b:
            fail("Failed to exchange data between server and clients")
        got += b
    s.close()
    theirs = json.loads(got)
    print(LINE)
    if TOOL == "ib_write_bw":
        bw = min(gbits, theirs["gbits"])
        print(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]")
        iters = int(bw * 1e9 / 8 / 65536 * float(opts.get("-D", 5)))
        print(" %-7lu    %-10d       %-7.2f            %-7.2f\t\t     %-7.6f"
              % (65536, iters, 0.0, bw, bw * 1e9 / 8 / 65536 / 1e6))
    else:
        lat = max(us, theirs["us"])
        print(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
              "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
        print(" %-7lu %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t"
              "%-7.2f\t\t%-7.2f \t\t%-7.2f"
              % (2, int(opts.get("-n", 1000)), lat * 0.9, lat * 3, lat, lat * 1.02, 0.1,
                 lat * 1.4, lat * 2.8))
    print(LINE, flush=True)


main()
