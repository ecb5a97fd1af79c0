"""The README's commands, run as written: every fenced shell block of
README.md marked `<!-- runnable -->` runs in bash (-e, pipefail) on a fresh
`tenk up`, from another folder, with no TENK_* variable set (the CLI finds
the cluster `tenk up` made current), and must exit 0; so the README cannot
drift from the program again."""
import os
import re
import subprocess

from conftest import BIN, ROOT, SANITIZER_MARKS, start_up

RUNNABLE = re.compile(r"^<!-- runnable -->\n```sh\n(.*?)^```", re.S | re.M)


def test_readme_runnable_blocks_run(workdir):
    blocks = RUNNABLE.findall(open(os.path.join(ROOT, "README.md")).read())
    assert blocks, "README.md has no block marked <!-- runnable -->"
    conf = os.path.join(workdir, "conf")
    t, d = start_up(workdir, env={"XDG_CONFIG_HOME": conf}, fake="8xH100")
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TENK_")}
        env["XDG_CONFIG_HOME"] = conf
        env["PATH"] = os.path.dirname(BIN) + ":" + env.get("PATH", "/usr/bin:/bin")
        elsewhere = os.path.join(workdir, "elsewhere")
        os.makedirs(elsewhere)
        for block in blocks:
            p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], cwd=elsewhere,
                               env=env, capture_output=True, text=True, timeout=300)
            for mark in SANITIZER_MARKS:
                assert mark not in p.stderr, p.stderr
            assert p.returncode == 0, f"README block exited {p.returncode}:\n{block}\n" \
                f"--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"
            assert p.stdout.strip(), block  # it said something
    finally:
        d.stop()
