"""A cgroup of the test process's own, in every hierarchy.

An agent puts its attempts' cgroups under the cgroup its shims are in, in a
level named after the node (tenk-NODE) and folders named after the job.
Tests all call their node node1 and every fresh server numbers jobs from 1,
so two pytest workers running side by side (pytest-xdist) would make,
kill and remove each other's cgroups. Each worker therefore moves itself
(and so everything it starts) into a cgroup of its own first, below the one
it is in, and back out at the end.
"""
import os
import re

PREFIX = "tenk-tests-"


def _hierarchies():
    """(folder of this process's cgroup, its parent) for each mounted
    hierarchy this process is listed in."""
    mounts = []  # (mount point, root, controllers or None for cgroup2)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(fields) < 5 or len(rfields) < 3:
                continue
            if rfields[0] == "cgroup2":
                mounts.append((fields[4], fields[3], None))
            elif rfields[0] == "cgroup":
                opts = set(rfields[2].split(","))
                mounts.append((fields[4], fields[3], opts))
    out = []
    with open("/proc/self/cgroup") as f:
        for line in f:
            hid, ctrls, path = line.rstrip("\n").split(":", 2)
            names = set(c for c in ctrls.split(",") if c)
            for mp, root, opts in mounts:
                if (opts is None and hid == "0" and not names) or \
                        (opts is not None and names and names <= opts):
                    rel = path[len(root):] if root != "/" and path.startswith(root) else path
                    here = os.path.join(mp, rel.lstrip("/"))
                    out.append((here, mp))
                    break
    return out


def _remove_tree(d):
    """Removes d and the empty cgroups below it, deepest first; a cgroup
    that still holds a process stays."""
    for sub, dirs, _ in os.walk(d, topdown=False):
        try:
            os.rmdir(sub)
        except OSError:
            pass


def _stale(parent):
    """Removes the cgroups of test processes that are gone."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for n in names:
        m = re.fullmatch(PREFIX + r"(\d+)", n)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            _remove_tree(os.path.join(parent, n))


def enter():
    """Moves this process into PREFIX<pid> below its cgroup in each
    hierarchy it can write; returns [(made, parent)] for leave()."""
    made = []
    if os.geteuid() != 0:
        return made
    name = PREFIX + str(os.getpid())
    for here, _ in _hierarchies():
        if os.path.basename(here) == name or not os.path.isdir(here):
            continue
        _stale(here)
        mine = os.path.join(here, name)
        try:
            os.makedirs(mine, exist_ok=True)
            for f in ("cpuset.cpus", "cpuset.mems"):  # v1 cpusets start empty
                if os.path.exists(os.path.join(mine, f)):
                    with open(os.path.join(here, f)) as src:
                        value = src.read().strip()
                    with open(os.path.join(mine, f), "w") as dst:
                        dst.write(value)
            with open(os.path.join(mine, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError:
            _remove_tree(mine)
            continue
        made.append((mine, here))
    return made


def leave(made):
    """Moves this process back where enter() found it and removes what
    enter() made (whatever of it no process holds)."""
    for mine, parent in made:
        try:
            with open(os.path.join(parent, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError:
            continue
        _remove_tree(mine)
