#!/usr/bin/python3
"""`prov run -- /bin/true` of two or more prov installations, run alternately
in one loop (so the machine's drift hits each alike), as USER, each with a
HOME of its own under /var/tmp/prov-compare-run. Prints the wall time and
prov run's own report (PROV_BENCH_REPORT) per installation.

    sudo benches/compare_run.py N USER PREFIX1 PREFIX2 ...

PROV_COMPARE_PAUSE_MS=MS waits that long after each run (default 0: back
to back, as a script's runs come; work a run leaves behind, such as the run
preparer making the next observation ready, then overlaps the next run).
PROV_COMPARE_COLD=1 runs each `prov run` with PROV_RUN_LINGER=0: no run
preparer, so every run starts its own observation (helper, collector and
writer on its path), as the one `prov run` of a batch job on a fresh node.
"""
import json
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import time


def main():
    n, user, prefixes = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    pw = pwd.getpwnam(user)

    def demote():
        os.setgid(pw.pw_gid)
        os.setgroups([])
        os.setuid(pw.pw_uid)

    homes = {}
    for i, p in enumerate(prefixes):
        h = f"/var/tmp/prov-compare-run/{i}"
        shutil.rmtree(h, ignore_errors=True)
        os.makedirs(h)
        os.chown(h, pw.pw_uid, pw.pw_gid)
        homes[p] = h
    pause = float(os.environ.get("PROV_COMPARE_PAUSE_MS", "0")) / 1e3
    cold = os.environ.get("PROV_COMPARE_COLD") == "1"
    walls = {p: [] for p in prefixes}
    plain = []
    warm = 3
    for i in range(n + warm):
        for p in prefixes if i % 2 else prefixes[::-1]:
            env = {"HOME": homes[p], "PATH": "/usr/bin:/bin", "PROV_BENCH_REPORT": homes[p] + "/report.jsonl"}
            if cold:
                env["PROV_RUN_LINGER"] = "0"
            # stderr to a file, as a terminal's or a batch job's: on a pipe
            # `prov run` waits for its record to be stored (run_handover.rs).
            with open(homes[p] + "/stderr", "ab") as err:
                t0 = time.perf_counter()
                subprocess.run([p + "/bin/prov", "run", "--", "/bin/true"], env=env, preexec_fn=demote, cwd=homes[p],
                               stderr=err)
            if i >= warm:
                walls[p].append((time.perf_counter() - t0) * 1e3)
            time.sleep(pause)
        t0 = time.perf_counter()
        subprocess.run(["/bin/true"], preexec_fn=demote)
        if i >= warm:
            plain.append((time.perf_counter() - t0) * 1e3)
        time.sleep(pause)
    print(f"untraced /bin/true: median {statistics.median(plain):.2f} ms")
    for p in prefixes:
        with open(homes[p] + "/stderr", errors="replace") as f:
            said = f.read().strip()
        if said:
            print(f"{p}: prov run said: {said[:300]}", file=sys.stderr)
        with open(homes[p] + "/report.jsonl") as f:
            reports = [json.loads(line) for line in f][warm:]

        def ms(key):
            return statistics.median(r.get(key, 0) for r in reports) / 1e6

        print(f"{p}: prov run wall median {statistics.median(walls[p]):.2f} ms (min {min(walls[p]):.2f}); "
              f"from the start: confirmed {ms('begun_ns'):.2f}, command ended {ms('command_ns'):.2f}, "
              f"stored {ms('total_ns'):.2f}; collector+writer CPU {ms('collector_cpu_ns'):.2f} ms")


if __name__ == "__main__":
    main()
