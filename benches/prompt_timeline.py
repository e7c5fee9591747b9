#!/usr/bin/python3
"""The path from the Enter key to the next prompt, segment by segment: an
interactive bash or zsh on a pty, as USER, is typed COMMAND N times (each
line PAUSE_MS after its prompt appeared), once plain and once with prov
(`eval "$(PREFIX/bin/prov init SHELL)"`), under `perf record` of the
scheduler's events. Each line is cut into segments at the shell's fork, the
execs of its child (the join helper, then the program), the child's exit and
the prompt's arrival; the time the shell was runnable but another task had
its CPU (preempted) is counted apart. Prints the median of each segment.

    sudo benches/prompt_timeline.py USER PREFIX [SHELL] [N] [COMMAND]

Defaults: bash, 40 lines, /bin/true; PAUSE_MS=100 in the environment
changes the pause. Needs perf (linux-perf) and runs as root. Nothing is
asserted: this is for reading where the time goes (benches/README.md).
"""
import os
import pwd
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (PtyShell)

PROMPT = b"@@prov-timeline@@ "
EVENTS = ["sched:sched_switch", "sched:sched_wakeup", "sched:sched_process_fork",
          "sched:sched_process_exec", "sched:sched_process_exit"]


def drive(user, prefix, shell, n, command, traced, pause, marks_path):
    """Types the lines; writes "CLOCK_MONOTONIC-start duration-ms" per line.
    Returns the shell's pid."""
    pw = pwd.getpwnam(user)
    home = tempfile.mkdtemp(prefix="prov-timeline-", dir="/var/tmp")
    os.chmod(home, 0o755)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    bench.PROMPT = PROMPT
    bench.write_shell_rc(home, shell, f"{prefix}/bin/prov" if traced else None, pw.pw_uid, pw.pw_gid)
    argv = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups", "env", "-i",
            f"HOME={home}", "PATH=/usr/bin:/bin", "TERM=dumb", f"/bin/{shell}", "-i"]
    sh = bench.PtyShell(argv, home, shell)
    try:
        sh.wait_prompt()
        for _ in range(10):         # warm-up
            sh.line(command, pause)
        with open(marks_path, "w") as marks:
            for _ in range(n):
                time.sleep(pause)
                sh.buf = b""
                start = time.clock_gettime(time.CLOCK_MONOTONIC)
                t0 = time.perf_counter()
                os.write(sh.fd, command.encode() + b"\n")
                sh.wait_prompt()
                marks.write(f"{start:.6f} {(time.perf_counter() - t0) * 1e3:.3f}\n")
        return sh.pid
    finally:
        sh.close()
        shutil.rmtree(home, ignore_errors=True)


LINE = re.compile(r"^\s*(?P<comm>.+?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+\[(?P<cpu>\d+)\]\s+"
                  r"(?P<time>\d+\.\d+):\s+sched:sched_(?P<event>\w+):\s+(?P<rest>.*)$")


def read_events(path):
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,pid,tid,cpu,time,event,trace"],
                         capture_output=True, text=True, check=True).stdout
    events = []
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            events.append((float(m["time"]), m["event"], int(m["tid"]), m["rest"]))
    return events


def child_of(events, shell, start, end):
    """The shell's child for the line: the one it forks (and that runs the command)."""
    for t, ev, tid, rest in events:
        if start <= t <= end and ev == "process_fork" and tid == shell:
            return int(re.search(r"child_pid=(\d+)", rest).group(1))
    return None


def segments(events, shell, start, dur_ms):
    end = start + dur_ms / 1e3
    child = child_of(events, shell, start, end)
    if child is None:
        return None
    marks = {"enter": start, "prompt": end}
    execs = []
    preempted = 0.0
    out_since = None
    for t, ev, tid, rest in events:
        if not start <= t <= end:
            continue
        if ev == "process_fork" and tid == shell and "fork" not in marks:
            marks["fork"] = t
        elif ev == "process_exec" and tid == child:
            execs.append(t)
        elif ev == "process_exit" and tid == child:
            marks["exit"] = t
        elif ev == "switch":
            prev = int(re.search(r"prev_pid=(\d+)", rest).group(1))
            nxt = int(re.search(r"next_pid=(\d+)", rest).group(1))
            if prev == shell and re.search(r"prev_state=R", rest):
                out_since = t
            if nxt == shell and out_since is not None:
                preempted += t - out_since
                out_since = None
    if "fork" not in marks or "exit" not in marks or not execs:
        return None
    seg = {"Enter → fork": marks["fork"] - start}
    if len(execs) >= 2:     # the join helper, then the program
        seg["fork → helper exec"] = execs[0] - marks["fork"]
        seg["helper → program exec"] = execs[-1] - execs[0]
    else:
        seg["fork → program exec"] = execs[0] - marks["fork"]
    seg["program → exit"] = marks["exit"] - execs[-1]
    seg["exit → prompt"] = end - marks["exit"]
    seg["(shell preempted)"] = preempted
    seg["whole line"] = end - start
    return seg


def timeline(user, prefix, shell, n, command, traced, pause):
    work = tempfile.mkdtemp(prefix="prov-timeline-perf-")
    data, marks = os.path.join(work, "perf.data"), os.path.join(work, "marks")
    perf = subprocess.Popen(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-a", "-o", data]
                            + [a for e in EVENTS for a in ("-e", e)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        # setpriv, env and the shell (re-exec'd with the shim) share one pid.
        shell_task = drive(user, prefix, shell, n, command, traced, pause, marks)
    finally:
        perf.send_signal(2)
        perf.wait()
    events = read_events(data)
    lines = [tuple(map(float, l.split())) for l in open(marks)]
    shutil.rmtree(work, ignore_errors=True)
    cut = [s for s in (segments(events, shell_task, start, dur) for start, dur in lines) if s]
    keys = list(dict.fromkeys(k for s in cut for k in s))
    return {k: statistics.median(s.get(k, 0.0) for s in cut) * 1e3 for k in keys}, len(cut)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    user, prefix = sys.argv[1], sys.argv[2]
    shell = sys.argv[3] if len(sys.argv) > 3 else "bash"
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 40
    command = sys.argv[5] if len(sys.argv) > 5 else "/bin/true"
    pause = float(os.environ.get("PAUSE_MS", "100")) / 1e3
    plain, n_plain = timeline(user, prefix, shell, n, command, False, pause)
    traced, n_traced = timeline(user, prefix, shell, n, command, True, pause)
    print(f"{shell}, `{command}` typed {pause * 1e3:g} ms after the prompt; medians in ms "
          f"({n_plain} plain and {n_traced} traced lines cut):")
    print(f"| segment | plain {shell} | with prov |")
    print("|---|---|---|")
    order = ["Enter → fork", "fork → program exec", "fork → helper exec", "helper → program exec",
             "program → exit", "exit → prompt", "(shell preempted)", "whole line"]
    for key in (k for k in order if k in plain or k in traced):
        cell = lambda d: f"{d[key]:.2f}" if key in d else "—"   # noqa: E731
        print(f"| {key} | {cell(plain)} | {cell(traced)} |")


if __name__ == "__main__":
    main()
