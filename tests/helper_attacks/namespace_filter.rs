//! The namespace filter's listener (docs/containers.md) can fake the result
//! of a setuid program's stopped call: it must reach the observation's own
//! collector and nothing the user holds.

use super::*;

/// A join whose TRACKER_FD is a socket of the user's own (one end of a
/// socketpair the user made, the other end kept to read what comes): the
/// helper installs no filter and sends nothing with a descriptor on it; the
/// program still runs, traced.
#[test]
fn a_tracker_of_the_users_own_gets_no_listener() {
    let case = Case::new("nsfilter-own-tracker");
    let mut observed = case.command(case.inst.prov()).args(["run", "--", "sleep", "5"]).spawn().unwrap();
    let (_, holder) = observation_processes(case.inst.uid);
    let marker = case.work.join("filters.txt");
    let python = format!(
        r#"
import array, os, socket, subprocess
mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
fd = theirs.fileno()
os.set_inheritable(fd, True)
run = subprocess.run(["{helper}", "join", "{holder}", "-", str(fd), "/bin/sh", "sh", "-c",
                      "grep Seccomp_filters /proc/self/status > {marker}"], pass_fds=(fd,))
theirs.close()
mine.setblocking(False)
got = []
while True:
    try:
        msg, anc, _, _ = mine.recvmsg(4096, socket.CMSG_SPACE(16))
    except BlockingIOError:
        break
    if not msg and not anc:
        break
    got.append((msg[:1], len(anc)))
print("exit", run.returncode, "messages", got)
"#,
        helper = case.inst.helper().display(),
        marker = marker.display(),
    );
    let out = case.command("python3").args(["-c", &python]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && said.contains("exit 0"), "{}", describe(&out));
    // Nothing came with a descriptor; no filter is on the program.
    assert!(!said.contains(", 1)") && !said.contains("b'S'"), "{said}");
    let filters = std::fs::read_to_string(&marker).expect("the program ran");
    assert!(filters.contains("Seccomp_filters:\t0"), "{filters}");
    assert!(observed.wait().unwrap().success());
}

/// Through prov run the filter is on the command, and its listener is in
/// none of the command's descriptors: the collector alone holds it.
#[test]
fn the_listener_is_not_among_the_commands_descriptors() {
    let case = Case::new("nsfilter-fds");
    let out = case.run_sh("grep Seccomp_filters /proc/self/status; ls -l /proc/self/fd/ /proc/$$/fd/");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("Seccomp_filters:\t1"), "the filter is on the command: {said}");
    assert!(!said.contains("seccomp"), "a listener reached the command: {said}");
}
