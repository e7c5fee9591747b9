#!/usr/bin/env python3
"""What idle traced shells cost (benches/README.md, "What an idle traced
shell costs"). As root:

    benches/idle_shell.py PREFIX USER bash|zsh N [IDLE_SECONDS]

starts N interactive shells as USER in ptys with the integration of the
installation at PREFIX, lets each run one line and go idle at its prompt
with its next observation ready for IDLE_SECONDS (default 40: past the
30 s after which a collector lets its idle writer go), then counts the processes below the
shells by name: processes, threads (what `ulimit -u` counts), RSS, PSS
(smaps_rollup) and fanotify groups (descriptors)."""
import os, pty, sys, time, subprocess, select, pwd

prefix, user, shell, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
idle = float(sys.argv[5]) if len(sys.argv) > 5 else 40.0
pw = pwd.getpwnam(user)
home = f"/tmp/prov-idle-shell-{shell}"
subprocess.run(["rm", "-rf", home]); os.makedirs(home)
rc = ".bashrc" if shell == "bash" else ".zshrc"
open(f"{home}/{rc}", "w").write(f"PS1='P> '\nPROMPT='P> '\neval \"$({prefix}/bin/prov init {shell})\"\n")
subprocess.run(["chown", "-R", f"{pw.pw_uid}:{pw.pw_gid}", home])

def children():
    kids = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit(): continue
        try:
            st = open(f"/proc/{pid}/stat").read()
            ppid = int(st.rsplit(")", 1)[1].split()[1])
        except Exception:
            continue
        kids.setdefault(ppid, []).append(int(pid))
    return kids

def prov_procs(roots):
    kids = children()
    todo = list(roots); seen = []
    while todo:
        p = todo.pop(); seen.append(p); todo.extend(kids.get(p, []))
    out = []
    for pid in seen:
        try:
            st = open(f"/proc/{pid}/status").read()
            name = [l for l in st.splitlines() if l.startswith("Name:")][0].split()[1]
        except Exception:
            continue
        rss = int([l for l in st.splitlines() if l.startswith("VmRSS:")][0].split()[1]) if "VmRSS:" in st else 0
        thr = int([l for l in st.splitlines() if l.startswith("Threads:")][0].split()[1])
        try:
            pss = int([l for l in open(f"/proc/{pid}/smaps_rollup").read().splitlines() if l.startswith("Pss:")][0].split()[1])
        except Exception:
            pss = 0
        fan = 0
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if "fanotify" in os.readlink(f"/proc/{pid}/fd/{fd}"): fan += 1
                except OSError: pass
        except OSError: pass
        out.append((pid, name, thr, rss, pss, fan))
    return out

shells = []
for i in range(n):
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp("setpriv", ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups", "--",
                             "env", "-i", f"HOME={home}", "PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb", shell, "-i"])
    shells.append((pid, fd))
def drain(fd, t):
    end = time.time() + t; buf = b""
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try: buf += os.read(fd, 4096)
            except OSError: break
    return buf
for pid, fd in shells:
    drain(fd, 2)
    os.write(fd, b"true\n")
for pid, fd in shells:
    drain(fd, idle / n)
if os.environ.get("IDLE_SHELL_TREE"):
    subprocess.run(["ps", "-u", user, "--forest", "-o", "pid,ppid,nlwp,args"])
procs = prov_procs([pid for pid, fd in shells])
names = {}
for p in procs:
    d = names.setdefault(p[1], [0, 0, 0, 0, 0]); d[0] += 1; d[1] += p[3]; d[2] += p[4]; d[3] += p[5]; d[4] += p[2]
print(f"{n} idle {shell} shell(s):")
for k, (c, rss, pss, fan, thr) in sorted(names.items()):
    print(f"  {k:16} processes {c:3}  threads {thr:3}  RSS {rss/1024:7.1f} MiB  PSS {pss/1024:7.1f} MiB  fanotify groups {fan}")
tot = [sum(v[i] for k, v in names.items() if k not in ("bash", "zsh")) for i in range(5)]
print(f"  prov total       processes {tot[0]:3}  threads {tot[4]:3}  RSS {tot[1]/1024:7.1f} MiB  PSS {tot[2]/1024:7.1f} MiB  fanotify groups {tot[3]}")
for pid, fd in shells:
    os.write(fd, b"exit\n")
time.sleep(1)
for pid, fd in shells:
    try: os.kill(pid, 9)
    except OSError: pass
