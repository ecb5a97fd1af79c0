"""Bash completion (contrib/bash-completion/tenk, installed by make
install): commands from `tenk help`, a command's options from its --help,
job ids from the cluster's queue, in a real bash."""
import os
import subprocess

from conftest import BIN, ROOT

SCRIPT = os.path.join(ROOT, "contrib", "bash-completion", "tenk")


def complete(t, *words):
    """What bash offers for the last of words (tenk WORDS...)."""
    line = " ".join(f"'{w}'" for w in words)
    prog = (f"source '{SCRIPT}'; COMP_WORDS=(tenk {line}); COMP_CWORD={len(words)}; "
            "_tenk; printf '%s\\n' \"${COMPREPLY[@]}\"")
    env = dict(t.env())
    env["PATH"] = os.path.dirname(BIN) + ":" + env.get("PATH", "/usr/bin:/bin")
    p = subprocess.run(["bash", "--norc", "-c", prog], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    return [w for w in p.stdout.splitlines() if w]


def test_bash_completes_commands_options_and_jobs(cluster):
    t = cluster
    assert complete(t, "qu") == ["queue", "queues"]
    assert "submit" in complete(t, "") and "validate" in complete(t, "")
    assert complete(t, "queue", "--st") == ["--start", "--state"]
    assert "--array-throttle" in complete(t, "update", "--arr")
    assert complete(t, "help", "sub") == ["submit"]
    a = t.submit("-H", "--", "true")
    b = t.submit("-H", "--", "true")
    assert {str(a), str(b)} <= set(complete(t, "cancel", ""))
    assert complete(t, "show", str(b)) == [str(b)]
    t.run("cancel", a, b)


def test_make_install_puts_it_where_bash_completion_looks(tmp_path):
    # the rule as make would run it (-n: printed, not run; the build it
    # depends on is the suite's own)
    p = subprocess.run(["make", "-n", "install", f"DESTDIR={tmp_path}", "PREFIX=/usr"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "contrib/bash-completion/tenk" in p.stdout, p.stdout
    assert f"{tmp_path}/usr/share/bash-completion/completions/tenk" in p.stdout, p.stdout
