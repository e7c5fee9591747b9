//! Starting an observation: the helper makes the namespace and execs the
//! collector, which answers `Ready`; we send it the settings and the record's
//! identity. Used by `prov run` and by the shell's preparer.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use prov_collect::ipc;
use prov_collect::protocol::{RecordIdentity, ToCaller, ToCollector, HELPER_ERROR_TAG};

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
    /// The helper, now the collector: our child, so `prov run` can tell
    /// how it ended if it stops answering. Never waited for otherwise.
    pub collector: Child,
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
    let helper = setup::helper_path().map_err(|e| format!("{e:#}"))?;
    if let Some(reason) = setup::tracing_unavailable(&helper) {
        return Err(reason);
    }
    // A helper removed or changed while it starts fails in one of several
    // places; the same words for the same cause, so the shell says it once.
    // A confining AppArmor profile shows only as the helper refused.
    start_with(&helper, user, identity).map_err(|e| {
        setup::tracing_unavailable(&helper).or_else(|| crate::doctor_env::apparmor_denial(&e)).unwrap_or(e)
    })
}

fn start_with(helper: &std::path::Path, user: &UserSetup, identity: RecordIdentity) -> Result<Observation, String> {
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

    let mut fds = [PollFd::new(ctl.as_fd(), PollFlags::POLLIN)];
    let timeout = PollTimeout::try_from(HELPER_TIMEOUT).unwrap_or(PollTimeout::MAX);
    if !matches!(poll(&mut fds, timeout), Ok(n) if n > 0) {
        return Err("the helper did not answer".into());
    }
    let (msg, mut fds) = match ipc::recv(ctl.as_fd()) {
        Ok(Some(m)) => m,
        Ok(None) => return Err("the helper exited without an answer".into()),
        Err(e) => return Err(format!("cannot talk to the helper: {e}")),
    };
    if msg.first() == Some(&HELPER_ERROR_TAG) {
        return Err(String::from_utf8_lossy(&msg[1..]).into_owned());
    }
    let holder_pid = match serde_json::from_slice::<ToCaller>(&msg) {
        Ok(ToCaller::Ready { holder_pid, .. }) if fds.len() == 2 => holder_pid,
        _ => return Err("unexpected answer from the collector".into()),
    };
    let tracker = fds.pop();
    let ns_root = fds.pop().ok_or("no namespace root from the collector")?;
    let prepare = ToCollector::Prepare { settings: user.settings(), identity };
    ipc::send_json(ctl.as_fd(), &prepare, &[]).map_err(|e| format!("collector unreachable: {e}"))?;
    Ok(Observation { helper: helper.to_path_buf(), ctl, holder_pid, ns_root, tracker, collector })
}
