//! `prov run` returns its command's status once the command has ended and
//! the collector has its end, not once the record is stored (0.3–0.5 ms
//! later, which every step of a script paid): it hands what is left to the
//! run preparer its observation came from, which watches every collector it
//! hands out anyway. `prov run` renames the record's start file as ended
//! (`prov_store::spool::await_ended`: a query started after it exits waits
//! for the file) and sends the preparer the control socket, the namespace
//! root, the start file (its open file, so its lock) and its stderr; the
//! preparer waits for `Stored`, takes the observation back for the next
//! run, removes the start file, and writes any problem to that stderr, as
//! `prov run` did. No process is added, so a busy machine pays no more
//! than before. Not when stderr is a pipe or a socket, whose reader would
//! wait for the preparer to let it go (docs/architecture.md).

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use prov_collect::ipc;
use prov_collect::protocol::{StoreReport, ToCaller};
use prov_model::CommandEnd;
use prov_store::{SpoolEntry, SpoolWriter};
use serde::{Deserialize, Serialize};

use super::outcome::{self, Timings, STORE_WAIT};
use super::record_end::StartFile;
use crate::observe::Observation;

/// `prov run` → preparer, on the connection its observation came on: the
/// command has ended and the collector has `End`; finish the record
/// (descriptors: control socket, namespace root, start file, stderr; then
/// a [`Handover`] as JSON).
pub const HANDOVER_TAG: u8 = b'E';

/// What the preparer needs to finish the record as `prov run` would.
#[derive(Serialize, Deserialize)]
struct Handover {
    end: CommandEnd,
    /// The collector confirmed that the start is stored (`Begun`).
    begun_seen: bool,
    /// The start file's name: removed once the record is stored.
    start_path: Vec<u8>,
    /// PROV_BENCH_REPORT's file and the timings until the command's end.
    bench: Option<(Vec<u8>, Timings)>,
}

/// Whether the record kept in `start_file` may be handed over at all.
pub fn possible(start_file: &StartFile) -> bool {
    // On a network filesystem storing is slow and contended (an NFS journal
    // of several nodes, seen taking over 5 s in the kernel guest): records
    // handed over would pile up behind runs that no longer wait, past what a
    // query waits for; there `prov run` waits for `Stored` as before.
    stderr_awaits_no_end() && !start_file.on_network_fs()
}

/// Hands the record's finish to the preparer on `preparer`, the
/// observation's connection, where [`possible`]. False if it could not be
/// sent: `prov run` then finishes it itself (the start file, renamed or
/// not, still its own; the collector, told we would exit, waits for that
/// at most `CALLER_EXIT_WAIT` before it stores the end).
pub fn hand_over(
    preparer: &OwnedFd,
    obs: &Observation,
    start_file: &mut StartFile,
    end: &CommandEnd,
    begun_seen: bool,
    timings: Timings,
) -> bool {
    if start_file.mark_ended().is_err() {
        return false;
    }
    let bench = std::env::var_os("PROV_BENCH_REPORT").map(|path| (path.into_vec(), timings));
    let start_path = start_file.path().as_os_str().as_bytes().to_vec();
    let handover = Handover { end: end.clone(), begun_seen, start_path, bench };
    let Ok(json) = serde_json::to_vec(&handover) else { return false };
    let fds = [obs.ctl.as_raw_fd(), obs.ns_root.as_raw_fd(), start_file.as_raw_fd(), libc::STDERR_FILENO];
    ipc::send(preparer.as_fd(), &[&[HANDOVER_TAG], json.as_slice()].concat(), &fds).is_ok()
}

/// Whether our stderr is something nobody reads to its end (a terminal, a
/// file): a pipe or a socket held open by the preparer until the record is
/// stored would keep its reader (`$(prov run … 2>&1)`, `| tee log`, a
/// caller capturing our output) waiting as long as `prov run` used to, so
/// then `prov run` finishes the record itself.
fn stderr_awaits_no_end() -> bool {
    nix::sys::stat::fstat(std::io::stderr()).is_ok_and(|st| {
        let kind = st.st_mode & libc::S_IFMT;
        kind != libc::S_IFIFO && kind != libc::S_IFSOCK
    })
}

/// A record the preparer finishes for a `prov run` that has returned.
pub struct Finishing {
    pub ctl: OwnedFd,
    ns_root: OwnedFd,
    start: SpoolWriter,
    stderr: File,
    handover: Handover,
    pub deadline: Instant,
    /// The collector closed its control socket without `Stored`: no longer
    /// listened to; its fate decides what is said.
    pub hung_up: bool,
}

/// What the collector's next message meant for a record being finished.
pub enum Heard {
    /// Still waiting for `Stored`.
    Waiting(Finishing),
    /// Done; with the observation (control socket, namespace root, new
    /// tracker) when its collector offered it for another record.
    Done(Option<(OwnedFd, OwnedFd, OwnedFd)>),
    /// The collector hung up without `Stored`: its fate (the preparer
    /// learns it when the collector has exited) decides what is said.
    CollectorGone(Finishing),
}

impl Finishing {
    /// From a [`HANDOVER_TAG`] message; None if it is not a whole one.
    pub fn receive(msg: &[u8], fds: Vec<OwnedFd>) -> Option<Finishing> {
        let handover: Handover = serde_json::from_slice(msg.strip_prefix(&[HANDOVER_TAG])?).ok()?;
        let [ctl, ns_root, start, stderr]: [OwnedFd; 4] = fds.try_into().ok()?;
        let path = PathBuf::from(std::ffi::OsString::from_vec(handover.start_path.clone()));
        let start = SpoolWriter::adopt(File::from(start), path).ok()?;
        let deadline = Instant::now() + STORE_WAIT;
        Some(Finishing { ctl, ns_root, start, stderr: File::from(stderr), handover, deadline, hung_up: false })
    }

    /// The collector's next message (its control socket is readable).
    pub fn hear(mut self) -> Heard {
        let Ok(Some((msg, mut fds))) = ipc::recv(self.ctl.as_fd()) else { return Heard::CollectorGone(self) };
        match serde_json::from_slice::<ToCaller>(&msg) {
            Ok(ToCaller::Stored(report)) => {
                let tracker = fds.pop().filter(|_| report.reusable && fds.is_empty());
                self.stored(&report);
                let Finishing { ctl, ns_root, .. } = self;
                Heard::Done(tracker.map(|tracker| (ctl, ns_root, tracker)))
            }
            Ok(ToCaller::Begun) => {
                self.handover.begun_seen = true;
                Heard::Waiting(self)
            }
            Ok(ToCaller::Watching) => Heard::Waiting(self),
            _ => Heard::CollectorGone(self),
        }
    }

    fn stored(&mut self, report: &StoreReport) {
        match &report.lost {
            Some(lost) => self.keep_end(&outcome::lost_reason(lost)),
            None => {
                if let Some(problem) = outcome::store_problem(report) {
                    self.say(&problem);
                }
                let _ = std::fs::remove_file(self.start.path());
            }
        }
        if let Some((path, timings)) = &self.handover.bench {
            let path = Path::new(std::ffi::OsStr::from_bytes(path));
            outcome::bench_report(path, timings.clone().stored_now(), report);
        }
    }

    /// `Stored` did not come in time: the collector goes on alone.
    pub fn too_slow(self) {
        self.say(outcome::STILL_STORING);
        if self.handover.begun_seen {
            let _ = std::fs::remove_file(self.start.path());
        }
    }

    /// The collector has exited (`fate`): its last answers may still wait
    /// in the socket (`Stored`, then its exit); else it ended without
    /// storing the record.
    pub fn collector_ended(self, fate: &str) {
        let mut finishing = self;
        loop {
            let mut fds = [PollFd::new(finishing.ctl.as_fd(), PollFlags::POLLIN)];
            let waiting = matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
                && fds[0].revents().is_some_and(|r| r.contains(PollFlags::POLLIN));
            if !waiting {
                break;
            }
            match finishing.hear() {
                Heard::Waiting(next) => finishing = next,
                Heard::Done(_) => return,
                Heard::CollectorGone(next) => {
                    finishing = next;
                    break;
                }
            }
        }
        finishing.keep_end(&outcome::gone_reason(fate));
    }

    /// Keeps the end, marked incomplete with `why`, in the start file, for
    /// the next ingestion (as `prov run` keeps it in the database), and
    /// says so in one line.
    fn keep_end(&mut self, why: &str) {
        let end = CommandEnd { incomplete: Some(why.to_string()), ..self.handover.end.clone() };
        let kept = self.start.append(&SpoolEntry::End(end)).map_err(|e| e.to_string());
        self.say(&outcome::kept_end_line(why, &kept));
    }

    fn say(&self, line: &str) {
        let _ = writeln!(&self.stderr, "{line}");
    }
}

/// How long until the earliest deadline of `finishing` (None: no deadline).
pub fn next_deadline<'a>(finishing: impl Iterator<Item = &'a Finishing>) -> Option<Duration> {
    finishing.map(|f| f.deadline.saturating_duration_since(Instant::now())).min()
}
