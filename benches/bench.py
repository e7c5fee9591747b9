#!/usr/bin/python3
"""prov overhead benchmarks. Run as root through benches/run (see README.md).

Every workload runs the same command line, as the same unprivileged user, in
the same cwd with the same environment, in three modes: untraced, under
`prov run --`, and under strace (the peer tracer). Modes and filesystems are
interleaved run by run, so slow drift of the machine (disk writeback, page
cache, thermal) hits every mode alike. Python 3 stdlib only.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import pty
import pwd
import re
import select
import shutil
import tempfile
import statistics
import subprocess
import sys
import time

import peers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHES = os.path.join(REPO, "benches")
BASE = os.environ.get("PROV_BENCH_BASE", "/var/tmp/prov-bench")
CACHE = os.path.join(BASE, "cache")
USER = "provbench"
KERNEL_XZ = "/usr/src/linux-source-6.1.tar.xz"
APT_PACKAGES = ["linux-source-6.1", "postmark", "strace", "git", "zsh", "build-essential", "xz-utils", "dpkg-dev",
                # the PROBE group's programs and peer collectors
                "pbzip2", "lighttpd", "apache2-utils", "ncbi-blast+", "hello", "care", "rr", "python3-venv"]
PROBE_APT = {"pbzip2", "lighttpd", "apache2-utils", "ncbi-blast+", "hello", "care", "rr", "python3-venv"}
COMPILE_PKG = "zlib"
PROMPT = b"PB_PROMPT> "
# Directories removed from the tree for the "small" git commit: big enough
# that a checkout between the commits rewrites tens of thousands of files.
GIT_SMALL_DROP = ["drivers/gpu", "drivers/net", "sound", "Documentation", "arch/arm", "arch/arm64", "fs"]

GOALS = {
    "command_ratio": 1.03,       # traced command's own time vs untraced, every workload
    "total_ratio_disk": 1.03,    # prov run wall incl. storing, disk workloads
    "total_ratio_tmpfs": 1.3,    # same, tmpfs kernel copy and tar extract
    "store_eps": 300_000,        # file events stored per second
    # added median prompt latency (issue 15): pasted lines, and typed after a pause
    "prompt_builtin_ms": 1.0,
    "prompt_external_ms": 1.5,
    "prompt_builtin_paced_ms": 0.5,
    "prompt_external_paced_ms": 1.0,
    "fixed_added_ms": 2.0,       # prov run -- /bin/true: 3 ms wall for a 1 ms command
    "bytes_per_event": 80,
    "query_kernel_ms": 20,
    "query_1m_ms": 50,
}


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sh(cmd, **kw):
    """Runs a setup command as root; setup failures are fatal."""
    kw.setdefault("check", True)
    return subprocess.run(cmd, shell=isinstance(cmd, str), **kw)


# --------------------------------------------------------------- setup ----

def ensure_packages(quick, only=None):
    missing = [p for p in APT_PACKAGES if not dpkg_installed(p)]
    if only is not None:
        only = set(only) | (set(PROBE_WORKLOADS) if "probe" in only else set())
        # Only what the chosen workloads use.
        needs = {"linux-source-6.1": {"kernel_copy", "tar_extract", "git_checkout", "query", *PROBE_KERNEL},
                 "postmark": {"postmark", "probe_postmark"}}
        needs.update({p: set(PROBE_WORKLOADS) for p in PROBE_APT})
        missing = [p for p in missing if p not in needs or needs[p] & set(only)]
    if quick:
        # The smoke run needs no kernel source and must work offline.
        missing = [p for p in missing if p not in ("linux-source-6.1",)]
    if not missing:
        return
    log(f"apt-get install {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    sh(["apt-get", "update", "-qq"], env=env)
    sh(["apt-get", "install", "-y", "-qq", *missing], env=env, stdout=subprocess.DEVNULL)


def dpkg_installed(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return r.returncode == 0 and "install ok installed" in r.stdout


def install_prov(prefix):
    log(f"packaging/install.sh --prefix {prefix}")
    sh([os.path.join(REPO, "packaging", "install.sh"), "--prefix", prefix], stdout=subprocess.DEVNULL)


def ensure_user():
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        log(f"useradd {USER}")
        sh(["useradd", "--create-home", "--shell", "/bin/bash", USER])
        pw = pwd.getpwnam(USER)
    return pw.pw_uid, pw.pw_gid


def chown_tree(path, uid, gid):
    sh(["chown", "-R", f"{uid}:{gid}", path])


def mount_tmpfs(path):
    os.makedirs(path, exist_ok=True)
    if not os.path.ismount(path):
        sh(["mount", "-t", "tmpfs", "-o", "size=16g,mode=0755", "prov-bench", path])


def umount_tmpfs(path):
    if os.path.ismount(path):
        subprocess.run(["umount", path])


# ------------------------------------------------------------- inputs -----

def done_marker(path):
    return path + ".done"


def prepare_kernel_tree():
    """Unpacks Debian's kernel source once; returns the tree's path."""
    tree = os.path.join(CACHE, "linux-source-6.1")
    if os.path.exists(done_marker(tree)):
        return tree
    log(f"unpacking {KERNEL_XZ} into {CACHE} (once)")
    tmp = os.path.join(CACHE, "linux.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(tmp)
    sh(["tar", "-xJf", KERNEL_XZ, "-C", tmp])
    os.rename(os.path.join(tmp, "linux-source-6.1"), tree)
    os.rmdir(tmp)
    open(done_marker(tree), "w").close()
    return tree


def prepare_quick_tree():
    """A few hundred small files in nested directories: the smoke input."""
    tree = os.path.join(CACHE, "quick-tree")
    if os.path.exists(done_marker(tree)):
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    for d in range(12):
        for sub in ("", "/sub", "/sub/deeper"):
            os.makedirs(f"{tree}/dir{d}{sub}", exist_ok=True)
            for f in range(10):
                with open(f"{tree}/dir{d}{sub}/file{f}.c", "w") as fh:
                    fh.write(f"/* {d}{sub}/{f} */\n" * (1 + f * d))
    os.makedirs(f"{tree}/big", exist_ok=True)
    open(done_marker(tree), "w").close()
    return tree


def prepare_tarball(tree):
    tar = tree + ".tar"
    if not os.path.exists(tar):
        log(f"creating {tar} (once)")
        sh(["tar", "-cf", tar + ".tmp", "-C", os.path.dirname(tree), os.path.basename(tree)])
        os.rename(tar + ".tmp", tar)
    return tar


def prepare_git_repo(tree, drop):
    """A repository with two commits: the whole tree (branch full) and the
    tree without a few large directories (branch small)."""
    repo = tree + ".git-work"
    if os.path.exists(done_marker(repo)):
        return repo
    log(f"creating git history from {tree} (once)")
    shutil.rmtree(repo, ignore_errors=True)
    sh(["cp", "-a", tree, repo])
    git = ["git", "-C", repo, "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    sh(git + ["init", "-q", "-b", "full"])
    # -f: the kernel tree has .gitignore files of its own.
    sh(git + ["add", "-A", "-f"])
    sh(git + ["commit", "-q", "-m", "full tree"])
    sh(git + ["checkout", "-q", "-b", "small"])
    present = [d for d in drop if os.path.exists(os.path.join(repo, d))]
    sh(git + ["rm", "-r", "-q", *present])
    sh(git + ["commit", "-q", "-m", "without " + " ".join(present)])
    sh(git + ["checkout", "-q", "full"])
    open(done_marker(repo), "w").close()
    return repo


def prepare_compile_source(quick):
    """`apt-get source` of a small C project, once. None if unavailable."""
    srcdir = os.path.join(CACHE, "src")
    found = find_unpacked_source(srcdir)
    if found or quick:
        return found
    add_deb_src()
    os.makedirs(srcdir, exist_ok=True)
    log(f"apt-get source {COMPILE_PKG} (once)")
    sh(["apt-get", "update", "-qq"])
    sh(["apt-get", "source", "-qq", COMPILE_PKG], cwd=srcdir, stdout=subprocess.DEVNULL)
    return find_unpacked_source(srcdir)


def find_unpacked_source(srcdir):
    if not os.path.isdir(srcdir):
        return None
    dirs = [d for d in sorted(os.listdir(srcdir))
            if d.startswith(COMPILE_PKG + "-") and os.path.isdir(os.path.join(srcdir, d))]
    return os.path.join(srcdir, dirs[0]) if dirs else None


def add_deb_src():
    """Debian 12 ships deb822 sources without deb-src; add our own file."""
    path = "/etc/apt/sources.list.d/prov-bench-src.sources"
    if os.path.exists(path):
        return
    with open(path, "w") as f:
        f.write("# Added by prov benches/: source packages for the compile workload.\n"
                "Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n"
                "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")


def count_regular_files(tree):
    n = 0
    for root, _dirs, files in os.walk(tree):
        for f in files:
            if os.path.isfile(os.path.join(root, f)) and not os.path.islink(os.path.join(root, f)):
                n += 1
    return n


def gen_db_cached(events):
    """A database of `events` synthetic file events made by gen_db through
    the store's API; cached by the generator's and the schema's source."""
    key = hashlib.sha256()
    for rel in ("crates/prov-store/examples/gen_db.rs", "crates/prov-store/src/schema.rs",
                "crates/prov-store/src/write.rs"):
        with open(os.path.join(REPO, rel), "rb") as f:
            key.update(f.read())
    db = os.path.join(CACHE, f"gen-{events}-{key.hexdigest()[:12]}.db")
    meta = db + ".json"
    if not os.path.exists(meta):
        log(f"generating a database of {events} events with gen_db (cached)")
        for p in (db, db + "-wal", db + "-shm"):
            if os.path.exists(p):
                os.unlink(p)
        env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(BASE, "target"))
        out = sh(["cargo", "run", "--release", "--quiet", "-p", "prov-store", "--example", "gen_db",
                  "--", db, str(events)], cwd=REPO, env=env, capture_output=True, text=True).stdout
        checkpoint_as_root(db)
        with open(meta, "w") as f:
            f.write(out.strip().splitlines()[-1])
    with open(meta) as f:
        return db, json.load(f)


def checkpoint_as_root(db):
    import sqlite3
    c = sqlite3.connect(db)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()


# ------------------------------------------------------------- running ----

class Ctx:
    """What every run needs: who runs it, with which prov, where."""

    def __init__(self, args, uid, gid):
        self.args = args
        self.uid, self.gid = uid, gid
        self.prefix = args.prefix
        self.prov = os.path.join(self.prefix, "bin", "prov")
        self.homes = os.path.join(BASE, "homes")
        self.home_seq = 0
        self.fsdirs = {}
        if not args.no_tmpfs:
            self.fsdirs["tmpfs"] = os.path.join(BASE, "tmpfs")
        if not args.no_disk:
            self.fsdirs["disk"] = os.path.join(BASE, "disk")

    def fresh_home(self, label):
        """A new HOME, so each measured database holds one workload only."""
        self.home_seq += 1
        home = os.path.join(self.homes, f"{self.home_seq:04d}-{label}")
        shutil.rmtree(home, ignore_errors=True)
        os.makedirs(home)
        os.chown(home, self.uid, self.gid)
        return home

    def env(self, home):
        return {"HOME": home, "USER": USER, "LOGNAME": USER, "LANG": "C.UTF-8", "TERM": "dumb",
                "PATH": f"{self.prefix}/bin:/usr/local/bin:/usr/bin:/bin",
                "PROV_BENCH_REPORT": self.report(home)}

    def report(self, home):
        """In the run's own HOME: the user must be able to write it."""
        return os.path.join(home, "bench-report.jsonl")

    def as_user(self, home, argv):
        """setpriv + env -i: the only difference between modes comes after."""
        env = [f"{k}={v}" for k, v in self.env(home).items()]
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--",
                "env", "-i", *env, *argv]

    def mode_prefix(self, mode, home):
        """What comes before the command in `mode`; a peer collector keeps
        its record in the run's HOME."""
        if mode in ("untraced", "floor"):
            return []
        if mode == "prov":
            return [self.prov, "run", "--"]
        return peers.argv(mode, home)

    def db_path(self, home):
        return os.path.join(home, ".local", "share", "prov", "prov.db")


def timed_run(ctx, mode, cmd, cwd, home):
    """Runs `sh -c cmd` once in `mode`; returns the sample dict."""
    if os.path.exists(ctx.report(home)):
        os.unlink(ctx.report(home))
    argv = ctx.as_user(home, ctx.mode_prefix(mode, home) + ["sh", "-c", cmd])
    if mode == "floor":
        # As root, in a mount namespace of its own with every mount marked,
        # as prov observes; the command inside still runs as the user.
        argv = [ctx.floor_reader, "--run", "--", *argv]
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    s = {"mode": mode, "wall_s": wall, "tree_cpu_s": ru.ru_utime + ru.ru_stime, "exit": p.returncode}
    if mode == "floor":
        # The floor reader's last line: the events it read (its CPU is in tree_cpu_s).
        m = re.search(r"^fanotify-floor: (\d+) events.*\n?", err, re.M)
        if m:
            s["floor_events"] = int(m.group(1))
            err = err[:m.start()] + err[m.end():]
    if err.strip():
        s["stderr"] = err.strip()[-400:]
    if mode == "prov":
        s.update(read_report(ctx.report(home)))
    return s


def build_floor_reader():
    """benches/fanotify_floor.c: takes prov's events and only closes each."""
    out = os.path.join(CACHE, "fanotify-floor")
    src = os.path.join(BENCHES, "fanotify_floor.c")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        sh(["cc", "-O2", "-Wall", "-o", out, src])
    return out


def await_report(path, limit_s=5.0):
    """Waits until `prov run`'s report line is whole: one handed to the run
    preparer (run_handover) is written once the record is stored, after
    `prov run` has exited."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            with open(path, "rb") as f:
                if f.read().endswith(b"\n"):
                    return
        except FileNotFoundError:
            pass
        time.sleep(0.001)


def read_report(path):
    try:
        with open(path) as f:
            lines = [json.loads(l) for l in f if l.strip()]
    except FileNotFoundError:
        return {"invalid": "no PROV_BENCH_REPORT line (tracing did not start?)"}
    if len(lines) != 1:
        return {"invalid": f"{len(lines)} report lines, expected 1"}
    r = lines[0]
    out = {"command_s": r["command_ns"] / 1e9, "total_s": r["total_ns"] / 1e9, "begun_s": r.get("begun_ns", 0) / 1e9,
           "collector_cpu_s": r["collector_cpu_ns"] / 1e9, "events": r["events"], "prepared": r.get("prepared"),
           "incomplete": r.get("incomplete") or {}, "spooled": r.get("spooled")}
    why = []
    if out["incomplete"]:
        why.append("incomplete " + ",".join(f"{k}={v}" for k, v in out["incomplete"].items()))
    if out["spooled"]:
        why.append(f"spooled: {out['spooled']}")
    if why:
        out["invalid"] = "; ".join(why)
    return out


def db_stats(ctx, home):
    """Write/read event counts and bytes per event, read as the user (root
    would leave root-owned -wal/-shm files in the user's directory)."""
    code = ("import sqlite3,os,json,sys\n"
            "db=sys.argv[1]\n"
            "if not os.path.exists(db): print('{}'); sys.exit()\n"
            "c=sqlite3.connect(db)\n"
            "c.execute('PRAGMA wal_checkpoint(TRUNCATE)')\n"
            "w,r=c.execute('select sum(access=1),sum(access=0) from file_events').fetchone()\n"
            "f=c.execute('select count(*) from (select distinct path_key>>16,name from file_events)').fetchone()[0]\n"
            "try: p,pa=c.execute('select count(*),coalesce(sum(args is not null),0) from processes').fetchone()\n"
            "except sqlite3.Error: p=pa=None\n"
            "c.close()\n"
            "size=sum(os.path.getsize(p) for p in (db,db+'-wal') if os.path.exists(p))\n"
            "print(json.dumps({'writes':w or 0,'reads':r or 0,'files':f,'db_bytes':size,'record_bytes':size,'processes':p,'processes_with_args':pa}))\n")
    out = subprocess.run(ctx.as_user(home, ["python3", "-c", code, ctx.db_path(home)]),
                         capture_output=True, text=True, cwd="/")
    try:
        st = json.loads(out.stdout)
    except ValueError:
        return {"db_error": out.stderr.strip()[-300:]}
    events = st.get("writes", 0) + st.get("reads", 0)
    if events:
        st["bytes_per_event"] = st["db_bytes"] / events
    return st


# ----------------------------------------------------------- workloads ----

class Workload:
    """One benchmark: prepared once per filesystem, reset before each run
    (untimed), then `command` runs in `cwd`."""
    name = ""
    file_heavy = True           # runs on tmpfs and disk; else once, fs "-"
    # floor: untraced, under a minimal fanotify reader (benches/fanotify_floor.c)
    # taking the events prov takes, as prov does: the kernel's share of prov's cost.
    modes = ("untraced", "floor", "prov", "strace")
    what = ""
    group = ""

    def __init__(self, ctx, quick):
        self.ctx, self.quick = ctx, quick

    def prepare(self, fsdir):
        """Returns per-filesystem state."""
        return {"cwd": fsdir}

    def reset(self, st):
        pass

    def command(self, st):
        raise NotImplementedError

    def expected_writes(self, st):
        return None

    def verify(self, st):
        """After a run: None, or why its output shows it did not do the work."""
        return None

    def user_dir(self, path):
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        os.chown(path, self.ctx.uid, self.ctx.gid)
        return path

    def source_tree(self):
        return prepare_quick_tree() if self.quick else prepare_kernel_tree()

    def tree_on(self, fsdir):
        """The input tree on the workload's own filesystem (on tmpfs a copy,
        so a tmpfs run touches no disk at all)."""
        src = self.source_tree()
        if not fsdir.startswith(os.path.join(BASE, "tmpfs")):
            return src
        dst = os.path.join(fsdir, "input", os.path.basename(src))
        if not os.path.exists(done_marker(dst)):
            shutil.rmtree(dst, ignore_errors=True)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            sh(["cp", "-a", src, dst])
            open(done_marker(dst), "w").close()
        return dst


class KernelCopy(Workload):
    name = "kernel_copy"
    what = "cp -r of the linux-source-6.1 tree"

    def prepare(self, fsdir):
        src = self.tree_on(fsdir)
        return {"cwd": self.user_dir(os.path.join(fsdir, "copy")), "src": src,
                "files": count_regular_files(src)}

    def reset(self, st):
        shutil.rmtree(os.path.join(st["cwd"], "dst"), ignore_errors=True)

    def command(self, st):
        return f"cp -r {st['src']} dst"

    def expected_writes(self, st):
        return st["files"]


class TarExtract(Workload):
    name = "tar_extract"
    what = "tar -xf of the same tree (uncompressed tarball)"

    def prepare(self, fsdir):
        tree = self.source_tree()
        tar = prepare_tarball(tree)
        if fsdir.startswith(os.path.join(BASE, "tmpfs")):
            local = os.path.join(fsdir, "input", os.path.basename(tar))
            if not os.path.exists(local):
                os.makedirs(os.path.dirname(local), exist_ok=True)
                shutil.copyfile(tar, local)
            tar = local
        return {"cwd": self.user_dir(os.path.join(fsdir, "untar")), "tar": tar,
                "files": count_regular_files(tree)}

    def reset(self, st):
        self.user_dir(st["cwd"])

    def command(self, st):
        return f"tar -xf {st['tar']}"

    def expected_writes(self, st):
        return st["files"]


class GitCheckout(Workload):
    name = "git_checkout"
    what = "4 checkouts in a row between two commits (with/without large dirs)"

    def prepare(self, fsdir):
        drop = ["dir1", "dir2", "dir3"] if self.quick else GIT_SMALL_DROP
        repo = prepare_git_repo(self.source_tree(), drop)
        work = os.path.join(fsdir, "git")
        shutil.rmtree(work, ignore_errors=True)
        sh(["cp", "-a", repo, work])
        chown_tree(work, self.ctx.uid, self.ctx.gid)
        return {"cwd": work}

    def reset(self, st):
        # Every run starts and ends on `full`; a failed run must not shift the next.
        subprocess.run(self.ctx.as_user("/tmp", ["git", "checkout", "-q", "-f", "full"]),
                       cwd=st["cwd"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def command(self, st):
        return "git checkout -q small && git checkout -q full && git checkout -q small && git checkout -q full"


class Compile(Workload):
    name = "compile"
    what = f"make clean; make -j2 of Debian's {COMPILE_PKG} source (configured once)"

    def prepare(self, fsdir):
        src = prepare_compile_source(self.quick)
        if src is None:
            return None
        work = os.path.join(fsdir, "compile")
        shutil.rmtree(work, ignore_errors=True)
        sh(["cp", "-a", src, work])
        chown_tree(work, self.ctx.uid, self.ctx.gid)
        home = self.ctx.fresh_home("configure")
        sh(self.ctx.as_user(home, ["sh", "-c", "./configure >/dev/null"]), cwd=work)
        return {"cwd": work}

    def command(self, st):
        return "make clean >/dev/null; make -j2 >/dev/null"


# The venv tests/run sets up; PROV_BENCH_SNAKEMAKE names another (the bench
# user must be able to run it: a venv made from root's own Python is not).
SNAKEMAKE = os.environ.get("PROV_BENCH_SNAKEMAKE", "/opt/prov-test-venv/bin/snakemake")


class Snakemake(Workload):
    """A Snakemake workflow of a few rules, each job a shell and a tool or
    a Python step: what the process table's coverage is measured on."""
    name = "snakemake"
    file_heavy = False
    what = "snakemake --cores 2 of 4 rules over 8 samples (sort, wc, a Python step, cat), 25 jobs"

    def prepare(self, fsdir):
        if not os.path.exists(SNAKEMAKE):
            log(f"snakemake: {SNAKEMAKE} missing (tests/run sets it up); skipped")
            return None
        cwd = self.user_dir(os.path.join(fsdir, "snakemake"))
        with open(os.path.join(cwd, "Snakefile"), "w") as f:
            f.write('SAMPLES = [f"s{i}" for i in range(8)]\n'
                    'rule all:\n    input: "summary.txt"\n'
                    'rule make_input:\n    output: "data/{s}.txt"\n'
                    '    shell: "seq 1 2000 | sort -r > {output}"\n'
                    'rule sort:\n    input: "data/{s}.txt"\n    output: "sorted/{s}.txt"\n'
                    '    shell: "sort -n {input} > {output}"\n'
                    'rule count:\n    input: "sorted/{s}.txt"\n    output: "counts/{s}.txt"\n'
                    '    shell: "python3 -c \'import sys; print(len(open(sys.argv[1]).readlines()))\' {input} > {output}"\n'
                    'rule summary:\n    input: expand("counts/{s}.txt", s=SAMPLES)\n    output: "summary.txt"\n'
                    '    shell: "cat {input} > {output}"\n')
        chown_tree(cwd, self.ctx.uid, self.ctx.gid)
        return {"cwd": cwd}

    def reset(self, st):
        for d in ("data", "sorted", "counts", ".snakemake"):
            shutil.rmtree(os.path.join(st["cwd"], d), ignore_errors=True)
        try:
            os.remove(os.path.join(st["cwd"], "summary.txt"))
        except FileNotFoundError:
            pass

    def command(self, st):
        return f"XDG_CACHE_HOME=$HOME/.cache {SNAKEMAKE} --cores 2 --quiet all >/dev/null 2>&1"


class ExecLoop(Workload):
    name = "exec_loop"
    file_heavy = False

    @property
    def n(self):
        return 100 if self.quick else 2000

    @property
    def what(self):
        return f"one sh running /bin/true {self.n} times"

    def command(self, st):
        return f"i=0; while [ $i -lt {self.n} ]; do /bin/true; i=$((i+1)); done"


class BuiltinLoop(Workload):
    name = "builtin_loop"
    file_heavy = False

    @property
    def n(self):
        return 2000 if self.quick else 200000

    @property
    def what(self):
        return f"one sh running the builtin true {self.n} times"

    def command(self, st):
        return f"i=0; while [ $i -lt {self.n} ]; do true; i=$((i+1)); done"


class Postmark(Workload):
    name = "postmark"

    @property
    def what(self):
        n, t = self.sizes()
        return f"postmark: {n} files, {t} transactions, 10 subdirs, seed 42"

    def sizes(self):
        return (200, 500) if self.quick else (5000, 20000)

    def prepare(self, fsdir):
        cwd = self.user_dir(os.path.join(fsdir, "postmark"))
        n, t = self.sizes()
        cfg = os.path.join(cwd, "postmark.cfg")
        with open(cfg, "w") as f:
            f.write(f"set location {cwd}/pm\nset number {n}\nset transactions {t}\n"
                    "set subdirectories 10\nset size 500 10000\nset seed 42\nrun\nquit\n")
        return {"cwd": cwd, "cfg": cfg}

    def reset(self, st):
        self.user_dir(os.path.join(st["cwd"], "pm"))

    def command(self, st):
        return f"postmark {st['cfg']}"


class CreateFiles(Workload):
    """Collector throughput: many empty files created as fast as a C tool can."""
    modes = ("untraced", "floor", "prov")

    def __init__(self, ctx, quick, n):
        super().__init__(ctx, quick)
        self.n = 2000 if quick else n
        self.name = f"create_{n // 1000}k" + ("_smoke" if quick else "")
        self.what = f"xargs touch of {self.n} new empty files (collector throughput)"

    def prepare(self, fsdir):
        return {"cwd": self.user_dir(os.path.join(fsdir, self.name))}

    def reset(self, st):
        self.user_dir(os.path.join(st["cwd"], "d"))

    def command(self, st):
        return f"cd d && seq -f f%.0f 1 {self.n} | xargs touch"

    def expected_writes(self, st):
        return self.n


class CreateBacklog(CreateFiles):
    """The collector's storing rate on its own: it is stopped (SIGSTOP, by
    the command, which runs as the same user) while the files are created,
    so every event waits in the kernel's queue, and continued at the end.
    Events / (prov run wall − command time) is the rate at which it empties
    a full queue and stores it, with no workload competing for the CPUs."""
    modes = ("untraced", "prov")

    def __init__(self, ctx, quick, n):
        super().__init__(ctx, quick, n)
        # The kernel's queue is bounded (fs.fanotify.max_queued_events, no
        # FAN_UNLIMITED_QUEUE): a stopped collector loses what does not fit,
        # so only as many files as the queue holds, less room for the
        # events of sh, seq and xargs themselves.
        with open("/proc/sys/fs/fanotify/max_queued_events") as f:
            self.n = min(self.n, int(f.read()) - 1024)
        self.name = f"create_backlog_{self.n // 1000}k" + ("_smoke" if quick else "")
        self.what = (f"xargs touch of {self.n} new empty files with the collector stopped until the end "
                     "(its storing rate from a full queue)")

    def command(self, st):
        # Under prov run, the collector is the sibling of this sh (both are
        # children of prov run); untraced there is none.
        return ('c=$(pgrep -x -P "$PPID" prov-collector); [ -z "$c" ] || kill -STOP $c; '
                + super().command(st) + '; s=$?; [ -z "$c" ] || kill -CONT $c; exit $s')


# ------------------------------------------------------------ PROBE -------
#
# The minimal subset of Grayson et al., "A benchmark suite and performance
# analysis of user-space provenance collectors" (ACM REP '24; code:
# charmoniumQ/PROBE, benchmark/), run natively from Debian's packages and
# PyPI. Every workload runs on the tmpfs (or disk with --no-tmpfs) in every
# mode: untraced, the fanotify floor, prov and each peer collector that runs
# here. Sizes are bounded so the group takes about 15 minutes at --runs 3;
# benches/README.md says where each differs from the paper's.

PEER_MODES = ("strace", "reprozip", "care", "rr")
# The kernel subset for tar, untar and pbzip2: the core of the tree, about
# 10 000 files and 105 MB (the whole tree under ReproZip and CARE would take
# the group past its time budget).
PROBE_KERNEL_DIRS = ["fs", "include", "kernel", "mm", "lib", "block", "crypto", "security", "ipc", "init"]
PROBE_KERNEL = {"probe_tar", "probe_untar", "probe_pbzip2"}
HTTP_PAYLOAD = 16 * 1024        # the paper's request size


def prepare_probe_kernel(quick):
    """The kernel subset tree, its tarball and its pbzip2 tarball, once."""
    if quick:
        tree = prepare_quick_tree()
    else:
        full = prepare_kernel_tree()
        tree = os.path.join(CACHE, "linux-core")
        if not os.path.exists(done_marker(tree)):
            log(f"copying {len(PROBE_KERNEL_DIRS)} directories of the kernel tree into {tree} (once)")
            shutil.rmtree(tree, ignore_errors=True)
            os.makedirs(tree)
            sh(["cp", "-a", *[os.path.join(full, d) for d in PROBE_KERNEL_DIRS], tree])
            open(done_marker(tree), "w").close()
    tar = prepare_tarball(tree)
    bz2 = tar + ".bz2"
    if not os.path.exists(bz2):
        log(f"pbzip2 {tar} (once)")
        sh(["pbzip2", "-k", "-c", tar], stdout=open(bz2 + ".tmp", "wb"))
        os.rename(bz2 + ".tmp", bz2)
    return tree, tar, bz2


class ProbeWorkload(Workload):
    """One workload of the PROBE subset, in every mode that runs here."""
    file_heavy = False
    group = "probe"
    paper = ""                  # the paper's workload it stands for

    def __init__(self, ctx, quick):
        super().__init__(ctx, quick)
        self.modes = ("untraced", "floor", "prov", *ctx.peer_modes)

    def size(self, full, quick):
        return quick if self.quick else full

    def on_fs(self, fsdir, path):
        """A copy of the cached input `path` in the workload's filesystem."""
        dst = os.path.join(fsdir, "probe-input", os.path.basename(path))
        if not os.path.exists(done_marker(dst)):
            shutil.rmtree(dst, ignore_errors=True)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            sh(["cp", "-a", path, dst])
            open(done_marker(dst), "w").close()
        return dst


class ProbePostmark(ProbeWorkload):
    name = "probe_postmark"
    paper = "IO bench postmark: `set transactions 100000`, postmark's defaults otherwise"

    @property
    def what(self):
        return f"postmark, {self.size(30_000, 2000)} transactions, postmark's defaults otherwise (500 files, 500–10 000 bytes)"

    def prepare(self, fsdir):
        cwd = self.user_dir(os.path.join(fsdir, self.name))
        cfg = os.path.join(cwd, "postmark.cfg")
        with open(cfg, "w") as f:
            f.write(f"set location {cwd}/pm\nset transactions {self.size(30_000, 2000)}\nrun\nquit\n")
        return {"cwd": cwd, "cfg": cfg}

    def reset(self, st):
        self.user_dir(os.path.join(st["cwd"], "pm"))

    def command(self, st):
        return f"postmark {st['cfg']} >/dev/null"


class ProbeLmbench(ProbeWorkload):
    """lmbench's fork, exec, open/close and stat loops (benches/lmbench_loops.c)."""
    LOOPS = {"fork": (1000, 50), "exec": (500, 30), "open": (30_000, 500), "stat": (60_000, 1000)}

    def __init__(self, ctx, quick, loop):
        super().__init__(ctx, quick)
        self.loop = loop
        self.name = f"probe_lmbench_{loop}"
        self.n = self.size(*self.LOOPS[loop])
        label = "open/close" if loop == "open" else loop
        self.what = f"lmbench {label}: {self.n} iterations (lmbench_loops.c)"
        self.paper = f"IO bench lmbench ({label}): ENOUGH=10000 lat_{'proc' if loop in ('fork', 'exec') else 'syscall'} -N 300 {loop}"

    def prepare(self, fsdir):
        cwd = self.user_dir(os.path.join(fsdir, self.name))
        test_file = os.path.join(cwd, "test_file")
        with open(test_file, "wb") as f:
            f.write(b"\0" * 1024)        # the paper's 1 KiB file
        return {"cwd": cwd, "file": test_file}

    def command(self, st):
        file = st["file"] if self.loop in ("open", "stat") else ""
        return f"{self.ctx.lmbench_loops} {self.loop} {self.n} {file}".rstrip() + " >/dev/null"


class ProbeShellLoop(ProbeWorkload):
    """hello-world, /bin/true and a shell increment in a bash loop."""
    LOOPS = {
        "hello": ("for i in $(seq {n}); do hello > /dev/null; done", 1000, 20,
                  "Utils hello: 1000 × GNU hello"),
        "true": ("for i in $(seq {n}); do /bin/true; done", 1000, 50,
                 "Utils true: 10 000 × `true`, which bash runs as its builtin"),
        "shell_incr": ("i=0; for i in $(seq {n}); do i=$((i+1)); done", 300_000, 2000,
                       "Utils bash shell-incr: 1 000 000 increments"),
    }

    def __init__(self, ctx, quick, loop):
        super().__init__(ctx, quick)
        body, full, small, self.paper = self.LOOPS[loop]
        self.name = f"probe_{loop}"
        self.script = body.format(n=self.size(full, small))
        self.what = f"bash -c '{self.script}'"

    def prepare(self, fsdir):
        return {"cwd": self.user_dir(os.path.join(fsdir, self.name))}

    def command(self, st):
        return f"exec bash -c '{self.script}'"


class ProbeTar(ProbeWorkload):
    name = "probe_tar"
    paper = "Tar Archive (archive): tar --create of Linux 6.8-rc4 (whole tree), 3 times"
    what = "tar --create of the kernel subset"

    def prepare(self, fsdir):
        tree, _tar, _bz2 = prepare_probe_kernel(self.quick)
        return {"cwd": self.user_dir(os.path.join(fsdir, self.name)), "src": self.on_fs(fsdir, tree)}

    def reset(self, st):
        self.user_dir(st["cwd"])

    def command(self, st):
        return f"tar --create --file out.tar --directory {st['src']} ."


class ProbeUntar(ProbeWorkload):
    name = "probe_untar"
    paper = "Tar Unarchive (unarchive): tar --extract of Linux 6.8-rc4, 3 times"
    what = "tar --extract of the kernel subset's tarball"
    compressed = False

    def prepare(self, fsdir):
        tree, tar, bz2 = prepare_probe_kernel(self.quick)
        return {"cwd": self.user_dir(os.path.join(fsdir, self.name)),
                "archive": self.on_fs(fsdir, bz2 if self.compressed else tar), "files": count_regular_files(tree)}

    def reset(self, st):
        self.user_dir(st["cwd"])

    def command(self, st):
        prog = "--use-compress-program pbzip2 " if self.compressed else ""
        return f"tar --extract {prog}--file {st['archive']}"

    def expected_writes(self, st):
        return st["files"]


class ProbePbzip2(ProbeUntar):
    name = "probe_pbzip2"
    paper = "Tar Unarchive (pbzip2): tar --extract --use-compress-prog pbzip2 of Linux 6.8-rc4, 3 times"
    what = "tar --extract --use-compress-program pbzip2 of the kernel subset"
    compressed = True


def python_stdlib():
    """The system Python's standard library directory (pure-Python modules)."""
    import sysconfig
    return sysconfig.get_paths()["stdlib"]


class ProbeCompileall(ProbeWorkload):
    name = "probe_compileall"
    paper = "Compile w/Spack (python): building CPython from source with Spack"
    # Debian ships no test suite; these are large, rarely imported and not
    # needed to stand for the rest.
    SKIP = ("site-packages", "dist-packages", "__pycache__", "test", "tests", "idlelib", "tkinter", "lib2to3",
            "ensurepip", "pydoc_data")

    @property
    def what(self):
        return ("python3 -m compileall -q of a copy of the standard library"
                + (" (json and email only)" if self.quick else f" (without {', '.join(self.SKIP[3:])})"))

    def prepare(self, fsdir):
        cwd = self.user_dir(os.path.join(fsdir, self.name))
        src, dst = python_stdlib(), os.path.join(cwd, "lib")
        keep = ("json", "email") if self.quick else None
        shutil.copytree(src, dst, symlinks=True, ignore=lambda d, names: [
            n for n in names if n in self.SKIP or (keep and d == src and n not in keep)])
        chown_tree(cwd, self.ctx.uid, self.ctx.gid)
        return {"cwd": cwd, "lib": dst}

    def reset(self, st):
        for root, dirs, _f in os.walk(st["lib"]):
            if "__pycache__" in dirs:
                shutil.rmtree(os.path.join(root, "__pycache__"))
                dirs.remove("__pycache__")

    def command(self, st):
        return "python3 -m compileall -q lib >/dev/null"


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ProbeHttp(ProbeWorkload):
    """lighttpd on 127.0.0.1 and ab against it, both inside the command."""
    name = "probe_http"
    paper = "HTTP srv/traffic (lighttpd): 50 000 requests of a 16 KiB file with hey"

    @property
    def n(self):
        return self.size(10_000, 200)

    @property
    def what(self):
        return f"lighttpd on 127.0.0.1, ab -c 4 -n {self.n} (at most 60 s) of a 16 KiB file"

    def prepare(self, fsdir):
        cwd = self.user_dir(os.path.join(fsdir, self.name))
        os.makedirs(os.path.join(cwd, "files"))
        with open(os.path.join(cwd, "files", "test"), "w") as f:
            f.write("A" * HTTP_PAYLOAD)
        port = free_port()
        with open(os.path.join(cwd, "lighttpd.conf"), "w") as f:
            f.write(f'server.document-root = "{cwd}/files"\nserver.bind = "127.0.0.1"\nserver.port = {port}\n'
                    f'server.errorlog = "{cwd}/error.log"\n')
        chown_tree(cwd, self.ctx.uid, self.ctx.gid)
        return {"cwd": cwd, "url": f"http://127.0.0.1:{port}/test"}

    def reset(self, st):
        for f in ("ab.out", "error.log"):
            if os.path.exists(os.path.join(st["cwd"], f)):
                os.unlink(os.path.join(st["cwd"], f))

    def command(self, st):
        # The server starts, the client waits for it (at most 5 s), loads it
        # with a bounded count and time, and the server is stopped.
        url = st["url"]
        return (f"/usr/sbin/lighttpd -D -f lighttpd.conf & s=$!; i=0; "
                f"until ab -q -n 1 {url} >/dev/null 2>&1; do i=$((i+1)); "
                f"if [ $i -ge 500 ]; then kill $s; exit 1; fi; sleep 0.01; done; "
                f"ab -q -c 4 -t 60 -n {self.n} {url} > ab.out; r=$?; kill $s; wait $s; exit $r")

    def verify(self, st):
        try:
            with open(os.path.join(st["cwd"], "ab.out")) as f:
                out = f.read()
        except OSError:
            return "no ab output"
        done = re.search(r"Complete requests:\s+(\d+)", out)
        failed = re.search(r"Failed requests:\s+(\d+)", out)
        if not done or int(done.group(1)) != self.n or not failed or int(failed.group(1)):
            return f"ab: {done.group(0) if done else '?'}, {failed.group(0) if failed else '?'}"
        return None


class ProbeBlast(ProbeWorkload):
    """blastn of mutated fragments against a generated genome."""
    name = "probe_blast"
    paper = "BLAST (blastn, megablast, …): NCBI's benchmark2013 queries and databases"

    def sizes(self):
        # (database sequences, their length, queries, query length)
        return (3000, 2000, 30, 600) if not self.quick else (20, 500, 2, 200)

    @property
    def what(self):
        n, length, q, ql = self.sizes()
        return (f"blastn -task blastn -word_size 7, {q} queries of {ql} bp (5 % mutated) against {n} random "
                f"sequences of {length} bp")

    def prepare(self, fsdir):
        import random
        cwd = self.user_dir(os.path.join(fsdir, self.name))
        n, length, q, ql = self.sizes()
        rnd = random.Random(42)
        genome = ["".join(rnd.choices("ACGT", k=length)) for _ in range(n)]
        with open(os.path.join(cwd, "db.fa"), "w") as f:
            for i, seq in enumerate(genome):
                f.write(f">s{i}\n{seq}\n")
        with open(os.path.join(cwd, "queries.fa"), "w") as f:
            for i in range(q):
                src = rnd.choice(genome)
                at = rnd.randrange(length - ql)
                frag = [c if rnd.random() > 0.05 else rnd.choice("ACGT") for c in src[at:at + ql]]
                f.write(f">q{i}\n{''.join(frag)}\n")
        sh(["makeblastdb", "-in", "db.fa", "-dbtype", "nucl", "-out", "db/genome"], cwd=cwd, stdout=subprocess.DEVNULL)
        chown_tree(cwd, self.ctx.uid, self.ctx.gid)
        return {"cwd": cwd}

    def command(self, st):
        # Word size 7 (blastn's least): many more seeds to extend, so the
        # search, not the start, is what is timed (about 2 s).
        return ("blastn -task blastn -word_size 7 -query queries.fa -db db/genome -num_threads 1 -evalue 1e-5 "
                "-out out.txt")

    def verify(self, st):
        with open(os.path.join(st["cwd"], "out.txt"), errors="replace") as f:
            hits = f.read().count("Score =")
        return None if hits else "blastn found no hit"


def probe_workloads(ctx, quick):
    return [ProbePostmark(ctx, quick),
            *[ProbeLmbench(ctx, quick, l) for l in ProbeLmbench.LOOPS],
            *[ProbeShellLoop(ctx, quick, l) for l in ProbeShellLoop.LOOPS],
            ProbeTar(ctx, quick), ProbeUntar(ctx, quick), ProbePbzip2(ctx, quick),
            ProbeCompileall(ctx, quick), ProbeHttp(ctx, quick), ProbeBlast(ctx, quick)]


PROBE_WORKLOADS = ["probe_postmark", *[f"probe_lmbench_{l}" for l in ProbeLmbench.LOOPS],
                   *[f"probe_{l}" for l in ProbeShellLoop.LOOPS], "probe_tar", "probe_untar", "probe_pbzip2",
                   "probe_compileall", "probe_http", "probe_blast"]


def build_lmbench_loops():
    out = os.path.join(CACHE, "lmbench_loops")
    src = os.path.join(BENCHES, "lmbench_loops.c")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        sh(["cc", "-O2", "-Wall", "-o", out, src])
    return out


# --------------------------------------------------------- measuring ------

def run_workload(ctx, wl, results):
    if wl.file_heavy:
        fss = ctx.fsdirs
    elif isinstance(wl, ProbeWorkload):
        fs = "tmpfs" if "tmpfs" in ctx.fsdirs else "disk"
        fss = {fs: ctx.fsdirs[fs]}
    else:
        fss = {"-": ctx.fsdirs.get("disk") or ctx.fsdirs["tmpfs"]}
    if isinstance(wl, CreateFiles) and "tmpfs" in ctx.fsdirs:  # CreateBacklog included
        fss = {"tmpfs": ctx.fsdirs["tmpfs"]}
    states = {}
    for fs, d in fss.items():
        log(f"{wl.name}: preparing on {fs}")
        os.makedirs(d, exist_ok=True)
        st = wl.prepare(d)
        if st is None:
            log(f"{wl.name}: skipped (input not available; run without --quick once)")
            return
        states[fs] = st
    samples = {(fs, m): [] for fs in states for m in wl.modes}
    total = ctx.args.warmup + ctx.args.runs
    for i in range(total):
        modes = rotate(wl.modes, i)
        for fs, st in states.items():
            for mode in modes:
                s = one_sample(ctx, wl, st, fs, mode, warm=i < ctx.args.warmup)
                if i >= ctx.args.warmup:
                    samples[(fs, mode)].append(s)
    for fs in states:
        results["workloads"].append(summarize(wl, fs, {m: samples[(fs, m)] for m in wl.modes}))
    if isinstance(wl, KernelCopy):
        save_kernel_db(ctx)


def rotate(modes, i):
    """A different mode goes first in each round."""
    k = i % len(modes)
    return list(modes[k:]) + list(modes[:k])


def one_sample(ctx, wl, st, fs, mode, warm):
    wl.reset(st)
    # Writeback of the previous run's files must not land in this one.
    os.sync()
    home = ctx.fresh_home(f"{wl.name}-{fs}-{mode}")
    s = timed_run(ctx, mode, wl.command(st), st["cwd"], home)
    if s["exit"] != 0:
        s["invalid"] = (s.get("invalid", "") + f" exit status {s['exit']}").strip()
    if mode == "prov" and not warm:
        s.update(db_stats(ctx, home))
        check_writes(wl, st, s)
    elif mode in PEER_MODES and not warm:
        s.update(peers.record_stats(mode, home))
    bad = wl.verify(st) if s["exit"] == 0 else None
    if bad:
        s["invalid"] = (s.get("invalid", "") + " " + bad).strip()
    tag = "warm-up " if warm else ""
    extra = f" events={s.get('events')} total={s.get('total_s', 0):.3f}s" if mode == "prov" else ""
    log(f"{wl.name} {fs} {mode} {tag}{s['wall_s']:.3f}s{extra}"
        + (f" INVALID: {s['invalid']}" if s.get("invalid") else ""))
    keep = isinstance(wl, KernelCopy) and mode == "prov" and not warm and fs == "tmpfs"
    if keep:
        old = getattr(ctx, "kept_kernel_home", None)
        if old:
            shutil.rmtree(old, ignore_errors=True)
        ctx.kept_kernel_home = home
        ctx.kernel_src = st["src"]
    elif not ctx.args.keep_homes:
        shutil.rmtree(home, ignore_errors=True)
    return s


def check_writes(wl, st, s):
    """A copy of N regular files must give at least N write events, or say
    why not. More is fine: files that existed only during the run are real
    writes too (GNU tar extracts a symlink as an empty placeholder file first,
    then replaces it)."""
    want = wl.expected_writes(st)
    if want is None or "writes" not in s:
        return
    s["expected_writes"] = want
    if s["writes"] < want and not s.get("invalid"):
        s["invalid"] = f"{s['writes']} write events for {want} files, and no counter says why"
    elif s["writes"] < want:
        s["invalid"] += f" ({s['writes']} write events for {want} files)"


def spread(values):
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "n": len(values)}


def summarize(wl, fs, by_mode):
    base = spread([s["wall_s"] for s in by_mode["untraced"]])
    row = {"workload": wl.name, "fs": fs, "what": wl.what, "group": wl.group, "modes": {}}
    for mode, ss in by_mode.items():
        m = {"wall": spread([s["wall_s"] for s in ss]),
             "tree_cpu": spread([s["tree_cpu_s"] for s in ss]),
             "files": spread([s["files"] for s in ss if s.get("files") is not None]),
             "record_bytes": spread([s["record_bytes"] for s in ss if s.get("record_bytes") is not None]),
             "invalid": sorted({s["invalid"] for s in ss if s.get("invalid")}),
             "samples": ss}
        if base and m["wall"]:
            m["wall_ratio"] = m["wall"]["median"] / base["median"]
        if mode == "prov":
            add_prov_stats(m, ss, base)
        row["modes"][mode] = m
    return row


def add_prov_stats(m, ss, base):
    ok = [s for s in ss if "command_s" in s]
    m["command"] = spread([s["command_s"] for s in ok])
    m["total"] = spread([s["total_s"] for s in ok])
    m["collector_cpu"] = spread([s["collector_cpu_s"] for s in ok])
    m["events"] = spread([s["events"] for s in ok])
    if ok and base:
        m["command_ratio"] = m["command"]["median"] / base["median"]
        m["total_ratio"] = m["total"]["median"] / base["median"]
        m["store_eps_total"] = statistics.median(s["events"] / s["total_s"] for s in ok)
        m["store_eps_cpu"] = statistics.median(s["events"] / max(s["collector_cpu_s"], 1e-9) for s in ok)
        m["tail"] = spread([s["total_s"] - s["command_s"] for s in ok])
        m["drain_eps"] = statistics.median(s["events"] / max(s["total_s"] - s["command_s"], 1e-9) for s in ok)
    bpe = [s["bytes_per_event"] for s in ok if "bytes_per_event" in s]
    if bpe:
        m["bytes_per_event"] = statistics.median(bpe)
    # The process table's coverage: the share of processes recorded with
    # their arguments (the rest were gone before they could be read).
    cov = [s["processes_with_args"] / s["processes"] for s in ok if s.get("processes")]
    if cov:
        m["process_args_share"] = statistics.median(cov)
        m["processes"] = statistics.median(s["processes"] for s in ok if s.get("processes"))
    m["invalid"] = sorted({s["invalid"] for s in ss if s.get("invalid")})


# ------------------------------------------------------- fixed cost -------

FIXED_COMMANDS = {"/bin/true": ["/bin/true"], "sh -c true": ["sh", "-c", "true"]}


def run_fixed(ctx, results):
    """The fixed cost of one command: `prov run -- CMD` against `CMD`, both
    started the same way (setpriv + env), interleaved; one HOME for all prov
    runs, so its database is a used one, as a user's is (not created anew)."""
    n = 10 if ctx.args.quick else ctx.args.fixed_runs
    home = ctx.fresh_home("fixed")
    cwd = home
    for label, cmd in FIXED_COMMANDS.items():
        log(f"fixed cost: {label}, {n} runs per mode")
        walls = {"untraced": [], "prov": []}
        reports = []
        for i in range(n + 5):          # the first 5 are warm-up
            for mode in rotate(("untraced", "prov"), i):
                if os.path.exists(ctx.report(home)):
                    os.unlink(ctx.report(home))
                argv = ctx.as_user(home, ctx.mode_prefix(mode, home) + cmd)
                # stderr to a file, as a terminal's or a batch job's: to a
                # pipe, `prov run` would finish its record itself, since the
                # pipe's reader waits for every holder (run_handover).
                with tempfile.TemporaryFile() as err:
                    t0 = time.perf_counter()
                    p = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
                    wall = time.perf_counter() - t0
                    err.seek(0)
                    stderr = err.read()
                if p.returncode != 0 or stderr.strip():
                    log(f"fixed cost {label} {mode}: exit {p.returncode}: {stderr.decode(errors='replace')[:200]}")
                if mode == "prov":
                    await_report(ctx.report(home))
                if i < 5:
                    continue
                walls[mode].append(wall * 1e3)
                if mode == "prov":
                    reports.append(read_report(ctx.report(home)))
        ok = [r for r in reports if "total_s" in r]
        row = {"command": label, "n": n,
               "untraced_ms": spread(walls["untraced"]), "prov_ms": spread(walls["prov"]),
               "added_ms": statistics.median(walls["prov"]) - statistics.median(walls["untraced"]),
               "begun_ms": spread([r["begun_s"] * 1e3 for r in ok]),
               "command_ms": spread([r["command_s"] * 1e3 for r in ok]),
               "total_ms": spread([r["total_s"] * 1e3 for r in ok]),
               "collector_cpu_ms": spread([r["collector_cpu_s"] * 1e3 for r in ok]),
               "prepared": sum(1 for r in ok if r.get("prepared")),
               "invalid": sorted({r["invalid"] for r in reports if r.get("invalid")})}
        results["fixed"].append(row)
        log(f"fixed cost {label}: untraced {row['untraced_ms']['median']:.2f} ms, "
            f"prov run {row['prov_ms']['median']:.2f} ms")


def fixed_table(results):
    out = ["## Fixed cost of one command (`prov run -- CMD` against `CMD`)", "",
           "| command | n | untraced wall ms | prov run wall ms | added (median) | prov run: start to confirmed "
           "| start to end of command | start to stored | collector CPU ms | taken ready | validity |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["fixed"]:
        valid = "INVALID: " + "; ".join(r["invalid"]) if r["invalid"] else "valid"
        out.append(f"| `{r['command']}` | {r['n']} | {fmt_spread(r['untraced_ms'], '')} | {fmt_spread(r['prov_ms'], '')} "
                   f"| {r['added_ms']:+.2f} ms | {fmt_spread(r['begun_ms'], '')} | {fmt_spread(r['command_ms'], '')} "
                   f"| {fmt_spread(r['total_ms'], '')} "
                   f"| {fmt_spread(r['collector_cpu_ms'], '')} | {r.get('prepared', 0)}/{r['n']} | {valid} |")
    out += ["", "Both modes are started as the bench user through setpriv and env (a few ms, the same in both). "
            "prov run's own report: from just before the record's start is sent to the command's end, and to the "
            "record being stored (the helper, collector and writer start before that, unless the observation was taken "
            "ready from the run preparer: \"taken ready\").", ""]
    return out


# ------------------------------------------------------------ load --------

def start_busy():
    """A CPU burner for one of the machine's cores (the other core busy, as
    on a loaded machine): `--busy`."""
    return subprocess.Popen(["sh", "-c", "while :; do :; done"])


# ---------------------------------------------------------- prompts -------

class PtyShell:
    """An interactive shell on a pty, driven line by line."""

    def __init__(self, argv, cwd, name):
        self.name = name
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.chdir(cwd)
                os.execvp(argv[0], argv)
            finally:
                os._exit(127)
        self.pid, self.fd, self.buf = pid, fd, b""

    def wait_prompt(self, timeout=30.0):
        deadline = time.perf_counter() + timeout
        while True:
            i = self.buf.find(PROMPT)
            if i >= 0:
                self.buf = self.buf[i + len(PROMPT):]
                return
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"{self.name}: no prompt in {timeout:g} s; output so far: {self.buf[-300:]!r}")
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    raise EOFError(f"{self.name}: shell exited; output: {self.buf[-300:]!r}")
                self.buf += data

    def line(self, text, pause=0.0):
        """Prompt-to-prompt time of one command line, in seconds, typed
        `pause` seconds after the prompt appeared (not timed)."""
        if pause:
            time.sleep(pause)
        self.buf = b""
        t0 = time.perf_counter()
        os.write(self.fd, text.encode() + b"\n")
        self.wait_prompt()
        return time.perf_counter() - t0

    def close(self):
        try:
            os.write(self.fd, b"exit\n")
            deadline = time.time() + 5
            while time.time() < deadline:
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    break
                time.sleep(0.05)
            else:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
        except (OSError, ChildProcessError):
            pass
        os.close(self.fd)


def write_shell_rc(home, shell, prov, uid, gid):
    """The shell's rc file in `home`: the bench's prompt and, if `prov` (the
    program's path) is given, the integration line."""
    rc = os.path.join(home, ".bashrc" if shell == "bash" else ".zshrc")
    with open(rc, "w") as f:
        if shell == "bash":
            f.write(f"PS1='{PROMPT.decode()}'\n")
        else:
            f.write(f"PROMPT='{PROMPT.decode()}'\nunsetopt PROMPT_SP\n")
        if prov:
            f.write(f'eval "$({prov} init {shell})"\n')
    os.chown(rc, uid, gid)


def start_shell(ctx, shell, traced, cwd):
    home = ctx.fresh_home(f"prompt-{shell}-{'prov' if traced else 'plain'}")
    write_shell_rc(home, shell, ctx.prov if traced else None, ctx.uid, ctx.gid)
    sh_ = PtyShell(ctx.as_user(home, [f"/bin/{shell}", "-i"]), cwd,
                   f"{shell} {'with prov init' if traced else 'plain'}")
    sh_.wait_prompt()
    return sh_, home


PROMPT_COMMANDS = {"builtin": "true", "external": "/bin/true", "redirect": "echo x > f"}


def run_prompts(ctx, results):
    n = 20 if ctx.args.quick else ctx.args.prompt_commands
    # Two pacings: each line typed a short pause after its prompt appeared
    # (a person cannot type faster; prov prepares the next observation while
    # the prompt idles), and back to back (the next line sent the moment the
    # prompt appears: the worst case, where preparing is on the clock).
    pacings = [("paused", ctx.args.prompt_pause_ms / 1e3), ("back-to-back", 0.0)]
    cwd = os.path.join(ctx.fsdirs.get("disk") or ctx.fsdirs["tmpfs"], "prompt")
    os.makedirs(cwd, exist_ok=True)
    os.chown(cwd, ctx.uid, ctx.gid)
    for shell in ("bash", "zsh"):
        log(f"prompt latency: {shell}, {n} lines per command kind, mode and pacing")
        shells = {}
        typed = 0
        try:
            for mode in ("plain", "prov"):
                shells[mode] = start_shell(ctx, shell, mode == "prov", cwd)
            for pacing, pause in pacings:
                times = {(k, m): [] for k in PROMPT_COMMANDS for m in shells}
                for i in range(n + 10):     # the first 10 are warm-up
                    for kind, text in PROMPT_COMMANDS.items():
                        for mode in rotate(("plain", "prov"), i):
                            t = shells[mode][0].line(text, pause)
                            typed += mode == "prov"
                            if i >= 10:
                                times[(kind, mode)].append(t)
                for kind in PROMPT_COMMANDS:
                    plain, prov = times[(kind, "plain")], times[(kind, "prov")]
                    results["prompts"].append({
                        "shell": shell, "kind": kind, "command": PROMPT_COMMANDS[kind], "n": n,
                        "pacing": pacing, "pause_ms": pause * 1e3,
                        "plain_ms": spread([t * 1e3 for t in plain]),
                        "prov_ms": spread([t * 1e3 for t in prov]),
                        "added_ms": statistics.median(prov) * 1e3 - statistics.median(plain) * 1e3,
                    })
            prov_home = shells["prov"][1]
        except (TimeoutError, EOFError) as e:
            log(f"prompt latency {shell}: FAILED: {e}")
            results["prompts"].append({"shell": shell, "error": str(e)})
            continue
        finally:
            for s, _ in shells.values():
                s.close()
        recorded = count_commands(ctx, prov_home)
        results["prompts_recorded"][shell] = {"recorded": recorded, "typed": typed}
        log(f"prompt {shell}: {recorded} commands recorded of {typed} typed")


def count_commands(ctx, home):
    code = ("import sqlite3,sys,os\n"
            "db=sys.argv[1]\n"
            "print(sqlite3.connect(db).execute('select count(*) from commands').fetchone()[0] if os.path.exists(db) else 0)\n")
    out = subprocess.run(ctx.as_user(home, ["python3", "-c", code, ctx.db_path(home)]),
                         capture_output=True, text=True, cwd="/")
    return int(out.stdout.strip() or 0)


# ----------------------------------------------------------- queries ------

def query_set(wrote, read, pattern):
    """The real CLI on one database: by-file lookups, history, and each kind
    of filter (command text, file name and directory with a size, time, exit
    status), sessions and stats."""
    name, directory = os.path.basename(wrote), os.path.dirname(wrote)
    return [
        ("wrote FILE", ["prov", "query", "wrote", wrote, "--json"]),
        ("read FILE", ["prov", "query", "read", read, "--json"]),
        ("history -n 20", ["prov", "query", "history", "-n", "20", "--json"]),
        ("text search: history --text", ["prov", "query", "history", "--text", pattern, "--json"]),
        ("history --name NAME (file filter)", ["prov", "query", "history", "--name", name, "--json"]),
        ("history --dir DIR --size >1K", ["prov", "query", "history", "--dir", directory, "--size", ">1K", "--json"]),
        ("history --since 1d --name '*.c'", ["prov", "query", "history", "--since", "1d", "--name", "*.c", "--json"]),
        ("history --failed", ["prov", "query", "history", "--failed", "--json"]),
        ("session (list)", ["prov", "query", "session", "--json"]),
        ("stats", ["prov", "stats", "--json"]),
        ("browse: first screen", ["prov", "browse", "--first-screen"]),
    ]


def time_queries(ctx, home, queries, label, events):
    runs = max(ctx.args.runs, 3)
    launcher = [time_argv(ctx, home, ["true"]) for _ in range(runs)]
    rows = []
    for name, argv in queries:
        ms, rc, err = [], None, ""
        for i in range(runs + 1):
            t, rc, err = time_argv(ctx, home, argv, want_rc=True)
            if i:
                ms.append(t * 1e3)
        row = {"db": label, "events": events, "query": name, "ms": spread(ms), "exit": rc}
        # `wrote`/`read` exit 1 when nothing matches; every query here asks
        # about something recorded, so a failure means the numbers are void.
        if rc != 0:
            row["invalid"] = f"exit {rc}: {err.strip()[:160]}"
        rows.append(row)
        log(f"query {label} {name}: median {statistics.median(ms):.1f} ms (exit {rc})"
            + (f" INVALID: {row['invalid']}" if rc else ""))
    return rows, statistics.median(launcher) * 1e3


def time_argv(ctx, home, argv, want_rc=False):
    t0 = time.perf_counter()
    p = subprocess.run(ctx.as_user(home, argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/")
    t = time.perf_counter() - t0
    return (t, p.returncode, p.stderr.decode(errors="replace")) if want_rc else t


def run_queries(ctx, results):
    if ctx.args.query_db:
        db = ctx.args.query_db
        with open(db + ".json") as f:
            meta = json.load(f)
    else:
        db, meta = gen_db_cached(20_000 if ctx.args.quick else ctx.args.query_events)
    home = ctx.fresh_home("query-gen")
    dst = ctx.db_path(home)
    os.makedirs(os.path.dirname(dst))
    shutil.copyfile(db, dst)
    chown_tree(os.path.join(home, ".local"), ctx.uid, ctx.gid)
    os.chmod(os.path.dirname(dst), 0o700)
    rows, launcher = time_queries(ctx, home, query_set(meta["sample_write"], meta["sample_read"], "cargo build"),
                                  "generated", meta["events"])
    results["queries"] += rows
    results["query_launcher_ms"] = launcher
    results["gen_db"] = meta
    kh, src = last_kernel_db(ctx.args.quick)
    if kh:
        probe = os.path.join(src, "Makefile")
        if not os.path.exists(probe):
            probe = first_file(src)
        st = db_stats(ctx, kh)
        rows, _ = time_queries(ctx, kh, query_set(probe, probe, "cp -r"), "kernel_copy",
                               st.get("writes", 0) + st.get("reads", 0))
        results["queries"] += rows


def last_kernel_dir(quick):
    return os.path.join(CACHE, "last-kernel-copy" + ("-quick" if quick else ""))


def save_kernel_db(ctx):
    """Keeps the last tmpfs kernel copy's HOME (database) in the cache, so
    `--only query` in a later session still measures queries on it."""
    kh = getattr(ctx, "kept_kernel_home", None)
    if not kh or not os.path.exists(kh):
        return
    keep = last_kernel_dir(ctx.args.quick)
    shutil.rmtree(keep, ignore_errors=True)
    shutil.move(kh, keep)
    with open(keep + ".json", "w") as f:
        json.dump({"src": ctx.kernel_src}, f)
    ctx.kept_kernel_home = None


def last_kernel_db(quick):
    keep = last_kernel_dir(quick)
    try:
        with open(keep + ".json") as f:
            src = json.load(f)["src"]
    except (OSError, ValueError, KeyError):
        return None, None
    if not os.path.exists(src):
        # The tmpfs copy of the tree is gone with the tmpfs; the cache's is identical.
        src = os.path.join(CACHE, os.path.basename(src))
    return (keep, src) if os.path.isdir(keep) else (None, None)


def first_file(tree):
    for root, _d, files in os.walk(tree):
        for f in sorted(files):
            return os.path.join(root, f)


# ----------------------------------------------------------- output -------

def fmt_spread(sp, unit="s", scale=1.0):
    if not sp:
        return "-"
    return f"{sp['median'] * scale:.3g} ({sp['min'] * scale:.3g}–{sp['max'] * scale:.3g}){unit}"


def goal_cell(value, goal, lower_is_better=True, unit="×"):
    if value is None:
        return "-"
    met = value <= goal if lower_is_better else value >= goal
    if lower_is_better:
        by = f"{value / goal:.2f}× the goal" if not met else "met"
    else:
        by = f"{value / goal:.2f}× the goal" if not met else "met"
    return f"{value:.3g}{unit} (goal {'≤' if lower_is_better else '≥'} {goal:g}{unit}: {'met' if met else 'MISSED, ' + by})"


def total_goal(row):
    if row["fs"] == "tmpfs" and row["workload"] in ("kernel_copy", "tar_extract"):
        return GOALS["total_ratio_tmpfs"]
    if row["fs"] == "disk":
        return GOALS["total_ratio_disk"]
    return None


def markdown(results):
    out = [f"# prov benchmarks — {results['started']}", "",
           f"Machine: {results['machine']}. prov {results['prefix']}; runs {results['runs']} "
           f"after {results['warmup']} warm-up, modes interleaved. Times: median (min–max)."
           + (" One core kept busy by a shell loop throughout (--busy)." if results.get("busy") else ""), ""]
    if any(r.get("group") != "probe" for r in results["workloads"]):
        out += workload_table(results)
    if any(r.get("group") == "probe" for r in results["workloads"]):
        out += probe_table(results)
    if results["workloads"] or results.get("fixed") or results["prompts"] or results["queries"]:
        out += goal_table(results)
    if results.get("fixed"):
        out += fixed_table(results)
    if results["prompts"]:
        out += prompt_table(results)
    if results["queries"]:
        out += query_table(results)
    return "\n".join(out) + "\n"


def workload_table(results):
    out = ["## Workloads", "",
           "| workload | fs | untraced wall | prov command time | prov run wall (incl. storing) | strace wall "
           "| floor ratio | cmd ratio | prov ratio | strace ratio | collector CPU | workload CPU untraced / prov "
           "| events | B/event | processes (with arguments) | validity |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["workloads"]:
        if r.get("group") == "probe":
            continue
        u, p, s = r["modes"].get("untraced"), r["modes"].get("prov", {}), r["modes"].get("strace")
        fl = r["modes"].get("floor")
        ratio = lambda v: f"{v:.2f}×" if v is not None else "-"
        valid = "INVALID: " + "; ".join(p["invalid"]) if p.get("invalid") else "valid"
        cpu = f"{fmt_spread(u['tree_cpu'])} / {fmt_spread(p.get('tree_cpu'))}" if u else "-"
        ev = p.get("events")
        bpe = f"{p['bytes_per_event']:.0f}" if "bytes_per_event" in p else "-"
        procs = (f"{p['processes']:.0f} ({100 * p['process_args_share']:.0f} %)"
                 if "process_args_share" in p else "-")
        out.append(
            f"| {r['workload']} | {r['fs']} | {fmt_spread(u['wall'] if u else None)} | {fmt_spread(p.get('command'))} "
            f"| {fmt_spread(p.get('total'))} | {fmt_spread(s['wall']) if s else '-'} "
            f"| {ratio(fl.get('wall_ratio') if fl else None)} "
            f"| {ratio(p.get('command_ratio'))} | {ratio(p.get('total_ratio'))} "
            f"| {ratio(s.get('wall_ratio') if s else None)} | {fmt_spread(p.get('collector_cpu'))} | {cpu} "
            f"| {int(ev['median']) if ev else '-'} | {bpe} | {procs} | {valid} |")
    out += ["", "floor ratio: untraced wall while a minimal fanotify reader (benches/fanotify_floor.c: marks "
            "every mount of the command's own namespace for prov's events, as prov does, and only closes each event's "
            "descriptor) runs / untraced wall, the kernel's "
            "part of any fanotify tracer's cost; "
            "cmd ratio: prov's command time (until the traced command's own processes exit) / untraced wall; "
            "prov ratio: `prov run` wall including storing / untraced wall (medians). Workload CPU: user+sys of the "
            "command tree (in prov mode plus the `prov run` client); the collector's CPU is its own column.", ""]
    for r in results["workloads"]:
        for s in r["modes"].get("prov", {}).get("samples", []):
            if s.get("expected_writes") is not None:
                out.append(f"- {r['workload']}/{r['fs']}: {s['writes']} write events for "
                           f"{s['expected_writes']} regular files ({'equal' if s['writes'] == s['expected_writes'] else ('more: files that existed only during the run' if s['writes'] > s['expected_writes'] else 'FEWER')})"
                           + (f"; invalid: {s['invalid']}" if s.get("invalid") else ""))
                break
    out.append("")
    return out


# Grayson et al. (ACM REP '24), Table 4: percent overhead of the mean wall
# time per benchmark class (geometric mean over its cases), for fsatrace,
# CARE, strace, rr and ReproZip.
PAPER_COLLECTORS = ("fsatrace", "care", "strace", "rr", "reprozip")
PAPER_TABLE4 = {
    "BLAST": (0, 2, 2, 93, 8),
    "Compile w/Spack": (-1, 119, 111, 562, 359),
    "HTTP srv/traffic": (5, 135, 414, 1261, 724),
    "IO bench lmbench": (-10, 1, 3, 11, 36),
    "IO bench postmark": (2, 231, 650, 259, 1733),
    "Tar Archive": (0, 75, 113, 179, 140),
    "Tar Unarchive": (4, 44, 114, 195, 149),
    "Utils": (17, 118, 280, 1378, 697),
    "Utils bash": (5, 75, 20, 426, 2933),
    "Total (gmean)": (0, 45, 66, 146, 193),
}
PAPER_CLASS = {"probe_postmark": "IO bench postmark", "probe_hello": "Utils", "probe_true": "Utils",
               "probe_shell_incr": "Utils bash", "probe_tar": "Tar Archive", "probe_untar": "Tar Unarchive",
               "probe_pbzip2": "Tar Unarchive", "probe_compileall": "Compile w/Spack",
               "probe_http": "HTTP srv/traffic", "probe_blast": "BLAST"}


def paper_class(workload):
    return "IO bench lmbench" if workload.startswith("probe_lmbench_") else PAPER_CLASS.get(workload)


def geomean(values):
    import math
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def probe_ratios(r):
    """{column: ratio of medians to untraced} of one PROBE row."""
    m = r["modes"]
    out = {}
    for mode in ("floor", *PEER_MODES):
        if m.get(mode, {}).get("wall_ratio") is not None:
            out[mode] = m[mode]["wall_ratio"]
    for key in ("command_ratio", "total_ratio"):
        if m.get("prov", {}).get(key) is not None:
            out["prov_" + key.split("_")[0]] = m["prov"][key]
    return out


def probe_table(results):
    rows = [r for r in results["workloads"] if r.get("group") == "probe"]
    peer_cols = [m for m in PEER_MODES if any(m in r["modes"] for r in rows)]
    ratio = lambda v: f"{v:.2f}×" if v is not None else "-"
    files = lambda r, m: f"{r['modes'][m]['files']['median']:.0f}" if r["modes"].get(m, {}).get("files") else "-"
    file_cols = ["prov", *(c for c in peer_cols if c != "rr")]
    head = ["workload", "untraced wall", "floor", "prov command", "prov run wall", *peer_cols,
            "files: " + " / ".join(file_cols), "paper's class: " + " / ".join(PAPER_COLLECTORS), "validity"]
    out = ["## PROBE benchmark subset (ratios of median wall time to untraced)", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    table = []
    for r in rows:
        rat = probe_ratios(r)
        table.append(rat)
        cls = paper_class(r["workload"])
        paper = (f"{cls}: " + " / ".join(f"{p:+d} %" for p in PAPER_TABLE4[cls])) if cls else "-"
        bad = sorted({f"{mode}: {why}" for mode, m in r["modes"].items() for why in m.get("invalid", [])})
        cells = [r["workload"], fmt_spread(r["modes"]["untraced"]["wall"]), ratio(rat.get("floor")),
                 ratio(rat.get("prov_command")), ratio(rat.get("prov_total")), *(ratio(rat.get(c)) for c in peer_cols),
                 " / ".join(files(r, c) for c in file_cols), paper,
                 "INVALID: " + "; ".join(bad) if bad else "valid"]
        out.append("| " + " | ".join(cells) + " |")
    cols = ["floor", "prov_command", "prov_total", *peer_cols]
    gm = {c: geomean([t.get(c) for t in table]) for c in cols}
    out.append(f"| **geometric mean** ({len(rows)} workloads) | | " + " | ".join(ratio(gm[c]) for c in cols)
               + " | | Total (gmean): " + " / ".join(f"{p:+d} %" for p in PAPER_TABLE4["Total (gmean)"]) + " | |")
    out += ["", "floor: untraced while benches/fanotify_floor.c reads the mount's close events; prov command: "
            "until the command's own processes exit; prov run wall: including storing. files: distinct paths in "
            "each record (prov: file events' paths, each with a content hash; strace: path strings of successful "
            "file and process calls as printed; ReproZip: `opened_files` of its trace database; CARE: regular "
            "files in its archive). The paper's figures are percent overheads of its Table 4 class.", ""]
    for m, why in sorted(results.get("peers", {}).items()):
        if why:
            out.append(f"- {m}: not run: {why}")
    out.append("")
    return out


def goal_table(results):
    out = ["## Goals", "", "| goal | workload | measured |", "|---|---|---|"]
    for r in results["workloads"]:
        p = r["modes"].get("prov", {})
        # The backlog run stops the collector on purpose: its command time
        # is not a traced run's.
        if p.get("command_ratio") is not None and not r["workload"].startswith("create_backlog"):
            out.append(f"| command time ≤ 1.03× | {r['workload']}/{r['fs']} | {goal_cell(p['command_ratio'], GOALS['command_ratio'])} |")
        g = total_goal(r)
        if g and p.get("total_ratio") is not None:
            out.append(f"| prov run wall ≤ {g}× | {r['workload']}/{r['fs']} | {goal_cell(p['total_ratio'], g)} |")
        if r["workload"].startswith("create_backlog") and p.get("drain_eps"):
            out.append(f"| storing ≥ 300 000 events/s (events / storing time after the stopped collector is "
                       f"continued) | {r['workload']}/{r['fs']} "
                       f"| {goal_cell(p['drain_eps'], GOALS['store_eps'], False, ' ev/s')}; per collector CPU-second "
                       f"{p['store_eps_cpu']:.0f} ev/s |")
        elif r["workload"].startswith("create_") and p.get("store_eps_total"):
            out.append(f"| storing ≥ 300 000 events/s (events / prov run wall) | {r['workload']}/{r['fs']} "
                       f"| {goal_cell(p['store_eps_total'], GOALS['store_eps'], False, ' ev/s')}; per collector CPU-second "
                       f"{p['store_eps_cpu']:.0f} ev/s; storing tail after the command {fmt_spread(p.get('tail'))} |")
        if r["workload"] == "kernel_copy" and p.get("bytes_per_event"):
            out.append(f"| ≤ 80 bytes per file event (db+wal after checkpoint) | {r['workload']}/{r['fs']} "
                       f"| {goal_cell(p['bytes_per_event'], GOALS['bytes_per_event'], True, ' B')} |")
    for pr in results["prompts"]:
        if "added_ms" in pr and pr["kind"] in ("builtin", "external"):
            paced = "_paced" if pr.get("pacing") == "paused" else ""
            g = GOALS[f"prompt_{pr['kind']}{paced}_ms"]
            out.append(f"| prompt latency added ≤ +{g:g} ms | {pr['shell']} `{pr['command']}`, {pacing_label(pr)} "
                       f"| {goal_cell(pr['added_ms'], g, True, ' ms')} |")
    for r in results.get("fixed", []):
        if r["command"] == "/bin/true":
            out.append(f"| `prov run -- /bin/true` adds ≤ +{GOALS['fixed_added_ms']:g} ms wall (3 ms for a 1 ms "
                       f"command) | fixed | {goal_cell(r['added_ms'], GOALS['fixed_added_ms'], True, ' ms')} |")
    for q in results["queries"]:
        g = GOALS["query_kernel_ms"] if q["db"] == "kernel_copy" else GOALS["query_1m_ms"]
        cell = "INVALID (query failed)" if q.get("invalid") else goal_cell(q["ms"]["median"], g, True, " ms")
        out.append(f"| query ≤ {g} ms | {q['query']} ({q['db']}, {q['events']} events) | {cell} |")
    out.append("")
    return out


def pacing_label(prompt):
    """How a prompt row's lines were typed (rows of older runs: back to back)."""
    if prompt.get("pacing") == "paused":
        return f"typed {prompt['pause_ms']:g} ms after the prompt"
    return prompt.get("pacing", "back-to-back")


def prompt_table(results):
    out = ["## Prompt latency (prompt-to-prompt through a pty)", "",
           "| shell | command | pacing | n | plain ms | with prov init ms | added (median) |",
           "|---|---|---|---|---|---|---|"]
    for p in results["prompts"]:
        if "error" in p:
            out.append(f"| {p['shell']} | FAILED: {p['error'][:120]} | | | | | |")
            continue
        out.append(f"| {p['shell']} | `{p['command']}` | {pacing_label(p)} | {p['n']} | {fmt_spread(p['plain_ms'], '')} "
                   f"| {fmt_spread(p['prov_ms'], '')} | {p['added_ms']:+.2f} ms |")
    for shell, r in results["prompts_recorded"].items():
        out.append(f"\n{shell}: {r['recorded']} commands recorded of {r['typed']} typed in the traced shell.")
    out.append("")
    return out


def query_table(results):
    out = ["## Query latency (real CLI, wall time incl. process start)", "",
           "| database | events | query | ms median (min–max) | exit | validity |", "|---|---|---|---|---|---|"]
    for q in results["queries"]:
        out.append(f"| {q['db']} | {q['events']} | {q['query']} | {fmt_spread(q['ms'], '')} | {q['exit']} "
                   f"| {'INVALID: ' + q['invalid'] if q.get('invalid') else 'valid'} |")
    out += ["", f"Starting a process as the bench user (setpriv + env + true) alone takes "
            f"{results.get('query_launcher_ms', 0):.1f} ms; it is included above. "
            "Generated-database queries ask about paths that do not exist on "
            "disk (lookup by path only); kernel-copy queries ask about an existing source file (by content "
            "and path; `wrote` finds cp's copy by content).", ""]
    return out


# ------------------------------------------------------------- main -------

WORKLOADS = ["kernel_copy", "tar_extract", "git_checkout", "compile", "snakemake", "exec_loop", "builtin_loop",
             "postmark", "create", "fixed", "prompt", "query", "probe"]


def make_workload(ctx, name, quick):
    simple = {"kernel_copy": KernelCopy, "tar_extract": TarExtract, "git_checkout": GitCheckout,
              "compile": Compile, "snakemake": Snakemake, "exec_loop": ExecLoop, "builtin_loop": BuiltinLoop, "postmark": Postmark}
    if name in simple:
        return [simple[name](ctx, quick)]
    if name == "create":
        return [CreateFiles(ctx, quick, 100_000), CreateFiles(ctx, quick, 190_000),
                CreateBacklog(ctx, quick, 100_000)]
    if name == "probe":
        return probe_workloads(ctx, quick)
    if name in PROBE_WORKLOADS:
        return [w for w in probe_workloads(ctx, quick) if w.name == name]
    return []


def parse_args():
    ap = argparse.ArgumentParser(description="prov overhead benchmarks (run as root)")
    ap.add_argument("--quick", action="store_true", help="smoke run: tiny inputs, 1 run, no warm-up")
    ap.add_argument("--only", help="comma-separated workloads: " + ",".join(WORKLOADS)
                    + " (probe: the PROBE group, or one of it: " + ",".join(PROBE_WORKLOADS) + ")")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(BENCHES, "results"))
    ap.add_argument("--no-disk", action="store_true")
    ap.add_argument("--no-tmpfs", action="store_true")
    ap.add_argument("--prefix", help="use prov already installed in this prefix (skips install.sh)")
    ap.add_argument("--fixed-runs", type=int, default=50, help="runs per mode of each command in the fixed-cost test")
    ap.add_argument("--no-peers", action="store_true",
                    help="run the PROBE group without the other collectors (strace, ReproZip, CARE)")
    ap.add_argument("--busy", action="store_true",
                    help="keep one core busy (a shell loop) for the whole run: figures under load")
    ap.add_argument("--prompt-commands", type=int, default=500, help="lines per command kind, mode and pacing")
    ap.add_argument("--prompt-pause-ms", type=float, default=100.0,
                    help="pause between a prompt and the next line in the paced prompt test")
    ap.add_argument("--query-events", type=int, default=1_000_000)
    ap.add_argument("--query-db", help="use this generated database (with its PATH.json from gen_db) "
                    "instead of generating one; it must match the installed prov's schema")
    ap.add_argument("--keep-homes", action="store_true", help="keep every run's HOME (and database)")
    a = ap.parse_args()
    if a.quick:
        a.runs, a.warmup = 1, 0
    if a.no_disk and a.no_tmpfs:
        ap.error("--no-disk and --no-tmpfs leave nowhere to run")
    a.only = a.only.split(",") if a.only else list(WORKLOADS)
    bad = [w for w in a.only if w not in WORKLOADS and w not in PROBE_WORKLOADS]
    if bad:
        ap.error(f"unknown workload(s): {', '.join(bad)}")
    return a


def machine():
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    try:
        with open("/etc/debian_version") as f:
            deb = "Debian " + f.read().strip()
    except OSError:
        deb = platform.platform()
    return f"{os.cpu_count()} CPUs, {mem:.0f} GiB RAM, {deb}, kernel {platform.release()}"


def main():
    args = parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: run as root (it installs packages and prov, and mounts a tmpfs)")
    os.makedirs(CACHE, exist_ok=True)
    ensure_packages(args.quick, args.only)
    if not args.prefix:
        args.prefix = os.path.join(BASE, "prefix")
        install_prov(args.prefix)
    uid, gid = ensure_user()
    ctx = Ctx(args, uid, gid)
    ctx.floor_reader = build_floor_reader()
    ctx.peer_modes, peer_notes = (), {}
    if any(w == "probe" or w in PROBE_WORKLOADS for w in args.only):
        ctx.lmbench_loops = build_lmbench_loops()
        peer_notes = {m: "--no-peers" for m in PEER_MODES} if args.no_peers else peers.available(log)
        ctx.peer_modes = tuple(m for m in PEER_MODES if peer_notes.get(m) is None)
        for m, why in peer_notes.items():
            log(f"peer collector {m}: " + (f"not run: {why}" if why else "runs"))
    shutil.rmtree(ctx.homes, ignore_errors=True)
    os.makedirs(ctx.homes)
    started = datetime.datetime.now(datetime.timezone.utc)
    results = {"started": started.strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(), "prefix": args.prefix,
               "quick": args.quick, "runs": args.runs, "warmup": args.warmup, "goals": GOALS,
               "workloads": [], "fixed": [], "prompts": [], "prompts_recorded": {}, "queries": [],
               "busy": args.busy, "peers": peer_notes}
    if "tmpfs" in ctx.fsdirs:
        mount_tmpfs(ctx.fsdirs["tmpfs"])
    busy = start_busy() if args.busy else None
    try:
        for name in args.only:
            if name == "fixed":
                run_fixed(ctx, results)
            elif name == "prompt":
                run_prompts(ctx, results)
            elif name == "query":
                run_queries(ctx, results)
            else:
                for wl in make_workload(ctx, name, args.quick):
                    run_workload(ctx, wl, results)
    finally:
        if busy:
            busy.kill()
            busy.wait()
        write_results(args, results, started)
        if "tmpfs" in ctx.fsdirs:
            umount_tmpfs(ctx.fsdirs["tmpfs"])


def write_results(args, results, started):
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, started.strftime("%Y%m%dT%H%M%SZ") + ("-quick" if args.quick else ""))
    with open(stem + ".json", "w") as f:
        json.dump(results, f, indent=1)
    md = markdown(results)
    with open(stem + ".md", "w") as f:
        f.write(md)
    print(md)
    log(f"results: {stem}.md and {stem}.json")


if __name__ == "__main__":
    main()
