//! `prov run -- CMD…`: observe one command tree and store its record.

use std::ffi::{OsStr, OsString};
use std::io::{Seek, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::time::{SystemTime, UNIX_EPOCH};

use prov_collect::ipc;
use prov_collect::protocol::{CommandStart, StoreReport, ToCaller, ToCollector};
use prov_model::escape::{escape, escape_controls};
use prov_model::CommandEnd;

use crate::observe::{self, Observation};
use crate::setup::UserSetup;
use crate::spawn;

pub fn run(command: Vec<OsString>) -> ExitCode {
    let Some(program) = resolve_program(&command[0]) else {
        eprintln!("prov: {}: command not found", escape(command[0].as_bytes()));
        return ExitCode::from(127);
    };
    let session = std::env::var("PROV_SESSION").unwrap_or_else(|_| uuid::Uuid::now_v7().to_string());
    let observation = UserSetup::load()
        .map_err(|e| format!("{e:#}"))
        .and_then(|user| observe::start(&user, observe::identity(session, "run")));
    let mut obs = match observation {
        Ok(obs) => obs,
        Err(reason) => {
            eprintln!("prov: not tracing: {}", escape_controls(&reason));
            return run_untraced(&program, &command);
        }
    };
    let start_ns = now_ns();
    let start = CommandStart {
        seq: 1,
        text: shell_quote_words(&command),
        cwd: std::env::current_dir().map(|p| p.into_os_string().into_vec()).unwrap_or_default(),
        start_ns,
    };
    if let Err(e) = ipc::send_json(obs.ctl.as_fd(), &ToCollector::Begin(start), &[]) {
        eprintln!("prov: not tracing: collector unreachable: {e}");
        return run_untraced(&program, &command);
    }
    let child = match spawn_joined(&obs, &program, &command) {
        Ok(child) => child,
        Err(e) => {
            eprintln!("prov: cannot start {}: {e}", escape(command[0].as_bytes()));
            return ExitCode::from(126);
        }
    };
    // Only the command's processes hold the tracker now.
    drop(obs.tracker.take());
    spawn::ignore_terminal_signals();
    let status = wait(child);
    let end = CommandEnd { end_ns: now_ns(), exit_status: shell_status(status), text: None };
    let command_ns = end.end_ns - start_ns;
    match finish(&obs, end) {
        Ok(report) => {
            report_problems(&report);
            bench_report(command_ns, now_ns() - start_ns, &report);
        }
        Err(e) => eprintln!("prov: record may be incomplete: {e}"),
    }
    ExitCode::from(shell_status(status) as u8)
}

/// Starts the command through the helper's join mode, so it begins life
/// inside the observed namespace.
fn spawn_joined(obs: &Observation, program: &Path, command: &[OsString]) -> std::io::Result<Child> {
    let env = environment_memfd()?;
    let tracker = obs.tracker.as_ref().map(|t| t.as_raw_fd());
    let mut cmd = Command::new(&obs.helper);
    cmd.arg("join")
        .arg(obs.holder_pid.to_string())
        .arg(env.as_raw_fd().to_string())
        .arg(tracker.map_or("-".to_string(), |fd| fd.to_string()))
        .arg(program)
        .args(command);
    let mut keep = vec![env.as_raw_fd()];
    keep.extend(tracker);
    spawn::inherit_fds(&mut cmd, keep);
    cmd.spawn()
}

/// Our environment as NAME=VALUE\0…, in an anonymous file the helper reads
/// after dropping privilege (glibc strips LD_*, TMPDIR … from setuid programs).
fn environment_memfd() -> std::io::Result<OwnedFd> {
    let fd = nix::sys::memfd::memfd_create(c"prov-env", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    let mut buf = Vec::new();
    for (k, v) in std::env::vars_os() {
        buf.extend_from_slice(k.as_bytes());
        buf.push(b'=');
        buf.extend_from_slice(v.as_bytes());
        buf.push(0);
    }
    file.write_all(&buf)?;
    file.rewind()?;
    Ok(file.into())
}

fn wait(mut child: Child) -> ExitStatus {
    loop {
        match child.wait() {
            Ok(status) => return status,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return ExitStatus::from_raw(1 << 8),
        }
    }
}

/// Tells the collector the command is done and waits until it is stored.
fn finish(obs: &Observation, end: CommandEnd) -> Result<StoreReport, String> {
    ipc::send_json(obs.ctl.as_fd(), &ToCollector::End(end), &[]).map_err(|e| format!("collector gone: {e}"))?;
    match ipc::recv(obs.ctl.as_fd()) {
        Ok(Some((msg, _))) => match serde_json::from_slice::<ToCaller>(&msg) {
            Ok(ToCaller::Stored(report)) => Ok(report),
            _ => Err("unexpected answer from the collector".into()),
        },
        Ok(None) => Err("the collector exited before storing the record".into()),
        Err(e) => Err(format!("collector gone: {e}")),
    }
}

fn report_problems(report: &StoreReport) {
    if let Some(lost) = &report.lost {
        eprintln!("prov: record lost: {}", escape_controls(lost));
    } else if let Some(why) = &report.spooled {
        let why = escape_controls(why);
        eprintln!("prov: database unavailable ({why}); the record is kept in the spool until it can be written");
    }
}

/// For benches/: with PROV_BENCH_REPORT=FILE, appends one JSON line with the
/// command's own time, the total time including storing, and the
/// collector's CPU time and event count.
fn bench_report(command_ns: i64, total_ns: i64, report: &StoreReport) {
    let Some(path) = std::env::var_os("PROV_BENCH_REPORT") else { return };
    // As root, not into a directory someone else could redirect (see setup).
    if nix::unistd::geteuid().is_root() && prov_model::paths::check_private_path(Path::new(&path), 0).is_err() {
        return;
    }
    let line = serde_json::json!({
        "command_ns": command_ns,
        "total_ns": total_ns,
        "collector_cpu_ns": report.collector_cpu_ns,
        "events": report.events,
        "incomplete": report.completeness.reasons().into_iter().collect::<std::collections::BTreeMap<_, _>>(),
        "spooled": report.spooled,
    });
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(f, "{line}");
    }
}

fn run_untraced(program: &Path, command: &[OsString]) -> ExitCode {
    let status = Command::new(program).arg0(&command[0]).args(&command[1..]).status();
    match status {
        Ok(s) => ExitCode::from(shell_status(s) as u8),
        Err(e) => {
            eprintln!("prov: cannot start {}: {e}", escape(command[0].as_bytes()));
            ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 })
        }
    }
}

/// The status a shell would report: the exit code, or 128+N for signal N.
fn shell_status(status: ExitStatus) -> i32 {
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Finds CMD like execvp does; the helper gets an explicit path, never PATH.
fn resolve_program(name: &OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if name.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(name));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| is_exec(p))
}

pub fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

/// The command as one would type it: words joined by spaces, quoted where
/// the shell would need it.
pub fn shell_quote_words(words: &[OsString]) -> Vec<u8> {
    let safe = |b: &u8| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(b);
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        let w = w.as_bytes();
        if !w.is_empty() && w.iter().all(safe) {
            out.extend_from_slice(w);
        } else {
            out.extend(prov_export::text::shell_quote(w));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_reproduces_typed_commands() {
        let words: Vec<OsString> =
            ["sh", "-c", "sort data.csv > sorted.csv", "it's", ""].iter().map(OsString::from).collect();
        assert_eq!(
            String::from_utf8(shell_quote_words(&words)).unwrap(),
            r#"sh -c 'sort data.csv > sorted.csv' 'it'\''s' ''"#
        );
    }
}
