//! Finding the processes of an observation (`prov run`'s collector, its
//! writer, the holder) so that a test can stop, kill or watch them.

use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use crate::{describe, Case};

/// The run preparers (`prov __run-preparer`) of this case, by pid: the
/// processes with that argument and the case's HOME.
pub fn preparers(case: &Case) -> Vec<u32> {
    let home = format!("HOME={}", case.home.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            cmdline.split(|&b| b == 0).any(|a| a == b"__run-preparer")
                && environ.split(|&b| b == 0).any(|v| v == home.as_bytes())
        })
        .collect()
}

/// (pid, Name) of the children of `parent`.
pub fn children_of(parent: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // "pid (comm) S ppid …": comm may hold spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        let ppid = after.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            let name = status_field(pid, "Name").unwrap_or_default();
            out.push((pid, name));
        }
    }
    out
}

/// A field of /proc/PID/status, trimmed.
pub fn status_field(pid: u32, name: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).map(|v| v.trim().to_string())
}

/// The child of `parent` named `name`, waited for.
pub fn child_named(parent: u32, name: &str) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some((pid, _)) = children_of(parent).into_iter().find(|(_, n)| n == name) {
            return pid;
        }
        assert!(Instant::now() < deadline, "no {name} under process {parent}: {:?}", children_of(parent));
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The collector observing the `prov run` `run`: its child when the run
/// started its own observation, else one the user's run preparer started
/// (`crates/prov-cli/src/run/preparer.rs`), told by its holder (a child
/// named prov-helper) being in the mount namespace of the run's command.
/// Waited for; one look at /proc per try (the tests that kill it at a
/// random moment of a short command need it found quickly).
pub fn collector_of(run: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mnt = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
    loop {
        let table = process_table();
        let children = |parent: u32| table.iter().filter(move |(_, ppid, _)| *ppid == parent);
        if let Some((pid, _, _)) = children(run).find(|(_, _, n)| n == "prov-collector") {
            return *pid;
        }
        // The command (once it has joined), not the preparer a run may start.
        let commands: Vec<_> =
            children(run).filter(|(_, _, n)| n != "prov").filter_map(|(pid, _, _)| mnt(*pid)).collect();
        for (collector, _, _) in table.iter().filter(|(_, _, n)| n == "prov-collector") {
            let holder_ns = children(*collector).filter(|(_, _, n)| n == "prov-helper").find_map(|(h, _, _)| mnt(*h));
            if holder_ns.is_some_and(|ns| commands.contains(&ns)) {
                return *collector;
            }
        }
        assert!(Instant::now() < deadline, "no collector of prov run {run}: {:?}", children_of(run));
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `collector_of`, once it has answered `Ready` (`prov run` then writes the
/// record's start file in the case's spool): a test that stops it must not
/// stop it before, or `prov run` waits out the helper's 10 s and runs the
/// command untraced (seen under load).
pub fn collector_answered(case: &Case, run: u32) -> u32 {
    let collector = collector_of(run);
    let spool = case.spool_dir();
    let start_written = || {
        std::fs::read_dir(&spool)
            .is_ok_and(|d| d.flatten().any(|e| e.file_name().to_string_lossy().ends_with(".start.jsonl")))
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !start_written() {
        assert!(Instant::now() < deadline, "prov run {run} never wrote the record's start");
        std::thread::sleep(Duration::from_millis(2));
    }
    collector
}

/// (pid, parent pid, comm) of every process, from one read of each
/// /proc/PID/stat.
fn process_table() -> Vec<(u32, u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let comm = stat[open + 1..close].to_string();
        let Some(ppid) = stat[close + 1..].split_whitespace().nth(1).and_then(|p| p.parse().ok()) else { continue };
        out.push((pid, ppid, comm));
    }
    out
}

/// `prov run -- sh -c SCRIPT` as the user, its output captured.
pub fn spawn_prov_run(case: &Case, script: &str) -> Child {
    case.command(case.inst.prov())
        .args(["run", "--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child` to exit; one that is still there after `limit` is a
/// hang (killed, so the test ends), not a slow machine.
pub fn wait_or_hang(mut child: Child, limit: Duration, what: &str) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("{what} hung (still running after {limit:?}): {}", describe(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Writes `data` into `fifo` once a reader has it open; a reader that never
/// comes (the shell gone) fails the test instead of hanging it.
pub fn write_fifo(fifo: &std::path::Path, data: &[u8]) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(fifo) {
            Ok(mut f) => return f.write_all(data).unwrap(),
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("nobody reads {}: {e}", fifo.display()),
        }
    }
}

/// The collector observing the process named `comm` that `parent` started:
/// the parent of the holder that sits in that process's mount namespace.
pub fn collector_of_child_of(parent: u32, comm: &str) -> Option<u32> {
    let status = |pid: &str, key: &str| -> Option<String> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        text.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string())
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let pids: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .collect();
        let child = pids
            .iter()
            .find(|p| status(p, "Name:").as_deref() == Some(comm) && status(p, "PPid:") == Some(parent.to_string()));
        // Both namespaces must be known: a process that already exited (or
        // a zombie) has none, and two unknowns must not match another
        // test's observation.
        if let Some(ns) = child.and_then(|c| std::fs::read_link(format!("/proc/{c}/ns/mnt")).ok()) {
            for p in &pids {
                let same_ns = std::fs::read_link(format!("/proc/{p}/ns/mnt")).ok().as_ref() == Some(&ns);
                if status(p, "Name:").as_deref() == Some("prov-helper") && same_ns {
                    let collector = status(p, "PPid:").unwrap_or_default();
                    if status(&collector, "Name:").as_deref() == Some("prov-collector") {
                        return collector.parse().ok();
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}
