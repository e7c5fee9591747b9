#!/usr/bin/python3
"""Prompt latency of two or more prov installations side by side: an
interactive shell on a pty per installation plus a plain one, as USER, each
typed the same lines in turn (PAUSE_MS after its prompt, default 100), so
the machine's drift hits each alike. Prints, per command, the added
prompt-to-prompt time (median) and the added CPU time of the shell process
itself per line (from /proc/PID/schedstat: the shell's and the shim's own
work, which varies far less from run to run than wall time does). The
shell's CPU includes what the shim does after the prompt is out (the end of
the record, handing the observation back), which a typed line does not wait
for.

    sudo benches/compare_prompt.py N SHELL USER PREFIX1 [PREFIX2 ...]
"""
import os
import pwd
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (PtyShell, write_shell_rc)

COMMANDS = ["true", "/bin/true"]
WARM_UP = 10


def shell_cpu_ms(pid):
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e6


def start(shell, user, prefix):
    pw = pwd.getpwnam(user)
    home = tempfile.mkdtemp(prefix="prov-compare-prompt-", dir="/var/tmp")
    os.chmod(home, 0o755)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    bench.write_shell_rc(home, shell, prefix and f"{prefix}/bin/prov", pw.pw_uid, pw.pw_gid)
    argv = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups", "env", "-i",
            f"HOME={home}", "PATH=/usr/bin:/bin", "TERM=dumb", f"/bin/{shell}", "-i"]
    sh = bench.PtyShell(argv, home, prefix or f"plain {shell}")
    sh.wait_prompt()
    return sh


def main():
    if len(sys.argv) < 5:
        sys.exit("usage: benches/compare_prompt.py N SHELL USER PREFIX1 [PREFIX2 ...]")
    n, shell, user, prefixes = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    pause = float(os.environ.get("PAUSE_MS", "100")) / 1e3
    modes = [None] + prefixes
    shells = {m: start(shell, user, m) for m in modes}
    wall = {(c, m): [] for c in COMMANDS for m in modes}
    cpu = {(c, m): [] for c in COMMANDS for m in modes}
    try:
        for i in range(n + WARM_UP):
            for command in COMMANDS:
                # Each mode goes first in turn.
                for m in modes[i % len(modes):] + modes[:i % len(modes)]:
                    sh = shells[m]
                    before = shell_cpu_ms(sh.pid)
                    t = sh.line(command, pause)
                    used = shell_cpu_ms(sh.pid) - before
                    if i >= WARM_UP:
                        wall[(command, m)].append(t * 1e3)
                        cpu[(command, m)].append(used)
    finally:
        for sh in shells.values():
            sh.close()
    for command in COMMANDS:
        base_wall = statistics.median(wall[(command, None)])
        base_cpu = statistics.median(cpu[(command, None)])
        print(f"{shell} `{command}`, {n} lines typed {pause * 1e3:.0f} ms after the prompt: "
              f"plain {base_wall:.3f} ms, shell CPU {base_cpu:.3f} ms")
        for m in prefixes:
            print(f"  {m}: added {statistics.median(wall[(command, m)]) - base_wall:+.3f} ms, "
                  f"shell CPU {statistics.median(cpu[(command, m)]) - base_cpu:+.3f} ms")


if __name__ == "__main__":
    main()
