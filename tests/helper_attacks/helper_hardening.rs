//! Issue #10: what the helper must hold for an administrator to approve it.
//! A chrooted caller keeps its jail; every kernel object an observation
//! creates is charged to the user; the kernel queue is bounded; a collector
//! never looks like a holder and cannot be inspected by the user.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use prov_e2e::processes::{child_named, collector_answered, collector_of, spawn_prov_run, status_field};
use prov_e2e::*;

/// Runs a clean-up when dropped, whether the test passed or not: nothing it
/// started may be left waiting.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

fn wait_for(path: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{what}: {} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `prov run` of a command that lasts until the file `stop` (in the work
/// directory) exists; returns the child and the collector's pid. The
/// helper's `observe` becomes the collector, a child of `prov run`.
fn running_observation(case: &Case, stop: &str) -> (Child, u32) {
    let child = spawn_prov_run(case, &format!("while [ ! -e {stop} ]; do sleep 0.05; done"));
    let collector = collector_of(child.id());
    (child, collector)
}

// --------------------------------------------------------- 1. chroot jail

/// A jail as an administrator builds one (its own mount, /usr, /etc, /dev
/// and /proc bound in, `chroot --userspec`), made in a private mount namespace so the host
/// is untouched. The install prefix and one shared directory are bound at
/// their own paths, so the shared directory is reachable by the same path
/// inside and outside the jail.
struct Jail {
    case: Case,
    dir: PathBuf,
    shared: PathBuf,
    secret: PathBuf,
}

const JAIL_ONLY_DIR: &str = "/prov-jail-only-dir";
const JAIL_HOME: &str = "/prov-jail-home";

impl Jail {
    fn new(name: &str) -> Jail {
        let case = Case::new(name);
        let dir = case.work.join("jail");
        let shared = case.work.join("shared");
        let secret = case.work.join("outside-the-jail.txt");
        for d in [dir.clone(), shared.clone()] {
            std::fs::create_dir_all(d).unwrap();
        }
        // Readable by the user: only the jail keeps them from it.
        std::fs::write(&secret, "outside the jail\n").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        case.chown_tree(&shared);
        for d in ["usr", "etc", "dev", "proc", "tmp", &JAIL_ONLY_DIR[1..], &JAIL_HOME[1..]] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        for (link, to) in [("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")] {
            std::os::unix::fs::symlink(to, dir.join(link)).unwrap();
        }
        std::fs::write(dir.join("JAIL-ROOT"), "").unwrap();
        for d in [&JAIL_ONLY_DIR[1..], &JAIL_HOME[1..]] {
            case.chown_tree(&dir.join(d));
        }
        Jail { case, dir, shared, secret }
    }

    /// Runs `script` with sh inside the jail as the user, from `cwd` (a path
    /// inside the jail).
    fn run(&self, cwd: &str, script: &str) -> Output {
        self.run_with_proc(cwd, script, true)
    }

    /// `run`, with the kernel's /proc mounted in the jail or, without, the
    /// jail's own /proc directory, which the user may fill.
    fn run_with_proc(&self, cwd: &str, script: &str, proc: bool) -> Output {
        // Root makes the jail's mount namespace.
        let _quota = super::root_quota_shared();
        let inst = self.case.inst;
        let setup = r#"set -e
            j=$1 prefix=$2 shared=$3 user=$4 cwd=$5 script=$6 proc=$7
            mkdir -p "$j$prefix" "$j$shared"
            mount --bind "$j" "$j"
            mount --bind /usr "$j/usr"; mount --bind /etc "$j/etc"; mount --rbind /dev "$j/dev"
            [ "$proc" = no ] || mount -t proc proc "$j/proc"
            mount --bind "$prefix" "$j$prefix"; mount --bind "$shared" "$j$shared"
            exec chroot --userspec="$user" "$j" /usr/bin/env -i HOME=/prov-jail-home PATH=/usr/bin:/bin \
                LANG=C.UTF-8 /bin/sh -c 'cd "$1" && shift && exec /bin/sh -c "$@"' sh "$cwd" "$script"
        "#;
        Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", setup, "sh"])
            .arg(&self.dir)
            .arg(&inst.prefix)
            .arg(&self.shared)
            .arg(format!("{}:{}", inst.uid, inst.gid))
            .arg(cwd)
            .arg(script)
            .arg(if proc { "yes" } else { "no" })
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// What a command run in the jail prints about where it is, then exits 3.
    fn probe(&self) -> String {
        format!(
            "if [ -e /JAIL-ROOT ]; then echo jail-root; else echo HOST-ROOT; fi; cat {} 2>/dev/null || echo secret-unreadable; exit 3",
            self.secret.display()
        )
    }

    fn assert_kept_inside(&self, out: &Output, what: &str, says: &str) {
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "jail-root\nsecret-unreadable\n",
            "{what}: nothing outside the jail may be visible: {}",
            describe(out)
        );
        assert_eq!(out.status.code(), Some(3), "{what}: the command's status: {}", describe(out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{what}: one line says why it is untraced: {}", describe(out));
        assert!(err.contains(says) && err.contains("chroot"), "{what}: {}", describe(out));
    }
}

/// `prov run` from inside the jail: observe refuses (one line), the command
/// runs untraced and keeps its status, still in the jail.
#[test]
fn chrooted_caller_is_never_given_another_root_by_observe_and_join() {
    let jail = Jail::new("jail-run");
    let probe = jail.probe();
    let run = format!("{} run -- sh -c '{probe}'", jail.case.inst.prov().display());
    let shared = jail.shared.to_str().unwrap();
    for (what, cwd) in [("reachable directory", shared), ("jail-only directory", JAIL_ONLY_DIR)] {
        let out = jail.run(cwd, &run);
        jail.assert_kept_inside(&out, &format!("prov run from a {what}"), "prov: not tracing: ");
    }
}

/// The direct attack: an observation made outside the jail by the same
/// user, joined from inside the jail. The join is refused with one line and
/// the target runs as the user in its jail.
#[test]
fn chrooted_caller_cannot_join_an_observation_made_outside() {
    let jail = Jail::new("jail-join");
    let stop = jail.case.work.join("stop");
    let _stop = OnDrop(|| drop(std::fs::write(&stop, "")));
    let (mut outside, collector) = running_observation(&jail.case, "stop");
    let holder = child_named(collector, "prov-helper");
    let probe = jail.probe();
    let join = format!("{} join {holder} 0 - /bin/sh sh -c '{probe}'", jail.case.inst.helper().display());
    let shared = jail.shared.to_str().unwrap();
    let mut results = Vec::new();
    for (what, cwd) in [("reachable directory", shared), ("jail-only directory", JAIL_ONLY_DIR)] {
        results.push((what, jail.run(cwd, &join)));
    }
    std::fs::write(&stop, "").unwrap();
    let done = outside.wait().unwrap();
    assert!(done.success(), "the observation outside");
    for (what, out) in &results {
        jail.assert_kept_inside(out, &format!("join from a {what}"), "prov-helper: refusing to join: ");
        assert!(
            String::from_utf8_lossy(&out.stderr).trim_end().ends_with("; running it untraced"),
            "{}",
            describe(out)
        );
    }
}

/// In a jail, /proc is whatever the jail holds: a user with their own /proc
/// directory there points `self/exe` at the helper (so it passes its own
/// check) and `self/environ` at a file only root may read. `join -` must not
/// read that file into the command's environment: it opens the path as the
/// user only. (A first version opened it as root before the drop, and the
/// command printed the file.)
#[test]
fn a_jails_own_proc_cannot_hand_a_root_only_file_to_join() {
    let jail = Jail::new("jail-environ");
    let secret = jail.dir.join("ROOT-ONLY");
    std::fs::write(&secret, "LEAKED=root-only-content\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    jail.case.chown_tree(&jail.dir.join("proc"));
    let helper = jail.case.inst.helper();
    let script = format!(
        "mkdir -p /proc/self && ln -s {} /proc/self/exe && ln -s /ROOT-ONLY /proc/self/environ && \
         {} join 1 - - /usr/bin/env env; echo status=$?",
        helper.display(),
        helper.display()
    );
    let out = jail.run_with_proc(JAIL_HOME, &script, false);
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("status="), "the script ran to its end: {}", describe(&out));
    assert!(!said.contains("root-only-content"), "a root-only file reached the command: {}", describe(&out));
    assert!(said.contains("chroot"), "the join was refused as from a jail: {}", describe(&out));
}

// ------------------------------------------- 2. namespaces charged to user

/// Pins mount namespaces charged to its effective uid until the kernel says
/// no (user.max_mnt_namespaces, per uid), prints how many, and holds them
/// until stdin closes. Each namespace has one tmpfs mount, so the copies are
/// cheap; an fd of each keeps it alive (RLIMIT_NOFILE per process: a chain
/// of processes shares the work). Not root: in a user namespace of its own,
/// which is charged to the same uid at every level up.
const PINNER_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void hold(pid_t child) {
    char c;
    while (read(0, &c, 1) > 0) {}
    if (child > 0) waitpid(child, NULL, 0);
}

int main(void) {
    int flags = CLONE_NEWNS | (geteuid() == 0 ? 0 : CLONE_NEWUSER);
    if (unshare(flags) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) return perror("setup"), 2;
    int proc = open("/proc", O_PATH | O_DIRECTORY);
    if (proc < 0 || dup2(proc, 3) != 3) return perror("/proc"), 2;
    if (mount("pin", "/mnt", "tmpfs", 0, "size=4k") || chdir("/mnt")
        || syscall(SYS_pivot_root, ".", ".") || umount2(".", MNT_DETACH) || chdir("/")) return perror("pivot"), 2;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    long per_process = (long)rl.rlim_max - 64, held = 0, total = 0;
    for (;;) {
        if (held == per_process) {
            pid_t child = fork();
            if (child < 0) return perror("fork"), 2;
            if (child > 0) return hold(child), 0;
            syscall(436 /* SYS_close_range, absent from glibc 2.31's headers */, 4, ~0U, 0);
            held = 0;
        }
        if (unshare(CLONE_NEWNS)) {
            if (errno != ENOSPC) return perror("unshare"), 2;
            break;
        }
        if (openat(3, "thread-self/ns/mnt", O_RDONLY | O_CLOEXEC) < 0) return perror("ns"), 2;
        held++, total++;
    }
    printf("%ld\n", total);
    fflush(stdout);
    hold(0);
    return 0;
}
"#;

/// Every mount namespace its uid may have, held until dropped.
struct Pinned(Child);

impl Pinned {
    fn all_of(mut pinner: Command) -> Pinned {
        let mut child = pinner.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        let pinned = Pinned(child);
        assert!(line.trim().parse::<u64>().is_ok(), "the pinner failed: {line:?}");
        pinned
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

fn root_can_make_a_mount_namespace() -> bool {
    Command::new("unshare").args(["-m", "true"]).stderr(Stdio::null()).status().unwrap().success()
}

/// Mount namespaces count against the effective uid's
/// user.max_mnt_namespaces (the limit cannot be lowered here: no
/// CAP_SYS_RESOURCE, so each side is filled up to the real limit). With
/// root's count used up, the user is still traced; with a user's own count
/// used up, their observation is refused while root still makes namespaces.
#[test]
fn mount_namespaces_are_charged_to_the_user_not_root() {
    let _quota = super::root_quota_used_up();
    let case = Case::new("mntns-quota");
    let pinner = case.work.join("pin-mount-namespaces");
    std::fs::write(case.work.join("pinner.c"), PINNER_C).unwrap();
    let out = Command::new("gcc").args(["-O2", "-o"]).arg(&pinner).arg(case.work.join("pinner.c")).output().unwrap();
    assert!(out.status.success(), "gcc: {}", describe(&out));

    let out = {
        let _root = Pinned::all_of(Command::new(&pinner));
        assert!(!root_can_make_a_mount_namespace(), "root's mount namespaces are used up");
        case.run(["sh", "-c", "echo x > charged-ns.txt"])
    };
    assert_traced(&out);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(files(&case.writer_of("charged-ns.txt")).len(), 1);

    // Not the test user: this test exhausts its quota, which must not
    // starve the other tests running in parallel as the test user.
    let (uid, home) = spare_user_home(&case, 62_000..63_000, "mntns-quota");
    std::fs::set_permissions(&pinner, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&case.work, std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_spare_user = |program: &Path| command_as_uid(uid, case.inst.gid, &home, program);
    let (out, root_could) = {
        let _user = Pinned::all_of(as_spare_user(&pinner));
        let mut run = as_spare_user(&case.inst.prov());
        let out = run.args(["run", "--", "sh", "-c", "echo ran; exit 4"]).stdin(Stdio::null()).output().unwrap();
        (out, root_can_make_a_mount_namespace())
    };
    assert!(root_could, "a user's namespaces used up root's");
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    assert_eq!(out.stdout, b"ran\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{}", describe(&out));
    assert!(err.contains("not tracing") && err.contains("too many mount namespaces for this user"), "{err}");
}

// ------------------------------------------------------- 3. bounded queue

fn fanotify_flags(collector: u32) -> Vec<u32> {
    let mut flags = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{collector}/fdinfo")).unwrap().flatten() {
        let info = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in info.lines() {
            if let Some(hex) = line.strip_prefix("fanotify flags:") {
                let hex = hex.split_whitespace().next().unwrap();
                flags.push(u32::from_str_radix(hex, 16).unwrap());
            }
        }
    }
    flags
}

/// The user may SIGSTOP their collector: the kernel's queue must stay
/// bounded, and what did not fit is counted and makes the record incomplete.
#[test]
fn stopped_collector_leaves_a_bounded_queue_and_an_incomplete_record() {
    let case = Case::new("queue-bound");
    let max: usize =
        std::fs::read_to_string("/proc/sys/fs/fanotify/max_queued_events").unwrap().trim().parse().unwrap();
    let files = max + max / 4;
    let script = format!(
        "while [ ! -e go ]; do sleep 0.05; done; mkdir many; i=0; while [ $i -lt {files} ]; do : > many/f$i; i=$((i+1)); done; : > created; exit 7"
    );
    let child = spawn_prov_run(&case, &script);
    let go = case.work.join("go");
    let _go = OnDrop(|| drop(std::fs::write(&go, "")));
    let collector = collector_answered(&case, child.id());

    let flags = fanotify_flags(collector);
    assert_eq!(flags.len(), 1, "one fanotify group in the collector: {flags:?}");
    assert_eq!(flags[0] & 0x10, 0, "FAN_UNLIMITED_QUEUE set: fanotify flags {:x}", flags[0]);

    // As the user, who owns the collector's process.
    let kill = |sig: &str| {
        let st = case.command("kill").args([sig, &collector.to_string()]).status().unwrap();
        assert!(st.success(), "kill {sig}");
    };
    kill("-STOP");
    let _cont = OnDrop(|| drop(Command::new("kill").args(["-CONT", &collector.to_string()]).status()));
    std::fs::write(&go, "").unwrap();
    wait_for(&case.work.join("created"), "the command's files");
    kill("-CONT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(7), "the command's status is kept: {}", describe(&out));
    assert_traced(&out);

    let cmd = case.last_command_ended();
    assert_eq!(cmd["exit_status"], 7, "{cmd:#}");
    assert_eq!(cmd["complete"], false, "{files} files with the collector stopped: {cmd:#}");
    assert!(cmd["incomplete"]["queue_overflows"].as_u64().unwrap_or(0) > 0, "{cmd:#}");
}

// ------------------------------------------- 5. collector is no holder

/// A collector the user could read would start dumpable (the user could take
/// the fanotify group out of it): the helper refuses it with one line, and
/// the command runs untraced with its status.
#[test]
fn collector_readable_by_others_is_refused() {
    let case = Case::new("readable-collector");
    let dir = case.inst.root.join("readable-collector-libexec");
    let _ = std::fs::remove_dir_all(&dir);
    let st = Command::new("cp").arg("-a").arg(case.inst.prefix.join("libexec/prov")).arg(&dir).status().unwrap();
    assert!(st.success(), "cp -a");
    std::fs::set_permissions(dir.join("prov-collector"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = case
        .command(case.inst.prov())
        .env("PROV_HELPER", dir.join("prov-helper"))
        .args(["run", "--", "sh", "-c", "echo visible; exit 5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    assert_eq!(out.stdout, b"visible\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{}", describe(&out));
    assert!(err.contains("not tracing") && err.contains("prov-collector") && err.contains("readable"), "{err}");
}

/// From its exec on, the collector has the user's ids only: /proc/PID never
/// shows the prov group (which would pass join's holder check), and the user
/// can neither look into its descriptors nor ptrace it.
#[test]
fn collector_never_has_the_prov_group_and_cannot_be_inspected() {
    let case = Case::new("collector-start");
    let prov_gid = super::prov_gid().to_string();
    for round in 0..30 {
        let mut fds = [0; 2];
        // SAFETY: fds has room for the two descriptors socketpair writes.
        let r =
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
        assert_eq!(r, 0, "socketpair");
        let theirs = fds[1];
        let mut cmd = super::helper(&case);
        cmd.args(["observe", "3"]).stdout(Stdio::null()).stderr(Stdio::null());
        // SAFETY: dup2 is async-signal-safe; the copy at 3 is inheritable.
        unsafe {
            cmd.pre_exec(
                move || if libc::dup2(theirs, 3) == 3 { Ok(()) } else { Err(std::io::Error::last_os_error()) },
            );
        }
        // setpriv execs the helper, which execs the collector: one pid.
        let mut child = cmd.spawn().unwrap();
        // SAFETY: closing our copy of the helper's end.
        unsafe { libc::close(theirs) };
        let pid = child.id();
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let name = status_field(pid, "Name");
            let gid = status_field(pid, "Gid");
            if let (Some(name), Some(gid)) = (name, gid) {
                if name == "prov-collector" {
                    seen.push(gid.clone());
                    if seen.len() > 200 {
                        break;
                    }
                }
            }
            assert!(Instant::now() < deadline, "round {round}: no collector in process {pid}");
            if child.try_wait().unwrap().is_some() {
                break;
            }
        }
        assert!(!seen.is_empty(), "round {round}: the collector ran");
        for gid in &seen {
            assert!(
                !gid.split_whitespace().any(|g| g == prov_gid),
                "round {round}: collector with the prov group: Gid {gid}"
            );
        }
        if round == 0 {
            let fd_list = case.command("ls").arg(format!("/proc/{pid}/fd")).output().unwrap();
            assert!(!fd_list.status.success(), "the user lists the collector's descriptors: {}", describe(&fd_list));
            let attach = case
                .command("/usr/bin/python3")
                .args([
                    "-c",
                    "import ctypes, sys\n\
                     libc = ctypes.CDLL(None, use_errno=True)\n\
                     r = libc.ptrace(16, int(sys.argv[1]), 0, 0)\n\
                     print(r, ctypes.get_errno())",
                ])
                .arg(pid.to_string())
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&attach.stdout),
                "-1 1\n",
                "PTRACE_ATTACH must fail with EPERM: {}",
                describe(&attach)
            );
        }
        // SAFETY: our end; closing it ends the collector.
        unsafe { libc::close(fds[0]) };
        let _ = child.wait();
    }
}

/// The installed helper runs without a dynamic loader (static-pie, from
/// packaging/install.sh): no ld.so, library search path or `LD_*` variable
/// takes part in its privileged start. An ELF program header of type
/// PT_INTERP names the loader of a dynamically linked program.
#[test]
fn the_installed_helper_has_no_dynamic_loader() {
    const PT_INTERP: u32 = 3;
    let case = Case::new("static-helper");
    let elf = std::fs::read(case.inst.helper()).unwrap();
    assert_eq!(&elf[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    let types: Vec<u32> = (0..phnum)
        .map(|i| {
            let at = phoff + i * phentsize;
            u32::from_le_bytes(elf[at..at + 4].try_into().unwrap())
        })
        .collect();
    assert!(!types.is_empty(), "program headers");
    assert!(!types.contains(&PT_INTERP), "the helper names a dynamic loader: {types:?}");
}
