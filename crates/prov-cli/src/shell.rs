//! Shell integration: `prov init bash|zsh` prints the hook script with this
//! installation's paths, `prov shell` starts a traced shell without touching
//! the rc files, and `prov __prepare` (started by the shim while the prompt
//! idles) sets up the next observation and hands it to the shell.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::ValueEnum;
use prov_model::config::ShellConfig;
use prov_model::CommandEnd;
use prov_protocol::control::{CommandStart, RecordIdentity};
use prov_protocol::ipc;
use prov_protocol::shell_preparer::{self, FromShim, Request};

use crate::observe;
use crate::setup::{self, UserSetup};

#[derive(Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
}

impl Shell {
    fn name(self) -> &'static str {
        match self {
            Shell::Bash => "bash",
            Shell::Zsh => "zsh",
        }
    }

    fn template(self) -> &'static str {
        match self {
            Shell::Bash => include_str!("../../../shell/prov.bash"),
            Shell::Zsh => include_str!("../../../shell/prov.zsh"),
        }
    }

    /// The Ctrl-R binding to `prov browse` (opt-in).
    fn binding(self) -> &'static str {
        match self {
            Shell::Bash => include_str!("../../../shell/prov-bind.bash"),
            Shell::Zsh => include_str!("../../../shell/prov-bind.zsh"),
        }
    }
}

struct Paths {
    prov: PathBuf,
    helper: PathBuf,
    preload: PathBuf,
}

/// This installation's files (see packaging/install.sh for the layout).
fn paths() -> Result<Paths> {
    let prov = setup::user_prov()?;
    let preload = match std::env::var_os("PROV_PRELOAD") {
        Some(p) => PathBuf::from(p),
        None => setup::install_prefix()?.join("lib/prov/libprov_preload.so"),
    };
    let canonical = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
    Ok(Paths { prov: canonical(prov), helper: canonical(setup::helper_path()?), preload: canonical(preload) })
}

/// A word the shell reads back unchanged.
fn quote(path: &Path) -> String {
    let s = String::from_utf8_lossy(path.as_os_str().as_bytes());
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `bind_ctrl_r`: from `--bind-ctrl-r`; [browse] bind_ctrl_r also turns it
/// on (a configuration that does not load is reported by the tracing itself).
pub fn init(shell: Shell, bind_ctrl_r: bool) -> Result<ExitCode> {
    let p = paths()?;
    let configured = prov_model::paths::Locations::from_env()
        .ok()
        .and_then(|loc| prov_model::Config::load_for_reading(&loc.config_file()).ok())
        .is_some_and(|(c, _)| c.browse.bind_ctrl_r);
    let mut script = shell.template().to_string();
    if bind_ctrl_r || configured {
        script.push_str(shell.binding());
    }
    let script = script
        .replace("@PRELOAD@", &quote(&p.preload))
        .replace("@HELPER@", &quote(&p.helper))
        .replace("@PROV@", &quote(&p.prov));
    print!("{script}");
    Ok(ExitCode::SUCCESS)
}

/// Replaces this process with a traced interactive shell that reads the
/// user's own rc file and then the integration.
pub fn shell(shell: Option<Shell>) -> Result<ExitCode> {
    let shell = match shell {
        Some(s) => s,
        None => match std::env::var("SHELL").unwrap_or_default().rsplit('/').next() {
            Some("zsh") => Shell::Zsh,
            _ => Shell::Bash,
        },
    };
    let user = UserSetup::load()?;
    let p = paths()?;
    if let Some(reason) = setup::tracing_unavailable(&p.helper) {
        eprintln!("prov: not tracing: {}", prov_model::escape::escape_controls(&reason));
    }
    let dir = user.locations.state_dir.join("shell");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let init = format!("eval \"$({} init {})\"\n", quote(&p.prov), shell.name());
    let mut cmd;
    match shell {
        Shell::Bash => {
            let rc = dir.join("bashrc");
            std::fs::write(&rc, format!("[ -f ~/.bashrc ] && . ~/.bashrc\n{init}"))
                .with_context(|| format!("cannot write {}", rc.display()))?;
            cmd = Command::new("bash");
            cmd.arg("--rcfile").arg(&rc).arg("-i");
        }
        Shell::Zsh => {
            let zdot = dir.join("zsh");
            std::fs::create_dir_all(&zdot)?;
            let home = quote(&user.locations.home);
            std::fs::write(zdot.join(".zshenv"), format!("[ -f {home}/.zshenv ] && . {home}/.zshenv\n"))?;
            std::fs::write(
                zdot.join(".zshrc"),
                format!("ZDOTDIR={home}\n[ -f {home}/.zshrc ] && . {home}/.zshrc\n{init}"),
            )?;
            cmd = Command::new("zsh");
            cmd.arg("-i").env("ZDOTDIR", &zdot);
        }
    }
    let mut preload: OsString = p.preload.clone().into();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    cmd.env("LD_PRELOAD", preload)
        .env("PROV_SHIM_HELPER", &p.helper)
        .env("PROV_SHIM_PROV", &p.prov)
        .env("PROV_SHIM_SHELL", shell.name());
    let err = cmd.exec();
    bail!("cannot start {}: {err}", shell.name())
}

/// The next request came this many times sooner after the last answer than
/// preparing one takes: lines come faster than they can be prepared (pasted),
/// so the preparer keeps one more observation ready ahead. At a person's pace
/// the one the shell holds is enough, and preparing ahead would only compete
/// with the command for the CPU.
const AHEAD_WHEN_FASTER: u32 = 4;
/// An observation prepared ahead is kept this long for the next line; by
/// then the paste is over, the one the shell holds serves the next line,
/// and the idle shell keeps one observation's processes, not two.
const AHEAD_KEPT: Duration = Duration::from_secs(30);

/// `prov __prepare SESSION SHELL VERSION`, fd 3 being the shim's socket:
/// answers `R<holder pid>[ skip-space]` with [control socket, namespace
/// root, tracker], or `E<one-line reason>`; then waits for the shim's next
/// request (`P`, or `A` with an observation whose collector offered it for
/// another record) and answers again, until the shim hangs up (its shell is
/// gone). The messages are prov-protocol's `shell_preparer`.
/// Started once per shell: the preparer's own start is no longer on each
/// command's way. Meanwhile the shim sends the start and end of each command
/// it had to run without an observation, and their record is stored here.
pub fn prepare(session: String, shell: String, shim_version: Option<u32>) -> Result<ExitCode> {
    let shim = shim_socket()?;
    if let Some(why) = shell_preparer::refusal_of_shim(shim_version) {
        return refuse_every_request(shim, &why);
    }
    let mut unobserved = Unobserved { session: &session, shell: &shell, start: None, handed: Default::default() };
    // Who and where: the same for every record of this shell.
    let identity = observe::identity(session.clone(), &shell);
    // Polled for POLLPRI: the kernel flags each change of the mount table,
    // which makes every observation prepared before it stale.
    let mounts = std::fs::File::open("/proc/self/mountinfo").ok();
    let mut generation = 0u64;
    let mut ahead: Option<Prepared> = None;
    let mut handed: Option<HandedOut> = None;
    let mut given_back: Option<Vec<OwnedFd>> = None;
    let mut answered: Option<Instant> = None;
    let mut preparing_takes = Duration::ZERO;
    // Being started is the first request.
    loop {
        reap_exited_children();
        if mounts.as_ref().is_some_and(crate::run::preparer::mounts_changed) {
            generation += 1;
        }
        let quick = answered.is_some_and(|t| t.elapsed() * AHEAD_WHEN_FASTER < preparing_takes);
        let reused = given_back.take().and_then(|fds| take_back(fds, handed.as_ref(), generation, &identity));
        let was_reused = reused.is_some();
        // One prepared ahead before a mount came or went has a stale copy.
        let fresh_ahead = ahead.take().filter(|a| a.as_ref().map_or(true, |r| r.generation == generation));
        let prepared = reused.or(fresh_ahead).unwrap_or_else(|| {
            let started = Instant::now();
            let prepared = prepare_one(&identity, generation);
            preparing_takes = started.elapsed();
            prepared
        });
        if send_prepared(shim, &prepared).is_err() {
            return Ok(ExitCode::SUCCESS);
        }
        handed = prepared.as_ref().ok().map(HandedOut::of);
        if let Some(h) = &handed {
            if unobserved.handed.len() == HANDED_KEPT {
                unobserved.handed.pop_front();
            }
            unobserved.handed.push_back(h.clone());
        }
        // Our copies of the descriptors are closed: only the shell holds them.
        drop(prepared);
        answered = Some(Instant::now());
        if quick && !was_reused && ahead.is_none() {
            ahead = Some(prepare_one(&identity, generation));
        }
        loop {
            // Waits in steps: collectors that ended meanwhile are reaped (a
            // zombie takes a slot of `ulimit -u` too), and one prepared
            // ahead is let go once the paste is over.
            if !ipc::readable_within(shim, AHEAD_KEPT) {
                reap_exited_children();
                ahead = None;
                continue;
            }
            match ipc::recv(shim) {
                Ok(Some((message, _))) if Request::read(&message) == Some(Request::Prepare) => break,
                Ok(Some((message, fds))) if Request::read(&message) == Some(Request::Again) => {
                    given_back = Some(fds);
                    break;
                }
                Ok(Some((message, fds))) => unobserved.receive(&message, fds),
                // The shell is gone; an observation prepared ahead ends unused.
                Ok(None) | Err(_) => return Ok(ExitCode::SUCCESS),
            }
        }
    }
}

/// Why a record ended by the shell (`FromShim::Orphan`) is incomplete.
const ORPHAN_REASON: &str =
    "the collector or its writer stopped before the command ended; the shell kept its end and status, later files are missing";

/// The last observations handed to the shim, newest last: an orphaned end
/// may come after the next one was handed out.
const HANDED_KEPT: usize = 3;

/// The record of a command the shell ran without an observation (none could
/// be prepared, or not in time): its text, times and status, marked
/// untraced with the reason, so the history has no hole.
struct Unobserved<'a> {
    session: &'a str,
    shell: &'a str,
    start: Option<CommandStart>,
    /// The observations handed out last (`HANDED_KEPT`), whose ends the
    /// shim may send back as orphaned.
    handed: std::collections::VecDeque<HandedOut>,
}

/// Spools the end the shell kept of an observed command whose collector
/// did not store it: a spooled end wins over "collector gone", so the
/// record keeps the command's end time and status.
fn keep_orphan_end(uuid: &str, end_ns: i64, exit_status: i32) {
    let Ok(user) = UserSetup::load() else { return };
    let end = CommandEnd { incomplete: Some(ORPHAN_REASON.into()), ..CommandEnd::with_status(end_ns, exit_status) };
    // Nobody to tell: the shell said what it could.
    let _ = crate::run::record_end::spool_end(&user, uuid, &end);
}

impl Unobserved<'_> {
    fn receive(&mut self, message: &[u8], fds: Vec<std::os::fd::OwnedFd>) {
        match serde_json::from_slice(message) {
            Ok(FromShim::Begin(mut start)) => {
                // A text too long for the datagram came in a memfd; one that
                // cannot be read is kept empty rather than losing the record.
                let _ = prov_protocol::long_text::receive_text(&mut start, fds);
                self.start = Some(start);
            }
            Ok(FromShim::End { end_ns, exit_status, why }) => {
                if let Some(start) = self.start.take() {
                    self.store(start, end_ns, exit_status, String::from_utf8_lossy(&why).into_owned());
                }
            }
            Ok(FromShim::Orphan { end_ns, exit_status }) => {
                let named = fds.first().map(crate::run::preparer::inode);
                if let Some(last) = self.handed.iter().rev().find(|h| Some(h.ctl_inode) == named) {
                    keep_orphan_end(&last.uuid, end_ns, exit_status);
                }
            }
            // Nothing the shim sends; nothing to store.
            Err(_) => {}
        }
    }

    fn store(&self, start: CommandStart, end_ns: i64, exit_status: i32, why: String) {
        let Ok(user) = UserSetup::load() else { return };
        if user.config.shell.skip_space_prefixed && start.text.first() == Some(&b' ') {
            return;
        }
        let begin = observe::identity(self.session.to_string(), self.shell).begin(start);
        let end = CommandEnd { untraced: Some(why), ..CommandEnd::with_status(end_ns, exit_status) };
        // Nobody to tell: the shell already said why it is not tracing.
        let _ = crate::run::record_end::store(&user, &begin, &end);
    }
}

/// An observation for the shim.
struct Ready {
    ctl: OwnedFd,
    ns_root: OwnedFd,
    tracker: OwnedFd,
    holder_pid: i32,
    collector_pid: u32,
    config: ShellConfig,
    /// `[env]`'s selecting patterns, for the shim.
    env_patterns: String,
    /// How long preparing (or taking back) it took.
    took: Duration,
    /// The mount table's generation it was prepared in.
    generation: u64,
    /// The record it is for.
    uuid: String,
}

/// One observation for the shim, or why there is none.
type Prepared = Result<Ready, String>;

/// The observation last handed to the shim: the only one it may hand back.
#[derive(Clone)]
struct HandedOut {
    ctl_inode: u64,
    collector_pid: u32,
    holder_pid: i32,
    generation: u64,
    /// The record it is for.
    uuid: String,
}

impl HandedOut {
    fn of(ready: &Ready) -> HandedOut {
        HandedOut {
            uuid: ready.uuid.clone(),
            ctl_inode: crate::run::preparer::inode(&ready.ctl),
            collector_pid: ready.collector_pid,
            holder_pid: ready.holder_pid,
            generation: ready.generation,
        }
    }
}

/// This record's identity: the shell's, with a new record id.
fn next_identity(shell: &RecordIdentity) -> RecordIdentity {
    RecordIdentity { uuid: uuid::Uuid::now_v7().to_string(), ..shell.clone() }
}

fn prepare_one(identity: &RecordIdentity, generation: u64) -> Prepared {
    let started = Instant::now();
    // The configuration is read again each time: an edit applies from the
    // next observation on, as when each had a preparer of its own.
    let user = UserSetup::load().map_err(|e| format!("{e:#}"))?;
    let record = next_identity(identity);
    let uuid = record.uuid.clone();
    let obs = observe::start(&user, record)?;
    let tracker = obs.tracker.ok_or("no tracker from the collector")?;
    Ok(Ready {
        ctl: obs.ctl,
        ns_root: obs.ns_root,
        tracker,
        holder_pid: obs.holder_pid,
        collector_pid: obs.collector_pid,
        config: user.config.shell,
        env_patterns: user.config.env.shim_patterns(),
        took: started.elapsed(),
        generation,
        uuid,
    })
}

/// The observation the shim hands back (`A`: control socket, namespace root
/// and the collector's new tracker), ready for another record: the next
/// record's settings and identity are sent on it. None when it is not the
/// one last handed out, its collector is gone or did not make that tracker,
/// or the mount table changed since it was prepared (its namespace is a copy
/// of the old one): then our copies are closed, its collector sees its
/// control socket hang up and ends, and a new one is prepared.
fn take_back(
    fds: Vec<OwnedFd>,
    last: Option<&HandedOut>,
    generation: u64,
    identity: &RecordIdentity,
) -> Option<Prepared> {
    let started = Instant::now();
    let last = last?;
    let [ctl, ns_root, tracker] = <[OwnedFd; 3]>::try_from(fds).ok()?;
    let collector_lives = matches!(
        nix::sys::wait::waitpid(
            nix::unistd::Pid::from_raw(last.collector_pid as i32),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG)
        ),
        Ok(nix::sys::wait::WaitStatus::StillAlive)
    );
    let genuine = crate::run::preparer::handed_out(&ctl, last.ctl_inode, &tracker, last.collector_pid)
        && collector_lives
        && last.generation == generation;
    if !genuine {
        return None;
    }
    let user = match UserSetup::load() {
        Ok(user) => user,
        Err(e) => return Some(Err(format!("{e:#}"))),
    };
    let record = next_identity(identity);
    let uuid = record.uuid.clone();
    observe::send_prepare(ctl.as_fd(), &user, record).ok()?;
    Some(Ok(Ready {
        uuid,
        ctl,
        ns_root,
        tracker,
        holder_pid: last.holder_pid,
        collector_pid: last.collector_pid,
        config: user.config.shell,
        env_patterns: user.config.env.shim_patterns(),
        took: started.elapsed(),
        generation,
    }))
}

fn send_prepared(shim: BorrowedFd<'_>, prepared: &Prepared) -> Result<()> {
    match prepared {
        Ok(ready) => {
            let fds = [ready.ctl.as_raw_fd(), ready.ns_root.as_raw_fd(), ready.tracker.as_raw_fd()];
            // The shim applies [shell] skip_space_prefixed itself, and waits
            // for the next preparation as long as prepare_wait_ms and this
            // one's duration say (preload/shim_parse.h, prepare_wait_ms).
            // Last: the patterns of the variables the shim sends with
            // Begin (preload/shim_env.c).
            let answer = shell_preparer::ready(
                ready.holder_pid,
                ready.config.skip_space_prefixed,
                ready.took.as_millis().min(i32::MAX as u128) as u64,
                ready.config.prepare_wait_ms.0.min(i32::MAX as u32),
                &ready.env_patterns,
            );
            ipc::send(shim, &answer, &fds)?;
        }
        // The shim prints the reason on the user's terminal.
        Err(reason) => ipc::send(shim, &shell_preparer::refused(&prov_model::escape::escape_controls(reason)), &[])?,
    }
    Ok(())
}

/// For a shim of another protocol version: `why`, as the answer to every
/// request until the shell is gone; nothing else it sends is read.
fn refuse_every_request(shim: BorrowedFd<'_>, why: &str) -> Result<ExitCode> {
    loop {
        if send_prepared(shim, &Err(why.to_string())).is_err() {
            return Ok(ExitCode::SUCCESS);
        }
        loop {
            match ipc::recv(shim) {
                Ok(Some((message, _))) if Request::read(&message).is_some() => break,
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return Ok(ExitCode::SUCCESS),
            }
        }
    }
}

/// The collectors this preparer started (each the helper it exec'd) that
/// have ended: reaped, so none is left a zombie while the shell lives.
fn reap_exited_children() {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
}

/// The shim's socket at fd 3 (anything else there: not started by the shim).
fn shim_socket() -> Result<BorrowedFd<'static>> {
    let stat = nix::sys::stat::fstat(crate::spawn::fd3()).map_err(|e| anyhow!("fd 3: {e}"))?;
    if stat.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        bail!("prov __prepare is started by the shell integration only");
    }
    Ok(crate::spawn::fd3())
}
