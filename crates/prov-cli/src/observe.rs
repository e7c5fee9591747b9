//! Starting an observation: the helper makes the namespace and execs the
//! collector, which answers `Ready`; we send it the settings and the record's
//! identity. Used by `prov run` and by the shell's preparer.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use prov_protocol::control::{RecordIdentity, ToCaller, ToCollector};
use prov_protocol::helper;
use prov_protocol::ipc;

use crate::setup::{self, UserSetup};
use crate::spawn;

/// The helper sets up a namespace in well under a second; past this we give
/// up on tracing rather than keep the user waiting.
const HELPER_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Observation {
    pub helper: PathBuf,
    /// Control socket to the collector.
    pub ctl: OwnedFd,
    pub holder_pid: i32,
    /// `/` of the observed namespace (for the shell's own opens).
    pub ns_root: OwnedFd,
    /// Every process of the command must inherit this; taken by the caller.
    pub tracker: Option<OwnedFd>,
    /// Who can tell how the collector ended if it stops answering.
    pub collector: CollectorProcess,
    pub collector_pid: u32,
}

/// The collector of an observation, as far as its caller can know it.
pub enum CollectorProcess {
    /// The helper, now the collector: our child. Never waited for otherwise.
    Child(Child),
    /// Started by the user's run preparer (`run::preparer`), which is its
    /// parent: the connection on which the preparer tells how it ended.
    Pooled(OwnedFd),
}

impl Observation {
    /// Taken ready from the run preparer, which takes it back for the next
    /// run if it is clean at the end.
    pub fn pooled(&self) -> bool {
        matches!(self.collector, CollectorProcess::Pooled(_))
    }
}

pub fn identity(session: String, shell: &str) -> RecordIdentity {
    RecordIdentity {
        uuid: uuid::Uuid::now_v7().to_string(),
        session,
        host: setup::host_name(),
        user: setup::user_name(),
        shell: shell.into(),
    }
}

/// Asks the helper for a new observed namespace; any failure is a reason to
/// run untraced, returned as one line.
pub fn start(user: &UserSetup, identity: RecordIdentity) -> Result<Observation, String> {
    let helper = usable_helper()?;
    let obs = start_unprepared(&helper)?;
    prepare(&obs, user, identity)?;
    Ok(obs)
}

/// The helper, if tracing can work here; else why not, in one line.
pub fn usable_helper() -> Result<PathBuf, String> {
    let helper = setup::helper_path().map_err(|e| format!("{e:#}"))?;
    match setup::tracing_unavailable(&helper) {
        Some(reason) => Err(reason),
        None => Ok(helper),
    }
}

/// An observation whose collector waits for its settings and identity
/// (`prepare`): what the run preparer keeps ready, knowing neither.
pub fn start_unprepared(helper: &std::path::Path) -> Result<Observation, String> {
    // A helper removed or changed while it starts fails in one of several
    // places; the same words for the same cause, so the shell says it once.
    // A confining AppArmor profile shows only as the helper refused.
    start_with(helper).map_err(|e| {
        setup::tracing_unavailable(helper).or_else(|| crate::environment::apparmor_denial(&e)).unwrap_or(e)
    })
}

/// Sends the collector the settings and the record's identity; only then
/// does its writer open the database.
pub fn prepare(obs: &Observation, user: &UserSetup, identity: RecordIdentity) -> Result<(), String> {
    send_prepare(obs.ctl.as_fd(), user, identity)
}

/// `prepare` on a control socket: also for an observation taken back for
/// another record.
pub fn send_prepare(
    ctl: std::os::fd::BorrowedFd<'_>,
    user: &UserSetup,
    identity: RecordIdentity,
) -> Result<(), String> {
    let prepare = ToCollector::Prepare { version: prov_protocol::VERSION, settings: user.settings(), identity };
    ipc::send_json(ctl, &prepare, &[]).map_err(|e| format!("collector unreachable: {e}"))
}

fn start_with(helper: &std::path::Path) -> Result<Observation, String> {
    let (ctl, ctl_for_helper) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| format!("socketpair: {e}"))?;
    let mut cmd = Command::new(helper);
    cmd.args(["observe", "3"]).stdin(Stdio::null()).stdout(Stdio::null());
    if std::env::var_os("PROV_DEBUG").is_none() {
        cmd.stderr(Stdio::null());
    }
    spawn::map_fd(&mut cmd, ctl_for_helper.as_raw_fd(), 3);
    // Not waited for: the helper becomes the collector, which outlives this
    // process when background descendants of the command keep running.
    let collector = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", helper.display()))?;
    drop(ctl_for_helper);

    if !ipc::readable_within(ctl.as_fd(), HELPER_TIMEOUT) {
        return Err("the helper did not answer".into());
    }
    let (msg, mut fds) = match ipc::recv(ctl.as_fd()) {
        Ok(Some(m)) => m,
        Ok(None) => return Err("the helper exited without an answer".into()),
        Err(e) => return Err(format!("cannot talk to the helper: {e}")),
    };
    if msg.first() == Some(&helper::ERROR_TAG) {
        return Err(String::from_utf8_lossy(&msg[1..]).into_owned());
    }
    let holder_pid = match serde_json::from_slice::<ToCaller>(&msg) {
        Ok(ToCaller::Ready { holder_pid, .. }) if fds.len() == 2 => holder_pid,
        _ => return Err("unexpected answer from the collector".into()),
    };
    let tracker = fds.pop();
    let ns_root = fds.pop().ok_or("no namespace root from the collector")?;
    let collector_pid = collector.id();
    let collector = CollectorProcess::Child(collector);
    Ok(Observation { helper: helper.to_path_buf(), ctl, holder_pid, ns_root, tracker, collector, collector_pid })
}

/// How a collector ended, as one phrase, from its wait status.
pub fn fate_of(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(sig) => {
            let name = nix::sys::signal::Signal::try_from(sig).map_or(sig.to_string(), |s| s.to_string());
            format!("the collector was killed by {name}")
        }
        None => format!("the collector exited (status {}) before storing the end", status.code().unwrap_or(-1)),
    }
}
