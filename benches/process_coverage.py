#!/usr/bin/env python3
"""The process table's coverage and cost, standalone (benches/README.md,
"Processes inside a command"): `make -j2` of the compile workload's C project
(Debian's zlib source) and a Snakemake workflow of four rules, each run
untraced and under `prov run`, alternating, as an ordinary user. Reports the
median wall times, their ratio, the processes recorded and the share with
their arguments, and database bytes per file event.

    sudo benches/process_coverage.py --prefix PREFIX --zlib DIR [--runs 5]

PREFIX: a prov installation (packaging/install.sh --prefix PREFIX).
DIR: an unpacked `apt-get source zlib`. Needs the user `provtest` (the tests
create it) and snakemake in /opt/prov-test-venv (tests/run sets it up).
Python 3 stdlib only.
"""
import argparse
import json
import os
import pwd
import shutil
import statistics
import subprocess
import time

USER = "provtest"
WORK = "/var/tmp/prov-bench-processes"
SNAKEMAKE = "/opt/prov-test-venv/bin/snakemake"

SNAKEFILE = '''SAMPLES = [f"s{i}" for i in range(8)]
rule all:
    input: "summary.txt"
rule make_input:
    output: "data/{s}.txt"
    shell: "seq 1 2000 | sort -r > {output}"
rule sort:
    input: "data/{s}.txt"
    output: "sorted/{s}.txt"
    shell: "sort -n {input} > {output}"
rule count:
    input: "sorted/{s}.txt"
    output: "counts/{s}.txt"
    shell: "python3 -c 'import sys; print(len(open(sys.argv[1]).readlines()))' {input} > {output}"
rule summary:
    input: expand("counts/{s}.txt", s=SAMPLES)
    output: "summary.txt"
    shell: "cat {input} > {output}"
'''


def as_user(home, argv):
    pw = pwd.getpwnam(USER)
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups", "--",
            "env", "-i", f"HOME={home}", f"USER={USER}", "LANG=C.UTF-8",
            "PATH=/usr/local/bin:/usr/bin:/bin", *argv]


def chown(path):
    pw = pwd.getpwnam(USER)
    subprocess.run(["chown", "-R", f"{pw.pw_uid}:{pw.pw_gid}", path], check=True)


def fresh_home(label):
    home = os.path.join(WORK, "homes", label)
    shutil.rmtree(home, ignore_errors=True)
    os.makedirs(home)
    chown(home)
    return home


def timed(argv, cwd):
    t = time.monotonic()
    r = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{argv[-1]} failed: {r.stderr[-500:]}")
    return time.monotonic() - t


def db_figures(home):
    code = ("import sqlite3,os,json,sys\n"
            "db=sys.argv[1]\n"
            "c=sqlite3.connect(db)\n"
            "c.execute('PRAGMA wal_checkpoint(TRUNCATE)')\n"
            "ev=c.execute('select count(*) from file_events').fetchone()[0]\n"
            "p,pa=c.execute('select count(*),coalesce(sum(args is not null),0) from processes').fetchone()\n"
            "missed=c.execute(\"select exe,count(*) from processes where args is null group by exe "
            "order by 2 desc limit 5\").fetchall()\n"
            "c.close()\n"
            "size=sum(os.path.getsize(x) for x in (db,db+'-wal') if os.path.exists(x))\n"
            "print(json.dumps({'events':ev,'processes':p,'with_args':pa,'db_bytes':size,"
            "'missed':[[e.decode(errors='replace') if e else '',n] for e,n in missed]}))\n")
    db = os.path.join(home, ".local/share/prov/prov.db")
    out = subprocess.run(as_user(home, ["python3", "-c", code, db]), capture_output=True, text=True, cwd="/")
    return json.loads(out.stdout)


def measure(name, cwd, command, reset, prefix, runs):
    prov = os.path.join(prefix, "bin", "prov")
    untraced, traced, figures = [], [], []
    for i in range(runs + 1):  # the first round warms up
        reset()
        home = fresh_home(f"{name}-untraced")
        u = timed(as_user(home, ["sh", "-c", command]), cwd)
        reset()
        home = fresh_home(f"{name}-prov-{i}")
        t = timed(as_user(home, [prov, "run", "--", "sh", "-c", command]), cwd)
        if i == 0:
            continue
        untraced.append(u)
        traced.append(t)
        figures.append(db_figures(home))
    med = statistics.median
    share = [f["with_args"] / f["processes"] for f in figures if f["processes"]]
    return {
        "workload": name, "runs": runs,
        "untraced_s": med(untraced), "prov_s": med(traced), "ratio": med(traced) / med(untraced),
        "processes": med(f["processes"] for f in figures),
        "with_args_share": med(share) if share else None,
        "share_min": min(share) if share else None,
        "bytes_per_event": med(f["db_bytes"] / f["events"] for f in figures if f["events"]),
        "missed_last_run": figures[-1]["missed"],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--zlib", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--snakemake", default=SNAKEMAKE,
                    help="a snakemake the user can run (default: the test venv's)")
    a = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    results = []

    src = os.path.join(WORK, "zlib")
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(a.zlib, src, symlinks=True)
    chown(src)
    subprocess.run(as_user(fresh_home("configure"), ["sh", "-c", "./configure >/dev/null"]), cwd=src, check=True)
    results.append(measure("make -j2 (zlib)", src, "make clean >/dev/null; make -j2 >/dev/null",
                           lambda: None, a.prefix, a.runs))
    print(json.dumps(results[-1]), flush=True)

    flow = os.path.join(WORK, "snakemake")
    shutil.rmtree(flow, ignore_errors=True)
    os.makedirs(flow)
    with open(os.path.join(flow, "Snakefile"), "w") as f:
        f.write(SNAKEFILE)
    chown(flow)

    def reset_flow():
        for d in ("data", "sorted", "counts", ".snakemake"):
            shutil.rmtree(os.path.join(flow, d), ignore_errors=True)
        if os.path.exists(os.path.join(flow, "summary.txt")):
            os.remove(os.path.join(flow, "summary.txt"))

    results.append(measure("snakemake --cores 2 (4 rules, 25 jobs)", flow,
                           f"XDG_CACHE_HOME=$HOME/.cache {a.snakemake} --cores 2 --quiet all >/dev/null 2>&1",
                           reset_flow, a.prefix, a.runs))

    print("| workload | runs | untraced | prov run | ratio | processes | with arguments (median, min) "
          "| B/event (db incl. processes) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        share = (f"{100 * r['with_args_share']:.0f} % ({100 * r['share_min']:.0f} %)"
                 if r["with_args_share"] is not None else "-")
        print(f"| {r['workload']} | {r['runs']} | {r['untraced_s']:.2f} s | {r['prov_s']:.2f} s | "
              f"{r['ratio']:.2f}× | {r['processes']:.0f} | {share} | {r['bytes_per_event']:.0f} |")
    print()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
