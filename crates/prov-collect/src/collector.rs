//! The collector's main loop: one observation (one command tree), from the
//! helper's exec until the last process holding the tracker socket is gone
//! and every event is stored.

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use prov_model::writer_pipe::{SyncReport, ToWriter};
use prov_model::{CommandEnd, Completeness, FileEvent};

use crate::error::CollectorError;
use crate::fanotify::{RawEvent, Reader};
use crate::ipc;
use crate::protocol::{RecordIdentity, StoreReport, ToCaller, ToCollector, UNOBSERVED_TAG};
use crate::resolve::Resolver;
use crate::writer_link::WriterLink;

/// What the helper handed over (see suid-helper `observe`).
pub struct Handover {
    pub ctl: OwnedFd,
    pub group: OwnedFd,
    /// Held until the end: paths of events on the namespace's own mounts
    /// resolve fully only while the namespace lives.
    pub namespace: OwnedFd,
    pub ns_root: OwnedFd,
    pub tracker: OwnedFd,
    pub tracker_for_command: OwnedFd,
    /// Closing it lets the holder exit.
    pub holder_pipe: OwnedFd,
    pub holder_pid: i32,
    pub unmarked_mounts: u32,
    pub reports_fd_errors: bool,
}

/// Flush resolved events to the writer in batches of this size.
const BATCH: usize = 4096;
/// Events resolved between two reads of the kernel's queue.
const RESOLVE_CHUNK: usize = 256;
/// Rounds of read-and-resolve before control messages are looked at.
const PUMP_ROUNDS: usize = 16;
/// At most this many read events (each an open descriptor) wait to be
/// resolved, whatever RLIMIT_NOFILE allows: a few KiB of kernel memory each.
const BACKLOG_MAX: usize = 65_536;
/// A partly filled batch waits at most this long.
const IDLE_FLUSH: Duration = Duration::from_millis(200);
/// A command's start is written at the latest this long after it began.
const HOLD_BEGIN: Duration = Duration::from_secs(1);
/// After the last process is gone, the queue must stay empty this long
/// before the record is final (see `State::settle`), and at most this
/// many times that is waited.
const SETTLE_QUIET: Duration = Duration::from_millis(15);
const SETTLE_ROUNDS: usize = 20;

struct State {
    reader: Reader,
    resolver: Option<Resolver>,
    /// Until `Begin`, resolved events wait here (the writer needs the record).
    identity: Option<RecordIdentity>,
    begun: bool,
    /// The record's start, held back until the command ends, events must be
    /// stored, or HOLD_BEGIN has passed: a short command's row is written
    /// after the prompt is back, not while the command competes for the
    /// CPUs (0.4 ms of a builtin's prompt-to-prompt time on two CPUs). A
    /// record whose text is unknown and that never got an End (the shell
    /// exited) is not written at all.
    held_begin: Option<ToWriter>,
    /// When a held start with a known text is due to be written anyway, so
    /// a long-running command shows up while it runs.
    held_until: Option<Instant>,
    /// Events read from the kernel's queue, not yet resolved (all of them
    /// until `Prepare` brings the settings). The queue is read as soon as
    /// events arrive, resolving in between: for every new event the kernel
    /// compares up to 128 queued ones (to merge repeats), in the traced
    /// process's close(), so a long kernel queue slows the command (a fifth
    /// of cp's CPU when copying the kernel tree, before this).
    backlog: VecDeque<RawEvent>,
    backlog_limit: usize,
    raw: Vec<RawEvent>,
    batch: Vec<FileEvent>,
    unobserved_setuid: u64,
    unmarked_mounts: u64,
    writer: WriterLink,
}

pub fn run(h: Handover, check_access: bool) -> Result<(), CollectorError> {
    handshake(&h)?;
    // Only the command's processes may hold the tracker's other end, or its
    // hang-up would never come.
    drop(h.tracker_for_command);
    // Started after Ready, so the command does not wait for it.
    let mut st = State::new(WriterLink::start(), u64::from(h.unmarked_mounts));
    let mut observation = Observation {
        group: &h.group,
        ctl: &h.ctl,
        tracker: &h.tracker,
        ns_root: Some(h.ns_root),
        check_access,
        ctl_open: true,
        tracker_open: true,
        ended: false,
    };
    let result = observation.run(&mut st);
    if let Err(e) = &result {
        st.writer.log(format!("stopped early, the record may be incomplete or lost: {e}"));
    }
    // The namespace's root, if Prepare never took it, is closed first.
    drop(observation);
    // The writer stores what it got, then exits.
    drop(st);
    drop(h.holder_pipe);
    // The holder is our child and exits on the pipe's hang-up: reap it, so
    // no zombie is left where init does not reap (containers).
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(h.holder_pid), None);
    drop(h.namespace);
    result
}

/// Tells the caller the observation is set up, handing over the namespace's
/// root and the tracker the command's processes hold.
fn handshake(h: &Handover) -> Result<(), CollectorError> {
    let ready = ToCaller::Ready {
        holder_pid: h.holder_pid,
        unmarked_mounts: h.unmarked_mounts,
        reports_fd_errors: h.reports_fd_errors,
    };
    ipc::send_json(h.ctl.as_fd(), &ready, &[h.ns_root.as_raw_fd(), h.tracker_for_command.as_raw_fd()])
        .map_err(CollectorError::Caller)
}

/// The three sources the collector waits on and what it knows about them.
struct Observation<'a> {
    /// The fanotify group: the command's file events.
    group: &'a OwnedFd,
    /// The caller's control socket: Prepare, Begin, End.
    ctl: &'a OwnedFd,
    /// Held by every process of the command; hangs up when the last is gone.
    tracker: &'a OwnedFd,
    /// Until Prepare hands it to the resolver.
    ns_root: Option<OwnedFd>,
    check_access: bool,
    ctl_open: bool,
    tracker_open: bool,
    ended: bool,
}

/// Which sources poll() found ready.
struct ReadySources {
    events: bool,
    ctl: bool,
    tracker: bool,
}

impl Observation<'_> {
    /// The observation's loop, until the last process of the command is gone
    /// and its record is stored.
    fn run(&mut self, st: &mut State) -> Result<(), CollectorError> {
        loop {
            let busy = st.resolver.is_some() && !st.backlog.is_empty();
            let Some(ready) = self.wait(st, busy)? else { continue };
            if ready.events || busy {
                st.pump(self.group)?;
            }
            if ready.tracker {
                self.read_tracker(st);
            }
            if ready.ctl {
                self.read_control(st)?;
            }
            if !self.tracker_open && (self.ended || !self.ctl_open) {
                return self.finish(st);
            }
        }
    }

    /// Waits for a source to be ready, or until a partly filled batch or a
    /// held start is due (then written). None when interrupted by a signal.
    fn wait(&self, st: &mut State, busy: bool) -> Result<Option<ReadySources>, CollectorError> {
        let timeout = poll_timeout(st, busy);
        let mut fds = vec![PollFd::new(self.group.as_fd(), PollFlags::POLLIN)];
        if self.ctl_open {
            fds.push(PollFd::new(self.ctl.as_fd(), PollFlags::POLLIN));
        }
        if self.tracker_open {
            fds.push(PollFd::new(self.tracker.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, timeout) {
            Ok(0) if !busy => {
                st.flush();
                if st.held_until.is_some_and(|due| Instant::now() >= due) {
                    st.start_record();
                }
            }
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => return Ok(None),
            Err(e) => return Err(CollectorError::Poll(e)),
        }
        let ready = |i: usize| fds.get(i).and_then(|f| f.revents()).is_some_and(|r| !r.is_empty());
        Ok(Some(ReadySources {
            events: ready(0),
            ctl: self.ctl_open && ready(1),
            tracker: self.tracker_open && ready(if self.ctl_open { 2 } else { 1 }),
        }))
    }

    /// A message on the tracker counts a setuid program that ran unobserved;
    /// its hang-up means the command's last process is gone.
    fn read_tracker(&mut self, st: &mut State) {
        match ipc::recv(self.tracker.as_fd()) {
            Ok(Some((msg, _))) if msg.first() == Some(&UNOBSERVED_TAG) => st.unobserved_setuid += 1,
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => self.tracker_open = false,
        }
    }

    /// One control message, in the order Prepare, Begin, End; anything else
    /// ends the observation.
    fn read_control(&mut self, st: &mut State) -> Result<(), CollectorError> {
        let msg = match ipc::recv(self.ctl.as_fd()) {
            Ok(Some((msg, _))) => msg,
            Ok(None) | Err(_) => {
                self.ctl_open = false;
                return Ok(());
            }
        };
        match serde_json::from_slice::<ToCollector>(&msg) {
            Ok(ToCollector::Prepare { settings, identity }) if st.resolver.is_none() => {
                let root = self.ns_root.take().ok_or(CollectorError::Protocol("Prepare twice"))?;
                st.writer.send(ToWriter::Setup {
                    database: settings.database.clone(),
                    spool_dir: settings.spool_dir.clone(),
                    busy_timeout_ms: settings.busy_timeout_ms,
                });
                st.resolver = Some(Resolver::new(settings, self.check_access, root));
                st.identity = Some(identity);
            }
            Ok(ToCollector::Begin(start)) if !st.begun => {
                let identity = st.identity.take().ok_or(CollectorError::Protocol("Begin before Prepare"))?;
                let text_known = !start.text.is_empty();
                st.held_begin = Some(ToWriter::Begin(identity.begin(start)));
                st.begun = true;
                if text_known {
                    st.held_until = Some(Instant::now() + HOLD_BEGIN);
                }
            }
            Ok(ToCollector::End(end)) if st.begun && !self.ended => {
                self.ended = true;
                // All processes gone (`prov run` ends after its command):
                // the reply must include their last events.
                if !self.tracker_open {
                    st.settle(self.group)?;
                }
                let report = st.drain_and_sync(self.group, Some(end))?;
                let _ = ipc::send_json(self.ctl.as_fd(), &ToCaller::Stored(report), &[]);
            }
            _ => return Err(CollectorError::Protocol("out of order")),
        }
        Ok(())
    }

    /// The last process is gone: the events still queued are stored.
    fn finish(&self, st: &mut State) -> Result<(), CollectorError> {
        if st.begun {
            st.settle(self.group)?;
            st.drain_and_sync(self.group, None)?;
        }
        Ok(())
    }
}

/// How long poll() may wait: not at all while resolving, until the idle
/// flush while a batch waits, and no longer than a held start is held.
fn poll_timeout(st: &State, busy: bool) -> PollTimeout {
    let mut timeout = if busy {
        PollTimeout::ZERO
    } else if st.batch.is_empty() || !st.begun {
        PollTimeout::NONE
    } else {
        PollTimeout::try_from(IDLE_FLUSH).unwrap_or(PollTimeout::NONE)
    };
    if let Some(due) = st.held_until {
        let left = PollTimeout::try_from(due.saturating_duration_since(Instant::now())).unwrap_or(PollTimeout::ZERO);
        if timeout == PollTimeout::NONE || left < timeout {
            timeout = left;
        }
    }
    timeout
}

impl State {
    fn new(writer: WriterLink, unmarked_mounts: u64) -> State {
        let fd_budget = fd_budget();
        State {
            reader: Reader::with_fd_budget(fd_budget),
            resolver: None,
            identity: None,
            begun: false,
            held_begin: None,
            held_until: None,
            backlog: VecDeque::new(),
            backlog_limit: fd_budget.min(BACKLOG_MAX),
            raw: Vec::new(),
            batch: Vec::new(),
            unobserved_setuid: 0,
            unmarked_mounts,
            writer,
        }
    }

    /// One read() of the kernel's queue into the backlog, as far as the
    /// backlog has room; false when the queue was empty.
    fn fill(&mut self, group: &OwnedFd) -> Result<bool, CollectorError> {
        let room = self.backlog_limit.saturating_sub(self.backlog.len());
        if room == 0 {
            return Ok(true);
        }
        let more = self.reader.read(group.as_fd(), &mut self.raw, room).map_err(CollectorError::Events)?;
        self.backlog.extend(self.raw.drain(..));
        Ok(more)
    }

    /// Reads and resolves in turns, so the kernel's queue stays short.
    /// Bounded, so control messages are not starved by a flood.
    fn pump(&mut self, group: &OwnedFd) -> Result<(), CollectorError> {
        for _ in 0..PUMP_ROUNDS {
            let more = self.fill(group)?;
            if self.resolver.is_none() || self.backlog.is_empty() {
                if !more {
                    break;
                }
                continue;
            }
            self.resolve_backlog(RESOLVE_CHUNK);
        }
        Ok(())
    }

    /// Reads and resolves until the kernel's queue is empty.
    fn drain(&mut self, group: &OwnedFd) -> Result<(), CollectorError> {
        loop {
            let more = self.fill(group)?;
            if self.resolver.is_none() {
                return Ok(());
            }
            self.resolve_backlog(usize::MAX);
            if !more {
                return Ok(());
            }
        }
    }

    /// Resolves up to `max` events of the backlog, oldest first.
    fn resolve_backlog(&mut self, max: usize) {
        for _ in 0..max {
            let Some(resolver) = self.resolver.as_mut() else { return };
            let Some(ev) = self.backlog.pop_front() else { break };
            resolver.resolve(ev, &mut self.batch);
            if self.begun && self.batch.len() >= BATCH {
                self.send_batch();
            }
        }
    }

    /// Sends the resolved events, and the contents archived with them, to
    /// the writer (after the record's start).
    fn send_batch(&mut self) {
        self.start_record();
        // A full batch is likely followed by more: keep the capacity.
        let capacity = if self.batch.len() >= BATCH { BATCH } else { 0 };
        let events = std::mem::replace(&mut self.batch, Vec::with_capacity(capacity));
        self.writer.send(ToWriter::Events(events));
        let archived = self.resolver.as_mut().map(Resolver::take_archived).unwrap_or_default();
        self.writer.send_archived(archived);
    }

    /// Sends the record's start to the writer, once.
    fn start_record(&mut self) {
        self.held_until = None;
        if let Some(begin) = self.held_begin.take() {
            self.writer.send(begin);
        }
    }

    fn flush(&mut self) {
        // Contents are archived only along with an event, so an empty
        // batch has none waiting either.
        if self.begun && !self.batch.is_empty() {
            self.send_batch();
        }
    }

    fn completeness(&self) -> Completeness {
        let mut c = self.resolver.as_ref().map(|r| r.completeness).unwrap_or_default();
        c.unobserved_setuid += self.unobserved_setuid;
        c.unmarked_mounts += self.unmarked_mounts;
        c
    }

    /// Waits until the queue has been quiet for SETTLE_QUIET. The last
    /// process's exit closes the tracker and the files it left open in the
    /// same exit path, but the kernel finishes those closes (and queues
    /// their events) in an order of its own: the hang-up can come first.
    fn settle(&mut self, group: &OwnedFd) -> Result<(), CollectorError> {
        self.drain(group)?;
        for _ in 0..SETTLE_ROUNDS {
            let mut fds = [PollFd::new(group.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::try_from(SETTLE_QUIET).unwrap_or(PollTimeout::ZERO)) {
                Ok(0) => return Ok(()),
                Ok(_) => self.drain(group)?,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(CollectorError::Poll(e)),
            }
        }
        Ok(())
    }

    /// Reads everything queued so far, stores it and waits until it is
    /// stored. A writer that is gone costs the record, not a hang: the
    /// report says it is lost.
    fn drain_and_sync(&mut self, group: &OwnedFd, end: Option<CommandEnd>) -> Result<StoreReport, CollectorError> {
        self.drain(group)?;
        if end.is_none() && self.held_begin.is_some() && self.held_until.is_none() {
            // Never told what the command was, and nothing stored yet.
            return Ok(StoreReport::default());
        }
        self.start_record();
        self.flush();
        let completeness = self.completeness();
        self.writer.send(ToWriter::Completeness(completeness));
        if let Some(end) = end {
            self.writer.send(ToWriter::End(end));
        }
        let SyncReport { events, spooled, lost, cpu_ns } =
            self.writer.sync().unwrap_or_else(|e| SyncReport { lost: Some(e.to_string()), ..SyncReport::default() });
        Ok(StoreReport { events, completeness, spooled, lost, collector_cpu_ns: own_cpu_ns() + cpu_ns })
    }
}

/// CPU time of this process, all threads.
fn own_cpu_ns() -> u64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF).map_or(0, |u| {
        let ns = |t: nix::sys::time::TimeVal| t.tv_sec() as u64 * 1_000_000_000 + t.tv_usec() as u64 * 1000;
        ns(u.user_time()) + ns(u.system_time())
    })
}

/// How many event descriptors one read() may bring: the kernel opens one per
/// event, and an open that fails on RLIMIT_NOFILE loses the event.
fn fd_budget() -> usize {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap_or((1024, 1024));
    let limit = if setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() { hard } else { soft };
    // Leave room for the database, spool and our own descriptors.
    usize::try_from(limit).unwrap_or(usize::MAX).saturating_sub(128).max(16)
}
