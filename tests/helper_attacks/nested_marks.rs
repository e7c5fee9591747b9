//! `prov-helper mark-nested HOLDER GROUP TARGET` marks the mount namespace
//! TARGET is in (docs/containers.md): only one the user made without
//! privilege, for the observation's own collector. Every other request is
//! refused before anything is marked, and the group gets no event.

use std::time::Duration;

use super::*;

/// A group made with privilege (root makes it, as some other program might
/// let one slip to the user) handed to `mark-nested HOLDER FD TARGET` run
/// as the user; what the helper said, its exit status, and how many event
/// bytes reached the group in the half second after.
fn mark_nested_as_user(case: &Case, holder: u32, target: u32) -> String {
    let python = format!(
        r#"
import ctypes, os, subprocess, time
libc = ctypes.CDLL(None)
fd = libc.fanotify_init(0x3, os.O_RDONLY)
run = subprocess.run(["setpriv", "--reuid={uid}", "--regid={gid}", "--init-groups", "{helper}", "mark-nested",
                      "{holder}", str(fd), "{target}"], pass_fds=(fd,), capture_output=True, text=True)
time.sleep(0.5)
events = 0
try:
    events = len(os.read(fd, 65536))
except BlockingIOError:
    pass
print(run.stdout.strip(), run.stderr.strip(), "exit=%d" % run.returncode, "event bytes %d" % events)
"#,
        uid = case.inst.uid,
        gid = case.inst.gid,
        helper = case.inst.helper().display(),
    );
    let out = Command::new("python3").args(["-c", &python]).output().unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_refused(said: &str, pid: u32, what: &str) {
    let refused = format!("refusing to mark: process {pid} is not in a mount namespace you made");
    assert!(said.contains(&refused) && said.contains("exit=1"), "{what}: {said}");
    assert!(said.contains("event bytes 0"), "{what}: the group got events: {said}");
}

/// A process writing a file every 50 ms until killed, from `cmd`.
fn writer(mut cmd: Command) -> std::process::Child {
    cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

const WRITE_LOOP: &str = "while :; do echo x > \"$0\"; sleep 0.05; done";

/// Root's namespace, another user's, the user's own processes outside any
/// namespace of theirs: refused, whoever asks (here even with a real
/// observation's holder), and nothing is marked.
#[test]
fn mark_nested_refuses_namespaces_the_user_did_not_make() {
    let _quota = root_quota_shared();
    let case = Case::new("marknested-others");
    let mut observed = case.command(case.inst.prov()).args(["run", "--", "sleep", "8"]).spawn().unwrap();
    let (_, holder) = observation_processes(case.inst.uid);

    // Made by root (`unshare -m` execs the shell in its own process).
    let mut by_root = Command::new("unshare");
    by_root.args(["-m", "--propagation", "private", "sh", "-c", WRITE_LOOP]).arg(case.work.join("root.txt"));
    let mut by_root = writer(by_root);
    // Another user's (nobody), in a user namespace of theirs.
    let mut by_other = Command::new("setpriv");
    by_other.args(["--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "-Urm", "sh", "-c", WRITE_LOOP]);
    by_other.arg(format!("/tmp/prov-marknested-{}", std::process::id()));
    let mut by_other = writer(by_other);
    // The user's own, in the initial namespaces (never a namespace of theirs).
    let mut plain = writer({
        let mut c = case.command("sh");
        c.args(["-c", WRITE_LOOP, "plain.txt"]);
        c
    });
    std::thread::sleep(Duration::from_millis(300));
    for (child, what) in [(&by_root, "root's namespace"), (&by_other, "nobody's namespace"), (&plain, "no namespace")] {
        let said = mark_nested_as_user(&case, holder, child.id());
        assert_refused(&said, child.id(), what);
    }
    for child in [&mut by_root, &mut by_other, &mut plain] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let _ = std::fs::remove_file(format!("/tmp/prov-marknested-{}", std::process::id()));
    assert!(observed.wait().unwrap().success());
}

/// A namespace the user did make, asked for by a process that is not the
/// observation's collector: refused.
#[test]
fn mark_nested_is_only_for_the_collector() {
    let _quota = root_quota_shared();
    let case = Case::new("marknested-caller");
    let mut observed = case.command(case.inst.prov()).args(["run", "--", "sleep", "8"]).spawn().unwrap();
    let (_, holder) = observation_processes(case.inst.uid);
    let mut own = case.command("unshare");
    own.args(["-Urm", "sh", "-c", WRITE_LOOP, "own.txt"]);
    let mut own = writer(own);
    std::thread::sleep(Duration::from_millis(300));
    let said = mark_nested_as_user(&case, holder, own.id());
    assert!(said.contains("only the observation's own collector may") && said.contains("exit=1"), "{said}");
    assert!(said.contains("event bytes 0"), "the group got events: {said}");
    own.kill().unwrap();
    own.wait().unwrap();
    assert!(observed.wait().unwrap().success());
}

/// The pid the collector asks about is gone, and root's process in a
/// namespace of root's has its number now (the kernel hands out the next
/// pid after ns_last_pid): the helper judges the process that holds the
/// number, and refuses.
#[test]
fn mark_nested_refuses_a_pid_reused_by_root() {
    let _quota = root_quota_shared();
    let case = Case::new("marknested-reuse");
    let mut observed = case.command(case.inst.prov()).args(["run", "--", "sleep", "8"]).spawn().unwrap();
    let (_, holder) = observation_processes(case.inst.uid);
    let mut reused = None;
    // Other processes on the machine may take the number first: a few tries.
    for _ in 0..20 {
        let mut gone = case.command("unshare").args(["-Urm", "true"]).spawn().unwrap();
        let pid = gone.id();
        gone.wait().unwrap();
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
        let mut by_root = Command::new("unshare");
        by_root.args(["-m", "--propagation", "private", "sh", "-c", WRITE_LOOP]).arg(case.work.join("root.txt"));
        let by_root = writer(by_root);
        if by_root.id() == pid {
            reused = Some(by_root);
            break;
        }
        let mut by_root = by_root;
        by_root.kill().unwrap();
        by_root.wait().unwrap();
    }
    let mut by_root = reused.expect("root's process got the number of the user's that exited");
    std::thread::sleep(Duration::from_millis(200));
    let said = mark_nested_as_user(&case, holder, by_root.id());
    assert_refused(&said, by_root.id(), "a reused pid");
    by_root.kill().unwrap();
    by_root.wait().unwrap();
    assert!(observed.wait().unwrap().success());
}

/// What a setns can put a process of the user's in: root's namespace, or
/// another user's (root moved it there; the user cannot enter either).
/// The process is the user's in every id and dumpable, as one that entered
/// a namespace of the user's own would be: refused, nothing marked.
#[test]
fn mark_nested_refuses_the_users_process_entered_into_others_namespaces() {
    let _quota = root_quota_shared();
    let case = Case::new("marknested-entered");
    let mut observed = case.command(case.inst.prov()).args(["run", "--", "sleep", "8"]).spawn().unwrap();
    let (_, holder) = observation_processes(case.inst.uid);
    let mut roots = Command::new("unshare");
    roots.args(["-m", "--propagation", "private", "sleep", "30"]);
    let mut roots = roots.spawn().unwrap();
    let mut nobodys = Command::new("setpriv");
    nobodys.args(["--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "-Urm", "sleep", "30"]);
    let mut nobodys = nobodys.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // The user's write loop, started by root inside the namespace.
    let entered = |owner: u32, file: &str| {
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &owner.to_string(), "-m", "setpriv"])
            .arg(format!("--reuid={}", case.inst.uid))
            .arg(format!("--regid={}", case.inst.gid))
            .args(["--init-groups", "sh", "-c", WRITE_LOOP])
            .arg(case.work.join(file));
        writer(cmd)
    };
    let mut in_roots = entered(roots.id(), "in-roots.txt");
    let mut in_nobodys = entered(nobodys.id(), "in-nobodys.txt");
    std::thread::sleep(Duration::from_millis(300));
    for (child, what, file) in
        [(&in_roots, "root's namespace", "in-roots.txt"), (&in_nobodys, "nobody's namespace", "in-nobodys.txt")]
    {
        assert!(case.work.join(file).exists(), "{what}: the user's process does not run there");
        let said = mark_nested_as_user(&case, holder, child.id());
        assert_refused(&said, child.id(), what);
    }
    for child in [&mut in_roots, &mut in_nobodys, &mut roots, &mut nobodys] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    assert!(observed.wait().unwrap().success());
}
