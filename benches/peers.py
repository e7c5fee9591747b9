"""The other provenance collectors prov is measured against (benches/bench.py):
how each is installed here, how it wraps a command, and how many files its
record names. Python 3 stdlib only.

Each collector keeps its record in the run's own HOME (on disk), as prov
keeps its database there: a tracer that throws its record away is not a
collector, so strace writes its log to a file too.
"""

import os
import re
import sqlite3
import subprocess
import tarfile

# PyPI's reprozip, in a venv of its own (Debian 12 does not package it).
VENV = os.environ.get("PROV_BENCH_PEER_VENV", "/opt/prov-bench-venv")
REPROZIP = os.path.join(VENV, "bin", "reprozip")

# Record locations inside the run's HOME.
STRACE_LOG = "strace.log"
REPROZIP_DIR = "reprozip-trace"
CARE_ARCHIVE = "care.tar"
RR_DIR = "rr-trace"



def argv(mode, home):
    """The command prefix of a peer collector's mode."""
    if mode == "strace":
        return ["strace", "-f", "-e", "trace=%file,%process", "-o", os.path.join(home, STRACE_LOG)]
    if mode == "reprozip":
        # Usage statistics off: nothing leaves the machine, no prompt.
        return ["env", "REPROZIP_USAGE_STATS=off", REPROZIP, "trace", "--dir", os.path.join(home, REPROZIP_DIR)]
    if mode == "care":
        # proot's seccomp mode, which CARE uses by default, kills the traced
        # program with SIGSEGV right after its loader maps libc on this kernel
        # (6.18); without it every system call stops in CARE.
        return ["env", "PROOT_NO_SECCOMP=1", "care", f"--output={os.path.join(home, CARE_ARCHIVE)}", "--verbose=-1"]
    if mode == "rr":
        return ["rr", "record", "--output-trace-dir", os.path.join(home, RR_DIR)]
    raise KeyError(mode)


def ensure_reprozip(log):
    """Installs reprozip from PyPI into VENV once; returns None, or why it
    cannot run."""
    # The bench user runs it: a venv of root's own Python (pyenv under
    # /root) is not executable for that user, so it is made from Debian's.
    python = os.path.join(VENV, "bin", "python3")
    if os.path.exists(VENV) and not os.path.realpath(python).startswith("/usr/"):
        subprocess.run(["rm", "-rf", VENV])
    if not os.path.exists(REPROZIP):
        log(f"pip install reprozip into {VENV} (once)")
        r = subprocess.run(["/usr/bin/python3", "-m", "venv", VENV], capture_output=True, text=True)
        if r.returncode == 0:
            r = subprocess.run([os.path.join(VENV, "bin", "pip"), "install", "-q", "reprozip"],
                               capture_output=True, text=True)
        if r.returncode != 0:
            return "pip install reprozip failed: " + (r.stderr.strip().splitlines() or ["?"])[-1][:200]
    return smoke("reprozip")


SCRATCH = "/tmp/prov-bench-peer-check"


def smoke(mode):
    """Runs `mode`'s collector around /bin/true once (as root, in a scratch
    HOME); None if it worked, else its first line of complaint."""
    subprocess.run(["rm", "-rf", SCRATCH])
    os.makedirs(SCRATCH)
    try:
        r = subprocess.run(argv(mode, SCRATCH) + ["/bin/true"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, HOME=SCRATCH))
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    finally:
        subprocess.run(["rm", "-rf", SCRATCH])
    if r.returncode != 0:
        lines = [l for l in r.stderr.strip().splitlines() if l.strip()]
        return (lines[0] if lines else f"exit status {r.returncode}")[:240]
    return None


def available(log):
    """{mode: None (runs) or the reason it does not}, for each peer
    collector of the paper, checked on this machine."""
    return {"strace": smoke("strace") if os.path.exists("/usr/bin/strace") else "strace is not installed",
            "reprozip": ensure_reprozip(log),
            "care": smoke("care") if os.path.exists("/usr/bin/care") else "Debian's care is not installed",
            "rr": smoke("rr") if os.path.exists("/usr/bin/rr") else "Debian's rr is not installed",
            "fsatrace": "packaged neither by Debian 12 nor on PyPI"}


# ------------------------------------------------------- records ---------

# `PID name(args) = RET` and the halves of an interrupted call.
_CALL = re.compile(r'^(\d+) +(\w+)\((.*)\) += (-?\d+|\?)')
_UNFINISHED = re.compile(r'^(\d+) +(\w+)\((.*) <unfinished \.\.\.>$')
_RESUMED = re.compile(r'^(\d+) +<\.\.\. (\w+) resumed>.*\) += (-?\d+|\?)')
_PATH = re.compile(r'"((?:[^"\\]|\\.)*)"')


def strace_files(path):
    """Distinct path strings of the successful file and process calls in an
    strace log, as strace printed them (relative ones not resolved)."""
    files, pending = set(), {}
    with open(path, errors="replace") as f:
        for line in f:
            m = _CALL.match(line)
            if m:
                args, ret = m.group(3), m.group(4)
            else:
                u = _UNFINISHED.match(line)
                if u:
                    pending[(u.group(1), u.group(2))] = u.group(3)
                    continue
                r = _RESUMED.match(line)
                if not r:
                    continue
                args, ret = pending.pop((r.group(1), r.group(2)), ""), r.group(3)
            if ret.startswith("-") or ret == "?":
                continue
            p = _PATH.search(args)
            if p and p.group(1):
                files.add(p.group(1))
    return len(files)


def reprozip_files(trace_dir):
    """Distinct paths reprozip recorded as opened (its trace database)."""
    db = os.path.join(trace_dir, "trace.sqlite3")
    c = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return c.execute("SELECT count(DISTINCT name) FROM opened_files").fetchone()[0]
    finally:
        c.close()


def care_files(archive):
    """Distinct regular files CARE archived (its copy of what the command
    used; a file archived twice is one)."""
    with tarfile.open(archive) as t:
        return len({m.name for m in t if m.isreg() and "/rootfs/" in "/" + m.name})


def tree_bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    n = 0
    for root, _d, files in os.walk(path):
        for f in files:
            try:
                n += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return n


def record_stats(mode, home):
    """{'files': N, 'record_bytes': B} of a peer collector's record in
    `home`, or {'record_error': why}."""
    where = {"strace": STRACE_LOG, "reprozip": REPROZIP_DIR, "care": CARE_ARCHIVE, "rr": RR_DIR}[mode]
    path = os.path.join(home, where)
    if not os.path.exists(path):
        return {"record_error": f"no record at {path}"}
    out = {"record_bytes": tree_bytes(path)}
    try:
        if mode == "strace":
            out["files"] = strace_files(path)
        elif mode == "reprozip":
            out["files"] = reprozip_files(path)
        elif mode == "care":
            out["files"] = care_files(path)
    except (OSError, sqlite3.Error, tarfile.TarError) as e:
        out["record_error"] = str(e)[:200]
    return out
