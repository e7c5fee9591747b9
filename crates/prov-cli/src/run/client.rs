//! `prov run -- CMD…`: observe one command tree and store its record.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::time::{Duration, Instant};

use prov_model::escape::{escape, escape_controls};
use prov_model::{CommandBegin, CommandEnd};
use prov_protocol::control::{BeginAnswer, CommandStart, EndSent, StoreReport, ToCaller, ToCollector};
use prov_protocol::{ipc, long_text};

use super::handover;
use super::outcome::{
    bench_report, gone_reason, kept_end_line, lost_reason, now_ns, store_problem, Timings, STILL_STORING, STORE_WAIT,
};
use super::preparer as run_preparer;
use super::record_end::{self, StartFile};
use crate::observe::{self, CollectorProcess, Observation};
use crate::setup::UserSetup;
use crate::spawn;

/// How long `prov run` waits for the record's start to be stored before it
/// starts the command anyway.
const BEGIN_WAIT: Duration = Duration::from_secs(2);

/// Runs the command observed; also gives back the configuration it read
/// (for the push that follows).
pub fn run(command: Vec<OsString>) -> (ExitCode, Option<UserSetup>) {
    let user = UserSetup::load().map_err(|e| format!("{e:#}"));
    let code = run_with(command, &user);
    (code, user.ok())
}

fn run_with(command: Vec<OsString>, user: &Result<UserSetup, String>) -> ExitCode {
    let Some(program) = resolve_program(&command[0]) else {
        eprintln!("prov: {}: command not found", escape(command[0].as_bytes()));
        return ExitCode::from(127);
    };
    // Asked first: the preparer reads our context and picks an observation
    // while we work out the record's identity.
    let asked = user.as_ref().ok().and(crate::setup::helper_path().ok()).map(|helper| run_preparer::ask(&helper));
    let session = super::session::for_run();
    let identity = observe::identity(session, "run");
    let observation = user.as_ref().map_err(Clone::clone).and_then(|user| observation(user, identity.clone(), asked));
    // `kept`: we keep the start ourselves (a start file), so the collector
    // need only say it is watching; else it confirms the start is stored.
    // `reuse`: the observation came from the run preparer, which takes it
    // back for the next run if it is clean at the end.
    // The variables `[env]` selects, which the command inherits from us.
    let env = user.as_ref().ok().map(|u| super::env::of_this_process(&u.config.env));
    let start = |start_ns, kept: bool, reuse: bool| CommandStart {
        seq: 1,
        text: shell_quote_words(&command),
        cwd: std::env::current_dir().map(|p| p.into_os_string().into_vec()).unwrap_or_default(),
        start_ns,
        text_in_fd: None,
        awaits: if kept { BeginAnswer::Watching } else { BeginAnswer::Begun },
        reuse,
        // We wait for the command, and send End as soon as it is gone.
        end: EndSent::AtExit,
        env: env.clone(),
    };
    // Without an observation the record is still kept, marked untraced
    // (unless the configuration itself is what failed).
    let untraced = |reason: String| {
        let begin = identity.clone().begin(start(now_ns(), false, false));
        run_untraced(&program, &command, user.as_ref().ok().map(|u| (u, begin, reason)))
    };
    let mut obs = match observation {
        Ok(obs) => obs,
        Err(reason) => {
            eprintln!("prov: not tracing: {}", escape_controls(&reason));
            return untraced(reason);
        }
    };
    let start_ns = now_ns();
    let begin = identity.clone().begin(start(start_ns, false, false));
    // The start stored before the command starts: by ourselves (then the
    // collector is not held up by its writer while the command runs), or
    // else confirmed by the collector.
    let keep_start =
        |obs: &Observation| user.as_ref().ok().and_then(|u| StartFile::write(u, &begin, obs.collector_pid));
    let mut start_file = keep_start(&obs);
    let mut sent = long_text::send_begin(obs.ctl.as_fd(), start(start_ns, start_file.is_some(), obs.pooled()));
    // A ready observation whose collector has just died (killed): one of
    // our own, for the same record, before the command starts.
    if obs.pooled() && sent.is_err() {
        let user = user.as_ref().map_err(Clone::clone);
        let own = user.and_then(|user| own_observation(user, identity.clone(), &observe::usable_helper()?));
        if let Ok(own) = own {
            obs = own;
            if let Some(file) = start_file.take() {
                file.remove();
            }
            start_file = keep_start(&obs);
            sent = long_text::send_begin(obs.ctl.as_fd(), start(start_ns, start_file.is_some(), obs.pooled()));
        }
    }
    if let Err(e) = sent {
        if let Some(file) = start_file {
            file.remove();
        }
        eprintln!("prov: not tracing: collector unreachable: {e}");
        return untraced(format!("collector unreachable: {e}"));
    }
    // Only once the collector has the record does the command start: it
    // reads a process's arguments while the process lives.
    let answered = wait_for_answer(&obs);
    let mut begun_seen = start_file.is_none() && answered;
    let begun_ns = now_ns() - start_ns;
    // From PROV_BENCH_SPAWNED_NS (the wall clock when a bench started this
    // prov) to the start: prov's own start and its observation.
    let before_start_ns =
        std::env::var("PROV_BENCH_SPAWNED_NS").ok().and_then(|t| t.parse::<i64>().ok()).map(|t| start_ns - t);
    let prepared = obs.pooled();
    let child = match spawn_joined(&obs, &program, &command) {
        Ok(child) => child,
        Err(e) => {
            eprintln!("prov: cannot start {}: {e}", escape(command[0].as_bytes()));
            return ExitCode::from(126);
        }
    };
    let spawned_ns = now_ns() - start_ns;
    // Only the command's processes hold the tracker now.
    drop(obs.tracker.take());
    spawn::ignore_terminal_signals();
    spawn::forward_termination(child.id());
    let status = shell_status(wait(child));
    let end = CommandEnd::with_status(now_ns(), status);
    let command_ns = end.end_ns - start_ns;
    // The rest goes to the preparer, if it gave us the observation
    // (handover.rs); then we exit right after `End`, and say so with our
    // pidfd attached: the collector finishes the record once we are gone,
    // so that its work and its writer's do not hold up our exit (on a busy
    // machine every process woken takes the free CPU in line with us).
    let handing_over =
        matches!(obs.collector, CollectorProcess::Pooled(_)) && start_file.as_ref().is_some_and(handover::possible);
    let own_exit = handing_over.then(|| prov_protocol::fds::pidfd_open(std::process::id() as i32).ok()).flatten();
    let end_fds: Vec<_> = own_exit.iter().map(AsRawFd::as_raw_fd).collect();
    let end_sent = ipc::send_json(obs.ctl.as_fd(), &ToCollector::End(end.clone()), &end_fds).is_ok();
    if let (true, true, Some(file), CollectorProcess::Pooled(preparer)) =
        (handing_over, end_sent, start_file.as_mut(), &obs.collector)
    {
        let timings = Timings { begun_ns, spawned_ns, command_ns, total_ns: 0, prepared, start_ns, before_start_ns };
        if handover::hand_over(preparer, &obs, file, &end, begun_seen, timings) {
            return ExitCode::from(status as u8);
        }
    }
    let finished = match end_sent {
        true => await_stored(&mut obs, &mut begun_seen),
        false => Finished::CollectorGone(collector_fate(&mut obs.collector)),
    };
    // Kept (left for the next ingestion) only while the start is stored
    // nowhere else.
    let start_kept = |stored_elsewhere: bool| {
        if let (Some(file), true) = (start_file, stored_elsewhere) {
            file.remove();
        }
    };
    match finished {
        Finished::Stored(report, next_tracker) => {
            // First, so the next run finds it ready.
            if let (Some(tracker), CollectorProcess::Pooled(preparer)) = (next_tracker, &obs.collector) {
                run_preparer::give_back(preparer, &obs, tracker);
            }
            let stored = match (&report.lost, &user) {
                // The collector lives but its writer does not: the start and
                // end are still ours to keep.
                (Some(lost), Ok(user)) => {
                    let why = lost_reason(lost);
                    keep_end(user, &begin, end, why)
                }
                _ => {
                    report_problems(&report);
                    report.lost.is_none()
                }
            };
            start_kept(stored);
            if let Some(path) = std::env::var_os("PROV_BENCH_REPORT") {
                let total_ns = now_ns() - start_ns;
                let timings =
                    Timings { begun_ns, spawned_ns, command_ns, total_ns, prepared, start_ns, before_start_ns };
                bench_report(Path::new(&path), timings, &report);
            }
        }
        Finished::Pending => {
            start_kept(begun_seen);
            eprintln!("{STILL_STORING}")
        }
        Finished::CollectorGone(why) => match &user {
            Ok(user) => {
                let stored = keep_end(user, &begin, end, gone_reason(&why));
                start_kept(begun_seen || stored);
            }
            Err(_) => eprintln!("prov: record incomplete: {}", escape_controls(&why)),
        },
    }
    ExitCode::from(status as u8)
}

/// The preparer's ready observation when there is one, else one of our own;
/// either way sent this command's settings and record. A preparer serves
/// only callers of its own context (mount namespace, cgroup, security
/// label, no_new_privs), for which it found the helper usable when it
/// started; of those checks only the helper file's own state is made again
/// here (a reinstall or chmod since), the rest only on the direct way.
fn observation(
    user: &UserSetup,
    identity: prov_protocol::control::RecordIdentity,
    asked: Option<Result<run_preparer::Asked, run_preparer::NotTaken>>,
) -> Result<Observation, String> {
    let mut absent = false;
    match asked.map(|asked| asked.and_then(run_preparer::Asked::receive)) {
        Some(Ok(obs)) => {
            // Its collector killed since the preparer looked: one of our own.
            let usable = crate::setup::helper_not_installed(&obs.helper).is_none() && !run_preparer::hung_up(&obs);
            if usable && observe::prepare(&obs, user, identity.clone()).is_ok() {
                return Ok(obs);
            }
        }
        Some(Err(run_preparer::NotTaken::Absent)) => absent = true,
        _ => {}
    }
    let helper = observe::usable_helper()?;
    // For the next `prov run`, once tracing is known to work here.
    if absent {
        run_preparer::start_preparer();
    }
    own_observation(user, identity, &helper)
}

/// An observation started by this `prov run` itself, the helper its child.
fn own_observation(
    user: &UserSetup,
    identity: prov_protocol::control::RecordIdentity,
    helper: &Path,
) -> Result<Observation, String> {
    let obs = observe::start_unprepared(helper)?;
    observe::prepare(&obs, user, identity)?;
    Ok(obs)
}

/// Stores the record's end ourselves, marked incomplete with `why`, and says
/// so in one line; false if it could not be stored.
fn keep_end(user: &UserSetup, begin: &CommandBegin, end: CommandEnd, why: String) -> bool {
    let kept = record_end::store(user, begin, &CommandEnd { incomplete: Some(why.clone()), ..end });
    eprintln!("{}", kept_end_line(&why, &kept));
    kept.is_ok()
}

/// Stores the record of an untraced command; says so in one line only if
/// that fails.
fn store_end(user: &UserSetup, begin: &CommandBegin, end: CommandEnd) {
    if let Err(e) = record_end::store(user, begin, &end) {
        eprintln!("prov: record lost: {}", escape_controls(&e));
    }
}

/// Starts the command through the helper's join mode, so it begins life
/// inside the observed namespace.
fn spawn_joined(obs: &Observation, program: &Path, command: &[OsString]) -> std::io::Result<Child> {
    let tracker = obs.tracker.as_ref().map(AsFd::as_fd);
    let mut cmd = Command::new(&obs.helper);
    // ENV_FD `-`: the command gets the environment this exec passes the
    // helper (prov run's own), as the kernel recorded it.
    cmd.arg("join")
        .arg(obs.holder_pid.to_string())
        .arg("-")
        .arg(tracker.map_or("-".to_string(), |fd| fd.as_raw_fd().to_string()))
        .arg(program)
        .args(command);
    let keep: Vec<_> = tracker.into_iter().collect();
    spawn::spawn_inheriting(&mut cmd, &keep)
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

/// What became of the record once the command had ended.
enum Finished {
    /// With the tracker of the observation's next record, if it may serve one.
    Stored(StoreReport, Option<OwnedFd>),
    /// The collector took longer than STORE_WAIT: it goes on alone.
    Pending,
    /// The collector is gone without storing the end (why).
    CollectorGone(String),
}

/// Waits, at most BEGIN_WAIT, for the collector's answer to `Begin`:
/// `Watching` when we keep the start ourselves, else `Begun` once its writer
/// stored the start (a step killed together with prov and its collector then
/// still has its record). A collector slower than that costs the guarantee,
/// never the command. True when it answered.
fn wait_for_answer(obs: &Observation) -> bool {
    let ready = ipc::readable_within(obs.ctl.as_fd(), BEGIN_WAIT);
    // Begun, or the collector's end (then End meets a closed socket and
    // says so).
    ready && matches!(ipc::recv(obs.ctl.as_fd()), Ok(Some(_)))
}

/// Waits, at most STORE_WAIT, until the record whose end the collector was
/// sent is stored.
fn await_stored(obs: &mut Observation, begun_seen: &mut bool) -> Finished {
    let deadline = Instant::now() + STORE_WAIT;
    loop {
        // A failed poll is met by the read: the collector is gone.
        if !ipc::readable_within(obs.ctl.as_fd(), deadline.saturating_duration_since(Instant::now())) {
            return Finished::Pending;
        }
        match ipc::recv(obs.ctl.as_fd()) {
            Ok(Some((msg, mut fds))) => match serde_json::from_slice::<ToCaller>(&msg) {
                Ok(ToCaller::Stored(report)) => {
                    let next_tracker = fds.pop().filter(|_| report.reusable && fds.is_empty());
                    return Finished::Stored(report, next_tracker);
                }
                // The start confirmed (not waited for, or after
                // `wait_for_answer` gave up).
                Ok(ToCaller::Begun) => {
                    *begun_seen = true;
                    continue;
                }
                // Acknowledged after `wait_for_answer` gave up.
                Ok(ToCaller::Watching) => continue,
                _ => return Finished::CollectorGone("unexpected answer from the collector".into()),
            },
            Ok(None) | Err(_) => return Finished::CollectorGone(collector_fate(&mut obs.collector)),
        }
    }
}

/// How the collector ended, as one phrase. It closed its end of the
/// socket, so it is exiting: waited for briefly.
fn collector_fate(collector: &mut CollectorProcess) -> String {
    let collector = match collector {
        CollectorProcess::Child(child) => child,
        CollectorProcess::Pooled(preparer) => {
            return run_preparer::fate(preparer).unwrap_or_else(|| "the collector stopped answering".into())
        }
    };
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        match collector.try_wait() {
            Ok(Some(status)) => return observe::fate_of(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => return "the collector stopped answering".into(),
        }
    }
}

fn report_problems(report: &StoreReport) {
    if let Some(problem) = store_problem(report) {
        eprintln!("{problem}");
    }
}

/// Runs the command outside any observation; with `record`, keeps a record
/// of it marked untraced with the reason.
fn run_untraced(program: &Path, command: &[OsString], record: Option<(&UserSetup, CommandBegin, String)>) -> ExitCode {
    let status = Command::new(program).arg0(&command[0]).args(&command[1..]).status();
    let code = match &status {
        Ok(s) => shell_status(*s),
        Err(e) => {
            eprintln!("prov: cannot start {}: {e}", escape(command[0].as_bytes()));
            if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            }
        }
    };
    if let Some((user, begin, reason)) = record {
        let end = CommandEnd { untraced: Some(reason), ..CommandEnd::with_status(now_ns(), code) };
        store_end(user, &begin, end);
    }
    ExitCode::from(code as u8)
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
